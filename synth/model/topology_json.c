/*
 * topology_json.c - the document form of a cs_topology (topology.h):
 * topology_from_json, topology_parse, topology_load and topology_to_json.
 * Building and finalizing are topology.c's; this file only translates.
 *
 * It is a file of its own because the document is the untrusted edge of the
 * module (clients send topologies to the daemon), so its rules are strict and
 * many: unknown keys, wrong types and out-of-range values are errors naming
 * the JSON path ("switches[1].ranks[2]"), integers are checked as 64-bit
 * values so huge numbers are refused rather than truncated, and size limits
 * (cs_topology_parse_options) are checked before memory is committed.  Link
 * positions are recorded while parsing and handed to finalize, so even a
 * duplicate link found after sorting is reported by its document index.
 *
 * Printing gives the document form back: switches as switches, derived links
 * omitted, and a->b / b->a pairs with equal values folded into one
 * bidirectional link.
 */
#include "topology.h"
#include "topology_internal.h"

#include <ctype.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define DEFAULT_GBPS 50.0
#define DEFAULT_ALPHA_US 0.5

/* Rejects keys of obj not in the NULL-terminated list, naming the first. */
static int check_keys(const json_t *obj, const char *const *allowed, const char *path,
                      cs_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        bool ok = false;
        for (int i = 0; allowed[i] && !ok; i++)
            ok = strcmp(key, allowed[i]) == 0;
        if (!ok) {
            char f[CS_ERROR_FIELD_MAX], list[256] = "";
            size_t used = 0;
            for (int i = 0; allowed[i] && used < sizeof list; i++)
                used += (size_t)snprintf(list + used, sizeof list - used, "%s%s", i ? ", " : "",
                                         allowed[i]);
            if (path[0])
                fieldf(f, "%s.%s", path, key);
            else
                fieldf(f, "%s", key);
            return cs_error_set(err, CS_EINVAL, f, "unknown key \"%s\" (accepted: %s)", key,
                                list);
        }
    }
    return CS_OK;
}

/* Reads an integer field in [lo, hi].  Missing: *out = dflt, or an error if
 * required. */
static int get_int(const json_t *obj, const char *key, const char *path, bool required,
                   long long dflt, long long lo, long long hi, int code_if_high, long long *out,
                   cs_error *err)
{
    char f[CS_ERROR_FIELD_MAX];
    if (path[0])
        fieldf(f, "%s.%s", path, key);
    else
        fieldf(f, "%s", key);
    json_t *v = json_object_get(obj, key);
    if (!v) {
        if (required)
            return cs_error_set(err, CS_EINVAL, f, "required integer is missing");
        *out = dflt;
        return CS_OK;
    }
    if (!json_is_integer(v))
        return cs_error_set(err, CS_EINVAL, f, "must be an integer");
    long long x = json_integer_value(v);
    if (x < lo)
        return cs_error_set(err, CS_EINVAL, f, "%lld is below the minimum %lld", x, lo);
    if (x > hi)
        return cs_error_set(err, code_if_high, f, "%lld is above the maximum %lld", x, hi);
    *out = x;
    return CS_OK;
}

static int get_number(const json_t *obj, const char *key, const char *path, double dflt,
                      double *out, cs_error *err)
{
    json_t *v = json_object_get(obj, key);
    if (!v) {
        *out = dflt;
        return CS_OK;
    }
    if (!json_is_number(v)) {
        char f[CS_ERROR_FIELD_MAX];
        fieldf(f, "%s.%s", path, key);
        return cs_error_set(err, CS_EINVAL, f, "must be a number");
    }
    *out = json_number_value(v);
    return CS_OK;
}

/* A rank given as a JSON integer in [0, ranks). */
static int get_rank(const json_t *v, int ranks, const char *field, int *out, cs_error *err)
{
    if (!v)
        return cs_error_set(err, CS_EINVAL, field, "required rank is missing");
    if (!json_is_integer(v))
        return cs_error_set(err, CS_EINVAL, field, "rank must be an integer");
    long long x = json_integer_value(v);
    if (x < 0 || x >= ranks)
        return cs_error_set(err, CS_EINVAL, field, "rank %lld out of range 0..%d", x,
                            ranks - 1);
    *out = (int)x;
    return CS_OK;
}

static int get_rank_array(const json_t *arr, int ranks, const char *path, int **out, int *n,
                          cs_error *err)
{
    *out = NULL;
    if (!json_is_array(arr))
        return cs_error_set(err, CS_EINVAL, path, "must be an array of ranks");
    size_t len = json_array_size(arr);
    if (len > (size_t)ranks)
        return cs_error_set(err, CS_EINVAL, path, "%zu entries but only %d ranks", len, ranks);
    int *a = malloc(sizeof(int) * (len > 0 ? len : 1));
    if (!a)
        return cs_error_set(err, CS_ENOMEM, path, "out of memory");
    for (size_t i = 0; i < len; i++) {
        char f[CS_ERROR_FIELD_MAX];
        fieldf(f, "%s[%zu]", path, i);
        int rc = get_rank(json_array_get(arr, i), ranks, f, &a[i], err);
        if (rc) {
            free(a);
            return rc;
        }
    }
    *out = a;
    *n = (int)len;
    return CS_OK;
}

/* Rewrites the field of an error from add_switch/add_group ("switch.ranks[2]")
 * to the document path ("switches[1].ranks[2]"). */
static void prefix_field(cs_error *err, const char *from, const char *to)
{
    if (!err)
        return;
    size_t n = strlen(from);
    if (strncmp(err->field, from, n) == 0) {
        char f[CS_ERROR_FIELD_MAX];
        fieldf(f, "%s%s", to, err->field + n);
        memcpy(err->field, f, sizeof f);
    }
}

static int parse_links(const json_t *links, cs_topology *t, size_t max_links, int **origin,
                       cs_error *err)
{
    static const char *const keys[] = { "src", "dst", "lanes", "gbps", "alpha_us",
                                        "bidirectional", NULL };
    *origin = NULL;
    if (!links)
        return CS_OK;
    if (!json_is_array(links))
        return cs_error_set(err, CS_EINVAL, "links", "must be an array");
    size_t n = json_array_size(links);
    if (n > CS_TOPOLOGY_MAX_LINKS || (max_links && n > max_links))
        return cs_error_set(err, CS_ELIMIT, "links", "%zu links is more than the limit %zu", n,
                            max_links && max_links < CS_TOPOLOGY_MAX_LINKS
                                ? max_links : (size_t)CS_TOPOLOGY_MAX_LINKS);
    int *org = malloc(sizeof(int) * (2 * n + 1));
    if (!org)
        return cs_error_set(err, CS_ENOMEM, "links", "out of memory");
    for (size_t i = 0; i < n; i++) {
        char path[CS_ERROR_FIELD_MAX], f[CS_ERROR_FIELD_MAX];
        fieldf(path, "links[%zu]", i);
        json_t *l = json_array_get(links, i);
        int rc = CS_OK;
        if (!json_is_object(l)) {
            rc = cs_error_set(err, CS_EINVAL, path, "must be an object");
            goto fail;
        }
        if ((rc = check_keys(l, keys, path, err)))
            goto fail;
        int src, dst;
        fieldf(f, "%s.src", path);
        if ((rc = get_rank(json_object_get(l, "src"), t->ranks, f, &src, err)))
            goto fail;
        fieldf(f, "%s.dst", path);
        if ((rc = get_rank(json_object_get(l, "dst"), t->ranks, f, &dst, err)))
            goto fail;
        if (src == dst) {
            rc = cs_error_set(err, CS_EINVAL, f, "self-loop: src and dst are both %d", src);
            goto fail;
        }
        long long lanes;
        double gbps, alpha;
        if ((rc = get_int(l, "lanes", path, false, 1, LLONG_MIN, LLONG_MAX, CS_EINVAL, &lanes,
                          err)) ||
            (rc = get_number(l, "gbps", path, DEFAULT_GBPS, &gbps, err)) ||
            (rc = get_number(l, "alpha_us", path, DEFAULT_ALPHA_US, &alpha, err)) ||
            (rc = cs_topology_check_link_values(lanes, gbps, alpha, path, err)))
            goto fail;
        json_t *bi = json_object_get(l, "bidirectional");
        if (bi && !json_is_boolean(bi)) {
            fieldf(f, "%s.bidirectional", path);
            rc = cs_error_set(err, CS_EINVAL, f, "must be true or false");
            goto fail;
        }
        bool bidir = bi && json_is_true(bi);
        if (max_links && (size_t)t->nlinks + (bidir ? 2 : 1) > max_links) {
            rc = cs_error_set(err, CS_ELIMIT, path, "more than the limit of %zu links",
                              max_links);
            goto fail;
        }
        org[t->nlinks] = (int)i;
        if (bidir)
            org[t->nlinks + 1] = (int)i;
        if ((rc = topology_add_link(t, src, dst, (int)lanes, gbps, alpha, bidir, err))) {
            prefix_field(err, "", path);
            goto fail;
        }
        continue;
    fail:
        free(org);
        return rc;
    }
    *origin = org;
    return CS_OK;
}

static int parse_shared(const json_t *shared, cs_topology *t, cs_error *err)
{
    static const char *const keys[] = { "links", "lanes", NULL };
    if (!shared)
        return CS_OK;
    if (!json_is_array(shared))
        return cs_error_set(err, CS_EINVAL, "shared", "must be an array");
    for (size_t i = 0; i < json_array_size(shared); i++) {
        char path[CS_ERROR_FIELD_MAX], f[CS_ERROR_FIELD_MAX];
        fieldf(path, "shared[%zu]", i);
        json_t *s = json_array_get(shared, i);
        if (!json_is_object(s))
            return cs_error_set(err, CS_EINVAL, path, "must be an object");
        int rc = check_keys(s, keys, path, err);
        if (rc)
            return rc;
        long long lanes;
        if ((rc = get_int(s, "lanes", path, false, 1, 1, CS_TOPOLOGY_MAX_LANES, CS_EINVAL, &lanes,
                          err)))
            return rc;
        json_t *links = json_object_get(s, "links");
        fieldf(f, "%s.links", path);
        if (!json_is_array(links) || json_array_size(links) == 0)
            return cs_error_set(err, CS_EINVAL, f, "must be a non-empty array of [src, dst]");
        size_t n = json_array_size(links);
        if (n > (size_t)CS_TOPOLOGY_MAX_LINKS)
            return cs_error_set(err, CS_ELIMIT, f, "too many links");
        int (*pairs)[2] = malloc(sizeof *pairs * n);
        if (!pairs)
            return cs_error_set(err, CS_ENOMEM, f, "out of memory");
        for (size_t j = 0; j < n && rc == CS_OK; j++) {
            json_t *p = json_array_get(links, j);
            char g[CS_ERROR_FIELD_MAX];
            fieldf(g, "%s.links[%zu]", path, j);
            if (!json_is_array(p) || json_array_size(p) != 2) {
                rc = cs_error_set(err, CS_EINVAL, g, "must be a pair [src, dst]");
                break;
            }
            rc = get_rank(json_array_get(p, 0), t->ranks, g, &pairs[j][0], err);
            if (rc == CS_OK)
                rc = get_rank(json_array_get(p, 1), t->ranks, g, &pairs[j][1], err);
        }
        if (rc == CS_OK)
            rc = topology_add_shared(t, (const int (*)[2])pairs, (int)n, (int)lanes, err);
        free(pairs);
        if (rc)
            return rc;
    }
    return CS_OK;
}

/* A switch of n ranks becomes n(n-1) directed links when finalize lowers it
 * (fewer only where a physical link already joins a pair).  The sum is
 * checked against the link limit before a switch is added, so a small
 * document naming a huge switch is refused from its counts, not after
 * hundreds of MB of links were built. */
static int parse_switches(const json_t *switches, cs_topology *t, size_t max_links,
                          cs_error *err)
{
    static const char *const keys[] = { "name", "ranks", "gbps", "alpha_us", "copy", NULL };
    long long links = t->nlinks;
    if (!switches)
        return CS_OK;
    if (!json_is_array(switches))
        return cs_error_set(err, CS_EINVAL, "switches", "must be an array");
    for (size_t i = 0; i < json_array_size(switches); i++) {
        char path[CS_ERROR_FIELD_MAX], f[CS_ERROR_FIELD_MAX];
        fieldf(path, "switches[%zu]", i);
        json_t *s = json_array_get(switches, i);
        if (!json_is_object(s))
            return cs_error_set(err, CS_EINVAL, path, "must be an object");
        int rc = check_keys(s, keys, path, err);
        if (rc)
            return rc;
        json_t *name = json_object_get(s, "name");
        char nbuf[64] = "";
        if (name) {
            fieldf(f, "%s.name", path);
            if (!json_is_string(name))
                return cs_error_set(err, CS_EINVAL, f, "must be a string");
            if (json_string_length(name) >= sizeof nbuf)
                return cs_error_set(err, CS_EINVAL, f, "longer than %zu characters",
                                    sizeof nbuf - 1);
            snprintf(nbuf, sizeof nbuf, "%s", json_string_value(name));
        }
        json_t *copy = json_object_get(s, "copy");
        if (copy && !json_is_boolean(copy)) {
            fieldf(f, "%s.copy", path);
            return cs_error_set(err, CS_EINVAL, f, "must be true or false");
        }
        double gbps, alpha;
        if ((rc = get_number(s, "gbps", path, DEFAULT_GBPS, &gbps, err)) ||
            (rc = get_number(s, "alpha_us", path, DEFAULT_ALPHA_US, &alpha, err)) ||
            (rc = cs_topology_check_link_values(1, gbps, alpha, path, err)))
            return rc;
        fieldf(f, "%s.ranks", path);
        int *ranks, n;
        if ((rc = get_rank_array(json_object_get(s, "ranks"), t->ranks, f, &ranks, &n, err)))
            return rc;
        long long lowered = (long long)n * (n - 1);
        long long cap = max_links ? (long long)max_links : CS_TOPOLOGY_MAX_LINKS;
        if (links + lowered > cap) {
            free(ranks);
            return cs_error_set(err, CS_ELIMIT, path,
                                "a switch of %d ranks is %lld links once lowered; with the %lld "
                                "before it that is more than the limit of %lld links",
                                n, lowered, links, cap);
        }
        links += lowered;
        rc = topology_add_switch(t, nbuf, ranks, n, gbps, alpha, err);
        if (rc == CS_OK && copy && json_is_true(copy))
            rc = topology_set_switch_copy(t, t->nswitches - 1, true, err);
        free(ranks);
        if (rc) {
            prefix_field(err, "switch", path);
            return rc;
        }
    }
    return CS_OK;
}

static int parse_groups(const json_t *groups, cs_topology *t, cs_error *err)
{
    if (!groups)
        return CS_OK;
    if (!json_is_array(groups))
        return cs_error_set(err, CS_EINVAL, "groups", "must be an array of rank arrays");
    for (size_t i = 0; i < json_array_size(groups); i++) {
        char path[CS_ERROR_FIELD_MAX];
        fieldf(path, "groups[%zu]", i);
        int *ranks, n, rc;
        if ((rc = get_rank_array(json_array_get(groups, i), t->ranks, path, &ranks, &n, err)))
            return rc;
        rc = topology_add_group(t, ranks, n, err);
        free(ranks);
        if (rc) {
            /* "group.ranks[3]" -> "groups[i][3]" */
            if (err && strncmp(err->field, "group.ranks", 11) == 0) {
                char f[CS_ERROR_FIELD_MAX];
                fieldf(f, "%s%s", path, err->field + 11);
                memcpy(err->field, f, sizeof f);
            } else if (err) {
                snprintf(err->field, sizeof err->field, "%s", path);
            }
            return rc;
        }
    }
    return CS_OK;
}

int topology_from_json(const json_t *doc, const cs_topology_parse_options *opt,
                       cs_topology **out, cs_error *err)
{
    static const char *const keys[] = { "name", "ranks", "links", "shared", "switches",
                                        "groups", NULL };
    *out = NULL;
    if (!json_is_object(doc))
        return cs_error_set(err, CS_EINVAL, "", "a topology must be a JSON object");
    int rc = check_keys(doc, keys, "", err);
    if (rc)
        return rc;
    int max_ranks = opt && opt->max_ranks > 0 ? opt->max_ranks : CS_TOPOLOGY_DEFAULT_MAX_RANKS;
    size_t max_links = opt ? opt->max_links : 0;
    long long ranks;
    if ((rc = get_int(doc, "ranks", "", true, 0, 1, max_ranks, CS_ELIMIT, &ranks, err)))
        return rc;
    const char *name = "custom";
    json_t *jn = json_object_get(doc, "name");
    if (jn) {
        if (!json_is_string(jn))
            return cs_error_set(err, CS_EINVAL, "name", "must be a string");
        if (json_string_length(jn) >= CS_NAME_MAX)
            return cs_error_set(err, CS_EINVAL, "name", "longer than %d characters",
                                CS_NAME_MAX - 1);
        name = json_string_value(jn);
    }
    cs_topology *t = topology_new(name, (int)ranks);
    if (!t)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    int *origin = NULL;
    rc = parse_links(json_object_get(doc, "links"), t, max_links, &origin, err);
    if (rc == CS_OK)
        rc = parse_shared(json_object_get(doc, "shared"), t, err);
    if (rc == CS_OK)
        rc = parse_switches(json_object_get(doc, "switches"), t, max_links, err);
    if (rc == CS_OK)
        rc = parse_groups(json_object_get(doc, "groups"), t, err);
    if (rc == CS_OK)
        rc = cs_topology_finalize_with_origin(t, origin, err);
    free(origin);
    if (rc == CS_OK && max_links && (size_t)t->nlinks > max_links)
        rc = cs_error_set(err, CS_ELIMIT, "switches",
                          "lowering the switches gives %d links, more than the limit %zu",
                          t->nlinks, max_links);
    if (rc) {
        topology_free(t);
        return rc;
    }
    *out = t;
    return CS_OK;
}

int topology_parse(const char *text, size_t len, const cs_topology_parse_options *opt,
                   cs_topology **out, cs_error *err)
{
    *out = NULL;
    if (!text)
        return cs_error_set(err, CS_EINVAL, "", "no topology text");
    json_error_t je;
    json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
    if (!doc)
        return cs_error_set(err, CS_EINVAL, "", "invalid JSON at line %d column %d: %s",
                            je.line, je.column, je.text);
    int rc = topology_from_json(doc, opt, out, err);
    json_decref(doc);
    return rc;
}

int topology_load(const char *spec, const cs_topology_parse_options *opt, cs_topology **out,
                  cs_error *err)
{
    *out = NULL;
    if (!spec)
        return cs_error_set(err, CS_EINVAL, "topology", "no topology given");
    const char *p = spec;
    while (*p && isspace((unsigned char)*p))
        p++;
    if (*p == '{')
        return topology_parse(p, strlen(p), opt, out, err);
    bool looks_like_path = *p == '/' || *p == '.' || strchr(p, '/') || strstr(p, ".json");
    if (!looks_like_path) {
        /* a builtin name, refused before it is built if it has too many ranks */
        int max_ranks =
            opt && opt->max_ranks > 0 ? opt->max_ranks : CS_TOPOLOGY_DEFAULT_MAX_RANKS;
        cs_error berr = { 0 };
        int rc = cs_topology_builtin_limited(p, max_ranks, out, &berr);
        if (rc == CS_EINVAL && access(p, R_OK) == 0)
            looks_like_path = true;   /* not a builtin, but a file of that name */
        else {
            if (err)
                *err = berr;
            if (rc == CS_OK && opt && opt->max_links && (size_t)(*out)->nlinks > opt->max_links) {
                rc = cs_error_set(err, CS_ELIMIT, "topology",
                                  "%s has %d links, more than the limit %zu", p, (*out)->nlinks,
                                  opt->max_links);
                topology_free(*out);
                *out = NULL;
            }
            return rc;
        }
    }
    char *text = NULL;
    size_t len = 0;
    int rc = cs_read_file(p, &text, &len, err);
    if (rc)
        return rc;
    rc = topology_parse(text, len, opt, out, err);
    free(text);
    return rc;
}

static json_t *int_array(const int *a, int n)
{
    json_t *arr = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(arr, json_integer(a[i]));
    return arr;
}

json_t *topology_to_json(const cs_topology *t)
{
    if (!t)
        return NULL;
    json_t *doc = json_object();
    json_object_set_new(doc, "name", json_string(t->name));
    json_object_set_new(doc, "ranks", json_integer(t->ranks));
    json_t *links = json_array();
    /* A pair a->b, b->a with equal values prints once as bidirectional. */
    for (int i = 0; i < t->nlinks; i++) {
        const cs_link *l = &t->links[i];
        if (l->switch_id >= 0)
            continue;
        bool bidir = false;
        int r = t->finalized ? topology_find_link(t, l->dst, l->src) : -1;
        if (r >= 0) {
            const cs_link *b = &t->links[r];
            if (b->switch_id < 0 && b->lanes == l->lanes && b->gbps == l->gbps &&
                b->alpha_us == l->alpha_us) {
                if (l->src > l->dst)
                    continue;
                bidir = true;
            }
        }
        json_t *o = json_object();
        json_object_set_new(o, "src", json_integer(l->src));
        json_object_set_new(o, "dst", json_integer(l->dst));
        json_object_set_new(o, "lanes", json_integer(l->lanes));
        json_object_set_new(o, "gbps", json_real(l->gbps));
        json_object_set_new(o, "alpha_us", json_real(l->alpha_us));
        if (bidir)
            json_object_set_new(o, "bidirectional", json_true());
        json_array_append_new(links, o);
    }
    json_object_set_new(doc, "links", links);
    json_t *shared = json_array();
    for (int i = 0; i < t->nshared; i++) {
        const cs_shared *s = &t->shared[i];
        if (s->switch_id >= 0)
            continue;
        json_t *pairs = json_array();
        for (int j = 0; j < s->nlinks; j++) {
            int src, dst;
            if (t->finalized) {
                src = t->links[s->links[j]].src;
                dst = t->links[s->links[j]].dst;
            } else {
                src = s->links[2 * j];
                dst = s->links[2 * j + 1];
            }
            json_array_append_new(pairs, json_pack("[ii]", src, dst));
        }
        json_array_append_new(shared, json_pack("{s:o,s:i}", "links", pairs, "lanes", s->lanes));
    }
    if (json_array_size(shared) > 0)
        json_object_set_new(doc, "shared", shared);
    else
        json_decref(shared);
    if (t->nswitches > 0) {
        json_t *sw = json_array();
        for (int i = 0; i < t->nswitches; i++) {
            const cs_switch *s = &t->switches[i];
            json_t *o = json_pack("{s:s,s:o,s:f,s:f}", "name", s->name, "ranks",
                                  int_array(s->ranks, s->nranks), "gbps", s->gbps, "alpha_us",
                                  s->alpha_us);
            if (o && s->copy)   /* printed only when set: old documents print as before */
                json_object_set_new(o, "copy", json_true());
            json_array_append_new(sw, o);
        }
        json_object_set_new(doc, "switches", sw);
    }
    if (t->ngroups > 0) {
        json_t *g = json_array();
        for (int i = 0; i < t->ngroups; i++)
            json_array_append_new(g, int_array(t->groups[i].ranks, t->groups[i].nranks));
        json_object_set_new(doc, "groups", g);
    }
    return doc;
}
