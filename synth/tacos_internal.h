/*
 * tacos_internal.h - private interface between the TACOS orchestration
 * (tacos.c: options, switch unwinding, duals, trials, statistics) and the
 * matching engine (tacos_engine.c: one seeded trial of link-chunk matching
 * over a time-expanded network).  Not part of the public API.
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

/* A send recorded by a trial: the link index into topo->links and the start
 * time; the end is start + the link's occupancy. */
typedef struct tacos_rec {
    int64_t chunk;
    int32_t link;
    int32_t span;               /* index of the span in which it starts */
    double start_us;
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
} tacos_trial;

/* Occupancy of one lane of link l for one chunk: alpha + bytes / bandwidth. */
double tacos_link_cost(const cs_link *l, double chunk_bytes);

/* Runs one seeded trial.  keep: record every send (else only statistics).
 * CS_EUNSAT when some postcondition cannot be reached over the links. */
int tacos_run_trial(const tacos_problem *p, uint64_t seed, bool keep, const cs_cancel *cancel,
                    tacos_trial *out, cs_error *err);
void tacos_trial_free(tacos_trial *tr);

/* splitmix64 / xoshiro256**: one generator per trial, no shared state. */
typedef struct tacos_rng { uint64_t s[4]; } tacos_rng;
void tacos_rng_seed(tacos_rng *r, uint64_t seed);
uint64_t tacos_rng_next(tacos_rng *r);
/* Uniform in [0, n), n >= 1. */
uint32_t tacos_rng_below(tacos_rng *r, uint32_t n);

#endif
