/*
 * cli_tacos.c - `collsynth solve ... --method tacos`: option parsing and the
 * human summary for TACOS runs.  The SMT side of `solve` lives in
 * cli_solve.c, which hands tacos runs here (see cli_tacos.h).
 */
#include "cli_tacos.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tacos.h"

static void usage(FILE *e)
{
    fprintf(e,
            "usage: collsynth solve TOPO COLLECTIVE --method tacos [--chunks N] [--trials N]\n"
            "       [--seed N] [--size BYTES] [--switch-degree D] [--threads N]\n"
            "       [--stats-only] [--output FILE] [--json]\n"
            "  TOPO        builtin name (mesh2d:8x8), JSON file or JSON text\n"
            "  COLLECTIVE  kind (allgather), kind:root (broadcast:3), JSON file or JSON text\n"
            "  --size      per-rank buffer share, with optional K/M/G suffix (powers of 2)\n"
            "  --stats-only  do not keep the sends (for very large topologies)\n");
}

static int parse_long(const char *s, long lo, long hi, long *v)
{
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || end == s || *end || x < lo || x > hi)
        return -1;
    *v = x;
    return 0;
}

static int parse_size(const char *s, double *v)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (errno || end == s)
        return -1;
    double mult = 1;
    if (*end) {
        switch (*end) {
        case 'k': case 'K': mult = 1024.0; break;
        case 'm': case 'M': mult = 1024.0 * 1024; break;
        case 'g': case 'G': mult = 1024.0 * 1024 * 1024; break;
        default: return -1;
        }
        end++;
        if (*end == 'i' || *end == 'I')
            end++;
        if (*end == 'b' || *end == 'B')
            end++;
        if (*end)
            return -1;
    }
    x *= mult;
    if (!(x > 0) || !isfinite(x))
        return -1;
    *v = x;
    return 0;
}

/* A kind name, kind:root, a JSON document, or a file holding one. */
static int load_collective(const char *spec, cs_collective *c, cs_error *err)
{
    json_t *doc = NULL;
    json_error_t jerr;
    if (spec[0] == '{') {
        doc = json_loads(spec, 0, &jerr);
    } else if (access(spec, R_OK) == 0) {
        doc = json_load_file(spec, 0, &jerr);
    } else {
        char name[64];
        const char *colon = strchr(spec, ':');
        size_t n = colon ? (size_t)(colon - spec) : strlen(spec);
        if (n >= sizeof name)
            return cs_error_set(err, CS_EINVAL, "collective", "unknown collective '%s'", spec);
        memcpy(name, spec, n);
        name[n] = '\0';
        cs_coll_kind kind;
        int rc = collective_kind_from_name(name, &kind);
        if (rc)
            return cs_error_set(err, CS_EINVAL, "collective", "unknown collective '%s'", spec);
        long root = collective_kind_is_rooted(kind) ? 0 : -1;
        if (colon) {
            if (!collective_kind_is_rooted(kind) || parse_long(colon + 1, 0, 1 << 30, &root))
                return cs_error_set(err, CS_EINVAL, "collective.root", "bad root in '%s'", spec);
        }
        collective_init(c, kind, (int)root);
        return CS_OK;
    }
    if (!doc)
        return cs_error_set(err, CS_EINVAL, "collective", "collective '%s': %s", spec, jerr.text);
    int rc = collective_from_json(doc, c, err);
    json_decref(doc);
    return rc;
}

int cli_solve_tacos(int argc, char **argv, FILE *out, FILE *errout)
{
    cs_tacos_options opt;
    tacos_options_default(&opt);
    const char *pos[2] = {NULL, NULL};
    const char *output = NULL;
    bool as_json = false;
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        long v;
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(out);
            return 0;
        } else if (strcmp(a, "--stats-only") == 0) {
            opt.keep_sends = false;
        } else if (strcmp(a, "--json") == 0) {
            as_json = true;
        } else if (a[0] == '-' && a[1] == '-') {
            if (!val) {
                fprintf(errout, "collsynth: %s needs a value\n", a);
                return 2;
            }
            i++;
            if (strcmp(a, "--method") == 0) {
                if (strcmp(val, "tacos") != 0) {
                    fprintf(errout, "collsynth: cli_solve_tacos runs --method tacos, not %s\n", val);
                    return 2;
                }
            } else if (strcmp(a, "--chunks") == 0 && !parse_long(val, 1, 1 << 20, &v)) {
                opt.chunks = (int)v;
            } else if (strcmp(a, "--trials") == 0 && !parse_long(val, 1, 100000, &v)) {
                opt.trials = (int)v;
            } else if (strcmp(a, "--threads") == 0 && !parse_long(val, 0, 1024, &v)) {
                opt.threads = (int)v;
            } else if (strcmp(a, "--switch-degree") == 0 && !parse_long(val, 0, 1 << 20, &v)) {
                opt.switch_degree = (int)v;
            } else if (strcmp(a, "--seed") == 0) {
                char *end;
                errno = 0;
                unsigned long long s = strtoull(val, &end, 10);
                if (errno || end == val || *end) {
                    fprintf(errout, "collsynth: --seed wants a non-negative integer, got '%s'\n", val);
                    return 2;
                }
                opt.seed = (uint64_t)s;
            } else if (strcmp(a, "--size") == 0) {
                if (parse_size(val, &opt.bytes)) {
                    fprintf(errout, "collsynth: --size wants a positive size like 1G, got '%s'\n", val);
                    return 2;
                }
            } else if (strcmp(a, "--output") == 0) {
                output = val;
            } else {
                fprintf(errout, "collsynth: bad option or value: %s %s\n", a, val);
                usage(errout);
                return 2;
            }
        } else if (npos < 2) {
            pos[npos++] = a;
        } else {
            fprintf(errout, "collsynth: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (npos < 2) {
        usage(errout);
        return 2;
    }
    cs_error err;
    cs_error_clear(&err);
    cs_topology *t = NULL;
    if (topology_load(pos[0], NULL, &t, &err) != CS_OK) {
        fprintf(errout, "collsynth: topology: %s\n", err.message);
        return 2;
    }
    cs_collective c;
    if (load_collective(pos[1], &c, &err) != CS_OK) {
        fprintf(errout, "collsynth: %s\n", err.message);
        topology_free(t);
        return 2;
    }
    cs_result *r = NULL;
    int rc = tacos_synthesize(t, &c, &opt, &r, &err);
    int status = 0;
    if (rc != CS_OK) {
        fprintf(errout, "collsynth: tacos: %s%s%s%s\n", err.message, err.field[0] ? " (" : "",
                err.field, err.field[0] ? ")" : "");
        status = rc == CS_EINVAL ? 2 : 1;
    } else if (as_json) {
        json_t *doc = result_to_json(r);
        char *s = doc ? json_dumps(doc, JSON_INDENT(2) | JSON_REAL_PRECISION(10)) : NULL;
        if (s)
            fprintf(out, "%s\n", s);
        free(s);
        json_decref(doc);
    } else {
        json_t *st = r->stats;
#define NUM(k) json_number_value(json_object_get(st, k))
        fprintf(out, "tacos %s on %s (%d ranks)%s\n", collective_kind_name(c.kind), t->name,
                t->ranks, opt.keep_sends ? "" : ", statistics only");
        fprintf(out, "  simulated time  %.3f us\n", NUM("sim_time_us"));
        fprintf(out, "  ideal           %.3f us\n", NUM("ideal_us"));
        fprintf(out, "  ratio           %.4f (ideal / simulated)\n", NUM("ratio"));
        fprintf(out, "  sends           %.0f over %.0f spans\n", NUM("sends"), NUM("spans"));
        fprintf(out, "  trials          %.0f (seed %llu)\n", NUM("trials"),
                (unsigned long long)opt.seed);
        if (json_object_get(st, "switch_degree"))
            fprintf(out, "  switch degree   %.0f\n", NUM("switch_degree"));
        fprintf(out, "  time taken      %.3f s, peak memory %.1f MB\n", NUM("seconds"),
                NUM("peak_rss_kb") / 1024.0);
#undef NUM
    }
    if (rc == CS_OK && output) {
        if (r->nalgs == 0) {
            fprintf(errout, "collsynth: --output needs the sends (drop --stats-only)\n");
            status = 2;
        } else {
            json_t *doc = algorithm_to_json(r->algs[0]);
            if (!doc || json_dump_file(doc, output, JSON_INDENT(1)) != 0) {
                fprintf(errout, "collsynth: cannot write %s\n", output);
                status = 1;
            }
            json_decref(doc);
        }
    }
    if (r)
        result_free(r);
    collective_free(&c);
    topology_free(t);
    return status;
}
