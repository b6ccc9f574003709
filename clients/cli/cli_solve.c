/*
 * cli_solve.c - `collsynth solve TOPO COLLECTIVE [--method M] ...`: synthesize
 * offline, in this process, through the same dispatcher as the daemon
 * (synthesize.h): the options become a request document, the request is
 * parsed and validated by synth_request_from_json (so the CLI and the service
 * accept the same things, mean the same defaults and compute the same key),
 * and synth_run runs it.  The method is `auto` unless --method says
 * otherwise: SMT for instances it can handle, TACOS for larger ones, with
 * the reason printed.
 *
 * Output: a frontier table for SMT and baseline results (S, R, C, R/C, the
 * optimality label, the alpha-beta cost at a few sizes, the simulated time
 * and ratio_to_bound), the TACOS summary (cli_tacos.h) for TACOS results;
 * --json prints, and -o/--output writes, the result document (the service's
 * form, with the topology in full so a topology file needs nothing else).
 *
 * Progress: on a terminal (or with --progress) a status line with the
 * elapsed time and the latest event is redrawn four times a second, for
 * every method, so a long synthesis is never silent; SMT instances are also
 * printed one per line (on a terminal or not) unless --quiet.
 *
 * --format msccl-xml|cuda synthesizes into a temporary result document and
 * then runs `collsynth codegen` on it with the code-generation options, so
 * algorithm selection (--index, --size) and generation live in one place.
 * The human report then goes to stderr, keeping stdout for the code.
 *
 * Exit codes: 0 an algorithm was found, 1 none exists / none found within
 * the limits, 2 bad usage or input, 3 internal error.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <unistd.h>

#include "cli.h"
#include "cli_mcf.h"
#include "cli_tacos.h"
#include "smt.h"
#include "synthesize.h"

static const char *const CMD = "solve";

static void solve_usage(FILE *f)
{
    fprintf(f,
            "Usage: collsynth solve TOPO COLLECTIVE [--method M] [OPTIONS]\n"
            "\n"
            "Synthesizes algorithms for COLLECTIVE on TOPO, in this process, with the\n"
            "daemon's dispatcher: the same methods, defaults and request key.\n"
            "\n"
            "  TOPO                  builtin name (dgx1, ring:8, ...) or Topology JSON file\n"
            "  COLLECTIVE            allgather, reducescatter, allreduce, broadcast, reduce,\n"
            "                        gather, scatter, alltoall, KIND:ROOT (broadcast:3), or\n"
            "                        a collective JSON document or file\n"
            "Methods (--method M):\n"
            "  auto (default)        SMT when the instance is small enough (<= 16 ranks and\n"
            "                        a bounded encoding), with a 30 s budget (--time-limit);\n"
            "                        TACOS otherwise or when SMT finds nothing; `reason`\n"
            "                        says which ran and why\n"
            "  smt                   the exact Pareto frontier of k-synchronous algorithms\n"
            "                        (steps S vs rounds per chunk R/C) with Z3\n"
            "  tacos                 greedy time-expanded matching, any size\n"
            "  hierarchical          clusters (groups joined by switched rails, one fabric\n"
            "                        switch or a ring of nodes): allgather, reducescatter,\n"
            "                        allreduce, broadcast, reduce, alltoall (not on rings),\n"
            "                        scatter, gather; composed from SMT node trees and an\n"
            "                        exchange of node blocks, pipelined (auto picks it for\n"
            "                        clusters too large for SMT)\n"
            "  mcf                   TE-CCL's flow over time: an LP (CLP) for alltoall,\n"
            "                        scatter, gather and pairwise custom demands, a MILP\n"
            "                        (CBC) with copy for the others; auto runs it first for\n"
            "                        alltoall and custom demands that fit its budget\n"
            "  BASELINE              a hand-designed algorithm (collsynth baselines)\n"
            "SMT options (smt, auto):\n"
            "  --k N                 candidates with S <= R <= S + N (default: 4, widened\n"
            "                        while a point with fewer steps may exist; an explicit\n"
            "                        --k is kept)\n"
            "  --max-chunks N        largest C tried (default 8)\n"
            "  --max-steps N         largest S tried (default: steps bound + 8)\n"
            "  --steps S --rounds R --chunks C\n"
            "                        decide this one instance instead of searching\n"
            "  --time-limit SEC      stop the whole search after SEC seconds (auto: the\n"
            "                        SMT budget before TACOS takes over)\n"
            "  --instance-time-limit SEC\n"
            "                        give up on one instance after SEC seconds\n"
            "  --max-ranks N         refuse larger topologies (default %d)\n"
            "TACOS options (tacos, auto):\n"
            "  --chunks N            chunks per rank (default 1)\n"
            "  --trials N            randomized trials, the best kept (default 4)\n"
            "  --seed N              random seed\n"
            "  --switch-degree D     ports per switch when unwinding switches\n"
            "  --stats-only          do not keep the sends (very large topologies)\n"
            "mcf options (mcf, auto):\n"
            "  --chunks N            chunks per rank share (alltoall: per pair; default 1)\n"
            "  --max-chunks N        also every chunking up to N (a frontier over chunkings)\n"
            "  --min-chunks N        the best of chunkings N..chunks of the same bytes\n"
            "                        (default 1; = --chunks: that chunking only)\n"
            "  --astar N             A* rounds: 1 always, -1 never, 0 for pairwise demands\n"
            "                        whose full model is too large (default)\n"
            "  --astar-epochs R      epochs per A* round (default 8)\n"
            "  --zero-buffer         copy-capable switch nodes hold nothing: a copy leaves\n"
            "                        as its chunk arrives (TE-CCL's switch buffer of zero)\n"
            "  --epochs K            horizon (default: the smallest the LP allows)\n"
            "  --epoch-split N       epoch = fastest link's chunk time / N (default 1)\n"
            "  --gap G               stop the MILP at relative gap G (0.3 = 30%%)\n"
            "  --time-limit SEC      (mcf) the whole synthesis\n"
            "  --size BYTES          the per-rank share the chunks are timed with\n"
            "Baselines: --chunks N.\n"
            "Every method:\n"
            "  --root R              root of broadcast, reduce, gather, scatter (default 0)\n"
            "  --size BYTES          per-rank share for ratio_to_bound (default 64MiB; TACOS\n"
            "                        also times its chunks with it)\n"
            "  --threads N           threads (default: CPU count)\n"
            "  --json                print the result document instead of the report\n"
            "  -o, --output FILE     write the result document to FILE (verify, simulate\n"
            "                        and codegen read it)\n"
            "  --quiet               no progress on stderr\n"
            "  --progress            the progress line even when stderr is not a terminal\n"
            "  --format F            msccl-xml or cuda: print the generated code instead;\n"
            "                        takes the options of `collsynth codegen` (--runtime,\n"
            "                        --index, --size, --min-bytes, --max-bytes, --elem, -o);\n"
            "                        implies --codegen F\n"
            "  --codegen F           msccl-xml, cuda or none (default): the result will be\n"
            "                        generated as F, so auto and mcf use copy-capable\n"
            "                        switches as unicast (code cannot copy in a switch)\n"
            "\n"
            "Exit status: 0 found, 1 no algorithm exists (or none within the limits),\n"
            "2 usage or input error, 3 internal error.\n",
            CS_SMT_DEFAULT_MAX_RANKS);
}

/* ---- progress ----------------------------------------------------------------------- */

/* Events come from worker threads (TACOS trials) and the search's main
 * thread; the ticker redraws the status line so the elapsed time moves even
 * while one long SMT instance or TACOS trial runs. */
typedef struct progress {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t ticker;
    bool ticking, stop;
    bool status_line;  /* redraw "\r[elapsed] last event" */
    bool smt_lines;    /* one line per SMT instance */
    bool drawn;
    double t0;
    char last[256];
} progress;

static void draw_locked(progress *p)
{
    fprintf(stderr, "\r\033[K[%7.1fs] %s", cs_now() - p->t0, p->last);
    fflush(stderr);
    p->drawn = true;
}

static void clear_locked(progress *p)
{
    if (p->drawn) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
    p->drawn = false;
}

static void progress_event(void *ctx, const cs_progress_event *ev)
{
    progress *p = ctx;
    pthread_mutex_lock(&p->mu);
    bool smt = ev->method && !strcmp(ev->method, "smt");
    if (smt && p->smt_lines) {
        clear_locked(p);
        fprintf(stderr, "[%7.2fs] S=%-3d R=%-3d C=%-3d %-9s %.3f s\n", ev->elapsed, ev->steps,
                ev->rounds, ev->chunks, ev->outcome, ev->seconds);
    }
    if (ev->total > 0)
        snprintf(p->last, sizeof p->last, "%s (%d/%d)", ev->message ? ev->message : "",
                 ev->done, ev->total);
    else
        snprintf(p->last, sizeof p->last, "%s", ev->message ? ev->message : "");
    if (p->status_line)
        draw_locked(p);
    pthread_mutex_unlock(&p->mu);
}

static void *ticker_main(void *arg)
{
    progress *p = arg;
    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        struct timespec ts = cs_deadline_after(0.25);
        pthread_cond_timedwait(&p->cv, &p->mu, &ts);
        if (!p->stop)
            draw_locked(p);
    }
    clear_locked(p);
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void progress_start(progress *p, bool status_line, bool smt_lines, const char *what)
{
    memset(p, 0, sizeof *p);
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->status_line = status_line;
    p->smt_lines = smt_lines;
    p->t0 = cs_now();
    snprintf(p->last, sizeof p->last, "%s", what);
    if (status_line) {
        pthread_mutex_lock(&p->mu);
        draw_locked(p);
        pthread_mutex_unlock(&p->mu);
        p->ticking = pthread_create(&p->ticker, NULL, ticker_main, p) == 0;
    }
}

static void progress_stop(progress *p)
{
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cv);
    if (!p->ticking)
        clear_locked(p);
    pthread_mutex_unlock(&p->mu);
    if (p->ticking)
        pthread_join(p->ticker, NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
}

/* ---- the report ---------------------------------------------------------------------- */

/* Seconds of the instance that produced a (S, R, C) point, or NAN. */
static double instance_seconds(const cs_result *r, int S, int R, int C)
{
    json_t *inst = r->stats ? json_object_get(r->stats, "instances") : NULL;
    for (size_t i = 0; i < json_array_size(inst); i++) {
        json_t *e = json_array_get(inst, i);
        const char *res = json_string_value(json_object_get(e, "result"));
        if (json_integer_value(json_object_get(e, "steps")) == S &&
            json_integer_value(json_object_get(e, "rounds")) == R &&
            json_integer_value(json_object_get(e, "chunks")) == C && res && !strcmp(res, "sat"))
            return json_number_value(json_object_get(e, "seconds"));
    }
    return NAN;
}

/* What the table's algorithms are: a decided instance, a frontier complete
 * in its class (k, max chunks), a partial one, or another method's result. */
static void describe_result(char *buf, size_t n, const cs_result *r)
{
    json_t *st = r->stats;
    bool smt = !strcmp(r->method, "smt");
    if (smt && json_is_true(json_object_get(st, "single_instance"))) {
        snprintf(buf, n, "one instance decided: %s",
                 r->nalgs > 0 ? "an algorithm exists" : "no algorithm");
    } else if (smt) {
        long long k = json_integer_value(json_object_get(st, "k"));
        long long mc = json_integer_value(json_object_get(st, "max_chunks"));
        snprintf(buf, n, "%s frontier (k=%lld, C<=%lld)", r->complete ? "complete" : "partial",
                 k, mc);
    } else {
        snprintf(buf, n, "%s: %d algorithm%s", r->method, r->nalgs, r->nalgs == 1 ? "" : "s");
    }
}

static void print_table(FILE *f, const cs_result *r, const cs_topology *t,
                        const cs_collective *c, double bound_bytes)
{
    static const double sizes[] = {1024.0, 1048576.0, 1073741824.0};
    char what[160];
    describe_result(what, sizeof what, r);
    fprintf(f, "%s on %s (%d ranks): bounds S >= %d, R/C >= %.4g; %s, %.3f s\n",
            collective_kind_name(c->kind), t->name, t->ranks, r->bound_steps,
            r->bound_rounds_per_chunk, what, r->synth_seconds);
    cs_time_bound tb;
    bool have_bound = collective_time_bound(t, c, &tb, NULL) == CS_OK;
    if (have_bound)
        cli_print_time_bound(f, "", &tb, bound_bytes, 1);
    char simhead[32], size[24];
    cs_format_size(size, sizeof size, bound_bytes);
    snprintf(simhead, sizeof simhead, "sim@%s", size);
    fprintf(f, "%4s %4s %4s %8s  %-9s  %10s %10s %10s  %10s %6s  %9s\n", "S", "R", "C", "R/C",
            "optimal", "cost@1KiB", "cost@1MiB", "cost@1GiB", simhead, "ratio", "synth");
    for (int i = 0; i < r->nalgs; i++) {
        const cs_algorithm *a = r->algs[i];
        char cost[3][32];
        for (int k = 0; k < 3; k++)
            cli_fmt_us(cost[k], sizeof cost[k], algorithm_cost_us(a, t, sizes[k]));
        int S = a->steps, R = a->rounds, C = a->chunks;
        double secs = instance_seconds(r, S, R, C);
        if (isnan(secs) && c->kind == CS_COLL_ALLREDUCE && t->ranks > 0)
            secs = instance_seconds(r, S / 2, R / 2, C / t->ranks);
        char tbuf[32];
        if (isnan(secs))
            snprintf(tbuf, sizeof tbuf, "-");
        else
            snprintf(tbuf, sizeof tbuf, "%.3fs", secs);
        /* ratio_to_bound: the bound over the simulated time at bound_bytes */
        char sim[32] = "-", ratio[16] = "-";
        cs_bound_ratio br;
        if (have_bound && synth_ratio_to_bound(t, &tb, a, bound_bytes, &br, NULL) == CS_OK) {
            cli_fmt_us(sim, sizeof sim, br.simulated_us);
            snprintf(ratio, sizeof ratio, "%.3f", br.ratio);
        }
        fprintf(f, "%4d %4d %4d %8.4f  %-9s  %10s %10s %10s  %10s %6s  %9s\n", S, R, C,
                C > 0 ? (double)R / C : 0.0, a->optimality[0] ? a->optimality : "-", cost[0],
                cost[1], cost[2], sim, ratio, tbuf);
    }
    if (r->nalgs == 0)
        fprintf(f, "(no algorithm found within the limits)\n");
    else
        fprintf(f, "ratio = time bound / simulated time at %s (ratio_to_bound, <= 1)\n", size);
    if (r->stats && json_object_get(r->stats, "solved")) {
        fprintf(f, "instances: %lld solved, %lld inferred; z3 %.3f s, own code %.3f s\n",
                (long long)json_integer_value(json_object_get(r->stats, "solved")),
                (long long)json_integer_value(json_object_get(r->stats, "inferred")),
                json_number_value(json_object_get(r->stats, "z3_seconds")),
                json_number_value(json_object_get(r->stats, "own_seconds")));
    }
}

/* The result document: the service's (synth_result_to_json: key, reason, the
 * time bound and every ratio_to_bound), with the topology in full, streamed
 * so a large frontier is never built as a JSON tree. */
static int write_result(const cs_synth_request *req, const cs_result *r, const char *out_path)
{
    cs_error err;
    cs_error_clear(&err);
    json_t *skel = synth_result_to_json_frame(req, r);
    if (skel)
        json_object_set_new(skel, "topology", topology_to_json(req->topology));
    cs_result_writer *w = NULL;
    cs_json_view jv = CS_JSON_VIEW_FULL;
    int rc = skel ? result_writer_open_memory(r, skel, &jv, &w, &err)
                  : cs_error_set(&err, CS_ENOMEM, "", "out of memory");
    long nsends = 0;
    for (int i = 0; i < r->nalgs; i++)
        nsends += r->algs[i]->nsends;
    int code = rc ? cli_report_error(CMD, "output", rc, &err)
                  : cli_write_streamed(CMD, w, nsends, out_path);
    result_writer_free(w);
    json_decref(skel);
    return code;
}

/* ---- options ------------------------------------------------------------------------- */

enum { M_SMT = 1, M_TACOS = 2, M_BASELINE = 4, M_MCF = 8, M_HIER = 16 };

typedef struct solve_args {
    const char *topo_spec, *coll_spec, *method, *out_path;
    bool as_json, quiet, force_progress, stats_only, have_size;
    int root, threads, max_ranks, chunks;
    double time_limit_s, size;
    json_t *smt, *tacos, *mcf;  /* the method options given, by method */
    const char *codegen;  /* --codegen: options.codegen of the request, NULL none given */
    int used;             /* the methods every option given applies to (AND) */
    const char *narrow;   /* the first option that does not apply to every method */
} solve_args;

static int int_opt(const char *name, const char *v, int lo, int *out)
{
    if (!cli_parse_int(v, out) || *out < lo)
        return cli_usage_error(CMD, "%s must be an integer >= %d (got '%s')", name, lo, v);
    return CLI_EXIT_OK;
}

static int seconds_opt(const char *name, const char *v, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !isfinite(d) || d < 0)
        return cli_usage_error(CMD, "%s must be a number of seconds >= 0 (got '%s')", name, v);
    *out = d;
    return CLI_EXIT_OK;
}

/* Records that option `name` applies only to `methods`. */
static void applies(solve_args *a, const char *name, int methods)
{
    if ((a->used & methods) != a->used && !a->narrow)
        a->narrow = name;
    a->used &= methods;
}

static int parse_args(int argc, char **argv, solve_args *a)
{
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m, rc = CLI_EXIT_OK, x = 0;
        double d = 0;
#define OPT(name) ((m = cli_option(CMD, argc, argv, &i, name, &v)) != 0)
#define NEED()                                                                                    \
    do {                                                                                          \
        if (m < 0)                                                                                \
            return CLI_EXIT_USAGE;                                                                \
    } while (0)
#define SMT_INT(name, key, lo)                                                                    \
    do {                                                                                          \
        NEED();                                                                                   \
        if ((rc = int_opt(name, v, lo, &x)) == CLI_EXIT_OK)                                       \
            json_object_set_new(a->smt, key, json_integer(x));                                    \
        applies(a, name, M_SMT);                                                                  \
    } while (0)
        if (OPT("--method")) {
            NEED();
            a->method = v;
        } else if (OPT("--k")) {
            SMT_INT("--k", "k", 0);
        } else if (OPT("--max-chunks")) {
            NEED();
            if ((rc = int_opt("--max-chunks", v, 1, &x)) == CLI_EXIT_OK) {
                json_object_set_new(a->smt, "max_chunks", json_integer(x));
                json_object_set_new(a->mcf, "max_chunks", json_integer(x));
            }
            applies(a, "--max-chunks", M_SMT | M_MCF);
        } else if (OPT("--max-steps")) {
            SMT_INT("--max-steps", "max_steps", 1);
        } else if (OPT("--steps")) {
            SMT_INT("--steps", "steps", 1);
        } else if (OPT("--rounds")) {
            SMT_INT("--rounds", "rounds", 1);
        } else if (OPT("--chunks")) {
            NEED();
            rc = int_opt("--chunks", v, 1, &a->chunks);
        } else if (OPT("--instance-time-limit")) {
            NEED();
            if ((rc = seconds_opt("--instance-time-limit", v, &d)) == CLI_EXIT_OK)
                json_object_set_new(a->smt, "instance_time_limit_s", json_real(d));
            applies(a, "--instance-time-limit", M_SMT);
        } else if (OPT("--time-limit")) {
            NEED();
            if ((rc = seconds_opt("--time-limit", v, &a->time_limit_s)) == CLI_EXIT_OK)
                json_object_set_new(a->smt, "total_time_limit_s", json_real(a->time_limit_s));
            applies(a, "--time-limit", M_SMT | M_MCF);
        } else if (OPT("--max-ranks")) {
            NEED();
            rc = int_opt("--max-ranks", v, 1, &a->max_ranks);
            applies(a, "--max-ranks", M_SMT);
        } else if (OPT("--epochs")) {
            NEED();
            if ((rc = int_opt("--epochs", v, 0, &x)) == CLI_EXIT_OK)
                json_object_set_new(a->mcf, "epochs", json_integer(x));
            applies(a, "--epochs", M_MCF);
        } else if (OPT("--astar")) {
            NEED();
            if ((rc = int_opt("--astar", v, -1, &x)) == CLI_EXIT_OK)
                json_object_set_new(a->mcf, "astar", json_integer(x));
            applies(a, "--astar", M_MCF);
        } else if (!strcmp(argv[i], "--zero-buffer")) {
            json_object_set_new(a->mcf, "zero_buffer", json_integer(1));
            applies(a, "--zero-buffer", M_MCF);
        } else if (OPT("--astar-epochs")) {
            NEED();
            if ((rc = int_opt("--astar-epochs", v, 1, &x)) == CLI_EXIT_OK)
                json_object_set_new(a->mcf, "astar_epochs", json_integer(x));
            applies(a, "--astar-epochs", M_MCF);
        } else if (OPT("--min-chunks")) {
            NEED();
            if ((rc = int_opt("--min-chunks", v, 1, &x)) == CLI_EXIT_OK)
                json_object_set_new(a->mcf, "min_chunks", json_integer(x));
            applies(a, "--min-chunks", M_MCF);
        } else if (OPT("--epoch-split")) {
            NEED();
            if ((rc = int_opt("--epoch-split", v, 1, &x)) == CLI_EXIT_OK)
                json_object_set_new(a->mcf, "epoch_split", json_integer(x));
            applies(a, "--epoch-split", M_MCF);
        } else if (OPT("--gap")) {
            NEED();
            char *end;
            d = strtod(v, &end);
            if (end == v || *end || !(d >= 0 && d < 1))
                rc = cli_usage_error(CMD, "--gap wants a fraction in [0, 1), got '%s'", v);
            else
                json_object_set_new(a->mcf, "gap", json_real(d));
            applies(a, "--gap", M_MCF);
        } else if (OPT("--trials")) {
            NEED();
            if ((rc = int_opt("--trials", v, 1, &x)) == CLI_EXIT_OK)
                json_object_set_new(a->tacos, "trials", json_integer(x));
            applies(a, "--trials", M_TACOS);
        } else if (OPT("--switch-degree")) {
            NEED();
            if ((rc = int_opt("--switch-degree", v, 0, &x)) == CLI_EXIT_OK)
                json_object_set_new(a->tacos, "switch_degree", json_integer(x));
            applies(a, "--switch-degree", M_TACOS);
        } else if (OPT("--seed")) {
            NEED();
            char *end;
            errno = 0;
            unsigned long long s = strtoull(v, &end, 10);
            if (errno || end == v || *end || v[0] == '-' || s > (1ULL << 62))
                rc = cli_usage_error(CMD, "--seed wants a non-negative integer, got '%s'", v);
            else
                json_object_set_new(a->tacos, "seed", json_integer((json_int_t)s));
            applies(a, "--seed", M_TACOS);
        } else if (OPT("--size")) {
            NEED();
            if (!cli_parse_size(v, &a->size) || !(a->size >= 1))
                rc = cli_usage_error(CMD, "--size wants a positive size like 64MiB, got '%s'", v);
            a->have_size = true;
        } else if (OPT("--codegen")) {
            NEED();
            if (strcmp(v, "msccl-xml") && strcmp(v, "cuda") && strcmp(v, "none"))
                rc = cli_usage_error(CMD, "--codegen wants msccl-xml, cuda or none, got '%s'", v);
            a->codegen = v;
        } else if (OPT("--root")) {
            NEED();
            rc = int_opt("--root", v, 0, &a->root);
        } else if (OPT("--threads")) {
            NEED();
            rc = int_opt("--threads", v, 1, &a->threads);
        } else if (OPT("--output") || OPT("-o")) {
            NEED();
            a->out_path = v;
        } else if (!strcmp(argv[i], "--stats-only")) {
            a->stats_only = true;
            applies(a, "--stats-only", M_TACOS);
        } else if (!strcmp(argv[i], "--json")) {
            a->as_json = true;
        } else if (!strcmp(argv[i], "--quiet")) {
            a->quiet = true;
        } else if (!strcmp(argv[i], "--progress")) {
            a->force_progress = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error(CMD, "unknown option '%s'", argv[i]);
        } else if (!a->topo_spec) {
            a->topo_spec = argv[i];
        } else if (!a->coll_spec) {
            a->coll_spec = argv[i];
        } else {
            return cli_usage_error(CMD, "unexpected argument '%s'", argv[i]);
        }
#undef SMT_INT
#undef NEED
#undef OPT
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    return CLI_EXIT_OK;
}

/* The request document the options describe (synthesize.h's form). */
static json_t *build_request(solve_args *a, const cs_topology *t, const cs_collective *c,
                             int mkind)
{
    json_t *req = json_object();
    /* a builtin goes by name, as a client of the service sends it; a file
     * as the Topology JSON it holds */
    bool builtin = a->topo_spec[0] != '{' && access(a->topo_spec, F_OK) != 0;
    json_object_set_new(req, "topology",
                        builtin ? json_string(a->topo_spec) : topology_to_json(t));
    json_object_set_new(req, "collective", collective_to_json(c));
    json_object_set_new(req, "method", json_string(a->method));
    bool single = json_object_get(a->smt, "steps") != NULL;
    if (a->chunks > 0) {
        /* --chunks: the instance's C with --steps/--rounds, else the chunks
         * TACOS or the baseline splits each share into */
        if (single)
            json_object_set_new(a->smt, "chunks", json_integer(a->chunks));
        else
            json_object_set_new(a->tacos, "chunks", json_integer(a->chunks));
    }
    if (a->have_size && (mkind & M_TACOS))
        json_object_set_new(a->tacos, "bytes", json_real(a->size));
    if (mkind == M_MCF) {
        if (a->chunks > 0)
            json_object_set_new(a->mcf, "chunks", json_integer(a->chunks));
        if (a->have_size)
            json_object_set_new(a->mcf, "bytes", json_real(a->size));
    }
    json_t *opts;
    if (mkind == M_SMT)
        opts = json_incref(a->smt);
    else if (mkind == M_TACOS)
        opts = json_incref(a->tacos);
    else if (mkind == M_BASELINE)
        opts = json_incref(a->tacos);  /* only "chunks" can be there (checked before) */
    else if (mkind == M_HIER)
        opts = json_object();          /* node-type SMT budget: the method's default */
    else if (mkind == M_MCF) {
        opts = json_incref(a->mcf);
        if (a->time_limit_s > 0)
            json_object_set_new(opts, "time_limit_s", json_real(a->time_limit_s));
    } else {
        opts = json_object();
        if (json_object_size(a->smt))
            json_object_set(opts, "smt", a->smt);
        if (json_object_size(a->tacos))
            json_object_set(opts, "tacos", a->tacos);
        if (json_object_size(a->mcf))
            json_object_set(opts, "mcf", a->mcf);
    }
    if (a->codegen)
        json_object_set_new(opts, "codegen", json_string(a->codegen));
    json_object_set_new(req, "options", opts);
    return req;
}

static const char *method_option_kind(int used)
{
    return used == M_SMT     ? "an SMT option"
           : used == M_TACOS ? "a TACOS option"
           : used == M_MCF   ? "an mcf option"
                             : "not an option of this method";
}

static int solve_main(int argc, char **argv, FILE *report)
{
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            solve_usage(stdout);
            return CLI_EXIT_OK;
        }
    solve_args a;
    memset(&a, 0, sizeof a);
    a.method = "auto";
    a.root = -2;
    a.used = M_SMT | M_TACOS | M_BASELINE | M_MCF | M_HIER;
    a.size = CS_BOUND_DEFAULT_BYTES;
    a.smt = json_object();
    a.tacos = json_object();
    a.mcf = json_object();
    cs_topology *t = NULL;
    cs_collective c;
    memset(&c, 0, sizeof c);
    bool have_c = false;
    cs_synth_request *req = NULL;
    cs_result *res = NULL;
    json_t *doc = NULL;
    int code = parse_args(argc, argv, &a);
    if (code != CLI_EXIT_OK)
        goto out;
    if (!a.topo_spec || !a.coll_spec) {
        code = cli_usage_error(CMD, "expected TOPO and COLLECTIVE (e.g. 'solve dgx1 allgather')");
        goto out;
    }
    int mkind = !strcmp(a.method, "auto")    ? (M_SMT | M_TACOS | M_MCF)
                : !strcmp(a.method, "smt")   ? M_SMT
                : !strcmp(a.method, "tacos") ? M_TACOS
                : !strcmp(a.method, "mcf")   ? M_MCF
                : !strcmp(a.method, "hierarchical") ? M_HIER
                                             : M_BASELINE;
    if (mkind == M_BASELINE && !baseline_exists(a.method)) {
        const char *near = synth_method_suggest(a.method);
        if (near)
            code = cli_usage_error(CMD, "unknown --method '%s': did you mean '%s'?", a.method,
                                   near);
        else
            code = cli_usage_error(CMD, "unknown --method '%s' (auto, smt, tacos, mcf, "
                                        "hierarchical or a baseline: see 'collsynth baselines')",
                                   a.method);
        goto out;
    }
    if (!(a.used & mkind)) {
        code = cli_usage_error(CMD, "%s is %s, not for --method %s", a.narrow,
                               method_option_kind(a.used), a.method);
        goto out;
    }
    int fixed = (json_object_get(a.smt, "steps") != NULL) +
                (json_object_get(a.smt, "rounds") != NULL);
    if (fixed == 1 || (fixed == 2 && a.chunks == 0)) {
        code = cli_usage_error(CMD, "--steps, --rounds and --chunks select one instance: give "
                                    "all three or none");
        goto out;
    }
    if (fixed > 0 && mkind == M_MCF) {
        code = cli_usage_error(CMD, "--steps and --rounds are SMT options, not for --method mcf");
        goto out;
    }
    if (fixed == 0 && a.chunks > 0 && mkind == M_SMT) {
        code = cli_usage_error(CMD, "--chunks without --steps and --rounds is the chunk count "
                                    "of tacos and the baselines; the SMT search takes "
                                    "--max-chunks");
        goto out;
    }
    if ((code = cli_load_topology(CMD, a.topo_spec, &t)) != CLI_EXIT_OK)
        goto out;
    if ((code = cli_load_collective(CMD, a.coll_spec, a.root, &c)) != CLI_EXIT_OK)
        goto out;
    have_c = true;

    /* The service's auto policy and limits, except the ones a service needs
     * against strangers (a person may ask this process for anything). */
    cs_synth_limits lim;
    synth_limits_default(&lim);
    lim.max_ranks = 1 << 24;
    lim.max_links = 0;
    lim.max_chunks = 1 << 20;
    lim.max_trials = 100000;
    lim.max_smt_steps = 1024;
    lim.threads = a.threads;
    lim.smt_limit_ranks = a.max_ranks;
    lim.tacos_stats_only = a.stats_only;
    if (a.time_limit_s > 0)
        lim.smt_time_budget_s = a.time_limit_s;

    doc = build_request(&a, t, &c, mkind);
    cs_error err;
    cs_error_clear(&err);
    int rc = synth_request_from_json(doc, &lim, &req, &err);
    if (rc != CS_OK) {
        code = cli_report_error(CMD, "request", rc, &err);
        if (code == CLI_EXIT_NEGATIVE && rc != CS_EUNSUPPORTED)
            code = CLI_EXIT_USAGE;
        goto out;
    }

    /* an -o FILE that cannot be written is said now, not after a long synthesis */
    if (a.out_path && (code = cli_out_precheck(CMD, a.out_path)) != CLI_EXIT_OK)
        goto out;

    progress prog;
    bool tty = isatty(STDERR_FILENO) && getenv("TERM") && strcmp(getenv("TERM"), "dumb");
    char what[96];
    snprintf(what, sizeof what, "synthesizing (method %s) ...", a.method);
    progress_start(&prog, !a.quiet && (tty || a.force_progress), !a.quiet, what);
    cs_synth_hooks hooks = {progress_event, &prog, NULL};
    rc = synth_run(req, &lim, &hooks, &res, &err);
    progress_stop(&prog);
    if (rc != CS_OK) {
        const char *w = rc == CS_EUNSAT ? "no algorithm" : "synthesis failed";
        code = cli_report_error(CMD, w, rc, &err);
        if (rc == CS_EINVAL || rc == CS_ELIMIT)
            code = CLI_EXIT_USAGE;
        goto out;
    }
    code = res->nalgs > 0 || a.stats_only ? CLI_EXIT_OK : CLI_EXIT_NEGATIVE;
    if (a.as_json || a.out_path) {
        if (res->nalgs == 0 && a.stats_only) {
            fprintf(stderr, "collsynth %s: --stats-only keeps no sends: nothing to write "
                            "(drop --stats-only)\n", CMD);
            code = CLI_EXIT_USAGE;
        } else {
            int wc = write_result(req, res, a.out_path);
            if (wc != CLI_EXIT_OK)
                code = wc;
        }
    }
    if (!a.as_json || a.out_path) {
        if (!strcmp(res->method, "tacos"))
            cli_tacos_report(report, res, t, &req->collective, req->tacos.bytes,
                             req->tacos.seed, a.stats_only);
        else if (!strcmp(res->method, "mcf"))
            cli_mcf_report(report, res, t, &req->collective, req->mcf.bytes);
        else
            print_table(report, res, t, &req->collective,
                        a.have_size ? a.size : synth_bound_bytes(req));
        fprintf(report, "reason: %s\n", res->reason);
        fprintf(report, "key:    %s\n", req->key);
    }
out:
    result_free(res);
    synth_request_free(req);
    json_decref(doc);
    json_decref(a.smt);
    json_decref(a.tacos);
    json_decref(a.mcf);
    if (have_c)
        collective_free(&c);
    topology_free(t);
    return code;
}

/* ---- --format: synthesize, then codegen -------------------------------------------------- */

/* Options that belong to `codegen` when --format asks for code (all take a
 * value).  --size goes to both: TACOS times its chunks with it, and codegen
 * picks the frontier algorithm fastest for it. */
static const char *const codegen_options[] = {
    "--format", "--runtime", "--min-bytes", "--max-bytes", "--proto", "--name", "--elem",
    "--prefix", "--index", "--frontier-dir", "--size", "--ranks", "-o", "--output",
    "--gpu-sms",
};

static bool is_codegen_option(const char *arg)
{
    for (size_t k = 0; k < sizeof codegen_options / sizeof *codegen_options; k++)
        if (!strcmp(arg, codegen_options[k]))
            return true;
    return false;
}

/* True when argv[i] is the value of the option before it (every solve option
 * takes a value except these flags). */
static bool follows_option_value(char **argv, int i)
{
    const char *prev = argv[i - 1];
    return i > 1 && prev[0] == '-' && strcmp(prev, "--json") && strcmp(prev, "--quiet") &&
           strcmp(prev, "--stats-only") && strcmp(prev, "--progress") &&
           strcmp(prev, "--zero-buffer");
}

static int solve_then_codegen(int argc, char **argv, const char *format, const cli_globals *g)
{
    char tmp[] = "/tmp/collsynth-solve-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0)
        return cli_usage_error(CMD, "cannot create a temporary file in /tmp: %s",
                               strerror(errno));
    close(fd);
    /* Ctrl-C during the synthesis must not leave it in /tmp */
    int slot = cli_remove_on_signal(tmp);
    char **sargv = calloc((size_t)argc + 6, sizeof *sargv);
    char **cargv = calloc((size_t)argc + 6, sizeof *cargv);
    int code = CLI_EXIT_INTERNAL;
    if (!sargv || !cargv)
        goto out;
    int sc = 0, cc = 0;
    const char *topo_spec = NULL;
    cargv[cc++] = "codegen";
    cargv[cc++] = tmp;
    sargv[sc++] = argv[0];
    for (int i = 1; i < argc; i++) {
        if (is_codegen_option(argv[i]) && i + 1 < argc) {
            if (!strcmp(argv[i], "--output"))
                cargv[cc++] = "-o";
            else
                cargv[cc++] = argv[i];
            cargv[cc++] = argv[i + 1];
            if (!strcmp(argv[i], "--size")) {
                sargv[sc++] = argv[i];
                sargv[sc++] = argv[i + 1];
            }
            i++;
        } else if (!strcmp(argv[i], "--json")) {
            continue;   /* the code is the output */
        } else {
            if (!topo_spec && argv[i][0] != '-' && !follows_option_value(argv, i))
                topo_spec = argv[i];
            sargv[sc++] = argv[i];
        }
    }
    /* the code is the output: the request says so (synthesize.h, codegen) */
    sargv[sc++] = "--codegen";
    sargv[sc++] = (char *)format;
    sargv[sc++] = "--output";
    sargv[sc++] = tmp;
    if (topo_spec) {
        cargv[cc++] = "--topology";
        cargv[cc++] = (char *)topo_spec;
    }
    code = solve_main(sc, sargv, stderr);
    if (code == CLI_EXIT_OK)
        code = cli_cmd_codegen(cc, cargv, g);
out:
    unlink(tmp);
    cli_keep_on_signal(slot);
    free(sargv);
    free(cargv);
    return code;
}

int cli_cmd_solve(int argc, char **argv, const cli_globals *g)
{
    const char *format = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m = cli_option(CMD, argc, argv, &i, "--format", &v);
        if (m < 0)
            return CLI_EXIT_USAGE;
        if (m > 0)
            format = v;
    }
    if (!format || !strcmp(format, "json"))
        return solve_main(argc, argv, stdout);
    if (strcmp(format, "msccl-xml") && strcmp(format, "cuda"))
        return cli_usage_error(CMD, "unknown --format '%s' (json, msccl-xml or cuda)", format);
    return solve_then_codegen(argc, argv, format, g);
}
