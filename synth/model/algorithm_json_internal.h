/*
 * algorithm_json_internal.h - algorithm_from_json and result_from_json in
 * parts, so a reader that does not hold the whole document as a DOM
 * (algorithm_load.c: the sends of a million-send algorithm are gigabytes as
 * a DOM, a few megabytes as columns) validates exactly as they do.  Private
 * to synth/model/.
 *
 * An algorithm document is read as its frame (every member, "sends" present
 * and an array, its elements not looked at), then its sends one at a time
 * in document order, then a final check across sends.  The errors are the
 * ones algorithm_from_json gives, field paths included.
 */
#ifndef CS_ALGORITHM_JSON_INTERNAL_H
#define CS_ALGORITHM_JSON_INTERNAL_H

#include "algorithm.h"

/* Every member but the elements of "sends" (which must be an array). */
int algorithm_frame_from_json(const json_t *doc, cs_algorithm **out, cs_error *err);
/* Appends sends[index] (a send object) to a, validated against its frame. */
int algorithm_send_from_json(cs_algorithm *a, const json_t *send, long index, cs_error *err);
/* After the last send: timed on every send or on none. */
int algorithm_sends_done(const cs_algorithm *a, cs_error *err);

/* Fills a's sends (algorithm_send_from_json, indices from 0) for the
 * algorithm document doc: the top-level algorithm (index -1) or
 * frontier[index] of a result. */
typedef int (*algorithm_sends_fn)(void *ctx, int index, const json_t *doc, cs_algorithm *a,
                                  cs_error *err);

int algorithm_from_json_with(const json_t *doc, int index, algorithm_sends_fn sends, void *ctx,
                             cs_algorithm **out, cs_error *err);
int result_from_json_with(const json_t *doc, algorithm_sends_fn sends, void *ctx,
                          cs_result **out, cs_error *err);

#endif
