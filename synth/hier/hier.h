/*
 * hier.h - hierarchical synthesis for clusters: nodes (the topology's groups)
 * joined by a fabric, composed from small syntheses instead of one flat one.
 *
 * Structure it recognizes (hier_detect): every rank in a group, all groups of
 * one size m and one node type (the same intra-group links and switches under
 * the groups' own rank order), the same "NIC" local ranks in every node (the
 * ranks with links out of their group), and for every NIC local index j a
 * direct link from NIC j of each node to NIC j of every other node: a rail
 * switch per NIC (dgxa100:N, dgxh100:N) or one fabric switch joining all NICs
 * (the Slurm hook's clusters, ndv2:N); or a ring of nodes per NIC (the hook's
 * "ring" fabric: allgather, reducescatter, allreduce around the ring, both
 * ways where it has them, with the NIC trees re-chosen so no node link
 * carries more trees than it has lanes; broadcast/reduce with half the
 * data all the way round each way, fed by k root trees balanced to the
 * node's lanes, pipelined; for small sizes each NIC's chunks split the ring
 * at consecutive points, farthest first on every link, fed along shortest
 * paths; chains where the ring goes one way).  Anything else is
 * CS_EUNSUPPORTED with a message naming what is missing, so auto falls back
 * to the flat methods.
 *
 * Allgather (C chunks per rank) is composed per chunk:
 *   1. intra: each chunk spreads inside its node along the tree of its source
 *      in an SMT allgather of the node type (1 chunk per rank);
 *   2. inter: each node's block (its ranks' chunks, contiguous in the
 *      collective's numbering) goes to every other node directly, the pairs
 *      (distance d, block segment) dealt round robin over the NICs, so in
 *      every slot each rail carries a permutation (no port receives twice);
 *   3. intra: a chunk that arrived at NIC j spreads along NIC j's tree of an
 *      SMT "NIC allgather" of the node type (the custom collective: one chunk
 *      at each NIC, wanted everywhere; the plain allgather when every rank is
 *      a NIC).
 * Steps are numbered per chunk (a chunk's phase-3 sends sit one step after
 * the slot it arrived in), and the simulator starts a send when its chunk has
 * arrived, not at a step barrier, so the phases pipeline chunk by chunk.
 * NIC loads are balanced to the chunk; where a rank's per-peer program would
 * outgrow the MSCCL runtimes' 64 steps, a slot's NIC-tree sends split over
 * two steps by the direction of each local pair, so code generation merges a
 * block into one step (the frontier also holds the unsplit composition, the
 * best simulated time, listed second).
 * Reducescatter is the allgather built on the reversed topology, inverted.
 * Allreduce: one (and two) chunks per node, reduced up the same trees to an
 * owner rank and sent back down, and up to 256 ranks reducescatter +
 * allgather with a chunk per rank.  Broadcast: the root's node through its
 * NICs, then each NIC's chunks across nodes by a binomial tree or a chain,
 * then the NIC trees; reduce is its inverse on the reversed topology.
 * Alltoall: intra aggregation to the destination's NIC, a direct exchange
 * over the rails (a node per slot), intra scatter.
 * Intra trees come from the SMT frontier of the node type, synthesized once
 * per node type per call (a small in-call cache; the reversed node reuses the
 * trees when the node is symmetric); where SMT finds nothing within its
 * budget, shortest-path trees stand in and `reason` says so.
 *
 * Scatter: inside the root's node along the root's allgather tree; to
 * local rank i' of node n' through NIC j = (i' + n') mod k of the root's
 * node, one fabric hop (or around the ring the shorter way) to NIC j of n',
 * then NIC j's tree; farthest nodes first, steps per chunk (pipelined).
 * Gather is the scatter of the reversed topology, mirrored.  Custom
 * collectives are CS_EUNSUPPORTED, naming what is missing.
 *
 * Every returned algorithm has passed algorithm_verify on the caller's
 * topology.  Thread safety: no shared state; call from many threads.
 */
#ifndef CS_HIER_H
#define CS_HIER_H

#include "algorithm.h"

typedef struct cs_hier_options {
    double smt_time_limit_s;   /* per node-type SMT search (default 2 s) */
    /* Up to this many ranks the flat TACOS schedule joins the frontier (it
     * takes milliseconds there, and on 2-8 nodes it can beat every
     * composition at small sizes).  Default 0 (never): with fewer steps it
     * heads the frontier, and entry 0 is what code generation takes by
     * default, but a flat schedule's per-rank programs often do not fit the
     * MSCCL runtimes (hook 16 x DGX-1 allgather: 70 steps per block). */
    int flat_max_ranks;
    int threads;               /* SMT threads; 0 = CPU count */
    cs_progress_fn progress;   /* may be NULL */
    void *progress_ctx;
    cs_cancel *cancel;         /* may be NULL */
} cs_hier_options;

void hier_options_default(cs_hier_options *opt);

/* CS_OK when the topology has the structure above and the collective is one
 * hierarchical composes; else CS_EUNSUPPORTED (or CS_EINVAL) with err naming
 * why.  Cheap (no synthesis): what auto asks first. */
int hier_applicable(const cs_topology *t, const cs_collective *c, cs_error *err);

/* hier_applicable, and what auto asks: also CS_EUNSUPPORTED for alltoall
 * on a ring fabric (no composition there).  Other kinds on rings are
 * accepted: with NIC trees balanced to the node's lanes the composition
 * matches or beats flat TACOS (docs/hier.md, "Ring fabrics"). */
int hier_auto_applicable(const cs_topology *t, const cs_collective *c, cs_error *err);

/* A result (method "hierarchical") with a frontier of verified composed
 * algorithms and a reason saying what was composed from what. */
int hier_synthesize(const cs_topology *t, const cs_collective *c, const cs_hier_options *opt,
                    cs_result **out, cs_error *err);

#endif
