/*
 * simulate.h - an event-driven, congestion-aware simulator for algorithms.
 *
 * Model: each lane of a link carries one chunk at a time; moving a chunk of
 * b bytes over a lane takes alpha_us + b / (gbps * 1e3) us.  A send starts as
 * soon as its chunk has arrived at src (for step-synchronous schedules: all of
 * src's receives of that chunk in earlier steps) and a lane is free; sends are
 * considered in (step, list) order, so a schedule's step order is kept but its
 * steps are not barriers.  Shared sets limit how many of their links carry a
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
} cs_sim_result;

/* bytes: the per-rank share L of the cost model (chunk size = bytes / chunks). */
int simulate_algorithm(const cs_topology *t, const cs_algorithm *a, double bytes,
                       cs_sim_result *out, cs_error *err);
void sim_result_free(cs_sim_result *r);

/* TACOS' ideal bound: diameter latency plus the bottleneck serialization at the
 * slowest rank: the data it must receive (or send) divided by its ingress
 * (egress) bandwidth.  For allreduce the bandwidth term is 2(P-1)/P of the
 * buffer, for allgather (P-1)/P of the gathered output. */
double simulate_ideal_us(const cs_topology *t, const cs_collective *c, int chunks,
                         double bytes);

#endif
