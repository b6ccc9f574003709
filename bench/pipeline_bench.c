/*
 * pipeline_bench.c - memory and time per send on the path a result takes
 * through the service: synthesize -> verify -> simulate -> store (encode).
 * docs/BENCHMARKS.md, "Issue 10: memory and time per send".
 *
 *   pipeline_bench SIDE [THREADS]
 *
 * TACOS allgather on mesh2d:SIDExSIDE (1 trial, sends kept), then the
 * stored form (result_codec_encode of the result and its skeleton), in one
 * process.  Prints "key value" lines: sends; seconds of each stage (TACOS's
 * own search / build / verify / simulate figures, and the encoding); the
 * peak RSS of each stage above the RSS it started with (the peak is reset
 * between stages through /proc/self/clear_refs), and the whole path's peak
 * above the process's RSS before synthesis, each also in bytes per send.
 * One size per process: bench/pipeline.sh runs it several times and takes
 * medians.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "result_codec.h"
#include "tacos.h"

/* VmRSS or VmHWM of this process, in kB (-1 when /proc is unreadable). */
static long status_kb(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, field, n) && line[n] == ':') {
            v = atol(line + n + 1);
            break;
        }
    fclose(f);
    return v;
}

/* Resets VmHWM to the current RSS (Linux >= 4.0); false when not possible. */
static bool reset_peak(void)
{
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f)
        return false;
    bool ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok;
}

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double json_num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return v ? json_number_value(v) : -1;
}

int main(int argc, char **argv)
{
    int side = argc > 1 ? atoi(argv[1]) : 32;
    int threads = argc > 2 ? atoi(argv[2]) : 0;
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
    opt.threads = threads;
    opt.keep_sends = true;
    bool resettable = reset_peak();
    long rss0 = status_kb("VmRSS");
    cs_result *res = NULL;
    double t0 = cs_now();
    if (tacos_synthesize(t, &c, &opt, &res, &err)) {
        fprintf(stderr, "tacos: %s\n", err.message);
        return 1;
    }
    double tacos_s = cs_now() - t0;
    long synth_peak = status_kb("VmHWM");
    const cs_algorithm *a = res->algs[0];
    long n = a->nsends;
    printf("topology %s\nsends %ld\n", name, n);
    printf("tacos_total_s %.3f\n", tacos_s);
    printf("search_s %.3f\nbuild_s %.3f\nverify_s %.3f\nsimulate_s %.3f\n",
           json_num(res->stats, "search_seconds"), json_num(res->stats, "build_seconds"),
           json_num(res->stats, "verify_seconds"), json_num(res->stats, "simulate_seconds"));
    double synth_s = json_num(res->stats, "search_seconds") + json_num(res->stats, "build_seconds");
    double vs_s = json_num(res->stats, "verify_seconds") + json_num(res->stats, "simulate_seconds");
    printf("verify_plus_simulate_over_synthesis %.3f\n", synth_s > 0 ? vs_s / synth_s : -1);
    printf("send_storage_bytes_per_send %.2f\n", (double)algorithm_storage_bytes(a) / n);
    printf("synth_verify_sim_peak_bytes_per_send %.2f\n", (synth_peak - rss0) * 1024.0 / n);

    /* the store: the encoded form, from the result and its skeleton */
    long before = status_kb("VmRSS");
    printf("rss_after_synthesis_bytes_per_send %.2f\n", (before - rss0) * 1024.0 / n);
    resettable = resettable && reset_peak();
    t0 = cs_now();
    double c0 = cpu_now();
    json_t *skel = result_to_json_frame(res);
    void *blob = NULL;
    size_t len = 0;
    if (result_codec_encode(res, skel, &blob, &len, &err)) {
        fprintf(stderr, "encode: %s\n", err.message);
        return 1;
    }
    double enc_s = cs_now() - t0, enc_cpu = cpu_now() - c0;
    long enc_peak = status_kb("VmHWM");
    printf("encode_s %.3f\nencode_cpu_s %.3f\nencoded_bytes_per_send %.2f\n", enc_s, enc_cpu,
           (double)len / n);
    if (resettable)
        printf("encode_working_bytes_per_send %.2f\n",
               (enc_peak - before) * 1024.0 / n - (double)len / n);
    long peak = enc_peak > synth_peak ? enc_peak : synth_peak;
    printf("path_peak_rss_mb %.1f\npath_peak_bytes_per_send %.2f\n", peak / 1024.0,
           (peak - rss0) * 1024.0 / n);
    printf("peak_reset %s\n", resettable ? "yes" : "no (encode peak includes earlier stages)");
    json_decref(skel);
    free(blob);
    result_free(res);
    collective_free(&c);
    topology_free(t);
    return 0;
}
