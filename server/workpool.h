/*
 * workpool.h - a small fixed pool of threads running queued tasks in FIFO
 * order.  collsynthd uses it to take costly request handling (parsing and
 * validating a synthesis request, expanding a builtin topology, submitting to
 * the store) off libmicrohttpd's few HTTP threads: each of those threads
 * serves many connections in turn, so one slow handler would delay every
 * other connection it holds, health checks included.
 *
 *     cs_workpool *p = workpool_start(4, 1024);
 *     if (workpool_submit(p, parse_task, req) != CS_OK) ... answer 503
 *     ...
 *     workpool_stop(p);      // runs what is queued, then joins the threads
 *     workpool_free(p);
 *
 * Tasks must not block on each other; they may take as long as they need.
 */
#ifndef CS_SERVER_WORKPOOL_H
#define CS_SERVER_WORKPOOL_H

#include "cs_common.h"

typedef struct cs_workpool cs_workpool;
typedef void (*cs_task_fn)(void *arg);

/* NULL when no thread could be started. */
cs_workpool *workpool_start(int threads, int max_queued);
/* Queues fn(arg); CS_ELIMIT when max_queued tasks wait already, CS_ECANCELLED
 * after workpool_stop. */
int workpool_submit(cs_workpool *p, cs_task_fn fn, void *arg);
/* Tasks queued or running now. */
int workpool_busy(cs_workpool *p);
/* Refuses new tasks, runs the queued ones, joins the threads. */
void workpool_stop(cs_workpool *p);
void workpool_free(cs_workpool *p);

#endif
