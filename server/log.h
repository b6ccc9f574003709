/*
 * log.h - structured one-line logs on stderr: key=value (default) or JSON
 * lines.  Each line is written with one write(2), so lines from concurrent
 * threads never interleave.
 *
 *     log_event(lg, LOG_INFO, "job_done", "id", id, "seconds", secs_text, NULL);
 *  -> ts=2026-11-22T00:14:03.120Z level=info event=job_done id=ab12 seconds=0.53
 */
#ifndef CS_SERVER_LOG_H
#define CS_SERVER_LOG_H

#include <stdbool.h>
#include "cs_common.h"

typedef enum { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR } cs_log_level;

typedef struct cs_logger {
    cs_log_level level;
    bool json;
    int fd;               /* 2 = stderr */
    char path[1024];      /* log_open_file's file, "" for stderr */
} cs_logger;

void log_init(cs_logger *lg, const char *level, const char *format);
/* Logs to path (appended) instead of stderr; CS_EIO naming it on failure. */
int log_open_file(cs_logger *lg, const char *path, cs_error *err);
/* Opens the file again by its path and puts it behind the same descriptor
 * (dup2, atomic for concurrent writers): after logrotate moved it, new lines
 * go to a new file.  No-op on stderr. */
int log_reopen(const cs_logger *lg, cs_error *err);
/* Pairs of (key, value) strings, NULL-terminated; a NULL value prints as "". */
void log_event(const cs_logger *lg, cs_log_level level, const char *event, ...)
    __attribute__((sentinel));

/* One failure that repeats (a full disk fails each worker's claim every
 * second, for hours): logged the first time, then at most once per
 * interval_s with how many were left out (repeated=N), and again at once
 * when the message changes.  Every repeat left out is reported: when the
 * message changes or the failure ends (log_throttle_end), the repeats of
 * the old message not yet counted in a line get one line of their own,
 *   event=EVENT error="OLD" suppressed=N message="N more like this suppressed"
 * so the last minute of a failure is never lost.  One per logging site and
 * thread, log_throttle_reset to start. */
typedef struct cs_log_throttle {
    char last[256];              /* the message last logged */
    double logged_at;            /* when (0: no failure going on) */
    unsigned long suppressed;    /* repeats since, not logged */
} cs_log_throttle;
/* Zeroes t: the start, nothing pending (it drops a pending count: a
 * failure ends with log_throttle_end). */
void log_throttle_reset(cs_log_throttle *t);
/* This occurrence of msg (NULL: "") at time now: logged as event with
 * error=msg, left out, or (message changed) after the old one's count. */
void log_throttled(const cs_logger *lg, cs_log_level level, cs_log_throttle *t,
                   const char *event, const char *msg, double now, double interval_s);
/* The failure is over (the claim succeeded, the worker stops): the count
 * left out since the last line, if any, is logged; the next failure logs at
 * once. */
void log_throttle_end(const cs_logger *lg, cs_log_level level, cs_log_throttle *t,
                      const char *event);

#endif
