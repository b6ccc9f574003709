/*
 * msccl_xml.h - lowers a verified algorithm (SMT, TACOS or baseline) to the
 * MSCCL algorithm XML that the two MSCCL runtimes load, so a training job can
 * run it through NCCL/RCCL without new kernels.
 *
 *     cs_msccl_options o;
 *     msccl_options_default(&o);              // runtime auto, Simple, all sizes
 *     o.min_bytes = 0; o.max_bytes = 1 << 20; // the frontier's crossover sizes
 *     char *xml; size_t len;
 *     if (msccl_xml_generate(alg, topo, &o, &xml, &len, &err) == CS_OK) ...; free(xml);
 *
 * The document: <algo> with ngpus, nchunksperloop, nchannels, proto, coll,
 * inplace, outofplace, minBytes, maxBytes, redop; one <gpu> per rank with
 * i_chunks/o_chunks/s_chunks; one <tb> per (peer, channel) of that rank (send
 * and receive peer the same rank, ids consecutive from 0) plus one local
 * block for final copies; <step>s in schedule order with s = 0, 1, ...
 * Types emitted: s (send), r (receive), rrc (receive, reduce with a local
 * slot, store), cpy (local copy) and nop (extra dependencies).  A step that
 * needs data produced (or still read) by another thread block of the same
 * rank names it with depid/deps; several such blocks become nops in front of
 * the step, each carrying one dependency, the step itself the last; every
 * step depended upon has hasdep="1".  Consecutive messages of one connection
 * in the same step between contiguous slots move as one step (cnt > 1), as do
 * runs of contiguous final copies.  Links with several lanes get several
 * channels.
 *
 * Long schedules: where a thread block would exceed the runtime's steps, each
 * lane's messages are spread over more channels (within the runtime's
 * channels, thread blocks and blocks per channel); where that is not enough,
 * contiguous chunks also merge across steps (cnt up to 71); what still does
 * not fit is CS_ELIMIT naming the limit, the rank and the value, and pointing
 * to the hierarchical method.  docs/codegen.md has the rules.
 *
 * Buffers use NCCL's layout (allgather output = the ranks' inputs in rank
 * order, reducescatter input = one block per destination rank, ...).  For
 * allgather, reducescatter, allreduce, broadcast and reduce the document is
 * correct both in place and out of place (inplace="1" outofplace="1"): see
 * codegen_plan.h.  Allreduce (reducescatter + allgather) is one document.
 *
 * Runtimes (limits read from their parsers, shared/reference/msccl-xml.md):
 *  - CS_MSCCL_RUNTIME_MSCCL: the NCCL fork (MSCCL_XML_FILES).  coll names
 *    reduce_scatter and custom (gather, scatter and custom collectives become
 *    "custom"); at most 216 thread blocks, channels < 32, 32 send and 32
 *    receive blocks per channel, step s <= 255, cnt <= 71, fewer than 4096
 *    XML elements per rank.
 *  - CS_MSCCL_RUNTIME_EXECUTOR: msccl-executor (MSCCL_ALGO_DIR).  coll names
 *    reducescatter, gather, scatter; s < 64, thread blocks <= 1024, channels
 *    <= 32; no custom collectives (CS_EUNSUPPORTED).
 *  - Either, on a GPU with fewer SMs than an A100 (opt->gpu_sms): at most 2
 *    thread blocks per SM per rank.
 *  - CS_MSCCL_RUNTIME_AUTO (default): a form both accept: the stricter limit
 *    of each; the collective names both know (allreduce, allgather, reduce,
 *    broadcast, alltoall); for reducescatter, gather and scatter no common
 *    name exists and the executor's name is used.
 * A document that cannot fit the runtime's limits is CS_ELIMIT with a message
 * naming the limit, the value and the rank; msccl_check.h checks a document
 * against them independently.
 */
#ifndef CS_MSCCL_XML_H
#define CS_MSCCL_XML_H

#include "algorithm.h"

typedef enum cs_msccl_runtime {
    CS_MSCCL_RUNTIME_AUTO = 0,
    CS_MSCCL_RUNTIME_MSCCL,
    CS_MSCCL_RUNTIME_EXECUTOR
} cs_msccl_runtime;

typedef struct cs_msccl_options {
    cs_msccl_runtime runtime;
    const char *name;       /* NULL: "collsynth-<method>-<kind>-<topology>" */
    const char *proto;      /* NULL: "Simple"; or "LL", "LL128" */
    long long min_bytes;    /* >= 0 (default 0) */
    long long max_bytes;    /* 0: no upper limit (default) */
    bool single_chunk_steps; /* true: never merge consecutive chunks into one step */
    long window_sends;      /* msccl_xml_write_ranks: sends a window of ranks and their
                               peers may touch, counted per endpoint (0: 2^19, a plan of
                               some tens of MB).  Every window plans its ranks' peers too,
                               so where ranks have many peers (clusters: a NIC talks to
                               every node) small windows redo most of the work: the whole
                               document of a 1M-send dgxh100:128 allgather takes ~35 s at
                               2^19 and ~5 s at 2^22 (one window: its plan is about two
                               88-byte operations and ~100 bytes of lowering
                               state per send, ~330 MB more peak). */
    int gpu_sms;            /* the target GPU's SMs (0: no limit beyond the runtime's own).
                               All of a rank's thread blocks must be resident at once (they
                               wait on each other's progress); the NCCL fork's 216 is its
                               authors' 2 blocks per SM of an A100 (108 SMs).  N > 0 caps
                               every runtime at 2N blocks per rank (V100: 80 SMs, 160),
                               never above the runtime's own limit; 1..4096, else
                               CS_EINVAL.  A schedule that does not fit is CS_ELIMIT
                               naming the SMs. */
    int limit_gpus;         /* msccl_xml_write_ranks: <gpu> elements the per-rank element
                               limit counts (0: those written).  1 checks every rank as a
                               one-rank slice; a caller cutting wider slices from the
                               result checks 1 + width + the rank's <tb> and <step>
                               elements < 4096 itself (the daemon does). */
} cs_msccl_options;

void msccl_options_default(cs_msccl_options *opt);
/* "auto", "msccl", "msccl-executor"; CS_EINVAL listing them otherwise. */
int msccl_runtime_from_name(const char *name, cs_msccl_runtime *out, cs_error *err);
const char *msccl_runtime_name(cs_msccl_runtime runtime);
/* The coll attribute for a kind under a runtime; NULL when it has none. */
const char *msccl_coll_name(cs_coll_kind kind, cs_msccl_runtime runtime);

/* t may be NULL (then every link is taken to have one lane: one channel).
 * On success *out is a malloc'd NUL-terminated document (len without NUL,
 * len may be NULL). */
int msccl_xml_generate(const cs_algorithm *a, const cs_topology *t,
                       const cs_msccl_options *opt, char **out, size_t *len, cs_error *err);

/* Per-rank slices, for streaming and for each node fetching only its ranks.
 *
 * A slice of ranks rank_lo..rank_hi is the same <algo> element (every
 * attribute identical to the full document's, ngpus unchanged) holding only
 * those ranks' <gpu> elements, each byte-identical to its part of the full
 * document; 0..ranks-1 is the full document, byte-identical to
 * msccl_xml_generate's.  Both runtimes parse only their own rank's <gpu>, so
 * a rank loads its slice exactly as it loads the full document.  Slices of
 * different widths can be concatenated (the <gpu> elements between the
 * header and "</algo>") into the full document.
 *
 * write is called with consecutive pieces of the document (the header,
 * then one <gpu> element at a time, then "</algo>
"); it returns CS_OK or
 * an error code, which stops the generation and is returned.  Memory is
 * bounded by what the ranks being written need: one pass over all sends
 * (O(ranks + links) memory for sends in canonical order) decides what every
 * rank shares; then windows of ranks are planned from the sends incident to
 * them and their peers, written and freed.  Limits are checked for every
 * rank before anything is written where they follow from per-link counts
 * (thread blocks, channels, blocks per channel); the step and element
 * counts of each rank are exact only once its window is laid out, so an
 * error can arrive after earlier windows were written: on error, discard
 * what was written.  Thread-safe (no global state). */
typedef int (*cs_write_fn)(void *ctx, const char *data, size_t len);   /* CS_OK or an error */

int msccl_xml_write_ranks(const cs_algorithm *a, const cs_topology *t, const cs_msccl_options *opt,
                          int rank_lo, int rank_hi, cs_write_fn write, void *ctx, cs_error *err);
/* The same into a malloc'd NUL-terminated string (len may be NULL). */
int msccl_xml_generate_ranks(const cs_algorithm *a, const cs_topology *t,
                             const cs_msccl_options *opt, int rank_lo, int rank_hi, char **out,
                             size_t *len, cs_error *err);

/* Size ranges for a frontier: where each algorithm of r has the lowest
 * alpha-beta cost on t (algorithm_cost_us; ties go to the earlier one, as in
 * result_best_for_size).  out[i] gets [min_bytes, max_bytes) with max_bytes
 * 0 for "no upper limit", and best = false (both 0) for an algorithm that is
 * never the cheapest.  Bytes are the cost model's per-rank share.  Set them
 * as minBytes/maxBytes to load one document per frontier point. */
typedef struct cs_byte_range {
    long long min_bytes, max_bytes;
    bool best;
} cs_byte_range;

int msccl_frontier_ranges(const cs_result *r, const cs_topology *t, cs_byte_range *out,
                          cs_error *err);

/* The old runtime loads at most this many documents (MSCCL_XML_FILES). */
#define CS_MSCCL_MAX_ALGORITHMS 4

/* The same with at most max_docs algorithms marked best (max_docs <= 0: no
 * limit).  When more frontier points are the cheapest somewhere, the
 * max_docs of them whose worst slowdown over all sizes (cost of their
 * cheapest / cost of the frontier's cheapest) is smallest are kept, and the
 * ranges are computed among them, so every size still has a document.
 * *dropped (may be NULL) gets how many were left out. */
int msccl_frontier_ranges_limited(const cs_result *r, const cs_topology *t, int max_docs,
                                  cs_byte_range *out, int *dropped, cs_error *err);

#endif
