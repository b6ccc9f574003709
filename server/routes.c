/*
 * routes.c - the HTTP API of CONTRACT.md section 4 (docs/service.md).
 *
 * Every handler validates its input and answers a 4xx JSON error naming the
 * field; nothing here synthesizes.  POST /v1/synthesize submits to the store
 * (which coalesces identical requests fleet-wide) and, when the client asked
 * to wait, parks the connection (MHD suspend) until its job finishes or the
 * wait runs out, so waiting clients hold no HTTP thread.
 *
 * The hot path is GET /v1/results/{key}: a memory-cache hit queues the cached
 * bytes by reference, with no store access, allocation or JSON work.
 */
#include "delivery_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "iso_cache.h"
#include "synthesize.h"

static bool is_hex(const char *s, size_t n)
{
    if (strlen(s) != n)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]) || isupper((unsigned char)s[i]))
            return false;
    return true;
}

static const char *arg(req_state *rs, const char *name)
{
    return MHD_lookup_connection_value(rs->conn, MHD_GET_ARGUMENT_KIND, name);
}

static enum MHD_Result method_not_allowed(req_state *rs, const char *allow)
{
    json_t *doc = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "method_not_allowed",
                            "message", "method not allowed on this route", "field", "method");
    char *text = json_dumps(doc, JSON_COMPACT | CS_JSON_REAL);
    json_decref(doc);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                             MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Allow", allow);
    return queue(rs, 405, r);
}

static bool authorized(req_state *rs)
{
    const char *token = rs->srv->cfg.auth_token;
    if (!token[0])
        return true;
    const char *h = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "Authorization");
    /* RFC 7235: the scheme is case-insensitive, then one or more spaces */
    if (!h || strncasecmp(h, "Bearer", 6) != 0 || (h[6] != ' ' && h[6] != '\t'))
        return false;
    const char *given = h + 6;
    while (*given == ' ' || *given == '\t')
        given++;
    size_t n = strlen(token), m = strlen(given);
    unsigned char diff = (unsigned char)(n != m);
    for (size_t i = 0; i < n; i++)  /* constant time in the token length */
        diff |= (unsigned char)(token[i] ^ (i < m ? given[i] : 0));
    return diff == 0;
}

static enum MHD_Result unauthorized(req_state *rs)
{
    json_t *doc = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "unauthorized", "message",
                            "this route needs 'Authorization: Bearer TOKEN'", "field",
                            "Authorization");
    char *text = json_dumps(doc, JSON_COMPACT | CS_JSON_REAL);
    json_decref(doc);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                             MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"collsynthd\"");
    return queue(rs, 401, r);
}

/* ---- health, topologies, metrics ------------------------------------------------------ */

/* A failed store write keeps /v1/health degraded until this long passes
 * without another (a one-off error does not stay reported for ever; a full
 * disk fails again at every result, re-run or claim). */
#define STORE_WRITE_HEALTH_WINDOW_S 60.0

static enum MHD_Result handle_health(req_state *rs)
{
    cs_server *s = rs->srv;
    cs_error err;
    cs_error_clear(&err);
    int rc = store_ping(s->store, &err);
    /* A store that answers reads but fails every write (a full disk) cannot
     * run or keep a job: jobs stay queued or are re-run until they fail as
     * interrupted.  Say so here, where operators and health checks look. */
    char werr[CS_ERROR_MESSAGE_MAX];
    double ago = 0;
    if (rc == CS_OK && store_write_failure(s->store, &ago, werr, sizeof werr) &&
        ago <= STORE_WRITE_HEALTH_WINDOW_S)
        rc = cs_error_set(&err, CS_EIO, "store",
                          "writes to the store fail: the latest failed %.0f s ago: %s", ago,
                          werr);
    json_t *store = json_pack("{s:s, s:b}", "engine", store_engine(s->store), "ok", rc == CS_OK);
    if (rc)
        json_object_set_new(store, "error", json_string(err.message));
    json_t *doc = json_pack("{s:s, s:s, s:s, s:o, s:f, s:i, s:b}", "status",
                            rc == CS_OK ? "ok" : "degraded", "version", COLLSYNTHD_VERSION,
                            "instance", s->instance, "store", store, "uptime_s",
                            cs_now() - s->started, "workers", s->cfg.workers, "stopping",
                            atomic_load(&s->stopping));
    return respond_json(rs, rc == CS_OK ? 200 : 503, doc);
}

static enum MHD_Result handle_topologies(req_state *rs)
{
    int n = 0;
    const cs_builtin_info *list = topology_builtin_list(&n);
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s}", "family", list[i].family,
                                             "syntax", list[i].syntax, "example",
                                             list[i].example, "description",
                                             list[i].description));
    return respond_json(rs, 200, json_pack("{s:o}", "topologies", arr));
}

static enum MHD_Result handle_topology(req_state *rs, const char *name)
{
    cs_server *s = rs->srv;
    int n = 0;
    const cs_builtin_info *list = topology_builtin_list(&n);
    size_t fam = strcspn(name, ":,");
    bool known = false;
    for (int i = 0; i < n; i++)
        known |= strlen(list[i].family) == fam && strncmp(list[i].family, name, fam) == 0;
    if (!known)
        return respond_error(rs, 404, "not_found", "name",
                             "no builtin topology family \"%.*s\" (GET /v1/topologies lists them)",
                             (int)(fam > 60 ? 60 : fam), name);
    cs_topology *t = NULL;
    cs_error err;
    cs_error_clear(&err);
    if (synth_builtin_checked(name, &s->cfg.limits, &t, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    json_t *doc = topology_to_json(t);
    topology_free(t);
    return respond_json(rs, 200, doc);
}

/* Builtins are bounded by the limits, but the largest legal ones are about a
 * million links: built on the parse pool. */
static bool topology_work(req_state *rs)
{
    handle_topology(rs, rs->url + 15);
    return true;
}

static enum MHD_Result handle_metrics(req_state *rs)
{
    cs_server *s = rs->srv;
    cs_metrics_gauges g;
    memset(&g, 0, sizeof g);
    cs_error err;
    if (store_job_counts(s->store, g.jobs, &err) != CS_OK)
        for (int i = 0; i < 5; i++)
            g.jobs[i] = -1;
    g.results = store_result_count(s->store, &err);
    cache_stats(s->cache, &g.cache_entries, &g.cache_bytes);
    g.uptime_s = cs_now() - s->started;
    g.workers = s->cfg.workers;
    g.version = COLLSYNTHD_VERSION;
    g.mhd_version = MHD_get_version();
    metrics_sample_process(&g);
    char *text = metrics_render(&s->metrics, &g);
    if (!text)
        return respond_error(rs, 500, "internal", "", "cannot render metrics");
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                             MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
    return queue(rs, 200, r);
}

/* ---- jobs ------------------------------------------------------------------------------ */

/* A job as its caller sees it: read through a handle, "id" is that handle
 * and "detached" says whether it was let go. */
static json_t *job_json(cs_server *s, const cs_store_job *j)
{
    json_t *doc = json_pack("{s:s, s:s, s:s, s:i, s:f, s:f, s:i}", "id",
                            j->handle[0] ? j->handle : j->id, "key", j->key, "status",
                            job_status_name(j->status), "attempts", j->attempts, "created",
                            j->created, "updated", j->updated, "waiters", j->waiters);
    if (j->handle[0])
        json_object_set_new(doc, "detached", json_boolean(j->detached));
    json_t *progress = NULL;
    if (j->status == CS_JOB_RUNNING)
        progress = jobs_local_progress(s->jobs, j->id);
    if (!progress && j->progress && (j->status == CS_JOB_RUNNING || j->status == CS_JOB_DONE))
        progress = json_loads(j->progress, 0, NULL);
    if (j->status == CS_JOB_DONE) {
        if (!progress)
            progress = json_object();
        json_object_set_new(progress, "done_fraction", json_real(1.0));
    }
    json_object_set_new(doc, "progress", progress ? progress : json_null());
    if (j->error && (j->status == CS_JOB_FAILED || j->status == CS_JOB_CANCELLED)) {
        json_t *e = json_loads(j->error, 0, NULL);
        if (e)
            json_object_set_new(doc, "error", e);
    }
    if (j->status == CS_JOB_RUNNING || j->status == CS_JOB_QUEUED)
        json_object_set_new(doc, "cancel_requested",
                            json_boolean(j->cancel_requested != CS_CANCEL_NONE));
    if (j->status == CS_JOB_RUNNING && j->owner[0])
        json_object_set_new(doc, "instance", json_string(j->owner)); /* the daemon running it */
    return doc;
}

static enum MHD_Result handle_job_get(req_state *rs, const char *id)
{
    cs_server *s = rs->srv;
    if (!is_hex(id, 32))
        return respond_error(rs, 400, "invalid", "id", "a job id is 32 lowercase hex digits");
    cs_store_job j;
    bool found = false;
    cs_error err;
    cs_error_clear(&err);
    if (store_job_get(s->store, id, &j, &found, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (!found)
        return respond_error(rs, 404, "not_found", "id", "no job %s", id);
    json_t *doc = job_json(s, &j);
    bool done = j.status == CS_JOB_DONE;
    char key[65];
    snprintf(key, sizeof key, "%s", j.key);
    store_job_clear(&j);
    char *text = json_dumps(doc, JSON_COMPACT | CS_JSON_REAL);
    json_decref(doc);
    if (!text)
        return respond_error(rs, 500, "internal", "", "out of memory");
    if (done) /* with its result, streamed when large */
        return delivery_respond_job(rs, text, key);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                             MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    return queue(rs, 200, r);
}

static enum MHD_Result delete_answer(req_state *rs, int status, const char *id,
                                     const char *state, int waiters)
{
    json_t *doc = json_pack("{s:s, s:s}", "id", id, "status", state);
    if (waiters >= 0)
        json_object_set_new(doc, "waiters", json_integer(waiters));
    return respond_json(rs, status, doc);
}

/* The explicit cancel: the synthesis stops for every waiter. */
static enum MHD_Result cancel_for_everyone(req_state *rs, const char *id)
{
    cs_server *s = rs->srv;
    cs_job_status after;
    bool found = false;
    cs_error err;
    cs_error_clear(&err);
    if (store_job_cancel(s->store, id, &after, &found, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (!found)
        return respond_error(rs, 404, "not_found", "id", "no job %s", id);
    switch (after) {
    case CS_JOB_CANCELLED:
        log_event(&s->log, LOG_INFO, "job_cancelled", "id", id, "was", "queued", NULL);
        return delete_answer(rs, 200, id, "cancelled", -1);
    case CS_JOB_RUNNING: {
        /* here: stop it now; elsewhere: its daemon sees the flag on its next heartbeat */
        cs_store_job j;
        if (store_job_get(s->store, id, &j, &found, &err) == CS_OK && found) {
            jobs_cancel_local(s->jobs, j.id, true);
            store_job_clear(&j);
        }
        return delete_answer(rs, 202, id, "cancelling", -1);
    }
    default:
        return respond_error(rs, 409, "conflict", "id", "job %s already %s", id,
                             job_status_name(after));
    }
}

/* DELETE /v1/jobs/{handle}: the caller lets go of its job; the synthesis
 * stops when no one waits for it any more.  ?all=true, or the id of the job
 * itself (from GET /v1/jobs), cancels it for everyone. */
static enum MHD_Result handle_job_delete(req_state *rs, const char *id)
{
    cs_server *s = rs->srv;
    if (!is_hex(id, 32))
        return respond_error(rs, 400, "invalid", "id", "a job id is 32 lowercase hex digits");
    const char *all = arg(rs, "all");
    if (all && strcmp(all, "true") && strcmp(all, "1") && strcmp(all, "false") &&
        strcmp(all, "0"))
        return respond_error(rs, 400, "invalid", "all", "all must be true or false");
    if (all && (!strcmp(all, "true") || !strcmp(all, "1")))
        return cancel_for_everyone(rs, id);
    cs_detach d;
    cs_error err;
    cs_error_clear(&err);
    if (store_job_detach(s->store, id, &d, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    switch (d.outcome) {
    case CS_DETACH_NOT_FOUND:
        return cancel_for_everyone(rs, id); /* a job id, or 404 */
    case CS_DETACH_LEFT:
        log_event(&s->log, LOG_INFO, "job_detached", "id", d.job_id, "handle", id, NULL);
        return delete_answer(rs, 200, id, "detached", d.waiters);
    case CS_DETACH_CANCELLED:
        log_event(&s->log, LOG_INFO, "job_cancelled", "id", d.job_id, "was", "queued", "reason",
                  "no waiter left", NULL);
        return delete_answer(rs, 200, id, "cancelled", 0);
    case CS_DETACH_STOPPING:
        jobs_cancel_local(s->jobs, d.job_id, false);
        return delete_answer(rs, 202, id, "cancelling", 0);
    case CS_DETACH_ALREADY:
    case CS_DETACH_FINISHED:
        if (d.status == CS_JOB_CANCELLED)
            return delete_answer(rs, 200, id, "cancelled", -1);
        if (d.status == CS_JOB_QUEUED || d.status == CS_JOB_RUNNING)
            return delete_answer(rs, 200, id, "detached", d.waiters);
        return respond_error(rs, 409, "conflict", "id", "job %s already %s", id,
                             job_status_name(d.status));
    }
    return respond_error(rs, 500, "internal", "", "unexpected detach outcome");
}

/* ---- synthesize ------------------------------------------------------------------------- */

static void wake_parked(void *arg)
{
    req_state *rs = arg;
    rs->phase = 2;
    MHD_resume_connection(rs->conn);
}

static enum MHD_Result answer_job(req_state *rs, bool coalesced)
{
    cs_server *s = rs->srv;
    cs_error err;
    cs_error_clear(&err);
    bool missing = false;
    if (delivery_result_in_memory(s, rs->key)) {
        enum MHD_Result r = delivery_respond_result(rs, &missing);
        if (!missing)
            return r;
    }
    cs_store_job j;
    bool found = false;
    if (store_job_get(s->store, rs->job_id, &j, &found, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (found && j.status == CS_JOB_DONE) {
        store_job_clear(&j);
        enum MHD_Result r = delivery_respond_result(rs, &missing);
        if (!missing)
            return r;
        return respond_error(rs, 500, "internal", "", "job done but its result is missing");
    }
    if (found && (j.status == CS_JOB_FAILED || j.status == CS_JOB_CANCELLED)) {
        json_t *e = j.error ? json_loads(j.error, 0, NULL) : NULL;
        if (!e)
            e = json_pack("{s:s, s:s, s:s}", "code", job_status_name(j.status), "message",
                          "the job did not finish", "field", "");
        int status = j.status == CS_JOB_CANCELLED ? 409 : 422;
        const char *code = json_string_value(json_object_get(e, "code"));
        if (code && !strcmp(code, "timeout"))
            status = 504;
        /* the service failed, not the request: a 4xx would tell the client
         * (and the CLI's exit code 2) to fix its input */
        if (code && (!strcmp(code, "store_failed") || !strcmp(code, "interrupted")))
            status = 503;
        store_job_clear(&j);
        return respond_json(rs, status, json_pack("{s:o, s:s, s:s}", "error", e, "job",
                                                  rs->handle, "key", rs->key));
    }
    const char *st = found ? job_status_name(j.status) : "queued";
    /* the caller's own handle: GET shows the job, DELETE lets go of it */
    json_t *doc = json_pack("{s:s, s:s, s:s, s:b}", "job", rs->handle, "key", rs->key, "status",
                            st, "coalesced", coalesced);
    if (found)
        store_job_clear(&j);
    char loc[64];
    snprintf(loc, sizeof loc, "/v1/jobs/%s", rs->handle);
    char *text = json_dumps(doc, JSON_COMPACT | CS_JSON_REAL);
    json_decref(doc);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                             MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    MHD_add_response_header(r, "Location", loc);
    return queue(rs, 202, r);
}

/* Nothing to move (synth_request_trivial): the answer costs nothing, so it
 * is made and stored here, with no job.  Frees req. */
static enum MHD_Result answer_trivial(req_state *rs, cs_synth_request *req)
{
    cs_server *s = rs->srv;
    cs_error err;
    cs_error_clear(&err);
    cs_result *res = NULL;
    int rc = synth_run(req, &s->cfg.limits, NULL, &res, &err);
    cs_summary sum;
    if (rc == CS_OK) {
        jobs_summary(req, res, &sum);
        rc = delivery_save_result(s->store, s->cache, req, res, &err);
    }
    if (rc == CS_OK)
        rc = store_result_index_put(s->store, rs->key, &sum, &err);
    result_free(res);
    synth_request_free(req);
    if (rc)
        return respond_cs_error(rs, &err);
    bool missing = false;
    enum MHD_Result r = delivery_respond_result(rs, &missing);
    return missing ? respond_error(rs, 500, "internal", "", "the result just stored is missing")
                   : r;
}

/* What a POST body parsed to, kept by the body's SHA-256 so an identical
 * body (a herd of launch hooks) skips parsing and topology expansion. */
typedef struct post_memo {
    char key[65];
    char method[32];
    char ranks[16];
    cs_summary sum;
    char iso_key[65];    /* "" when it could not be computed */
    size_t lab_off;      /* the labelling text at canon + lab_off */
    size_t canon_len;
    char canon[];        /* the canonical request, NUL, the labelling, NUL */
} post_memo;

static cs_iso_env iso_env(cs_server *s)
{
    cs_iso_env e = {s->store, s->cache, &s->metrics, &s->log};
    return e;
}

/* A stored result of an isomorphic request, relabelled to this one and
 * stored under its key (iso_cache.h): true when rs->key now has a result. */
static bool iso_hit(req_state *rs, const post_memo *pm, const cs_synth_request *parsed)
{
    cs_server *s = rs->srv;
    cs_iso_env env = iso_env(s);
    cs_iso_probe p;
    cs_error err;
    cs_error_clear(&err);
    if (iso_cache_probe(&env, pm->iso_key, rs->key, &p, &err) != CS_OK) {
        atomic_fetch_add_explicit(&s->metrics.iso_errors, 1, memory_order_relaxed);
        log_event(&s->log, LOG_WARN, "iso_probe_failed", "key", rs->key, "error", err.message,
                  NULL);
        return false;
    }
    const char *labelling = pm->canon + pm->lab_off;
    bool hit = false;
    if (!p.self_stored && p.from[0]) {
        /* the request as parsed for this POST, else (a memo hit) again */
        cs_synth_request *req = NULL;
        const cs_synth_request *use = parsed;
        if (!use && synth_request_parse(pm->canon, pm->canon_len, &s->cfg.limits, &req, &err) ==
                        CS_OK)
            use = req;
        if (use && iso_cache_relabel(&env, use, pm->iso_key, labelling, &p, &err) == CS_OK)
            hit = true;
        else if (err.code != CS_EVERIFY)
            log_event(&s->log, LOG_WARN, "iso_relabel_failed", "key", rs->key, "from", p.from,
                      "error", err.message, NULL);
        synth_request_free(req);
    }
    /* list this request in its class (a queued job others may wait for, or
     * a result stored before the index existed) */
    if (!hit && !p.self_listed && store_iso_put(s->store, pm->iso_key, rs->key, labelling, &err))
        log_event(&s->log, LOG_WARN, "iso_index_failed", "key", rs->key, "error", err.message,
                  NULL);
    iso_cache_probe_clear(&p);
    return hit;
}

/* Reads options.wait_s and options.time_limit_s (checked as the full parse
 * checks them) and hashes the request without them, in a canonical spelling
 * (sorted keys, compact), into norm_hash.  False when they are not valid:
 * the full parse then names the problem. */
static bool delivery_options(json_t *doc, const cs_synth_limits *lim, double *wait_s,
                             double *time_limit_s, char norm_hash[65])
{
    json_t *opts = json_object_get(doc, "options");
    json_t *w = json_object_get(opts, "wait_s"), *t = json_object_get(opts, "time_limit_s");
    if ((w && (!json_is_number(w) || json_number_value(w) < 0 ||
               json_number_value(w) > lim->max_wait_s)) ||
        (t && (!json_is_number(t) || json_number_value(t) < 0 ||
               json_number_value(t) > lim->max_time_limit_s)))
        return false;
    *wait_s = w ? json_number_value(w) : 0;
    *time_limit_s = t ? json_number_value(t) : 0;
    json_incref(w);
    json_incref(t);
    if (w)
        json_object_del(opts, "wait_s");
    if (t)
        json_object_del(opts, "time_limit_s");
    /* no options and empty options are the same request */
    bool drop = json_is_object(opts) && json_object_size(opts) == 0;
    json_incref(opts);
    if (drop)
        json_object_del(doc, "options");
    char *text = json_dumps(doc, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (drop)
        json_object_set(doc, "options", opts);
    json_decref(opts);
    if (w)
        json_object_set_new(opts, "wait_s", w);
    if (t)
        json_object_set_new(opts, "time_limit_s", t);
    if (!text)
        return false;
    synth_sha256_hex(text, strlen(text), norm_hash);
    free(text);
    return true;
}

static enum MHD_Result refuse_remembered(req_state *rs, int code, const char *error_json)
{
    cs_server *s = rs->srv;
    atomic_fetch_add_explicit(&s->metrics.refusals_remembered, 1, memory_order_relaxed);
    size_t n = strlen(error_json) + 120;
    char *text = malloc(n);
    if (!text)
        return respond_error(rs, 500, "internal", "", "out of memory");
    if (rs->key[0])
        snprintf(text, n, "{\"error\":%s,\"key\":\"%s\"}", error_json, rs->key);
    else
        snprintf(text, n, "{\"error\":%s}", error_json);
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                             MHD_RESPMEM_MUST_FREE);
    MHD_add_response_header(r, "Content-Type", "application/json");
    return queue(rs, http_status_for(code), r);
}

/* Refuses with err and, when the same body would always be refused the
 * same way, remembers it by the body's hash (and its normalized hash). */
static enum MHD_Result refuse_body(req_state *rs, const char *body_hash, const char *norm_hash,
                                   const cs_error *err)
{
    int st = http_status_for(err->code);
    if (st == 400 || st == 413 || st == 422) {
        json_t *e = json_pack("{s:s, s:s, s:s}", "code", cs_status_name(err->code), "message",
                              err->message[0] ? err->message : cs_status_name(err->code),
                              "field", err->field);
        char *ej = e ? json_dumps(e, JSON_COMPACT) : NULL;
        json_decref(e);
        if (ej)
            delivery_remember_refusal(rs->srv->cache, 'B', body_hash, err->code, ej);
        if (ej && norm_hash)
            delivery_remember_refusal(rs->srv->cache, 'N', norm_hash, err->code, ej);
        free(ej);
    }
    return respond_cs_error(rs, err);
}

/* On the parse pool: parse, validate, key, submit; answer, or park the
 * connection on the job when the client asked to wait (*parked).  What a
 * request parses to is kept by the hash of its body without the delivery
 * options (post_memo), and refusals by the hashes and by key, so a herd of
 * identical requests (launch hooks) costs one parse. */
static enum MHD_Result synthesize_answer(req_state *rs, bool *parked)
{
    cs_server *s = rs->srv;
    cs_error err;
    cs_error_clear(&err);
    char body_hash[65];
    synth_sha256_hex(rs->body, rs->len, body_hash);
    int code = 0;
    const char *ej = NULL;
    cs_blob *refused = delivery_refusal(s->cache, 'B', body_hash, &code, &ej);
    if (refused) {
        enum MHD_Result r = refuse_remembered(rs, code, ej);
        blob_unref(refused);
        return r;
    }
    json_error_t jerr;
    /* a body saved or sent with a UTF-8 byte-order mark (PowerShell, Windows
     * editors): ignored, as RFC 8259 section 8.1 allows */
    size_t bom = cs_utf8_bom_len(rs->body, rs->len);
    json_t *doc = json_loadb(rs->body + bom, rs->len - bom, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc) {
        cs_error_set(&err, CS_EINVAL, "body", "malformed JSON at line %d column %d: %s",
                     jerr.line, jerr.column, jerr.text);
        return refuse_body(rs, body_hash, NULL, &err);
    }
    double wait_s = 0, time_limit_s = 0;
    char norm_hash[65];
    bool delivery_ok = delivery_options(doc, &s->cfg.limits, &wait_s, &time_limit_s, norm_hash);
    refused = delivery_ok ? delivery_refusal(s->cache, 'N', norm_hash, &code, &ej) : NULL;
    if (refused) {
        json_decref(doc);
        enum MHD_Result r = refuse_remembered(rs, code, ej);
        blob_unref(refused);
        return r;
    }
    char memo_key[80];
    snprintf(memo_key, sizeof memo_key, "M|%s", norm_hash);
    cs_blob *mb = delivery_ok ? cache_get(s->cache, memo_key) : NULL;
    /* kept until the isomorphism check, which may need its topology */
    cs_synth_request *parsed = NULL;
    if (!mb) {
        cs_synth_request *req = NULL;
        int rc = synth_request_from_json(doc, &s->cfg.limits, &req, &err);
        json_decref(doc);
        doc = NULL;
        if (rc)
            return refuse_body(rs, body_hash, delivery_ok ? norm_hash : NULL, &err);
        snprintf(rs->key, sizeof rs->key, "%s", req->key);
        if (synth_request_trivial(req))
            return answer_trivial(rs, req);
        char *canon = synth_request_canonical_text(req);
        size_t cl = canon ? strlen(canon) : 0;
        char iso_key[65] = "", *labelling = NULL;
        cs_iso_env env = iso_env(s);
        if (s->cfg.iso_cache)
            iso_cache_key(&env, req, iso_key, &labelling);
        size_t ll = labelling ? strlen(labelling) : 0;
        post_memo *pm = canon ? malloc(sizeof *pm + cl + 1 + ll + 1) : NULL;
        if (!pm) {
            free(canon);
            free(labelling);
            synth_request_free(req);
            return respond_error(rs, 500, "internal", "", "out of memory");
        }
        snprintf(pm->iso_key, sizeof pm->iso_key, "%s", labelling ? iso_key : "");
        pm->lab_off = cl + 1;
        memcpy(pm->canon + cl + 1, labelling ? labelling : "", ll + 1);
        free(labelling);
        snprintf(pm->key, sizeof pm->key, "%s", req->key);
        snprintf(pm->method, sizeof pm->method, "%s", req->method);
        snprintf(pm->ranks, sizeof pm->ranks, "%d", req->topology->ranks);
        jobs_summary(req, NULL, &pm->sum);
        pm->canon_len = cl;
        memcpy(pm->canon, canon, cl + 1);
        wait_s = req->wait_s;
        time_limit_s = req->time_limit_s;
        free(canon);
        parsed = req;
        mb = blob_adopt((char *)pm, sizeof *pm + cl + 1 + ll);
        if (!mb) {
            synth_request_free(parsed);
            return respond_error(rs, 500, "internal", "", "out of memory");
        }
        if (delivery_ok)
            cache_put(s->cache, memo_key, mb);
    }
    json_decref(doc);
    const post_memo *pm = (const post_memo *)mb->data;
    snprintf(rs->key, sizeof rs->key, "%s", pm->key);
    refused = delivery_refusal(s->cache, 'K', rs->key, &code, &ej);
    if (refused) {
        synth_request_free(parsed);
        blob_unref(mb);
        enum MHD_Result r = refuse_remembered(rs, code, ej);
        blob_unref(refused);
        return r;
    }
    if (delivery_result_in_memory(s, rs->key)) {
        synth_request_free(parsed);
        blob_unref(mb);
        atomic_fetch_add_explicit(&s->metrics.cache_hits, 1, memory_order_relaxed);
        bool missing = false;
        enum MHD_Result r = delivery_respond_result(rs, &missing);
        if (!missing)
            return r;
        return respond_error(rs, 500, "internal", "", "the result left memory and the store");
    }
    bool relabelled = pm->iso_key[0] && iso_hit(rs, pm, parsed);
    if (relabelled) {
        synth_request_free(parsed);
        blob_unref(mb);
        atomic_fetch_add_explicit(&s->metrics.cache_hits, 1, memory_order_relaxed);
        bool missing = false;
        enum MHD_Result r = delivery_respond_result(rs, &missing);
        if (!missing)
            return r;
        return respond_error(rs, 500, "internal", "", "the relabelled result vanished");
    }
    /* The worker that claims the job here runs this parse rather than
     * parsing pm->canon again (jobs.h); handed over before the submit, as a
     * worker may claim the job at once.  A memo hit has no parse to hand. */
    bool handed = parsed != NULL;
    jobs_hand_over(s->jobs, parsed);
    parsed = NULL;
    char new_id[40];
    store_new_id(new_id);
    cs_submit sub;
    int rc = store_job_submit(s->store, new_id, rs->key, pm->canon, &pm->sum, time_limit_s,
                              s->cfg.max_queued, &sub, &err);
    if (handed && (rc || (sub.outcome != CS_SUBMIT_CREATED && sub.outcome != CS_SUBMIT_JOINED)))
        jobs_hand_back(s->jobs, rs->key);
    char ranks[16], method[32];
    snprintf(ranks, sizeof ranks, "%s", pm->ranks);
    snprintf(method, sizeof method, "%s", pm->method);
    blob_unref(mb);
    if (rc)
        return respond_cs_error(rs, &err);
    switch (sub.outcome) {
    case CS_SUBMIT_CACHED: {
        atomic_fetch_add_explicit(&s->metrics.cache_hits, 1, memory_order_relaxed);
        bool missing = false;
        enum MHD_Result r = delivery_respond_result(rs, &missing);
        if (!missing)
            return r;
        return respond_error(rs, 500, "internal", "", "the stored result vanished");
    }
    case CS_SUBMIT_FULL: {
        atomic_fetch_add_explicit(&s->metrics.rejected_queue_full, 1, memory_order_relaxed);
        json_t *e = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "queue_full", "message",
                              "too many queued jobs; retry later", "field", "");
        char *text = json_dumps(e, JSON_COMPACT | CS_JSON_REAL);
        json_decref(e);
        struct MHD_Response *r = MHD_create_response_from_buffer(strlen(text), text,
                                                                 MHD_RESPMEM_MUST_FREE);
        MHD_add_response_header(r, "Content-Type", "application/json");
        MHD_add_response_header(r, "Retry-After", "5");
        return queue(rs, 429, r);
    }
    case CS_SUBMIT_CREATED:
        atomic_fetch_add_explicit(&s->metrics.cache_misses, 1, memory_order_relaxed);
        jobs_notify(s->jobs);
        log_event(&s->log, LOG_INFO, "job_queued", "id", sub.job_id, "key", rs->key, "method",
                  method, "ranks", ranks, NULL);
        break;
    case CS_SUBMIT_JOINED:
        atomic_fetch_add_explicit(&s->metrics.cache_misses, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->metrics.coalesced, 1, memory_order_relaxed);
        break;
    }
    snprintf(rs->job_id, sizeof rs->job_id, "%s", sub.job_id);
    snprintf(rs->handle, sizeof rs->handle, "%s", sub.handle_id);
    if (wait_s > 0 && !atomic_load(&s->stopping)) {
        /* the connection is suspended already: the job's waiter resumes it */
        rs->phase = 1;
        if (jobs_wait(s->jobs, rs->job_id, wait_s, wake_parked, rs) == CS_OK) {
            *parked = true;
            return MHD_YES;
        }
        rs->phase = 2;
    }
    return answer_job(rs, sub.outcome == CS_SUBMIT_JOINED);
}

static bool synthesize_work(req_state *rs)
{
    bool parked = false;
    synthesize_answer(rs, &parked);
    return !parked;
}

static enum MHD_Result handle_synthesize(req_state *rs)
{
    if (rs->phase == 2)
        return answer_job(rs, false);
    if (!rs->body || rs->len == 0)
        return respond_error(rs, 400, "invalid", "body",
                             "POST a JSON object {topology, collective, method?, options?}");
    return offload(rs, synthesize_work);
}

/* ---- dispatch --------------------------------------------------------------------------- */

static enum MHD_Result preflight(req_state *rs)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
    MHD_add_response_header(r, "Access-Control-Allow-Headers", "Content-Type, Authorization");
    MHD_add_response_header(r, "Access-Control-Max-Age", "600");
    MHD_add_response_header(r, "Allow", "GET, POST, DELETE, OPTIONS");
    return queue(rs, 204, r);
}

static bool is(const char *m, const char *want) { return strcmp(m, want) == 0; }

enum MHD_Result route_request(req_state *rs, const char *url, const char *method)
{
    bool get = is(method, "GET") || is(method, "HEAD");
    if (is(method, "OPTIONS")) {
        rs->route = ROUTE_PREFLIGHT;
        return preflight(rs);
    }
    if (!strcmp(url, "/v1/health")) {
        rs->route = ROUTE_HEALTH;
        return get ? handle_health(rs) : method_not_allowed(rs, "GET, HEAD, OPTIONS");
    }
    if (!strcmp(url, "/v1/topologies")) {
        rs->route = ROUTE_TOPOLOGIES;
        return get ? handle_topologies(rs) : method_not_allowed(rs, "GET, HEAD, OPTIONS");
    }
    if (!strncmp(url, "/v1/topologies/", 15)) {
        rs->route = ROUTE_TOPOLOGY;
        if (!get)
            return method_not_allowed(rs, "GET, HEAD, OPTIONS");
        return offload(rs, topology_work);
    }
    if (!strcmp(url, "/v1/synthesize")) {
        rs->route = ROUTE_SYNTHESIZE;
        if (!is(method, "POST"))
            return method_not_allowed(rs, "POST, OPTIONS");
        if (!authorized(rs))
            return unauthorized(rs);
        return handle_synthesize(rs);
    }
    if (!strcmp(url, "/v1/jobs") || !strcmp(url, "/v1/results")) {
        bool results = url[4] == 'r';
        rs->route = results ? ROUTE_RESULTS_LIST : ROUTE_JOBS_LIST;
        return get ? route_lists(rs, results) : method_not_allowed(rs, "GET, HEAD, OPTIONS");
    }
    if (!strncmp(url, "/v1/jobs/", 9)) {
        const char *id = url + 9;
        if (get) {
            rs->route = ROUTE_JOB_GET;
            return handle_job_get(rs, id);
        }
        if (is(method, "DELETE")) {
            rs->route = ROUTE_JOB_DELETE;
            if (!authorized(rs))
                return unauthorized(rs);
            return handle_job_delete(rs, id);
        }
        rs->route = ROUTE_JOB_GET;
        return method_not_allowed(rs, "GET, HEAD, DELETE, OPTIONS");
    }
    if (!strncmp(url, "/v1/results/", 12)) {
        rs->route = ROUTE_RESULT;
        return get ? delivery_result_get(rs, url + 12)
                   : method_not_allowed(rs, "GET, HEAD, OPTIONS");
    }
    if (!strcmp(url, "/metrics")) {
        rs->route = ROUTE_METRICS;
        return get ? handle_metrics(rs) : method_not_allowed(rs, "GET, HEAD, OPTIONS");
    }
    if (!strncmp(url, "/v1/", 4) || !strcmp(url, "/v1")) {
        rs->route = ROUTE_OTHER;
        return respond_error(rs, 404, "not_found", "path", "no route %.100s", url);
    }
    rs->route = ROUTE_STATIC;
    if (!get)
        return method_not_allowed(rs, "GET, HEAD, OPTIONS");
    return serve_static(rs, url);
}
