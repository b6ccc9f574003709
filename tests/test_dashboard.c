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


/* A later stage of the browser script that failed on its own. */
static void stage_ok(const char *name)
{
    const char *failure = json_string_value(json_object_get(page, name));
    ck_assert_msg(failure == NULL, "in the browser: %s", failure);
}

/* Issue 12: frontier labels are not cut at the plot's right edge. */
START_TEST(frontier_labels_stay_inside_the_plot)
{
    require_page();
    ck_assert_int_eq(num("labels"), num("expected_points"));
    json_t *over = json_object_get(page, "label_overflows");
    ck_assert_msg(json_is_array(over) && json_array_size(over) == 0, "cut labels: %s",
                  json_string_value(json_array_get(over, 0)));
}
END_TEST

/* Issue 12: opening a result again posts no baseline synthesis: stored
 * baselines come back by key, refused ones are remembered (DGX-1 allgather:
 * the three baselines are asked once, and the server refuses at least one). */
START_TEST(baselines_are_asked_once_and_refusals_remembered)
{
    require_page();
    ck_assert_int_eq(num("first_view_baseline_posts"), 3);
    ck_assert_int_ge(num("first_view_baseline_refusals"), 1);
    ck_assert_int_eq(num("second_view_baseline_posts"), 0);
    ck_assert_int_eq(num("second_view_baseline_curves"), num("baseline_curves"));
    stage_ok("reload_failure");
    ck_assert_int_eq(num("reload_baseline_posts"), 0);
    ck_assert_int_eq(num("reload_baseline_curves"), num("baseline_curves"));
}
END_TEST

/* Issue 12: meshes, tori and hypercubes are drawn on their grid: one cell
 * per rank, and every link of the API's topology along a row or a column
 * (a mesh's between neighbouring cells); other topologies stay on a circle. */
START_TEST(grids_are_drawn_on_their_grid)
{
    require_page();
    stage_ok("grid_failure");
    json_t *grids = json_object_get(page, "grids");
    const struct {
        const char *name, *layout;
        int ranks;
        bool adjacent;
    } want[] = {{"mesh2d:4x4", "mesh2d", 16, true},
                {"torus2d:4x4", "torus2d", 16, false},
                {"hypercube:4", "hypercube", 16, false},
                {"mesh3d:2x2x2", "mesh3d", 8, false}};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        json_t *g = json_object_get(grids, want[i].name);
        ck_assert_msg(g != NULL, "%s was not drawn", want[i].name);
        ck_assert_str_eq(json_string_value(json_object_get(g, "layout")), want[i].layout);
        ck_assert_int_eq(json_integer_value(json_object_get(g, "ranks")), want[i].ranks);
        ck_assert_int_eq(json_integer_value(json_object_get(g, "distinct")), want[i].ranks);
        ck_assert_int_gt(json_integer_value(json_object_get(g, "links")), 0);
        if (strcmp(want[i].layout, "mesh3d") != 0)
            ck_assert_msg(json_integer_value(json_object_get(g, "off_axis")) == 0,
                          "%s: links off the grid's rows and columns", want[i].name);
        if (want[i].adjacent)
            ck_assert_msg(json_integer_value(json_object_get(g, "not_adjacent")) == 0,
                          "%s: links between cells that are not neighbours", want[i].name);
    }
    ck_assert_str_eq(json_string_value(json_object_get(page, "custom_layout")), "circle");
}
END_TEST

static bool same_list(json_t *a, json_t *b)
{
    if (json_array_size(a) != json_array_size(b))
        return false;
    for (size_t i = 0; i < json_array_size(a); i++)
        if (!json_equal(json_array_get(a, i), json_array_get(b, i)))
            return false;
    return true;
}

/* Issue 12: the history lists every stored result and every job the server
 * has (not only this browser's), filters and pages them, and opens a result. */
START_TEST(history_lists_the_servers_results_and_jobs)
{
    require_page();
    stage_ok("history_failure");
    json_t *api_r = json_object_get(page, "history_api_results");
    json_t *api_j = json_object_get(page, "history_api_jobs");
    ck_assert_int_ge((long)json_array_size(api_r), 5); /* dgx1, the custom one, 4 grids, baselines */
    ck_assert_int_ge((long)json_array_size(api_j), 5);
    ck_assert_int_eq(num("history_page_jobs_empty"), 0); /* a fresh profile submitted nothing */
    ck_assert_msg(same_list(json_object_get(page, "history_results"), api_r),
                  "the results shown are not the server's");
    ck_assert_msg(same_list(json_object_get(page, "history_jobs"), api_j),
                  "the jobs shown are not the server's");
    ck_assert_msg(same_list(json_object_get(page, "history_allgather"),
                            json_object_get(page, "history_api_allgather")),
                  "the collective filter does not match the API's");
    ck_assert_int_eq(num("history_page1"), 1);
    json_t *p2 = json_object_get(page, "history_page2");
    ck_assert_int_eq((long)json_array_size(p2), 2);
    ck_assert(json_equal(json_array_get(p2, 0), json_array_get(api_r, 0)));
    ck_assert(json_equal(json_array_get(p2, 1), json_array_get(api_r, 1)));
    ck_assert_str_eq(json_string_value(json_object_get(page, "history_opened")),
                     json_string_value(json_object_get(page, "history_clicked")));
}
END_TEST

/* Loads overlap: the allgather filter's answer, held back until the newer
 * page-size-1 list was shown, must not replace that list when it arrives. */
START_TEST(history_shows_the_newest_answer_only)
{
    require_page();
    stage_ok("history_newest_failure");
    json_t *rows = json_object_get(page, "history_newest_rows");
    ck_assert_int_eq((long)json_array_size(rows), 1);
    ck_assert(json_equal(json_array_get(rows, 0),
                         json_array_get(json_object_get(page, "history_api_results"), 0)));
    ck_assert(json_is_true(json_object_get(page, "history_newest_more")));
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
    tcase_add_test(tc, frontier_labels_stay_inside_the_plot);
    tcase_add_test(tc, baselines_are_asked_once_and_refusals_remembered);
    tcase_add_test(tc, grids_are_drawn_on_their_grid);
    tcase_add_test(tc, history_lists_the_servers_results_and_jobs);
    tcase_add_test(tc, history_shows_the_newest_answer_only);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(dashboard_suite)
