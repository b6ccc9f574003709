/*
 * codegen_testutil.c - the algorithm matrix the code generator tests share
 * (see codegen_testutil.h).  Synthesis options are kept small so that the
 * three codegen test binaries stay fast: SMT up to 3 chunks with k = 1,
 * TACOS two seeded trials with 2 chunks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "baseline.h"
#include "codegen_testutil.h"
#include "smt.h"
#include "tacos.h"
#include "verify.h"

static int add(cgt_set *set, cs_algorithm *a, const cs_topology *t, const char *label, cs_error *err)
{
    if (set->n == set->cap) {
        int cap = set->cap ? set->cap * 2 : 32;
        cgt_alg *n = realloc(set->algs, (size_t)cap * sizeof *n);
        if (!n) {
            algorithm_free(a);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
        set->algs = n;
        set->cap = cap;
    }
    cgt_alg *x = &set->algs[set->n];
    memset(x, 0, sizeof *x);
    int rc = collective_copy(&x->coll, &a->collective, err);
    if (rc == CS_OK)
        rc = collective_validate(&x->coll, a->ranks, err);
    if (rc == CS_OK)
        rc = algorithm_verify(t, a, err);
    if (rc != CS_OK) {
        collective_free(&x->coll);
        algorithm_free(a);
        return rc;
    }
    snprintf(x->label, sizeof x->label, "%s", label);
    x->alg = a;
    x->topo = t;
    set->n++;
    return CS_OK;
}

static const char *baseline_for(cs_coll_kind k)
{
    static const char *const prefs[] = {"rings", "ring", "binomial-tree", "direct"};
    for (size_t i = 0; i < sizeof prefs / sizeof prefs[0]; i++)
        if (baseline_supports(prefs[i], k))
            return prefs[i];
    return NULL;
}

int cgt_build(cgt_set *set, unsigned which, unsigned kinds_mask, cs_error *err)
{
    memset(set, 0, sizeof *set);
    int rc = topology_builtin("dgx1", &set->dgx1, err);
    if (rc != CS_OK)
        return rc;
    char label[128];
    for (int k = 0; k < CS_COLL_CUSTOM && rc == CS_OK; k++) {
        if (kinds_mask && !(kinds_mask & (1u << k)))
            continue;
        cs_collective c;
        collective_init(&c, (cs_coll_kind)k, collective_kind_is_rooted((cs_coll_kind)k) ? 1 : -1);
        const char *kname = collective_kind_name((cs_coll_kind)k);
        if (which & CGT_BASELINE) {
            const char *b = baseline_for((cs_coll_kind)k);
            cs_algorithm *a;
            if (!b)
                return cs_error_set(err, CS_EINTERNAL, "", "no baseline for %s", kname);
            rc = baseline_generate(b, set->dgx1, &c, NULL, &a, err);
            snprintf(label, sizeof label, "%s baseline %s on dgx1", kname, b);
            if (rc == CS_OK)
                rc = add(set, a, set->dgx1, label, err);
            if (rc != CS_OK)
                return rc;
        }
        if (which & CGT_SMT) {
            cs_smt_options o;
            smt_options_default(&o);
            o.k = 1;
            o.max_chunks = 3;
            o.threads = 1;
            o.total_time_limit_s = 8;
            o.instance_time_limit_s = 5;
            cs_result *r;
            rc = smt_search(set->dgx1, &c, &o, &r, err);
            if (rc != CS_OK)
                return rc;
            for (int i = 0; i < r->nalgs && rc == CS_OK; i++) {
                cs_algorithm *a;
                rc = algorithm_clone(r->algs[i], &a, err);
                snprintf(label, sizeof label, "%s smt S=%d R=%d C=%d on dgx1", kname,
                         r->algs[i]->steps, r->algs[i]->rounds, r->algs[i]->chunks);
                if (rc == CS_OK)
                    rc = add(set, a, set->dgx1, label, err);
            }
            result_free(r);
            if (rc != CS_OK)
                return rc;
        }
        if (which & CGT_TACOS) {
            cs_tacos_options o;
            tacos_options_default(&o);
            o.chunks = 2;
            o.trials = 2;
            o.threads = 1;
            o.keep_sends = true;
            cs_result *r;
            rc = tacos_synthesize(set->dgx1, &c, &o, &r, err);
            if (rc != CS_OK)
                return rc;
            if (r->nalgs < 1) {
                result_free(r);
                return cs_error_set(err, CS_EINTERNAL, "", "tacos returned no algorithm for %s",
                                    kname);
            }
            cs_algorithm *a;
            rc = algorithm_clone(r->algs[0], &a, err);
            result_free(r);
            snprintf(label, sizeof label, "%s tacos on dgx1", kname);
            if (rc == CS_OK)
                rc = add(set, a, set->dgx1, label, err);
            if (rc != CS_OK)
                return rc;
        }
    }
    return rc;
}

void cgt_free(cgt_set *set)
{
    for (int i = 0; i < set->n; i++) {
        algorithm_free(set->algs[i].alg);
        collective_free(&set->algs[i].coll);
    }
    free(set->algs);
    topology_free(set->dgx1);
    memset(set, 0, sizeof *set);
}

cs_topology *cgt_topology(int n, int lanes, bool full)
{
    cs_error err;
    cs_topology *t = topology_new(full ? "full" : "chain", n);
    if (!t)
        return NULL;
    for (int a = 0; a < n; a++)
        for (int b = a + 1; b < n; b++)
            if (full || b == a + 1)
                topology_add_link(t, a, b, lanes, 25.0, 0.7, true, &err);
    if (topology_finalize(t, &err) != CS_OK) {
        topology_free(t);
        return NULL;
    }
    return t;
}

int cgt_reassemble_slices(const cs_algorithm *a, const cs_topology *t, const cs_msccl_options *o,
                          int width, char **out, size_t *len, cs_error *err)
{
    *out = NULL;
    *len = 0;
    char *doc = NULL, *header = NULL;
    size_t n = 0, cap = 0, hlen = 0;
    int rc = CS_OK;
    static const char trailer[] = "</algo>\n";
    for (int lo = 0; lo < a->ranks && rc == CS_OK; lo += width) {
        int hi = lo + width - 1 < a->ranks - 1 ? lo + width - 1 : a->ranks - 1;
        char *s;
        size_t sl;
        if ((rc = msccl_xml_generate_ranks(a, t, o, lo, hi, &s, &sl, err)) != CS_OK)
            break;
        const char *nl = memchr(s, '\n', sl);
        size_t h = nl ? (size_t)(nl - s) + 1 : 0;
        size_t tl = sizeof trailer - 1;
        if (!nl || strncmp(s, "<algo ", 6) != 0 || sl < h + tl ||
            memcmp(s + sl - tl, trailer, tl) != 0) {
            rc = cs_error_set(err, CS_EVERIFY, "slice", "slice %d-%d is not <algo ...> <gpu>... "
                              "</algo>", lo, hi);
        } else if (header && (h != hlen || memcmp(s, header, h) != 0)) {
            rc = cs_error_set(err, CS_EVERIFY, "slice", "slice %d-%d has another <algo> header",
                              lo, hi);
        } else {
            /* the body holds exactly ranks lo..hi, in order */
            int expect = lo;
            const char *p = s + h, *end = s + sl - tl;
            while (rc == CS_OK && (p = strstr(p, "<gpu id=\"")) && p < end) {
                int id = atoi(p + 9);
                if (id != expect)
                    rc = cs_error_set(err, CS_EVERIFY, "slice", "slice %d-%d holds gpu %d where "
                                      "gpu %d belongs", lo, hi, id, expect);
                expect++;
                p++;
            }
            if (rc == CS_OK && expect != hi + 1)
                rc = cs_error_set(err, CS_EVERIFY, "slice", "slice %d-%d holds gpus %d-%d", lo,
                                  hi, lo, expect - 1);
        }
        if (rc == CS_OK) {
            if (!header) {
                header = strndup(s, h);
                hlen = h;
            }
            size_t body = sl - h - tl;
            if (n + body + hlen + tl + 1 > cap) {
                cap = (n + body + hlen + tl + 1) * 2;
                char *nd = realloc(doc, cap);
                if (!nd || !header)
                    rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                else
                    doc = nd;
            }
            if (rc == CS_OK) {
                if (n == 0) {
                    memcpy(doc, header, hlen);
                    n = hlen;
                }
                memcpy(doc + n, s + h, body);
                n += body;
            }
        }
        free(s);
    }
    if (rc == CS_OK) {
        memcpy(doc + n, trailer, sizeof trailer);
        n += sizeof trailer - 1;
        *out = doc;
        *len = n;
    } else {
        free(doc);
    }
    free(header);
    return rc;
}
