/*
 * Unit tests of the daemon's building blocks (libcollsynthd): configuration
 * from flags and environment, the LRU result cache, Prometheus rendering and
 * log escaping.  The HTTP behaviour is tested end to end in test_server.c.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cache.h"
#include "check_main.h"
#include "config.h"
#include "log.h"
#include "metrics.h"

START_TEST(config_flags_env_and_errors)
{
    cs_server_config c;
    config_defaults(&c);
    ck_assert_str_eq(c.listen, "127.0.0.1"); /* loopback by default */
    ck_assert_str_eq(c.auth_token, "");
    ck_assert_str_eq(c.cors_origins, "");
    char *env[] = {"COLLSYNTH_PORT=9000", "COLLSYNTH_AUTH_TOKEN=tok", "COLLSYNTH_WORKERS=3",
                   "OTHER=1", NULL};
    cs_error err;
    ck_assert_int_eq(config_from_env(&c, env, &err), CS_OK);
    ck_assert_int_eq(c.port, 9000);
    ck_assert_str_eq(c.auth_token, "tok");
    ck_assert_int_eq(c.workers, 3);
    /* flags win over the environment */
    char *argv[] = {"collsynthd", "--port", "0", "--workers=5", "--no-access-log",
                    "--store", "postgresql://x@h/db", "--smt-budget", "2.5", NULL};
    bool help = true;
    ck_assert_int_eq(config_from_args(&c, 9, argv, &help, &err), CS_OK);
    ck_assert(!help);
    ck_assert_int_eq(c.port, 0);
    ck_assert_int_eq(c.workers, 5);
    ck_assert(!c.access_log);
    ck_assert_str_eq(c.store, "postgresql://x@h/db");
    ck_assert(c.limits.smt_time_budget_s == 2.5);
    char *bad1[] = {"collsynthd", "--port", "70000", NULL};
    ck_assert_int_eq(config_from_args(&c, 3, bad1, &help, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "port");
    char *bad2[] = {"collsynthd", "--workers", "two", NULL};
    ck_assert_int_eq(config_from_args(&c, 3, bad2, &help, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "workers");
    char *bad3[] = {"collsynthd", "--frobnicate", NULL};
    ck_assert_int_eq(config_from_args(&c, 2, bad3, &help, &err), CS_EINVAL);
    char *bad4[] = {"collsynthd", "--port", NULL};
    ck_assert_int_eq(config_from_args(&c, 2, bad4, &help, &err), CS_EINVAL);
    char *bad_env[] = {"COLLSYNTH_MAX_QUEUED=-4", NULL};
    ck_assert_int_eq(config_from_env(&c, bad_env, &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "COLLSYNTH_MAX_QUEUED"));
    /* booleans in any case (COLLSYNTH_ISO_CACHE=False was refused while
     * "off" and "0" were taken) */
    char *bool_env[] = {"COLLSYNTH_ISO_CACHE=False", "COLLSYNTH_ACCESS_LOG=TRUE", NULL};
    ck_assert_int_eq(config_from_env(&c, bool_env, &err), CS_OK);
    ck_assert(!c.iso_cache);
    ck_assert(c.access_log);
    char *bad_bool[] = {"COLLSYNTH_ISO_CACHE=maybe", NULL};
    ck_assert_int_eq(config_from_env(&c, bad_bool, &err), CS_EINVAL);
    ck_assert_ptr_nonnull(strstr(err.message, "yes/no"));
    char *h[] = {"collsynthd", "--help", NULL};
    ck_assert_int_eq(config_from_args(&c, 2, h, &help, &err), CS_OK);
    ck_assert(help);
    /* --help documents every flag with its environment variable */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    config_usage(f, "collsynthd");
    fclose(f);
    const char *must[] = {"--listen", "--port", "--data-dir", "--store", "--workers",
                          "--auth-token", "--cors-origins", "--max-queued", "--job-time-limit",
                          "--max-body-bytes", "--static-dir", "COLLSYNTH_STORE", "SIGTERM"};
    for (size_t i = 0; i < sizeof must / sizeof must[0]; i++)
        ck_assert_msg(strstr(text, must[i]) != NULL, "--help lacks %s", must[i]);
    free(text);
}
END_TEST


/* --listen takes host:port too (and says how when it cannot parse it). */
/* collsynthd --wokers 4 said only "unknown option --wokers": the nearest
 * option is named (cs_nearest_name, as the CLI does for topologies), also
 * for a negated boolean and a single dash; nothing close, no guess. */
START_TEST(unknown_options_suggest_the_nearest)
{
    struct {
        const char *arg, *want;
    } cases[] = {
        {"--wokers", "unknown option --wokers: did you mean --workers?"},
        {"--wokers=4", "unknown option --wokers: did you mean --workers?"},
        {"--max-queue", "did you mean --max-queued?"},
        {"--no-acess-log", "did you mean --no-access-log?"},
        {"--auth-tokn", "did you mean --auth-token?"},
        {"-port", "unknown option -port: did you mean --port?"},
        {"--frobnicate", "unknown option --frobnicate (see --help)"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cs_server_config c;
        config_defaults(&c);
        char *argv[] = {"collsynthd", (char *)cases[i].arg, "4", NULL};
        bool help = false;
        cs_error err;
        cs_error_clear(&err);
        ck_assert_int_eq(config_from_args(&c, 3, argv, &help, &err), CS_EINVAL);
        ck_assert_msg(strstr(err.message, cases[i].want) != NULL, "%s: %s", cases[i].arg,
                      err.message);
        if (i == sizeof cases / sizeof cases[0] - 1)
            ck_assert_msg(strstr(err.message, "did you mean") == NULL, "%s", err.message);
    }
}
END_TEST

START_TEST(listen_takes_host_and_port)
{
    struct { const char *listen, *port, *want_addr; int want_port; } ok[] = {
        {"127.0.0.1:8471", NULL, "127.0.0.1", 8471},
        {"[::1]:9000", NULL, "::1", 9000},
        {"::1", NULL, "::1", 8470},
        {"0.0.0.0", "9100", "0.0.0.0", 9100},
        {"localhost:8000", NULL, "127.0.0.1", 8000},
        {"127.0.0.1:8000", "8000", "127.0.0.1", 8000},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        cs_server_config c;
        config_defaults(&c);
        char *argv[] = {"collsynthd", "--listen", (char *)ok[i].listen, "--port",
                        (char *)ok[i].port, NULL};
        bool help;
        cs_error err;
        ck_assert_msg(config_from_args(&c, ok[i].port ? 5 : 3, argv, &help, &err) == CS_OK,
                      "%s: %s", ok[i].listen, err.message);
        ck_assert_str_eq(c.listen, ok[i].want_addr);
        ck_assert_int_eq(c.port, ok[i].want_port);
    }
    struct { const char *listen, *port, *says; } bad[] = {
        {"127.0.0.1:99999", NULL, "port"},
        {"127.0.0.1:8470", "9000", "--port"},
        {"example.com", NULL, "[::1]:8470"},
        {"[::1", NULL, "[::1]:8470"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cs_server_config c;
        config_defaults(&c);
        char *argv[] = {"collsynthd", "--listen", (char *)bad[i].listen, "--port",
                        (char *)bad[i].port, NULL};
        bool help;
        cs_error err;
        ck_assert_int_eq(config_from_args(&c, bad[i].port ? 5 : 3, argv, &help, &err), CS_EINVAL);
        ck_assert_str_eq(err.field, "listen");
        ck_assert_msg(strstr(err.message, bad[i].says) != NULL, "%s: %s", bad[i].listen,
                      err.message);
    }
}
END_TEST

START_TEST(cache_lru_and_refcounts)
{
    /* each entry costs len + key + 96 bytes of bookkeeping */
    cs_cache *c = cache_new(3 * (1000 + 1 + 96) + 10);
    char data[1000];
    memset(data, 'a', sizeof data);
    cs_blob *b[4];
    const char *keys[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 3; i++) {
        b[i] = blob_new(data, sizeof data);
        cache_put(c, keys[i], b[i]);
    }
    long n, bytes;
    cache_stats(c, &n, &bytes);
    ck_assert_int_eq(n, 3);
    /* touch "a" so "b" is the least recently used, then add "d" */
    cs_blob *got = cache_get(c, "a");
    ck_assert_ptr_eq(got, b[0]);
    blob_unref(got);
    b[3] = blob_new(data, sizeof data);
    cache_put(c, "d", b[3]);
    got = cache_get(c, "b");
    ck_assert_ptr_null(got);
    got = cache_get(c, "a");
    ck_assert_ptr_nonnull(got);
    blob_unref(got);
    /* an evicted blob we still hold stays valid */
    ck_assert_int_eq(b[1]->data[999], 'a');
    for (int i = 0; i < 4; i++)
        blob_unref(b[i]);
    /* replacing a key keeps one entry */
    cs_blob *x = blob_new("xyz", 3);
    cache_put(c, "a", x);
    blob_unref(x);
    got = cache_get(c, "a");
    ck_assert_str_eq(got->data, "xyz");
    blob_unref(got);
    cache_stats(c, &n, &bytes);
    ck_assert_int_eq(n, 3);
    cache_free(c);
}
END_TEST

START_TEST(metrics_render_prometheus)
{
    cs_metrics *m = malloc(sizeof *m);
    metrics_init(m);
    metrics_observe_request(m, ROUTE_RESULT, 200, 0.0007);
    metrics_observe_request(m, ROUTE_RESULT, 200, 0.3);
    metrics_observe_request(m, ROUTE_SYNTHESIZE, 429, 0.001);
    metrics_observe_request(m, ROUTE_OTHER, 999, 0.001);
    cs_metrics_gauges g = {.jobs = {2, 1, 5, 0, 1}, .results = 5, .workers = 2};
    char *text = metrics_render(m, &g);
    ck_assert_ptr_nonnull(strstr(text, "collsynth_http_requests_total{route=\"result\",status=\"200\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "collsynth_http_requests_total{route=\"synthesize\",status=\"429\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "status=\"other\"} 1\n"));
    /* cumulative buckets: 0.7 ms is in le=0.001, 300 ms from le=0.5 on */
    ck_assert_ptr_nonnull(strstr(text, "duration_seconds_bucket{route=\"result\",le=\"0.0005\"} 0\n"));
    ck_assert_ptr_nonnull(strstr(text, "duration_seconds_bucket{route=\"result\",le=\"0.001\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "duration_seconds_bucket{route=\"result\",le=\"0.25\"} 1\n"));
    ck_assert_ptr_nonnull(strstr(text, "duration_seconds_bucket{route=\"result\",le=\"0.5\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "duration_seconds_bucket{route=\"result\",le=\"+Inf\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "duration_seconds_count{route=\"result\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "collsynth_jobs{state=\"queued\"} 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "collsynth_queue_depth 2\n"));
    ck_assert_ptr_nonnull(strstr(text, "# TYPE collsynth_http_request_duration_seconds histogram"));
    free(text);
    free(m);
}
END_TEST

START_TEST(log_lines_escape_client_strings)
{
    char path[] = "/tmp/collsynth-log-XXXXXX";
    int fd = mkstemp(path);
    cs_logger lg;
    log_init(&lg, "info", "kv");
    lg.fd = fd;
    log_event(&lg, LOG_INFO, "http", "path", "/x\nlevel=error fake=1", "empty", "", NULL);
    log_event(&lg, LOG_DEBUG, "hidden", NULL);
    log_init(&lg, "info", "json");
    lg.fd = fd;
    log_event(&lg, LOG_WARN, "j", "q", "a\"b\\c", NULL);
    close(fd);
    char *text = NULL;
    ck_assert_int_eq(cs_read_file(path, &text, NULL, NULL), CS_OK);
    unlink(path);
    /* exactly two lines: the injected newline was escaped, debug filtered */
    int lines = 0;
    for (char *p = text; *p; p++)
        lines += *p == '\n';
    ck_assert_int_eq(lines, 2);
    ck_assert_ptr_nonnull(strstr(text, "path=\"/x\\nlevel=error fake=1\""));
    ck_assert_ptr_nonnull(strstr(text, "empty=\"\""));
    ck_assert_ptr_nonnull(strstr(text, "\"q\":\"a\\\"b\\\\c\""));
    ck_assert_ptr_null(strstr(text, "hidden"));
    free(text);
}
END_TEST

static Suite *units_suite(void)
{
    Suite *s = suite_create("daemon_units");
    TCase *tc = tcase_create("units");
    tcase_add_test(tc, config_flags_env_and_errors);
    tcase_add_test(tc, listen_takes_host_and_port);
    tcase_add_test(tc, unknown_options_suggest_the_nearest);
    tcase_add_test(tc, cache_lru_and_refcounts);
    tcase_add_test(tc, metrics_render_prometheus);
    tcase_add_test(tc, log_lines_escape_client_strings);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(units_suite)
