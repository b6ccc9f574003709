/*
 * cluster_e2e_check.c - the Check assertions over an e2e_run report
 * (cluster_e2e.h), shared by tests/test_cluster_e2e.c and
 * tests/slow_cluster_e2e.c.
 */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "cluster_e2e.h"
#include "cs_common.h"

void cluster_e2e_assert(const char *base_url, const char *label, const char *topology,
                        const char *collective)
{
    e2e_options o;
    e2e_options_default(&o);
    o.base_url = base_url;
    o.done_timeout_s = 300;
    o.warm_samples = 4;
    e2e_report rep;
    int rc = e2e_run(&o, topology, collective, &rep);
    char what[200];
    snprintf(what, sizeof what, "%s %s", label, collective);
    e2e_print(stderr, what, &rep);
    ck_assert_msg(rc == 0 && rep.done, "%s: %s", what, rep.error);
    ck_assert_msg(!strcmp(rep.method, "hierarchical"), "%s: auto chose %s: %s", what, rep.method,
                  rep.reason);
    ck_assert_msg(rep.nchecked == 1 && rep.algs[0].nrt == 2, "%s: %d algorithms checked", what,
                  rep.nchecked);
    for (int k = 0; k < rep.algs[0].nrt; k++) {
        const e2e_runtime_report *rt = &rep.algs[0].rt[k];
        /* never a document outside the limits, never a wrong one */
        ck_assert_msg(rt->limits_failed == 0, "%s %s: %s", what, rt->runtime, rt->first_problem);
        ck_assert_msg(rt->interp_rc != CS_EVERIFY, "%s %s: %s", what, rt->runtime,
                      rt->first_problem);
        ck_assert_msg(rt->fetched == rep.ranks, "%s %s: %d of %d slices (%s)", what, rt->runtime,
                      rt->fetched, rep.ranks, rt->first_problem);
        ck_assert_msg(rt->interp_rc == CS_OK, "%s %s: %s", what, rt->runtime, rt->first_problem);
        ck_assert_msg(rt->node_ok, "%s %s: %s", what, rt->runtime, rt->first_problem);
        ck_assert_msg(!rt->first_problem[0], "%s %s: %s", what, rt->runtime, rt->first_problem);
        ck_assert_int_lt(rt->worst_elements, 4096);
        ck_assert_int_lt(rt->worst_steps, !strcmp(rt->runtime, "msccl") ? 256 : 64);
    }
}
