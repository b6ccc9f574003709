/*
 * metrics.c - Prometheus counters and histograms (see metrics.h).  Status
 * codes map to a small fixed table so every (route, status) counter is a
 * preallocated atomic; unknown codes share the last slot (status="other").
 */
#include "metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const route_names[ROUTE_COUNT] = {
    "health", "topologies", "topology", "synthesize", "job_get", "job_delete",
    "result", "metrics",    "static",   "preflight",  "other"};

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

void metrics_init(cs_metrics *m)
{
    memset(m, 0, sizeof *m);
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

typedef struct text_buf {
    char *s;
    size_t n, cap;
} text_buf;

static void tb_printf(text_buf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void tb_printf(text_buf *t, const char *fmt, ...)
{
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int w = vsnprintf(t->s ? t->s + t->n : NULL, t->s ? t->cap - t->n : 0, fmt, ap);
        va_end(ap);
        if (w < 0)
            return;
        if (t->s && t->n + (size_t)w < t->cap) {
            t->n += (size_t)w;
            return;
        }
        size_t ncap = (t->cap ? t->cap * 2 : 8192) + (size_t)w;
        char *ns = realloc(t->s, ncap);
        if (!ns)
            return;
        t->s = ns;
        t->cap = ncap;
    }
}

#define LOAD(x) atomic_load_explicit(&(x), memory_order_relaxed)

char *metrics_render(const cs_metrics *mc, const cs_metrics_gauges *g)
{
    cs_metrics *m = (cs_metrics *)mc;
    text_buf t = {0};
    tb_printf(&t, "# HELP collsynth_http_requests_total HTTP requests by route and status.\n"
                  "# TYPE collsynth_http_requests_total counter\n");
    for (int r = 0; r < ROUTE_COUNT; r++)
        for (int s = 0; s < METRICS_NSTATUS; s++) {
            unsigned long v = LOAD(m->requests[r][s]);
            if (!v)
                continue;
            if (status_codes[s] > 0)
                tb_printf(&t, "collsynth_http_requests_total{route=\"%s\",status=\"%d\"} %lu\n",
                          route_names[r], status_codes[s], v);
            else
                tb_printf(&t,
                          "collsynth_http_requests_total{route=\"%s\",status=\"other\"} %lu\n",
                          route_names[r], v);
        }
    tb_printf(&t, "# HELP collsynth_http_request_duration_seconds Time to answer, by route.\n"
                  "# TYPE collsynth_http_request_duration_seconds histogram\n");
    for (int r = 0; r < ROUTE_COUNT; r++) {
        unsigned long count = LOAD(m->latency_count[r]);
        if (!count)
            continue;
        unsigned long cum = 0;
        for (int b = 0; b < METRICS_NBUCKETS; b++) {
            cum += LOAD(m->latency_bucket[r][b]);
            if (b == METRICS_NBUCKETS - 1)
                tb_printf(&t,
                          "collsynth_http_request_duration_seconds_bucket{route=\"%s\","
                          "le=\"+Inf\"} %lu\n",
                          route_names[r], cum);
            else
                tb_printf(&t,
                          "collsynth_http_request_duration_seconds_bucket{route=\"%s\","
                          "le=\"%g\"} %lu\n",
                          route_names[r], buckets[b], cum);
        }
        tb_printf(&t, "collsynth_http_request_duration_seconds_sum{route=\"%s\"} %.6f\n",
                  route_names[r], (double)LOAD(m->latency_sum_us[r]) * 1e-6);
        tb_printf(&t, "collsynth_http_request_duration_seconds_count{route=\"%s\"} %lu\n",
                  route_names[r], count);
    }
    static const char *const job_states[5] = {"queued", "running", "done", "failed",
                                              "cancelled"};
    tb_printf(&t, "# HELP collsynth_jobs Jobs by state in the store (every daemon sharing it).\n"
                  "# TYPE collsynth_jobs gauge\n");
    for (int i = 0; i < 5; i++)
        if (g->jobs[i] >= 0)
            tb_printf(&t, "collsynth_jobs{state=\"%s\"} %ld\n", job_states[i], g->jobs[i]);
    tb_printf(&t, "# HELP collsynth_queue_depth Jobs waiting for a worker.\n"
                  "# TYPE collsynth_queue_depth gauge\ncollsynth_queue_depth %ld\n",
              g->jobs[0] >= 0 ? g->jobs[0] : 0);
    tb_printf(&t, "# HELP collsynth_jobs_running_local Jobs running on this daemon.\n"
                  "# TYPE collsynth_jobs_running_local gauge\ncollsynth_jobs_running_local %ld\n",
              (long)LOAD(m->running));
    tb_printf(&t, "# HELP collsynth_workers Synthesis worker threads.\n"
                  "# TYPE collsynth_workers gauge\ncollsynth_workers %d\n",
              g->workers);
    tb_printf(&t, "# HELP collsynth_syntheses_total Syntheses this daemon ran, by outcome.\n"
                  "# TYPE collsynth_syntheses_total counter\n"
                  "collsynth_syntheses_total{outcome=\"started\"} %lu\n"
                  "collsynth_syntheses_total{outcome=\"done\"} %lu\n"
                  "collsynth_syntheses_total{outcome=\"failed\"} %lu\n"
                  "collsynth_syntheses_total{outcome=\"cancelled\"} %lu\n"
                  "collsynth_syntheses_total{outcome=\"requeued\"} %lu\n",
              LOAD(m->syntheses_started), LOAD(m->syntheses_done), LOAD(m->syntheses_failed),
              LOAD(m->syntheses_cancelled), LOAD(m->syntheses_requeued));
    tb_printf(&t, "# HELP collsynth_solver_seconds_total Wall time spent synthesizing.\n"
                  "# TYPE collsynth_solver_seconds_total counter\n"
                  "collsynth_solver_seconds_total %.6f\n",
              (double)LOAD(m->solver_us) * 1e-6);
    tb_printf(&t, "# HELP collsynth_cache_hits_total Requests answered from stored results.\n"
                  "# TYPE collsynth_cache_hits_total counter\ncollsynth_cache_hits_total %lu\n"
                  "# HELP collsynth_cache_misses_total Requests whose result was not stored.\n"
                  "# TYPE collsynth_cache_misses_total counter\n"
                  "collsynth_cache_misses_total %lu\n"
                  "# HELP collsynth_cache_memory_hits_total Hits served from memory.\n"
                  "# TYPE collsynth_cache_memory_hits_total counter\n"
                  "collsynth_cache_memory_hits_total %lu\n",
              LOAD(m->cache_hits), LOAD(m->cache_misses), LOAD(m->memory_hits));
    tb_printf(&t, "# HELP collsynth_coalesced_total Submissions joined to an identical job.\n"
                  "# TYPE collsynth_coalesced_total counter\ncollsynth_coalesced_total %lu\n"
                  "# HELP collsynth_rejected_total Submissions refused: queue full.\n"
                  "# TYPE collsynth_rejected_total counter\n"
                  "collsynth_rejected_total{reason=\"queue_full\"} %lu\n"
                  "# HELP collsynth_codegen_total Code generated (not served from cache).\n"
                  "# TYPE collsynth_codegen_total counter\ncollsynth_codegen_total %lu\n",
              LOAD(m->coalesced), LOAD(m->rejected_queue_full), LOAD(m->codegen_total));
    tb_printf(&t, "# HELP collsynth_representations_total Result documents and code served,"
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
    tb_printf(&t, "# HELP collsynth_results Results in the store.\n"
                  "# TYPE collsynth_results gauge\ncollsynth_results %ld\n"
                  "# HELP collsynth_cache_entries Results and code held in memory.\n"
                  "# TYPE collsynth_cache_entries gauge\ncollsynth_cache_entries %ld\n"
                  "# HELP collsynth_cache_bytes Bytes held by the memory cache.\n"
                  "# TYPE collsynth_cache_bytes gauge\ncollsynth_cache_bytes %ld\n"
                  "# HELP collsynth_uptime_seconds Seconds since start.\n"
                  "# TYPE collsynth_uptime_seconds gauge\ncollsynth_uptime_seconds %.3f\n",
              g->results, g->cache_entries, g->cache_bytes, g->uptime_s);
    return t.s;
}
