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
#include <stdint.h>
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
    int sub;   /* then (dst - src) mod m: each value a permutation of a node's ranks */
    int reduce;
} hsend;

typedef struct send_list {
    hsend *v;
    long n, cap;
} send_list;

/* Orders l by (step, key, sub), ties in generation order: an LSD radix sort
 * of (composite key, index) pairs with 16-bit digits, then one permutation
 * (qsort of a million 32-byte records took 0.6 s, more than the rest of a
 * 1024-rank composition together). */
static int sort_sends(send_list *l)
{
    long n = l->n;
    uint64_t *k = malloc(sizeof *k * (size_t)(n ? n : 1)), *k2 = malloc(sizeof *k2 * (size_t)(n ? n : 1));
    uint32_t *ix = malloc(sizeof *ix * (size_t)(n ? n : 1)), *ix2 = malloc(sizeof *ix2 * (size_t)(n ? n : 1));
    hsend *out = malloc(sizeof *out * (size_t)(n ? n : 1));
    long *cnt = malloc(sizeof *cnt * 65536);
    if (!k || !k2 || !ix || !ix2 || !out || !cnt) {
        free(k); free(k2); free(ix); free(ix2); free(out); free(cnt);
        return CS_ENOMEM;
    }
    uint64_t all = 0;
    for (long i = 0; i < n; i++) {
        k[i] = ((uint64_t)l->v[i].step << 40) | ((uint64_t)l->v[i].key << 8) |
               (uint64_t)l->v[i].sub;
        ix[i] = (uint32_t)i;
        all |= k[i];
    }
    for (int shift = 0; shift < 64 && (all >> shift) != 0; shift += 16) {
        memset(cnt, 0, sizeof *cnt * 65536);
        for (long i = 0; i < n; i++)
            cnt[(k[i] >> shift) & 0xffff]++;
        long at = 0;
        for (int d = 0; d < 65536; d++) {
            long c = cnt[d];
            cnt[d] = at;
            at += c;
        }
        for (long i = 0; i < n; i++) {
            long p = cnt[(k[i] >> shift) & 0xffff]++;
            k2[p] = k[i];
            ix2[p] = ix[i];
        }
        uint64_t *tk = k; k = k2; k2 = tk;
        uint32_t *ti = ix; ix = ix2; ix2 = ti;
    }
    for (long i = 0; i < n; i++)
        out[i] = l->v[ix[i]];
    free(l->v);
    l->v = out;
    free(k); free(k2); free(ix); free(ix2); free(cnt);
    return CS_OK;
}

static int push(send_list *l, long chunk, int src, int dst, int step, long key, int sub)
{
    if (l->n == l->cap) {
        long cap = l->cap ? 2 * l->cap : 4096;
        hsend *v = realloc(l->v, sizeof *v * (size_t)cap);
        if (!v)
            return CS_ENOMEM;
        l->v = v;
        l->cap = cap;
    }
    l->v[l->n++] = (hsend){step, src, dst, chunk, key, sub, 0};
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

/* 0 or 1 for the ordered local pair (a, b), opposite for (b, a), and about
 * half of each rank's peers on each side (a round-robin tournament). */
static int orientation(int a, int b, int m)
{
    int d = ((b - a) % m + m) % m;
    if (2 * d == m)
        return a < b ? 0 : 1;
    return 2 * d > m;
}

typedef struct compose_info {
    int slots, segments, steps;
} compose_info;

/* Allgather with C chunks per rank on t (shape s, trees tr). */
/* The sends of the allgather composition (unsorted) into *lo and its step
 * count.  node_chunks: instead of every rank's C chunks, one chunk per node
 * and segment (chunk sg * N + n, starting at the node's owner rank): the
 * allgather half of the node-chunk allreduce. */
static int build_ag_list(const cs_topology *t, const hier_shape *s, const hier_trees *tr,
                         int C, bool node_chunks, send_list *lo, int *steps_out,
                         compose_info *info)
{
    /* node_chunks: C is the least number of segments per node */
    int N = s->nodes, m = s->m, k = s->k, P = t->ranks;
    int S1 = 0, S3 = 0;
    for (int i = 0; i < m; i++)
        if (tr->spread[i].depth > S1)
            S1 = tr->spread[i].depth;
    for (int j = 0; j < k; j++)
        if (tr->nic[j].depth > S3)
            S3 = tr->nic[j].depth;
    int block = node_chunks ? 1 << 20 : m * C;
    /* segments per (node, distance): enough to use every NIC when there are
     * fewer distances than NICs, else whole blocks (contiguous messages) */
    int seg = N - 1 >= k ? 1 : (int)(k / gcd_l(N - 1, k));
    if (seg > block)
        seg = block;
    if (node_chunks && seg < C)
        seg = C;
    if (node_chunks)
        block = seg;   /* one chunk per segment */
    long items = (long)(N - 1) * seg;
    /* Deal items (distance d, segment) to NICs, keeping d and N - d on one
     * NIC: the reducescatter half (the inverse, on the reversed topology)
     * then talks to the same peers as the allgather half, so a rank's rail
     * thread blocks stay within the runtimes' per-channel limits.  Greedy to
     * the least loaded NIC; an item's slot is its place in its NIC's list,
     * so in each slot every NIC's rail carries a permutation. */
    int *item_d = malloc(sizeof(int) * (size_t)(items ? items : 1));
    int *item_sg = malloc(sizeof(int) * (size_t)(items ? items : 1));
    int *item_nic = malloc(sizeof(int) * (size_t)(items ? items : 1));
    int *item_slot = malloc(sizeof(int) * (size_t)(items ? items : 1));
    int load[64] = {0};
    send_list l = {0};
    int rc = CS_OK, slots = 0;
    if (!item_d || !item_sg || !item_nic || !item_slot)
        rc = CS_ENOMEM;
    long ni = 0;
    int pass_load[64] = {0};
    /* with at least as many distances as NICs, every segment of a pair
     * stays on one NIC too (fewer peers per rank); else segments spread */
    bool together = N - 1 >= k;
    for (int d = 1; rc == CS_OK && 2 * d <= N; d++)
        for (int sg = 0; sg < seg; sg++) {
            int j = 0;
            if (together && sg > 0) {
                j = item_nic[ni - 1];
            } else {
                for (int x = 1; x < k; x++)
                    if (pass_load[x] < pass_load[j])
                        j = x;
            }
            int pair[2] = {d, N - d}, np = 2 * d == N ? 1 : 2;
            pass_load[j] += np;
            for (int z = 0; z < np; z++) {
                item_d[ni] = pair[z];
                item_sg[ni] = sg;
                item_nic[ni] = j;
                ni++;
            }
        }
    /* slots: each NIC sends its short distances first, then their mirrors */
    for (int half = 0; half < 2; half++)
        for (long u = 0; u < ni; u++)
            if ((2 * item_d[u] > N) == half) {
                item_slot[u] = load[item_nic[u]]++;
                if (load[item_nic[u]] > slots)
                    slots = load[item_nic[u]];
            }
    /* Two steps per slot and per tree level: a forward from local rank a to
     * b takes the even or odd one by the pair's orientation, so a rank's
     * sends to a peer and its receives from that peer never share a step.
     * Code generators merge consecutive sends of contiguous chunks on one
     * connection into one runtime step; interleaved with receives from the
     * same peer they cannot, and a rank's list to each peer would grow past
     * the runtimes' 64 steps. */
    /* (only where a rank's unmerged list to a peer would be long: the split
     * costs a little pipelining) */
    int orient = (long)slots * (block / seg) > 16;
    int steps = orient ? S1 + 2 * slots + 2 * S3 + 1 : S1 + slots + S3;
    /* phase 1: each chunk along its source's tree inside its node */
    for (int n = 0; node_chunks && n < N && rc == CS_OK; n++)
        for (int sg = 0; sg < seg; sg++) {
            int own = s->nic[n % k];
            const hier_tree *tt = &tr->spread[own];
            for (int e = 0; e < tt->n && rc == CS_OK; e++)
                rc = push(&l, (long)sg * N + n, s->rank[(long)n * m + tt->src[e]],
                          s->rank[(long)n * m + tt->dst[e]], tt->step[e], 0,
                          (tt->dst[e] - tt->src[e] + m) % m);
        }
    for (int n = 0; !node_chunks && n < N && rc == CS_OK; n++)
        for (int c = 0; c < C; c++)
            for (int i = 0; i < m; i++) {
                long g = (long)c * P + s->rank[(long)n * m + i];
                const hier_tree *tt = &tr->spread[i];
                for (int e = 0; e < tt->n && rc == CS_OK; e++)
                    rc = push(&l, g, s->rank[(long)n * m + tt->src[e]],
                              s->rank[(long)n * m + tt->dst[e]], tt->step[e], 0,
                              (tt->dst[e] - tt->src[e] + m) % m);
            }
    /* phases 2 and 3: item u on NIC item_nic[u] in slot item_slot[u], then
     * the receiving NIC's tree, one step after the slot */
    for (int n = 0; n < N && rc == CS_OK; n++)
        for (long u = 0; u < ni && rc == CS_OK; u++) {
            int d = item_d[u], sg = item_sg[u], j = item_nic[u];
            int slot = item_slot[u], nb = (n + d) % N, nic = s->nic[j];
            int q0 = (int)((long)block * sg / seg), q1 = (int)((long)block * (sg + 1) / seg);
            int from = s->rank[(long)n * m + nic], to = s->rank[(long)nb * m + nic];
            const hier_tree *tt = &tr->nic[j];
            long seglen = (long)block / seg + 1;
            for (int q = q0; q < q1 && rc == CS_OK; q++) {
                long g = node_chunks ? (long)q * N + n
                                     : (long)(q / m) * P + s->rank[(long)n * m + q % m];
                long key = (long)slot * seglen + (q - q0) + 1;
                rc = push(&l, g, from, to, S1 + (1 + orient) * slot, key, 0);
                for (int e = 0; e < tt->n && rc == CS_OK; e++)
                    rc = push(&l, g, s->rank[(long)nb * m + tt->src[e]],
                              s->rank[(long)nb * m + tt->dst[e]],
                              orient ? S1 + 2 * slot + 1 + 2 * tt->step[e] +
                                           orientation(tt->src[e], tt->dst[e], m)
                                     : S1 + slot + 1 + tt->step[e],
                              key, (tt->dst[e] - tt->src[e] + m) % m);
            }
        }
    free(item_d);
    free(item_sg);
    free(item_nic);
    free(item_slot);
    if (rc != CS_OK) {
        free(l.v);
        return CS_ENOMEM;
    }
    info->slots = slots;
    info->segments = seg;
    info->steps = steps;
    *lo = l;
    *steps_out = steps;
    return CS_OK;
}

/* An algorithm of collective c with `chunks` chunks from a send list (sorted
 * here), rounds fitted to t. */
static int list_to_algorithm(const cs_topology *t, const cs_collective *c, int chunks,
                             int steps, send_list *l, cs_algorithm **out, cs_error *err)
{
    cs_algorithm *a = NULL;
    int rc = algorithm_new(c, t->name, t->ranks, chunks, steps, &a, err);
    if (rc != CS_OK)
        return rc;
    snprintf(a->method, sizeof a->method, "hierarchical");
    if (algorithm_reserve_sends(a, l->n) != CS_OK) {
        algorithm_free(a);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends", l->n);
    }
    /* order: step, then arrival rank, then generation order (stable) */
    double tq = cs_now();
    if ((rc = sort_sends(l)) != CS_OK) {
        algorithm_free(a);
        return cs_error_set(err, rc, NULL, "out of memory sorting %ld sends", l->n);
    }
    if (getenv("HIER_TIMING"))
        fprintf(stderr, "hier: sort %.3f s\n", cs_now() - tq);
    for (long i = 0; i < l->n && rc == CS_OK; i++)
        rc = algorithm_add_send(a, l->v[i].chunk, l->v[i].src, l->v[i].dst, l->v[i].step,
                                l->v[i].reduce ? CS_OP_REDUCE : CS_OP_COPY);
    if (rc != CS_OK) {
        algorithm_free(a);
        return cs_error_set(err, rc, NULL, "cannot store %ld sends", l->n);
    }
    if ((rc = algorithm_fit_rounds(a, t, err)) != CS_OK) {
        algorithm_free(a);
        return rc;
    }
    *out = a;
    return CS_OK;
}

/* Allgather with C chunks per rank on t (shape s, trees tr). */
static int compose_allgather(const cs_topology *t, const hier_shape *s, const hier_trees *tr,
                             int C, cs_algorithm **out, compose_info *info, cs_error *err)
{
    send_list l = {0};
    int steps = 0;
    if (build_ag_list(t, s, tr, C, false, &l, &steps, info) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory composing sends");
    cs_collective ag;
    collective_init(&ag, CS_COLL_ALLGATHER, -1);
    int rc = list_to_algorithm(t, &ag, C, steps, &l, out, err);
    free(l.v);
    return rc;
}

/* Allreduce with one chunk per node and segment: the node-level allgather
 * (each node's chunk from its owner rank to every rank) built on the
 * reversed topology and mirrored (sends reversed, steps and order within a
 * step reversed, copies become reductions: every rank's contribution flows
 * up the same trees to the owner), then the node-level allgather itself.
 * A rail message is one whole chunk of buffer / nodes bytes instead of
 * `ranks` chunks, so per-message latency is paid 8x less often on 8-rank
 * nodes and a rank's runtime program has one step per chunk. */
static int compose_node_allreduce(const cs_topology *t, const hier_shape *s,
                                  const hier_trees *tr, const hier_shape *rs_shape,
                                  const hier_trees *rs_tr, int segs, cs_algorithm **out,
                                  compose_info *info, cs_error *err)
{
    send_list up = {0}, down = {0};
    int ups = 0, downs = 0;
    compose_info rinfo;
    if (build_ag_list(t, rs_shape, rs_tr, segs, true, &up, &ups, &rinfo) != CS_OK ||
        build_ag_list(t, s, tr, segs, true, &down, &downs, info) != CS_OK) {
        free(up.v);
        free(down.v);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory composing sends");
    }
    long maxkey = 0;
    for (long i = 0; i < up.n; i++)
        if (up.v[i].key > maxkey)
            maxkey = up.v[i].key;
    send_list l = {0};
    int rc = CS_OK;
    for (long i = 0; i < up.n && rc == CS_OK; i++) {
        const hsend *x = &up.v[i];
        rc = push(&l, x->chunk, x->dst, x->src, ups - 1 - x->step, maxkey - x->key,
                  s->m - 1 - x->sub);
        if (rc == CS_OK)
            l.v[l.n - 1].reduce = 1;
    }
    for (long i = 0; i < down.n && rc == CS_OK; i++) {
        const hsend *x = &down.v[i];
        rc = push(&l, x->chunk, x->src, x->dst, ups + x->step, x->key, x->sub);
    }
    free(up.v);
    free(down.v);
    if (rc != CS_OK) {
        free(l.v);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory composing sends");
    }
    cs_collective ar;
    collective_init(&ar, CS_COLL_ALLREDUCE, -1);
    rc = list_to_algorithm(t, &ar, s->nodes * info->segments, ups + downs, &l, out, err);
    free(l.v);
    return rc;
}

/* ---- collectives ------------------------------------------------------------------ */

/* Verifies a (fitting its rounds first) and adds it to res, or frees it. */
static int finish(const cs_topology *t, cs_algorithm *a, const char *optimality, cs_result *res,
                  cs_error *err)
{
    double tv = cs_now();
    int rc = algorithm_fit_rounds(a, t, err);
    if (rc == CS_OK)
        rc = algorithm_verify(t, a, err);
    if (getenv("HIER_TIMING"))
        fprintf(stderr, "hier: fit+verify %.3f s (%ld sends)\n", cs_now() - tv, a->nsends);
    if (rc == CS_OK) {
        snprintf(a->method, sizeof a->method, "hierarchical");
        snprintf(a->optimality, sizeof a->optimality, "%s", optimality);
        if ((rc = result_add(res, a)) != CS_OK)
            rc = cs_error_set(err, rc, NULL, "cannot add to the result");
        else
            a = NULL;
    }
    algorithm_free(a);
    return rc;
}

/* Shape and trees of t (and of its reverse when `reversed`). */
typedef struct side {
    cs_topology *rt;           /* the reversed topology (owned) or NULL */
    hier_shape s;
    const hier_trees *tr;
} side;

static int side_open(const cs_topology *t, bool reversed, tree_cache *cache,
                     const cs_hier_options *o, side *sd, cs_error *err)
{
    memset(sd, 0, sizeof *sd);
    int rc = CS_OK;
    if (reversed && (rc = topology_reverse(t, &sd->rt, err)) != CS_OK)
        return rc;
    if ((rc = hier_detect(reversed ? sd->rt : t, &sd->s, err)) != CS_OK) {
        topology_free(sd->rt);
        sd->rt = NULL;
        return rc;
    }
    if ((rc = shape_trees(&sd->s, cache, o, &sd->tr, err)) != CS_OK) {
        shape_free(&sd->s);
        topology_free(sd->rt);
        sd->rt = NULL;
    }
    return rc;
}

static void side_close(side *sd)
{
    shape_free(&sd->s);
    topology_free(sd->rt);
    memset(sd, 0, sizeof *sd);
}

/* The compositions of c into res; `how` says what was composed from what. */
static int compose(const cs_topology *t, const cs_collective *c, tree_cache *cache,
                   const cs_hier_options *o, cs_result *res, char *how, size_t howlen,
                   cs_error *err)
{
    side fw, bw;
    compose_info info = {0}, ninfo = {0};
    cs_algorithm *ag = NULL, *rs = NULL, *rag = NULL, *a = NULL;
    bool need_fw = c->kind != CS_COLL_REDUCESCATTER, need_bw = c->kind != CS_COLL_ALLGATHER;
    int rc = CS_OK;
    memset(&fw, 0, sizeof fw);
    memset(&bw, 0, sizeof bw);
    if (need_fw && (rc = side_open(t, false, cache, o, &fw, err)) != CS_OK)
        return rc;
    if (need_bw && (rc = side_open(t, true, cache, o, &bw, err)) != CS_OK) {
        side_close(&fw);
        return rc;
    }
    const side *any = need_fw ? &fw : &bw;
    /* Allreduce frontier: one chunk per node (whole-chunk rail messages:
     * the fewest messages, best from small to large sizes on big clusters),
     * two per node where there are at least as many distances as NICs (finer
     * pipelining at large sizes), and reducescatter + allgather with a chunk
     * per rank up to 256 ranks (the finest pipelining; beyond that its
     * per-rank programs outgrow the runtimes and its synthesis the budget). */
    bool rank_chunks = c->kind != CS_COLL_ALLREDUCE || t->ranks <= 256;
    for (int segs = 1; c->kind == CS_COLL_ALLREDUCE && rc == CS_OK && segs <= 2; segs++) {
        if (segs == 2 && fw.s.nodes - 1 < fw.s.k)
            break;
        rc = compose_node_allreduce(t, &fw.s, fw.tr, &bw.s, bw.tr, segs, &a, &ninfo, err);
        if (rc == CS_OK)
            rc = finish(t, a, segs == 1 ? "latency" : "bandwidth", res, err);
        a = NULL;
    }
    if (rc == CS_OK && need_fw && rank_chunks)
        rc = compose_allgather(t, &fw.s, fw.tr, 1, &ag, &info, err);
    if (rc == CS_OK && need_bw && rank_chunks)
        rc = compose_allgather(bw.rt, &bw.s, bw.tr, 1, &rag, &info, err);
    if (rc == CS_OK && need_bw && rank_chunks) {
        rc = algorithm_invert(rag, &rs, err);
        algorithm_free(rag);
        rag = NULL;
    }
    if (rc == CS_OK && !rank_chunks) {
        info = ninfo;
    } else if (rc == CS_OK && c->kind == CS_COLL_ALLREDUCE) {
        rc = algorithm_concat(rs, ag, &a, err);
        algorithm_free(rs);
        algorithm_free(ag);
        rs = ag = NULL;
    } else if (rc == CS_OK) {
        a = c->kind == CS_COLL_ALLGATHER ? ag : rs;
        ag = rs = NULL;
    }
    if (rc == CS_OK && a)
        rc = finish(t, a, c->kind == CS_COLL_ALLREDUCE ? "" : "bandwidth", res, err);
    algorithm_free(ag);
    algorithm_free(rs);
    algorithm_free(rag);
    if (rc == CS_OK) {
        int used = snprintf(how, howlen,
                            "%d nodes x %d ranks, %d NICs each on a switched fabric; %s; inter: "
                            "node blocks sent directly, %d slots per NIC",
                            any->s.nodes, any->s.m, any->s.k, any->tr->how, info.slots);
        if (used > 0 && (size_t)used < howlen && c->kind == CS_COLL_REDUCESCATTER)
            snprintf(how + used, howlen - (size_t)used,
                     "; reducescatter = the allgather on the reversed topology, inverted");
        else if (used > 0 && (size_t)used < howlen && c->kind == CS_COLL_ALLREDUCE)
            snprintf(how + used, howlen - (size_t)used,
                     "; allreduce: 1 (and 2) chunks per node reduced up the same trees to an "
                     "owner and sent back down%s",
                     rank_chunks ? "; and reducescatter + allgather, a chunk per rank" : "");
    }
    side_close(&fw);
    side_close(&bw);
    return rc;
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
    char how[CS_ERROR_MESSAGE_MAX] = "";
    int rc = result_new("hierarchical", &res, err);
    if (rc == CS_OK)
        rc = compose(t, c, &cache, &o, res, how, sizeof how, err);
    cache_free(&cache);
    if (rc == CS_OK && cs_cancel_requested(o.cancel))
        rc = cs_error_set(err, CS_ECANCELLED, "", "synthesis cancelled");
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
