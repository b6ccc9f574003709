/*
 * vsim_bench.c - verification and simulation of one synthesized result,
 * repeated, against the synthesis itself (docs/BENCHMARKS.md, "Issue 10:
 * verification and simulation speed").
 *
 *   vsim_bench TOPOLOGY COLLECTIVE METHOD [REPS] [BYTES]
 *
 * METHOD is tacos (1 trial, 1 thread, sends kept) or hierarchical.  The
 * result is synthesized once (its own verify/simulate figures come from the
 * method's stats when it reports them); then every frontier algorithm is
 * verified and simulated REPS times (default 3) at BYTES per rank (default
 * 1 MiB).  Prints "key value" lines: wall and CPU seconds of each pass
 * (median), the simulated time (%.17g, to compare runs bit for bit) and
 * the number of sends.  One process per call; medians of REPS inside it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hier.h"
#include "simulate.h"
#include "tacos.h"
#include "verify.h"
#include "../tests/bench_stats.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double json_num(const json_t *o, const char *key)
{
    const json_t *v = o ? json_object_get(o, key) : NULL;
    return v ? json_number_value(v) : -1;
}

int main(int argc, char **argv)
{
    if (argc < 4) {
        fprintf(stderr, "usage: vsim_bench TOPOLOGY COLLECTIVE tacos|hierarchical [REPS] "
                        "[BYTES]\n");
        return 2;
    }
    int reps = argc > 4 ? atoi(argv[4]) : 3;
    double bytes = argc > 5 ? atof(argv[5]) : 1048576.0;
    if (reps < 1 || reps > 64)
        reps = 3;
    cs_error err;
    cs_topology *t = NULL;
    if (topology_builtin(argv[1], &t, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    cs_coll_kind kind;
    if (collective_kind_from_name(argv[2], &kind) != CS_OK) {
        fprintf(stderr, "unknown collective %s\n", argv[2]);
        return 1;
    }
    cs_collective c;
    collective_init(&c, kind, kind == CS_COLL_BROADCAST || kind == CS_COLL_REDUCE ? 0 : -1);
    cs_result *res = NULL;
    double t0 = cs_now();
    int rc;
    if (!strcmp(argv[3], "tacos")) {
        cs_tacos_options opt;
        tacos_options_default(&opt);
        opt.trials = 1;
        opt.threads = 1;
        opt.keep_sends = true;
        opt.bytes = bytes;
        rc = tacos_synthesize(t, &c, &opt, &res, &err);
    } else if (!strcmp(argv[3], "hierarchical")) {
        cs_hier_options opt;
        hier_options_default(&opt);
        rc = hier_synthesize(t, &c, &opt, &res, &err);
    } else {
        fprintf(stderr, "unknown method %s\n", argv[3]);
        return 2;
    }
    if (rc != CS_OK) {
        fprintf(stderr, "%s: %s\n", argv[3], err.message);
        return 1;
    }
    printf("topology %s\ncollective %s\nmethod %s\n", argv[1], argv[2], argv[3]);
    printf("synthesis_s %.3f\n", cs_now() - t0);
    if (res->stats && json_object_get(res->stats, "search_seconds"))
        printf("search_s %.3f\nbuild_s %.3f\nown_verify_s %.3f\nown_simulate_s %.3f\n",
               json_num(res->stats, "search_seconds"), json_num(res->stats, "build_seconds"),
               json_num(res->stats, "verify_seconds"), json_num(res->stats, "simulate_seconds"));
    for (int k = 0; k < res->nalgs; k++) {
        const cs_algorithm *a = res->algs[k];
        double vw[64], vc[64], sw[64], sc[64], sim_us = -1;
        for (int r = 0; r < reps; r++) {
            double w0 = cs_now(), c0 = cpu_now();
            if (algorithm_verify(t, a, &err) != CS_OK) {
                fprintf(stderr, "verify: %s\n", err.message);
                return 1;
            }
            vw[r] = cs_now() - w0;
            vc[r] = cpu_now() - c0;
            cs_sim_result sr;
            w0 = cs_now();
            c0 = cpu_now();
            if (simulate_algorithm(t, a, bytes, &sr, &err) != CS_OK) {
                fprintf(stderr, "simulate: %s\n", err.message);
                return 1;
            }
            sw[r] = cs_now() - w0;
            sc[r] = cpu_now() - c0;
            if (r > 0 && sr.time_us != sim_us) {
                fprintf(stderr, "simulated time differs between runs: %.17g vs %.17g\n",
                        sr.time_us, sim_us);
                return 1;
            }
            sim_us = sr.time_us;
            sim_result_free(&sr);
        }
        /* the two in one walk (algorithm_verify_simulate), as TACOS runs them */
        double fw[64], fc[64];
        for (int r = 0; r < reps; r++) {
            double w0 = cs_now(), c0 = cpu_now();
            cs_sim_result sr;
            if (algorithm_verify_simulate(t, a, bytes, &sr, NULL, &err) != CS_OK) {
                fprintf(stderr, "verify_simulate: %s\n", err.message);
                return 1;
            }
            fw[r] = cs_now() - w0;
            fc[r] = cpu_now() - c0;
            if (sr.time_us != sim_us) {
                fprintf(stderr, "fused simulated time differs: %.17g vs %.17g\n", sr.time_us,
                        sim_us);
                return 1;
            }
            sim_result_free(&sr);
        }
        printf("alg%d_sends %ld\nalg%d_timed %d\n", k, a->nsends, k, algorithm_is_timed(a));
        printf("alg%d_verify_simulate_wall_s %.4f\nalg%d_verify_simulate_cpu_s %.4f\n", k,
               bench_median(fw, reps), k, bench_median(fc, reps));
        printf("alg%d_verify_wall_s %.4f\nalg%d_verify_cpu_s %.4f\n", k, bench_median(vw, reps), k,
               bench_median(vc, reps));
        printf("alg%d_simulate_wall_s %.4f\nalg%d_simulate_cpu_s %.4f\n", k, bench_median(sw, reps), k,
               bench_median(sc, reps));
        printf("alg%d_sim_time_us %.17g\n", k, sim_us);
    }
    result_free(res);
    collective_free(&c);
    topology_free(t);
    return 0;
}
