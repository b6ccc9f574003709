/*
 * cli_mcf.c - `collsynth solve ... --method mcf` (see cli_mcf.h): option
 * parsing, then mcf_synthesize and a summary (or the result JSON with the
 * time bound, ratio_to_bound and bounds.mcf_lp, as the daemon returns it).
 */
#include "cli_mcf.h"

#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "mcf.h"
#include "synthesize.h"

static const char *const CMD = "solve";

static void usage(FILE *e)
{
    fprintf(e,
            "usage: collsynth solve TOPO COLLECTIVE --method mcf [--chunks N] [--epochs K]\n"
            "       [--size BYTES] [--epoch-split N] [--gap G] [--time-limit S] [--root R]\n"
            "       [--output FILE] [--json]\n"
            "  TE-CCL's flow-over-time model: an LP (CLP) for alltoall, scatter, gather and\n"
            "  pairwise custom demands, a MILP (CBC) for demands with copy (allgather, ...).\n"
            "  --chunks      chunks per rank share (alltoall: per pair), default 1\n"
            "  --epochs      horizon K (default: the smallest the LP allows)\n"
            "  --size        per-rank share; chunk = size / chunks (default 64MiB)\n"
            "  --epoch-split epoch = fastest link's chunk time / N (default 1)\n"
            "  --gap         stop the MILP at this relative gap (0.3 = 30%%; default 0)\n"
            "  --time-limit  seconds for the whole synthesis (default none)\n");
}

static int int_opt(const char *name, const char *v, int lo, int hi, int *out)
{
    int x;
    if (!cli_parse_int(v, &x) || x < lo || x > hi)
        return cli_usage_error(CMD, "%s must be an integer in %d..%d (got '%s')", name, lo, hi,
                               v);
    *out = x;
    return CLI_EXIT_OK;
}

static int dbl_opt(const char *name, const char *v, double lo, double hi, double *out)
{
    char *end;
    double x = strtod(v, &end);
    if (end == v || *end || !isfinite(x) || x < lo || x > hi)
        return cli_usage_error(CMD, "%s must be a number in [%g, %g] (got '%s')", name, lo, hi,
                               v);
    *out = x;
    return CLI_EXIT_OK;
}

int cli_solve_mcf(int argc, char **argv, FILE *report)
{
    cs_mcf_options opt;
    mcf_options_default(&opt);
    const char *pos[2] = {NULL, NULL};
    const char *output = NULL;
    bool as_json = false;
    int npos = 0, root = -2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        int m, rc = CLI_EXIT_OK;
        if (cli_is_help(a)) {
            usage(report);
            return CLI_EXIT_OK;
        }
#define OPT(name) ((m = cli_option(CMD, argc, argv, &i, name, &v)) != 0)
        if (OPT("--method")) {
            if (m < 0)
                rc = CLI_EXIT_USAGE;
            else if (strcmp(v, "mcf") != 0)
                rc = cli_usage_error(CMD, "cli_solve_mcf runs --method mcf, not %s", v);
        } else if (OPT("--chunks")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--chunks", v, 1, 4096, &opt.chunks);
        } else if (OPT("--epochs")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--epochs", v, 0, 100000, &opt.epochs);
        } else if (OPT("--epoch-split")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--epoch-split", v, 1, 64, &opt.epoch_split);
        } else if (OPT("--gap")) {
            rc = m < 0 ? CLI_EXIT_USAGE : dbl_opt("--gap", v, 0, 0.99, &opt.gap);
        } else if (OPT("--time-limit")) {
            rc = m < 0 ? CLI_EXIT_USAGE : dbl_opt("--time-limit", v, 0, 1e6, &opt.time_limit_s);
        } else if (OPT("--root")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--root", v, 0, INT_MAX, &root);
        } else if (OPT("--size")) {
            if (m < 0)
                rc = CLI_EXIT_USAGE;
            else if (!cli_parse_size(v, &opt.bytes) || !(opt.bytes > 0))
                rc = cli_usage_error(CMD, "--size wants a positive size like 1M, got '%s'", v);
        } else if (OPT("--output")) {
            rc = m < 0 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
            output = v;
        } else if (!strcmp(a, "--json")) {
            as_json = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            rc = cli_usage_error(CMD, "unknown option '%s' for --method mcf", a);
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            rc = cli_usage_error(CMD, "unexpected argument '%s'", a);
        }
#undef OPT
        if (rc != CLI_EXIT_OK)
            return rc;
    }
    if (npos < 2) {
        usage(stderr);
        return CLI_EXIT_USAGE;
    }
    cs_topology *t = NULL;
    int code = cli_load_topology(CMD, pos[0], &t);
    if (code != CLI_EXIT_OK)
        return code;
    cs_collective c;
    code = cli_load_collective(CMD, pos[1], root, &c);
    if (code != CLI_EXIT_OK) {
        topology_free(t);
        return code;
    }
    cs_error err;
    cs_error_clear(&err);
    cs_result *r = NULL;
    int rc = mcf_synthesize(t, &c, &opt, &r, &err);
    int status = CLI_EXIT_OK;
    if (rc != CS_OK) {
        status = cli_report_error(CMD, "mcf", rc, &err);
    } else if (as_json) {
        json_t *doc = result_to_json(r);
        if (doc) {
            synth_annotate_time_bound(doc, t, &c, r, opt.bytes, NULL);
            synth_annotate_mcf_bound(doc, r);
        }
        status = doc ? cli_write_json(CMD, doc, NULL) : CLI_EXIT_INTERNAL;
        json_decref(doc);
    } else {
        json_t *st = r->stats, *lp = json_object_get(st, "mcf_lp");
#define NUM(o, k) json_number_value(json_object_get(o, k))
        char size[32];
        cli_fmt_size(size, sizeof size, opt.bytes);
        fprintf(report, "mcf %s on %s (%d ranks), %d chunk%s, %s\n", collective_kind_name(c.kind),
                t->name, t->ranks, opt.chunks, opt.chunks == 1 ? "" : "s",
                json_string_value(json_object_get(st, "model")));
        cs_time_bound tb;
        cs_bound_ratio br;
        bool have_bound = collective_time_bound(t, &c, &tb, NULL) == CS_OK;
        double sim_us = NAN;
        if (have_bound &&
            synth_ratio_to_bound(t, &tb, r->algs[0], opt.bytes, &br, NULL) == CS_OK)
            sim_us = br.simulated_us;
        fprintf(report, "  simulated time  %.3f us at %s (schedule %.3f us, %.0f epochs of %.4g us)\n",
                sim_us, size, NUM(st, "schedule_us"), NUM(st, "epochs_used"), NUM(st, "epoch_us"));
        fprintf(report, "  LP bound        %.3f us (%.0f epochs; LP objective %.6g)\n",
                NUM(lp, "time_us"), NUM(lp, "epochs"), NUM(lp, "objective"));
        if (have_bound) {
            cli_print_time_bound(report, "  ", &tb, opt.bytes, opt.chunks);
            fprintf(report, "  ratio_to_bound  %.4f (time bound / simulated time)\n", br.ratio);
        }
        fprintf(report, "  solver          %s, objective %.6g, bound %.6g, gap %.3g%%\n",
                json_string_value(json_object_get(st, "status")), NUM(st, "milp_objective"),
                NUM(st, "milp_bound"), 100 * NUM(st, "gap"));
        fprintf(report, "  time taken      %.3f s (%.0f LP solves %.3f s, %.0f MILP solves %.3f s)\n",
                r->synth_seconds, NUM(st, "lp_solves"), NUM(st, "lp_seconds"),
                NUM(st, "milp_solves"), NUM(st, "milp_seconds"));
        fprintf(report, "  sends           %ld\n", r->algs[0]->nsends);
#undef NUM
    }
    if (rc == CS_OK && output) {
        json_t *doc = algorithm_to_json(r->algs[0]);
        int wc = doc ? cli_write_json(CMD, doc, output) : CLI_EXIT_INTERNAL;
        json_decref(doc);
        if (wc != CLI_EXIT_OK)
            status = wc;
    }
    if (r)
        result_free(r);
    collective_free(&c);
    topology_free(t);
    return status;
}
