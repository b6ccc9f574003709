/*
 * Tests of synthesize.h (synthesize.c, synthesize_canonical.c, sha256.c):
 * SHA-256 against the FIPS 180-4 vectors, the
 * canonical key (same meaning -> same key, different meaning -> different
 * key), validation errors naming their field, and the dispatcher's auto
 * policy.  Algorithms that come back are checked with the verifier.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "synthesize.h"
#include "verify.h"

/* Reasons and reports print sizes for people: exact powers stay exact, the
 * rest get a unit instead of a long number of bytes. */
START_TEST(sizes_are_written_for_people)
{
    static const struct {
        double bytes;
        const char *text;
    } cases[] = {
        {0, "0B"},           {1000, "1000B"},        {1024, "1KiB"},
        {64.0 * 1048576, "64MiB"}, {1536, "1.5KiB"}, {64.0 * 1048576 / 3, "21.33MiB"},
        {8.0 * 1073741824, "8GiB"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char buf[32];
        cs_format_size(buf, sizeof buf, cases[i].bytes);
        ck_assert_str_eq(buf, cases[i].text);
    }
}
END_TEST

START_TEST(sha256_matches_fips_vectors)
{
    char hex[65];
    synth_sha256_hex("", 0, hex);
    ck_assert_str_eq(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    synth_sha256_hex("abc", 3, hex);
    ck_assert_str_eq(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    synth_sha256_hex(two, strlen(two), hex);
    ck_assert_str_eq(hex, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    char *million = malloc(1000000);
    memset(million, 'a', 1000000);
    synth_sha256_hex(million, 1000000, hex);
    free(million);
    ck_assert_str_eq(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}
END_TEST

static cs_synth_request *parse_ok(const char *text)
{
    cs_synth_request *r = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = synth_request_parse(text, strlen(text), NULL, &r, &err);
    if (rc != CS_OK)
        ck_abort_msg("parse failed for %s: [%s] %s", text, err.field, err.message);
    return r;
}

static void expect_error(const char *text, int code, const char *field)
{
    cs_synth_request *r = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = synth_request_parse(text, strlen(text), NULL, &r, &err);
    ck_assert_msg(rc == code, "%s: expected code %d, got %d (%s)", text, code, rc, err.message);
    ck_assert_msg(strcmp(err.field, field) == 0, "%s: expected field \"%s\", got \"%s\" (%s)",
                  text, field, err.field, err.message);
    ck_assert_ptr_null(r);
}

/* A misspelled member of the request body ("colective") was reported as
 * "unknown option colective": the client looked for it under "options".
 * Members of the request are members; inside "options" they stay options;
 * both name the nearest known key when it looks like a typo. */
static void expect_message(const char *text, const char *field, const char *want,
                           const char *unwanted)
{
    cs_synth_request *r = NULL;
    cs_error err;
    cs_error_clear(&err);
    ck_assert_int_eq(synth_request_parse(text, strlen(text), NULL, &r, &err), CS_EINVAL);
    ck_assert_ptr_null(r);
    ck_assert_str_eq(err.field, field);
    ck_assert_msg(strstr(err.message, want) != NULL, "%s: %s", text, err.message);
    ck_assert_msg(!unwanted || strstr(err.message, unwanted) == NULL, "%s: %s", text,
                  err.message);
}

START_TEST(unknown_members_and_options_are_named_as_such)
{
    expect_message("{\"topology\":\"ring:4\",\"colective\":{\"kind\":\"allgather\"}}",
                   "colective", "unknown member colective: did you mean collective?",
                   "unknown option");
    expect_message("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"zzz\":1}", "zzz",
                   "unknown member zzz: a request has topology, collective",
                   "unknown option");
    expect_message("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\","
                   "\"options\":{\"chunkz\":2}}",
                   "options.chunkz", "unknown option options.chunkz: did you mean "
                   "options.chunks?", "member");
    expect_message("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\","
                   "\"options\":{\"zzz\":2}}",
                   "options.zzz", "unknown option options.zzz: not an smt option", NULL);
    expect_message("{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                   "\"options\":{\"smt\":{\"max_chunk\":2}}}",
                   "options.smt.max_chunk", "did you mean options.smt.max_chunks?", NULL);
}
END_TEST

START_TEST(key_is_stable_across_spellings)
{
    /* ring:4 as a builtin, as its expanded document with links shuffled and
     * bidirectional pairs written out, and with defaults spelled out */
    cs_synth_request *a = parse_ok("{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allgather\"},"
                                   "\"method\":\"ring\"}");
    cs_topology *t = NULL;
    ck_assert_int_eq(topology_builtin("ring:4", &t, NULL), CS_OK);
    /* write the directed links in reverse order */
    json_t *doc = json_object();
    json_object_set_new(doc, "name", json_string("ring:4"));
    json_object_set_new(doc, "ranks", json_integer(4));
    json_t *links = json_array();
    for (int i = t->nlinks - 1; i >= 0; i--)
        json_array_append_new(links, json_pack("{s:i, s:i, s:i, s:f, s:f}", "src",
                                               t->links[i].src, "dst", t->links[i].dst, "lanes",
                                               t->links[i].lanes, "gbps", t->links[i].gbps,
                                               "alpha_us", t->links[i].alpha_us));
    json_object_set_new(doc, "links", links);
    json_t *req = json_pack("{s:o, s:{s:s}, s:s, s:{s:i, s:f}}", "topology", doc, "collective",
                            "kind", "allgather", "method", "ring", "options", "chunks", 0,
                            "wait_s", 3.0);
    char *text = json_dumps(req, 0);
    cs_synth_request *b = parse_ok(text);
    free(text);
    json_decref(req);
    topology_free(t);
    ck_assert_str_eq(a->key, b->key);
    ck_assert_int_eq(strlen(a->key), 64);
    ck_assert(b->wait_s == 3.0);
    /* the key is the SHA-256 of the canonical text */
    char *canon = synth_request_canonical_text(a);
    char hex[65];
    synth_sha256_hex(canon, strlen(canon), hex);
    ck_assert_str_eq(hex, a->key);
    free(canon);
    synth_request_free(a);
    synth_request_free(b);
}
END_TEST

START_TEST(key_changes_with_meaning)
{
    const char *base = "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allgather\"},\"method\":\"smt\"}";
    const char *others[] = {
        "{\"topology\":\"ring:5\",\"collective\":{\"kind\":\"allgather\"},\"method\":\"smt\"}",
        "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allreduce\"},\"method\":\"smt\"}",
        "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allgather\"},\"method\":\"tacos\"}",
        "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allgather\"},\"method\":\"smt\",\"options\":{\"k\":1}}",
        "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"broadcast\",\"root\":1},\"method\":\"smt\"}",
        "{\"topology\":\"ring:4,gbps=10\",\"collective\":{\"kind\":\"allgather\"},\"method\":\"smt\"}",
    };
    cs_synth_request *a = parse_ok(base);
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        cs_synth_request *b = parse_ok(others[i]);
        ck_assert_msg(strcmp(a->key, b->key) != 0, "same key for %s", others[i]);
        synth_request_free(b);
    }
    /* delivery options do not change the key */
    cs_synth_request *c = parse_ok("{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allgather\"},"
                                   "\"method\":\"smt\",\"options\":{\"wait_s\":9,\"time_limit_s\":50}}");
    ck_assert_str_eq(a->key, c->key);
    synth_request_free(c);
    /* issue 12: a k left out is widened automatically, another request than
     * any fixed k, so k = 4 spelled out (the old default) keys differently */
    c = parse_ok("{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allgather\"},"
                 "\"method\":\"smt\",\"options\":{\"k\":4}}");
    ck_assert_str_ne(a->key, c->key);
    synth_request_free(c);
    /* the collective shorthand is the same request */
    cs_synth_request *d = parse_ok("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\"}");
    ck_assert_str_eq(a->key, d->key);
    synth_request_free(d);
    synth_request_free(a);
}
END_TEST

START_TEST(canonical_request_parses_to_same_key)
{
    cs_synth_request *a = parse_ok("{\"topology\":\"dgx1\",\"collective\":{\"kind\":\"allgather\"}}");
    char *canon = synth_request_canonical_text(a);
    cs_synth_request *b = parse_ok(canon);
    ck_assert_str_eq(a->key, b->key);
    ck_assert_str_eq(b->method, "auto");
    free(canon);
    synth_request_free(a);
    synth_request_free(b);
}
END_TEST

/* Issue 10's 128-node cluster: the node families lower their NVSwitch and
 * rail switches to about 8n(n + 7) links for n nodes, so the service's
 * pre-build estimate must not count every pair of 1024 ranks (1,048,576,
 * over the default 1,000,000) and refuse dgxh100:128 before building it. */
START_TEST(cluster_builtins_are_estimated_by_their_switch_links)
{
    cs_synth_limits lim;
    synth_limits_default(&lim);
    ck_assert_uint_eq(lim.max_links, 1000000);
    const char *body = "{\"topology\":\"dgxh100:128\",\"collective\":\"allgather\"}";
    cs_synth_request *r = NULL;
    cs_error err;
    int rc = synth_request_parse(body, strlen(body), &lim, &r, &err);
    ck_assert_msg(rc == CS_OK, "dgxh100:128 refused: %s", err.message);
    ck_assert_int_eq(r->topology->ranks, 1024);
    ck_assert_int_lt(r->topology->nlinks, (int)lim.max_links);
    synth_request_free(r);
    /* the estimate still refuses what really is too large: 512 nodes lower to
     * about 2.1 million links */
    cs_topology *t = NULL;
    ck_assert_int_eq(synth_builtin_checked("dgxh100:512", &lim, &t, &err), CS_ELIMIT);
    ck_assert_ptr_null(t);
    ck_assert_msg(strstr(err.message, "links") != NULL, "%s", err.message);
    lim.max_links = 100000;   /* dgxh100:128 has 137,216 */
    ck_assert_int_eq(synth_builtin_checked("dgxh100:128", &lim, &t, &err), CS_ELIMIT);
    ck_assert_ptr_null(t);
}
END_TEST

START_TEST(errors_name_their_field)
{
    expect_error("[1,2]", CS_EINVAL, "");
    expect_error("{\"collective\":{\"kind\":\"allgather\"}}", CS_EINVAL, "topology");
    expect_error("{\"topology\":\"ring:4\"}", CS_EINVAL, "collective");
    expect_error("{\"topology\":\"nosuch:4\",\"collective\":\"allgather\"}", CS_EINVAL, "topology");
    expect_error("{\"topology\":\"ring:100000000\",\"collective\":\"allgather\"}", CS_ELIMIT,
                 "topology");
    expect_error("{\"topology\":\"fc:3000\",\"collective\":\"allgather\"}", CS_ELIMIT, "topology");
    expect_error("{\"topology\":\"hypercube:40\",\"collective\":\"allgather\"}", CS_ELIMIT,
                 "topology");
    expect_error("{\"topology\":\"/etc/passwd\",\"collective\":\"allgather\"}", CS_EINVAL,
                 "topology");
    expect_error("{\"topology\":42,\"collective\":\"allgather\"}", CS_EINVAL, "topology");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"magic\"}",
                 CS_EINVAL, "method");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":7}", CS_EINVAL,
                 "method");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\","
                 "\"options\":{\"k\":\"two\"}}",
                 CS_EINVAL, "options.k");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\","
                 "\"options\":{\"k\":-1}}",
                 CS_EINVAL, "options.k");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\","
                 "\"options\":{\"max_chunks\":99999999999}}",
                 CS_EINVAL, "options.max_chunks");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\","
                 "\"options\":{\"steps\":2}}",
                 CS_EINVAL, "options.rounds");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smt\","
                 "\"options\":{\"trials\":2}}",
                 CS_EINVAL, "options.trials");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                 "\"options\":{\"k\":2}}",
                 CS_EINVAL, "options.k");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                 "\"options\":{\"smt\":{\"k\":true}}}",
                 CS_EINVAL, "options.smt.k");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                 "\"options\":{\"tacos\":{\"bytes\":-5}}}",
                 CS_EINVAL, "options.tacos.bytes");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                 "\"options\":{\"wait_s\":1e9}}",
                 CS_EINVAL, "options.wait_s");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"options\":[]}",
                 CS_EINVAL, "options");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"extra\":1}", CS_EINVAL,
                 "extra");
    /* fields inside the topology and collective keep their path */
    expect_error("{\"topology\":{\"name\":\"x\",\"ranks\":2,\"links\":[{\"src\":0,\"dst\":5}]},"
                 "\"collective\":\"allgather\"}",
                 CS_EINVAL, "topology.links[0].dst");
    cs_synth_request *r = NULL;
    cs_error err;
    const char *bad_root =
        "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"broadcast\",\"root\":9}}";
    ck_assert_int_eq(synth_request_parse(bad_root, strlen(bad_root), NULL, &r, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "collective.root");
    /* the collective parser already names the full path: not "collective.collective.*" */
    expect_error("{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"broadcast\"}}", CS_EINVAL,
                 "collective.root");
    expect_error("{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"bogus\"}}", CS_EINVAL,
                 "collective.kind");
    expect_error("{\"topology\":\"ring:4\",\"collective\":\"bogus\"}", CS_EINVAL,
                 "collective.kind");
}
END_TEST

START_TEST(limits_are_configurable)
{
    cs_synth_limits lim;
    synth_limits_default(&lim);
    lim.max_ranks = 8;
    cs_synth_request *r = NULL;
    cs_error err;
    const char *t = "{\"topology\":\"ring:16\",\"collective\":\"allgather\",\"method\":\"ring\"}";
    ck_assert_int_eq(synth_request_parse(t, strlen(t), &lim, &r, &err), CS_ELIMIT);
    ck_assert_str_eq(err.field, "topology");
    lim.max_chunks = 2;
    const char *c = "{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"ring\","
                    "\"options\":{\"chunks\":3}}";
    ck_assert_int_eq(synth_request_parse(c, strlen(c), &lim, &r, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "options.chunks");
}
END_TEST

static void verify_all(const cs_synth_request *req, const cs_result *res)
{
    ck_assert_int_ge(res->nalgs, 1);
    for (int i = 0; i < res->nalgs; i++) {
        cs_error err;
        int rc = algorithm_verify(req->topology, res->algs[i], &err);
        ck_assert_msg(rc == CS_OK, "algorithm %d fails verification: %s", i, err.message);
    }
}

START_TEST(baseline_runs_and_result_json_has_contract_fields)
{
    cs_synth_request *req = parse_ok("{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                                     "\"method\":\"ring\"}");
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(synth_run(req, NULL, NULL, &res, &err), CS_OK);
    ck_assert_str_eq(res->method, "ring");
    ck_assert_ptr_nonnull(strstr(res->reason, "ring"));
    verify_all(req, res);
    /* ring allgather on 4 ranks: 3 steps (P-1), by hand */
    ck_assert_int_eq(res->algs[0]->steps, 3);
    json_t *doc = synth_result_to_json(req, res);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "key")), req->key);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "topology")), "ring:4");
    ck_assert_ptr_nonnull(json_object_get(doc, "collective"));
    ck_assert_ptr_nonnull(json_object_get(doc, "method"));
    ck_assert(json_is_array(json_object_get(doc, "frontier")));
    ck_assert_ptr_nonnull(json_object_get(doc, "bounds"));
    ck_assert_ptr_nonnull(json_object_get(doc, "synth_seconds"));
    /* the time bound: a rank receives 3 L over its 2 links of 50 GB/s (0.5 us) */
    json_t *tb = json_object_get(json_object_get(doc, "bounds"), "time");
    ck_assert(json_is_object(tb));
    ck_assert_str_eq(json_string_value(json_object_get(tb, "kind")), "forestcoll");
    ck_assert(fabs(json_number_value(json_object_get(tb, "bandwidth_us_per_byte")) - 3 / 100e3) <
              1e-15);
    ck_assert(fabs(json_number_value(json_object_get(tb, "latency_us")) - 0.5) < 1e-12);
    /* the ring (1 chunk, one direction) at the default 64 MiB: 3 sends of
     * 0.5 + L / 50e3 us in a row, against 0.5 + 3 L / 100e3: about 1/2 */
    ck_assert_int_eq(res->algs[0]->chunks, 1);
    json_t *a0 = json_array_get(json_object_get(doc, "frontier"), 0);
    double L = 64.0 * 1048576;
    ck_assert(json_number_value(json_object_get(a0, "bound_bytes")) == L);
    double ratio = json_number_value(json_object_get(a0, "ratio_to_bound"));
    double want = (0.5 + 3 * L / 100e3) / (3 * (0.5 + L / 50e3));
    ck_assert_msg(fabs(ratio - want) < 1e-9, "ratio_to_bound %.12g, want %.12g", ratio, want);
    ck_assert(fabs(json_number_value(json_object_get(a0, "simulated_us")) -
                   3 * (0.5 + L / 50e3)) < 1e-6);
    json_decref(doc);
    result_free(res);
    synth_request_free(req);
}
END_TEST


/* Nothing to move: one rank, or a custom collective whose postcondition is
 * already in its precondition.  Every method answers at once with a complete
 * frontier of one empty, verified algorithm (0 steps, 0 rounds) and a reason
 * that says so, instead of searching (and reporting a "partial" frontier) or
 * failing. */
START_TEST(trivial_requests_are_answered_as_trivially_optimal)
{
    static const char *const requests[] = {
        "{\"topology\":{\"ranks\":1,\"links\":[]},\"collective\":\"allgather\",\"method\":\"%s\"}",
        "{\"topology\":{\"ranks\":1,\"links\":[]},\"collective\":\"allreduce\",\"method\":\"%s\"}",
        "{\"topology\":{\"ranks\":1,\"links\":[]},\"collective\":{\"kind\":\"broadcast\","
        "\"root\":0},\"method\":\"%s\"}",
        "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"custom\",\"global_chunks\":2,"
        "\"pre\":[[0,0],[1,1],[1,2]],\"post\":[[0,0],[1,2]]},\"method\":\"%s\"}",
    };
    static const char *const methods[] = {"auto", "smt", "tacos", "ring", "direct"};
    int answered = 0;
    for (size_t i = 0; i < sizeof requests / sizeof requests[0]; i++)
        for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++) {
            char text[512];
            snprintf(text, sizeof text, requests[i], methods[m]);
            cs_synth_request *req = NULL;
            cs_error err;
            cs_error_clear(&err);
            if (synth_request_parse(text, strlen(text), NULL, &req, &err) != CS_OK) {
                /* a baseline that does not implement the kind says so at parse */
                ck_assert_int_eq(err.code, CS_EUNSUPPORTED);
                continue;
            }
            ck_assert_msg(synth_request_trivial(req), "%s is trivial", text);
            cs_result *res = NULL;
            ck_assert_msg(synth_run(req, NULL, NULL, &res, &err) == CS_OK, "%s: %s", text,
                          err.message);
            ck_assert_msg(res->complete, "%s: frontier not complete", text);
            ck_assert_int_eq(res->nalgs, 1);
            ck_assert_int_eq(res->algs[0]->steps, 0);
            ck_assert_int_eq(res->algs[0]->rounds, 0);
            ck_assert_int_eq(res->algs[0]->nsends, 0);
            ck_assert_str_eq(res->algs[0]->optimality, "both");
            ck_assert_msg(strstr(res->reason, "trivial") != NULL, "reason: %s", res->reason);
            ck_assert_int_eq(res->bound_steps, 0);
            verify_all(req, res);
            /* and it survives the JSON round trip the daemon stores */
            json_t *doc = synth_result_to_json(req, res);
            cs_result *back = NULL;
            ck_assert_int_eq(result_from_json(doc, &back, &err), CS_OK);
            ck_assert(back->complete);
            ck_assert_int_eq(back->algs[0]->steps, 0);
            result_free(back);
            json_decref(doc);
            result_free(res);
            synth_request_free(req);
            answered++;
        }
    ck_assert_int_ge(answered, 15);
    /* not trivial: a custom collective with one chunk still to move */
    cs_synth_request *req = parse_ok("{\"topology\":\"ring:4\",\"collective\":{\"kind\":"
                                     "\"custom\",\"global_chunks\":1,\"pre\":[[0,0]],"
                                     "\"post\":[[0,0],[0,1]]}}");
    ck_assert(!synth_request_trivial(req));
    synth_request_free(req);
    req = parse_ok("{\"topology\":\"ring:2\",\"collective\":\"allreduce\"}");
    ck_assert(!synth_request_trivial(req));
    synth_request_free(req);
}
END_TEST

START_TEST(unsupported_baseline_is_rejected_at_parse)
{
    /* a baseline that does not implement the kind answers before any work */
    int n = 0;
    const cs_baseline_info *bl = baseline_list(&n);
    for (int i = 0; i < n; i++) {
        if (baseline_supports(bl[i].name, CS_COLL_ALLTOALL))
            continue;
        char text[256];
        snprintf(text, sizeof text,
                 "{\"topology\":\"ring:4\",\"collective\":\"alltoall\",\"method\":\"%s\"}",
                 bl[i].name);
        expect_error(text, CS_EUNSUPPORTED, "method");
        return;
    }
}
END_TEST

START_TEST(auto_picks_tacos_above_rank_limit)
{
    cs_synth_limits lim;
    synth_limits_default(&lim);
    lim.smt_max_ranks = 8;
    cs_synth_request *req = parse_ok("{\"topology\":\"ring:12\",\"collective\":\"allgather\"}");
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(synth_run(req, &lim, NULL, &res, &err), CS_OK);
    ck_assert_str_eq(res->method, "tacos");
    ck_assert_ptr_nonnull(strstr(res->reason, "12 ranks > smt limit 8"));
    /* heuristic methods still report the contract's bounds: ring:12 allgather
     * needs 6 steps (the diameter) and 11/2 rounds per chunk (11 chunks in over
     * 2 lanes), by hand */
    ck_assert_int_eq(res->bound_steps, 6);
    ck_assert(fabs(res->bound_rounds_per_chunk - 5.5) < 1e-9);
    verify_all(req, res);
    result_free(res);
    synth_request_free(req);
}
END_TEST

START_TEST(auto_picks_tacos_above_variable_limit)
{
    cs_synth_limits lim;
    synth_limits_default(&lim);
    lim.smt_max_variables = 10;
    cs_synth_request *req = parse_ok("{\"topology\":\"ring:4\",\"collective\":\"allgather\"}");
    /* estimate by hand: G = 4 ranks * 8 chunks = 32; ranks + directed links = 4 + 8 */
    ck_assert_int_eq(synth_smt_estimate_variables(req->topology, &req->collective, 8), 32 * 12);
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(synth_run(req, &lim, NULL, &res, &err), CS_OK);
    ck_assert_str_eq(res->method, "tacos");
    ck_assert_ptr_nonnull(strstr(res->reason, "smt variables"));
    result_free(res);
    synth_request_free(req);
}
END_TEST

START_TEST(auto_picks_smt_for_small_instances)
{
    cs_synth_request *req = parse_ok("{\"topology\":\"ring:4\",\"collective\":\"allgather\"}");
    cs_result *res = NULL;
    cs_error err;
    int rc = synth_run(req, NULL, NULL, &res, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_str_eq(res->method, "smt");
    ck_assert_ptr_nonnull(strstr(res->reason, "auto: 4 ranks"));
    verify_all(req, res);
    result_free(res);
    synth_request_free(req);
}
END_TEST

static void cancel_soon(void *ctx, const cs_progress_event *ev)
{
    (void)ev;
    cs_cancel_request(ctx);
}


/* DGX-2: 16 ranks on one switch, each port receives 1 chunk per round, so an
 * allgather needs R >= 15 for C = 1 at S = 1 (diameter 1): outside the default
 * class R <= S + 4.  auto widens k and finds (C,S,R) = (1,1,15) by SMT instead
 * of falling back to TACOS. */
START_TEST(auto_widens_k_for_switch_hubs)
{
    cs_synth_request *req = parse_ok("{\"topology\":\"dgx2\",\"collective\":\"allgather\"}");
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(synth_run(req, NULL, NULL, &res, &err), CS_OK);
    ck_assert_msg(strcmp(res->method, "smt") == 0, "method %s: %s", res->method, res->reason);
    ck_assert_ptr_nonnull(strstr(res->reason, "k widened from 4 to 14"));
    ck_assert_int_ge(res->nalgs, 1);
    const cs_algorithm *a = res->algs[0];
    ck_assert_int_eq(a->steps, 1);
    ck_assert_int_eq(a->rounds, 15 * a->chunks);
    verify_all(req, res);
    result_free(res);
    synth_request_free(req);
}
END_TEST

START_TEST(cancel_stops_a_run)
{
    cs_synth_request *req = parse_ok("{\"topology\":\"ring:6\",\"collective\":\"allgather\","
                                     "\"method\":\"smt\"}");
    cs_cancel *c = cs_cancel_new();
    cs_cancel_request(c);
    cs_synth_hooks h = {.progress = cancel_soon, .progress_ctx = c, .cancel = c};
    cs_result *res = NULL;
    cs_error err;
    int rc = synth_run(req, NULL, &h, &res, &err);
    /* a pre-cancelled token: either nothing ran or the search stopped at once */
    ck_assert_msg(rc == CS_ECANCELLED || (rc == CS_OK && !res->complete),
                  "rc %d (%s)", rc, err.message);
    result_free(res);
    cs_cancel_free(c);
    synth_request_free(req);
}
END_TEST


/* Issue 12: keys computed before automatic k (every canonical request then
 * held "k": 4) stay valid: the same request with k = 4 spelled out, and the
 * old canonical document itself, hash to the old key (these two keys were
 * computed by the code before the change). */
START_TEST(keys_from_before_automatic_k_stay_valid)
{
    cs_synth_request *a = parse_ok("{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allgather\"},"
                                   "\"method\":\"smt\",\"options\":{\"k\":4}}");
    ck_assert_str_eq(a->key, "55105a41f597cf54cd7992c642edf0f6dfcf8e8f8be4ddfb9caf3b6b08ef9f82");
    char *text = synth_request_canonical_text(a);
    cs_synth_request *again = parse_ok(text);
    ck_assert_str_eq(again->key, a->key);
    ck_assert_int_eq(again->smt.k, 4);
    free(text);
    synth_request_free(again);
    synth_request_free(a);
    cs_synth_request *b = parse_ok("{\"topology\":\"dgx1\",\"collective\":{\"kind\":\"allgather\"},"
                                   "\"options\":{\"smt\":{\"k\":4}}}");
    ck_assert_str_eq(b->key, "37a13f26948721e6955a00d5d97e786db60e2d81d95d3506a2b957455b618286");
    synth_request_free(b);
    /* left out: automatic, and its canonical form parses back to automatic */
    cs_synth_request *c = parse_ok("{\"topology\":\"dgx1\",\"collective\":{\"kind\":\"allgather\"}}");
    ck_assert_int_eq(c->smt.k, CS_SMT_K_AUTO);
    text = synth_request_canonical_text(c);
    ck_assert_ptr_null(strstr(text, "\"k\":"));
    again = parse_ok(text);
    ck_assert_str_eq(again->key, c->key);
    ck_assert_int_eq(again->smt.k, CS_SMT_K_AUTO);
    free(text);
    synth_request_free(again);
    synth_request_free(c);
}
END_TEST

static Suite *synthesize_suite(void)
{
    Suite *s = suite_create("synthesize");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, sha256_matches_fips_vectors);
    tcase_add_test(tc, sizes_are_written_for_people);
    tcase_add_test(tc, key_is_stable_across_spellings);
    tcase_add_test(tc, unknown_members_and_options_are_named_as_such);
    tcase_add_test(tc, key_changes_with_meaning);
    tcase_add_test(tc, canonical_request_parses_to_same_key);
    tcase_add_test(tc, errors_name_their_field);
    tcase_add_test(tc, cluster_builtins_are_estimated_by_their_switch_links);
    tcase_add_test(tc, limits_are_configurable);
    tcase_add_test(tc, baseline_runs_and_result_json_has_contract_fields);
    tcase_add_test(tc, unsupported_baseline_is_rejected_at_parse);
    tcase_add_test(tc, trivial_requests_are_answered_as_trivially_optimal);
    tcase_add_test(tc, auto_picks_tacos_above_rank_limit);
    tcase_add_test(tc, auto_picks_tacos_above_variable_limit);
    tcase_add_test(tc, auto_widens_k_for_switch_hubs);
    tcase_add_test(tc, keys_from_before_automatic_k_stay_valid);
    tcase_add_test(tc, auto_picks_smt_for_small_instances);
    tcase_add_test(tc, cancel_stops_a_run);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(synthesize_suite)
