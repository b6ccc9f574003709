/*
 * server.c - collsynthd's lifecycle and HTTP plumbing: libmicrohttpd with its
 * own epoll thread pool, per-request state, body collection with a size
 * limit, CORS, response helpers, and graceful shutdown.  The routes live in
 * routes.c; synthesis runs on the worker pool of jobs.c, never here.
 */
#include "server_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- responses ------------------------------------------------------------------- */

static void add_cors(req_state *rs, struct MHD_Response *r)
{
    cs_server *s = rs->srv;
    if (!s->cors_any && s->ncors == 0)
        return;
    const char *origin = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "Origin");
    if (!origin || !guard_cors_listed(s, origin))
        return;
    MHD_add_response_header(r, "Access-Control-Allow-Origin", s->cors_any ? "*" : origin);
    if (!s->cors_any)
        MHD_add_response_header(r, "Vary", "Origin");
    MHD_add_response_header(r, "Access-Control-Expose-Headers", "Location, Retry-After, ETag");
}

/* The request whose handler runs on this pool thread now (offload_task). */
static _Thread_local const req_state *offloaded_here;

bool queue_shared(req_state *rs, int status, struct MHD_Response *r, enum MHD_Result *ret)
{
    /* a stashed response is destroyed once queued, and CORS headers belong
     * to one request: both need a response of their own */
    if (!r || offloaded_here == rs)
        return false;
    cs_server *s = rs->srv;
    if (s->cors_any || s->ncors > 0) {
        const char *origin = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND, "Origin");
        if (origin && guard_cors_listed(s, origin))
            return false;
    }
    rs->status = status;
    rs->responded = true;
    *ret = MHD_queue_response(rs->conn, (unsigned)status, r);
    rs->responded = *ret == MHD_YES; /* see queue() */
    return true;
}

enum MHD_Result queue(req_state *rs, int status, struct MHD_Response *r)
{
    if (!r)
        return MHD_NO;
    add_cors(rs, r);
    if (rs->close_after)
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    rs->status = status;
    rs->responded = true;
    if (offloaded_here == rs) {
        /* MHD queues responses only from its own threads: keep it */
        if (rs->stash)
            MHD_destroy_response(rs->stash);
        rs->stash = r;
        rs->stash_status = status;
        return MHD_YES;
    }
    enum MHD_Result ret = MHD_queue_response(rs->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    /* MHD refused it (0.9.75: in the middle of a body) and closes the
     * connection: nothing is sent, so the access log and the metrics must not
     * count an answer */
    if (ret != MHD_YES)
        rs->responded = false;
    return ret;
}

typedef struct offload_job {
    req_state *rs;
    cs_offload_fn work;
} offload_job;

static void offload_task(void *arg)
{
    offload_job job = *(offload_job *)arg;
    free(arg);
    offloaded_here = job.rs;
    bool resume = job.work(job.rs);
    offloaded_here = NULL;
    /* when !resume, rs may already be resumed and gone: do not touch it */
    if (resume)
        MHD_resume_connection(job.rs->conn);
}

void offload_rerun(req_state *rs, cs_offload_fn work)
{
    offload_job *job = malloc(sizeof *job);
    if (job) {
        *job = (offload_job){.rs = rs, .work = work};
        if (workpool_submit(rs->srv->parse_pool, offload_task, job) == CS_OK)
            return;
        free(job);
    }
    /* stopping (the pool drains), full, or out of memory: here and now; this
     * thread may be handling a request of its own */
    const req_state *was = offloaded_here;
    offloaded_here = rs;
    bool resume = work(rs);
    offloaded_here = was;
    if (resume)
        MHD_resume_connection(rs->conn);
}

enum MHD_Result offload(req_state *rs, cs_offload_fn work)
{
    cs_server *s = rs->srv;
    offload_job *job = malloc(sizeof *job);
    if (!job)
        return respond_error(rs, 500, "internal", "", "out of memory");
    *job = (offload_job){.rs = rs, .work = work};
    MHD_suspend_connection(rs->conn);
    int rc = workpool_submit(s->parse_pool, offload_task, job);
    if (rc == CS_OK)
        return MHD_YES;
    free(job);
    /* answer on resume, from this thread's stash */
    offloaded_here = rs;
    json_t *doc = json_pack("{s:{s:s, s:s, s:s}}", "error", "code", "busy", "message",
                            rc == CS_ELIMIT ? "too many requests are being parsed; retry"
                                            : "the daemon is stopping",
                            "field", "");
    char *text = json_dumps(doc, JSON_COMPACT);
    json_decref(doc);
    struct MHD_Response *r = text ? MHD_create_response_from_buffer(strlen(text), text,
                                                                    MHD_RESPMEM_MUST_FREE)
                                  : NULL;
    if (r) {
        MHD_add_response_header(r, "Content-Type", "application/json");
        MHD_add_response_header(r, "Retry-After", "1");
        queue(rs, 503, r);
    } else {
        free(text);
    }
    offloaded_here = NULL;
    MHD_resume_connection(rs->conn);
    return MHD_YES;
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

static enum MHD_Result respond_refusal(req_state *rs)
{
    return respond_error(rs, rs->refusal_status, rs->refusal_code, rs->refusal_field, "%s",
                         rs->refusal_message);
}

/* A refused body is read and thrown away, up to this much beyond the limit,
 * so that a client which writes its whole body before reading (no
 * "Expect: 100-continue") gets to read the answer: answering first and
 * closing with unread data makes the kernel reset the connection, and the
 * client sees "broken pipe" instead of the 413. */
static size_t drain_cap(const cs_server *s)
{
    size_t cap = 4 * (size_t)s->cfg.max_body_bytes;
    return cap > (16u << 20) ? cap : (16u << 20);
}

static bool expects_continue(struct MHD_Connection *conn)
{
    const char *e = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "Expect");
    return e && !strcasecmp(e, "100-continue");
}

static req_state *new_request(cs_server *s, struct MHD_Connection *conn, const char *raw_uri)
{
    req_state *rs = calloc(1, sizeof *rs);
    if (!rs)
        return NULL;
    rs->srv = s;
    rs->conn = conn;
    rs->start = cs_now();
    rs->route = ROUTE_OTHER;
    /* MHD hands the handler the decoded path, where a %00 cuts it short:
     * "/app.js%00.html" would serve /app.js.  Only the raw target shows it. */
    rs->nul_in_target = raw_uri && strcasestr(raw_uri, "%00") != NULL;
    if (raw_uri) /* for the log of a request MHD refuses before the handler */
        snprintf(rs->path, sizeof rs->path, "%s", raw_uri);
    return rs;
}

/* MHD_OPTION_URI_LOG_CALLBACK: the request line is in; its state begins here. */
static void *uri_received(void *cls, const char *uri, struct MHD_Connection *conn)
{
    return new_request(cls, conn, uri);
}

/* First call for a request: the headers are complete, the body not read. */
static enum MHD_Result request_begins(req_state *rs)
{
    cs_server *s = rs->srv;
    if (strcmp(rs->url, "/v1/synthesize") == 0)
        rs->route = ROUTE_SYNTHESIZE; /* for the metrics of early refusals */
    if (s->cfg.chunk_guard) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(rs->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        rs->framing = ci ? framing_of(ci->connect_fd) : NULL;
        rs->framing_seq = framing_request_begins(rs->framing);
    }
    if (rs->nul_in_target)
        guard_refuse(rs, 400, "invalid", "path", "the request target contains a NUL byte (%%00)");
    guard_request(rs);
    bool has_body = !strcmp(rs->method, "POST") || !strcmp(rs->method, "PUT") ||
                    !strcmp(rs->method, "PATCH");
    if (!has_body) {
        conntrack_phase(s, rs->conn, CONN_BUSY);
        return rs->refusal_status ? respond_refusal(rs) : MHD_YES;
    }
    conntrack_phase(s, rs->conn, CONN_BODY);
    const char *cl = MHD_lookup_connection_value(rs->conn, MHD_HEADER_KIND,
                                                 MHD_HTTP_HEADER_CONTENT_LENGTH);
    double declared = cl ? strtod(cl, NULL) : 0;
    if (declared > (double)s->cfg.max_body_bytes)
        guard_refuse(rs, 413, "too_large", "body",
                     "request body of %.0f bytes exceeds the limit of %ld", declared,
                     s->cfg.max_body_bytes);
    /* A refusal waits for the body, unless the client asked before sending
     * it (it then never sends it) or the body is too large to drain. */
    if (rs->refusal_status &&
        (expects_continue(rs->conn) || declared > (double)drain_cap(s)))
        return respond_refusal(rs);
    return MHD_YES;
}

/* A piece of the body: kept, or counted and dropped once refused. */
static enum MHD_Result request_body(req_state *rs, const char *data, size_t n)
{
    cs_server *s = rs->srv;
    size_t limit = (size_t)s->cfg.max_body_bytes;
    if (!rs->refusal_status && rs->len + n > limit) {
        guard_refuse(rs, 413, "too_large", "body", "request body exceeds the limit of %ld bytes",
                     s->cfg.max_body_bytes);
        free(rs->body);
        rs->body = NULL;
        rs->drained = rs->len;
        rs->len = rs->cap = 0;
    }
    if (rs->refusal_status) {
        rs->drained += n;
        if (rs->drained <= drain_cap(s) || rs->responded)
            return MHD_YES;
        /* Past the cap: the answer goes now and the connection closes.  MHD
         * (0.9.75) queues a response only before the body or after it (in
         * between MHD_queue_response fails, and MHD resets the connection as
         * an "internal error"), so a chunked body is ended early by the
         * framing parser, at its next chunk-size line; the answer then goes
         * at the handler's last call.  Where that cannot be, the connection
         * closes unanswered. */
        if (framing_end_body(rs->framing, rs->framing_seq)) {
            rs->close_after = true;
            return MHD_YES;
        }
        return respond_refusal(rs);
    }
    if (rs->len + n + 1 > rs->cap) {
        size_t ncap = (rs->len + n + 1) * 2;
        if (ncap > limit + 1)
            ncap = limit + 1;
        char *nb = realloc(rs->body, ncap);
        if (!nb)
            return MHD_NO;
        rs->body = nb;
        rs->cap = ncap;
    }
    memcpy(rs->body + rs->len, data, n);
    rs->len += n;
    rs->body[rs->len] = '\0';
    return MHD_YES;
}

/* The framing parser ended this body early (framing.c): refuse the request,
 * unless it was refused already (the first reason is the one answered). */
static void framing_refusal(req_state *rs)
{
    int status;
    bool close;
    char msg[256];
    if (!rs->framing ||
        !framing_take_refusal(rs->framing, rs->framing_seq, &status, &close, msg, sizeof msg))
        return;
    if (!rs->refusal_status)
        guard_refuse(rs, status, status == 413 ? "too_large" : "invalid", "body", "%s", msg);
    rs->close_after = rs->close_after || close;
}

static enum MHD_Result access_handler(void *cls, struct MHD_Connection *conn, const char *url,
                                      const char *method, const char *version,
                                      const char *upload_data, size_t *upload_data_size,
                                      void **con_cls)
{
    (void)version;
    cs_server *s = cls;
    req_state *rs = *con_cls;
    if (!rs && !(rs = *con_cls = new_request(s, conn, NULL)))
        return MHD_NO;
    if (!rs->begun) {
        rs->begun = true;
        rs->method = method;
        rs->url = url;
        snprintf(rs->path, sizeof rs->path, "%s", url);
        return request_begins(rs);
    }
    rs->conn = conn;
    if (rs->stash) {
        /* resumed after an offloaded handler answered */
        struct MHD_Response *r = rs->stash;
        rs->stash = NULL;
        enum MHD_Result ret = MHD_queue_response(conn, (unsigned)rs->stash_status, r);
        MHD_destroy_response(r);
        return ret;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return request_body(rs, upload_data, n);
    }
    if (rs->responded)
        return MHD_YES;
    conntrack_phase(s, conn, CONN_BUSY); /* the whole request is in */
    framing_refusal(rs);
    if (rs->refusal_status)
        return respond_refusal(rs);
    return route_request(rs, url, method);
}

/* One info line per request made 70 MB in 400k requests: requests log at
 * debug, except server errors (warn), slow ones and a sampled fraction (info). */
static cs_log_level access_log_level(const cs_server *s, int status, double secs)
{
    if (status >= 500)
        return LOG_WARN;
    if (secs >= 1.0)
        return LOG_INFO;
    double p = s->cfg.access_log_sample;
    if (p > 0) {
        static _Thread_local unsigned long long x;
        if (!x)
            x = (unsigned long long)(size_t)&x ^ (unsigned long long)(cs_now() * 1e9);
        x ^= x << 13; /* xorshift64: cheap, per thread, no lock */
        x ^= x >> 7;
        x ^= x << 17;
        if ((double)(x >> 11) * 0x1.0p-53 < p)
            return LOG_INFO;
    }
    return LOG_DEBUG;
}

static void completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                      enum MHD_RequestTerminationCode toe)
{
    (void)toe;
    cs_server *s = cls;
    /* the connection waits for its next request now (keep-alive) */
    conntrack_phase(s, conn, CONN_HEADERS);
    req_state *rs = *con_cls;
    if (!rs)
        return;
    double secs = cs_now() - rs->start;
    int status = rs->responded ? rs->status : 0;
    metrics_observe_request(&s->metrics, rs->route, status, secs);
    cs_log_level level = access_log_level(s, status, secs);
    if (s->cfg.access_log && level >= s->log.level) {
        char st[16], ms[32];
        snprintf(st, sizeof st, "%d", status);
        snprintf(ms, sizeof ms, "%.3f", secs * 1e3);
        log_event(&s->log, level, "http", "method", rs->method, "path", rs->path, "route",
                  route_name(rs->route), "status", st, "ms", ms, NULL);
    }
    if (rs->stash)
        MHD_destroy_response(rs->stash);
    free(rs->body);
    free(rs);
    *con_cls = NULL;
}

/* MHD_OPTION_NOTIFY_CONNECTION: MHD reports a connection started before it
 * reads from it and closed before it closes its socket. */
static void connection_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                              enum MHD_ConnectionNotificationCode code)
{
    cs_server *s = cls;
    if (s->cfg.chunk_guard) {
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci && code == MHD_CONNECTION_NOTIFY_STARTED)
            framing_attach(ci->connect_fd, FRAMING_DROP_LIMIT, drain_cap(s));
        else if (ci)
            framing_detach(ci->connect_fd);
    }
    conntrack_notify(cls, conn, socket_context, code);
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

static void make_instance_id(char *out, size_t n)
{
    char host[64] = "host";
    gethostname(host, sizeof host - 1);
    host[sizeof host - 1] = '\0';
    char rnd[40];
    store_new_id(rnd);
    rnd[8] = '\0';
    snprintf(out, n, "%.30s-%d-%.8s", host, (int)getpid(), rnd);
}

static void backfill_task(void *arg) { lists_backfill(arg); }

static void store_observed(void *ctx, int op, double seconds, bool ok)
{
    cs_server *s = ctx;
    metrics_observe_store(&s->metrics, (cs_store_op_kind)op, seconds, ok);
}

/* ---- accepting connections ------------------------------------------------------------ */

/* Why not let libmicrohttpd accept: with a thread pool every worker polls the
 * one listen socket and the first one awake accepts up to ten connections in
 * a row, so on a busy 2-core machine a burst of 64 keep-alive connections
 * often landed all on one worker, which then ran every request on one core
 * while the other worker idled (the two bands of req/s in docs/BENCHMARKS.md,
 * "Cached GETs against nginx").  This thread accepts and hands each
 * connection to MHD_add_connection, which places it on the worker given by
 * the socket number modulo the pool size (and on another when that one is
 * full): consecutive connections alternate between workers.
 *
 * --max-connections keeps its meaning: at the limit the acceptor stops
 * accepting (the kernel's backlog holds the rest, as MHD's own accept did)
 * rather than accepting and closing.  The acceptor, not MHD, enforces it:
 * MHD splits its limit evenly over its workers and, for connections added
 * from outside, checks it only on the worker later, refusing (closing) what
 * a busy moment put over; so MHD's limit is this one times the workers,
 * never reached. */
static void *acceptor_main(void *arg)
{
    cs_server *s = arg;
    for (;;) {
        /* at the limit only the stop signal is watched, and the count looked
         * at again every 5 ms */
        bool full = atomic_load(&s->open_connections) >= s->cfg.max_connections;
        struct pollfd p[2] = {{.fd = s->acceptor_stop_fd, .events = POLLIN},
                              {.fd = s->listen_fd, .events = POLLIN}};
        if (poll(p, full ? 1 : 2, full ? 5 : -1) < 0 && errno != EINTR) {
            usleep(10000);
            continue;
        }
        if (p[0].revents)
            break;
        if (full || !(p[1].revents & POLLIN))
            continue;
        /* a bounded series, then look at the stop signal again */
        for (int k = 0; k < 64 && atomic_load(&s->open_connections) < s->cfg.max_connections;
             k++) {
            struct sockaddr_storage sa;
            socklen_t salen = sizeof sa;
            int fd = accept4(s->listen_fd, (struct sockaddr *)&sa, &salen,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
                    log_event(&s->log, LOG_WARN, "accept_failed", "error", strerror(errno),
                              NULL);
                    usleep(10000); /* out of descriptors: let connections close */
                }
                break;
            }
            /* MHD owns (and on failure closes) the socket from here.  Counted
             * when taken, uncounted when MHD reports it closed: MHD refuses
             * synchronously (per-IP limit) or not at all, as its own limit
             * is set above ours (server_start) */
            if (MHD_add_connection(s->mhd, fd, (struct sockaddr *)&sa, salen) == MHD_YES)
                atomic_fetch_add(&s->open_connections, 1);
        }
    }
    return NULL;
}

/* Binds and listens on cfg's address (SO_REUSEADDR, close-on-exec,
 * non-blocking for MHD's epoll threads).  Done before anything touches the
 * store, so a daemon that cannot listen changes nothing. */
static int listen_socket(const cs_server_config *cfg, int *fd_out, bool *v6, cs_error *err)
{
    struct addrinfo hints = {.ai_flags = AI_NUMERICHOST | AI_PASSIVE,
                             .ai_socktype = SOCK_STREAM}, *ai = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", cfg->port);
    if (getaddrinfo(cfg->listen, port, &hints, &ai) != 0 || !ai)
        return cs_error_set(err, CS_EINVAL, "listen",
                            "--listen %s is not a numeric IPv4 or IPv6 address", cfg->listen);
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int one = 1;
    if (fd >= 0)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (fd >= 0 && ai->ai_family == AF_INET6)
        setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof one);
    int e = 0;
    if (fd < 0 || bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, 1024) != 0)
        e = errno;
    *v6 = ai->ai_family == AF_INET6;
    freeaddrinfo(ai);
    if (e) {
        if (fd >= 0)
            close(fd);
        return cs_error_set(err, CS_EIO, "port", "cannot listen on %s port %d: %s", cfg->listen,
                            cfg->port, strerror(e));
    }
    *fd_out = fd;
    return CS_OK;
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
    s->listen_fd = -1;
    s->acceptor_stop_fd = -1;
    pthread_mutex_init(&s->flights_lock, NULL);
    metrics_init(&s->metrics);
    make_instance_id(s->instance, sizeof s->instance);
    guard_init(s);
    static_dir_resolve(cfg->static_dir, s->static_dir, sizeof s->static_dir);

    /* Order matters: listen, then the store and its lock, then the workers,
     * then the HTTP threads.  A second `make run` on a busy port stops at
     * the first step; one on another port stops at the lock; neither reaps
     * or claims a job. */
    bool v6 = false;
    int rc = listen_socket(cfg, &s->listen_fd, &v6, err);
    if (rc) {
        server_free(s);
        return rc;
    }
    rc = store_open(cfg->store, cfg->data_dir, cfg->pg_pool, &s->store, err);
    if (!rc)
        store_set_observer(s->store, store_observed, s);
    bool exclusive = false;
    if (!rc)
        rc = store_lock_exclusive(s->store, s->instance, &exclusive, err);
    if (rc) {
        server_free(s);
        return rc;
    }
    s->cache = cache_new((size_t)cfg->cache_mb << 20);
    if (!s->cache) {
        server_free(s);
        return cs_error_set(err, CS_ENOMEM, "", "out of memory");
    }
    int parse_threads = cfg->parse_threads > 0 ? cfg->parse_threads : cs_cpu_count();
    if (parse_threads < 2)
        parse_threads = 2;
    /* every queued task holds a suspended connection: the connection limit
     * bounds the queue already */
    s->parse_pool = workpool_start(parse_threads, cfg->max_connections);
    if (!s->parse_pool) {
        server_free(s);
        return cs_error_set(err, CS_EINTERNAL, "", "cannot start the parse threads");
    }
    cs_jobs_env env = {.store = s->store, .cache = s->cache, .metrics = &s->metrics,
                       .log = &s->log, .config = &s->cfg, .owner = s->instance,
                       .exclusive = exclusive};
    if ((rc = jobs_start(&env, &s->jobs, err))) {
        server_free(s);
        return rc;
    }

    /* One HTTP thread per CPU measured best on the 2-core box (docs/BENCHMARKS.md):
     * handlers never wait for syntheses, so more threads only add switches. */
    int http_threads = cfg->http_threads > 0 ? cfg->http_threads : cs_cpu_count();
    if (http_threads < 2)
        http_threads = 2;
    /* no listen socket: the acceptor thread adds connections (acceptor_main) */
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_EPOLL | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_TURBO | MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | MHD_USE_ITC;
    if (v6)
        flags |= MHD_USE_IPv6;
    s->conntrack = conntrack_start(s);
    if (!s->conntrack) {
        server_stop(s);
        server_free(s);
        return cs_error_set(err, CS_EINTERNAL, "", "cannot start the connection sweeper");
    }
    s->mhd = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, access_handler, s, MHD_OPTION_EXTERNAL_LOGGER,
        mhd_logger, s, MHD_OPTION_THREAD_POOL_SIZE, (unsigned)http_threads,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections * (unsigned)http_threads,
        MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)cfg->max_connections_per_ip,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)60, MHD_OPTION_NOTIFY_COMPLETED, completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, connection_notify, s, MHD_OPTION_URI_LOG_CALLBACK,
        uri_received, s, MHD_OPTION_END);
    if (!s->mhd) {
        server_stop(s);
        server_free(s);
        return cs_error_set(err, CS_EIO, "port", "cannot start the HTTP server on %s port %d",
                            cfg->listen, cfg->port);
    }
    s->acceptor_stop_fd = eventfd(0, EFD_CLOEXEC);
    if (s->acceptor_stop_fd < 0 ||
        pthread_create(&s->acceptor, NULL, acceptor_main, s) != 0) {
        server_stop(s);
        server_free(s);
        return cs_error_set(err, CS_EINTERNAL, "", "cannot start the accepting thread");
    }
    s->acceptor_running = true;
    /* results stored without a summary (a crash in between, an older store)
     * join the results list in the background */
    workpool_submit(s->parse_pool, backfill_task, s);
    if (cfg->chunk_guard && !framing_active())
        log_event(&s->log, LOG_WARN, "chunk_guard_inactive", "message",
                  "libmicrohttpd's reads do not pass through the daemon's recv() (was "
                  "collsynthd linked without exporting it?): a chunk-size line longer than "
                  "libmicrohttpd's buffer gets its 500 instead of a 400",
                  NULL);
    if (!s->loopback_bind && !cfg->auth_token[0])
        log_event(&s->log, LOG_WARN, "no_auth_token", "addr", cfg->listen, "message",
                  "listening beyond loopback without --auth-token: anyone who can reach this "
                  "address can submit and cancel jobs (set COLLSYNTH_AUTH_TOKEN)",
                  NULL);
    struct sockaddr_storage sa;
    socklen_t salen = sizeof sa;
    if (getsockname(s->listen_fd, (struct sockaddr *)&sa, &salen) == 0)
        s->port = ntohs(sa.ss_family == AF_INET6 ? ((struct sockaddr_in6 *)&sa)->sin6_port
                                                 : ((struct sockaddr_in *)&sa)->sin_port);
    else
        s->port = cfg->port;
    *out = s;
    return CS_OK;
}

int server_port(const cs_server *s) { return s->port; }
const char *server_instance(const cs_server *s) { return s->instance; }

void server_stop(cs_server *s)
{
    if (!s || atomic_exchange(&s->stopping, true))
        return;
    /* a daemon that never served (start-up failed part way) has nothing to
     * announce: its caller logs why it did not start */
    bool served = s->acceptor_running;
    /* stop accepting first (MHD has no listen socket of its own: nothing to
     * quiesce); the socket stays open, so new connections wait in the
     * backlog rather than being refused, until it closes at the end */
    if (s->acceptor_running) {
        uint64_t one = 1;
        ssize_t w = write(s->acceptor_stop_fd, &one, sizeof one);
        (void)w;
        pthread_join(s->acceptor, NULL);
        s->acceptor_running = false;
    }
    if (served) {
        char grace[32];
        snprintf(grace, sizeof grace, "%g", s->cfg.shutdown_grace_s);
        log_event(&s->log, LOG_INFO, "shutdown", "grace_s", grace, NULL);
    }
    /* requests being parsed finish (and may park on a job) before the jobs
     * stop, which answers every parked request */
    workpool_stop(s->parse_pool);
    if (s->jobs)
        jobs_stop(s->jobs, s->cfg.shutdown_grace_s);
    if (s->mhd) {
        MHD_stop_daemon(s->mhd);
        s->mhd = NULL;
    }
    conntrack_stop(s->conntrack);
    jobs_free(s->jobs);
    s->jobs = NULL;
    store_close(s->store);
    s->store = NULL;
    if (s->listen_fd >= 0) {
        close(s->listen_fd);
        s->listen_fd = -1;
    }
    if (s->acceptor_stop_fd >= 0) {
        close(s->acceptor_stop_fd);
        s->acceptor_stop_fd = -1;
    }
}

void server_free(cs_server *s)
{
    if (!s)
        return;
    server_stop(s);
    cache_free(s->cache);
    workpool_free(s->parse_pool);
    conntrack_free(s->conntrack);
    metrics_destroy(&s->metrics);
    guard_free(s);
    pthread_mutex_destroy(&s->flights_lock);
    free(s);
}
