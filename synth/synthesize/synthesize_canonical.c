/*
 * synthesize_canonical.c - the canonical form of a parsed synthesis request
 * and its key (synthesize_internal.h; the format is described in
 * synthesize.h).
 *
 * The canonical form is built here from the parsed objects, not copied from
 * the client's document: that is what makes "dgx1" and the equivalent JSON
 * document, or two link orders, hash to the same key.  The topology is
 * re-serialized from the finalized cs_topology (physical links only; switch
 * lowering is derived again when the canonical document is parsed), every
 * unordered list (links, shared sets and their links, groups, custom
 * pre/postconditions) is sorted, and the options are written out in full for
 * the methods that may run, so a default left out and the same default
 * spelled out are the same request.  It is its own file because this is the
 * one place where "same request" is decided: the parser and the dispatcher in
 * synthesize.c do not need to know how.
 */
#include "synthesize_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "collective.h"

static int cmp_link_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    if (x[0] != y[0])
        return x[0] < y[0] ? -1 : 1;
    return x[1] < y[1] ? -1 : x[1] > y[1];
}

static int cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return x < y ? -1 : x > y;
}

/* Orders shared sets by their (sorted) link list text, a total order. */
static int cmp_json_text(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static json_t *int_array(const int *v, int n)
{
    json_t *a = json_array();
    for (int i = 0; i < n; i++)
        json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *canonical_topology(const cs_topology *t)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "name", json_string(t->name));
    json_object_set_new(doc, "ranks", json_integer(t->ranks));
    /* Links: physical only (switch links are re-derived), already sorted by
     * (src, dst) after finalize; sort again so we do not depend on it. */
    int n = 0;
    for (int i = 0; i < t->nlinks; i++)
        n += t->links[i].switch_id < 0;
    int *order = malloc(sizeof(int) * 3 * (size_t)(n ? n : 1));
    int m = 0;
    for (int i = 0; i < t->nlinks; i++)
        if (t->links[i].switch_id < 0) {
            order[3 * m] = t->links[i].src;
            order[3 * m + 1] = t->links[i].dst;
            order[3 * m + 2] = i;
            m++;
        }
    qsort(order, (size_t)m, sizeof(int) * 3, cmp_link_pair);
    json_t *links = json_array();
    for (int j = 0; j < m; j++) {
        const cs_link *l = &t->links[order[3 * j + 2]];
        json_t *o = json_object();
        json_object_set_new(o, "src", json_integer(l->src));
        json_object_set_new(o, "dst", json_integer(l->dst));
        json_object_set_new(o, "lanes", json_integer(l->lanes));
        json_object_set_new(o, "gbps", json_real(l->gbps));
        json_object_set_new(o, "alpha_us", json_real(l->alpha_us));
        json_array_append_new(links, o);
    }
    free(order);
    json_object_set_new(doc, "links", links);

    int nsh = 0;
    for (int i = 0; i < t->nshared; i++)
        nsh += t->shared[i].switch_id < 0;
    if (nsh > 0) {
        char **texts = calloc((size_t)nsh, sizeof *texts);
        json_t **sets = calloc((size_t)nsh, sizeof *sets);
        int k = 0;
        for (int i = 0; i < t->nshared; i++) {
            const cs_shared *s = &t->shared[i];
            if (s->switch_id >= 0)
                continue;
            int *pairs = malloc(sizeof(int) * 2 * (size_t)(s->nlinks ? s->nlinks : 1));
            for (int j = 0; j < s->nlinks; j++) {
                pairs[2 * j] = t->links[s->links[j]].src;
                pairs[2 * j + 1] = t->links[s->links[j]].dst;
            }
            qsort(pairs, (size_t)s->nlinks, sizeof(int) * 2, cmp_link_pair);
            json_t *la = json_array();
            for (int j = 0; j < s->nlinks; j++)
                json_array_append_new(la, int_array(&pairs[2 * j], 2));
            free(pairs);
            json_t *o = json_object();
            json_object_set_new(o, "links", la);
            json_object_set_new(o, "lanes", json_integer(s->lanes));
            sets[k] = o;
            /* "text\0index" sorts the sets; the index finds the object again */
            char *txt = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
            size_t tl = strlen(txt ? txt : "");
            texts[k] = malloc(tl + 16);
            snprintf(texts[k], tl + 16, "%s#%d", txt ? txt : "", k);
            free(txt);
            k++;
        }
        qsort(texts, (size_t)k, sizeof *texts, cmp_json_text);
        json_t *arr = json_array();
        for (int j = 0; j < k; j++) {
            int idx = atoi(strrchr(texts[j], '#') + 1);
            json_array_append(arr, sets[idx]);
            free(texts[j]);
        }
        for (int j = 0; j < k; j++)
            json_decref(sets[j]);
        free(texts);
        free(sets);
        json_object_set_new(doc, "shared", arr);
    }
    if (t->nswitches > 0) {
        /* Rank order within a switch matters (TACOS unwinding), so it is kept. */
        json_t *arr = json_array();
        for (int i = 0; i < t->nswitches; i++) {
            const cs_switch *s = &t->switches[i];
            json_t *o = json_object();
            json_object_set_new(o, "name", json_string(s->name));
            json_object_set_new(o, "ranks", int_array(s->ranks, s->nranks));
            json_object_set_new(o, "gbps", json_real(s->gbps));
            json_object_set_new(o, "alpha_us", json_real(s->alpha_us));
            if (s->copy)   /* only when set: keys of switches that cannot copy unchanged */
                json_object_set_new(o, "copy", json_true());
            json_array_append_new(arr, o);
        }
        json_object_set_new(doc, "switches", arr);
    }
    if (t->ngroups > 0) {
        json_t *arr = json_array();
        for (int i = 0; i < t->ngroups; i++) {
            const cs_group *g = &t->groups[i];
            int *r = malloc(sizeof(int) * (size_t)(g->nranks ? g->nranks : 1));
            memcpy(r, g->ranks, sizeof(int) * (size_t)g->nranks);
            qsort(r, (size_t)g->nranks, sizeof(int), cmp_int);
            json_array_append_new(arr, int_array(r, g->nranks));
            free(r);
        }
        json_object_set_new(doc, "groups", arr);
    }
    return doc;
}

json_t *synth_canonical_collective(const cs_collective *c)
{
    json_t *doc = json_object();
    json_object_set_new(doc, "kind", json_string(collective_kind_name(c->kind)));
    if (collective_kind_is_rooted(c->kind))
        json_object_set_new(doc, "root", json_integer(c->root));
    if (c->kind == CS_COLL_CUSTOM) {
        json_object_set_new(doc, "global_chunks", json_integer(c->custom_global_chunks));
        const int *lists[2] = {c->pre, c->post};
        int counts[2] = {c->npre, c->npost};
        const char *names[2] = {"pre", "post"};
        for (int w = 0; w < 2; w++) {
            int *p = malloc(sizeof(int) * 2 * (size_t)(counts[w] ? counts[w] : 1));
            memcpy(p, lists[w], sizeof(int) * 2 * (size_t)counts[w]);
            qsort(p, (size_t)counts[w], sizeof(int) * 2, cmp_link_pair);
            json_t *arr = json_array();
            for (int j = 0; j < counts[w]; j++) {
                /* duplicates say nothing new */
                if (j > 0 && p[2 * j] == p[2 * j - 2] && p[2 * j + 1] == p[2 * j - 1])
                    continue;
                json_array_append_new(arr, int_array(&p[2 * j], 2));
            }
            free(p);
            json_object_set_new(doc, names[w], arr);
        }
    }
    return doc;
}

/* "k" is written only when the request gives it: a k left out is widened
 * automatically (smt.h, CS_SMT_K_AUTO), which is another request than any
 * fixed k.  Canonical documents from before automatic widening always held
 * a k and still parse to the same key, meaning what they meant then. */
static json_t *smt_options_json(const cs_smt_options *s)
{
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:f, s:f}", "max_chunks", s->max_chunks,
                          "max_steps", s->max_steps, "steps", s->steps, "rounds", s->rounds,
                          "chunks", s->chunks, "instance_time_limit_s",
                          s->instance_time_limit_s, "total_time_limit_s",
                          s->total_time_limit_s);
    if (o && s->k != CS_SMT_K_AUTO)
        json_object_set_new(o, "k", json_integer(s->k));
    return o;
}

static json_t *tacos_options_json(const cs_tacos_options *t)
{
    return json_pack("{s:i, s:i, s:I, s:i, s:f}", "chunks", t->chunks, "trials", t->trials,
                     "seed", (json_int_t)t->seed, "switch_degree", t->switch_degree, "bytes",
                     t->bytes);
}

static json_t *mcf_options_json(const cs_mcf_options *m)
{
    json_t *o = json_pack("{s:i, s:i, s:i, s:i, s:i, s:f, s:i, s:f, s:I}", "chunks", m->chunks,
                          "max_chunks", m->max_chunks, "min_chunks", m->min_chunks, "epochs",
                          m->epochs, "max_epochs", m->max_epochs, "bytes", m->bytes,
                          "epoch_split", m->epoch_split, "gap", m->gap, "milp_max_columns",
                          (json_int_t)m->milp_max_columns);
    /* A* options only when set, so the keys of requests without them stay */
    if (o && m->astar != 0)
        json_object_set_new(o, "astar", json_integer(m->astar));
    if (o && m->astar_epochs != 0)
        json_object_set_new(o, "astar_epochs", json_integer(m->astar_epochs));
    /* likewise zero-buffer switches */
    if (o && m->zero_buffer != 0)
        json_object_set_new(o, "zero_buffer", json_integer(m->zero_buffer));
    return o;
}

/* Auto's canonical form names mcf options only when they differ from the
 * defaults, so the keys of auto requests made before mcf existed stay. */
static bool mcf_options_are_default(const cs_mcf_options *m)
{
    cs_mcf_options d;
    mcf_options_default(&d);
    return m->chunks == d.chunks && m->epochs == d.epochs && m->max_epochs == d.max_epochs &&
           m->bytes == d.bytes && m->epoch_split == d.epoch_split && m->gap == d.gap &&
           m->milp_max_columns == d.milp_max_columns && m->max_chunks == d.max_chunks &&
           m->min_chunks == d.min_chunks && m->astar == d.astar &&
           m->astar_epochs == d.astar_epochs && m->zero_buffer == d.zero_buffer;
}

int synth_request_set_canonical(cs_synth_request *r, cs_error *err)
{
    json_t *canon = json_object();
    json_object_set_new(canon, "v", json_integer(1));
    json_object_set_new(canon, "topology", canonical_topology(r->topology));
    json_object_set_new(canon, "collective", synth_canonical_collective(&r->collective));
    json_object_set_new(canon, "method", json_string(r->method));
    json_t *copts = json_object();
    switch (r->method_kind) {
    case CS_SYNTH_SMT: {
        json_t *tmp = smt_options_json(&r->smt);
        json_object_update(copts, tmp);
        json_decref(tmp);
        break;
    }
    case CS_SYNTH_TACOS: {
        json_t *tmp = tacos_options_json(&r->tacos);
        json_object_update(copts, tmp);
        json_decref(tmp);
        break;
    }
    case CS_SYNTH_BASELINE:
        json_object_set_new(copts, "chunks", json_integer(r->baseline.chunks));
        break;
    case CS_SYNTH_MCF: {
        json_t *tmp = mcf_options_json(&r->mcf);
        json_object_update(copts, tmp);
        json_decref(tmp);
        break;
    }
    case CS_SYNTH_HIER:
        json_object_set_new(copts, "smt_time_limit_s", json_real(r->hier.smt_time_limit_s));
        json_object_set_new(copts, "flat_max_ranks", json_integer(r->hier.flat_max_ranks));
        break;
    case CS_SYNTH_AUTO:
        json_object_set_new(copts, "smt", smt_options_json(&r->smt));
        json_object_set_new(copts, "tacos", tacos_options_json(&r->tacos));
        if (!mcf_options_are_default(&r->mcf))
            json_object_set_new(copts, "mcf", mcf_options_json(&r->mcf));
        break;
    }
    /* only where it changed the instance: elsewhere it changes nothing, and
     * the key of the same request without it stays */
    if (r->instance)
        json_object_set_new(copts, "codegen", json_string("msccl-xml"));
    json_object_set_new(canon, "options", copts);
    r->canonical = canon;
    char *text = synth_request_canonical_text(r);
    if (!text)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    synth_sha256_hex(text, strlen(text), r->key);
    free(text);
    return CS_OK;
}

char *synth_request_canonical_text(const cs_synth_request *r)
{
    return json_dumps(r->canonical, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
}

bool synth_request_make_canonical(cs_synth_request *r)
{
    cs_topology *t = r->topology;
    if (r->instance || r->collective.kind == CS_COLL_CUSTOM || !t->finalized)
        return false;
    /* Shared sets the document gives are listed in canonical_topology's
     * order; one (or none) is in that order whatever the document said.
     * Derived sets (switch_id >= 0) are made by finalize from the switches,
     * whose order the canonical form keeps. */
    int own = 0;
    for (int i = 0; i < t->nshared; i++)
        own += t->shared[i].switch_id < 0;
    if (own > 1)
        return false;
    /* Links are sorted by (src, dst) by finalize whatever their order in the
     * document; group_of maps ranks to group indices, which keep their order. */
    for (int g = 0; g < t->ngroups; g++)
        qsort(t->groups[g].ranks, (size_t)t->groups[g].nranks, sizeof(int), cmp_int);
    /* a builtin knows its diameter from a closed form; the JSON form does
     * not, and computes it when asked (the same value, but the parse of the
     * canonical text is what "the same" is measured against) */
    t->diameter_cache = -1;
    r->wait_s = 0;
    r->time_limit_s = 0;
    r->codegen = false;   /* instance is NULL here: codegen changed nothing */
    return true;
}
