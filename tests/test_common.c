/* Tests of cs_common: error values and cancellation tokens. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "check_main.h"
#include "cs_common.h"

START_TEST(error_set_fills_code_field_and_message)
{
    cs_error err;
    int rc = cs_error_set(&err, CS_EINVAL, "links[3].src", "rank %d out of range", 9);
    ck_assert_int_eq(rc, CS_EINVAL);
    ck_assert_int_eq(err.code, CS_EINVAL);
    ck_assert_str_eq(err.field, "links[3].src");
    ck_assert_str_eq(err.message, "rank 9 out of range");
    ck_assert_str_eq(cs_status_name(CS_EUNSAT), "unsat");
    ck_assert_int_eq(cs_error_set(NULL, CS_EIO, NULL, "x"), CS_EIO);
}
END_TEST

static void count_hook(void *arg) { (*(int *)arg)++; }

START_TEST(cancel_runs_hooks_once_registered_and_late)
{
    cs_cancel *c = cs_cancel_new();
    ck_assert_ptr_nonnull(c);
    ck_assert(!cs_cancel_requested(c));
    ck_assert(!cs_cancel_requested(NULL));
    int calls = 0, late = 0;
    int h = cs_cancel_register(c, count_hook, &calls);
    ck_assert_int_ge(h, 0);
    cs_cancel_request(c);
    ck_assert(cs_cancel_requested(c));
    ck_assert_int_eq(calls, 1);
    /* registering after the request still delivers it */
    int h2 = cs_cancel_register(c, count_hook, &late);
    ck_assert_int_eq(late, 1);
    cs_cancel_unregister(c, h);
    cs_cancel_unregister(c, h2);
    cs_cancel_free(c);
}
END_TEST

static void *cancel_later(void *arg)
{
    usleep(20000);
    cs_cancel_request(arg);
    return NULL;
}

START_TEST(cancel_is_seen_across_threads)
{
    cs_cancel *c = cs_cancel_new();
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, c);
    double t0 = cs_now();
    while (!cs_cancel_requested(c) && cs_now() - t0 < 5.0)
        usleep(1000);
    pthread_join(th, NULL);
    ck_assert(cs_cancel_requested(c));
    cs_cancel_free(c);
}
END_TEST

START_TEST(read_file_reports_missing_path)
{
    char *buf = NULL;
    cs_error err;
    int rc = cs_read_file("/nonexistent/collsynth/file.json", &buf, NULL, &err);
    ck_assert_int_eq(rc, CS_EIO);
    ck_assert_ptr_nonnull(strstr(err.message, "/nonexistent/collsynth/file.json"));
    ck_assert_ptr_null(buf);
    ck_assert_int_ge(cs_cpu_count(), 1);
}
END_TEST


START_TEST(deadline_after_is_that_far_in_realtime)
{
    struct timespec before, after;
    clock_gettime(CLOCK_REALTIME, &before);
    struct timespec d = cs_deadline_after(1.75);
    clock_gettime(CLOCK_REALTIME, &after);
    double b = (double)before.tv_sec + before.tv_nsec * 1e-9;
    double a = (double)after.tv_sec + after.tv_nsec * 1e-9;
    double t = (double)d.tv_sec + d.tv_nsec * 1e-9;
    ck_assert(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
    ck_assert(t >= b + 1.75 - 1e-6 && t <= a + 1.75 + 1e-6);
    /* carrying into seconds: 0.999999999 s from now is still normalized */
    d = cs_deadline_after(0.999999999);
    ck_assert(d.tv_nsec >= 0 && d.tv_nsec < 1000000000L);
}
END_TEST

/* cs_buf, the growable text buffer every module shares: what it holds is
 * exactly what was appended, whichever way, across its growth. */
START_TEST(buf_holds_what_was_appended)
{
    cs_buf b = {0};
    ck_assert_uint_eq(b.len, 0);
    size_t len = 99;
    char *t = cs_buf_take(&b, &len);   /* nothing added: "" */
    ck_assert_str_eq(t, "");
    ck_assert_uint_eq(len, 0);
    free(t);
    /* every way of appending, mixed, past several doublings (4 KiB, 8, ...) */
    static char want[200000];
    size_t w = 0;
    for (int i = 0; w < 150000; i++) {
        switch (i % 4) {
        case 0:
            ck_assert(cs_buf_putc(&b, (char)('a' + i % 26)));
            want[w++] = (char)('a' + i % 26);
            break;
        case 1:
            ck_assert(cs_buf_puts(&b, "<tb id=\"7\">"));
            memcpy(want + w, "<tb id=\"7\">", 11);
            w += 11;
            break;
        case 2:
            ck_assert(cs_buf_printf(&b, "[%d:%.3f]", i, i / 8.0));
            w += (size_t)snprintf(want + w, sizeof want - w, "[%d:%.3f]", i, i / 8.0);
            break;
        default:
            ck_assert(cs_buf_append(&b, "xyz", 2));
            memcpy(want + w, "xy", 2);
            w += 2;
        }
        ck_assert_uint_eq(b.len, w);
        ck_assert_int_eq(b.s[b.len], '\0');
    }
    ck_assert(memcmp(b.s, want, w) == 0);
    /* one printf longer than any free space and than a small stack buffer */
    char big[3000];
    memset(big, 'q', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    size_t before = b.len;
    ck_assert(cs_buf_printf(&b, "%s|%d", big, 42));
    ck_assert_uint_eq(b.len, before + sizeof big - 1 + 3);
    ck_assert_str_eq(b.s + before + sizeof big - 1, "|42");
    /* bytes, NULs included, as libcurl hands them over */
    before = b.len;
    ck_assert_uint_eq(cs_buf_write("a\0b", 1, 3, &b), 3);
    ck_assert_uint_eq(b.len, before + 3);
    ck_assert(memcmp(b.s + before, "a\0b", 3) == 0);
    /* reset keeps the memory */
    size_t cap = b.cap;
    cs_buf_reset(&b);
    ck_assert_uint_eq(b.len, 0);
    ck_assert_str_eq(b.s, "");
    ck_assert_uint_eq(b.cap, cap);
    ck_assert(cs_buf_printf(&b, "%s", ""));
    ck_assert(cs_buf_puts(&b, "again"));
    t = cs_buf_take(&b, &len);
    ck_assert_str_eq(t, "again");
    ck_assert_uint_eq(len, 5);
    ck_assert_ptr_null(b.s);
    ck_assert_uint_eq(b.cap, 0);
    free(t);
    cs_buf_free(&b);
}
END_TEST

/* An allocation that cannot be made: failed is set, every later append
 * refuses, libcurl's sink says 0, and the text is given back as NULL. */
START_TEST(buf_failure_is_sticky_and_reported)
{
    cs_buf b = {0};
    ck_assert(cs_buf_puts(&b, "kept so far"));
    ck_assert(!cs_buf_reserve(&b, (size_t)-1 / 2));
    ck_assert(b.failed);
    ck_assert(!cs_buf_putc(&b, 'x'));
    ck_assert(!cs_buf_append(&b, "x", 1));
    ck_assert(!cs_buf_printf(&b, "%d", 1));
    ck_assert_uint_eq(cs_buf_write("abc", 1, 3, &b), 0);
    ck_assert_str_eq(b.s, "kept so far");   /* nothing half-written */
    size_t len = 7;
    ck_assert_ptr_null(cs_buf_take(&b, &len));
    ck_assert_uint_eq(len, 0);
    ck_assert_ptr_null(b.s);
    ck_assert(!b.failed);
    /* a reset buffer takes appends again */
    ck_assert(cs_buf_putc(&b, 'y'));
    ck_assert_str_eq(b.s, "y");
    cs_buf_free(&b);
}
END_TEST

static Suite *common_suite(void)
{
    Suite *s = suite_create("common");
    TCase *tc = tcase_create("core");
    tcase_add_test(tc, error_set_fills_code_field_and_message);
    tcase_add_test(tc, cancel_runs_hooks_once_registered_and_late);
    tcase_add_test(tc, cancel_is_seen_across_threads);
    tcase_add_test(tc, read_file_reports_missing_path);
    tcase_add_test(tc, deadline_after_is_that_far_in_realtime);
    tcase_add_test(tc, buf_holds_what_was_appended);
    tcase_add_test(tc, buf_failure_is_sticky_and_reported);
    suite_add_tcase(s, tc);
    return s;
}

CS_CHECK_MAIN(common_suite)
