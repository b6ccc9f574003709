/*
 * Integration tests of collsynthd: the real daemon (build/collsynthd) on an
 * ephemeral loopback port, spoken to over HTTP with libcurl, on the SQLite
 * store and on a throwaway PostgreSQL server.  Instances are small (ring
 * baselines, SMT on ring:4) except where a long job is the point (cancel,
 * time limit, queue limit, shutdown), which use SMT on torus2d:4x4 (seconds
 * of Z3 time, interrupted promptly).
 */
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "pg_fixture.h"
#include "daemon_check.h"
#include "server_harness.h"
#include "verify.h"

#define LONG_JOB                                                                              \
    "{\"topology\":\"torus2d:4x4\",\"collective\":\"allgather\",\"method\":\"smt\","           \
    "\"options\":{\"max_chunks\":8,\"k\":6%s}}"

/* Polls a job until it leaves queued/running; returns its final document. */
static json_t *wait_job(const cs_daemon *d, const char *id, double timeout_s)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    double until = cs_now() + timeout_s;
    for (;;) {
        http_resp r;
        ck_assert_int_eq(http_request(d, "GET", path, NULL, NULL, &r), 0);
        ck_assert_int_eq(r.status, 200);
        json_t *doc = resp_json(&r);
        http_resp_free(&r);
        const char *st = json_str(doc, "status");
        if ((strcmp(st, "queued") && strcmp(st, "running")) || cs_now() > until)
            return doc;
        json_decref(doc);
        usleep(50000);
    }
}

/* The result's frontier must pass the verifier on the topology it names. */
static void verify_result(const json_t *result, const char *topology)
{
    cs_result *res = NULL;
    cs_error err;
    ck_assert_int_eq(result_from_json(result, &res, &err), CS_OK);
    cs_topology *t = NULL;
    ck_assert_int_eq(topology_builtin(topology, &t, &err), CS_OK);
    ck_assert_int_ge(res->nalgs, 1);
    for (int i = 0; i < res->nalgs; i++)
        ck_assert_msg(algorithm_verify(t, res->algs[i], &err) == CS_OK, "%s", err.message);
    topology_free(t);
    result_free(res);
}

/* Request counters are recorded when the exchange completes, just after the
 * client has its response: give them a moment. */
static double metric_at_least(const cs_daemon *d, const char *series, double want)
{
    double v = metrics_value(d, series);
    for (double until = cs_now() + 10; v < want && cs_now() < until; usleep(10000))
        v = metrics_value(d, series);
    return v;
}

static void assert_healthy(const cs_daemon *d)
{
    ck_assert(daemon_alive(d));
    http_resp r;
    ck_assert_int_eq(http_request(d, "GET", "/v1/health", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
}

/* ---- the request the HTTP thread parsed, handed to the worker (jobs.h) ----------------- */

/* A hierarchical request whose groups list their ranks out of order (as a
 * Slurm allocation lists them): the canonical form sorts them, and the
 * worker must run exactly what the stored canonical request parses to. */
#define HANDOVER_BODY                                                                         \
    "{\"topology\":{\"name\":\"hp\",\"ranks\":8,\"links\":["                                   \
    "{\"src\":1,\"dst\":0,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"  \
    "{\"src\":2,\"dst\":1,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"  \
    "{\"src\":3,\"dst\":2,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"  \
    "{\"src\":0,\"dst\":3,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"  \
    "{\"src\":5,\"dst\":4,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"  \
    "{\"src\":6,\"dst\":5,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"  \
    "{\"src\":7,\"dst\":6,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true},"  \
    "{\"src\":4,\"dst\":7,\"lanes\":1,\"gbps\":100,\"alpha_us\":0.5,\"bidirectional\":true}],"  \
    "\"switches\":[{\"name\":\"fabric\",\"ranks\":[0,2,4,6],\"gbps\":10,\"alpha_us\":2}],"      \
    "\"groups\":[[3,1,0,2],[6,4,7,5]]},\"collective\":\"allgather\","                          \
    "\"method\":\"hierarchical\",\"options\":{\"wait_s\":60}}"

static char *read_log(const cs_daemon *d)
{
    char *text = NULL;
    size_t len = 0;
    cs_error err;
    if (cs_read_file(d->log_path, &text, &len, &err) != CS_OK)
        return strdup("");
    return text;
}

/* Drops every member named *seconds and peak_rss_kb: what two runs of one
 * request may differ in. */
static void strip_run_figures(json_t *v)
{
    if (json_is_array(v)) {
        for (size_t i = 0; i < json_array_size(v); i++)
            strip_run_figures(json_array_get(v, i));
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
            strip_run_figures(x);
    }
}

static char *result_text_of(json_t *doc)
{
    strip_run_figures(doc);
    return json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS);
}

/* ---- basic routes ---------------------------------------------------------------- */

START_TEST(health_topologies_static)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    http_resp r;
    ck_assert_int_eq(http_request(&d, "GET", "/v1/health", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_t *doc = resp_json(&r);
    ck_assert_str_eq(json_str(doc, "status"), "ok");
    ck_assert_str_eq(json_str(json_object_get(doc, "store"), "engine"), "sqlite");
    json_decref(doc);
    http_resp_free(&r);

    ck_assert_int_eq(http_request(&d, "GET", "/v1/topologies", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    doc = resp_json(&r);
    json_t *arr = json_object_get(doc, "topologies");
    bool has_ring = false;
    for (size_t i = 0; i < json_array_size(arr); i++)
        has_ring |= !strcmp(json_str(json_array_get(arr, i), "family"), "ring");
    ck_assert(has_ring);
    json_decref(doc);
    http_resp_free(&r);

    ck_assert_int_eq(http_request(&d, "GET", "/v1/topologies/dgx1", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    doc = resp_json(&r);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "ranks")), 8);
    json_decref(doc);
    http_resp_free(&r);

    ck_assert_int_eq(http_request(&d, "GET", "/v1/topologies/nosuch:3", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 404);
    http_resp_free(&r);
    ck_assert_int_eq(http_request(&d, "GET", "/v1/topologies/ring:abc", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 400);
    http_resp_free(&r);

    /* the dashboard at /, nothing outside it */
    ck_assert_int_eq(http_request(&d, "GET", "/", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_ptr_nonnull(strstr(r.body, "collsynth test dashboard"));
    http_resp_free(&r);
    const char *outside[] = {"/../collsynth.db", "/%2e%2e/collsynth.db", "/.hidden",
                             "/../../../../etc/passwd", "/nope.html"};
    for (size_t i = 0; i < sizeof outside / sizeof outside[0]; i++) {
        ck_assert_int_eq(http_request(&d, "GET", outside[i], NULL, NULL, &r), 0);
        ck_assert_msg(r.status == 404 || r.status == 400, "%s gave %ld", outside[i], r.status);
        ck_assert_ptr_null(strstr(r.body, "SQLite"));
        http_resp_free(&r);
    }
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(synthesize_wait_cache_and_metrics)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    const char *req = "{\"topology\":\"ring:6\",\"collective\":{\"kind\":\"allgather\"},"
                      "\"method\":\"ring\",\"options\":{\"wait_s\":30}}";
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&d, req, &doc), 200);
    const char *key = json_str(doc, "key");
    ck_assert_int_eq(strlen(key), 64);
    ck_assert_str_eq(json_str(doc, "topology"), "ring:6");
    ck_assert_str_eq(json_str(doc, "method"), "ring");
    ck_assert_ptr_nonnull(json_object_get(doc, "bounds"));
    verify_result(doc, "ring:6");
    char path[128];
    snprintf(path, sizeof path, "/v1/results/%s", key);
    http_resp r;
    ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    json_t *again = resp_json(&r);
    ck_assert(json_equal(doc, again));
    json_decref(again);
    char etag[128];
    ck_assert_ptr_nonnull(http_header(&r, "ETag", etag, sizeof etag));
    http_resp_free(&r);
    /* a conditional GET is a 304 */
    char inm[200];
    snprintf(inm, sizeof inm, "If-None-Match: %s", etag);
    const char *hdrs[] = {inm, NULL};
    ck_assert_int_eq(http_request(&d, "GET", path, NULL, hdrs, &r), 0);
    ck_assert_int_eq(r.status, 304);
    http_resp_free(&r);
    /* the same request again, spelled differently: answered from the cache */
    json_t *doc2 = NULL;
    ck_assert_int_eq(post_synthesize(&d, "{\"method\":\"ring\",\"collective\":\"allgather\","
                              "\"topology\":\"ring:6\"}",
                          &doc2),
                     200);
    ck_assert_str_eq(json_str(doc2, "key"), key);
    json_decref(doc2);
    ck_assert_int_eq((long)metrics_value(&d, "collsynth_syntheses_total{outcome=\"started\"}"), 1);
    ck_assert_int_ge((long)metrics_value(&d, "collsynth_cache_hits_total"), 2);
    ck_assert_int_ge((long)metric_at_least(&d, "collsynth_http_requests_total{route=\"synthesize\","
                                                "status=\"200\"}", 2),
                     2);
    ck_assert_int_ge((long)metric_at_least(&d, "collsynth_http_request_duration_seconds_count{"
                                                "route=\"result\"}", 1),
                     1);
    ck_assert_int_eq((long)metrics_value(&d, "collsynth_jobs{state=\"done\"}"), 1);
    ck_assert_int_eq((long)metrics_value(&d, "collsynth_queue_depth"), 0);
    ck_assert_int_ge(metrics_value(&d, "collsynth_solver_seconds_total"), 0);
    json_decref(doc);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(async_job_poll_and_formats)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    json_t *doc = NULL;
    char id[40], key[65];
    /* 202, or 200 when SMT on ring:4 was done before the answer */
    submit_job_checked(&d, "{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                           "\"method\":\"smt\"}", id, key);
    ck_assert_int_eq(strlen(id), 32);
    json_t *job = wait_job(&d, id, 60);
    ck_assert_str_eq(json_str(job, "status"), "done");
    json_t *result = json_object_get(job, "result");
    ck_assert_ptr_nonnull(result);
    ck_assert_str_eq(json_str(result, "key"), key);
    ck_assert_str_eq(json_str(result, "method"), "smt");
    verify_result(result, "ring:4");
    json_decref(job);
    /* a finished job cannot be cancelled */
    char jpath[80];
    snprintf(jpath, sizeof jpath, "/v1/jobs/%s", id);
    http_resp dr;
    ck_assert_int_eq(http_request(&d, "DELETE", jpath, NULL, NULL, &dr), 0);
    ck_assert_int_eq(dr.status, 409);
    http_resp_free(&dr);

    char path[256];
    http_resp r;
    snprintf(path, sizeof path, "/v1/results/%s?format=msccl-xml", key);
    ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &r), 0);
    ck_assert_msg(r.status == 200, "msccl-xml: %ld %.300s", r.status, r.body);
    ck_assert_ptr_nonnull(strstr(r.body, "<algo"));
    ck_assert_ptr_nonnull(strstr(r.body, "ngpus=\"4\""));
    http_resp_free(&r);
    ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
    /* generated once, then served from the cache */
    ck_assert_int_eq((long)metrics_value(&d, "collsynth_codegen_total"), 1);
    snprintf(path, sizeof path, "/v1/results/%s?format=cuda", key);
    ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &r), 0);
    ck_assert_msg(r.status == 200 || r.status == 501, "cuda: %ld %.200s", r.status, r.body);
    http_resp_free(&r);
    snprintf(path, sizeof path, "/v1/results/%s?size=1048576", key);
    ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    doc = resp_json(&r);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "frontier")), 1);
    ck_assert(json_real_value(json_object_get(json_object_get(doc, "selected"), "bytes")) ==
              1048576.0);
    json_decref(doc);
    http_resp_free(&r);
    struct { const char *query; long status; } bad[] = {
        {"?format=pdf", 400}, {"?size=-1", 400}, {"?size=abc", 400}, {"?size=1e99", 400},
        {"?alg=99", 400},     {"?alg=-2", 400},  {"?size=5&alg=0", 400},
        {"?format=msccl-xml&runtime=nccl9", 400}};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        snprintf(path, sizeof path, "/v1/results/%s%s", key, bad[i].query);
        ck_assert_int_eq(http_request(&d, "GET", path, NULL, NULL, &r), 0);
        ck_assert_msg(r.status == bad[i].status, "%s gave %ld", bad[i].query, r.status);
        doc = resp_json(&r);
        ck_assert_ptr_nonnull(json_object_get(json_object_get(doc, "error"), "field"));
        json_decref(doc);
        http_resp_free(&r);
    }
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------------ */

START_TEST(bad_input_corpus)
{
    cs_daemon d;
    const char *extra[] = {"--max-body-bytes", "65536", NULL};
    daemon_start_checked(&d, NULL, extra);
    struct { const char *method, *path, *body; long status; const char *field; } cases[] = {
        {"POST", "/v1/synthesize", "{", 400, "body"},
        {"POST", "/v1/synthesize", "", 400, "body"},
        {"POST", "/v1/synthesize", "null", 400, "body"},
        {"POST", "/v1/synthesize", "[]", 400, ""},
        {"POST", "/v1/synthesize", "\"ring:4\"", 400, "body"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\"}", 400, "collective"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"topology\":\"ring:5\","
                                   "\"collective\":\"allgather\"}", 400, "body"},
        {"POST", "/v1/synthesize", "{\"topology\":7,\"collective\":\"allgather\"}", 400, "topology"},
        {"POST", "/v1/synthesize", "{\"topology\":\"warp:9\",\"collective\":\"allgather\"}", 400,
         "topology"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:99999999\",\"collective\":\"allgather\"}",
         413, "topology"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:-4\",\"collective\":\"allgather\"}", 400,
         "topology"},
        {"POST", "/v1/synthesize", "{\"topology\":{\"name\":\"x\",\"ranks\":-3,\"links\":[]},"
                                   "\"collective\":\"allgather\"}", 400, NULL},
        {"POST", "/v1/synthesize", "{\"topology\":{\"name\":\"x\",\"ranks\":1e300,\"links\":[]},"
                                   "\"collective\":\"allgather\"}", 400, NULL},
        {"POST", "/v1/synthesize", "{\"topology\":{\"name\":\"x\",\"ranks\":99999999999999999999,"
                                   "\"links\":[]},\"collective\":\"allgather\"}", 400, NULL},
        {"POST", "/v1/synthesize", "{\"topology\":{\"name\":\"x\",\"ranks\":2,\"links\":[{\"src\":0,"
                                   "\"dst\":9}]},\"collective\":\"allgather\"}", 400, NULL},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"broadcast\","
                                   "\"root\":-1}}", 400, NULL},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"broadcast\","
                                   "\"root\":4}}", 400, NULL},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allsorts\"}}",
         400, NULL},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                                   "\"method\":\"quantum\"}", 400, "method"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                                   "\"method\":\"smt\",\"options\":{\"k\":1e20}}", 400, "options.k"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                                   "\"method\":\"tacos\",\"options\":{\"trials\":\"many\"}}", 400,
         "options.trials"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                                   "\"options\":{\"wait_s\":-1}}", 400, "options.wait_s"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:2000\",\"collective\":\"allgather\","
                                   "\"method\":\"ring\",\"options\":{\"chunks\":64}}", 413,
         "options.chunks"},
        {"POST", "/v1/synthesize", "{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                                   "\"method\":\"ring\"}\xff\xfe", 400, "body"},
        {"GET", "/v1/synthesize", NULL, 405, "method"},
        {"PUT", "/v1/health", "{}", 405, "method"},
        {"PATCH", "/v1/jobs/0123456789abcdef0123456789abcdef", "{}", 405, "method"},
        {"GET", "/v1/jobs/0123456789abcdef0123456789abcdef", NULL, 404, "id"},
        {"GET", "/v1/jobs/../../etc/passwd", NULL, 400, "id"},
        {"DELETE", "/v1/jobs/xyz", NULL, 400, "id"},
        {"DELETE", "/v1/jobs/0123456789abcdef0123456789abcdef", NULL, 404, "id"},
        {"GET", "/v1/results/deadbeef", NULL, 400, "key"},
        {"GET", "/v1/results/0000000000000000000000000000000000000000000000000000000000000000",
         NULL, 404, "key"},
        {"GET", "/v1/nothing", NULL, 404, "path"},
        {"POST", "/v1/nothing", "{}", 404, "path"},
        {"DELETE", "/metrics", NULL, 405, "method"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        http_resp r;
        ck_assert_int_eq(http_request(&d, cases[i].method, cases[i].path, cases[i].body, NULL, &r),
                         0);
        ck_assert_msg(r.status == cases[i].status, "case %zu (%s %s %.60s): %ld %.300s", i,
                      cases[i].method, cases[i].path, cases[i].body ? cases[i].body : "",
                      r.status, r.body);
        json_t *doc = resp_json(&r);
        json_t *e = json_object_get(doc, "error");
        ck_assert_msg(json_is_string(json_object_get(e, "code")) &&
                          json_is_string(json_object_get(e, "message")) &&
                          json_is_string(json_object_get(e, "field")),
                      "case %zu: error shape %.200s", i, r.body);
        if (cases[i].field)
            ck_assert_msg(!strcmp(json_str(e, "field"), cases[i].field),
                          "case %zu: field \"%s\", wanted \"%s\"", i, json_str(e, "field"),
                          cases[i].field);
        json_decref(doc);
        http_resp_free(&r);
    }
    /* oversize bodies: declared and streamed */
    size_t big = 200000;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    huge[big] = '\0';
    http_resp r;
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", huge, NULL, &r), 0);
    ck_assert_int_eq(r.status, 413);
    http_resp_free(&r);
    const char *chunked[] = {"Transfer-Encoding: chunked", NULL};
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", huge, chunked, &r), 0);
    ck_assert_int_eq(r.status, 413);
    http_resp_free(&r);
    free(huge);
    /* deeply nested JSON */
    char nested[20001];
    for (int i = 0; i < 10000; i++) {
        nested[i] = '[';
        nested[10000 + i] = ']';
    }
    nested[20000] = '\0';
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", nested, NULL, &r), 0);
    ck_assert_int_eq(r.status, 400);
    http_resp_free(&r);
    assert_healthy(&d);
    /* nothing was queued by any of it */
    ck_assert_int_eq((long)metrics_value(&d, "collsynth_syntheses_total{outcome=\"started\"}"), 0);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(auth_and_cors)
{
    cs_daemon d;
    const char *extra[] = {"--auth-token", "s3cret", "--cors-origins",
                           "https://ok.example, https://also.example", NULL};
    daemon_start_checked(&d, NULL, extra);
    const char *req = "{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"ring\","
                      "\"options\":{\"wait_s\":20}}";
    http_resp r;
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", req, NULL, &r), 0);
    ck_assert_int_eq(r.status, 401);
    char buf[256];
    ck_assert_ptr_nonnull(http_header(&r, "WWW-Authenticate", buf, sizeof buf));
    http_resp_free(&r);
    const char *wrong[] = {"Authorization: Bearer s3cre", NULL};
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", req, wrong, &r), 0);
    ck_assert_int_eq(r.status, 401);
    http_resp_free(&r);
    const char *right[] = {"Authorization: Bearer s3cret", "Origin: https://ok.example", NULL};
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", req, right, &r), 0);
    ck_assert_int_eq(r.status, 200);
    ck_assert_str_eq(http_header(&r, "Access-Control-Allow-Origin", buf, sizeof buf),
                     "https://ok.example");
    http_resp_free(&r);
    ck_assert_int_eq(http_request(&d, "DELETE", "/v1/jobs/0123456789abcdef0123456789abcdef", NULL,
                                  NULL, &r),
                     0);
    ck_assert_int_eq(r.status, 401);
    http_resp_free(&r);
    /* reads need no token */
    ck_assert_int_eq(http_request(&d, "GET", "/v1/topologies", NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
    /* preflight from an allowed origin, and from another */
    const char *pre_ok[] = {"Origin: https://also.example",
                            "Access-Control-Request-Method: POST", NULL};
    ck_assert_int_eq(http_request(&d, "OPTIONS", "/v1/synthesize", NULL, pre_ok, &r), 0);
    ck_assert_int_eq(r.status, 204);
    ck_assert_str_eq(http_header(&r, "Access-Control-Allow-Origin", buf, sizeof buf),
                     "https://also.example");
    ck_assert_ptr_nonnull(strstr(http_header(&r, "Access-Control-Allow-Headers", buf, sizeof buf),
                                 "Authorization"));
    http_resp_free(&r);
    const char *pre_bad[] = {"Origin: https://evil.example", NULL};
    ck_assert_int_eq(http_request(&d, "OPTIONS", "/v1/synthesize", NULL, pre_bad, &r), 0);
    ck_assert_ptr_null(http_header(&r, "Access-Control-Allow-Origin", buf, sizeof buf));
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d), 0);

    /* default: no CORS at all */
    daemon_start_checked(&d, NULL, NULL);
    const char *origin[] = {"Origin: https://ok.example", NULL};
    ck_assert_int_eq(http_request(&d, "GET", "/v1/health", NULL, origin, &r), 0);
    ck_assert_ptr_null(http_header(&r, "Access-Control-Allow-Origin", buf, sizeof buf));
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* ---- jobs: coalescing, cancel, limits ------------------------------------------------ */

typedef struct poster {
    const cs_daemon *d;
    const char *body;
    long status;
    char job[40];
    char key[65];
} poster;

static void *post_thread(void *arg)
{
    poster *p = arg;
    http_resp r;
    if (http_request(p->d, "POST", "/v1/synthesize", p->body, NULL, &r) == 0) {
        p->status = r.status;
        json_t *doc = json_loads(r.body, 0, NULL);
        snprintf(p->job, sizeof p->job, "%s", json_str(doc, "job"));
        snprintf(p->key, sizeof p->key, "%s", json_str(doc, "key"));
        json_decref(doc);
    }
    http_resp_free(&r);
    return NULL;
}

static void concurrent_posts(const cs_daemon *const *daemons, int ndaemons, const char *body,
                             int n, poster *ps)
{
    pthread_t th[256];
    for (int i = 0; i < n; i++) {
        ps[i] = (poster){.d = daemons[i % ndaemons], .body = body};
        pthread_create(&th[i], NULL, post_thread, &ps[i]);
    }
    for (int i = 0; i < n; i++)
        pthread_join(th[i], NULL);
}

START_TEST(identical_posts_coalesce)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    /* SMT on ring:6 takes a moment: long enough for the posts to overlap */
    const char *body = "{\"topology\":\"ring:6\",\"collective\":\"allgather\",\"method\":\"smt\","
                       "\"options\":{\"wait_s\":60}}";
    enum { N = 48 };
    poster ps[N];
    const cs_daemon *ds[] = {&d};
    concurrent_posts(ds, 1, body, N, ps);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(ps[i].status == 200, "post %d: %ld", i, ps[i].status);
        ck_assert_str_eq(ps[i].key, ps[0].key);
    }
    ck_assert_int_eq((long)metrics_value(&d, "collsynth_syntheses_total{outcome=\"started\"}"), 1);
    double coalesced = metrics_value(&d, "collsynth_coalesced_total");
    double hits = metrics_value(&d, "collsynth_cache_hits_total");
    /* every post but the first either joined the job or hit the result */
    ck_assert_int_eq((long)(coalesced + hits), N - 1);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

/* A job's time limit is its synthesizer's budget, as the CLI's --time-limit
 * is: mcf on dgx2 broadcast with 8 chunkings to try does not finish in 6 s,
 * and answers with its best schedule within the budget instead of failing as
 * timed out (it did: the key leaves the limit out, so mcf got none). */
START_TEST(job_time_limit_is_the_synthesis_budget)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    const char *body = "{\"topology\":\"dgx2\",\"collective\":{\"kind\":\"broadcast\","
                       "\"root\":0},\"method\":\"mcf\",\"options\":{\"chunks\":8,"
                       "\"time_limit_s\":6,\"wait_s\":120}}";
    json_t *doc = NULL;
    long status = post_synthesize(&d, body, &doc);
    char *text = json_dumps(doc, JSON_COMPACT);
    ck_assert_msg(status == 200, "status %ld: %.300s", status, text);
    free(text);
    ck_assert_str_eq(json_str(doc, "method"), "mcf");
    json_t *algs = json_object_get(doc, "frontier");
    ck_assert_int_ge((long)json_array_size(algs), 1);
    /* the budget ran out (the answer says which chunkings it cut short) */
    ck_assert_ptr_nonnull(strstr(json_str(doc, "reason"), "cut short"));
    json_decref(doc);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(cancel_and_time_limit)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    char body[512];
    snprintf(body, sizeof body, LONG_JOB, "");
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&d, body, &doc), 202);
    char id[40], path[80];
    snprintf(id, sizeof id, "%s", json_str(doc, "job"));
    json_decref(doc);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    /* wait until it runs and reports progress */
    double until = cs_now() + 20;
    bool progress = false;
    while (!progress && cs_now() < until) {
        http_resp r;
        http_request(&d, "GET", path, NULL, NULL, &r);
        json_t *j = resp_json(&r);
        progress = !strcmp(json_str(j, "status"), "running") &&
                   json_is_object(json_object_get(j, "progress"));
        json_decref(j);
        http_resp_free(&r);
        usleep(50000);
    }
    ck_assert(progress);
    /* health and cached reads stay fast while it runs */
    double t0 = cs_now();
    assert_healthy(&d);
    ck_assert(cs_now() - t0 < 1.0);
    http_resp r;
    t0 = cs_now();
    ck_assert_int_eq(http_request(&d, "DELETE", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 202);
    http_resp_free(&r);
    json_t *job = wait_job(&d, id, 10);
    ck_assert_str_eq(json_str(job, "status"), "cancelled");
    ck_assert_msg(cs_now() - t0 < 8, "cancel took %.1f s", cs_now() - t0);
    json_decref(job);
    /* cancelling again is idempotent */
    ck_assert_int_eq(http_request(&d, "DELETE", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);

    /* per-job time limit (different options -> a different key, a new job) */
    snprintf(body, sizeof body, LONG_JOB, ",\"time_limit_s\":0.5,\"instance_time_limit_s\":30");
    ck_assert_int_eq(post_synthesize(&d, body, &doc), 202);
    snprintf(id, sizeof id, "%s", json_str(doc, "job"));
    json_decref(doc);
    job = wait_job(&d, id, 15);
    ck_assert_str_eq(json_str(job, "status"), "failed");
    json_t *e = json_object_get(job, "error");
    ck_assert_str_eq(json_str(e, "code"), "timeout");
    ck_assert_str_eq(json_str(e, "field"), "options.time_limit_s");
    json_decref(job);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(queue_limit_answers_429)
{
    cs_daemon d;
    const char *extra[] = {"--workers", "1", "--max-queued", "1", NULL};
    daemon_start_checked(&d, NULL, extra);
    char a[512], b[512], c[512];
    snprintf(a, sizeof a, LONG_JOB, ",\"instance_time_limit_s\":41");
    snprintf(b, sizeof b, LONG_JOB, ",\"instance_time_limit_s\":42");
    snprintf(c, sizeof c, LONG_JOB, ",\"instance_time_limit_s\":43");
    json_t *ja = NULL, *jb = NULL;
    ck_assert_int_eq(post_synthesize(&d, a, &ja), 202);
    /* wait until the single worker has taken the first job */
    char path[80];
    snprintf(path, sizeof path, "/v1/jobs/%s", json_str(ja, "job"));
    double until = cs_now() + 30;
    for (;;) {
        json_t *j = wait_job(&d, json_str(ja, "job"), 0);
        bool running = !strcmp(json_str(j, "status"), "running");
        json_decref(j);
        if (running || cs_now() > until)
            break;
        usleep(20000);
    }
    ck_assert_int_eq(post_synthesize(&d, b, &jb), 202);
    http_resp r;
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", c, NULL, &r), 0);
    ck_assert_int_eq(r.status, 429);
    char ra[32];
    ck_assert_ptr_nonnull(http_header(&r, "Retry-After", ra, sizeof ra));
    ck_assert_int_gt(atoi(ra), 0);
    http_resp_free(&r);
    ck_assert_int_eq((long)metrics_value(&d, "collsynth_queue_depth"), 1);
    /* cancel both: the queued one at once */
    char pb[80];
    snprintf(pb, sizeof pb, "/v1/jobs/%s", json_str(jb, "job"));
    ck_assert_int_eq(http_request(&d, "DELETE", pb, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
    ck_assert_int_eq(http_request(&d, "DELETE", path, NULL, NULL, &r), 0);
    http_resp_free(&r);
    json_decref(ja);
    json_decref(jb);
    ck_assert_int_eq(daemon_stop(&d), 0);
}
END_TEST

START_TEST(sigterm_requeues_running_job)
{
    cs_daemon d;
    const char *extra[] = {"--shutdown-grace", "0.2", NULL};
    daemon_start_checked(&d, NULL, extra);
    char body[512];
    snprintf(body, sizeof body, LONG_JOB, ",\"instance_time_limit_s\":44");
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&d, body, &doc), 202);
    char id[40];
    snprintf(id, sizeof id, "%s", json_str(doc, "job"));
    json_decref(doc);
    double until = cs_now() + 30;
    for (;;) {
        json_t *j = wait_job(&d, id, 0);
        bool running = !strcmp(json_str(j, "status"), "running");
        json_decref(j);
        if (running || cs_now() > until)
            break;
        usleep(20000);
    }
    double t0 = cs_now();
    char dir[256];
    snprintf(dir, sizeof dir, "%s", d.dir);
    ck_assert_int_eq(daemon_stop_ex(&d, 15, true), 0);  /* exit status 0: clean */
    ck_assert_msg(cs_now() - t0 < 10, "shutdown took %.1f s", cs_now() - t0);
    /* restart on the same data dir: the job is queued or running again, not lost */
    cs_daemon d2;
    ck_assert_int_eq(daemon_start(&d2, NULL, dir, NULL), 0);
    json_t *j = wait_job(&d2, id, 0);
    const char *st = json_str(j, "status");
    ck_assert_msg(!strcmp(st, "queued") || !strcmp(st, "running"), "status %s", st);
    ck_assert_int_le(json_integer_value(json_object_get(j, "attempts")), 1);
    json_decref(j);
    http_resp r;
    char path[80];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    http_request(&d2, "DELETE", path, NULL, NULL, &r);
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&d2), 0);
    remove_tree(dir);
}
END_TEST

/* Distinct cheap requests posted as fast as possible; each 200 is an
 * acknowledged result.  SIGKILL mid-burst; after a restart every
 * acknowledged key must be served, and no job may be left "running". */
typedef struct burst {
    const cs_daemon *d;
    int first, step;
    atomic_bool stop;  /* set by the main thread while the burst runs */
    atomic_int nacked; /* read by the main thread while the burst runs */
    char keys[400][65];
    int ranks[400], chunks[400]; /* what each acknowledged key was asked for */
} burst;

static void *burst_thread(void *arg)
{
    burst *b = arg;
    for (int i = b->first; !atomic_load(&b->stop) && b->nacked < 400; i += b->step) {
        char body[256];
        snprintf(body, sizeof body,
                 "{\"topology\":\"ring:%d\",\"collective\":\"allgather\",\"method\":\"ring\","
                 "\"options\":{\"wait_s\":10,\"chunks\":%d}}",
                 4 + i % 60, 1 + i / 60);
        http_resp r;
        if (http_request(b->d, "POST", "/v1/synthesize", body, NULL, &r) != 0) {
            http_resp_free(&r);
            break; /* the daemon is gone */
        }
        if (r.status == 200) {
            json_t *doc = json_loads(r.body, 0, NULL);
            int k = atomic_load(&b->nacked);
            b->ranks[k] = 4 + i % 60;
            b->chunks[k] = 1 + i / 60;
            snprintf(b->keys[k], 65, "%s", json_str(doc, "key"));
            atomic_store(&b->nacked, k + 1);
            json_decref(doc);
        }
        http_resp_free(&r);
    }
    return NULL;
}

START_TEST(kill9_during_writes_keeps_acknowledged)
{
    cs_daemon d;
    const char *extra[] = {"--workers", "2", NULL};
    daemon_start_checked(&d, NULL, extra);
    char dir[256];
    snprintf(dir, sizeof dir, "%s", d.dir);
    enum { NT = 4 };
    burst b[NT];
    pthread_t th[NT];
    for (int i = 0; i < NT; i++) {
        memset(&b[i], 0, sizeof b[i]);
        atomic_init(&b[i].stop, false);
        atomic_init(&b[i].nacked, 0);
        b[i].d = &d;
        b[i].first = i;
        b[i].step = NT;
        pthread_create(&th[i], NULL, burst_thread, &b[i]);
    }
    /* SIGKILL mid-burst, once a few writes are acknowledged (not after a
     * fixed time: a loaded machine may not acknowledge any in 0.8 s) */
    for (double until = cs_now() + 60; cs_now() < until; usleep(10000)) {
        int acked = 0;
        for (int i = 0; i < NT; i++)
            acked += atomic_load(&b[i].nacked);
        if (acked >= 20)
            break;
    }
    daemon_kill9(&d);
    for (int i = 0; i < NT; i++) {
        atomic_store(&b[i].stop, true);
        pthread_join(th[i], NULL);
    }
    int total = 0;
    for (int i = 0; i < NT; i++)
        total += b[i].nacked;
    ck_assert_int_ge(total, 5);
    cs_daemon d2;
    ck_assert_int_eq(daemon_start(&d2, NULL, dir, NULL), 0);
    for (int i = 0; i < NT; i++)
        for (int k = 0; k < b[i].nacked; k++) {
            char path[128];
            snprintf(path, sizeof path, "/v1/results/%s", b[i].keys[k]);
            http_resp r;
            ck_assert_int_eq(http_request(&d2, "GET", path, NULL, NULL, &r), 0);
            ck_assert_msg(r.status == 200, "acknowledged %s lost (%ld)", b[i].keys[k], r.status);
            /* the stored form (binary codec blob) decodes to the whole schedule: a
             * ring allgather of P ranks and C chunks per rank moves each of the P*C
             * chunks to the P-1 other ranks once */
            json_t *doc = resp_json(&r);
            ck_assert_str_eq(json_str(doc, "key"), b[i].keys[k]);
            json_t *alg = json_array_get(json_object_get(doc, "frontier"), 0);
            long p = b[i].ranks[k], c = b[i].chunks[k];
            ck_assert_msg(alg != NULL, "acknowledged %s has no algorithm", b[i].keys[k]);
            ck_assert_int_eq((long)json_array_size(json_object_get(alg, "sends")), p * c * (p - 1));
            json_decref(doc);
            http_resp_free(&r);
        }
    /* the count goes to the log: docs/BENCHMARKS.md records it */
    fprintf(stderr, "kill9_during_writes_keeps_acknowledged: 1 SIGKILL, %d acknowledged, "
                    "%d served with all their sends after the restart\n", total, total);
    /* jobs interrupted by the kill were re-queued at start and finish now */
    double until = cs_now() + 30;
    while (metrics_value(&d2, "collsynth_jobs{state=\"running\"}") +
                   metrics_value(&d2, "collsynth_jobs{state=\"queued\"}") > 0 &&
           cs_now() < until)
        usleep(100000);
    ck_assert_int_eq((long)metrics_value(&d2, "collsynth_jobs{state=\"running\"}"), 0);
    ck_assert_int_eq((long)metrics_value(&d2, "collsynth_jobs{state=\"queued\"}"), 0);
    ck_assert_int_eq(daemon_stop(&d2), 0);
    remove_tree(dir);
}
END_TEST

/* ---- PostgreSQL: a fleet sharing one database ---------------------------------------- */

START_TEST(pg_fleet_synthesizes_each_key_once)
{
    char url[256];
    pg_fixture_db("fleet", url, sizeof url);
    cs_daemon a, b;
    const char *extra[] = {"--poll", "0.1", NULL};
    daemon_start_checked(&a, url, extra);
    daemon_start_checked(&b, url, extra);
    http_resp r;
    ck_assert_int_eq(http_request(&a, "GET", "/v1/health", NULL, NULL, &r), 0);
    json_t *h = resp_json(&r);
    ck_assert_str_eq(json_str(json_object_get(h, "store"), "engine"), "postgresql");
    json_decref(h);
    http_resp_free(&r);
    const char *body = "{\"topology\":\"ring:6\",\"collective\":\"allgather\",\"method\":\"smt\","
                       "\"options\":{\"wait_s\":60}}";
    enum { N = 24 };
    poster ps[N];
    const cs_daemon *ds[] = {&a, &b};
    concurrent_posts(ds, 2, body, N, ps);
    for (int i = 0; i < N; i++) {
        ck_assert_msg(ps[i].status == 200, "post %d: %ld", i, ps[i].status);
        ck_assert_str_eq(ps[i].key, ps[0].key);
    }
    double started = metrics_value(&a, "collsynth_syntheses_total{outcome=\"started\"}") +
                     metrics_value(&b, "collsynth_syntheses_total{outcome=\"started\"}");
    ck_assert_int_eq((long)started, 1);
    /* any instance answers any key */
    char path[128];
    snprintf(path, sizeof path, "/v1/results/%s", ps[0].key);
    ck_assert_int_eq(http_request(&a, "GET", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
    ck_assert_int_eq(http_request(&b, "GET", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
    /* a job queued through one daemon is visible, and cancellable, through the other */
    char lj[512];
    snprintf(lj, sizeof lj, LONG_JOB, ",\"instance_time_limit_s\":45");
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&a, lj, &doc), 202);
    char id[40];
    snprintf(id, sizeof id, "%s", json_str(doc, "job"));
    json_decref(doc);
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    double until = cs_now() + 30;
    for (;;) {
        json_t *j = wait_job(&b, id, 0);
        bool running = !strcmp(json_str(j, "status"), "running");
        json_decref(j);
        if (running || cs_now() > until)
            break;
        usleep(50000);
    }
    ck_assert_int_eq(http_request(&b, "DELETE", path, NULL, NULL, &r), 0);
    ck_assert(r.status == 202 || r.status == 200);
    http_resp_free(&r);
    json_t *j = wait_job(&a, id, 15);
    ck_assert_str_eq(json_str(j, "status"), "cancelled");
    json_decref(j);
    ck_assert_int_eq(daemon_stop(&a), 0);
    ck_assert_int_eq(daemon_stop(&b), 0);
}
END_TEST

/* A daemon of the fleet dies (SIGKILL) while running a job: another daemon
 * re-queues it once the lease expires and runs it again. */
START_TEST(pg_dead_daemons_job_is_taken_over)
{
    char url[256];
    pg_fixture_db("takeover", url, sizeof url);
    cs_daemon a, b;
    const char *extra[] = {"--lease", "2", "--poll", "0.1", NULL};
    daemon_start_checked(&a, url, extra);
    daemon_start_checked(&b, url, extra);
    char body[512];
    snprintf(body, sizeof body, LONG_JOB, ",\"instance_time_limit_s\":46");
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&a, body, &doc), 202);
    char id[40];
    snprintf(id, sizeof id, "%s", json_str(doc, "job"));
    json_decref(doc);
    /* find which daemon runs it */
    char owner[64] = "";
    double until = cs_now() + 30;
    while (!owner[0] && cs_now() < until) {
        json_t *j = wait_job(&a, id, 0);
        if (!strcmp(json_str(j, "status"), "running"))
            snprintf(owner, sizeof owner, "%s", json_str(j, "instance"));
        json_decref(j);
        usleep(20000);
    }
    ck_assert_msg(owner[0], "the job never ran");
    http_resp r;
    ck_assert_int_eq(http_request(&a, "GET", "/v1/health", NULL, NULL, &r), 0);
    json_t *h = resp_json(&r);
    bool a_runs_it = !strcmp(json_str(h, "instance"), owner);
    json_decref(h);
    http_resp_free(&r);
    cs_daemon *victim = a_runs_it ? &a : &b, *survivor = a_runs_it ? &b : &a;
    daemon_kill9(victim);
    /* the survivor takes it over: running again, second attempt, new owner */
    until = cs_now() + 20;
    bool taken = false;
    while (!taken && cs_now() < until) {
        json_t *j = wait_job(survivor, id, 0);
        taken = !strcmp(json_str(j, "status"), "running") && strcmp(json_str(j, "instance"), owner) &&
                json_integer_value(json_object_get(j, "attempts")) == 2;
        json_decref(j);
        usleep(100000);
    }
    ck_assert_msg(taken, "the job was not taken over");
    char path[80];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    ck_assert_int_eq(http_request(survivor, "DELETE", path, NULL, NULL, &r), 0);
    http_resp_free(&r);
    json_t *j = wait_job(survivor, id, 15);
    ck_assert_str_eq(json_str(j, "status"), "cancelled");
    json_decref(j);
    daemon_stop(victim);
    ck_assert_int_eq(daemon_stop(survivor), 0);
}
END_TEST

/* A job POSTed to daemon a but claimed by daemon b of the fleet (a's one
 * worker is busy): b parses the stored canonical request, and the result is
 * the one a lone daemon makes from the request it hands over. */
START_TEST(pg_job_of_another_daemon_parses_the_stored_request)
{
    /* the reference: a lone daemon, handed over */
    cs_daemon ref;
    daemon_start_checked(&ref, NULL, NULL);
    json_t *want = NULL;
    ck_assert_int_eq(post_synthesize(&ref, HANDOVER_BODY, &want), 200);
    ck_assert_int_eq(daemon_stop(&ref), 0);

    char url[256];
    pg_fixture_db("handover", url, sizeof url);
    cs_daemon a, b;
    const char *extra_a[] = {"--workers", "1", "--poll", "0.1", NULL};
    daemon_start_checked(&a, url, extra_a);
    char lj[512];
    snprintf(lj, sizeof lj, LONG_JOB, ",\"instance_time_limit_s\":44");
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&a, lj, &doc), 202);
    char id[40];
    snprintf(id, sizeof id, "%s", json_str(doc, "job"));
    json_decref(doc);
    double until = cs_now() + 30;
    for (bool running = false; !running && cs_now() < until;) {
        json_t *j = wait_job(&a, id, 0);
        running = !strcmp(json_str(j, "status"), "running");
        json_decref(j);
        if (!running)
            usleep(50000);
    }
    /* b starts only now, so the long job is a's and a has no idle worker */
    const char *extra_b[] = {"--poll", "0.1", NULL};
    daemon_start_checked(&b, url, extra_b);
    json_t *got = NULL;
    ck_assert_int_eq(post_synthesize(&a, HANDOVER_BODY, &got), 200);
    char *tw = result_text_of(want), *tg = result_text_of(got);
    ck_assert_msg(strcmp(tw, tg) == 0, "the result made from the stored request differs");
    free(tw);
    free(tg);
    json_decref(want);
    json_decref(got);
    char path[80];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    http_resp r;
    ck_assert_int_eq(http_request(&a, "DELETE", path, NULL, NULL, &r), 0);
    http_resp_free(&r);
    json_t *j = wait_job(&a, id, 15);
    ck_assert_str_eq(json_str(j, "status"), "cancelled");
    json_decref(j);
    ck_assert_int_eq(daemon_stop_ex(&a, 10, true), 0);
    ck_assert_int_eq(daemon_stop_ex(&b, 10, true), 0);
    char *la = read_log(&a), *lb = read_log(&b);
    ck_assert_msg(strstr(lb, "stored request"), "b did not run the job from the stored request");
    ck_assert_msg(!strstr(lb, "handed over"), "b ran a request handed over (by whom?)");
    /* a ran the long job only (the one it was handed) */
    const char *first = strstr(la, "handed over");
    ck_assert_msg(first && !strstr(first + 1, "handed over") && !strstr(la, "stored request"),
                  "a ran more than the long job");
    free(la);
    free(lb);
    remove_tree(a.dir);
    remove_tree(b.dir);
}
END_TEST

START_TEST(pg_restart_keeps_results)
{
    char url[256];
    pg_fixture_db("restart", url, sizeof url);
    cs_daemon a;
    daemon_start_checked(&a, url, NULL);
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&a, "{\"topology\":\"ring:5\",\"collective\":\"allgather\","
                              "\"method\":\"ring\",\"options\":{\"wait_s\":20}}",
                          &doc),
                     200);
    char path[128];
    snprintf(path, sizeof path, "/v1/results/%s", json_str(doc, "key"));
    json_decref(doc);
    daemon_kill9(&a);
    daemon_stop(&a);
    cs_daemon b;
    daemon_start_checked(&b, url, NULL);
    http_resp r;
    ck_assert_int_eq(http_request(&b, "GET", path, NULL, NULL, &r), 0);
    ck_assert_int_eq(r.status, 200);
    http_resp_free(&r);
    ck_assert_int_eq(daemon_stop(&b), 0);
}
END_TEST

/* POSTed to a lone daemon, the job runs the request the POST parsed (its
 * worker says "handed over"), and nothing else parses it. */
START_TEST(post_hands_its_parse_to_the_worker)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    json_t *doc = NULL;
    ck_assert_int_eq(post_synthesize(&d, HANDOVER_BODY, &doc), 200);
    ck_assert_str_eq(json_str(doc, "method"), "hierarchical");
    json_decref(doc);
    ck_assert_int_eq(daemon_stop_ex(&d, 10, true), 0);
    char *log = read_log(&d);
    ck_assert_msg(strstr(log, "job_started") && strstr(log, "handed over"),
                  "the worker did not run the handed-over request");
    ck_assert_msg(!strstr(log, "stored request"), "the worker parsed the stored request");
    free(log);
    remove_tree(d.dir);
}
END_TEST

static Suite *server_suite(void)
{
    Suite *s = suite_create("server");
    TCase *tc = tcase_create("sqlite");
    tcase_set_timeout(tc, 90);
    tcase_add_test(tc, health_topologies_static);
    tcase_add_test(tc, synthesize_wait_cache_and_metrics);
    tcase_add_test(tc, async_job_poll_and_formats);
    tcase_add_test(tc, bad_input_corpus);
    tcase_add_test(tc, auth_and_cors);
    tcase_add_test(tc, identical_posts_coalesce);
    tcase_add_test(tc, cancel_and_time_limit);
    tcase_add_test(tc, job_time_limit_is_the_synthesis_budget);
    tcase_add_test(tc, queue_limit_answers_429);
    tcase_add_test(tc, sigterm_requeues_running_job);
    tcase_add_test(tc, kill9_during_writes_keeps_acknowledged);
    tcase_add_test(tc, post_hands_its_parse_to_the_worker);
    suite_add_tcase(s, tc);
    TCase *pgc = tcase_create("postgresql");
    tcase_set_timeout(pgc, 90);
    tcase_add_unchecked_fixture(pgc, pg_fixture_setup, pg_fixture_teardown);
    tcase_add_test(pgc, pg_fleet_synthesizes_each_key_once);
    tcase_add_test(pgc, pg_dead_daemons_job_is_taken_over);
    tcase_add_test(pgc, pg_job_of_another_daemon_parses_the_stored_request);
    tcase_add_test(pgc, pg_restart_keeps_results);
    suite_add_tcase(s, pgc);
    return s;
}

CS_CHECK_MAIN(server_suite)
