/*
 * clients_helpers.h - what the client tests (remote CLI, Slurm hook,
 * dashboard) share: the real collsynthd serving the real dashboard (started
 * through server_harness.h), and a shell command with its stdout, stderr and
 * exit code captured.
 */
#ifndef CS_TEST_CLIENTS_HELPERS_H
#define CS_TEST_CLIENTS_HELPERS_H

#include "server_harness.h"

/* The daemon of tests/server_harness.h, serving the real dashboard
 * (clients/dashboard) instead of the harness's stand-in page. */
typedef struct cs_test_daemon {
    cs_daemon daemon;
    char url[128];      /* "http://127.0.0.1:PORT" */
} cs_test_daemon;

/* The build directory: $BUILD or "build". */
const char *cs_test_build_dir(void);

/* daemon_start() with SQLite in a fresh temp dir, the real dashboard, and
 * --auth-token auth_token when non-NULL.  Returns 0, or -1 with the daemon's
 * log in *why (caller frees). */
int cs_test_daemon_start(cs_test_daemon *d, const char *auth_token, char **why);
/* SIGTERM, wait, remove the data directory. */
void cs_test_daemon_stop(cs_test_daemon *d);

/* Runs `/bin/sh -c cmd`; *out and *err (if non-NULL) get its output (caller
 * frees).  Returns the exit code (128+signal when killed). */
int cs_test_sh(const char *cmd, char **out, char **err);

#endif
