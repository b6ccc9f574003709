/*
 * log.c - structured logging (see log.h).  Values are escaped for their
 * format, so a client-chosen string (a path, a topology name) cannot forge a
 * log line or a field.
 */
#include "log.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

void log_init(cs_logger *lg, const char *level, const char *format)
{
    lg->fd = 2;
    lg->path[0] = '\0';
    lg->json = format && !strcmp(format, "json");
    lg->level = LOG_INFO;
    if (level) {
        if (!strcmp(level, "debug"))
            lg->level = LOG_DEBUG;
        else if (!strcmp(level, "warn"))
            lg->level = LOG_WARN;
        else if (!strcmp(level, "error"))
            lg->level = LOG_ERROR;
    }
}

int log_open_file(cs_logger *lg, const char *path, cs_error *err)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return cs_error_set(err, CS_EIO, "log-file", "cannot open the log file %s: %s", path,
                            strerror(errno));
    lg->fd = fd;
    snprintf(lg->path, sizeof lg->path, "%s", path);
    return CS_OK;
}

int log_reopen(const cs_logger *lg, cs_error *err)
{
    if (!lg->path[0])
        return CS_OK;
    int fd = open(lg->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd < 0)
        return cs_error_set(err, CS_EIO, "log-file", "cannot reopen the log file %s: %s",
                            lg->path, strerror(errno));
    int rc = dup2(fd, lg->fd) < 0 ? cs_error_set(err, CS_EIO, "log-file", "dup2: %s",
                                                 strerror(errno))
                                  : CS_OK;
    close(fd);
    return rc;
}

typedef struct line_buf {
    char b[4096];
    size_t n;
} line_buf;

static void put_c(line_buf *l, char c)
{
    if (l->n + 2 < sizeof l->b)
        l->b[l->n++] = c;
}

static void put_s(line_buf *l, const char *s)
{
    while (*s)
        put_c(l, *s++);
}

/* JSON string body escaping; also used for quoted kv values. */
static void put_escaped(line_buf *l, const char *s)
{
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            put_c(l, '\\');
            put_c(l, (char)c);
        } else if (c == '\n') {
            put_s(l, "\\n");
        } else if (c < 0x20 || c == 0x7f) {
            char hex[8];
            snprintf(hex, sizeof hex, "\\u%04x", c);
            put_s(l, hex);
        } else {
            put_c(l, (char)c);
        }
    }
}

static bool kv_needs_quotes(const char *s)
{
    if (!*s)
        return true;
    for (; *s; s++)
        if (*s == ' ' || *s == '"' || *s == '=' || *s == '\\' || (unsigned char)*s < 0x20)
            return true;
    return false;
}

static void put_pair(line_buf *l, bool json, bool first, const char *k, const char *v)
{
    if (json) {
        if (!first)
            put_c(l, ',');
        put_c(l, '"');
        put_escaped(l, k);
        put_s(l, "\":\"");
        put_escaped(l, v);
        put_c(l, '"');
    } else {
        if (!first)
            put_c(l, ' ');
        put_s(l, k);
        put_c(l, '=');
        if (kv_needs_quotes(v)) {
            put_c(l, '"');
            put_escaped(l, v);
            put_c(l, '"');
        } else {
            put_s(l, v);
        }
    }
}

void log_event(const cs_logger *lg, cs_log_level level, const char *event, ...)
{
    if (!lg || level < lg->level)
        return;
    static const char *const names[] = {"debug", "info", "warn", "error"};
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char tbuf[96];
    snprintf(tbuf, sizeof tbuf, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (long)(ts.tv_nsec / 1000000) % 1000);
    line_buf l = {.n = 0};
    if (lg->json)
        put_c(&l, '{');
    put_pair(&l, lg->json, true, "ts", tbuf);
    put_pair(&l, lg->json, false, "level", names[level]);
    put_pair(&l, lg->json, false, "event", event);
    va_list ap;
    va_start(ap, event);
    for (;;) {
        const char *k = va_arg(ap, const char *);
        if (!k)
            break;
        const char *v = va_arg(ap, const char *);
        put_pair(&l, lg->json, false, k, v ? v : "");
    }
    va_end(ap);
    if (lg->json)
        put_c(&l, '}');
    l.b[l.n++] = '\n';
    ssize_t w = write(lg->fd, l.b, l.n);
    (void)w;
}

/* The repeats of t->last not yet in any line, as one line of their own. */
static void throttle_flush(const cs_logger *lg, cs_log_level level, cs_log_throttle *t,
                           const char *event)
{
    if (t->suppressed > 0) {
        char n[32], note[80];
        snprintf(n, sizeof n, "%lu", t->suppressed);
        snprintf(note, sizeof note, "%lu more like this suppressed", t->suppressed);
        log_event(lg, level, event, "error", t->last, "suppressed", n, "message", note, NULL);
    }
    t->suppressed = 0;
}

void log_throttled(const cs_logger *lg, cs_log_level level, cs_log_throttle *t,
                   const char *event, const char *msg, double now, double interval_s)
{
    if (!msg)
        msg = "";
    bool same = t->logged_at > 0 && strncmp(t->last, msg, sizeof t->last - 1) == 0;
    if (same && now - t->logged_at < interval_s) {
        t->suppressed++;
        return;
    }
    unsigned long repeated = 0;
    if (same)
        repeated = t->suppressed; /* counted in this line */
    else
        throttle_flush(lg, level, t, event); /* the old message's, before the new one */
    snprintf(t->last, sizeof t->last, "%s", msg);
    t->logged_at = now;
    t->suppressed = 0;
    if (repeated) {
        char rep[32];
        snprintf(rep, sizeof rep, "%lu", repeated);
        log_event(lg, level, event, "error", msg, "repeated", rep, NULL);
    } else {
        log_event(lg, level, event, "error", msg, NULL);
    }
}

void log_throttle_end(const cs_logger *lg, cs_log_level level, cs_log_throttle *t,
                      const char *event)
{
    throttle_flush(lg, level, t, event);
    log_throttle_reset(t);
}

void log_throttle_reset(cs_log_throttle *t) { memset(t, 0, sizeof *t); }
