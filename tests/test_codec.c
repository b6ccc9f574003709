/*
 * Tests of the result codec (synth/codec/): the binary form round-trips every
 * send exactly (timed or not, copies and reduces, several blocks and rank
 * groups), damage anywhere is refused with an error that says so, the
 * streamed JSON document is byte for byte what json_dumps of the DOM gives
 * (whole results, one selected algorithm, rank slices, summaries), and
 * rank-slice cursors give exactly the sends those ranks take part in.
 *
 * The reference documents come from the DOM path (synth_result_to_json +
 * json_dumps), which the daemon used before the codec: the comparison is
 * against independent code, not against the writer itself.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "result_codec.h"
#include "synthesize.h"

#define DUMP (JSON_COMPACT | CS_JSON_REAL)

/* A synthesized result from a real request (baseline, TACOS, ...). */
static void run_request(const char *text, cs_synth_request **req, cs_result **res)
{
    cs_error err;
    cs_error_clear(&err);
    ck_assert_msg(synth_request_parse(text, strlen(text), NULL, req, &err) == CS_OK, "%s",
                  err.message);
    ck_assert_msg(synth_run(*req, NULL, NULL, res, &err) == CS_OK, "%s", err.message);
}

/* The skeleton (document without sends) of res for req. */
static json_t *skeleton_of(const cs_synth_request *req, const cs_result *res)
{
    json_t *doc = synth_result_to_json_frame(req, res);
    ck_assert_ptr_nonnull(doc);
    return doc;
}

static void encode(const cs_result *res, const json_t *skel, void **blob, size_t *len)
{
    cs_error err;
    cs_error_clear(&err);
    ck_assert_msg(result_codec_encode(res, skel, blob, len, &err) == CS_OK, "%s", err.message);
    ck_assert(result_codec_is_encoded(*blob, *len));
}

static void assert_same_sends(const cs_algorithm *a, const cs_algorithm *b)
{
    ck_assert_int_eq(a->nsends, b->nsends);
    for (long i = 0; i < a->nsends; i++) {
        cs_send x = algorithm_send(a, i), y = algorithm_send(b, i);
        ck_assert_int_eq(x.chunk, y.chunk);
        ck_assert_int_eq(x.src, y.src);
        ck_assert_int_eq(x.dst, y.dst);
        ck_assert_int_eq(x.step, y.step);
        ck_assert_int_eq(x.op, y.op);
        if (isnan(x.start_us))
            ck_assert(isnan(y.start_us) && isnan(y.end_us));
        else
            ck_assert(memcmp(&x.start_us, &y.start_us, 8) == 0 &&
                      memcmp(&x.end_us, &y.end_us, 8) == 0);
    }
}

static char *writer_text(cs_result_writer *w)
{
    char *text = NULL;
    size_t len = 0;
    cs_error err;
    cs_error_clear(&err);
    ck_assert_msg(result_writer_dump(w, &text, &len, &err) == CS_OK, "%s", err.message);
    ck_assert_uint_eq(strlen(text), len);
    result_writer_free(w);
    return text;
}

/* The streamed document of view jv from the blob, and from memory. */
static char *stream_encoded(const void *blob, size_t len, const cs_json_view *jv)
{
    cs_codec_view *v = NULL;
    cs_error err;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_OK);
    cs_result_writer *w = NULL;
    ck_assert_int_eq(result_writer_open_encoded(v, jv, &w, &err), CS_OK);
    char *t = writer_text(w);
    result_codec_close(v);
    return t;
}

static char *stream_memory(const cs_result *res, const json_t *skel, const cs_json_view *jv)
{
    cs_result_writer *w = NULL;
    cs_error err;
    ck_assert_int_eq(result_writer_open_memory(res, skel, jv, &w, &err), CS_OK);
    return writer_text(w);
}

/* Whole documents: both writers equal the DOM's dump, and decoding gives
 * back every send. */
static void check_equivalence(const char *request)
{
    cs_synth_request *req = NULL;
    cs_result *res = NULL;
    run_request(request, &req, &res);
    json_t *skel = skeleton_of(req, res);
    /* the reference: the same document as a jansson DOM, sends included (the
     * time bound's own "seconds" differs between two calls, so the sends go
     * into this call's document) */
    json_t *full = json_deep_copy(skel);
    for (int i = 0; i < res->nalgs; i++) {
        json_t *ja = algorithm_to_json(res->algs[i]);
        json_object_set(json_array_get(json_object_get(full, "frontier"), (size_t)i), "sends",
                        json_object_get(ja, "sends"));
        json_decref(ja);
    }
    char *want = json_dumps(full, DUMP);
    /* ... which is synth_result_to_json's document but for that timing */
    json_t *dom = synth_result_to_json(req, res);
    json_object_del(json_object_get(json_object_get(dom, "bounds"), "time"), "seconds");
    json_t *cmp = json_deep_copy(full);
    json_object_del(json_object_get(json_object_get(cmp, "bounds"), "time"), "seconds");
    ck_assert_msg(json_equal(dom, cmp), "%s: the frame differs from the document", request);
    json_decref(dom);
    json_decref(cmp);
    void *blob;
    size_t len;
    encode(res, skel, &blob, &len);
    cs_json_view jv = CS_JSON_VIEW_FULL;
    char *got = stream_encoded(blob, len, &jv);
    ck_assert_msg(strcmp(got, want) == 0, "%s: streamed JSON differs from the DOM's", request);
    free(got);
    got = stream_memory(res, skel, &jv);
    ck_assert_msg(strcmp(got, want) == 0, "%s: in-memory stream differs", request);
    free(got);

    cs_codec_view *v = NULL;
    cs_error err;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_OK);
    cs_result *back = NULL;
    ck_assert_msg(result_codec_decode(v, &back, &err) == CS_OK, "%s", err.message);
    ck_assert_int_eq(back->nalgs, res->nalgs);
    for (int i = 0; i < res->nalgs; i++) {
        assert_same_sends(res->algs[i], back->algs[i]);
        ck_assert_int_eq(back->algs[i]->steps, res->algs[i]->steps);
        ck_assert_int_eq(back->algs[i]->rounds, res->algs[i]->rounds);
    }
    /* the decoded result writes the same document again (but for timings;
     * compared as text: its reals went through 15 digits, as any client's do) */
    json_t *again = synth_result_to_json(req, back);
    json_object_del(json_object_get(json_object_get(again, "bounds"), "time"), "seconds");
    json_t *cmp2 = json_deep_copy(full);
    json_object_del(json_object_get(json_object_get(cmp2, "bounds"), "time"), "seconds");
    char *x = json_dumps(again, DUMP), *y = json_dumps(cmp2, DUMP);
    ck_assert_msg(strcmp(x, y) == 0, "%s: the decoded result writes another document", request);
    free(x);
    free(y);
    json_decref(cmp2);
    json_decref(again);
    result_free(back);
    /* summary: the header alone */
    cs_result *sum = NULL;
    ck_assert_int_eq(result_codec_decode_summary(blob, len, &sum, &err), CS_OK);
    ck_assert_int_eq(sum->nalgs, res->nalgs);
    for (int i = 0; i < res->nalgs; i++) {
        ck_assert_int_eq(sum->algs[i]->nsends, 0);
        ck_assert_int_eq(sum->algs[i]->chunks, res->algs[i]->chunks);
        ck_assert_int_eq(result_codec_nsends(v, i), res->algs[i]->nsends);
    }
    result_free(sum);
    result_codec_close(v);
    free(blob);
    free(want);
    json_decref(full);
    json_decref(skel);
    result_free(res);
    synth_request_free(req);
}

START_TEST(stream_equals_dom_baselines_smt_tacos)
{
    check_equivalence("{\"topology\":\"ring:6\",\"collective\":\"allgather\",\"method\":\"ring\"}");
    check_equivalence("{\"topology\":\"torus2d:4x4\",\"collective\":\"allreduce\","
                      "\"method\":\"rings\"}");
    check_equivalence("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\"}");
    /* TACOS: timed sends, reals in the document */
    check_equivalence("{\"topology\":\"mesh2d:5x5\",\"collective\":\"allgather\","
                      "\"method\":\"tacos\",\"options\":{\"chunks\":2}}");
    check_equivalence("{\"topology\":\"dgx1\",\"collective\":\"reducescatter\","
                      "\"method\":\"tacos\"}");
}
END_TEST

/* A hand-built result with reals that stress the format (exponents, .0,
 * tiny and huge values) and every op. */
static cs_result *odd_result(int P, long nsends, bool timed)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "odd", P, 3, 40, &a, &err), CS_OK);
    collective_free(&c);
    static const double times[] = {0.0, 1.0, 0.1, 1e-7, 1e21, 1e22, 123456789.123456789,
                                   5e-324, 1.7976931348623157e308, 2.5e-5, 100.0, 1e15,
                                   1e16, 33.333333333333336, 7e-10};
    unsigned long long x = 88172645463325252ULL;
    for (long i = 0; i < nsends; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        int src = (int)(x % (unsigned)P), dst = (int)((x >> 20) % (unsigned)P);
        long chunk = (long)((x >> 33) % (unsigned)(3 * P));
        int step = (int)(i * 40 / (nsends ? nsends : 1));
        cs_op op = (x >> 50) & 1 ? CS_OP_REDUCE : CS_OP_COPY;
        if (timed) {
            /* the odd values, then times with a few decimals (the writer's fast path) */
            double s = times[i % 15], e = times[(i + 7) % 15];
            if (i % 3 == 1) {
                s = (double)(x % 100000000ULL) / 1000.0;
                e = s + (double)((x >> 30) % 1000ULL) / 64.0;
            } else if (i % 6 == 5) {
                /* full 53-bit mantissas across the fixed-notation range */
                s = ldexp((double)(x >> 11), -(int)(x % 90));
                e = ldexp((double)(x >> 12), -(int)((x >> 7) % 60));
            } else if (i % 3 == 2) {
                s = (double)(x % 1000000ULL) * 1e-6 - 0.25;
                e = 999999999999999.0 - (double)(x % 7ULL) / 10.0;
            }
            ck_assert_int_eq(algorithm_add_timed_send(a, chunk, src, dst, step, op, s, e), CS_OK);
        } else {
            ck_assert_int_eq(algorithm_add_send(a, chunk, src, dst, step, op), CS_OK);
        }
    }
    cs_result *r = NULL;
    ck_assert_int_eq(result_new("handmade", &r, &err), CS_OK);
    ck_assert_int_eq(result_add(r, a), CS_OK);
    snprintf(r->reason, sizeof r->reason, "a \"quoted\" reason \xc3\xa9 \\ /");
    r->bound_steps = 2;
    r->bound_rounds_per_chunk = 1.0 / 3.0;
    r->synth_seconds = 0.125;
    return r;
}

static void check_handmade(int P, long nsends, bool timed)
{
    cs_result *res = odd_result(P, nsends, timed);
    json_t *full = result_to_json(res);
    char *want = json_dumps(full, DUMP);
    cs_error err;
    json_t *skel = result_to_json_frame(res);
    void *blob;
    size_t len;
    encode(res, skel, &blob, &len);
    cs_json_view jv = CS_JSON_VIEW_FULL;
    char *got = stream_encoded(blob, len, &jv);
    ck_assert_msg(strcmp(got, want) == 0, "P=%d n=%ld timed=%d: streamed JSON differs", P,
                  nsends, timed);
    free(got);
    cs_codec_view *v = NULL;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_OK);
    cs_result *back = NULL;
    ck_assert_int_eq(result_codec_decode(v, &back, &err), CS_OK);
    assert_same_sends(res->algs[0], back->algs[0]);
    result_free(back);
    /* slices: every rank range gives exactly the sends it takes part in */
    int ranges[][2] = {{0, 0}, {P - 1, P - 1}, {P / 3, P / 2}, {0, P - 1}, {1, 2}};
    for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
        int lo = ranges[k][0], hi = ranges[k][1];
        cs_algorithm *sl = NULL;
        ck_assert_int_eq(result_codec_decode_algorithm(v, 0, lo, hi, &sl, &err), CS_OK);
        const cs_algorithm *a = res->algs[0];
        long j = 0;
        for (long i = 0; i < a->nsends; i++) {
            cs_send s = algorithm_send(a, i);
            if (!((s.src >= lo && s.src <= hi) || (s.dst >= lo && s.dst <= hi)))
                continue;
            ck_assert_int_lt(j, sl->nsends);
            cs_send t = algorithm_send(sl, j++);
            ck_assert(s.chunk == t.chunk && s.src == t.src && s.dst == t.dst &&
                      s.step == t.step && s.op == t.op);
        }
        ck_assert_int_eq(j, sl->nsends);
        algorithm_free(sl);
    }
    result_codec_close(v);
    free(blob);
    free(want);
    json_decref(full);
    json_decref(skel);
    result_free(res);
}

START_TEST(roundtrip_blocks_groups_reals)
{
    check_handmade(5, 0, false);
    check_handmade(7, 300, true);
    check_handmade(64, 1000, false);
    /* several order blocks and many rank groups */
    check_handmade(300, 3 * CS_CODEC_BLOCK_SENDS + 17, true);
    check_handmade(1000, 150000, false);
}
END_TEST

/* Views: one algorithm with extra members, a rank slice, a summary, all
 * against the DOM built the way the daemon built them before. */
START_TEST(views_selected_slice_summary)
{
    cs_synth_request *req = NULL;
    cs_result *res = NULL;
    run_request("{\"topology\":\"dgx1\",\"collective\":\"allgather\",\"method\":\"smt\"}",
                &req, &res);
    ck_assert_int_ge(res->nalgs, 2);
    json_t *skel = skeleton_of(req, res);
    json_t *full = json_deep_copy(skel);
    for (int i = 0; i < res->nalgs; i++) {
        json_t *ja = algorithm_to_json(res->algs[i]);
        json_object_set(json_array_get(json_object_get(full, "frontier"), (size_t)i), "sends",
                        json_object_get(ja, "sends"));
        json_decref(ja);
    }
    void *blob;
    size_t len;
    encode(res, skel, &blob, &len);
    cs_error err;
    for (int i = 0; i < res->nalgs; i++) {
        /* selection: frontier holds frontier[i], "selected" goes last */
        json_t *want = json_deep_copy(full);
        json_t *one = json_array();
        json_array_append(one, json_array_get(json_object_get(full, "frontier"), (size_t)i));
        json_object_set_new(want, "frontier", one);
        json_t *sel = json_pack("{s:i, s:i, s:f}", "index", i, "of", res->nalgs, "bytes", 1e6);
        json_object_set_new(want, "selected", sel);
        char *want_text = json_dumps(want, DUMP);
        char *sel_text = json_dumps(sel, DUMP);
        char extra[256];
        snprintf(extra, sizeof extra, "\"selected\":%s", sel_text);
        cs_json_view jv = CS_JSON_VIEW_FULL;
        jv.alg = i;
        jv.extra = extra;
        char *got = stream_encoded(blob, len, &jv);
        ck_assert_str_eq(got, want_text);
        free(got);
        free(sel_text);
        free(want_text);
        json_decref(want);
    }
    /* slice of rank 2: each algorithm keeps the sends rank 2 takes part in */
    json_t *want = json_deep_copy(full);
    json_t *fr = json_object_get(want, "frontier");
    for (size_t i = 0; i < json_array_size(fr); i++) {
        json_t *sends = json_object_get(json_array_get(fr, i), "sends");
        for (size_t k = json_array_size(sends); k-- > 0;) {
            json_t *s = json_array_get(sends, k);
            long src = json_integer_value(json_object_get(s, "src"));
            long dst = json_integer_value(json_object_get(s, "dst"));
            if (src != 2 && dst != 2)
                json_array_remove(sends, k);
        }
    }
    json_object_set_new(want, "slice", json_pack("{s:[i,i]}", "ranks", 2, 2));
    char *want_text = json_dumps(want, DUMP);
    cs_json_view jv = CS_JSON_VIEW_FULL;
    jv.rank_lo = jv.rank_hi = 2;
    jv.extra = "\"slice\":{\"ranks\":[2,2]}";
    char *got = stream_encoded(blob, len, &jv);
    ck_assert_str_eq(got, want_text);
    free(got);
    got = stream_memory(res, skel, &jv);
    ck_assert_str_eq(got, want_text);
    free(got);
    free(want_text);
    json_decref(want);
    /* summary: sends replaced by their count, in place */
    jv = CS_JSON_VIEW_FULL;
    jv.summary = true;
    got = stream_encoded(blob, len, &jv);
    json_t *sum = json_loads(got, 0, NULL);
    ck_assert_ptr_nonnull(sum);
    fr = json_object_get(sum, "frontier");
    ck_assert_int_eq(json_array_size(fr), res->nalgs);
    for (int i = 0; i < res->nalgs; i++) {
        json_t *a = json_array_get(fr, (size_t)i);
        ck_assert_ptr_null(json_object_get(a, "sends"));
        ck_assert_int_eq(json_integer_value(json_object_get(a, "nsends")), res->algs[i]->nsends);
    }
    ck_assert_str_eq(json_string_value(json_object_get(sum, "key")), req->key);
    json_decref(sum);
    free(got);
    /* a view naming an algorithm the result does not have */
    jv = CS_JSON_VIEW_FULL;
    jv.alg = res->nalgs;
    cs_codec_view *v = NULL;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_OK);
    cs_result_writer *w = NULL;
    ck_assert_int_eq(result_writer_open_encoded(v, &jv, &w, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "alg");
    result_codec_close(v);
    free(blob);
    json_decref(skel);
    json_decref(full);
    result_free(res);
    synth_request_free(req);
}
END_TEST

/* Damage: a flipped byte in a frame, the header, the tables; a truncated
 * blob; a future version.  Each is refused with a message saying what. */
START_TEST(damage_is_detected)
{
    cs_result *res = odd_result(40, 2 * CS_CODEC_BLOCK_SENDS + 5, true);
    cs_error err;
    json_t *skel = result_to_json_frame(res);
    void *blob;
    size_t len;
    encode(res, skel, &blob, &len);
    unsigned char *b = blob;
    cs_codec_view *v = NULL;
    /* a byte inside the first data frame, just after the header */
    size_t hlen;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_OK);
    result_codec_header(v, &hlen);
    result_codec_close(v);
    size_t frame_byte = 16 + hlen + 10;
    b[frame_byte] ^= 0x40;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_OK); /* frames checked lazily */
    cs_result *back = NULL;
    ck_assert_int_eq(result_codec_decode(v, &back, &err), CS_EIO);
    ck_assert_ptr_nonnull(strstr(err.message, "damaged"));
    ck_assert_ptr_nonnull(strstr(err.message, "checksum"));
    /* the JSON writer reports it too, instead of writing wrong sends */
    cs_result_writer *w = NULL;
    cs_json_view jv = CS_JSON_VIEW_FULL;
    ck_assert_int_eq(result_writer_open_encoded(v, &jv, &w, &err), CS_OK);
    char buf[4096];
    long n;
    while ((n = result_writer_read(w, buf, sizeof buf, &err)) > 0)
        ;
    ck_assert_int_eq(n, CS_EIO);
    result_writer_free(w);
    result_codec_close(v);
    b[frame_byte] ^= 0x40;
    /* the header */
    b[20] ^= 1;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_EIO);
    ck_assert_ptr_nonnull(strstr(err.message, "header fails its checksum"));
    b[20] ^= 1;
    /* the directory / tables (just before the footer) */
    b[len - 41] ^= 1;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_EIO);
    ck_assert_ptr_nonnull(strstr(err.message, "damaged"));
    b[len - 41] ^= 1;
    /* truncated */
    ck_assert_int_eq(result_codec_open(blob, len - 7, &v, &err), CS_EIO);
    ck_assert_ptr_nonnull(strstr(err.message, "footer"));
    ck_assert_int_eq(result_codec_open(blob, 20, &v, &err), CS_EIO);
    /* not an encoded result at all (an old JSON result) */
    ck_assert(!result_codec_is_encoded("{\"method\":\"ring\"}", 17));
    /* a newer format */
    b[4] = 9;
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_EUNSUPPORTED);
    ck_assert_ptr_nonnull(strstr(err.message, "version 9"));
    b[4] = CS_CODEC_VERSION;
    /* intact again: decodes */
    ck_assert_int_eq(result_codec_open(blob, len, &v, &err), CS_OK);
    ck_assert_int_eq(result_codec_decode(v, &back, &err), CS_OK);
    assert_same_sends(res->algs[0], back->algs[0]);
    result_free(back);
    result_codec_close(v);
    free(blob);
    json_decref(skel);
    result_free(res);
}
END_TEST

/* The skeleton must be the result's own document without sends. */
START_TEST(encode_checks_its_skeleton)
{
    cs_result *res = odd_result(4, 10, false);
    json_t *full = result_to_json(res);
    void *blob = NULL;
    size_t len = 0;
    cs_error err;
    ck_assert_int_eq(result_codec_encode(res, full, &blob, &len, &err), CS_EINTERNAL);
    ck_assert_ptr_null(blob);
    json_object_set_new(full, "frontier", json_array());
    ck_assert_int_eq(result_codec_encode(res, full, &blob, &len, &err), CS_EINTERNAL);
    json_decref(full);
    result_free(res);
}
END_TEST

static Suite *codec_suite(void)
{
    Suite *s = suite_create("codec");
    TCase *tc = tcase_create("codec");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, stream_equals_dom_baselines_smt_tacos);
    tcase_add_test(tc, roundtrip_blocks_groups_reals);
    tcase_add_test(tc, views_selected_slice_summary);
    tcase_add_test(tc, damage_is_detected);
    tcase_add_test(tc, encode_checks_its_skeleton);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(codec_suite)
