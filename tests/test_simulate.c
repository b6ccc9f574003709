/* Tests of the simulator and the ideal bound: every expected time is worked
 * out by hand in the comment next to it. Links are 1 GB/s (1000 bytes/us) with
 * alpha 1 us unless said otherwise, so a 1000-byte chunk takes 2 us per hop. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "send_edit.h"
#include "mcf.h"
#include "simulate.h"
#include "tacos.h"
#include "verify.h"

static cs_algorithm *new_alg(cs_coll_kind kind, int root, int P, int chunks, int steps)
{
    cs_collective c;
    collective_init(&c, kind, root);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "t", P, chunks, steps, &a, &err), CS_OK);
    collective_free(&c);
    return a;
}

static cs_topology *pair(int lanes)
{
    cs_topology *t = topology_new("pair", 2);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 1, lanes, 1.0, 1.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 1, 0, 1, 1.0, 1.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    return t;
}

static cs_topology *line(int P, const int *group_of_rank)
{
    cs_topology *t = topology_new("line", P);
    cs_error err;
    for (int r = 0; r + 1 < P; r++)
        ck_assert_int_eq(topology_add_link(t, r, r + 1, 1, 1.0, 1.0, true, &err), CS_OK);
    if (group_of_rank) {
        for (int g = 0; g < P; g++) {
            int ranks[64], n = 0;
            for (int r = 0; r < P; r++)
                if (group_of_rank[r] == g)
                    ranks[n++] = r;
            if (n)
                ck_assert_int_eq(topology_add_group(t, ranks, n, &err), CS_OK);
        }
    }
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    return t;
}

static int link_index(const cs_topology *t, int s, int d)
{
    int l = topology_find_link(t, s, d);
    ck_assert_int_ge(l, 0);
    return l;
}

START_TEST(two_chunks_on_one_link_serialize_on_one_lane)
{
    /* broadcast of 2 chunks from 0 to 1, both in step 0 (2 rounds); 2000
     * bytes -> chunk 1000 bytes -> 1 + 1000/1000 = 2 us per chunk */
    for (int lanes = 1; lanes <= 2; lanes++) {
        cs_topology *t = pair(lanes);
        cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 2, 2, 1);
        algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
        algorithm_add_send(a, 1, 0, 1, 0, CS_OP_COPY);
        ck_assert_int_eq(algorithm_fit_rounds(a, t, NULL), CS_OK);
        ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
        cs_sim_result r;
        cs_error err;
        ck_assert_int_eq(simulate_algorithm(t, a, 2000.0, &r, &err), CS_OK);
        ck_assert_double_eq_tol(r.chunk_bytes, 1000.0, 1e-9);
        /* one lane: 0-2, 2-4; two lanes: both 0-2 */
        ck_assert_double_eq_tol(r.time_us, lanes == 1 ? 4.0 : 2.0, 1e-9);
        int l = link_index(t, 0, 1), back = link_index(t, 1, 0);
        ck_assert_int_eq(r.nlinks, 2);
        ck_assert_double_eq_tol(r.link_busy_us[l], 4.0, 1e-9);
        ck_assert_double_eq_tol(r.link_utilization[l], 1.0, 1e-9); /* 4 / (T * lanes) */
        ck_assert_double_eq_tol(r.link_utilization[back], 0.0, 1e-12);
        ck_assert_double_eq_tol(r.max_utilization, 1.0, 1e-9);
        ck_assert_double_eq_tol(r.total_bytes, 2000.0, 1e-9);
        ck_assert_double_eq_tol(r.cross_group_bytes, 0.0, 1e-12);
        sim_result_free(&r);
        algorithm_free(a);
        topology_free(t);
    }
}
END_TEST

START_TEST(two_hop_pipeline_overlaps_steps)
{
    /* broadcast of 2 chunks on 0 - 1 - 2, chunk c crosses hop h in step c + h:
     *   c0 0->1 [0,2]; c0 1->2 [2,4] (waits for c0); c1 0->1 [2,4] (lane);
     *   c1 1->2 [4,6] (waits for c1 at rank 1).  Total 6 us; each forward link
     *   is busy 4 of 6 us. */
    cs_topology *t = line(3, NULL);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 2, 3);
    for (int c = 0; c < 2; c++)
        for (int h = 0; h < 2; h++)
            algorithm_add_send(a, c, h, h + 1, c + h, CS_OP_COPY);
    ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
    cs_sim_result r;
    ck_assert_int_eq(simulate_algorithm(t, a, 2000.0, &r, NULL), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 6.0, 1e-9);
    ck_assert_double_eq_tol(r.link_utilization[link_index(t, 0, 1)], 4.0 / 6.0, 1e-9);
    ck_assert_double_eq_tol(r.link_utilization[link_index(t, 1, 2)], 4.0 / 6.0, 1e-9);
    ck_assert_double_eq_tol(r.link_utilization[link_index(t, 1, 0)], 0.0, 1e-12);
    ck_assert_double_eq_tol(r.total_bytes, 4000.0, 1e-9);
    sim_result_free(&r);

    /* steps are not barriers: with both chunks' first hops in step 0 (2
     * rounds) the second hops still start when each chunk arrives:
     *   c0 0->1 [0,2], c1 0->1 [2,4], c0 1->2 [2,4], c1 1->2 [4,6] */
    SEND_SET(a, 2, step, 0);  /* c1 0->1 */
    SEND_SET(a, 3, step, 1);  /* c1 1->2 */
    ck_assert_int_eq(algorithm_fit_rounds(a, t, NULL), CS_OK);
    ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
    ck_assert_int_eq(simulate_algorithm(t, a, 2000.0, &r, NULL), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 6.0, 1e-9);
    sim_result_free(&r);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(reduce_waits_for_all_contributions)
{
    /* reduce to 0 on 0 - 1 - 2: 2->1 [0,2], then 1->0 waits for it [2,4].  Also
     * a leaf 3 on rank 1 (star-shaped second contribution) */
    cs_topology *t = topology_new("tree", 4);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 1, 2, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 1, 3, 1, 2.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_algorithm *a = new_alg(CS_COLL_REDUCE, 0, 4, 1, 2);
    algorithm_add_send(a, 0, 2, 1, 0, CS_OP_REDUCE);
    algorithm_add_send(a, 0, 3, 1, 0, CS_OP_REDUCE);
    algorithm_add_send(a, 0, 1, 0, 1, CS_OP_REDUCE);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    cs_sim_result r;
    /* 1000-byte chunk: 2->1 takes 2 us, 3->1 takes 1 + 0.5 = 1.5 us; 1->0
     * starts at max(2, 1.5) = 2 and ends at 4 */
    ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, &err), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 4.0, 1e-9);
    ck_assert_double_eq_tol(r.link_busy_us[link_index(t, 3, 1)], 1.5, 1e-9);
    sim_result_free(&r);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(shared_set_limits_concurrency)
{
    /* 0 -> 1 and 0 -> 2 on separate links: 2 us; in one shared lane: 4 us */
    for (int shared = 0; shared <= 1; shared++) {
        cs_topology *t = topology_new("star", 3);
        cs_error err;
        ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 1.0, 1.0, true, &err), CS_OK);
        ck_assert_int_eq(topology_add_link(t, 0, 2, 1, 1.0, 1.0, true, &err), CS_OK);
        if (shared) {
            int pairs[2][2] = {{0, 1}, {0, 2}};
            ck_assert_int_eq(topology_add_shared(t, (const int (*)[2])pairs, 2, 1, &err), CS_OK);
        }
        ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
        cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 1);
        algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
        algorithm_add_send(a, 0, 0, 2, 0, CS_OP_COPY);
        cs_sim_result r;
        ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, &err), CS_OK);
        ck_assert_double_eq_tol(r.time_us, shared ? 4.0 : 2.0, 1e-9);
        sim_result_free(&r);
        algorithm_free(a);
        topology_free(t);
    }
}
END_TEST

START_TEST(cross_group_bytes_follow_the_groups)
{
    /* groups {0,1} and {2,3} on the line 0 - 1 - 2 - 3; broadcast from 0 with
     * 2 chunks: each chunk crosses 1->2 once: 2 x 500 of 6 x 500 bytes */
    int groups[4] = {0, 0, 1, 1};
    cs_topology *t = line(4, groups);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 4, 2, 4);
    for (int c = 0; c < 2; c++)
        for (int h = 0; h < 3; h++)
            algorithm_add_send(a, c, h, h + 1, c + h, CS_OP_COPY);
    cs_sim_result r;
    ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, NULL), CS_OK);
    ck_assert_double_eq_tol(r.total_bytes, 3000.0, 1e-9);
    ck_assert_double_eq_tol(r.cross_group_bytes, 1000.0, 1e-9);
    /* 500-byte chunks take 1.5 us per hop: pipeline of 2 chunks over 3 hops
     * ends at (3 + 1) x 1.5 = 6 us */
    ck_assert_double_eq_tol(r.time_us, 6.0, 1e-9);
    sim_result_free(&r);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(timed_schedule_follows_its_dependencies)
{
    /* the pipeline of two_hop_pipeline_overlaps_steps, timed */
    cs_topology *t = line(3, NULL);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 2, 3);
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0, 2);
    algorithm_add_timed_send(a, 1, 0, 1, 1, CS_OP_COPY, 2, 4);
    algorithm_add_timed_send(a, 0, 1, 2, 1, CS_OP_COPY, 2, 4);
    algorithm_add_timed_send(a, 1, 1, 2, 2, CS_OP_COPY, 4, 6);
    ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
    cs_sim_result r;
    ck_assert_int_eq(simulate_algorithm(t, a, 2000.0, &r, NULL), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 6.0, 1e-9);
    sim_result_free(&r);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(timed_schedule_runs_as_soon_as_it_can)
{
    /* broadcast on line:3 (2 us per hop), the sends placed late: 0 -> 1 at
     * [5, 7], 1 -> 2 at [10, 12].  A runtime has no clock: each send starts
     * when its chunk is there and its link free, 0 -> 1 at [0, 2] and
     * 1 -> 2 at [2, 4], so 4 us, while the schedule claims 12 us. */
    cs_topology *t = line(3, NULL);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 2);
    a->timed_chunk_bytes = 1000.0;
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 5, 7);
    algorithm_add_timed_send(a, 0, 1, 2, 1, CS_OP_COPY, 10, 12);
    ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
    cs_sim_result r;
    ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, NULL), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 4.0, 1e-9);
    ck_assert_double_eq_tol(r.scheduled_us, 12.0, 1e-9);
    ck_assert(r.scheduled_size);
    sim_result_free(&r);
    /* at another size the times were not computed for it: the claim is
     * still reported, but not comparable (3000-byte chunks: 4 us a hop) */
    ck_assert_int_eq(simulate_algorithm(t, a, 3000.0, &r, NULL), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 8.0, 1e-9);
    ck_assert(!r.scheduled_size);
    sim_result_free(&r);
    algorithm_free(a);
    /* step schedules claim no time */
    a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 2);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 1, 2, 1, CS_OP_COPY);
    ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, NULL), CS_OK);
    ck_assert_double_eq_tol(r.scheduled_us, 0.0, 1e-12);
    ck_assert(!r.scheduled_size);
    sim_result_free(&r);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* Every send of a verified timed schedule starts, in the simulator, no later
 * than its start_us (simulate.h): so the simulated time at the schedule's own
 * chunk size is at most its latest end_us.  Checked on the timed schedules
 * the methods make: mcf (LP, MILP, greedy, through switch nodes), tacos. */
static void assert_not_later_than_scheduled(const cs_topology *t, const cs_algorithm *a)
{
    cs_error err;
    ck_assert(algorithm_is_timed(a));
    ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s", err.message);
    double bytes = a->timed_chunk_bytes / algorithm_chunk_bytes(a, 1.0);
    cs_sim_result r;
    ck_assert_int_eq(simulate_algorithm(t, a, bytes, &r, &err), CS_OK);
    ck_assert_msg(r.scheduled_size, "%s %s: simulated at %.6g-byte chunks, timed at %.6g",
                  t->name, a->method, r.chunk_bytes, a->timed_chunk_bytes);
    ck_assert_msg(r.time_us <= r.scheduled_us + 1e-6, "%s %s: simulated %.6f us > scheduled %.6f",
                  t->name, a->method, r.time_us, r.scheduled_us);
    sim_result_free(&r);
}

START_TEST(timed_schedules_run_no_later_than_they_claim)
{
    struct {
        const char *topo;
        cs_coll_kind kind;
        int chunks;
    } cases[] = {
        {"dgx1", CS_COLL_ALLTOALL, 2},        /* mcf: the LP rounded */
        {"dgx1", CS_COLL_ALLGATHER, 2},       /* mcf: the greedy / MILP */
        {"ring:5", CS_COLL_BROADCAST, 2},     /* mcf: the MILP */
        {"dgx2,copy=1", CS_COLL_BROADCAST, 4}, /* mcf: through the switch node */
        {"dgx2", CS_COLL_ALLGATHER, 2},       /* mcf on a switch's ports */
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cs_topology *t = NULL;
        cs_error err;
        ck_assert_int_eq(topology_load(cases[i].topo, NULL, &t, &err), CS_OK);
        cs_collective c;
        collective_init(&c, cases[i].kind, collective_kind_is_rooted(cases[i].kind) ? 0 : -1);
        cs_mcf_options mo;
        mcf_options_default(&mo);
        mo.chunks = mo.min_chunks = cases[i].chunks;
        mo.bytes = 1 << 20;
        mo.time_limit_s = 20;
        cs_result *res = NULL;
        ck_assert_msg(mcf_synthesize(t, &c, &mo, &res, &err) == CS_OK, "%s", err.message);
        assert_not_later_than_scheduled(t, res->algs[0]);
        result_free(res);
        cs_tacos_options to;
        tacos_options_default(&to);
        to.chunks = cases[i].chunks;
        to.bytes = 1 << 20;
        ck_assert_msg(tacos_synthesize(t, &c, &to, &res, &err) == CS_OK, "%s", err.message);
        for (int k = 0; k < res->nalgs; k++)
            if (algorithm_is_timed(res->algs[k]))
                assert_not_later_than_scheduled(t, res->algs[k]);
        result_free(res);
        topology_free(t);
    }
}
END_TEST

START_TEST(ring_allgather_matches_alpha_beta_on_a_ring)
{
    /* ring allgather on a unidirectional ring of P: P-1 hops, each 1 + L/1000;
     * with C = 1 every step is one chunk per link, so T = (P-1)(1 + L/1000),
     * which is the alpha-beta cost S*alpha + (R/C) L beta */
    const int P = 6;
    cs_topology *t = topology_new("uni", P);
    cs_error err;
    for (int r = 0; r < P; r++)
        ck_assert_int_eq(topology_add_link(t, r, (r + 1) % P, 1, 1.0, 1.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_algorithm *a = new_alg(CS_COLL_ALLGATHER, -1, P, 1, P - 1);
    for (int s = 0; s < P - 1; s++)
        for (int r = 0; r < P; r++)
            algorithm_add_send(a, ((r - s) % P + P) % P, r, (r + 1) % P, s, CS_OP_COPY);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    cs_sim_result r;
    ck_assert_int_eq(simulate_algorithm(t, a, 4000.0, &r, &err), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 5 * 5.0, 1e-9);
    ck_assert_double_eq_tol(r.time_us, algorithm_cost_us(a, t, 4000.0), 1e-9);
    ck_assert_double_eq_tol(r.max_utilization, 1.0, 1e-9);
    /* ideal: diameter 5 hops x 1 us + (P-1) L / 1000 B/us = 5 + 20 */
    ck_assert_double_eq_tol(r.ideal_us, 25.0, 1e-9);
    sim_result_free(&r);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(ideal_bound_by_hand_for_each_kind)
{
    /* bidirectional ring of 4, 1 GB/s, alpha 1: diameter 2, every rank has
     * 2 x 1000 B/us in and out; L = 6000 bytes */
    cs_topology *t = topology_new("ring4", 4);
    cs_error err;
    for (int r = 0; r < 4; r++)
        ck_assert_int_eq(topology_add_link(t, r, (r + 1) % 4, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    struct { cs_coll_kind kind; double want; } cases[] = {
        {CS_COLL_ALLGATHER, 2 + 3 * 6000 / 2000.0},          /* (P-1) L in */
        {CS_COLL_REDUCESCATTER, 2 + 3 * 6000 / 2000.0},      /* (P-1) L out */
        {CS_COLL_ALLREDUCE, 2 + 2.0 * 3 / 4 * 6000 / 2000.0}, /* 2(P-1)/P L */
        {CS_COLL_BROADCAST, 2 + 6000 / 2000.0},               /* L */
        {CS_COLL_REDUCE, 2 + 6000 / 2000.0},
        {CS_COLL_GATHER, 2 + 3 * 6000 / 2000.0},             /* root takes (P-1) L */
        {CS_COLL_SCATTER, 2 + 3 * 6000 / 2000.0},
        {CS_COLL_ALLTOALL, 2 + 3 * 6000 / 2000.0},
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        cs_collective c;
        collective_init(&c, cases[k].kind, collective_kind_is_rooted(cases[k].kind) ? 1 : -1);
        ck_assert_msg(fabs(simulate_ideal_us(t, &c, 3, 6000.0) - cases[k].want) < 1e-9,
                      "%s: %g, want %g", collective_kind_name(cases[k].kind),
                      simulate_ideal_us(t, &c, 3, 6000.0), cases[k].want);
        collective_free(&c);
    }
    /* custom: chunk 0 starts at rank 0 and must reach 1 and 2; with C = 2 the
     * chunk is 3000 bytes: ranks 1 and 2 receive 3000, rank 0 sends 3000, at
     * 2000 B/us: 2 + 1.5 */
    const char *doc = "{\"kind\": \"custom\", \"global_chunks\": 1, \"pre\": [[0, 0]],"
                      " \"post\": [[0, 1], [0, 2], [0, 0]]}";
    json_t *j = json_loads(doc, 0, NULL);
    cs_collective c;
    ck_assert_int_eq(collective_from_json(j, &c, &err), CS_OK);
    json_decref(j);
    ck_assert_double_eq_tol(simulate_ideal_us(t, &c, 2, 6000.0), 3.5, 1e-9);
    collective_free(&c);
    topology_free(t);
}
END_TEST

START_TEST(bad_input_is_refused)
{
    cs_topology *t = pair(1);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 2, 1, 1);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    cs_sim_result r;
    cs_error err;
    ck_assert_int_eq(simulate_algorithm(t, a, -1.0, &r, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "bytes");
    SEND_SET(a, 0, step, 4);
    ck_assert_int_eq(simulate_algorithm(t, a, 1.0, &r, &err), CS_EINVAL);
    ck_assert_ptr_null(r.link_busy_us);
    algorithm_free(a);
    a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 1);
    ck_assert_int_eq(simulate_algorithm(t, a, 1.0, &r, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "ranks");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(large_schedule_simulates_quickly)
{
    /* ring allgather on ring:512 with 5 chunks: 1,308,160 sends, enough for
     * several streaming batches and worker threads */
    cs_topology *t = NULL;
    cs_error err;
    ck_assert_int_eq(topology_builtin("ring:512", &t, &err), CS_OK);
    const int P = 512, C = 5;
    cs_algorithm *a = new_alg(CS_COLL_ALLGATHER, -1, P, C, P - 1);
    for (int s = 0; s < P - 1; s++)
        for (int r = 0; r < P; r++)
            for (int i = 0; i < C; i++)
                algorithm_add_send(a, (long)i * P + ((r - s) % P + P) % P, r, (r + 1) % P, s,
                                   CS_OP_COPY);
    ck_assert_int_gt(a->nsends, 1L << 20);
    double t0 = cs_now();
    cs_sim_result r;
    ck_assert_int_eq(simulate_algorithm(t, a, 1e6, &r, &err), CS_OK);
    double dt = cs_now() - t0;
    ck_assert_msg(dt < 5.0, "simulation took %.2f s", dt);
    /* each hop moves C chunks of 2e5 bytes back to back on one lane: the
     * pipeline runs at (P-1) x C x (alpha + chunk / bw) plus nothing else */
    double hop = t->links[0].alpha_us + 2e5 / (t->links[0].gbps * 1e3);
    ck_assert_double_eq_tol(r.time_us, (P - 1) * C * hop, 1e-6 * r.time_us);
    sim_result_free(&r);
    /* the same schedule timed as that pipeline (send i of step s over
     * [(sC + i) hop, (sC + i + 1) hop]), in reverse index order so that the
     * simulator needs its own processing order: the same time */
    cs_algorithm *b = new_alg(CS_COLL_ALLGATHER, -1, P, C, P - 1);
    for (long k = a->nsends - 1; k >= 0; k--) {
        cs_send x = algorithm_send(a, k);
        long slot = (long)x.step * C + x.chunk / P;
        ck_assert_int_eq(algorithm_add_timed_send(b, x.chunk, x.src, x.dst, x.step, x.op,
                                                  slot * hop, (slot + 1) * hop), CS_OK);
    }
    ck_assert_int_eq(algorithm_verify(t, b, &err), CS_OK);
    ck_assert_int_eq(simulate_algorithm(t, b, 1e6, &r, &err), CS_OK);
    ck_assert_double_eq_tol(r.time_us, (P - 1) * C * hop, 1e-6 * r.time_us);
    sim_result_free(&r);
    algorithm_free(b);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* One switch of 3 ranks: 1 GB/s ports, alpha 1 us, so a 1000-byte chunk
 * takes 2 us at the full port rate and 3 us at half of it. */
static cs_topology *switch3(void)
{
    cs_topology *t = topology_new("sw3", 3);
    cs_error err;
    int ranks[3] = {0, 1, 2};
    ck_assert_int_eq(topology_add_switch(t, "sw", ranks, 3, 1.0, 1.0, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    return t;
}

START_TEST(switch_ports_carry_timed_sends_at_their_scheduled_rates)
{
    cs_topology *t = switch3();
    cs_error err;
    cs_sim_result r;
    /* 0 -> 1 and 0 -> 2 at once through rank 0's port, half its rate each */
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 1);
    a->timed_chunk_bytes = 1000.0;
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0.0, 3.0);
    algorithm_add_timed_send(a, 0, 0, 2, 0, CS_OP_COPY, 0.0, 3.0);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, &err), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 3.0, 1e-9);
    /* busy time counts the share of the link's bandwidth: 3 us at half */
    ck_assert_double_eq_tol(r.link_busy_us[link_index(t, 0, 1)], 1.5, 1e-9);
    sim_result_free(&r);
    /* 4000-byte chunks at 500 bytes/us: alpha + 8 us each, still together */
    ck_assert_int_eq(simulate_algorithm(t, a, 4000.0, &r, &err), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 9.0, 1e-9);
    sim_result_free(&r);
    /* the same sends without times: one chunk at a time at the full rate */
    algorithm_free(a);
    a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 1);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 0, 2, 0, CS_OP_COPY);
    ck_assert_int_eq(algorithm_fit_rounds(a, t, &err), CS_OK);
    ck_assert_int_eq(a->rounds, 2);
    ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, &err), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 4.0, 1e-9);
    sim_result_free(&r);
    algorithm_free(a);

    /* mixed rates on one port: 0 -> 1 at full rate [0, 2], then 0 -> 2 and
     * 1 -> 2 at half rate each [2, 5], sharing rank 2's ingress port; rank 0's
     * port has lanes of half its bandwidth and the full-rate send takes two */
    a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 2);
    a->timed_chunk_bytes = 1000.0;
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0.0, 2.0);
    algorithm_add_timed_send(a, 0, 0, 2, 1, CS_OP_COPY, 2.0, 5.0);
    algorithm_add_timed_send(a, 0, 1, 2, 1, CS_OP_COPY, 2.0, 5.0);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, &err), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 5.0, 1e-9);
    sim_result_free(&r);
    algorithm_free(a);

    /* unequal shares at once: 0 -> 1 at 600 B/us (alpha + 1.667 us) and
     * 0 -> 2 at 400 B/us (alpha + 2.5 us) through rank 0's port, rates
     * summing to its 1000 B/us: the verifier accepts them together, so they
     * run together, ending at 3.5 us (the port's lanes used to round 0.6 of
     * it up to 2 of its 2 lanes and serialize them: 6.17 us) */
    a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 1);
    a->timed_chunk_bytes = 1000.0;
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0.0, 1.0 + 1000.0 / 600);
    algorithm_add_timed_send(a, 0, 0, 2, 0, CS_OP_COPY, 0.0, 3.5);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    ck_assert_int_eq(simulate_algorithm(t, a, 1000.0, &r, &err), CS_OK);
    ck_assert_double_eq_tol(r.time_us, 3.5, 1e-9);
    ck_assert_double_eq_tol(r.scheduled_us, 3.5, 1e-9);
    sim_result_free(&r);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

static Suite *simulate_suite(void)
{
    Suite *s = suite_create("simulate");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, two_chunks_on_one_link_serialize_on_one_lane);
    tcase_add_test(tc, two_hop_pipeline_overlaps_steps);
    tcase_add_test(tc, reduce_waits_for_all_contributions);
    tcase_add_test(tc, shared_set_limits_concurrency);
    tcase_add_test(tc, cross_group_bytes_follow_the_groups);
    tcase_add_test(tc, timed_schedule_follows_its_dependencies);
    tcase_add_test(tc, timed_schedule_runs_as_soon_as_it_can);
    tcase_add_test(tc, timed_schedules_run_no_later_than_they_claim);
    tcase_add_test(tc, switch_ports_carry_timed_sends_at_their_scheduled_rates);
    tcase_add_test(tc, ring_allgather_matches_alpha_beta_on_a_ring);
    tcase_add_test(tc, ideal_bound_by_hand_for_each_kind);
    tcase_add_test(tc, bad_input_is_refused);
    tcase_add_test(tc, large_schedule_simulates_quickly);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(simulate_suite)
