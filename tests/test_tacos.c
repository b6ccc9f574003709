/*
 * Tests of TACOS synthesis (tacos.h): every collective on direct, switched and
 * heterogeneous topologies gives verified algorithms; seeds make results
 * reproducible whatever the thread count; small cases match spans and times
 * worked out by hand; bad options get clear errors.
 */
#include <math.h>
#include <string.h>

#include "check_main.h"
#include "cluster_testutil.h"
#include "simulate.h"
#include "tacos.h"
#include "verify.h"
#include "topology_testutil.h"

static double stat_num(const cs_result *r, const char *key)
{
    json_t *v = json_object_get(r->stats, key);
    ck_assert_msg(v != NULL, "stats lack %s", key);
    return json_number_value(v);
}

/* The topology the algorithm runs on: the input, or its unwinding. */
static cs_topology *runs_on(const cs_topology *t, const cs_result *r)
{
    cs_topology *u = NULL;
    cs_error err;
    if (t->nswitches == 0) {
        ck_assert_int_eq(topology_clone(t, &u, &err), CS_OK);
        return u;
    }
    int d = (int)stat_num(r, "switch_degree");
    ck_assert_int_eq(topology_unwind_switches(t, d, &u, &err), CS_OK);
    return u;
}

static cs_result *solve(const cs_topology *t, const cs_collective *c, int chunks, int trials,
                        uint64_t seed, int threads)
{
    cs_tacos_options opt;
    tacos_options_default(&opt);
    opt.chunks = chunks;
    opt.trials = trials;
    opt.seed = seed;
    opt.threads = threads;
    cs_result *r = NULL;
    cs_error err;
    int rc = tacos_synthesize(t, c, &opt, &r, &err);
    ck_assert_msg(rc == CS_OK, "%s %s: %s", t->name, collective_kind_name(c->kind), err.message);
    return r;
}

static const char *every_topology[] = {
    "ring:6", "mesh2d:3x3", "torus2d:4x4", "hypercube:3", "dgx1", "dgx2", "switch2d:4x2",
    "ndv2:2", "rfs3d:2x2x4",
};

/* Checks one result independently: one algorithm, method tacos, verified on
 * the caller's topology (switches are ports, whatever TACOS unwound them
 * into) and on the unwinding it was matched on, timed sends ordered by step
 * and in time order, and statistics. */
static void check_result(const cs_topology *t, const cs_collective *c, const cs_result *r)
{
    ck_assert_int_eq(r->nalgs, 1);
    const cs_algorithm *a = r->algs[0];
    ck_assert_str_eq(a->method, "tacos");
    ck_assert_int_eq(a->collective.kind, c->kind);
    cs_topology *u = runs_on(t, r);
    cs_error err;
    ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s %s: %s", t->name,
                  collective_kind_name(c->kind), err.message);
    ck_assert_msg(algorithm_verify(u, a, &err) == CS_OK, "%s %s unwound: %s", t->name,
                  collective_kind_name(c->kind), err.message);
    ck_assert(a->timed_chunk_bytes > 0);
    for (int s = 0; s < a->steps; s++)
        ck_assert_int_eq(a->rounds_per_step[s], 1);
    ck_assert_int_eq(a->rounds, a->steps);
    for (long i = 0; i < a->nsends; i++) {
        ck_assert(isfinite(algorithm_send_start_us(a, i)) && algorithm_send_end_us(a, i) > algorithm_send_start_us(a, i));
        ck_assert(algorithm_send_step(a, i) >= 0 && algorithm_send_step(a, i) < a->steps);
        /* sends come in (start, end) order: the verifier and simulator walk
         * them without an index of their own */
        if (i > 0) {
            double s0 = algorithm_send_start_us(a, i - 1), s1 = algorithm_send_start_us(a, i);
            ck_assert(s0 < s1 || (s0 == s1 && algorithm_send_end_us(a, i - 1) <=
                                                 algorithm_send_end_us(a, i)));
        }
    }
    /* quality can never beat the ideal bound */
    double ratio = stat_num(r, "ratio_to_ideal");
    ck_assert_msg(ratio > 0 && ratio <= 1.0 + 1e-9, "%s %s ratio %g", t->name,
                  collective_kind_name(c->kind), ratio);
    ck_assert_int_eq((long)stat_num(r, "sends"), a->nsends);
    ck_assert(stat_num(r, "peak_rss_kb") > 0);
    topology_free(u);
}

START_TEST(every_collective_on_every_topology_verifies)
{
    cs_topology *t = test_topology(every_topology[_i]);
    for (int k = 0; k < CS_COLL_KIND_COUNT; k++) {
        cs_collective c;
        if (k == CS_COLL_CUSTOM) {
            /* rank 0's chunk to the last rank, the last rank's chunk to ranks 1 and 2 */
            int P = t->ranks;
            int pre[] = {0, 0, 1, P - 1};
            int post[] = {0, P - 1, 1, 1, 1, 2};
            memset(&c, 0, sizeof c);
            c.kind = CS_COLL_CUSTOM;
            c.root = -1;
            c.custom_global_chunks = 2;
            c.npre = 2;
            c.npost = 3;
            c.pre = malloc(sizeof pre);
            c.post = malloc(sizeof post);
            memcpy(c.pre, pre, sizeof pre);
            memcpy(c.post, post, sizeof post);
            cs_error err;
            ck_assert_int_eq(collective_validate(&c, P, &err), CS_OK);
        } else {
            collective_init(&c, (cs_coll_kind)k, collective_kind_is_rooted((cs_coll_kind)k) ? 1 : -1);
        }
        int chunks = (k == CS_COLL_ALLTOALL || k == CS_COLL_ALLREDUCE) ? 1 : 2;
        cs_result *r = solve(t, &c, chunks, 2, 7, 0);
        check_result(t, &c, r);
        result_free(r);
        collective_free(&c);
    }
    topology_free(t);
}
END_TEST

static void assert_same_sends(const cs_algorithm *a, const cs_algorithm *b)
{
    ck_assert_int_eq(a->nsends, b->nsends);
    ck_assert_int_eq(a->steps, b->steps);
    for (long i = 0; i < a->nsends; i++) {
        const cs_send xv = algorithm_send(a, i), yv = algorithm_send(b, i), *x = &xv, *y = &yv;
        ck_assert(x->chunk == y->chunk && x->src == y->src && x->dst == y->dst &&
                  x->step == y->step && x->op == y->op);
        /* bit-identical times */
        ck_assert(memcmp(&x->start_us, &y->start_us, sizeof(double)) == 0);
        ck_assert(memcmp(&x->end_us, &y->end_us, sizeof(double)) == 0);
    }
}

START_TEST(same_seed_same_sends_whatever_the_threads)
{
    const char *specs[] = {"torus2d:4x4", "ndv2:2"};
    for (int k = 0; k < 2; k++) {
        cs_topology *t = test_topology(specs[k]);
        cs_collective c;
        collective_init(&c, CS_COLL_ALLREDUCE, -1);
        cs_result *one = solve(t, &c, 2, 6, 42, 1);
        cs_result *two = solve(t, &c, 2, 6, 42, 2);
        cs_result *again = solve(t, &c, 2, 6, 42, 3);
        assert_same_sends(one->algs[0], two->algs[0]);
        assert_same_sends(one->algs[0], again->algs[0]);
        result_free(one);
        result_free(two);
        result_free(again);
        topology_free(t);
    }
}
END_TEST

/* With one trial and spare threads, a trial's destinations are matched in
 * parallel (1,024 ranks and up): the sends must not depend on it. */
START_TEST(parallel_matching_gives_the_same_sends)
{
    cs_topology *t = test_topology("mesh2d:32x32");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_result *one = solve(t, &c, 1, 1, 9, 1);
    cs_result *two = solve(t, &c, 1, 1, 9, 2);
    cs_result *four = solve(t, &c, 1, 1, 9, 4);
    assert_same_sends(one->algs[0], two->algs[0]);
    assert_same_sends(one->algs[0], four->algs[0]);
    ck_assert_str_eq(json_string_value(json_object_get(one->stats, "schedule_hash")),
                     json_string_value(json_object_get(four->stats, "schedule_hash")));
    result_free(one);
    result_free(two);
    result_free(four);
    topology_free(t);
}
END_TEST

/* Issue 11: on a 16-node cluster (8-GPU NVSwitch per node, 8 rail
 * switches), a TACOS schedule matched on unwound switches is valid on the
 * cluster as the caller wrote it, and the simulator replays it at the rates
 * it was scheduled with (so no slower than its own makespan). */
START_TEST(cluster_schedules_pass_the_verifier_and_simulator_on_the_switches)
{
    char *doc = cluster_topology_json(16, 8, 450.0, 50.0);
    cs_topology *t = NULL;
    cs_error err;
    ck_assert_int_eq(topology_parse(doc, strlen(doc), NULL, &t, &err), CS_OK);
    free(doc);
    cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_ALLREDUCE};
    for (int k = 0; k < 2; k++) {
        cs_collective c;
        collective_init(&c, kinds[k], -1);
        cs_result *r = solve(t, &c, 1, 2, 1, 0);
        check_result(t, &c, r);
        const cs_algorithm *a = r->algs[0];
        cs_sim_result sr;
        ck_assert_int_eq(simulate_algorithm(t, a, 64.0 * 1024 * 1024, &sr, &err), CS_OK);
        ck_assert_msg(sr.time_us <= stat_num(r, "schedule_time_us") * (1 + 1e-9),
                      "%s: simulated %.1f us, scheduled %.1f us", collective_kind_name(kinds[k]),
                      sr.time_us, stat_num(r, "schedule_time_us"));
        ck_assert_double_eq_tol(sr.time_us, stat_num(r, "sim_time_us"), 1e-6);
        sim_result_free(&sr);
        result_free(r);
        collective_free(&c);
    }
    topology_free(t);
}
END_TEST

/* Trials that run at once each record their sends; beyond two at once the
 * winner is run again instead, and its sends are the same. */
START_TEST(winner_rerun_records_the_same_sends)
{
    cs_topology *t = test_topology("mesh2d:6x6");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_result *two = solve(t, &c, 2, 4, 5, 2), *four = solve(t, &c, 2, 4, 5, 4);
    ck_assert_str_eq(json_string_value(json_object_get(two->stats, "recording")), "in trials");
    ck_assert_str_eq(json_string_value(json_object_get(four->stats, "recording")),
                     "winner re-run");
    assert_same_sends(two->algs[0], four->algs[0]);
    result_free(two);
    result_free(four);
    topology_free(t);
}
END_TEST

START_TEST(different_seeds_explore_different_schedules)
{
    cs_topology *t = test_topology("torus2d:4x4");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_result *a = solve(t, &c, 2, 1, 1, 1);
    cs_result *b = solve(t, &c, 2, 1, 2, 1);
    const cs_algorithm *x = a->algs[0], *y = b->algs[0];
    bool differ = x->nsends != y->nsends;
    for (long i = 0; !differ && i < x->nsends; i++)
        differ = algorithm_send_chunk(x, i) != algorithm_send_chunk(y, i) || algorithm_send_src(x, i) != algorithm_send_src(y, i);
    ck_assert(differ);
    result_free(a);
    result_free(b);
    topology_free(t);
}
END_TEST

/* A directed ring of 4: each chunk needs 3 hops and every link carries one
 * chunk per span, so allgather with 1 chunk takes exactly 3 spans of
 * alpha + bytes/bw each. */
START_TEST(directed_ring_allgather_takes_three_spans)
{
    cs_topology *t = topology_new("dring4", 4);
    cs_error err;
    for (int i = 0; i < 4; i++)
        ck_assert_int_eq(topology_add_link(t, i, (i + 1) % 4, 1, 10.0, 2.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_tacos_options opt;
    tacos_options_default(&opt);
    opt.bytes = 1e6; /* 1 MB chunks: 2 us + 1e6 / 1e4 us = 102 us per hop */
    cs_result *r = NULL;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &r, &err), CS_OK);
    const cs_algorithm *a = r->algs[0];
    ck_assert_int_eq(a->steps, 3);
    ck_assert_int_eq(a->nsends, 12); /* 4 chunks x 3 ranks */
    ck_assert_double_eq_tol(stat_num(r, "schedule_time_us"), 306.0, 1e-9);
    ck_assert_double_eq_tol(stat_num(r, "sim_time_us"), 306.0, 1e-9);
    for (long i = 0; i < a->nsends; i++)
        ck_assert_double_eq_tol(algorithm_send_start_us(a, i), 102.0 * algorithm_send_step(a, i), 1e-9);
    result_free(r);
    topology_free(t);
}
END_TEST

/* On a line of P ranks a broadcast from the end rank needs P-1 spans, and so
 * does an allgather (the end ranks' chunks cross the whole line); a
 * reduce to the end is the same tree backwards. */
START_TEST(line_needs_p_minus_one_spans_from_the_end)
{
    cs_topology *t = test_topology("line:6");
    cs_coll_kind kinds[] = {CS_COLL_BROADCAST, CS_COLL_ALLGATHER, CS_COLL_REDUCE, CS_COLL_GATHER};
    for (int k = 0; k < 4; k++) {
        cs_collective c;
        collective_init(&c, kinds[k], collective_kind_is_rooted(kinds[k]) ? 0 : -1);
        cs_result *r = solve(t, &c, 1, 2, 3, 0);
        int want = 5;
        ck_assert_msg(r->algs[0]->steps == want, "%s: %d steps", collective_kind_name(kinds[k]),
                      r->algs[0]->steps);
        result_free(r);
    }
    topology_free(t);
}
END_TEST

/* A chunk held by ranks 0 and 1 that rank 2 needs: the link from 1 is 10x
 * faster than the one from 0, so the match takes it. */
START_TEST(prefers_the_cheapest_free_link)
{
    cs_topology *t = topology_new("het3", 3);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 2, 1, 5.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 1, 2, 1, 50.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_collective c;
    memset(&c, 0, sizeof c);
    c.kind = CS_COLL_CUSTOM;
    c.root = -1;
    c.custom_global_chunks = 1;
    int pre[] = {0, 0, 0, 1}, post[] = {0, 2};
    c.npre = 2;
    c.npost = 1;
    c.pre = malloc(sizeof pre);
    c.post = malloc(sizeof post);
    memcpy(c.pre, pre, sizeof pre);
    memcpy(c.post, post, sizeof post);
    ck_assert_int_eq(collective_validate(&c, 3, &err), CS_OK);
    for (uint64_t seed = 1; seed <= 4; seed++) {
        cs_result *r = solve(t, &c, 1, 1, seed, 1);
        ck_assert_int_eq(r->algs[0]->nsends, 1);
        ck_assert_int_eq(algorithm_send_src(r->algs[0], 0), 1);
        /* 1 us + 64 MiB / 50e3 B/us */
        ck_assert_double_eq_tol(stat_num(r, "schedule_time_us"), 1.0 + 67108864.0 / 50e3, 1e-6);
        result_free(r);
    }
    collective_free(&c);
    topology_free(t);
}
END_TEST

/* DGX-1 allgather with 6 chunks: the SMT optimum (3,7,6) costs
 * 3 alpha + 7/6 L beta = 2.1 us + 7/6 * 2^30 / 25e3 us; every TACOS transfer
 * pays alpha, so the best possible is 7 spans of alpha + L/6 beta.  Within 3%. */
START_TEST(dgx1_allgather_is_near_the_smt_optimum)
{
    cs_topology *t = test_topology("dgx1");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_tacos_options opt;
    tacos_options_default(&opt);
    opt.chunks = 6;
    opt.trials = 8;
    opt.bytes = 1073741824.0;
    cs_result *r = NULL;
    cs_error err;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &r, &err), CS_OK);
    double smt = 3 * 0.7 + 7.0 / 6.0 * 1073741824.0 / 25e3;
    double sim = stat_num(r, "sim_time_us");
    ck_assert_msg(sim <= 1.03 * smt, "sim %.1f us vs smt (3,7,6) %.1f us", sim, smt);
    result_free(r);
    topology_free(t);
}
END_TEST

/* 2D mesh allgather with 1 chunk: a corner has 2 in-links and must receive
 * P-1 chunks, so at least ceil((P-1)/2) spans; TACOS reaches it. */
START_TEST(mesh_allgather_reaches_the_corner_bound)
{
    cs_topology *t = test_topology("mesh2d:8x8");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_result *r = solve(t, &c, 1, 2, 1, 0);
    ck_assert_int_eq(r->algs[0]->steps, 32);
    ck_assert(stat_num(r, "ratio_to_ideal") >= 0.9);
    result_free(r);
    topology_free(t);
}
END_TEST

/* Binary hypercube of 2^d ranks, 1 chunk each: every rank must receive 2^d - 1
 * chunks over d in-links of one lane, at most one chunk per link per span, so
 * an allgather needs at least ceil((2^d - 1) / d) spans of alpha + L/bw each:
 * 32 for d = 8, 57 for d = 9.  Reaching it takes rarest-first choice (plain
 * oldest-first ends one span later), which used to be switched off above
 * 2^15 ranks x chunks: it must run at these sizes and say so. */
START_TEST(hypercube_allgather_reaches_the_in_link_bound)
{
    const struct { const char *spec; int d; } cases[] = {{"hypercube:8", 8}, {"hypercube:9", 9}};
    for (int k = 0; k < 2; k++) {
        cs_topology *t = test_topology(cases[k].spec);
        cs_collective c;
        collective_init(&c, CS_COLL_ALLGATHER, -1);
        cs_result *r = solve(t, &c, 1, 4, 1, 0);
        int P = 1 << cases[k].d, bound = (P - 2 + cases[k].d) / cases[k].d;
        const cs_link *l = &t->links[0];
        double span_us = l->alpha_us + 64.0 * 1024 * 1024 / (l->gbps * 1e3);
        ck_assert_msg(r->algs[0]->steps == bound, "%s: %d spans, bound %d", cases[k].spec,
                      r->algs[0]->steps, bound);
        ck_assert_double_eq_tol(stat_num(r, "sim_time_us"), bound * span_us, 1e-6 * bound * span_us);
        ck_assert(json_is_true(json_object_get(r->stats, "rarest_first")));
        check_result(t, &c, r);
        result_free(r);
        topology_free(t);
    }
}
END_TEST

/* switch2d:8x4 (4 nodes of 8 GPUs; a 300 GB/s scale-up switch per node, a
 * 25 GB/s scale-out switch per GPU index; alpha 0.5 us), 1 chunk per rank.
 * A schedule worked out by hand: the scale-out switches as rings of 4
 * (GPU i of node n sends to GPU i of node n+1), each forwarding what it
 * received, so a node has every chunk after 3 scale-out transfers of
 * alpha + L/25 GB/s; each node spreads each batch of 8 new chunks over a ring
 * of its 8 GPUs in 7 transfers of alpha + L/300 GB/s, overlapped with the next
 * scale-out transfer, so the last batch ends 7 such transfers after the
 * third.  Allgather: 3 a + 7 b (9,624 us at 64 MiB; TACOS took 16,107 us
 * before its slow links learnt to skip chunks their node already has).
 * Allreduce (32 chunks of L/32): the reducescatter mirrors it, so twice that
 * with the smaller chunks.  TACOS must do at least as well, and no schedule
 * beats the node's import: 24 chunks over 8 ports of 25 GB/s. */
START_TEST(switch2d_matches_the_ring_of_rings_by_hand)
{
    cs_topology *t = test_topology("switch2d:8x4");
    const double L = 64.0 * 1024 * 1024;
    cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_ALLREDUCE};
    for (int k = 0; k < 2; k++) {
        cs_collective c;
        collective_init(&c, kinds[k], -1);
        cs_result *r = solve(t, &c, 1, 4, 1, 0);
        check_result(t, &c, r);
        double chunk = kinds[k] == CS_COLL_ALLGATHER ? L : L / 32;
        double a = 0.5 + chunk / 25e3, b = 0.5 + chunk / 300e3;
        double hand = (kinds[k] == CS_COLL_ALLGATHER ? 1 : 2) * (3 * a + 7 * b);
        double import = (kinds[k] == CS_COLL_ALLGATHER ? 1 : 2) * 24 * chunk / 200e3;
        double sim = stat_num(r, "sim_time_us");
        ck_assert_msg(sim <= hand * (1 + 1e-9), "%s: %.3f us, by hand %.3f us",
                      collective_kind_name(kinds[k]), sim, hand);
        ck_assert_msg(sim >= import, "%s: %.3f us beats the import bound %.3f us",
                      collective_kind_name(kinds[k]), sim, import);
        result_free(r);
    }
    topology_free(t);
}
END_TEST

START_TEST(statistics_only_run_matches_the_kept_schedule)
{
    cs_topology *t = test_topology("torus2d:4x4");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_tacos_options opt;
    tacos_options_default(&opt);
    opt.trials = 3;
    cs_result *kept = NULL, *stats = NULL;
    cs_error err;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &kept, &err), CS_OK);
    opt.keep_sends = false;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &stats, &err), CS_OK);
    ck_assert_int_eq(stats->nalgs, 0);
    ck_assert_double_eq(stat_num(stats, "schedule_time_us"), stat_num(kept, "schedule_time_us"));
    ck_assert_int_eq((long)stat_num(stats, "sends"), kept->algs[0]->nsends);
    result_free(kept);
    result_free(stats);
    topology_free(t);
}
END_TEST

static void count_progress(void *ctx, const cs_progress_event *ev)
{
    ck_assert_str_eq(ev->method, "tacos");
    (*(int *)ctx)++;
}

START_TEST(progress_reports_every_trial_and_cancel_stops)
{
    cs_topology *t = test_topology("ring:8");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_tacos_options opt;
    tacos_options_default(&opt);
    opt.trials = 5;
    int calls = 0;
    opt.progress = count_progress;
    opt.progress_ctx = &calls;
    cs_result *r = NULL;
    cs_error err;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &r, &err), CS_OK);
    /* ring:8 equals its reverse: one allgather search serves both phases */
    ck_assert_int_eq(calls, 5);
    result_free(r);
    /* a directed ring does not: 5 trials of each phase */
    cs_topology *dring = topology_new("dring5", 5);
    for (int i = 0; i < 5; i++)
        ck_assert_int_eq(topology_add_link(dring, i, (i + 1) % 5, 1, 10.0, 1.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(dring, &err), CS_OK);
    calls = 0;
    ck_assert_int_eq(tacos_synthesize(dring, &c, &opt, &r, &err), CS_OK);
    ck_assert_int_eq(calls, 10);
    ck_assert_int_eq(algorithm_verify(dring, r->algs[0], &err), CS_OK);
    result_free(r);
    topology_free(dring);
    opt.progress = NULL;
    opt.cancel = cs_cancel_new();
    cs_cancel_request(opt.cancel);
    cs_topology *big = test_topology("mesh2d:32x32");
    ck_assert_int_eq(tacos_synthesize(big, &c, &opt, &r, &err), CS_ECANCELLED);
    ck_assert_ptr_null(r);
    cs_cancel_free(opt.cancel);
    topology_free(big);
    topology_free(t);
}
END_TEST

START_TEST(bad_options_are_named)
{
    cs_topology *t = test_topology("dgx2");
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_tacos_options opt;
    cs_result *r = NULL;
    cs_error err;
    tacos_options_default(&opt);
    opt.chunks = 0;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &r, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "options.chunks");
    tacos_options_default(&opt);
    opt.trials = 0;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &r, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "options.trials");
    tacos_options_default(&opt);
    opt.bytes = -1;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &r, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "options.bytes");
    tacos_options_default(&opt);
    opt.switch_degree = 16; /* dgx2's switch has 16 ranks: degrees 1..15 */
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &r, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "options.switch_degree");
    ck_assert_ptr_null(r);
    /* a custom chunk nobody starts with can never arrive */
    cs_topology *ring = test_topology("ring:4");
    cs_collective orphan;
    memset(&orphan, 0, sizeof orphan);
    orphan.kind = CS_COLL_CUSTOM;
    orphan.root = -1;
    orphan.custom_global_chunks = 2;
    int pre[] = {0, 0}, post[] = {0, 2, 1, 3};
    orphan.npre = 1;
    orphan.npost = 2;
    orphan.pre = malloc(sizeof pre);
    orphan.post = malloc(sizeof post);
    memcpy(orphan.pre, pre, sizeof pre);
    memcpy(orphan.post, post, sizeof post);
    tacos_options_default(&opt);
    int rc = tacos_synthesize(ring, &orphan, &opt, &r, &err);
    ck_assert_msg(rc == CS_EUNSAT || rc == CS_EINVAL, "rc %d", rc);
    ck_assert_ptr_null(r);
    collective_free(&orphan);
    topology_free(ring);
    /* a chosen degree is used and reported */
    tacos_options_default(&opt);
    opt.switch_degree = 3;
    ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &r, &err), CS_OK);
    ck_assert_int_eq((int)stat_num(r, "switch_degree"), 3);
    result_free(r);
    topology_free(t);
}
END_TEST

static Suite *tacos_suite(void)
{
    Suite *s = suite_create("tacos");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, every_collective_on_every_topology_verifies, 0,
                        (int)(sizeof every_topology / sizeof every_topology[0]));
    tcase_add_test(tc, same_seed_same_sends_whatever_the_threads);
    tcase_add_test(tc, cluster_schedules_pass_the_verifier_and_simulator_on_the_switches);
    tcase_add_test(tc, winner_rerun_records_the_same_sends);
    tcase_add_test(tc, parallel_matching_gives_the_same_sends);
    tcase_add_test(tc, different_seeds_explore_different_schedules);
    tcase_add_test(tc, directed_ring_allgather_takes_three_spans);
    tcase_add_test(tc, line_needs_p_minus_one_spans_from_the_end);
    tcase_add_test(tc, prefers_the_cheapest_free_link);
    tcase_add_test(tc, dgx1_allgather_is_near_the_smt_optimum);
    tcase_add_test(tc, mesh_allgather_reaches_the_corner_bound);
    tcase_add_test(tc, hypercube_allgather_reaches_the_in_link_bound);
    tcase_add_test(tc, switch2d_matches_the_ring_of_rings_by_hand);
    tcase_add_test(tc, statistics_only_run_matches_the_kept_schedule);
    tcase_add_test(tc, progress_reports_every_trial_and_cancel_stops);
    tcase_add_test(tc, bad_options_are_named);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(tacos_suite)
