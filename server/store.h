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
 *   iso_index(iso_key, key, labelling, created)   requests by isomorphism
 *        class (synth/iso/iso.h): the result key of every request of the
 *        class that was submitted, with its canonical labelling
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

/* Why a running job was asked to stop. */
typedef enum cs_cancel_kind {
    CS_CANCEL_NONE = 0,
    CS_CANCEL_EXPLICIT = 1,   /* cancelled for everyone (DELETE ...?all=true) */
    CS_CANCEL_ABANDONED = 2   /* its last waiter detached; undone if someone joins */
} cs_cancel_kind;

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
    int cancel_requested;  /* cs_cancel_kind */
    int waiters;           /* handles still attached */
    double time_limit_s;
    double created, updated, heartbeat;
    char handle[40];       /* store_job_get by a handle: that handle; else "" */
    bool detached;         /* ... and whether it was detached */
} cs_store_job;

void store_job_clear(cs_store_job *j);

/* What the lists show of a job or a result without reading its request or
 * its result document. */
typedef struct cs_summary {
    char topology[128];    /* the topology's name (CS_NAME_MAX) */
    char collective[32];   /* the collective's kind */
    int root;              /* rooted kinds: the root; else -1 */
    char method[32];       /* jobs: the method asked for; results: the one that ran */
    int ranks;
    int nalgs;             /* results: algorithms on the frontier */
} cs_summary;

typedef enum cs_submit_outcome {
    CS_SUBMIT_CACHED = 0, /* the result exists (store_result_load reads it) */
    CS_SUBMIT_JOINED,     /* an identical job is queued or running: job_id set */
    CS_SUBMIT_CREATED,    /* a new queued job: job_id set */
    CS_SUBMIT_FULL        /* the queue holds max_queued jobs already */
} cs_submit_outcome;

typedef struct cs_submit {
    cs_submit_outcome outcome;
    char job_id[40];
    char handle_id[40];  /* JOINED, CREATED: this submission's own handle on the job */
} cs_submit;

/* A fresh random id (32 hex digits, 128 bits): jobs, handles, instances. */
void store_new_id(char out[40]);

/* url: "sqlite:PATH", a path ending in .db/.sqlite, or "postgresql://..."
 * (also "postgres://"); NULL or "" = sqlite at <data_dir>/collsynth.db.
 * pool: connections for PostgreSQL (ignored by SQLite). */
int store_open(const char *url, const char *data_dir, int pool, cs_store **out,
               cs_error *err);
void store_close(cs_store *s);
const char *store_engine(const cs_store *s);   /* "sqlite" or "postgresql" */
/* Makes this process the only daemon of a SQLite store (flock on DB.lock,
 * held until store_close): *exclusive is then true, and running jobs found
 * in the store were left by a daemon that is gone, so they can be re-queued
 * at once.  A second daemon gets CS_EIO naming the holder.  PostgreSQL is
 * shared by a fleet: *exclusive is false and leases decide. */
int store_lock_exclusive(cs_store *s, const char *owner, bool *exclusive, cs_error *err);
/* A cheap round trip: CS_OK when the store answers. */
int store_ping(cs_store *s, cs_error *err);
/* Whether a write to the store (a statement, a commit or a result body
 * file) has failed since it was opened; *ago_s gets how long ago the latest
 * did, msg (n bytes) its error; either may be NULL.  Writes never fail in
 * normal operation (every insert is ON CONFLICT DO NOTHING), so one that did
 * means a full disk, a read-only file system or a lost database; a full
 * disk fails the large writes (results) while small ones and reads (and so
 * store_ping) may still succeed. */
bool store_write_failure(cs_store *s, double *ago_s, char *msg, size_t n);

/* ---- results and artifacts -------------------------------------------------- */

typedef struct cs_stored_result {
    char *request;       /* canonical request JSON (STORE_WANT_REQUEST) */
    char *header;        /* the document without sends; legacy: the whole document */
    bool legacy;         /* stored before the codec: header is the JSON result */
    cs_blob *body;       /* the encoded result (STORE_WANT_BODY, not legacy): a
                            reference, mapped from its file or read from the row */
} cs_stored_result;

enum { STORE_WANT_REQUEST = 1, STORE_WANT_BODY = 2 };

int store_result_load(cs_store *s, const char *key, unsigned want, cs_stored_result *out,
                      bool *found, cs_error *err);
void store_result_clear(cs_stored_result *r);
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
 * create one with the given id.  Joining or creating attaches a new handle
 * (out->handle_id): every submitter holds its own, and the job counts them
 * (waiters).  Joining a job whose last waiter just left (cancel of kind
 * ABANDONED) withdraws that cancel. */
int store_job_submit(cs_store *s, const char *new_id, const char *key, const char *request_json,
                     const cs_summary *summary, double time_limit_s, long max_queued,
                     cs_submit *out, cs_error *err);
/* Atomically moves the oldest queued job to running for owner. */
int store_job_claim(cs_store *s, const char *owner, cs_store_job *out, bool *claimed,
                    cs_error *err);
/* Records progress (may be NULL) and the heartbeat of a job owner runs;
 * *cancel_requested (cs_cancel_kind) tells whether it should stop and why;
 * *still_owner is false when the job was taken away (reaped), in which case
 * the owner stops. */
int store_job_heartbeat(cs_store *s, const char *id, const char *owner, const char *progress,
                        int *cancel_requested, bool *still_owner, cs_error *err);
/* Ends a running job: DONE stores result_json (a JSON result, the pre-codec
 * form) under key in the same transaction, or, with result_json NULL, needs
 * the result stored already (store_result_save); FAILED/CANCELLED record
 * error_json.  QUEUED gives it back (graceful shutdown), without counting the
 * attempt.  CANCELLED of a job that was abandoned but has waiters again
 * (someone joined meanwhile) gives it back to the queue instead. */
int store_job_finish(cs_store *s, const char *id, const char *owner, cs_job_status status,
                     const char *key, const char *request_json, const char *result_json,
                     const char *error_json, cs_error *err);
/* id: a job id, or a handle (then out->handle and out->detached are set). */
int store_job_get(cs_store *s, const char *id, cs_store_job *out, bool *found, cs_error *err);

typedef enum cs_detach_outcome {
    CS_DETACH_NOT_FOUND = 0, /* no such handle */
    CS_DETACH_ALREADY,       /* detached before; status says how the job is */
    CS_DETACH_LEFT,          /* detached; `waiters` others still wait, the job goes on */
    CS_DETACH_CANCELLED,     /* the last waiter of a queued job: cancelled */
    CS_DETACH_STOPPING,      /* the last waiter of a running job: its daemon stops it */
    CS_DETACH_FINISHED       /* the job had ended (status); nothing changed */
} cs_detach_outcome;

typedef struct cs_detach {
    cs_detach_outcome outcome;
    char job_id[40];
    int waiters;
    cs_job_status status;
} cs_detach;

/* Detaches a handle from its job, in one transaction with the job's waiter
 * count, so that across a fleet the job stops exactly when its last waiter
 * left and no one joined. */
int store_job_detach(cs_store *s, const char *handle, cs_detach *out, cs_error *err);
/* The explicit cancel, for every waiter (id: a job id or any of its handles).
 * Queued -> cancelled at once (*status_after CANCELLED); running -> a cancel
 * request of kind EXPLICIT (*status_after RUNNING); finished jobs unchanged. */
int store_job_cancel(cs_store *s, const char *id, cs_job_status *status_after, bool *found,
                     cs_error *err);
/* Running jobs whose heartbeat is older than lease_s go back to the queue,
 * or fail with reason "interrupted" once they have had max_attempts.
 * lease_s < 0 takes every running job: only for the holder of
 * store_lock_exclusive at its start, when no other daemon can be running. */
int store_job_reap(cs_store *s, double lease_s, int max_attempts, int *requeued, int *failed,
                   cs_error *err);
/* Jobs per status (all daemons). */
int store_job_counts(cs_store *s, long counts[CS_JOB_STATUS_COUNT], cs_error *err);

/* ---- the isomorphism index ------------------------------------------------------------
 * One row per (iso key, request key): written when a request of the class is
 * queued or its result stored, so a submission finds both stored results it
 * can relabel and jobs of its class still running (to wait for rather than
 * synthesize again).  Stores made before the index get the table at open;
 * their results join the index when their request is submitted again. */

typedef struct cs_iso_row {
    char key[65];
    char *labelling;       /* iso_labelling_to_text form, owned */
    double created;
    bool stored;           /* the result of key is stored */
    int job_status;        /* an active job of key: CS_JOB_QUEUED/RUNNING; else -1 */
} cs_iso_row;

/* Idempotent: a row already present is left as it is. */
int store_iso_put(cs_store *s, const char *iso_key, const char *key, const char *labelling,
                  cs_error *err);
/* Up to max rows of iso_key, oldest first (ties by key): *rows malloc'ed. */
int store_iso_lookup(cs_store *s, const char *iso_key, int max, cs_iso_row **rows, int *n,
                     cs_error *err);
void store_iso_rows_free(cs_iso_row *rows, int n);

/* ---- lists (GET /v1/results, GET /v1/jobs) ------------------------------------------
 * Newest first, a page at a time: `next` is "" on the last page, else the
 * cursor to pass as `after` for the next one (opaque to clients; stable while
 * rows are added, since it names the last row shown). */

/* Records the summary of a stored result, for the results list (idempotent).
 * Whoever stores a result calls it; a result stored without it (a crash in
 * between, a store from before the list) is picked up by
 * store_results_unindexed and indexed from its document. */
int store_result_index_put(cs_store *s, const char *key, const cs_summary *sum,
                           cs_error *err);
/* Up to max keys of stored results that have no summary yet. */
int store_results_unindexed(cs_store *s, int max, char (*keys)[65], int *n, cs_error *err);

typedef struct cs_list_query {
    int limit;             /* rows per page */
    const char *after;     /* cursor of the previous page, or NULL */
    const char *topology;  /* filters: exact values, NULL for any */
    const char *collective;
    const char *method;
    int status;            /* jobs: a cs_job_status, or -1 for any */
} cs_list_query;

typedef struct cs_result_row {
    char key[65];
    cs_summary sum;
    double created;
} cs_result_row;

typedef struct cs_job_row {
    char id[40];
    char key[65];
    cs_job_status status;
    double created, updated;
    cs_summary sum;        /* empty strings for jobs submitted before the lists */
    int waiters;
} cs_job_row;

/* CS_EINVAL (field "after") for a cursor this store did not make. *rows is
 * malloc'ed (caller frees), *n rows. */
int store_results_list(cs_store *s, const cs_list_query *q, cs_result_row **rows, int *n,
                       char next[96], cs_error *err);
int store_jobs_list(cs_store *s, const cs_list_query *q, cs_job_row **rows, int *n,
                    char next[96], cs_error *err);

/* Called after every statement with its kind (0 read, 1 write, 2 commit: a
 * transaction's end), its time including the wait for a connection, and
 * whether it worked.  Set before the store is shared between threads. */
typedef void (*cs_store_observer)(void *ctx, int op, double seconds, bool ok);
void store_set_observer(cs_store *s, cs_store_observer fn, void *ctx);

/* Wall clock, seconds since the epoch. */
double store_wall_time(void);

#endif
