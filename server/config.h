/*
 * config.h - collsynthd's configuration: defaults, then COLLSYNTH_* environment
 * variables, then command-line flags (flags win).  One table drives parsing,
 * validation and --help, so every option is documented where it is defined.
 */
#ifndef CS_SERVER_CONFIG_H
#define CS_SERVER_CONFIG_H

#include <stdbool.h>
#include <stdio.h>
#include "cs_common.h"
#include "synthesize.h"

typedef struct cs_server_config {
    char listen[64];          /* address to bind (default 127.0.0.1) */
    int port;                 /* 0 = ephemeral */
    char data_dir[1024];
    char store[1024];         /* store URL; "" = sqlite under data_dir */
    char static_dir[1024];    /* "" = clients/dashboard of the binary's repo */
    char auth_token[256];     /* "" = no auth */
    char cors_origins[1024];  /* comma-separated; "*" = any; "" = none */
    char allowed_hosts[1024]; /* extra Host names answered (comma-separated) */
    char log_format[8];       /* "kv" or "json" */
    char log_level[8];        /* debug, info, warn, error */
    bool access_log;
    bool iso_cache;           /* relabel isomorphic requests' results (docs/iso.md) */
    bool chunk_guard;         /* filter chunked bodies in front of MHD (server/framing.c) */
    double access_log_sample; /* fraction of requests logged at info */
    char log_file[1024];      /* "" = stderr; reopened on SIGHUP */
    char url_file[1024];      /* "" = none; else the URL a local client reaches the daemon
                                 at, written once it listens (health checks) */
    int workers;              /* synthesis worker threads */
    int http_threads;         /* libmicrohttpd thread pool; 0 = CPUs (>= 2) */
    int parse_threads;        /* request parsing and validation; 0 = CPUs (>= 2) */
    int max_connections;
    int max_connections_per_ip;
    double header_timeout_s;  /* a request's headers must arrive within this */
    double body_timeout_s;    /* ... and its body within this after them */
    long max_queued;          /* queued jobs before 429 */
    double job_time_limit_s;  /* per-job wall-clock cap */
    long max_body_bytes;
    long cache_mb;            /* in-memory result cache */
    double lease_s;           /* a running job without heartbeat this long is re-queued */
    int max_attempts;         /* runs of one job before it fails as interrupted */
    double shutdown_grace_s;  /* SIGTERM: how long running jobs may finish */
    int pg_pool;              /* PostgreSQL connections */
    double poll_s;            /* how often idle workers look for fleet work */
    long max_result_mb;       /* memory for one result (limits.max_result_bytes) */
    cs_synth_limits limits;   /* request limits and the auto policy */
} cs_server_config;

void config_defaults(cs_server_config *c);
/* Applies COLLSYNTH_* variables from envp (NULL: the process environment). */
int config_from_env(cs_server_config *c, char **envp, cs_error *err);
/* Applies flags; *help is set by --help (the caller prints config_usage). */
int config_from_args(cs_server_config *c, int argc, char **argv, bool *help, cs_error *err);
/* The --help text. */
void config_usage(FILE *out, const char *prog);

#endif
