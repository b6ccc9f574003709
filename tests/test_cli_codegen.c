/* Tests of `collsynth codegen`'s output: the document is written as the
 * generator produces it (clients/cli/cli_codegen.c), so it must be byte for
 * byte what the library's in-memory generators give, and a write that fails
 * part way must end with a clear message, a non-zero exit and no file that
 * looks complete.  Runs the built binary ($BUILD/collsynth). */
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "algorithm.h"
#include "check_main.h"
#include "clients_helpers.h"
#include "cuda_gen.h"
#include "msccl_check.h"
#include "msccl_xml.h"
#include "topology.h"

static char dir[64];
static char cli[PATH_MAX];

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/test_cli_codegen_XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char rel[256];
    snprintf(rel, sizeof rel, "%s/collsynth", cs_test_build_dir());
    ck_assert_msg(access(rel, X_OK) == 0, "%s is not built", rel);
    ck_assert_ptr_nonnull(realpath(rel, cli));   /* the commands run in dir */
}

static void teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    ck_assert_int_eq(system(cmd), 0);
}

/* Runs a shell command in the test's directory, $CLI the binary; *err
 * gets stderr (caller frees; err may be NULL).  Returns the exit code. */
static int sh(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int sh(char **err, const char *fmt, ...)
{
    char args[1024], cmd[1024 + PATH_MAX + 128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof args, fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof cmd, "cd '%s' && CLI='%s' && %s", dir, cli, args);
    char *out = NULL, *e = NULL;
    int rc = cs_test_sh(cmd, &out, &e);
    free(out);
    if (err)
        *err = e;
    else
        free(e);
    return rc;
}

static char *slurp(const char *name, size_t *len)
{
    char path[128], *text = NULL;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    cs_error err;
    if (cs_read_file(path, &text, len, &err) != CS_OK)
        return NULL;
    return text;
}

/* The result's frontier[index] read through the DOM (not the CLI's loader). */
static cs_algorithm *frontier_alg(const char *name, int index)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    json_error_t jerr;
    json_t *doc = json_load_file(path, 0, &jerr);
    ck_assert_msg(doc != NULL, "%s: %s", path, jerr.text);
    cs_result *r = NULL;
    cs_error err;
    ck_assert_int_eq(result_from_json(doc, &r, &err), CS_OK);
    json_decref(doc);
    ck_assert_int_gt(r->nalgs, index);
    cs_algorithm *a = NULL;
    ck_assert_int_eq(algorithm_clone(r->algs[index], &a, &err), CS_OK);
    result_free(r);
    return a;
}

static void assert_file_is(const char *name, const char *want, size_t want_len)
{
    size_t len = 0;
    char *got = slurp(name, &len);
    ck_assert_msg(got != NULL, "%s was not written", name);
    ck_assert_msg(len == want_len && memcmp(got, want, len) == 0,
                  "%s: %zu bytes, not the generator's %zu", name, len, want_len);
    free(got);
}

/* Whole documents, slices and CUDA sources, to a file and to stdout, are
 * the library generators' text. */
START_TEST(output_is_the_generators_document)
{
    char *err = NULL;
    int rc = sh(&err, "\"$CLI\" solve mesh2d:8x8 allgather --method tacos --quiet -o mesh.json");
    ck_assert_msg(rc == 0, "solve: %s", err);
    free(err);
    rc = sh(&err, "\"$CLI\" solve dgx1 allgather --method smt --quiet -o dgx1.json");
    ck_assert_msg(rc == 0, "solve: %s", err);
    free(err);

    cs_topology *mesh = NULL, *dgx1 = NULL;
    cs_error e;
    ck_assert_int_eq(topology_load("mesh2d:8x8", NULL, &mesh, &e), CS_OK);
    ck_assert_int_eq(topology_load("dgx1", NULL, &dgx1, &e), CS_OK);
    cs_algorithm *a = frontier_alg("mesh.json", 0);
    cs_msccl_options o;
    msccl_options_default(&o);
    o.runtime = CS_MSCCL_RUNTIME_EXECUTOR;
    char *want = NULL;
    size_t len = 0;
    ck_assert_int_eq(msccl_xml_generate(a, mesh, &o, &want, &len, &e), CS_OK);
    ck_assert_int_gt(len, 100000);   /* many writes of the <gpu> elements */
    ck_assert_int_eq(sh(NULL, "\"$CLI\" codegen mesh.json --format msccl-xml "
                        "--runtime msccl-executor -o mesh.xml"), 0);
    assert_file_is("mesh.xml", want, len);
    ck_assert_int_eq(sh(NULL, "\"$CLI\" codegen mesh.json --format msccl-xml "
                        "--runtime msccl-executor > mesh-stdout.xml"), 0);
    assert_file_is("mesh-stdout.xml", want, len);
    free(want);
    /* -o over an existing file replaces it */
    ck_assert_int_eq(sh(NULL, "\"$CLI\" codegen mesh.json --format msccl-xml --ranks 9-20 "
                        "-o mesh.xml"), 0);
    msccl_options_default(&o);
    ck_assert_int_eq(msccl_xml_generate_ranks(a, mesh, &o, 9, 20, &want, &len, &e), CS_OK);
    assert_file_is("mesh.xml", want, len);
    free(want);
    algorithm_free(a);

    /* a frontier's second algorithm, in both forms */
    a = frontier_alg("dgx1.json", 1);
    msccl_options_default(&o);
    o.runtime = CS_MSCCL_RUNTIME_MSCCL;
    ck_assert_int_eq(msccl_xml_generate(a, dgx1, &o, &want, &len, &e), CS_OK);
    ck_assert_int_eq(sh(NULL, "\"$CLI\" codegen dgx1.json --index 1 --format msccl-xml "
                        "--runtime msccl -o dgx1.xml"), 0);
    assert_file_is("dgx1.xml", want, len);
    free(want);
    cs_cuda_options co;
    cuda_options_default(&co);
    ck_assert_int_eq(cuda_generate(a, dgx1, &co, &want, &len, &e), CS_OK);
    ck_assert_int_eq(sh(NULL, "\"$CLI\" codegen dgx1.json --index 1 --format cuda -o dgx1.cu"), 0);
    assert_file_is("dgx1.cu", want, len);
    free(want);
    algorithm_free(a);
    topology_free(mesh);
    topology_free(dgx1);
}
END_TEST

/* Names in the test directory other than the given ones: leftovers. */
static int others(const char *keep1, const char *keep2, const char *keep3)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d));)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..") && strcmp(e->d_name, keep1) &&
            (!keep2 || strcmp(e->d_name, keep2)) && (!keep3 || strcmp(e->d_name, keep3)))
            n++;
    closedir(d);
    return n;
}

/* A full disk, on a device, on stdout, and a file that cannot grow past a
 * few KB part way through the document: exit 2 with a message naming the
 * output and the reason; a file is either the whole document or left as it
 * was, with no temporary file left over. */
START_TEST(write_errors_fail_clearly_and_leave_no_partial_file)
{
    char *err = NULL;
    int rc = sh(&err, "\"$CLI\" solve mesh2d:8x8 allgather --method tacos --quiet -o mesh.json");
    ck_assert_msg(rc == 0, "solve: %s", err);
    free(err);

    rc = sh(&err, "\"$CLI\" codegen mesh.json --format msccl-xml -o /dev/full");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "cannot write '/dev/full'") && strstr(err, strerror(ENOSPC)),
                  "%s", err);
    free(err);
    rc = sh(&err, "\"$CLI\" codegen mesh.json --format msccl-xml > /dev/full");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "cannot write 'stdout'") && strstr(err, strerror(ENOSPC)), "%s",
                  err);
    free(err);
    rc = sh(&err, "\"$CLI\" codegen mesh.json --format cuda --ranks 0-3 -o /dev/full");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "cannot write '/dev/full'"), "%s", err);
    free(err);

    /* files may not grow past 8 KB (ulimit -f counts 512-byte blocks; the
     * signal ignored, so the write fails with EFBIG): the document is ~1 MB */
    ck_assert_int_eq(sh(NULL, "echo previous > out.xml"), 0);
    rc = sh(&err, "trap '' XFSZ; ulimit -f 16; \"$CLI\" codegen mesh.json --format msccl-xml "
            "-o out.xml");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "cannot write 'out.xml'") && strstr(err, strerror(EFBIG)), "%s",
                  err);
    free(err);
    assert_file_is("out.xml", "previous\n", 9);
    ck_assert_int_eq(others("mesh.json", "out.xml", NULL), 0);
    ck_assert_int_eq(sh(NULL, "rm out.xml"), 0);
    rc = sh(&err, "trap '' XFSZ; ulimit -f 16; \"$CLI\" codegen mesh.json --format msccl-xml "
            "-o out.xml");
    ck_assert_int_eq(rc, 2);
    free(err);
    ck_assert_int_eq(others("mesh.json", NULL, NULL), 0);
    /* a directory that cannot take the file */
    rc = sh(&err, "\"$CLI\" codegen mesh.json --format msccl-xml -o nodir/out.xml");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "cannot write 'nodir/out.xml'"), "%s", err);
    free(err);
    /* and the file, when it can be written, has the mode a plain create gives */
    ck_assert_int_eq(sh(NULL, "umask 022; \"$CLI\" codegen mesh.json --format msccl-xml "
                        "-o out.xml && test \"$(stat -c %%a out.xml)\" = 644"), 0);
}
END_TEST

/* A runtime limit found while lowering: the executor's 64 steps per thread
 * block cannot hold 2100 chunks that arrive in a scattered order (nothing
 * merges; test_msccl_xml.c has the generator's side).  Exit 2 naming the
 * limit; -o FILE left as it was, nothing left over; on stdout no closing
 * "</algo>" (not a document that looks complete). */
START_TEST(a_limit_found_while_lowering_leaves_the_file_as_it_was)
{
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a = NULL;
    cs_error e;
    int n = 2100;
    ck_assert_int_eq(algorithm_new(&c, "line:2", 2, n, n, &a, &e), CS_OK);
    for (int s = 0; s < n; s++)
        ck_assert_int_eq(algorithm_add_send(a, (long)s * 1031 % n, 0, 1, s, CS_OP_COPY), CS_OK);
    json_t *doc = algorithm_to_json(a);
    char path[128];
    snprintf(path, sizeof path, "%s/long.json", dir);
    ck_assert_int_eq(json_dump_file(doc, path, JSON_COMPACT), 0);
    json_decref(doc);
    algorithm_free(a);
    /* the old runtime takes it (the check that the input itself is fine) */
    ck_assert_int_eq(sh(NULL, "\"$CLI\" codegen long.json --format msccl-xml --runtime msccl "
                        "-o ok.xml"), 0);
    ck_assert_int_eq(sh(NULL, "echo previous > out.xml"), 0);
    char *err = NULL;
    int rc = sh(&err, "\"$CLI\" codegen long.json --format msccl-xml --runtime msccl-executor "
                "-o out.xml");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "cannot lower to MSCCL XML") && strstr(err, "s <= 63"), "%s", err);
    free(err);
    assert_file_is("out.xml", "previous\n", 9);
    ck_assert_int_eq(others("long.json", "out.xml", "ok.xml"), 0);
    rc = sh(&err, "\"$CLI\" codegen long.json --format msccl-xml --runtime msccl-executor "
            "> stdout.xml");
    ck_assert_int_eq(rc, 2);
    free(err);
    size_t len = 0;
    char *text = slurp("stdout.xml", &len);
    ck_assert_ptr_nonnull(text);
    ck_assert_ptr_null(strstr(text, "</algo>"));
    free(text);
}
END_TEST

/* --gpu-sms N (codegen, and solve --format): the target GPU's SMs cap a
 * rank's thread blocks at 2N.  A broadcast from rank 0 straight to 99 peers
 * on a 100-rank switch needs 100 blocks at the root: the same document as
 * without the flag on a GPU with 50 SMs, refused on one with 40 (exit 2,
 * naming the SMs and the limit, no file); a bad count is a usage error. */
START_TEST(gpu_sms_flag_caps_thread_blocks)
{
    cs_collective c;
    collective_init(&c, CS_COLL_BROADCAST, 0);
    cs_algorithm *a = NULL;
    cs_error e;
    ck_assert_int_eq(algorithm_new(&c, "star", 100, 1, 1, &a, &e), CS_OK);
    for (int r = 1; r < 100; r++)
        ck_assert_int_eq(algorithm_add_send(a, 0, 0, r, 0, CS_OP_COPY), CS_OK);
    json_t *doc = algorithm_to_json(a);
    char path[128];
    snprintf(path, sizeof path, "%s/star.json", dir);
    ck_assert_int_eq(json_dump_file(doc, path, JSON_COMPACT), 0);
    json_decref(doc);
    algorithm_free(a);
    ck_assert_int_eq(sh(NULL, "\"$CLI\" codegen star.json --format msccl-xml -o plain.xml"), 0);
    ck_assert_int_eq(sh(NULL, "\"$CLI\" codegen star.json --format msccl-xml --gpu-sms 50 "
                        "-o fifty.xml"), 0);
    size_t len = 0;
    char *plain = slurp("plain.xml", &len);
    ck_assert_ptr_nonnull(plain);
    assert_file_is("fifty.xml", plain, len);
    /* the independent checker agrees, given the same SMs: 100 blocks fit
     * 50 SMs, not 40 */
    cs_msccl_options co;
    msccl_options_default(&co);
    co.gpu_sms = 50;
    ck_assert_msg(msccl_check_for(plain, len, &co, NULL, &e) == CS_OK, "%s", e.message);
    co.gpu_sms = 40;
    ck_assert_int_eq(msccl_check_for(plain, len, &co, NULL, &e), CS_ELIMIT);
    ck_assert_msg(strstr(e.message, "rank 0 has 100 thread blocks") &&
                      strstr(e.message, "at most 80"), "%s", e.message);
    free(plain);
    char *err = NULL;
    int rc = sh(&err, "\"$CLI\" codegen star.json --format msccl-xml --gpu-sms 40 -o forty.xml");
    ck_assert_int_eq(rc, 2);
    ck_assert_msg(strstr(err, "rank 0 needs 100 thread blocks") && strstr(err, "gpu_sms=40") &&
                      strstr(err, "at most 80"), "%s", err);
    free(err);
    ck_assert_ptr_null(slurp("forty.xml", NULL));
    const char *bad[] = {"--format msccl-xml --gpu-sms 0", "--format msccl-xml --gpu-sms x",
                         "--format cuda --gpu-sms 80"};
    for (int i = 0; i < 3; i++) {
        rc = sh(&err, "\"$CLI\" codegen star.json %s", bad[i]);
        ck_assert_int_eq(rc, 2);
        ck_assert_msg(strstr(err, "--gpu-sms"), "%s: %s", bad[i], err);
        free(err);
    }
}
END_TEST

/* verify and simulate read their input through the same loader: from a
 * file, from a pipe (read into memory first: the sends are read in a second
 * pass) and from a redirected file, with the same verdicts. */
START_TEST(verify_and_simulate_read_results_from_files_and_pipes)
{
    char *err = NULL;
    int rc = sh(&err, "\"$CLI\" solve dgx1 allgather --method smt --quiet -o dgx1.json");
    ck_assert_msg(rc == 0, "solve: %s", err);
    free(err);
    const char *forms[] = {"dgx1.json", "- < dgx1.json", "- < /dev/null"};
    const char *pipes[] = {"", "cat dgx1.json | ", ""};
    for (int i = 0; i < 3; i++) {
        rc = sh(&err, "%s\"$CLI\" verify dgx1 %s --index 1", pipes[i], forms[i]);
        ck_assert_msg(rc == (i == 2 ? 2 : 0), "%s: exit %d: %s", forms[i], rc, err);
        free(err);
    }
    rc = sh(&err, "cat dgx1.json | \"$CLI\" simulate dgx1 - --size 1MiB");
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    free(err);
    /* the wrong topology for the schedule: invalid, whichever way it came */
    rc = sh(&err, "cat dgx1.json | \"$CLI\" verify ring:8 -");
    ck_assert_int_eq(rc, 1);
    free(err);
}
END_TEST

/* `solve TOPO.json -o res.json` writes the Topology JSON into the Result
 * (its top-level "topology"), and `collsynth codegen res.json` still said
 * "topology 'quad' is not a builtin; the algorithm is not verified": it
 * looked only at the algorithms' names.  The Result's own topology is now
 * used (and named on stderr) by codegen, and verify and simulate take the
 * ALGORITHM alone, on the topology it carries. */
START_TEST(a_result_is_checked_on_its_own_topology)
{
    char path[128];
    snprintf(path, sizeof path, "%s/quad.json", dir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs("{\"name\": \"quad\", \"ranks\": 4, \"links\": ["
          "{\"src\": 0, \"dst\": 1, \"bidirectional\": true},"
          "{\"src\": 1, \"dst\": 2, \"bidirectional\": true},"
          "{\"src\": 2, \"dst\": 3, \"bidirectional\": true},"
          "{\"src\": 3, \"dst\": 0, \"bidirectional\": true}]}\n", f);
    fclose(f);
    char *err = NULL;
    int rc = sh(&err, "\"$CLI\" solve quad.json allgather --method smt --quiet -o res.json");
    ck_assert_msg(rc == 0, "solve: %s", err);
    free(err);
    /* codegen: verified on the result's topology, the same document as with
     * --topology given */
    rc = sh(&err, "\"$CLI\" codegen res.json --format msccl-xml -o own.xml");
    ck_assert_msg(rc == 0, "codegen: exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "not verified") == NULL, "%s", err);
    ck_assert_msg(strstr(err, "topology 'quad' (4 ranks): the result's own") != NULL, "%s", err);
    free(err);
    rc = sh(&err, "\"$CLI\" codegen res.json --format msccl-xml --topology quad.json -o given.xml");
    ck_assert_msg(rc == 0, "codegen --topology: exit %d: %s", rc, err);
    free(err);
    size_t n1 = 0, n2 = 0;
    char *own = slurp("own.xml", &n1), *given = slurp("given.xml", &n2);
    ck_assert_ptr_nonnull(own);
    ck_assert_ptr_nonnull(given);
    ck_assert_msg(n1 == n2 && memcmp(own, given, n1) == 0, "the documents differ");
    free(own);
    free(given);
    /* verify and simulate with the ALGORITHM alone */
    rc = sh(&err, "\"$CLI\" verify res.json");
    ck_assert_msg(rc == 0, "verify: exit %d: %s", rc, err);
    free(err);
    rc = sh(&err, "\"$CLI\" simulate res.json --size 1MiB");
    ck_assert_msg(rc == 0, "simulate: exit %d: %s", rc, err);
    free(err);
    /* the check really runs on the carried topology: without the link 0-1
     * the schedule is invalid, for all three */
    char rpath[128];
    snprintf(rpath, sizeof rpath, "%s/res.json", dir);
    json_t *doc = json_load_file(rpath, 0, NULL);
    ck_assert_ptr_nonnull(doc);
    ck_assert(json_is_object(json_object_get(doc, "topology")));
    ck_assert_int_eq(json_array_remove(json_object_get(json_object_get(doc, "topology"), "links"),
                                       0), 0);
    snprintf(rpath, sizeof rpath, "%s/line.json", dir);
    ck_assert_int_eq(json_dump_file(doc, rpath, 0), 0);
    json_decref(doc);
    rc = sh(&err, "\"$CLI\" codegen line.json --format msccl-xml -o line.xml");
    ck_assert_msg(rc == 1 && strstr(err, "not valid") != NULL, "exit %d: %s", rc, err);
    free(err);
    rc = sh(&err, "\"$CLI\" verify line.json");
    ck_assert_msg(rc == 1, "verify: exit %d: %s", rc, err);
    free(err);
    /* a topology given on the command line still wins */
    rc = sh(&err, "\"$CLI\" verify quad.json line.json");
    ck_assert_msg(rc == 0, "verify quad.json: exit %d: %s", rc, err);
    free(err);
    /* an Algorithm names its topology only: a builtin is used, another name
     * is a missing TOPOLOGY for verify, an unverified note for codegen */
    rc = sh(&err, "\"$CLI\" baseline ring quad.json allgather -o alg.json");
    ck_assert_msg(rc == 0, "baseline: %s", err);
    free(err);
    rc = sh(&err, "\"$CLI\" verify alg.json");
    ck_assert_msg(rc == 2 && strstr(err, "missing TOPOLOGY") != NULL &&
                      strstr(err, "'quad' is not a builtin") != NULL, "exit %d: %s", rc, err);
    free(err);
    rc = sh(&err, "\"$CLI\" codegen alg.json --format msccl-xml -o alg.xml");
    ck_assert_msg(rc == 0 && strstr(err, "not verified") != NULL, "exit %d: %s", rc, err);
    free(err);
    rc = sh(&err, "\"$CLI\" baseline ring ring:4 allgather -o ring.json && \"$CLI\" verify ring.json");
    ck_assert_msg(rc == 0, "exit %d: %s", rc, err);
    ck_assert_msg(strstr(err, "note") == NULL, "%s", err);
    free(err);
    /* a Result whose topology cannot be used says so */
    snprintf(rpath, sizeof rpath, "%s/res.json", dir);
    doc = json_load_file(rpath, 0, NULL);
    json_object_set_new(json_object_get(doc, "topology"), "ranks", json_integer(-3));
    snprintf(rpath, sizeof rpath, "%s/broken.json", dir);
    ck_assert_int_eq(json_dump_file(doc, rpath, 0), 0);
    json_decref(doc);
    rc = sh(&err, "\"$CLI\" codegen broken.json --format cuda");
    ck_assert_msg(rc == 2 && strstr(err, "the result's own topology") != NULL &&
                      strstr(err, "ranks") != NULL, "exit %d: %s", rc, err);
    free(err);
}
END_TEST

static Suite *cli_codegen_suite(void)
{
    Suite *s = suite_create("cli_codegen");
    TCase *tc = tcase_create("core");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, output_is_the_generators_document);
    tcase_add_test(tc, write_errors_fail_clearly_and_leave_no_partial_file);
    tcase_add_test(tc, a_limit_found_while_lowering_leaves_the_file_as_it_was);
    tcase_add_test(tc, gpu_sms_flag_caps_thread_blocks);
    tcase_add_test(tc, verify_and_simulate_read_results_from_files_and_pipes);
    tcase_add_test(tc, a_result_is_checked_on_its_own_topology);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(cli_codegen_suite)
