/*
 * send_edit.h - tests change single fields of sends (to build malformed or
 * re-timed schedules) through algorithm_send / algorithm_set_send, the only
 * way to write the compact send storage:
 *
 *     SEND_SET(a, 5, dst, 9);        // send 5 now goes to rank 9
 */
#ifndef CS_SEND_EDIT_H
#define CS_SEND_EDIT_H

#include <check.h>

#include "algorithm.h"

#define SEND_SET(alg, i, field, value)                                   \
    do {                                                                 \
        cs_send send_edit_ = algorithm_send((alg), (i));                 \
        send_edit_.field = (value);                                      \
        ck_assert_int_eq(algorithm_set_send((alg), (i), &send_edit_), CS_OK); \
    } while (0)

#endif
