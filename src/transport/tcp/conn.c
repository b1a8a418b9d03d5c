/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The data connections, driven by the event loop (loop.c): the
 * non-blocking dial and handshake, path state reported to the engine,
 * sending requests (framing of chunk ops) and receiving answers straight into
 * io->dst.
 */
#include "transport/tcp/tcp_int.h"

static void conn_set_events(struct tcp_transport *t, struct tcp_conn *cn, uint32_t ev)
{
    if (cn->fd < 0 || cn->ev == ev)
        return;
    struct epoll_event e = {.events = ev, .data.u64 = ((uint64_t)cn->epoch << 32) | cn->idx};
    if (epoll_ctl(t->epfd, EPOLL_CTL_MOD, cn->fd, &e) == 0)
        cn->ev = ev;
}

static void conn_update_events(struct tcp_transport *t, struct tcp_conn *cn)
{
    uint32_t ev = EPOLLIN;

    if (cn->state == C_CONNECTING)
        ev = EPOLLOUT;
    else if (cn->state == C_TLS)
        ev = cn->tls.want == RIO_TLS_WANT_WRITE ? EPOLLOUT : EPOLLIN;
    else if (cn->out_blocked)
        ev |= EPOLLOUT;
    conn_set_events(t, cn, ev);
}

void rio__tcp_ctr_add(struct tcp_transport *t, uint64_t *field, int64_t delta)
{
    pthread_mutex_lock(&t->mu);
    *field += (uint64_t)delta;
    if (t->ctr.conns_open > t->ctr.conns_peak)
        t->ctr.conns_peak = t->ctr.conns_open;
    pthread_mutex_unlock(&t->mu);
}

/* Close the socket and reset the stream state; the slots stay where they are. */
static void conn_close_fd(struct tcp_transport *t, struct tcp_conn *cn)
{
    rio__tls_cleanup(&cn->tls);
    if (cn->fd >= 0) {
        (void)epoll_ctl(t->epfd, EPOLL_CTL_DEL, cn->fd, NULL);
        close(cn->fd);
    }
    if (cn->state == C_READY)
        rio__tcp_ctr_add(t, &t->ctr.conns_open, -1);
    if (cn->leader) {
        cn->rail->dialing = false;
        cn->leader = false;
    }
    cn->fd = -1;
    cn->state = C_CLOSED;
    cn->ev = 0;
    cn->out_blocked = false;
    cn->sq_off = 0;
    cn->rx_mode = RX_HDR;
    cn->rx_hdr_got = 0;
    cn->rx_slot = NULL;
    cn->rx_len = cn->rx_got = 0;
    cn->lowat = cn->lowat_seen = 0;
    cn->lowat_look_ns = 0;
    cn->hs_len = cn->hs_off = 0;
    rio__free(cn->ctrl);
    cn->ctrl = NULL;
    rio__proto_sess_free(&cn->sess);
    cn->tx_seq = 0;
}

/* Every op on cn ends with err (tombstones are released). */
static void conn_fail_ops(struct tcp_transport *t, struct tcp_conn *cn, int err)
{
    struct tcp_slot *s;

    while ((s = sl_pop(&cn->wq)))
        rio__tcp_slot_done(t, s, err, false);
    while ((s = sl_pop(&cn->sq)))
        rio__tcp_slot_done(t, s, err, false);
    cn->sq_off = 0;
}

/* An established connection failed. */
void rio__tcp_conn_fail(struct tcp_transport *t, struct tcp_conn *cn, int err)
{
    conn_close_fd(t, cn);
    rio__tcp_ctr_add(t, &t->ctr.conn_failures, 1);
    cn->rail->up = false; /* the next dial on this rail goes alone */
    conn_fail_ops(t, cn, err);
}

static uint64_t dial_backoff_ns(const struct tcp_transport *t, unsigned fails)
{
    uint64_t ms = t->backoff_ms;
    for (unsigned i = 1; i < fails && ms < t->backoff_cap_ms; i++)
        ms *= 2;
    return min_u64(ms, t->backoff_cap_ms) * NS_PER_MS;
}

/*
 * Whether another connection of the same member and rail as cn is up: the
 * rail works, so a dial the server cut on cn is its connection limit.
 */
bool rio__tcp_rail_has_conn(const struct tcp_transport *t, const struct tcp_conn *cn)
{
    for (unsigned i = 0; i < t->nconns; i++) {
        const struct tcp_conn *o = &t->conns[i];
        if (o != cn && o->m == cn->m && o->rail == cn->rail && o->state == C_READY)
            return true;
    }
    return false;
}

/* A dial of cn failed: its path is down, tell the engine (again at each
 * failed dial; the engine cools a path once). Called from the loop with no
 * lock held (rio__t_path_event's rule). */
static void path_down(struct tcp_transport *t, struct tcp_conn *cn, int err)
{
    if (!cn->down) {
        cn->down = true;
        rio__tcp_ctr_add(t, &t->ctr.paths_down, 1);
    }
    rio__tcp_ctr_add(t, &t->ctr.reported_down, 1);
    rio__t_path_event(&t->base, cn->path, RIO_PATH_DOWN, err);
}

/* cn is up again after its path was reported down. */
static void path_up(struct tcp_transport *t, struct tcp_conn *cn)
{
    if (!cn->down)
        return;
    cn->down = false;
    cn->grow_fails = 0;
    cn->grow_ns = 0;
    pthread_mutex_lock(&t->mu);
    t->ctr.paths_down--;
    t->ctr.regrown++;
    pthread_mutex_unlock(&t->mu);
    rio__t_path_event(&t->base, cn->path, RIO_PATH_UP, 0);
}

/*
 * A dial (connect or handshake) failed: its ops end with err and its path is
 * reported down. A server at its connection limit accepts and closes at once
 * (the dial connected, then the handshake was cut: EOF, reset); while
 * another connection of the same rail is up that is no outage of the rail:
 * only cn backs off (and dials again in the background, service), the rail
 * stays up. A dial of a connection already down is handled the same way
 * whatever ended it, as long as the rail has a connection. Any other
 * failure is the rail's: the connections that waited for its single-flight
 * dial fail and report down too, and the rail backs off.
 */
void rio__tcp_dial_failed(struct tcp_transport *t, struct tcp_conn *cn, int err, uint64_t now)
{
    struct tcp_rail *r = cn->rail;
    bool cut = cn->state >= C_HELLO_TX && reset_class(err);

    if ((cut || cn->down) && rio__tcp_rail_has_conn(t, cn)) {
        conn_close_fd(t, cn);
        pthread_mutex_lock(&t->mu);
        t->ctr.dial_failures++;
        if (cut)
            t->ctr.dials_refused++;
        pthread_mutex_unlock(&t->mu);
        cn->grow_fails++;
        cn->grow_ns = now + dial_backoff_ns(t, cn->grow_fails);
        cn->last_err = err;
        conn_fail_ops(t, cn, err);
        /* Connections that waited for this one's dial (when it led) try theirs. */
        for (unsigned i = 0; i < t->nconns; i++)
            if (t->conns[i].state == C_WAIT && t->conns[i].rail == r)
                t->conns[i].state = C_CLOSED;
        path_down(t, cn, err);
        return;
    }
    conn_close_fd(t, cn);
    rio__tcp_ctr_add(t, &t->ctr.dial_failures, 1);
    r->up = false;
    r->fails++;
    r->retry_ns = now + dial_backoff_ns(t, r->fails);
    r->last_err = err;
    cn->grow_ns = 0;
    conn_fail_ops(t, cn, err);
    path_down(t, cn, err);
    for (unsigned i = 0; i < t->nconns; i++) {
        struct tcp_conn *w = &t->conns[i];
        if (w->state == C_WAIT && w->rail == r) {
            w->state = C_CLOSED;
            w->grow_ns = 0;
            conn_fail_ops(t, w, err);
            path_down(t, w, err);
        }
    }
}

/*
 * Close cn on purpose: victim ends with res, tombstones are dropped, and
 * every other op goes out again, in order, on a fresh connection.
 */
void rio__tcp_conn_abort(struct tcp_transport *t, struct tcp_conn *cn, struct tcp_slot *victim,
                         int64_t res, uint64_t now)
{
    struct rio_list keep = {0};
    struct tcp_slot *s;
    uint64_t requeued = 0;

    conn_close_fd(t, cn);
    for (int pass = 0; pass < 2; pass++) {
        struct rio_list *l = pass == 0 ? &cn->wq : &cn->sq;
        while ((s = sl_pop(l))) {
            if (s == victim) {
                rio__tcp_slot_done(t, s, res, false);
            } else if (!s->io) {
                rio__tcp_slot_done(t, s, 0, false);
            } else {
                s->where = SL_QUEUED;
                sl_push(&keep, s);
                requeued++;
            }
        }
    }
    cn->sq = keep;
    cn->last_progress_ns = now;
    if (requeued)
        rio__tcp_ctr_add(t, &t->ctr.requeued, (int64_t)requeued);
}

/* A PUT_ONE for cn, whose server does not take it (one restarted as an
 * older version since its member's HELLO said it did): the member gets no
 * more, and the op's answer is RIO_ENOUPLOAD, nothing written, so that
 * the engine starts the PUT over, in three exchanges. */
int rio__tcp_put_one_refused(struct tcp_transport *t, struct tcp_conn *cn)
{
    atomic_store(&cn->m->put_one_off, true);
    rio__tcp_ctr_add(t, &t->ctr.put_one_refused, 1);
    return RIO_ENOUPLOAD;
}

/* The same for a GET_ONE: the op ends with no descriptor (RIO__ENOTONE,
 * no generation), so that the engine looks the object up and reads it. */
int rio__tcp_get_one_refused(struct tcp_transport *t, struct tcp_conn *cn)
{
    atomic_store(&cn->m->get_one_off, true);
    rio__tcp_ctr_add(t, &t->ctr.get_one_refused, 1);
    return RIO__ENOTONE;
}

static void conn_ready(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct tcp_rail *r = cn->rail;

    cn->state = C_READY;
    rio__tcp_ctr_add(t, &t->ctr.conns_open, 1);
    if (cn->leader) {
        r->dialing = false;
        cn->leader = false;
    }
    r->up = true;
    r->fails = 0;
    r->retry_ns = 0;
    /* The connections that waited for this dial may go now. */
    for (unsigned i = 0; i < t->nconns; i++)
        if (t->conns[i].state == C_WAIT && t->conns[i].rail == r)
            t->conns[i].state = C_CLOSED;
    pthread_mutex_lock(&t->mu);
    cn->window = t->o.depth;
    if (cn->max_depth && cn->max_depth < cn->window)
        cn->window = cn->max_depth;
    pthread_mutex_unlock(&t->mu);
    cn->last_progress_ns = now;
    cn->out_blocked = false;
    /* A server that does not take PUT_ONE (not the one whose HELLO said it
     * did) would close the connection on it: the ops queued for it fail. */
    if (!(cn->caps & RIO_PROTO_CAP_PUT_ONE) || !(cn->caps & RIO_PROTO_CAP_GET_ONE)) {
        struct tcp_slot *s, *next;
        for (s = sl_head(&cn->sq); s; s = next) {
            next = sl_next(s);
            if (!s->io)
                continue;
            if (s->op == RIO_OP_PUT_ONE && !(cn->caps & RIO_PROTO_CAP_PUT_ONE)) {
                sl_unlink(&cn->sq, s);
                rio__tcp_slot_done(t, s, rio__tcp_put_one_refused(t, cn), false);
            } else if (s->op == RIO_OP_GET_ONE && !(cn->caps & RIO_PROTO_CAP_GET_ONE)) {
                sl_unlink(&cn->sq, s);
                rio__tcp_slot_done(t, s, rio__tcp_get_one_refused(t, cn), false);
            }
        }
    }
    conn_update_events(t, cn);
    path_up(t, cn);
}

/* Send what is left of the handshake frame. */
static int conn_hs_flush(struct tcp_transport *t, struct tcp_conn *cn)
{
    while (cn->hs_off < cn->hs_len || (cn->tls.ssl && rio__tls_has_pending_out(&cn->tls))) {
        struct iovec iov = {.iov_base = cn->hs + cn->hs_off,
                            .iov_len = (size_t)(cn->hs_len - cn->hs_off)};
        ssize_t w = cn->hs_off < cn->hs_len ? rio__tcp_io_send(cn->fd, &cn->tls, &iov, 1)
                                            : rio__tls_flush(&cn->tls);
        if (w < 0) {
            if (w == -EINTR)
                continue;
            if (w == -EAGAIN) {
                cn->out_blocked = true;
                conn_update_events(t, cn);
                return 0;
            }
            return (int)w;
        }
        cn->hs_off += (uint16_t)w;
    }
    cn->state = cn->state == C_HELLO_TX ? C_HELLO_RX : C_AUTH_RX;
    cn->out_blocked = false;
    conn_update_events(t, cn);
    return 0;
}

static int conn_start_hs(struct tcp_transport *t, struct tcp_conn *cn)
{
    int ret = rio__tcp_new_nonce(cn->cnonce);
    if (ret < 0)
        return ret;
    cn->ctrl = rio__malloc(RIO_PROTO_CTRL_BODY_MAX);
    if (!cn->ctrl)
        return -ENOMEM;
    rio__proto_sess_free(&cn->sess);
    cn->tx_seq = 0;
    cn->hs_id = next_id(t);
    cn->hs_len = (uint16_t)rio__tcp_hs_hello(cn->hs_id, cn->cnonce, cn->hs);
    if (!cn->hs_len)
        return -ENOMEM;
    cn->hs_off = 0;
    cn->state = C_HELLO_TX;
    return conn_hs_flush(t, cn);
}

/* Drive the TLS handshake; the protocol's handshake follows it. */
static int conn_tls_step(struct tcp_transport *t, struct tcp_conn *cn)
{
    char why[256];
    int ret = rio__tls_handshake(&cn->tls, why, sizeof(why));

    if (ret == -EAGAIN) {
        conn_update_events(t, cn);
        return 0;
    }
    if (ret == RIO_ETLS || ret == RIO_ETLSVERIFY)
        rio__tcp_tls_say(t, cn->m->host, why);
    if (ret < 0)
        return ret;
    return conn_start_hs(t, cn);
}

/* The TCP connection is up: TLS first when on, then HELLO. */
static int conn_connected(struct tcp_transport *t, struct tcp_conn *cn)
{
    if (!t->tls_ctx)
        return conn_start_hs(t, cn);
    int ret = rio__tls_init(&cn->tls, t->tls_ctx, cn->fd, true, rio__tcp_tls_name_of(t, cn->m));
    if (ret < 0)
        return ret;
    cn->state = C_TLS;
    return conn_tls_step(t, cn);
}

int rio__tcp_conn_dial(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    int fd, ret;

    rio__tcp_ctr_add(t, &t->ctr.dials, 1);
    ret = rio__tcp_sock_open(t, cn->rail, &fd);
    if (ret < 0)
        return ret;
    cn->fd = fd;
    cn->epoch++;
    cn->deadline_ns = now + (uint64_t)t->connect_ms * NS_PER_MS;
    cn->state = C_CONNECTING;
    cn->rx_mode = RX_HDR;
    cn->rx_hdr_got = 0;
    struct epoll_event e = {.events = EPOLLOUT, .data.u64 = ((uint64_t)cn->epoch << 32) | cn->idx};
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, fd, &e) < 0)
        return -errno;
    cn->ev = EPOLLOUT;
    if (ret == 0)
        return conn_connected(t, cn);
    return 0;
}

static int conn_flush(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct iovec iov[TCP_IOV_MAX];

    if (cn->tls.ssl) {
        /* A record TLS kept goes before anything else. */
        int r = rio__tls_flush(&cn->tls);
        if (r == -EAGAIN) {
            cn->out_blocked = true;
            conn_update_events(t, cn);
            return 0;
        }
        if (r < 0)
            return r;
    }
    for (;;) {
        unsigned inflight = (unsigned)cn->wq.count;
        uint64_t off = cn->sq_off;
        size_t total = 0;
        int n = 0;

        uint64_t seq = cn->tx_seq;
        for (struct tcp_slot *s = sl_head(&cn->sq); s && n + 2 <= TCP_IOV_MAX; s = sl_next(s)) {
            if (cn->max_depth && inflight >= cn->max_depth)
                break;
            if (off == 0) {
                /* Its first byte goes now: its tag is for this place in the
                 * stream (made again if a cancelled request left the queue
                 * before it, or it moved to another connection). */
                uint64_t want = rio__proto_sess_keyed(&cn->sess) ? seq : 0;
                if (s->seal_conn != cn || s->seal_epoch != cn->epoch || s->seal_seq != want) {
                    /* Its service time is asked of a server that sends
                     * it (the header's flags are under the tag). */
                    s->svc_asked = (cn->caps & RIO_PROTO_CAP_SVC_TIME) != 0;
                    rio__proto_hdr_set_flags(s->req, s->svc_asked ? RIO_PF_SVC : 0);
                    if (rio__tcp_seal_contig(&cn->sess, want, s->req,
                                             s->req_len - RIO_PROTO_HDR_LEN - RIO_PROTO_TAG_LEN) <
                        0)
                        return -ENOMEM;
                    s->seal_conn = cn;
                    s->seal_epoch = cn->epoch;
                    s->seal_seq = want;
                }
                seq++;
                s->sent_ns = now;
            }
            if (off < s->req_len) {
                iov[n].iov_base = s->req + off;
                iov[n].iov_len = s->req_len - off;
                total += iov[n++].iov_len;
            }
            if (s->data_len) {
                uint64_t doff = off > s->req_len ? off - s->req_len : 0;
                iov[n].iov_base = (void *)(s->data + doff);
                iov[n].iov_len = (size_t)(s->data_len - doff);
                total += iov[n++].iov_len;
            }
            inflight++;
            off = 0;
            if (total >= TCP_SEND_BATCH)
                break;
        }
        if (n == 0)
            break;
        ssize_t w = rio__tcp_io_send(cn->fd, &cn->tls, iov, n);
        if (w < 0) {
            if (w == -EINTR)
                continue;
            if (w == -EAGAIN) {
                cn->out_blocked = true;
                break;
            }
            return (int)w;
        }
        cn->last_progress_ns = now;
        atomic_fetch_add_explicit(&t->bytes_out, (uint64_t)w, memory_order_relaxed);
        /* Whole requests move to the wait list; a part stays at the head. */
        uint64_t left = (uint64_t)w;
        while (left > 0) {
            struct tcp_slot *s = sl_head(&cn->sq);
            uint64_t rem = s->req_len + s->data_len - cn->sq_off;
            if (left < rem) {
                if (cn->sq_off == 0)
                    cn->tx_seq++; /* its first byte went */
                cn->sq_off += left;
                break;
            }
            left -= rem;
            if (cn->sq_off == 0)
                cn->tx_seq++;
            cn->sq_off = 0;
            sl_unlink(&cn->sq, s);
            s->where = SL_WAIT;
            s->sent_whole = true;
            sl_push(&cn->wq, s);
        }
        if ((size_t)w < total) {
            cn->out_blocked = true;
            break;
        }
    }
    if (cn->tls.ssl && !cn->out_blocked) {
        int r = rio__tls_flush(&cn->tls);
        if (r == -EAGAIN)
            cn->out_blocked = true;
        else if (r < 0)
            return r;
    }
    conn_update_events(t, cn);
    return 0;
}

void rio__tcp_conn_kick(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct tcp_rail *r = cn->rail;
    int ret;

    if (!cn->sq.count)
        return;
    if (cn->state == C_READY) {
        if (!cn->out_blocked) {
            ret = conn_flush(t, cn, now);
            if (ret < 0)
                rio__tcp_conn_fail(t, cn, ret);
        }
        return;
    }
    if (cn->state != C_CLOSED)
        return;
    if (now < r->retry_ns) {
        conn_fail_ops(t, cn, r->last_err);
        return;
    }
    if (cn->down && now < cn->grow_ns) {
        /* Backing off alone (the server cut its dial): the engine moves
         * these elsewhere; the background dial brings the path back. */
        conn_fail_ops(t, cn, cn->last_err);
        return;
    }
    if (!r->up) {
        if (r->dialing) {
            cn->state = C_WAIT;
            return;
        }
        r->dialing = true;
        cn->leader = true;
    }
    ret = rio__tcp_conn_dial(t, cn, now);
    if (ret < 0)
        rio__tcp_dial_failed(t, cn, ret, now);
}

static int conn_on_body(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now);

/* A whole frame during the handshake. Returns 0 or an error (dial failed). */
static int conn_on_hs_frame(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct hs_info hi;
    int ret;

    if (cn->state == C_HELLO_RX) {
        ret = rio__tcp_resp_check(&cn->rh, RIO_OP_HELLO, cn->hs_id);
        if (ret == 0)
            ret = rio__tcp_hs_on_hello(t, &cn->rh, cn->ctrl, &hi);
        if (ret < 0)
            return ret;
        cn->max_body = hi.max_body;
        cn->max_depth = hi.max_depth;
        cn->caps = hi.caps;
        memcpy(cn->snonce, hi.snonce, sizeof(cn->snonce));
        if (!hi.auth_required) {
            conn_ready(t, cn, now);
            return 0;
        }
        cn->hs_id = next_id(t);
        cn->hs_len =
            (uint16_t)rio__tcp_hs_auth(t, &cn->sess, cn->hs_id, cn->snonce, cn->cnonce, cn->hs);
        if (!cn->hs_len)
            return -ENOMEM;
        cn->hs_off = 0;
        cn->state = C_AUTH_TX;
        return conn_hs_flush(t, cn);
    }
    ret = rio__tcp_resp_check(&cn->rh, RIO_OP_AUTH, cn->hs_id);
    if (ret == 0)
        ret = rio__tcp_hs_on_auth(t, &cn->sess, &cn->rh, cn->ctrl, cn->cnonce, cn->snonce);
    if (ret < 0)
        return ret;
    conn_ready(t, cn, now);
    return 0;
}

/*
 * A whole header arrived. Returns 0 to go on, 1 when cn was closed here, or
 * an error the connection fails with.
 */
static int conn_on_header(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct rio_proto_hdr *h = &cn->rh;
    struct tcp_slot *s;
    uint32_t ctl, data;
    int ret;

    cn->rx_hdr_got = 0;
    ret = rio__proto_hdr_decode(cn->rx_hdr, RIO_PROTO_BODY_CAP, h);
    if (ret == RIO_EVERSION)
        return ret;
    if (ret < 0 && rio__tcp_plain_got_tls(t, cn->m, cn->rx_hdr, RIO_PROTO_HDR_LEN))
        return RIO_ETLS;
    if (ret < 0 || !(h->flags & RIO_PF_RESPONSE) || rio__proto_layout(h, &ctl, &data) < 0)
        return RIO_EPROTO; /* poisons the connection (rio__tcp_conn_event) */
    cn->rx_got = 0;
    cn->rx_len = h->body_len;
    cn->rx_slot = NULL;
    if (cn->state != C_READY) {
        /* Only the answer to our HELLO or AUTH may come now. */
        if ((cn->state != C_HELLO_RX && cn->state != C_AUTH_RX) ||
            h->body_len > RIO_PROTO_CTRL_BODY_MAX)
            return RIO_EPROTO;
        cn->rx_mode = RX_CTRL;
    } else {
        for (s = sl_head(&cn->wq); s; s = sl_next(s))
            if (s->id == h->id)
                break;
        /* An answer to nothing outstanding (a duplicate of one already
         * taken, ids are never reused), of another opcode, or an error or
         * a PUT_CHUNK answer with a body (more than its tag): the stream
         * cannot be trusted. */
        if (!s || h->opcode != s->op || ((h->flags & RIO_PF_SVC) && !s->svc_asked) ||
            (ctl && (h->status != 0 || (s->op != RIO_OP_READ && s->op != RIO_OP_GET_ONE &&
                                        (s->op != RIO_OP_PUT_ONE || ctl != 8)))))
            return RIO_EPROTO;
        cn->rx_slot = s;
        if (h->status == 0 && s->op == RIO_OP_GET_ONE && data) {
            /* A GET_ONE answer with the object's bytes: never more than
             * the len the request allowed (a protocol violation), its
             * descriptor, xxh3 and tag first, checked before any lands. */
            if (data > s->expect_len) {
                rio__tcp_ctr_add(t, &t->ctr.poisoned, 1);
                rio__tcp_conn_abort(t, cn, s, -EPROTO, now);
                return 1;
            }
            cn->rx_mode = RX_READ_FIXED;
            cn->rx_len = ctl + RIO_PROTO_TAG_LEN;
            return 0;
        }
        if (h->status == 0 && s->op == RIO_OP_READ) {
            if (data != s->expect_len) {
                /* Never more than len bytes into dst: the op fails (short:
                 * the chunk is retried; longer: a protocol violation, retried
                 * like a reset) and the stream is abandoned; the others go
                 * out again. */
                if (data > s->expect_len)
                    rio__tcp_ctr_add(t, &t->ctr.poisoned, 1);
                rio__tcp_conn_abort(t, cn, s, data < s->expect_len ? RIO_ESHORT : -EPROTO, now);
                return 1;
            }
            /* Its xxh3 and the tag first: checked before any data lands. */
            cn->rx_mode = RX_READ_FIXED;
            cn->rx_len = RIO_PROTO_READ_FIXED + RIO_PROTO_TAG_LEN;
        } else {
            cn->rx_mode = RX_CTRL;
        }
    }
    return 0;
}

/* The descriptor of a GET_ONE answer (ctl_len bytes of cn->ctrl, data_len
 * bytes of data after them) into s; its data's xxh3 in cn->read_xxh. */
static int get_one_desc(struct tcp_conn *cn, struct tcp_slot *s, uint32_t ctl_len,
                        uint64_t data_len)
{
    struct rio_proto_desc d;
    uint64_t xxh = 0;

    if (rio__proto_dec_get_one_resp(cn->ctrl, ctl_len, data_len, (uint32_t)s->expect_len, &d,
                                    &xxh) < 0)
        return RIO_EPROTO;
    s->done_gen = d.generation;
    s->done_size = d.size;
    s->done_chunk_size = d.chunk_size;
    s->done_nchunks = d.nchunks;
    memcpy(s->done_etag, d.etag, sizeof(s->done_etag));
    cn->read_xxh = xxh;
    return 0;
}

/* A READ or GET_ONE answer's fixed part and tag arrived: check them, then
 * take the data. */
static int conn_on_read_fixed(struct tcp_transport *t, struct tcp_conn *cn)
{
    struct tcp_slot *s = cn->rx_slot;
    uint32_t fixed = (uint32_t)cn->rx_len - RIO_PROTO_TAG_LEN;

    if (rio__proto_rx_check(&cn->sess, cn->rx_hdr, cn->ctrl, fixed, cn->ctrl + fixed) < 0)
        return RIO_EPROTO; /* frame check failed */
    cn->rx_got = 0;
    if (s->op == RIO_OP_GET_ONE) {
        uint64_t data = cn->rh.body_len - fixed - RIO_PROTO_TAG_LEN;
        if (get_one_desc(cn, s, fixed, data) < 0)
            return RIO_EPROTO;
        cn->rx_len = data;
    } else {
        cn->read_xxh = rio__proto_u64(cn->ctrl);
        cn->rx_len = s->expect_len;
    }
    if (s->io) {
        cn->rx_mode = RX_DST;
    } else {
        if (!t->discard && !(t->discard = rio__malloc(TCP_DISCARD_LEN)))
            return -ENOMEM;
        cn->rx_mode = RX_DISCARD;
    }
    return 0;
}

/* A whole frame arrived. Returns as conn_on_header. */
static int conn_on_body(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct tcp_slot *s = cn->rx_slot;
    int mode = cn->rx_mode;
    int64_t res;

    cn->rx_mode = RX_HDR;
    cn->rx_slot = NULL;
    if (mode == RX_CTRL) {
        uint32_t ctl = (uint32_t)cn->rx_len - RIO_PROTO_TAG_LEN;
        if (rio__proto_rx_check(&cn->sess, cn->rx_hdr, cn->ctrl, ctl, cn->ctrl + ctl) < 0)
            return RIO_EPROTO; /* frame check failed */
        cn->rh.body_len = ctl; /* what the handshake decodes */
    }
    if (cn->state != C_READY)
        return conn_on_hs_frame(t, cn, now);
    /* An answer that breaks the protocol fails the connection with the op
     * still on its wait list: it fails (or goes again) with the others. A
     * PUT_ONE's so answered counts as unanswered: it may have published. */
    if (s->op == RIO_OP_PUT_ONE && cn->rh.status == 0) {
        /* A PUT_ONE answer is its generation (never 0). */
        if (cn->rh.body_len != 8 || !(s->done_gen = rio__proto_u64(cn->ctrl)))
            return RIO_EPROTO;
    }
    if (s->op == RIO_OP_GET_ONE && cn->rh.status == 0 && mode == RX_CTRL) {
        /* The descriptor alone: an object the answer could not carry. */
        if (get_one_desc(cn, s, cn->rh.body_len, 0) < 0)
            return RIO_EPROTO;
    }
    sl_unlink(&cn->wq, s);
    s->answered = true;
    /* The server's service time is its word: never more than the op took
     * from its first byte out to its answer in (docs/protocol.md). */
    if (s->svc_asked && (cn->rh.flags & RIO_PF_SVC))
        s->done_svc_ns =
            rio__proto_svc_clamp(cn->rh.svc_us, now > s->sent_ns ? now - s->sent_ns : 0);
    if (cn->rh.status != 0 && (s->op == RIO_OP_PUT_CHUNK || s->op == RIO_OP_PUT_ONE) &&
        wire_status(cn->rh.status) == RIO_ENOTFOUND) {
        /* The server dropped the upload (a PUT_ONE's before its data all
         * came, --upload-timeout): nothing of it is written. */
        res = RIO_ENOUPLOAD;
    } else if (cn->rh.status != 0) {
        res = wire_status(cn->rh.status);
    } else if (s->op == RIO_OP_GET_ONE) {
        res = RIO__ENOTONE;
        if (mode != RX_CTRL) {
            /* Its bytes came, their xxh3 in the checked part: hashed here
             * as they are checked, and the engine takes that hash. */
            res = (int64_t)s->done_size;
            if (mode == RX_DST && s->io) {
                s->done_xxh = rio__xxh3(s->io->dst, s->done_size);
                s->done_xxh_valid = true;
                if (s->done_xxh != cn->read_xxh)
                    res = RIO_ECHECKSUM;
            }
        }
    } else if (s->op == RIO_OP_READ) {
        res = (int64_t)s->expect_len;
        /* The data's xxh3 came in the checked part: the chunk's own (the
         * engine verifies the data against it) or, when the engine has
         * none, the data is hashed here. */
        if (mode == RX_DST && s->io) {
            if (s->io->xxh ? s->io->xxh != cn->read_xxh
                           : rio__xxh3(s->io->dst, s->io->len) != cn->read_xxh)
                res = RIO_ECHECKSUM;
        }
    } else {
        res = (int64_t)s->data_len;
    }
    if (res > 0 && s->io)
        rio__tcp_ctr_add(t, &t->ctr.path_bytes[cn->path], res);
    rio__tcp_slot_done(t, s, res, false);
    return 0;
}

/* EOF: an idle connection the server closed goes quietly; anything owed fails. */
static int conn_on_eof(struct tcp_transport *t, struct tcp_conn *cn)
{
    if (cn->state == C_READY && cn->wq.count == 0 && cn->sq_off == 0 && cn->rx_mode == RX_HDR &&
        cn->rx_hdr_got == 0) {
        /* Nothing of the queued ops reached the server: they wait for a
         * fresh connection. */
        conn_close_fd(t, cn);
        return 1;
    }
    if (cn->rx_mode == RX_HDR && rio__tcp_plain_got_tls(t, cn->m, cn->rx_hdr, cn->rx_hdr_got))
        return RIO_ETLS;
    return -ECONNRESET;
}

/* Read what cn has, up to a budget. Returns as conn_on_header. */
static int conn_read_some(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    uint64_t budget = TCP_RECV_BUDGET;

    /* TLS may hold decrypted bytes no readiness event will announce: they
     * are taken past the budget. */
    while (budget > 0 || (cn->tls.ssl && rio__tls_pending_in(&cn->tls))) {
        uint64_t cap = budget ? budget : RIO_TLS_RECORD;
        void *p;
        size_t want;

        switch (cn->rx_mode) {
        case RX_HDR:
            p = cn->rx_hdr + cn->rx_hdr_got;
            want = RIO_PROTO_HDR_LEN - cn->rx_hdr_got;
            break;
        case RX_DST:
            /* rx_len == io->len for a READ, <= for a GET_ONE (both checked
             * on the header): never past dst's end */
            p = (uint8_t *)cn->rx_slot->io->dst + cn->rx_got;
            want = (size_t)min_u64(cn->rx_len - cn->rx_got, cap);
            break;
        case RX_DISCARD:
            p = t->discard;
            want = (size_t)min_u64(cn->rx_len - cn->rx_got, TCP_DISCARD_LEN);
            break;
        default: /* RX_CTRL, RX_READ_FIXED */
            p = cn->ctrl + cn->rx_got;
            want = (size_t)(cn->rx_len - cn->rx_got);
            break;
        }
        ssize_t r = rio__tcp_io_recv(cn->fd, &cn->tls, p, want);
        if (r == 0)
            return conn_on_eof(t, cn);
        if (r < 0) {
            if (r == -EINTR)
                continue;
            if (r == -EAGAIN) {
                if (cn->tls.ssl && cn->tls.want == RIO_TLS_WANT_WRITE && !cn->out_blocked) {
                    cn->out_blocked = true;
                    conn_update_events(t, cn);
                }
                return 0;
            }
            return (int)r;
        }
        cn->last_progress_ns = now;
        atomic_fetch_add_explicit(&t->bytes_in, (uint64_t)r, memory_order_relaxed);
        budget -= min_u64((uint64_t)r, budget);
        int ret;
        if (cn->rx_mode == RX_HDR) {
            cn->rx_hdr_got += (unsigned)r;
            if (cn->rx_hdr_got < RIO_PROTO_HDR_LEN)
                continue;
            ret = conn_on_header(t, cn, now);
        } else {
            cn->rx_got += (uint64_t)r;
            if (cn->rx_got < cn->rx_len)
                continue;
            if (cn->rx_mode == RX_READ_FIXED)
                ret = conn_on_read_fixed(t, cn);
            else
                ret = conn_on_body(t, cn, now);
        }
        if (ret != 0)
            return ret;
        if (cn->state == C_CLOSED)
            return 1;
    }
    return 0;
}

/*
 * Read what cn has; then, before the loop waits on cn again, the receive
 * low-water mark for a READ answer's data arriving straight into its
 * destination (rio__proto_rcvlowat), whatever ended the read (no data, the
 * budget). Plain TCP only. The watchdog sees bytes arriving under the mark
 * (lowat_moved, loop.c).
 */
static int conn_read(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    int ret = conn_read_some(t, cn, now);
    if (ret != 0 || cn->fd < 0 || cn->state != C_READY)
        return ret;
    uint64_t owed = cn->rx_mode == RX_DST && !cn->tls.ssl ? cn->rx_len - cn->rx_got : 0;
    /* What the socket held when the watchdog last looked is gone: it was
     * read (this read made progress, and the watchdog counts from it). */
    cn->lowat_seen = 0;
    cn->lowat_look_ns = now;
    rio__proto_rcvlowat(cn->fd, &cn->lowat, owed);
    return 0;
}

void rio__tcp_conn_event(struct tcp_transport *t, struct tcp_conn *cn, uint32_t ev, uint64_t now)
{
    int ret = 0;

    if (cn->state == C_CONNECTING) {
        if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        ret = rio__tcp_sock_error(cn->fd);
        if (ret == 0)
            ret = conn_connected(t, cn);
        if (ret < 0)
            rio__tcp_dial_failed(t, cn, ret, now);
        return;
    }
    if (cn->state == C_TLS) {
        ret = conn_tls_step(t, cn);
        if (ret < 0)
            rio__tcp_dial_failed(t, cn, ret, now);
        return;
    }
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        ret = conn_read(t, cn, now);
        if (ret > 0)
            return;
        if (ret == 0 && (ev & EPOLLERR))
            ret = rio__tcp_sock_error(cn->fd);
        if (ret < 0)
            goto fail;
    }
    if (ev & EPOLLOUT) {
        cn->out_blocked = false;
        if (cn->state == C_HELLO_TX || cn->state == C_AUTH_TX)
            ret = conn_hs_flush(t, cn);
        else if (cn->state == C_READY)
            ret = conn_flush(t, cn, now);
        if (ret < 0)
            goto fail;
    }
    return;
fail:
    if (ret == RIO_EPROTO) {
        /* A frame that breaks the protocol poisons this connection only:
         * it is closed and its ops fail with -EPROTO, which the engine
         * retries like a reset (on another path when there is one). */
        rio__tcp_ctr_add(t, &t->ctr.poisoned, 1);
        ret = -EPROTO;
    }
    if (cn->state == C_READY)
        rio__tcp_conn_fail(t, cn, ret);
    else
        rio__tcp_dial_failed(t, cn, ret, now);
}
