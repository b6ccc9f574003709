/*
 * verify_internal.h - what verify.c (driver, header and link checks,
 * bandwidth) and verify_values.c (the per-chunk value replay and the
 * postcondition) share.  Private to the verifier.
 */
#ifndef CS_VERIFY_INTERNAL_H
#define CS_VERIFY_INTERNAL_H

#include <stdint.h>

#include "send_order_internal.h"
#include "simulate_internal.h"
#include "verify.h"

#define VERIFY_TIME_EPS 1e-6

typedef struct value {
    struct value *next_free;
    int refs;
    int count;          /* number of contributions (bits set) */
    uint64_t bits[];
} value;


typedef struct vctx {
    const cs_topology *t;
    const cs_algorithm *a;
    const cs_collective *coll;  /* validated copy */
    cs_verify_report *rep;
    char first_field[CS_ERROR_FIELD_MAX];
    int P;                      /* ranks of the collective */
    int N;                      /* nodes: P, plus the switch nodes when sends use them */
    long G;
    long n;
    int S;
    bool combining, timed;
    unsigned char *valid;       /* one bit per send: it passed the per-send checks */
    /* Each valid send's link, found once by the per-send checks and read
     * again by the bandwidth sweep (two lookups were a third of the checks'
     * time on a million-send composition); NULL (look up again) above
     * VERIFY_LINK_CACHE_MAX sends, so huge schedules keep ~5 B per send. */
    int32_t *link_cache;
    /* Instead, where the link finder has its dense table (every rank has
     * fewer than 255 out-links), the link's position among its source's
     * out-links: a byte per send (a quarter of the fresh memory to fault
     * in); the sweep reads the source again, in index order. */
    uint8_t *link_pos;
    bool all_valid;             /* every send did (the passes then skip the bit test) */
    uint32_t *trank;            /* timed: time dictionary index -> rank in time order */
    double chunk_bytes;         /* timed: the chunk size the times assume (0: unknown) */
    link_finder links;          /* send -> link */
    sim_links *sim;             /* algorithm_verify_simulate: the simulator's links, built
                                   from the value replay's chunks; else NULL */
    /* link -> shared sets */
    int *set_begin, *set_list;
    /* value replay */
    unsigned *stamp;            /* per rank: epoch of the chunk that wrote the state */
    double *avail;              /* non-combining: step (or time) from which rank holds it */
    value **val;                /* combining: rank's value when stamped ... */
    int *single;                /* ... or, when val is NULL, the singleton it holds (-1: none) */
    unsigned *lstamp;           /* combining liveness (see mark_dead_sources) */
    unsigned char *live;
    int *wstep;                 /* combining: step of the last write (conflict check) */
    int *touched;
    int ntouched;
    unsigned epoch;
    int words;
    value *free_values;
    value **all_blocks;         /* every value ever allocated, for freeing */
    long nblocks, cap_blocks;
    bool oom;
    const uint32_t *ord;        /* processing order for the dense replay (NULL: index order) */
    bool general;               /* algorithm_verify_general: no dense replay */
    long pre_g;                 /* the chunk pre_one is for (-1: none) */
    int pre_one;
    /* custom postconditions: chunk -> ranks */
    long *post_begin;
    int *post_rank;
} vctx;


/* pre_one: the precondition of chunk pre_g, worked out once per chunk by
 * the replay (verify_pre_of) instead of per send (a call and a division). */
#define VERIFY_PRE_ALL (-2)     /* every rank holds the chunk */
#define VERIFY_PRE_ASK (-3)     /* ask collective_pre (custom collectives) */

/* The precondition of chunk g by kind: the one rank holding it, or
 * VERIFY_PRE_ALL / VERIFY_PRE_ASK.  verify_check_shapes checks it against
 * collective_pre on a sample. */
int verify_pre_of(const cs_collective *c, int P, long g);

/* Whether node r holds chunk g before any send: switch nodes (r >= P) never do. */
static inline bool vpre(const vctx *v, long g, int r)
{
    if (r >= v->P)
        return false;
    if (g == v->pre_g) {
        if (v->pre_one >= 0)
            return r == v->pre_one;
        if (v->pre_one == VERIFY_PRE_ALL)
            return true;
    }
    return collective_pre(v->coll, v->P, v->a->chunks, g, r);
}

/* "rank 3", or "switch nvswitch (node 16)" for a switch node. */
typedef struct node_name { char s[96]; } node_name;
node_name verify_node_name(const vctx *v, int r);

/* Problems: counted always, described while there is room in the report.
 * field is the JSON path of the first problem (for cs_error.field). */
void verify_problem(vctx *v, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* "send 17 (chunk 3, 2->5, step 1): " + the reason. */
void verify_send_problem(vctx *v, long i, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
bool verify_reasons_full(const vctx *v);

/* Replays values chunk by chunk (the valid sends) and checks the
 * postcondition of every chunk. */
int verify_replay_values(vctx *v, cs_error *err);
/* Whether verify_replay_values may first try the dense replay (see
 * verify_values.c): a non-combining, untimed, builtin collective with at
 * most VERIFY_DENSE_MAX (chunk, node) pairs, verified without simulating. */
bool verify_replay_dense_fits(const vctx *v);
/* Builds the chunk -> ranks index of a custom collective's postcondition. */
int verify_build_custom_post(vctx *v, cs_error *err);
/* Checks that the verifier's reading of the postcondition matches collective.h. */
int verify_check_shapes(vctx *v, cs_error *err);

#endif
