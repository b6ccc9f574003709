/*
 * smt_search.c - the SCCL Pareto search (Algorithm 1) over k-synchronous
 * algorithms for one non-combining collective, run on a small pool of worker
 * threads.  smt_encode.c decides the individual instances; smt.c handles
 * options, combining collectives and labels.
 *
 * The search.  For S = steps bound, bound+1, ... the candidates are the (R, C)
 * with S <= R <= S + k, C <= max_chunks, R/C >= the bandwidth bound, in
 * ascending R/C (ties: smaller C first).  The first SAT candidate is the best
 * algorithm with S steps.  Candidates whose R/C is not strictly below the last
 * frontier point are never tried: they could not join the frontier (SCCL tries
 * them and then discards them).  The search ends when a point reaches the
 * bandwidth bound (complete), or at max_steps / a time limit (incomplete).
 *
 * Reuse, all of it sound:
 *  - UNSAT(S, R', C') with C' = m*C and R' >= m*R implies UNSAT(S, R, C):
 *    a (S, R, C) algorithm with every chunk split in m gives (S, m*R, m*C),
 *    and extra rounds never hurt.  Such candidates are skipped ("inferred").
 *  - Speculation: with idle workers, the next candidates of the same S run in
 *    parallel (interrupted when an earlier one turns out SAT), and so do
 *    candidates of S+1 whose R/C is below every unresolved candidate of S:
 *    whatever S yields, they are certainly in S+1's list.
 *
 * Threads and cancellation.  Each instance owns a Z3 context.  The engine
 * lock guards every task's live context; one cs_cancel hook (and the total
 * time limit, and abandoning speculation) sets `interrupted` and calls
 * Z3_interrupt under that lock.  Because an interrupt that lands before
 * Z3_solver_check starts could be lost, the main thread re-sends interrupts to
 * flagged tasks on every 50 ms tick.  Only the main thread reports progress.
 */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smt_internal.h"
#include "verify.h"

/* ---- engine: tasks and workers ------------------------------------------------------ */

enum { T_PENDING, T_QUEUED, T_RUNNING, T_DONE };

typedef struct task {
    int S, R, C;
    int state;
    bool abandoned;
    bool inferred;            /* decided by implication, never solved */
    bool reported;
    int rc;
    cs_error err;
    cs_algorithm *alg;
    smt_instance_stats st;
    double verify_s, seconds;
    double started;
    smt_live live;
    const smt_problem *prob;
    struct task *next_queued;
} task;

typedef struct engine {
    pthread_mutex_t lock;
    pthread_cond_t work, done;
    pthread_t *threads;
    int nthreads, started_threads;
    bool stop;
    task *queue_head, *queue_tail;
    int inflight;             /* queued + running */
    /* task table */
    task **tasks;
    int ntasks, cap;
    /* problems per chunk count (built by the main thread) */
    smt_problem **probs;
    int nprobs;
    /* configuration */
    const cs_topology *topo;  /* what is encoded (maybe reversed) */
    cs_collective coll;       /* validated copy of what is encoded */
    const cs_smt_options *opt;
    smt_encode_config cfg;
    double t0;
    bool cancelled, timed_out;
    int cancel_handle;
    double best_rpc;          /* for progress events */
    int done_count;
} engine;

static void *worker_main(void *arg)
{
    engine *E = arg;
    pthread_mutex_lock(&E->lock);
    for (;;) {
        while (!E->stop && !E->queue_head)
            pthread_cond_wait(&E->work, &E->lock);
        if (E->stop)
            break;
        task *tk = E->queue_head;
        E->queue_head = tk->next_queued;
        if (!E->queue_head)
            E->queue_tail = NULL;
        if (tk->abandoned || tk->live.interrupted) {
            tk->state = T_DONE;
            tk->rc = CS_ECANCELLED;
            E->inflight--;
            pthread_cond_broadcast(&E->done);
            continue;
        }
        tk->state = T_RUNNING;
        tk->started = cs_now();
        pthread_mutex_unlock(&E->lock);

        double t0 = cs_now();
        cs_algorithm *alg = NULL;
        cs_error err;
        cs_error_clear(&err);
        int rc = smt_encode_solve(tk->prob, tk->S, tk->R, &E->cfg, E->opt->instance_time_limit_s,
                                  &tk->live, &alg, &tk->st, &err);
        double vs = 0;
        if (rc == CS_OK) {
            double v0 = cs_now();
            cs_error verr;
            int vrc = algorithm_verify(E->topo, alg, &verr);
            vs = cs_now() - v0;
            if (vrc != CS_OK) {
                rc = cs_error_set(&err, CS_EINTERNAL, "",
                                  "synthesized (S=%d, R=%d, C=%d) algorithm failed verification: %s",
                                  tk->S, tk->R, tk->C, verr.message);
                algorithm_free(alg);
                alg = NULL;
            }
        }
        double secs = cs_now() - t0;

        pthread_mutex_lock(&E->lock);
        if (rc == CS_ECANCELLED && !tk->abandoned && !E->cancelled && !E->timed_out) {
            /* only the main thread's backstop for the instance limit interrupts
             * a task that is neither abandoned nor cancelled */
            rc = cs_error_set(&err, CS_ETIMEOUT, "instance_time_limit_s",
                              "instance (S=%d, R=%d, C=%d) hit its %.3g s time limit", tk->S,
                              tk->R, tk->C, E->opt->instance_time_limit_s);
        }
        tk->rc = rc;
        tk->err = err;
        tk->alg = alg;
        tk->verify_s = vs;
        tk->seconds = secs;
        tk->state = T_DONE;
        E->inflight--;
        pthread_cond_broadcast(&E->done);
    }
    pthread_mutex_unlock(&E->lock);
    return NULL;
}

/* Under E->lock. */
static void interrupt_task(task *tk)
{
    tk->live.interrupted = true;
    if (tk->live.ctx)
        Z3_interrupt(tk->live.ctx);
}

static void cancel_hook(void *arg)
{
    engine *E = arg;
    pthread_mutex_lock(&E->lock);
    E->cancelled = true;
    for (int i = 0; i < E->ntasks; i++)
        if (E->tasks[i]->state != T_DONE)
            interrupt_task(E->tasks[i]);
    pthread_cond_broadcast(&E->done);
    pthread_mutex_unlock(&E->lock);
}

static int engine_start(engine *E, const cs_topology *topo, const cs_collective *coll,
                        const cs_smt_options *opt, cs_error *err)
{
    memset(E, 0, sizeof *E);
    E->cancel_handle = -1;
    E->best_rpc = NAN;
    E->t0 = cs_now();
    pthread_mutex_init(&E->lock, NULL);
    pthread_cond_init(&E->work, NULL);
    pthread_cond_init(&E->done, NULL);
    E->topo = topo;
    E->opt = opt;
    smt_encode_config_default(&E->cfg);
    int rc = collective_copy(&E->coll, coll, err);
    if (rc)
        return rc;
    rc = collective_validate(&E->coll, topo->ranks, err);
    if (rc)
        return rc;
    int n = opt->threads > 0 ? opt->threads : cs_cpu_count();
    if (n > 64)
        n = 64;
    E->threads = calloc((size_t)n, sizeof(pthread_t));
    if (!E->threads)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    E->nthreads = n;
    for (int i = 0; i < n; i++) {
        if (pthread_create(&E->threads[i], NULL, worker_main, E) != 0)
            break;
        E->started_threads++;
    }
    if (E->started_threads == 0)
        return cs_error_set(err, CS_ENOMEM, "threads", "cannot start worker threads");
    E->nthreads = E->started_threads;
    if (opt->cancel) {
        int h = cs_cancel_register(opt->cancel, cancel_hook, E);
        if (h < 0)
            return cs_error_set(err, h, "", "cannot register the cancellation hook");
        E->cancel_handle = h;
    }
    return CS_OK;
}

/* Interrupts whatever still runs and joins the workers: afterwards every
 * task is final and only the main thread touches the engine. */
static void engine_join(engine *E)
{
    if (E->opt && E->opt->cancel && E->cancel_handle >= 0)
        cs_cancel_unregister(E->opt->cancel, E->cancel_handle);
    E->cancel_handle = -1;
    pthread_mutex_lock(&E->lock);
    E->stop = true;
    for (int i = 0; i < E->ntasks; i++)
        if (E->tasks[i]->state != T_DONE)
            interrupt_task(E->tasks[i]);
    pthread_cond_broadcast(&E->work);
    pthread_mutex_unlock(&E->lock);
    for (int i = 0; i < E->started_threads; i++)
        pthread_join(E->threads[i], NULL);
    E->started_threads = 0;
}

static void engine_stop(engine *E)
{
    engine_join(E);
    free(E->threads);
    for (int i = 0; i < E->ntasks; i++) {
        algorithm_free(E->tasks[i]->alg);
        free(E->tasks[i]);
    }
    free(E->tasks);
    for (int i = 0; i < E->nprobs; i++)
        smt_problem_free(E->probs[i]);
    free(E->probs);
    collective_free(&E->coll);
    pthread_cond_destroy(&E->work);
    pthread_cond_destroy(&E->done);
    pthread_mutex_destroy(&E->lock);
}

static int engine_problem(engine *E, int C, const smt_problem **out, cs_error *err)
{
    if (C > E->nprobs) {
        smt_problem **p = realloc(E->probs, sizeof *p * (size_t)C);
        if (!p)
            return cs_error_set(err, CS_ENOMEM, "", "out of memory");
        for (int i = E->nprobs; i < C; i++)
            p[i] = NULL;
        E->probs = p;
        E->nprobs = C;
    }
    if (!E->probs[C - 1]) {
        int rc = smt_problem_build(E->topo, &E->coll, C, &E->probs[C - 1], err);
        if (rc)
            return rc;
    }
    *out = E->probs[C - 1];
    return CS_OK;
}

/* Main thread only (the table is only appended to by it; workers touch tasks
 * they were given). */
static task *engine_find(engine *E, int S, int R, int C)
{
    for (int i = 0; i < E->ntasks; i++)
        if (E->tasks[i]->S == S && E->tasks[i]->R == R && E->tasks[i]->C == C)
            return E->tasks[i];
    return NULL;
}

static task *engine_get(engine *E, int S, int R, int C, cs_error *err)
{
    task *tk = engine_find(E, S, R, C);
    if (tk)
        return tk;
    const smt_problem *prob = NULL;
    if (engine_problem(E, C, &prob, err))
        return NULL;
    tk = calloc(1, sizeof *tk);
    if (!tk) {
        cs_error_set(err, CS_ENOMEM, "", "out of memory");
        return NULL;
    }
    tk->S = S;
    tk->R = R;
    tk->C = C;
    tk->prob = prob;
    tk->live.lock = &E->lock;
    tk->state = T_PENDING;
    pthread_mutex_lock(&E->lock);
    if (E->ntasks == E->cap) {
        int cap = E->cap ? E->cap * 2 : 32;
        task **t = realloc(E->tasks, sizeof *t * (size_t)cap);
        if (!t) {
            pthread_mutex_unlock(&E->lock);
            free(tk);
            cs_error_set(err, CS_ENOMEM, "", "out of memory");
            return NULL;
        }
        E->tasks = t;
        E->cap = cap;
    }
    E->tasks[E->ntasks++] = tk;
    pthread_mutex_unlock(&E->lock);
    return tk;
}

/* Infers UNSAT from a finished UNSAT (S, m*R.., m*C). Main thread; takes the
 * lock because workers write a task's state and rc while it runs. */
static bool engine_infer_unsat(engine *E, int S, int R, int C)
{
    bool unsat = false;
    pthread_mutex_lock(&E->lock);
    for (int i = 0; i < E->ntasks && !unsat; i++) {
        task *o = E->tasks[i];
        if (o->S != S || o->state != T_DONE || o->rc != CS_EUNSAT || o->C % C)
            continue;
        int m = o->C / C;
        if (o->R >= (long)m * R)
            unsat = true;
    }
    pthread_mutex_unlock(&E->lock);
    return unsat;
}

/* Under lock. */
static void engine_enqueue(engine *E, task *tk)
{
    tk->state = T_QUEUED;
    tk->next_queued = NULL;
    if (E->queue_tail)
        E->queue_tail->next_queued = tk;
    else
        E->queue_head = tk;
    E->queue_tail = tk;
    E->inflight++;
    pthread_cond_signal(&E->work);
}

static const char *outcome_name(const task *tk)
{
    if (tk->inferred)
        return "unsat";
    switch (tk->rc) {
    case CS_OK: return "sat";
    case CS_EUNSAT: return "unsat";
    case CS_ETIMEOUT: return "timeout";
    case CS_ECANCELLED: return "cancelled";
    default: return "error";
    }
}

static void report(engine *E, task *tk)
{
    if (tk->reported)
        return;
    tk->reported = true;
    E->done_count++;
    if (tk->rc == CS_OK) {
        double rpc = (double)tk->R / tk->C;
        if (isnan(E->best_rpc) || rpc < E->best_rpc)
            E->best_rpc = rpc;
    }
    if (!E->opt->progress)
        return;
    if (tk->rc == CS_ECANCELLED && tk->abandoned)
        return; /* speculation we no longer needed */
    char msg[200];
    snprintf(msg, sizeof msg, "smt S=%d R=%d C=%d: %s%s in %.3f s", tk->S, tk->R, tk->C,
             outcome_name(tk), tk->inferred ? " (inferred)" : "", tk->seconds);
    cs_progress_event ev;
    memset(&ev, 0, sizeof ev);
    ev.method = "smt";
    ev.outcome = outcome_name(tk);
    ev.message = msg;
    ev.steps = tk->S;
    ev.rounds = tk->R;
    ev.chunks = tk->C;
    ev.seconds = tk->seconds;
    ev.elapsed = cs_now() - E->t0;
    ev.done = E->done_count;
    ev.total = 0;
    ev.best = E->best_rpc;
    E->opt->progress(E->opt->progress_ctx, &ev);
}

/* Waits up to 50 ms for a completion; handles the total time limit and
 * re-sends interrupts.  Main thread. */
static void engine_wait(engine *E)
{
    pthread_mutex_lock(&E->lock);
    struct timespec ts = cs_deadline_after(0.05);
    pthread_cond_timedwait(&E->done, &E->lock, &ts);
    double now = cs_now();
    if (E->opt->total_time_limit_s > 0 && now - E->t0 >= E->opt->total_time_limit_s &&
        !E->timed_out) {
        E->timed_out = true;
    }
    double lim = E->opt->instance_time_limit_s;
    for (int i = 0; i < E->ntasks; i++) {
        task *tk = E->tasks[i];
        if (tk->state == T_DONE)
            continue;
        if (E->timed_out || E->cancelled)
            tk->live.interrupted = true;
        /* Z3's own timeout normally fires first; this is the backstop */
        if (lim > 0 && tk->state == T_RUNNING && now - tk->started > lim + 1.0)
            tk->live.interrupted = true;
        if (tk->live.interrupted && tk->live.ctx)
            Z3_interrupt(tk->live.ctx);
    }
    pthread_mutex_unlock(&E->lock);
}

static bool engine_should_stop(engine *E)
{
    if (cs_cancel_requested(E->opt->cancel))
        E->cancelled = true;
    return E->cancelled || E->timed_out;
}

/* Abandons a task still queued or running (main thread). */
static void engine_abandon(engine *E, task *tk)
{
    pthread_mutex_lock(&E->lock);
    if (tk->state == T_QUEUED || tk->state == T_RUNNING) {
        tk->abandoned = true;
        interrupt_task(tk);
    }
    pthread_mutex_unlock(&E->lock);
}

static void engine_dispatch(engine *E, task *tk)
{
    pthread_mutex_lock(&E->lock);
    if (tk->state == T_PENDING)
        engine_enqueue(E, tk);
    pthread_mutex_unlock(&E->lock);
}

static int engine_free_slots(engine *E)
{
    pthread_mutex_lock(&E->lock);
    int n = E->nthreads - E->inflight;
    pthread_mutex_unlock(&E->lock);
    return n;
}

static int task_state(engine *E, task *tk)
{
    pthread_mutex_lock(&E->lock);
    int s = tk->state;
    pthread_mutex_unlock(&E->lock);
    return s;
}

/* Adds a task's figures to the stats array. */
static void stats_add(json_t *arr, const task *tk)
{
    json_t *o = json_object();
    json_object_set_new(o, "steps", json_integer(tk->S));
    json_object_set_new(o, "rounds", json_integer(tk->R));
    json_object_set_new(o, "chunks", json_integer(tk->C));
    const char *res = tk->abandoned && tk->rc == CS_ECANCELLED ? "abandoned" : outcome_name(tk);
    json_object_set_new(o, "result", json_string(res));
    if (tk->inferred)
        json_object_set_new(o, "inferred", json_true());
    json_object_set_new(o, "seconds", json_real(tk->seconds));
    json_object_set_new(o, "z3_seconds", json_real(tk->st.z3_s));
    json_object_set_new(o, "own_seconds",
                        json_real(tk->st.encode_s + tk->st.extract_s + tk->verify_s));
    json_object_set_new(o, "variables", json_integer(tk->st.vars));
    json_object_set_new(o, "constraints", json_integer(tk->st.constraints));
    json_array_append_new(arr, o);
}

static json_t *engine_stats(engine *E, double wall)
{
    json_t *st = json_object();
    json_t *arr = json_array();
    double z3 = 0, own = 0;
    int solved = 0, inferred = 0, abandoned = 0;
    for (int i = 0; i < E->ntasks; i++) {
        task *tk = E->tasks[i];
        if (tk->state != T_DONE)
            continue;
        stats_add(arr, tk);
        z3 += tk->st.z3_s;
        own += tk->st.encode_s + tk->st.extract_s + tk->verify_s;
        if (tk->inferred)
            inferred++;
        else if (tk->abandoned)
            abandoned++;
        else
            solved++;
    }
    json_object_set_new(st, "instances", arr);
    json_object_set_new(st, "solved", json_integer(solved));
    json_object_set_new(st, "inferred", json_integer(inferred));
    json_object_set_new(st, "abandoned", json_integer(abandoned));
    json_object_set_new(st, "z3_seconds", json_real(z3));
    json_object_set_new(st, "own_seconds", json_real(own));
    json_object_set_new(st, "wall_seconds", json_real(wall));
    json_object_set_new(st, "threads", json_integer(E->nthreads));
    json_object_set_new(st, "encoding",
                        json_string("order-encoded time, Boolean sends, PB bandwidth (Z3 QF_FD, "
                                    "pb.solver=sorting), chunk symmetry breaking"));
    return st;
}

/* ---- one search (non-combining collective on the topology it is encoded on) --------- */

void smt_frontier_free(smt_frontier *f)
{
    for (int i = 0; i < f->n; i++)
        algorithm_free(f->algs[i]);
    free(f->algs);
    json_decref(f->stats);
    memset(f, 0, sizeof *f);
}

int smt_frontier_push(smt_frontier *f, cs_algorithm *a)
{
    cs_algorithm **n = realloc(f->algs, sizeof *n * (size_t)(f->n + 1));
    if (!n)
        return CS_ENOMEM;
    f->algs = n;
    f->algs[f->n++] = a;
    return CS_OK;
}

typedef struct cand {
    int R, C;
} cand;

static int cand_cmp(const void *pa, const void *pb)
{
    const cand *a = pa, *b = pb;
    int c = smt_rcmp(a->R, a->C, b->R, b->C);
    if (c)
        return c;
    return a->C - b->C;
}

/* Candidates for S with bound <= R/C < (lim_num/lim_den) (lim_den == 0: no
 * upper limit).  Returns the count; *out is malloc'd. */
static int candidates(const cs_smt_options *opt, const cs_bounds *b, int S, long lim_num,
                      long lim_den, cand **out)
{
    int n = 0;
    cand *c = malloc(sizeof *c * (size_t)((opt->k + 1) * opt->max_chunks + 1));
    if (!c)
        return -1;
    for (int R = S; R <= S + opt->k; R++)
        for (int C = 1; C <= opt->max_chunks; C++) {
            if (smt_rcmp(R, C, b->rpc_num, b->rpc_den) < 0)
                continue;
            if (lim_den > 0 && smt_rcmp(R, C, lim_num, lim_den) >= 0)
                continue;
            c[n].R = R;
            c[n].C = C;
            n++;
        }
    qsort(c, (size_t)n, sizeof *c, cand_cmp);
    *out = c;
    return n;
}

/* Runs the Pareto search (or the single instance in opt) for a non-combining
 * collective.  On CS_OK, f holds the frontier (possibly empty when limits cut
 * the search short). */
int smt_run_search(const cs_topology *topo, const cs_collective *coll, const cs_bounds *b,
                   const cs_smt_options *opt, smt_frontier *f, cs_error *err)
{
    memset(f, 0, sizeof *f);
    engine E;
    int rc = engine_start(&E, topo, coll, opt, err);
    if (rc) {
        engine_stop(&E);
        return rc;
    }
    bool single = opt->steps > 0;
    bool incomplete = false;
    cand *cur = NULL, *next = NULL;

    if (single) {
        task *tk = engine_get(&E, opt->steps, opt->rounds, opt->chunks, err);
        if (!tk) {
            rc = err ? err->code : CS_ENOMEM;
            goto out;
        }
        engine_dispatch(&E, tk);
        while (task_state(&E, tk) != T_DONE) {
            if (engine_should_stop(&E))
                engine_abandon(&E, tk);
            engine_wait(&E);
        }
        report(&E, tk);
        if (tk->rc == CS_OK) {
            rc = smt_frontier_push(f, tk->alg);
            if (rc == CS_OK)
                tk->alg = NULL;
            f->complete = true;
        } else {
            rc = tk->rc;
            if (E.cancelled)
                rc = cs_error_set(err, CS_ECANCELLED, "", "cancelled");
            else if (E.timed_out)
                rc = cs_error_set(err, CS_ETIMEOUT, "total_time_limit_s",
                                  "total time limit of %.3g s reached",
                                  opt->total_time_limit_s);
            else if (err)
                *err = tk->err;
        }
        goto out;
    }

    cs_smt_options copt = *opt;
    if (coll->kind == CS_COLL_CUSTOM)
        copt.max_chunks = 1; /* G is fixed: more "chunks" would only rename R/C */
    opt = &copt;
    int max_steps = opt->max_steps > 0 ? opt->max_steps : b->steps + 8;
    long lim_num = 0, lim_den = 0; /* R/C of the last frontier point */
    bool reached_bound = false;
    int S = b->steps > 0 ? b->steps : 1;
    for (; S <= max_steps && !reached_bound; S++) {
        free(cur);
        cur = NULL;
        int ncur = candidates(opt, b, S, lim_num, lim_den, &cur);
        if (ncur < 0) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
        task **tk = calloc((size_t)ncur + 1, sizeof *tk);
        if (!tk) {
            rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
            goto out;
        }
        for (int i = 0; i < ncur; i++) {
            tk[i] = engine_get(&E, S, cur[i].R, cur[i].C, err);
            if (!tk[i]) {
                free(tk);
                rc = err ? err->code : CS_ENOMEM;
                goto out;
            }
        }
        int found = -1;
        int i = 0;
        while (i < ncur && found < 0) {
            if (engine_should_stop(&E))
                break;
            task *t = tk[i];
            int st = task_state(&E, t);
            if (st == T_PENDING && engine_infer_unsat(&E, S, t->R, t->C)) {
                pthread_mutex_lock(&E.lock);
                t->state = T_DONE;
                t->inferred = true;
                t->rc = CS_EUNSAT;
                pthread_mutex_unlock(&E.lock);
            }
            st = task_state(&E, t);
            if (st == T_DONE) {
                report(&E, t);
                if (t->rc == CS_OK) {
                    found = i;
                } else if (t->rc == CS_EUNSAT) {
                    i++;
                } else if (t->rc == CS_ETIMEOUT) {
                    incomplete = true;
                    i++;
                } else if (t->rc == CS_ECANCELLED) {
                    if (t->abandoned && !E.cancelled && !E.timed_out) {
                        /* abandoned earlier, needed now: run it again */
                        pthread_mutex_lock(&E.lock);
                        t->abandoned = false;
                        t->reported = false;
                        t->live.interrupted = false;
                        t->state = T_PENDING;
                        pthread_mutex_unlock(&E.lock);
                        E.done_count--;
                        continue;
                    }
                    break;
                } else {
                    rc = t->rc;
                    if (err)
                        *err = t->err;
                    free(tk);
                    goto out;
                }
                continue;
            }
            /* fill free workers: this S first, then the safe prefix of S+1 */
            int slots = engine_free_slots(&E);
            for (int j = i; j < ncur && slots > 0; j++) {
                if (task_state(&E, tk[j]) != T_PENDING)
                    continue;
                if (engine_infer_unsat(&E, S, tk[j]->R, tk[j]->C))
                    continue;
                engine_dispatch(&E, tk[j]);
                slots--;
            }
            if (slots > 0 && S + 1 <= max_steps) {
                free(next);
                next = NULL;
                int nn = candidates(opt, b, S + 1, cur[i].R, cur[i].C, &next);
                for (int j = 0; j < nn && slots > 0; j++) {
                    task *o = engine_get(&E, S + 1, next[j].R, next[j].C, err);
                    if (!o) {
                        free(tk);
                        rc = err ? err->code : CS_ENOMEM;
                        goto out;
                    }
                    if (task_state(&E, o) != T_PENDING)
                        continue;
                    engine_dispatch(&E, o);
                    slots--;
                }
            }
            if (task_state(&E, t) != T_DONE)
                engine_wait(&E);
        }
        if (found >= 0) {
            /* later candidates of this S are no longer needed */
            for (int j = found + 1; j < ncur; j++)
                engine_abandon(&E, tk[j]);
            task *t = tk[found];
            pthread_mutex_lock(&E.lock);
            cs_algorithm *a = t->alg;
            t->alg = NULL;
            pthread_mutex_unlock(&E.lock);
            if (smt_frontier_push(f, a)) {
                algorithm_free(a);
                free(tk);
                rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
                goto out;
            }
            lim_num = t->R;
            lim_den = t->C;
            if (smt_rcmp(t->R, t->C, b->rpc_num, b->rpc_den) == 0)
                reached_bound = true;
            /* S+1 speculation with R/C >= this point is useless now */
            for (int j = 0; j < E.ntasks; j++) {
                task *o = E.tasks[j];
                if (o->S == S + 1 && smt_rcmp(o->R, o->C, lim_num, lim_den) >= 0)
                    engine_abandon(&E, o);
            }
        }
        free(tk);
        if (engine_should_stop(&E))
            break;
    }
    if (E.cancelled) {
        rc = cs_error_set(err, CS_ECANCELLED, "", "cancelled");
        goto out;
    }
    f->complete = reached_bound && !incomplete && !E.timed_out;
    if (!f->complete && f->n == 0 && E.timed_out) {
        rc = cs_error_set(err, CS_ETIMEOUT, "total_time_limit_s",
                          "total time limit of %.3g s reached before any algorithm was found",
                          opt->total_time_limit_s);
        goto out;
    }
    rc = CS_OK;
out:
    free(cur);
    free(next);
    engine_join(&E);
    if (rc == CS_OK)
        f->stats = engine_stats(&E, cs_now() - E.t0);
    engine_stop(&E);
    if (rc != CS_OK)
        smt_frontier_free(f);
    return rc;
}

int smt_run_checks(const cs_topology *topo, const cs_collective *coll, const smt_check *chk,
                   int n, const cs_smt_options *opt, int *sat, json_t **stats, cs_error *err)
{
    *sat = -1;
    if (stats)
        *stats = NULL;
    engine E;
    int rc = engine_start(&E, topo, coll, opt, err);
    if (rc) {
        engine_stop(&E);
        return rc;
    }
    task **tk = calloc((size_t)(n > 0 ? n : 1), sizeof *tk);
    if (!tk) {
        rc = cs_error_set(err, CS_ENOMEM, "", "out of memory");
        goto out;
    }
    for (int i = 0; i < n; i++) {
        tk[i] = engine_get(&E, chk[i].S, chk[i].R, chk[i].C, err);
        if (!tk[i]) {
            rc = err ? err->code : CS_ENOMEM;
            goto out;
        }
        engine_dispatch(&E, tk[i]);
    }
    /* every instance must be UNSAT; the first SAT or undecided one ends it */
    for (;;) {
        if (engine_should_stop(&E))
            break;
        int pending = 0;
        bool ended = false;
        for (int i = 0; i < n && !ended; i++) {
            task *t = tk[i];
            if (task_state(&E, t) != T_DONE) {
                pending++;
                continue;
            }
            if (t->reported)
                continue;
            report(&E, t);
            if (t->rc == CS_OK) {
                *sat = i;
                ended = true;
            } else if (t->rc != CS_EUNSAT) {
                rc = t->rc;
                if (err)
                    *err = t->err;
                ended = true;
            }
        }
        if (ended || pending == 0)
            break;
        engine_wait(&E);
    }
    for (int i = 0; i < n; i++)
        engine_abandon(&E, tk[i]);
    if (E.cancelled)
        rc = cs_error_set(err, CS_ECANCELLED, "", "cancelled");
    else if (rc == CS_OK && *sat < 0 && E.timed_out)
        rc = cs_error_set(err, CS_ETIMEOUT, "total_time_limit_s",
                          "total time limit of %.3g s reached", opt->total_time_limit_s);
out:
    free(tk);
    engine_join(&E);
    if (stats && (rc == CS_OK || rc == CS_ETIMEOUT))
        *stats = engine_stats(&E, cs_now() - E.t0);
    engine_stop(&E);
    return rc;
}
