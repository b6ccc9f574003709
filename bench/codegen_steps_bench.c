/*
 * codegen_steps_bench - CPU time to lower a step schedule (a baseline) to
 * MSCCL XML, where the order of exchanges matters (codegen_plan.h, "Eager
 * exchanges"); bench/codegen_bench.c times TACOS (timed) schedules.
 *
 *     build/bench/codegen_steps_bench [TOPOLOGY] [COLLECTIVE] [BASELINE] [RUNS]
 *
 * Prints the median and each run of msccl_xml_generate (old runtime) in
 * process CPU milliseconds (steadier than wall time on a shared machine).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "baseline.h"
#include "msccl_xml.h"
#include "../tests/bench_stats.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : "hypercube:10";
    const char *kind = argc > 2 ? argv[2] : "allgather";
    const char *method = argc > 3 ? argv[3] : "recursive-doubling";
    int runs = argc > 4 ? atoi(argv[4]) : 3;
    if (runs < 1 || runs > 100)
        runs = 3;
    cs_error err;
    cs_topology *t;
    if (topology_load(topo, NULL, &t, &err) != CS_OK) {
        fprintf(stderr, "codegen_steps_bench: %s\n", err.message);
        return 2;
    }
    cs_coll_kind k;
    if (collective_kind_from_name(kind, &k) != CS_OK) {
        fprintf(stderr, "codegen_steps_bench: unknown collective %s\n", kind);
        return 2;
    }
    cs_collective c;
    collective_init(&c, k, collective_kind_is_rooted(k) ? 0 : -1);
    cs_algorithm *a;
    if (collective_validate(&c, t->ranks, &err) != CS_OK ||
        baseline_generate(method, t, &c, NULL, &a, &err) != CS_OK) {
        fprintf(stderr, "codegen_steps_bench: %s\n", err.message);
        return 1;
    }
    double *v = calloc((size_t)runs, sizeof *v);
    size_t len = 0;
    for (int i = 0; i < runs && v; i++) {
        cs_msccl_options mo;
        msccl_options_default(&mo);
        mo.runtime = CS_MSCCL_RUNTIME_MSCCL;
        char *xml;
        double t0 = cpu_now();
        if (msccl_xml_generate(a, t, &mo, &xml, &len, &err) != CS_OK) {
            fprintf(stderr, "codegen_steps_bench: %s\n", err.message);
            return 1;
        }
        v[i] = cpu_now() - t0;
        free(xml);
    }
    printf("codegen_steps_bench: %s %s on %s: %ld sends, %zu bytes; msccl xml CPU ms:", kind,
           method, topo, a->nsends, len);
    for (int i = 0; i < runs && v; i++)
        printf(" %.1f", v[i] * 1e3);
    printf("   median %.1f\n", v ? bench_median(v, runs) * 1e3 : 0);
    free(v);
    algorithm_free(a);
    collective_free(&c);
    topology_free(t);
    return 0;
}
