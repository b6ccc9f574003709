/*
 * verify.h - the one gate every algorithm passes before collsynth returns it.
 *
 * algorithm_verify() replays an algorithm on its topology and collective:
 *  - each send's link exists (or, for switch ranks, the lowered switch link);
 *  - causality: src holds the chunk before the send's step (timed sends: the
 *    chunk's arrival end_us <= the send's start_us, within 1e-6 us);
 *  - bandwidth: per step, sends over each link <= lanes * rounds_per_step[s], and
 *    likewise for every shared set (timed sends: concurrent sends on a link never
 *    exceed its lanes, and the rates of concurrent sends through a switch port
 *    never sum above its bandwidth: docs/model.md, "Switch ports");
 *  - values: for non-combining collectives the set of ranks holding each chunk;
 *    for combining ones the set of contributions each (chunk, rank) value holds,
 *    so a contribution counted twice or missing is caught;
 *  - switch nodes (algorithm switch_nodes > 0, topology.h "Copy-capable
 *    switches"): checked on the topology's node view, where a node is a
 *    rank with links inside its members' ports; it holds nothing at first
 *    (so a copy leaves only after the chunk arrived), combines the reduces it
 *    receives like a rank (in-network aggregation), and has no postcondition;
 *  - the postcondition; and the header fields (ranks, chunks, global_chunks,
 *    steps, rounds = sum of rounds_per_step, ops allowed by the kind).
 * Working memory is about 5 bytes per send on top of the algorithm (a bit per
 * send and batches of a quarter of the sends, chunk by chunk; up to 2^23
 * sends also each send's link, 4 bytes, found once, and below 2^20 the
 * sends' indices bucketed by batch, 4 bytes; up to 2048 ranks a byte (or two)
 * per rank pair for the link lookups; non-combining untimed collectives of at
 * most 2^22 (chunk, node) pairs first try a replay with a byte or two per
 * pair, in the sends' processing order, before the chunk-by-chunk one, and
 * untimed reducescatter, reduce and allreduce below 2^20 sends and 2^22
 * words of P-bit contribution sets (G x nodes x P / 64) one with the sets,
 * shared by reference count, step by step; both only answer "valid",
 * anything else goes to the chunk-by-chunk replay, which reports),
 * so it also checks
 * TACOS schedules of 10^8 sends; from 2^20 sends the chunk-by-chunk
 * replay runs on up to 4 threads, with the same report.
 */
#ifndef CS_VERIFY_H
#define CS_VERIFY_H

#include "algorithm.h"
#include "simulate.h"

#define CS_VERIFY_MAX_REASONS 16

typedef struct cs_verify_report {
    bool ok;
    int nproblems;                          /* total problems found */
    int nreasons;                           /* the first few, described */
    char reasons[CS_VERIFY_MAX_REASONS][256];
} cs_verify_report;

/* CS_OK when valid; CS_EVERIFY with the first reason in err otherwise
 * (CS_EINVAL/CS_ENOMEM for unusable input). */
int algorithm_verify(const cs_topology *t, const cs_algorithm *a, cs_error *err);
/* The same check, collecting up to CS_VERIFY_MAX_REASONS reasons. */
int algorithm_verify_report(const cs_topology *t, const cs_algorithm *a,
                            cs_verify_report *rep, cs_error *err);
/* algorithm_verify without the dense replays (the chunk-by-chunk replay
 * only): the same verdict, for tests and benchmarks that hold the fast
 * replays against the general one. */
int algorithm_verify_general(const cs_topology *t, const cs_algorithm *a, cs_error *err);
/* algorithm_verify, then (when valid) simulate_algorithm at `bytes`, in
 * one walk: the simulator's chunk-by-chunk links are built from the chunks
 * the verifier's value replay gathers, and its own send checks are the
 * verifier's, so the pair costs about a third less than the two calls (what
 * TACOS runs on every schedule it keeps).  The same results to the bit, the
 * same errors (CS_EVERIFY with the first reason when invalid; *sim is then
 * empty).  verify_s (may be NULL): seconds before the simulator's timing
 * sweep (the checks, the value replay and the shared linking; the timing
 * sweep then runs beside the verifier's bandwidth sweep, one core each).
 * Free *sim with sim_result_free. */
int algorithm_verify_simulate(const cs_topology *t, const cs_algorithm *a, double bytes,
                              cs_sim_result *sim, double *verify_s, cs_error *err);

/* How long copy-capable switch nodes hold chunks in a timed schedule through
 * them (algorithm switch_nodes > 0; docs/model.md, "Copy-capable switches"):
 * each copy out of a node is matched with the latest arrival of its chunk at
 * that node that ends by the copy's start (within 1e-6 us, the verifier's
 * causality slack), and waits from that end to its start.  TE-CCL's switch
 * has no buffer (what enters leaves at once): a schedule realizable on it
 * has held_copies 0.  Independent of the method that made the schedule (mcf
 * reports its own figures); run algorithm_verify first: a copy with no
 * arrival before it is CS_EVERIFY here.  All zero for schedules without
 * nodes. */
typedef struct cs_switch_hold {
    long copies;        /* sends out of switch nodes */
    long held_copies;   /* of them, those that waited more than 1e-6 us */
    double max_hold_us; /* the longest wait */
    int peak_chunks;    /* the most arrivals one node held at once (each from its end
                           to the last copy that used it) */
} cs_switch_hold;
int algorithm_switch_hold(const cs_topology *t, const cs_algorithm *a, cs_switch_hold *out,
                          cs_error *err);

#endif
