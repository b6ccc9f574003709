/* Tests of the verifier: hand-built valid algorithms are accepted, and each
 * deliberately broken one is rejected with a reason that names the send and
 * the problem. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "baseline.h"
#include "check_main.h"
#include "send_edit.h"
#include "verify.h"
#include "topology_testutil.h"

/* 0 - 1 - ... - (P-1), bidirectional, lanes 1. */
static cs_topology *line(int P)
{
    cs_topology *t = topology_new("line", P);
    cs_error err;
    for (int r = 0; r + 1 < P; r++)
        ck_assert_int_eq(topology_add_link(t, r, r + 1, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    return t;
}

/* 0 -> 1 -> ... -> P-1 -> 0, one direction only. */
static cs_topology *uni_ring(int P)
{
    cs_topology *t = topology_new("uni", P);
    cs_error err;
    for (int r = 0; r < P; r++)
        ck_assert_int_eq(topology_add_link(t, r, (r + 1) % P, 1, 1.0, 1.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    return t;
}

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

/* Ring allgather with C chunks per rank: chunk g = i*P + r starts at r; at
 * step s rank r forwards chunk i*P + (r - s) mod P to r + 1, for every i. */
static cs_algorithm *ring_allgather(int P, int C)
{
    cs_algorithm *a = new_alg(CS_COLL_ALLGATHER, -1, P, C, P - 1);
    for (int s = 0; s < P - 1; s++) {
        a->rounds_per_step[s] = C;
        for (int r = 0; r < P; r++)
            for (int i = 0; i < C; i++)
                ck_assert_int_eq(algorithm_add_send(a, (long)i * P + ((r - s) % P + P) % P, r,
                                                    (r + 1) % P, s, CS_OP_COPY), CS_OK);
    }
    algorithm_update_rounds(a);
    return a;
}

/* Ring reducescatter (chunk g reduced at g mod P): at step s rank r sends its
 * partial of chunk (r - s - 1) mod P to r + 1 and reduces. */
static cs_algorithm *ring_reducescatter(int P)
{
    cs_algorithm *a = new_alg(CS_COLL_REDUCESCATTER, -1, P, 1, P - 1);
    for (int s = 0; s < P - 1; s++)
        for (int r = 0; r < P; r++)
            ck_assert_int_eq(algorithm_add_send(a, ((r - s - 1) % P + 2 * P) % P, r, (r + 1) % P,
                                                s, CS_OP_REDUCE), CS_OK);
    return a;
}

/* Verifies and expects failure whose first reason contains `needle`. */
static void expect_reject(const cs_topology *t, const cs_algorithm *a, const char *needle)
{
    cs_verify_report rep;
    cs_error err;
    int rc = algorithm_verify_report(t, a, &rep, &err);
    ck_assert_int_eq(rc, CS_EVERIFY);
    ck_assert(!rep.ok);
    ck_assert_int_ge(rep.nproblems, 1);
    ck_assert_int_ge(rep.nreasons, 1);
    bool found = false;
    for (int k = 0; k < rep.nreasons; k++)
        found |= strstr(rep.reasons[k], needle) != NULL;
    ck_assert_msg(found, "no reason contains \"%s\"; first: %s", needle, rep.reasons[0]);
    ck_assert_str_eq(err.message, rep.reasons[0]);
    ck_assert_int_eq(err.code, CS_EVERIFY);
}

static void expect_accept(const cs_topology *t, const cs_algorithm *a)
{
    cs_verify_report rep;
    cs_error err;
    int rc = algorithm_verify_report(t, a, &rep, &err);
    ck_assert_msg(rc == CS_OK, "rejected: %s", rc == CS_EVERIFY ? rep.reasons[0] : err.message);
    ck_assert(rep.ok);
    ck_assert_int_eq(rep.nproblems, 0);
}

START_TEST(ring_allgather_on_builtin_ring_is_accepted)
{
    cs_topology *t = test_topology("ring:4");
    cs_algorithm *a = ring_allgather(4, 1);
    expect_accept(t, a);
    ck_assert_int_eq(algorithm_verify(t, a, NULL), CS_OK);
    algorithm_free(a);
    a = ring_allgather(4, 3);
    expect_accept(t, a);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(pipelined_broadcast_on_line_is_accepted)
{
    cs_topology *t = line(4);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 4, 2, 4);
    /* chunk c crosses hop h in step c + h */
    for (int c = 0; c < 2; c++)
        for (int h = 0; h < 3; h++)
            algorithm_add_send(a, c, h, h + 1, c + h, CS_OP_COPY);
    expect_accept(t, a);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(dropped_send_fails_postcondition)
{
    cs_topology *t = test_topology("ring:4");
    cs_algorithm *a = ring_allgather(4, 1);
    /* drop the last send: step 2, rank 3 forwards chunk (3 - 2) = 1 to rank 0 */
    ck_assert_int_eq(algorithm_send_chunk(a, a->nsends - 1), 1);
    a->nsends--;
    expect_reject(t, a, "chunk 1 never reaches rank 0 (postcondition)");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(missing_link_is_named)
{
    cs_topology *t = uni_ring(4);
    cs_algorithm *a = ring_allgather(4, 1);
    expect_accept(t, a);
    SEND_SET(a, 5, src, 2);
    SEND_SET(a, 5, dst, 1);
    SEND_SET(a, 5, chunk, 2);
    char want[96];
    snprintf(want, sizeof want, "send 5 (chunk 2, 2->1, step %d): no link 2->1", algorithm_send_step(a, 5));
    expect_reject(t, a, want);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(overfull_link_is_rejected_until_rounds_allow_it)
{
    cs_topology *t = uni_ring(4);
    cs_algorithm *a = ring_allgather(4, 2);
    expect_accept(t, a);
    /* squeeze step 1 into one round: 2 chunks on each link, 1 lane */
    a->rounds_per_step[1] = 1;
    algorithm_update_rounds(a);
    expect_reject(t, a, "carries 2 chunks in step 1, more than 1 lanes x 1 rounds");
    cs_verify_report rep;
    algorithm_verify_report(t, a, &rep, NULL);
    ck_assert_int_eq(rep.nproblems, 4); /* one per link */
    /* fit_rounds restores what the links need */
    ck_assert_int_eq(algorithm_fit_rounds(a, t, NULL), CS_OK);
    ck_assert_int_eq(a->rounds_per_step[1], 2);
    expect_accept(t, a);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(overfull_shared_set_is_rejected)
{
    /* star: 0 -> 1 and 0 -> 2 share one lane (a NIC) */
    cs_topology *t = topology_new("star", 3);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 0, 2, 1, 1.0, 1.0, true, &err), CS_OK);
    int pairs[2][2] = {{0, 1}, {0, 2}};
    ck_assert_int_eq(topology_add_shared(t, (const int (*)[2])pairs, 2, 1, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 1);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 0, 2, 0, CS_OP_COPY);
    expect_reject(t, a, "shared set 0 (0->1, 0->2) carries 2 chunks in step 0");
    expect_reject(t, a, "send 1 (chunk 0, 0->2, step 0)");
    a->rounds_per_step[0] = 2;
    algorithm_update_rounds(a);
    expect_accept(t, a);
    /* two steps of one round each are fine too */
    algorithm_set_steps(a, 2, NULL);
    a->rounds_per_step[0] = 1;
    algorithm_update_rounds(a);
    SEND_SET(a, 1, step, 1);
    expect_accept(t, a);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* A link in three shared sets (the sweep holds up to two per link beside
 * its count and reads the rest from the set list): every set is counted,
 * and each overfull one is reported. */
START_TEST(link_in_three_shared_sets_counts_in_each)
{
    cs_topology *t = topology_new("star3", 4);
    cs_error err;
    for (int d = 1; d <= 3; d++)
        ck_assert_int_eq(topology_add_link(t, 0, d, 2, 1.0, 1.0, true, &err), CS_OK);
    int a_pairs[2][2] = {{0, 1}, {0, 2}}, b_pairs[2][2] = {{0, 1}, {0, 3}};
    int c_pairs[3][2] = {{0, 1}, {0, 2}, {0, 3}};
    ck_assert_int_eq(topology_add_shared(t, (const int (*)[2])a_pairs, 2, 3, &err), CS_OK);
    ck_assert_int_eq(topology_add_shared(t, (const int (*)[2])b_pairs, 2, 3, &err), CS_OK);
    ck_assert_int_eq(topology_add_shared(t, (const int (*)[2])c_pairs, 3, 2, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 4, 2, 1);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 1, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 0, 2, 0, CS_OP_COPY);
    /* 0->1 carries 2 (its 2 lanes), set 0 3 (3 lanes), set 1 2, set 2 3 > 2 */
    cs_verify_report rep;
    ck_assert_int_eq(algorithm_verify_report(t, a, &rep, &err), CS_EVERIFY);
    ck_assert_int_eq(rep.nproblems, 4);   /* set 2, and 3 chunks that never arrive */
    ck_assert_msg(strstr(rep.reasons[0], "shared set 2 (0->1, 0->2, 0->3) carries 3 chunks in "
                         "step 0, more than 2 lanes x 1 rounds"), "%s", rep.reasons[0]);
    algorithm_add_send(a, 0, 0, 3, 0, CS_OP_COPY);
    algorithm_add_send(a, 1, 0, 3, 0, CS_OP_COPY);
    algorithm_add_send(a, 1, 0, 2, 0, CS_OP_COPY);
    /* now set 0: 4 > 3, set 1: 4 > 3, set 2: 6 > 2; every link 2 */
    ck_assert_int_eq(algorithm_verify_report(t, a, &rep, &err), CS_EVERIFY);
    ck_assert_int_eq(rep.nproblems, 3);
    ck_assert_msg(strstr(rep.reasons[0], "shared set 0 (0->1, 0->2) carries 4 chunks"), "%s",
                  rep.reasons[0]);
    ck_assert_msg(strstr(rep.reasons[1], "shared set 1 (0->1, 0->3) carries 4 chunks"), "%s",
                  rep.reasons[1]);
    ck_assert_msg(strstr(rep.reasons[2], "shared set 2 (0->1, 0->2, 0->3) carries 6 chunks"),
                  "%s", rep.reasons[2]);
    a->rounds_per_step[0] = 3;   /* 6 <= 2 lanes x 3 rounds */
    algorithm_update_rounds(a);
    expect_accept(t, a);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(switch_links_and_sets_are_checked)
{
    /* 3 ranks on one switch: every pair linked, one send per rank per round */
    cs_topology *t = topology_new("sw", 3);
    cs_error err;
    int ranks[3] = {0, 1, 2};
    ck_assert_int_eq(topology_add_switch(t, "sw0", ranks, 3, 10.0, 1.0, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 1);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 0, 2, 0, CS_OP_COPY);
    expect_reject(t, a, "carries 2 chunks in step 0");
    a->rounds_per_step[0] = 2;
    algorithm_update_rounds(a);
    expect_accept(t, a);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(send_before_arrival_is_a_causality_error)
{
    cs_topology *t = test_topology("ring:4");
    cs_algorithm *a = ring_allgather(4, 1);
    /* rank 1 forwards chunk 0 in step 0, before receiving it at the end of step 0 */
    for (long i = 0; i < a->nsends; i++)
        if (algorithm_send_src(a, i) == 1 && algorithm_send_chunk(a, i) == 0)
            SEND_SET(a, i, step, 0);
    expect_reject(t, a, "rank 1 does not hold chunk 0 before step 0");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(reduce_in_noncombining_collective_is_rejected)
{
    cs_topology *t = test_topology("ring:4");
    cs_algorithm *a = ring_allgather(4, 1);
    SEND_SET(a, 0, op, CS_OP_REDUCE);
    expect_reject(t, a, "reduce is not allowed in allgather");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(ring_reducescatter_and_allreduce_are_accepted)
{
    cs_topology *t = uni_ring(5);
    cs_algorithm *rs = ring_reducescatter(5);
    expect_accept(t, rs);
    cs_algorithm *ag = ring_allgather(5, 1), *ar = NULL;
    ck_assert_int_eq(algorithm_concat(rs, ag, &ar, NULL), CS_OK);
    expect_accept(t, ar);
    algorithm_free(ar);
    algorithm_free(ag);
    algorithm_free(rs);
    topology_free(t);
}
END_TEST

START_TEST(double_counted_contribution_is_rejected)
{
    cs_topology *t = line(3);
    /* reduce to root 0 on 0 - 1 - 2 */
    cs_algorithm *a = new_alg(CS_COLL_REDUCE, 0, 3, 1, 3);
    algorithm_add_send(a, 0, 2, 1, 0, CS_OP_REDUCE);
    algorithm_add_send(a, 0, 1, 0, 1, CS_OP_REDUCE);
    expect_accept(t, a);
    /* rank 1 reduces its partial into 0 a second time */
    algorithm_add_send(a, 0, 1, 0, 2, CS_OP_REDUCE);
    expect_reject(t, a, "send 2 (chunk 0, 1->0, step 2): reduce counts the contribution of "
                        "rank 1 twice");
    algorithm_free(a);

    /* the same in a single step: rank 2 reduces into 1 twice in step 0 */
    a = new_alg(CS_COLL_REDUCE, 0, 3, 1, 2);
    a->rounds_per_step[0] = 2;
    algorithm_update_rounds(a);
    algorithm_add_send(a, 0, 2, 1, 0, CS_OP_REDUCE);
    algorithm_add_send(a, 0, 2, 1, 0, CS_OP_REDUCE);
    algorithm_add_send(a, 0, 1, 0, 1, CS_OP_REDUCE);
    expect_reject(t, a, "contribution of rank 2 twice");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(missing_contribution_is_rejected)
{
    cs_topology *t = line(3);
    cs_algorithm *a = new_alg(CS_COLL_REDUCE, 0, 3, 1, 2);
    /* 2 -> 1 happens in the same step as 1 -> 0: 1 sends its old partial */
    algorithm_add_send(a, 0, 2, 1, 1, CS_OP_REDUCE);
    algorithm_add_send(a, 0, 1, 0, 1, CS_OP_REDUCE);
    expect_reject(t, a, "chunk 0 at rank 0 lacks the contribution of rank 2 (holds 2 of 3");
    algorithm_free(a);

    /* a copy that overwrites the root's own contribution */
    a = new_alg(CS_COLL_ALLREDUCE, -1, 3, 1, 4);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_REDUCE);  /* 1 = {0,1} */
    algorithm_add_send(a, 0, 2, 1, 1, CS_OP_REDUCE);  /* 1 = {0,1,2} */
    algorithm_add_send(a, 0, 1, 2, 2, CS_OP_COPY);    /* 2 = full */
    algorithm_add_send(a, 0, 1, 0, 3, CS_OP_COPY);    /* 0 = full */
    expect_accept(t, a);
    a->nsends--; /* rank 0 keeps only its own contribution */
    expect_reject(t, a, "chunk 0 at rank 0 lacks the contribution of rank 1 (holds 1 of 3");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(shared_values_are_never_changed_through_another_rank)
{
    /* allreduce on fc:3: after 0 copies {0,1} to 1, 0's later reduce of 2's
     * contribution must not show up at 1 */
    cs_topology *t = test_topology("fc:3");
    cs_algorithm *a = new_alg(CS_COLL_ALLREDUCE, -1, 3, 1, 4);
    algorithm_add_send(a, 0, 1, 0, 0, CS_OP_REDUCE);  /* 0 = {0,1} */
    algorithm_add_send(a, 0, 0, 1, 1, CS_OP_COPY);    /* 1 = {0,1}, shared */
    algorithm_add_send(a, 0, 2, 0, 2, CS_OP_REDUCE);  /* 0 = {0,1,2} */
    algorithm_add_send(a, 0, 0, 2, 3, CS_OP_COPY);    /* 2 = full */
    expect_reject(t, a, "chunk 0 at rank 1 lacks the contribution of rank 2 (holds 2 of 3");
    /* sending the full value to 1 as well fixes it */
    a->rounds_per_step[3] = 1;
    algorithm_add_send(a, 0, 0, 1, 3, CS_OP_COPY);
    expect_accept(t, a);
    /* and reducing it instead double counts 0 and 1 */
    SEND_SET(a, a->nsends - 1, op, CS_OP_REDUCE);
    expect_reject(t, a, "reduce counts the contribution of rank 0 twice");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(conflicting_writes_in_one_step_are_rejected)
{
    cs_topology *t = line(3);
    cs_algorithm *a = new_alg(CS_COLL_ALLREDUCE, -1, 3, 1, 1);
    a->rounds_per_step[0] = 1;
    /* rank 1 receives a copy from 0 and a reduce from 2 in one step */
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 2, 1, 0, CS_OP_REDUCE);
    expect_reject(t, a, "written more than once in step 0");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(bad_header_fields_are_reported)
{
    cs_topology *t = test_topology("ring:4");
    cs_algorithm *a = ring_allgather(4, 1);
    a->rounds = 7;
    expect_reject(t, a, "rounds is 7 but rounds_per_step sums to 3");
    a->rounds = 3;
    a->global_chunks = 5;
    expect_reject(t, a, "global_chunks is 5 but allgather with 4 ranks and 1 chunks has 4");
    a->global_chunks = 4;
    a->rounds_per_step[0] = 0;
    a->rounds = 2;
    expect_reject(t, a, "rounds_per_step[0] is 0");
    a->rounds_per_step[0] = 1;
    a->rounds = 3;
    expect_accept(t, a);
    SEND_SET(a, 3, step, 3);
    expect_reject(t, a, "step 3 out of range for 3 steps");
    SEND_SET(a, 3, step, 0);
    SEND_SET(a, 2, dst, 9);
    expect_reject(t, a, "send 2 (chunk 2, 2->9, step 0): rank 9 out of range for 4 ranks");
    SEND_SET(a, 2, dst, 2);
    expect_reject(t, a, "rank 2 sends to itself");
    SEND_SET(a, 2, dst, 3);
    SEND_SET(a, 4, chunk, 11);
    expect_reject(t, a, "chunk 11 out of range for 4 global chunks");
    algorithm_free(a);

    cs_topology *t8 = test_topology("ring:8");
    a = ring_allgather(4, 1);
    expect_reject(t8, a, "the algorithm has 4 ranks, topology");
    algorithm_free(a);
    topology_free(t8);
    topology_free(t);
}
END_TEST

START_TEST(report_collects_several_reasons_and_counts_all)
{
    cs_topology *t = uni_ring(8);
    cs_algorithm *a = ring_allgather(8, 1);
    /* break every send's link: 56 problems, 16 reasons */
    for (long i = 0; i < a->nsends; i++) {
        int s = algorithm_send_src(a, i);
        SEND_SET(a, i, dst, (s + 2) % 8);
    }
    cs_verify_report rep;
    ck_assert_int_eq(algorithm_verify_report(t, a, &rep, NULL), CS_EVERIFY);
    ck_assert_int_eq(rep.nreasons, CS_VERIFY_MAX_REASONS);
    ck_assert_int_ge(rep.nproblems, 56);
    ck_assert_ptr_nonnull(strstr(rep.reasons[0], "send 0 (chunk 0, 0->2, step 0): no link 0->2"));
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(timed_schedules_check_time_causality_and_lanes)
{
    cs_topology *t = line(3);
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 2, 2);
    /* chunk 0: 0->1 [0,1], 1->2 [1,2]; chunk 1: 0->1 [1,2], 1->2 [2,3] */
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0.0, 1.0);
    algorithm_add_timed_send(a, 0, 1, 2, 1, CS_OP_COPY, 1.0, 2.0);
    algorithm_add_timed_send(a, 1, 0, 1, 1, CS_OP_COPY, 1.0, 2.0);
    algorithm_add_timed_send(a, 1, 1, 2, 1, CS_OP_COPY, 2.0, 3.0);
    expect_accept(t, a);
    /* chunk 1 leaves rank 1 before it arrived (by time, although the steps agree) */
    SEND_SET(a, 3, start_us, 1.5);
    expect_reject(t, a, "rank 1 only has chunk 1 from 2.000 us");
    SEND_SET(a, 3, start_us, 2.0);
    /* both chunks on 0->1 at once: one lane */
    SEND_SET(a, 2, start_us, 0.5);
    SEND_SET(a, 2, end_us, 1.5);
    expect_reject(t, a, "link 0->1 has 2 sends in flight at 0.500 us, more than its 1 lanes");
    /* a mix of timed and untimed sends is refused */
    SEND_SET(a, 2, start_us, NAN);
    expect_reject(t, a, "carry start_us/end_us");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* One switch of 3 ranks, 10 GB/s ports (10,000 bytes/us), alpha 1 us. */
static cs_topology *switch3(void)
{
    cs_topology *t = topology_new("sw3", 3);
    cs_error err;
    int ranks[3] = {0, 1, 2};
    ck_assert_int_eq(topology_add_switch(t, "sw", ranks, 3, 10.0, 1.0, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    return t;
}

/* Broadcast from 0 with 1000-byte chunks: times below are alpha (1 us) +
 * 1000 bytes / rate, so 1.1 us is the full port rate and 1.2 us half of it. */
static cs_algorithm *timed_broadcast(double chunk_bytes)
{
    cs_algorithm *a = new_alg(CS_COLL_BROADCAST, 0, 3, 1, 2);
    a->timed_chunk_bytes = chunk_bytes;
    return a;
}

START_TEST(switch_ports_share_bandwidth_in_timed_schedules)
{
    cs_topology *t = switch3();
    cs_error err;
    /* two sends through rank 0's egress port at once, each at half its rate */
    cs_algorithm *a = timed_broadcast(1000.0);
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0.0, 1.2);
    algorithm_add_timed_send(a, 0, 0, 2, 0, CS_OP_COPY, 0.0, 1.2);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    /* each at the full rate: twice the port */
    SEND_SET(a, 0, end_us, 1.1);
    SEND_SET(a, 1, end_us, 1.1);
    expect_reject(t, a, "the egress port of rank 0 on switch sw would carry 20 GB/s from 0.000 us "
                        "(2 sends in flight, 1000-byte chunks), more than its 10 GB/s");
    /* one after the other at full rate */
    SEND_SET(a, 1, start_us, 1.1);
    SEND_SET(a, 1, end_us, 2.2);
    SEND_SET(a, 1, step, 1);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    /* a single send faster than the port allows */
    SEND_SET(a, 0, end_us, 1.05);
    expect_reject(t, a, "would carry 20 GB/s from 0.000 us (1 sends in flight");
    /* without the chunk size the rates are unknown: one send per port at a
     * time, as in step-synchronous schedules */
    algorithm_free(a);
    a = timed_broadcast(0.0);
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0.0, 1.2);
    algorithm_add_timed_send(a, 0, 0, 2, 0, CS_OP_COPY, 0.0, 1.2);
    expect_reject(t, a, "the egress port of rank 0 on switch sw has 2 sends in flight at 0.000 us, "
                        "more than its 1 lanes");
    algorithm_free(a);

    /* ingress: rank 2 receives from 0 and 1 at once, half rate each: fine;
     * one of them at full rate: 1.5 times its port */
    a = timed_broadcast(1000.0);
    algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0.0, 1.1);
    algorithm_add_timed_send(a, 0, 1, 2, 1, CS_OP_COPY, 1.1, 2.3);
    algorithm_add_timed_send(a, 0, 0, 2, 1, CS_OP_COPY, 1.1, 2.3);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    SEND_SET(a, 2, end_us, 2.2);
    expect_reject(t, a, "the ingress port of rank 2 on switch sw would carry 15 GB/s from 1.100 us");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(timed_combining_schedule_is_replayed_in_time_order)
{
    cs_topology *t = line(3);
    cs_algorithm *a = new_alg(CS_COLL_REDUCE, 0, 3, 1, 2);
    algorithm_add_timed_send(a, 0, 2, 1, 0, CS_OP_REDUCE, 0.0, 1.0);
    algorithm_add_timed_send(a, 0, 1, 0, 0, CS_OP_REDUCE, 1.0, 2.0);
    expect_accept(t, a);
    /* leaving before 2's partial arrives loses it */
    SEND_SET(a, 1, start_us, 0.5);
    SEND_SET(a, 1, end_us, 1.5);
    expect_reject(t, a, "lacks the contribution of rank 2");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(custom_collective_uses_its_pairs)
{
    const char *doc = "{\"kind\": \"custom\", \"global_chunks\": 2, \"pre\": [[0, 0], [1, 2]],"
                      " \"post\": [[0, 2], [1, 0], [1, 1]]}";
    json_error_t jerr;
    json_t *j = json_loads(doc, 0, &jerr);
    cs_collective c;
    cs_error err;
    ck_assert_int_eq(collective_from_json(j, &c, &err), CS_OK);
    json_decref(j);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "line", 3, 1, 2, &a, &err), CS_OK);
    collective_free(&c);
    cs_topology *t = line(3);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 1, 2, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 1, 2, 1, CS_OP_COPY);
    algorithm_add_send(a, 1, 1, 0, 1, CS_OP_COPY);
    expect_accept(t, a);
    a->nsends = 3;
    expect_reject(t, a, "chunk 1 never reaches rank 0");
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(every_builtin_kind_checks_its_postcondition)
{
    /* gather, scatter, alltoall on a fully connected 4-rank topology: direct
     * sends are valid; dropping one is caught */
    cs_topology *t = test_topology("fc:4");
    const cs_coll_kind kinds[3] = {CS_COLL_GATHER, CS_COLL_SCATTER, CS_COLL_ALLTOALL};
    for (int k = 0; k < 3; k++) {
        cs_algorithm *a = new_alg(kinds[k], kinds[k] == CS_COLL_ALLTOALL ? -1 : 2, 4, 1, 1);
        for (long g = 0; g < a->global_chunks; g++) {
            int src = kinds[k] == CS_COLL_SCATTER ? 2 : (int)(g % 4);
            int dst = kinds[k] == CS_COLL_GATHER ? 2 : kinds[k] == CS_COLL_SCATTER ? (int)(g % 4)
                                                                                  : (int)((g / 4) % 4);
            if (src != dst)
                algorithm_add_send(a, g, src, dst, 0, CS_OP_COPY);
        }
        ck_assert_int_eq(algorithm_fit_rounds(a, t, NULL), CS_OK);
        expect_accept(t, a);
        long g = algorithm_send_chunk(a, 0);
        int dst = algorithm_send_dst(a, 0);
        cs_send last = algorithm_send(a, a->nsends - 1);
        ck_assert_int_eq(algorithm_set_send(a, 0, &last), CS_OK);
        algorithm_truncate_sends(a, a->nsends - 1);
        char want[64];
        snprintf(want, sizeof want, "chunk %ld never reaches rank %d", g, dst);
        expect_reject(t, a, want);
        algorithm_free(a);
    }
    topology_free(t);
}
END_TEST

START_TEST(large_schedule_verifies_quickly)
{
    /* ring allgather on ring:512 with 5 chunks: 1,308,160 sends, enough for
     * several streaming batches and worker threads */
    const int P = 512, C = 5;
    cs_topology *t = test_topology("ring:512");
    cs_algorithm *a = ring_allgather(P, C);
    ck_assert_int_gt(a->nsends, 1L << 20);
    double t0 = cs_now();
    expect_accept(t, a);
    double dt = cs_now() - t0;
    ck_assert_msg(dt < 5.0, "verification took %.2f s", dt);
    /* three sends of chunks far apart moved one step early (step 2 gets the
     * rounds for it): exactly three problems, reported in chunk order
     * whichever batch and thread replayed each chunk */
    const long bad[3] = {1000, 5, 2100};
    a->rounds_per_step[2] = C + 1;
    algorithm_update_rounds(a);
    long idx[3];
    for (int k = 0; k < 3; k++) {
        idx[k] = -1;
        for (long i = 0; i < a->nsends && idx[k] < 0; i++)
            if (algorithm_send_chunk(a, i) == bad[k] && algorithm_send_step(a, i) == 3)
                idx[k] = i;
        ck_assert_int_ge(idx[k], 0);
        SEND_SET(a, idx[k], step, 2);
    }
    cs_verify_report rep;
    cs_error err;
    ck_assert_int_eq(algorithm_verify_report(t, a, &rep, &err), CS_EVERIFY);
    ck_assert_int_eq(rep.nproblems, 3);
    ck_assert_int_eq(rep.nreasons, 3);
    const int order[3] = {1, 0, 2};   /* chunks 5, 1000, 2100 */
    for (int k = 0; k < 3; k++) {
        char want[96];
        snprintf(want, sizeof want, "send %ld (chunk %ld, ", idx[order[k]], bad[order[k]]);
        ck_assert_msg(strncmp(rep.reasons[k], want, strlen(want)) == 0, "reason %d: %s", k,
                      rep.reasons[k]);
        ck_assert_ptr_nonnull(strstr(rep.reasons[k], "does not hold chunk"));
    }
    algorithm_free(a);
    /* ring allreduce on 256 ranks: 130,560 sends with 256-bit sets */
    cs_topology *u = uni_ring(256);
    cs_algorithm *rs = ring_reducescatter(256), *ag = ring_allgather(256, 1), *ar = NULL;
    ck_assert_int_eq(algorithm_concat(rs, ag, &ar, NULL), CS_OK);
    expect_accept(u, ar);
    algorithm_free(rs);
    algorithm_free(ag);
    algorithm_free(ar);
    topology_free(u);
    /* and a combining one past 2^20 sends (1100-bit contribution sets) */
    u = uni_ring(1100);
    rs = ring_reducescatter(1100);
    ck_assert_int_gt(rs->nsends, 1L << 20);
    expect_accept(u, rs);
    algorithm_free(rs);
    topology_free(u);
    topology_free(t);
}
END_TEST

/* ---- differential test against a naive replay ------------------------------------ */

/* A deliberately simple reference: full G x P tables, one step at a time,
 * following the semantics of algorithm.h directly.  Returns true when the
 * algorithm is valid. */
static bool naive_valid(const cs_topology *t, const cs_algorithm *a)
{
    int P = a->ranks, S = a->steps;
    long G = a->global_chunks;
    bool comb = collective_kind_is_combining(a->collective.kind);
    long sum = 0;
    for (int s = 0; s < S; s++) {
        if (a->rounds_per_step[s] < 1)
            return false;
        sum += a->rounds_per_step[s];
    }
    if (sum != a->rounds || P != t->ranks)
        return false;
    for (long i = 0; i < a->nsends; i++) {
        const cs_send xv = algorithm_send(a, i), *x = &xv;
        if (x->chunk < 0 || x->chunk >= G || x->src < 0 || x->src >= P || x->dst < 0 ||
            x->dst >= P || x->src == x->dst || x->step < 0 || x->step >= S ||
            topology_find_link(t, x->src, x->dst) < 0 || (x->op == CS_OP_REDUCE && !comb))
            return false;
    }
    /* bandwidth */
    for (int s = 0; s < S; s++) {
        for (int l = 0; l < t->nlinks; l++) {
            long n = 0;
            for (long i = 0; i < a->nsends; i++)
                n += algorithm_send_step(a, i) == s &&
                     topology_find_link(t, algorithm_send_src(a, i), algorithm_send_dst(a, i)) == l;
            if (n > (long)t->links[l].lanes * a->rounds_per_step[s])
                return false;
        }
        for (int k = 0; k < t->nshared; k++) {
            long n = 0;
            for (long i = 0; i < a->nsends; i++) {
                if (algorithm_send_step(a, i) != s)
                    continue;
                int l = topology_find_link(t, algorithm_send_src(a, i), algorithm_send_dst(a, i));
                for (int j = 0; j < t->shared[k].nlinks; j++)
                    n += t->shared[k].links[j] == l;
            }
            if (n > (long)t->shared[k].lanes * a->rounds_per_step[s])
                return false;
        }
    }
    /* values: a bitmask per (chunk, rank); non-combining: bit 0 = holds */
    unsigned *val = calloc((size_t)(G * P), sizeof(unsigned));
    unsigned *before = calloc((size_t)(G * P), sizeof(unsigned));
    int *wrote = malloc(sizeof(int) * (size_t)(G * P)); /* -1, or 2*step + copy seen */
    bool ok = true;
    for (long g = 0; g < G; g++)
        for (int r = 0; r < P; r++) {
            bool pre = collective_pre(&a->collective, P, a->chunks, g, r);
            val[g * P + r] = pre ? (comb ? 1u << r : 1u) : 0u;
            wrote[g * P + r] = -1;
        }
    for (int s = 0; s < S && ok; s++) {
        memcpy(before, val, sizeof(unsigned) * (size_t)(G * P));
        for (long i = 0; i < a->nsends && ok; i++) {
            const cs_send xv = algorithm_send(a, i), *x = &xv;
            if (x->step != s)
                continue;
            unsigned in = before[x->chunk * P + x->src];
            unsigned *d = &val[x->chunk * P + x->dst];
            if (!comb) {
                if (!in)
                    ok = false;
                *d = 1;
                continue;
            }
            int *w = &wrote[x->chunk * P + x->dst];
            bool same = *w >= 0 && *w / 2 == s;
            if (same && (x->op == CS_OP_COPY || (*w & 1)) && *d != in)
                ok = false;
            if (x->op == CS_OP_COPY) {
                *d = in;
            } else {
                if (*d & in)
                    ok = false;
                *d |= in;
            }
            *w = 2 * s + (x->op == CS_OP_COPY || (same && (*w & 1)));
        }
    }
    unsigned full = P >= 32 ? ~0u : (1u << P) - 1;
    for (long g = 0; g < G && ok; g++)
        for (int r = 0; r < P && ok; r++)
            if (collective_post(&a->collective, P, a->chunks, g, r) &&
                val[g * P + r] != (comb ? full : 1u))
                ok = false;
    free(val);
    free(before);
    free(wrote);
    return ok;
}

/* A greedy non-combining schedule: each step, every link (in random order)
 * carries, lanes times, some chunk src held before the step and dst lacks. */
static cs_algorithm *greedy_schedule(const cs_topology *t, cs_coll_kind kind, int root, int C,
                                     int S, unsigned *seed)
{
    cs_algorithm *a = new_alg(kind, root, t->ranks, C, S);
    int P = t->ranks;
    long G = a->global_chunks;
    unsigned char *has = calloc((size_t)(G * P), 1), *was = malloc((size_t)(G * P));
    for (long g = 0; g < G; g++)
        for (int r = 0; r < P; r++)
            has[g * P + r] = collective_pre(&a->collective, P, C, g, r);
    for (int s = 0; s < S; s++) {
        memcpy(was, has, (size_t)(G * P));
        int off = (int)(rand_r(seed) % (unsigned)t->nlinks);
        for (int k = 0; k < t->nlinks; k++) {
            const cs_link *l = &t->links[(k + off) % t->nlinks];
            for (int lane = 0; lane < l->lanes; lane++) {
                long g0 = rand_r(seed) % G;
                for (long j = 0; j < G; j++) {
                    long g = (g0 + j) % G;
                    if (was[g * P + l->src] && !has[g * P + l->dst]) {
                        algorithm_add_send(a, g, l->src, l->dst, s, CS_OP_COPY);
                        has[g * P + l->dst] = 1;
                        break;
                    }
                }
            }
        }
    }
    free(has);
    free(was);
    ck_assert_int_eq(algorithm_fit_rounds(a, t, NULL), CS_OK);
    return a;
}

static void mutate(cs_algorithm *a, const cs_topology *t, unsigned *seed)
{
    if (a->nsends == 0)
        return;
    long i = rand_r(seed) % a->nsends;
    cs_send xv = algorithm_send(a, i), *x = &xv, last = algorithm_send(a, a->nsends - 1);
    switch (rand_r(seed) % 7) {
    case 0: /* drop */
        ck_assert_int_eq(algorithm_set_send(a, i, &last), CS_OK);
        algorithm_truncate_sends(a, a->nsends - 1);
        return;
    case 1: x->step = (x->step + 1) % a->steps; break;                 /* later / wrap */
    case 2: if (x->step > 0) x->step--; break;                        /* earlier */
    case 3: x->op = x->op == CS_OP_COPY ? CS_OP_REDUCE : CS_OP_COPY; break;
    case 4: algorithm_add_send(a, x->chunk, x->src, x->dst, x->step, x->op); return; /* dup */
    case 5: a->rounds_per_step[x->step] = 1; algorithm_update_rounds(a); return;
    default: {
        const cs_link *l = &t->links[rand_r(seed) % t->nlinks];
        x->src = l->src;
        x->dst = l->dst;
    }
    }
    ck_assert_int_eq(algorithm_set_send(a, i, x), CS_OK);
}

START_TEST(random_schedules_agree_with_a_naive_replay)
{
    const char *specs[] = {"ring:5", "fc:4", "dgx1", "mesh2d:2x3", "switch2d:2x3"};
    const cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_BROADCAST, CS_COLL_GATHER,
                                  CS_COLL_SCATTER, CS_COLL_ALLTOALL};
    unsigned seed = 12345;
    long accepted = 0, rejected = 0;
    for (size_t ti = 0; ti < sizeof specs / sizeof *specs; ti++) {
        cs_topology *t = test_topology(specs[ti]), *rev = NULL;
        ck_assert_int_eq(topology_reverse(t, &rev, NULL), CS_OK);
        for (int it = 0; it < 60; it++) {
            cs_coll_kind kind = kinds[rand_r(&seed) % 5];
            int root = collective_kind_is_rooted(kind) ? (int)(rand_r(&seed) % t->ranks) : -1;
            int C = 1 + (int)(rand_r(&seed) % 2);
            int S = 2 + (int)(rand_r(&seed) % 5);
            /* on the reversed topology, so the inverse runs on t */
            cs_algorithm *a = greedy_schedule(rev, kind, root, C, S, &seed);
            cs_algorithm *cands[4] = {a, NULL, NULL, NULL};
            const cs_topology *on[4] = {rev, t, t, t};
            cs_algorithm *inv = NULL, *ag = NULL;
            if (algorithm_invert(a, &inv, NULL) == CS_OK) {
                cands[1] = inv;
                if (inv->collective.kind == CS_COLL_REDUCESCATTER) {
                    ag = greedy_schedule(t, CS_COLL_ALLGATHER, -1, C, S, &seed);
                    algorithm_concat(inv, ag, &cands[2], NULL);
                }
            }
            for (int k = 0; k < 3; k++) {
                if (!cands[k])
                    continue;
                for (int m = 0; m < 3; m++) {
                    bool want = naive_valid(on[k], cands[k]);
                    cs_verify_report rep;
                    int rc = algorithm_verify_report(on[k], cands[k], &rep, NULL);
                    ck_assert_msg((rc == CS_OK) == want,
                                  "%s on %s: naive says %s, verifier %s (%s)",
                                  collective_kind_name(cands[k]->collective.kind), specs[ti],
                                  want ? "valid" : "invalid", rc == CS_OK ? "accepts" : "rejects",
                                  rc == CS_OK ? "" : rep.reasons[0]);
                    accepted += want;
                    rejected += !want;
                    mutate(cands[k], on[k], &seed);
                }
            }
            algorithm_free(a);
            algorithm_free(inv);
            algorithm_free(ag);
            algorithm_free(cands[2]);
        }
        topology_free(rev);
        topology_free(t);
    }
    /* both outcomes were exercised */
    ck_assert_int_ge(accepted, 100);
    ck_assert_int_ge(rejected, 100);
}
END_TEST

/* The fast (dense) replays against the general chunk-by-chunk one
 * (algorithm_verify_general) on many schedules, valid and broken:
 * non-combining kinds and reducescatter, allreduce and reduce (inverted
 * greedy schedules, their concatenations, baselines), each mutated several
 * times, as it stands and with rounds refitted (so the value replay, not
 * the bandwidth check, decides).  The verdict, the problem count and the
 * first reason must be the same; both outcomes and the combining kinds
 * must be exercised. */
static void check_same_verdict(const cs_topology *t, const cs_algorithm *a, long *acc,
                               long *rej, long *comb)
{
    cs_verify_report fast;
    cs_error ef, eg;
    cs_error_clear(&ef);
    cs_error_clear(&eg);
    int rf = algorithm_verify_report(t, a, &fast, &ef);
    int rg = algorithm_verify_general(t, a, &eg);
    ck_assert_msg(rf == rg, "%s on %s: fast %s (%s), general %s (%s)",
                  collective_kind_name(a->collective.kind), t->name, cs_status_name(rf),
                  rf == CS_OK ? "" : ef.message, cs_status_name(rg),
                  rg == CS_OK ? "" : eg.message);
    if (rf != CS_OK)
        ck_assert_str_eq(ef.message, eg.message);
    *acc += rf == CS_OK;
    *rej += rf != CS_OK;
    *comb += collective_kind_is_combining(a->collective.kind);
}

START_TEST(fast_and_general_replays_agree)
{
    const char *specs[] = {"ring:5", "fc:4", "dgx1", "mesh2d:2x3", "hypercube:3"};
    const cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_BROADCAST, CS_COLL_GATHER,
                                  CS_COLL_SCATTER};
    const char *baselines[] = {"ring", "recursive-doubling", "recursive-halving",
                               "binomial-tree", "double-binary-tree", "direct"};
    unsigned seed = 777;
    long acc = 0, rej = 0, comb = 0;
    for (size_t ti = 0; ti < sizeof specs / sizeof *specs; ti++) {
        cs_topology *t = test_topology(specs[ti]), *rev = NULL;
        ck_assert_int_eq(topology_reverse(t, &rev, NULL), CS_OK);
        for (int it = 0; it < 40; it++) {
            cs_coll_kind kind = kinds[rand_r(&seed) % 4];
            int root = collective_kind_is_rooted(kind) ? (int)(rand_r(&seed) % t->ranks) : -1;
            int C = 1 + (int)(rand_r(&seed) % 2);
            int S = 2 + (int)(rand_r(&seed) % 5);
            cs_algorithm *cands[4] = {NULL, NULL, NULL, NULL};
            const cs_topology *on[4] = {rev, t, t, t};
            cs_algorithm *ag = NULL;
            cands[0] = greedy_schedule(rev, kind, root, C, S, &seed);
            if (algorithm_invert(cands[0], &cands[1], NULL) == CS_OK &&
                cands[1]->collective.kind == CS_COLL_REDUCESCATTER) {
                ag = greedy_schedule(t, CS_COLL_ALLGATHER, -1, C, S, &seed);
                algorithm_concat(cands[1], ag, &cands[2], NULL);
            }
            /* a baseline of a combining kind now and then */
            cs_collective bc;
            cs_coll_kind bk = it % 3 == 0 ? CS_COLL_ALLREDUCE
                              : it % 3 == 1 ? CS_COLL_REDUCESCATTER : CS_COLL_REDUCE;
            collective_init(&bc, bk, bk == CS_COLL_REDUCE ? (int)(rand_r(&seed) % t->ranks) : -1);
            const char *bn = baselines[rand_r(&seed) % 6];
            if (baseline_supports(bn, bk))
                baseline_generate(bn, t, &bc, NULL, &cands[3], NULL);
            for (int k = 0; k < 4; k++) {
                if (!cands[k])
                    continue;
                for (int m = 0; m < 6; m++) {
                    check_same_verdict(on[k], cands[k], &acc, &rej, &comb);
                    cs_algorithm *fit = NULL;
                    ck_assert_int_eq(algorithm_clone(cands[k], &fit, NULL), CS_OK);
                    if (algorithm_fit_rounds(fit, on[k], NULL) == CS_OK)
                        check_same_verdict(on[k], fit, &acc, &rej, &comb);
                    algorithm_free(fit);
                    mutate(cands[k], on[k], &seed);
                }
                algorithm_free(cands[k]);
            }
            algorithm_free(ag);
        }
        topology_free(rev);
        topology_free(t);
    }
    ck_assert_int_ge(acc, 300);
    ck_assert_int_ge(rej, 300);
    ck_assert_int_ge(comb, 600);
}
END_TEST

static Suite *verify_suite(void)
{
    Suite *s = suite_create("verify");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ring_allgather_on_builtin_ring_is_accepted);
    tcase_add_test(tc, pipelined_broadcast_on_line_is_accepted);
    tcase_add_test(tc, dropped_send_fails_postcondition);
    tcase_add_test(tc, missing_link_is_named);
    tcase_add_test(tc, overfull_link_is_rejected_until_rounds_allow_it);
    tcase_add_test(tc, overfull_shared_set_is_rejected);
    tcase_add_test(tc, link_in_three_shared_sets_counts_in_each);
    tcase_add_test(tc, switch_links_and_sets_are_checked);
    tcase_add_test(tc, send_before_arrival_is_a_causality_error);
    tcase_add_test(tc, reduce_in_noncombining_collective_is_rejected);
    tcase_add_test(tc, ring_reducescatter_and_allreduce_are_accepted);
    tcase_add_test(tc, double_counted_contribution_is_rejected);
    tcase_add_test(tc, missing_contribution_is_rejected);
    tcase_add_test(tc, shared_values_are_never_changed_through_another_rank);
    tcase_add_test(tc, conflicting_writes_in_one_step_are_rejected);
    tcase_add_test(tc, bad_header_fields_are_reported);
    tcase_add_test(tc, report_collects_several_reasons_and_counts_all);
    tcase_add_test(tc, timed_schedules_check_time_causality_and_lanes);
    tcase_add_test(tc, switch_ports_share_bandwidth_in_timed_schedules);
    tcase_add_test(tc, timed_combining_schedule_is_replayed_in_time_order);
    tcase_add_test(tc, custom_collective_uses_its_pairs);
    tcase_add_test(tc, every_builtin_kind_checks_its_postcondition);
    tcase_add_test(tc, random_schedules_agree_with_a_naive_replay);
    tcase_add_test(tc, fast_and_general_replays_agree);
    tcase_add_test(tc, large_schedule_verifies_quickly);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(verify_suite)
