/* Per-rank MSCCL slices at 1024 ranks (make test-slow: minutes, not seconds).
 *
 * - TACOS allgather on mesh2d:32x32 (1,047,552 sends): every rank's slice for
 *   the msccl runtime passes that runtime's limits counted on its text, and
 *   the slices concatenated are the full document byte for byte; for the
 *   executor every 8th rank's slice passes its limits.  (The full document is
 *   248 MB, beyond the interpreter's 64 MiB: its correctness at this size is
 *   the byte identity with slices and the smaller runs below.)
 * - Broadcast and reduce by binomial trees on hypercube:10 (1024 ranks, 4
 *   chunks): every rank's slice reassembled runs right in the interpreter,
 *   for both runtimes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "check_main.h"
#include "codegen_testutil.h"
#include "msccl_check.h"
#include "msccl_interp.h"
#include "msccl_xml.h"
#include "tacos.h"
#include "verify.h"

typedef struct sink {
    char *s;
    size_t len, cap;
} sink;

static int to_sink(void *ctx, const char *data, size_t len)
{
    sink *k = ctx;
    if (k->len + len + 1 > k->cap) {
        size_t cap = k->cap ? k->cap * 2 : 1 << 20;
        while (cap < k->len + len + 1)
            cap *= 2;
        char *n = realloc(k->s, cap);
        if (!n)
            return CS_ENOMEM;
        k->s = n;
        k->cap = cap;
    }
    memcpy(k->s + k->len, data, len);
    k->len += len;
    k->s[k->len] = 0;
    return CS_OK;
}

START_TEST(mesh32x32_allgather_slices_fit_and_reassemble)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("mesh2d:32x32", &t, &err), CS_OK);
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_tacos_options to;
    tacos_options_default(&to);
    to.trials = 1;
    to.threads = 1;
    to.keep_sends = true;
    cs_result *r;
    ck_assert_msg(tacos_synthesize(t, &c, &to, &r, &err) == CS_OK, "%s", err.message);
    const cs_algorithm *a = r->algs[0];
    ck_assert_int_eq(a->nsends, 1024L * 1023);
    cs_msccl_options o;
    msccl_options_default(&o);
    o.runtime = CS_MSCCL_RUNTIME_MSCCL;
    sink full = {0}, joined = {0};
    ck_assert_msg(msccl_xml_write_ranks(a, t, &o, 0, 1023, to_sink, &full, &err) == CS_OK, "%s",
                  err.message);
    size_t header = (size_t)(strchr(full.s, '\n') - full.s) + 1;
    ck_assert_int_eq(to_sink(&joined, full.s, header), CS_OK);
    long max_elements = 0;
    for (int rank = 0; rank < 1024; rank++) {
        char *one;
        size_t len;
        ck_assert_int_eq(msccl_xml_generate_ranks(a, t, &o, rank, rank, &one, &len, &err), CS_OK);
        cs_msccl_check_stats st;
        ck_assert_msg(msccl_check_limits(one, len, o.runtime, &st, &err) == CS_OK, "rank %d: %s",
                      rank, err.message);
        if (st.max_elements > max_elements)
            max_elements = st.max_elements;
        ck_assert_int_eq(memcmp(one, full.s, header), 0);
        ck_assert_int_eq(to_sink(&joined, one + header, len - header - 8), CS_OK);
        free(one);
    }
    ck_assert_int_eq(to_sink(&joined, "</algo>\n", 8), CS_OK);
    ck_assert_int_eq(joined.len, full.len);
    ck_assert_int_eq(memcmp(joined.s, full.s, full.len), 0);
    /* the full document: every rank also parses 1024 <gpu> elements */
    cs_msccl_check_stats st;
    ck_assert_msg(msccl_check_limits(full.s, full.len, o.runtime, &st, &err) == CS_OK, "%s",
                  err.message);
    ck_assert_int_eq(st.gpus, 1024);
    printf("slow_codegen_1024_ranks: full document %zu bytes; largest rank parses %ld elements in "
           "the full document, %ld in its slice\n", full.len, st.max_elements, max_elements);
    free(full.s);
    free(joined.s);
    /* the executor: 64 steps per block, channels spread */
    o.runtime = CS_MSCCL_RUNTIME_EXECUTOR;
    for (int rank = 0; rank < 1024; rank += 8) {
        char *one;
        size_t len;
        ck_assert_msg(msccl_xml_generate_ranks(a, t, &o, rank, rank, &one, &len, &err) == CS_OK,
                      "rank %d: %s", rank, err.message);
        ck_assert_msg(msccl_check_limits(one, len, o.runtime, &st, &err) == CS_OK, "rank %d: %s",
                      rank, err.message);
        ck_assert_int_le(st.max_steps, 64);
        free(one);
    }
    result_free(r);
    topology_free(t);
}
END_TEST

START_TEST(hypercube1024_tree_slices_run_right)
{
    cs_topology *t;
    cs_error err;
    ck_assert_int_eq(topology_builtin("hypercube:10", &t, &err), CS_OK);
    ck_assert_int_eq(t->ranks, 1024);
    cs_coll_kind kinds[] = {CS_COLL_BROADCAST, CS_COLL_REDUCE};
    for (size_t k = 0; k < 2; k++) {
        cs_collective c;
        collective_init(&c, kinds[k], 5);
        cs_baseline_options bo = {.chunks = 4};
        cs_algorithm *a;
        ck_assert_msg(baseline_generate("binomial-tree", t, &c, &bo, &a, &err) == CS_OK, "%s",
                      err.message);
        ck_assert_msg(algorithm_verify(t, a, &err) == CS_OK, "%s", err.message);
        cs_msccl_runtime rts[] = {CS_MSCCL_RUNTIME_MSCCL, CS_MSCCL_RUNTIME_EXECUTOR};
        for (int rt = 0; rt < 2; rt++) {
            cs_msccl_options o;
            msccl_options_default(&o);
            o.runtime = rts[rt];
            char *whole, *joined;
            size_t wl, jl;
            ck_assert_int_eq(msccl_xml_generate(a, t, &o, &whole, &wl, &err), CS_OK);
            ck_assert_msg(cgt_reassemble_slices(a, t, &o, 1, &joined, &jl, &err) == CS_OK, "%s",
                          err.message);
            ck_assert(jl == wl && memcmp(joined, whole, wl) == 0);
            ck_assert_msg(msccl_check_limits(joined, jl, o.runtime, NULL, &err) == CS_OK, "%s",
                          err.message);
            cs_msccl_doc *d;
            ck_assert_int_eq(msccl_doc_parse(joined, jl, &d, &err), CS_OK);
            cs_msccl_interp_options io;
            msccl_interp_options_default(&io);
            io.collective = &c;
            io.elems_per_chunk = 2;
            ck_assert_msg(msccl_interp_check(d, &io, NULL, &err) == CS_OK, "%s", err.message);
            msccl_doc_free(d);
            free(whole);
            free(joined);
        }
        algorithm_free(a);
    }
    topology_free(t);
}
END_TEST

static Suite *codegen_1024_suite(void)
{
    Suite *s = suite_create("codegen_1024_ranks");
    TCase *tc = tcase_create("slow");
    tcase_set_timeout(tc, 1800);
    tcase_add_test(tc, hypercube1024_tree_slices_run_right);
    tcase_add_test(tc, mesh32x32_allgather_slices_fit_and_reassemble);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(codegen_1024_suite)
