/*
 * cli_remote.c - the CLI commands that talk to a running collsynthd:
 * submit, status, wait, get, cancel and (remote) topologies.
 *
 * They are thin: build the contract's request (CONTRACT.md section 4), send
 * it with http_client, print what came back for a person (or the raw JSON
 * with --json).  The server is named by --server URL or COLLSYNTH_SERVER and
 * the bearer token comes from COLLSYNTH_TOKEN (or --token-file FILE).
 *
 * Exit codes are part of the interface (docs/clients.md):
 *   0  done
 *   1  the server answered with a failure or a negative result (job failed,
 *      cancelled, unsat, unknown job/key, auth refused, 5xx)
 *   2  usage or input error (bad arguments, unreadable file, the server's 400)
 *   3  the server could not be reached (refused, resolve, timeout)
 * Errors from the server are printed as the server's own words:
 *   collsynth: error invalid: rank 9 out of range (field links[3].src)
 *
 * `wait` polls GET /v1/jobs/{id}.  On a terminal (isatty(stderr)) it draws one
 * progress line rewritten in place: a bar when the total is known, instances
 * tried, the best cost so far and the elapsed time; otherwise it prints one
 * plain line each time the progress changes, so logs stay readable.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "cs_common.h"
#include "http_client.h"
#include "topology.h"

/* cli.h's codes under the names this file thinks in. */
enum {
    EXIT_OK = CLI_EXIT_OK,
    EXIT_REMOTE = CLI_EXIT_NEGATIVE,
    EXIT_USAGE = CLI_EXIT_USAGE,
    EXIT_UNREACHABLE = CLI_EXIT_INTERNAL
};

/* Options every remote command accepts, wherever they appear. */
typedef struct remote_opts {
    const char *server;
    const char *token_file;
    double timeout_s;
    bool json;
    const char *bad_option;  /* take_common_option: the option whose value is bad */
} remote_opts;

/* A number of seconds >= 0 ("30", "1.5"), whole: "abc" or "5s" are refused,
 * not read as 0 by atof. */
static bool parse_seconds(const char *s, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : -1;
    if (!s || !*s || errno || *end != '\0' || !(v >= 0) || v > 1e9)
        return false;
    *out = v;
    return true;
}

/* The usage error for o->bad_option. */
static int bad_option_error(const char *cmd, const remote_opts *o)
{
    const char *name = o->bad_option ? o->bad_option : "option";
    return cli_usage_error(cmd, "%s needs a value%s", name,
                           strcmp(name, "--timeout") == 0 ? " (seconds >= 0)" : "");
}


/* Consumes a common option at argv[*i]; true when it was one.  *bad is set
 * (and o->bad_option) when the option lacks its value or it is malformed. */
static bool take_common_option(int argc, char **argv, int *i, remote_opts *o, bool *bad)
{
    const char *a = argv[*i];
    const char *val = NULL;
    if (strcmp(a, "--json") == 0) {
        o->json = true;
        return true;
    }
    const char *names[] = {"--server", "--token-file", "--timeout"};
    for (int k = 0; k < 3; k++) {
        size_t n = strlen(names[k]);
        if (strncmp(a, names[k], n) == 0 && (a[n] == '\0' || a[n] == '=')) {
            if (a[n] == '=') {
                val = a + n + 1;
            } else if (*i + 1 < argc) {
                val = argv[++*i];
            } else {
                *bad = true;
                o->bad_option = names[k];
                return true;
            }
            if (k == 0)
                o->server = val;
            else if (k == 1)
                o->token_file = val;
            else {
                if (!parse_seconds(val, &o->timeout_s)) {
                    *bad = true;
                    o->bad_option = names[k];
                }
            }
            return true;
        }
    }
    return false;
}

/* Sets up the client from the options and the environment. */
static int connect_client(const char *cmd, const remote_opts *o, const cli_globals *g,
                          cs_http_client *c)
{
    const char *server = o->server != NULL ? o->server : (g != NULL ? g->server : NULL);
    if (server == NULL || server[0] == '\0')
        server = getenv("COLLSYNTH_SERVER");
    if (server == NULL || server[0] == '\0')
        return cli_usage_error(cmd, "needs a server: --server URL or COLLSYNTH_SERVER");
    char *token_buf = NULL;
    const char *token = getenv("COLLSYNTH_TOKEN");
    cs_error err;
    if (o->token_file != NULL) {
        if (cs_read_file(o->token_file, &token_buf, NULL, &err) != CS_OK) {
            fprintf(stderr, "collsynth %s: %s\n", cmd, err.message);
            return EXIT_USAGE;
        }
        token = token_buf;
    }
    int rc = cs_http_client_init(c, server, token, o->timeout_s, &err);
    free(token_buf);
    if (rc != CS_OK) {
        fprintf(stderr, "collsynth %s: %s\n", cmd, err.message);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* Maps an HTTP error answer to the exit code and prints the server's words. */
static int report_http_error(const char *cmd, const cs_http_response *r)
{
    char code[64], message[1024], field[256];
    if (cs_http_error_from_body(r, code, sizeof code, message, sizeof message, field,
                                sizeof field)) {
        fprintf(stderr, "collsynth %s: error %s: %s", cmd, code[0] ? code : "(no code)",
                message[0] ? message : "(no message)");
        if (field[0])
            fprintf(stderr, " (field %s)", field);
        fprintf(stderr, " [HTTP %ld]\n", r->status);
    } else {
        /* not the contract's error object: something in front of the daemon
         * answered (a proxy's 404 for a wrong path prefix, a login page) */
        fprintf(stderr, "collsynth %s: server answered HTTP %ld, not in collsynthd's error form "
                "(a proxy in front of it? check the --server URL and its path prefix)", cmd,
                r->status);
        if (r->body != NULL && r->body[0] != '\0') {
            fprintf(stderr, ": ");
            for (size_t i = 0; i < r->len && i < 300 && r->body[i]; i++) /* one line */
                fputc(r->body[i] == '\n' || r->body[i] == '\r' ? ' ' : r->body[i], stderr);
        }
        fprintf(stderr, "\n");
    }
    if (r->status == 400 || r->status == 413 || r->status == 422)
        return EXIT_USAGE;
    return EXIT_REMOTE;
}

/* One request; on transport failure prints and returns EXIT_UNREACHABLE, on
 * an HTTP error prints the server's message and returns 1 or 2; on a 2xx
 * returns EXIT_OK with *doc parsed (when want_json) and *resp kept. */
static int call(const char *cmd, const cs_http_client *c, const char *method,
                const char *path, const char *body, cs_http_response *resp, json_t **doc)
{
    cs_error err;
    if (doc != NULL)
        *doc = NULL;
    int rc = cs_http_request(c, method, path, body, resp, &err);
    if (rc != CS_OK) {
        fprintf(stderr, "collsynth %s: %s\n", cmd, err.message);
        return resp->unreachable ? EXIT_UNREACHABLE : EXIT_REMOTE;
    }
    if (resp->status < 200 || resp->status >= 300) {
        int ec = report_http_error(cmd, resp);
        cs_http_response_free(resp);
        return ec;
    }
    if (doc != NULL) {
        json_error_t jerr;
        *doc = json_loadb(resp->body, resp->len, 0, &jerr);
        if (*doc == NULL) {
            fprintf(stderr, "collsynth %s: the server's answer is not JSON (%s)\n", cmd,
                    jerr.text);
            cs_http_response_free(resp);
            return EXIT_REMOTE;
        }
    }
    return EXIT_OK;
}

static const char *str_or(const char *s, const char *fallback) { return s != NULL ? s : fallback; }

/* ---- printing ------------------------------------------------------------------ */

static void print_result_summary(const json_t *res)
{
    const char *key = json_string_value(json_object_get(res, "key"));
    const char *method = json_string_value(json_object_get(res, "method"));
    json_t *frontier = json_object_get(res, "frontier");
    json_t *bounds = json_object_get(res, "bounds");
    printf("key: %s\n", key != NULL ? key : "?");
    const char *from = json_string_value(json_object_get(res, "relabelled_from"));
    if (from != NULL) /* an isomorphic request's result, relabelled (docs/iso.md) */
        printf("relabelled_from: %s\n", from);
    if (method != NULL)
        printf("method: %s\n", method);
    if (json_is_object(bounds))
        printf("bounds: steps >= %lld, rounds/chunk >= %.4g\n",
               (long long)json_integer_value(json_object_get(bounds, "steps")),
               json_number_value(json_object_get(bounds, "rounds_per_chunk")));
    json_t *tb = json_is_object(bounds) ? json_object_get(bounds, "time") : NULL;
    if (json_is_object(tb))
        printf("time bound: T >= max(%.6g + %.6g us/byte x size, %.6g) us (%s): %s\n",
               json_number_value(json_object_get(tb, "latency_us")),
               json_number_value(json_object_get(tb, "bandwidth_us_per_byte")),
               json_number_value(json_object_get(tb, "path_latency_us")),
               str_or(json_string_value(json_object_get(tb, "kind")), "?"),
               str_or(json_string_value(json_object_get(tb, "cut")), ""));
    json_t *secs = json_object_get(res, "synth_seconds");
    if (json_is_number(secs))
        printf("synth_seconds: %.3f\n", json_number_value(secs));
    printf("frontier: %zu algorithm(s)\n", json_array_size(frontier));
    size_t i;
    json_t *a;
    json_array_foreach(frontier, i, a) {
        long long steps = json_integer_value(json_object_get(a, "steps"));
        long long rounds = json_integer_value(json_object_get(a, "rounds"));
        long long chunks = json_integer_value(json_object_get(a, "chunks"));
        const char *opt = json_string_value(json_object_get(a, "optimality"));
        const char *m = json_string_value(json_object_get(a, "method"));
        printf("  [%zu] steps %lld rounds %lld chunks %lld (rounds/chunk %.4g) sends %zu%s%s%s%s",
               i, steps, rounds, chunks, chunks > 0 ? (double)rounds / (double)chunks : 0.0,
               json_array_size(json_object_get(a, "sends")), m ? " method " : "", m ? m : "",
               opt && opt[0] ? " " : "", opt && opt[0] ? opt : "");
        json_t *ratio = json_object_get(a, "ratio_to_bound");
        if (json_is_number(ratio)) {
            /* "at 64MiB", as the offline report writes sizes (not 6.71089e+07) */
            char size[32];
            cs_format_size(size, sizeof size,
                           json_number_value(json_object_get(a, "bound_bytes")));
            printf(" ratio_to_bound %.3f at %s", json_number_value(ratio), size);
        }
        printf("\n");
    }
}

static void print_json(const json_t *doc)
{
    char *s = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s != NULL) {
        printf("%s\n", s);
        free(s);
    }
}

/* Fields of the job's progress object, read leniently (servers may add more). */
typedef struct progress_view {
    double done, total, best, elapsed;
    const char *message;
} progress_view;

static double num_field(const json_t *o, const char *const *names)
{
    for (; *names != NULL; names++) {
        json_t *v = json_object_get(o, *names);
        if (json_is_number(v))
            return json_number_value(v);
    }
    return NAN;
}

static progress_view read_progress(const json_t *job)
{
    progress_view p = {NAN, NAN, NAN, NAN, NULL};
    json_t *pr = json_object_get(job, "progress");
    const char *done_names[] = {"done", "instances", "tried", "trials", NULL};
    const char *total_names[] = {"total", NULL};
    const char *best_names[] = {"best", "best_cost", NULL};
    const char *elapsed_names[] = {"elapsed", "elapsed_s", "seconds", NULL};
    if (json_is_object(pr)) {
        p.done = num_field(pr, done_names);
        p.total = num_field(pr, total_names);
        p.best = num_field(pr, best_names);
        p.elapsed = num_field(pr, elapsed_names);
        p.message = json_string_value(json_object_get(pr, "message"));
    } else if (json_is_number(pr)) {
        p.done = json_number_value(pr); /* a fraction in [0, 1] */
        p.total = 1.0;
    }
    if (isnan(p.elapsed))
        p.elapsed = num_field(job, elapsed_names);
    return p;
}

static void format_progress(char *buf, size_t n, const char *status, const progress_view *p,
                            double waited, bool bar)
{
    size_t used = 0;
    double elapsed = isnan(p->elapsed) ? waited : p->elapsed;
    if (bar && !isnan(p->total) && p->total > 0 && !isnan(p->done)) {
        int width = 24;
        int fill = (int)(width * (p->done / p->total) + 0.5);
        if (fill > width)
            fill = width;
        if (fill < 0)
            fill = 0;
        used += (size_t)snprintf(buf + used, n - used, "[");
        for (int i = 0; i < width && used + 2 < n; i++)
            buf[used++] = i < fill ? '#' : '-';
        used += (size_t)snprintf(buf + used, n - used, "] ");
    } else if (bar) {
        /* total unknown (an SMT search does not know its instance count): a
         * block bouncing along the bar says "working" */
        int width = 24, span = 2 * (width - 4);
        int pos = (int)(waited * 12.0) % span;
        if (pos >= width - 4)
            pos = span - pos;
        used += (size_t)snprintf(buf + used, n - used, "[");
        for (int i = 0; i < width && used + 2 < n; i++)
            buf[used++] = (i >= pos && i < pos + 4) ? '=' : ' ';
        used += (size_t)snprintf(buf + used, n - used, "] ");
    }
    if (used >= n)
        return;
    used += (size_t)snprintf(buf + used, n - used, "%-8s", status);
    if (used < n && !isnan(p->done)) {
        if (!isnan(p->total) && p->total > 0)
            used += (size_t)snprintf(buf + used, n - used, "  instances %.0f/%.0f", p->done,
                                     p->total);
        else
            used += (size_t)snprintf(buf + used, n - used, "  instances %.0f", p->done);
    }
    if (used < n)
        used += isnan(p->best)
                    ? (size_t)snprintf(buf + used, n - used, "  best -")
                    : (size_t)snprintf(buf + used, n - used, "  best %.4g", p->best);
    if (used < n)
        snprintf(buf + used, n - used, "  elapsed %02d:%02d", (int)elapsed / 60,
                 (int)elapsed % 60);
}

/* ---- shared request helpers -------------------------------------------------- */

static bool is_terminal_status(const char *s)
{
    return s != NULL && (strcmp(s, "done") == 0 || strcmp(s, "failed") == 0 ||
                         strcmp(s, "cancelled") == 0);
}

/* "/v1/jobs/ID" with ID escaped; false when out of memory. */
static bool job_path(const char *id, char *path, size_t n)
{
    char *esc = cs_http_escape(id);
    if (esc == NULL)
        return false;
    snprintf(path, n, "/v1/jobs/%s", esc);
    free(esc);
    return true;
}

/* Polls a job until it ends (or max_s elapses, 0 = forever); prints progress.
 * On done, prints the result (or its JSON).  Returns the exit code. */
static int wait_for_job(const char *cmd, const cs_http_client *c, const char *job_id,
                        double max_s, bool json_out)
{
    char path[1024];
    if (!job_path(job_id, path, sizeof path))
        return EXIT_REMOTE;
    bool tty = isatty(STDERR_FILENO);
    double t0 = cs_now();
    char last[256] = "";
    int sleep_ms = 100;
    for (;;) {
        cs_http_response r;
        json_t *job;
        int ec = call(cmd, c, "GET", path, NULL, &r, &job);
        if (ec != EXIT_OK) {
            if (tty && last[0])
                fputc('\n', stderr);
            return ec;
        }
        char status[32];
        snprintf(status, sizeof status, "%s",
                 str_or(json_string_value(json_object_get(job, "status")), "?"));
        progress_view p = read_progress(job);
        char line[256];
        format_progress(line, sizeof line, status, &p, cs_now() - t0, tty);
        if (tty) {
            fprintf(stderr, "\r%-79s", line);
            fflush(stderr);
        } else if (strcmp(line, last) != 0) {
            fprintf(stderr, "%s\n", line);
        }
        snprintf(last, sizeof last, "%s", line);
        if (is_terminal_status(status)) {
            if (tty)
                fputc('\n', stderr);
            int rc = EXIT_OK;
            json_t *result = json_object_get(job, "result");
            if (strcmp(status, "done") == 0) {
                if (json_out)
                    print_json(json_is_object(result) ? result : job);
                else if (json_is_object(result))
                    print_result_summary(result);
                else
                    printf("status: done\n");
            } else {
                json_t *e = json_object_get(job, "error");
                const char *ecode = json_string_value(json_object_get(e, "code"));
                const char *emsg = json_string_value(json_object_get(e, "message"));
                const char *efield = json_string_value(json_object_get(e, "field"));
                fprintf(stderr, "collsynth %s: job %s %s", cmd, job_id, status);
                if (emsg != NULL) {
                    /* "cancelled: cancelled: every client ...": a message that
                     * starts with its code says it once */
                    size_t cl = ecode ? strlen(ecode) : 0;
                    if (cl && strncmp(emsg, ecode, cl) == 0 && emsg[cl] == ':')
                        fprintf(stderr, ": error %s", emsg);
                    else
                        fprintf(stderr, ": error %s: %s", ecode ? ecode : "", emsg);
                }
                if (efield != NULL && efield[0])
                    fprintf(stderr, " (field %s)", efield);
                fputc('\n', stderr);
                if (json_out)
                    print_json(job);
                rc = EXIT_REMOTE;
            }
            json_decref(job);
            cs_http_response_free(&r);
            return rc;
        }
        json_decref(job);
        cs_http_response_free(&r);
        if (max_s > 0 && cs_now() - t0 > max_s) {
            if (tty)
                fputc('\n', stderr);
            fprintf(stderr, "collsynth %s: job %s still %s after %.0f s (it goes on; "
                    "`collsynth wait %s` again)\n", cmd, job_id, status, max_s, job_id);
            return EXIT_REMOTE;
        }
        struct timespec ts = {sleep_ms / 1000, (long)(sleep_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (sleep_ms < 1000)
            sleep_ms += 100;
    }
}

/* A JSON document from a file, read as every input file is (cs_read_file:
 * a Windows editor's byte-order mark is dropped). */
static int json_file_arg(const char *cmd, const char *path, json_t **out)
{
    char *text = NULL;
    size_t len = 0;
    cs_error err;
    if (cs_read_file(path, &text, &len, &err) != CS_OK) {
        fprintf(stderr, "collsynth %s: %s\n", cmd, err.message);
        return EXIT_USAGE;
    }
    json_error_t jerr;
    *out = json_loadb(text, len, 0, &jerr);
    free(text);
    if (*out == NULL) {
        fprintf(stderr, "collsynth %s: %s: line %d: %s\n", cmd, path, jerr.line, jerr.text);
        return EXIT_USAGE;
    }
    return EXIT_OK;
}

/* TOPO argument: builtin name, path to a JSON file, or JSON text. */
static int topology_arg(const char *cmd, const char *arg, json_t **out)
{
    struct stat st;
    json_error_t jerr;
    if (arg[0] == '{') {
        *out = json_loads(arg, 0, &jerr);
        if (*out == NULL)
            return cli_usage_error(cmd, "topology is not valid JSON: %s", jerr.text);
        return EXIT_OK;
    }
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode))
        return json_file_arg(cmd, arg, out);
    if (strchr(arg, '/') != NULL || strstr(arg, ".json") != NULL) {
        fprintf(stderr, "collsynth %s: cannot read topology file %s: %s\n", cmd, arg,
                strerror(errno));
        return EXIT_USAGE;
    }
    *out = json_string(arg); /* a builtin name, checked by the server */
    return EXIT_OK;
}

/* COLLECTIVE argument: "allgather", "broadcast:3" (kind:root), JSON text or a file. */
static int collective_arg(const char *cmd, const char *arg, json_t **out)
{
    struct stat st;
    json_error_t jerr;
    if (arg[0] == '{') {
        *out = json_loads(arg, 0, &jerr);
        if (*out == NULL)
            return cli_usage_error(cmd, "collective is not valid JSON: %s", jerr.text);
        return EXIT_OK;
    }
    if (stat(arg, &st) == 0 && S_ISREG(st.st_mode))
        return json_file_arg(cmd, arg, out);
    char kind[64];
    const char *colon = strchr(arg, ':');
    size_t n = colon ? (size_t)(colon - arg) : strlen(arg);
    if (n == 0 || n >= sizeof kind)
        return cli_usage_error(cmd, "bad collective '%s' (e.g. allgather, broadcast:0)", arg);
    memcpy(kind, arg, n);
    kind[n] = '\0';
    *out = json_pack("{s:s}", "kind", kind);
    if (colon != NULL) {
        char *end;
        long root = strtol(colon + 1, &end, 10);
        if (colon[1] == '\0' || *end != '\0' || root < 0) {
            json_decref(*out);
            *out = NULL;
            return cli_usage_error(cmd, "bad root in collective '%s' (kind:ROOT)", arg);
        }
        json_object_set_new(*out, "root", json_integer(root));
    }
    return EXIT_OK;
}

/* --option k=v: v as JSON when it parses as a scalar/array/object, else a string. */
static int option_arg(const char *cmd, const char *kv, json_t *options)
{
    const char *eq = strchr(kv, '=');
    if (eq == NULL || eq == kv)
        return cli_usage_error(cmd, "--option wants KEY=VALUE, got '%s'", kv);
    char key[128];
    size_t n = (size_t)(eq - kv);
    if (n >= sizeof key)
        return cli_usage_error(cmd, "option name too long in '%s'", kv);
    memcpy(key, kv, n);
    key[n] = '\0';
    json_t *v = json_loads(eq + 1, JSON_DECODE_ANY, NULL);
    if (v == NULL)
        v = json_string(eq + 1);
    json_object_set_new(options, key, v);
    return EXIT_OK;
}


/* ---- help ---------------------------------------------------------------------- */

static const char *const help_common =
    "\nServer options (any position):\n"
    "  --server URL       the collsynthd (default $COLLSYNTH_SERVER)\n"
    "  --token-file FILE  bearer token from FILE (default $COLLSYNTH_TOKEN)\n"
    "  --timeout S        per-request limit in seconds (default 60)\n"
    "  --json             print the server's JSON instead of a summary\n"
    "\nExit codes: 0 ok, 1 the server said no (job failed or cancelled, unknown job\n"
    "or key, refused), 2 usage or input error, 3 server unreachable.\n";

static bool wants_help(int argc, char **argv, const char *usage)
{
    for (int i = 1; i < argc; i++)
        if (cli_is_help(argv[i])) {
            fputs(usage, stdout);
            fputs(help_common, stdout);
            return true;
        }
    return false;
}

static const char *const usage_submit =
    "Usage: collsynth submit TOPO COLLECTIVE [--method M] [--option KEY=VALUE ...] [--wait[=S]]\n"
    "Asks collsynthd for a synthesis (POST /v1/synthesize).\n"
    "  TOPO        builtin name (dgx1, ring:8), Topology JSON file, or JSON text\n"
    "  COLLECTIVE  allgather, broadcast:ROOT, ... or a collective JSON file/text\n"
    "  --method M  auto (default), smt, tacos, or a baseline name\n"
    "  --option K=V  request option; V is JSON when it parses (numbers, objects)\n"
    "  --wait[=S]  wait for the job (at most S seconds), showing progress\n"
    "Prints 'job: ID' for a queued job, or the result ('key: KEY', the frontier).\n";
static const char *const usage_status =
    "Usage: collsynth status JOB\nShows a job's status, progress and (when done) its result.\n";
static const char *const usage_wait =
    "Usage: collsynth wait JOB [--max S]\n"
    "Waits for a job: a progress bar on a terminal (instances tried, best so far,\n"
    "elapsed), plain lines otherwise; then prints the result.  Exit 1 when the job\n"
    "failed or was cancelled, or --max seconds passed.\n";
static const char *const usage_get =
    "Usage: collsynth get KEY [--format json|msccl-xml|cuda] [--size BYTES | --alg N]\n"
    "                     [--rank R | --ranks A-B] [--summary]\n"
    "                     [--runtime auto|msccl|msccl-executor] [--gpu-sms N] [-o FILE]\n"
    "Fetches a stored result.  --size picks the frontier algorithm fastest for that\n"
    "buffer size (1048576, 1MiB, 4M); --alg picks frontier entry N; --runtime picks\n"
    "the MSCCL runtime the XML is for; --gpu-sms N the target GPU's SMs (at most 2N\n"
    "thread blocks per rank; default: the runtime's own limit).  --rank/--ranks fetch one rank's (one node's)\n"
    "slice: the sends those ranks take part in, or their <gpu> elements.  --summary\n"
    "(JSON) leaves the sends out.  -o writes to FILE instead of stdout; the answer is\n"
    "written as it arrives, so results of any size fit.\n";
static const char *const usage_cancel =
    "Usage: collsynth cancel JOB [--all]\n"
    "Lets go of a job (DELETE /v1/jobs/JOB): the synthesis stops when no other caller\n"
    "waits for it (callers of the same request share one synthesis).  Prints what the\n"
    "server did: detached (others still wait), cancelled, or cancelling (a running\n"
    "solver is interrupted within about a second).  --all cancels it for every\n"
    "waiter (needs the token when the daemon has one).\n";
static const char *const usage_topologies =
    "Usage: collsynth topologies [NAME]\n"
    "Lists the builtin topologies, or prints one as Topology JSON.  Asks the server\n"
    "when one is given (--server, COLLSYNTH_SERVER), else this build's library.\n";

/* ---- commands -------------------------------------------------------------------- */

int cli_cmd_submit(int argc, char **argv, const cli_globals *g)
{
    if (wants_help(argc, argv, usage_submit))
        return CLI_EXIT_OK;
    const char *cmd = "submit";
    remote_opts o = {0};
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    const char *method = NULL;
    bool wait = false;
    double wait_max = 0;
    json_t *options = json_object();
    int ec = EXIT_OK;
    for (int i = 1; i < argc && ec == EXIT_OK; i++) {
        bool bad = false;
        if (take_common_option(argc, argv, &i, &o, &bad)) {
            if (bad)
                ec = bad_option_error(cmd, &o);
        } else if (strcmp(argv[i], "--method") == 0 || strcmp(argv[i], "-m") == 0) {
            if (i + 1 >= argc)
                ec = cli_usage_error(cmd, "--method needs a value");
            else
                method = argv[++i];
        } else if (strcmp(argv[i], "--option") == 0 || strcmp(argv[i], "-O") == 0) {
            if (i + 1 >= argc)
                ec = cli_usage_error(cmd, "--option needs KEY=VALUE");
            else
                ec = option_arg(cmd, argv[++i], options);
        } else if (strcmp(argv[i], "--wait") == 0) {
            wait = true;
        } else if (strncmp(argv[i], "--wait=", 7) == 0) {
            wait = true;
            if (!parse_seconds(argv[i] + 7, &wait_max))
                ec = cli_usage_error(cmd, "--wait=S wants seconds >= 0, got '%s'", argv[i] + 7);
        } else if (argv[i][0] == '-' && argv[i][1] != '\0' && argv[i][1] != '{') {
            ec = cli_usage_error(cmd, "unknown option %s", argv[i]);
        } else if (npos < 2) {
            pos[npos++] = argv[i];
        } else {
            ec = cli_usage_error(cmd, "unexpected argument %s", argv[i]);
        }
    }
    if (ec == EXIT_OK && npos < 2)
        ec = cli_usage_error(cmd, "usage: collsynth submit TOPO COLLECTIVE [--method M] "
                              "[--option k=v ...] [--wait]");
    json_t *topo = NULL, *coll = NULL;
    if (ec == EXIT_OK)
        ec = topology_arg(cmd, pos[0], &topo);
    if (ec == EXIT_OK)
        ec = collective_arg(cmd, pos[1], &coll);
    cs_http_client c;
    if (ec == EXIT_OK)
        ec = connect_client(cmd, &o, g, &c);
    if (ec != EXIT_OK) {
        json_decref(topo);
        json_decref(coll);
        json_decref(options);
        return ec;
    }
    json_t *req = json_pack("{s:o, s:o}", "topology", topo, "collective", coll);
    if (method != NULL)
        json_object_set_new(req, "method", json_string(method));
    if (json_object_size(options) > 0)
        json_object_set(req, "options", options);
    json_decref(options);
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);

    cs_http_response r;
    json_t *doc;
    ec = call(cmd, &c, "POST", "/v1/synthesize", body, &r, &doc);
    free(body);
    if (ec != EXIT_OK)
        return ec;
    if (r.status == 202 || json_is_string(json_object_get(doc, "job")) ||
        json_is_integer(json_object_get(doc, "job"))) {
        json_t *jv = json_object_get(doc, "job");
        char job_id[128];
        if (json_is_integer(jv))
            snprintf(job_id, sizeof job_id, "%lld", (long long)json_integer_value(jv));
        else
            snprintf(job_id, sizeof job_id, "%s", json_string_value(jv) ? json_string_value(jv) : "");
        if (job_id[0] == '\0') {
            fprintf(stderr, "collsynth submit: HTTP %ld without a job id\n", r.status);
            ec = EXIT_REMOTE;
        } else if (wait) {
            if (!o.json)
                printf("job: %s\n", job_id);
            fflush(stdout);
            ec = wait_for_job(cmd, &c, job_id, wait_max, o.json);
        } else if (o.json) {
            print_json(doc);
        } else {
            printf("job: %s\n", job_id);
        }
    } else if (o.json) {
        print_json(doc);
    } else {
        print_result_summary(doc);
    }
    json_decref(doc);
    cs_http_response_free(&r);
    return ec;
}

/* Parses "CMD [common options] ID" for status/wait/cancel, then connects
 * to the server.  Returns an exit code. */
static int one_id_command(const char *cmd, int argc, char **argv, const cli_globals *g,
                          remote_opts *o, const char **id, double *max_s, cs_http_client *c)
{
    *id = NULL;
    for (int i = 1; i < argc; i++) {
        bool bad = false;
        if (take_common_option(argc, argv, &i, o, &bad)) {
            if (bad)
                return bad_option_error(cmd, o);
        } else if (max_s != NULL && strcmp(argv[i], "--max") == 0 && i + 1 < argc) {
            if (!parse_seconds(argv[++i], max_s))
                return cli_usage_error(cmd, "--max wants seconds >= 0, got '%s'", argv[i]);
        } else if (argv[i][0] == '-') {
            return cli_usage_error(cmd, "unknown option %s", argv[i]);
        } else if (*id == NULL) {
            *id = argv[i];
        } else {
            return cli_usage_error(cmd, "unexpected argument %s", argv[i]);
        }
    }
    if (*id == NULL)
        return cli_usage_error(cmd, "missing the job id (usage: collsynth %s JOB)", cmd);
    return connect_client(cmd, o, g, c);
}

int cli_cmd_status(int argc, char **argv, const cli_globals *g)
{
    if (wants_help(argc, argv, usage_status))
        return CLI_EXIT_OK;
    const char *cmd = "status";
    remote_opts o = {0};
    const char *id;
    cs_http_client c;
    int ec = one_id_command(cmd, argc, argv, g, &o, &id, NULL, &c);
    if (ec != EXIT_OK)
        return ec;
    char path[1024];
    if (!job_path(id, path, sizeof path))
        return EXIT_REMOTE;
    cs_http_response r;
    json_t *job;
    ec = call(cmd, &c, "GET", path, NULL, &r, &job);
    if (ec != EXIT_OK)
        return ec;
    const char *status = json_string_value(json_object_get(job, "status"));
    if (o.json) {
        print_json(job);
    } else {
        printf("job: %s\nstatus: %s\n", id, status ? status : "?");
        progress_view p = read_progress(job);
        char line[256];
        format_progress(line, sizeof line, status ? status : "?", &p, 0.0, false);
        printf("progress: %s\n", line);
        if (p.message != NULL)
            printf("message: %s\n", p.message);
        json_t *result = json_object_get(job, "result");
        if (json_is_object(result))
            print_result_summary(result);
        json_t *e = json_object_get(job, "error");
        if (json_is_object(e))
            printf("error: %s: %s\n",
                   str_or(json_string_value(json_object_get(e, "code")), ""),
                   str_or(json_string_value(json_object_get(e, "message")), ""));
    }
    if (status != NULL && (strcmp(status, "failed") == 0 || strcmp(status, "cancelled") == 0))
        ec = EXIT_REMOTE;
    json_decref(job);
    cs_http_response_free(&r);
    return ec;
}

int cli_cmd_wait(int argc, char **argv, const cli_globals *g)
{
    if (wants_help(argc, argv, usage_wait))
        return CLI_EXIT_OK;
    const char *cmd = "wait";
    remote_opts o = {0};
    const char *id;
    double max_s = 0;
    cs_http_client c;
    int ec = one_id_command(cmd, argc, argv, g, &o, &id, &max_s, &c);
    if (ec != EXIT_OK)
        return ec;
    return wait_for_job(cmd, &c, id, max_s, o.json);
}

int cli_cmd_cancel(int argc, char **argv, const cli_globals *g)
{
    if (wants_help(argc, argv, usage_cancel))
        return CLI_EXIT_OK;
    const char *cmd = "cancel";
    remote_opts o = {0};
    const char *id;
    cs_http_client c;
    /* --all is cancel's own flag; the rest is every job command's */
    bool all = false;
    char **rest = calloc((size_t)argc + 1, sizeof *rest);
    if (!rest)
        return EXIT_REMOTE;
    int nrest = 0;
    for (int i = 0; i < argc; i++) {
        if (i > 0 && strcmp(argv[i], "--all") == 0)
            all = true;
        else
            rest[nrest++] = argv[i];
    }
    int ec = one_id_command(cmd, nrest, rest, g, &o, &id, NULL, &c);
    free(rest);
    if (ec != EXIT_OK)
        return ec;
    char path[1024];
    if (!job_path(id, path, sizeof path))
        return EXIT_REMOTE;
    if (all)
        strncat(path, "?all=true", sizeof path - strlen(path) - 1);
    cs_http_response r;
    json_t *doc = NULL;
    ec = call(cmd, &c, "DELETE", path, NULL, &r, &doc);
    if (ec != EXIT_OK)
        return ec;
    if (o.json && r.body != NULL && r.body[0] != '\0') {
        printf("%s\n", r.body);
    } else {
        const char *st = json_string_value(json_object_get(doc, "status"));
        json_t *w = json_object_get(doc, "waiters");
        printf("%s: %s", st ? st : "cancelled", id);
        if (st && !strcmp(st, "detached") && json_is_integer(w))
            printf(" (%lld other caller%s still wait%s)", (long long)json_integer_value(w),
                   json_integer_value(w) == 1 ? "" : "s", json_integer_value(w) == 1 ? "s" : "");
        printf("\n");
    }
    json_decref(doc);
    cs_http_response_free(&r);
    return EXIT_OK;
}

int cli_cmd_get(int argc, char **argv, const cli_globals *g)
{
    if (wants_help(argc, argv, usage_get))
        return CLI_EXIT_OK;
    const char *cmd = "get";
    remote_opts o = {0};
    const char *key = NULL, *format = "json", *outfile = NULL, *size = NULL;
    const char *alg = NULL, *runtime = NULL, *rank = NULL, *ranks = NULL, *sms = NULL;
    bool summary = false;
    int ec = EXIT_OK;
    for (int i = 1; i < argc && ec == EXIT_OK; i++) {
        bool bad = false;
        const char *a = argv[i];
        if (take_common_option(argc, argv, &i, &o, &bad)) {
            if (bad)
                ec = bad_option_error(cmd, &o);
        } else if (strcmp(a, "--format") == 0 || strcmp(a, "-f") == 0) {
            if (i + 1 >= argc)
                ec = cli_usage_error(cmd, "--format needs json, msccl-xml or cuda");
            else
                format = argv[++i];
        } else if (strncmp(a, "--format=", 9) == 0) {
            format = a + 9;
        } else if (strcmp(a, "--size") == 0) {
            if (i + 1 >= argc)
                ec = cli_usage_error(cmd, "--size needs BYTES");
            else
                size = argv[++i];
        } else if (strncmp(a, "--size=", 7) == 0) {
            size = a + 7;
        } else if (strcmp(a, "--gpu-sms") == 0) {
            if (i + 1 >= argc)
                ec = cli_usage_error(cmd, "--gpu-sms needs a value");
            else
                sms = argv[++i];
        } else if (strcmp(a, "--alg") == 0 || strcmp(a, "--runtime") == 0) {
            if (i + 1 >= argc)
                ec = cli_usage_error(cmd, "%s needs a value", a);
            else if (a[2] == 'a')
                alg = argv[++i];
            else
                runtime = argv[++i];
        } else if (strcmp(a, "--rank") == 0 || strcmp(a, "--ranks") == 0) {
            if (i + 1 >= argc)
                ec = cli_usage_error(cmd, "%s needs a value", a);
            else if (a[6] == 's')
                ranks = argv[++i];
            else
                rank = argv[++i];
        } else if (strncmp(a, "--rank=", 7) == 0) {
            rank = a + 7;
        } else if (strncmp(a, "--ranks=", 8) == 0) {
            ranks = a + 8;
        } else if (strcmp(a, "--summary") == 0) {
            summary = true;
        } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
            if (i + 1 >= argc)
                ec = cli_usage_error(cmd, "-o needs a FILE");
            else
                outfile = argv[++i];
        } else if (a[0] == '-') {
            ec = cli_usage_error(cmd, "unknown option %s", a);
        } else if (key == NULL) {
            key = a;
        } else {
            ec = cli_usage_error(cmd, "unexpected argument %s", a);
        }
    }
    if (ec != EXIT_OK)
        return ec;
    if (key == NULL)
        return cli_usage_error(cmd, "usage: collsynth get KEY --format json|msccl-xml|cuda "
                                "[--size BYTES] [-o FILE]");
    if (strcmp(format, "json") != 0 && strcmp(format, "msccl-xml") != 0 &&
        strcmp(format, "cuda") != 0)
        return cli_usage_error(cmd, "unknown --format '%s' (json, msccl-xml or cuda)", format);
    double bytes = 0;
    if (size != NULL && (!cli_parse_size(size, &bytes) || bytes < 0 || bytes > 1e18))
        return cli_usage_error(cmd, "bad --size '%s' (bytes, e.g. 1048576 or 1M)", size);
    cs_http_client c;
    ec = connect_client(cmd, &o, g, &c);
    if (ec != EXIT_OK)
        return ec;
    char *esc = cs_http_escape(key);
    char path[1200];
    int n = snprintf(path, sizeof path, "/v1/results/%s?format=%s", esc ? esc : "", format);
    free(esc);
    if (size != NULL && alg != NULL)
        return cli_usage_error(cmd, "give --size or --alg, not both");
    if (size != NULL)
        n += snprintf(path + n, sizeof path - (size_t)n, "&size=%.0f", bytes);
    if (alg != NULL) {
        int idx;
        if (!cli_parse_int(alg, &idx) || idx < 0)
            return cli_usage_error(cmd, "bad --alg '%s' (a frontier index >= 0)", alg);
        n += snprintf(path + n, sizeof path - (size_t)n, "&alg=%d", idx);
    }
    if (runtime != NULL) {
        char *resc = cs_http_escape(runtime);
        n += snprintf(path + n, sizeof path - (size_t)n, "&runtime=%s", resc ? resc : "");
        free(resc);
    }
    if (sms != NULL) {
        int v;
        if (!cli_parse_int(sms, &v) || v < 1 || v > 4096)
            return cli_usage_error(cmd, "bad --gpu-sms '%s' (a GPU's SM count, 1..4096)", sms);
        n += snprintf(path + n, sizeof path - (size_t)n, "&gpu_sms=%d", v);
    }
    if (rank != NULL && ranks != NULL)
        return cli_usage_error(cmd, "give --rank or --ranks, not both");
    if (rank != NULL) {
        int r0;
        if (!cli_parse_int(rank, &r0) || r0 < 0)
            return cli_usage_error(cmd, "bad --rank '%s' (a rank number >= 0)", rank);
        n += snprintf(path + n, sizeof path - (size_t)n, "&rank=%d", r0);
    }
    if (ranks != NULL) {
        int a0 = -1, b0 = -1, used = 0;
        if (sscanf(ranks, "%d-%d%n", &a0, &b0, &used) != 2 || ranks[used] != '\0' || a0 < 0 ||
            b0 < a0)
            return cli_usage_error(cmd, "bad --ranks '%s' (FIRST-LAST, e.g. 8-15)", ranks);
        n += snprintf(path + n, sizeof path - (size_t)n, "&ranks=%d-%d", a0, b0);
    }
    if (summary)
        snprintf(path + n, sizeof path - (size_t)n, "&view=summary");
    /* -o FILE: written beside FILE and renamed over it once the whole answer
     * arrived (cli_output.c), so a refused or broken download, a full disk or
     * a Ctrl-C never leave a truncated FILE, and never remove an existing one */
    cli_out out;
    ec = cli_out_open(&out, cmd, outfile);
    if (ec != EXIT_OK)
        return ec;
    bool to_file = out.f != stdout;
    cs_http_response r;
    cs_error err;
    cs_error_clear(&err);
    int rc = cs_http_download(&c, path, out.f, &r, &err);
    if (rc != CS_OK && !r.unreachable && r.status >= 200 && r.status < 300) {
        fprintf(stderr, "collsynth get: writing %s failed: %s%s\n", to_file ? outfile : "stdout",
                err.message, out.tmp ? " (the file was left as it was)" : "");
        cli_out_close(&out, false);
        cs_http_response_free(&r);
        return EXIT_USAGE;
    }
    if (rc != CS_OK || r.status < 200 || r.status >= 300) {
        /* the server's own error, as every remote command reports it */
        cli_out_close(&out, false);
        if (rc != CS_OK) {
            fprintf(stderr, "collsynth %s: %s\n", cmd, err.message);
            ec = r.unreachable ? EXIT_UNREACHABLE : EXIT_REMOTE;
        } else {
            ec = report_http_error(cmd, &r);
        }
        cs_http_response_free(&r);
        return ec;
    }
    if (!to_file && r.downloaded > 0 && !r.ends_in_newline)
        fputc('\n', out.f);
    ec = cli_out_close(&out, true);
    if (ec == EXIT_OK && to_file)
        fprintf(stderr, "wrote %s (%zu bytes)\n", outfile, r.downloaded);
    cs_http_response_free(&r);
    return ec;
}

/* Without a server: the same listing from this build's library. */
static int list_topologies_offline(const char *cmd, const char *name)
{
    if (name != NULL) {
        cs_topology *t = NULL;
        cs_error err;
        int rc = topology_builtin(name, &t, &err);
        if (rc != CS_OK)
            return cli_report_error(cmd, name, rc, &err);
        json_t *doc = topology_to_json(t);
        print_json(doc);
        json_decref(doc);
        topology_free(t);
        return EXIT_OK;
    }
    int n = 0;
    const cs_builtin_info *list = topology_builtin_list(&n);
    for (int i = 0; i < n; i++)
        printf("%-22s %-14s %s\n", list[i].syntax, list[i].example, list[i].description);
    return EXIT_OK;
}

int cli_cmd_topologies(int argc, char **argv, const cli_globals *g)
{
    if (wants_help(argc, argv, usage_topologies))
        return CLI_EXIT_OK;
    const char *cmd = "topologies";
    remote_opts o = {0};
    const char *name = NULL;
    for (int i = 1; i < argc; i++) {
        bool bad = false;
        if (take_common_option(argc, argv, &i, &o, &bad)) {
            if (bad)
                return bad_option_error(cmd, &o);
        } else if (argv[i][0] == '-') {
            return cli_usage_error(cmd, "unknown option %s", argv[i]);
        } else if (name == NULL) {
            name = argv[i];
        } else {
            return cli_usage_error(cmd, "unexpected argument %s", argv[i]);
        }
    }
    const char *server = o.server != NULL ? o.server : (g != NULL ? g->server : NULL);
    if (server == NULL || server[0] == '\0')
        server = getenv("COLLSYNTH_SERVER");
    if (server == NULL || server[0] == '\0')
        return list_topologies_offline(cmd, name);
    cs_http_client c;
    int ec = connect_client(cmd, &o, g, &c);
    if (ec != EXIT_OK)
        return ec;
    char path[1024] = "/v1/topologies";
    if (name != NULL) {
        char *esc = cs_http_escape(name);
        snprintf(path, sizeof path, "/v1/topologies/%s", esc ? esc : "");
        free(esc);
    }
    cs_http_response r;
    json_t *doc;
    ec = call(cmd, &c, "GET", path, NULL, &r, &doc);
    if (ec != EXIT_OK)
        return ec;
    json_t *list = json_is_array(doc) ? doc : json_object_get(doc, "topologies");
    if (name != NULL || o.json || !json_is_array(list)) {
        print_json(doc);
    } else {
        size_t i;
        json_t *t;
        json_array_foreach(list, i, t) {
            if (json_is_string(t)) {
                printf("%s\n", json_string_value(t));
                continue;
            }
            const char *syntax = json_string_value(json_object_get(t, "syntax"));
            const char *nm = json_string_value(json_object_get(t, "name"));
            const char *ex = json_string_value(json_object_get(t, "example"));
            const char *desc = json_string_value(json_object_get(t, "description"));
            printf("%-22s %-14s %s\n", syntax ? syntax : (nm ? nm : "?"), ex ? ex : "",
                   desc ? desc : "");
        }
    }
    json_decref(doc);
    cs_http_response_free(&r);
    return EXIT_OK;
}
