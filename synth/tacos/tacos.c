/*
 * tacos.c - TACOS synthesis: options, switch unwinding, combining collectives
 * by duality, seeded trials in parallel, and the result's statistics.  The
 * matching itself is in tacos_engine.c.
 *
 * A synthesis is a "plan": one or two matching phases on one (unwound)
 * topology.  Non-combining kinds are one phase on the topology itself;
 * reducescatter and reduce are their non-combining dual (allgather,
 * broadcast) on the reversed topology, inverted afterwards; allreduce is that
 * reducescatter followed by an allgather.  Each phase runs `trials` seeded
 * trials and keeps the one that finishes first (ties: the lowest trial
 * index), so the winner does not depend on which thread ran which trial.
 * With switches and switch_degree 0, a plan is built for each of a few
 * unwinding degrees and the fastest wins.
 *
 * Statistics come from the trials themselves (the schedule's makespan), so
 * keep_sends=false handles runs whose sends would not fit in memory; with
 * sends kept, the winner is also run through the simulator and verified.
 */
#include "tacos.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "simulate.h"
#include "tacos_internal.h"
#include "verify.h"

#define TACOS_MAX_PHASES 2
#define TACOS_MAX_TRIALS 100000

void tacos_options_default(cs_tacos_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->chunks = 1;
    opt->trials = 4;
    opt->seed = 1;
    opt->threads = 0;
    opt->switch_degree = 0;
    opt->bytes = 64.0 * 1024 * 1024;
    opt->keep_sends = true;
}

/* ---- one phase: trials in parallel ----------------------------------------- */

typedef struct phase {
    const cs_topology *topo;    /* where the phase runs (reversed for duals) */
    cs_collective coll;         /* non-combining, validated for topo->ranks */
    tacos_trial best;
    int best_index;             /* -1 until a trial finished */
} phase;

/* Trials cycle through variants of the chunk choice and keep the best:
 *  - rarest first reads every candidate: worth it on small instances, where
 *    the last spans decide the result; elsewhere the first candidate;
 *  - on heterogeneous links, with and without keeping slow links off chunks
 *    a cheaper in-link can supply. */
#define TACOS_RAREST_MAX_BITS (1L << 15)
#define TACOS_VARIANTS 4

typedef struct trial_pool {
    tacos_problem prob[TACOS_MAX_PHASES][TACOS_VARIANTS];
    int nvariants[TACOS_MAX_PHASES];
    phase *ph;
    int nphases;
    const cs_tacos_options *opt;
    uint64_t salt;
    int trials;                 /* per phase */
    pthread_mutex_t mu;
    int next, done;
    int rc;
    cs_error err;
    int err_index;
    double t0;
} trial_pool;

/* Whether some rank has in-links of different speeds. */
static bool heterogeneous_in_links(const cs_topology *t)
{
    for (int r = 0; r < t->ranks; r++)
        for (int k = t->in_begin[r] + 1; k < t->in_begin[r + 1]; k++) {
            const cs_link *a = &t->links[t->in_links[k]], *b = &t->links[t->in_links[t->in_begin[r]]];
            if (a->alpha_us != b->alpha_us || a->gbps != b->gbps)
                return true;
        }
    return false;
}

static uint64_t trial_seed(uint64_t seed, uint64_t salt, int trial)
{
    return seed + (uint64_t)trial + salt * 0x9e3779b97f4a7c15ULL;
}

/* Workers take (phase, trial) tasks in order; each phase keeps its fastest
 * trial, ties to the lowest index, so the outcome does not depend on the
 * number of threads or their timing. */
static void *trial_worker(void *arg)
{
    trial_pool *tp = arg;
    int total = tp->nphases * tp->trials;
    for (;;) {
        pthread_mutex_lock(&tp->mu);
        int task = tp->rc == CS_OK ? tp->next++ : total;
        pthread_mutex_unlock(&tp->mu);
        if (task >= total)
            break;
        int k = task / tp->trials, i = task % tp->trials;
        phase *ph = &tp->ph[k];
        const tacos_problem *prob = &tp->prob[k][i % tp->nvariants[k]];
        double ts = cs_now();
        tacos_trial tr;
        cs_error err;
        cs_error_clear(&err);
        int rc = tacos_run_trial(prob, trial_seed(tp->opt->seed, tp->salt + (uint64_t)k * 7919u, i),
                                 tp->opt->keep_sends, tp->opt->cancel, &tr, &err);
        pthread_mutex_lock(&tp->mu);
        if (rc) {
            if (tp->rc == CS_OK || task < tp->err_index) {
                tp->rc = rc;
                tp->err = err;
                tp->err_index = task;
            }
        } else {
            bool better = ph->best_index < 0 || tr.makespan_us < ph->best.makespan_us ||
                          (tr.makespan_us == ph->best.makespan_us && i < ph->best_index);
            double this_us = tr.makespan_us;
            if (better) {
                tacos_trial_free(&ph->best);
                ph->best = tr;
                ph->best_index = i;
            } else {
                tacos_trial_free(&tr);
            }
            tp->done++;
            if (tp->opt->progress) {
                char msg[160];
                snprintf(msg, sizeof msg, "phase %d trial %d: %.3f us (best %.3f us)", k + 1, i,
                         this_us, ph->best.makespan_us);
                cs_progress_event ev = {
                    .method = "tacos", .outcome = "trial", .message = msg,
                    .chunks = prob->chunks, .seconds = cs_now() - ts,
                    .elapsed = cs_now() - tp->t0, .done = tp->done, .total = total,
                    .best = ph->best.makespan_us,
                };
                tp->opt->progress(tp->opt->progress_ctx, &ev);
            }
        }
        pthread_mutex_unlock(&tp->mu);
    }
    return NULL;
}

static int run_phases(phase *ph, int nphases, const cs_tacos_options *opt, double chunk_bytes,
                      uint64_t salt, double t0, cs_error *err)
{
    trial_pool *tp = calloc(1, sizeof *tp);
    if (!tp)
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory");
    tp->ph = ph;
    tp->nphases = nphases;
    tp->opt = opt;
    tp->salt = salt;
    tp->trials = opt->trials;
    tp->t0 = t0;
    for (int k = 0; k < nphases; k++) {
        ph[k].best_index = -1;
        memset(&ph[k].best, 0, sizeof ph[k].best);
        long G = collective_global_chunks(&ph[k].coll, ph[k].topo->ranks, opt->chunks);
        tacos_problem base = {
            .topo = ph[k].topo, .coll = &ph[k].coll, .chunks = opt->chunks,
            .chunk_bytes = chunk_bytes, .window = 1,
        };
        bool small = (double)ph[k].topo->ranks * (double)G <= (double)TACOS_RAREST_MAX_BITS;
        bool het = heterogeneous_in_links(ph[k].topo);
        int n = 0;
        for (int skip = het ? 1 : 0; skip >= 0; skip--)
            for (int rarest = small ? 1 : 0; rarest >= 0; rarest--) {
                tp->prob[k][n] = base;
                tp->prob[k][n].rarest = rarest;
                tp->prob[k][n].skip_redundant = skip;
                n++;
            }
        tp->nvariants[k] = n;
    }
    pthread_mutex_init(&tp->mu, NULL);
    int total = nphases * opt->trials;
    int threads = opt->threads > 0 ? opt->threads : cs_cpu_count();
    /* threads left over when there are fewer trials than threads match the
     * destinations of one trial in parallel (same results either way) */
    int per_trial = threads / total > 1 ? threads / total : 1;
    for (int k = 0; k < nphases; k++)
        for (int v = 0; v < TACOS_VARIANTS; v++)
            tp->prob[k][v].match_threads = per_trial;
    if (threads > total)
        threads = total;
    if (threads > 64)
        threads = 64;
    pthread_t th[64];
    int started = 0;
    for (int i = 1; i < threads; i++) {
        if (pthread_create(&th[started], NULL, trial_worker, tp) != 0)
            break;
        started++;
    }
    trial_worker(tp);
    for (int i = 0; i < started; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&tp->mu);
    int rc = tp->rc;
    if (rc) {
        for (int k = 0; k < nphases; k++) {
            tacos_trial_free(&ph[k].best);
            ph[k].best_index = -1;
        }
        if (err)
            *err = tp->err;
    }
    free(tp);
    return rc;
}

/* ---- plans: the phases of one collective on one topology ------------------- */

typedef struct plan {
    cs_topology *unwound;       /* owned when the input had switches */
    const cs_topology *topo;    /* the topology the algorithm runs on */
    cs_topology *reversed;      /* owned, for combining kinds */
    int degree;                 /* switch unwinding degree, 0 without switches */
    int nphases;
    phase ph[TACOS_MAX_PHASES];
    double makespan_us;
    long nsends;
    int nspans;
    size_t peak_bytes;
} plan;

static void plan_free(plan *pl)
{
    for (int i = 0; i < pl->nphases; i++) {
        tacos_trial_free(&pl->ph[i].best);
        collective_free(&pl->ph[i].coll);
    }
    if (pl->reversed)
        topology_free(pl->reversed);
    if (pl->unwound)
        topology_free(pl->unwound);
    memset(pl, 0, sizeof *pl);
}

static int add_phase(plan *pl, const cs_topology *topo, const cs_collective *c, cs_error *err)
{
    phase *ph = &pl->ph[pl->nphases];
    memset(ph, 0, sizeof *ph);
    ph->topo = topo;
    int rc = collective_copy(&ph->coll, c, err);
    if (rc)
        return rc;
    pl->nphases++;
    return collective_validate(&ph->coll, topo->ranks, err);
}

/* Whether two topologies have the same links (so link indices mean the same)
 * and no shared sets. */
static bool same_links(const cs_topology *a, const cs_topology *b)
{
    if (a->ranks != b->ranks || a->nlinks != b->nlinks || a->nshared || b->nshared)
        return false;
    for (int i = 0; i < a->nlinks; i++) {
        const cs_link *x = &a->links[i], *y = &b->links[i];
        if (x->src != y->src || x->dst != y->dst || x->lanes != y->lanes || x->gbps != y->gbps ||
            x->alpha_us != y->alpha_us)
            return false;
    }
    return true;
}

static int copy_trial(const tacos_trial *from, tacos_trial *to, cs_error *err)
{
    *to = *from;
    to->recs = NULL;
    to->cap = 0;
    if (from->keep && from->nsends > 0) {
        to->recs = malloc((size_t)from->nsends * sizeof *to->recs);
        if (!to->recs)
            return cs_error_set(err, CS_ENOMEM, NULL, "out of memory copying a schedule");
        memcpy(to->recs, from->recs, (size_t)from->nsends * sizeof *to->recs);
        to->cap = from->nsends;
    }
    return CS_OK;
}

static int plan_run(plan *pl, const cs_collective *c, const cs_tacos_options *opt,
                    double chunk_bytes, double t0, cs_error *err)
{
    int rc;
    const cs_topology *T = pl->topo;
    switch (c->kind) {
    case CS_COLL_ALLGATHER: case CS_COLL_BROADCAST: case CS_COLL_GATHER:
    case CS_COLL_SCATTER: case CS_COLL_ALLTOALL: case CS_COLL_CUSTOM:
        if ((rc = add_phase(pl, T, c, err)))
            return rc;
        break;
    case CS_COLL_REDUCESCATTER: case CS_COLL_REDUCE: case CS_COLL_ALLREDUCE: {
        if ((rc = topology_reverse(T, &pl->reversed, err)))
            return rc;
        cs_collective rs, dual;
        if (c->kind == CS_COLL_ALLREDUCE)
            collective_init(&rs, CS_COLL_REDUCESCATTER, -1);
        else if ((rc = collective_copy(&rs, c, err)))
            return rc;
        rc = collective_dual(&rs, &dual, err);
        collective_free(&rs);
        if (rc)
            return rc;
        rc = add_phase(pl, pl->reversed, &dual, err);
        collective_free(&dual);
        if (rc)
            return rc;
        if (c->kind == CS_COLL_ALLREDUCE) {
            cs_collective ag;
            collective_init(&ag, CS_COLL_ALLGATHER, -1);
            if ((rc = add_phase(pl, T, &ag, err)))
                return rc;
        }
        break;
    }
    default:
        return cs_error_set(err, CS_EUNSUPPORTED, "collective.kind", "TACOS does not handle %s",
                            collective_kind_name(c->kind));
    }
    uint64_t salt = (uint64_t)pl->degree * 104729u;
    if (pl->nphases == 2 && same_links(pl->ph[0].topo, pl->ph[1].topo)) {
        /* allreduce on a topology equal to its reverse: the reducescatter's
         * dual is the allgather problem itself, so one search serves both */
        if ((rc = run_phases(&pl->ph[1], 1, opt, chunk_bytes, salt, t0, err)))
            return rc;
        if ((rc = copy_trial(&pl->ph[1].best, &pl->ph[0].best, err)))
            return rc;
        pl->ph[0].best_index = pl->ph[1].best_index;
    } else if ((rc = run_phases(pl->ph, pl->nphases, opt, chunk_bytes, salt, t0, err))) {
        return rc;
    }
    for (int i = 0; i < pl->nphases; i++) {
        pl->makespan_us += pl->ph[i].best.makespan_us;
        pl->nsends += pl->ph[i].best.nsends;
        pl->nspans += pl->ph[i].best.nspans;
        pl->peak_bytes += pl->ph[i].best.peak_bytes;
    }
    return CS_OK;
}

/* ---- algorithms from trials ------------------------------------------------- */

static int trial_to_algorithm(const phase *ph, int chunks, double chunk_bytes, const char *name,
                              cs_algorithm **out, cs_error *err)
{
    const tacos_trial *tr = &ph->best;
    cs_algorithm *a = NULL;
    int rc = algorithm_new(&ph->coll, name, ph->topo->ranks, chunks,
                           tr->nspans > 0 ? tr->nspans : 1, &a, err);
    if (rc)
        return rc;
    snprintf(a->method, sizeof a->method, "tacos");
    a->timed_chunk_bytes = chunk_bytes;
    if (algorithm_reserve_sends(a, tr->nsends) != CS_OK) {
        algorithm_free(a);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends", tr->nsends);
    }
    for (long i = 0; i < tr->nsends; i++) {
        const tacos_rec *r = &tr->recs[i];
        const cs_link *l = &ph->topo->links[r->link];
        double end = r->start_us + tacos_link_cost(l, chunk_bytes);
        if ((rc = algorithm_add_timed_send(a, r->chunk, l->src, l->dst, r->span, CS_OP_COPY,
                                           r->start_us, end))) {
            algorithm_free(a);
            return cs_error_set(err, rc, NULL, "out of memory building the algorithm");
        }
    }
    *out = a;
    return CS_OK;
}

static int plan_to_algorithm(const plan *pl, const cs_collective *c, const cs_tacos_options *opt,
                             double chunk_bytes, cs_algorithm **out, cs_error *err)
{
    const char *name = pl->topo->name;
    int C = opt->chunks;
    int rc;
    cs_algorithm *a = NULL, *dual = NULL, *rs = NULL, *ag = NULL;
    if (!collective_kind_is_combining(c->kind)) {
        rc = trial_to_algorithm(&pl->ph[0], C, chunk_bytes, name, &a, err);
        goto done;
    }
    if ((rc = trial_to_algorithm(&pl->ph[0], C, chunk_bytes, name, &dual, err)))
        goto done;
    /* algorithm_invert runs the dual backwards in time (start = T - end) */
    if ((rc = algorithm_invert(dual, &rs, err)))
        goto done;
    if (c->kind != CS_COLL_ALLREDUCE) {
        a = rs;
        rs = NULL;
        rc = algorithm_steps_from_start_times(a, err);
        goto done;
    }
    /* algorithm_concat starts the allgather when the reducescatter ends */
    if ((rc = trial_to_algorithm(&pl->ph[1], C, chunk_bytes, name, &ag, err)))
        goto done;
    if ((rc = algorithm_concat(rs, ag, &a, err)))
        goto done;
    rc = algorithm_steps_from_start_times(a, err);
done:
    if (dual)
        algorithm_free(dual);
    if (rs)
        algorithm_free(rs);
    if (ag)
        algorithm_free(ag);
    if (rc) {
        if (a)
            algorithm_free(a);
        return rc;
    }
    snprintf(a->method, sizeof a->method, "tacos");
    a->optimality[0] = '\0';
    *out = a;
    return CS_OK;
}

/* ---- entry point ------------------------------------------------------------ */

static int check_options(const cs_tacos_options *o, cs_error *err)
{
    if (o->chunks < 1 || o->chunks > 1 << 20)
        return cs_error_set(err, CS_EINVAL, "options.chunks", "chunks must be in 1..%d, got %d",
                            1 << 20, o->chunks);
    if (o->trials < 1 || o->trials > TACOS_MAX_TRIALS)
        return cs_error_set(err, CS_EINVAL, "options.trials", "trials must be in 1..%d, got %d",
                            TACOS_MAX_TRIALS, o->trials);
    if (o->threads < 0)
        return cs_error_set(err, CS_EINVAL, "options.threads", "threads must be >= 0, got %d",
                            o->threads);
    if (o->switch_degree < 0)
        return cs_error_set(err, CS_EINVAL, "options.switch_degree",
                            "switch_degree must be >= 0, got %d", o->switch_degree);
    if (!(o->bytes > 0) || !isfinite(o->bytes))
        return cs_error_set(err, CS_EINVAL, "options.bytes", "bytes must be a positive size");
    return CS_OK;
}

/* Unwinding degrees to try: the caller's, or 1, 2, 4 and n-1 for the smallest
 * switch of n ranks. */
static int switch_degrees(const cs_topology *t, int wanted, int *deg, cs_error *err)
{
    int nmin = t->switches[0].nranks;
    for (int s = 1; s < t->nswitches; s++)
        if (t->switches[s].nranks < nmin)
            nmin = t->switches[s].nranks;
    if (wanted > 0) {
        if (wanted >= nmin)
            return cs_error_set(err, CS_EINVAL, "options.switch_degree",
                                "switch_degree %d must be below the smallest switch's %d ranks",
                                wanted, nmin);
        deg[0] = wanted;
        return 1;
    }
    int cand[] = {1, 2, 4, nmin - 1}, n = 0;
    for (int i = 0; i < 4; i++) {
        int d = cand[i];
        bool dup = false;
        for (int j = 0; j < n; j++)
            dup |= deg[j] == d;
        if (d >= 1 && d < nmin && !dup)
            deg[n++] = d;
    }
    return n;
}

static long peak_rss_kb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return -1;
    return ru.ru_maxrss;
}

int tacos_synthesize(const cs_topology *t, const cs_collective *c, const cs_tacos_options *opt,
                     cs_result **out, cs_error *err)
{
    if (out)
        *out = NULL;
    if (!t || !c || !out)
        return cs_error_set(err, CS_EINVAL, NULL, "tacos_synthesize: missing argument");
    if (!t->finalized)
        return cs_error_set(err, CS_EINVAL, "topology", "topology is not finalized");
    cs_tacos_options defaults;
    if (!opt) {
        tacos_options_default(&defaults);
        opt = &defaults;
    }
    int rc = check_options(opt, err);
    if (rc)
        return rc;
    double t0 = cs_now();
    cs_collective coll;
    if ((rc = collective_copy(&coll, c, err)))
        return rc;
    if ((rc = collective_validate(&coll, t->ranks, err))) {
        collective_free(&coll);
        return rc;
    }
    int final_chunks = coll.kind == CS_COLL_ALLREDUCE ? t->ranks * opt->chunks : opt->chunks;
    double chunk_bytes = opt->bytes / final_chunks;

    int degrees[4] = {0}, ndeg = 1;
    if (t->nswitches > 0) {
        ndeg = switch_degrees(t, opt->switch_degree, degrees, err);
        if (ndeg < 0) {
            collective_free(&coll);
            return ndeg;
        }
        if (ndeg == 0) {
            collective_free(&coll);
            return cs_error_set(err, CS_EUNSUPPORTED, "topology.switches",
                                "a switch needs at least 2 ranks to unwind");
        }
    }
    plan best = {0};
    bool have_best = false;
    for (int k = 0; k < ndeg && rc == CS_OK; k++) {
        plan pl = {0};
        pl.degree = degrees[k];
        pl.topo = t;
        if (t->nswitches > 0) {
            rc = topology_unwind_switches(t, degrees[k], &pl.unwound, err);
            pl.topo = pl.unwound;
        }
        if (rc == CS_OK)
            rc = plan_run(&pl, &coll, opt, chunk_bytes, t0, err);
        if (rc == CS_OK && (!have_best || pl.makespan_us < best.makespan_us)) {
            if (have_best)
                plan_free(&best);
            best = pl;
            have_best = true;
        } else {
            plan_free(&pl);
        }
    }
    double search_s = cs_now() - t0;
    cs_result *res = NULL;
    cs_algorithm *alg = NULL;
    if (rc == CS_OK)
        rc = result_new("tacos", &res, err);
    double sim_us = best.makespan_us;
    if (rc == CS_OK && opt->keep_sends) {
        rc = plan_to_algorithm(&best, &coll, opt, chunk_bytes, &alg, err);
        if (rc == CS_OK)
            rc = algorithm_verify(best.topo, alg, err);
        if (rc == CS_OK) {
            cs_sim_result sr;
            memset(&sr, 0, sizeof sr);
            rc = simulate_algorithm(best.topo, alg, opt->bytes, &sr, err);
            if (rc == CS_OK)
                sim_us = sr.time_us;
            sim_result_free(&sr);
        }
    }
    if (rc == CS_OK) {
        double ti = cs_now();
        double ideal = simulate_ideal_us(best.topo, &coll, final_chunks, opt->bytes);
        double ideal_s = cs_now() - ti;
        double secs = cs_now() - t0;
        res->synth_seconds = secs;
        res->complete = false;
        snprintf(res->reason, sizeof res->reason, "tacos: %d trials%s", opt->trials,
                 t->nswitches > 0 ? ", switches unwound" : "");
        json_t *st = json_object();
        json_object_set_new(st, "sim_time_us", json_real(sim_us));
        json_object_set_new(st, "schedule_time_us", json_real(best.makespan_us));
        json_object_set_new(st, "ideal_us", json_real(ideal));
        json_object_set_new(st, "ratio_to_ideal", json_real(sim_us > 0 ? ideal / sim_us : 0.0));
        json_object_set_new(st, "trials", json_integer(opt->trials));
        json_object_set_new(st, "sends", json_integer(best.nsends));
        {
            uint64_t h = 0;
            for (int i = 0; i < best.nphases; i++)
                h = h * 0x100000001b3ULL ^ best.ph[i].best.checksum;
            char hex[24];
            snprintf(hex, sizeof hex, "%016llx", (unsigned long long)h);
            json_object_set_new(st, "schedule_hash", json_string(hex));
        }
        json_object_set_new(st, "spans", json_integer(alg ? alg->steps : best.nspans));
        json_object_set_new(st, "chunks", json_integer(final_chunks));
        json_object_set_new(st, "chunk_bytes", json_real(chunk_bytes));
        json_object_set_new(st, "seconds", json_real(secs));
        json_object_set_new(st, "search_seconds", json_real(search_s));
        json_object_set_new(st, "ideal_seconds", json_real(ideal_s));
        json_object_set_new(st, "peak_rss_kb", json_integer(peak_rss_kb()));
        json_object_set_new(st, "engine_peak_bytes", json_integer((json_int_t)best.peak_bytes));
        if (t->nswitches > 0)
            json_object_set_new(st, "switch_degree", json_integer(best.degree));
        for (int i = 0; i < best.nphases; i++) {
            char key[32];
            snprintf(key, sizeof key, "phase%d_time_us", i + 1);
            json_object_set_new(st, key, json_real(best.ph[i].best.makespan_us));
        }
        res->stats = st;
        if (alg) {
            result_add(res, alg);
            alg = NULL;
        }
        *out = res;
        res = NULL;
    }
    if (alg)
        algorithm_free(alg);
    if (res)
        result_free(res);
    if (have_best)
        plan_free(&best);
    collective_free(&coll);
    return rc;
}
