/*
 * cli_output.c - output files (-o FILE) that appear only once complete.
 *
 * A result written with -o can be hundreds of MB and take seconds to write;
 * `get -o` writes as the download arrives.  Written in place, a Ctrl-C, a
 * full disk or a refused download part way left a truncated FILE that looks
 * like a document (a user found `big.json` cut at 265 MB after Ctrl-C), and
 * `get -o FILE` removed an existing FILE when the server said no.  So FILE is
 * written to a temporary ".FILE.XXXXXX" in its directory (the same file
 * system, so rename(2) is atomic) and renamed over FILE only when everything
 * was written; an existing FILE stays as it was until then.
 *
 * A fatal signal while the temporary file is open (SIGINT, SIGTERM, SIGHUP,
 * SIGXFSZ) removes it before the process dies of that signal, as it would
 * have: the exit status still says "interrupted".  The handler needs the
 * paths outside any stack frame, hence the static slots below (the CLI has a
 * temporary file or two at a time; one that finds no free slot is still
 * renamed or discarded normally, only not on a signal).
 *
 * Standard output, "-", and paths that exist but are not regular files (a
 * pipe, /dev/null, /dev/stdout) are written in place: they cannot be renamed
 * over, and their reader sees the exit code.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

/* The temporary files a fatal signal must remove (see above): a few slots,
 * since `solve --format` keeps its intermediate result file while the
 * result is written through a temporary beside it. */
#define NSLOTS 8
static char pending_path[NSLOTS][4096];
static volatile sig_atomic_t pending_set[NSLOTS];
static int pending_count;
static const int fatal_signals[] = {SIGINT, SIGTERM, SIGHUP, SIGXFSZ};
#define NFATAL ((int)(sizeof fatal_signals / sizeof fatal_signals[0]))
static struct sigaction saved_actions[NFATAL];

static void remove_pending_and_die(int sig)
{
    for (int i = 0; i < NSLOTS; i++)
        if (pending_set[i]) {
            unlink(pending_path[i]); /* async-signal-safe */
            pending_set[i] = 0;
        }
    signal(sig, SIG_DFL);
    raise(sig); /* die of the signal itself: the caller's shell sees 130 for ^C */
}

int cli_remove_on_signal(const char *path)
{
    size_t n = strlen(path);
    if (n >= sizeof pending_path[0])
        return -1;
    int slot = -1;
    for (int i = 0; i < NSLOTS && slot < 0; i++)
        if (!pending_set[i])
            slot = i;
    if (slot < 0)
        return -1;
    memcpy(pending_path[slot], path, n + 1);
    if (pending_count++ == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = remove_pending_and_die;
        sigemptyset(&sa.sa_mask);
        for (int i = 0; i < NFATAL; i++) {
            sigaction(fatal_signals[i], NULL, &saved_actions[i]);
            /* a signal the caller ignores (nohup, a background job's SIGINT)
             * stays ignored: it would not have ended the process */
            if (saved_actions[i].sa_handler != SIG_IGN)
                sigaction(fatal_signals[i], &sa, NULL);
        }
    }
    pending_set[slot] = 1;
    return slot;
}

void cli_keep_on_signal(int slot)
{
    if (slot < 0 || slot >= NSLOTS || !pending_set[slot])
        return;
    pending_set[slot] = 0;
    if (--pending_count == 0)
        for (int i = 0; i < NFATAL; i++)
            if (saved_actions[i].sa_handler != SIG_IGN)
                sigaction(fatal_signals[i], &saved_actions[i], NULL);
}

/* Lets go of the temporary file (renamed into place when `kept`, else
 * removed) and of the names. */
static void out_release(cli_out *o, bool kept)
{
    if (o->tmp) {
        if (!kept)
            unlink(o->tmp);
        cli_keep_on_signal(o->guard);
        free(o->tmp);
        o->tmp = NULL;
    }
    free(o->real);
    o->real = NULL;
}

/* The file a chain of symbolic links ends at, when that file does not exist
 * (realpath(3) fails then): each link's text read and, when relative, taken
 * from the link's directory.  NULL on a loop (40 links, as the kernel) or an
 * error: the link itself is written then. */
static char *link_target(const char *path)
{
    char *cur = strdup(path);
    for (int hops = 0; cur && hops < 40; hops++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur;
        char buf[4096];
        ssize_t n = readlink(cur, buf, sizeof buf - 1);
        if (n <= 0)
            break;
        buf[n] = '\0';
        const char *slash = strrchr(cur, '/');
        size_t dirlen = buf[0] == '/' || !slash ? 0 : (size_t)(slash - cur) + 1;
        char *next = malloc(dirlen + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dirlen);
            memcpy(next + dirlen, buf, (size_t)n + 1);
        }
        free(cur);
        cur = next;
    }
    free(cur);
    return NULL;
}

int cli_out_open(cli_out *o, const char *cmd, const char *path)
{
    memset(o, 0, sizeof *o);
    o->guard = -1;
    o->cmd = cmd;
    if (!path || strcmp(path, "-") == 0) {
        o->f = stdout;
        return CLI_EXIT_OK;
    }
    o->path = path;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) {
            fprintf(stderr, "collsynth %s: cannot write '%s': it is a directory\n", cmd, path);
            return CLI_EXIT_USAGE;
        }
        o->f = fopen(path, "w");
        if (!o->f) {
            fprintf(stderr, "collsynth %s: cannot write '%s': %s\n", cmd, path, strerror(errno));
            return CLI_EXIT_USAGE;
        }
        return CLI_EXIT_OK;
    }
    /* a FILE its owner made read-only stays protected, as fopen("w") kept
     * it (rename(2) would replace it regardless) */
    if (access(path, F_OK) == 0 && access(path, W_OK) != 0) {
        fprintf(stderr, "collsynth %s: cannot write '%s': %s\n", cmd, path, strerror(errno));
        return CLI_EXIT_USAGE;
    }
    /* a symbolic link to a file: the file it names is replaced (as
     * fopen("w") wrote through the link), not the link itself */
    struct stat lst;
    if (lstat(path, &lst) == 0 && S_ISLNK(lst.st_mode)) {
        o->real = realpath(path, NULL);
        if (!o->real) /* dangling: fopen("w") created the file it names */
            o->real = link_target(path);
        if (o->real)
            path = o->real;
    }
    const char *slash = strrchr(path, '/');
    size_t dirlen = slash ? (size_t)(slash - path) + 1 : 0;
    size_t n = strlen(path) + 16;
    o->tmp = malloc(n);
    if (!o->tmp) {
        fprintf(stderr, "collsynth %s: out of memory\n", cmd);
        return CLI_EXIT_INTERNAL;
    }
    snprintf(o->tmp, n, "%.*s.%s.XXXXXX", (int)dirlen, path, path + dirlen);
    int fd = mkstemp(o->tmp);
    if (fd < 0) {
        fprintf(stderr, "collsynth %s: cannot write '%s': %s\n", cmd, path, strerror(errno));
        free(o->tmp);
        o->tmp = NULL;
        free(o->real);
        o->real = NULL;
        return CLI_EXIT_USAGE;
    }
    o->guard = cli_remove_on_signal(o->tmp);
    /* mkstemp makes it 0600; give FILE the mode fopen(path, "w") would have:
     * an existing FILE's own (a private 0600 file stays private), else
     * 0666 less the umask */
    mode_t mask = umask(0);
    umask(mask);
    struct stat old;
    mode_t mode = stat(path, &old) == 0 ? (old.st_mode & 07777) : (0666 & ~mask);
    if (fchmod(fd, mode) != 0 || !(o->f = fdopen(fd, "w"))) {
        fprintf(stderr, "collsynth %s: cannot write '%s': %s\n", cmd, o->tmp, strerror(errno));
        close(fd);
        out_release(o, false);
        return CLI_EXIT_USAGE;
    }
    return CLI_EXIT_OK;
}

int cli_out_close(cli_out *o, bool ok)
{
    int code = CLI_EXIT_OK;
    const char *name = o->path ? o->path : "stdout";
    if (!o->f)
        return CLI_EXIT_OK;
    /* errno is read only right after the call that failed: a write that
     * failed earlier unnoticed (ferror) left an errno that later calls have
     * since overwritten, so the buffer is flushed again for the cause, and
     * where that succeeds the cause is unknown (EIO), never a stale one */
    if (ok && !o->error) {
        bool earlier = ferror(o->f);
        errno = 0;
        if (fflush(o->f) != 0)
            o->error = errno ? errno : EIO;
        else if (earlier)
            o->error = EIO;
    }
    if (o->f != stdout) {
        errno = 0;
        if (fclose(o->f) != 0 && ok && !o->error)
            o->error = errno ? errno : EIO;
    }
    o->f = NULL;
    if (o->error) {
        fprintf(stderr, "collsynth %s: cannot write '%s': %s%s\n", o->cmd, name,
                strerror(o->error), o->tmp ? " (the file was left as it was)" : "");
        code = CLI_EXIT_USAGE;
        ok = false;
    }
    if (o->tmp && ok && rename(o->tmp, o->real ? o->real : o->path) != 0) {
        int e = errno; /* rename's own, whatever runs before the message */
        fprintf(stderr, "collsynth %s: cannot write '%s': %s\n", o->cmd, o->path, strerror(e));
        code = CLI_EXIT_USAGE;
        ok = false;
    }
    out_release(o, ok);
    return code;
}

int cli_out_precheck(const char *cmd, const char *path)
{
    if (!path || strcmp(path, "-") == 0)
        return CLI_EXIT_OK;
    struct stat st;
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        if (S_ISDIR(st.st_mode)) {
            fprintf(stderr, "collsynth %s: cannot write '%s': it is a directory\n", cmd, path);
            return CLI_EXIT_USAGE;
        }
        /* a pipe or a device: opening a FIFO would wait for its reader */
        return CLI_EXIT_OK;
    }
    cli_out o;
    int code = cli_out_open(&o, cmd, path);
    if (code != CLI_EXIT_OK)
        return code;
    /* only the probe goes away: FILE is not created or touched */
    return cli_out_close(&o, false);
}
