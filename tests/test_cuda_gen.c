/* Tests of the CUDA generator: every generated file of the codegen matrix is
 * compiled as plain C (CS_HOST_BUILD: thread blocks become pthreads) and run,
 * and its results are checked against the collective's definition in NCCL's
 * buffer layout; a selection (the DGX-1 SMT frontier, one baseline, one TACOS
 * schedule) is compiled with nvcc for sm_80 and sm_90 with warnings as errors
 * (skipped with a message where nvcc is absent). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "baseline.h"
#include "check_main.h"
#include "codegen_testutil.h"
#include "cuda_gen.h"
#include "tacos.h"

/* The test driver: fills inputs, runs, checks every output element.  The
 * expectations are written from the collectives' definitions, not from the
 * generator. */
/* Buffers and the check, shared by the drivers (the generated source or
 * sources are included first). */
#define DRIVER_COMMON                                                                          \
    "#include <stdio.h>\n"                                                                     \
    "#include <stdlib.h>\n"                                                                    \
    "#include <string.h>\n"                                                                    \
    "#define P COLLSYNTH_RANKS\n"                                                              \
    "#define C COLLSYNTH_CHUNKS\n"                                                             \
    "typedef COLLSYNTH_ELEM elem;\n"                                                           \
    "static elem val(int r, long x, int e) { return (elem)((r + 1) * 4096 + x * 8 + e); }\n"   \
    "static const char *kind = COLLSYNTH_KIND;\n"                                              \
    "static long ni = COLLSYNTH_I_CHUNKS, no = COLLSYNTH_O_CHUNKS;\n"                          \
    "static elem *inb[P], *outb[P];\n"                                                         \
    "static void *in[P], *out[P];\n"                                                           \
    "static void buffers(int inplace, size_t n)\n"                                             \
    "{\n"                                                                                      \
    "    long big = ni > no ? ni : no;\n"                                                      \
    "    for (int r = 0; r < P; r++) {\n"                                                      \
    "        outb[r] = aligned_alloc(16, ((size_t)big * n * sizeof(elem) + 15) / 16 * 16);\n"  \
    "        inb[r] = aligned_alloc(16, ((size_t)big * n * sizeof(elem) + 15) / 16 * 16);\n"   \
    "        for (long k = 0; k < big * (long)n; k++) outb[r][k] = (elem)-1, inb[r][k] = (elem)-2;\n" \
    "        elem *ip = inb[r], *op = outb[r];\n"                                              \
    "        if (inplace) {\n"                                                                 \
    "            if (!strcmp(kind, \"allgather\")) ip = outb[r] + (size_t)r * C * n;\n"       \
    "            else if (!strcmp(kind, \"reducescatter\")) op = inb[r] + (size_t)r * C * n;\n" \
    "            else ip = op;\n"                                                              \
    "        }\n"                                                                              \
    "        in[r] = ip;\n"                                                                    \
    "        out[r] = op;\n"                                                                   \
    "    }\n"                                                                                  \
    "}\n"                                                                                      \
    "static void fill(size_t n)\n"                                                             \
    "{\n"                                                                                      \
    "    for (int r = 0; r < P; r++)\n"                                                        \
    "        for (long x = 0; x < ni; x++)\n"                                                  \
    "            for (size_t e = 0; e < n; e++) ((elem *)in[r])[x * n + e] = val(r, x, (int)e);\n" \
    "}\n"                                                                                      \
    "static int check(size_t n)\n"                                                             \
    "{\n"                                                                                      \
    "    int root = COLLSYNTH_ROOT;\n"                                                         \
    "    int bad = 0;\n"                                                                     \
    "    for (int r = 0; r < P && !bad; r++) {\n"                                            \
    "        const elem *o = (const elem *)out[r];\n"                                        \
    "        for (long x = 0; x < no && !bad; x++)\n"                                        \
    "            for (size_t e = 0; e < n && !bad; e++) {\n"                                 \
    "                elem want = 0;\n"                                                       \
    "                int want_it = 1;\n"                                                       \
    "                if (!strcmp(kind, \"allgather\")) want = val((int)(x / C), x % C, (int)e);\n" \
    "                else if (!strcmp(kind, \"gather\")) { want_it = r == root; want = val((int)(x / C), x % C, (int)e); }\n" \
    "                else if (!strcmp(kind, \"alltoall\")) want = val((int)(x / C), (long)r * C + x % C, (int)e);\n" \
    "                else if (!strcmp(kind, \"broadcast\")) want = val(root, x, (int)e);\n"  \
    "                else if (!strcmp(kind, \"scatter\")) want = val(root, (long)r * C + x, (int)e);\n" \
    "                else if (!strcmp(kind, \"reducescatter\")) { for (int p = 0; p < P; p++) want += val(p, (long)r * C + x, (int)e); }\n" \
    "                else { want_it = strcmp(kind, \"reduce\") || r == root; for (int p = 0; p < P; p++) want += val(p, x, (int)e); }\n" \
    "                if (want_it && o[x * n + e] != want) {\n"                                 \
    "                    printf(\"%s: rank %d chunk %ld elem %zu is %g, expected %g\\n\", kind, r, x, e,\n" \
    "                           (double)o[x * n + e], (double)want);\n"                      \
    "                    bad = 1;\n"                                                         \
    "                }\n"                                                                    \
    "            }\n"                                                                        \
    "    }\n"                                                                                \
    "    return bad;\n"                                                                      \
    "}\n"

static const char *const driver_src =
    "#define CS_HOST_BUILD 1\n"
    "#include GEN_FILE\n"
    DRIVER_COMMON
    "int main(int argc, char **argv)\n"
    "{\n"
    "    int inplace = argc > 1 && atoi(argv[1]);\n"
    "    size_t n = argc > 2 ? (size_t)atoi(argv[2]) : 6;\n"
    "    buffers(inplace, n);\n"
    "    collsynth_ctx ctx;\n"
    "    if (collsynth_setup(&ctx, NULL, n) != 0) { printf(\"setup: %s\\n\", collsynth_error(&ctx)); return 2; }\n"
    "    for (int rep = 0; rep < 2; rep++) { /* twice: flags use a new epoch per run */\n"
    "        fill(n);\n"
    "        if (collsynth_run(&ctx, in, out) != 0) { printf(\"run: %s\\n\", collsynth_error(&ctx)); return 3; }\n"
    "    }\n"
    "    int bad = check(n);\n"
    "    collsynth_teardown(&ctx);\n"
    "    for (int r = 0; r < P; r++) { free(inb[r]); free(outb[r]); }\n"
    "    if (!bad) printf(\"ok\\n\");\n"
    "    return bad;\n"
    "}\n";

/* Slices run together, as separate processes would: slices.h includes each
 * slice's source (the first with the default prefix) and lists the
 * prefixes in FOR_SLICES; every slice gets every rank's memory and runs in
 * its own thread with the same epoch. */
static const char *const slices_driver_src =
    "#define CS_HOST_BUILD 1\n"
    "#include \"slices.h\"\n"
    "#include <pthread.h>\n"
    DRIVER_COMMON
    "typedef struct job { unsigned long long epoch; size_t n; int rc; char err[200]; } job;\n"
    "#define SLICE(pre) \\\n"
    "    static pre##peer pre##peers[P]; \\\n"
    "    static void *pre##thread(void *arg) { job *j = arg; \\\n"
    "        j->rc = pre##run_slice(pre##peers, j->epoch, j->n, NULL, j->err, sizeof j->err); \\\n"
    "        return NULL; }\n"
    "FOR_SLICES(SLICE)\n"
    "int main(int argc, char **argv)\n"
    "{\n"
    "    int inplace = argc > 1 && atoi(argv[1]);\n"
    "    size_t n = argc > 2 ? (size_t)atoi(argv[2]) : 6;\n"
    "    buffers(inplace, n);\n"
    "    void *scratch[P], *flags[P];\n"
    "    for (int r = 0; r < P; r++) {\n"
    "        scratch[r] = calloc(1, collsynth_scratch_bytes(r, n));\n"
    "        flags[r] = calloc(1, collsynth_flags_bytes());\n"
    "    }\n"
    "#define PEERS(pre) for (int r = 0; r < P; r++) { pre##peers[r].input = in[r]; \\\n"
    "    pre##peers[r].output = out[r]; pre##peers[r].scratch = scratch[r]; \\\n"
    "    pre##peers[r].flags = flags[r]; }\n"
    "    FOR_SLICES(PEERS)\n"
    "    for (unsigned long long epoch = 1; epoch <= 2; epoch++) {\n"
    "        fill(n);\n"
    "        pthread_t th[64];\n"
    "        job jobs[64];\n"
    "        int k = 0;\n"
    "#define START(pre) jobs[k].epoch = epoch; jobs[k].n = n; jobs[k].rc = 0; \\\n"
    "    pthread_create(&th[k], NULL, pre##thread, &jobs[k]); k++;\n"
    "        FOR_SLICES(START)\n"
    "        for (int j = 0; j < k; j++) {\n"
    "            pthread_join(th[j], NULL);\n"
    "            if (jobs[j].rc != 0) { printf(\"slice %d: %s\\n\", j, jobs[j].err); return 3; }\n"
    "        }\n"
    "    }\n"
    "    int bad = check(n);\n"
    "    if (!bad) printf(\"ok\\n\");\n"
    "    return bad;\n"
    "}\n";

static char tmpdir[256];

static void make_tmpdir(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/collsynth-cudagen-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(tmpdir));
    char path[512];
    snprintf(path, sizeof path, "%s/driver.c", tmpdir);
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(driver_src, f);
    fclose(f);
    snprintf(path, sizeof path, "%s/slices_driver.c", tmpdir);
    f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(slices_driver_src, f);
    fclose(f);
}

static void remove_tmpdir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    ck_assert_int_eq(system(cmd), 0);
}

static void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    ck_assert_ptr_nonnull(f);
    fputs(text, f);
    fclose(f);
}

/* Runs cmd; returns its exit status and the first line of its output. */
static int run(const char *cmd, char *line, size_t n)
{
    FILE *p = popen(cmd, "r");
    ck_assert_ptr_nonnull(p);
    line[0] = 0;
    char buf[1024];
    bool first = true;
    while (fgets(buf, sizeof buf, p)) {
        if (first)
            snprintf(line, n, "%s", buf);
        first = false;
    }
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Runs a compiled driver out of place and, where the collective allows it,
 * in place; each run must print "ok". */
static void run_modes(const char *exe, cs_coll_kind k, const char *label)
{
    char cmd[1024], line[1024];
    bool inplace = k == CS_COLL_ALLGATHER || k == CS_COLL_REDUCESCATTER ||
                   k == CS_COLL_ALLREDUCE || k == CS_COLL_BROADCAST || k == CS_COLL_REDUCE;
    for (int mode = 0; mode < (inplace ? 2 : 1); mode++) {
        /* 6 elements per chunk: one 128-bit vector and a tail for floats */
        snprintf(cmd, sizeof cmd, "'%s' %d 6 2>&1", exe, mode);
        int rc = run(cmd, line, sizeof line);
        ck_assert_msg(rc == 0 && strncmp(line, "ok", 2) == 0, "%s (%s): %s", label,
                      mode ? "in place" : "out of place", line);
    }
}

/* Generates, compiles the host build and runs it out of place and, where the
 * collective allows it, in place. */
static void host_check(const cs_algorithm *a, const cs_topology *t, const cs_cuda_options *o,
                       const char *label, int idx)
{
    cs_error err;
    char *src;
    int rc = cuda_generate(a, t, o, &src, NULL, &err);
    ck_assert_msg(rc == CS_OK, "%s: %s", label, err.message);
    char cu[512], exe[512], cmd[2048], line[1024];
    snprintf(cu, sizeof cu, "%s/alg%d.cu", tmpdir, idx);
    snprintf(exe, sizeof exe, "%s/alg%d", tmpdir, idx);
    write_file(cu, src);
    free(src);
    snprintf(cmd, sizeof cmd, "cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 "
             "-DGEN_FILE='\"%s\"' -x c '%s/driver.c' -pthread -o '%s' 2>&1", cu, tmpdir, exe);
    rc = run(cmd, line, sizeof line);
    ck_assert_msg(rc == 0, "%s: host build does not compile: %s", label, line);
    run_modes(exe, a->collective.kind, label);
}

static void host_matrix(unsigned which)
{
    cgt_set set;
    cs_error err;
    int rc = cgt_build(&set, which, 0, &err);
    ck_assert_msg(rc == CS_OK, "building the algorithms failed: %s", err.message);
    ck_assert_int_ge(set.n, 8);
    make_tmpdir();
    for (int i = 0; i < set.n; i++)
        host_check(set.algs[i].alg, set.algs[i].topo, NULL, set.algs[i].label, i);
    remove_tmpdir();
    cgt_free(&set);
}

/* Compiles the slices of `a` (ranks split into pieces of `width`) into one
 * program that runs them together, as one process per slice would, and
 * checks the result in and out of place. */
static void slices_check(const cs_algorithm *a, const cs_topology *t, int width, const char *label,
                         int idx)
{
    cs_error err;
    char path[600], cmd[4096], line[1024], exe[600];
    char header[8192];
    size_t hl = 0;
    char list[2048] = "";
    for (int lo = 0; lo < a->ranks; lo += width) {
        int hi = lo + width - 1 < a->ranks - 1 ? lo + width - 1 : a->ranks - 1;
        cs_cuda_options o;
        cuda_options_default(&o);
        char prefix[32];
        snprintf(prefix, sizeof prefix, "s%d_", lo);
        if (lo > 0)
            o.prefix = prefix; /* the first keeps collsynth_, which the driver uses */
        char *src;
        int rc = cuda_generate_ranks(a, t, &o, lo, hi, &src, NULL, &err);
        ck_assert_msg(rc == CS_OK, "%s: slice %d-%d: %s", label, lo, hi, err.message);
        char want[64];
        snprintf(want, sizeof want, "_RANK_LO %d\n", lo);
        ck_assert_ptr_nonnull(strstr(src, want));
        snprintf(path, sizeof path, "%s/alg%d_%d.cu", tmpdir, idx, lo);
        write_file(path, src);
        free(src);
        hl += (size_t)snprintf(header + hl, sizeof header - hl, "#include \"%s\"\n", path);
        size_t ll = strlen(list);
        snprintf(list + ll, sizeof list - ll, " X(%s)", lo > 0 ? prefix : "collsynth_");
    }
    snprintf(header + hl, sizeof header - hl, "#define FOR_SLICES(X)%s\n", list);
    snprintf(path, sizeof path, "%s/slices.h", tmpdir);
    write_file(path, header);
    snprintf(exe, sizeof exe, "%s/slices%d", tmpdir, idx);
    snprintf(cmd, sizeof cmd, "cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -Werror -O1 -I'%s' -x c "
             "'%s/slices_driver.c' -pthread -o '%s' 2>&1", tmpdir, tmpdir, exe);
    int rc = run(cmd, line, sizeof line);
    ck_assert_msg(rc == 0, "%s: slices do not compile together: %s", label, line);
    char what[200];
    snprintf(what, sizeof what, "%s, slices of %d", label, width);
    run_modes(exe, a->collective.kind, what);
}

START_TEST(slices_run_together_like_the_whole)
{
    cs_error err;
    cs_topology *t;
    ck_assert_int_eq(topology_builtin("dgx1", &t, &err), CS_OK);
    make_tmpdir();
    struct {
        cs_coll_kind kind;
        const char *method;
        int width;
    } cases[] = {
        {CS_COLL_ALLREDUCE, "ring", 4},
        {CS_COLL_ALLGATHER, "tacos", 1},
        {CS_COLL_REDUCESCATTER, "ring", 3},
        {CS_COLL_BROADCAST, "binomial-tree", 1},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        cs_collective coll;
        collective_init(&coll, cases[c].kind, collective_kind_is_rooted(cases[c].kind) ? 2 : -1);
        cs_algorithm *a = NULL;
        cs_result *r = NULL;
        if (!strcmp(cases[c].method, "tacos")) {
            cs_tacos_options to;
            tacos_options_default(&to);
            to.chunks = 2;
            to.trials = 1;
            to.threads = 1;
            to.keep_sends = true;
            ck_assert_int_eq(tacos_synthesize(t, &coll, &to, &r, &err), CS_OK);
        } else {
            ck_assert_msg(baseline_generate(cases[c].method, t, &coll, NULL, &a, &err) == CS_OK,
                          "%s", err.message);
        }
        const cs_algorithm *alg = r ? r->algs[0] : a;
        char label[128];
        snprintf(label, sizeof label, "%s %s on dgx1", collective_kind_name(cases[c].kind),
                 cases[c].method);
        slices_check(alg, t, cases[c].width, label, (int)c);
        /* the whole range is the whole source, byte for byte */
        char *whole, *all;
        size_t wl, al;
        ck_assert_int_eq(cuda_generate(alg, t, NULL, &whole, &wl, &err), CS_OK);
        ck_assert_int_eq(cuda_generate_ranks(alg, t, NULL, 0, 7, &all, &al, &err), CS_OK);
        ck_assert(wl == al && memcmp(whole, all, wl) == 0);
        free(whole);
        free(all);
        algorithm_free(a);
        result_free(r);
    }
    /* one process driving every GPU cannot run a partial slice */
    cs_collective coll;
    collective_init(&coll, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &coll, NULL, &a, &err), CS_OK);
    char *src, cu[600], exe[600], cmd[2048], line[1024];
    ck_assert_int_eq(cuda_generate_ranks(a, t, NULL, 2, 5, &src, NULL, &err), CS_OK);
    snprintf(cu, sizeof cu, "%s/part.cu", tmpdir);
    snprintf(exe, sizeof exe, "%s/part", tmpdir);
    write_file(cu, src);
    free(src);
    snprintf(cmd, sizeof cmd, "cc -std=c11 -D_GNU_SOURCE -O1 -DGEN_FILE='\"%s\"' -x c "
             "'%s/driver.c' -pthread -o '%s' 2>&1", cu, tmpdir, exe);
    ck_assert_msg(run(cmd, line, sizeof line) == 0, "%s", line);
    snprintf(cmd, sizeof cmd, "'%s' 0 6 2>&1", exe);
    ck_assert_int_eq(run(cmd, line, sizeof line), 3);
    ck_assert_msg(strstr(line, "holds ranks 2-5 of 8 only"), "%s", line);
    /* bad ranges */
    ck_assert_int_eq(cuda_generate_ranks(a, t, NULL, 5, 4, &src, NULL, &err), CS_EINVAL);
    ck_assert_int_eq(cuda_generate_ranks(a, t, NULL, 0, 8, &src, NULL, &err), CS_EINVAL);
    ck_assert_msg(strstr(err.message, "0-7"), "%s", err.message);
    algorithm_free(a);
    remove_tmpdir();
    topology_free(t);
}
END_TEST

START_TEST(host_build_runs_baselines_right) { host_matrix(CGT_BASELINE); }
END_TEST

START_TEST(host_build_runs_smt_frontier_right) { host_matrix(CGT_SMT); }
END_TEST

START_TEST(host_build_runs_tacos_right) { host_matrix(CGT_TACOS); }
END_TEST

START_TEST(element_types_and_threads)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("dgx1", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLREDUCE, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    make_tmpdir();
    cs_cuda_options o;
    cuda_options_default(&o);
    o.elem = CS_CUDA_DOUBLE;
    o.threads = 64;
    host_check(a, t, &o, "allreduce ring double", 0);
    o.elem = CS_CUDA_INT32;
    host_check(a, t, &o, "allreduce ring int32", 1);
    remove_tmpdir();
    char *src;
    ck_assert_int_eq(cuda_generate(a, t, &o, &src, NULL, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(src, "#define COLLSYNTH_THREADS 64"));
    ck_assert_ptr_nonnull(strstr(src, "typedef int4 collsynth_vec_t;"));
    ck_assert_ptr_nonnull(strstr(src, "__threadfence_system()"));
    ck_assert_ptr_nonnull(strstr(src, "cudaDeviceEnablePeerAccess"));
    free(src);
    cs_cuda_elem e;
    ck_assert_int_eq(cuda_elem_from_name("double", &e, &err), CS_OK);
    ck_assert_int_eq(e, CS_CUDA_DOUBLE);
    ck_assert_int_eq(cuda_elem_from_name("half", &e, &err), CS_EINVAL);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

START_TEST(options_are_checked)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("ring:4", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    cs_cuda_options o;
    cuda_options_default(&o);
    char *src;
    o.prefix = "my_ag_";
    ck_assert_int_eq(cuda_generate(a, t, &o, &src, NULL, &err), CS_OK);
    ck_assert_ptr_nonnull(strstr(src, "int my_ag_run(my_ag_ctx *ctx"));
    ck_assert_ptr_nonnull(strstr(src, "#define MY_AG_RANKS 4"));
    ck_assert_ptr_nonnull(strstr(src, "#define MY_AG_KIND \"allgather\""));
    /* a one-way ring: peer access only from each rank to its successor */
    ck_assert_ptr_nonnull(strstr(src, "#define MY_AG_NPEERS 4\n"));
    ck_assert_ptr_null(strstr(src, "collsynth_"));
    free(src);
    o.prefix = "9bad";
    ck_assert_int_eq(cuda_generate(a, t, &o, &src, NULL, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "prefix");
    o.prefix = NULL;
    o.threads = 100;
    ck_assert_int_eq(cuda_generate(a, t, &o, &src, NULL, &err), CS_EINVAL);
    ck_assert_str_eq(err.field, "threads");
    algorithm_free(a);
    topology_free(t);
    /* one node only */
    ck_assert_int_eq(topology_builtin("ring:65", &t, &err), CS_OK);
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    ck_assert_int_eq(cuda_generate(a, t, NULL, &src, NULL, &err), CS_ELIMIT);
    ck_assert_msg(strstr(err.message, "65 ranks"), "%s", err.message);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

/* The directory holding nvcc's bin/ (for cuobjdump next to it). */
static const char *nvcc_dir(const char *nvcc)
{
    static char dir[512];
    snprintf(dir, sizeof dir, "%s", nvcc);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    else
        snprintf(dir, sizeof dir, ".");
    return dir;
}

/* A wait that can never be satisfied (a transfer made to wait for itself)
 * must end the host build's run with a deadlock error, not hang. */
START_TEST(host_build_reports_deadlock)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("ring:4", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_algorithm *a;
    ck_assert_int_eq(baseline_generate("ring", t, &c, NULL, &a, &err), CS_OK);
    char *src;
    ck_assert_int_eq(cuda_generate(a, t, NULL, &src, NULL, &err), CS_OK);
    /* find the first task with a dependency: {..., dep_begin, ndeps} */
    char *tasks = strstr(src, "collsynth_task collsynth_tasks[");
    ck_assert_ptr_nonnull(tasks);
    char *line = strchr(tasks, '\n') + 1;
    int id = -1, begin = -1;
    for (int k = 0; line && *line == ' ' && id < 0; k++) {
        int v[12];
        ck_assert_int_eq(sscanf(line, " {%d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d, %d}", &v[0],
                                &v[1], &v[2], &v[3], &v[4], &v[5], &v[6], &v[7], &v[8], &v[9],
                                &v[10], &v[11]), 12);
        if (v[11] > 0) {
            id = v[0]; /* the task's flag id */
            begin = v[10];
        }
        line = strchr(line, '\n') + 1;
    }
    ck_assert_int_ge(id, 0);
    /* rewrite the deps table with that dependency pointing at the task itself */
    char *deps = strstr(src, "collsynth_deps[");
    ck_assert_ptr_nonnull(deps);
    char *p = strchr(deps, '{') + 1;
    for (int k = 0; k < 2 * begin; k++)
        p = strchr(p, ',') + 1;
    while (*p == ' ' || *p == '\n')
        p++;
    char *end = p;
    while (*end >= '0' && *end <= '9')
        end++;
    size_t n = strlen(src) + 32;
    char *patched = malloc(n);
    snprintf(patched, n, "%.*s%d%s", (int)(p - src), src, id, end);
    make_tmpdir();
    char cu[512], exe[512], cmd[2048], out[1024];
    snprintf(cu, sizeof cu, "%s/stuck.cu", tmpdir);
    snprintf(exe, sizeof exe, "%s/stuck", tmpdir);
    write_file(cu, patched);
    snprintf(cmd, sizeof cmd, "cc -std=c11 -D_GNU_SOURCE -O1 -DCOLLSYNTH_HOST_TIMEOUT_S=0.5 "
             "-DGEN_FILE='\"%s\"' -x c '%s/driver.c' -pthread -o '%s' 2>&1", cu, tmpdir, exe);
    ck_assert_msg(run(cmd, out, sizeof out) == 0, "%s", out);
    snprintf(cmd, sizeof cmd, "'%s' 0 6 2>&1", exe);
    int rc = run(cmd, out, sizeof out);
    ck_assert_int_eq(rc, 3);
    ck_assert_msg(strstr(out, "run: timed out") && strstr(out, "deadlock"), "%s", out);
    remove_tmpdir();
    free(patched);
    free(src);
    algorithm_free(a);
    topology_free(t);
}
END_TEST

static const char *find_nvcc(void)
{
    static char path[512];
    const char *env = getenv("NVCC");
    if (env && access(env, X_OK) == 0)
        return env;
    if (access("/usr/local/cuda/bin/nvcc", X_OK) == 0)
        return "/usr/local/cuda/bin/nvcc";
    FILE *p = popen("command -v nvcc 2>/dev/null", "r");
    if (!p)
        return NULL;
    path[0] = 0;
    if (!fgets(path, sizeof path, p))
        path[0] = 0;
    pclose(p);
    path[strcspn(path, "\n")] = 0;
    return path[0] ? path : NULL;
}

START_TEST(nvcc_compiles_generated_sources)
{
    const char *nvcc = find_nvcc();
    if (!nvcc) {
        printf("test_cuda_gen: SKIPPED nvcc_compiles_generated_sources: nvcc not found "
               "(set NVCC or install the CUDA toolkit)\n");
        return;
    }
    /* the DGX-1 SMT frontier (allgather and allreduce), one baseline, one TACOS */
    cgt_set smt, base, tacos;
    cs_error err;
    unsigned kinds = (1u << CS_COLL_ALLGATHER) | (1u << CS_COLL_ALLREDUCE);
    ck_assert_msg(cgt_build(&smt, CGT_SMT, kinds, &err) == CS_OK, "%s", err.message);
    ck_assert_msg(cgt_build(&base, CGT_BASELINE, 1u << CS_COLL_ALLREDUCE, &err) == CS_OK, "%s",
                  err.message);
    ck_assert_msg(cgt_build(&tacos, CGT_TACOS, 1u << CS_COLL_ALLGATHER, &err) == CS_OK, "%s",
                  err.message);
    make_tmpdir();
    char list[512];
    snprintf(list, sizeof list, "%s/jobs.txt", tmpdir);
    FILE *jobs = fopen(list, "w");
    ck_assert_ptr_nonnull(jobs);
    int nfiles = 0;
    cgt_set *sets[] = {&smt, &base, &tacos};
    for (int s = 0; s < 3; s++)
        for (int i = 0; i < sets[s]->n; i++) {
            char *src;
            ck_assert_int_eq(cuda_generate(sets[s]->algs[i].alg, sets[s]->algs[i].topo, NULL,
                                           &src, NULL, &err), CS_OK);
            char cu[512];
            snprintf(cu, sizeof cu, "%s/k%d.cu", tmpdir, nfiles);
            write_file(cu, src);
            free(src);
            /* one compiler run emits both sm_80 and sm_90 code */
            fprintf(jobs, "%s -gencode arch=compute_80,code=sm_80 -gencode "
                    "arch=compute_90,code=sm_90 -Werror all-warnings -c %s -o %s.o\n", nvcc, cu, cu);
            nfiles++;
        }
    /* and a slice: ranks 2-5 of the baseline (run_slice in the CUDA build) */
    {
        char *src;
        ck_assert_int_eq(cuda_generate_ranks(base.algs[0].alg, base.algs[0].topo, NULL, 2, 5,
                                             &src, NULL, &err), CS_OK);
        char cu[512];
        snprintf(cu, sizeof cu, "%s/k%d.cu", tmpdir, nfiles);
        write_file(cu, src);
        free(src);
        fprintf(jobs, "%s -gencode arch=compute_80,code=sm_80 -gencode "
                "arch=compute_90,code=sm_90 -Werror all-warnings -c %s -o %s.o\n", nvcc, cu, cu);
        nfiles++;
    }
    fclose(jobs);
    ck_assert_int_ge(nfiles, 5);
    /* at most two compilers at a time (the machine has two cores) */
    char cmd[4096], line[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && timeout 300 xargs -P 2 -I{} "
             "sh -c 'out=$({} 2>&1) || echo \"FAILED: {}: $out\"' < '%s' 2>&1", tmpdir, list);
    int rc = run(cmd, line, sizeof line);
    ck_assert_msg(rc == 0 && line[0] == 0, "nvcc failed (exit %d): %s", rc, line);
    for (int k = 0; k < nfiles; k++) {
        char o[600];
        struct stat st;
        snprintf(o, sizeof o, "%s/k%d.cu.o", tmpdir, k);
        ck_assert_msg(stat(o, &st) == 0 && st.st_size > 0, "no object %s", o);
        /* both architectures are in the fat binary */
        snprintf(cmd, sizeof cmd, "'%s/../bin/cuobjdump' --list-elf '%s' 2>/dev/null | "
                 "grep -c -E 'sm_(80|90)'", nvcc_dir(nvcc), o);
        if (run(cmd, line, sizeof line) <= 1 && line[0] && atoi(line) > 0)
            ck_assert_msg(atoi(line) >= 2, "%s: expected sm_80 and sm_90 code, got %s", o, line);
    }
    remove_tmpdir();
    cgt_free(&smt);
    cgt_free(&base);
    cgt_free(&tacos);
}
END_TEST

static Suite *cuda_gen_suite(void)
{
    Suite *s = suite_create("cuda_gen");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, host_build_runs_baselines_right);
    tcase_add_test(tc, host_build_runs_smt_frontier_right);
    tcase_add_test(tc, host_build_runs_tacos_right);
    tcase_add_test(tc, element_types_and_threads);
    tcase_add_test(tc, options_are_checked);
    tcase_add_test(tc, host_build_reports_deadlock);
    tcase_add_test(tc, slices_run_together_like_the_whole);
    tcase_add_test(tc, nvcc_compiles_generated_sources);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(cuda_gen_suite)
