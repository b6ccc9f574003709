/*
 * algorithm.h - a schedule of chunk sends (CONTRACT.md section 3), the
 * synthesis result that groups a frontier of them (section 4), and the
 * transformations between algorithms: inversion and concatenation.
 *
 * An algorithm is a list of sends (chunk, src, dst, step, op).  Step-synchronous
 * algorithms (SMT, most baselines) give rounds_per_step; time-driven ones (TACOS)
 * set every rounds_per_step to 1 and may carry start_us/end_us per send.
 *
 * Semantics (shared by the verifier, simulator and code generators): a send in
 * step s reads the value src held at the end of step s-1 (for timed sends: at
 * start_us), and dst holds the result from the end of step s.  `copy`
 * overwrites dst's value, `reduce` combines src's partial value into dst's.
 *
 * Ownership: algorithm_new() returns an empty algorithm the caller fills with
 * algorithm_add_send(); algorithm_free() releases it and everything it owns.
 * Check every algorithm with algorithm_verify() (verify.h) before handing it
 * out: every synthesizer and baseline does.
 */
#ifndef CS_ALGORITHM_H
#define CS_ALGORITHM_H

#include <jansson.h>
#include "cs_common.h"
#include "collective.h"
#include "topology.h"

typedef enum cs_op { CS_OP_COPY = 0, CS_OP_REDUCE = 1 } cs_op;

typedef struct cs_send {
    long chunk;
    int src, dst;
    int step;
    cs_op op;
    double start_us, end_us;   /* NAN when the schedule is not timed */
} cs_send;

typedef struct cs_algorithm {
    cs_collective collective;  /* owned copy */
    char topology[CS_NAME_MAX];
    int ranks;
    int chunks;                /* C: per-rank (or per-buffer) chunk count */
    long global_chunks;        /* G, from collective_global_chunks */
    int steps;                 /* S */
    int rounds;                /* R = sum of rounds_per_step */
    int *rounds_per_step;      /* steps entries, each >= 1 */
    char method[32];           /* "smt", "tacos", "ring", ... */
    char optimality[16];       /* "latency", "bandwidth", "both" or "" */
    long nsends;
    long cap;
    cs_send *sends;
} cs_algorithm;

/* ---- reading and changing sends -------------------------------------------------
 * Code outside algorithm.c reads sends only through these accessors and never
 * touches the storage behind them: the layout is private and compact (it must
 * hold tens of millions of sends), and may change.  algorithm_send() returns a
 * copy; start_us/end_us are NAN for untimed sends. */
static inline cs_send algorithm_send(const cs_algorithm *a, long i) { return a->sends[i]; }
static inline long algorithm_send_chunk(const cs_algorithm *a, long i) { return a->sends[i].chunk; }
static inline int algorithm_send_src(const cs_algorithm *a, long i) { return a->sends[i].src; }
static inline int algorithm_send_dst(const cs_algorithm *a, long i) { return a->sends[i].dst; }
static inline int algorithm_send_step(const cs_algorithm *a, long i) { return a->sends[i].step; }
static inline cs_op algorithm_send_op(const cs_algorithm *a, long i) { return a->sends[i].op; }
static inline double algorithm_send_start_us(const cs_algorithm *a, long i)
{
    return a->sends[i].start_us;
}
static inline double algorithm_send_end_us(const cs_algorithm *a, long i)
{
    return a->sends[i].end_us;
}
/* Overwrites send i (0 <= i < nsends) with *s. */
static inline void algorithm_set_send(cs_algorithm *a, long i, const cs_send *s) { a->sends[i] = *s; }
static inline void algorithm_set_send_step(cs_algorithm *a, long i, int step)
{
    a->sends[i].step = step;
}

/* An empty algorithm; rounds_per_step all 1 (rounds = steps). */
int algorithm_new(const cs_collective *c, const char *topology_name, int ranks, int chunks,
                  int steps, cs_algorithm **out, cs_error *err);
void algorithm_free(cs_algorithm *a);
int algorithm_clone(const cs_algorithm *a, cs_algorithm **out, cs_error *err);
/* Appends an untimed send.  Grows geometrically; returns CS_ENOMEM on failure. */
int algorithm_add_send(cs_algorithm *a, long chunk, int src, int dst, int step, cs_op op);
int algorithm_add_timed_send(cs_algorithm *a, long chunk, int src, int dst, int step,
                             cs_op op, double start_us, double end_us);
/* Changes the step count (rounds_per_step resized, new entries 1). */
int algorithm_set_steps(cs_algorithm *a, int steps, cs_error *err);
/* Recomputes rounds from rounds_per_step. */
void algorithm_update_rounds(cs_algorithm *a);
/* Sets rounds_per_step[s] to the smallest value the bandwidth constraints allow
 * (max over links and shared sets of ceil(sends / lanes), at least 1).  Used by
 * baselines and by anything that builds schedules without choosing rounds. */
int algorithm_fit_rounds(cs_algorithm *a, const cs_topology *t, cs_error *err);
/* Sorts sends by (step, chunk, src, dst): a canonical order for output and
 * comparison. */
void algorithm_sort_sends(cs_algorithm *a);
bool algorithm_is_timed(const cs_algorithm *a);

/* ---- JSON ---------------------------------------------------------------------- */

int algorithm_from_json(const json_t *doc, cs_algorithm **out, cs_error *err);
int algorithm_parse(const char *text, size_t len, cs_algorithm **out, cs_error *err);
int algorithm_load_file(const char *path, cs_algorithm **out, cs_error *err);
json_t *algorithm_to_json(const cs_algorithm *a);

/* ---- transformations --------------------------------------------------------- */

/* Inversion (SCCL sec. 3.5): `a` is a non-combining algorithm synthesized on the
 * reversed topology; the result runs on the original topology.
 *   allgather -> reducescatter, broadcast -> reduce  (copies become reduces,
 *   sends reversed, step s becomes steps-1-s, rounds_per_step reversed);
 *   gather <-> scatter (the mirror: sends reversed, ops stay copies).
 * Requires every (chunk, rank) to be received at most once (a tree per chunk). */
int algorithm_invert(const cs_algorithm *a, cs_algorithm **out, cs_error *err);
/* first then second, steps of second shifted by first->steps.  The only
 * combination with a builtin meaning is reducescatter + allgather with equal
 * chunks c, giving allreduce with chunks P*c (chunk ids line up). */
int algorithm_concat(const cs_algorithm *first, const cs_algorithm *second,
                     cs_algorithm **out, cs_error *err);

/* ---- cost -------------------------------------------------------------------- */

/* Chunk size for a buffer of `bytes` bytes per rank share: bytes / chunks
 * (the contract's cost model: L is the per-rank share). */
double algorithm_chunk_bytes(const cs_algorithm *a, double bytes);
/* alpha-beta cost S*alpha + (R/C)*L*beta in microseconds, with alpha the
 * largest link alpha and beta the per-lane time per byte of the slowest link. */
double algorithm_cost_us(const cs_algorithm *a, const cs_topology *t, double bytes);

/* ---- results (a synthesis: a frontier of algorithms plus bounds) ------------ */

typedef struct cs_result {
    char method[32];           /* "smt", "tacos", or a baseline name */
    char reason[256];          /* why this method ran ("auto: 8 ranks <= smt limit") */
    int nalgs;
    cs_algorithm **algs;       /* owned; ascending steps, descending rounds/chunk */
    int bound_steps;
    double bound_rounds_per_chunk;
    double synth_seconds;
    bool complete;             /* the search proved the frontier (no limit cut it short) */
    json_t *stats;             /* method-specific figures (object, owned), may be NULL */
} cs_result;

int result_new(const char *method, cs_result **out, cs_error *err);
/* Takes ownership of a. */
int result_add(cs_result *r, cs_algorithm *a);
void result_free(cs_result *r);
/* {method, frontier, bounds, synth_seconds, ...}; the caller adds key,
 * topology and collective (it knows the canonical request). */
json_t *result_to_json(const cs_result *r);
int result_from_json(const json_t *doc, cs_result **out, cs_error *err);
/* The frontier algorithm with the lowest alpha-beta cost for `bytes`. */
const cs_algorithm *result_best_for_size(const cs_result *r, const cs_topology *t,
                                         double bytes);

#endif
