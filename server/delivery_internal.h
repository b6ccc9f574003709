/*
 * delivery_internal.h - how the daemon stores results and hands out their
 * representations (private to server/): the result document (whole, one
 * frontier entry, a rank slice, a summary), MSCCL XML and CUDA, each in the
 * content coding the client accepts, from memory when it can.
 *
 * Results are stored encoded (result_codec.h).  A result in use is held in
 * memory as an `rdoc` (its header, the encoded body, the parsed summary and,
 * on demand, its topology), cached by key in the daemon's byte-bounded LRU.
 * A representation is identified by its key, format and variant (view,
 * slice, runtime, ...), and each of those by content coding: its bytes are
 * cached in memory when they are small enough, generated documents are also
 * kept in the store (artifacts, zstd-compressed), and everything else is
 * streamed from the encoded result a block at a time (MHD's callback
 * responses), compressed on the way when asked.
 *
 * Every representation has a strong ETag derived from what identifies it, so
 * If-None-Match is answered with 304 before anything is loaded.
 */
#ifndef CS_DELIVERY_INTERNAL_H
#define CS_DELIVERY_INTERNAL_H

#include "server_internal.h"
#include "synthesize.h"

/* ---- content codings (encoding.c) ------------------------------------------------------ */

typedef enum { ENC_IDENTITY = 0, ENC_GZIP, ENC_ZSTD, ENC_COUNT } cs_encoding;

const char *encoding_name(cs_encoding e);
/* The coding to answer with for an Accept-Encoding header (NULL: identity). */
cs_encoding encoding_choose(const char *accept_encoding);

/* A pull source: up to cap bytes into buf; the count, 0 at the end, or < 0. */
typedef long (*source_fn)(void *ctx, char *buf, size_t cap, cs_error *err);

typedef struct cs_encoder cs_encoder;
int encoder_new(cs_encoding kind, source_fn src, void *src_ctx, cs_encoder **out,
                cs_error *err);
long encoder_read(cs_encoder *e, char *buf, size_t cap, cs_error *err);
void encoder_free(cs_encoder *e);

/* A zstd frame decompressed as a source (data must outlive it). */
typedef struct zsource zsource;
int zsource_new(const void *data, size_t len, zsource **out, cs_error *err);
long zsource_read(void *ctx, char *buf, size_t cap, cs_error *err);
void zsource_free(zsource *z);

/* Everything a source gives, in one malloc'd NUL-terminated buffer. */
int drain_source(source_fn src, void *ctx, char **out, size_t *len, cs_error *err);
int encode_buffer(cs_encoding kind, const void *data, size_t len, char **out, size_t *olen,
                  cs_error *err);
int zstd_decode_buffer(const void *data, size_t len, char **out, size_t *olen, cs_error *err);

/* ---- storing results (delivery.c) -------------------------------------------------------- */

/* Encodes res and stores it durably under req->key (the worker's last step
 * before the job is done), then keeps it in the memory cache. */
int delivery_save_result(cs_store *store, cs_cache *cache, const cs_synth_request *req,
                         const cs_result *res, cs_error *err);

/* The same, with extra top-level members (an object, may be NULL) set in the
 * stored result document: "relabelled_from" for isomorphism hits. */
int delivery_save_result_with(cs_store *store, cs_cache *cache, const cs_synth_request *req,
                              const cs_result *res, const json_t *extra, cs_error *err);
/* The same with the document skeleton given (result_to_json_frame plus
 * what synth_result_to_json_frame adds), which it consumes. */
int delivery_save_result_frame(cs_store *store, cs_cache *cache, const cs_synth_request *req,
                               const cs_result *res, json_t *skel, cs_error *err);
/* The whole stored result of key, sends included (memory first, else the
 * store; *found false when neither has it), and, when header is not NULL,
 * its stored document without sends (NULL if unreadable).  The caller frees
 * *out and *header. */
int delivery_load_result(cs_store *store, cs_cache *cache, const char *key, cs_result **out,
                         json_t **header, bool *found, cs_error *err);

/* Refusals remembered in memory, so a request refused once is refused again
 * without the work that found the problem: kind 'B' by the SHA-256 of the
 * raw POST body (no parsing at all), 'K' by result key (a synthesis that
 * failed for a reason that does not change: too large, unsupported, proven
 * impossible).  error_json is the {"code","message","field"} object. */
void delivery_remember_refusal(cs_cache *cache, char kind, const char *id, int cs_code,
                               const char *error_json);
/* The remembered refusal (a reference; *cs_code, *error_json point into it). */
cs_blob *delivery_refusal(cs_cache *cache, char kind, const char *id, int *cs_code,
                          const char **error_json);

/* ---- answering (delivery.c) ---------------------------------------------------------------- */

/* GET /v1/results/{key}. */
enum MHD_Result delivery_result_get(req_state *rs, const char *key);
/* The stored result of rs->key as the answer to a POST (status 200), in the
 * view the request's query asks for (?view=summary).  *missing when the
 * store has no result for the key (nothing queued then). */
enum MHD_Result delivery_respond_result(req_state *rs, bool *missing);
/* A job document (compact JSON object text) with the stored result of key
 * spliced in as "result" (streamed when large).  Steals job_text. */
enum MHD_Result delivery_respond_job(req_state *rs, char *job_text, const char *key);
/* Whether the result of key is stored (memory first). */
bool delivery_result_known(cs_server *s, const char *key);
/* Whether the result of key is in the memory cache (no store access). */
bool delivery_result_in_memory(cs_server *s, const char *key);

#endif
