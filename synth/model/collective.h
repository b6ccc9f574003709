/*
 * collective.h - what a collective must achieve: its kind, root, and the pre-
 * and postconditions over [chunk, rank] pairs (CONTRACT.md section 2).
 *
 * Chunk numbering for P ranks and C chunks (the algorithm's `chunks`):
 *   allgather     G = P*C    g starts at rank g%P          ends at every rank
 *   gather        G = P*C    g starts at rank g%P          ends at root
 *   scatter       G = P*C    g starts at root              ends at rank g%P
 *   broadcast     G = C      g starts at root              ends at every rank
 *   alltoall      G = P*P*C  g starts at rank g%P          ends at rank (g/P)%P
 *   reducescatter G = P*C    a contribution at every rank  reduced at rank g%P
 *   reduce        G = C      a contribution at every rank  reduced at root
 *   allreduce     G = C      a contribution at every rank  reduced at every rank
 *   custom        G given    explicit [chunk, rank] pairs (non-combining)
 *
 * For combining kinds, collective_pre() says whether a rank starts with a
 * contribution (always, for the builtin kinds) and collective_post() whether
 * it must end with the full reduction.
 *
 * The queries are O(1) for builtin kinds (custom kinds build a lookup at
 * collective_validate time), so synthesizers for tens of thousands of ranks
 * can call them without materializing G x P tables.
 */
#ifndef CS_COLLECTIVE_H
#define CS_COLLECTIVE_H

#include <jansson.h>
#include "cs_common.h"
#include "topology.h"

typedef enum cs_coll_kind {
    CS_COLL_ALLGATHER = 0,
    CS_COLL_REDUCESCATTER,
    CS_COLL_ALLREDUCE,
    CS_COLL_BROADCAST,
    CS_COLL_REDUCE,
    CS_COLL_GATHER,
    CS_COLL_SCATTER,
    CS_COLL_ALLTOALL,
    CS_COLL_CUSTOM,
    CS_COLL_KIND_COUNT
} cs_coll_kind;

typedef struct cs_collective {
    cs_coll_kind kind;
    int root;            /* rooted kinds: the root; -1 otherwise */
    /* custom only */
    int custom_global_chunks;
    int npre, npost;
    int *pre;            /* npre pairs, flattened: chunk, rank, chunk, rank, ... */
    int *post;           /* npost pairs */
    /* lookup built by collective_validate for custom kinds (private) */
    int custom_ranks;
    unsigned char *custom_bits; /* 2 bits per (chunk, rank): pre, post */
} cs_collective;

const char *collective_kind_name(cs_coll_kind kind);
int collective_kind_from_name(const char *name, cs_coll_kind *kind);
/* The kind name nearest to a misspelt one ("allgathr" -> "allgather"), or NULL
 * when none is close (cs_nearest_name). */
const char *collective_kind_suggest(const char *name);
bool collective_kind_is_combining(cs_coll_kind kind);
bool collective_kind_is_rooted(cs_coll_kind kind);

/* Initializes a builtin kind (root -1 for unrooted kinds). */
void collective_init(cs_collective *c, cs_coll_kind kind, int root);
/* Parses {"kind": ..., "root": ..., ...}.  Checks types and kind names; the
 * ranges that need the rank count are checked by collective_validate. */
int collective_from_json(const json_t *doc, cs_collective *out, cs_error *err);
json_t *collective_to_json(const cs_collective *c);
/* Checks root and custom pairs against the rank count and builds the custom
 * lookup.  Must be called (once per rank count) before the queries. */
int collective_validate(cs_collective *c, int ranks, cs_error *err);
int collective_copy(cs_collective *dst, const cs_collective *src, cs_error *err);
void collective_free(cs_collective *c);

/* G for P ranks and C chunks (for custom: custom_global_chunks, C ignored). */
long collective_global_chunks(const cs_collective *c, int ranks, int chunks);
bool collective_pre(const cs_collective *c, int ranks, int chunks, long chunk, int rank);
bool collective_post(const cs_collective *c, int ranks, int chunks, long chunk, int rank);
/* For a non-combining kind with a single source per chunk, that source rank;
 * -1 when the chunk has several sources (custom) or the kind is combining. */
int collective_source(const cs_collective *c, int ranks, int chunks, long chunk);

/* The non-combining collective whose inversion on the reversed topology gives
 * this combining one (reducescatter <- allgather, reduce <- broadcast), and the
 * mirror pairs (gather <-> scatter).  CS_EUNSUPPORTED when there is none. */
int collective_dual(const cs_collective *c, cs_collective *dual, cs_error *err);

/* ---- lower bounds -------------------------------------------------------------- */

typedef struct cs_bounds {
    int steps;                 /* latency bound: hop distance that some chunk must travel */
    long rpc_num, rpc_den;     /* bandwidth bound: rounds per chunk >= rpc_num / rpc_den */
    double rounds_per_chunk;   /* rpc_num / rpc_den */
    char bandwidth_cut[256];   /* which cut gave the bound, for people */
} cs_bounds;

/* Steps: the largest hop distance from a chunk's source(s) to a rank that needs
 * it.  Rounds per chunk: the tightest cut found by max-flow / min-cut (Dinkelbach
 * iteration over s-t min cuts), a valid lower bound for any k-synchronous
 * algorithm of this collective on this topology.  Combining kinds use their
 * dual on the reversed topology; allreduce is reducescatter + allgather. */
int collective_bounds(const cs_topology *t, const cs_collective *c, cs_bounds *out,
                      cs_error *err);

#endif
