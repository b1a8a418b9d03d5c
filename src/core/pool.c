/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A client's worker pool: a fixed set of threads, started with the client
 * and stopped with it, that take jobs from one queue. Two kinds of job:
 *
 * - a task (rio__pool_task): one run of fn, fire and forget; the job's
 *   memory is the poster's and the pool does not touch it once fn starts
 *   (fn may free it). The engine posts a GET chunk's verification so.
 * - a shared job (rio__pool_share / rio__pool_reclaim): up to n threads run
 *   fn at once beside the poster, which runs it too; reclaim takes back the
 *   runs no thread started yet and waits for the started ones to return,
 *   so the job (often on the poster's stack) may then go. A batch's
 *   lookups, opens and commits run so.
 *
 * Lock order: the client lock before the pool's; fn runs with neither.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/engine.h"

static void job_unlink_locked(struct rio__pool *p, struct rio__job *j)
{
    struct rio__job **pp = &p->head;
    while (*pp && *pp != j)
        pp = &(*pp)->next;
    if (!*pp)
        return;
    *pp = j->next;
    if (p->tail == j) {
        p->tail = NULL;
        for (struct rio__job *k = p->head; k; k = k->next)
            p->tail = k;
    }
    j->next = NULL;
    j->queued = false;
}

static void job_push_locked(struct rio__pool *p, struct rio__job *j)
{
    j->next = NULL;
    j->queued = true;
    if (p->tail)
        p->tail->next = j;
    else
        p->head = j;
    p->tail = j;
}

static void *pool_main(void *arg)
{
    struct rio__pool *p = arg;
    /* Named, so top -H and perf tell the pools from the engine. */
    if (p->name)
        (void)pthread_setname_np(pthread_self(), p->name);
    pthread_mutex_lock(&p->mu);
    for (;;) {
        struct rio__job *j = p->head;
        if (!j) {
            if (p->stop)
                break;
            pthread_cond_wait(&p->cond, &p->mu);
            continue;
        }
        /* The first job's next run; it leaves the queue with its last. */
        if (--j->want == 0) {
            p->head = j->next;
            if (!p->head)
                p->tail = NULL;
            j->next = NULL;
            j->queued = false;
        }
        bool shared = j->shared;
        if (shared)
            j->running++;
        void (*fn)(void *) = j->fn;
        void *fa = j->arg;
        pthread_mutex_unlock(&p->mu);
        fn(fa);
        pthread_mutex_lock(&p->mu);
        /* A task's job may be gone; a shared one waits in reclaim for this. */
        if (shared && --j->running == 0)
            pthread_cond_broadcast(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

int rio__pool_start(struct rio__pool *p, unsigned n, const char *name)
{
    int ret;

    memset(p, 0, sizeof(*p));
    p->name = name;
    if (n == 0)
        n = 1;
    p->th = rio__calloc(n, sizeof(*p->th));
    if (!p->th)
        return -ENOMEM;
    ret = pthread_mutex_init(&p->mu, NULL);
    if (ret != 0)
        goto err_th;
    ret = pthread_cond_init(&p->cond, NULL);
    if (ret != 0)
        goto err_mu;
    ret = pthread_cond_init(&p->done, NULL);
    if (ret != 0)
        goto err_cond;
    for (; p->n < n; p->n++) {
        ret = pthread_create(&p->th[p->n], NULL, pool_main, p);
        if (ret != 0)
            goto err_threads;
    }
    return 0;
err_threads:
    rio__pool_stop(p);
    return -ret;
err_cond:
    pthread_cond_destroy(&p->cond);
err_mu:
    pthread_mutex_destroy(&p->mu);
err_th:
    rio__free(p->th);
    p->th = NULL;
    return -ret;
}

void rio__pool_stop(struct rio__pool *p)
{
    if (!p->th)
        return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->n; i++)
        pthread_join(p->th[i], NULL);
    pthread_cond_destroy(&p->done);
    pthread_cond_destroy(&p->cond);
    pthread_mutex_destroy(&p->mu);
    rio__free(p->th);
    p->th = NULL;
    p->n = 0;
}

void rio__pool_task(struct rio__pool *p, struct rio__job *j, void (*fn)(void *), void *arg)
{
    j->fn = fn;
    j->arg = arg;
    j->want = 1;
    j->shared = false;
    j->running = 0;
    pthread_mutex_lock(&p->mu);
    job_push_locked(p, j);
    pthread_cond_signal(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

void rio__pool_share(struct rio__pool *p, struct rio__job *j, unsigned n, void (*fn)(void *),
                     void *arg)
{
    j->fn = fn;
    j->arg = arg;
    j->want = n < p->n ? n : p->n;
    j->shared = true;
    j->running = 0;
    j->queued = false;
    if (!j->want)
        return;
    pthread_mutex_lock(&p->mu);
    job_push_locked(p, j);
    if (j->want == 1)
        pthread_cond_signal(&p->cond);
    else
        pthread_cond_broadcast(&p->cond);
    pthread_mutex_unlock(&p->mu);
}

void rio__pool_reclaim(struct rio__pool *p, struct rio__job *j)
{
    pthread_mutex_lock(&p->mu);
    if (j->queued)
        job_unlink_locked(p, j);
    j->want = 0;
    while (j->running > 0)
        pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}
