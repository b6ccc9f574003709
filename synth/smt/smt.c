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
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smt_internal.h"
#include "verify.h"

void smt_options_default(cs_smt_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->k = CS_SMT_K_AUTO;
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
    if (opt->k < 0 && opt->k != CS_SMT_K_AUTO)
        return cs_error_set(err, CS_EINVAL, "k", "k must be >= 0, or left out to widen it "
                            "automatically (got %d)", opt->k);
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

/* The problem the search really runs for a collective other than
 * allreduce: a combining collective's dual on the reversed topology (its
 * algorithms inverted afterwards), anything else as given.  The band checks
 * decide on the same problem as the search, so both build it here.  Stays
 * where it was initialized (c may point into it). */
typedef struct search_problem {
    const cs_topology *t;
    const cs_collective *c;
    bool dual;
    cs_topology *reversed; /* owned when dual */
    cs_collective dual_c;  /* owned when dual */
} search_problem;

static int search_problem_init(const cs_topology *t, const cs_collective *c, search_problem *p,
                               cs_error *err)
{
    memset(p, 0, sizeof *p);
    p->t = t;
    p->c = c;
    if (!collective_kind_is_combining(c->kind))
        return CS_OK;
    int rc = collective_dual(c, &p->dual_c, err);
    if (rc)
        return rc;
    rc = topology_reverse(t, &p->reversed, err);
    if (rc) {
        collective_free(&p->dual_c);
        return rc;
    }
    p->dual = true;
    p->t = p->reversed;
    p->c = &p->dual_c;
    return CS_OK;
}

static void search_problem_free(search_problem *p)
{
    if (!p->dual)
        return;
    topology_free(p->reversed);
    collective_free(&p->dual_c);
}

/* Dispatches on the collective kind; fills f with algorithms for (t, c). */
static int synthesize(const cs_topology *t, const cs_collective *c, const cs_smt_options *opt,
                      smt_frontier *f, cs_error *err)
{
    if (c->kind == CS_COLL_ALLREDUCE)
        return allreduce(t, c, opt, f, err);
    search_problem p;
    int rc = search_problem_init(t, c, &p, err);
    if (rc)
        return rc;
    cs_bounds b;
    rc = collective_bounds(p.t, p.c, &b, err);
    if (rc == CS_OK)
        rc = smt_run_search(p.t, p.c, &b, opt, f, err);
    if (rc == CS_OK && p.dual) {
        rc = frontier_map_invert(f, t, err);
        if (rc)
            smt_frontier_free(f);
    }
    search_problem_free(&p);
    return rc;
}

/* ---- the proven bounds before Z3, and the class k -------------------------------------- */

/* CS_EUNSAT, naming the bound, when the instance (S, R, C) is below the
 * proven bounds of c on t: no k-synchronous algorithm can meet them, so Z3
 * need not be asked (DGX-1 alltoall S=3 R=5 C=2 ran 17 minutes there). */
static int below_bounds(const cs_topology *t, const cs_collective *c, int S, int R, int C,
                        cs_error *err)
{
    cs_bounds b;
    if (collective_bounds(t, c, &b, NULL) != CS_OK)
        return CS_OK; /* no bound: Z3 decides */
    if (S < b.steps)
        return cs_error_set(err, CS_EUNSAT, "steps",
                            "no %d-step algorithm: the steps bound is S >= %d (some chunk must "
                            "travel %d hops), so (S=%d, R=%d, C=%d) is unsat without solving",
                            S, b.steps, b.steps, S, R, C);
    if (b.rpc_den > 0 && smt_rcmp(R, C, b.rpc_num, b.rpc_den) < 0)
        return cs_error_set(err, CS_EUNSAT, "rounds",
                            "no algorithm with R/C = %d/%d: the bandwidth bound is R/C >= %ld/%ld "
                            "(%s), so (S=%d, R=%d, C=%d) is unsat without solving",
                            R, C, b.rpc_num, b.rpc_den, b.bandwidth_cut, S, R, C);
    return CS_OK;
}

/* The bounds the search itself runs against, and how a final frontier point
 * maps to the searched one: allreduce searches its allgather half
 * (S/2, R/2, C/P); the combining kinds their dual, whose bounds
 * collective_bounds already reports. */
typedef struct search_view {
    cs_bounds b;
    int sdiv, cdiv, max_chunks;
} search_view;

static int search_view_of(const cs_topology *t, const cs_collective *c, int max_chunks,
                          search_view *v)
{
    v->sdiv = 1;
    v->cdiv = 1;
    v->max_chunks = c->kind == CS_COLL_CUSTOM ? 1 : max_chunks;
    if (c->kind == CS_COLL_ALLREDUCE) {
        cs_collective ag;
        collective_init(&ag, CS_COLL_ALLGATHER, -1);
        v->sdiv = 2;
        v->cdiv = t->ranks > 0 ? t->ranks : 1;
        return collective_bounds(t, &ag, &v->b, NULL);
    }
    return collective_bounds(t, c, &v->b, NULL);
}

/* The k where the class first holds a candidate at the steps bound: R >=
 * the bandwidth bound at C = 1 (a switch hub: DGX-2 allgather needs R = 15
 * at S = 1). */
#define SMT_START_MAX_K 64

static int start_k(const search_view *v, char *why, size_t n)
{
    long need = (v->b.rpc_num + v->b.rpc_den - 1) / v->b.rpc_den - v->b.steps;
    if (need > SMT_START_MAX_K)
        need = SMT_START_MAX_K;
    if (need <= CS_SMT_DEFAULT_K)
        return CS_SMT_DEFAULT_K;
    snprintf(why, n, "the bandwidth bound needs R >= %ld at S = %d", need + v->b.steps,
             v->b.steps);
    return (int)need;
}

/* The candidates outside the class S <= R <= S + k that could change the
 * frontier f (proven complete in class k).  At S steps a point is new on the
 * frontier exactly when its R/C is below that of the last frontier point
 * with at most S steps (a point with more steps and lower R/C does not
 * matter: the last point sits on the bandwidth bound).  Extra rounds never
 * hurt (the encoding caps the rounds, it does not fix them), so UNSAT at
 * (S, R, C) is UNSAT at every R' <= R with the same S and C: for each (S, C)
 * only the largest such R outside the class needs deciding.  Returns the
 * number of candidates (in *out, malloc'd; -1 out of memory), sets *need to
 * the k whose class holds all of them (k when there are none) and says in
 * *below_first whether the first frontier point is above the steps bound:
 * then points with fewer steps and many more rounds exist outside every
 * class (with unlimited rounds any S >= the steps bound works), so no k
 * makes the frontier complete beyond its class. */
static int frontier_band(const smt_frontier *f, const search_view *v, int k, smt_check **out,
                         int *need, bool *below_first, char *why, size_t n)
{
    *out = NULL;
    *need = k;
    *below_first = false;
    long maxc = v->max_chunks;
    long sb = v->b.steps > 0 ? v->b.steps : 1;
    int cap = 0, cnt = 0;
    smt_check *c = NULL;
    long prev_S = -1, rho_num = 0, rho_den = 0;
    for (int i = 0; i < f->n; i++) {
        long Si = f->algs[i]->steps / v->sdiv, Ri = f->algs[i]->rounds / v->sdiv;
        long Ci = f->algs[i]->chunks / v->cdiv;
        if (Ci < 1)
            continue;
        if (prev_S < 0 && Si > sb)
            *below_first = true;
        /* steps prev_S + 1 .. Si - 1 are still judged against the previous
         * point, Si against this one */
        long from = prev_S < 0 ? Si : prev_S + 1;
        for (long S = from; S <= Si; S++) {
            long pn = S == Si ? Ri : rho_num, pd = S == Si ? Ci : rho_den;
            for (long C = 1; C <= maxc; C++) {
                long R = (pn * C - 1) / pd; /* the largest R with R/C < pn/pd */
                if (R <= S + k || smt_rcmp(R, C, v->b.rpc_num, v->b.rpc_den) < 0)
                    continue;
                if (cnt == cap) {
                    int ncap = cap ? cap * 2 : 32;
                    smt_check *nc = realloc(c, sizeof *nc * (size_t)ncap);
                    if (!nc) {
                        free(c);
                        return -1;
                    }
                    c = nc;
                    cap = ncap;
                }
                c[cnt++] = (smt_check){(int)S, (int)(R < INT_MAX ? R : INT_MAX), (int)C};
                if (R - S > *need) {
                    if (*need == k)
                        snprintf(why, n, "at k=%d a point with S=%ld and R/C < %ld/%ld could "
                                 "exist outside the class", k, S, pn, pd);
                    *need = R - S > INT_MAX / 2 ? INT_MAX / 2 : (int)(R - S);
                }
            }
        }
        prev_S = Si;
        rho_num = Ri;
        rho_den = Ci;
    }
    *out = c;
    return cnt;
}

/* Clips the candidates to the class k (R <= S + k: what is proven is the
 * class) and drops each one another implies: UNSAT(S, R', m*C) with
 * R' >= m*R implies UNSAT(S, R, C) (split every chunk of a (S, R, C)
 * algorithm in m). */
static int band_prune(smt_check *c, int n, int k)
{
    for (int i = 0; i < n; i++)
        if (c[i].R > c[i].S + k)
            c[i].R = c[i].S + k;
    int m = 0;
    for (int i = 0; i < n; i++) {
        bool implied = false;
        for (int j = 0; j < n && !implied; j++)
            implied = j != i && c[j].S == c[i].S && c[j].C > c[i].C && c[j].C % c[i].C == 0 &&
                      (long)c[j].R >= (long)(c[j].C / c[i].C) * c[i].R;
        if (!implied)
            c[m++] = c[i];
    }
    /* smaller instances first (C, then S; insertion sort: a few dozen at
     * most): when one is SAT the proof ends there, and the smaller ones
     * answer sooner */
    for (int i = 1; i < m; i++) {
        smt_check x = c[i];
        int j = i - 1;
        while (j >= 0 && (c[j].C > x.C || (c[j].C == x.C && c[j].S > x.S))) {
            c[j + 1] = c[j];
            j--;
        }
        c[j + 1] = x;
    }
    return m;
}

/* Decides the band on what the search ran on: allreduce's allgather half
 * on t, a combining collective's dual on the reversed topology, else c on t
 * (the same problems smt_run_search was given by synthesize()). */
static int check_band(const cs_topology *t, const cs_collective *c, const smt_check *chk, int n,
                      const cs_smt_options *opt, int *sat, json_t **stats, cs_error *err)
{
    if (c->kind == CS_COLL_ALLREDUCE) {
        cs_collective ag;
        collective_init(&ag, CS_COLL_ALLGATHER, -1);
        return smt_run_checks(t, &ag, chk, n, opt, sat, stats, err);
    }
    search_problem p;
    int rc = search_problem_init(t, c, &p, err);
    if (rc == CS_OK)
        rc = smt_run_checks(p.t, p.c, chk, n, opt, sat, stats, err);
    search_problem_free(&p);
    return rc;
}

/* Adds the band checks' instances and times to the search's statistics. */
static void stats_merge(json_t *into, json_t *add)
{
    if (!into || !add)
        return;
    json_t *arr = json_object_get(into, "instances"), *more = json_object_get(add, "instances");
    if (json_is_array(arr) && json_is_array(more))
        json_array_extend(arr, more);
    static const char *const ints[] = {"solved", "inferred", "abandoned"};
    for (size_t i = 0; i < sizeof ints / sizeof *ints; i++)
        json_object_set_new(into, ints[i],
                            json_integer(json_integer_value(json_object_get(into, ints[i])) +
                                         json_integer_value(json_object_get(add, ints[i]))));
    static const char *const reals[] = {"z3_seconds", "own_seconds", "wall_seconds"};
    for (size_t i = 0; i < sizeof reals / sizeof *reals; i++)
        json_object_set_new(into, reals[i],
                            json_real(json_number_value(json_object_get(into, reals[i])) +
                                      json_number_value(json_object_get(add, reals[i]))));
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
    if (opt->steps > 0 && (rc = below_bounds(t, c, opt->steps, opt->rounds, opt->chunks, err)))
        return rc;
    cs_smt_options o = *opt;
    bool auto_k = o.k == CS_SMT_K_AUTO;
    search_view view;
    char why_start[160] = "", why_widen[200] = "", widen_note[200] = "";
    bool have_view = auto_k && search_view_of(t, c, o.max_chunks, &view) == CS_OK;
    if (auto_k)
        o.k = have_view && o.steps <= 0 ? start_k(&view, why_start, sizeof why_start)
                                        : CS_SMT_DEFAULT_K;
    int k_first = o.k;
    smt_frontier f;
    rc = synthesize(t, c, &o, &f, err);
    if (rc)
        return rc;
    /* Widen the class while a point outside it could still change the
     * frontier.  First the cheap proof: decide only the largest candidate per
     * (S, C) outside the class that could (frontier_band); when all are
     * UNSAT the frontier is the wider class's as it stands, with no new
     * search.  Otherwise (a better point exists, or an instance could not be
     * decided) the whole search runs again in the wider class. */
    int k_cap = o.k > CS_SMT_WIDEN_MAX_K ? o.k : CS_SMT_WIDEN_MAX_K;
    bool class_enough = false; /* the bounds rule out better points outside the class */
    int band_checked = 0;      /* instances decided by the cheap proof */
    int k_found = o.k;         /* the class the frontier was searched in */
    for (int round = 0; have_view && o.steps <= 0 && f.complete && round < 3; round++) {
        char why[200] = "";
        smt_check *band = NULL;
        int need = o.k;
        bool below_first = false;
        int nband = frontier_band(&f, &view, o.k, &band, &need, &below_first, why, sizeof why);
        if (nband < 0) {
            smt_frontier_free(&f);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
        if (nband == 0) {
            free(band);
            class_enough = !below_first;
            if (below_first)
                cs_text_printf(widen_note, sizeof widen_note,
                               "; points with fewer steps than the first one (steps bound %d) "
                               "are not ruled out outside the class", view.b.steps);
            break;
        }
        if (o.k >= k_cap) {
            free(band);
            cs_text_printf(widen_note, sizeof widen_note,
                     "; k stops at %d: a point outside the class may remain (%s)", k_cap, why);
            break;
        }
        if (need > k_cap)
            need = k_cap;
        cs_smt_options w = o;
        w.k = need;
        if (opt->total_time_limit_s > 0) {
            double left = opt->total_time_limit_s - (cs_now() - t0);
            if (left <= 0) {
                free(band);
                snprintf(widen_note, sizeof widen_note,
                         "; not widened to k=%d: the time limit ran out", need);
                break;
            }
            w.total_time_limit_s = left;
        }
        nband = band_prune(band, nband, need);
        int sat = -1;
        json_t *cst = NULL;
        cs_error cerr;
        cs_error_clear(&cerr);
        int crc = check_band(t, c, band, nband, &w, &sat, &cst, &cerr);
        free(band);
        stats_merge(f.stats, cst);
        json_decref(cst);
        if (crc == CS_ECANCELLED || cs_cancel_requested(opt->cancel)) {
            smt_frontier_free(&f);
            return cs_error_set(err, CS_ECANCELLED, "", "cancelled");
        }
        if (crc == CS_ENOMEM) {
            smt_frontier_free(&f);
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        }
        if (crc == CS_OK && sat < 0) {
            /* every candidate outside class k that could change the frontier
             * is UNSAT up to class `need`: f is that class's frontier */
            if (!why_widen[0])
                snprintf(why_widen, sizeof why_widen, "%s", why);
            band_checked += nband;
            o.k = need;
            continue;
        }
        smt_frontier g;
        cs_error werr;
        cs_error_clear(&werr);
        int wrc = synthesize(t, c, &w, &g, &werr);
        if (wrc == CS_ECANCELLED || cs_cancel_requested(opt->cancel)) {
            if (wrc == CS_OK)
                smt_frontier_free(&g);
            smt_frontier_free(&f);
            return cs_error_set(err, CS_ECANCELLED, "", "cancelled");
        }
        if (wrc != CS_OK || !g.complete) {
            snprintf(widen_note, sizeof widen_note,
                     "; widening to k=%d did not finish (%s): the k=%d frontier is kept", need,
                     wrc != CS_OK ? cs_status_name(wrc) : "limits", o.k);
            if (wrc == CS_OK)
                smt_frontier_free(&g);
            break;
        }
        if (!why_widen[0])
            snprintf(why_widen, sizeof why_widen, "%s", why);
        stats_merge(g.stats, f.stats);
        smt_frontier_free(&f);
        f = g;
        o.k = need;
        k_found = need;
        band_checked = 0;
    }
    if (band_checked > 0 && !widen_note[0])
        cs_text_printf(widen_note, sizeof widen_note,
                       "; %d unsat instance%s outside k=%d keep its frontier", band_checked,
                       band_checked == 1 ? "" : "s", k_found);
    cs_result *r = NULL;
    rc = result_new("smt", &r, err);
    if (rc) {
        smt_frontier_free(&f);
        return rc;
    }
    label_frontier(f.algs, f.n, &b);
    if (opt->steps > 0) {
        snprintf(r->reason, sizeof r->reason, "smt: single instance S=%d R=%d C=%d", opt->steps,
                 opt->rounds, opt->chunks);
    } else if (o.k != CS_SMT_DEFAULT_K && auto_k) {
        cs_text_printf(r->reason, sizeof r->reason,
                 "smt: Pareto search, k=%d, chunks <= %d (k widened from %d to %d: %s%s%s)%s",
                 o.k, opt->max_chunks, CS_SMT_DEFAULT_K, o.k, why_start,
                 why_start[0] && why_widen[0] ? "; then " : "",
                 why_widen[0] && k_first != o.k ? why_widen : "", widen_note);
    } else {
        cs_text_printf(r->reason, sizeof r->reason, "smt: Pareto search, k=%d, chunks <= %d%s%s", o.k,
                 opt->max_chunks, class_enough ? " (k automatic: the bounds rule out better "
                                                 "points outside the class)" : "",
                 widen_note);
    }
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
        json_object_set_new(r->stats, "k", json_integer(o.k));
        json_object_set_new(r->stats, "k_automatic", json_boolean(auto_k));
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
    if ((rc = below_bounds(t, c, steps, rounds, chunks, err)))
        return rc;
    if (o.k == CS_SMT_K_AUTO)
        o.k = CS_SMT_DEFAULT_K; /* k does not matter for one instance */
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
