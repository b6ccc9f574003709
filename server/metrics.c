/*
 * metrics.c - Prometheus counters and histograms (see metrics.h).  Status
 * codes map to a small fixed table so every (route, status) counter is a
 * preallocated atomic; unknown codes share the last slot (status="other").
 */
#include "metrics.h"

#include <jansson.h>

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cs_common.h"

static const char *const route_names[ROUTE_COUNT] = {
    "health", "topologies", "topology", "synthesize", "job_get", "job_delete",
    "result", "metrics",    "static",   "preflight",  "results_list", "jobs_list", "other"};

static const int status_codes[METRICS_NSTATUS] = {200, 201, 202, 204, 206, 301, 302, 304,
                                                  400, 401, 403, 404, 405, 409, 413, 415,
                                                  422, 429, 500, 501, 503, 504, 0,   -1};

static const double buckets[METRICS_NBUCKETS] = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                                 0.025,  0.05,  0.1,    0.25,  0.5,
                                                 1,      2.5,   5,      10,    1e300};

const char *route_name(cs_route r)
{
    return (unsigned)r < ROUTE_COUNT ? route_names[r] : "other";
}

/* Bucket bounds; the last is +Inf. */
static const double synthesis_bounds[METRICS_HIST_BUCKETS] = {
    0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 1e300};
static const double queue_bounds[METRICS_HIST_BUCKETS] = {
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 600, 1800, 3600, 1e300};
static const double store_bounds[METRICS_HIST_BUCKETS] = {
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
    0.25,   0.5,     1,      2.5,   5,      1e300};
static const char *const outcome_names[SYNTH_OUTCOMES] = {"done", "failed", "cancelled"};
static const char *const store_op_names[STORE_OPS] = {"read", "write", "commit"};

void metrics_init(cs_metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->method_lock, NULL);
}

void metrics_destroy(cs_metrics *m) { pthread_mutex_destroy(&m->method_lock); }

static void hist_observe(cs_hist *h, const double *bounds, double seconds)
{
    int b = 0;
    while (b < METRICS_HIST_BUCKETS - 1 && seconds > bounds[b])
        b++;
    atomic_fetch_add_explicit(&h->bucket[b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&h->sum_us, (unsigned long)(seconds > 0 ? seconds * 1e6 : 0),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&h->count, 1, memory_order_relaxed);
}

/* The slot of a method name; the last slot collects names beyond it. */
static int method_slot(cs_metrics *m, const char *method)
{
    int n = atomic_load(&m->nmethods);
    for (int i = 0; i < n; i++)
        if (!strcmp(m->method_names[i], method))
            return i;
    pthread_mutex_lock(&m->method_lock);
    n = atomic_load(&m->nmethods);
    int slot = -1;
    for (int i = 0; i < n && slot < 0; i++)
        if (!strcmp(m->method_names[i], method))
            slot = i;
    if (slot < 0 && n < METRICS_NMETHODS - 1) {
        slot = n;
        snprintf(m->method_names[slot], sizeof m->method_names[slot], "%s", method);
        atomic_store(&m->nmethods, n + 1); /* published after the name is written */
    } else if (slot < 0) {
        slot = METRICS_NMETHODS - 1;
        snprintf(m->method_names[slot], sizeof m->method_names[slot], "other");
        if (n < METRICS_NMETHODS)
            atomic_store(&m->nmethods, METRICS_NMETHODS);
    }
    pthread_mutex_unlock(&m->method_lock);
    return slot;
}

void metrics_observe_synthesis(cs_metrics *m, const char *method, cs_synth_outcome outcome,
                               double seconds)
{
    if ((unsigned)outcome >= SYNTH_OUTCOMES)
        return;
    hist_observe(&m->synthesis[method_slot(m, method && *method ? method : "unknown")][outcome],
                 synthesis_bounds, seconds);
}

void metrics_observe_queue_wait(cs_metrics *m, double seconds)
{
    hist_observe(&m->queue_wait, queue_bounds, seconds);
}

void metrics_observe_store(cs_metrics *m, cs_store_op_kind op, double seconds, bool ok)
{
    if ((unsigned)op >= STORE_OPS)
        return;
    hist_observe(&m->store[op], store_bounds, seconds);
    if (!ok)
        atomic_fetch_add_explicit(&m->store_errors, 1, memory_order_relaxed);
}

void metrics_sample_process(cs_metrics_gauges *g)
{
    long page = sysconf(_SC_PAGESIZE), ticks = sysconf(_SC_CLK_TCK);
    FILE *f = fopen("/proc/self/stat", "r");
    if (f) {
        /* after the ")" that ends the command name: fields 3.. of proc(5) */
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        const char *p = strrchr(buf, ')');
        unsigned long utime = 0, stime = 0, vsize = 0;
        long threads = 0, rss = 0;
        unsigned long long start = 0;
        if (p && sscanf(p + 2,
                        "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu %*d %*d %*d %*d "
                        "%ld %*d %llu %lu %ld",
                        &utime, &stime, &threads, &start, &vsize, &rss) == 6) {
            g->cpu_seconds = (double)(utime + stime) / (double)ticks;
            g->threads = threads;
            g->vsize_bytes = (double)vsize;
            g->rss_bytes = (double)rss * (double)page;
            /* start is in ticks since boot */
            FILE *u = fopen("/proc/uptime", "r");
            double up = 0;
            if (u && fscanf(u, "%lf", &up) == 1) {
                struct timespec now;
                clock_gettime(CLOCK_REALTIME, &now);
                g->start_time = (double)now.tv_sec + now.tv_nsec * 1e-9 - up +
                                (double)start / (double)ticks;
            }
            if (u)
                fclose(u);
        }
        fclose(f);
    }
    DIR *d = opendir("/proc/self/fd");
    if (d) {
        long n = 0;
        for (struct dirent *e; (e = readdir(d));)
            n += e->d_name[0] != '.';
        closedir(d);
        g->open_fds = n - 1; /* the directory's own fd */
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
        g->max_fds = rl.rlim_cur == RLIM_INFINITY ? -1 : (long)rl.rlim_cur;
}

static int status_index(int status)
{
    for (int i = 0; i < METRICS_NSTATUS - 2; i++)
        if (status_codes[i] == status)
            return i;
    return METRICS_NSTATUS - 1;
}

void metrics_observe_request(cs_metrics *m, cs_route route, int status, double seconds)
{
    if ((unsigned)route >= ROUTE_COUNT)
        route = ROUTE_OTHER;
    atomic_fetch_add_explicit(&m->requests[route][status_index(status)], 1,
                              memory_order_relaxed);
    int b = 0;
    while (b < METRICS_NBUCKETS - 1 && seconds > buckets[b])
        b++;
    atomic_fetch_add_explicit(&m->latency_bucket[route][b], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->latency_sum_us[route],
                              (unsigned long)(seconds > 0 ? seconds * 1e6 : 0),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&m->latency_count[route], 1, memory_order_relaxed);
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

/* One histogram's series; labels is "" or 'a="b",' (with the trailing comma). */
static void render_hist(cs_buf *t, const char *name, const char *labels, const cs_hist *hc,
                        const double *bounds)
{
    cs_hist *h = (cs_hist *)hc;
    unsigned long cum = 0;
    for (int b = 0; b < METRICS_HIST_BUCKETS; b++) {
        cum += LOAD(h->bucket[b]);
        if (b == METRICS_HIST_BUCKETS - 1)
            cs_buf_printf(t, "%s_bucket{%sle=\"+Inf\"} %lu\n", name, labels, cum);
        else
            cs_buf_printf(t, "%s_bucket{%sle=\"%g\"} %lu\n", name, labels, bounds[b], cum);
    }
    size_t ll = strlen(labels);
    /* sum and count carry the labels without the trailing comma */
    cs_buf_printf(t, "%s_sum%s%.*s%s %.6f\n", name, ll ? "{" : "", ll ? (int)ll - 1 : 0, labels,
              ll ? "}" : "", (double)LOAD(h->sum_us) * 1e-6);
    cs_buf_printf(t, "%s_count%s%.*s%s %lu\n", name, ll ? "{" : "", ll ? (int)ll - 1 : 0, labels,
              ll ? "}" : "", LOAD(h->count));
}

static void render_observability(cs_buf *t, cs_metrics *m, const cs_metrics_gauges *g)
{
    cs_buf_printf(t, "# HELP collsynth_synthesis_seconds Time a synthesis took, by the method that "
                 "ran and how it ended.\n# TYPE collsynth_synthesis_seconds histogram\n");
    int nm = atomic_load(&m->nmethods);
    for (int i = 0; i < nm && i < METRICS_NMETHODS; i++)
        for (int o = 0; o < SYNTH_OUTCOMES; o++) {
            if (!LOAD(m->synthesis[i][o].count))
                continue;
            char labels[128];
            snprintf(labels, sizeof labels, "method=\"%s\",outcome=\"%s\",", m->method_names[i],
                     outcome_names[o]);
            render_hist(t, "collsynth_synthesis_seconds", labels, &m->synthesis[i][o],
                        synthesis_bounds);
        }
    cs_buf_printf(t, "# HELP collsynth_queue_wait_seconds Time jobs this daemon ran spent queued.\n"
                 "# TYPE collsynth_queue_wait_seconds histogram\n");
    render_hist(t, "collsynth_queue_wait_seconds", "", &m->queue_wait, queue_bounds);
    cs_buf_printf(t, "# HELP collsynth_store_seconds Store statements, by kind (read, write, "
                 "commit), including the wait for a connection.\n"
                 "# TYPE collsynth_store_seconds histogram\n");
    for (int o = 0; o < STORE_OPS; o++) {
        char labels[32];
        snprintf(labels, sizeof labels, "op=\"%s\",", store_op_names[o]);
        render_hist(t, "collsynth_store_seconds", labels, &m->store[o], store_bounds);
    }
    cs_buf_printf(t, "# HELP collsynth_store_errors_total Store statements that failed.\n"
                 "# TYPE collsynth_store_errors_total counter\ncollsynth_store_errors_total %lu\n",
              LOAD(m->store_errors));
    cs_buf_printf(t, "# HELP collsynth_build_info The daemon's version and what it was built with.\n"
                 "# TYPE collsynth_build_info gauge\n"
                 "collsynth_build_info{version=\"%s\",compiler=\"%s\",libmicrohttpd=\"%s\","
                 "jansson=\"%s\"} 1\n",
              g->version ? g->version : "", __VERSION__, g->mhd_version ? g->mhd_version : "",
              JANSSON_VERSION);
    cs_buf_printf(t, "# HELP process_resident_memory_bytes Resident memory.\n"
                 "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes %.0f\n"
                 "# HELP process_virtual_memory_bytes Virtual memory.\n"
                 "# TYPE process_virtual_memory_bytes gauge\nprocess_virtual_memory_bytes %.0f\n"
                 "# HELP process_cpu_seconds_total User and system CPU time.\n"
                 "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total %.2f\n"
                 "# HELP process_open_fds Open file descriptors.\n"
                 "# TYPE process_open_fds gauge\nprocess_open_fds %ld\n"
                 "# HELP process_max_fds The limit on open file descriptors.\n"
                 "# TYPE process_max_fds gauge\nprocess_max_fds %ld\n"
                 "# HELP process_threads Threads of the process.\n"
                 "# TYPE process_threads gauge\nprocess_threads %ld\n"
                 "# HELP process_start_time_seconds Start time, seconds since the epoch.\n"
                 "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds %.3f\n",
              g->rss_bytes, g->vsize_bytes, g->cpu_seconds, g->open_fds, g->max_fds, g->threads,
              g->start_time);
}

char *metrics_render(const cs_metrics *mc, const cs_metrics_gauges *g)
{
    cs_metrics *m = (cs_metrics *)mc;
    cs_buf t = {0};
    cs_buf_printf(&t, "# HELP collsynth_http_requests_total HTTP requests by route and status.\n"
                  "# TYPE collsynth_http_requests_total counter\n");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int s = 0; s < METRICS_NSTATUS; s++) {
            unsigned long v = LOAD(m->requests[r][s]);
            if (!v)
                continue;
            if (status_codes[s] > 0)
                cs_buf_printf(&t, "collsynth_http_requests_total{route=\"%s\",status=\"%d\"} %lu\n",
                          route_names[r], status_codes[s], v);
            else
                cs_buf_printf(&t,
                          "collsynth_http_requests_total{route=\"%s\",status=\"other\"} %lu\n",
                          route_names[r], v);
        }
    cs_buf_printf(&t, "# HELP collsynth_http_request_duration_seconds Time to answer, by route.\n"
                  "# TYPE collsynth_http_request_duration_seconds histogram\n");
    for (int r = 0; r < ROUTE_COUNT; r++) {
        unsigned long count = LOAD(m->latency_count[r]);
        if (!count)
            continue;
        unsigned long cum = 0;
        for (int b = 0; b < METRICS_NBUCKETS; b++) {
            cum += LOAD(m->latency_bucket[r][b]);
            if (b == METRICS_NBUCKETS - 1)
                cs_buf_printf(&t,
                          "collsynth_http_request_duration_seconds_bucket{route=\"%s\","
                          "le=\"+Inf\"} %lu\n",
                          route_names[r], cum);
            else
                cs_buf_printf(&t,
                          "collsynth_http_request_duration_seconds_bucket{route=\"%s\","
                          "le=\"%g\"} %lu\n",
                          route_names[r], buckets[b], cum);
        }
        cs_buf_printf(&t, "collsynth_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
                  route_names[r], (double)LOAD(m->latency_sum_us[r]) * 1e-6);
        cs_buf_printf(&t, "collsynth_http_request_duration_seconds_count{route=\"%s\"} %lu\n",
                  route_names[r], count);
    }
    static const char *const job_states[5] = {"queued", "running", "done", "failed",
                                              "cancelled"};
    cs_buf_printf(&t, "# HELP collsynth_jobs Jobs by state in the store (every daemon sharing it).\n"
                  "# TYPE collsynth_jobs gauge\n");
    for (int i = 0; i < 5; i++)
        if (g->jobs[i] >= 0)
            cs_buf_printf(&t, "collsynth_jobs{state=\"%s\"} %ld\n", job_states[i], g->jobs[i]);
    cs_buf_printf(&t, "# HELP collsynth_queue_depth Jobs waiting for a worker.\n"
                  "# TYPE collsynth_queue_depth gauge\ncollsynth_queue_depth %ld\n",
              g->jobs[0] >= 0 ? g->jobs[0] : 0);
    cs_buf_printf(&t, "# HELP collsynth_jobs_running_local Jobs running on this daemon.\n"
                  "# TYPE collsynth_jobs_running_local gauge\ncollsynth_jobs_running_local %ld\n",
              (long)LOAD(m->running));
    cs_buf_printf(&t, "# HELP collsynth_workers Synthesis worker threads.\n"
                  "# TYPE collsynth_workers gauge\ncollsynth_workers %d\n",
              g->workers);
    cs_buf_printf(&t, "# HELP collsynth_syntheses_total Syntheses this daemon ran, by outcome.\n"
                  "# TYPE collsynth_syntheses_total counter\n"
                  "collsynth_syntheses_total{outcome=\"started\"} %lu\n"
                  "collsynth_syntheses_total{outcome=\"done\"} %lu\n"
                  "collsynth_syntheses_total{outcome=\"failed\"} %lu\n"
                  "collsynth_syntheses_total{outcome=\"cancelled\"} %lu\n"
                  "collsynth_syntheses_total{outcome=\"requeued\"} %lu\n",
              LOAD(m->syntheses_started), LOAD(m->syntheses_done), LOAD(m->syntheses_failed),
              LOAD(m->syntheses_cancelled), LOAD(m->syntheses_requeued));
    cs_buf_printf(&t, "# HELP collsynth_solver_seconds_total Wall time spent synthesizing.\n"
                  "# TYPE collsynth_solver_seconds_total counter\n"
                  "collsynth_solver_seconds_total %.6f\n",
              (double)LOAD(m->solver_us) * 1e-6);
    cs_buf_printf(&t, "# HELP collsynth_cache_hits_total Requests answered from stored results.\n"
                  "# TYPE collsynth_cache_hits_total counter\ncollsynth_cache_hits_total %lu\n"
                  "# HELP collsynth_cache_misses_total Requests whose result was not stored.\n"
                  "# TYPE collsynth_cache_misses_total counter\n"
                  "collsynth_cache_misses_total %lu\n"
                  "# HELP collsynth_cache_memory_hits_total Hits served from memory.\n"
                  "# TYPE collsynth_cache_memory_hits_total counter\n"
                  "collsynth_cache_memory_hits_total %lu\n",
              LOAD(m->cache_hits), LOAD(m->cache_misses), LOAD(m->memory_hits));
    cs_buf_printf(&t, "# HELP collsynth_iso_total Requests checked against isomorphic requests'"
                  " results (docs/iso.md), by outcome: hit (relabelled, verified, no"
                  " synthesis), miss (synthesized), waited (waited for an isomorphic job),"
                  " rejected (the verifier refused the relabelled schedule), error.\n"
                  "# TYPE collsynth_iso_total counter\n"
                  "collsynth_iso_total{outcome=\"hit\"} %lu\n"
                  "collsynth_iso_total{outcome=\"miss\"} %lu\n"
                  "collsynth_iso_total{outcome=\"waited\"} %lu\n"
                  "collsynth_iso_total{outcome=\"rejected\"} %lu\n"
                  "collsynth_iso_total{outcome=\"error\"} %lu\n"
                  "# HELP collsynth_iso_canonicalize_seconds_total Time spent computing"
                  " canonical labellings.\n"
                  "# TYPE collsynth_iso_canonicalize_seconds_total counter\n"
                  "collsynth_iso_canonicalize_seconds_total %.6f\n"
                  "# HELP collsynth_iso_canonicalize_total Canonical labellings computed.\n"
                  "# TYPE collsynth_iso_canonicalize_total counter\n"
                  "collsynth_iso_canonicalize_total %lu\n",
              LOAD(m->iso_hits), LOAD(m->iso_misses), LOAD(m->iso_waits), LOAD(m->iso_rejected),
              LOAD(m->iso_errors), (double)LOAD(m->iso_canon_us) * 1e-6,
              LOAD(m->iso_canon_count));
    cs_buf_printf(&t, "# HELP collsynth_coalesced_total Submissions joined to an identical job.\n"
                  "# TYPE collsynth_coalesced_total counter\ncollsynth_coalesced_total %lu\n"
                  "# HELP collsynth_rejected_total Submissions refused: queue full.\n"
                  "# TYPE collsynth_rejected_total counter\n"
                  "collsynth_rejected_total{reason=\"queue_full\"} %lu\n"
                  "# HELP collsynth_codegen_total Code generated (not served from cache).\n"
                  "# TYPE collsynth_codegen_total counter\ncollsynth_codegen_total %lu\n"
                  "# HELP collsynth_codegen_waits_total Requests that waited for the same "
                  "document being generated for another request instead of generating it.\n"
                  "# TYPE collsynth_codegen_waits_total counter\n"
                  "collsynth_codegen_waits_total %lu\n",
              LOAD(m->coalesced), LOAD(m->rejected_queue_full), LOAD(m->codegen_total),
              LOAD(m->generation_waits));
    cs_buf_printf(&t, "# HELP collsynth_representations_total Result documents and code served,"
                  " by where they came from.\n"
                  "# TYPE collsynth_representations_total counter\n"
                  "collsynth_representations_total{source=\"memory\"} %lu\n"
                  "collsynth_representations_total{source=\"store\"} %lu\n"
                  "collsynth_representations_total{source=\"generated\"} %lu\n"
                  "# HELP collsynth_not_modified_total Conditional GETs answered 304.\n"
                  "# TYPE collsynth_not_modified_total counter\n"
                  "collsynth_not_modified_total %lu\n"
                  "# HELP collsynth_refusals_remembered_total Submissions refused from memory"
                  " (same body or key as an earlier refusal).\n"
                  "# TYPE collsynth_refusals_remembered_total counter\n"
                  "collsynth_refusals_remembered_total %lu\n",
              LOAD(m->rep_memory), LOAD(m->rep_store), LOAD(m->rep_generated),
              LOAD(m->not_modified), LOAD(m->refusals_remembered));
    cs_buf_printf(&t, "# HELP collsynth_http_timeouts_total Connections cut off because a request's "
                  "headers or body did not arrive within their deadline.\n"
                  "# TYPE collsynth_http_timeouts_total counter\n"
                  "collsynth_http_timeouts_total{phase=\"headers\"} %lu\n"
                  "collsynth_http_timeouts_total{phase=\"body\"} %lu\n",
              LOAD(m->http_timeouts[0]), LOAD(m->http_timeouts[1]));
    cs_buf_printf(&t, "# HELP collsynth_results Results in the store.\n"
                  "# TYPE collsynth_results gauge\ncollsynth_results %ld\n"
                  "# HELP collsynth_cache_entries Results and code held in memory.\n"
                  "# TYPE collsynth_cache_entries gauge\ncollsynth_cache_entries %ld\n"
                  "# HELP collsynth_cache_bytes Bytes held by the memory cache.\n"
                  "# TYPE collsynth_cache_bytes gauge\ncollsynth_cache_bytes %ld\n"
                  "# HELP collsynth_uptime_seconds Seconds since start.\n"
                  "# TYPE collsynth_uptime_seconds gauge\ncollsynth_uptime_seconds %.3f\n",
              g->results, g->cache_entries, g->cache_bytes, g->uptime_s);
    render_observability(&t, m, g);
    return cs_buf_take(&t, NULL); /* NULL when memory ran out */
}
