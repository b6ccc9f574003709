/*
 * cli_tacos.c - `collsynth solve ... --method tacos`: option parsing and the
 * human summary for TACOS runs.  The SMT side of `solve` lives in
 * cli_solve.c, which hands tacos runs here (see cli_tacos.h).
 */
#include "cli_tacos.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "synthesize.h"
#include "tacos.h"

static const char *const CMD = "solve";

static void usage(FILE *e)
{
    fprintf(e,
            "usage: collsynth solve TOPO COLLECTIVE --method tacos [--chunks N] [--trials N]\n"
            "       [--seed N] [--size BYTES] [--switch-degree D] [--threads N]\n"
            "       [--root R] [--stats-only] [--output FILE] [--json]\n"
            "  TOPO        builtin name (mesh2d:8x8), JSON file or JSON text\n"
            "  COLLECTIVE  kind (allgather), kind:root (broadcast:3), JSON file or JSON text\n"
            "  --size      per-rank buffer share: 4096, 64K, 1.5MB (powers of 1000), 64MiB\n"
            "              (KiB/MiB/GiB: powers of 1024), as for every collsynth command\n"
            "  --stats-only  do not keep the sends (for very large topologies)\n");
}

/* An integer option within [lo, hi]; returns an exit code. */
static int int_opt(const char *name, const char *v, int lo, int hi, int *out)
{
    int x;
    if (!cli_parse_int(v, &x) || x < lo || x > hi)
        return cli_usage_error(CMD, "%s must be an integer in %d..%d (got '%s')", name, lo, hi,
                               v);
    *out = x;
    return CLI_EXIT_OK;
}

/* cli_load_collective, plus the "kind:root" form (broadcast:3) TACOS takes
 * in place of --root.  A JSON document or a readable file is never split. */
static int load_collective(const char *spec, int root, cs_collective *c)
{
    const char *colon = strchr(spec, ':');
    if (!colon || spec[0] == '{' || access(spec, R_OK) == 0)
        return cli_load_collective(CMD, spec, root, c);
    char name[64];
    size_t n = (size_t)(colon - spec);
    if (n >= sizeof name || !cli_parse_int(colon + 1, &root) || root < 0)
        return cli_usage_error(CMD, "bad root in '%s'", spec);
    memcpy(name, spec, n);
    name[n] = '\0';
    return cli_load_collective(CMD, name, root, c);
}

/* The result document (r, with the time bound of t and c at bound_bytes) or
 * one algorithm's (a), streamed: a large schedule is never built as a JSON
 * tree. */
static int write_streamed(const cs_result *r, const cs_algorithm *a, const cs_topology *t,
                          const cs_collective *c, double bound_bytes, const char *path)
{
    cs_error err;
    cs_error_clear(&err);
    json_t *skel = NULL;
    cs_result_writer *w = NULL;
    int rc;
    if (r) {
        skel = result_to_json_frame(r);
        if (skel)  /* the bound from the whole result (its sends), into the frame */
            synth_annotate_time_bound(skel, t, c, r, bound_bytes, NULL);
        cs_json_view jv = CS_JSON_VIEW_FULL;
        rc = skel ? result_writer_open_memory(r, skel, &jv, &w, &err)
                  : cs_error_set(&err, CS_ENOMEM, "", "out of memory");
    } else {
        skel = algorithm_to_json_frame(a);
        rc = skel ? result_writer_open_algorithm(a, skel, &w, &err)
                  : cs_error_set(&err, CS_ENOMEM, "", "out of memory");
    }
    long nsends = a ? a->nsends : 0;
    for (int i = 0; r && i < r->nalgs; i++)
        nsends += r->algs[i]->nsends;
    int code = rc ? cli_report_error(CMD, "output", rc, &err)
                  : cli_write_streamed(CMD, w, nsends, path);
    result_writer_free(w);
    json_decref(skel);
    return code;
}

int cli_solve_tacos(int argc, char **argv, FILE *report)
{
    cs_tacos_options opt;
    tacos_options_default(&opt);
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
            else if (strcmp(v, "tacos") != 0)
                rc = cli_usage_error(CMD, "cli_solve_tacos runs --method tacos, not %s", v);
        } else if (OPT("--chunks")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--chunks", v, 1, 1 << 20, &opt.chunks);
        } else if (OPT("--trials")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--trials", v, 1, 100000, &opt.trials);
        } else if (OPT("--threads")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--threads", v, 0, 1024, &opt.threads);
        } else if (OPT("--switch-degree")) {
            rc = m < 0 ? CLI_EXIT_USAGE
                       : int_opt("--switch-degree", v, 0, 1 << 20, &opt.switch_degree);
        } else if (OPT("--root")) {
            rc = m < 0 ? CLI_EXIT_USAGE : int_opt("--root", v, 0, INT_MAX, &root);
        } else if (OPT("--seed")) {
            char *end;
            errno = 0;
            unsigned long long s = m < 0 ? 0 : strtoull(v, &end, 10);
            if (m < 0)
                rc = CLI_EXIT_USAGE;
            else if (errno || end == v || *end)
                rc = cli_usage_error(CMD, "--seed wants a non-negative integer, got '%s'", v);
            else
                opt.seed = (uint64_t)s;
        } else if (OPT("--size")) {
            if (m < 0)
                rc = CLI_EXIT_USAGE;
            else if (!cli_parse_size(v, &opt.bytes) || !(opt.bytes > 0))
                rc = cli_usage_error(CMD, "--size wants a positive size like 1G, got '%s'", v);
        } else if (OPT("--output")) {
            rc = m < 0 ? CLI_EXIT_USAGE : CLI_EXIT_OK;
            output = v;
        } else if (!strcmp(a, "--stats-only")) {
            opt.keep_sends = false;
        } else if (!strcmp(a, "--json")) {
            as_json = true;
        } else if (a[0] == '-' && a[1] != '\0') {
            rc = cli_usage_error(CMD, "unknown option '%s' for --method tacos", a);
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
    code = load_collective(pos[1], root, &c);
    if (code != CLI_EXIT_OK) {
        topology_free(t);
        return code;
    }
    cs_error err;
    cs_error_clear(&err);
    cs_result *r = NULL;
    int rc = tacos_synthesize(t, &c, &opt, &r, &err);
    int status = CLI_EXIT_OK;
    if (rc != CS_OK) {
        status = cli_report_error(CMD, "tacos", rc, &err);
    } else if (as_json) {
        status = write_streamed(r, NULL, t, &c, opt.bytes, NULL);
    } else {
        json_t *st = r->stats;
#define NUM(k) json_number_value(json_object_get(st, k))
        char size[32];
        cli_fmt_size(size, sizeof size, opt.bytes);
        fprintf(report, "tacos %s on %s (%d ranks)%s\n", collective_kind_name(c.kind), t->name,
                t->ranks, opt.keep_sends ? "" : ", statistics only");
        /* The schedule simulated on the topology as given (TACOS times it on
         * its own lowering of the switches: its figure may differ there). */
        double sim_us = NUM("sim_time_us");
        cs_time_bound tb;
        cs_bound_ratio br;
        bool have_bound = collective_time_bound(t, &c, &tb, NULL) == CS_OK;
        if (have_bound && r->nalgs > 0 &&
            synth_ratio_to_bound(t, &tb, r->algs[0], opt.bytes, &br, NULL) == CS_OK)
            sim_us = br.simulated_us;
        fprintf(report, "  simulated time  %.3f us at %s\n", sim_us, size);
        if (t->nswitches > 0 && fabs(sim_us - NUM("sim_time_us")) > 1e-6 * sim_us)
            fprintf(report, "  tacos timing    %.3f us (switches unwound, degree %.0f)\n",
                    NUM("sim_time_us"), NUM("switch_degree"));
        if (have_bound) {
            double bound_us = time_bound_us(&tb, opt.bytes, (int)NUM("chunks"));
            cli_print_time_bound(report, "  ", &tb, opt.bytes, (int)NUM("chunks"));
            fprintf(report, "  ratio_to_bound  %.4f (time bound / simulated time)\n",
                    sim_us > 0 ? bound_us / sim_us : 1.0);
        }
        fprintf(report, "  tacos ideal     %.3f us (the TACOS paper's figure: per-rank bandwidth "
                        "and diameter x largest alpha; not a lower bound)\n",
                NUM("ideal_us"));
        fprintf(report, "  sends           %.0f over %.0f spans\n", NUM("sends"), NUM("spans"));
        fprintf(report, "  trials          %.0f (seed %llu)\n", NUM("trials"),
                (unsigned long long)opt.seed);
        if (json_object_get(st, "switch_degree"))
            fprintf(report, "  switch degree   %.0f\n", NUM("switch_degree"));
        fprintf(report, "  time taken      %.3f s, peak memory %.1f MB\n", NUM("seconds"),
                NUM("peak_rss_kb") / 1024.0);
#undef NUM
    }
    if (rc == CS_OK && output) {
        if (r->nalgs == 0) {
            fprintf(stderr, "collsynth %s: --output needs the sends (drop --stats-only)\n", CMD);
            status = CLI_EXIT_USAGE;
        } else {
            int wc = write_streamed(NULL, r->algs[0], NULL, NULL, 0, output);
            if (wc != CLI_EXIT_OK)
                status = wc;
        }
    }
    if (r)
        result_free(r);
    collective_free(&c);
    topology_free(t);
    return status;
}
