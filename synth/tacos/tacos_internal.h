/*
 * tacos_internal.h - private interface between the TACOS orchestration
 * (tacos.c: options, switch unwinding, duals, trials, statistics) and the
 * matching engine (tacos_engine.c: one seeded trial of link-chunk matching
 * over a time-expanded network; tacos_conditions.c: who starts with and who
 * needs which chunk).  Not part of the public API.
 */
#ifndef CS_TACOS_INTERNAL_H
#define CS_TACOS_INTERNAL_H

#include <stdint.h>
#include "algorithm.h"

/* One non-combining matching problem: a topology without switches, a
 * collective whose pre/postconditions say where chunks start and must end. */
typedef struct tacos_problem {
    const cs_topology *topo;
    const cs_collective *coll;  /* validated for topo->ranks */
    int chunks;                 /* C of the collective's numbering */
    double chunk_bytes;         /* sets every link's occupancy time */
    int window;                 /* choose among the first `window` candidates (>= 1) */
    bool rarest;                /* rarest-first choice (small instances) */
    int match_threads;          /* threads matching one trial's destinations (results
                                   do not depend on it) */
    bool skip_redundant;        /* a slow link never carries a chunk a cheaper in-link's
                                   source holds or is receiving (it waits instead) */
} tacos_problem;

/* A send recorded by a trial: the chunk and the link (index into
 * topo->links).  8 bytes: a trial that keeps its sends records them in
 * event order, so its spans (event times with sends) are kept once per span
 * rather than once per send, and the end is the start plus the link's
 * occupancy. */
typedef struct tacos_rec {
    uint32_t chunk;
    int32_t link;
} tacos_rec;

typedef struct tacos_trial {
    double makespan_us;         /* when the last chunk arrives */
    long nsends;
    int nspans;                 /* distinct start times */
    size_t peak_bytes;          /* the trial's own peak working memory */
    uint64_t checksum;          /* hash of the sends in order (chunk, link, span) */
    bool keep;
    tacos_rec *recs;            /* nsends records when keep */
    long cap;
    long *span_first;           /* when keep: span s holds recs [span_first[s], span_first[s+1]) */
    double *span_start;         /* when keep: the start time of span s */
    int span_cap;
} tacos_trial;

/* splitmix64 / xoshiro256**: one generator per trial, no shared state. */
typedef struct tacos_rng { uint64_t s[4]; } tacos_rng;
void tacos_rng_seed(tacos_rng *r, uint64_t seed);
uint64_t tacos_rng_next(tacos_rng *r);
/* Uniform in [0, n), n >= 1. */
uint32_t tacos_rng_below(tacos_rng *r, uint32_t n);

/* ---- the engine's state, shared by tacos_engine.c and tacos_conditions.c ---- */

typedef struct arrival_log {
    uint32_t *buf;
    int64_t base;   /* absolute position of buf[0] */
    int64_t len, cap;
} arrival_log;

/* Rarest-first compares the first this many chunks a link could carry, in a
 * destination's last TACOS_RAREST_SPANS spans (while it needs at most that
 * many chunks per in-link). */
#define TACOS_RAREST_WINDOW 16
#define TACOS_RAREST_SPANS 8

typedef struct inflight { int32_t link; uint32_t chunk; } inflight;

typedef struct bucket {
    double time;
    inflight *items;
    long n, cap;
} bucket;

typedef struct engine {
    const tacos_problem *p;
    const cs_topology *t;
    int P, L;
    long G;
    long W;                 /* 64-bit words per rank bitset */
    uint64_t *covered;      /* P * W */
    uint64_t *holds;        /* P * W, only with rarest-first choice: what each rank holds;
                               on universal kinds a rank's row is kept only once it is
                               `tracked` (see below), zero before */
    int *holders;           /* per chunk: ranks holding it, only with rarest-first */
    /* Lazy holdings (rarest-first on universal kinds): holds is read only for
     * the in-neighbours of destinations in their last spans, so a rank's row
     * is built when the first of its out-neighbours gets near them (covered
     * minus what is in flight into it) and kept at deliveries from then on;
     * before that a delivery writes no holdings bit (one cache miss per send
     * saved over most of the run). */
    unsigned char *tracked; /* per rank: its holds row is exact (NULL: every row always is) */
    long *ready_need;       /* per rank: once need falls to this, its in-neighbours get
                               tracked (-1 once done) */
    uint32_t *flight;       /* per link, a ring of `lanes` slots: its last sends, the
                               newest busy[l] of which are in flight (delivery is FIFO
                               per link: one fixed occupancy) */
    int *flight_begin;      /* per link: its first slot (CSR, L + 1) */
    int *flight_head;       /* per link: the slot its next send takes */
    uint32_t *window;       /* rarest-first, per link: up to TACOS_RAREST_WINDOW chunks taken
                               from its source's log that its destination still lacks */
    unsigned char *nwindow; /* per link: how many of them */
    int *in_src;            /* rarest-first: source of each in_links entry */
    uint64_t *gcov;         /* per group: chunks some member covers (NG * W); only when
                               slow links skip redundant chunks on universal kinds */
    double *group_cost;     /* per group: its slowest own link, +inf when its own links
                               do not connect it (the group test is off) */
    long *need;             /* per rank: chunks still to be matched into it */
    long remaining;
    double *cost;           /* per link */
    int *in_sorted;         /* in-links per rank, by cost then index (CSR on in_begin) */
    int *group_end;         /* per in_sorted position: end of its equal-cost group */
    int *busy;              /* lanes in use per link */
    int *lanes;             /* per link: its lanes (next to busy, not in the link records) */
    int last_bucket;        /* the bucket the last send went to (one time per event on
                               homogeneous links: no search) */
    int64_t *cursor;        /* per link, absolute position in its source's log */
    arrival_log *logs;
    /* shared sets */
    int *set_begin, *set_of; /* link -> shared set indices (CSR) */
    int *set_busy;
    /* dirty destination ranks: a bitmap, visited in rank order */
    uint64_t *dirty_bits;
    long dirty_words;
    unsigned char *arrived; /* ranks that received something this event */
    int *arrived_list;
    int narrived;
    /* events */
    bucket *buckets;        /* sorted by time, descending (pop from the end) */
    int nbuckets, bucket_cap;
    bucket *spare;          /* recycled bucket storage */
    int nspare, spare_cap;
    tacos_rng rng;          /* set-up choices (relay paths) */
    uint64_t seed_base;     /* per (rank, event) generators derive from it */
    int match_threads;      /* threads matching destinations in parallel */
    bool universal;         /* every rank needs every chunk it lacks */
    bool skip_redundant;    /* slow links skip chunks a cheaper in-link can supply */
    size_t static_bytes, log_bytes, peak_bytes;
} engine;

static inline bool bit_get(const uint64_t *row, long c) { return (row[c >> 6] >> (c & 63)) & 1u; }
static inline void bit_set(uint64_t *row, long c) { row[c >> 6] |= 1ULL << (c & 63); }
static inline void bit_clear(uint64_t *row, long c) { row[c >> 6] &= ~(1ULL << (c & 63)); }


/* Appends chunk c to rank r's arrival log (and holdings). */
int tacos_log_append(engine *e, int r, uint32_t c);
/* allgather and broadcast: every rank needs every chunk it lacks. */
bool tacos_kind_is_universal(const cs_collective *c);
/* Sets up holdings, needs and relay paths (tacos_conditions.c). */
int tacos_init_conditions(engine *e, cs_error *err);

/* Occupancy of one lane of link l for one chunk: alpha + bytes / bandwidth. */
double tacos_link_cost(const cs_link *l, double chunk_bytes);

/* Runs one seeded trial.  keep: record every send (else only statistics).
 * CS_EUNSAT when some postcondition cannot be reached over the links. */
int tacos_run_trial(const tacos_problem *p, uint64_t seed, bool keep, const cs_cancel *cancel,
                    tacos_trial *out, cs_error *err);
void tacos_trial_free(tacos_trial *tr);

#endif
