/*
 * jobs.h - the daemon's synthesis workers: a bounded pool of threads that
 * claim queued jobs from the store, run synth_run() on them with a cancel
 * token and a progress callback, and record the outcome.  HTTP threads never
 * synthesize; they submit to the store and, if a client wants to wait, park
 * the connection with jobs_wait().
 *
 * One monitor thread does the periodic work: enforces per-job time limits,
 * writes progress and heartbeats to the store (and learns of cancellations
 * requested through another daemon), reaps jobs whose daemon died, and wakes
 * waiters whose job finished (here or elsewhere) or whose wait ran out.
 *
 * An outcome the store refuses to record (a full disk: the result cannot be
 * kept, and not even the job's failed state) is held by the monitor, which
 * keeps the job's lease and records it at the first write the store takes;
 * GET shows it as the job's progress meanwhile (jobs_local_progress).
 *
 * Shutdown (jobs_stop): stop claiming, give running jobs `grace` seconds,
 * then cancel them and hand them back to the queue, so the next start (or
 * another daemon of the fleet) runs them again.  A held outcome the store
 * still refuses stays a running job in the store, which the next start
 * re-queues.
 */
#ifndef CS_SERVER_JOBS_H
#define CS_SERVER_JOBS_H

#include <jansson.h>
#include "cache.h"
#include "config.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "synthesize.h"

typedef struct cs_jobs cs_jobs;

typedef struct cs_jobs_env {
    cs_store *store;
    cs_cache *cache;
    cs_metrics *metrics;
    const cs_logger *log;
    const cs_server_config *config;
    const char *owner;          /* this daemon's instance id */
    bool exclusive;             /* sole daemon of the store (store_lock_exclusive) */
} cs_jobs_env;

int jobs_start(const cs_jobs_env *env, cs_jobs **out, cs_error *err);
/* What the lists show of a request (and of its result, when res is given). */
void jobs_summary(const cs_synth_request *req, const cs_result *res, cs_summary *out);
/* Hands the request this daemon's HTTP thread parsed to the worker that
 * claims a job of its key here, so that worker runs it rather than parsing
 * the job's stored canonical request again (at 1,024 ranks that parse is
 * 10-15% of a POST's CPU).  Always takes ownership of req.  It is kept only
 * when synth_request_make_canonical makes it exactly what that parse gives;
 * otherwise it is freed and the worker parses, as it does for every job
 * submitted elsewhere (another daemon of the fleet, an earlier start).  A
 * request no worker here takes (the job was cached or joined, refused, or
 * claimed by another daemon) is freed after JOBS_HANDOVER_TTL_S or when
 * newer ones push it out: at most as many are held as there are workers,
 * plus two, as each may hold a large topology.  Call it before submitting
 * the job, so a worker that claims it at once finds it. */
void jobs_hand_over(cs_jobs *j, cs_synth_request *req);
/* Drops the request handed over for key, if still held (its job was not
 * created after all). */
void jobs_hand_back(cs_jobs *j, const char *key);
#define JOBS_HANDOVER_TTL_S 30.0

/* New work was queued: wake an idle worker. */
void jobs_notify(cs_jobs *j);
/* Progress of a job running on this daemon ({method, outcome, message, done,
 * total, elapsed, best, steps, rounds, chunks}); NULL if it does not run here. */
json_t *jobs_local_progress(cs_jobs *j, const char *id);
/* Stops a job running here at once (an explicit cancel, or its last waiter
 * left), rather than at its next heartbeat; false when it does not run here. */
bool jobs_cancel_local(cs_jobs *j, const char *id, bool explicit_cancel);

typedef void (*cs_wake_fn)(void *arg);
/* Calls fn(arg) exactly once, from another thread, when job id is no longer
 * queued or running, when timeout_s passes, or at shutdown. */
int jobs_wait(cs_jobs *j, const char *id, double timeout_s, cs_wake_fn fn, void *arg);

void jobs_stop(cs_jobs *j, double grace_s);
void jobs_free(cs_jobs *j);


#endif
