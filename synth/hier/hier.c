/*
 * hier.c - hierarchical composition for clusters (see hier.h for the model).
 *
 * Layout: detection (hier_shape: nodes, local ranks, NICs, the node-type
 * topology), intra trees (SMT on the node type, shortest-path trees as the
 * fallback), the allgather composition (three phases, numbered per chunk so
 * they pipeline), and the collectives built from it by inversion and
 * concatenation.
 */
#include "hier.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simulate.h"
#include "smt.h"
#include "verify.h"

/* ---- detection -------------------------------------------------------------------- */

/* How one source spreads a chunk inside a node: sends in local ranks, steps
 * relative to the step the chunk is available at the source (0 = first). */
typedef struct hier_tree {
    int n;
    int src[64], dst[64], step[64];
    int depth;                 /* max step + 1 (0 when n == 0) */
} hier_tree;

typedef struct hier_shape {
    int nodes, m, k;
    int *rank;                 /* nodes * m: global rank of (node, local) */
    int nic[64];               /* k local indices */
    cs_topology *node;         /* the node type on local ranks (owned) */
    char sig_hash[32];
} hier_shape;

typedef struct hier_trees {
    hier_tree spread[64];      /* m trees: local i to every other local rank */
    hier_tree nic[64];         /* k trees: NIC j to every other local rank */
    char how[160];             /* where the trees came from */
} hier_trees;

static void shape_free(hier_shape *s)
{
    free(s->rank);
    topology_free(s->node);
    memset(s, 0, sizeof *s);
}

typedef struct link_key {
    int a, b, lanes, sw;
    double gbps, alpha;
} link_key;

static int link_key_cmp(const void *pa, const void *pb)
{
    const link_key *x = pa, *y = pb;
    if (x->a != y->a) return x->a < y->a ? -1 : 1;
    if (x->b != y->b) return x->b < y->b ? -1 : 1;
    if (x->lanes != y->lanes) return x->lanes < y->lanes ? -1 : 1;
    if (x->sw != y->sw) return x->sw < y->sw ? -1 : 1;
    if (x->gbps != y->gbps) return x->gbps < y->gbps ? -1 : 1;
    if (x->alpha != y->alpha) return x->alpha < y->alpha ? -1 : 1;
    return 0;
}

/* The switch index's group when every rank of the switch is in one group, else -1. */
static int switch_group(const cs_topology *t, int s)
{
    const cs_switch *w = &t->switches[s];
    int g = w->nranks ? t->group_of[w->ranks[0]] : -1;
    for (int i = 1; i < w->nranks && g >= 0; i++)
        if (t->group_of[w->ranks[i]] != g)
            g = -1;
    return g;
}

/* Intra-group links of group g as sorted keys in local ranks: physical links
 * and links lowered from switches inside the group (a switch spanning groups
 * is fabric, not node). */
static int group_keys(const cs_topology *t, const int *loc, const int *swg, int g,
                      link_key **out, int *n)
{
    const cs_group *gr = &t->groups[g];
    int cap = 16, cnt = 0;
    link_key *k = malloc(sizeof *k * (size_t)cap);
    if (!k)
        return CS_ENOMEM;
    for (int i = 0; i < gr->nranks; i++) {
        int r = gr->ranks[i];
        for (int l = t->out_begin[r]; l < t->out_begin[r + 1]; l++) {
            const cs_link *lk = &t->links[l];
            if (t->group_of[lk->dst] != g)
                continue;
            if (lk->switch_id >= 0 && swg[lk->switch_id] != g)
                continue;
            if (cnt == cap) {
                cap *= 2;
                link_key *nk = realloc(k, sizeof *k * (size_t)cap);
                if (!nk) {
                    free(k);
                    return CS_ENOMEM;
                }
                k = nk;
            }
            k[cnt++] = (link_key){loc[lk->src], loc[lk->dst], lk->lanes, lk->switch_id >= 0,
                                  lk->gbps, lk->alpha_us};
        }
    }
    qsort(k, (size_t)cnt, sizeof *k, link_key_cmp);
    *out = k;
    *n = cnt;
    return CS_OK;
}

static int hier_detect(const cs_topology *t, hier_shape *s, cs_error *err)
{
    memset(s, 0, sizeof *s);
    if (!t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "hierarchical needs a finalized topology");
    if (t->ngroups < 2 || !t->group_of)
        return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                            "hierarchical needs nodes: topology %s has %d groups (at least 2 "
                            "groups of ranks joined by a fabric)", t->name, t->ngroups);
    int m = t->groups[0].nranks;
    for (int g = 0; g < t->ngroups; g++)
        if (t->groups[g].nranks != m)
            return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                                "hierarchical needs nodes of one size: group 0 has %d ranks, "
                                "group %d has %d", m, g, t->groups[g].nranks);
    for (int r = 0; r < t->ranks; r++)
        if (t->group_of[r] < 0)
            return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                                "hierarchical needs every rank in a node: rank %d is in no group",
                                r);
    if (m > 64)
        return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                            "hierarchical handles nodes of at most 64 ranks (groups have %d)", m);
    for (int k = 0; k < t->nshared; k++)
        if (t->shared[k].switch_id < 0)
            return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                                "hierarchical does not handle shared sets written in the "
                                "document (topology %s has them); use tacos", t->name);
    int N = t->ngroups, rc = CS_OK;
    int *loc = malloc(sizeof *loc * (size_t)t->ranks);
    int *swg = malloc(sizeof *swg * (size_t)(t->nswitches + 1));
    s->rank = malloc(sizeof *s->rank * (size_t)N * (size_t)m);
    link_key *k0 = NULL, *kg = NULL;
    int n0 = 0, ng = 0;
    if (!loc || !swg || !s->rank) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    s->nodes = N;
    s->m = m;
    for (int g = 0; g < N; g++)
        for (int i = 0; i < m; i++) {
            loc[t->groups[g].ranks[i]] = i;
            s->rank[(long)g * m + i] = t->groups[g].ranks[i];
        }
    for (int w = 0; w < t->nswitches; w++)
        swg[w] = switch_group(t, w);
    /* one node type */
    if ((rc = group_keys(t, loc, swg, 0, &k0, &n0)) != CS_OK) {
        rc = cs_error_set(err, rc, NULL, "out of memory");
        goto done;
    }
    for (int g = 1; g < N; g++) {
        free(kg);
        kg = NULL;
        if ((rc = group_keys(t, loc, swg, g, &kg, &ng)) != CS_OK) {
            rc = cs_error_set(err, rc, NULL, "out of memory");
            goto done;
        }
        if (ng != n0 || memcmp(kg, k0, sizeof *k0 * (size_t)n0) != 0) {
            rc = cs_error_set(err, CS_EUNSUPPORTED, "topology",
                              "hierarchical needs one node type: node %d's links differ from "
                              "node 0's under the groups' rank order", g);
            goto done;
        }
    }
    /* NICs: local ranks with a link out of their node, the same in every node */
    s->k = 0;
    for (int i = 0; i < m; i++) {
        int r0 = s->rank[i];
        bool nic0 = false;
        for (int l = t->out_begin[r0]; l < t->out_begin[r0 + 1] && !nic0; l++)
            nic0 = t->group_of[t->links[l].dst] != 0;
        for (int g = 1; g < N; g++) {
            int r = s->rank[(long)g * m + i];
            bool nic = false;
            for (int l = t->out_begin[r]; l < t->out_begin[r + 1] && !nic; l++)
                nic = t->group_of[t->links[l].dst] != g;
            if (nic != nic0) {
                rc = cs_error_set(err, CS_EUNSUPPORTED, "topology",
                                  "hierarchical needs the same NIC ranks in every node: local "
                                  "rank %d of node %d %s a link out of its node, of node 0 %s",
                                  i, g, nic ? "has" : "has no", nic0 ? "has" : "has none");
                goto done;
            }
        }
        if (nic0)
            s->nic[s->k++] = i;
    }
    if (s->k == 0) {
        rc = cs_error_set(err, CS_EUNSUPPORTED, "topology", "no rank has a link out of its node");
        goto done;
    }
    /* rails: NIC j of every node reaches NIC j of every other node in one hop */
    for (int j = 0; j < s->k; j++)
        for (int a = 0; a < N; a++)
            for (int b = 0; b < N; b++)
                if (a != b && topology_find_link(t, s->rank[(long)a * m + s->nic[j]],
                                                 s->rank[(long)b * m + s->nic[j]]) < 0) {
                    rc = cs_error_set(err, CS_EUNSUPPORTED, "topology",
                                      "hierarchical needs a switched fabric: NIC rank %d of node "
                                      "%d has no direct link to NIC rank %d of node %d (rails or "
                                      "one fabric switch joining every node's NICs); use tacos",
                                      s->nic[j], a, s->nic[j], b);
                    goto done;
                }
    /* the node type as a topology of its own */
    {
        char name[CS_NAME_MAX];
        snprintf(name, sizeof name, "%.100s-node", t->name);
        s->node = topology_new(name, m);
        if (!s->node) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        for (int q = 0; q < n0 && rc == CS_OK; q++)
            if (!k0[q].sw)
                rc = topology_add_link(s->node, k0[q].a, k0[q].b, k0[q].lanes, k0[q].gbps,
                                       k0[q].alpha, false, err);
        for (int w = 0; w < t->nswitches && rc == CS_OK; w++) {
            if (swg[w] != 0)
                continue;
            const cs_switch *sw = &t->switches[w];
            int lr[64];
            for (int i = 0; i < sw->nranks; i++)
                lr[i] = loc[sw->ranks[i]];
            rc = topology_add_switch(s->node, sw->name, lr, sw->nranks, sw->gbps, sw->alpha_us,
                                     err);
        }
        if (rc == CS_OK && (rc = topology_finalize(s->node, err)) != CS_OK)
            rc = cs_error_set(err, CS_EUNSUPPORTED, "topology",
                              "hierarchical needs connected nodes: node 0 of %s alone is not a "
                              "valid topology (%.200s)", t->name, err ? err->message : "");
    }
done:
    free(loc);
    free(swg);
    free(k0);
    free(kg);
    if (rc != CS_OK)
        shape_free(s);
    return rc;
}

static bool kind_supported(cs_coll_kind k)
{
    return k == CS_COLL_ALLGATHER || k == CS_COLL_REDUCESCATTER || k == CS_COLL_ALLREDUCE;
}

static int unsupported_kind(const cs_collective *c, cs_error *err)
{
    return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind",
                        "hierarchical composes allgather, reducescatter and allreduce; %s is "
                        "not composed yet (alltoall needs intra aggregation + inter alltoall + "
                        "intra scatter, broadcast/reduce need trees across nodes); use tacos "
                        "or auto", collective_kind_name(c->kind));
}

void hier_options_default(cs_hier_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->smt_time_limit_s = 2.0;
}

int hier_applicable(const cs_topology *t, const cs_collective *c, cs_error *err)
{
    if (!kind_supported(c->kind))
        return unsupported_kind(c, err);
    hier_shape s;
    int rc = hier_detect(t, &s, err);
    if (rc == CS_OK)
        shape_free(&s);
    return rc;
}

/* ---- intra trees -------------------------------------------------------------------- */

/* Chunk x's sends in a as a tree from `root` reaching every other rank once;
 * false when they are not one. */
static bool tree_from(const cs_algorithm *a, long x, int root, int m, hier_tree *tr)
{
    int got[64] = {0};
    tr->n = 0;
    tr->depth = 0;
    int base = 1 << 30;
    for (long i = 0; i < a->nsends; i++)
        if (algorithm_send_chunk(a, i) == x && algorithm_send_step(a, i) < base)
            base = algorithm_send_step(a, i);
    for (long i = 0; i < a->nsends; i++) {
        if (algorithm_send_chunk(a, i) != x)
            continue;
        int d = algorithm_send_dst(a, i);
        if (tr->n >= 64 || d == root || got[d]++)
            return false;
        tr->src[tr->n] = algorithm_send_src(a, i);
        tr->dst[tr->n] = d;
        tr->step[tr->n] = algorithm_send_step(a, i) - base;
        if (tr->step[tr->n] + 1 > tr->depth)
            tr->depth = tr->step[tr->n] + 1;
        tr->n++;
    }
    return tr->n == m - 1;
}

/* Shortest-path tree from root (BFS parents; step = depth - 1). */
static int bfs_tree(const cs_topology *node, int root, hier_tree *tr, cs_error *err)
{
    int m = node->ranks, dist[64], par[64], queue[64], qh = 0, qt = 0;
    for (int i = 0; i < m; i++)
        dist[i] = -1;
    dist[root] = 0;
    queue[qt++] = root;
    while (qh < qt) {
        int u = queue[qh++];
        for (int l = node->out_begin[u]; l < node->out_begin[u + 1]; l++) {
            int v = node->links[l].dst;
            if (dist[v] < 0) {
                dist[v] = dist[u] + 1;
                par[v] = u;
                queue[qt++] = v;
            }
        }
    }
    tr->n = 0;
    tr->depth = 0;
    for (int q = 1; q < qt; q++) {
        int v = queue[q];
        tr->src[tr->n] = par[v];
        tr->dst[tr->n] = v;
        tr->step[tr->n] = dist[v] - 1;
        if (dist[v] > tr->depth)
            tr->depth = dist[v];
        tr->n++;
    }
    if (qt != m)
        return cs_error_set(err, CS_EINTERNAL, "topology", "node type not connected");
    return CS_OK;
}

/* The frontier algorithm with the lowest simulated time at 1 MiB chunks. */
static const cs_algorithm *pick_fastest(const cs_topology *node, const cs_result *res)
{
    const cs_algorithm *best = NULL;
    double best_us = INFINITY;
    for (int i = 0; i < res->nalgs; i++) {
        cs_sim_result sim;
        const cs_algorithm *a = res->algs[i];
        if (simulate_algorithm(node, a, 1048576.0 * a->chunks, &sim, NULL) != CS_OK)
            continue;
        if (sim.time_us < best_us) {
            best_us = sim.time_us;
            best = a;
        }
        sim_result_free(&sim);
    }
    return best;
}

/* SMT on the node type for collective c (1 chunk per source), trees for each
 * of the nsrc sources; *smt_ok false when the fallback (BFS) was used. */
static int node_trees(const cs_topology *node, const cs_collective *c, const int *srcs, int nsrc,
                      const cs_hier_options *o, hier_tree *trees, char *how, size_t howlen,
                      cs_error *err)
{
    cs_smt_options so;
    smt_options_default(&so);
    so.max_chunks = 1;
    so.k = node->ranks + 2;
    so.total_time_limit_s = o->smt_time_limit_s;
    so.instance_time_limit_s = o->smt_time_limit_s;
    so.threads = o->threads;
    so.cancel = o->cancel;
    cs_result *res = NULL;
    cs_error serr;
    cs_error_clear(&serr);
    int rc = smt_search(node, c, &so, &res, &serr);
    if (rc == CS_ECANCELLED || cs_cancel_requested(o->cancel)) {
        result_free(res);
        return cs_error_set(err, CS_ECANCELLED, "", "synthesis cancelled");
    }
    const cs_algorithm *a = rc == CS_OK && res ? pick_fastest(node, res) : NULL;
    bool ok = a != NULL;
    for (int x = 0; x < nsrc && ok; x++)
        ok = tree_from(a, x, srcs[x], node->ranks, &trees[x]);
    if (ok) {
        snprintf(how, howlen, "smt %s (S=%d R=%d C=1)", collective_kind_name(c->kind), a->steps,
                 a->rounds);
    } else {
        for (int x = 0; x < nsrc; x++)
            if ((rc = bfs_tree(node, srcs[x], &trees[x], err)) != CS_OK) {
                result_free(res);
                return rc;
            }
        snprintf(how, howlen, "shortest-path trees (smt %s: %.80s)",
                 collective_kind_name(c->kind),
                 a ? "frontier point is not a tree per chunk"
                   : serr.message[0] ? serr.message : "nothing within its time budget");
    }
    result_free(res);
    return CS_OK;
}

/* In-call cache of node-type trees, keyed by the node topology's links. */
typedef struct tree_cache {
    int n;
    struct {
        char *key;
        hier_trees *trees;     /* heap: 100 KB each */
    } e[4];
} tree_cache;

static char *node_key(const hier_shape *s, bool reversed)
{
    json_t *doc = topology_to_json(s->node);
    json_object_del(doc, "name");
    (void)reversed;
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(doc);
    if (!text)
        return NULL;
    /* the NIC set is part of the key */
    size_t len = strlen(text);
    char *k = malloc(len + 64 * 4 + 8);
    if (!k) {
        free(text);
        return NULL;
    }
    memcpy(k, text, len);
    for (int j = 0; j < s->k; j++)
        len += (size_t)sprintf(k + len, ",%d", s->nic[j]);
    k[len] = 0;
    free(text);
    return k;
}

static int shape_trees(const hier_shape *s, tree_cache *cache, const cs_hier_options *o,
                       const hier_trees **out, cs_error *err)
{
    char *key = node_key(s, false);
    if (!key)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    for (int i = 0; i < cache->n; i++)
        if (strcmp(cache->e[i].key, key) == 0) {
            free(key);
            *out = cache->e[i].trees;
            return CS_OK;
        }
    if (cache->n == 4) {
        free(key);
        return cs_error_set(err, CS_EINTERNAL, NULL, "tree cache full");
    }
    hier_trees *tr = calloc(1, sizeof *tr);
    if (!tr) {
        free(key);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    int m = s->m, srcs[64];
    for (int i = 0; i < m; i++)
        srcs[i] = i;
    cs_collective ag;
    collective_init(&ag, CS_COLL_ALLGATHER, -1);
    char how1[160], how3[160];
    int rc = node_trees(s->node, &ag, srcs, m, o, tr->spread, how1, sizeof how1, err);
    if (rc == CS_OK && s->k == m) {
        memcpy(tr->nic, tr->spread, sizeof tr->spread);
        snprintf(tr->how, sizeof tr->how, "intra trees: %.140s", how1);
    } else if (rc == CS_OK) {
        /* the NIC allgather: chunk x at NIC x, wanted everywhere */
        json_t *pre = json_array(), *post = json_array();
        for (int x = 0; x < s->k; x++) {
            json_array_append_new(pre, json_pack("[i,i]", x, s->nic[x]));
            for (int r = 0; r < m; r++)
                json_array_append_new(post, json_pack("[i,i]", x, r));
        }
        json_t *doc = json_pack("{s:s, s:i, s:o, s:o}", "kind", "custom", "global_chunks", s->k,
                                "pre", pre, "post", post);
        cs_collective cc;
        memset(&cc, 0, sizeof cc);
        rc = collective_from_json(doc, &cc, err);
        json_decref(doc);
        if (rc == CS_OK)
            rc = collective_validate(&cc, m, err);
        if (rc == CS_OK)
            rc = node_trees(s->node, &cc, s->nic, s->k, o, tr->nic, how3, sizeof how3, err);
        collective_free(&cc);
        if (rc == CS_OK)
            snprintf(tr->how, sizeof tr->how, "intra: %.60s; from NICs: %.60s", how1, how3);
    }
    if (rc != CS_OK) {
        free(key);
        free(tr);
        return rc;
    }
    cache->e[cache->n].key = key;
    cache->e[cache->n].trees = tr;
    *out = tr;
    cache->n++;
    return CS_OK;
}

static void cache_free(tree_cache *c)
{
    for (int i = 0; i < c->n; i++) {
        free(c->e[i].key);
        free(c->e[i].trees);
    }
    c->n = 0;
}

/* ---- the allgather composition ----------------------------------------------------- */

/* key: the order within a step (the simulator takes sends in (step, index)
 * order and never backfills a lane, so a send whose chunk arrives late must
 * not sit before one that is ready early): the chunk's arrival rank. */
typedef struct hsend {
    int step;
    int src, dst;
    long chunk;
    long key;
} hsend;

typedef struct send_list {
    hsend *v;
    long n, cap;
} send_list;

static int hsend_cmp(const void *pa, const void *pb)
{
    const hsend *x = pa, *y = pb;
    if (x->step != y->step) return x->step < y->step ? -1 : 1;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->chunk != y->chunk) return x->chunk < y->chunk ? -1 : 1;
    if (x->src != y->src) return x->src < y->src ? -1 : 1;
    return (x->dst > y->dst) - (x->dst < y->dst);
}

static int push(send_list *l, long chunk, int src, int dst, int step, long key)
{
    if (l->n == l->cap) {
        long cap = l->cap ? 2 * l->cap : 4096;
        hsend *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v)
            return CS_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (hsend){step, src, dst, chunk, key};
    return CS_OK;
}

static long gcd_l(long a, long b)
{
    while (b) {
        long t = a % b;
        a = b;
        b = t;
    }
    return a;
}

typedef struct compose_info {
    int slots, segments, steps;
} compose_info;

/* Allgather with C chunks per rank on t (shape s, trees tr). */
static int compose_allgather(const cs_topology *t, const hier_shape *s, const hier_trees *tr,
                             int C, cs_algorithm **out, compose_info *info, cs_error *err)
{
    int N = s->nodes, m = s->m, k = s->k, P = t->ranks;
    int S1 = 0, S3 = 0;
    for (int i = 0; i < m; i++)
        if (tr->spread[i].depth > S1)
            S1 = tr->spread[i].depth;
    for (int j = 0; j < k; j++)
        if (tr->nic[j].depth > S3)
            S3 = tr->nic[j].depth;
    int block = m * C;
    /* segments per (node, distance): enough to use every NIC when there are
     * fewer distances than NICs, else whole blocks (contiguous messages) */
    int seg = N - 1 >= k ? 1 : (int)(k / gcd_l(N - 1, k));
    if (seg > block)
        seg = block;
    long items = (long)(N - 1) * seg;
    int slots = (int)((items + k - 1) / k);
    int steps = S1 + slots + S3;
    send_list l = {0};
    int rc = CS_OK;
    /* phase 1: each chunk along its source's tree inside its node */
    for (int n = 0; n < N && rc == CS_OK; n++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < m; i++) {
                long g = (long)c * P + s->rank[(long)n * m + i];
                const hier_tree *tt = &tr->spread[i];
                for (int e = 0; e < tt->n && rc == CS_OK; e++)
                    rc = push(&l, g, s->rank[(long)n * m + tt->src[e]],
                              s->rank[(long)n * m + tt->dst[e]], tt->step[e], 0);
            }
    /* phases 2 and 3: item u = (distance d, segment) on NIC u % k in slot u / k */
    for (int n = 0; n < N && rc == CS_OK; n++)
        for (long u = 0; u < items && rc == CS_OK; u++) {
            int d = (int)(u / seg) + 1, sg = (int)(u % seg), j = (int)(u % k);
            int slot = (int)(u / k), nb = (n + d) % N, nic = s->nic[j];
            int q0 = (int)((long)block * sg / seg), q1 = (int)((long)block * (sg + 1) / seg);
            int from = s->rank[(long)n * m + nic], to = s->rank[(long)nb * m + nic];
            const hier_tree *tt = &tr->nic[j];
            long seglen = (long)block / seg + 1;
            for (int q = q0; q < q1 && rc == CS_OK; q++) {
                long g = (long)(q / m) * P + s->rank[(long)n * m + q % m];
                long key = (long)slot * seglen + (q - q0) + 1;
                rc = push(&l, g, from, to, S1 + slot, key);
                for (int e = 0; e < tt->n && rc == CS_OK; e++)
                    rc = push(&l, g, s->rank[(long)nb * m + tt->src[e]],
                              s->rank[(long)nb * m + tt->dst[e]], S1 + slot + 1 + tt->step[e],
                              key);
            }
        }
    cs_algorithm *a = NULL;
    if (rc != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory composing %ld sends", l.n);
        goto fail;
    }
    cs_collective ag;
    collective_init(&ag, CS_COLL_ALLGATHER, -1);
    if ((rc = algorithm_new(&ag, t->name, P, C, steps, &a, err)) != CS_OK)
        goto fail;
    snprintf(a->method, sizeof a->method, "hierarchical");
    if (algorithm_reserve_sends(a, l.n) != CS_OK) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends", l.n);
        goto fail;
    }
    /* order: step, then arrival rank, then generation order (stable) */
    qsort(l.v, (size_t)l.n, sizeof *l.v, hsend_cmp);
    for (long i = 0; i < l.n && rc == CS_OK; i++)
        rc = algorithm_add_send(a, l.v[i].chunk, l.v[i].src, l.v[i].dst, l.v[i].step,
                                CS_OP_COPY);
    if (rc != CS_OK) {
        rc = cs_error_set(err, rc, NULL, "cannot store %ld sends", l.n);
        goto fail;
    }
    if ((rc = algorithm_fit_rounds(a, t, err)) != CS_OK)
        goto fail;
    free(l.v);
    info->slots = slots;
    info->segments = seg;
    info->steps = steps;
    *out = a;
    return CS_OK;
fail:
    free(l.v);
    algorithm_free(a);
    return rc;
}

/* ---- collectives ------------------------------------------------------------------ */

/* The collective c (allgather, reducescatter, allreduce) with C chunks per rank
 * share (allreduce: C per rank of its reducescatter/allgather halves). */
static int compose(const cs_topology *t, const cs_collective *c, tree_cache *cache,
                   const cs_hier_options *o, int C, cs_algorithm **out, char *how,
                   size_t howlen, cs_error *err)
{
    *out = NULL;
    hier_shape s;
    const hier_trees *tr = NULL;
    compose_info info = {0};
    cs_algorithm *ag = NULL, *rs = NULL;
    int rc;
    if (c->kind == CS_COLL_ALLGATHER || c->kind == CS_COLL_ALLREDUCE) {
        if ((rc = hier_detect(t, &s, err)) != CS_OK)
            return rc;
        rc = shape_trees(&s, cache, o, &tr, err);
        if (rc == CS_OK)
            rc = compose_allgather(t, &s, tr, C, &ag, &info, err);
        if (rc == CS_OK)
            snprintf(how, howlen,
                     "%d nodes x %d ranks, %d NICs each on a switched fabric; %s; inter: node "
                     "blocks sent directly in %d slots per NIC (%d segment%s per block)",
                     s.nodes, s.m, s.k, tr->how, info.slots, info.segments,
                     info.segments == 1 ? "" : "s");
        shape_free(&s);
        if (rc != CS_OK)
            return rc;
    }
    if (c->kind == CS_COLL_REDUCESCATTER || c->kind == CS_COLL_ALLREDUCE) {
        cs_topology *rt = NULL;
        cs_algorithm *rag = NULL;
        if ((rc = topology_reverse(t, &rt, err)) != CS_OK) {
            algorithm_free(ag);
            return rc;
        }
        rc = hier_detect(rt, &s, err);
        if (rc == CS_OK) {
            rc = shape_trees(&s, cache, o, &tr, err);
            if (rc == CS_OK)
                rc = compose_allgather(rt, &s, tr, C, &rag, &info, err);
            if (rc == CS_OK && c->kind == CS_COLL_REDUCESCATTER)
                snprintf(how, howlen,
                         "%d nodes x %d ranks, %d NICs each on a switched fabric; the inverse of "
                         "the allgather composition on the reversed topology (%s; node blocks "
                         "reduced directly in %d slots per NIC)",
                         s.nodes, s.m, s.k, tr->how, info.slots);
            shape_free(&s);
        }
        topology_free(rt);
        if (rc == CS_OK)
            rc = algorithm_invert(rag, &rs, err);
        algorithm_free(rag);
        if (rc != CS_OK) {
            algorithm_free(ag);
            return rc;
        }
        snprintf(rs->method, sizeof rs->method, "hierarchical");
    }
    cs_algorithm *a = NULL;
    if (c->kind == CS_COLL_ALLGATHER) {
        a = ag;
    } else if (c->kind == CS_COLL_REDUCESCATTER) {
        a = rs;
    } else {
        rc = algorithm_concat(rs, ag, &a, err);
        algorithm_free(rs);
        algorithm_free(ag);
        if (rc != CS_OK)
            return rc;
        snprintf(a->method, sizeof a->method, "hierarchical");
        size_t used = strlen(how);
        snprintf(how + used, howlen - used,
                 "; allreduce = its inverse (intra reduce to NICs, rail reduce-scatter of node "
                 "blocks, intra reduce-scatter) + the allgather, pipelined per chunk");
    }
    if ((rc = algorithm_fit_rounds(a, t, err)) == CS_OK)
        rc = algorithm_verify(t, a, err);
    if (rc != CS_OK) {
        algorithm_free(a);
        return rc;
    }
    *out = a;
    return CS_OK;
}

int hier_synthesize(const cs_topology *t, const cs_collective *c, const cs_hier_options *opt,
                    cs_result **out, cs_error *err)
{
    *out = NULL;
    cs_hier_options o;
    if (opt)
        o = *opt;
    else
        hier_options_default(&o);
    if (!kind_supported(c->kind))
        return unsupported_kind(c, err);
    double t0 = cs_now();
    tree_cache cache = {0};
    cs_result *res = NULL;
    cs_algorithm *a = NULL;
    char how[CS_ERROR_MESSAGE_MAX] = "";
    int rc = compose(t, c, &cache, &o, 1, &a, how, sizeof how, err);
    if (rc == CS_OK)
        rc = result_new("hierarchical", &res, err);
    if (rc == CS_OK) {
        snprintf(a->optimality, sizeof a->optimality, "bandwidth");
        if ((rc = result_add(res, a)) != CS_OK) {
            rc = cs_error_set(err, rc, NULL, "cannot add to the result");
            algorithm_free(a);
        }
        a = NULL;
    }
    algorithm_free(a);
    cache_free(&cache);
    if (rc != CS_OK) {
        result_free(res);
        return rc;
    }
    snprintf(res->reason, sizeof res->reason, "hierarchical: %.230s", how);
    res->stats = json_pack("{s:s}", "composition", how);
    res->complete = false;
    res->synth_seconds = cs_now() - t0;
    *out = res;
    return CS_OK;
}
