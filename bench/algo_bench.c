/*
 * algo_bench - how fast the verifier, the simulator and the JSON codec are on
 * large schedules (the scale TACOS produces).
 *
 *   build/bench/algo_bench [ranks] [chunks] [repeats]
 *
 * Builds, on the builtin ring:<ranks>, a ring allgather (P(P-1)C sends,
 * copies) and a ring reducescatter (P(P-1) sends, reduces with P-bit
 * contribution sets), then times algorithm_verify and simulate_algorithm on
 * each, and the JSON round trip of the allgather.  Prints one line per figure
 * with the median of `repeats` runs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "algorithm.h"
#include "simulate.h"
#include "verify.h"
#include "../tests/bench_stats.h"

/* CPU seconds of this process: less sensitive than wall time to other jobs
 * sharing the machine. */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static cs_algorithm *ring_schedule(cs_coll_kind kind, int P, int C)
{
    cs_collective c;
    collective_init(&c, kind, -1);
    cs_algorithm *a = NULL;
    cs_error err;
    if (algorithm_new(&c, "ring", P, C, P - 1, &a, &err) != CS_OK) {
        fprintf(stderr, "algorithm_new: %s\n", err.message);
        exit(1);
    }
    collective_free(&c);
    for (int s = 0; s < P - 1; s++) {
        a->rounds_per_step[s] = C;
        for (int r = 0; r < P; r++)
            for (int i = 0; i < C; i++) {
                long g = kind == CS_COLL_ALLGATHER ? (long)i * P + ((r - s) % P + P) % P
                                                   : (long)i * P + ((r - s - 1) % P + 2 * P) % P;
                if (algorithm_add_send(a, g, r, (r + 1) % P, s,
                                       kind == CS_COLL_ALLGATHER ? CS_OP_COPY : CS_OP_REDUCE)) {
                    fprintf(stderr, "out of memory\n");
                    exit(1);
                }
            }
    }
    algorithm_update_rounds(a);
    return a;
}

static void bench_one(const char *name, const cs_topology *t, const cs_algorithm *a, int reps)
{
    double *tv = malloc(sizeof(double) * (size_t)reps), *ts = malloc(sizeof(double) * (size_t)reps);
    double *cv = malloc(sizeof(double) * (size_t)reps), *cs = malloc(sizeof(double) * (size_t)reps);
    double sim_time = 0;
    for (int k = 0; k < reps; k++) {
        cs_error err;
        double t0 = cs_now(), c0 = cpu_now();
        int rc = algorithm_verify(t, a, &err);
        tv[k] = cs_now() - t0;
        cv[k] = cpu_now() - c0;
        if (rc != CS_OK) {
            fprintf(stderr, "%s: verify failed: %s\n", name, err.message);
            exit(1);
        }
        cs_sim_result r;
        t0 = cs_now();
        c0 = cpu_now();
        rc = simulate_algorithm(t, a, 64e6, &r, &err);
        ts[k] = cs_now() - t0;
        cs[k] = cpu_now() - c0;
        if (rc != CS_OK) {
            fprintf(stderr, "%s: simulate failed: %s\n", name, err.message);
            exit(1);
        }
        sim_time = r.time_us;
        sim_result_free(&r);
    }
    printf("%-26s sends=%-9ld verify wall %.3f s cpu %.3f s | simulate wall %.3f s cpu %.3f s "
           "(sim %.0f us, %d runs)\n", name, a->nsends, bench_median(tv, reps), bench_median(cv, reps),
           bench_median(ts, reps), bench_median(cs, reps), sim_time, reps);
    free(tv);
    free(ts);
    free(cv);
    free(cs);
}

int main(int argc, char **argv)
{
    int P = argc > 1 ? atoi(argv[1]) : 4096;
    int C = argc > 2 ? atoi(argv[2]) : 1;
    int reps = argc > 3 ? atoi(argv[3]) : 3;
    char spec[32];
    snprintf(spec, sizeof spec, "ring:%d", P);
    cs_topology *t = NULL;
    cs_error err;
    if (topology_builtin(spec, &t, &err) != CS_OK) {
        fprintf(stderr, "%s: %s\n", spec, err.message);
        return 1;
    }
    char name[64];
    cs_algorithm *ag = ring_schedule(CS_COLL_ALLGATHER, P, C);
    snprintf(name, sizeof name, "allgather ring:%d C=%d", P, C);
    bench_one(name, t, ag, reps);
    cs_algorithm *rs = ring_schedule(CS_COLL_REDUCESCATTER, P, 1);
    snprintf(name, sizeof name, "reducescatter ring:%d", P);
    bench_one(name, t, rs, reps);
    algorithm_free(rs);

    /* JSON round trip on (up to) the first million sends */
    long keep = ag->nsends < 1000000 ? ag->nsends : 1000000;
    ag->nsends = keep;
    double *tj = malloc(sizeof(double) * (size_t)reps), *tp = malloc(sizeof(double) * (size_t)reps);
    for (int k = 0; k < reps; k++) {
        double t0 = cpu_now();
        json_t *doc = algorithm_to_json(ag);
        char *text = json_dumps(doc, JSON_COMPACT);
        tj[k] = cpu_now() - t0;
        json_decref(doc);
        cs_algorithm *back = NULL;
        t0 = cpu_now();
        if (algorithm_parse(text, strlen(text), &back, &err) != CS_OK) {
            fprintf(stderr, "parse: %s\n", err.message);
            return 1;
        }
        tp[k] = cpu_now() - t0;
        algorithm_free(back);
        free(text);
    }
    printf("%-26s sends=%-9ld to_json+dump cpu %.3f s | parse cpu %.3f s (%d runs)\n",
           "json round trip",
           keep, bench_median(tj, reps), bench_median(tp, reps), reps);
    free(tj);
    free(tp);
    algorithm_free(ag);
    topology_free(t);
    return 0;
}
