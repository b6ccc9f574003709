/*
 * tacos_bench.c - TACOS synthesis speed, scale and quality.
 *
 *   tacos_bench scale [RUNS]    2D mesh allgather (1 chunk, 1 GiB, 50 GB/s,
 *                               0.5 us) on 16x16 .. 128x128: median seconds per
 *                               size and the growth exponent against P and
 *                               against ranks x links
 *   tacos_bench quality [TRIALS] ideal/simulated on 3D torus 4x4x4 and 8x8x8,
 *                               2D mesh 10x10, hypercube 6, DGX-1 (6 chunks)
 *                               against the SMT optimum (3,7,6) by hand
 *   tacos_bench big [SIDE]      all-reduce on a SIDE x SIDE mesh (default 200:
 *                               40,000 ranks), statistics only: time and memory
 *   tacos_bench rarest [RUNS]   rarest-first at every size: large allgathers
 *                               (hypercube 8..12, torus 32x32, mesh 64x64 and
 *                               100x100 with 4 trials; the scale meshes with 1
 *                               trial on 1 thread), statistics only, with and
 *                               without rarest-first trials (plain_only, what
 *                               main did above 2^15 ranks x chunks) alternating
 *                               in one run: median search seconds, spans, time
 *
 * Prints one line per measurement, "key value" pairs, for bench/tacos.sh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tacos.h"
#include "../tests/bench_stats.h"

static double num(const cs_result *r, const char *key)
{
    return json_number_value(json_object_get(r->stats, key));
}

static int run_opts(const char *topo, cs_coll_kind kind, int chunks, int trials, int threads,
                    double bytes, bool keep, bool plain_only, cs_result **out,
                    cs_topology **tout);

static int run(const char *topo, cs_coll_kind kind, int chunks, int trials, int threads,
               double bytes, bool keep, cs_result **out, cs_topology **tout)
{
    return run_opts(topo, kind, chunks, trials, threads, bytes, keep, false, out, tout);
}

static int run_opts(const char *topo, cs_coll_kind kind, int chunks, int trials, int threads,
                    double bytes, bool keep, bool plain_only, cs_result **out,
                    cs_topology **tout)
{
    cs_error err;
    cs_topology *t = NULL;
    if (topology_load(topo, NULL, &t, &err)) {
        fprintf(stderr, "%s: %s\n", topo, err.message);
        return 1;
    }
    cs_collective c;
    collective_init(&c, kind, collective_kind_is_rooted(kind) ? 0 : -1);
    cs_tacos_options opt;
    tacos_options_default(&opt);
    opt.chunks = chunks;
    opt.trials = trials;
    opt.threads = threads;
    opt.bytes = bytes;
    opt.keep_sends = keep;
    opt.plain_only = plain_only;
    int rc = tacos_synthesize(t, &c, &opt, out, &err);
    if (rc) {
        fprintf(stderr, "%s %s: %s\n", topo, collective_kind_name(kind), err.message);
        topology_free(t);
        return 1;
    }
    if (tout)
        *tout = t;
    else
        topology_free(t);
    return 0;
}

static int bench_scale(int runs)
{
    const int sides[] = {16, 32, 64, 128};
    const int n = 4;
    double med[4], work[4], ranks[4];
    for (int k = 0; k < n; k++) {
        char spec[64];
        snprintf(spec, sizeof spec, "mesh2d:%dx%d,gbps=50,alpha=0.5", sides[k], sides[k]);
        int reps = sides[k] >= 128 ? (runs < 3 ? runs : 3) : runs;
        double secs[16];
        long links = 0;
        double ratio = 0;
        for (int r = 0; r < reps && r < 16; r++) {
            cs_result *res = NULL;
            cs_topology *t = NULL;
            if (run(spec, CS_COLL_ALLGATHER, 1, 1, 1, 1073741824.0, false, &res, &t))
                return 1;
            secs[r] = num(res, "search_seconds");
            links = t->nlinks;
            ratio = num(res, "ratio_to_ideal");
            result_free(res);
            topology_free(t);
        }
        qsort(secs, (size_t)reps, sizeof *secs, bench_cmp_double);
        med[k] = secs[reps / 2];
        ranks[k] = (double)sides[k] * sides[k];
        work[k] = ranks[k] * (double)links;
        printf("scale mesh2d:%dx%d ranks %d links %ld median_s %.4f runs %d ratio %.4f\n",
               sides[k], sides[k], sides[k] * sides[k], links, med[k], reps, ratio);
        fflush(stdout);
    }
    for (int k = 1; k < n; k++)
        printf("growth %dx%d->%dx%d exponent_vs_ranks %.2f exponent_vs_ranks_x_links %.2f\n",
               sides[k - 1], sides[k - 1], sides[k], sides[k],
               log(med[k] / med[k - 1]) / log(ranks[k] / ranks[k - 1]),
               log(med[k] / med[k - 1]) / log(work[k] / work[k - 1]));
    /* least squares over all sizes */
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    for (int k = 0; k < n; k++) {
        double x = log(work[k]), y = log(med[k]);
        sx += x; sy += y; sxx += x * x; sxy += x * y;
    }
    printf("growth fit exponent_vs_ranks_x_links %.2f\n", (n * sxy - sx * sy) / (n * sxx - sx * sx));
    return 0;
}

static int bench_quality(int trials)
{
    struct { const char *topo; cs_coll_kind kind; int chunks; } cases[] = {
        {"torus3d:4x4x4", CS_COLL_ALLGATHER, 1}, {"torus3d:4x4x4", CS_COLL_ALLREDUCE, 1},
        {"torus3d:8x8x8", CS_COLL_ALLGATHER, 1}, {"torus3d:8x8x8", CS_COLL_ALLREDUCE, 1},
        {"mesh2d:10x10", CS_COLL_ALLGATHER, 1}, {"mesh2d:10x10", CS_COLL_ALLREDUCE, 1},
        {"hypercube:6", CS_COLL_ALLGATHER, 1}, {"hypercube:6", CS_COLL_ALLREDUCE, 1},
        {"dgx1", CS_COLL_ALLGATHER, 6}, {"dgx1", CS_COLL_ALLREDUCE, 6},
        /* heterogeneous (paper Fig. 15): the ideal counts per-rank bandwidth
         * only, not the slow dimension's cut, so these ratios understate */
        {"dragonfly:4x5", CS_COLL_ALLREDUCE, 1}, {"switch2d:8x4", CS_COLL_ALLREDUCE, 1},
        {"rfs3d:2x4x8", CS_COLL_ALLREDUCE, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cs_result *r = NULL;
        if (run(cases[i].topo, cases[i].kind, cases[i].chunks, trials, 0, 1073741824.0, true,
                &r, NULL))
            return 1;
        printf("quality %s %s chunks %d trials %d sim_us %.3f ideal_us %.3f ratio %.4f seconds %.3f\n",
               cases[i].topo, collective_kind_name(cases[i].kind), cases[i].chunks, trials,
               num(r, "sim_time_us"), num(r, "ideal_us"), num(r, "ratio_to_ideal"), num(r, "seconds"));
        if (strcmp(cases[i].topo, "dgx1") == 0 && cases[i].kind == CS_COLL_ALLGATHER) {
            /* SMT optimum (3,7,6): 3 alpha + 7/6 L beta, alpha 0.7 us, 25 GB/s per lane */
            double smt = 3 * 0.7 + 7.0 / 6.0 * 1073741824.0 / 25e3;
            printf("quality dgx1 smt_376_us %.3f tacos_over_smt %.4f\n", smt,
                   num(r, "sim_time_us") / smt);
        }
        fflush(stdout);
        result_free(r);
    }
    return 0;
}

static int bench_big(int side)
{
    char spec[64];
    snprintf(spec, sizeof spec, "mesh2d:%dx%d,gbps=50,alpha=0.5", side, side);
    cs_result *r = NULL;
    if (run(spec, CS_COLL_ALLREDUCE, 1, 1, 0, 1073741824.0, false, &r, NULL))
        return 1;
    printf("big %s allreduce ranks %d seconds %.1f search_seconds %.1f ideal_seconds %.1f peak_rss_mb %.1f sends %.0f spans %.0f "
           "sim_us %.1f ideal_us %.1f ratio %.4f\n",
           spec, side * side, num(r, "seconds"), num(r, "search_seconds"),
           num(r, "ideal_seconds"), num(r, "peak_rss_kb") / 1024.0, num(r, "sends"),
           num(r, "spans"), num(r, "sim_time_us"), num(r, "ideal_us"), num(r, "ratio_to_ideal"));
    result_free(r);
    return 0;
}

/* Rarest-first trials against plain ones on the same instance, alternating
 * run by run so both see the same machine load. */
static int bench_rarest(int runs)
{
    const struct { const char *spec; int trials, threads; } cases[] = {
        {"hypercube:8", 4, 0}, {"hypercube:10", 4, 0}, {"hypercube:11", 4, 0},
        {"hypercube:12", 4, 0}, {"torus2d:32x32", 4, 0}, {"mesh2d:64x64", 4, 0},
        {"mesh2d:100x100", 4, 0},
        /* the scale benchmark's setting: 1 trial (rarest-first or not), 1 thread */
        {"mesh2d:32x32,gbps=50,alpha=0.5", 1, 1}, {"mesh2d:64x64,gbps=50,alpha=0.5", 1, 1},
        {"mesh2d:128x128,gbps=50,alpha=0.5", 1, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *spec = cases[i].spec;
        double secs[2][16], sim[2] = {0, 0}, spans[2] = {0, 0}, eng[2] = {0, 0};
        int reps = runs < 16 ? runs : 16;
        if ((strstr(spec, "100x100") || strstr(spec, "128x128")) && reps > 3)
            reps = 3;
        for (int r = 0; r < reps; r++)
            for (int v = 0; v < 2; v++) {
                cs_result *res = NULL;
                if (run_opts(spec, CS_COLL_ALLGATHER, 1, cases[i].trials, cases[i].threads,
                             64.0 * 1024 * 1024, false, v == 0, &res, NULL))
                    return 1;
                secs[v][r] = num(res, "search_seconds");
                sim[v] = num(res, "schedule_time_us");
                spans[v] = num(res, "spans");
                eng[v] = num(res, "engine_peak_bytes");
                result_free(res);
            }
        qsort(secs[0], (size_t)reps, sizeof(double), bench_cmp_double);
        qsort(secs[1], (size_t)reps, sizeof(double), bench_cmp_double);
        double m0 = secs[0][reps / 2], m1 = secs[1][reps / 2];
        printf("rarest %s allgather trials %d runs %d plain_s %.4f rarest_s %.4f ratio %.2f "
               "plain_spans %.0f rarest_spans %.0f plain_us %.3f rarest_us %.3f "
               "plain_engine_mb %.1f rarest_engine_mb %.1f\n",
               spec, cases[i].trials, reps, m0, m1, m1 / m0, spans[0], spans[1], sim[0], sim[1],
               eng[0] / 1e6, eng[1] / 1e6);
        fflush(stdout);
    }
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "quality";
    int arg = argc > 2 ? atoi(argv[2]) : 0;
    if (strcmp(mode, "scale") == 0)
        return bench_scale(arg > 0 ? arg : 5);
    if (strcmp(mode, "quality") == 0)
        return bench_quality(arg > 0 ? arg : 8);
    if (strcmp(mode, "big") == 0)
        return bench_big(arg > 0 ? arg : 200);
    if (strcmp(mode, "rarest") == 0)
        return bench_rarest(arg > 0 ? arg : 3);
    fprintf(stderr, "usage: tacos_bench scale [RUNS] | quality [TRIALS] | big [SIDE] | "
            "rarest [RUNS]\n");
    return 2;
}
