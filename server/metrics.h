/*
 * metrics.h - counters and latency histograms for GET /metrics (Prometheus
 * text format 0.0.4).  Counters are relaxed atomics, so the request path pays
 * a few uncontended atomic adds and never takes a lock.
 */
#ifndef CS_SERVER_METRICS_H
#define CS_SERVER_METRICS_H

#include <stdatomic.h>
#include <stddef.h>

typedef enum cs_route {
    ROUTE_HEALTH = 0,
    ROUTE_TOPOLOGIES,
    ROUTE_TOPOLOGY,
    ROUTE_SYNTHESIZE,
    ROUTE_JOB_GET,
    ROUTE_JOB_DELETE,
    ROUTE_RESULT,
    ROUTE_METRICS,
    ROUTE_STATIC,
    ROUTE_PREFLIGHT,
    ROUTE_OTHER,
    ROUTE_COUNT
} cs_route;

const char *route_name(cs_route r);

#define METRICS_NSTATUS 24
#define METRICS_NBUCKETS 15

typedef struct cs_metrics {
    atomic_ulong requests[ROUTE_COUNT][METRICS_NSTATUS];
    atomic_ulong latency_bucket[ROUTE_COUNT][METRICS_NBUCKETS]; /* cumulative at render */
    atomic_ulong latency_sum_us[ROUTE_COUNT];
    atomic_ulong latency_count[ROUTE_COUNT];
    atomic_ulong cache_hits, cache_misses;        /* results asked for by key or request */
    atomic_ulong memory_hits;                     /* ... of which served from memory */
    atomic_ulong syntheses_started;               /* jobs this daemon ran */
    atomic_ulong syntheses_done, syntheses_failed, syntheses_cancelled, syntheses_requeued;
    atomic_ulong coalesced;                       /* POSTs that joined an active job */
    atomic_ulong rejected_queue_full;
    atomic_ulong solver_us;                       /* wall time spent in synthesizers */
    atomic_ulong codegen_total;
    /* result representations (documents, slices, code) answered: from memory,
     * from stored artifacts, or generated from the result now (built or
     * streamed); 304s; POSTs refused from memory without parsing */
    atomic_ulong rep_memory, rep_store, rep_generated;
    atomic_ulong not_modified;
    atomic_ulong refusals_remembered;
    atomic_long running;                          /* jobs running on this daemon now */
} cs_metrics;

void metrics_init(cs_metrics *m);
void metrics_observe_request(cs_metrics *m, cs_route route, int status, double seconds);

typedef struct cs_metrics_gauges {
    long jobs[5];          /* by status, fleet-wide (from the store); -1 unknown */
    long results;          /* stored results; -1 unknown */
    long cache_entries;
    long cache_bytes;
    double uptime_s;
    int workers;
} cs_metrics_gauges;

/* The exposition text; caller frees. */
char *metrics_render(const cs_metrics *m, const cs_metrics_gauges *g);

#endif
