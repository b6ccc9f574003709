/*
 * cluster.c - cluster description, host lists, allocation topology, frontier
 * size ranges and MSCCL XML byte ranges for the Slurm hook (see cluster.h).
 *
 * Everything here returns an error message instead of failing loudly: the hook
 * turns any error into one warning line and lets the job start unchanged.
 */
#include "cluster.h"

#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cs_common.h"

static int cluster_fail(char *msg, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int cluster_fail(char *msg, size_t n, const char *fmt, ...)
{
    if (msg != NULL && n > 0) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, n, fmt, ap);
        va_end(ap);
    }
    return -1;
}

/* ---- plugstack.conf arguments ------------------------------------------------------ */

int cluster_plugstack_arg(const char *arg, const char **value, char *msg, size_t msglen)
{
    static const char *const keys[CLUSTER_ARG_COUNT] = {
        [CLUSTER_ARG_SERVER] = "server",       [CLUSTER_ARG_TOKEN_FILE] = "token_file",
        [CLUSTER_ARG_CLUSTER] = "cluster",     [CLUSTER_ARG_COLLECTIVES] = "collectives",
        [CLUSTER_ARG_TIMEOUT] = "timeout",     [CLUSTER_ARG_METHOD] = "method",
        [CLUSTER_ARG_TMPDIR] = "tmpdir",       [CLUSTER_ARG_OPTIONS] = "options",
        [CLUSTER_ARG_GPUS] = "gpus",           [CLUSTER_ARG_ROOT] = "root",
        [CLUSTER_ARG_GPU_SMS] = "gpu_sms"};
    const char *eq = strchr(arg, '=');
    if (eq == NULL)
        return cluster_fail(msg, msglen, "plugstack argument '%s' is not key=value", arg);
    size_t kl = (size_t)(eq - arg);
    for (int k = 0; k < CLUSTER_ARG_COUNT; k++)
        if (strlen(keys[k]) == kl && strncmp(arg, keys[k], kl) == 0) {
            *value = eq + 1;
            return k;
        }
    const char *near = cs_nearest_name(arg, kl, keys, CLUSTER_ARG_COUNT);
    if (near != NULL)
        return cluster_fail(msg, msglen, "unknown plugstack argument '%.*s' (did you mean %s?)",
                            (int)kl, arg, near);
    return cluster_fail(msg, msglen, "unknown plugstack argument '%.*s'", (int)kl, arg);
}

/* ---- the cluster description file ------------------------------------------------ */

json_t *cluster_load_file(const char *path, char *msg, size_t msglen)
{
    char *text = NULL;
    size_t len = 0;
    cs_error err;
    if (cs_read_file(path, &text, &len, &err) != CS_OK) {
        cluster_fail(msg, msglen, "cluster description: %s", err.message);
        return NULL;
    }
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, 0, &jerr);
    free(text);
    if (doc == NULL) {
        cluster_fail(msg, msglen, "cluster description %s: line %d column %d: %s", path,
                     jerr.line, jerr.column, jerr.text);
        return NULL;
    }
    if (!json_is_object(doc)) {
        json_decref(doc);
        cluster_fail(msg, msglen, "cluster description %s: not a JSON object", path);
        return NULL;
    }
    return doc;
}

/* ---- host lists ------------------------------------------------------------------- */

typedef struct name_vec {
    char **v;
    int n, cap;
} name_vec;

static int push_name(name_vec *nv, const char *s, size_t len)
{
    if (nv->n == nv->cap) {
        int cap = nv->cap ? nv->cap * 2 : 16;
        char **p = realloc(nv->v, (size_t)cap * sizeof *p);
        if (p == NULL)
            return -1;
        nv->v = p;
        nv->cap = cap;
    }
    char *c = malloc(len + 1);
    if (c == NULL)
        return -1;
    memcpy(c, s, len);
    c[len] = '\0';
    nv->v[nv->n++] = c;
    return 0;
}

void hostlist_free(char **names, int n)
{
    if (names == NULL)
        return;
    for (int i = 0; i < n; i++)
        free(names[i]);
    free(names);
}

/* Expands one item "pre[a-b,c]suf" (one bracket group; Slurm's common form). */
static int expand_item(const char *item, size_t len, name_vec *nv, char *msg, size_t msglen)
{
    const char *lb = memchr(item, '[', len);
    if (lb == NULL)
        return len > 0 ? push_name(nv, item, len) : 0;
    const char *rb = memchr(lb, ']', len - (size_t)(lb - item));
    if (rb == NULL)
        return cluster_fail(msg, msglen, "host list item '%.*s' has '[' without ']'", (int)len, item);
    size_t pre = (size_t)(lb - item);
    const char *suf = rb + 1;
    size_t suflen = len - (size_t)(suf - item);
    if (memchr(suf, '[', suflen) != NULL)
        return cluster_fail(msg, msglen, "host list item '%.*s': only one [...] group is supported",
                    (int)len, item);
    const char *p = lb + 1;
    while (p < rb) {
        const char *comma = memchr(p, ',', (size_t)(rb - p));
        const char *end = comma ? comma : rb;
        const char *dash = memchr(p, '-', (size_t)(end - p));
        char a[32], b[32];
        size_t alen = (size_t)((dash ? dash : end) - p);
        size_t blen = dash ? (size_t)(end - dash - 1) : alen;
        if (alen == 0 || alen >= sizeof a || blen == 0 || blen >= sizeof b)
            return cluster_fail(msg, msglen, "bad range in host list item '%.*s'", (int)len, item);
        memcpy(a, p, alen);
        a[alen] = '\0';
        memcpy(b, dash ? dash + 1 : p, blen);
        b[blen] = '\0';
        for (size_t i = 0; i < alen; i++)
            if (!isdigit((unsigned char)a[i]))
                return cluster_fail(msg, msglen, "bad number '%s' in host list", a);
        for (size_t i = 0; i < blen; i++)
            if (!isdigit((unsigned char)b[i]))
                return cluster_fail(msg, msglen, "bad number '%s' in host list", b);
        long lo = strtol(a, NULL, 10), hi = strtol(b, NULL, 10);
        if (hi < lo || hi - lo > 100000)
            return cluster_fail(msg, msglen, "bad range %s-%s in host list", a, b);
        int width = (int)alen; /* zero padding follows the first number */
        for (long k = lo; k <= hi; k++) {
            char name[512];
            int n = snprintf(name, sizeof name, "%.*s%0*ld%.*s", (int)pre, item, width, k,
                             (int)suflen, suf);
            if (n < 0 || (size_t)n >= sizeof name)
                return cluster_fail(msg, msglen, "host name too long in host list");
            if (push_name(nv, name, (size_t)n) != 0)
                return cluster_fail(msg, msglen, "out of memory");
        }
        p = comma ? comma + 1 : rb;
    }
    return 0;
}

int hostlist_expand(const char *list, char ***out, char *msg, size_t msglen)
{
    name_vec nv = {0};
    *out = NULL;
    const char *p = list;
    while (*p) {
        /* items are separated by commas outside brackets */
        const char *q = p;
        int depth = 0;
        while (*q && !(*q == ',' && depth == 0)) {
            if (*q == '[')
                depth++;
            else if (*q == ']')
                depth--;
            q++;
        }
        if (expand_item(p, (size_t)(q - p), &nv, msg, msglen) != 0) {
            hostlist_free(nv.v, nv.n);
            return -1;
        }
        p = *q ? q + 1 : q;
    }
    *out = nv.v;
    return nv.n;
}

/* ---- allocation topology -------------------------------------------------------- */

static bool name_matches(const char *pattern, const char *node)
{
    if (strcmp(pattern, node) == 0)
        return true;
    if (strchr(pattern, '[') != NULL) {
        char **names;
        int n = hostlist_expand(pattern, &names, NULL, 0);
        bool hit = false;
        for (int i = 0; i < n && !hit; i++)
            hit = strcmp(names[i], node) == 0;
        if (n > 0)
            hostlist_free(names, n);
        if (hit)
            return true;
    }
    return fnmatch(pattern, node, 0) == 0;
}

static const char *type_of_node(const json_t *cluster, const char *node)
{
    json_t *nodes = json_object_get(cluster, "nodes");
    size_t i;
    json_t *e;
    json_array_foreach(nodes, i, e) {
        const char *names = json_string_value(json_object_get(e, "names"));
        const char *type = json_string_value(json_object_get(e, "type"));
        if (names != NULL && type != NULL && name_matches(names, node))
            return type;
    }
    return NULL;
}

static json_t *offset_pairs(const json_t *pairs, int off)
{
    json_t *out = json_array();
    size_t i;
    json_t *pr;
    json_array_foreach(pairs, i, pr) {
        json_array_append_new(out, json_pack("[I, I]",
                                             (json_int_t)(json_integer_value(json_array_get(pr, 0)) + off),
                                             (json_int_t)(json_integer_value(json_array_get(pr, 1)) + off)));
    }
    return out;
}

/* Appends node `k`'s topology (ranks offset by `off`) to the allocation's. */
static void append_node(json_t *links, json_t *shared, json_t *switches, const json_t *t,
                        int off, int k)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(t, "links"), i, e) {
        json_t *c = json_deep_copy(e);
        json_object_set_new(c, "src", json_integer(json_integer_value(json_object_get(e, "src")) + off));
        json_object_set_new(c, "dst", json_integer(json_integer_value(json_object_get(e, "dst")) + off));
        json_array_append_new(links, c);
    }
    json_array_foreach(json_object_get(t, "shared"), i, e) {
        json_t *c = json_deep_copy(e);
        json_object_set_new(c, "links", offset_pairs(json_object_get(e, "links"), off));
        json_array_append_new(shared, c);
    }
    json_array_foreach(json_object_get(t, "switches"), i, e) {
        json_t *c = json_deep_copy(e);
        const char *nm = json_string_value(json_object_get(e, "name"));
        char name[96];
        snprintf(name, sizeof name, "n%d.%s", k, nm ? nm : "sw");
        json_object_set_new(c, "name", json_string(name));
        json_t *ranks = json_array();
        size_t j;
        json_t *r;
        json_array_foreach(json_object_get(e, "ranks"), j, r)
            json_array_append_new(ranks, json_integer(json_integer_value(r) + off));
        json_object_set_new(c, "ranks", ranks);
        json_array_append_new(switches, c);
    }
}

int cluster_build_topology(const json_t *cluster, char **nodes, int nnodes,
                           cluster_fetch_builtin_fn fetch, void *fetch_ctx,
                           json_t **topology, json_t **expanded, char *msg, size_t msglen)
{
    *topology = NULL;
    *expanded = NULL;
    if (!json_is_object(cluster))
        return cluster_fail(msg, msglen, "cluster description is not a JSON object");
    json_t *types = json_object_get(cluster, "node_types");
    if (!json_is_object(types))
        return cluster_fail(msg, msglen, "cluster description: node_types must be an object");
    if (!json_is_array(json_object_get(cluster, "nodes")))
        return cluster_fail(msg, msglen, "cluster description: nodes must be an array");
    if (nnodes < 1)
        return cluster_fail(msg, msglen, "the job step has no nodes");

    /* each node's topology, expanded; builtins fetched once per name */
    json_t *cache = json_object();
    json_t **node_topo = calloc((size_t)nnodes, sizeof *node_topo);
    const char **node_type = calloc((size_t)nnodes, sizeof *node_type);
    int rc = 0;
    if (node_topo == NULL || node_type == NULL) {
        rc = cluster_fail(msg, msglen, "out of memory");
        goto out;
    }
    for (int k = 0; k < nnodes && rc == 0; k++) {
        const char *type = type_of_node(cluster, nodes[k]);
        if (type == NULL) {
            rc = cluster_fail(msg, msglen, "node %s has no type in the cluster description", nodes[k]);
            break;
        }
        json_t *nt = json_object_get(types, type);
        json_t *tv = json_object_get(nt, "topology");
        node_type[k] = type;
        if (json_is_object(tv)) {
            node_topo[k] = tv;
        } else if (json_is_string(tv)) {
            json_t *got = json_object_get(cache, json_string_value(tv));
            if (got == NULL) {
                got = fetch(fetch_ctx, json_string_value(tv), msg, msglen);
                if (got == NULL) {
                    rc = -1;
                    break;
                }
                json_object_set_new(cache, json_string_value(tv), got);
            }
            node_topo[k] = got;
        } else {
            rc = cluster_fail(msg, msglen, "node type %s: topology must be a builtin name or Topology JSON",
                      type);
        }
        if (rc == 0 && json_integer_value(json_object_get(node_topo[k], "ranks")) < 1)
            rc = cluster_fail(msg, msglen, "node type %s: topology has no ranks", type);
    }
    if (rc != 0)
        goto out;

    if (nnodes == 1) {
        json_t *tv = json_object_get(json_object_get(types, node_type[0]), "topology");
        *topology = json_is_string(tv) ? json_incref(tv) : json_deep_copy(tv);
        *expanded = json_deep_copy(node_topo[0]);
        goto out;
    }

    json_t *fabric = json_object_get(cluster, "fabric");
    const char *kind = json_string_value(json_object_get(fabric, "kind"));
    if (kind == NULL)
        kind = "switch";
    double gbps = json_is_number(json_object_get(fabric, "gbps"))
                      ? json_number_value(json_object_get(fabric, "gbps")) : 12.5;
    double alpha = json_is_number(json_object_get(fabric, "alpha_us"))
                       ? json_number_value(json_object_get(fabric, "alpha_us")) : 3.0;
    if (strcmp(kind, "switch") != 0 && strcmp(kind, "ring") != 0) {
        rc = cluster_fail(msg, msglen, "fabric.kind '%s' is not switch or ring", kind);
        goto out;
    }
    json_t *links = json_array(), *shared = json_array(), *switches = json_array();
    json_t *groups = json_array(), *fabric_ranks = json_array();
    int off = 0;
    int *nic_count = calloc((size_t)nnodes, sizeof *nic_count);
    int **nic = calloc((size_t)nnodes, sizeof *nic);
    for (int k = 0; k < nnodes; k++) {
        int r = (int)json_integer_value(json_object_get(node_topo[k], "ranks"));
        append_node(links, shared, switches, node_topo[k], off, k);
        json_t *g = json_array();
        for (int i = 0; i < r; i++)
            json_array_append_new(g, json_integer(off + i));
        json_array_append_new(groups, g);
        json_t *nics = json_object_get(json_object_get(types, node_type[k]), "nics");
        int nn = json_is_array(nics) ? (int)json_array_size(nics) : r;
        nic[k] = nic_count != NULL ? calloc((size_t)(nn > 0 ? nn : 1), sizeof(int)) : NULL;
        if (nic[k] == NULL) {
            rc = cluster_fail(msg, msglen, "out of memory");
            off += r;
            continue;
        }
        nic_count[k] = nn;
        for (int i = 0; i < nn; i++) {
            int local = json_is_array(nics) ? (int)json_integer_value(json_array_get(nics, (size_t)i)) : i;
            if (local < 0 || local >= r) {
                rc = cluster_fail(msg, msglen, "node type %s: nics[%d] = %d is not a local rank",
                          node_type[k], i, local);
                local = 0;
            }
            nic[k][i] = off + local;
            json_array_append_new(fabric_ranks, json_integer(off + local));
        }
        off += r;
    }
    if (rc == 0 && strcmp(kind, "switch") == 0) {
        json_array_append_new(switches, json_pack("{s:s, s:O, s:f, s:f}", "name", "fabric",
                                                  "ranks", fabric_ranks, "gbps", gbps,
                                                  "alpha_us", alpha));
    } else if (rc == 0) {
        for (int k = 0; k < nnodes && (nnodes > 2 || k == 0); k++) {
            int k2 = (k + 1) % nnodes;
            int m = nic_count[k] < nic_count[k2] ? nic_count[k] : nic_count[k2];
            for (int i = 0; i < m; i++)
                json_array_append_new(links, json_pack("{s:i, s:i, s:i, s:f, s:f, s:b}", "src",
                                                       nic[k][i], "dst", nic[k2][i], "lanes", 1,
                                                       "gbps", gbps, "alpha_us", alpha,
                                                       "bidirectional", 1));
        }
    }
    for (int k = 0; k < nnodes; k++)
        free(nic != NULL ? nic[k] : NULL);
    free(nic);
    free(nic_count);
    json_decref(fabric_ranks);
    if (rc != 0) {
        json_decref(links);
        json_decref(shared);
        json_decref(switches);
        json_decref(groups);
        goto out;
    }
    const char *cname = json_string_value(json_object_get(cluster, "name"));
    char name[128];
    snprintf(name, sizeof name, "%s-%s-x%d", cname ? cname : "cluster", node_type[0], nnodes);
    json_t *t = json_pack("{s:s, s:i, s:o}", "name", name, "ranks", off, "links", links);
    if (json_array_size(shared) > 0)
        json_object_set_new(t, "shared", shared);
    else
        json_decref(shared);
    if (json_array_size(switches) > 0)
        json_object_set_new(t, "switches", switches);
    else
        json_decref(switches);
    json_object_set_new(t, "groups", groups);
    *topology = t;
    *expanded = json_incref(t);
out:
    free(node_topo);
    free(node_type);
    json_decref(cache);
    return rc;
}

int cluster_node_ranks(const json_t *expanded, int nodeid, int *first, int *last)
{
    const json_t *g = json_array_get(json_object_get(expanded, "groups"), (size_t)nodeid);
    size_t n = json_array_size(g);
    if (nodeid < 0 || n == 0)
        return -1;
    long lo = json_integer_value(json_array_get(g, 0));
    for (size_t i = 0; i < n; i++)
        if (!json_is_integer(json_array_get(g, i)) ||
            json_integer_value(json_array_get(g, i)) != lo + (long)i)
            return -1;
    *first = (int)lo;
    *last = (int)(lo + (long)n - 1);
    return 0;
}

void cluster_alpha_beta(const json_t *topology, double *alpha_us, double *beta)
{
    double amax = 0, gmin = INFINITY;
    const char *lists[] = {"links", "switches"};
    for (int l = 0; l < 2; l++) {
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(topology, lists[l]), i, e) {
            json_t *a = json_object_get(e, "alpha_us");
            json_t *g = json_object_get(e, "gbps");
            if (json_is_number(a) && json_number_value(a) > amax)
                amax = json_number_value(a);
            if (json_is_number(g) && json_number_value(g) > 0 && json_number_value(g) < gmin)
                gmin = json_number_value(g);
        }
    }
    *alpha_us = amax;
    *beta = isfinite(gmin) ? 1.0 / (gmin * 1e3) : 0.0;
}

/* ---- frontier size ranges -------------------------------------------------------- */

static double alg_cost(const json_t *a, double alpha, double beta, double bytes)
{
    double s = (double)json_integer_value(json_object_get(a, "steps"));
    double r = (double)json_integer_value(json_object_get(a, "rounds"));
    double c = (double)json_integer_value(json_object_get(a, "chunks"));
    if (c <= 0)
        c = 1;
    return s * alpha + (r / c) * bytes * beta;
}

static int best_at(const json_t *frontier, double alpha, double beta, double bytes)
{
    int best = -1;
    double bc = INFINITY;
    size_t i;
    json_t *a;
    json_array_foreach(frontier, i, a) {
        double c = alg_cost(a, alpha, beta, bytes);
        if (c < bc - 1e-12) { /* ties keep the earlier (lower-latency) one */
            bc = c;
            best = (int)i;
        }
    }
    return best;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int frontier_size_ranges(const json_t *frontier, double alpha, double beta, size_range *out,
                         int max_out)
{
    size_t n = json_array_size(frontier);
    if (n == 0 || max_out < 1)
        return 0;
    /* breakpoints: every pairwise crossing of the cost lines */
    size_t cap = n * n + 2;
    double *bp = malloc(cap * sizeof *bp);
    if (bp == NULL)
        return 0;
    size_t nb = 0;
    bp[nb++] = 0.0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = i + 1; j < n; j++) {
            json_t *a = json_array_get(frontier, i), *b = json_array_get(frontier, j);
            double sa = (double)json_integer_value(json_object_get(a, "steps"));
            double sb = (double)json_integer_value(json_object_get(b, "steps"));
            double ca = (double)json_integer_value(json_object_get(a, "chunks"));
            double cb = (double)json_integer_value(json_object_get(b, "chunks"));
            double ra = (double)json_integer_value(json_object_get(a, "rounds")) / (ca > 0 ? ca : 1);
            double rb = (double)json_integer_value(json_object_get(b, "rounds")) / (cb > 0 ? cb : 1);
            double den = (ra - rb) * beta;
            if (den != 0) {
                double x = (sb - sa) * alpha / den;
                if (x > 0 && isfinite(x) && x < 1e18)
                    bp[nb++] = x;
            }
        }
    qsort(bp, nb, sizeof *bp, cmp_double);
    int count = 0;
    for (size_t k = 0; k < nb && count < max_out; k++) {
        double lo = bp[k];
        double hi = k + 1 < nb ? bp[k + 1] : INFINITY;
        if (hi <= lo)
            continue;
        double mid = isfinite(hi) ? (lo + hi) / 2 : (lo > 0 ? lo * 2 : 1e6);
        int best = best_at(frontier, alpha, beta, mid);
        unsigned long long lo_b = (unsigned long long)ceil(lo);
        unsigned long long hi_b = isfinite(hi) ? (unsigned long long)ceil(hi) : 0ULL;
        if (hi_b != 0 && hi_b <= lo_b)
            continue;
        if (count > 0 && out[count - 1].index == best) {
            out[count - 1].max_bytes = hi_b; /* extend the previous range */
            continue;
        }
        out[count].index = best;
        out[count].min_bytes = lo_b;
        out[count].max_bytes = hi_b;
        count++;
    }
    free(bp);
    return count;
}

unsigned long long size_range_probe(const size_range *r)
{
    if (r->max_bytes == 0)
        return r->min_bytes > 0 ? r->min_bytes * 2 : (1ULL << 20);
    if (r->min_bytes == 0)
        return r->max_bytes / 2;
    /* geometric middle keeps the probe well inside wide ranges */
    double g = sqrt((double)r->min_bytes * (double)r->max_bytes);
    unsigned long long p = (unsigned long long)g;
    if (p < r->min_bytes)
        p = r->min_bytes;
    if (p >= r->max_bytes)
        p = r->max_bytes - 1;
    return p;
}

/* ---- MSCCL XML byte ranges -------------------------------------------------------- */

/* Removes ` name="..."` from the tag text [tag, tag_end) in place; returns the
 * new tag end. */
static char *remove_attr(char *tag, char *tag_end, const char *name)
{
    size_t nl = strlen(name);
    for (char *p = tag; p + nl + 2 < tag_end; p++) {
        if (isspace((unsigned char)p[0]) && strncmp(p + 1, name, nl) == 0 && p[1 + nl] == '=') {
            char q = p[2 + nl];
            if (q != '"' && q != '\'')
                continue;
            char *close = memchr(p + 3 + nl, q, (size_t)(tag_end - (p + 3 + nl)));
            if (close == NULL)
                return tag_end;
            size_t cut = (size_t)(close + 1 - p);
            memmove(p, close + 1, strlen(close + 1) + 1);
            return tag_end - cut;
        }
    }
    return tag_end;
}

char *xml_set_byte_range(const char *xml, unsigned long long min_bytes,
                         unsigned long long max_bytes)
{
    const char *start = strstr(xml, "<algo");
    while (start != NULL && !isspace((unsigned char)start[5]) && start[5] != '>')
        start = strstr(start + 5, "<algo");
    if (start == NULL)
        return NULL;
    if (max_bytes == 0)
        max_bytes = CS_SLURM_NO_LIMIT_BYTES;
    size_t len = strlen(xml);
    char *out = malloc(len + 96);
    if (out == NULL)
        return NULL;
    memcpy(out, xml, len + 1);
    char *tag = out + (start - xml);
    char *tag_end = strchr(tag, '>');
    if (tag_end == NULL) {
        free(out);
        return NULL;
    }
    tag_end = remove_attr(tag, tag_end, "minBytes");
    tag_end = remove_attr(tag, tag_end, "maxBytes");
    char attrs[80];
    int an = snprintf(attrs, sizeof attrs, " minBytes=\"%llu\" maxBytes=\"%llu\"", min_bytes,
                      max_bytes);
    char *ins = tag + 5; /* after "<algo" */
    memmove(ins + an, ins, strlen(ins) + 1);
    memcpy(ins, attrs, (size_t)an);
    return out;
}

size_t cluster_line_piece(const char *text, size_t width)
{
    size_t len = strlen(text);
    if (len <= width)
        return len;
    if (width == 0)
        width = 1;
    for (size_t k = width; k > 0; k--)
        if (text[k] == ' ')
            return k; /* text[0..k) ends before the space */
    /* no space: cut at width, backing off a UTF-8 continuation byte */
    size_t k = width;
    while (k > 1 && ((unsigned char)text[k] & 0xC0) == 0x80)
        k--;
    return k;
}
