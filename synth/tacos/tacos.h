/*
 * tacos.h - greedy link-chunk matching over a time-expanded network (the TACOS
 * method), for topologies too large for the SMT search: tens of thousands of
 * ranks, heterogeneous links.
 *
 * Time is continuous: a link is busy for alpha + chunk_bytes * beta per chunk.
 * At each event time every unsatisfied (rank, chunk) postcondition, in a
 * seeded random order, picks a free in-link from a neighbour that holds the
 * chunk (cheapest link first).  Several seeded trials run in parallel and the
 * best simulated time wins; the same seed gives the same result.
 *
 * Combining collectives: the non-combining dual on the reversed topology,
 * inverted (algorithm_invert); allreduce = reducescatter + allgather.
 * Switches are unwound with degree d (topology_unwind_switches) for the
 * matching: the caller's d, or the best of a few when switch_degree is 0.  The
 * algorithm is verified and simulated on the caller's topology, where a switch
 * port is one resource that concurrent sends share (docs/model.md).
 */
#ifndef CS_TACOS_H
#define CS_TACOS_H

#include <stdint.h>
#include "algorithm.h"

typedef struct cs_tacos_options {
    int chunks;            /* chunks per rank share (default 1) */
    int trials;            /* seeded trials, best kept (default 4) */
    uint64_t seed;         /* default 1 */
    int threads;           /* 0 = CPU count */
    int switch_degree;     /* 0 = pick the best of a few */
    double bytes;          /* buffer size that sets chunk times (default 64 MiB) */
    bool keep_sends;       /* false: only statistics (for runs too large to store) */
    bool plain_only;       /* true: oldest-candidate trials only, no rarest-first ones
                              (what TACOS did above 2^15 ranks x chunks until issue 11;
                              for comparisons).  Default false */
    cs_progress_fn progress;
    void *progress_ctx;
    cs_cancel *cancel;
} cs_tacos_options;

void tacos_options_default(cs_tacos_options *opt);
/* The result has one algorithm (method "tacos") unless keep_sends is false;
 * result->stats has sim_time_us, ideal_us, ratio, trials, sends, peak_rss_kb. */
int tacos_synthesize(const cs_topology *t, const cs_collective *c,
                     const cs_tacos_options *opt, cs_result **out, cs_error *err);

#endif
