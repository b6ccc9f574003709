/* Tests of the MSCCL XML generator: document structure derived by hand for
 * small schedules, runtime names and limits, channels, byte ranges. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "baseline.h"
#include "check_main.h"
#include "cluster_e2e.h"
#include "codegen_testutil.h"
#include "hier.h"
#include "msccl_check.h"
#include "msccl_interp.h"
#include "codegen_plan.h"
#include "msccl_xml.h"
#include "verify.h"

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle))
        n++;
    return n;
}

static int gen(const cs_algorithm *a, const cs_topology *t, cs_msccl_runtime rt, char **out,
               cs_error *err)
{
    cs_msccl_options o;
    msccl_options_default(&o);
    o.runtime = rt;
    return msccl_xml_generate(a, t, &o, out, NULL, err);
}

/* 3 ranks on a one-way ring 0->1->2->0, allgather with 1 chunk. */
static cs_algorithm *ring3_allgather(cs_topology **topo)
{
    cs_error err;
    cs_topology *t = topology_new("ring3", 3);
    for (int r = 0; r < 3; r++)
        ck_assert_int_eq(topology_add_link(t, r, (r + 1) % 3, 1, 25.0, 0.7, false, &err), CS_OK);
    ck_assert_int_eq(topology_finalize(t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "ring3", 3, 1, 2, &a, &err), CS_OK);
    for (int r = 0; r < 3; r++) {
        algorithm_add_send(a, r, r, (r + 1) % 3, 0, CS_OP_COPY);          /* own chunk */
        algorithm_add_send(a, (r + 2) % 3, r, (r + 1) % 3, 1, CS_OP_COPY); /* forward */
    }
    *topo = t;
    return a;
}

START_TEST(ring_allgather_document_matches_hand_lowering)
{
    cs_topology *t;
    cs_algorithm *a = ring3_allgather(&t);
    cs_error err;
    int rc;
    char *xml;
    rc = gen(a, t, CS_MSCCL_RUNTIME_AUTO, &xml, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_int_eq(count(xml, "<algo "), 1);
    ck_assert_ptr_nonnull(strstr(xml, "nchannels=\"1\" nchunksperloop=\"3\" ngpus=\"3\" "
                                      "coll=\"allgather\" inplace=\"1\" outofplace=\"1\""));
    ck_assert_int_eq(count(xml, "<gpu id="), 3);
    /* Rank 0, derived by hand: block 0 sends to 1, block 1 receives from 2,
     * block 2 copies its own chunk from input to output. */
    const char *g0 = strstr(xml, "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"3\" s_chunks=\"0\">");
    ck_assert_ptr_nonnull(g0);
    const char *g1 = strstr(g0, "<gpu id=\"1\"");
    ck_assert_ptr_nonnull(g1);
    size_t n0 = (size_t)(g1 - g0);
    char *rank0 = strndup(g0, n0);
    static const char *const expected[] = {
        "<tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">",
        /* own chunk from the input into rank 1's output slot 0 */
        "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" "
        "depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>",
        /* forwards chunk 2, which block 1 received in its step 0 */
        "<step s=\"1\" type=\"s\" srcbuf=\"o\" srcoff=\"2\" dstbuf=\"o\" dstoff=\"2\" cnt=\"1\" "
        "depid=\"1\" deps=\"0\" hasdep=\"0\"/>",
        "<tb id=\"1\" send=\"-1\" recv=\"2\" chan=\"0\">",
        "<step s=\"0\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"2\" cnt=\"1\" "
        "depid=\"-1\" deps=\"-1\" hasdep=\"1\"/>",
        /* chunk 1 comes from rank 2's output slot 1 */
        "<step s=\"1\" type=\"r\" srcbuf=\"o\" srcoff=\"1\" dstbuf=\"o\" dstoff=\"1\" cnt=\"1\" "
        "depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>",
        /* the own chunk's copy into the output: in place it is the same memory
         * holding the same value, so it need not wait for the send reading it */
        "<tb id=\"2\" send=\"-1\" recv=\"-1\" chan=\"0\">",
        "<step s=\"0\" type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"1\" "
        "depid=\"-1\" deps=\"-1\" hasdep=\"0\"/>",
    };
    const char *at = rank0;
    for (size_t k = 0; k < sizeof expected / sizeof expected[0]; k++) {
        const char *f = strstr(at, expected[k]);
        ck_assert_msg(f != NULL, "missing (in order) %s\nin\n%s", expected[k], rank0);
        at = f + 1;
    }
    ck_assert_int_eq(count(rank0, "<step "), 5);
    ck_assert_int_eq(count(rank0, "<tb "), 3);
    free(rank0);
    /* the old runtime's tokenizer: no tabs, no declaration, "/>" after a quote */
    ck_assert_ptr_null(strchr(xml, '\t'));
    ck_assert_ptr_null(strstr(xml, "<?xml"));
    ck_assert_ptr_null(strstr(xml, " />"));
    free(xml);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(collective_names_follow_the_runtime)
{
    cs_topology *t = cgt_topology(4, 1, true);
    ck_assert_ptr_nonnull(t);
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_REDUCESCATTER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    int rc;
    char *x1;
    rc = gen(a, t, CS_MSCCL_RUNTIME_MSCCL, &x1, &err);
    ck_assert_int_eq(rc, CS_OK);
    char *x2;
    rc = gen(a, t, CS_MSCCL_RUNTIME_EXECUTOR, &x2, &err);
    ck_assert_int_eq(rc, CS_OK);
    char *x3;
    rc = gen(a, t, CS_MSCCL_RUNTIME_AUTO, &x3, &err);
    ck_assert_int_eq(rc, CS_OK);
    ck_assert_ptr_nonnull(strstr(x1, "coll=\"reduce_scatter\""));
    ck_assert_ptr_nonnull(strstr(x2, "coll=\"reducescatter\""));
    ck_assert_ptr_nonnull(strstr(x3, "coll=\"reducescatter\""));
    /* reducescatter: input one block per rank, output one block */
    ck_assert_ptr_nonnull(strstr(x1, "i_chunks=\"4\" o_chunks=\"1\""));
    free(x1);
    free(x2);
    free(x3);
    algorithm_free(a);
    ck_assert_str_eq(msccl_coll_name(CS_COLL_GATHER, CS_MSCCL_RUNTIME_MSCCL), "custom");
    ck_assert_str_eq(msccl_coll_name(CS_COLL_GATHER, CS_MSCCL_RUNTIME_EXECUTOR), "gather");
    ck_assert_ptr_null(msccl_coll_name(CS_COLL_CUSTOM, CS_MSCCL_RUNTIME_EXECUTOR));
    cs_msccl_runtime rt;
    ck_assert_int_eq(msccl_runtime_from_name("msccl-executor", &rt, &err), CS_OK);
    ck_assert_int_eq(rt, CS_MSCCL_RUNTIME_EXECUTOR);
    ck_assert_int_eq(msccl_runtime_from_name("nccl", &rt, &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "msccl-executor"));
    topology_free(t);
}
END_TEST

/* Broadcast from rank 0 to rank 1, one chunk per step: a block with n steps.
 * stride 1 sends the chunks in order (neighbours in the buffers follow each
 * other); a stride coprime with n sends chunk (s * stride) % n in step s, so
 * no two consecutive messages are contiguous. */
static cs_algorithm *long_broadcast_strided(int n, int stride)
{
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 2, n, n, &a, &err), CS_OK);
    for (int s = 0; s < n; s++)
        algorithm_add_send(a, (long)s * stride % n, 0, 1, s, CS_OP_COPY);
    return a;
}

static cs_algorithm *long_broadcast(int n)
{
    return long_broadcast_strided(n, 1);
}

static void interp_ok(const char *xml, const cs_collective *c)
{
    cs_error err;
    cs_msccl_doc *d;
    ck_assert_msg(msccl_doc_parse(xml, strlen(xml), &d, &err) == CS_OK, "%s", err.message);
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    o.collective = c;
    ck_assert_msg(msccl_interp_check(d, &o, NULL, &err) == CS_OK, "%s", err.message);
    msccl_doc_free(d);
}

/* The checker (counting on the text) accepts the document for rt. */
static void limits_ok(const char *xml, cs_msccl_runtime rt, cs_msccl_check_stats *st)
{
    cs_error err;
    ck_assert_msg(msccl_check_limits(xml, strlen(xml), rt, st, &err) == CS_OK, "%s: %s",
                  msccl_runtime_name(rt), err.message);
}

START_TEST(step_limits_spread_channels_then_merge_then_give_elimit)
{
    cs_topology *t = cgt_topology(2, 1, false);
    cs_error err;
    int rc;
    char *x;
    cs_msccl_check_stats st;
    /* 70 steps: fits the old runtime on one channel; the executor's 64 steps
     * per block need the link's messages dealt over 2 channels */
    cs_algorithm *a = long_broadcast(70);
    rc = gen(a, t, CS_MSCCL_RUNTIME_MSCCL, &x, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(x, "nchannels=\"1\""));
    limits_ok(x, CS_MSCCL_RUNTIME_MSCCL, &st);
    ck_assert_int_eq(st.max_steps, 70);
    free(x);
    rc = gen(a, t, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(x, "nchannels=\"2\""));
    ck_assert_ptr_nonnull(strstr(x, "<step s=\"34\" type=\"s\""));
    ck_assert_ptr_null(strstr(x, "<step s=\"35\" type=\"s\""));
    limits_ok(x, CS_MSCCL_RUNTIME_EXECUTOR, &st);
    /* spreading was enough: every message is its own step (only the root's
     * final copy moves its 70 contiguous chunks in one step) */
    ck_assert_int_eq(count(x, "type=\"s\""), 70);
    ck_assert_int_eq(count(x, "type=\"cpy\""), 1);
    interp_ok(x, &a->collective);
    free(x);
    algorithm_free(a);
    /* 2100 steps: more than 32 channels x 64 steps.  The chunks are
     * neighbours in the buffers, so the executor's document merges them
     * across the schedule's steps into runs of up to 71 chunks (cnt) before
     * dealing: 30 runs (29 x 71 + 41), one per channel */
    a = long_broadcast(2100);
    rc = gen(a, t, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(x, "nchannels=\"30\""));
    /* both ends of 29 full runs, and the root's 2100-chunk copy from i to o */
    ck_assert_int_eq(count(x, "cnt=\"71\""), 3 * 29);
    limits_ok(x, CS_MSCCL_RUNTIME_EXECUTOR, &st);
    ck_assert_int_gt(st.max_cnt, 1);
    ck_assert_int_le(st.max_cnt, 71);
    ck_assert_int_le(st.max_steps, 64);
    interp_ok(x, &a->collective);
    free(x);
    rc = gen(a, t, CS_MSCCL_RUNTIME_MSCCL, &x, &err); /* 16 channels x <= 224 messages */
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(x, "nchannels=\"16\""));
    limits_ok(x, CS_MSCCL_RUNTIME_MSCCL, &st);
    interp_ok(x, &a->collective);
    free(x);
    algorithm_free(a);
    /* the same 2100 chunks in a scattered order: nothing can merge, so the
     * executor refuses, naming the rank, the limit, the value, and the way out */
    a = long_broadcast_strided(2100, 1031);
    rc = gen(a, t, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err);
    ck_assert_int_eq(rc, CS_ELIMIT);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(err.message, "rank 0") && strstr(err.message, "s <= 63") &&
                  strstr(err.message, "msccl-executor") && strstr(err.message, "32 channels") &&
                  strstr(err.message, "hierarchical"), "%s", err.message);
    rc = gen(a, t, CS_MSCCL_RUNTIME_AUTO, &x, &err);
    ck_assert_int_eq(rc, CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "both runtimes"), "%s", err.message);
    algorithm_free(a);
    /* 5000 scattered steps: rank 0's part would have more than 4096
     * elements for the old runtime (contiguous ones merge and fit) */
    a = long_broadcast_strided(5000, 2999);
    rc = gen(a, t, CS_MSCCL_RUNTIME_MSCCL, &x, &err);
    ck_assert_int_eq(rc, CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "fewer than 4096") && strstr(err.message, "rank 0") &&
                  strstr(err.message, "hierarchical"), "%s", err.message);
    algorithm_free(a);
    a = long_broadcast(5000);
    rc = gen(a, t, CS_MSCCL_RUNTIME_MSCCL, &x, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    limits_ok(x, CS_MSCCL_RUNTIME_MSCCL, &st);
    ck_assert_int_lt(st.max_elements, 4096);
    interp_ok(x, &a->collective);
    free(x);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* Root 0 sends rank 1 `big` chunks one per step in a scattered order (nothing
 * merges: rank 0 needs 32 channels of at most 224 steps for them), and sends
 * each of ranks 2..1+small_peers `small` neighbouring chunks in step 0.  A
 * custom collective: rank 1 needs the big chunks, each small peer its own. */
static cs_algorithm *hub_with_short_links(int big, int small_peers, int small)
{
    cs_error err;
    int G = big + small_peers * small;
    json_t *pre = json_array(), *post = json_array();
    for (int g = 0; g < G; g++) {
        json_array_append_new(pre, json_pack("[i,i]", g, 0));
        json_array_append_new(post, json_pack("[i,i]", g, g < big ? 1 : 2 + (g - big) / small));
    }
    json_t *j = json_pack("{s:s, s:i, s:o, s:o}", "kind", "custom", "global_chunks", G, "pre", pre,
                          "post", post);
    cs_collective c;
    ck_assert_int_eq(collective_from_json(j, &c, &err), CS_OK);
    json_decref(j);
    ck_assert_int_eq(collective_validate(&c, 2 + small_peers, &err), CS_OK);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "hub", 2 + small_peers, 1, big, &a, &err), CS_OK);
    for (int s = 0; s < big; s++)
        algorithm_add_send(a, (int)((long)s * 1031 % big), 0, 1, s, CS_OP_COPY);
    for (int g = big; g < G; g++)
        algorithm_add_send(a, g, 0, 2 + (g - big) / small, 0, CS_OP_COPY);
    collective_free(&c);
    return a;
}

/* Runs of neighbouring chunks are found before messages are dealt over
 * channels.  Rank 0 needs 32 channels per lane for its long link to rank 1;
 * dealt message by message, each short link's 32 chunks would take 32 thread
 * blocks of one step each (5 x 64 elements), and rank 0's part would have
 * 4110 elements (limit 4095).  Dealt as units, each short link is one run:
 * one thread block, one step of cnt 32. */
START_TEST(runs_are_merged_before_channels_are_dealt)
{
    cs_error err;
    cs_algorithm *a = hub_with_short_links(3750, 5, 32);
    cs_topology *t = cgt_topology(7, 1, true);
    cs_msccl_options o;
    msccl_options_default(&o);
    o.runtime = CS_MSCCL_RUNTIME_MSCCL;
    char *x = NULL;
    int rc = msccl_xml_generate(a, t, &o, &x, NULL, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    cs_msccl_check_stats st;
    limits_ok(x, CS_MSCCL_RUNTIME_MSCCL, &st);
    ck_assert_int_lt(st.max_elements, 4096);
    ck_assert_int_eq(st.nchannels, 32);
    ck_assert_int_eq(st.max_cnt, 32);
    /* rank 0: 32 blocks for rank 1, one per short link */
    ck_assert_int_eq(st.max_tbs, 37);
    ck_assert_int_eq(st.merged_steps, 2 * 5); /* both ends of each short link */
    ck_assert_int_eq(count(x, "cnt=\"32\""), 10);
    interp_ok(x, &a->collective);
    free(x);
    /* without merging the same schedule is over the element limit */
    o.single_chunk_steps = true;
    rc = msccl_xml_generate(a, t, &o, &x, NULL, &err);
    ck_assert_int_eq(rc, CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "rank 0") && strstr(err.message, "fewer than 4096"), "%s",
                  err.message);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* Gather of one chunk per rank straight to the root over one channel: the
 * root has a receiving thread block per peer. */
static cs_algorithm *star_gather(int ranks)
{
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_GATHER, 0);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "star", ranks, 1, 1, &a, &err), CS_OK);
    for (int r = 1; r < ranks; r++)
        algorithm_add_send(a, r, r, 0, 0, CS_OP_COPY);
    return a;
}

/* Values parked in scratch on their way (reduce-scatter's rrc receives at a
 * forwarding rank) get neighbouring scratch slots when their chunks are
 * neighbours on one link, so a run of them moves as one step: hierarchical
 * reducescatter on dgxh100:16 (each node's block of 8 chunks reduced up the
 * rails).  Before, slots were handed out in receive order across every peer
 * (s 0, 3, 6, ...) and no rrc ever merged: dgxh100:128 needed 258 steps per
 * thread block. */
START_TEST(parked_runs_get_neighbouring_scratch_slots)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("dgxh100:16", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_REDUCESCATTER, -1);
    cs_hier_options ho;
    hier_options_default(&ho);
    cs_result *res = NULL;
    ck_assert_msg(hier_synthesize(t, &c, &ho, &res, &err) == CS_OK, "%s", err.message);
    char *x;
    ck_assert_msg(gen(res->algs[0], t, CS_MSCCL_RUNTIME_MSCCL, &x, &err) == CS_OK, "%s",
                  err.message);
    limits_ok(x, CS_MSCCL_RUNTIME_MSCCL, NULL);
    int merged = 0;
    for (const char *p = strstr(x, "type=\"rrc\""); p; p = strstr(p + 1, "type=\"rrc\"")) {
        const char *cnt = strstr(p, "cnt=\"");
        if (cnt && atoi(cnt + 5) > 1)
            merged++;
    }
    ck_assert_msg(merged > 0, "no rrc step moves more than one chunk");
    interp_ok(x, &c);
    free(x);
    result_free(res);
    topology_free(t);
}
END_TEST

/* The summary's channel count rests on an estimate that counts a run of
 * neighbouring chunks as one step; in a pipelined hierarchical
 * reduce-scatter on the Slurm hook's 16-node DGX-1 cluster the runs once
 * did not merge (each chunk waited for a different receive), and at the
 * estimate's 2 channels rank 0's block to peer 2 needed 124 steps (executor:
 * s <= 63); the fullest ranks are laid out exactly first and the channels
 * widen until they fit.  Since transfers are ordered by sender within a
 * step (codegen_plan.h) the runs merge and the estimate's channels hold it;
 * whichever way, the document must fit and run right, and a slice must say
 * the same channels. */
START_TEST(channels_widen_when_the_estimate_is_short)
{
    char msg[256];
    char *text = e2e_hook_dgx1_cluster(16, msg, sizeof msg);
    ck_assert_msg(text != NULL, "%s", msg);
    json_t *doc = json_loads(text, 0, NULL);
    free(text);
    cs_topology *t;
    cs_error err;
    cs_topology_parse_options po = {0};
    ck_assert_msg(topology_from_json(doc, &po, &t, &err) == CS_OK, "%s", err.message);
    json_decref(doc);
    cs_collective c;
    collective_init(&c, CS_COLL_REDUCESCATTER, -1);
    cs_hier_options ho;
    hier_options_default(&ho);
    cs_result *res = NULL;
    ck_assert_msg(hier_synthesize(t, &c, &ho, &res, &err) == CS_OK, "%s", err.message);
    char *x;
    ck_assert_msg(gen(res->algs[0], t, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err) == CS_OK, "%s",
                  err.message);
    cs_msccl_check_stats st;
    limits_ok(x, CS_MSCCL_RUNTIME_EXECUTOR, &st);
    ck_assert_int_lt(st.max_steps, 64);
    interp_ok(x, &c);
    /* a slice is cut the same way: its header says the same channels */
    char *one;
    ck_assert_int_eq(msccl_xml_generate_ranks(res->algs[0], t, NULL, 0, 0, &one, NULL, &err),
                     CS_OK);
    free(one);
    cs_msccl_options o;
    msccl_options_default(&o);
    o.runtime = CS_MSCCL_RUNTIME_EXECUTOR;
    ck_assert_int_eq(msccl_xml_generate_ranks(res->algs[0], t, &o, 37, 37, &one, NULL, &err),
                     CS_OK);
    ck_assert(strncmp(one, x, (size_t)(strchr(x, '\n') - x)) == 0);
    free(one);
    free(x);
    result_free(res);
    topology_free(t);
}
END_TEST

/* The same widening on a schedule made for it.  Allreduce on 3 fully
 * connected ranks, 25 groups of 4 neighbouring chunks, 3 steps per group:
 * rank 0 reduces all 4 into rank 1 while rank 1 sends its own values of
 * chunks 0 and 2 of the group to rank 2 (so rank 1 parks those two receives
 * in scratch and the other two land home: the 4 receives are not contiguous
 * and cannot merge, although the estimate counts them as one unit); then
 * rank 2 completes chunks 1 and 3 at rank 1, rank 0 completes 0 and 2 at
 * rank 2, and the owners copy the sums out.  The estimate's 4 channels would
 * leave rank 1's fullest block over the executor's 64 steps; laid out
 * exactly, the channels double to 8 and it fits. */
START_TEST(channels_widen_when_runs_cannot_merge)
{
    enum { GROUPS = 25 };
    cs_topology *t = cgt_topology(3, 1, true);
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "full", 3, 4 * GROUPS, 3 * GROUPS, &a, &err), CS_OK);
    for (int g = 0; g < GROUPS; g++) {
        long k = 4L * g;
        int s = 3 * g;
        for (int j = 0; j < 4; j++)
            algorithm_add_send(a, k + j, 0, 1, s, CS_OP_REDUCE);
        algorithm_add_send(a, k, 1, 2, s, CS_OP_REDUCE);
        algorithm_add_send(a, k + 2, 1, 2, s, CS_OP_REDUCE);
        algorithm_add_send(a, k + 1, 2, 1, s + 1, CS_OP_REDUCE);
        algorithm_add_send(a, k + 3, 2, 1, s + 1, CS_OP_REDUCE);
        algorithm_add_send(a, k, 0, 2, s + 1, CS_OP_REDUCE);
        algorithm_add_send(a, k + 2, 0, 2, s + 1, CS_OP_REDUCE);
        for (int j = 1; j < 4; j += 2) {
            algorithm_add_send(a, k + j, 1, 0, s + 2, CS_OP_COPY);
            algorithm_add_send(a, k + j, 1, 2, s + 2, CS_OP_COPY);
            algorithm_add_send(a, k + j - 1, 2, 0, s + 2, CS_OP_COPY);
            algorithm_add_send(a, k + j - 1, 2, 1, s + 2, CS_OP_COPY);
        }
        for (int q = 0; q < 3; q++)
            a->rounds_per_step[s + q] = 4;
    }
    algorithm_update_rounds(a);
    ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s", err.message);
    char *x;
    ck_assert_msg(gen(a, t, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err) == CS_OK, "%s", err.message);
    cs_msccl_check_stats st;
    limits_ok(x, CS_MSCCL_RUNTIME_EXECUTOR, &st);
    ck_assert_int_lt(st.max_steps, 64);
    ck_assert_int_gt(st.nchannels, 4);
    /* rank 1's receives from rank 0 move one chunk each (nothing merged) */
    const char *g1 = strstr(x, "<gpu id=\"1\""), *g2 = strstr(x, "<gpu id=\"2\"");
    ck_assert(g1 && g2);
    char *one = strndup(g1, (size_t)(g2 - g1));
    ck_assert_int_eq(count(one, "type=\"rrc\""), 6 * GROUPS);
    ck_assert_int_eq(count(one, "type=\"rrc\" srcbuf=\"i\""), 4 * GROUPS);
    free(one);
    interp_ok(x, &c);
    free(x);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(thread_block_limits_are_refused_with_the_rank)
{
    cs_error err;
    char *x;
    /* 40 peers: more than the old runtime's 32 receiving blocks per channel,
     * so the hub's peers are dealt into two groups with a channel each (the
     * hook's 128-node DGX-1 cluster: a NIC rank talks to 36 peers); the
     * executor has no such limit and keeps one channel */
    cs_algorithm *a = star_gather(41);
    cs_msccl_check_stats st;
    ck_assert_msg(gen(a, NULL, CS_MSCCL_RUNTIME_MSCCL, &x, &err) == CS_OK, "%s", err.message);
    limits_ok(x, CS_MSCCL_RUNTIME_MSCCL, &st);
    ck_assert_int_eq(st.nchannels, 2);
    ck_assert_int_eq(st.max_tbs, 41);   /* and the block for its own chunk's copy */
    interp_ok(x, &a->collective);
    /* the hub (rank 0): 32 peers' blocks on channel 0, 8 on channel 1 */
    char *hub = strndup(strstr(x, "<gpu id=\"0\""),
                        (size_t)(strstr(x, "<gpu id=\"1\"") - strstr(x, "<gpu id=\"0\"")));
    ck_assert_int_eq(count(hub, "recv=\"") - count(hub, "recv=\"-1\""), 40);
    ck_assert_int_eq(count(hub, "recv=\"-1\" chan=\"0\""), count(hub, "<tb ") - 40);
    ck_assert_int_eq(count(hub, "chan=\"1\""), 8);
    free(hub);
    free(x);
    ck_assert_msg(msccl_xml_generate_ranks(a, NULL, NULL, 5, 5, &x, NULL, &err) == CS_OK, "%s",
                  err.message);
    free(x);
    ck_assert_int_eq(gen(a, NULL, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err), CS_OK);
    limits_ok(x, CS_MSCCL_RUNTIME_EXECUTOR, &st);
    ck_assert_int_eq(st.nchannels, 1);
    interp_ok(x, &a->collective);
    free(x);
    algorithm_free(a);
    /* 230 peers: more than the old runtime's 216 thread blocks */
    a = star_gather(230);
    ck_assert_int_eq(gen(a, NULL, CS_MSCCL_RUNTIME_MSCCL, &x, &err), CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "rank 0 needs 230 thread blocks") &&
                  strstr(err.message, "at most 216"), "%s", err.message);
    ck_assert_int_eq(gen(a, NULL, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err), CS_OK);
    limits_ok(x, CS_MSCCL_RUNTIME_EXECUTOR, NULL);
    free(x);
    algorithm_free(a);
}
END_TEST

static char *header_of(const char *doc)
{
    const char *nl = strchr(doc, '\n');
    ck_assert_ptr_nonnull(nl);
    return strndup(doc, (size_t)(nl - doc + 1));
}

typedef struct pieces {
    int calls;
    size_t bytes;
    int fail_at; /* return CS_EIO on this call, 0: never */
} pieces;

static int count_pieces(void *ctx, const char *data, size_t len)
{
    pieces *p = ctx;
    (void)data;
    p->calls++;
    p->bytes += len;
    return p->calls == p->fail_at ? CS_EIO : CS_OK;
}

/* gpu_sms: all of a rank's thread blocks must be resident at once, 2 per SM
 * (the NCCL fork's 216 is an A100's 108 x 2).  A hub with 169 peers needs
 * 170 blocks (one per peer, one for its own chunk's copy): it fits the
 * default and a GPU with 85 SMs (170 blocks) with the same document, and
 * is refused on a V100 (80 SMs: 160) for both runtimes, naming the SMs. */
START_TEST(gpu_sms_caps_thread_blocks_per_rank)
{
    cs_error err;
    cs_algorithm *a = star_gather(170);
    cs_msccl_options o;
    char *dflt = NULL, *x = NULL;
    msccl_options_default(&o);
    o.runtime = CS_MSCCL_RUNTIME_MSCCL;
    ck_assert_msg(msccl_xml_generate(a, NULL, &o, &dflt, NULL, &err) == CS_OK, "%s", err.message);
    cs_msccl_check_stats st;
    limits_ok(dflt, CS_MSCCL_RUNTIME_MSCCL, &st);
    ck_assert_int_eq(st.max_tbs, 170);
    const int same[] = {85, 108, 132};
    for (int i = 0; i < 3; i++) {
        o.gpu_sms = same[i];
        ck_assert_msg(msccl_xml_generate(a, NULL, &o, &x, NULL, &err) == CS_OK, "%d SMs: %s",
                      same[i], err.message);
        ck_assert_str_eq(x, dflt);
        free(x);
    }
    const cs_msccl_runtime rts[] = {CS_MSCCL_RUNTIME_MSCCL, CS_MSCCL_RUNTIME_EXECUTOR,
                                    CS_MSCCL_RUNTIME_AUTO};
    for (int i = 0; i < 3; i++) {
        o.runtime = rts[i];
        o.gpu_sms = 80;
        x = NULL;
        ck_assert_int_eq(msccl_xml_generate(a, NULL, &o, &x, NULL, &err), CS_ELIMIT);
        ck_assert_ptr_null(x);
        ck_assert_str_eq(err.field, "runtime");
        ck_assert_msg(strstr(err.message, "rank 0 needs 170 thread blocks") &&
                          strstr(err.message, "gpu_sms=80") && strstr(err.message, "at most 160"),
                      "%s", err.message);
        /* the streaming writer refuses before writing anything */
        pieces pc = {0, 0, 0};
        ck_assert_int_eq(msccl_xml_write_ranks(a, NULL, &o, 0, a->ranks - 1, count_pieces, &pc,
                                               &err), CS_ELIMIT);
        ck_assert_int_eq(pc.calls, 0);
    }
    /* the executor's own limit is 1024: gpu_sms=108 lowers it to 216 */
    free(dflt);
    algorithm_free(a);
    a = star_gather(230);
    o.runtime = CS_MSCCL_RUNTIME_EXECUTOR;
    o.gpu_sms = 0;
    ck_assert_int_eq(msccl_xml_generate(a, NULL, &o, &x, NULL, &err), CS_OK);
    free(x);
    o.gpu_sms = 108;
    ck_assert_int_eq(msccl_xml_generate(a, NULL, &o, &x, NULL, &err), CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "at most 216"), "%s", err.message);
    o.gpu_sms = -1;
    ck_assert_int_eq(msccl_xml_generate(a, NULL, &o, &x, NULL, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "gpu_sms");
    algorithm_free(a);
}
END_TEST

/* The independent checker takes the same gpu_sms as the generator: the
 * 170-block hub's document (written without gpu_sms) passes for a GPU with
 * 85 SMs and is refused for a V100 (80 SMs: 160 blocks) under every
 * runtime, naming the rank, its blocks, the SMs and the limit; a bad SM
 * count is refused by field. */
START_TEST(checker_takes_gpu_sms)
{
    cs_error err;
    cs_algorithm *a = star_gather(170);
    char *x = NULL;
    const cs_msccl_runtime rts[] = {CS_MSCCL_RUNTIME_MSCCL, CS_MSCCL_RUNTIME_EXECUTOR,
                                    CS_MSCCL_RUNTIME_AUTO};
    cs_msccl_check_stats st;
    cs_msccl_options o;
    for (int i = 0; i < 3; i++) {
        msccl_options_default(&o);
        o.runtime = rts[i];
        ck_assert_msg(msccl_xml_generate(a, NULL, &o, &x, NULL, &err) == CS_OK, "%s",
                      err.message);
        o.gpu_sms = 85;
        ck_assert_msg(msccl_check_for(x, strlen(x), &o, &st, &err) == CS_OK, "%s", err.message);
        ck_assert_int_eq(st.max_tbs, 170);
        o.gpu_sms = 80;
        ck_assert_int_eq(msccl_check_for(x, strlen(x), &o, NULL, &err), CS_ELIMIT);
        ck_assert_msg(strstr(err.message, "rank 0 has 170 thread blocks") &&
                          strstr(err.message, "gpu_sms=80") && strstr(err.message, "at most 160"),
                      "%s", err.message);
        /* the option-less entry still checks the runtime's own limits only */
        ck_assert_msg(msccl_check_limits(x, strlen(x), rts[i], NULL, &err) == CS_OK, "%s",
                      err.message);
        o.gpu_sms = -1;
        ck_assert_int_eq(msccl_check_for(x, strlen(x), &o, NULL, &err), CS_EINVAL);
        ck_assert_str_eq(err.field, "gpu_sms");
        o.gpu_sms = 4097;
        ck_assert_int_eq(msccl_check_for(x, strlen(x), &o, NULL, &err), CS_EINVAL);
        free(x);
    }
    /* the executor's document of a 230-block hub: within its own 1024, over
     * an A100's 216 */
    algorithm_free(a);
    a = star_gather(230);
    msccl_options_default(&o);
    o.runtime = CS_MSCCL_RUNTIME_EXECUTOR;
    ck_assert_msg(msccl_xml_generate(a, NULL, &o, &x, NULL, &err) == CS_OK, "%s", err.message);
    ck_assert_msg(msccl_check_for(x, strlen(x), &o, NULL, &err) == CS_OK, "%s", err.message);
    o.gpu_sms = 108;
    ck_assert_int_eq(msccl_check_for(x, strlen(x), &o, NULL, &err), CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "at most 216"), "%s", err.message);
    o.gpu_sms = 115;
    ck_assert_msg(msccl_check_for(x, strlen(x), &o, NULL, &err) == CS_OK, "%s", err.message);
    free(x);
    algorithm_free(a);
}
END_TEST

/* Plans keep chunk slots in 23 bits (codegen_plan.h, cg_slot): a schedule
 * whose buffers hold 2^23 chunks or more is refused by name, never written
 * with offsets cut short; one just below is lowered. */
START_TEST(chunk_slots_beyond_the_plan_limit_are_refused)
{
    const long sizes[] = {CG_SLOT_LIMIT, CG_SLOT_LIMIT - 1};
    for (int i = 0; i < 2; i++) {
        /* one chunk, the last, moves from rank 0 to rank 1; the buffers are
         * the collective's global_chunks long */
        json_t *spec = json_pack("{s:s, s:I, s:[[I, i]], s:[[I, i]]}", "kind", "custom",
                                 "global_chunks", (json_int_t)sizes[i], "pre",
                                 (json_int_t)(sizes[i] - 1), 0, "post",
                                 (json_int_t)(sizes[i] - 1), 1);
        cs_collective c;
        cs_error err;
        ck_assert_msg(collective_from_json(spec, &c, &err) == CS_OK, "%s", err.message);
        json_decref(spec);
        cs_algorithm *a = NULL;
        ck_assert_int_eq(algorithm_new(&c, "line:2", 2, 1, 1, &a, &err), CS_OK);
        collective_free(&c);
        ck_assert_int_eq(algorithm_add_send(a, sizes[i] - 1, 0, 1, 0, CS_OP_COPY), CS_OK);
        char *x = NULL;
        int rc = gen(a, NULL, CS_MSCCL_RUNTIME_MSCCL, &x, &err);
        if (i == 0) {
            ck_assert_int_eq(rc, CS_ELIMIT);
            ck_assert_str_eq(err.field, "chunks");
            ck_assert_msg(strstr(err.message, "8388608"), "%s", err.message);
        } else {
            ck_assert_msg(rc == CS_OK, "%s", err.message);
            /* the last chunk's offsets, in full */
            ck_assert_msg(strstr(x, "srcoff=\"8388606\"") && strstr(x, "dstoff=\"8388606\""),
                          "%.2000s", x);
            free(x);
        }
        algorithm_free(a);
    }
}
END_TEST

START_TEST(rank_slices_hold_the_same_algo_and_their_gpus)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("torus2d:4x4", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    cs_msccl_options o;
    msccl_options_default(&o);
    o.runtime = CS_MSCCL_RUNTIME_EXECUTOR;
    char *full, *all;
    size_t flen, alen;
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &full, &flen, &err), CS_OK);
    ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &o, 0, 15, &all, &alen, &err), CS_OK);
    ck_assert(alen == flen && memcmp(all, full, flen) == 0);
    free(all);
    char *hfull = header_of(full);
    cs_msccl_doc *dfull;
    ck_assert_int_eq(msccl_doc_parse(full, flen, &dfull, &err), CS_OK);
    for (int r = 0; r < 16; r++) {
        char *one;
        size_t olen;
        ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &o, r, r, &one, &olen, &err), CS_OK);
        char *h = header_of(one);
        ck_assert_str_eq(h, hfull); /* every <algo> attribute, ngpus unchanged */
        free(h);
        /* the slice's <gpu> is the full document's, byte for byte */
        char tag[32];
        snprintf(tag, sizeof tag, "  <gpu id=\"%d\" ", r);
        const char *in_full = strstr(full, tag), *in_one = strstr(one, tag);
        ck_assert_ptr_nonnull(in_one);
        size_t glen = (size_t)(strstr(in_one, "</gpu>\n") + 7 - in_one);
        ck_assert_int_eq(memcmp(in_full, in_one, glen), 0);
        ck_assert_int_eq(olen, strlen(hfull) + glen + strlen("</algo>\n"));
        cs_msccl_doc *d;
        ck_assert_msg(msccl_doc_parse_slice(one, olen, &d, &err) == CS_OK, "%s", err.message);
        ck_assert_int_eq(msccl_doc_ngpus(d), 16);
        ck_assert_int_eq(msccl_doc_nchannels(d), msccl_doc_nchannels(dfull));
        ck_assert_int_eq(msccl_doc_nchunksperloop(d), msccl_doc_nchunksperloop(dfull));
        ck_assert_str_eq(msccl_doc_coll(d), msccl_doc_coll(dfull));
        for (int q = 0; q < 16; q++)
            ck_assert_int_eq(msccl_doc_has_gpu(d, q), q == r);
        ck_assert_int_eq(msccl_doc_rank_tbs(d, r), msccl_doc_rank_tbs(dfull, r));
        ck_assert_int_eq(msccl_doc_rank_max_steps(d, r), msccl_doc_rank_max_steps(dfull, r));
        /* a slice alone does not run; the strict parser wants every rank */
        ck_assert_int_eq(msccl_interp_check(d, NULL, NULL, &err), CS_EINVAL);
        ck_assert_msg(strstr(err.message, "only a document with every rank"), "%s", err.message);
        msccl_doc_free(d);
        ck_assert_int_eq(msccl_doc_parse(one, olen, &d, &err), CS_EINVAL);
        free(one);
    }
    msccl_doc_free(dfull);
    /* streaming: the header, one piece per <gpu>, the trailer */
    pieces pc = {0, 0, 0};
    ck_assert_int_eq(msccl_xml_write_ranks(a, t, &o, 0, 15, count_pieces, &pc, &err), CS_OK);
    ck_assert_int_eq(pc.calls, 16 + 2);
    ck_assert_int_eq(pc.bytes, flen);
    /* the window size (one rank per window, or one window for all) changes
     * the work, never the bytes */
    long windows[] = {1, 1L << 30};
    for (int w = 0; w < 2; w++) {
        cs_msccl_options ow = o;
        ow.window_sends = windows[w];
        char *doc;
        size_t dlen;
        ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &ow, 0, 15, &doc, &dlen, &err), CS_OK);
        ck_assert_msg(dlen == flen && memcmp(doc, full, flen) == 0, "window_sends %ld",
                      windows[w]);
        free(doc);
        ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &ow, 5, 9, &doc, &dlen, &err), CS_OK);
        char *ref;
        size_t rlen;
        ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &o, 5, 9, &ref, &rlen, &err), CS_OK);
        ck_assert(dlen == rlen && memcmp(doc, ref, rlen) == 0);
        free(doc);
        free(ref);
    }
    /* a failing writer stops the generation with its code */
    pieces fail = {0, 0, 3};
    ck_assert_int_eq(msccl_xml_write_ranks(a, t, &o, 0, 15, count_pieces, &fail, &err), CS_EIO);
    ck_assert_int_eq(fail.calls, 3);
    ck_assert_ptr_nonnull(strstr(err.message, "writing"));
    /* bad ranges */
    char *x;
    ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &o, 3, 2, &x, NULL, &err), CS_EINVAL);
    ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &o, -1, 2, &x, NULL, &err), CS_EINVAL);
    ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &o, 0, 16, &x, NULL, &err), CS_EINVAL);
    ck_assert_msg(strstr(err.message, "0-15"), "%s", err.message);
    ck_assert_int_eq(msccl_xml_write_ranks(a, t, &o, 0, 1, NULL, NULL, &err), CS_EINVAL);
    free(hfull);
    free(full);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* A document with one rank holding one thread block of n nops. */
static char *nop_doc(int n, const char *extra_algo)
{
    size_t cap = 512 + (size_t)n * 200;
    char *d = malloc(cap);
    size_t k = (size_t)snprintf(d, cap, "<algo name=\"x\" proto=\"Simple\" nchannels=\"1\" "
                                "nchunksperloop=\"1\" ngpus=\"2\" coll=\"allreduce\" inplace=\"1\" "
                                "outofplace=\"1\" minBytes=\"0\" maxBytes=\"0\"%s>\n"
                                "<gpu id=\"0\" i_chunks=\"1\" o_chunks=\"1\" s_chunks=\"0\">\n"
                                "<tb id=\"0\" send=\"1\" recv=\"1\" chan=\"0\">\n", extra_algo);
    for (int s = 0; s < n; s++)
        k += (size_t)snprintf(d + k, cap - k, "<step s=\"%d\" type=\"nop\" srcbuf=\"i\" "
                              "srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" cnt=\"0\" depid=\"-1\" "
                              "deps=\"-1\" hasdep=\"0\"/>\n", s);
    if (k + 32 < cap)
        memcpy(d + k, "</tb>\n</gpu>\n</algo>\n", 22);
    return d;
}

START_TEST(the_limit_checker_counts_on_the_text)
{
    cs_error err;
    cs_msccl_check_stats st;
    /* 1 <algo> + 1 <gpu> + 1 <tb> + n <step>: 4095 elements load, 4096 not */
    char *d = nop_doc(4092, "");
    ck_assert_int_eq(msccl_check_limits(d, strlen(d), CS_MSCCL_RUNTIME_MSCCL, &st, &err),
                     CS_ELIMIT); /* but 4092 steps break s <= 255 first */
    ck_assert_msg(strstr(err.message, "s=256"), "%s", err.message);
    free(d);
    d = nop_doc(256, "");
    ck_assert_int_eq(msccl_check_limits(d, strlen(d), CS_MSCCL_RUNTIME_MSCCL, &st, &err), CS_OK);
    ck_assert_int_eq(st.max_elements, 259);
    ck_assert_int_eq(st.max_steps, 256);
    ck_assert_int_eq(st.gpus, 1);
    ck_assert_int_eq(msccl_check_limits(d, strlen(d), CS_MSCCL_RUNTIME_EXECUTOR, &st, &err),
                     CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "s=64") && strstr(err.message, "s < 64"), "%s",
                  err.message);
    free(d);
    /* 17 attributes: more than the old runtime reads */
    d = nop_doc(1, " a1=\"1\" a2=\"2\" a3=\"3\" a4=\"4\" a5=\"5\" a6=\"6\" a7=\"7\"");
    ck_assert_int_eq(msccl_check_limits(d, strlen(d), CS_MSCCL_RUNTIME_MSCCL, &st, &err),
                     CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "at most 16"), "%s", err.message);
    ck_assert_int_eq(msccl_check_limits(d, strlen(d), CS_MSCCL_RUNTIME_EXECUTOR, &st, &err),
                     CS_OK);
    free(d);
    /* edits of a generated document that each break one rule */
    cs_topology *t;
    ck_assert_int_eq(topology_builtin("ring:4", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    char *x;
    ck_assert_int_eq(gen(a, t, CS_MSCCL_RUNTIME_AUTO, &x, &err), CS_OK);
    limits_ok(x, CS_MSCCL_RUNTIME_AUTO, NULL);
    struct {
        const char *from, *to, *expect;
        int code;
    } edits[] = {
        {"cnt=\"1\"", "cnt=\"72\"", "cnt=72", CS_ELIMIT},
        {"<tb id=\"1\"", "<tb id=\"7\"", "consecutive", CS_EINVAL},
        {"chan=\"0\"", "chan=\"3\"", "nchannels=1", CS_EINVAL},
        {" hasdep=\"0\"", "", "lacks hasdep", CS_EINVAL},
        {"type=\"s\"", "type=\"x\"", "type \"x\"", CS_EINVAL},
        {"coll=\"allgather\"", "coll=\"allgather2\"", "coll=\"allgather2\"", CS_EINVAL},
        {"minBytes=\"0\" ", "", "lacks minBytes", CS_EINVAL},
    };
    for (size_t k = 0; k < sizeof edits / sizeof edits[0]; k++) {
        const char *at = strstr(x, edits[k].from);
        ck_assert_ptr_nonnull(at);
        size_t pre = (size_t)(at - x), fl = strlen(edits[k].from);
        char *y = malloc(strlen(x) + 64);
        sprintf(y, "%.*s%s%s", (int)pre, x, edits[k].to, at + fl);
        int rc = msccl_check_limits(y, strlen(y), CS_MSCCL_RUNTIME_AUTO, NULL, &err);
        ck_assert_msg(rc == edits[k].code && strstr(err.message, edits[k].expect),
                      "edit %zu: rc %d: %s", k, rc, err.message);
        free(y);
    }
    free(x);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(same_step_chunks_merge_into_one_step)
{
    /* broadcast of 3 chunks over one lane in one step of 3 rounds: the three
     * messages between contiguous slots become one step with cnt="3" on both
     * ends; with single_chunk_steps they stay three steps */
    cs_topology *t = cgt_topology(2, 1, false);
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 2, 3, 1, &a, &err), CS_OK);
    for (int k = 0; k < 3; k++)
        algorithm_add_send(a, k, 0, 1, 0, CS_OP_COPY);
    a->rounds_per_step[0] = 3;
    algorithm_update_rounds(a);
    cs_msccl_options o;
    msccl_options_default(&o);
    char *x;
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &x, NULL, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(x, "<step s=\"0\" type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                                    "dstoff=\"0\" cnt=\"3\""));
    ck_assert_ptr_nonnull(strstr(x, "<step s=\"0\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                                    "dstoff=\"0\" cnt=\"3\""));
    /* the root's own copy is one step too */
    ck_assert_ptr_nonnull(strstr(x, "type=\"cpy\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                                    "dstoff=\"0\" cnt=\"3\""));
    ck_assert_int_eq(count(x, "<step "), 3);
    interp_ok(x, &c);
    free(x);
    o.single_chunk_steps = true;
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &x, NULL, &err), CS_OK);
    ck_assert_int_eq(count(x, "type=\"s\""), 3);
    ck_assert_int_eq(count(x, "type=\"r\""), 3);
    interp_ok(x, &c);
    free(x);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* Both directions of one link in one step: rank 0 sends its 3 chunks to
 * rank 1 while rank 1 sends its 3 to rank 0.  One thread block per rank
 * holds both directions; the two blocks must run the link's messages in the
 * same order, or a step of 3 chunks streaming through a one-chunk FIFO
 * deadlocks.  Ordered by step then sender, each direction's messages are
 * consecutive on both ends and merge: one s and one r of cnt 3 per rank
 * (before, sends and receives alternated s r s r s r and nothing merged:
 * 6 steps per block, which on the hook's 128-node DGX-1 allgather meant 65
 * steps where the executor allows 64). */
START_TEST(both_directions_of_a_link_merge)
{
    cs_topology *t = cgt_topology(2, 1, false);
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 2, 3, 1, &a, &err), CS_OK);
    /* allgather chunk g starts on rank g % 2 */
    for (int k = 0; k < 3; k++) {
        algorithm_add_send(a, 2 * k, 0, 1, 0, CS_OP_COPY);
        algorithm_add_send(a, 2 * k + 1, 1, 0, 0, CS_OP_COPY);
    }
    a->rounds_per_step[0] = 3;
    algorithm_update_rounds(a);
    ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s", err.message);
    char *x;
    for (int rt = CS_MSCCL_RUNTIME_AUTO; rt <= CS_MSCCL_RUNTIME_EXECUTOR; rt++) {
        ck_assert_msg(gen(a, t, (cs_msccl_runtime)rt, &x, &err) == CS_OK, "%s", err.message);
        limits_ok(x, (cs_msccl_runtime)rt, NULL);
        /* every transfer step moves all 3 chunks: one s and one r per rank */
        ck_assert_int_eq(count(x, "type=\"s\""), 2);
        ck_assert_int_eq(count(x, "type=\"r\""), 2);
        ck_assert_int_eq(count(x, "type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                                  "dstoff=\"0\" cnt=\"3\""), 1);
        ck_assert_int_eq(count(x, "type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                                  "dstoff=\"3\" cnt=\"3\""), 1);
        /* the pair's order: rank 0 sends first, rank 1 receives first */
        const char *g0 = strstr(x, "<gpu id=\"0\""), *g1 = strstr(x, "<gpu id=\"1\"");
        ck_assert(g0 && g1 && g0 < g1);
        ck_assert(strstr(g0, "type=\"s\"") < strstr(g0, "type=\"r\""));
        ck_assert(strstr(g1, "type=\"r\"") < strstr(g1, "type=\"s\""));
        /* one-chunk FIFOs: no deadlock, right result */
        interp_ok(x, &c);
        /* a slice per rank says the same */
        cs_msccl_options o;
        msccl_options_default(&o);
        o.runtime = (cs_msccl_runtime)rt;
        char *re;
        size_t rlen;
        ck_assert_int_eq(cgt_reassemble_slices(a, t, &o, 1, &re, &rlen, &err), CS_OK);
        ck_assert(rlen == strlen(x) && memcmp(re, x, rlen) == 0);
        free(re);
        free(x);
    }
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(lanes_become_channels)
{
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 2, 4, 2, &a, &err), CS_OK);
    for (int k = 0; k < 4; k++)
        algorithm_add_send(a, k, 0, 1, k / 2, CS_OP_COPY);
    a->rounds_per_step[0] = a->rounds_per_step[1] = 1;
    cs_topology *two = cgt_topology(2, 2, false), *one = cgt_topology(2, 1, false);
    int rc;
    char *x2;
    rc = gen(a, two, CS_MSCCL_RUNTIME_AUTO, &x2, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(x2, "nchannels=\"2\""));
    ck_assert_ptr_nonnull(strstr(x2, "<tb id=\"0\" send=\"1\" recv=\"-1\" chan=\"0\">"));
    ck_assert_ptr_nonnull(strstr(x2, "<tb id=\"1\" send=\"1\" recv=\"-1\" chan=\"1\">"));
    /* a step's run of neighbouring chunks stays on one lane and moves as one
     * step (chunks 0-1 on channel 0 in step 0, 2-3 on channel 1 in step 1):
     * round-robin per message would leave no neighbours on a lane */
    ck_assert_int_eq(count(x2, "type=\"s\""), 2);
    ck_assert_int_eq(count(x2, "type=\"s\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" "
                               "cnt=\"2\""), 1);
    ck_assert_int_eq(count(x2, "type=\"s\" srcbuf=\"i\" srcoff=\"2\" dstbuf=\"o\" dstoff=\"2\" "
                               "cnt=\"2\""), 1);
    /* without lane information every link is one channel */
    char *x1;
    rc = gen(a, NULL, CS_MSCCL_RUNTIME_AUTO, &x1, &err);
    ck_assert_int_eq(rc, CS_OK);
    ck_assert_ptr_nonnull(strstr(x1, "nchannels=\"1\""));
    char *x3;
    rc = gen(a, one, CS_MSCCL_RUNTIME_AUTO, &x3, &err);
    ck_assert_int_eq(rc, CS_OK);
    ck_assert_ptr_nonnull(strstr(x3, "nchannels=\"1\""));
    cs_msccl_doc *d;
    ck_assert_int_eq(msccl_doc_parse(x2, strlen(x2), &d, &err), CS_OK);
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    o.collective = &a->collective;
    ck_assert_msg(msccl_interp_check(d, &o, NULL, &err) == CS_OK, "%s", err.message);
    msccl_doc_free(d);
    free(x1);
    free(x2);
    free(x3);
    algorithm_free(a);
    topology_free(one);
    topology_free(two);
}
END_TEST

START_TEST(allreduce_is_one_inplace_document)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("ring:4", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    int rc;
    char *x;
    rc = gen(a, t, CS_MSCCL_RUNTIME_MSCCL, &x, &err);
    ck_assert_int_eq(rc, CS_OK);
    ck_assert_int_eq(count(x, "<algo "), 1);
    ck_assert_int_eq(count(x, "</algo>"), 1);
    ck_assert_ptr_nonnull(strstr(x, "coll=\"allreduce\" inplace=\"1\""));
    /* the reduce-scatter half uses fused receive-reduce steps */
    ck_assert_int_gt(count(x, "type=\"rrc\""), 0);
    cs_msccl_doc *d;
    ck_assert_int_eq(msccl_doc_parse(x, strlen(x), &d, &err), CS_OK);
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    for (int inplace = 0; inplace < 2; inplace++) {
        o.inplace = inplace;
        ck_assert_msg(msccl_interp_check(d, &o, NULL, &err) == CS_OK, "%s", err.message);
    }
    msccl_doc_free(d);
    free(x);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(byte_range_and_protocol_attributes)
{
    cs_topology *t;
    cs_algorithm *a = ring3_allgather(&t);
    cs_error err;
    cs_msccl_options o;
    msccl_options_default(&o);
    o.min_bytes = 1024;
    o.max_bytes = 1 << 20;
    o.proto = "LL128";
    o.name = "my algo";
    char *x;
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &x, NULL, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(x, "minBytes=\"1024\" maxBytes=\"1048576\""));
    ck_assert_ptr_nonnull(strstr(x, "proto=\"LL128\""));
    ck_assert_ptr_nonnull(strstr(x, "name=\"my_algo\""));
    free(x);
    o.max_bytes = 0; /* no limit: a huge maxBytes both runtimes accept ... */
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &x, NULL, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(x, "maxBytes=\"4611686018427387904\""));
    free(x);
    o.runtime = CS_MSCCL_RUNTIME_EXECUTOR; /* ... and the executor's own 0 */
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &x, NULL, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(x, "maxBytes=\"0\""));
    free(x);
    o.min_bytes = 10;
    o.max_bytes = 5;
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &x, NULL, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "min_bytes");
    o.max_bytes = 0;
    o.proto = "Fast";
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &x, NULL, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "proto");
    o.proto = NULL;
    o.name = "a\"b";
    ck_assert_int_eq(msccl_xml_generate(a, t, &o, &x, NULL, &err), CS_EINVAL);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(custom_collectives_only_on_the_old_runtime)
{
    cs_error err;
    json_t *j = json_pack("{s:s, s:i, s:[[i,i]], s:[[i,i]]}", "kind", "custom", "global_chunks", 1,
                          "pre", 0, 0, "post", 0, 1);
    cs_collective c;
    ck_assert_int_eq(collective_from_json(j, &c, &err), CS_OK);
    json_decref(j);
    ck_assert_int_eq(collective_validate(&c, 2, &err), CS_OK);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 2, 1, 1, &a, &err), CS_OK);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    int rc;
    char *x;
    rc = gen(a, NULL, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err);
    ck_assert_int_eq(rc, CS_EUNSUPPORTED);
    rc = gen(a, NULL, CS_MSCCL_RUNTIME_MSCCL, &x, &err);
    ck_assert_int_eq(rc, CS_OK);
    ck_assert_ptr_nonnull(strstr(x, "coll=\"custom\" inplace=\"0\""));
    cs_msccl_doc *d;
    ck_assert_int_eq(msccl_doc_parse(x, strlen(x), &d, &err), CS_OK);
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    o.collective = &c;
    ck_assert_msg(msccl_interp_check(d, &o, NULL, &err) == CS_OK, "%s", err.message);
    msccl_doc_free(d);
    free(x);
    algorithm_free(a);
    collective_free(&c);
}
END_TEST

START_TEST(rejects_a_schedule_that_sends_what_it_does_not_hold)
{
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 2, 1, 1, &a, &err), CS_OK);
    algorithm_add_send(a, 1, 0, 1, 0, CS_OP_COPY); /* chunk 1 starts at rank 1 */
    int rc;
    char *x;
    rc = gen(a, NULL, CS_MSCCL_RUNTIME_AUTO, &x, &err);
    ck_assert_int_eq(rc, CS_EINVAL);
    ck_assert_ptr_null(x);
    ck_assert_msg(strstr(err.message, "does not hold chunk 1"), "%s", err.message);
    algorithm_free(a);
    ck_assert_int_eq(msccl_xml_generate(NULL, NULL, NULL, &x, NULL, &err), CS_EINVAL);
}
END_TEST

START_TEST(several_waits_become_nops)
{
    /* Broadcast from 0 on 5 fully connected ranks.  Rank 1 gets the chunk in
     * step 0, forwards it to 2 and 3 in step 1 (two blocks), and receives it
     * again from 0 in step 2 into the same output slot: that receive must
     * wait for both sends (write after read), so its block gets a nop
     * carrying one wait, and the receive itself carries the other. */
    cs_topology *t = cgt_topology(5, 1, true);
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "full", 5, 1, 3, &a, &err), CS_OK);
    algorithm_add_send(a, 0, 0, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 0, 1, 2, 1, CS_OP_COPY);
    algorithm_add_send(a, 0, 1, 3, 1, CS_OP_COPY);
    algorithm_add_send(a, 0, 0, 1, 2, CS_OP_COPY);
    algorithm_add_send(a, 0, 0, 4, 2, CS_OP_COPY);
    char *x;
    int rc = gen(a, t, CS_MSCCL_RUNTIME_MSCCL, &x, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    const char *g1 = strstr(x, "<gpu id=\"1\"");
    ck_assert_ptr_nonnull(g1);
    /* rank 1: block 0 talks to rank 0, block 1 to rank 2, block 2 to rank 3 */
    const char *tb0 = strstr(g1, "<tb id=\"0\" send=\"-1\" recv=\"0\" chan=\"0\">");
    ck_assert_ptr_nonnull(tb0);
    const char *end = strstr(tb0, "</tb>");
    const char *nop = strstr(tb0, "<step s=\"1\" type=\"nop\"");
    const char *r2 = strstr(tb0, "<step s=\"2\" type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"o\" "
                                 "dstoff=\"0\"");
    ck_assert_msg(nop && r2 && nop < r2 && r2 < end, "%.*s", (int)(end - tb0), tb0);
    bool order1 = strstr(nop, "depid=\"1\" deps=\"0\"") < r2 &&
                  strstr(r2, "depid=\"2\" deps=\"0\"") < end;
    bool order2 = strstr(nop, "depid=\"2\" deps=\"0\"") < r2 &&
                  strstr(r2, "depid=\"1\" deps=\"0\"") < end;
    ck_assert_msg(order1 || order2, "%.*s", (int)(end - tb0), tb0);
    /* both forwarding sends are waited for; the nop itself sets no flag */
    ck_assert_int_eq(count(g1, "type=\"s\" srcbuf=\"o\" srcoff=\"0\" dstbuf=\"o\" dstoff=\"0\" "
                               "cnt=\"1\" depid=\"0\" deps=\"0\" hasdep=\"1\"/>"), 2);
    ck_assert_ptr_nonnull(strstr(nop, "cnt=\"0\""));
    ck_assert_ptr_nonnull(strstr(nop, "hasdep=\"0\""));
    cs_msccl_doc *d;
    ck_assert_int_eq(msccl_doc_parse(x, strlen(x), &d, &err), CS_OK);
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    o.collective = &c;
    for (int inplace = 0; inplace < 2; inplace++) {
        o.inplace = inplace;
        ck_assert_msg(msccl_interp_check(d, &o, NULL, &err) == CS_OK, "%s", err.message);
    }
    msccl_doc_free(d);
    free(x);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(forwarding_ranks_use_scratch)
{
    /* gather to rank 0 on the chain 0-1-2: rank 1 forwards rank 2's chunk, so
     * it parks it in scratch; only the root has output slots for it */
    cs_topology *t = cgt_topology(3, 1, false);
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_GATHER, 0);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 3, 1, 2, &a, &err), CS_OK);
    algorithm_add_send(a, 1, 1, 0, 0, CS_OP_COPY);
    algorithm_add_send(a, 2, 2, 1, 0, CS_OP_COPY);
    algorithm_add_send(a, 2, 1, 0, 1, CS_OP_COPY);
    int rc;
    char *x;
    rc = gen(a, t, CS_MSCCL_RUNTIME_EXECUTOR, &x, &err);
    ck_assert_msg(rc == CS_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(x, "<gpu id=\"1\" i_chunks=\"1\" o_chunks=\"3\" s_chunks=\"1\">"));
    ck_assert_ptr_nonnull(strstr(x, "type=\"r\" srcbuf=\"i\" srcoff=\"0\" dstbuf=\"s\" dstoff=\"0\""));
    ck_assert_ptr_nonnull(strstr(x, "coll=\"gather\" inplace=\"0\""));
    cs_msccl_doc *d;
    ck_assert_int_eq(msccl_doc_parse(x, strlen(x), &d, &err), CS_OK);
    cs_msccl_interp_options o;
    msccl_interp_options_default(&o);
    o.collective = &c;
    ck_assert_msg(msccl_interp_check(d, &o, NULL, &err) == CS_OK, "%s", err.message);
    msccl_doc_free(d);
    free(x);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

static cs_algorithm *shape(int steps, int rounds, int chunks)
{
    cs_error err;
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(algorithm_new(&c, "chain", 2, chunks, steps, &a, &err), CS_OK);
    for (int s = 0; s < steps; s++)
        a->rounds_per_step[s] = s == 0 ? rounds - (steps - 1) : 1;
    algorithm_update_rounds(a);
    ck_assert_int_eq(a->rounds, rounds);
    return a;
}

START_TEST(frontier_size_ranges_meet_at_the_crossover)
{
    /* alpha 0.7 us, beta 1/25e3 us per byte.  (S=2, R/C=3/2) costs
     * 1.4 + 1.5 L beta, (S=3, R/C=7/6) 2.1 + (7/6) L beta: equal at
     * L = 0.7 / ((1/3) beta) = 52500 bytes.  (S=4, R/C=8/6) is never best. */
    cs_topology *t = cgt_topology(2, 1, false);
    cs_error err;
    cs_result *r;
    ck_assert_int_eq(result_new("smt", &r, &err), CS_OK);
    ck_assert_int_eq(result_add(r, shape(2, 3, 2)), CS_OK);
    ck_assert_int_eq(result_add(r, shape(3, 7, 6)), CS_OK);
    ck_assert_int_eq(result_add(r, shape(4, 8, 6)), CS_OK);
    cs_byte_range g[3];
    ck_assert_int_eq(msccl_frontier_ranges(r, t, g, &err), CS_OK);
    int fast = -1, big = -1, never = -1;
    for (int i = 0; i < 3; i++) {
        if (r->algs[i]->steps == 2) fast = i;
        if (r->algs[i]->steps == 3) big = i;
        if (r->algs[i]->steps == 4) never = i;
    }
    ck_assert(g[fast].best && g[fast].min_bytes == 0 && g[fast].max_bytes == 52500);
    ck_assert(g[big].best && g[big].min_bytes == 52500 && g[big].max_bytes == 0);
    ck_assert(!g[never].best);
    /* consistent with the frontier's own choice */
    ck_assert_ptr_eq(result_best_for_size(r, t, 52499), r->algs[fast]);
    ck_assert_ptr_eq(result_best_for_size(r, t, 52501), r->algs[big]);
    result_free(r);
    topology_free(t);
}
END_TEST

/* The CLI front end (skipped when the binary is not built). */
/* Broadcast of 60 chunks from rank 0 to 1 on line:2, all in the first of
 * k steps with 3600/k rounds in all: cost k alpha + (60/k) L beta, so each
 * k = 1..6 is the cheapest for some size (the crossing of k and k + 1 is
 * at L = k (k + 1) alpha / (60 beta), growing with k). */
static cs_result *six_winners(void)
{
    cs_error err;
    cs_result *r;
    ck_assert_int_eq(result_new("smt", &r, &err), CS_OK);
    for (int k = 1; k <= 6; k++) {
        cs_collective c;
        collective_init(&c, CS_COLL_BROADCAST, 0);
        cs_algorithm *a;
        ck_assert_int_eq(algorithm_new(&c, "line:2", 2, 60, k, &a, &err), CS_OK);
        for (int s = 0; s < k; s++)
            a->rounds_per_step[s] = s == 0 ? 3600 / k - (k - 1) : 1;
        algorithm_update_rounds(a);
        for (int j = 0; j < 60; j++)
            ck_assert_int_eq(algorithm_add_send(a, j, 0, 1, 0, CS_OP_COPY), CS_OK);
        snprintf(a->method, sizeof a->method, "smt");
        ck_assert_int_eq(result_add(r, a), CS_OK);
    }
    return r;
}

START_TEST(frontier_documents_are_capped_for_the_old_runtime)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("line:2", &t, &err), CS_OK);
    cs_result *r = six_winners();
    for (int i = 0; i < 6; i++)
        ck_assert_msg(algorithm_verify(t, r->algs[i], &err) == CS_OK, "%s", err.message);
    cs_byte_range all[6], four[6];
    ck_assert_int_eq(msccl_frontier_ranges(r, t, all, &err), CS_OK);
    for (int i = 0; i < 6; i++)
        ck_assert_msg(all[i].best, "point %d should be the cheapest somewhere", i);
    int dropped = -1;
    ck_assert_int_eq(msccl_frontier_ranges_limited(r, t, 4, four, &dropped, &err), CS_OK);
    ck_assert_int_eq(dropped, 2);
    /* four kept, and their ranges still cover every size: [0, a) [a, b) ... [z, inf) */
    int kept = 0;
    long long next = 0;
    for (int i = 0; i < 6; i++) {
        if (!four[i].best)
            continue;
        kept++;
        ck_assert_int_eq(four[i].min_bytes, next);
        next = four[i].max_bytes;
        ck_assert(four[i].max_bytes == 0 || four[i].max_bytes > four[i].min_bytes);
    }
    ck_assert_int_eq(kept, 4);
    ck_assert_int_eq(next, 0);
    /* the extremes are irreplaceable: the fastest for tiny and for huge sizes */
    ck_assert(four[0].best && four[5].best);
    /* within the limit nothing changes */
    ck_assert_int_eq(msccl_frontier_ranges_limited(r, t, 6, four, &dropped, &err), CS_OK);
    ck_assert_int_eq(dropped, 0);
    for (int i = 0; i < 6; i++)
        ck_assert(four[i].best == all[i].best && four[i].min_bytes == all[i].min_bytes &&
                  four[i].max_bytes == all[i].max_bytes);

    /* the CLI writes at most 4 documents for the msccl runtime and auto, and
     * says which were dropped; every one for the executor */
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char bin[512];
    snprintf(bin, sizeof bin, "%s/collsynth", build);
    if (access(bin, X_OK) != 0) {
        printf("test_msccl_xml: SKIPPED the CLI part: %s not built\n", bin);
    } else {
        char dir[] = "/tmp/collsynth-frontier-XXXXXX";
        ck_assert_ptr_nonnull(mkdtemp(dir));
        char rpath[600], cmd[2048], out[700];
        snprintf(rpath, sizeof rpath, "%s/result.json", dir);
        json_t *j = result_to_json(r);
        ck_assert_int_eq(json_dump_file(j, rpath, 0), 0);
        json_decref(j);
        const char *rts[] = {"msccl", "auto", "msccl-executor"};
        int expect[] = {4, 4, 6};
        for (int k = 0; k < 3; k++) {
            snprintf(cmd, sizeof cmd, "rm -f '%s'/*.xml; '%s' codegen '%s' --format msccl-xml "
                     "--runtime %s --frontier-dir '%s' > '%s/files.txt' 2> '%s/err.txt'", dir,
                     bin, rpath, rts[k], dir, dir, dir);
            ck_assert_int_eq(system(cmd), 0);
            char *text;
            snprintf(out, sizeof out, "%s/files.txt", dir);
            ck_assert_int_eq(cs_read_file(out, &text, NULL, &err), CS_OK);
            ck_assert_msg(count(text, ".xml") == expect[k], "%s: %s", rts[k], text);
            free(text);
            snprintf(out, sizeof out, "%s/err.txt", dir);
            ck_assert_int_eq(cs_read_file(out, &text, NULL, &err), CS_OK);
            ck_assert_msg(count(text, "dropped") == (expect[k] == 4 ? 2 : 0), "%s: %s", rts[k],
                          text);
            free(text);
        }
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        ck_assert_int_eq(system(cmd), 0);
    }
    result_free(r);
    topology_free(t);
}
END_TEST

START_TEST(cli_codegen_writes_both_formats)
{
    const char *build = getenv("BUILD") ? getenv("BUILD") : "build";
    char bin[512];
    snprintf(bin, sizeof bin, "%s/collsynth", build);
    if (access(bin, X_OK) != 0) {
        printf("test_msccl_xml: SKIPPED cli_codegen_writes_both_formats: %s not built\n", bin);
        return;
    }
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("dgx1", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    char dir[] = "/tmp/collsynth-cli-codegen-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[600], out[600], cmd[2048];
    snprintf(path, sizeof path, "%s/alg.json", dir);
    json_t *j = algorithm_to_json(a);
    ck_assert_int_eq(json_dump_file(j, path, 0), 0);
    json_decref(j);
    /* a result holding the algorithm, for --index */
    cs_result *r;
    ck_assert_int_eq(result_new("ring", &r, &err), CS_OK);
    cs_algorithm *copy;
    ck_assert_int_eq(algorithm_clone(a, &copy, &err), CS_OK);
    ck_assert_int_eq(result_add(r, copy), CS_OK);
    j = result_to_json(r);
    char rpath[600];
    snprintf(rpath, sizeof rpath, "%s/result.json", dir);
    ck_assert_int_eq(json_dump_file(j, rpath, 0), 0);
    json_decref(j);
    result_free(r);
    snprintf(out, sizeof out, "%s/a.xml", dir);
    snprintf(cmd, sizeof cmd, "'%s' codegen '%s' --format msccl-xml --runtime msccl "
             "--min-bytes 1KiB --max-bytes 1MiB -o '%s'", bin, path, out);
    ck_assert_int_eq(system(cmd), 0);
    char *text = NULL;
    ck_assert_int_eq(cs_read_file(out, &text, NULL, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(text, "coll=\"allreduce\""));
    ck_assert_ptr_nonnull(strstr(text, "minBytes=\"1024\" maxBytes=\"1048576\""));
    free(text);
    snprintf(out, sizeof out, "%s/a.cu", dir);
    snprintf(cmd, sizeof cmd, "'%s' codegen '%s' --index 0 --format cuda --elem double -o '%s'",
             bin, rpath, out);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(cs_read_file(out, &text, NULL, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(text, "__global__ void collsynth_kernel"));
    ck_assert_ptr_nonnull(strstr(text, "#define COLLSYNTH_ELEM double"));
    free(text);
    /* --ranks: one rank's slice */
    snprintf(out, sizeof out, "%s/r3.xml", dir);
    snprintf(cmd, sizeof cmd, "'%s' codegen '%s' --format msccl-xml --ranks 3 -o '%s'", bin, path,
             out);
    ck_assert_int_eq(system(cmd), 0);
    ck_assert_int_eq(cs_read_file(out, &text, NULL, &err), CS_OK);
    ck_assert_int_eq(count(text, "<gpu "), 1);
    ck_assert_ptr_nonnull(strstr(text, "<gpu id=\"3\""));
    ck_assert_ptr_nonnull(strstr(text, "ngpus=\"8\""));
    free(text);
    snprintf(cmd, sizeof cmd, "'%s' codegen '%s' --format msccl-xml --ranks 6-9 2>/dev/null", bin,
             path);
    int st8 = system(cmd);
    ck_assert(WIFEXITED(st8) && WEXITSTATUS(st8) == 2);
    /* --frontier-dir: one document per winning frontier point */
    snprintf(cmd, sizeof cmd, "'%s' codegen '%s' --format msccl-xml --frontier-dir '%s' "
             "> '%s/files.txt' 2>/dev/null", bin, rpath, dir, dir);
    ck_assert_int_eq(system(cmd), 0);
    snprintf(out, sizeof out, "%s/files.txt", dir);
    ck_assert_int_eq(cs_read_file(out, &text, NULL, &err), CS_OK);
    ck_assert_msg(strncmp(text, "MSCCL_XML_FILES=", 16) == 0 && strstr(text, ".xml"), "%s", text);
    free(text);
    /* usage errors exit 2; a runtime limit exits 2; an index past the frontier 2 */
    snprintf(cmd, sizeof cmd, "'%s' codegen '%s' --format yaml 2>/dev/null", bin, path);
    int st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(cmd, sizeof cmd, "'%s' codegen '%s' --index 3 --format cuda 2>/dev/null", bin, rpath);
    st = system(cmd);
    ck_assert(WIFEXITED(st) && WEXITSTATUS(st) == 2);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

static Suite *msccl_xml_suite(void)
{
    Suite *s = suite_create("msccl_xml");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, ring_allgather_document_matches_hand_lowering);
    tcase_add_test(tc, collective_names_follow_the_runtime);
    tcase_add_test(tc, step_limits_spread_channels_then_merge_then_give_elimit);
    tcase_add_test(tc, runs_are_merged_before_channels_are_dealt);
    tcase_add_test(tc, thread_block_limits_are_refused_with_the_rank);
    tcase_add_test(tc, gpu_sms_caps_thread_blocks_per_rank);
    tcase_add_test(tc, checker_takes_gpu_sms);
    tcase_add_test(tc, chunk_slots_beyond_the_plan_limit_are_refused);
    tcase_add_test(tc, parked_runs_get_neighbouring_scratch_slots);
    tcase_add_test(tc, channels_widen_when_the_estimate_is_short);
    tcase_add_test(tc, channels_widen_when_runs_cannot_merge);
    tcase_add_test(tc, rank_slices_hold_the_same_algo_and_their_gpus);
    tcase_add_test(tc, the_limit_checker_counts_on_the_text);
    tcase_add_test(tc, lanes_become_channels);
    tcase_add_test(tc, both_directions_of_a_link_merge);
    tcase_add_test(tc, same_step_chunks_merge_into_one_step);
    tcase_add_test(tc, allreduce_is_one_inplace_document);
    tcase_add_test(tc, byte_range_and_protocol_attributes);
    tcase_add_test(tc, custom_collectives_only_on_the_old_runtime);
    tcase_add_test(tc, rejects_a_schedule_that_sends_what_it_does_not_hold);
    tcase_add_test(tc, several_waits_become_nops);
    tcase_add_test(tc, forwarding_ranks_use_scratch);
    tcase_add_test(tc, cli_codegen_writes_both_formats);
    tcase_add_test(tc, frontier_size_ranges_meet_at_the_crossover);
    tcase_add_test(tc, frontier_documents_are_capped_for_the_old_runtime);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(msccl_xml_suite)
