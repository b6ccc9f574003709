/*
 * config.c - option table, environment and flag parsing (see config.h).
 */
#include "config.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

extern char **environ;

#define DEFAULT_PORT 8470

typedef enum { OPT_STR, OPT_INT, OPT_LONG, OPT_DOUBLE, OPT_BOOL } opt_type;

typedef struct opt_def {
    const char *flag;     /* without "--" */
    opt_type type;
    size_t offset;
    size_t size;          /* strings: buffer size */
    double lo, hi;        /* numbers */
    const char *help;
} opt_def;

#define OFF(f) offsetof(cs_server_config, f)
#define SZ(f) sizeof(((cs_server_config *)0)->f)

static const opt_def options[] = {
    {"listen", OPT_STR, OFF(listen), SZ(listen), 0, 0,
     "address to listen on, optionally with the port: 127.0.0.1:8470, [::1]:8470 (default "
     "127.0.0.1: loopback only)"},
    {"port", OPT_INT, OFF(port), 0, 0, 65535,
     "TCP port (default 8470; 0 picks a free port, printed at startup)"},
    {"data-dir", OPT_STR, OFF(data_dir), SZ(data_dir), 0, 0,
     "directory for the SQLite store (default ./collsynth-data)"},
    {"store", OPT_STR, OFF(store), SZ(store), 0, 0,
     "store URL: sqlite:PATH or postgresql://user@host:port/db (default: sqlite at "
     "DATA_DIR/collsynth.db)"},
    {"static-dir", OPT_STR, OFF(static_dir), SZ(static_dir), 0, 0,
     "dashboard files served at / (default: clients/dashboard next to the binary's build/, "
     "or PREFIX/share/collsynth/dashboard for an installed PREFIX/bin/collsynthd)"},
    {"auth-token", OPT_STR, OFF(auth_token), SZ(auth_token), 0, 0,
     "if set, POST and DELETE need 'Authorization: Bearer TOKEN' (prefer the env variable)"},
    {"cors-origins", OPT_STR, OFF(cors_origins), SZ(cors_origins), 0, 0,
     "comma-separated origins allowed by CORS, or * (default: none)"},
    {"allowed-hosts", OPT_STR, OFF(allowed_hosts), SZ(allowed_hosts), 0, 0,
     "comma-separated host names this daemon answers to besides loopback names (a loopback "
     "daemon refuses other Host headers: DNS rebinding); when given, enforced on any bind"},
    {"log-format", OPT_STR, OFF(log_format), SZ(log_format), 0, 0,
     "kv (key=value, default) or json lines, on stderr"},
    {"log-level", OPT_STR, OFF(log_level), SZ(log_level), 0, 0,
     "debug, info (default), warn or error"},
    {"access-log", OPT_BOOL, OFF(access_log), 0, 0, 1,
     "log HTTP requests (default true): each at debug; server errors at warn, requests slower "
     "than 1 s and the --access-log-sample fraction at info"},
    {"access-log-sample", OPT_DOUBLE, OFF(access_log_sample), 0, 0, 1,
     "fraction of requests logged at info level (default 0; 1 = every request)"},
    {"log-file", OPT_STR, OFF(log_file), SZ(log_file), 0, 0,
     "write logs to this file instead of stderr (appended; reopened on SIGHUP, for logrotate)"},
    {"url-file", OPT_STR, OFF(url_file), SZ(url_file), 0, 0,
     "once listening, write the URL a local client reaches this daemon at "
     "(http://127.0.0.1:PORT for a wildcard bind) to this file, and remove it at exit: the "
     "port actually bound, whatever set it (the container's health check reads it)"},
    {"iso-cache", OPT_BOOL, OFF(iso_cache), 0, 0, 1,
     "answer a request whose network is isomorphic to a stored result's (another rank "
     "numbering of the same cluster shape) with that result relabelled and verified, "
     "instead of synthesizing (default true; docs/iso.md)"},
    {"chunk-guard", OPT_BOOL, OFF(chunk_guard), 0, 0, 1,
     "read chunked request bodies through the daemon's framing parser, which drops chunk "
     "extensions and trailers and refuses a request with more than 32 KiB of them with a "
     "400 (default true; false leaves libmicrohttpd's own parser alone, which answers a 500 "
     "to a chunk-size line longer than its buffer)"},
    {"workers", OPT_INT, OFF(workers), 0, 1, 256,
     "synthesis worker threads (default 2)"},
    {"http-threads", OPT_INT, OFF(http_threads), 0, 0, 256,
     "HTTP thread pool size (default 0 = one per CPU, at least 2; waiting clients hold none)"},
    {"parse-threads", OPT_INT, OFF(parse_threads), 0, 0, 256,
     "threads that parse and validate synthesis requests (default 0 = one per CPU, at least "
     "2), so costly requests never hold the HTTP threads"},
    {"max-connections", OPT_INT, OFF(max_connections), 0, 1, 100000,
     "concurrent HTTP connections (default 1024)"},
    {"max-connections-per-ip", OPT_INT, OFF(max_connections_per_ip), 0, 1, 100000,
     "concurrent HTTP connections from one client address (default 256)"},
    {"header-timeout", OPT_DOUBLE, OFF(header_timeout_s), 0, 0.1, 3600,
     "seconds a request's headers may take to arrive, from the connection's start or its "
     "previous response: slow or idle connections are closed after it (default 10)"},
    {"body-timeout", OPT_DOUBLE, OFF(body_timeout_s), 0, 0.1, 3600,
     "seconds a request body may take to arrive after its headers (default 60)"},
    {"max-queued", OPT_LONG, OFF(max_queued), 0, 1, 1e9,
     "queued jobs before POST answers 429 (default 256)"},
    {"job-time-limit", OPT_DOUBLE, OFF(job_time_limit_s), 0, 0.01, 1e7,
     "seconds a job may run before it is stopped and failed (default 600)"},
    {"max-body-bytes", OPT_LONG, OFF(max_body_bytes), 0, 64, 1e10,
     "largest request body; larger gets 413 (default 1048576)"},
    {"cache-mb", OPT_LONG, OFF(cache_mb), 0, 0, 1e6,
     "memory for cached results and generated code (default 256)"},
    {"lease", OPT_DOUBLE, OFF(lease_s), 0, 1, 1e6,
     "seconds without heartbeat before a running job is re-queued (default 30)"},
    {"max-attempts", OPT_INT, OFF(max_attempts), 0, 1, 100,
     "runs of one job before it fails as interrupted (default 3)"},
    {"shutdown-grace", OPT_DOUBLE, OFF(shutdown_grace_s), 0, 0, 3600,
     "SIGTERM: seconds running jobs may finish before they are re-queued (default 10)"},
    {"pg-pool", OPT_INT, OFF(pg_pool), 0, 1, 64,
     "PostgreSQL connections (default 4)"},
    {"poll", OPT_DOUBLE, OFF(poll_s), 0, 0.05, 60,
     "seconds between idle workers' looks for fleet work (default 0.5)"},
    {"max-result-sends", OPT_LONG, OFF(limits.max_sends), 0, 0, 1e12,
     "refuse requests whose result would hold more sends (default 0 = no count limit: "
     "--max-result-mb decides)"},
    {"max-result-mb", OPT_LONG, OFF(max_result_mb), 0, 1, 1e9,
     "memory one result may take while it is synthesized and stored (about 128 bytes per "
     "send); larger requests get 413 at once (default: half the machine's memory)"},
    {"max-ranks", OPT_INT, OFF(limits.max_ranks), 0, 2, 1 << 24,
     "largest topology accepted (default 4096 ranks)"},
    {"smt-max-ranks", OPT_INT, OFF(limits.smt_max_ranks), 0, 0, 4096,
     "auto policy: SMT only up to this many ranks (default 16)"},
    {"smt-max-variables", OPT_LONG, OFF(limits.smt_max_variables), 0, 0, 1e12,
     "auto policy: SMT only up to this estimated variable count (default 50000)"},
    {"smt-budget", OPT_DOUBLE, OFF(limits.smt_time_budget_s), 0, 0, 1e6,
     "auto policy: seconds of SMT search before TACOS takes over (default 30)"},
    {"solver-threads", OPT_INT, OFF(limits.threads), 0, 0, 256,
     "threads per synthesis (default 0 = CPU count)"},
};

#define NOPTIONS (sizeof options / sizeof options[0])

void config_defaults(cs_server_config *c)
{
    memset(c, 0, sizeof *c);
    snprintf(c->listen, sizeof c->listen, "127.0.0.1");
    c->port = DEFAULT_PORT;
    snprintf(c->data_dir, sizeof c->data_dir, "./collsynth-data");
    snprintf(c->log_format, sizeof c->log_format, "kv");
    snprintf(c->log_level, sizeof c->log_level, "info");
    c->access_log = true;
    c->iso_cache = true;
    c->chunk_guard = true;
    c->workers = 2;
    c->http_threads = 0;
    c->max_connections = 1024;
    c->max_connections_per_ip = 256;
    c->header_timeout_s = 10;
    c->body_timeout_s = 60;
    c->max_queued = 256;
    c->job_time_limit_s = 600;
    c->max_body_bytes = 1 << 20;
    c->cache_mb = 256;
    c->lease_s = 30;
    c->max_attempts = 3;
    c->shutdown_grace_s = 10;
    c->pg_pool = 4;
    c->poll_s = 0.5;
    synth_limits_default(&c->limits);
    long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
    c->max_result_mb = pages > 0 && page > 0 ? (long)((double)pages * page / 2 / 1048576) : 4096;
    c->limits.max_result_bytes = (double)c->max_result_mb * 1048576.0;
}

static int set_option_raw(cs_server_config *c, const opt_def *o, const char *value,
                          cs_error *err);

static int set_option(cs_server_config *c, const opt_def *o, const char *value, cs_error *err)
{
    int rc = set_option_raw(c, o, value, err);
    c->limits.max_result_bytes = (double)c->max_result_mb * 1048576.0;
    return rc;
}

static int set_option_raw(cs_server_config *c, const opt_def *o, const char *value,
                          cs_error *err)
{
    char *p = (char *)c + o->offset;
    char *end = NULL;
    switch (o->type) {
    case OPT_STR:
        if (strlen(value) >= o->size)
            return cs_error_set(err, CS_EINVAL, o->flag, "--%s: value too long (max %zu)",
                                o->flag, o->size - 1);
        snprintf(p, o->size, "%s", value);
        return CS_OK;
    case OPT_BOOL:
        /* in any case: environments write TRUE, False, On as often */
        if (!strcmp(value, "1") || !strcasecmp(value, "true") || !strcasecmp(value, "yes") ||
            !strcasecmp(value, "on"))
            *(bool *)p = true;
        else if (!strcmp(value, "0") || !strcasecmp(value, "false") ||
                 !strcasecmp(value, "no") || !strcasecmp(value, "off"))
            *(bool *)p = false;
        else
            return cs_error_set(err, CS_EINVAL, o->flag,
                                "--%s: expected true or false (also 1/0, yes/no, on/off), got %s",
                                o->flag, value);
        return CS_OK;
    default: {
        errno = 0;
        double v = strtod(value, &end);
        if (errno || end == value || *end || !isfinite(v))
            return cs_error_set(err, CS_EINVAL, o->flag, "--%s: not a number: %s", o->flag,
                                value);
        if (v < o->lo || v > o->hi)
            return cs_error_set(err, CS_EINVAL, o->flag, "--%s: must be in [%g, %g], got %s",
                                o->flag, o->lo, o->hi, value);
        if (o->type != OPT_DOUBLE && v != floor(v))
            return cs_error_set(err, CS_EINVAL, o->flag, "--%s: must be an integer, got %s",
                                o->flag, value);
        if (o->type == OPT_INT)
            *(int *)p = (int)v;
        else if (o->type == OPT_LONG)
            *(long *)p = (long)v;
        else
            /* p is the OPT_DOUBLE field at o->offset, a double */
            /* cppcheck-suppress invalidPointerCast */
            *(double *)p = v;
        return CS_OK;
    }
    }
}

static void env_name(const opt_def *o, char *buf, size_t n)
{
    size_t j = (size_t)snprintf(buf, n, "COLLSYNTH_");
    for (const char *s = o->flag; *s && j + 1 < n; s++)
        buf[j++] = *s == '-' ? '_' : (char)(*s >= 'a' && *s <= 'z' ? *s - 32 : *s);
    buf[j] = '\0';
}

int config_from_env(cs_server_config *c, char **envp, cs_error *err)
{
    if (!envp)
        envp = environ;
    for (size_t i = 0; i < NOPTIONS; i++) {
        char name[96];
        env_name(&options[i], name, sizeof name);
        size_t nl = strlen(name);
        for (char **e = envp; e && *e; e++)
            if (strncmp(*e, name, nl) == 0 && (*e)[nl] == '=') {
                int rc = set_option(c, &options[i], *e + nl + 1, err);
                if (rc) {
                    char msg[CS_ERROR_MESSAGE_MAX];
                    snprintf(msg, sizeof msg, "%s", err ? err->message : "");
                    return cs_error_set(err, rc, options[i].flag, "%s (from %s)", msg, name);
                }
            }
    }
    return CS_OK;
}

/* --listen ADDR, ADDR:PORT or [V6]:PORT ("localhost" is 127.0.0.1).  A port
 * given both ways must agree, unless --port kept its default. */
static int split_listen(cs_server_config *c, cs_error *err)
{
    static const char how[] =
        "--listen takes a numeric IPv4 or IPv6 address, optionally with a port: 127.0.0.1, "
        "0.0.0.0:8470, ::1, [::1]:8470";
    char host[sizeof c->listen], *port = NULL;
    snprintf(host, sizeof host, "%s", c->listen);
    char *addr = host;
    if (host[0] == '[') {
        char *close = strchr(host, ']');
        if (!close || (close[1] && close[1] != ':'))
            return cs_error_set(err, CS_EINVAL, "listen", "%s is not an address (%s)",
                                c->listen, how);
        *close = '\0';
        addr = host + 1;
        port = close[1] == ':' ? close + 2 : NULL;
    } else {
        char *colon = strchr(host, ':');
        if (colon && !strchr(colon + 1, ':')) { /* one colon: host:port; more: IPv6 */
            *colon = '\0';
            port = colon + 1;
        }
    }
    if (!strcmp(addr, "localhost"))
        addr = "127.0.0.1";
    unsigned char buf[sizeof(struct in6_addr)];
    if (inet_pton(AF_INET, addr, buf) != 1 && inet_pton(AF_INET6, addr, buf) != 1)
        return cs_error_set(err, CS_EINVAL, "listen", "%s is not an address (%s)", c->listen,
                            how);
    if (port) {
        char *end;
        errno = 0;
        long p = strtol(port, &end, 10);
        if (errno || end == port || *end || p < 0 || p > 65535)
            return cs_error_set(err, CS_EINVAL, "listen", "--listen %s: the port must be in "
                                "[0, 65535] (%s)", c->listen, how);
        if (c->port != DEFAULT_PORT && c->port != p)
            return cs_error_set(err, CS_EINVAL, "listen",
                                "--listen %s and --port %d name different ports; give one",
                                c->listen, c->port);
        c->port = (int)p;
    }
    memmove(c->listen, addr, strlen(addr) + 1);
    return CS_OK;
}

/* An option that is not in the table: the nearest flag, when one is close
 * enough to be a typo (cs_nearest_name, as the CLI suggests topologies and
 * collectives), is named.  name[0..nlen) is the word without its dashes; a
 * "no-" prefix is kept for the booleans' negated forms. */
static int unknown_option(const char *arg, const char *name, size_t nlen, cs_error *err)
{
    const char *names[2 * NOPTIONS + 1];
    char negated[NOPTIONS][48];
    int n = 0;
    for (size_t k = 0; k < NOPTIONS; k++) {
        names[n++] = options[k].flag;
        if (options[k].type == OPT_BOOL) {
            snprintf(negated[k], sizeof negated[k], "no-%s", options[k].flag);
            names[n++] = negated[k];
        }
    }
    names[n++] = "help";
    const char *near = cs_nearest_name(name, nlen, names, n);
    int shown = (int)(name - arg + (ptrdiff_t)nlen);
    if (near)
        return cs_error_set(err, CS_EINVAL, arg, "unknown option %.*s: did you mean --%s? "
                            "(see --help)", shown, arg, near);
    return cs_error_set(err, CS_EINVAL, arg, "unknown option %.*s (see --help)", shown, arg);
}

int config_from_args(cs_server_config *c, int argc, char **argv, bool *help, cs_error *err)
{
    *help = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            *help = true;
            return CS_OK;
        }
        if (a[0] == '-' && a[1] != '-' && a[1] != '\0')
            return unknown_option(a, a + 1, strcspn(a + 1, "="), err);   /* -workers */
        if (strncmp(a, "--", 2) != 0)
            return cs_error_set(err, CS_EINVAL, a, "unexpected argument %s (see --help)", a);
        const char *name = a + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const opt_def *o = NULL;
        for (size_t k = 0; k < NOPTIONS; k++)
            if (strlen(options[k].flag) == nlen && !strncmp(options[k].flag, name, nlen))
                o = &options[k];
        bool negated = false;
        if (!o && nlen > 3 && !strncmp(name, "no-", 3)) {
            for (size_t k = 0; k < NOPTIONS; k++)
                if (options[k].type == OPT_BOOL && strlen(options[k].flag) == nlen - 3 &&
                    !strncmp(options[k].flag, name + 3, nlen - 3))
                    o = &options[k];
            negated = o != NULL;
        }
        if (!o)
            return unknown_option(a, name, nlen, err);
        const char *value;
        if (eq)
            value = eq + 1;
        else if (o->type == OPT_BOOL)
            value = negated ? "false" : "true";
        else if (i + 1 < argc)
            value = argv[++i];
        else
            return cs_error_set(err, CS_EINVAL, o->flag, "--%s needs a value", o->flag);
        int rc = set_option(c, o, value, err);
        if (rc)
            return rc;
    }
    int rc = split_listen(c, err);
    if (rc)
        return rc;
    if (strcmp(c->log_format, "kv") && strcmp(c->log_format, "json"))
        return cs_error_set(err, CS_EINVAL, "log-format", "--log-format: kv or json");
    if (strcmp(c->log_level, "debug") && strcmp(c->log_level, "info") &&
        strcmp(c->log_level, "warn") && strcmp(c->log_level, "error"))
        return cs_error_set(err, CS_EINVAL, "log-level", "--log-level: debug, info, warn, error");
    return CS_OK;
}

void config_usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [options]\n\n"
            "collsynthd: the collsynth synthesis service (HTTP API: docs/service.md).\n"
            "Every option can also be set by the environment variable shown; flags win.\n\n",
            prog);
    for (size_t i = 0; i < NOPTIONS; i++) {
        char env[96];
        env_name(&options[i], env, sizeof env);
        const char *arg = options[i].type == OPT_BOOL ? "" : options[i].type == OPT_STR ? " STR"
                                                                                         : " N";
        fprintf(out, "  --%s%s\n      %s\n      env %s\n", options[i].flag, arg, options[i].help,
                env);
    }
    fprintf(out, "  --help\n      this text\n\n"
                 "Signals: SIGTERM/SIGINT stop gracefully (running jobs get --shutdown-grace\n"
                 "seconds, then are re-queued in the store for the next start).\n");
}
