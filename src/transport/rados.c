/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://POOL: objects striped into chunk objects in a Ceph cluster through
 * librados aio. The layout (specified byte by byte in docs/rados.md):
 *
 *   head   POOL, namespace "", object KEY: a text descriptor (size, chunk
 *          size, count, per-chunk xxh3, etag, generation, every chunk's
 *          pool and name in source order) plus the xattr rio.gen holding the
 *          generation. Written last, in one atomic write op guarded by a
 *          compare on rio.gen, so a reader sees the old head or the new one
 *          and two racing PUTs of one key both know what they replaced.
 *   chunks namespace "rio.chunk" of the chunk's pool, object
 *          "KEY.GGGGGGGGGGGGGGGG.IIIIIIIIIIIIIIII" (generation, index in hex).
 *          A generation is random per PUT, so concurrent PUTs never share a
 *          chunk object, and a READ that names a generation whose chunks were
 *          removed gets ENOENT, reported as RIO_EGENERATION.
 *
 * Paths: each path is its own cluster connection (rados_t: its own messenger
 * and sockets) with one ioctx per pool; depth is the engine's. Chunk ops are
 * librados aio; their completion callbacks (librados threads) push the op on
 * a done queue and signal reap, which calls complete() in the engine thread.
 * librados cannot abort an op it has sent: cancel marks it and it completes
 * within the op timeout (rados_osd_op_timeout, set at connect), so a dead
 * OSD ends in -ETIMEDOUT, never a hang.
 *
 * Metadata (lookup, put_open, put_commit, put_abort, remove) is synchronous
 * on path 0's connection and thread-safe. A lookup caches where the head put
 * each chunk (pool per chunk) so the READs it precedes can find them.
 *
 * Locks: t->mu guards the op pool, the done queue and the counters; t->cache_mu
 * the placement cache; t->pools_mu the pool table (readers take a snapshot of
 * the count; entries are immutable once published). No lock is held while
 * calling into librados for a chunk op or while calling complete().
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <rados/librados.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/key.h"
#include "core/url.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados_head.h"
#include "transport/transport.h"

#define MAX_POOLS 32 /* pools one transport knows (configured + seen in heads) */
#define MAX_HEAD_POOLS RIO_RADOS_MAX_HEAD_POOLS
#define SLAB_OPS 64u        /* chunk ops allocated at a time */
#define CACHE_BUCKETS 1024u /* placement cache: hash buckets */
#define CACHE_MAX 4096u     /* placement cache: entries kept (LRU) */
#define HEAD_READ0 (64u << 10)
#define COMMIT_TRIES 64
#define REMOVE_WINDOW 64 /* aio removes in flight at once */
#define NAME_MAX_LEN RIO_RADOS_NAME_MAX
#define UPLOAD_MAGIC 0x7261646f7375706cull
#define SHUFFLE_HOLD 4u /* shuffle knob: completions held before delivery */
#define SHUFFLE_WAIT_NS 20000000ull

extern const struct rio_transport_ops rio__rados_ops;

/* ---------------------------------------------------------------- types */

struct rpool {
    char *name;
    rados_ioctx_t io[RIO_MAX_PATHS]; /* per path, namespace RIO_RADOS_CHUNK_NS */
};

struct rupload {
    uint64_t magic;
    char *key;
    uint64_t generation;
    uint64_t size, chunk_size, nchunks; /* streaming: size and nchunks set at commit */
    bool stream;                        /* opened with RIO_SIZE_UNKNOWN */
    unsigned npools;
    uint8_t pools[MAX_HEAD_POOLS]; /* transport pool indices, chunk i -> pools[i % npools] */
    /* Under t->mu while the PUT runs (submit and reap may run in different
     * threads, and a streaming upload grows the arrays at submit); the
     * caller's alone after the fence. */
    uint16_t *paths_tried; /* per chunk: bit p set once a WRITE went out on path p */
    uint8_t *done;         /* per chunk: a WRITE completed successfully */
    uint64_t cap;          /* entries allocated in paths_tried and done */
    uint64_t hi;           /* highest index a WRITE went out for + 1 */
    uint64_t max_done;     /* highest index completed + 1 (reorder counter) */
    /* Streaming: the one chunk shorter than chunk_size (the last), if seen. */
    uint64_t short_index, short_len;
};

struct rop {
    struct rio_io *io;
    struct rados_transport *t;
    rados_completion_t comp;
    struct rupload *up;
    int forced; /* fail_chunk: the error to report instead of the result */
    bool cancelled;
    uint64_t t_done; /* shuffle knob: when it completed */
    struct rop *next;
};

struct rslab {
    struct rslab *next;
    struct rop ops[SLAB_OPS];
};

struct centry {
    struct centry *hnext;         /* hash chain */
    struct centry *lprev, *lnext; /* LRU list, most recent first */
    uint64_t hash, generation, nchunks;
    unsigned npools;
    uint8_t map[MAX_HEAD_POOLS]; /* head pool index -> transport pool index */
    uint8_t *chunk_pool;         /* per chunk head pool index; NULL: chunk i in i % npools */
    size_t keylen;
    char key[];
};

struct rados_transport {
    struct rio_transport base; /* first: the engine's handle */
    rados_t cl[RIO_MAX_PATHS];
    rados_ioctx_t head_io; /* path 0, the URL's pool, namespace "" */
    uint64_t max_object;
    uint64_t abort_ns;
    uint64_t gen_state;
    int64_t fail_chunk; /* test knob: WRITEs of this chunk report fail_err; -1 off */
    int fail_err;
    bool shuffle; /* test knob: deliver completions in a shuffled order */

    pthread_mutex_t pools_mu;
    struct rpool pools[MAX_POOLS];
    _Atomic unsigned npools;
    unsigned nwpools; /* pools a PUT spreads over: pools[0..nwpools) */

    pthread_mutex_t cache_mu;
    struct centry *cbuckets[CACHE_BUCKETS];
    struct centry *lru_head, *lru_tail;
    unsigned ncache;

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    struct rslab *slabs;
    struct rop *free_ops;
    struct rop *done_head, *done_tail;
    struct rop *held; /* shuffle knob */
    unsigned nheld;
    bool woken;
    uint64_t rng;
    struct rio_rados_counters ctr;
};

static struct rados_transport *rt_cast(struct rio_transport *t)
{
    return t && t->ops == &rio__rados_ops ? (struct rados_transport *)t : NULL;
}

/* -------------------------------------------------------------- helpers */

static uint64_t nchunks_of(uint64_t size, uint64_t chunk_size)
{
    return size / chunk_size + (size % chunk_size != 0);
}

static uint64_t hash_key(const char *key, size_t len, uint64_t gen)
{
    uint64_t h = 0xcbf29ce484222325ull ^ gen;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

/* librados result of a chunk op -> the engine's codes. */
static int64_t xlate_io(int kind, int ret)
{
    if (ret >= 0)
        return ret;
    switch (ret) {
    case -ENOENT:
        /* A READ names a generation: its chunk is gone, so is the generation. */
        return kind == RIO_IO_READ ? RIO_EGENERATION : -ENOENT;
    case -EAGAIN:
    case -EBUSY:
    case -EINTR:
        return RIO_ESERVER;
    default:
        return ret;
    }
}

/* librados result of a metadata op. */
static int xlate_meta(int ret)
{
    if (ret >= 0)
        return ret;
    switch (ret) {
    case -EAGAIN:
    case -EBUSY:
    case -EINTR:
        return RIO_ESERVER;
    default:
        return ret;
    }
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A generation nobody else will pick: random bits mixed with this client's
 * cluster-wide instance id and a counter. Never 0 ("any"). */
static uint64_t new_generation(struct rados_transport *t)
{
    uint64_t r = 0, g;

    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
        r = rio__now_ns();
    pthread_mutex_lock(&t->mu);
    t->gen_state ^= r;
    g = rio__rand(&t->gen_state);
    pthread_mutex_unlock(&t->mu);
    g ^= rados_get_instance_id(t->cl[0]) * 0x9e3779b97f4a7c15ull;
    return g ? g : 1;
}

/* ---------------------------------------------------------------- pools */

/* Index of pool name in the table, opening its ioctxs on every path if it
 * is new. Blocking (it may ask the monitor): metadata paths only. */
static int pool_get(struct rados_transport *t, const char *name)
{
    unsigned n, i, p;
    int ret;

    n = atomic_load(&t->npools);
    for (i = 0; i < n; i++)
        if (strcmp(t->pools[i].name, name) == 0)
            return (int)i;
    pthread_mutex_lock(&t->pools_mu);
    n = atomic_load(&t->npools);
    for (i = 0; i < n; i++)
        if (strcmp(t->pools[i].name, name) == 0)
            goto out;
    ret = RIO_EINVAL;
    if (n >= MAX_POOLS)
        goto err;
    struct rpool *rp = &t->pools[n];
    memset(rp, 0, sizeof(*rp));
    ret = -ENOMEM;
    rp->name = rio__strdup(name);
    if (!rp->name)
        goto err;
    for (p = 0; p < t->base.npaths; p++) {
        ret = rados_ioctx_create(t->cl[p], name, &rp->io[p]);
        if (ret < 0) {
            rp->io[p] = NULL;
            ret = xlate_meta(ret);
            goto err_io;
        }
        rados_ioctx_set_namespace(rp->io[p], RIO_RADOS_CHUNK_NS);
    }
    atomic_store(&t->npools, n + 1);
    i = n;
out:
    pthread_mutex_unlock(&t->pools_mu);
    return (int)i;
err_io:
    for (p = 0; p < t->base.npaths; p++)
        if (rp->io[p])
            rados_ioctx_destroy(rp->io[p]);
    rio__free(rp->name);
    memset(rp, 0, sizeof(*rp));
err:
    pthread_mutex_unlock(&t->pools_mu);
    return ret;
}

/* ------------------------------------------------------ placement cache */

static void centry_free(struct centry *e)
{
    if (!e)
        return;
    rio__free(e->chunk_pool);
    rio__free(e);
}

static void lru_unlink_locked(struct rados_transport *t, struct centry *e)
{
    if (e->lprev)
        e->lprev->lnext = e->lnext;
    else
        t->lru_head = e->lnext;
    if (e->lnext)
        e->lnext->lprev = e->lprev;
    else
        t->lru_tail = e->lprev;
    e->lprev = e->lnext = NULL;
}

static void lru_push_locked(struct rados_transport *t, struct centry *e)
{
    e->lprev = NULL;
    e->lnext = t->lru_head;
    if (t->lru_head)
        t->lru_head->lprev = e;
    t->lru_head = e;
    if (!t->lru_tail)
        t->lru_tail = e;
}

static struct centry **cache_slot_locked(struct rados_transport *t, const char *key, size_t keylen,
                                         uint64_t gen, uint64_t h)
{
    struct centry **pp = &t->cbuckets[h % CACHE_BUCKETS];
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->hash == h && (*pp)->generation == gen && (*pp)->keylen == keylen &&
            memcmp((*pp)->key, key, keylen) == 0)
            break;
    return pp;
}

/* Insert e (replacing an equal entry); evicts the least recently used. */
static void cache_put(struct rados_transport *t, struct centry *e)
{
    struct centry *old, *victim = NULL;
    struct centry **pp;

    pthread_mutex_lock(&t->cache_mu);
    pp = cache_slot_locked(t, e->key, e->keylen, e->generation, e->hash);
    old = *pp;
    if (old) {
        *pp = old->hnext;
        lru_unlink_locked(t, old);
        t->ncache--;
    }
    e->hnext = t->cbuckets[e->hash % CACHE_BUCKETS];
    t->cbuckets[e->hash % CACHE_BUCKETS] = e;
    lru_push_locked(t, e);
    t->ncache++;
    if (t->ncache > CACHE_MAX) {
        victim = t->lru_tail;
        lru_unlink_locked(t, victim);
        pp = cache_slot_locked(t, victim->key, victim->keylen, victim->generation, victim->hash);
        *pp = victim->hnext;
        t->ncache--;
    }
    pthread_mutex_unlock(&t->cache_mu);
    centry_free(old);
    centry_free(victim);
}

/* Transport pool index of chunk index of (key, gen), or -1 if not cached. */
static int cache_pool_of(struct rados_transport *t, const char *key, uint64_t gen, uint64_t index)
{
    size_t keylen = strlen(key);
    uint64_t h = hash_key(key, keylen, gen);
    struct centry *e;
    int pi = -1;

    pthread_mutex_lock(&t->cache_mu);
    e = *cache_slot_locked(t, key, keylen, gen, h);
    if (e && index < e->nchunks) {
        unsigned hp = e->chunk_pool ? e->chunk_pool[index] : (unsigned)(index % e->npools);
        pi = e->map[hp];
        if (e != t->lru_head) {
            lru_unlink_locked(t, e);
            lru_push_locked(t, e);
        }
    }
    pthread_mutex_unlock(&t->cache_mu);
    return pi;
}

static void cache_clear(struct rados_transport *t)
{
    struct centry *e = t->lru_head;
    while (e) {
        struct centry *n = e->lnext;
        centry_free(e);
        e = n;
    }
    t->lru_head = t->lru_tail = NULL;
    memset(t->cbuckets, 0, sizeof(t->cbuckets));
    t->ncache = 0;
}

/* -------------------------------------------------------------- chunk ops */

static int pool_grow_locked(struct rados_transport *t)
{
    struct rslab *s = rio__calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    s->next = t->slabs;
    t->slabs = s;
    for (unsigned i = 0; i < SLAB_OPS; i++) {
        s->ops[i].next = t->free_ops;
        t->free_ops = &s->ops[i];
    }
    return 0;
}

static struct rop *op_get(struct rados_transport *t)
{
    struct rop *op = NULL;

    pthread_mutex_lock(&t->mu);
    if (t->free_ops || pool_grow_locked(t) == 0) {
        op = t->free_ops;
        t->free_ops = op->next;
    }
    pthread_mutex_unlock(&t->mu);
    if (op)
        memset(op, 0, sizeof(*op));
    return op;
}

static void op_put_locked(struct rados_transport *t, struct rop *op)
{
    op->next = t->free_ops;
    t->free_ops = op;
}

/* librados thread: the op is finished; queue it for reap. */
static void on_complete(rados_completion_t c, void *arg)
{
    struct rop *op = arg;
    struct rados_transport *t = op->t;

    (void)c;
    pthread_mutex_lock(&t->mu);
    op->next = NULL;
    if (t->done_tail)
        t->done_tail->next = op;
    else
        t->done_head = op;
    t->done_tail = op;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* A streaming upload's chunk count is bounded by what one head can list
 * (about 100 bytes a chunk): a chunk beyond it could never be committed. */
#define STREAM_CHUNKS_MAX ((uint64_t)RIO_RADOS_HEAD_MAX / 100u)
#define NO_INDEX UINT64_MAX

/* Make room for chunk index in a streaming upload's per-chunk arrays. */
static int stream_grow_locked(struct rupload *up, uint64_t index)
{
    uint64_t ncap = up->cap ? up->cap : 64;
    uint16_t *pt;
    uint8_t *dn;

    while (ncap <= index)
        ncap *= 2;
    if (ncap > STREAM_CHUNKS_MAX)
        ncap = STREAM_CHUNKS_MAX;
    pt = rio__realloc(up->paths_tried, (size_t)ncap * sizeof(*pt));
    if (!pt)
        return -ENOMEM;
    up->paths_tried = pt;
    dn = rio__realloc(up->done, (size_t)ncap);
    if (!dn)
        return -ENOMEM; /* paths_tried keeps its larger block; cap is unchanged */
    up->done = dn;
    memset(pt + up->cap, 0, (size_t)(ncap - up->cap) * sizeof(*pt));
    memset(dn + up->cap, 0, (size_t)(ncap - up->cap));
    up->cap = ncap;
    return 0;
}

/*
 * A WRITE of a streaming upload (size unknown until commit): chunk index at
 * index x chunk_size, chunk_size bytes except for the one last chunk. Chunks
 * come in any order, so a second short chunk, or a chunk after the short
 * one, is refused here and a stream that ends elsewhere is refused at commit.
 */
static int stream_admit(struct rados_transport *t, struct rupload *up, const struct rio_io *io)
{
    int ret = 0;

    if (io->index >= STREAM_CHUNKS_MAX || io->index > UINT64_MAX / up->chunk_size ||
        io->len > up->chunk_size || io->off != io->index * up->chunk_size)
        return RIO_EINVAL;
    pthread_mutex_lock(&t->mu);
    if (io->len < up->chunk_size) {
        if ((up->short_index != NO_INDEX && up->short_index != io->index) ||
            io->index + 1 < up->hi || (up->short_index == io->index && up->short_len != io->len))
            ret = RIO_EINVAL;
    } else if (up->short_index != NO_INDEX && io->index >= up->short_index) {
        ret = RIO_EINVAL;
    }
    if (ret == 0 && io->index >= up->cap)
        ret = stream_grow_locked(up, io->index);
    if (ret == 0 && io->len < up->chunk_size) {
        up->short_index = io->index;
        up->short_len = io->len;
    }
    pthread_mutex_unlock(&t->mu);
    return ret;
}

static int rt_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    char name[NAME_MAX_LEN];
    struct rupload *up = NULL;
    struct rop *op;
    int pi, ret;

    if (!io || io->path >= t->base.npaths || io->len == 0 || !io->key)
        return RIO_EINVAL;
    if (io->kind == RIO_IO_WRITE) {
        up = io->upload;
        if (!up || up->magic != UPLOAD_MAGIC || !io->src)
            return RIO_EINVAL;
        if (up->stream) {
            ret = stream_admit(t, up, io);
            if (ret < 0)
                return ret;
        } else if (io->index >= up->nchunks) {
            return RIO_EINVAL;
        }
        pi = up->pools[io->index % up->npools];
        if (rio__rados_chunk_name(name, sizeof(name), up->key, up->generation, io->index) < 0)
            return RIO_EINVAL;
    } else if (io->kind == RIO_IO_READ) {
        pi = cache_pool_of(t, io->key, io->generation, io->index);
        if (pi < 0) /* not cached: this transport's own placement */
            pi = (int)(io->index % t->nwpools);
        if (rio__rados_chunk_name(name, sizeof(name), io->key, io->generation, io->index) < 0)
            return RIO_EINVAL;
    } else {
        return RIO_EINVAL;
    }
    if ((unsigned)pi >= atomic_load(&t->npools))
        return RIO_EINVAL;

    op = op_get(t);
    if (!op)
        return -ENOMEM;
    op->io = io;
    op->t = t;
    op->up = up;
    io->tpriv = op;
    if (up && (int64_t)io->index == t->fail_chunk)
        op->forced = t->fail_err;
    ret = rados_aio_create_completion2(op, on_complete, &op->comp);
    if (ret < 0)
        goto err_op;
    /* Counted before librados sees it: the op may complete (and be reaped by
     * the engine thread) before the call below returns. */
    pthread_mutex_lock(&t->mu);
    t->ctr.submitted++;
    t->ctr.inflight_ops++;
    t->ctr.inflight_bytes += io->len;
    if (up) {
        /* Recorded before the write goes out, so an abort removes it on
         * this connection whatever happens next. */
        up->paths_tried[io->index] |= (uint16_t)(1u << io->path);
        if (io->index >= up->hi)
            up->hi = io->index + 1;
    }
    pthread_mutex_unlock(&t->mu);
    rados_ioctx_t ioctx = t->pools[pi].io[io->path];
    if (up) {
        ret = rados_aio_write_full(ioctx, name, op->comp, io->src, (size_t)io->len);
    } else {
        ret = rados_aio_read(ioctx, name, op->comp, io->dst, (size_t)io->len, 0);
    }
    if (ret < 0) {
        rados_aio_release(op->comp);
        pthread_mutex_lock(&t->mu);
        t->ctr.submitted--;
        t->ctr.inflight_ops--;
        t->ctr.inflight_bytes -= io->len;
        pthread_mutex_unlock(&t->mu);
        goto err_op;
    }
    return 0;
err_op:
    io->tpriv = NULL;
    pthread_mutex_lock(&t->mu);
    op_put_locked(t, op);
    pthread_mutex_unlock(&t->mu);
    ret = (int)xlate_io(io->kind, ret);
    return ret == -EAGAIN ? RIO_ESERVER : ret;
}

/* Finish one op in the reaping thread: result, bookkeeping, complete(). */
static void op_finish(struct rados_transport *t, struct rop *op)
{
    struct rio_io *io = op->io;
    struct rupload *up = op->up;
    int ret = rados_aio_get_return_value(op->comp);
    int64_t res;

    rados_aio_release(op->comp);
    if (op->forced && ret >= 0)
        ret = op->forced;
    res = xlate_io(io->kind, ret);
    if (io->kind == RIO_IO_WRITE && res == 0)
        res = (int64_t)io->len; /* write_full returns 0 on success */
    else if (io->kind == RIO_IO_READ && res >= 0 && (uint64_t)res != io->len)
        res = RIO_ESHORT; /* a chunk object shorter than the head says */
    bool reordered = false;
    io->res = res;
    io->svc_ns = 0;
    io->tpriv = NULL;
    pthread_mutex_lock(&t->mu);
    if (up && res == (int64_t)io->len) {
        up->done[io->index] = 1;
        if (io->index + 1 < up->max_done)
            reordered = true;
        else
            up->max_done = io->index + 1;
    }
    t->ctr.completed++;
    t->ctr.inflight_ops--;
    t->ctr.inflight_bytes -= io->len;
    if (reordered)
        t->ctr.reordered++;
    op_put_locked(t, op);
    pthread_mutex_unlock(&t->mu);
    io->complete(io);
}

static void ns_deadline(struct timespec *ts, uint64_t ns)
{
    ts->tv_sec = (time_t)(ns / 1000000000ull);
    ts->tv_nsec = (long)(ns % 1000000000ull);
}

/* Shuffle knob: move finished ops to the held list; return a batch to
 * deliver, in a random order, when enough are held or they waited enough. */
static struct rop *shuffle_take_locked(struct rados_transport *t, uint64_t now, bool force)
{
    struct rop *op, *batch[64], *out = NULL;
    unsigned n = 0;

    while ((op = t->done_head)) {
        t->done_head = op->next;
        op->t_done = now;
        op->next = t->held;
        t->held = op;
        t->nheld++;
    }
    t->done_tail = NULL;
    if (!t->held)
        return NULL;
    struct rop *oldest = t->held;
    for (op = t->held; op; op = op->next)
        if (op->t_done < oldest->t_done)
            oldest = op;
    if (!force && t->nheld < SHUFFLE_HOLD && now - oldest->t_done < SHUFFLE_WAIT_NS)
        return NULL;
    while (t->held && n < 64) {
        batch[n++] = t->held;
        t->held = t->held->next;
        t->nheld--;
    }
    for (unsigned i = n; i > 1; i--) {
        unsigned j = (unsigned)(rio__rand(&t->rng) % i);
        struct rop *x = batch[i - 1];
        batch[i - 1] = batch[j];
        batch[j] = x;
    }
    for (unsigned i = n; i-- > 0;) {
        batch[i]->next = out;
        out = batch[i];
    }
    return out;
}

static int rt_reap(struct rio_transport *tt, int timeout_ms)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rop *list;
    int n = 0;
    uint64_t now = rio__now_ns();
    uint64_t until = now + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (t->shuffle) {
            list = shuffle_take_locked(t, now, false);
        } else {
            list = t->done_head;
            t->done_head = t->done_tail = NULL;
        }
        if (list || t->woken || timeout_ms <= 0 || now >= until)
            break;
        uint64_t wake = until;
        if (t->shuffle && t->held && now + SHUFFLE_WAIT_NS / 4 < wake)
            wake = now + SHUFFLE_WAIT_NS / 4;
        struct timespec ts;
        ns_deadline(&ts, wake);
        pthread_cond_timedwait(&t->cv, &t->mu, &ts);
        now = rio__now_ns();
    }
    t->woken = false;
    pthread_mutex_unlock(&t->mu);
    while (list) {
        struct rop *next = list->next;
        op_finish(t, list);
        list = next;
        n++;
    }
    return n;
}

static void rt_wake(struct rio_transport *tt)
{
    struct rados_transport *t = (struct rados_transport *)tt;

    pthread_mutex_lock(&t->mu);
    t->woken = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* librados cannot take back an op it has sent: mark it; it completes within
 * the op timeout and the engine ignores its result. */
static void rt_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rop *op;

    pthread_mutex_lock(&t->mu);
    op = io ? io->tpriv : NULL;
    if (op)
        op->cancelled = true;
    pthread_mutex_unlock(&t->mu);
}

/* ------------------------------------------------------------------ head */

/* Build the head text for an upload; *out is rio__malloc'd. */
static int head_build(struct rados_transport *t, struct rupload *up, const struct rio_desc *d,
                      char **out, size_t *outlen)
{
    size_t kenc = rio__rados_pct_len(up->key), cap, n;
    char name[NAME_MAX_LEN];
    char *buf, *p;

    /* Fixed lines, pool lines, then per chunk: "chunk " + 20 + 1 + 2 + 1 +
     * 16 + 1 + the encoded name (key, '.', 16, '.', 16) + '\n'. */
    cap = 256 + kenc;
    for (unsigned i = 0; i < up->npools; i++)
        cap += 16 + rio__rados_pct_len(t->pools[up->pools[i]].name);
    if (up->nchunks > (SIZE_MAX - cap) / (kenc + 100))
        return -ENOMEM;
    cap += (size_t)up->nchunks * (kenc + 100);
    if (cap > RIO_RADOS_HEAD_MAX)
        return RIO_EINVAL; /* too many chunks for one head: use larger chunks */
    buf = rio__malloc(cap);
    if (!buf)
        return -ENOMEM;
    p = buf;
    p += sprintf(p, "%s\nkey ", RIO_RADOS_HEAD_MAGIC);
    p = rio__rados_pct_put(p, up->key);
    p += sprintf(p,
                 "\ngeneration %016" PRIx64 "\nsize %" PRIu64 "\nchunk_size %" PRIu64
                 "\nnchunks %" PRIu64 "\netag %s\nnamespace %s\npools %u\n",
                 up->generation, up->size, up->chunk_size, up->nchunks, d->etag[0] ? d->etag : "-",
                 RIO_RADOS_CHUNK_NS, up->npools);
    for (unsigned i = 0; i < up->npools; i++) {
        p += sprintf(p, "pool %u ", i);
        p = rio__rados_pct_put(p, t->pools[up->pools[i]].name);
        *p++ = '\n';
    }
    for (uint64_t i = 0; i < up->nchunks; i++) {
        p += sprintf(p, "chunk %" PRIu64 " %u %016" PRIx64 " ", i, (unsigned)(i % up->npools),
                     d->xxh[i]);
        rio__rados_chunk_name(name, sizeof(name), up->key, up->generation, i);
        p = rio__rados_pct_put(p, name);
        *p++ = '\n';
    }
    p += sprintf(p, "end\n");
    n = (size_t)(p - buf);
    *out = buf;
    *outlen = n;
    return 0;
}

/*
 * Read key's head. Returns 0 with *buf, *len (rio__malloc'd), RIO_ENOTFOUND,
 * or an error. A head replaced while it is read shows as a size change: read
 * again.
 */
static int head_read_raw(struct rados_transport *t, const char *key, char **buf, size_t *len)
{
    size_t cap = HEAD_READ0;
    char *b = NULL;
    int ret;

    for (int tries = 0; tries < 4; tries++) {
        rio__free(b);
        b = rio__malloc(cap);
        if (!b)
            return -ENOMEM;
        ret = rados_read(t->head_io, key, b, cap, 0);
        if (ret == -ENOENT) {
            ret = RIO_ENOTFOUND;
            break;
        }
        if (ret < 0) {
            ret = xlate_meta(ret);
            break;
        }
        if ((size_t)ret < cap) {
            *buf = b;
            *len = (size_t)ret;
            return 0;
        }
        uint64_t size;
        time_t mtime;
        ret = rados_stat(t->head_io, key, &size, &mtime);
        if (ret == -ENOENT) {
            ret = RIO_ENOTFOUND;
            break;
        }
        if (ret < 0) {
            ret = xlate_meta(ret);
            break;
        }
        if (size >= RIO_RADOS_HEAD_MAX) {
            ret = RIO_EPROTO;
            break;
        }
        cap = (size_t)size + 1;
        ret = RIO_EPROTO;
    }
    rio__free(b);
    return ret;
}

/* Read and parse key's head. RIO_EPROTO: an object that is not a head. */
static int head_read(struct rados_transport *t, const char *key, struct rio__rados_head *h)
{
    char *buf;
    size_t len;
    int ret;

    ret = head_read_raw(t, key, &buf, &len);
    if (ret < 0)
        return ret;
    ret = rio__rados_head_parse(buf, len, key, h);
    rio__free(buf);
    return ret;
}

/* ---------------------------------------------------- chunk removal (sync) */

struct rm_item {
    int pool;      /* transport pool index */
    unsigned path; /* connection to send it on */
    uint64_t index;
    int ret;
};

/*
 * Remove chunk objects of (key, gen), each on its own path, REMOVE_WINDOW
 * at a time; retry those that fail (other than "already gone") until the
 * abort deadline. Returns how many could not be removed.
 */
static uint64_t remove_chunks(struct rados_transport *t, const char *key, uint64_t gen,
                              struct rm_item *items, size_t n)
{
    uint64_t deadline = rio__now_ns() + t->abort_ns, removed = 0, failed = 0;
    char name[NAME_MAX_LEN];
    rados_completion_t comp[REMOVE_WINDOW];
    size_t idx[REMOVE_WINDOW];
    unsigned backoff = 20;

    for (size_t i = 0; i < n; i++)
        items[i].ret = 1; /* pending */
    for (;;) {
        size_t k = 0, i = 0, pending = 0;
        while (i < n) {
            k = 0;
            for (; i < n && k < REMOVE_WINDOW; i++) {
                if (items[i].ret != 1 && !(items[i].ret < 0))
                    continue;
                rio__rados_chunk_name(name, sizeof(name), key, gen, items[i].index);
                if (rados_aio_create_completion2(NULL, NULL, &comp[k]) < 0) {
                    items[i].ret = -ENOMEM;
                    continue;
                }
                int r = rados_aio_remove(t->pools[items[i].pool].io[items[i].path], name, comp[k]);
                if (r < 0) {
                    rados_aio_release(comp[k]);
                    items[i].ret = r;
                    continue;
                }
                idx[k++] = i;
            }
            for (size_t j = 0; j < k; j++) {
                rados_aio_wait_for_complete(comp[j]);
                int r = rados_aio_get_return_value(comp[j]);
                rados_aio_release(comp[j]);
                if (r == 0 || r == -ENOENT)
                    removed++; /* gone, whoever removed it */
                items[idx[j]].ret = r == 0 || r == -ENOENT ? 0 : r;
            }
        }
        for (i = 0; i < n; i++)
            if (items[i].ret < 0)
                pending++;
        if (!pending || rio__now_ns() >= deadline) {
            failed = pending;
            break;
        }
        sleep_ms(backoff);
        backoff = backoff < 500 ? backoff * 2 : 500;
    }
    pthread_mutex_lock(&t->mu);
    t->ctr.removed += removed;
    t->ctr.remove_failed += failed;
    pthread_mutex_unlock(&t->mu);
    return failed;
}

/* Remove every chunk a head names (after the head itself is gone or replaced). */
static void remove_head_chunks(struct rados_transport *t, const char *key,
                               const struct rio__rados_head *h)
{
    struct rm_item *items;
    int map[MAX_HEAD_POOLS];

    if (!h->nchunks || h->nchunks > SIZE_MAX / sizeof(*items))
        return;
    for (unsigned i = 0; i < h->npools; i++)
        map[i] = pool_get(t, h->pools[i]);
    items = rio__calloc((size_t)h->nchunks, sizeof(*items));
    if (!items)
        return;
    size_t n = 0;
    for (uint64_t i = 0; i < h->nchunks; i++) {
        int pi = map[h->chunk_pool[i]];
        if (pi < 0)
            continue; /* the pool itself is gone */
        items[n].pool = pi;
        items[n].path = 0;
        items[n].index = i;
        n++;
    }
    remove_chunks(t, key, h->generation, items, n);
    rio__free(items);
}

/* ------------------------------------------------------------- metadata */

static int rt_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rio__rados_head h;
    struct centry *e;
    size_t keylen;
    int ret;

    if (!out)
        return RIO_EINVAL;
    ret = rio__key_len(key, &keylen);
    if (ret < 0)
        return ret;
    ret = head_read(t, key, &h);
    if (ret < 0)
        return ret;

    ret = -ENOMEM;
    e = rio__calloc(1, sizeof(*e) + keylen + 1);
    if (!e)
        goto err_head;
    memcpy(e->key, key, keylen + 1);
    e->keylen = keylen;
    e->generation = h.generation;
    e->hash = hash_key(key, keylen, h.generation);
    e->nchunks = h.nchunks;
    e->npools = h.npools;
    for (unsigned i = 0; i < h.npools; i++) {
        ret = pool_get(t, h.pools[i]);
        if (ret < 0)
            goto err_entry;
        e->map[i] = (uint8_t)ret;
    }
    for (uint64_t i = 0; i < h.nchunks; i++) {
        if (h.chunk_pool[i] != i % h.npools) {
            /* Not the usual round robin: keep the head's choice per chunk. */
            e->chunk_pool = h.chunk_pool;
            h.chunk_pool = NULL;
            break;
        }
    }

    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, keylen + 1);
    out->generation = h.generation;
    out->size = h.size;
    out->chunk_size = h.chunk_size;
    out->nchunks = h.nchunks;
    out->xxh = h.xxh;
    h.xxh = NULL;
    memcpy(out->etag, h.etag, sizeof(out->etag));
    rio__rados_head_cleanup(&h);
    cache_put(t, e);
    return 0;
err_entry:
    centry_free(e);
err_head:
    rio__rados_head_cleanup(&h);
    return ret;
}

static void upload_free(struct rupload *up)
{
    if (!up)
        return;
    up->magic = 0;
    rio__free(up->key);
    rio__free(up->paths_tried);
    rio__free(up->done);
    rio__free(up);
}

static int rt_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                       uint64_t chunk_size, void **upload)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rupload *up;
    size_t keylen;
    int ret;

    ret = rio__key_len(key, &keylen);
    if (ret < 0)
        return ret;
    if (!upload || chunk_size == 0)
        return RIO_EINVAL;
    /* A chunk is one RADOS object: the cluster refuses larger ones (EFBIG). */
    if (chunk_size > t->max_object)
        return RIO_EINVAL;
    up = rio__calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    ret = -ENOMEM;
    up->key = rio__strdup(key);
    if (!up->key)
        goto err;
    up->chunk_size = chunk_size;
    up->short_index = NO_INDEX;
    if (size == RIO_SIZE_UNKNOWN) {
        /* Streaming: the per-chunk arrays grow as chunks are submitted;
         * size and count come with the commit. */
        up->stream = true;
    } else {
        up->size = size;
        up->nchunks = nchunks_of(size, chunk_size);
    }
    if (up->nchunks) {
        if (up->nchunks > SIZE_MAX / sizeof(uint16_t))
            goto err;
        up->paths_tried = rio__calloc((size_t)up->nchunks, sizeof(uint16_t));
        up->done = rio__calloc((size_t)up->nchunks, 1);
        if (!up->paths_tried || !up->done)
            goto err;
        up->cap = up->nchunks;
    }
    up->npools = t->nwpools;
    for (unsigned i = 0; i < t->nwpools; i++)
        up->pools[i] = (uint8_t)i;
    up->generation = new_generation(t);
    up->magic = UPLOAD_MAGIC;
    *upload = up;
    return 0;
err:
    upload_free(up);
    return ret;
}

/* Remove every chunk object a WRITE of the upload may have created, on each
 * connection it went out on (so the remove follows the write on that
 * connection), then free the upload. up->hi bounds the chunks a WRITE went
 * out for, whether or not the size was known. */
static void upload_discard(struct rados_transport *t, struct rupload *up)
{
    struct rm_item *items = NULL;
    size_t n = 0;

    for (uint64_t i = 0; i < up->hi; i++)
        n += (size_t)__builtin_popcount(up->paths_tried[i]);
    if (n)
        items = rio__calloc(n, sizeof(*items));
    if (items) {
        n = 0;
        for (uint64_t i = 0; i < up->hi; i++)
            for (unsigned p = 0; p < t->base.npaths; p++)
                if (up->paths_tried[i] & (1u << p)) {
                    items[n].pool = up->pools[i % up->npools];
                    items[n].path = p;
                    items[n].index = i;
                    n++;
                }
        remove_chunks(t, up->key, up->generation, items, n);
        rio__free(items);
    } else if (n) {
        /* No memory for the batch: one at a time. */
        struct rm_item one;
        for (uint64_t i = 0; i < up->hi; i++)
            for (unsigned p = 0; p < t->base.npaths; p++)
                if (up->paths_tried[i] & (1u << p)) {
                    one.pool = up->pools[i % up->npools];
                    one.path = p;
                    one.index = i;
                    remove_chunks(t, up->key, up->generation, &one, 1);
                }
    }
    upload_free(up);
}

static void rt_put_abort(struct rio_transport *tt, void *upload)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rupload *up = upload;

    if (up && up->magic == UPLOAD_MAGIC)
        upload_discard(t, up);
}

/*
 * Write the head atomically over whatever head is there now, and report the
 * head it replaced (*old, valid when *had_old). The write op compares the
 * rio.gen xattr with the generation just read, so if another PUT landed in
 * between, the op fails and we read again: each writer learns exactly which
 * generation it replaced, and no chunk object is orphaned by a race.
 */
static int head_swap(struct rados_transport *t, const char *key, const char *buf, size_t len,
                     uint64_t gen, struct rio__rados_head *old, bool *had_old)
{
    char newhex[17], oldhex[17];
    int ret = 0;

    snprintf(newhex, sizeof(newhex), "%016" PRIx64, gen);
    for (int tries = 0; tries < COMMIT_TRIES; tries++) {
        bool guarded = false;
        *had_old = false;
        ret = head_read(t, key, old);
        if (ret == 0) {
            *had_old = true;
            guarded = true;
            snprintf(oldhex, sizeof(oldhex), "%016" PRIx64, old->generation);
        } else if (ret != RIO_ENOTFOUND && ret != RIO_EPROTO) {
            return ret;
        }
        rados_write_op_t op = rados_create_write_op();
        if (!op) {
            if (*had_old)
                rio__rados_head_cleanup(old);
            return -ENOMEM;
        }
        if (guarded)
            rados_write_op_cmpxattr(op, RIO_RADOS_GEN_XATTR, LIBRADOS_CMPXATTR_OP_EQ, oldhex, 16);
        else if (ret == RIO_ENOTFOUND)
            rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
        /* else: an object that is not a head sits under the key: overwrite it. */
        rados_write_op_write_full(op, buf, len);
        rados_write_op_setxattr(op, RIO_RADOS_GEN_XATTR, newhex, 16);
        ret = rados_write_op_operate(op, t->head_io, key, NULL, 0);
        rados_release_write_op(op);
        if (ret == 0)
            return 0;
        if (*had_old)
            rio__rados_head_cleanup(old);
        *had_old = false;
        if (ret != -ECANCELED && ret != -EEXIST && ret != -ENOENT && ret != -ENODATA)
            return xlate_meta(ret);
        pthread_mutex_lock(&t->mu);
        t->ctr.commits_raced++;
        pthread_mutex_unlock(&t->mu);
    }
    return RIO_ESERVER;
}

/*
 * A streaming upload learns its size at commit: check that the chunks that
 * went out are exactly those of d's geometry (none beyond the last; the one
 * short chunk, if any, is the last and has the right length), then fix the
 * size and count. Called after the fence: no WRITE of it is in flight.
 */
static int stream_close(struct rupload *up, const struct rio_desc *d)
{
    uint64_t last;

    if (d->chunk_size != up->chunk_size || d->size > INT64_MAX ||
        d->nchunks != nchunks_of(d->size, up->chunk_size) || d->nchunks > up->cap ||
        up->hi > d->nchunks)
        return RIO_EPROTO;
    last = d->nchunks ? d->size - (d->nchunks - 1) * up->chunk_size : 0;
    if (last && last < up->chunk_size) {
        if (up->short_index != d->nchunks - 1 || up->short_len != last)
            return RIO_EPROTO;
    } else if (up->short_index != NO_INDEX) {
        return RIO_EPROTO;
    }
    up->size = d->size;
    up->nchunks = d->nchunks;
    return 0;
}

static int rt_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rupload *up = upload;
    struct rio__rados_head old;
    bool had_old = false;
    char *buf = NULL;
    size_t len;
    int ret;

    if (!up || up->magic != UPLOAD_MAGIC)
        return RIO_EINVAL;
    ret = RIO_EINVAL;
    if (!d || (d->nchunks && !d->xxh))
        goto err;
    if (up->stream) {
        ret = stream_close(up, d);
        if (ret < 0)
            goto err;
    }
    ret = RIO_EPROTO;
    if (d->size != up->size || d->chunk_size != up->chunk_size || d->nchunks != up->nchunks ||
        strcmp(d->key, up->key) != 0)
        goto err;
    for (uint64_t i = 0; i < up->nchunks; i++)
        if (!up->done[i])
            goto err; /* a chunk never landed: nothing to publish */
    ret = head_build(t, up, d, &buf, &len);
    if (ret < 0)
        goto err;
    ret = head_swap(t, up->key, buf, len, up->generation, &old, &had_old);
    rio__free(buf);
    if (ret < 0)
        goto err;
    d->generation = up->generation;
    if (had_old) {
        if (old.generation != up->generation)
            remove_head_chunks(t, up->key, &old);
        rio__rados_head_cleanup(&old);
    }
    upload_free(up);
    return 0;
err:
    upload_discard(t, up);
    return ret;
}

static int rt_remove(struct rio_transport *tt, const char *key)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rio__rados_head h;
    char hex[17];
    size_t keylen;
    int ret;

    ret = rio__key_len(key, &keylen);
    if (ret < 0)
        return ret;
    for (int tries = 0; tries < COMMIT_TRIES; tries++) {
        ret = head_read(t, key, &h);
        if (ret == RIO_EPROTO) {
            /* Not a head: remove the object itself. */
            ret = rados_remove(t->head_io, key);
            return ret == -ENOENT ? RIO_ENOTFOUND : xlate_meta(ret);
        }
        if (ret < 0)
            return ret;
        rados_write_op_t op = rados_create_write_op();
        if (!op) {
            rio__rados_head_cleanup(&h);
            return -ENOMEM;
        }
        snprintf(hex, sizeof(hex), "%016" PRIx64, h.generation);
        rados_write_op_cmpxattr(op, RIO_RADOS_GEN_XATTR, LIBRADOS_CMPXATTR_OP_EQ, hex, 16);
        rados_write_op_remove(op);
        ret = rados_write_op_operate(op, t->head_io, key, NULL, 0);
        rados_release_write_op(op);
        if (ret == 0) {
            remove_head_chunks(t, key, &h);
            rio__rados_head_cleanup(&h);
            return 0;
        }
        rio__rados_head_cleanup(&h);
        if (ret != -ECANCELED && ret != -ENOENT && ret != -ENODATA)
            return xlate_meta(ret);
    }
    return RIO_ESERVER;
}

/* ------------------------------------------------------------ open/close */

static int conf_set_u64(rados_t cl, const char *opt, uint64_t v)
{
    char s[32];
    snprintf(s, sizeof(s), "%" PRIu64, v);
    return rados_conf_set(cl, opt, s);
}

struct rados_params {
    const char *conf, *id, *keyring;
    uint64_t op_timeout_s;
    const char *inject;
};

static int connect_one(const struct rados_params *pp, rados_t *out)
{
    rados_t cl;
    int ret;

    ret = rados_create(&cl, pp->id);
    if (ret < 0)
        return ret;
    ret = rados_conf_read_file(cl, pp->conf);
    if (ret < 0)
        goto err;
    ret = rados_conf_parse_env(cl, NULL);
    if (ret < 0)
        goto err;
    if (pp->keyring && (ret = rados_conf_set(cl, "keyring", pp->keyring)) < 0)
        goto err;
    /* Every op ends within the timeout, so a dead OSD or monitor is an
     * error and not a hang; the engine's budget bounds what is in flight,
     * so librados' own throttle (which would block submit) is lifted. */
    if ((ret = conf_set_u64(cl, "rados_osd_op_timeout", pp->op_timeout_s)) < 0 ||
        (ret = conf_set_u64(cl, "rados_mon_op_timeout", pp->op_timeout_s)) < 0 ||
        (ret = conf_set_u64(cl, "client_mount_timeout", pp->op_timeout_s)) < 0 ||
        (ret = conf_set_u64(cl, "objecter_inflight_op_bytes", 1ull << 40)) < 0 ||
        (ret = conf_set_u64(cl, "objecter_inflight_ops", 1u << 20)) < 0)
        goto err;
    ret = rados_connect(cl);
    if (ret < 0)
        goto err;
    if (pp->inject && (ret = rados_conf_set(cl, "ms_inject_socket_failures", pp->inject)) < 0)
        goto err;
    *out = cl;
    return 0;
err:
    rados_shutdown(cl);
    return ret;
}

static void rt_close(struct rio_transport *tt)
{
    struct rados_transport *t = rt_cast(tt);

    if (!t)
        return;
    unsigned n = atomic_load(&t->npools);
    for (unsigned i = 0; i < n; i++) {
        for (unsigned p = 0; p < t->base.npaths; p++)
            if (t->pools[i].io[p])
                rados_ioctx_destroy(t->pools[i].io[p]);
        rio__free(t->pools[i].name);
    }
    if (t->head_io)
        rados_ioctx_destroy(t->head_io);
    for (unsigned p = 0; p < RIO_MAX_PATHS; p++)
        if (t->cl[p])
            rados_shutdown(t->cl[p]);
    /* The engine reaps every op before closing; release any stragglers. */
    for (struct rop *op = t->done_head; op; op = op->next)
        rados_aio_release(op->comp);
    for (struct rop *op = t->held; op; op = op->next)
        rados_aio_release(op->comp);
    while (t->slabs) {
        struct rslab *s = t->slabs;
        t->slabs = s->next;
        rio__free(s);
    }
    cache_clear(t);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->cache_mu);
    pthread_mutex_destroy(&t->pools_mu);
    rio__free(t);
}

static int parse_duration_s(const char *v, uint64_t *out_s)
{
    uint64_t ns;
    if (rio__parse_duration_ns(v, &ns) < 0 || ns == 0)
        return RIO_EINVAL;
    *out_s = (ns + 999999999ull) / 1000000000ull;
    return 0;
}

static int rt_open(const struct rio_url *u, const struct rio_options *o, struct rio_transport **out)
{
    struct rados_transport *t;
    struct rados_params pp = {0};
    pthread_condattr_t ca;
    const char *s;
    uint64_t v, abort_s;
    unsigned npaths;
    int ret;

    if (!u || !out || !u->authority || !*u->authority)
        return RIO_EURL; /* rados://POOL */
    if (u->path && *u->path)
        return RIO_EURL; /* the key comes per call */

    /* Parameters. */
    pp.conf = rio__url_param(u, "conf");
    if (!pp.conf || !*pp.conf) {
        const char *e = getenv("RIO_CEPH_CONF");
        pp.conf = e && *e ? e : NULL; /* NULL: librados' search ($CEPH_CONF, /etc/ceph) */
    }
    pp.id = rio__url_param(u, "id");
    if (pp.id && !*pp.id)
        return RIO_EINVAL;
    if (pp.id && strncmp(pp.id, "client.", 7) == 0)
        pp.id += 7;
    if (!pp.id)
        pp.id = "admin";
    pp.keyring = rio__url_param(u, "keyring");
    pp.op_timeout_s = o && o->op_timeout_ms ? (o->op_timeout_ms + 999u) / 1000u : 10;
    if ((s = rio__url_param(u, "timeout")) && parse_duration_s(s, &pp.op_timeout_s) < 0)
        return RIO_EINVAL;
    abort_s = pp.op_timeout_s * 3 > 10 ? pp.op_timeout_s * 3 : 10;
    if ((s = rio__url_param(u, "abort_timeout")) && parse_duration_s(s, &abort_s) < 0)
        return RIO_EINVAL;
    if ((s = rio__url_param(u, "inject_socket_failures"))) {
        if (rio__parse_size(s, &v) < 0 || v > INT_MAX)
            return RIO_EINVAL;
        pp.inject = s;
    }
    npaths = o && o->paths ? o->paths : 1;
    if (npaths > RIO_MAX_PATHS)
        return RIO_EINVAL;

    t = rio__calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->base.ops = &rio__rados_ops;
    t->base.npaths = npaths;
    t->abort_ns = abort_s * 1000000000ull;
    t->fail_chunk = -1;
    t->rng = o && o->seed ? o->seed : 0x7261646f73ull;
    t->gen_state = rio__now_ns() ^ (uint64_t)(uintptr_t)t;
    if ((s = rio__url_param(u, "fail_chunk"))) {
        ret = RIO_EINVAL;
        if (rio__parse_size(s, &v) < 0 || v > INT64_MAX)
            goto err_free;
        t->fail_chunk = (int64_t)v;
        t->fail_err = -EIO;
        if ((s = rio__url_param(u, "fail_error"))) {
            int e = rio__err_from_name(s);
            if (e >= 0)
                goto err_free;
            t->fail_err = e;
        }
    }
    if ((s = rio__url_param(u, "shuffle")) && strcmp(s, "0") != 0)
        t->shuffle = true;

    ret = -pthread_mutex_init(&t->pools_mu, NULL);
    if (ret < 0)
        goto err_free;
    ret = -pthread_mutex_init(&t->cache_mu, NULL);
    if (ret < 0)
        goto err_pools_mu;
    ret = -pthread_mutex_init(&t->mu, NULL);
    if (ret < 0)
        goto err_cache_mu;
    ret = -pthread_condattr_init(&ca);
    if (ret < 0)
        goto err_mu;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    ret = -pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (ret < 0)
        goto err_mu;
    ret = pool_grow_locked(t);
    if (ret < 0)
        goto err_cv;

    /* From here rt_close undoes everything. */
    for (unsigned p = 0; p < npaths; p++) {
        ret = connect_one(&pp, &t->cl[p]);
        if (ret < 0) {
            t->cl[p] = NULL;
            ret = ret == -ENOENT && p == 0 && pp.conf ? -ENOENT : xlate_meta(ret);
            goto err_close;
        }
    }
    ret = rados_ioctx_create(t->cl[0], u->authority, &t->head_io);
    if (ret < 0) {
        t->head_io = NULL;
        goto err_close;
    }
    if ((s = rio__url_param(u, "pools")) && *s) {
        /* PUTs spread chunks over these pools, which take the first entries
         * of the pool table in the order given; the URL's pool holds heads. */
        char *list = rio__strdup(s), *save = NULL, *tok;
        ret = -ENOMEM;
        if (!list)
            goto err_close;
        for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            ret = t->nwpools < MAX_HEAD_POOLS ? pool_get(t, tok) : RIO_EINVAL;
            if (ret >= 0 && (unsigned)ret != t->nwpools)
                ret = RIO_EINVAL; /* listed twice */
            if (ret < 0)
                break;
            t->nwpools++;
        }
        rio__free(list);
        if (ret < 0)
            goto err_close;
    }
    ret = pool_get(t, u->authority);
    if (ret < 0)
        goto err_close;
    if (t->nwpools == 0)
        t->nwpools = 1;
    if ((s = rio__url_param(u, "max_object"))) {
        ret = RIO_EINVAL;
        if (rio__parse_size(s, &t->max_object) < 0 || t->max_object == 0)
            goto err_close;
    } else {
        char val[64];
        t->max_object = 128ull << 20;
        if (rados_conf_get(t->cl[0], "osd_max_object_size", val, sizeof(val)) == 0 &&
            rio__parse_size(val, &v) == 0 && v > 0)
            t->max_object = v;
    }
    *out = &t->base;
    return 0;

err_close:
    rt_close(&t->base);
    return ret;
err_cv:
    pthread_cond_destroy(&t->cv);
err_mu:
    pthread_mutex_destroy(&t->mu);
err_cache_mu:
    pthread_mutex_destroy(&t->cache_mu);
err_pools_mu:
    pthread_mutex_destroy(&t->pools_mu);
err_free:
    rio__free(t);
    return ret;
}

void rio__rados_counters(struct rio_transport *tt, struct rio_rados_counters *out)
{
    struct rados_transport *t = rt_cast(tt);

    if (!out)
        return;
    if (!t) {
        memset(out, 0, sizeof(*out));
        return;
    }
    pthread_mutex_lock(&t->mu);
    *out = t->ctr;
    pthread_mutex_unlock(&t->mu);
}

const struct rio_transport_ops rio__rados_ops = {
    .scheme = "rados",
    .caps = RIO_CAP_ETAG | RIO_CAP_STREAM_PUT,
    .open = rt_open,
    .close = rt_close,
    .submit = rt_submit,
    .reap = rt_reap,
    .wake = rt_wake,
    .cancel = rt_cancel,
    .lookup = rt_lookup,
    .put_open = rt_put_open,
    .put_commit = rt_put_commit,
    .put_abort = rt_put_abort,
    .remove = rt_remove,
};
