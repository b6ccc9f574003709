/*
 * mcf.h - TE-CCL's multi-commodity-flow synthesis (shared/papers/te-ccl.txt,
 * sections 3-4): a collective as a flow over time, solved as an LP (COIN-OR
 * CLP) when no chunk needs copying, as a MILP (COIN-OR CBC) when one does.
 *
 * Time is cut into epochs of tau microseconds.  tau is the fastest link's
 * chunk time (the paper's option (b)); in collsynth's cost model a send holds
 * its lane for alpha + chunk/bandwidth (the simulator and the verifier charge
 * alpha on the lane), so a link's "chunk time" includes its alpha, and a send
 * on link l started in epoch k holds one of its lanes for kappa_l =
 * ceil((alpha_l + chunk/bw_l) / tau) epochs and is usable at its destination
 * from epoch k + kappa_l.  That is the paper's alpha delay of ceil(alpha/tau)
 * epochs and its Appendix F window capacity in one: the schedule the model
 * finds is one the verifier and the simulator accept as timed.
 *
 * Model (per epoch k < K, K the horizon):
 *   capacity   per link and epoch: sends in flight (the last kappa_l epochs)
 *              <= lanes; the same per shared set (switch ports included: the
 *              hyper-edge form, every pair of ranks on a switch is a link and
 *              each rank's port carries one chunk at a time);
 *   buffers    store-and-forward: what a rank holds at k is what it held at
 *              k-1 plus what arrived, minus (without copy) what it sent
 *              (zero_buffer: a switch node holds only what arrives at k);
 *   demand     every postcondition is met by the end of epoch K;
 *   objective  deliver as early as possible (each delivered unit earns
 *              1/(arrival epoch), TE-CCL's 1/(k+1)).
 * Demands where every chunk has one source and one destination that lacks
 * it (alltoall, scatter, gather, pairwise custom) need no copy: flows to one
 * destination are interchangeable, so there is one commodity per destination
 * (P commodities, not P^2) with real variables: an LP, further reduced to one
 * commodity per orbit of the automorphism group of topology and demand
 * (found by bliss: any symmetry, not only rotations of the numbering).  Demands with copy (allgather, broadcast,
 * one-to-many custom) have one binary commodity per chunk: a MILP.
 *
 * The horizon K: options.epochs, or the smallest K whose LP delivers every
 * unit (always-feasible LPs that maximize the units delivered by K), from
 * the cut bound's K upward by secant steps, then bisection: the paper's
 * Algorithm 1 / binary search with the LP as the oracle.  That K is the LP
 * bound (result stats.mcf_lp; bounds.mcf_lp in results).
 *
 * The schedule, cheapest first: pairwise demands round the LP's flows to
 * whole chunks (optimal in makespan when they fit K); copy demands run a
 * seeded greedy first (optimal when it fits K); otherwise the MILP at K,
 * K+1, ... (CBC, options.gap to stop early), with the rounding or the greedy
 * as the fallback.
 *
 * A* rounds (options.astar; pairwise demands also when the full model would
 * be large): TE-CCL's section 4.2.  Rounds of astar_epochs
 * epochs are solved one after the other, each a small model of its epochs
 * with the state carried over (where each chunk is and from when, lanes
 * still held by earlier sends), the demand not enforced, and a progress
 * reward of A*'s form: a chunk costs its arrival epoch if delivered, else
 * max(R, usable epoch) + its Floyd-Warshall distance to its destination
 * (squared costs, summed; for copy demands the minimum over holders,
 * linearized by levels).  No full model, so no LP bound in the result.
 *
 * Chunkings: options.chunks = C asks for C chunks, but the same bytes in
 * fewer, larger chunks pay alpha fewer times, so by default (min_chunks 1)
 * all of this runs for each chunking 1..C and the schedule that ends first
 * is returned; stats.chunking and result->reason say which won and why.
 * Each chunking's schedule is optimal in its epoch model (when its status
 * says so), and the epoch model is exact when every send is a whole number
 * of epochs, so the result is then no slower than any schedule with 1..C
 * chunks of the same bytes (SMT's k-synchronous ones included).
 * A time limit is shared among the chunkings: each gets a floor (a lower
 * bound on its schedules) first, they run most promising first with an even
 * share of the time left each, and one whose floor cannot beat the best
 * schedule found is not run (stats.chunking: order, pruned, cut_short).
 * min_chunks = C keeps C.  options.max_chunks instead returns one algorithm
 * per chunking C..max_chunks (a frontier; the time limit shared the same way,
 * stats.cut_short_chunks naming those without a schedule in their share).
 *
 * Compaction: the epoch grid pads each send to whole epochs and starts it on
 * an epoch boundary; the sends, in epoch order, are then started as early
 * as the continuous cost model allows (chunk arrived, a lane free on the
 * link and its shared sets for the whole send).  No send starts later than
 * its epoch (see mcf.c), so compaction never slows a schedule; start_us and
 * end_us are the compacted times, step the epoch.
 *
 * Solvers run in a forked child (mcf_solver.c): the parent polls the cancel
 * token and the deadline every 20 ms and kills the child on either, so cancel
 * frees the solver within a second whatever CBC is doing, and the solver's
 * memory is the child's.  Progress events report each solve (units
 * delivered; objective, bound and gap) and, while CBC runs, each incumbent
 * and bound its log shows.
 *
 * The result has one timed algorithm (one per chunking with max_chunks;
 * method "mcf"): start_us as compacted (at most epoch * tau), end_us =
 * start_us + alpha + chunk/bw, step = epoch, chunk_bytes set; each is
 * verified before it is returned.  result->stats
 * carries the model, the solve counts and times, and "mcf_lp" (epochs,
 * epoch_us, time_us, exact).  docs/mcf.md has the details and the figures.
 *
 * Copy-capable switches (topology.h): copy demands are solved on the node
 * view, each such switch a node with flow and holding variables like a GPU
 * and no demand (TE-CCL's switch node; every hyper-edge schedule still
 * allowed), and the schedule names the nodes (algorithm switch_nodes);
 * pairwise demands, which copy cannot help, use the hyper-edge form.  The
 * node is store-and-forward unless options.zero_buffer: then it holds at
 * epoch k only what arrives at k (TE-CCL's switch buffer of zero), and
 * compaction moves an upload with the copies that leave with it, so each
 * copy starts as its upload ends (verify.h algorithm_switch_hold: 0).
 *
 * Combining collectives (allreduce, reducescatter, reduce) are refused
 * (CS_EUNSUPPORTED): use smt or tacos.
 */
#ifndef CS_MCF_H
#define CS_MCF_H

#include "algorithm.h"

/* Largest topology mcf accepts by default (models grow as P x links x K). */
#define CS_MCF_DEFAULT_MAX_RANKS 64

typedef struct cs_mcf_options {
    int chunks;            /* chunks per rank share (alltoall: per pair); default 1 */
    int max_chunks;        /* > chunks: one algorithm per chunking chunks..max_chunks of
                              the same bytes (a frontier; default 0: chunks only) */
    int min_chunks;        /* < chunks (and no max_chunks, no fixed epochs): the best of
                              the chunkings min_chunks..chunks of the same bytes is
                              returned (default 1; = chunks: that chunking only) */
    int epochs;            /* horizon K; 0 = smallest LP-feasible, searched */
    int max_epochs;        /* search limit for the horizon (default 256) */
    double bytes;          /* per-rank share L: chunk = bytes / chunks (default 64 MiB) */
    int epoch_split;       /* tau = fastest chunk time / epoch_split (default 1) */
    double gap;            /* MILP early stop at this relative gap (default 0: optimal) */
    double time_limit_s;   /* whole synthesis; 0 = none */
    int max_ranks;         /* 0 = CS_MCF_DEFAULT_MAX_RANKS */
    long max_columns;      /* refuse models with more variables (default 4,000,000) */
    long milp_max_columns; /* pairwise models with more LP columns are rounded from
                              the LP instead of solved as a MILP (default 40,000) */
    int astar;             /* A* rounds: 1 always, -1 never, 0 (default): pairwise demands
                              whose full model's estimated columns exceed
                              min(100,000, max_columns / 4) */
    int astar_epochs;      /* epochs per A* round (0: 8, at least the longest send) */
    int zero_buffer;       /* 1: copy-capable switch nodes hold nothing (TE-CCL's switch
                              buffer of zero): a copy leaves a node as its chunk arrives,
                              in the epoch model and in the timed schedule (default 0:
                              store-and-forward) */
    bool no_symmetry;      /* do not reduce the LP by the automorphisms (tests, benches) */
    cs_progress_fn progress;
    void *progress_ctx;
    cs_cancel *cancel;
} cs_mcf_options;

void mcf_options_default(cs_mcf_options *opt);
/* Checks options against the instance, naming the option at fault. */
int mcf_options_validate(const cs_mcf_options *opt, const cs_topology *t,
                         const cs_collective *c, cs_error *err);

/* True when the collective needs no copy (the LP form applies): every chunk
 * has one source and at most one rank that lacks it and needs it. */
bool mcf_collective_is_pairwise(const cs_collective *c, int ranks, int chunks);

/* Estimated variables of the model mcf would solve (the auto policy's
 * budget): commodities x links x the horizon the cut bound suggests, x 1.5;
 * -1 when the instance is not for mcf (combining kinds, too many ranks). */
long mcf_estimate_columns(const cs_topology *t, const cs_collective *c,
                          const cs_mcf_options *opt);

/* Synthesizes one verified timed algorithm (one per chunking when
 * max_chunks > chunks; result->stats.by_chunks has each one's figures).  Errors: CS_EUNSUPPORTED
 * (combining kinds), CS_ELIMIT (model too large), CS_ETIMEOUT (no schedule
 * within the time limit), CS_ECANCELLED, CS_EINVAL. */
int mcf_synthesize(const cs_topology *t, const cs_collective *c, const cs_mcf_options *opt,
                   cs_result **out, cs_error *err);

#endif
