/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The public calls: a client owns one transport and one engine thread. Each
 * call looks the object up (GET) or opens an upload (PUT) in the calling
 * thread, hands its chunks to the engine, hashes PUT chunks while the engine
 * moves them, waits for the fence, then commits or copies.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"

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
/* A batch's prepared requests held at once, at most (struct rio__call). */
#define RIO__AHEAD_MAX 128u

static unsigned meta_threads(const struct rio_client *c)
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

    if (!url || !out)
        return RIO_EINVAL;
    *out = NULL;
    c = rio__calloc(1, sizeof(*c));
    if (!c)
        return -ENOMEM;
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
        ret = RIO_EURL;
        goto err_url;
    }
    ret = rio__t_open(ops, &c->url, &c->o, &c->t);
    if (ret < 0)
        goto err_url;
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
    ret = rio__pool_start(&c->meta_pool, meta_threads(c) - 1);
    if (ret < 0)
        goto err_mutex;
    ret = rio__pool_start(&c->cpu_pool, cpu_threads(c));
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

static void reader_invalidate(struct rio_reader *rd);
static void writer_invalidate(struct rio_writer *w);

/*
 * Readers and writers still open are ended first (include/railio.h): their
 * work is cancelled and fenced, a writer's upload aborted, and each handle
 * is left holding nothing of the client, for its close to free.
 */
void rio_client_destroy(struct rio_client *c)
{
    if (!c)
        return;
    for (;;) {
        pthread_mutex_lock(&c->mu);
        struct rio__stream *st = c->streams;
        pthread_mutex_unlock(&c->mu);
        if (!st)
            break;
        if (st->kind == RIO__STREAM_READER)
            reader_invalidate((struct rio_reader *)st);
        else
            writer_invalidate((struct rio_writer *)st);
    }
    rio__engine_stop(c);
    /* After the engine (nothing is verified any more) and before the
     * transport (a verification's last act is waking it). */
    rio__pool_stop(&c->cpu_pool);
    rio__pool_stop(&c->meta_pool);
    rio__t_close(c->t);
    rio__engine_free_attempts(c);
    rio__stage_drain(c);
    pthread_mutex_destroy(&c->mu);
    rio__url_cleanup(&c->url);
    rio__free(c);
}

void rio_client_counters(struct rio_client *c, struct rio_counters *out)
{
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&c->mu);
    out->inflight_ops = c->inflight_ops;
    out->inflight_bytes = c->inflight_bytes;
    out->requests = c->nrequests;
    out->budget_reserved = c->inflight_bytes;
    for (unsigned i = 0; i < c->npaths; i++) {
        out->path_inflight_ops[i] = c->paths[i].inflight_ops;
        out->path_inflight_bytes[i] = c->paths[i].inflight_bytes;
    }
    pthread_mutex_unlock(&c->mu);
}

void rio_client_options(struct rio_client *c, struct rio_options *out)
{
    *out = c->o;
}

/* ------------------------------------------------------------ cancel */

int rio_cancel_new(struct rio_cancel **out)
{
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

/* ------------------------------------------------------------ streams */

static void stream_link(struct rio_client *c, struct rio__stream *st, int kind)
{
    st->kind = kind;
    st->prev = NULL;
    pthread_mutex_lock(&c->mu);
    st->next = c->streams;
    if (c->streams)
        c->streams->prev = st;
    c->streams = st;
    pthread_mutex_unlock(&c->mu);
}

static void stream_unlink(struct rio_client *c, struct rio__stream *st)
{
    pthread_mutex_lock(&c->mu);
    if (st->prev)
        st->prev->next = st->next;
    else
        c->streams = st->next;
    if (st->next)
        st->next->prev = st->prev;
    st->prev = st->next = NULL;
    pthread_mutex_unlock(&c->mu);
}

/* -------------------------------------------------------------- calls */

static int key_check(const char *key)
{
    if (!key)
        return RIO_EINVAL;
    size_t n = strnlen(key, RIO_KEY_MAX + 1);
    if (n == 0 || n > RIO_KEY_MAX)
        return RIO_EINVAL;
    return 0;
}

static int call_new(struct rio_client *c, unsigned nreq, const struct rio_call *opt,
                    struct rio__call **out)
{
    struct rio__call *call = rio__calloc(1, sizeof(*call));
    if (!call)
        return -ENOMEM;
    call->reqs = rio__calloc(nreq, sizeof(*call->reqs));
    if (!call->reqs) {
        rio__free(call);
        return -ENOMEM;
    }
    if (pthread_cond_init(&call->cond, NULL) != 0) {
        rio__free(call->reqs);
        rio__free(call);
        return -ENOMEM;
    }
    call->c = c;
    call->nreq = nreq;
    call->deadline_ms = opt && opt->deadline_ms ? opt->deadline_ms : c->o.deadline_ms;
    if (opt) {
        call->flags = opt->flags;
        call->cancel = rio__cancel_ref(opt->cancel);
        call->want_stats = opt->stats != NULL;
        call->progress = opt->progress;
        call->progress_arg = opt->progress_arg;
    }
    for (unsigned i = 0; i < nreq; i++)
        call->reqs[i].call = call;
    *out = call;
    return 0;
}

static void call_mark_start(struct rio_client *c, struct rio__call *call)
{
    uint64_t now = rio__now_ns();
    call->t0 = now;
    call->deadline_ns = call->deadline_ms == RIO_DEADLINE_NONE
                            ? UINT64_MAX
                            : now + (uint64_t)call->deadline_ms * 1000000ull;
    call->t0_cpu_caller = rio__thread_cpu_ns();
    call->t0_cpu_engine = c->engine_clock_ok ? rio__clock_ns(c->engine_clock) : 0;
    call->t0_cpu_transport = rio__t_cpu_ns(c->t);
    /* Only when stats are asked for: it reads /proc once per thread. */
    if (call->want_stats)
        call->t0_run_delay = rio__proc_run_delay_ns();
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < c->npaths; i++)
        call->path_busy0[i] = rio__path_busy_now(&c->paths[i], now);
    pthread_mutex_unlock(&c->mu);
}

static uint64_t deadline_of(struct rio_client *c, const struct rio_call *opt, uint64_t t0)
{
    uint64_t ms = opt && opt->deadline_ms ? opt->deadline_ms : c->o.deadline_ms;
    return ms == RIO_DEADLINE_NONE ? UINT64_MAX : t0 + ms * 1000000ull;
}

/*
 * The one way a descriptor enters the engine: the transport's lookup, then
 * the check of every field (a hostile server's HEAD is as good as any), so
 * nothing is sized from geometry that contradicts itself. A bad one fails
 * the call with RIO_EPROTO and a line on stderr that names the field.
 */
static int client_lookup(struct rio_client *c, const struct rio__meta *m, const char *key,
                         struct rio_desc *out)
{
    char why[192];
    int ret = rio__meta_lookup(c, m, key, out);
    if (ret < 0)
        return ret;
    ret = rio__desc_check(out, key, why, sizeof(why));
    if (ret < 0) {
        fprintf(stderr, "railio: %s server descriptor: %s\n", c->url.scheme, why);
        rio_desc_cleanup(out);
        memset(out, 0, sizeof(*out));
    }
    return ret;
}

/*
 * What a GET's lookup decides: its descriptor, geometry and, for an atomic
 * call, a staging buffer and a chunk list. Built aside and then published
 * into the request (get_publish), so a batch's worker can build it while the
 * engine already walks the request list.
 */
struct get_plan {
    struct rio_desc desc;
    uint64_t size, chunk_size, nchunks;
    uint8_t *staging;
    size_t staging_cap;
    struct rio__chunk *chunks;
};

static void get_plan_drop(struct rio_client *c, struct get_plan *g)
{
    rio_desc_cleanup(&g->desc);
    if (g->staging)
        rio__stage_put(c, g->staging, g->staging_cap);
    rio__free(g->chunks);
    memset(g, 0, sizeof(*g));
}

/* Look r up and plan it (r->key, r->get_cap, r->expect_gen, r->prefetch set).
 * On error g holds nothing. */
static int get_plan(struct rio_client *c, struct rio__call *call, const struct rio__req *r,
                    struct get_plan *g)
{
    struct rio__meta m;
    memset(g, 0, sizeof(*g));
    rio__meta_for_call(&m, call);
    int ret = client_lookup(c, &m, r->key, &g->desc);
    if (ret < 0)
        goto err;
    ret = RIO_EGENERATION;
    if (r->expect_gen && g->desc.generation != r->expect_gen)
        goto err;
    ret = RIO_ETOOBIG;
    if (g->desc.size > r->get_cap && !r->prefetch)
        goto err;
    g->size = g->desc.size;
    g->chunk_size = g->desc.chunk_size ? g->desc.chunk_size : c->o.chunk_size;
    g->nchunks = g->size ? (g->size - 1) / g->chunk_size + 1 : 0;
    ret = RIO_EPROTO; /* checked by client_lookup; kept for the chunk count */
    if ((g->desc.xxh && g->desc.nchunks != g->nchunks) || g->nchunks > RIO__DESC_CHUNKS_MAX)
        goto err;
    ret = -ENOMEM;
    if (!r->prefetch && (call->flags & RIO_ATOMIC) && g->size) {
        g->staging = rio__stage_get(c, g->size, &g->staging_cap);
        if (!g->staging)
            goto err;
    }
    if (g->nchunks) {
        g->chunks = rio__calloc(g->nchunks, sizeof(*g->chunks));
        if (!g->chunks)
            goto err;
        for (uint64_t i = 0; i < g->nchunks; i++)
            g->chunks[i].idx = i;
    }
    return 0;
err:
    get_plan_drop(c, g);
    return ret;
}

/* Move plan g into r (under mu when the engine may already see r). */
static void get_publish(struct rio__call *call, struct rio__req *r, struct get_plan *g)
{
    r->desc = g->desc;
    r->size = g->size;
    r->generation = g->desc.generation;
    r->chunk_size = g->chunk_size;
    r->nchunks = g->nchunks;
    r->xxh = r->desc.xxh;
    r->chunks = g->chunks;
    if (g->staging) {
        r->staging = g->staging;
        r->staging_cap = g->staging_cap;
        __atomic_fetch_add(&call->bytes_staged, g->size, __ATOMIC_RELAXED);
        r->user = r->data;
        r->data = r->staging;
    }
    memset(g, 0, sizeof(*g));
}

/* Set up a GET request: look it up now, or (defer) leave the lookup to the
 * call's workers (r->opening). */
static int req_prepare_get(struct rio_client *c, struct rio__call *call, struct rio__req *r,
                           const char *key, void *buf, size_t cap, uint64_t expect_gen, bool defer)
{
    struct get_plan g;
    int ret = key_check(key);
    if (ret < 0)
        return ret;
    if (!buf && cap && !r->prefetch)
        return RIO_EINVAL;
    r->type = RIO_OP_GET;
    r->key = rio__strdup(key);
    if (!r->key)
        return -ENOMEM;
    r->data = buf;
    r->get_cap = cap;
    r->expect_gen = expect_gen;
    if (defer) {
        r->opening = true;
        return 0;
    }
    ret = get_plan(c, call, r, &g);
    if (ret < 0)
        return ret;
    get_publish(call, r, &g);
    if (r->prefetch && r->nchunks) {
        /* A reader: chunks land in a ring of prefetch slots. */
        if (r->prefetch > r->nchunks)
            r->prefetch = (unsigned)r->nchunks;
        /* The ring counts against the client's budget: fewer slots when
         * chunks are large (one at least). */
        uint64_t fit = c->o.budget_bytes / r->chunk_size;
        if (r->prefetch > fit)
            r->prefetch = fit ? (unsigned)fit : 1;
        size_t ring;
        if (__builtin_mul_overflow((size_t)r->prefetch, r->chunk_size, &ring))
            return RIO_ETOOBIG;
        r->ring = rio__stage_get(c, ring, &r->staging_cap);
        if (!r->ring)
            return -ENOMEM;
        r->staging = r->ring;
        r->data = NULL;
        atomic_store(&r->window, r->prefetch);
    }
    return 0;
}

/* A PUT's chunk size: the client's, unless the target's own rules on parts
 * (a minimum part size, a maximum part count) say otherwise. A stream of
 * unknown size gets the minimum part size at least. */
static uint64_t put_chunk_size(struct rio_client *c, uint64_t len)
{
    uint64_t cs = c->o.chunk_size;
    if (len > cs) {
        if (cs < c->t->put_chunk_min)
            cs = c->t->put_chunk_min;
        uint64_t max = c->t->put_chunks_max;
        if (len != RIO_SIZE_UNKNOWN && max && (len - 1) / cs + 1 > max) {
            uint64_t need = (len - 1) / max + 1;
            cs = (need + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
        }
    }
    return cs;
}

/* A PUT computes the stream MD5 only when wanted and the backend stores it. */
static bool etag_wanted(const struct rio_client *c)
{
    return c->o.etag > 0 && rio__t_has_cap(c->t, RIO_CAP_ETAG);
}

/* Set up a PUT request: open the upload, or (defer) leave that to the
 * call's workers (r->opening). */
static int req_prepare_put(struct rio_client *c, struct rio__req *r, const char *key,
                           const void *buf, size_t len, bool defer)
{
    int ret = key_check(key);
    if (ret < 0)
        return ret;
    if (!buf && len)
        return RIO_EINVAL;
    r->type = RIO_OP_PUT;
    r->key = rio__strdup(key);
    if (!r->key)
        return -ENOMEM;
    r->size = len;
    r->chunk_size = put_chunk_size(c, len);
    r->nchunks = len ? (len - 1) / r->chunk_size + 1 : 0;
    r->data = (uint8_t *)(uintptr_t)buf; /* read only: the engine only sends from it */
    r->want_md5 = etag_wanted(c);
    if (r->want_md5) {
        ret = rio__md5_init(&r->md5);
        if (ret < 0)
            return ret;
    }
    if (r->nchunks) {
        r->xxh = rio__calloc(r->nchunks, sizeof(*r->xxh));
        r->chunks = rio__calloc(r->nchunks, sizeof(*r->chunks));
        if (!r->xxh || !r->chunks)
            return -ENOMEM;
        for (uint64_t i = 0; i < r->nchunks; i++)
            r->chunks[i].idx = i;
    }
    if (defer) {
        r->opening = true;
        return 0;
    }
    struct rio__meta m;
    rio__meta_for_call(&m, r->call);
    ret = rio__meta_put_open(c, &m, key, len, r->chunk_size, &r->upload);
    if (ret < 0)
        r->upload = NULL;
    return ret;
}

static uint64_t chunk_len_of(const struct rio__req *r, uint64_t k)
{
    uint64_t off = k * r->chunk_size;
    return r->size - off < r->chunk_size ? r->size - off : r->chunk_size;
}

/*
 * Hash the PUTs of a call in the calling thread while the engine sends. First
 * every chunk's xxh3, in source order, each published as soon as it is known
 * (it gates that chunk, and xxh3 is cheap). Then the stream MD5 (the etag)
 * over every object, in source order, behind the transfer: MD5 is an order of
 * magnitude slower than xxh3 (docs/bench.md) and would otherwise hold each
 * chunk back; it only gates the commit. A request that failed stops being hashed.
 */
/* The caller is done hashing r (pipelined commits: it may commit once
 * fenced). */
static void hash_done(struct rio_client *c, struct rio__req *r)
{
    if (!r->call->pipeline)
        return;
    pthread_mutex_lock(&c->mu);
    r->hash_done = true;
    rio__call_ready_locked(r->call, r);
    pthread_mutex_unlock(&c->mu);
}

static bool md5_due(struct rio__req *r)
{
    return r->type == RIO_OP_PUT && r->want_md5 && r->nchunks &&
           atomic_load(&r->hashed) == r->nchunks;
}

static void hash_puts(struct rio_client *c, struct rio__call *call)
{
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (r->type != RIO_OP_PUT || atomic_load(&r->stop_hashing) || !r->nchunks) {
            hash_done(c, r);
            continue;
        }
        uint64_t t0 = rio__now_ns();
        for (uint64_t k = 0; k < r->nchunks && !atomic_load(&r->stop_hashing); k++) {
            r->xxh[k] = rio__xxh3(r->data + k * r->chunk_size, chunk_len_of(r, k));
            atomic_store(&r->hashed, k + 1);
            rio__engine_kick(c);
        }
        call->hash_ns += rio__now_ns() - t0;
        if (!md5_due(r))
            hash_done(c, r);
    }
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (!md5_due(r))
            continue;
        uint64_t t0 = rio__now_ns();
        for (uint64_t k = 0; k < r->nchunks && !atomic_load(&r->stop_hashing); k++) {
            if (rio__md5_update(&r->md5, r->data + k * r->chunk_size, chunk_len_of(r, k)) < 0) {
                /* Its chunks may all be sent already: the result, not only
                 * the engine, must say it failed, so it is never committed. */
                r->result = -ENOMEM;
                rio__engine_fail_req(c, r, -ENOMEM);
                break;
            }
        }
        call->hash_ns += rio__now_ns() - t0;
        hash_done(c, r);
    }
}

/*
 * Publish an upload (rio_put, a batch's PUTs, a writer): the descriptor from
 * its geometry, xxh3 list and (md5 not NULL) the stream MD5. Consumes the
 * upload whatever happens. Everything that can fail happens before the
 * commit: once the new generation is published the call must report
 * success. Sets *gen; out_desc (if any) gets a copy of the descriptor.
 */
static int commit_upload(struct rio_client *c, const struct rio__meta *m, const char *key,
                         void *upload, uint64_t size, uint64_t chunk_size, uint64_t nchunks,
                         uint64_t *xxh, struct rio_md5 *md5, uint64_t *gen,
                         struct rio_desc *out_desc)
{
    struct rio_desc d;
    uint64_t *copy = NULL;
    int ret;

    memset(&d, 0, sizeof(d));
    memcpy(d.key, key, strlen(key) + 1);
    d.size = size;
    d.chunk_size = chunk_size;
    d.nchunks = nchunks;
    d.xxh = xxh;
    ret = md5 ? rio__md5_final(md5, d.etag) : 0;
    if (ret == 0 && out_desc && nchunks) {
        copy = rio__malloc(nchunks * sizeof(uint64_t));
        if (copy)
            memcpy(copy, xxh, nchunks * sizeof(uint64_t));
        else
            ret = -ENOMEM;
    }
    if (ret < 0) {
        rio__t_put_abort(c->t, upload);
        return ret;
    }
    ret = rio__meta_put_commit(c, m, upload, &d);
    if (ret < 0) {
        rio__free(copy);
        return ret;
    }
    *gen = d.generation;
    if (out_desc) {
        *out_desc = d;
        out_desc->xxh = copy;
    }
    return 0;
}

static int put_commit(struct rio_client *c, struct rio__req *r, struct rio_desc *out_desc)
{
    void *upload = r->upload;
    struct rio__meta m;
    r->upload = NULL;
    rio__meta_for_call(&m, r->call);
    return commit_upload(c, &m, r->key, upload, r->size, r->chunk_size, r->nchunks, r->xxh,
                         r->want_md5 ? &r->md5 : NULL, &r->generation, out_desc);
}

struct meta_pool {
    unsigned n;
    _Atomic unsigned next;
    void (*fn)(void *arg, unsigned i);
    void *arg;
};

static void meta_worker(void *arg)
{
    struct meta_pool *p = arg;
    for (;;) {
        unsigned i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            return;
        p->fn(p->arg, i);
    }
}

/* fn(arg, i) for every i < n, on this thread and up to meta_threads(c) - 1
 * of the client's meta pool (weight: how many of the n have work); what
 * the pool's threads do not take, this thread does. */
static void meta_parallel(struct rio_client *c, unsigned n, unsigned weight,
                          void (*fn)(void *arg, unsigned i), void *arg)
{
    struct meta_pool p = {.n = n, .fn = fn, .arg = arg};
    struct rio__job job;
    atomic_init(&p.next, 0);
    rio__pool_share(&c->meta_pool, &job, weight ? weight - 1 : 0, meta_worker, &p);
    meta_worker(&p);
    rio__pool_reclaim(&c->meta_pool, &job);
}

struct commit_job {
    struct rio_client *c;
    struct rio__call *call;
};

static bool commit_due(const struct rio__req *r)
{
    return r->type == RIO_OP_PUT && r->result >= 0 && r->status >= 0;
}

static void commit_one(void *arg, unsigned i)
{
    struct commit_job *j = arg;
    struct rio__req *r = &j->call->reqs[i];
    if (commit_due(r) && !r->committed)
        r->result = put_commit(j->c, r, NULL);
}

/* Prepare deferred request r on a call worker, mu not held (todo: it has
 * not failed already): open a PUT's upload or look a GET up, then publish
 * the result under mu. One that fails fails alone. */
static void prepare_one(struct rio_client *c, struct rio__call *call, struct rio__req *r, bool todo)
{
    struct get_plan g;
    void *up = NULL;
    int ret = 0;
    bool empty = false;

    struct rio__meta m;
    memset(&g, 0, sizeof(g));
    rio__meta_for_call(&m, call);
    if (todo)
        ret = r->type == RIO_OP_PUT ? rio__meta_put_open(c, &m, r->key, r->size, r->chunk_size, &up)
                                    : get_plan(c, call, r, &g);
    pthread_mutex_lock(&c->mu);
    r->opening = false;
    /* It failed before or while it was prepared (deadline, cancel): its
     * status says why; nothing of it is kept. */
    bool gone = r->decided && r->status < 0;
    if (ret == 0 && todo && !gone) {
        if (r->type == RIO_OP_PUT) {
            r->upload = up;
            up = NULL;
            empty = r->nchunks == 0;
        } else {
            get_publish(call, r, &g);
            /* (latency samples past the reserve are only not kept) */
            call->lat_want += r->nchunks;
            (void)rio__u64_reserve(&call->lat, &call->lat_cap, call->nlat, call->lat_want);
            call->progress_total += r->size;
            empty = r->nchunks == 0;
        }
    } else if (ret < 0 && r->result >= 0) {
        r->result = ret;
    }
    if (ret < 0 || !todo || gone) {
        r->ahead = false; /* nothing held for it */
        call->ahead--;
    }
    /* The engine takes it from here: dispatches it, or fences it (failed). */
    rio__engine_admit_locked(c, r);
    /* The engine looks for work at each completion anyway: wake it only
     * when it may have a free op slot. */
    bool kick = c->inflight_ops < (uint64_t)c->npaths * c->o.depth;
    pthread_mutex_unlock(&c->mu);
    if (up)
        rio__t_put_abort(c->t, up);
    get_plan_drop(c, &g);
    if (ret < 0)
        rio__engine_fail_req(c, r, ret);
    else if (empty)
        rio__engine_fail_req(c, r, 0); /* an empty object: moved, with success */
    else if (kick)
        rio__engine_kick(c);
}

/*
 * A call worker (rio_batch), the caller among them once it is done hashing:
 * prepares the deferred requests in order (the engine sends what is
 * prepared), at most call->ahead_max of them held at once, and commits each
 * PUT as soon as it is fenced and hashed, while the batch's other requests
 * still move; so a batch of small durable objects overlaps its opens and
 * commits (creates, fsyncs, renames, round trips) with its transfers
 * instead of running them before the first and after the last one.
 * Committing comes first: it is what frees the window.
 */
static void worker_loop(struct rio_client *c, struct rio__call *call)
{
    pthread_mutex_lock(&c->mu);
    for (;;) {
        struct rio__req *r = call->ready_head;
        if (r) {
            call->ready_head = r->cnext;
            if (!call->ready_head)
                call->ready_tail = NULL;
            bool due = commit_due(r);
            void *abandoned = NULL;
            if (!due && r->type == RIO_OP_PUT) {
                abandoned = r->upload; /* failed: its temporary goes now */
                r->upload = NULL;
            }
            pthread_mutex_unlock(&c->mu);
            if (due)
                r->result = put_commit(c, r, NULL);
            if (abandoned)
                rio__t_put_abort(c->t, abandoned);
            pthread_mutex_lock(&c->mu);
            r->committed = due;
            if (r->ahead) {
                r->ahead = false; /* the window's slot: this thread takes it next */
                call->ahead--;
            }
            continue;
        }
        if (call->open_next < call->nreq && call->ahead < call->ahead_max) {
            r = &call->reqs[call->open_next++];
            if (!r->opening)
                continue;
            bool todo = !(r->decided && r->status < 0);
            /* Not on the active list yet, so no engine timer watches it:
             * its deadline and the call's cancel are checked here. */
            int late = 0;
            if (todo && call->cancel && atomic_load(&call->cancel->fired))
                late = RIO_ECANCELED;
            else if (todo && rio__now_ns() >= r->deadline_ns)
                late = RIO_EDEADLINE;
            if (late) {
                r->decided = true;
                r->status = late;
                atomic_store(&r->stop_hashing, 1);
                todo = false;
            }
            r->ahead = true;
            call->ahead++;
            pthread_mutex_unlock(&c->mu);
            prepare_one(c, call, r, todo);
            pthread_mutex_lock(&c->mu);
            continue;
        }
        /* Every request fenced and hashed: each was queued. */
        if (call->remaining == 0 && call->hashing_over)
            break;
        if (!rio__call_progress_locked(c, call))
            pthread_cond_wait(&call->cond, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
}

static void call_worker(void *arg)
{
    struct rio__call *call = arg;
    worker_loop(call->c, call);
}

/* How many of a call's requests its workers have to do, if it runs
 * pipelined: every deferred one (a batch's GET lookups, PUT opens) and, with
 * two PUTs or more and no descriptor asked for, every PUT's commit; 0 when
 * it does not. */
static unsigned pipeline_work(const struct rio__call *call, const struct rio_desc *out_desc)
{
    unsigned puts = 0, deferred = 0;
    for (unsigned i = 0; i < call->nreq; i++) {
        deferred += call->reqs[i].opening;
        puts += call->reqs[i].type == RIO_OP_PUT && call->reqs[i].result >= 0;
    }
    if (!deferred && (puts < 2 || out_desc))
        return 0;
    return puts > deferred ? puts : deferred;
}

/* Finish every request after the fence: commit PUTs (those the pipeline did
 * not), copy staged GETs, or abort. Sets r->result. */
static void finish_reqs(struct rio_client *c, struct rio__call *call, struct rio_desc *out_desc)
{
    unsigned due = 0;
    for (unsigned i = 0; i < call->nreq; i++)
        due += commit_due(&call->reqs[i]) && !call->reqs[i].committed;
    bool parallel = due > 1 && !out_desc;
    if (parallel) {
        struct commit_job j = {.c = c, .call = call};
        meta_parallel(c, call->nreq, due, commit_one, &j);
    }
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (r->result < 0) {
            /* failed before it reached the engine (or while hashing) */
        } else if (r->status < 0) {
            r->result = r->status;
        } else if (r->type == RIO_OP_PUT) {
            if (!parallel && !r->committed)
                r->result = put_commit(c, r, out_desc);
        } else {
            if (r->user && r->size) {
                uint64_t t0 = rio__now_ns();
                memcpy(r->user, r->staging, r->size);
                call->copy_ns += rio__now_ns() - t0;
            }
            r->result = (int64_t)r->size;
        }
        if (r->type == RIO_OP_PUT && r->upload) {
            rio__t_put_abort(c->t, r->upload);
            r->upload = NULL;
        }
    }
}

/* Admit a prepared call: deadlines, latency slots, hand it to the engine. */
static int start_call(struct rio_client *c, struct rio__call *call, const struct rio_call *opt)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        /* A reader lives as long as its consumer reads: only an explicit
         * deadline bounds it (op timeouts still bound every chunk). */
        r->deadline_ns =
            r->ring && !(opt && opt->deadline_ms) ? UINT64_MAX : deadline_of(c, opt, call->t0);
        total += r->nchunks;
        call->progress_total += r->size;
    }
    if (total) {
        call->lat = rio__calloc(total, sizeof(uint64_t));
        if (!call->lat)
            return -ENOMEM;
        call->lat_cap = total;
    }
    call->lat_want = total;
    return rio__engine_submit(c, call);
}

/*
 * Run a prepared call: admit, hash, wait for the fence, finish, stats.
 * Requests whose preparation failed carry result < 0 and decided = true.
 */
static int run_call(struct rio_client *c, struct rio__call *call, const struct rio_call *opt,
                    struct rio_desc *out_desc)
{
    struct rio__job job;

    /* Set before the engine sees the call: it queues what it fences. */
    unsigned work = pipeline_work(call, out_desc);
    call->pipeline = work > 0;
    unsigned max = meta_threads(c), workers = work < max ? work : max;
    if (call->pipeline) {
        /* Enough held to keep every op slot busy while as many commits
         * run, and the transport's caches (open files) never outrun. */
        uint64_t ahead = (uint64_t)c->npaths * c->o.depth + 2ull * workers;
        call->ahead_max = ahead > RIO__AHEAD_MAX ? RIO__AHEAD_MAX : (unsigned)ahead;
    }
    int ret = start_call(c, call, opt);
    if (ret < 0)
        return ret;
    if (call->pipeline)
        rio__pool_share(&c->meta_pool, &job, workers ? workers - 1 : 0, call_worker, call);
    hash_puts(c, call);
    if (call->pipeline) {
        pthread_mutex_lock(&c->mu);
        call->hashing_over = true;
        pthread_cond_broadcast(&call->cond);
        pthread_mutex_unlock(&c->mu);
        worker_loop(c, call);
        rio__pool_reclaim(&c->meta_pool, &job);
    } else {
        rio__engine_wait(c, call);
    }
    finish_reqs(c, call, out_desc);
    return 0;
}

static void call_stats(struct rio_client *c, struct rio__call *call, const struct rio_call *opt)
{
    if (opt && opt->stats)
        rio__stats_fill(c, call, opt->stats);
}

/* A call that never reached the engine: abort what was opened, free it. */
static void call_abandon(struct rio_client *c, struct rio__call *call)
{
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (r->upload)
            rio__t_put_abort(c->t, r->upload);
        r->upload = NULL;
    }
    rio__call_free(call);
}

/*
 * Whole requests run again, at most RIO__REPLANS_MAX times each: a GET whose
 * key a PUT replaced while it read (RIO_EGENERATION, when the caller did not
 * ask for one generation) is planned again from a fresh lookup, since its
 * chunks must all come from one generation; a PUT whose upload the server
 * lost before the commit (RIO_ENOUPLOAD: nothing was written) starts over
 * from the caller's buffer, which is still there.
 */
#define RIO__REPLANS_MAX 4u

static bool replan_due(int type, int64_t result, const struct rio_call *opt)
{
    if (type == RIO_OP_GET)
        return result == RIO_EGENERATION && !(opt && opt->expect_generation);
    return type == RIO_OP_PUT && result == RIO_ENOUPLOAD;
}

/* Stats of a call run again: the earlier runs' failed attempts, and the
 * count of runs again. */
struct replan_acc {
    uint64_t retries[RIO_CLASS__COUNT];
    uint64_t replans;
};

static void replan_note(struct replan_acc *a, const struct rio_call *opt)
{
    a->replans++;
    if (opt && opt->stats)
        for (int k = 0; k < RIO_CLASS__COUNT; k++)
            a->retries[k] += opt->stats->retries[k];
}

static void replan_stats(const struct replan_acc *a, const struct rio_call *opt)
{
    if (!opt || !opt->stats)
        return;
    opt->stats->replans += a->replans;
    for (int k = 0; k < RIO_CLASS__COUNT; k++) {
        opt->stats->retries[k] += a->retries[k];
        opt->stats->retries_total += a->retries[k];
    }
}

static int put_once(struct rio_client *c, const char *key, const void *buf, size_t len,
                    const struct rio_call *opt, struct rio_desc *out_desc);
static int64_t get_once(struct rio_client *c, const char *key, void *buf, size_t cap,
                        const struct rio_call *opt);

int rio_put(struct rio_client *c, const char *key, const void *buf, size_t len,
            const struct rio_call *opt, struct rio_desc *out_desc)
{
    struct replan_acc acc = {0};
    int ret;

    for (;;) {
        ret = put_once(c, key, buf, len, opt, out_desc);
        if (!replan_due(RIO_OP_PUT, ret, opt) || acc.replans >= RIO__REPLANS_MAX)
            break;
        replan_note(&acc, opt);
    }
    replan_stats(&acc, opt);
    return ret;
}

int64_t rio_get(struct rio_client *c, const char *key, void *buf, size_t cap,
                const struct rio_call *opt)
{
    struct replan_acc acc = {0};
    int64_t ret;

    for (;;) {
        ret = get_once(c, key, buf, cap, opt);
        if (!replan_due(RIO_OP_GET, ret, opt) || acc.replans >= RIO__REPLANS_MAX)
            break;
        replan_note(&acc, opt);
    }
    replan_stats(&acc, opt);
    return ret;
}

static int put_once(struct rio_client *c, const char *key, const void *buf, size_t len,
                    const struct rio_call *opt, struct rio_desc *out_desc)
{
    struct rio__call *call;
    int ret;

    if (!c)
        return RIO_EINVAL;
    if (opt && opt->stats)
        memset(opt->stats, 0, sizeof(*opt->stats));
    ret = call_new(c, 1, opt, &call);
    if (ret < 0)
        return ret;
    call_mark_start(c, call);
    struct rio__req *r = &call->reqs[0];
    ret = req_prepare_put(c, r, key, buf, len, false);
    if (ret < 0)
        goto err_call;
    ret = run_call(c, call, opt, out_desc);
    if (ret < 0)
        goto err_call;
    ret = (int)r->result;
    call_stats(c, call, opt);
    rio__call_release(c, call);
    return ret;
err_call:
    call_abandon(c, call);
    return ret;
}

static int64_t get_once(struct rio_client *c, const char *key, void *buf, size_t cap,
                        const struct rio_call *opt)
{
    struct rio__call *call;
    int ret;

    if (!c)
        return RIO_EINVAL;
    if (opt && opt->stats)
        memset(opt->stats, 0, sizeof(*opt->stats));
    ret = call_new(c, 1, opt, &call);
    if (ret < 0)
        return ret;
    call_mark_start(c, call);
    struct rio__req *r = &call->reqs[0];
    ret = req_prepare_get(c, call, r, key, buf, cap, opt ? opt->expect_generation : 0, false);
    if (ret < 0)
        goto err_call;
    ret = run_call(c, call, opt, NULL);
    if (ret < 0)
        goto err_call;
    int64_t res = r->result;
    call_stats(c, call, opt);
    rio__call_release(c, call);
    return res;
err_call:
    call_abandon(c, call);
    return ret;
}

static int64_t get_alloc_once(struct rio_client *c, const char *key, void **out,
                              const struct rio_call *opt);

int64_t rio_get_alloc(struct rio_client *c, const char *key, void **out, const struct rio_call *opt)
{
    struct replan_acc acc = {0};
    int64_t ret;

    if (!out)
        return RIO_EINVAL;
    for (;;) {
        ret = get_alloc_once(c, key, out, opt);
        if (!replan_due(RIO_OP_GET, ret, opt) || acc.replans >= RIO__REPLANS_MAX)
            break;
        replan_note(&acc, opt);
    }
    replan_stats(&acc, opt);
    return ret;
}

static int64_t get_alloc_once(struct rio_client *c, const char *key, void **out,
                              const struct rio_call *opt)
{
    struct rio_desc d;
    int64_t ret;

    *out = NULL;
    memset(&d, 0, sizeof(d));
    ret = rio_stat(c, key, &d);
    if (ret < 0)
        return ret;
    rio_desc_cleanup(&d);
    /* The buffer is the caller's (free(3)), not the library's pool. A large
     * one is 2 MiB-aligned with huge pages advised: the transport's first
     * touch of it then faults once per 2 MiB, not once per 4 KiB. */
    void *buf = NULL;
    if (d.size >= (2u << 20)) {
        if (posix_memalign(&buf, 2u << 20, d.size) != 0)
            buf = NULL;
        else
            (void)madvise(buf, d.size, MADV_HUGEPAGE);
    } else {
        buf = malloc(d.size ? d.size : 1);
    }
    if (!buf)
        return -ENOMEM;
    struct rio_call local;
    if (opt)
        local = *opt;
    else
        memset(&local, 0, sizeof(local));
    if (!local.expect_generation)
        local.expect_generation = d.generation;
    ret = get_once(c, key, buf, d.size, &local);
    if (ret < 0) {
        free(buf);
        return ret;
    }
    *out = buf;
    return ret;
}

int rio_stat(struct rio_client *c, const char *key, struct rio_desc *out)
{
    if (!c || !out)
        return RIO_EINVAL;
    int ret = key_check(key);
    if (ret < 0)
        return ret;
    struct rio__meta m;
    rio__meta_for_client(&m, c);
    memset(out, 0, sizeof(*out));
    return client_lookup(c, &m, key, out);
}

int rio_delete(struct rio_client *c, const char *key)
{
    if (!c)
        return RIO_EINVAL;
    int ret = key_check(key);
    if (ret < 0)
        return ret;
    struct rio__meta m;
    rio__meta_for_client(&m, c);
    return rio__meta_remove(c, &m, key);
}

struct prep_job {
    struct rio_client *c;
    struct rio__call *call;
    struct rio_op *ops;
    const struct rio_call *opt;
    bool defer_open; /* PUTs: the uploads open while the batch runs */
    bool defer_get;  /* GETs: looked up while the batch runs */
};

/* Prepare op i of a batch (a lookup or an upload open); one that fails,
 * fails alone and the others still run. */
static void prep_one(void *arg, unsigned i)
{
    struct prep_job *j = arg;
    struct rio__req *r = &j->call->reqs[i];
    const struct rio_op *op = &j->ops[i];
    int ret;

    r->op_index = (int)i;
    if (op->type == RIO_OP_GET)
        ret = req_prepare_get(j->c, j->call, r, op->key, op->buf, op->len,
                              j->opt ? j->opt->expect_generation : 0, j->defer_get);
    else if (op->type == RIO_OP_PUT)
        ret = req_prepare_put(j->c, r, op->key, op->buf, op->len, j->defer_open);
    else
        ret = RIO_EINVAL;
    if (ret < 0) {
        r->result = ret;
        r->decided = true;
        r->status = ret;
        r->nchunks = 0;
    }
}

static int batch_once(struct rio_client *c, struct rio_op *ops, unsigned n,
                      const struct rio_call *opt);

/* A batch's GETs and PUTs to run again (replan_due) go again together, as a
 * batch of their own, until none is due or RIO__REPLANS_MAX rounds ran. */
int rio_batch(struct rio_client *c, struct rio_op *ops, unsigned n, const struct rio_call *opt)
{
    struct replan_acc acc = {0};
    struct rio_op *again = NULL;
    unsigned *idx = NULL;
    int ok;

    ok = batch_once(c, ops, n, opt);
    while (ok >= 0 && acc.replans < RIO__REPLANS_MAX) {
        unsigned k = 0;
        for (unsigned i = 0; i < n; i++)
            k += replan_due(ops[i].type, ops[i].result, opt);
        if (!k)
            break;
        if (!again) {
            again = rio__calloc(n, sizeof(*again));
            idx = rio__calloc(n, sizeof(*idx));
            if (!again || !idx)
                break; /* the results stand as they are */
        }
        k = 0;
        for (unsigned i = 0; i < n; i++)
            if (replan_due(ops[i].type, ops[i].result, opt)) {
                again[k] = ops[i];
                idx[k++] = i;
            }
        /* The batch's stats stay those of its first run, with the failed
         * attempts of the runs again added. */
        struct rio_stats sst;
        struct rio_call sub;
        if (opt)
            sub = *opt;
        else
            memset(&sub, 0, sizeof(sub));
        sub.stats = opt && opt->stats ? &sst : NULL;
        acc.replans += k;
        int r = batch_once(c, again, k, &sub);
        if (r < 0)
            break;
        if (sub.stats)
            for (int cl = 0; cl < RIO_CLASS__COUNT; cl++)
                acc.retries[cl] += sst.retries[cl];
        for (unsigned j = 0; j < k; j++) {
            ops[idx[j]].result = again[j].result;
            ops[idx[j]].generation = again[j].generation;
            ok += again[j].result >= 0;
        }
    }
    rio__free(again);
    rio__free(idx);
    replan_stats(&acc, opt);
    return ok;
}

static int batch_once(struct rio_client *c, struct rio_op *ops, unsigned n,
                      const struct rio_call *opt)
{
    struct rio__call *call;
    int ret;

    if (!c || (!ops && n))
        return RIO_EINVAL;
    if (opt && opt->stats)
        memset(opt->stats, 0, sizeof(*opt->stats));
    if (n == 0)
        return 0;
    ret = call_new(c, n, opt, &call);
    if (ret < 0)
        return ret;
    call_mark_start(c, call);
    /* With two PUTs or more, their uploads open on the call's workers while
     * the batch runs (run_call), and so do the lookups of two GETs or more;
     * what is not deferred is prepared here, on up to meta_threads(). */
    unsigned puts = 0, gets = 0;
    for (unsigned i = 0; i < n; i++) {
        puts += ops[i].type == RIO_OP_PUT;
        gets += ops[i].type == RIO_OP_GET;
    }
    struct prep_job j = {.c = c,
                         .call = call,
                         .ops = ops,
                         .opt = opt,
                         .defer_open = puts > 1,
                         .defer_get = gets > 1};
    unsigned now = (j.defer_open ? 0 : puts) + (j.defer_get ? 0 : gets);
    meta_parallel(c, n, now ? now : 1, prep_one, &j);
    ret = run_call(c, call, opt, NULL);
    if (ret < 0) {
        call_abandon(c, call);
        return ret;
    }
    int ok = 0;
    for (unsigned i = 0; i < n; i++) {
        struct rio__req *r = &call->reqs[i];
        ops[i].result = r->result;
        ops[i].generation = r->generation;
        if (r->result >= 0)
            ok++;
    }
    call_stats(c, call, opt);
    rio__call_release(c, call);
    return ok;
}

/* ------------------------------------------------------------- reader */

struct rio_reader {
    struct rio__stream st; /* first: the client's list */
    struct rio_client *c;  /* NULL once the client is destroyed */
    struct rio__call *call;
    struct rio__req *r;
    struct rio_stats *stats;
    uint64_t next; /* chunk being consumed */
    uint64_t pos;  /* bytes of it already handed out */
    int err;
};

int rio_reader_open(struct rio_client *c, const char *key, unsigned prefetch,
                    const struct rio_call *opt, struct rio_reader **out)
{
    struct rio_reader *rd;
    struct rio__call *call;
    int ret;

    if (!c || !out)
        return RIO_EINVAL;
    *out = NULL;
    rd = rio__calloc(1, sizeof(*rd));
    if (!rd)
        return -ENOMEM;
    ret = call_new(c, 1, opt, &call);
    if (ret < 0)
        goto err_rd;
    call_mark_start(c, call);
    struct rio__req *r = &call->reqs[0];
    r->prefetch = prefetch ? prefetch : c->o.depth * c->npaths;
    ret = req_prepare_get(c, call, r, key, NULL, 0, opt ? opt->expect_generation : 0, false);
    if (ret < 0)
        goto err_call;
    ret = start_call(c, call, opt);
    if (ret < 0)
        goto err_call;
    rd->c = c;
    rd->call = call;
    rd->r = r;
    rd->stats = opt ? opt->stats : NULL;
    if (rd->stats)
        memset(rd->stats, 0, sizeof(*rd->stats));
    stream_link(c, &rd->st, RIO__STREAM_READER);
    *out = rd;
    return 0;
err_call:
    call_abandon(c, call);
err_rd:
    rio__free(rd);
    return ret;
}

const struct rio_desc *rio_reader_desc(const struct rio_reader *rd)
{
    return rd && rd->r ? &rd->r->desc : NULL;
}

/* Wait until the chunk under the cursor is verified; point at its unread
 * bytes. Returns 1 with the bytes set, 0 at the end, or an error. */
static int reader_peek(struct rio_reader *rd, const uint8_t **p, size_t *n)
{
    struct rio__req *r = rd->r;
    if (rd->err)
        return rd->err;
    if (rd->next >= r->nchunks)
        return 0;
    struct rio__chunk *ch = &r->chunks[rd->next];
    pthread_mutex_lock(&rd->c->mu);
    while (ch->state != CH_DONE && !(r->decided && r->status < 0))
        if (!rio__call_progress_locked(rd->c, rd->call))
            pthread_cond_wait(&rd->call->cond, &rd->c->mu);
    bool ok = ch->state == CH_DONE;
    int status = r->status;
    pthread_mutex_unlock(&rd->c->mu);
    if (!ok) {
        rd->err = status < 0 ? status : RIO_EPROTO;
        return rd->err;
    }
    uint64_t off = rd->next * r->chunk_size;
    uint64_t clen = r->size - off < r->chunk_size ? r->size - off : r->chunk_size;
    *p = r->ring + (rd->next % r->prefetch) * r->chunk_size + rd->pos;
    *n = (size_t)(clen - rd->pos);
    return 1;
}

/* Hand n bytes of the current chunk out; a finished chunk frees its slot
 * for the chunk prefetch places ahead. */
static void reader_consume(struct rio_reader *rd, size_t n, size_t avail)
{
    rd->pos += n;
    if (n < avail)
        return;
    rd->next++;
    rd->pos = 0;
    atomic_store(&rd->r->window, rd->next + rd->r->prefetch);
    rio__engine_kick(rd->c);
}

int64_t rio_reader_read(struct rio_reader *rd, void *buf, size_t n)
{
    const uint8_t *p;
    size_t avail;
    if (!rd || (!buf && n))
        return RIO_EINVAL;
    int ret = reader_peek(rd, &p, &avail);
    if (ret <= 0)
        return ret;
    size_t k = n < avail ? n : avail;
    memcpy(buf, p, k);
    reader_consume(rd, k, avail);
    return (int64_t)k;
}

/* End the reader's call: cancel what is left (err) unless it was read to
 * the end, fence it, fill the stats, release it. Returns the outcome. */
static int reader_end(struct rio_reader *rd, int err)
{
    struct rio_client *c = rd->c;
    struct rio__req *r = rd->r;
    bool complete = rd->next >= r->nchunks && !rd->err;
    stream_unlink(c, &rd->st);
    if (!complete)
        rio__engine_fail_req(c, r, err);
    /* The fence: nothing of the reader is in flight once this returns. */
    rio__engine_wait(c, rd->call);
    int ret = rd->err ? rd->err : complete ? 0 : err;
    r->result = ret < 0 ? ret : (int64_t)r->size;
    if (rd->stats)
        rio__stats_fill(c, rd->call, rd->stats);
    rio__call_release(c, rd->call);
    rd->call = NULL;
    rd->r = NULL;
    rd->c = NULL;
    return ret;
}

/* The client is being destroyed: end the reader now; later reads and the
 * close answer RIO_ECLOSED. */
static void reader_invalidate(struct rio_reader *rd)
{
    reader_end(rd, RIO_ECLOSED);
    rd->err = RIO_ECLOSED;
}

int rio_reader_close(struct rio_reader *rd)
{
    if (!rd)
        return 0;
    int ret = rd->c ? reader_end(rd, RIO_ECANCELED) : RIO_ECLOSED;
    rio__free(rd);
    return ret;
}

int64_t rio_get_stream(struct rio_client *c, const char *key, unsigned prefetch,
                       int (*cb)(void *arg, const void *data, size_t len), void *arg,
                       const struct rio_call *opt)
{
    struct rio_reader *rd;
    const uint8_t *p;
    size_t n;
    int64_t total = 0;
    int ret;

    unsigned replans = 0;

    if (!cb)
        return RIO_EINVAL;
    for (;; replans++) {
        ret = rio_reader_open(c, key, prefetch, opt, &rd);
        if (ret < 0)
            return ret;
        /* Before the first byte is handed out, a PUT that replaced the key
         * costs nothing: start over on its generation. */
        ret = reader_peek(rd, &p, &n);
        if (!replan_due(RIO_OP_GET, ret, opt) || replans >= RIO__REPLANS_MAX)
            break;
        rio_reader_close(rd);
    }
    for (; ret > 0; ret = reader_peek(rd, &p, &n)) {
        int stop = cb(arg, p, n);
        if (stop) {
            rio_reader_close(rd);
            return stop < 0 ? stop : RIO_ECANCELED;
        }
        reader_consume(rd, n, n);
        total += (int64_t)n;
    }
    int cret = rio_reader_close(rd);
    if (opt && opt->stats)
        opt->stats->replans += replans;
    if (ret < 0)
        return ret;
    return cret < 0 ? cret : total;
}

/* ------------------------------------------------------------- writer */

/*
 * A streaming PUT: one upload, fed chunk by chunk. Chunk k is filled in slot
 * k % nslots; when full it is hashed (xxh3), handed to the engine as a call
 * of its own (a "part" request: the object's chunk k, retried and verified
 * like any chunk), then folded into the stream MD5 while it is in flight.
 * A slot is refilled only after its previous chunk's call is fenced, so no
 * attempt can still read the bytes being overwritten. The commit, with the
 * final size, happens at close.
 */
struct wslot {
    uint8_t *buf;
    size_t cap;
    uint64_t fill;
    struct rio__call *call; /* in flight, or NULL */
};

struct rio_writer {
    struct rio__stream st; /* first: the client's list */
    struct rio_client *c;  /* NULL once the client is destroyed */
    char *key;
    void *upload;
    uint64_t declared; /* RIO_SIZE_UNKNOWN or the exact size */
    uint64_t chunk_size, total, nchunks;
    uint64_t *xxh;
    uint64_t xxh_cap;
    struct rio_md5 md5;
    bool want_md5;
    unsigned nslots;
    struct wslot *slots;
    int err;
    struct rio_call opt; /* per part: deadline set from the stream's */
    uint64_t t0, deadline_ns, wait_ns;
    struct rio_stats *stats;
    struct rio__call *acc; /* with stats: every part's figures, merged */
};

/* The bounds of the writer's metadata: the stream's deadline and token;
 * failed tries counted with its figures. */
static void writer_meta(const struct rio_writer *w, struct rio__meta *m)
{
    m->deadline_ns = w->deadline_ns;
    m->cancel = w->opt.cancel;
    m->call = w->acc;
}

static void writer_fail(struct rio_writer *w, int err)
{
    if (!w->err)
        w->err = err;
}

/* Fence slot s's chunk and fold its outcome in. */
static void writer_reap(struct rio_writer *w, struct wslot *s)
{
    if (!s->call)
        return;
    struct rio_client *c = w->c;
    uint64_t t0 = rio__now_ns();
    rio__engine_wait(c, s->call);
    w->wait_ns += rio__now_ns() - t0;
    struct rio__req *r = &s->call->reqs[0];
    r->result = r->status < 0 ? r->status : (int64_t)r->size;
    if (r->status < 0)
        writer_fail(w, r->status);
    if (w->acc && rio__call_merge(w->acc, s->call) < 0)
        writer_fail(w, -ENOMEM);
    rio__call_release(c, s->call);
    s->call = NULL;
    s->fill = 0;
}

/* Send slot s's bytes as the object's next chunk. */
static int writer_launch(struct rio_writer *w, struct wslot *s)
{
    struct rio_client *c = w->c;
    uint64_t idx = w->nchunks;
    struct rio__call *call;
    int ret;

    if (c->t->put_chunks_max && idx >= c->t->put_chunks_max)
        return RIO_ETOOBIG;
    ret = rio__u64_reserve(&w->xxh, &w->xxh_cap, w->nchunks, w->nchunks + 1);
    if (ret < 0)
        return ret;
    uint64_t now = rio__now_ns();
    if (now >= w->deadline_ns)
        return RIO_EDEADLINE;
    if (w->opt.cancel && atomic_load(&w->opt.cancel->fired))
        return RIO_ECANCELED;
    uint64_t left_ms = (w->deadline_ns - now + 999999) / 1000000;
    w->opt.deadline_ms = left_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)left_ms;

    uint64_t th = rio__now_ns();
    uint64_t h = rio__xxh3(s->buf, (size_t)s->fill);
    uint64_t hash_ns = rio__now_ns() - th;
    ret = call_new(c, 1, &w->opt, &call);
    if (ret < 0)
        return ret;
    call_mark_start(c, call);
    struct rio__req *r = &call->reqs[0];
    r->type = RIO_OP_PUT;
    r->key = rio__strdup(w->key);
    r->xxh = rio__malloc(sizeof(uint64_t));
    r->chunks = rio__calloc(1, sizeof(*r->chunks));
    if (!r->key || !r->xxh || !r->chunks) {
        rio__call_free(call);
        return -ENOMEM;
    }
    r->xxh[0] = h;
    r->size = s->fill;
    r->chunk_size = w->chunk_size;
    r->nchunks = 1;
    r->base = idx;
    r->data = s->buf;
    r->upload = w->upload;
    atomic_store(&r->hashed, 1);
    ret = start_call(c, call, &w->opt);
    if (ret < 0) {
        rio__call_free(call);
        return ret;
    }
    s->call = call;
    w->xxh[idx] = h;
    w->nchunks++;
    /* The MD5 runs while the chunk is on its way (the buffer is only read). */
    if (w->want_md5) {
        th = rio__now_ns();
        if (rio__md5_update(&w->md5, s->buf, (size_t)s->fill) < 0)
            writer_fail(w, -ENOMEM);
        hash_ns += rio__now_ns() - th;
    }
    if (w->acc)
        w->acc->hash_ns += hash_ns;
    return 0;
}

/* The slot the next byte goes to, with its previous chunk fenced. */
static struct wslot *writer_slot(struct rio_writer *w)
{
    struct wslot *s = &w->slots[w->nchunks % w->nslots];
    writer_reap(w, s);
    if (w->err)
        return NULL;
    if (!s->buf) {
        s->buf = rio__stage_get(w->c, (size_t)w->chunk_size, &s->cap);
        if (!s->buf) {
            writer_fail(w, -ENOMEM);
            return NULL;
        }
    }
    return s;
}

/* Account n bytes just placed in s; send it when full. */
static int writer_added(struct rio_writer *w, struct wslot *s, uint64_t n)
{
    s->fill += n;
    w->total += n;
    if (w->declared != RIO_SIZE_UNKNOWN && w->total > w->declared)
        writer_fail(w, RIO_EINVAL); /* more bytes than declared */
    else if (s->fill == w->chunk_size) {
        int ret = writer_launch(w, s);
        if (ret < 0)
            writer_fail(w, ret);
    }
    return w->err;
}

/* Give back what the writer holds of its client: slot buffers, stats. */
static void writer_release(struct rio_writer *w)
{
    for (unsigned i = 0; w->slots && i < w->nslots; i++)
        if (w->slots[i].buf) {
            rio__stage_put(w->c, w->slots[i].buf, w->slots[i].cap);
            w->slots[i].buf = NULL;
        }
    if (w->acc)
        rio__call_free(w->acc);
    w->acc = NULL;
}

static void writer_free(struct rio_writer *w)
{
    if (w->c)
        writer_release(w);
    rio__free(w->slots);
    rio__free(w->xxh);
    rio__free(w->key);
    rio__md5_cleanup(&w->md5);
    rio__cancel_unref(w->opt.cancel);
    rio__free(w);
}

int rio_writer_open(struct rio_client *c, const char *key, uint64_t size, unsigned slots,
                    const struct rio_call *opt, struct rio_writer **out)
{
    struct rio_writer *w;
    int ret;

    if (!c || !out)
        return RIO_EINVAL;
    *out = NULL;
    ret = key_check(key);
    if (ret < 0)
        return ret;
    if (size == RIO_SIZE_UNKNOWN && !rio__t_has_cap(c->t, RIO_CAP_STREAM_PUT))
        return RIO_ENOTSUP;
    w = rio__calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->c = c;
    w->declared = size;
    w->chunk_size = put_chunk_size(c, size);
    w->nslots = slots ? slots : c->o.depth * c->npaths;
    if (w->nslots < 2)
        w->nslots = 2;
    if (opt)
        w->opt = *opt;
    rio__cancel_ref(w->opt.cancel); /* writer_launch reads it until close */
    w->stats = w->opt.stats;
    w->opt.stats = NULL; /* the parts' figures are merged into acc */
    w->opt.progress = NULL;
    w->opt.flags = 0;
    w->t0 = rio__now_ns();
    w->deadline_ns = deadline_of(c, opt, w->t0);
    w->want_md5 = etag_wanted(c);
    w->key = rio__strdup(key);
    w->slots = rio__calloc(w->nslots, sizeof(*w->slots));
    if (!w->key || !w->slots) {
        ret = -ENOMEM;
        goto err;
    }
    if (w->stats) {
        memset(w->stats, 0, sizeof(*w->stats));
        ret = call_new(c, 1, opt, &w->acc);
        if (ret < 0)
            goto err;
        call_mark_start(c, w->acc);
        w->acc->reqs[0].type = RIO_OP_PUT;
    }
    if (w->want_md5) {
        ret = rio__md5_init(&w->md5);
        if (ret < 0)
            goto err;
    }
    struct rio__meta m;
    writer_meta(w, &m);
    ret = rio__meta_put_open(c, &m, key, size, w->chunk_size, &w->upload);
    if (ret < 0)
        goto err;
    stream_link(c, &w->st, RIO__STREAM_WRITER);
    *out = w;
    return 0;
err:
    writer_free(w);
    return ret;
}

int rio_writer_write(struct rio_writer *w, const void *buf, size_t n)
{
    if (!w || (!buf && n))
        return RIO_EINVAL;
    const uint8_t *p = buf;
    while (n && !w->err) {
        struct wslot *s = writer_slot(w);
        if (!s)
            break;
        uint64_t k = w->chunk_size - s->fill;
        if (k > n)
            k = n;
        memcpy(s->buf + s->fill, p, (size_t)k);
        p += k;
        n -= (size_t)k;
        writer_added(w, s, k);
    }
    return w->err;
}

/* Fence every slot; after an error, cancel what is in flight first. */
static void writer_drain(struct rio_writer *w)
{
    for (unsigned i = 0; i < w->nslots; i++) {
        /* oldest first: slot order from the next chunk's */
        struct wslot *s = &w->slots[(w->nchunks + i) % w->nslots];
        if (s->call && w->err)
            rio__engine_fail_req(w->c, &s->call->reqs[0], RIO_ECANCELED);
        writer_reap(w, s);
    }
}

/* The stream's figures: every part merged, over the time since open. When
 * the writer seldom waited for a free slot, the stream's source was slower
 * than the transfer, and the verdict says so. */
static void writer_stats(struct rio_writer *w)
{
    if (!w->stats || !w->acc)
        return;
    struct rio__req *r = &w->acc->reqs[0];
    r->size = w->total;
    r->result = w->err ? w->err : 0;
    rio__stats_fill(w->c, w->acc, w->stats);
    struct rio_stats *st = w->stats;
    if (w->err == 0 && st->elapsed_ns && w->wait_ns * 10 < st->elapsed_ns) {
        st->verdict = RIO_VERDICT_NONE;
        snprintf(st->verdict_text, sizeof(st->verdict_text),
                 "source-bound: the writer waited for a free slot %.0f%% of %.0f ms; the "
                 "stream's input is slower than the transfer",
                 100.0 * (double)w->wait_ns / (double)st->elapsed_ns, st->elapsed_ns / 1e6);
    }
}

/* The client is being destroyed: cancel and fence every part, abort the
 * upload, give the client's memory back; later calls answer RIO_ECLOSED. */
static void writer_invalidate(struct rio_writer *w)
{
    stream_unlink(w->c, &w->st);
    writer_fail(w, RIO_ECLOSED);
    writer_drain(w);
    rio__t_put_abort(w->c->t, w->upload);
    w->upload = NULL;
    writer_release(w);
    w->c = NULL;
    w->err = RIO_ECLOSED;
}

int rio_writer_close(struct rio_writer *w, struct rio_desc *out_desc)
{
    if (!w)
        return RIO_EINVAL;
    if (!w->c) {
        writer_free(w);
        return RIO_ECLOSED;
    }
    stream_unlink(w->c, &w->st);
    struct wslot *s = &w->slots[w->nchunks % w->nslots];
    if (!w->err && w->declared != RIO_SIZE_UNKNOWN && w->total != w->declared)
        writer_fail(w, RIO_EINVAL); /* fewer bytes than declared */
    if (!w->err && s->fill && !s->call) {
        int ret = writer_launch(w, s);
        if (ret < 0)
            writer_fail(w, ret);
    }
    writer_drain(w);
    int ret = w->err;
    uint64_t gen;
    struct rio__meta m;
    writer_meta(w, &m);
    if (ret == 0)
        ret = commit_upload(w->c, &m, w->key, w->upload, w->total, w->chunk_size, w->nchunks,
                            w->xxh, w->want_md5 ? &w->md5 : NULL, &gen, out_desc);
    else
        rio__t_put_abort(w->c->t, w->upload);
    w->upload = NULL;
    w->err = ret;
    writer_stats(w);
    writer_free(w);
    return ret;
}

void rio_writer_abort(struct rio_writer *w)
{
    if (!w)
        return;
    if (!w->c) {
        writer_free(w);
        return;
    }
    stream_unlink(w->c, &w->st);
    writer_fail(w, RIO_ECANCELED);
    writer_drain(w);
    rio__t_put_abort(w->c->t, w->upload);
    writer_stats(w);
    writer_free(w);
}

int rio_put_stream(struct rio_client *c, const char *key, uint64_t size, unsigned slots,
                   int64_t (*fill)(void *arg, void *buf, size_t cap), void *arg,
                   const struct rio_call *call, struct rio_desc *out_desc)
{
    struct rio_writer *w;
    if (!fill)
        return RIO_EINVAL;
    int ret = rio_writer_open(c, key, size, slots, call, &w);
    if (ret < 0)
        return ret;
    while (!w->err) {
        struct wslot *s = writer_slot(w);
        if (!s)
            break;
        int64_t n = fill(arg, s->buf + s->fill, (size_t)(w->chunk_size - s->fill));
        if (n < 0 || (uint64_t)n > w->chunk_size - s->fill) {
            writer_fail(w, n < 0 ? (int)n : RIO_EINVAL);
            break;
        }
        if (n == 0)
            break;
        writer_added(w, s, (uint64_t)n);
    }
    return rio_writer_close(w, out_desc);
}
