/*
 * Tests of the request collsynthd's HTTP thread hands to its worker
 * (synth_request_make_canonical, server/jobs.h jobs_hand_over): a request
 * parsed from a client's document and made canonical must be what parsing
 * its canonical text gives, field by field in the topology, and must give
 * the same result, byte for byte, for every method that runs on it.  The
 * documents are the ones a Slurm hook sends: clusters whose groups list
 * their ranks out of order and whose links come in any order, builtin names.
 * What cannot be made canonical in place (two shared sets of the document,
 * custom collectives) is refused, so the worker parses those.
 */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "check_main.h"
#include "cluster_testutil.h"
#include "synthesize.h"

static cs_synth_limits limits(void)
{
    cs_synth_limits lim;
    synth_limits_default(&lim);
    return lim;
}

/* Field-by-field equality of two finalized topologies, every array in
 * order (what the synthesizers see). */
static void assert_same_topology(const cs_topology *a, const cs_topology *b)
{
    ck_assert_str_eq(a->name, b->name);
    ck_assert_int_eq(a->ranks, b->ranks);
    ck_assert_int_eq(a->nlinks, b->nlinks);
    for (int i = 0; i < a->nlinks; i++) {
        const cs_link *x = &a->links[i], *y = &b->links[i];
        ck_assert_msg(x->src == y->src && x->dst == y->dst && x->lanes == y->lanes &&
                          x->gbps == y->gbps && x->alpha_us == y->alpha_us &&
                          x->switch_id == y->switch_id,
                      "link %d: %d->%d vs %d->%d", i, x->src, x->dst, y->src, y->dst);
    }
    ck_assert_int_eq(a->nshared, b->nshared);
    for (int i = 0; i < a->nshared; i++) {
        ck_assert_int_eq(a->shared[i].nlinks, b->shared[i].nlinks);
        ck_assert_int_eq(a->shared[i].lanes, b->shared[i].lanes);
        ck_assert_int_eq(a->shared[i].switch_id, b->shared[i].switch_id);
        ck_assert(!memcmp(a->shared[i].links, b->shared[i].links,
                          sizeof(int) * (size_t)a->shared[i].nlinks));
    }
    ck_assert_int_eq(a->nswitches, b->nswitches);
    for (int i = 0; i < a->nswitches; i++) {
        const cs_switch *x = &a->switches[i], *y = &b->switches[i];
        ck_assert_str_eq(x->name, y->name);
        ck_assert_int_eq(x->nranks, y->nranks);
        ck_assert(!memcmp(x->ranks, y->ranks, sizeof(int) * (size_t)x->nranks));
        ck_assert(x->gbps == y->gbps && x->alpha_us == y->alpha_us && x->copy == y->copy &&
                  x->node == y->node);
    }
    ck_assert_int_eq(a->ngroups, b->ngroups);
    for (int g = 0; g < a->ngroups; g++) {
        ck_assert_int_eq(a->groups[g].nranks, b->groups[g].nranks);
        ck_assert_msg(!memcmp(a->groups[g].ranks, b->groups[g].ranks,
                              sizeof(int) * (size_t)a->groups[g].nranks),
                      "group %d lists its ranks in another order", g);
    }
    for (int r = 0; a->ngroups > 0 && r < a->ranks; r++)
        ck_assert_int_eq(a->group_of[r], b->group_of[r]);
    ck_assert_int_eq(a->nswitch_nodes, b->nswitch_nodes);
    ck_assert_int_eq(a->diameter_cache, b->diameter_cache);
}

static void assert_same_request(const cs_synth_request *a, const cs_synth_request *b)
{
    ck_assert_str_eq(a->key, b->key);
    ck_assert_str_eq(a->method, b->method);
    ck_assert_int_eq(a->method_kind, b->method_kind);
    assert_same_topology(a->topology, b->topology);
    ck_assert(a->instance == NULL && b->instance == NULL);
    ck_assert_int_eq(a->collective.kind, b->collective.kind);
    ck_assert_int_eq(a->collective.root, b->collective.root);
    ck_assert(a->wait_s == b->wait_s && a->time_limit_s == b->time_limit_s);
    ck_assert(a->codegen == b->codegen);
    ck_assert(!memcmp(&a->hier, &b->hier, sizeof a->hier));
    ck_assert_int_eq(a->baseline.chunks, b->baseline.chunks);
    ck_assert_int_eq(a->tacos.chunks, b->tacos.chunks);
    ck_assert_int_eq(a->tacos.seed, b->tacos.seed);
    ck_assert_int_eq(a->smt.max_chunks, b->smt.max_chunks);
    ck_assert_int_eq(a->smt.k, b->smt.k);
}

/* Drops every member named *seconds (the run's own timings: synth_seconds,
 * stats.*_seconds, bounds.time.seconds) and stats.peak_rss_kb, which differ
 * between any two runs of one request. */
static void strip_timings(json_t *v)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            strip_timings(json_array_get(v, i));
        return;
    }
    if (!json_is_object(v))
        return;
    const char *k;
    json_t *x;
    void *tmp;
    json_object_foreach_safe(v, tmp, k, x) {
        size_t n = strlen(k);
        if ((n >= 7 && strcmp(k + n - 7, "seconds") == 0) || strcmp(k, "peak_rss_kb") == 0)
            json_object_del(v, k);
        else
            strip_timings(x);
    }
}

/* The result document as the daemon stores it, without the run's timings. */
static char *run_text(const cs_synth_request *r)
{
    cs_synth_limits lim = limits();
    cs_result *res = NULL;
    cs_error err;
    ck_assert_msg(synth_run(r, &lim, NULL, &res, &err) == CS_OK, "%s", err.message);
    json_t *doc = synth_result_to_json(r, res);
    result_free(res);
    ck_assert_ptr_nonnull(doc);
    strip_timings(doc);
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    json_decref(doc);
    return text;
}

/* body (a request document) parsed as the HTTP thread parses it and made
 * canonical, against its canonical text parsed as the worker parses it:
 * the same request, the same result. */
static void check_handover(const char *body, bool expect_canonical)
{
    cs_synth_limits lim = limits();
    cs_synth_request *a = NULL, *b = NULL;
    cs_error err;
    ck_assert_msg(synth_request_parse(body, strlen(body), &lim, &a, &err) == CS_OK, "%s",
                  err.message);
    char *canon = synth_request_canonical_text(a);
    ck_assert_msg(synth_request_parse(canon, strlen(canon), &lim, &b, &err) == CS_OK, "%s",
                  err.message);
    bool made = synth_request_make_canonical(a);
    ck_assert_int_eq(made, expect_canonical);
    char *canon2 = synth_request_canonical_text(a);
    ck_assert_str_eq(canon, canon2);   /* the key and the stored request stay */
    free(canon2);
    if (made) {
        assert_same_request(a, b);
        char *ra = run_text(a), *rb = run_text(b);
        if (getenv("HANDOVER_DUMP") && strcmp(ra, rb)) {
            FILE *f = fopen("/tmp/hp/ra.json", "w");
            fputs(ra, f);
            fclose(f);
            f = fopen("/tmp/hp/rb.json", "w");
            fputs(rb, f);
            fclose(f);
        }
        ck_assert_msg(strcmp(ra, rb) == 0, "the handed-over request's result differs (%zu vs "
                      "%zu bytes)", strlen(ra), strlen(rb));
        free(ra);
        free(rb);
    }
    free(canon);
    synth_request_free(a);
    synth_request_free(b);
}

/* The Slurm hook's DGX-1 cluster of `nodes` nodes with every group's ranks
 * listed backwards and the links in reverse order: the same cluster as the
 * canonical form says it, listed as an allocation may list it. */
static char *hook_body(int nodes, const char *coll, const char *method, const char *options)
{
    json_t *expanded = NULL;
    char msg[256] = "";
    json_t *topo = cluster_hook_dgx1("hp", nodes, 0, "switch", 12.5, &expanded, msg, sizeof msg);
    ck_assert_msg(topo && expanded, "%s", msg);
    json_decref(topo);
    json_t *groups = json_object_get(expanded, "groups");
    for (size_t g = 0; g < json_array_size(groups); g++) {
        json_t *ranks = json_array_get(groups, g);
        if (json_is_object(ranks))
            ranks = json_object_get(ranks, "ranks");
        json_t *rev = json_array();
        for (size_t i = json_array_size(ranks); i-- > 0;)
            json_array_append(rev, json_array_get(ranks, i));
        json_array_clear(ranks);
        json_array_extend(ranks, rev);
        json_decref(rev);
    }
    json_t *links = json_object_get(expanded, "links");
    json_t *rl = json_array();
    for (size_t i = json_array_size(links); i-- > 0;)
        json_array_append(rl, json_array_get(links, i));
    json_object_set_new(expanded, "links", rl);
    char *topo_text = json_dumps(expanded, JSON_COMPACT);
    json_decref(expanded);
    size_t n = strlen(topo_text) + 512;
    char *body = malloc(n);
    snprintf(body, n,
             "{\"topology\":%s,\"collective\":\"%s\",\"method\":\"%s\",\"options\":{%s}}",
             topo_text, coll, method, options);
    free(topo_text);
    return body;
}

START_TEST(renumbered_cluster_handed_over_equals_reparsed)
{
    static const char *const cases[][3] = {
        {"allgather", "auto", "\"wait_s\":30,\"time_limit_s\":100"},
        {"allreduce", "hierarchical", "\"smt_time_limit_s\":5,\"wait_s\":1"},
        {"allgather", "tacos", "\"chunks\":2,\"codegen\":\"msccl-xml\""},
        {"allgather", "ring", "\"time_limit_s\":7"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *body = hook_body(4, cases[i][0], cases[i][1], cases[i][2]);
        check_handover(body, true);
        free(body);
    }
}
END_TEST

START_TEST(builtins_handed_over_equal_reparsed)
{
    static const char *const bodies[] = {
        "{\"topology\":\"dgxh100:2\",\"collective\":\"allgather\",\"method\":\"hierarchical\"}",
        "{\"topology\":\"dgx1\",\"collective\":{\"kind\":\"broadcast\",\"root\":3},"
        "\"method\":\"tacos\",\"options\":{\"wait_s\":2}}",
        /* not smt: its stats count instances a process-wide memo answered */
        "{\"topology\":\"torus2d:3x3\",\"collective\":\"allreduce\",\"method\":\"tacos\","
        "\"options\":{\"chunks\":2}}",
    };
    for (size_t i = 0; i < sizeof bodies / sizeof *bodies; i++)
        check_handover(bodies[i], true);
}
END_TEST

/* What the canonical form reorders beyond groups is left to the worker's
 * own parse. */
START_TEST(what_cannot_be_made_canonical_is_refused)
{
    /* two shared sets, listed against the canonical order */
    const char *shared =
        "{\"topology\":{\"name\":\"sh\",\"ranks\":3,\"links\":["
        "{\"src\":0,\"dst\":1,\"lanes\":1,\"gbps\":10,\"alpha_us\":1,\"bidirectional\":true},"
        "{\"src\":1,\"dst\":2,\"lanes\":1,\"gbps\":10,\"alpha_us\":1,\"bidirectional\":true},"
        "{\"src\":0,\"dst\":2,\"lanes\":1,\"gbps\":10,\"alpha_us\":1,\"bidirectional\":true}],"
        "\"shared\":[{\"links\":[[1,2],[2,1]],\"lanes\":1},{\"links\":[[0,1],[1,0]],"
        "\"lanes\":1}]},\"collective\":\"allgather\",\"method\":\"tacos\"}";
    check_handover(shared, false);
    const char *custom =
        "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"custom\",\"global_chunks\":1,"
        "\"pre\":[[0,2],[0,0]],\"post\":[[0,3],[0,1]]},\"method\":\"tacos\"}";
    check_handover(custom, false);
}
END_TEST

static Suite *suite(void)
{
    Suite *s = suite_create("handover");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, renumbered_cluster_handed_over_equals_reparsed);
    tcase_add_test(tc, builtins_handed_over_equal_reparsed);
    tcase_add_test(tc, what_cannot_be_made_canonical_is_refused);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(suite)
