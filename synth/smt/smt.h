/*
 * smt.h - exact synthesis of k-synchronous algorithms with Z3 (the SCCL method).
 *
 * smt_solve_instance() decides one instance (topology, collective, S steps,
 * R rounds, C chunks): it returns a verified algorithm, or CS_EUNSAT when none
 * exists, or CS_ETIMEOUT / CS_ECANCELLED.  An instance below the proven
 * bounds (S below the steps bound, R/C below the bandwidth bound,
 * collective_bounds) is CS_EUNSAT at once, without Z3, naming the bound.  smt_search() runs the Pareto search
 * (SCCL Algorithm 1) from the lower bounds upward and returns the frontier, each
 * point labelled latency-optimal, bandwidth-optimal or both.
 *
 * Combining collectives are synthesized as the non-combining dual on the
 * reversed topology and inverted; allreduce is reducescatter + allgather.
 * Switches are already lowered to per-port shared sets by the topology.
 *
 * Threads: independent instances run in parallel, each with its own Z3
 * context; a cs_cancel token interrupts them all (Z3_interrupt) within a second.
 */
#ifndef CS_SMT_H
#define CS_SMT_H

#include "algorithm.h"

/* Default limit on ranks for SMT (configurable per call and in the daemon). */
#define CS_SMT_DEFAULT_MAX_RANKS 64

/* The class.  SCCL searches k-synchronous algorithms, S <= R <= S + k: a
 * frontier is complete in its class only.  A small k can hide a point with
 * fewer steps at the same R/C (DGX-1 alltoall: (C,S,R) = (3,4,8) at k = 4,
 * (3,2,8) at k = 6), so by default k is CS_SMT_K_AUTO: the search starts at
 * CS_SMT_DEFAULT_K (or where the bandwidth bound at the steps bound needs
 * more rounds) and, once its frontier is proven, widens k while a point
 * outside the class could still change the frontier: at S steps, one with
 * R/C below the last frontier point of at most S steps and R >= S + k + 1
 * (so R/C >= (S + k + 1) / max_chunks, and >= the bandwidth bound).  The new
 * k covers every such candidate at once, up to CS_SMT_WIDEN_MAX_K.  Since
 * extra rounds never hurt, the widening is first proven cheaply: only the
 * largest such R per (S, C) is decided, and when all are UNSAT the frontier
 * stands in the wider class without a new search (DGX-1 allgather: 4
 * instances); otherwise the search runs again in it.  The result's reason
 * says what was widened and why.  An explicit k (>= 0) is kept as given. */
#define CS_SMT_K_AUTO (-1)
#define CS_SMT_DEFAULT_K 4
#define CS_SMT_WIDEN_MAX_K 16

typedef struct cs_smt_options {
    int k;                        /* candidates satisfy S <= R <= S + k (default
                                     CS_SMT_K_AUTO, see above) */
    int max_chunks;               /* largest C tried (default 8) */
    int max_steps;                /* largest S tried; 0 = bound + 8 */
    int steps, rounds, chunks;    /* all > 0: solve only this instance */
    double instance_time_limit_s; /* 0 = none */
    double total_time_limit_s;    /* 0 = none */
    int threads;                  /* parallel instances; 0 = CPU count */
    int max_ranks;                /* 0 = CS_SMT_DEFAULT_MAX_RANKS */
    cs_progress_fn progress;      /* may be NULL */
    void *progress_ctx;
    cs_cancel *cancel;            /* may be NULL */
} cs_smt_options;

void smt_options_default(cs_smt_options *opt);
/* Checks options against the topology and collective (S >= 1, C >= 1, k >= 0,
 * ranks within max_ranks, root in range) with a message naming the option. */
int smt_options_validate(const cs_smt_options *opt, const cs_topology *t,
                         const cs_collective *c, cs_error *err);

int smt_solve_instance(const cs_topology *t, const cs_collective *c, int steps, int rounds,
                       int chunks, const cs_smt_options *opt, cs_algorithm **out,
                       cs_error *err);
int smt_search(const cs_topology *t, const cs_collective *c, const cs_smt_options *opt,
               cs_result **out, cs_error *err);

#endif
