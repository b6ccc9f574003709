/*
 * baseline_classic.c - the classic hand-designed collectives (ring, rings,
 * direct, recursive doubling/halving, binomial tree, NCCL's double binary
 * tree) as logical schedules for the router in baseline.c.
 *
 * Every generator writes only non-combining schedules: a combining collective
 * is the inversion of its dual (reducescatter = inverted allgather whose ring
 * or butterfly runs the other way, reduce = inverted broadcast, gather =
 * mirrored scatter); allreduce is reducescatter + allgather or reduce +
 * broadcast, one phase after the other.  The one true exchange (recursive-
 * doubling allreduce) is emitted natively and needs direct links.
 *
 * Rooted collectives work on virtual ranks v = (r - root) mod P.
 * Non-power-of-two butterflies fold the excess ranks (MPICH style, see
 * reference/bine.md): with e = P - 2^floor(log2 P), even ranks r < 2e hand
 * their data to r + 1 and sit out; survivors are renumbered 0..2^m-1.
 */
#include <stdlib.h>
#include <string.h>

#include "baseline_internal.h"

static int bl_oom(cs_error *err)
{
    return cs_error_set(err, CS_ENOMEM, "", "out of memory building a baseline");
}

/* ---- shared building blocks ---------------------------------------------------------- */

int bl_tree_broadcast(bl_lsched *ls, const int *parent, const int *recv_step, int p, int root,
                      const long *chunks, long nchunks, int step_offset)
{
    for (int v = 0; v < p; v++) {
        if (parent[v] < 0)
            continue;
        int rc = bl_lsched_add_many(ls, chunks, nchunks, bl_vrank_to_rank(parent[v], root, p),
                                    bl_vrank_to_rank(v, root, p), step_offset + recv_step[v]);
        if (rc != CS_OK)
            return rc;
    }
    return CS_OK;
}

int bl_tree_scatter(bl_lsched *ls, const int *parent, const int *recv_step, int p, int root,
                    int step_offset)
{
    for (int x = 0; x < p; x++) {
        int target = bl_vrank_to_rank(x, root, p);
        for (int j = 0; j < ls->chunks; j++) {
            long g = target + (long)p * j;
            for (int y = x; parent[y] >= 0; y = parent[y]) {
                int rc = bl_lsched_add(ls, g, bl_vrank_to_rank(parent[y], root, p),
                                       bl_vrank_to_rank(y, root, p), step_offset + recv_step[y]);
                if (rc != CS_OK)
                    return rc;
            }
        }
    }
    return CS_OK;
}

/* Survivor q of the fold <-> rank. */
static int bl_survivor_rank(int q, int e) { return q < e ? 2 * q + 1 : q + e; }

int bl_butterfly_allgather(bl_lsched *ls, int p, bl_peer_fn peer, const void *arg,
                           int step_offset, int *nsteps)
{
    int m = bl_floor_log2(p), pp = 1 << m, e = p - pp, C = ls->chunks;
    int rc = CS_OK;
    long **held = calloc((size_t)pp, sizeof *held);
    long *count = calloc((size_t)pp, sizeof *count);
    long **next = calloc((size_t)pp, sizeof *next);
    long *ncount = calloc((size_t)pp, sizeof *ncount);
    if (!held || !count || !next || !ncount) {
        rc = CS_ENOMEM;
        goto out;
    }
    int off = step_offset;
    for (int q = 0; q < pp; q++) {
        int r = bl_survivor_rank(q, e);
        held[q] = malloc((size_t)(2 * C) * sizeof **held);
        if (!held[q]) {
            rc = CS_ENOMEM;
            goto out;
        }
        for (int j = 0; j < C; j++)
            held[q][count[q]++] = r + (long)p * j;
        if (q < e)
            for (int j = 0; j < C; j++) {
                long g = (r - 1) + (long)p * j;
                held[q][count[q]++] = g;
                if ((rc = bl_lsched_add(ls, g, r - 1, r, off)) != CS_OK)
                    goto out;
            }
    }
    if (e > 0)
        off++;
    for (int k = 0; k < m; k++) {
        for (int q = 0; q < pp; q++) {
            int z = peer(q, k, m, arg);
            if (z < 0 || z >= pp || z == q) {
                rc = CS_EINTERNAL;
                goto out;
            }
            if ((rc = bl_lsched_add_many(ls, held[q], count[q], bl_survivor_rank(q, e),
                                         bl_survivor_rank(z, e), off + k)) != CS_OK)
                goto out;
            next[q] = malloc((size_t)(count[q] + count[z]) * sizeof **next);
            if (!next[q]) {
                rc = CS_ENOMEM;
                goto out;
            }
            memcpy(next[q], held[q], (size_t)count[q] * sizeof **next);
            memcpy(next[q] + count[q], held[z], (size_t)count[z] * sizeof **next);
            ncount[q] = count[q] + count[z];
        }
        for (int q = 0; q < pp; q++) {
            free(held[q]);
            held[q] = next[q];
            count[q] = ncount[q];
            next[q] = NULL;
        }
    }
    off += m;
    if (e > 0) {
        for (int q = 0; q < e; q++)
            if ((rc = bl_lsched_add_many(ls, held[q], count[q], 2 * q + 1, 2 * q, off)) != CS_OK)
                goto out;
        off++;
    }
    *nsteps = off - step_offset;
out:
    if (held)
        for (int q = 0; q < pp; q++)
            free(held[q]);
    if (next)
        for (int q = 0; q < pp; q++)
            free(next[q]);
    free(held);
    free(count);
    free(next);
    free(ncount);
    return rc;
}

static long *bl_iota(long n)
{
    long *a = malloc((size_t)(n > 0 ? n : 1) * sizeof *a);
    if (a)
        for (long i = 0; i < n; i++)
            a[i] = i;
    return a;
}

/* Runs one phase from a freshly built schedule and frees it. */
static int bl_run(bl_builder *b, bl_lsched *ls, bl_mode mode, int rc, cs_error *err)
{
    if (rc == CS_OK)
        rc = bl_add_phase(b, ls, mode, err);
    else if (rc == CS_ENOMEM)
        rc = bl_oom(err);
    else if (rc == CS_ELIMIT)
        rc = cs_error_set(err, CS_ELIMIT, "", "the baseline's logical schedule is too large");
    else if (rc == CS_EINTERNAL)
        rc = cs_error_set(err, CS_EINTERNAL, "", "baseline: inconsistent logical schedule");
    bl_lsched_free(ls);
    return rc;
}

/* ---- ring ------------------------------------------------------------------------------ */

/* Allgather around the ring ring[0..p) (ring[i] -> ring[i+dir]), chunks of
 * rank o whose index j satisfies j % nrings == which. */
static int bl_ring_allgather(bl_lsched *ls, const int *ring, int p, int dir, int which,
                             int nrings)
{
    int *pos = malloc((size_t)p * sizeof *pos);
    if (!pos)
        return CS_ENOMEM;
    for (int i = 0; i < p; i++)
        pos[ring[i]] = i;
    int rc = CS_OK;
    for (int o = 0; o < p && rc == CS_OK; o++)
        for (int j = which; j < ls->chunks && rc == CS_OK; j += nrings) {
            long g = o + (long)p * j;
            for (int s = 0; s < p - 1 && rc == CS_OK; s++) {
                int a = ring[(((pos[o] + dir * s) % p) + p) % p];
                int c = ring[(((pos[o] + dir * (s + 1)) % p) + p) % p];
                rc = bl_lsched_add(ls, g, a, c, s);
            }
        }
    free(pos);
    return rc;
}

/* Pipelined broadcast along ring (starting anywhere; rotated to the root):
 * the i-th chunk of this ring leaves the root at step i. */
static int bl_ring_broadcast(bl_lsched *ls, const int *ring, int p, int root, int which,
                             int nrings)
{
    int start = 0;
    for (int i = 0; i < p; i++)
        if (ring[i] == root)
            start = i;
    int rc = CS_OK;
    for (int j = which, i = 0; j < ls->chunks && rc == CS_OK; j += nrings, i++)
        for (int h = 0; h < p - 1 && rc == CS_OK; h++)
            rc = bl_lsched_add(ls, j, ring[(start + h) % p], ring[(start + h + 1) % p], i + h);
    return rc;
}

/* Runs a collective over a set of rings (one ring: the rank-order ring).
 * chunks is the per-rank share count (multiple of nrings). */
static int bl_rings_collective(const bl_request *rq, bl_builder *b, int **rings, int nrings,
                               int *chunks, cs_error *err)
{
    int p = rq->ranks, C;
    bl_lsched ls;
    int rc = CS_OK;
    switch (rq->c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_REDUCESCATTER: {
        if ((rc = bl_pick_chunks(rq, nrings, nrings, &C, err)) != CS_OK)
            return rc;
        bool rs = rq->c->kind == CS_COLL_REDUCESCATTER;
        bl_lsched_init(&ls, CS_COLL_ALLGATHER, 0, p, C);
        for (int k = 0; k < nrings && rc == CS_OK; k++)
            rc = bl_ring_allgather(&ls, rings[k], p, rs ? -1 : 1, k, nrings);
        *chunks = C;
        return bl_run(b, &ls, rs ? BL_INVERT : BL_FORWARD, rc, err);
    }
    case CS_COLL_ALLREDUCE: {
        if ((rc = bl_pick_chunks(rq, p * nrings, p * nrings, &C, err)) != CS_OK)
            return rc;
        int c = C / p;
        for (int phase = 0; phase < 2 && rc == CS_OK; phase++) {
            bl_lsched_init(&ls, CS_COLL_ALLGATHER, 0, p, c);
            int r2 = CS_OK;
            for (int k = 0; k < nrings && r2 == CS_OK; k++)
                r2 = bl_ring_allgather(&ls, rings[k], p, phase == 0 ? -1 : 1, k, nrings);
            rc = bl_run(b, &ls, phase == 0 ? BL_INVERT : BL_FORWARD, r2, err);
        }
        *chunks = C;
        return rc;
    }
    case CS_COLL_BROADCAST:
    case CS_COLL_REDUCE: {
        int natural = nrings > 1 ? nrings : p;
        if ((rc = bl_pick_chunks(rq, natural, 1, &C, err)) != CS_OK)
            return rc;
        bl_lsched_init(&ls, CS_COLL_BROADCAST, rq->root, p, C);
        for (int k = 0; k < nrings && rc == CS_OK; k++)
            rc = bl_ring_broadcast(&ls, rings[k], p, rq->root, k, nrings);
        *chunks = C;
        return bl_run(b, &ls, rq->c->kind == CS_COLL_REDUCE ? BL_INVERT : BL_FORWARD, rc, err);
    }
    case CS_COLL_SCATTER:
    case CS_COLL_GATHER: {
        /* farthest ranks first; every chunk moves one hop per step */
        if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
            return rc;
        const int *ring = rings[0];
        int start = 0;
        for (int i = 0; i < p; i++)
            if (ring[i] == rq->root)
                start = i;
        bl_lsched_init(&ls, CS_COLL_SCATTER, rq->root, p, C);
        int k = 0;
        for (int v = p - 1; v >= 1 && rc == CS_OK; v--)
            for (int j = 0; j < C && rc == CS_OK; j++, k++) {
                long g = ring[(start + v) % p] + (long)p * j;
                for (int h = 0; h < v && rc == CS_OK; h++)
                    rc = bl_lsched_add(&ls, g, ring[(start + h) % p], ring[(start + h + 1) % p],
                                       k + h);
            }
        *chunks = C;
        return bl_run(b, &ls, rq->c->kind == CS_COLL_GATHER ? BL_MIRROR : BL_FORWARD, rc, err);
    }
    default:
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind", "%s does not implement %s",
                            rq->name, collective_kind_name(rq->c->kind));
    }
}

int bl_gen_ring(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int *ring = malloc((size_t)rq->ranks * sizeof *ring);
    if (!ring)
        return bl_oom(err);
    for (int i = 0; i < rq->ranks; i++)
        ring[i] = i;
    int rc = bl_rings_collective(rq, b, &ring, 1, chunks, err);
    free(ring);
    return rc;
}

/* ---- rings: edge-disjoint directed Hamiltonian cycles ------------------------------------ */

#define BL_RINGS_MAX 8
#define BL_RINGS_BUDGET 200000L
#define BL_RINGS_MAX_RANKS 64

typedef struct bl_ring_search {
    const cs_topology *t;
    int p;
    int *cap;       /* remaining lanes per link index */
    int *path;      /* ranks in order */
    int *link_of;   /* link index used to enter path[i] (i >= 1), and to close */
    bool *on;
    long budget;
} bl_ring_search;

/* Whether link li has a lane left.  Rings are edge-disjoint with a link of k
 * lanes counted as k edges; shared sets (switch ports) are not edges and may
 * be shared: algorithm_fit_rounds charges them.  (Respecting them too was
 * tried: on switch2d:4x2 it leaves one ring, which simulates 2x slower.) */
static bool bl_ring_free(const bl_ring_search *s, int li)
{
    return li >= 0 && s->cap[li] > 0;
}

static void bl_ring_take(bl_ring_search *s, int li, int delta) { s->cap[li] -= delta; }

static bool bl_ring_dfs(bl_ring_search *s, int depth)
{
    if (--s->budget < 0)
        return false;
    int x = s->path[depth - 1];
    const cs_topology *t = s->t;
    if (depth == s->p) {
        int li = topology_find_link(t, x, s->path[0]);
        if (bl_ring_free(s, li)) {
            s->link_of[0] = li;
            return true;
        }
        return false;
    }
    for (int li = t->out_begin[x]; li < t->out_begin[x + 1]; li++) {
        int y = t->links[li].dst;
        if (s->on[y] || !bl_ring_free(s, li))
            continue;
        s->on[y] = true;
        s->path[depth] = y;
        s->link_of[depth] = li;
        bl_ring_take(s, li, 1);
        if (bl_ring_dfs(s, depth + 1))
            return true;
        bl_ring_take(s, li, -1);
        s->on[y] = false;
    }
    return false;
}

/* Finds up to BL_RINGS_MAX edge-disjoint directed Hamiltonian cycles (a link
 * with k lanes carries k rings), limited by the ranks' egress and ingress
 * lanes.  Returns how many were found (0 when none, or on a large topology). */
static int bl_find_rings(const cs_topology *t, int **rings)
{
    int p = t->ranks, n = 0;
    if (p > BL_RINGS_MAX_RANKS || p < 2)
        return 0;
    bl_ring_search s;
    memset(&s, 0, sizeof s);
    s.t = t;
    s.p = p;
    int limit = BL_RINGS_MAX;
    for (int r = 0; r < p; r++) {
        int eg = topology_egress_lanes(t, r), in = topology_ingress_lanes(t, r);
        limit = eg < limit ? eg : limit;
        limit = in < limit ? in : limit;
    }
    s.cap = calloc((size_t)t->nlinks, sizeof(int));
    s.path = malloc((size_t)p * sizeof(int));
    s.link_of = malloc((size_t)p * sizeof(int));
    s.on = calloc((size_t)p, sizeof(bool));
    if (!s.cap || !s.path || !s.link_of || !s.on)
        goto out;
    for (int i = 0; i < t->nlinks; i++)
        s.cap[i] = t->links[i].lanes;
    while (n < limit) {
        memset(s.on, 0, (size_t)p * sizeof(bool));
        s.path[0] = 0;
        s.on[0] = true;
        s.budget = BL_RINGS_BUDGET;
        if (!bl_ring_dfs(&s, 1))
            break;
        bl_ring_take(&s, s.link_of[0], 1);
        rings[n] = malloc((size_t)p * sizeof(int));
        if (!rings[n])
            break;
        memcpy(rings[n], s.path, (size_t)p * sizeof(int));
        n++;
        /* the reverse cycle next, when it fits */
        if (n < limit) {
            int taken = 0;
            bool ok = true;
            for (int i = 0; i < p && ok; i++) {
                int li = topology_find_link(t, s.path[(i + 1) % p], s.path[i]);
                ok = bl_ring_free(&s, li);
                if (ok) {
                    bl_ring_take(&s, li, 1);
                    taken++;
                }
            }
            if (ok) {
                rings[n] = malloc((size_t)p * sizeof(int));
                if (!rings[n])
                    break;
                for (int i = 0; i < p; i++)
                    rings[n][i] = s.path[(p - i) % p];
                n++;
            } else {
                for (int i = 0; i < taken; i++)
                    bl_ring_take(&s, topology_find_link(t, s.path[(i + 1) % p], s.path[i]), -1);
            }
        }
    }
out:
    free(s.cap);
    free(s.path);
    free(s.link_of);
    free(s.on);
    return n;
}

int bl_gen_rings(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int *rings[BL_RINGS_MAX] = {0};
    int n = bl_find_rings(bl_topology(b), rings);
    int rc;
    if (n == 0)
        rc = bl_gen_ring(rq, b, chunks, err);
    else
        rc = bl_rings_collective(rq, b, rings, n, chunks, err);
    for (int i = 0; i < n; i++)
        free(rings[i]);
    return rc;
}

/* ---- direct ------------------------------------------------------------------------------- */

static int bl_direct_allgather(bl_lsched *ls, int p)
{
    for (int o = 0; o < p; o++)
        for (int j = 0; j < ls->chunks; j++)
            for (int d = 1; d < p; d++) {
                int rc = bl_lsched_add(ls, o + (long)p * j, o, (o + d) % p, 0);
                if (rc != CS_OK)
                    return rc;
            }
    return CS_OK;
}

int bl_gen_direct(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int p = rq->ranks, C, rc = CS_OK;
    bl_lsched ls;
    switch (rq->c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_REDUCESCATTER:
        if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
            return rc;
        bl_lsched_init(&ls, CS_COLL_ALLGATHER, 0, p, C);
        *chunks = C;
        return bl_run(b, &ls, rq->c->kind == CS_COLL_ALLGATHER ? BL_FORWARD : BL_INVERT,
                      bl_direct_allgather(&ls, p), err);
    case CS_COLL_ALLREDUCE:
        if ((rc = bl_pick_chunks(rq, p, p, &C, err)) != CS_OK)
            return rc;
        *chunks = C;
        for (int phase = 0; phase < 2 && rc == CS_OK; phase++) {
            bl_lsched_init(&ls, CS_COLL_ALLGATHER, 0, p, C / p);
            rc = bl_run(b, &ls, phase == 0 ? BL_INVERT : BL_FORWARD, bl_direct_allgather(&ls, p),
                        err);
        }
        return rc;
    case CS_COLL_BROADCAST:
    case CS_COLL_REDUCE:
        if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
            return rc;
        bl_lsched_init(&ls, CS_COLL_BROADCAST, rq->root, p, C);
        for (int j = 0; j < C && rc == CS_OK; j++)
            for (int d = 0; d < p && rc == CS_OK; d++)
                rc = bl_lsched_add(&ls, j, rq->root, d, 0);
        *chunks = C;
        return bl_run(b, &ls, rq->c->kind == CS_COLL_BROADCAST ? BL_FORWARD : BL_INVERT, rc,
                      err);
    case CS_COLL_SCATTER:
    case CS_COLL_GATHER:
        if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
            return rc;
        bl_lsched_init(&ls, CS_COLL_SCATTER, rq->root, p, C);
        for (long g = 0; g < (long)p * C && rc == CS_OK; g++)
            rc = bl_lsched_add(&ls, g, rq->root, (int)(g % p), 0);
        *chunks = C;
        return bl_run(b, &ls, rq->c->kind == CS_COLL_SCATTER ? BL_FORWARD : BL_MIRROR, rc, err);
    case CS_COLL_ALLTOALL: {
        if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
            return rc;
        /* every chunk travels its full path (nothing to share): refuse early
         * when the hops alone exceed the limit */
        int *dist = malloc((size_t)p * sizeof *dist);
        if (!dist)
            return bl_oom(err);
        long hops = 0;
        for (int a = 0; a < p && rc == CS_OK; a++) {
            rc = topology_shortest_hops(bl_topology(b), a, dist, err);
            for (int d = 0; d < p && rc == CS_OK; d++)
                hops += dist[d] > 0 ? dist[d] : 0;
        }
        free(dist);
        if (rc != CS_OK)
            return rc;
        if (hops * C > BL_MAX_SENDS)
            return cs_error_set(err, CS_ELIMIT, "",
                                "direct alltoall on %s needs %ld sends, more than the limit %ld",
                                bl_topology(b)->name, hops * C, BL_MAX_SENDS);
        bl_lsched_init(&ls, CS_COLL_ALLTOALL, 0, p, C);
        for (long g = 0; g < (long)p * p * C && rc == CS_OK; g++)
            rc = bl_lsched_add(&ls, g, (int)(g % p), (int)((g / p) % p), 0);
        *chunks = C;
        return bl_run(b, &ls, BL_FORWARD, rc, err);
    }
    default:
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind", "%s does not implement %s",
                            rq->name, collective_kind_name(rq->c->kind));
    }
}

/* ---- recursive doubling / halving ------------------------------------------------------- */

static int bl_xor_peer(int q, int k, int m, const void *arg)
{
    (void)m;
    (void)arg;
    return q ^ (1 << k);
}

/* Distance-doubling butterfly allgather (dir 0) or its dual for the
 * distance-halving reduce-scatter, as one phase. */
static int bl_rd_allgather_phase(const bl_request *rq, bl_builder *b, int c, bl_mode mode,
                                 cs_error *err)
{
    bl_lsched ls;
    int nsteps;
    bl_lsched_init(&ls, CS_COLL_ALLGATHER, 0, rq->ranks, c);
    int rc = bl_butterfly_allgather(&ls, rq->ranks, bl_xor_peer, NULL, 0, &nsteps);
    return bl_run(b, &ls, mode, rc, err);
}

/* Butterfly exchange allreduce: every step both partners reduce into each
 * other, so it cannot be routed (no tree describes it): needs direct links. */
static int bl_rd_allreduce(const bl_request *rq, bl_builder *b, int C, cs_error *err)
{
    int p = rq->ranks, m = bl_floor_log2(p), pp = 1 << m, e = p - pp;
    long cap = (long)C * (2L * e + (long)pp * m) + 1, n = 0;
    bl_lsend *s = malloc((size_t)cap * sizeof *s);
    cs_op *ops = malloc((size_t)cap * sizeof *ops);
    int rc = CS_OK, step = 0;
    if (!s || !ops) {
        rc = bl_oom(err);
        goto out;
    }
    if (e > 0) {
        for (int q = 0; q < e; q++)
            for (int j = 0; j < C; j++) {
                s[n] = (bl_lsend){j, 2 * q, 2 * q + 1, step};
                ops[n++] = CS_OP_REDUCE;
            }
        step++;
    }
    for (int k = 0; k < m; k++, step++)
        for (int q = 0; q < pp; q++)
            for (int j = 0; j < C; j++) {
                s[n] = (bl_lsend){j, bl_survivor_rank(q, e), bl_survivor_rank(q ^ (1 << k), e),
                                  step};
                ops[n++] = CS_OP_REDUCE;
            }
    if (e > 0) {
        for (int q = 0; q < e; q++)
            for (int j = 0; j < C; j++) {
                s[n] = (bl_lsend){j, 2 * q + 1, 2 * q, step};
                ops[n++] = CS_OP_COPY;
            }
        step++;
    }
    rc = bl_add_native(b, s, n, ops, step, err);
    if (rc == CS_EUNSUPPORTED)
        snprintf(err->message + strlen(err->message),
                 sizeof err->message - strlen(err->message),
                 " (recursive-doubling allreduce exchanges full partial values and cannot be "
                 "routed; use recursive-halving or ring)");
out:
    free(s);
    free(ops);
    return rc;
}

int bl_gen_recursive_doubling(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int C, rc;
    if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
        return rc;
    *chunks = C;
    if (rq->c->kind == CS_COLL_ALLGATHER)
        return bl_rd_allgather_phase(rq, b, C, BL_FORWARD, err);
    if (rq->c->kind == CS_COLL_ALLREDUCE) {
        cs_error local = {0};
        cs_error *e2 = err ? err : &local;
        cs_error_clear(e2);
        return bl_rd_allreduce(rq, b, C, e2);
    }
    return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind", "%s does not implement %s",
                        rq->name, collective_kind_name(rq->c->kind));
}

int bl_gen_recursive_halving(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int p = rq->ranks, C, rc;
    if (rq->c->kind == CS_COLL_REDUCESCATTER) {
        if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
            return rc;
        *chunks = C;
        return bl_rd_allgather_phase(rq, b, C, BL_INVERT, err);
    }
    if (rq->c->kind == CS_COLL_ALLREDUCE) {
        if ((rc = bl_pick_chunks(rq, p, p, &C, err)) != CS_OK)
            return rc;
        *chunks = C;
        rc = bl_rd_allgather_phase(rq, b, C / p, BL_INVERT, err);
        if (rc == CS_OK)
            rc = bl_rd_allgather_phase(rq, b, C / p, BL_FORWARD, err);
        return rc;
    }
    return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind", "%s does not implement %s",
                        rq->name, collective_kind_name(rq->c->kind));
}

/* ---- trees ---------------------------------------------------------------------------------- */

int bl_tree_collective(const bl_request *rq, bl_builder *b, const int *parent,
                       const int *recv_step, int *chunks, cs_error *err)
{
    int p = rq->ranks, C, rc;
    bl_lsched ls;
    if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
        return rc;
    *chunks = C;
    long *all = bl_iota(C);
    if (!all)
        return bl_oom(err);
    switch (rq->c->kind) {
    case CS_COLL_BROADCAST:
    case CS_COLL_REDUCE:
        bl_lsched_init(&ls, CS_COLL_BROADCAST, rq->root, p, C);
        rc = bl_run(b, &ls, rq->c->kind == CS_COLL_BROADCAST ? BL_FORWARD : BL_INVERT,
                    bl_tree_broadcast(&ls, parent, recv_step, p, rq->root, all, C, 0), err);
        break;
    case CS_COLL_ALLREDUCE:
        for (int phase = 0; phase < 2 && rc == CS_OK; phase++) {
            bl_lsched_init(&ls, CS_COLL_BROADCAST, 0, p, C);
            rc = bl_run(b, &ls, phase == 0 ? BL_INVERT : BL_FORWARD,
                        bl_tree_broadcast(&ls, parent, recv_step, p, 0, all, C, 0), err);
        }
        break;
    case CS_COLL_SCATTER:
    case CS_COLL_GATHER:
        bl_lsched_init(&ls, CS_COLL_SCATTER, rq->root, p, C);
        rc = bl_run(b, &ls, rq->c->kind == CS_COLL_SCATTER ? BL_FORWARD : BL_MIRROR,
                    bl_tree_scatter(&ls, parent, recv_step, p, rq->root, 0), err);
        break;
    default:
        rc = cs_error_set(err, CS_EUNSUPPORTED, "collective.kind", "%s does not implement %s",
                          rq->name, collective_kind_name(rq->c->kind));
    }
    free(all);
    return rc;
}

int bl_gen_binomial(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int p = rq->ranks;
    int *parent = malloc((size_t)p * sizeof *parent);
    int *step = malloc((size_t)p * sizeof *step);
    if (!parent || !step) {
        free(parent);
        free(step);
        return bl_oom(err);
    }
    int s = 0;
    while ((1 << s) < p)
        s++;
    for (int v = 0; v < p; v++)
        parent[v] = -1, step[v] = 0;
    /* distance halving: at step k, every holder v (a multiple of 2d) sends to v + d */
    for (int k = 0; k < s; k++) {
        int d = 1 << (s - 1 - k);
        for (int v = 0; v + d < p; v += 2 * d) {
            parent[v + d] = v;
            step[v + d] = k;
        }
    }
    int rc = bl_tree_collective(rq, b, parent, step, chunks, err);
    free(parent);
    free(step);
    return rc;
}

/* NCCL's binary tree (ncclGetBtree): parent of r is r with its lowest set bit
 * moved up one position (or cleared when that leaves the range); root 0. */
static int bl_btree_parent(int r, int n)
{
    if (r == 0)
        return -1;
    int bit = 1;
    while (!(r & bit))
        bit <<= 1;
    int up = (r ^ bit) | (bit << 1);
    if (up >= n)
        up = r ^ bit;
    return up;
}

int bl_gen_double_binary_tree(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int p = rq->ranks, C, rc;
    if ((rc = bl_pick_chunks(rq, 2, 1, &C, err)) != CS_OK)
        return rc;
    *chunks = C;
    int *par[2], *depth[2];
    for (int k = 0; k < 2; k++) {
        par[k] = malloc((size_t)p * sizeof(int));
        depth[k] = malloc((size_t)p * sizeof(int));
    }
    int root1 = 0;
    if (!par[0] || !par[1] || !depth[0] || !depth[1]) {
        rc = bl_oom(err);
        goto out;
    }
    /* tree 0: the btree on virtual ranks; tree 1: mirrored (even p) or
     * shifted by one (odd p), so tree 0's leaves are tree 1's inner nodes */
    for (int v = 0; v < p; v++) {
        par[0][v] = bl_btree_parent(v, p);
        int u;
        if (p % 2 == 0) {
            u = bl_btree_parent(p - 1 - v, p);
            par[1][v] = u < 0 ? -1 : p - 1 - u;
            if (u < 0)
                root1 = v;
        } else {
            u = bl_btree_parent((v - 1 + p) % p, p);
            par[1][v] = u < 0 ? -1 : (u + 1) % p;
            if (u < 0)
                root1 = v;
        }
    }
    for (int k = 0; k < 2; k++)
        for (int v = 0; v < p; v++) {
            int d = 0;
            for (int x = v; par[k][x] >= 0 && d <= p; x = par[k][x])
                d++;
            depth[k][v] = d;
        }
    /* chunk j runs on tree j % 2 as its (j / 2)-th pipelined chunk; tree 1 is
     * fed by one extra hop from virtual rank 0 to its root */
    for (int phase = 0; phase < 2; phase++) {
        bool allreduce = rq->c->kind == CS_COLL_ALLREDUCE;
        if (!allreduce && phase == 1)
            break;
        int root = allreduce ? 0 : rq->root;
        bl_mode mode = BL_FORWARD;
        if (rq->c->kind == CS_COLL_REDUCE || (allreduce && phase == 0))
            mode = BL_INVERT;
        bl_lsched ls;
        bl_lsched_init(&ls, CS_COLL_BROADCAST, root, p, C);
        int r2 = CS_OK;
        for (int j = 0; j < C && r2 == CS_OK; j++) {
            int k = j % 2, i = j / 2, extra = 0;
            if (k == 1 && root1 != 0) {
                r2 = bl_lsched_add(&ls, j, bl_vrank_to_rank(0, root, p),
                                   bl_vrank_to_rank(root1, root, p), i);
                extra = 1;
            }
            for (int v = 0; v < p && r2 == CS_OK; v++)
                if (par[k][v] >= 0)
                    r2 = bl_lsched_add(&ls, j, bl_vrank_to_rank(par[k][v], root, p),
                                       bl_vrank_to_rank(v, root, p), i + extra + depth[k][v] - 1);
        }
        if ((rc = bl_run(b, &ls, mode, r2, err)) != CS_OK)
            goto out;
    }
out:
    for (int k = 0; k < 2; k++) {
        free(par[k]);
        free(depth[k]);
    }
    return rc;
}
