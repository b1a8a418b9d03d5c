/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data loop: one io_uring ring per path, its op slots and bounce
 * buffers, steps (O_DIRECT or buffered, continued after a short step),
 * submit, cancel, wake and the one reaping thread.
 */
#include "transport/file/internal.h"

/* ----------------------------------------------------------------- rings */

void rio__file_ring_destroy(struct fring *r)
{
    if (r->ring_ok)
        io_uring_queue_exit(&r->ring);
    r->ring_ok = false;
    if (r->mu_ok)
        pthread_mutex_destroy(&r->mu);
    r->mu_ok = false;
    rio__free(r->ops);
    rio__free(r->bounce);
    r->ops = NULL;
    r->bounce = NULL;
}

int rio__file_ring_init(struct ftransport *t, struct fring *r)
{
    unsigned entries = 8;
    int ret;

    while (entries < 2 * t->depth + 2)
        entries *= 2;
    r->ops = rio__calloc(t->depth, sizeof(*r->ops));
    if (!r->ops)
        return -ENOMEM;
    for (unsigned i = t->depth; i-- > 0;) {
        r->ops[i].slot = (uint16_t)i;
        r->ops[i].ring = r;
        r->ops[i].next = r->free_ops;
        r->free_ops = &r->ops[i];
    }
    ret = -pthread_mutex_init(&r->mu, NULL);
    if (ret < 0)
        return ret;
    r->mu_ok = true;
    /* CQ twice the SQ (the default): room for every op and one cancel each. */
    ret = io_uring_queue_init(entries, &r->ring, 0);
    if (ret < 0) {
        /* Refused outright (EPERM, ENOSYS): "operation not permitted" alone
         * reads as the directory's permissions. */
        if (ret == -EPERM || ret == -ENOSYS || ret == -EACCES)
            rio__detail("file://: io_uring_setup: %s: io_uring is disabled here "
                        "(kernel.io_uring_disabled, or a seccomp profile such as a container "
                        "runtime's default) and file:// moves its bytes with it",
                        strerror(-ret));
        else
            rio__detail("file://: io_uring_setup (%u entries): %s", entries, strerror(-ret));
        return ret;
    }
    r->ring_ok = true;
    ret = io_uring_register_eventfd(&r->ring, t->cq_efd);
    if (ret < 0)
        return ret;
    return 0;
}

/* Allocate (once) and register the ring's bounce buffers. Under r->mu. */
void rio__file_bounce_setup_locked(struct ftransport *t, struct fring *r)
{
    struct iovec iov[FILE_BOUNCE_SLOTS];
    unsigned n;

    if (r->bounce_tried)
        return;
    r->bounce_tried = true;
    n = t->bounce_slots;
    /* One region for all slots: rio__alloc_aligned gives regions of 2 MiB or
     * more transparent huge pages, so a step's buffer is physically
     * contiguous and the device sees one segment instead of one per page. */
    size_t sz = ((size_t)n * t->bounce_size + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    r->bounce = rio__alloc_aligned(4096, sz);
    if (!r->bounce)
        return; /* unaligned memory falls back to buffered steps */
    for (unsigned i = 0; i < n; i++) {
        iov[i].iov_base = r->bounce + (size_t)i * t->bounce_size;
        iov[i].iov_len = t->bounce_size;
    }
    /* Registered buffers spare the kernel pinning pages per I/O. They are the
     * transport's own memory, alive until the ring is gone. */
    r->bounce_reg = io_uring_register_buffers(&r->ring, iov, n) == 0;
    if (!r->bounce_reg) /* registering faults every page in; else touch them now */
        for (size_t off = 0; off < sz; off += 4096)
            r->bounce[off] = 0;
    r->nbounce = n;
    r->bounce_free = n >= 64 ? UINT64_MAX : (1ull << n) - 1;
}

static int bounce_take_locked(struct ftransport *t, struct fring *r)
{
    int i;

    if (!t->bounce_size)
        return -1;
    rio__file_bounce_setup_locked(t, r);
    if (!r->bounce_free)
        return -1;
    i = __builtin_ctzll(r->bounce_free);
    r->bounce_free &= ~(1ull << i);
    return i;
}

static void bounce_put_locked(struct fring *r, int i)
{
    if (i >= 0)
        r->bounce_free |= 1ull << i;
}

/* An op done with: its file and upload references dropped, its slot free
 * (the caller puts it on the free list where it keeps one). */
static void op_free_locked(struct ftransport *t, struct fop *op)
{
    if (op->f)
        rio__file_release(t, op->f);
    if (op->up)
        rio__file_upload_unref(t, op->up);
    op->f = NULL;
    op->up = NULL;
    op->state = OP_FREE;
}

static uint8_t *bounce_ptr(struct ftransport *t, struct fring *r, int i)
{
    return r->bounce + (size_t)i * t->bounce_size;
}

/* Hand prepared SQEs to the kernel. A failure (-EAGAIN, -EBUSY, -EINTR) leaves
 * them in the SQ; reap tries again. */
static void ring_flush_locked(struct fring *r)
{
    int ret = io_uring_submit(&r->ring);

    r->ctr.submits++;
    if (ret >= 0)
        r->unsubmitted = 0;
    else
        r->unsubmitted = 1;
}

static struct io_uring_sqe *sqe_get_locked(struct fring *r)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

    if (!sqe) {
        ring_flush_locked(r);
        sqe = io_uring_get_sqe(&r->ring);
    }
    return sqe;
}

/* ------------------------------------------------------------------ steps */

/*
 * Queue the next step of op: from io->off + done, what is left of the chunk.
 * Direct when the file has an O_DIRECT descriptor and the step starts on a
 * unit boundary with at least one whole unit left; buffered otherwise. A
 * direct step goes through a bounce buffer when the caller's memory is not
 * aligned for O_DIRECT, and with stage=1 also when it is (and the step fits
 * one buffer): the device then gets one contiguous, registered segment
 * instead of one per 4 KiB page of the caller's memory, for the price of a
 * copy (docs/file.md, "Staging"). Returns 0 or an error (the op then ends
 * with it).
 */
static int step_queue_locked(struct ftransport *t, struct fring *r, struct fop *op)
{
    struct rio_io *io = op->io;
    bool rd = io->kind == RIO_IO_READ;
    uint64_t pos = io->off + op->done, rem = io->len - op->done, n;
    uint8_t *mem = rd ? (uint8_t *)io->dst + op->done : (uint8_t *)(uintptr_t)io->src + op->done;
    int fd = rd ? op->f->fd : op->up->fd, dfd = rd ? op->f->dfd : op->up->dfd;
    uint32_t unit = rd ? op->f->unit : op->up->unit, mal = rd ? op->f->mem : op->up->mem;
    struct io_uring_sqe *sqe;
    uint8_t *buf = mem;
    int b = -1;
    bool direct = false;

    n = min_u64(rem, FILE_STEP_MAX);
    if (dfd >= 0 && !op->no_direct && pos % unit == 0 && rem >= unit) {
        n = min_u64(rem - rem % unit, FILE_STEP_MAX);
        bool aligned = (uintptr_t)mem % mal == 0;
        bool stage = rd ? op->f->stage : op->up->stage;
        if (aligned && (!stage || n > t->bounce_size || (b = bounce_take_locked(t, r)) < 0)) {
            direct = true;
        } else if (aligned) {
            direct = true;
            buf = bounce_ptr(t, r, b);
            if (!rd)
                memcpy(buf, mem, (size_t)n);
        } else if (t->bounce_size >= unit && (b = bounce_take_locked(t, r)) >= 0) {
            direct = true;
            n = min_u64(n, t->bounce_size - t->bounce_size % unit);
            buf = bounce_ptr(t, r, b);
            if (!rd)
                memcpy(buf, mem, (size_t)n);
        } else {
            /* No bounce buffer free: this step goes buffered. It covers whole
             * units, so it shares no page with a direct step either. */
        }
    }
    sqe = sqe_get_locked(r);
    if (!sqe) {
        bounce_put_locked(r, b);
        return -EBUSY;
    }
    if (b >= 0 && r->bounce_reg) {
        if (rd)
            io_uring_prep_read_fixed(sqe, dfd, buf, (unsigned)n, pos, b);
        else
            io_uring_prep_write_fixed(sqe, dfd, buf, (unsigned)n, pos, b);
    } else if (rd) {
        io_uring_prep_read(sqe, direct ? dfd : fd, buf, (unsigned)n, pos);
    } else {
        io_uring_prep_write(sqe, direct ? dfd : fd, buf, (unsigned)n, pos);
    }
    if (b >= 0) {
        r->ctr.steps_bounce++;
        r->ctr.steps_fixed += r->bounce_reg;
    } else if (direct) {
        r->ctr.steps_direct++;
    } else {
        r->ctr.steps_buffered++;
    }
    if (op->done)
        r->ctr.continuations++;
    op->ud = (uint64_t)op->slot << UD_SLOT_SHIFT | (++r->seq & UD_SEQ_MASK);
    io_uring_sqe_set_data64(sqe, op->ud);
    op->cur_len = (uint32_t)n;
    op->cur_direct = direct;
    op->bounce = b;
    op->state = OP_RUN;
    return 0;
}

/*
 * A step of op ended with res. Either queue the next step (returns false) or
 * end the op with op->res set (returns true). Under r->mu.
 */
static bool step_done_locked(struct ftransport *t, struct fring *r, struct fop *op, int res)
{
    struct rio_io *io = op->io;
    uint8_t *mem;
    int ret;

    if (op->bounce >= 0) {
        if (res > 0 && io->kind == RIO_IO_READ && (uint32_t)res <= op->cur_len) {
            mem = (uint8_t *)io->dst + op->done;
            memcpy(mem, bounce_ptr(t, r, op->bounce), (size_t)res);
        }
        bounce_put_locked(r, op->bounce);
        op->bounce = -1;
    }
    if (res == -EINVAL && op->cur_direct && t->direct == DIRECT_AUTO) {
        /* The file system refused this direct step: redo it buffered, and stay
         * buffered for the rest of the op. */
        op->no_direct = true;
        r->ctr.direct_einval++;
        res = -EAGAIN;
    }
    if (res == -EAGAIN || res == -EINTR) {
        if (++op->eagain <= FILE_EAGAIN_MAX && !op->cancel_req) {
            ret = step_queue_locked(t, r, op);
            if (ret == 0)
                return false;
            op->res = ret;
            return true;
        }
        op->res = op->cancel_req ? -ECANCELED : res;
        return true;
    }
    if (res < 0) {
        op->res = res;
        return true;
    }
    if (res == 0 || (uint32_t)res > op->cur_len) {
        /* EOF before len (the file is shorter than the read says), or a
         * count larger than asked: never success. */
        op->res = res == 0 ? RIO_ESHORT : RIO_EPROTO;
        return true;
    }
    op->done += (uint64_t)res;
    if (op->done == io->len) {
        op->res = (int64_t)io->len;
        return true;
    }
    if (op->cancel_req) {
        op->res = -ECANCELED;
        return true;
    }
    ret = step_queue_locked(t, r, op);
    if (ret == 0)
        return false;
    op->res = ret;
    return true;
}

/* ------------------------------------------------------------ submit etc */

/* Room in a streaming upload's bitmap for chunk index. Under t->fmu. */
static int written_grow_locked(struct fupload *up, uint64_t index)
{
    uint64_t bits;
    uint8_t *w;

    if (index < up->wbits)
        return 0;
    bits = up->wbits * 2 > index + 1 ? up->wbits * 2 : index + 1;
    bits = (bits + 63) & ~(uint64_t)63;
    w = rio__calloc(1, (size_t)(bits / 8));
    if (!w)
        return -ENOMEM;
    memcpy(w, up->written, (size_t)(up->wbits / 8));
    rio__free(up->written);
    up->written = w;
    up->wbits = bits;
    return 0;
}

static int check_write(struct ftransport *t, struct fupload *up, const struct rio_io *io)
{
    uint64_t want;
    int ret;

    if (up->stream) {
        /* Any order, total unknown: a whole chunk, or a shorter one that
         * put_commit checks is the last. */
        if (io->off % up->chunk_size || io->off / up->chunk_size != io->index ||
            io->len > up->chunk_size || io->off > up->limit || io->len > up->limit - io->off)
            return RIO_EPROTO;
        pthread_mutex_lock(&t->fmu);
        ret = written_grow_locked(up, io->index);
        pthread_mutex_unlock(&t->fmu);
        return ret;
    }
    if (io->off > up->size || io->len > up->size - io->off || io->index >= up->nchunks ||
        io->off / up->chunk_size != io->index || io->off % up->chunk_size)
        return RIO_EPROTO;
    want = min_u64(up->chunk_size, up->size - io->off);
    return io->len == want ? 0 : RIO_EPROTO;
}

int rio__file_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct ftransport *t = ft(tt);
    struct ffile *f = NULL;
    struct fupload *up = NULL;
    struct fring *r;
    struct fop *op;
    int ret;

    if (!io || io->path >= t->base.npaths || !io->complete || io->len == 0)
        return -EINVAL;
    if (io->kind == RIO_IO_READ) {
        if (!io->key || !io->dst)
            return -EINVAL;
        ret = rio__file_get(t, io->key, io->generation, &f);
        if (ret < 0)
            return ret;
        if (io->off > f->size || io->len > f->size - io->off) {
            rio__file_release(t, f);
            return RIO_EPROTO;
        }
    } else if (io->kind == RIO_IO_WRITE) {
        up = io->upload;
        if (!up || up->magic != UPLOAD_MAGIC || !io->src)
            return -EINVAL;
        ret = check_write(t, up, io);
        if (ret < 0)
            return ret;
    } else {
        return -EINVAL;
    }

    r = &t->rings[io->path];
    pthread_mutex_lock(&r->mu);
    op = r->free_ops;
    if (!op) {
        pthread_mutex_unlock(&r->mu);
        if (f)
            rio__file_release(t, f);
        return -EAGAIN;
    }
    r->free_ops = op->next;
    op->io = io;
    op->f = f;
    op->up = up;
    op->next = NULL;
    op->done = 0;
    op->res = 0;
    op->bounce = -1;
    op->eagain = 0;
    op->cancel_req = false;
    op->no_direct = false;
    op->t0 = rio__now_ns();
    ret = step_queue_locked(t, r, op);
    if (ret < 0) {
        op->state = OP_FREE;
        op->io = NULL;
        op->next = r->free_ops;
        r->free_ops = op;
        pthread_mutex_unlock(&r->mu);
        if (f)
            rio__file_release(t, f);
        return ret;
    }
    if (up) {
        pthread_mutex_lock(&t->fmu);
        up->refs++;
        pthread_mutex_unlock(&t->fmu);
    }
    r->inflight++;
    io->tpriv = op;
    /* The SQE waits in the SQ: the engine submits a burst of ops and then
     * reaps, and reap hands the whole burst to the kernel in one system call
     * (ring_harvest). One io_uring_enter per op cost as much as the rest of
     * the transport's CPU per op. */
    r->unsubmitted = 1;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static void kick(int efd)
{
    uint64_t one = 1;
    ssize_t n;

    do
        n = write(efd, &one, sizeof(one));
    while (n < 0 && errno == EINTR);
}

/* op asked to stop: its step in flight gets a cancel SQE (queued, not
 * flushed); whether one was queued. */
static bool step_cancel_locked(struct fring *r, struct fop *op)
{
    struct io_uring_sqe *sqe;

    op->cancel_req = true;
    sqe = sqe_get_locked(r);
    if (!sqe)
        return false;
    io_uring_prep_cancel64(sqe, op->ud, 0);
    io_uring_sqe_set_data64(sqe, UD_CANCEL_SLOT << UD_SLOT_SHIFT);
    r->cancels++;
    return true;
}

void rio__file_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct ftransport *t = ft(tt);
    struct fring *r;
    struct fop *op;

    if (!io || io->path >= t->base.npaths)
        return;
    r = &t->rings[io->path];
    pthread_mutex_lock(&r->mu);
    op = io->tpriv;
    if (!op || op->io != io || op->cancel_req || op->state != OP_RUN) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    /* The step in flight is asked to stop; whatever it reaches, the op ends
     * when its CQE comes (no further step is queued once cancel_req is set). */
    if (step_cancel_locked(r, op)) {
        r->ctr.cancels++;
        ring_flush_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
}

void rio__file_wake(struct rio_transport *tt)
{
    kick(ft(tt)->wake_efd);
}

/* An op's I/O is over: the checks that need no ring lock. */
static void op_finish(struct ftransport *t, struct fop *op)
{
    struct rio_io *io = op->io;
    struct stat st;

    if (io->kind == RIO_IO_READ && op->res != -ECANCELED) {
        /* Modified or replaced while we read it: never hand back a mix. */
        uint64_t size = 0;
        if (fstat(op->f->fd, &st) < 0)
            op->res = -errno;
        else if (rio__file_fd_size(op->f->fd, &st, &size) < 0 ||
                 rio__file_gen_of(&st, size) != op->f->gen)
            op->res = RIO_EGENERATION;
    }
    if (io->kind == RIO_IO_WRITE && op->res == (int64_t)io->len) {
        struct fupload *up = op->up;
        pthread_mutex_lock(&t->fmu);
        up->written[io->index / 8] |= (uint8_t)(1u << (io->index % 8));
        if (up->stream && io->len < up->chunk_size) {
            if (up->has_short && (up->short_idx != io->index || up->short_len != io->len))
                up->bad_short = true;
            up->has_short = true;
            up->short_idx = io->index;
            up->short_len = io->len;
        }
        pthread_mutex_unlock(&t->fmu);
    }
}

/*
 * Take what ring r has finished: CQEs, a failed flush to retry. Finished ops
 * go on *fin (still owning their slots).
 */
static void ring_harvest(struct ftransport *t, struct fring *r, struct fop **fin)
{
    struct io_uring_cqe *cqes[64];
    unsigned n, i;

    pthread_mutex_lock(&r->mu);
    if (r->unsubmitted)
        ring_flush_locked(r);
    for (;;) {
        n = io_uring_peek_batch_cqe(&r->ring, cqes, 64);
        if (n == 0)
            break;
        for (i = 0; i < n; i++) {
            uint64_t ud = io_uring_cqe_get_data64(cqes[i]);
            uint64_t slot = ud >> UD_SLOT_SHIFT;
            int res = cqes[i]->res;
            struct fop *op;

            if (slot == UD_CANCEL_SLOT) {
                r->cancels--;
                continue;
            }
            if (slot >= t->depth)
                continue; /* not ours: cannot happen */
            op = &r->ops[slot];
            if (op->state != OP_RUN || op->ud != ud)
                continue; /* a stale completion: cannot happen either */
            if (!step_done_locked(t, r, op, res))
                continue;
            op->state = OP_FINISH;
            op->next = *fin;
            *fin = op;
        }
        io_uring_cq_advance(&r->ring, n);
    }
    if (r->unsubmitted || io_uring_sq_ready(&r->ring))
        ring_flush_locked(r);
    pthread_mutex_unlock(&r->mu);
}

/* Harvest every ring and complete what ended. Returns the count. Only the
 * reaping thread. */
static int drain(struct ftransport *t)
{
    uint64_t now = rio__now_ns();
    unsigned nready = 0;

    for (unsigned pi = 0; pi < t->base.npaths; pi++) {
        struct fring *r = &t->rings[pi];
        struct fop *fin = NULL, *op, *next;

        ring_harvest(t, r, &fin);
        if (!fin)
            continue;
        /* Outside the ring lock: generation checks, receipts. */
        for (op = fin; op; op = op->next)
            op_finish(t, op);
        pthread_mutex_lock(&r->mu);
        for (op = fin; op; op = next) {
            struct rio_io *io = op->io;
            next = op->next;
            io->res = op->res;
            io->svc_ns = now - op->t0;
            io->tpriv = NULL; /* a cancel from now on finds nothing */
            op_free_locked(t, op);
            op->io = NULL;
            op->next = r->free_ops;
            r->free_ops = op;
            r->inflight--;
            t->ready[nready++] = io;
        }
        pthread_mutex_unlock(&r->mu);
    }
    /* complete() with no lock held: it may submit the next op. */
    for (unsigned i = 0; i < nready; i++)
        t->ready[i]->complete(t->ready[i]);
    return (int)nready;
}

static void efd_clear(int efd)
{
    uint64_t v;
    ssize_t n;

    do
        n = read(efd, &v, sizeof(v));
    while (n < 0 && errno == EINTR);
}

/*
 * Wait up to timeout_ms for any ring. The CQ eventfd is cleared before the
 * rings are looked at, so a completion that lands after the look makes the
 * poll return at once; the wake eventfd ends the wait.
 */
int rio__file_reap(struct rio_transport *tt, int timeout_ms)
{
    struct ftransport *t = ft(tt);
    uint64_t deadline, now;
    int n;

    n = drain(t);
    if (n > 0 || timeout_ms == 0)
        return n;
    now = rio__now_ns();
    deadline = timeout_ms < 0 ? NEVER : now + (uint64_t)timeout_ms * NS_PER_MS;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = t->cq_efd, .events = POLLIN},
                                {.fd = t->wake_efd, .events = POLLIN}};
        uint64_t until = deadline;
        int wait_ms;

        efd_clear(t->cq_efd);
        n = drain(t);
        if (n > 0)
            return n;
        now = rio__now_ns();
        if (until == NEVER)
            wait_ms = -1;
        else if (until <= now)
            wait_ms = 0;
        else
            wait_ms = (int)min_u64((until - now + NS_PER_MS - 1) / NS_PER_MS, INT_MAX);
        if (poll(pfd, 2, wait_ms) < 0 && errno != EINTR)
            return -errno;
        if (pfd[1].revents & POLLIN) {
            efd_clear(t->wake_efd);
            return drain(t);
        }
        if (rio__now_ns() >= deadline)
            return drain(t);
    }
}

/* ------------------------------------------------------------- closing */

/*
 * The engine closes only when nothing is in flight. Should an op be left over
 * anyway, it is cancelled and its CQE waited for (bounded), so the kernel
 * never writes into memory after close returns; its complete() is not called.
 */
void rio__file_ring_quiesce(struct ftransport *t, struct fring *r)
{
    uint64_t end = rio__now_ns() + FILE_CLOSE_WAIT_MS * NS_PER_MS;
    struct io_uring_cqe *cqe;

    if (!r->ring_ok)
        return;
    pthread_mutex_lock(&r->mu);
    if (r->inflight)
        fprintf(stderr, "railio: file: closing with %u op(s) in flight on a queue\n", r->inflight);
    for (unsigned i = 0; i < t->depth; i++) {
        struct fop *op = &r->ops[i];
        if (op->state == OP_RUN && !op->cancel_req)
            step_cancel_locked(r, op);
    }
    ring_flush_locked(r);
    for (;;) {
        unsigned running = 0;
        for (unsigned i = 0; i < t->depth; i++)
            running += r->ops[i].state == OP_RUN;
        if ((!running && !r->cancels) || rio__now_ns() >= end)
            break;
        struct __kernel_timespec ts = {0, 10 * (long)NS_PER_MS};
        if (io_uring_wait_cqe_timeout(&r->ring, &cqe, &ts) < 0)
            continue;
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        uint64_t slot = ud >> UD_SLOT_SHIFT;
        if (slot == UD_CANCEL_SLOT) {
            r->cancels--;
        } else if (slot < t->depth && r->ops[slot].ud == ud && r->ops[slot].state == OP_RUN) {
            struct fop *op = &r->ops[slot];
            if (op->bounce >= 0)
                bounce_put_locked(r, op->bounce);
            op->bounce = -1;
            op->state = OP_FINISH;
        }
        io_uring_cqe_seen(&r->ring, cqe);
    }
    for (unsigned i = 0; i < t->depth; i++) {
        struct fop *op = &r->ops[i];
        if (op->state != OP_FREE)
            op_free_locked(t, op);
    }
    pthread_mutex_unlock(&r->mu);
}
