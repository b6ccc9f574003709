/*
 * Tests of the Dockerfile without a Docker engine: its package lists must be
 * exactly scripts/packages-build.txt (build stage) and
 * scripts/packages-runtime.txt (runtime stage), and the runtime stage must
 * keep the promises docs/clients.md makes (non-root user, data volume,
 * EXPOSE, HEALTHCHECK on /v1/health, bookworm base).
 *
 * The parser is small on purpose: joins backslash continuations, splits
 * stages at FROM, and reads the words after `apt-get install` up to the next
 * shell operator, skipping options.
 */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <fcntl.h>
#include <jansson.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "server_harness.h"
#include "cs_common.h"

#define MAX_STAGES 8
#define MAX_PKGS 64

typedef struct stage {
    char from[256];
    char name[64];
    char user[64];
    int npkgs;
    char pkgs[MAX_PKGS][64];
    bool has_volume, has_expose, has_healthcheck_health, copies_from_build;
} stage;

typedef struct dockerfile {
    int nstages;
    stage stages[MAX_STAGES];
} dockerfile;

/* Joins continuation lines and drops comments: one instruction per line. */
static char *logical_lines(const char *text)
{
    size_t n = strlen(text);
    char *out = malloc(n + 2);
    size_t j = 0;
    bool line_start = true, in_comment = false;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (line_start) {
            size_t k = i;
            while (k < n && (text[k] == ' ' || text[k] == '\t'))
                k++;
            in_comment = k < n && text[k] == '#';
            line_start = false;
        }
        if (c == '\n') {
            line_start = true;
            if (in_comment) {
                in_comment = false;
                continue;
            }
            out[j++] = '\n';
            continue;
        }
        if (in_comment)
            continue;
        if (c == '\\' && i + 1 < n && text[i + 1] == '\n') {
            out[j++] = ' ';
            i++;
            line_start = true;
            continue;
        }
        out[j++] = c;
    }
    out[j] = '\0';
    return out;
}

static void add_install_packages(stage *s, const char *run)
{
    const char *p = run;
    while ((p = strstr(p, "apt-get install")) != NULL) {
        p += strlen("apt-get install");
        for (;;) {
            while (*p == ' ' || *p == '\t')
                p++;
            if (*p == '\0' || *p == '&' || *p == '|' || *p == ';' || *p == '\n')
                break;
            char word[64];
            size_t k = 0;
            while (*p && !isspace((unsigned char)*p) && *p != ';' && k + 1 < sizeof word)
                word[k++] = *p++;
            word[k] = '\0';
            if (word[0] != '-' && s->npkgs < MAX_PKGS)
                snprintf(s->pkgs[s->npkgs++], sizeof s->pkgs[0], "%s", word);
        }
    }
}

static void parse_dockerfile(const char *text, dockerfile *d)
{
    memset(d, 0, sizeof *d);
    char *lines = logical_lines(text);
    char *save = NULL;
    stage *cur = NULL;
    for (char *line = strtok_r(lines, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        while (*line == ' ' || *line == '\t')
            line++;
        char instr[32] = "";
        sscanf(line, "%31s", instr);
        for (char *c = instr; *c; c++)
            *c = (char)toupper((unsigned char)*c);
        const char *rest = line + strlen(instr);
        if (strcmp(instr, "FROM") == 0 && d->nstages < MAX_STAGES) {
            cur = &d->stages[d->nstages++];
            char as[8] = "";
            sscanf(rest, "%255s %7s %63s", cur->from, as, cur->name);
        } else if (cur == NULL) {
            continue;
        } else if (strcmp(instr, "RUN") == 0) {
            add_install_packages(cur, rest);
        } else if (strcmp(instr, "USER") == 0) {
            sscanf(rest, "%63s", cur->user);
        } else if (strcmp(instr, "VOLUME") == 0) {
            cur->has_volume = true;
        } else if (strcmp(instr, "EXPOSE") == 0) {
            cur->has_expose = true;
        } else if (strcmp(instr, "HEALTHCHECK") == 0) {
            cur->has_healthcheck_health = strstr(rest, "/v1/health") != NULL;
        } else if (strcmp(instr, "COPY") == 0) {
            if (strstr(rest, "--from=build") != NULL)
                cur->copies_from_build = true;
        }
    }
    free(lines);
}

typedef struct pkg_list {
    int n;
    char names[MAX_PKGS][64];
} pkg_list;

static void read_package_list(const char *path, pkg_list *l)
{
    char *text = NULL;
    cs_error err;
    memset(l, 0, sizeof *l);
    ck_assert_msg(cs_read_file(path, &text, NULL, &err) == CS_OK, "%s", err.message);
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        char word[64] = "";
        if (sscanf(line, "%63s", word) != 1 || word[0] == '#')
            continue;
        ck_assert_int_lt(l->n, MAX_PKGS);
        snprintf(l->names[l->n++], sizeof l->names[0], "%s", word);
    }
    free(text);
}

static bool stage_has(const stage *s, const char *pkg)
{
    for (int i = 0; i < s->npkgs; i++)
        if (strcmp(s->pkgs[i], pkg) == 0)
            return true;
    return false;
}

static bool list_has(const pkg_list *l, const char *pkg)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->names[i], pkg) == 0)
            return true;
    return false;
}

/* Empty string when equal; else the first difference, described. */
static void compare(const stage *s, const pkg_list *l, char *why, size_t n)
{
    why[0] = '\0';
    for (int i = 0; i < l->n; i++)
        if (!stage_has(s, l->names[i])) {
            snprintf(why, n, "stage %s lacks %s", s->name, l->names[i]);
            return;
        }
    for (int i = 0; i < s->npkgs; i++)
        if (!list_has(l, s->pkgs[i])) {
            snprintf(why, n, "stage %s installs %s, which the list does not have", s->name,
                     s->pkgs[i]);
            return;
        }
}

static const stage *find_stage(const dockerfile *d, const char *name)
{
    for (int i = 0; i < d->nstages; i++)
        if (strcmp(d->stages[i].name, name) == 0)
            return &d->stages[i];
    return NULL;
}

static void load_repo_dockerfile(dockerfile *d)
{
    char *text = NULL;
    cs_error err;
    ck_assert_msg(cs_read_file("Dockerfile", &text, NULL, &err) == CS_OK, "%s", err.message);
    parse_dockerfile(text, d);
    free(text);
}

START_TEST(parser_reads_stages_and_install_words)
{
    const char *text =
        "# comment with apt-get install nothing\n"
        "FROM debian:bookworm AS build\n"
        "RUN apt-get update \\\n"
        " && apt-get install -y --no-install-recommends \\\n"
        "        gcc \\\n"
        "        make \\\n"
        " && rm -rf /var/lib/apt/lists/*\n"
        "FROM debian:bookworm-slim AS runtime\n"
        "RUN apt-get install -y libz3-4 ; echo done\n"
        "USER app\n";
    dockerfile d;
    parse_dockerfile(text, &d);
    ck_assert_int_eq(d.nstages, 2);
    ck_assert_str_eq(d.stages[0].name, "build");
    ck_assert_int_eq(d.stages[0].npkgs, 2);
    ck_assert_str_eq(d.stages[0].pkgs[0], "gcc");
    ck_assert_str_eq(d.stages[0].pkgs[1], "make");
    ck_assert_int_eq(d.stages[1].npkgs, 1);
    ck_assert_str_eq(d.stages[1].pkgs[0], "libz3-4");
    ck_assert_str_eq(d.stages[1].user, "app");

    /* a missing and an extra package are both reported */
    pkg_list l = {3, {"gcc", "make", "check"}};
    char why[256];
    compare(&d.stages[0], &l, why, sizeof why);
    ck_assert_str_eq(why, "stage build lacks check");
    pkg_list l2 = {1, {"gcc"}};
    compare(&d.stages[0], &l2, why, sizeof why);
    ck_assert_ptr_nonnull(strstr(why, "installs make"));
}
END_TEST

START_TEST(build_stage_installs_exactly_the_build_list)
{
    dockerfile d;
    load_repo_dockerfile(&d);
    const stage *b = find_stage(&d, "build");
    ck_assert_msg(b != NULL, "no stage named build");
    pkg_list l;
    read_package_list("scripts/packages-build.txt", &l);
    ck_assert_int_gt(l.n, 0);
    char why[256];
    compare(b, &l, why, sizeof why);
    ck_assert_msg(why[0] == '\0', "%s", why);
    ck_assert_ptr_nonnull(strstr(b->from, "bookworm"));
}
END_TEST

START_TEST(runtime_stage_installs_exactly_the_runtime_list)
{
    dockerfile d;
    load_repo_dockerfile(&d);
    ck_assert_int_ge(d.nstages, 2);
    const stage *r = &d.stages[d.nstages - 1]; /* the image is the last stage */
    pkg_list l;
    read_package_list("scripts/packages-runtime.txt", &l);
    char why[256];
    compare(r, &l, why, sizeof why);
    ck_assert_msg(why[0] == '\0', "%s", why);
    ck_assert_ptr_nonnull(strstr(r->from, "bookworm"));
    /* no -dev package reaches the runtime image */
    for (int i = 0; i < r->npkgs; i++)
        ck_assert_msg(strstr(r->pkgs[i], "-dev") == NULL, "runtime installs %s", r->pkgs[i]);
}
END_TEST

START_TEST(runtime_stage_is_non_root_with_volume_port_and_healthcheck)
{
    dockerfile d;
    load_repo_dockerfile(&d);
    const stage *r = &d.stages[d.nstages - 1];
    ck_assert_msg(r->user[0] != '\0', "the runtime stage sets no USER");
    ck_assert_str_ne(r->user, "root");
    ck_assert_str_ne(r->user, "0");
    ck_assert(r->has_volume);
    ck_assert(r->has_expose);
    ck_assert(r->has_healthcheck_health);
    ck_assert(r->copies_from_build);
}
END_TEST

START_TEST(dockerignore_keeps_build_outputs_out)
{
    char *text = NULL;
    cs_error err;
    ck_assert_msg(cs_read_file(".dockerignore", &text, NULL, &err) == CS_OK, "%s", err.message);
    ck_assert_ptr_nonnull(strstr(text, "node_modules"));
    ck_assert_ptr_nonnull(strstr(text, "\nbuild\n"));
    ck_assert_ptr_nonnull(strstr(text, ".git"));
    free(text);
}
END_TEST


/* The HEALTHCHECK's shell command, from the Dockerfile's exec form. */
static char *healthcheck_script(void)
{
    char *text = NULL;
    cs_error err;
    ck_assert_msg(cs_read_file("Dockerfile", &text, NULL, &err) == CS_OK, "%s", err.message);
    char *lines = logical_lines(text);
    free(text);
    char *hc = strstr(lines, "HEALTHCHECK");
    ck_assert_ptr_nonnull(hc);
    char *cmd = strstr(hc, "CMD [");
    ck_assert_ptr_nonnull(cmd);
    char *end = strchr(cmd, '\n');
    if (end)
        *end = '\0';
    json_error_t jerr;
    json_t *arr = json_loads(cmd + 4, 0, &jerr);
    ck_assert_msg(json_is_array(arr), "HEALTHCHECK CMD is not a JSON array: %s", jerr.text);
    ck_assert_str_eq(json_string_value(json_array_get(arr, 0)), "/bin/bash");
    char *script = strdup(json_string_value(json_array_get(arr, 2)));
    json_decref(arr);
    free(lines);
    return script;
}

/* Issue 12: the health check probes the port the daemon actually bound
 * (here an ephemeral one from --port 0, while COLLSYNTH_PORT says 8470),
 * read from the file the daemon writes once it listens (--url-file). */
START_TEST(healthcheck_follows_the_port_actually_bound)
{
    char *script = healthcheck_script();
    char dir[] = "/tmp/cs-hc-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char url_file[300];
    snprintf(url_file, sizeof url_file, "%s/collsynthd.url", dir);
    const char *extra[] = {"--url-file", url_file, NULL};
    cs_daemon d;
    ck_assert_int_eq(daemon_start(&d, NULL, NULL, extra), 0);
    ck_assert_int_ne(d.port, 8470);
    char *url = NULL;
    cs_error err;
    ck_assert_int_eq(cs_read_file(url_file, &url, NULL, &err), CS_OK);
    char want[64];
    snprintf(want, sizeof want, "http://127.0.0.1:%d\n", d.port);
    ck_assert_str_eq(url, want);
    free(url);
    setenv("COLLSYNTH_URL_FILE", url_file, 1);
    setenv("COLLSYNTH_PORT", "8470", 1);
    char *argv[] = {"/bin/bash", "-c", script, NULL};
    int status = -1;
    pid_t pid = fork();
    if (pid == 0) {
        execv(argv[0], argv);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 0, "health check failed (%d)",
                  status);
    /* stopped: the file is gone and the check fails */
    ck_assert_int_eq(daemon_stop(&d), 0);
    ck_assert_int_ne(access(url_file, F_OK), 0);
    pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 2);
        execv(argv[0], argv);
        _exit(127);
    }
    waitpid(pid, &status, 0);
    ck_assert(!(WIFEXITED(status) && WEXITSTATUS(status) == 0));
    rmdir(dir);
    free(script);
}
END_TEST

static Suite *dockerfile_suite(void)
{
    Suite *s = suite_create("dockerfile");
    TCase *tc = tcase_create("dockerfile");
    tcase_add_test(tc, parser_reads_stages_and_install_words);
    tcase_add_test(tc, build_stage_installs_exactly_the_build_list);
    tcase_add_test(tc, runtime_stage_installs_exactly_the_runtime_list);
    tcase_add_test(tc, runtime_stage_is_non_root_with_volume_port_and_healthcheck);
    tcase_add_test(tc, dockerignore_keeps_build_outputs_out);
    tcase_add_test(tc, healthcheck_follows_the_port_actually_bound);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(dockerfile_suite)
