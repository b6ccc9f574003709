/*
 * cli_offline.c - the commands that need no server: topo, verify, simulate,
 * baseline, baselines; and the small helpers every CLI file shares (option
 * parsing, sizes, loading topologies and collectives, error reporting).
 *
 * Everything here is a thin shell over the library: parse, call, print.  The
 * exit code always follows the library status (cli_exit_code), so scripts can
 * tell "the answer is no" (1) from "you asked wrongly" (2).
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "algorithm.h"
#include "baseline.h"
#include "bounds.h"
#include "cli.h"
#include "simulate.h"
#include "verify.h"

/* ---- helpers ------------------------------------------------------------------------ */

int cli_usage_error(const char *cmd, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "collsynth%s%s: ", cmd ? " " : "", cmd ? cmd : "");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\nTry 'collsynth%s%s --help'.\n", cmd ? " " : "", cmd ? cmd : "");
    va_end(ap);
    return CLI_EXIT_USAGE;
}

int cli_exit_code(int status)
{
    switch (status) {
    case CS_OK:
        return CLI_EXIT_OK;
    case CS_EUNSAT:
    case CS_EVERIFY:
    case CS_EUNSUPPORTED:
    case CS_ETIMEOUT:
    case CS_ECANCELLED:
        return CLI_EXIT_NEGATIVE;
    case CS_EINVAL:
    case CS_EIO:
    case CS_ELIMIT:
        return CLI_EXIT_USAGE;
    default:
        return CLI_EXIT_INTERNAL;
    }
}

int cli_report_error(const char *cmd, const char *what, int status, const cs_error *err)
{
    const char *msg = err && err->message[0] ? err->message : cs_status_name(status);
    fprintf(stderr, "collsynth %s: %s%s%s", cmd, what ? what : "", what ? ": " : "", msg);
    if (err && err->field[0])
        fprintf(stderr, " [field %s]", err->field);
    fprintf(stderr, "\n");
    return cli_exit_code(status);
}

bool cli_is_help(const char *arg)
{
    return strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0;
}

int cli_option(const char *cmd, int argc, char **argv, int *i, const char *name,
               const char **value)
{
    const char *a = argv[*i];
    size_t n = strlen(name);
    if (strncmp(a, name, n) != 0)
        return 0;
    if (a[n] == '=') {
        *value = a + n + 1;
        return 1;
    }
    if (a[n] != '\0')
        return 0;
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "option %s needs a value", name);
        return -1;
    }
    *value = argv[++*i];
    return 1;
}

bool cli_parse_int(const char *s, int *out)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < -2147483647L || v > 2147483647L)
        return false;
    *out = (int)v;
    return true;
}

bool cli_parse_size(const char *s, double *bytes)
{
    if (!s || !*s)
        return false;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v) || v < 0)
        return false;
    static const struct {
        const char *suffix;
        double mult;
    } units[] = {{"", 1},          {"B", 1},          {"K", 1e3},          {"KB", 1e3},
                 {"M", 1e6},       {"MB", 1e6},       {"G", 1e9},          {"GB", 1e9},
                 {"KiB", 1024.0},  {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"Ki", 1024.0},
                 {"Mi", 1048576.0}, {"Gi", 1073741824.0}};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++)
        if (strcasecmp(end, units[i].suffix) == 0) {
            *bytes = v * units[i].mult;
            return true;
        }
    return false;
}

static bool file_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

int cli_load_topology(const char *cmd, const char *spec, cs_topology **out)
{
    cs_error err;
    cs_error_clear(&err);
    *out = NULL;
    int rc = topology_load(spec, NULL, out, &err);
    if (rc != CS_OK) {
        char what[300];
        snprintf(what, sizeof what, "topology '%s'", spec);
        int code = cli_report_error(cmd, what, rc, &err);
        return code == CLI_EXIT_NEGATIVE ? CLI_EXIT_USAGE : code;
    }
    return CLI_EXIT_OK;
}

int cli_document_topology(const char *cmd, const cs_result *r, const cs_algorithm *a,
                          cs_topology **out, char *why, size_t why_len)
{
    *out = NULL;
    cs_error err;
    cs_error_clear(&err);
    if (r && r->topology) {
        int rc = result_topology(r, out, &err);
        if (rc != CS_OK) {
            int code = cli_report_error(cmd, "the result's own topology", rc, &err);
            return code == CLI_EXIT_NEGATIVE ? CLI_EXIT_USAGE : code;
        }
        /* named when it is not what the name alone would give (a file's
         * topology, carried in the result) */
        cs_topology *named = NULL;
        cs_error nerr;
        if (json_is_object(r->topology) && topology_builtin((*out)->name, &named, &nerr) != CS_OK)
            fprintf(stderr, "collsynth %s: note: topology '%s' (%d ranks): the result's own\n",
                    cmd, (*out)->name, (*out)->ranks);
        topology_free(named);
        return CLI_EXIT_OK;
    }
    const char *name = a ? a->topology : r && r->nalgs ? r->algs[0]->topology : "";
    if (!name[0]) {
        snprintf(why, why_len, "the %s names no topology", r ? "result" : "algorithm");
        return CLI_EXIT_OK;
    }
    if (topology_builtin(name, out, &err) != CS_OK) {
        *out = NULL;
        snprintf(why, why_len, "the %s's topology '%s' is not a builtin%s", r ? "result" : "algorithm",
                 name, r ? " and the result does not carry it" : "");
    }
    return CLI_EXIT_OK;
}

int cli_load_collective(const char *cmd, const char *spec, int root, cs_collective *out)
{
    cs_error err;
    cs_error_clear(&err);
    cs_coll_kind kind;
    memset(out, 0, sizeof *out);
    /* "broadcast:3": the kind and its root in one word (a JSON document or
     * a file is never split) */
    const char *colon = strchr(spec, ':');
    if (colon && spec[0] != '{' && !file_exists(spec)) {
        char name[64];
        size_t n = (size_t)(colon - spec);
        int r = -1;
        if (n >= sizeof name || !cli_parse_int(colon + 1, &r) || r < 0)
            return cli_usage_error(cmd, "bad root in '%s' (KIND:ROOT, e.g. broadcast:3)", spec);
        if (root >= -1 && root != r)
            return cli_usage_error(cmd, "'%s' and --root %d name two different roots", spec,
                                   root);
        memcpy(name, spec, n);
        name[n] = '\0';
        return cli_load_collective(cmd, name, r, out);
    }
    if (collective_kind_from_name(spec, &kind) == CS_OK) {
        if (kind == CS_COLL_CUSTOM)
            return cli_usage_error(cmd, "a custom collective needs a JSON document with "
                                        "global_chunks, pre and post");
        bool rooted = collective_kind_is_rooted(kind);
        if (root >= -1 && !rooted)
            return cli_usage_error(cmd, "--root applies only to rooted collectives "
                                        "(broadcast, reduce, gather, scatter), not %s",
                                   spec);
        collective_init(out, kind, rooted ? (root >= 0 ? root : 0) : -1);
        return CLI_EXIT_OK;
    }
    char *text = NULL;
    const char *doc = spec;
    if (spec[0] != '{' && spec[0] != '[') {
        if (!file_exists(spec)) {
            const char *near = collective_kind_suggest(spec);
            if (near)
                return cli_usage_error(cmd, "unknown collective '%s': did you mean '%s'?", spec,
                                       near);
            return cli_usage_error(cmd,
                                   "unknown collective '%s' (expected allgather, reducescatter, "
                                   "allreduce, broadcast, reduce, gather, scatter, alltoall, a "
                                   "JSON document or a file holding one)",
                                   spec);
        }
        int rc = cs_read_file(spec, &text, NULL, &err);
        if (rc != CS_OK)
            return cli_report_error(cmd, "collective", rc, &err);
        doc = text;
    }
    json_error_t jerr;
    json_t *j = json_loads(doc, 0, &jerr);
    free(text);
    if (!j)
        return cli_usage_error(cmd, "collective: invalid JSON at line %d: %s", jerr.line,
                               jerr.text);
    int rc = collective_from_json(j, out, &err);
    json_decref(j);
    if (rc != CS_OK) {
        cli_report_error(cmd, "collective", rc, &err);
        return rc == CS_ENOMEM ? CLI_EXIT_INTERNAL : CLI_EXIT_USAGE;
    }
    if (root >= -1) {
        if (!collective_kind_is_rooted(out->kind)) {
            collective_free(out);
            return cli_usage_error(cmd, "--root applies only to rooted collectives");
        }
        out->root = root;
    }
    return CLI_EXIT_OK;
}

int cli_write_json(const char *cmd, const json_t *doc, const char *path)
{
    if (!doc) {
        fprintf(stderr, "collsynth %s: out of memory\n", cmd);
        return CLI_EXIT_INTERNAL;
    }
    cli_out o;
    int code = cli_out_open(&o, cmd, path);
    if (code != CLI_EXIT_OK)
        return code;
    errno = 0;
    if (json_dumpf(doc, o.f, JSON_INDENT(2) | CS_JSON_REAL) != 0 || fputc('\n', o.f) == EOF)
        o.error = errno ? errno : EIO;
    return cli_out_close(&o, true);
}

int cli_write_streamed(const char *cmd, cs_result_writer *w, long nsends, const char *path)
{
    cs_error err;
    cs_error_clear(&err);
    if (nsends <= CLI_PRETTY_MAX_SENDS) {
        /* small enough to read: the indented form, as every other document */
        char *text = NULL;
        size_t len = 0;
        if (result_writer_dump(w, &text, &len, &err) != CS_OK) {
            fprintf(stderr, "collsynth %s: %s\n", cmd, err.message);
            return CLI_EXIT_INTERNAL;
        }
        json_t *doc = json_loadb(text, len, 0, NULL);
        free(text);
        int rc = cli_write_json(cmd, doc, path);
        json_decref(doc);
        return rc;
    }
    cli_out o;
    int code = cli_out_open(&o, cmd, path);
    if (code != CLI_EXIT_OK)
        return code;
    errno = 0;
    int rc = result_writer_to_file(w, o.f, &err);
    if (rc == CS_OK && fputc('\n', o.f) == EOF)
        rc = cs_error_set(&err, CS_EIO, "", "cannot write the result document");
    if (rc != CS_OK) {
        int e = errno;
        fprintf(stderr, "collsynth %s: cannot write '%s': %s%s%s%s%s\n", cmd,
                path ? path : "stdout", err.message, e ? " (" : "", e ? strerror(e) : "",
                e ? ")" : "", o.tmp ? "; the file was left as it was" : "");
        cli_out_close(&o, false);
        return rc == CS_ENOMEM ? CLI_EXIT_INTERNAL : CLI_EXIT_USAGE;
    }
    return cli_out_close(&o, true);
}

/* What verify and simulate check: an Algorithm, or the algorithms of a
 * Result's frontier (what `solve -o` and the service write): all of them, or
 * the one at `index` (>= 0). */
typedef struct alg_list {
    cs_algorithm **algs;
    int n;
    bool from_result;  /* labels each algorithm with its frontier index */
    int first_index;   /* frontier index of algs[0] */
} alg_list;

static void alg_list_free(alg_list *l)
{
    for (int i = 0; i < l->n; i++)
        algorithm_free(l->algs[i]);
    free(l->algs);
    memset(l, 0, sizeof *l);
}

/* With t (where *t is NULL: no TOPOLOGY argument), the topology comes from
 * the document (cli_document_topology); none usable is a usage error. */
static int load_algorithms(const char *cmd, const char *path, int index, alg_list *out,
                           cs_topology **t)
{
    cs_error err;
    cs_error_clear(&err);
    memset(out, 0, sizeof *out);
    bool on_stdin = strcmp(path, "-") == 0;
    char what[300];
    snprintf(what, sizeof what, "algorithm '%s'", path);
    /* without the sends' DOM (algorithm_doc_load_file): a 1M-send result is
     * 1.7 GB as a DOM, tens of MB as columns */
    cs_algorithm *a = NULL;
    cs_result *r = NULL;
    json_error_t jerr;
    int rc = algorithm_doc_load_file(on_stdin ? "/dev/stdin" : path, &a, &r, NULL, &jerr, &err);
    if (rc != CS_OK) {
        if (jerr.text[0]) {
            fprintf(stderr, "collsynth %s: %s: invalid JSON at line %d: %s\n", cmd,
                    on_stdin ? "algorithm on stdin" : what, jerr.line, jerr.text);
            return CLI_EXIT_USAGE;
        }
        int code = cli_report_error(cmd, what, rc, &err);
        return code == CLI_EXIT_NEGATIVE ? CLI_EXIT_USAGE : code;
    }
    if (t && !*t) {
        char why[400] = "";
        int code = cli_document_topology(cmd, r, a, t, why, sizeof why);
        if (code == CLI_EXIT_OK && !*t)
            code = cli_usage_error(cmd, "missing TOPOLOGY: %s (give it: collsynth %s TOPOLOGY "
                                   "%s)", why, cmd, path);
        if (code != CLI_EXIT_OK) {
            algorithm_free(a);
            result_free(r);
            return code;
        }
    }
    if (r) {
        if (r->nalgs == 0 || index >= r->nalgs) {
            int n = r->nalgs;
            result_free(r);
            if (n == 0)
                return cli_usage_error(cmd, "%s is a result with an empty frontier: nothing "
                                            "to check", path);
            return cli_usage_error(cmd, "--index %d: the result's frontier has %d algorithm%s "
                                        "(0..%d)", index, n, n == 1 ? "" : "s", n - 1);
        }
        int lo = index >= 0 ? index : 0, hi = index >= 0 ? index + 1 : r->nalgs;
        out->algs = calloc((size_t)(hi - lo), sizeof *out->algs);
        if (!out->algs) {
            result_free(r);
            return cli_report_error(cmd, what, CS_ENOMEM, NULL);
        }
        for (int i = lo; i < hi; i++) {
            out->algs[out->n++] = r->algs[i];  /* taken from the result */
            r->algs[i] = NULL;
        }
        result_free(r);
        out->from_result = true;
        out->first_index = lo;
        return CLI_EXIT_OK;
    }
    if (index > 0) {
        algorithm_free(a);
        return cli_usage_error(cmd, "--index %d: %s is one algorithm, not a result", index, path);
    }
    out->algs = calloc(1, sizeof *out->algs);
    if (!out->algs) {
        algorithm_free(a);
        return cli_report_error(cmd, what, CS_ENOMEM, NULL);
    }
    out->algs[0] = a;
    out->n = 1;
    return CLI_EXIT_OK;
}

/* The TOPOLOGY and ALGORITHM arguments of verify and simulate (npos of the
 * two were given).  Returns an exit code; on success the caller frees both. */
static int load_topology_and_algorithms(const char *cmd, const char *const pos[2], int npos,
                                        int index, cs_topology **t, alg_list *l)
{
    *t = NULL;
    if (npos == 0)
        return cli_usage_error(cmd, "missing ALGORITHM (a JSON file)");
    /* one argument: the ALGORITHM, on the topology it carries; a builtin
     * name that is no file is a TOPOLOGY without its ALGORITHM */
    cs_topology *probe = NULL;
    cs_error perr;
    if (npos == 1 && strcmp(pos[0], "-") != 0 && access(pos[0], F_OK) != 0 &&
        topology_builtin(pos[0], &probe, &perr) == CS_OK) {
        topology_free(probe);
        return cli_usage_error(cmd, "missing ALGORITHM (a JSON file) after TOPOLOGY '%s'",
                               pos[0]);
    }
    int code = npos == 1 ? CLI_EXIT_OK : cli_load_topology(cmd, pos[0], t);
    if (code == CLI_EXIT_OK)
        code = load_algorithms(cmd, pos[npos - 1], index, l, npos == 1 ? t : NULL);
    if (code != CLI_EXIT_OK) {
        topology_free(*t);
        *t = NULL;
    }
    return code;
}

/* --index K of verify and simulate; returns an exit code. */
static int parse_index(const char *cmd, const char *v, int *index)
{
    if (!cli_parse_int(v, index) || *index < 0)
        return cli_usage_error(cmd, "bad --index '%s' (a frontier position >= 0)", v);
    return CLI_EXIT_OK;
}

static void print_algorithm_line(FILE *f, const cs_algorithm *a)
{
    fprintf(f, "%s %s", a->method[0] ? a->method : "algorithm",
            collective_kind_name(a->collective.kind));
    if (collective_kind_is_rooted(a->collective.kind))
        fprintf(f, " (root %d)", a->collective.root);
    fprintf(f, " on %s: %d ranks, %d chunks, %d steps, %d rounds, %ld sends", a->topology,
            a->ranks, a->chunks, a->steps, a->rounds, a->nsends);
}

/* ---- topo ------------------------------------------------------------------------------- */

static const char topo_help[] =
    "Usage: collsynth topo show NAME|FILE [--json]\n"
    "       collsynth topo list\n"
    "\n"
    "show: a summary of a topology (ranks, links, lanes, degrees, diameter,\n"
    "groups, switches); with --json the expanded Topology JSON.  NAME is a\n"
    "builtin (ring:8, dgx1, torus2d:4x4, ...), FILE a Topology JSON file.\n"
    "list: the builtin topology families.\n";

static void print_rank_list(const int *ranks, int n)
{
    int shown = n < 16 ? n : 16;
    for (int i = 0; i < shown; i++)
        printf("%s%d", i ? "," : "", ranks[i]);
    if (n > shown)
        printf(",... (%d)", n);
}

static int topo_show(const cs_topology *t)
{
    int p = t->ranks;
    long lanes = 0, physical = 0;
    double gmin = INFINITY, gmax = 0, amin = INFINITY, amax = 0;
    for (int i = 0; i < t->nlinks; i++) {
        const cs_link *l = &t->links[i];
        lanes += l->lanes;
        physical += l->switch_id < 0;
        gmin = fmin(gmin, l->gbps);
        gmax = fmax(gmax, l->gbps);
        amin = fmin(amin, l->alpha_us);
        amax = fmax(amax, l->alpha_us);
    }
    int dmin = p, dmax = 0, emin = 1 << 30, emax = 0, imin = 1 << 30, imax = 0;
    for (int r = 0; r < p; r++) {
        int d = t->out_begin[r + 1] - t->out_begin[r];
        dmin = d < dmin ? d : dmin;
        dmax = d > dmax ? d : dmax;
        int e = topology_egress_lanes(t, r), in = topology_ingress_lanes(t, r);
        emin = e < emin ? e : emin;
        emax = e > emax ? e : emax;
        imin = in < imin ? in : imin;
        imax = in > imax ? in : imax;
    }
    int diameter = -1;
    cs_error err;
    if (topology_diameter(t, &diameter, &err) != CS_OK)
        diameter = -1;
    printf("topology   %s\n", t->name);
    printf("ranks      %d\n", p);
    printf("links      %d directed (%ld physical, %ld from switches), %ld lanes\n", t->nlinks,
           physical, (long)t->nlinks - physical, lanes);
    if (t->nlinks > 0)
        printf("bandwidth  %g..%g GB/s per lane, alpha %g..%g us\n", gmin, gmax, amin, amax);
    printf("degree     out-links %d..%d; egress lanes %d..%d, ingress lanes %d..%d per round\n",
           dmin, dmax, emin, emax, imin, imax);
    if (diameter >= 0)
        printf("diameter   %d hop%s\n", diameter, diameter == 1 ? "" : "s");
    printf("groups     %d", t->ngroups);
    for (int g = 0; g < t->ngroups && g < 8; g++) {
        printf("%s[", g ? " " : ": ");
        print_rank_list(t->groups[g].ranks, t->groups[g].nranks);
        printf("]");
    }
    if (t->ngroups > 8)
        printf(" ...");
    printf("\n");
    printf("switches   %d", t->nswitches);
    for (int s = 0; s < t->nswitches && s < 8; s++) {
        printf("%s%s (%d ranks, %g GB/s", s ? ", " : ": ", t->switches[s].name,
               t->switches[s].nranks, t->switches[s].gbps);
        if (t->switches[s].copy)
            printf(", copy-capable: node %d", t->switches[s].node);
        printf(")");
    }
    if (t->nswitches > 8)
        printf(", ...");
    printf("\n");
    int user_shared = 0;
    for (int s = 0; s < t->nshared; s++)
        user_shared += t->shared[s].switch_id < 0;
    printf("shared     %d sets (%d from switches)\n", t->nshared, t->nshared - user_shared);
    return CLI_EXIT_OK;
}

int cli_cmd_topo(int argc, char **argv, const cli_globals *g)
{
    (void)g;
    const char *cmd = "topo";
    if (argc < 2)
        return cli_usage_error(cmd, "missing subcommand (show or list)");
    if (cli_is_help(argv[1])) {
        fputs(topo_help, stdout);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "list") == 0) {
        for (int i = 2; i < argc; i++) {
            if (cli_is_help(argv[i])) {
                fputs(topo_help, stdout);
                return CLI_EXIT_OK;
            }
            return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
        int n = 0;
        const cs_builtin_info *b = topology_builtin_list(&n);
        for (int i = 0; i < n; i++)
            printf("%-16s %-16s %s\n", b[i].syntax, b[i].example, b[i].description);
        return CLI_EXIT_OK;
    }
    if (strcmp(argv[1], "show") != 0)
        return cli_usage_error(cmd, "unknown subcommand '%s' (expected show or list)", argv[1]);
    const char *spec = NULL;
    bool as_json = false;
    for (int i = 2; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            fputs(topo_help, stdout);
            return CLI_EXIT_OK;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (!spec) {
            spec = argv[i];
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    if (!spec)
        return cli_usage_error(cmd, "missing topology (a builtin name or a JSON file)");
    cs_topology *t = NULL;
    int code = cli_load_topology(cmd, spec, &t);
    if (code != CLI_EXIT_OK)
        return code;
    if (as_json) {
        json_t *doc = topology_to_json(t);
        code = cli_write_json(cmd, doc, NULL);
        json_decref(doc);
    } else {
        code = topo_show(t);
    }
    topology_free(t);
    return code;
}

/* ---- verify ------------------------------------------------------------------------------ */

static const char verify_help[] =
    "Usage: collsynth verify [TOPOLOGY] ALGORITHM.json [--index K] [--json]\n"
    "\n"
    "Replays the algorithm on the topology and checks links, causality,\n"
    "bandwidth, values and the postcondition.  Prints the verdict and the\n"
    "reasons; ALGORITHM may be - for stdin.  ALGORITHM is an Algorithm or a\n"
    "Result (what `solve -o` and the service write): every algorithm of its\n"
    "frontier is checked, or only the K-th with --index K.  Without TOPOLOGY,\n"
    "the one the document carries: a Result's own \"topology\", else the\n"
    "algorithm's \"topology\" name when it is a builtin.\n"
    "  --index K  a Result's K-th frontier algorithm (0 = the first)\n"
    "  --json     print {\"valid\": ..., \"problems\": N, \"reasons\": [...]} (a Result\n"
    "             adds \"algorithms\": one such object per algorithm, with its index)\n"
    "Exit: 0 valid (all of them), 1 invalid, 2 usage or input error.\n";

int cli_cmd_verify(int argc, char **argv, const cli_globals *g)
{
    (void)g;
    const char *cmd = "verify";
    const char *pos[2] = {NULL, NULL};
    int npos = 0, index = -1;
    bool as_json = false;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (cli_is_help(argv[i])) {
            fputs(verify_help, stdout);
            return CLI_EXIT_OK;
        } else if ((m = cli_option(cmd, argc, argv, &i, "--index", &v)) != 0) {
            if (m < 0 || parse_index(cmd, v, &index) != CLI_EXIT_OK)
                return CLI_EXIT_USAGE;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    cs_topology *t = NULL;
    alg_list l;
    memset(&l, 0, sizeof l);
    int code = load_topology_and_algorithms(cmd, pos, npos, index, &t, &l);
    if (code != CLI_EXIT_OK)
        return code;
    json_t *all = as_json ? json_array() : NULL, *all_reasons = as_json ? json_array() : NULL;
    json_t *single_extra = json_object(); /* a lone Algorithm's extra members */
    bool all_ok = true;
    int problems = 0;
    for (int k = 0; k < l.n && code == CLI_EXIT_OK; k++) {
        const cs_algorithm *a = l.algs[k];
        char label[32] = "";
        if (l.from_result)
            snprintf(label, sizeof label, "[%d] ", l.first_index + k);
        if (a->topology[0] && strcmp(a->topology, t->name) != 0 && k == 0)
            fprintf(stderr, "collsynth verify: note: the algorithm names topology '%s', checking "
                            "it on '%s'\n",
                    a->topology, t->name);
        cs_verify_report rep;
        memset(&rep, 0, sizeof rep);
        cs_error err;
        cs_error_clear(&err);
        int rc = algorithm_verify_report(t, a, &rep, &err);
        if (rc != CS_OK && rc != CS_EVERIFY) {
            code = cli_report_error(cmd, "cannot check", rc, &err);
            if (code == CLI_EXIT_NEGATIVE)
                code = CLI_EXIT_USAGE;
            break;
        }
        all_ok = all_ok && rep.ok;
        problems += rep.nproblems;
        /* a valid timed schedule through switch nodes: how long its copies
         * wait in them (verify.h; 0 = realizable on a zero-buffer switch) */
        cs_switch_hold hold;
        bool have_hold = rep.ok && a->switch_nodes > 0 && algorithm_is_timed(a) &&
                         algorithm_switch_hold(t, a, &hold, NULL) == CS_OK;
        json_t *jhold = have_hold ? json_pack("{s:I, s:I, s:f, s:i}", "copies",
                                              (json_int_t)hold.copies, "held_copies",
                                              (json_int_t)hold.held_copies, "max_hold_us",
                                              hold.max_hold_us, "peak_chunks", hold.peak_chunks)
                                  : NULL;
        if (as_json) {
            json_t *reasons = json_array();
            for (int i = 0; i < rep.nreasons; i++) {
                json_array_append_new(reasons, json_string(rep.reasons[i]));
                char line[600];
                snprintf(line, sizeof line, "%s%s", label, rep.reasons[i]);
                json_array_append_new(all_reasons, json_string(line));
            }
            json_t *one = json_object();
            if (l.from_result)
                json_object_set_new(one, "index", json_integer(l.first_index + k));
            json_object_set_new(one, "valid", json_boolean(rep.ok));
            json_object_set_new(one, "problems", json_integer(rep.nproblems));
            json_object_set_new(one, "reasons", reasons);
            if (jhold)
                json_object_set(one, "switch_hold", jhold);
            json_array_append_new(all, one);
            if (jhold && !l.from_result)
                json_object_set(single_extra, "switch_hold", jhold);
        } else if (rep.ok) {
            printf("%svalid: ", label);
            print_algorithm_line(stdout, a);
            printf("\n");
            if (have_hold && hold.held_copies == 0)
                printf("  switch nodes: %ld copies, each leaves as its chunk arrives "
                       "(zero-buffer)\n", hold.copies);
            else if (have_hold)
                printf("  switch nodes: %ld copies, %ld wait in a node (longest %.4g us, at "
                       "most %d chunks held at once)\n", hold.copies, hold.held_copies,
                       hold.max_hold_us, hold.peak_chunks);
        } else {
            printf("%sinvalid: %d problem%s", label, rep.nproblems,
                   rep.nproblems == 1 ? "" : "s");
            if (rep.nproblems > rep.nreasons)
                printf(" (first %d shown)", rep.nreasons);
            printf("\n");
            for (int i = 0; i < rep.nreasons; i++)
                printf("  - %s\n", rep.reasons[i]);
        }
        json_decref(jhold);
    }
    if (code == CLI_EXIT_OK && as_json) {
        json_t *doc = json_object();
        json_object_set_new(doc, "valid", json_boolean(all_ok));
        json_object_set_new(doc, "problems", json_integer(problems));
        json_object_set_new(doc, "reasons", json_incref(all_reasons));
        json_object_update(doc, single_extra);
        if (l.from_result)
            json_object_set_new(doc, "algorithms", json_incref(all));
        code = cli_write_json(cmd, doc, NULL);
        json_decref(doc);
    }
    json_decref(all);
    json_decref(all_reasons);
    json_decref(single_extra);
    if (code == CLI_EXIT_OK && !all_ok)
        code = CLI_EXIT_NEGATIVE;
    alg_list_free(&l);
    topology_free(t);
    return code;
}

/* ---- simulate ------------------------------------------------------------------------------ */

static const char simulate_help[] =
    "Usage: collsynth simulate [TOPOLOGY] ALGORITHM.json [--size BYTES] [--index K]\n"
    "                          [--all-links] [--json]\n"
    "\n"
    "Runs the congestion-aware simulator: completion time, the cut-aware time\n"
    "bound and ratio_to_bound (bound / time, at most 1), the alpha-beta cost,\n"
    "bytes moved (total and across groups) and a per-link table (links that\n"
    "carried data): busy_us is the mean busy time of the link's lanes (at most\n"
    "the total time), util that over the total time.  The TACOS paper's ideal\n"
    "is printed under its own name (it is not a lower bound).  ALGORITHM is an\n"
    "Algorithm or a Result: every algorithm of its frontier is simulated, or\n"
    "only the K-th with --index K.  Without TOPOLOGY, the one the document\n"
    "carries (as for verify).\n"
    "  --size BYTES   per-rank buffer size (default 1MiB); suffixes K, M, G\n"
    "                 (powers of 1000) and KiB, MiB, GiB (powers of 1024)\n"
    "  --index K      a Result's K-th frontier algorithm (0 = the first)\n"
    "  --all-links    list idle links too\n"
    "  --json         print the figures as JSON (a Result with several algorithms:\n"
    "                 {\"algorithms\": [one object per algorithm, with its index]})\n"
    "The algorithm is verified first: an invalid one exits 1.\n";

/* Simulates one algorithm: the table on stdout, or *doc_out (as_json). */
static int simulate_one(const char *cmd, const cs_topology *t, const cs_algorithm *a,
                        double bytes, bool all_links, bool as_json, json_t **doc_out)
{
    cs_error err;
    cs_error_clear(&err);
    int rc = algorithm_verify(t, a, &err);
    if (rc != CS_OK)
        return cli_report_error(cmd, "the algorithm is invalid", rc, &err);
    cs_sim_result r;
    memset(&r, 0, sizeof r);
    rc = simulate_algorithm(t, a, bytes, &r, &err);
    if (rc != CS_OK)
        return cli_report_error(cmd, "simulation failed", rc, &err);
    double cost = algorithm_cost_us(a, t, bytes);
    cs_time_bound tb;
    int code = cli_time_bound(cmd, t, &a->collective, &tb);
    if (code != CLI_EXIT_OK) {
        sim_result_free(&r);
        return code;
    }
    double bound_us = time_bound_us(&tb, bytes, a->chunks);
    double ratio = r.time_us > 0 ? bound_us / r.time_us : 1.0;
    if (as_json) {
        json_t *doc = json_object();
        json_t *links = json_array();
        for (int i = 0; i < r.nlinks && i < t->nlinks; i++) {
            if (!all_links && r.link_busy_us[i] <= 0)
                continue;
            json_t *l = json_object();
            json_object_set_new(l, "src", json_integer(t->links[i].src));
            json_object_set_new(l, "dst", json_integer(t->links[i].dst));
            json_object_set_new(l, "lanes", json_integer(t->links[i].lanes));
            json_object_set_new(l, "busy_us", json_real(r.link_busy_us[i] / t->links[i].lanes));
            json_object_set_new(l, "lane_busy_us", json_real(r.link_busy_us[i]));
            json_object_set_new(l, "utilization", json_real(r.link_utilization[i]));
            json_array_append_new(links, l);
        }
        json_object_set_new(doc, "bytes", json_real(bytes));
        json_object_set_new(doc, "chunk_bytes", json_real(r.chunk_bytes));
        json_object_set_new(doc, "time_us", json_real(r.time_us));
        /* a timed schedule at its own size: its claim beside the run (as
         * soon as each send can: simulate.h) */
        if (r.scheduled_size)
            json_object_set_new(doc, "scheduled_us", json_real(r.scheduled_us));
        json_object_set_new(doc, "bound_us", json_real(bound_us));
        json_object_set_new(doc, "ratio_to_bound", json_real(ratio));
        json_object_set_new(doc, "bound", time_bound_to_json(&tb));
        json_object_set_new(doc, "ideal_us", json_real(r.ideal_us));
        json_object_set_new(doc, "alpha_beta_us", json_real(cost));
        json_object_set_new(doc, "total_bytes", json_real(r.total_bytes));
        json_object_set_new(doc, "cross_group_bytes", json_real(r.cross_group_bytes));
        json_object_set_new(doc, "max_utilization", json_real(r.max_utilization));
        json_object_set_new(doc, "links", links);
        *doc_out = doc;
    } else {
        printf("algorithm    ");
        print_algorithm_line(stdout, a);
        printf("\n");
        printf("size         %.0f bytes per rank (chunk %.0f bytes)\n", bytes, r.chunk_bytes);
        printf("time         %.3f us\n", r.time_us);
        if (r.scheduled_size)
            printf("scheduled    %.3f us (the schedule's own times; the simulation starts each "
                   "send as soon as it can)\n", r.scheduled_us);
        printf("bound        %.3f us (%s%s): T >= max(%.6g + %.6g x size, %.6g) us\n", bound_us,
               tb.kind, tb.exact ? ", exact" : "", tb.latency_us, tb.bandwidth_us_per_byte *
               (tb.per_chunk ? 1.0 / a->chunks : 1.0), tb.path_latency_us);
        printf("  cut        %s\n", tb.cut);
        if (tb.path[0])
            printf("  path       %s\n", tb.path);
        printf("ratio_to_bound %.3f (bound / time)\n", ratio);
        printf("tacos ideal  %.3f us (the TACOS paper's figure; not a lower bound)\n", r.ideal_us);
        printf("alpha-beta   %.3f us\n", cost);
        printf("bytes moved  %.0f total, %.0f cross-group", r.total_bytes, r.cross_group_bytes);
        if (r.total_bytes > 0 && t->ngroups > 0)
            printf(" (%.1f%%)", 100.0 * r.cross_group_bytes / r.total_bytes);
        printf("\n");
        printf("utilization  max %.3f\n", r.max_utilization);
        printf("\n%-14s %5s %9s %12s %7s\n", "link", "lanes", "GB/s", "busy_us", "util");
        for (int i = 0; i < r.nlinks && i < t->nlinks; i++) {
            if (!all_links && r.link_busy_us[i] <= 0)
                continue;
            char name[32];
            snprintf(name, sizeof name, "%d->%d", t->links[i].src, t->links[i].dst);
            /* busy_us: the mean over the link's lanes, so it never exceeds the time */
            printf("%-14s %5d %9g %12.3f %7.3f\n", name, t->links[i].lanes, t->links[i].gbps,
                   r.link_busy_us[i] / t->links[i].lanes, r.link_utilization[i]);
        }
    }
    sim_result_free(&r);
    return CLI_EXIT_OK;
}

int cli_cmd_simulate(int argc, char **argv, const cli_globals *g)
{
    (void)g;
    const char *cmd = "simulate";
    const char *pos[2] = {NULL, NULL};
    int npos = 0, index = -1;
    bool as_json = false, all_links = false;
    double bytes = 1048576.0;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (cli_is_help(argv[i])) {
            fputs(simulate_help, stdout);
            return CLI_EXIT_OK;
        } else if ((m = cli_option(cmd, argc, argv, &i, "--size", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!cli_parse_size(v, &bytes) || bytes <= 0)
                return cli_usage_error(cmd, "bad --size '%s' (e.g. 1048576, 64K, 1MiB)", v);
        } else if ((m = cli_option(cmd, argc, argv, &i, "--index", &v)) != 0) {
            if (m < 0 || parse_index(cmd, v, &index) != CLI_EXIT_OK)
                return CLI_EXIT_USAGE;
        } else if (strcmp(argv[i], "--json") == 0) {
            as_json = true;
        } else if (strcmp(argv[i], "--all-links") == 0) {
            all_links = true;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    cs_topology *t = NULL;
    alg_list l;
    memset(&l, 0, sizeof l);
    int code = load_topology_and_algorithms(cmd, pos, npos, index, &t, &l);
    if (code != CLI_EXIT_OK)
        return code;
    json_t *docs = json_array();
    for (int k = 0; k < l.n && code == CLI_EXIT_OK; k++) {
        if (!as_json && l.from_result)
            printf("%s[%d]\n", k ? "\n" : "", l.first_index + k);
        json_t *doc = NULL;
        code = simulate_one(cmd, t, l.algs[k], bytes, all_links, as_json, &doc);
        if (doc) {
            if (l.from_result)
                json_object_set_new(doc, "index", json_integer(l.first_index + k));
            json_array_append_new(docs, doc);
        }
    }
    if (code == CLI_EXIT_OK && as_json) {
        json_t *out = json_array_size(docs) == 1 ? json_incref(json_array_get(docs, 0))
                                                 : json_pack("{s:O}", "algorithms", docs);
        code = cli_write_json(cmd, out, NULL);
        json_decref(out);
    }
    json_decref(docs);
    alg_list_free(&l);
    topology_free(t);
    return code;
}

/* ---- baseline(s) ----------------------------------------------------------------------------- */

static const char baseline_help[] =
    "Usage: collsynth baseline NAME TOPOLOGY COLLECTIVE [--root R] [--chunks C]\n"
    "                          [--size BYTES] [-o FILE]\n"
    "\n"
    "Generates a hand-designed algorithm (see 'collsynth baselines') and prints\n"
    "its Algorithm JSON.  The result is verified before it is printed, and\n"
    "simulated at --size: the JSON carries ratio_to_bound (the time bound over\n"
    "the simulated time, at most 1), bound_bytes, bound_us and simulated_us.\n"
    "  COLLECTIVE   a kind (allgather, reducescatter, allreduce, broadcast, reduce,\n"
    "               gather, scatter, alltoall) or a Collective JSON document/file\n"
    "  --root R     root of a rooted collective (default 0)\n"
    "  --chunks C   chunks per rank share (default: the baseline's natural count)\n"
    "  --size BYTES per-rank share for ratio_to_bound (default 64MiB)\n"
    "  -o FILE      write the JSON to FILE instead of stdout (and a summary to stderr)\n"
    "Exit: 0 ok, 1 the baseline has no algorithm for this collective/topology,\n"
    "2 usage or input error.\n";

int cli_cmd_baseline(int argc, char **argv, const cli_globals *g)
{
    (void)g;
    const char *cmd = "baseline";
    const char *pos[3] = {NULL, NULL, NULL};
    const char *outpath = NULL;
    int npos = 0, root = -2, chunks = 0;
    double bytes = 64.0 * 1048576;
    for (int i = 1; i < argc; i++) {
        const char *v = NULL;
        int m;
        if (cli_is_help(argv[i])) {
            fputs(baseline_help, stdout);
            return CLI_EXIT_OK;
        } else if ((m = cli_option(cmd, argc, argv, &i, "--size", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!cli_parse_size(v, &bytes) || bytes <= 0)
                return cli_usage_error(cmd, "bad --size '%s' (e.g. 1048576, 64K, 1MiB)", v);
        } else if ((m = cli_option(cmd, argc, argv, &i, "--root", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!cli_parse_int(v, &root) || root < 0)
                return cli_usage_error(cmd, "bad --root '%s' (a rank >= 0)", v);
        } else if ((m = cli_option(cmd, argc, argv, &i, "--chunks", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            if (!cli_parse_int(v, &chunks) || chunks < 1)
                return cli_usage_error(cmd, "bad --chunks '%s' (an integer >= 1)", v);
        } else if ((m = cli_option(cmd, argc, argv, &i, "-o", &v)) != 0 ||
                   (m = cli_option(cmd, argc, argv, &i, "--output", &v)) != 0) {
            if (m < 0)
                return CLI_EXIT_USAGE;
            outpath = v;
        } else if (argv[i][0] == '-' && argv[i][1] != '\0') {
            return cli_usage_error(cmd, "unknown option '%s'", argv[i]);
        } else if (npos < 3) {
            pos[npos++] = argv[i];
        } else {
            return cli_usage_error(cmd, "unexpected argument '%s'", argv[i]);
        }
    }
    static const char *missing[] = {"missing NAME, TOPOLOGY and COLLECTIVE",
                                    "missing TOPOLOGY and COLLECTIVE", "missing COLLECTIVE"};
    if (npos < 3)
        return cli_usage_error(cmd, "%s", missing[npos]);
    if (!baseline_exists(pos[0])) {
        int nb = 0;
        const cs_baseline_info *bl = baseline_list(&nb);
        const char *names[64];
        int n = 0;
        for (int i = 0; i < nb && n < 64; i++)
            names[n++] = bl[i].name;
        const char *near = cs_nearest_name(pos[0], strlen(pos[0]), names, n);
        if (near)
            return cli_usage_error(cmd, "unknown baseline '%s': did you mean '%s'?", pos[0], near);
        return cli_usage_error(cmd, "unknown baseline '%s' (see 'collsynth baselines')", pos[0]);
    }
    cs_topology *t = NULL;
    int code = cli_load_topology(cmd, pos[1], &t);
    if (code != CLI_EXIT_OK)
        return code;
    cs_collective c;
    code = cli_load_collective(cmd, pos[2], root, &c);
    if (code != CLI_EXIT_OK) {
        topology_free(t);
        return code;
    }
    cs_baseline_options opt = {chunks};
    cs_algorithm *a = NULL;
    cs_error err;
    cs_error_clear(&err);
    int rc = baseline_generate(pos[0], t, &c, &opt, &a, &err);
    if (rc != CS_OK) {
        code = cli_report_error(cmd, pos[0], rc, &err);
    } else {
        json_t *doc = algorithm_to_json(a);
        cs_time_bound tb;
        cs_sim_result sr;
        bool rated = false;
        double bound_us = 0;
        if (doc && collective_time_bound(t, &c, &tb, NULL) == CS_OK &&
            simulate_algorithm(t, a, bytes, &sr, NULL) == CS_OK) {
            bound_us = time_bound_us(&tb, bytes, a->chunks);
            json_object_set_new(doc, "ratio_to_bound",
                                json_real(sr.time_us > 0 ? bound_us / sr.time_us : 1.0));
            json_object_set_new(doc, "bound_bytes", json_real(bytes));
            json_object_set_new(doc, "bound_us", json_real(bound_us));
            json_object_set_new(doc, "simulated_us", json_real(sr.time_us));
            rated = true;
        }
        code = cli_write_json(cmd, doc, outpath);
        json_decref(doc);
        if (code == CLI_EXIT_OK && outpath && strcmp(outpath, "-") != 0) {
            fprintf(stderr, "wrote %s: ", outpath);
            print_algorithm_line(stderr, a);
            fprintf(stderr, "\n");
            if (rated) {
                char size[32], b[32], s[32];
                cs_format_size(size, sizeof size, bytes);
                cli_fmt_us(b, sizeof b, bound_us);
                cli_fmt_us(s, sizeof s, sr.time_us);
                fprintf(stderr, "  at %s: simulated %s, time bound %s (%s), ratio_to_bound %.3f\n",
                        size, s, b, tb.kind, sr.time_us > 0 ? bound_us / sr.time_us : 1.0);
            }
        }
        if (rated)
            sim_result_free(&sr);
    }
    algorithm_free(a);
    collective_free(&c);
    topology_free(t);
    return code;
}

int cli_cmd_baselines(int argc, char **argv, const cli_globals *g)
{
    (void)g;
    for (int i = 1; i < argc; i++) {
        if (cli_is_help(argv[i])) {
            printf("Usage: collsynth baselines\n\nLists the baselines, the collectives each "
                   "implements, and what they are.\n");
            return CLI_EXIT_OK;
        }
        return cli_usage_error("baselines", "unexpected argument '%s'", argv[i]);
    }
    int n = 0;
    const cs_baseline_info *b = baseline_list(&n);
    for (int i = 0; i < n; i++) {
        printf("%-19s", b[i].name);
        bool first = true;
        for (int k = 0; k < CS_COLL_KIND_COUNT; k++)
            if (baseline_supports(b[i].name, (cs_coll_kind)k)) {
                printf("%s%s", first ? "" : ",", collective_kind_name((cs_coll_kind)k));
                first = false;
            }
        printf("\n%19s%s\n", "", b[i].description);
    }
    return CLI_EXIT_OK;
}
