/* Tests of the Bine building blocks against the vectors of reference/bine.md,
 * and of the Bine baselines' structure (trees, butterfly partners, the chunks
 * each reduce-scatter step moves) on a fully connected topology, where no
 * routing hides the logical pattern. */
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "check_main.h"
#include "simulate.h"
#include "verify.h"
#include "topology_testutil.h"

START_TEST(negabinary_p8_table)
{
    /* reference: 0:000 1:001 2:110 3:111 4:100 5:101 6:010 7:011 */
    const unsigned nb[8] = {0, 1, 6, 7, 4, 5, 2, 3};
    for (unsigned r = 0; r < 8; r++) {
        ck_assert_uint_eq(bine_negabinary(r, 8), nb[r]);
        ck_assert_uint_eq(bine_negabinary_inverse(nb[r], 8), r);
    }
}
END_TEST

START_TEST(negabinary_inverse_roundtrip)
{
    for (unsigned p = 2; p <= 1024; p *= 2)
        for (unsigned r = 0; r < p; r++)
            ck_assert_uint_eq(bine_negabinary_inverse(bine_negabinary(r, p), p), r);
}
END_TEST

START_TEST(butterfly_partners_p8)
{
    const int rho1[8] = {1, 0, 3, 2, 5, 4, 7, 6};
    const int rhom1[8] = {7, 2, 1, 4, 3, 6, 5, 0};
    const int rho3[8] = {3, 6, 5, 0, 7, 2, 1, 4};
    for (int r = 0; r < 8; r++) {
        ck_assert_int_eq(bine_butterfly_peer(r, 0, 8), rho1[r]);
        ck_assert_int_eq(bine_butterfly_peer(r, 1, 8), rhom1[r]);
        ck_assert_int_eq(bine_butterfly_peer(r, 2, 8), rho3[r]);
    }
    /* partners are symmetric for every power of two and step */
    for (int p = 2; p <= 256; p *= 2)
        for (int k = 0; (1 << k) < p; k++)
            for (int r = 0; r < p; r++)
                ck_assert_int_eq(bine_butterfly_peer(bine_butterfly_peer(r, k, p), k, p), r);
}
END_TEST

START_TEST(block_positions_p8)
{
    /* h = [0,1,3,4,6,7,5,2] gives pos = bitreverse3(h) = [0,4,6,1,3,7,5,2] */
    const int pos[8] = {0, 4, 6, 1, 3, 7, 5, 2};
    const int h[8] = {0, 1, 3, 4, 6, 7, 5, 2};
    for (int r = 0; r < 8; r++) {
        int x = bine_block_position(r, 8);
        ck_assert_int_eq(x, pos[r]);
        /* h is pos with its 3 bits reversed back */
        ck_assert_int_eq(((x & 1) << 2) | (x & 2) | ((x >> 2) & 1), h[r]);
    }
    /* a permutation for larger p */
    for (int p = 2; p <= 256; p *= 2) {
        char *seen = calloc((size_t)p, 1);
        for (int r = 0; r < p; r++) {
            int x = bine_block_position(r, p);
            ck_assert(x >= 0 && x < p && !seen[x]);
            seen[x] = 1;
        }
        free(seen);
    }
}
END_TEST

static cs_algorithm *gen(const char *name, const cs_topology *t, cs_coll_kind kind, int root,
                         int chunks)
{
    cs_collective c;
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? root : -1);
    cs_baseline_options opt = {chunks};
    cs_algorithm *a = NULL;
    cs_error err;
    int rc = baseline_generate(name, t, &c, &opt, &a, &err);
    ck_assert_msg(rc == CS_OK, "%s %s on %s: %s", name, collective_kind_name(kind), t->name,
                  err.message);
    collective_free(&c);
    return a;
}

/* On a fully connected topology the broadcast is the tree itself: check every
 * edge and the step at which each rank receives. */
static void check_tree(int p, const int (*edges)[3], int nedges, int nsteps)
{
    char spec[32];
    snprintf(spec, sizeof spec, "fc:%d", p);
    cs_topology *t = test_topology(spec);
    cs_algorithm *a = gen("bine-tree", t, CS_COLL_BROADCAST, 0, 1);
    ck_assert_int_eq(a->nsends, nedges);
    ck_assert_int_eq(a->steps, nsteps);
    for (int i = 0; i < nedges; i++) {
        bool found = false;
        for (long k = 0; k < a->nsends; k++)
            if (algorithm_send_step(a, k) == edges[i][0] && algorithm_send_src(a, k) == edges[i][1] &&
                algorithm_send_dst(a, k) == edges[i][2])
                found = true;
        ck_assert_msg(found, "p=%d: missing step %d: %d->%d", p, edges[i][0], edges[i][1],
                      edges[i][2]);
    }
    algorithm_free(a);
    topology_free(t);
}

START_TEST(tree_p8_matches_reference)
{
    /* step0: 0->3 | step1: 0->7, 3->4 | step2: 0->1, 3->2, 4->5, 7->6 */
    const int e[][3] = {{0, 0, 3}, {1, 0, 7}, {1, 3, 4}, {2, 0, 1},
                        {2, 3, 2}, {2, 4, 5}, {2, 7, 6}};
    check_tree(8, e, 7, 3);
}
END_TEST

START_TEST(tree_p16_matches_reference)
{
    const int e[][3] = {{0, 0, 11}, {1, 0, 3},  {1, 11, 8}, {2, 0, 15}, {2, 3, 4},
                        {2, 8, 7},  {2, 11, 12}, {3, 0, 1},  {3, 3, 2},  {3, 4, 5},
                        {3, 7, 6},  {3, 8, 9},  {3, 11, 10}, {3, 12, 13}, {3, 15, 14}};
    check_tree(16, e, 15, 4);
    /* receive steps of ranks 1..15: [-,3,3,1,2,3,3,2,1,3,3,0,2,3,3,2] */
    const int recv[16] = {-1, 3, 3, 1, 2, 3, 3, 2, 1, 3, 3, 0, 2, 3, 3, 2};
    cs_topology *t = test_topology("fc:16");
    cs_algorithm *a = gen("bine-tree", t, CS_COLL_BROADCAST, 0, 1);
    for (long k = 0; k < a->nsends; k++)
        ck_assert_int_eq(algorithm_send_step(a, k), recv[algorithm_send_dst(a, k)]);
    algorithm_free(a);
    /* another root rotates the tree: root 5 sends first to (11 + 5) % 16 = 0 */
    a = gen("bine-tree", t, CS_COLL_BROADCAST, 5, 1);
    for (long k = 0; k < a->nsends; k++)
        if (algorithm_send_step(a, k) == 0) {
            ck_assert_int_eq(algorithm_send_src(a, k), 5);
            ck_assert_int_eq(algorithm_send_dst(a, k), 0);
        }
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* The butterfly allgather on fc:8 exchanges with pi(r, 2-k) at step k, and the
 * reduce-scatter with pi(r, k), sending exactly the chunks of the owners
 * whose block position lies in the partner's range (reference/bine.md). */
START_TEST(butterfly_partners_and_blocks_p8)
{
    cs_topology *t = test_topology("fc:8");
    cs_algorithm *ag = gen("bine-butterfly", t, CS_COLL_ALLGATHER, 0, 1);
    ck_assert_int_eq(ag->steps, 3);
    for (long k = 0; k < ag->nsends; k++) {
        const cs_send sv = algorithm_send(ag, k), *s = &sv;
        ck_assert_int_eq(s->dst, bine_butterfly_peer(s->src, 2 - s->step, 8));
    }
    /* 8 ranks x (1 + 2 + 4) chunks received */
    ck_assert_int_eq(ag->nsends, 8 * 7);
    algorithm_free(ag);

    cs_algorithm *rs = gen("bine-butterfly", t, CS_COLL_REDUCESCATTER, 0, 1);
    ck_assert_int_eq(rs->steps, 3);
    ck_assert_int_eq(rs->nsends, 8 * 7);
    int pos[8];
    for (int r = 0; r < 8; r++)
        pos[r] = bine_block_position(r, 8);
    for (int step = 0; step < 3; step++) {
        int B = 8 >> (step + 1);
        for (int r = 0; r < 8; r++) {
            int peer = bine_butterfly_peer(r, step, 8);
            int lo = pos[peer] / B * B;
            /* expected chunk owners: pos in [lo, lo + B) */
            int expected = 0, got = 0;
            for (int x = 0; x < 8; x++)
                if (pos[x] >= lo && pos[x] < lo + B)
                    expected |= 1 << x;
            for (long k = 0; k < rs->nsends; k++) {
                const cs_send sv = algorithm_send(rs, k), *s = &sv;
                if (s->step != step || s->src != r)
                    continue;
                ck_assert_int_eq(s->dst, peer);
                ck_assert_int_eq(s->op, CS_OP_REDUCE);
                got |= 1 << (int)(s->chunk % 8);
            }
            ck_assert_msg(got == expected, "step %d rank %d: chunks %x, reference %x", step, r,
                          got, expected);
        }
    }
    algorithm_free(rs);
    topology_free(t);
}
END_TEST

START_TEST(non_power_of_two_bine_verifies)
{
    const char *specs[] = {"fc:6", "ring:7", "fc:12", "line:5", "mesh2d:3x4"};
    const cs_coll_kind kinds[] = {CS_COLL_BROADCAST, CS_COLL_REDUCE, CS_COLL_GATHER,
                                  CS_COLL_SCATTER,   CS_COLL_ALLREDUCE};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        cs_topology *t = test_topology(specs[i]);
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
            cs_algorithm *a = gen("bine-tree", t, kinds[k], t->ranks - 1, 0);
            ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
            algorithm_free(a);
        }
        cs_coll_kind bk[] = {CS_COLL_ALLGATHER, CS_COLL_REDUCESCATTER, CS_COLL_ALLREDUCE};
        for (size_t k = 0; k < 3; k++) {
            cs_algorithm *a = gen("bine-butterfly", t, bk[k], 0, 0);
            ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
            algorithm_free(a);
        }
        topology_free(t);
    }
}
END_TEST

/* Global-link traffic (cross-group bytes, computed by the simulator). */
static double cross_bytes(const cs_topology *t, const char *name, cs_coll_kind kind)
{
    cs_algorithm *a = gen(name, t, kind, 0, 0);
    cs_sim_result r;
    memset(&r, 0, sizeof r);
    cs_error err;
    int rc = simulate_algorithm(t, a, 1 << 20, &r, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    double x = r.cross_group_bytes;
    sim_result_free(&r);
    algorithm_free(a);
    return x;
}

START_TEST(bine_butterfly_cuts_global_traffic)
{
    /* Measured (1 MiB per rank, cross-group MB): dragonfly:4x4 reducescatter
     * and allgather Bine 56 vs recursive halving/doubling 80; switch2d:4x2
     * 10 vs 32.  The butterflies never send more across groups here. */
    const char *specs[] = {"dragonfly:4x4", "switch2d:4x2"};
    for (int i = 0; i < 2; i++) {
        cs_topology *t = test_topology(specs[i]);
        ck_assert_int_gt(t->ngroups, 1);
        double bine = cross_bytes(t, "bine-butterfly", CS_COLL_REDUCESCATTER);
        double rh = cross_bytes(t, "recursive-halving", CS_COLL_REDUCESCATTER);
        ck_assert_msg(bine < rh, "%s: bine %.0f >= recursive-halving %.0f", specs[i], bine, rh);
        bine = cross_bytes(t, "bine-butterfly", CS_COLL_ALLGATHER);
        double rd = cross_bytes(t, "recursive-doubling", CS_COLL_ALLGATHER);
        ck_assert_msg(bine < rd, "%s: bine %.0f >= recursive-doubling %.0f", specs[i], bine, rd);
        topology_free(t);
    }
}
END_TEST

/* Eq. 2 of the paper: Bine tree partners are closer modulo p than binomial
 * ones.  Sum of modular distances over the tree edges on fc:16 (no routing):
 * binomial 8 + 2*4 + 4*2 + 8*1 = 32, Bine 5 + 2*3 + 4*1 + 8*1 = 23. */
static int modular_distance_sum(const char *name)
{
    cs_topology *t = test_topology("fc:16");
    cs_algorithm *a = gen(name, t, CS_COLL_BROADCAST, 0, 1);
    int sum = 0;
    for (long k = 0; k < a->nsends; k++) {
        int d = abs(algorithm_send_src(a, k) - algorithm_send_dst(a, k));
        sum += d < 16 - d ? d : 16 - d;
    }
    algorithm_free(a);
    topology_free(t);
    return sum;
}

START_TEST(bine_tree_partners_are_closer)
{
    ck_assert_int_eq(modular_distance_sum("binomial-tree"), 32);
    ck_assert_int_eq(modular_distance_sum("bine-tree"), 23);
}
END_TEST

static Suite *bine_suite(void)
{
    Suite *s = suite_create("bine");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, negabinary_p8_table);
    tcase_add_test(tc, negabinary_inverse_roundtrip);
    tcase_add_test(tc, butterfly_partners_p8);
    tcase_add_test(tc, block_positions_p8);
    tcase_add_test(tc, tree_p8_matches_reference);
    tcase_add_test(tc, tree_p16_matches_reference);
    tcase_add_test(tc, butterfly_partners_and_blocks_p8);
    tcase_add_test(tc, non_power_of_two_bine_verifies);
    tcase_add_test(tc, bine_butterfly_cuts_global_traffic);
    tcase_add_test(tc, bine_tree_partners_are_closer);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(bine_suite)
