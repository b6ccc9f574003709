/*
 * baseline_internal.h - what baseline.c shares with the baseline generators
 * (baseline_classic.c, baseline_bine.c).  Private to the baseline module.
 *
 * Every generator describes its algorithm as one or more *phases*, each a
 * non-combining logical schedule (sends between any two ranks, in logical
 * steps) of one of the kinds allgather, broadcast, scatter or alltoall.  The
 * builder routes a phase over shortest paths and appends it to the algorithm:
 *
 *   BL_FORWARD  the phase as it is (copies).
 *   BL_INVERT   the phase is the *dual* of a combining one (SCCL sec. 3.5): it
 *               is routed on the reversed topology and time-reversed, copies
 *               becoming reduces (allgather -> reducescatter, broadcast ->
 *               reduce).  Routing never delivers a chunk twice to a rank, so the
 *               dual is a tree per chunk and its inversion reduces every
 *               contribution exactly once, forwarders included.
 *   BL_MIRROR   like BL_INVERT but copies stay copies (scatter -> gather).
 *
 * So a generator never has to think about clobbering forwarders' values:
 * combining collectives are always written as their non-combining duals.  The
 * one exception is a butterfly exchange (recursive-doubling allreduce), which
 * no tree describes; bl_add_native() emits such sends unrouted and requires a
 * direct link for each.
 */
#ifndef CS_BASELINE_INTERNAL_H
#define CS_BASELINE_INTERNAL_H

#include "baseline.h"

/* Generous but bounded: ~40 bytes per send in the algorithm plus routing
 * scratch.  Beyond this a baseline is not a useful comparison anyway. */
#define BL_MAX_SENDS 4000000L

typedef struct bl_lsend {
    long chunk;
    int src, dst;
    int lstep;
} bl_lsend;

/* A non-combining logical schedule.  kind is CS_COLL_ALLGATHER, BROADCAST,
 * SCATTER or ALLTOALL and fixes where each chunk starts (chunk numbering of
 * collective.h with `chunks` per rank share); root for broadcast/scatter. */
typedef struct bl_lsched {
    cs_coll_kind kind;
    int root;
    int ranks;
    int chunks;
    long n, cap;
    bl_lsend *s;
} bl_lsched;

void bl_lsched_init(bl_lsched *ls, cs_coll_kind kind, int root, int ranks, int chunks);
void bl_lsched_free(bl_lsched *ls);
int bl_lsched_add(bl_lsched *ls, long chunk, int src, int dst, int lstep);
/* Adds a copy of every chunk in chunks[0..n) from src to dst at lstep. */
int bl_lsched_add_many(bl_lsched *ls, const long *chunks, long n, int src, int dst, int lstep);

typedef enum bl_mode { BL_FORWARD = 0, BL_INVERT, BL_MIRROR } bl_mode;

typedef struct bl_builder bl_builder;

/* The context a generator gets: the topology, the requested collective (root
 * already validated), and the chunk count the caller asked for (0 = natural). */
typedef struct bl_request {
    const cs_topology *t;
    const cs_collective *c;
    int ranks;
    int root;            /* 0 for unrooted kinds */
    int chunks_req;      /* 0: the baseline's natural count */
    const char *name;    /* baseline name, for messages */
} bl_request;

/* A generator adds phases to b and sets *chunks to the algorithm's C. */
typedef int (*bl_gen_fn)(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);

int bl_add_phase(bl_builder *b, const bl_lsched *ls, bl_mode mode, cs_error *err);
/* Sends over direct links, steps relative to the current end of the schedule;
 * nsteps is the phase length.  A pair without a link is CS_EUNSUPPORTED. */
int bl_add_native(bl_builder *b, const bl_lsend *sends, long n, const cs_op *ops, int nsteps,
                  cs_error *err);
const cs_topology *bl_topology(const bl_builder *b);

/* ---- helpers shared by the generators ---------------------------------------- */

static inline int bl_vrank_to_rank(int v, int root, int p) { return (v + root) % p; }
static inline int bl_rank_to_vrank(int r, int root, int p) { return ((r - root) % p + p) % p; }
/* floor(log2(p)) for p >= 1. */
int bl_floor_log2(int p);
bool bl_is_pow2(int p);
/* The chunk count: the natural one when rq->chunks_req is 0, else the request,
 * which must be a positive multiple of `multiple` (CS_EINVAL naming "chunks"). */
int bl_pick_chunks(const bl_request *rq, int natural, int multiple, int *chunks, cs_error *err);

/* Generators (baseline_classic.c) */
int bl_gen_ring(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);
int bl_gen_rings(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);
int bl_gen_direct(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);
int bl_gen_recursive_doubling(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);
int bl_gen_recursive_halving(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);
int bl_gen_binomial(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);
int bl_gen_double_binary_tree(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);
/* Generators (baseline_bine.c) */
int bl_gen_bine_tree(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);
int bl_gen_bine_butterfly(const bl_request *rq, bl_builder *b, int *chunks, cs_error *err);

/* Shared building blocks (baseline_classic.c), used by the Bine generators too. */

/* A tree over virtual ranks: parent[v] (-1 for the root) and the logical step
 * at which v receives from its parent.  The builders add the logical sends of
 * a broadcast (all chunks along every edge) or a scatter (each rank's chunks
 * along its root path) to ls, mapping virtual rank v to (v + root) % p. */
int bl_tree_broadcast(bl_lsched *ls, const int *parent, const int *recv_step, int p, int root,
                      const long *chunks, long nchunks, int step_offset);
int bl_tree_scatter(bl_lsched *ls, const int *parent, const int *recv_step, int p, int root,
                    int step_offset);

/* Butterfly allgather among 2^m "survivors" with non-power-of-two folding
 * (reference/bine.md): excess even ranks r < 2e first hand their chunks to r+1
 * and sit out; survivor q exchanges everything it holds with peer(q, k) at
 * step k; at the end survivors hand everything to their folded partner.
 * peer(q, k, m, arg) returns a survivor in [0, 2^m).  Logical steps from
 * step_offset; returns the number of logical steps used in *nsteps. */
/* Runs a rooted tree collective given the tree over virtual ranks:
 * broadcast/reduce (all chunks along every edge), scatter/gather, and
 * allreduce = reduce + broadcast (the tree rooted at rank 0). */
int bl_tree_collective(const bl_request *rq, bl_builder *b, const int *parent,
                       const int *recv_step, int *chunks, cs_error *err);

typedef int (*bl_peer_fn)(int q, int k, int m, const void *arg);
int bl_butterfly_allgather(bl_lsched *ls, int p, bl_peer_fn peer, const void *arg,
                           int step_offset, int *nsteps);

#endif
