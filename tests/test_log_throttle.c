/*
 * log_throttle (server/log.h): the audit's reproducer (2026-11-26) was
 * collsynthd on a full 1 MB tmpfs writing "event=claim_failed error=sqlite:
 * database or disk is full" once a second per worker (65 lines in 30 s,
 * onto the log's disk, which is often the same full disk).  A repeated
 * failure is now logged once, then once per interval with how many repeats
 * were left out; a new message, or the end of the failure, logs at once.
 */
#include <string.h>

#include "check_main.h"
#include "log.h"

START_TEST(a_repeated_failure_logs_once_per_interval_with_its_count)
{
    cs_log_throttle t;
    log_throttle_reset(&t);
    unsigned long skipped = 99;
    const char *full = "sqlite: database or disk is full";
    /* the first occurrence logs */
    ck_assert(log_throttle(&t, full, 1000.0, 60.0, &skipped));
    ck_assert_uint_eq(skipped, 0);
    /* a second per worker for the next 59 s: nothing */
    int logged = 0;
    for (int s = 1; s < 60; s++)
        logged += log_throttle(&t, full, 1000.0 + s, 60.0, &skipped);
    ck_assert_int_eq(logged, 0);
    /* a minute later: one line saying 59 were left out */
    ck_assert(log_throttle(&t, full, 1060.0, 60.0, &skipped));
    ck_assert_uint_eq(skipped, 59);
    ck_assert(!log_throttle(&t, full, 1061.0, 60.0, &skipped));
    /* another message logs at once */
    ck_assert(log_throttle(&t, "sqlite: disk I/O error", 1062.0, 60.0, &skipped));
    ck_assert_uint_eq(skipped, 0);
    /* the failure ended (reset): the next one logs at once */
    log_throttle_reset(&t);
    ck_assert(log_throttle(&t, "sqlite: disk I/O error", 1063.0, 60.0, &skipped));
    ck_assert_uint_eq(skipped, 0);
}
END_TEST

static Suite *log_throttle_suite(void)
{
    Suite *s = suite_create("log_throttle");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, a_repeated_failure_logs_once_per_interval_with_its_count);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(log_throttle_suite)
