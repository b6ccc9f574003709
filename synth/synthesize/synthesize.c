/*
 * synthesize.c - request parsing and checking against the service limits,
 * and the method dispatcher (see synthesize.h).  The canonical form and the
 * key are built in synthesize_canonical.c, the hash in sha256.c.
 *
 * Parsing is strict and bounded before any work: unknown keys are errors
 * naming their path, sizes are checked against cs_synth_limits (builtin
 * names are sized from their dimensions before they are built, and results
 * too large to return are refused), so a client cannot make the daemon
 * allocate or compute without limit.  A topology given by name is only ever
 * a builtin: a client must never make the daemon read a file.
 *
 * Server-side policy (the auto limits, thread counts) and delivery options
 * (wait_s, time_limit_s) are deliberately outside the key: they change when or
 * where the answer is computed, not what was asked.
 */
#include "synthesize.h"
#include "synthesize_internal.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective.h"

void synth_limits_default(cs_synth_limits *lim)
{
    memset(lim, 0, sizeof *lim);
    lim->max_ranks = 4096;
    lim->max_links = 1000000;
    lim->max_chunks = 64;
    lim->max_trials = 64;
    lim->max_smt_steps = 64;
    lim->max_wait_s = 300;
    lim->max_time_limit_s = 86400;
    lim->smt_max_ranks = 16;
    lim->smt_max_variables = 50000;
    lim->smt_time_budget_s = 30;
    lim->mcf_max_ranks = 16;
    lim->mcf_max_columns = 300000;
    lim->mcf_time_budget_s = 60;
    lim->threads = 0;
}

/* ---- option parsing -------------------------------------------------------------- */

/* Field names are "options.k" or "options.smt.k": prefix + key. */
static int opt_int(const json_t *obj, const char *key, const char *prefix, long lo, long hi,
                   int *out, cs_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return CS_OK;
    char field[CS_ERROR_FIELD_MAX];
    snprintf(field, sizeof field, "%s%s", prefix, key);
    if (!json_is_integer(v))
        return cs_error_set(err, CS_EINVAL, field, "%s must be an integer", field);
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi)
        return cs_error_set(err, CS_EINVAL, field, "%s must be in [%ld, %ld], got %lld", field,
                            lo, hi, (long long)x);
    *out = (int)x;
    return CS_OK;
}

static int opt_double(const json_t *obj, const char *key, const char *prefix, double lo,
                      double hi, double *out, cs_error *err)
{
    const json_t *v = json_object_get(obj, key);
    if (!v)
        return CS_OK;
    char field[CS_ERROR_FIELD_MAX];
    snprintf(field, sizeof field, "%s%s", prefix, key);
    if (!json_is_number(v))
        return cs_error_set(err, CS_EINVAL, field, "%s must be a number", field);
    double x = json_number_value(v);
    if (!isfinite(x) || x < lo || x > hi)
        return cs_error_set(err, CS_EINVAL, field, "%s must be in [%g, %g], got %g", field, lo,
                            hi, x);
    *out = x;
    return CS_OK;
}

/* Rejects keys outside `allowed` (NULL-terminated), naming the first, and
 * the allowed key nearest to it when it looks like a typo (cs_nearest_name,
 * as the CLI suggests names).  `what` is "member" for the request object's
 * own keys and "option" inside "options": a client that misspells
 * "collective" must not be told its request had an unknown option. */
static int opt_check_keys(const json_t *obj, const char *prefix, const char *const *allowed,
                          const char *what, const char *hint, cs_error *err)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool ok = false;
        int n = 0;
        for (; allowed[n]; n++)
            if (strcmp(key, allowed[n]) == 0)
                ok = true;
        if (!ok) {
            char field[CS_ERROR_FIELD_MAX];
            snprintf(field, sizeof field, "%s%s", prefix, key);
            const char *near = cs_nearest_name(key, strlen(key), allowed, n);
            char mean[96] = "";
            if (near)
                snprintf(mean, sizeof mean, ": did you mean %s%s?", prefix, near);
            return cs_error_set(err, CS_EINVAL, field, "unknown %s %s%s%s%s%s", what, field, mean,
                                hint ? (near ? " (" : ": ") : "", hint ? hint : "",
                                hint && near ? ")" : "");
        }
    }
    return CS_OK;
}

static const char *const smt_keys[] = {"k", "max_chunks", "max_steps", "steps", "rounds",
                                       "chunks", "instance_time_limit_s",
                                       "total_time_limit_s", NULL};
static const char *const tacos_keys[] = {"chunks", "trials", "seed", "switch_degree", "bytes",
                                         NULL};
static const char *const baseline_keys[] = {"chunks", NULL};
static const char *const mcf_keys[] = {"chunks", "epochs", "max_epochs", "bytes", "epoch_split",
                                       "gap", "milp_max_columns", "max_chunks", "min_chunks",
                                       "astar", "astar_epochs", "zero_buffer", NULL};

static int parse_mcf_options(const json_t *o, const char *prefix, const cs_synth_limits *lim,
                             cs_mcf_options *m, cs_error *err)
{
    int rc;
    if ((rc = opt_int(o, "chunks", prefix, 1, lim->max_chunks, &m->chunks, err)) ||
        (rc = opt_int(o, "max_chunks", prefix, 0, lim->max_chunks, &m->max_chunks, err)) ||
        (rc = opt_int(o, "min_chunks", prefix, 0, lim->max_chunks, &m->min_chunks, err)) ||
        (rc = opt_int(o, "astar", prefix, -1, 1, &m->astar, err)) ||
        (rc = opt_int(o, "astar_epochs", prefix, 0, 1024, &m->astar_epochs, err)) ||
        (rc = opt_int(o, "zero_buffer", prefix, 0, 1, &m->zero_buffer, err)) ||
        (rc = opt_int(o, "epochs", prefix, 0, 4096, &m->epochs, err)) ||
        (rc = opt_int(o, "max_epochs", prefix, 1, 4096, &m->max_epochs, err)) ||
        (rc = opt_double(o, "bytes", prefix, 1, 1e15, &m->bytes, err)) ||
        (rc = opt_int(o, "epoch_split", prefix, 1, 64, &m->epoch_split, err)) ||
        (rc = opt_double(o, "gap", prefix, 0, 0.99, &m->gap, err)))
        return rc;
    int mm = -1;
    if ((rc = opt_int(o, "milp_max_columns", prefix, 0, 100000000, &mm, err)))
        return rc;
    if (mm >= 0)
        m->milp_max_columns = mm;
    return CS_OK;
}
static const char *const hier_keys[] = {"smt_time_limit_s", "flat_max_ranks", NULL};

static int parse_smt_options(const json_t *o, const char *prefix, const cs_synth_limits *lim,
                             cs_smt_options *s, cs_error *err)
{
    int rc;
    int steps_max = lim->max_smt_steps;
    if ((rc = opt_int(o, "k", prefix, 0, steps_max, &s->k, err)) ||
        (rc = opt_int(o, "max_chunks", prefix, 1, lim->max_chunks, &s->max_chunks, err)) ||
        (rc = opt_int(o, "max_steps", prefix, 0, steps_max, &s->max_steps, err)) ||
        (rc = opt_int(o, "steps", prefix, 0, steps_max, &s->steps, err)) ||
        (rc = opt_int(o, "rounds", prefix, 0, steps_max * 8, &s->rounds, err)) ||
        (rc = opt_int(o, "chunks", prefix, 0, lim->max_chunks, &s->chunks, err)) ||
        (rc = opt_double(o, "instance_time_limit_s", prefix, 0, 1e6, &s->instance_time_limit_s,
                         err)) ||
        (rc = opt_double(o, "total_time_limit_s", prefix, 0, 1e6, &s->total_time_limit_s, err)))
        return rc;
    int fixed = (s->steps > 0) + (s->rounds > 0) + (s->chunks > 0);
    if (fixed != 0 && fixed != 3) {
        char field[CS_ERROR_FIELD_MAX];
        snprintf(field, sizeof field, "%s%s", prefix,
                 s->steps <= 0 ? "steps" : s->rounds <= 0 ? "rounds" : "chunks");
        return cs_error_set(err, CS_EINVAL, field,
                            "steps, rounds and chunks select a single instance: give all three "
                            "or none");
    }
    if (fixed == 3 && s->rounds < s->steps) {
        char field[CS_ERROR_FIELD_MAX];
        snprintf(field, sizeof field, "%srounds", prefix);
        return cs_error_set(err, CS_EINVAL, field, "rounds (%d) must be >= steps (%d)",
                            s->rounds, s->steps);
    }
    return CS_OK;
}

static int parse_tacos_options(const json_t *o, const char *prefix, const cs_synth_limits *lim,
                               cs_tacos_options *t, cs_error *err)
{
    int rc;
    if ((rc = opt_int(o, "chunks", prefix, 1, lim->max_chunks, &t->chunks, err)) ||
        (rc = opt_int(o, "trials", prefix, 1, lim->max_trials, &t->trials, err)) ||
        (rc = opt_int(o, "switch_degree", prefix, 0, 1 << 20, &t->switch_degree, err)) ||
        (rc = opt_double(o, "bytes", prefix, 1, 1e15, &t->bytes, err)))
        return rc;
    const json_t *seed = json_object_get(o, "seed");
    if (seed) {
        char field[CS_ERROR_FIELD_MAX];
        snprintf(field, sizeof field, "%sseed", prefix);
        if (!json_is_integer(seed) || json_integer_value(seed) < 0)
            return cs_error_set(err, CS_EINVAL, field, "%s must be a non-negative integer",
                                field);
        t->seed = (uint64_t)json_integer_value(seed);
    }
    return CS_OK;
}

/* ---- request ------------------------------------------------------------------------ */

void synth_request_free(cs_synth_request *r)
{
    if (!r)
        return;
    topology_free(r->topology);
    topology_free(r->instance);
    collective_free(&r->collective);
    json_decref(r->canonical);
    free(r);
}

const cs_topology *synth_request_instance(const cs_synth_request *r)
{
    return r->instance ? r->instance : r->topology;
}

/* Makes err->field a path from the request's top: "links[2]" under "topology"
 * becomes "topology.links[2]".  Parsers that already name the full path (the
 * collective's fields are "collective.root", ...) are left as they are. */
static int prefix_field(cs_error *err, int rc, const char *prefix)
{
    if (err && rc != CS_OK) {
        size_t pn = strlen(prefix);
        if (strncmp(err->field, prefix, pn) == 0 &&
            (err->field[pn] == '\0' || err->field[pn] == '.' || err->field[pn] == '['))
            return rc;
        char f[2 * CS_ERROR_FIELD_MAX + 2];
        if (err->field[0])
            snprintf(f, sizeof f, "%s.%s", prefix, err->field);
        else
            snprintf(f, sizeof f, "%s", prefix);
        snprintf(err->field, sizeof err->field, "%.*s", CS_ERROR_FIELD_MAX - 1, f);
    }
    return rc;
}

/* Estimate ranks from the dimensions ("torus2d:8x8" -> 64, "hypercube:D"
 * -> 2^D, node-count families x8) without trusting the builder to refuse
 * sizes that are legal for the library but too big for a service.  *links
 * gets the directed links of the families whose link count grows
 * quadratically (0 for the others): fc links every pair; the node families
 * (ndv2, dgxa100, dgxh100) lower their switches to 8 x 7 links per node and,
 * on the fabric, 8 rails of n - 1 peers per rank, about 8n(n + 7) for n
 * nodes (topology_builtin's own estimate), not every pair of ranks. */
static double builtin_rank_estimate(const char *name, double *links)
{
    const char *colon = strchr(name, ':');
    const char *comma = strchr(name, ',');
    double ranks = 1;
    if (colon && (!comma || colon < comma)) {
        const char *p = colon + 1;
        while (*p && *p != ',') {
            char *end;
            double d = strtod(p, &end);
            if (end == p)
                break;
            ranks *= d > 1 ? d : 1;
            p = end;
            if (*p == 'x')
                p++;
        }
    }
    size_t fam_len = colon ? (size_t)(colon - name) : comma ? (size_t)(comma - name)
                                                           : strlen(name);
    bool hypercube = fam_len == 9 && strncmp(name, "hypercube", 9) == 0;
    bool nodes = (fam_len == 4 && !strncmp(name, "ndv2", 4)) ||
                 (fam_len == 7 && (!strncmp(name, "dgxa100", 7) || !strncmp(name, "dgxh100", 7)));
    if (hypercube)
        ranks = ranks > 30 ? 1e12 : (double)(1L << (long)ranks);
    *links = 0;
    if (nodes) {
        *links = 8 * ranks * (ranks + 7);
        ranks *= 8;
    } else if (fam_len == 2 && !strncmp(name, "fc", 2)) {
        *links = ranks * (ranks - 1);
    }
    return ranks;
}

int synth_builtin_checked(const char *name, const cs_synth_limits *lim_in, cs_topology **out,
                          cs_error *err)
{
    cs_synth_limits defaults;
    if (!lim_in) {
        synth_limits_default(&defaults);
        lim_in = &defaults;
    }
    *out = NULL;
    if (strlen(name) > 100)
        return cs_error_set(err, CS_EINVAL, "topology", "topology name is too long");
    double links = 0;
    double ranks = builtin_rank_estimate(name, &links);
    if (ranks > lim_in->max_ranks)
        return cs_error_set(err, CS_ELIMIT, "topology",
                            "%s would have about %.0f ranks; this service accepts at most %d", name,
                            ranks, lim_in->max_ranks);
    if (lim_in->max_links > 0 && links > (double)lim_in->max_links)
        return cs_error_set(err, CS_ELIMIT, "topology",
                            "%s would have about %.0f links; this service accepts at most %zu",
                            name, links, lim_in->max_links);
    int rc = topology_builtin(name, out, err);
    if (rc == CS_OK && (*out)->ranks > lim_in->max_ranks) {
        int r = (*out)->ranks;
        topology_free(*out);
        *out = NULL;
        return cs_error_set(err, CS_ELIMIT, "topology",
                            "topology has %d ranks; this service accepts at most %d", r,
                            lim_in->max_ranks);
    }
    if (rc != CS_OK && err && !err->field[0])
        snprintf(err->field, sizeof err->field, "topology");
    return rc;
}


static int parse_topology(const json_t *v, const cs_synth_limits *lim, cs_topology **out,
                          cs_error *err)
{
    if (!v)
        return cs_error_set(err, CS_EINVAL, "topology", "topology is required");
    int rc;
    if (json_is_string(v)) {
        /* Only builtin names: a client must never make the daemon read a file. */
        return synth_builtin_checked(json_string_value(v), lim, out, err);
    }
    if (!json_is_object(v))
        return cs_error_set(err, CS_EINVAL, "topology",
                            "topology must be a builtin name or a Topology JSON object");
    cs_topology_parse_options po = {.max_ranks = lim->max_ranks, .max_links = lim->max_links};
    rc = topology_from_json(v, &po, out, err);
    return prefix_field(err, rc, "topology");
}

/* The cheapest refusal: a request whose result cannot fit even at one chunk
 * is refused from its rank count and collective kind alone, before the
 * topology is built (a large switch costs a second to expand).  Anything
 * this cannot read is left to the full parse, which names the problem. */
static int early_size_check(const json_t *doc, const cs_synth_limits *lim, cs_error *err)
{
    if (lim->max_result_bytes <= 0 && lim->max_sends <= 0)
        return CS_OK;
    const json_t *t = json_object_get(doc, "topology");
    double ranks = 0, links = 0;
    if (json_is_string(t) && strlen(json_string_value(t)) <= 100)
        ranks = builtin_rank_estimate(json_string_value(t), &links);
    else if (json_is_object(t) && json_is_integer(json_object_get(t, "ranks")))
        ranks = (double)json_integer_value(json_object_get(t, "ranks"));
    const json_t *cj = json_object_get(doc, "collective");
    const json_t *kj = json_is_object(cj) ? json_object_get(cj, "kind") : cj;
    cs_coll_kind kind;
    if (!(ranks >= 2 && ranks <= lim->max_ranks) || !json_is_string(kj) ||
        collective_kind_from_name(json_string_value(kj), &kind) != CS_OK)
        return CS_OK;
    /* one chunk, one hop per chunk for the one-destination kinds */
    double p = ranks, g;
    switch (kind) {
    case CS_COLL_ALLTOALL: g = p * (p - 1); break;
    case CS_COLL_GATHER: case CS_COLL_SCATTER: g = p - 1; break;
    case CS_COLL_BROADCAST: case CS_COLL_REDUCE: g = p - 1; break;
    case CS_COLL_ALLREDUCE: g = 2 * p * (p - 1); break;
    case CS_COLL_CUSTOM: return CS_OK;
    default: g = p * (p - 1); break;
    }
    return synth_check_result_size(g > 1e15 ? (long)1e15 : (long)g, lim, "topology", err);
}

int synth_request_from_json(const json_t *doc, const cs_synth_limits *lim_in,
                            cs_synth_request **out, cs_error *err)
{
    cs_synth_limits defaults;
    if (!lim_in) {
        synth_limits_default(&defaults);
        lim_in = &defaults;
    }
    const cs_synth_limits *lim = lim_in;
    *out = NULL;
    if (!json_is_object(doc))
        return cs_error_set(err, CS_EINVAL, "", "the request must be a JSON object");
    static const char *const top_keys[] = {"topology", "collective", "method", "options", "v",
                                           NULL};
    int rc = opt_check_keys(doc, "", top_keys, "member",
                            "a request has topology, collective, method and options", err);
    if (rc)
        return rc;
    /* "v": the canonical form's version, accepted so a canonical request parses */
    const json_t *ver = json_object_get(doc, "v");
    if (ver && (!json_is_integer(ver) || json_integer_value(ver) != 1))
        return cs_error_set(err, CS_EINVAL, "v", "v (request format version) must be 1");

    cs_synth_request *r = calloc(1, sizeof *r);
    if (!r)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    collective_init(&r->collective, CS_COLL_ALLGATHER, -1);
    smt_options_default(&r->smt);
    tacos_options_default(&r->tacos);
    r->tacos.keep_sends = true;
    hier_options_default(&r->hier);
    r->baseline.chunks = 0;
    mcf_options_default(&r->mcf);

    /* method first: option parsing depends on it */
    const json_t *m = json_object_get(doc, "method");
    const char *method = "auto";
    if (m) {
        if (!json_is_string(m)) {
            rc = cs_error_set(err, CS_EINVAL, "method", "method must be a string");
            goto fail;
        }
        method = json_string_value(m);
    }
    if (strcmp(method, "auto") == 0)
        r->method_kind = CS_SYNTH_AUTO;
    else if (strcmp(method, "smt") == 0)
        r->method_kind = CS_SYNTH_SMT;
    else if (strcmp(method, "tacos") == 0)
        r->method_kind = CS_SYNTH_TACOS;
    else if (strcmp(method, "mcf") == 0)
        r->method_kind = CS_SYNTH_MCF;
    else if (strcmp(method, "hierarchical") == 0)
        r->method_kind = CS_SYNTH_HIER;
    else if (strlen(method) < sizeof r->method && baseline_exists(method))
        r->method_kind = CS_SYNTH_BASELINE;
    else {
        char names[400] = "";
        int nb = 0;
        const cs_baseline_info *bl = baseline_list(&nb);
        for (int i = 0; i < nb; i++) {
            size_t used = strlen(names);
            snprintf(names + used, sizeof names - used, "%s%s", i ? ", " : "", bl[i].name);
        }
        const char *near = synth_method_suggest(method);
        char hint[64] = "";
        if (near)
            snprintf(hint, sizeof hint, "; did you mean \"%s\"?", near);
        rc = cs_error_set(err, CS_EINVAL, "method",
                          "unknown method \"%.60s\"%s: expected auto, smt, tacos, hierarchical, "
                          "mcf or a baseline (%s)",
                          method, hint, names);
        goto fail;
    }
    snprintf(r->method, sizeof r->method, "%s", method);

    if ((rc = early_size_check(doc, lim, err)))
        goto fail;
    if ((rc = parse_topology(json_object_get(doc, "topology"), lim, &r->topology, err)))
        goto fail;

    const json_t *cj = json_object_get(doc, "collective");
    if (!cj) {
        rc = cs_error_set(err, CS_EINVAL, "collective", "collective is required");
        goto fail;
    }
    if (json_is_string(cj)) {
        /* shorthand: "allgather" */
        json_t *tmp = json_pack("{s:O}", "kind", (json_t *)cj);
        rc = collective_from_json(tmp, &r->collective, err);
        json_decref(tmp);
    } else {
        rc = collective_from_json(cj, &r->collective, err);
    }
    if (rc != CS_OK) {
        prefix_field(err, rc, "collective");
        goto fail;
    }
    if ((rc = prefix_field(err, collective_validate(&r->collective, r->topology->ranks, err),
                           "collective")))
        goto fail;

    /* options */
    const json_t *o = json_object_get(doc, "options");
    json_t *empty = NULL;
    if (o && !json_is_object(o)) {
        rc = cs_error_set(err, CS_EINVAL, "options", "options must be an object");
        goto fail;
    }
    if (!o)
        o = empty = json_object();
    rc = opt_double(o, "wait_s", "options.", 0, lim->max_wait_s, &r->wait_s, err);
    if (!rc)
        rc = opt_double(o, "time_limit_s", "options.", 0, lim->max_time_limit_s,
                        &r->time_limit_s, err);
    /* codegen: a requirement on the output, for every method (synthesize.h) */
    const json_t *cg = json_object_get(o, "codegen");
    if (!rc && cg) {
        const char *v = json_is_string(cg) ? json_string_value(cg) : "";
        if (strcmp(v, "msccl-xml") == 0 || strcmp(v, "cuda") == 0)
            r->codegen = true;
        else if (strcmp(v, "none") != 0)
            rc = cs_error_set(err, CS_EINVAL, "options.codegen",
                              "options.codegen must be \"msccl-xml\", \"cuda\" or \"none\" "
                              "(the format the result will be generated in: code formats need "
                              "schedules without copies inside a switch)");
    }
    json_t *flat = json_deep_copy(o);
    json_object_del(flat, "wait_s");
    json_object_del(flat, "time_limit_s");
    json_object_del(flat, "codegen");
    if (!rc) {
        switch (r->method_kind) {
        case CS_SYNTH_SMT:
            rc = opt_check_keys(flat, "options.", smt_keys, "option", "not an smt option", err);
            if (!rc)
                rc = parse_smt_options(flat, "options.", lim, &r->smt, err);
            r->smt.max_ranks = lim->smt_limit_ranks;
            if (!rc)
                rc = prefix_field(err, smt_options_validate(&r->smt, r->topology,
                                                            &r->collective, err),
                                  "options");
            break;
        case CS_SYNTH_TACOS:
            rc = opt_check_keys(flat, "options.", tacos_keys, "option", "not a tacos option", err);
            if (!rc)
                rc = parse_tacos_options(flat, "options.", lim, &r->tacos, err);
            break;
        case CS_SYNTH_BASELINE:
            rc = opt_check_keys(flat, "options.", baseline_keys, "option",
                                "baselines take only chunks",
                                err);
            if (!rc)
                rc = opt_int(flat, "chunks", "options.", 0, lim->max_chunks,
                             &r->baseline.chunks, err);
            if (!rc && !baseline_supports(r->method, r->collective.kind))
                rc = cs_error_set(err, CS_EUNSUPPORTED, "method",
                                  "baseline %s does not implement %s", r->method,
                                  collective_kind_name(r->collective.kind));
            break;
        case CS_SYNTH_MCF:
            rc = opt_check_keys(flat, "options.", mcf_keys, "option", "not an mcf option", err);
            if (!rc)
                rc = parse_mcf_options(flat, "options.", lim, &r->mcf, err);
            if (!rc)
                rc = prefix_field(err, mcf_options_validate(&r->mcf, r->topology,
                                                            &r->collective, err),
                                  "options");
            break;
        case CS_SYNTH_HIER:
            rc = opt_check_keys(flat, "options.", hier_keys, "option",
                                "not a hierarchical option", err);
            if (!rc)
                rc = opt_double(flat, "smt_time_limit_s", "options.", 0.01, 600,
                                &r->hier.smt_time_limit_s, err);
            if (!rc)
                rc = opt_int(flat, "flat_max_ranks", "options.", 0, lim->max_ranks,
                             &r->hier.flat_max_ranks, err);
            if (!rc)
                rc = hier_applicable(r->topology, &r->collective, err);
            break;
        case CS_SYNTH_AUTO: {
            static const char *const auto_keys[] = {"smt", "tacos", "mcf", NULL};
            rc = opt_check_keys(flat, "options.", auto_keys, "option",
                                "with method auto, put SMT options under options.smt, "
                                "TACOS options under options.tacos and mcf options under "
                                "options.mcf",
                                err);
            const json_t *so = json_object_get(flat, "smt");
            const json_t *to = json_object_get(flat, "tacos");
            if (!rc && so && !json_is_object(so))
                rc = cs_error_set(err, CS_EINVAL, "options.smt", "options.smt must be an object");
            if (!rc && to && !json_is_object(to))
                rc = cs_error_set(err, CS_EINVAL, "options.tacos",
                                  "options.tacos must be an object");
            if (!rc && so)
                rc = opt_check_keys(so, "options.smt.", smt_keys, "option",
                                    "not an smt option", err);
            if (!rc && so)
                rc = parse_smt_options(so, "options.smt.", lim, &r->smt, err);
            if (!rc && to)
                rc = opt_check_keys(to, "options.tacos.", tacos_keys, "option",
                                    "not a tacos option", err);
            if (!rc && to)
                rc = parse_tacos_options(to, "options.tacos.", lim, &r->tacos, err);
            const json_t *mo = json_object_get(flat, "mcf");
            if (!rc && mo && !json_is_object(mo))
                rc = cs_error_set(err, CS_EINVAL, "options.mcf", "options.mcf must be an object");
            if (!rc && mo)
                rc = opt_check_keys(mo, "options.mcf.", mcf_keys, "option",
                                    "not an mcf option", err);
            if (!rc && mo)
                rc = parse_mcf_options(mo, "options.mcf.", lim, &r->mcf, err);
            break;
        }
        }
    }
    json_decref(flat);
    json_decref(empty);
    if (rc)
        goto fail;

    /* results that cannot fit are refused before any work */
    if (lim->max_sends > 0 || lim->max_result_bytes > 0) {
        int chunks = r->method_kind == CS_SYNTH_SMT        ? r->smt.max_chunks
                     : r->method_kind == CS_SYNTH_BASELINE ? r->baseline.chunks
                     : r->method_kind == CS_SYNTH_MCF      ? r->mcf.chunks
                                                           : r->tacos.chunks;
        if (r->method_kind == CS_SYNTH_SMT && r->smt.chunks > 0)
            chunks = r->smt.chunks;
        long est = synth_estimate_sends(r->topology, &r->collective, chunks);
        if ((rc = synth_check_result_size(est, lim, chunks > 1 ? "options.chunks" : "topology",
                                          err)))
            goto fail;
    }

    /* The instance: code needs GPU-to-GPU sends, so the copy-capable switches
     * of a request that wants code are plain switches for the methods that
     * would copy in them (auto, mcf; the others never do). */
    if (r->codegen && r->topology->nswitch_nodes > 0 &&
        (r->method_kind == CS_SYNTH_AUTO || r->method_kind == CS_SYNTH_MCF) &&
        (rc = topology_with_switch_copy(r->topology, false, NULL, &r->instance, err)))
        goto fail;
    if ((rc = synth_request_set_canonical(r, err)))
        goto fail;
    *out = r;
    return CS_OK;
fail:
    synth_request_free(r);
    return rc;
}

const char *synth_method_suggest(const char *name)
{
    enum { MAX_NAMES = 64 };
    const char *names[MAX_NAMES] = {"auto", "smt", "tacos", "mcf", "hierarchical"};
    int n = 5, nb = 0;
    const cs_baseline_info *bl = baseline_list(&nb);
    for (int i = 0; i < nb && n < MAX_NAMES; i++)
        names[n++] = bl[i].name;
    return name ? cs_nearest_name(name, strlen(name), names, n) : NULL;
}

int synth_request_key_with_codegen(const char *text, size_t len, const cs_synth_limits *lim,
                                   char key_out[65], cs_error *err)
{
    key_out[0] = '\0';
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return cs_error_set(err, CS_EINVAL, "", "the request is not a JSON object");
    }
    json_t *o = json_object_get(doc, "options");
    if (!json_is_object(o)) {
        o = json_object();
        json_object_set_new(doc, "options", o);
    }
    json_object_set_new(o, "codegen", json_string("msccl-xml"));
    cs_synth_request *r = NULL;
    int rc = synth_request_from_json(doc, lim, &r, err);
    json_decref(doc);
    if (rc)
        return rc;
    memcpy(key_out, r->key, 65);
    synth_request_free(r);
    return CS_OK;
}

int synth_request_parse(const char *text, size_t len, const cs_synth_limits *lim,
                        cs_synth_request **out, cs_error *err)
{
    *out = NULL;
    json_error_t jerr;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!doc)
        return cs_error_set(err, CS_EINVAL, "", "malformed JSON at line %d column %d: %s",
                            jerr.line, jerr.column, jerr.text);
    int rc = synth_request_from_json(doc, lim, out, err);
    json_decref(doc);
    return rc;
}

long synth_smt_estimate_variables(const cs_topology *t, const cs_collective *c, int max_chunks)
{
    if (max_chunks < 1)
        max_chunks = 1;
    long g = collective_global_chunks(c, t->ranks, max_chunks);
    long per_rank = (long)t->ranks * max_chunks;
    if (collective_kind_is_combining(c->kind) && g < per_rank)
        g = per_rank; /* synthesized as the P*C-chunk dual */
    long per_chunk = (long)t->ranks + t->nlinks;
    if (g > 0 && per_chunk > 0 && g > (long)(1L << 40) / per_chunk)
        return 1L << 40;
    return g * per_chunk;
}

/* Mean shortest-path hops over a sample of sources (all of them up to 16). */
static double mean_hops(const cs_topology *t)
{
    int P = t->ranks, nsrc = P < 16 ? P : 16;
    int *dist = malloc(sizeof *dist * (size_t)P);
    if (!dist)
        return 1;
    double sum = 0;
    long n = 0;
    for (int k = 0; k < nsrc; k++) {
        int src = (int)((long)k * P / nsrc);
        if (topology_shortest_hops(t, src, dist, NULL) != CS_OK)
            continue;
        for (int r = 0; r < P; r++)
            if (r != src && dist[r] > 0) {
                sum += dist[r];
                n++;
            }
    }
    free(dist);
    return n ? sum / (double)n : 1;
}

long synth_estimate_sends(const cs_topology *t, const cs_collective *c, int chunks)
{
    if (chunks < 1)
        chunks = 1;
    double p = t->ranks;
    double g = (double)collective_global_chunks(c, t->ranks, chunks);
    double sends;
    if (c->kind == CS_COLL_ALLTOALL || c->kind == CS_COLL_GATHER ||
        c->kind == CS_COLL_SCATTER) {
        /* each chunk travels to one rank; one in P is already there */
        sends = g * (p - 1) / p * mean_hops(t);
    } else {
        if (collective_kind_is_combining(c->kind) && g < p * chunks)
            g = p * chunks;
        sends = g * (p - 1);
        if (c->kind == CS_COLL_ALLREDUCE)
            sends *= 2;
    }
    return sends > 1e15 ? (long)1e15 : (long)sends;
}

int synth_check_result_size(long sends, const cs_synth_limits *lim, const char *field,
                            cs_error *err)
{
    if (lim->max_sends > 0 && sends > lim->max_sends)
        return cs_error_set(err, CS_ELIMIT, field,
                            "the result would hold about %ld sends; this service returns at "
                            "most %ld (fewer ranks or chunks)",
                            sends, lim->max_sends);
    double bytes = (double)sends * SYNTH_BYTES_PER_SEND;
    if (lim->max_result_bytes > 0 && bytes > lim->max_result_bytes)
        return cs_error_set(err, CS_ELIMIT, field,
                            "the result would hold about %ld sends, about %.1f GB in memory while "
                            "it is synthesized and stored; this service has %.1f GB for one "
                            "result, so it cannot fit (fewer ranks or chunks, or a hierarchical "
                            "method)",
                            sends, bytes / 1e9, lim->max_result_bytes / 1e9);
    return CS_OK;
}

/* ---- running --------------------------------------------------------------------------- */

/* k < 0 keeps the request's k. */
static int run_smt(const cs_synth_request *r, const cs_synth_limits *lim,
                   const cs_synth_hooks *h, double budget_s, int k, cs_result **out,
                   cs_error *err)
{
    cs_smt_options o = r->smt;
    if (k >= 0)
        o.k = k;
    o.threads = lim->threads;
    o.max_ranks = lim->smt_limit_ranks;
    o.progress = h ? h->progress : NULL;
    o.progress_ctx = h ? h->progress_ctx : NULL;
    o.cancel = h ? h->cancel : NULL;
    if (budget_s > 0 && (o.total_time_limit_s <= 0 || o.total_time_limit_s > budget_s))
        o.total_time_limit_s = budget_s;
    return smt_search(synth_request_instance(r), &r->collective, &o, out, err);
}

static int run_tacos(const cs_synth_request *r, const cs_synth_limits *lim,
                     const cs_synth_hooks *h, cs_result **out, cs_error *err)
{
    cs_tacos_options o = r->tacos;
    o.threads = lim->threads;
    o.keep_sends = !lim->tacos_stats_only;
    o.progress = h ? h->progress : NULL;
    o.progress_ctx = h ? h->progress_ctx : NULL;
    o.cancel = h ? h->cancel : NULL;
    return tacos_synthesize(synth_request_instance(r), &r->collective, &o, out, err);
}

static int run_mcf(const cs_synth_request *r, const cs_synth_hooks *h, double budget_s,
                   cs_result **out, cs_error *err)
{
    cs_mcf_options o = r->mcf;
    o.progress = h ? h->progress : NULL;
    o.progress_ctx = h ? h->progress_ctx : NULL;
    o.cancel = h ? h->cancel : NULL;
    if (budget_s > 0 && (o.time_limit_s <= 0 || o.time_limit_s > budget_s))
        o.time_limit_s = budget_s;
    return mcf_synthesize(synth_request_instance(r), &r->collective, &o, out, err);
}

/* The budget of auto's unicast broadcast on copy-capable switches
 * (run_mcf_unicast_best), shared by mcf among its chunkings: ample for the
 * greedy (milliseconds per chunking), and the whole stays within the Slurm
 * hook's default 5 s (3 s gave the same schedules on dgx2 at 64 KiB, 1 MiB
 * and 64 MiB; docs/BENCHMARKS.md). */
#define SYNTH_UNICAST_BUDGET_S 1.5

/* A broadcast on copy-capable switches whose result must become code
 * (options.codegen): mcf on the unicast instance, the best of chunkings
 * 1..C (C = 16, or the largest power of two within lim->max_chunks) by
 * mcf's own best-of loop with its shared budget (docs/mcf.md "Chunkings":
 * floors first, the most promising chunkings first, an even share of what
 * is left, at least 0.25 s each, chunkings whose floor cannot win not run).
 * On the hyper-edge form the copy model's MILP rarely improves the greedy's
 * schedule (dgx2 at 64 MiB: 8 chunks end at 849 us after a 1 s or a 60 s
 * limit alike), while more chunks pipeline the tree better (16 chunks:
 * 688 us), so every chunking's greedy must count: this used its own even
 * 0.3 s slices over 1, 2, 4, 8, 16 from when mcf's loop spent the whole
 * budget on the smallest chunkings; on the shared loop dgx2,copy=1 gives the
 * same schedules at 64 MiB, 1 MiB and 64 KiB (3 chunks tried too, 1 or 8
 * and 16 skipped by their floors) in the same or less time.  note gets each
 * chunking's outcome for the reason. */
static int run_mcf_unicast_best(const cs_synth_request *r, const cs_synth_limits *lim,
                                const cs_synth_hooks *h, cs_result **out, char *note,
                                size_t notelen, cs_error *err)
{
    static const int cand[] = {1, 2, 4, 8, 16};
    int top = 1;
    for (size_t i = 0; i < sizeof cand / sizeof cand[0]; i++)
        if (cand[i] <= lim->max_chunks)
            top = cand[i];
    double budget = SYNTH_UNICAST_BUDGET_S;
    if (lim->mcf_time_budget_s > 0 && lim->mcf_time_budget_s < budget)
        budget = lim->mcf_time_budget_s;
    cs_synth_request rb = *r;
    rb.mcf.chunks = top;
    rb.mcf.min_chunks = 1;
    rb.mcf.max_chunks = 0;
    *out = NULL;
    int rc = run_mcf(&rb, h, budget, out, err);
    if (rc != CS_OK || !*out || (*out)->nalgs == 0)
        return rc;
    /* the note: each chunking's outcome, in chunk order (mcf's own reason
     * also explains the choice, too long to follow auto's within a reason) */
    json_t *tried = json_object_get(json_object_get((*out)->stats, "chunking"), "tried");
    char list[200] = "";
    size_t used = 0;
    for (int c = 1; c <= top; c++) {
        size_t i;
        json_t *e;
        json_array_foreach(tried, i, e) {
            if (json_integer_value(json_object_get(e, "chunks")) != c)
                continue;
            double us = json_number_value(json_object_get(e, "schedule_us"));
            const char *outcome = json_string_value(json_object_get(e, "outcome"));
            if (us > 0)
                snprintf(list + used, sizeof list - used, "%s%d: %.1f us", used ? ", " : "", c,
                         us);
            else
                snprintf(list + used, sizeof list - used, "%s%d: %s", used ? ", " : "", c,
                         outcome && !strncmp(outcome, "not run", 7) ? "cannot win" : "none");
            used = strlen(list);
            break;
        }
    }
    double best_us = json_number_value(json_object_get((*out)->stats, "schedule_us"));
    int best_c = (*out)->algs[0]->chunks;
    cs_text_printf(note, notelen, "mcf unicast: %d chunk%s end%s at %.1f us, the best of "
                   "chunkings %s of the same bytes within %.1f s shared", best_c,
                   best_c == 1 ? "" : "s", best_c == 1 ? "s" : "", best_us,
                   list[0] ? list : "1", budget);
    return CS_OK;
}

static int run_hier(const cs_synth_request *r, const cs_synth_limits *lim,
                    const cs_synth_hooks *h, cs_result **out, cs_error *err)
{
    cs_hier_options o = r->hier;
    o.threads = lim->threads;
    o.progress = h ? h->progress : NULL;
    o.progress_ctx = h ? h->progress_ctx : NULL;
    o.cancel = h ? h->cancel : NULL;
    return hier_synthesize(synth_request_instance(r), &r->collective, &o, out, err);
}

static int run_baseline(const cs_synth_request *r, cs_result **out, cs_error *err)
{
    double t0 = cs_now();
    cs_algorithm *a = NULL;
    int rc = baseline_generate(r->method, r->topology, &r->collective, &r->baseline, &a, err);
    if (rc)
        return rc;
    cs_result *res = NULL;
    if ((rc = result_new(r->method, &res, err))) {
        algorithm_free(a);
        return rc;
    }
    if ((rc = result_add(res, a))) {
        algorithm_free(a);
        result_free(res);
        return cs_error_set(err, rc, "", "cannot add the baseline to the result");
    }
    /* Bounds put the baseline in context; skipped (not an error) when they
     * cannot be computed cheaply. */
    if (r->topology->ranks <= 1024) {
        cs_bounds b;
        if (collective_bounds(r->topology, &r->collective, &b, NULL) == CS_OK) {
            res->bound_steps = b.steps;
            res->bound_rounds_per_chunk = b.rounds_per_chunk;
        }
    }
    res->complete = true;
    res->synth_seconds = cs_now() - t0;
    *out = res;
    return CS_OK;
}

/* ---- trivial requests (issue 12): answered for every method before dispatch ---- */

bool synth_request_trivial(const cs_synth_request *r)
{
    const cs_collective *c = &r->collective;
    int ranks = r->topology->ranks;
    if (c->kind != CS_COLL_CUSTOM)
        return ranks == 1; /* a lone contribution is the full reduction, too */
    for (int i = 0; i < c->npost; i++)
        if (!collective_pre(c, ranks, 1, c->post[2 * i], c->post[2 * i + 1]))
            return false;
    return true;
}

static int run_trivial(const cs_synth_request *r, cs_result **out, cs_error *err)
{
    cs_result *res = NULL;
    cs_algorithm *a = NULL;
    int rc = result_new("trivial", &res, err);
    if (!rc)
        rc = algorithm_new(&r->collective, r->topology->name, r->topology->ranks, 1, 0, &a, err);
    if (!rc) {
        snprintf(a->method, sizeof a->method, "trivial");
        snprintf(a->optimality, sizeof a->optimality, "both"); /* 0 steps, 0 rounds */
        rc = result_add(res, a);
        if (rc)
            algorithm_free(a);
    }
    if (rc) {
        result_free(res);
        return rc;
    }
    res->complete = true;
    res->bound_steps = 0;
    res->bound_rounds_per_chunk = 0;
    snprintf(res->reason, sizeof res->reason, "%s",
             r->topology->ranks == 1
                 ? "trivial: a single rank has nothing to send (0 steps, 0 rounds)"
                 : "trivial: every chunk is already where the postcondition wants it "
                   "(0 steps, 0 rounds)");
    *out = res;
    return CS_OK;
}

int synth_run(const cs_synth_request *r, const cs_synth_limits *lim_in,
              const cs_synth_hooks *hooks, cs_result **out, cs_error *err)
{
    if (synth_request_trivial(r)) {
        *out = NULL;
        return run_trivial(r, out, err);
    }
    cs_synth_limits defaults;
    if (!lim_in) {
        synth_limits_default(&defaults);
        lim_in = &defaults;
    }
    const cs_synth_limits *lim = lim_in;
    *out = NULL;
    double t0 = cs_now();
    int rc;
    char reason[512] = "", mcf_note[200] = "";
    switch (r->method_kind) {
    case CS_SYNTH_SMT:
        rc = run_smt(r, lim, hooks, 0, -1, out, err);
        /* the SMT's own reason whole (it was cut at 200 characters) */
        cs_text_printf(reason, sizeof reason, "method smt requested; %s",
                       rc == CS_OK && *out ? (*out)->reason : "");
        break;
    case CS_SYNTH_TACOS:
        rc = run_tacos(r, lim, hooks, out, err);
        snprintf(reason, sizeof reason, "method tacos requested");
        break;
    case CS_SYNTH_BASELINE:
        rc = run_baseline(r, out, err);
        snprintf(reason, sizeof reason, "baseline %s requested", r->method);
        break;
    case CS_SYNTH_MCF:
        rc = run_mcf(r, hooks, r->time_limit_s, out, err);
        snprintf(reason, sizeof reason, "method mcf requested%s",
                 r->instance ? "; copy-capable switches used as unicast hyper-edges: "
                               "options.codegen asks for code, which cannot copy in a switch"
                             : "");
        break;
    case CS_SYNTH_HIER:
        rc = run_hier(r, lim, hooks, out, err);
        if (rc == CS_OK)
            snprintf(reason, sizeof reason, "method hierarchical requested; %.220s",
                     (*out)->reason);
        break;
    default: {
        const cs_topology *t = synth_request_instance(r);
        /* Broadcast on copy-capable switches: only mcf uses the in-switch
         * copy (the other methods send unicast through the switch), and a
         * chunk sent up once and copied down to every port beats any
         * unicast tree there (docs/BENCHMARKS.md, "Issue 13: mcf").  When
         * the request needs code (options.codegen), the instance t has
         * unicast switches: mcf's pipelined unicast tree there is still far
         * ahead of the step-synchronous methods (dgx2 at 64 MiB: 688 us
         * against TACOS' 6712 us), so mcf still goes first. */
        bool copy_switch = r->topology->nswitch_nodes > 0 &&
                           r->collective.kind == CS_COLL_BROADCAST;
        bool unicast = copy_switch && r->instance != NULL;
        if (r->collective.kind == CS_COLL_ALLTOALL || r->collective.kind == CS_COLL_CUSTOM ||
            copy_switch) {
            long cols = -1;
            cs_error merr;
            cs_error_clear(&merr);
            if (t->ranks <= lim->mcf_max_ranks)
                cols = mcf_estimate_columns(t, &r->collective, &r->mcf);
            if (t->ranks > lim->mcf_max_ranks) {
                snprintf(mcf_note, sizeof mcf_note, "mcf: %d ranks > mcf limit %d; ", t->ranks,
                         lim->mcf_max_ranks);
            } else if (cols < 0 || cols > lim->mcf_max_columns) {
                snprintf(mcf_note, sizeof mcf_note,
                         "mcf: ~%ld model variables > mcf limit %ld; ", cols, lim->mcf_max_columns);
            } else {
                /* copy broadcast: the best of 1..8 chunks (pipelined through the
                 * switch, C + 1 sends for C chunks; each chunking is proved by
                 * mcf's source-egress floor without an LP, so this is cheap),
                 * unless the request asks for more chunks */
                cs_synth_request rb = *r;
                bool widen = copy_switch && rb.mcf.chunks == 1 && rb.mcf.max_chunks == 0 &&
                             rb.mcf.epochs == 0;
                /* the chunking that wins depends on the size: without
                 * options.mcf.bytes, the size the result is judged at
                 * (ratio_to_bound's, options.tacos.bytes) */
                cs_mcf_options md;
                mcf_options_default(&md);
                if (copy_switch && rb.mcf.bytes == md.bytes)
                    rb.mcf.bytes = synth_bound_bytes(r);
                char unote[400] = "";
                if (widen && unicast) {
                    rc = run_mcf_unicast_best(&rb, lim, hooks, out, unote, sizeof unote, &merr);
                } else {
                    if (widen) {
                        rb.mcf.chunks = 8;
                        rb.mcf.min_chunks = 1;
                    }
                    rc = run_mcf(&rb, hooks, lim->mcf_time_budget_s, out, &merr);
                }
                if (rc == CS_OK && *out && (*out)->nalgs > 0) {
                    if (unicast)
                        cs_text_printf(reason, sizeof reason,
                                       "auto: broadcast on copy-capable switches with %d ranks "
                                       "<= %d and ~%ld model variables <= %ld, but "
                                       "options.codegen asks for code, which cannot copy in a "
                                       "switch (without it the switch copies, faster): the "
                                       "switches as unicast hyper-edges; mcf (TE-CCL flow "
                                       "model: pipelined, alpha per hop%s)",
                                       t->ranks, lim->mcf_max_ranks, cols, lim->mcf_max_columns,
                                       (*out)->complete ? ", optimal" : ", stopped at its budget");
                    else
                        cs_text_printf(reason, sizeof reason,
                                       "auto: %s%s with %d ranks <= %d and ~%ld model variables "
                                       "<= %ld; mcf (TE-CCL flow model: pipelined, alpha per "
                                       "hop%s%s%s)",
                                       collective_kind_name(r->collective.kind),
                                       copy_switch ? " on copy-capable switches" : "", t->ranks,
                                       lim->mcf_max_ranks, cols, lim->mcf_max_columns,
                                       copy_switch ? ", copies in the switch" : "",
                                       r->instance ? ", switches unicast for options.codegen" : "",
                                       (*out)->complete ? ", optimal" : ", stopped at its budget");
                    if (unote[0])
                        snprintf((*out)->reason, sizeof (*out)->reason, "%s", unote);
                    break;
                }
                if (rc == CS_ECANCELLED || cs_cancel_requested(hooks ? hooks->cancel : NULL)) {
                    result_free(*out);
                    *out = NULL;
                    rc = cs_error_set(err, CS_ECANCELLED, "", "synthesis cancelled");
                    break;
                }
                result_free(*out);
                *out = NULL;
                snprintf(mcf_note, sizeof mcf_note, "mcf found nothing (%.120s); ",
                         merr.message[0] ? merr.message : cs_status_name(rc));
            }
        }
        long vars = synth_smt_estimate_variables(t, &r->collective, r->smt.max_chunks);
        /* nodes joined by a fabric, too large for SMT: compose instead of flat TACOS */
        char hier_note[200] = "";
        if (t->ranks > lim->smt_max_ranks || vars > lim->smt_max_variables) {
            cs_error herr;
            cs_error_clear(&herr);
            if (hier_auto_applicable(t, &r->collective, &herr) == CS_OK) {
                rc = run_hier(r, lim, hooks, out, &herr);
                bool ring = rc == CS_OK && (*out)->stats &&
                            json_is_string(json_object_get((*out)->stats, "fabric")) &&
                            strcmp(json_string_value(json_object_get((*out)->stats, "fabric")),
                                   "ring") == 0 &&
                            strstr((*out)->reason, "NIC trees balanced") != NULL;
                if (rc == CS_OK && ring) {
                    /* why a ring is composed too: measured, docs/hier.md */
                    snprintf(reason, sizeof reason,
                             "auto: %d ranks in nodes on a ring fabric, too large for smt; "
                             "hierarchical with NIC trees balanced to the lanes matches flat "
                             "tacos around the ring (allgather) or beats it (allreduce, "
                             "broadcast) in tens of steps; %.150s", t->ranks, (*out)->reason);
                    break;
                }
                if (rc == CS_OK) {
                    snprintf(reason, sizeof reason, "auto: %d ranks in nodes, too large for "
                             "smt; %.180s", t->ranks, (*out)->reason);
                    break;
                }
                if (rc == CS_ECANCELLED || cs_cancel_requested(hooks ? hooks->cancel : NULL)) {
                    rc = cs_error_set(err, CS_ECANCELLED, "", "synthesis cancelled");
                    break;
                }
                snprintf(hier_note, sizeof hier_note, "hierarchical failed (%.150s); ",
                         herr.message);
            }
        }
        if (t->ranks > lim->smt_max_ranks) {
            snprintf(reason, sizeof reason, "auto: %s%d ranks > smt limit %d; tacos", hier_note,
                     t->ranks, lim->smt_max_ranks);
            rc = run_tacos(r, lim, hooks, out, err);
            break;
        }
        if (vars > lim->smt_max_variables) {
            cs_text_printf(reason, sizeof reason,
                     "auto: %s~%ld smt variables > limit %ld (%d ranks); tacos", hier_note,
                     vars, lim->smt_max_variables, t->ranks);
            rc = run_tacos(r, lim, hooks, out, err);
            break;
        }
        cs_error serr;
        cs_error_clear(&serr);
        /* the request's k: automatic unless given (smt.h, CS_SMT_K_AUTO) */
        rc = run_smt(r, lim, hooks, lim->smt_time_budget_s, -1, out, &serr);
        if (rc == CS_OK && *out && (*out)->nalgs > 0) {
            /* the SMT's own reason whole: cut at 150 characters, the README's
             * dgx1 example ended "...; 4 unsat instances o" */
            cs_text_printf(reason, sizeof reason,
                     "auto: %d ranks <= %d and ~%ld smt variables <= %ld; smt (%s); %s",
                     t->ranks, lim->smt_max_ranks, vars, lim->smt_max_variables,
                     r->smt.steps > 0       ? "one instance decided"
                     : (*out)->complete     ? "frontier complete"
                                            : "frontier partial: time budget ran out",
                     (*out)->reason);
            break;
        }
        if (rc == CS_ECANCELLED || cs_cancel_requested(hooks ? hooks->cancel : NULL)) {
            result_free(*out);
            *out = NULL;
            rc = cs_error_set(err, CS_ECANCELLED, "", "synthesis cancelled");
            break;
        }
        const char *why = rc == CS_ETIMEOUT || rc == CS_OK
                              ? "smt found nothing within its time budget"
                          : rc == CS_EUNSUPPORTED ? "smt does not handle this collective"
                          : rc == CS_ELIMIT       ? "the instance exceeds an smt limit"
                                                  : cs_status_name(rc);
        if (rc == CS_EUNSAT) {
            /* proven impossible: TACOS cannot do better; report it */
            if (err)
                *err = serr;
            break;
        }
        result_free(*out);
        *out = NULL;
        if (serr.message[0])
            snprintf(reason, sizeof reason, "auto: %s (%.200s); tacos", why, serr.message);
        else
            snprintf(reason, sizeof reason, "auto: %s; tacos", why);
        rc = run_tacos(r, lim, hooks, out, err);
        break;
    }
    }
    if (rc != CS_OK) {
        result_free(*out);
        *out = NULL;
        return rc;
    }
    if (!*out)
        return cs_error_set(err, CS_EINTERNAL, "", "the synthesizer returned no result");
    if (mcf_note[0] && strcmp((*out)->method, "mcf") != 0 && strncmp(reason, "auto: ", 6) == 0)
        cs_text_printf((*out)->reason, sizeof (*out)->reason, "auto: %s%s", mcf_note, reason + 6);
    else if (strcmp((*out)->method, "mcf") == 0 && (*out)->reason[0]) {
        /* mcf says which chunking it chose and why: keep it after ours */
        char own[sizeof (*out)->reason];
        snprintf(own, sizeof own, "%s", (*out)->reason);
        cs_text_printf((*out)->reason, sizeof (*out)->reason, "%s; %s", reason, own);
    } else
        snprintf((*out)->reason, sizeof (*out)->reason, "%s", reason);
    /* Every result carries the contract's bounds, whichever method ran: the
     * heuristic methods do not compute them themselves. */
    if ((*out)->bound_steps <= 0) {
        cs_bounds b;
        if (collective_bounds(r->topology, &r->collective, &b, NULL) == CS_OK) {
            (*out)->bound_steps = b.steps;
            (*out)->bound_rounds_per_chunk = b.rounds_per_chunk;
        }
    }
    if ((*out)->synth_seconds <= 0)
        (*out)->synth_seconds = cs_now() - t0;
    return CS_OK;
}

static json_t *synth_result_doc(const cs_synth_request *r, const cs_result *res,
                                bool with_sends);

json_t *synth_result_to_json(const cs_synth_request *r, const cs_result *res)
{
    return synth_result_doc(r, res, true);
}

json_t *synth_result_to_json_frame(const cs_synth_request *r, const cs_result *res)
{
    return synth_result_doc(r, res, false);
}

static json_t *synth_result_doc(const cs_synth_request *r, const cs_result *res,
                                bool with_sends)
{
    json_t *doc = with_sends ? result_to_json(res) : result_to_json_frame(res);
    if (!doc)
        return NULL;
    json_object_set_new(doc, "key", json_string(r->key));
    json_object_set_new(doc, "topology", json_string(r->topology->name));
    json_object_set_new(doc, "collective", synth_canonical_collective(&r->collective));
    json_object_set_new(doc, "reason", json_string(res->reason));
    if (!json_object_get(doc, "method"))
        json_object_set_new(doc, "method", json_string(res->method));
    /* the bound is an addition: a result without it (out of memory) is still whole */
    synth_annotate_time_bound(doc, r->topology, &r->collective, res, synth_bound_bytes(r),
                              NULL);
    synth_annotate_mcf_bound(doc, res);
    return doc;
}
