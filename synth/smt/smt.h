/*
 * smt.h - exact synthesis of k-synchronous algorithms with Z3 (the SCCL method).
 *
 * smt_solve_instance() decides one instance (topology, collective, S steps,
 * R rounds, C chunks): it returns a verified algorithm, or CS_EUNSAT when none
 * exists, or CS_ETIMEOUT / CS_ECANCELLED.  smt_search() runs the Pareto search
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

typedef struct cs_smt_options {
    int k;                        /* candidates satisfy S <= R <= S + k (default 4) */
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
