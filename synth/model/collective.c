/*
 * collective.c - collective kinds, their JSON form and their pre- and
 * postconditions (collective.h, CONTRACT.md section 2).
 *
 * Builtin kinds never materialize tables: pre/post/source are arithmetic on
 * the chunk number, so synthesizers can ask about (chunk, rank) pairs of a
 * 40,000-rank allgather in O(1).  Custom collectives are given as explicit
 * [chunk, rank] pairs; collective_validate() turns them into a packed 2-bit
 * table (pre, post) per (chunk, rank) once the rank count is known, bounded
 * by CUSTOM_MAX_CELLS so a hostile document cannot ask for gigabytes.
 *
 * Lower bounds (collective_bounds) live in bounds.c.
 */
#include "collective.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUSTOM_MAX_CHUNKS (1L << 24)
#define CUSTOM_MAX_PAIRS (1L << 24)
#define CUSTOM_MAX_CELLS (1L << 28)   /* chunks x ranks, 2 bits each: 64 MB */

static const char *const kind_names[CS_COLL_KIND_COUNT] = {
    "allgather", "reducescatter", "allreduce", "broadcast", "reduce",
    "gather",    "scatter",       "alltoall",  "custom",
};

const char *collective_kind_name(cs_coll_kind kind)
{
    if ((int)kind < 0 || kind >= CS_COLL_KIND_COUNT)
        return "unknown";
    return kind_names[kind];
}

int collective_kind_from_name(const char *name, cs_coll_kind *kind)
{
    for (int k = 0; name && k < CS_COLL_KIND_COUNT; k++)
        if (strcmp(name, kind_names[k]) == 0) {
            *kind = (cs_coll_kind)k;
            return CS_OK;
        }
    return CS_EINVAL;
}

const char *collective_kind_suggest(const char *name)
{
    return name ? cs_nearest_name(name, strlen(name), kind_names, CS_COLL_KIND_COUNT) : NULL;
}

bool collective_kind_is_combining(cs_coll_kind kind)
{
    return kind == CS_COLL_REDUCESCATTER || kind == CS_COLL_REDUCE || kind == CS_COLL_ALLREDUCE;
}

bool collective_kind_is_rooted(cs_coll_kind kind)
{
    return kind == CS_COLL_BROADCAST || kind == CS_COLL_REDUCE || kind == CS_COLL_GATHER ||
           kind == CS_COLL_SCATTER;
}

void collective_init(cs_collective *c, cs_coll_kind kind, int root)
{
    memset(c, 0, sizeof *c);
    c->kind = kind;
    c->root = collective_kind_is_rooted(kind) ? root : -1;
}

void collective_free(cs_collective *c)
{
    if (!c)
        return;
    free(c->pre);
    free(c->post);
    free(c->custom_bits);
    c->pre = c->post = NULL;
    c->custom_bits = NULL;
    c->npre = c->npost = 0;
    c->custom_ranks = 0;
}

/* ---- JSON ---------------------------------------------------------------------- */

static int accepted_kinds(char *buf, size_t size)
{
    size_t used = 0;
    for (int k = 0; k < CS_COLL_KIND_COUNT && used < size; k++)
        used += (size_t)snprintf(buf + used, size - used, "%s%s", k ? ", " : "", kind_names[k]);
    return CS_OK;
}

static int parse_pairs(const json_t *arr, const char *key, long global_chunks, int **out,
                       int *n, cs_error *err)
{
    char f[CS_ERROR_FIELD_MAX];
    snprintf(f, sizeof f, "collective.%s", key);
    *out = NULL;
    *n = 0;
    if (!arr)
        return cs_error_set(err, CS_EINVAL, f, "required for kind custom");
    if (!json_is_array(arr))
        return cs_error_set(err, CS_EINVAL, f, "must be an array of [chunk, rank] pairs");
    size_t len = json_array_size(arr);
    if ((long)len > CUSTOM_MAX_PAIRS)
        return cs_error_set(err, CS_ELIMIT, f, "more than %ld pairs", CUSTOM_MAX_PAIRS);
    int *pairs = malloc(sizeof(int) * 2 * (len > 0 ? len : 1));
    if (!pairs)
        return cs_error_set(err, CS_ENOMEM, f, "out of memory");
    for (size_t i = 0; i < len; i++) {
        json_t *p = json_array_get(arr, i);
        char g[CS_ERROR_FIELD_MAX];
        snprintf(g, sizeof g, "collective.%s[%zu]", key, i);
        int rc = CS_OK;
        if (!json_is_array(p) || json_array_size(p) != 2 ||
            !json_is_integer(json_array_get(p, 0)) || !json_is_integer(json_array_get(p, 1))) {
            rc = cs_error_set(err, CS_EINVAL, g, "must be a pair [chunk, rank] of integers");
        } else {
            long long chunk = json_integer_value(json_array_get(p, 0));
            long long rank = json_integer_value(json_array_get(p, 1));
            if (chunk < 0 || chunk >= global_chunks)
                rc = cs_error_set(err, CS_EINVAL, g, "chunk %lld out of range 0..%ld", chunk,
                                  global_chunks - 1);
            else if (rank < 0 || rank > 0x7fffffff)
                rc = cs_error_set(err, CS_EINVAL, g, "rank %lld out of range", rank);
            pairs[2 * i] = (int)chunk;
            pairs[2 * i + 1] = (int)rank;
        }
        if (rc) {
            free(pairs);
            return rc;
        }
    }
    *out = pairs;
    *n = (int)len;
    return CS_OK;
}

/* A demand matrix (TE-CCL's form): demand[s][d] = chunks rank s sends to
 * rank d.  It becomes the custom collective with one global chunk per unit,
 * numbered row by row: pre [g, s], post [g, d]. */
static int demand_to_custom(const json_t *m, cs_collective *out, cs_error *err)
{
    if (!json_is_array(m) || json_array_size(m) < 1)
        return cs_error_set(err, CS_EINVAL, "collective.demand",
                            "must be a square array of arrays of chunk counts");
    size_t P = json_array_size(m);
    long total = 0;
    for (size_t s = 0; s < P; s++) {
        const json_t *row = json_array_get(m, s);
        if (!json_is_array(row) || json_array_size(row) != P)
            return cs_error_set(err, CS_EINVAL, "collective.demand",
                                "row %zu must be an array of %zu chunk counts (a square matrix)", s,
                                P);
        for (size_t d = 0; d < P; d++) {
            const json_t *v = json_array_get(row, d);
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > CUSTOM_MAX_CHUNKS)
                return cs_error_set(err, CS_EINVAL, "collective.demand",
                                    "demand[%zu][%zu] must be a chunk count in 0..%ld", s, d,
                                    CUSTOM_MAX_CHUNKS);
            if (s != d)
                total += (long)json_integer_value(v);
            if (total > CUSTOM_MAX_CHUNKS)
                return cs_error_set(err, CS_EINVAL, "collective.demand",
                                    "the demand adds up to more than %ld chunks", CUSTOM_MAX_CHUNKS);
        }
    }
    if (total < 1)
        return cs_error_set(err, CS_EINVAL, "collective.demand",
                            "the demand moves nothing (every off-diagonal count is 0)");
    out->kind = CS_COLL_CUSTOM;
    out->custom_global_chunks = (int)total;
    out->pre = malloc(sizeof(int) * 2 * (size_t)total);
    out->post = malloc(sizeof(int) * 2 * (size_t)total);
    if (!out->pre || !out->post) {
        collective_free(out);
        return cs_error_set(err, CS_ENOMEM, "collective.demand", "out of memory");
    }
    int g = 0;
    for (size_t s = 0; s < P; s++)
        for (size_t d = 0; d < P; d++) {
            if (s == d)
                continue;
            long n = (long)json_integer_value(json_array_get(json_array_get(m, s), d));
            for (long i = 0; i < n; i++, g++) {
                out->pre[2 * g] = g;
                out->pre[2 * g + 1] = (int)s;
                out->post[2 * g] = g;
                out->post[2 * g + 1] = (int)d;
            }
        }
    out->npre = out->npost = g;
    return CS_OK;
}

int collective_from_json(const json_t *doc, cs_collective *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    out->root = -1;
    if (!json_is_object(doc))
        return cs_error_set(err, CS_EINVAL, "collective", "must be an object like "
                                                          "{\"kind\": \"allgather\"}");
    char kinds[256];
    accepted_kinds(kinds, sizeof kinds);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)doc, key, v) {
        if (strcmp(key, "kind") && strcmp(key, "root") && strcmp(key, "global_chunks") &&
            strcmp(key, "pre") && strcmp(key, "post") && strcmp(key, "demand")) {
            char f[CS_ERROR_FIELD_MAX];
            snprintf(f, sizeof f, "collective.%.60s", key);
            return cs_error_set(err, CS_EINVAL, f,
                                "unknown key \"%s\" (accepted: kind, root, global_chunks, pre, "
                                "post, demand)", key);
        }
    }
    json_t *jk = json_object_get(doc, "kind");
    if (!jk)
        return cs_error_set(err, CS_EINVAL, "collective.kind", "required (one of %s)", kinds);
    if (!json_is_string(jk))
        return cs_error_set(err, CS_EINVAL, "collective.kind", "must be a string (one of %s)",
                            kinds);
    cs_coll_kind kind;
    if (collective_kind_from_name(json_string_value(jk), &kind)) {
        const char *near = collective_kind_suggest(json_string_value(jk));
        char hint[64] = "";
        if (near)
            snprintf(hint, sizeof hint, "; did you mean \"%s\"?", near);
        return cs_error_set(err, CS_EINVAL, "collective.kind",
                            "unknown kind \"%.64s\"%s (accepted: %s)", json_string_value(jk),
                            hint, kinds);
    }
    out->kind = kind;
    json_t *jr = json_object_get(doc, "root");
    if (collective_kind_is_rooted(kind)) {
        if (!jr)
            return cs_error_set(err, CS_EINVAL, "collective.root", "required for kind %s",
                                kind_names[kind]);
        if (!json_is_integer(jr) || json_integer_value(jr) < 0 ||
            json_integer_value(jr) > 0x7fffffff)
            return cs_error_set(err, CS_EINVAL, "collective.root",
                                "must be a non-negative integer rank");
        out->root = (int)json_integer_value(jr);
    } else if (jr && !json_is_null(jr)) {
        return cs_error_set(err, CS_EINVAL, "collective.root",
                            "kind %s has no root (rooted kinds: broadcast, reduce, gather, "
                            "scatter)", kind_names[kind]);
    }
    bool has_custom = json_object_get(doc, "global_chunks") || json_object_get(doc, "pre") ||
                      json_object_get(doc, "post");
    if (kind == CS_COLL_CUSTOM && json_object_get(doc, "demand")) {
        if (has_custom)
            return cs_error_set(err, CS_EINVAL, "collective.demand",
                                "give either demand or global_chunks, pre and post");
        return demand_to_custom(json_object_get(doc, "demand"), out, err);
    }
    if (json_object_get(doc, "demand"))
        return cs_error_set(err, CS_EINVAL, "collective.demand", "only kind custom takes demand");
    if (kind != CS_COLL_CUSTOM) {
        if (has_custom)
            return cs_error_set(err, CS_EINVAL,
                                json_object_get(doc, "global_chunks") ? "collective.global_chunks"
                                : json_object_get(doc, "pre")         ? "collective.pre"
                                                                      : "collective.post",
                                "only kind custom takes global_chunks, pre and post");
        return CS_OK;
    }
    json_t *jg = json_object_get(doc, "global_chunks");
    if (!jg)
        return cs_error_set(err, CS_EINVAL, "collective.global_chunks",
                            "required for kind custom");
    if (!json_is_integer(jg) || json_integer_value(jg) < 1 ||
        json_integer_value(jg) > CUSTOM_MAX_CHUNKS)
        return cs_error_set(err, CS_EINVAL, "collective.global_chunks",
                            "must be an integer between 1 and %ld", CUSTOM_MAX_CHUNKS);
    out->custom_global_chunks = (int)json_integer_value(jg);
    int rc = parse_pairs(json_object_get(doc, "pre"), "pre", out->custom_global_chunks, &out->pre,
                         &out->npre, err);
    if (rc == CS_OK)
        rc = parse_pairs(json_object_get(doc, "post"), "post", out->custom_global_chunks,
                         &out->post, &out->npost, err);
    if (rc)
        collective_free(out);
    return rc;
}

static json_t *pairs_json(const int *pairs, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_pack("[ii]", pairs[2 * i], pairs[2 * i + 1]));
    return a;
}

json_t *collective_to_json(const cs_collective *c)
{
    if (!c)
        return NULL;
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string(collective_kind_name(c->kind)));
    if (collective_kind_is_rooted(c->kind))
        json_object_set_new(o, "root", json_integer(c->root));
    if (c->kind == CS_COLL_CUSTOM) {
        json_object_set_new(o, "global_chunks", json_integer(c->custom_global_chunks));
        json_object_set_new(o, "pre", pairs_json(c->pre, c->npre));
        json_object_set_new(o, "post", pairs_json(c->post, c->npost));
    }
    return o;
}

/* ---- validation ---------------------------------------------------------------- */

static size_t cell(const cs_collective *c, long chunk, int rank)
{
    return (size_t)chunk * (size_t)c->custom_ranks + (size_t)rank;
}

static bool bit(const cs_collective *c, long chunk, int rank, int which)
{
    size_t b = cell(c, chunk, rank) * 2 + (size_t)which;
    return (c->custom_bits[b / 8] >> (b % 8)) & 1;
}

static void set_bit(cs_collective *c, long chunk, int rank, int which)
{
    size_t b = cell(c, chunk, rank) * 2 + (size_t)which;
    c->custom_bits[b / 8] |= (unsigned char)(1u << (b % 8));
}

int collective_validate(cs_collective *c, int ranks, cs_error *err)
{
    if (!c || (int)c->kind < 0 || c->kind >= CS_COLL_KIND_COUNT)
        return cs_error_set(err, CS_EINVAL, "collective.kind", "unknown collective kind");
    if (ranks < 1)
        return cs_error_set(err, CS_EINVAL, "ranks", "a collective needs at least 1 rank");
    if (collective_kind_is_rooted(c->kind) && (c->root < 0 || c->root >= ranks))
        return cs_error_set(err, CS_EINVAL, "collective.root",
                            "root %d out of range 0..%d for %d ranks", c->root, ranks - 1, ranks);
    if (c->kind != CS_COLL_CUSTOM)
        return CS_OK;
    long g = c->custom_global_chunks;
    if (g < 1)
        return cs_error_set(err, CS_EINVAL, "collective.global_chunks", "must be >= 1");
    if (g * (long)ranks > CUSTOM_MAX_CELLS)
        return cs_error_set(err, CS_ELIMIT, "collective.global_chunks",
                            "%ld chunks x %d ranks is more than %ld", g, ranks, CUSTOM_MAX_CELLS);
    for (int w = 0; w < 2; w++) {
        const int *p = w ? c->post : c->pre;
        int n = w ? c->npost : c->npre;
        for (int i = 0; i < n; i++) {
            char f[CS_ERROR_FIELD_MAX];
            snprintf(f, sizeof f, "collective.%s[%d]", w ? "post" : "pre", i);
            if (p[2 * i] < 0 || p[2 * i] >= g)
                return cs_error_set(err, CS_EINVAL, f, "chunk %d out of range 0..%ld", p[2 * i],
                                    g - 1);
            if (p[2 * i + 1] < 0 || p[2 * i + 1] >= ranks)
                return cs_error_set(err, CS_EINVAL, f, "rank %d out of range 0..%d",
                                    p[2 * i + 1], ranks - 1);
        }
    }
    free(c->custom_bits);
    c->custom_ranks = ranks;
    c->custom_bits = calloc(((size_t)g * (size_t)ranks * 2 + 7) / 8, 1);
    if (!c->custom_bits)
        return cs_error_set(err, CS_ENOMEM, "collective", "out of memory");
    for (int i = 0; i < c->npre; i++)
        set_bit(c, c->pre[2 * i], c->pre[2 * i + 1], 0);
    for (int i = 0; i < c->npost; i++)
        set_bit(c, c->post[2 * i], c->post[2 * i + 1], 1);
    /* A chunk that must arrive somewhere must start somewhere. */
    unsigned char *has_pre = calloc((size_t)g, 1);
    if (!has_pre)
        return cs_error_set(err, CS_ENOMEM, "collective", "out of memory");
    for (int i = 0; i < c->npre; i++)
        has_pre[c->pre[2 * i]] = 1;
    int rc = CS_OK;
    for (int i = 0; i < c->npost && rc == CS_OK; i++)
        if (!has_pre[c->post[2 * i]]) {
            char f[CS_ERROR_FIELD_MAX];
            snprintf(f, sizeof f, "collective.post[%d]", i);
            rc = cs_error_set(err, CS_EINVAL, f, "chunk %d is required at rank %d but no pre "
                                                 "pair says where it starts",
                              c->post[2 * i], c->post[2 * i + 1]);
        }
    free(has_pre);
    return rc;
}

int collective_copy(cs_collective *dst, const cs_collective *src, cs_error *err)
{
    *dst = *src;
    dst->pre = dst->post = NULL;
    dst->custom_bits = NULL;
    if (src->npre > 0 && !(dst->pre = malloc(sizeof(int) * 2 * (size_t)src->npre)))
        goto nomem;
    if (src->npost > 0 && !(dst->post = malloc(sizeof(int) * 2 * (size_t)src->npost)))
        goto nomem;
    if (src->npre > 0)
        memcpy(dst->pre, src->pre, sizeof(int) * 2 * (size_t)src->npre);
    if (src->npost > 0)
        memcpy(dst->post, src->post, sizeof(int) * 2 * (size_t)src->npost);
    if (src->custom_bits) {
        size_t bytes = ((size_t)src->custom_global_chunks * (size_t)src->custom_ranks * 2 + 7) / 8;
        if (!(dst->custom_bits = malloc(bytes)))
            goto nomem;
        memcpy(dst->custom_bits, src->custom_bits, bytes);
    }
    return CS_OK;
nomem:
    collective_free(dst);
    return cs_error_set(err, CS_ENOMEM, "collective", "out of memory");
}

/* ---- queries ------------------------------------------------------------------- */

long collective_global_chunks(const cs_collective *c, int ranks, int chunks)
{
    long p = ranks, k = chunks;
    switch (c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_GATHER:
    case CS_COLL_SCATTER:
    case CS_COLL_REDUCESCATTER:
        return p * k;
    case CS_COLL_BROADCAST:
    case CS_COLL_REDUCE:
    case CS_COLL_ALLREDUCE:
        return k;
    case CS_COLL_ALLTOALL:
        return p * p * k;
    case CS_COLL_CUSTOM:
        return c->custom_global_chunks;
    default:
        return 0;
    }
}

bool collective_pre(const cs_collective *c, int ranks, int chunks, long chunk, int rank)
{
    (void)chunks;
    long p = ranks;
    switch (c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_GATHER:
    case CS_COLL_ALLTOALL:
        return chunk % p == rank;
    case CS_COLL_SCATTER:
    case CS_COLL_BROADCAST:
        return rank == c->root;
    case CS_COLL_REDUCESCATTER:
    case CS_COLL_REDUCE:
    case CS_COLL_ALLREDUCE:
        return true;
    case CS_COLL_CUSTOM:
        if (!c->custom_bits || rank < 0 || rank >= c->custom_ranks || chunk < 0 ||
            chunk >= c->custom_global_chunks)
            return false;
        return bit(c, chunk, rank, 0);
    default:
        return false;
    }
}

bool collective_post(const cs_collective *c, int ranks, int chunks, long chunk, int rank)
{
    (void)chunks;
    long p = ranks;
    switch (c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_BROADCAST:
    case CS_COLL_ALLREDUCE:
        return true;
    case CS_COLL_GATHER:
    case CS_COLL_REDUCE:
        return rank == c->root;
    case CS_COLL_SCATTER:
    case CS_COLL_REDUCESCATTER:
        return chunk % p == rank;
    case CS_COLL_ALLTOALL:
        return (chunk / p) % p == rank;
    case CS_COLL_CUSTOM:
        if (!c->custom_bits || rank < 0 || rank >= c->custom_ranks || chunk < 0 ||
            chunk >= c->custom_global_chunks)
            return false;
        return bit(c, chunk, rank, 1);
    default:
        return false;
    }
}

int collective_source(const cs_collective *c, int ranks, int chunks, long chunk)
{
    (void)chunks;
    switch (c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_GATHER:
    case CS_COLL_ALLTOALL:
        return (int)(chunk % ranks);
    case CS_COLL_SCATTER:
    case CS_COLL_BROADCAST:
        return c->root;
    case CS_COLL_CUSTOM: {
        if (!c->custom_bits || chunk < 0 || chunk >= c->custom_global_chunks)
            return -1;
        int found = -1;
        for (int r = 0; r < c->custom_ranks; r++)
            if (bit(c, chunk, r, 0)) {
                if (found >= 0)
                    return -1;
                found = r;
            }
        return found;
    }
    default:
        return -1;
    }
}

int collective_dual(const cs_collective *c, cs_collective *dual, cs_error *err)
{
    cs_coll_kind k;
    switch (c->kind) {
    case CS_COLL_REDUCESCATTER: k = CS_COLL_ALLGATHER; break;
    case CS_COLL_ALLGATHER: k = CS_COLL_REDUCESCATTER; break;
    case CS_COLL_REDUCE: k = CS_COLL_BROADCAST; break;
    case CS_COLL_BROADCAST: k = CS_COLL_REDUCE; break;
    case CS_COLL_GATHER: k = CS_COLL_SCATTER; break;
    case CS_COLL_SCATTER: k = CS_COLL_GATHER; break;
    case CS_COLL_ALLTOALL: k = CS_COLL_ALLTOALL; break;
    default:
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind",
                            "%s has no dual collective (allreduce is reducescatter + "
                            "allgather)", collective_kind_name(c->kind));
    }
    collective_init(dual, k, c->root);
    return CS_OK;
}
