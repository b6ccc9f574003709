/* Deadlock freedom of generated MSCCL programs for every algorithm source
 * (codegen_plan.h, "Order" and "Timed order"), checked by running them in
 * the interpreter with one-chunk FIFOs, stricter than the runtimes' two:
 *  - timed schedules (TACOS, MCF) and hierarchical compositions on tori,
 *    meshes, the DGX-1 and DGX-H100 clusters, for both runtimes, in and out
 *    of place, with their results checked against the collective;
 *  - timed schedules long enough that contiguous chunks merge across
 *    times, where a merged step needs both ends at once;
 *  - hand-written programs in the wrong order (both ends of a channel send
 *    their merged step first; a ring where every rank receives before it
 *    sends), which the interpreter must report as deadlocks naming the
 *    cycle of waits, while the right order of the same steps runs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "check_main.h"
#include "codegen_testutil.h"
#include "hier.h"
#include "mcf.h"
#include "msccl_check.h"
#include "msccl_interp.h"
#include "msccl_xml.h"
#include "tacos.h"
#include "verify.h"

/* Sends steps with cnt > 1 in a document (merged transfers). */
static long merged_sends(const char *xml)
{
    long n = 0;
    for (const char *q = xml; (q = strstr(q, "type=\"s\"")); q++) {
        const char *c = strstr(q, "cnt=\"");
        if (c && strncmp(c, "cnt=\"1\"", 7) != 0)
            n++;
    }
    return n;
}

/* Generates a's document for rt, checks it against the runtime's limits and
 * runs it out of place on doubles and (where allowed) in place on int64:
 * no deadlock, every output right.  Returns the merged send steps. */
static long generate_and_run(const cs_algorithm *a, const cs_topology *t, const cs_collective *c,
                             cs_msccl_runtime rt, const char *label)
{
    cs_error err;
    cs_msccl_options mo;
    msccl_options_default(&mo);
    mo.runtime = rt;
    char *xml;
    size_t len;
    int rc = msccl_xml_generate(a, t, &mo, &xml, &len, &err);
    ck_assert_msg(rc == CS_OK, "%s (%s): %s", label, msccl_runtime_name(rt), err.message);
    cs_msccl_check_stats st;
    rc = msccl_check_limits(xml, len, rt, &st, &err);
    ck_assert_msg(rc == CS_OK, "%s (%s): %s", label, msccl_runtime_name(rt), err.message);
    ck_assert_int_le(st.max_steps, rt == CS_MSCCL_RUNTIME_MSCCL ? 256 : 64);
    cs_msccl_doc *d;
    ck_assert_msg(msccl_doc_parse(xml, len, &d, &err) == CS_OK, "%s: %s", label, err.message);
    for (int mode = 0; mode < 2; mode++) {
        if (mode == 1 && !msccl_doc_inplace(d))
            continue;
        cs_msccl_interp_options o;
        msccl_interp_options_default(&o);
        o.collective = c;
        o.inplace = mode;
        o.type = mode ? CS_INTERP_INT64 : CS_INTERP_DOUBLE;
        cs_msccl_interp_stats is;
        rc = msccl_interp_check(d, &o, &is, &err);
        ck_assert_msg(rc == CS_OK, "%s (%s, %s): %s", label, msccl_runtime_name(rt),
                      mode ? "in place" : "out of place", err.message);
        ck_assert_int_eq(is.cycle_len, 0);
        ck_assert_int_eq(is.max_fifo, 1);
    }
    msccl_doc_free(d);
    long m = merged_sends(xml);
    free(xml);
    return m;
}

typedef struct order_case {
    const char *topo, *method, *kind;
    int chunks;
} order_case;

static void run_case(const order_case *k)
{
    cs_error err;
    cs_topology *t;
    char label[160];
    snprintf(label, sizeof label, "%s %s on %s (%d chunks)", k->kind, k->method, k->topo,
             k->chunks);
    ck_assert_msg(topology_load(k->topo, NULL, &t, &err) == CS_OK, "%s: %s", label, err.message);
    cs_coll_kind kind;
    ck_assert_int_eq(collective_kind_from_name(k->kind, &kind), CS_OK);
    cs_collective c;
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? 0 : -1);
    ck_assert_int_eq(collective_validate(&c, t->ranks, &err), CS_OK);
    cs_result *res = NULL;
    int rc;
    if (!strcmp(k->method, "tacos")) {
        cs_tacos_options to;
        tacos_options_default(&to);
        to.chunks = k->chunks;
        to.trials = 1;
        to.threads = 1;
        to.keep_sends = true;
        rc = tacos_synthesize(t, &c, &to, &res, &err);
    } else if (!strcmp(k->method, "mcf")) {
        cs_mcf_options mo;
        mcf_options_default(&mo);
        mo.chunks = k->chunks;
        mo.time_limit_s = 60;
        rc = mcf_synthesize(t, &c, &mo, &res, &err);
    } else {
        cs_hier_options ho;
        hier_options_default(&ho);
        ho.threads = 1;
        /* "hierarchical+flat": the frontier also holds the flat TACOS
         * schedule (timed) next to the compositions (stepped) */
        if (strstr(k->method, "+flat"))
            ho.flat_max_ranks = t->ranks;
        rc = hier_synthesize(t, &c, &ho, &res, &err);
    }
    ck_assert_msg(rc == CS_OK, "%s: %s", label, err.message);
    ck_assert_int_ge(res->nalgs, 1);
    int timed = 0;
    for (int i = 0; i < res->nalgs; i++) {
        const cs_algorithm *a = res->algs[i];
        ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s: %s", label, err.message);
        /* TACOS and MCF are the timed sources; compositions are stepped */
        timed += algorithm_is_timed(a);
        if (!strstr(k->method, "+flat"))
            ck_assert_int_eq(algorithm_is_timed(a), strcmp(k->method, "hierarchical") != 0);
        char al[200];
        snprintf(al, sizeof al, "%s, algorithm %d", label, i);
        generate_and_run(a, t, &c, CS_MSCCL_RUNTIME_MSCCL, al);
        generate_and_run(a, t, &c, CS_MSCCL_RUNTIME_EXECUTOR, al);
    }
    if (strstr(k->method, "+flat")) /* one flat entry, the rest compositions */
        ck_assert_msg(timed == 1 && res->nalgs >= 2, "%s: %d timed of %d", label, timed,
                      res->nalgs);
    result_free(res);
    collective_free(&c);
    topology_free(t);
}

START_TEST(tacos_schedules_run_without_deadlock)
{
    static const order_case cases[] = {
        {"torus2d:4x4", "tacos", "allgather", 2},
        {"torus2d:4x4", "tacos", "allreduce", 1},
        {"mesh2d:4x4", "tacos", "reducescatter", 2},
        {"mesh2d:3x4", "tacos", "allgather", 3},
        {"dgx1", "tacos", "allgather", 4},
        {"dgx1", "tacos", "allreduce", 2},
        {"dgx1", "tacos", "broadcast", 2},
        {"dgxh100:2", "tacos", "allgather", 2},
        {"dgxh100:2", "tacos", "reducescatter", 1},
        {"ndv2:2", "tacos", "allreduce", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}
END_TEST

START_TEST(hierarchical_schedules_run_without_deadlock)
{
    static const order_case cases[] = {
        {"dgxh100:2", "hierarchical", "allgather", 1},
        {"dgxh100:2", "hierarchical", "reducescatter", 1},
        {"dgxh100:2", "hierarchical", "allreduce", 1},
        {"dgxh100:4", "hierarchical", "allgather", 1},
        {"dgxh100:4", "hierarchical", "broadcast", 1},
        {"ndv2:2", "hierarchical", "allgather", 1},
        {"dgxa100:2", "hierarchical", "reducescatter", 1},
        {"dgxh100:2", "hierarchical+flat", "allgather", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}
END_TEST

START_TEST(mcf_schedules_run_without_deadlock)
{
    static const order_case cases[] = {
        {"torus2d:3x3", "mcf", "allgather", 1},
        {"mesh2d:2x3", "mcf", "alltoall", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        run_case(&cases[i]);
}
END_TEST

/* A two-rank allgather of C chunks per rank over one link each way, timed
 * by hand: rank 0's chunk i goes over [i, i + 1] us, rank 1's over
 * [i * slow, (i + 1) * slow].  With slow > 1 the two directions' messages
 * interleave unevenly in the thread block both share, and with thousands of
 * messages the executor's 64 steps need contiguous chunks merged across
 * times: merged steps on both ends at once. */
static cs_algorithm *two_rank_streams(int C, double slow)
{
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 2, C, 1, &a, &err), CS_OK);
    for (int i = 0; i < C; i++) {
        /* global chunk of rank r's chunk i: i * P + r */
        ck_assert_int_eq(algorithm_add_timed_send(a, (long)i * 2, 0, 1, 0, CS_OP_COPY, i, i + 1.0),
                         CS_OK);
        ck_assert_int_eq(algorithm_add_timed_send(a, (long)i * 2 + 1, 1, 0, 0, CS_OP_COPY,
                                                  i * slow, (i + 1) * slow),
                         CS_OK);
    }
    ck_assert_int_eq(algorithm_sort_by_time(a), CS_OK);
    ck_assert_int_eq(algorithm_steps_from_start_times(a, &err), CS_OK);
    collective_free(&c);
    return a;
}

START_TEST(timed_merged_steps_run_without_deadlock)
{
    cs_topology *t = cgt_topology(2, 1, false);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_error err;
    ck_assert_int_eq(collective_validate(&c, 2, &err), CS_OK);
    /* rank 1 three, five, ten times slower, and rank 0 five times slower
     * (as even speeds, where the directions alternate message by message,
     * nothing merges and the executor's limit refuses such long streams) */
    static const struct {
        int chunks;
        double slow;
    } cases[] = {{1000, 3.0}, {3000, 5.0}, {3000, 10.0}, {2000, 0.2}};
    long merged = 0;
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        cs_algorithm *a = two_rank_streams(cases[k].chunks, cases[k].slow);
        ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s", err.message);
        char label[64];
        snprintf(label, sizeof label, "two streams of %d, slow %.1f", cases[k].chunks,
                 cases[k].slow);
        merged += generate_and_run(a, t, &c, CS_MSCCL_RUNTIME_EXECUTOR, label);
        algorithm_free(a);
    }
    /* the timed merge path is exercised, not only skipped */
    ck_assert_int_gt(merged, 0);
    collective_free(&c);
    topology_free(t);
}
END_TEST

/* ---- hand-written programs: the wrong order and the right one -------------- */

/* A two-rank allgather of C chunks per rank, one thread block per rank for
 * the peer (and one for the local copy): each rank sends its C chunks as
 * one step of cnt C and receives the peer's as one step.  send_first[r]:
 * rank r's block sends before it receives.  Both sending first is the order
 * of a timed schedule keyed by start time on both ends; a step that streams
 * more chunks than the FIFO holds then needs the other end receiving, which
 * is itself sending: a cycle. */
static char *two_rank_doc(int C, const bool send_first[2])
{
    size_t cap = 8192;
    char *out = malloc(cap);
    int n = snprintf(out, cap,
                     "<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"%d\" "
                     "ngpus=\"2\" coll=\"allgather\" inplace=\"0\" outofplace=\"1\">\n",
                     2 * C);
    for (int r = 0; r < 2; r++) {
        char s[256], v[256];
        snprintf(s, sizeof s, "   <step s=\"%%d\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                 "dstoff=\"%d\" cnt=\"%d\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n", r * C, C);
        snprintf(v, sizeof v, "   <step s=\"%%d\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                 "dstoff=\"%d\" cnt=\"%d\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n",
                 (1 - r) * C, C);
        char first[256], second[256];
        snprintf(first, sizeof first, send_first[r] ? s : v, 0);
        snprintf(second, sizeof second, send_first[r] ? v : s, 1);
        n += snprintf(out + n, cap - (size_t)n,
                      " <gpu id=\"%d\" i_chunks=\"%d\" o_chunks=\"%d\" s_chunks=\"0\">\n"
                      "  <tb id=\"0\" send=\"%d\" recv=\"%d\" chan=\"0\">\n%s%s  </tb>\n"
                      "  <tb id=\"1\" send=\"-1\" recv=\"-1\" chan=\"0\">\n"
                      "   <step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                      "dstoff=\"%d\" cnt=\"%d\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
                      "  </tb>\n </gpu>\n",
                      r, C, 2 * C, 1 - r, 1 - r, first, second, r * C, C);
    }
    snprintf(out + n, cap - (size_t)n, "</algo>\n");
    return out;
}

static int run_doc(const char *text, int fifo, cs_msccl_interp_stats *st, cs_error *err)
{
    cs_msccl_doc *d;
    int rc = msccl_doc_parse(text, strlen(text), &d, err);
    ck_assert_msg(rc == CS_OK, "%s", err->message);
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    o.fifo_capacity = fifo;
    rc = msccl_interp_check(d, &o, st, err);
    msccl_doc_free(d);
    return rc;
}

START_TEST(crossing_merged_steps_deadlock_with_a_cycle_of_two)
{
    static const bool wrong[2] = {true, true}, right[2] = {true, false};
    cs_error err;
    cs_msccl_interp_stats st;
    /* both ends send their two-chunk step first: with one-chunk FIFOs each
     * waits for the other to receive */
    char *x = two_rank_doc(2, wrong);
    ck_assert_int_eq(run_doc(x, 1, &st, &err), CS_EVERIFY);
    ck_assert_msg(strstr(err.message, "deadlock: 2 thread blocks cannot proceed; cycle of 2: "
                                      "rank 0 tb 0 step 0 (s, cnt 2) waits for room to send to "
                                      "rank 1 -> rank 1 tb 0 step 0 (s, cnt 2) waits for room "
                                      "to send to rank 0 -> rank 0 tb 0"),
                  "%s", err.message);
    ck_assert_int_eq(st.cycle_len, 2);
    ck_assert_int_eq(st.cycle[0].rank, 0);
    ck_assert_int_eq(st.cycle[0].tb, 0);
    ck_assert_int_eq(st.cycle[0].step, 0);
    ck_assert_int_eq(st.cycle[1].rank, 1);
    ck_assert_int_eq(st.cycle[1].tb, 0);
    /* the runtimes' connections hold two chunks: two-chunk steps fit ... */
    ck_assert_msg(run_doc(x, 2, &st, &err) == CS_OK, "%s", err.message);
    free(x);
    /* ... three do not */
    x = two_rank_doc(3, wrong);
    ck_assert_int_eq(run_doc(x, 2, &st, &err), CS_EVERIFY);
    ck_assert_int_eq(st.cycle_len, 2);
    free(x);
    /* the same steps with one end receiving first (one transfer order on
     * both ends) run with one-chunk FIFOs, every output right */
    x = two_rank_doc(3, right);
    ck_assert_msg(run_doc(x, 1, &st, &err) == CS_OK, "%s", err.message);
    ck_assert_int_eq(st.cycle_len, 0);
    free(x);
}
END_TEST

/* A 3-rank ring allgather (one chunk per rank, two rounds): every rank's
 * forwarding block waits on a flag for its receiving block.  wrong: each
 * rank's first send also waits for its first receive, so every rank
 * receives before anyone sends. */
static char *ring_doc(bool wrong)
{
    size_t cap = 8192;
    char *out = malloc(cap);
    int n = snprintf(out, cap, "<algo name=\"ring\" proto=\"Simple\" nchannels=\"1\" "
                               "nchunksperloop=\"3\" ngpus=\"3\" coll=\"allgather\" inplace=\"0\" "
                               "outofplace=\"1\">\n");
    for (int r = 0; r < 3; r++) {
        int next = (r + 1) % 3, prev = (r + 2) % 3, pprev = (r + 1) % 3;
        n += snprintf(out + n, cap - (size_t)n,
                      " <gpu id=\"%d\" i_chunks=\"1\" o_chunks=\"3\" s_chunks=\"0\">\n"
                      /* block 0: sends to next: own chunk, then the one from prev */
                      "  <tb id=\"0\" send=\"%d\" recv=\"-1\" chan=\"0\">\n"
                      "   <step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                      "dstoff=\"%d\" cnt=\"1\" depid=\"%d\" deps=\"%d\" hasdep=\"0\"/>\n"
                      "   <step s=\"1\" type=\"s\" srcbuf=\"o\" srcoff=\"%d\" dstbuf=\"o\" "
                      "dstoff=\"%d\" cnt=\"1\" depid=\"1\" deps=\"0\" hasdep=\"0\"/>\n"
                      "  </tb>\n"
                      /* block 1: receives from prev: prev's chunk, then pprev's */
                      "  <tb id=\"1\" send=\"-1\" recv=\"%d\" chan=\"0\">\n"
                      "   <step s=\"0\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                      "dstoff=\"%d\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"1\"/>\n"
                      "   <step s=\"1\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                      "dstoff=\"%d\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
                      "  </tb>\n"
                      "  <tb id=\"2\" send=\"-1\" recv=\"-1\" chan=\"0\">\n"
                      "   <step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                      "dstoff=\"%d\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
                      "  </tb>\n </gpu>\n",
                      r, next, r, wrong ? 1 : -1, wrong ? 0 : -1, prev, prev, prev, prev, pprev, r);
    }
    snprintf(out + n, cap - (size_t)n, "</algo>\n");
    return out;
}

START_TEST(ring_receiving_first_deadlocks_with_a_cycle_through_flags)
{
    cs_error err;
    cs_msccl_interp_stats st;
    char *x = ring_doc(false);
    ck_assert_msg(run_doc(x, 1, &st, &err) == CS_OK, "%s", err.message);
    free(x);
    x = ring_doc(true);
    ck_assert_int_eq(run_doc(x, 1, &st, &err), CS_EVERIFY);
    /* rank r's sender waits for its receiver's flag, which waits for the
     * message from the previous rank's sender: six blocks around the ring */
    ck_assert_int_eq(st.cycle_len, 6);
    for (int k = 0; k < 6; k++) {
        const cs_interp_wait *w = &st.cycle[k], *nx = &st.cycle[(k + 1) % 6];
        ck_assert_int_eq(w->step, 0);
        if (w->tb == 0) { /* a sender waits for its own rank's receiver */
            ck_assert_int_eq(nx->rank, w->rank);
            ck_assert_int_eq(nx->tb, 1);
        } else { /* a receiver waits for the previous rank's sender */
            ck_assert_int_eq(nx->rank, (w->rank + 2) % 3);
            ck_assert_int_eq(nx->tb, 0);
        }
    }
    ck_assert_msg(strstr(err.message, "cycle of 6: ") &&
                  strstr(err.message, "waits for thread block 1 step 0") &&
                  strstr(err.message, "waits for a message from rank"),
                  "%s", err.message);
    free(x);
}
END_TEST

/* A block waiting for a message from a block that has finished without
 * sending it is no cycle: the report says so. */
START_TEST(missing_message_is_no_cycle)
{
    /* rank 1 has a nop where its send should be */
    const char *text =
        "<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" nchunksperloop=\"2\" ngpus=\"2\" "
        "coll=\"allgather\" inplace=\"0\" outofplace=\"1\">\n"
        " <gpu id=\"0\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\">\n"
        "  <tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n"
        "   <step s=\"0\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "  </tb>\n </gpu>\n"
        " <gpu id=\"1\" i_chunks=\"1\" o_chunks=\"2\" s_chunks=\"0\">\n"
        "  <tb id=\"0\" send=\"0\" recv=\"0\" chan=\"0\">\n"
        "   <step s=\"0\" type=\"nop\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"0\" depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>\n"
        "  </tb>\n </gpu>\n</algo>\n";
    cs_error err;
    cs_msccl_interp_stats st;
    ck_assert_int_eq(run_doc(text, 1, &st, &err), CS_EVERIFY);
    ck_assert_int_eq(st.cycle_len, 0);
    ck_assert_msg(strstr(err.message, "rank 0 tb 0 step 0 (r) waits for a message from rank 1, "
                                      "which has finished"),
                  "%s", err.message);
}
END_TEST

/* The step types of rank r's block to peer (channel 0), in order, as a
 * string of type names separated by spaces ("s r"). */
static void block_types(const char *xml, int r, int peer, char *out, size_t n)
{
    char gpu[64], tb[64];
    snprintf(gpu, sizeof gpu, "<gpu id=\"%d\"", r);
    snprintf(tb, sizeof tb, "send=\"%d\" recv=\"%d\" chan=\"0\">", peer, peer);
    const char *g = strstr(xml, gpu);
    ck_assert_ptr_nonnull(g);
    const char *t = strstr(g, tb), *end = strstr(g, "</gpu>");
    ck_assert_msg(t && t < end, "rank %d has no block to %d", r, peer);
    const char *tend = strstr(t, "</tb>");
    size_t len = 0;
    out[0] = 0;
    for (const char *q = strstr(t, "type=\""); q && q < tend; q = strstr(q + 1, "type=\"")) {
        const char *v = q + 6, *e = strchr(v, '"');
        len += (size_t)snprintf(out + len, n - len, "%s%.*s", len ? " " : "", (int)(e - v), v);
    }
}

/* Step schedules: in a step, the only message each way on a channel between
 * two ranks is exchanged eagerly, both ends sending first (full duplex on
 * the runtimes), where the transfer order would have one end receive
 * first.  Recursive doubling on fc:4: step 0 swaps one chunk with rank
 * r ^ 1 (eager), step 1 two chunks with rank r ^ 2 (two messages each way:
 * one transfer order on both ends, as before). */
START_TEST(step_exchanges_send_first_on_both_ends)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_load("fc:4", NULL, &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    ck_assert_int_eq(collective_validate(&c, 4, &err), CS_OK);
    cs_algorithm *a;
    ck_assert_msg(baseline_generate("recursive-doubling", t, &c, NULL, &a, &err) == CS_OK, "%s",
                  err.message);
    char *xml;
    size_t len;
    ck_assert_int_eq(msccl_xml_generate(a, t, NULL, &xml, &len, &err), CS_OK);
    char types[128];
    for (int r = 0; r < 4; r++) {
        block_types(xml, r, r ^ 1, types, sizeof types);
        ck_assert_msg(!strcmp(types, "s r"), "rank %d with %d: %s", r, r ^ 1, types);
        block_types(xml, r, r ^ 2, types, sizeof types);
        ck_assert_msg(!strcmp(types, r < (r ^ 2) ? "s s r r" : "r r s s"), "rank %d with %d: %s",
                      r, r ^ 2, types);
    }
    free(xml);
    generate_and_run(a, t, &c, CS_MSCCL_RUNTIME_MSCCL, "recursive doubling on fc:4");
    generate_and_run(a, t, &c, CS_MSCCL_RUNTIME_EXECUTOR, "recursive doubling on fc:4");
    algorithm_free(a);
    collective_free(&c);
    topology_free(t);
}
END_TEST

static Suite *codegen_order_suite(void)
{
    Suite *s = suite_create("codegen_order");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, crossing_merged_steps_deadlock_with_a_cycle_of_two);
    tcase_add_test(tc, ring_receiving_first_deadlocks_with_a_cycle_through_flags);
    tcase_add_test(tc, missing_message_is_no_cycle);
    tcase_add_test(tc, step_exchanges_send_first_on_both_ends);
    tcase_add_test(tc, timed_merged_steps_run_without_deadlock);
    tcase_add_test(tc, tacos_schedules_run_without_deadlock);
    tcase_add_test(tc, hierarchical_schedules_run_without_deadlock);
    tcase_add_test(tc, mcf_schedules_run_without_deadlock);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(codegen_order_suite)
