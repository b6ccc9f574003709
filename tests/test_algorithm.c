/* Tests of algorithm.c and transform.c: construction, JSON (strict parse with
 * field names, round trip), fit_rounds, cost, results, inversion and
 * concatenation (checked with the verifier, an independent replay). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "algorithm.h"
#include "check_main.h"
#include "send_edit.h"
#include "verify.h"

/* A unidirectional ring 0->1->...->P-1->0 (lanes 1, 1 GB/s, 1 us). */
static cs_topology *uni_ring(int P, bool reversed)
{
    cs_topology *t = topology_new(reversed ? "ring-rev" : "ring-uni", P);
    ck_assert_ptr_nonnull(t);
    cs_error err;
    for (int r = 0; r < P; r++) {
        int a = r, b = (r + 1) % P;
        int rc = reversed ? topology_add_link(t, b, a, 1, 1.0, 1.0, false, &err)
                          : topology_add_link(t, a, b, 1, 1.0, 1.0, false, &err);
        ck_assert_int_eq(rc, CS_OK);
    }
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    return t;
}

/* Ring allgather on the reversed ring (links r -> r-1): at step s, rank r
 * forwards chunk (r + s) mod P to r - 1.  Built by hand, C = 1. */
static cs_algorithm *allgather_on_reversed_ring(int P)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "ring-rev", P, 1, P - 1, &a, &err), CS_OK);
    for (int s = 0; s < P - 1; s++)
        for (int r = 0; r < P; r++)
            ck_assert_int_eq(algorithm_add_send(a, (r + s) % P, r, (r - 1 + P) % P, s,
                                                CS_OP_COPY), CS_OK);
    collective_free(&c);
    return a;
}

/* Ring allgather on the forward ring: at step s rank r forwards (r - s) mod P. */
static cs_algorithm *allgather_on_ring(int P)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "ring-uni", P, 1, P - 1, &a, &err), CS_OK);
    for (int s = 0; s < P - 1; s++)
        for (int r = 0; r < P; r++)
            ck_assert_int_eq(algorithm_add_send(a, ((r - s) % P + P) % P, r, (r + 1) % P, s,
                                                CS_OP_COPY), CS_OK);
    collective_free(&c);
    return a;
}

START_TEST(new_sets_header_fields)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "dgx1", 8, 6, 3, &a, &err), CS_OK);
    ck_assert_int_eq(a->global_chunks, 48);
    ck_assert_int_eq(a->rounds, 3);
    for (int s = 0; s < 3; s++)
        ck_assert_int_eq(a->rounds_per_step[s], 1);
    ck_assert_str_eq(a->topology, "dgx1");
    ck_assert_int_eq(algorithm_set_steps(a, 5, &err), CS_OK);
    ck_assert_int_eq(a->rounds, 5);
    a->rounds_per_step[4] = 3;
    algorithm_update_rounds(a);
    ck_assert_int_eq(a->rounds, 7);
    ck_assert_int_eq(algorithm_set_steps(a, -1, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "steps");
    algorithm_free(a);
    ck_assert_int_eq(algorithm_new(&c, "x", 8, 0, 3, &a, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "chunks");
    ck_assert_ptr_null(a);
    collective_free(&c);
}
END_TEST

START_TEST(add_send_grows_and_keeps_every_send)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLTOALL, -1);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "x", 64, 1, 4, &a, NULL), CS_OK);
    const long n = 1000000;
    long reallocs = 0, last_cap = 0;
    for (long i = 0; i < n; i++) {
        ck_assert_int_eq(algorithm_add_send(a, i % 4096, (int)(i % 64), (int)((i + 1) % 64),
                                            (int)(i % 4), CS_OP_COPY), CS_OK);
        if (a->store.cap != last_cap) {
            reallocs++;
            last_cap = a->store.cap;
        }
    }
    ck_assert_int_eq(a->nsends, n);
    ck_assert_int_ge(a->store.cap, n);
    ck_assert_int_lt(reallocs, 40); /* geometric growth */
    for (long i = 0; i < n; i += 9973) {
        ck_assert_int_eq(algorithm_send_chunk(a, i), i % 4096);
        ck_assert_int_eq(algorithm_send_src(a, i), i % 64);
        ck_assert(isnan(algorithm_send_start_us(a, i)));
    }
    ck_assert(!algorithm_is_timed(a));
    algorithm_free(a);
    collective_free(&c);
}
END_TEST

/* The builder path: n placeholder copies appended at once (after existing
 * sends, with reduce bits crossing byte boundaries), then written in place;
 * each send reads back as written and the earlier sends are untouched. */
/* algorithm_put_sends stores a batch as the same algorithm_put_send calls in
 * order would: in place over placeholders, a later write to an index
 * winning, reduce bits across byte boundaries; and a batch holding a value
 * wider than its column (or negative) widens it like a single put. */
START_TEST(put_sends_equals_put_send_in_order)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_algorithm *a = NULL, *b = NULL;
    ck_assert_int_eq(algorithm_new(&c, "x", 300, 1, 20, &a, NULL), CS_OK);
    ck_assert_int_eq(algorithm_new(&c, "x", 300, 1, 20, &b, NULL), CS_OK);
    ck_assert_int_eq(algorithm_add_send_copies(a, 50, 299, 299, 298, 19, CS_OP_REDUCE), CS_OK);
    ck_assert_int_eq(algorithm_add_send_copies(b, 50, 299, 299, 298, 19, CS_OP_REDUCE), CS_OK);
    long idx[60];
    int32_t ch[60], sr[60], ds[60], st[60];
    unsigned char red[60];
    for (int round = 0; round < 2; round++) {
        int n = 60;
        for (int j = 0; j < n; j++) {
            idx[j] = (j * 7 + round) % 50;   /* some indices twice */
            ch[j] = j + round;
            sr[j] = (j * 3) % 300;
            ds[j] = (j * 5 + 1) % 300;
            st[j] = j % 20;
            red[j] = (unsigned char)(j % 3 == 0);
        }
        if (round == 1) {
            ch[17] = 70000;   /* wider than the chunk column */
            sr[40] = -1;      /* negative: the src column becomes signed 4 bytes */
        }
        ck_assert_int_eq(algorithm_put_sends(a, n, idx, ch, sr, ds, st, red), CS_OK);
        for (int j = 0; j < n; j++)
            ck_assert_int_eq(algorithm_put_send(b, idx[j], ch[j], sr[j], ds[j], st[j],
                                                red[j] ? CS_OP_REDUCE : CS_OP_COPY), CS_OK);
        for (long i = 0; i < 50; i++) {
            cs_send x = algorithm_send(a, i), y = algorithm_send(b, i);
            ck_assert_int_eq(x.chunk, y.chunk);
            ck_assert_int_eq(x.src, y.src);
            ck_assert_int_eq(x.dst, y.dst);
            ck_assert_int_eq(x.step, y.step);
            ck_assert_int_eq(x.op, y.op);
        }
    }
    ck_assert_int_eq(algorithm_send_src(a, (40 * 7 + 1) % 50), -1);   /* j = 40 of round 1 */
    algorithm_free(a);
    algorithm_free(b);
    collective_free(&c);
}
END_TEST

START_TEST(send_copies_then_put_in_place)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "x", 300, 1, 20, &a, NULL), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 1, 2, 3, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 4, 5, 6, 1, CS_OP_REDUCE), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 7, 8, 9, 2, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send_copies(a, 37, 299, 299, 298, 19, CS_OP_REDUCE), CS_OK);
    ck_assert_int_eq(a->nsends, 40);
    ck_assert_int_eq(algorithm_send_op(a, 0), CS_OP_COPY);
    ck_assert_int_eq(algorithm_send_op(a, 1), CS_OP_REDUCE);
    ck_assert_int_eq(algorithm_send_op(a, 2), CS_OP_COPY);
    ck_assert_int_eq(algorithm_send_chunk(a, 1), 4);
    for (long i = 3; i < 40; i++) {
        cs_send s = algorithm_send(a, i);
        ck_assert_int_eq(s.chunk, 299);
        ck_assert_int_eq(s.src, 299);
        ck_assert_int_eq(s.dst, 298);
        ck_assert_int_eq(s.step, 19);
        ck_assert_int_eq(s.op, CS_OP_REDUCE);
        ck_assert(isnan(s.start_us));
    }
    for (long i = 3; i < 40; i++)
        ck_assert_int_eq(algorithm_put_send(a, i, i, (int)(i % 7), (int)(i % 11), (int)(i % 20),
                                            i % 3 ? CS_OP_COPY : CS_OP_REDUCE), CS_OK);
    for (long i = 3; i < 40; i++) {
        cs_send s = algorithm_send(a, i);
        ck_assert_int_eq(s.chunk, i);
        ck_assert_int_eq(s.src, i % 7);
        ck_assert_int_eq(s.dst, i % 11);
        ck_assert_int_eq(s.step, i % 20);
        ck_assert_int_eq(s.op, i % 3 ? CS_OP_COPY : CS_OP_REDUCE);
    }
    ck_assert_int_eq(algorithm_send_op(a, 2), CS_OP_COPY);
    /* a value beyond the placeholder's still widens its column */
    ck_assert_int_eq(algorithm_put_send(a, 39, 70000, 1, 2, 3, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_send_chunk(a, 39), 70000);
    ck_assert_int_eq(algorithm_send_chunk(a, 38), 38);
    ck_assert(!algorithm_is_timed(a));
    algorithm_free(a);
    collective_free(&c);
}
END_TEST

START_TEST(storage_is_narrow_and_exact)
{
    /* 64 ranks, 4096 chunks, 4 steps: chunk ids take 2 bytes, ranks and
     * steps 1, op a bit; two 1-byte time indices once timed */
    cs_collective c;
    collective_init(&c, CS_COLL_ALLTOALL, -1);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "x", 64, 1, 4, &a, NULL), CS_OK);
    const long n = 100000;
    ck_assert_int_eq(algorithm_reserve_sends(a, n), CS_OK);
    for (long i = 0; i < n; i++)
        ck_assert_int_eq(algorithm_add_timed_send(a, i % 4096, (int)(i % 64), (int)((i + 1) % 64),
                                                  (int)(i % 4), i % 3 ? CS_OP_COPY : CS_OP_REDUCE,
                                                  0.1 * (double)(i % 4), 0.1 * (double)(i % 4) + 0.3),
                         CS_OK);
    double per_send = (double)algorithm_storage_bytes(a) / (double)n;
    ck_assert_msg(per_send < 7.2, "%.2f bytes per send", per_send);
    for (long i = 0; i < n; i += 997) {
        cs_send s = algorithm_send(a, i);
        ck_assert_int_eq(s.chunk, i % 4096);
        ck_assert_int_eq(s.dst, (i + 1) % 64);
        ck_assert_int_eq(s.op, i % 3 ? CS_OP_COPY : CS_OP_REDUCE);
        /* times come back bit for bit */
        ck_assert(s.start_us == 0.1 * (double)(i % 4));
        ck_assert(s.end_us == 0.1 * (double)(i % 4) + 0.3);
    }
    ck_assert(algorithm_is_timed(a));
    ck_assert_int_le(algorithm_time_count(a), 1 + 8);
    algorithm_free(a);
    collective_free(&c);
}
END_TEST

START_TEST(values_widen_refuse_beyond_32_bits_and_truncate)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "x", 8, 1, 2, &a, &err), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 1, 1, 2, 0, CS_OP_COPY), CS_OK);
    /* malformed values (for the verifier to name) widen their columns */
    ck_assert_int_eq(algorithm_add_send(a, -1, 70000, 300, 1 << 20, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 2147483647L, -5, 3, -1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_send_chunk(a, 0), 1);
    ck_assert_int_eq(algorithm_send_src(a, 0), 1);
    ck_assert_int_eq(algorithm_send_chunk(a, 1), -1);
    ck_assert_int_eq(algorithm_send_src(a, 1), 70000);
    ck_assert_int_eq(algorithm_send_dst(a, 1), 300);
    ck_assert_int_eq(algorithm_send_step(a, 1), 1 << 20);
    ck_assert_int_eq(algorithm_send_chunk(a, 2), 2147483647L);
    ck_assert_int_eq(algorithm_send_src(a, 2), -5);
    ck_assert_int_eq(algorithm_send_step(a, 2), -1);
    /* nothing is truncated: a chunk id beyond 32 bits is refused */
    ck_assert_int_eq(algorithm_add_send(a, 2147483648L, 0, 1, 0, CS_OP_COPY), CS_ELIMIT);
    ck_assert_int_eq(a->nsends, 3);
    ck_assert_int_eq(algorithm_set_send_step(a, 0, 1), CS_OK);
    ck_assert_int_eq(algorithm_send_step(a, 0), 1);
    /* one timed send among untimed ones: the others read NAN */
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 1.5, 2.5), CS_OK);
    ck_assert(isnan(algorithm_send_start_us(a, 0)));
    ck_assert_double_eq(algorithm_send_end_us(a, 3), 2.5);
    ck_assert(!algorithm_is_timed(a));
    algorithm_truncate_sends(a, 1);
    ck_assert_int_eq(a->nsends, 1);
    ck_assert_int_eq(algorithm_send_chunk(a, 0), 1);
    algorithm_free(a);

    /* more global chunks than 32-bit ids can number: refused up front */
    collective_init(&c, CS_COLL_ALLTOALL, -1);
    ck_assert_int_eq(algorithm_new(&c, "x", 50000, 1, 1, &a, &err), CS_ELIMIT);
    ck_assert_ptr_null(a);
    ck_assert_ptr_nonnull(strstr(err.message, "2500000000 global chunks"));
    collective_free(&c);
}
END_TEST

START_TEST(steps_from_start_times_numbers_distinct_starts)
{
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, "x", 4, 1, 1, &a, &err), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 1, 2, 0, CS_OP_COPY, 7.25, 9.0), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 1, 0, CS_OP_COPY, 0.0, 7.25), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 0, 3, 0, CS_OP_COPY, 7.25, 8.0), CS_OK);
    ck_assert_int_eq(algorithm_add_timed_send(a, 0, 2, 3, 0, CS_OP_COPY, 9.0, 10.0), CS_OK);
    ck_assert_int_eq(algorithm_steps_from_start_times(a, &err), CS_OK);
    ck_assert_int_eq(a->steps, 3);
    ck_assert_int_eq(a->rounds, 3);
    ck_assert_int_eq(algorithm_send_step(a, 0), 1);
    ck_assert_int_eq(algorithm_send_step(a, 1), 0);
    ck_assert_int_eq(algorithm_send_step(a, 2), 1);
    ck_assert_int_eq(algorithm_send_step(a, 3), 2);
    /* time ranks order the dictionary by value */
    uint32_t rank[16];
    ck_assert_int_le(algorithm_time_count(a), 16);
    ck_assert_int_eq(algorithm_time_ranks(a, rank), CS_OK);
    for (long i = 0; i < a->nsends; i++)
        for (long j = 0; j < a->nsends; j++)
            ck_assert_int_eq(rank[algorithm_send_start_index(a, i)] <
                             rank[algorithm_send_start_index(a, j)],
                             algorithm_send_start_us(a, i) < algorithm_send_start_us(a, j));
    algorithm_free(a);
    collective_free(&c);
}
END_TEST

START_TEST(sort_orders_by_step_chunk_src_dst)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "x", 4, 1, 3, &a, NULL), CS_OK);
    algorithm_add_send(a, 2, 1, 2, 2, CS_OP_COPY);
    algorithm_add_send(a, 3, 3, 0, 0, CS_OP_COPY);
    algorithm_add_send(a, 1, 2, 3, 0, CS_OP_COPY);
    algorithm_add_send(a, 1, 1, 2, 0, CS_OP_COPY);
    algorithm_sort_sends(a);
    ck_assert_int_eq(algorithm_send_chunk(a, 0), 1);
    ck_assert_int_eq(algorithm_send_src(a, 0), 1);
    ck_assert_int_eq(algorithm_send_chunk(a, 1), 1);
    ck_assert_int_eq(algorithm_send_src(a, 1), 2);
    ck_assert_int_eq(algorithm_send_chunk(a, 2), 3);
    ck_assert_int_eq(algorithm_send_step(a, 3), 2);
    algorithm_free(a);
    collective_free(&c);
}
END_TEST

static const char *VALID_DOC =
    "{\"collective\": {\"kind\": \"allgather\"}, \"topology\": \"ring:4\", \"ranks\": 4,"
    " \"chunks\": 1, \"global_chunks\": 4, \"steps\": 2, \"rounds\": 3,"
    " \"rounds_per_step\": [1, 2], \"method\": \"smt\", \"optimality\": \"both\","
    " \"sends\": [{\"chunk\": 0, \"src\": 0, \"dst\": 1, \"step\": 0, \"op\": \"copy\"},"
    "             {\"chunk\": 1, \"src\": 1, \"dst\": 2, \"step\": 1, \"op\": \"copy\"}]}";

START_TEST(parse_reads_every_field)
{
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_parse(VALID_DOC, strlen(VALID_DOC), &a, &err), CS_OK);
    ck_assert_int_eq(a->collective.kind, CS_COLL_ALLGATHER);
    ck_assert_str_eq(a->topology, "ring:4");
    ck_assert_int_eq(a->ranks, 4);
    ck_assert_int_eq(a->chunks, 1);
    ck_assert_int_eq(a->global_chunks, 4);
    ck_assert_int_eq(a->steps, 2);
    ck_assert_int_eq(a->rounds, 3);
    ck_assert_int_eq(a->rounds_per_step[1], 2);
    ck_assert_str_eq(a->method, "smt");
    ck_assert_str_eq(a->optimality, "both");
    ck_assert_int_eq(a->nsends, 2);
    ck_assert_int_eq(algorithm_send_chunk(a, 1), 1);
    ck_assert_int_eq(algorithm_send_dst(a, 1), 2);
    ck_assert_int_eq(algorithm_send_step(a, 1), 1);
    ck_assert_int_eq(algorithm_send_op(a, 1), CS_OP_COPY);
    algorithm_free(a);
}
END_TEST

/* Replaces the first occurrence of `from` in VALID_DOC by `to` and parses. */
static int parse_modified(const char *from, const char *to, cs_error *err)
{
    char buf[2048];
    const char *p = strstr(VALID_DOC, from);
    ck_assert_ptr_nonnull(p);
    snprintf(buf, sizeof buf, "%.*s%s%s", (int)(p - VALID_DOC), VALID_DOC, to, p + strlen(from));
    cs_algorithm *a = NULL;
    int rc = algorithm_parse(buf, strlen(buf), &a, err);
    if (rc == CS_OK)
        algorithm_free(a);
    else
        ck_assert_ptr_null(a);
    return rc;
}

START_TEST(parse_errors_name_the_field)
{
    cs_error err;
    ck_assert_int_eq(parse_modified("\"dst\": 2", "\"dst\": 9", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "sends[1].dst");
    ck_assert_ptr_nonnull(strstr(err.message, "rank 9 out of range for 4 ranks"));

    ck_assert_int_eq(parse_modified("\"rounds\": 3", "\"rounds\": 4", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "rounds");

    ck_assert_int_eq(parse_modified("\"global_chunks\": 4", "\"global_chunks\": 5", &err),
                     CS_EINVAL);
    ck_assert_str_eq(err.field, "global_chunks");
    ck_assert_ptr_nonnull(strstr(err.message, "expected 4"));

    ck_assert_int_eq(parse_modified("[1, 2]", "[1]", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "rounds_per_step");

    ck_assert_int_eq(parse_modified("[1, 2]", "[1, 0]", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "rounds_per_step[1]");

    ck_assert_int_eq(parse_modified("\"step\": 1", "\"step\": 2", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "sends[1].step");

    ck_assert_int_eq(parse_modified("\"op\": \"copy\"}]", "\"op\": \"sum\"}]", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "sends[1].op");

    ck_assert_int_eq(parse_modified("\"chunk\": 1", "\"chunk\": 4", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "sends[1].chunk");

    ck_assert_int_eq(parse_modified("\"chunk\": 1", "\"chunk\": \"1\"", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "sends[1].chunk");

    ck_assert_int_eq(parse_modified("\"src\": 1", "\"src\": 2", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "sends[1].dst"); /* 2 -> 2 sends to itself */

    ck_assert_int_eq(parse_modified("\"chunks\": 1", "\"chunks\": 0", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "chunks");

    ck_assert_int_eq(parse_modified("\"ranks\": 4,", "", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "ranks");

    ck_assert_int_eq(parse_modified("\"kind\": \"allgather\"", "\"kind\": \"allgether\"", &err),
                     CS_EINVAL);
    ck_assert_int_eq(strncmp(err.field, "collective", 10), 0);

    ck_assert_int_eq(parse_modified("\"optimality\": \"both\"", "\"optimality\": \"best\"", &err),
                     CS_EINVAL);
    ck_assert_str_eq(err.field, "optimality");

    ck_assert_int_eq(parse_modified("\"step\": 1, \"op\"", "\"step\": 1, \"start_us\": 1.0, \"op\"",
                                    &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "sends[1].end_us");

    ck_assert_int_eq(parse_modified("\"sends\": [", "\"sends\": 3, \"x\": [", &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "sends");

    /* duplicate keys and syntax errors */
    ck_assert_int_eq(parse_modified("\"ranks\": 4,", "\"ranks\": 4, \"ranks\": 4,", &err),
                     CS_EINVAL);
    ck_assert_int_eq(parse_modified("\"ranks\": 4,", "\"ranks\": 4", &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "line"));

    /* optional fields may be omitted and are derived */
    ck_assert_int_eq(parse_modified("\"global_chunks\": 4,", "", &err), CS_OK);
    ck_assert_int_eq(parse_modified("\"rounds\": 3,", "", &err), CS_OK);
}
END_TEST

START_TEST(parse_rejects_mixed_timing_and_reads_times)
{
    const char *doc =
        "{\"collective\": {\"kind\": \"broadcast\", \"root\": 0}, \"ranks\": 2, \"chunks\": 1,"
        " \"steps\": 1, \"sends\": [{\"chunk\": 0, \"src\": 0, \"dst\": 1, \"step\": 0,"
        " \"op\": \"copy\", \"start_us\": 0.5, \"end_us\": 2.5}]}";
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_parse(doc, strlen(doc), &a, &err), CS_OK);
    ck_assert(algorithm_is_timed(a));
    ck_assert_double_eq(algorithm_send_start_us(a, 0), 0.5);
    ck_assert_double_eq(algorithm_send_end_us(a, 0), 2.5);
    ck_assert_int_eq(a->collective.root, 0);
    algorithm_free(a);

    const char *bad =
        "{\"collective\": {\"kind\": \"broadcast\", \"root\": 5}, \"ranks\": 2, \"chunks\": 1,"
        " \"steps\": 1, \"sends\": []}";
    ck_assert_int_eq(algorithm_parse(bad, strlen(bad), &a, &err), CS_EINVAL);
    ck_assert_int_eq(strncmp(err.field, "collective", 10), 0);
}
END_TEST

START_TEST(json_round_trip_keeps_everything)
{
    cs_algorithm *a = allgather_on_ring(5);
    a->rounds_per_step[2] = 3;
    algorithm_update_rounds(a);
    snprintf(a->method, sizeof a->method, "ring");
    snprintf(a->optimality, sizeof a->optimality, "bandwidth");
    json_t *doc = algorithm_to_json(a);
    ck_assert_ptr_nonnull(doc);
    /* the contract's field names are present */
    const char *keys[] = {"collective", "topology", "ranks", "chunks", "global_chunks", "steps",
                          "rounds", "rounds_per_step", "method", "optimality", "sends"};
    for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
        ck_assert_ptr_nonnull(json_object_get(doc, keys[k]));
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    cs_algorithm *b = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_parse(text, strlen(text), &b, &err), CS_OK);
    free(text);
    ck_assert_int_eq(b->ranks, 5);
    ck_assert_int_eq(b->steps, 4);
    ck_assert_int_eq(b->rounds, 6);
    ck_assert_int_eq(b->rounds_per_step[2], 3);
    ck_assert_str_eq(b->method, "ring");
    ck_assert_str_eq(b->optimality, "bandwidth");
    ck_assert_str_eq(b->topology, "ring-uni");
    ck_assert_int_eq(b->nsends, a->nsends);
    for (long i = 0; i < a->nsends; i++) {
        ck_assert_int_eq(algorithm_send_chunk(b, i), algorithm_send_chunk(a, i));
        ck_assert_int_eq(algorithm_send_src(b, i), algorithm_send_src(a, i));
        ck_assert_int_eq(algorithm_send_dst(b, i), algorithm_send_dst(a, i));
        ck_assert_int_eq(algorithm_send_step(b, i), algorithm_send_step(a, i));
        ck_assert_int_eq(algorithm_send_op(b, i), algorithm_send_op(a, i));
    }
    algorithm_free(a);
    algorithm_free(b);

    /* timed sends keep their times */
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 1);
    ck_assert_int_eq(algorithm_new(&c, "x", 3, 1, 2, &a, NULL), CS_OK);
    algorithm_add_timed_send(a, 0, 1, 0, 0, CS_OP_COPY, 0.0, 1.25);
    algorithm_add_timed_send(a, 0, 0, 2, 1, CS_OP_COPY, 1.25, 2.5);
    a->timed_chunk_bytes = 4096.5;
    doc = algorithm_to_json(a);
    text = json_dumps(doc, 0);
    json_decref(doc);
    ck_assert_int_eq(algorithm_parse(text, strlen(text), &b, &err), CS_OK);
    free(text);
    ck_assert(algorithm_is_timed(b));
    ck_assert_double_eq(algorithm_send_start_us(b, 1), 1.25);
    ck_assert_double_eq(algorithm_send_end_us(b, 1), 2.5);
    ck_assert_double_eq(b->timed_chunk_bytes, 4096.5);
    ck_assert_int_eq(b->collective.root, 1);
    algorithm_free(a);
    algorithm_free(b);
    collective_free(&c);
}
END_TEST

START_TEST(load_file_reports_path_and_parses)
{
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_load_file("/nonexistent/alg.json", &a, &err), CS_EIO);
    char path[] = "/tmp/test_algorithm_XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(VALID_DOC, f);
    fclose(f);
    ck_assert_int_eq(algorithm_load_file(path, &a, &err), CS_OK);
    ck_assert_int_eq(a->nsends, 2);
    algorithm_free(a);
    remove(path);
}
END_TEST

START_TEST(clone_is_deep)
{
    cs_algorithm *a = allgather_on_ring(4);
    cs_algorithm *b = NULL;
    ck_assert_int_eq(algorithm_clone(a, &b, NULL), CS_OK);
    ck_assert_int_eq(b->nsends, a->nsends);
    ck_assert_ptr_ne(b->store.chunk.data, a->store.chunk.data);
    SEND_SET(b, 0, chunk, 3);
    ck_assert_int_ne(algorithm_send_chunk(a, 0), 3);
    ck_assert_int_eq(b->global_chunks, 4);
    algorithm_free(a);
    algorithm_free(b);
}
END_TEST

START_TEST(fit_rounds_counts_links_and_shared_sets)
{
    /* 0->1 with 2 lanes, 0->2 with 1 lane, both in a shared set of 2 lanes */
    cs_topology *t = topology_new("fit", 3);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 1, 2, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 0, 2, 1, 1.0, 1.0, true, &err), CS_OK);
    int pairs[2][2] = {{0, 1}, {0, 2}};
    ck_assert_int_eq(topology_add_shared(t, (const int (*)[2])pairs, 2, 2, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_SCATTER, 0);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "fit", 3, 5, 3, &a, &err), CS_OK);
    /* step 0: 5 chunks on 0->1 (2 lanes: ceil(5/2) = 3 rounds; set: 5/2 -> 3) */
    for (int k = 0; k < 5; k++)
        algorithm_add_send(a, 3 * k + 1, 0, 1, 0, CS_OP_COPY);
    /* step 1: 1 on 1->0 and 3 on 0->2: link 0->2 needs 3, set needs ceil(4/2) = 2 */
    algorithm_add_send(a, 1, 1, 0, 1, CS_OP_COPY);
    for (int k = 0; k < 3; k++)
        algorithm_add_send(a, 3 * k + 2, 0, 2, 1, CS_OP_COPY);
    /* step 2: 2 on 0->1 and 2 on 0->2: links need 1 and 2, the set ceil(4/2) = 2 */
    algorithm_add_send(a, 13, 0, 1, 2, CS_OP_COPY);
    algorithm_add_send(a, 4, 0, 1, 2, CS_OP_COPY);
    algorithm_add_send(a, 11, 0, 2, 2, CS_OP_COPY);
    algorithm_add_send(a, 14, 0, 2, 2, CS_OP_COPY);
    ck_assert_int_eq(algorithm_fit_rounds(a, t, &err), CS_OK);
    ck_assert_int_eq(a->rounds_per_step[0], 3);
    ck_assert_int_eq(a->rounds_per_step[1], 3);
    ck_assert_int_eq(a->rounds_per_step[2], 2);
    ck_assert_int_eq(a->rounds, 8);
    /* a send over a missing link is an error naming it */
    algorithm_add_send(a, 0, 1, 2, 0, CS_OP_COPY);
    ck_assert_int_eq(algorithm_fit_rounds(a, t, &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "no link 1->2"));
    algorithm_free(a);
    collective_free(&c);
    topology_free(t);
}
END_TEST

START_TEST(cost_is_alpha_beta_by_hand)
{
    cs_topology *t = topology_new("cost", 3);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 25.0, 0.5, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 1, 2, 2, 50.0, 0.7, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "cost", 3, 6, 3, &a, &err), CS_OK);
    a->rounds_per_step[0] = 2;
    a->rounds_per_step[1] = 2;
    a->rounds_per_step[2] = 3;
    algorithm_update_rounds(a);
    /* alpha = 0.7 (largest), beta = 1 / 25e3 us/byte (slowest lane):
     * 3 * 0.7 + 7/6 * 6e6 / 25e3 = 2.1 + 280 */
    ck_assert_double_eq_tol(algorithm_cost_us(a, t, 6e6), 282.1, 1e-9);
    ck_assert_double_eq_tol(algorithm_chunk_bytes(a, 6e6), 1e6, 1e-9);
    ck_assert_double_eq_tol(algorithm_cost_us(a, t, 0), 2.1, 1e-12);
    algorithm_free(a);
    collective_free(&c);
    topology_free(t);
}
END_TEST

static cs_algorithm *empty_alg(int chunks, int steps, int rounds)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "cost", 3, chunks, steps, &a, NULL), CS_OK);
    a->rounds_per_step[steps - 1] += rounds - steps;
    algorithm_update_rounds(a);
    collective_free(&c);
    return a;
}

START_TEST(result_orders_frontier_and_picks_best_for_size)
{
    cs_topology *t = topology_new("cost", 2);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_result *r = NULL;
    ck_assert_int_eq(result_new("smt", &r, &err), CS_OK);
    /* added out of order: (C=6, S=3, R=7) then (C=2, S=2, R=3) */
    cs_algorithm *bw = empty_alg(6, 3, 7), *lat = empty_alg(2, 2, 3);
    ck_assert_int_eq(result_add(r, bw), CS_OK);
    ck_assert_int_eq(result_add(r, lat), CS_OK);
    ck_assert_int_eq(r->nalgs, 2);
    ck_assert_ptr_eq(r->algs[0], lat);
    ck_assert_ptr_eq(r->algs[1], bw);
    /* alpha = 1 us, beta = 1e-3 us/byte: costs 2 + 1.5e-3 L vs 3 + 7/6e-3 L,
     * equal at L = 3000 bytes */
    ck_assert_ptr_eq(result_best_for_size(r, t, 1000), lat);
    ck_assert_ptr_eq(result_best_for_size(r, t, 10000), bw);

    r->bound_steps = 2;
    r->bound_rounds_per_chunk = 7.0 / 6.0;
    r->synth_seconds = 1.5;
    r->complete = true;
    snprintf(r->reason, sizeof r->reason, "test");
    r->stats = json_pack("{s:i}", "instances", 4);
    json_t *doc = result_to_json(r);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "frontier")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "bounds"), "steps")),
                     2);
    cs_result *back = NULL;
    ck_assert_int_eq(result_from_json(doc, &back, &err), CS_OK);
    json_decref(doc);
    ck_assert_str_eq(back->method, "smt");
    ck_assert_str_eq(back->reason, "test");
    ck_assert_int_eq(back->nalgs, 2);
    ck_assert_int_eq(back->algs[0]->chunks, 2);
    ck_assert_int_eq(back->algs[1]->rounds, 7);
    ck_assert_int_eq(back->bound_steps, 2);
    ck_assert_double_eq_tol(back->bound_rounds_per_chunk, 7.0 / 6.0, 1e-12);
    ck_assert(back->complete);
    ck_assert_int_eq(json_integer_value(json_object_get(back->stats, "instances")), 4);

    /* a bad frontier entry names its path */
    doc = json_pack("{s:s, s:[{s:i}]}", "method", "smt", "frontier", "ranks", 2);
    cs_result *none = NULL;
    ck_assert_int_eq(result_from_json(doc, &none, &err), CS_EINVAL);
    ck_assert_ptr_null(none);
    json_decref(doc);
    ck_assert_int_eq(strncmp(err.field, "frontier[0]", 11), 0);
    ck_assert_ptr_null(result_best_for_size(&(cs_result){0}, t, 1.0));
    result_free(back);
    result_free(r);
    topology_free(t);
}
END_TEST

START_TEST(invert_allgather_gives_verified_reducescatter)
{
    const int P = 5;
    cs_topology *ring = uni_ring(P, false), *rev = uni_ring(P, true);
    cs_algorithm *ag = allgather_on_reversed_ring(P);
    cs_error err;
    ck_assert_int_eq(algorithm_verify(rev, ag, &err), CS_OK);
    cs_algorithm *rs = NULL;
    ck_assert_int_eq(algorithm_invert(ag, &rs, &err), CS_OK);
    ck_assert_int_eq(rs->collective.kind, CS_COLL_REDUCESCATTER);
    ck_assert_int_eq(rs->steps, P - 1);
    ck_assert_int_eq(rs->nsends, ag->nsends);
    for (long i = 0; i < rs->nsends; i++)
        ck_assert_int_eq(algorithm_send_op(rs, i), CS_OP_REDUCE);
    ck_assert_int_eq(algorithm_verify(ring, rs, &err), CS_OK);
    /* on the reversed topology the reversed sends have no links */
    ck_assert_int_eq(algorithm_verify(rev, rs, &err), CS_EVERIFY);

    /* RS + AG = allreduce with P * 1 chunks, verified on the ring */
    cs_algorithm *ag_fwd = allgather_on_ring(P), *ar = NULL;
    ck_assert_int_eq(algorithm_verify(ring, ag_fwd, &err), CS_OK);
    ck_assert_int_eq(algorithm_concat(rs, ag_fwd, &ar, &err), CS_OK);
    ck_assert_int_eq(ar->collective.kind, CS_COLL_ALLREDUCE);
    ck_assert_int_eq(ar->chunks, P);
    ck_assert_int_eq(ar->global_chunks, P);
    ck_assert_int_eq(ar->steps, 2 * (P - 1));
    ck_assert_int_eq(ar->rounds, 2 * (P - 1));
    ck_assert_int_eq(ar->nsends, 2L * P * (P - 1));
    ck_assert_int_eq(algorithm_verify(ring, ar, &err), CS_OK);
    /* the wrong order has no meaning */
    cs_algorithm *bad = NULL;
    ck_assert_int_eq(algorithm_concat(ag_fwd, rs, &bad, &err), CS_EUNSUPPORTED);
    ck_assert_ptr_null(bad);
    /* inverting a combining algorithm is not defined */
    ck_assert_int_eq(algorithm_invert(rs, &bad, &err), CS_EUNSUPPORTED);
    algorithm_free(ar);
    algorithm_free(ag_fwd);
    algorithm_free(rs);
    algorithm_free(ag);
    topology_free(ring);
    topology_free(rev);
}
END_TEST

START_TEST(invert_broadcast_gives_reduce_and_rejects_double_receive)
{
    /* broadcast from 0 on the line 0 - 1 - 2 (bidirectional): a tree */
    cs_topology *t = topology_new("line", 3);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 1, 2, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a = NULL, *inv = NULL;
    ck_assert_int_eq(algorithm_new(&c, "line", 3, 1, 2, &a, &err), CS_OK);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 1, 2, 1, CS_OP_COPY);
    a->rounds_per_step[1] = 2;
    algorithm_update_rounds(a);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    ck_assert_int_eq(algorithm_invert(a, &inv, &err), CS_OK);
    ck_assert_int_eq(inv->collective.kind, CS_COLL_REDUCE);
    ck_assert_int_eq(inv->collective.root, 0);
    ck_assert_int_eq(inv->rounds_per_step[0], 2); /* reversed */
    ck_assert_int_eq(inv->rounds_per_step[1], 1);
    ck_assert_int_eq(algorithm_verify(t, inv, &err), CS_OK);
    algorithm_free(inv);
    /* rank 2 receiving twice (a legal, wasteful broadcast) cannot be inverted */
    algorithm_add_send(a, 0, 1, 2, 1, CS_OP_COPY);
    ck_assert_int_eq(algorithm_invert(a, &inv, &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "receives chunk 0 again"));
    a->nsends--;
    /* nor sending back to the root, which starts with the chunk */
    algorithm_add_send(a, 0, 1, 0, 1, CS_OP_COPY);
    ck_assert_int_eq(algorithm_invert(a, &inv, &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "already starts"));
    algorithm_free(a);
    collective_free(&c);
    topology_free(t);
}
END_TEST

START_TEST(invert_scatter_gives_gather)
{
    cs_topology *t = topology_new("line", 3);
    cs_error err;
    ck_assert_int_eq(topology_add_link(t, 0, 1, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_add_link(t, 1, 2, 1, 1.0, 1.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_SCATTER, 0);
    cs_algorithm *a = NULL, *g = NULL;
    ck_assert_int_eq(algorithm_new(&c, "line", 3, 1, 2, &a, &err), CS_OK);
    /* chunk 1 ends at rank 1, chunk 2 at rank 2 via 1 */
    algorithm_add_send(a, 2, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 1, 0, 1, 1, CS_OP_COPY);
    algorithm_add_send(a, 2, 1, 2, 1, CS_OP_COPY);
    ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
    ck_assert_int_eq(algorithm_invert(a, &g, &err), CS_OK);
    ck_assert_int_eq(g->collective.kind, CS_COLL_GATHER);
    for (long i = 0; i < g->nsends; i++)
        ck_assert_int_eq(algorithm_send_op(g, i), CS_OP_COPY);
    ck_assert_int_eq(algorithm_verify(t, g, &err), CS_OK);
    algorithm_free(a);
    algorithm_free(g);
    collective_free(&c);
    topology_free(t);
}
END_TEST

START_TEST(timed_inversion_and_concat_keep_time_order)
{
    /* the TACOS pattern: a timed allgather on the reversed ring, inverted into
     * a timed reducescatter and followed by a timed allgather */
    const int P = 4;
    cs_topology *ring = uni_ring(P, false);
    cs_algorithm *ag_rev = allgather_on_reversed_ring(P), *ag = allgather_on_ring(P);
    for (long i = 0; i < ag_rev->nsends; i++) {
        SEND_SET(ag_rev, i, start_us, 3.0 * algorithm_send_step(ag_rev, i));
        SEND_SET(ag_rev, i, end_us, 3.0 * algorithm_send_step(ag_rev, i) + 2.0);
        SEND_SET(ag, i, start_us, 3.0 * algorithm_send_step(ag, i));
        SEND_SET(ag, i, end_us, 3.0 * algorithm_send_step(ag, i) + 2.0);
    }
    cs_algorithm *rs = NULL, *ar = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_invert(ag_rev, &rs, &err), CS_OK);
    ck_assert(algorithm_is_timed(rs));
    /* horizon 3*2 + 2 = 8: a send at [0, 2] becomes [6, 8] */
    for (long i = 0; i < rs->nsends; i++) {
        const cs_send sv = algorithm_send(rs, i), *s = &sv;
        ck_assert_double_eq_tol(s->end_us - s->start_us, 2.0, 1e-12);
        ck_assert_double_eq_tol(s->start_us, 3.0 * s->step, 1e-12);
    }
    ck_assert_int_eq(algorithm_verify(ring, rs, &err), CS_OK);
    ck_assert_int_eq(algorithm_concat(rs, ag, &ar, &err), CS_OK);
    ck_assert(algorithm_is_timed(ar));
    /* the allgather starts when the reducescatter's last send ends (8 us) */
    double first_ag = 1e9;
    for (long i = 0; i < ar->nsends; i++)
        if (algorithm_send_op(ar, i) == CS_OP_COPY && algorithm_send_start_us(ar, i) < first_ag)
            first_ag = algorithm_send_start_us(ar, i);
    ck_assert_double_eq_tol(first_ag, 8.0, 1e-12);
    ck_assert_int_eq(algorithm_verify(ring, ar, &err), CS_OK);
    algorithm_free(ar);
    algorithm_free(rs);
    algorithm_free(ag);
    algorithm_free(ag_rev);
    topology_free(ring);
}
END_TEST

static Suite *algorithm_suite(void)
{
    Suite *s = suite_create("algorithm");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, new_sets_header_fields);
    tcase_add_test(tc, add_send_grows_and_keeps_every_send);
    tcase_add_test(tc, send_copies_then_put_in_place);
    tcase_add_test(tc, put_sends_equals_put_send_in_order);
    tcase_add_test(tc, storage_is_narrow_and_exact);
    tcase_add_test(tc, values_widen_refuse_beyond_32_bits_and_truncate);
    tcase_add_test(tc, steps_from_start_times_numbers_distinct_starts);
    tcase_add_test(tc, sort_orders_by_step_chunk_src_dst);
    tcase_add_test(tc, parse_reads_every_field);
    tcase_add_test(tc, parse_errors_name_the_field);
    tcase_add_test(tc, parse_rejects_mixed_timing_and_reads_times);
    tcase_add_test(tc, json_round_trip_keeps_everything);
    tcase_add_test(tc, load_file_reports_path_and_parses);
    tcase_add_test(tc, clone_is_deep);
    tcase_add_test(tc, fit_rounds_counts_links_and_shared_sets);
    tcase_add_test(tc, cost_is_alpha_beta_by_hand);
    tcase_add_test(tc, result_orders_frontier_and_picks_best_for_size);
    tcase_add_test(tc, invert_allgather_gives_verified_reducescatter);
    tcase_add_test(tc, invert_broadcast_gives_reduce_and_rejects_double_receive);
    tcase_add_test(tc, invert_scatter_gives_gather);
    tcase_add_test(tc, timed_inversion_and_concat_keep_time_order);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(algorithm_suite)
