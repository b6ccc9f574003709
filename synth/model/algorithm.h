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
#include <math.h>
#include <stdint.h>
#include "cs_common.h"
#include "collective.h"
#include "topology.h"

typedef enum cs_op { CS_OP_COPY = 0, CS_OP_REDUCE = 1 } cs_op;

/* One send, as the accessors return it (a value, not a view of the storage). */
typedef struct cs_send {
    long chunk;
    int src, dst;
    int step;
    cs_op op;
    double start_us, end_us;   /* NAN when the schedule is not timed */
} cs_send;

/* ---- send storage (private: algorithm.c owns it; read it through the accessors) ----
 * Columns of small integers, each at the narrowest of 1, 2 or 4 bytes that
 * holds every value stored so far (widened when a larger or negative value
 * arrives; 1- and 2-byte columns are unsigned, 4-byte ones int32).  Times are
 * a dictionary of distinct doubles, and each timed send keeps two indices into
 * it; entry 0 is NAN.  Layout and reasons: algorithm.c's design comment. */
typedef struct cs_column {
    void *data;
    int width;                 /* bytes per value: 1, 2 or 4 */
} cs_column;

typedef struct cs_send_store {
    long cap;                  /* sends the columns have room for */
    cs_column chunk, src, dst, step;
    unsigned char *reduce;     /* one bit per send: op is reduce */
    cs_column start, end;      /* indices into times; data NULL until a send is timed */
    double *times;             /* the time dictionary, times[0] = NAN */
    long ntimes, times_cap;
    uint32_t *time_slots;      /* hash of times -> index + 1 (0: empty), for deduplication */
    long time_slots_cap;       /* a power of two */
    double recent[2];          /* the last start and end looked up, and their indices: */
    long recent_index[2];      /* consecutive sends mostly share them */
    long ntimed;               /* sends whose start_us and end_us are both finite */
} cs_send_store;

typedef struct cs_algorithm {
    cs_collective collective;  /* owned copy */
    char topology[CS_NAME_MAX];
    int ranks;
    int chunks;                /* C: per-rank (or per-buffer) chunk count */
    long global_chunks;        /* G, from collective_global_chunks (< 2^31) */
    int steps;                 /* S */
    int rounds;                /* R = sum of rounds_per_step */
    int *rounds_per_step;      /* steps entries, each >= 1 */
    char method[32];           /* "smt", "tacos", "ring", ... */
    char optimality[16];       /* "latency", "bandwidth", "both" or "" */
    /* Timed schedules: the size of one chunk, in bytes, that start_us/end_us
     * were computed for (the verifier needs it to check the rates of sends that
     * share a switch port); 0 when unknown.  JSON "chunk_bytes". */
    double timed_chunk_bytes;
    /* Switch nodes the sends may name besides the ranks: src/dst in
     * [ranks, ranks + switch_nodes) is the node of a copy-capable switch
     * (topology.h, "Copy-capable switches"; only mcf makes such sends).
     * 0 for every schedule of ranks only.  JSON "switch_nodes" (omitted when 0). */
    int switch_nodes;
    long nsends;               /* read-only outside algorithm.c */
    cs_send_store store;       /* private */
} cs_algorithm;

/* ---- reading and changing sends -------------------------------------------------
 * Code outside algorithm.c reads sends only through these accessors and never
 * touches the storage behind them: the layout is private and compact (it must
 * hold hundreds of millions of sends), and may change.  algorithm_send()
 * returns a copy; start_us/end_us are NAN for untimed sends.  0 <= i < nsends. */
static inline int32_t cs_column_get(const cs_column *c, long i)
{
    switch (c->width) {
    case 1: return ((const uint8_t *)c->data)[i];
    case 2: return ((const uint16_t *)c->data)[i];
    default: return ((const int32_t *)c->data)[i];
    }
}

static inline long algorithm_send_chunk(const cs_algorithm *a, long i)
{
    return cs_column_get(&a->store.chunk, i);
}
static inline int algorithm_send_src(const cs_algorithm *a, long i)
{
    return cs_column_get(&a->store.src, i);
}
static inline int algorithm_send_dst(const cs_algorithm *a, long i)
{
    return cs_column_get(&a->store.dst, i);
}
static inline int algorithm_send_step(const cs_algorithm *a, long i)
{
    return cs_column_get(&a->store.step, i);
}
static inline cs_op algorithm_send_op(const cs_algorithm *a, long i)
{
    return (a->store.reduce[i >> 3] >> (i & 7)) & 1 ? CS_OP_REDUCE : CS_OP_COPY;
}
static inline double algorithm_send_start_us(const cs_algorithm *a, long i)
{
    return a->store.start.data ? a->store.times[cs_column_get(&a->store.start, i)] : NAN;
}
static inline double algorithm_send_end_us(const cs_algorithm *a, long i)
{
    return a->store.end.data ? a->store.times[cs_column_get(&a->store.end, i)] : NAN;
}
static inline cs_send algorithm_send(const cs_algorithm *a, long i)
{
    cs_send s = {algorithm_send_chunk(a, i), algorithm_send_src(a, i), algorithm_send_dst(a, i),
                 algorithm_send_step(a, i), algorithm_send_op(a, i),
                 algorithm_send_start_us(a, i), algorithm_send_end_us(a, i)};
    return s;
}
/* Hints the columns `fields` (CS_FIELD_* bits) of send i into the cache.
 * For loops that visit sends in a scattered order (by chunk, by link) and
 * know which send comes a few iterations later: with one column per field, a
 * scattered visit costs one cache miss per field read, and prefetching
 * overlaps them.  Name only the fields the loop reads: hardware keeps few
 * misses in flight. */
enum {
    CS_FIELD_CHUNK = 1, CS_FIELD_SRC = 2, CS_FIELD_DST = 4, CS_FIELD_STEP = 8,
    CS_FIELD_OP = 16, CS_FIELD_TIMES = 32,
};

static inline void algorithm_prefetch(const cs_algorithm *a, long i, int fields)
{
    const cs_send_store *st = &a->store;
    if (fields & CS_FIELD_CHUNK)
        __builtin_prefetch((const char *)st->chunk.data + i * st->chunk.width);
    if (fields & CS_FIELD_SRC)
        __builtin_prefetch((const char *)st->src.data + i * st->src.width);
    if (fields & CS_FIELD_DST)
        __builtin_prefetch((const char *)st->dst.data + i * st->dst.width);
    if (fields & CS_FIELD_STEP)
        __builtin_prefetch((const char *)st->step.data + i * st->step.width);
    if (fields & CS_FIELD_OP)
        __builtin_prefetch(st->reduce + (i >> 3));
    if ((fields & CS_FIELD_TIMES) && st->start.data) {
        __builtin_prefetch((const char *)st->start.data + i * st->start.width);
        __builtin_prefetch((const char *)st->end.data + i * st->end.width);
    }
}

/* Overwrites send i (0 <= i < nsends) with *s.  CS_OK; CS_ELIMIT when a value
 * does not fit 32 bits; CS_ENOMEM (the send is then unchanged). */
int algorithm_set_send(cs_algorithm *a, long i, const cs_send *s);
int algorithm_set_send_step(cs_algorithm *a, long i, int step);
/* Drops every send from index n on (0 <= n <= nsends). */
void algorithm_truncate_sends(cs_algorithm *a, long n);

/* Time dictionary (for code that orders timed sends by time without reading
 * doubles): algorithm_send_start_index/end_index give the index of the send's
 * time in a dictionary of algorithm_time_count() distinct times, and
 * algorithm_time_ranks() fills rank[k] with the position of dictionary entry
 * k in ascending time order (NAN last), so comparing ranks compares times.
 * Untimed algorithms have one entry (NAN) and every index is 0. */
static inline uint32_t algorithm_send_start_index(const cs_algorithm *a, long i)
{
    return a->store.start.data ? (uint32_t)cs_column_get(&a->store.start, i) : 0;
}
static inline uint32_t algorithm_send_end_index(const cs_algorithm *a, long i)
{
    return a->store.end.data ? (uint32_t)cs_column_get(&a->store.end, i) : 0;
}
long algorithm_time_count(const cs_algorithm *a);
/* Sends whose start_us and end_us are both finite (O(1)). */
static inline long algorithm_timed_count(const cs_algorithm *a) { return a->store.ntimed; }
/* The time of dictionary entry `index` (< algorithm_time_count(a)). */
static inline double algorithm_time_value(const cs_algorithm *a, uint32_t index)
{
    return a->store.times ? a->store.times[index] : NAN;
}
/* rank has room for algorithm_time_count(a) entries.  CS_OK or CS_ENOMEM. */
int algorithm_time_ranks(const cs_algorithm *a, uint32_t *rank);

/* Bytes the send storage holds (columns, dictionary, hash), for accounting. */
size_t algorithm_storage_bytes(const cs_algorithm *a);

/* An empty algorithm; rounds_per_step all 1 (rounds = steps). */
int algorithm_new(const cs_collective *c, const char *topology_name, int ranks, int chunks,
                  int steps, cs_algorithm **out, cs_error *err);
void algorithm_free(cs_algorithm *a);
int algorithm_clone(const cs_algorithm *a, cs_algorithm **out, cs_error *err);
/* Appends an untimed send.  Grows geometrically; CS_ENOMEM when memory runs
 * out, CS_ELIMIT when chunk does not fit 32 bits (algorithm_new already
 * refuses more than 2^31 - 1 global chunks). */
int algorithm_add_send(cs_algorithm *a, long chunk, int src, int dst, int step, cs_op op);
int algorithm_add_timed_send(cs_algorithm *a, long chunk, int src, int dst, int step,
                             cs_op op, double start_us, double end_us);
/* Appends n untimed copies of one send, the columns widened once for its
 * values: the placeholders of a builder that counts its sends first and then
 * writes each in place (algorithm_put_send), its largest values first so
 * no column widens while it writes.  CS_OK, CS_ELIMIT, CS_ENOMEM. */
int algorithm_add_send_copies(cs_algorithm *a, long n, long chunk, int src, int dst, int step,
                              cs_op op);
/* algorithm_set_send of an untimed send (start_us, end_us NAN), without the
 * time bookkeeping when the algorithm has no time columns (a builder's
 * million-send fill).  Same results and errors as algorithm_set_send. */
int algorithm_put_send(cs_algorithm *a, long i, long chunk, int src, int dst, int step, cs_op op);
/* algorithm_put_send of n untimed sends (send idx[j] := chunk[j], src[j],
 * dst[j], step[j], reduce[j] ? reduce : copy, in j order): one call and one
 * width dispatch per column for a builder's batch.  Same results and errors
 * as the n calls. */
int algorithm_put_sends(cs_algorithm *a, int n, const long *idx, const int32_t *chunk,
                        const int32_t *src, const int32_t *dst, const int32_t *step,
                        const unsigned char *reduce);
/* Makes room for n sends in all, so a builder that knows its count grows the
 * columns once (and to the exact size).  CS_OK or CS_ENOMEM. */
int algorithm_reserve_sends(cs_algorithm *a, long n);
/* Changes the step count (rounds_per_step resized, new entries 1). */
int algorithm_set_steps(cs_algorithm *a, int steps, cs_error *err);
/* Recomputes rounds from rounds_per_step. */
void algorithm_update_rounds(cs_algorithm *a);
/* Sets rounds_per_step[s] to the smallest value the bandwidth constraints allow
 * (max over links and shared sets of ceil(sends / lanes), at least 1).  Used by
 * baselines and by anything that builds schedules without choosing rounds. */
int algorithm_fit_rounds(cs_algorithm *a, const cs_topology *t, cs_error *err);
/* Sorts sends by (step, chunk, src, dst, op, start_us): a canonical order for
 * output and comparison.  CS_OK or CS_ENOMEM (as algorithm_sort_by_time). */
int algorithm_sort_sends(cs_algorithm *a);
/* Every send has finite start_us and end_us (and there is at least one). */
bool algorithm_is_timed(const cs_algorithm *a);
/* Timed schedules: orders the sends by (start_us, end_us, index), the order
 * the verifier and simulator walk them in (so they need no index of their
 * own).  CS_OK (also when already in order), CS_EINVAL when not timed,
 * CS_ENOMEM (the columns are reordered one at a time to save memory, so the
 * sends may then be half reordered: free the algorithm). */
int algorithm_sort_by_time(cs_algorithm *a);
/* Timed schedules: step := the index of the send's start time among the
 * distinct start times, steps := their number, rounds_per_step all 1 (the
 * contract's form for schedules that are not step-synchronous). */
int algorithm_steps_from_start_times(cs_algorithm *a, cs_error *err);

/* ---- JSON ---------------------------------------------------------------------- */

int algorithm_from_json(const json_t *doc, cs_algorithm **out, cs_error *err);
int algorithm_parse(const char *text, size_t len, cs_algorithm **out, cs_error *err);
int algorithm_load_file(const char *path, cs_algorithm **out, cs_error *err);
json_t *algorithm_to_json(const cs_algorithm *a);
/* The same document with "sends": [] (every other member as above): the
 * frame a streaming writer fills with the sends (result_codec.h). */
json_t *algorithm_to_json_frame(const cs_algorithm *a);

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
    char reason[512];          /* why this method ran ("auto: 8 ranks <= smt limit") */
    int nalgs;
    cs_algorithm **algs;       /* owned; ascending steps, descending rounds/chunk */
    int bound_steps;
    double bound_rounds_per_chunk;
    double synth_seconds;
    bool complete;             /* the search proved the frontier (no limit cut it short) */
    json_t *stats;             /* method-specific figures (object, owned), may be NULL */
    /* The topology the Result document was synthesized for, as its top-level
     * "topology" carries it (a builtin name, or a Topology JSON object when
     * the request gave one), read by result_from_json (owned, may be NULL):
     * so a Result is usable on its own (`collsynth codegen RESULT.json`)
     * after the file it came from is gone.  result_to_json leaves it out:
     * the caller writes the canonical request's. */
    json_t *topology;
} cs_result;

int result_new(const char *method, cs_result **out, cs_error *err);
/* Takes ownership of a. */
int result_add(cs_result *r, cs_algorithm *a);
void result_free(cs_result *r);
/* {method, frontier, bounds, synth_seconds, ...}; the caller adds key,
 * topology and collective (it knows the canonical request). */
json_t *result_to_json(const cs_result *r);
/* result_to_json with every algorithm's "sends": [] (algorithm_to_json_frame). */
json_t *result_to_json_frame(const cs_result *r);
int result_from_json(const json_t *doc, cs_result **out, cs_error *err);
/* The topology r carries (r->topology): a builtin name is expanded (never
 * read as a file path: the name comes from a document), a Topology JSON
 * object parsed.  CS_EINVAL, field "topology", when r carries none or it is
 * not usable. */
int result_topology(const cs_result *r, cs_topology **out, cs_error *err);
/* An Algorithm document or a Result (a JSON object with "frontier") read
 * from a file without holding it as a DOM: jansson takes ~0.8 KB per send,
 * so a 1M-send result is 1.7 GB as a DOM and a few MB as columns.  The
 * document without the sends' elements is parsed first, then each
 * algorithm's sends are read back from the file a few thousand at a time
 * (algorithm_load.c).  Exactly one of *alg (an Algorithm) and *res (a
 * Result) is set; *is_result (may be NULL) says which kind the document is,
 * also when it is refused after its JSON parsed.  Validation and errors are algorithm_from_json's and
 * result_from_json's (duplicate keys: the last one counts, as json_loadb
 * with no flags).  Invalid JSON: CS_EINVAL, and jerr (may be NULL) gets the
 * line and jansson's text (line numbers are the file's).  CS_EIO when the
 * file cannot be read; a pipe is read into memory (the sends are read in a
 * second pass). */
int algorithm_doc_load_file(const char *path, cs_algorithm **alg, cs_result **res,
                            bool *is_result, json_error_t *jerr, cs_error *err);
/* The frontier algorithm with the lowest alpha-beta cost for `bytes`. */
const cs_algorithm *result_best_for_size(const cs_result *r, const cs_topology *t,
                                         double bytes);

#endif
