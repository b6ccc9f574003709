/*
 * hier_ring_bench.c - rooted collectives (broadcast, reduce) on the Slurm
 * hook's ring clusters: method hierarchical against the flat methods
 * (TACOS and every baseline that supports the collective) on the same
 * topology, in the same run (docs/BENCHMARKS.md, "Hierarchical rings and
 * verification").
 *
 *   hier_ring_bench TOPO COLLECTIVE [RUNS] [links]
 *
 * TOPO: dgx1ring:N (N hook DGX-1 nodes, NICs on local ranks 0/2/4/6, ring
 * fabric at 12.5 GB/s both ways), dgx1ringrenum:N (the same relabelled:
 * node g's ranks become node (3g + 1) mod N's, rotated by g inside the
 * node; see relabel) or any topology spec.  Root 0.  Per method: median
 * synthesis seconds over RUNS (default 3; TACOS and baselines once) and the
 * best frontier point's simulated time and ratio_to_bound at 1 MiB and
 * 1 GiB.  "links": also the five busiest links of hierarchical's best
 * 1 GiB point (where the schedule's time goes).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "hier.h"
#include "simulate.h"
#include "synthesize.h"
#include "tacos.h"
#include "verify.h"

#include "../tests/bench_stats.h"
#include "../tests/cluster_testutil.h"

/* Relabels rank r of node g (8 ranks each, N nodes) to pi(g) * 8 + (r + g)
 * mod 8 with pi(g) = (3g + 1) mod N (N not a multiple of 3): nodes keep
 * their groups, listed in ascending rank order as a Slurm allocation lists
 * them, but neither the nodes' numbers follow the ring nor does any node
 * number its GPUs like another. */
static int relabel(int r, int N)
{
    int g = r / 8;
    return ((3 * g + 1) % N) * 8 + (r % 8 + g) % 8;
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static json_t *renumber(json_t *doc, int N)
{
    json_t *links = json_object_get(doc, "links"), *l;
    size_t i;
    json_array_foreach(links, i, l) {
        for (int e = 0; e < 2; e++) {
            const char *key = e ? "dst" : "src";
            int r = (int)json_integer_value(json_object_get(l, key));
            json_object_set_new(l, key, json_integer(relabel(r, N)));
        }
    }
    json_t *groups = json_object_get(doc, "groups"), *gr;
    json_array_foreach(groups, i, gr) {
        json_t *ranks = json_is_object(gr) ? json_object_get(gr, "ranks") : gr;
        int v[64], n = 0;
        json_t *rv;
        size_t q;
        json_array_foreach(ranks, q, rv)
            if (n < 64)
                v[n++] = relabel((int)json_integer_value(rv), N);
        qsort(v, (size_t)n, sizeof *v, cmp_int);
        json_array_clear(ranks);
        for (int x = 0; x < n; x++)
            json_array_append_new(ranks, json_integer(v[x]));
    }
    return doc;
}

static cs_topology *load_topology(const char *spec)
{
    cs_error err;
    cs_topology *t = NULL;
    int nodes;
    bool renum = sscanf(spec, "dgx1ringrenum:%d", &nodes) == 1;
    if (renum || sscanf(spec, "dgx1ring:%d", &nodes) == 1) {
        json_t *expanded = NULL;
        char msg[256];
        json_t *topo = cluster_hook_dgx1("hook", nodes, 1, "ring", 12.5, &expanded, msg,
                                         sizeof msg);
        if (!topo) {
            fprintf(stderr, "cluster: %s\n", msg);
            exit(1);
        }
        if (renum)
            renumber(expanded, nodes);
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

static const double sizes[2] = {1048576.0, 1073741824.0};

/* The best simulated time at each size over a's of res (or the one a). */
static void best_of(const cs_topology *t, const cs_time_bound *tb, cs_algorithm *const *algs,
                    int n, double best[2], double bound[2], int besti[2])
{
    best[0] = best[1] = INFINITY;
    besti[0] = besti[1] = -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < 2; k++) {
            cs_bound_ratio br;
            cs_error err;
            if (synth_ratio_to_bound(t, tb, algs[i], sizes[k], &br, &err) != CS_OK)
                continue;
            bound[k] = br.bound_us;
            if (br.simulated_us < best[k]) {
                best[k] = br.simulated_us;
                besti[k] = i;
            }
        }
}

static void line(const char *what, double secs, double best[2], double bound[2], double ref)
{
    printf("  %-22s synth %7.3f s | 1MiB %10.1f us (ratio %.3f) | 1GiB %11.1f us (ratio %.3f)"
           " | 1GiB time / hier %.2f\n",
           what, secs, best[0], bound[0] / best[0], best[1], bound[1] / best[1],
           best[1] / ref);
    fflush(stdout);
}

static void busiest_links(const cs_topology *t, const cs_algorithm *a)
{
    cs_sim_result sr;
    cs_error err;
    if (simulate_algorithm(t, a, sizes[1], &sr, &err) != CS_OK)
        return;
    for (int q = 0; q < 5; q++) {
        int bi = -1;
        for (int l = 0; l < sr.nlinks; l++)
            if (sr.link_busy_us[l] >= 0 && (bi < 0 || sr.link_busy_us[l] > sr.link_busy_us[bi]))
                bi = l;
        if (bi < 0)
            break;
        const cs_link *lk = &t->links[bi];
        printf("      busiest link %d -> %d (%d lanes, %.1f GB/s%s): busy %.1f us of %.1f "
               "(utilization %.3f)\n", lk->src, lk->dst, lk->lanes, lk->gbps,
               t->group_of[lk->src] != t->group_of[lk->dst] ? ", fabric" : "",
               sr.link_busy_us[bi], sr.time_us, sr.link_utilization[bi]);
        sr.link_busy_us[bi] = -1;
    }
    sim_result_free(&sr);
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: hier_ring_bench TOPO COLLECTIVE [RUNS] [links]\n");
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
    bool links = argc > 4 && strcmp(argv[4], "links") == 0;
    if (runs < 1)
        runs = 1;
    cs_time_bound tb;
    cs_error err;
    if (collective_time_bound(t, &c, &tb, &err) != CS_OK) {
        fprintf(stderr, "bound: %s\n", err.message);
        return 1;
    }
    printf("== %s %s (%d ranks, %d nodes; bound: %s)\n", t->name, argv[2], t->ranks, t->ngroups,
           tb.cut);
    double *secs = calloc((size_t)runs, sizeof *secs);
    cs_result *res = NULL;
    for (int r = 0; r < runs; r++) {
        result_free(res);
        res = NULL;
        double t0 = cs_now();
        if (hier_synthesize(t, &c, NULL, &res, &err) != CS_OK) {
            printf("  hierarchical: refused: %s\n", err.message);
            return 1;
        }
        secs[r] = cs_now() - t0;
    }
    double hb[2], bound[2] = {0, 0};
    int hi[2];
    best_of(t, &tb, res->algs, res->nalgs, hb, bound, hi);
    for (int i = 0; i < res->nalgs; i++) {
        if (algorithm_verify(t, res->algs[i], &err) != CS_OK) {
            printf("  hierarchical [%d]: VERIFY FAILED: %s\n", i, err.message);
            return 1;
        }
    }
    char what[64];
    snprintf(what, sizeof what, "hierarchical (%d alg)", res->nalgs);
    line(what, bench_median(secs, runs), hb, bound, hb[1]);
    printf("      best 1GiB point: chunks %d, steps %d, sends %ld; 1MiB point: chunks %d\n",
           res->algs[hi[1]]->chunks, res->algs[hi[1]]->steps, res->algs[hi[1]]->nsends,
           res->algs[hi[0]]->chunks);
    if (links)
        busiest_links(t, res->algs[hi[1]]);
    cs_tacos_options to;
    tacos_options_default(&to);
    to.keep_sends = true;
    cs_result *tr = NULL;
    double t0 = cs_now();
    if (tacos_synthesize(t, &c, &to, &tr, &err) == CS_OK) {
        double s = cs_now() - t0, b[2];
        int bi[2];
        best_of(t, &tb, tr->algs, tr->nalgs, b, bound, bi);
        line("tacos", s, b, bound, hb[1]);
    } else {
        printf("  tacos: %s\n", err.message);
    }
    result_free(tr);
    int nb = 0;
    const cs_baseline_info *bl = baseline_list(&nb);
    for (int i = 0; i < nb; i++) {
        if (!baseline_supports(bl[i].name, kind))
            continue;
        cs_algorithm *a = NULL;
        t0 = cs_now();
        if (baseline_generate(bl[i].name, t, &c, NULL, &a, &err) != CS_OK) {
            printf("  %-22s refused: %.120s\n", bl[i].name, err.message);
            continue;
        }
        double s = cs_now() - t0, b[2];
        int bi[2];
        best_of(t, &tb, &a, 1, b, bound, bi);
        line(bl[i].name, s, b, bound, hb[1]);
        algorithm_free(a);
    }
    result_free(res);
    free(secs);
    topology_free(t);
    return 0;
}
