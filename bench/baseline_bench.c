/*
 * baseline_bench.c - how fast the baselines are generated at scale, and how
 * they perform in the simulator (so synthesized algorithms have numbers to
 * beat).
 *
 *   baseline_bench speed [RUNS]   median generation seconds (routing, rounds
 *                                 fitting and verification included) at 1024
 *                                 ranks (torus2d:32x32) and for direct
 *                                 alltoall on mesh2d:16x16
 *   baseline_bench quality        simulated time / TACOS ideal and
 *                                 cross-group bytes at 1 MiB and 64 MiB per
 *                                 rank on dgx1, torus2d:8x8, dragonfly:4x4
 *
 * Prints one line per measurement, "key value" pairs, for bench/baseline.sh.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "simulate.h"
#include "../tests/bench_stats.h"

static int gen(const char *name, const cs_topology *t, cs_coll_kind kind, cs_algorithm **a)
{
    cs_collective c;
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? 0 : -1);
    cs_error err;
    int rc = baseline_generate(name, t, &c, NULL, a, &err);
    if (rc != CS_OK)
        fprintf(stderr, "%s %s on %s: %s\n", name, collective_kind_name(kind), t->name,
                err.message);
    return rc;
}

static void speed(int runs)
{
    static const struct {
        const char *name, *topo;
        cs_coll_kind kind;
    } cases[] = {
        {"ring", "torus2d:32x32", CS_COLL_ALLREDUCE},
        {"bine-butterfly", "torus2d:32x32", CS_COLL_ALLREDUCE},
        {"recursive-halving", "torus2d:32x32", CS_COLL_ALLREDUCE},
        {"direct", "torus2d:32x32", CS_COLL_ALLGATHER},
        {"binomial-tree", "torus2d:32x32", CS_COLL_BROADCAST},
        {"bine-tree", "torus2d:32x32", CS_COLL_GATHER},
        {"direct", "mesh2d:16x16", CS_COLL_ALLTOALL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cs_topology *t = NULL;
        cs_error err;
        if (topology_builtin(cases[i].topo, &t, &err) != CS_OK) {
            fprintf(stderr, "%s: %s\n", cases[i].topo, err.message);
            continue;
        }
        double *secs = calloc((size_t)runs, sizeof *secs);
        long sends = 0;
        int steps = 0, rounds = 0;
        for (int r = 0; r < runs; r++) {
            cs_algorithm *a = NULL;
            double t0 = cs_now();
            if (gen(cases[i].name, t, cases[i].kind, &a) != CS_OK)
                break;
            secs[r] = cs_now() - t0;
            sends = a->nsends;
            steps = a->steps;
            rounds = a->rounds;
            algorithm_free(a);
        }
        qsort(secs, (size_t)runs, sizeof *secs, bench_cmp_double);
        printf("speed baseline %s topology %s collective %s ranks %d median_s %.3f sends %ld "
               "steps %d rounds %d\n",
               cases[i].name, cases[i].topo, collective_kind_name(cases[i].kind), t->ranks,
               secs[runs / 2], sends, steps, rounds);
        fflush(stdout);
        free(secs);
        topology_free(t);
    }
}

static void quality(void)
{
    static const char *topos[] = {"dgx1", "torus2d:8x8", "dragonfly:4x4"};
    static const char *names[] = {"ring",          "rings",     "direct",
                                  "recursive-halving", "recursive-doubling", "binomial-tree",
                                  "double-binary-tree", "bine-tree", "bine-butterfly"};
    static const double sizes[] = {1048576.0, 67108864.0};
    for (size_t i = 0; i < sizeof topos / sizeof topos[0]; i++) {
        cs_topology *t = NULL;
        cs_error err;
        if (topology_builtin(topos[i], &t, &err) != CS_OK)
            continue;
        for (size_t n = 0; n < sizeof names / sizeof names[0]; n++) {
            cs_algorithm *a = NULL;
            cs_collective c;
            collective_init(&c, CS_COLL_ALLREDUCE, -1);
            if (baseline_generate(names[n], t, &c, NULL, &a, &err) != CS_OK) {
                printf("quality topology %s baseline %s collective allreduce unsupported\n",
                       topos[i], names[n]);
                continue;
            }
            for (size_t s = 0; s < 2; s++) {
                cs_sim_result r;
                memset(&r, 0, sizeof r);
                if (simulate_algorithm(t, a, sizes[s], &r, &err) != CS_OK) {
                    fprintf(stderr, "simulate: %s\n", err.message);
                    continue;
                }
                printf("quality topology %s baseline %s collective allreduce bytes %.0f "
                       "time_us %.2f ideal_us %.2f ratio %.3f cross_group_MB %.2f\n",
                       topos[i], names[n], sizes[s], r.time_us, r.ideal_us,
                       r.ideal_us > 0 ? r.time_us / r.ideal_us : 0.0,
                       r.cross_group_bytes / 1048576.0);
                sim_result_free(&r);
            }
            algorithm_free(a);
        }
        topology_free(t);
    }
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "speed") == 0) {
        int runs = argc >= 3 ? atoi(argv[2]) : 3;
        speed(runs < 1 ? 1 : runs);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "quality") == 0) {
        quality();
        return 0;
    }
    fprintf(stderr, "usage: baseline_bench speed [RUNS] | quality\n");
    return 2;
}
