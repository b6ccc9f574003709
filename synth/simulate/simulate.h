/*
 * simulate.h - an event-driven, congestion-aware simulator for algorithms.
 *
 * Model: each lane of a link carries one chunk at a time; moving a chunk of
 * b bytes over a lane takes alpha_us + b / (gbps * 1e3) us.  A send starts as
 * soon as its chunk has arrived at src (for step-synchronous schedules: all of
 * src's receives of that chunk in earlier steps) and a lane is free; sends are
 * considered in (step, list) order, so a schedule's step order is kept but its
 * steps are not barriers.
 *
 * Timed schedules (start_us/end_us) run the same way, as soon as they can:
 * start_us orders the sends (processing order (start, end, index)) and says
 * which arrivals a send waits for (those ending by its start), but a send
 * does not wait for its start_us.  That is how the schedule runs where it
 * becomes code: MSCCL runtimes have no clock, a send starts when its
 * dependencies are met and its channel is free.  The schedule's own claim
 * is kept beside it (scheduled_us, its latest end_us); for a schedule the
 * verifier accepts, simulated at the chunk size it was timed with, time_us
 * <= scheduled_us: every send then starts no later than its start_us (its
 * arrivals end no later than scheduled, and the sends ahead of it on a lane
 * end no later, so no more of them are in flight than the verifier counted;
 * tests/test_simulate.c checks it on mcf's and TACOS' timed schedules).  A
 * schedule with idle gaps runs faster than it claims.  (Switch ports shared
 * at unequal rates at once, 0.6 and 0.4 of one, included: simulate.c
 * rounds a send's port lanes down so such sends fit together.)  Shared sets limit how many of their links carry a
 * chunk at once.  Reductions cost nothing beyond the transfer.
 *
 * Schedules through copy-capable switch nodes (algorithm switch_nodes) run
 * on the topology's node view: a send up to the node and each copy down
 * take alpha + chunk / gbps of the switch on the member's port; a copy
 * crosses groups when its rank's group is not the uploader's (nodes are in
 * no group), and link figures cover the topology's own links only.
 *
 * Outputs: the collective's completion time, per-link busy time and
 * utilization, total and cross-group bytes (the Bine paper's global-link
 * traffic, from the topology's groups), and the TACOS ideal time for comparison.
 */
#ifndef CS_SIMULATE_H
#define CS_SIMULATE_H

#include "algorithm.h"

typedef struct cs_sim_result {
    double time_us;             /* completion time */
    double ideal_us;            /* simulate_ideal_us for the same collective and size */
    double chunk_bytes;
    int nlinks;
    double *link_busy_us;       /* per link (topology order): time some lane was busy x lanes used */
    double *link_utilization;   /* busy / (time_us * lanes), in [0, 1] */
    double total_bytes;         /* bytes moved over all links */
    double cross_group_bytes;   /* bytes over links whose ends are in different groups */
    double max_utilization;
    double scheduled_us;        /* timed schedules: the latest end_us (the schedule's own
                                   completion time); 0 for step schedules */
    bool scheduled_size;        /* timed, and simulated at the chunk size the times were
                                   computed for (chunk_bytes == the algorithm's timed
                                   chunk_bytes): time_us and scheduled_us compare */
} cs_sim_result;

/* bytes: the per-rank share L of the cost model (chunk size = bytes / chunks). */
int simulate_algorithm(const cs_topology *t, const cs_algorithm *a, double bytes,
                       cs_sim_result *out, cs_error *err);
/* The same without ideal_us (NAN there), for callers that read only the
 * times: TACOS' ideal walks every rank's ingress and egress bandwidth (on
 * the hook's 128-node cluster 17% of simulating its allgather), and the
 * daemon's ratio_to_bound never reads it. */
int simulate_algorithm_time(const cs_topology *t, const cs_algorithm *a, double bytes,
                            cs_sim_result *out, cs_error *err);
void sim_result_free(cs_sim_result *r);

/* TACOS' ideal bound: diameter latency plus the bottleneck serialization at the
 * slowest rank: the data it must receive (or send) divided by its ingress
 * (egress) bandwidth.  For allreduce the bandwidth term is 2(P-1)/P of the
 * buffer, for allgather (P-1)/P of the gathered output. */
double simulate_ideal_us(const cs_topology *t, const cs_collective *c, int chunks,
                         double bytes);

#endif
