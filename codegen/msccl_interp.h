/*
 * msccl_interp.h - reads MSCCL algorithm XML and executes it on host memory,
 * so a document can be checked without GPUs: the tests run every generated
 * document through it, and it accepts hand-written documents too.
 *
 *     cs_msccl_doc *doc;
 *     if (msccl_doc_parse(text, len, &doc, &err) != CS_OK) ...   // malformed: clear error
 *     cs_msccl_interp_options o;
 *     msccl_interp_options_default(&o);
 *     o.collective = &coll;        // needed for rooted and custom collectives
 *     rc = msccl_interp_check(doc, &o, &stats, &err);  // CS_OK: right result
 *     msccl_doc_free(doc);
 *
 * Parsing: a small XML reader for the subset MSCCL uses (elements, attributes
 * in single or double quotes, the five predefined entities, comments, an
 * optional <?xml ...?> declaration); anything else, mismatched or unclosed
 * tags, text between elements, duplicate or missing attributes, bad numbers,
 * out-of-range peers, channels, offsets and dependencies are CS_EINVAL with
 * the line and what is wrong.
 *
 * Execution follows the runtimes: every rank's thread blocks run their steps
 * in order; a step first waits until thread block depid has set its flag to at
 * least deps (flags are set by steps with hasdep="1", to their step index);
 * sends and receives go through one FIFO per (sender, receiver, channel)
 * holding fifo_capacity chunks (default 1, stricter than any real runtime);
 * a step of cnt chunks streams them one at a time, as the runtimes split it,
 * and both ends must agree on cnt.  The runtimes' connections hold two
 * chunks' worth (NCCL_STEPS 8 slots, a chunk per loop iteration being
 * MSCCL_CHUNKSTEPS 4 of them), so the default of one is stricter; a program
 * that completes with one completes with any larger FIFO (every block runs
 * a fixed sequence, each connection has one sending and one receiving block
 * (the parser refuses two blocks of a rank sending, or receiving, on one
 * peer and channel), and a step that can move stays able to until it does,
 * so a program either completes in every order of execution or in none).
 * Types s, r, rcs, rrs, rrc, rrcs, cpy, re, nop; reductions are sums on doubles
 * or wrapping sums on int64.  When no thread block can move and some are not
 * finished, the run stops with CS_EVERIFY and a description of the deadlock:
 * each blocked block waits for exactly one other (the block whose flag it
 * needs, the block that sends it the message it needs, or the block that
 * must receive before it has room to send), and following those waits from
 * a blocked block ends in a cycle, which the message spells out ("cycle of
 * 2: rank 0 tb 0 step 1 (s) waits for room to send to rank 1 -> rank 1 tb 0
 * step 1 (s) waits for room to send to rank 0 -> rank 0 tb 0") and the
 * stats list; or at a block that has finished (a message never sent).
 *
 * The check fills every input with distinct values (outputs and scratch with
 * a poison value out of place), runs, and compares every output chunk with
 * what the collective must produce in NCCL's buffer layout.
 */
#ifndef CS_MSCCL_INTERP_H
#define CS_MSCCL_INTERP_H

#include "collective.h"

typedef struct cs_msccl_doc cs_msccl_doc;

typedef enum cs_interp_type { CS_INTERP_DOUBLE = 0, CS_INTERP_INT64 } cs_interp_type;

typedef struct cs_msccl_interp_options {
    cs_interp_type type;      /* default double */
    int elems_per_chunk;      /* elements per XML chunk (default 3) */
    int fifo_capacity;        /* chunks a connection holds (default 1) */
    bool inplace;             /* run as an in-place call (the document must allow it) */
    const cs_collective *collective; /* kind and root; NULL: from coll (unrooted kinds only) */
} cs_msccl_interp_options;

/* A blocked thread block: rank, block id, index of the step it is at. */
typedef struct cs_interp_wait {
    int rank, tb, step;
} cs_interp_wait;

#define CS_INTERP_CYCLE_MAX 16

typedef struct cs_msccl_interp_stats {
    long steps_executed;
    long messages;
    int max_fifo;             /* largest FIFO occupancy seen */
    long sweeps;              /* scheduler rounds */
    /* After a deadlock: the blocks of the wait cycle found, each waiting for
     * the next and the last for the first (cycle_len of them, the first
     * CS_INTERP_CYCLE_MAX listed); 0 when there is none. */
    int cycle_len;
    cs_interp_wait cycle[CS_INTERP_CYCLE_MAX];
} cs_msccl_interp_stats;

int msccl_doc_parse(const char *text, size_t len, cs_msccl_doc **out, cs_error *err);
/* The same for a slice (msccl_xml_generate_ranks): <gpu> elements may be
 * absent; those present are checked as in a full document.  A slice parses
 * and answers the header queries, but only a document with every rank runs. */
int msccl_doc_parse_slice(const char *text, size_t len, cs_msccl_doc **out, cs_error *err);
bool msccl_doc_has_gpu(const cs_msccl_doc *doc, int rank);
void msccl_doc_free(cs_msccl_doc *doc);

/* Header queries. */
int msccl_doc_ngpus(const cs_msccl_doc *doc);
int msccl_doc_nchannels(const cs_msccl_doc *doc);
int msccl_doc_nchunksperloop(const cs_msccl_doc *doc);
const char *msccl_doc_coll(const cs_msccl_doc *doc);
bool msccl_doc_inplace(const cs_msccl_doc *doc);
bool msccl_doc_outofplace(const cs_msccl_doc *doc);
long long msccl_doc_min_bytes(const cs_msccl_doc *doc);
long long msccl_doc_max_bytes(const cs_msccl_doc *doc);   /* -1 when absent */
/* Per rank: thread blocks and the largest step count of one of them (-1 for
 * a rank the document does not hold). */
int msccl_doc_rank_tbs(const cs_msccl_doc *doc, int rank);
int msccl_doc_rank_max_steps(const cs_msccl_doc *doc, int rank);

void msccl_interp_options_default(cs_msccl_interp_options *opt);
/* Runs the document and checks the collective's result.  CS_OK when right;
 * CS_EVERIFY with the first wrong value or the deadlock; CS_EINVAL when the
 * options do not fit the document.  stats may be NULL. */
int msccl_interp_check(const cs_msccl_doc *doc, const cs_msccl_interp_options *opt,
                       cs_msccl_interp_stats *stats, cs_error *err);

#endif
