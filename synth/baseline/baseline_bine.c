/*
 * baseline_bine.c - Bine (binomial negabinary) trees and butterflies, from
 * "Bine Trees: Enhancing Collective Operations by Optimizing Communication
 * Locality"; formulas and test vectors in reference/bine.md.
 *
 * Bine trees are binomial trees whose partners are chosen through the
 * negabinary representation of ranks so that communicating ranks are closer
 * modulo p, which cuts traffic over global (cross-group) links.  The tree is
 * computed once by playing the distance-halving broadcast rule and then fed to
 * the shared tree machinery (broadcast, reduce = inverted broadcast, scatter,
 * gather = mirrored scatter, allreduce = reduce + broadcast).  Butterflies use
 * the shared butterfly allgather with the Bine peer function: the allgather is
 * distance halving, and its inversion is the paper's distance-doubling,
 * vector-halving reduce-scatter (the block positions of bine_block_position
 * describe exactly which chunks move; test_bine checks that).
 *
 * Non-power-of-two p folds the excess ranks as in reference/bine.md.
 */
#include <stdlib.h>

#include "baseline_internal.h"

static unsigned bine_mask(unsigned p) { return 0xAAAAAAAAu & (p - 1); }

unsigned bine_negabinary(unsigned r, unsigned p)
{
    unsigned m = bine_mask(p);
    return ((r + m) ^ m) & (p - 1);
}

unsigned bine_negabinary_inverse(unsigned x, unsigned p)
{
    unsigned m = bine_mask(p);
    return ((x ^ m) - m) & (p - 1);
}

/* rho_k = (1 - (-2)^(k+1)) / 3: 1, -1, 3, -5, 11, ... */
static long bine_rho(int k)
{
    long pw = 1;
    for (int i = 0; i <= k; i++)
        pw *= -2;
    return (1 - pw) / 3;
}

int bine_butterfly_peer(int r, int k, int p)
{
    long rho = bine_rho(k);
    long q = (r % 2 == 0) ? (long)r + rho : (long)r - rho;
    q %= p;
    if (q < 0)
        q += p;
    return (int)q;
}

int bine_block_position(int r, int p)
{
    int s = bl_floor_log2(p);
    unsigned beta = (r % 2) ? bine_negabinary((unsigned)r, (unsigned)p)
                            : bine_negabinary((unsigned)((p - r) % p), (unsigned)p);
    unsigned h = beta ^ (beta >> 1);
    unsigned pos = 0;
    for (int i = 0; i < s; i++)
        if (h & (1u << i))
            pos |= 1u << (s - 1 - i);
    return (int)pos;
}

/* The distance-halving Bine tree on pp = 2^m ranks rooted at 0: parent and
 * receive step of every rank (reference/bine.md, "Distance-halving tree"). */
static void bine_tree_pow2(int m, int *parent, int *step)
{
    int pp = 1 << m;
    for (int r = 0; r < pp; r++)
        parent[r] = -2; /* not reached yet */
    parent[0] = -1;
    step[0] = -1;
    for (int k = 0; k < m; k++) {
        unsigned mask = (1u << (m - k)) - 1;
        for (int r = 0; r < pp; r++) {
            if (parent[r] == -2 || step[r] >= k)
                continue; /* r does not hold the data before step k */
            int d = (int)bine_negabinary_inverse(bine_negabinary((unsigned)r, (unsigned)pp) ^ mask,
                                                 (unsigned)pp);
            if (parent[d] == -2) {
                parent[d] = r;
                step[d] = k;
            }
        }
    }
}

int bl_gen_bine_tree(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int p = rq->ranks, m = bl_floor_log2(p), pp = 1 << m, e = p - pp;
    int *tp = malloc((size_t)pp * sizeof *tp), *ts = malloc((size_t)pp * sizeof *ts);
    int *parent = malloc((size_t)p * sizeof *parent), *step = malloc((size_t)p * sizeof *step);
    int rc;
    if (!tp || !ts || !parent || !step) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory building a baseline");
        goto out;
    }
    bine_tree_pow2(m, tp, ts);
    /* fold (virtual ranks): v0 first hands the data to v1, the survivor tree
     * rooted at v1 runs, then each survivor 2q+1 feeds its folded 2q */
    int off = e > 0 ? 1 : 0;
    for (int v = 0; v < p; v++)
        parent[v] = -1, step[v] = 0;
    if (e > 0) {
        parent[1] = 0;
        step[1] = 0;
    }
    for (int q = 0; q < pp; q++) {
        int v = q < e ? 2 * q + 1 : q + e;
        if (tp[q] >= 0) {
            int u = tp[q] < e ? 2 * tp[q] + 1 : tp[q] + e;
            parent[v] = u;
            step[v] = off + ts[q];
        }
    }
    for (int q = 1; q < e; q++) {
        parent[2 * q] = 2 * q + 1;
        step[2 * q] = off + m;
    }
    rc = bl_tree_collective(rq, b, parent, step, chunks, err);
out:
    free(tp);
    free(ts);
    free(parent);
    free(step);
    return rc;
}

/* Distance-halving Bine butterfly: step k uses pi(q, m-1-k). */
static int bine_halving_peer(int q, int k, int m, const void *arg)
{
    (void)arg;
    return bine_butterfly_peer(q, m - 1 - k, 1 << m);
}

static int bine_allgather_phase(const bl_request *rq, bl_builder *b, int c, bl_mode mode,
                                cs_error *err)
{
    bl_lsched ls;
    int nsteps;
    bl_lsched_init(&ls, CS_COLL_ALLGATHER, 0, rq->ranks, c);
    int rc = bl_butterfly_allgather(&ls, rq->ranks, bine_halving_peer, NULL, 0, &nsteps);
    if (rc == CS_OK)
        rc = bl_add_phase(b, &ls, mode, err);
    else
        rc = cs_error_set(err, rc, "", "could not build the Bine butterfly (%s)",
                          cs_status_name(rc));
    bl_lsched_free(&ls);
    return rc;
}

int bl_gen_bine_butterfly(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err)
{
    int p = rq->ranks, C, rc;
    switch (rq->c->kind) {
    case CS_COLL_ALLGATHER:
    case CS_COLL_REDUCESCATTER:
        if ((rc = bl_pick_chunks(rq, 1, 1, &C, err)) != CS_OK)
            return rc;
        *chunks = C;
        return bine_allgather_phase(rq, b, C,
                                    rq->c->kind == CS_COLL_ALLGATHER ? BL_FORWARD : BL_INVERT,
                                    err);
    case CS_COLL_ALLREDUCE:
        if ((rc = bl_pick_chunks(rq, p, p, &C, err)) != CS_OK)
            return rc;
        *chunks = C;
        rc = bine_allgather_phase(rq, b, C / p, BL_INVERT, err);
        if (rc == CS_OK)
            rc = bine_allgather_phase(rq, b, C / p, BL_FORWARD, err);
        return rc;
    default:
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind", "%s does not implement %s",
                            rq->name, collective_kind_name(rq->c->kind));
    }
}
