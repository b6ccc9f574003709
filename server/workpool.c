/*
 * workpool.c - fixed thread pool over a bounded FIFO (see workpool.h).  One
 * mutex guards the queue; tasks run without it.
 */
#include "workpool.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

typedef struct task {
    cs_task_fn fn;
    void *arg;
    struct task *next;
} task;

struct cs_workpool {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    task *head, *tail;
    int queued, running, max_queued;
    bool stopping;
    int nthreads;
    pthread_t *threads;
};

static void *pool_main(void *arg)
{
    cs_workpool *p = arg;
    pthread_mutex_lock(&p->lock);
    for (;;) {
        while (!p->head && !p->stopping)
            pthread_cond_wait(&p->cond, &p->lock);
        task *t = p->head;
        if (!t)
            break; /* stopping and drained */
        p->head = t->next;
        if (!p->head)
            p->tail = NULL;
        p->queued--;
        p->running++;
        pthread_mutex_unlock(&p->lock);
        t->fn(t->arg);
        free(t);
        pthread_mutex_lock(&p->lock);
        p->running--;
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

cs_workpool *workpool_start(int threads, int max_queued)
{
    if (threads < 1)
        return NULL;
    cs_workpool *p = calloc(1, sizeof *p);
    if (!p)
        return NULL;
    p->threads = calloc((size_t)threads, sizeof *p->threads);
    if (!p->threads) {
        free(p);
        return NULL;
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->cond, NULL);
    p->max_queued = max_queued > 0 ? max_queued : 1;
    for (int i = 0; i < threads; i++)
        if (pthread_create(&p->threads[p->nthreads], NULL, pool_main, p) == 0)
            p->nthreads++;
    if (p->nthreads == 0) {
        workpool_free(p);
        return NULL;
    }
    return p;
}

int workpool_submit(cs_workpool *p, cs_task_fn fn, void *arg)
{
    task *t = malloc(sizeof *t);
    if (!t)
        return CS_ENOMEM;
    *t = (task){.fn = fn, .arg = arg};
    pthread_mutex_lock(&p->lock);
    int rc = p->stopping ? CS_ECANCELLED : p->queued >= p->max_queued ? CS_ELIMIT : CS_OK;
    if (rc == CS_OK) {
        if (p->tail)
            p->tail->next = t;
        else
            p->head = t;
        p->tail = t;
        p->queued++;
        pthread_cond_signal(&p->cond);
    }
    pthread_mutex_unlock(&p->lock);
    if (rc)
        free(t);
    return rc;
}

int workpool_busy(cs_workpool *p)
{
    pthread_mutex_lock(&p->lock);
    int n = p->queued + p->running;
    pthread_mutex_unlock(&p->lock);
    return n;
}

void workpool_stop(cs_workpool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->lock);
    p->stopping = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->lock);
    for (int i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    p->nthreads = 0;
}

void workpool_free(cs_workpool *p)
{
    if (!p)
        return;
    workpool_stop(p);
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->cond);
    free(p->threads);
    free(p);
}
