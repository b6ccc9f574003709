/*
 * Tests of what a newcomer meets first (issue 12): the README's commands run
 * verbatim, `make install` puts every piece where the README and the daemon
 * look for it, the docs cover every CLI command and every daemon
 * environment variable and say true things about ETags, and tests/run.sh
 * shows skipped tests.
 *
 * The README is read from the repository (the tests run from its top), its
 * indented code lines are the commands.  Offline commands run in a temp dir
 * whose `build` is a link to this build, one after another as a reader would
 * type them (a later one reads what an earlier one wrote); the expensive
 * ones are skipped with a SKIPPED line, which tests/run.sh reports.
 */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "clients_helpers.h"
#include "cs_common.h"

static char *read_text(const char *path)
{
    char *text = NULL;
    cs_error err;
    ck_assert_msg(cs_read_file(path, &text, NULL, &err) == CS_OK, "%s", err.message);
    return text;
}

/* The README's indented code lines (4 spaces), without the indent. */
static int readme_commands(char ***out)
{
    char *text = read_text("README.md");
    int n = 0, cap = 64;
    char **lines = calloc((size_t)cap, sizeof *lines);
    for (char *save = NULL, *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
        if (strncmp(l, "    ", 4) != 0)
            continue;
        if (n == cap)
            lines = realloc(lines, sizeof *lines * (size_t)(cap *= 2));
        lines[n++] = strdup(l + 4);
    }
    free(text);
    *out = lines;
    return n;
}

static void free_lines(char **lines, int n)
{
    for (int i = 0; i < n; i++)
        free(lines[i]);
    free(lines);
}

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/collsynth-pkg-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
}

static void remove_tmpdir(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

/* ---- README -------------------------------------------------------------------------- */

/* Commands too slow for `make test` (they run in bench/ or by hand). */
static const char *const expensive[] = {"mesh2d:64x64"};

START_TEST(readme_offline_commands_run_verbatim)
{
    make_tmpdir();
    char build[PATH_MAX], link[400];
    ck_assert_ptr_nonnull(realpath(cs_test_build_dir(), build));
    snprintf(link, sizeof link, "%s/build", tmpdir);
    ck_assert_int_eq(symlink(build, link), 0);
    char **lines;
    int n = readme_commands(&lines), ran = 0;
    for (int i = 0; i < n; i++) {
        const char *c = lines[i];
        /* the CLI's offline commands; the remote ones need COLLSYNTH_SERVER
         * (readme_service_example below) */
        if (strncmp(c, "build/collsynth ", 16) != 0 || strstr(c, " submit ") ||
            strstr(c, " get "))
            continue;
        bool skip = false;
        for (size_t k = 0; k < sizeof expensive / sizeof *expensive; k++)
            skip |= strstr(c, expensive[k]) != NULL;
        if (skip) {
            printf("test_packaging: SKIPPED README command '%.60s...': too slow for make test\n",
                   c);
            continue;
        }
        char cmd[2048], *out = NULL, *err = NULL;
        snprintf(cmd, sizeof cmd, "cd '%s' && %s", tmpdir, c);
        int rc = cs_test_sh(cmd, &out, &err);
        ck_assert_msg(rc == 0, "README command failed (exit %d): %s\n%s%s", rc, c, out, err);
        free(out);
        free(err);
        ran++;
    }
    ck_assert_int_ge(ran, 8);
    /* what the README says these write, they wrote; the codegen example's
     * input came from an earlier README command */
    const char *files[] = {"ag.json", "ar.json", "ag.xml", "rings.json"};
    for (int i = 0; i < 4; i++) {
        char p[400];
        snprintf(p, sizeof p, "%s/%s", tmpdir, files[i]);
        struct stat st;
        ck_assert_msg(stat(p, &st) == 0 && st.st_size > 0, "%s was not written", files[i]);
    }
    char algos[400];
    snprintf(algos, sizeof algos, "%s/algos", tmpdir);
    struct stat st;
    ck_assert_msg(stat(algos, &st) == 0 && S_ISDIR(st.st_mode), "codegen wrote no algos/");
    free_lines(lines, n);
    remove_tmpdir();
}
END_TEST

/* The README's POST example, sent to a real daemon: the 202 it shows has the
 * members and the status the daemon answers with.  The container line
 * neither publishes on every interface nor runs without a token. */
START_TEST(readme_service_example_matches_the_daemon)
{
    char **lines;
    int n = readme_commands(&lines);
    const char *example = NULL, *post = NULL, *body = NULL, *docker = NULL;
    for (int i = 0; i < n; i++) {
        if (strstr(lines[i], "-> 202 {"))
            example = strstr(lines[i], "{");
        if (strstr(lines[i], "-XPOST") && strstr(lines[i], "/v1/synthesize"))
            post = lines[i];
        if (post && !body && strstr(lines[i], "-d '{"))
            body = strstr(lines[i], "-d '") + 4;
        if (strstr(lines[i], "docker run"))
            docker = lines[i];
    }
    ck_assert_ptr_nonnull(example);
    ck_assert_ptr_nonnull(body);
    ck_assert_ptr_nonnull(docker);
    ck_assert_msg(strstr(docker, "-p 127.0.0.1:") || strstr(docker, "COLLSYNTH_AUTH_TOKEN"),
                  "docker run publishes without a token: %s", docker);
    ck_assert_msg(strstr(docker, "COLLSYNTH_AUTH_TOKEN"), "no token: %s", docker);
    /* the example's JSON, up to its closing brace */
    char ex[512];
    snprintf(ex, sizeof ex, "%s", example);
    char *close = strchr(ex, '}');
    ck_assert_ptr_nonnull(close);
    close[1] = '\0';
    json_t *want = json_loads(ex, 0, NULL);
    ck_assert_msg(want != NULL, "README's 202 example is not JSON: %s", ex);
    char b[512];
    snprintf(b, sizeof b, "%s", body);
    char *q = strrchr(b, '\'');
    ck_assert_ptr_nonnull(q);
    *q = '\0';

    cs_test_daemon d;
    char *why = NULL;
    ck_assert_msg(cs_test_daemon_start(&d, NULL, &why) == 0, "daemon: %s", why ? why : "");
    http_resp r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    ck_assert_int_eq(http_request(&d.daemon, "POST", "/v1/synthesize", b, hdr, &r), 0);
    if (r.status == 202) {
        json_t *got = json_loads(r.body, 0, NULL);
        ck_assert_ptr_nonnull(got);
        const char *k;
        json_t *v;
        json_object_foreach(want, k, v) {
            ck_assert_msg(json_object_get(got, k) != NULL, "the daemon's 202 lacks \"%s\": %s", k,
                          r.body);
        }
        json_object_foreach(got, k, v) {
            ck_assert_msg(json_object_get(want, k) != NULL,
                          "README's 202 example lacks \"%s\" (daemon: %s)", k, r.body);
        }
        /* The README shows a 202 as it usually comes; a worker may take the
         * job before the POST answers, so "running" is the same answer. */
        const char *status = json_string_value(json_object_get(got, "status"));
        ck_assert_str_eq(json_string_value(json_object_get(want, "status")), "queued");
        ck_assert_msg(status && (!strcmp(status, "queued") || !strcmp(status, "running")),
                      "202 status: %s", r.body);
        json_decref(got);
    } else {
        ck_assert_msg(r.status == 200, "POST: %ld %s", r.status, r.body); /* already done */
    }
    http_resp_free(&r);
    cs_test_daemon_stop(&d);
    json_decref(want);
    free_lines(lines, n);
}
END_TEST

/* ---- make install ---------------------------------------------------------------------- */

/* Runs the installed daemon (no --static-dir) and reads the URL it wrote. */
static pid_t run_installed_daemon(const char *bin, const char *data, const char *url_file)
{
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(bin, bin, "--port", "0", "--data-dir", data, "--url-file", url_file, (char *)NULL);
        _exit(127);
    }
    return pid;
}

START_TEST(make_install_puts_everything_where_it_is_looked_for)
{
    make_tmpdir();
    char cmd[1024], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd,
             "make --no-print-directory install BUILD='%s' DESTDIR='%s/root' PREFIX=/usr",
             cs_test_build_dir(), tmpdir);
    int rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "make install: %s%s", out, err);
    free(out);
    free(err);
    /* the SPANK plugin where the README's plugstack line loads it */
    char *readme = read_text("README.md");
    char *plug = strstr(readme, "optional /");
    ck_assert_ptr_nonnull(plug);
    char path[256];
    ck_assert_int_eq(sscanf(plug, "optional %255s", path), 1);
    const char *want[] = {path, "/usr/bin/collsynth", "/usr/bin/collsynthd",
                          "/usr/share/collsynth/dashboard/index.html",
                          "/usr/share/collsynth/dashboard/app.js",
                          "/usr/share/doc/collsynth/README.md",
                          "/usr/share/doc/collsynth/docs/cli.md",
                          "/usr/share/doc/collsynth/docs/service.md"};
    for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
        char p[600];
        snprintf(p, sizeof p, "%s/root%s", tmpdir, want[i]);
        ck_assert_msg(access(p, R_OK) == 0, "make install did not install %s", want[i]);
    }
    free(readme);
    char bin[600];
    snprintf(bin, sizeof bin, "%s/root/usr/bin/collsynth", tmpdir);
    ck_assert_int_eq(access(bin, X_OK), 0);
    /* the installed daemon finds the installed dashboard by itself */
    char daemon[600], data[600], url_file[600];
    snprintf(daemon, sizeof daemon, "%s/root/usr/bin/collsynthd", tmpdir);
    snprintf(data, sizeof data, "%s/data", tmpdir);
    snprintf(url_file, sizeof url_file, "%s/url", tmpdir);
    pid_t pid = run_installed_daemon(daemon, data, url_file);
    char *url = NULL;
    for (int i = 0; i < 200 && !url; i++) {
        if (cs_read_file(url_file, &url, NULL, NULL) != CS_OK) {
            url = NULL;
            usleep(50000);
        }
    }
    ck_assert_msg(url != NULL, "the installed collsynthd did not start");
    url[strcspn(url, "\n")] = '\0';
    char page[700];
    snprintf(page, sizeof page, "%s/", url);
    http_resp r;
    ck_assert_int_eq(http_request_url(page, "GET", NULL, NULL, &r), 0);
    ck_assert_msg(r.status == 200, "GET / from the installed daemon: %ld", r.status);
    char *index = read_text("clients/dashboard/index.html");
    ck_assert_str_eq(r.body, index);
    free(index);
    http_resp_free(&r);
    free(url);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    remove_tmpdir();
}
END_TEST

/* ---- docs -------------------------------------------------------------------------------- */

/* Every command `collsynth --help` lists has its section in docs/cli.md. */
START_TEST(docs_cli_covers_every_command)
{
    char cmd[600], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s/collsynth --help", cs_test_build_dir());
    ck_assert_int_eq(cs_test_sh(cmd, &out, &err), 0);
    char *doc = read_text("docs/cli.md");
    char *p = strstr(out, "Commands:\n");
    ck_assert_ptr_nonnull(p);
    int n = 0;
    for (char *save = NULL, *l = strtok_r(p + 10, "\n", &save); l && l[0] == ' ';
         l = strtok_r(NULL, "\n", &save)) {
        char name[64], want[80];
        if (sscanf(l, " %63s", name) != 1)
            continue;
        snprintf(want, sizeof want, "\n### %s\n", name);
        ck_assert_msg(strstr(doc, want), "docs/cli.md has no section for '%s'", name);
        n++;
    }
    ck_assert_int_ge(n, 13);
    free(doc);
    free(out);
    free(err);
}
END_TEST

/* Every environment variable `collsynthd --help` names has its row in
 * docs/service.md's option table, with a description. */
START_TEST(docs_service_lists_every_environment_variable)
{
    char cmd[600], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "%s/collsynthd --help", cs_test_build_dir());
    ck_assert_int_eq(cs_test_sh(cmd, &out, &err), 0);
    char *doc = read_text("docs/service.md");
    int n = 0;
    for (char *p = strstr(out, "env COLLSYNTH_"); p; p = strstr(p + 1, "env COLLSYNTH_")) {
        char var[96], cell[100];
        ck_assert_int_eq(sscanf(p, "env %95s", var), 1);
        snprintf(cell, sizeof cell, "`%s`", var);
        const char *row = strstr(doc, cell);
        ck_assert_msg(row != NULL, "docs/service.md does not list %s", var);
        /* a table row: | flag | VAR | default | meaning | with text in the last two */
        const char *bol = row;
        while (bol > doc && bol[-1] != '\n')
            bol--;
        const char *eol = strchr(row, '\n');
        int bars = 0;
        bool empty_cell = false;
        for (const char *c = bol; c < eol; c++)
            if (*c == '|') {
                bars++;
                const char *d = c + 1;
                while (d < eol && *d == ' ')
                    d++;
                if (d < eol && *d == '|')
                    empty_cell = true;
            }
        ck_assert_msg(bars >= 5 && !empty_cell, "%s: an incomplete row in docs/service.md", var);
        n++;
    }
    ck_assert_int_ge(n, 30);
    free(doc);
    free(out);
    free(err);
}
END_TEST

/* docs/service.md: each representation of a result has its own ETag,
 * starting with the key's first 16 hex digits, and If-None-Match gives 304. */
START_TEST(result_etags_are_per_representation_as_documented)
{
    cs_test_daemon d;
    char *why = NULL;
    ck_assert_msg(cs_test_daemon_start(&d, NULL, &why) == 0, "daemon: %s", why ? why : "");
    http_resp r;
    const char *hdr[] = {"Content-Type: application/json", NULL};
    const char *body = "{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"ring\","
                       "\"options\":{\"wait_s\":30}}";
    ck_assert_int_eq(http_request(&d.daemon, "POST", "/v1/synthesize", body, hdr, &r), 0);
    ck_assert_msg(r.status == 200, "POST: %ld %s", r.status, r.body);
    json_t *doc = json_loads(r.body, 0, NULL);
    char key[80];
    snprintf(key, sizeof key, "%s", json_string_value(json_object_get(doc, "key")));
    json_decref(doc);
    http_resp_free(&r);
    const char *formats[] = {"json", "msccl-xml", "cuda"};
    char tags[3][128];
    for (int i = 0; i < 3; i++) {
        char path[256];
        snprintf(path, sizeof path, "/v1/results/%s?format=%s", key, formats[i]);
        ck_assert_int_eq(http_request(&d.daemon, "GET", path, NULL, NULL, &r), 0);
        ck_assert_msg(r.status == 200, "%s: %ld", formats[i], r.status);
        ck_assert_msg(http_header(&r, "ETag", tags[i], sizeof tags[i]) != NULL,
                      "%s has no ETag", formats[i]);
        ck_assert_msg(tags[i][0] == '"' && strncmp(tags[i] + 1, key, 16) == 0, "%s: ETag %s",
                      formats[i], tags[i]);
        http_resp_free(&r);
        char inm[512];
        snprintf(inm, sizeof inm, "If-None-Match: %s", tags[i]);
        const char *h[] = {inm, NULL};
        ck_assert_int_eq(http_request(&d.daemon, "GET", path, NULL, h, &r), 0);
        ck_assert_msg(r.status == 304, "%s with If-None-Match: %ld", formats[i], r.status);
        http_resp_free(&r);
    }
    ck_assert_str_ne(tags[0], tags[1]);
    ck_assert_str_ne(tags[1], tags[2]);
    cs_test_daemon_stop(&d);
}
END_TEST

/* ---- tests/run.sh ------------------------------------------------------------------------- */

/* A passing runner's SKIPPED lines are shown, and counted in the last line. */
START_TEST(run_sh_prints_skips_in_the_summary)
{
    make_tmpdir();
    char a[400], b[400];
    snprintf(a, sizeof a, "%s/test_fake_a", tmpdir);
    snprintf(b, sizeof b, "%s/test_fake_b", tmpdir);
    FILE *f = fopen(a, "w");
    fputs("#!/bin/sh\necho 'test_fake_a: SKIPPED gpu_part: nvcc not found'\n"
          "echo '100%: Checks: 2, Failures: 0, Errors: 0'\n", f);
    fclose(f);
    f = fopen(b, "w");
    fputs("#!/bin/sh\necho '100%: Checks: 3, Failures: 0, Errors: 0'\n", f);
    fclose(f);
    chmod(a, 0755);
    chmod(b, 0755);
    char cmd[1200], *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd, "tests/run.sh '%s' '%s'", a, b);
    ck_assert_int_eq(cs_test_sh(cmd, &out, &err), 0);
    ck_assert_msg(strstr(out, "test_fake_a: SKIPPED gpu_part: nvcc not found"), "%s", out);
    const char *last = out + strlen(out);
    while (last > out && last[-1] == '\n')
        last--;
    while (last > out && last[-1] != '\n')
        last--;
    ck_assert_msg(!strncmp(last, "5 passed, 0 failed, 1 skipped", 29), "last line: %s", last);
    free(out);
    free(err);
    remove_tmpdir();
}
END_TEST

static Suite *packaging_suite(void)
{
    Suite *s = suite_create("packaging");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 240);
    tcase_add_test(tc, readme_offline_commands_run_verbatim);
    tcase_add_test(tc, readme_service_example_matches_the_daemon);
    tcase_add_test(tc, make_install_puts_everything_where_it_is_looked_for);
    tcase_add_test(tc, docs_cli_covers_every_command);
    tcase_add_test(tc, docs_service_lists_every_environment_variable);
    tcase_add_test(tc, result_etags_are_per_representation_as_documented);
    tcase_add_test(tc, run_sh_prints_skips_in_the_summary);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(packaging_suite)
