/*
 * iso_cache.c - relabelled hits from isomorphic requests' results
 * (iso_cache.h).
 */
#include "iso_cache.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "delivery_internal.h"
#include "iso.h"
#include "jobs.h"
#include "verify.h"

/* Rows read per probe: a class rarely holds more than a few requests (one
 * per allocation shape that was asked for), and the oldest come first. */
#define ISO_PROBE_ROWS 16

bool iso_cache_key(const cs_iso_env *env, const cs_synth_request *req, char iso_key[65],
                   char **labelling)
{
    iso_key[0] = '\0';
    *labelling = NULL;
    /* copy-capable switches: schedules name switch nodes, which a rank
     * labelling does not map, so such requests have no iso key by design
     * (exact keys only): not an error */
    if (req->topology && req->topology->nswitch_nodes > 0)
        return false;
    cs_iso_form f;
    cs_error err;
    cs_error_clear(&err);
    if (iso_canonicalize(req, NULL, &f, &err) != CS_OK) {
        atomic_fetch_add_explicit(&env->metrics->iso_errors, 1, memory_order_relaxed);
        log_event(env->log, LOG_DEBUG, "iso_key_failed", "key", req->key, "error", err.message,
                  NULL);
        return false;
    }
    atomic_fetch_add_explicit(&env->metrics->iso_canon_us, (unsigned long)(f.seconds * 1e6),
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&env->metrics->iso_canon_count, 1, memory_order_relaxed);
    *labelling = iso_labelling_to_text(f.canon_of, f.ranks);
    if (*labelling)
        snprintf(iso_key, 65, "%s", f.key);
    iso_form_clear(&f);
    return *labelling != NULL;
}

void iso_cache_probe_clear(cs_iso_probe *p)
{
    free(p->from_labelling);
    memset(p, 0, sizeof *p);
}

int iso_cache_probe(const cs_iso_env *env, const char *iso_key, const char *key,
                    cs_iso_probe *out, cs_error *err)
{
    memset(out, 0, sizeof *out);
    cs_iso_row *rows = NULL;
    int n = 0;
    int rc = store_iso_lookup(env->store, iso_key, ISO_PROBE_ROWS, &rows, &n, err);
    if (rc)
        return rc;
    int self = -1;
    for (int i = 0; i < n; i++)
        if (!strcmp(rows[i].key, key))
            self = i;
    out->self_listed = self >= 0;
    out->self_stored = self >= 0 && rows[self].stored;
    for (int i = 0; i < n && !out->from[0]; i++)
        if (i != self && rows[i].stored) {
            snprintf(out->from, sizeof out->from, "%s", rows[i].key);
            out->from_labelling = strdup(rows[i].labelling);
            if (!out->from_labelling)
                out->from[0] = '\0';
        }
    /* rows come oldest first: only those before our own row may be waited
     * for, so two jobs of a class never wait for each other */
    int older = self >= 0 ? self : n;
    for (int i = 0; i < older && !out->wait_for[0]; i++)
        if (rows[i].job_status == CS_JOB_RUNNING)
            snprintf(out->wait_for, sizeof out->wait_for, "%s", rows[i].key);
    store_iso_rows_free(rows, n);
    return CS_OK;
}

/* The stored document of the relabelled result: its own frame (sends'
 * owners, the caller's topology name and collective, key, reason) with the
 * source's annotations added where the frame has none: the time bound,
 * each algorithm's ratio_to_bound and simulated time.  Those do not depend
 * on the numbering (the same schedule on an isomorphic network), and
 * computing them again (a cut bound and a simulation per algorithm) would
 * cost more than the rest of the hit.  NULL when src is unusable. */
static json_t *frame_from_source(const cs_synth_request *req, const cs_result *rel,
                                 const json_t *src)
{
    json_t *sfr = json_object_get(src, "frontier");
    if (!json_is_object(src) || json_array_size(sfr) != (size_t)rel->nalgs)
        return NULL;
    json_t *doc = result_to_json_frame(rel);
    if (!doc)
        return NULL;
    json_object_set_new(doc, "key", json_string(req->key));
    json_object_set_new(doc, "topology", json_string(req->topology->name));
    json_object_set(doc, "collective", json_object_get(req->canonical, "collective"));
    json_object_set_new(doc, "reason", json_string(rel->reason));
    if (!json_object_get(doc, "method"))
        json_object_set_new(doc, "method", json_string(rel->method));
    json_t *b = json_object_get(doc, "bounds"), *sb = json_object_get(src, "bounds");
    if (json_is_object(b) && json_is_object(sb))
        json_object_update_missing(b, sb);
    json_object_update_missing(doc, (json_t *)src);
    json_t *fr = json_object_get(doc, "frontier");
    for (int i = 0; i < rel->nalgs; i++)
        json_object_update_missing(json_array_get(fr, (size_t)i), json_array_get(sfr, (size_t)i));
    json_object_del(doc, "relabelled_from"); /* the source's own, if it had one */
    return doc;
}

int iso_cache_relabel(const cs_iso_env *env, const cs_synth_request *req, const char *iso_key,
                      const char *labelling, const cs_iso_probe *p, cs_error *err)
{
    int P = req->topology->ranks;
    int *from = NULL, *to = NULL, *map = NULL;
    cs_result *res = NULL, *rel = NULL;
    json_t *src = NULL;
    bool found = false;
    int rc = iso_labelling_from_text(p->from_labelling, P, &from, err);
    if (!rc)
        rc = iso_labelling_from_text(labelling, P, &to, err);
    if (!rc && !(map = malloc(sizeof *map * (size_t)P)))
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
    if (!rc) {
        /* map: the stored request's rank -> ours (both labellings lead to
         * the same canonical numbering) */
        int *inv = malloc(sizeof *inv * (size_t)P);
        if (!inv) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        } else {
            for (int r = 0; r < P; r++)
                inv[to[r]] = r;
            for (int r = 0; r < P; r++)
                map[r] = inv[from[r]];
            free(inv);
        }
    }
    if (!rc)
        rc = delivery_load_result(env->store, env->cache, p->from, &res, &src, &found, err);
    if (!rc && !found)
        rc = cs_error_set(err, CS_EIO, "key", "result %s left the store", p->from);
    if (!rc) {
        for (int i = 0; i < res->nalgs && !rc; i++)
            if (res->algs[i]->ranks != P)
                rc = cs_error_set(err, CS_EINTERNAL, "", "result %s has %d ranks, not %d",
                                  p->from, res->algs[i]->ranks, P);
    }
    if (!rc)
        rc = iso_relabel_result(res, map, &req->collective, req->topology->name, &rel, err);
    /* the gate every returned algorithm passes, on the caller's topology */
    for (int i = 0; !rc && i < rel->nalgs; i++) {
        cs_error verr;
        cs_error_clear(&verr);
        if (algorithm_verify(req->topology, rel->algs[i], &verr) != CS_OK) {
            atomic_fetch_add_explicit(&env->metrics->iso_rejected, 1, memory_order_relaxed);
            log_event(env->log, LOG_WARN, "iso_relabel_rejected", "key", req->key, "from",
                      p->from, "error", verr.message, NULL);
            rc = cs_error_set(err, CS_EVERIFY, "", "relabelled schedule from %s: %s", p->from,
                              verr.message);
        }
    }
    if (!rc) {
        /* the reason says what happened, in words */
        char reason[sizeof rel->reason];
        snprintf(reason, sizeof reason, "relabelled from %.12s: %.200s", p->from, res->reason);
        snprintf(rel->reason, sizeof rel->reason, "%s", reason);
        json_t *skel = frame_from_source(req, rel, src);
        if (skel) {
            json_object_set_new(skel, "relabelled_from", json_string(p->from));
            rc = delivery_save_result_frame(env->store, env->cache, req, rel, skel, err);
        } else {
            /* no usable stored document: annotate afresh */
            json_t *extra = json_pack("{s:s}", "relabelled_from", p->from);
            rc = extra ? delivery_save_result_with(env->store, env->cache, req, rel, extra, err)
                       : cs_error_set(err, CS_ENOMEM, "", "out of memory");
            json_decref(extra);
        }
    }
    if (!rc) {
        cs_summary sum;
        jobs_summary(req, rel, &sum);
        cs_error e2;
        if (store_result_index_put(env->store, req->key, &sum, &e2) != CS_OK)
            log_event(env->log, LOG_WARN, "result_index_failed", "key", req->key, "error",
                      e2.message, NULL);
        if (store_iso_put(env->store, iso_key, req->key, labelling, &e2) != CS_OK)
            log_event(env->log, LOG_WARN, "iso_index_failed", "key", req->key, "error",
                      e2.message, NULL);
        atomic_fetch_add_explicit(&env->metrics->iso_hits, 1, memory_order_relaxed);
        log_event(env->log, LOG_INFO, "iso_hit", "key", req->key, "from", p->from, NULL);
    }
    json_decref(src);
    result_free(res);
    result_free(rel);
    free(from);
    free(to);
    free(map);
    return rc;
}
