/*
 * clients_helpers.c - daemon and shell helpers for the client tests (see
 * clients_helpers.h).  The daemon is started with fork/exec (not a shell) so
 * its pid is the daemon's own and the stop is exact.
 */
#include "clients_helpers.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cs_common.h"

const char *cs_test_build_dir(void)
{
    const char *b = getenv("BUILD");
    return b != NULL && b[0] != '\0' ? b : "build";
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int cs_test_daemon_start(cs_test_daemon *d, const char *extra_args, const char *auth_token,
                         char **why)
{
    memset(d, 0, sizeof *d);
    if (why != NULL)
        *why = NULL;
    snprintf(d->dir, sizeof d->dir, "/tmp/collsynth-test-daemon.XXXXXX");
    if (mkdtemp(d->dir) == NULL)
        return -1;
    snprintf(d->log, sizeof d->log, "%s/daemon.log", d->dir);
    char bin[512], data[300];
    snprintf(bin, sizeof bin, "%s/collsynthd", cs_test_build_dir());
    snprintf(data, sizeof data, "%s/data", d->dir);
    char *argv[32];
    int argc = 0;
    argv[argc++] = bin;
    argv[argc++] = "--port";
    argv[argc++] = "0";
    argv[argc++] = "--data-dir";
    argv[argc++] = data;
    char *extra = extra_args != NULL ? strdup(extra_args) : NULL;
    char *save = NULL;
    for (char *t = extra ? strtok_r(extra, " ", &save) : NULL; t != NULL && argc < 30;
         t = strtok_r(NULL, " ", &save))
        argv[argc++] = t;
    argv[argc] = NULL;
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(d->log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd >= 0) {
            dup2(fd, STDOUT_FILENO);
            dup2(fd, STDERR_FILENO);
            close(fd);
        }
        unsetenv("COLLSYNTH_PORT");
        unsetenv("COLLSYNTH_DATA_DIR");
        if (auth_token != NULL)
            setenv("COLLSYNTH_AUTH_TOKEN", auth_token, 1);
        else
            unsetenv("COLLSYNTH_AUTH_TOKEN");
        execv(bin, argv);
        fprintf(stderr, "exec %s: %s\n", bin, strerror(errno));
        _exit(127);
    }
    free(extra);
    if (pid < 0)
        return -1;
    d->pid = pid;
    for (int i = 0; i < 200; i++) {
        char *text = NULL;
        if (cs_read_file(d->log, &text, NULL, NULL) == CS_OK) {
            char *p = strstr(text, "http://");
            if (p != NULL) {
                /* keep "http://" + host:port */
                size_t m = 7 + strcspn(p + 7, " \n\"'/,;");
                if (m < sizeof d->url && strchr(p + 7, ':') != NULL) {
                    memcpy(d->url, p, m);
                    d->url[m] = '\0';
                    free(text);
                    return 0;
                }
            }
            free(text);
        }
        int status;
        if (waitpid(pid, &status, WNOHANG) == pid) {
            d->pid = 0;
            break;
        }
        sleep_ms(100);
    }
    if (why != NULL)
        cs_read_file(d->log, why, NULL, NULL);
    cs_test_daemon_stop(d);
    return -1;
}

void cs_test_daemon_stop(cs_test_daemon *d)
{
    if (d->pid > 0) {
        kill(d->pid, SIGTERM);
        int status;
        bool gone = false;
        for (int i = 0; i < 150 && !gone; i++) {
            if (waitpid(d->pid, &status, WNOHANG) == d->pid)
                gone = true;
            else
                sleep_ms(100);
        }
        if (!gone) {
            kill(d->pid, SIGKILL);
            waitpid(d->pid, &status, 0);
        }
        d->pid = 0;
    }
    if (d->dir[0] != '\0') {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", d->dir);
        if (system(cmd) != 0)
            fprintf(stderr, "could not remove %s\n", d->dir);
        d->dir[0] = '\0';
    }
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
