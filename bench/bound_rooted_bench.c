/*
 * bound_rooted_bench.c - the rooted collectives' additive time bound
 * (bounds_time.c, "latency to the cut plus the cut"; docs/BENCHMARKS.md,
 * "Rooted bound: latency plus cut").
 *
 *   bound_rooted_bench ring N COLL [RUNS]   dgx1ring:N (the Slurm hook's
 *       DGX-1 nodes on a 12.5 GB/s ring, root 0): the bound at 1 MiB and
 *       1 GiB without the additive lines (max(A + B L, D), the bound before
 *       them) and with them, hierarchical's best simulated time and both
 *       ratios, and collective_time_bound's median milliseconds of RUNS calls
 *   bound_rooted_bench speed [RUNS]         median milliseconds of RUNS calls
 *       of collective_time_bound for broadcast, reduce, scatter and gather
 *       (root 0) on dgx1ring:32, dgx1ring:64, dgx1ring:128, dgxh100:128,
 *       ndv2:128 (1024 ranks each from dgx1ring:128 on),
 *       torus2d:32x32 and mesh2d:100x100
 *
 * The speed mode uses nothing but collective_time_bound, so the same source
 * built against the bounds code before the lines gives the "before" figures
 * (bench/bound_rooted.sh before).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "hier.h"
#include "simulate.h"
#include "synthesize.h"
#include "../tests/bench_stats.h"
#include "../tests/cluster_testutil.h"
#include "../tests/topology_testutil.h"

static cs_topology *load(const char *spec)
{
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
        cs_topology *t = NULL;
        cs_error err;
        cs_topology_parse_options po = {0};
        if (topology_from_json(expanded, &po, &t, &err) != CS_OK) {
            fprintf(stderr, "cluster topology: %s\n", err.message);
            exit(1);
        }
        json_decref(topo);
        json_decref(expanded);
        return t;
    }
    return test_topology(spec);
}

static double bound_ms(const cs_topology *t, const cs_collective *c, int runs, cs_time_bound *b)
{
    double *ms = malloc(sizeof(double) * (size_t)runs);
    cs_error err;
    for (int r = 0; r < runs; r++) {
        double t0 = cs_now();
        if (collective_time_bound(t, c, b, &err) != CS_OK) {
            fprintf(stderr, "%s: %s\n", t->name, err.message);
            exit(1);
        }
        ms[r] = (cs_now() - t0) * 1e3;
    }
    qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_double);
    double m = ms[runs / 2];
    free(ms);
    return m;
}

static int speed(int runs)
{
    static const char *const topos[] = {"dgx1ring:32", "dgx1ring:64", "dgx1ring:128",
                                        "dgxh100:128", "ndv2:128",
                                        "torus2d:32x32", "mesh2d:100x100"};
    static const cs_coll_kind kinds[] = {CS_COLL_BROADCAST, CS_COLL_REDUCE, CS_COLL_SCATTER,
                                         CS_COLL_GATHER};
    for (size_t i = 0; i < sizeof topos / sizeof *topos; i++) {
        cs_topology *t = load(topos[i]);
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
            cs_collective c;
            collective_init(&c, kinds[k], 0);
            cs_time_bound b;
            double ms = bound_ms(t, &c, runs, &b);
            printf("speed topology %s ranks %d collective %s median_ms %.2f bound_1MiB_us %.3f\n",
                   topos[i], t->ranks, collective_kind_name(kinds[k]), ms,
                   time_bound_us(&b, 1048576.0, 1));
            fflush(stdout);
        }
        topology_free(t);
    }
    return 0;
}

#ifdef CS_TB_MAX_LINES
static int ring(int nodes, const char *coll, int runs)
{
    char spec[32];
    snprintf(spec, sizeof spec, "dgx1ring:%d", nodes);
    cs_topology *t = load(spec);
    cs_coll_kind kind;
    if (collective_kind_from_name(coll, &kind) != CS_OK) {
        fprintf(stderr, "unknown collective %s\n", coll);
        return 2;
    }
    cs_collective c;
    collective_init(&c, kind, 0);
    cs_time_bound b;
    double ms = bound_ms(t, &c, runs, &b);
    cs_result *res = NULL;
    cs_error err;
    if (hier_synthesize(t, &c, NULL, &res, &err) != CS_OK) {
        fprintf(stderr, "hierarchical: %s\n", err.message);
        return 1;
    }
    static const double sizes[] = {1048576.0, 1073741824.0};
    for (int k = 0; k < 2; k++) {
        double best = INFINITY;
        for (int i = 0; i < res->nalgs; i++) {
            cs_sim_result sr;
            if (simulate_algorithm(t, res->algs[i], sizes[k], &sr, &err) != CS_OK)
                continue;
            best = fmin(best, sr.time_us);
            sim_result_free(&sr);
        }
        double L = sizes[k];
        double old = fmax(b.latency_us + b.bandwidth_us_per_byte * L, b.path_latency_us);
        double now = time_bound_us(&b, L, 1);
        const char *why = "cut or path";
        for (int i = 0; i < b.nlines; i++)
            if (b.lines[i].latency_us + b.lines[i].bandwidth_us_per_byte * L >= now * (1 - 1e-12))
                why = b.lines[i].cut;
        printf("ring nodes %d collective %s size %s old_bound_us %.2f new_bound_us %.2f "
               "hier_us %.2f old_ratio %.3f new_ratio %.3f bound_ms %.2f line \"%s\"\n", nodes,
               coll, k ? "1GiB" : "1MiB", old, now, best, old / best, now / best, ms, why);
    }
    result_free(res);
    topology_free(t);
    return 0;
}
#endif

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "speed") == 0)
        return speed(argc > 2 && atoi(argv[2]) > 0 ? atoi(argv[2]) : 5);
#ifdef CS_TB_MAX_LINES
    if (argc >= 4 && strcmp(argv[1], "ring") == 0)
        return ring(atoi(argv[2]), argv[3], argc > 4 && atoi(argv[4]) > 0 ? atoi(argv[4]) : 5);
#endif
    fprintf(stderr, "usage: bound_rooted_bench ring N COLL [RUNS] | speed [RUNS]\n");
    return 2;
}
