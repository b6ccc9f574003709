/*
 * collsynth_spank.c - a Slurm SPANK plugin that gives every GPU job step
 * synthesized collective algorithms for its allocation.
 *
 * In the step's slurmstepd (remote context), once per node before the tasks
 * start (slurm_spank_user_init, running as the job's user):
 *   1. read the cluster description and build the allocation's topology from
 *      the step's node list (cluster.c);
 *   2. ask collsynthd for each collective named in the options
 *      (POST /v1/synthesize with options.wait_s and options.codegen
 *      "msccl-xml": on copy-capable switches the schedule must not copy in
 *      the switch, which no MSCCL runtime can run; then poll the job);
 *   3. split message sizes among the frontier's algorithms by the alpha-beta
 *      model, fetch each algorithm's MSCCL XML (GET /v1/results/KEY?alg=...)
 *      and write it, with minBytes/maxBytes set, into a per-step directory
 *      under the job's TMPDIR.  On a multi-node step each node fetches only
 *      its own ranks' slice (&ranks=FIRST-LAST: the same <algo>, only those
 *      ranks' <gpu> elements, which is all an MSCCL runtime reads), and the
 *      result documents it reads are summaries (?view=summary: the frontier
 *      without its sends), so a 1024-rank allocation costs each node a few
 *      kilobytes of JSON and its own XML, not everyone's;
 * and in slurm_spank_task_init export MSCCL_XML_FILES, NCCL_ALGO and
 * MSCCL_ALGO_DIR into each task.
 *
 * Rooted collectives (broadcast, reduce, gather, scatter) need a root rank,
 * which is a choice of the job, not of the site: plugstack.conf's `root=R`
 * is the site's default (0 without it) and `srun --collsynth-root=R` the
 * job's own.  The root is a rank of the step (node by node, as the topology
 * numbers them), so it is checked against the step's ranks once the topology
 * is built: a root outside them is a warning naming the option, and the job
 * runs without synthesized collectives like on every other failure.
 *
 * The rule that shapes everything: a launch hook must never block or fail a
 * job.  Every hook returns 0 on every path; the whole exchange with the server
 * is bounded by `timeout=` seconds (default 5); anything that goes wrong
 * (unreachable, slow, bad answer, bad cluster file) becomes one warning line
 * shown to the user (slurm_spank_log, on the step's first node) and the job
 * starts with its environment unchanged.  A synthesis still running when the
 * budget ends goes on in the daemon, so the next job gets it from the cache.
 *
 * plugstack.conf:
 *   optional /usr/lib/collsynth/collsynth_spank.so server=http://host:7878 \
 *       cluster=/etc/collsynth/cluster.json token_file=/etc/collsynth/token \
 *       collectives=allgather,reducescatter,allreduce timeout=5 method=auto gpus=auto \
 *       options={"smt":{"max_chunks":4}} root=0 gpu_sms=108
 *
 * State: static variables, which is right here: slurmstepd serves one step and
 * calls the hooks from one thread.
 */
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <slurm/spank.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../cli/http_client.h"
#include "cluster.h"

SPANK_PLUGIN(collsynth, 1);

#define MAX_COLLECTIVES 8
#define MAX_FILES 64
#define MAX_XML_FILES_OLD_RUNTIME 4 /* the older MSCCL runtime loads at most 4 */
/* A problem's text: room for the daemon's whole refusal (its messages are
 * cs_error's, under 512 bytes, quoted after the request's path), and the
 * width of the log lines it is written in (cluster_line_piece). */
#define WHY_MAX 4096
#define DAEMON_MESSAGE_MAX 2048
#define LOG_LINE_WIDTH 400

typedef struct hook_config {
    char server[512];
    char token[512];
    char cluster[1024];
    char method[32];
    char tmpdir[1024];
    char collectives[MAX_COLLECTIVES][32];
    int ncollectives;
    double timeout_s;
    int gpus_mode; /* 0 auto (only steps with GPUs), 1 always */
    char options[1024]; /* JSON object merged into the request's options, "" none */
    long root;          /* plugstack root=, the site's default root (0 without it) */
    int gpu_sms;        /* plugstack gpu_sms=: the nodes' GPUs' SMs for codegen; 0: not sent */
    char config_problem[WHY_MAX];
} hook_config;

/* The two MSCCL runtimes disagree on names and limits (msccl-xml.md), so each
 * gets its own files from the server (?runtime=): the executor reads a whole
 * directory (MSCCL_ALGO_DIR), the NCCL fork a list (MSCCL_XML_FILES). */
enum { RT_EXECUTOR = 0, RT_MSCCL = 1, RT_COUNT };
static const char *const runtime_names[RT_COUNT] = {"msccl-executor", "msccl"};
static const char *const runtime_subdirs[RT_COUNT] = {"executor", "msccl"};

typedef struct written_file {
    char path[1400];
    int runtime;                /* RT_* */
    int collective;             /* index into cfg.collectives */
    bool largest;               /* the range reaching the largest sizes */
} written_file;

typedef struct hook_state {
    bool active;                /* the step gets the environment */
    char dir[1200];             /* per-step directory under TMPDIR */
    char subdir[RT_COUNT][1300];
    bool created_dir, created_sub[RT_COUNT];
    int nper[RT_COUNT];         /* files written per runtime */
    char xml_files[8192];       /* MSCCL_XML_FILES value */
    char keys[1024];            /* COLLSYNTH_RESULT_KEYS value */
    int rank_first, rank_last;  /* this node's ranks on a multi-node step; -1: all */
    bool slices_refused;        /* the daemon cannot slice: whole documents from now on */
    char warning[WHY_MAX];      /* "" when all went well */
    int nfiles;
    written_file files[MAX_FILES];
} hook_state;

static hook_config cfg;
static hook_state st;
/* The cluster description, read in slurm_spank_init while slurmstepd is still
 * root (user_init runs as the job's user, who may not read /etc/collsynth). */
static json_t *cluster_doc;
static char cluster_problem[WHY_MAX];

/* ---- options ---------------------------------------------------------------------- */

/* vsnprintf under another name: truncating long paths and messages into fixed
 * buffers is intended here, so GCC's truncation analysis is not wanted. */
static int fmt_into(char *dst, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static int fmt_into(char *dst, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = vsnprintf(dst, n, fmt, ap);
    va_end(ap);
    return r;
}

static void set_str(char *dst, size_t n, const char *src) { fmt_into(dst, n, "%s", src); }

/* Logs "collsynth: " and the formatted text, the whole of it: a text longer
 * than LOG_LINE_WIDTH goes out as several lines (the next ones indented, so a
 * reader counting "collsynth: warning" lines still counts one), cut at
 * spaces by cluster_line_piece.  to_user: the job's stderr (slurm_spank_log),
 * else slurmd's log (slurm_info). */
static void log_lines(bool to_user, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void log_lines(bool to_user, const char *fmt, ...)
{
    va_list ap, ap2;
    va_start(ap, fmt);
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text == NULL) {
        char line[LOG_LINE_WIDTH + 1]; /* no memory: as much as one line holds */
        vsnprintf(line, sizeof line, fmt, ap2);
        va_end(ap2);
        if (to_user)
            slurm_spank_log("collsynth: %s", line);
        else
            slurm_info("collsynth: %s", line);
        return;
    }
    vsnprintf(text, (size_t)n + 1, fmt, ap2);
    va_end(ap2);
    const char *p = text;
    for (bool first = true; *p != '\0'; first = false) {
        size_t k = cluster_line_piece(p, LOG_LINE_WIDTH);
        const char *lead = first ? "" : "  ";
        if (to_user)
            slurm_spank_log("collsynth: %s%.*s", lead, (int)k, p);
        else
            slurm_info("collsynth: %s%.*s", lead, (int)k, p);
        p += k;
        while (*p == ' ')
            p++;
    }
    free(text);
}

static void parse_collectives(const char *list)
{
    cfg.ncollectives = 0;
    char buf[512];
    set_str(buf, sizeof buf, list);
    char *save = NULL;
    for (char *t = strtok_r(buf, ",", &save); t != NULL && cfg.ncollectives < MAX_COLLECTIVES;
         t = strtok_r(NULL, ",", &save)) {
        if (t[0] != '\0')
            set_str(cfg.collectives[cfg.ncollectives++], sizeof cfg.collectives[0], t);
    }
}

static void load_token_file(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        fmt_into(cfg.config_problem, sizeof cfg.config_problem, "cannot read token_file %s: %s",
                 path, strerror(errno));
        return;
    }
    if (fgets(cfg.token, sizeof cfg.token, f) == NULL)
        cfg.token[0] = '\0';
    fclose(f);
    size_t n = strlen(cfg.token);
    while (n > 0 && (cfg.token[n - 1] == '\n' || cfg.token[n - 1] == '\r' || cfg.token[n - 1] == ' '))
        cfg.token[--n] = '\0';
}

/* A root rank as typed: a decimal integer >= 0 (the step's size is checked
 * once the topology is built).  Returns -1 for anything else. */
static long parse_root(const char *v)
{
    char *end;
    errno = 0;
    long r = strtol(v, &end, 10);
    if (v[0] == '\0' || *end != '\0' || errno != 0 || r < 0 || r > 0x7fffffff)
        return -1;
    return r;
}

/* The broadcast, reduce, gather and scatter of the contract: the plugin links
 * only the HTTP client and cluster.c, not the model, so it keeps its own list. */
static bool kind_is_rooted(const char *kind)
{
    return strcmp(kind, "broadcast") == 0 || strcmp(kind, "reduce") == 0 ||
           strcmp(kind, "gather") == 0 || strcmp(kind, "scatter") == 0;
}

static void parse_args(int ac, char **av)
{
    memset(&cfg, 0, sizeof cfg);
    cfg.timeout_s = 5.0;
    set_str(cfg.method, sizeof cfg.method, "auto");
    parse_collectives("allgather,reducescatter,allreduce");
    for (int i = 0; i < ac; i++) {
        const char *v = NULL;
        char problem[sizeof cfg.config_problem];
        switch (cluster_plugstack_arg(av[i], &v, problem, sizeof problem)) {
        case CLUSTER_ARG_SERVER:
            set_str(cfg.server, sizeof cfg.server, v);
            break;
        case CLUSTER_ARG_TOKEN_FILE:
            load_token_file(v);
            break;
        case CLUSTER_ARG_CLUSTER:
            set_str(cfg.cluster, sizeof cfg.cluster, v);
            break;
        case CLUSTER_ARG_COLLECTIVES:
            parse_collectives(v);
            break;
        case CLUSTER_ARG_TIMEOUT: {
            char *end;
            double t = strtod(v, &end);
            if (*end != '\0' || !(t > 0) || t > 600)
                fmt_into(cfg.config_problem, sizeof cfg.config_problem,
                         "timeout=%s is not a number of seconds in (0, 600]", v);
            else
                cfg.timeout_s = t;
            break;
        }
        case CLUSTER_ARG_METHOD:
            set_str(cfg.method, sizeof cfg.method, v);
            break;
        case CLUSTER_ARG_TMPDIR:
            set_str(cfg.tmpdir, sizeof cfg.tmpdir, v);
            break;
        case CLUSTER_ARG_OPTIONS: {
            json_t *o = json_loads(v, 0, NULL);
            if (!json_is_object(o) || strlen(v) >= sizeof cfg.options)
                fmt_into(cfg.config_problem, sizeof cfg.config_problem,
                         "options=%s is not a JSON object (no spaces in plugstack.conf)", v);
            else
                set_str(cfg.options, sizeof cfg.options, v);
            json_decref(o);
            break;
        }
        case CLUSTER_ARG_ROOT:
            cfg.root = parse_root(v);
            if (cfg.root < 0)
                fmt_into(cfg.config_problem, sizeof cfg.config_problem,
                         "root=%s is not a rank (an integer >= 0)", v);
            break;
        case CLUSTER_ARG_GPU_SMS: {
            char *end;
            long n = strtol(v, &end, 10);
            if (v[0] == '\0' || *end != '\0' || n < 1 || n > 4096)
                fmt_into(cfg.config_problem, sizeof cfg.config_problem,
                         "gpu_sms=%s is not a GPU's SM count (1..4096)", v);
            else
                cfg.gpu_sms = (int)n;
            break;
        }
        case CLUSTER_ARG_GPUS:
            cfg.gpus_mode = strcmp(v, "always") == 0 ? 1 : 0;
            break;
        default:   /* not key=value, or an unknown key (the nearest named) */
            fmt_into(cfg.config_problem, sizeof cfg.config_problem, "%s", problem);
        }
    }
}

/* srun --collsynth-root=R: the job's own root.  In srun (local context) a
 * value that is not a rank number refuses the command line, as srun does for
 * its own malformed options, before any job exists; in slurmstepd (remote)
 * the hook never fails, and prepare() reads the value with
 * spank_option_getopt, whatever order Slurm calls things in. */
static int root_option_cb(int val, const char *optarg, int remote)
{
    (void)val;
    if (remote || parse_root(optarg != NULL ? optarg : "") >= 0)
        return 0;
    slurm_error("collsynth: --collsynth-root=%s is not a rank (an integer >= 0)",
                optarg != NULL ? optarg : "");
    return -1;
}

struct spank_option spank_options[] = {
    {"collsynth-root", "RANK",
     "root rank of the rooted collectives (broadcast, reduce, gather, scatter) collsynth "
     "synthesizes for this step (default: plugstack.conf's root=, else 0)",
     1, 0, root_option_cb},
    SPANK_OPTIONS_TABLE_END};

int slurm_spank_init(spank_t sp, int ac, char **av)
{
    if (spank_context() != S_CTX_REMOTE)
        return 0;
    memset(&st, 0, sizeof st);
    parse_args(ac, av);
    (void)sp;
    json_decref(cluster_doc);
    cluster_doc = NULL;
    cluster_problem[0] = '\0';
    if (cfg.cluster[0] != '\0') {
        cluster_doc = cluster_load_file(cfg.cluster, cluster_problem, sizeof cluster_problem);
    }
    return 0;
}

/* ---- talking to collsynthd ------------------------------------------------------------ */

typedef struct exchange {
    cs_http_client http;
    double deadline;     /* cs_now() value when the budget ends */
    bool unreachable;    /* the last request got no answer at all */
} exchange;

static double remaining(const exchange *x) { return x->deadline - cs_now(); }

/* Sends one request within the budget, capping the connect phase at 2 s when
 * cap_connect.  Returns false, with why filled, when no answer came. */
static bool send_within_budget(exchange *x, const char *method, const char *path,
                               const char *body, bool cap_connect, cs_http_response *r,
                               char *why, size_t whylen)
{
    double left = remaining(x);
    if (left <= 0.05) {
        fmt_into(why, whylen, "no answer within timeout=%gs", cfg.timeout_s);
        return false;
    }
    x->http.timeout_s = left;
    if (cap_connect)
        x->http.connect_timeout_s = left < 2.0 ? left : 2.0;
    cs_error err;
    if (cs_http_request(&x->http, method, path, body, r, &err) != CS_OK) {
        if (r->unreachable && remaining(x) <= 0.05)
            fmt_into(why, whylen, "%s did not answer within timeout=%gs", x->http.base_url,
                     cfg.timeout_s);
        else
            fmt_into(why, whylen, "%s", err.message);
        return false;
    }
    return true;
}

/* One JSON request within the budget.  Returns the parsed body of a 2xx answer
 * (and *status), or NULL with why filled. */
static json_t *request_json(exchange *x, const char *method, const char *path, const char *body,
                            long *status, char *why, size_t whylen)
{
    cs_http_response r;
    if (!send_within_budget(x, method, path, body, true, &r, why, whylen))
        return NULL;
    if (status != NULL)
        *status = r.status;
    json_t *doc = NULL;
    if (r.status >= 200 && r.status < 300) {
        doc = json_loadb(r.body, r.len, 0, NULL);
        if (doc == NULL)
            fmt_into(why, whylen, "%s %s: the answer is not JSON", method, path);
    } else {
        char code[64], message[DAEMON_MESSAGE_MAX], field[96];
        cs_http_error_from_body(&r, code, sizeof code, message, sizeof message, field,
                                sizeof field);
        fmt_into(why, whylen, "%s %s: HTTP %ld %s%s%s", method, path, r.status, code,
                 message[0] ? ": " : "", message);
    }
    cs_http_response_free(&r);
    return doc;
}

static char *request_text(exchange *x, const char *path, long *status, char *why,
                          size_t whylen, char *errfield, size_t fieldlen)
{
    x->unreachable = true;
    *status = 0;
    if (errfield != NULL && fieldlen > 0)
        errfield[0] = '\0';
    cs_http_response r;
    if (!send_within_budget(x, "GET", path, NULL, false, &r, why, whylen))
        return NULL;
    x->unreachable = false;
    *status = r.status;
    if (r.status != 200) {
        char code[64], message[DAEMON_MESSAGE_MAX], field[96];
        cs_http_error_from_body(&r, code, sizeof code, message, sizeof message, field,
                                sizeof field);
        fmt_into(why, whylen, "GET %s: HTTP %ld %s %s", path, r.status, code, message);
        if (errfield != NULL && fieldlen > 0)
            fmt_into(errfield, fieldlen, "%s", field);
        cs_http_response_free(&r);
        return NULL;
    }
    return r.body; /* ownership moves to the caller */
}

typedef struct fetch_ctx {
    exchange *x;
} fetch_ctx;

static json_t *fetch_builtin(void *ctx, const char *name, char *msg, size_t msglen)
{
    fetch_ctx *fc = ctx;
    char *esc = cs_http_escape(name);
    char path[512];
    fmt_into(path, sizeof path, "/v1/topologies/%s", esc ? esc : "");
    free(esc);
    json_t *doc = request_json(fc->x, "GET", path, NULL, NULL, msg, msglen);
    if (doc == NULL)
        return NULL;
    json_t *inner = json_object_get(doc, "topology");
    if (json_is_object(inner)) {
        json_incref(inner);
        json_decref(doc);
        return inner;
    }
    return doc;
}

/* Synthesizes one collective within the budget; returns the result object. */
static json_t *synthesize(exchange *x, const json_t *topology, const char *kind, long root,
                          char *why, size_t whylen)
{
    json_t *options = cfg.options[0] ? json_loads(cfg.options, 0, NULL) : NULL;
    if (!json_is_object(options)) {
        json_decref(options);
        options = json_object();
    }
    json_object_set_new(options, "wait_s", json_real(fmax(0.0, remaining(x) - 0.5)));
    /* the hook writes MSCCL XML: a schedule that copies inside a switch has
     * none, so the request says what it needs (synthesize.h, codegen; part
     * of the key only on copy-capable switches, so other allocations share
     * the cache with every client) */
    json_object_set_new(options, "codegen", json_string("msccl-xml"));
    json_t *req = json_pack("{s:O, s:{s:s}, s:s, s:o}", "topology", topology, "collective",
                            "kind", kind, "method", cfg.method, "options", options);
    if (kind_is_rooted(kind))
        json_object_set_new(json_object_get(req, "collective"), "root", json_integer(root));
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    long status = 0;
    json_t *doc = request_json(x, "POST", "/v1/synthesize?view=summary", body, &status, why,
                               whylen);
    free(body);
    if (doc == NULL)
        return NULL;
    if (json_is_array(json_object_get(doc, "frontier")))
        return doc;
    json_t *jv = json_object_get(doc, "job");
    char job[128];
    if (json_is_integer(jv))
        fmt_into(job, sizeof job, "%lld", (long long)json_integer_value(jv));
    else if (json_is_string(jv))
        fmt_into(job, sizeof job, "%s", json_string_value(jv));
    else {
        fmt_into(why, whylen, "POST /v1/synthesize: HTTP %ld without a result or job", status);
        json_decref(doc);
        return NULL;
    }
    json_decref(doc);
    char path[256];
    fmt_into(path, sizeof path, "/v1/jobs/%s?view=summary", job);
    for (;;) {
        json_t *j = request_json(x, "GET", path, NULL, NULL, why, whylen);
        if (j == NULL)
            return NULL;
        const char *s = json_string_value(json_object_get(j, "status"));
        if (s != NULL && strcmp(s, "done") == 0) {
            json_t *res = json_object_get(j, "result");
            if (json_is_object(res)) {
                json_incref(res);
                json_decref(j);
                return res;
            }
            fmt_into(why, whylen, "job %s done without a result", job);
            json_decref(j);
            return NULL;
        }
        if (s != NULL && (strcmp(s, "failed") == 0 || strcmp(s, "cancelled") == 0)) {
            const char *m = json_string_value(json_object_get(json_object_get(j, "error"), "message"));
            fmt_into(why, whylen, "%s synthesis %s%s%s", kind, s, m ? ": " : "", m ? m : "");
            json_decref(j);
            return NULL;
        }
        json_decref(j);
        if (remaining(x) < 0.3) {
            fmt_into(why, whylen, "%s synthesis still running after timeout=%gs (job %s goes on; "
                     "later jobs get it from the cache)", kind, cfg.timeout_s, job);
            return NULL;
        }
        struct timespec ts = {0, 200 * 1000000L};
        nanosleep(&ts, NULL);
    }
}

/* Writes one XML document, with its byte range stamped, for one runtime. */
static int write_xml(exchange *x, const char *esc_key, int coll, const size_range *r,
                     int nth, bool largest, int rt, char *why, size_t whylen)
{
    const char *kind = cfg.collectives[coll];
    char path[1024];
    int n = fmt_into(path, sizeof path, "/v1/results/%s?format=msccl-xml&alg=%d&runtime=%s",
                     esc_key, r->index, runtime_names[rt]);
    /* a GPU with fewer SMs than an A100 holds fewer thread blocks per rank:
     * an entry that does not fit is refused (422, field "runtime") and skipped */
    if (cfg.gpu_sms > 0)
        n += fmt_into(path + n, sizeof path - (size_t)n, "&gpu_sms=%d", cfg.gpu_sms);
    bool slice = st.rank_first >= 0 && !st.slices_refused;
    if (slice)
        fmt_into(path + n, sizeof path - (size_t)n, "&ranks=%d-%d", st.rank_first, st.rank_last);
    long status = 0;
    char field[96];
    char *xml = request_text(x, path, &status, why, whylen, field, sizeof field);
    /* Only a daemon that cannot slice (its 422 names the field "ranks") makes
     * the whole document worth fetching.  A refusal for the runtime's limits
     * (field "runtime") refuses the whole document too, for every node alike:
     * fetching it would only move tens of MB per node to be refused. */
    if (xml == NULL && slice && status == 422 && !x->unreachable &&
        strcmp(field, "ranks") == 0) {
        /* a daemon that cannot slice this document: the whole one serves too */
        log_lines(false, "%s (node's slice refused; fetching the whole document)", why);
        st.slices_refused = true;
        path[n] = '\0';
        xml = request_text(x, path, &status, why, whylen, NULL, 0);
    }
    if (xml == NULL)
        return -1;
    char *stamped = xml_set_byte_range(xml, r->min_bytes, r->max_bytes);
    free(xml);
    if (stamped == NULL) {
        x->unreachable = false;
        fmt_into(why, whylen, "%s: the server's MSCCL XML has no <algo> element", kind);
        return -1;
    }
    written_file *w = &st.files[st.nfiles];
    fmt_into(w->path, sizeof w->path, "%s/%s-%d.xml", st.subdir[rt], kind, nth);
    FILE *f = fopen(w->path, "w");
    bool ok = f != NULL && fputs(stamped, f) >= 0;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    free(stamped);
    if (!ok) {
        x->unreachable = false;
        fmt_into(why, whylen, "cannot write %s: %s", w->path, strerror(errno));
        unlink(w->path);
        return -1;
    }
    w->runtime = rt;
    w->collective = coll;
    w->largest = largest;
    st.nfiles++;
    st.nper[rt]++;
    return 0;
}

/* Writes the frontier's algorithms of one collective, one file per size range
 * and runtime.  A runtime the server cannot generate for (its limits) is
 * skipped with a log line; no answer at all is fatal (the budget is gone). */
static int write_collective(exchange *x, const json_t *expanded, int coll, const json_t *result,
                            char *why, size_t whylen)
{
    const char *kind = cfg.collectives[coll];
    const char *key = json_string_value(json_object_get(result, "key"));
    json_t *frontier = json_object_get(result, "frontier");
    if (key == NULL || json_array_size(frontier) == 0) {
        fmt_into(why, whylen, "%s: the result has no key or an empty frontier", kind);
        return -1;
    }
    size_t kl = strlen(st.keys);
    fmt_into(st.keys + kl, sizeof st.keys - kl, "%s%s=%s", kl ? "," : "", kind, key);
    double alpha, beta;
    cluster_alpha_beta(expanded, &alpha, &beta);
    size_range ranges[32];
    int nr = frontier_size_ranges(frontier, alpha, beta, ranges, 32);
    char *esc = cs_http_escape(key);
    int written = 0;
    for (int i = 0; i < nr; i++)
        for (int rt = 0; rt < RT_COUNT && st.nfiles < MAX_FILES; rt++) {
            if (write_xml(x, esc ? esc : "", coll, &ranges[i], i, i == nr - 1, rt, why,
                          whylen) == 0) {
                written++;
                continue;
            }
            if (x->unreachable) {
                free(esc);
                return -1;
            }
            log_lines(false, "skipping %s range %d for %s: %s", kind, i, runtime_names[rt],
                      why);
        }
    free(esc);
    if (written == 0) {
        fmt_into(why + strlen(why), whylen - strlen(why), " (no MSCCL XML for %s)", kind);
        return -1;
    }
    why[0] = '\0';
    return 0;
}

/* A GPU step: Slurm's GPU variables (set by --gpus*, --gres=gpu and the gres
 * plugin; which ones depends on the version and the request) or the device
 * lists the runtimes read. */
static bool step_has_gpus(spank_t sp)
{
    const char *vars[] = {"SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "SLURM_GPUS_ON_NODE",
                          "SLURM_GPUS", "SLURM_GPUS_PER_NODE", "SLURM_GPUS_PER_TASK",
                          "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL"};
    const char *tres_vars[] = {"SLURM_TRES_PER_TASK", "SLURM_GRES", "SLURM_JOB_GRES",
                               "SLURM_STEP_GRES"};
    char buf[256];
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (spank_getenv(sp, vars[i], buf, sizeof buf) == ESPANK_SUCCESS && buf[0] != '\0' &&
            strcmp(buf, "NoDevFiles") != 0 && strcmp(buf, "0") != 0)
            return true;
    for (size_t i = 0; i < sizeof tres_vars / sizeof tres_vars[0]; i++)
        if (spank_getenv(sp, tres_vars[i], buf, sizeof buf) == ESPANK_SUCCESS &&
            strstr(buf, "gpu") != NULL)
            return true;
    return false;
}

/* How many GPUs the step has on this node, or -1 when the environment does not
 * say (gpus=always on a machine without Slurm's GPU variables). */
static int step_gpus_on_node(spank_t sp)
{
    char buf[1024];
    if (spank_getenv(sp, "SLURM_GPUS_ON_NODE", buf, sizeof buf) == ESPANK_SUCCESS && atoi(buf) > 0)
        return atoi(buf);
    const char *lists[] = {"SLURM_STEP_GPUS", "CUDA_VISIBLE_DEVICES", "ROCR_VISIBLE_DEVICES",
                           "GPU_DEVICE_ORDINAL"};
    for (size_t i = 0; i < sizeof lists / sizeof lists[0]; i++) {
        if (spank_getenv(sp, lists[i], buf, sizeof buf) != ESPANK_SUCCESS || buf[0] == '\0' ||
            strcmp(buf, "NoDevFiles") == 0)
            continue;
        int n = 1;
        for (const char *p = buf; *p; p++)
            n += *p == ',';
        return n;
    }
    return -1;
}

/* Orders MSCCL_XML_FILES for the older runtime's 4-algorithm limit: first the
 * algorithm each collective uses for the largest messages, then the rest. */
static void build_xml_files_list(void)
{
    int taken = 0;
    size_t used = 0;
    st.xml_files[0] = '\0';
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < st.nfiles; i++) {
            const written_file *w = &st.files[i];
            if (w->runtime != RT_MSCCL || (pass == 0) != w->largest ||
                taken >= MAX_XML_FILES_OLD_RUNTIME)
                continue;
            int n = fmt_into(st.xml_files + used, sizeof st.xml_files - used, "%s%s",
                             used ? ":" : "", w->path);
            if (n > 0 && (size_t)n < sizeof st.xml_files - used) {
                used += (size_t)n;
                taken++;
            }
        }
}

static void remove_files(void)
{
    for (int i = 0; i < st.nfiles; i++)
        unlink(st.files[i].path);
    st.nfiles = 0;
    for (int rt = 0; rt < RT_COUNT; rt++) {
        if (st.created_sub[rt])
            rmdir(st.subdir[rt]);
        st.created_sub[rt] = false;
        st.nper[rt] = 0;
    }
    if (st.created_dir)
        rmdir(st.dir);
    st.created_dir = false;
}

/* The root the step's rooted collectives get, and the option that set it
 * (for the warning when it is not a rank of the step): the job's
 * --collsynth-root wins over plugstack.conf's root=. */
static long step_root(spank_t sp, char *source, size_t sourcelen)
{
    char *optarg = NULL;
    if (spank_option_getopt(sp, &spank_options[0], &optarg) == ESPANK_SUCCESS && optarg != NULL) {
        fmt_into(source, sourcelen, "--collsynth-root=%s", optarg);
        return parse_root(optarg); /* -1: malformed (srun normally refuses it first) */
    }
    fmt_into(source, sourcelen, "plugstack.conf root=%ld", cfg.root);
    return cfg.root;
}

static void prepare(spank_t sp)
{
    if (cfg.config_problem[0] != '\0') {
        fmt_into(st.warning, sizeof st.warning, "%s", cfg.config_problem);
        return;
    }
    if (cfg.gpus_mode == 0 && !step_has_gpus(sp))
        return; /* not a GPU step: nothing to do, nothing to say */
    if (cfg.server[0] == '\0' || cfg.cluster[0] == '\0') {
        fmt_into(st.warning, sizeof st.warning, "plugstack.conf needs server= and cluster=");
        return;
    }
    uint32_t jobid = 0, stepid = 0, nodeid = 0;
    spank_get_item(sp, S_JOB_ID, &jobid);
    spank_get_item(sp, S_JOB_STEPID, &stepid);
    spank_get_item(sp, S_JOB_NODEID, &nodeid);
    char nodelist[8192];
    if (spank_getenv(sp, "SLURM_STEP_NODELIST", nodelist, sizeof nodelist) != ESPANK_SUCCESS &&
        spank_getenv(sp, "SLURM_JOB_NODELIST", nodelist, sizeof nodelist) != ESPANK_SUCCESS &&
        spank_getenv(sp, "SLURM_NODELIST", nodelist, sizeof nodelist) != ESPANK_SUCCESS) {
        fmt_into(st.warning, sizeof st.warning, "the step's node list is not in its environment");
        return;
    }
    if (cluster_doc == NULL) {
        fmt_into(st.warning, sizeof st.warning, "%s", cluster_problem);
        return;
    }
    const json_t *cluster = cluster_doc;
    char why[WHY_MAX] = "";
    char **nodes = NULL;
    int nnodes = hostlist_expand(nodelist, &nodes, why, sizeof why);
    exchange x;
    cs_error err;
    json_t *topology = NULL, *expanded = NULL;
    if (nnodes < 0)
        goto fail;
    if (cs_http_client_init(&x.http, cfg.server, cfg.token, cfg.timeout_s, &err) != CS_OK) {
        fmt_into(why, sizeof why, "%s", err.message);
        goto fail;
    }
    x.deadline = cs_now() + cfg.timeout_s;
    fetch_ctx fc = {&x};
    if (cluster_build_topology(cluster, nodes, nnodes, fetch_builtin, &fc, &topology, &expanded,
                               why, sizeof why) != 0)
        goto fail;
    /* MSCCL needs ngpus = the communicator size: a step on part of a node would
     * get documents for the whole node, which the executor refuses at init */
    int have = step_gpus_on_node(sp);
    int want = nnodes == 1 ? (int)json_integer_value(json_object_get(expanded, "ranks"))
                           : (int)json_array_size(json_array_get(json_object_get(expanded, "groups"),
                                                                 nodeid));
    if (have > 0 && want > 0 && have != want) {
        fmt_into(why, sizeof why, "the step uses %d GPU(s) on this node but its node type has %d",
                 have, want);
        goto fail;
    }
    /* the root must be one of the step's ranks (numbered node by node) */
    bool rooted = false;
    for (int c = 0; c < cfg.ncollectives; c++)
        rooted = rooted || kind_is_rooted(cfg.collectives[c]);
    char root_source[128];
    long root = step_root(sp, root_source, sizeof root_source);
    long ranks = (long)json_integer_value(json_object_get(expanded, "ranks"));
    if (rooted && (root < 0 || root >= ranks)) {
        if (root < 0)
            fmt_into(why, sizeof why, "%s is not a rank (an integer >= 0)", root_source);
        else
            fmt_into(why, sizeof why, "%s is not a rank of this step: it has %ld ranks (0..%ld)",
                     root_source, ranks, ranks - 1);
        goto fail;
    }
    if (!rooted && root != cfg.root)
        slurm_info("collsynth: %s is unused: collectives= names no rooted collective",
                   root_source);
    st.rank_first = st.rank_last = -1;
    if (nnodes > 1 &&
        cluster_node_ranks(expanded, (int)nodeid, &st.rank_first, &st.rank_last) != 0)
        st.rank_first = st.rank_last = -1; /* not a block: the whole documents */

    char tmp[1024];
    if (cfg.tmpdir[0] != '\0')
        set_str(tmp, sizeof tmp, cfg.tmpdir);
    else if (spank_getenv(sp, "TMPDIR", tmp, sizeof tmp) != ESPANK_SUCCESS || tmp[0] == '\0')
        set_str(tmp, sizeof tmp, "/tmp");
    /* the node id keeps two nodes that share a file system (or a host) apart */
    fmt_into(st.dir, sizeof st.dir, "%s/collsynth.%u.%u.%u", tmp, jobid, stepid, nodeid);
    if (mkdir(st.dir, 0700) == 0)
        st.created_dir = true;
    else if (errno != EEXIST) {
        fmt_into(why, sizeof why, "cannot create %s: %s", st.dir, strerror(errno));
        goto fail;
    }
    for (int rt = 0; rt < RT_COUNT; rt++) {
        fmt_into(st.subdir[rt], sizeof st.subdir[rt], "%s/%s", st.dir, runtime_subdirs[rt]);
        if (mkdir(st.subdir[rt], 0700) == 0)
            st.created_sub[rt] = true;
        else if (errno != EEXIST) {
            fmt_into(why, sizeof why, "cannot create %s: %s", st.subdir[rt], strerror(errno));
            goto fail;
        }
    }

    for (int c = 0; c < cfg.ncollectives; c++) {
        json_t *res = synthesize(&x, topology, cfg.collectives[c], root, why, sizeof why);
        if (res == NULL)
            goto fail;
        int rc = write_collective(&x, expanded, c, res, why, sizeof why);
        json_decref(res);
        if (rc != 0)
            goto fail;
    }
    build_xml_files_list();
    st.active = st.nfiles > 0;
    slurm_info("collsynth: %d MSCCL algorithm file(s) in %s for %s (%d node(s))", st.nfiles,
               st.dir, st.keys, nnodes);
    goto done;
fail:
    remove_files();
    st.keys[0] = '\0';
    fmt_into(st.warning, sizeof st.warning, "%s", why[0] ? why : "unknown failure");
done:
    hostlist_free(nodes, nnodes > 0 ? nnodes : 0);
    json_decref(topology);
    json_decref(expanded);
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_REMOTE)
        return 0;
    prepare(sp);
    if (st.warning[0] != '\0') {
        uint32_t nodeid = 0;
        spank_get_item(sp, S_JOB_NODEID, &nodeid);
        if (nodeid == 0)
            log_lines(true, "warning: %s; the job runs without synthesized collectives",
                      st.warning);
        else
            log_lines(false, "warning: %s", st.warning);
    }
    return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
    (void)ac;
    (void)av;
    if (spank_context() != S_CTX_REMOTE || !st.active)
        return 0;
    /* the user's own settings win (overwrite 0) */
    if (st.xml_files[0] != '\0')
        spank_setenv(sp, "MSCCL_XML_FILES", st.xml_files, 0);
    spank_setenv(sp, "NCCL_ALGO", "MSCCL,Ring,Tree", 0);
    if (st.nper[RT_EXECUTOR] > 0)
        spank_setenv(sp, "MSCCL_ALGO_DIR", st.subdir[RT_EXECUTOR], 0);
    spank_setenv(sp, "COLLSYNTH_RESULT_KEYS", st.keys, 1);
    return 0;
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
    (void)sp;
    (void)ac;
    (void)av;
    if (spank_context() == S_CTX_REMOTE) {
        remove_files();
        json_decref(cluster_doc);
        cluster_doc = NULL;
    }
    return 0;
}
