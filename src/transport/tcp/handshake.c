/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sockets, plain or TLS I/O, and the protocol's greeting: HELLO and the
 * mutual AUTH (frames built and answers checked), shared by the blocking
 * control connection (control.c) and the data connections (conn.c).
 */
#include "core/internal.h"
#include "transport/tcp/tcp_int.h"

/*
 * A non-blocking socket for rail r, connecting. Returns 1 while the connect
 * is in progress, 0 when it is done, or a negative error.
 */
int rio__tcp_sock_open(const struct tcp_transport *t, const struct tcp_rail *r, int *out)
{
    int fd, one = 1, ret;

    fd = socket(r->dst.ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, IPPROTO_TCP);
    if (fd < 0)
        return -errno;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (t->user_timeout_ms) {
        unsigned ut = t->user_timeout_ms;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut));
    }
    if (t->keepalive) {
        /* A reader waiting for an answer sends nothing, so only keepalive
         * probes notice a peer that vanished: about user_timeout to notice. */
        int base = t->user_timeout_ms ? (int)(t->user_timeout_ms / 1000) : 10;
        int idle = base / 3 > 1 ? base / 3 : 1, intvl = base / 6 > 1 ? base / 6 : 1, cnt = 3;
        (void)setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
        (void)setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    }
    if (r->ifname[0] &&
        setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, r->ifname, (socklen_t)strlen(r->ifname)) < 0)
        goto err;
    if (r->has_src && bind(fd, (const struct sockaddr *)&r->src.ss, r->src.len) < 0)
        goto err;
    ret = connect(fd, (const struct sockaddr *)&r->dst.ss, r->dst.len);
    if (ret < 0 && errno != EINPROGRESS)
        goto err;
    *out = fd;
    return ret < 0 ? 1 : 0;
err:
    ret = -errno;
    close(fd);
    return ret;
}

int rio__tcp_sock_error(int fd)
{
    int err = 0;
    socklen_t l = sizeof(err);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
        return -errno;
    return -err;
}

/* Send a prefix of iov: the count, or -errno (-EAGAIN: wait, see rio__tcp_io_wants). */
ssize_t rio__tcp_io_send(int fd, struct rio__tls *tls, struct iovec *iov, int n)
{
    if (tls->ssl)
        return rio__tls_writev(tls, iov, n);
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)n;
    ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    return w < 0 ? -errno : w;
}

/* Read up to n bytes: the count, 0 at end of stream, or -errno. */
ssize_t rio__tcp_io_recv(int fd, struct rio__tls *tls, void *p, size_t n)
{
    if (tls->ssl)
        return rio__tls_read(tls, p, n);
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    return r < 0 ? -errno : r;
}

/* What an -EAGAIN of a read (POLLIN) or a write (POLLOUT) waits for: TLS may
 * need the other direction. */
short rio__tcp_io_wants(const struct rio__tls *tls, short plain)
{
    if (!tls->ssl)
        return plain;
    return tls->want == RIO_TLS_WANT_WRITE ? POLLOUT : POLLIN;
}

/* One line on stderr for the first TLS failure of a client: the reason
 * (a certificate that failed verification, a peer that speaks no TLS).
 * During open's greeting it is held instead: an open that fails hands it
 * to the caller as rio_error_detail() (printed as well, the CLI said it
 * twice); one that succeeds through another member says it then. */
void rio__tcp_tls_say(struct tcp_transport *t, const char *host, const char *why)
{
    /* The cause for the caller, when this runs in its thread (at open). */
    rio__detail("%s (server %s)", why, host);
    if (t->greeting) {
        if (!t->tls_held[0])
            snprintf(t->tls_held, sizeof(t->tls_held), "%s (server %s)", why, host);
        return;
    }
    if (!atomic_exchange(&t->tls_said, true))
        fprintf(stderr, "railio: %s (server %s)\n", why, host);
}

const char *rio__tcp_tls_name_of(const struct tcp_transport *t, const struct tcp_member *m)
{
    return t->tls_name ? t->tls_name : m->host;
}

/* A plain client read a TLS record where a frame header should be. */
int rio__tcp_plain_got_tls(struct tcp_transport *t, const struct tcp_member *m, const uint8_t *p,
                           size_t n)
{
    if (t->tls_ctx || !rio__tls_looks_like_record(p, n))
        return 0;
    rio__tcp_tls_say(t, m->host, "the server speaks TLS: connect with tls=on");
    return RIO_ETLS;
}

/* A request header; body_len counts the control part, the tag and the data. */
void rio__tcp_frame_header(uint8_t op, uint64_t id, uint32_t body_len, uint8_t *out)
{
    struct rio_proto_hdr h;

    memset(&h, 0, sizeof(h));
    h.opcode = op;
    h.id = id;
    h.body_len = body_len;
    rio__proto_hdr_encode(&h, out);
}

/* The tag of a request whose header and control part are contiguous in
 * buf (ctl bytes after the header), written right after them. */
int rio__tcp_seal_contig(struct rio_proto_sess *s, uint64_t seq, uint8_t *buf, size_t ctl)
{
    struct iovec part = {.iov_base = buf, .iov_len = RIO_PROTO_HDR_LEN + ctl};
    return rio__proto_seal(s, seq, &part, 1, buf + RIO_PROTO_HDR_LEN + ctl);
}

/* The next send sequence number of a connection with only blocking
 * exchanges (the control connection, the handshakes). */
uint64_t rio__tcp_next_seq(struct rio_proto_sess *s)
{
    return rio__proto_sess_keyed(s) ? s->tx_seq++ : 0;
}

/* The HELLO request (header and body) into out; its length. Version 1
 * framing, so that an older server answers "no common version" rather than
 * dropping the connection; its check rides in caps. */
size_t rio__tcp_hs_hello(uint64_t id, const uint8_t cnonce[RIO_PROTO_NONCE_LEN], uint8_t *out)
{
    struct rio_proto_hello h;
    struct rio_proto_hdr fh;
    int n;

    memset(&h, 0, sizeof(h));
    h.version_min = RIO_PROTO_VERSION;
    h.version_max = RIO_PROTO_VERSION;
    memcpy(h.nonce, cnonce, RIO_PROTO_NONCE_LEN);
    n = rio__proto_enc_hello(&h, out + RIO_PROTO_HDR_LEN, TCP_HS_MAX - RIO_PROTO_HDR_LEN);
    if (n != 24)
        return 0;
    memset(&fh, 0, sizeof(fh));
    fh.version = RIO_PROTO_HELLO_VERSION;
    fh.opcode = RIO_OP_HELLO;
    fh.id = id;
    fh.body_len = (uint32_t)n;
    rio__proto_hdr_encode(&fh, out);
    rio__proto_hello_seal(out, out + RIO_PROTO_HDR_LEN);
    return RIO_PROTO_HDR_LEN + (size_t)n;
}

/* The AUTH request into out; its length, or 0 on failure. */
size_t rio__tcp_hs_auth(const struct tcp_transport *t, struct rio_proto_sess *sess, uint64_t id,
                        const uint8_t snonce[RIO_PROTO_NONCE_LEN],
                        const uint8_t cnonce[RIO_PROTO_NONCE_LEN], uint8_t *out)
{
    struct rio_proto_auth a;
    int n;

    if (rio__proto_auth_mac(t->token, t->token_len, "railio-auth-v1", snonce, cnonce, a.mac) < 0)
        return 0;
    n = rio__proto_enc_auth(&a, out + RIO_PROTO_HDR_LEN,
                            TCP_HS_MAX - RIO_PROTO_HDR_LEN - RIO_PROTO_TAG_LEN);
    OPENSSL_cleanse(&a, sizeof(a));
    if (n < 0)
        return 0;
    rio__tcp_frame_header(RIO_OP_AUTH, id, (uint32_t)n + RIO_PROTO_TAG_LEN, out);
    if (rio__tcp_seal_contig(sess, rio__tcp_next_seq(sess), out, (size_t)n) < 0)
        return 0;
    return RIO_PROTO_HDR_LEN + (size_t)n + RIO_PROTO_TAG_LEN;
}

/* A response header for (op, id), or RIO_EPROTO. */
int rio__tcp_resp_check(const struct rio_proto_hdr *h, uint8_t op, uint64_t id)
{
    if (!(h->flags & RIO_PF_RESPONSE) || h->opcode != op || h->id != id)
        return RIO_EPROTO;
    /* A handshake or metadata request never asks for a service time: an
     * answer that carries one breaks the protocol, as on a data connection
     * (docs/protocol.md, "Service time"). */
    if (h->flags & RIO_PF_SVC)
        return RIO_EPROTO;
    if (h->status != 0 && h->body_len > RIO_PROTO_CTRL_MAX)
        return RIO_EPROTO;
    return 0;
}

int rio__tcp_hs_on_hello(const struct tcp_transport *t, const struct rio_proto_hdr *h,
                         const uint8_t *body, struct hs_info *hi)
{
    struct rio_proto_hello_resp r;

    if (h->status == RIO_ENOTSUP)
        return RIO_EVERSION; /* no common version */
    if (h->status != 0)
        return wire_status(h->status);
    if (rio__proto_dec_hello_resp(body, h->body_len, &r) < 0)
        return RIO_EPROTO;
    if (r.version != RIO_PROTO_VERSION)
        return RIO_EVERSION;
    /* Without the token we cannot answer the challenge: a clear refusal,
     * that says what is missing (a bare "permission denied" did not). */
    if (r.auth_required && !t->token) {
        rio__detail("the server asks for a token: give token_file= (or RIO_TOKEN_FILE) or "
                    "token=");
        return -EACCES;
    }
    /* With it, a server that does not ask for it cannot prove it holds it:
     * an impostor (or a proxy that rewrote the HELLO) gets nothing. */
    if (!r.auth_required && t->token) {
        rio__detail("a token was given but the server asks for none: not trusted (an "
                    "impostor, or the server runs without --auth-token-file)");
        return RIO_EAUTH;
    }
    memset(hi, 0, sizeof(*hi));
    hi->auth_required = r.auth_required;
    hi->max_body = r.max_body;
    hi->max_depth = r.max_depth;
    hi->caps = r.caps;
    memcpy(hi->snonce, r.nonce, RIO_PROTO_NONCE_LEN);
    hi->nrails = r.nrails;
    for (unsigned i = 0; i < r.nrails; i++) {
        memcpy(hi->rail[i], r.rail[i], r.rail_len[i]);
        hi->rail[i][r.rail_len[i]] = '\0';
    }
    return 0;
}

/* The server's AUTH answer proves it knows the token too. */
int rio__tcp_hs_on_auth(const struct tcp_transport *t, struct rio_proto_sess *sess,
                        const struct rio_proto_hdr *h, const uint8_t *body,
                        const uint8_t cnonce[RIO_PROTO_NONCE_LEN],
                        const uint8_t snonce[RIO_PROTO_NONCE_LEN])
{
    struct rio_proto_auth_resp r;
    uint8_t want[RIO_PROTO_MAC_LEN];
    int ok;

    /* A refusal says which: a bare "permission denied" left the user to
     * guess between a wrong token and an address the server throttles. */
    if (h->status == RIO_ETHROTTLE)
        rio__detail("the server refuses AUTH from this address for now: too many failed "
                    "AUTHs from it (railiod --auth-failures); try again later");
    else if (h->status == -EACCES)
        rio__detail("the server refused the token: token= or token_file= (or RIO_TOKEN_FILE) "
                    "does not hold its --auth-token-file token");
    if (h->status != 0)
        return h->status == RIO_EPROTO ? RIO_EPROTO : -EACCES;
    if (rio__proto_dec_auth_resp(body, h->body_len, &r) < 0)
        return RIO_EPROTO;
    if (rio__proto_auth_mac(t->token, t->token_len, "railio-server-v1", cnonce, snonce, want) < 0)
        return -ENOMEM;
    ok = CRYPTO_memcmp(want, r.mac, RIO_PROTO_MAC_LEN) == 0;
    OPENSSL_cleanse(want, sizeof(want));
    if (!ok)
        return RIO_EAUTH; /* the server's proof is wrong */
    /* Every frame from here on, each way, carries the session's MAC. */
    return rio__proto_sess_key(sess, t->token, t->token_len, cnonce, snonce, 0);
}

int rio__tcp_new_nonce(uint8_t nonce[RIO_PROTO_NONCE_LEN])
{
    ssize_t n;

    do
        n = getrandom(nonce, RIO_PROTO_NONCE_LEN, 0);
    while (n < 0 && errno == EINTR);
    if (n != RIO_PROTO_NONCE_LEN)
        return n < 0 ? -errno : -EIO;
    return 0;
}
