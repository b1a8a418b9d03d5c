/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The client: its lifetime (one transport, one engine thread, the worker
 * pools), its options and counters, and cancel tokens. One call is call.c,
 * a batch batch.c, readers and writers stream.c.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"

/*
 * A client belongs to the process that made it (include/railio.h): after
 * fork() a child holds a copy without the engine and worker threads, so a
 * call would wait forever for a completion nobody delivers, and a railio://
 * request would go down a socket the parent shares. True (with the detail
 * said) for such a client, and for none.
 */
/* Forks since the first client: counted in each child (pthread_atfork),
 * so that every call tells whether it runs where its client was made by a
 * load, not a getpid() system call. */
static _Atomic unsigned fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void fork_child(void)
{
    atomic_fetch_add(&fork_gen, 1);
}

static void fork_watch(void)
{
    (void)pthread_atfork(NULL, NULL, fork_child);
}

bool rio__client_unusable(const struct rio_client *c)
{
    if (!c)
        return true;
    if (c->fork_gen == atomic_load_explicit(&fork_gen, memory_order_relaxed))
        return false;
    pid_t self = getpid();
    rio__detail("this client was made by process %d, not this one (%d): a client does not "
                "survive fork(); open a new one in the child",
                (int)c->pid, (int)self);
    return true;
}

struct rio_transport *rio__client_transport(struct rio_client *c)
{
    return c->t;
}

uint64_t rio__client_seed(struct rio_client *c)
{
    return c->seed;
}

void rio_desc_cleanup(struct rio_desc *d)
{
    if (!d)
        return;
    rio__free(d->xxh);
    d->xxh = NULL;
}

/* ------------------------------------------------------------ client */

/*
 * A batch's metadata runs on several threads at once: the lookups and
 * upload opens, the commits. Each is a round trip or a few file system calls
 * (a HEAD, a head object read, a create; a rename and its fsyncs, a
 * CompleteMultipartUpload) that mostly waits, so one after another they
 * would add up; the transport's metadata calls are thread-safe by contract.
 * Twice as many threads as the client keeps ops in flight (2 x paths x
 * depth), 8 at least and RIO__META_THREADS_MAX at most: a durable commit of
 * a small file waits on two cache flushes, and with fewer threads the
 * commits, not the transfers, set the pace (docs/internals/engine.md).
 */
#define RIO__META_THREADS_MIN 8
#define RIO__META_THREADS_MAX 64

unsigned rio__meta_threads(const struct rio_client *c)
{
    uint64_t n = 2ull * c->npaths * c->o.depth;
    return n < RIO__META_THREADS_MIN   ? RIO__META_THREADS_MIN
           : n > RIO__META_THREADS_MAX ? RIO__META_THREADS_MAX
                                       : (unsigned)n;
}

/*
 * Verification (xxh3 of every GET chunk) runs on its own pool: it never
 * blocks, so it is sized by the CPUs it may use, one per op the client keeps
 * in flight at most, RIO__CPU_THREADS_MAX at most.
 */
#define RIO__CPU_THREADS_MAX 16u

static unsigned cpu_threads(const struct rio_client *c)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    uint64_t n = (uint64_t)c->npaths * c->o.depth;
    if (cpus > 0 && (uint64_t)cpus < n)
        n = (uint64_t)cpus;
    return n < 1 ? 1 : n > RIO__CPU_THREADS_MAX ? RIO__CPU_THREADS_MAX : (unsigned)n;
}

int rio_client_new(const char *url, const struct rio_options *opts, struct rio_client **out)
{
    struct rio_client *c;
    const struct rio_transport_ops *ops;
    int ret;

    rio__detail_clear();
    rio__env_typos();
    if (!url || !out)
        return RIO_EINVAL;
    *out = NULL;
    c = rio__calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
    pthread_once(&fork_once, fork_watch);
    c->pid = getpid();
    c->fork_gen = atomic_load(&fork_gen);
    ret = rio__url_parse(url, &c->url);
    if (ret < 0)
        goto err_free;
    ret = rio__options_resolve(opts, &c->url, &c->o);
    if (ret < 0)
        goto err_url;
    c->seed = c->o.seed ? c->o.seed : rio__now_ns() ^ (uint64_t)(uintptr_t)c;
    c->o.seed = c->seed;
    c->rng = c->seed;
    ops = rio__transport_find(c->url.scheme);
    if (!ops) {
        /* A scheme of a module that did not load, or of a backend this
         * build left out, is no bad URL (a usage error, exit 2 in the
         * CLI): this build or install lacks it. */
        const char *why = rio__transport_left_out(c->url.scheme);
        ret = RIO_EURL;
        if (why) {
            rio__detail("%s:// is not in this build: %s", c->url.scheme, why);
            ret = RIO_ENOTSUP;
        } else if (rio__transport_module_scheme(c->url.scheme)) {
            ret = RIO_ENOTSUP;
        } else {
            rio__detail("unknown scheme '%.32s://' (this build opens: %s)", c->url.scheme,
                        rio_backends());
        }
        goto err_url;
    }
    ret = rio__url_options_known(&c->url, c->url.scheme, ops->url_options);
    if (ret < 0)
        goto err_url;
    ret = rio__t_open(ops, &c->url, &c->o, &c->t);
    if (ret < 0) {
        if (!rio_error_detail()[0]) {
            char shown[256];
            rio__detail("cannot open %s: %s (%s)", rio__url_redact(url, shown, sizeof(shown)),
                        rio_strerror(ret), rio_errname(ret));
        }
        goto err_url;
    }
    c->npaths = c->t->npaths;
    if (c->npaths < 1 || c->npaths > RIO_MAX_PATHS) {
        ret = RIO_EINVAL;
        goto err_transport;
    }
    c->o.paths = c->npaths;
    ret = rio__engine_reserve(c, c->npaths * c->o.depth);
    if (ret < 0)
        goto err_attempts;
    ret = pthread_mutex_init(&c->mu, NULL);
    if (ret != 0) {
        ret = -ret;
        goto err_attempts;
    }
    ret = rio__pool_start(&c->meta_pool, rio__meta_threads(c) - 1, "rio-meta");
    if (ret < 0)
        goto err_mutex;
    ret = rio__pool_start(&c->cpu_pool, cpu_threads(c), "rio-cpu");
    if (ret < 0)
        goto err_meta_pool;
    ret = rio__engine_start(c);
    if (ret < 0)
        goto err_cpu_pool;
    *out = c;
    return 0;
err_cpu_pool:
    rio__pool_stop(&c->cpu_pool);
err_meta_pool:
    rio__pool_stop(&c->meta_pool);
err_mutex:
    pthread_mutex_destroy(&c->mu);
err_attempts:
    rio__engine_free_attempts(c);
err_transport:
    rio__t_close(c->t);
err_url:
    rio__url_cleanup(&c->url);
err_free:
    rio__free(c);
    return ret;
}

/*
 * Readers and writers still open are ended first (include/railio.h): their
 * work is cancelled and fenced, a writer's upload aborted, and each handle
 * is left holding nothing of the client, for its close to free.
 */
void rio_client_destroy(struct rio_client *c)
{
    /* In a child after fork() the threads to stop are not there and a lock
     * may be held by one that is gone: leave the copy alone. */
    if (rio__client_unusable(c))
        return;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        struct rio__stream *st = rio_list_entry(c->streams.head, struct rio__stream, node);
        pthread_mutex_unlock(&c->mu);
        if (!st)
            break;
        if (st->kind == RIO__STREAM_READER)
            rio__reader_invalidate((struct rio_reader *)st);
        else
            rio__writer_invalidate((struct rio_writer *)st);
    }
    rio__engine_stop(c);
    /* After the engine (nothing is verified any more) and before the
     * transport (a verification's last act is waking it). */
    rio__pool_stop(&c->cpu_pool);
    rio__pool_stop(&c->meta_pool);
    rio__t_close(c->t);
    rio__engine_free_attempts(c);
    rio__stage_drain(c);
    rio__free(c->toks);
    pthread_mutex_destroy(&c->mu);
    rio__url_cleanup(&c->url);
    rio__free(c);
}

void rio_client_counters(struct rio_client *c, struct rio_counters *out)
{
    if (!out)
        return;
    memset(out, 0, sizeof(*out));
    if (rio__client_unusable(c))
        return;
    pthread_mutex_lock(&c->mu);
    out->inflight_ops = c->inflight_ops;
    out->inflight_bytes = c->inflight_bytes;
    out->requests = c->active.count + c->held_dir[0] + c->held_dir[1];
    out->budget_reserved = c->inflight_bytes;
    for (unsigned i = 0; i < c->npaths; i++) {
        out->path_inflight_ops[i] = c->paths[i].inflight_ops;
        out->path_inflight_bytes[i] = c->paths[i].inflight_bytes;
    }
    pthread_mutex_unlock(&c->mu);
}

void rio_client_options(struct rio_client *c, struct rio_options *out)
{
    if (!out)
        return;
    if (c)
        *out = c->o;
    else
        rio_options_init(out);
}

/* ------------------------------------------------------------ cancel */

int rio_cancel_new(struct rio_cancel **out)
{
    rio__detail_clear();
    if (!out)
        return RIO_EINVAL;
    *out = NULL;
    struct rio_cancel *cx = rio__calloc(1, sizeof(*cx));
    if (!cx)
        return -ENOMEM;
    atomic_init(&cx->refs, 1);
    *out = cx;
    return 0;
}

void rio_cancel_fire(struct rio_cancel *cx)
{
    if (cx)
        atomic_store(&cx->fired, 1);
}

struct rio_cancel *rio__cancel_ref(struct rio_cancel *cx)
{
    if (cx)
        atomic_fetch_add(&cx->refs, 1);
    return cx;
}

void rio__cancel_unref(struct rio_cancel *cx)
{
    if (cx && atomic_fetch_sub(&cx->refs, 1) == 1)
        rio__free(cx);
}

/* The caller's reference: a call, reader or writer still holding the token
 * keeps it alive until it ends. */
void rio_cancel_destroy(struct rio_cancel *cx)
{
    rio__cancel_unref(cx);
}
