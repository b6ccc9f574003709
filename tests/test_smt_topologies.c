/* SMT searches beyond DGX-1: every collective on a 4x4 torus (alltoall on a
 * 3x3 one), the DGX-2 switch topology, and larger chunk counts.  Once slow
 * enough for `make test-slow`, now a few seconds, so part of `make test`.  Expectations come from the
 * bounds (derived by hand in the comments) and from the verifier. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "smt.h"
#include "verify.h"
#include "topology_testutil.h"

static cs_result *search(const cs_topology *t, cs_coll_kind kind, int root, int k,
                         int max_chunks, int max_steps)
{
    cs_collective c;
    collective_init(&c, kind, root);
    cs_smt_options o;
    smt_options_default(&o);
    o.k = k;
    o.max_chunks = max_chunks;
    o.max_steps = max_steps;
    o.total_time_limit_s = 240;
    cs_result *r = NULL;
    cs_error err;
    int rc = smt_search(t, &c, &o, &r, &err);
    ck_assert_msg(rc == CS_OK, "%s on %s: %s", collective_kind_name(kind), t->name, err.message);
    for (int i = 0; i < r->nalgs; i++) {
        cs_error verr;
        ck_assert_msg(algorithm_verify(t, r->algs[i], &verr) == CS_OK, "%s point %d: %s",
                      collective_kind_name(kind), i, verr.message);
        ck_assert_int_ge(r->algs[i]->steps, r->bound_steps);
        ck_assert(r->algs[i]->rounds / (double)r->algs[i]->chunks >=
                  r->bound_rounds_per_chunk - 1e-9);
        if (i > 0) {
            ck_assert_int_gt(r->algs[i]->steps, r->algs[i - 1]->steps);
            ck_assert(r->algs[i]->rounds * (long)r->algs[i - 1]->chunks <
                      r->algs[i - 1]->rounds * (long)r->algs[i]->chunks);
        }
    }
    collective_free(&c);
    return r;
}

START_TEST(torus4x4_allgather_frontier)
{
    /* Diameter 4; 15C chunks into 4 lanes per rank: R/C >= 15/4.  At S = 4 the
     * first candidate is (R,C) = (4,1) (R/C = 4; nothing in [15/4, 4) has
     * R <= 8).  R/C = 15/4 needs R = 15 (C = 4), so S >= 11 with k = 4. */
    cs_topology *t = test_topology("torus2d:4x4");
    cs_result *r = search(t, CS_COLL_ALLGATHER, -1, 4, 8, 0);
    ck_assert_int_eq(r->nalgs, 2);
    ck_assert_int_eq(r->algs[0]->steps, 4);
    ck_assert_int_eq(r->algs[0]->rounds, 4);
    ck_assert_int_eq(r->algs[0]->chunks, 1);
    ck_assert_str_eq(r->algs[0]->optimality, "latency");
    ck_assert_int_eq(r->algs[1]->steps, 11);
    ck_assert_int_eq(r->algs[1]->rounds, 15);
    ck_assert_int_eq(r->algs[1]->chunks, 4);
    ck_assert_str_eq(r->algs[1]->optimality, "bandwidth");
    ck_assert(r->complete);
    result_free(r);
    topology_free(t);
}
END_TEST

START_TEST(torus4x4_other_collectives)
{
    cs_topology *t = test_topology("torus2d:4x4");
    static const cs_coll_kind kinds[] = {CS_COLL_REDUCESCATTER, CS_COLL_BROADCAST,
                                         CS_COLL_REDUCE,        CS_COLL_GATHER,
                                         CS_COLL_SCATTER,       CS_COLL_ALLREDUCE};
    for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++) {
        int root = collective_kind_is_rooted(kinds[i]) ? 5 : -1;
        cs_result *r = search(t, kinds[i], root, 2, 4, kinds[i] == CS_COLL_ALLREDUCE ? 0 : 6);
        ck_assert_msg(r->nalgs >= 1, "%s: empty frontier", collective_kind_name(kinds[i]));
        result_free(r);
    }
    topology_free(t);
    /* alltoall on the 4x4 torus (256 chunks) does not finish in 4 minutes; a
     * 3x3 torus does.  Diameter 2; each rank sends C chunks to 4 ranks 1 hop
     * away and to 4 ranks 2 hops away: 12C link crossings per rank, 108C in
     * all, over 36 lanes: R/C >= 3.  (C,S,R) = (1,2,3) meets both bounds. */
    t = test_topology("torus2d:3x3");
    cs_result *r = search(t, CS_COLL_ALLTOALL, -1, 4, 4, 0);
    ck_assert_int_eq(r->nalgs, 1);
    ck_assert_int_eq(r->algs[0]->steps, 2);
    ck_assert_int_eq(r->algs[0]->rounds, 3 * r->algs[0]->chunks);
    ck_assert_str_eq(r->algs[0]->optimality, "both");
    result_free(r);
    topology_free(t);
}
END_TEST

START_TEST(dgx2_switch_allgather)
{
    /* NVSwitch, hub and spoke: every GPU sends and receives one chunk per
     * round, so R/C >= 15; one step suffices when k >= 14: (C,S,R) = (1,1,15). */
    cs_topology *t = test_topology("dgx2");
    cs_result *r = search(t, CS_COLL_ALLGATHER, -1, 15, 2, 0);
    ck_assert_int_eq(r->nalgs, 1);
    ck_assert_int_eq(r->algs[0]->steps, 1);
    ck_assert_int_eq(r->algs[0]->rounds, 15);
    ck_assert_int_eq(r->algs[0]->chunks, 1);
    ck_assert_str_eq(r->algs[0]->optimality, "both");
    result_free(r);
    /* with k = 4 no (R, C) reaches R/C >= 15 within bound + 8 steps */
    r = search(t, CS_COLL_ALLGATHER, -1, 4, 8, 0);
    ck_assert_int_eq(r->nalgs, 0);
    ck_assert(!r->complete);
    result_free(r);
    topology_free(t);
}
END_TEST

START_TEST(dgx1_allgather_larger_k)
{
    /* k = 6 adds candidates, but the frontier cannot beat the bounds: the same
     * two points (SCCL Table 4). */
    cs_topology *t = test_topology("dgx1");
    cs_result *r = search(t, CS_COLL_ALLGATHER, -1, 6, 8, 0);
    ck_assert_int_eq(r->nalgs, 2);
    ck_assert_int_eq(r->algs[0]->steps, 2);
    ck_assert_int_eq(r->algs[0]->rounds * 2, r->algs[0]->chunks * 3);
    ck_assert_int_eq(r->algs[1]->steps, 3);
    ck_assert_int_eq(r->algs[1]->rounds * 6, r->algs[1]->chunks * 7);
    result_free(r);
    topology_free(t);
}
END_TEST

static Suite *smt_topologies_suite(void)
{
    Suite *s = suite_create("smt_topologies");
    TCase *tc = tcase_create("long");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, torus4x4_allgather_frontier);
    tcase_add_test(tc, torus4x4_other_collectives);
    tcase_add_test(tc, dgx2_switch_allgather);
    tcase_add_test(tc, dgx1_allgather_larger_k);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(smt_topologies_suite)
