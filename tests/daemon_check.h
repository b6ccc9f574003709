/*
 * daemon_check.h - Check assertions over server_harness.h for the daemon's
 * integration tests: the steps every such test repeats (start the daemon,
 * POST a synthesis, read an answer as JSON), each failing the calling test
 * with a message that names what went wrong.
 *
 *     cs_daemon d;
 *     daemon_start_checked(&d, NULL, NULL);
 *     json_t *doc = NULL;
 *     ck_assert_int_eq(post_synthesize(&d, body, &doc), 202);
 *     ck_assert_str_eq(json_str(doc, "status"), "queued");
 *
 * Only for Check runners (tests/test_*.c): the benches link the same helper
 * library without Check, and use server_harness.h directly.
 */
#ifndef CS_DAEMON_CHECK_H
#define CS_DAEMON_CHECK_H

#include <jansson.h>

#include "server_harness.h"

/* daemon_start(d, store, NULL, extra), failing the test when it does not. */
void daemon_start_checked(cs_daemon *d, const char *store, const char *const *extra);
/* The response body as JSON (new reference); fails the test when it is not. */
json_t *resp_json(const http_resp *r);
/* doc[key] as a string; "" when absent or not a string. */
const char *json_str(const json_t *doc, const char *key);
/* POST /v1/synthesize; returns the status and, when doc is not NULL, the
 * answer as JSON in *doc. */
long post_synthesize(const cs_daemon *d, const char *body, json_t **doc);
/* GET path; the answer as JSON, its status in *status when not NULL. */
json_t *get_json(const cs_daemon *d, const char *path, long *status);
/* POST body (no wait_s) and the id of the job that has its key, in id
 * (with the key in key when not NULL); returns the status, 202 or 200, and
 * fails the test on any other.  A fast job (a ring baseline: microseconds)
 * is often done before the answer is made, and the answer is then its
 * result (200, CONTRACT.md): the job is found by key in GET /v1/jobs.
 * Assert 202 alone only for a job that cannot be done by then. */
long submit_job_checked(const cs_daemon *d, const char *body, char id[40], char key[65]);

#endif
