/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The blocking control connection of each member: poll-bounded I/O, the
 * blocking dial (TCP, TLS, HELLO, AUTH), and one request and its answer
 * (ctl_call) under the member's mutex.
 */
#include "transport/tcp/tcp_int.h"

static int wait_fd(int fd, short events, uint64_t deadline);

/* The round this thread leads (ctl_round sets it while it runs): its
 * waits end too once the cancel tokens of all its unanswered requests
 * fired, looked at every CTL_CANCEL_SLICE_MS. */
struct ctl_wait;
static __thread struct ctl_wait *const *round_ws;
static __thread unsigned round_n;
static bool round_cancellable(void);
static bool round_cancelled(void);
#define CTL_CANCEL_SLICE_MS 10u

/* TLS on a connected fd, handshake done by deadline (control connections). */
static int blk_tls(struct tcp_transport *t, const struct tcp_member *m, int fd,
                   struct rio__tls *tls, uint64_t deadline)
{
    char why[256];
    int ret = rio__tls_init(tls, t->tls_ctx, fd, true, rio__tcp_tls_name_of(t, m));
    while (ret == 0) {
        struct rio__tls_sigguard g;
        rio__tls_sig_block(&g);
        ret = rio__tls_handshake(tls, why, sizeof(why));
        rio__tls_sig_restore(&g);
        if (ret != -EAGAIN)
            break;
        ret = wait_fd(fd, rio__tcp_io_wants(tls, POLLIN), deadline);
    }
    if (ret == RIO_ETLS || ret == RIO_ETLSVERIFY)
        rio__tcp_tls_say(t, m->host, why);
    if (ret < 0)
        rio__tls_cleanup(tls);
    return ret == -EPROTO ? RIO_EPROTO : ret;
}

static int wait_fd(int fd, short events, uint64_t deadline)
{
    bool watch = round_cancellable();
    /* This thread's own metadata op's progress callback (core/meta.c) runs
     * between slices; it may fire the op's token, which watch sees. */
    bool tick = rio__meta_ticking();

    for (;;) {
        if (tick)
            rio__meta_tick();
        if (watch && round_cancelled())
            return RIO_ECANCELED;
        uint64_t now = rio__now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        uint64_t ms = (deadline - now + NS_PER_MS - 1) / NS_PER_MS;
        if ((watch || tick) && ms > CTL_CANCEL_SLICE_MS)
            ms = CTL_CANCEL_SLICE_MS;
        struct pollfd p = {.fd = fd, .events = events};
        int r = poll(&p, 1, ms > INT_MAX ? INT_MAX : (int)ms);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r > 0)
            return 0;
    }
}

/* After a send or recv on fd failed with err: 0 to try again (interrupted,
 * or fd became ready for the plain events by deadline), else the error. */
static int blk_io_again(int fd, struct rio__tls *tls, ssize_t err, short events, uint64_t deadline)
{
    if (err == -EINTR)
        return 0;
    if (err == -EAGAIN)
        return wait_fd(fd, rio__tcp_io_wants(tls, events), deadline);
    return (int)err;
}

/* Send every byte of iov (which is consumed) by deadline. */
static int blk_send_iov(int fd, struct rio__tls *tls, struct iovec *iov, int n, uint64_t deadline)
{
    while (n > 0 && iov->iov_len == 0) {
        iov++;
        n--;
    }
    while (n > 0 || (tls->ssl && rio__tls_has_pending_out(tls))) {
        ssize_t w = n > 0 ? rio__tcp_io_send(fd, tls, iov, n) : rio__tls_flush(tls);
        if (w < 0) {
            int r = blk_io_again(fd, tls, w, POLLOUT, deadline);
            if (r < 0)
                return r;
            continue;
        }
        size_t left = (size_t)w;
        while (n > 0 && left >= iov->iov_len) {
            left -= iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + left;
            iov->iov_len -= left;
        }
    }
    return 0;
}

static int blk_recv_raw(int fd, struct rio__tls *tls, void *buf, size_t n, uint64_t deadline)
{
    size_t got = 0;

    while (got < n) {
        ssize_t r = rio__tcp_io_recv(fd, tls, (uint8_t *)buf + got, n - got);
        if (r == 0)
            return -ECONNRESET;
        if (r < 0) {
            int w = blk_io_again(fd, tls, r, POLLIN, deadline);
            if (w < 0)
                return w;
            continue;
        }
        got += (size_t)r;
    }
    return 0;
}

/* One of the two above: send iov[0..n), or receive into iov[0] (n is 1). */
static int blk_io_raw(int fd, struct rio__tls *tls, struct iovec *iov, int n, bool send,
                      uint64_t deadline)
{
    if (send)
        return blk_send_iov(fd, tls, iov, n, deadline);
    return blk_recv_raw(fd, tls, iov[0].iov_base, iov[0].iov_len, deadline);
}

/* The same, with SIGPIPE held off around OpenSSL (tls.h). */
static int blk_io(int fd, struct rio__tls *tls, struct iovec *iov, int n, bool send,
                  uint64_t deadline)
{
    struct rio__tls_sigguard g;
    int ret;

    if (!tls->ssl)
        return blk_io_raw(fd, tls, iov, n, send, deadline);
    rio__tls_sig_block(&g);
    ret = blk_io_raw(fd, tls, iov, n, send, deadline);
    rio__tls_sig_restore(&g);
    return ret;
}

static int blk_send(int fd, struct rio__tls *tls, struct iovec *iov, int n, uint64_t deadline)
{
    return blk_io(fd, tls, iov, n, true, deadline);
}

static int blk_recv(int fd, struct rio__tls *tls, void *buf, size_t n, uint64_t deadline)
{
    struct iovec one = {buf, n};

    return blk_io(fd, tls, &one, 1, false, deadline);
}

/*
 * A blocking connection's reader: what one recv brought beyond the bytes
 * asked for stays in buf for the next read, so a round's answers, which
 * arrive back to back, cost one recv for several of them rather than two
 * each. cap 0: no buffer, every read straight from the socket. A large
 * read (a LOOKUP's checksum list) goes straight into its destination once
 * the buffered bytes are used.
 */
struct blk_rd {
    int fd;
    struct rio__tls *tls;
    uint8_t *buf;
    size_t cap, off, len;
};

/* One recv of whatever is there (at most cap bytes) into the empty buffer. */
static int rd_fill(struct blk_rd *rd, uint64_t deadline)
{
    struct rio__tls_sigguard g;
    int ret = 0;

    if (rd->tls->ssl)
        rio__tls_sig_block(&g);
    for (;;) {
        ssize_t r = rio__tcp_io_recv(rd->fd, rd->tls, rd->buf, rd->cap);
        if (r > 0) {
            rd->off = 0;
            rd->len = (size_t)r;
            break;
        }
        ret = r == 0 ? -ECONNRESET : blk_io_again(rd->fd, rd->tls, r, POLLIN, deadline);
        if (ret < 0)
            break;
    }
    if (rd->tls->ssl)
        rio__tls_sig_restore(&g);
    return ret;
}

static int rd_read(struct blk_rd *rd, void *dst, size_t n, uint64_t deadline)
{
    uint8_t *p = dst;

    while (n > 0) {
        if (rd->off < rd->len) {
            size_t k = rd->len - rd->off < n ? rd->len - rd->off : n;
            memcpy(p, rd->buf + rd->off, k);
            rd->off += k;
            p += k;
            n -= k;
            continue;
        }
        if (n >= rd->cap)
            return blk_recv(rd->fd, rd->tls, p, n, deadline);
        int ret = rd_fill(rd, deadline);
        if (ret < 0)
            return ret;
    }
    return 0;
}

/* Read a frame's header into h (and its bytes into hb). Any error leaves
 * the connection unusable. */
static int blk_recv_hdr(struct tcp_transport *t, const struct tcp_member *m, struct blk_rd *rd,
                        uint8_t hb[RIO_PROTO_HDR_LEN], struct rio_proto_hdr *h, uint64_t deadline)
{
    int ret;

    memset(hb, 0, RIO_PROTO_HDR_LEN);
    ret = rd_read(rd, hb, RIO_PROTO_HDR_LEN, deadline);
    if (ret == -EPROTO)
        return RIO_EPROTO; /* a TLS record failed its check */
    if (ret < 0)
        return rio__tcp_plain_got_tls(t, m, hb, RIO_PROTO_HDR_LEN) ?: ret;
    ret = rio__proto_hdr_decode(hb, RIO_PROTO_BODY_CAP, h);
    if (ret == RIO_EVERSION)
        return ret;
    if (ret < 0 && rio__tcp_plain_got_tls(t, m, hb, RIO_PROTO_HDR_LEN))
        return RIO_ETLS;
    return ret < 0 ? RIO_EPROTO : 0;
}

/* The control part of a frame past the kept bytes (n of them), then its
 * tag: read through a small buffer into the frame check, never stored. */
static int blk_recv_skip(struct blk_rd *rd, struct rio_proto_sess *sess,
                         const uint8_t hb[RIO_PROTO_HDR_LEN], const uint8_t *kept, size_t nkept,
                         uint64_t n, uint64_t deadline)
{
    uint8_t buf[16384], tag[RIO_PROTO_TAG_LEN];
    int ret;

    if (rio__proto_rx_begin(sess, hb) < 0)
        return RIO_EPROTO;
    rio__proto_rx_update(sess, kept, nkept);
    while (n > 0) {
        size_t k = n < sizeof(buf) ? (size_t)n : sizeof(buf);
        ret = rd_read(rd, buf, k, deadline);
        if (ret < 0)
            return ret == -EPROTO ? RIO_EPROTO : ret;
        rio__proto_rx_update(sess, buf, k);
        n -= k;
    }
    ret = rd_read(rd, tag, sizeof(tag), deadline);
    if (ret < 0)
        return ret == -EPROTO ? RIO_EPROTO : ret;
    return rio__proto_rx_end(sess, tag) < 0 ? RIO_EPROTO : 0;
}

/*
 * The rest of the answer to (op, id) whose header blk_recv_hdr read: its
 * body, at most cap bytes (RIO_PROTO_CTRL_MAX for an error status), into
 * *body (rio__malloc, NULL when empty), its tag checked; keep not 0: of a
 * successful answer's control part only the first keep bytes (ctl_req).
 * *ctl_len: the whole control part. Any error leaves the connection
 * unusable.
 */
static int blk_recv_body(struct blk_rd *rd, struct rio_proto_sess *sess,
                         const uint8_t hb[RIO_PROTO_HDR_LEN], uint8_t op, uint64_t id, uint64_t cap,
                         uint64_t keep, struct rio_proto_hdr *h, uint8_t **body, uint64_t *ctl_len,
                         uint64_t deadline)
{
    uint32_t ctl, data;
    int ret;

    *body = NULL;
    if (rio__tcp_resp_check(h, op, id) < 0 || rio__proto_layout(h, &ctl, &data) < 0 || data != 0 ||
        ctl > cap)
        return RIO_EPROTO;
    *ctl_len = ctl;
    if (keep && h->status == 0 && ctl > keep) {
        *body = rio__malloc((size_t)keep);
        if (!*body)
            return -ENOMEM;
        ret = rd_read(rd, *body, (size_t)keep, deadline);
        if (ret == -EPROTO)
            ret = RIO_EPROTO;
        if (ret == 0)
            ret = blk_recv_skip(rd, sess, hb, *body, (size_t)keep, ctl - keep, deadline);
        if (ret < 0) {
            rio__free(*body);
            *body = NULL;
            return ret;
        }
        h->body_len = (uint32_t)keep;
        return 0;
    }
    *body = rio__malloc(h->body_len);
    if (!*body)
        return -ENOMEM;
    ret = rd_read(rd, *body, h->body_len, deadline);
    if (ret == -EPROTO)
        ret = RIO_EPROTO;
    if (ret == 0 && rio__proto_rx_check(sess, hb, *body, ctl, *body + ctl) < 0)
        ret = RIO_EPROTO; /* frame check failed */
    if (ret < 0) {
        rio__free(*body);
        *body = NULL;
        return ret;
    }
    h->body_len = ctl; /* the callers decode the control part */
    return 0;
}

/* The answer to (op, id): both of the above. */
static int blk_recv_frame(struct tcp_transport *t, const struct tcp_member *m, int fd,
                          struct rio__tls *tls, struct rio_proto_sess *sess, uint8_t op,
                          uint64_t id, uint64_t cap, struct rio_proto_hdr *h, uint8_t **body,
                          uint64_t deadline)
{
    struct blk_rd rd = {.fd = fd, .tls = tls};
    uint8_t hb[RIO_PROTO_HDR_LEN];
    uint64_t ctl_len;
    int ret;

    *body = NULL;
    ret = blk_recv_hdr(t, m, &rd, hb, h, deadline);
    if (ret < 0)
        return ret;
    return blk_recv_body(&rd, sess, hb, op, id, cap, 0, h, body, &ctl_len, deadline);
}

/* One request and its answer on a blocking connection. */
static int blk_exchange(struct tcp_transport *t, const struct tcp_member *m, int fd,
                        struct rio__tls *tls, struct rio_proto_sess *sess, const uint8_t *req,
                        size_t len, uint8_t op, uint64_t id, struct rio_proto_hdr *h,
                        uint8_t **body, uint64_t deadline)
{
    struct iovec iov = {.iov_base = (void *)req, .iov_len = len};
    int ret = blk_send(fd, tls, &iov, 1, deadline);
    if (ret < 0)
        return ret;
    return blk_recv_frame(t, m, fd, tls, sess, op, id, RIO_PROTO_CTRL_MAX, h, body, deadline);
}

/* Dial and greet on a blocking connection within connect_ms; fd (and its
 * TLS) and the HELLO's facts out. */
static int blk_dial(struct tcp_transport *t, const struct tcp_member *m, const struct tcp_rail *r,
                    uint32_t connect_ms, struct hs_info *hi, struct rio_proto_sess *sess,
                    struct rio__tls *tls, int *out)
{
    uint64_t deadline = rio__now_ns() + (uint64_t)connect_ms * NS_PER_MS;
    uint8_t cnonce[RIO_PROTO_NONCE_LEN], buf[TCP_HS_MAX], *body = NULL;
    struct rio_proto_hdr h;
    uint64_t id;
    size_t len;
    int fd, ret;

    ret = rio__tcp_new_nonce(cnonce);
    if (ret < 0)
        return ret;
    ret = rio__tcp_sock_open(t, r, &fd);
    if (ret < 0)
        return ret;
    if (ret > 0) {
        ret = wait_fd(fd, POLLOUT, deadline);
        if (ret == 0)
            ret = rio__tcp_sock_error(fd);
        if (ret < 0)
            goto err;
    }
    if (t->tls_ctx) {
        ret = blk_tls(t, m, fd, tls, deadline);
        if (ret < 0)
            goto err;
    }
    rio__proto_sess_free(sess);
    id = next_id(t);
    len = rio__tcp_hs_hello(id, cnonce, buf);
    ret = len ? blk_exchange(t, m, fd, tls, sess, buf, len, RIO_OP_HELLO, id, &h, &body, deadline)
              : -ENOMEM;
    if (ret == 0)
        ret = rio__tcp_hs_on_hello(t, &h, body, hi);
    rio__free(body);
    body = NULL;
    if (ret < 0)
        goto err;
    if (hi->auth_required) {
        id = next_id(t);
        len = rio__tcp_hs_auth(t, sess, id, hi->snonce, cnonce, buf);
        ret =
            len ? blk_exchange(t, m, fd, tls, sess, buf, len, RIO_OP_AUTH, id, &h, &body, deadline)
                : -ENOMEM;
        if (ret == 0)
            ret = rio__tcp_hs_on_auth(t, sess, &h, body, cnonce, hi->snonce);
        rio__free(body);
        if (ret < 0)
            goto err;
    }
    *out = fd;
    return 0;
err:
    rio__proto_sess_free(sess);
    rio__tls_cleanup(tls);
    close(fd);
    return ret;
}

void rio__tcp_ctl_close_locked(struct tcp_member *m)
{
    rio__tls_cleanup(&m->ctl_tls);
    if (m->ctl_fd >= 0)
        close(m->ctl_fd);
    m->ctl_fd = -1;
    rio__proto_sess_free(&m->ctl_sess);
}

/* An idle control connection that shows EOF or stray bytes is not reused. */
static bool ctl_stale_locked(const struct tcp_member *m)
{
    struct pollfd p = {.fd = m->ctl_fd, .events = POLLIN};
    uint8_t b;

    if (m->ctl_tls.ssl && rio__tls_pending_in(&m->ctl_tls))
        return true;
    if (poll(&p, 1, 0) <= 0)
        return false;
    ssize_t r = recv(m->ctl_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return !(r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK));
}

/* Whether two routes are one: the same destination through the same
 * interface (a source address bound on the way, as rails paired by subnet
 * have, does not change the route: the destination does). */
static bool same_route(const struct tcp_rail *a, const struct tcp_rail *b)
{
    return a->dst.len == b->dst.len && memcmp(&a->dst.ss, &b->dst.ss, a->dst.len) == 0 &&
           strcmp(a->ifname, b->ifname) == 0;
}

/* The route the control connection dials now (ctl_via). */
static const struct tcp_rail *ctl_route(const struct tcp_member *m)
{
    return m->ctl_via && m->ctl_via <= m->nrails ? &m->rail[m->ctl_via - 1] : &m->url;
}

/*
 * The control connection failed as a dead route does (a dial or an answer
 * that timed out, an address unreachable or refused): its next dial takes
 * the member's next rail, another NIC of the same server, then the URL
 * address again, in turn. The metadata calls (LOOKUP, PUT_OPEN,
 * PUT_COMMIT) go on the control connection only: while it dialled the URL
 * address alone, the rail behind it dying (a black hole, a link down) failed
 * every call of the member, a PUT at its commit after its chunks had moved,
 * though the other rails carried the chunks. A reset or a damaged answer
 * (the server's doing) keeps the route.
 */
static void ctl_route_failed(struct tcp_member *m, int err)
{
    if (err != -ETIMEDOUT && err != -EHOSTUNREACH && err != -ENETUNREACH && err != -ENETDOWN &&
        err != -EHOSTDOWN && err != -ECONNREFUSED && err != -EADDRNOTAVAIL)
        return;
    for (unsigned n = 0; n <= m->nrails; n++) {
        m->ctl_via = (m->ctl_via + 1) % (m->nrails + 1);
        if (m->ctl_via == 0 || !same_route(&m->rail[m->ctl_via - 1], &m->url))
            return;
    }
}

static int ctl_dial_within_locked(struct tcp_transport *t, struct tcp_member *m, struct hs_info *hi,
                                  uint32_t connect_ms)
{
    struct hs_info local;
    int fd, ret;

    /* A route that fails as a dead one does gives way to the next at once:
     * at open, the rails of ?rails= (the greeting learns the others). */
    for (unsigned n = 0;; n++) {
        ret = blk_dial(t, m, ctl_route(m), connect_ms, hi ? hi : &local, &m->ctl_sess, &m->ctl_tls,
                       &fd);
        if (ret == 0)
            break;
        unsigned via = m->ctl_via;
        ctl_route_failed(m, ret);
        if (m->ctl_via == via || n >= m->nrails)
            return ret;
    }
    m->ctl_fd = fd;
    m->ctl_max_body = (hi ? hi : &local)->max_body;
    m->ctl_caps = (hi ? hi : &local)->caps;
    return 0;
}

int rio__tcp_ctl_dial_locked(struct tcp_transport *t, struct tcp_member *m, struct hs_info *hi)
{
    return ctl_dial_within_locked(t, m, hi, t->connect_ms);
}

/*
 * Combining. Metadata calls run on many threads at once (a batch's opens,
 * lookups and commits on the client's meta workers), and each is one round
 * trip on the member's one control connection. Instead of holding the
 * connection for a whole round trip while the others queue on a mutex, a
 * caller queues its request and the first caller to find no round running
 * leads one: it takes the queued requests (up to CTL_ROUND_MAX, the
 * server's window, all of one timeout), sends them in one write, reads
 * their answers (in any order, matched by id: the protocol's pipelining)
 * and hands each caller its own. So k overlapping calls cost one send, one
 * wake-up of the server and of the leader, and k answers read back to
 * back, instead of k of each. A caller alone makes a round of one: the
 * exchange it always made.
 */
#define CTL_ROUND_MAX 32u
#define CTL_RBUF 4096u /* a round's answers are read through this much */

/* A caller's request while it waits (on the caller's stack). */
struct ctl_wait {
    struct ctl_wait *next;
    const struct ctl_req *rq;
    pthread_cond_t *cv; /* done, or the caller is to lead the next round */
    uint64_t id;
    struct rio_proto_hdr h;
    uint8_t *body;
    uint64_t ctl_len;
    int ret;
    /* The caller reads done, under ctl_mu only; the leader sets it there
     * once the round decided the request (over). Everything else is the
     * leader's while the request is in its round. */
    bool done;
    bool over, sent;
    bool again; /* sent once more already, after a reused connection failed */
    bool answered;
};

static void ctl_enqueue_locked(struct tcp_member *m, struct ctl_wait *w, bool front)
{
    w->next = NULL;
    if (!m->ctl_qh) {
        m->ctl_qh = m->ctl_qt = w;
    } else if (front) {
        w->next = m->ctl_qh;
        m->ctl_qh = w;
    } else {
        m->ctl_qt->next = w;
        m->ctl_qt = w;
    }
}

/* Take the next round: the head of the queue and what follows it with the
 * same timeout and dial rule, at most max. */
static unsigned ctl_take_round_locked(struct tcp_member *m, struct ctl_wait **ws, unsigned max)
{
    unsigned n = 0;
    while (m->ctl_qh && n < max) {
        struct ctl_wait *w = m->ctl_qh;
        if (n && (w->rq->timeout_ms != ws[0]->rq->timeout_ms ||
                  w->rq->no_dial != ws[0]->rq->no_dial || w->rq->dial_ms != ws[0]->rq->dial_ms))
            break;
        m->ctl_qh = w->next;
        if (!m->ctl_qh)
            m->ctl_qt = NULL;
        ws[n++] = w;
    }
    return n;
}

/* Every request of the round not answered yet ends with err; the ones
 * that may go once more on a fresh connection (the connection was reused
 * and the server had closed it) are marked again instead. */
static void ctl_fail_round(struct ctl_wait **ws, unsigned n, int err, bool fresh)
{
    for (unsigned i = 0; i < n; i++) {
        struct ctl_wait *w = ws[i];
        if (w->over || w->answered)
            continue;
        rio__free(w->body);
        w->body = NULL;
        if (!fresh && !w->again && reset_class(err) && w->rq->idempotent) {
            w->again = true; /* requeued by the caller */
            continue;
        }
        w->ret = err;
        w->over = true;
    }
}

/* Every unanswered request of the round this thread leads has a cancel
 * token (else the round cannot end early: it looks at none). */
static bool round_cancellable(void)
{
    bool any = false;

    for (unsigned i = 0; i < round_n; i++) {
        const struct ctl_wait *w = round_ws[i];
        if (w->over || w->answered)
            continue;
        if (!w->rq->cancel)
            return false;
        any = true;
    }
    return any;
}

/* ... and every one of those tokens fired. */
static bool round_cancelled(void)
{
    for (unsigned i = 0; i < round_n; i++) {
        const struct ctl_wait *w = round_ws[i];
        if (!w->over && !w->answered && !rio__cancel_fired(w->rq->cancel))
            return false;
    }
    return true;
}

/* The waiter of the round that id answers, or NULL. */
static struct ctl_wait *ctl_match(struct ctl_wait **ws, unsigned n, uint64_t id)
{
    for (unsigned i = 0; i < n; i++)
        if (ws[i]->sent && !ws[i]->answered && ws[i]->id == id)
            return ws[i];
    return NULL;
}

/*
 * Run one round of n requests on m's control connection (dialled when
 * needed), ctl_mu not held: the leader owns the connection. Each request
 * ends over (its answer or its error in the waiter), or marked again.
 * *dialled: the member's greeting facts in *hi are new.
 */
static void ctl_round_run(struct tcp_transport *t, struct tcp_member *m, struct ctl_wait **ws,
                          unsigned n, struct hs_info *hi, bool *dialled);

static void ctl_round(struct tcp_transport *t, struct tcp_member *m, struct ctl_wait **ws,
                      unsigned n, struct hs_info *hi, bool *dialled)
{
    round_ws = ws;
    round_n = n;
    ctl_round_run(t, m, ws, n, hi, dialled);
    round_ws = NULL;
    round_n = 0;
}

static void ctl_round_run(struct tcp_transport *t, struct tcp_member *m, struct ctl_wait **ws,
                          unsigned n, struct hs_info *hi, bool *dialled)
{
    struct iovec iov[CTL_ROUND_MAX * 5];
    uint8_t hdr[CTL_ROUND_MAX][RIO_PROTO_HDR_LEN], tag[CTL_ROUND_MAX][RIO_PROTO_TAG_LEN];
    const struct ctl_req *rq0 = ws[0]->rq;
    uint32_t caps = m->ctl_caps; /* written only by a leader, under ctl_mu */
    bool fresh = false;
    unsigned niov = 0, nsent = 0;
    int ret = 0;
    /* The round waits for its latest caller's deadline at most: no caller
     * is cut before its own, and a caller alone (or a batch, whose
     * requests share one) ends at its deadline, not its op timeout. */
    uint64_t until = 0;
    for (unsigned i = 0; i < n; i++)
        if (ws[i]->rq->deadline_ns > until)
            until = ws[i]->rq->deadline_ns;

    if (m->ctl_fd >= 0 && ctl_stale_locked(m))
        rio__tcp_ctl_close_locked(m);
    if (m->ctl_fd < 0) {
        if (rq0->no_dial) {
            ctl_fail_round(ws, n, -ENOTCONN, true);
            return;
        }
        uint32_t dial_ms = t->connect_ms;
        if (rq0->dial_ms && rq0->dial_ms < dial_ms)
            dial_ms = rq0->dial_ms;
        uint64_t now = rio__now_ns();
        if (until != UINT64_MAX) {
            uint64_t left_ms = until > now ? (until - now + NS_PER_MS - 1) / NS_PER_MS : 0;
            if (left_ms == 0) {
                ctl_fail_round(ws, n, -ETIMEDOUT, true);
                return;
            }
            if (left_ms < dial_ms)
                dial_ms = (uint32_t)left_ms;
        }
        if (m->ctl_failed) {
            /* The member's last exchange failed: these requests go again
             * (or in its place) on a fresh connection. */
            m->ctl_failed = false;
            rio__tcp_ctr_add(t, &t->ctr.ctl_retries, 1);
        }
        ret = blk_dial(t, m, ctl_route(m), dial_ms, hi, &m->ctl_sess, &m->ctl_tls, &m->ctl_fd);
        if (ret < 0) {
            m->ctl_fd = -1;
            m->ctl_failed = true;
            ctl_route_failed(m, ret);
            ctl_fail_round(ws, n, ret, true);
            return;
        }
        fresh = true;
        *dialled = true;
        caps = hi->caps;
    }
    uint64_t deadline = rio__now_ns() + (uint64_t)rq0->timeout_ms * NS_PER_MS;
    if (until < deadline)
        deadline = until;
    for (unsigned i = 0; i < n; i++) {
        struct ctl_wait *w = ws[i];
        const struct ctl_req *rq = w->rq;
        if ((caps & rq->need_cap) != rq->need_cap) {
            w->ret = RIO_ENOTSUP; /* an older server: it would drop the connection */
            w->over = true;
            continue;
        }
        w->id = next_id(t);
        rio__tcp_frame_header(rq->op, w->id, (uint32_t)rq->body_len + RIO_PROTO_TAG_LEN, hdr[i]);
        struct iovec *f = &iov[niov];
        f[0].iov_base = hdr[i];
        f[0].iov_len = sizeof(hdr[i]);
        for (int k = 0; k < rq->niov; k++)
            f[k + 1] = rq->iov[k];
        ret =
            rio__proto_seal(&m->ctl_sess, rio__tcp_next_seq(&m->ctl_sess), f, rq->niov + 1, tag[i]);
        if (ret < 0)
            break;
        f[rq->niov + 1].iov_base = tag[i];
        f[rq->niov + 1].iov_len = sizeof(tag[i]);
        niov += (unsigned)rq->niov + 2;
        w->sent = true;
        nsent++;
    }
    if (ret == 0 && nsent) {
        ret = blk_send(m->ctl_fd, &m->ctl_tls, iov, (int)niov, deadline);
        pthread_mutex_lock(&t->mu);
        t->ctr.ctl_rounds++;
        t->ctr.ctl_requests += nsent;
        if (nsent > t->ctr.ctl_round_peak)
            t->ctr.ctl_round_peak = nsent;
        pthread_mutex_unlock(&t->mu);
    }
    uint8_t rbuf[CTL_RBUF];
    struct blk_rd rd = {.fd = m->ctl_fd, .tls = &m->ctl_tls, .buf = rbuf, .cap = sizeof(rbuf)};
    for (unsigned got = 0; ret == 0 && got < nsent; got++) {
        uint8_t hb[RIO_PROTO_HDR_LEN];
        struct rio_proto_hdr h;
        ret = blk_recv_hdr(t, m, &rd, hb, &h, deadline);
        if (ret < 0)
            break;
        struct ctl_wait *w = ctl_match(ws, n, h.id);
        if (!w) {
            ret = RIO_EPROTO; /* an answer to nothing asked, or a second one */
            break;
        }
        ret = blk_recv_body(&rd, &m->ctl_sess, hb, w->rq->op, w->id, w->rq->resp_cap, w->rq->keep,
                            &h, &w->body, &w->ctl_len, deadline);
        /* A body cut to its kept bytes is the caller's to decode. */
        if (ret == 0 && h.status == 0 && w->rq->check && w->ctl_len == h.body_len &&
            w->rq->check(w->body, h.body_len) < 0)
            ret = RIO_EPROTO;
        if (ret < 0)
            break;
        w->h = h;
        w->ret = 0;
        w->answered = true;
    }
    for (unsigned i = 0; i < n; i++)
        if (ws[i]->answered)
            ws[i]->over = true;
    if (ret == 0 && rd.off < rd.len) {
        /* Bytes after the last answer: nothing was asked, so the stream
         * is not to be trusted; every request has its answer already. */
        rio__tcp_ctl_close_locked(m);
        return;
    }
    if (ret == 0)
        return;
    /* Whatever went wrong, this stream cannot be trusted any more. */
    rio__tcp_ctl_close_locked(m);
    m->ctl_failed = true;
    ctl_route_failed(m, ret);
    ctl_fail_round(ws, n, ret, fresh);
}

/* Lead rounds (ctl_mu held on entry and exit, dropped during each) until
 * own is done; then hand the lead to the next queued caller, if any. */
static void ctl_lead_locked(struct tcp_transport *t, struct tcp_member *m, struct ctl_wait *own)
{
    struct ctl_wait *ws[CTL_ROUND_MAX];
    unsigned max = CTL_ROUND_MAX;

    if (m->max_depth && m->max_depth < max)
        max = m->max_depth;
    m->ctl_leading = true;
    while (!own->done) {
        unsigned n = ctl_take_round_locked(m, ws, max);
        struct hs_info hi;
        bool dialled = false;
        pthread_mutex_unlock(&m->ctl_mu);
        ctl_round(t, m, ws, n, &hi, &dialled);
        pthread_mutex_lock(&m->ctl_mu);
        if (dialled) {
            m->ctl_max_body = hi.max_body;
            m->ctl_caps = hi.caps;
        }
        /* Requeued in their order, ahead of what came meanwhile. */
        for (unsigned i = n; i-- > 0;) {
            struct ctl_wait *w = ws[i];
            if (w->over) {
                w->done = true;
                if (w != own)
                    pthread_cond_signal(w->cv);
                continue;
            }
            w->sent = w->answered = false;
            ctl_enqueue_locked(m, w, true);
        }
    }
    m->ctl_leading = false;
    if (m->ctl_qh)
        pthread_cond_signal(m->ctl_qh->cv);
}

/*
 * One request and its answer on member m's control connection (dialled when
 * needed), in a round with the requests of other callers (above). Returns 0
 * with the answer's header and body (caller frees), or the error that made
 * the exchange impossible. A status in a well-formed answer is the
 * caller's to read (h->status). *sent (may be NULL) tells whether bytes of
 * the request reached a connection, so that the server may have acted on
 * it.
 *
 * One try, bounded by timeout_ms: trying again after a failed exchange is
 * the engine's (core/meta.c, within retry_attempts, its backoff and the
 * call's deadline). The one step kept here is connection reuse as an HTTP
 * client does it: an idempotent request whose reused idle connection turns
 * out closed by the server (a reset on a connection this round did not
 * dial) goes once more on a fresh connection; the server closing an idle
 * connection is the protocol's normal life, not a failure. A failed
 * exchange closes the connection (its stream cannot be trusted), failing
 * the round's other unanswered requests the same way, and a damaged answer
 * is returned as -EPROTO, a reset-class error, as on a data connection: the
 * request may be repeated only where the caller says it is safe
 * (metadata.c).
 */
int rio__tcp_ctl_call_sent(struct tcp_transport *t, struct tcp_member *m, const struct ctl_req *rq,
                           struct rio_proto_hdr *h, uint8_t **body, bool *sent)
{
    struct ctl_many one = {.rq = rq};
    int ret;

    *body = NULL;
    if (sent)
        *sent = false;
    ret = rio__tcp_ctl_call_many(t, m, &one, 1);
    if (ret < 0)
        return ret;
    if (sent)
        *sent = one.sent;
    *h = one.h;
    *body = one.body;
    return one.ret;
}

/*
 * Several requests to m at once, from one caller: queued together, so that
 * they go in as few rounds as the queue allows, and the caller waits (wakes)
 * once for all of them rather than once each. Each item gets what
 * rio__tcp_ctl_call_sent would give it (h, body, ret, sent). Returns 0, or
 * an error that left every item unsent (bad request, out of memory).
 */
int rio__tcp_ctl_call_many(struct tcp_transport *t, struct tcp_member *m, struct ctl_many *it,
                           unsigned n)
{
    struct ctl_wait *w;
    pthread_cond_t cv;
    int ret;

    for (unsigned i = 0; i < n; i++) {
        it[i].body = NULL;
        it[i].sent = false;
        if (it[i].rq->niov > 3 || it[i].rq->body_len > UINT32_MAX - RIO_PROTO_TAG_LEN)
            return RIO_EINVAL;
    }
    w = rio__calloc(n, sizeof(*w));
    if (!w)
        return -ENOMEM;
    ret = -pthread_cond_init(&cv, NULL);
    if (ret < 0) {
        rio__free(w);
        return ret;
    }
    pthread_mutex_lock(&m->ctl_mu);
    for (unsigned i = 0; i < n; i++) {
        w[i].rq = it[i].rq;
        w[i].cv = &cv; /* any of them done, or the lead to take: one wake-up */
        ctl_enqueue_locked(m, &w[i], false);
    }
    for (unsigned i = 0; i < n; i++)
        while (!w[i].done) {
            if (!m->ctl_leading)
                ctl_lead_locked(t, m, &w[i]);
            else
                pthread_cond_wait(&cv, &m->ctl_mu);
        }
    pthread_mutex_unlock(&m->ctl_mu);
    pthread_cond_destroy(&cv);
    for (unsigned i = 0; i < n; i++) {
        it[i].sent = w[i].sent || w[i].again;
        it[i].h = w[i].h;
        it[i].body = w[i].body;
        it[i].ctl_len = w[i].ctl_len;
        it[i].ret = w[i].ret == RIO_EPROTO ? -EPROTO : w[i].ret;
    }
    rio__free(w);
    return 0;
}

int rio__tcp_ctl_call(struct tcp_transport *t, struct tcp_member *m, const struct ctl_req *rq,
                      struct rio_proto_hdr *h, uint8_t **body)
{
    return rio__tcp_ctl_call_sent(t, m, rq, h, body, NULL);
}

uint64_t rio__tcp_ctl_queued(struct tcp_transport *t)
{
    uint64_t n = 0;
    for (unsigned i = 0; i < t->nmembers; i++) {
        struct tcp_member *m = &t->members[i];
        pthread_mutex_lock(&m->ctl_mu);
        for (const struct ctl_wait *w = m->ctl_qh; w; w = w->next)
            n++;
        pthread_mutex_unlock(&m->ctl_mu);
    }
    return n;
}
