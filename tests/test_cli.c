/* Tests of the collsynth command-line tool: runs the built binary
 * ($BUILD/collsynth, default build/collsynth) as a subprocess and checks its
 * output and exit codes (0 ok, 1 negative result, 2 usage/input error). */
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "cluster_testutil.h"
#include "msccl_interp.h"
#include "synthesize.h"

typedef struct run_result {
    int code;
    char *out;
    char *err;
} run_result;

static char tmpdir[256];

static const char *cli_path(void)
{
    static char path[512];
    const char *build = getenv("BUILD");
    snprintf(path, sizeof path, "%s/collsynth", build && *build ? build : "build");
    return path;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    size_t got = fread(buf, 1, (size_t)n, f);
    buf[got] = '\0';
    fclose(f);
    return buf;
}

/* Runs the CLI with the NULL-terminated arguments; stdin from stdin_path or
 * /dev/null. */
static run_result run_in(const char *stdin_path, const char *arg0, ...)
{
    const char *argv[32];
    int n = 0;
    argv[n++] = cli_path();
    va_list ap;
    va_start(ap, arg0);
    for (const char *a = arg0; a && n < 31; a = va_arg(ap, const char *))
        argv[n++] = a;
    va_end(ap);
    argv[n] = NULL;
    char outp[300], errp[300];
    snprintf(outp, sizeof outp, "%s/out", tmpdir);
    snprintf(errp, sizeof errp, "%s/err", tmpdir);
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        int in = open(stdin_path ? stdin_path : "/dev/null", O_RDONLY);
        int o = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int e = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(in, 0);
        dup2(o, 1);
        dup2(e, 2);
        execv(argv[0], (char *const *)argv);
        _exit(127);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    run_result r = {WIFEXITED(status) ? WEXITSTATUS(status) : 128, slurp(outp), slurp(errp)};
    return r;
}

#define run(...) run_in(NULL, __VA_ARGS__, (const char *)NULL)

static void run_free(run_result *r)
{
    free(r->out);
    free(r->err);
}

static void setup(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/collsynth-cli-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    ck_assert_msg(access(cli_path(), X_OK) == 0, "%s is not built", cli_path());
}

static void teardown(void)
{
    char cmd[400];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", tmpdir);
}

static char *tmpfile_path(const char *name)
{
    static char path[4][400];
    static int k = 0;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", tmpdir, name);
    return path[k];
}

START_TEST(global_help_lists_commands_and_exit_codes)
{
    run_result r = run("--help");
    ck_assert_int_eq(r.code, 0);
    const char *cmds[] = {"topo", "verify", "simulate", "baseline", "baselines"};
    for (int i = 0; i < 5; i++) {
        ck_assert_msg(strstr(r.out, cmds[i]), "help lacks %s", cmds[i]);
        run_result h = run(cmds[i], "--help");
        ck_assert_msg(h.code == 0, "%s --help exit %d", cmds[i], h.code);
        ck_assert_ptr_nonnull(strstr(h.out, "Usage: collsynth"));
        run_free(&h);
    }
    ck_assert_ptr_nonnull(strstr(r.out, "Exit codes"));
    run_free(&r);
    /* the global --server option is accepted before any command */
    r = run("--server", "http://127.0.0.1:1", "topo", "show", "ring:4");
    ck_assert_int_eq(r.code, 0);
    run_free(&r);
    r = run("--server");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--server"));
    run_free(&r);
    r = run("help", "verify");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "verify [TOPOLOGY] ALGORITHM"));
    run_free(&r);
}
END_TEST

START_TEST(usage_errors_exit_2_and_name_the_argument)
{
    run_result r = run_in(NULL, NULL);
    ck_assert_int_eq(r.code, 2);
    run_free(&r);
    r = run("frobnicate");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "frobnicate"));
    run_free(&r);
    r = run("--bogus", "topo");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--bogus"));
    run_free(&r);
    r = run("verify", "dgx1");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "missing ALGORITHM"));
    run_free(&r);
    r = run("simulate", "dgx1", "x.json", "--size", "12XB");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--size"));
    run_free(&r);
    r = run("baseline", "ring", "dgx1", "allgather", "--chunks");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--chunks"));
    run_free(&r);
    r = run("baseline", "ring", "dgx1", "allgather", "--root", "2");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--root"));
    run_free(&r);
    r = run("baseline", "no-such-baseline", "dgx1", "allgather");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "no-such-baseline"));
    run_free(&r);
    r = run("baseline", "ring", "dgx1", "allsorts");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "allsorts"));
    run_free(&r);
    r = run("topo", "show", "nosuchtopo:3");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "nosuchtopo"));
    run_free(&r);
    r = run("baseline", "ring", "ring:4", "broadcast", "--root", "7");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "root"));
    run_free(&r);
}
END_TEST

START_TEST(topo_show_summary_and_json)
{
    /* DGX-1: 8 GPUs, 4 NVLink neighbours each (6 NVLinks), diameter 2 */
    run_result r = run("topo", "show", "dgx1");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "ranks      8"));
    ck_assert_ptr_nonnull(strstr(r.out, "diameter   2 hops"));
    ck_assert_ptr_nonnull(strstr(r.out, "egress lanes 6..6"));
    ck_assert_ptr_nonnull(strstr(r.out, "groups     2"));
    run_free(&r);
    /* a ring of 5: 10 directed links, diameter 2 */
    r = run("topo", "show", "ring:5");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "links      10 directed"));
    ck_assert_ptr_nonnull(strstr(r.out, "diameter   2 hops"));
    run_free(&r);
    r = run("topo", "show", "ring:5", "--json");
    ck_assert_int_eq(r.code, 0);
    json_error_t jerr;
    json_t *doc = json_loads(r.out, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "ranks")), 5);
    ck_assert(json_is_array(json_object_get(doc, "links")));
    /* the JSON form is itself a topology the CLI accepts from a file */
    char *path = tmpfile_path("ring5.json");
    json_dump_file(doc, path, 0);
    json_decref(doc);
    run_free(&r);
    r = run("topo", "show", path);
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "ranks      5"));
    run_free(&r);
    r = run("topo", "list");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "dgx1"));
    ck_assert_ptr_nonnull(strstr(r.out, "torus2d:AxB"));
    run_free(&r);
}
END_TEST

START_TEST(baseline_verify_roundtrip_and_tampering)
{
    char *alg = tmpfile_path("ag.json");
    run_result r = run("baseline", "ring", "ring:4", "allgather", "-o", alg);
    ck_assert_int_eq(r.code, 0);
    run_free(&r);
    json_error_t jerr;
    json_t *doc = json_load_file(alg, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "method")), "ring");
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "ranks")), 4);
    /* ring allgather on 4 ranks: 3 steps, 4 * 3 sends */
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "steps")), 3);
    ck_assert_int_eq(json_array_size(json_object_get(doc, "sends")), 12);
    r = run("verify", "ring:4", alg);
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "valid"));
    run_free(&r);
    /* stdin */
    r = run_in(alg, "verify", "ring:4", "-", NULL);
    ck_assert_int_eq(r.code, 0);
    run_free(&r);
    /* drop the last send: some rank misses a chunk */
    json_t *sends = json_object_get(doc, "sends");
    json_array_remove(sends, json_array_size(sends) - 1);
    char *bad = tmpfile_path("bad.json");
    json_dump_file(doc, bad, 0);
    json_decref(doc);
    r = run("verify", "ring:4", bad);
    ck_assert_int_eq(r.code, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "invalid"));
    ck_assert_ptr_nonnull(strstr(r.out, "never reaches"));
    run_free(&r);
    r = run("verify", "ring:4", bad, "--json");
    ck_assert_int_eq(r.code, 1);
    doc = json_loads(r.out, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    ck_assert(json_is_false(json_object_get(doc, "valid")));
    ck_assert_int_ge(json_integer_value(json_object_get(doc, "problems")), 1);
    json_decref(doc);
    run_free(&r);
    /* on a topology without the links the ring uses (line:4 lacks 3->0) */
    r = run("verify", "line:4", alg);
    ck_assert_int_eq(r.code, 1);
    ck_assert_ptr_nonnull(strstr(r.out, "no link"));
    run_free(&r);
    /* unusable inputs are input errors */
    r = run("verify", "ring:4", tmpfile_path("missing.json"));
    ck_assert_int_eq(r.code, 2);
    run_free(&r);
    char *junk = tmpfile_path("junk.json");
    FILE *f = fopen(junk, "w");
    fputs("{\"ranks\": ", f);
    fclose(f);
    r = run("verify", "ring:4", junk);
    ck_assert_int_eq(r.code, 2);
    run_free(&r);
}
END_TEST

START_TEST(baseline_collective_forms_and_negative_results)
{
    /* a JSON collective with its root: the broadcast starts at rank 3 */
    run_result r = run("baseline", "binomial-tree", "fc:4", "{\"kind\":\"broadcast\",\"root\":3}");
    ck_assert_int_eq(r.code, 0);
    json_error_t jerr;
    json_t *doc = json_loads(r.out, 0, &jerr);
    ck_assert_ptr_nonnull(doc);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "collective"),
                                                        "root")),
                     3);
    json_t *s0 = json_array_get(json_object_get(doc, "sends"), 0);
    ck_assert_int_eq(json_integer_value(json_object_get(s0, "src")), 3);
    json_decref(doc);
    run_free(&r);
    /* --root and --chunks */
    r = run("baseline", "ring", "ring:4", "reduce", "--root", "2", "--chunks", "3");
    ck_assert_int_eq(r.code, 0);
    doc = json_loads(r.out, 0, &jerr);
    ck_assert_int_eq(json_integer_value(json_object_get(doc, "chunks")), 3);
    json_decref(doc);
    run_free(&r);
    /* no algorithm: ring has no alltoall; RD allreduce needs partner links */
    r = run("baseline", "ring", "dgx1", "alltoall");
    ck_assert_int_eq(r.code, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "alltoall"));
    run_free(&r);
    r = run("baseline", "recursive-doubling", "ring:8", "allreduce");
    ck_assert_int_eq(r.code, 1);
    run_free(&r);
    r = run("baselines");
    ck_assert_int_eq(r.code, 0);
    const char *names[] = {"ring", "rings", "direct", "recursive-doubling", "recursive-halving",
                           "binomial-tree", "double-binary-tree", "bine-tree",
                           "bine-butterfly"};
    for (int i = 0; i < 9; i++)
        ck_assert_msg(strstr(r.out, names[i]), "baselines lacks %s", names[i]);
    run_free(&r);
}
END_TEST

START_TEST(simulate_reports_time_and_links)
{
    char *alg = tmpfile_path("ar.json");
    run_result r = run("baseline", "ring", "ring:4", "allgather", "-o", alg);
    ck_assert_int_eq(r.code, 0);
    run_free(&r);
    r = run("simulate", "ring:4", alg, "--size", "1MiB");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "time"));
    ck_assert_ptr_nonnull(strstr(r.out, "ratio_to_bound"));
    ck_assert_ptr_nonnull(strstr(r.out, "tacos ideal"));
    ck_assert_ptr_nonnull(strstr(r.out, "0->1"));
    ck_assert_ptr_nonnull(strstr(r.out, "1048576 bytes per rank"));
    run_free(&r);
    /* size suffixes: 1KiB = 1024 bytes, 2K = 2000 bytes; one chunk per rank */
    const char *sizes[][2] = {{"1KiB", "1024"}, {"2K", "2000"}, {"1.5MB", "1500000"},
                              {"3", "3"}};
    for (int i = 0; i < 4; i++) {
        r = run("simulate", "ring:4", alg, "--json", "--size", sizes[i][0]);
        ck_assert_int_eq(r.code, 0);
        json_error_t jerr;
        json_t *doc = json_loads(r.out, 0, &jerr);
        ck_assert_ptr_nonnull(doc);
        ck_assert_double_eq(json_real_value(json_object_get(doc, "chunk_bytes")),
                            atof(sizes[i][1]));
        ck_assert(json_real_value(json_object_get(doc, "time_us")) > 0);
        ck_assert_int_eq(json_array_size(json_object_get(doc, "links")), 4); /* r -> r+1 only */
        json_decref(doc);
        run_free(&r);
    }
    /* an invalid algorithm is not simulated */
    r = run("simulate", "line:4", alg);
    ck_assert_int_eq(r.code, 1);
    ck_assert_ptr_nonnull(strstr(r.err, "invalid"));
    run_free(&r);
}
END_TEST


/* Issue 12: on 2-lane links busy_us was the sum over lanes, above the total
 * time; it is the mean over lanes now (the sum is lane_busy_us).  And the
 * ratio is ratio_to_bound = bound / time, as everywhere. */
START_TEST(simulate_busy_is_per_lane_and_ratio_is_bound_over_time)
{
    char *alg = tmpfile_path("rings.json");
    run_result r = run("baseline", "rings", "dgx1", "allgather", "-o", alg);
    ck_assert_int_eq(r.code, 0);
    /* the baseline's summary names the ratio too */
    ck_assert_ptr_nonnull(strstr(r.err, "ratio_to_bound"));
    run_free(&r);
    r = run("simulate", "dgx1", alg, "--json", "--size", "64MiB");
    ck_assert_int_eq(r.code, 0);
    json_t *doc = json_loads(r.out, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    double time = json_number_value(json_object_get(doc, "time_us"));
    /* DGX-1 allgather: a GPU receives 7 x 64 MiB over 6 NVLinks of 25 GB/s,
     * after at least one 0.7 us alpha: 0.7 + 7 x 67108864 / 150e3 us */
    double bound = json_number_value(json_object_get(doc, "bound_us"));
    ck_assert(fabs(bound - (0.7 + 7 * 67108864.0 / 150e3)) < 1e-6);
    double ratio = json_number_value(json_object_get(doc, "ratio_to_bound"));
    ck_assert(fabs(ratio - bound / time) < 1e-12);
    ck_assert(ratio > 0.5 && ratio <= 1.0);
    ck_assert_ptr_null(json_object_get(doc, "ratio"));
    int two_lane = 0, summed_above = 0;
    json_t *links = json_object_get(doc, "links");
    for (size_t i = 0; i < json_array_size(links); i++) {
        json_t *l = json_array_get(links, i);
        double busy = json_number_value(json_object_get(l, "busy_us"));
        double lanes_busy = json_number_value(json_object_get(l, "lane_busy_us"));
        int lanes = (int)json_integer_value(json_object_get(l, "lanes"));
        ck_assert(busy <= time * (1 + 1e-12));
        ck_assert(fabs(lanes_busy - busy * lanes) <= 1e-9 * lanes_busy);
        two_lane += lanes == 2;
        summed_above += lanes_busy > time;
    }
    ck_assert_int_gt(two_lane, 0);
    ck_assert_int_gt(summed_above, 0);   /* what the old column showed */
    json_decref(doc);
    run_free(&r);
    /* the table: every busy_us at most the time */
    r = run("simulate", "dgx1", alg, "--size", "64MiB");
    ck_assert_int_eq(r.code, 0);
    const char *p = strstr(r.out, "busy_us");
    ck_assert_ptr_nonnull(p);
    int rows = 0;
    for (p = strchr(p, '\n'); p && p[1]; p = strchr(p + 1, '\n')) {
        char name[32];
        int lanes;
        double gbps, busy, util;
        if (sscanf(p + 1, "%31s %d %lf %lf %lf", name, &lanes, &gbps, &busy, &util) == 5) {
            ck_assert(busy <= time * (1 + 1e-6));
            rows++;
        }
    }
    ck_assert_int_gt(rows, 0);
    run_free(&r);
}
END_TEST

/* Issue 11: a TACOS schedule for a cluster written as Topology JSON (an
 * NVSwitch per node, rail switches between nodes) passes `verify` and
 * `simulate` on that same file: a switch port is one resource for every
 * method, however TACOS unwound the switches to match on them. */
START_TEST(tacos_cluster_schedule_simulates_on_the_callers_topology)
{
    char *topo = tmpfile_path("cluster.json"), *alg = tmpfile_path("ag.json");
    char *doc = cluster_topology_json(16, 8, 450.0, 50.0);
    FILE *f = fopen(topo, "w");
    ck_assert_ptr_nonnull(f);
    fputs(doc, f);
    fclose(f);
    free(doc);
    run_result r = run("solve", topo, "allgather", "--method", "tacos", "--output", alg);
    ck_assert_msg(r.code == 0, "solve: %s", r.err);
    run_free(&r);
    r = run("verify", topo, alg);
    ck_assert_msg(r.code == 0, "verify: %s%s", r.out, r.err);
    run_free(&r);
    r = run("simulate", topo, alg, "--size", "1GiB");
    ck_assert_msg(r.code == 0, "simulate: %s", r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "1073741824 bytes per rank"));
    run_free(&r);
}
END_TEST

/* `solve --format msccl-xml` prints code that runs: the interpreter executes
 * the document and checks the allgather's result; the report goes to stderr. */
START_TEST(solve_format_msccl_xml_runs_in_the_interpreter)
{
    run_result r = run("solve", "dgx1", "allgather", "--quiet", "--format", "msccl-xml",
                       "--size", "1GiB");
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_assert_ptr_nonnull(strstr(r.err, "bandwidth"));   /* the frontier table */
    ck_assert_ptr_nonnull(strstr(r.err, "time bound"));  /* with the bound and ratios */
    ck_assert_ptr_nonnull(strstr(r.err, "ratio_to_bound"));
    ck_assert_ptr_null(strstr(r.out, "bandwidth"));
    cs_msccl_doc *doc = NULL;
    cs_error err;
    ck_assert_msg(msccl_doc_parse(r.out, strlen(r.out), &doc, &err) == CS_OK, "%s", err.message);
    ck_assert_int_eq(msccl_doc_ngpus(doc), 8);
    /* at 1 GiB the bandwidth-optimal (C=6) point wins: 6 chunks per rank, 48 in all */
    ck_assert_int_eq(msccl_doc_nchunksperloop(doc), 48);
    cs_msccl_interp_options io;
    msccl_interp_options_default(&io);
    ck_assert_msg(msccl_interp_check(doc, &io, NULL, &err) == CS_OK, "%s", err.message);
    msccl_doc_free(doc);
    run_free(&r);

    /* TACOS through the same path, into a file */
    const char *cu = tmpfile_path("ring.cu");
    r = run("solve", "ring:8", "allgather", "--method", "tacos", "--format", "cuda", "-o", cu);
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    char *text = slurp(cu);
    ck_assert_ptr_nonnull(strstr(text, "__global__"));
    free(text);
    run_free(&r);

    r = run("solve", "dgx1", "allgather", "--format", "bogus");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "bogus"));
    run_free(&r);
}
END_TEST

/* Results above 100,000 sends are written compact as they are produced
 * (memory does not grow with them); smaller ones stay indented.  Either way
 * the document parses and its algorithm verifies. */
START_TEST(large_results_are_streamed_compact)
{
    const char *big = tmpfile_path("big.json");
    run_result r = run("solve", "mesh2d:18x18", "allgather", "--method", "tacos", "--json");
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_assert(strncmp(r.out, "{\"method\":", 10) == 0); /* compact */
    json_t *doc = json_loads(r.out, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    json_t *a0 = json_array_get(json_object_get(doc, "frontier"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(a0, "sends")), 324 * 323);
    json_decref(doc);
    run_free(&r);
    /* --output: the algorithm's own document, which verify reads back */
    r = run("solve", "mesh2d:18x18", "allgather", "--method", "tacos", "--output", big);
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    run_free(&r);
    r = run("verify", "mesh2d:18x18", big);
    ck_assert_msg(r.code == 0, "exit %d: %s %s", r.code, r.out, r.err);
    run_free(&r);
    /* small: indented as before */
    r = run("solve", "mesh2d:4x4", "allgather", "--method", "tacos", "--json");
    ck_assert_int_eq(r.code, 0);
    ck_assert(strncmp(r.out, "{\n  \"method\":", 13) == 0);
    run_free(&r);
}
END_TEST


/* Issue 12: `solve` runs through the service's dispatcher: auto by default
 * (and accepted by name), with the service's reason and the service's key
 * for the same request. */
START_TEST(solve_defaults_to_auto_with_the_services_key)
{
    run_result r = run("solve", "ring:4", "allgather", "--quiet");
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "reason: auto: 4 ranks"));
    cs_synth_request *req = NULL;
    cs_error err;
    const char *body = "{\"topology\":\"ring:4\",\"collective\":{\"kind\":\"allgather\"}}";
    ck_assert_int_eq(synth_request_parse(body, strlen(body), NULL, &req, &err), CS_OK);
    char want[80];
    snprintf(want, sizeof want, "key:    %s", req->key);
    ck_assert_msg(strstr(r.out, want), "no '%s' in:\n%s", want, r.out);
    synth_request_free(req);
    run_free(&r);
    r = run("solve", "ring:4", "allgather", "--method", "auto", "--quiet");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "reason: auto:"));
    run_free(&r);
    /* too large for SMT: auto takes TACOS, and says so */
    r = run("solve", "torus2d:8x8", "allgather", "--quiet");
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "tacos allgather on torus2d:8x8"));
    ck_assert_ptr_nonnull(strstr(r.out, "reason: auto: 64 ranks > smt limit 16; tacos"));
    run_free(&r);
    /* a baseline by name, and an option that is not the method's */
    r = run("solve", "ring:4", "allgather", "--method", "ring", "--quiet");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "reason: baseline ring requested"));
    run_free(&r);
    r = run("solve", "ring:4", "allgather", "--method", "smt", "--trials", "3");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "--trials is a TACOS option"));
    run_free(&r);
}
END_TEST

/* Issue 12: every method shows progress on a terminal (--progress forces
 * the status line when stderr is a file, as here); without it, and off a
 * terminal, no status line is drawn. */
START_TEST(solve_shows_progress_for_every_method)
{
    const char *methods[] = {"tacos", "ring", "smt"};
    for (int i = 0; i < 3; i++) {
        run_result r = run("solve", "ring:6", "allgather", "--method", methods[i], "--progress");
        ck_assert_msg(r.code == 0, "%s: exit %d: %s", methods[i], r.code, r.err);
        ck_assert_msg(strstr(r.err, "\r\033[K[") && strstr(r.err, "s] "),
                      "%s: no status line in '%s'", methods[i], r.err);
        ck_assert_msg(strstr(r.err, methods[i]), "%s: the line does not name the method",
                      methods[i]);
        run_free(&r);
    }
    run_result r = run("solve", "ring:6", "allgather", "--method", "tacos");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_null(strchr(r.err, '\r'));
    run_free(&r);
    /* on a real terminal (script(1) gives the CLI a pty) the line is drawn
     * without --progress */
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "TERM=xterm script -qec '%s solve ring:6 allgather --method tacos' "
             "/dev/null > %s/tty.out 2>&1", cli_path(), tmpdir);
    ck_assert_int_eq(system(cmd), 0);
    char *tty = slurp(tmpfile_path("tty.out"));
    ck_assert_msg(strstr(tty, "\r\033[K[") && strstr(tty, "tacos"), "no status line: %s", tty);
    free(tty);
}
END_TEST

/* Issue 12: verify and simulate read what `solve -o` writes (a Result):
 * every frontier algorithm, or one with --index. */
START_TEST(verify_and_simulate_accept_a_result)
{
    char *res = tmpfile_path("dgx1-ag.json");
    run_result r = run("solve", "dgx1", "allgather", "--method", "smt", "--k", "4", "--quiet",
                       "-o", res);
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    run_free(&r);
    json_t *doc = json_load_file(res, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    size_t n = json_array_size(json_object_get(doc, "frontier"));
    json_decref(doc);
    ck_assert_int_eq(n, 2);  /* (2,3,2) and (3,7,6) at k = 4 */
    r = run("verify", "dgx1", res);
    ck_assert_msg(r.code == 0, "exit %d: %s %s", r.code, r.out, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "[0] valid: smt allgather"));
    ck_assert_ptr_nonnull(strstr(r.out, "[1] valid: smt allgather"));
    run_free(&r);
    r = run("verify", "dgx1", res, "--index", "1", "--json");
    ck_assert_int_eq(r.code, 0);
    doc = json_loads(r.out, 0, NULL);
    ck_assert(json_is_true(json_object_get(doc, "valid")));
    json_t *algs = json_object_get(doc, "algorithms");
    ck_assert_int_eq(json_array_size(algs), 1);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(algs, 0), "index")), 1);
    json_decref(doc);
    run_free(&r);
    r = run("verify", "dgx1", res, "--index", "2");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "has 2 algorithms"));
    run_free(&r);
    /* on the wrong topology every algorithm is invalid: exit 1 */
    r = run("verify", "ring:8", res);
    ck_assert_int_eq(r.code, 1);
    run_free(&r);
    r = run("simulate", "dgx1", res, "--json", "--size", "1MiB");
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    doc = json_loads(r.out, 0, NULL);
    algs = json_object_get(doc, "algorithms");
    ck_assert_int_eq(json_array_size(algs), 2);
    for (size_t i = 0; i < 2; i++) {
        json_t *a = json_array_get(algs, i);
        ck_assert_int_eq(json_integer_value(json_object_get(a, "index")), (json_int_t)i);
        ck_assert(json_number_value(json_object_get(a, "time_us")) > 0);
        double ratio = json_number_value(json_object_get(a, "ratio_to_bound"));
        ck_assert(ratio > 0 && ratio <= 1.0);
    }
    json_decref(doc);
    run_free(&r);
    r = run("simulate", "dgx1", res, "--index", "0");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "2 steps, 3 rounds"));
    ck_assert_ptr_null(strstr(r.out, "3 steps, 7 rounds"));
    run_free(&r);
}
END_TEST

/* Issue 12: one decided instance is not a "complete frontier"; a searched
 * frontier says its class. */
START_TEST(solve_says_what_it_decided)
{
    run_result r = run("solve", "ring:4", "allgather", "--steps", "3", "--rounds", "3",
                       "--chunks", "1", "--quiet");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "one instance decided: an algorithm exists"));
    ck_assert_ptr_null(strstr(r.out, "complete"));
    run_free(&r);
    r = run("solve", "ring:4", "allgather", "--method", "smt", "--k", "3", "--quiet");
    ck_assert_int_eq(r.code, 0);
    ck_assert_ptr_nonnull(strstr(r.out, "complete frontier (k=3, C<=8)"));
    run_free(&r);
}
END_TEST

/* Issue 12: -o is --output for every method; TACOS writes the Result. */
START_TEST(solve_tacos_takes_dash_o)
{
    char *res = tmpfile_path("t.json");
    run_result r = run("solve", "ring:8", "allgather", "--method", "tacos", "-o", res, "--quiet");
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "tacos allgather on ring:8"));
    run_free(&r);
    json_t *doc = json_load_file(res, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    ck_assert_str_eq(json_string_value(json_object_get(doc, "method")), "tacos");
    ck_assert_int_eq(json_array_size(json_object_get(doc, "frontier")), 1);
    json_decref(doc);
    r = run("verify", "ring:8", res);
    ck_assert_int_eq(r.code, 0);
    run_free(&r);
}
END_TEST

/* Issue 12: --frontier-dir creates its directory, or says why it cannot;
 * a missing input is reported as missing, not as a bad format. */
START_TEST(codegen_frontier_dir_and_missing_input)
{
    char *res = tmpfile_path("ag.json");
    run_result r = run("solve", "dgx1", "allgather", "--method", "smt", "--quiet", "-o", res);
    ck_assert_int_eq(r.code, 0);
    run_free(&r);
    char *dir = tmpfile_path("algos/job42");
    r = run("codegen", res, "--format", "msccl-xml", "--frontier-dir", dir);
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    ck_assert_ptr_nonnull(strstr(r.out, "MSCCL_XML_FILES="));
    ck_assert_ptr_nonnull(strstr(r.out, dir));
    run_free(&r);
    /* a component that is a file */
    char *blocked = tmpfile_path("ag.json/sub");
    r = run("codegen", res, "--format", "msccl-xml", "--frontier-dir", blocked);
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "is not a directory"));
    run_free(&r);
    r = run("codegen", tmpfile_path("nope.json"), "--format", "msccl-xml", "--frontier-dir", dir);
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "No such file"));
    ck_assert_ptr_null(strstr(r.err, "needs a Result"));
    run_free(&r);
}
END_TEST

/* Issue 12: a misspelt topology or collective suggests the nearest name. */
START_TEST(typos_suggest_the_nearest_name)
{
    run_result r = run("solve", "torsu2d:4x4", "allgather");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "did you mean 'torus2d:4x4'?"));
    run_free(&r);
    r = run("solve", "ring:4", "allgathr");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "did you mean 'allgather'?"));
    run_free(&r);
    r = run("baseline", "ring", "ring:4", "alltoal");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "did you mean 'alltoall'?"));
    run_free(&r);
    r = run("solve", "ring:4", "allgather", "--method", "tacso");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "did you mean 'tacos'?"));
    run_free(&r);
    r = run("baseline", "rnig", "ring:4", "allgather");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "did you mean 'ring'?"));
    run_free(&r);
    /* the service names the nearest method too */
    cs_synth_request *req = NULL;
    cs_error err;
    const char *body = "{\"topology\":\"ring:4\",\"collective\":\"allgather\",\"method\":\"smtt\"}";
    ck_assert_int_eq(synth_request_parse(body, strlen(body), NULL, &req, &err), CS_EINVAL);
    ck_assert_msg(strstr(err.message, "did you mean \"smt\"?"), "%s", err.message);
    /* KIND:ROOT names a rooted collective's root */
    r = run("solve", "ring:4", "broadcast:2", "--method", "tacos", "--json", "--quiet");
    ck_assert_msg(r.code == 0, "exit %d: %s", r.code, r.err);
    json_t *doc = json_loads(r.out, 0, NULL);
    ck_assert_int_eq(json_integer_value(json_object_get(json_object_get(doc, "collective"),
                                                        "root")), 2);
    json_decref(doc);
    run_free(&r);
    r = run("slove", "ring:4", "allgather");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_nonnull(strstr(r.err, "did you mean 'solve'?"));
    run_free(&r);
    /* nothing close: no suggestion */
    r = run("solve", "ring:4", "frobnicate");
    ck_assert_int_eq(r.code, 2);
    ck_assert_ptr_null(strstr(r.err, "did you mean"));
    run_free(&r);
}
END_TEST

static Suite *cli_suite(void)
{
    Suite *s = suite_create("cli");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, global_help_lists_commands_and_exit_codes);
    tcase_add_test(tc, usage_errors_exit_2_and_name_the_argument);
    tcase_add_test(tc, topo_show_summary_and_json);
    tcase_add_test(tc, baseline_verify_roundtrip_and_tampering);
    tcase_add_test(tc, baseline_collective_forms_and_negative_results);
    tcase_add_test(tc, simulate_reports_time_and_links);
    tcase_add_test(tc, simulate_busy_is_per_lane_and_ratio_is_bound_over_time);
    tcase_add_test(tc, tacos_cluster_schedule_simulates_on_the_callers_topology);
    tcase_add_test(tc, solve_format_msccl_xml_runs_in_the_interpreter);
    tcase_add_test(tc, large_results_are_streamed_compact);
    tcase_add_test(tc, solve_defaults_to_auto_with_the_services_key);
    tcase_add_test(tc, solve_shows_progress_for_every_method);
    tcase_add_test(tc, verify_and_simulate_accept_a_result);
    tcase_add_test(tc, solve_says_what_it_decided);
    tcase_add_test(tc, solve_tacos_takes_dash_o);
    tcase_add_test(tc, codegen_frontier_dir_and_missing_input);
    tcase_add_test(tc, typos_suggest_the_nearest_name);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(cli_suite)
