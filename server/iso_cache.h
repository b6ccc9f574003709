/*
 * iso_cache.h - the daemon's isomorphism-aware cache (private to server/;
 * docs/iso.md): a request whose result is not stored under its own key, but
 * whose isomorphism class (synth/iso/iso.h) holds the stored result of
 * another request, gets that result relabelled to its own rank numbering,
 * verified on its own topology, and stored under its own key with
 * "relabelled_from" naming the key it came from.  No synthesis runs.
 *
 * Where it acts:
 *  - POST /v1/synthesize (routes.c): the iso key is computed when the body
 *    is parsed (kept in the parse memo); before a job is queued, the index
 *    is probed and a stored result of the class is relabelled on the spot
 *    (200, like a cache hit).
 *  - the worker (jobs.c), before it synthesizes: probes again (a result of
 *    the class may have been stored since the POST) and, when an older job
 *    of the class is running (here or on another daemon of the fleet),
 *    waits for it and relabels its result: concurrent submissions of one
 *    class cost one synthesis.  Ties are broken by (created, key) order in
 *    the index, so two such jobs never wait for each other, and only
 *    running jobs are waited for (a queued one might need this worker).
 *
 * A relabelled schedule the verifier refuses is logged, counted
 * (collsynth_iso_total{outcome="rejected"}) and not used: the request is
 * synthesized as if there had been no hit.  Canonicalization or index errors
 * never fail a request either; they only cost the hit.
 */
#ifndef CS_SERVER_ISO_CACHE_H
#define CS_SERVER_ISO_CACHE_H

#include "cache.h"
#include "log.h"
#include "metrics.h"
#include "store.h"
#include "synthesize.h"

typedef struct cs_iso_env {
    cs_store *store;
    cs_cache *cache;
    cs_metrics *metrics;
    const cs_logger *log;
} cs_iso_env;

/* The iso key and labelling text (malloc'd) of req; false (counted, logged
 * at debug) when it cannot be computed: the request then goes on without. */
bool iso_cache_key(const cs_iso_env *env, const cs_synth_request *req, char iso_key[65],
                   char **labelling);

/* What the index knows of a class, seen from a request of key `key`. */
typedef struct cs_iso_probe {
    bool self_listed;       /* key has its own row */
    bool self_stored;       /* ... and its result is stored */
    char from[65];          /* another key of the class with a stored result, or "" */
    char *from_labelling;   /* its labelling (owned) */
    char wait_for[65];      /* an older running job's key of the class, or "" */
} cs_iso_probe;

int iso_cache_probe(const cs_iso_env *env, const char *iso_key, const char *key,
                    cs_iso_probe *out, cs_error *err);
void iso_cache_probe_clear(cs_iso_probe *p);

/* Relabels the stored result of p->from to req's numbering (labelling: req's
 * canonical labelling text), verifies every algorithm on req's topology and
 * stores it under req->key with "relabelled_from" (and its index rows).
 * CS_EVERIFY when the verifier refuses it (counted as rejected). */
int iso_cache_relabel(const cs_iso_env *env, const cs_synth_request *req, const char *iso_key,
                      const char *labelling, const cs_iso_probe *p, cs_error *err);

#endif
