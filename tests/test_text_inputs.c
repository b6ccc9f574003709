/*
 * Hand-written inputs as users save them.  The audit's reproducers
 * (2026-11-26): a Topology JSON saved by a Windows editor starts with a
 * UTF-8 byte-order mark, and `collsynth topo show topo.json` said
 * "invalid JSON at line 1 column 1: '[' or '{' expected near '<BOM>'"
 * (the culprit invisible in the message); the same body POSTed to
 * collsynthd (PowerShell adds the mark) got a 400.  RFC 8259 section 8.1
 * lets a parser ignore the mark; now both do.  And a directory given as a
 * file said only "error reading DIR"; a POST to a route that takes none got
 * 415 about its Content-Type instead of 405.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "clients_helpers.h"
#include "cs_common.h"
#include "daemon_check.h"
#include "server_harness.h"

static const char topo_json[] =
    "{\"name\": \"quad\", \"ranks\": 4, \"links\": ["
    "{\"src\": 0, \"dst\": 1, \"bidirectional\": true},"
    "{\"src\": 1, \"dst\": 2, \"bidirectional\": true},"
    "{\"src\": 2, \"dst\": 3, \"bidirectional\": true},"
    "{\"src\": 3, \"dst\": 0, \"bidirectional\": true}]}\n";

START_TEST(a_byte_order_mark_is_ignored_in_files)
{
    char dir[256];
    ck_assert_int_eq(make_temp_dir("collsynth-bom", dir, sizeof dir), 0);
    char path[400];
    snprintf(path, sizeof path, "%s/quad.json", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("\xEF\xBB\xBF", f);
    fputs(topo_json, f);
    fclose(f);
    /* the library's reader */
    char *text = NULL;
    size_t len = 0;
    cs_error err;
    ck_assert_int_eq(cs_read_file(path, &text, &len, &err), CS_OK);
    ck_assert_uint_eq(len, strlen(topo_json));
    ck_assert_str_eq(text, topo_json);
    free(text);
    /* the CLI, as a user runs it */
    char cmd[1200], *out = NULL, *errs = NULL;
    snprintf(cmd, sizeof cmd, "%s/collsynth topo show '%s'", cs_test_build_dir(), path);
    int rc = cs_test_sh(cmd, &out, &errs);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, errs);
    ck_assert_msg(strstr(out, "ranks      4") != NULL, "%s", out);
    free(out);
    free(errs);
    /* a directory given as a file names the reason */
    ck_assert_int_ne(cs_read_file(dir, &text, &len, &err), CS_OK);
    ck_assert_msg(strstr(err.message, "Is a directory") != NULL, "%s", err.message);
    remove_tree(dir);
}
END_TEST

START_TEST(a_byte_order_mark_is_ignored_in_a_request_body)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    const char *body = "\xEF\xBB\xBF{\"topology\":\"ring:4\",\"collective\":\"allgather\","
                       "\"method\":\"ring\",\"options\":{\"wait_s\":20}}";
    json_t *doc = NULL;
    long st = post_synthesize(&d, body, &doc);
    ck_assert_msg(st == 200, "POST with a BOM: %ld %s", st,
                  json_str(json_object_get(doc, "error"), "message"));
    ck_assert_str_eq(json_str(doc, "method"), "ring");
    json_decref(doc);
    /* `collsynth submit FILE` reads the file as the offline commands do */
    char dir[256];
    ck_assert_int_eq(make_temp_dir("collsynth-bom", dir, sizeof dir), 0);
    char path[400];
    snprintf(path, sizeof path, "%s/quad.json", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("\xEF\xBB\xBF", f);
    fputs(topo_json, f);
    fclose(f);
    char cmd[1400], *out = NULL, *errs = NULL;
    snprintf(cmd, sizeof cmd,
             "%s/collsynth --server %s submit '%s' allgather --method ring --option wait_s=20",
             cs_test_build_dir(), d.base_url, path);
    int rc = cs_test_sh(cmd, &out, &errs);
    ck_assert_msg(rc == 0, "submit of a file with a BOM: exit %d: %s", rc, errs);
    free(out);
    free(errs);
    remove_tree(dir);
    daemon_stop(&d);
}
END_TEST

/* `curl -XPOST localhost:8470/v1/health` (no body, no Content-Type) was
 * answered 415 "send the body with Content-Type: application/json": the
 * Content-Type guard ran for every POST.  A route without POST says 405 and
 * the methods it takes; /v1/synthesize still wants JSON. */
START_TEST(a_post_where_none_is_taken_is_405_not_415)
{
    cs_daemon d;
    daemon_start_checked(&d, NULL, NULL);
    const char *paths[] = {"/v1/health", "/v1/results", "/metrics", "/"};
    const char *no_type[] = {"Content-Type:", NULL}; /* libcurl then sends none */
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        http_resp r;
        ck_assert_int_eq(http_request(&d, "POST", paths[i], "", no_type, &r), 0);
        char allow[128];
        ck_assert_msg(r.status == 405, "POST %s: %ld %s", paths[i], r.status, r.body);
        ck_assert_msg(http_header(&r, "Allow", allow, sizeof allow) != NULL &&
                          strstr(allow, "GET") != NULL,
                      "POST %s: no Allow header", paths[i]);
        http_resp_free(&r);
    }
    const char *plain[] = {"Content-Type: text/plain", NULL};
    http_resp r;
    ck_assert_int_eq(http_request(&d, "POST", "/v1/synthesize", "{}", plain, &r), 0);
    ck_assert_int_eq(r.status, 415);
    http_resp_free(&r);
    daemon_stop(&d);
}
END_TEST

/* `collsynth --server URL --token-file F submit ...`: the connection
 * options written before the command, as --server is, were refused
 * ("unknown option '--token-file'"); they apply to the remote command. */
START_TEST(connection_options_before_the_command)
{
    cs_test_daemon d;
    char *why = NULL;
    ck_assert_msg(cs_test_daemon_start(&d, "t0ken", &why) == 0, "daemon: %s", why ? why : "");
    free(why);
    char dir[256];
    ck_assert_int_eq(make_temp_dir("collsynth-tok", dir, sizeof dir), 0);
    char tok[400];
    snprintf(tok, sizeof tok, "%s/token", dir);
    FILE *f = fopen(tok, "w");
    ck_assert_ptr_nonnull(f);
    fputs("t0ken\n", f);
    fclose(f);
    char cmd[1400], *out = NULL, *errs = NULL;
    snprintf(cmd, sizeof cmd,
             "env -u COLLSYNTH_TOKEN %s/collsynth --server %s --token-file '%s' --timeout 30 "
             "submit ring:4 allgather --method ring --option wait_s=20",
             cs_test_build_dir(), d.url, tok);
    int rc = cs_test_sh(cmd, &out, &errs);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, errs);
    ck_assert_msg(strstr(out, "key: ") != NULL, "%s", out);
    free(out);
    free(errs);
    /* an offline command says they do not apply to it */
    snprintf(cmd, sizeof cmd, "%s/collsynth --timeout 5 topo show ring:4", cs_test_build_dir());
    rc = cs_test_sh(cmd, &out, &errs);
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(errs, "applies to the remote commands") != NULL, "%s", errs);
    free(out);
    free(errs);
    remove_tree(dir);
    cs_test_daemon_stop(&d);
}
END_TEST

/* Malformed seconds are usage errors, said before any connection: `wait
 * JOB --max abc` and `submit ... --wait=abc` read "abc" as 0 (atof), and
 * `--timeout 5x` was reported as "option 5x needs a value". */
START_TEST(malformed_seconds_are_usage_errors)
{
    const char *cases[][2] = {
        {"wait 0123456789abcdef0123456789abcdef --max abc", "--max wants seconds"},
        {"submit ring:4 allgather --wait=abc", "--wait=S wants seconds"},
        {"status 0123456789abcdef0123456789abcdef --timeout 5x", "--timeout needs a value"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char cmd[800], *out = NULL, *errs = NULL;
        /* an unreachable server: a usage error must come first (exit 2, not 3) */
        snprintf(cmd, sizeof cmd, "%s/collsynth --server http://127.0.0.1:1 %s",
                 cs_test_build_dir(), cases[k][0]);
        int rc = cs_test_sh(cmd, &out, &errs);
        ck_assert_msg(rc == 2, "%s: exit %d: %s", cases[k][0], rc, errs);
        ck_assert_msg(strstr(errs, cases[k][1]) != NULL, "%s: %s", cases[k][0], errs);
        free(out);
        free(errs);
    }
}
END_TEST

/* `collsynth wait` on a job its caller let go of said "job ID cancelled:
 * error cancelled: cancelled: every client that asked for it detached":
 * a message that starts with its code says it once. */
START_TEST(a_cancelled_job_says_cancelled_once)
{
    cs_test_daemon d;
    char *why = NULL;
    ck_assert_msg(cs_test_daemon_start(&d, NULL, &why) == 0, "daemon: %s", why ? why : "");
    free(why);
    char cmd[1400], *out = NULL, *errs = NULL;
    /* SMT on torus2d:6x6 with a wide class: still running when cancelled */
    snprintf(cmd, sizeof cmd,
             "B=%s/collsynth; S=%s; J=$($B --server $S submit torus2d:6x6 allgather --method smt "
             "--option max_chunks=8 --option k=6 | sed -n 's/^job: //p'); "
             "$B --server $S cancel $J >/dev/null && $B --server $S wait $J --max 30",
             cs_test_build_dir(), d.url);
    int rc = cs_test_sh(cmd, &out, &errs);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, errs);
    ck_assert_msg(strstr(errs, "cancelled") != NULL, "%s", errs);
    ck_assert_msg(strstr(errs, "cancelled: cancelled") == NULL, "said twice: %s", errs);
    free(out);
    free(errs);
    cs_test_daemon_stop(&d);
}
END_TEST

static Suite *text_inputs_suite(void)
{
    Suite *s = suite_create("text_inputs");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, a_byte_order_mark_is_ignored_in_files);
    tcase_add_test(tc, a_byte_order_mark_is_ignored_in_a_request_body);
    tcase_add_test(tc, a_post_where_none_is_taken_is_405_not_415);
    tcase_add_test(tc, connection_options_before_the_command);
    tcase_add_test(tc, malformed_seconds_are_usage_errors);
    tcase_add_test(tc, a_cancelled_job_says_cancelled_once);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(text_inputs_suite)
