/*
 * main.c - collsynthd: configuration from the environment and flags, the
 * server, and signal handling.  Signals are taken synchronously by sigwait()
 * in the main thread (blocked everywhere else), so shutdown runs as ordinary
 * code, not in a signal handler.
 *
 * The startup line on stdout is for people and scripts alike:
 *     collsynthd listening on http://127.0.0.1:8470 (store sqlite, instance host-123-ab12cd34)
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "server.h"
#include "store.h"

int main(int argc, char **argv)
{
    cs_server_config cfg;
    config_defaults(&cfg);
    cs_error err;
    cs_error_clear(&err);
    bool help = false;
    if (config_from_env(&cfg, NULL, &err) != CS_OK ||
        config_from_args(&cfg, argc, argv, &help, &err) != CS_OK) {
        fprintf(stderr, "collsynthd: %s\n", err.message);
        return 2;
    }
    if (help) {
        config_usage(stdout, argv[0]);
        return 0;
    }
    /* Block the signals before any thread starts, so every thread inherits
     * the mask and only sigwait() below sees them. */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    cs_logger log;
    log_init(&log, cfg.log_level, cfg.log_format);
    if (cfg.log_file[0] && log_open_file(&log, cfg.log_file, &err) != CS_OK) {
        fprintf(stderr, "collsynthd: %s\n", err.message);
        return 2;
    }
    cs_server *srv = NULL;
    if (server_start(&cfg, &log, &srv, &err) != CS_OK) {
        log_event(&log, LOG_ERROR, "start_failed", "error", err.message, "field", err.field, NULL);
        fprintf(stderr, "collsynthd: %s\n", err.message);
        return 1;
    }
    char port[16], workers[16];
    snprintf(port, sizeof port, "%d", server_port(srv));
    snprintf(workers, sizeof workers, "%d", cfg.workers);
    bool v6 = strchr(cfg.listen, ':') != NULL;
    /* The log line first, then the URL file, then the line on stdout: whoever
     * reacts to an announcement (the tests, a script that then reads the log)
     * finds the log saying where the daemon listens, and never races it. */
    log_event(&log, LOG_INFO, "listening", "addr", cfg.listen, "port", port, "workers", workers,
              "instance", server_instance(srv), NULL);
    if (cfg.url_file[0]) {
        /* Written before the announcement, and renamed into place, so that
         * whoever waits for either never reads a missing or partial file. A
         * wildcard bind is reached locally over loopback. */
        const char *host = !strcmp(cfg.listen, "0.0.0.0") ? "127.0.0.1"
                           : !strcmp(cfg.listen, "::") ? "::1"
                                                       : cfg.listen;
        bool h6 = strchr(host, ':') != NULL;
        char tmp[sizeof cfg.url_file + 8];
        snprintf(tmp, sizeof tmp, "%s.tmp", cfg.url_file);
        FILE *f = fopen(tmp, "w");
        bool ok = f != NULL;
        if (f) {
            ok = fprintf(f, "http://%s%s%s:%d\n", h6 ? "[" : "", host, h6 ? "]" : "",
                         server_port(srv)) > 0;
            ok = fclose(f) == 0 && ok;
            ok = ok && rename(tmp, cfg.url_file) == 0;
            if (!ok)
                unlink(tmp);
        }
        if (!ok)
            log_event(&log, LOG_WARN, "url_file_failed", "path", cfg.url_file, NULL);
    }
    printf("collsynthd listening on http://%s%s%s:%d (store %s, instance %s)\n", v6 ? "[" : "",
           cfg.listen, v6 ? "]" : "", server_port(srv),
           cfg.store[0] && strncmp(cfg.store, "postgres", 8) == 0 ? "postgresql" : "sqlite",
           server_instance(srv));
    fflush(stdout);

    int sig = 0;
    for (;;) {
        if (sigwait(&set, &sig) != 0)
            continue;
        if (sig == SIGHUP) {
            /* logrotate moved the log file: write to a new one */
            if (log_reopen(&log, &err) != CS_OK)
                fprintf(stderr, "collsynthd: %s\n", err.message);
            else
                log_event(&log, LOG_INFO, "log_reopened", "path", log.path, NULL);
            continue;
        }
        break;
    }
    log_event(&log, LOG_INFO, "signal", "signal", sig == SIGTERM ? "SIGTERM" : "SIGINT", NULL);
    server_stop(srv);
    server_free(srv);
    if (cfg.url_file[0])
        unlink(cfg.url_file);
    log_event(&log, LOG_INFO, "stopped", NULL);
    return 0;
}
