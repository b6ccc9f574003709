/*
 * Fuzzes the binary result codec (synth/codec/).  The first input byte picks
 * the mode:
 *  - even: the rest is a blob as the store could hand it back (damaged,
 *    truncated, forged).  Opening, decoding (whole, summary, per algorithm,
 *    rank slices, send cursors) and streaming its JSON document must either
 *    succeed or refuse with a message: no memory error, no undefined
 *    behaviour, no leak, no allocation beyond the RSS limit from a small blob.
 *  - odd: the rest describes a result (ranks, switch nodes, algorithms,
 *    sends, times, including times of every bit pattern); it is encoded and
 *    must decode to exactly the same sends, its streamed document must be
 *    byte for byte json_dumps of result_to_json (the DOM path the codec
 *    replaced), every rank slice must hold exactly the sends its ranks take
 *    part in, in order; then the blob is damaged at places the input names,
 *    and the damaged blob must be refused or decode to the same result
 *    ("never decoded into wrong sends", result_codec.h);
 *  - odd, and resealed: the frames of that blob are decompressed, changed
 *    where the input says, recompressed, and every offset, length and CRC
 *    made consistent again (directory fields changed too), so the decoder
 *    reads wrong data in a valid container - what the CRCs otherwise keep
 *    the first mode from reaching.  It must refuse or decode, never misbehave.
 */
#include <math.h>
#include <zlib.h>
#include <zstd.h>

#include "fuzz_common.h"
#include "result_codec.h"

#define DUMP (JSON_COMPACT | CS_JSON_REAL)

typedef struct cursor {
    const uint8_t *p;
    size_t n, i;
} cursor;

static unsigned take(cursor *c) { return c->i < c->n ? c->p[c->i++] : 0; }

static uint64_t take64(cursor *c)
{
    uint64_t x = 0;
    for (int k = 0; k < 8; k++)
        x |= (uint64_t)take(c) << (8 * k);
    return x;
}

static bool same_time(double x, double y)
{
    return (isnan(x) && isnan(y)) || memcmp(&x, &y, sizeof x) == 0;
}

static bool same_send(const cs_send *x, const cs_send *y)
{
    return x->chunk == y->chunk && x->src == y->src && x->dst == y->dst && x->step == y->step &&
           x->op == y->op && same_time(x->start_us, y->start_us) &&
           same_time(x->end_us, y->end_us);
}

static void check_same_algorithm(const cs_algorithm *a, const cs_algorithm *b, const char *what)
{
    FUZZ_CHECK(a->nsends == b->nsends && a->ranks == b->ranks &&
                   a->switch_nodes == b->switch_nodes && a->steps == b->steps &&
                   a->chunks == b->chunks,
               "%s: %ld sends %d ranks vs %ld %d", what, a->nsends, a->ranks, b->nsends,
               b->ranks);
    for (long i = 0; i < a->nsends; i++) {
        cs_send x = algorithm_send(a, i), y = algorithm_send(b, i);
        FUZZ_CHECK(same_send(&x, &y),
                   "%s: send %ld: chunk %ld %d->%d step %d op %d %.17g..%.17g vs chunk %ld "
                   "%d->%d step %d op %d %.17g..%.17g",
                   what, i, x.chunk, x.src, x.dst, x.step, x.op, x.start_us, x.end_us, y.chunk,
                   y.src, y.dst, y.step, y.op, y.start_us, y.end_us);
    }
}

/* ---- arbitrary blobs ------------------------------------------------------- */

static void exercise_view(const cs_codec_view *v)
{
    cs_error err;
    size_t hlen = 0;
    const char *h = result_codec_header(v, &hlen);
    FUZZ_CHECK(h || hlen == 0, "no header");
    int nalgs = result_codec_nalgs(v);
    FUZZ_CHECK(nalgs >= 0, "nalgs %d", nalgs);
    cs_result *res = NULL;
    cs_error_clear(&err);
    if (result_codec_decode(v, &res, &err) == CS_OK) {
        FUZZ_CHECK(res->nalgs == nalgs, "decoded %d algorithms of %d", res->nalgs, nalgs);
        for (int i = 0; i < nalgs; i++)
            FUZZ_CHECK(res->algs[i]->nsends == result_codec_nsends(v, i),
                       "algorithm %d: %ld sends decoded, %ld in the directory", i,
                       res->algs[i]->nsends, result_codec_nsends(v, i));
        result_free(res);
    } else {
        FUZZ_CHECK(err.message[0], "decode refused without a message");
    }
    for (int i = 0; i < nalgs && i < 4; i++) {
        int ranks = result_codec_ranks(v, i);
        int slices[][2] = {{-1, -1}, {0, 0}, {ranks - 1, ranks - 1}, {0, ranks / 2}};
        for (size_t k = 0; k < sizeof slices / sizeof *slices; k++) {
            cs_algorithm *a = NULL;
            cs_error_clear(&err);
            if (result_codec_decode_algorithm(v, i, slices[k][0], slices[k][1], &a, &err) ==
                CS_OK)
                algorithm_free(a);
            else
                FUZZ_CHECK(err.message[0], "decode_algorithm refused without a message");
            cs_send_cursor *c = NULL;
            if (send_cursor_open(v, i, slices[k][0], slices[k][1], &c, &err) == CS_OK) {
                cs_send buf[64];
                size_t n = 0;
                while (send_cursor_next(c, buf, 64, &n, &err) == CS_OK && n > 0)
                    continue;
                send_cursor_free(c);
            }
        }
    }
    cs_json_view views[3] = {CS_JSON_VIEW_FULL, CS_JSON_VIEW_FULL, CS_JSON_VIEW_FULL};
    views[1].summary = true;
    views[2].alg = 0;
    views[2].rank_lo = 0;
    views[2].rank_hi = 1;
    for (int k = 0; k < 3; k++) {
        cs_result_writer *w = NULL;
        cs_error_clear(&err);
        if (result_writer_open_encoded(v, &views[k], &w, &err) != CS_OK) {
            FUZZ_CHECK(err.message[0], "writer refused without a message");
            continue;
        }
        char buf[4096];
        long got;
        while ((got = result_writer_read(w, buf, sizeof buf, &err)) > 0)
            continue;
        FUZZ_CHECK(got == 0 || err.message[0], "writer failed without a message");
        result_writer_free(w);
    }
}

static void fuzz_blob(const uint8_t *data, size_t size)
{
    /* a copy of exactly `size` bytes: ASan sees every read past the end */
    uint8_t *blob = malloc(size ? size : 1);
    if (!blob)
        abort();
    memcpy(blob, data, size);
    (void)result_codec_is_encoded(blob, size);
    cs_error err;
    cs_error_clear(&err);
    cs_result *sum = NULL;
    if (result_codec_decode_summary(blob, size, &sum, &err) == CS_OK)
        result_free(sum);
    else
        FUZZ_CHECK(err.message[0], "decode_summary refused without a message");
    cs_codec_view *v = NULL;
    cs_error_clear(&err);
    if (result_codec_open(blob, size, &v, &err) == CS_OK) {
        exercise_view(v);
        result_codec_close(v);
    } else {
        FUZZ_CHECK(err.message[0], "open refused without a message");
    }
    free(blob);
}

/* ---- round trips ------------------------------------------------------------- */

static double take_time(cursor *c)
{
    unsigned kind = take(c) % 8;
    switch (kind) {
    case 0: return NAN;
    case 1: { /* any bit pattern: infinities, NaNs with payloads, subnormals, -0 */
        uint64_t bits = take64(c);
        double d;
        memcpy(&d, &bits, sizeof d);
        return d;
    }
    case 2: return (double)take(c) / 8.0;
    case 3: return (double)(take(c) | take(c) << 8) * 1e-3;
    default: return (double)(take(c) | take(c) << 8 | take(c) << 16) / 64.0;
    }
}

static cs_result *build_result(cursor *c)
{
    cs_error err;
    cs_result *r = NULL;
    if (result_new("fuzz", &r, &err) != CS_OK)
        abort();
    unsigned h = take(c);
    int P = 1 + (int)(take(c) % 40);
    int nalgs = 1 + (int)(h % 3);
    for (int k = 0; k < nalgs; k++) {
        cs_collective col;
        collective_init(&col, (h >> 2) & 1 ? CS_COLL_ALLREDUCE : CS_COLL_ALLGATHER, -1);
        int chunks = 1 + (int)(take(c) % 4);
        int steps = 1 + (int)(take(c) % 50);
        cs_algorithm *a = NULL;
        if (algorithm_new(&col, "fuzz", P, chunks, steps, &a, &err) != CS_OK)
            abort();
        collective_free(&col);
        unsigned flags = take(c);
        a->switch_nodes = (int)(flags % 3);
        int nodes = P + a->switch_nodes;
        /* up to about a thousand sends: results of several order blocks and
         * rank groups (CS_CODEC_BLOCK_SENDS) take seconds each here and
         * crowded out everything else; test_codec's
         * roundtrip_blocks_groups_reals covers them */
        long n = (long)take(c) * 4;
        bool timed = flags & 0x20, mixed = flags & 0x40;
        fuzz_rng rng = {0x9e3779b97f4a7c15ull ^ (uint64_t)take(c) << 8 ^ (uint64_t)k};
        for (long i = 0; i < n; i++) {
            /* the input's bytes while they last, then a generator */
            bool own = c->i + 6 < c->n;
            long chunk = own ? (long)take(c) % (long)(a->global_chunks + 2)
                             : (long)fuzz_next(&rng, (unsigned)a->global_chunks);
            int src = own ? (int)(take(c) % (unsigned)nodes) : (int)fuzz_next(&rng, (unsigned)nodes);
            int dst = own ? (int)(take(c) % (unsigned)nodes) : (int)fuzz_next(&rng, (unsigned)nodes);
            int step = own ? (int)(take(c) % (unsigned)steps)
                           : (int)((long)steps * i / (n ? n : 1));
            cs_op op = (own ? take(c) : fuzz_next(&rng, 2)) & 1 ? CS_OP_REDUCE : CS_OP_COPY;
            int rc;
            if (timed && (!mixed || (own ? take(c) : fuzz_next(&rng, 2)) & 1)) {
                double s = own ? take_time(c) : (double)i, e = own ? take_time(c) : i + 0.5;
                rc = algorithm_add_timed_send(a, chunk, src, dst, step, op, s, e);
            } else {
                rc = algorithm_add_send(a, chunk, src, dst, step, op);
            }
            if (rc != CS_OK)
                abort();
        }
        if (result_add(r, a) != CS_OK)
            abort();
    }
    snprintf(r->reason, sizeof r->reason, "fuzz \"%u\" \xc3\xa9", h);
    r->bound_steps = (int)(h % 7);
    r->bound_rounds_per_chunk = (double)h / 3.0;
    r->synth_seconds = 0.25;
    return r;
}

static void check_slices(const cs_codec_view *v, const cs_result *res)
{
    cs_error err;
    for (int k = 0; k < res->nalgs; k++) {
        const cs_algorithm *a = res->algs[k];
        int nodes = a->ranks + a->switch_nodes;
        int ranges[][2] = {{0, 0}, {nodes - 1, nodes - 1}, {nodes / 3, nodes / 2}, {0, nodes - 1}};
        for (size_t q = 0; q < sizeof ranges / sizeof *ranges; q++) {
            int lo = ranges[q][0], hi = ranges[q][1];
            cs_algorithm *sl = NULL;
            FUZZ_CHECK(result_codec_decode_algorithm(v, k, lo, hi, &sl, &err) == CS_OK,
                       "slice %d..%d of algorithm %d: %s", lo, hi, k, err.message);
            long j = 0;
            for (long i = 0; i < a->nsends; i++) {
                cs_send s = algorithm_send(a, i);
                if (!((s.src >= lo && s.src <= hi) || (s.dst >= lo && s.dst <= hi)))
                    continue;
                FUZZ_CHECK(j < sl->nsends, "slice %d..%d: too few sends", lo, hi);
                cs_send t = algorithm_send(sl, j++);
                FUZZ_CHECK(same_send(&s, &t), "slice %d..%d: send %ld differs", lo, hi, i);
            }
            FUZZ_CHECK(j == sl->nsends, "slice %d..%d: %ld sends, want %ld", lo, hi,
                       sl->nsends, j);
            algorithm_free(sl);
        }
    }
}

static char *stream(const cs_codec_view *v, cs_error *err)
{
    cs_json_view jv = CS_JSON_VIEW_FULL;
    cs_result_writer *w = NULL;
    if (result_writer_open_encoded(v, &jv, &w, err) != CS_OK)
        return NULL;
    char *text = NULL;
    size_t len = 0;
    int rc = result_writer_dump(w, &text, &len, err);
    result_writer_free(w);
    return rc == CS_OK ? text : NULL;
}

/* ---- resealed blobs (the container layout of result_codec.c) ---------------- */

#define FOOTER_LEN 40
#define DIR_ENTRY_LEN 48
#define BLOCK_ENTRY_LEN 32
#define GROUP_ENTRY_LEN 40

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static void set32(uint8_t *p, uint32_t v)
{
    for (int k = 0; k < 4; k++)
        p[k] = (uint8_t)(v >> (8 * k));
}
static void set64(uint8_t *p, uint64_t v)
{
    set32(p, (uint32_t)v);
    set32(p + 4, (uint32_t)(v >> 32));
}
static uint32_t crc_of(const uint8_t *p, size_t n) { return (uint32_t)crc32(0L, p, (uInt)n); }

/* blob (from result_codec_encode, so well formed) with its frames' raw bytes
 * and some directory fields changed where the input says, everything
 * resealed.  NULL when the input asks for nothing. */
static uint8_t *reseal(const uint8_t *blob, size_t len, cursor *c, size_t *out_len)
{
    const uint8_t *f = blob + len - FOOTER_LEN;
    size_t hend = (size_t)get64(f) + get32(f + 8);
    size_t dir_off = (size_t)get64(f + 16), dir_len = get32(f + 24);
    uint32_t nalgs = get32(blob + dir_off);
    fuzz_buf out = {0};
    fuzz_buf_add(&out, blob, hend);
    uint8_t *dir = malloc(dir_len);
    if (!dir)
        abort();
    memcpy(dir, blob + dir_off, dir_len);
    fuzz_buf tables = {0};
    fuzz_buf_add(&tables, "", 0);
    unsigned changes = 1 + take(c) % 6;
    for (uint32_t a = 0; a < nalgs; a++) {
        uint8_t *de = dir + 4 + (size_t)a * DIR_ENTRY_LEN;
        uint32_t nblocks = get32(de + 16), ngroups = get32(de + 20);
        const uint8_t *tab = blob + get64(de + 24);
        size_t tab_start = tables.n;
        for (uint32_t k = 0; k < nblocks + ngroups; k++) {
            size_t elen = k < nblocks ? BLOCK_ENTRY_LEN : GROUP_ENTRY_LEN;
            const uint8_t *te = k < nblocks ? tab + (size_t)k * BLOCK_ENTRY_LEN
                                            : tab + (size_t)nblocks * BLOCK_ENTRY_LEN +
                                                  (size_t)(k - nblocks) * GROUP_ENTRY_LEN;
            uint8_t e[GROUP_ENTRY_LEN];
            memcpy(e, te, elen);
            size_t raw_len = get32(e + 12);
            uint8_t *raw = malloc(raw_len + 16);
            if (!raw)
                abort();
            size_t got = ZSTD_decompress(raw, raw_len, blob + get64(e), get32(e + 8));
            FUZZ_CHECK(!ZSTD_isError(got) && got == raw_len, "frame %u of algorithm %u", k, a);
            /* the raw bytes: flips, a cut, or bytes added */
            unsigned what = take(c);
            for (unsigned m = 0; raw_len && m < (what & 3); m++)
                raw[(take(c) | take(c) << 8) % raw_len] ^= (uint8_t)(take(c) | 1);
            if (what & 4)
                raw_len -= raw_len ? take(c) % (raw_len + 1) : 0;
            else if (what & 8)
                for (unsigned m = 0; m < 16; m++)
                    raw[raw_len++] = (uint8_t)take(c);
            if (what & 16) { /* the entry's own fields: nsends, a group's rank range */
                static const int at[] = {16, 24, 28};
                int k2 = at[elen == GROUP_ENTRY_LEN ? take(c) % 3 : 0];
                set32(e + k2, get32(e + k2) ^ (uint32_t)(take(c) | take(c) << 8));
            }
            size_t bound = ZSTD_compressBound(raw_len);
            uint8_t *z = malloc(bound);
            if (!z)
                abort();
            size_t zl = ZSTD_compress(z, bound, raw, raw_len, 1);
            FUZZ_CHECK(!ZSTD_isError(zl), "recompress");
            set64(e, out.n);
            set32(e + 8, (uint32_t)zl);
            set32(e + 12, (uint32_t)raw_len);
            set32(e + 20, crc_of(z, zl));
            fuzz_buf_add(&out, z, zl);
            fuzz_buf_add(&tables, e, elen);
            free(z);
            free(raw);
        }
        /* the table's place and CRC are fixed below, once the frames are out */
        set64(de + 24, tab_start);
    }
    /* directory fields: sends, flags, ranks, counts, switch nodes */
    static const int fields[] = {0, 8, 12, 16, 20, 36};
    while (changes-- && nalgs) {
        unsigned which = take(c);
        if (!(which & 1))
            continue;
        uint8_t *de = dir + 4 + (size_t)(take(c) % nalgs) * DIR_ENTRY_LEN;
        int at = fields[take(c) % 6];
        set32(de + at, get32(de + at) ^ (uint32_t)(take(c) | take(c) << 8 | take(c) << 24));
    }
    size_t tabs_at = out.n;
    fuzz_buf_add(&out, tables.p, tables.n);
    for (uint32_t a = 0; a < nalgs; a++) {
        uint8_t *de = dir + 4 + (size_t)a * DIR_ENTRY_LEN;
        size_t at = (size_t)get64(de + 24);
        size_t tlen = (size_t)get32(de + 16) * BLOCK_ENTRY_LEN +
                      (size_t)get32(de + 20) * GROUP_ENTRY_LEN;
        set64(de + 24, tabs_at + at);
        if (at + tlen <= tables.n)
            set32(de + 32, crc_of((const uint8_t *)tables.p + at, tlen));
    }
    size_t new_dir = out.n;
    fuzz_buf_add(&out, dir, dir_len);
    uint8_t foot[FOOTER_LEN];
    memcpy(foot, f, FOOTER_LEN);
    set64(foot + 16, new_dir);
    set32(foot + 28, crc_of(dir, dir_len));
    fuzz_buf_add(&out, foot, FOOTER_LEN);
    free(dir);
    free(tables.p);
    *out_len = out.n;
    return (uint8_t *)out.p;
}

static void fuzz_roundtrip(cursor *c)
{
    cs_result *res = build_result(c);
    json_t *skel = result_to_json_frame(res);
    json_t *full = result_to_json(res);
    FUZZ_CHECK(skel && full, "result_to_json failed");
    char *want = json_dumps(full, DUMP);
    json_decref(full);
    void *blob = NULL;
    size_t len = 0;
    cs_error err;
    cs_error_clear(&err);
    FUZZ_CHECK(result_codec_encode(res, skel, &blob, &len, &err) == CS_OK, "encode: %s",
               err.message);
    FUZZ_CHECK(result_codec_is_encoded(blob, len), "not recognized as encoded");
    cs_codec_view *v = NULL;
    FUZZ_CHECK(result_codec_open(blob, len, &v, &err) == CS_OK, "open: %s", err.message);
    cs_result *back = NULL;
    FUZZ_CHECK(result_codec_decode(v, &back, &err) == CS_OK, "decode: %s", err.message);
    FUZZ_CHECK(back->nalgs == res->nalgs, "%d algorithms back of %d", back->nalgs, res->nalgs);
    for (int k = 0; k < res->nalgs; k++)
        check_same_algorithm(res->algs[k], back->algs[k], "round trip");
    result_free(back);
    char *got = stream(v, &err);
    FUZZ_CHECK(got, "stream: %s", err.message);
    FUZZ_CHECK(want && !strcmp(got, want), "streamed document differs from the DOM's:\n%s\n%s",
               got, want ? want : "(null)");
    check_slices(v, res);
    result_codec_close(v);

    /* damage: up to 4 bytes changed where the input says */
    unsigned ndamage = 1 + take(c) % 4;
    uint8_t *bad = malloc(len);
    if (!bad)
        abort();
    memcpy(bad, blob, len);
    for (unsigned d = 0; d < ndamage; d++) {
        size_t at = (size_t)(take(c) | take(c) << 8 | take(c) << 16) % len;
        bad[at] ^= (uint8_t)(take(c) | 1);
    }
    size_t badlen = take(c) % 4 == 0 ? len - (take(c) % len) : len; /* truncated too */
    cs_codec_view *bv = NULL;
    if (result_codec_open(bad, badlen, &bv, &err) == CS_OK) {
        cs_result *dr = NULL;
        if (result_codec_decode(bv, &dr, &err) == CS_OK) {
            FUZZ_CHECK(dr->nalgs == res->nalgs, "damaged blob decoded to %d algorithms of %d",
                       dr->nalgs, res->nalgs);
            for (int k = 0; k < res->nalgs; k++)
                check_same_algorithm(res->algs[k], dr->algs[k], "damaged blob decoded");
            result_free(dr);
        }
        char *bt = stream(bv, &err);
        FUZZ_CHECK(!bt || !strcmp(bt, want), "damaged blob streamed a different document");
        free(bt);
        result_codec_close(bv);
    }
    free(bad);

    /* wrong data in a valid container */
    if (take(c) & 1) {
        size_t rlen = 0;
        uint8_t *re = reseal(blob, len, c, &rlen);
        cs_codec_view *rv = NULL;
        cs_error_clear(&err);
        if (result_codec_open(re, rlen, &rv, &err) == CS_OK) {
            exercise_view(rv);
            result_codec_close(rv);
        } else {
            FUZZ_CHECK(err.message[0], "open refused without a message");
        }
        free(re);
    }
    free(got);
    free(want);
    free(blob);
    json_decref(skel);
    result_free(res);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1) {
        cursor c = {data + 1, size - 1, 0};
        fuzz_roundtrip(&c);
    } else {
        fuzz_blob(data + 1, size - 1);
    }
    return 0;
}
