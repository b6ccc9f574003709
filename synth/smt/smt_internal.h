/*
 * smt_internal.h - private interface between smt.c (options, Pareto search,
 * combining collectives, threads) and smt_encode.c (one instance through Z3).
 * Not a public header: only the smt module includes it.
 *
 * An smt_problem is the topology and a non-combining collective for one chunk
 * count C, flattened into arrays the encoder walks quickly (links, shared sets,
 * pre/post bits, hop distances, interchangeable chunk classes).  It does not
 * depend on S or R, so the search builds it once per C and shares it read-only
 * between worker threads.
 */
#ifndef CS_SMT_INTERNAL_H
#define CS_SMT_INTERNAL_H

#include <pthread.h>
#include <z3.h>

#include "smt.h"

typedef struct smt_problem {
    int P;                 /* ranks */
    long G;                /* global chunks */
    int C;                 /* chunks (the algorithm's) */
    int nlinks;
    int *lsrc, *ldst, *llanes;
    int *in_begin, *in_links;  /* links into each rank */
    int nsets;                 /* link constraints: every link, then every shared set */
    int *set_begin, *set_links, *set_lanes;
    unsigned char *pre, *post; /* G*P */
    int *dist;                 /* P*P hop distances */
    int *earliest;             /* G*P: first time (c, n) can hold c; INT_MAX if never */
    int *need_dist;            /* G*P: hops from n to the nearest post rank lacking c (INT_MAX none) */
    int *sym_next;             /* G: next chunk interchangeable with c, -1 if none */
    const cs_collective *coll; /* for building the algorithm */
    char topology_name[CS_NAME_MAX];
} smt_problem;

/* Encoding switches (measured in bench/smt_bench.c; defaults are the best found). */
typedef struct smt_encode_config {
    int solver;          /* 0 = QF_FD (SAT + PB), 1 = default Z3_mk_solver, 2 = simple (smt) */
    bool symmetry;       /* lex-leader between interchangeable chunks */
    int sym_len;         /* entries of each chunk's vector in the lex order (0 = all) */
    const char *pb_solver; /* Z3 sat pb.solver: "sorting", "solver", "totalizer", ... */
    bool direct;         /* Boolean per (link, chunk, step) instead of snd + implied y */
    bool ingress;        /* implied per-rank, per-step ingress bounds */
    const int *fixed_rounds; /* experiments: force rounds_per_step (NULL = free) */
    bool card_solver;    /* Z3 sat cardinality.solver: native cardinality propagation */
    bool dump_stats;     /* experiments only: Z3 statistics to stderr */
    unsigned seed;       /* Z3 random_seed (0 = Z3's default) */
} smt_encode_config;

void smt_encode_config_default(smt_encode_config *cfg);

/* Shared between a running instance and whoever may interrupt it. */
typedef struct smt_live {
    pthread_mutex_t *lock;     /* guards ctx and interrupted */
    Z3_context ctx;            /* NULL when not inside Z3 */
    bool interrupted;
} smt_live;

typedef struct smt_instance_stats {
    double encode_s, z3_s, extract_s; /* own code = encode + extract (+ verify) */
    long vars, constraints;
    long conflicts;                   /* Z3's "sat conflicts": load-independent effort */
} smt_instance_stats;

int smt_problem_build(const cs_topology *t, const cs_collective *c, int chunks,
                      smt_problem **out, cs_error *err);
void smt_problem_free(smt_problem *p);

/* Decides (S, R) for the problem.  CS_OK with *out (built, not yet verified),
 * CS_EUNSAT, CS_ETIMEOUT (time_limit_s > 0 ran out), CS_ECANCELLED (live was
 * interrupted).  `live` may be NULL. */
int smt_encode_solve(const smt_problem *p, int S, int R, const smt_encode_config *cfg,
                     double time_limit_s, smt_live *live, cs_algorithm **out,
                     smt_instance_stats *st, cs_error *err);

/* sign of a/b - c/d for positive denominators */
static inline int smt_rcmp(long a, long b, long c, long d)
{
    long double x = (long double)a * d, y = (long double)c * b;
    return x < y ? -1 : x > y;
}

/* A frontier under construction: algorithms in order of increasing S. */
typedef struct smt_frontier {
    cs_algorithm **algs;
    int n;
    bool complete;
    json_t *stats;   /* owned */
} smt_frontier;

void smt_frontier_free(smt_frontier *f);
int smt_frontier_push(smt_frontier *f, cs_algorithm *a);
/* The Pareto search (or the single instance in opt) for a non-combining
 * collective on the topology it is encoded on (smt_search.c).  On CS_OK, f
 * holds the frontier, possibly empty when limits cut the search short. */
int smt_run_search(const cs_topology *topo, const cs_collective *coll, const cs_bounds *b,
                   const cs_smt_options *opt, smt_frontier *f, cs_error *err);

/* Decides the instances (S[i], R[i], C[i]), i < n, of a non-combining
 * collective on the topology it is encoded on, in parallel (opt->threads),
 * in the order given, stopping at the first SAT one.  CS_OK with *sat = -1
 * when every instance is UNSAT, or the index of a SAT one (the others are
 * abandoned); CS_ETIMEOUT when one could not be decided within the limits;
 * CS_ECANCELLED.  *stats (may be NULL) gets the engine's statistics, as in a
 * frontier's.  Used to prove a frontier beyond its class (smt.c). */
typedef struct smt_check { int S, R, C; } smt_check;
int smt_run_checks(const cs_topology *topo, const cs_collective *coll, const smt_check *chk,
                   int n, const cs_smt_options *opt, int *sat, json_t **stats, cs_error *err);

/* The SCCL paper's integer-time encoding (C1-C6) with Z3's default solver:
 * a baseline for benchmarks only (smt_sccl.c).  No live/cancel support. */
int smt_sccl_solve(const smt_problem *p, int S, int R, double time_limit_s, cs_algorithm **out,
                   smt_instance_stats *st, cs_error *err);

#endif
