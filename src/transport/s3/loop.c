/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data loop. Data ops run on curl multi handles, one per path, all
 * driven by reap() in the engine thread over one epoll set
 * (curl_multi_socket_action): a socket callback keeps each multi's sockets
 * in the epoll set, a timer callback records each multi's next deadline, and
 * an eventfd in the same set is how submit, cancel and wake reach a blocked
 * reap. Nothing but reap ever touches a multi or a data easy handle, so
 * submit and cancel (which other threads may call) only queue work under
 * t->mu. The multi's connection cache gives connection reuse.
 */
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "transport/s3/internal.h"

/* --- curl multi callbacks: sockets into epoll, timers into the path --- */

static int sock_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct s3_path *p = userp;
    struct epoll_event ev;

    (void)e;
    (void)socketp;
    unsigned i = 0;
    while (i < p->nsocks && p->socks[i] != fd)
        i++;
    if (what == CURL_POLL_REMOVE) {
        if (i < p->nsocks)
            p->socks[i] = p->socks[--p->nsocks];
        epoll_ctl(p->t->epfd, EPOLL_CTL_DEL, fd, NULL);
        return 0;
    }
    if (i == p->nsocks && p->nsocks < S3_PATH_SOCKS)
        p->socks[p->nsocks++] = fd;
    memset(&ev, 0, sizeof(ev));
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    ev.data.u64 = (uint64_t)p->idx << 32 | (uint32_t)fd;
    if (epoll_ctl(p->t->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 && errno == ENOENT)
        epoll_ctl(p->t->epfd, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

/* After a socket_action: when it read a response's headers (a header
 * callback set ack_due), every socket the path polls acknowledges what it
 * received now (rio__s3_on_header says why). curl does not say which
 * socket a transfer uses; the others have nothing pending or only leave
 * delayed-ACK mode. */
static void ack_path(struct s3_path *p)
{
    if (!p->ack_due)
        return;
    p->ack_due = false;
    for (unsigned i = 0; i < p->nsocks; i++)
        rio__s3_quickack(p->socks[i]);
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp)
{
    struct s3_path *p = userp;

    (void)m;
    p->timer_at = timeout_ms < 0 ? NEVER : rio__now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
    return 0;
}

/* ------------------------------------------------- submit, cancel, reap */

static void wake_fd(struct s3_transport *t)
{
    uint64_t one = 1;
    ssize_t r = write(t->evfd, &one, sizeof(one));
    (void)r;
}

int rio__s3_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up = NULL;
    struct s3_path *p;
    struct s3_op *op;
    bool kick;

    if (!io || io->path >= t->base.npaths || !io->complete || io->len == 0 || !io->key)
        return -EINVAL;
    if (io->kind == RIO_IO_READ) {
        if (!io->dst && !t->discard)
            return -EINVAL;
        /* In one op: the whole object from its start, whatever generation
         * (get_one), into a buffer it may fill. */
        if (io->one && (t->scheme != SCHEME_S3 || t->discard || io->off || io->generation))
            return -EINVAL;
    } else if (io->kind == RIO_IO_WRITE) {
        up = io->upload;
        if (t->scheme != SCHEME_S3)
            return RIO_ENOTSUP;
        if (io->one)
            return -EINVAL; /* no put_one */
        if (!up || up->magic != UPLOAD_MAGIC || !io->src)
            return -EINVAL;
        if (up->stream) {
            /* Part index + 1 of a whole chunk, or of the short last one. */
            if (io->index >= S3_MAX_PARTS || io->len > up->chunk ||
                io->index > UINT64_MAX / up->chunk || io->off != io->index * up->chunk)
                return -EINVAL;
        } else if ((up->mode == UP_MULTI && io->index >= up->nparts) ||
                   (up->mode == UP_SINGLE && io->index != 0) || io->off > up->size ||
                   io->len > up->size - io->off) {
            return -EINVAL;
        }
    } else {
        return -EINVAL;
    }
    p = &t->path[io->path];
    pthread_mutex_lock(&t->mu);
    if (p->held >= S3_DEPTH_CAP) {
        pthread_mutex_unlock(&t->mu);
        return -EAGAIN;
    }
    if (up && up->stream) {
        if (!rio__s3_part_page_locked(up, io->index)) {
            pthread_mutex_unlock(&t->mu);
            return -ENOMEM;
        }
        if (io->index >= up->hi)
            up->hi = io->index + 1;
    }
    op = rio__opool_get(&p->pool);
    if (!op) {
        pthread_mutex_unlock(&t->mu);
        return -ENOMEM;
    }
    op->io = io;
    op->state = OP_PENDING;
    op->cancel_req = false;
    op->on_clist = false;
    io->tpriv = op;
    rio_list_push_back(&t->pend, &op->qnode);
    p->held++;
    kick = t->waiting;
    pthread_mutex_unlock(&t->mu);
    if (kick)
        wake_fd(t);
    return 0;
}

void rio__s3_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_op *op;
    bool kick = false;

    pthread_mutex_lock(&t->mu);
    /* tpriv is cleared under mu when the op is settled: an op found here
     * has not completed yet (reap tells pending from active). */
    op = io ? io->tpriv : NULL;
    if (op && op->io == io && !op->cancel_req) {
        op->cancel_req = true;
        op->on_clist = true;
        op->cnext = t->cancels;
        t->cancels = op;
        kick = true;
    }
    pthread_mutex_unlock(&t->mu);
    if (kick)
        wake_fd(t);
}

void rio__s3_wake(struct rio_transport *tt)
{
    struct s3_transport *t = (struct s3_transport *)tt;

    pthread_mutex_lock(&t->mu);
    t->woken = true;
    pthread_mutex_unlock(&t->mu);
    wake_fd(t);
}

static void done_push(struct rio_list *done, struct s3_op *op, int64_t res)
{
    op->res = res;
    op->state = OP_DONE;
    rio_list_push_back(done, &op->qnode);
}

/* Collect every finished transfer of path p onto the done list. */
static void drain_path(struct s3_transport *t, struct s3_path *p, struct rio_list *done)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(p->m, &left))) {
        struct s3_op *op = NULL;
        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&op);
        CURLcode rc = msg->data.result;
        curl_multi_remove_handle(p->m, msg->easy_handle);
        int64_t res = rio__s3_op_result(t, op, rc);
        done_push(done, op, res);
    }
}

static void run_timers(struct s3_transport *t, struct rio_list *done)
{
    uint64_t now = rio__now_ns();
    int running;

    for (unsigned i = 0; i < t->base.npaths; i++) {
        struct s3_path *p = &t->path[i];
        if (p->timer_at <= now) {
            p->timer_at = NEVER;
            curl_multi_socket_action(p->m, CURL_SOCKET_TIMEOUT, 0, &running);
            ack_path(p);
            drain_path(t, p, done);
        }
    }
}

/*
 * Settle finished ops and call their completions: results out, tpriv
 * cleared and the op taken off any cancel list under the lock (so a late
 * cancel finds nothing), then complete() with no lock held, then the ops go
 * back to their pools.
 */
static int settle(struct s3_transport *t, struct rio_list *list)
{
    struct rio_list_node *q;
    int n = 0;

    if (rio_list_empty(list))
        return 0;
    pthread_mutex_lock(&t->mu);
    rio_list_each (op, list, struct s3_op, qnode) {
        struct rio_io *io = op->io;
        io->res = op->res;
        io->svc_ns = op->svc_ns;
        io->tpriv = NULL;
        op->p->held--;
        if (op->on_clist) {
            struct s3_op **pp = &t->cancels;
            while (*pp && *pp != op)
                pp = &(*pp)->cnext;
            if (*pp)
                *pp = op->cnext;
            op->on_clist = false;
        }
    }
    pthread_mutex_unlock(&t->mu);
    rio_list_each (op, list, struct s3_op, qnode) {
        op->io->complete(op->io);
        n++;
    }
    pthread_mutex_lock(&t->mu);
    while ((q = rio_list_pop_front(list))) {
        struct s3_op *op = rio_container_of(q, struct s3_op, qnode);
        op->io = NULL;
        op->state = OP_FREE;
        rio__opool_put(&op->p->pool, op);
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

int rio__s3_reap(struct rio_transport *tt, int timeout_ms)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    uint64_t deadline = timeout_ms < 0    ? NEVER
                        : timeout_ms == 0 ? 0
                                          : rio__now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
    struct rio_list done = {0};
    struct epoll_event evs[64];
    bool last = false;

    for (;;) {
        struct rio_list pend;
        struct rio_list_node *q;
        struct s3_op *canc, *op;
        bool woken;
        int running;

        pthread_mutex_lock(&t->mu);
        pend = t->pend;
        rio_list_init(&t->pend);
        canc = t->cancels;
        /* Cancelled ops stay marked (on_clist) until settled. */
        for (op = canc; op; op = op->cnext)
            op->on_clist = false;
        t->cancels = NULL;
        woken = t->woken;
        t->woken = false;
        pthread_mutex_unlock(&t->mu);

        for (op = canc; op; op = op->cnext) {
            if (op->state == OP_ACTIVE) {
                curl_multi_remove_handle(op->p->m, op->e);
                done_push(&done, op, -ECANCELED);
            }
            /* OP_PENDING ones are still on pend below; OP_DONE ones finished. */
        }
        while ((q = rio_list_pop_front(&pend))) {
            op = rio_container_of(q, struct s3_op, qnode);
            if (op->cancel_req) {
                done_push(&done, op, -ECANCELED);
                continue;
            }
            int ret = rio__s3_op_prepare(t, op);
            if (ret == 0 && curl_multi_add_handle(op->p->m, op->e) != CURLM_OK)
                ret = -ENOMEM;
            if (ret < 0) {
                done_push(&done, op, ret);
                continue;
            }
            op->state = OP_ACTIVE;
        }
        run_timers(t, &done);

        if (!rio_list_empty(&done) || woken || last)
            break;
        /* Poll once more after the deadline (timeout 0 polls once), then go. */
        uint64_t now = rio__now_ns();
        uint64_t until = deadline;
        for (unsigned i = 0; i < t->base.npaths; i++)
            if (t->path[i].timer_at < until)
                until = t->path[i].timer_at;
        if (now >= deadline)
            last = true;
        int wait_ms = until == NEVER ? -1
                      : until <= now ? 0
                                     : (int)((until - now + NS_PER_MS - 1) / NS_PER_MS);

        pthread_mutex_lock(&t->mu);
        t->waiting = true;
        bool more = !rio_list_empty(&t->pend) || t->cancels || t->woken;
        pthread_mutex_unlock(&t->mu);
        int nev = more ? 0 : epoll_wait(t->epfd, evs, 64, wait_ms);
        pthread_mutex_lock(&t->mu);
        t->waiting = false;
        pthread_mutex_unlock(&t->mu);

        for (int i = 0; i < nev; i++) {
            uint64_t d = evs[i].data.u64;
            if (d == EV_WAKE) {
                uint64_t v;
                ssize_t r = read(t->evfd, &v, sizeof(v));
                (void)r;
                continue;
            }
            struct s3_path *p = &t->path[d >> 32];
            int fd = (int)(uint32_t)d;
            int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                        (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(p->m, fd, flags, &running);
            ack_path(p);
            drain_path(t, p, &done);
        }
        if (deadline != NEVER && rio__now_ns() >= deadline)
            last = true;
    }
    return settle(t, &done);
}

/* The epoll set, its eventfd and one curl multi per path (epfd and evfd
 * are -1 before). 0 or a negative errno; rio__s3_loop_close undoes it. */
int rio__s3_loop_open(struct s3_transport *t)
{
    struct epoll_event ev;

    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->epfd < 0 || t->evfd < 0)
        return -errno;
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = EV_WAKE;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &ev) < 0)
        return -errno;
    for (unsigned i = 0; i < t->base.npaths; i++) {
        struct s3_path *p = &t->path[i];
        p->t = t;
        p->idx = i;
        rio__opool_init(&p->pool, sizeof(struct s3_op), S3_SLAB_OPS);
        rio__opool_hooks(&p->pool, rio__s3_op_make, rio__s3_op_unmake, p);
        p->timer_at = NEVER;
        p->m = curl_multi_init();
        if (!p->m)
            return -ENOMEM;
        curl_multi_setopt(p->m, CURLMOPT_SOCKETFUNCTION, sock_cb);
        curl_multi_setopt(p->m, CURLMOPT_SOCKETDATA, p);
        curl_multi_setopt(p->m, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(p->m, CURLMOPT_TIMERDATA, p);
        curl_multi_setopt(p->m, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
        curl_multi_setopt(p->m, CURLMOPT_MAXCONNECTS, (long)S3_DEPTH_CAP);
    }
    return 0;
}

/* Every data op's easy handle, the multis (which close their cached
 * connections) and the epoll set. */
void rio__s3_loop_close(struct s3_transport *t)
{
    for (unsigned i = 0; i < t->base.npaths; i++) {
        struct s3_path *p = &t->path[i];
        rio__opool_destroy(&p->pool);
        if (p->m)
            curl_multi_cleanup(p->m); /* closes cached connections (sock_cb) */
        p->m = NULL;
    }
    if (t->evfd >= 0)
        close(t->evfd);
    if (t->epfd >= 0)
        close(t->epfd);
}
