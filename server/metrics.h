/*
 * metrics.h - counters and latency histograms for GET /metrics (Prometheus
 * text format 0.0.4).  Counters are relaxed atomics, so the request path pays
 * a few uncontended atomic adds and never takes a lock.
 */
#ifndef CS_SERVER_METRICS_H
#define CS_SERVER_METRICS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
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
    ROUTE_RESULTS_LIST,
    ROUTE_JOBS_LIST,
    ROUTE_OTHER,
    ROUTE_COUNT
} cs_route;

const char *route_name(cs_route r);

#define METRICS_NSTATUS 24
#define METRICS_NBUCKETS 15

/* A histogram with METRICS_HIST_BUCKETS bounds fixed per family (metrics.c). */
#define METRICS_HIST_BUCKETS 16
typedef struct cs_hist {
    atomic_ulong bucket[METRICS_HIST_BUCKETS]; /* non-cumulative; cumulated at render */
    atomic_ulong count;
    atomic_ulong sum_us;
} cs_hist;

#define METRICS_NMETHODS 32   /* synthesis methods told apart; more share "other" */

typedef enum cs_synth_outcome { SYNTH_DONE = 0, SYNTH_FAILED, SYNTH_CANCELLED,
                                SYNTH_OUTCOMES } cs_synth_outcome;
typedef enum cs_store_op_kind { STORE_READ = 0, STORE_WRITE, STORE_COMMIT, STORE_OPS }
    cs_store_op_kind;

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
    /* the isomorphism-aware cache (server/iso_cache.c) */
    atomic_ulong iso_hits;        /* results relabelled from an isomorphic request's */
    atomic_ulong iso_misses;      /* requests whose class had no usable result: synthesized */
    atomic_ulong iso_waits;       /* jobs that waited for an isomorphic job instead */
    atomic_ulong iso_rejected;    /* relabelled schedules the verifier refused */
    atomic_ulong iso_errors;      /* canonicalization or index failures (request goes on) */
    atomic_ulong iso_canon_us;    /* time spent canonicalizing */
    atomic_ulong iso_canon_count;
    atomic_ulong rejected_queue_full;
    atomic_ulong http_timeouts[2];                /* requests cut off: headers, body late */
    atomic_ulong solver_us;                       /* wall time spent in synthesizers */
    atomic_ulong codegen_total;
    atomic_ulong generation_waits;                /* requests that waited for another's generation */
    /* result representations (documents, slices, code) answered: from memory,
     * from stored artifacts, or generated from the result now (built or
     * streamed); 304s; POSTs refused from memory without parsing */
    atomic_ulong rep_memory, rep_store, rep_generated;
    atomic_ulong not_modified;
    atomic_ulong refusals_remembered;
    atomic_long running;                          /* jobs running on this daemon now */
    /* synthesis time by method and outcome: methods get a slot when first seen */
    pthread_mutex_t method_lock;
    char method_names[METRICS_NMETHODS][32];
    atomic_int nmethods;
    cs_hist synthesis[METRICS_NMETHODS][SYNTH_OUTCOMES];
    cs_hist queue_wait;                           /* queued -> claimed, this daemon's claims */
    cs_hist store[STORE_OPS];                     /* statements, by kind */
    atomic_ulong store_errors;
} cs_metrics;

void metrics_init(cs_metrics *m);
void metrics_destroy(cs_metrics *m);
void metrics_observe_request(cs_metrics *m, cs_route route, int status, double seconds);
/* A synthesis ended: method is the one that ran (or was asked for, if none did). */
void metrics_observe_synthesis(cs_metrics *m, const char *method, cs_synth_outcome outcome,
                               double seconds);
void metrics_observe_queue_wait(cs_metrics *m, double seconds);
/* A store statement (store_set_observer). */
void metrics_observe_store(cs_metrics *m, cs_store_op_kind op, double seconds, bool ok);

typedef struct cs_metrics_gauges {
    long jobs[5];          /* by status, fleet-wide (from the store); -1 unknown */
    long results;          /* stored results; -1 unknown */
    long cache_entries;
    long cache_bytes;
    double uptime_s;
    int workers;
    /* the process (metrics_sample_process), Prometheus' standard names */
    double rss_bytes, vsize_bytes, cpu_seconds, start_time;
    long open_fds, max_fds, threads;
    /* collsynth_build_info labels */
    const char *version, *mhd_version;
} cs_metrics_gauges;

/* Reads RSS, virtual size, CPU time, open and maximum fds, threads and start
 * time of this process (from /proc and getrlimit). */
void metrics_sample_process(cs_metrics_gauges *g);

/* The exposition text; caller frees. */
char *metrics_render(const cs_metrics *m, const cs_metrics_gauges *g);

#endif
