/*
 * topology_graph.c - graph facts about a finalized topology: BFS hop
 * distances, diameter, deterministic shortest paths and per-rank ingress /
 * egress capacity.
 *
 * Everything walks the out_begin / in_begin indexes built by finalize, so a
 * BFS is O(ranks + links).  The diameter runs one BFS per rank (O(ranks *
 * links)); callers on huge topologies (the TACOS path) should not need it on
 * their hot path.  Shortest paths break ties by the lowest link index, which,
 * because links are sorted by (src, dst), means the lowest-numbered next rank:
 * the same topology always yields the same routes.
 */
#include "topology.h"

#include <stdlib.h>
#include <string.h>

static int check_rank(const cs_topology *t, int r, const char *field, cs_error *err)
{
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "", "needs a finalized topology");
    if (r < 0 || r >= t->ranks)
        return cs_error_set(err, CS_EINVAL, field, "rank %d out of range 0..%d", r, t->ranks - 1);
    return CS_OK;
}

/* BFS from src; pred (optional) gets the link index used to reach each rank. */
static int bfs(const cs_topology *t, int src, int *dist, int *pred, cs_error *err)
{
    int *queue = malloc(sizeof(int) * (size_t)t->ranks);
    if (!queue)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    for (int r = 0; r < t->ranks; r++) {
        dist[r] = -1;
        if (pred)
            pred[r] = -1;
    }
    int head = 0, tail = 0;
    dist[src] = 0;
    queue[tail++] = src;
    while (head < tail) {
        int r = queue[head++];
        for (int i = t->out_begin[r]; i < t->out_begin[r + 1]; i++) {
            int d = t->links[i].dst;
            if (dist[d] < 0) {
                dist[d] = dist[r] + 1;
                if (pred)
                    pred[d] = i;
                queue[tail++] = d;
            }
        }
    }
    free(queue);
    return CS_OK;
}

/* topology_hops_new (topology.h): the physical links in both directions
 * (CSR) and the switches each rank is on. */
struct cs_hops {
    const cs_topology *t;
    int *out_begin, *out_dst;        /* rank -> its physical out-links' dst */
    int *in_begin, *in_src;          /* rank -> its physical in-links' src */
    int *switch_begin, *switch_of;   /* rank -> the switches it is on */
    unsigned char *switch_done;
    int *queue;
};

void topology_hops_free(cs_hops *h)
{
    if (!h)
        return;
    free(h->out_begin);
    free(h->out_dst);
    free(h->in_begin);
    free(h->in_src);
    free(h->switch_begin);
    free(h->switch_of);
    free(h->switch_done);
    free(h->queue);
    free(h);
}

cs_hops *topology_hops_new(const cs_topology *t)
{
    if (!t || !t->finalized || t->nswitches <= 0 || t->ranks <= 0 || t->node_view)
        return NULL;
    cs_hops *h = calloc(1, sizeof *h);
    if (!h)
        return NULL;
    h->t = t;
    size_t n = (size_t)(unsigned)t->ranks;
    long ports = 0, phys = 0;
    for (int s = 0; s < t->nswitches; s++)
        ports += t->switches[s].nranks;
    for (int i = 0; i < t->nlinks; i++)
        phys += t->links[i].switch_id < 0;
    h->out_begin = calloc(n + 1, sizeof(int));
    h->in_begin = calloc(n + 1, sizeof(int));
    h->out_dst = malloc(sizeof(int) * (size_t)(phys > 0 ? phys : 1));
    h->in_src = malloc(sizeof(int) * (size_t)(phys > 0 ? phys : 1));
    h->switch_begin = calloc(n + 1, sizeof(int));
    h->switch_of = malloc(sizeof(int) * (size_t)(ports > 0 ? ports : 1));
    h->switch_done = malloc((size_t)(unsigned)t->nswitches);
    h->queue = malloc(sizeof(int) * n);
    int *fill = malloc(sizeof(int) * n);
    if (!h->out_begin || !h->in_begin || !h->out_dst || !h->in_src || !h->switch_begin ||
        !h->switch_of || !h->switch_done || !h->queue || !fill) {
        free(fill);
        topology_hops_free(h);
        return NULL;
    }
    for (int i = 0; i < t->nlinks; i++)
        if (t->links[i].switch_id < 0) {
            h->out_begin[t->links[i].src + 1]++;
            h->in_begin[t->links[i].dst + 1]++;
        }
    for (int s = 0; s < t->nswitches; s++)
        for (int i = 0; i < t->switches[s].nranks; i++)
            h->switch_begin[t->switches[s].ranks[i] + 1]++;
    for (size_t r = 0; r < n; r++) {
        h->out_begin[r + 1] += h->out_begin[r];
        h->in_begin[r + 1] += h->in_begin[r];
        h->switch_begin[r + 1] += h->switch_begin[r];
    }
    /* links are sorted by (src, dst): each rank's lists come out in order */
    memcpy(fill, h->in_begin, sizeof(int) * n);
    int no = 0;
    for (int i = 0; i < t->nlinks; i++)
        if (t->links[i].switch_id < 0) {
            h->out_dst[no++] = t->links[i].dst;
            h->in_src[fill[t->links[i].dst]++] = t->links[i].src;
        }
    memcpy(fill, h->switch_begin, sizeof(int) * n);
    for (int s = 0; s < t->nswitches; s++)
        for (int i = 0; i < t->switches[s].nranks; i++)
            h->switch_of[fill[t->switches[s].ranks[i]]++] = s;
    free(fill);
    return h;
}

int topology_hops_from(cs_hops *h, int src, bool backward, int *dist)
{
    const cs_topology *t = h->t;
    const int *begin = backward ? h->in_begin : h->out_begin;
    const int *peer = backward ? h->in_src : h->out_dst;
    for (int r = 0; r < t->ranks; r++)
        dist[r] = -1;
    memset(h->switch_done, 0, (size_t)(unsigned)t->nswitches);
    int head = 0, tail = 0, far = 0;
    dist[src] = 0;
    h->queue[tail++] = src;
    while (head < tail) {
        int r = h->queue[head++], d = dist[r] + 1;
        for (int i = begin[r]; i < begin[r + 1]; i++) {
            int v = peer[i];   /* derived links: their switch below */
            if (dist[v] < 0) {
                dist[v] = d;
                far = d;
                h->queue[tail++] = v;
            }
        }
        /* a switch joins every ordered pair of its members: the same one hop
         * both ways */
        for (int k = h->switch_begin[r]; k < h->switch_begin[r + 1]; k++) {
            int s = h->switch_of[k];
            if (h->switch_done[s])
                continue;
            h->switch_done[s] = 1;
            for (int i = 0; i < t->switches[s].nranks; i++) {
                int v = t->switches[s].ranks[i];
                if (dist[v] < 0) {
                    dist[v] = d;
                    far = d;
                    h->queue[tail++] = v;
                }
            }
        }
    }
    return far;
}

int topology_shortest_hops(const cs_topology *t, int src, int *dist, cs_error *err)
{
    int rc = check_rank(t, src, "src", err);
    if (rc)
        return rc;
    return bfs(t, src, dist, NULL, err);
}

int topology_diameter(const cs_topology *t, int *diameter, cs_error *err)
{
    if (!t || !t->finalized)
        return cs_error_set(err, CS_EINVAL, "", "needs a finalized topology");
    /* All-pairs BFS is O(ranks * links): minutes at 40,000 ranks, and the
     * simulator asks on every run, so the answer is kept on the (otherwise
     * immutable) topology.  Racing threads compute the same value. */
    int known = __atomic_load_n(&t->diameter_cache, __ATOMIC_ACQUIRE);
    if (known >= 0) {
        *diameter = known;
        return CS_OK;
    }
    int *dist = malloc(sizeof(int) * (size_t)t->ranks);
    if (!dist)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    cs_hops *hops = topology_hops_new(t);
    int best = 0;
    for (int s = 0; s < t->ranks; s++) {
        int rc = CS_OK;
        if (hops)
            topology_hops_from(hops, s, false, dist);
        else
            rc = bfs(t, s, dist, NULL, err);
        if (rc) {
            free(dist);
            return rc;
        }
        for (int r = 0; r < t->ranks; r++)
            if (dist[r] > best)
                best = dist[r];
    }
    free(dist);
    topology_hops_free(hops);
    __atomic_store_n(&((cs_topology *)t)->diameter_cache, best, __ATOMIC_RELEASE);
    *diameter = best;
    return CS_OK;
}

int topology_shortest_path(const cs_topology *t, int src, int dst, int *path, int *nhops,
                           cs_error *err)
{
    int rc = check_rank(t, src, "src", err);
    if (rc == CS_OK)
        rc = check_rank(t, dst, "dst", err);
    if (rc)
        return rc;
    int *dist = malloc(sizeof(int) * (size_t)t->ranks);
    int *pred = malloc(sizeof(int) * (size_t)t->ranks);
    if (!dist || !pred) {
        free(dist);
        free(pred);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    /* The first time BFS reaches a rank is through the lowest-indexed link
     * among those from the earliest-dequeued predecessor, so the walk is
     * deterministic. */
    rc = bfs(t, src, dist, pred, err);
    if (rc == CS_OK && dist[dst] < 0)
        rc = cs_error_set(err, CS_EINVAL, "dst", "rank %d cannot reach rank %d", src, dst);
    if (rc == CS_OK) {
        int n = dist[dst];
        for (int r = dst, k = n - 1; r != src; k--) {
            path[k] = pred[r];
            r = t->links[pred[r]].src;
        }
        *nhops = n;
    }
    free(dist);
    free(pred);
    return rc;
}

static bool set_contains(const cs_shared *sh, int link)
{
    int lo = 0, hi = sh->nlinks;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (sh->links[mid] < link)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < sh->nlinks && sh->links[lo] == link;
}

/* Key of a switch-derived set (finalize orders them by it): 0 egress / 1
 * ingress, times ranks, plus the owner rank.  Such sets have >= 2 links. */
static long derived_key(const cs_topology *t, const cs_shared *sh)
{
    const cs_link *a = &t->links[sh->links[0]], *b = &t->links[sh->links[1]];
    if (a->src == b->src)
        return a->src;
    return (long)t->ranks + a->dst;
}

/* Position of link l among the rank's links [begin, end) (out-links are a
 * contiguous index range; in_links is sorted by link index), or -1. */
static int rank_link_pos(const cs_topology *t, int l, int begin, int end, bool in)
{
    if (!in)
        return l >= begin && l < end ? l - begin : -1;
    int lo = begin, hi = end;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->in_links[mid] < l)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < end && t->in_links[lo] == l ? lo - begin : -1;
}

/* What a rank's out- (in-) links can carry at once: lanes (chunks per round)
 * and bw (bytes per us). */
typedef struct {
    long lanes;
    double bw;
} rank_capacity;

/* Applies set sh to the rank's links [begin, end) (see capped_capacity),
 * walking whichever of the two lists is shorter.  The set carries at most
 * sh->lanes of the rank's links at once, each at most at the fastest of their
 * speeds: that caps both figures. */
static void apply_set(const cs_topology *t, const cs_shared *sh, int begin, int end, bool in,
                      unsigned char *used, rank_capacity *total)
{
    long in_set = 0;
    double in_set_bw = 0, fastest = 0;
    bool clash = false;
    bool walk_set = sh->nlinks < end - begin;
    if (walk_set) {
        for (int j = 0; j < sh->nlinks; j++) {
            int p = rank_link_pos(t, sh->links[j], begin, end, in);
            if (p >= 0) {
                const cs_link *l = &t->links[sh->links[j]];
                in_set += l->lanes;
                in_set_bw += l->lanes * l->gbps * 1e3;
                fastest = l->gbps * 1e3 > fastest ? l->gbps * 1e3 : fastest;
                clash = clash || used[p];
            }
        }
    } else {
        for (int i = begin; i < end; i++)
            if (set_contains(sh, in ? t->in_links[i] : i)) {
                const cs_link *l = &t->links[in ? t->in_links[i] : i];
                in_set += l->lanes;
                in_set_bw += l->lanes * l->gbps * 1e3;
                fastest = l->gbps * 1e3 > fastest ? l->gbps * 1e3 : fastest;
                clash = clash || used[i - begin];
            }
    }
    if (clash || in_set <= sh->lanes)
        return;
    if (walk_set) {
        for (int j = 0; j < sh->nlinks; j++) {
            int p = rank_link_pos(t, sh->links[j], begin, end, in);
            if (p >= 0)
                used[p] = 1;
        }
    } else {
        for (int i = begin; i < end; i++)
            if (set_contains(sh, in ? t->in_links[i] : i))
                used[i - begin] = 1;
    }
    total->lanes -= in_set - sh->lanes;
    double cap_bw = sh->lanes * fastest;
    if (cap_bw < in_set_bw)
        total->bw -= in_set_bw - cap_bw;
}

/* Chunks per round (and bytes per us) through the rank's out- (in-) links:
 * the sum over their lanes, where the links of a shared set count at most the
 * set's lanes (at the fastest of their speeds).  Sets are applied only when
 * disjoint (on this rank's links) from sets already applied, so overlapping
 * sets never make the figures smaller than the truth: they are upper bounds
 * on what the rank can move, which is what lower bounds need.
 *
 * Cost: every document set is examined (O(degree log) each); of the
 * switch-derived sets only the rank's own (found by binary search on the
 * order finalize gives them), since another rank's derived set holds at most
 * one of this rank's links, of 1 lane against its 1 lane, and never lowers
 * the figure.  So the query stays cheap with thousands of switch ports. */
static rank_capacity capped_capacity(const cs_topology *t, int rank, bool in)
{
    int begin = in ? t->in_begin[rank] : t->out_begin[rank];
    int end = in ? t->in_begin[rank + 1] : t->out_begin[rank + 1];
    int deg = end - begin;
    rank_capacity total = {0, 0.0};
    for (int i = begin; i < end; i++) {
        const cs_link *l = &t->links[in ? t->in_links[i] : i];
        total.lanes += l->lanes;
        total.bw += l->lanes * l->gbps * 1e3;
    }
    if (t->nshared == 0 || deg == 0)
        return total;
    unsigned char local[64];
    unsigned char *used = deg <= 64 ? local : calloc((size_t)deg, 1);
    if (!used)
        return total;
    memset(used, 0, (size_t)deg);
    /* document sets come first */
    int lo = 0, hi = t->nshared;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (t->shared[mid].switch_id < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    int ndoc = lo;
    for (int s = 0; s < ndoc; s++)
        apply_set(t, &t->shared[s], begin, end, in, used, &total);
    long want = in ? (long)t->ranks + rank : rank;
    lo = ndoc, hi = t->nshared;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (derived_key(t, &t->shared[mid]) < want)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (int s = lo; s < t->nshared && derived_key(t, &t->shared[s]) == want; s++)
        apply_set(t, &t->shared[s], begin, end, in, used, &total);
    if (used != local)
        free(used);
    return total;
}

static int capped_lanes(const cs_topology *t, int rank, bool in)
{
    long lanes = capped_capacity(t, rank, in).lanes;
    return lanes > 0x7fffffff ? 0x7fffffff : (int)lanes;
}

int topology_egress_lanes(const cs_topology *t, int rank)
{
    if (!t || !t->finalized || rank < 0 || rank >= t->ranks)
        return 0;
    return capped_lanes(t, rank, false);
}

int topology_ingress_lanes(const cs_topology *t, int rank)
{
    if (!t || !t->finalized || rank < 0 || rank >= t->ranks)
        return 0;
    return capped_lanes(t, rank, true);
}

/* Bytes per microsecond: 1 GB/s = 1e9 B/s = 1e3 B/us; a set caps its links
 * at its lanes times their fastest speed (capped_capacity). */
static double capped_bw(const cs_topology *t, int rank, bool in)
{
    return capped_capacity(t, rank, in).bw;
}

double topology_egress_bw(const cs_topology *t, int rank)
{
    if (!t || !t->finalized || rank < 0 || rank >= t->ranks)
        return 0;
    return capped_bw(t, rank, false);
}

double topology_ingress_bw(const cs_topology *t, int rank)
{
    if (!t || !t->finalized || rank < 0 || rank >= t->ranks)
        return 0;
    return capped_bw(t, rank, true);
}
