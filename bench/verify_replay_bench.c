/*
 * verify_replay_bench.c - algorithm_verify's fast (dense) replay against the
 * general chunk-by-chunk replay on the same algorithms, in the same run
 * (docs/BENCHMARKS.md, "Hierarchical rings and verification").
 *
 *   verify_replay_bench TOPO COLLECTIVE [RUNS]
 *
 * Synthesizes COLLECTIVE on TOPO with method hierarchical (dgx1ring:N: the
 * Slurm hook's DGX-1 ring cluster; or any topology spec), then times
 * algorithm_verify and algorithm_verify_general on every frontier
 * algorithm, RUNS times each, interleaved (default 5), and prints the
 * medians, their ratio and whether both verdicts agree.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hier.h"
#include "verify.h"

#include "../tests/bench_stats.h"
#include "../tests/cluster_testutil.h"

static cs_topology *load_topology(const char *spec)
{
    cs_error err;
    cs_topology *t = NULL;
    int nodes;
    if (sscanf(spec, "dgx1ring:%d", &nodes) == 1) {
        json_t *expanded = NULL;
        char msg[256];
        json_t *topo = cluster_hook_dgx1("hook", nodes, 1, "ring", 12.5, &expanded, msg,
                                         sizeof msg);
        if (!topo) {
            fprintf(stderr, "cluster: %s\n", msg);
            exit(1);
        }
        cs_topology_parse_options po = {0};
        if (topology_from_json(expanded, &po, &t, &err) != CS_OK) {
            fprintf(stderr, "cluster topology: %s\n", err.message);
            exit(1);
        }
        json_decref(topo);
        json_decref(expanded);
        return t;
    }
    if (topology_load(spec, NULL, &t, &err) != CS_OK) {
        fprintf(stderr, "%s: %s\n", spec, err.message);
        exit(1);
    }
    return t;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: verify_replay_bench TOPO COLLECTIVE [RUNS]\n");
        return 2;
    }
    cs_topology *t = load_topology(argv[1]);
    cs_collective c;
    cs_coll_kind kind;
    if (collective_kind_from_name(argv[2], &kind) != CS_OK) {
        fprintf(stderr, "unknown collective %s\n", argv[2]);
        return 2;
    }
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? 0 : -1);
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    if (runs < 1)
        runs = 1;
    cs_result *res = NULL;
    cs_error err;
    if (hier_synthesize(t, &c, NULL, &res, &err) != CS_OK) {
        fprintf(stderr, "hierarchical: %s\n", err.message);
        return 1;
    }
    double *fast = calloc((size_t)runs, sizeof *fast), *gen = calloc((size_t)runs, sizeof *gen);
    for (int i = 0; i < res->nalgs; i++) {
        const cs_algorithm *a = res->algs[i];
        int rf = 0, rg = 0;
        for (int r = 0; r < runs; r++) {
            double t0 = cs_now();
            rf = algorithm_verify(t, a, NULL);
            fast[r] = cs_now() - t0;
            t0 = cs_now();
            rg = algorithm_verify_general(t, a, NULL);
            gen[r] = cs_now() - t0;
        }
        double mf = bench_median(fast, runs), mg = bench_median(gen, runs);
        double lf = fast[0], lg = gen[0];
        for (int r = 1; r < runs; r++) {
            lf = fast[r] < lf ? fast[r] : lf;
            lg = gen[r] < lg ? gen[r] : lg;
        }
        printf("%s %s [%d] %ld sends, %d chunks, %d ranks: verify %.4f s, general replay "
               "%.4f s (median of %d): %.2fx; min %.4f / %.4f s: %.2fx; verdicts %s\n", t->name,
               argv[2], i, a->nsends, a->chunks, t->ranks, mf, mg, runs, mg / mf, lf, lg, lg / lf,
               rf == rg ? (rf == CS_OK ? "agree (ok)" : "agree (refused)") : "DIFFER");
        fflush(stdout);
    }
    free(fast);
    free(gen);
    result_free(res);
    topology_free(t);
    return 0;
}
