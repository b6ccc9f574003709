/*
 * bounds_cutnet.c - the bandwidth network of the time bound and the cut
 * searches on it (bounds_internal.h describes the network).
 *
 * The searches are parametric min cuts on exact integers:
 *
 *   max (W - w(S)) / cap(S)    Dinkelbach: for lambda = p/q, the minimum of
 *                              q cap(S) - p (W - w(S)) over S holding a vertex
 *                              t0 is an s-t min cut (s -> v of p w(v), edges
 *                              scaled by q, t0 -> t infinite); a negative
 *                              minimum lowers lambda to that S's ratio, a pass
 *                              over every t0 without one proves it optimal
 *                              (ForestColl's allgather bound, exactly);
 *   max w(S) / cap(S)          the same with the pinned vertex on the source
 *                              side and v -> t of p w(v): one min cut a step;
 *   min cap(S), S not pinned   one max-flow from the pinned vertex per target.
 *
 * Every search starts from the single-vertex cuts (all in-edges of a vertex),
 * so it returns a valid cut even when the budget lets it try little else.
 */
#include "bounds_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* Products of the Dinkelbach search stay below this (FLOW_INF is 2^61). */
#define CUTNET_INT_LIMIT ((double)(1LL << 59))

void cut_found_free(cut_found *c)
{
    free(c->in_s);
    memset(c, 0, sizeof *c);
}

void cutnet_free(cut_network *n)
{
    flow_net_free(&n->g);
    free(n->part_of);
    free(n->weight);
    free(n->src_edge);
    free(n->sink_edge);
    free(n->bw);
    free(n->in_bw);
    free(n->out_bw);
    free(n->physical);
    memset(n, 0, sizeof *n);
}

long cutnet_size(const cut_network *n)
{
    return (long)n->g.n + n->g.m;
}

static void own_edge(cut_network *n, int u, int v, double bw)
{
    if (n->reversed) {
        int x = u;
        u = v;
        v = x;
    }
    int e = flow_net_edge(&n->g, u, v, 0);
    n->bw[e] = bw;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

/* Port edges of switch sw: per vertex, the ports of its ranks on the switch. */
static void switch_edges(cut_network *n, int sw, int *scratch)
{
    const cs_switch *s = &n->topo->switches[sw];
    int node = n->nv + sw;
    double port = s->gbps * 1e3;
    for (int i = 0; i < s->nranks; i++)
        scratch[i] = n->part_of[s->ranks[i]];
    qsort(scratch, (size_t)s->nranks, sizeof(int), cmp_int);
    if (s->nranks == 0 || scratch[0] == scratch[s->nranks - 1])
        return;   /* inside one vertex: never cut */
    for (int i = 0; i < s->nranks;) {
        int j = i;
        while (j < s->nranks && scratch[j] == scratch[i])
            j++;
        own_edge(n, scratch[i], node, port * (j - i));
        own_edge(n, node, scratch[i], port * (j - i));
        i = j;
    }
}

int cutnet_build(const cs_topology *t, const int *part_of, int nparts, bool reversed,
                 cut_network *n, cs_error *err)
{
    memset(n, 0, sizeof *n);
    int P = t->ranks;
    n->topo = t;
    n->reversed = reversed;
    n->nv = part_of ? nparts : P;
    n->total_weight = P;
    n->part_of = malloc(sizeof(int) * (size_t)P);
    n->weight = calloc((size_t)n->nv, sizeof(int64_t));
    int *set_node = malloc(sizeof(int) * (size_t)(t->nshared + 1));
    int *per_link = calloc((size_t)t->nlinks + 1, sizeof(int));
    int *scratch = NULL;
    int *link_sets = NULL;
    int rc = CS_OK;
    if (!n->part_of || !n->weight || !set_node || !per_link) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for the cut network");
        goto done;
    }
    for (int r = 0; r < P; r++) {
        n->part_of[r] = part_of ? part_of[r] : r;
        n->weight[n->part_of[r]]++;
    }
    /* document shared sets, and the sets each physical link runs through */
    int nsets = 0, max_switch = 0;
    long memberships = 0;
    for (int k = 0; k < t->nshared; k++) {
        set_node[k] = -1;
        if (t->shared[k].switch_id >= 0)
            continue;
        set_node[k] = n->nv + t->nswitches + 2 * nsets++;
        for (int j = 0; j < t->shared[k].nlinks; j++)
            per_link[t->shared[k].links[j] + 1]++;
        memberships += t->shared[k].nlinks;
    }
    for (int l = 0; l < t->nlinks; l++)
        per_link[l + 1] += per_link[l];
    link_sets = malloc(sizeof(int) * (size_t)(memberships > 0 ? memberships : 1));
    int *fill = malloc(sizeof(int) * (size_t)(t->nlinks + 1));
    for (int s = 0; s < t->nswitches; s++)
        if (t->switches[s].nranks > max_switch)
            max_switch = t->switches[s].nranks;
    scratch = malloc(sizeof(int) * (size_t)(max_switch > 0 ? max_switch : 1));
    if (!link_sets || !fill || !scratch) {
        free(fill);
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for the cut network");
        goto done;
    }
    memcpy(fill, per_link, sizeof(int) * (size_t)(t->nlinks + 1));
    for (int k = 0; k < t->nshared; k++)   /* ascending k: one order along every chain */
        if (set_node[k] >= 0)
            for (int j = 0; j < t->shared[k].nlinks; j++)
                link_sets[fill[t->shared[k].links[j]]++] = k;
    free(fill);

    long edges = nsets + memberships + 2L * n->nv;
    for (int l = 0; l < t->nlinks; l++)
        if (t->links[l].switch_id < 0)
            edges++;
    for (int s = 0; s < t->nswitches; s++)
        edges += 2L * t->switches[s].nranks;
    int nodes = n->nv + t->nswitches + 2 * nsets + 2;
    if (edges > (1L << 28) || flow_net_init(&n->g, nodes, (int)edges) != CS_OK ||
        !(n->bw = calloc((size_t)edges * 2, sizeof(double)))) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for the cut network (%ld edges)",
                          edges);
        goto done;
    }
    n->s = nodes - 2;
    n->t = nodes - 1;
    for (int k = 0; k < t->nshared; k++) {
        if (set_node[k] < 0)
            continue;
        double fastest = 0;
        for (int j = 0; j < t->shared[k].nlinks; j++) {
            double g = t->links[t->shared[k].links[j]].gbps * 1e3;
            fastest = g > fastest ? g : fastest;
        }
        own_edge(n, set_node[k], set_node[k] + 1, t->shared[k].lanes * fastest);
    }
    if (!(n->physical = malloc(sizeof(int) * (size_t)(t->nlinks > 0 ? t->nlinks : 1)))) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for the cut network");
        goto done;
    }
    for (int l = 0; l < t->nlinks; l++) {
        const cs_link *lk = &t->links[l];
        int u = n->part_of[lk->src], v = n->part_of[lk->dst];
        if (lk->switch_id < 0)
            n->physical[n->nphysical++] = l;
        if (lk->switch_id >= 0 || u == v)
            continue;
        double bw = lk->lanes * lk->gbps * 1e3;
        int prev = u;
        for (int i = per_link[l]; i < per_link[l + 1]; i++) {
            own_edge(n, prev, set_node[link_sets[i]], bw);
            prev = set_node[link_sets[i]] + 1;
        }
        own_edge(n, prev, v, bw);
    }
    for (int s = 0; s < t->nswitches; s++)
        switch_edges(n, s, scratch);
    n->own_edges = n->g.m;

    /* integer capacities: ceil(bw * scale), scale as fine as the search allows */
    double total = 0;
    for (int e = 0; e < n->own_edges; e += 2)
        total += n->bw[e];
    n->scale = 1e3;
    while (n->scale > 1e-12 &&
           (total * n->scale + n->own_edges) * (double)(n->total_weight + 1) > CUTNET_INT_LIMIT)
        n->scale /= 10;
    for (int e = 0; e < n->own_edges; e += 2) {
        double c = ceil(n->bw[e] * n->scale);
        n->g.base[e] = n->bw[e] > 0 && c < 1 ? 1 : (int64_t)c;
    }
    n->src_edge = malloc(sizeof(int) * (size_t)n->nv);
    n->sink_edge = malloc(sizeof(int) * (size_t)n->nv);
    n->in_bw = calloc((size_t)n->nv, sizeof(double));
    n->out_bw = calloc((size_t)n->nv, sizeof(double));
    if (!n->src_edge || !n->sink_edge || !n->in_bw || !n->out_bw) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory for the cut network");
        goto done;
    }
    for (int v = 0; v < n->nv; v++) {
        n->src_edge[v] = flow_net_edge(&n->g, n->s, v, 0);
        n->sink_edge[v] = flow_net_edge(&n->g, v, n->t, 0);
    }
    for (int e = 0; e < n->own_edges; e += 2) {
        int tail = n->g.to[e ^ 1], head = n->g.to[e];
        if (tail < n->nv)
            n->out_bw[tail] += n->bw[e];
        if (head < n->nv)
            n->in_bw[head] += n->bw[e];
    }
done:
    free(set_node);
    free(per_link);
    free(link_sets);
    free(scratch);
    if (rc != CS_OK)
        cutnet_free(n);
    return rc;
}

/* Residual capacities: own edges scaled by q, terminal edges closed. */
static void reset(cut_network *n, int64_t q)
{
    for (int e = 0; e < n->own_edges; e++)
        n->g.cap[e] = n->g.base[e] * q;
    for (int e = n->own_edges; e < n->g.m; e++)
        n->g.cap[e] = 0;
}

/* After a max-flow: the sink-side vertices into in_s, their weight, and the
 * own edges from the source to the sink side (integer and bytes/us). */
static int64_t read_cut(const cut_network *n, unsigned char *in_s, int64_t *cap_int,
                        double *cap_bw)
{
    int64_t w = 0;
    for (int v = 0; v < n->nv; v++) {
        in_s[v] = flow_net_sink_side(&n->g, v);
        if (in_s[v])
            w += n->weight[v];
    }
    int64_t ci = 0;
    double cb = 0;
    for (int e = 0; e < n->own_edges; e += 2) {
        int tail = n->g.to[e ^ 1], head = n->g.to[e];
        if (!flow_net_sink_side(&n->g, tail) && flow_net_sink_side(&n->g, head)) {
            ci += n->g.base[e];
            cb += n->bw[e];
        }
    }
    *cap_int = ci;
    *cap_bw = cb;
    return w;
}

/* Integer capacity of all own edges into v: a cut around {v}. */
static int64_t in_int(const cut_network *n, int v)
{
    int64_t c = 0;
    for (int e = n->g.head[v]; e >= 0; e = n->g.next[e])
        if ((e & 1) && e < n->own_edges)   /* the twin of an own edge into v */
            c += n->g.base[e ^ 1];
    return c;
}

static int keep(cut_found *best, const unsigned char *in_s, int nv, int64_t k, double cap_bw,
                cs_error *err)
{
    if (!best->in_s && !(best->in_s = malloc((size_t)nv)))
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    memcpy(best->in_s, in_s, (size_t)nv);
    best->k = k;
    best->cap_bw = cap_bw;
    return CS_OK;
}

static int keep_single(cut_found *best, int nv, int v, int64_t k, double cap_bw, cs_error *err)
{
    if (!best->in_s && !(best->in_s = malloc((size_t)nv)))
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    memset(best->in_s, 0, (size_t)nv);
    best->in_s[v] = 1;
    best->k = k;
    best->cap_bw = cap_bw;
    return CS_OK;
}

/* a/b < c/d for positive b, d, in exact arithmetic. */
static bool ratio_less(int64_t a, int64_t b, int64_t c, int64_t d)
{
    return (__int128)a * d < (__int128)c * b;
}

int cutnet_max_outside_ratio(cut_network *n, long budget, cut_found *best, bool *exact,
                             cs_error *err)
{
    *exact = false;
    int nv = n->nv;
    int64_t W = n->total_weight;
    /* lambda = p / q = cap / k, starting at the best single-vertex cut */
    int64_t p = -1, q = 1;
    for (int v = 0; v < nv; v++) {
        int64_t k = W - n->weight[v], c = in_int(n, v);
        if (k <= 0 || c <= 0)
            continue;
        if (p < 0 || ratio_less(c, k, p, q)) {
            p = c;
            q = k;
            int rc = keep_single(best, nv, v, k, n->in_bw[v], err);
            if (rc)
                return rc;
        }
    }
    if (p < 0)
        return CS_OK;
    if ((long)nv * cutnet_size(n) > budget)
        return CS_OK;   /* the single-vertex cuts only */
    unsigned char *in_s = malloc((size_t)nv);
    if (!in_s)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int since = 0, k = 0;
    for (; since < nv && k < 64 * nv; k++, since++) {
        int t0 = k % nv;
        reset(n, q);
        for (int v = 0; v < nv; v++)
            n->g.cap[n->src_edge[v]] = p * n->weight[v];
        n->g.cap[n->sink_edge[t0]] = FLOW_INF;
        flow_net_maxflow(&n->g, n->s, n->t);
        int64_t cap;
        double cap_bw;
        int64_t kk = W - read_cut(n, in_s, &cap, &cap_bw);
        if (kk <= 0 || cap <= 0 || !ratio_less(cap, kk, p, q))
            continue;
        p = cap;
        q = kk;
        int rc = keep(best, in_s, nv, kk, cap_bw, err);
        if (rc) {
            free(in_s);
            return rc;
        }
        since = -1;   /* every t0 again, this one included */
    }
    *exact = since >= nv;
    free(in_s);
    return CS_OK;
}

int cutnet_max_inside_ratio(cut_network *n, int pinned, long budget, cut_found *best,
                            bool *exact, cs_error *err)
{
    *exact = false;
    int nv = n->nv;
    int64_t p = -1, q = 1;
    for (int v = 0; v < nv; v++) {
        int64_t c = in_int(n, v);
        if (v == pinned || c <= 0)
            continue;
        if (p < 0 || ratio_less(c, n->weight[v], p, q)) {
            p = c;
            q = n->weight[v];
            int rc = keep_single(best, nv, v, q, n->in_bw[v], err);
            if (rc)
                return rc;
        }
    }
    if (p < 0)
        return CS_OK;
    unsigned char *in_s = malloc((size_t)nv);
    if (!in_s)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    long steps = budget / cutnet_size(n);
    for (long step = 0; step < 64; step++) {
        if (step >= steps) {
            free(in_s);
            return CS_OK;   /* budget spent: a valid cut, not proven the best */
        }
        reset(n, q);
        n->g.cap[n->src_edge[pinned]] = FLOW_INF;
        for (int v = 0; v < nv; v++)
            if (v != pinned)
                n->g.cap[n->sink_edge[v]] = p * n->weight[v];
        flow_net_maxflow(&n->g, n->s, n->t);
        int64_t cap;
        double cap_bw;
        int64_t w = read_cut(n, in_s, &cap, &cap_bw);
        if (w <= 0 || cap <= 0 || !ratio_less(cap, w, p, q))
            break;
        p = cap;
        q = w;
        int rc = keep(best, in_s, nv, w, cap_bw, err);
        if (rc) {
            free(in_s);
            return rc;
        }
    }
    *exact = true;
    free(in_s);
    return CS_OK;
}

int cutnet_min_cut_avoiding(cut_network *n, int pinned, long budget, cut_found *best,
                            bool *exact, cs_error *err)
{
    *exact = false;
    int nv = n->nv;
    int64_t low = -1;
    for (int v = 0; v < nv; v++) {
        int64_t c = in_int(n, v);
        if (v != pinned && (low < 0 || c < low)) {
            low = c;
            int rc = keep_single(best, nv, v, 1, n->in_bw[v], err);
            if (rc)
                return rc;
        }
    }
    if (low < 0)
        return CS_OK;
    if ((long)nv * cutnet_size(n) > budget)
        return CS_OK;   /* the single-vertex cuts only */
    unsigned char *in_s = malloc((size_t)nv);
    if (!in_s)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int v = 0; v < nv; v++) {
        if (v == pinned)
            continue;
        reset(n, 1);
        n->g.cap[n->src_edge[pinned]] = FLOW_INF;
        n->g.cap[n->sink_edge[v]] = FLOW_INF;
        flow_net_maxflow(&n->g, n->s, n->t);
        int64_t cap;
        double cap_bw;
        read_cut(n, in_s, &cap, &cap_bw);
        if (cap < low) {
            low = cap;
            int rc = keep(best, in_s, nv, 1, cap_bw, err);
            if (rc) {
                free(in_s);
                return rc;
            }
        }
    }
    *exact = true;
    free(in_s);
    return CS_OK;
}

int cutnet_min_cut_beyond(cut_network *n, const double *vdist, int w, unsigned char *in_s,
                          double *cap_bw)
{
    reset(n, 1);
    for (int v = 0; v < n->nv; v++)
        if (vdist[v] < vdist[w])
            n->g.cap[n->src_edge[v]] = FLOW_INF;
    n->g.cap[n->sink_edge[w]] = FLOW_INF;
    flow_net_maxflow(&n->g, n->s, n->t);
    int64_t cap;
    read_cut(n, in_s, &cap, cap_bw);
    return CS_OK;
}

int cutnet_capacity_into(cut_network *n, const unsigned char *in_s, double *cap_bw,
                         cs_error *err)
{
    unsigned char *side = malloc((size_t)n->nv);
    if (!side)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    reset(n, 1);
    for (int v = 0; v < n->nv; v++)
        n->g.cap[in_s[v] ? n->sink_edge[v] : n->src_edge[v]] = FLOW_INF;
    flow_net_maxflow(&n->g, n->s, n->t);
    int64_t cap;
    read_cut(n, side, &cap, cap_bw);
    free(side);
    return CS_OK;
}

/* Whether link u -> v counts: crosses into S (out of S when reversed), or,
 * with in_s NULL, joins two vertices. */
static bool counts(const cut_network *n, const unsigned char *in_s, int u, int v)
{
    int pu = n->part_of[u], pv = n->part_of[v];
    if (!in_s)
        return pu != pv;
    return n->reversed ? in_s[pu] && !in_s[pv] : !in_s[pu] && in_s[pv];
}

static double min_alpha(const cut_network *n, const unsigned char *in_s)
{
    const cs_topology *t = n->topo;
    double a = INFINITY;
    for (int i = 0; i < n->nphysical; i++) {
        const cs_link *l = &t->links[n->physical[i]];
        if (l->alpha_us < a && counts(n, in_s, l->src, l->dst))
            a = l->alpha_us;
    }
    /* a switch's derived links: one counts when the switch has a pair of
     * ranks across that no physical link joins (usually the first pair tried) */
    for (int s = 0; s < t->nswitches; s++) {
        const cs_switch *sw = &t->switches[s];
        if (!(sw->alpha_us < a) || sw->nranks < 2)
            continue;
        /* O(ranks) first: a pair that counts exists at all? */
        bool send = false, recv = false, split = false;
        for (int i = 0; i < sw->nranks; i++) {
            int p = n->part_of[sw->ranks[i]];
            split |= p != n->part_of[sw->ranks[0]];
            if (in_s) {
                bool inside = in_s[p];
                send |= n->reversed ? inside : !inside;
                recv |= n->reversed ? !inside : inside;
            }
        }
        if (in_s ? !(send && recv) : !split)
            continue;
        bool found = false;
        for (int i = 0; i < sw->nranks && !found; i++)
            for (int j = 0; j < sw->nranks && !found; j++) {
                int u = sw->ranks[i], v = sw->ranks[j];
                if (u == v || !counts(n, in_s, u, v))
                    continue;
                int l = topology_find_link(t, u, v);
                found = l >= 0 && t->links[l].switch_id == s;
            }
        if (found)
            a = sw->alpha_us;
    }
    return a;
}

double cutnet_crossing_alpha(const cut_network *n, const unsigned char *in_s)
{
    return min_alpha(n, in_s);
}

double cutnet_partition_alpha(const cut_network *n)
{
    return min_alpha(n, NULL);
}
