/*
 * store.h - the daemon's durable state behind one interface, two engines:
 * SQLite (default: one file under the data dir, one daemon) and PostgreSQL
 * (a fleet of daemons sharing one database as cache and job table).
 *
 * Tables (the same in both engines):
 *   results(key, request, result, created,       immutable once written
 *           codec, body, file, bytes)
 *   artifacts(key, format, variant, body,        generated documents, immutable
 *             encoding, zbody)
 *   jobs(id, key, request, status, progress, error, owner, attempts,
 *        cancel_requested, time_limit_s, created, updated, heartbeat)
 * A partial unique index on jobs(key) for status queued/running is what
 * coalesces identical requests across the fleet: the second submission of a
 * key finds the active job instead of creating one.
 *
 * Work is claimed with one atomic statement (PostgreSQL: FOR UPDATE SKIP
 * LOCKED; SQLite: a single UPDATE, SQLite has one writer), so each job runs on
 * exactly one daemon.  Running jobs carry a heartbeat; a daemon that dies stops
 * beating and store_job_reap() puts its jobs back in the queue (or fails them
 * after max_attempts), so nothing stays "running" forever.
 *
 * Durability: a result is acknowledged only after the transaction holding it
 * committed (SQLite: WAL with synchronous=FULL, so it survives SIGKILL and
 * power loss; PostgreSQL: synchronous_commit).  Times are wall-clock seconds
 * since the epoch, from the daemon (fleet clocks are assumed NTP-synchronized;
 * leases are tens of seconds).
 *
 * Results (result_codec.h): `result` holds the document without sends (its
 * header: listings and frontier summaries read only this), `body` the
 * encoded result.  SQLite keeps bodies over 1 MiB in files beside the
 * database (DB.bodies/, one file per result, fsync'd with their directory
 * before the row commits; the row is the index), PostgreSQL keeps them in the
 * row (a fleet shares no file system).  Results stored before the codec have
 * codec NULL and their whole JSON document in `result`: they are read as they
 * are ("legacy") and rewritten in the new form by store_result_migrate.
 * Artifacts are stored zstd-compressed (encoding 'zstd', zbody); old ones are
 * plain text in body.
 *
 * Every function is thread-safe: the engines serialize or pool connections.
 */
#ifndef CS_STORE_H
#define CS_STORE_H

#include <stdbool.h>
#include "cache.h"
#include "cs_common.h"

typedef struct cs_store cs_store;

typedef enum cs_job_status {
    CS_JOB_QUEUED = 0,
    CS_JOB_RUNNING,
    CS_JOB_DONE,
    CS_JOB_FAILED,
    CS_JOB_CANCELLED,
    CS_JOB_STATUS_COUNT
} cs_job_status;

const char *job_status_name(cs_job_status s);
int job_status_from_name(const char *name, cs_job_status *out);

/* A job row; strings owned (free with store_job_clear). */
typedef struct cs_store_job {
    char id[40];
    char key[65];
    cs_job_status status;
    char *request;       /* canonical request JSON */
    char *progress;      /* JSON object or NULL */
    char *error;         /* JSON {"code","message","field"} or NULL */
    char owner[64];
    int attempts;
    bool cancel_requested;
    double time_limit_s;
    double created, updated, heartbeat;
} cs_store_job;

void store_job_clear(cs_store_job *j);

typedef enum cs_submit_outcome {
    CS_SUBMIT_CACHED = 0, /* the result exists (store_result_load reads it) */
    CS_SUBMIT_JOINED,     /* an identical job is queued or running: job_id set */
    CS_SUBMIT_CREATED,    /* a new queued job: job_id set */
    CS_SUBMIT_FULL        /* the queue holds max_queued jobs already */
} cs_submit_outcome;

typedef struct cs_submit {
    cs_submit_outcome outcome;
    char job_id[40];
} cs_submit;

/* url: "sqlite:PATH", a path ending in .db/.sqlite, or "postgresql://..."
 * (also "postgres://"); NULL or "" = sqlite at <data_dir>/collsynth.db.
 * pool: connections for PostgreSQL (ignored by SQLite). */
int store_open(const char *url, const char *data_dir, int pool, cs_store **out,
               cs_error *err);
void store_close(cs_store *s);
const char *store_engine(const cs_store *s);   /* "sqlite" or "postgresql" */
/* A cheap round trip: CS_OK when the store answers. */
int store_ping(cs_store *s, cs_error *err);

/* ---- results and artifacts -------------------------------------------------- */

typedef struct cs_result_row {
    char *request;       /* canonical request JSON (STORE_WANT_REQUEST) */
    char *header;        /* the document without sends; legacy: the whole document */
    bool legacy;         /* stored before the codec: header is the JSON result */
    cs_blob *body;       /* the encoded result (STORE_WANT_BODY, not legacy): a
                            reference, mapped from its file or read from the row */
} cs_result_row;

enum { STORE_WANT_REQUEST = 1, STORE_WANT_BODY = 2 };

int store_result_load(cs_store *s, const char *key, unsigned want, cs_result_row *out,
                      bool *found, cs_error *err);
void store_result_row_clear(cs_result_row *r);
int store_result_exists(cs_store *s, const char *key, bool *found, cs_error *err);
/* Stores an encoded result (header: its document without sends) and returns
 * once it is durable.  Idempotent: a key already present is left as it is. */
int store_result_save(cs_store *s, const char *key, const char *request_json,
                      const char *header_json, const void *body, size_t len, cs_error *err);
/* Rewrites a legacy result in the encoded form (no-op when it is not legacy). */
int store_result_migrate(cs_store *s, const char *key, const char *header_json,
                         const void *body, size_t len, cs_error *err);
/* A result in the pre-codec form (its whole JSON document): how old stores
 * hold them; tests make such rows with it. */
int store_result_put_json(cs_store *s, const char *key, const char *request_json,
                          const char *result_json, cs_error *err);
long store_result_count(cs_store *s, cs_error *err);

/* Generated documents, stored compressed: *body is a zstd frame when *zstd,
 * else (artifacts stored before compression) the plain text. */
int store_artifact_get(cs_store *s, const char *key, const char *format, const char *variant,
                       cs_blob **body, bool *zstd, bool *found, cs_error *err);
int store_artifact_put(cs_store *s, const char *key, const char *format, const char *variant,
                       const void *zbody, size_t len, cs_error *err);

/* ---- jobs ------------------------------------------------------------------------ */

/* Cached result, else join the active job of key, else (queue permitting)
 * create one with the given id. */
int store_job_submit(cs_store *s, const char *new_id, const char *key, const char *request_json,
                     double time_limit_s, long max_queued, cs_submit *out, cs_error *err);
/* Atomically moves the oldest queued job to running for owner. */
int store_job_claim(cs_store *s, const char *owner, cs_store_job *out, bool *claimed,
                    cs_error *err);
/* Records progress (may be NULL) and the heartbeat of a job owner runs;
 * *cancel_requested tells whether someone asked to cancel it; *still_owner is
 * false when the job was taken away (reaped), in which case the owner stops. */
int store_job_heartbeat(cs_store *s, const char *id, const char *owner, const char *progress,
                        bool *cancel_requested, bool *still_owner, cs_error *err);
/* Ends a running job: DONE stores result_json (a JSON result, the pre-codec
 * form) under key in the same transaction, or, with result_json NULL, needs
 * the result stored already (store_result_save); FAILED/CANCELLED record
 * error_json.  QUEUED gives it back (graceful shutdown), without counting the
 * attempt. */
int store_job_finish(cs_store *s, const char *id, const char *owner, cs_job_status status,
                     const char *key, const char *request_json, const char *result_json,
                     const char *error_json, cs_error *err);
int store_job_get(cs_store *s, const char *id, cs_store_job *out, bool *found, cs_error *err);
/* Queued -> cancelled at once (*status_after CANCELLED); running -> the
 * cancel_requested flag (*status_after RUNNING); finished jobs unchanged. */
int store_job_cancel(cs_store *s, const char *id, cs_job_status *status_after, bool *found,
                     cs_error *err);
/* Running jobs whose heartbeat is older than lease_s (all running jobs when
 * lease_s < 0, for a single daemon's restart) go back to the queue, or fail
 * with reason "interrupted" once they have had max_attempts. */
int store_job_reap(cs_store *s, double lease_s, int max_attempts, int *requeued, int *failed,
                   cs_error *err);
/* Jobs per status (all daemons). */
int store_job_counts(cs_store *s, long counts[CS_JOB_STATUS_COUNT], cs_error *err);

/* Wall clock, seconds since the epoch. */
double store_wall_time(void);

#endif
