/*
 * Test of the web dashboard (clients/dashboard/) in a real browser: Debian's
 * headless Chromium driven by playwright-core (tests/dashboard/, installed
 * with `npm ci` on first use) against the real collsynthd serving the page.
 *
 * The node script submits a bad topology and a real synthesis through the
 * page, counts what the page drew, and fetches the API's own view; this file
 * asserts the two agree: one plot point per frontier algorithm, one heat-map
 * cell per directed topology link carrying the number of sends the API's
 * schedule puts on it, one graph edge per linked pair, both bounds marked,
 * frontier and baseline curves, one timeline bar per send; and that the page
 * shows the daemon's refusal until its token is typed in.  The screenshot is
 * kept as build/artifacts/dashboard.png.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check_main.h"
#include "clients_helpers.h"
#include "cs_common.h"

/* SMT with at most 2 chunks and k = 0: a two-point DGX-1 frontier, fast */
#define TOPOLOGY "dgx1"
#define METHOD "smt"
#define OPTIONS "'{\"max_chunks\": 2, \"k\": 0}'"
#define COLLECTIVE "allgather"
#define TOKEN "dash-t0ken"

static json_t *page;          /* the node script's report */
static char setup_problem[4096];
static char shot[512];

static void run_browser(void)
{
    setup_problem[0] = '\0';
    if (access("/usr/bin/chromium", X_OK) != 0) {
        snprintf(setup_problem, sizeof setup_problem,
                 "/usr/bin/chromium is missing (scripts/deps.sh test installs it)");
        return;
    }
    char *out = NULL, *err = NULL;
    if (access("tests/dashboard/node_modules/playwright-core/package.json", R_OK) != 0) {
        int rc = cs_test_sh("cd tests/dashboard && timeout 300 npm ci --no-audit --no-fund "
                            "--loglevel=error", &out, &err);
        if (rc != 0) {
            snprintf(setup_problem, sizeof setup_problem, "npm ci failed (%d): %s", rc, err);
            free(out);
            free(err);
            return;
        }
        free(out);
        free(err);
    }
    cs_test_daemon d;
    char *why = NULL;
    if (cs_test_daemon_start(&d, TOKEN, &why) != 0) {
        snprintf(setup_problem, sizeof setup_problem, "collsynthd did not start: %s",
                 why ? why : "");
        free(why);
        return;
    }
    char dir[400];
    snprintf(dir, sizeof dir, "%s/artifacts", cs_test_build_dir());
    mkdir(cs_test_build_dir(), 0755);
    mkdir(dir, 0755);
    snprintf(shot, sizeof shot, "%s/dashboard.png", dir);
    unlink(shot);
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "timeout 240 node tests/dashboard/dashboard.test.mjs %s %s %s %s %s %s %s", d.url,
             shot, TOPOLOGY, COLLECTIVE, TOKEN, METHOD, OPTIONS);
    int rc = cs_test_sh(cmd, &out, &err);
    cs_test_daemon_stop(&d);
    json_error_t jerr;
    page = json_loads(out, 0, &jerr);
    if (rc != 0 || page == NULL)
        snprintf(setup_problem, sizeof setup_problem, "node exited %d (%s)\nstdout: %.1500s\nstderr: %.1500s",
                 rc, page ? "" : jerr.text, out, err);
    free(out);
    free(err);
}

static void teardown(void)
{
    json_decref(page);
    page = NULL;
}

static long num(const char *name)
{
    json_t *v = json_object_get(page, name);
    ck_assert_msg(json_is_integer(v), "report lacks %s", name);
    return (long)json_integer_value(v);
}

static void require_page(void)
{
    ck_assert_msg(setup_problem[0] == '\0', "%s", setup_problem);
    const char *failure = json_string_value(json_object_get(page, "failure"));
    ck_assert_msg(failure == NULL, "in the browser: %s", failure);
}

START_TEST(page_loads_without_script_errors)
{
    require_page();
    ck_assert_str_eq(json_string_value(json_object_get(page, "title")), "collsynth dashboard");
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(page, "console_errors"), i, e) {
        /* the browser logs failed loads: the deliberate requests without a token
         * (401) and with a bad topology (400), and the baselines the server does
         * not have for this collective (422) */
        const char *m = json_string_value(e);
        ck_assert_msg(strstr(m, "status of 400") != NULL || strstr(m, "status of 401") != NULL ||
                          strstr(m, "status of 422") != NULL,
                      "console error: %s", m);
    }
}
END_TEST

START_TEST(server_error_is_shown_with_its_field)
{
    require_page();
    /* no token yet: the daemon's refusal, in its words */
    const char *u = json_string_value(json_object_get(page, "unauthorized_text"));
    ck_assert_ptr_nonnull(u);
    ck_assert_msg(strstr(u, "unauthorized") != NULL && strstr(u, "Authorization") != NULL,
                  "shown: %s", u);
    const char *t = json_string_value(json_object_get(page, "error_text"));
    ck_assert_ptr_nonnull(t);
    ck_assert_msg(strstr(t, "field topology") != NULL, "error shown: %s", t);
}
END_TEST

START_TEST(frontier_plot_has_a_point_per_algorithm_and_both_bounds)
{
    require_page();
    ck_assert_int_eq(num("expected_points"), 2); /* latency- and bandwidth-leaning */
    ck_assert_int_eq(num("points"), num("expected_points"));
    ck_assert_int_eq(num("frontier_rows"), num("expected_points"));
    ck_assert_int_eq(num("bound_lines"), 2);
    ck_assert_int_ge(num("job_rows"), 1);
}
END_TEST

/* The time bound (issue 11): the summary names it, every frontier row shows
 * the API's ratio_to_bound, and the size plot draws it. */
START_TEST(time_bound_and_ratio_per_frontier_point_are_shown)
{
    require_page();
    ck_assert(json_is_true(json_object_get(page, "has_time_bound")));
    const char *summary = json_string_value(json_object_get(page, "summary_text"));
    ck_assert_ptr_nonnull(summary);
    ck_assert_msg(strstr(summary, "time bound") && strstr(summary, "forestcoll"), "summary: %s",
                  summary);
    json_t *want = json_object_get(page, "expected_ratios"), *got = json_object_get(page, "ratios");
    ck_assert_int_eq((long)json_array_size(got), num("expected_points"));
    ck_assert_int_eq((long)json_array_size(want), (long)json_array_size(got));
    for (size_t i = 0; i < json_array_size(want); i++) {
        const char *w = json_string_value(json_array_get(want, i));
        const char *g = json_string_value(json_array_get(got, i));
        ck_assert_msg(w && g && strcmp(w, g) == 0, "row %zu: shown %s, API %s", i, g ? g : "?",
                      w ? w : "none");
        ck_assert(atof(g) > 0 && atof(g) <= 1.0);
    }
    ck_assert_int_eq(num("bound_curves"), 1);
}
END_TEST

START_TEST(topology_graph_and_heat_map_have_every_link)
{
    require_page();
    /* DGX-1: 8 GPUs, each NVLinked to 4 others: 16 linked pairs, 32 directed links */
    ck_assert_int_eq(num("expected_ranks"), 8);
    ck_assert_int_eq(num("expected_pairs"), 16);
    ck_assert_int_eq(num("expected_directed_links"), 32);
    ck_assert_int_eq(num("graph_ranks"), num("expected_ranks"));
    ck_assert_int_eq(num("graph_links"), num("expected_pairs"));
    ck_assert_int_eq(num("heat_links"), num("expected_directed_links"));
    /* each cell carries the number of sends the API's schedule puts on that link */
    json_t *want = json_object_get(page, "expected_link_loads");
    json_t *got = json_object_get(page, "heat_loads");
    const char *link;
    json_t *v;
    json_object_foreach(got, link, v) {
        json_t *w = json_object_get(want, link);
        long expect = w ? (long)json_integer_value(w) : 0;
        ck_assert_msg(json_integer_value(v) == expect, "link %s: drawn %lld, schedule %ld",
                      link, (long long)json_integer_value(v), expect);
    }
    json_object_foreach(want, link, v)
        ck_assert_msg(json_object_get(got, link) != NULL, "used link %s not drawn", link);
}
END_TEST

START_TEST(pasted_topology_is_drawn_from_the_submitted_json)
{
    require_page();
    /* the test's own 3-rank document: 0<->1, 1<->2, 2->0 */
    ck_assert_int_eq(num("custom_graph_ranks"), 3);
    ck_assert_int_eq(num("custom_graph_links"), 3);
    ck_assert_int_eq(num("custom_heat_links"), 5);
}
END_TEST

START_TEST(size_plot_and_timeline_are_drawn)
{
    require_page();
    ck_assert_int_ge(num("baseline_curves"), 1);
    ck_assert_int_eq(num("curves"), num("expected_points") + num("baseline_curves"));
    ck_assert_int_gt(num("expected_sends"), 0);
    ck_assert_int_eq(num("sends"), num("expected_sends"));
    if (json_object_get(page, "sends_after_click") != NULL)
        ck_assert_int_eq(num("sends_after_click"), num("expected_sends_after_click"));
}
END_TEST

START_TEST(screenshot_is_saved_as_png)
{
    require_page();
    char *png = NULL;
    size_t len = 0;
    ck_assert_int_eq(cs_read_file(shot, &png, &len, NULL), CS_OK);
    ck_assert_int_gt((long)len, 20000);
    ck_assert(memcmp(png, "\x89PNG\r\n\x1a\n", 8) == 0);
    free(png);
}
END_TEST

static Suite *dashboard_suite(void)
{
    Suite *s = suite_create("dashboard");
    TCase *tc = tcase_create("chromium");
    tcase_add_unchecked_fixture(tc, run_browser, teardown);
    tcase_add_test(tc, page_loads_without_script_errors);
    tcase_add_test(tc, server_error_is_shown_with_its_field);
    tcase_add_test(tc, frontier_plot_has_a_point_per_algorithm_and_both_bounds);
    tcase_add_test(tc, time_bound_and_ratio_per_frontier_point_are_shown);
    tcase_add_test(tc, topology_graph_and_heat_map_have_every_link);
    tcase_add_test(tc, size_plot_and_timeline_are_drawn);
    tcase_add_test(tc, pasted_topology_is_drawn_from_the_submitted_json);
    tcase_add_test(tc, screenshot_is_saved_as_png);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(dashboard_suite)
