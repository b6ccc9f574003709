/*
 * Tests of the Slurm launch hook (clients/slurm/).
 *
 * Unit part: cluster.c (no Slurm or network dependency; linked from the
 * test helper library): host lists, allocation topologies, frontier size ranges and
 * the XML byte-range stamp, each against hand-derived values.
 *
 * End-to-end part: clients/slurm/e2e.sh starts munge, slurmctld, slurmd (a
 * real Slurm on loopback, in a temporary directory) and the real collsynthd,
 * runs srun with the plugin loaded, and records what each task saw.  The
 * checks here read those records: with the daemon up, the task sees
 * MSCCL_XML_FILES / NCCL_ALGO / MSCCL_ALGO_DIR and the XML files with
 * contiguous byte ranges (the daemon requires a token: the hook sends the one
 * in token_file); two nodes compose one topology; with the daemon down or
 * hanging, the cluster file unreadable or the token refused, the task still
 * runs with one warning line and no variables; the nodes stay usable.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check_main.h"
#include "cs_common.h"

#include "../clients/slurm/cluster.h"

/* ---- unit tests -------------------------------------------------------------------- */

START_TEST(hostlist_expands_ranges_padding_and_plain_names)
{
    char **names;
    char msg[128];
    int n = hostlist_expand("gpu[01-03,7],login1", &names, msg, sizeof msg);
    ck_assert_int_eq(n, 5);
    ck_assert_str_eq(names[0], "gpu01");
    ck_assert_str_eq(names[2], "gpu03");
    ck_assert_str_eq(names[3], "gpu7");
    ck_assert_str_eq(names[4], "login1");
    hostlist_free(names, n);
    n = hostlist_expand("localhost", &names, msg, sizeof msg);
    ck_assert_int_eq(n, 1);
    ck_assert_str_eq(names[0], "localhost");
    hostlist_free(names, n);
    ck_assert_int_eq(hostlist_expand("gpu[1-3", &names, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "without ']'"));
    ck_assert_int_eq(hostlist_expand("gpu[5-2]", &names, msg, sizeof msg), -1);
}
END_TEST

static json_t *fetch_pair(void *ctx, const char *name, char *msg, size_t msglen)
{
    int *calls = ctx;
    (*calls)++;
    if (strcmp(name, "pair") != 0) {
        snprintf(msg, msglen, "no builtin %s", name);
        return NULL;
    }
    /* two GPUs joined both ways, 2 lanes of 25 GB/s */
    return json_loads("{\"name\":\"pair\",\"ranks\":2,\"links\":[{\"src\":0,\"dst\":1,"
                      "\"lanes\":2,\"gbps\":25.0,\"alpha_us\":0.7,\"bidirectional\":true}]}",
                      0, NULL);
}

START_TEST(two_nodes_on_a_switch_fabric)
{
    json_t *cluster = json_loads(
        "{\"name\":\"lab\",\"node_types\":{\"p\":{\"topology\":\"pair\",\"nics\":[1]}},"
        "\"nodes\":[{\"names\":\"n[1-2]\",\"type\":\"p\"}],"
        "\"fabric\":{\"kind\":\"switch\",\"gbps\":10.0,\"alpha_us\":4.0}}", 0, NULL);
    ck_assert_ptr_nonnull(cluster);
    char *nodes[] = {"n1", "n2"};
    json_t *topo, *expanded;
    char msg[256];
    int calls = 0;
    ck_assert_int_eq(cluster_build_topology(cluster, nodes, 2, fetch_pair, &calls, &topo,
                                            &expanded, msg, sizeof msg), 0);
    ck_assert_int_eq(calls, 1); /* one fetch per builtin name */
    ck_assert_int_eq(json_integer_value(json_object_get(topo, "ranks")), 4);
    json_t *links = json_object_get(topo, "links");
    ck_assert_int_eq(json_array_size(links), 2);
    /* node 2's link is offset by 2 ranks */
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(links, 1), "src")), 2);
    ck_assert_int_eq(json_integer_value(json_object_get(json_array_get(links, 1), "dst")), 3);
    json_t *sw = json_array_get(json_object_get(topo, "switches"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(sw, "ranks")), 2);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(sw, "ranks"), 0)), 1);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(sw, "ranks"), 1)), 3);
    ck_assert_int_eq(json_array_size(json_object_get(topo, "groups")), 2);
    /* each node knows its block of ranks: what it asks the daemon's slice for */
    int first = -1, last = -1;
    ck_assert_int_eq(cluster_node_ranks(expanded, 0, &first, &last), 0);
    ck_assert(first == 0 && last == 1);
    ck_assert_int_eq(cluster_node_ranks(expanded, 1, &first, &last), 0);
    ck_assert(first == 2 && last == 3);
    ck_assert_int_eq(cluster_node_ranks(expanded, 2, &first, &last), -1);
    json_t *odd = json_loads("{\"groups\":[[0,2],[1,3]]}", 0, NULL);
    ck_assert_int_eq(cluster_node_ranks(odd, 0, &first, &last), -1); /* not a block */
    json_decref(odd);
    /* alpha = the fabric's 4 us; beta from its 10 GB/s, the slowest lane */
    double alpha, beta;
    cluster_alpha_beta(expanded, &alpha, &beta);
    ck_assert_double_eq_tol(alpha, 4.0, 1e-12);
    ck_assert_double_eq_tol(beta, 1.0 / 10e3, 1e-15);
    json_decref(topo);
    json_decref(expanded);

    /* one node: the builtin's name goes to the server as is */
    ck_assert_int_eq(cluster_build_topology(cluster, nodes, 1, fetch_pair, &calls, &topo,
                                            &expanded, msg, sizeof msg), 0);
    ck_assert(json_is_string(topo));
    ck_assert_str_eq(json_string_value(topo), "pair");
    json_decref(topo);
    json_decref(expanded);

    /* a node the description does not know */
    char *stranger[] = {"n1", "x9"};
    ck_assert_int_eq(cluster_build_topology(cluster, stranger, 2, fetch_pair, &calls, &topo,
                                            &expanded, msg, sizeof msg), -1);
    ck_assert_ptr_nonnull(strstr(msg, "x9"));
    json_decref(cluster);
}
END_TEST

START_TEST(three_nodes_on_a_ring_fabric)
{
    json_t *cluster = json_loads(
        "{\"node_types\":{\"p\":{\"topology\":\"pair\"}},\"nodes\":[{\"names\":\"*\",\"type\":\"p\"}],"
        "\"fabric\":{\"kind\":\"ring\"}}", 0, NULL);
    char *nodes[] = {"a", "b", "c"};
    json_t *topo, *expanded;
    char msg[256];
    int calls = 0;
    ck_assert_int_eq(cluster_build_topology(cluster, nodes, 3, fetch_pair, &calls, &topo,
                                             &expanded, msg, sizeof msg), 0);
    /* 3 intra-node links + 3 node pairs x 2 NICs per node */
    ck_assert_int_eq(json_array_size(json_object_get(topo, "links")), 3 + 3 * 2);
    ck_assert_int_eq(json_integer_value(json_object_get(topo, "ranks")), 6);
    ck_assert_ptr_null(json_object_get(topo, "switches"));
    json_decref(topo);
    json_decref(expanded);
    json_decref(cluster);
}
END_TEST

static json_t *fetch_any(void *ctx, const char *name, char *msg, size_t msglen)
{
    (void)ctx;
    (void)msg;
    (void)msglen;
    ck_assert_str_eq(name, "dgx1");
    /* 8 ranks on a ring stands in for the builtin here */
    json_t *links = json_array();
    for (int i = 0; i < 8; i++)
        json_array_append_new(links, json_pack("{s:i, s:i, s:b}", "src", i, "dst", (i + 1) % 8,
                                               "bidirectional", 1));
    return json_pack("{s:s, s:i, s:o}", "name", "dgx1", "ranks", 8, "links", links);
}

START_TEST(example_cluster_description_builds)
{
    json_error_t jerr;
    json_t *cluster = json_load_file("clients/slurm/cluster.example.json", 0, &jerr);
    ck_assert_msg(cluster != NULL, "line %d: %s", jerr.line, jerr.text);
    char *nodes[] = {"gpu007", "gpu008", "edge3"};
    json_t *topo, *expanded;
    char msg[256];
    ck_assert_msg(cluster_build_topology(cluster, nodes, 3, fetch_any, NULL, &topo, &expanded,
                                         msg, sizeof msg) == 0, "%s", msg);
    /* 8 + 8 + 4 ranks; the fabric switch joins 4 + 4 + 1 NIC ranks */
    ck_assert_int_eq(json_integer_value(json_object_get(topo, "ranks")), 20);
    json_t *sw = json_array_get(json_object_get(topo, "switches"), 0);
    ck_assert_int_eq(json_array_size(json_object_get(sw, "ranks")), 9);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(sw, "ranks"), 4)), 8);
    ck_assert_int_eq(json_integer_value(json_array_get(json_object_get(sw, "ranks"), 8)), 16);
    json_decref(topo);
    json_decref(expanded);
    json_decref(cluster);
}
END_TEST

/* A cluster file saved by a Windows editor starts with a UTF-8 byte-order
 * mark: the hook refused it ("'[' or '{' expected near '<BOM>'") while
 * every other JSON input of collsynth takes it.  And a file that is not a
 * description says so with its name and line. */
START_TEST(cluster_file_with_a_byte_order_mark_loads)
{
    char *text = NULL;
    size_t len = 0;
    cs_error err;
    ck_assert_int_eq(cs_read_file("clients/slurm/cluster.example.json", &text, &len, &err), CS_OK);
    char dir[] = "/tmp/test_slurm_bom_XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    fputs("\xEF\xBB\xBF", f);
    fwrite(text, 1, len, f);
    fclose(f);
    char msg[256] = "";
    json_t *cluster = cluster_load_file(path, msg, sizeof msg);
    ck_assert_msg(cluster != NULL, "%s", msg);
    json_t *want = json_loadb(text, len, 0, NULL);
    ck_assert(json_equal(cluster, want));
    char *nodes[] = {"gpu007", "edge3"};
    json_t *topo, *expanded;
    ck_assert_msg(cluster_build_topology(cluster, nodes, 2, fetch_any, NULL, &topo, &expanded,
                                         msg, sizeof msg) == 0, "%s", msg);
    ck_assert_int_eq(json_integer_value(json_object_get(topo, "ranks")), 12);
    json_decref(topo);
    json_decref(expanded);
    json_decref(cluster);
    json_decref(want);
    /* what is not a description names the file and the problem */
    f = fopen(path, "wb");
    fputs("{\n\"nodes\": [}\n", f);
    fclose(f);
    ck_assert_ptr_null(cluster_load_file(path, msg, sizeof msg));
    ck_assert_msg(strstr(msg, path) != NULL && strstr(msg, "line 2") != NULL, "%s", msg);
    f = fopen(path, "wb");
    fputs("[1, 2]", f);
    fclose(f);
    ck_assert_ptr_null(cluster_load_file(path, msg, sizeof msg));
    ck_assert_msg(strstr(msg, "not a JSON object") != NULL, "%s", msg);
    snprintf(path, sizeof path, "%s/missing.json", dir);
    ck_assert_ptr_null(cluster_load_file(path, msg, sizeof msg));
    ck_assert_msg(strstr(msg, path) != NULL && strstr(msg, "No such file") != NULL, "%s", msg);
    remove(path);
    snprintf(path, sizeof path, "%s/cluster.json", dir);
    remove(path);
    rmdir(dir);
    free(text);
}
END_TEST

/* plugstack.conf is the hook's configuration file: a misspelled key was
 * only "unknown plugstack argument 'clustr'"; the nearest key is named, as
 * collsynthd does for its flags.  Every key the hook documents is known. */
START_TEST(plugstack_arguments_name_the_nearest_key)
{
    static const char *const known[] = {"server", "token_file", "cluster", "collectives",
                                        "timeout", "method", "tmpdir", "options", "gpus",
                                        "root", "gpu_sms"};
    char msg[256], arg[64];
    const char *v = NULL;
    bool seen[CLUSTER_ARG_COUNT] = {false};
    for (size_t i = 0; i < sizeof known / sizeof *known; i++) {
        snprintf(arg, sizeof arg, "%s=x%zu", known[i], i);
        int k = cluster_plugstack_arg(arg, &v, msg, sizeof msg);
        ck_assert_msg(k >= 0 && k < CLUSTER_ARG_COUNT && !seen[k], "%s: %d", arg, k);
        seen[k] = true;
        ck_assert_str_eq(v, strchr(arg, '=') + 1);
    }
    ck_assert_int_eq(cluster_plugstack_arg("clustr=/etc/c.json", &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "unknown plugstack argument 'clustr' (did you mean cluster?)");
    ck_assert_int_eq(cluster_plugstack_arg("tokenfile=/etc/t", &v, msg, sizeof msg), -1);
    ck_assert_msg(strstr(msg, "did you mean token_file?") != NULL, "%s", msg);
    ck_assert_int_eq(cluster_plugstack_arg("frobnicate=1", &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "unknown plugstack argument 'frobnicate'");
    ck_assert_int_eq(cluster_plugstack_arg("server", &v, msg, sizeof msg), -1);
    ck_assert_str_eq(msg, "plugstack argument 'server' is not key=value");
}
END_TEST

static json_t *alg(int steps, int rounds, int chunks)
{
    return json_pack("{s:i, s:i, s:i}", "steps", steps, "rounds", rounds, "chunks", chunks);
}

START_TEST(frontier_ranges_split_at_the_crossover)
{
    /* cost0 = 2a + 3 L b, cost1 = 3a + 1.5 L b, with a = 0.5 us, b = 1/(50e3) us/B:
     * equal at L = a / (1.5 b) = 16666.67 bytes.  (3, 6, 1) is never best. */
    json_t *fr = json_pack("[o, o, o]", alg(2, 3, 1), alg(3, 3, 2), alg(3, 6, 1));
    size_range r[8];
    int n = frontier_size_ranges(fr, 0.5, 1.0 / 50e3, r, 8);
    ck_assert_int_eq(n, 2);
    ck_assert_int_eq(r[0].index, 0);
    ck_assert_uint_eq(r[0].min_bytes, 0);
    ck_assert_uint_eq(r[0].max_bytes, 16667);
    ck_assert_int_eq(r[1].index, 1);
    ck_assert_uint_eq(r[1].min_bytes, 16667);
    ck_assert_uint_eq(r[1].max_bytes, 0); /* no upper limit */
    unsigned long long p0 = size_range_probe(&r[0]), p1 = size_range_probe(&r[1]);
    ck_assert(p0 < 16667);
    ck_assert(p1 >= 16667);
    json_decref(fr);

    /* a single algorithm covers everything */
    fr = json_pack("[o]", alg(4, 4, 1));
    n = frontier_size_ranges(fr, 0.5, 1e-5, r, 8);
    ck_assert_int_eq(n, 1);
    ck_assert_uint_eq(r[0].min_bytes, 0);
    ck_assert_uint_eq(r[0].max_bytes, 0);
    json_decref(fr);
}
END_TEST

START_TEST(xml_byte_range_replaces_existing_attributes)
{
    const char *xml = "<?xml version=\"1.0\"?>\n<algo name=\"a\" minBytes=\"5\" ngpus=\"4\" "
                      "maxBytes=\"0\" coll=\"allgather\">\n<gpu id=\"0\"/>\n</algo>\n";
    char *out = xml_set_byte_range(xml, 1024, 0);
    ck_assert_ptr_nonnull(out);
    ck_assert_ptr_nonnull(strstr(out, "<algo minBytes=\"1024\" maxBytes=\"1099511627776\" name=\"a\" ngpus=\"4\" coll=\"allgather\">"));
    ck_assert_ptr_null(strstr(out, "minBytes=\"5\""));
    ck_assert_ptr_nonnull(strstr(out, "<gpu id=\"0\"/>"));
    free(out);
    ck_assert_ptr_null(xml_set_byte_range("<algorithm/>", 0, 0));
}
END_TEST

/* ---- end to end in a real Slurm ----------------------------------------------------- */

/* A long refusal goes out whole, line by line: the pieces joined with one
 * space give back the text, none is wider than asked, cuts fall on spaces,
 * and a word wider than a line (a URL) is cut without splitting a UTF-8
 * character.  The refusal is a daemon-sized one, well past the 512
 * characters the hook's warning used to be cut at. */
START_TEST(long_messages_split_into_whole_lines)
{
    char msg[2400];
    int n = snprintf(msg, sizeof msg, "GET /v1/results/abc?alg=1&runtime=msccl&format=msccl-xml"
                     "&gpu_sms=1: HTTP 422 limit");
    for (int k = 0; n < 2000; k++)
        n += snprintf(msg + n, sizeof msg - (size_t)n, " rank %d needs %d thread blocks;", k,
                      100 + k);
    snprintf(msg + n, sizeof msg - (size_t)n, " (no MSCCL XML for allgather) TAIL");
    char joined[2400] = "";
    size_t jl = 0, lines = 0;
    for (const char *p = msg; *p;) {
        size_t k = cluster_line_piece(p, 400);
        ck_assert_uint_ge(k, 1);
        ck_assert_uint_le(k, 400);
        ck_assert_msg(p[k] == ' ' || p[k] == '\0', "cut inside a word at %zu", k);
        jl += (size_t)snprintf(joined + jl, sizeof joined - jl, "%s%.*s", jl ? " " : "", (int)k,
                               p);
        lines++;
        p += k;
        while (*p == ' ')
            p++;
    }
    ck_assert_str_eq(joined, msg);
    ck_assert_uint_ge(lines, 5);
    ck_assert_ptr_nonnull(strstr(joined, "TAIL"));
    /* fits: all of it */
    ck_assert_uint_eq(cluster_line_piece("short", 400), 5);
    ck_assert_uint_eq(cluster_line_piece("", 400), 0);
    /* no space: cut at the width, but never inside "\xc3\xa9" (e-acute) */
    ck_assert_uint_eq(cluster_line_piece("abcdefgh", 4), 4);
    ck_assert_uint_eq(cluster_line_piece("abc\xc3\xa9" "fgh", 4), 3);
    ck_assert_uint_eq(cluster_line_piece("ab cdefgh", 4), 2);
}
END_TEST

static char out_dir[256];
static int e2e_status = -1;

static const char *build_dir(void)
{
    const char *b = getenv("BUILD");
    return b != NULL && b[0] != '\0' ? b : "build";
}

static void run_e2e(void)
{
    if (e2e_status != -1)
        return;
    snprintf(out_dir, sizeof out_dir, "/tmp/collsynth-test-slurm.XXXXXX");
    if (mkdtemp(out_dir) == NULL) {
        e2e_status = 126;
        return;
    }
    /* Slurm skips a missing "optional" plugin without a word: without this
     * check every scenario would run with no hook and only fail obliquely. */
    char plugin[512];
    snprintf(plugin, sizeof plugin, "%s/slurm/collsynth_spank.so", build_dir());
    if (access(plugin, R_OK) != 0) {
        fprintf(stderr, "the SPANK plugin %s is not built\n", plugin);
        e2e_status = 127;
        return;
    }
    char cmd[1024];
    snprintf(cmd, sizeof cmd,
             "clients/slurm/e2e.sh %s %s/slurm/collsynth_spank.so %s/collsynthd >%s/e2e.log 2>&1",
             out_dir, build_dir(), build_dir(), out_dir);
    int rc = system(cmd);
    e2e_status = WIFEXITED(rc) ? WEXITSTATUS(rc) : 128;
}

static char *record(const char *scenario, const char *ext)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s%s%s", out_dir, scenario, ext[0] ? "." : "", ext);
    char *text = NULL;
    cs_error err;
    if (cs_read_file(path, &text, NULL, &err) != CS_OK) {
        char *log = NULL;
        snprintf(path, sizeof path, "%s/e2e.log", out_dir);
        cs_read_file(path, &log, NULL, &err);
        ck_abort_msg("no record %s.%s; e2e.log:\n%s", scenario, ext, log ? log : "(none)");
    }
    return text;
}

static int count_lines_with(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void setup_e2e(void)
{
    run_e2e();
}

/* The records stay for a look when the script itself failed. */
static void teardown_e2e(void)
{
    if (e2e_status == 0 && out_dir[0] != '\0') {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", out_dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", out_dir);
    }
}

START_TEST(e2e_ran)
{
    ck_assert_msg(e2e_status == 0, "e2e.sh exited %d (see %s/e2e.log)", e2e_status, out_dir);
    free(record("node_state", ""));
}
END_TEST

/* The value of `NAME=` in a task's output ("" when absent); caller frees. */
static char *env_value(const char *out, const char *name)
{
    char key[64];
    snprintf(key, sizeof key, "%s=", name);
    const char *p = out;
    while ((p = strstr(p, key)) != NULL) {
        if (p == out || p[-1] == '\n') {
            p += strlen(key);
            size_t n = strcspn(p, "\n");
            return strndup(p, n);
        }
        p++;
    }
    return strdup("");
}

static unsigned long long attr_value(const char *line, const char *attr)
{
    char key[32];
    snprintf(key, sizeof key, " %s=\"", attr);
    const char *p = strstr(line, key);
    ck_assert_msg(p != NULL, "no %s in %s", attr, line);
    return strtoull(p + strlen(key), NULL, 10);
}

START_TEST(e2e_up_task_sees_msccl_environment_and_files)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("up", "rc");
    ck_assert_int_eq(atoi(rc), 0);
    char *out = record("up", "out");
    char *err = record("up", "err");
    ck_assert_msg(strstr(err, "collsynth: warning") == NULL, "warning: %s", err);
    ck_assert_ptr_nonnull(strstr(out, "TASK_RAN"));
    /* Slurm gave the step its 8 (stand-in) GPUs */
    ck_assert_ptr_nonnull(strstr(out, "STEP_GPUS=0,1,2,3,4,5,6,7\n"));
    char *nccl = env_value(out, "NCCL_ALGO");
    ck_assert_str_eq(nccl, "MSCCL,Ring,Tree");
    char *dir = env_value(out, "MSCCL_ALGO_DIR");
    ck_assert_msg(dir[0] == '/', "MSCCL_ALGO_DIR missing:\n%s", out);
    char *files = env_value(out, "MSCCL_XML_FILES");
    ck_assert(files[0] != '\0');
    /* at most 4 files for the older runtime (its limit), each readable by the
     * task, none in the executor's directory (it would load them too) */
    int nfiles = 1 + count_lines_with(files, ":");
    ck_assert_int_le(nfiles, 4);
    ck_assert_int_eq(count_lines_with(out, "XMLFILE "), nfiles);
    ck_assert_ptr_null(strstr(files, dir));
    /* the older runtime's name for reduce-scatter, the executor's for its files */
    ck_assert_ptr_nonnull(strstr(out, "XMLFILE reducescatter-"));
    ck_assert_ptr_nonnull(strstr(out, "coll=\"reduce_scatter\""));
    ck_assert_ptr_nonnull(strstr(out, "FILE reducescatter-0.xml <algo"));
    ck_assert_ptr_nonnull(strstr(out, "coll=\"reducescatter\""));
    char *keys = env_value(out, "COLLSYNTH_RESULT_KEYS");
    const char *colls[] = {"allgather", "reducescatter", "allreduce"};
    for (int c = 0; c < 3; c++) {
        char want[64];
        snprintf(want, sizeof want, "%s=", colls[c]);
        ck_assert_msg(strstr(keys, want) != NULL, "no key for %s in %s", colls[c], keys);
        /* the files of one collective cover [0, 2^40) without gaps, in order */
        unsigned long long expect_min = 0;
        int seen = 0;
        for (int i = 0; i < 32; i++) {
            char tag[64];
            snprintf(tag, sizeof tag, "FILE %s-%d.xml ", colls[c], i);
            const char *line = strstr(out, tag);
            if (line == NULL)
                break;
            char *l = strndup(line, strcspn(line, "\n"));
            ck_assert_msg(strstr(l, "<algo") != NULL, "%s", l);
            ck_assert_uint_eq(attr_value(l, "minBytes"), expect_min);
            expect_min = attr_value(l, "maxBytes");
            ck_assert_uint_eq(attr_value(l, "ngpus"), 8); /* the node type's dgx1 */
            free(l);
            seen++;
        }
        /* SMT with 2 chunks and k = 0 finds two DGX-1 algorithms for each
         * collective, the latency-optimal one cheaper below a crossover: two
         * ranges */
        ck_assert_msg(seen == 2, "%d files for %s:\n%s", seen, colls[c], out);
        /* the older runtime's list has room for 4: each collective's algorithm
         * for the largest messages comes first */
        char largest[64];
        snprintf(largest, sizeof largest, "/msccl/%s-%d.xml", colls[c], seen - 1);
        ck_assert_msg(strstr(files, largest) != NULL, "%s not in %s", largest, files);
        ck_assert_uint_eq(expect_min, 1ULL << 40);
    }
    /* the hook removed its directory when the step ended */
    char *after = record("up", "tmp_after");
    ck_assert_msg(strstr(after, "collsynth.") == NULL, "left behind: %s", after);
    free(after);
    free(keys);
    free(files);
    free(dir);
    free(nccl);
    free(err);
    free(out);
    free(rc);
}
END_TEST

/* A node whose GPUs share a copy-capable switch (NVLS): the hook asks with
 * options.codegen "msccl-xml", so mcf's allgather is one MSCCL can run and
 * the task gets its files.  (Without the option mcf solves the copy form,
 * whose schedules may copy in the switch, which has no XML.) */
START_TEST(e2e_copy_switch_node_gets_msccl_files)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("copyswitch", "rc"), *out = record("copyswitch", "out"),
         *err = record("copyswitch", "err");
    ck_assert_int_eq(atoi(rc), 0);
    ck_assert_msg(strstr(err, "collsynth: warning") == NULL, "warning: %s", err);
    ck_assert_ptr_nonnull(strstr(out, "TASK_RAN"));
    char *keys = env_value(out, "COLLSYNTH_RESULT_KEYS");
    ck_assert_msg(strncmp(keys, "allgather=", 10) == 0, "keys: %s", keys);
    const char *line = strstr(out, "FILE allgather-0.xml <algo");
    ck_assert_msg(line != NULL, "no allgather XML:\n%s", out);
    char *l = strndup(line, strcspn(line, "\n"));
    ck_assert_uint_eq(attr_value(l, "ngpus"), 8);
    ck_assert_ptr_nonnull(strstr(l, "coll=\"allgather\""));
    free(l);
    free(keys);
    free(rc);
    free(out);
    free(err);
}
END_TEST

static void assert_unchanged_env(const char *out)
{
    ck_assert_ptr_nonnull(strstr(out, "TASK_RAN"));
    ck_assert_ptr_null(strstr(out, "MSCCL_XML_FILES="));
    ck_assert_ptr_null(strstr(out, "MSCCL_ALGO_DIR="));
    ck_assert_ptr_null(strstr(out, "NCCL_ALGO="));
}

START_TEST(e2e_step_without_gpus_is_left_alone)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("nogpu", "rc"), *out = record("nogpu", "out"), *err = record("nogpu", "err");
    ck_assert_int_eq(atoi(rc), 0);
    assert_unchanged_env(out);
    ck_assert_ptr_nonnull(strstr(out, "STEP_GPUS=\n"));
    ck_assert_ptr_null(strstr(err, "collsynth"));
    free(rc);
    free(out);
    free(err);
}
END_TEST

/* The value of NAME= on the line of task `rank` in srun --label output. */
static char *labeled_value(const char *out, int rank, const char *name)
{
    char key[96];
    snprintf(key, sizeof key, "%d: %s=", rank, name);
    const char *p = strstr(out, key);
    if (p == NULL)
        return strdup("");
    p += strlen(key);
    return strndup(p, strcspn(p, "\n"));
}

START_TEST(e2e_two_nodes_build_one_topology)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("multi", "rc"), *out = record("multi", "out"), *err = record("multi", "err");
    ck_assert_int_eq(atoi(rc), 0);
    ck_assert_msg(strstr(err, "collsynth: warning") == NULL, "warning: %s", err);
    char *dir0 = labeled_value(out, 0, "MSCCL_ALGO_DIR"), *dir1 = labeled_value(out, 1, "MSCCL_ALGO_DIR");
    char *key0 = labeled_value(out, 0, "COLLSYNTH_RESULT_KEYS");
    char *key1 = labeled_value(out, 1, "COLLSYNTH_RESULT_KEYS");
    ck_assert_msg(dir0[0] == '/' && dir1[0] == '/', "no MSCCL_ALGO_DIR on both nodes:\n%s", out);
    ck_assert_str_ne(dir0, dir1); /* one directory per node */
    /* both nodes composed the same allocation topology on their own: same keys */
    ck_assert(key0[0] != '\0');
    ck_assert_str_eq(key0, key1);
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "%d: FILE allgather-0.xml <algo", r);
        const char *line = strstr(out, tag);
        ck_assert_msg(line != NULL, "no allgather file on node %d:\n%s", r, out);
        char *l = strndup(line, strcspn(line, "\n"));
        /* two nodes of ring:4: 8 ranks */
        ck_assert_uint_eq(attr_value(l, "ngpus"), 8);
        free(l);
        snprintf(tag, sizeof tag, "%d: TASK_RAN rank=%d", r, r);
        ck_assert_ptr_nonnull(strstr(out, tag));
    }
    free(dir0); free(dir1); free(key0); free(key1); free(rc); free(out); free(err);
}
END_TEST

/* A daemon that serves node slices but refuses frontier entry 1 for the
 * runtimes' limits (422, field "runtime"): both nodes skip entry 1 and keep
 * entry 0, and neither downloads a whole document (a limit refusal refuses
 * the whole document too; before, any 422 on a slice switched the hook to
 * whole documents for the rest of the step). */
START_TEST(e2e_limit_refusal_skips_the_entry_without_whole_documents)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("refused", "rc"), *out = record("refused", "out");
    char *err = record("refused", "err"), *req = record("refused", "requests");
    ck_assert_int_eq(atoi(rc), 0);
    ck_assert_msg(count_lines_with(req, "POST /v1/synthesize") >= 2, "requests:\n%s", req);
    /* each node asked for its own slice of both entries */
    ck_assert_msg(count_lines_with(req, "alg=1&runtime=msccl&ranks=0-3") >= 1 &&
                      count_lines_with(req, "alg=1&runtime=msccl&ranks=4-7") >= 1,
                  "requests:\n%s", req);
    /* and never for a whole document */
    int results = count_lines_with(req, "GET /v1/results/");
    int sliced = count_lines_with(req, "&ranks=");
    ck_assert_msg(results > 0 && results == sliced, "whole documents fetched:\n%s", req);
    /* entry 0 was written on both nodes */
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "%d: FILE allgather-0.xml <algo", r);
        ck_assert_msg(strstr(out, tag) != NULL, "no entry-0 file on node %d:\n%s\n%s", r, out,
                      err);
    }
    free(rc);
    free(out);
    free(err);
    free(req);
}
END_TEST

/* A stored result the e2e run fetched (OUT/<scenario>.<kind>.json). */
static json_t *record_json(const char *scenario, const char *kind)
{
    char ext[64];
    snprintf(ext, sizeof ext, "%s.json", kind);
    char *text = record(scenario, ext);
    json_error_t jerr;
    json_t *doc = json_loads(text, 0, &jerr);
    ck_assert_msg(doc != NULL, "%s.%s: %s", scenario, ext, jerr.text);
    free(text);
    return doc;
}

/* The result is for the root asked for, and its schedules really start (a
 * broadcast) or end (a reduce) there: the first sends of a broadcast leave
 * the root (nothing else holds the data), and every rank's contribution of a
 * reduce reaches the root. */
static void assert_rooted_result(json_t *res, const char *kind, int root, int ranks)
{
    json_t *coll = json_object_get(res, "collective");
    ck_assert_str_eq(json_string_value(json_object_get(coll, "kind")), kind);
    ck_assert_int_eq(json_integer_value(json_object_get(coll, "root")), root);
    json_t *frontier = json_object_get(res, "frontier");
    ck_assert_int_gt(json_array_size(frontier), 0);
    size_t i;
    json_t *alg;
    json_array_foreach(frontier, i, alg) {
        ck_assert_int_eq(json_integer_value(json_object_get(alg, "ranks")), ranks);
        json_t *sends = json_object_get(alg, "sends");
        ck_assert_int_gt(json_array_size(sends), 0);
        long first = -1;
        size_t j;
        json_t *snd;
        json_array_foreach(sends, j, snd) {
            long step = (long)json_integer_value(json_object_get(snd, "step"));
            if (first < 0 || step < first)
                first = step;
        }
        int into_root = 0, from_root_first = 0, first_sends = 0;
        json_array_foreach(sends, j, snd) {
            int src = (int)json_integer_value(json_object_get(snd, "src"));
            int dst = (int)json_integer_value(json_object_get(snd, "dst"));
            if ((long)json_integer_value(json_object_get(snd, "step")) == first) {
                first_sends++;
                from_root_first += src == root;
            }
            into_root += dst == root;
        }
        if (strcmp(kind, "broadcast") == 0) {
            ck_assert_msg(from_root_first == first_sends,
                          "%s root %d: %d of the %d first sends leave another rank", kind, root,
                          first_sends - from_root_first, first_sends);
        } else {
            ck_assert_msg(into_root > 0, "%s root %d: nothing reaches the root", kind, root);
        }
    }
}

/* collectives=broadcast,reduce with plugstack root=2 and srun
 * --collsynth-root=5: the job's option wins; the task gets each collective's
 * files and the results are rooted at 5. */
START_TEST(e2e_rooted_collectives_use_the_jobs_root)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("rooted", "rc"), *out = record("rooted", "out"), *err = record("rooted", "err");
    ck_assert_int_eq(atoi(rc), 0);
    ck_assert_msg(strstr(err, "collsynth: warning") == NULL, "warning: %s", err);
    ck_assert_ptr_nonnull(strstr(out, "TASK_RAN"));
    const char *kinds[] = {"broadcast", "reduce"};
    for (int k = 0; k < 2; k++) {
        char tag[64], coll[64];
        snprintf(tag, sizeof tag, "FILE %s-0.xml <algo", kinds[k]);
        const char *line = strstr(out, tag);
        ck_assert_msg(line != NULL, "no %s XML:\n%s", kinds[k], out);
        char *l = strndup(line, strcspn(line, "\n"));
        snprintf(coll, sizeof coll, "coll=\"%s\"", kinds[k]);
        ck_assert_msg(strstr(l, coll) != NULL, "%s", l);
        ck_assert_uint_eq(attr_value(l, "ngpus"), 8);
        free(l);
        json_t *res = record_json("rooted", kinds[k]);
        assert_rooted_result(res, kinds[k], 5, 8);
        json_decref(res);
    }
    free(rc);
    free(out);
    free(err);
}
END_TEST

/* A two-node step (8 ranks) with plugstack root=6 only: a root on the second
 * node, numbered node by node; both nodes ask for (and get) the same result. */
START_TEST(e2e_rooted_two_nodes_use_the_plugstack_root)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("rootedmulti", "rc"), *out = record("rootedmulti", "out");
    char *err = record("rootedmulti", "err");
    ck_assert_int_eq(atoi(rc), 0);
    ck_assert_msg(strstr(err, "collsynth: warning") == NULL, "warning: %s", err);
    char *key0 = labeled_value(out, 0, "COLLSYNTH_RESULT_KEYS");
    char *key1 = labeled_value(out, 1, "COLLSYNTH_RESULT_KEYS");
    ck_assert_msg(strncmp(key0, "broadcast=", 10) == 0, "keys: %s", key0);
    ck_assert_str_eq(key0, key1);
    for (int r = 0; r < 2; r++) {
        char tag[64];
        snprintf(tag, sizeof tag, "%d: FILE broadcast-0.xml <algo", r);
        ck_assert_msg(strstr(out, tag) != NULL, "no broadcast file on node %d:\n%s", r, out);
    }
    json_t *res = record_json("rootedmulti", "broadcast");
    assert_rooted_result(res, "broadcast", 6, 8);
    json_decref(res);
    free(key0);
    free(key1);
    free(rc);
    free(out);
    free(err);
}
END_TEST

/* srun --collsynth-root=8 on an 8-rank step: one warning that names the
 * option and the step's ranks; the job runs unchanged. */
START_TEST(e2e_root_outside_the_step_job_runs_with_one_warning)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("badroot", "rc"), *out = record("badroot", "out");
    char *err = record("badroot", "err");
    ck_assert_int_eq(atoi(rc), 0);
    assert_unchanged_env(out);
    ck_assert_int_eq(count_lines_with(err, "collsynth: warning"), 1);
    ck_assert_msg(strstr(err, "--collsynth-root=8 is not a rank of this step: it has 8 ranks "
                              "(0..7)") != NULL, "%s", err);
    free(rc);
    free(out);
    free(err);
}
END_TEST

/* srun --collsynth-root=abc: srun refuses its own command line, naming the
 * option, before any job exists (no task ran). */
START_TEST(e2e_malformed_root_option_is_refused_by_srun)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("badrootsyntax", "rc"), *out = record("badrootsyntax", "out");
    char *err = record("badrootsyntax", "err");
    ck_assert_int_ne(atoi(rc), 0);
    ck_assert_ptr_null(strstr(out, "TASK_RAN"));
    ck_assert_msg(strstr(err, "--collsynth-root=abc is not a rank") != NULL, "%s", err);
    free(rc);
    free(out);
    free(err);
}
END_TEST

/* plugstack gpu_sms=1: the hook asks for documents for a GPU with one SM (2
 * thread blocks per rank); the daemon refuses every entry of the DGX-1
 * allgather for both runtimes, so the job runs unchanged with one warning
 * that names the limit. */
START_TEST(e2e_gpu_sms_reaches_the_daemon_and_refusals_leave_the_job_alone)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("fewsms", "rc"), *out = record("fewsms", "out");
    char *err = record("fewsms", "err");
    ck_assert_int_eq(atoi(rc), 0);
    assert_unchanged_env(out);
    ck_assert_int_eq(count_lines_with(err, "collsynth: warning"), 1);
    ck_assert_msg(strstr(err, "&gpu_sms=1: HTTP 422") != NULL &&
                      strstr(err, "on a GPU with gpu_sms=1") != NULL &&
                      strstr(err, "at most 2") != NULL,
                  "%s", err);
    /* the warning's tail got through: the last refusal and the outcome */
    ck_assert_msg(strstr(err, "(no MSCCL XML for allgather)") != NULL &&
                      strstr(err, "the job runs without synthesized collectives") != NULL,
                  "%s", err);
    free(rc);
    free(out);
    free(err);
}
END_TEST

START_TEST(e2e_unreadable_cluster_file_job_runs_with_one_warning)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("badcluster", "rc"), *out = record("badcluster", "out");
    char *err = record("badcluster", "err");
    ck_assert_int_eq(atoi(rc), 0);
    assert_unchanged_env(out);
    ck_assert_int_eq(count_lines_with(err, "collsynth: warning"), 1);
    ck_assert_ptr_nonnull(strstr(err, "missing.json"));
    free(rc);
    free(out);
    free(err);
}
END_TEST

START_TEST(e2e_refused_token_job_runs_with_one_warning)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("badtoken", "rc"), *out = record("badtoken", "out");
    char *err = record("badtoken", "err");
    ck_assert_int_eq(atoi(rc), 0);
    assert_unchanged_env(out);
    ck_assert_int_eq(count_lines_with(err, "collsynth: warning"), 1);
    ck_assert_msg(strstr(err, "HTTP 401") != NULL, "%s", err);
    free(rc);
    free(out);
    free(err);
}
END_TEST

START_TEST(e2e_step_on_part_of_a_node_is_left_alone_with_a_warning)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("partial", "rc"), *out = record("partial", "out");
    char *err = record("partial", "err");
    ck_assert_int_eq(atoi(rc), 0);
    assert_unchanged_env(out);
    ck_assert_ptr_nonnull(strstr(out, "STEP_GPUS=0,1\n"));
    ck_assert_int_eq(count_lines_with(err, "collsynth: warning"), 1);
    ck_assert_msg(strstr(err, "uses 2 GPU(s) on this node but its node type has 8") != NULL,
                  "%s", err);
    free(rc);
    free(out);
    free(err);
}
END_TEST

START_TEST(e2e_daemon_down_job_runs_with_one_warning)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("down", "rc"), *out = record("down", "out"), *err = record("down", "err");
    ck_assert_int_eq(atoi(rc), 0);
    assert_unchanged_env(out);
    ck_assert_int_eq(count_lines_with(err, "collsynth: warning"), 1);
    ck_assert_ptr_nonnull(strstr(err, "the job runs without synthesized collectives"));
    free(rc);
    free(out);
    free(err);
}
END_TEST

START_TEST(e2e_hanging_server_costs_only_the_timeout)
{
    ck_assert_int_eq(e2e_status, 0);
    char *rc = record("slow", "rc"), *out = record("slow", "out"), *err = record("slow", "err");
    char *secs = record("slow", "seconds");
    ck_assert_int_eq(atoi(rc), 0);
    assert_unchanged_env(out);
    ck_assert_int_eq(count_lines_with(err, "collsynth: warning"), 1);
    ck_assert_ptr_nonnull(strstr(err, "timeout=1s"));
    ck_assert_msg(atof(secs) < 8.0, "srun took %s s with timeout=1", secs);
    /* and the node was not drained */
    char *state = record("node_state", "");
    ck_assert_msg(strncmp(state, "idle", 4) == 0, "node state %s", state);
    free(state);
    free(secs);
    free(rc);
    free(out);
    free(err);
}
END_TEST

static Suite *slurm_suite(void)
{
    Suite *s = suite_create("slurm");
    TCase *unit = tcase_create("cluster");
    tcase_add_test(unit, long_messages_split_into_whole_lines);
    tcase_add_test(unit, hostlist_expands_ranges_padding_and_plain_names);
    tcase_add_test(unit, two_nodes_on_a_switch_fabric);
    tcase_add_test(unit, three_nodes_on_a_ring_fabric);
    tcase_add_test(unit, example_cluster_description_builds);
    tcase_add_test(unit, cluster_file_with_a_byte_order_mark_loads);
    tcase_add_test(unit, plugstack_arguments_name_the_nearest_key);
    tcase_add_test(unit, frontier_ranges_split_at_the_crossover);
    tcase_add_test(unit, xml_byte_range_replaces_existing_attributes);
    suite_add_tcase(s, unit);
    TCase *e2e = tcase_create("e2e");
    /* once, in the runner's process, before the e2e checks (they fork) */
    tcase_add_unchecked_fixture(e2e, setup_e2e, teardown_e2e);
    tcase_set_timeout(e2e, 240);
    tcase_add_test(e2e, e2e_ran);
    tcase_add_test(e2e, e2e_up_task_sees_msccl_environment_and_files);
    tcase_add_test(e2e, e2e_step_without_gpus_is_left_alone);
    tcase_add_test(e2e, e2e_two_nodes_build_one_topology);
    tcase_add_test(e2e, e2e_limit_refusal_skips_the_entry_without_whole_documents);
    tcase_add_test(e2e, e2e_unreadable_cluster_file_job_runs_with_one_warning);
    tcase_add_test(e2e, e2e_refused_token_job_runs_with_one_warning);
    tcase_add_test(e2e, e2e_step_on_part_of_a_node_is_left_alone_with_a_warning);
    tcase_add_test(e2e, e2e_copy_switch_node_gets_msccl_files);
    tcase_add_test(e2e, e2e_rooted_collectives_use_the_jobs_root);
    tcase_add_test(e2e, e2e_rooted_two_nodes_use_the_plugstack_root);
    tcase_add_test(e2e, e2e_root_outside_the_step_job_runs_with_one_warning);
    tcase_add_test(e2e, e2e_malformed_root_option_is_refused_by_srun);
    tcase_add_test(e2e, e2e_gpu_sms_reaches_the_daemon_and_refusals_leave_the_job_alone);
    tcase_add_test(e2e, e2e_daemon_down_job_runs_with_one_warning);
    tcase_add_test(e2e, e2e_hanging_server_costs_only_the_timeout);
    suite_add_tcase(s, e2e);
    return s;
}

CS_CHECK_MAIN(slurm_suite)
