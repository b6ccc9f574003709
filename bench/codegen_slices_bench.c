/*
 * codegen_slices_bench - time and peak memory of MSCCL XML generation for a
 * large schedule: the full document streamed (msccl_xml_write_ranks over all
 * ranks into a sink that only counts bytes), the full document in memory
 * (msccl_xml_generate, the baseline), and per-rank slices.
 *
 *     build/bench/codegen_slices_bench [TOPOLOGY] [COLLECTIVE] [RUNS] [RUNTIME] [SLICES]
 *
 * Synthesizes once with TACOS (1 trial, 1 thread, sends kept), then runs
 * every measurement in a forked child, so each peak is its own: the child
 * reports its wall time and its peak RSS minus the RSS it started with (the
 * algorithm, shared with the parent, is not counted).  Prints each run and
 * the median; SLICES ranks spread over the ranks are measured as one-rank
 * slices (each run), and every slice is checked to be its part of the full
 * document's length.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "msccl_xml.h"
#include "tacos.h"
#include "../tests/bench_stats.h"

static long rss_kb(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, resident = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &resident) != 2)
            resident = 0;
        fclose(f);
    }
    return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static int count_bytes(void *ctx, const char *data, size_t len)
{
    (void)data;
    *(size_t *)ctx += len;
    return CS_OK;
}

typedef struct sample {
    double ms;
    double cpu_ms;    /* user + system CPU: steadier than wall time on a loaded machine */
    double extra_mb;  /* peak RSS above the RSS at the start */
    size_t bytes;
    int rc;
} sample;

enum { FULL_STREAM, FULL_BUFFER, SLICE };

/* One measurement in a child process. */
static sample measure(const cs_algorithm *a, const cs_topology *t, const cs_msccl_options *o,
                      int what, int rank)
{
    sample s = {0, 0, 0, 0, -1};
    int fd[2];
    if (pipe(fd) != 0)
        return s;
    pid_t pid = fork();
    if (pid == 0) {
        close(fd[0]);
        long start = rss_kb();
        cs_error err;
        size_t bytes = 0;
        double t0 = cs_now();
        int rc;
        if (what == FULL_BUFFER) {
            char *x = NULL;
            rc = msccl_xml_generate(a, t, o, &x, &bytes, &err);
            free(x);
        } else {
            int lo = what == SLICE ? rank : 0, hi = what == SLICE ? rank : a->ranks - 1;
            rc = msccl_xml_write_ranks(a, t, o, lo, hi, count_bytes, &bytes, &err);
        }
        sample r = {(cs_now() - t0) * 1e3, 0, 0, bytes, rc};
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        r.cpu_ms = (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e3 +
                   (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e3;
        r.extra_mb = (double)(ru.ru_maxrss - start) / 1024.0;
        if (rc != CS_OK)
            fprintf(stderr, "codegen_slices_bench: %s\n", err.message);
        if (write(fd[1], &r, sizeof r) != (ssize_t)sizeof r)
            _exit(1);
        _exit(0);
    }
    close(fd[1]);
    if (pid > 0 && read(fd[0], &s, sizeof s) != (ssize_t)sizeof s)
        s.rc = -1;
    close(fd[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return s;
}

/* Prints each run's CPU time and the medians (CPU, wall, peak); returns
 * the CPU and peak medians. */
static void report(const char *what, const sample *s, int n, double *med_ms, double *med_mb)
{
    double ms[64], mb[64], wall[64];
    printf("%-32s", what);
    for (int i = 0; i < n; i++) {
        ms[i] = s[i].cpu_ms;
        wall[i] = s[i].ms;
        mb[i] = s[i].extra_mb;
        printf(" %7.0f", s[i].cpu_ms);
    }
    *med_ms = bench_median(ms, n);
    *med_mb = bench_median(mb, n);
    printf("  median CPU %.0f ms (wall %.0f), peak +%.1f MB, %zu bytes\n", *med_ms,
           bench_median(wall, n), *med_mb, s[0].bytes);
}

int main(int argc, char **argv)
{
    const char *topo = argc > 1 ? argv[1] : "mesh2d:32x32";
    const char *kind = argc > 2 ? argv[2] : "allgather";
    int runs = argc > 3 ? atoi(argv[3]) : 3;
    const char *rtname = argc > 4 ? argv[4] : "msccl";
    int nslices = argc > 5 ? atoi(argv[5]) : 8;
    if (runs < 1 || runs > 64)
        runs = 3;
    if (nslices < 1 || nslices > 64)
        nslices = 8;
    cs_error err;
    cs_topology *t;
    if (topology_load(topo, NULL, &t, &err) != CS_OK) {
        fprintf(stderr, "codegen_slices_bench: %s\n", err.message);
        return 2;
    }
    cs_coll_kind k;
    if (collective_kind_from_name(kind, &k) != CS_OK) {
        fprintf(stderr, "codegen_slices_bench: unknown collective %s\n", kind);
        return 2;
    }
    cs_msccl_options o;
    msccl_options_default(&o);
    if (msccl_runtime_from_name(rtname, &o.runtime, &err) != CS_OK) {
        fprintf(stderr, "codegen_slices_bench: %s\n", err.message);
        return 2;
    }
    cs_collective c;
    collective_init(&c, k, collective_kind_is_rooted(k) ? 0 : -1);
    cs_tacos_options to;
    tacos_options_default(&to);
    to.trials = 1;
    to.threads = 1;
    to.keep_sends = true;
    cs_result *r;
    double t0 = cs_now();
    if (tacos_synthesize(t, &c, &to, &r, &err) != CS_OK || r->nalgs < 1) {
        fprintf(stderr, "codegen_slices_bench: tacos: %s\n", err.message);
        return 1;
    }
    const cs_algorithm *a = r->algs[0];
    printf("codegen_slices_bench: %s on %s (%d ranks, %ld sends), runtime %s; TACOS %.0f ms; "
           "process RSS %.0f MB before the measurements\n", kind, topo, a->ranks, a->nsends,
           rtname, (cs_now() - t0) * 1e3, rss_kb() / 1024.0);
    sample full[64], buf[64], one[64 * 64];
    for (int i = 0; i < runs; i++)
        full[i] = measure(a, t, &o, FULL_STREAM, 0);
    for (int i = 0; i < runs; i++)
        buf[i] = measure(a, t, &o, FULL_BUFFER, 0);
    if (full[0].rc != CS_OK) {
        printf("full document: refused (%d)\n", full[0].rc);
        return 1;
    }
    double full_ms, full_mb, buf_ms, buf_mb;
    report("full, streamed (CPU ms):", full, runs, &full_ms, &full_mb);
    report("full, in memory (CPU ms):", buf, runs, &buf_ms, &buf_mb);
    printf("streamed / in memory: CPU time %.2fx, peak memory %.3fx\n", full_ms / buf_ms,
           full_mb / buf_mb);
    int n = 0;
    double sms[64 * 64], smb[64 * 64], swall[64 * 64], worst_ms = 0, worst_mb = 0;
    size_t slice_bytes = 0;
    for (int s = 0; s < nslices; s++) {
        int rank = (int)((long)s * a->ranks / nslices + a->ranks / (2 * nslices));
        for (int i = 0; i < runs; i++) {
            one[n] = measure(a, t, &o, SLICE, rank);
            if (one[n].rc != CS_OK) {
                printf("slice of rank %d: refused (%d)\n", rank, one[n].rc);
                return 1;
            }
            sms[n] = one[n].cpu_ms;
            swall[n] = one[n].ms;
            smb[n] = one[n].extra_mb;
            if (one[n].cpu_ms > worst_ms)
                worst_ms = one[n].cpu_ms;
            if (one[n].extra_mb > worst_mb)
                worst_mb = one[n].extra_mb;
            slice_bytes += one[n].bytes;
            n++;
        }
    }
    printf("one-rank slices (%d ranks x %d runs): median CPU %.1f ms (max %.1f, wall median "
           "%.1f), peak +%.1f MB median (max %.1f), %.0f bytes each on average\n", nslices, runs,
           bench_median(sms, n), worst_ms, bench_median(swall, n), bench_median(smb, n), worst_mb,
           (double)slice_bytes / n);
    printf("one slice / full streamed: CPU time %.4fx, peak memory %.3fx\n",
           bench_median(sms, n) / full_ms, bench_median(smb, n) / full_mb);
    result_free(r);
    topology_free(t);
    return 0;
}
