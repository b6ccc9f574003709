/*
 * smt.c - exact synthesis with Z3, the public side: options and their
 * validation, the combining collectives (reducescatter and reduce by
 * inversion of their duals on the reversed topology; allreduce as
 * reducescatter + allgather), optimality labels and the cs_result.
 * smt_search.c runs the Pareto search for one non-combining collective;
 * smt_encode.c decides one instance.
 */
#include "smt.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smt_internal.h"
#include "verify.h"

#include "smt.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smt_internal.h"
#include "verify.h"

void smt_options_default(cs_smt_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->k = 4;
    opt->max_chunks = 8;
}

static int effective_max_ranks(const cs_smt_options *opt)
{
    return opt->max_ranks > 0 ? opt->max_ranks : CS_SMT_DEFAULT_MAX_RANKS;
}

int smt_options_validate(const cs_smt_options *opt, const cs_topology *t,
                         const cs_collective *c, cs_error *err)
{
    if (!opt)
        return cs_error_set(err, CS_EINVAL, "options", "no options given");
    if (opt->k < 0)
        return cs_error_set(err, CS_EINVAL, "k", "k must be >= 0 (got %d)", opt->k);
    if (opt->max_chunks < 1)
        return cs_error_set(err, CS_EINVAL, "max_chunks", "max_chunks must be >= 1 (got %d)",
                            opt->max_chunks);
    if (opt->max_steps < 0)
        return cs_error_set(err, CS_EINVAL, "max_steps",
                            "max_steps must be >= 0 (0 = bound + 8; got %d)", opt->max_steps);
    if (opt->steps < 0 || opt->rounds < 0 || opt->chunks < 0) {
        const char *f = opt->steps < 0 ? "steps" : opt->rounds < 0 ? "rounds" : "chunks";
        return cs_error_set(err, CS_EINVAL, f, "%s must be >= 1 (got %d)", f,
                            opt->steps < 0 ? opt->steps : opt->rounds < 0 ? opt->rounds
                                                                           : opt->chunks);
    }
    int fixed = (opt->steps > 0) + (opt->rounds > 0) + (opt->chunks > 0);
    if (fixed != 0 && fixed != 3) {
        const char *f = opt->steps <= 0 ? "steps" : opt->rounds <= 0 ? "rounds" : "chunks";
        return cs_error_set(err, CS_EINVAL, f,
                            "%s must be >= 1: steps, rounds and chunks select a single instance "
                            "and must be given together", f);
    }
    if (fixed == 3 && opt->rounds < opt->steps)
        return cs_error_set(err, CS_EINVAL, "rounds",
                            "rounds (%d) must be >= steps (%d): every step has at least one round",
                            opt->rounds, opt->steps);
    if (!(opt->instance_time_limit_s >= 0) || isinf(opt->instance_time_limit_s))
        return cs_error_set(err, CS_EINVAL, "instance_time_limit_s",
                            "instance_time_limit_s must be a finite number >= 0");
    if (!(opt->total_time_limit_s >= 0) || isinf(opt->total_time_limit_s))
        return cs_error_set(err, CS_EINVAL, "total_time_limit_s",
                            "total_time_limit_s must be a finite number >= 0");
    if (opt->threads < 0)
        return cs_error_set(err, CS_EINVAL, "threads", "threads must be >= 0 (0 = CPU count)");
    if (opt->max_ranks < 0)
        return cs_error_set(err, CS_EINVAL, "max_ranks",
                            "max_ranks must be >= 0 (0 = default %d)", CS_SMT_DEFAULT_MAX_RANKS);
    if (!t)
        return cs_error_set(err, CS_EINVAL, "topology", "no topology given");
    if (!t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "topology is not finalized");
    if (t->ranks > effective_max_ranks(opt))
        return cs_error_set(err, CS_ELIMIT, "max_ranks",
                            "topology '%s' has %d ranks, more than the SMT limit max_ranks = %d "
                            "(raise max_ranks, or use the tacos method)",
                            t->name, t->ranks, effective_max_ranks(opt));
    if (!c)
        return cs_error_set(err, CS_EINVAL, "collective", "no collective given");
    if ((unsigned)c->kind >= CS_COLL_KIND_COUNT)
        return cs_error_set(err, CS_EINVAL, "collective.kind", "unknown collective kind %d",
                            (int)c->kind);
    if (collective_kind_is_rooted(c->kind) && (c->root < 0 || c->root >= t->ranks))
        return cs_error_set(err, CS_EINVAL, "root",
                            "root %d is out of range for %s on %d ranks (0..%d)", c->root,
                            collective_kind_name(c->kind), t->ranks, t->ranks - 1);
    cs_collective copy;
    int rc = collective_copy(&copy, c, err);
    if (rc)
        return rc;
    rc = collective_validate(&copy, t->ranks, err);
    collective_free(&copy);
    return rc;
}

/* ---- labels, results, combining collectives ----------------------------------------- */

static void label_frontier(cs_algorithm **algs, int n, const cs_bounds *b)
{
    for (int i = 0; i < n; i++)
        algs[i]->optimality[0] = '\0';
    if (n == 0)
        return;
    bool lat = algs[0]->steps == b->steps;
    cs_algorithm *last = algs[n - 1];
    bool bw = smt_rcmp(last->rounds, last->chunks, b->rpc_num, b->rpc_den) == 0;
    if (n == 1 && lat && bw)
        snprintf(algs[0]->optimality, sizeof algs[0]->optimality, "both");
    else {
        if (lat)
            snprintf(algs[0]->optimality, sizeof algs[0]->optimality, "latency");
        if (bw)
            snprintf(last->optimality, sizeof last->optimality, "%s",
                     (n == 1 && lat) ? "both" : "bandwidth");
    }
}

/* Replaces every frontier algorithm (a dual) by its inversion, verified on t. */
static int frontier_map_invert(smt_frontier *f, const cs_topology *t, cs_error *err)
{
    for (int i = 0; i < f->n; i++) {
        cs_algorithm *inv = NULL;
        int rc = algorithm_invert(f->algs[i], &inv, err);
        if (rc)
            return rc == CS_ENOMEM ? rc : cs_error_set(err, CS_EINTERNAL, "",
                                                        "inverting the dual failed: %s",
                                                        err ? err->message : "");
        cs_error verr;
        rc = algorithm_verify(t, inv, &verr);
        if (rc) {
            algorithm_free(inv);
            return cs_error_set(err, CS_EINTERNAL, "",
                                "inverted algorithm failed verification: %s", verr.message);
        }
        snprintf(inv->method, sizeof inv->method, "smt");
        algorithm_free(f->algs[i]);
        f->algs[i] = inv;
    }
    return CS_OK;
}

/* Same directed links and the same constraint sets after reversal? */
static bool topology_is_symmetric(const cs_topology *t)
{
    for (int l = 0; l < t->nlinks; l++) {
        int r = topology_find_link(t, t->links[l].dst, t->links[l].src);
        if (r < 0 || t->links[r].lanes != t->links[l].lanes)
            return false;
    }
    return true;
}

static int allreduce(const cs_topology *t, const cs_collective *c, const cs_smt_options *opt,
                     smt_frontier *f, cs_error *err)
{
    double t0 = cs_now();
    cs_collective ag;
    collective_init(&ag, CS_COLL_ALLGATHER, -1);
    cs_topology *rt = NULL;
    int rc = topology_reverse(t, &rt, err);
    if (rc)
        return rc;
    cs_bounds agb;
    rc = collective_bounds(t, &ag, &agb, err);
    if (rc) {
        topology_free(rt);
        return rc;
    }
    cs_smt_options o = *opt;
    if (opt->steps > 0) {
        int P = t->ranks;
        if (opt->steps % 2 || opt->rounds % 2 || opt->chunks % P) {
            topology_free(rt);
            return cs_error_set(err, CS_EUNSUPPORTED, "chunks",
                                "allreduce is reducescatter + allgather with equal halves: steps "
                                "and rounds must be even and chunks a multiple of %d ranks "
                                "(got S=%d, R=%d, C=%d)",
                                P, opt->steps, opt->rounds, opt->chunks);
        }
        o.steps = opt->steps / 2;
        o.rounds = opt->rounds / 2;
        o.chunks = opt->chunks / P;
    }
    smt_frontier agf;
    rc = smt_run_search(t, &ag, &agb, &o, &agf, err);
    if (rc) {
        topology_free(rt);
        return rc;
    }
    memset(f, 0, sizeof *f);
    f->complete = agf.complete;
    f->stats = agf.stats;
    agf.stats = NULL;
    bool sym = topology_is_symmetric(t);
    for (int i = 0; i < agf.n && rc == CS_OK; i++) {
        cs_algorithm *a = agf.algs[i];
        /* an allgather on the reversed topology, for the reducescatter half */
        cs_algorithm *rag = NULL;
        cs_error verr;
        if (sym && algorithm_verify(rt, a, &verr) == CS_OK) {
            rc = algorithm_clone(a, &rag, err);
        } else {
            cs_smt_options oi = o;
            oi.steps = a->steps;
            oi.rounds = a->rounds;
            oi.chunks = a->chunks;
            oi.progress = NULL;
            if (opt->total_time_limit_s > 0) {
                /* the mirror solves share the search's budget */
                double left = opt->total_time_limit_s - (cs_now() - t0);
                if (left <= 0) {
                    f->complete = false;
                    break;
                }
                oi.total_time_limit_s = left;
            }
            smt_frontier one;
            rc = smt_run_search(rt, &ag, &agb, &oi, &one, err);
            if (rc == CS_EUNSAT || rc == CS_ETIMEOUT) {
                /* no mirror (or none found in time): leave the point out */
                rc = CS_OK;
                f->complete = false;
                continue;
            }
            if (rc == CS_OK) {
                rag = one.algs[0];
                one.algs[0] = NULL;
                one.n = 0;
                smt_frontier_free(&one);
            }
        }
        if (rc)
            break;
        cs_algorithm *rs = NULL, *ar = NULL;
        rc = algorithm_invert(rag, &rs, err);
        algorithm_free(rag);
        if (rc)
            break;
        rc = algorithm_concat(rs, a, &ar, err);
        algorithm_free(rs);
        if (rc)
            break;
        rc = algorithm_verify(t, ar, &verr);
        if (rc) {
            algorithm_free(ar);
            rc = cs_error_set(err, CS_EINTERNAL, "", "allreduce failed verification: %s",
                              verr.message);
            break;
        }
        snprintf(ar->method, sizeof ar->method, "smt");
        if (smt_frontier_push(f, ar)) {
            algorithm_free(ar);
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
    }
    (void)c;
    smt_frontier_free(&agf);
    topology_free(rt);
    if (rc)
        smt_frontier_free(f);
    else if (f->n == 0 && opt->steps > 0)
        rc = cs_error_set(err, CS_EUNSAT, "", "no allreduce algorithm with S=%d, R=%d, C=%d",
                          opt->steps, opt->rounds, opt->chunks);
    return rc;
}

/* Dispatches on the collective kind; fills f with algorithms for (t, c). */
static int synthesize(const cs_topology *t, const cs_collective *c, const cs_smt_options *opt,
                      smt_frontier *f, cs_error *err)
{
    if (c->kind == CS_COLL_ALLREDUCE)
        return allreduce(t, c, opt, f, err);
    if (!collective_kind_is_combining(c->kind)) {
        cs_bounds b;
        int rc = collective_bounds(t, c, &b, err);
        if (rc)
            return rc;
        return smt_run_search(t, c, &b, opt, f, err);
    }
    cs_collective dual;
    int rc = collective_dual(c, &dual, err);
    if (rc)
        return rc;
    cs_topology *rt = NULL;
    rc = topology_reverse(t, &rt, err);
    if (rc == CS_OK) {
        cs_bounds b;
        rc = collective_bounds(rt, &dual, &b, err);
        if (rc == CS_OK)
            rc = smt_run_search(rt, &dual, &b, opt, f, err);
        if (rc == CS_OK) {
            rc = frontier_map_invert(f, t, err);
            if (rc)
                smt_frontier_free(f);
        }
    }
    topology_free(rt);
    collective_free(&dual);
    return rc;
}

/* c has been validated for t's rank count (custom collectives need it). */
static int search_validated(const cs_topology *t, const cs_collective *c,
                            const cs_smt_options *opt, cs_result **out, cs_error *err)
{
    *out = NULL;
    cs_smt_options defaults;
    if (!opt) {
        smt_options_default(&defaults);
        opt = &defaults;
    }
    int rc = smt_options_validate(opt, t, c, err);
    if (rc)
        return rc;
    double t0 = cs_now();
    cs_bounds b;
    rc = collective_bounds(t, c, &b, err);
    if (rc)
        return rc;
    smt_frontier f;
    rc = synthesize(t, c, opt, &f, err);
    if (rc)
        return rc;
    cs_result *r = NULL;
    rc = result_new("smt", &r, err);
    if (rc) {
        smt_frontier_free(&f);
        return rc;
    }
    label_frontier(f.algs, f.n, &b);
    if (opt->steps > 0)
        snprintf(r->reason, sizeof r->reason, "smt: single instance S=%d R=%d C=%d", opt->steps,
                 opt->rounds, opt->chunks);
    else
        snprintf(r->reason, sizeof r->reason, "smt: Pareto search, k=%d, chunks <= %d", opt->k,
                 opt->max_chunks);
    for (int i = 0; i < f.n; i++) {
        if (result_add(r, f.algs[i])) {
            for (int j = i; j < f.n; j++)
                algorithm_free(f.algs[j]);
            f.n = 0;
            smt_frontier_free(&f);
            result_free(r);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
    }
    f.n = 0;
    r->bound_steps = b.steps;
    r->bound_rounds_per_chunk = b.rounds_per_chunk;
    r->complete = f.complete;
    r->stats = f.stats;
    f.stats = NULL;
    if (r->stats) {
        /* the class the search covered: what "complete" is complete in */
        json_object_set_new(r->stats, "k", json_integer(opt->k));
        json_object_set_new(r->stats, "max_chunks", json_integer(opt->max_chunks));
        json_object_set_new(r->stats, "single_instance", json_boolean(opt->steps > 0));
    }
    smt_frontier_free(&f);
    r->synth_seconds = cs_now() - t0;
    *out = r;
    return CS_OK;
}

static int solve_validated(const cs_topology *t, const cs_collective *c, int steps, int rounds,
                           int chunks, const cs_smt_options *opt, cs_algorithm **out,
                           cs_error *err)
{
    *out = NULL;
    cs_smt_options o;
    if (opt)
        o = *opt;
    else
        smt_options_default(&o);
    if (steps < 1)
        return cs_error_set(err, CS_EINVAL, "steps", "steps must be >= 1 (got %d)", steps);
    if (chunks < 1)
        return cs_error_set(err, CS_EINVAL, "chunks", "chunks must be >= 1 (got %d)", chunks);
    if (rounds < steps)
        return cs_error_set(err, CS_EINVAL, "rounds",
                            "rounds (%d) must be >= steps (%d): every step has at least one round",
                            rounds, steps);
    o.steps = steps;
    o.rounds = rounds;
    o.chunks = chunks;
    int rc = smt_options_validate(&o, t, c, err);
    if (rc)
        return rc;
    smt_frontier f;
    rc = synthesize(t, c, &o, &f, err);
    if (rc)
        return rc;
    if (f.n != 1) {
        smt_frontier_free(&f);
        return cs_error_set(err, CS_EINTERNAL, "", "single instance produced %d algorithms", f.n);
    }
    cs_bounds b;
    if (collective_bounds(t, c, &b, NULL) == CS_OK)
        label_frontier(f.algs, 1, &b);
    *out = f.algs[0];
    f.algs[0] = NULL;
    f.n = 0;
    smt_frontier_free(&f);
    return CS_OK;
}

/* A copy of c validated for t (smt_options_validate has checked it already). */
static int validated_copy(const cs_topology *t, const cs_collective *c, cs_collective *cv,
                          cs_error *err)
{
    if (!t || !c || !t->finalized)
        return cs_error_set(err, CS_EINVAL, !c ? "collective" : "topology",
                            "no finalized topology or no collective given");
    int rc = collective_copy(cv, c, err);
    if (rc)
        return rc;
    rc = collective_validate(cv, t->ranks, err);
    if (rc)
        collective_free(cv);
    return rc;
}

int smt_search(const cs_topology *t, const cs_collective *c, const cs_smt_options *opt,
               cs_result **out, cs_error *err)
{
    *out = NULL;
    cs_smt_options defaults;
    if (!opt) {
        smt_options_default(&defaults);
        opt = &defaults;
    }
    int rc = smt_options_validate(opt, t, c, err);
    if (rc)
        return rc;
    cs_collective cv;
    rc = validated_copy(t, c, &cv, err);
    if (rc)
        return rc;
    rc = search_validated(t, &cv, opt, out, err);
    collective_free(&cv);
    return rc;
}

int smt_solve_instance(const cs_topology *t, const cs_collective *c, int steps, int rounds,
                       int chunks, const cs_smt_options *opt, cs_algorithm **out,
                       cs_error *err)
{
    *out = NULL;
    cs_collective cv;
    if (t && c && t->finalized && collective_kind_is_rooted(c->kind) &&
        (c->root < 0 || c->root >= t->ranks))
        return cs_error_set(err, CS_EINVAL, "root",
                            "root %d is out of range for %s on %d ranks (0..%d)", c->root,
                            collective_kind_name(c->kind), t->ranks, t->ranks - 1);
    int rc = validated_copy(t, c, &cv, err);
    if (rc)
        return rc;
    rc = solve_validated(t, &cv, steps, rounds, chunks, opt, out, err);
    collective_free(&cv);
    return rc;
}
