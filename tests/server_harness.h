/*
 * server_harness.h - helpers for the daemon's integration tests: run the real
 * build/collsynthd on 127.0.0.1 with an ephemeral port and a temp data dir,
 * talk HTTP to it with libcurl, and run a throwaway PostgreSQL server.
 *
 *     cs_daemon d;
 *     ck_assert_int_eq(daemon_start(&d, NULL, NULL, NULL), 0);   // SQLite, temp dir
 *     http_resp r;
 *     http_request(&d, "GET", "/v1/health", NULL, NULL, &r);
 *     ...
 *     daemon_stop(&d);        // SIGTERM, wait, remove the temp dir
 *
 * PostgreSQL refuses to run as root, so pg_start() runs initdb and pg_ctl
 * (from /usr/lib/postgresql/<version>/bin) as the `postgres` user with
 * runuser when we are root; the cluster lives in a temp dir owned by that
 * user, listens on 127.0.0.1 and a free port, and keeps its socket there.
 */
#ifndef CS_SERVER_HARNESS_H
#define CS_SERVER_HARNESS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

typedef struct cs_daemon {
    pid_t pid;
    int port;
    char dir[256];          /* data dir (temp unless given) */
    bool own_dir;           /* remove dir at stop */
    char log_path[300];     /* the daemon's stderr */
    char base_url[64];
} cs_daemon;

/* Starts build/collsynthd --port 0 --listen 127.0.0.1.  store: NULL for SQLite
 * in the data dir, or a URL.  data_dir: NULL for a fresh temp dir (removed at
 * stop), or an existing dir (kept; for restarts).  extra: NULL-terminated
 * extra arguments.  The dashboard dir is DIR/static with an index.html
 * saying "collsynth test dashboard".  Returns 0 when the daemon answers
 * /v1/health. */
int daemon_start(cs_daemon *d, const char *store, const char *data_dir,
                 const char *const *extra);
/* The daemon the tests run: <dir of the test binary>/../collsynthd, else
 * $BUILD/collsynthd, else build/collsynthd. */
void daemon_binary(char *out, size_t n);
/* SIGTERM and wait (up to timeout_s, then SIGKILL); returns the exit status
 * (or -1 when it had to be killed).  Keeps the dir when keep_dir. */
int daemon_stop_ex(cs_daemon *d, double timeout_s, bool keep_dir);
int daemon_stop(cs_daemon *d);
/* SIGKILL, no cleanup of the data dir. */
void daemon_kill9(cs_daemon *d);
/* Is the process still running? */
bool daemon_alive(const cs_daemon *d);

typedef struct http_resp {
    long status;
    char *body;             /* NUL-terminated */
    size_t len;
    char headers[4096];     /* raw response headers */
} http_resp;

/* headers: NULL-terminated "Name: value" strings, may be NULL.  Returns 0 on a
 * completed exchange (any status), -1 on a transport error. */
int http_request(const cs_daemon *d, const char *method, const char *path, const char *body,
                 const char *const *headers, http_resp *out);
int http_request_url(const char *url, const char *method, const char *body,
                     const char *const *headers, http_resp *out);
void http_resp_free(http_resp *r);
/* Value of a response header (case-insensitive), copied into buf; NULL if absent. */
const char *http_header(const http_resp *r, const char *name, char *buf, size_t n);

/* A counter from GET /metrics ("collsynth_syntheses_total{outcome=\"started\"}");
 * -1 when absent. */
double metrics_value(const cs_daemon *d, const char *series);
/* The sum of several series read from ONE scrape, so that a job moving between
 * states while they are read is not counted twice; -1 if one is missing. */
double metrics_sum(const cs_daemon *d, const char *const *series, size_t n);
/* One series' value in an exposition already fetched; -1 if absent. */
double metrics_value_in(const char *exposition, const char *series);

typedef struct cs_pg {
    char dir[256];
    char bindir[256];
    int port;
    char url[256];           /* postgresql://postgres@127.0.0.1:PORT/postgres */
    bool running;
} cs_pg;

/* 0 when a server is running; -1 (with a reason on stderr) when PostgreSQL is
 * not installed or cannot start (tests then fail loudly, not skip). */
int pg_start(cs_pg *pg);
void pg_stop(cs_pg *pg);
/* Creates database name; fills url. */
int pg_create_db(const cs_pg *pg, const char *name, char *url, size_t n);

/* A free TCP port on 127.0.0.1 (bound and released). */
int free_port(void);
/* mkdtemp under /tmp with the prefix; 0 on success. */
int make_temp_dir(const char *prefix, char *out, size_t n);
void remove_tree(const char *dir);

#endif
