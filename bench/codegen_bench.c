/*
 * codegen_bench - how long lowering a large TACOS schedule takes.
 *
 *     build/bench/codegen_bench [TOPOLOGY] [COLLECTIVE] [CHUNKS] [RUNS]
 *
 * Synthesizes once with TACOS (timed, for comparison), then RUNS times:
 * MSCCL XML for the old runtime, the same document parsed and executed by
 * the interpreter, and (for <= 64 ranks) the CUDA source.  Prints the median
 * and each run in milliseconds, plus sizes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda_gen.h"
#include "msccl_interp.h"
#include "msccl_xml.h"
#include "tacos.h"
#include "../tests/bench_stats.h"

static void show(const char *what, double *v, int n)
{
    printf("%-34s", what);
    for (int i = 0; i < n; i++)
        printf(" %9.1f", v[i] * 1e3);
    printf("   median %9.1f ms\n", bench_median(v, n) * 1e3);
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : "torus2d:16x16";
    const char *kind = argc > 2 ? argv[2] : "allgather";
    int chunks = argc > 3 ? atoi(argv[3]) : 1;
    int runs = argc > 4 ? atoi(argv[4]) : 5;
    if (runs < 1 || runs > 100 || chunks < 1)
        runs = 5;
    cs_error err;
    cs_topology *t;
    if (topology_load(topo, NULL, &t, &err) != CS_OK) {
        fprintf(stderr, "codegen_bench: %s\n", err.message);
        return 2;
    }
    cs_collective c;
    cs_coll_kind k;
    if (collective_kind_from_name(kind, &k) != CS_OK) {
        fprintf(stderr, "codegen_bench: unknown collective %s\n", kind);
        return 2;
    }
    collective_init(&c, k, collective_kind_is_rooted(k) ? 0 : -1);
    cs_tacos_options to;
    tacos_options_default(&to);
    to.chunks = chunks;
    to.trials = 1;
    to.threads = 1;
    to.keep_sends = true;
    cs_result *r;
    double t0 = cs_now();
    if (tacos_synthesize(t, &c, &to, &r, &err) != CS_OK || r->nalgs < 1) {
        fprintf(stderr, "codegen_bench: tacos: %s\n", err.message);
        return 1;
    }
    double synth = cs_now() - t0;
    const cs_algorithm *a = r->algs[0];
    printf("codegen_bench: %s %s on %s: %d ranks, %d chunks, %ld sends; TACOS synthesis "
           "(1 trial, 1 thread) %.1f ms\n", kind, a->method, topo, a->ranks, a->chunks, a->nsends,
           synth * 1e3);
    double *gx = calloc((size_t)runs, sizeof(double)), *ip = calloc((size_t)runs, sizeof(double));
    double *gc = calloc((size_t)runs, sizeof(double));
    size_t xlen = 0, clen = 0;
    int crc = CS_OK, xrc = CS_OK;
    for (int i = 0; i < runs; i++) {
        cs_msccl_options mo;
        msccl_options_default(&mo);
        mo.runtime = CS_MSCCL_RUNTIME_MSCCL;
        char *xml = NULL;
        t0 = cs_now();
        xrc = msccl_xml_generate(a, t, &mo, &xml, &xlen, &err);
        gx[i] = cs_now() - t0;
        if (xrc != CS_OK) {
            printf("msccl xml: %s\n", err.message);
            crc = CS_EINVAL;
            break;
        }
        cs_msccl_doc *d;
        t0 = cs_now();
        int rc = msccl_doc_parse(xml, xlen, &d, &err);
        if (rc == CS_OK) {
            cs_msccl_interp_options o;
            msccl_interp_options_default(&o);
            o.elems_per_chunk = 1;
            o.collective = &c;
            rc = msccl_interp_check(d, &o, NULL, &err);
            msccl_doc_free(d);
        }
        ip[i] = cs_now() - t0;
        if (rc == CS_ELIMIT) {
            if (i == 0)
                printf("interpreter: skipped (%s)\n", err.message);
            ip[i] = 0;
        } else if (rc != CS_OK) {
            printf("interpreter: %s\n", err.message);
            return 1;
        }
        free(xml);
        char *cu = NULL;
        t0 = cs_now();
        crc = cuda_generate(a, t, NULL, &cu, &clen, &err);
        gc[i] = cs_now() - t0;
        free(cu);
    }
    if (xrc == CS_OK) {
        show("msccl xml generation (ms):", gx, runs);
        show("xml parse + interpreter check (ms):", ip, runs);
        printf("xml document: %zu bytes\n", xlen);
    }
    if (crc == CS_OK) {
        show("cuda generation (ms):", gc, runs);
        printf("cuda source: %zu bytes\n", clen);
    } else if (xrc == CS_OK) {
        printf("cuda: %s\n", err.message);
    }
    free(gx);
    free(ip);
    free(gc);
    result_free(r);
    topology_free(t);
    return 0;
}
