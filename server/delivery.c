/*
 * delivery.c - results stored encoded, and their representations served
 * from memory, from stored artifacts, or streamed (delivery_internal.h).
 *
 * Memory cache keys (one byte-bounded LRU, server/cache.c):
 *   R|KEY                      the result in use (an rdoc: header, encoded
 *                              body, frontier summary, topology on demand)
 *   P|KEY|REP|CODING           a representation's bytes in one content coding
 *   A|KEY|FORMAT|VARIANT       a generated document, zstd-compressed (what the
 *                              store's artifacts hold)
 * REP names the representation ("json|view=summary|ranks=0-7", "msccl-xml|
 * runtime=auto|proto=Simple|alg=1", ...) and, with GEN_VERSION and the
 * coding, makes its ETag: a conditional GET is answered before anything is
 * loaded or generated.
 *
 * Sizes: a representation up to memory_doc_max() bytes is built whole and
 * kept (repeats are a hash probe and a send); a larger one streams block by
 * block from the encoded result (JSON) or from its compressed artifact
 * (XML, CUDA), compressed on the way when the client asked, so the daemon's
 * memory does not grow with the document.
 */
#include "delivery_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zstd.h>

#include "cuda_gen.h"
#include "msccl_xml.h"
#include "result_codec.h"

/* Bump when a generator's output changes: new ETags and new artifacts. */
#define GEN_VERSION "g6"   /* g2: scratch runs; g3: spread settled exactly; g4: width-checked elements; g5: runs per lane, cross-link run merging; g6: untimed order (step, sender, index): both directions of a link merge */
#define STREAM_BLOCK (64 * 1024)
/* Window of MSCCL generation for the documents the daemon keeps: 2^22 sends
 * counted per endpoint, one window up to 2M sends (~460 bytes each while it
 * is planned), larger documents in windows of that size. */
#define DOC_WINDOW_SENDS (1L << 22)
/* The largest schedule whose MSCCL document is generated (generate_code). */
#define DOC_MAX_SENDS (1L << 22)
/* The NCCL fork reads fewer than this many XML elements per rank
 * (codegen/msccl_xml.h). */
#define MSCCL_MAX_ELEMENTS 4096

/* ---- results in memory ------------------------------------------------------------------- */

typedef struct rdoc {
    char key[65];
    char *request;              /* canonical request JSON */
    cs_blob *body;              /* the encoded result */
    cs_codec_view *view;
    const char *header;         /* in body */
    size_t header_len;
    cs_result *summary;         /* the frontier without sends */
    long nsends;                /* over the frontier */
    pthread_mutex_t lock;       /* topology */
    bool topo_tried;
    cs_topology *topo;
    cs_error topo_err;
} rdoc;

static void rdoc_free(rdoc *d)
{
    if (!d)
        return;
    result_codec_close(d->view);
    blob_unref(d->body);
    result_free(d->summary);
    topology_free(d->topo);
    free(d->request);
    pthread_mutex_destroy(&d->lock);
    free(d);
}

static void rdoc_release(cs_blob *holder) { rdoc_free(holder->owner); }

/* A holder blob (what the cache keeps) around a new rdoc over body. */
static int rdoc_new(const char *key, const char *request, cs_blob *body, cs_blob **out,
                    cs_error *err)
{
    *out = NULL;
    rdoc *d = calloc(1, sizeof *d);
    if (!d)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    pthread_mutex_init(&d->lock, NULL);
    snprintf(d->key, sizeof d->key, "%s", key);
    blob_ref(body);
    d->body = body;
    int rc = CS_OK;
    if (request && !(d->request = strdup(request)))
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (!rc)
        rc = result_codec_open(body->data, body->len, &d->view, err);
    if (!rc) {
        d->header = result_codec_header(d->view, &d->header_len);
        rc = result_codec_decode_summary(body->data, body->len, &d->summary, err);
    }
    if (rc) {
        rdoc_free(d);
        return rc;
    }
    for (int i = 0; i < result_codec_nalgs(d->view); i++)
        d->nsends += result_codec_nsends(d->view, i);
    size_t cost = body->cost + d->header_len * 4 + (request ? strlen(request) : 0) + 512;
    *out = blob_wrap(NULL, 0, cost, rdoc_release, d);
    if (!*out) {
        rdoc_free(d);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    return CS_OK;
}

static rdoc *rdoc_of(cs_blob *holder) { return holder->owner; }

static void cache_key(char *out, size_t n, char kind, const char *key, const char *rest)
{
    snprintf(out, n, "%c|%s%s%s", kind, key, rest ? "|" : "", rest ? rest : "");
}

/* The encoded form of a result stored as JSON before the codec: the same
 * document (the writer reproduces it byte for byte), so clients see no
 * change; the store is rewritten in the new form on the way. */
static int encode_legacy(const char *json_text, void **blob, size_t *len, cs_error *err)
{
    json_error_t jerr;
    json_t *doc = json_loads(json_text, 0, &jerr);
    if (!doc)
        return cs_error_set(err, CS_EIO, "key", "stored result is not JSON: %s", jerr.text);
    cs_result *res = NULL;
    int rc = result_from_json(doc, &res, err);
    if (!rc) {
        json_t *fr = json_object_get(doc, "frontier");
        for (size_t i = 0; i < json_array_size(fr); i++)
            json_object_set_new(json_array_get(fr, i), "sends", json_array());
        rc = result_codec_encode(res, doc, blob, len, err);
    }
    result_free(res);
    json_decref(doc);
    return rc;
}

/* The result of key: memory, else the store (*found false when neither has
 * it).  *from_memory tells which. */
static int rdoc_get(cs_server *s, const char *key, cs_blob **holder, bool *found,
                    bool *from_memory, cs_error *err)
{
    char ck[80];
    cache_key(ck, sizeof ck, 'R', key, NULL);
    *holder = cache_get(s->cache, ck);
    *found = *holder != NULL;
    *from_memory = *found;
    if (*found)
        return CS_OK;
    cs_stored_result row;
    int rc = store_result_load(s->store, key, STORE_WANT_REQUEST | STORE_WANT_BODY, &row, found,
                               err);
    if (rc || !*found)
        return rc;
    if (row.legacy) {
        void *blob = NULL;
        size_t len = 0;
        rc = encode_legacy(row.header, &blob, &len, err);
        if (!rc && !(row.body = blob_adopt(blob, len)))
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        if (!rc) {
            cs_codec_view *v = NULL;
            size_t hl = 0;
            cs_error e2;
            char *header = NULL;
            if (result_codec_open(blob, len, &v, &e2) == CS_OK) {
                const char *h = result_codec_header(v, &hl);
                header = strndup(h, hl);
                result_codec_close(v);
            }
            if (!header || store_result_migrate(s->store, key, header, blob, len, &e2) != CS_OK)
                log_event(&s->log, LOG_WARN, "result_migrate_failed", "key", key, "error",
                          header ? e2.message : "out of memory", NULL);
            else
                log_event(&s->log, LOG_INFO, "result_migrated", "key", key, NULL);
            free(header);
        }
    }
    if (!rc)
        rc = rdoc_new(key, row.request, row.body, holder, err);
    store_result_clear(&row);
    if (!rc)
        cache_put(s->cache, ck, *holder);
    return rc;
}

static int rdoc_topology(rdoc *d, const cs_topology **out, cs_error *err)
{
    pthread_mutex_lock(&d->lock);
    if (!d->topo_tried) {
        d->topo_tried = true;
        json_t *req = d->request ? json_loads(d->request, 0, NULL) : NULL;
        cs_topology_parse_options po = {.max_ranks = 1 << 24};
        if (!req)
            cs_error_set(&d->topo_err, CS_EINTERNAL, "key", "the stored request is not JSON");
        else
            topology_from_json(json_object_get(req, "topology"), &po, &d->topo, &d->topo_err);
        json_decref(req);
    }
    pthread_mutex_unlock(&d->lock);
    *out = d->topo;
    if (!d->topo) {
        if (err)
            *err = d->topo_err;
        return d->topo_err.code ? d->topo_err.code : CS_EINTERNAL;
    }
    return CS_OK;
}

bool delivery_result_in_memory(cs_server *s, const char *key)
{
    char ck[80];
    cache_key(ck, sizeof ck, 'R', key, NULL);
    cs_blob *b = cache_get(s->cache, ck);
    blob_unref(b);
    return b != NULL;
}

bool delivery_result_known(cs_server *s, const char *key)
{
    if (delivery_result_in_memory(s, key))
        return true;
    bool found = false;
    cs_error err;
    return store_result_exists(s->store, key, &found, &err) == CS_OK && found;
}

int delivery_save_result(cs_store *store, cs_cache *cache, const cs_synth_request *req,
                         const cs_result *res, cs_error *err)
{
    return delivery_save_result_with(store, cache, req, res, NULL, err);
}

int delivery_load_result(cs_store *store, cs_cache *cache, const char *key, cs_result **out,
                         json_t **header, bool *found, cs_error *err)
{
    *out = NULL;
    if (header)
        *header = NULL;
    char ck[80];
    cache_key(ck, sizeof ck, 'R', key, NULL);
    cs_blob *holder = cache_get(cache, ck);
    if (holder) {
        *found = true;
        rdoc *d = rdoc_of(holder);
        int rc = result_codec_decode(d->view, out, err);
        if (!rc && header)
            *header = json_loadb(d->header, d->header_len, 0, NULL);
        blob_unref(holder);
        return rc;
    }
    cs_stored_result row;
    int rc = store_result_load(store, key, STORE_WANT_BODY, &row, found, err);
    if (rc || !*found)
        return rc;
    if (row.legacy) {
        json_error_t jerr;
        json_t *doc = json_loads(row.header, 0, &jerr);
        rc = doc ? result_from_json(doc, out, err)
                 : cs_error_set(err, CS_EIO, "key", "stored result is not JSON: %s", jerr.text);
        json_decref(doc);
        if (!rc && header) {
            /* the whole document: its header is it without the sends */
            *header = json_loads(row.header, 0, NULL);
            json_t *fr = json_object_get(*header, "frontier");
            for (size_t i = 0; i < json_array_size(fr); i++)
                json_object_del(json_array_get(fr, i), "sends");
        }
    } else {
        cs_codec_view *v = NULL;
        rc = result_codec_open(row.body->data, row.body->len, &v, err);
        if (!rc)
            rc = result_codec_decode(v, out, err);
        if (!rc && header) {
            size_t hl = 0;
            const char *h = result_codec_header(v, &hl);
            *header = json_loadb(h, hl, 0, NULL);
        }
        result_codec_close(v);
    }
    store_result_clear(&row);
    return rc;
}

int delivery_save_result_with(cs_store *store, cs_cache *cache, const cs_synth_request *req,
                              const cs_result *res, const json_t *extra, cs_error *err)
{
    json_t *skel = synth_result_to_json_frame(req, res);
    if (!skel)
        return cs_error_set(err, CS_ENOMEM, "", "cannot write the result document");
    if (extra)
        json_object_update(skel, (json_t *)extra);
    return delivery_save_result_frame(store, cache, req, res, skel, err);
}

int delivery_save_result_frame(cs_store *store, cs_cache *cache, const cs_synth_request *req,
                               const cs_result *res, json_t *skel, cs_error *err)
{
    int rc;
    void *blob = NULL;
    size_t len = 0;
    rc = result_codec_encode(res, skel, &blob, &len, err);
    char *header = rc ? NULL : json_dumps(skel, JSON_COMPACT | CS_JSON_REAL);
    json_decref(skel);
    char *canon = rc ? NULL : synth_request_canonical_text(req);
    if (!rc && (!header || !canon))
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (!rc)
        rc = store_result_save(store, req->key, canon, header, blob, len, err);
    free(header);
    cs_blob *body = NULL;
    if (!rc && (body = blob_adopt(blob, len)) != NULL) {
        blob = NULL;
        cs_blob *holder = NULL;
        cs_error e2;
        if (rdoc_new(req->key, canon, body, &holder, &e2) == CS_OK) {
            char ck[80];
            cache_key(ck, sizeof ck, 'R', req->key, NULL);
            cache_put(cache, ck, holder);
            blob_unref(holder);
        }
        blob_unref(body);
    }
    free(blob);
    free(canon);
    return rc;
}

/* ---- remembered refusals ------------------------------------------------------------------ */

void delivery_remember_refusal(cs_cache *cache, char kind, const char *id, int cs_code,
                               const char *error_json)
{
    size_t n = strlen(error_json) + 24;
    char *text = malloc(n);
    if (!text)
        return;
    int len = snprintf(text, n, "%d\n%s", cs_code, error_json);
    cs_blob *b = blob_adopt(text, (size_t)len);
    if (!b)
        return;
    char ck[100];
    snprintf(ck, sizeof ck, "X|%c|%.80s", kind, id);
    cache_put(cache, ck, b);
    blob_unref(b);
}

cs_blob *delivery_refusal(cs_cache *cache, char kind, const char *id, int *cs_code,
                          const char **error_json)
{
    char ck[100];
    snprintf(ck, sizeof ck, "X|%c|%.80s", kind, id);
    cs_blob *b = cache_get(cache, ck);
    if (!b)
        return NULL;
    *cs_code = atoi(b->data);
    const char *nl = strchr(b->data, '\n');
    *error_json = nl ? nl + 1 : "{}";
    return b;
}

/* ---- what is asked for --------------------------------------------------------------------- */

typedef struct rep_req {
    bool json, xml, cuda;
    const char *format;
    bool has_size;
    double size;
    long alg;                    /* -1: not given */
    int rank_lo, rank_hi;        /* rank_lo < 0: no slice */
    bool summary;
    cs_msccl_runtime runtime;
    const char *proto;
    int gpu_sms;                 /* 0: the runtime's own thread-block limit */
    cs_cuda_elem elem;
    const char *elem_s;
    cs_encoding enc;
    char id[256];                /* the representation, without its coding */
} rep_req;

static const char *arg(req_state *rs, const char *name)
{
    return MHD_lookup_connection_value(rs->conn, MHD_GET_ARGUMENT_KIND, name);
}

/* Appends src to dst (capacity cap, its string ending at `at`), truncating;
 * the new end. */
static size_t cat(char *dst, size_t cap, size_t at, const char *src)
{
    size_t l = strlen(src);
    if (at + l >= cap)
        l = at + 1 < cap ? cap - 1 - at : 0;
    memcpy(dst + at, src, l);
    dst[at + l] = '\0';
    return at + l;
}

static bool parse_rank(const char *s, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || !isdigit((unsigned char)*s) || v < 0 || v > (1L << 24))
        return false;
    *out = v;
    return *end == '\0' || *end == '-';
}

/* Parses the query; on a bad parameter answers 400 and returns false. */
static bool parse_rep(req_state *rs, rep_req *r, bool json_only, enum MHD_Result *answer)
{
    memset(r, 0, sizeof *r);
    r->alg = -1;
    r->rank_lo = r->rank_hi = -1;
    r->format = arg(rs, "format");
    if (!r->format || !*r->format || json_only)
        r->format = "json";
    r->json = !strcmp(r->format, "json");
    r->xml = !strcmp(r->format, "msccl-xml");
    r->cuda = !strcmp(r->format, "cuda");
#define BAD(field, ...)                                                                        \
    do {                                                                                       \
        *answer = respond_error(rs, 400, "invalid", field, __VA_ARGS__);                       \
        return false;                                                                          \
    } while (0)
    if (!r->json && !r->xml && !r->cuda)
        BAD("format", "format must be json, msccl-xml or cuda");
    const char *size_s = json_only ? NULL : arg(rs, "size");
    const char *alg_s = json_only ? NULL : arg(rs, "alg");
    if (size_s) {
        char *end;
        errno = 0;
        r->size = strtod(size_s, &end);
        if (errno || end == size_s || *end || !isfinite(r->size) || r->size <= 0 ||
            r->size > 1e15)
            BAD("size", "size must be a number of bytes in (0, 1e15]");
        r->has_size = true;
    }
    if (alg_s) {
        char *end;
        errno = 0;
        r->alg = strtol(alg_s, &end, 10);
        if (errno || end == alg_s || *end || r->alg < 0 || r->alg > 100000)
            BAD("alg", "alg must be a frontier index >= 0");
        if (size_s)
            BAD("alg", "give size or alg, not both");
    }
    const char *rank_s = json_only ? NULL : arg(rs, "rank");
    const char *ranks_s = json_only ? NULL : arg(rs, "ranks");
    if (rank_s && ranks_s)
        BAD("ranks", "give rank or ranks, not both");
    if (rank_s) {
        long v;
        char *dash = strchr(rank_s, '-');
        if (dash || !parse_rank(rank_s, &v))
            BAD("rank", "rank must be a rank number >= 0");
        r->rank_lo = r->rank_hi = (int)v;
    }
    if (ranks_s) {
        long a, b;
        const char *dash = strchr(ranks_s, '-');
        if (!dash || !parse_rank(ranks_s, &a) || !parse_rank(dash + 1, &b) ||
            strchr(dash + 1, '-'))
            BAD("ranks", "ranks must be FIRST-LAST, e.g. 8-15");
        if (a > b)
            BAD("ranks", "ranks %ld-%ld: the first rank is after the last", a, b);
        r->rank_lo = (int)a;
        r->rank_hi = (int)b;
    }
    const char *view = arg(rs, "view");
    if (view && strcmp(view, "summary") && strcmp(view, "full"))
        BAD("view", "view must be full or summary");
    r->summary = view && !strcmp(view, "summary");
    if (r->summary && !r->json)
        BAD("view", "view=summary is a form of the JSON result");
    if (r->summary && r->rank_lo >= 0)
        BAD("view", "a summary has no sends to slice");
    cs_error err;
    cs_error_clear(&err);
    r->runtime = CS_MSCCL_RUNTIME_AUTO;
    const char *runtime_s = arg(rs, "runtime");
    if (r->xml && runtime_s && msccl_runtime_from_name(runtime_s, &r->runtime, &err) != CS_OK)
        BAD("runtime", "%s", err.message);
    r->proto = arg(rs, "proto");
    if (r->xml && r->proto && strcmp(r->proto, "Simple") && strcmp(r->proto, "LL") &&
        strcmp(r->proto, "LL128"))
        BAD("proto", "proto must be Simple, LL or LL128");
    const char *sms_s = arg(rs, "gpu_sms");
    if (sms_s) {
        char *end;
        errno = 0;
        long v = strtol(sms_s, &end, 10);
        if (!r->xml)
            BAD("gpu_sms", "gpu_sms applies to format=msccl-xml");
        if (errno || end == sms_s || *end || v < 1 || v > 4096)
            BAD("gpu_sms", "gpu_sms must be the target GPU's SM count (1..4096)");
        r->gpu_sms = (int)v;
    }
    r->elem = CS_CUDA_FLOAT;
    r->elem_s = arg(rs, "elem");
    if (r->cuda && r->elem_s && cuda_elem_from_name(r->elem_s, &r->elem, &err) != CS_OK)
        BAD("elem", "%s", err.message);
#undef BAD
    r->enc = encoding_choose(
        MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "Accept-Encoding"));
    /* every GET builds this: plain copies, no printf (a visible share of a
     * cached GET's CPU) */
    size_t at = cat(r->id, sizeof r->id, 0, r->format);
    if (r->summary)
        at = cat(r->id, sizeof r->id, at, "|view=summary");
    if (r->xml) {
        at = cat(r->id, sizeof r->id, at, "|runtime=");
        at = cat(r->id, sizeof r->id, at, msccl_runtime_name(r->runtime));
        at = cat(r->id, sizeof r->id, at, "|proto=");
        at = cat(r->id, sizeof r->id, at, r->proto ? r->proto : "Simple");
    }
    int n = (int)at;
    /* only when given: the documents (and ETags, artifacts) without it stay
     * what they were */
    if (r->gpu_sms > 0)
        n += snprintf(r->id + n, sizeof r->id - (size_t)n, "|gpu_sms=%d", r->gpu_sms);
    at = (size_t)n;
    if (r->cuda) {
        at = cat(r->id, sizeof r->id, at, "|elem=");
        at = cat(r->id, sizeof r->id, at, r->elem_s ? r->elem_s : "float");
    }
    n = (int)at;
    if (r->has_size)
        n += snprintf(r->id + n, sizeof r->id - (size_t)n, "|size=%.17g", r->size);
    if (r->alg >= 0)
        n += snprintf(r->id + n, sizeof r->id - (size_t)n, "|alg=%ld", r->alg);
    if (r->rank_lo >= 0)
        snprintf(r->id + n, sizeof r->id - (size_t)n, "|ranks=%d-%d", r->rank_lo, r->rank_hi);
    return true;
}

/* ---- ETags ---------------------------------------------------------------------------------- */

static uint64_t fnv1a(const char *s, uint64_t h)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    return h;
}

/* "KEY16-HASH16[-gz|-zst]" in quotes; out holds at least 64 bytes. */
static void make_etag(char *out, size_t n, const char *key, const char *id, cs_encoding enc)
{
    uint64_t h = fnv1a(GEN_VERSION, fnv1a(id, fnv1a(key, 1469598103934665603ULL)));
    static const char *const suffix[ENC_COUNT] = {"", "-gz", "-zst"};
    static const char hex[] = "0123456789abcdef";
    char *p = out;
    *p++ = '"';
    for (int i = 0; i < 16 && key[i]; i++)
        *p++ = key[i];
    *p++ = '-';
    for (int i = 15; i >= 0; i--)
        *p++ = hex[(h >> (4 * i)) & 15];
    *p = '\0';
    size_t at = cat(out, n, (size_t)(p - out), suffix[enc]);
    cat(out, n, at, "\"");
}

/* If-None-Match: a list of entity tags, or "*" (weak comparison, RFC 9110). */
static bool etag_matches(const char *inm, const char *etag)
{
    if (!inm)
        return false;
    size_t el = strlen(etag);
    const char *p = inm;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        if (*p == '*')
            return true;
        if (p[0] == 'W' && p[1] == '/')
            p += 2;
        const char *end = p;
        if (*end == '"') {
            end = strchr(end + 1, '"');
            if (!end)
                return false;
            end++;
        } else {
            while (*end && *end != ',')
                end++;
        }
        if ((size_t)(end - p) == el && !strncmp(p, etag, el))
            return true;
        p = end;
    }
    return false;
}

/* ---- responses ------------------------------------------------------------------------------ */

static const char *content_type(const rep_req *r)
{
    return r->json ? "application/json" : r->xml ? "application/xml"
                                                 : "text/x-cuda; charset=utf-8";
}

static void add_rep_headers(struct MHD_Response *resp, const char *etag, cs_encoding enc,
                            const char *ctype)
{
    if (ctype)
        MHD_add_response_header(resp, "Content-Type", ctype);
    if (etag)
        MHD_add_response_header(resp, "ETag", etag);
    MHD_add_response_header(resp, "Vary", "Accept-Encoding");
    if (enc != ENC_IDENTITY)
        MHD_add_response_header(resp, "Content-Encoding", encoding_name(enc));
}

static void unref_cb(void *cls) { blob_unref(cls); }

static enum MHD_Result send_blob(req_state *rs, int status, cs_blob *b, const char *ctype,
                                 const char *etag, cs_encoding enc)
{
    blob_ref(b);
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, unref_cb, b);
    if (!r) {
        blob_unref(b);
        return MHD_NO;
    }
    add_rep_headers(r, etag, enc, ctype);
    return queue(rs, status, r);
}

/* A streamed body: prefix, then the inner source (a JSON writer or a zstd
 * artifact), then suffix, through an optional compressor. */
typedef struct rstream {
    cs_server *srv;
    char key[65];
    cs_blob *hold;               /* keeps what the inner source reads alive */
    cs_result_writer *w;
    zsource *z;
    char *prefix, *suffix;
    size_t plen, slen, ppos, spos;
    int phase;                   /* 0 prefix, 1 inner, 2 suffix, 3 done */
    cs_encoder *enc;
} rstream;

static void rstream_free(void *cls)
{
    rstream *st = cls;
    if (!st)
        return;
    encoder_free(st->enc);
    result_writer_free(st->w);
    zsource_free(st->z);
    blob_unref(st->hold);
    free(st->prefix);
    free(st->suffix);
    free(st);
}

static size_t take(const char *src, size_t len, size_t *pos, char *buf, size_t cap)
{
    size_t k = len - *pos < cap ? len - *pos : cap;
    if (k) /* an absent part (src NULL, len 0) copies nothing */
        memcpy(buf, src + *pos, k);
    *pos += k;
    return k;
}

static long rstream_source(void *ctx, char *buf, size_t cap, cs_error *err)
{
    rstream *st = ctx;
    size_t got = 0;
    while (got < cap && st->phase < 3) {
        if (st->phase == 0) {
            got += take(st->prefix, st->plen, &st->ppos, buf + got, cap - got);
            if (st->ppos == st->plen)
                st->phase = 1;
        } else if (st->phase == 1) {
            long n = st->w ? result_writer_read(st->w, buf + got, cap - got, err)
                           : zsource_read(st->z, buf + got, cap - got, err);
            if (n < 0)
                return n;
            if (n == 0)
                st->phase = 2;
            got += (size_t)n;
        } else {
            got += take(st->suffix, st->slen, &st->spos, buf + got, cap - got);
            if (st->spos == st->slen)
                st->phase = 3;
        }
    }
    return (long)got;
}

static ssize_t rstream_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    rstream *st = cls;
    cs_error err;
    cs_error_clear(&err);
    long n = st->enc ? encoder_read(st->enc, buf, max, &err) : rstream_source(st, buf, max, &err);
    if (n < 0) {
        /* the status line is gone: all we can do is cut the body short */
        log_event(&st->srv->log, LOG_ERROR, "stream_failed", "key", st->key, "error",
                  err.message, NULL);
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    return n == 0 ? MHD_CONTENT_READER_END_OF_STREAM : (ssize_t)n;
}

static enum MHD_Result send_stream(req_state *rs, int status, rstream *st, const char *ctype,
                                   const char *etag, cs_encoding enc)
{
    cs_error err;
    if (enc != ENC_IDENTITY && encoder_new(enc, rstream_source, st, &st->enc, &err) != CS_OK) {
        rstream_free(st);
        return respond_cs_error(rs, &err);
    }
    struct MHD_Response *r = MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, STREAM_BLOCK, rstream_reader, st, rstream_free);
    if (!r) {
        rstream_free(st);
        return MHD_NO;
    }
    add_rep_headers(r, etag, enc, ctype);
    return queue(rs, status, r);
}

static rstream *rstream_new(cs_server *s, const char *key, cs_blob *hold)
{
    rstream *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->srv = s;
    snprintf(st->key, sizeof st->key, "%s", key);
    blob_ref(hold);
    st->hold = hold;
    st->phase = 0;
    return st;
}

static size_t memory_doc_max(const cs_server *s)
{
    size_t cache = (size_t)s->cfg.cache_mb << 20;
    size_t m = cache / 8;
    return m > (64u << 20) ? (64u << 20) : m;
}

static void count(atomic_ulong *c) { atomic_fetch_add_explicit(c, 1, memory_order_relaxed); }

/* A kept representation carries its two answers, made once: 200 with the
 * bytes and 304, each with its ETag, Vary and coding headers.  Every cached
 * GET without a header of its own (CORS) queues one of them as is: no
 * response to build, no header to copy, nothing to free per request (MHD
 * counts the connections that send a response and frees it after the
 * last).  The kept blob wraps the bytes; its release drops our hold on the
 * two answers, and the bytes go when the last connection sending them is
 * done (the 200's free callback holds them). */
/* "P|KEY|ID|CODING", the cache key of a kept representation. */
static void rep_cache_key(char *out, size_t n, const char *key, const char *id, cs_encoding enc)
{
    size_t at = cat(out, n, 0, "P|");
    at = cat(out, n, at, key);
    at = cat(out, n, at, "|");
    at = cat(out, n, at, id);
    at = cat(out, n, at, "|");
    cat(out, n, at, encoding_name(enc));
}

typedef struct rep_answers {
    struct MHD_Response *ok, *not_modified;
    char etag[96];
} rep_answers;

static void rep_release(cs_blob *b)
{
    rep_answers *a = b->owner;
    MHD_destroy_response(a->ok);
    MHD_destroy_response(a->not_modified);
    free(a);
}

/* The answers of a kept representation (NULL for other blobs). */
static const rep_answers *answers_of(const cs_blob *b)
{
    return b && b->release == rep_release ? b->owner : NULL;
}

/* Keeps bytes as representation P|key|id|coding of r, with its answers when
 * they can be made (else the plain bytes); returns what is kept (a new
 * reference); bytes keeps its own reference. */
static cs_blob *keep_rep_blob(cs_server *s, const char *key, const rep_req *r, cs_encoding enc,
                              cs_blob *bytes)
{
    char etag[96];
    make_etag(etag, sizeof etag, key, r->id, enc);
    cs_blob *kept = NULL;
    rep_answers *a = calloc(1, sizeof *a);
    if (a) {
        memcpy(a->etag, etag, sizeof etag);
        blob_ref(bytes);
        a->ok = MHD_create_response_from_buffer_with_free_callback_cls(bytes->len, bytes->data,
                                                                        unref_cb, bytes);
        if (!a->ok)
            blob_unref(bytes);
        a->not_modified = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (a->ok && a->not_modified) {
            add_rep_headers(a->ok, etag, enc, content_type(r));
            add_rep_headers(a->not_modified, etag, ENC_IDENTITY, NULL);
            kept = blob_wrap(bytes->data, bytes->len, bytes->cost, rep_release, a);
        }
        if (!kept) {
            if (a->ok)
                MHD_destroy_response(a->ok);
            if (a->not_modified)
                MHD_destroy_response(a->not_modified);
            free(a);
        }
    }
    if (!kept) {
        kept = bytes;
        blob_ref(bytes);
    }
    char ck[400];
    rep_cache_key(ck, sizeof ck, key, r->id, enc);
    cache_put(s->cache, ck, kept);
    return kept;
}

/* The same over a malloc'd buffer it takes. */
static cs_blob *keep_rep(cs_server *s, const char *key, const rep_req *r, cs_encoding enc,
                         char *data, size_t len)
{
    cs_blob *b = blob_adopt(data, len);
    if (!b)
        return NULL;
    cs_blob *kept = keep_rep_blob(s, key, r, enc, b);
    blob_unref(b);
    return kept;
}

/* Answers with an identity document held in memory, in the coding asked for
 * (encoded once and kept). */
static enum MHD_Result send_small(req_state *rs, int status, const char *key, const rep_req *r,
                                  cs_blob *identity, const char *etag)
{
    cs_server *s = rs->srv;
    if (r->enc == ENC_IDENTITY)
        return send_blob(rs, status, identity, content_type(r), etag, ENC_IDENTITY);
    char *z = NULL;
    size_t zl = 0;
    cs_error err;
    if (encode_buffer(r->enc, identity->data, identity->len, &z, &zl, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    cs_blob *b = keep_rep(s, key, r, r->enc, z, zl);
    if (!b)
        return respond_error(rs, 500, "internal", "", "out of memory");
    enum MHD_Result ret = send_blob(rs, status, b, content_type(r), etag, r->enc);
    blob_unref(b);
    return ret;
}

/* ---- the JSON document ---------------------------------------------------------------- */

/* The writer for r over d; extra members "selected" and "slice" as asked. */
static int open_writer(cs_server *s, rdoc *d, const rep_req *r, int idx,
                       cs_result_writer **w, long *estimate, cs_error *err)
{
    (void)s;
    char extra[512] = "";
    int n = 0;
    cs_json_view jv = CS_JSON_VIEW_FULL;
    jv.summary = r->summary;
    if (r->has_size || r->alg >= 0) {
        jv.alg = idx;
        json_t *sel = json_pack("{s:i, s:i}", "index", idx, "of", d->summary->nalgs);
        if (r->has_size) {
            const cs_topology *t = NULL;
            int rc = rdoc_topology(d, &t, err);
            if (rc) {
                json_decref(sel);
                return rc;
            }
            json_object_set_new(sel, "bytes", json_real(r->size));
            json_object_set_new(sel, "cost_us",
                                json_real(algorithm_cost_us(d->summary->algs[idx], t, r->size)));
        }
        char *st = json_dumps(sel, JSON_COMPACT | CS_JSON_REAL);
        json_decref(sel);
        if (!st)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        n += snprintf(extra + n, sizeof extra - (size_t)n, "\"selected\":%s", st);
        free(st);
    }
    if (r->rank_lo >= 0) {
        jv.rank_lo = r->rank_lo;
        jv.rank_hi = r->rank_hi;
        snprintf(extra + n, sizeof extra - (size_t)n, "%s\"slice\":{\"ranks\":[%d,%d]}",
                 n ? "," : "", r->rank_lo, r->rank_hi);
    }
    jv.extra = extra;
    /* a guess of the document's size, to choose between memory and streaming */
    long sends = jv.alg >= 0 ? result_codec_nsends(d->view, jv.alg) : d->nsends;
    if (r->summary)
        sends = 0;
    if (r->rank_lo >= 0) {
        int ranks = result_codec_ranks(d->view, jv.alg >= 0 ? jv.alg : 0);
        long share = ranks > 0 ? (long)(2.0 * sends * (r->rank_hi - r->rank_lo + 1) / ranks) : sends;
        sends = share < sends ? share : sends;
    }
    *estimate = (long)d->header_len + 512 + sends * 120;
    return result_writer_open_encoded(d->view, &jv, w, err);
}

/* The frontier entry a request picks: ?size= (lowest cost), ?alg=, else 0. */
static int pick_alg(rdoc *d, const rep_req *r, int *idx, cs_error *err)
{
    *idx = 0;
    if (r->has_size) {
        const cs_topology *t = NULL;
        int rc = rdoc_topology(d, &t, err);
        if (rc)
            return rc;
        const cs_algorithm *best = result_best_for_size(d->summary, t, r->size);
        for (int i = 0; i < d->summary->nalgs; i++)
            if (d->summary->algs[i] == best)
                *idx = i;
    } else if (r->alg >= 0) {
        if (r->alg >= d->summary->nalgs)
            return cs_error_set(err, CS_EINVAL, "alg", "alg must be < %d (frontier size)",
                                d->summary->nalgs);
        *idx = (int)r->alg;
    }
    return CS_OK;
}

static int check_slice(rdoc *d, const rep_req *r, cs_error *err)
{
    if (r->rank_lo < 0)
        return CS_OK;
    int ranks = d->summary->nalgs > 0 ? d->summary->algs[0]->ranks : 0;
    if (r->rank_hi >= ranks)
        return cs_error_set(err, CS_EINVAL, r->rank_lo == r->rank_hi ? "rank" : "ranks",
                            "rank %d is out of range: the result has %d ranks (0-%d)",
                            r->rank_hi, ranks, ranks - 1);
    return CS_OK;
}

/* The JSON representation of d: kept in memory when small, else streamed. */
static enum MHD_Result send_json(req_state *rs, int status, cs_blob *holder, const rep_req *r,
                                 const char *etag)
{
    cs_server *s = rs->srv;
    rdoc *d = rdoc_of(holder);
    cs_error err;
    cs_error_clear(&err);
    int idx = 0;
    cs_result_writer *w = NULL;
    long estimate = 0;
    if (pick_alg(d, r, &idx, &err) || check_slice(d, r, &err) ||
        open_writer(s, d, r, idx, &w, &estimate, &err))
        return respond_cs_error(rs, &err);
    count(&s->metrics.rep_generated);
    if ((size_t)estimate <= memory_doc_max(s)) {
        char *text = NULL;
        size_t len = 0;
        int rc = result_writer_dump(w, &text, &len, &err);
        result_writer_free(w);
        if (rc)
            return respond_cs_error(rs, &err);
        cs_blob *b = keep_rep(s, d->key, r, ENC_IDENTITY, text, len);
        if (!b)
            return respond_error(rs, 500, "internal", "", "out of memory");
        enum MHD_Result ret = send_small(rs, status, d->key, r, b, etag);
        blob_unref(b);
        return ret;
    }
    rstream *st = rstream_new(s, d->key, holder);
    if (!st) {
        result_writer_free(w);
        return respond_error(rs, 500, "internal", "", "out of memory");
    }
    st->w = w;
    return send_stream(rs, status, st, content_type(r), etag, r->enc);
}

/* ---- generated code --------------------------------------------------------------------- */

/* MSCCL documents are kept framed: one zstd frame per piece the generator
 * writes (msccl_xml_write_ranks: the header, one <gpu> element each, then
 * "</algo>\n"), so the frames concatenated are an ordinary zstd stream of
 * the whole document, and the slice of ranks A..B is frames 0, 1+A..1+B and
 * the last, decoded: the bytes msccl_xml_generate_ranks writes for A..B
 * (byte-identical by its contract).  A slice is cut from the whole
 * document, never generated alone: only the whole document proves that
 * every rank fits the runtime (step and element counts are exact only per
 * rank), and a job whose nodes got slices for some ranks but a refusal for
 * others would run different algorithms on different ranks.  Cutting is
 * also what makes every rank fetching its own slice cheap. */
typedef struct framer {
    ZSTD_CCtx *cc;
    char *buf;
    size_t len, cap;
    int pieces;
    long max_elements;          /* the most <tb> + <step> elements of one <gpu> */
    int max_rank;
} framer;

static long count_tags(const char *data, size_t len, const char *tag)
{
    long n = 0;
    size_t tl = strlen(tag);
    for (const char *p = data, *end = data + len; (p = memmem(p, (size_t)(end - p), tag, tl));
         p += tl)
        n++;
    return n;
}

static int framer_write(void *ctx, const char *data, size_t len)
{
    framer *f = ctx;
    if (f->pieces > 0) {   /* piece 1 + r is rank r's <gpu> (the last, "</algo>", has none) */
        long el = count_tags(data, len, "<tb ") + count_tags(data, len, "<step ");
        if (el > f->max_elements) {
            f->max_elements = el;
            f->max_rank = f->pieces - 1;
        }
    }
    f->pieces++;
    size_t bound = ZSTD_compressBound(len);
    if (f->len + bound + 1 > f->cap) {
        size_t cap = f->cap ? f->cap : 1 << 16;
        while (cap < f->len + bound + 1)
            cap *= 2;
        char *n = realloc(f->buf, cap);
        if (!n)
            return CS_ENOMEM;
        f->buf = n;
        f->cap = cap;
    }
    size_t n = ZSTD_compressCCtx(f->cc, f->buf + f->len, f->cap - f->len, data, len, 3);
    if (ZSTD_isError(n))
        return CS_EINTERNAL;
    f->len += n;
    return CS_OK;
}

/* The frames of z: *n of them, the first max offsets (and the end) in off
 * (may be NULL); *plain gets the decoded size.  False when damaged. */
static bool zframes(const char *z, size_t zl, size_t *off, long max, long *n,
                    unsigned long long *plain)
{
    size_t at = 0;
    *n = 0;
    *plain = 0;
    while (at < zl) {
        size_t fl = ZSTD_findFrameCompressedSize(z + at, zl - at);
        unsigned long long cs = ZSTD_getFrameContentSize(z + at, zl - at);
        if (ZSTD_isError(fl) || cs == ZSTD_CONTENTSIZE_UNKNOWN || cs == ZSTD_CONTENTSIZE_ERROR)
            return false;
        if (off && *n < max)
            off[*n] = at;
        (*n)++;
        *plain += cs;
        at += fl;
    }
    if (off && *n < max)
        off[*n] = at;
    return true;
}

/* A framed MSCCL document of `ranks` ranks cut to ranks lo..hi (identity).
 * code_doc keeps only framed documents, so anything else is damage. */
static int cut_slice(const cs_blob *zdoc, int ranks, int lo, int hi, char **out, size_t *olen,
                     cs_error *err)
{
    long want = (long)ranks + 2, n = 0;
    size_t *off = malloc((size_t)(want + 1) * sizeof *off);
    if (!off)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    unsigned long long plain = 0;
    if (!zframes(zdoc->data, zdoc->len, off, want + 1, &n, &plain) || n != want) {
        free(off);
        return cs_error_set(err, CS_EINTERNAL, "", "the kept MSCCL document has %ld frames, "
                            "not one per rank plus 2 (%ld)", n, want);
    }
    long pick[3][2] = {{0, 0}, {1 + lo, 1 + hi}, {want - 1, want - 1}};
    size_t total = 0;
    for (int k = 0; k < 3; k++)
        for (long f = pick[k][0]; f <= pick[k][1]; f++)
            total += ZSTD_getFrameContentSize(zdoc->data + off[f], off[f + 1] - off[f]);
    char *text = malloc(total + 1);
    if (!text) {
        free(off);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    size_t at = 0;
    for (int k = 0; k < 3; k++)
        for (long f = pick[k][0]; f <= pick[k][1]; f++) {
            size_t got = ZSTD_decompress(text + at, total - at, zdoc->data + off[f],
                                         off[f + 1] - off[f]);
            if (ZSTD_isError(got)) {
                free(text);
                free(off);
                return cs_error_set(err, CS_EIO, "", "stored document is damaged: %s",
                                    ZSTD_getErrorName(got));
            }
            at += got;
        }
    text[at] = '\0';
    free(off);
    *out = text;
    *olen = at;
    return CS_OK;
}

/* A result whose schedule copies inside a copy-capable switch has no code
 * (codegen refuses it, naming the send and the switch).  The refusal adds
 * what to ask for instead: the same request with options.codegen, and that
 * request's key, so a client can POST it or look for it. */
static int refuse_switch_copies(cs_server *s, rdoc *d, const rep_req *r, int rc, cs_error *err)
{
    if (rc != CS_EUNSUPPORTED)
        return rc;
    char why[CS_ERROR_MESSAGE_MAX], key2[65] = "";
    snprintf(why, sizeof why, "%s", err->message);
    cs_error e2;
    if (d->request &&
        synth_request_key_with_codegen(d->request, strlen(d->request), &s->cfg.limits, key2,
                                       &e2) != CS_OK)
        key2[0] = '\0';
    if (key2[0] && strcmp(key2, d->key) != 0)
        return cs_error_set(err, CS_EUNSUPPORTED, "format",
                            "no %s for this result: %.330s; that request (\"options\": "
                            "{\"codegen\": \"%s\"}) has key %s",
                            r->xml ? "MSCCL XML" : "CUDA", why, r->xml ? "msccl-xml" : "cuda",
                            key2);
    return cs_error_set(err, CS_EUNSUPPORTED, "format", "no %s for this result: %.420s",
                        r->xml ? "MSCCL XML" : "CUDA", why);
}

/* Generates the document of r (never a slice for msccl-xml: see framer)
 * for frontier entry idx, zstd-compressed. */
static int generate_code(cs_server *s, rdoc *d, const rep_req *r, int idx, char **z,
                         size_t *zl, char *meta, cs_error *err)
{
    /* an MSCCL document is generated whole (its slices are cut from it):
     * bounded so a one-rank request cannot start minutes of work and GBs of
     * text.  Beyond it no MSCCL runtime could load a rank's part anyway
     * (2^22 sends is about 4,000 receives per rank at 1024 ranks). */
    long nsends = result_codec_nsends(d->view, idx);
    if (r->xml && nsends > DOC_MAX_SENDS)
        return cs_error_set(err, CS_ELIMIT, "format",
                            "this schedule has %ld sends; MSCCL documents are generated whole "
                            "(so that every rank's slice agrees) for at most %ld sends; a "
                            "hierarchical schedule (method \"hierarchical\") keeps per-rank "
                            "lists short",
                            nsends, (long)DOC_MAX_SENDS);
    const cs_topology *t = NULL;
    int rc = rdoc_topology(d, &t, err);
    if (rc)
        return rc;
    cs_algorithm *a = NULL;
    if ((rc = result_codec_decode_algorithm(d->view, idx, -1, -1, &a, err)))
        return rc;
    /* copies inside a switch: codegen refuses; the refusal names the
     * request that has code (refuse_switch_copies) */
    bool copies = a->switch_nodes > 0;
    char *body = NULL;
    size_t len = 0;
    if (r->xml) {
        cs_msccl_options mo;
        msccl_options_default(&mo);
        mo.runtime = r->runtime;
        if (r->proto)
            mo.proto = r->proto;
        mo.gpu_sms = r->gpu_sms;
        /* the whole document at once where that is one window: cluster
         * ranks have so many peers that small windows plan most sends many
         * times (msccl_xml.h, window_sends) */
        mo.window_sends = DOC_WINDOW_SENDS;
        /* each rank checked as a one-rank slice; every request's width is
         * checked against the document's fullest rank (slice_elements_ok) */
        mo.limit_gpus = 1;
        framer f = {ZSTD_createCCtx(), NULL, 0, 0, 0, 0, 0};
        if (!f.cc)
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        else
            rc = msccl_xml_write_ranks(a, t, &mo, 0, a->ranks - 1, framer_write, &f, err);
        if ((rc == CS_ENOMEM || rc == CS_EINTERNAL) && !err->message[0])
            cs_error_set(err, rc, "", "compressing the document failed");
        ZSTD_freeCCtx(f.cc);
        algorithm_free(a);
        if (rc) {
            free(f.buf);
            return copies ? refuse_switch_copies(s, d, r, rc, err) : rc;
        }
        count(&s->metrics.codegen_total);
        *z = f.buf;
        *zl = f.len;
        if (meta)
            snprintf(meta, 64, "%ld %d", f.max_elements, f.max_rank);
        return CS_OK;
    }
    cs_cuda_options co;
    cuda_options_default(&co);
    co.elem = r->elem;
    rc = r->rank_lo >= 0 ? cuda_generate_ranks(a, t, &co, r->rank_lo, r->rank_hi, &body, &len, err)
                         : cuda_generate(a, t, &co, &body, &len, err);
    algorithm_free(a);
    if (rc)
        return copies ? refuse_switch_copies(s, d, r, rc, err) : rc;
    count(&s->metrics.codegen_total);
    rc = encode_buffer(ENC_ZSTD, body, len, z, zl, err);
    free(body);
    return rc;
}

/* The stored document of r for entry idx, zstd-compressed: from memory,
 * the store, or generated now (and kept in both).  A document that cannot
 * be generated is *refused (a 422 error object), remembered: finding that
 * out can take as long as generating it.  msccl-xml documents from the
 * store that are not framed are generated again (`ranks` frames + 2). */
/* An MSCCL document's fullest rank ("ELEMENTS RANK": its <tb> and <step>
 * elements), kept beside the document (M| in memory, variant "|meta" in the
 * store): what every request's width is checked against. */
static bool meta_get(cs_server *s, const char *key, const char *format, const char *variant,
                     long *elements, int *rank)
{
    char mk[400], mv[320];
    snprintf(mk, sizeof mk, "M|%s|%s", key, variant);
    snprintf(mv, sizeof mv, "%s|meta", variant);
    cs_blob *m = cache_get(s->cache, mk);
    if (!m) {
        bool zstd = false, found = false;
        cs_error e;
        if (store_artifact_get(s->store, key, format, mv, &m, &zstd, &found, &e) != CS_OK ||
            !found)
            return false;
        if (zstd) {
            char *plain = NULL;
            size_t pl = 0;
            int rc = zstd_decode_buffer(m->data, m->len, &plain, &pl, &e);
            blob_unref(m);
            if (rc != CS_OK)
                return false;
            m = blob_adopt(plain, pl);
            if (!m)
                return false;
        }
        cache_put(s->cache, mk, m);
    }
    char text[64];
    snprintf(text, sizeof text, "%.*s", (int)(m->len < 63 ? m->len : 63), (const char *)m->data);
    blob_unref(m);
    return sscanf(text, "%ld %d", elements, rank) == 2;
}

static void meta_put(cs_server *s, const char *key, const char *format, const char *variant,
                     const char *text)
{
    char mk[400], mv[320];
    snprintf(mk, sizeof mk, "M|%s|%s", key, variant);
    snprintf(mv, sizeof mv, "%s|meta", variant);
    char *z = NULL, *copy = strdup(text);
    size_t zl = 0;
    cs_error e;
    if (encode_buffer(ENC_ZSTD, text, strlen(text), &z, &zl, &e) == CS_OK) {
        if (store_artifact_put(s->store, key, format, mv, z, zl, &e) != CS_OK)
            log_event(&s->log, LOG_WARN, "artifact_store_failed", "key", key, "error",
                      e.message, NULL);
        free(z);
    }
    cs_blob *b = copy ? blob_adopt(copy, strlen(copy)) : NULL;
    if (b) {
        cache_put(s->cache, mk, b);
        blob_unref(b);
    }
}

/* ---- one generation per document ---------------------------------------------------------
 *
 * A document is generated by one request at a time: the first slice
 * requests of a fresh key arrive together (every node's hook at once) and
 * each parse thread used to generate the same whole document (seconds and
 * ~460 MB each at 1024 ranks).  The first request leads; a request for a
 * document being generated joins its flight and returns with its connection
 * still suspended (holding no thread), and when the leader has kept the
 * document (or its refusal) each follower runs its handler again
 * (offload_rerun), which then cuts its slice from memory. */
typedef struct flight_waiter {
    req_state *rs;
    cs_offload_fn work;
    struct flight_waiter *next;
} flight_waiter;

struct cs_flight {
    char ck[400];
    flight_waiter *waiters;
    struct cs_flight *next;
};

/* Who may wait for another request's generation, and whether it did. */
typedef struct parker {
    req_state *rs;
    cs_offload_fn work;
    bool parked;                /* joined a flight: rs is no longer ours */
} parker;

typedef enum { FLIGHT_LEAD, FLIGHT_JOINED, FLIGHT_LANDED } flight_role;

/* Joins the flight of ck or starts it.  FLIGHT_LANDED: no flight, but the
 * document (or its refusal, remembered as gk) arrived since the caller
 * looked: look again. */
static flight_role flight_join(cs_server *s, const char *ck, const char *gk, parker *pk)
{
    pthread_mutex_lock(&s->flights_lock);
    for (cs_flight *f = s->flights; f; f = f->next)
        if (!strcmp(f->ck, ck)) {
            flight_waiter *w = malloc(sizeof *w);
            if (!w)
                break; /* generate it again rather than fail */
            *w = (flight_waiter){.rs = pk->rs, .work = pk->work, .next = f->waiters};
            f->waiters = w;
            pk->parked = true;
            pthread_mutex_unlock(&s->flights_lock);
            return FLIGHT_JOINED;
        }
    int code = 0;
    const char *ej = NULL;
    cs_blob *b = cache_get(s->cache, ck);
    if (!b)
        b = delivery_refusal(s->cache, 'G', gk, &code, &ej);
    if (b) {
        pthread_mutex_unlock(&s->flights_lock);
        blob_unref(b);
        return FLIGHT_LANDED;
    }
    cs_flight *f = calloc(1, sizeof *f);
    if (f) { /* without one, followers generate too: slower, still right */
        snprintf(f->ck, sizeof f->ck, "%s", ck);
        f->next = s->flights;
        s->flights = f;
    }
    pthread_mutex_unlock(&s->flights_lock);
    return FLIGHT_LEAD;
}

/* The leader's document (or refusal) is kept: its followers run again. */
static void flight_land(cs_server *s, const char *ck)
{
    pthread_mutex_lock(&s->flights_lock);
    cs_flight *f = NULL;
    for (cs_flight **pp = &s->flights; *pp; pp = &(*pp)->next)
        if (!strcmp((*pp)->ck, ck)) {
            f = *pp;
            *pp = f->next;
            break;
        }
    pthread_mutex_unlock(&s->flights_lock);
    if (!f)
        return;
    for (flight_waiter *w = f->waiters, *next; w; w = next) {
        next = w->next;
        count(&s->metrics.generation_waits);
        offload_rerun(w->rs, w->work);
        free(w);
    }
    free(f);
}

static int code_doc(cs_server *s, rdoc *d, const rep_req *r, int idx, cs_blob **out,
                    long *max_elements, int *max_rank, json_t **refused, parker *pk,
                    cs_error *err)
{
    bool looked_again = false;
again:;
    *out = NULL;
    *refused = NULL;
    *max_elements = -1;
    *max_rank = -1;
    char variant[300];
    snprintf(variant, sizeof variant, "%s|alg=%d", r->id, idx);
    char ck[400];
    snprintf(ck, sizeof ck, "A|%s|%s", d->key, variant);
    cs_blob *zdoc = cache_get(s->cache, ck);
    if (zdoc && (!r->xml || meta_get(s, d->key, r->format, variant, max_elements, max_rank))) {
        count(&s->metrics.rep_memory);
        *out = zdoc;
        return CS_OK;
    }
    blob_unref(zdoc);
    zdoc = NULL;
    bool zstd = false, found = false;
    int rc = store_artifact_get(s->store, d->key, r->format, variant, &zdoc, &zstd, &found, err);
    if (rc)
        return rc;
    if (found && !zstd) {
        char *z = NULL;
        size_t zl = 0;
        rc = encode_buffer(ENC_ZSTD, zdoc->data, zdoc->len, &z, &zl, err);
        blob_unref(zdoc);
        zdoc = rc ? NULL : blob_adopt(z, zl);
        if (rc)
            return rc;
    }
    if (found && r->xml && zdoc) {
        long n = 0;
        unsigned long long plain = 0;
        if (!zframes(zdoc->data, zdoc->len, NULL, 0, &n, &plain) ||
            n != (long)d->summary->algs[idx]->ranks + 2 ||
            !meta_get(s, d->key, r->format, variant, max_elements, max_rank)) {
            blob_unref(zdoc);
            zdoc = NULL;
            found = false;
        }
    }
    if (found) {
        count(&s->metrics.rep_store);
    } else {
        char gk[80];
        snprintf(gk, sizeof gk, "%016llx", (unsigned long long)fnv1a(ck, 1469598103934665603ULL));
        int code = 0;
        const char *ej = NULL;
        cs_blob *known = delivery_refusal(s->cache, 'G', gk, &code, &ej);
        if (known) {
            count(&s->metrics.refusals_remembered);
            *refused = json_loads(ej, 0, NULL);
            blob_unref(known);
            return CS_OK;
        }
        bool lead = false;
        if (pk) {
            flight_role role = flight_join(s, ck, gk, pk);
            if (role == FLIGHT_JOINED)
                return CS_OK; /* *out NULL, pk->parked: rs belongs to the flight now */
            if (role == FLIGHT_LANDED && !looked_again) {
                looked_again = true;
                goto again;
            }
            lead = role == FLIGHT_LEAD;
        }
        char *z = NULL;
        size_t zl = 0;
        char meta[64] = "";
        rc = generate_code(s, d, r, idx, &z, &zl, meta, err);
        if (rc) {
            if (rc != CS_EUNSUPPORTED && rc != CS_ELIMIT) {
                if (lead)
                    flight_land(s, ck); /* they try again themselves */
                return rc;
            }
            const char *field = err->field[0] ? err->field : "format";
            json_t *e = json_pack("{s:s, s:s, s:s}", "code", cs_status_name(rc), "message",
                                  err->message, "field", field);
            char *text = e ? json_dumps(e, JSON_COMPACT) : NULL;
            if (text)
                delivery_remember_refusal(s->cache, 'G', gk, rc, text);
            free(text);
            *refused = e;
            if (lead)
                flight_land(s, ck);
            return CS_OK;
        }
        count(&s->metrics.rep_generated);
        cs_error e2;
        if (store_artifact_put(s->store, d->key, r->format, variant, z, zl, &e2) != CS_OK)
            log_event(&s->log, LOG_WARN, "artifact_store_failed", "key", d->key, "error",
                      e2.message, NULL);
        if (r->xml) {
            meta_put(s, d->key, r->format, variant, meta);
            if (sscanf(meta, "%ld %d", max_elements, max_rank) != 2)
                *max_elements = -1;
        }
        zdoc = blob_adopt(z, zl);
        if (zdoc)
            cache_put(s->cache, ck, zdoc); /* before the followers look */
        if (lead)
            flight_land(s, ck);
        if (!zdoc)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        *out = zdoc;
        return CS_OK;
    }
    if (!zdoc)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    cache_put(s->cache, ck, zdoc);
    *out = zdoc;
    return CS_OK;
}

/* pk (may be NULL) lets the request wait for another one generating the
 * same document; when it does (pk->parked), rs is not touched again. */
static enum MHD_Result send_code(req_state *rs, cs_blob *holder, const rep_req *r,
                                 const char *etag, parker *pk)
{
    cs_server *s = rs->srv;
    rdoc *d = rdoc_of(holder);
    cs_error err;
    cs_error_clear(&err);
    int idx = 0;
    if (pick_alg(d, r, &idx, &err) || check_slice(d, r, &err))
        return respond_cs_error(rs, &err);
    if (d->summary->nalgs == 0)
        return respond_error(rs, 404, "not_found", "key", "the result has no algorithm");
    /* an MSCCL slice comes from the whole document: the same request
     * without its ranks */
    bool cut = r->xml && r->rank_lo >= 0;
    rep_req whole = *r;
    if (cut) {
        whole.rank_lo = whole.rank_hi = -1;
        char *p = strstr(whole.id, "|ranks=");
        if (p)
            *p = '\0';
    }
    cs_blob *zdoc = NULL;
    json_t *refused = NULL;
    long max_el = -1;
    int max_rank = -1;
    if (code_doc(s, d, &whole, idx, &zdoc, &max_el, &max_rank, &refused, pk, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (pk && pk->parked)
        return MHD_YES;
    if (refused)
        return respond_json(rs, 422, json_pack("{s:o}", "error", refused));
    if (r->xml && r->runtime != CS_MSCCL_RUNTIME_EXECUTOR && max_el >= 0) {
        /* the NCCL fork parses the <algo>, every <gpu> present and its own
         * rank's elements: fewer than 4096, whatever width was asked; the
         * same answer for every slice of this width */
        int width = cut ? r->rank_hi - r->rank_lo + 1 : d->summary->algs[idx]->ranks;
        long elements = 1 + width + max_el;
        if (elements >= MSCCL_MAX_ELEMENTS) {
            long fits = MSCCL_MAX_ELEMENTS - 2 - max_el;
            blob_unref(zdoc);
            char msg[512];
            int n = snprintf(msg, sizeof msg,
                             "rank %d's part has %ld XML elements (1 <algo>, %d <gpu>, %ld <tb> "
                             "and <step>); %s reads fewer than %d per rank; ",
                             max_rank, elements, width, max_el,
                             r->runtime == CS_MSCCL_RUNTIME_MSCCL
                                 ? "the msccl runtime"
                                 : "runtime auto (a form both runtimes accept)",
                             MSCCL_MAX_ELEMENTS);
            if (fits >= 1)
                snprintf(msg + n, sizeof msg - (size_t)n,
                         "slices of at most %ld ranks fit (?ranks=A-B)", fits);
            else
                snprintf(msg + n, sizeof msg - (size_t)n,
                         "a hierarchical schedule keeps per-rank lists short");
            json_t *e = json_pack("{s:s, s:s, s:s}", "code", "limit", "message", msg, "field",
                                  "runtime");
            return respond_json(rs, 422, json_pack("{s:o}", "error", e));
        }
    }
    enum MHD_Result ret;
    if (cut) {
        char *text = NULL;
        size_t len = 0;
        int rc = cut_slice(zdoc, d->summary->algs[idx]->ranks, r->rank_lo, r->rank_hi, &text,
                           &len, &err);
        blob_unref(zdoc);
        if (rc)
            return respond_cs_error(rs, &err);
        cs_blob *b = keep_rep(s, d->key, r, ENC_IDENTITY, text, len);
        ret = b ? send_small(rs, 200, d->key, r, b, etag)
                : respond_error(rs, 500, "internal", "", "out of memory");
        blob_unref(b);
        return ret;
    }
    if (r->enc == ENC_ZSTD) {
        cs_blob *kept = keep_rep_blob(s, d->key, r, ENC_ZSTD, zdoc);
        ret = send_blob(rs, 200, kept, content_type(r), etag, ENC_ZSTD);
        blob_unref(kept);
    } else {
        long nframes = 0;
        unsigned long long size = 0;
        bool sized = zframes(zdoc->data, zdoc->len, NULL, 0, &nframes, &size);
        if (sized && size <= memory_doc_max(s)) {
            char *plain = NULL;
            size_t pl = 0;
            if (zstd_decode_buffer(zdoc->data, zdoc->len, &plain, &pl, &err) != CS_OK) {
                blob_unref(zdoc);
                return respond_cs_error(rs, &err);
            }
            cs_blob *b = keep_rep(s, d->key, r, ENC_IDENTITY, plain, pl);
            ret = b ? send_small(rs, 200, d->key, r, b, etag)
                    : respond_error(rs, 500, "internal", "", "out of memory");
            blob_unref(b);
        } else {
            rstream *st = rstream_new(s, d->key, zdoc);
            if (!st || zsource_new(zdoc->data, zdoc->len, &st->z, &err) != CS_OK) {
                rstream_free(st);
                blob_unref(zdoc);
                return respond_error(rs, 500, "internal", "", "out of memory");
            }
            ret = send_stream(rs, 200, st, content_type(r), etag, r->enc);
        }
    }
    blob_unref(zdoc);
    return ret;
}

/* ---- the routes ------------------------------------------------------------------------- */

static bool is_key(const char *s)
{
    if (strlen(s) != 64)
        return false;
    for (int i = 0; i < 64; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    return true;
}

/* A representation already in memory, in the coding asked for. */
static cs_blob *memory_rep(cs_server *s, const char *key, const rep_req *r)
{
    char ck[400];
    rep_cache_key(ck, sizeof ck, key, r->id, r->enc);
    return cache_get(s->cache, ck);
}

static enum MHD_Result result_get(req_state *rs, const char *key, bool on_http_thread,
                                  bool *parked);

static bool result_get_work(req_state *rs)
{
    char key[65];
    snprintf(key, sizeof key, "%s", rs->key);
    bool parked = false;
    result_get(rs, key, false, &parked);
    return !parked; /* parked: the flight runs this again (flight_land) */
}

enum MHD_Result delivery_result_get(req_state *rs, const char *key)
{
    return result_get(rs, key, true, NULL);
}

/* On an HTTP thread only what memory answers (a kept representation, a 304
 * for one); anything that reads the store or generates goes to the parse
 * pool (offload), so a slow document never holds up other connections. */
static enum MHD_Result result_get(req_state *rs, const char *key, bool on_http_thread,
                                  bool *parked)
{
    cs_server *s = rs->srv;
    if (!is_key(key))
        return respond_error(rs, 400, "invalid", "key", "a result key is 64 lowercase hex digits");
    snprintf(rs->key, sizeof rs->key, "%s", key);
    rep_req r;
    enum MHD_Result answer = MHD_NO;
    if (!parse_rep(rs, &r, false, &answer))
        return answer;
    cs_blob *mem = memory_rep(s, key, &r);
    const rep_answers *kept = answers_of(mem);
    char etag_buf[96];
    const char *etag = kept ? kept->etag : etag_buf;
    if (!kept)
        make_etag(etag_buf, sizeof etag_buf, key, r.id, r.enc);
    const char *inm = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "If-None-Match");
    bool matches = etag_matches(inm, etag);
    if (on_http_thread && !mem && (matches || !delivery_result_in_memory(s, key) || !r.json))
        return offload(rs, result_get_work);
    enum MHD_Result ret = MHD_NO;
    if (matches && (mem || delivery_result_known(s, key))) {
        count(&s->metrics.not_modified);
        count(&s->metrics.cache_hits);
        bool shared = kept && queue_shared(rs, 304, kept->not_modified, &ret);
        blob_unref(mem);
        if (shared)
            return ret;
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        add_rep_headers(resp, etag, ENC_IDENTITY, NULL);
        return queue(rs, 304, resp);
    }
    if (mem) {
        count(&s->metrics.cache_hits);
        count(&s->metrics.memory_hits);
        count(&s->metrics.rep_memory);
        if (!(kept && queue_shared(rs, 200, kept->ok, &ret)))
            ret = send_blob(rs, 200, mem, content_type(&r), etag, r.enc);
        blob_unref(mem);
        return ret;
    }
    cs_blob *holder = NULL;
    bool found = false, from_memory = false;
    cs_error err;
    cs_error_clear(&err);
    if (rdoc_get(s, key, &holder, &found, &from_memory, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (!found) {
        count(&s->metrics.cache_misses);
        return respond_error(rs, 404, "not_found", "key", "no result for key %s", key);
    }
    count(&s->metrics.cache_hits);
    if (from_memory)
        count(&s->metrics.memory_hits);
    parker pk = {.rs = rs, .work = result_get_work};
    ret = r.json ? send_json(rs, 200, holder, &r, etag)
                 : send_code(rs, holder, &r, etag, parked ? &pk : NULL);
    blob_unref(holder);
    if (parked)
        *parked = pk.parked;
    return ret;
}

enum MHD_Result delivery_respond_result(req_state *rs, bool *missing)
{
    cs_server *s = rs->srv;
    *missing = false;
    rep_req r;
    enum MHD_Result answer = MHD_NO;
    if (!parse_rep(rs, &r, true, &answer))
        return answer;
    char etag[96];
    make_etag(etag, sizeof etag, rs->key, r.id, r.enc);
    cs_blob *mem = memory_rep(s, rs->key, &r);
    if (mem) {
        count(&s->metrics.memory_hits);
        count(&s->metrics.rep_memory);
        enum MHD_Result ret = send_blob(rs, 200, mem, content_type(&r), etag, r.enc);
        blob_unref(mem);
        return ret;
    }
    cs_blob *holder = NULL;
    bool found = false, from_memory = false;
    cs_error err;
    cs_error_clear(&err);
    if (rdoc_get(s, rs->key, &holder, &found, &from_memory, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (!found) {
        *missing = true;
        return MHD_YES;
    }
    if (from_memory)
        count(&s->metrics.memory_hits);
    enum MHD_Result ret = send_json(rs, 200, holder, &r, etag);
    blob_unref(holder);
    return ret;
}

enum MHD_Result delivery_respond_job(req_state *rs, char *job_text, const char *key)
{
    cs_server *s = rs->srv;
    size_t tl = strlen(job_text);
    rep_req r;
    enum MHD_Result answer = MHD_NO;
    if (!parse_rep(rs, &r, true, &answer)) {
        free(job_text);
        return answer;
    }
    cs_blob *holder = NULL;
    bool found = false, from_memory = false;
    cs_error err;
    cs_error_clear(&err);
    if (rdoc_get(s, key, &holder, &found, &from_memory, &err) != CS_OK) {
        free(job_text);
        return respond_cs_error(rs, &err);
    }
    if (!found) {
        free(job_text);
        return respond_error(rs, 500, "internal", "", "job done but its result is missing");
    }
    rdoc *d = rdoc_of(holder);
    cs_result_writer *w = NULL;
    long estimate = 0;
    int idx = 0;
    if (open_writer(s, d, &r, idx, &w, &estimate, &err) != CS_OK) {
        blob_unref(holder);
        free(job_text);
        return respond_cs_error(rs, &err);
    }
    rstream *st = rstream_new(s, key, holder);
    blob_unref(holder);
    if (!st || tl < 2 || job_text[tl - 1] != '}') {
        result_writer_free(w);
        rstream_free(st);
        free(job_text);
        return respond_error(rs, 500, "internal", "", "cannot write the job document");
    }
    /* {...job...} -> {...job...,"result":DOC} */
    job_text[tl - 1] = '\0';
    size_t plen = tl - 1 + strlen(",\"result\":");
    st->prefix = malloc(plen + 1);
    st->suffix = strdup("}");
    if (!st->prefix || !st->suffix) {
        result_writer_free(w);
        rstream_free(st);
        free(job_text);
        return respond_error(rs, 500, "internal", "", "out of memory");
    }
    snprintf(st->prefix, plen + 1, "%s,\"result\":", job_text);
    free(job_text);
    st->plen = plen;
    st->slen = 1;
    st->w = w;
    if ((size_t)estimate <= memory_doc_max(s)) {
        char *text = NULL;
        size_t len = 0;
        int rc = drain_source(rstream_source, st, &text, &len, &err);
        rstream_free(st);
        if (rc)
            return respond_cs_error(rs, &err);
        char *out = text;
        size_t olen = len;
        if (r.enc != ENC_IDENTITY) {
            rc = encode_buffer(r.enc, text, len, &out, &olen, &err);
            free(text);
            if (rc)
                return respond_cs_error(rs, &err);
        }
        struct MHD_Response *resp =
            MHD_create_response_from_buffer(olen, out, MHD_RESPMEM_MUST_FREE);
        if (!resp) {
            free(out);
            return MHD_NO;
        }
        add_rep_headers(resp, NULL, r.enc, "application/json");
        return queue(rs, 200, resp);
    }
    return send_stream(rs, 200, st, "application/json", NULL, r.enc);
}
