/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data event loop: slots, submit and cancel (any thread, queue only),
 * and reap (the engine thread): intake, timers, epoll, completions.
 */
#include "transport/tcp/tcp_int.h"

static struct tcp_slot *slot_get_locked(struct tcp_transport *t)
{
    struct tcp_slot *s = t->free_slots;

    if (s) {
        t->free_slots = s->next;
    } else {
        s = rio__malloc(sizeof(*s));
        if (!s)
            return NULL;
        t->ctr.slots_allocated++;
    }
    memset(s, 0, offsetof(struct tcp_slot, req));
    return s;
}

/* Give a slot back once neither its connection nor the done list holds it. */
static void slot_release(struct tcp_transport *t, struct tcp_slot *s)
{
    if (s->live || s->on_done)
        return;
    pthread_mutex_lock(&t->mu);
    s->conn->nslots--;
    t->ctr.slots_armed--;
    s->where = SL_FREE;
    s->next = t->free_slots;
    t->free_slots = s;
    pthread_mutex_unlock(&t->mu);
    t->window_freed = true;
}

/*
 * The op of s ends with res. keep_live: the slot stays on its connection as
 * a tombstone (an answer is still owed). A tombstone that ends is released.
 */
void rio__tcp_slot_done(struct tcp_transport *t, struct tcp_slot *s, int64_t res, bool keep_live)
{
    s->live = keep_live;
    if (s->io && keep_live) {
        s->tomb = true;
        s->conn->ntombs++;
    } else if (!keep_live && s->tomb) {
        s->tomb = false;
        s->conn->ntombs--;
    }
    if (s->io) {
        s->done_io = s->io;
        s->done_res = res;
        /* A PUT_ONE the server got whole may have published, answer or not. */
        s->done_unsure = s->op == RIO_OP_PUT_ONE && !s->answered && res < 0 && s->sent_whole;
        s->io = NULL;
        s->data = NULL;
        s->on_done = true;
        rio_list_push_back(&t->done, &s->dnode);
    } else if (!keep_live) {
        slot_release(t, s);
    }
}

static void cancel_unlink_locked(struct tcp_transport *t, struct tcp_slot *s)
{
    struct tcp_slot **pp;

    for (pp = &t->cancels; *pp; pp = &(*pp)->cnext)
        if (*pp == s) {
            *pp = s->cnext;
            break;
        }
    s->cancel_listed = false;
}

/* Hand every finished op to the engine: complete() with no lock held. */
static int deliver(struct tcp_transport *t)
{
    struct rio_list list = t->done;
    struct rio_list_node *q;
    int n = 0;

    if (rio_list_empty(&list))
        return 0;
    rio_list_init(&t->done);
    pthread_mutex_lock(&t->mu);
    rio_list_each (s, &list, struct tcp_slot, dnode) {
        struct rio_io *io = s->done_io;
        io->res = s->done_res;
        io->svc_ns = s->done_svc_ns;
        io->gen_out = s->done_gen;
        io->unsure = s->done_unsure;
        if (s->op == RIO_OP_GET_ONE) {
            io->one_size = s->done_size;
            io->one_chunk_size = s->done_chunk_size;
            io->one_nchunks = s->done_nchunks;
            rio__tcp_etag_out(io->one_etag, s->done_etag);
            io->xxh_got = s->done_xxh;
            io->xxh_valid = s->done_xxh_valid && io->res >= 0;
        }
        io->tpriv = NULL; /* a late cancel finds nothing */
        if (s->cancel_listed)
            cancel_unlink_locked(t, s);
    }
    pthread_mutex_unlock(&t->mu);
    rio_list_each (s, &list, struct tcp_slot, dnode) {
        s->done_io->complete(s->done_io);
        n++;
    }
    while ((q = rio_list_pop_front(&list))) {
        struct tcp_slot *s = rio_container_of(q, struct tcp_slot, dnode);
        s->done_io = NULL;
        s->on_done = false;
        slot_release(t, s);
    }
    return n;
}

/* Take what submit and cancel queued. Returns true when wake() was called. */
static bool intake(struct tcp_transport *t, uint64_t now)
{
    struct rio_list pend;
    struct tcp_slot *cancels, *s, *next;
    bool woken;

    pthread_mutex_lock(&t->mu);
    pend = t->pending;
    rio_list_init(&t->pending);
    cancels = t->cancels;
    t->cancels = NULL;
    for (s = cancels; s; s = s->cnext)
        s->cancel_listed = false;
    woken = t->wake_req;
    t->wake_req = false;
    pthread_mutex_unlock(&t->mu);

    for (s = sl_head(&pend); s; s = next) {
        next = sl_next(s);
        struct tcp_conn *cn = s->conn;
        if (!cn->sq.count && !cn->wq.count)
            cn->last_progress_ns = now; /* the watchdog counts from here */
        s->where = SL_QUEUED;
        sl_push(&cn->sq, s);
    }
    for (s = cancels; s; s = next) {
        next = s->cnext;
        struct tcp_conn *cn = s->conn;
        if (!s->io)
            continue; /* finished meanwhile */
        if (s->where == SL_QUEUED) {
            if (s == sl_head(&cn->sq) && cn->sq_off > 0) {
                if (s->data_len == 0) {
                    /* The rest of the request comes from the slot itself. */
                    rio__tcp_ctr_add(t, &t->ctr.tombstones, 1);
                    rio__tcp_slot_done(t, s, -ECANCELED, true);
                    s->tomb_deadline_ns = now + (uint64_t)t->grace_ms * NS_PER_MS;
                } else {
                    /* Stop reading io->src: give up this stream. */
                    rio__tcp_conn_abort(t, cn, s, -ECANCELED, now);
                }
            } else {
                sl_unlink(&cn->sq, s);
                rio__tcp_slot_done(t, s, -ECANCELED, false);
            }
        } else if (s->where == SL_WAIT) {
            if (cn->rx_slot == s && cn->rx_mode == RX_DST) {
                if (!t->discard && !(t->discard = rio__malloc(TCP_DISCARD_LEN))) {
                    rio__tcp_conn_abort(t, cn, s, -ECANCELED, now);
                    continue;
                }
                cn->rx_mode = RX_DISCARD;
            }
            rio__tcp_ctr_add(t, &t->ctr.tombstones, 1);
            rio__tcp_slot_done(t, s, -ECANCELED, true);
            s->tomb_deadline_ns = now + (uint64_t)t->grace_ms * NS_PER_MS;
        }
    }
    return woken;
}

/* The earliest drain deadline of cn's tombstones. */
static uint64_t tomb_due(const struct tcp_conn *cn)
{
    uint64_t due = NEVER;

    for (int pass = 0; pass < 2; pass++)
        for (const struct tcp_slot *s = sl_head(pass ? &cn->sq : &cn->wq); s; s = sl_next(s))
            if (s->tomb)
                due = min_u64(due, s->tomb_deadline_ns);
    return due;
}

/* How often the queue of a socket under a receive low-water mark is
 * looked at: TCP_LOWAT_LOOK_MS, or a quarter of the watchdog's time when
 * that is shorter. */
static uint64_t lowat_step(const struct tcp_transport *t)
{
    uint64_t step = (uint64_t)TCP_LOWAT_LOOK_MS * NS_PER_MS;
    uint64_t quarter = (uint64_t)t->progress_ms * NS_PER_MS / 4;

    if (t->progress_ms && quarter < step)
        step = quarter ? quarter : 1;
    return step;
}

/*
 * Under a receive low-water mark bytes arrive without waking the loop: a
 * connection whose socket holds more than at the last look (or read) has
 * made progress (a slow link still delivering a large answer). Returns
 * when they are dated, 0 when nothing new is there. They came after the
 * last look: dated now when that look is at most a step old (the loop
 * looks every step while an answer is owed, so at most a step late, and a
 * live slow link is never dated early), else a step after that look: a
 * look that could not see them says nothing of now (bytes that came
 * before a rail went dark, found only when the engine asks a second
 * later, must not make it look alive for another second).
 */
static uint64_t lowat_look(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    uint64_t last = cn->lowat_look_ns, step = lowat_step(t);
    int avail = 0;

    cn->lowat_look_ns = now;
    if (!cn->lowat || ioctl(cn->fd, FIONREAD, &avail) < 0 || avail <= cn->lowat_seen)
        return 0;
    cn->lowat_seen = avail;
    return now > last && now - last > step ? last + step : now;
}

/* When a byte of path's ops last moved, over its connections (one per
 * member): the watchdog's clock, with bytes queued under a receive
 * low-water mark looked for now (the engine asks only about a path it
 * finds silent). The engine's thread, as the loop's (transport.h). */
uint64_t rio__tcp_path_moved(struct rio_transport *tt, unsigned path)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    uint64_t moved = 0, now = rio__now_ns();

    for (unsigned i = 0; i < t->nconns; i++) {
        struct tcp_conn *cn = &t->conns[i];
        if (cn->path != path)
            continue;
        if (cn->state == C_READY && cn->lowat) {
            uint64_t at = lowat_look(t, cn, now);
            if (at > cn->last_progress_ns)
                cn->last_progress_ns = at;
        }
        if (cn->last_progress_ns > moved)
            moved = cn->last_progress_ns;
    }
    return moved;
}

/* Kick every connection with work, run its timers; the next timer's time. */
static uint64_t service(struct tcp_transport *t, uint64_t now)
{
    uint64_t next = NEVER;
    uint64_t progress_ns = (uint64_t)t->progress_ms * NS_PER_MS;

    for (unsigned i = 0; i < t->nconns; i++) {
        struct tcp_conn *cn = &t->conns[i];
        if (cn->sq.count && (cn->state == C_CLOSED || (cn->state == C_READY && !cn->out_blocked)))
            rio__tcp_conn_kick(t, cn, now);
        if (cn->down && cn->state == C_CLOSED && !cn->sq.count && rio__tcp_rail_has_conn(t, cn)) {
            /* Grow back: a background dial of a path that is down while
             * its rail's other connections work (the server's limit cut
             * it, or the rail came back through another connection). */
            if (now >= cn->grow_ns) {
                rio__tcp_ctr_add(t, &t->ctr.grow_dials, 1);
                int ret = rio__tcp_conn_dial(t, cn, now);
                if (ret < 0)
                    rio__tcp_dial_failed(t, cn, ret, now);
            } else {
                next = min_u64(next, cn->grow_ns);
            }
        }
        switch (cn->state) {
        case C_CONNECTING:
        case C_TLS:
        case C_HELLO_TX:
        case C_HELLO_RX:
        case C_AUTH_TX:
        case C_AUTH_RX:
            if (now >= cn->deadline_ns)
                rio__tcp_dial_failed(t, cn, -ETIMEDOUT, now);
            else
                next = min_u64(next, cn->deadline_ns);
            break;
        case C_READY:
            if (cn->ntombs) {
                /* An answer owed to a cancelled op that trickles (a link that
                 * still ACKs but moves almost nothing) would hold the
                 * connection forever: past the grace, start afresh. */
                uint64_t due = tomb_due(cn);
                if (now >= due) {
                    rio__tcp_ctr_add(t, &t->ctr.grace_closes, 1);
                    rio__tcp_conn_abort(t, cn, NULL, 0, now);
                    break;
                }
                next = min_u64(next, due);
            }
            if (cn->lowat && cn->wq.count) {
                /* Under a receive low-water mark bytes arrive unseen: while
                 * an answer is owed the socket's queue is looked at every
                 * step (lowat_step), and bytes found are dated to the look,
                 * at most a step late: the watchdog and the engine's
                 * silence rule (path_moved) see a rail that goes dark
                 * after a burst within a step of when it did, and a slow
                 * link still delivering is never cut. */
                uint64_t step = lowat_step(t);
                if (now >= cn->lowat_look_ns + step) {
                    uint64_t at = lowat_look(t, cn, now);
                    if (at > cn->last_progress_ns)
                        cn->last_progress_ns = at;
                }
                next = min_u64(next, cn->lowat_look_ns + step);
            }
            if (!progress_ns || (!cn->sq.count && !cn->wq.count))
                break;
            if (now > cn->last_progress_ns && now - cn->last_progress_ns >= progress_ns) {
                rio__tcp_ctr_add(t, &t->ctr.watchdog_trips, 1);
                rio__tcp_conn_fail(t, cn, -ETIMEDOUT);
            } else {
                next = min_u64(next, cn->last_progress_ns + progress_ns);
            }
            break;
        default:
            break;
        }
    }
    return next;
}

static void drain_eventfd(struct tcp_transport *t)
{
    uint64_t v;
    ssize_t r;

    do
        r = read(t->evfd, &v, sizeof(v));
    while (r < 0 && errno == EINTR);
}

static void poke_locked(struct tcp_transport *t)
{
    uint64_t one = 1;
    ssize_t r;

    if (!t->sleeping)
        return;
    do
        r = write(t->evfd, &one, sizeof(one));
    while (r < 0 && errno == EINTR);
}

static int tcp_reap_loop(struct tcp_transport *t, int timeout_ms);

int rio__tcp_reap(struct rio_transport *tt, int timeout_ms)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct rio__tls_sigguard g;
    int ret;

    if (!t->tls_ctx)
        return tcp_reap_loop(t, timeout_ms);
    rio__tls_sig_block(&g);
    ret = tcp_reap_loop(t, timeout_ms);
    rio__tls_sig_restore(&g);
    return ret;
}

static int tcp_reap_loop(struct tcp_transport *t, int timeout_ms)
{
    struct epoll_event evs[TCP_EVENTS];
    uint64_t now = rio__now_ns();
    uint64_t deadline = timeout_ms < 0 ? NEVER : now + (uint64_t)timeout_ms * NS_PER_MS;
    bool woken = false, polled = false;
    int ret = 0;

    for (;;) {
        woken |= intake(t, now);
        uint64_t next = service(t, now);
        /* Even reap(0) looks at the sockets once: a caller that only ever
         * polls must not starve the network. */
        if (!rio_list_empty(&t->done) || woken || t->window_freed || (polled && now >= deadline))
            break;
        next = min_u64(next, deadline);
        int wait_ms = -1;
        if (next <= now) {
            wait_ms = 0;
        } else if (next != NEVER) {
            uint64_t ms = (next - now + NS_PER_MS - 1) / NS_PER_MS;
            wait_ms = ms > INT_MAX ? INT_MAX : (int)ms;
        }
        pthread_mutex_lock(&t->mu);
        if (t->pending.count || t->cancels || t->wake_req) {
            pthread_mutex_unlock(&t->mu);
            continue;
        }
        t->sleeping = true;
        pthread_mutex_unlock(&t->mu);
        int n = epoll_wait(t->epfd, evs, TCP_EVENTS, wait_ms);
        int err = errno;
        polled = true;
        pthread_mutex_lock(&t->mu);
        t->sleeping = false;
        pthread_mutex_unlock(&t->mu);
        now = rio__now_ns();
        if (n < 0) {
            if (err == EINTR)
                continue;
            ret = -err;
            break;
        }
        for (int i = 0; i < n; i++) {
            uint64_t tag = evs[i].data.u64;
            if (tag == EV_WAKE) {
                drain_eventfd(t);
                continue;
            }
            uint32_t idx = (uint32_t)tag, epoch = (uint32_t)(tag >> 32);
            if (idx >= t->nconns)
                continue;
            struct tcp_conn *cn = &t->conns[idx];
            if (cn->epoch != epoch || cn->fd < 0)
                continue; /* an event of a socket closed meanwhile */
            rio__tcp_conn_event(t, cn, evs[i].events, now);
        }
    }
    t->window_freed = false;
    int n = deliver(t);
    return n > 0 || ret == 0 ? n : ret;
}

void rio__tcp_wake(struct rio_transport *tt)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;

    pthread_mutex_lock(&t->mu);
    t->wake_req = true;
    poke_locked(t);
    pthread_mutex_unlock(&t->mu);
}

void rio__tcp_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_slot *s;

    pthread_mutex_lock(&t->mu);
    s = io ? io->tpriv : NULL;
    if (s && !s->cancel_req) {
        s->cancel_req = true;
        s->cancel_listed = true;
        s->cnext = t->cancels;
        t->cancels = s;
        poke_locked(t);
    }
    pthread_mutex_unlock(&t->mu);
}

int rio__tcp_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    const struct tcp_upload *up = NULL;
    struct tcp_conn *cn;
    struct tcp_slot *s;
    size_t klen = 0;
    unsigned mi;
    int n;

    if (!io || !io->complete || io->len == 0 || io->len > TCP_CHUNK_MAX ||
        io->path >= t->base.npaths)
        return -EINVAL;
    if (io->kind == RIO_IO_READ) {
        if (!io->dst || rio__key_len(io->key, &klen) < 0 ||
            (io->one && (io->off || io->generation)))
            return -EINVAL;
        mi = rio__tcp_owner_of(t, io->key, klen);
    } else if (io->kind == RIO_IO_WRITE && io->one) {
        if (io->upload || !io->src || io->off || io->len > io->chunk_size || !io->etag ||
            rio__key_len(io->key, &klen) < 0)
            return -EINVAL;
        mi = rio__tcp_owner_of(t, io->key, klen);
    } else if (io->kind == RIO_IO_WRITE) {
        up = io->upload;
        if (!up || up->magic != UPLOAD_MAGIC || !io->src || io->off > up->size ||
            io->len > up->size - io->off)
            return -EINVAL;
        mi = up->member;
    } else {
        return -EINVAL;
    }
    cn = &t->conns[mi * t->base.npaths + io->path];

    pthread_mutex_lock(&t->mu);
    if (io->one && cn->state == C_READY && io->kind == RIO_IO_WRITE &&
        !(cn->caps & RIO_PROTO_CAP_PUT_ONE)) {
        pthread_mutex_unlock(&t->mu);
        return rio__tcp_put_one_refused(t, cn);
    }
    if (io->one && cn->state == C_READY && io->kind == RIO_IO_READ &&
        !(cn->caps & RIO_PROTO_CAP_GET_ONE)) {
        pthread_mutex_unlock(&t->mu);
        return rio__tcp_get_one_refused(t, cn);
    }
    /* A PUT_ONE (a whole small object) may go past the client's depth, up
     * to the server's window: the engine counts them by their bytes. */
    unsigned win = cn->window;
    if (io->one) {
        unsigned w1 =
            cn->max_depth && cn->max_depth < TCP_ONE_WINDOW ? cn->max_depth : TCP_ONE_WINDOW;
        if (w1 > win)
            win = w1;
    }
    if (cn->nslots >= win) {
        pthread_mutex_unlock(&t->mu);
        return -EAGAIN;
    }
    s = slot_get_locked(t);
    if (!s) {
        pthread_mutex_unlock(&t->mu);
        return -ENOMEM;
    }
    s->io = io;
    s->conn = cn;
    s->id = next_id(t);
    s->svc_asked = false;
    s->sent_ns = 0;
    s->done_svc_ns = 0;
    if (io->kind == RIO_IO_READ && io->one) {
        struct rio_proto_get_one g = {
            .max_len = (uint32_t)io->len, .key = io->key, .key_len = (uint16_t)klen};
        n = rio__proto_enc_get_one(&g, s->req + RIO_PROTO_HDR_LEN,
                                   sizeof(s->req) - RIO_PROTO_HDR_LEN - RIO_PROTO_TAG_LEN);
        s->op = RIO_OP_GET_ONE;
        s->expect_len = io->len;
        t->ctr.get_one++;
    } else if (io->kind == RIO_IO_READ) {
        struct rio_proto_read r = {
            .generation = io->generation,
            .off = io->off,
            .len = (uint32_t)io->len,
            .key = io->key,
            .key_len = (uint16_t)klen,
        };
        n = rio__proto_enc_read(&r, s->req + RIO_PROTO_HDR_LEN,
                                sizeof(s->req) - RIO_PROTO_HDR_LEN - RIO_PROTO_TAG_LEN);
        s->op = RIO_OP_READ;
        s->expect_len = io->len;
    } else if (io->one) {
        struct rio_proto_put_one po = {.chunk_size = io->chunk_size,
                                       .xxh = io->xxh,
                                       .ttl_ms = t->ttl_ms,
                                       .key = io->key,
                                       .key_len = (uint16_t)klen};
        /* An unknown etag travels as zeros, as a PUT_COMMIT's. */
        memset(po.etag, 0, sizeof(po.etag));
        memcpy(po.etag, io->etag, strnlen(io->etag, sizeof(po.etag)));
        n = rio__proto_enc_put_one(&po, s->req + RIO_PROTO_HDR_LEN,
                                   sizeof(s->req) - RIO_PROTO_HDR_LEN - RIO_PROTO_TAG_LEN);
        s->op = RIO_OP_PUT_ONE;
        s->data = io->src;
        s->data_len = io->len;
        t->ctr.put_one++;
    } else {
        struct rio_proto_put_chunk pc = {.upload_id = up->id, .index = io->index, .xxh = io->xxh};
        n = rio__proto_enc_put_chunk_fixed(&pc, s->req + RIO_PROTO_HDR_LEN,
                                           sizeof(s->req) - RIO_PROTO_HDR_LEN - RIO_PROTO_TAG_LEN);
        s->op = RIO_OP_PUT_CHUNK;
        s->data = io->src;
        s->data_len = io->len;
    }
    if (n < 0) {
        s->next = t->free_slots;
        t->free_slots = s;
        pthread_mutex_unlock(&t->mu);
        return -EINVAL;
    }
    rio__tcp_frame_header(s->op, s->id, (uint32_t)((uint64_t)n + RIO_PROTO_TAG_LEN + s->data_len),
                          s->req);
    s->req_len = (uint16_t)(RIO_PROTO_HDR_LEN + n + RIO_PROTO_TAG_LEN);
    s->seal_conn = NULL; /* the tag is made when it is sent */
    s->where = SL_PENDING;
    s->live = true;
    sl_push(&t->pending, s);
    cn->nslots++;
    if (++t->ctr.slots_armed > t->ctr.slots_peak)
        t->ctr.slots_peak = t->ctr.slots_armed;
    io->tpriv = s;
    poke_locked(t);
    pthread_mutex_unlock(&t->mu);
    return 0;
}
