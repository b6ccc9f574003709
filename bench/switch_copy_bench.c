/*
 * switch_copy_bench.c - mcf with copy-capable switches against the hyper-edge
 * form (docs/BENCHMARKS.md, "Issue 13: mcf", copy switch).
 *
 *     build/bench/switch_copy_bench [RUNS]
 *
 * For each instance the same topology is solved twice with the same options
 * (C chunks of L / C bytes, the chunking fixed: min_chunks = C): once as
 * written (switches cannot copy: the hyper-edge form) and once with every
 * switch copy-capable (topology_with_switch_copy: TE-CCL's switch node).
 * Both schedules are verified on their topology and simulated at L; the
 * table gives the median solve time of RUNS runs, the simulated times and
 * their ratio (copy / hyper-edge, <= 1 expected), and how many sends leave a
 * switch node.  "floor" is a bound computed here, independent of the solver,
 * for broadcast of C chunks on P ranks joined by one switch only (every port
 * send takes the same time s): without copy a holder sends one chunk at a
 * time through its port, so in the j-th send time at most min(2^j, P) sends
 * happen, and the (P - 1) C receptions need the smallest T with
 * sum_{j<T} min(2^j, P) >= (P - 1) C: T s; with copy the root's port sends
 * each chunk out once (C s) and the last one still has to reach the other
 * ranks (one more send, whether through the node or not): (C + 1) s.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcf.h"
#include "simulate.h"
#include "verify.h"
#include "../tests/bench_stats.h"
#include "../tests/topology_testutil.h"

typedef struct figures {
    double seconds, sim_us;
    long copies;
    bool ok;
} figures;

static figures run(const cs_topology *t, cs_coll_kind kind, int chunks, double bytes, int runs,
                   double time_limit)
{
    figures f = {0};
    double *secs = calloc((size_t)runs, sizeof *secs);
    for (int i = 0; i < runs; i++) {
        cs_collective c;
        collective_init(&c, kind, collective_kind_is_rooted(kind) ? 0 : -1);
        cs_mcf_options o;
        mcf_options_default(&o);
        o.chunks = chunks;
        o.min_chunks = chunks;
        o.bytes = bytes;
        o.time_limit_s = time_limit;
        cs_result *r = NULL;
        cs_error err;
        double t0 = cs_now();
        if (mcf_synthesize(t, &c, &o, &r, &err) != CS_OK) {
            fprintf(stderr, "%s %s: %s\n", t->name, collective_kind_name(kind), err.message);
            free(secs);
            return f;
        }
        secs[i] = cs_now() - t0;
        const cs_algorithm *a = r->algs[0];
        cs_sim_result sr;
        f.ok = algorithm_verify(t, a, &err) == CS_OK &&
               simulate_algorithm(t, a, bytes, &sr, &err) == CS_OK;
        if (f.ok) {
            f.sim_us = sr.time_us;
            sim_result_free(&sr);
        }
        f.copies = 0;
        for (long k = 0; k < a->nsends; k++)
            f.copies += algorithm_send_src(a, k) >= a->ranks;
        result_free(r);
    }
    qsort(secs, (size_t)runs, sizeof *secs, bench_cmp_double);
    f.seconds = secs[runs / 2];
    free(secs);
    return f;
}

int main(int argc, char **argv)
{
    int runs = argc > 1 ? atoi(argv[1]) : 3;
    if (runs < 1)
        runs = 1;
    const double L = 1048576.0;
    static const char star8[] =
        "{\"name\":\"star8\",\"ranks\":8,\"switches\":[{\"name\":\"sw\","
        "\"ranks\":[0,1,2,3,4,5,6,7],\"gbps\":50,\"alpha_us\":0.5}]}";
    struct {
        const char *spec, *label;
        cs_coll_kind kind;
        int chunks, runs;
        double time_limit;
    } cases[] = {
        {star8, "star8 (1 switch, 50 GB/s)", CS_COLL_BROADCAST, 1, runs, 0},
        {star8, "star8 (1 switch, 50 GB/s)", CS_COLL_BROADCAST, 4, runs, 0},
        {star8, "star8 (1 switch, 50 GB/s)", CS_COLL_ALLGATHER, 1, runs, 0},
        {"dgx2", "dgx2", CS_COLL_BROADCAST, 1, runs, 0},
        {"dgx2", "dgx2", CS_COLL_BROADCAST, 4, runs, 0},
        {"dgx2", "dgx2", CS_COLL_BROADCAST, 8, runs, 0},
        {"dgx2", "dgx2", CS_COLL_ALLGATHER, 1, 1, 0},
        {"ndv2:2", "ndv2:2", CS_COLL_BROADCAST, 1, runs, 0},
        {"ndv2:2", "ndv2:2", CS_COLL_ALLGATHER, 1, 1, 0},
    };
    printf("%-26s %-10s %2s  %10s %10s  %10s %10s  %6s  %6s  %s\n", "topology", "collective",
           "C", "hyper s", "copy s", "hyper us", "copy us", "ratio", "copies", "floor us "
           "(hyper/copy)");
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cs_topology *plain = test_topology(cases[i].spec), *copy = NULL;
        cs_error err;
        if (topology_with_switch_copy(plain, true, NULL, &copy, &err) != CS_OK) {
            fprintf(stderr, "%s: %s\n", cases[i].label, err.message);
            return 1;
        }
        figures h = run(plain, cases[i].kind, cases[i].chunks, L, cases[i].runs,
                        cases[i].time_limit);
        figures c = run(copy, cases[i].kind, cases[i].chunks, L, cases[i].runs,
                        cases[i].time_limit);
        char floor_txt[64] = "-";
        if (cases[i].kind == CS_COLL_BROADCAST && plain->nswitches == 1 &&
            plain->switches[0].nranks == plain->ranks && plain->nlinks ==
            plain->ranks * (plain->ranks - 1)) {
            /* one switch, no other link: every send takes `send` us */
            const cs_switch *sw = &plain->switches[0];
            int P = plain->ranks, C = cases[i].chunks;
            double send = sw->alpha_us + L / C / (sw->gbps * 1e3);
            long need = (long)(P - 1) * C, done = 0;
            int T = 0;
            for (; done < need; T++)
                done += T < 30 && (1L << T) < P ? (1L << T) : P;
            snprintf(floor_txt, sizeof floor_txt, "%.1f / %.1f", T * send, (C + 1) * send);
        }
        printf("%-26s %-10s %2d  %10.3f %10.3f  %10.2f %10.2f  %6.3f  %6ld  %s%s\n",
               cases[i].label, collective_kind_name(cases[i].kind), cases[i].chunks, h.seconds,
               c.seconds, h.sim_us, c.sim_us, c.sim_us / h.sim_us, c.copies, floor_txt,
               h.ok && c.ok ? "" : "  (NOT VERIFIED)");
        fflush(stdout);
        topology_free(plain);
        topology_free(copy);
    }
    return 0;
}
