/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mock://NAME: an in-process model of a storage target reached over several
 * paths, for the engine's tests and the capacity model.
 *
 * Store. Every transport opened with the same NAME shares one store (like
 * clients of one server): a hash table of objects under its own mutex,
 * refcounted by the transports open on it and freed with the last one.
 * Generations come from a per-store counter, so a key's generation only ever
 * grows, even across a delete. Uploads collect chunks in a private buffer;
 * put_commit swaps the finished object in under the store mutex, so a reader
 * sees the old object or the new one, never a mix.
 *
 * Timing. One thread per transport plays the target. An op submitted at t
 * first queues at the shared storage service when disk > 0:
 *     svc_start = max(t, disk_free), disk_free = svc_start + len/D
 * (its svc_ns is disk_free - t; svc_lie=N reports N times that, a target
 * that lies, for the engine's clamp), then on its path:
 *     start = max(ready, path_free), path_free = start + len/R, finish = path_free + L
 * so a path with two or more ops queued is busy at exactly R. The thread
 * moves an op's bytes (READ data is copied into dst then, not at submit)
 * shortly before its finish and queues it for reap at its finish, and reap
 * calls complete() in the reaping thread.
 *
 * Serving ahead. A real transport moves the bytes while they arrive, so its
 * completion comes at the finish. This one thread copies for every path, so
 * when N paths finish at once (equal rails do, every round) the last would
 * be delivered N copies late, with its rail idle. So the thread serves an op
 * early by the copy time of every op due by then (each op's length over the
 * thread's own measured copy rate, halved for margin, at most
 * MOCK_LEAD_MAX_NS in all) and holds it in `ready` until its finish. An op
 * being served or held is moving: cancel changes nothing, as for any op
 * whose bytes are on their way.
 *
 * Faults are not the mock's: the registry always stacks the fault filter
 * (fault.c) over a mock, and the filter asks the mock's store only for a
 * generation change (rio__mock_genchange).
 *
 * Locks: t->mu guards the op state of one transport; s->mu guards a store,
 * its objects' refcounts and the uploads' refcounts and receipt records.
 * Order: t->mu before s->mu; g_stores_mu before nothing. Data is copied with
 * neither held (objects and uploads are pinned by a reference), and
 * complete() is always called with no lock held.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/key.h"
#include "core/list.h"
#include "core/url.h"
#include "railio.h"
#include "railio_mock.h"
#include "transport/contract.h"
#include "transport/fault.h"
#include "transport/mock.h"
#include "transport/opool.h"
#include "transport/transport.h"

#define MOCK_DEFAULT_DEPTH_CAP 1024u
#define MOCK_MAX_DEPTH_CAP (1u << 20)
#define MOCK_SLAB_OPS 64u
#define MOCK_BUCKETS0 64u
#define MOCK_GENCHANGE_XOR 0x5A
#define UPLOAD_MAGIC 0x6d6f636b75706c64ull
#define NS_PER_MS 1000000ull
#define NEVER UINT64_MAX
#define MOCK_LEAD_MAX_NS (50ull * NS_PER_MS) /* serving ahead: at most this early */
#define MOCK_COPY_BPS0 1e9                   /* its copy rate before the first measure */

/* ------------------------------------------------------------------ store */

struct mock_obj {
    struct mock_obj *next; /* hash chain, under s->mu */
    unsigned refs;         /* under s->mu: the store's link plus readers */
    uint64_t hash;
    uint64_t generation;
    uint64_t size, chunk_size, nchunks;
    uint64_t *xxh;
    uint8_t *data;
    char etag[48];
    size_t keylen;
    char key[];
};

struct mock_store {
    struct mock_store *next; /* g_stores list, under g_stores_mu */
    unsigned users;          /* transports open on it, under g_stores_mu */
    pthread_mutex_t mu;
    /* under mu */
    struct mock_obj **buckets;
    size_t nbuckets, nobjs;
    uint64_t last_gen;
    char name[];
};

struct mock_rx {
    uint64_t xxh; /* xxh3 of the bytes received for the chunk */
    uint64_t len; /* bytes received for it */
    bool ok;      /* received whole and matching what the client sent */
};

struct mock_upload {
    uint64_t magic;
    struct mock_store *s;
    unsigned refs; /* under s->mu: the caller's handle plus each WRITE op in flight */
    uint64_t size, chunk_size, nchunks;
    uint8_t *data;      /* written by WRITE ops (mock thread), pinned by refs */
    struct mock_rx *rx; /* under s->mu */
    char *key;
    /* A streaming upload (size RIO_SIZE_UNKNOWN): each chunk lands in its own
     * buffer; rx and parts grow (under s->mu) as chunk indexes arrive, and
     * the commit assembles the object from the final geometry. */
    bool stream;
    uint64_t ncap;
    uint8_t **parts;
    uint64_t put_if; /* put_expect's condition (0: none), decided at the swap */
};

static pthread_mutex_t g_stores_mu = PTHREAD_MUTEX_INITIALIZER;
static struct mock_store *g_stores;

static uint64_t key_hash(const char *key, size_t len)
{
    return rio__xxh3(key, len);
}

static uint64_t nchunks_of(uint64_t size, uint64_t chunk_size)
{
    return size / chunk_size + (size % chunk_size != 0);
}

static struct mock_obj *obj_alloc(const char *key, size_t keylen, uint64_t nchunks)
{
    struct mock_obj *o;

    if (nchunks > SIZE_MAX / sizeof(uint64_t))
        return NULL;
    o = rio__calloc(1, sizeof(*o) + keylen + 1);
    if (!o)
        return NULL;
    if (nchunks) {
        o->xxh = rio__malloc((size_t)nchunks * sizeof(uint64_t));
        if (!o->xxh) {
            rio__free(o);
            return NULL;
        }
    }
    memcpy(o->key, key, keylen);
    o->key[keylen] = '\0';
    o->keylen = keylen;
    o->hash = key_hash(key, keylen);
    o->nchunks = nchunks;
    o->refs = 1;
    return o;
}

static void obj_free(struct mock_obj *o)
{
    if (!o)
        return;
    rio__free(o->data);
    rio__free(o->xxh);
    rio__free(o);
}

/* Drop a reference; returns o when the caller must free it (outside the lock). */
static struct mock_obj *obj_unref_locked(struct mock_obj *o)
{
    return --o->refs == 0 ? o : NULL;
}

static void obj_unref(struct mock_store *s, struct mock_obj *o)
{
    pthread_mutex_lock(&s->mu);
    o = obj_unref_locked(o);
    pthread_mutex_unlock(&s->mu);
    obj_free(o);
}

/* The link that holds key (or the NULL at the end of its chain). */
static struct mock_obj **store_slot_locked(struct mock_store *s, const char *key, size_t keylen,
                                           uint64_t hash)
{
    struct mock_obj **pp = &s->buckets[hash & (s->nbuckets - 1)];
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->hash == hash && (*pp)->keylen == keylen && memcmp((*pp)->key, key, keylen) == 0)
            break;
    return pp;
}

/* The object under key with a reference for the caller, or NULL. */
static struct mock_obj *store_get(struct mock_store *s, const char *key, size_t keylen,
                                  uint64_t hash)
{
    struct mock_obj *o;

    pthread_mutex_lock(&s->mu);
    o = *store_slot_locked(s, key, keylen, hash);
    if (o)
        o->refs++;
    pthread_mutex_unlock(&s->mu);
    return o;
}

/* Growing is an optimisation: when it cannot allocate, chains get longer. */
static void store_maybe_grow_locked(struct mock_store *s)
{
    struct mock_obj **nb;
    size_t n, i;

    if (s->nobjs < s->nbuckets || s->nbuckets > SIZE_MAX / 2 / sizeof(*nb))
        return;
    n = s->nbuckets * 2;
    nb = rio__calloc(n, sizeof(*nb));
    if (!nb)
        return;
    for (i = 0; i < s->nbuckets; i++) {
        struct mock_obj *o = s->buckets[i];
        while (o) {
            struct mock_obj *next = o->next;
            o->next = nb[o->hash & (n - 1)];
            nb[o->hash & (n - 1)] = o;
            o = next;
        }
    }
    rio__free(s->buckets);
    s->buckets = nb;
    s->nbuckets = n;
}

/*
 * Publish o (its store reference already counted) under its key with the next
 * generation. Returns the object it replaced, whose store reference the caller
 * drops, or NULL.
 */
static struct mock_obj *store_publish_locked(struct mock_store *s, struct mock_obj *o)
{
    struct mock_obj **pp, *old;

    pp = store_slot_locked(s, o->key, o->keylen, o->hash);
    old = *pp;
    o->generation = ++s->last_gen;
    if (old) {
        o->next = old->next;
        *pp = o;
        old->next = NULL;
        return old;
    }
    o->next = NULL;
    *pp = o;
    s->nobjs++;
    store_maybe_grow_locked(s);
    return NULL;
}

static int store_open(const char *name, struct mock_store **out)
{
    struct mock_store *s;
    size_t len = strlen(name);
    int ret;

    pthread_mutex_lock(&g_stores_mu);
    for (s = g_stores; s; s = s->next)
        if (strcmp(s->name, name) == 0)
            break;
    if (s) {
        s->users++;
        pthread_mutex_unlock(&g_stores_mu);
        *out = s;
        return 0;
    }
    ret = -ENOMEM;
    s = rio__calloc(1, sizeof(*s) + len + 1);
    if (!s)
        goto err_unlock;
    s->buckets = rio__calloc(MOCK_BUCKETS0, sizeof(*s->buckets));
    if (!s->buckets)
        goto err_free;
    ret = -pthread_mutex_init(&s->mu, NULL);
    if (ret < 0)
        goto err_free;
    s->nbuckets = MOCK_BUCKETS0;
    memcpy(s->name, name, len + 1);
    s->users = 1;
    s->next = g_stores;
    g_stores = s;
    pthread_mutex_unlock(&g_stores_mu);
    *out = s;
    return 0;
err_free:
    rio__free(s->buckets);
    rio__free(s);
err_unlock:
    pthread_mutex_unlock(&g_stores_mu);
    return ret;
}

static void store_close(struct mock_store *s)
{
    struct mock_store **pp;
    size_t i;

    pthread_mutex_lock(&g_stores_mu);
    if (--s->users > 0) {
        pthread_mutex_unlock(&g_stores_mu);
        return;
    }
    for (pp = &g_stores; *pp != s; pp = &(*pp)->next)
        ;
    *pp = s->next;
    pthread_mutex_unlock(&g_stores_mu);

    for (i = 0; i < s->nbuckets; i++) {
        struct mock_obj *o = s->buckets[i];
        while (o) {
            struct mock_obj *next = o->next;
            obj_free(o);
            o = next;
        }
    }
    pthread_mutex_destroy(&s->mu);
    rio__free(s->buckets);
    rio__free(s);
}

static void upload_free(struct mock_upload *up)
{
    up->magic = 0;
    rio__free(up->data);
    rio__free(up->rx);
    for (uint64_t i = 0; up->parts && i < up->ncap; i++)
        rio__free(up->parts[i]);
    rio__free(up->parts);
    rio__free(up->key);
    rio__free(up);
}

static struct mock_upload *upload_unref_locked(struct mock_upload *up)
{
    return --up->refs == 0 ? up : NULL;
}

static void upload_unref(struct mock_upload *up)
{
    struct mock_store *s = up->s;

    pthread_mutex_lock(&s->mu);
    up = upload_unref_locked(up);
    pthread_mutex_unlock(&s->mu);
    if (up)
        upload_free(up);
}

/* -------------------------------------------------------------- transport */

enum { OP_FREE = 0, OP_QUEUED, OP_MOVING, OP_DONE };

/* What the mock thread does with an op when its time comes. */
enum {
    ACT_SERVE = 0, /* move the bytes */
    ACT_FAIL,      /* end with the preset res, touching nothing */
};

struct mock_op {
    struct rio_io *io;
    struct rio_list_node qnode; /* work list or done queue */
    struct mock_upload *up;     /* WRITE: a reference on the upload */
    uint8_t *wdst;              /* WRITE: where the chunk lands */
    uint64_t finish_ns;
    uint64_t seq;
    uint64_t svc_ns;
    uint64_t disk_start, disk_end; /* its slot at the storage service (0, 0: none) */
    uint64_t link_start, link_end; /* its slot on the path's link */
    uint64_t key_hash;
    int64_t res;
    size_t heap_idx;
    uint8_t state;
    uint8_t action;
};

struct mock_path {
    double rate;      /* bytes/s, 0 = unlimited */
    uint64_t lat_ns;  /* added to every op's finish */
    uint64_t free_ns; /* when the link has sent what it already carries */
    unsigned held;    /* ops submitted and not yet reaped */
};

struct mock_transport {
    struct rio_transport base; /* first: the engine's handle */
    struct mock_store *store;
    pthread_t thread;
    clockid_t cpu_clock;
    bool cpu_clock_ok;

    pthread_mutex_t mu;
    pthread_cond_t work_cv; /* the mock thread waits here */
    pthread_cond_t done_cv; /* reap waits here */

    /* under mu */
    bool stop;
    bool woken;
    /* rio__mock_reap_fail: the next reap_fail reaps return reap_err at once
     * and deliver nothing (what finished stays queued for a later reap). */
    uint64_t reap_fail;
    int reap_err;
    uint64_t reaps_failed;
    uint64_t refused;     /* submits answered -EAGAIN (a path at depth_cap) */
    uint64_t sleep_until; /* the mock thread's wake-up time while it sleeps, else 0 */
    struct mock_path path[RIO_MAX_PATHS];
    double disk_rate;
    double contend;   /* the service's rate is disk_rate / (1 + contend x (ops held - 1)) */
    uint64_t svc_lie; /* svc_lie=N: report N x each op's service time (0, 1: the truth) */
    uint64_t held;    /* ops submitted and not yet reaped, over every path */
    uint64_t disk_free_ns;
    unsigned depth_cap;
    struct mock_op **heap; /* in-flight ops by (finish_ns, seq) */
    size_t nheap, heap_cap;
    struct rio_opool pool; /* of struct mock_op */
    struct rio_list done;  /* of struct mock_op by qnode: finished, not reaped */
    struct rio_list ready; /* served ahead, by finish_ns: delivered at their finish */
    double copy_bps;       /* the mock thread's own copy rate (serving ahead) */
    uint64_t seq;
    struct rio_mock_counters ctr; /* the filter's fields stay 0 */
    /* rio_mock_desc_set: lookups of this key answer this descriptor as is */
    bool forge;
    struct rio_desc forged;
    uint64_t forged_xxh_len;
};

/* The mock, also through the fault filter stacked over it. */
static struct mock_transport *mock_cast(struct rio_transport *t)
{
    t = rio__fault_inner(t);
    return t && t->ops == &rio__mock_ops ? (struct mock_transport *)t : NULL;
}

int rio__mock_is(const struct rio_transport *t)
{
    return t && t->ops == &rio__mock_ops;
}

static uint64_t xfer_ns(uint64_t len, double rate)
{
    return rate > 0 ? (uint64_t)((double)len * 1e9 / rate) : 0;
}

static void ns_to_timespec(uint64_t ns, struct timespec *ts)
{
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* --- the heap of in-flight ops, ordered by (finish_ns, seq) --- */

static bool op_before(const struct mock_op *a, const struct mock_op *b)
{
    return a->finish_ns < b->finish_ns || (a->finish_ns == b->finish_ns && a->seq < b->seq);
}

static void heap_set(struct mock_transport *t, size_t i, struct mock_op *op)
{
    t->heap[i] = op;
    op->heap_idx = i;
}

static void heap_up(struct mock_transport *t, size_t i)
{
    struct mock_op *op = t->heap[i];
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!op_before(op, t->heap[parent]))
            break;
        heap_set(t, i, t->heap[parent]);
        i = parent;
    }
    heap_set(t, i, op);
}

static void heap_down(struct mock_transport *t, size_t i)
{
    struct mock_op *op = t->heap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= t->nheap)
            break;
        if (c + 1 < t->nheap && op_before(t->heap[c + 1], t->heap[c]))
            c++;
        if (!op_before(t->heap[c], op))
            break;
        heap_set(t, i, t->heap[c]);
        i = c;
    }
    heap_set(t, i, op);
}

/* The heap always has room: its capacity is the pool's size. */
static void heap_push(struct mock_transport *t, struct mock_op *op)
{
    t->heap[t->nheap] = op;
    op->heap_idx = t->nheap++;
    heap_up(t, op->heap_idx);
}

static void heap_remove(struct mock_transport *t, struct mock_op *op)
{
    size_t i = op->heap_idx;
    struct mock_op *last = t->heap[--t->nheap];
    if (last == op)
        return;
    heap_set(t, i, last);
    heap_down(t, i);
    heap_up(t, last->heap_idx);
}

/* --- the op pool: slabs that grow rarely, never per op --- */

/* One slab more, the heap grown first to hold every op of the pool (a heap
 * larger than the pool is harmless). */
static int pool_grow_locked(struct mock_transport *t)
{
    size_t cap = t->heap_cap + MOCK_SLAB_OPS;
    struct mock_op **heap = rio__realloc(t->heap, cap * sizeof(*heap));

    if (!heap)
        return -ENOMEM;
    t->heap = heap;
    t->heap_cap = cap;
    return rio__opool_grow(&t->pool);
}

static struct mock_op *op_get_locked(struct mock_transport *t)
{
    if (!t->pool.nfree && pool_grow_locked(t) < 0)
        return NULL;
    return rio__opool_get(&t->pool);
}

static void op_put_locked(struct mock_transport *t, struct mock_op *op)
{
    op->state = OP_FREE;
    op->io = NULL;
    rio__opool_put(&t->pool, op);
}

static void done_append_locked(struct mock_transport *t, struct mock_op *op)
{
    op->state = OP_DONE;
    rio_list_push_back(&t->done, &op->qnode);
}

/* Wake the mock thread if op now finishes before the time it sleeps toward. */
static void kick_locked(struct mock_transport *t, const struct mock_op *op)
{
    if (t->sleep_until &&
        (t->sleep_until == NEVER || op->finish_ns < t->sleep_until + MOCK_LEAD_MAX_NS))
        pthread_cond_signal(&t->work_cv);
}

/* --- submit --- */

/*
 * The op must be a fresh attempt at one whole chunk of the object or upload
 * it names: res reset, off and len exactly those of chunk `index`. Anything
 * else (out of bounds included, checked without overflow) is counted as a
 * rollback violation and fails with RIO_EPROTO.
 */
static int check_attempt_locked(struct mock_transport *t, const struct rio_io *io, uint64_t size,
                                uint64_t chunk_size, uint64_t nchunks)
{
    uint64_t start = io->index * chunk_size, end;

    if (io->index >= nchunks || io->off > size || io->len > size - io->off || io->res != 0)
        goto bad;
    end = chunk_size < size - start ? start + chunk_size : size;
    /* A READ may be a range inside the chunk (RIO_CAP_RANGE_READ). */
    if (io->kind == RIO_IO_READ && io->len > 0 && io->off >= start && io->off + io->len <= end)
        return 0;
    if (io->off != start || io->len != end - start) {
    bad:
        t->ctr.rollback_violations++;
        return RIO_EPROTO;
    }
    return 0;
}

/* A streaming upload's chunk: any index, whole chunk_size bytes but for the
 * last (whose length is checked at commit); its buffer and rx entry exist
 * once this returns 0. */
static int stream_slot_locked(struct mock_transport *t, struct mock_upload *up,
                              const struct rio_io *io)
{
    uint64_t cs = up->chunk_size;
    if (io->res != 0 || io->len > cs || io->index > UINT64_MAX / cs || io->off != io->index * cs ||
        io->index >= (1ull << 32)) {
        t->ctr.rollback_violations++;
        return RIO_EPROTO;
    }
    if (io->index >= up->ncap) {
        uint64_t ncap = up->ncap ? up->ncap : 8;
        while (ncap <= io->index)
            ncap *= 2;
        struct mock_rx *rx = rio__calloc((size_t)ncap, sizeof(*rx));
        uint8_t **parts = rio__calloc((size_t)ncap, sizeof(*parts));
        if (!rx || !parts) {
            rio__free(rx);
            rio__free(parts);
            return -ENOMEM;
        }
        if (up->ncap) {
            memcpy(rx, up->rx, (size_t)up->ncap * sizeof(*rx));
            memcpy(parts, up->parts, (size_t)up->ncap * sizeof(*parts));
        }
        rio__free(up->rx);
        rio__free(up->parts);
        up->rx = rx;
        up->parts = parts;
        up->ncap = ncap;
    }
    if (!up->parts[io->index]) {
        up->parts[io->index] = rio__malloc((size_t)cs);
        if (!up->parts[io->index])
            return -ENOMEM;
    }
    return 0;
}

/* Geometry of what op names; a READ of a missing or other generation is let
 * through to fail at its finish time like any read of a vanished object. */
static int check_op_locked(struct mock_transport *t, struct mock_op *op)
{
    struct rio_io *io = op->io;
    struct mock_store *s = t->store;
    uint64_t size, cs, n;
    bool known = false;

    pthread_mutex_lock(&s->mu);
    if (io->kind == RIO_IO_WRITE) {
        struct mock_upload *up = io->upload;
        if (up->stream) {
            int ret = stream_slot_locked(t, up, io);
            if (ret == 0) {
                up->refs++;
                op->up = up;
                op->wdst = up->parts[io->index];
            }
            pthread_mutex_unlock(&s->mu);
            return ret;
        }
        up->refs++;
        op->up = up;
        op->wdst = up->data + io->off;
        size = up->size, cs = up->chunk_size, n = up->nchunks;
        known = true;
    } else {
        struct mock_obj *o = *store_slot_locked(s, io->key, strlen(io->key), op->key_hash);
        if (o && o->generation == io->generation) {
            size = o->size, cs = o->chunk_size, n = o->nchunks;
            known = true;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return known ? check_attempt_locked(t, io, size, cs, n) : 0;
}

/* The timing model (see the top of the file). */
static void schedule_locked(struct mock_transport *t, struct mock_path *p, struct mock_op *op,
                            uint64_t now)
{
    uint64_t len = op->io->len, ready = now;

    if (t->disk_rate > 0) {
        /* A service that spends more per byte the more ops it holds at once
         * (a CPU-bound server: more connections, more overhead), when
         * contend is set; this op is held already. */
        double rate = t->disk_rate;
        if (t->contend > 0 && t->held > 1)
            rate /= 1 + t->contend * (double)(t->held - 1);
        op->disk_start = now > t->disk_free_ns ? now : t->disk_free_ns;
        op->disk_end = op->disk_start + xfer_ns(len, rate);
        t->disk_free_ns = op->disk_end;
        ready = op->disk_end;
        op->svc_ns = ready - now;
    }
    op->link_start = ready > p->free_ns ? ready : p->free_ns;
    op->link_end = op->link_start + xfer_ns(len, p->rate);
    p->free_ns = op->link_end;
    op->finish_ns = op->link_end + p->lat_ns;
}

/*
 * A cancelled op gives back the time it reserved, when nothing was scheduled
 * after it (later ops keep their slots: they are already promised).
 */
static void unschedule_locked(struct mock_transport *t, struct mock_op *op, uint64_t now)
{
    struct mock_path *p = &t->path[op->io->path];

    if (op->link_end && p->free_ns == op->link_end && op->link_end > now)
        p->free_ns = op->link_start > now ? op->link_start : now;
    if (op->disk_end && t->disk_free_ns == op->disk_end && op->disk_end > now)
        t->disk_free_ns = op->disk_start > now ? op->disk_start : now;
}

static int mock_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    struct mock_path *p;
    struct mock_op *op;
    uint64_t now, hash = 0;
    int ret;

    if (!io || io->path >= t->base.npaths || !io->complete || io->len == 0)
        return -EINVAL;
    if (io->kind == RIO_IO_WRITE) {
        const struct mock_upload *up = io->upload;
        if (!up || up->magic != UPLOAD_MAGIC || !io->src)
            return -EINVAL;
    } else if (io->kind == RIO_IO_READ) {
        if (!io->key || !io->dst)
            return -EINVAL;
        hash = key_hash(io->key, strlen(io->key));
    } else {
        return -EINVAL;
    }

    now = rio__now_ns();
    pthread_mutex_lock(&t->mu);
    p = &t->path[io->path];
    if (p->held >= t->depth_cap) {
        t->refused++;
        pthread_mutex_unlock(&t->mu);
        return -EAGAIN;
    }
    op = op_get_locked(t);
    if (!op) {
        pthread_mutex_unlock(&t->mu);
        return -ENOMEM;
    }
    op->io = io;
    op->seq = ++t->seq;
    op->key_hash = hash;
    op->state = OP_QUEUED;
    if (io->kind == RIO_IO_WRITE)
        t->ctr.ops_write++;
    else
        t->ctr.ops_read++;

    ret = check_op_locked(t, op);
    p->held++;
    t->held++;
    if (ret < 0) {
        op->action = ACT_FAIL;
        op->res = ret;
        op->finish_ns = now;
    } else {
        op->action = ACT_SERVE;
        schedule_locked(t, p, op, now);
    }
    t->ctr.inflight++;
    io->tpriv = op;
    heap_push(t, op);
    kick_locked(t, op);
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* --- cancel, reap, wake --- */

static void mock_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    struct mock_op *op;

    pthread_mutex_lock(&t->mu);
    op = io ? io->tpriv : NULL;
    /* Already moving or done: cancel changes nothing. */
    if (!op || op->io != io || op->state != OP_QUEUED) {
        pthread_mutex_unlock(&t->mu);
        return;
    }
    heap_remove(t, op);
    unschedule_locked(t, op, rio__now_ns());
    op->res = -ECANCELED;
    op->svc_ns = 0;
    done_append_locked(t, op);
    pthread_cond_broadcast(&t->done_cv);
    pthread_mutex_unlock(&t->mu);
}

static int mock_reap(struct rio_transport *tt, int timeout_ms)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    struct rio_list list;
    struct rio_list_node *q;
    int n = 0;

    pthread_mutex_lock(&t->mu);
    if (t->reap_fail) {
        int err = t->reap_err;
        t->reap_fail--;
        t->reaps_failed++;
        t->woken = false;
        pthread_mutex_unlock(&t->mu);
        return err;
    }
    if (rio_list_empty(&t->done) && !t->woken && timeout_ms != 0) {
        struct timespec ts;
        uint64_t deadline =
            timeout_ms > 0 ? rio__now_ns() + (uint64_t)timeout_ms * NS_PER_MS : NEVER;
        ns_to_timespec(deadline, &ts);
        while (rio_list_empty(&t->done) && !t->woken) {
            if (deadline == NEVER)
                pthread_cond_wait(&t->done_cv, &t->mu);
            else if (pthread_cond_timedwait(&t->done_cv, &t->mu, &ts) == ETIMEDOUT)
                break;
        }
    }
    t->woken = false;
    list = t->done;
    rio_list_init(&t->done);
    /* Settle each op before its completion runs: results out, references and
     * depth released, tpriv cleared so a late cancel finds nothing. */
    rio_list_each (op, &list, struct mock_op, qnode) {
        struct rio_io *io = op->io;
        io->res = op->res;
        io->svc_ns = op->svc_ns;
        if (t->svc_lie > 1)
            io->svc_ns =
                op->svc_ns > UINT64_MAX / t->svc_lie ? UINT64_MAX : op->svc_ns * t->svc_lie;
        io->tpriv = NULL;
        t->path[io->path].held--;
        t->held--;
        t->ctr.inflight--;
        if (op->up) {
            struct mock_upload *up;
            pthread_mutex_lock(&t->store->mu);
            up = upload_unref_locked(op->up);
            pthread_mutex_unlock(&t->store->mu);
            if (up)
                upload_free(up);
            op->up = NULL;
        }
    }
    pthread_mutex_unlock(&t->mu);

    rio_list_each (op, &list, struct mock_op, qnode) {
        op->io->complete(op->io);
        n++;
    }

    if (!rio_list_empty(&list)) {
        pthread_mutex_lock(&t->mu);
        while ((q = rio_list_pop_front(&list)))
            op_put_locked(t, rio_container_of(q, struct mock_op, qnode));
        pthread_mutex_unlock(&t->mu);
    }
    return n;
}

static void mock_wake(struct rio_transport *tt)
{
    struct mock_transport *t = (struct mock_transport *)tt;

    pthread_mutex_lock(&t->mu);
    t->woken = true;
    pthread_cond_broadcast(&t->done_cv);
    pthread_mutex_unlock(&t->mu);
}

/* --- the mock thread --- */

int rio__mock_set_service(struct rio_transport *tt, double disk_bps, double contend)
{
    struct mock_transport *t = mock_cast(tt);

    if (!t || !(disk_bps >= 0) || !(contend >= 0))
        return RIO_EINVAL;
    pthread_mutex_lock(&t->mu);
    t->disk_rate = disk_bps;
    t->contend = contend;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* The fault filter's GENCHANGE (transport/mock.h). */
int rio__mock_genchange(struct rio_transport *tt, const char *key, uint64_t gen)
{
    struct mock_transport *t = mock_cast(tt);
    struct mock_store *s;
    size_t keylen;
    struct mock_obj *o, *n, *old = NULL;
    struct rio_md5 md5 = {0};
    char hex[33];
    uint64_t i;
    int ret = -ENOMEM;

    if (!t || !key)
        return RIO_EINVAL;
    s = t->store;
    keylen = strlen(key);
    o = store_get(s, key, keylen, key_hash(key, keylen));
    if (!o)
        return 0;
    if (o->generation != gen) {
        obj_unref(s, o);
        return 0;
    }
    n = obj_alloc(o->key, o->keylen, o->nchunks);
    if (!n)
        goto err_unref;
    if (o->size) {
        n->data = rio__malloc((size_t)o->size);
        if (!n->data)
            goto err_free;
        for (i = 0; i < o->size; i++)
            n->data[i] = o->data[i] ^ MOCK_GENCHANGE_XOR;
    }
    n->size = o->size;
    n->chunk_size = o->chunk_size;
    for (i = 0; i < o->nchunks; i++) {
        uint64_t off = i * o->chunk_size;
        uint64_t len = o->size - off < o->chunk_size ? o->size - off : o->chunk_size;
        n->xxh[i] = rio__xxh3(n->data + off, (size_t)len);
    }
    if (rio__md5_init(&md5) < 0 || rio__md5_update(&md5, n->data, (size_t)n->size) < 0 ||
        rio__md5_final(&md5, hex) < 0) {
        rio__md5_cleanup(&md5);
        goto err_free;
    }
    memcpy(n->etag, hex, sizeof(hex));

    pthread_mutex_lock(&s->mu);
    if (*store_slot_locked(s, o->key, o->keylen, o->hash) == o) {
        old = store_publish_locked(s, n);
        old = obj_unref_locked(old); /* the store's reference */
        n = NULL;
    }
    o = obj_unref_locked(o); /* ours */
    pthread_mutex_unlock(&s->mu);
    obj_free(old);
    obj_free(o);
    obj_free(n); /* someone else replaced it first */
    return 0;
err_free:
    obj_free(n);
err_unref:
    obj_unref(s, o);
    return ret;
}

static void serve_read(struct mock_transport *t, struct mock_op *op)
{
    struct rio_io *io = op->io;
    struct mock_obj *o;

    o = store_get(t->store, io->key, strlen(io->key), op->key_hash);
    if (!o || o->generation != io->generation ||
        (io->off > o->size || io->len > o->size - io->off)) {
        op->res = !o                                ? RIO_ENOTFOUND
                  : o->generation != io->generation ? RIO_EGENERATION
                                                    : RIO_EPROTO;
        if (o)
            obj_unref(t->store, o);
        return;
    }
    memcpy(io->dst, o->data + io->off, (size_t)io->len);
    obj_unref(t->store, o);
    op->res = (int64_t)io->len;
}

/* The "server" verifies what it received against the client's xxh3. */
static void serve_write(struct mock_transport *t, struct mock_op *op)
{
    struct rio_io *io = op->io;
    struct mock_upload *up = op->up;
    uint8_t *dst = op->wdst;
    uint64_t h;
    bool ok;

    memcpy(dst, io->src, (size_t)io->len);
    h = rio__xxh3(dst, (size_t)io->len);
    ok = h == io->xxh;
    pthread_mutex_lock(&t->store->mu);
    up->rx[io->index].xxh = h;
    up->rx[io->index].len = io->len;
    up->rx[io->index].ok = ok;
    pthread_mutex_unlock(&t->store->mu);
    op->res = ok ? (int64_t)io->len : RIO_ECHECKSUM;
}

static void serve(struct mock_transport *t, struct mock_op *op)
{
    if (op->action == ACT_FAIL)
        return;
    if (op->io->kind == RIO_IO_READ)
        serve_read(t, op);
    else
        serve_write(t, op);
}

/* How long before the heap's first op the thread starts serving: the copy
 * time of every op due within MOCK_LEAD_MAX_NS of it, at half the measured
 * copy rate. */
static uint64_t lead_locked(const struct mock_transport *t)
{
    uint64_t first = t->heap[0]->finish_ns;
    double bytes = 0;

    for (size_t i = 0; i < t->nheap; i++) {
        const struct mock_op *op = t->heap[i];
        if (op->action == ACT_SERVE && op->finish_ns - first < MOCK_LEAD_MAX_NS)
            bytes += (double)op->io->len;
    }
    double ns = bytes * 2e9 / t->copy_bps;
    return ns < (double)MOCK_LEAD_MAX_NS ? (uint64_t)ns : MOCK_LEAD_MAX_NS;
}

/* Hold op (served) until its finish, in finish order. */
static void ready_insert_locked(struct mock_transport *t, struct mock_op *op)
{
    struct rio_list_node *at = t->ready.tail;

    while (at && op_before(op, rio_container_of(at, struct mock_op, qnode)))
        at = at->prev;
    rio__list_link(&t->ready, &op->qnode, at, at ? at->next : t->ready.head);
}

static void *mock_main(void *arg)
{
    struct mock_transport *t = arg;

    pthread_mutex_lock(&t->mu);
    while (!t->stop) {
        uint64_t now = rio__now_ns();
        struct mock_op *op;
        bool delivered = false;

        /* What was served ahead and is due now. */
        while ((op = rio_list_entry(t->ready.head, struct mock_op, qnode)) &&
               op->finish_ns <= now) {
            rio_list_remove(&t->ready, &op->qnode);
            done_append_locked(t, op);
            delivered = true;
        }
        if (delivered)
            pthread_cond_broadcast(&t->done_cv);

        uint64_t wake = NEVER;
        op = rio_list_entry(t->ready.head, struct mock_op, qnode);
        if (op)
            wake = op->finish_ns;
        if (t->nheap) {
            uint64_t first = t->heap[0]->finish_ns;
            uint64_t serve_at = first;
            if (first != NEVER && first > now)
                serve_at = first - (first - now < MOCK_LEAD_MAX_NS ? lead_locked(t) : 0);
            if (serve_at <= now) {
                /* One op at a time: the lead is measured again after each. */
                op = t->heap[0];
                heap_remove(t, op);
                op->state = OP_MOVING;
                pthread_mutex_unlock(&t->mu);
                uint64_t t0 = rio__now_ns();
                serve(t, op);
                uint64_t dt = rio__now_ns() - t0;
                pthread_mutex_lock(&t->mu);
                if (op->action == ACT_SERVE && op->io->len >= 65536 && dt > 0) {
                    double bps = (double)op->io->len * 1e9 / (double)dt;
                    t->copy_bps = 0.7 * t->copy_bps + 0.3 * bps;
                }
                ready_insert_locked(t, op);
                continue;
            }
            if (serve_at < wake)
                wake = first - now >= MOCK_LEAD_MAX_NS ? first - MOCK_LEAD_MAX_NS : serve_at;
        }
        t->sleep_until = wake;
        if (wake == NEVER) {
            pthread_cond_wait(&t->work_cv, &t->mu);
        } else {
            struct timespec ts;
            ns_to_timespec(wake, &ts);
            pthread_cond_timedwait(&t->work_cv, &t->mu, &ts);
        }
        t->sleep_until = 0;
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

/* --- open and close --- */

/*
 * "v" or "v1,v2,...": one value per path. A list shorter than npaths repeats
 * its last value; values past npaths are ignored (the options may ask for
 * fewer paths than the URL describes).
 */
static int parse_list(const char *s, unsigned npaths, uint64_t *out,
                      int (*parse)(const char *, uint64_t *))
{
    unsigned i = 0;

    for (;;) {
        const char *e = strchr(s, ',');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        char item[64];
        uint64_t v;

        if (l == 0 || l >= sizeof(item) || i == RIO_MAX_PATHS)
            return RIO_EINVAL;
        memcpy(item, s, l);
        item[l] = '\0';
        if (parse(item, &v) < 0)
            return RIO_EINVAL;
        if (i < npaths)
            out[i] = v;
        i++;
        if (!e)
            break;
        s = e + 1;
    }
    for (; i < npaths; i++)
        out[i] = out[i - 1];
    return 0;
}

static int parse_config(struct mock_transport *t, const struct rio_url *u,
                        const struct rio_options *o)
{
    uint64_t vals[RIO_MAX_PATHS], v;
    const char *s;
    unsigned i;

    if (rio__transport_npaths(&t->base, u, o, "paths") < 0)
        return RIO_EINVAL;

    if ((s = rio__url_param(u, "rate"))) {
        if (parse_list(s, t->base.npaths, vals, rio__parse_size) < 0) {
            rio__detail("rate=%s: expected a size per second, or one per path "
                        "(e.g. 1G or 1G,500M)",
                        s);
            return RIO_EINVAL;
        }
        for (i = 0; i < t->base.npaths; i++)
            t->path[i].rate = (double)vals[i];
    }
    if ((s = rio__url_param(u, "lat"))) {
        if (parse_list(s, t->base.npaths, vals, rio__parse_duration_ns) < 0)
            return RIO_EINVAL;
        for (i = 0; i < t->base.npaths; i++)
            t->path[i].lat_ns = vals[i];
    }
    if ((s = rio__url_param(u, "disk"))) {
        if (rio__opt_size("disk", s, 0, UINT64_MAX, 0, &v) < 0)
            return RIO_EINVAL;
        t->disk_rate = (double)v;
    }
    if ((s = rio__url_param(u, "contend"))) {
        char *end;
        double f = strtod(s, &end);
        if (end == s || *end || !(f >= 0 && f <= 100)) {
            rio__detail("contend=%s: expected a number from 0 to 100", s);
            return RIO_EINVAL;
        }
        t->contend = f;
    }
    if ((s = rio__url_param(u, "svc_lie"))) {
        if (rio__opt_uint("svc_lie", s, 0, UINT64_MAX, &v) < 0)
            return RIO_EINVAL;
        t->svc_lie = v;
    }
    t->depth_cap = MOCK_DEFAULT_DEPTH_CAP;
    t->copy_bps = MOCK_COPY_BPS0;
    if ((s = rio__url_param(u, "depth_cap"))) {
        if (rio__opt_uint("depth_cap", s, 1, MOCK_MAX_DEPTH_CAP, &v) < 0)
            return RIO_EINVAL;
        t->depth_cap = (unsigned)v;
    }
    t->base.max_depth = t->depth_cap;
    return 0;
}

static int mock_open(const struct rio_url *u, const struct rio_options *o,
                     struct rio_transport **out)
{
    struct mock_transport *t;
    pthread_condattr_t ca;
    int ret;

    ret = rio__transport_new(u, out, sizeof(*t), &rio__mock_ops, &t);
    if (ret < 0)
        return ret;
    ret = parse_config(t, u, o);
    if (ret < 0)
        goto err_free;
    ret = store_open(u->authority ? u->authority : "", &t->store);
    if (ret < 0)
        goto err_free;
    rio__opool_init(&t->pool, sizeof(struct mock_op), MOCK_SLAB_OPS);
    ret = pool_grow_locked(t);
    if (ret < 0)
        goto err_pool;

    ret = -pthread_condattr_init(&ca);
    if (ret < 0)
        goto err_pool;
    ret = -pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (ret < 0)
        goto err_condattr;
    ret = -pthread_mutex_init(&t->mu, NULL);
    if (ret < 0)
        goto err_condattr;
    ret = -pthread_cond_init(&t->work_cv, &ca);
    if (ret < 0)
        goto err_mutex;
    ret = -pthread_cond_init(&t->done_cv, &ca);
    if (ret < 0)
        goto err_work_cv;
    ret = -pthread_create(&t->thread, NULL, mock_main, t);
    if (ret < 0)
        goto err_done_cv;
    pthread_condattr_destroy(&ca);
    t->cpu_clock_ok = pthread_getcpuclockid(t->thread, &t->cpu_clock) == 0;
    *out = &t->base;
    return 0;

err_done_cv:
    pthread_cond_destroy(&t->done_cv);
err_work_cv:
    pthread_cond_destroy(&t->work_cv);
err_mutex:
    pthread_mutex_destroy(&t->mu);
err_condattr:
    pthread_condattr_destroy(&ca);
err_pool:
    rio__opool_destroy(&t->pool);
    rio__free(t->heap);
    store_close(t->store);
err_free:
    rio__free(t);
    return ret;
}

static void mock_close(struct rio_transport *tt)
{
    struct mock_transport *t = mock_cast(tt);
    size_t i;

    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->stop = true;
    pthread_cond_signal(&t->work_cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->thread, NULL);

    /* The engine reaps everything before closing; should an op be left over,
     * drop its upload reference so nothing leaks. */
    for (i = 0; i < t->nheap; i++)
        if (t->heap[i]->up)
            upload_unref(t->heap[i]->up);
    rio_list_each (d, &t->done, struct mock_op, qnode)
        if (d->up)
            upload_unref(d->up);
    rio_list_each (d, &t->ready, struct mock_op, qnode)
        if (d->up)
            upload_unref(d->up);

    rio__opool_destroy(&t->pool);
    rio__free(t->heap);
    pthread_cond_destroy(&t->done_cv);
    pthread_cond_destroy(&t->work_cv);
    pthread_mutex_destroy(&t->mu);
    store_close(t->store);
    rio__free(t);
}

/* --- metadata --- */

static int mock_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    struct mock_store *s = t->store;
    struct mock_obj *o;
    uint64_t *xxh = NULL;
    size_t keylen;
    uint64_t h;
    int ret;

    if (!out)
        return RIO_EINVAL;
    ret = rio__key_len(key, &keylen);
    if (ret < 0)
        return ret;
    pthread_mutex_lock(&t->mu);
    t->ctr.lookups++;
    t->ctr.lookups_overlapped += t->ctr.inflight > 0;
    if (t->forge && strcmp(t->forged.key, key) == 0) {
        /* A hostile server: the descriptor as set, with a list of the
         * length set (zeros), whatever its nchunks says. */
        uint64_t n = t->forged_xxh_len;
        *out = t->forged;
        pthread_mutex_unlock(&t->mu);
        out->xxh = n ? rio__calloc((size_t)n, sizeof(uint64_t)) : NULL;
        return n && !out->xxh ? -ENOMEM : 0;
    }
    pthread_mutex_unlock(&t->mu);
    h = key_hash(key, keylen);
    o = store_get(s, key, keylen, h);
    if (!o)
        return RIO_ENOTFOUND;
    /* The object is pinned and immutable: copy it without the lock. */
    if (o->nchunks) {
        xxh = rio__malloc((size_t)o->nchunks * sizeof(*xxh));
        if (!xxh) {
            obj_unref(s, o);
            return -ENOMEM;
        }
        memcpy(xxh, o->xxh, (size_t)o->nchunks * sizeof(*xxh));
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, keylen + 1);
    out->generation = o->generation;
    out->size = o->size;
    out->chunk_size = o->chunk_size;
    out->nchunks = o->nchunks;
    out->xxh = xxh;
    memcpy(out->etag, o->etag, sizeof(out->etag));
    obj_unref(s, o);
    return 0;
}

static int mock_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                         uint64_t chunk_size, void **upload)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    struct mock_upload *up;
    size_t keylen;
    int ret;

    ret = rio__put_open_args(key, &keylen, chunk_size, upload);
    if (ret < 0)
        return ret;
    if (size > SIZE_MAX && size != RIO_SIZE_UNKNOWN)
        return -ENOMEM;
    up = rio__calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    up->key = rio__strdup(key);
    if (!up->key)
        goto err_free;
    if (size == RIO_SIZE_UNKNOWN) {
        up->stream = true;
        size = 0;
    }
    up->nchunks = nchunks_of(size, chunk_size);
    if (up->nchunks) {
        if (up->nchunks > SIZE_MAX / sizeof(*up->rx))
            goto err_free;
        up->rx = rio__calloc((size_t)up->nchunks, sizeof(*up->rx));
        if (!up->rx)
            goto err_free;
        up->data = rio__malloc((size_t)size);
        if (!up->data)
            goto err_free;
    }
    up->magic = UPLOAD_MAGIC;
    up->s = t->store;
    up->refs = 1;
    up->size = size;
    up->chunk_size = chunk_size;
    *upload = up;
    pthread_mutex_lock(&t->mu);
    if (++t->ctr.uploads_open > t->ctr.uploads_open_peak)
        t->ctr.uploads_open_peak = t->ctr.uploads_open;
    pthread_mutex_unlock(&t->mu);
    return 0;
err_free:
    upload_free(up);
    return -ENOMEM;
}

/*
 * A streaming upload learns its geometry at commit: every chunk below the
 * final count landed whole at its length, none beyond it; then its parts are
 * assembled into one object buffer, as a sized upload would hold them.
 */
static int stream_finish(struct mock_upload *up, const struct rio_desc *d)
{
    struct mock_store *s = up->s;
    uint64_t cs = up->chunk_size;
    int ret = 0;

    if (d->chunk_size != cs || d->nchunks != nchunks_of(d->size, cs) || d->size > SIZE_MAX)
        return RIO_EPROTO;
    uint8_t *data = d->size ? rio__malloc((size_t)d->size) : NULL;
    struct mock_rx *rx = d->nchunks ? rio__calloc((size_t)d->nchunks, sizeof(*rx)) : NULL;
    if ((d->size && !data) || (d->nchunks && !rx)) {
        rio__free(data);
        rio__free(rx);
        return -ENOMEM;
    }
    pthread_mutex_lock(&s->mu);
    if (up->refs != 1 || d->nchunks > up->ncap)
        ret = RIO_EPROTO;
    for (uint64_t i = 0; ret == 0 && i < up->ncap; i++) {
        uint64_t want = i < d->nchunks ? (d->size - i * cs < cs ? d->size - i * cs : cs) : 0;
        if (i >= d->nchunks) {
            if (up->rx[i].len)
                ret = RIO_EPROTO; /* a chunk beyond the end */
            continue;
        }
        if (up->rx[i].ok && up->rx[i].len != want)
            ret = RIO_EPROTO;
        rx[i] = up->rx[i];
        if (ret == 0 && rx[i].ok)
            memcpy(data + i * cs, up->parts[i], (size_t)want);
    }
    if (ret == 0) {
        rio__free(up->data);
        rio__free(up->rx);
        up->data = data;
        up->rx = rx;
        up->size = d->size;
        up->nchunks = d->nchunks;
        data = NULL;
        rx = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    rio__free(data);
    rio__free(rx);
    return ret;
}

static int mock_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    struct mock_store *s = t->store;
    struct mock_upload *up = upload;
    struct mock_obj *o = NULL, *old = NULL;
    uint64_t i;
    int ret;

    if (!up || up->magic != UPLOAD_MAGIC)
        return RIO_EINVAL;
    pthread_mutex_lock(&t->mu);
    t->ctr.commits++;
    t->ctr.commits_overlapped += t->ctr.inflight > 0;
    t->ctr.uploads_open--;
    pthread_mutex_unlock(&t->mu);
    ret = RIO_EINVAL;
    if (!d || (up->nchunks && !d->xxh))
        goto out;
    if (up->stream) {
        ret = stream_finish(up, d);
        if (ret < 0)
            goto out;
    }
    ret = rio__put_commit_desc(d, up->key, up->size, up->chunk_size, up->nchunks);
    if (ret < 0)
        goto out;
    ret = -ENOMEM;
    o = obj_alloc(up->key, strlen(up->key), up->nchunks);
    if (!o)
        goto out;
    if (up->nchunks)
        memcpy(o->xxh, d->xxh, (size_t)up->nchunks * sizeof(uint64_t));
    o->size = up->size;
    o->chunk_size = up->chunk_size;
    memcpy(o->etag, d->etag, sizeof(o->etag));
    o->etag[sizeof(o->etag) - 1] = '\0';

    pthread_mutex_lock(&s->mu);
    /* A WRITE still in flight could land after the swap: refuse. */
    ret = up->refs == 1 ? 0 : RIO_EPROTO;
    for (i = 0; ret == 0 && i < up->nchunks; i++)
        if (!up->rx[i].ok)
            ret = RIO_EPROTO;
        else if (up->rx[i].xxh != d->xxh[i])
            ret = RIO_ECHECKSUM;
    if (ret == 0 && up->put_if) {
        const struct mock_obj *cur = *store_slot_locked(s, o->key, o->keylen, o->hash);
        if (up->put_if == RIO__PUT_IF_ABSENT ? cur != NULL : !cur || cur->generation != up->put_if)
            ret = RIO_EGENERATION;
    }
    if (ret == 0) {
        o->data = up->data;
        up->data = NULL;
        old = store_publish_locked(s, o);
        if (old)
            old = obj_unref_locked(old);
        d->generation = o->generation;
        o = NULL;
    }
    pthread_mutex_unlock(&s->mu);
    obj_free(old);
    obj_free(o);
out:
    upload_unref(up);
    return ret;
}

static int mock_put_expect(struct rio_transport *tt, void *upload, uint64_t gen)
{
    struct mock_upload *up = upload;
    (void)tt;
    if (!up || up->magic != UPLOAD_MAGIC || !gen)
        return RIO_EINVAL;
    up->put_if = gen;
    return 0;
}

static void mock_put_abort(struct rio_transport *tt, void *upload)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    struct mock_upload *up = upload;

    if (up && up->magic == UPLOAD_MAGIC) {
        pthread_mutex_lock(&t->mu);
        t->ctr.uploads_open--;
        pthread_mutex_unlock(&t->mu);
        upload_unref(up);
    }
}

/* Remove key's object, only if it is generation gen (0: any). */
static int remove_gen(struct mock_transport *t, const char *key, uint64_t gen)
{
    struct mock_store *s = t->store;
    struct mock_obj **pp, *o;
    size_t keylen;
    int ret;

    ret = rio__key_len(key, &keylen);
    if (ret < 0)
        return ret;
    pthread_mutex_lock(&s->mu);
    pp = store_slot_locked(s, key, keylen, key_hash(key, keylen));
    o = *pp;
    if (o && gen && o->generation != gen) {
        o = NULL;
        ret = RIO_EGENERATION;
    } else if (o) {
        *pp = o->next;
        o->next = NULL;
        s->nobjs--;
        o = obj_unref_locked(o);
        ret = 0;
    } else {
        ret = RIO_ENOTFOUND;
    }
    pthread_mutex_unlock(&s->mu);
    obj_free(o);
    return ret;
}

static int mock_remove(struct rio_transport *tt, const char *key)
{
    return remove_gen((struct mock_transport *)tt, key, 0);
}

static int mock_remove_if(struct rio_transport *tt, const char *key, uint64_t gen)
{
    return gen ? remove_gen((struct mock_transport *)tt, key, gen) : RIO_EINVAL;
}

/* --- listing: the store's keys in byte order --- */

static int obj_key_cmp(const void *a, const void *b)
{
    const struct mock_obj *x = *(const struct mock_obj *const *)a;
    const struct mock_obj *y = *(const struct mock_obj *const *)b;
    return strcmp(x->key, y->key);
}

/*
 * One page: every object of the store under the prefix and after the
 * cursor, sorted, the first max of them. The store is a hash table, so a
 * page costs a pass over it (the mock models a target, not its index).
 */
static int mock_list(struct rio_transport *tt, const struct rio_list_args *a,
                     struct rio_list_page *out)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    struct mock_store *s = t->store;
    struct rio__list_span sp;
    struct mock_obj **v;
    size_t n = 0;

    rio__list_span_of(a, &sp);
    memset(out, 0, sizeof(*out));
    pthread_mutex_lock(&s->mu);
    v = rio__calloc(s->nobjs, sizeof(*v));
    if (!v)
        goto err_unlock;
    for (size_t b = 0; b < s->nbuckets; b++)
        for (struct mock_obj *o = s->buckets[b]; o; o = o->next)
            if (n < s->nobjs && rio__list_span_has(&sp, o->key, o->keylen))
                v[n++] = o;
    qsort(v, n, sizeof(*v), obj_key_cmp);
    size_t take = n < sp.max ? n : sp.max;
    out->entries = rio__calloc(take, sizeof(*out->entries));
    if (!out->entries)
        goto err_v;
    for (size_t i = 0; i < take; i++) {
        struct rio_entry *e = &out->entries[i];
        memcpy(e->key, v[i]->key, v[i]->keylen + 1);
        e->size = v[i]->size;
        e->generation = v[i]->generation;
        memcpy(e->etag, v[i]->etag, sizeof(e->etag));
    }
    out->n = (unsigned)take;
    if (n > take)
        memcpy(out->next_token, v[take - 1]->key, v[take - 1]->keylen + 1);
    pthread_mutex_unlock(&s->mu);
    rio__free(v);
    return 0;
err_v:
    rio__free(v);
err_unlock:
    pthread_mutex_unlock(&s->mu);
    return -ENOMEM;
}

/* Every key of the batch under one hold of the store's lock: one round
 * trip, as a server would answer it. */
static int mock_exists(struct rio_transport *tt, const char *const *keys, unsigned n, uint8_t *out)
{
    struct mock_store *s = ((struct mock_transport *)tt)->store;
    size_t keylen;

    for (unsigned i = 0; i < n; i++)
        if (rio__key_len(keys[i], &keylen) < 0)
            return RIO_EINVAL;
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < n; i++) {
        keylen = strlen(keys[i]);
        out[i] = *store_slot_locked(s, keys[i], keylen, key_hash(keys[i], keylen)) != NULL;
    }
    pthread_mutex_unlock(&s->mu);
    return 0;
}

static double mock_path_cap(struct rio_transport *tt, unsigned pi)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    double r;

    if (pi >= t->base.npaths)
        return 0;
    pthread_mutex_lock(&t->mu);
    r = t->path[pi].rate;
    pthread_mutex_unlock(&t->mu);
    return r;
}

/* The model moves the bytes of every op it holds on a path (served in
 * turn, at the path's rate): they move now while it holds one. */
static uint64_t mock_path_moved(struct rio_transport *tt, unsigned pi)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    bool held;

    if (pi >= t->base.npaths)
        return 0;
    pthread_mutex_lock(&t->mu);
    held = t->path[pi].held > 0;
    pthread_mutex_unlock(&t->mu);
    return held ? rio__now_ns() : 0;
}

static uint64_t mock_cpu_ns(struct rio_transport *tt)
{
    struct mock_transport *t = (struct mock_transport *)tt;
    return t->cpu_clock_ok ? rio__clock_ns(t->cpu_clock) : 0;
}

/* parse_config reads them (paths is the core's). */
static const char *const mock_url_options[] = {"rate",      "lat",     "disk", "contend",
                                               "depth_cap", "svc_lie", NULL};

const struct rio_transport_ops rio__mock_ops = {
    .scheme = "mock",
    .url_options = mock_url_options,
    .caps = RIO_CAP_ETAG | RIO_CAP_STREAM_PUT | RIO_CAP_RANGE_READ,
    RIO_TRANSPORT_OPS(mock_open, mock_close, mock),
    .put_expect = mock_put_expect,
    .remove_if = mock_remove_if,
    .list = mock_list,
    .exists = mock_exists,
    .path_cap = mock_path_cap,
    .path_moved = mock_path_moved,
    .cpu_ns = mock_cpu_ns,
};

/* ------------------------------------------------------- test API (hooks) */

void rio__mock_reap_fail(struct rio_transport *tt, uint64_t n, int err)
{
    struct mock_transport *t = mock_cast(tt);

    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->reap_fail = err < 0 ? n : 0;
    t->reap_err = err;
    pthread_mutex_unlock(&t->mu);
}

/* One of t's counters, read under its lock. */
static uint64_t mock_count(struct mock_transport *t, const uint64_t *n)
{
    uint64_t v;

    pthread_mutex_lock(&t->mu);
    v = *n;
    pthread_mutex_unlock(&t->mu);
    return v;
}

uint64_t rio__mock_refused(struct rio_transport *tt)
{
    struct mock_transport *t = mock_cast(tt);

    return t ? mock_count(t, &t->refused) : 0;
}

uint64_t rio__mock_reaps_failed(struct rio_transport *tt)
{
    struct mock_transport *t = mock_cast(tt);

    return t ? mock_count(t, &t->reaps_failed) : 0;
}

int rio__mock_set_path(struct rio_transport *tt, unsigned pi, double rate_bps, uint64_t lat_ns)
{
    struct mock_transport *t = mock_cast(tt);

    if (!t || pi >= t->base.npaths || !(rate_bps >= 0) || isinf(rate_bps))
        return RIO_EINVAL;
    pthread_mutex_lock(&t->mu);
    t->path[pi].rate = rate_bps;
    t->path[pi].lat_ns = lat_ns;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

void rio__mock_counters(struct rio_transport *tt, struct rio_mock_counters *out)
{
    struct mock_transport *t = mock_cast(tt);

    rio__counters_copy(t ? &t->mu : NULL, out, t ? &t->ctr : NULL, sizeof(*out));
}

int rio__mock_desc_set(struct rio_transport *tt, const struct rio_desc *d, uint64_t xxh_len)
{
    struct mock_transport *t = mock_cast(tt);

    if (!t || (d && (!memchr(d->key, '\0', sizeof(d->key)) || xxh_len > (1u << 20))))
        return RIO_EINVAL;
    pthread_mutex_lock(&t->mu);
    t->forge = d != NULL;
    if (d) {
        t->forged = *d;
        t->forged.xxh = NULL;
        t->forged_xxh_len = xxh_len;
    }
    pthread_mutex_unlock(&t->mu);
    return 0;
}

/* --- the public API, over a client (the fault ones are in fault.c) --- */

static struct rio_transport *client_mock(struct rio_client *c)
{
    return c ? rio__client_transport(c) : NULL;
}

int rio_mock_set_path(struct rio_client *c, unsigned path, double rate_bps, uint64_t lat_ns)
{
    return rio__mock_set_path(client_mock(c), path, rate_bps, lat_ns);
}

int rio_mock_desc_set(struct rio_client *c, const struct rio_desc *d, uint64_t xxh_len)
{
    return rio__mock_desc_set(client_mock(c), d, xxh_len);
}
