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

typedef enum { LOG_DEBUG = 0, LOG_INFO, LOG_WARN, LOG_ERROR } cs_log_level;

typedef struct cs_logger {
    cs_log_level level;
    bool json;
    int fd;               /* 2 = stderr */
} cs_logger;

void log_init(cs_logger *lg, const char *level, const char *format);
/* Pairs of (key, value) strings, NULL-terminated; a NULL value prints as "". */
void log_event(const cs_logger *lg, cs_log_level level, const char *event, ...)
    __attribute__((sentinel));

#endif
