/*
 * renum_stages_bench.c - where a synthesis request's time goes on its way
 * through collsynthd, stage by stage, in one process (no HTTP, no store):
 * so a renumbered cluster can be compared with the cluster as built
 * (bench/hier_renumbered.sh gives the POST bodies; docs/BENCHMARKS.md,
 * "renumbered clusters through the daemon").
 *
 *   renum_stages_bench RUNS BODY.json [BODY.json ...]
 *   renum_stages_bench bounds RUNS SPEC [SPEC ...]
 *       collective_bounds of every collective kind (rooted ones at rank 0)
 *       on each topology (a builtin, a file, JSON text, or hook:N / ring:N
 *       for the Slurm hook's N-node DGX-1 cluster on a switch or a ring):
 *       steps, rounds per chunk as a fraction, the cut's description and
 *       the median milliseconds, so two builds can be compared line by line
 *
 * Stages, as the daemon runs them for a fresh key:
 *   parse      synth_request_parse of the POST body (the parse thread)
 *   reparse    synth_request_parse of the canonical request (the worker)
 *   synth      synth_run: the method, plus the result's bounds
 *   bounds     collective_bounds alone (synth_run calls it for methods
 *              that do not fill bound_steps, e.g. hierarchical)
 *   frame      synth_result_to_json_frame: time bound, ratio_to_bound
 *              (simulates every frontier algorithm)
 *   encode     result_codec_encode of the result with that frame
 * Prints per body the median and min seconds of each stage over RUNS, and
 * a hash of the result's sends (so two builds can be checked to give the
 * same schedules).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "result_codec.h"
#include "collective.h"
#include "cs_common.h"
#include "synthesize.h"

#include "../tests/bench_stats.h"
#include "../tests/cluster_testutil.h"

enum { ST_PARSE, ST_REPARSE, ST_SYNTH, ST_BOUNDS, ST_FRAME, ST_ENCODE, NST };
static const char *stage_name[NST] = {"parse", "reparse", "synth", "bounds", "frame", "encode"};

static char *slurp(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    if (buf && fread(buf, 1, (size_t)n, f) != (size_t)n) {
        free(buf);
        buf = NULL;
    }
    fclose(f);
    if (buf)
        buf[n] = 0;
    *len = (size_t)n;
    return buf;
}

/* FNV-1a over every algorithm's sends in order (chunk, src, dst, step, op). */
static unsigned long long sends_hash(const cs_result *res)
{
    unsigned long long h = 1469598103934665603ULL;
    for (int i = 0; i < res->nalgs; i++) {
        const cs_algorithm *a = res->algs[i];
        for (long s = 0; s < a->nsends; s++) {
            cs_send x = algorithm_send(a, s);
            long v[5] = {x.chunk, x.src, x.dst, x.step, x.op};
            for (int k = 0; k < 5; k++) {
                h ^= (unsigned long long)v[k];
                h *= 1099511628211ULL;
            }
        }
    }
    return h;
}

static int run_body(const char *path, int runs)
{
    size_t len = 0;
    char *body = slurp(path, &len);
    if (!body) {
        fprintf(stderr, "%s: cannot read\n", path);
        return 1;
    }
    cs_synth_limits lim;
    synth_limits_default(&lim);
    lim.max_links = 0;
    double *t[NST];
    for (int s = 0; s < NST; s++)
        t[s] = calloc((size_t)runs, sizeof(double));
    unsigned long long hash = 0;
    char method[32] = "";
    for (int r = 0; r < runs; r++) {
        cs_error err;
        cs_synth_request *req = NULL, *req2 = NULL;
        double t0 = cs_now();
        if (synth_request_parse(body, len, &lim, &req, &err) != CS_OK) {
            fprintf(stderr, "%s: %s\n", path, err.message);
            return 1;
        }
        double t1 = cs_now();
        char *canon = synth_request_canonical_text(req);
        double t2 = cs_now();
        if (synth_request_parse(canon, strlen(canon), &lim, &req2, &err) != CS_OK) {
            fprintf(stderr, "%s (canonical): %s\n", path, err.message);
            return 1;
        }
        double t3 = cs_now();
        free(canon);
        cs_result *res = NULL;
        if (synth_run(req2, &lim, NULL, &res, &err) != CS_OK) {
            fprintf(stderr, "%s: synth_run: %s\n", path, err.message);
            return 1;
        }
        double t4 = cs_now();
        cs_bounds b;
        collective_bounds(req2->topology, &req2->collective, &b, NULL);
        double t5 = cs_now();
        json_t *frame = synth_result_to_json_frame(req2, res);
        double t6 = cs_now();
        void *blob = NULL;
        size_t blen = 0;
        if (result_codec_encode(res, frame, &blob, &blen, &err) != CS_OK) {
            fprintf(stderr, "%s: encode: %s\n", path, err.message);
            return 1;
        }
        double t7 = cs_now();
        t[ST_PARSE][r] = t1 - t0;
        t[ST_REPARSE][r] = t3 - t2;
        t[ST_SYNTH][r] = t4 - t3;
        t[ST_BOUNDS][r] = t5 - t4;
        t[ST_FRAME][r] = t6 - t5;
        t[ST_ENCODE][r] = t7 - t6;
        unsigned long long h = sends_hash(res);
        if (r > 0 && h != hash)
            fprintf(stderr, "%s: run %d gave other sends\n", path, r);
        hash = h;
        snprintf(method, sizeof method, "%s", res->method);
        free(blob);
        json_decref(frame);
        result_free(res);
        synth_request_free(req);
        synth_request_free(req2);
    }
    printf("%s method %s sends_hash %016llx\n", path, method, hash);
    for (int s = 0; s < NST; s++) {
        qsort(t[s], (size_t)runs, sizeof(double), bench_cmp_double);
        printf("  %-8s median %.4f s  min %.4f s\n", stage_name[s], t[s][runs / 2], t[s][0]);
        free(t[s]);
    }
    free(body);
    return 0;
}

static cs_topology *load_spec(const char *spec)
{
    json_t *doc = NULL;
    char msg[256];
    if (!strncmp(spec, "hook:", 5) || !strncmp(spec, "hookring:", 9)) {
        bool ring = spec[4] != ':';
        json_t *name = cluster_hook_dgx1("lab", atoi(strchr(spec, ':') + 1), 1,
                                         ring ? "ring" : "switch", 12.5, &doc, msg, sizeof msg);
        if (!name) {
            fprintf(stderr, "%s: %s\n", spec, msg);
            return NULL;
        }
        json_decref(name);
    }
    cs_topology_parse_options opt = {.max_ranks = 0};
    cs_topology *t = NULL;
    cs_error err;
    int rc = doc ? topology_from_json(doc, &opt, &t, &err) : topology_load(spec, &opt, &t, &err);
    json_decref(doc);
    if (rc != CS_OK) {
        fprintf(stderr, "%s: %s\n", spec, err.message);
        return NULL;
    }
    return t;
}

static int run_bounds(int runs, const char *spec)
{
    cs_topology *t = load_spec(spec);
    if (!t)
        return 1;
    static const cs_coll_kind kinds[] = {
        CS_COLL_ALLGATHER, CS_COLL_ALLTOALL, CS_COLL_BROADCAST, CS_COLL_SCATTER,
        CS_COLL_GATHER,    CS_COLL_REDUCESCATTER, CS_COLL_REDUCE, CS_COLL_ALLREDUCE};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        cs_collective c;
        collective_init(&c, kinds[k], collective_kind_is_rooted(kinds[k]) ? 0 : -1);
        double *ms = calloc((size_t)runs, sizeof(double));
        cs_bounds b;
        cs_error err;
        for (int r = 0; r < runs; r++) {
            double t0 = cs_now();
            if (collective_bounds(t, &c, &b, &err) != CS_OK) {
                fprintf(stderr, "%s %s: %s\n", spec, collective_kind_name(kinds[k]), err.message);
                return 1;
            }
            ms[r] = (cs_now() - t0) * 1e3;
        }
        qsort(ms, (size_t)runs, sizeof(double), bench_cmp_double);
        printf("%s %s steps %d rpc %lld/%lld ms %.2f why %s\n", spec,
               collective_kind_name(kinds[k]), b.steps, (long long)b.rpc_num,
               (long long)b.rpc_den, ms[runs / 2], b.bandwidth_cut);
        free(ms);
        collective_free(&c);
    }
    topology_free(t);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc >= 4 && !strcmp(argv[1], "bounds")) {
        int runs = atoi(argv[2]) > 0 ? atoi(argv[2]) : 1;
        for (int i = 3; i < argc; i++)
            if (run_bounds(runs, argv[i]))
                return 1;
        return 0;
    }
    if (argc < 3) {
        fprintf(stderr, "usage: renum_stages_bench RUNS BODY.json [BODY.json ...]\n");
        return 2;
    }
    int runs = atoi(argv[1]);
    if (runs < 1)
        runs = 1;
    for (int i = 2; i < argc; i++)
        if (run_body(argv[i], runs))
            return 1;
    return 0;
}
