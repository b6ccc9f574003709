/*
 * log_throttle (server/log.h): the audit's reproducer (2026-11-26) was
 * collsynthd on a full 1 MB tmpfs writing "event=claim_failed error=sqlite:
 * database or disk is full" once a second per worker (65 lines in 30 s,
 * onto the log's disk, which is often the same full disk).  A repeated
 * failure is now logged once, then once per interval with how many repeats
 * were left out; a new message, or the end of the failure, logs at once,
 * after one line with the old message's repeats not yet reported (they were
 * dropped before: the last minute of a failure never showed in the log).
 * The lines are read back from a log file written by the real logger.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check_main.h"
#include "cs_common.h"
#include "log.h"

typedef struct captured {
    char path[64];
    cs_logger lg;
} captured;

static void capture(captured *c)
{
    snprintf(c->path, sizeof c->path, "/tmp/test_log_throttle.XXXXXX");
    int fd = mkstemp(c->path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    log_init(&c->lg, "info", "kv");
    cs_error err;
    ck_assert_int_eq(log_open_file(&c->lg, c->path, &err), CS_OK);
}

/* The lines written so far, as one string (freed by the caller). */
static char *lines_of(const captured *c)
{
    FILE *f = fopen(c->path, "r");
    ck_assert_ptr_nonnull(f);
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strdup(buf);
}

static int count(const char *text, const char *needle)
{
    int n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p += strlen(needle))
        n++;
    return n;
}

static void uncapture(captured *c)
{
    close(c->lg.fd);
    unlink(c->path);
}

START_TEST(a_repeated_failure_logs_once_per_interval_with_its_count)
{
    captured c;
    capture(&c);
    cs_log_throttle t;
    log_throttle_reset(&t);
    const char *full = "sqlite: database or disk is full";
    /* the first occurrence logs; a second per worker for the next 59 s: nothing */
    for (int s = 0; s < 60; s++)
        log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", full, 1000.0 + s, 60.0);
    char *l = lines_of(&c);
    ck_assert_int_eq(count(l, "event=claim_failed"), 1);
    ck_assert_int_eq(count(l, "error=\"sqlite: database or disk is full\""), 1);
    ck_assert_int_eq(count(l, "repeated="), 0);
    free(l);
    /* a minute later: one line saying 59 were left out */
    log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", full, 1060.0, 60.0);
    l = lines_of(&c);
    ck_assert_int_eq(count(l, "event=claim_failed"), 2);
    ck_assert_int_eq(count(l, " repeated=59\n"), 1);
    free(l);
    uncapture(&c);
}
END_TEST

/* The repeats since the last line are reported when the message changes
 * and when the failure ends, once each, before the new message's line;
 * nothing is said when there is nothing left out. */
START_TEST(the_count_left_out_is_flushed_on_change_and_on_end)
{
    captured c;
    capture(&c);
    cs_log_throttle t;
    log_throttle_reset(&t);
    const char *full = "sqlite: database or disk is full", *io = "sqlite: disk I/O error";
    log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", full, 1000.0, 60.0);
    for (int s = 1; s <= 12; s++) /* 12 repeats, none logged */
        log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", full, 1000.0 + s, 60.0);
    /* another message: the 12 first, then the new one at once */
    log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", io, 1013.0, 60.0);
    char *l = lines_of(&c);
    const char *flush = strstr(l, "suppressed=12 message=\"12 more like this suppressed\"");
    ck_assert_msg(flush != NULL, "%s", l);
    /* the flushed line names the old message, and comes before the new one */
    const char *line = flush;
    while (line > l && line[-1] != '\n')
        line--;
    ck_assert_msg(strstr(line, "error=\"sqlite: database or disk is full\"") &&
                      strstr(line, "error=\"sqlite: database or disk is full\"") < flush,
                  "%s", l);
    const char *newline = strstr(l, "error=\"sqlite: disk I/O error\"");
    ck_assert_ptr_nonnull(newline);
    ck_assert(newline > flush);
    ck_assert_int_eq(count(l, "\n"), 3);
    free(l);
    /* 3 repeats of the new message, then the failure ends: one line for them */
    for (int s = 1; s <= 3; s++)
        log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", io, 1013.0 + s, 60.0);
    log_throttle_end(&c.lg, LOG_ERROR, &t, "claim_failed");
    l = lines_of(&c);
    ck_assert_int_eq(count(l, "\n"), 4);
    ck_assert_msg(strstr(l, "error=\"sqlite: disk I/O error\" suppressed=3 message=\"3 more like "
                         "this suppressed\""), "%s", l);
    free(l);
    /* ended again, or a message that was logged and never repeated: nothing */
    log_throttle_end(&c.lg, LOG_ERROR, &t, "claim_failed");
    log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", io, 1100.0, 60.0);
    log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", full, 1101.0, 60.0);
    log_throttle_end(&c.lg, LOG_ERROR, &t, "claim_failed");
    l = lines_of(&c);
    ck_assert_int_eq(count(l, "\n"), 6);
    ck_assert_int_eq(count(l, "suppressed="), 2);
    free(l);
    /* a repeat counted in a repeated=N line is not counted again at the end */
    log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", full, 2000.0, 60.0);
    log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", full, 2001.0, 60.0);
    log_throttled(&c.lg, LOG_ERROR, &t, "claim_failed", full, 2060.0, 60.0);
    log_throttle_end(&c.lg, LOG_ERROR, &t, "claim_failed");
    l = lines_of(&c);
    ck_assert_int_eq(count(l, " repeated=1\n"), 1);
    ck_assert_int_eq(count(l, "suppressed="), 2);
    free(l);
    uncapture(&c);
}
END_TEST

static Suite *log_throttle_suite(void)
{
    Suite *s = suite_create("log_throttle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_repeated_failure_logs_once_per_interval_with_its_count);
    tcase_add_test(tc, the_count_left_out_is_flushed_on_change_and_on_end);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(log_throttle_suite)
