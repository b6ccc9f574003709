/*
 * server.c - collsynthd's lifecycle and HTTP plumbing: libmicrohttpd with its
 * own epoll thread pool, per-request state, body collection with a size
 * limit, CORS, response helpers, and graceful shutdown.  The routes live in
 * routes.c; synthesis runs on the worker pool of jobs.c, never here.
 */
#include "server_internal.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- responses ------------------------------------------------------------------- */

static void add_cors(req_state *rs, struct MHD_Response *r)
{
    cs_server *s = rs->srv;
    if (!s->cors_any && s->ncors == 0)
        return;
    const char *origin = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "Origin");
    if (!origin)
        return;
    bool ok = s->cors_any;
    for (int i = 0; i < s->ncors && !ok; i++)
        ok = strcmp(s->cors[i], origin) == 0;
    if (!ok)
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", s->cors_any ? "*" : origin);
    if (!s->cors_any)
        MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "Location, Retry-After, ETag");
}

enum MHD_Result queue(req_state *rs, int status, struct MHD_Response *r)
{
    if (!r)
        return MHD_NO;
    add_cors(rs, r);
    rs->status = status;
    rs->responded = true;
    enum MHD_Result ret = MHD_queue_response(rs->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    return ret;
}

static void unref_blob_cb(void *cls) { blob_unref(cls); }

enum MHD_Result respond_blob(req_state *rs, int status, cs_blob *b, const char *ctype,
                             const char *extra_header, const char *extra_value)
{
    blob_ref(b);
    struct MHD_Response *r =
        MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, unref_blob_cb, b);
    if (!r) {
        blob_unref(b);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctype);
    if (extra_header)
        MHD_add_response_header(r, extra_header, extra_value);
    return queue(rs, status, r);
}

enum MHD_Result respond_text(req_state *rs, int status, const char *text, size_t len,
                             const char *ctype)
{
    struct MHD_Response *r =
        MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!r)
        return MHD_NO;
    MHD_add_response_header(r, "Content-Type", ctype);
    return queue(rs, status, r);
}

enum MHD_Result respond_json(req_state *rs, int status, json_t *doc)
{
    char *text = doc ? json_dumps(doc, JSON_COMPACT | CS_JSON_REAL) : NULL;
    json_decref(doc);
    if (!text)
        return respond_text(rs, 500, "{\"error\":{\"code\":\"internal\",\"message\":\"out of "
                                     "memory\",\"field\":\"\"}}",
                            strlen("{\"error\":{\"code\":\"internal\",\"message\":\"out of "
                                   "memory\",\"field\":\"\"}}"),
                            "application/json");
    struct MHD_Response *r =
        MHD_create_response_from_buffer(strlen(text), text, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", "application/json");
    return queue(rs, status, r);
}

enum MHD_Result respond_error(req_state *rs, int status, const char *code, const char *field,
                              const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *doc = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", code, "message", msg,
                            "field", field ? field : "");
    if (!doc) /* message was not valid UTF-8 (echoed client bytes): drop it */
        doc = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", code, "message",
                        "invalid request (details not printable)", "field", "");
    return respond_json(rs, status, doc);
}

int http_status_for(int code)
{
    switch (code) {
    case CS_EINVAL: return 400;
    case CS_ELIMIT: return 413;
    case CS_EUNSUPPORTED: return 422;
    case CS_EUNSAT: return 422;
    case CS_ETIMEOUT: return 504;
    case CS_ECANCELLED: return 409;
    case CS_EIO: return 503;
    default: return 500;
    }
}

enum MHD_Result respond_cs_error(req_state *rs, const cs_error *err)
{
    int st = http_status_for(err->code);
    const char *code = cs_status_name(err->code);
    return respond_error(rs, st, code, err->field, "%s", err->message[0] ? err->message : code);
}

/* ---- MHD callbacks ------------------------------------------------------------------ */

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    (void)version;
    cs_server *s = cls;
    req_state *rs = *con_cls;
    if (!rs) {
        rs = calloc(1, sizeof *rs);
        if (!rs)
            return MHD_NO;
        rs->srv = s;
        rs->conn = conn;
        rs->start = cs_now();
        rs->route = ROUTE_OTHER;
        rs->method = method;
        snprintf(rs->path, sizeof rs->path, "%s", url);
        *con_cls = rs;
        bool has_body = strcmp(method, "POST") == 0 || strcmp(method, "PUT") == 0 ||
                        strcmp(method, "PATCH") == 0;
        if (has_body) {
            const char *cl = MHD_lookup_connection_value(conn, MHD_HEADER_KIND,
                                                         MHD_HTTP_HEADER_CONTENT_LENGTH);
            if (cl && strtod(cl, NULL) > (double)s->cfg.max_body_bytes) {
                rs->route = strcmp(url, "/v1/synthesize") == 0 ? ROUTE_SYNTHESIZE : ROUTE_OTHER;
                return respond_error(rs, 413, "too_large", "body",
                                     "request body of %s bytes exceeds the limit of %ld", cl,
                                     s->cfg.max_body_bytes);
            }
        }
        /* Answer on the next call, not this one: a response queued during the
         * first call makes libmicrohttpd close the connection after it (it
         * cannot know the request is complete), which defeats keep-alive. */
        return MHD_YES;
    }
    rs->conn = conn;
    if (*upload_data_size > 0) {
        if (!rs->too_large) {
            if (rs->len + *upload_data_size > (size_t)s->cfg.max_body_bytes) {
                rs->too_large = true;
                free(rs->body);
                rs->body = NULL;
                rs->len = rs->cap = 0;
            } else {
                if (rs->len + *upload_data_size + 1 > rs->cap) {
                    size_t ncap = (rs->len + *upload_data_size + 1) * 2;
                    if (ncap > (size_t)s->cfg.max_body_bytes + 1)
                        ncap = (size_t)s->cfg.max_body_bytes + 1;
                    char *nb = realloc(rs->body, ncap);
                    if (!nb)
                        return MHD_NO;
                    rs->body = nb;
                    rs->cap = ncap;
                }
                memcpy(rs->body + rs->len, upload_data, *upload_data_size);
                rs->len += *upload_data_size;
                rs->body[rs->len] = '\0';
            }
        }
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (rs->responded)
        return MHD_YES;
    if (rs->too_large) {
        rs->route = strcmp(url, "/v1/synthesize") == 0 ? ROUTE_SYNTHESIZE : ROUTE_OTHER;
        return respond_error(rs, 413, "too_large", "body", "request body exceeds the limit of %ld bytes",
                             s->cfg.max_body_bytes);
    }
    return route_request(rs, url, method);
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    (void)toe;
    cs_server *s = cls;
    req_state *rs = *con_cls;
    if (!rs)
        return;
    double secs = cs_now() - rs->start;
    int status = rs->responded ? rs->status : 0;
    metrics_observe_request(&s->metrics, rs->route, status, secs);
    if (s->cfg.access_log && s->log.level <= LOG_INFO) {
        char st[16], ms[32];
        snprintf(st, sizeof st, "%d", status);
        snprintf(ms, sizeof ms, "%.3f", secs * 1e3);
        log_event(&s->log, LOG_INFO, "http", "method", rs->method, "path", rs->path, "route",
                  route_name(rs->route), "status", st, "ms", ms, NULL);
    }
    free(rs->body);
    free(rs);
    *con_cls = NULL;
}

static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
    cs_server *s = cls;
    char msg[512];
    vsnprintf(msg, sizeof msg, fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    log_event(&s->log, LOG_WARN, "mhd", "message", msg, NULL);
}

/* ---- lifecycle ------------------------------------------------------------------------ */

static void parse_cors(cs_server *s)
{
    char buf[sizeof s->cfg.cors_origins];
    snprintf(buf, sizeof buf, "%s", s->cfg.cors_origins);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        while (*tok == ' ')
            tok++;
        size_t n = strlen(tok);
        while (n > 0 && tok[n - 1] == ' ')
            tok[--n] = '\0';
        if (!n)
            continue;
        if (!strcmp(tok, "*"))
            s->cors_any = true;
        else if (s->ncors < MAX_CORS_ORIGINS)
            s->cors[s->ncors++] = strdup(tok);
    }
}

static void make_instance_id(char *out, size_t n)
{
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    char rnd[40];
    jobs_new_id(rnd);
    rnd[8] = '\0';
    snprintf(out, n, "%.30s-%d-%.8s", host, (int)getpid(), rnd);
}

int server_start(const cs_server_config *cfg, const cs_logger *log, cs_server **out,
                 cs_error *err)
{
    *out = NULL;
    cs_server *s = calloc(1, sizeof *s);
    if (!s)
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    s->cfg = *cfg;
    s->log = *log;
    s->started = cs_now();
    metrics_init(&s->metrics);
    make_instance_id(s->instance, sizeof s->instance);
    parse_cors(s);
    static_dir_resolve(cfg->static_dir, s->static_dir, sizeof s->static_dir);

    int rc = store_open(cfg->store, cfg->data_dir, cfg->pg_pool, &s->store, err);
    if (rc) {
        server_free(s);
        return rc;
    }
    s->cache = cache_new((size_t)cfg->cache_mb << 20);
    if (!s->cache) {
        server_free(s);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    cs_jobs_env env = {.store = s->store, .cache = s->cache, .metrics = &s->metrics,
                       .log = &s->log, .config = &s->cfg, .owner = s->instance};
    if ((rc = jobs_start(&env, &s->jobs, err))) {
        server_free(s);
        return rc;
    }

    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    if (getaddrinfo(cfg->listen, port, &hints, &ai) != 0 || !ai) {
        server_stop(s);
        server_free(s);
        return cs_error_set(err, CS_EINVAL, "listen",
                            "--listen %s is not a numeric IPv4 or IPv6 address", cfg->listen);
    }
    /* One HTTP thread per CPU measured best on the 2-core box (docs/BENCHMARKS.md):
     * handlers never wait for syntheses, so more threads only add switches. */
    int http_threads = cfg->http_threads > 0 ? cfg->http_threads : cs_cpu_count();
    if (http_threads < 2)
        http_threads = 2;
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_TURBO | MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, access_handler, s, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_logger, s, MHD_OPTION_SOCK_ADDR,
        ai->ai_addr, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)http_threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
        MHD_OPTION_LISTEN_BACKLOG_SIZE,
        (unsigned)1024, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!s->mhd) {
        server_stop(s);
        server_free(s);
        return cs_error_set(err, CS_EIO, "port", "cannot listen on %s port %d (in use?)",
                            cfg->listen, cfg->port);
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(s->mhd, MHD_DAEMON_INFO_BIND_PORT);
    s->port = info ? info->port : cfg->port;
    *out = s;
    return CS_OK;
}

int server_port(const cs_server *s) { return s->port; }
const char *server_instance(const cs_server *s) { return s->instance; }

void server_stop(cs_server *s)
{
    if (!s || atomic_exchange(&s->stopping, true))
        return;
    if (s->mhd) {
        MHD_socket fd = MHD_quiesce_daemon(s->mhd);
        if (fd != MHD_INVALID_SOCKET)
            close(fd);
    }
    char grace[32];
    snprintf(grace, sizeof grace, "%g", s->cfg.shutdown_grace_s);
    log_event(&s->log, LOG_INFO, "shutdown", "grace_s", grace, NULL);
    if (s->jobs)
        jobs_stop(s->jobs, s->cfg.shutdown_grace_s);
    if (s->mhd) {
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
    }
    jobs_free(s->jobs);
    s->jobs = NULL;
    store_close(s->store);
    s->store = NULL;
}

void server_free(cs_server *s)
{
    if (!s)
        return;
    server_stop(s);
    cache_free(s->cache);
    for (int i = 0; i < s->ncors; i++)
        free(s->cors[i]);
    free(s);
}
