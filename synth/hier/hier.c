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
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iso.h"
#include "simulate.h"
#include "smt.h"
#include "tacos.h"
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
    bool ring;                 /* fabric: NIC j of node n reaches NIC j of node n+1 only */
    bool ring_back;            /* ... and of node n-1 */
    bool renumbered;           /* local ranks in canonical order, not the groups' (hier_detect) */
} hier_shape;

typedef struct hier_trees {
    hier_tree spread[64];      /* m trees: local i to every other local rank */
    hier_tree nic[64];         /* k trees: NIC j to every other local rank */
    char how[160];             /* where the trees came from */
    char balanced[96];         /* ring fabrics: what balance_nic_trees made of them */
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

static int detect_in_order(const cs_topology *t, const int *order, const int *gorder,
                           hier_shape *s, bool *groups_ok, cs_error *err);
static bool ring_align(const cs_topology *t, const int *canon, int *gorder, int *key);

static int rank_order_cmp(const void *pa, const void *pb, void *ctx)
{
    const int *order = ctx;
    int a = order[*(const int *)pa], b = order[*(const int *)pb];
    return (a > b) - (a < b);
}

/* Nodes as the groups list them (node g = groups[g], local rank i =
 * groups[g].ranks[i]); when that numbering does not show one node type with
 * the same NICs on the same rails (a Slurm allocation or a relabelled
 * document numbers each node's GPUs its own way), each group's ranks are
 * ordered by the topology's canonical labelling (iso.h): its two-level
 * scheme gives isomorphic nodes attached to the fabric alike the same local
 * order, so the detection's checks then hold up to renumbering inside nodes.
 * The canonical order only decides which global rank plays local rank i;
 * nothing is relabelled, so the compositions stay in the caller's numbering
 * and are verified on the caller's topology.  It is tried only after the
 * groups' own order fails (cheap path unchanged), and every check is
 * rerun on it, so a labelling that did not line the nodes up is refused
 * like before. */
static int hier_detect(const cs_topology *t, hier_shape *s, cs_error *err)
{
    memset(s, 0, sizeof *s);
    cs_error first;
    cs_error_clear(&first);
    bool groups_ok = false;
    int rc = detect_in_order(t, NULL, NULL, s, &groups_ok, &first);
    if (rc != CS_EUNSUPPORTED || !groups_ok) {
        if (rc != CS_OK && err)
            *err = first;
        return rc;
    }
    int *canon = malloc(sizeof *canon * (size_t)t->ranks);
    if (!canon)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    /* two-level at every size: only that scheme numbers node by node */
    cs_iso_options io = {.two_level_min_ranks = 1};
    char scheme[16] = "";
    cs_error ierr, second;
    cs_error_clear(&ierr);
    cs_error_clear(&second);
    int lrc = iso_topology_labelling(t, &io, canon, scheme, &ierr);
    if (lrc != CS_OK) {
        free(canon);
        if (err)
            *err = first;
        return rc;
    }
    rc = detect_in_order(t, canon, NULL, s, &groups_ok, &second);
    if (rc == CS_EUNSUPPORTED) {
        /* nodes on a ring of links attach to no fabric element alike, so
         * the canonical order does not line them up: walk the ring */
        int *gorder = malloc(sizeof *gorder * (size_t)t->ngroups);
        int *key = malloc(sizeof *key * (size_t)t->ranks);
        if (gorder && key && ring_align(t, canon, gorder, key)) {
            cs_error third;
            cs_error_clear(&third);
            if (detect_in_order(t, key, gorder, s, &groups_ok, &third) == CS_OK)
                rc = CS_OK;
        }
        free(gorder);
        free(key);
    }
    free(canon);
    if (rc == CS_OK) {
        s->renumbered = true;
        return CS_OK;
    }
    /* the groups' message names the problem as the caller wrote it */
    if (rc == CS_EUNSUPPORTED)
        return cs_error_set(err, rc, first.field,
                            "%.300s; nodes compared up to renumbering inside each node too "
                            "(each node in the canonical order, which lines up isomorphic "
                            "nodes attached alike to fabric switches, and nodes walked around "
                            "a ring of links from node 0)", first.message);
    if (err)
        *err = second;
    return rc;
}

/* hier_detect with each group's ranks taken in `order` (rank -> key; NULL:
 * as the groups list them).  *groups_ok is set once the checks no
 * renumbering can change (group sizes, every rank in a node, shared sets)
 * have passed. */
static int detect_in_order(const cs_topology *t, const int *order, const int *gorder,
                           hier_shape *s, bool *groups_ok, cs_error *err)
{
    memset(s, 0, sizeof *s);
    *groups_ok = false;
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
    *groups_ok = true;
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
    /* node g of the shape is group G(g): gorder (a ring's order) or g */
#define G(g) (gorder ? gorder[g] : (g))
    for (int g = 0; g < N; g++) {
        int *nr = s->rank + (long)g * m;
        memcpy(nr, t->groups[G(g)].ranks, sizeof *nr * (size_t)m);
        if (order)
            qsort_r(nr, (size_t)m, sizeof *nr, rank_order_cmp, (void *)order);
        for (int i = 0; i < m; i++)
            loc[nr[i]] = i;
    }
    for (int w = 0; w < t->nswitches; w++)
        swg[w] = switch_group(t, w);
    /* one node type */
    if ((rc = group_keys(t, loc, swg, G(0), &k0, &n0)) != CS_OK) {
        rc = cs_error_set(err, rc, NULL, "out of memory");
        goto done;
    }
    for (int g = 1; g < N; g++) {
        free(kg);
        kg = NULL;
        if ((rc = group_keys(t, loc, swg, G(g), &kg, &ng)) != CS_OK) {
            rc = cs_error_set(err, rc, NULL, "out of memory");
            goto done;
        }
        if (ng != n0 || memcmp(kg, k0, sizeof *k0 * (size_t)n0) != 0) {
            rc = cs_error_set(err, CS_EUNSUPPORTED, "topology",
                              "hierarchical needs one node type: node %d's links differ from "
                              "node 0's under the %s rank order", g,
                              order ? "canonical" : "groups'");
            goto done;
        }
    }
    /* NICs: local ranks with a link out of their node, the same in every node */
    s->k = 0;
    for (int i = 0; i < m; i++) {
        int r0 = s->rank[i];
        bool nic0 = false;
        for (int l = t->out_begin[r0]; l < t->out_begin[r0 + 1] && !nic0; l++)
            nic0 = t->group_of[t->links[l].dst] != G(0);
        for (int g = 1; g < N; g++) {
            int r = s->rank[(long)g * m + i];
            bool nic = false;
            for (int l = t->out_begin[r]; l < t->out_begin[r + 1] && !nic; l++)
                nic = t->group_of[t->links[l].dst] != G(g);
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
    /* rails: NIC j of every node reaches NIC j of every other node in one hop
     * (a switched fabric), or at least of the next node in group order (a
     * ring: the Slurm hook's "ring" fabric) */
    {
        int miss_a = -1, miss_b = -1, miss_j = 0;
        /* each NIC's out-neighbours marked once (k N^2 link searches were a
         * millisecond on 128 nodes before anything runs in parallel) */
        int *mark = calloc((size_t)t->ranks, sizeof *mark), stamp = 0;
        if (!mark) {
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            goto done;
        }
        for (int j = 0; j < s->k && miss_a < 0; j++)
            for (int a = 0; a < N && miss_a < 0; a++) {
                int ra = s->rank[(long)a * m + s->nic[j]];
                stamp++;
                for (int x = t->out_begin[ra]; x < t->out_begin[ra + 1]; x++)
                    mark[t->links[x].dst] = stamp;
                for (int b = 0; b < N && miss_a < 0; b++)
                    if (a != b && mark[s->rank[(long)b * m + s->nic[j]]] != stamp) {
                        miss_a = a;
                        miss_b = b;
                        miss_j = j;
                    }
            }
        free(mark);
        if (miss_a >= 0) {
            s->ring = true;
            for (int j = 0; j < s->k && s->ring; j++)
                for (int a = 0; a < N && s->ring; a++)
                    s->ring = topology_find_link(t, s->rank[(long)a * m + s->nic[j]],
                                                 s->rank[(long)((a + 1) % N) * m + s->nic[j]]) >= 0;
            s->ring_back = s->ring;
            for (int j = 0; j < s->k && s->ring_back; j++)
                for (int a = 0; a < N && s->ring_back; a++)
                    s->ring_back = topology_find_link(
                                       t, s->rank[(long)a * m + s->nic[j]],
                                       s->rank[(long)((a + N - 1) % N) * m + s->nic[j]]) >= 0;
            if (!s->ring) {
                rc = cs_error_set(err, CS_EUNSUPPORTED, "topology",
                                  "hierarchical needs a switched or ring fabric: NIC rank %d of "
                                  "node %d has no direct link to NIC rank %d of node %d (rails "
                                  "or one fabric switch joining every node's NICs), nor NIC j of "
                                  "each node to NIC j of the next; use tacos",
                                  s->nic[miss_j], miss_a, s->nic[miss_j], miss_b);
                goto done;
            }
        }
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
            if (swg[w] != G(0))
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
#undef G
done:
    free(loc);
    free(swg);
    free(k0);
    free(kg);
    if (rc != CS_OK)
        shape_free(s);
    return rc;
}

/* ---- ring clusters numbered their own way ----------------------------------------- */

/* The physical (not switch-lowered) link a -> b, or -1. */
static int phys_link(const cs_topology *t, int a, int b)
{
    for (int x = t->out_begin[a]; x < t->out_begin[a + 1]; x++)
        if (t->links[x].dst == b && t->links[x].switch_id < 0)
            return x;
    return -1;
}

static bool same_link(const cs_topology *t, int x, int y)
{
    if (x < 0 || y < 0)
        return x == y;
    const cs_link *a = &t->links[x], *b = &t->links[y];
    return a->lanes == b->lanes && a->gbps == b->gbps && a->alpha_us == b->alpha_us;
}

/* Extends map (local -> rank of group g, -1 where open) to a bijection under
 * which g's physical links are node 0's (ref: local -> rank of node 0), by
 * backtracking in local order; *budget bounds the pairs tried. */
static bool extend_map(const cs_topology *t, const int *ref, int m, int g, int *map,
                       unsigned char *used, int i, long *budget)
{
    while (i < m && map[i] >= 0)
        i++;
    if (i == m)
        return true;
    const cs_group *gr = &t->groups[g];
    for (int q = 0; q < m; q++) {
        if (used[q] || --*budget < 0)
            continue;
        int r = gr->ranks[q];
        bool ok = true;
        for (int j = 0; j < m && ok; j++) {
            int x = j == i ? r : map[j];
            if (x < 0)
                continue;
            ok = same_link(t, phys_link(t, ref[i], ref[j]), phys_link(t, r, x)) &&
                 same_link(t, phys_link(t, ref[j], ref[i]), phys_link(t, x, r));
        }
        if (!ok)
            continue;
        map[i] = r;
        used[q] = 1;
        if (extend_map(t, ref, m, g, map, used, i + 1, budget))
            return true;
        map[i] = -1;
        used[q] = 0;
    }
    return false;
}

/* Ring clusters numbered their own way (ranks shuffled inside nodes, nodes
 * listed in any order): no fabric element is attached to alike by two
 * nodes, so the canonical labelling does not line them up; the ring itself
 * does.  From node 0 (the canonical labelling's first node, in its order),
 * walk the ring the way NIC 0's lower-labelled fabric link points: in the next
 * node, local rank nic j is the rank NIC j's fabric link reaches (exactly
 * one link into that node), and the other local ranks are matched by
 * backtracking so the node's links are node 0's; every node must be met
 * once and the walk must close on node 0's own NICs.  Out: gorder (position
 * -> group) and key (rank -> local index), for detect_in_order, which then
 * checks everything again.  false: not a ring this walk lines up. */
static bool ring_align(const cs_topology *t, const int *canon, int *gorder, int *key)
{
    int N = t->ngroups, m = t->groups[0].nranks, nic[64], k = 0;
    if (m > 64 || N < 3)
        return false;
    /* the start, by the canonical labelling (so every numbering of one
     * cluster gets the same node type and trees): the node of the rank
     * labelled first, its ranks in label order */
    int first = 0;
    for (int r = 1; r < t->ranks; r++)
        if (canon[r] < canon[first])
            first = r;
    int g0 = t->group_of[first], ref[64];
    memcpy(ref, t->groups[g0].ranks, sizeof *ref * (size_t)m);
    qsort_r(ref, (size_t)m, sizeof *ref, rank_order_cmp, (void *)canon);
    for (int i = 0; i < m; i++) {
        int r = ref[i];
        for (int x = t->out_begin[r]; x < t->out_begin[r + 1]; x++)
            if (t->group_of[t->links[x].dst] != g0) {
                nic[k++] = i;
                break;
            }
    }
    if (k == 0)
        return false;
    unsigned char *seen = calloc((size_t)N, 1);
    if (!seen)
        return false;
    int cur[64], nxt[64], prev = -1, g = g0;
    memcpy(cur, ref, sizeof *cur * (size_t)m);
    bool ok = true;
    long budget = 2000000;
    for (int pos = 0; ok; pos++) {
        seen[g] = 1;
        gorder[pos] = g;
        for (int i = 0; i < m; i++)
            key[cur[i]] = i;
        /* the next group: NIC 0's fabric neighbour that is not where we came
         * from (first step: the one its link with the lower label reaches) */
        int next = -1, r0 = cur[nic[0]], via = -1;
        for (int x = t->out_begin[r0]; x < t->out_begin[r0 + 1]; x++) {
            int d = t->links[x].dst, h = t->group_of[d];
            if (h == g || h == prev)
                continue;
            if (prev >= 0 && next >= 0 && h != next) {
                ok = false;   /* more than one way on: not a ring */
                break;
            }
            if (next < 0 || canon[d] < canon[via]) {
                next = h;
                via = d;
            }
        }
        if (!ok || next < 0) {
            ok = false;
            break;
        }
        for (int i = 0; i < m; i++)
            nxt[i] = -1;
        unsigned char used[64] = {0};
        for (int j = 0; j < k && ok; j++) {
            int r = cur[nic[j]], hit = -1, hits = 0;
            for (int x = t->out_begin[r]; x < t->out_begin[r + 1]; x++)
                if (t->group_of[t->links[x].dst] == next) {
                    hit = t->links[x].dst;
                    hits++;
                }
            ok = hits == 1;
            for (int q = 0; ok && q < m; q++)
                if (t->groups[next].ranks[q] == hit) {
                    ok = !used[q];
                    used[q] = 1;
                }
            nxt[nic[j]] = hit;
        }
        if (!ok)
            break;
        if (next == g0) {
            /* closing: back on node 0's own NICs, every node met */
            for (int j = 0; j < k && ok; j++)
                ok = nxt[nic[j]] == ref[nic[j]];
            for (int h = 0; h < N && ok; h++)
                ok = seen[h];
            break;
        }
        if (seen[next] || !extend_map(t, ref, m, next, nxt, used, 0, &budget)) {
            ok = false;
            break;
        }
        prev = g;
        g = next;
        memcpy(cur, nxt, sizeof *cur * (size_t)m);
    }
    free(seen);
    return ok;
}

static bool kind_supported(cs_coll_kind k)
{
    return k == CS_COLL_ALLGATHER || k == CS_COLL_REDUCESCATTER || k == CS_COLL_ALLREDUCE ||
           k == CS_COLL_BROADCAST || k == CS_COLL_REDUCE || k == CS_COLL_ALLTOALL ||
           k == CS_COLL_SCATTER || k == CS_COLL_GATHER;
}

static int unsupported_kind(const cs_collective *c, cs_error *err)
{
    return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind",
                        "hierarchical composes allgather, reducescatter, allreduce, broadcast, "
                        "reduce, alltoall, scatter and gather; %s has no composition (custom "
                        "collectives: a pre- and postcondition per chunk have no node "
                        "structure to compose); use tacos, mcf or auto",
                        collective_kind_name(c->kind));
}

void hier_options_default(cs_hier_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->smt_time_limit_s = 2.0;
    opt->flat_max_ranks = 0;
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

int hier_auto_applicable(const cs_topology *t, const cs_collective *c, cs_error *err)
{
    if (!kind_supported(c->kind))
        return unsupported_kind(c, err);
    hier_shape s;
    int rc = hier_detect(t, &s, err);
    if (rc != CS_OK)
        return rc;
    bool ring = s.ring;
    shape_free(&s);
    /* Ring fabrics are composed around the ring with NIC trees balanced to
     * the node's lanes: on the hook's DGX-1 rings of 8-128 nodes that gives
     * flat TACOS's simulated time for allgather and reducescatter, 0.88-1.0
     * of it for allreduce and 0.04-0.23 for broadcast, in tens of steps
     * instead of thousands (docs/BENCHMARKS.md, "Ring fabrics"), so auto
     * takes it; alltoall has no ring composition. */
    if (ring && c->kind == CS_COLL_ALLTOALL)
        return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                            "hierarchical alltoall needs a switched fabric (its direct "
                            "exchange); on a ring fabric use tacos or mcf");
    return CS_OK;
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

/* The node type's links and switches (without its name) and the NIC set. */
static char *node_key(const hier_shape *s)
{
    json_t *doc = topology_to_json(s->node);
    json_object_del(doc, "name");
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
    char *key = node_key(s);
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
    int S1;                    /* steps of phase 1 */
    bool orient;               /* NIC-tree forwards split over two steps per slot */
    bool fitted;               /* rounds_per_step already sampled (see check()) */
} compose_info;

/* The allgather composition, planned: which NIC sends which (distance,
 * segment) item in which slot, and the step numbering.  node_chunks: one
 * chunk per node and segment (chunk sg * N + n, starting at the node's owner
 * rank) instead of every rank's C chunks: the allgather half of the
 * node-chunk allreduce; there C is the least number of segments. */
typedef struct ag_plan {
    const hier_shape *s;
    const hier_trees *tr;
    int N, m, k, P, C;
    bool node_chunks;
    int S1, seg, block, slots, orient, steps;
    long ni;
    int *item_d, *item_q0, *item_q1, *item_nic, *item_slot;
    unsigned char *item_flat;  /* NIC-tree sends in one step (no orientation split) */
    int *item_off;             /* first place of the item's chunks in its slot */
    int seglen;                /* the longest item, in chunks */
    int *slot_item;            /* slots x k: the item a NIC sends in a slot, or -1 */
    const int *owner;          /* node_chunks: local owner rank per node (NULL: NIC n mod k) */
    /* each tree's edges by (dst - src) mod m: edge_at[tree][v] .. [v + 1] */
    unsigned char sorted[128][64], edge_at[128][65];
} ag_plan;

static void plan_free(ag_plan *p)
{
    free(p->item_d);
    free(p->item_q0);
    free(p->item_q1);
    free(p->item_flat);
    free(p->item_off);
    free(p->item_nic);
    free(p->item_slot);
    free(p->slot_item);
}

static void sort_tree_edges(const hier_tree *tt, int m, unsigned char *sorted,
                            unsigned char *at)
{
    int n = 0;
    for (int v = 0; v < m; v++) {
        at[v] = (unsigned char)n;
        for (int e = 0; e < tt->n; e++)
            if ((tt->dst[e] - tt->src[e] + m) % m == v)
                sorted[n++] = (unsigned char)e;
    }
    at[m] = (unsigned char)n;
}

static int plan_init(ag_plan *p, int P, const hier_shape *s, const hier_trees *tr, int C,
                     bool node_chunks)
{
    memset(p, 0, sizeof *p);
    int N = s->nodes, m = s->m, k = s->k;
    *p = (ag_plan){.s = s, .tr = tr, .N = N, .m = m, .k = k, .P = P, .C = C,
                   .node_chunks = node_chunks};
    int S3 = 0;
    for (int i = 0; i < m; i++) {
        if (tr->spread[i].depth > p->S1)
            p->S1 = tr->spread[i].depth;
        sort_tree_edges(&tr->spread[i], m, p->sorted[i], p->edge_at[i]);
    }
    for (int j = 0; j < k; j++) {
        if (tr->nic[j].depth > S3)
            S3 = tr->nic[j].depth;
        sort_tree_edges(&tr->nic[j], m, p->sorted[64 + j], p->edge_at[64 + j]);
    }
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
    p->seg = seg;
    p->block = block;
    long items = (long)(N - 1) * seg;
    /* Deal items (distance d, segment) to NICs, keeping d and N - d on one
     * NIC: the reducescatter half (the inverse, on the reversed topology)
     * then talks to the same peers as the allgather half, so a rank's rail
     * thread blocks stay within the runtimes' per-channel limits.  Greedy to
     * the least loaded NIC; an item's slot is its place in its NIC's list,
     * so in each slot every NIC's rail carries a permutation. */
    size_t cap = (size_t)(items ? items : 1) + (size_t)k * (size_t)block;
    p->item_d = malloc(sizeof(int) * cap);
    p->item_q0 = malloc(sizeof(int) * cap);
    p->item_q1 = malloc(sizeof(int) * cap);
    p->item_nic = malloc(sizeof(int) * cap);
    p->item_slot = malloc(sizeof(int) * cap);
    p->item_flat = calloc(cap, 1);
    p->item_off = calloc(cap, sizeof(int));
    if (!p->item_d || !p->item_q0 || !p->item_q1 || !p->item_nic || !p->item_slot ||
        !p->item_flat || !p->item_off) {
        plan_free(p);
        return CS_ENOMEM;
    }
    int load[64] = {0}, pass_load[64] = {0};
    long ni = 0;
    /* with at least as many distances as NICs, every segment of a pair
     * stays on one NIC too (fewer peers per rank); else segments spread */
    bool together = N - 1 >= k;
    for (int d = 1; 2 * d <= N; d++)
        for (int sg = 0; sg < seg; sg++) {
            int j = 0;
            if (together && sg > 0) {
                j = p->item_nic[ni - 1];
            } else {
                for (int x = 1; x < k; x++)
                    if (pass_load[x] < pass_load[j])
                        j = x;
            }
            int pair[2] = {d, N - d}, np = 2 * d == N ? 1 : 2;
            pass_load[j] += np;
            for (int z = 0; z < np; z++) {
                p->item_d[ni] = pair[z];
                p->item_q0[ni] = (int)((long)block * sg / seg);
                p->item_q1[ni] = (int)((long)block * (sg + 1) / seg);
                p->item_nic[ni] = j;
                ni++;
            }
        }
    /* slots: each NIC sends its short distances first, then their mirrors */
    for (int half = 0; half < 2; half++)
        for (long u = 0; u < ni; u++)
            if ((2 * p->item_d[u] > N) == half) {
                p->item_slot[u] = load[p->item_nic[u]]++;
                if (load[p->item_nic[u]] > p->slots)
                    p->slots = load[p->item_nic[u]];
            }
    /* Whole blocks leave the NICs uneven by up to a block (127 distances over
     * 8 NICs: seven carry 16 blocks, one 15): the last chunks of the heavy
     * NICs' last blocks move to the light ones, one-chunk items at the end
     * of their lists, so every NIC carries the same number of chunks.  They
     * share the light NIC's next slot, one after the other (a slot is a time
     * window of a block; each place in it is still a permutation). */
    if (!node_chunks && seg == 1 && together) {
        int extra[64] = {0};
        long cl[64] = {0}, total = 0;
        long last[64];
        for (int j = 0; j < k; j++)
            last[j] = -1;
        for (long u = 0; u < ni; u++) {
            int j = p->item_nic[u];
            cl[j] += p->item_q1[u] - p->item_q0[u];
            total += p->item_q1[u] - p->item_q0[u];
            if (last[j] < 0 || p->item_slot[u] > p->item_slot[last[j]])
                last[j] = u;
        }
        long ideal = (total + k - 1) / k;
        for (int h = 0; h < k; h++)
            while (cl[h] > ideal && last[h] >= 0 &&
                   p->item_q1[last[h]] - p->item_q0[last[h]] > 1) {
                int l = 0;
                for (int x = 1; x < k; x++)
                    if (cl[x] < cl[l])
                        l = x;
                if (cl[l] >= ideal)
                    break;
                long u = last[h];
                p->item_q1[u]--;
                p->item_d[ni] = p->item_d[u];
                p->item_q0[ni] = p->item_q1[u];
                p->item_q1[ni] = p->item_q1[u] + 1;
                p->item_nic[ni] = l;
                p->item_slot[ni] = load[l] + extra[l] / block;
                p->item_off[ni] = extra[l] % block;
                extra[l]++;
                if (p->item_slot[ni] + 1 > p->slots)
                    p->slots = p->item_slot[ni] + 1;
                cl[h]--;
                cl[l]++;
                ni++;
            }
    }
    p->ni = ni;
    /* each NIC's last item and one-chunk items forward in one step: the
     * orientation split would delay the end (below) and they need no merging */
    long lastu[64];
    for (int j = 0; j < k; j++)
        lastu[j] = -1;
    p->seglen = 1;
    for (long u = 0; u < ni; u++) {
        int j = p->item_nic[u];
        if (lastu[j] < 0 || p->item_slot[u] > p->item_slot[lastu[j]])
            lastu[j] = u;
        if (p->item_off[u] + p->item_q1[u] - p->item_q0[u] > p->seglen)
            p->seglen = p->item_off[u] + p->item_q1[u] - p->item_q0[u];
        p->item_flat[u] = p->item_q1[u] - p->item_q0[u] <= 1;
    }
    /* The last slots forward in one step too: with the split, a slot's odd
     * half waits for its even half and the end of the schedule waits for
     * both (dgxh100:128 allgather: 0.982 of the bound with one flat slot,
     * 0.994 with two).  Two where a rank's list to a peer stays within the
     * runtimes' 64 steps (2 per oriented slot, 2 x block per flat one). */
    int longest = 0;
    for (int j = 0; j < k; j++)
        if (lastu[j] >= 0 && p->item_slot[lastu[j]] + 1 > longest)
            longest = p->item_slot[lastu[j]] + 1;
    int flat_slots = 2 * longest + 2 + 2 * (2 * p->seglen - 2) <= 62 ? 2 : 1;
    for (long u = 0; u < ni; u++) {
        int j = p->item_nic[u];
        if (lastu[j] >= 0 && p->item_slot[u] > p->item_slot[lastu[j]] - flat_slots)
            p->item_flat[u] = 1;
    }
    /* slots x k x places: the item whose chunk a NIC sends at a place */
    long cells = (long)(p->slots ? p->slots : 1) * k * p->seglen;
    p->slot_item = malloc(sizeof(int) * (size_t)cells);
    if (!p->slot_item) {
        plan_free(p);
        return CS_ENOMEM;
    }
    for (long x = 0; x < cells; x++)
        p->slot_item[x] = -1;
    for (long u = 0; u < ni; u++)
        for (int q = p->item_q0[u]; q < p->item_q1[u]; q++)
            p->slot_item[((long)p->item_slot[u] * k + p->item_nic[u]) * p->seglen +
                         p->item_off[u] + q - p->item_q0[u]] = (int)u;
    /* Two steps per slot and per tree level: a forward from local rank a to
     * b takes the even or odd one by the pair's orientation, so a rank's
     * sends to a peer and its receives from that peer never share a step.
     * Code generators merge consecutive sends of contiguous chunks on one
     * connection into one runtime step; interleaved with receives from the
     * same peer they cannot, and a rank's list to each peer would grow past
     * the runtimes' 64 steps.  Only where that list would be long: the split
     * costs a little pipelining. */
    long most = 0, per_nic[64] = {0};
    for (long u = 0; u < ni; u++)
        per_nic[p->item_nic[u]] += p->item_q1[u] - p->item_q0[u];
    for (int j = 0; j < k; j++)
        if (per_nic[j] > most)
            most = per_nic[j];
    p->orient = most > 16;
    p->steps = p->orient ? p->S1 + 2 * p->slots + 2 * S3 + 1 : p->S1 + p->slots + S3;
    return CS_OK;
}

typedef int (*emit_fn)(void *ctx, long chunk, int src, int dst, int step);

/* Every send of the plan, in an order that within each step is the order
 * the simulator should take them in (it takes sends in (step, index) order
 * and never backfills a lane, so a send whose chunk arrives late must not
 * sit before one that is ready early): by the chunk's arrival (slot, then
 * place in its segment), then by (dst - src) mod m, so each run of sends
 * with one value is a permutation of a node's ranks and no port receives
 * twice at once. */
static int plan_emit(const ag_plan *p, emit_fn fn, void *ctx)
{
    const hier_shape *s = p->s;
    const hier_trees *tr = p->tr;
    int N = p->N, m = p->m, k = p->k, P = p->P, rc = CS_OK;
    const int *rank = s->rank;
    /* phase 1: each chunk along its source's tree inside its node */
    for (int v = 0; v < m && rc == CS_OK; v++)
        for (int n = 0; n < N && rc == CS_OK; n++) {
            const int *nr = rank + (long)n * m;
            if (p->node_chunks) {
                int own = p->owner ? p->owner[n] : s->nic[n % k];
                const hier_tree *tt = &tr->spread[own];
                for (int sg = 0; sg < p->seg && rc == CS_OK; sg++)
                    for (int x = p->edge_at[own][v]; x < p->edge_at[own][v + 1] && rc == CS_OK;
                         x++) {
                        int e = p->sorted[own][x];
                        rc = fn(ctx, (long)sg * N + n, nr[tt->src[e]], nr[tt->dst[e]],
                                tt->step[e]);
                    }
                continue;
            }
            for (int c = 0; c < p->C; c++)
                for (int i = 0; i < m && rc == CS_OK; i++) {
                    const hier_tree *tt = &tr->spread[i];
                    long g = (long)c * P + nr[i];
                    for (int x = p->edge_at[i][v]; x < p->edge_at[i][v + 1] && rc == CS_OK; x++) {
                        int e = p->sorted[i][x];
                        rc = fn(ctx, g, nr[tt->src[e]], nr[tt->dst[e]], tt->step[e]);
                    }
                }
        }
    /* phases 2 and 3: item u on its NIC in its slot, then the receiving
     * NIC's tree, one step (or two: orientation) after the slot.  Per
     * (slot, place, NIC) the chunk and per tree edge its step offset are
     * worked out once, not per send (a million sends on dgxh100:128). */
    int seglen = p->seglen;
    int uj[64], gq[64], gdiv[64], gmod[64];
    int est[64][2][64];        /* [nic][flat][edge]: step offset after the slot's base */
    for (int j = 0; j < k; j++) {
        const hier_tree *tt = &tr->nic[j];
        for (int e = 0; e < tt->n; e++) {
            est[j][1][e] = p->orient ? 2 * tt->step[e] : tt->step[e];
            est[j][0][e] = p->orient ? 2 * tt->step[e] + orientation(tt->src[e], tt->dst[e], m)
                                     : tt->step[e];
        }
    }
    for (int slot = 0; slot < p->slots && rc == CS_OK; slot++) {
        int rail_st = p->S1 + (1 + p->orient) * slot;
        int tree_st = p->orient ? p->S1 + 2 * slot + 1 : p->S1 + slot + 1;
        for (int qq = 0; qq < seglen && rc == CS_OK; qq++) {
            for (int j = 0; j < k; j++) {
                int u = p->slot_item[((long)slot * k + j) * seglen + qq];
                uj[j] = u;
                if (u < 0)
                    continue;
                int q = p->item_q0[u] + qq - p->item_off[u];
                if (slot == 0 && !p->node_chunks) {
                    /* the first block starts with the NIC's own
                     * chunk: the others reach it through phase 1 */
                    int len = p->item_q1[u] - p->item_q0[u];
                    int first = (s->nic[j] - p->item_q0[u] % m + m) % m;
                    q = p->item_q0[u] + (qq - p->item_off[u] + first) % len;
                }
                gq[j] = q;
                gdiv[j] = q / m;
                gmod[j] = q % m;
            }
            for (int v = 0; v < m && rc == CS_OK; v++)
                for (int n = 0; n < N && rc == CS_OK; n++) {
                    const int *nr = rank + (long)n * m;
                    for (int j = 0; j < k && rc == CS_OK; j++) {
                        int u = uj[j];
                        if (u < 0)
                            continue;
                        int x0 = p->edge_at[64 + j][v], x1 = p->edge_at[64 + j][v + 1];
                        if (v > 0 && x0 == x1)
                            continue;   /* nothing to send at this v */
                        int d = p->item_d[u];
                        int nb = (unsigned)d < (unsigned)N ? (n + d >= N ? n + d - N : n + d)
                                                           : (n + d) % N;
                        int nic = s->nic[j];
                        const int *br = rank + (long)nb * m;
                        long g = p->node_chunks ? (long)gq[j] * N + n
                                                : (long)gdiv[j] * P + nr[gmod[j]];
                        if (v == 0)
                            rc = fn(ctx, g, nr[nic], br[nic], rail_st);
                        const hier_tree *tt = &tr->nic[j];
                        const int *off = est[j][p->item_flat[u] ? 1 : 0];
                        for (int x = x0; x < x1 && rc == CS_OK; x++) {
                            int e = p->sorted[64 + j][x];
                            rc = fn(ctx, g, br[tt->src[e]], br[tt->dst[e]], tree_st + off[e]);
                        }
                    }
                }
        }
    }
    return rc;
}

/* The number of sends plan_emit emits per step, added to count[] at
 * shift + step (mirrored: shift + mirror_steps - 1 - step), without
 * enumerating them. */
static void plan_count(const ag_plan *p, long *count, int shift, int mirror_steps)
{
#define AT(st) count[shift + (mirror_steps > 0 ? mirror_steps - 1 - (st) : (st))]
    const hier_trees *tr = p->tr;
    int N = p->N, m = p->m, k = p->k;
    if (p->node_chunks) {
        for (int n = 0; n < N; n++) {
            const hier_tree *tt = &tr->spread[p->owner ? p->owner[n] : p->s->nic[n % k]];
            for (int e = 0; e < tt->n; e++)
                AT(tt->step[e]) += p->seg;
        }
    } else {
        for (int i = 0; i < m; i++)
            for (int e = 0; e < tr->spread[i].n; e++)
                AT(tr->spread[i].step[e]) += (long)N * p->C;
    }
    for (long u = 0; u < p->ni; u++) {
        int j = p->item_nic[u], slot = p->item_slot[u];
        long q = p->item_q1[u] - p->item_q0[u];
        const hier_tree *tt = &tr->nic[j];
        AT(p->S1 + (1 + p->orient) * slot) += N * q;
        for (int e = 0; e < tt->n; e++)
            AT(p->orient ? p->S1 + 2 * slot + 1 + 2 * tt->step[e] +
                               (p->item_flat[u] ? 0 : orientation(tt->src[e], tt->dst[e], m))
                         : p->S1 + slot + 1 + tt->step[e]) += N * q;
    }
#undef AT
}

/* rounds_per_step from the sends touching the first `sample` nodes only:
 * every node runs the same pattern (the node-chunk owner repeats with
 * period k, so k nodes hold every variant), so the busiest link or port of
 * a step is among theirs.  1/N of the link lookups of algorithm_fit_rounds,
 * which with the verifier's were half of a 1024-rank composition's time.
 * The verifier checks the result; finish() falls back to the exact fit.
 * Counted as the sends are placed (sample_fit_add from place_send: no
 * second walk over a million sends) or afterwards (fit_rounds_sampled). */
typedef struct sample_fit {
    const cs_topology *t;
    int sample, S;
    int *local;                /* link -> its row in cnt, or -1 (no sampled end) */
    long *cnt;                 /* rows x S */
    long *set_cnt;             /* S */
    /* The rows of the sampled ranks' links by the other end, so a send
     * finds its row without a link search (a few cache misses over the
     * 40-byte links each, a tenth of the sends): ns sampled ranks, out[si
     * * P + dst] and in[si * P + src] (-1: no link); NULL above
     * SAMPLE_MAP_MAX entries (the search then). */
    int *srank;                /* rank -> its index among the sampled, or -1 */
    int32_t *out, *in;
} sample_fit;

#define SAMPLE_MAP_MAX (1L << 22)

static void sample_fit_free(sample_fit *f)
{
    free(f->local);
    free(f->cnt);
    free(f->set_cnt);
    free(f->srank);
    free(f->out);
    free(f->in);
    memset(f, 0, sizeof *f);
}

/* The maps above, when they fit (else left NULL: not an error). */
static void sample_fit_maps(sample_fit *f)
{
    const cs_topology *t = f->t;
    long P = t->ranks, ns = 0;
    f->srank = malloc(sizeof *f->srank * (size_t)P);
    if (!f->srank)
        return;
    for (int r = 0; r < P; r++)
        f->srank[r] = t->group_of[r] < f->sample ? (int)ns++ : -1;   /* as sample_fit_add */
    if (ns * P > SAMPLE_MAP_MAX ||
        !(f->out = malloc(sizeof *f->out * (size_t)(ns * P))) ||
        !(f->in = malloc(sizeof *f->in * (size_t)(ns * P)))) {
        free(f->srank);
        free(f->out);
        f->srank = NULL;
        f->out = NULL;
        return;
    }
    memset(f->out, 0xff, sizeof *f->out * (size_t)(ns * P));
    memset(f->in, 0xff, sizeof *f->in * (size_t)(ns * P));
    for (int r = 0; r < P; r++) {
        long si = f->srank[r];
        if (si < 0)
            continue;
        for (int x = t->out_begin[r]; x < t->out_begin[r + 1]; x++)
            f->out[si * P + t->links[x].dst] = f->local[x];
        for (int x = t->in_begin[r]; x < t->in_begin[r + 1]; x++)
            f->in[si * P + t->links[t->in_links[x]].src] = f->local[t->in_links[x]];
    }
}

static int sample_fit_init(sample_fit *f, const cs_topology *t, int sample, int S)
{
    memset(f, 0, sizeof *f);
    int L = t->nlinks, nlocal = 0;
    f->t = t;
    f->sample = sample;
    f->S = S;
    f->local = malloc(sizeof(int) * (size_t)(L ? L : 1));
    if (!f->local)
        return CS_ENOMEM;
    for (int l = 0; l < L; l++) {
        int gs = t->group_of[t->links[l].src], gd = t->group_of[t->links[l].dst];
        f->local[l] = gs < sample || gd < sample ? nlocal++ : -1;
    }
    f->cnt = calloc((size_t)(nlocal ? nlocal : 1) * (size_t)(S ? S : 1), sizeof(long));
    f->set_cnt = calloc((size_t)(S ? S : 1), sizeof(long));
    if (!f->cnt || !f->set_cnt) {
        sample_fit_free(f);
        return CS_ENOMEM;
    }
    sample_fit_maps(f);
    return CS_OK;
}

static inline void sample_fit_add(sample_fit *f, int src, int dst, int step)
{
    const cs_topology *t = f->t;
    if (t->group_of[src] >= f->sample && t->group_of[dst] >= f->sample)
        return;
    if (f->srank) {
        int row = f->srank[src] >= 0 ? f->out[(long)f->srank[src] * t->ranks + dst]
                                     : f->in[(long)f->srank[dst] * t->ranks + src];
        if (row >= 0)
            f->cnt[(long)row * f->S + step]++;
        return;
    }
    int l = topology_find_link(t, src, dst);
    if (l >= 0 && f->local[l] >= 0)
        f->cnt[(long)f->local[l] * f->S + step]++;
}

/* rounds_per_step of a (with f->S steps) from the counts. */
static void sample_fit_apply(sample_fit *f, cs_algorithm *a)
{
    const cs_topology *t = f->t;
    int S = f->S, L = t->nlinks;
    const int *local = f->local;
    const long *cnt = f->cnt;
    long *set_cnt = f->set_cnt;
    for (int st = 0; st < S; st++)
        a->rounds_per_step[st] = 1;
    for (int l = 0; l < L; l++)
        if (local[l] >= 0)
            for (int st = 0; st < S; st++) {
                long c = cnt[(long)local[l] * S + st];
                if (c == 0)
                    continue;   /* most (link, step) pairs: no division */
                int r = (int)((c + t->links[l].lanes - 1) / t->links[l].lanes);
                if (r > a->rounds_per_step[st])
                    a->rounds_per_step[st] = r;
            }
    /* shared sets whose links are all counted (a sampled rank's ports) */
    for (int k = 0; k < t->nshared; k++) {
        const cs_shared *sh = &t->shared[k];
        bool all = sh->nlinks > 0;
        for (int x = 0; x < sh->nlinks && all; x++)
            all = local[sh->links[x]] >= 0;
        if (!all)
            continue;
        memset(set_cnt, 0, sizeof(long) * (size_t)S);
        for (int x = 0; x < sh->nlinks; x++)
            for (int st = 0; st < S; st++)
                set_cnt[st] += cnt[(long)local[sh->links[x]] * S + st];
        for (int st = 0; st < S; st++) {
            int r = (int)((set_cnt[st] + sh->lanes - 1) / sh->lanes);
            if (r > a->rounds_per_step[st])
                a->rounds_per_step[st] = r;
        }
    }
    algorithm_update_rounds(a);
}

static int fit_rounds_sampled(cs_algorithm *a, const cs_topology *t, int sample)
{
    sample_fit f;
    if (sample_fit_init(&f, t, sample, a->steps) != CS_OK)
        return CS_ENOMEM;
    for (long i = 0; i < a->nsends; i++)
        sample_fit_add(&f, algorithm_send_src(a, i), algorithm_send_dst(a, i),
                       algorithm_send_step(a, i));
    sample_fit_apply(&f, a);
    sample_fit_free(&f);
    return CS_OK;
}

/* Placing emitted sends into an algorithm, step by step: a counting pass,
 * then a filling pass that writes each send at its step's next place
 * (forward), or for a mirrored half at its step's last free place
 * (backward: the mirror reverses the order within a step too).  No list of
 * sends is kept: at a million sends, fresh memory is what costs time. */
#define PLACER_BATCH 128

typedef struct placer {
    cs_algorithm *a;
    long *pos;                 /* per step: next index (forward) or one past it (backward) */
    int shift;                 /* step offset of this half */
    int mirror_steps;          /* > 0: mirrored (steps reversed within this many) */
    bool counting;
    long *count;               /* per step */
    sample_fit *fit;           /* may be NULL: rounds counted as sends are placed */
    /* sends placed but not yet stored: algorithm_put_sends takes them a
     * batch at a time (placer_flush) */
    int nbuf;
    long bidx[PLACER_BATCH];
    int32_t bchunk[PLACER_BATCH], bsrc[PLACER_BATCH], bdst[PLACER_BATCH], bstep[PLACER_BATCH];
    unsigned char bred[PLACER_BATCH];
} placer;

static int placer_flush(placer *pl)
{
    int n = pl->nbuf;
    pl->nbuf = 0;
    return n ? algorithm_put_sends(pl->a, n, pl->bidx, pl->bchunk, pl->bsrc, pl->bdst, pl->bstep,
                                   pl->bred)
             : CS_OK;
}

static int place_send(void *ctx, long chunk, int src, int dst, int step)
{
    placer *pl = ctx;
    cs_op op = CS_OP_COPY;
    if (pl->mirror_steps > 0) {
        int t = src;
        src = dst;
        dst = t;
        step = pl->mirror_steps - 1 - step;
        op = CS_OP_REDUCE;
    }
    step += pl->shift;
    if (pl->counting) {
        pl->count[step]++;
        return CS_OK;
    }
    long i = pl->mirror_steps > 0 ? --pl->pos[step] : pl->pos[step]++;
    if (pl->fit)
        sample_fit_add(pl->fit, src, dst, step);
    if (chunk != (int32_t)chunk)
        return CS_ELIMIT;   /* what algorithm_put_send says of a chunk beyond 32 bits */
    int b = pl->nbuf++;
    pl->bidx[b] = i;
    pl->bchunk[b] = (int32_t)chunk;
    pl->bsrc[b] = src;
    pl->bdst[b] = dst;
    pl->bstep[b] = step;
    pl->bred[b] = op == CS_OP_REDUCE;
    return pl->nbuf == PLACER_BATCH ? placer_flush(pl) : CS_OK;
}

/* An algorithm of collective c (chunks, steps) holding the sends of up to two
 * plans: `mirror` (may be NULL) mirrored into steps [0, mirror->steps), then
 * `fwd` (may be NULL) after it. */
static int plans_to_algorithm(const cs_topology *t, const cs_collective *c, int chunks,
                              const ag_plan *mirror, const ag_plan *fwd, int sample,
                              bool *fitted, cs_algorithm **out, cs_error *err)
{
    sample_fit fit = {0};
    bool fitting = false;
    placer *up = NULL, *down = NULL;
    *fitted = false;
    int ms = mirror ? mirror->steps : 0, steps = ms + (fwd ? fwd->steps : 0);
    cs_algorithm *a = NULL;
    int rc = algorithm_new(c, t->name, t->ranks, chunks, steps, &a, err);
    if (rc != CS_OK)
        return rc;
    long *count = calloc((size_t)steps + 1, sizeof *count);
    long *pos = malloc(sizeof *pos * ((size_t)steps + 1));
    if (!count || !pos) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    /* rounds_per_step sampled as the sends are placed (check() skips its
     * own walk); without memory for it, check() counts them afterwards */
    fitting = sample > 0 && sample < t->ngroups && sample_fit_init(&fit, t, sample, steps) == CS_OK;
    up = calloc(2, sizeof *up);   /* with their batches: a few KB, not on the stack */
    if (!up) {
        rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        goto done;
    }
    down = up + 1;
    *up = (placer){.a = a, .pos = pos, .shift = 0, .mirror_steps = ms, .count = count,
                   .fit = fitting ? &fit : NULL};
    *down = (placer){.a = a, .pos = pos, .shift = ms, .mirror_steps = 0, .count = count,
                     .fit = fitting ? &fit : NULL};
    if (mirror)
        plan_count(mirror, count, 0, ms);
    if (fwd)
        plan_count(fwd, count, ms, 0);
    long total = 0;
    for (int st = 0; st < steps; st++)
        total += count[st];
    /* placeholders with the largest values first, so no column widens twice */
    rc = algorithm_add_send_copies(a, total, a->global_chunks - 1, t->ranks - 1, t->ranks - 1,
                                   steps - 1, CS_OP_COPY);
    if (rc != CS_OK) {
        rc = cs_error_set(err, rc, NULL, "out of memory for %ld sends", total);
        goto done;
    }
    long at = 0;
    for (int st = 0; st < steps; st++) {
        pos[st] = st < ms ? at + count[st] : at;   /* mirrored steps fill backward */
        at += count[st];
    }
    if ((mirror && ((rc = plan_emit(mirror, place_send, up)) != CS_OK ||
                    (rc = placer_flush(up)) != CS_OK)) ||
        (fwd && ((rc = plan_emit(fwd, place_send, down)) != CS_OK ||
                 (rc = placer_flush(down)) != CS_OK)))
        rc = cs_error_set(err, rc, NULL, "cannot store %ld sends", total);
    if (rc == CS_OK && fitting) {
        sample_fit_apply(&fit, a);
        *fitted = true;
    }
done:
    sample_fit_free(&fit);
    free(up);
    free(count);
    free(pos);
    if (rc != CS_OK) {
        algorithm_free(a);
        return rc;
    }
    snprintf(a->method, sizeof a->method, "hierarchical");
    *out = a;
    return CS_OK;
}

/* Allgather with C chunks per rank on t (shape s, trees tr). */
/* unsplit: the same sends and step count with every NIC-tree forward of a
 * slot in one step (the orientation split undone), emitted in arrival
 * order: the best simulated time, since a rank's port then serves the
 * chunks as they arrive; but a rank's sends to a peer interleave with its
 * receives from it and, unmerged, its list to each peer outgrows the MSCCL
 * runtimes' 64 steps.  Same steps and rounds, so a cost-based choice (code
 * generation) keeps the split one, listed first. */
static int compose_allgather(const cs_topology *t, const hier_shape *s, const hier_trees *tr,
                             int C, bool unsplit, int sample, cs_algorithm **out,
                             compose_info *info, cs_error *err)
{
    ag_plan p;
    if (plan_init(&p, t->ranks, s, tr, C, false) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory planning");
    if (unsplit)
        memset(p.item_flat, 1, (size_t)p.ni);
    cs_collective ag;
    collective_init(&ag, CS_COLL_ALLGATHER, -1);
    bool fitted = false;
    int rc = plans_to_algorithm(t, &ag, C, NULL, &p, sample, &fitted, out, err);
    *info = (compose_info){p.slots, p.seg, p.steps, p.S1, p.orient, fitted};
    plan_free(&p);
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
                                  const hier_trees *rs_tr, int segs, int sample,
                                  cs_algorithm **out, compose_info *info, cs_error *err)
{
    ag_plan up, down;
    if (plan_init(&up, t->ranks, rs_shape, rs_tr, segs, true) != CS_OK)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory planning");
    if (plan_init(&down, t->ranks, s, tr, segs, true) != CS_OK) {
        plan_free(&up);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory planning");
    }
    cs_collective ar;
    collective_init(&ar, CS_COLL_ALLREDUCE, -1);
    bool fitted = false;
    int rc = plans_to_algorithm(t, &ar, s->nodes * down.seg, &up, &down, sample, &fitted, out,
                                err);
    *info = (compose_info){down.slots, down.seg, up.steps + down.steps, down.S1, false, fitted};
    plan_free(&up);
    plan_free(&down);
    return rc;
}

/* An algorithm of collective c (chunks, steps) holding the sends a generator
 * emits, placed step by step (a counting pass, then a filling pass). */
typedef int (*gen_fn)(const void *plan, emit_fn fn, void *ctx);

static int generated_algorithm(const cs_topology *t, const cs_collective *c, int chunks,
                               int steps, gen_fn gen, const void *plan, cs_algorithm **out,
                               cs_error *err)
{
    cs_algorithm *a = NULL;
    int rc = algorithm_new(c, t->name, t->ranks, chunks, steps, &a, err);
    if (rc != CS_OK)
        return rc;
    long *count = calloc((size_t)steps + 1, sizeof *count);
    long *pos = malloc(sizeof *pos * ((size_t)steps + 1));
    placer *pl = calloc(1, sizeof *pl);
    if (!count || !pos || !pl)
        rc = CS_ENOMEM;
    else
        *pl = (placer){.a = a, .pos = pos, .counting = true, .count = count};
    if (rc == CS_OK)
        rc = gen(plan, place_send, pl);
    long total = 0;
    for (int st = 0; st < steps && rc == CS_OK; st++) {
        pos[st] = total;
        total += count[st];
    }
    if (rc == CS_OK)
        rc = algorithm_add_send_copies(a, total, a->global_chunks - 1, t->ranks - 1,
                                       t->ranks - 1, steps - 1, CS_OP_COPY);
    if (rc == CS_OK) {
        pl->counting = false;
        rc = gen(plan, place_send, pl);
    }
    if (rc == CS_OK)
        rc = placer_flush(pl);
    free(pl);
    free(count);
    free(pos);
    if (rc != CS_OK) {
        algorithm_free(a);
        return cs_error_set(err, rc, NULL, "cannot build %s: %s",
                            collective_kind_name(c->kind), cs_status_name(rc));
    }
    snprintf(a->method, sizeof a->method, "hierarchical");
    *out = a;
    return CS_OK;
}

/* ---- alltoall ------------------------------------------------------------------------ */

/* Alltoall (C = 1): the chunk from (n, i) to (n', i') travels on the rail of
 * NIC j = i' mod k: inside node n from i to NIC j along i's allgather tree
 * (the intra aggregation), over the rail to node n' in slot d - 1 (d = n' - n:
 * every NIC sends one block, the chunks of its node for one destination
 * rank set, to one node per slot, a permutation), and inside node n' from
 * NIC j to i' along NIC j's tree (the intra scatter).  Within a node it goes
 * along i's tree.  The aggregation is emitted in slot order so a port
 * delivers first what the rails need first. */
typedef struct a2a_plan {
    const hier_shape *s;
    const hier_trees *tr;
    int P, S1, S3, steps;
    int path_edges[64][64][8];  /* spread tree of i: the edges from i to i', in order */
    int path_len[64][64];
    int nic_edges[64][64][8];   /* NIC tree j: the edges from NIC j to i' */
    int nic_len[64][64];
} a2a_plan;

static bool tree_path(const hier_tree *tt, int root, int to, int *edges, int *len)
{
    int parent[64], np = 0, tmp[64];
    for (int i = 0; i < 64; i++)
        parent[i] = -1;
    for (int e = 0; e < tt->n; e++)
        parent[tt->dst[e]] = e;
    for (int y = to; y != root; y = tt->src[parent[y]]) {
        if (parent[y] < 0 || np >= 8)
            return false;
        tmp[np++] = parent[y];
    }
    for (int q = 0; q < np; q++)
        edges[q] = tmp[np - 1 - q];
    *len = np;
    return true;
}

/* The paths of every NIC's in-node tree from its NIC to each local rank
 * (alltoall and scatter both walk them); *depth grows to the deepest tree.
 * false when a path is longer than the 8 hops the plans hold. */
static bool nic_tree_paths(const hier_shape *s, const hier_trees *tr, int edges[64][64][8],
                           int len[64][64], int *depth)
{
    for (int jx = 0; jx < s->k; jx++) {
        if (tr->nic[jx].depth > *depth)
            *depth = tr->nic[jx].depth;
        for (int to = 0; to < s->m; to++)
            if (to != s->nic[jx] &&
                !tree_path(&tr->nic[jx], s->nic[jx], to, edges[jx][to], &len[jx][to]))
                return false;
    }
    return true;
}

static int a2a_emit(const void *plan, emit_fn fn, void *ctx)
{
    const a2a_plan *p = plan;
    const hier_shape *s = p->s;
    int N = s->nodes, m = s->m, k = s->k, P = p->P, rc = CS_OK;
    /* within nodes and the aggregation to the NICs, by slot */
    for (int d = 0; d < N && rc == CS_OK; d++)
        for (int n = 0; n < N && rc == CS_OK; n++) {
            int nb = (n + d) % N;
            const int *nr = s->rank + (long)n * m, *br = s->rank + (long)nb * m;
            for (int i = 0; i < m && rc == CS_OK; i++)
                for (int i2 = 0; i2 < m && rc == CS_OK; i2++) {
                    int dst = br[i2], src = nr[i], to = d == 0 ? i2 : s->nic[i2 % k];
                    if (to == i)
                        continue;
                    long g = (long)dst * P + src;
                    const hier_tree *tt = &p->tr->spread[i];
                    for (int q = 0; q < p->path_len[i][to] && rc == CS_OK; q++) {
                        int e = p->path_edges[i][to][q];
                        rc = fn(ctx, g, nr[tt->src[e]], nr[tt->dst[e]], tt->step[e]);
                    }
                }
        }
    /* the rails, then the scatter inside the destination node */
    for (int d = 1; d < N && rc == CS_OK; d++)
        for (int n = 0; n < N && rc == CS_OK; n++) {
            int nb = (n + d) % N, at = p->S1 + d - 1;
            const int *nr = s->rank + (long)n * m, *br = s->rank + (long)nb * m;
            for (int i2 = 0; i2 < m && rc == CS_OK; i2++) {
                int jx = i2 % k, j = s->nic[jx];
                const hier_tree *tt = &p->tr->nic[jx];
                for (int i = 0; i < m && rc == CS_OK; i++) {
                    long g = (long)br[i2] * P + nr[i];
                    rc = fn(ctx, g, nr[j], br[j], at);
                    for (int q = 0; q < p->nic_len[jx][i2] && rc == CS_OK; q++) {
                        int e = p->nic_edges[jx][i2][q];
                        rc = fn(ctx, g, br[tt->src[e]], br[tt->dst[e]], at + 1 + tt->step[e]);
                    }
                }
            }
        }
    return rc;
}

static int compose_alltoall(const cs_topology *t, const cs_collective *c, const hier_shape *s,
                            const hier_trees *tr, cs_algorithm **out, cs_error *err)
{
    if ((long)t->ranks * t->ranks > 0x7fffffffL)
        return cs_error_set(err, CS_ELIMIT, "topology", "alltoall on %d ranks has more than "
                            "2^31 chunks", t->ranks);
    a2a_plan *p = calloc(1, sizeof *p);
    if (!p)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    p->s = s;
    p->tr = tr;
    p->P = t->ranks;
    int m = s->m;
    bool ok = true;
    for (int i = 0; i < m && ok; i++) {
        if (tr->spread[i].depth > p->S1)
            p->S1 = tr->spread[i].depth;
        for (int to = 0; to < m && ok; to++)
            ok = to == i || tree_path(&tr->spread[i], i, to, p->path_edges[i][to],
                                      &p->path_len[i][to]);
    }
    ok = ok && nic_tree_paths(s, tr, p->nic_edges, p->nic_len, &p->S3);
    if (!ok) {
        free(p);
        return cs_error_set(err, CS_EUNSUPPORTED, NULL, "alltoall: intra paths longer than 8 "
                            "hops");
    }
    p->steps = p->S1 + s->nodes - 1 + p->S3;
    int rc = generated_algorithm(t, c, 1, p->steps, a2a_emit, p, out, err);
    free(p);
    return rc;
}

/* ---- scatter (and gather, its mirror) ------------------------------------------------ */

/* Scatter from the root (node nr, local ir), C = 1: chunk g goes to rank g.
 * Inside the root's node a chunk follows the root's allgather tree to its
 * destination.  A chunk for local rank i' of another node n' takes NIC
 * j = (i' + n') mod k (by_node: n' mod k, so a node's chunks travel as one
 * contiguous block that code generation merges into one step per link: the
 * form whose per-rank programs fit the MSCCL runtimes at 128 nodes, where
 * dealing by rank needs 255 steps on a root's link; dealing by rank spreads
 * each node's chunks over all its NICs and is faster, 0.95-0.99 of the
 * bound against 0.85-0.98): along the root's tree to NIC j of the root's node,
 * over the fabric to NIC j of node n' (one hop on a switched fabric; around
 * the ring the shorter way, hop by hop, half of the opposite node's chunks
 * each way on an even ring), and along NIC j's tree to i'.  Steps are
 * numbered per chunk (tree steps, then one per fabric hop, then NIC-tree
 * steps), so the phases pipeline chunk by chunk; the root sends the chunks
 * of the farthest nodes first, the root's node's own last.  Gather is this
 * built on the reversed topology and mirrored (algorithm_invert). */
typedef struct scatter_plan {
    const hier_shape *s;
    const hier_trees *tr;
    int P, nr, ir, S1, H, S3, steps;
    bool by_node;               /* NIC n mod k for all of node n's chunks, else (i' + n) mod k */
    int path_edges[64][8];      /* root's spread tree: the edges from ir to local `to` */
    int path_len[64];
    int nic_edges[64][64][8];   /* NIC tree jx: the edges from NIC jx to local `to` */
    int nic_len[64][64];
} scatter_plan;

/* Fabric hops from the root's node to node n (and the direction: +1, -1). */
static int scatter_hops(const scatter_plan *p, int n, int local, int *sign)
{
    const hier_shape *s = p->s;
    int N = s->nodes, d = ((n - p->nr) % N + N) % N;
    *sign = 1;
    if (!s->ring)
        return d == 0 ? 0 : 1;
    if (!s->ring_back || 2 * d < N || (2 * d == N && local % 2 == 0))
        return d;
    *sign = -1;
    return N - d;
}

static int scatter_emit(const void *plan, emit_fn fn, void *ctx)
{
    const scatter_plan *p = plan;
    const hier_shape *s = p->s;
    const hier_trees *tr = p->tr;
    int N = s->nodes, m = s->m, k = s->k, rc = CS_OK;
    const int *rr = s->rank + (long)p->nr * m;
    const hier_tree *rt = &tr->spread[p->ir];
    /* farthest nodes first: hop counts from the largest down to 0 */
    for (int far = p->H; far >= 0 && rc == CS_OK; far--)
        for (int dn = 0; dn < N && rc == CS_OK; dn++) {
            int n = (p->nr + dn) % N;
            const int *nr = s->rank + (long)n * m;
            for (int i2 = 0; i2 < m && rc == CS_OK; i2++) {
                int sign, h = scatter_hops(p, n, i2, &sign);
                if (h != far || (n == p->nr && i2 == p->ir))
                    continue;
                long g = nr[i2];
                if (n == p->nr) {
                    for (int q = 0; q < p->path_len[i2] && rc == CS_OK; q++) {
                        int e = p->path_edges[i2][q];
                        rc = fn(ctx, g, rr[rt->src[e]], rr[rt->dst[e]], rt->step[e]);
                    }
                    continue;
                }
                int jx = p->by_node ? n % k : (i2 + n) % k, j = s->nic[jx];
                for (int q = 0; q < p->path_len[j] && rc == CS_OK; q++) {
                    int e = p->path_edges[j][q];
                    rc = fn(ctx, g, rr[rt->src[e]], rr[rt->dst[e]], rt->step[e]);
                }
                for (int hop = 0; hop < h && rc == CS_OK; hop++) {
                    /* switched: straight to node n; ring: to the next node */
                    int x = ((p->nr + sign * hop) % N + N) % N;
                    int y = s->ring ? ((x + sign) % N + N) % N : n;
                    rc = fn(ctx, g, s->rank[(long)x * m + j], s->rank[(long)y * m + j],
                            p->S1 + hop);
                }
                const hier_tree *nt = &tr->nic[jx];
                for (int q = 0; q < p->nic_len[jx][i2] && rc == CS_OK; q++) {
                    int e = p->nic_edges[jx][i2][q];
                    rc = fn(ctx, g, nr[nt->src[e]], nr[nt->dst[e]], p->S1 + h + nt->step[e]);
                }
            }
        }
    return rc;
}

static int compose_scatter(const cs_topology *t, const cs_collective *c, const hier_shape *s,
                           const hier_trees *tr, bool by_node, cs_algorithm **out, cs_error *err)
{
    scatter_plan *p = calloc(1, sizeof *p);
    if (!p)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    p->by_node = by_node;
    p->s = s;
    p->tr = tr;
    p->P = t->ranks;
    int m = s->m, N = s->nodes;
    for (int n = 0; n < N; n++)
        for (int i = 0; i < m; i++)
            if (s->rank[(long)n * m + i] == c->root) {
                p->nr = n;
                p->ir = i;
            }
    bool ok = true;
    p->S1 = tr->spread[p->ir].depth;
    for (int to = 0; to < m && ok; to++)
        ok = to == p->ir ||
             tree_path(&tr->spread[p->ir], p->ir, to, p->path_edges[to], &p->path_len[to]);
    ok = ok && nic_tree_paths(s, tr, p->nic_edges, p->nic_len, &p->S3);
    if (!ok) {
        free(p);
        return cs_error_set(err, CS_EUNSUPPORTED, NULL, "%s: intra paths longer than 8 hops",
                            collective_kind_name(c->kind));
    }
    for (int n = 0; n < N; n++)
        for (int i = 0; i < m; i++) {
            int sign, h = scatter_hops(p, n, i, &sign);
            if (h > p->H)
                p->H = h;
        }
    p->steps = p->S1 + p->H + p->S3;
    if (p->steps < 1)
        p->steps = 1;
    int rc = generated_algorithm(t, c, 1, p->steps, scatter_emit, p, out, err);
    free(p);
    return rc;
}

/* ---- allgather on a ring fabric ------------------------------------------------------ */

/* Node blocks travel around the ring of nodes, each block split into one
 * segment per NIC on that NIC's ring (pipelined: a NIC forwards in hop h
 * what it received in hop h - 1; every ring link carries one segment per
 * hop), and spread inside each node along the receiving NIC's tree. */
typedef struct ring_plan {
    const hier_shape *s;
    const hier_trees *tr;
    int P, C, S1, S3, steps;
    /* block position -> local rank: NIC j's segment is its own chunk and
     * those of the ranks nearest it (ring_segments) */
    int seg[64];
} ring_plan;

/* The block's order for C = 1: segment j (positions [m j / k, m (j+1) / k))
 * starts with NIC j's own rank, then the other ranks go greedily to the
 * NIC with the most lanes to them (ties: lower local index).  NIC j sends
 * its segment first, so its ranks' chunks should reach it in one hop; by
 * position alone (local ranks 2j, 2j+1) that held only where the node's
 * numbering pairs NICs with their neighbours: the hook's DGX-1 as built,
 * not a renumbered ring cluster (0.70 of the bound instead of 0.78). */
static void ring_segments(const hier_shape *s, int *seg)
{
    int m = s->m, k = s->k, fill[64], lanes[64][64] = {{0}};
    unsigned char taken[64] = {0};
    for (int l = 0; l < s->node->nlinks; l++)
        lanes[s->node->links[l].src][s->node->links[l].dst] += s->node->links[l].lanes;
    for (int j = 0; j < k; j++) {
        seg[m * j / k] = s->nic[j];
        fill[j] = 1;
        taken[s->nic[j]] = 1;
    }
    for (int left = m - k; left > 0; left--) {
        int bj = -1, bv = -1, bl = -1;
        for (int j = 0; j < k; j++) {
            if (fill[j] >= m * (j + 1) / k - m * j / k)
                continue;
            for (int v = 0; v < m; v++) {
                if (taken[v])
                    continue;
                int l = lanes[s->nic[j]][v] + lanes[v][s->nic[j]];
                if (l > bl) {
                    bl = l;
                    bj = j;
                    bv = v;
                }
            }
        }
        seg[m * bj / k + fill[bj]++] = bv;
        taken[bv] = 1;
    }
}

static int ring_emit(const void *plan, emit_fn fn, void *ctx)
{
    const ring_plan *p = plan;
    const hier_shape *s = p->s;
    const hier_trees *tr = p->tr;
    int N = s->nodes, m = s->m, k = s->k, P = p->P, block = m * p->C, rc = CS_OK;
    for (int n = 0; n < N && rc == CS_OK; n++)
        for (int c = 0; c < p->C; c++)
            for (int i = 0; i < m && rc == CS_OK; i++) {
                const int *nr = s->rank + (long)n * m;
                const hier_tree *tt = &tr->spread[i];
                for (int e = 0; e < tt->n && rc == CS_OK; e++)
                    rc = fn(ctx, (long)c * P + nr[i], nr[tt->src[e]], nr[tt->dst[e]],
                            tt->step[e]);
            }
    /* both directions where the ring has them: each block goes forward to
     * the next ceil((N-1)/2) nodes and backward to the previous
     * floor((N-1)/2), so every link carries about half the blocks */
    int fwd = s->ring_back ? N / 2 : N - 1, back = s->ring_back ? (N - 1) / 2 : 0;
    /* with N even the node opposite is N/2 hops away both ways: half of
     * each segment goes each way, so no link carries more than N/2 - 1/2
     * segments (whole segments forward would give the forward links N/2,
     * the backward ones N/2 - 1) */
    bool halves = s->ring_back && N % 2 == 0;
    for (int h = 1; h <= fwd && rc == CS_OK; h++)
        for (int dir = 0; dir < 2 && rc == CS_OK; dir++) {
            if (dir == 1 && h > back && !(halves && h == fwd))
                continue;
            int sign = dir ? N - 1 : 1;   /* +1 or -1 mod N */
            for (int j = 0; j < k && rc == CS_OK; j++) {
                int q0 = block * j / k, q1 = block * (j + 1) / k, nic = s->nic[j];
                if (halves && h == fwd) {
                    int mid = q0 + (q1 - q0 + 1) / 2;
                    if (dir == 0)
                        q1 = mid;
                    else
                        q0 = mid;
                }
                const hier_tree *tt = &tr->nic[j];
                for (int q = q0; q < q1 && rc == CS_OK; q++)
                    for (int n = 0; n < N && rc == CS_OK; n++) {
                        const int *nr = s->rank + (long)n * m;
                        const int *xr = s->rank + (long)((n + (long)(h - 1) * sign) % N) * m;
                        const int *yr = s->rank + (long)((n + (long)h * sign) % N) * m;
                        long g = (long)(q / m) * P + nr[p->seg[q % m]];
                        rc = fn(ctx, g, xr[nic], yr[nic], p->S1 + h - 1);
                        for (int e = 0; e < tt->n && rc == CS_OK; e++)
                            rc = fn(ctx, g, yr[tt->src[e]], yr[tt->dst[e]],
                                    p->S1 + h + tt->step[e]);
                    }
            }
        }
    return rc;
}

/* NIC trees for a ring fabric.  Around a ring both ways every NIC takes in
 * two ring links' worth of chunks and spreads each along its tree: per hop
 * one chunk per NIC per tree round, so a node link that k trees use
 * carries k chunks per hop where its lanes carry `lanes`.  The NIC
 * allgather SMT finds minimizes steps and rounds per step, not that load:
 * on the hook's DGX-1 nodes its trees put two on a 1-lane NVLink, which
 * halves what the ring can deliver (0.45 of the bound).  So the trees are
 * re-chosen: every non-root rank of each tree picks a parent among its
 * in-neighbours, by hill climbing from the SMT trees on (the worst link's
 * trees per lane, then the deepest tree, the links at that load, the total
 * depth), one parent change at a time, deterministic.  On the DGX-1 node:
 * one tree per lane everywhere at depth 2. */
typedef struct tree_load {
    int m, k;
    int par[64][64];            /* par[j][v]: parent of v in tree j (-1: root) */
    int lanes[64][64];          /* node link u -> v lanes (0: none) */
} tree_load;

/* Breadth-first search over the node's links from root: dist[v] hops (-1:
 * unreachable), order[] the ranks reached, nearest first; returns how many. */
static int lanes_bfs(const tree_load *L, int root, int *dist, int *order)
{
    int qh = 0, qt = 0;
    for (int v = 0; v < L->m; v++)
        dist[v] = -1;
    dist[root] = 0;
    order[qt++] = root;
    while (qh < qt) {
        int u = order[qh++];
        for (int v = 0; v < L->m; v++)
            if (L->lanes[u][v] && dist[v] < 0) {
                dist[v] = dist[u] + 1;
                order[qt++] = v;
            }
    }
    return qt;
}

static int tree_depth_of(const tree_load *L, int j, int v)
{
    int d = 0;
    for (int u = v; L->par[j][u] >= 0 && d <= L->m; u = L->par[j][u])
        d++;
    return d;   /* > m: a cycle */
}

/* The objective as a tuple, compared lexicographically: worst load (trees
 * per lane, as a fraction num/den compared by cross-multiplying), deepest
 * tree (each level adds a node-link time at the end of the ring: depth 4
 * instead of 2 cost the hook's 8-node ring 0.70 of the bound instead of
 * 0.78), links at that load, total depth.  cost[0..1] the fraction. */
static void tree_cost(const tree_load *L, long cost[5])
{
    int use[64][64] = {{0}};
    long depth_max = 0, depth_sum = 0;
    for (int j = 0; j < L->k; j++)
        for (int v = 0; v < L->m; v++) {
            int p = L->par[j][v];
            if (p < 0)
                continue;
            use[p][v]++;
            long d = tree_depth_of(L, j, v);
            depth_sum += d;
            if (d > depth_max)
                depth_max = d;
        }
    long num = 0, den = 1, at = 0;
    for (int u = 0; u < L->m; u++)
        for (int v = 0; v < L->m; v++) {
            if (!use[u][v])
                continue;
            long n = use[u][v], d = L->lanes[u][v];
            if (n * den > num * d) {
                num = n;
                den = d;
                at = 1;
            } else if (n * den == num * d) {
                at++;
            }
        }
    cost[0] = num;
    cost[1] = den;
    cost[2] = depth_max;
    cost[3] = at;
    cost[4] = depth_sum;
}

static bool cost_less(const long a[5], const long b[5])
{
    if (a[0] * b[1] != b[0] * a[1])
        return a[0] * b[1] < b[0] * a[1];
    for (int i = 2; i < 5; i++)
        if (a[i] != b[i])
            return a[i] < b[i];
    return false;
}

/* Hill climbing on L from its current parents: one parent change at a
 * time, kept when the cost (tree_cost) drops; best = the final cost. */
static void climb(tree_load *L, const int *roots, long best[5])
{
    long c[5];
    tree_cost(L, best);
    for (bool improved = true; improved;) {
        improved = false;
        for (int j = 0; j < L->k; j++)
            for (int v = 0; v < L->m; v++) {
                if (v == roots[j])
                    continue;
                int old = L->par[j][v];
                for (int p = 0; p < L->m; p++) {
                    if (p == old || p == v || !L->lanes[p][v])
                        continue;
                    L->par[j][v] = p;
                    /* no cycle: p must not hang below v */
                    bool cyc = tree_depth_of(L, j, p) > L->m;
                    if (!cyc) {
                        tree_cost(L, c);
                        if (cost_less(c, best)) {
                            memcpy(best, c, sizeof c);
                            old = p;
                            improved = true;
                            continue;
                        }
                    }
                    L->par[j][v] = old;
                }
                L->par[j][v] = old;
            }
    }
}

/* A random shortest-path tree per root on L's links (deterministic: the
 * caller's seed): each rank's parent drawn among its in-neighbours one hop
 * nearer the root, those with lanes left over by the trees before it
 * first.  A start for climb away from the local minimum a single parent
 * change cannot leave (on the DGX-1 node four trees from rank 0 need two
 * of them to reach rank 4 around its 2-lane link from 0, through 5, 6 or
 * 7, which hang below 4 in every tree a single change starts from; and
 * SMT's trees of the node labelled another way climbed to depth 3-4). */
static void random_trees(tree_load *L, const int *roots, unsigned long *seed)
{
    int use[64][64] = {{0}};
    for (int j = 0; j < L->k; j++) {
        int dist[64], order[64];
        for (int v = 0; v < L->m; v++)
            L->par[j][v] = -1;
        int qt = lanes_bfs(L, roots[j], dist, order);
        for (int q = 1; q < qt; q++) {
            int v = order[q], cand[64], nc = 0;
            for (int pass = 0; pass < 2 && nc == 0; pass++)
                for (int u = 0; u < L->m; u++)
                    if (L->lanes[u][v] && dist[u] == dist[v] - 1 &&
                        (pass || use[u][v] < L->lanes[u][v]))
                        cand[nc++] = u;
            *seed = *seed * 6364136223846793005UL + 1442695040888963407UL;
            int u = cand[(int)((*seed >> 33) % (unsigned long)nc)];
            L->par[j][v] = u;
            use[u][v]++;
        }
    }
}

/* Re-chooses the parents of k trees (tree j rooted at roots[j], spanning
 * the node) by hill climbing from trees[0..k), and where that leaves a link
 * with more trees than lanes, from random starts too (the best kept);
 * steps = depth - 1, so a chunk leaves a rank the step after it arrived.
 * before and best: the cost of the given and of the returned trees.  false
 * (trees unchanged) when the node is too large to search or memory runs
 * out. */
static bool balance_trees(const hier_shape *s, const int *roots, hier_tree *trees,
                          long before[5], long best[5])
{
    /* a pass tries k*m*m parent changes at O(k*m + m*m) each: milliseconds
     * for DGX-like nodes (m = 8), minutes for 64-rank nodes with 8 NICs;
     * past the budget the given trees stay (valid, possibly slower) */
    long m = s->m, k = s->k, pass = k * m * m * (k * m + m * m);
    if (pass > 20000000L)
        return false;
    tree_load *L = calloc(2, sizeof *L);
    if (!L)
        return false;
    const cs_topology *node = s->node;
    L->m = s->m;
    L->k = s->k;
    for (int l = 0; l < node->nlinks; l++)
        L->lanes[node->links[l].src][node->links[l].dst] += node->links[l].lanes;
    for (int j = 0; j < s->k; j++) {
        for (int v = 0; v < s->m; v++)
            L->par[j][v] = -1;
        for (int e = 0; e < trees[j].n; e++)
            L->par[j][trees[j].dst[e]] = trees[j].src[e];
    }
    tree_cost(L, before);
    climb(L, roots, best);
    /* restarts while a link carries more trees than lanes: ~20M steps of
     * work at most (64 starts on the DGX-1 node, ~20 ms) */
    long starts = 20000000L / (pass * 4);
    if (starts > 64)
        starts = 64;
    /* ... or while the deepest tree is deeper than its root's eccentricity
     * (a lower bound on its depth): single changes from SMT's trees of a
     * node labelled another way (a renumbered ring cluster) stalled at
     * depth 4 on DGX-1, 0.70 of the bound instead of 0.78 */
    long ecc = 0;
    for (int j = 0; j < s->k; j++) {
        int dist[64], order[64];
        int qt = lanes_bfs(L, roots[j], dist, order);
        if (dist[order[qt - 1]] > ecc)   /* breadth first: the last is the farthest */
            ecc = dist[order[qt - 1]];
    }
    unsigned long seed = 0x9e3779b97f4a7c15UL;
    for (long r = 0; r < starts && (best[0] > best[1] || best[2] > ecc); r++) {
        long c[5];
        L[1] = L[0];
        random_trees(&L[1], roots, &seed);
        climb(&L[1], roots, c);
        if (cost_less(c, best)) {
            L[0] = L[1];
            memcpy(best, c, sizeof c);
        }
    }
    for (int j = 0; j < s->k; j++) {
        hier_tree *tt = &trees[j];
        /* edges by depth, so a parent's send comes before its children's */
        tt->n = 0;
        tt->depth = 0;
        for (int d = 1; d <= s->m; d++)
            for (int v = 0; v < s->m; v++)
                if (L->par[j][v] >= 0 && tree_depth_of(L, j, v) == d) {
                    tt->src[tt->n] = L->par[j][v];
                    tt->dst[tt->n] = v;
                    tt->step[tt->n] = d - 1;
                    if (d > tt->depth)
                        tt->depth = d;
                    tt->n++;
                }
    }
    free(L);
    return true;
}

/* Rebuilds nic[0..k) of tr with balanced parents (balance_trees). */
static void balance_nic_trees(const hier_shape *s, hier_trees *tr)
{
    long before[5], best[5];
    if (!balance_trees(s, s->nic, tr->nic, before, best)) {
        snprintf(tr->balanced, sizeof tr->balanced,
                 "NIC trees as smt gave them (%d-rank nodes: too large to rebalance, or no "
                 "memory)", s->m);
        return;
    }
    snprintf(tr->balanced, sizeof tr->balanced,
             "NIC trees balanced to %ld/%ld per lane, depth %ld (smt's: %ld/%ld, depth %ld)",
             best[0], best[1], best[2], before[0], before[1], before[2]);
}

static int compose_ring_allgather(const cs_topology *t, const hier_shape *s,
                                  const hier_trees *tr, cs_algorithm **out, cs_error *err)
{
    ring_plan p = {s, tr, t->ranks, 1, 0, 0, 0, {0}};
    ring_segments(s, p.seg);
    for (int i = 0; i < s->m; i++)
        if (tr->spread[i].depth > p.S1)
            p.S1 = tr->spread[i].depth;
    for (int j = 0; j < s->k; j++)
        if (tr->nic[j].depth > p.S3)
            p.S3 = tr->nic[j].depth;
    p.steps = p.S1 + (s->ring_back ? s->nodes / 2 : s->nodes - 1) + p.S3;
    cs_collective ag;
    collective_init(&ag, CS_COLL_ALLGATHER, -1);
    return generated_algorithm(t, &ag, p.C, p.steps, ring_emit, &p, out, err);
}

/* ---- broadcast across nodes ---------------------------------------------------------- */

/* Broadcast from `root` with k x per chunks: chunk c travels on NIC c mod k.
 * Inside the root's node every chunk spreads along the root's allgather
 * tree; across nodes each NIC's chunks follow a chain of nodes (pipelined:
 * the bandwidth end, per > 1) or a binomial tree of nodes (the latency end,
 * per = 1); at every other node a chunk spreads from the NIC it arrived at
 * along that NIC's tree. */
/* Across nodes: a binomial tree (direct links), a chain of nodes, and on
 * rings with links both ways two shapes of their own (bc_mode). */
typedef enum bc_mode {
    BC_BINOMIAL,
    BC_CHAIN,
    /* Ring, both ways, the bandwidth end: the chunks split in two halves,
     * one going forward all around the ring and one backward (each N - 1
     * hops), so every node takes half of the data on each of its two ring
     * links: each link carries B / 2k instead of the chain's B / k, and the
     * time tends to the node's in-cut bound (B over 2k links) as the
     * chunks per stream grow; the fill is N - 2 chunk times. */
    BC_RING2,
    /* Ring, both ways, the latency end: every chunk goes forward to the
     * next ceil((N-1)/2) nodes and backward to the previous floor((N-1)/2):
     * N/2 hops instead of N - 1, each link carrying all of its NIC's data. */
    BC_HALVES,
    /* Ring, both ways, between the two for small sizes: per NIC, `far`
     * chunks each way all the way round (N - 1 hops) and then `per` chunks
     * half way round each way.  Every send costs its link the ring's alpha,
     * so a link's chunks pipeline at best as (hops + chunks - 1) chunk
     * times: HALVES pays N/2 hops with all of a NIC's data on every link,
     * RING2 half the data but N - 1 hops.  With the far chunks first the
     * far ones finish their long way while the half-way ones still come
     * in, and every link near the root carries less than HALVES': on 8
     * DGX-1 ring nodes 2 + 3 chunks per stream cost ~48 us of ring time at
     * 1 MiB against ~56 (RING2) and ~57.5 (HALVES) at their best chunk
     * counts (mix_choice). */
    BC_MIX,
    /* Ring, both ways, the small sizes: `per` chunks per NIC, chunk i
     * going forward to the next f_i nodes and backward to the other N - 1
     * - f_i, the f_i consecutive and centred (stagger_reach); each ring
     * link takes its chunks farthest-reaching first.  The far chunks'
     * pipeline fill then overlaps the near ones' sends: a link near the
     * root is busy per x (alpha + chunk time) and little else, where
     * HALVES and MIX lose (hops - 1) chunk times of fill on top.  Cost
     * model (stagger_choice): 8 DGX-1 ring nodes at 1 MiB ~39 us of ring
     * time (6 chunks, reaches 1..6) against ~48 for MIX, ~57 for HALVES. */
    BC_STAGGER,
} bc_mode;

typedef struct bc_plan {
    const hier_shape *s;
    const hier_trees *tr;
    int n0, i0, per, rounds, S1, S3, steps;
    int far;                   /* BC_MIX: chunks per stream all the way round */
    bool chain;
    bc_mode mode;
    /* rings both ways: the root's node feeds its k NICs 2k ring links'
     * worth of data, so chunk c spreads there along a tree of its own, tree
     * c mod k rooted at the root, the k trees balanced to the lanes (the
     * root's single tree put NIC 2's and NIC 6's chunks on one 1-lane
     * NVLink of the DGX-1 node: 0.33 of the bound); else the root's
     * allgather tree to the NIC, then the NIC's tree */
    bool root_trees;
    hier_tree rt[64];
    /* BC_STAGGER, BC_MIX: chunk c goes from the root to NIC c mod k along a
     * shortest path (root_path: the paths spread over the links' lanes),
     * then along the NIC's tree like at every other node.  The balanced
     * trees reach a NIC in up to 3 hops where it is 1-2 away (DGX-1: NIC 4
     * by 0 -> 3 -> 7 -> 4, not the 2-lane 0 -> 4), and at small sizes those
     * chunk times before the first ring send are the schedule's head. */
    bool root_paths;
    int plen[64], psrc[64][64], pdst[64][64];
} bc_plan;

/* BC_STAGGER with n chunks per NIC on an N-node ring: chunk idx goes
 * forward to the next stagger_reach(N, n, idx) nodes, backward to the
 * rest; the reaches are consecutive and centred: within [1, N - 2] for n
 * <= N - 2 (every chunk uses both of the NIC's ring links), [0, N - 1]
 * for n <= N (some go one way only). */
static int stagger_reach(int N, int n, int idx)
{
    int c0 = (N - n) / 2;
    if (c0 < 0)
        c0 = 0;
    int f = c0 + idx;
    return f > N - 1 ? N - 1 : f;
}

/* The idx of the o-th chunk the root's node delivers to a NIC: from both
 * ends of the reaches (n - 1, 0, n - 2, 1, ...), so each link's first
 * chunks (the forward link's largest reach, the backward link's smallest)
 * are there first. */
static int stagger_idx(int n, int o)
{
    return o % 2 == 0 ? n - 1 - o / 2 : o / 2;
}

/* Shortest paths in s's node from local rank `from` to each NIC (plen,
 * psrc, pdst per NIC index): of every combination of shortest paths (up to
 * 8 per NIC, 2^16 combinations), the one whose busiest link carries the
 * fewest paths per lane, then the least sum of paths^2 / lanes.  A
 * symmetric choice, so a node numbered another way gets the same paths up
 * to relabelling (a greedy NIC by NIC took the lower-numbered of two
 * equal first paths and then had to share a 1-lane link). */
typedef struct rp_search {
    int m, k, lanes[64][64], used[64][64];
    int npath[64], len[64], path[64][8][64];   /* per NIC: candidate paths (ranks) */
    int pick[64], best_pick[64];
    double best[2];
    long budget;
} rp_search;

static void rp_paths(rp_search *r, const int *dist, int j, int v, int *stack, int depth)
{
    stack[depth] = v;
    if (dist[v] == 0) {
        if (r->npath[j] < 8) {
            for (int q = 0; q <= depth; q++)
                r->path[j][r->npath[j]][q] = stack[depth - q];
            r->npath[j]++;
        }
        return;
    }
    for (int u = 0; u < r->m && r->npath[j] < 8; u++)
        if (dist[u] >= 0 && dist[u] == dist[v] - 1 && r->lanes[u][v] > 0)
            rp_paths(r, dist, j, u, stack, depth + 1);
}

static void rp_search_at(rp_search *r, int j)
{
    if (r->budget-- <= 0)
        return;
    if (j == r->k) {
        double c[2] = {0, 0};
        for (int u = 0; u < r->m; u++)
            for (int v = 0; v < r->m; v++)
                if (r->used[u][v]) {
                    double x = (double)r->used[u][v] / r->lanes[u][v];
                    if (x > c[0])
                        c[0] = x;
                    c[1] += x * r->used[u][v];
                }
        if (c[0] < r->best[0] - 1e-9 || (c[0] < r->best[0] + 1e-9 && c[1] < r->best[1] - 1e-9)) {
            memcpy(r->best, c, sizeof c);
            memcpy(r->best_pick, r->pick, sizeof r->pick);
        }
        return;
    }
    for (int p = 0; p < (r->npath[j] ? r->npath[j] : 1); p++) {
        r->pick[j] = p;
        for (int q = 0; r->npath[j] && q < r->len[j]; q++)
            r->used[r->path[j][p][q]][r->path[j][p][q + 1]]++;
        rp_search_at(r, j + 1);
        for (int q = 0; r->npath[j] && q < r->len[j]; q++)
            r->used[r->path[j][p][q]][r->path[j][p][q + 1]]--;
    }
}

/* false when out of memory (the caller keeps its trees) */
static bool root_paths(const hier_shape *s, int from, int *plen, int (*psrc)[64],
                       int (*pdst)[64])
{
    rp_search *r = calloc(1, sizeof *r);
    if (!r)
        return false;
    int m = s->m, dist[64], queue[64], stack[64];
    r->m = m;
    r->k = s->k;
    for (int l = 0; l < s->node->nlinks; l++)
        r->lanes[s->node->links[l].src][s->node->links[l].dst] += s->node->links[l].lanes;
    for (int v = 0; v < m; v++)
        dist[v] = -1;
    int qh = 0, qt = 0;
    dist[from] = 0;
    queue[qt++] = from;
    while (qh < qt) {
        int u = queue[qh++];
        for (int v = 0; v < m; v++)
            if (r->lanes[u][v] > 0 && dist[v] < 0) {
                dist[v] = dist[u] + 1;
                queue[qt++] = v;
            }
    }
    for (int j = 0; j < s->k; j++) {
        r->len[j] = dist[s->nic[j]] > 0 ? dist[s->nic[j]] : 0;
        if (r->len[j] > 0)
            rp_paths(r, dist, j, s->nic[j], stack, 0);
    }
    r->best[0] = r->best[1] = INFINITY;
    r->budget = 1L << 16;
    rp_search_at(r, 0);
    for (int j = 0; j < s->k; j++) {
        plen[j] = r->npath[j] && isfinite(r->best[0]) ? r->len[j] : 0;
        for (int q = 0; q < plen[j]; q++) {
            psrc[j][q] = r->path[j][r->best_pick[j]][q];
            pdst[j][q] = r->path[j][r->best_pick[j]][q + 1];
        }
    }
    free(r);
    return true;
}

/* Chunks of a broadcast plan: k streams' worth (RING2: two per NIC). */
static int bc_chunks(const bc_plan *b)
{
    int k = b->s->k;
    if (b->mode == BC_MIX)
        return k * (2 * b->far + b->per);
    if (b->mode == BC_STAGGER)
        return k * b->per;
    return k * b->per * (b->mode == BC_RING2 ? 2 : 1);
}

static void bc_init(bc_plan *b, const hier_shape *s, const hier_trees *tr, int root, bc_mode mode,
                    int per)
{
    bool chain = mode != BC_BINOMIAL;
    memset(b, 0, sizeof *b);
    b->s = s;
    b->tr = tr;
    b->mode = mode;
    for (long x = 0; x < (long)s->nodes * s->m; x++)
        if (s->rank[x] == root) {
            b->n0 = (int)(x / s->m);
            b->i0 = (int)(x % s->m);
        }
    b->chain = chain;
    b->per = chain ? per : 1;
    b->S1 = tr->spread[b->i0].depth;
    if (mode == BC_RING2 || mode == BC_HALVES || mode == BC_MIX || mode == BC_STAGGER) {
        int roots[64] = {0};
        long before[5], best[5];
        for (int j = 0; j < s->k; j++) {
            roots[j] = b->i0;
            b->rt[j] = tr->spread[b->i0];
        }
        bool paths = mode == BC_STAGGER || mode == BC_MIX;
        b->root_trees = !paths && balance_trees(s, roots, b->rt, before, best);
        if (paths) {
            b->root_paths = root_paths(s, b->i0, b->plen, b->psrc, b->pdst);
            for (int j = 0; j < s->k && b->root_paths; j++)
                if (j == 0 || b->plen[j] > b->S1)
                    b->S1 = b->plen[j];
        }
        if (b->root_trees) {
            /* ring sends leave NIC j the step after the deepest tree's
             * last: a uniform start keeps each ring link's chunks in order */
            b->S1 = 0;
            for (int j = 0; j < s->k; j++)
                if (b->rt[j].depth > b->S1)
                    b->S1 = b->rt[j].depth;
        }
    }
    for (int j = 0; j < s->k; j++)
        if (tr->nic[j].depth > b->S3)
            b->S3 = tr->nic[j].depth;
    /* the root's node spreads through its NICs' trees too (bc_emit) */
    int root_node_steps = b->S1 + b->S3;
    b->rounds = 0;
    while ((1L << b->rounds) < s->nodes)
        b->rounds++;
    int hops = mode == BC_HALVES ? s->nodes / 2 : s->nodes - 1;
    b->steps = b->S1 + (chain ? b->per + hops - 1 : b->rounds) + b->S3;
    if (mode == BC_RING2)   /* half-hop grid (bc_emit): last ring send, +2, NIC tree */
        b->steps = b->S1 + 2 * (b->per - 1 + hops - 1) + 1 + 2 + b->S3;
    if (b->steps < root_node_steps)
        b->steps = root_node_steps;
}

/* One ring hop of chunk c: NIC nic of the node h - 1 hops from the root's
 * (sign 1 forward, N - 1 backward) sends to the same NIC of the next node at
 * step `at`, which spreads it over its NIC tree tt from step `land`. */
static int bc_ring_hop(const bc_plan *b, emit_fn fn, void *ctx, int c, int nic,
                       const hier_tree *tt, long sign, int h, int at, int land)
{
    const hier_shape *s = b->s;
    int N = s->nodes, m = s->m;
    const int *fr = s->rank + (long)((b->n0 + (h - 1) * sign) % N) * m;
    const int *xr = s->rank + (long)((b->n0 + h * sign) % N) * m;
    int rc = fn(ctx, c, fr[nic], xr[nic], at);
    for (int e = 0; e < tt->n && rc == CS_OK; e++)
        rc = fn(ctx, c, xr[tt->src[e]], xr[tt->dst[e]], land + tt->step[e]);
    return rc;
}

static int bc_emit(const void *plan, emit_fn fn, void *ctx)
{
    const bc_plan *b = plan;
    const hier_shape *s = b->s;
    int N = s->nodes, m = s->m, k = s->k, rc = CS_OK;
    int C = bc_chunks(b);
    const int *r0 = s->rank + (long)b->n0 * m;
    const hier_tree *sp = &b->tr->spread[b->i0];
    /* the root's node: each chunk goes from the root to its NIC along the
     * root's tree (so the root's port carries it once), then along the NIC's
     * tree to the ranks that do not have it yet */
    int parent_edge[64];
    for (int i = 0; i < m; i++)
        parent_edge[i] = -1;
    for (int e = 0; e < sp->n; e++)
        parent_edge[sp->dst[e]] = e;
    /* the root's trees, a chunk per step per tree (RING2: in the order the
     * ring sends take them): steps only order the sends, but a link's
     * lanes are never backfilled, so with every chunk at its tree step a
     * 2-lane link that two trees use at different steps carried all of one
     * tree's chunks before the other's (0.65 of the bound on DGX-1) */
    for (int c = 0; c < C && rc == CS_OK && b->root_trees; c++) {
        const hier_tree *tt = &b->rt[c % k];
        int base = c / k;
        for (int e = 0; e < tt->n && rc == CS_OK; e++)
            rc = fn(ctx, c, r0[tt->src[e]], r0[tt->dst[e]], base + tt->step[e]);
    }
    for (int c = 0; c < C && rc == CS_OK && !b->root_trees; c++) {
        int j = c % k, nic = s->nic[j];
        unsigned char has[64] = {0};
        has[b->i0] = 1;
        int path[64], np = 0, arrive = -1;
        for (int q = 0; b->root_paths && q < b->plen[j] && rc == CS_OK; q++) {
            rc = fn(ctx, c, r0[b->psrc[j][q]], r0[b->pdst[j][q]], q);
            has[b->pdst[j][q]] = 1;
            arrive = q;
        }
        for (int x = nic; !b->root_paths && x != b->i0 && parent_edge[x] >= 0;
             x = sp->src[parent_edge[x]])
            path[np++] = parent_edge[x];
        for (int q = np - 1; q >= 0 && rc == CS_OK; q--) {
            int e = path[q];
            rc = fn(ctx, c, r0[sp->src[e]], r0[sp->dst[e]], sp->step[e]);
            has[sp->dst[e]] = 1;
            if (sp->step[e] > arrive)
                arrive = sp->step[e];
        }
        /* root paths: the node's spread after every chunk's path (a link
         * takes its sends in step order, and the paths feed the ring) */
        if (b->root_paths)
            arrive = b->S1 - 1;
        const hier_tree *tt = &b->tr->nic[j];
        for (int e = 0; e < tt->n && rc == CS_OK; e++)
            if (!has[tt->dst[e]])
                rc = fn(ctx, c, r0[tt->src[e]], r0[tt->dst[e]], arrive + 1 + tt->step[e]);
    }
    for (int c = 0; c < C && rc == CS_OK; c++) {
        int j = c % k, t = c / k, nic = s->nic[j];
        const hier_tree *tt = &b->tr->nic[j];
        if (b->mode == BC_STAGGER) {
            /* t: the order the root's node delivers the NIC's chunks in
             * (stagger_idx); on a link, position pos = the chunks reaching
             * farther that way.  Hop h of the chunk at pos sits at step
             * S1 + pos + h, about when it arrives (a stream moves a chunk
             * per send time), so the NIC trees' links, shared by chunks
             * from both ways and every NIC, take them in arrival order:
             * with steps 2 pos + h a chunk that came the long way held up
             * a 2-lane NVLink ahead of three that had arrived (8 nodes at
             * 1 MiB: 57.4 us, now 51.4) */
            int n = b->per, idx = stagger_idx(n, t), f = stagger_reach(N, n, idx);
            for (int dir = 0; dir < 2 && rc == CS_OK; dir++) {
                int hops = dir == 0 ? f : N - 1 - f, pos = dir == 0 ? n - 1 - idx : idx;
                long sign = dir ? N - 1 : 1;
                for (int h = 1; h <= hops && rc == CS_OK; h++) {
                    int at = b->S1 + pos + h;
                    rc = bc_ring_hop(b, fn, ctx, c, nic, tt, sign, h, at, at + 1);
                }
            }
            continue;
        }
        if (b->mode == BC_MIX) {
            /* the t-th chunk of NIC j: t < 2 far all the way round, one
             * way (t mod 2); after them half way round each way */
            bool whole = t < 2 * b->far;
            for (int dd = 0; dd < (whole ? 1 : 2) && rc == CS_OK; dd++) {
                int dir = whole ? t % 2 : dd;
                int hops = whole ? N - 1 : dir == 0 ? N / 2 : (N - 1) / 2;
                long sign = dir ? N - 1 : 1;
                for (int h = 1; h <= hops && rc == CS_OK; h++) {
                    /* q: the chunk's place on its link; step S1 + q + h,
                     * about when it arrives there (as BC_STAGGER: the
                     * NIC trees' links take chunks in arrival order; 4
                     * MiB on 8 / 16 nodes: 121 -> 118 us, 160 -> 144) */
                    int q = whole ? t / 2 : b->far + (t - 2 * b->far);
                    int at = b->S1 + q + h;
                    rc = bc_ring_hop(b, fn, ctx, c, nic, tt, sign, h, at, at + 1);
                }
            }
            continue;
        }
        if (b->mode == BC_RING2 || b->mode == BC_HALVES) {
            /* RING2: stream (j, direction) = chunk c's (c mod k, c / k mod
             * 2), its t-th chunk; HALVES: every chunk both ways, half way */
            int dirs = b->mode == BC_HALVES ? 2 : 1, dir0 = b->mode == BC_RING2 ? t % 2 : 0;
            if (b->mode == BC_RING2)
                t /= 2;
            for (int dd = 0; dd < dirs && rc == CS_OK; dd++) {
                int dir = dir0 + dd;
                int hops = b->mode == BC_RING2 ? N - 1 : dir == 0 ? N / 2 : (N - 1) / 2;
                for (int h = 1; h <= hops && rc == CS_OK; h++) {
                    /* RING2 on a grid of half ring-hop times (an NVLink
                     * chunk time where the node links are twice the ring
                     * links), so a NIC tree's link takes the two streams'
                     * chunks in the order they arrive: with whole steps a
                     * forward and a backward chunk shared a step in chunk
                     * order, not arrival order, and since each NIC tree
                     * link is as busy as the two ring links feeding it,
                     * every wait for the later one was lost for good (0.65
                     * of the bound at any chunk count) */
                    int at = b->mode == BC_RING2 ? b->S1 + 2 * (t + h - 1) + dir
                                                 : b->S1 + t + h - 1;
                    int land = b->mode == BC_RING2 ? at + 2 : at + 1;
                    long sign = dir ? N - 1 : 1;
                    rc = bc_ring_hop(b, fn, ctx, c, nic, tt, sign, h, at, land);
                }
            }
            continue;
        }
        for (int x = 1; x < N && rc == CS_OK; x++) {
            /* node x (relative to the root's) receives from `from` at step `at` */
            int from, at;
            if (b->chain) {
                from = x - 1;
                at = b->S1 + t + x - 1;
            } else {
                int r = 0;
                while ((2L << r) <= x)
                    r++;
                from = x - (1 << r);
                at = b->S1 + r;
            }
            const int *fr = s->rank + (long)((b->n0 + from) % N) * m;
            const int *xr = s->rank + (long)((b->n0 + x) % N) * m;
            rc = fn(ctx, c, fr[nic], xr[nic], at);
            for (int e = 0; e < tt->n && rc == CS_OK; e++)
                rc = fn(ctx, c, xr[tt->src[e]], xr[tt->dst[e]], at + 1 + tt->step[e]);
        }
    }
    return rc;
}

/* Broadcast by scatter + node-level allgather, for large sizes across many
 * nodes (a chain needs many more chunks than nodes; a binomial tree sends
 * everything log N times): chunk x (one per node) goes from the root to the
 * NIC x mod k of its node and over that NIC's rail to node x, then the
 * node-chunk allgather (owner: that NIC) spreads every chunk everywhere;
 * sends to ranks that already hold the chunk (the root, the root node's
 * ranks on the way to a NIC) are left out, so each rank receives each chunk
 * once (reduce inverts it). */
typedef struct sag_plan {
    const hier_shape *s;
    const hier_trees *tr;
    int n0, i0, root, shift;
    ag_plan ag;
    unsigned char path[64][64];  /* per NIC index: the root node's ranks on the way */
    int *via, *owner;            /* per node: NIC index its chunk arrives by, owner rank */
} sag_plan;

typedef struct sag_filter {
    const sag_plan *b;
    emit_fn fn;
    void *ctx;
} sag_filter;

static int sag_filter_emit(void *c, long chunk, int src, int dst, int step)
{
    const sag_filter *f = c;
    const sag_plan *b = f->b;
    if (dst == b->root)
        return CS_OK;
    long x = (long)b->n0 * b->s->m;
    for (int i = 0; i < b->s->m; i++)
        if (b->s->rank[x + i] == dst) {
            if (b->path[b->via[chunk]][i])
                return CS_OK;
            break;
        }
    return f->fn(f->ctx, chunk, src, dst, step + b->shift);
}

static int sag_emit(const void *plan, emit_fn fn, void *ctx)
{
    const sag_plan *b = plan;
    const hier_shape *s = b->s;
    int N = s->nodes, m = s->m, k = s->k, rc = CS_OK;
    const int *r0 = s->rank + (long)b->n0 * m;
    const hier_tree *sp = &b->tr->spread[b->i0];
    int parent_edge[64], S1 = sp->depth;
    for (int i = 0; i < m; i++)
        parent_edge[i] = -1;
    for (int e = 0; e < sp->n; e++)
        parent_edge[sp->dst[e]] = e;
    int sent[64] = {0};
    (void)k;
    for (int x = 0; x < N && rc == CS_OK; x++) {
        int j = b->via[x], nic = s->nic[j];
        int path[64], np = 0;
        for (int y = nic; y != b->i0 && parent_edge[y] >= 0; y = sp->src[parent_edge[y]])
            path[np++] = parent_edge[y];
        for (int q = np - 1; q >= 0 && rc == CS_OK; q--)
            rc = fn(ctx, x, r0[sp->src[path[q]]], r0[sp->dst[path[q]]], sp->step[path[q]]);
        if (x != b->n0 && rc == CS_OK)
            rc = fn(ctx, x, r0[nic], s->rank[(long)x * m + nic], S1 + sent[j]++);
    }
    sag_filter f = {b, fn, ctx};
    return rc == CS_OK ? plan_emit(&b->ag, sag_filter_emit, &f) : rc;
}

static int compose_broadcast_sag(const cs_topology *t, const cs_collective *c,
                                 const hier_shape *s, const hier_trees *tr, cs_algorithm **out,
                                 cs_error *err)
{
    sag_plan *b = calloc(1, sizeof *b);
    if (b) {
        b->via = calloc((size_t)s->nodes, sizeof(int));
        b->owner = calloc((size_t)s->nodes, sizeof(int));
    }
    if (!b || !b->via || !b->owner) {
        if (b) {
            free(b->via);
            free(b->owner);
        }
        free(b);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    }
    b->s = s;
    b->tr = tr;
    b->root = c->root;
    for (long x = 0; x < (long)s->nodes * s->m; x++)
        if (s->rank[x] == c->root) {
            b->n0 = (int)(x / s->m);
            b->i0 = (int)(x % s->m);
        }
    const hier_tree *sp = &tr->spread[b->i0];
    int parent_edge[64];
    for (int i = 0; i < s->m; i++)
        parent_edge[i] = -1;
    for (int e = 0; e < sp->n; e++)
        parent_edge[sp->dst[e]] = e;
    if (plan_init(&b->ag, t->ranks, s, tr, 1, true) != CS_OK || b->ag.seg != 1) {
        plan_free(&b->ag);
        free(b->via);
        free(b->owner);
        free(b);
        return cs_error_set(err, CS_EUNSUPPORTED, NULL, "scatter + allgather needs as many "
                            "nodes as NICs");
    }
    /* chunk x reaches node x over the NIC that the allgather uses for the
     * root's node and distance x - n0, and is owned there: the root node's
     * NICs then talk to the same peers in both phases (the runtimes allow 32
     * sending thread blocks per channel) */
    for (long u = 0; u < b->ag.ni; u++)
        b->via[(b->n0 + b->ag.item_d[u]) % s->nodes] = b->ag.item_nic[u];
    b->via[b->n0] = 0;
    for (int x = 0; x < s->nodes; x++)
        b->owner[x] = s->nic[b->via[x]];
    b->ag.owner = b->owner;
    for (int j = 0; j < s->k; j++)
        for (int y = s->nic[j]; y != b->i0 && parent_edge[y] >= 0; y = sp->src[parent_edge[y]])
            b->path[j][y] = 1;
    int most = 0, per[64] = {0};
    for (int x = 0; x < s->nodes; x++)
        if (x != b->n0 && ++per[b->via[x]] > most)
            most = per[b->via[x]];
    b->shift = sp->depth + most;
    int rc = generated_algorithm(t, c, s->nodes, b->shift + b->ag.steps, sag_emit, b, out, err);
    plan_free(&b->ag);
    free(b->via);
    free(b->owner);
    free(b);
    return rc;
}

/* The figures both broadcast cost models read off a ring of nodes: the
 * ring link's alpha and bandwidth (all its lanes), the node's slowest link's
 * alpha and bandwidth, and the deepest NIC tree.  false when the ring's
 * links cannot be read off the topology. */
typedef struct ring_costs {
    double ring_alpha, ring_bw, node_alpha, node_bw;
    int depth;
} ring_costs;

static bool ring_costs_of(const cs_topology *t, const hier_shape *s, const hier_trees *tr,
                          ring_costs *rc)
{
    int l = phys_link(t, s->rank[s->nic[0]], s->rank[(long)s->m + s->nic[0]]);
    if (s->nodes < 3 || l < 0 || t->links[l].gbps <= 0)
        return false;
    rc->ring_alpha = t->links[l].alpha_us;
    rc->ring_bw = t->links[l].gbps * 1e3 * t->links[l].lanes;
    rc->node_alpha = 0;
    rc->node_bw = INFINITY;
    for (int e = 0; e < s->node->nlinks; e++) {
        const cs_link *nl = &s->node->links[e];
        if (nl->alpha_us > rc->node_alpha)
            rc->node_alpha = nl->alpha_us;
        if (nl->gbps * 1e3 < rc->node_bw)
            rc->node_bw = nl->gbps * 1e3;
    }
    if (!isfinite(rc->node_bw))
        rc->node_bw = rc->ring_bw;
    rc->depth = 0;
    for (int j = 0; j < s->k; j++)
        if (tr->nic[j].depth > rc->depth)
            rc->depth = tr->nic[j].depth;
    return true;
}

/* BC_MIX's chunk counts for a broadcast of `bytes` around the ring of s
 * (far chunks each way all the way round, per half way round each way),
 * from the cost model: a ring link costs alpha + chunk / bw per send and a
 * stream of q chunks over h hops takes (h + q - 1) send times; the far
 * chunks go first, so a link's time is max(far + N - 2, far + per + N/2 -
 * 1) sends; the root's node and the NIC trees at the far end add about
 * (root tree depth + NIC tree depth) node-link sends of a chunk.  false
 * when the ring's links cannot be read off the topology. */
static bool mix_choice(const cs_topology *t, const hier_shape *s, const hier_trees *tr,
                       double bytes, int *far_out, int *per_out)
{
    int N = s->nodes, k = s->k;
    ring_costs rcs;
    if (!ring_costs_of(t, s, tr, &rcs))
        return false;
    double ra = rcs.ring_alpha, rb = rcs.ring_bw, na = rcs.node_alpha, nb = rcs.node_bw;
    int depth = rcs.depth;
    double best = INFINITY;
    for (int far = 0; far <= 2 * N; far++)
        for (int per = 0; per <= 2 * N; per++) {
            int q = 2 * far + per;
            if (q == 0 || (long)k * q > 1024)
                continue;
            double chunk = bytes / ((double)k * q);
            int sends = 0;
            if (far > 0)
                sends = far + N - 2;
            if (per > 0 && far + per + N / 2 - 1 > sends)
                sends = far + per + N / 2 - 1;
            double time = sends * (ra + chunk / rb) + 2 * depth * (na + chunk / nb);
            if (time < best) {
                best = time;
                *far_out = far;
                *per_out = per;
            }
        }
    return isfinite(best);
}

/* The ring time of BC_STAGGER with n chunks per NIC, each send costing
 * `send` us on its link: a flow shop per direction (a link takes the
 * chunks reaching past it, farthest first, each once it has arrived). */
static double stagger_ring_us(int N, int n, double send)
{
    double done[1024], worst = 0;
    int order[1024];
    if (n > 1024)
        return INFINITY;
    for (int dir = 0; dir < 2; dir++) {
        /* farthest first: forward by decreasing reach, backward by
         * increasing (its reach is N - 1 - f) */
        for (int p = 0; p < n; p++) {
            order[p] = dir == 0 ? n - 1 - p : p;
            done[p] = 0;
        }
        for (int h = 1; h < N; h++) {
            double free = 0;
            for (int p = 0; p < n; p++) {
                int f = stagger_reach(N, n, order[p]), reach = dir == 0 ? f : N - 1 - f;
                if (reach < h)
                    continue;
                double st = done[p] > free ? done[p] : free;
                free = st + send;
                done[p] = free;
                if (free > worst)
                    worst = free;
            }
        }
    }
    return worst;
}

/* BC_STAGGER's chunks per NIC for a broadcast of `bytes` on s: the n in
 * [1, N] with the least stagger_ring_us plus the node's part (the
 * root's trees before, a NIC tree after: about 2 x NIC tree depth sends of
 * a chunk on the node's slowest link).  0 when the ring's links cannot be
 * read off the topology. */
static int stagger_choice(const cs_topology *t, const hier_shape *s, const hier_trees *tr,
                          double bytes)
{
    int N = s->nodes, k = s->k;
    ring_costs rcs;
    if (!ring_costs_of(t, s, tr, &rcs))
        return 0;
    double ra = rcs.ring_alpha, rb = rcs.ring_bw, na = rcs.node_alpha, nb = rcs.node_bw;
    int depth = rcs.depth;
    double best = INFINITY;
    int pick = 0;
    for (int n = 1; n <= N && (long)k * n <= 1024; n++) {
        double chunk = bytes / ((double)k * n);
        double time = stagger_ring_us(N, n, ra + chunk / rb) + 2 * depth * (na + chunk / nb);
        if (time < best) {
            best = time;
            pick = n;
        }
    }
    return pick;
}

/* Chunks per stream for the both-ways ring broadcast's bandwidth end:
 * ratio to the in-cut bound ~ per / (per + N - 2 + intra fill), so 2N
 * gives ~2/3 at any N; capped so the algorithm stays below ~4M sends on the
 * hook's 128 nodes (2 k per chunks, each to every rank). */
#define RING2_FIT_PER 128

static int ring2_per(int nodes)
{
    int per = 4 * nodes;
    return per > 1024 ? 1024 : per;
}

/* Broadcast on t from c->root (across nodes as `mode` says). */
static int max_step_emit(void *ctx, long chunk, int src, int dst, int step)
{
    (void)chunk;
    (void)src;
    (void)dst;
    int *mx = ctx;
    if (step > *mx)
        *mx = step;
    return CS_OK;
}

static int compose_broadcast(const cs_topology *t, const cs_collective *c, const hier_shape *s,
                             const hier_trees *tr, bc_mode mode, int per, int far,
                             cs_algorithm **out, cs_error *err)
{
    bc_plan b;
    bc_init(&b, s, tr, c->root, mode, per);
    if (mode == BC_MIX || mode == BC_STAGGER) {
        /* the steps the plan takes: counted, not derived (two stream
         * kinds of different lengths, and the root's trees) */
        b.far = far;
        int mx = 0;
        int rc = bc_emit(&b, max_step_emit, &mx);
        if (rc != CS_OK)
            return cs_error_set(err, rc, NULL, "cannot plan broadcast: %s", cs_status_name(rc));
        b.steps = mx + 1;
    }
    return generated_algorithm(t, c, bc_chunks(&b), b.steps, bc_emit, &b, out, err);
}

/* ---- collectives ------------------------------------------------------------------ */

/* Fits rounds (sampled, exact as the fallback) and verifies a.  sample:
 * nodes whose sends stand for all (0: exact).  fitted: the sampled
 * rounds_per_step were already counted while composing (plans_to_algorithm). */
static int check_fitted(const cs_topology *t, cs_algorithm *a, int sample, bool fitted,
                        cs_error *err)
{
    int rc = CS_EVERIFY;
    if (sample > 0 && sample < t->ngroups &&
        (fitted || fit_rounds_sampled(a, t, sample) == CS_OK))
        rc = algorithm_verify(t, a, NULL);
    if (rc != CS_OK) {
        rc = algorithm_fit_rounds(a, t, err);
        if (rc == CS_OK)
            rc = algorithm_verify(t, a, err);
    }
    return rc;
}

/* Adds a checked algorithm to res (or frees it). */
static int add_checked(cs_algorithm *a, const char *optimality, cs_result *res, cs_error *err)
{
    snprintf(a->method, sizeof a->method, "hierarchical");
    snprintf(a->optimality, sizeof a->optimality, "%s", optimality);
    int rc = result_add(res, a);   /* frees a on failure */
    return rc == CS_OK ? CS_OK : cs_error_set(err, rc, NULL, "cannot add to the result");
}

/* A second composition built and checked on another thread while the caller
 * builds and checks the first (on 2 cores, half the wall time: each check
 * of a million sends runs on one thread). */
typedef struct side_job {
    const cs_topology *t;
    const hier_shape *s, *rs_shape;
    const hier_trees *tr, *rs_tr;
    int sample;
    int variant;               /* 0: unsplit allgather, 1: node allreduce, 2 chunks */
    cs_algorithm *a;
    compose_info info;
    int rc;
    cs_error err;
    pthread_t th;
    bool started;
} side_job;

static void *side_job_run(void *arg)
{
    side_job *j = arg;
    cs_error_clear(&j->err);
    j->rc = j->variant == 0
                ? compose_allgather(j->t, j->s, j->tr, 1, true, j->sample, &j->a, &j->info,
                                    &j->err)
                : compose_node_allreduce(j->t, j->s, j->tr, j->rs_shape, j->rs_tr, 2, j->sample,
                                         &j->a, &j->info, &j->err);
    if (j->rc == CS_OK)
        j->rc = check_fitted(j->t, j->a, j->sample, j->info.fitted, &j->err);
    if (j->rc != CS_OK) {
        algorithm_free(j->a);
        j->a = NULL;
    }
    return NULL;
}

/* Starts j on a thread when threads allow, else runs it now. */
static void side_job_start(side_job *j, int threads)
{
    j->started = threads != 1 && pthread_create(&j->th, NULL, side_job_run, j) == 0;
    if (!j->started)
        side_job_run(j);
}

static void side_job_join(side_job *j)
{
    if (j->started)
        pthread_join(j->th, NULL);
    j->started = false;
}

/* Checks a and adds it to res, or frees it. */
static int finish_fitted(const cs_topology *t, cs_algorithm *a, const char *optimality,
                         int sample, bool fitted, cs_result *res, cs_error *err)
{
    int rc = check_fitted(t, a, sample, fitted, err);
    if (rc == CS_OK) {
        rc = add_checked(a, optimality, res, err);
        a = NULL;
    }
    algorithm_free(a);
    return rc;
}

static int finish(const cs_topology *t, cs_algorithm *a, const char *optimality, int sample,
                  cs_result *res, cs_error *err)
{
    return finish_fitted(t, a, optimality, sample, false, res, err);
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
                   bool *renumbered, bool *ring_fabric, cs_error *err)
{
    side fw, bw;
    compose_info info = {0}, ninfo = {0};
    cs_algorithm *ag = NULL, *rs = NULL, *rag = NULL, *a = NULL;
    bool need_fw = c->kind != CS_COLL_REDUCESCATTER && c->kind != CS_COLL_REDUCE &&
                   c->kind != CS_COLL_GATHER;
    bool need_bw = c->kind != CS_COLL_ALLGATHER && c->kind != CS_COLL_BROADCAST &&
                   c->kind != CS_COLL_ALLTOALL && c->kind != CS_COLL_SCATTER;
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
    *renumbered = (need_fw && fw.s.renumbered) || (need_bw && bw.s.renumbered);
    *ring_fabric = (need_fw && fw.s.ring) || (need_bw && bw.s.ring);
    int sample = any->s.k < any->s.nodes ? any->s.k : any->s.nodes;
    bool ring = any->s.ring || (need_fw && need_bw && (fw.s.ring || bw.s.ring));
    if (ring && c->kind == CS_COLL_ALLTOALL) {
        side_close(&fw);
        side_close(&bw);
        return cs_error_set(err, CS_EUNSUPPORTED, "topology",
                            "hierarchical alltoall needs a switched fabric (its direct "
                            "exchange); on a ring fabric use tacos or mcf");
    }
    if (ring && (c->kind == CS_COLL_ALLGATHER || c->kind == CS_COLL_REDUCESCATTER ||
                 c->kind == CS_COLL_ALLREDUCE)) {
        /* around the ring of nodes; reducescatter inverted from the reversed
         * topology; allreduce = reducescatter + allgather */
        char balanced[96] = "";
        hier_trees *btr = malloc(sizeof *btr);
        if (!btr)
            rc = cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
        if (rc == CS_OK && need_fw) {
            *btr = *fw.tr;
            balance_nic_trees(&fw.s, btr);
            snprintf(balanced, sizeof balanced, "%s", btr->balanced);
            rc = compose_ring_allgather(t, &fw.s, btr, &ag, err);
        }
        if (rc == CS_OK && need_bw) {
            *btr = *bw.tr;
            balance_nic_trees(&bw.s, btr);
            if (!need_fw)
                snprintf(balanced, sizeof balanced, "%s", btr->balanced);
            rc = compose_ring_allgather(bw.rt, &bw.s, btr, &rag, err);
        }
        free(btr);
        if (rc == CS_OK && need_bw)
            rc = algorithm_invert(rag, &rs, err);
        if (rc == CS_OK && c->kind == CS_COLL_ALLREDUCE)
            rc = algorithm_concat(rs, ag, &a, err);
        else if (rc == CS_OK) {
            a = c->kind == CS_COLL_ALLGATHER ? ag : rs;
            if (a == ag)
                ag = NULL;
            else
                rs = NULL;
        }
        if (rc == CS_OK)
            rc = finish(t, a, "bandwidth", sample, res, err);
        else
            algorithm_free(a);
        algorithm_free(ag);
        algorithm_free(rs);
        algorithm_free(rag);
        if (rc == CS_OK)
            snprintf(how, howlen,
                     "%d nodes x %d ranks, %d NICs each on a ring fabric, %s; %s; inter: node "
                     "blocks around the ring%s, a segment per NIC, pipelined hop by hop%s",
                     any->s.nodes, any->s.m, any->s.k, balanced, any->tr->how,
                     any->s.ring_back ? " both ways" : "",
                     c->kind == CS_COLL_ALLREDUCE ? "; allreduce = reducescatter + allgather"
                     : c->kind == CS_COLL_REDUCESCATTER ? "; reducescatter inverted" : "");
        side_close(&fw);
        side_close(&bw);
        return rc;
    }
    if (c->kind == CS_COLL_SCATTER || c->kind == CS_COLL_GATHER) {
        /* scatter on t; gather = scatter on the reversed topology, mirrored */
        bool sc = c->kind == CS_COLL_SCATTER;
        const side *sd = sc ? &fw : &bw;
        cs_collective sct;
        collective_init(&sct, CS_COLL_SCATTER, c->root);
        /* frontier: dealt by rank (the best simulated time) and, where a
         * root's link to a NIC would carry more messages than the runtimes'
         * 64 steps per thread block ((N-1) m / k of them), node blocks per
         * NIC too (code generation merges a block into one step per link:
         * the form that fits at 128 nodes).  result_add orders them (steps,
         * then rounds); a cost-based choice (--size, ?size=) takes the
         * faster where its programs fit */
        bool blocks = (long)(sd->s.nodes - 1) * sd->s.m / sd->s.k > 63;
        for (int v = 0; v < (blocks ? 2 : 1) && rc == CS_OK; v++) {
            cs_algorithm *b = NULL;
            bool by_node = v == 1;
            rc = compose_scatter(sc ? t : bw.rt, &sct, &sd->s, sd->tr, by_node, &b, err);
            if (rc == CS_OK && !sc) {
                rc = algorithm_invert(b, &a, err);
                algorithm_free(b);
                b = a;
                a = NULL;
            }
            if (rc == CS_OK)
                rc = finish(t, b, by_node ? "" : "bandwidth", 0, res, err);
        }
        if (rc == CS_OK)
            snprintf(how, howlen,
                     "%d nodes x %d ranks, %d NICs each on a %s fabric; %s; %s: the root's node "
                     "tree to NIC node mod k (node blocks) or (destination + node) mod k, %s, "
                     "that NIC's tree in the destination node; farthest nodes first, pipelined "
                     "per chunk%s",
                     sd->s.nodes, sd->s.m, sd->s.k, sd->s.ring ? "ring" : "switched",
                     sd->tr->how, collective_kind_name(c->kind),
                     sd->s.ring ? "around the ring the shorter way" : "one fabric hop",
                     sc ? "" : " (built on the reversed topology, mirrored)");
        side_close(&fw);
        side_close(&bw);
        return rc;
    }
    if (c->kind == CS_COLL_ALLTOALL) {
        rc = compose_alltoall(t, c, &fw.s, fw.tr, &a, err);
        if (rc == CS_OK)
            rc = finish(t, a, "bandwidth", sample, res, err);
        a = NULL;
        if (rc == CS_OK)
            snprintf(how, howlen,
                     "%d nodes x %d ranks, %d NICs each on a switched fabric; %s; alltoall: "
                     "intra aggregation to the destination's NIC, a direct exchange over the "
                     "rails (a node per slot), intra scatter", fw.s.nodes, fw.s.m, fw.s.k,
                     fw.tr->how);
        side_close(&fw);
        side_close(&bw);
        return rc;
    }
    if (c->kind == CS_COLL_BROADCAST || c->kind == CS_COLL_REDUCE) {
        /* broadcast on t, or on the reversed topology inverted into reduce;
         * frontier: binomial across nodes (k chunks), chains (4k, 16k) */
        bool bcast = c->kind == CS_COLL_BROADCAST;
        const side *sd = bcast ? &fw : &bw;
        /* around a ring both ways every NIC takes in two ring links'
         * worth, as in the ring allgather: the NIC trees balanced to the
         * lanes */
        hier_trees *btr = NULL;
        const hier_trees *use = sd->tr;
        if (sd->s.ring && sd->s.ring_back) {
            if (!(btr = malloc(sizeof *btr))) {
                side_close(&fw);
                side_close(&bw);
                return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
            }
            *btr = *sd->tr;
            balance_nic_trees(&sd->s, btr);
            use = btr;
        }
        cs_collective bc;
        collective_init(&bc, CS_COLL_BROADCAST, c->root);
        /* the variants: (mode, chunks per NIC stream); BC_CHAIN + -1 is
         * the scatter + allgather */
        typedef struct { bc_mode mode; int per; const char *opt; int far; } bc_variant;
        bc_variant vs[20];
        int nv = 0;
        if (!sd->s.ring) {
            vs[nv++] = (bc_variant){BC_BINOMIAL, 1, "latency", 0};
            vs[nv++] = (bc_variant){BC_CHAIN, 4, "", 0};
            vs[nv++] = (bc_variant){BC_CHAIN, 16, "", 0};
            if (sd->s.nodes - 1 >= sd->s.k)
                vs[nv++] = (bc_variant){BC_CHAIN, -1, "bandwidth", 0};
        } else if (!sd->s.ring_back) {
            /* one way round: chains (a binomial tree and the scatter need
             * direct links) */
            vs[nv++] = (bc_variant){BC_CHAIN, 4, "", 0};
            vs[nv++] = (bc_variant){BC_CHAIN, 16, "bandwidth", 0};
        } else {
            /* both ways: half way round each way (latency), and the two
             * halves all the way round, pipelined in 4, 16 and ~2N chunks
             * per stream: the fill is N - 2 chunk times against `per`
             * chunk times of work, so per ~ 2N keeps ~2/3 of the in-cut
             * bound at any ring size (ring2_per) */
            int big = ring2_per(sd->s.nodes);
            vs[nv++] = (bc_variant){BC_HALVES, 1, "latency", 0};
            vs[nv++] = (bc_variant){BC_HALVES, 4, "", 0};
            vs[nv++] = (bc_variant){BC_HALVES, 16, "", 0};
            vs[nv++] = (bc_variant){BC_RING2, 4, "", 0};
            vs[nv++] = (bc_variant){BC_RING2, 16, big > 16 ? "" : "bandwidth", 0};
            /* at most 128 chunks per stream (1024 chunks) where more would
             * be faster: a relay rank of the root's node then has ~2000
             * MSCCL steps, within the runtimes' 4096 elements per rank
             * (2048 chunks: 4096 steps, refused; docs/hier.md) */
            if (big > RING2_FIT_PER)
                vs[nv++] = (bc_variant){BC_RING2, RING2_FIT_PER, "", 0};
            /* and twice that where the fastest has more still (128 nodes
             * and up): 2048 chunks fit as per-rank slices (one <gpu> each;
             * 128 nodes: ~3200 elements), not as one document */
            if (big > 2 * RING2_FIT_PER)
                vs[nv++] = (bc_variant){BC_RING2, 2 * RING2_FIT_PER, "", 0};
            if (big > 16)
                vs[nv++] = (bc_variant){BC_RING2, big, "bandwidth", 0};
            /* the small sizes: far + half-way chunk counts the ring's cost
             * model picks for 256 KiB, 1 MiB and 4 MiB (mix_choice) */
            static const double mix_sizes[3] = {262144.0, 1048576.0, 4194304.0};
            for (int z = 0; z < 3; z++) {
                int far = 0, per = 0;
                if (!mix_choice(bcast ? t : bw.rt, &sd->s, use, mix_sizes[z], &far, &per))
                    continue;
                bool dup = false;
                for (int v = 0; v < nv; v++)
                    dup |= (vs[v].mode == BC_MIX && vs[v].far == far && vs[v].per == per) ||
                           (vs[v].mode == BC_HALVES && far == 0 && vs[v].per == per);
                if (!dup)
                    vs[nv++] = (bc_variant){BC_MIX, per, "", far};
                int n = stagger_choice(bcast ? t : bw.rt, &sd->s, use, mix_sizes[z]);
                dup = n == 0;
                for (int v = 0; v < nv; v++)
                    dup |= vs[v].mode == BC_STAGGER && vs[v].per == n;
                if (!dup)
                    vs[nv++] = (bc_variant){BC_STAGGER, n, "", 0};
            }
        }
        for (int v = 0; v < nv && rc == CS_OK; v++) {
            cs_algorithm *b = NULL;
            rc = vs[v].per < 0
                     ? compose_broadcast_sag(bcast ? t : bw.rt, &bc, &sd->s, use, &b, err)
                     : compose_broadcast(bcast ? t : bw.rt, &bc, &sd->s,
                                         use, vs[v].mode,
                                         vs[v].per, vs[v].far, &b, err);
            if (rc == CS_OK && !bcast) {
                rc = algorithm_invert(b, &a, err);
                algorithm_free(b);
                b = a;
                a = NULL;
            }
            if (rc == CS_OK)
                rc = finish(t, b, vs[v].opt, 0, res, err);
        }
        if (rc == CS_OK && sd->s.ring && sd->s.ring_back)
            snprintf(how, howlen,
                     "%d nodes x %d ranks, %d NICs each on a ring fabric; %s around the ring "
                     "both ways: k balanced trees from the root, each "
                     "NIC's chunks half way round each way (k x 1, 4, 16), half the "
                     "data all the way round each way (2k x 4, 16, %d), or a few all the way "
                     "first, pipelined, then "
                     "the NIC trees (%.64s); %.80s%s",
                     sd->s.nodes, sd->s.m, sd->s.k, collective_kind_name(c->kind),
                     ring2_per(sd->s.nodes), use->balanced, sd->tr->how,
                     bcast ? "" : "; built on the reversed topology, inverted");
        else if (rc == CS_OK)
            snprintf(how, howlen,
                     "%d nodes x %d ranks, %d NICs each on a %s fabric; %s; %s: the "
                     "root's node tree, then each NIC's chunks across nodes by %s, then the "
                     "NIC trees%s%s",
                     sd->s.nodes, sd->s.m, sd->s.k, sd->s.ring ? "ring" : "switched", sd->tr->how,
                     collective_kind_name(c->kind),
                     sd->s.ring ? "a chain (4k, 16k chunks)"
                                : "a binomial tree (k chunks) or a chain (4k, 16k chunks)",
                     sd->s.ring ? "" : "; and scatter to the nodes + node-level allgather (a "
                                       "chunk per node)",
                     bcast ? "" : " (built on the reversed topology, inverted)");
        free(btr);
        side_close(&fw);
        side_close(&bw);
        return rc;
    }
    /* Allreduce frontier: one chunk per node (whole-chunk rail messages:
     * the fewest messages, best from small to large sizes on big clusters),
     * two per node where there are at least as many distances as NICs (finer
     * pipelining at large sizes), and reducescatter + allgather with a chunk
     * per rank up to 256 ranks (the finest pipelining; beyond that its
     * per-rank programs outgrow the runtimes and its synthesis the budget). */
    bool rank_chunks = c->kind != CS_COLL_ALLREDUCE || t->ranks <= 256;
    side_job job;
    memset(&job, 0, sizeof job);
    job = (side_job){.t = t, .s = &fw.s, .tr = fw.tr, .rs_shape = &bw.s, .rs_tr = bw.tr,
                     .sample = sample, .variant = c->kind == CS_COLL_ALLGATHER ? 0 : 1};
    bool with_job = (c->kind == CS_COLL_ALLGATHER && fw.s.nodes - 1 >= fw.s.k) ||
                    (c->kind == CS_COLL_ALLREDUCE && fw.s.nodes - 1 >= fw.s.k);
    if (with_job)
        side_job_start(&job, o->threads);
    if (c->kind == CS_COLL_ALLREDUCE) {
        rc = compose_node_allreduce(t, &fw.s, fw.tr, &bw.s, bw.tr, 1, sample, &a, &ninfo, err);
        if (rc == CS_OK)
            rc = finish_fitted(t, a, "latency", sample, ninfo.fitted, res, err);
        a = NULL;
        side_job_join(&job);
        if (rc == CS_OK && with_job && job.rc != CS_OK) {
            rc = job.rc;
            if (err)
                *err = job.err;
        }
        if (rc == CS_OK && job.a)
            rc = add_checked(job.a, "bandwidth", res, err);
        else
            algorithm_free(job.a);
        job.a = NULL;
    }
    if (rc == CS_OK && need_fw && rank_chunks)
        rc = compose_allgather(t, &fw.s, fw.tr, 1, false,
                               c->kind == CS_COLL_ALLGATHER ? sample : 0, &ag, &info, err);
    if (rc == CS_OK && need_bw && rank_chunks)
        rc = compose_allgather(bw.rt, &bw.s, bw.tr, 1, false, 0, &rag, &info, err);
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
    /* only the allgather is the composition as placed (rounds sampled then) */
    if (rc == CS_OK && a)
        rc = finish_fitted(t, a, c->kind == CS_COLL_ALLREDUCE ? "" : "bandwidth", sample,
                           c->kind == CS_COLL_ALLGATHER && info.fitted, res, err);
    else
        algorithm_free(a);
    if (c->kind == CS_COLL_ALLGATHER) {
        /* the unsplit allgather: only where the split one was split */
        side_job_join(&job);
        if (rc == CS_OK && with_job && job.rc != CS_OK) {
            rc = job.rc;
            if (err)
                *err = job.err;
        }
        if (rc == CS_OK && job.a && info.orient)
            rc = add_checked(job.a, "", res, err);
        else
            algorithm_free(job.a);
        job.a = NULL;
    }
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
    bool renumbered = false, ring_fabric = false;
    int rc = result_new("hierarchical", &res, err);
    if (rc == CS_OK)
        rc = compose(t, c, &cache, &o, res, how, sizeof how, &renumbered, &ring_fabric, err);
    cache_free(&cache);
    bool flat = false;
    if (rc == CS_OK && t->ranks <= o.flat_max_ranks) {
        /* TACOS verified its algorithms on t; they join as they are (timed) */
        cs_tacos_options to;
        tacos_options_default(&to);
        to.keep_sends = true;
        to.threads = o.threads;
        to.cancel = o.cancel;
        cs_result *tr = NULL;
        cs_error terr;
        cs_error_clear(&terr);
        if (tacos_synthesize(t, c, &to, &tr, &terr) == CS_OK && tr) {
            for (int i = 0; i < tr->nalgs && rc == CS_OK; i++) {
                rc = result_add(res, tr->algs[i]);
                tr->algs[i] = NULL;
                flat = rc == CS_OK;
            }
            tr->nalgs = 0;
        }
        result_free(tr);
    }
    if (rc == CS_OK && cs_cancel_requested(o.cancel))
        rc = cs_error_set(err, CS_ECANCELLED, "", "synthesis cancelled");
    if (rc != CS_OK) {
        result_free(res);
        return rc;
    }
    if (o.progress) {
        char msg[160];
        snprintf(msg, sizeof msg, "%d compositions verified", res->nalgs);
        cs_progress_event ev = {.method = "hierarchical", .outcome = "done", .message = msg,
                                .seconds = cs_now() - t0, .elapsed = cs_now() - t0,
                                .done = res->nalgs, .total = res->nalgs, .best = NAN};
        o.progress(o.progress_ctx, &ev);
    }
    if (flat) {
        size_t used = strlen(how);
        snprintf(how + used, sizeof how - used, "; flat tacos joins the frontier (%d ranks <= %d)",
                 t->ranks, o.flat_max_ranks);
    }
    /* said first: the dispatcher keeps only the head of this reason */
    cs_text_printf(res->reason, sizeof res->reason, "hierarchical: %s%.230s",
             renumbered ? "nodes matched up to renumbering inside them; " : "", how);
    res->stats = json_pack("{s:s, s:b, s:s}", "composition", how, "nodes_renumbered", renumbered,
                           "fabric", ring_fabric ? "ring" : "switched");
    res->complete = false;
    res->synth_seconds = cs_now() - t0;
    *out = res;
    return CS_OK;
}
