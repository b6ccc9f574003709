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
 * keep_sends=false handles runs whose sends would not fit in memory.  With
 * sends kept, trials record 8 bytes per send (at most two trials at once plus
 * the best so far; beyond that the winner is run again to record), the
 * algorithm is built straight from the winning records (the dual of a
 * combining kind inverted as it is appended), and it is verified and
 * simulated on the caller's topology, switches included.
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
    int records_of;             /* the phase whose best trial holds this phase's sends */
    bool rerun;                 /* the best trial was run again to record its sends */
    bool rarest;                /* rarest-first trials ran (their counts fit) */
} phase;

/* Trials cycle through variants of the chunk choice and keep the best:
 *  - rarest first in each destination's last spans (the chunk the fewest
 *    other suppliers hold, among a link's first candidates; tacos_engine.c)
 *    and the oldest candidate throughout: rarest first keeps the last spans
 *    full (hypercubes, tori, DGX-1) and costs little more than the plain
 *    choice, so it is trial 0 at every size.  It keeps one bit per (rank,
 *    chunk) of holdings, so it is left out only where those alone would pass
 *    TACOS_RAREST_MAX_BYTES; stats.rarest_first says whether it ran;
 *  - on heterogeneous links, with and without keeping slow links off chunks
 *    a cheaper in-link can supply. */
#define TACOS_RAREST_MAX_BYTES (4.0 * 1024 * 1024 * 1024)
#define TACOS_VARIANTS 4

typedef struct trial_pool {
    tacos_problem prob[TACOS_MAX_PHASES][TACOS_VARIANTS];
    int nvariants[TACOS_MAX_PHASES];
    phase *ph;
    int nphases;
    const cs_tacos_options *opt;
    uint64_t salt;
    int trials;                 /* per phase */
    bool keep;                  /* trials record their sends */
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
                                 tp->keep, tp->opt->cancel, &tr, &err);
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

/* Runs phase k's winning trial again, recording its sends. */
static int rerun_best(trial_pool *tp, int k, int threads, cs_error *err)
{
    phase *ph = &tp->ph[k];
    int i = ph->best_index;
    tacos_problem prob = tp->prob[k][i % tp->nvariants[k]];
    prob.match_threads = threads;
    tacos_trial tr;
    int rc = tacos_run_trial(&prob, trial_seed(tp->opt->seed, tp->salt + (uint64_t)k * 7919u, i),
                             true, tp->opt->cancel, &tr, err);
    if (rc)
        return rc;
    if (tr.checksum != ph->best.checksum || tr.makespan_us != ph->best.makespan_us) {
        tacos_trial_free(&tr);
        return cs_error_set(err, CS_EINTERNAL, NULL, "TACOS: re-running trial %d gave another "
                            "schedule", i);
    }
    tacos_trial_free(&ph->best);
    ph->best = tr;
    ph->rerun = true;
    return CS_OK;
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
        double pairs = (double)ph[k].topo->ranks * (double)G;
        bool rarest_fits = !opt->plain_only && pairs / 8 <= TACOS_RAREST_MAX_BYTES;
        bool het = heterogeneous_in_links(ph[k].topo);
        int n = 0;
        for (int skip = het ? 1 : 0; skip >= 0; skip--)
            for (int j = 0; j < (rarest_fits ? 2 : 1); j++) {
                tp->prob[k][n] = base;
                tp->prob[k][n].rarest = rarest_fits && j == 0;
                tp->prob[k][n].skip_redundant = skip;
                n++;
            }
        tp->nvariants[k] = n;
        ph[k].rarest = false;
        for (int i = 0; i < opt->trials && i < n; i++)
            ph[k].rarest |= tp->prob[k][i].rarest;
    }
    pthread_mutex_init(&tp->mu, NULL);
    int total = nphases * opt->trials;
    int threads = opt->threads > 0 ? opt->threads : cs_cpu_count(), all_threads = threads;
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
    /* Every running trial that records its sends holds 8 bytes per send, and
     * so does the best one so far: with more than two trials at once that
     * would pass the 24 bytes per send the rest of the path leaves room for,
     * so the trials only compete and the winner is run again, recording
     * (same seed, same sends; its matching may use every thread). */
    tp->keep = opt->keep_sends && threads <= 2;
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
    for (int k = 0; k < nphases && rc == CS_OK && opt->keep_sends && !tp->keep; k++)
        rc = rerun_best(tp, k, all_threads, err);
    if (rc) {
        for (int k = 0; k < nphases; k++) {
            tacos_trial_free(&ph[k].best);
            ph[k].best_index = -1;
        }
        if (err && tp->rc)
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
    ph->records_of = pl->nphases;
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
        pl->ph[0].best = pl->ph[1].best;   /* statistics; the sends stay phase 1's */
        pl->ph[0].best.recs = NULL;
        pl->ph[0].best.span_first = NULL;
        pl->ph[0].best.span_start = NULL;
        pl->ph[0].best_index = pl->ph[1].best_index;
        pl->ph[0].rarest = pl->ph[1].rarest;
        pl->ph[0].records_of = 1;
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

/* ---- the algorithm from the trials ---------------------------------------- */

/* Appends trial tr's sends (on topo, whose links its records index).
 * Forward: as matched, shifted by t0.  Inverted (the dual of a combining
 * kind, run on the reversed topology): each send reversed, a reduce, and run
 * backwards in time from the horizon h (start' = h - end, end' = h - start),
 * the arithmetic algorithm_invert and algorithm_concat use.  *last_end gets
 * the latest end appended.  Steps are numbered afterwards. */
static int emit_trial(cs_algorithm *a, const tacos_trial *tr, const cs_topology *topo,
                      double chunk_bytes, bool inverted, double h, double t0, double *last_end)
{
    double latest = *last_end;
    for (int sp = inverted ? tr->nspans - 1 : 0; inverted ? sp >= 0 : sp < tr->nspans;
         sp += inverted ? -1 : 1) {
        long b = tr->span_first[sp], e = tr->span_first[sp + 1];
        double start = tr->span_start[sp];
        for (long k = inverted ? e - 1 : b; inverted ? k >= b : k < e; k += inverted ? -1 : 1) {
            const tacos_rec *r = &tr->recs[k];
            const cs_link *l = &topo->links[r->link];
            double end = start + tacos_link_cost(l, chunk_bytes);
            int rc = inverted
                ? algorithm_add_timed_send(a, r->chunk, l->dst, l->src, 0, CS_OP_REDUCE, h - end,
                                           h - start)
                : algorithm_add_timed_send(a, r->chunk, l->src, l->dst, 0, CS_OP_COPY,
                                           start + t0, end + t0);
            if (rc)
                return rc;
            double x = inverted ? h - start : end + t0;
            if (x > latest)
                latest = x;
        }
    }
    *last_end = latest;
    return CS_OK;
}

/* The latest end among trial tr's sends: the horizon its inverse runs back
 * from. */
static double trial_horizon(const tacos_trial *tr, const cs_topology *topo, double chunk_bytes)
{
    double h = 0.0;
    for (int sp = 0; sp < tr->nspans; sp++)
        for (long k = tr->span_first[sp]; k < tr->span_first[sp + 1]; k++) {
            double end = tr->span_start[sp] + tacos_link_cost(&topo->links[tr->recs[k].link],
                                                               chunk_bytes);
            if (end > h)
                h = end;
        }
    return h;
}

/* Builds the caller's algorithm straight from the winning trials' records
 * (no intermediate algorithms: a combining kind's dual is inverted as it is
 * appended, and allreduce's allgather follows its reducescatter), frees each
 * trial's records once appended, then numbers the steps by start time and
 * puts the sends in time order. */
static int plan_to_algorithm(plan *pl, const cs_collective *c, const cs_tacos_options *opt,
                             double chunk_bytes, cs_algorithm **out, cs_error *err)
{
    *out = NULL;
    int P = pl->topo->ranks;
    int chunks = c->kind == CS_COLL_ALLREDUCE ? P * opt->chunks : opt->chunks;
    cs_algorithm *a = NULL;
    int rc = algorithm_new(c, pl->topo->name, P, chunks, 1, &a, err);
    if (rc)
        return rc;
    snprintf(a->method, sizeof a->method, "tacos");
    a->timed_chunk_bytes = chunk_bytes;
    if (algorithm_reserve_sends(a, pl->nsends) != CS_OK) {
        algorithm_free(a);
        return cs_error_set(err, CS_ENOMEM, NULL, "out of memory for %ld sends", pl->nsends);
    }
    bool combining = collective_kind_is_combining(c->kind);
    double t0 = 0.0;
    for (int k = 0; k < pl->nphases && rc == CS_OK; k++) {
        tacos_trial *tr = &pl->ph[pl->ph[k].records_of].best;
        const cs_topology *topo = pl->ph[k].topo;
        bool inverted = combining && k == 0;
        double h = inverted ? trial_horizon(tr, topo, chunk_bytes) : 0.0, last = 0.0;
        rc = emit_trial(a, tr, topo, chunk_bytes, inverted, h, t0, &last);
        if (rc)
            rc = cs_error_set(err, rc, NULL, rc == CS_ELIMIT ? "more than 2^32 distinct times"
                                                            : "out of memory building the algorithm");
        t0 = last;  /* allreduce: the allgather starts when the reducescatter ends */
        bool needed_later = false;
        for (int j = k + 1; j < pl->nphases; j++)
            needed_later |= pl->ph[j].records_of == pl->ph[k].records_of;
        if (!needed_later)
            tacos_trial_free(tr);
    }
    if (rc == CS_OK)
        rc = algorithm_steps_from_start_times(a, err);
    if (rc == CS_OK && (rc = algorithm_sort_by_time(a)) != CS_OK)
        rc = cs_error_set(err, rc, NULL, "out of memory ordering %ld sends", a->nsends);
    if (rc) {
        algorithm_free(a);
        return rc;
    }
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
    double search_s = cs_now() - t0, build_s = 0.0, verify_s = 0.0, simulate_s = 0.0;
    cs_result *res = NULL;
    cs_algorithm *alg = NULL;
    if (rc == CS_OK)
        rc = result_new("tacos", &res, err);
    double sim_us = best.makespan_us;
    if (rc == CS_OK && opt->keep_sends) {
        /* verified and timed on the caller's topology, switches and all: a
         * switch port is one resource whatever the unwinding (docs/model.md) */
        double tb = cs_now();
        rc = plan_to_algorithm(&best, &coll, opt, chunk_bytes, &alg, err);
        build_s = cs_now() - tb;
        /* one walk for both (verify.h): verify_s is the checks, the value
         * replay and the shared chunk linking, simulate_s the timing sweep */
        tb = cs_now();
        if (rc == CS_OK) {
            cs_sim_result sr;
            rc = algorithm_verify_simulate(t, alg, opt->bytes, &sr, &verify_s, err);
            if (rc == CS_OK)
                sim_us = sr.time_us;
            sim_result_free(&sr);
            simulate_s = cs_now() - tb - verify_s;
        }
    }
    if (rc == CS_OK) {
        double ti = cs_now();
        double ideal = simulate_ideal_us(t, &coll, final_chunks, opt->bytes);
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
        {
            bool rarest = true;
            for (int i = 0; i < best.nphases; i++)
                rarest &= best.ph[i].rarest;
            json_object_set_new(st, "rarest_first", json_boolean(rarest));
        }
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
        json_object_set_new(st, "build_seconds", json_real(build_s));
        json_object_set_new(st, "verify_seconds", json_real(verify_s));
        json_object_set_new(st, "simulate_seconds", json_real(simulate_s));
        json_object_set_new(st, "recording", json_string(!opt->keep_sends ? "none"
                                                         : best.ph[best.nphases - 1].rerun ? "winner re-run"
                                                                      : "in trials"));
        if (alg)
            json_object_set_new(st, "send_bytes", json_integer((json_int_t)algorithm_storage_bytes(alg)));
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
