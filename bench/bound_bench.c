/*
 * bound_bench.c - the cut-aware time bound (bounds.h): how long it takes,
 * and how close TACOS comes to it.
 *
 *   bound_bench speed [RUNS]     collective_time_bound on dgxh100:128 (1024
 *                                ranks, NVSwitch nodes on 8 rails), ndv2:128
 *                                (1024 ranks, DGX-1 nodes on one 256-port
 *                                fabric switch) and mesh2d:100x100: median
 *                                milliseconds of RUNS calls per collective
 *   bound_bench quality [TRIALS] TACOS (TRIALS trials, 1 chunk) on dgxh100:16
 *                                allreduce and the TACOS paper's
 *                                heterogeneous topologies (dragonfly:4x5,
 *                                switch2d:8x4, rfs3d:2x4x8) allreduce:
 *                                ratio_to_bound at 64 MiB and 1 GiB, the
 *                                schedule simulated on the topology as given
 *                                and as TACOS timed it (on its unwinding of
 *                                the switches), and the old ideal ratio
 *
 *   bound_bench one TOPO COLL    one call, for instruction counts:
 *                                valgrind --tool=callgrind
 *                                --toggle-collect=collective_time_bound
 *
 * Prints one line per measurement, "key value" pairs, for bench/bound.sh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bounds.h"
#include "simulate.h"
#include "synthesize.h"
#include "tacos.h"
#include "../tests/bench_stats.h"
#include "../tests/topology_testutil.h"

static int speed(int runs)
{
    static const char *const topos[] = {"dgxh100:128", "ndv2:128", "mesh2d:100x100"};
    static const cs_coll_kind kinds[] = {CS_COLL_ALLGATHER, CS_COLL_REDUCESCATTER,
                                         CS_COLL_ALLREDUCE, CS_COLL_BROADCAST,
                                         CS_COLL_ALLTOALL};
    double *ms = malloc(sizeof(double) * (size_t)runs);
    for (size_t i = 0; i < sizeof topos / sizeof *topos; i++) {
        cs_topology *t = test_topology(topos[i]);
        for (size_t k = 0; k < sizeof kinds / sizeof *kinds; k++) {
            cs_collective c;
            collective_init(&c, kinds[k], collective_kind_is_rooted(kinds[k]) ? 0 : -1);
            cs_time_bound b;
            cs_error err;
            for (int r = 0; r < runs; r++) {
                double t0 = cs_now();
                if (collective_time_bound(t, &c, &b, &err) != CS_OK) {
                    fprintf(stderr, "%s: %s\n", topos[i], err.message);
                    return 1;
                }
                ms[r] = (cs_now() - t0) * 1e3;
            }
            qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_double);
            printf("speed topology %s ranks %d collective %s median_ms %.2f min_ms %.2f "
                   "kind %s exact %d gbps_effective %.4g cut \"%s\"\n",
                   topos[i], t->ranks, collective_kind_name(kinds[k]), ms[runs / 2], ms[0],
                   b.kind, b.exact, 1e-3 / b.bandwidth_us_per_byte, b.cut);
        }
        topology_free(t);
    }
    free(ms);
    return 0;
}

static int quality(int trials)
{
    static const char *const topos[] = {"dgxh100:16", "dragonfly:4x5", "switch2d:8x4",
                                        "rfs3d:2x4x8"};
    static const double sizes[] = {64.0 * 1048576, 1024.0 * 1048576};
    for (size_t i = 0; i < sizeof topos / sizeof *topos; i++) {
        cs_topology *t = test_topology(topos[i]);
        cs_collective c;
        collective_init(&c, CS_COLL_ALLREDUCE, -1);
        cs_time_bound b;
        cs_error err;
        if (collective_time_bound(t, &c, &b, &err) != CS_OK) {
            fprintf(stderr, "%s: %s\n", topos[i], err.message);
            return 1;
        }
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            cs_tacos_options o;
            tacos_options_default(&o);
            o.trials = trials;
            o.bytes = sizes[s];
            cs_result *res = NULL;
            if (tacos_synthesize(t, &c, &o, &res, &err) != CS_OK || res->nalgs < 1) {
                fprintf(stderr, "%s: tacos: %s\n", topos[i], err.message);
                return 1;
            }
            cs_bound_ratio br;
            if (synth_ratio_to_bound(t, &b, res->algs[0], sizes[s], &br, &err) != CS_OK) {
                fprintf(stderr, "%s: %s\n", topos[i], err.message);
                return 1;
            }
            double own = json_number_value(json_object_get(res->stats, "sim_time_us"));
            double ideal = json_number_value(json_object_get(res->stats, "ratio_to_ideal"));
            printf("quality topology %s collective allreduce bytes %.0f bound_us %.3f "
                   "simulated_us %.3f ratio_to_bound %.4f tacos_timing_us %.3f "
                   "ratio_to_bound_tacos_timing %.4f old_ratio_to_ideal %.4f kind %s cut \"%s\"\n",
                   topos[i], sizes[s], br.bound_us, br.simulated_us, br.ratio, own,
                   own > 0 ? br.bound_us / own : 0, ideal, b.kind, b.cut);
            result_free(res);
        }
        topology_free(t);
    }
    return 0;
}

static int one(const char *topo, const char *kind)
{
    cs_topology *t = test_topology(topo);
    cs_coll_kind k;
    if (collective_kind_from_name(kind, &k) != CS_OK) {
        fprintf(stderr, "unknown collective %s\n", kind);
        return 2;
    }
    cs_collective c;
    collective_init(&c, k, collective_kind_is_rooted(k) ? 0 : -1);
    cs_time_bound b;
    cs_error err;
    int rc = collective_time_bound(t, &c, &b, &err);
    if (rc == CS_OK)
        printf("one topology %s collective %s seconds %.4f kind %s cut \"%s\"\n", topo, kind,
               b.seconds, b.kind, b.cut);
    topology_free(t);
    return rc == CS_OK ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "one"))
        return one(argv[2], argv[3]);
    if (argc >= 2 && !strcmp(argv[1], "speed"))
        return speed(argc >= 3 ? atoi(argv[2]) : 9);
    if (argc >= 2 && !strcmp(argv[1], "quality"))
        return quality(argc >= 3 ? atoi(argv[2]) : 4);
    fprintf(stderr, "usage: bound_bench speed [RUNS] | quality [TRIALS] | one TOPO COLL\n");
    return 2;
}
