/* Verification and simulation against independent brute force (issue 10,
 * "verification and simulation speed"): the fast paths of the verifier and
 * the simulator (the 2-byte link finder, the one-pass chunk linking with its
 * sorting fallback, the index-order write-back) must give exactly what the
 * model in simulate.h / verify.h says.  The brute forces here are written
 * from those documents, quadratic and obvious: every send looks at every
 * other send. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "send_order_internal.h"
#include "simulate.h"
#include "tacos.h"
#include "verify.h"

/* A small deterministic generator (tests must not depend on libc's rand). */
static unsigned long long rng_state;
static unsigned rnd(unsigned n)
{
    rng_state = rng_state * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned)((rng_state >> 33) % n);
}

/* ---- link lookups --------------------------------------------------------------- */

/* dense: with link_finder_densify's table (every topology here is small
 * enough), else the binary search. */
static void check_finder_as(const cs_topology *t, bool dense)
{
    link_finder f;
    ck_assert_int_eq(link_finder_init(&f, t), CS_OK);
    if (dense) {
        link_finder_densify(&f, (long)t->ranks * t->ranks);
        ck_assert_msg(f.pos != NULL || f.pos16 != NULL, "%s: no dense table", t->name);
    }
    for (int s = -1; s <= t->ranks; s++)
        for (int d = -1; d <= t->ranks; d++) {
            int want = -1;
            if (s >= 0 && s < t->ranks)
                for (int l = 0; l < t->nlinks; l++)
                    if (t->links[l].src == s && t->links[l].dst == d)
                        want = l;
            ck_assert_msg(link_finder_find(&f, s, d) == want, "%s: %d->%d gives %d, want %d",
                          t->name, s, d, link_finder_find(&f, s, d), want);
        }
    link_finder_free(&f);
}

static void check_finder(const cs_topology *t)
{
    check_finder_as(t, false);
    check_finder_as(t, true);
}

START_TEST(link_finder_finds_every_link_and_nothing_else)
{
    const char *names[] = {"mesh2d:4x4", "ring:5", "dgxh100:2", "dgx1", "torus2d:3x3"};
    cs_error err;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        cs_topology *t = NULL;
        ck_assert_int_eq(topology_builtin(names[k], &t, &err), CS_OK);
        check_finder(t);
        topology_free(t);
    }
    /* out-degrees from 1 to 39 with gaps: the binary search and the scan */
    cs_topology *t = topology_new("hub", 40);
    for (int r = 1; r < 40; r++) {
        ck_assert_int_eq(topology_add_link(t, 0, r, 1, 1.0, 0.0, true, &err), CS_OK);
        for (int d = r + 2; d < 40; d += r)
            ck_assert_int_eq(topology_add_link(t, r, d, 1, 1.0, 0.0, false, &err), CS_OK);
    }
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    check_finder(t);
    topology_free(t);
}
END_TEST

/* The dense table is one byte per rank pair holding a position among the
 * source's out-links, two bytes where a rank has 255 or more out-links (a
 * hub of 299 here, where every position is looked up); fewer lookups than
 * an eighth of the pairs keep the binary search, which still finds every
 * link. */
START_TEST(link_finder_dense_only_where_it_fits)
{
    cs_error err;
    cs_topology *t = topology_new("star300", 300);
    for (int r = 1; r < 300; r++)
        ck_assert_int_eq(topology_add_link(t, 0, r, 1, 1.0, 0.0, true, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    link_finder f;
    ck_assert_int_eq(link_finder_init(&f, t), CS_OK);
    link_finder_densify(&f, 300L * 300);
    ck_assert_ptr_null(f.pos);
    ck_assert_ptr_nonnull(f.pos16);
    link_finder_free(&f);
    check_finder(t);
    topology_free(t);

    ck_assert_int_eq(topology_builtin("mesh2d:4x4", &t, &err), CS_OK);
    ck_assert_int_eq(link_finder_init(&f, t), CS_OK);
    link_finder_densify(&f, 16 * 16 / 8 - 1);
    ck_assert_ptr_null(f.pos);
    link_finder_densify(&f, 16 * 16 / 8);
    ck_assert_ptr_nonnull(f.pos);
    link_finder_free(&f);
    topology_free(t);
}
END_TEST

/* ---- chunk-by-chunk batches ------------------------------------------------------ */

/* send_batches hands out every kept send once, chunk by chunk, in index
 * order within a chunk, and writes results back to the send they came from.
 * 600k sends take several batches on one thread (gathered from per-batch
 * buckets); chunk 7 alone holds more sends than a batch's scratch (which
 * then grows for it, and the batches after it keep the larger size); a
 * third of the sends are not kept.  The reference is
 * a plain stable sort by chunk. */
START_TEST(send_batches_give_every_kept_send_once_by_chunk)
{
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    int P = 64, C = 16;   /* 1024 chunks */
    long n = 600000, G = (long)P * C;
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "none", P, C, 50, &a, &err), CS_OK);
    collective_free(&c);
    ck_assert_int_eq(algorithm_reserve_sends(a, n), CS_OK);
    unsigned char *keep = calloc((size_t)n / 8 + 1, 1);
    for (long i = 0; i < n; i++) {
        long g = i % 4 != 0 ? 7 : (long)rnd((unsigned)G);
        int src = (int)rnd((unsigned)P), dst = (src + 1 + (int)rnd((unsigned)P - 1)) % P;
        ck_assert_int_eq(algorithm_add_send(a, g, src, dst, (int)rnd(50),
                                            rnd(2) ? CS_OP_REDUCE : CS_OP_COPY), CS_OK);
        if (rnd(3) != 0)
            keep[i >> 3] |= (unsigned char)(1u << (i & 7));
    }
    /* the reference order: kept sends by (chunk, index) */
    long *start = calloc((size_t)G + 1, sizeof *start), nk = 0;
    for (long i = 0; i < n; i++)
        if ((keep[i >> 3] >> (i & 7)) & 1) {
            start[algorithm_send_chunk(a, i) + 1]++;
            nk++;
        }
    for (long g = 0; g < G; g++)
        start[g + 1] += start[g];
    uint32_t *want = malloc(sizeof *want * (size_t)nk);
    long *at = malloc(sizeof *at * (size_t)G);
    memcpy(at, start, sizeof *at * (size_t)G);
    for (long i = 0; i < n; i++)
        if ((keep[i >> 3] >> (i & 7)) & 1)
            want[at[algorithm_send_chunk(a, i)]++] = (uint32_t)i;

    send_batches sb;
    ck_assert_int_eq(send_batches_init(&sb, a, keep, false), CS_OK);
    ck_assert_ptr_nonnull(sb.bucket);   /* the per-batch buckets, not the scans */
    uint32_t *col0 = calloc((size_t)n, sizeof *col0), *col1 = calloc((size_t)n, sizeof *col1);
    send_batch b;
    long next_g = 0, batches = 0, seen = 0;
    int rc;
    while ((rc = send_batches_next(&sb, &b)) == CS_OK) {
        batches++;
        ck_assert_int_eq((long)send_batch_chunk(&b, 0), next_g);
        uint32_t nrec = b.begin[b.g1 - b.g0] - b.begin[0];
        uint32_t *pairs = malloc(sizeof *pairs * 2 * ((size_t)nrec + 1));
        for (uint32_t j = 0; j < b.g1 - b.g0; j++) {
            long g = send_batch_chunk(&b, j);
            uint32_t len;
            const send_rec *r = send_batch_recs(&b, j, &len);
            ck_assert_int_eq((long)len, start[g + 1] - start[g]);
            for (uint32_t q = 0; q < len; q++) {
                uint32_t i = want[start[g] + q];
                ck_assert_uint_eq(send_rec_index(&r[q]), i);
                ck_assert_int_eq(r[q].src, algorithm_send_src(a, i));
                ck_assert_int_eq(r[q].dst, algorithm_send_dst(a, i));
                ck_assert_uint_eq(r[q].t0, (uint32_t)algorithm_send_step(a, i));
                ck_assert_int_eq(send_rec_op(&r[q]), algorithm_send_op(a, i));
                size_t p = (size_t)(r + q - b.recs);
                pairs[2 * p] = i + 1;
                pairs[2 * p + 1] = (uint32_t)g;
            }
            seen += len;
        }
        send_batch_write_back(&sb, &b, pairs, col0, col1);
        free(pairs);
        next_g = send_batch_chunk(&b, b.g1 - b.g0 - 1) + 1;
    }
    ck_assert_int_eq(rc, SEND_BATCHES_DONE);
    ck_assert_int_eq(next_g, G);
    ck_assert_int_eq(seen, nk);
    ck_assert_int_ge(batches, 3);
    for (long i = 0; i < n; i++) {
        bool k = (keep[i >> 3] >> (i & 7)) & 1;
        ck_assert_uint_eq(col0[i], k ? (uint32_t)i + 1 : 0);
        ck_assert_uint_eq(col1[i], k ? (uint32_t)algorithm_send_chunk(a, i) : 0);
    }
    send_batches_free(&sb);
    free(col0);
    free(col1);
    free(want);
    free(at);
    free(start);
    free(keep);
    algorithm_free(a);
}
END_TEST

/* ---- random schedules ---------------------------------------------------------------- */

/* A connected random topology: a bidirectional ring plus random one-way
 * links, lanes 1-3, 1-4 GB/s, alpha 0-1 us, and two document shared sets. */
static cs_topology *random_topology(int P)
{
    cs_topology *t = topology_new("random", P);
    cs_error err;
    unsigned char *has = calloc((size_t)P * P, 1);
    for (int r = 0; r < P; r++) {
        int d = (r + 1) % P;
        ck_assert_int_eq(topology_add_link(t, r, d, 1 + (int)rnd(3), 1.0 + rnd(4),
                                           0.5 * rnd(3), false, &err), CS_OK);
        ck_assert_int_eq(topology_add_link(t, d, r, 1 + (int)rnd(3), 1.0 + rnd(4),
                                           0.5 * rnd(3), false, &err), CS_OK);
        has[r * P + d] = has[d * P + r] = 1;
    }
    for (int k = 0; k < P; k++) {
        int s = (int)rnd((unsigned)P), d = (int)rnd((unsigned)P);
        if (s == d || has[s * P + d])
            continue;
        has[s * P + d] = 1;
        ck_assert_int_eq(topology_add_link(t, s, d, 1 + (int)rnd(2), 1.0 + rnd(4), 0.5 * rnd(3),
                                           false, &err), CS_OK);
    }
    int pairs[3][2] = {{0, 1}, {1, 2}, {2, 3}};
    ck_assert_int_eq(topology_add_shared(t, (const int(*)[2])pairs, 3, 1, &err), CS_OK);
    int pairs2[2][2] = {{1, 0}, {P - 1, 0}};
    ck_assert_int_eq(topology_add_shared(t, (const int(*)[2])pairs2, 2, 2, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    free(has);
    return t;
}

typedef struct bsend {
    long chunk;
    int src, dst, step;
    double start, end;
} bsend;

/* Processing order, from simulate.h: (step, list position); timed (start,
 * end, list position). */
static const bsend *sort_base;
static bool sort_timed;
static int cmp_processing(const void *pa, const void *pb)
{
    int i = *(const int *)pa, j = *(const int *)pb;
    const bsend *x = &sort_base[i], *y = &sort_base[j];
    if (sort_timed) {
        if (x->start != y->start)
            return x->start < y->start ? -1 : 1;
        if (x->end != y->end)
            return x->end < y->end ? -1 : 1;
    } else if (x->step != y->step) {
        return x->step < y->step ? -1 : 1;
    }
    return i < j ? -1 : i > j;
}

/* The model of simulate.h, quadratically: in processing order, a send
 * starts when every receive of its chunk at its src placed before it has
 * finished (earlier step; timed: ending by its start + 1e-6), and one lane
 * of its link and of each of its link's shared sets is free; it takes the
 * earliest-free lane of each. */
static double brute_simulate(const cs_topology *t, const bsend *s, int n, bool timed,
                             double chunk)
{
    int *ord = malloc(sizeof(int) * (size_t)n);
    double *fin = malloc(sizeof(double) * (size_t)n);
    bool *done = calloc((size_t)n, sizeof(bool));
    double *lane = calloc((size_t)(t->nlinks + t->nshared) * 8, sizeof(double));
    for (int k = 0; k < n; k++)
        ord[k] = k;
    sort_base = s;
    sort_timed = timed;
    qsort(ord, (size_t)n, sizeof *ord, cmp_processing);
    double end_time = 0.0;
    for (int k = 0; k < n; k++) {
        const bsend *x = &s[ord[k]];
        double start = 0.0;
        for (int j = 0; j < n; j++) {
            const bsend *y = &s[j];
            bool before = timed ? y->end <= x->start + 1e-6 : y->step < x->step;
            if (done[j] && y->chunk == x->chunk && y->dst == x->src && before && fin[j] > start)
                start = fin[j];
        }
        int l = -1;
        for (int q = 0; q < t->nlinks; q++)
            if (t->links[q].src == x->src && t->links[q].dst == x->dst)
                l = q;
        ck_assert_int_ge(l, 0);
        /* resources: the link, then every shared set holding it; lanes[r * 8 + m] */
        int res[8], nres = 0, lanes[8];
        res[nres] = l;
        lanes[nres++] = t->links[l].lanes;
        for (int m = 0; m < t->nshared; m++)
            for (int q = 0; q < t->shared[m].nlinks; q++)
                if (t->shared[m].links[q] == l) {
                    res[nres] = t->nlinks + m;
                    lanes[nres++] = t->shared[m].lanes;
                }
        int pick[8];
        for (int r = 0; r < nres; r++) {
            pick[r] = 0;
            for (int m = 1; m < lanes[r]; m++)
                if (lane[res[r] * 8 + m] < lane[res[r] * 8 + pick[r]])
                    pick[r] = m;
            if (lane[res[r] * 8 + pick[r]] > start)
                start = lane[res[r] * 8 + pick[r]];
        }
        double f = start + (t->links[l].alpha_us + chunk / (t->links[l].gbps * 1e3));
        for (int r = 0; r < nres; r++)
            lane[res[r] * 8 + pick[r]] = f;
        fin[ord[k]] = f;
        done[ord[k]] = true;
        if (f > end_time)
            end_time = f;
    }
    free(ord);
    free(fin);
    free(done);
    free(lane);
    return end_time;
}

/* n random sends over existing links of t; timed ones on an integer grid
 * (durations >= 1, so the 1e-6 slack never decides).  Chunks are few, so
 * ranks receive a chunk several times and send it several times. */
static bsend *random_sends(const cs_topology *t, int n, long G, int S, bool timed)
{
    bsend *s = malloc(sizeof *s * (size_t)n);
    for (int k = 0; k < n; k++) {
        const cs_link *l = &t->links[rnd((unsigned)t->nlinks)];
        s[k].chunk = (long)rnd((unsigned)G);
        s[k].src = l->src;
        s[k].dst = l->dst;
        s[k].step = (int)rnd((unsigned)S);
        s[k].start = timed ? (double)rnd(30) : NAN;
        s[k].end = timed ? s[k].start + 1 + rnd(6) : NAN;
    }
    return s;
}

static int cmp_bsend_processing(const void *pa, const void *pb)
{
    const bsend *x = pa, *y = pb;
    if (sort_timed) {
        if (x->start != y->start)
            return x->start < y->start ? -1 : 1;
        return x->end < y->end ? -1 : x->end > y->end;
    }
    return x->step < y->step ? -1 : x->step > y->step;
}

static cs_algorithm *to_algorithm(const cs_topology *t, const bsend *s, int n, int chunks, int S,
                                  bool timed)
{
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    cs_error err;
    ck_assert_int_eq(algorithm_new(&c, t->name, t->ranks, chunks, S, &a, &err), CS_OK);
    collective_free(&c);
    for (int k = 0; k < n; k++) {
        if (timed)
            ck_assert_int_eq(algorithm_add_timed_send(a, s[k].chunk, s[k].src, s[k].dst, s[k].step,
                                                      CS_OP_COPY, s[k].start, s[k].end), CS_OK);
        else
            ck_assert_int_eq(algorithm_add_send(a, s[k].chunk, s[k].src, s[k].dst, s[k].step,
                                                CS_OP_COPY), CS_OK);
    }
    return a;
}

/* Random schedules, in processing order (the one-pass linking) and shuffled
 * (the sorting fallback), timed and by steps: the simulated time equals the
 * brute force's to the bit. */
START_TEST(simulated_time_equals_brute_force_on_random_schedules)
{
    rng_state = 12345;
    int cases = 0;
    for (int round = 0; round < 240; round++) {
        int P = 4 + (int)rnd(7), chunks = 1 + (int)rnd(2);
        bool timed = round % 2, sorted = (round / 2) % 2;
        cs_topology *t = random_topology(P);
        long G = (long)P * chunks;
        int S = 1 + (int)rnd(8);
        int n = 1 + (int)rnd(120);
        bsend *s = random_sends(t, n, G, S, timed);
        if (sorted) {
            sort_timed = timed;
            qsort(s, (size_t)n, sizeof *s, cmp_bsend_processing);
        }
        cs_algorithm *a = to_algorithm(t, s, n, chunks, S, timed);
        double bytes = 1000.0 * (1 + rnd(4));
        cs_sim_result r;
        cs_error err;
        ck_assert_int_eq(simulate_algorithm(t, a, bytes, &r, &err), CS_OK);
        double want = brute_simulate(t, s, n, timed, bytes / chunks);
        ck_assert_msg(r.time_us == want, "round %d (P %d, %d sends, %s, %s): %.17g us, brute "
                      "force %.17g", round, P, n, timed ? "timed" : "steps",
                      sorted ? "in order" : "shuffled", r.time_us, want);
        sim_result_free(&r);
        algorithm_free(a);
        free(s);
        topology_free(t);
        cases++;
    }
    ck_assert_int_eq(cases, 240);
}
END_TEST

/* The same at a size where the chunk-by-chunk passes run in several batches
 * and on several threads (> 2^20 sends): a ring allgather pipelined over
 * many chunks, in order and with the list reversed. */
START_TEST(simulated_time_equals_brute_force_over_batches)
{
    /* brute force on a 1M-send schedule is quadratic: instead, a schedule
     * whose time is known in closed form.  Ring of P ranks, one 1-lane link
     * r -> r+1 each, alpha 0, 1 GB/s, 1000-byte chunks (1 us per hop).  Each
     * rank holds `per` chunks (allgather: chunk g starts at rank g % P); in
     * step s = b (P - 1) + h, rank r forwards hop h of chunk b P + (r - h mod
     * P).  So every link carries exactly one chunk per step, every hop waits
     * for the hop before it in the step before, and step s runs from s to
     * s + 1 us: the collective ends at S = per (P - 1) us. */
    int P = 64, per = 270;   /* (P - 1) P per sends > 2^20: several batches and threads */
    cs_topology *t = topology_new("ring", P);
    cs_error err;
    for (int r = 0; r < P; r++)
        ck_assert_int_eq(topology_add_link(t, r, (r + 1) % P, 1, 1.0, 0.0, false, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    int S = per * (P - 1);
    for (int reversed = 0; reversed < 2; reversed++) {
        cs_collective c;
        collective_init(&c, CS_COLL_ALLGATHER, -1);
        cs_algorithm *a = NULL;
        ck_assert_int_eq(algorithm_new(&c, "ring", P, per, S, &a, &err), CS_OK);
        collective_free(&c);
        long n = (long)S * P;
        ck_assert_int_eq(algorithm_reserve_sends(a, n), CS_OK);
        for (long k = 0; k < n; k++) {
            long q = reversed ? n - 1 - k : k;   /* reversed: the sorting fallback */
            int s = (int)(q / P), r = (int)(q % P);
            int b = s / (P - 1), h = s % (P - 1);
            long g = (long)b * P + ((r - h) % P + P) % P;
            ck_assert_int_eq(algorithm_add_send(a, g, r, (r + 1) % P, s, CS_OP_COPY), CS_OK);
        }
        ck_assert_int_ge(a->nsends, 1L << 20);
        cs_sim_result r;
        ck_assert_int_eq(simulate_algorithm(t, a, 1000.0 * per, &r, &err), CS_OK);
        ck_assert_msg(r.time_us == (double)S, "%s: %.17g us, want %d",
                      reversed ? "reversed" : "in order", r.time_us, S);
        ck_assert_int_eq(algorithm_verify(t, a, &err), CS_OK);
        sim_result_free(&r);
        ck_assert_int_eq(algorithm_verify_simulate(t, a, 1000.0 * per, &r, NULL, &err), CS_OK);
        ck_assert_msg(r.time_us == (double)S, "verify_simulate, %s: %.17g us, want %d",
                      reversed ? "reversed" : "in order", r.time_us, S);
        sim_result_free(&r);
        /* two bad sends, one in each half of the index range (checked on two
         * threads): reported in index order, both, first one first */
        long bad[2] = {10, n - 10};
        for (int q = 0; q < 2; q++) {
            cs_send x = algorithm_send(a, bad[q]);
            x.chunk = (long)per * P;   /* out of range */
            ck_assert_int_eq(algorithm_set_send(a, bad[q], &x), CS_OK);
        }
        cs_verify_report rep;
        ck_assert_int_eq(algorithm_verify_report(t, a, &rep, &err), CS_EVERIFY);
        char want0[64], want1[64];
        snprintf(want0, sizeof want0, "send %ld ", bad[0]);
        snprintf(want1, sizeof want1, "send %ld ", bad[1]);
        ck_assert_int_ge(rep.nreasons, 2);
        ck_assert_msg(strncmp(rep.reasons[0], want0, strlen(want0)) == 0, "%s", rep.reasons[0]);
        ck_assert_msg(strncmp(rep.reasons[1], want1, strlen(want1)) == 0, "%s", rep.reasons[1]);
        ck_assert_str_eq(err.field, "sends[10]");
        ck_assert_int_eq(algorithm_verify_simulate(t, a, 1000.0 * per, &r, NULL, &err),
                         CS_EVERIFY);
        ck_assert_msg(strncmp(err.message, want0, strlen(want0)) == 0, "%s", err.message);
        algorithm_free(a);
    }
    topology_free(t);
}
END_TEST

/* TACOS schedules (valid, timed, one arrival per rank and chunk, sends
 * fanning out) on small meshes and tori: the verifier-and-simulator walk
 * gives the brute force's time, and so does the simulator alone. */
START_TEST(verify_simulate_equals_brute_force_on_tacos_schedules)
{
    const char *names[] = {"mesh2d:4x4", "torus2d:3x3", "ring:6", "mesh2d:3x5"};
    cs_error err;
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        for (int chunks = 1; chunks <= 2; chunks++) {
            cs_topology *t = NULL;
            ck_assert_int_eq(topology_builtin(names[k], &t, &err), CS_OK);
            cs_collective c;
            collective_init(&c, CS_COLL_ALLGATHER, -1);
            cs_tacos_options opt;
            tacos_options_default(&opt);
            opt.keep_sends = true;
            opt.chunks = chunks;
            opt.trials = 1;
            cs_result *res = NULL;
            ck_assert_int_eq(tacos_synthesize(t, &c, &opt, &res, &err), CS_OK);
            const cs_algorithm *a = res->algs[0];
            ck_assert(algorithm_is_timed(a));
            int n = (int)a->nsends;
            bsend *s = malloc(sizeof *s * (size_t)n);
            for (int i = 0; i < n; i++) {
                cs_send x = algorithm_send(a, i);
                s[i] = (bsend){x.chunk, x.src, x.dst, x.step, x.start_us, x.end_us};
            }
            double bytes = 1 << 20;
            double want = brute_simulate(t, s, n, true, bytes / a->chunks);
            cs_sim_result r1, r2;
            double vs = -1;
            ck_assert_int_eq(algorithm_verify_simulate(t, a, bytes, &r1, &vs, &err), CS_OK);
            ck_assert_int_eq(simulate_algorithm(t, a, bytes, &r2, &err), CS_OK);
            ck_assert_msg(r1.time_us == want && r2.time_us == want, "%s, %d chunks: %.17g / %.17g "
                          "us, brute force %.17g", names[k], chunks, r1.time_us, r2.time_us, want);
            ck_assert(vs >= 0);
            ck_assert(r1.total_bytes == r2.total_bytes && r1.max_utilization == r2.max_utilization);
            for (int l = 0; l < t->nlinks; l++)
                ck_assert(r1.link_busy_us[l] == r2.link_busy_us[l]);
            sim_result_free(&r1);
            sim_result_free(&r2);
            free(s);
            result_free(res);
            collective_free(&c);
            topology_free(t);
        }
}
END_TEST

/* An invalid schedule: the walk refuses it exactly as algorithm_verify
 * does, with nothing simulated. */
START_TEST(verify_simulate_refuses_what_verify_refuses)
{
    cs_error err, err2;
    cs_topology *t = NULL;
    ck_assert_int_eq(topology_builtin("ring:4", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_new(&c, "ring:4", 4, 1, 3, &a, &err), CS_OK);
    /* chunk 0 (at rank 0) goes 0->1->2->3, but 2->3 happens in step 1,
     * before rank 2 has it (it arrives at the end of step 1) */
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 1, 2, 1, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 2, 3, 1, CS_OP_COPY), CS_OK);
    cs_sim_result r;
    ck_assert_int_eq(algorithm_verify_simulate(t, a, 1e6, &r, NULL, &err), CS_EVERIFY);
    ck_assert_int_eq(algorithm_verify(t, a, &err2), CS_EVERIFY);
    ck_assert_str_eq(err.message, err2.message);
    ck_assert(r.link_busy_us == NULL && r.time_us == 0.0);
    ck_assert_int_eq(algorithm_verify_simulate(t, a, -1.0, &r, NULL, &err), CS_EINVAL);
    algorithm_free(a);
    /* two problems of different passes: chunks 0 and 3 over the 1-lane link
     * 0->1 in step 0 (bandwidth), and chunk 3 is not at rank 0 before step 0
     * (causality; found later, by the value replay).
     * algorithm_verify names the bandwidth problem first; so must the walk. */
    ck_assert_int_eq(algorithm_new(&c, "ring:4", 4, 1, 3, &a, &err), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_add_send(a, 3, 0, 1, 0, CS_OP_COPY), CS_OK);
    ck_assert_int_eq(algorithm_verify_simulate(t, a, 1e6, &r, NULL, &err), CS_EVERIFY);
    ck_assert_int_eq(algorithm_verify(t, a, &err2), CS_EVERIFY);
    ck_assert_str_eq(err.message, err2.message);
    ck_assert_str_eq(err.field, err2.field);
    ck_assert_msg(strstr(err.message, "lanes") != NULL, "%s", err.message);
    algorithm_free(a);
    collective_free(&c);
    topology_free(t);
}
END_TEST

static Suite *vsim_suite(void)
{
    Suite *s = suite_create("vsim");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, link_finder_finds_every_link_and_nothing_else);
    tcase_add_test(tc, link_finder_dense_only_where_it_fits);
    tcase_add_test(tc, send_batches_give_every_kept_send_once_by_chunk);
    tcase_add_test(tc, simulated_time_equals_brute_force_on_random_schedules);
    tcase_add_test(tc, simulated_time_equals_brute_force_over_batches);
    tcase_add_test(tc, verify_simulate_equals_brute_force_on_tacos_schedules);
    tcase_add_test(tc, verify_simulate_refuses_what_verify_refuses);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(vsim_suite)
