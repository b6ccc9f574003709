/*
 * bounds.h - a cut-aware lower bound on the time of a collective on a
 * topology, valid for every schedule under the simulator's model
 * (simulate.h), at every buffer size.
 *
 *     cs_time_bound b;
 *     if (collective_time_bound(topo, &coll, &b, &err) != CS_OK) ...
 *     double us = time_bound_us(&b, 64 << 20, alg->chunks);  // at L = 64 MiB
 *     ratio_to_bound = us / simulated_us;                     // <= 1
 *
 * The bound has two parts, each a valid lower bound on its own:
 *
 *   linear   T >= latency_us + bandwidth_us_per_byte * L    (a cut)
 *   path     T >= path_latency_us                           (a chain of hops)
 *   lines    T >= lines[i].latency_us + lines[i].bandwidth_us_per_byte * L
 *            (broadcast, reduce, scatter, gather: the alpha-distance from the
 *            root to a cut plus the cut's transfer time, bounds_time.c)
 *
 * and time_bound_us() is the largest of them.  L is the cost model's
 * per-rank share (algorithm_chunk_bytes: the per-rank input of allgather, the
 * buffer of allreduce, ...), except for custom collectives, whose data is a
 * fixed number of chunks: there L is one chunk's size (per_chunk, and
 * time_bound_us divides by the algorithm's chunks).  The two parts are not
 * added: a schedule can move a cut's data while a chunk travels a long path
 * elsewhere (docs/model.md, "Time bound", has a 12-rank example that beats the
 * sum), so only the maximum is a bound.  What can be added is the distance
 * to the cut itself: no byte can cross into S before the root's data has
 * reached S's edge (the lines, for the rooted collectives).
 *
 * The linear part, by collective (S a set of ranks, cap(S) the most bytes per
 * us that can enter S, a minimum cut in the network below):
 *   allgather      ForestColl's spanning-tree-packing bound: (P - |S|) L must
 *                  enter S, maximized over every S (kind "forestcoll");
 *   reducescatter  the same on the reversed topology (leaving S);
 *   allreduce      a gossip bound: every byte of the buffer needs 2(k-1)
 *                  transfers between the k parts of any partition (one-way
 *                  gossip), over the parts' total capacity; and L must enter
 *                  (and leave) every S (kind "gossip");
 *   broadcast      L must enter every S without the root; reduce reversed;
 *   scatter        |S| L must enter S (no root); gather reversed;
 *   alltoall       |S| (P - |S|) L must enter S, over candidate sets, and the
 *                  hop-bytes of all pairs over the total egress (kind "cut"
 *                  or "distance"; the max-concurrent-flow LP, kind "mcf-lp",
 *                  can raise it through time_bound_offer);
 *   custom         per rank: the chunks it lacks, and the chunks only it
 *                  holds, over its capacity.
 * latency_us is the smallest alpha of a link crossing the chosen cut: the
 * data that crosses it takes at least one such transfer.
 *
 * The network: a node per rank, per switch (an edge of the port's bandwidth
 * each way per attached rank: the ForestColl view of a switch) and per
 * document shared set (an in/out pair joined by the set's lanes at its
 * fastest link), links as edges of lanes x gbps.  Cuts are found by
 * parametric max-flow (Dinkelbach over s-t min cuts) on exact integers: over
 * every rank set while the work fits a budget (exact is true then), and
 * otherwise over unions of the topology's groups (nodes), contracted to one
 * vertex each, plus single ranks.  Every figure is an upper bound on a real
 * cut's capacity, so every bound stays valid, exact or not.  A 1024-rank
 * rail cluster or a 100x100 mesh takes milliseconds (docs/BENCHMARKS.md).
 *
 * path_latency_us: the largest alpha-weighted distance some data must travel
 * (every hop costs at least its link's alpha; a switch hop its port's alpha).
 *
 * Thread safety: pure functions of their arguments.
 */
#ifndef CS_BOUNDS_H
#define CS_BOUNDS_H

#include <jansson.h>
#include <stdbool.h>

#include "collective.h"
#include "cs_common.h"
#include "topology.h"

/* Room for the additive rooted lines (at most one per size 4^k, k = 0..20). */
#define CS_TB_MAX_LINES 24

/* One more line T >= latency_us + bandwidth_us_per_byte * L (rooted
 * collectives: the latency to reach a cut plus its transfer time). */
typedef struct cs_bound_line {
    double latency_us;
    double bandwidth_us_per_byte;
    char cut[96];
} cs_bound_line;

typedef struct cs_time_bound {
    double latency_us;             /* A: with B, T >= A + B * L */
    double bandwidth_us_per_byte;  /* B */
    double path_latency_us;        /* D: T >= D, whatever the size */
    bool per_chunk;                /* custom: L is one chunk's bytes */
    bool exact;                    /* B is the maximum over every cut of its family */
    char kind[16];                 /* "forestcoll", "gossip", "cut", "distance", "mcf-lp", ... */
    char cut[256];                 /* which cut gave B, for people */
    char path[128];                /* which pair gave D */
    double seconds;                /* time taken to compute it */
    int nlines;                    /* rooted collectives: additive lines, each a bound */
    cs_bound_line lines[CS_TB_MAX_LINES];
} cs_time_bound;

/* The bound for collective c (validated for t's ranks) on the finalized
 * topology t.  Errors: CS_EINVAL (bad arguments, root out of range), CS_ENOMEM. */
int collective_time_bound(const cs_topology *t, const cs_collective *c, cs_time_bound *out,
                          cs_error *err);

/* The bound in microseconds at `bytes` (the per-rank share L) for an algorithm
 * with `chunks` chunks: max(A + B * L, D, every line); custom bounds use
 * L = bytes / chunks. */
double time_bound_us(const cs_time_bound *b, double bytes, int chunks);

/* Raises b's linear part to (latency_us, bandwidth_us_per_byte) when that is
 * larger at large sizes (a larger B, or an equal B and a larger A), with its
 * kind and description: how another method's bound (the alltoall MCF LP)
 * joins the cut bound. */
void time_bound_offer(cs_time_bound *b, double latency_us, double bandwidth_us_per_byte,
                      const char *kind, bool exact, const char *cut);

/* {"latency_us", "bandwidth_us_per_byte", "path_latency_us", "cut", "path",
 *  "kind", "exact", "seconds"} plus "per_chunk": true for custom collectives
 *  and "lines": [{"latency_us", "bandwidth_us_per_byte", "cut"}, ...] when
 *  there are additive lines (the bound is the largest of all):
 * the "time" member of a result's "bounds" (CONTRACT.md section 4). */
json_t *time_bound_to_json(const cs_time_bound *b);
/* The inverse, for clients reading a stored result; unknown keys are ignored. */
int time_bound_from_json(const json_t *doc, cs_time_bound *out, cs_error *err);

#endif
