/*
 * encoding.c - HTTP content codings for result representations
 * (delivery_internal.h): choosing one from Accept-Encoding, compressing a
 * pulled stream (gzip through zlib, zstd), and whole-buffer helpers for the
 * representations small enough to keep in memory.
 *
 * The streaming compressors pull from a source a block at a time and never
 * hold more than one input and one output block, so a gigabyte document is
 * compressed on its way to the socket.
 */
#include "delivery_internal.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <zlib.h>
#include <zstd.h>

/* Documents kept in memory are compressed once and sent many times: a good
 * ratio pays.  Streamed ones are compressed on every request, at the speed
 * of the socket: the fastest levels (zstd 1: ~500 MB/s, gzip 1: ~100 MB/s
 * on this machine, against ~130 and ~35 at the defaults). */
#define ZSTD_KEPT_LEVEL 3
#define GZIP_KEPT_LEVEL 6
#define ZSTD_STREAM_LEVEL 1
#define GZIP_STREAM_LEVEL 1
#define IN_BLOCK (1 << 16)

const char *encoding_name(cs_encoding e)
{
    switch (e) {
    case ENC_GZIP: return "gzip";
    case ENC_ZSTD: return "zstd";
    default: return "identity";
    }
}

/* The q value of coding `name` in an Accept-Encoding header, or -1 when the
 * header does not name it (nor "*"). */
static double accept_q(const char *header, const char *name)
{
    double star = -1;
    const char *p = header;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        const char *tok = p;
        while (*p && *p != ',' && *p != ';' && *p != ' ' && *p != '\t')
            p++;
        size_t tl = (size_t)(p - tok);
        double q = 1.0;
        while (*p && *p != ',') {
            if (*p == ';') {
                p++;
                while (*p == ' ')
                    p++;
                if ((p[0] == 'q' || p[0] == 'Q') && p[1] == '=')
                    q = strtod(p + 2, NULL);
            } else {
                p++;
            }
        }
        if (tl == strlen(name) && strncasecmp(tok, name, tl) == 0)
            return q;
        if (tl == 1 && *tok == '*')
            star = q;
    }
    return star;
}

cs_encoding encoding_choose(const char *accept)
{
    if (!accept || !*accept)
        return ENC_IDENTITY;
    /* zstd is cheaper to produce and to decode; prefer it at equal q */
    double qz = accept_q(accept, "zstd"), qg = accept_q(accept, "gzip");
    if (qz > 0 && qz >= qg)
        return ENC_ZSTD;
    if (qg > 0)
        return ENC_GZIP;
    return ENC_IDENTITY;
}

/* ---- streaming ------------------------------------------------------------------------- */

struct cs_encoder {
    cs_encoding kind;
    source_fn src;
    void *src_ctx;
    bool src_done, finished;
    char *in;
    size_t in_len, in_pos;
    z_stream z;
    bool z_init;
    ZSTD_CStream *zs;
};

static int encoder_start(cs_encoding kind, bool kept, source_fn src, void *src_ctx,
                         cs_encoder **out, cs_error *err)
{
    *out = NULL;
    cs_encoder *e = calloc(1, sizeof *e);
    if (!e || !(e->in = malloc(IN_BLOCK))) {
        free(e);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    e->kind = kind;
    e->src = src;
    e->src_ctx = src_ctx;
    if (kind == ENC_GZIP) {
        if (deflateInit2(&e->z, kept ? GZIP_KEPT_LEVEL : GZIP_STREAM_LEVEL, Z_DEFLATED, 15 + 16,
                         8, Z_DEFAULT_STRATEGY) !=
            Z_OK) {
            encoder_free(e);
            return cs_error_set(err, CS_ENOMEM, "", "zlib: cannot start a gzip stream");
        }
        e->z_init = true;
    } else if (kind == ENC_ZSTD) {
        e->zs = ZSTD_createCStream();
        if (!e->zs ||
            ZSTD_isError(ZSTD_initCStream(e->zs, kept ? ZSTD_KEPT_LEVEL : ZSTD_STREAM_LEVEL))) {
            encoder_free(e);
            return cs_error_set(err, CS_ENOMEM, "", "zstd: cannot start a stream");
        }
    }
    *out = e;
    return CS_OK;
}

int encoder_new(cs_encoding kind, source_fn src, void *src_ctx, cs_encoder **out,
                cs_error *err)
{
    return encoder_start(kind, false, src, src_ctx, out, err);
}

void encoder_free(cs_encoder *e)
{
    if (!e)
        return;
    if (e->z_init)
        deflateEnd(&e->z);
    ZSTD_freeCStream(e->zs);
    free(e->in);
    free(e);
}

/* Refills the input block from the source when it is used up. */
static int pull(cs_encoder *e, cs_error *err)
{
    if (e->in_pos < e->in_len || e->src_done)
        return CS_OK;
    long n = e->src(e->src_ctx, e->in, IN_BLOCK, err);
    if (n < 0)
        return (int)n;
    e->in_len = (size_t)n;
    e->in_pos = 0;
    e->src_done = n == 0;
    return CS_OK;
}

long encoder_read(cs_encoder *e, char *buf, size_t cap, cs_error *err)
{
    if (e->kind == ENC_IDENTITY)
        return e->src(e->src_ctx, buf, cap, err);
    size_t got = 0;
    while (got == 0 && !e->finished) {
        int rc = pull(e, err);
        if (rc)
            return rc;
        if (e->kind == ENC_GZIP) {
            e->z.next_in = (Bytef *)e->in + e->in_pos;
            e->z.avail_in = (uInt)(e->in_len - e->in_pos);
            e->z.next_out = (Bytef *)buf;
            e->z.avail_out = (uInt)cap;
            int zr = deflate(&e->z, e->src_done ? Z_FINISH : Z_NO_FLUSH);
            if (zr == Z_STREAM_ERROR)
                return cs_error_set(err, CS_EINTERNAL, "", "zlib: deflate failed");
            e->in_pos = e->in_len - e->z.avail_in;
            got = cap - e->z.avail_out;
            if (zr == Z_STREAM_END)
                e->finished = true;
        } else {
            ZSTD_inBuffer in = {e->in, e->in_len, e->in_pos};
            ZSTD_outBuffer out = {buf, cap, 0};
            size_t zr = ZSTD_compressStream2(e->zs, &out, &in,
                                             e->src_done ? ZSTD_e_end : ZSTD_e_continue);
            if (ZSTD_isError(zr))
                return cs_error_set(err, CS_EINTERNAL, "", "zstd: %s", ZSTD_getErrorName(zr));
            e->in_pos = in.pos;
            got = out.pos;
            if (e->src_done && zr == 0)
                e->finished = true;
        }
    }
    return (long)got;
}

/* ---- zstd decompression as a source -------------------------------------------------- */

struct zsource {
    const char *data;
    size_t len, pos;
    ZSTD_DStream *ds;
    bool done;
};

int zsource_new(const void *data, size_t len, zsource **out, cs_error *err)
{
    zsource *z = calloc(1, sizeof *z);
    if (!z || !(z->ds = ZSTD_createDStream())) {
        free(z);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    ZSTD_initDStream(z->ds);
    z->data = data;
    z->len = len;
    *out = z;
    return CS_OK;
}

void zsource_free(zsource *z)
{
    if (!z)
        return;
    ZSTD_freeDStream(z->ds);
    free(z);
}

long zsource_read(void *ctx, char *buf, size_t cap, cs_error *err)
{
    zsource *z = ctx;
    size_t got = 0;
    while (got < cap && !z->done) {
        ZSTD_inBuffer in = {z->data, z->len, z->pos};
        ZSTD_outBuffer out = {buf + got, cap - got, 0};
        size_t r = ZSTD_decompressStream(z->ds, &out, &in);
        if (ZSTD_isError(r))
            return cs_error_set(err, CS_EIO, "", "stored document is damaged: %s",
                                ZSTD_getErrorName(r));
        z->pos = in.pos;
        got += out.pos;
        if (r == 0 && z->pos == z->len)
            z->done = true;
        else if (out.pos == 0 && z->pos == z->len)
            return cs_error_set(err, CS_EIO, "", "stored document is truncated");
    }
    return (long)got;
}

/* ---- whole buffers -------------------------------------------------------------------- */

typedef struct mem_source {
    const char *data;
    size_t len, pos;
} mem_source;

static long mem_read(void *ctx, char *buf, size_t cap, cs_error *err)
{
    (void)err;
    mem_source *m = ctx;
    size_t k = m->len - m->pos < cap ? m->len - m->pos : cap;
    memcpy(buf, m->data + m->pos, k);
    m->pos += k;
    return (long)k;
}

int drain_source(source_fn src, void *ctx, char **out, size_t *len, cs_error *err)
{
    size_t cap = 1 << 16, n = 0;
    char *b = malloc(cap + 1);
    if (!b)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (;;) {
        if (cap - n < (1 << 15)) {
            char *nb = realloc(b, cap * 2 + 1);
            if (!nb) {
                free(b);
                return cs_error_set(err, CS_ENOMEM, "", "out of memory");
            }
            b = nb;
            cap *= 2;
        }
        long r = src(ctx, b + n, cap - n, err);
        if (r < 0) {
            free(b);
            return (int)r;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    b[n] = '\0';
    *out = b;
    *len = n;
    return CS_OK;
}

static long encoder_source(void *ctx, char *buf, size_t cap, cs_error *err)
{
    return encoder_read(ctx, buf, cap, err);
}

int encode_buffer(cs_encoding kind, const void *data, size_t len, char **out, size_t *olen,
                  cs_error *err)
{
    if (kind == ENC_ZSTD) {
        /* one shot: the frame then records its content size, which tells a
         * reader whether the plain document is small enough to keep */
        size_t bound = ZSTD_compressBound(len);
        char *z = malloc(bound + 1);
        if (!z)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        size_t n = ZSTD_compress(z, bound, data, len, ZSTD_KEPT_LEVEL);
        if (ZSTD_isError(n)) {
            free(z);
            return cs_error_set(err, CS_EINTERNAL, "", "zstd: %s", ZSTD_getErrorName(n));
        }
        char *shrunk = realloc(z, n + 1);
        *out = shrunk ? shrunk : z;
        (*out)[n] = '\0';
        *olen = n;
        return CS_OK;
    }
    mem_source m = {data, len, 0};
    cs_encoder *e = NULL;
    int rc = encoder_start(kind, true, mem_read, &m, &e, err);
    if (rc)
        return rc;
    rc = drain_source(encoder_source, e, out, olen, err);
    encoder_free(e);
    return rc;
}

int zstd_decode_buffer(const void *data, size_t len, char **out, size_t *olen, cs_error *err)
{
    zsource *z = NULL;
    int rc = zsource_new(data, len, &z, err);
    if (rc)
        return rc;
    rc = drain_source(zsource_read, z, out, olen, err);
    zsource_free(z);
    return rc;
}
