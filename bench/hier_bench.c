/*
 * hier_bench.c - method hierarchical against flat TACOS on the same topology,
 * in the same run (docs/BENCHMARKS.md, issue 11 section).
 *
 *   hier_bench TOPO COLLECTIVE [RUNS] [TACOS_RUNS] [msccl]
 *
 * TOPO is a builtin (dgxh100:128), a Topology JSON file, or dgx1cluster:N:
 * the Slurm hook's cluster of N DGX-1 nodes (NICs on local ranks 0, 2, 4, 6,
 * one fabric switch at 12.5 GB/s), built by the hook's own code
 * (clients/slurm/cluster.c); dgx1ring:N is the same with the hook's ring
 * fabric (NIC i of node k to NIC i of node k+1).  For each method: median synthesis seconds over
 * RUNS (hierarchical) and TACOS_RUNS (flat TACOS, default 1: it is the slow
 * side; 0 skips it), each frontier algorithm's simulated time and
 * ratio_to_bound at 1 MiB and 1 GiB per rank share, the frontier's best at
 * each size, and the same-run comparison.  "msccl": also lowers every
 * hierarchical algorithm to MSCCL XML (runtime auto: both runtimes' limits)
 * and reports the worst rank's elements, thread blocks and steps.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hier.h"
#include "msccl_check.h"
#include "msccl_xml.h"
#include "simulate.h"
#include "synthesize.h"
#include "tacos.h"
#include "verify.h"

#include "../tests/cluster_testutil.h"
#include "../tests/bench_stats.h"

static cs_topology *load_topology(const char *spec)
{
    cs_error err;
    cs_topology *t = NULL;
    int nodes;
    bool ring = sscanf(spec, "dgx1ring:%d", &nodes) == 1;
    if (ring || sscanf(spec, "dgx1cluster:%d", &nodes) == 1) {
        json_t *expanded = NULL;
        char msg[256];
        json_t *topo = cluster_hook_dgx1("hook", nodes, 1, ring ? "ring" : "switch", 12.5,
                                         &expanded, msg, sizeof msg);
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

/* CPU seconds of the whole process (every thread): beside the wall time,
 * a figure that other load on the machine hardly moves. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Prints every frontier algorithm and returns the frontier's best
 * simulated time at 1 MiB and 1 GiB (what a size-aware choice runs). */
static void report(const char *what, const cs_topology *t, const cs_collective *c,
                   const cs_result *res, double secs, double best[2], double bound[2],
                   bool msccl)
{
    cs_time_bound tb;
    cs_error err;
    if (collective_time_bound(t, c, &tb, &err) != CS_OK) {
        fprintf(stderr, "bound: %s\n", err.message);
        exit(1);
    }
    best[0] = best[1] = INFINITY;
    double sizes[2] = {1048576.0, 1073741824.0};
    for (int i = 0; i < res->nalgs; i++) {
        const cs_algorithm *a = res->algs[i];
        printf("  %-12s [%d] synth %.3f s, steps %d, sends %ld, chunks %d", what, i, secs,
               a->steps, a->nsends, a->chunks);
        for (int k = 0; k < 2; k++) {
            cs_bound_ratio br;
            if (synth_ratio_to_bound(t, &tb, a, sizes[k], &br, &err) != CS_OK) {
                printf(" | sim failed: %s", err.message);
                continue;
            }
            bound[k] = br.bound_us;
            if (br.simulated_us < best[k])
                best[k] = br.simulated_us;
            printf(" | %s %.1f us (ratio %.3f)", k ? "1GiB" : "1MiB", br.simulated_us, br.ratio);
        }
        printf("\n");
        if (msccl) {
            cs_msccl_options o;
            msccl_options_default(&o);
            char *xml = NULL;
            size_t len = 0;
            double t0 = cs_now();
            if (msccl_xml_generate(a, t, &o, &xml, &len, &err) != CS_OK) {
                printf("      msccl: refused: %s\n", err.message);
                continue;
            }
            cs_msccl_check_stats st;
            if (msccl_check_limits(xml, len, CS_MSCCL_RUNTIME_AUTO, &st, &err) != CS_OK)
                printf("      msccl: check failed: %s\n", err.message);
            else
                printf("      msccl (both runtimes' limits): ok, %.1f MB, worst rank %ld elements "
                       "(< 4096), %d thread blocks, %d steps per block (< 64), %d channels; "
                       "%.1f s\n", len / 1e6, st.max_elements, st.max_tbs, st.max_steps,
                       st.nchannels, cs_now() - t0);
            free(xml);
        }
    }
    printf("  %-12s best of frontier: 1MiB %.1f us (ratio %.3f), 1GiB %.1f us (ratio %.3f)\n",
           what, best[0], bound[0] / best[0], best[1], bound[1] / best[1]);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: hier_bench TOPO COLLECTIVE [RUNS] [TACOS_RUNS] [msccl]\n");
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
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    int truns = argc > 4 ? atoi(argv[4]) : 1;
    bool msccl = argc > 5 && strcmp(argv[5], "msccl") == 0;
    if (runs < 1)
        runs = 1;
    printf("== %s %s (%d ranks, %d groups)\n", t->name, argv[2], t->ranks, t->ngroups);
    double *secs = calloc((size_t)(runs > truns ? runs : truns) + 1, sizeof *secs);
    double *cpu = calloc((size_t)(runs > truns ? runs : truns) + 1, sizeof *cpu);
    cs_result *res = NULL;
    cs_error err;
    for (int r = 0; r < runs; r++) {
        result_free(res);
        res = NULL;
        double t0 = cs_now(), c0 = cpu_now();
        if (hier_synthesize(t, &c, NULL, &res, &err) != CS_OK) {
            fprintf(stderr, "hierarchical: %s\n", err.message);
            return 1;
        }
        secs[r] = cs_now() - t0;
        cpu[r] = cpu_now() - c0;
    }
    double hier_s = bench_median(secs, runs), hier_cpu = bench_median(cpu, runs);
    printf("  reason: %s\n", res->reason);
    double hb[2], tb[2], bound[2];
    report("hierarchical", t, &c, res, hier_s, hb, bound, msccl);
    result_free(res);
    if (truns > 0) {
        cs_tacos_options o;
        tacos_options_default(&o);
        o.keep_sends = true;
        cs_result *tr = NULL;
        for (int r = 0; r < truns; r++) {
            result_free(tr);
            tr = NULL;
            double t0 = cs_now(), c0 = cpu_now();
            if (tacos_synthesize(t, &c, &o, &tr, &err) != CS_OK) {
                fprintf(stderr, "tacos: %s\n", err.message);
                return 1;
            }
            secs[r] = cs_now() - t0;
            cpu[r] = cpu_now() - c0;
        }
        double ts = bench_median(secs, truns), tcpu = bench_median(cpu, truns);
        report("tacos", t, &c, tr, ts, tb, bound, false);
        printf("  SUMMARY %s %s: hierarchical %.3f s (median of %d), tacos %.3f s (median of %d): "
               "%.1fx faster; 1GiB: hier/tacos time %.3f (ratio to bound %.3f vs %.3f); "
               "1MiB: hier/tacos time %.3f\n",
               t->name, argv[2], hier_s, runs, ts, truns, ts / hier_s, hb[1] / tb[1],
               bound[1] / hb[1], bound[1] / tb[1], hb[0] / tb[0]);
        printf("  CPU %s %s: hierarchical %.3f s, tacos %.3f s (medians, process CPU time of "
               "all threads): %.1fx less\n", t->name, argv[2], hier_cpu, tcpu, tcpu / hier_cpu);
        result_free(tr);
    } else {
        printf("  CPU %s %s: hierarchical %.3f s (median, process CPU time of all threads)\n",
               t->name, argv[2], hier_cpu);
    }
    free(secs);
    free(cpu);
    topology_free(t);
    return 0;
}
