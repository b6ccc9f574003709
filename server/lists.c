/*
 * lists.c - GET /v1/results and GET /v1/jobs: what the store holds, newest
 * first, a page at a time, filtered by topology, collective, method (and
 * status, for jobs).  The shape is CONTRACT.md's:
 *
 *   {"results": [{"key", "topology", "collective", "method", "ranks", "created",
 *                 "nalgs"}...], "next": CURSOR-or-null}
 *   {"jobs": [{"id", "key", "status", "created", "updated", "method", "topology",
 *              "collective"}...], "next": CURSOR-or-null}
 *
 * Lists never read result documents (they can be hundreds of MB): the store
 * keeps a summary of each job (written at submission) and each result
 * (written when it is stored: jobs_summary).  Results stored without one (a
 * daemon killed in between, a store from before the lists) are summarized
 * from their documents by lists_backfill, which the daemon runs on its parse
 * pool at start.
 */
#include "server_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LIST_DEFAULT 50
#define LIST_MAX 500

/* The same from a stored result document (and its request, for the ranks of
 * an empty frontier). */
static int summary_of_documents(const char *result_text, const char *request_text,
                                cs_summary *out)
{
    memset(out, 0, sizeof *out);
    out->root = -1;
    json_t *doc = json_loads(result_text, 0, NULL);
    if (!doc)
        return CS_EINVAL;
    const char *topo = json_string_value(json_object_get(doc, "topology"));
    const char *method = json_string_value(json_object_get(doc, "method"));
    json_t *coll = json_object_get(doc, "collective");
    const char *kind = json_string_value(json_is_object(coll) ? json_object_get(coll, "kind")
                                                              : coll);
    json_t *root = json_is_object(coll) ? json_object_get(coll, "root") : NULL;
    json_t *front = json_object_get(doc, "frontier");
    snprintf(out->topology, sizeof out->topology, "%s", topo ? topo : "");
    snprintf(out->method, sizeof out->method, "%s", method ? method : "");
    snprintf(out->collective, sizeof out->collective, "%s", kind ? kind : "");
    if (json_is_integer(root))
        out->root = (int)json_integer_value(root);
    out->nalgs = (int)json_array_size(front);
    json_t *ranks = json_object_get(json_array_get(front, 0), "ranks");
    if (json_is_integer(ranks)) {
        out->ranks = (int)json_integer_value(ranks);
    } else if (request_text) {
        json_t *req = json_loads(request_text, 0, NULL);
        json_t *r = json_object_get(json_object_get(req, "topology"), "ranks");
        out->ranks = json_is_integer(r) ? (int)json_integer_value(r) : 0;
        json_decref(req);
    }
    json_decref(doc);
    return CS_OK;
}

void lists_backfill(cs_server *s)
{
    enum { BATCH = 64 };
    char keys[BATCH][65];
    int n = 0, done = 0, bad = 0;
    cs_error err;
    cs_error_clear(&err);
    while (!atomic_load(&s->stopping) &&
           store_results_unindexed(s->store, BATCH, keys, &n, &err) == CS_OK && n > 0) {
        int indexed = 0;
        for (int i = 0; i < n; i++) {
            /* the header (the document without sends) says all a summary needs */
            cs_stored_result row;
            bool found = false;
            cs_summary sum;
            if (store_result_load(s->store, keys[i], STORE_WANT_REQUEST, &row, &found, &err) ==
                    CS_OK &&
                found && summary_of_documents(row.header, row.request, &sum) == CS_OK &&
                store_result_index_put(s->store, keys[i], &sum, &err) == CS_OK)
                indexed++;
            else
                bad++;
            if (found)
                store_result_clear(&row);
        }
        done += indexed;
        if (indexed == 0)
            break; /* only unreadable ones left: do not loop on them */
    }
    if (done || bad) {
        char d[16], b[16];
        snprintf(d, sizeof d, "%d", done);
        snprintf(b, sizeof b, "%d", bad);
        log_event(&s->log, bad ? LOG_WARN : LOG_INFO, "results_indexed", "indexed", d,
                  "unreadable", b, NULL);
    }
}

/* ---- query parameters -------------------------------------------------------------- */

static const char *arg(req_state *rs, const char *name)
{
    const char *v = MHD_lookup_connection_value(rs->conn, MHD_GET_ARGUMENT_KIND, name);
    return v && *v ? v : NULL;
}

/* limit, after and the filters common to both lists. */
static enum MHD_Result parse_query(req_state *rs, cs_list_query *q, bool *ok)
{
    *ok = false;
    memset(q, 0, sizeof *q);
    q->status = -1;
    q->limit = LIST_DEFAULT;
    const char *limit = arg(rs, "limit");
    if (limit) {
        char *end;
        errno = 0;
        long v = strtol(limit, &end, 10);
        if (errno || end == limit || *end || v < 1 || v > LIST_MAX)
            return respond_error(rs, 400, "invalid", "limit",
                                 "limit must be an integer in [1, %d]", LIST_MAX);
        q->limit = (int)v;
    }
    q->after = arg(rs, "after");
    q->topology = arg(rs, "topology");
    q->method = arg(rs, "method");
    q->collective = arg(rs, "collective");
    cs_coll_kind kind;
    if (q->collective && collective_kind_from_name(q->collective, &kind) != CS_OK)
        return respond_error(rs, 400, "invalid", "collective",
                             "collective must be a collective kind (allgather, allreduce, ...)");
    if ((q->topology && strlen(q->topology) > 127) || (q->method && strlen(q->method) > 31))
        return respond_error(rs, 400, "invalid", q->method && strlen(q->method) > 31 ? "method"
                                                                                      : "topology",
                             "filter value too long");
    *ok = true;
    return MHD_YES;
}

static void add_summary(json_t *item, const cs_summary *sum)
{
    /* jobs submitted before the lists existed have no summary: null */
    json_object_set_new(item, "topology", sum->topology[0] ? json_string(sum->topology) : json_null());
    json_object_set_new(item, "collective",
                        sum->collective[0] ? json_string(sum->collective) : json_null());
    if (sum->root >= 0)
        json_object_set_new(item, "root", json_integer(sum->root));
    json_object_set_new(item, "method", sum->method[0] ? json_string(sum->method) : json_null());
    json_object_set_new(item, "ranks", sum->ranks > 0 ? json_integer(sum->ranks) : json_null());
}

static enum MHD_Result respond_page(req_state *rs, const char *name, json_t *items,
                                    const char *next)
{
    return respond_json(rs, 200, json_pack("{s:o, s:o}", name, items, "next",
                                           next[0] ? json_string(next) : json_null()));
}

/* ---- the routes (on the parse pool) ------------------------------------------------ */

static enum MHD_Result results_list(req_state *rs)
{
    cs_list_query q;
    bool ok;
    enum MHD_Result r = parse_query(rs, &q, &ok);
    if (!ok)
        return r;
    if (arg(rs, "status"))
        return respond_error(rs, 400, "invalid", "status", "results have no status; see /v1/jobs");
    cs_result_row *rows = NULL;
    int n = 0;
    char next[96];
    cs_error err;
    cs_error_clear(&err);
    if (store_results_list(rs->srv->store, &q, &rows, &n, next, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    json_t *items = json_array();
    for (int i = 0; i < n; i++) {
        json_t *it = json_pack("{s:s}", "key", rows[i].key);
        add_summary(it, &rows[i].sum);
        json_object_set_new(it, "created", json_real(rows[i].created));
        json_object_set_new(it, "nalgs", json_integer(rows[i].sum.nalgs));
        json_array_append_new(items, it);
    }
    free(rows);
    return respond_page(rs, "results", items, next);
}

static enum MHD_Result jobs_list(req_state *rs)
{
    cs_list_query q;
    bool ok;
    enum MHD_Result r = parse_query(rs, &q, &ok);
    if (!ok)
        return r;
    const char *status = arg(rs, "status");
    cs_job_status st;
    if (status) {
        if (job_status_from_name(status, &st) != CS_OK)
            return respond_error(rs, 400, "invalid", "status",
                                 "status must be queued, running, done, failed or cancelled");
        q.status = (int)st;
    }
    cs_job_row *rows = NULL;
    int n = 0;
    char next[96];
    cs_error err;
    cs_error_clear(&err);
    if (store_jobs_list(rs->srv->store, &q, &rows, &n, next, &err) != CS_OK)
        return respond_cs_error(rs, &err);
    json_t *items = json_array();
    for (int i = 0; i < n; i++) {
        json_t *it = json_pack("{s:s, s:s, s:s, s:f, s:f, s:i}", "id", rows[i].id, "key",
                               rows[i].key, "status", job_status_name(rows[i].status), "created",
                               rows[i].created, "updated", rows[i].updated, "waiters",
                               rows[i].waiters);
        add_summary(it, &rows[i].sum);
        json_array_append_new(items, it);
    }
    free(rows);
    return respond_page(rs, "jobs", items, next);
}

static bool results_list_work(req_state *rs)
{
    results_list(rs);
    return true;
}

static bool jobs_list_work(req_state *rs)
{
    jobs_list(rs);
    return true;
}

enum MHD_Result route_lists(req_state *rs, bool results)
{
    return offload(rs, results ? results_list_work : jobs_list_work);
}
