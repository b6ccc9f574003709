/*
 * jobs.c - worker pool, monitor thread and waiters (see jobs.h).
 *
 * Locking: `lock` guards the list of local running jobs, the waiters and the
 * flags.  Cancel tokens are only signalled with `lock` held and only freed
 * after their job left the list (also under `lock`), so the monitor and the
 * DELETE route can never signal a freed token.  Progress snapshots have
 * their own small mutex per job because the synthesizer's threads call the
 * progress callback often.  Store calls and wake callbacks run without
 * `lock`.
 */
#include "jobs.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "delivery_internal.h"
#include "iso_cache.h"
#include "synthesize.h"

typedef enum {
    STOP_NONE = 0,
    STOP_USER,      /* an explicit cancel, for every waiter */
    STOP_ABANDONED, /* its last waiter detached */
    STOP_TIMEOUT,   /* per-job time limit */
    STOP_SHUTDOWN,  /* the daemon is stopping: re-queue */
    STOP_LOST       /* the store gave the job to someone else */
} stop_reason;

typedef struct local_job {
    char id[40];
    char key[65];
    cs_cancel *cancel;
    stop_reason stop;
    bool finishing;                  /* synthesis over, outcome being stored */
    double started, deadline, limit_s;
    pthread_mutex_t plock;           /* progress */
    bool have_progress, dirty;
    char method[32], outcome[32], message[256];
    int steps, rounds, chunks, done, total;
    double elapsed, best;
    struct local_job *next;
} local_job;

/* A job whose outcome is known here but the store refused to record (a
 * full disk, a read-only file system): FAILED with the store_failed error
 * when its result could not be kept, or DONE when the result is stored but
 * the job's done state was refused.  Left as it was, the job looked alive
 * ("running") until its lease ran out, was re-run --max-attempts times
 * (each refused the same way) and ended "interrupted", blaming a daemon
 * that never stopped.  Instead the monitor keeps its heartbeat going (the
 * job stays ours, nobody re-runs it) and records the outcome at the first
 * write the store takes; GET shows the outcome meanwhile as the job's
 * progress.  A daemon stopped before that leaves the job "running" in the
 * store: the next start re-queues it (it runs again; nothing is lost). */
typedef struct unrecorded {
    char id[40];
    char key[65];
    char *request;        /* the canonical request (store_job_finish DONE needs it) */
    cs_job_status status; /* CS_JOB_FAILED or CS_JOB_DONE */
    char *error;          /* FAILED: the error JSON */
    char *progress;       /* what GET and the heartbeat show meanwhile */
    double since;
    struct unrecorded *next;
} unrecorded;

/* A request parsed by this daemon's HTTP thread for a job of its key
 * (jobs_hand_over); owned by cs_jobs until a worker takes it. */
typedef struct handed {
    char key[65];
    double since;
    cs_synth_request *req;
    struct handed *next;
} handed;

typedef struct waiter {
    char id[40];
    double deadline;
    cs_wake_fn fn;
    void *arg;
    struct waiter *next;
} waiter;

struct cs_jobs {
    cs_jobs_env env;
    char owner[64];
    pthread_mutex_t lock;
    pthread_cond_t work;        /* workers sleep here */
    pthread_cond_t tick;        /* the monitor sleeps here */
    bool stopping, monitor_stop;
    bool cancel_all;            /* shutdown grace is over: cancel whatever starts */
    int nworkers;
    pthread_t *workers;
    pthread_t monitor;
    local_job *running;
    waiter *waiters;
    long nrunning;
    unrecorded *unrecorded;     /* added by workers, removed by the monitor only */
    handed *handed;             /* newest first; guarded by lock */
    int handed_max;             /* how many are held at most (set at start) */
};

static void fmt_num(char *b, size_t n, double v) { snprintf(b, n, "%.3f", v); }

void jobs_summary(const cs_synth_request *req, const cs_result *res, cs_summary *out)
{
    memset(out, 0, sizeof *out);
    snprintf(out->topology, sizeof out->topology, "%s", req->topology->name);
    snprintf(out->collective, sizeof out->collective, "%s",
             collective_kind_name(req->collective.kind));
    out->root = collective_kind_is_rooted(req->collective.kind) ? req->collective.root : -1;
    snprintf(out->method, sizeof out->method, "%s", res ? res->method : req->method);
    out->ranks = req->topology->ranks;
    out->nalgs = res ? res->nalgs : 0;
}

/* ---- progress ---------------------------------------------------------------- */

static void on_progress(void *ctx, const cs_progress_event *ev)
{
    local_job *lj = ctx;
    pthread_mutex_lock(&lj->plock);
    snprintf(lj->method, sizeof lj->method, "%s", ev->method ? ev->method : "");
    snprintf(lj->outcome, sizeof lj->outcome, "%s", ev->outcome ? ev->outcome : "");
    snprintf(lj->message, sizeof lj->message, "%s", ev->message ? ev->message : "");
    lj->steps = ev->steps;
    lj->rounds = ev->rounds;
    lj->chunks = ev->chunks;
    lj->done = ev->done;
    lj->total = ev->total;
    lj->elapsed = ev->elapsed;
    lj->best = ev->best;
    lj->have_progress = true;
    lj->dirty = true;
    pthread_mutex_unlock(&lj->plock);
}

static json_t *progress_json(local_job *lj, bool *was_dirty)
{
    pthread_mutex_lock(&lj->plock);
    json_t *p = json_object();
    json_object_set_new(p, "elapsed_s", json_real(cs_now() - lj->started));
    if (lj->have_progress) {
        json_object_set_new(p, "method", json_string(lj->method));
        json_object_set_new(p, "outcome", json_string(lj->outcome));
        json_object_set_new(p, "message", json_string(lj->message));
        json_object_set_new(p, "done", json_integer(lj->done));
        json_object_set_new(p, "total", json_integer(lj->total));
        if (lj->steps || lj->rounds || lj->chunks) {
            json_object_set_new(p, "steps", json_integer(lj->steps));
            json_object_set_new(p, "rounds", json_integer(lj->rounds));
            json_object_set_new(p, "chunks", json_integer(lj->chunks));
        }
        if (isfinite(lj->best))
            json_object_set_new(p, "best", json_real(lj->best));
    }
    if (lj->limit_s > 0)
        json_object_set_new(p, "time_limit_s", json_real(lj->limit_s));
    if (was_dirty)
        *was_dirty = lj->dirty;
    lj->dirty = false;
    pthread_mutex_unlock(&lj->plock);
    return p;
}

/* ---- requests handed over by the HTTP thread ---------------------------------------- */

static void handed_free_list(handed *h)
{
    while (h) {
        handed *n = h->next;
        synth_request_free(h->req);
        free(h);
        h = n;
    }
}

/* Detaches from j->handed the entries older than the TTL (now > 0), the
 * ones beyond `keep`, and the one of `key` (when given); caller holds lock. */
static handed *handed_detach(cs_jobs *j, double now, int keep, const char *key)
{
    handed *out = NULL, **pp = &j->handed;
    int n = 0;
    while (*pp) {
        handed *h = *pp;
        bool drop = (now > 0 && now - h->since > JOBS_HANDOVER_TTL_S) || n >= keep ||
                    (key && strcmp(h->key, key) == 0);
        if (drop) {
            *pp = h->next;
            h->next = out;
            out = h;
        } else {
            pp = &h->next;
            n++;
        }
    }
    return out;
}

void jobs_hand_over(cs_jobs *j, cs_synth_request *req)
{
    if (!req)
        return;
    handed *h = synth_request_make_canonical(req) ? calloc(1, sizeof *h) : NULL;
    if (!h) {
        synth_request_free(req);
        return;
    }
    snprintf(h->key, sizeof h->key, "%s", req->key);
    h->since = cs_now();
    h->req = req;
    pthread_mutex_lock(&j->lock);
    /* one per key (the newest one), and at most handed_max */
    handed *old = handed_detach(j, h->since, j->handed_max - 1, h->key);
    h->next = j->handed;
    j->handed = h;
    pthread_mutex_unlock(&j->lock);
    handed_free_list(old);   /* freeing a large topology takes a while: not under lock */
}

void jobs_hand_back(cs_jobs *j, const char *key)
{
    pthread_mutex_lock(&j->lock);
    handed *old = handed_detach(j, 0, j->handed_max, key);
    pthread_mutex_unlock(&j->lock);
    handed_free_list(old);
}

/* The request handed over for key, now the caller's; NULL when none is. */
static cs_synth_request *handed_take(cs_jobs *j, const char *key)
{
    pthread_mutex_lock(&j->lock);
    handed *h = handed_detach(j, 0, j->handed_max, key);
    pthread_mutex_unlock(&j->lock);
    cs_synth_request *req = NULL;
    for (handed *x = h; x && !req; x = x->next)   /* at most one per key */
        if (strcmp(x->key, key) == 0) {
            req = x->req;
            x->req = NULL;
        }
    handed_free_list(h);
    return req;
}

/* ---- waiters ------------------------------------------------------------------- */

/* Detaches the waiters matching id (all when id is NULL, the expired ones when
 * now > 0 and id is NULL) into *out.  Caller holds lock. */
static void take_waiters(cs_jobs *j, const char *id, double now, waiter **out)
{
    waiter **pp = &j->waiters;
    while (*pp) {
        waiter *w = *pp;
        bool take = id ? strcmp(w->id, id) == 0 : (now <= 0 || w->deadline <= now);
        if (take) {
            *pp = w->next;
            w->next = *out;
            *out = w;
        } else {
            pp = &w->next;
        }
    }
}

static void fire(waiter *list)
{
    while (list) {
        waiter *n = list->next;
        list->fn(list->arg);
        free(list);
        list = n;
    }
}

static void wake_job_waiters(cs_jobs *j, const char *id)
{
    waiter *list = NULL;
    pthread_mutex_lock(&j->lock);
    take_waiters(j, id, 0, &list);
    pthread_mutex_unlock(&j->lock);
    fire(list);
}

int jobs_wait(cs_jobs *j, const char *id, double timeout_s, cs_wake_fn fn, void *arg)
{
    waiter *w = calloc(1, sizeof *w);
    if (!w)
        return CS_ENOMEM;
    snprintf(w->id, sizeof w->id, "%s", id);
    w->deadline = cs_now() + timeout_s;
    w->fn = fn;
    w->arg = arg;
    pthread_mutex_lock(&j->lock);
    if (j->monitor_stop) {
        pthread_mutex_unlock(&j->lock);
        free(w);
        fn(arg);
        return CS_OK;
    }
    w->next = j->waiters;
    j->waiters = w;
    pthread_cond_signal(&j->tick);
    pthread_mutex_unlock(&j->lock);
    return CS_OK;
}

/* ---- running one job -------------------------------------------------------------- */

static char *error_json(const char *code, const char *message, const char *field)
{
    json_t *e = json_pack("{s:s, s:s, s:s}", "code", code, "message", message, "field",
                          field ? field : "");
    char *s = json_dumps(e, JSON_COMPACT | CS_JSON_REAL);
    json_decref(e);
    return s;
}

static void finish(cs_jobs *j, const cs_store_job *job, cs_job_status st, const char *result,
                   const char *errjson)
{
    cs_error err;
    cs_error_clear(&err);
    int rc = store_job_finish(j->env.store, job->id, j->owner, st, job->key, job->request,
                              result, errjson, &err);
    if (rc)
        log_event(j->env.log, LOG_ERROR, "job_finish_failed", "id", job->id, "status",
                  job_status_name(st), "error", err.message, NULL);
}

/* Keeps an outcome the store refused (see `unrecorded`) for the monitor to
 * record.  False when even that fails (out of memory): the job is then left
 * to the reaper, as it was before. */
static bool hold_unrecorded(cs_jobs *j, const cs_store_job *job, cs_job_status status,
                            const char *error, const char *why)
{
    unrecorded *u = calloc(1, sizeof *u);
    json_t *p = json_pack("{s:s, s:s, s:s}", "outcome",
                          status == CS_JOB_DONE ? "done_unrecorded" : "store_failed", "message",
                          why, "recording", "the store refused the job's final state; it is "
                          "retried every second");
    if (u) {
        u->request = strdup(job->request ? job->request : "");
        u->error = error ? strdup(error) : NULL;
        u->progress = p ? json_dumps(p, JSON_COMPACT) : NULL;
    }
    json_decref(p);
    if (!u || !u->request || (error && !u->error) || !u->progress) {
        if (u) {
            free(u->request);
            free(u->error);
            free(u->progress);
            free(u);
        }
        return false;
    }
    snprintf(u->id, sizeof u->id, "%s", job->id);
    snprintf(u->key, sizeof u->key, "%s", job->key);
    u->status = status;
    u->since = cs_now();
    pthread_mutex_lock(&j->lock);
    u->next = j->unrecorded;
    j->unrecorded = u;
    pthread_mutex_unlock(&j->lock);
    return true;
}

static void unrecorded_free(unrecorded *u)
{
    free(u->request);
    free(u->error);
    free(u->progress);
    free(u);
}

/* The store refused a job's result (a full disk, a read-only file system).
 * Left to the reaper, the job stayed "running" without progress for
 * --lease seconds, ran again (--max-attempts times, each refused the same
 * way) and then failed as "interrupted", which blames a daemon that never
 * stopped.  So it fails now, with the store's own words; when that (small)
 * write is refused too, the failure is held until the store takes it
 * (hold_unrecorded).  True when the job's outcome is settled either way. */
static bool fail_unstored(cs_jobs *j, const cs_store_job *job, const char *secs_s,
                          const cs_error *why)
{
    char msg[CS_ERROR_MESSAGE_MAX + 128];
    snprintf(msg, sizeof msg,
             "the result was synthesized (in %s s) but the store could not keep it: %s", secs_s,
             why->message[0] ? why->message : "write failed");
    char *ej = error_json("store_failed", msg, "");
    if (!ej)
        return false;
    cs_error err;
    cs_error_clear(&err);
    int rc = store_job_finish(j->env.store, job->id, j->owner, CS_JOB_FAILED, job->key,
                              job->request, NULL, ej, &err);
    bool held = rc != CS_OK && hold_unrecorded(j, job, CS_JOB_FAILED, ej, msg);
    free(ej);
    if (rc == CS_OK)
        log_event(j->env.log, LOG_ERROR, "job_store_failed", "id", job->id, "error",
                  why->message, "job", "failed", NULL);
    else
        log_event(j->env.log, LOG_ERROR, "job_store_failed", "id", job->id, "error",
                  why->message, "job",
                  held ? "failed; the store refused that state too: recorded as soon as it "
                         "takes writes (the job keeps its lease meanwhile)"
                       : "left to the reaper",
                  "record_error", err.message, NULL);
    return rc == CS_OK || held;
}

/* How often a job waiting for an isomorphic job looks at the index. */
#define ISO_WAIT_POLL_US 100000

/* Before synthesizing (iso_cache.h): the stored result of an isomorphic
 * request, relabelled, or, when an older job of the class is running, that
 * job's result once it is done.  True when job->key's result is stored. */
static bool iso_instead(cs_jobs *j, const cs_store_job *job, const cs_synth_request *req,
                        local_job *lj)
{
    cs_metrics *m = j->env.metrics;
    if (!j->env.config->iso_cache)
        return false;
    cs_iso_env env = {j->env.store, j->env.cache, m, j->env.log};
    char iso_key[65];
    char *labelling = NULL;
    if (!iso_cache_key(&env, req, iso_key, &labelling))
        return false;
    cs_error err;
    cs_error_clear(&err);
    if (store_iso_put(j->env.store, iso_key, job->key, labelling, &err) != CS_OK)
        log_event(j->env.log, LOG_WARN, "iso_index_failed", "key", job->key, "error",
                  err.message, NULL);
    bool done = false, waited = false;
    for (;;) {
        cs_iso_probe p;
        if (iso_cache_probe(&env, iso_key, job->key, &p, &err) != CS_OK) {
            atomic_fetch_add(&m->iso_errors, 1);
            log_event(j->env.log, LOG_WARN, "iso_probe_failed", "key", job->key, "error",
                      err.message, NULL);
            break;
        }
        if (p.from[0] && !p.self_stored) {
            done = iso_cache_relabel(&env, req, iso_key, labelling, &p, &err) == CS_OK;
            if (!done && err.code != CS_EVERIFY)
                log_event(j->env.log, LOG_WARN, "iso_relabel_failed", "key", job->key, "from",
                          p.from, "error", err.message, NULL);
            iso_cache_probe_clear(&p);
            break;
        }
        char wait_for[65];
        snprintf(wait_for, sizeof wait_for, "%s", p.wait_for);
        iso_cache_probe_clear(&p);
        if (!wait_for[0])
            break;
        pthread_mutex_lock(&j->lock);
        bool stop = lj->stop != STOP_NONE || j->stopping;
        pthread_mutex_unlock(&j->lock);
        if (stop || cs_now() > lj->deadline)
            break;
        if (!waited) {
            waited = true;
            atomic_fetch_add(&m->iso_waits, 1);
            log_event(j->env.log, LOG_INFO, "iso_wait", "id", job->id, "key", job->key, "for",
                      wait_for, NULL);
        }
        usleep(ISO_WAIT_POLL_US);
    }
    if (!done)
        atomic_fetch_add(&m->iso_misses, 1);
    free(labelling);
    return done;
}

/* The job's time limit is also its synthesizer's budget, as the CLI's
 * --time-limit is: a method that can stop early with its best answer (mcf)
 * returns that instead of being cancelled as timed out.  The key leaves the
 * limit out, so the request arrives without it.  The budget ends before the
 * hard deadline by a tenth of the limit (2.5 s at least, half at most): the
 * answer still has to be assembled, and a solver call may overrun its limit
 * by a second or two. */
static double synthesis_budget(double limit)
{
    if (!(limit > 0))
        return 0;
    double margin = 0.1 * limit;
    if (margin < 2.5)
        margin = 2.5;
    if (margin > 0.5 * limit)
        margin = 0.5 * limit;
    return limit - margin;
}

static void run_job(cs_jobs *j, cs_store_job *job)
{
    const cs_server_config *cfg = j->env.config;
    cs_metrics *m = j->env.metrics;
    cs_error err;
    cs_error_clear(&err);
    /* Submission checks the results before it queues a job, but a job of the
     * same key may have finished in between: never synthesize a key twice. */
    bool have = false;
    if (store_result_exists(j->env.store, job->key, &have, &err) == CS_OK && have) {
        finish(j, job, CS_JOB_DONE, NULL, NULL);
        log_event(j->env.log, LOG_INFO, "job_done", "id", job->id, "key", job->key, "reason",
                  "result already stored", NULL);
        wake_job_waiters(j, job->id);
        return;
    }
    /* Handed over by this daemon's HTTP thread when it submitted the job,
     * else (another daemon's job, a re-queued one) parsed from the store. */
    cs_synth_request *req = handed_take(j, job->key);
    const char *parsed_by = "handed over";
    int rc = CS_OK;
    if (!req) {
        parsed_by = "stored request";
        rc = synth_request_parse(job->request, strlen(job->request), &cfg->limits, &req, &err);
    }
    if (rc) {
        char *ej = error_json(cs_status_name(rc), err.message, err.field);
        finish(j, job, CS_JOB_FAILED, NULL, ej);
        free(ej);
        atomic_fetch_add(&m->syntheses_failed, 1);
        log_event(j->env.log, LOG_WARN, "job_failed", "id", job->id, "error", err.message, NULL);
        wake_job_waiters(j, job->id);
        return;
    }
    local_job *lj = calloc(1, sizeof *lj);
    cs_cancel *cancel = cs_cancel_new();
    if (!lj || !cancel) {
        free(lj);
        cs_cancel_free(cancel);
        synth_request_free(req);
        finish(j, job, CS_JOB_QUEUED, NULL, NULL);
        return;
    }
    metrics_observe_queue_wait(m, store_wall_time() - job->created);
    pthread_mutex_init(&lj->plock, NULL);
    snprintf(lj->id, sizeof lj->id, "%s", job->id);
    snprintf(lj->key, sizeof lj->key, "%s", job->key);
    lj->cancel = cancel;
    lj->started = cs_now();
    lj->best = NAN;
    double limit = cfg->job_time_limit_s;
    if (job->time_limit_s > 0 && (limit <= 0 || job->time_limit_s < limit))
        limit = job->time_limit_s;
    lj->limit_s = limit;
    lj->deadline = limit > 0 ? lj->started + limit : INFINITY;
    req->time_limit_s = synthesis_budget(limit);

    pthread_mutex_lock(&j->lock);
    lj->next = j->running;
    j->running = lj;
    j->nrunning++;
    if (j->cancel_all) {
        /* claimed just as the grace ran out: give it straight back */
        lj->stop = STOP_SHUTDOWN;
        cs_cancel_request(cancel);
    }
    pthread_mutex_unlock(&j->lock);
    atomic_fetch_add(&m->running, 1);
    double secs = 0;
    cs_result *res = NULL;
    if (iso_instead(j, job, req, lj)) {
        finish(j, job, CS_JOB_DONE, NULL, NULL);
        log_event(j->env.log, LOG_INFO, "job_done", "id", job->id, "key", job->key, "reason",
                  "relabelled from an isomorphic request's result", NULL);
        goto done;
    }
    atomic_fetch_add(&m->syntheses_started, 1);
    char att[16];
    snprintf(att, sizeof att, "%d", job->attempts);
    log_event(j->env.log, LOG_INFO, "job_started", "id", job->id, "key", job->key, "method",
              req->method, "topology", req->topology->name, "collective",
              collective_kind_name(req->collective.kind), "attempt", att, "request", parsed_by,
              NULL);

    cs_synth_hooks hooks = {.progress = on_progress, .progress_ctx = lj, .cancel = cancel};
    rc = synth_run(req, &cfg->limits, &hooks, &res, &err);
    secs = cs_now() - lj->started;
    atomic_fetch_add(&m->solver_us, (unsigned long)(secs * 1e6));

    /* The job stays in the running list (so its heartbeat goes on) until its
     * outcome is in the store: serializing a large result takes a while and
     * must not look like a dead daemon to the reaper. */
    pthread_mutex_lock(&j->lock);
    stop_reason stop = lj->stop;
    lj->finishing = true;
    pthread_mutex_unlock(&j->lock);
    if (rc == CS_OK && cfg->limits.max_sends > 0) {
        long total = 0;
        for (int i = 0; i < res->nalgs; i++)
            total += res->algs[i]->nsends;
        if (total > cfg->limits.max_sends) {
            rc = cs_error_set(&err, CS_ELIMIT, "options.chunks",
                              "the result holds %ld sends; this service returns at most %ld",
                              total, cfg->limits.max_sends);
            stop = STOP_NONE;
        }
    }

    if (rc == CS_OK)
        metrics_observe_synthesis(m, res->method, SYNTH_DONE, secs);
    else if (stop == STOP_USER || stop == STOP_ABANDONED)
        metrics_observe_synthesis(m, req->method, SYNTH_CANCELLED, secs);
    else if (stop != STOP_SHUTDOWN && stop != STOP_LOST)
        metrics_observe_synthesis(m, req->method, SYNTH_FAILED, secs);

    char secs_s[32];
    fmt_num(secs_s, sizeof secs_s, secs);
    if (rc == CS_OK) {
        /* the result first (durable on its own), then the job's done state:
         * a crash between the two leaves a result whose job is reaped and
         * then finds it stored */
        cs_error serr;
        cs_error_clear(&serr);
        int src = delivery_save_result(j->env.store, j->env.cache, req, res, &serr);
        bool saved = src == CS_OK;
        if (saved)
            src = store_job_finish(j->env.store, job->id, j->owner, CS_JOB_DONE, job->key,
                                   job->request, NULL, NULL, &serr);
        if (src == CS_OK) {
            cs_summary sum;
            jobs_summary(req, res, &sum);
            if (store_result_index_put(j->env.store, job->key, &sum, &serr) != CS_OK)
                log_event(j->env.log, LOG_WARN, "result_index_failed", "key", job->key,
                          "error", serr.message, NULL); /* the next start indexes it */
            atomic_fetch_add(&m->syntheses_done, 1);
            char nalgs[16];
            snprintf(nalgs, sizeof nalgs, "%d", res->nalgs);
            log_event(j->env.log, LOG_INFO, "job_done", "id", job->id, "key", job->key,
                      "method", res->method, "algorithms", nalgs, "seconds", secs_s, "reason",
                      res->reason, NULL);
        } else if (!saved && fail_unstored(j, job, secs_s, &serr)) {
            atomic_fetch_add(&m->syntheses_failed, 1);
        } else if (saved && hold_unrecorded(j, job, CS_JOB_DONE, NULL,
                                            "the result is stored; the store refused the job's "
                                            "done state")) {
            /* the result is durable: the job is done, whenever the store
             * takes that; running it again would only make it again */
            atomic_fetch_add(&m->syntheses_done, 1);
            log_event(j->env.log, LOG_ERROR, "job_finish_failed", "id", job->id, "status",
                      "done", "error", serr.message, "job", "done (its result is stored); "
                      "recorded as soon as the store takes writes", NULL);
        } else {
            /* Not acknowledged: the heartbeat stops, the job is reaped and
             * runs again; nobody was told it was done. */
            log_event(j->env.log, LOG_ERROR, "job_store_failed", "id", job->id, "error",
                      serr.message, NULL);
        }
    } else if (stop == STOP_SHUTDOWN) {
        finish(j, job, CS_JOB_QUEUED, NULL, NULL);
        atomic_fetch_add(&m->syntheses_requeued, 1);
        log_event(j->env.log, LOG_INFO, "job_requeued", "id", job->id, "reason", "shutdown", NULL);
    } else if (stop == STOP_LOST) {
        log_event(j->env.log, LOG_WARN, "job_lost", "id", job->id, NULL);
    } else if (stop == STOP_USER || stop == STOP_ABANDONED) {
        /* the store re-queues an abandoned job that someone joined since */
        char *ej = error_json("cancelled",
                              stop == STOP_USER
                                  ? "cancelled for every client by an explicit cancel"
                                  : "cancelled: every client that asked for it detached (DELETE)",
                              "");
        finish(j, job, CS_JOB_CANCELLED, NULL, ej);
        free(ej);
        atomic_fetch_add(&m->syntheses_cancelled, 1);
        log_event(j->env.log, LOG_INFO, "job_stopped", "id", job->id, "reason",
                  stop == STOP_USER ? "cancelled" : "no waiter left", "seconds", secs_s, NULL);
    } else {
        char msg[CS_ERROR_MESSAGE_MAX + 64];
        const char *code = cs_status_name(rc);
        if (stop == STOP_TIMEOUT) {
            snprintf(msg, sizeof msg, "the job exceeded its time limit of %g s", limit);
            code = "timeout";
        } else {
            snprintf(msg, sizeof msg, "%s", err.message[0] ? err.message : cs_status_name(rc));
        }
        char *ej = error_json(code, msg, stop == STOP_TIMEOUT ? "options.time_limit_s"
                                                                : err.field);
        /* the same request would be refused the same way: remember it by key */
        if (stop == STOP_NONE && ej &&
            (rc == CS_ELIMIT || rc == CS_EUNSUPPORTED || rc == CS_EUNSAT || rc == CS_EINVAL))
            delivery_remember_refusal(j->env.cache, 'K', job->key, rc, ej);
        finish(j, job, CS_JOB_FAILED, NULL, ej);
        free(ej);
        atomic_fetch_add(&m->syntheses_failed, 1);
        log_event(j->env.log, LOG_WARN, "job_failed", "id", job->id, "code", code, "error", msg,
                  "seconds", secs_s, NULL);
    }
done:
    result_free(res);
    synth_request_free(req);
    pthread_mutex_lock(&j->lock);
    for (local_job **pp = &j->running; *pp; pp = &(*pp)->next)
        if (*pp == lj) {
            *pp = lj->next;
            break;
        }
    j->nrunning--;
    pthread_mutex_unlock(&j->lock);
    atomic_fetch_sub(&m->running, 1);
    cs_cancel_free(cancel);
    pthread_mutex_destroy(&lj->plock);
    free(lj);
    wake_job_waiters(j, job->id);
}

/* A failing claim (the store cannot be written) is retried every second by
 * every worker: its log line once a minute, with the count left out. */
#define CLAIM_FAILED_LOG_INTERVAL_S 60.0

static void *worker_main(void *arg)
{
    cs_jobs *j = arg;
    cs_log_throttle claim_log;
    log_throttle_reset(&claim_log);
    for (;;) {
        pthread_mutex_lock(&j->lock);
        bool stop = j->stopping;
        pthread_mutex_unlock(&j->lock);
        if (stop)
            break;
        cs_store_job job;
        bool claimed = false;
        cs_error err;
        cs_error_clear(&err);
        int rc = store_job_claim(j->env.store, j->owner, &job, &claimed, &err);
        if (!rc)
            log_throttle_end(j->env.log, LOG_ERROR, &claim_log, "claim_failed");
        else
            log_throttled(j->env.log, LOG_ERROR, &claim_log, "claim_failed", err.message,
                          cs_now(), CLAIM_FAILED_LOG_INTERVAL_S);
        if (claimed) {
            run_job(j, &job);
            store_job_clear(&job);
            continue;
        }
        pthread_mutex_lock(&j->lock);
        if (!j->stopping) {
            double wait = j->env.config->poll_s > 0 ? j->env.config->poll_s : 0.5;
            if (rc)
                wait = 1.0;
            struct timespec ts = cs_deadline_after(wait);
            pthread_cond_timedwait(&j->work, &j->lock, &ts);
        }
        pthread_mutex_unlock(&j->lock);
    }
    /* still failing as the daemon stops: the count since the last line */
    log_throttle_end(j->env.log, LOG_ERROR, &claim_log, "claim_failed");
    return NULL;
}

/* ---- monitor ---------------------------------------------------------------------- */

/* Asks the solver of a job running here to stop; false when it does not
 * run here. */
static bool stop_local(cs_jobs *j, const char *id, stop_reason why)
{
    bool found = false;
    pthread_mutex_lock(&j->lock);
    for (local_job *lj = j->running; lj; lj = lj->next)
        if (!strcmp(lj->id, id)) {
            found = true;
            if (lj->stop == STOP_NONE && !lj->finishing) {
                lj->stop = why;
                cs_cancel_request(lj->cancel);
            }
        }
    pthread_mutex_unlock(&j->lock);
    return found;
}

typedef struct hb_item {
    char id[40];
    char *progress;
} hb_item;

static void monitor_heartbeats(cs_jobs *j)
{
    pthread_mutex_lock(&j->lock);
    long n = j->nrunning;
    hb_item *items = n > 0 ? calloc((size_t)n, sizeof *items) : NULL;
    long k = 0;
    for (local_job *lj = j->running; lj && items && k < n; lj = lj->next) {
        snprintf(items[k].id, sizeof items[k].id, "%s", lj->id);
        json_t *p = progress_json(lj, NULL);
        items[k].progress = json_dumps(p, JSON_COMPACT | CS_JSON_REAL);
        json_decref(p);
        k++;
    }
    pthread_mutex_unlock(&j->lock);
    for (long i = 0; i < k; i++) {
        int cancel = CS_CANCEL_NONE;
        bool owner = true;
        cs_error err;
        cs_error_clear(&err);
        int rc = store_job_heartbeat(j->env.store, items[i].id, j->owner, items[i].progress,
                                     &cancel, &owner, &err);
        if (rc == CS_OK && (cancel != CS_CANCEL_NONE || !owner))
            stop_local(j, items[i].id, !owner                         ? STOP_LOST
                                       : cancel == CS_CANCEL_EXPLICIT ? STOP_USER
                                                                      : STOP_ABANDONED);
        free(items[i].progress);
    }
    free(items);
}

/* Records the outcomes the store refused (see `unrecorded`), or, while it
 * still refuses them, keeps their jobs' heartbeat (so no reaper re-runs
 * them).  A job the store gave to another daemon (its lease ran out while
 * even heartbeats failed) is dropped here: it runs there. */
static void monitor_unrecorded(cs_jobs *j, bool final)
{
    pthread_mutex_lock(&j->lock);
    unrecorded *list = j->unrecorded;
    pthread_mutex_unlock(&j->lock);
    /* only this thread removes entries, so the list after its head stays */
    for (unrecorded *u = list, *next; u; u = next) {
        next = u->next;
        cs_error err;
        cs_error_clear(&err);
        const char *outcome = NULL;
        int rc = store_job_finish(j->env.store, u->id, j->owner, u->status, u->key, u->request,
                                  NULL, u->error, &err);
        if (rc == CS_OK) {
            outcome = "recorded";
        } else if (!final) {
            int cancel = CS_CANCEL_NONE;
            bool owner = true;
            cs_error herr;
            if (store_job_heartbeat(j->env.store, u->id, j->owner, u->progress, &cancel, &owner,
                                    &herr) == CS_OK &&
                !owner)
                outcome = "dropped: the store gave the job to another daemon, which runs it";
        }
        char after[32];
        fmt_num(after, sizeof after, cs_now() - u->since);
        if (!outcome) {
            if (final)
                log_event(j->env.log, LOG_ERROR, "job_outcome_unrecorded", "id", u->id,
                          "status", job_status_name(u->status), "error", err.message, "job",
                          "still running in the store: the next start re-queues it", NULL);
            else
                continue;
        } else {
            log_event(j->env.log, rc == CS_OK ? LOG_WARN : LOG_ERROR, "job_outcome_recorded",
                      "id", u->id, "status", job_status_name(u->status), "after_s", after, "job",
                      outcome, NULL);
        }
        pthread_mutex_lock(&j->lock);
        for (unrecorded **pp = &j->unrecorded; *pp; pp = &(*pp)->next)
            if (*pp == u) {
                *pp = u->next;
                break;
            }
        pthread_mutex_unlock(&j->lock);
        char id[40];
        snprintf(id, sizeof id, "%s", u->id);
        unrecorded_free(u);
        wake_job_waiters(j, id);
    }
}

static void monitor_deadlines(cs_jobs *j, double now)
{
    pthread_mutex_lock(&j->lock);
    for (local_job *lj = j->running; lj; lj = lj->next)
        if (lj->stop == STOP_NONE && !lj->finishing && now > lj->deadline) {
            lj->stop = STOP_TIMEOUT;
            cs_cancel_request(lj->cancel);
        }
    pthread_mutex_unlock(&j->lock);
}

/* Waiters on jobs that do not run here: ask the store whether they finished. */
static void monitor_remote_waiters(cs_jobs *j)
{
    enum { MAXIDS = 64 };
    char ids[MAXIDS][40];
    int n = 0;
    pthread_mutex_lock(&j->lock);
    for (waiter *w = j->waiters; w && n < MAXIDS; w = w->next) {
        bool dup = false, local = false;
        for (int i = 0; i < n; i++)
            dup |= !strcmp(ids[i], w->id);
        for (local_job *lj = j->running; lj; lj = lj->next)
            local |= !strcmp(lj->id, w->id);
        for (unrecorded *u = j->unrecorded; u; u = u->next)
            local |= !strcmp(u->id, w->id);
        if (!dup && !local)
            snprintf(ids[n++], sizeof ids[0], "%s", w->id);
    }
    pthread_mutex_unlock(&j->lock);
    for (int i = 0; i < n; i++) {
        cs_store_job job;
        bool found = false;
        cs_error err;
        if (store_job_get(j->env.store, ids[i], &job, &found, &err) != CS_OK)
            continue;
        bool finished = !found || (job.status != CS_JOB_QUEUED && job.status != CS_JOB_RUNNING);
        if (found)
            store_job_clear(&job);
        if (finished)
            wake_job_waiters(j, ids[i]);
    }
}

static void monitor_reap(cs_jobs *j, double lease)
{
    int requeued = 0, failed = 0;
    cs_error err;
    cs_error_clear(&err);
    if (store_job_reap(j->env.store, lease, j->env.config->max_attempts, &requeued, &failed,
                       &err) != CS_OK) {
        log_event(j->env.log, LOG_ERROR, "reap_failed", "error", err.message, NULL);
        return;
    }
    if (requeued || failed) {
        char a[16], b[16];
        snprintf(a, sizeof a, "%d", requeued);
        snprintf(b, sizeof b, "%d", failed);
        log_event(j->env.log, LOG_WARN, "jobs_reaped", "requeued", a, "failed", b, NULL);
        if (requeued)
            jobs_notify(j);
    }
}

static void *monitor_main(void *arg)
{
    cs_jobs *j = arg;
    double last_hb = cs_now(), last_reap = cs_now(), last_remote = 0;
    const double hb_every = 1.0;
    double reap_every = j->env.config->lease_s / 3;
    if (reap_every < 1)
        reap_every = 1;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        if (j->monitor_stop) {
            pthread_mutex_unlock(&j->lock);
            break;
        }
        struct timespec ts = cs_deadline_after(0.05);
        pthread_cond_timedwait(&j->tick, &j->lock, &ts);
        bool stop = j->monitor_stop;
        waiter *expired = NULL;
        double now = cs_now();
        take_waiters(j, NULL, now, &expired);
        bool have_waiters = j->waiters != NULL;
        handed *stale = j->handed ? handed_detach(j, now, j->handed_max, NULL) : NULL;
        pthread_mutex_unlock(&j->lock);
        handed_free_list(stale);
        fire(expired);
        if (stop)
            break;
        monitor_deadlines(j, now);
        if (now - last_hb >= hb_every) {
            last_hb = now;
            monitor_heartbeats(j);
            monitor_unrecorded(j, false);
        }
        if (have_waiters && now - last_remote >= 0.1) {
            last_remote = now;
            monitor_remote_waiters(j);
        }
        if (now - last_reap >= reap_every) {
            last_reap = now;
            monitor_reap(j, j->env.config->lease_s);
        }
    }
    return NULL;
}

/* ---- lifecycle -------------------------------------------------------------------- */

int jobs_start(const cs_jobs_env *env, cs_jobs **out, cs_error *err)
{
    cs_jobs *j = calloc(1, sizeof *j);
    if (!j)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    j->env = *env;
    snprintf(j->owner, sizeof j->owner, "%s", env->owner);
    j->env.owner = j->owner;
    pthread_mutex_init(&j->lock, NULL);
    pthread_cond_init(&j->work, NULL);
    pthread_cond_init(&j->tick, NULL);
    /* The sole daemon of a store (it holds the store's lock) knows that
     * whatever it finds running was interrupted by a daemon that is gone.
     * Anyone else may share the store with live daemons: only leases that
     * ran out say a job's daemon died. */
    monitor_reap(j, env->exclusive ? -1 : env->config->lease_s);
    j->nworkers = env->config->workers;
    j->handed_max = j->nworkers + 2;   /* before any thread reads it */
    j->workers = calloc((size_t)j->nworkers, sizeof *j->workers);
    if (!j->workers) {
        free(j);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    if (pthread_create(&j->monitor, NULL, monitor_main, j) != 0) {
        free(j->workers);
        free(j);
        return cs_error_set(err, CS_EINTERNAL, "", "cannot start the monitor thread");
    }
    int started = 0;
    for (int i = 0; i < j->nworkers; i++)
        if (pthread_create(&j->workers[i], NULL, worker_main, j) == 0)
            started++;
        else
            break;
    j->nworkers = started;
    if (started == 0) {
        jobs_stop(j, 0);
        jobs_free(j);
        return cs_error_set(err, CS_EINTERNAL, "", "cannot start worker threads");
    }
    *out = j;
    return CS_OK;
}

void jobs_notify(cs_jobs *j)
{
    pthread_mutex_lock(&j->lock);
    pthread_cond_signal(&j->work);
    pthread_mutex_unlock(&j->lock);
}

json_t *jobs_local_progress(cs_jobs *j, const char *id)
{
    json_t *p = NULL;
    pthread_mutex_lock(&j->lock);
    for (local_job *lj = j->running; lj; lj = lj->next)
        if (!strcmp(lj->id, id)) {
            p = progress_json(lj, NULL);
            break;
        }
    for (unrecorded *u = j->unrecorded; u && !p; u = u->next)
        if (!strcmp(u->id, id))
            p = json_loads(u->progress, 0, NULL);
    pthread_mutex_unlock(&j->lock);
    return p;
}

bool jobs_cancel_local(cs_jobs *j, const char *id, bool explicit_cancel)
{
    return stop_local(j, id, explicit_cancel ? STOP_USER : STOP_ABANDONED);
}

void jobs_stop(cs_jobs *j, double grace_s)
{
    if (!j)
        return;
    pthread_mutex_lock(&j->lock);
    j->stopping = true;
    pthread_cond_broadcast(&j->work);
    pthread_mutex_unlock(&j->lock);
    double until = cs_now() + grace_s;
    for (;;) {
        pthread_mutex_lock(&j->lock);
        long n = j->nrunning;
        pthread_mutex_unlock(&j->lock);
        if (n == 0 || cs_now() >= until)
            break;
        usleep(20000);
    }
    pthread_mutex_lock(&j->lock);
    j->cancel_all = true;
    for (local_job *lj = j->running; lj; lj = lj->next)
        if (lj->stop == STOP_NONE && !lj->finishing) {
            lj->stop = STOP_SHUTDOWN;
            cs_cancel_request(lj->cancel);
        }
    pthread_mutex_unlock(&j->lock);
    for (int i = 0; i < j->nworkers; i++)
        pthread_join(j->workers[i], NULL);
    j->nworkers = 0;
    pthread_mutex_lock(&j->lock);
    j->monitor_stop = true;
    pthread_cond_signal(&j->tick);
    waiter *all = NULL;
    take_waiters(j, NULL, 0, &all);
    pthread_mutex_unlock(&j->lock);
    pthread_join(j->monitor, NULL);
    monitor_unrecorded(j, true);   /* a last try; what stays is named in the log */
    fire(all);
    /* waiters registered while the monitor stopped were fired by jobs_wait */
}

void jobs_free(cs_jobs *j)
{
    if (!j)
        return;
    while (j->unrecorded) {   /* jobs_stop logged them */
        unrecorded *u = j->unrecorded;
        j->unrecorded = u->next;
        unrecorded_free(u);
    }
    handed_free_list(j->handed);
    pthread_mutex_destroy(&j->lock);
    pthread_cond_destroy(&j->work);
    pthread_cond_destroy(&j->tick);
    free(j->workers);
    free(j);
}
