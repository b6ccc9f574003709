/* Issue 10's first done-when bullet end to end through the real daemon, at
 * 64 nodes (512 ranks; make test-slow: about a minute; tests/test_cluster_e2e.c
 * runs 16 nodes in make test, bench/cluster.sh the 128-node cases): dgxh100:64
 * and the Slurm hook's 64-node DGX-1 cluster, allgather, reducescatter and
 * allreduce with method auto, every rank's MSCCL slice for both runtimes
 * within limits, reassembled and run in the XML interpreter
 * (cluster_e2e_assert in tests/cluster_e2e.h says what is checked and which
 * known gaps are accepted as clean refusals). */
#include <stdlib.h>

#include "check_main.h"
#include "cluster_e2e.h"
#include "server_harness.h"

static const char *colls[] = {"allgather", "reducescatter", "allreduce"};

START_TEST(dgxh100_64_end_to_end)
{
    cs_daemon d;
    ck_assert_int_eq(daemon_start(&d, NULL, NULL, NULL), 0);
    cluster_e2e_assert(d.base_url, "dgxh100:64", "\"dgxh100:64\"", colls[_i]);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(hook_dgx1_64_nodes_end_to_end)
{
    char msg[256];
    char *topo = e2e_hook_dgx1_cluster(64, msg, sizeof msg);
    ck_assert_msg(topo != NULL, "%s", msg);
    cs_daemon d;
    ck_assert_int_eq(daemon_start(&d, NULL, NULL, NULL), 0);
    cluster_e2e_assert(d.base_url, "dgx1cluster:64", topo, colls[_i]);
    ck_assert_int_eq(daemon_stop(&d), 0);
    free(topo);
}
END_TEST

static Suite *cluster_e2e_suite(void)
{
    Suite *s = suite_create("cluster_e2e_64");
    TCase *tc = tcase_create("cluster");
    tcase_set_timeout(tc, 1800);
    tcase_add_loop_test(tc, dgxh100_64_end_to_end, 0, 3);
    tcase_add_loop_test(tc, hook_dgx1_64_nodes_end_to_end, 0, 3);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(cluster_e2e_suite)
