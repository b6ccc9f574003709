/*
 * server_internal.h - the daemon's shared state and the helpers its route
 * files use (private to the server/ sources).
 */
#ifndef CS_SERVER_INTERNAL_H
#define CS_SERVER_INTERNAL_H

#include <microhttpd.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "cache.h"
#include "jobs.h"
#include "metrics.h"
#include "server.h"
#include "store.h"
#include "workpool.h"

#define MAX_CORS_ORIGINS 32

typedef struct cs_conntrack cs_conntrack;
typedef struct cs_framing cs_framing;
typedef struct cs_flight cs_flight;
typedef enum cs_conn_phase { CONN_HEADERS = 0, CONN_BODY, CONN_BUSY } cs_conn_phase;
#define MAX_ALLOWED_HOSTS 32

struct cs_server {
    cs_server_config cfg;
    cs_logger log;
    char instance[64];
    double started;
    cs_store *store;
    cs_cache *cache;
    cs_metrics metrics;
    cs_jobs *jobs;
    cs_workpool *parse_pool;   /* costly handlers run here, not on HTTP threads */
    cs_conntrack *conntrack;   /* header and body deadlines */
    struct MHD_Daemon *mhd;
    int listen_fd;             /* ours: the acceptor thread accepts on it */
    /* The acceptor hands each connection to MHD (MHD_add_connection), which
     * spreads them over its worker threads; see acceptor_main in server.c. */
    pthread_t acceptor;
    bool acceptor_running;
    int acceptor_stop_fd;      /* an eventfd: written to stop the acceptor */
    atomic_int open_connections;
    /* documents being generated, each by one request (delivery.c, flights) */
    pthread_mutex_t flights_lock;
    struct cs_flight *flights;
    int port;
    char static_dir[4096];     /* realpath, "" when none */
    int ncors;
    char *cors[MAX_CORS_ORIGINS];
    bool cors_any;
    int nhosts;                /* --allowed-hosts */
    char *hosts[MAX_ALLOWED_HOSTS];
    bool loopback_bind;
    atomic_bool stopping;
};

/* Per-request state, MHD's con_cls. */
typedef struct req_state {
    cs_server *srv;
    struct MHD_Connection *conn;
    double start;
    cs_route route;
    int status;
    bool begun;                /* the access handler has seen the headers */
    bool nul_in_target;        /* "%00" in the raw request target */
    const char *method;
    const char *url;           /* MHD's, valid for the whole request */
    char path[256];
    char *body;
    size_t len, cap;
    size_t drained;            /* body bytes dropped after a refusal */
    bool responded;
    /* refused when the headers came in (guard.c); answered once the body
     * has been drained */
    int refusal_status;
    char refusal_code[32], refusal_field[32], refusal_message[256];
    /* offloaded handling: the response made on the pool, queued on resume */
    struct MHD_Response *stash;
    int stash_status;
    /* POST /v1/synthesize waiting for its job */
    int phase;                 /* 0 fresh, 1 parked, 2 woken */
    char job_id[40];
    char handle[40];           /* this caller's handle on job_id */
    char key[65];
    /* the connection's framing state (framing.c) and this request's number
     * on it, to find a refusal the framing parser made for this body */
    cs_framing *framing;
    unsigned long long framing_seq;
    bool close_after;          /* answer with Connection: close */
} req_state;

/* ---- responses (server.c) ---- */
enum MHD_Result respond_blob(req_state *rs, int status, cs_blob *b, const char *ctype,
                             const char *extra_header, const char *extra_value);
enum MHD_Result respond_text(req_state *rs, int status, const char *text, size_t len,
                             const char *ctype);
/* Steals doc. */
enum MHD_Result respond_json(req_state *rs, int status, json_t *doc);
enum MHD_Result respond_error(req_state *rs, int status, const char *code, const char *field,
                              const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Maps a CS_E* code to an HTTP status. */
int http_status_for(int cs_code);
enum MHD_Result respond_cs_error(req_state *rs, const cs_error *err);
/* Adds CORS and common headers and queues (or, on the parse pool, keeps the
 * response until the connection resumes). */
enum MHD_Result queue(req_state *rs, int status, struct MHD_Response *r);
/* Queues a response shared between requests (the caller keeps its hold: not
 * destroyed here) when nothing of this request's own must be added to it
 * (CORS) and this is an HTTP thread; false (nothing queued) otherwise, and
 * the caller answers with a response of its own. */
bool queue_shared(req_state *rs, int status, struct MHD_Response *r, enum MHD_Result *ret);
/* Runs work(rs) on the parse pool with the connection suspended.  work
 * answers with the respond_* helpers as usual and returns true; or it hands
 * the suspended connection to someone who resumes it later (jobs_wait) and
 * returns false.  Answers 503 at once when the pool's queue is full. */
typedef bool (*cs_offload_fn)(req_state *rs);
enum MHD_Result offload(req_state *rs, cs_offload_fn work);
/* Runs work(rs) again for a request whose connection an earlier work handed
 * over (returned false) and is still suspended: on the parse pool, or on
 * this (pool) thread when the pool takes no more. */
void offload_rerun(req_state *rs, cs_offload_fn work);

/* ---- request deadlines (conntrack.c) ---- */
cs_conntrack *conntrack_start(cs_server *s);
void conntrack_stop(cs_conntrack *ct);
void conntrack_free(cs_conntrack *ct);
/* MHD_OPTION_NOTIFY_CONNECTION; cls is the server. */
void conntrack_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                      enum MHD_ConnectionNotificationCode code);
/* The connection enters a phase; its deadline restarts (none when busy). */
void conntrack_phase(const cs_server *s, struct MHD_Connection *conn, cs_conn_phase phase);

/* ---- request framing in front of MHD's chunked-body parser (framing.c) ---- */
/* Dropped chunk extensions, leading zeros and trailer fields allowed per
 * request before it is refused (about what MHD's read buffer held). */
#define FRAMING_DROP_LIMIT 32768
/* Starts (and ends) filtering the reads of a connection's socket; called from
 * MHD's connection notifications.  false: not filtered (table full, memory). */
bool framing_attach(int fd, uint64_t drop_limit, uint64_t drain_cap);
void framing_detach(int fd);
/* The state of a filtered socket, NULL when it is not filtered. */
cs_framing *framing_of(int fd);
/* Does libmicrohttpd's recv() come here?  (The executable must export it.) */
bool framing_active(void);
/* The access handler's first call for a request: its number on the connection. */
unsigned long long framing_request_begins(cs_framing *f);
/* The refusal the parser made for request `seq`, if any (taken once). */
bool framing_take_refusal(cs_framing *f, unsigned long long seq, int *status, bool *close,
                          char *msg, size_t cap);
/* The handler refused request `seq` and reads no more of its body: the
 * parser gives MHD the body's end at the next chunk-size line and the
 * connection is read no further (MHD 0.9.75 queues an answer only before a
 * body or after it).  false where it cannot: not a chunked body it follows,
 * or the chunk in progress has more than the drain cap still to come. */
bool framing_end_body(cs_framing *f, unsigned long long seq);
/* The parser itself, for tests: filters n bytes in place (cap >= n bytes of
 * room) and returns how many bytes are output; output that did not fit
 * waits in the state (framing_take_pending). */
cs_framing *framing_new(uint64_t drop_limit, uint64_t drain_cap);
void framing_free(cs_framing *f);
size_t framing_filter(cs_framing *f, char *buf, size_t n, size_t cap);
size_t framing_take_pending(cs_framing *f, char *buf, size_t cap);

/* ---- admission (guard.c) ---- */
void guard_init(cs_server *s);
void guard_free(cs_server *s);
/* Host, Origin and Content-Type checks; records a refusal in rs. */
void guard_request(req_state *rs);
void guard_refuse(req_state *rs, int status, const char *code, const char *field,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));
/* Is origin listed in --cors-origins (or is it "*")? */
bool guard_cors_listed(const cs_server *s, const char *origin);

/* ---- lists (lists.c) ---- */
/* GET /v1/results (results) or GET /v1/jobs. */
enum MHD_Result route_lists(req_state *rs, bool results);
/* Summarizes stored results that have no summary yet (start-up task). */
void lists_backfill(cs_server *s);

/* ---- routes (routes.c) ---- */
enum MHD_Result route_request(req_state *rs, const char *url, const char *method);
/* ---- static files (static_files.c) ---- */
enum MHD_Result serve_static(req_state *rs, const char *url);
int static_dir_resolve(const char *configured, char *out, size_t n);

#endif
