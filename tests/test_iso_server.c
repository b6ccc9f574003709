/*
 * Service tests of the isomorphism-aware cache (server/iso_cache.h, started
 * as the real build/collsynthd on an ephemeral port and a temp dir):
 *  - two 16-node allocations of the Slurm hook's DGX-1 cluster that differ in
 *    node order and rank labels: the second POST runs no synthesis (the
 *    daemon's synthesis counter stays at 1) and returns, under its own key,
 *    a schedule relabelled to its numbering ("relabelled_from" naming the
 *    first key) that passes the verifier on the second topology;
 *  - the same with NVSwitch nodes on 8 rails, across a daemon restart (the
 *    index is in the store);
 *  - a request isomorphic to a job still running waits for it instead of
 *    synthesizing again;
 *  - a fleet of two daemons on PostgreSQL shares the index: a hit and a
 *    wait across daemons;
 *  - old keys stay valid: the first request still hits its own result.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "cluster_testutil.h"
#include "iso.h"
#include "pg_fixture.h"
#include "daemon_check.h"
#include "server_harness.h"
#include "synthesize.h"
#include "verify.h"

#define STARTED "collsynth_syntheses_total{outcome=\"started\"}"
#define ISO_HITS "collsynth_iso_total{outcome=\"hit\"}"

static long post_doc(const cs_daemon *d, json_t *req, json_t **doc)
{
    char *body = json_dumps(req, JSON_COMPACT);
    http_resp r;
    ck_assert_int_eq(http_request(d, "POST", "/v1/synthesize", body, NULL, &r), 0);
    free(body);
    long st = r.status;
    *doc = resp_json(&r);
    http_resp_free(&r);
    return st;
}

/* The hook's topology for the allocation `names` (n DGX-1 nodes, NICs
 * 0,2,4,6 on one fabric switch of 12.5 GB/s). */
static json_t *hook_allocation(int n, int first_node)
{
    char msg[256];
    json_t *topo = cluster_hook_dgx1("lab", n, first_node, "switch", 12.5, NULL, msg, sizeof msg);
    ck_assert_msg(topo != NULL, "%s", msg);
    return topo;
}

/* The same cluster numbered another way: its nodes (groups) in another order
 * and the ranks of each node in another order, as another allocation of the
 * same shape gets them. */
static json_t *renumbered(const json_t *topology, unsigned seed)
{
    cs_topology *t = NULL, *u = NULL;
    cs_error err;
    cs_topology_parse_options po = {0};
    ck_assert_int_eq(topology_from_json(topology, &po, &t, &err), CS_OK);
    int *map = malloc(sizeof *map * (size_t)t->ranks);
    int *order = malloc(sizeof *order * (size_t)t->ngroups);
    srand(seed);
    for (int q = 0; q < t->ngroups; q++)
        order[q] = q;
    for (int q = t->ngroups - 1; q > 0; q--) {
        int k = rand() % (q + 1), x = order[q];
        order[q] = order[k];
        order[k] = x;
    }
    int next = 0;
    for (int i = 0; i < t->ngroups; i++) {
        const cs_group *g = &t->groups[order[i]];
        int *p = malloc(sizeof *p * (size_t)g->nranks);
        for (int k = 0; k < g->nranks; k++)
            p[k] = k;
        for (int k = g->nranks - 1; k > 0; k--) {
            int j = rand() % (k + 1), x = p[k];
            p[k] = p[j];
            p[j] = x;
        }
        for (int k = 0; k < g->nranks; k++)
            map[g->ranks[k]] = next + p[k];
        next += g->nranks;
        free(p);
    }
    ck_assert_int_eq(iso_relabel_topology(t, map, "lab-dgx1-x16-second", &u, &err), CS_OK);
    json_t *doc = topology_to_json(u);
    free(map);
    free(order);
    topology_free(t);
    topology_free(u);
    return doc;
}

static json_t *request(json_t *topology, const char *coll, const char *method, int wait_s)
{
    return json_pack("{s:O, s:{s:s}, s:s, s:{s:i}}", "topology", topology, "collective", "kind",
                     coll, "method", method, "options", "wait_s", wait_s);
}

/* Every frontier algorithm of the response verifies on `topology`. */
static void verify_on(const json_t *result, const json_t *topology)
{
    cs_result *res = NULL;
    cs_error err;
    cs_error_clear(&err);
    ck_assert_msg(result_from_json(result, &res, &err) == CS_OK, "%s", err.message);
    cs_topology *t = NULL;
    cs_topology_parse_options po = {0};
    ck_assert_int_eq(topology_from_json(topology, &po, &t, &err), CS_OK);
    ck_assert_int_ge(res->nalgs, 1);
    for (int i = 0; i < res->nalgs; i++) {
        ck_assert_int_gt(res->algs[i]->nsends, 0);
        ck_assert_msg(algorithm_verify(t, res->algs[i], &err) == CS_OK, "alg %d: %s", i,
                      err.message);
    }
    topology_free(t);
    result_free(res);
}

/* Two allocations, one synthesis: returns the second response. */
static void second_allocation_is_relabelled(cs_daemon *d, json_t *first, json_t *second,
                                            const char *coll, double started_before,
                                            char key1[65], char key2[65])
{
    json_t *doc = NULL;
    json_t *req = request(first, coll, "tacos", 120);
    ck_assert_int_eq(post_doc(d, req, &doc), 200);
    json_decref(req);
    snprintf(key1, 65, "%s", json_str(doc, "key"));
    ck_assert_ptr_null(json_object_get(doc, "relabelled_from"));
    verify_on(doc, first);
    json_t *r1 = json_object_get(json_array_get(json_object_get(doc, "frontier"), 0),
                                 "ratio_to_bound");
    double ratio1 = json_number_value(r1);
    ck_assert_ptr_nonnull(r1);
    json_decref(doc);
    ck_assert_int_eq((long)metrics_value(d, STARTED), (long)started_before + 1);
    double hits = metrics_value(d, ISO_HITS);

    req = request(second, coll, "tacos", 120);
    double t0 = cs_now();
    ck_assert_int_eq(post_doc(d, req, &doc), 200);
    double secs = cs_now() - t0;
    json_decref(req);
    snprintf(key2, 65, "%s", json_str(doc, "key"));
    ck_assert_str_ne(key1, key2); /* its own key: the request is another */
    ck_assert_str_eq(json_str(doc, "relabelled_from"), key1);
    ck_assert_str_eq(json_str(doc, "topology"), json_string_value(json_object_get(second, "name")));
    verify_on(doc, second);
    /* the same schedule on an isomorphic network: the same bound and ratio */
    ck_assert_ptr_nonnull(json_object_get(json_object_get(doc, "bounds"), "time"));
    json_t *r2 = json_object_get(json_array_get(json_object_get(doc, "frontier"), 0),
                                 "ratio_to_bound");
    ck_assert_ptr_nonnull(r2);
    ck_assert(json_number_value(r2) == ratio1);
    json_decref(doc);
    /* no synthesis ran for it */
    ck_assert_int_eq((long)metrics_value(d, STARTED), (long)started_before + 1);
    ck_assert_int_eq((long)metrics_value(d, ISO_HITS), (long)hits + 1);
    fprintf(stderr, "test_iso_server: second %s allocation answered in %.3f s\n", coll, secs);
}

static json_t *get_result(const cs_daemon *d, const char *key)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/results/%s", key);
    http_resp r;
    ck_assert_int_eq(http_request(d, "GET", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_t *doc = resp_json(&r);
    http_resp_free(&r);
    return doc;
}

START_TEST(second_hook_allocation_runs_no_synthesis)
{
    cs_daemon d;
    ck_assert_int_eq(daemon_start(&d, NULL, NULL, NULL), 0);
    json_t *a = hook_allocation(16, 1);
    /* other nodes of the cluster, renumbered */
    json_t *b0 = hook_allocation(16, 101);
    json_t *b = renumbered(b0, 11);
    char k1[65], k2[65];
    second_allocation_is_relabelled(&d, a, b, "allgather", 0, k1, k2);
    /* the relabelled result is stored under the second key for good */
    json_t *doc = get_result(&d, k2);
    ck_assert_str_eq(json_str(doc, "relabelled_from"), k1);
    verify_on(doc, b);
    json_decref(doc);
    /* and generates code as its source does (a flat TACOS schedule on 128
     * ranks may exceed the MSCCL runtimes' limits: then both are refused) */
    long code[2];
    for (int i = 0; i < 2; i++) {
        char path[160];
        snprintf(path, sizeof path, "/v1/results/%s?format=cuda&size=1048576", i ? k2 : k1);
        http_resp x;
        ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &x), 0);
        code[i] = x.status;
        if (x.status == 200)
            ck_assert_uint_gt(x.len, 100);
        http_resp_free(&x);
    }
    ck_assert_int_eq(code[1], code[0]);
    fprintf(stderr, "test_iso_server: cuda of both results: HTTP %ld\n", code[1]);
    /* and the first key still answers with its own result */
    json_t *req = request(a, "allgather", "tacos", 10);
    ck_assert_int_eq(post_doc(&d, req, &doc), 200);
    ck_assert_str_eq(json_str(doc, "key"), k1);
    ck_assert_ptr_null(json_object_get(doc, "relabelled_from"));
    json_decref(doc);
    json_decref(req);
    /* a non-isomorphic cluster (slower fabric) is synthesized */
    json_t *slow = hook_allocation(16, 1);
    json_object_set_new(json_array_get(json_object_get(slow, "switches"),
                                       json_array_size(json_object_get(slow, "switches")) - 1),
                        "gbps", json_real(6.25));
    req = request(slow, "allgather", "tacos", 120);
    ck_assert_int_eq(post_doc(&d, req, &doc), 200);
    ck_assert_ptr_null(json_object_get(doc, "relabelled_from"));
    json_decref(doc);
    json_decref(req);
    ck_assert_int_eq((long)metrics_value(&d, STARTED), 2);
    json_decref(slow);
    json_decref(a);
    json_decref(b0);
    json_decref(b);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(rail_cluster_hit_survives_restart)
{
    char dir[] = "/tmp/cs-iso-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    cs_daemon d;
    ck_assert_int_eq(daemon_start(&d, NULL, dir, NULL), 0);
    char *text = cluster_topology_json(16, 8, 450.0, 50.0);
    json_t *a = json_loads(text, 0, NULL);
    free(text);
    json_t *req = request(a, "allreduce", "tacos", 120), *doc = NULL;
    ck_assert_int_eq(post_doc(&d, req, &doc), 200);
    char k1[65];
    snprintf(k1, sizeof k1, "%s", json_str(doc, "key"));
    json_decref(doc);
    json_decref(req);
    ck_assert_int_eq(daemon_stop_ex(&d, 30, true), 0);

    /* a new daemon on the same store: the index is durable */
    ck_assert_int_eq(daemon_start(&d, NULL, dir, NULL), 0);
    json_t *b = renumbered(a, 5);
    req = request(b, "allreduce", "tacos", 120);
    ck_assert_int_eq(post_doc(&d, req, &doc), 200);
    ck_assert_str_eq(json_str(doc, "relabelled_from"), k1);
    verify_on(doc, b);
    json_decref(doc);
    json_decref(req);
    ck_assert_int_eq((long)metrics_value(&d, STARTED), 0);
    json_decref(a);
    json_decref(b);
    ck_assert_int_eq(daemon_stop(&d), 0); /* removes nothing: the dir was ours */
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

START_TEST(isomorphic_request_waits_for_the_running_job)
{
    const char *extra[] = {"--workers", "2", NULL};
    cs_daemon d;
    ck_assert_int_eq(daemon_start(&d, NULL, NULL, extra), 0);
    /* SMT on ring:6 takes a moment; the second request is ring:6 renumbered */
    json_t *a = cluster_fetch_builtin_local(NULL, "ring:6", NULL, 0);
    cs_topology *t = NULL, *u = NULL;
    cs_error err;
    ck_assert_int_eq(topology_builtin("ring:6", &t, &err), CS_OK);
    int map[6] = {3, 5, 0, 2, 4, 1};
    ck_assert_int_eq(iso_relabel_topology(t, map, "ring6-renumbered", &u, &err), CS_OK);
    json_t *b = topology_to_json(u);
    topology_free(t);
    topology_free(u);

    json_t *req = request(a, "allgather", "smt", 0), *doc = NULL;
    long st = post_doc(&d, req, &doc);
    json_decref(req);
    ck_assert_msg(st == 202 || st == 200, "status %ld", st);
    char k1[65];
    snprintf(k1, sizeof k1, "%s", json_str(doc, "key"));
    json_decref(doc);
    req = request(b, "allgather", "smt", 120);
    ck_assert_int_eq(post_doc(&d, req, &doc), 200);
    json_decref(req);
    ck_assert_str_eq(json_str(doc, "relabelled_from"), k1);
    verify_on(doc, b);
    /* the relabelled result generates MSCCL XML like any other */
    char path[160];
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml&size=1048576", json_str(doc, "key"));
    json_decref(doc);
    http_resp x;
    ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &x), 0);
    ck_assert_msg(x.status == 200, "%ld %.300s", x.status, x.body);
    ck_assert_ptr_nonnull(strstr(x.body, "<algo"));
    http_resp_free(&x);
    ck_assert_int_eq((long)metrics_value(&d, STARTED), 1);
    fprintf(stderr, "test_iso_server: waited for the running job: %.0f\n",
            metrics_value(&d, "collsynth_iso_total{outcome=\"waited\"}"));
    json_decref(a);
    json_decref(b);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* --no-iso-cache: the second allocation is synthesized like any request. */
START_TEST(iso_cache_can_be_switched_off)
{
    const char *extra[] = {"--no-iso-cache", NULL};
    cs_daemon d;
    ck_assert_int_eq(daemon_start(&d, NULL, NULL, extra), 0);
    json_t *a = hook_allocation(16, 1), *b = renumbered(a, 9), *doc = NULL;
    json_t *req = request(a, "allgather", "tacos", 120);
    ck_assert_int_eq(post_doc(&d, req, &doc), 200);
    json_decref(doc);
    json_decref(req);
    req = request(b, "allgather", "tacos", 120);
    ck_assert_int_eq(post_doc(&d, req, &doc), 200);
    ck_assert_ptr_null(json_object_get(doc, "relabelled_from"));
    json_decref(doc);
    json_decref(req);
    ck_assert_int_eq((long)metrics_value(&d, STARTED), 2);
    ck_assert_int_eq((long)metrics_value(&d, ISO_HITS), 0);
    json_decref(a);
    json_decref(b);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* A fleet of two daemons on one PostgreSQL: the first allocation is
 * synthesized by one, the second, renumbered, posted to the other, is
 * relabelled from the shared store with no synthesis anywhere; and two
 * isomorphic requests posted at once to the two daemons cost one synthesis
 * (one waits for the other's job, or hits its result). */
START_TEST(pg_fleet_shares_the_index)
{
    char url[256];
    pg_fixture_db("iso_fleet", url, sizeof url);
    cs_daemon a, b;
    const char *extra[] = {"--poll", "0.1", NULL};
    ck_assert_int_eq(daemon_start(&a, url, NULL, extra), 0);
    ck_assert_int_eq(daemon_start(&b, url, NULL, extra), 0);
    json_t *first = hook_allocation(16, 1), *second = renumbered(first, 3);
    json_t *req = request(first, "allgather", "tacos", 120), *doc = NULL;
    ck_assert_int_eq(post_doc(&a, req, &doc), 200);
    char k1[65];
    snprintf(k1, sizeof k1, "%s", json_str(doc, "key"));
    json_decref(doc);
    json_decref(req);
    req = request(second, "allgather", "tacos", 120);
    ck_assert_int_eq(post_doc(&b, req, &doc), 200);
    ck_assert_str_eq(json_str(doc, "relabelled_from"), k1);
    verify_on(doc, second);
    json_decref(doc);
    json_decref(req);
    ck_assert_int_eq((long)(metrics_value(&a, STARTED) + metrics_value(&b, STARTED)), 1);
    ck_assert_int_eq((long)metrics_value(&b, ISO_HITS), 1);

    /* SMT on ring:6 (a moment) and a renumbered ring:6, one per daemon */
    json_t *r6 = cluster_fetch_builtin_local(NULL, "ring:6", NULL, 0);
    cs_topology *t = NULL, *u = NULL;
    cs_error err;
    ck_assert_int_eq(topology_builtin("ring:6", &t, &err), CS_OK);
    int map[6] = {4, 2, 0, 5, 3, 1};
    ck_assert_int_eq(iso_relabel_topology(t, map, "ring6-other", &u, &err), CS_OK);
    json_t *r6b = topology_to_json(u);
    topology_free(t);
    topology_free(u);
    json_t *qa = request(r6, "allgather", "smt", 0), *qb = request(r6b, "allgather", "smt", 120);
    long st = post_doc(&a, qa, &doc);
    ck_assert_msg(st == 202 || st == 200, "status %ld", st);
    char k2[65];
    snprintf(k2, sizeof k2, "%s", json_str(doc, "key"));
    json_decref(doc);
    ck_assert_int_eq(post_doc(&b, qb, &doc), 200);
    ck_assert_str_eq(json_str(doc, "relabelled_from"), k2);
    verify_on(doc, r6b);
    json_decref(doc);
    ck_assert_int_eq((long)(metrics_value(&a, STARTED) + metrics_value(&b, STARTED)), 2);
    json_decref(qa);
    json_decref(qb);
    json_decref(r6);
    json_decref(r6b);
    json_decref(first);
    json_decref(second);
    ck_assert_int_eq(daemon_stop(&a), 0);
    ck_assert_int_eq(daemon_stop(&b), 0);
}
END_TEST

static Suite *iso_server_suite(void)
{
    Suite *s = suite_create("iso_server");
    TCase *tc = tcase_create("iso_server");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, second_hook_allocation_runs_no_synthesis);
    tcase_add_test(tc, rail_cluster_hit_survives_restart);
    tcase_add_test(tc, isomorphic_request_waits_for_the_running_job);
    tcase_add_test(tc, iso_cache_can_be_switched_off);
    suite_add_tcase(s, tc);
    TCase *pgc = tcase_create("postgresql");
    tcase_set_timeout(pgc, 300);
    tcase_add_unchecked_fixture(pgc, pg_fixture_setup, pg_fixture_teardown);
    tcase_add_test(pgc, pg_fleet_shares_the_index);
    suite_add_tcase(s, pgc);
    return s;
}

CS_CHECK_MAIN(iso_server_suite)
