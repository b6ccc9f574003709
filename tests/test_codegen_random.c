/* Deadlock freedom and results of generated MSCCL programs (codegen_plan.h,
 * "Order", "Timed order", "Eager exchanges") on random schedules rather
 * than synthesized ones: random stepped allgathers and broadcasts (several
 * messages per link and step, sends in random order within a step), random
 * timed ones (greedy on random links, uneven link speeds, idle gaps), their
 * inversions (reducescatter, reduce) and reducescatter + allgather
 * (allreduce), on full meshes and chains of 2-10 ranks with 1-2 lanes,
 * lowered for both runtimes with and without merged steps, and run in the
 * interpreter with one-chunk FIFOs.  A lowering that refuses (other than a
 * runtime limit) or a program that deadlocks or computes a wrong output
 * fails.  ROUNDS and SEED (environment) widen a run by hand. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "codegen_testutil.h"
#include "msccl_interp.h"
#include "msccl_xml.h"
#include "verify.h"

static unsigned long long rs = 0x9e3779b97f4a7c15ull;
static unsigned rnd(unsigned n)
{
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return (unsigned)(rs % n);
}

static cs_algorithm *random_schedule(const cs_topology *t, const cs_collective *c, int C,
                                     int maxper)
{
    int P = t->ranks;
    cs_error err;
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(c, t->name, P, C, 1, &a, &err), CS_OK);
    long G = a->global_chunks;
    int *has = malloc(sizeof *has * (size_t)(G * P)); /* step from which held, -1 none */
    for (long g = 0; g < G; g++)
        for (int r = 0; r < P; r++)
            has[g * P + r] = collective_pre(c, P, C, g, r) ? 0 : -1;
    static long pend[4096][3]; /* a step's sends: at most 90 links x 2 lanes x 4 */
    int np = 0;
    int step = 0;
    for (; step < 200; step++) {
        bool any_missing = false;
        int per = 1 + (int)rnd((unsigned)maxper);
        for (int l = 0; l < t->nlinks; l++) {
            int u = t->links[l].src, v = t->links[l].dst;
            if (rnd(4) == 0)
                continue;
            int cap = t->links[l].lanes * per, sent = 0;
            long start = (long)rnd((unsigned)G);
            for (long k = 0; k < G && sent < cap; k++) {
                long g = (start + k) % G;
                if (has[g * P + u] >= 0 && has[g * P + u] <= step && has[g * P + v] < 0) {
                    pend[np][0] = g;
                    pend[np][1] = u;
                    pend[np][2] = v;
                    np++;
                    has[g * P + v] = step + 1;
                    sent++;
                }
            }
        }
        for (int i = np - 1; i > 0; i--) {
            int j = (int)rnd((unsigned)i + 1);
            long tmp[3];
            memcpy(tmp, pend[i], sizeof tmp);
            memcpy(pend[i], pend[j], sizeof tmp);
            memcpy(pend[j], tmp, sizeof tmp);
        }
        for (int i = 0; i < np; i++)
            ck_assert_int_eq(algorithm_add_send(a, pend[i][0], (int)pend[i][1], (int)pend[i][2],
                                                step, CS_OP_COPY), CS_OK);
        np = 0;
        for (long g = 0; g < G; g++)
            for (int r = 0; r < P; r++)
                if (has[g * P + r] < 0)
                    any_missing = true;
        if (!any_missing)
            break;
    }
    free(has);
    ck_assert_int_eq(algorithm_set_steps(a, step + 1, &err), CS_OK);
    ck_assert_msg(algorithm_fit_rounds(a, t, &err) == CS_OK, "%s", err.message);
    return a;
}

/* A random timed schedule: sends placed greedily on the earliest free lane
 * of random links, each link with its own duration. */
static cs_algorithm *random_timed(const cs_topology *t, const cs_collective *c, int C)
{
    int P = t->ranks;
    cs_error err;
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(c, t->name, P, C, 1, &a, &err), CS_OK);
    long G = a->global_chunks;
    double *arr = malloc(sizeof *arr * (size_t)(G * P));
    for (long g = 0; g < G; g++)
        for (int r = 0; r < P; r++)
            arr[g * P + r] = collective_pre(c, P, C, g, r) ? 0 : -1;
    double *dur = malloc(sizeof *dur * (size_t)t->nlinks);
    double (*lane)[2] = calloc((size_t)t->nlinks, sizeof *lane);
    for (int l = 0; l < t->nlinks; l++)
        dur[l] = rnd(3) == 0 ? 1.0 : 0.5 + rnd(6) * 0.5;
    long missing = 0;
    for (long g = 0; g < G; g++)
        for (int r = 0; r < P; r++)
            missing += arr[g * P + r] < 0;
    for (int guard = 0; missing > 0 && guard < 1000000; guard++) {
        int l = (int)rnd((unsigned)t->nlinks);
        int u = t->links[l].src, v = t->links[l].dst;
        long g = (long)rnd((unsigned)G);
        if (arr[g * P + u] < 0 || arr[g * P + v] >= 0)
            continue;
        int k = t->links[l].lanes > 1 && lane[l][1] < lane[l][0] ? 1 : 0;
        double start = arr[g * P + u] > lane[l][k] ? arr[g * P + u] : lane[l][k];
        if (rnd(4) == 0)
            start += 0.25 * rnd(4); /* idle gaps */
        double end = start + dur[l];
        lane[l][k] = end;
        arr[g * P + v] = end;
        missing--;
        ck_assert_int_eq(algorithm_add_timed_send(a, g, u, v, 0, CS_OP_COPY, start, end), CS_OK);
    }
    ck_assert_int_eq(missing, 0);
    free(arr);
    free(dur);
    free(lane);
    ck_assert_int_eq(algorithm_sort_by_time(a), CS_OK);
    ck_assert_msg(algorithm_steps_from_start_times(a, &err) == CS_OK, "%s", err.message);
    return a;
}

START_TEST(random_untimed_schedules_lower_and_run)
{
    long ran = 0;
    int rounds = getenv("ROUNDS") ? atoi(getenv("ROUNDS")) : 2000;
    if (getenv("SEED"))
        rs ^= strtoull(getenv("SEED"), NULL, 10) * 0x2545F4914F6CDD1Dull;
    for (int round = 0; round < rounds; round++) {
        int n = 2 + (int)rnd(9);
        cs_topology *t = cgt_topology(n, 1 + (int)rnd(2), rnd(3) != 0);
        cs_collective c;
        cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_BROADCAST};
        cs_coll_kind kind = kinds[rnd(2)];
        collective_init(&c, kind, kind == CS_COLL_BROADCAST ? (int)rnd((unsigned)n) : -1);
        cs_error err;
        ck_assert_int_eq(collective_validate(&c, n, &err), CS_OK);
        int C = 1 + (int)rnd(4);
        bool timed = rnd(2);
        cs_algorithm *a = timed ? random_timed(t, &c, C) : random_schedule(t, &c, C, 1 + (int)rnd(4));
        ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "round %d (timed %d): %s", round, timed, err.message);
        int form = (int)rnd(3); /* 0 as is, 1 inverted (reducescatter/reduce), 2 allreduce */
        if (form >= 1) {
            cs_algorithm *inv = NULL;
            ck_assert_msg(algorithm_invert(a, &inv, &err) == CS_OK, "%s", err.message);
            if (form == 2 && kind == CS_COLL_ALLGATHER) {
                cs_algorithm *ar = NULL;
                ck_assert_msg(algorithm_concat(inv, a, &ar, &err) == CS_OK, "%s", err.message);
                algorithm_free(inv);
                inv = ar;
            }
            algorithm_free(a);
            a = inv;
            collective_free(&c);
            collective_init(&c, a->collective.kind, a->collective.root);
            ck_assert_int_eq(collective_validate(&c, n, &err), CS_OK);
            ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "round %d form %d: %s", round,
                          form, err.message);
        }
        for (int rt = 1; rt <= 2; rt++)
            for (int single = 0; single < 2; single++) {
                cs_msccl_options mo;
                msccl_options_default(&mo);
                mo.runtime = (cs_msccl_runtime)rt;
                mo.single_chunk_steps = single;
                char *xml;
                size_t len;
                int rc = msccl_xml_generate(a, t, &mo, &xml, &len, &err);
                if (rc == CS_ELIMIT)
                    continue; /* over a runtime's limits: refused, as it should be */
                ck_assert_msg(rc == CS_OK, "round %d (timed %d n %d C %d %s rt %d single %d): %s", round, timed,
                              n, C, collective_kind_name(c.kind), rt, single,
                              err.message);
                cs_msccl_doc *d;
                ck_assert_int_eq(msccl_doc_parse(xml, len, &d, &err), CS_OK);
                cs_msccl_interp_options o;
                msccl_interp_options_default(&o);
                o.collective = &c;
                cs_msccl_interp_stats is;
                rc = msccl_interp_check(d, &o, &is, &err);
                ck_assert_msg(rc == CS_OK, "round %d (timed %d n %d C %d %s rt %d single %d): %s", round, timed,
                              n, C, collective_kind_name(c.kind), rt, single,
                              err.message);
                msccl_doc_free(d);
                free(xml);
                ran++;
            }
        algorithm_free(a);
        collective_free(&c);
        topology_free(t);
    }
    ck_assert_int_gt(ran, 0);
}
END_TEST

static Suite *s_fn(void)
{
    Suite *s = suite_create("codegen_random");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 600);
    tcase_add_test(tc, random_untimed_schedules_lower_and_run);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(s_fn)
