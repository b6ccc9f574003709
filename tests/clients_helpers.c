/*
 * clients_helpers.c - daemon and shell helpers for the client tests (see
 * clients_helpers.h).  The daemon is started with fork/exec (not a shell) so
 * its pid is the daemon's own and the stop is exact.
 */
#include "clients_helpers.h"

#include <limits.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cs_common.h"

const char *cs_test_build_dir(void)
{
    const char *b = getenv("BUILD");
    return b != NULL && b[0] != '\0' ? b : "build";
}

int cs_test_daemon_start(cs_test_daemon *d, const char *auth_token, char **why)
{
    memset(d, 0, sizeof *d);
    if (why != NULL)
        *why = NULL;
    /* A later --static-dir overrides the harness's stand-in page. */
    char dashboard[PATH_MAX];
    if (realpath("clients/dashboard", dashboard) == NULL)
        return -1;
    const char *extra[5];
    int n = 0;
    extra[n++] = "--static-dir";
    extra[n++] = dashboard;
    if (auth_token != NULL) {
        extra[n++] = "--auth-token";
        extra[n++] = auth_token;
    }
    extra[n] = NULL;
    if (daemon_start(&d->daemon, NULL, NULL, extra) != 0) {
        if (why != NULL)
            cs_read_file(d->daemon.log_path, why, NULL, NULL);
        if (d->daemon.own_dir)
            remove_tree(d->daemon.dir);
        return -1;
    }
    snprintf(d->url, sizeof d->url, "%s", d->daemon.base_url);
    return 0;
}

void cs_test_daemon_stop(cs_test_daemon *d)
{
    daemon_stop(&d->daemon);
}

int cs_test_sh(const char *cmd, char **out, char **err)
{
    char outp[] = "/tmp/collsynth-test-sh-out.XXXXXX";
    char errp[] = "/tmp/collsynth-test-sh-err.XXXXXX";
    int fo = mkstemp(outp), fe = mkstemp(errp);
    if (fo < 0 || fe < 0)
        return -1;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fo, STDOUT_FILENO);
        dup2(fe, STDERR_FILENO);
        int devnull = open("/dev/null", O_RDONLY);
        if (devnull >= 0)
            dup2(devnull, STDIN_FILENO);
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    if (pid > 0)
        waitpid(pid, &status, 0);
    close(fo);
    close(fe);
    if (out != NULL && cs_read_file(outp, out, NULL, NULL) != CS_OK)
        *out = strdup("");
    if (err != NULL && cs_read_file(errp, err, NULL, NULL) != CS_OK)
        *err = strdup("");
    unlink(outp);
    unlink(errp);
    if (pid < 0)
        return -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}
