/*
 * clients_helpers.h - what the client tests (remote CLI, Slurm hook,
 * dashboard) share: start the real collsynthd on an ephemeral port in a
 * temporary data directory, stop it, and run a shell command capturing its
 * stdout, stderr and exit code.
 */
#ifndef CS_TEST_CLIENTS_HELPERS_H
#define CS_TEST_CLIENTS_HELPERS_H

#include <sys/types.h>

typedef struct cs_test_daemon {
    pid_t pid;
    char url[128];      /* "http://127.0.0.1:PORT" */
    char dir[256];      /* temporary data directory (removed by stop) */
    char log[300];      /* the daemon's stdout+stderr */
} cs_test_daemon;

/* The build directory: $BUILD or "build". */
const char *cs_test_build_dir(void);

/* Starts BUILD/collsynthd --port 0 --data-dir TMP extra_args (may be NULL),
 * with COLLSYNTH_AUTH_TOKEN=auth_token when non-NULL; waits (up to 20 s) for
 * the address it prints.  Returns 0, or -1 with the log in *why (caller frees). */
int cs_test_daemon_start(cs_test_daemon *d, const char *extra_args, const char *auth_token,
                         char **why);
/* SIGTERM, wait (SIGKILL after 15 s), remove the data directory. */
void cs_test_daemon_stop(cs_test_daemon *d);

/* Runs `/bin/sh -c cmd`; *out and *err (if non-NULL) get its output (caller
 * frees).  Returns the exit code (128+signal when killed). */
int cs_test_sh(const char *cmd, char **out, char **err);

#endif
