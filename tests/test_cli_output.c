/*
 * Tests of the CLI's output files (-o FILE, clients/cli/cli_output.c): a
 * file appears only complete.  The reproducers of the audit (2026-11-26):
 *
 *  - `collsynth get BADKEY -o FILE` removed an existing FILE when the server
 *    answered 404 (or could not be reached);
 *  - Ctrl-C while `solve -o FILE` wrote its document left a truncated FILE
 *    (265 MB of a 1.9 GB mesh2d:64x64 result) that looks like a result;
 *  - a write error part way (a full disk; here the file-size limit, which
 *    fails writes with EFBIG deterministically) left a truncated FILE too,
 *    and replaced the FILE that was there before.
 *
 * Each runs the built binary as a user would and looks at the file system
 * afterwards: FILE holds its old content or the whole new document, and no
 * temporary ".FILE.*" stays behind.  The remote case uses the real daemon
 * (tests/clients_helpers.h).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "clients_helpers.h"
#include "tacos.h"

static char tmpdir[256];
static char cli[512];

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/collsynth-out-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    snprintf(cli, sizeof cli, "%s/collsynth", cs_test_build_dir());
    ck_assert_msg(access(cli, X_OK) == 0, "%s is not built", cli);
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* Names in tmpdir starting with ".NAME." (the writer's temporary files). */
static int leftover_temps(const char *name, char *first, size_t n)
{
    char prefix[300];
    snprintf(prefix, sizeof prefix, ".%s.", name);
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    int count = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            if (count++ == 0 && first)
                snprintf(first, n, "%s", e->d_name);
        }
    closedir(d);
    return count;
}

/* The size of the largest file in tmpdir named NAME or ".NAME.*", -1 none. */
static long output_size(const char *name)
{
    char prefix[300];
    snprintf(prefix, sizeof prefix, ".%s.", name);
    DIR *d = opendir(tmpdir);
    ck_assert_ptr_nonnull(d);
    long best = -1;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, name) == 0 || strncmp(e->d_name, prefix, strlen(prefix)) == 0) {
            char p[700];
            struct stat st;
            snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
            if (stat(p, &st) == 0 && st.st_size > best)
                best = st.st_size;
        }
    closedir(d);
    return best;
}

/* A write error part way: `ulimit -f` makes every write past 64 KiB fail
 * with EFBIG (SIGXFSZ ignored, as a full disk's ENOSPC would fail it).
 * Both writers: the indented one (baseline, small results) and the
 * streamed one (solve, over 100000 sends). */
START_TEST(a_failed_write_leaves_the_old_file_and_no_temporary)
{
    const char *cases[][2] = {
        {"baseline ring ring:64 allgather", "b.json"},
        {"solve ring:400 allgather --method tacos --quiet", "s.json"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char path[400], cmd[1200];
        snprintf(path, sizeof path, "%s/%s", tmpdir, cases[k][1]);
        write_text(path, "the old document\n");
        snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 128; %s %s -o '%s'", cli,
                 cases[k][0], path);
        char *out = NULL, *err = NULL;
        int rc = cs_test_sh(cmd, &out, &err);
        ck_assert_msg(rc == 2, "%s: exit %d (want 2, a write error): %s", cases[k][0], rc, err);
        ck_assert_msg(strstr(err, "File too large") != NULL, "%s: the cause is not named: %s",
                      cases[k][0], err);
        char *now = slurp(path);
        ck_assert_msg(now && strcmp(now, "the old document\n") == 0,
                      "%s: FILE was changed by a failed write (%zu bytes now)", cases[k][0],
                      now ? strlen(now) : 0);
        char tmpname[300] = "";
        ck_assert_msg(leftover_temps(cases[k][1], tmpname, sizeof tmpname) == 0,
                      "%s: temporary file %s left behind", cases[k][0], tmpname);
        free(now);
        free(out);
        free(err);
        /* and without the limit the whole document replaces the old one */
        snprintf(cmd, sizeof cmd, "%s %s -o '%s'", cli, cases[k][0], path);
        rc = cs_test_sh(cmd, &out, &err);
        ck_assert_msg(rc == 0, "%s: exit %d: %s", cases[k][0], rc, err);
        json_error_t jerr;
        json_t *doc = json_load_file(path, 0, &jerr);
        ck_assert_msg(doc != NULL, "%s: not a whole document: %s", cases[k][0], jerr.text);
        json_decref(doc);
        ck_assert_int_eq(leftover_temps(cases[k][1], NULL, 0), 0);
        free(out);
        free(err);
    }
}
END_TEST

/* Runs argv (the CLI) writing tmpdir/name over an old document, sends SIGINT
 * once more than the old content exists under FILE or its temporary name,
 * and checks the aftermath: the process died of SIGINT (the shell's 130),
 * FILE keeps what it held, no temporary file stays. */
static void interrupt_while_writing(const char *name, const char *const *argv)
{
    char path[400];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    write_text(path, "the old document\n");
    long old_size = (long)strlen("the old document\n");
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        signal(SIGINT, SIG_DFL);
        execv(cli, (char *const *)argv);
        _exit(127);
    }
    bool caught = false;
    struct timespec tick = {0, 500000};
    for (int i = 0; i < 120000 && !caught; i++) {
        long sz = output_size(name);
        if (sz > old_size + 4096) {
            kill(pid, SIGINT);
            caught = true;
        } else {
            int st;
            if (waitpid(pid, &st, WNOHANG) == pid)
                ck_abort_msg("%s finished before it could be interrupted (exit %d)", argv[1],
                             WIFEXITED(st) ? WEXITSTATUS(st) : -1);
            nanosleep(&tick, NULL);
        }
    }
    ck_assert_msg(caught, "%s: the output never started", argv[1]);
    int status = 0;
    ck_assert_int_eq(waitpid(pid, &status, 0), pid);
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT,
                  "%s: not ended by SIGINT (status 0x%x)", argv[1], status);
    char *now = slurp(path);
    ck_assert_msg(now && strcmp(now, "the old document\n") == 0,
                  "%s: FILE was replaced by a partial document (%zu bytes)", argv[1],
                  now ? strlen(now) : 0);
    free(now);
    char tmpname[300] = "";
    ck_assert_msg(leftover_temps(name, tmpname, sizeof tmpname) == 0,
                  "%s: temporary file %s left behind", argv[1], tmpname);
}

/* Ctrl-C while solve -o writes its document.  ring:1024 TACOS is over a
 * million sends (about 110 MB of JSON), so the write lasts long enough to
 * be caught in the act by polling. */
START_TEST(ctrl_c_while_writing_leaves_no_truncated_file)
{
    char path[400];
    snprintf(path, sizeof path, "%s/big.json", tmpdir);
    const char *argv[] = {cli,      "solve",   "ring:1024", "allgather", "--method", "tacos",
                          "--quiet", "--trials", "1",        "-o",        path,       NULL};
    interrupt_while_writing("big.json", argv);
}
END_TEST

/* Ctrl-C while codegen -o streams MSCCL XML (62 MB for ring:512, generated
 * as it is written): it left its ".FILE.XXXXXX" behind. */
START_TEST(ctrl_c_during_codegen_leaves_no_temporary)
{
    char res[400], cmd[1200];
    snprintf(res, sizeof res, "%s/r512.json", tmpdir);
    snprintf(cmd, sizeof cmd, "%s solve ring:512 allgather --method tacos --trials 1 --quiet -o '%s'",
             cli, res);
    char *out = NULL, *err = NULL;
    ck_assert_int_eq(cs_test_sh(cmd, &out, &err), 0);
    free(out);
    free(err);
    char path[400];
    snprintf(path, sizeof path, "%s/r512.xml", tmpdir);
    const char *argv[] = {cli, "codegen", res, "--format", "msccl-xml", "-o", path, NULL};
    interrupt_while_writing("r512.xml", argv);
}
END_TEST

/* `get KEY -o FILE`: a refused download (unknown key: 404) or an
 * unreachable server never touch FILE; a good one replaces it. */
START_TEST(get_never_removes_the_file_it_was_asked_to_write)
{
    cs_test_daemon d;
    char *why = NULL;
    int up = cs_test_daemon_start(&d, NULL, &why);
    ck_assert_msg(up == 0, "collsynthd did not start:\n%s", why ? why : "");
    free(why);
    char path[400], cmd[1500];
    snprintf(path, sizeof path, "%s/allgather.xml", tmpdir);
    write_text(path, "<algo the user's own document/>\n");
    char *out = NULL, *err = NULL;
    snprintf(cmd, sizeof cmd,
             "%s --server %s get 0000000000000000000000000000000000000000000000000000000000000000"
             " --format msccl-xml -o '%s'", cli, d.url, path);
    int rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 1, "exit %d: %s", rc, err);
    ck_assert_ptr_nonnull(strstr(err, "404"));
    char *now = slurp(path);
    ck_assert_msg(now != NULL, "get removed FILE after a 404");
    ck_assert_str_eq(now, "<algo the user's own document/>\n");
    free(now);
    free(out);
    free(err);
    /* unreachable */
    snprintf(cmd, sizeof cmd, "%s --server http://127.0.0.1:1 get %064d -o '%s'", cli, 0, path);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 3, "exit %d: %s", rc, err);
    now = slurp(path);
    ck_assert_msg(now != NULL, "get removed FILE when the server was unreachable");
    ck_assert_str_eq(now, "<algo the user's own document/>\n");
    free(now);
    free(out);
    free(err);
    /* a stored result replaces it, whole (a baseline: answered within wait_s) */
    snprintf(cmd, sizeof cmd,
             "%s --server %s submit ring:4 allgather --method ring --option wait_s=30 --json",
             cli, d.url);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    json_t *doc = json_loads(out, 0, NULL);
    ck_assert_msg(doc != NULL, "not JSON: %s", out);
    const char *key = json_string_value(json_object_get(doc, "key"));
    ck_assert_msg(key != NULL && strlen(key) == 64, "no key in: %.300s", out);
    free(out);
    free(err);
    /* the summary writes the ratio's size as sizes are written ("at 64MiB",
     * the default bound_bytes), not "at 6.71089e+07 bytes" */
    snprintf(cmd, sizeof cmd, "%s --server %s submit ring:4 allgather --method ring", cli, d.url);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(out, "ratio_to_bound") && strstr(out, " at 64MiB\n"),
                  "size not written as a size: %s", out);
    free(out);
    free(err);
    snprintf(cmd, sizeof cmd, "%s --server %s get %s --format msccl-xml -o '%s'", cli, d.url,
             key, path);
    json_decref(doc);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    now = slurp(path);
    ck_assert_ptr_nonnull(now);
    ck_assert_msg(strncmp(now, "<algo ", 6) == 0 && strstr(now, "</algo>") != NULL,
                  "not the whole document: %.200s", now);
    free(now);
    free(out);
    free(err);
    ck_assert_int_eq(leftover_temps("allgather.xml", NULL, 0), 0);
    cs_test_daemon_stop(&d);
}
END_TEST

/* A download whose write fails part way (the file-size limit: EFBIG at
 * the failing write, as ENOSPC on a full disk) names the write's own cause,
 * taken at the failing call: it said "out of disk space?" whatever the cause
 * was.  FILE keeps its old content and no temporary file stays. */
START_TEST(get_names_the_cause_of_a_failed_write)
{
    cs_test_daemon d;
    char *why = NULL;
    int up = cs_test_daemon_start(&d, NULL, &why);
    ck_assert_msg(up == 0, "collsynthd did not start:\n%s", why ? why : "");
    free(why);
    char path[400], cmd[1500];
    char *out = NULL, *err = NULL;
    /* ring:64 allgather: 4032 sends, a document of some hundred KB */
    snprintf(cmd, sizeof cmd,
             "%s --server %s submit ring:64 allgather --method ring --option wait_s=30 --json",
             cli, d.url);
    int rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    json_t *doc = json_loads(out, 0, NULL);
    ck_assert_msg(doc != NULL, "not JSON: %s", out);
    char key[80];
    snprintf(key, sizeof key, "%s", json_string_value(json_object_get(doc, "key")));
    json_decref(doc);
    free(out);
    free(err);
    snprintf(path, sizeof path, "%s/result.json", tmpdir);
    write_text(path, "the old document\n");
    snprintf(cmd, sizeof cmd, "trap '' XFSZ; ulimit -f 32; %s --server %s get %s -o '%s'", cli,
             d.url, key, path);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 2, "exit %d (want 2, a write error): %s", rc, err);
    ck_assert_msg(strstr(err, "File too large") != NULL, "the cause is not named: %s", err);
    ck_assert_msg(strstr(err, "out of disk space?") == NULL, "a guessed cause: %s", err);
    char *now = slurp(path);
    ck_assert_msg(now && strcmp(now, "the old document\n") == 0, "FILE was changed");
    free(now);
    ck_assert_int_eq(leftover_temps("result.json", NULL, 0), 0);
    free(out);
    free(err);
    cs_test_daemon_stop(&d);
}
END_TEST

/* What a command prints on standard output is checked too: solve's summary
 * and the help into a full device (/dev/full: every write ENOSPC) exited 0
 * with nothing written; now exit 2 naming the cause.  Into a file: exit 0
 * and nothing said. */
START_TEST(a_failed_write_to_standard_output_is_an_error)
{
    const char *cmds[] = {"solve ring:40 allgather --method tacos --quiet", "--help"};
    for (int k = 0; k < 2; k++) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "%s %s > /dev/full", cli, cmds[k]);
        char *out = NULL, *err = NULL;
        int rc = cs_test_sh(cmd, &out, &err);
        ck_assert_msg(rc == 2, "%s: exit %d (want 2): %s", cmds[k], rc, err);
        ck_assert_msg(strstr(err, "standard output") && strstr(err, "No space left on device"),
                      "%s: %s", cmds[k], err);
        free(out);
        free(err);
    }
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s --help > '%s/help.txt'", cli, tmpdir);
    char *out = NULL, *err = NULL;
    ck_assert_int_eq(cs_test_sh(cmd, &out, &err), 0);
    ck_assert_str_eq(err, "");
    free(out);
    free(err);
}
END_TEST

/* solve -o into a directory that does not exist is refused before the
 * synthesis runs, not after it (a long solve lost at the very end). */
START_TEST(solve_refuses_an_unwritable_output_before_solving)
{
    char path[400], cmd[1200];
    snprintf(path, sizeof path, "%s/no/such/dir/out.json", tmpdir);
    /* SMT on torus2d:4x4 with a 20 s budget: far longer than the refusal */
    snprintf(cmd, sizeof cmd,
             "%s solve torus2d:4x4 allreduce --method smt --time-limit 20 --quiet -o '%s'", cli,
             path);
    char *out = NULL, *err = NULL;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = cs_test_sh(cmd, &out, &err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "No such file or directory") != NULL, "cause not named: %s", err);
    ck_assert_msg(secs < 5, "refused only after %.1f s of solving", secs);
    free(out);
    free(err);
    /* a directory given as FILE */
    snprintf(cmd, sizeof cmd, "%s baseline ring ring:4 allgather -o '%s'", cli, tmpdir);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "is a directory") != NULL, "%s", err);
    free(out);
    free(err);
}
END_TEST

/* solve --help states the TACOS trials default the library uses (it said
 * 16 while tacos_options_default() runs 4). */
START_TEST(solve_help_states_the_librarys_trials_default)
{
    char cmd[700];
    snprintf(cmd, sizeof cmd, "%s solve --help", cli);
    char *out = NULL, *err = NULL;
    ck_assert_int_eq(cs_test_sh(cmd, &out, &err), 0);
    const char *line = strstr(out, "--trials N");
    ck_assert_ptr_nonnull(line);
    const char *d = strstr(line, "(default ");
    ck_assert_ptr_nonnull(d);
    cs_tacos_options opt;
    tacos_options_default(&opt);
    ck_assert_int_eq(atoi(d + strlen("(default ")), opt.trials);
    free(out);
    free(err);
}
END_TEST

/* The report's reason line carries the SMT search's own reason whole: auto
 * cut it at 150 characters and --method smt at 200, so the README's first
 * `solve dgx1 allgather` ended "...; 4 unsat instances o".  The same search
 * runs under both methods: the text after each method's prefix must agree,
 * and it is the one smt.c writes (ends with "keep its frontier" when it
 * counts unsat instances outside the class). */
static char *solve_reason(const char *method)
{
    char cmd[800];
    snprintf(cmd, sizeof cmd, "%s solve dgx1 allgather --method %s --quiet --json", cli, method);
    char *out = NULL, *err = NULL;
    int rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "solve --method %s: exit %d: %s", method, rc, err);
    json_t *doc = json_loads(out, 0, NULL);
    ck_assert_msg(doc != NULL, "not JSON: %.200s", out);
    char *reason = strdup(json_string_value(json_object_get(doc, "reason")));
    json_decref(doc);
    free(out);
    free(err);
    return reason;
}

START_TEST(the_reason_line_carries_the_smt_reason_whole)
{
    char *a = solve_reason("auto");
    char *m = solve_reason("smt");
    const char *sa = strstr(a, "); smt: ");
    const char *sm = strstr(m, "requested; smt: ");
    ck_assert_msg(sa && sm, "reasons without the SMT part:\n%s\n%s", a, m);
    sa += strlen("); ");
    sm += strlen("requested; ");
    ck_assert_msg(strcmp(sa, sm) == 0, "the SMT reason differs:\nauto: %s\nsmt:  %s", sa, sm);
    if (strstr(sa, "unsat instance"))
        ck_assert_msg(strstr(sa, "keep its frontier") != NULL, "cut short: %s", sa);
    free(a);
    free(m);
}
END_TEST

/* Ctrl-C during an SMT search ends `collsynth solve` at once.  Z3 installed
 * its own SIGINT handler around each check, which cancelled only that
 * instance: the search went on with the next one, and the audit's Ctrl-C
 * at 3 s of torus2d:6x6 took effect never (the run ended by itself after
 * 156 s, exit 0).  No -o FILE appears. */
START_TEST(ctrl_c_stops_an_smt_search)
{
    char path[400];
    snprintf(path, sizeof path, "%s/smt.json", tmpdir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_RDWR);
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        signal(SIGINT, SIG_DFL);
        execl(cli, cli, "solve", "torus2d:6x6", "allgather", "--method", "smt", "--max-chunks",
              "8", "--k", "6", "--quiet", "-o", path, (char *)NULL);
        _exit(127);
    }
    struct timespec two = {2, 0}, tick = {0, 50000000};
    nanosleep(&two, NULL);
    kill(pid, SIGINT);
    int status = 0;
    bool ended = false;
    for (int i = 0; i < 200 && !ended; i++) { /* 10 s */
        if (waitpid(pid, &status, WNOHANG) == pid)
            ended = true;
        else
            nanosleep(&tick, NULL);
    }
    if (!ended) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ck_abort_msg("solve still searching 10 s after Ctrl-C");
    }
    ck_assert_msg(WIFSIGNALED(status) && WTERMSIG(status) == SIGINT,
                  "not ended by SIGINT (status 0x%x)", status);
    ck_assert_msg(access(path, F_OK) != 0, "an output file appeared");
    ck_assert_int_eq(leftover_temps("smt.json", NULL, 0), 0);
}
END_TEST

/* A FILE its owner made read-only is not replaced: fopen("w") refused it,
 * and the temporary-file-and-rename writer must not quietly replace it
 * (rename ignores the file's own mode).  As root every file is writable,
 * so the CLI runs as nobody then. */
START_TEST(a_read_only_file_is_not_replaced)
{
    char path[400], cmd[2600];
    snprintf(path, sizeof path, "%s/ro.json", tmpdir);
    write_text(path, "the old document\n");
    char *out = NULL, *err = NULL;
    if (geteuid() == 0) {
        snprintf(cmd, sizeof cmd, "chmod 777 '%s' && chown nobody '%s' && chmod 444 '%s' && "
                 "runuser -u nobody -- %s baseline ring ring:4 allgather -o '%s'",
                 tmpdir, path, path, cli, path);
    } else {
        snprintf(cmd, sizeof cmd, "chmod 444 '%s' && %s baseline ring ring:4 allgather -o '%s'",
                 path, cli, path);
    }
    int rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 2, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "Permission denied") != NULL, "%s", err);
    char *now = slurp(path);
    ck_assert_msg(now && strcmp(now, "the old document\n") == 0, "the read-only FILE was replaced");
    free(now);
    free(out);
    free(err);
}
END_TEST

/* -o onto a symbolic link writes the file it names (as fopen("w") did),
 * keeping the link: algos/current.xml -> v3.xml stays a link; and an
 * existing file keeps its mode. */
START_TEST(a_symbolic_link_is_written_through)
{
    char target[400], link[400], cmd[1400];
    snprintf(target, sizeof target, "%s/v3.json", tmpdir);
    snprintf(link, sizeof link, "%s/current.json", tmpdir);
    write_text(target, "the old document\n");
    ck_assert_int_eq(symlink("v3.json", link), 0);
    snprintf(cmd, sizeof cmd, "%s baseline ring ring:4 allgather -o '%s'", cli, link);
    char *out = NULL, *err = NULL;
    int rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the link was replaced by a file");
    json_t *doc = json_load_file(target, 0, NULL);
    ck_assert_msg(doc != NULL, "the linked file does not hold the new document");
    json_decref(doc);
    ck_assert_int_eq(leftover_temps("v3.json", NULL, 0), 0);
    free(out);
    free(err);
    /* a private FILE stays private when it is replaced */
    ck_assert_int_eq(chmod(target, 0600), 0);
    rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_int_eq(stat(target, &st), 0);
    ck_assert_msg((st.st_mode & 0777) == 0600, "mode %o after -o (was 0600)",
                  (unsigned)(st.st_mode & 0777));
    free(out);
    free(err);
}
END_TEST

/* A link whose file does not exist yet (out.json -> results/out.json, the
 * first run): fopen("w") created the named file through the link, and so
 * must -o, keeping the link (it was replaced by a regular file, and the
 * named file never appeared). */
START_TEST(a_dangling_link_is_written_through)
{
    char dir[400], target[400], link[400], cmd[1400];
    snprintf(dir, sizeof dir, "%s/results", tmpdir);
    ck_assert_int_eq(mkdir(dir, 0700), 0);
    snprintf(target, sizeof target, "%s/results/new.json", tmpdir);
    snprintf(link, sizeof link, "%s/new.json", tmpdir);
    ck_assert_int_eq(symlink("results/new.json", link), 0);
    snprintf(cmd, sizeof cmd, "%s baseline ring ring:4 allgather -o '%s'", cli, link);
    char *out = NULL, *err = NULL;
    int rc = cs_test_sh(cmd, &out, &err);
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    struct stat st;
    ck_assert_int_eq(lstat(link, &st), 0);
    ck_assert_msg(S_ISLNK(st.st_mode), "the link was replaced by a file");
    json_t *doc = json_load_file(target, 0, NULL);
    ck_assert_msg(doc != NULL, "the linked file was not written");
    json_decref(doc);
    ck_assert_int_eq(leftover_temps("new.json", NULL, 0), 0);
    free(out);
    free(err);
}
END_TEST

static Suite *cli_output_suite(void)
{
    Suite *s = suite_create("cli_output");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, a_failed_write_leaves_the_old_file_and_no_temporary);
    tcase_add_test(tc, ctrl_c_while_writing_leaves_no_truncated_file);
    tcase_add_test(tc, ctrl_c_during_codegen_leaves_no_temporary);
    tcase_add_test(tc, ctrl_c_stops_an_smt_search);
    tcase_add_test(tc, a_read_only_file_is_not_replaced);
    tcase_add_test(tc, a_symbolic_link_is_written_through);
    tcase_add_test(tc, a_dangling_link_is_written_through);
    tcase_add_test(tc, get_never_removes_the_file_it_was_asked_to_write);
    tcase_add_test(tc, get_names_the_cause_of_a_failed_write);
    tcase_add_test(tc, a_failed_write_to_standard_output_is_an_error);
    tcase_add_test(tc, solve_refuses_an_unwritable_output_before_solving);
    tcase_add_test(tc, solve_help_states_the_librarys_trials_default);
    tcase_add_test(tc, the_reason_line_carries_the_smt_reason_whole);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(cli_output_suite)
