/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The blocking control connection of each member: poll-bounded I/O, the
 * blocking dial (TCP, TLS, HELLO, AUTH), and one request and its answer
 * (ctl_call) under the member's mutex.
 */
#include "transport/tcp/tcp_int.h"

static int wait_fd(int fd, short events, uint64_t deadline);

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
    for (;;) {
        uint64_t now = rio__now_ns();
        if (now >= deadline)
            return -ETIMEDOUT;
        uint64_t ms = (deadline - now + NS_PER_MS - 1) / NS_PER_MS;
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
 * Read the answer to (op, id): its header into h and its body, at most cap
 * bytes (RIO_PROTO_CTRL_MAX for an error status), into *body (rio__malloc,
 * NULL when empty). Any error leaves the connection unusable.
 */
static int blk_recv_frame(struct tcp_transport *t, const struct tcp_member *m, int fd,
                          struct rio__tls *tls, struct rio_proto_sess *sess, uint8_t op,
                          uint64_t id, uint64_t cap, struct rio_proto_hdr *h, uint8_t **body,
                          uint64_t deadline)
{
    uint8_t hb[RIO_PROTO_HDR_LEN] = {0};
    uint32_t ctl, data;
    int ret;

    *body = NULL;
    ret = blk_recv(fd, tls, hb, sizeof(hb), deadline);
    if (ret == -EPROTO)
        return RIO_EPROTO; /* a TLS record failed its check */
    if (ret < 0)
        return rio__tcp_plain_got_tls(t, m, hb, sizeof(hb)) ?: ret;
    ret = rio__proto_hdr_decode(hb, RIO_PROTO_BODY_CAP, h);
    if (ret == RIO_EVERSION)
        return ret;
    if (ret < 0 && rio__tcp_plain_got_tls(t, m, hb, sizeof(hb)))
        return RIO_ETLS;
    if (ret < 0 || rio__tcp_resp_check(h, op, id) < 0 || rio__proto_layout(h, &ctl, &data) < 0 ||
        data != 0 || ctl > cap)
        return RIO_EPROTO;
    *body = rio__malloc(h->body_len);
    if (!*body)
        return -ENOMEM;
    ret = blk_recv(fd, tls, *body, h->body_len, deadline);
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

static int ctl_dial_within_locked(struct tcp_transport *t, struct tcp_member *m, struct hs_info *hi,
                                  uint32_t connect_ms)
{
    struct hs_info local;
    int fd, ret;

    ret = blk_dial(t, m, &m->url, connect_ms, hi ? hi : &local, &m->ctl_sess, &m->ctl_tls, &fd);
    if (ret < 0)
        return ret;
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
 * One request and its answer on member m's control connection (dialled when
 * needed). Returns 0 with the answer's header and body (caller frees), or
 * the error that made the exchange impossible. A status in a well-formed
 * answer is the caller's to read (h->status). *sent (may be NULL) tells
 * whether bytes of the request reached a connection, so that the server may
 * have acted on it.
 *
 * One try, bounded by timeout_ms: trying again after a failed exchange is
 * the engine's (core/meta.c, within retry_attempts, its backoff and the
 * call's deadline). The one step kept here is connection reuse as an HTTP
 * client does it: an idempotent request whose reused idle connection turns
 * out closed by the server (a reset on a connection this call did not dial)
 * goes once more on a fresh connection; the server closing an idle
 * connection is the protocol's normal life, not a failure. A failed
 * exchange closes the connection (its stream cannot be trusted) and a
 * damaged answer is returned as -EPROTO, a reset-class error, as on a data
 * connection: the request may be repeated only where the caller says it is
 * safe (metadata.c).
 */
int rio__tcp_ctl_call_sent(struct tcp_transport *t, struct tcp_member *m, const struct ctl_req *rq,
                           struct rio_proto_hdr *h, uint8_t **body, bool *sent)
{
    struct iovec iov[5];
    uint8_t hdr[RIO_PROTO_HDR_LEN], tag[RIO_PROTO_TAG_LEN];
    int ret = 0;

    *body = NULL;
    if (sent)
        *sent = false;
    if (rq->niov > 3 || rq->body_len > UINT32_MAX - RIO_PROTO_TAG_LEN)
        return RIO_EINVAL;
    pthread_mutex_lock(&m->ctl_mu);
    for (int pass = 0;; pass++) {
        bool fresh = false;
        ret = 0;
        if (m->ctl_fd >= 0 && ctl_stale_locked(m))
            rio__tcp_ctl_close_locked(m);
        if (m->ctl_fd < 0) {
            if (rq->no_dial) {
                ret = -ENOTCONN;
                break;
            }
            uint32_t dial_ms = t->connect_ms;
            if (rq->dial_ms && rq->dial_ms < dial_ms)
                dial_ms = rq->dial_ms;
            if (m->ctl_failed) {
                /* The member's last exchange failed: this request goes
                 * again (or in its place) on a fresh connection. */
                m->ctl_failed = false;
                rio__tcp_ctr_add(t, &t->ctr.ctl_retries, 1);
            }
            ret = ctl_dial_within_locked(t, m, NULL, dial_ms);
            fresh = true;
        }
        if (ret == 0 && (m->ctl_caps & rq->need_cap) != rq->need_cap) {
            ret = RIO_ENOTSUP; /* an older server: it would drop the connection */
            break;
        }
        if (ret == 0) {
            uint64_t deadline = rio__now_ns() + (uint64_t)rq->timeout_ms * NS_PER_MS;
            uint64_t id = next_id(t);
            rio__tcp_frame_header(rq->op, id, (uint32_t)rq->body_len + RIO_PROTO_TAG_LEN, hdr);
            iov[0].iov_base = hdr;
            iov[0].iov_len = sizeof(hdr);
            for (int i = 0; i < rq->niov; i++)
                iov[i + 1] = rq->iov[i];
            ret = rio__proto_seal(&m->ctl_sess, rio__tcp_next_seq(&m->ctl_sess), iov, rq->niov + 1,
                                  tag);
            iov[rq->niov + 1].iov_base = tag;
            iov[rq->niov + 1].iov_len = sizeof(tag);
            if (ret == 0 && sent)
                *sent = true;
            if (ret == 0)
                ret = blk_send(m->ctl_fd, &m->ctl_tls, iov, rq->niov + 2, deadline);
            if (ret == 0)
                ret = blk_recv_frame(t, m, m->ctl_fd, &m->ctl_tls, &m->ctl_sess, rq->op, id,
                                     rq->resp_cap, h, body, deadline);
            if (ret == 0 && h->status == 0 && rq->check && rq->check(*body, h->body_len) < 0) {
                rio__free(*body);
                *body = NULL;
                ret = RIO_EPROTO;
            }
            if (ret == 0)
                break;
            /* Whatever went wrong, this stream cannot be trusted any more. */
            rio__tcp_ctl_close_locked(m);
        }
        m->ctl_failed = true;
        /* A reused connection the server had closed: once more on a fresh one. */
        if (pass > 0 || fresh || !reset_class(ret) || !rq->idempotent)
            break;
    }
    pthread_mutex_unlock(&m->ctl_mu);
    return ret == RIO_EPROTO ? -EPROTO : ret;
}

int rio__tcp_ctl_call(struct tcp_transport *t, struct tcp_member *m, const struct ctl_req *rq,
                      struct rio_proto_hdr *h, uint8_t **body)
{
    return rio__tcp_ctl_call_sent(t, m, rq, h, body, NULL);
}
