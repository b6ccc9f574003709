/*
 * cli_solve.c - `collsynth solve TOPO COLLECTIVE [--method M] ...`: synthesize
 * offline, in this process, and print the frontier.
 *
 * The command first looks for --method and hands the whole argument list to
 * that method's function (the table `methods[]` below; adding a method is one
 * line there).  The SMT method runs the Pareto search (or one instance with
 * --steps/--rounds/--chunks), streams one progress line per instance to
 * stderr, and prints the frontier as a table: S, R, C, R/C, the optimality
 * label, the alpha-beta cost at a few buffer sizes and the instance's
 * synthesis time.  --json prints (or -o writes) the result document:
 * result_to_json() plus the topology and the collective.
 *
 * --method tacos hands the arguments to cli_solve_tacos (cli_tacos.c).
 *
 * --format msccl-xml|cuda synthesizes into a temporary result document and
 * then runs `collsynth codegen` on it with the code-generation options, so
 * algorithm selection (--index, --size) and generation live in one place.
 * The human report then goes to stderr, keeping stdout for the code.
 *
 * Exit codes: 0 an algorithm was found, 1 none exists / none found within
 * the limits, 2 bad usage or input, 3 internal error.
 */
#include <math.h>
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

/* argv[0] is "solve"; `report` receives the human-readable frontier. */
typedef int (*solve_fn)(int argc, char **argv, FILE *report);

static void smt_usage(FILE *f)
{
    fprintf(f,
            "Usage: collsynth solve TOPO COLLECTIVE [--method smt] [OPTIONS]\n"
            "\n"
            "Synthesizes the Pareto frontier of k-synchronous algorithms (steps S vs\n"
            "rounds per chunk R/C) with Z3, or decides one (S, R, C) instance.\n"
            "\n"
            "  TOPO                  builtin name (dgx1, ring:8, ...) or Topology JSON file\n"
            "  COLLECTIVE            allgather, reducescatter, allreduce, broadcast, reduce,\n"
            "                        gather, scatter, alltoall, or a collective JSON document\n"
            "Options:\n"
            "  --method M            smt (default), tacos or mcf (see --method tacos --help)\n"
            "  --k N                 candidates with S <= R <= S + N (default 4)\n"
            "  --max-chunks N        largest C tried (default 8)\n"
            "  --max-steps N         largest S tried (default: steps bound + 8)\n"
            "  --steps S --rounds R --chunks C\n"
            "                        decide this one instance instead of searching\n"
            "  --root R              root of broadcast, reduce, gather, scatter (default 0)\n"
            "  --time-limit SEC      stop the whole search after SEC seconds\n"
            "  --instance-time-limit SEC\n"
            "                        give up on one instance after SEC seconds\n"
            "  --threads N           instances solved in parallel (default: CPU count)\n"
            "  --max-ranks N         refuse larger topologies (default %d)\n"
            "  --json                print the result document instead of the table\n"
            "  -o, --output FILE     write the result document to FILE\n"
            "  --quiet               no progress lines on stderr\n"
            "  --format F            msccl-xml or cuda: print the generated code instead;\n"
            "                        takes the options of `collsynth codegen` (--runtime,\n"
            "                        --index, --size, --min-bytes, --max-bytes, --elem, -o)\n"
            "\n"
            "Exit status: 0 found, 1 no algorithm exists (or none within the limits),\n"
            "2 usage or input error, 3 internal error.\n",
            CS_SMT_DEFAULT_MAX_RANKS);
}

static void progress_line(void *ctx, const cs_progress_event *ev)
{
    (void)ctx;
    fprintf(stderr, "[%7.2fs] S=%-3d R=%-3d C=%-3d %-9s %.3f s\n", ev->elapsed, ev->steps,
            ev->rounds, ev->chunks, ev->outcome, ev->seconds);
}

/* Seconds of the instance that produced a (S, R, C) point, or NAN. */
static double instance_seconds(const cs_result *r, int S, int R, int C)
{
    json_t *inst = r->stats ? json_object_get(r->stats, "instances") : NULL;
    for (size_t i = 0; i < json_array_size(inst); i++) {
        json_t *e = json_array_get(inst, i);
        if (json_integer_value(json_object_get(e, "steps")) == S &&
            json_integer_value(json_object_get(e, "rounds")) == R &&
            json_integer_value(json_object_get(e, "chunks")) == C &&
            !strcmp(json_string_value(json_object_get(e, "result")), "sat"))
            return json_number_value(json_object_get(e, "seconds"));
    }
    return NAN;
}

/* The result document (result_to_json plus the topology and collective),
 * streamed: a large frontier is never built as a JSON tree. */
static int write_result(const cs_result *r, const cs_topology *t, const cs_collective *c,
                        const char *out_path)
{
    cs_error err;
    json_t *skel = result_to_json_frame(r);
    if (skel) {
        /* the bound from the whole result (its sends), into the frame */
        synth_annotate_time_bound(skel, t, c, r, CS_BOUND_DEFAULT_BYTES, NULL);
        json_object_set_new(skel, "topology", topology_to_json(t));
        json_object_set_new(skel, "collective", collective_to_json(c));
    }
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

static void print_table(FILE *f, const cs_result *r, const cs_topology *t,
                        const cs_collective *c)
{
    static const double sizes[] = {1024.0, 1048576.0, 1073741824.0};
    const double bound_bytes = CS_BOUND_DEFAULT_BYTES;
    fprintf(f, "%s on %s (%d ranks): bounds S >= %d, R/C >= %.4g; %s frontier, %.3f s\n",
            collective_kind_name(c->kind), t->name, t->ranks, r->bound_steps,
            r->bound_rounds_per_chunk, r->complete ? "complete" : "partial", r->synth_seconds);
    cs_time_bound tb;
    bool have_bound = collective_time_bound(t, c, &tb, NULL) == CS_OK;
    if (have_bound)
        cli_print_time_bound(f, "", &tb, bound_bytes, 1);
    char simhead[32], size[24];
    cli_fmt_size(size, sizeof size, bound_bytes);
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
                (double)R / C, a->optimality[0] ? a->optimality : "-", cost[0], cost[1], cost[2],
                sim, ratio, tbuf);
    }
    if (r->nalgs == 0)
        fprintf(f, "(no algorithm found within the limits)\n");
    else
        fprintf(f, "ratio = time bound / simulated time at %s (ratio_to_bound, <= 1)\n", size);
    if (r->stats) {
        fprintf(f, "instances: %lld solved, %lld inferred; z3 %.3f s, own code %.3f s\n",
                (long long)json_integer_value(json_object_get(r->stats, "solved")),
                (long long)json_integer_value(json_object_get(r->stats, "inferred")),
                json_number_value(json_object_get(r->stats, "z3_seconds")),
                json_number_value(json_object_get(r->stats, "own_seconds")));
    }
}

static int int_opt(const char *name, const char *v, int lo, int *out)
{
    if (!cli_parse_int(v, out) || *out < lo)
        return cli_usage_error(CMD, "%s must be an integer >= %d (got '%s')", name, lo, v);
    return CLI_EXIT_OK;
}

static int double_opt(const char *name, const char *v, double *out)
{
    char *end;
    double d = strtod(v, &end);
    if (end == v || *end || !isfinite(d) || d < 0)
        return cli_usage_error(CMD, "%s must be a number of seconds >= 0 (got '%s')", name, v);
    *out = d;
    return CLI_EXIT_OK;
}

static int solve_smt(int argc, char **argv, FILE *report)
{
    const char *topo_spec = NULL, *coll_spec = NULL, *out_path = NULL;
    bool as_json = false, quiet = false;
    int root = -2;
    cs_smt_options o;
    smt_options_default(&o);
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m, rc = CLI_EXIT_OK;
        if (cli_is_help(argv[i])) {
            smt_usage(stdout);
            return CLI_EXIT_OK;
        }
#define OPT(name) ((m = cli_option(CMD, argc, argv, &i, name, &v)) != 0)
        if (OPT("--method")) {
            if (m < 0)
                return CLI_EXIT_USAGE;
        } else if (OPT("--k")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--k", v, 0, &o.k);
        } else if (OPT("--max-chunks")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--max-chunks", v, 1, &o.max_chunks);
        } else if (OPT("--max-steps")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--max-steps", v, 1, &o.max_steps);
        } else if (OPT("--steps")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--steps", v, 1, &o.steps);
        } else if (OPT("--rounds")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--rounds", v, 1, &o.rounds);
        } else if (OPT("--chunks")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--chunks", v, 1, &o.chunks);
        } else if (OPT("--root")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--root", v, 0, &root);
        } else if (OPT("--threads")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--threads", v, 1, &o.threads);
        } else if (OPT("--max-ranks")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--max-ranks", v, 1, &o.max_ranks);
        } else if (OPT("--time-limit")) {
            rc = m < 0 ? CLI_EXIT_USAGE : double_opt("--time-limit", v, &o.total_time_limit_s);
        } else if (OPT("--instance-time-limit")) {
            rc = m < 0 ? CLI_EXIT_USAGE
                       : double_opt("--instance-time-limit", v, &o.instance_time_limit_s);
        } else if (OPT("--output") || OPT("-o")) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            out_path = v;
        } else if (!strcmp(argv[i], "--json")) {
            as_json = true;
        } else if (!strcmp(argv[i], "--quiet")) {
            quiet = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error(CMD, "unknown option '%s' for --method smt", argv[i]);
        } else if (!topo_spec) {
            topo_spec = argv[i];
        } else if (!coll_spec) {
            coll_spec = argv[i];
        } else {
            return cli_usage_error(CMD, "unexpected argument '%s'", argv[i]);
        }
#undef OPT
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    if (!topo_spec || !coll_spec)
        return cli_usage_error(CMD, "expected TOPO and COLLECTIVE (e.g. 'solve dgx1 allgather')");
    int fixed = (o.steps > 0) + (o.rounds > 0) + (o.chunks > 0);
    if (fixed != 0 && fixed != 3)
        return cli_usage_error(CMD, "--steps, --rounds and --chunks select one instance: give "
                                    "all three or none");

    cs_topology *t = NULL;
    int code = cli_load_topology(CMD, topo_spec, &t);
    if (code != CLI_EXIT_OK)
        return code;
    cs_collective c;
    code = cli_load_collective(CMD, coll_spec, root, &c);
    if (code != CLI_EXIT_OK) {
        topology_free(t);
        return code;
    }
    if (!quiet)
        o.progress = progress_line;
    cs_result *r = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = smt_search(t, &c, &o, &r, &err);
    if (rc != CS_OK) {
        const char *what = rc == CS_EUNSAT ? "no algorithm" : "synthesis failed";
        code = cli_report_error(CMD, what, rc, &err);
        if (rc == CS_EINVAL || rc == CS_ELIMIT)
            code = CLI_EXIT_USAGE;
        collective_free(&c);
        topology_free(t);
        return code;
    }
    code = r->nalgs > 0 ? CLI_EXIT_OK : CLI_EXIT_NEGATIVE;
    if (as_json || out_path) {
        int wc = write_result(r, t, &c, out_path);
        if (wc != CLI_EXIT_OK)
            code = wc;
    }
    if (!as_json || out_path)
        print_table(report, r, t, &c);
    result_free(r);
    collective_free(&c);
    topology_free(t);
    return code;
}

/* The methods `solve` knows.  To add one: a function taking the arguments
 * after the command name (argv[0] == "solve"), and one line here. */
static const struct {
    const char *name;
    solve_fn fn;
} methods[] = {
    {"smt", solve_smt},
    {"tacos", cli_solve_tacos},
    {"mcf", cli_solve_mcf},
};

/* Options that belong to `codegen` when --format asks for code (all take a
 * value).  --size goes to both: TACOS times its chunks with it, and codegen
 * picks the frontier algorithm fastest for it. */
static const char *const codegen_options[] = {
    "--format", "--runtime", "--min-bytes", "--max-bytes", "--proto", "--name", "--elem",
    "--prefix", "--index", "--frontier-dir", "--size", "--ranks", "-o", "--output",
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
           strcmp(prev, "--stats-only");
}

static int solve_then_codegen(int argc, char **argv, solve_fn fn, const char *method,
                              const cli_globals *g)
{
    char tmp[] = "/tmp/collsynth-solve-XXXXXX";
    int fd = mkstemp(tmp);
    if (fd < 0)
        return cli_usage_error(CMD, "cannot create a temporary file in /tmp");
    close(fd);
    char **sargv = calloc((size_t)argc + 4, sizeof *sargv);
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
            if (!strcmp(argv[i], "--size") && (!strcmp(method, "tacos") || !strcmp(method, "mcf"))) {
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
    sargv[sc++] = "--output";
    sargv[sc++] = tmp;
    if (topo_spec) {
        cargv[cc++] = "--topology";
        cargv[cc++] = (char *)topo_spec;
    }
    code = fn(sc, sargv, stderr);
    if (code == CLI_EXIT_OK)
        code = cli_cmd_codegen(cc, cargv, g);
out:
    unlink(tmp);
    free(sargv);
    free(cargv);
    return code;
}

int cli_cmd_solve(int argc, char **argv, const cli_globals *g)
{
    const char *method = "smt", *format = NULL;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m = cli_option(CMD, argc, argv, &i, "--method", &v);
        if (m < 0)
            return CLI_EXIT_USAGE;
        if (m > 0) {
            method = v;
            continue;
        }
        m = cli_option(CMD, argc, argv, &i, "--format", &v);
        if (m < 0)
            return CLI_EXIT_USAGE;
        if (m > 0)
            format = v;
    }
    for (size_t k = 0; k < sizeof methods / sizeof methods[0]; k++) {
        if (strcmp(methods[k].name, method))
            continue;
        if (!format || !strcmp(format, "json"))
            return methods[k].fn(argc, argv, stdout);
        if (strcmp(format, "msccl-xml") && strcmp(format, "cuda"))
            return cli_usage_error(CMD, "unknown --format '%s' (json, msccl-xml or cuda)",
                                   format);
        return solve_then_codegen(argc, argv, methods[k].fn, method, g);
    }
    return cli_usage_error(CMD, "unknown --method '%s' (known: smt, tacos, mcf)", method);
}
