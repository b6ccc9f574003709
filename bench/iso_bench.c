/*
 * iso_bench.c - isomorphism keys (synth/iso/iso.h): how long canonicalizing
 * a cluster request takes, and whether a renumbered copy of the cluster gets
 * the same key.
 *
 *   iso_bench speed [RUNS]        allreduce requests on dgxh100:128 (NVSwitch
 *                                 nodes on 8 rails), the Slurm hook's cluster of
 *                                 128 DGX-1 nodes (NICs 0,2,4,6 on one fabric
 *                                 switch of 12.5 GB/s) and torus2d:32x32, 1024
 *                                 ranks each: median, min and max milliseconds
 *                                 of RUNS iso_canonicalize calls, for the
 *                                 automatic scheme and for bliss on the whole
 *                                 graph ("direct"); then the same for a copy
 *                                 with shuffled node order and rank labels,
 *                                 and whether the keys match
 *   iso_bench one SPEC [direct]   one call, for profiles (SPEC: a builtin,
 *                                 or hook:N for the hook's N-node cluster)
 *   iso_bench emit SPEC SEED COLL METHOD WAIT
 *                                 a POST body for bench/iso.sh: SPEC's topology
 *                                 as Topology JSON, renumbered (nodes and ranks
 *                                 shuffled) with SEED unless SEED is 0
 *
 * Prints one line per measurement, "key value" pairs, for bench/iso.sh.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "iso.h"
#include "synthesize.h"

#include "../tests/cluster_testutil.h"
#include "../tests/bench_stats.h"

/* The Slurm hook's allocation of n DGX-1 nodes, as the hook builds it. */
static json_t *hook_cluster(int n)
{
    char msg[256];
    json_t *topo = cluster_hook_dgx1("lab", n, 1, "switch", 12.5, NULL, msg, sizeof msg);
    if (!topo) {
        fprintf(stderr, "hook cluster: %s\n", msg);
        exit(1);
    }
    return topo;
}

static cs_synth_request *request_for(const char *spec)
{
    json_t *topo;
    if (!strncmp(spec, "hook:", 5))
        topo = hook_cluster(atoi(spec + 5));
    else
        topo = json_string(spec);
    json_t *doc = json_pack("{s:o, s:{s:s}}", "topology", topo, "collective", "kind",
                            "allreduce");
    cs_synth_limits lim;
    synth_limits_default(&lim);
    lim.max_links = 0;
    cs_synth_request *req = NULL;
    cs_error err;
    if (synth_request_from_json(doc, &lim, &req, &err) != CS_OK) {
        fprintf(stderr, "%s: %s\n", spec, err.message);
        exit(1);
    }
    json_decref(doc);
    return req;
}

/* The same request on a renumbered cluster: nodes (groups) in a shuffled
 * order, ranks shuffled inside each node; without groups, all ranks
 * shuffled. */
static cs_synth_request *shuffled(const cs_synth_request *r, unsigned seed)
{
    const cs_topology *t = r->topology;
    int P = t->ranks;
    int *map = malloc(sizeof *map * (size_t)P);
    srand(seed);
    if (t->ngroups > 0) {
        int G = t->ngroups;
        int *gorder = malloc(sizeof *gorder * (size_t)G);
        for (int q = 0; q < G; q++)
            gorder[q] = q;
        for (int q = G - 1; q > 0; q--) {
            int k = rand() % (q + 1), x = gorder[q];
            gorder[q] = gorder[k];
            gorder[k] = x;
        }
        int next = 0;
        for (int qi = 0; qi < G; qi++) {
            const cs_group *g = &t->groups[gorder[qi]];
            int *perm = malloc(sizeof *perm * (size_t)g->nranks);
            for (int k = 0; k < g->nranks; k++)
                perm[k] = k;
            for (int k = g->nranks - 1; k > 0; k--) {
                int j = rand() % (k + 1), x = perm[k];
                perm[k] = perm[j];
                perm[j] = x;
            }
            for (int k = 0; k < g->nranks; k++)
                map[g->ranks[k]] = next + perm[k];
            next += g->nranks;
            free(perm);
        }
        free(gorder);
    } else {
        for (int k = 0; k < P; k++)
            map[k] = k;
        for (int k = P - 1; k > 0; k--) {
            int j = rand() % (k + 1), x = map[k];
            map[k] = map[j];
            map[j] = x;
        }
    }
    cs_topology *nt = NULL;
    cs_error err;
    if (iso_relabel_topology(t, map, "renumbered", &nt, &err) != CS_OK) {
        fprintf(stderr, "relabel: %s\n", err.message);
        exit(1);
    }
    json_t *tdoc = topology_to_json(nt);
    topology_free(nt);
    free(map);
    json_t *doc = json_pack("{s:o, s:{s:s}}", "topology", tdoc, "collective", "kind",
                            "allreduce");
    cs_synth_limits lim;
    synth_limits_default(&lim);
    lim.max_links = 0;
    cs_synth_request *req = NULL;
    if (synth_request_from_json(doc, &lim, &req, &err) != CS_OK) {
        fprintf(stderr, "renumbered: %s\n", err.message);
        exit(1);
    }
    json_decref(doc);
    return req;
}

static void measure(const char *label, const cs_synth_request *r, const cs_iso_options *opt,
                    int runs, char key[65], char scheme[16])
{
    double *ms = malloc(sizeof *ms * (size_t)runs);
    for (int i = 0; i < runs; i++) {
        cs_iso_form f;
        cs_error err;
        double t0 = cs_now();
        if (iso_canonicalize(r, opt, &f, &err) != CS_OK) {
            fprintf(stderr, "%s: %s\n", label, err.message);
            exit(1);
        }
        ms[i] = (cs_now() - t0) * 1e3;
        snprintf(key, 65, "%s", f.key);
        snprintf(scheme, 16, "%s", f.scheme);
        iso_form_clear(&f);
    }
    qsort(ms, (size_t)runs, sizeof *ms, bench_cmp_double);
    printf("%s ranks %d scheme %s runs %d median_ms %.3f min_ms %.3f max_ms %.3f\n", label,
           r->topology->ranks, scheme, runs, ms[runs / 2], ms[0], ms[runs - 1]);
    free(ms);
}

static int speed(int runs)
{
    static const char *const specs[] = {"dgxh100:128", "hook:128", "torus2d:32x32"};
    cs_iso_options direct = {.two_level_min_ranks = -1};
    for (size_t i = 0; i < sizeof specs / sizeof *specs; i++) {
        cs_synth_request *r = request_for(specs[i]);
        cs_synth_request *s = shuffled(r, 7 + (unsigned)i);
        char label[96], k1[65], k2[65], k3[65], sch[16];
        snprintf(label, sizeof label, "%s auto", specs[i]);
        measure(label, r, NULL, runs, k1, sch);
        snprintf(label, sizeof label, "%s renumbered auto", specs[i]);
        measure(label, s, NULL, runs, k2, sch);
        snprintf(label, sizeof label, "%s direct", specs[i]);
        measure(label, r, &direct, runs > 3 ? 3 : runs, k3, sch);
        printf("%s renumbered_same_key %s direct_same_key_as_auto %s\n", specs[i],
               strcmp(k1, k2) ? "no" : "yes", strcmp(k1, k3) ? "no(other scheme)" : "yes");
        synth_request_free(r);
        synth_request_free(s);
    }
    return 0;
}

static int emit(const char *spec, unsigned seed, const char *coll, const char *method,
                double wait_s)
{
    cs_synth_request *r = request_for(spec);
    cs_synth_request *s = seed ? shuffled(r, seed) : NULL;
    json_t *topo = topology_to_json((s ? s : r)->topology);
    json_t *doc = json_pack("{s:o, s:{s:s}, s:s, s:{s:f}}", "topology", topo, "collective",
                            "kind", coll, "method", method, "options", "wait_s", wait_s);
    char *text = json_dumps(doc, JSON_COMPACT);
    puts(text);
    free(text);
    json_decref(doc);
    synth_request_free(r);
    synth_request_free(s);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 7 && !strcmp(argv[1], "emit"))
        return emit(argv[2], (unsigned)atoi(argv[3]), argv[4], argv[5], atof(argv[6]));
    if (argc >= 2 && !strcmp(argv[1], "speed"))
        return speed(argc > 2 ? atoi(argv[2]) : 9);
    if (argc >= 3 && !strcmp(argv[1], "one")) {
        cs_synth_request *r = request_for(argv[2]);
        cs_iso_options opt = {.two_level_min_ranks = argc > 3 && !strcmp(argv[3], "direct") ? -1 : 0};
        char key[65], sch[16];
        measure(argv[2], r, &opt, 1, key, sch);
        printf("key %s\n", key);
        synth_request_free(r);
        return 0;
    }
    fprintf(stderr, "usage: iso_bench speed [RUNS] | iso_bench one SPEC [direct]\n");
    return 2;
}
