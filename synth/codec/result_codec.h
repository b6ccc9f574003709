/*
 * result_codec.h - a synthesis result in a compact binary form, and its
 * external documents written from that form by streaming, with bounded
 * memory, whatever the number of sends.
 *
 * Why: a 4096-rank allgather holds about 16.7 million sends.  As a JSON DOM
 * that is gigabytes; as JSON text about 1.7 GB.  The daemon stores results in
 * this form instead (tens of bytes per send before compression, a few after),
 * and writes the JSON document (CONTRACT.md section 4, byte for byte what
 * json_dumps(synth_result_to_json(...), JSON_COMPACT | CS_JSON_REAL) gives)
 * from it a block at a time.
 *
 * The encoded form ("CSRC" version 1; all integers little-endian):
 *
 *   "CSRC" u32 version u64 0                     fixed prefix
 *   header                                       the result document with every
 *                                                frontier[i].sends empty (JSON text)
 *   data                                         zstd frames (below)
 *   tables, directory                            where each frame is, its CRC32
 *   footer (40 bytes)                            header and directory offsets,
 *                                                lengths and CRC32s, "CSRC"
 *
 * Per algorithm the sends live twice:
 *  - in order blocks: consecutive runs of CS_CODEC_BLOCK_SENDS sends in the
 *    algorithm's own order, column by column (step, src, dst - src, chunk as
 *    zigzag varint deltas; op as bits; start_us/end_us as XOR deltas of their
 *    IEEE bits, byte-transposed), one zstd frame per block: the full document
 *    streams block by block;
 *  - in rank groups: consecutive rank ranges, each frame holding the sends
 *    that any rank of the range takes part in (src or dst), with their index
 *    in the algorithm: a slice for a few ranks reads only their groups.
 *    Switch nodes (algorithm.h switch_nodes, numbered after the ranks) are
 *    grouped like ranks; the directory entry keeps their count in bytes
 *    36..39, zero in blobs written before they existed.
 * Every frame carries a CRC32, so a damaged blob is refused with an error that
 * says where, never decoded into wrong sends.
 *
 * Header: the result document without sends is the part everyone reads
 * (listings, ?size= selection, the frontier summary); it is plain JSON at a
 * known place and result_codec_decode_summary() parses only it.
 *
 * Encoding a result:
 *
 *     json_t *skeleton = synth_result_to_json_frame(req, res);  // the document, sends []
 *     void *blob; size_t len;
 *     result_codec_encode(res, skeleton, &blob, &len, &err);
 *
 * Writing the document (the daemon's streaming responses, the CLI's -o):
 *
 *     cs_codec_view *v;  result_codec_open(blob, len, &v, &err);     // borrows blob
 *     cs_json_view jv = CS_JSON_VIEW_FULL;  jv.rank_lo = jv.rank_hi = 5;  // a slice
 *     cs_result_writer *w;  result_writer_open_encoded(v, &jv, &w, &err);
 *     while ((n = result_writer_read(w, buf, sizeof buf, &err)) > 0) send(buf, n);
 *
 * Sends are read and created only through algorithm.h's accessors.
 * Thread safety: a view is read-only and may be shared; cursors and writers
 * belong to one thread at a time.
 */
#ifndef CS_RESULT_CODEC_H
#define CS_RESULT_CODEC_H

#include <jansson.h>
#include <stdio.h>
#include "algorithm.h"

#define CS_CODEC_VERSION 1
#define CS_CODEC_BLOCK_SENDS 65536
/* A rank group closes once its ranks take part in this many sends. */
#define CS_CODEC_GROUP_SENDS 32768

/* ---- encoding and decoding ----------------------------------------------------- */

/* skeleton: the result document whose "frontier" holds res->nalgs algorithm
 * objects with "sends": [] (result_to_json_frame, synth_result_to_json_frame:
 * the members computed from the whole result, the sends left out).  *out is
 * malloc'd. */
int result_codec_encode(const cs_result *res, const json_t *skeleton, void **out,
                        size_t *len, cs_error *err);

/* True when data starts like an encoded result (old results are JSON text). */
bool result_codec_is_encoded(const void *data, size_t len);

typedef struct cs_codec_view cs_codec_view;

/* Checks the prefix, footer, header and directory (not the frames: those are
 * checked as they are read) and indexes data, which must outlive the view. */
int result_codec_open(const void *data, size_t len, cs_codec_view **out, cs_error *err);
void result_codec_close(cs_codec_view *v);
/* The document without sends (compact JSON, not NUL-terminated). */
const char *result_codec_header(const cs_codec_view *v, size_t *len);
int result_codec_nalgs(const cs_codec_view *v);
long result_codec_nsends(const cs_codec_view *v, int alg);
int result_codec_ranks(const cs_codec_view *v, int alg);

/* The result with every send (or, summary, with none: the header only). */
int result_codec_decode(const cs_codec_view *v, cs_result **out, cs_error *err);
int result_codec_decode_summary(const void *data, size_t len, cs_result **out, cs_error *err);
/* Frontier entry alg; with rank_lo >= 0 only the sends that ranks
 * rank_lo..rank_hi take part in (in the algorithm's order). */
int result_codec_decode_algorithm(const cs_codec_view *v, int alg, int rank_lo, int rank_hi,
                                  cs_algorithm **out, cs_error *err);

/* Reading sends a batch at a time: all of an algorithm's, or (rank_lo >= 0)
 * those with src or dst in [rank_lo, rank_hi], in the algorithm's order. */
typedef struct cs_send_cursor cs_send_cursor;
int send_cursor_open(const cs_codec_view *v, int alg, int rank_lo, int rank_hi,
                     cs_send_cursor **out, cs_error *err);
/* Up to max sends into out; *n == 0 at the end. */
int send_cursor_next(cs_send_cursor *c, cs_send *out, size_t max, size_t *n, cs_error *err);
void send_cursor_free(cs_send_cursor *c);

/* ---- the JSON document, streamed ------------------------------------------------- */

typedef struct cs_json_view {
    int alg;              /* -1: the whole frontier; else only frontier[alg] */
    int rank_lo, rank_hi; /* rank_lo < 0: every send; else a slice (sends with src or
                             dst in [rank_lo, rank_hi]) */
    bool summary;         /* each algorithm's "sends" replaced by "nsends": N */
    const char *extra;    /* members appended to the top-level object, compact JSON
                             without braces ("\"selected\":{...}"), or NULL */
} cs_json_view;

#define CS_JSON_VIEW_FULL ((cs_json_view){.alg = -1, .rank_lo = -1, .rank_hi = -1})

typedef struct cs_result_writer cs_result_writer;

/* From an encoded result; the view must outlive the writer. */
int result_writer_open_encoded(const cs_codec_view *v, const cs_json_view *jv,
                               cs_result_writer **out, cs_error *err);
/* From a result in memory and its document without sends
 * (result_to_json_frame); res and skeleton must outlive the writer. */
int result_writer_open_memory(const cs_result *res, const json_t *skeleton,
                              const cs_json_view *jv, cs_result_writer **out, cs_error *err);
/* One algorithm's own document (algorithm_to_json's form) from memory;
 * skeleton: that document without sends (algorithm_to_json_frame).  a and
 * skeleton must outlive the writer. */
int result_writer_open_algorithm(const cs_algorithm *a, const json_t *skeleton,
                                 cs_result_writer **out, cs_error *err);
/* Up to cap bytes of the document into buf: the count, 0 at the end, or a
 * negative CS_E* (err filled). */
long result_writer_read(cs_result_writer *w, char *buf, size_t cap, cs_error *err);
/* The rest of the document into f. */
int result_writer_to_file(cs_result_writer *w, FILE *f, cs_error *err);
void result_writer_free(cs_result_writer *w);

/* The document of a view as one malloc'd NUL-terminated string (small results). */
int result_writer_dump(cs_result_writer *w, char **out, size_t *len, cs_error *err);

#endif
