/* Alltoall on the 4x4 torus by SMT (make test-slow: minutes, not seconds).
 *
 * The whole Pareto search does not finish in minutes (256 chunks per C), so
 * this decides one instance.  By hand: each rank's distances to the other 15
 * sum to 4*1 + 6*2 + 4*3 + 1*4 = 32, so one chunk per pair makes 16 * 32 = 512
 * link crossings over 64 lanes: R/C >= 8, and S >= 4 (the diameter).
 * (C,S,R) = (1,5,9) is one step and one round above those bounds; the solver
 * must find it and the verifier must accept it. */
#include <stdlib.h>

#include "check_main.h"
#include "smt.h"
#include "verify.h"

START_TEST(torus4x4_alltoall_instance)
{
    cs_topology *t = NULL;
    cs_error err;
    ck_assert_int_eq(topology_builtin("torus2d:4x4", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLTOALL, -1);
    ck_assert_int_eq(collective_validate(&c, t->ranks, &err), CS_OK);

    cs_bounds b;
    ck_assert_int_eq(collective_bounds(t, &c, &b, &err), CS_OK);
    ck_assert_int_eq(b.steps, 4);
    ck_assert_int_eq(b.rpc_num, 8 * b.rpc_den);

    cs_smt_options o;
    smt_options_default(&o);
    o.threads = 1;
    cs_algorithm *a = NULL;
    int rc = smt_solve_instance(t, &c, 5, 9, 1, &o, &a, &err);
    ck_assert_msg(rc == CS_OK, "(1,5,9): %s", err.message);
    ck_assert_int_eq(a->steps, 5);
    ck_assert_int_eq(a->rounds, 9);
    ck_assert_int_eq(a->global_chunks, 16 * 16);
    ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s", err.message);
    algorithm_free(a);
    collective_free(&c);
    topology_free(t);
}
END_TEST

static Suite *torus_alltoall_suite(void)
{
    Suite *s = suite_create("slow_smt_torus_alltoall");
    TCase *tc = tcase_create("instance");
    tcase_set_timeout(tc, 900);
    tcase_add_test(tc, torus4x4_alltoall_instance);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(torus_alltoall_suite)
