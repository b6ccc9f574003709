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
#include "server_internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "msccl_xml.h"
#include "synthesize.h"
#include "cuda_gen.h"

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

/* ---- results: memory cache, then store --------------------------------------------- */

/* CS_OK with *blob (a reference) or *blob NULL when the key has no result. */
static int result_blob(cs_server *s, const char *key, cs_blob **blob, cs_error *err)
{
    *blob = cache_get(s->cache, key);
    if (*blob) {
        atomic_fetch_add_explicit(&s->metrics.memory_hits, 1, memory_order_relaxed);
        return CS_OK;
    }
    char *text = NULL;
    bool found = false;
    int rc = store_result_get(s->store, key, &text, NULL, &found, err);
    if (rc || !found)
        return rc;
    *blob = blob_adopt(text, strlen(text));
    if (!*blob)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    cache_put(s->cache, key, *blob);
    return CS_OK;
}

static enum MHD_Result respond_result(req_state *rs, cs_blob *b, int status)
{
    char etag[72];
    snprintf(etag, sizeof etag, "\"%s\"", rs->key);
    return respond_blob(rs, status, b, "application/json", "ETag", etag);
}

/* ---- health, topologies, metrics ------------------------------------------------------ */

static enum MHD_Result handle_health(req_state *rs)
{
    cs_server *s = rs->srv;
    cs_error err;
    cs_error_clear(&err);
    int rc = store_ping(s->store, &err);
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
    cs_blob *b = NULL;
    if (j.status == CS_JOB_DONE && result_blob(s, j.key, &b, &err) != CS_OK) {
        store_job_clear(&j);
        json_decref(doc);
        return respond_cs_error(rs, &err);
    }
    store_job_clear(&j);
    char *text = json_dumps(doc, JSON_COMPACT | CS_JSON_REAL);
    json_decref(doc);
    if (!text) {
        blob_unref(b);
        return respond_error(rs, 500, "internal", "", "out of memory");
    }
    if (b) {
        /* splice the stored result text in verbatim: no parse, no re-dump */
        size_t tl = strlen(text);
        char *full = malloc(tl + b->len + 16);
        if (!full) {
            free(text);
            blob_unref(b);
            return respond_error(rs, 500, "internal", "", "out of memory");
        }
        memcpy(full, text, tl - 1);
        size_t n = tl - 1;
        memcpy(full + n, ",\"result\":", 10);
        n += 10;
        memcpy(full + n, b->data, b->len);
        n += b->len;
        full[n++] = '}';
        full[n] = '\0';
        free(text);
        text = full;
        blob_unref(b);
    }
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
    cs_blob *b = cache_get(s->cache, rs->key);
    if (b) {
        enum MHD_Result r = respond_result(rs, b, 200);
        blob_unref(b);
        return r;
    }
    cs_store_job j;
    bool found = false;
    if (store_job_get(s->store, rs->job_id, &j, &found, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (found && j.status == CS_JOB_DONE) {
        store_job_clear(&j);
        if (result_blob(s, rs->key, &b, &err) != CS_OK)
            return respond_cs_error(rs, &err);
        if (b) {
            enum MHD_Result r = respond_result(rs, b, 200);
            blob_unref(b);
            return r;
        }
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
    json_t *doc = rc == CS_OK ? synth_result_to_json(req, res) : NULL;
    cs_summary sum;
    if (rc == CS_OK)
        jobs_summary(req, res, &sum);
    char *text = doc ? json_dumps(doc, JSON_COMPACT | CS_JSON_REAL) : NULL;
    char *canon = text ? synth_request_canonical_text(req) : NULL;
    json_decref(doc);
    result_free(res);
    synth_request_free(req);
    if (rc || !canon) {
        free(text);
        free(canon);
        return rc ? respond_cs_error(rs, &err) : respond_error(rs, 500, "internal", "",
                                                               "out of memory");
    }
    rc = store_result_put(s->store, rs->key, canon, text, &err);
    if (rc == CS_OK)
        rc = store_result_index_put(s->store, rs->key, &sum, &err);
    free(canon);
    cs_blob *b = rc == CS_OK ? blob_adopt(text, strlen(text)) : NULL;
    if (!b) {
        free(text);
        return rc ? respond_cs_error(rs, &err) : respond_error(rs, 500, "internal", "",
                                                               "out of memory");
    }
    cache_put(s->cache, rs->key, b);
    enum MHD_Result r = respond_result(rs, b, 200);
    blob_unref(b);
    return r;
}

/* On the parse pool: parse, validate, key, submit; answer, or park the
 * connection on the job when the client asked to wait (*parked). */
static enum MHD_Result synthesize_answer(req_state *rs, bool *parked)
{
    cs_server *s = rs->srv;
    json_error_t jerr;
    json_t *doc = json_loadb(rs->body, rs->len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return respond_error(rs, 400, "invalid_json", "body",
                             "malformed JSON at line %d column %d: %s", jerr.line, jerr.column,
                             jerr.text);
    cs_synth_request *req = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = synth_request_from_json(doc, &s->cfg.limits, &req, &err);
    json_decref(doc);
    if (rc)
        return respond_cs_error(rs, &err);
    snprintf(rs->key, sizeof rs->key, "%s", req->key);
    double wait_s = req->wait_s;

    cs_blob *b = cache_get(s->cache, req->key);
    if (b) {
        atomic_fetch_add_explicit(&s->metrics.cache_hits, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&s->metrics.memory_hits, 1, memory_order_relaxed);
        synth_request_free(req);
        enum MHD_Result r = respond_result(rs, b, 200);
        blob_unref(b);
        return r;
    }
    if (synth_request_trivial(req))
        return answer_trivial(rs, req);
    char *canon = synth_request_canonical_text(req);
    char new_id[40];
    store_new_id(new_id);
    cs_submit sub;
    cs_summary sum;
    jobs_summary(req, NULL, &sum);
    rc = canon ? store_job_submit(s->store, new_id, req->key, canon, &sum, req->time_limit_s,
                                  s->cfg.max_queued, &sub, &err)
               : cs_error_set(&err, CS_ENOMEM, "", "out of memory");
    free(canon);
    char ranks[16];
    snprintf(ranks, sizeof ranks, "%d", req->topology->ranks);
    char method[32];
    snprintf(method, sizeof method, "%s", req->method);
    synth_request_free(req);
    if (rc)
        return respond_cs_error(rs, &err);
    switch (sub.outcome) {
    case CS_SUBMIT_CACHED: {
        atomic_fetch_add_explicit(&s->metrics.cache_hits, 1, memory_order_relaxed);
        cs_blob *nb = blob_adopt(sub.result_json, strlen(sub.result_json));
        if (!nb)
            return respond_error(rs, 500, "internal", "", "out of memory");
        cache_put(s->cache, rs->key, nb);
        enum MHD_Result r = respond_result(rs, nb, 200);
        blob_unref(nb);
        return r;
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

/* ---- results and generated code -------------------------------------------------------- */

typedef struct loaded_result {
    cs_result *res;
    cs_topology *topo;
    json_t *doc;
} loaded_result;

static void loaded_free(loaded_result *l)
{
    result_free(l->res);
    topology_free(l->topo);
    json_decref(l->doc);
}

static int load_result(cs_server *s, const char *key, const cs_blob *b, loaded_result *out,
                       cs_error *err)
{
    memset(out, 0, sizeof *out);
    char *result_text = NULL, *request_text = NULL;
    bool found = false;
    int rc = store_result_get(s->store, key, &result_text, &request_text, &found, err);
    if (rc)
        return rc;
    if (!found) {
        free(result_text);
        free(request_text);
        return cs_error_set(err, CS_EINTERNAL, "key", "result vanished");
    }
    (void)b;
    json_t *req = json_loads(request_text, 0, NULL);
    out->doc = json_loads(result_text, 0, NULL);
    free(result_text);
    free(request_text);
    if (!req || !out->doc) {
        json_decref(req);
        loaded_free(out);
        return cs_error_set(err, CS_EINTERNAL, "key", "stored result is not JSON");
    }
    cs_topology_parse_options po = {.max_ranks = 1 << 24};
    rc = topology_from_json(json_object_get(req, "topology"), &po, &out->topo, err);
    json_decref(req);
    if (!rc)
        rc = result_from_json(out->doc, &out->res, err);
    if (rc)
        loaded_free(out);
    return rc;
}

static int algorithm_index(const cs_result *res, const cs_algorithm *a)
{
    for (int i = 0; i < res->nalgs; i++)
        if (res->algs[i] == a)
            return i;
    return 0;
}

static enum MHD_Result handle_result(req_state *rs, const char *key)
{
    cs_server *s = rs->srv;
    if (!is_hex(key, 64))
        return respond_error(rs, 400, "invalid", "key", "a result key is 64 lowercase hex digits");
    snprintf(rs->key, sizeof rs->key, "%s", key);
    const char *format = arg(rs, "format");
    const char *size_s = arg(rs, "size");
    const char *alg_s = arg(rs, "alg");
    if (!format || !*format)
        format = "json";
    bool fmt_json = !strcmp(format, "json"), fmt_xml = !strcmp(format, "msccl-xml"),
         fmt_cuda = !strcmp(format, "cuda");
    if (!fmt_json && !fmt_xml && !fmt_cuda)
        return respond_error(rs, 400, "invalid", "format",
                             "format must be json, msccl-xml or cuda");
    double size = 0;
    if (size_s) {
        char *end;
        errno = 0;
        size = strtod(size_s, &end);
        if (errno || end == size_s || *end || !isfinite(size) || size <= 0 || size > 1e15)
            return respond_error(rs, 400, "invalid", "size",
                                 "size must be a number of bytes in (0, 1e15]");
    }
    long alg = -1;
    if (alg_s) {
        char *end;
        errno = 0;
        alg = strtol(alg_s, &end, 10);
        if (errno || end == alg_s || *end || alg < 0 || alg > 100000)
            return respond_error(rs, 400, "invalid", "alg", "alg must be a frontier index >= 0");
        if (size_s)
            return respond_error(rs, 400, "invalid", "alg", "give size or alg, not both");
    }
    const char *inm = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "If-None-Match");
    cs_error err;
    cs_error_clear(&err);

    if (fmt_json && !size_s && alg < 0) {
        cs_blob *b = NULL;
        if (result_blob(s, key, &b, &err) != CS_OK)
            return respond_cs_error(rs, &err);
        if (!b) {
            atomic_fetch_add_explicit(&s->metrics.cache_misses, 1, memory_order_relaxed);
            return respond_error(rs, 404, "not_found", "key", "no result for key %s", key);
        }
        atomic_fetch_add_explicit(&s->metrics.cache_hits, 1, memory_order_relaxed);
        enum MHD_Result r;
        if (inm && strlen(inm) == 66 && !strncmp(inm + 1, key, 64)) {
            struct MHD_Response *resp =
                MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
            r = queue(rs, 304, resp);
        } else {
            r = respond_result(rs, b, 200);
        }
        blob_unref(b);
        return r;
    }
    /* Selection and code generation need the parsed result and topology. */
    const char *runtime_s = arg(rs, "runtime");
    const char *proto = arg(rs, "proto");
    cs_msccl_runtime runtime = CS_MSCCL_RUNTIME_AUTO;
    if (fmt_xml && runtime_s && msccl_runtime_from_name(runtime_s, &runtime, &err) != CS_OK) {
        snprintf(err.field, sizeof err.field, "runtime");
        return respond_cs_error(rs, &err);
    }
    if (fmt_xml && proto && strcmp(proto, "Simple") && strcmp(proto, "LL") &&
        strcmp(proto, "LL128"))
        return respond_error(rs, 400, "invalid", "proto", "proto must be Simple, LL or LL128");
    const char *elem_s = arg(rs, "elem");
    cs_cuda_elem elem = CS_CUDA_FLOAT;
    if (fmt_cuda && elem_s && cuda_elem_from_name(elem_s, &elem, &err) != CS_OK) {
        snprintf(err.field, sizeof err.field, "elem");
        return respond_cs_error(rs, &err);
    }
    char selkey[160];
    if (size_s)
        snprintf(selkey, sizeof selkey, "%s|json|size=%.17g", key, size);
    else
        snprintf(selkey, sizeof selkey, "%s|json|alg=%ld", key, alg);
    if (fmt_json) {
        /* a selection already made for this size is answered from memory */
        cs_blob *sel = cache_get(s->cache, selkey);
        if (sel) {
            enum MHD_Result ret = respond_blob(rs, 200, sel, "application/json", NULL, NULL);
            blob_unref(sel);
            return ret;
        }
    }
    cs_blob *b = NULL;
    if (result_blob(s, key, &b, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (!b)
        return respond_error(rs, 404, "not_found", "key", "no result for key %s", key);
    blob_unref(b);
    loaded_result lr;
    if (load_result(s, key, NULL, &lr, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    if (lr.res->nalgs == 0) {
        loaded_free(&lr);
        return respond_error(rs, 404, "not_found", "key", "the result has no algorithm");
    }
    int idx = 0;
    if (size_s)
        idx = algorithm_index(lr.res, result_best_for_size(lr.res, lr.topo, size));
    else if (alg >= 0) {
        if (alg >= lr.res->nalgs) {
            int n = lr.res->nalgs;
            loaded_free(&lr);
            return respond_error(rs, 400, "invalid", "alg", "alg must be < %d (frontier size)", n);
        }
        idx = (int)alg;
    }
    const cs_algorithm *a = lr.res->algs[idx];
    if (fmt_json) {
        json_t *frontier = json_object_get(lr.doc, "frontier");
        json_t *one = json_array();
        json_array_append(one, json_array_get(frontier, (size_t)idx));
        json_t *out = json_deep_copy(lr.doc);
        json_object_set_new(out, "frontier", one);
        json_t *sel = json_pack("{s:i, s:i}", "index", idx, "of", lr.res->nalgs);
        if (size_s) {
            json_object_set_new(sel, "bytes", json_real(size));
            json_object_set_new(sel, "cost_us", json_real(algorithm_cost_us(a, lr.topo, size)));
        }
        json_object_set_new(out, "selected", sel);
        loaded_free(&lr);
        char *text = json_dumps(out, JSON_COMPACT | CS_JSON_REAL);
        json_decref(out);
        cs_blob *ob = text ? blob_adopt(text, strlen(text)) : NULL;
        if (!ob)
            return respond_error(rs, 500, "internal", "", "out of memory");
        cache_put(s->cache, selkey, ob);
        enum MHD_Result ret = respond_blob(rs, 200, ob, "application/json", NULL, NULL);
        blob_unref(ob);
        return ret;
    }
    /* generated code: memory cache, then store, then generate and keep */
    char variant[128], ckey[256];
    if (fmt_xml)
        snprintf(variant, sizeof variant, "alg=%d;runtime=%s;proto=%s", idx,
                 msccl_runtime_name(runtime), proto ? proto : "Simple");
    else
        snprintf(variant, sizeof variant, "alg=%d;elem=%s", idx, elem_s ? elem_s : "float");
    snprintf(ckey, sizeof ckey, "%s|%s|%s", key, format, variant);
    const char *ctype = fmt_xml ? "application/xml" : "text/x-cuda; charset=utf-8";
    cs_blob *code = cache_get(s->cache, ckey);
    if (!code) {
        char *body = NULL;
        bool found = false;
        if (store_artifact_get(s->store, key, format, variant, &body, &found, &err) != CS_OK) {
            loaded_free(&lr);
            return respond_cs_error(rs, &err);
        }
        if (!found) {
            size_t len = 0;
            int rc = CS_EUNSUPPORTED;
            if (fmt_xml) {
                cs_msccl_options mo;
                msccl_options_default(&mo);
                mo.runtime = runtime;
                if (proto)
                    mo.proto = proto;
                rc = msccl_xml_generate(a, lr.topo, &mo, &body, &len, &err);
            }
            else {
                cs_cuda_options co;
                cuda_options_default(&co);
                co.elem = elem;
                rc = cuda_generate(a, lr.topo, &co, &body, &len, &err);
            }
            if (rc) {
                loaded_free(&lr);
                if (err.code == CS_OK)
                    err.code = rc;
                if (rc == CS_EUNSUPPORTED || rc == CS_ELIMIT) {
                    return respond_error(rs, 422, cs_status_name(rc), "format", "%s",
                                         err.message);
                }
                return respond_cs_error(rs, &err);
            }
            atomic_fetch_add_explicit(&s->metrics.codegen_total, 1, memory_order_relaxed);
            cs_error e2;
            if (store_artifact_put(s->store, key, format, variant, body, &e2) != CS_OK)
                log_event(&s->log, LOG_WARN, "artifact_store_failed", "key", key, "error",
                          e2.message, NULL);
        }
        code = blob_adopt(body, strlen(body));
        if (!code) {
            loaded_free(&lr);
            return respond_error(rs, 500, "internal", "", "out of memory");
        }
        cache_put(s->cache, ckey, code);
    }
    loaded_free(&lr);
    enum MHD_Result r = respond_blob(rs, 200, code, ctype, NULL, NULL);
    blob_unref(code);
    return r;
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
        return get ? handle_result(rs, url + 12) : method_not_allowed(rs, "GET, HEAD, OPTIONS");
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
