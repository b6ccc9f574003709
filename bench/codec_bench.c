/*
 * codec_bench.c - the result codec at scale (docs/BENCHMARKS.md, "Issue 10:
 * delivery").
 *
 *   codec_bench SIDE [RUNS]   TACOS allgather on a SIDE x SIDE mesh (sends
 *                             kept), then: encoded bytes and bytes per send,
 *                             encode / decode / full-JSON-stream / one-rank
 *                             slice seconds (medians of RUNS), the JSON size,
 *                             and the old path (DOM + json_dumps) for
 *                             comparison when SIDE <= 32
 *
 * Prints "key value" lines.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "result_codec.h"
#include "tacos.h"
#include "../tests/bench_stats.h"

static long peak_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(int argc, char **argv)
{
    int side = argc > 1 ? atoi(argv[1]) : 32;
    int runs = argc > 2 ? atoi(argv[2]) : 3;
    char name[64];
    snprintf(name, sizeof name, "mesh2d:%dx%d", side, side);
    cs_error err;
    cs_topology *t = NULL;
    if (topology_builtin(name, &t, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    cs_collective c;
    collective_init(&c, CS_COLL_ALLGATHER, -1);
    cs_tacos_options opt;
    tacos_options_default(&opt);
    opt.trials = 1;
    opt.keep_sends = true;
    cs_result *res = NULL;
    double t0 = cs_now();
    if (tacos_synthesize(t, &c, &opt, &res, &err)) {
        fprintf(stderr, "tacos: %s\n", err.message);
        return 1;
    }
    long nsends = res->algs[0]->nsends;
    printf("topology %s\nsends %ld\ntacos_s %.2f\nrss_after_tacos_mb %.0f\n", name, nsends,
           cs_now() - t0, peak_rss_kb() / 1024.0);
    json_t *skel = result_to_json_frame(res);
    double enc[16], dec[16], full[16], slice[16];
    void *blob = NULL;
    size_t len = 0;
    size_t json_bytes = 0;
    long slice_sends = 0;
    for (int r = 0; r < runs && r < 16; r++) {
        free(blob);
        t0 = cs_now();
        if (result_codec_encode(res, skel, &blob, &len, &err)) {
            fprintf(stderr, "encode: %s\n", err.message);
            return 1;
        }
        enc[r] = cs_now() - t0;
        cs_codec_view *v = NULL;
        result_codec_open(blob, len, &v, &err);
        t0 = cs_now();
        cs_result *back = NULL;
        if (result_codec_decode(v, &back, &err)) {
            fprintf(stderr, "decode: %s\n", err.message);
            return 1;
        }
        dec[r] = cs_now() - t0;
        result_free(back);
        cs_json_view jv = CS_JSON_VIEW_FULL;
        cs_result_writer *w = NULL;
        t0 = cs_now();
        result_writer_open_encoded(v, &jv, &w, &err);
        static char buf[1 << 16];
        long n;
        json_bytes = 0;
        while ((n = result_writer_read(w, buf, sizeof buf, &err)) > 0)
            json_bytes += (size_t)n;
        result_writer_free(w);
        full[r] = cs_now() - t0;
        jv.rank_lo = jv.rank_hi = side * side / 2;
        t0 = cs_now();
        result_writer_open_encoded(v, &jv, &w, &err);
        char *text = NULL;
        size_t tl = 0;
        result_writer_dump(w, &text, &tl, &err);
        result_writer_free(w);
        slice[r] = cs_now() - t0;
        slice_sends = 0;
        for (char *p = text; (p = strstr(p, "{\"chunk\"")); p++)
            slice_sends++;
        free(text);
        result_codec_close(v);
    }
    int nr = runs < 16 ? runs : 16;
    printf("encoded_bytes %zu\nencoded_bytes_per_send %.2f\n", len, (double)len / nsends);
    printf("encode_s %.3f\ndecode_s %.3f\n", bench_median(enc, nr), bench_median(dec, nr));
    printf("json_bytes %zu\njson_stream_s %.3f\njson_stream_mb_per_s %.0f\n", json_bytes,
           bench_median(full, nr), json_bytes / 1e6 / bench_median(full, nr));
    printf("slice_one_rank_sends %ld\nslice_one_rank_s %.4f\n", slice_sends, bench_median(slice, nr));
    if (side <= 32) {
        t0 = cs_now();
        json_t *doc = result_to_json(res);
        char *text = json_dumps(doc, JSON_COMPACT | CS_JSON_REAL);
        json_decref(doc);
        printf("dom_dump_s %.3f\ndom_bytes %zu\n", cs_now() - t0, strlen(text));
        free(text);
    }
    printf("peak_rss_mb %.0f\n", peak_rss_kb() / 1024.0);
    json_decref(skel);
    free(blob);
    result_free(res);
    collective_free(&c);
    topology_free(t);
    return 0;
}
