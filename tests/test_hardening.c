/*
 * Integration tests of collsynthd's hardening (issue 12, "Service" and
 * "Observability"): the real daemon on loopback, spoken to with libcurl and,
 * where the point is what a client does on the wire (slow headers, bodies
 * written without reading, NUL bytes, chunk extensions), with raw sockets.
 *
 * Each test reproduces one finding of the audit and asserts the behaviour a
 * careful client expects instead.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "cs_common.h"
#include "server_harness.h"

/* SMT on torus2d:4x4 with a wide class: seconds of solver time, interrupted
 * promptly; the format argument adds options (distinct keys per test). */
#define LONG_JOB                                                                              \
    "{\"topology\":\"torus2d:4x4\",\"collective\":\"allgather\",\"method\":\"smt\","           \
    "\"options\":{\"max_chunks\":8,\"k\":6%s}}"

static json_t *body_json(const http_resp *r)
{
    json_t *doc = json_loads(r->body, 0, NULL);
    ck_assert_msg(doc != NULL, "response is not JSON: %.300s", r->body);
    return doc;
}

static const char *jstr(const json_t *doc, const char *key)
{
    const char *s = json_string_value(json_object_get(doc, key));
    return s ? s : "";
}

static void start(cs_daemon *d, const char *store, const char *const *extra)
{
    ck_assert_msg(daemon_start(d, store, NULL, extra) == 0, "daemon did not start");
}

static long post(const cs_daemon *d, const char *body, json_t **doc)
{
    http_resp r;
    ck_assert_int_eq(http_request(d, "POST", "/v1/synthesize", body, NULL, &r), 0);
    long st = r.status;
    if (doc)
        *doc = body_json(&r);
    http_resp_free(&r);
    return st;
}

static json_t *get_json(const cs_daemon *d, const char *path, long *status)
{
    http_resp r;
    ck_assert_int_eq(http_request(d, "GET", path, NULL, NULL, &r), 0);
    if (status)
        *status = r.status;
    json_t *doc = body_json(&r);
    http_resp_free(&r);
    return doc;
}

static json_t *job_doc(const cs_daemon *d, const char *id)
{
    char path[128];
    snprintf(path, sizeof path, "/v1/jobs/%s", id);
    long st = 0;
    json_t *doc = get_json(d, path, &st);
    ck_assert_msg(st == 200, "GET %s: %ld", path, st);
    return doc;
}

/* Polls a job until its status is one of want ("a|b"); returns its document. */
static json_t *wait_status(const cs_daemon *d, const char *id, const char *want,
                           double timeout_s)
{
    double until = cs_now() + timeout_s;
    for (;;) {
        json_t *doc = job_doc(d, id);
        const char *st = jstr(doc, "status");
        char pat[64];
        snprintf(pat, sizeof pat, "|%s|", want);
        char me[40];
        snprintf(me, sizeof me, "|%s|", st);
        if (strstr(pat, me) || cs_now() > until)
            return doc;
        json_decref(doc);
        usleep(50000);
    }
}

static char *read_file_text(const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = '\0';
    fclose(f);
    return s;
}

/* ---- 1. a second daemon on the same store ------------------------------------------- */

/* Posts a long job to d and waits until it runs; fills id and the instance running it. */
static void long_job_running(const cs_daemon *d, const char *extra_opts, char id[40],
                             char instance[64])
{
    char body[512];
    snprintf(body, sizeof body, LONG_JOB, extra_opts);
    json_t *doc = NULL;
    ck_assert_int_eq(post(d, body, &doc), 202);
    snprintf(id, 40, "%s", jstr(doc, "job"));
    json_decref(doc);
    json_t *j = wait_status(d, id, "running", 20);
    ck_assert_str_eq(jstr(j, "status"), "running");
    snprintf(instance, 64, "%s", jstr(j, "instance"));
    ck_assert_int_eq(json_integer_value(json_object_get(j, "attempts")), 1);
    json_decref(j);
}

static void assert_still_first_attempt(const cs_daemon *d, const char *id, const char *instance)
{
    json_t *j = job_doc(d, id);
    ck_assert_str_eq(jstr(j, "status"), "running");
    ck_assert_str_eq(jstr(j, "instance"), instance);
    ck_assert_int_eq(json_integer_value(json_object_get(j, "attempts")), 1);
    json_decref(j);
}

START_TEST(second_daemon_on_busy_port_leaves_the_store_alone)
{
    cs_daemon a;
    start(&a, NULL, NULL);
    char id[40], inst[64];
    long_job_running(&a, ",\"instance_time_limit_s\":51", id, inst);
    /* `make run` again: the same data dir and the same (busy) port */
    char port[16];
    snprintf(port, sizeof port, "%d", a.port);
    const char *extra[] = {"--port", port, NULL};
    cs_daemon b;
    ck_assert_int_ne(daemon_start(&b, NULL, a.dir, extra), 0);
    usleep(300000);
    assert_still_first_attempt(&a, id, inst);
    char *log = read_file_text(a.log_path);
    ck_assert_msg(strstr(log, "cannot listen") != NULL, "no listen error in the log");
    ck_assert_msg(strstr(log, "jobs_reaped") == NULL, "the second daemon reaped jobs");
    free(log);
    ck_assert_int_eq(daemon_stop(&a), 0);
}
END_TEST

START_TEST(second_daemon_on_same_sqlite_store_is_refused)
{
    cs_daemon a;
    start(&a, NULL, NULL);
    char id[40], inst[64];
    long_job_running(&a, ",\"instance_time_limit_s\":52", id, inst);
    cs_daemon b;
    ck_assert_int_ne(daemon_start(&b, NULL, a.dir, NULL), 0);
    usleep(300000);
    assert_still_first_attempt(&a, id, inst);
    char *log = read_file_text(a.log_path);
    ck_assert_msg(strstr(log, "in use by another collsynthd") != NULL,
                  "the refusal does not say why: %.2000s", log);
    free(log);
    ck_assert_int_eq(daemon_stop(&a), 0);
}
END_TEST

static Suite *hardening_suite(void)
{
    Suite *s = suite_create("hardening");
    TCase *store = tcase_create("store");
    tcase_set_timeout(store, 90);
    tcase_add_test(store, second_daemon_on_busy_port_leaves_the_store_alone);
    tcase_add_test(store, second_daemon_on_same_sqlite_store_is_refused);
    suite_add_tcase(s, store);
    return s;
}

CS_CHECK_MAIN(hardening_suite)
