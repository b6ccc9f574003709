/*
 * result_codec.c - the binary form of a result (see result_codec.h for the
 * layout and why): encoding, the view over an encoded blob, full and
 * per-algorithm decoding, and send cursors over order blocks and rank groups.
 *
 * Columns of a frame (each prefixed by its byte length in the frame's column
 * table, so a decoder finds them without scanning):
 *   step            zigzag varint of the delta to the previous send's step
 *   src             zigzag varint delta to the previous src
 *   dst             zigzag varint of dst - src (neighbours are close in rank)
 *   chunk           zigzag varint delta to the previous chunk
 *   op              one bit per send (1 = reduce)
 *   start, end      (timed algorithms) IEEE bits XOR the previous start (end:
 *                   XOR this send's start), as 8 byte planes each, so the
 *                   equal high bytes of nearby times become runs of zeros
 *   index           (rank groups) varint delta to the previous send's index
 * Deltas run within one frame, so every frame decodes on its own.
 */
#include "result_codec.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "codec_internal.h"

#define MAGIC "CSRC"
#define PREFIX_LEN 16
#define FOOTER_LEN 40
#define DIR_ENTRY_LEN 48
#define BLOCK_ENTRY_LEN 32
#define GROUP_ENTRY_LEN 40
#define ZSTD_LEVEL 3
#define ALG_TIMED 1u

enum { COL_STEP = 0, COL_SRC, COL_DST, COL_CHUNK, COL_OP, COL_START, COL_END, COL_INDEX,
       NCOLS };

/* ---- little-endian fields ----------------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    memcpy(p, &v, 8);
#else
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
#endif
}

static uint32_t get_u32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_u64(const unsigned char *p)
{
    return (uint64_t)get_u32(p) | (uint64_t)get_u32(p + 4) << 32;
}

static uint32_t crc(const void *p, size_t n)
{
    uLong c = crc32(0L, Z_NULL, 0);
    const unsigned char *b = p;
    while (n > 0) {
        uInt k = n > (1u << 30) ? (1u << 30) : (uInt)n;
        c = crc32(c, b, k);
        b += k;
        n -= k;
    }
    return (uint32_t)c;
}

/* ---- growable byte buffers ---------------------------------------------------------- */

int bytebuf_reserve(bytebuf *b, size_t more)
{
    if (b->len + more <= b->cap)
        return CS_OK;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more)
        cap *= 2;
    unsigned char *d = realloc(b->data, cap);
    if (!d)
        return CS_ENOMEM;
    b->data = d;
    b->cap = cap;
    return CS_OK;
}

int bytebuf_put(bytebuf *b, const void *p, size_t n)
{
    if (bytebuf_reserve(b, n))
        return CS_ENOMEM;
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    return CS_OK;
}

void bytebuf_free(bytebuf *b)
{
    free(b->data);
    memset(b, 0, sizeof *b);
}

static inline uint64_t zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* ---- frames: building ------------------------------------------------------------------ */

typedef struct frame_builder {
    bytebuf col[NCOLS];
    bool timed, indexed;
    long n;
    int64_t prev_step, prev_src, prev_chunk, prev_index;
    uint64_t prev_start;
} frame_builder;

static void fb_reset(frame_builder *f)
{
    for (int c = 0; c < NCOLS; c++)
        f->col[c].len = 0;
    f->n = 0;
    f->prev_step = f->prev_src = f->prev_chunk = f->prev_index = 0;
    f->prev_start = 0;
}

static void fb_free(frame_builder *f)
{
    for (int c = 0; c < NCOLS; c++)
        bytebuf_free(&f->col[c]);
}

static uint64_t dbits(double d)
{
    uint64_t u;
    memcpy(&u, &d, sizeof u);
    return u;
}

static double bitsd(uint64_t u)
{
    double d;
    memcpy(&d, &u, sizeof d);
    return d;
}

/* Room in every column for k more sends, so fb_add writes without checks:
 * a frame's columns are reserved once (a few MB at most: frames are bounded). */
static int fb_reserve(frame_builder *f, long k)
{
    /* every varint is at most 5 bytes: the columns hold 32-bit values, so a
     * zigzagged difference has at most 33 significant bits */
    size_t m = (size_t)(k > 0 ? k : 1);
    int rc = bytebuf_reserve(&f->col[COL_STEP], 5 * m) | bytebuf_reserve(&f->col[COL_SRC], 5 * m) |
             bytebuf_reserve(&f->col[COL_DST], 5 * m) | bytebuf_reserve(&f->col[COL_CHUNK], 5 * m) |
             bytebuf_reserve(&f->col[COL_OP], m / 8 + 2);
    if (f->timed)
        rc |= bytebuf_reserve(&f->col[COL_START], 8 * m) | bytebuf_reserve(&f->col[COL_END], 8 * m);
    if (f->indexed)
        rc |= bytebuf_reserve(&f->col[COL_INDEX], 5 * m);
    return rc ? CS_ENOMEM : CS_OK;
}

static inline void vput(bytebuf *b, uint64_t v)
{
    unsigned char *p = b->data + b->len;
    while (v >= 0x80) {
        *p++ = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    *p++ = (unsigned char)v;
    b->len = (size_t)(p - b->data);
}

/* Appends one send; the columns must have room (fb_reserve). */
static inline void fb_add(frame_builder *f, const cs_send *s, long index)
{
    vput(&f->col[COL_STEP], zigzag((int64_t)s->step - f->prev_step));
    vput(&f->col[COL_SRC], zigzag((int64_t)s->src - f->prev_src));
    vput(&f->col[COL_DST], zigzag((int64_t)s->dst - (int64_t)s->src));
    vput(&f->col[COL_CHUNK], zigzag((int64_t)s->chunk - f->prev_chunk));
    bytebuf *op = &f->col[COL_OP];
    if (f->n % 8 == 0)
        op->data[op->len++] = 0;
    if (s->op == CS_OP_REDUCE)
        op->data[op->len - 1] |= (unsigned char)(1u << (f->n % 8));
    if (f->timed) {
        /* native words here; fb_flush cuts them into little-endian byte planes */
        uint64_t st = dbits(s->start_us), en = dbits(s->end_us);
        uint64_t xs = st ^ f->prev_start, xe = en ^ st;
        memcpy(f->col[COL_START].data + f->col[COL_START].len, &xs, 8);
        memcpy(f->col[COL_END].data + f->col[COL_END].len, &xe, 8);
        f->col[COL_START].len += 8;
        f->col[COL_END].len += 8;
        f->prev_start = st;
    }
    if (f->indexed)
        vput(&f->col[COL_INDEX], (uint64_t)(index - f->prev_index));
    f->prev_step = s->step;
    f->prev_src = s->src;
    f->prev_chunk = s->chunk;
    f->prev_index = index;
    f->n++;
}

/* Rows r[0..7] of an 8x8 byte matrix (byte k of r[j] is (r[j] >> 8k) & 0xff)
 * transposed in place: afterwards byte j of r[k] is what was byte k of r[j].
 * Three rounds of swapping 4-, 2- and 1-byte blocks. */
static inline void transpose_8x8(uint64_t r[8])
{
    for (int j = 0; j < 4; j++) {
        uint64_t a = r[j], b = r[j + 4];
        r[j] = (a & 0x00000000FFFFFFFFULL) | (b << 32);
        r[j + 4] = (a >> 32) | (b & 0xFFFFFFFF00000000ULL);
    }
    for (int j = 0; j < 8; j += 4)
        for (int q = 0; q < 2; q++) {
            uint64_t a = r[j + q], b = r[j + q + 2];
            r[j + q] = (a & 0x0000FFFF0000FFFFULL) | ((b & 0x0000FFFF0000FFFFULL) << 16);
            r[j + q + 2] = ((a >> 16) & 0x0000FFFF0000FFFFULL) | (b & 0xFFFF0000FFFF0000ULL);
        }
    for (int j = 0; j < 8; j += 2) {
        uint64_t a = r[j], b = r[j + 1];
        r[j] = (a & 0x00FF00FF00FF00FFULL) | ((b & 0x00FF00FF00FF00FFULL) << 8);
        r[j + 1] = ((a >> 8) & 0x00FF00FF00FF00FFULL) | (b & 0xFF00FF00FF00FF00ULL);
    }
}

/* n native 64-bit words -> 8 planes, plane k holding byte k (little-endian
 * order) of every word, so the planes are the same on any host: 8 words at a
 * time as an 8x8 byte transpose (one 8-byte store per plane). */
static void transpose8(const unsigned char *in, unsigned char *out, size_t n)
{
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t r[8];
        memcpy(r, in + 8 * i, sizeof r);
        transpose_8x8(r);
        for (int k = 0; k < 8; k++)
            put_u64(out + (size_t)k * n + i, r[k]);
    }
    for (; i < n; i++) {
        uint64_t w;
        memcpy(&w, in + 8 * i, 8);
        for (int k = 0; k < 8; k++)
            out[(size_t)k * n + i] = (unsigned char)(w >> (8 * k));
    }
}

static void untranspose8(const unsigned char *in, unsigned char *out, size_t n)
{
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 8; k++)
            out[8 * i + (size_t)k] = in[(size_t)k * n + i];
}

/* The frame's raw bytes (column table, then the columns) compressed and
 * appended to data; fills the entry's offset, lengths and CRC. */
typedef struct frame_entry {
    uint64_t offset;
    uint32_t comp_len, raw_len, nsends, crc;
    uint32_t rank_lo, rank_hi;   /* groups only */
} frame_entry;

typedef struct encoder {
    ZSTD_CCtx *cctx;
    bytebuf raw, scratch;
    bytebuf *out;
} encoder;

static int fb_flush(encoder *e, frame_builder *f, frame_entry *fe, cs_error *err)
{
    bytebuf *raw = &e->raw;
    raw->len = 0;
    unsigned char table[4 * NCOLS];
    for (int c = 0; c < NCOLS; c++)
        put_u32(table + 4 * c, (uint32_t)f->col[c].len);
    if (bytebuf_put(raw, table, sizeof table))
        return cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
    for (int c = 0; c < NCOLS; c++) {
        if ((c == COL_START || c == COL_END) && f->col[c].len > 0) {
            if (bytebuf_reserve(raw, f->col[c].len))
                return cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
            transpose8(f->col[c].data, raw->data + raw->len, (size_t)f->n);
            raw->len += f->col[c].len;
        } else if (bytebuf_put(raw, f->col[c].data, f->col[c].len)) {
            return cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        }
    }
    if (raw->len > UINT32_MAX)
        return cs_error_set(err, CS_EINTERNAL, "", "a frame of %zu bytes is too large",
                            raw->len);
    size_t bound = ZSTD_compressBound(raw->len);
    if (bytebuf_reserve(e->out, bound))
        return cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
    size_t z = ZSTD_compress2(e->cctx, e->out->data + e->out->len, bound, raw->data, raw->len);
    if (ZSTD_isError(z))
        return cs_error_set(err, CS_EINTERNAL, "", "zstd: %s", ZSTD_getErrorName(z));
    fe->offset = e->out->len;
    fe->comp_len = (uint32_t)z;
    fe->raw_len = (uint32_t)raw->len;
    fe->nsends = (uint32_t)f->n;
    fe->crc = crc(e->out->data + e->out->len, z);
    e->out->len += z;
    return CS_OK;
}

/* ---- encoding --------------------------------------------------------------------------- */

typedef struct alg_tables {
    long nblocks, ngroups;
    frame_entry *blocks, *groups;
} alg_tables;

static int encode_blocks(encoder *e, const cs_algorithm *a, bool timed, alg_tables *t,
                         cs_error *err)
{
    long n = a->nsends;
    t->nblocks = (n + CS_CODEC_BLOCK_SENDS - 1) / CS_CODEC_BLOCK_SENDS;
    t->blocks = calloc((size_t)(t->nblocks ? t->nblocks : 1), sizeof *t->blocks);
    if (!t->blocks)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
    frame_builder f = {.timed = timed};
    int rc = CS_OK;
    for (long b = 0; b < t->nblocks && !rc; b++) {
        fb_reset(&f);
        long end = (b + 1) * CS_CODEC_BLOCK_SENDS < n ? (b + 1) * CS_CODEC_BLOCK_SENDS : n;
        if (fb_reserve(&f, end - b * CS_CODEC_BLOCK_SENDS)) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
            break;
        }
        for (long i = b * CS_CODEC_BLOCK_SENDS; i < end; i++) {
            cs_send s = algorithm_send(a, i);
            fb_add(&f, &s, i);
        }
        if (!rc)
            rc = fb_flush(e, &f, &t->blocks[b], err);
    }
    fb_free(&f);
    return rc;
}

/* Groups: consecutive ranks until their sends reach CS_CODEC_GROUP_SENDS.
 * Memory is bounded by the size of a pass, not of the algorithm: a pass
 * builds the frames of the groups whose entries (a send counts once per
 * group it belongs to) fit a budget, in one sequential scan that decodes
 * only the sends of those groups, then compresses and frees them.  The budget
 * is a sixteenth of all entries (at least GROUP_PASS_MIN), so there are about
 * 16 scans whatever the size and the raw columns of a pass (reserved at 42
 * bytes per entry, the worst case) take at most about 5 bytes per send.  Before, a fixed budget of 4M entries made the scans grow with
 * the square of the size (50 at 100M sends), each decoding every send in
 * full; gathering a group's sends by a 4-byte index instead (one scan, then
 * random reads) cost a cache miss per field and was slower still. */
#define GROUP_PASS_MIN (128L << 10)

static int encode_groups(encoder *e, const cs_algorithm *a, bool timed, alg_tables *t,
                         cs_error *err)
{
    int P = a->ranks + a->switch_nodes;   /* switch nodes group like ranks */
    long n = a->nsends;
    long *deg = calloc((size_t)P, sizeof *deg);
    int *group_of = calloc((size_t)P, sizeof *group_of);
    long *gbegin = NULL;
    int rc = CS_OK;
    if (!deg || !group_of) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        goto done;
    }
    if (n > (long)UINT32_MAX) {
        rc = cs_error_set(err, CS_ELIMIT, "sends", "%ld sends is too many to encode", n);
        goto done;
    }
    for (long i = 0; i < n; i++) {
        int s = algorithm_send_src(a, i), d = algorithm_send_dst(a, i);
        if (s < 0 || s >= P || d < 0 || d >= P) {
            rc = cs_error_set(err, CS_EINVAL, "sends", "send %ld: rank out of range [0, %d)", i,
                              P);
            goto done;
        }
        deg[s]++;
        if (d != s)
            deg[d]++;
    }
    /* group boundaries */
    long ng = 0, acc = 0;
    for (int r = 0; r < P; r++) {
        group_of[r] = (int)ng;
        acc += deg[r];
        if (acc >= CS_CODEC_GROUP_SENDS || r == P - 1) {
            ng++;
            acc = 0;
        }
    }
    t->ngroups = ng;
    t->groups = calloc((size_t)(ng ? ng : 1), sizeof *t->groups);
    gbegin = calloc((size_t)ng + 1, sizeof *gbegin);
    if (!t->groups || !gbegin) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        goto done;
    }
    {
        int r = 0;
        for (long g = 0; g < ng; g++) {
            t->groups[g].rank_lo = (uint32_t)r;
            while (r < P && group_of[r] == g)
                r++;
            t->groups[g].rank_hi = (uint32_t)(r - 1);
        }
    }
    /* a group holds a send once even when both its ranks are in it */
    for (long i = 0; i < n; i++) {
        long g1 = group_of[algorithm_send_src(a, i)], g2 = group_of[algorithm_send_dst(a, i)];
        gbegin[g1 + 1]++;
        if (g2 != g1)
            gbegin[g2 + 1]++;
    }
    for (long g = 0; g < ng; g++)
        gbegin[g + 1] += gbegin[g];
    /* a sixteenth of the entries per pass (at least GROUP_PASS_MIN) */
    long budget = gbegin[ng] / 16;
    if (budget < GROUP_PASS_MIN)
        budget = GROUP_PASS_MIN;
    long first = 0;
    while (first < ng && !rc) {
        /* groups [first, last) in this pass */
        long last = first + 1;
        while (last < ng && gbegin[last + 1] - gbegin[first] <= budget)
            last++;
        /* one sequential scan fills this pass's groups: reading the sends in
         * order streams them through the cache, where gathering each
         * group's sends by index cost a cache miss per field */
        frame_builder *fb = calloc((size_t)(last - first), sizeof *fb);
        if (!fb) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
            break;
        }
        for (long g = first; g < last && !rc; g++) {
            fb[g - first].timed = timed;
            fb[g - first].indexed = true;
            if (fb_reserve(&fb[g - first], gbegin[g + 1] - gbegin[g]))
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        }
        /* the pass's groups are the ranks rlo..rlo+span: two compares skip a send */
        unsigned rlo = t->groups[first].rank_lo, span = t->groups[last - 1].rank_hi - rlo;
        for (long i = 0; i < n && !rc; i++) {
            unsigned sr = (unsigned)algorithm_send_src(a, i), dr = (unsigned)algorithm_send_dst(a, i);
            bool in1 = sr - rlo <= span, in2d = dr - rlo <= span;
            if (!in1 && !in2d)
                continue;
            long g1 = group_of[sr], g2 = group_of[dr];
            bool in2 = in2d && g2 != g1;
            cs_send sv = algorithm_send(a, i);
            if (in1)
                fb_add(&fb[g1 - first], &sv, i);
            if (in2)
                fb_add(&fb[g2 - first], &sv, i);
        }
        for (long g = first; g < last; g++) {
            if (!rc) {
                uint32_t lo = t->groups[g].rank_lo, hi = t->groups[g].rank_hi;
                rc = fb_flush(e, &fb[g - first], &t->groups[g], err);
                t->groups[g].rank_lo = lo;
                t->groups[g].rank_hi = hi;
            }
            fb_free(&fb[g - first]);
        }
        free(fb);
        first = last;
    }
done:
    free(gbegin);
    free(deg);
    free(group_of);
    return rc;
}

static bool any_timed(const cs_algorithm *a)
{
    for (long i = 0; i < a->nsends; i++)
        if (isfinite(algorithm_send_start_us(a, i)) || isfinite(algorithm_send_end_us(a, i)))
            return true;
    return false;
}

static int check_skeleton(const cs_result *res, const json_t *skeleton, cs_error *err)
{
    const json_t *fr = json_object_get(skeleton, "frontier");
    if (!json_is_array(fr) || (int)json_array_size(fr) != res->nalgs)
        return cs_error_set(err, CS_EINTERNAL, "", "the result document's frontier does not "
                                                   "match the result (%d algorithms)",
                            res->nalgs);
    for (int i = 0; i < res->nalgs; i++) {
        const json_t *s = json_object_get(json_array_get(fr, (size_t)i), "sends");
        if (!json_is_array(s) || json_array_size(s) != 0)
            return cs_error_set(err, CS_EINTERNAL, "", "frontier[%d] of the document without "
                                                       "sends has sends", i);
    }
    return CS_OK;
}

int result_codec_encode(const cs_result *res, const json_t *skeleton, void **out, size_t *len,
                        cs_error *err)
{
    *out = NULL;
    *len = 0;
    int rc = check_skeleton(res, skeleton, err);
    if (rc)
        return rc;
    char *header = json_dumps(skeleton, JSON_COMPACT | CS_JSON_REAL);
    if (!header)
        return cs_error_set(err, CS_ENOMEM, "", "cannot write the result document");
    size_t hlen = strlen(header);
    bytebuf ob = {0};
    encoder e = {.cctx = ZSTD_createCCtx(), .out = &ob};
    alg_tables *tabs = calloc((size_t)(res->nalgs ? res->nalgs : 1), sizeof *tabs);
    bool *timed = calloc((size_t)(res->nalgs ? res->nalgs : 1), sizeof *timed);
    if (!e.cctx || !tabs || !timed) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        goto done;
    }
    ZSTD_CCtx_setParameter(e.cctx, ZSTD_c_compressionLevel, ZSTD_LEVEL);
    unsigned char prefix[PREFIX_LEN] = {0};
    memcpy(prefix, MAGIC, 4);
    put_u32(prefix + 4, CS_CODEC_VERSION);
    if (bytebuf_put(&ob, prefix, sizeof prefix) || bytebuf_put(&ob, header, hlen)) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        goto done;
    }
    for (int i = 0; i < res->nalgs && !rc; i++) {
        timed[i] = any_timed(res->algs[i]);
        rc = encode_blocks(&e, res->algs[i], timed[i], &tabs[i], err);
        if (!rc)
            rc = encode_groups(&e, res->algs[i], timed[i], &tabs[i], err);
    }
    if (rc)
        goto done;
    /* tables, then the directory pointing at them */
    uint64_t *tab_off = calloc((size_t)(res->nalgs ? res->nalgs : 1), sizeof *tab_off);
    if (!tab_off) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        goto done;
    }
    for (int i = 0; i < res->nalgs && !rc; i++) {
        tab_off[i] = ob.len;
        for (long b = 0; b < tabs[i].nblocks && !rc; b++) {
            unsigned char p[BLOCK_ENTRY_LEN] = {0};
            const frame_entry *fe = &tabs[i].blocks[b];
            put_u64(p, fe->offset);
            put_u32(p + 8, fe->comp_len);
            put_u32(p + 12, fe->raw_len);
            put_u32(p + 16, fe->nsends);
            put_u32(p + 20, fe->crc);
            rc = bytebuf_put(&ob, p, sizeof p);
        }
        for (long g = 0; g < tabs[i].ngroups && !rc; g++) {
            unsigned char p[GROUP_ENTRY_LEN] = {0};
            const frame_entry *fe = &tabs[i].groups[g];
            put_u64(p, fe->offset);
            put_u32(p + 8, fe->comp_len);
            put_u32(p + 12, fe->raw_len);
            put_u32(p + 16, fe->nsends);
            put_u32(p + 20, fe->crc);
            put_u32(p + 24, fe->rank_lo);
            put_u32(p + 28, fe->rank_hi);
            rc = bytebuf_put(&ob, p, sizeof p);
        }
    }
    uint64_t dir_off = ob.len;
    unsigned char cnt[4];
    put_u32(cnt, (uint32_t)res->nalgs);
    if (!rc)
        rc = bytebuf_put(&ob, cnt, 4);
    for (int i = 0; i < res->nalgs && !rc; i++) {
        unsigned char p[DIR_ENTRY_LEN] = {0};
        put_u64(p, (uint64_t)res->algs[i]->nsends);
        put_u32(p + 8, timed[i] ? ALG_TIMED : 0);
        put_u32(p + 12, (uint32_t)res->algs[i]->ranks);
        put_u32(p + 36, (uint32_t)res->algs[i]->switch_nodes);   /* 0 in older blobs */
        put_u32(p + 16, (uint32_t)tabs[i].nblocks);
        put_u32(p + 20, (uint32_t)tabs[i].ngroups);
        put_u64(p + 24, tab_off[i]);
        /* the tables' CRC: the directory then covers every byte that locates a frame */
        uint64_t tlen = (uint64_t)tabs[i].nblocks * BLOCK_ENTRY_LEN +
                        (uint64_t)tabs[i].ngroups * GROUP_ENTRY_LEN;
        put_u32(p + 32, crc(ob.data + tab_off[i], (size_t)tlen));
        rc = bytebuf_put(&ob, p, sizeof p);
    }
    free(tab_off);
    if (rc) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        goto done;
    }
    uint64_t dir_len = ob.len - dir_off;
    unsigned char foot[FOOTER_LEN] = {0};
    put_u64(foot, PREFIX_LEN);
    put_u32(foot + 8, (uint32_t)hlen);
    put_u32(foot + 12, crc(header, hlen));
    put_u64(foot + 16, dir_off);
    put_u32(foot + 24, (uint32_t)dir_len);
    put_u32(foot + 28, crc(ob.data + dir_off, (size_t)dir_len));
    memcpy(foot + 36, MAGIC, 4);
    if (bytebuf_put(&ob, foot, sizeof foot)) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory encoding a result");
        goto done;
    }
    *out = ob.data;
    *len = ob.len;
    ob.data = NULL;
done:
    for (int i = 0; tabs && i < res->nalgs; i++) {
        free(tabs[i].blocks);
        free(tabs[i].groups);
    }
    free(tabs);
    free(timed);
    free(header);
    bytebuf_free(&ob);
    bytebuf_free(&e.raw);
    bytebuf_free(&e.scratch);
    ZSTD_freeCCtx(e.cctx);
    return rc;
}

/* ---- the view ------------------------------------------------------------------------ */

typedef struct alg_dir {
    long nsends;
    bool timed;
    int ranks;
    int switch_nodes;   /* directory bytes 36..39 (0 in blobs before switch nodes) */
    long nblocks, ngroups;
    const unsigned char *blocks, *groups;   /* table entries */
} alg_dir;

struct cs_codec_view {
    const unsigned char *data;
    size_t len;
    const char *header;
    size_t header_len;
    int nalgs;
    alg_dir *algs;
};

bool result_codec_is_encoded(const void *data, size_t len)
{
    return data && len >= PREFIX_LEN + FOOTER_LEN && memcmp(data, MAGIC, 4) == 0;
}

#define CORRUPT(err, ...) cs_error_set(err, CS_EIO, "", "stored result is damaged: " __VA_ARGS__)

int result_codec_open(const void *data, size_t len, cs_codec_view **out, cs_error *err)
{
    *out = NULL;
    const unsigned char *d = data;
    if (!result_codec_is_encoded(data, len))
        return CORRUPT(err, "no CSRC prefix (%zu bytes)", len);
    uint32_t version = get_u32(d + 4);
    if (version != CS_CODEC_VERSION)
        return cs_error_set(err, CS_EUNSUPPORTED, "",
                            "stored result has codec version %u; this build reads %d",
                            version, CS_CODEC_VERSION);
    const unsigned char *f = d + len - FOOTER_LEN;
    if (memcmp(f + 36, MAGIC, 4) != 0)
        return CORRUPT(err, "its footer is missing (truncated?)");
    uint64_t hoff = get_u64(f), dir_off = get_u64(f + 16);
    uint32_t hlen = get_u32(f + 8), dir_len = get_u32(f + 24);
    size_t body = len - FOOTER_LEN;
    if (hoff > body || hlen > body - hoff || dir_off > body || dir_len > body - dir_off ||
        dir_len < 4)
        return CORRUPT(err, "its footer points outside the blob");
    if (crc(d + hoff, hlen) != get_u32(f + 12))
        return CORRUPT(err, "the header fails its checksum");
    if (crc(d + dir_off, dir_len) != get_u32(f + 28))
        return CORRUPT(err, "the directory fails its checksum");
    uint32_t nalgs = get_u32(d + dir_off);
    if ((uint64_t)nalgs * DIR_ENTRY_LEN + 4 != dir_len)
        return CORRUPT(err, "the directory size does not match %u algorithms", nalgs);
    cs_codec_view *v = calloc(1, sizeof *v);
    if (!v || !(v->algs = calloc(nalgs ? nalgs : 1, sizeof *v->algs))) {
        free(v);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    v->data = d;
    v->len = len;
    v->header = (const char *)d + hoff;
    v->header_len = hlen;
    v->nalgs = (int)nalgs;
    for (uint32_t i = 0; i < nalgs; i++) {
        const unsigned char *p = d + dir_off + 4 + (size_t)i * DIR_ENTRY_LEN;
        alg_dir *a = &v->algs[i];
        a->nsends = (long)get_u64(p);
        a->timed = (get_u32(p + 8) & ALG_TIMED) != 0;
        a->ranks = (int)get_u32(p + 12);
        a->switch_nodes = (int)get_u32(p + 36);
        a->nblocks = get_u32(p + 16);
        a->ngroups = get_u32(p + 20);
        uint64_t toff = get_u64(p + 24);
        uint64_t tlen = (uint64_t)a->nblocks * BLOCK_ENTRY_LEN +
                        (uint64_t)a->ngroups * GROUP_ENTRY_LEN;
        if (toff > body || tlen > body - toff || a->nsends < 0 || a->ranks < 0 ||
            a->switch_nodes < 0 || a->switch_nodes > 65536 ||
            a->nblocks != (a->nsends + CS_CODEC_BLOCK_SENDS - 1) / CS_CODEC_BLOCK_SENDS) {
            result_codec_close(v);
            return CORRUPT(err, "algorithm %u's tables are out of bounds", i);
        }
        if (crc(d + toff, (size_t)tlen) != get_u32(p + 32)) {
            result_codec_close(v);
            return CORRUPT(err, "algorithm %u's frame tables fail their checksum", i);
        }
        a->blocks = d + toff;
        a->groups = d + toff + (size_t)a->nblocks * BLOCK_ENTRY_LEN;
        for (long k = 0; k < a->nblocks + a->ngroups; k++) {
            const unsigned char *e = k < a->nblocks ? a->blocks + k * BLOCK_ENTRY_LEN
                                                    : a->groups + (k - a->nblocks) * GROUP_ENTRY_LEN;
            uint64_t off = get_u64(e);
            uint32_t cl = get_u32(e + 8);
            if (off > body || cl > body - off) {
                result_codec_close(v);
                return CORRUPT(err, "algorithm %u: frame %ld lies outside the blob", i, k);
            }
        }
    }
    *out = v;
    return CS_OK;
}

void result_codec_close(cs_codec_view *v)
{
    if (!v)
        return;
    free(v->algs);
    free(v);
}

const char *result_codec_header(const cs_codec_view *v, size_t *len)
{
    *len = v->header_len;
    return v->header;
}

int result_codec_nalgs(const cs_codec_view *v) { return v->nalgs; }

long result_codec_nsends(const cs_codec_view *v, int alg)
{
    return alg >= 0 && alg < v->nalgs ? v->algs[alg].nsends : 0;
}

int result_codec_ranks(const cs_codec_view *v, int alg)
{
    return alg >= 0 && alg < v->nalgs ? v->algs[alg].ranks : 0;
}

/* ---- frames: reading --------------------------------------------------------------------- */

/* One decoded frame: the columns found in its raw bytes, and a read position. */
typedef struct frame_reader {
    bytebuf raw;
    bytebuf times;                 /* start/end untransposed: 16 bytes per send */
    const unsigned char *col[NCOLS], *col_end[NCOLS];
    const unsigned char *pos[NCOLS];
    long n, next;                  /* sends in the frame, the next one to read */
    bool timed, indexed;
    int64_t step, src, chunk, index;
    uint64_t start;
    int ranks;
    const char *what;              /* "block" / "group" for errors */
    long which;
    int alg;
} frame_reader;

static int frame_load(frame_reader *fr, ZSTD_DCtx *dctx, const unsigned char *data,
                      const unsigned char *entry, bool timed, bool indexed, cs_error *err)
{
    uint64_t off = get_u64(entry);
    uint32_t cl = get_u32(entry + 8), rl = get_u32(entry + 12), n = get_u32(entry + 16);
    if (crc(data + off, cl) != get_u32(entry + 20))
        return CORRUPT(err, "algorithm %d, %s %ld fails its checksum", fr->alg, fr->what,
                       fr->which);
    fr->raw.len = 0;
    if (bytebuf_reserve(&fr->raw, rl ? rl : 1))
        return cs_error_set(err, CS_ENOMEM, "", "out of memory decoding a result");
    size_t got = ZSTD_decompressDCtx(dctx, fr->raw.data, rl, data + off, cl);
    if (ZSTD_isError(got) || got != rl)
        return CORRUPT(err, "algorithm %d, %s %ld does not decompress (%s)", fr->alg, fr->what,
                       fr->which, ZSTD_isError(got) ? ZSTD_getErrorName(got) : "short");
    fr->raw.len = rl;
    if (rl < 4 * NCOLS)
        return CORRUPT(err, "algorithm %d, %s %ld is too short", fr->alg, fr->what, fr->which);
    const unsigned char *p = fr->raw.data + 4 * NCOLS, *end = fr->raw.data + rl;
    for (int c = 0; c < NCOLS; c++) {
        uint32_t cl2 = get_u32(fr->raw.data + 4 * c);
        if (cl2 > (size_t)(end - p))
            return CORRUPT(err, "algorithm %d, %s %ld: column %d overruns", fr->alg, fr->what,
                           fr->which, c);
        fr->col[c] = fr->pos[c] = p;
        fr->col_end[c] = p + cl2;
        p += cl2;
    }
    size_t tl = (size_t)n * 8;
    if ((size_t)(fr->col_end[COL_OP] - fr->col[COL_OP]) != ((size_t)n + 7) / 8 ||
        (timed && ((size_t)(fr->col_end[COL_START] - fr->col[COL_START]) != tl ||
                   (size_t)(fr->col_end[COL_END] - fr->col[COL_END]) != tl)))
        return CORRUPT(err, "algorithm %d, %s %ld: column sizes do not match %u sends", fr->alg,
                       fr->what, fr->which, n);
    if (timed) {
        fr->times.len = 0;
        if (bytebuf_reserve(&fr->times, tl ? 2 * tl : 1))
            return cs_error_set(err, CS_ENOMEM, "", "out of memory decoding a result");
        untranspose8(fr->col[COL_START], fr->times.data, n);
        untranspose8(fr->col[COL_END], fr->times.data + tl, n);
    }
    fr->n = n;
    fr->next = 0;
    fr->timed = timed;
    fr->indexed = indexed;
    fr->step = fr->src = fr->chunk = fr->index = 0;
    fr->start = 0;
    return CS_OK;
}

static bool get_varint(const unsigned char **pp, const unsigned char *end, uint64_t *out)
{
    const unsigned char *p = *pp;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (p >= end)
            return false;
        unsigned char b = *p++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) {
            *pp = p;
            *out = v;
            return true;
        }
    }
    return false;
}

/* The next send of the frame (fr->next < fr->n), with its index. */
static int frame_next(frame_reader *fr, cs_send *s, long *index, cs_error *err)
{
    uint64_t a, b, c, d;
    if (!get_varint(&fr->pos[COL_STEP], fr->col_end[COL_STEP], &a) ||
        !get_varint(&fr->pos[COL_SRC], fr->col_end[COL_SRC], &b) ||
        !get_varint(&fr->pos[COL_DST], fr->col_end[COL_DST], &c) ||
        !get_varint(&fr->pos[COL_CHUNK], fr->col_end[COL_CHUNK], &d))
        return CORRUPT(err, "algorithm %d, %s %ld: a column ends early", fr->alg, fr->what,
                       fr->which);
    fr->step += unzigzag(a);
    fr->src += unzigzag(b);
    int64_t dst = fr->src + unzigzag(c);
    fr->chunk += unzigzag(d);
    if (fr->src < 0 || fr->src >= fr->ranks || dst < 0 || dst >= fr->ranks || fr->step < 0 ||
        fr->step > INT32_MAX || fr->chunk < 0)
        return CORRUPT(err, "algorithm %d, %s %ld: a send is out of range", fr->alg, fr->what,
                       fr->which);
    s->step = (int)fr->step;
    s->src = (int)fr->src;
    s->dst = (int)dst;
    s->chunk = (long)fr->chunk;
    s->op = (fr->col[COL_OP][fr->next / 8] >> (fr->next % 8)) & 1 ? CS_OP_REDUCE : CS_OP_COPY;
    if (fr->timed) {
        uint64_t xs = get_u64(fr->times.data + 8 * (size_t)fr->next);
        uint64_t xe = get_u64(fr->times.data + 8 * ((size_t)fr->n + (size_t)fr->next));
        uint64_t st = xs ^ fr->start;
        s->start_us = bitsd(st);
        s->end_us = bitsd(xe ^ st);
        fr->start = st;
    } else {
        s->start_us = s->end_us = NAN;
    }
    if (fr->indexed) {
        uint64_t di;
        if (!get_varint(&fr->pos[COL_INDEX], fr->col_end[COL_INDEX], &di))
            return CORRUPT(err, "algorithm %d, %s %ld: the index column ends early", fr->alg,
                           fr->what, fr->which);
        fr->index += (int64_t)di;
    }
    *index = (long)fr->index;
    fr->next++;
    return CS_OK;
}

static void frame_free(frame_reader *fr)
{
    bytebuf_free(&fr->raw);
    bytebuf_free(&fr->times);
}

/* ---- cursors --------------------------------------------------------------------------- */

struct cs_send_cursor {
    const cs_codec_view *v;
    const alg_dir *a;
    int alg;
    int lo, hi;                  /* lo < 0: order blocks */
    ZSTD_DCtx *dctx;
    long block;                  /* order: the next block to load */
    frame_reader cur;            /* order: the current block */
    int nfr;                     /* slice: the groups overlapping [lo, hi] */
    frame_reader *fr;
    bool *have;                  /* slice: fr[k] holds a pending send */
    cs_send *pend;
    long *pidx;
    long last_index;
};

int send_cursor_open(const cs_codec_view *v, int alg, int rank_lo, int rank_hi,
                     cs_send_cursor **out, cs_error *err)
{
    *out = NULL;
    if (alg < 0 || alg >= v->nalgs)
        return cs_error_set(err, CS_EINVAL, "alg", "no algorithm %d (the result has %d)", alg,
                            v->nalgs);
    cs_send_cursor *c = calloc(1, sizeof *c);
    if (!c || !(c->dctx = ZSTD_createDCtx())) {
        free(c);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    c->v = v;
    c->alg = alg;
    c->a = &v->algs[alg];
    c->lo = rank_lo;
    c->hi = rank_hi;
    c->last_index = -1;
    c->cur.ranks = c->a->ranks + c->a->switch_nodes;
    c->cur.what = "block";
    c->cur.alg = alg;
    if (rank_lo < 0) {
        *out = c;
        return CS_OK;
    }
    int first = -1, last = -2;
    for (long g = 0; g < c->a->ngroups; g++) {
        const unsigned char *e = c->a->groups + g * GROUP_ENTRY_LEN;
        long glo = get_u32(e + 24), ghi = get_u32(e + 28);
        if (ghi >= rank_lo && glo <= rank_hi) {
            if (first < 0)
                first = (int)g;
            last = (int)g;
        }
    }
    c->nfr = last - first + 1;
    if (c->nfr > 0) {
        c->fr = calloc((size_t)c->nfr, sizeof *c->fr);
        c->have = calloc((size_t)c->nfr, sizeof *c->have);
        c->pend = calloc((size_t)c->nfr, sizeof *c->pend);
        c->pidx = calloc((size_t)c->nfr, sizeof *c->pidx);
        if (!c->fr || !c->have || !c->pend || !c->pidx) {
            send_cursor_free(c);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
        for (int k = 0; k < c->nfr; k++) {
            frame_reader *fr = &c->fr[k];
            fr->ranks = c->a->ranks + c->a->switch_nodes;
            fr->what = "rank group";
            fr->which = first + k;
            fr->alg = alg;
            int rc = frame_load(fr, c->dctx, v->data, c->a->groups + (first + k) * GROUP_ENTRY_LEN,
                                c->a->timed, true, err);
            if (!rc && fr->n > 0)
                rc = frame_next(fr, &c->pend[k], &c->pidx[k], err);
            if (rc) {
                send_cursor_free(c);
                return rc;
            }
            c->have[k] = fr->n > 0;
        }
    }
    *out = c;
    return CS_OK;
}

static bool in_slice(const cs_send_cursor *c, const cs_send *s)
{
    return (s->src >= c->lo && s->src <= c->hi) || (s->dst >= c->lo && s->dst <= c->hi);
}

int send_cursor_next(cs_send_cursor *c, cs_send *out, size_t max, size_t *n, cs_error *err)
{
    *n = 0;
    if (c->lo < 0) {
        while (*n < max) {
            if (c->cur.next >= c->cur.n) {
                if (c->block >= c->a->nblocks)
                    break;
                c->cur.which = c->block;
                int rc = frame_load(&c->cur, c->dctx, c->v->data,
                                    c->a->blocks + c->block * BLOCK_ENTRY_LEN, c->a->timed, false,
                                    err);
                if (rc)
                    return rc;
                c->block++;
                continue;
            }
            long idx;
            int rc = frame_next(&c->cur, &out[*n], &idx, err);
            if (rc)
                return rc;
            (*n)++;
        }
        return CS_OK;
    }
    /* merge the groups by index; a send in two groups comes out once */
    while (*n < max) {
        int best = -1;
        for (int k = 0; k < c->nfr; k++)
            if (c->have[k] && (best < 0 || c->pidx[k] < c->pidx[best]))
                best = k;
        if (best < 0)
            break;
        cs_send s = c->pend[best];
        long idx = c->pidx[best];
        frame_reader *fr = &c->fr[best];
        if (fr->next < fr->n) {
            int rc = frame_next(fr, &c->pend[best], &c->pidx[best], err);
            if (rc)
                return rc;
        } else {
            c->have[best] = false;
        }
        if (idx == c->last_index || !in_slice(c, &s))
            continue;
        if (idx < c->last_index)
            return CORRUPT(err, "algorithm %d: rank group indices go backwards", c->alg);
        c->last_index = idx;
        out[(*n)++] = s;
    }
    return CS_OK;
}

void send_cursor_free(cs_send_cursor *c)
{
    if (!c)
        return;
    frame_free(&c->cur);
    for (int k = 0; c->fr && k < c->nfr; k++)
        frame_free(&c->fr[k]);
    free(c->fr);
    free(c->have);
    free(c->pend);
    free(c->pidx);
    ZSTD_freeDCtx(c->dctx);
    free(c);
}

/* ---- decoding -------------------------------------------------------------------------- */

static int parse_header(const char *text, size_t len, cs_result **out, cs_error *err)
{
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, 0, &jerr);
    if (!doc)
        return CORRUPT(err, "its header is not JSON (%s)", jerr.text);
    int rc = result_from_json(doc, out, err);
    json_decref(doc);
    return rc;
}

static int fill_sends(const cs_codec_view *v, int alg, int lo, int hi, cs_algorithm *a,
                      cs_error *err)
{
    if (a->ranks != v->algs[alg].ranks)
        return CORRUPT(err, "algorithm %d has %d ranks in its header and %d in its frames", alg,
                       a->ranks, v->algs[alg].ranks);
    cs_send_cursor *c = NULL;
    int rc = send_cursor_open(v, alg, lo, hi, &c, err);
    if (rc)
        return rc;
    enum { BATCH = 4096 };
    cs_send *buf = malloc(sizeof *buf * BATCH);
    if (!buf) {
        send_cursor_free(c);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    for (;;) {
        size_t n = 0;
        if ((rc = send_cursor_next(c, buf, BATCH, &n, err)) || n == 0)
            break;
        for (size_t i = 0; i < n && !rc; i++)
            if (algorithm_add_timed_send(a, buf[i].chunk, buf[i].src, buf[i].dst, buf[i].step,
                                         buf[i].op, buf[i].start_us, buf[i].end_us))
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for the sends");
        if (rc)
            break;
    }
    free(buf);
    send_cursor_free(c);
    if (!rc && lo < 0 && a->nsends != v->algs[alg].nsends)
        rc = CORRUPT(err, "algorithm %d decodes to %ld sends, not %ld", alg, a->nsends,
                     v->algs[alg].nsends);
    return rc;
}

int result_codec_decode(const cs_codec_view *v, cs_result **out, cs_error *err)
{
    *out = NULL;
    cs_result *r = NULL;
    int rc = parse_header(v->header, v->header_len, &r, err);
    if (rc)
        return rc;
    if (r->nalgs != v->nalgs) {
        result_free(r);
        return CORRUPT(err, "the header has %d algorithms, the directory %d", r->nalgs,
                       v->nalgs);
    }
    for (int i = 0; i < r->nalgs && !rc; i++)
        rc = fill_sends(v, i, -1, -1, r->algs[i], err);
    if (rc) {
        result_free(r);
        return rc;
    }
    *out = r;
    return CS_OK;
}

int result_codec_decode_summary(const void *data, size_t len, cs_result **out, cs_error *err)
{
    *out = NULL;
    cs_codec_view *v = NULL;
    int rc = result_codec_open(data, len, &v, err);
    if (rc)
        return rc;
    rc = parse_header(v->header, v->header_len, out, err);
    result_codec_close(v);
    return rc;
}

int result_codec_decode_algorithm(const cs_codec_view *v, int alg, int rank_lo, int rank_hi,
                                  cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    if (alg < 0 || alg >= v->nalgs)
        return cs_error_set(err, CS_EINVAL, "alg", "no algorithm %d (the result has %d)", alg,
                            v->nalgs);
    json_error_t jerr;
    json_t *doc = json_loadb(v->header, v->header_len, 0, &jerr);
    if (!doc)
        return CORRUPT(err, "its header is not JSON (%s)", jerr.text);
    json_t *ja = json_array_get(json_object_get(doc, "frontier"), (size_t)alg);
    cs_algorithm *a = NULL;
    int rc = ja ? algorithm_from_json(ja, &a, err)
                : CORRUPT(err, "its header has no frontier[%d]", alg);
    json_decref(doc);
    if (!rc)
        rc = fill_sends(v, alg, rank_lo, rank_hi, a, err);
    if (rc) {
        algorithm_free(a);
        return rc;
    }
    *out = a;
    return CS_OK;
}
