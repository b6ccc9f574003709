/*
 * check_main.h - the main() every tests/test_*.c runner shares: runs one Check
 * suite and exits non-zero on any failure.
 *
 *     static Suite *topology_suite(void) { ... }
 *     CS_CHECK_MAIN(topology_suite)
 */
#ifndef CS_CHECK_MAIN_H
#define CS_CHECK_MAIN_H

#include <check.h>
#include <stdlib.h>

#define CS_CHECK_MAIN(suite_fn)                                   \
    int main(void)                                                \
    {                                                             \
        SRunner *sr = srunner_create(suite_fn());                 \
        srunner_run_all(sr, CK_NORMAL);                           \
        int failed = srunner_ntests_failed(sr);                   \
        srunner_free(sr);                                         \
        return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;         \
    }

#endif
