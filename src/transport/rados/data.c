/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: the data path. Chunk ops are librados aio on the path's own
 * cluster connection; their completion callbacks (librados threads) queue
 * the op and signal reap, which calls complete() in the engine thread.
 * librados cannot abort an op it has sent: cancel marks it and it completes
 * within the op timeout.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/internal.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/internal.h"
#include "transport/transport.h"

/* librados result of a chunk op -> the engine's codes. */
static int64_t xlate_io(int kind, int ret)
{
    /* A READ names a generation: its chunk is gone, so is the generation. */
    if (ret == -ENOENT && kind == RIO_IO_READ)
        return RIO_EGENERATION;
    return rio__rados_xlate(ret);
}

/* -------------------------------------------------------------- chunk ops */

static struct rop *op_get(struct rados_transport *t)
{
    struct rop *op;

    pthread_mutex_lock(&t->mu);
    op = rio__opool_get(&t->pool);
    pthread_mutex_unlock(&t->mu);
    return op;
}

static void op_release_wop(struct rop *op)
{
    if (op->wop)
        rados_release_write_op(op->wop);
    op->wop = NULL;
    if (op->rop)
        rados_release_read_op(op->rop);
    op->rop = NULL;
}

static void op_put_locked(struct rados_transport *t, struct rop *op)
{
    rio__opool_put(&t->pool, op);
}

/* librados thread: the op is finished; queue it for reap. */
static void on_complete(rados_completion_t c, void *arg)
{
    struct rop *op = arg;
    struct rados_transport *t = op->t;

    (void)c;
    pthread_mutex_lock(&t->mu);
    rio_list_push_back(&t->done, &op->dnode);
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* A streaming upload's chunk count is bounded by what one head can list
 * (about 100 bytes a chunk): a chunk beyond it could never be committed. */
#define STREAM_CHUNKS_MAX ((uint64_t)RIO_RADOS_HEAD_MAX / 100u)

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

int rio__rados_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    char name[NAME_MAX_LEN];
    struct rupload *up = NULL;
    struct rop *op;
    bool placed = false;
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
        /* A composed object's chunks have the names its head lists: the
         * cache has them. Not cached: this transport's own placement and
         * the derived name (a composed object's READ then finds nothing,
         * RIO_EGENERATION, and the engine looks it up again). */
        pi = rio__rados_cache_pool_of(t, io->key, io->generation, io->index, name, sizeof(name));
        placed = pi >= 0;
        if (pi < 0)
            pi = (int)(io->index % t->nwpools);
        if (!name[0] &&
            rio__rados_chunk_name(name, sizeof(name), io->key, io->generation, io->index) < 0)
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
    op->placed = placed;
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
        op->wop = rados_create_write_op();
        if (op->wop) {
            rados_write_op_write_full(op->wop, io->src, (size_t)io->len);
            ret = rados_aio_write_op_operate(op->wop, ioctx, op->comp, name, NULL, WOP_FLAGS);
        } else {
            ret = -ENOMEM;
        }
    } else {
        /* The object's length with the read, in the same op: a chunk object
         * longer than its chunk was written by no PUT of this generation,
         * and its first bytes matching the checksum does not make it one. */
        op->rop = rados_create_read_op();
        if (op->rop) {
            op->rsize = 0;
            op->rbytes = 0;
            rados_read_op_stat(op->rop, &op->rsize, &op->rmtime, &op->rstat_rv);
            rados_read_op_read(op->rop, 0, (size_t)io->len, io->dst, &op->rbytes, &op->rread_rv);
            ret = rados_aio_read_op_operate(op->rop, ioctx, op->comp, name, 0);
        } else {
            ret = -ENOMEM;
        }
    }
    if (ret < 0) {
        rados_aio_release(op->comp);
        op_release_wop(op);
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

    if (io->kind == RIO_IO_READ && ret >= 0) {
        /* A read op returns 0, not the bytes: those are in rbytes. */
        if (op->rsize > io->len)
            ret = RIO_ECHECKSUM; /* the object is not the chunk the head names */
        else
            ret = (int)op->rbytes;
    }
    rados_aio_release(op->comp);
    op_release_wop(op);
    if (op->forced && ret >= 0)
        ret = op->forced;
    res = xlate_io(io->kind, ret);
    /* Gone although the head named it: its generation was replaced (the
     * usual case), or the object is damaged. The next lookup tells which. */
    if (io->kind == RIO_IO_READ && ret == -ENOENT && op->placed)
        rio__rados_missing_note(t, io->key, io->generation, io->index);
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
        uint64_t now = rio__now_ns();
        if (now - up->last_write_ns > up->max_gap_ns)
            up->max_gap_ns = now - up->last_write_ns;
        up->last_write_ns = now;
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
static void shuffle_take_locked(struct rados_transport *t, uint64_t now, bool force,
                                struct rio_list *out)
{
    struct rop *op, *batch[64];
    struct rio_list_node *d;
    unsigned n = 0;

    while ((d = rio_list_pop_front(&t->done))) {
        op = rio_container_of(d, struct rop, dnode);
        op->t_done = now;
        op->next = t->held;
        t->held = op;
        t->nheld++;
    }
    if (!t->held)
        return;
    struct rop *oldest = t->held;
    for (op = t->held; op; op = op->next)
        if (op->t_done < oldest->t_done)
            oldest = op;
    if (!force && t->nheld < SHUFFLE_HOLD && now - oldest->t_done < SHUFFLE_WAIT_NS)
        return;
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
    for (unsigned i = 0; i < n; i++)
        rio_list_push_back(out, &batch[i]->dnode);
}

int rio__rados_reap(struct rio_transport *tt, int timeout_ms)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rio_list list = {0};
    struct rio_list_node *d;
    int n = 0;
    uint64_t now = rio__now_ns();
    uint64_t until = now + (uint64_t)(timeout_ms > 0 ? timeout_ms : 0) * 1000000ull;

    pthread_mutex_lock(&t->mu);
    for (;;) {
        if (t->shuffle) {
            shuffle_take_locked(t, now, false, &list);
        } else {
            list = t->done;
            rio_list_init(&t->done);
        }
        if (!rio_list_empty(&list) || t->woken || timeout_ms <= 0 || now >= until)
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
    while ((d = rio_list_pop_front(&list))) {
        op_finish(t, rio_container_of(d, struct rop, dnode));
        n++;
    }
    return n;
}

void rio__rados_wake(struct rio_transport *tt)
{
    struct rados_transport *t = (struct rados_transport *)tt;

    pthread_mutex_lock(&t->mu);
    t->woken = true;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
}

/* librados cannot take back an op it has sent: mark it; it completes within
 * the op timeout and the engine ignores its result. */
void rio__rados_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rop *op;

    pthread_mutex_lock(&t->mu);
    op = io ? io->tpriv : NULL;
    if (op)
        op->cancelled = true;
    pthread_mutex_unlock(&t->mu);
}
