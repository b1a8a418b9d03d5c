/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio://HOST:PORT[,HOST2:PORT2...]: the client of railio's own protocol
 * (src/proto/proto.h, docs/protocol.md) over TCP, talking to railiod.
 * docs/internals/tcp.md is the long version of this comment.
 *
 * Members, rails, paths. Each HOST:PORT of the authority is a member of a
 * ring. A key belongs to the member with the highest xxh3(member || key)
 * (rendezvous hashing over the member strings as written in the URL) and
 * every op on that key goes to its owner. A member has rails: the listener
 * addresses its HELLO announces (or ?rails=, or its URL address alone). The
 * engine's paths are fixed at open:
 *
 *     npaths = the paths option if set, else min(16, R x conns)
 *
 * with R the largest rail count of any member and conns the connections per
 * rail (?conns=, default 1). Path p of member m is one TCP connection to rail
 * p mod R_m; so an op on path p for a key goes to connection (owner, p). One
 * path is one connection of each member: the engine's depth is the window of
 * one connection, its per-path rate estimate is one connection's rate, and a
 * failed connection cools exactly one path.
 *
 * Threads. submit and cancel (non-blocking, any thread) only queue work under
 * t->mu and poke an eventfd when the loop sleeps. reap runs the event loop in
 * the engine thread: epoll over every data connection and the eventfd,
 * non-blocking dials and handshakes (HELLO, AUTH), requests written with
 * sendmsg (PUT_CHUNK data straight from io->src), responses read straight
 * into io->dst (never more than the op's len bytes), timers (dial deadline,
 * progress watchdog), and complete() for each finished op with no lock held.
 * Metadata calls (lookup, put_open/commit/abort, remove) are synchronous on
 * one blocking control connection per member, under that member's mutex;
 * the idempotent ones (LOOKUP, PUT_OPEN, PUT_COMMIT: the server remembers
 * commits) go again on a fresh connection after a reset, a timeout or a
 * damaged answer, and a commit whose answer never came is RIO_EUNKNOWN.
 *
 * Slots. An op holds one slot from submit to complete: its encoded request
 * and its place in a connection's send queue or wait list. Slots come from a
 * free list that grows only to the peak in flight, so a call with one op arms
 * one slot whatever the depth. A connection carries at most min(depth, the
 * server's max_depth) slots; beyond that submit says -EAGAIN.
 *
 * Cancel. A queued op that has not started leaves at once. An op whose
 * request is on the wire becomes a tombstone: complete(-ECANCELED) runs now,
 * the slot stays on its connection without the io, and the response (if a
 * READ body is streaming, its remaining bytes too) is read into a discard
 * buffer, never into dst. A PUT_CHUNK cut in the middle of its data cannot
 * stop reading io->src without breaking the stream, so its connection is
 * closed instead and the other ops on it are sent again on a fresh one.
 *
 * Errors. A dial failure (refused, unreachable, timeout, auth refused) fails
 * the ops on that connection with that error and backs the rail off
 * exponentially (capped); while the rail is backing off, new ops on it fail
 * at once with the same error so the engine moves them to other paths. Dials
 * are single-flight per rail until a dial succeeds. A failed dial reports
 * its path down to the engine (rio__t_path_event), which cools it and moves
 * its chunks to the other paths; a path's ops only ever travel on its own
 * connection. A dial the server cuts after connecting (its connection
 * limit) while another connection of the same rail is up does not back the
 * rail off: only that connection backs off and dials again in the
 * background, and reports its path up when it gets through. A failed established
 * connection (reset, EOF, TCP_USER_TIMEOUT, keepalive, no progress) fails
 * every op on it with that error. A frame that breaks the protocol (a
 * header that does not decode, an answer to no outstanding request or a
 * second one, the wrong opcode, a body where none belongs) poisons the
 * connection: it is closed and its ops fail with -EPROTO, a reset-class
 * error the engine retries elsewhere. A READ answer of the wrong length
 * fails its own op (RIO_ESHORT, or -EPROTO when longer) and the others go
 * out again on a fresh connection.
 *
 * Locks: t->mu guards the submit and cancel queues, the slot free list, each
 * connection's slot count and window, and the counters. m->ctl_mu guards a
 * member's control connection. Everything else on the data side belongs to
 * the thread running reap. t->mu is never held across a system call that
 * waits, nor across complete().
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/key.h"
#include "core/url.h"
#include "proto/proto.h"
#include "proto/tls.h"
#include "railio.h"
#include "transport/tcp.h"
#include "transport/transport.h"

#define TCP_DEFAULT_PORT "7070"
#define TCP_MAX_MEMBERS 16u
#define TCP_MAX_CONNS 16u
#define TCP_NAME_MAX 320u /* one member as written in the URL */
#define TCP_HOST_MAX 256u
#define TCP_PORT_MAX 8u
#define TCP_DEF_CONNECT_MS 5000u
#define TCP_DEF_USER_TIMEOUT_MS 10000u
#define TCP_DIAL_BACKOFF_BASE_MS 20u
#define TCP_DIAL_BACKOFF_CAP_MS 2000u
#define TCP_ABORT_TIMEOUT_MS 1000u
#define TCP_DEF_CANCEL_GRACE_MS 1000u
#define TCP_TOKEN_MAX RIO_PROTO_TOKEN_MAX
/* A LOOKUP answer carries one u64 per chunk: refuse a descriptor whose list
 * would take more than 64 MiB to hold. */
#define TCP_LOOKUP_MAX_CHUNKS (1u << 23)
#define TCP_DESC_FIXED 64u
#define TCP_CHUNK_MAX (1ull << 30)
#define TCP_PUT_FIXED 24u
#define TCP_IOV_MAX 64
#define TCP_SEND_BATCH (16u << 20)  /* bytes offered to one sendmsg */
#define TCP_RECV_BUDGET (16u << 20) /* bytes read from one connection per event */
#define TCP_DISCARD_LEN (64u << 10)
#define TCP_EVENTS 64
#define TCP_REQ_MAX (RIO_PROTO_HDR_LEN + 22 + RIO_KEY_MAX + RIO_PROTO_TAG_LEN)
#define TCP_HS_MAX (RIO_PROTO_HDR_LEN + 64 + RIO_PROTO_TAG_LEN)
#define NS_PER_MS 1000000ull
#define EV_WAKE UINT64_MAX
#define NEVER UINT64_MAX
#define UPLOAD_MAGIC 0x7270757055504c44ull

/* ------------------------------------------------------------- structures */

struct tcp_addr {
    struct sockaddr_storage ss;
    socklen_t len;
};

/* One route to a member: where to connect, and from where. */
struct tcp_rail {
    struct tcp_addr dst;
    struct tcp_addr src;
    bool has_src;
    char ifname[IF_NAMESIZE]; /* SO_BINDTODEVICE when set */
    char text[TCP_NAME_MAX + 1];

    /* loop only: dial state shared by the connections on this rail */
    bool up;      /* the last dial succeeded and no connection failed since */
    bool dialing; /* a single-flight dial is in progress */
    unsigned fails;
    uint64_t retry_ns; /* no dial before this */
    int last_err;
};

struct tcp_member {
    char name[TCP_NAME_MAX + 1]; /* as written in the URL: the ring hashes it */
    size_t name_len;
    char host[TCP_HOST_MAX];
    char port[TCP_PORT_MAX];
    struct tcp_rail url; /* the URL address: the control connection's */
    unsigned nrails;
    struct tcp_rail rail[RIO_PROTO_MAX_RAILS];

    uint32_t max_depth; /* from the greeting at open; 0 unknown */

    pthread_mutex_t ctl_mu;
    /* under ctl_mu */
    int ctl_fd;
    struct rio__tls ctl_tls; /* tls=on: the control connection's TLS */
    uint32_t ctl_max_body;
    struct rio_proto_sess ctl_sess; /* the control connection's frame checks */
};

enum { SL_FREE = 0, SL_PENDING, SL_QUEUED, SL_WAIT };

struct tcp_conn;

struct tcp_slot {
    struct rio_io *io;     /* the op; NULL once it completed or was cancelled (a tombstone) */
    struct tcp_conn *conn; /* the op's path's connection: its window counts the slot */
    struct tcp_slot *next, *prev; /* the pending list, a send queue or a wait list */
    struct tcp_slot *cnext;       /* the cancel list (t->mu) */
    struct tcp_slot *dnext;       /* the done list (loop) */
    struct rio_io *done_io;
    int64_t done_res;
    uint64_t id;
    uint64_t expect_len;       /* READ: the body of a successful answer */
    uint64_t tomb_deadline_ns; /* a tombstone's answer is drained by then */
    const uint8_t *data;       /* PUT_CHUNK: io->src while the op is attached */
    uint64_t data_len;
    uint8_t op;
    uint8_t where;
    bool live;          /* held by its connection (loop) */
    bool tomb;          /* cancelled, its answer still owed (loop) */
    bool on_done;       /* on the done list (loop) */
    bool cancel_req;    /* t->mu */
    bool cancel_listed; /* t->mu */
    uint16_t req_len;
    uint8_t req[TCP_REQ_MAX]; /* header, control part and tag of the request */
    /* The tag in req was made for this connection dial and sequence number
     * (loop only; see conn_flush). */
    const struct tcp_conn *seal_conn;
    uint32_t seal_epoch;
    uint64_t seal_seq;
};

struct slist {
    struct tcp_slot *head, *tail;
    unsigned n;
};

enum {
    C_CLOSED = 0,
    C_WAIT, /* waiting for its rail's single-flight dial */
    C_CONNECTING,
    C_TLS, /* tls=on: the TLS handshake */
    C_HELLO_TX,
    C_HELLO_RX,
    C_AUTH_TX,
    C_AUTH_RX,
    C_READY,
};

enum { RX_HDR = 0, RX_DST, RX_DISCARD, RX_CTRL, RX_READ_FIXED };

struct tcp_conn {
    struct tcp_transport *t;
    struct tcp_member *m;
    struct tcp_rail *rail;
    unsigned idx; /* in t->conns */
    unsigned path;

    /* loop only */
    int fd;
    struct rio__tls tls; /* tls=on: ssl set while connected */
    int state;
    uint32_t epoch; /* bumped per dial: stale epoll events are ignored */
    uint32_t ev;    /* events armed in epoll */
    bool leader;    /* dialing for its rail (single flight) */
    bool out_blocked;
    uint64_t deadline_ns; /* the dial and handshake end by then */
    uint64_t last_progress_ns;
    uint64_t hs_id;
    uint8_t cnonce[RIO_PROTO_NONCE_LEN], snonce[RIO_PROTO_NONCE_LEN];
    uint32_t max_body, max_depth;
    uint8_t hs[TCP_HS_MAX];
    uint16_t hs_len, hs_off;
    struct slist sq; /* to send; the head may be partly sent */
    uint64_t sq_off; /* bytes of the head already sent */
    struct slist wq; /* sent, answer owed (tombstones included) */
    unsigned ntombs; /* tombstones in sq and wq */
    uint8_t rx_hdr[RIO_PROTO_HDR_LEN];
    unsigned rx_hdr_got;
    struct rio_proto_hdr rh;
    int rx_mode;
    struct tcp_slot *rx_slot;
    uint64_t rx_len, rx_got;
    uint8_t *ctrl;              /* RIO_PROTO_CTRL_BODY_MAX bytes while connected */
    struct rio_proto_sess sess; /* frame checks; keyed after AUTH */
    uint64_t tx_seq;            /* the next request whose first byte is unsent */
    uint64_t read_xxh;          /* the READ answer being received: its data's xxh3 */
    /* Down: a dial of this connection failed and its path was reported
     * down to the engine; reported up again when a dial succeeds. While
     * another connection of its rail is up (the server cut this one's dial:
     * its connection limit) it backs off on its own (grow_ns; ops sent
     * before then fail at once with last_err) and dials again in the
     * background. */
    bool down;
    unsigned grow_fails;
    uint64_t grow_ns;
    int last_err;

    /* under t->mu */
    unsigned nslots;
    unsigned window;
};

struct tcp_upload {
    uint64_t magic;
    unsigned member;
    uint64_t id;
    uint64_t size, chunk_size, nchunks;
};

struct tcp_transport {
    struct rio_transport base; /* first: the engine's handle */
    struct rio_options o;
    unsigned nmembers;
    struct tcp_member *members;
    unsigned nconns;
    struct tcp_conn *conns; /* nmembers x npaths: conn (m, p) is conns[m * npaths + p] */
    unsigned conns_per_rail;
    uint32_t connect_ms, user_timeout_ms, progress_ms, ttl_ms;
    uint32_t backoff_ms, backoff_cap_ms; /* dial backoff */
    uint32_t grace_ms;                   /* a tombstone's drain deadline */
    bool keepalive;
    uint8_t *token;
    size_t token_len;
    SSL_CTX *tls_ctx;      /* tls=on: every connection is TLS */
    char *tls_name;        /* tls_name=: the name verified instead of the URL host */
    _Atomic bool tls_said; /* one line on stderr per client for a TLS failure */
    int epfd, evfd;
    uint8_t *discard; /* loop: lazily, for tombstones' bodies */
    _Atomic uint64_t next_id;
    _Atomic uint64_t bytes_in, bytes_out;

    pthread_mutex_t mu;
    /* under mu */
    struct slist pending;
    struct tcp_slot *cancels;
    struct tcp_slot *free_slots;
    bool sleeping;
    bool wake_req;
    struct rio__tcp_counters ctr;

    /* loop only */
    struct tcp_slot *done_head, *done_tail;
    bool window_freed;
};

/* --------------------------------------------------------------- helpers */

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static void sl_push(struct slist *l, struct tcp_slot *s)
{
    s->next = NULL;
    s->prev = l->tail;
    if (l->tail)
        l->tail->next = s;
    else
        l->head = s;
    l->tail = s;
    l->n++;
}

static void sl_unlink(struct slist *l, struct tcp_slot *s)
{
    if (s->prev)
        s->prev->next = s->next;
    else
        l->head = s->next;
    if (s->next)
        s->next->prev = s->prev;
    else
        l->tail = s->prev;
    s->next = s->prev = NULL;
    l->n--;
}

static struct tcp_slot *sl_pop(struct slist *l)
{
    struct tcp_slot *s = l->head;
    if (s)
        sl_unlink(l, s);
    return s;
}

/*
 * A status from the wire as a return code: -errno and RIO_E* pass, -ENOENT
 * is RIO_ENOTFOUND, anything else (positive, out of range) is RIO_EPROTO.
 */
static int wire_status(int32_t s)
{
    if (s >= 0)
        return RIO_EPROTO;
    if (s == -ENOENT)
        return RIO_ENOTFOUND;
    if (s >= -4095)
        return s;
    if (s <= RIO_EINVAL && s > -11000)
        return s;
    return RIO_EPROTO;
}

/*
 * "host:port", "[v6]:port" or "host" (default port) into host and port.
 * Returns 0 or RIO_EURL.
 */
static int split_hostport(const char *s, size_t len, const char *defport, char host[TCP_HOST_MAX],
                          char port[TCP_PORT_MAX])
{
    const char *h = s, *p = NULL;
    size_t hl, pl = 0;

    if (len == 0)
        return RIO_EURL;
    if (s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (!rb)
            return RIO_EURL;
        h = s + 1;
        hl = (size_t)(rb - h);
        if (rb + 1 < s + len) {
            if (rb[1] != ':')
                return RIO_EURL;
            p = rb + 2;
            pl = len - (size_t)(p - s);
        }
    } else {
        const char *colon = NULL;
        for (size_t i = 0; i < len; i++)
            if (s[i] == ':') {
                if (colon)
                    return RIO_EURL; /* a bare IPv6 address needs brackets */
                colon = s + i;
            }
        hl = colon ? (size_t)(colon - s) : len;
        if (colon) {
            p = colon + 1;
            pl = len - (size_t)(p - s);
        }
    }
    if (hl == 0 || hl >= TCP_HOST_MAX)
        return RIO_EURL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (!p) {
        snprintf(port, TCP_PORT_MAX, "%s", defport);
        return 0;
    }
    if (pl == 0 || pl >= TCP_PORT_MAX)
        return RIO_EURL;
    memcpy(port, p, pl);
    port[pl] = '\0';
    uint64_t v;
    if (rio__parse_uint(port, 65535, &v) < 0 || v == 0)
        return RIO_EURL;
    return 0;
}

static int resolve(const char *host, const char *port, struct tcp_addr *a)
{
    struct addrinfo hints, *res = NULL;
    int r;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    r = getaddrinfo(host, port, &hints, &res);
    if (r != 0 || !res)
        return r == EAI_MEMORY ? -ENOMEM : RIO_EDNS;
    if (res->ai_addrlen > sizeof(a->ss)) {
        freeaddrinfo(res);
        return RIO_EDNS;
    }
    memset(a, 0, sizeof(*a));
    memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static uint64_t next_id(struct tcp_transport *t)
{
    return atomic_fetch_add_explicit(&t->next_id, 1, memory_order_relaxed) + 1;
}

static unsigned owner_of(const struct tcp_transport *t, const char *key, size_t klen)
{
    uint8_t buf[TCP_NAME_MAX + RIO_KEY_MAX];
    uint64_t best = 0;
    unsigned who = 0;

    if (t->nmembers == 1 || klen > RIO_KEY_MAX)
        return 0;
    for (unsigned i = 0; i < t->nmembers; i++) {
        const struct tcp_member *m = &t->members[i];
        memcpy(buf, m->name, m->name_len);
        memcpy(buf + m->name_len, key, klen);
        uint64_t h = rio__xxh3(buf, m->name_len + klen);
        if (i == 0 || h > best) {
            best = h;
            who = i;
        }
    }
    return who;
}

/* -------------------------------------------------------------- sockets */

/*
 * A non-blocking socket for rail r, connecting. Returns 1 while the connect
 * is in progress, 0 when it is done, or a negative error.
 */
static int sock_open(const struct tcp_transport *t, const struct tcp_rail *r, int *out)
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

static int sock_error(int fd)
{
    int err = 0;
    socklen_t l = sizeof(err);

    if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &l) < 0)
        return -errno;
    return -err;
}

/* ------------------------------------------------------------- plain/TLS */

static int wait_fd(int fd, short events, uint64_t deadline);

/* Send a prefix of iov: the count, or -errno (-EAGAIN: wait, see io_wants). */
static ssize_t io_send(int fd, struct rio__tls *tls, struct iovec *iov, int n)
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
static ssize_t io_recv(int fd, struct rio__tls *tls, void *p, size_t n)
{
    if (tls->ssl)
        return rio__tls_read(tls, p, n);
    ssize_t r = recv(fd, p, n, MSG_DONTWAIT);
    return r < 0 ? -errno : r;
}

/* What an -EAGAIN of a read (POLLIN) or a write (POLLOUT) waits for: TLS may
 * need the other direction. */
static short io_wants(const struct rio__tls *tls, short plain)
{
    if (!tls->ssl)
        return plain;
    return tls->want == RIO_TLS_WANT_WRITE ? POLLOUT : POLLIN;
}

/* One line on stderr for the first TLS failure of a client: the reason
 * (a certificate that failed verification, a peer that speaks no TLS). */
static void tls_say(struct tcp_transport *t, const char *host, const char *why)
{
    if (!atomic_exchange(&t->tls_said, true))
        fprintf(stderr, "railio: %s (server %s)\n", why, host);
}

static const char *tls_name_of(const struct tcp_transport *t, const struct tcp_member *m)
{
    return t->tls_name ? t->tls_name : m->host;
}

/* A plain client read a TLS record where a frame header should be. */
static int plain_got_tls(struct tcp_transport *t, const struct tcp_member *m, const uint8_t *p,
                         size_t n)
{
    if (t->tls_ctx || !rio__tls_looks_like_record(p, n))
        return 0;
    tls_say(t, m->host, "the server speaks TLS: connect with tls=on");
    return RIO_ETLS;
}

/* TLS on a connected fd, handshake done by deadline (control connections). */
static int blk_tls(struct tcp_transport *t, const struct tcp_member *m, int fd,
                   struct rio__tls *tls, uint64_t deadline)
{
    char why[256];
    int ret = rio__tls_init(tls, t->tls_ctx, fd, true, tls_name_of(t, m));
    while (ret == 0) {
        struct rio__tls_sigguard g;
        rio__tls_sig_block(&g);
        ret = rio__tls_handshake(tls, why, sizeof(why));
        rio__tls_sig_restore(&g);
        if (ret != -EAGAIN)
            break;
        ret = wait_fd(fd, io_wants(tls, POLLIN), deadline);
    }
    if (ret == RIO_ETLS || ret == RIO_ETLSVERIFY)
        tls_say(t, m->host, why);
    if (ret < 0)
        rio__tls_cleanup(tls);
    return ret == -EPROTO ? RIO_EPROTO : ret;
}

/* -------------------------------------------------------------- handshake */

struct hs_info {
    uint32_t auth_required, max_body, max_depth;
    uint8_t snonce[RIO_PROTO_NONCE_LEN];
    unsigned nrails;
    char rail[RIO_PROTO_MAX_RAILS][RIO_PROTO_ADDR_MAX + 1];
};

/* A request header; body_len counts the control part, the tag and the data. */
static void frame_header(uint8_t op, uint64_t id, uint32_t body_len, uint8_t *out)
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
static int seal_contig(struct rio_proto_sess *s, uint64_t seq, uint8_t *buf, size_t ctl)
{
    struct iovec part = {.iov_base = buf, .iov_len = RIO_PROTO_HDR_LEN + ctl};
    return rio__proto_seal(s, seq, &part, 1, buf + RIO_PROTO_HDR_LEN + ctl);
}

/* The next send sequence number of a connection with only blocking
 * exchanges (the control connection, the handshakes). */
static uint64_t next_seq(struct rio_proto_sess *s)
{
    return rio__proto_sess_keyed(s) ? s->tx_seq++ : 0;
}

/* The HELLO request (header and body) into out; its length. Version 1
 * framing, so that an older server answers "no common version" rather than
 * dropping the connection; its check rides in caps. */
static size_t hs_hello(uint64_t id, const uint8_t cnonce[RIO_PROTO_NONCE_LEN], uint8_t *out)
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
static size_t hs_auth(const struct tcp_transport *t, struct rio_proto_sess *sess, uint64_t id,
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
    frame_header(RIO_OP_AUTH, id, (uint32_t)n + RIO_PROTO_TAG_LEN, out);
    if (seal_contig(sess, next_seq(sess), out, (size_t)n) < 0)
        return 0;
    return RIO_PROTO_HDR_LEN + (size_t)n + RIO_PROTO_TAG_LEN;
}

/* A response header for (op, id), or RIO_EPROTO. */
static int resp_check(const struct rio_proto_hdr *h, uint8_t op, uint64_t id)
{
    if (!(h->flags & RIO_PF_RESPONSE) || h->opcode != op || h->id != id)
        return RIO_EPROTO;
    if (h->status != 0 && h->body_len > RIO_PROTO_CTRL_MAX)
        return RIO_EPROTO;
    return 0;
}

static int hs_on_hello(const struct tcp_transport *t, const struct rio_proto_hdr *h,
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
    /* Without the token we cannot answer the challenge: a clear refusal. */
    if (r.auth_required && !t->token)
        return -EACCES;
    /* With it, a server that does not ask for it cannot prove it holds it:
     * an impostor (or a proxy that rewrote the HELLO) gets nothing. */
    if (!r.auth_required && t->token)
        return RIO_EAUTH;
    memset(hi, 0, sizeof(*hi));
    hi->auth_required = r.auth_required;
    hi->max_body = r.max_body;
    hi->max_depth = r.max_depth;
    memcpy(hi->snonce, r.nonce, RIO_PROTO_NONCE_LEN);
    hi->nrails = r.nrails;
    for (unsigned i = 0; i < r.nrails; i++) {
        memcpy(hi->rail[i], r.rail[i], r.rail_len[i]);
        hi->rail[i][r.rail_len[i]] = '\0';
    }
    return 0;
}

/* The server's AUTH answer proves it knows the token too. */
static int hs_on_auth(const struct tcp_transport *t, struct rio_proto_sess *sess,
                      const struct rio_proto_hdr *h, const uint8_t *body,
                      const uint8_t cnonce[RIO_PROTO_NONCE_LEN],
                      const uint8_t snonce[RIO_PROTO_NONCE_LEN])
{
    struct rio_proto_auth_resp r;
    uint8_t want[RIO_PROTO_MAC_LEN];
    int ok;

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

static int new_nonce(uint8_t nonce[RIO_PROTO_NONCE_LEN])
{
    ssize_t n;

    do
        n = getrandom(nonce, RIO_PROTO_NONCE_LEN, 0);
    while (n < 0 && errno == EINTR);
    if (n != RIO_PROTO_NONCE_LEN)
        return n < 0 ? -errno : -EIO;
    return 0;
}

/* ----------------------------------------------- control connections (sync) */

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

/* Send every byte of iov (which is consumed) by deadline. */
static int blk_send_iov(int fd, struct rio__tls *tls, struct iovec *iov, int n, uint64_t deadline)
{
    while (n > 0 && iov->iov_len == 0) {
        iov++;
        n--;
    }
    while (n > 0 || (tls->ssl && rio__tls_has_pending_out(tls))) {
        ssize_t w = n > 0 ? io_send(fd, tls, iov, n) : rio__tls_flush(tls);
        if (w < 0) {
            if (w == -EINTR)
                continue;
            if (w == -EAGAIN) {
                int r = wait_fd(fd, io_wants(tls, POLLOUT), deadline);
                if (r < 0)
                    return r;
                continue;
            }
            return (int)w;
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
        ssize_t r = io_recv(fd, tls, (uint8_t *)buf + got, n - got);
        if (r == 0)
            return -ECONNRESET;
        if (r < 0) {
            if (r == -EINTR)
                continue;
            if (r == -EAGAIN) {
                int w = wait_fd(fd, io_wants(tls, POLLIN), deadline);
                if (w < 0)
                    return w;
                continue;
            }
            return (int)r;
        }
        got += (size_t)r;
    }
    return 0;
}

/* The same, with SIGPIPE held off around OpenSSL (tls.h). */
static int blk_send(int fd, struct rio__tls *tls, struct iovec *iov, int n, uint64_t deadline)
{
    struct rio__tls_sigguard g;
    int ret;

    if (!tls->ssl)
        return blk_send_iov(fd, tls, iov, n, deadline);
    rio__tls_sig_block(&g);
    ret = blk_send_iov(fd, tls, iov, n, deadline);
    rio__tls_sig_restore(&g);
    return ret;
}

static int blk_recv(int fd, struct rio__tls *tls, void *buf, size_t n, uint64_t deadline)
{
    struct rio__tls_sigguard g;
    int ret;

    if (!tls->ssl)
        return blk_recv_raw(fd, tls, buf, n, deadline);
    rio__tls_sig_block(&g);
    ret = blk_recv_raw(fd, tls, buf, n, deadline);
    rio__tls_sig_restore(&g);
    return ret;
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
        return plain_got_tls(t, m, hb, sizeof(hb)) ?: ret;
    ret = rio__proto_hdr_decode(hb, RIO_PROTO_BODY_CAP, h);
    if (ret == RIO_EVERSION)
        return ret;
    if (ret < 0 && plain_got_tls(t, m, hb, sizeof(hb)))
        return RIO_ETLS;
    if (ret < 0 || resp_check(h, op, id) < 0 || rio__proto_layout(h, &ctl, &data) < 0 ||
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

/* Dial and greet on a blocking connection; fd (and its TLS) and the HELLO's facts out. */
static int blk_dial(struct tcp_transport *t, const struct tcp_member *m, const struct tcp_rail *r,
                    struct hs_info *hi, struct rio_proto_sess *sess, struct rio__tls *tls, int *out)
{
    uint64_t deadline = rio__now_ns() + (uint64_t)t->connect_ms * NS_PER_MS;
    uint8_t cnonce[RIO_PROTO_NONCE_LEN], buf[TCP_HS_MAX], *body = NULL;
    struct rio_proto_hdr h;
    uint64_t id;
    size_t len;
    int fd, ret;

    ret = new_nonce(cnonce);
    if (ret < 0)
        return ret;
    ret = sock_open(t, r, &fd);
    if (ret < 0)
        return ret;
    if (ret > 0) {
        ret = wait_fd(fd, POLLOUT, deadline);
        if (ret == 0)
            ret = sock_error(fd);
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
    len = hs_hello(id, cnonce, buf);
    ret = len ? blk_exchange(t, m, fd, tls, sess, buf, len, RIO_OP_HELLO, id, &h, &body, deadline)
              : -ENOMEM;
    if (ret == 0)
        ret = hs_on_hello(t, &h, body, hi);
    rio__free(body);
    body = NULL;
    if (ret < 0)
        goto err;
    if (hi->auth_required) {
        id = next_id(t);
        len = hs_auth(t, sess, id, hi->snonce, cnonce, buf);
        ret =
            len ? blk_exchange(t, m, fd, tls, sess, buf, len, RIO_OP_AUTH, id, &h, &body, deadline)
                : -ENOMEM;
        if (ret == 0)
            ret = hs_on_auth(t, sess, &h, body, cnonce, hi->snonce);
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

static void ctl_close_locked(struct tcp_member *m)
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

static int ctl_dial_locked(struct tcp_transport *t, struct tcp_member *m, struct hs_info *hi)
{
    struct hs_info local;
    int fd, ret;

    ret = blk_dial(t, m, &m->url, hi ? hi : &local, &m->ctl_sess, &m->ctl_tls, &fd);
    if (ret < 0)
        return ret;
    m->ctl_fd = fd;
    m->ctl_max_body = (hi ? hi : &local)->max_body;
    return 0;
}

struct ctl_req {
    uint8_t op;
    const struct iovec *iov; /* the body */
    int niov;
    size_t body_len;
    uint64_t resp_cap; /* largest successful answer body accepted */
    uint32_t timeout_ms;
    bool idempotent; /* may go again on a fresh connection, up to retry_attempts tries */
    bool no_dial;    /* only on an open connection */
    /* A successful answer's body must decode: 0 or RIO_EPROTO (a damaged
     * answer, handled like a damaged frame). NULL: any body. */
    int (*check)(const uint8_t *body, size_t len);
};

static bool reset_class(int err)
{
    return err == -ECONNRESET || err == -EPIPE || err == -ECONNABORTED || err == -ENOTCONN;
}

/* A failed exchange an idempotent request may try again on a fresh
 * connection: the connection broke, stalled past the op timeout, or its
 * answer broke the protocol (the connection is closed either way). */
static bool ctl_retryable(int err)
{
    return reset_class(err) || err == -ETIMEDOUT || err == RIO_EPROTO || err == -ECONNREFUSED;
}

/* The engine's backoff for try n (1-based) of a metadata request: base x
 * 2^(n-1), capped, with equal jitter. */
static void ctl_backoff(const struct tcp_transport *t, unsigned n)
{
    uint64_t ms = t->o.backoff_base_ms;
    for (unsigned i = 1; i < n && ms < t->o.backoff_cap_ms; i++)
        ms *= 2;
    ms = min_u64(ms, t->o.backoff_cap_ms);
    uint64_t us = ms * 1000;
    uint32_t r = 0;
    if (us && getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
        r = 0;
    us = us / 2 + (us ? r % (us / 2 + 1) : 0);
    if (us)
        usleep((useconds_t)us);
}

/*
 * One request and its answer on member m's control connection (dialled when
 * needed). Returns 0 with the answer's header and body (caller frees), or
 * the error that made the exchange impossible. A status in a well-formed
 * answer is the caller's to read (h->status). An idempotent request whose
 * exchange failed (reset, timeout, a damaged answer) goes again on a fresh
 * connection, up to retry_attempts tries, each bounded by timeout_ms; a
 * reused connection found reset costs no try. *sent (may be NULL) tells
 * whether any try put bytes of the request on a connection, so that the
 * server may have acted on it.
 */
static int ctl_call_sent(struct tcp_transport *t, struct tcp_member *m, const struct ctl_req *rq,
                         struct rio_proto_hdr *h, uint8_t **body, bool *sent)
{
    struct iovec iov[5];
    uint8_t hdr[RIO_PROTO_HDR_LEN], tag[RIO_PROTO_TAG_LEN];
    unsigned tries = rq->idempotent && t->o.retry_attempts > 1 ? t->o.retry_attempts : 1;
    unsigned failed = 0;
    int ret = 0;

    *body = NULL;
    if (sent)
        *sent = false;
    if (rq->niov > 3 || rq->body_len > UINT32_MAX - RIO_PROTO_TAG_LEN)
        return RIO_EINVAL;
    pthread_mutex_lock(&m->ctl_mu);
    for (;;) {
        bool fresh = false;
        ret = 0;
        if (m->ctl_fd >= 0 && ctl_stale_locked(m))
            ctl_close_locked(m);
        if (m->ctl_fd < 0) {
            if (rq->no_dial) {
                ret = -ENOTCONN;
                break;
            }
            ret = ctl_dial_locked(t, m, NULL);
            fresh = true;
        }
        if (ret == 0) {
            uint64_t deadline = rio__now_ns() + (uint64_t)rq->timeout_ms * NS_PER_MS;
            uint64_t id = next_id(t);
            frame_header(rq->op, id, (uint32_t)rq->body_len + RIO_PROTO_TAG_LEN, hdr);
            iov[0].iov_base = hdr;
            iov[0].iov_len = sizeof(hdr);
            for (int i = 0; i < rq->niov; i++)
                iov[i + 1] = rq->iov[i];
            ret = rio__proto_seal(&m->ctl_sess, next_seq(&m->ctl_sess), iov, rq->niov + 1, tag);
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
            ctl_close_locked(m);
        }
        /* A reused connection the server had reset: one free try. */
        bool free_try = !fresh && reset_class(ret) && failed == 0 && rq->idempotent;
        if (!free_try && (++failed >= tries || !ctl_retryable(ret)))
            break;
        pthread_mutex_lock(&t->mu);
        t->ctr.ctl_retries++;
        pthread_mutex_unlock(&t->mu);
        if (!free_try)
            ctl_backoff(t, failed);
    }
    pthread_mutex_unlock(&m->ctl_mu);
    return ret;
}

static int ctl_call(struct tcp_transport *t, struct tcp_member *m, const struct ctl_req *rq,
                    struct rio_proto_hdr *h, uint8_t **body)
{
    return ctl_call_sent(t, m, rq, h, body, NULL);
}

/* ------------------------------------------------------------ metadata ops */

/* The body of a request that names only a key (LOOKUP, DELETE): its length,
 * or an error; *klen is the key's length. */
static int key_body(const char *key, uint8_t *kb, size_t cap, size_t *klen)
{
    struct rio_proto_key k;
    int ret = rio__key_len(key, klen);

    if (ret < 0)
        return ret;
    k.key = key;
    k.key_len = (uint16_t)*klen;
    ret = rio__proto_enc_key(&k, kb, cap);
    return ret < 0 ? RIO_EINVAL : ret;
}

static int check_desc(const uint8_t *body, size_t len)
{
    struct rio_proto_desc d;
    return rio__proto_dec_desc(body, len, &d);
}

static int check_open_resp(const uint8_t *body, size_t len)
{
    struct rio_proto_put_open_resp r;
    return rio__proto_dec_put_open_resp(body, len, &r);
}

static int check_commit_resp(const uint8_t *body, size_t len)
{
    struct rio_proto_put_commit_resp r;
    return rio__proto_dec_put_commit_resp(body, len, &r);
}

static int tcp_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    uint8_t kb[2 + RIO_KEY_MAX], *body = NULL;
    struct rio_proto_desc d;
    struct rio_proto_hdr h;
    uint64_t *xxh = NULL;
    size_t klen;
    int n, ret;

    if (!out)
        return RIO_EINVAL;
    n = key_body(key, kb, sizeof(kb), &klen);
    if (n < 0)
        return n;
    struct iovec iov = {.iov_base = kb, .iov_len = (size_t)n};
    struct ctl_req rq = {
        .op = RIO_OP_LOOKUP,
        .iov = &iov,
        .niov = 1,
        .body_len = (size_t)n,
        .resp_cap = TCP_DESC_FIXED + 8ull * TCP_LOOKUP_MAX_CHUNKS,
        .timeout_ms = t->o.op_timeout_ms,
        .idempotent = true,
        .check = check_desc,
    };
    ret = ctl_call(t, &t->members[owner_of(t, key, klen)], &rq, &h, &body);
    if (ret < 0)
        return ret;
    if (h.status != 0) {
        ret = wire_status(h.status);
        goto out;
    }
    ret = RIO_EPROTO;
    if (rio__proto_dec_desc(body, h.body_len, &d) < 0)
        goto out;
    if (d.nchunks) {
        ret = -ENOMEM;
        xxh = rio__malloc((size_t)d.nchunks * sizeof(*xxh));
        if (!xxh)
            goto out;
        for (uint64_t i = 0; i < d.nchunks; i++)
            xxh[i] = rio__proto_u64(d.xxh + 8 * i);
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, klen + 1);
    out->generation = d.generation;
    out->size = d.size;
    out->chunk_size = d.chunk_size;
    out->nchunks = d.nchunks;
    out->xxh = xxh;
    /* The etag is 32 hex digits, or zeros when the server does not know it. */
    memcpy(out->etag, d.etag, sizeof(d.etag));
    out->etag[sizeof(d.etag)] = '\0';
    for (size_t i = 0; i < sizeof(d.etag); i++)
        if (!((out->etag[i] >= '0' && out->etag[i] <= '9') ||
              (out->etag[i] >= 'a' && out->etag[i] <= 'f'))) {
            out->etag[0] = '\0';
            break;
        }
    ret = 0;
out:
    rio__free(body);
    return ret;
}

static int tcp_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                        uint64_t chunk_size, void **upload)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    uint8_t b[20 + 2 + RIO_KEY_MAX], *body = NULL;
    struct rio_proto_put_open po;
    struct rio_proto_put_open_resp r;
    struct rio_proto_hdr h;
    struct tcp_upload *up;
    struct tcp_member *m;
    unsigned mi;
    size_t klen;
    int n, ret;

    ret = rio__key_len(key, &klen);
    if (ret < 0)
        return ret;
    if (!upload || chunk_size == 0 || chunk_size > TCP_CHUNK_MAX)
        return RIO_EINVAL;
    up = rio__calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    mi = owner_of(t, key, klen);
    m = &t->members[mi];
    memset(&po, 0, sizeof(po));
    po.size = size;
    po.chunk_size = chunk_size;
    po.ttl_ms = t->ttl_ms;
    po.key = key;
    po.key_len = (uint16_t)klen;
    n = rio__proto_enc_put_open(&po, b, sizeof(b));
    ret = RIO_EINVAL;
    if (n < 0)
        goto err;
    struct iovec iov = {.iov_base = b, .iov_len = (size_t)n};
    struct ctl_req rq = {
        .op = RIO_OP_PUT_OPEN,
        .iov = &iov,
        .niov = 1,
        .body_len = (size_t)n,
        .resp_cap = RIO_PROTO_CTRL_MAX,
        .timeout_ms = t->o.op_timeout_ms,
        .idempotent = true, /* an orphaned upload is reclaimed by the server */
        .check = check_open_resp,
    };
    ret = ctl_call(t, m, &rq, &h, &body);
    if (ret < 0)
        goto err;
    if (h.status != 0)
        ret = wire_status(h.status);
    else if (rio__proto_dec_put_open_resp(body, h.body_len, &r) < 0)
        ret = RIO_EPROTO;
    rio__free(body);
    if (ret < 0)
        goto err;
    up->magic = UPLOAD_MAGIC;
    up->member = mi;
    up->id = r.upload_id;
    up->size = size;
    up->chunk_size = chunk_size;
    up->nchunks = size ? (size - 1) / chunk_size + 1 : 0;
    /* A chunk the server would refuse as too large: say so now. */
    pthread_mutex_lock(&m->ctl_mu);
    uint32_t max_body = m->ctl_max_body;
    pthread_mutex_unlock(&m->ctl_mu);
    if (max_body && size && chunk_size + TCP_PUT_FIXED > max_body) {
        t->base.ops->put_abort(&t->base, up);
        return -EMSGSIZE;
    }
    *upload = up;
    return 0;
err:
    rio__free(up);
    return ret;
}

static void upload_free(struct tcp_upload *up)
{
    up->magic = 0;
    rio__free(up);
}

static int tcp_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_upload *up = upload;
    struct rio_proto_put_commit pc;
    struct rio_proto_put_commit_resp r;
    struct rio_proto_hdr h;
    uint8_t *b = NULL, *body = NULL;
    size_t blen;
    int n, ret;

    if (!up || up->magic != UPLOAD_MAGIC)
        return RIO_EINVAL;
    ret = RIO_EINVAL;
    if (!d || (up->nchunks && !d->xxh) || d->nchunks != up->nchunks || d->size != up->size ||
        d->chunk_size != up->chunk_size || up->nchunks > (SIZE_MAX - 48) / 8)
        goto abort;
    blen = 48 + (size_t)up->nchunks * 8;
    ret = -ENOMEM;
    b = rio__malloc(blen);
    if (!b)
        goto abort;
    memset(&pc, 0, sizeof(pc));
    pc.upload_id = up->id;
    pc.nchunks = up->nchunks;
    /* An unknown etag travels as zeros. */
    memset(pc.etag, 0, sizeof(pc.etag));
    memcpy(pc.etag, d->etag, strnlen(d->etag, sizeof(pc.etag)));
    n = rio__proto_enc_put_commit(&pc, d->xxh, b, blen);
    ret = RIO_EINVAL;
    if (n < 0)
        goto abort;
    struct iovec iov = {.iov_base = b, .iov_len = (size_t)n};
    /* The commit is idempotent (docs/protocol.md): the server remembers
     * which generation an upload became, so a commit whose answer was lost
     * goes again on a fresh connection and gets the same generation. */
    struct ctl_req rq = {
        .op = RIO_OP_PUT_COMMIT,
        .iov = &iov,
        .niov = 1,
        .body_len = (size_t)n,
        .resp_cap = RIO_PROTO_CTRL_MAX,
        .timeout_ms = t->o.op_timeout_ms,
        .idempotent = true,
        .check = check_commit_resp,
    };
    bool sent = false, ever_sent = false;
    for (unsigned busy = 0;; busy++) {
        ret = ctl_call_sent(t, &t->members[up->member], &rq, &h, &body, &sent);
        ever_sent |= sent;
        /* The disk tier is still applying an earlier try of this commit:
         * ask again after a backoff. */
        if (ret < 0 || h.status != RIO_ETHROTTLE || busy + 1 >= t->o.retry_attempts)
            break;
        rio__free(body);
        body = NULL;
        ctl_backoff(t, busy + 1);
    }
    rio__free(b);
    if (ret < 0) {
        /* No answer after every try: a request that reached a connection
         * may have been applied. Only the caller can decide what to do. */
        if (ever_sent)
            ret = RIO_EUNKNOWN;
        goto out;
    }
    if (h.status == RIO_ETHROTTLE)
        ret = RIO_EUNKNOWN; /* still being applied when we gave up */
    else if (h.status == RIO_ENOTFOUND || h.status == -ENOENT)
        ret = RIO_ENOUPLOAD; /* reclaimed, aborted or never there: not committed */
    else if (h.status != 0)
        ret = wire_status(h.status);
    else if (rio__proto_dec_put_commit_resp(body, h.body_len, &r) < 0)
        ret = RIO_EPROTO;
    else
        d->generation = r.generation;
    rio__free(body);
out:
    upload_free(up);
    return ret;
abort:
    rio__free(b);
    t->base.ops->put_abort(tt, up);
    return ret;
}

/*
 * Best effort and bounded: only on a control connection that is already
 * open, with a short timeout. The server reclaims an upload nobody commits.
 */
static void tcp_put_abort(struct rio_transport *tt, void *upload)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_upload *up = upload;
    struct rio_proto_put_abort pa;
    struct rio_proto_hdr h;
    uint8_t b[8], *body = NULL;
    int n;

    if (!up || up->magic != UPLOAD_MAGIC)
        return;
    pa.upload_id = up->id;
    n = rio__proto_enc_put_abort(&pa, b, sizeof(b));
    if (n > 0) {
        struct iovec iov = {.iov_base = b, .iov_len = (size_t)n};
        struct ctl_req rq = {
            .op = RIO_OP_PUT_ABORT,
            .iov = &iov,
            .niov = 1,
            .body_len = (size_t)n,
            .resp_cap = RIO_PROTO_CTRL_MAX,
            .timeout_ms = t->o.op_timeout_ms < TCP_ABORT_TIMEOUT_MS ? t->o.op_timeout_ms
                                                                    : TCP_ABORT_TIMEOUT_MS,
            .no_dial = true,
        };
        if (ctl_call(t, &t->members[up->member], &rq, &h, &body) == 0)
            rio__free(body);
    }
    upload_free(up);
}

static int tcp_remove(struct rio_transport *tt, const char *key)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    uint8_t kb[2 + RIO_KEY_MAX], *body = NULL;
    struct rio_proto_hdr h;
    size_t klen;
    int n, ret;

    n = key_body(key, kb, sizeof(kb), &klen);
    if (n < 0)
        return n;
    struct iovec iov = {.iov_base = kb, .iov_len = (size_t)n};
    struct ctl_req rq = {
        .op = RIO_OP_DELETE,
        .iov = &iov,
        .niov = 1,
        .body_len = (size_t)n,
        .resp_cap = RIO_PROTO_CTRL_MAX,
        .timeout_ms = t->o.op_timeout_ms,
    };
    ret = ctl_call(t, &t->members[owner_of(t, key, klen)], &rq, &h, &body);
    if (ret < 0)
        return ret;
    rio__free(body);
    return h.status ? wire_status(h.status) : 0;
}

/* ------------------------------------------------------------------ slots */

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
static void slot_done(struct tcp_transport *t, struct tcp_slot *s, int64_t res, bool keep_live)
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
        s->io = NULL;
        s->data = NULL;
        s->on_done = true;
        s->dnext = NULL;
        if (t->done_tail)
            t->done_tail->dnext = s;
        else
            t->done_head = s;
        t->done_tail = s;
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
    struct tcp_slot *list = t->done_head, *s, *next;
    int n = 0;

    if (!list)
        return 0;
    t->done_head = t->done_tail = NULL;
    pthread_mutex_lock(&t->mu);
    for (s = list; s; s = s->dnext) {
        struct rio_io *io = s->done_io;
        io->res = s->done_res;
        io->svc_ns = 0;
        io->tpriv = NULL; /* a late cancel finds nothing */
        if (s->cancel_listed)
            cancel_unlink_locked(t, s);
    }
    pthread_mutex_unlock(&t->mu);
    for (s = list; s; s = s->dnext) {
        s->done_io->complete(s->done_io);
        n++;
    }
    for (s = list; s; s = next) {
        next = s->dnext;
        s->done_io = NULL;
        s->on_done = false;
        slot_release(t, s);
    }
    return n;
}

/* ------------------------------------------------------------ connections */

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

static void ctr_add(struct tcp_transport *t, uint64_t *field, int64_t delta)
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
        ctr_add(t, &t->ctr.conns_open, -1);
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
        slot_done(t, s, err, false);
    while ((s = sl_pop(&cn->sq)))
        slot_done(t, s, err, false);
    cn->sq_off = 0;
}

/* An established connection failed. */
static void conn_fail(struct tcp_transport *t, struct tcp_conn *cn, int err)
{
    conn_close_fd(t, cn);
    ctr_add(t, &t->ctr.conn_failures, 1);
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
static bool rail_has_conn(const struct tcp_transport *t, const struct tcp_conn *cn)
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
        ctr_add(t, &t->ctr.paths_down, 1);
    }
    ctr_add(t, &t->ctr.reported_down, 1);
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
static void dial_failed(struct tcp_transport *t, struct tcp_conn *cn, int err, uint64_t now)
{
    struct tcp_rail *r = cn->rail;
    bool cut = cn->state >= C_HELLO_TX && reset_class(err);

    if ((cut || cn->down) && rail_has_conn(t, cn)) {
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
    ctr_add(t, &t->ctr.dial_failures, 1);
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
static void conn_abort(struct tcp_transport *t, struct tcp_conn *cn, struct tcp_slot *victim,
                       int64_t res, uint64_t now)
{
    struct slist keep = {0};
    struct tcp_slot *s;
    uint64_t requeued = 0;

    conn_close_fd(t, cn);
    for (int pass = 0; pass < 2; pass++) {
        struct slist *l = pass == 0 ? &cn->wq : &cn->sq;
        while ((s = sl_pop(l))) {
            if (s == victim) {
                slot_done(t, s, res, false);
            } else if (!s->io) {
                slot_done(t, s, 0, false);
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
        ctr_add(t, &t->ctr.requeued, (int64_t)requeued);
}

static void conn_ready(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct tcp_rail *r = cn->rail;

    cn->state = C_READY;
    ctr_add(t, &t->ctr.conns_open, 1);
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
    conn_update_events(t, cn);
    path_up(t, cn);
}

/* Send what is left of the handshake frame. */
static int conn_hs_flush(struct tcp_transport *t, struct tcp_conn *cn)
{
    while (cn->hs_off < cn->hs_len || (cn->tls.ssl && rio__tls_has_pending_out(&cn->tls))) {
        struct iovec iov = {.iov_base = cn->hs + cn->hs_off,
                            .iov_len = (size_t)(cn->hs_len - cn->hs_off)};
        ssize_t w =
            cn->hs_off < cn->hs_len ? io_send(cn->fd, &cn->tls, &iov, 1) : rio__tls_flush(&cn->tls);
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
    int ret = new_nonce(cn->cnonce);
    if (ret < 0)
        return ret;
    cn->ctrl = rio__malloc(RIO_PROTO_CTRL_BODY_MAX);
    if (!cn->ctrl)
        return -ENOMEM;
    rio__proto_sess_free(&cn->sess);
    cn->tx_seq = 0;
    cn->hs_id = next_id(t);
    cn->hs_len = (uint16_t)hs_hello(cn->hs_id, cn->cnonce, cn->hs);
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
        tls_say(t, cn->m->host, why);
    if (ret < 0)
        return ret;
    return conn_start_hs(t, cn);
}

/* The TCP connection is up: TLS first when on, then HELLO. */
static int conn_connected(struct tcp_transport *t, struct tcp_conn *cn)
{
    if (!t->tls_ctx)
        return conn_start_hs(t, cn);
    int ret = rio__tls_init(&cn->tls, t->tls_ctx, cn->fd, true, tls_name_of(t, cn->m));
    if (ret < 0)
        return ret;
    cn->state = C_TLS;
    return conn_tls_step(t, cn);
}

static int conn_dial(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    int fd, ret;

    ctr_add(t, &t->ctr.dials, 1);
    ret = sock_open(t, cn->rail, &fd);
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

/*
 * Start moving cn's queued ops: dial when closed (single flight per rail
 * until a dial succeeds; at once failing when the rail backs off), or send.
 */
static void conn_kick(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now);

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
        unsigned inflight = cn->wq.n;
        uint64_t off = cn->sq_off;
        size_t total = 0;
        int n = 0;

        uint64_t seq = cn->tx_seq;
        for (struct tcp_slot *s = cn->sq.head; s && n + 2 <= TCP_IOV_MAX; s = s->next) {
            if (cn->max_depth && inflight >= cn->max_depth)
                break;
            if (off == 0) {
                /* Its first byte goes now: its tag is for this place in the
                 * stream (made again if a cancelled request left the queue
                 * before it, or it moved to another connection). */
                uint64_t want = rio__proto_sess_keyed(&cn->sess) ? seq : 0;
                if (s->seal_conn != cn || s->seal_epoch != cn->epoch || s->seal_seq != want) {
                    if (seal_contig(&cn->sess, want, s->req,
                                    s->req_len - RIO_PROTO_HDR_LEN - RIO_PROTO_TAG_LEN) < 0)
                        return -ENOMEM;
                    s->seal_conn = cn;
                    s->seal_epoch = cn->epoch;
                    s->seal_seq = want;
                }
                seq++;
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
        ssize_t w = io_send(cn->fd, &cn->tls, iov, n);
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
            struct tcp_slot *s = cn->sq.head;
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

static void conn_kick(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct tcp_rail *r = cn->rail;
    int ret;

    if (!cn->sq.n)
        return;
    if (cn->state == C_READY) {
        if (!cn->out_blocked) {
            ret = conn_flush(t, cn, now);
            if (ret < 0)
                conn_fail(t, cn, ret);
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
    ret = conn_dial(t, cn, now);
    if (ret < 0)
        dial_failed(t, cn, ret, now);
}

/* --------------------------------------------------------------- receive */

static int conn_on_body(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now);

/* A whole frame during the handshake. Returns 0 or an error (dial failed). */
static int conn_on_hs_frame(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
{
    struct hs_info hi;
    int ret;

    if (cn->state == C_HELLO_RX) {
        ret = resp_check(&cn->rh, RIO_OP_HELLO, cn->hs_id);
        if (ret == 0)
            ret = hs_on_hello(t, &cn->rh, cn->ctrl, &hi);
        if (ret < 0)
            return ret;
        cn->max_body = hi.max_body;
        cn->max_depth = hi.max_depth;
        memcpy(cn->snonce, hi.snonce, sizeof(cn->snonce));
        if (!hi.auth_required) {
            conn_ready(t, cn, now);
            return 0;
        }
        cn->hs_id = next_id(t);
        cn->hs_len = (uint16_t)hs_auth(t, &cn->sess, cn->hs_id, cn->snonce, cn->cnonce, cn->hs);
        if (!cn->hs_len)
            return -ENOMEM;
        cn->hs_off = 0;
        cn->state = C_AUTH_TX;
        return conn_hs_flush(t, cn);
    }
    ret = resp_check(&cn->rh, RIO_OP_AUTH, cn->hs_id);
    if (ret == 0)
        ret = hs_on_auth(t, &cn->sess, &cn->rh, cn->ctrl, cn->cnonce, cn->snonce);
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
    if (ret < 0 && plain_got_tls(t, cn->m, cn->rx_hdr, RIO_PROTO_HDR_LEN))
        return RIO_ETLS;
    if (ret < 0 || !(h->flags & RIO_PF_RESPONSE) || rio__proto_layout(h, &ctl, &data) < 0)
        return RIO_EPROTO; /* poisons the connection (conn_event) */
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
        for (s = cn->wq.head; s; s = s->next)
            if (s->id == h->id)
                break;
        /* An answer to nothing outstanding (a duplicate of one already
         * taken, ids are never reused), of another opcode, or an error or
         * a PUT_CHUNK answer with a body (more than its tag): the stream
         * cannot be trusted. */
        if (!s || h->opcode != s->op || (ctl && (h->status != 0 || s->op != RIO_OP_READ)))
            return RIO_EPROTO;
        cn->rx_slot = s;
        if (h->status == 0 && s->op == RIO_OP_READ) {
            if (data != s->expect_len) {
                /* Never more than len bytes into dst: the op fails (short:
                 * the chunk is retried; longer: a protocol violation, retried
                 * like a reset) and the stream is abandoned; the others go
                 * out again. */
                if (data > s->expect_len)
                    ctr_add(t, &t->ctr.poisoned, 1);
                conn_abort(t, cn, s, data < s->expect_len ? RIO_ESHORT : -EPROTO, now);
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

/* A READ answer's fixed part and tag arrived: check them, then take the data. */
static int conn_on_read_fixed(struct tcp_transport *t, struct tcp_conn *cn)
{
    struct tcp_slot *s = cn->rx_slot;

    if (rio__proto_rx_check(&cn->sess, cn->rx_hdr, cn->ctrl, RIO_PROTO_READ_FIXED,
                            cn->ctrl + RIO_PROTO_READ_FIXED) < 0)
        return RIO_EPROTO; /* frame check failed */
    cn->read_xxh = rio__proto_u64(cn->ctrl);
    cn->rx_got = 0;
    cn->rx_len = s->expect_len;
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
    sl_unlink(&cn->wq, s);
    if (cn->rh.status != 0 && s->op == RIO_OP_PUT_CHUNK &&
        wire_status(cn->rh.status) == RIO_ENOTFOUND) {
        res = RIO_ENOUPLOAD; /* the server dropped the upload: nothing of it is written */
    } else if (cn->rh.status != 0) {
        res = wire_status(cn->rh.status);
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
        ctr_add(t, &t->ctr.path_bytes[cn->path], res);
    slot_done(t, s, res, false);
    return 0;
}

/* EOF: an idle connection the server closed goes quietly; anything owed fails. */
static int conn_on_eof(struct tcp_transport *t, struct tcp_conn *cn)
{
    if (cn->state == C_READY && cn->wq.n == 0 && cn->sq_off == 0 && cn->rx_mode == RX_HDR &&
        cn->rx_hdr_got == 0) {
        /* Nothing of the queued ops reached the server: they wait for a
         * fresh connection. */
        conn_close_fd(t, cn);
        return 1;
    }
    if (cn->rx_mode == RX_HDR && plain_got_tls(t, cn->m, cn->rx_hdr, cn->rx_hdr_got))
        return RIO_ETLS;
    return -ECONNRESET;
}

/* Read what cn has, up to a budget. Returns as conn_on_header. */
static int conn_read(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now)
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
            /* rx_len == io->len (checked on the header): never past dst's end */
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
        ssize_t r = io_recv(cn->fd, &cn->tls, p, want);
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

static void conn_event(struct tcp_transport *t, struct tcp_conn *cn, uint32_t ev, uint64_t now)
{
    int ret = 0;

    if (cn->state == C_CONNECTING) {
        if (!(ev & (EPOLLOUT | EPOLLERR | EPOLLHUP)))
            return;
        ret = sock_error(cn->fd);
        if (ret == 0)
            ret = conn_connected(t, cn);
        if (ret < 0)
            dial_failed(t, cn, ret, now);
        return;
    }
    if (cn->state == C_TLS) {
        ret = conn_tls_step(t, cn);
        if (ret < 0)
            dial_failed(t, cn, ret, now);
        return;
    }
    if (ev & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
        ret = conn_read(t, cn, now);
        if (ret > 0)
            return;
        if (ret == 0 && (ev & EPOLLERR))
            ret = sock_error(cn->fd);
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
        ctr_add(t, &t->ctr.poisoned, 1);
        ret = -EPROTO;
    }
    if (cn->state == C_READY)
        conn_fail(t, cn, ret);
    else
        dial_failed(t, cn, ret, now);
}

/* -------------------------------------------------------------- the loop */

/* Take what submit and cancel queued. Returns true when wake() was called. */
static bool intake(struct tcp_transport *t, uint64_t now)
{
    struct slist pend;
    struct tcp_slot *cancels, *s, *next;
    bool woken;

    pthread_mutex_lock(&t->mu);
    pend = t->pending;
    memset(&t->pending, 0, sizeof(t->pending));
    cancels = t->cancels;
    t->cancels = NULL;
    for (s = cancels; s; s = s->cnext)
        s->cancel_listed = false;
    woken = t->wake_req;
    t->wake_req = false;
    pthread_mutex_unlock(&t->mu);

    for (s = pend.head; s; s = next) {
        next = s->next;
        struct tcp_conn *cn = s->conn;
        if (!cn->sq.n && !cn->wq.n)
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
            if (s == cn->sq.head && cn->sq_off > 0) {
                if (s->data_len == 0) {
                    /* The rest of the request comes from the slot itself. */
                    ctr_add(t, &t->ctr.tombstones, 1);
                    slot_done(t, s, -ECANCELED, true);
                    s->tomb_deadline_ns = now + (uint64_t)t->grace_ms * NS_PER_MS;
                } else {
                    /* Stop reading io->src: give up this stream. */
                    conn_abort(t, cn, s, -ECANCELED, now);
                }
            } else {
                sl_unlink(&cn->sq, s);
                slot_done(t, s, -ECANCELED, false);
            }
        } else if (s->where == SL_WAIT) {
            if (cn->rx_slot == s && cn->rx_mode == RX_DST) {
                if (!t->discard && !(t->discard = rio__malloc(TCP_DISCARD_LEN))) {
                    conn_abort(t, cn, s, -ECANCELED, now);
                    continue;
                }
                cn->rx_mode = RX_DISCARD;
            }
            ctr_add(t, &t->ctr.tombstones, 1);
            slot_done(t, s, -ECANCELED, true);
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
        for (const struct tcp_slot *s = pass ? cn->sq.head : cn->wq.head; s; s = s->next)
            if (s->tomb)
                due = min_u64(due, s->tomb_deadline_ns);
    return due;
}

/* Kick every connection with work, run its timers; the next timer's time. */
static uint64_t service(struct tcp_transport *t, uint64_t now)
{
    uint64_t next = NEVER;
    uint64_t progress_ns = (uint64_t)t->progress_ms * NS_PER_MS;

    for (unsigned i = 0; i < t->nconns; i++) {
        struct tcp_conn *cn = &t->conns[i];
        if (cn->sq.n && (cn->state == C_CLOSED || (cn->state == C_READY && !cn->out_blocked)))
            conn_kick(t, cn, now);
        if (cn->down && cn->state == C_CLOSED && !cn->sq.n && rail_has_conn(t, cn)) {
            /* Grow back: a background dial of a path that is down while
             * its rail's other connections work (the server's limit cut
             * it, or the rail came back through another connection). */
            if (now >= cn->grow_ns) {
                ctr_add(t, &t->ctr.grow_dials, 1);
                int ret = conn_dial(t, cn, now);
                if (ret < 0)
                    dial_failed(t, cn, ret, now);
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
                dial_failed(t, cn, -ETIMEDOUT, now);
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
                    ctr_add(t, &t->ctr.grace_closes, 1);
                    conn_abort(t, cn, NULL, 0, now);
                    break;
                }
                next = min_u64(next, due);
            }
            if (!progress_ns || (!cn->sq.n && !cn->wq.n))
                break;
            if (now > cn->last_progress_ns && now - cn->last_progress_ns >= progress_ns) {
                ctr_add(t, &t->ctr.watchdog_trips, 1);
                conn_fail(t, cn, -ETIMEDOUT);
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

static int tcp_reap(struct rio_transport *tt, int timeout_ms)
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
        if (t->done_head || woken || t->window_freed || (polled && now >= deadline))
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
        if (t->pending.n || t->cancels || t->wake_req) {
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
            conn_event(t, cn, evs[i].events, now);
        }
    }
    t->window_freed = false;
    int n = deliver(t);
    return n > 0 || ret == 0 ? n : ret;
}

static void tcp_wake(struct rio_transport *tt)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;

    pthread_mutex_lock(&t->mu);
    t->wake_req = true;
    poke_locked(t);
    pthread_mutex_unlock(&t->mu);
}

static void tcp_cancel(struct rio_transport *tt, struct rio_io *io)
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

static int tcp_submit(struct rio_transport *tt, struct rio_io *io)
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
        if (!io->dst || rio__key_len(io->key, &klen) < 0)
            return -EINVAL;
        mi = owner_of(t, io->key, klen);
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
    if (cn->nslots >= cn->window) {
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
    if (io->kind == RIO_IO_READ) {
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
    frame_header(s->op, s->id, (uint32_t)((uint64_t)n + RIO_PROTO_TAG_LEN + s->data_len), s->req);
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

/* ------------------------------------------------------------ open, close */

/* The rail for announced address text ("host:port"); a wildcard host means
 * the member's own host. */
static int rail_from_text(const struct tcp_member *m, const char *text, struct tcp_rail *r)
{
    char host[TCP_HOST_MAX], port[TCP_PORT_MAX];
    int ret = split_hostport(text, strlen(text), m->port, host, port);

    if (ret < 0)
        return ret;
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*"))
        snprintf(host, sizeof(host), "%s", m->host);
    memset(r, 0, sizeof(*r));
    ret = resolve(host, port, &r->dst);
    if (ret < 0)
        return ret;
    snprintf(r->text, sizeof(r->text), "%s", text);
    return 0;
}

/* Does a sit in the network of (net, mask)? Same family, masked bytes equal. */
static bool addr_in_subnet(const struct sockaddr *a, const struct sockaddr *net,
                           const struct sockaddr *mask)
{
    const uint8_t *x, *y, *k;
    size_t n;

    if (!a || !net || !mask || a->sa_family != net->sa_family)
        return false;
    if (a->sa_family == AF_INET) {
        x = (const uint8_t *)&((const struct sockaddr_in *)a)->sin_addr;
        y = (const uint8_t *)&((const struct sockaddr_in *)net)->sin_addr;
        k = (const uint8_t *)&((const struct sockaddr_in *)mask)->sin_addr;
        n = 4;
    } else if (a->sa_family == AF_INET6) {
        x = (const uint8_t *)&((const struct sockaddr_in6 *)a)->sin6_addr;
        y = (const uint8_t *)&((const struct sockaddr_in6 *)net)->sin6_addr;
        k = (const uint8_t *)&((const struct sockaddr_in6 *)mask)->sin6_addr;
        n = 16;
    } else {
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if ((x[i] & k[i]) != (y[i] & k[i]))
            return false;
    return true;
}

/*
 * Pair each announced rail of m with a local address on the same network
 * (getifaddrs: the first up, non-loopback interface address whose subnet
 * holds the rail's address): the connection binds it, so the rail's traffic
 * leaves by the interface of that network and its replies come back the
 * same way. A rail no local network holds is left unbound (the routing table
 * decides). Only when several rails are announced: one rail needs no pairing.
 */
static void pair_rails_by_subnet(struct tcp_member *m)
{
    struct ifaddrs *ifa = NULL;

    if (m->nrails < 2 || getifaddrs(&ifa) < 0)
        return;
    for (unsigned k = 0; k < m->nrails; k++) {
        struct tcp_rail *r = &m->rail[k];
        if (r->has_src || r->ifname[0])
            continue;
        for (const struct ifaddrs *i = ifa; i; i = i->ifa_next) {
            if (!i->ifa_addr || !i->ifa_netmask || (i->ifa_flags & IFF_LOOPBACK) ||
                !(i->ifa_flags & IFF_UP))
                continue;
            if (!addr_in_subnet((const struct sockaddr *)&r->dst.ss, i->ifa_addr, i->ifa_netmask))
                continue;
            memset(&r->src, 0, sizeof(r->src));
            r->src.len = i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                           : sizeof(struct sockaddr_in6);
            memcpy(&r->src.ss, i->ifa_addr, r->src.len);
            if (i->ifa_addr->sa_family == AF_INET)
                ((struct sockaddr_in *)&r->src.ss)->sin_port = 0;
            else
                ((struct sockaddr_in6 *)&r->src.ss)->sin6_port = 0;
            r->has_src = true;
            break;
        }
    }
    freeifaddrs(ifa);
}

/*
 * One item of ?rails=: DST | SRC>DST | if!NAME | if!NAME>DST, where DST is
 * HOST[:PORT] (the member's port by default), SRC a local address to bind
 * and NAME an interface (SO_BINDTODEVICE). A bare if!NAME goes to the
 * member's address.
 */
static int rail_from_param(const struct tcp_member *m, const char *item, size_t len,
                           struct tcp_rail *r)
{
    char host[TCP_HOST_MAX], port[TCP_PORT_MAX];
    const char *gt = memchr(item, '>', len);
    const char *dst = gt ? gt + 1 : item;
    size_t dlen = gt ? len - (size_t)(dst - item) : len;
    int ret;

    memset(r, 0, sizeof(*r));
    if (len > TCP_NAME_MAX)
        return RIO_EURL;
    memcpy(r->text, item, len);
    r->text[len] = '\0';
    if (len > 3 && !strncmp(item, "if!", 3)) {
        size_t nl = (gt ? (size_t)(gt - item) : len) - 3;
        if (nl == 0 || nl >= IF_NAMESIZE)
            return RIO_EURL;
        memcpy(r->ifname, item + 3, nl);
        r->ifname[nl] = '\0';
        if (!gt) {
            r->dst = m->url.dst;
            return 0;
        }
    } else if (gt) {
        char src[TCP_HOST_MAX];
        size_t sl = (size_t)(gt - item);
        if (sl == 0 || sl >= sizeof(src))
            return RIO_EURL;
        memcpy(src, item, sl);
        src[sl] = '\0';
        if (src[0] == '[' && src[sl - 1] == ']') {
            memmove(src, src + 1, sl - 2);
            src[sl - 2] = '\0';
        }
        ret = resolve(src, "0", &r->src);
        if (ret < 0)
            return ret == RIO_EDNS ? RIO_EURL : ret;
        r->has_src = true;
    }
    ret = split_hostport(dst, dlen, m->port, host, port);
    if (ret < 0)
        return ret;
    return resolve(host, port, &r->dst);
}

static int parse_members(struct tcp_transport *t, const char *auth)
{
    const char *p = auth;

    if (!auth || !*auth)
        return RIO_EURL;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        struct tcp_member *m;
        int ret;

        if (t->nmembers == TCP_MAX_MEMBERS || len == 0 || len > TCP_NAME_MAX)
            return RIO_EURL;
        m = &t->members[t->nmembers];
        memcpy(m->name, p, len);
        m->name[len] = '\0';
        m->name_len = len;
        ret = split_hostport(p, len, TCP_DEFAULT_PORT, m->host, m->port);
        if (ret < 0)
            return ret;
        ret = resolve(m->host, m->port, &m->url.dst);
        if (ret < 0)
            return ret;
        snprintf(m->url.text, sizeof(m->url.text), "%s", m->name);
        m->ctl_fd = -1;
        ret = -pthread_mutex_init(&m->ctl_mu, NULL);
        if (ret < 0)
            return ret;
        t->nmembers++; /* counted once its mutex exists: close destroys it */
        if (!e)
            return 0;
        p = e + 1;
    }
}

static int parse_rails(struct tcp_transport *t, const char *s)
{
    struct tcp_member *m = &t->members[0];

    /* Explicit rails name one server's addresses. */
    if (t->nmembers != 1)
        return RIO_EINVAL;
    m->nrails = 0;
    for (;;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int ret;

        if (len == 0 || m->nrails == RIO_PROTO_MAX_RAILS)
            return RIO_EURL;
        ret = rail_from_param(m, s, len, &m->rail[m->nrails]);
        if (ret < 0)
            return ret;
        m->nrails++;
        if (!e)
            return 0;
        s = e + 1;
    }
}

/* tls=on|off (RIO_TLS), tls_ca=FILE (RIO_TLS_CA), tls_verify=on|off, tls_name=NAME. */
static int parse_tls(struct tcp_transport *t, const struct rio_url *u)
{
    const char *s, *ca;
    bool verify = true;
    char why[256];

    /* tls= and RIO_TLS are resolved with the other options (options.c). */
    if ((s = rio__url_param(u, "tls_verify")) && rio__opt_bool("tls_verify", s, &verify) < 0)
        return RIO_EINVAL;
    ca = rio__url_param(u, "tls_ca");
    if (!ca)
        ca = getenv("RIO_TLS_CA");
    if (ca && !*ca)
        ca = NULL;
    if ((s = rio__url_param(u, "tls_name")) && *s) {
        if (strlen(s) > 255)
            return RIO_EINVAL;
        t->tls_name = rio__malloc(strlen(s) + 1);
        if (!t->tls_name)
            return -ENOMEM;
        strcpy(t->tls_name, s);
    }
    if (t->o.tls != 1)
        return 0;
    t->tls_ctx = rio__tls_client_ctx(ca, verify, why, sizeof(why));
    if (!t->tls_ctx) {
        fprintf(stderr, "railio: %s\n", why);
        return RIO_ETLS;
    }
    return 0;
}

static int parse_params(struct tcp_transport *t, const struct rio_url *u)
{
    const char *s;
    uint64_t v;
    int ret;

    t->conns_per_rail = 1;
    if ((s = rio__url_param(u, "conns"))) {
        if (rio__parse_uint(s, TCP_MAX_CONNS, &v) < 0 || v == 0)
            return RIO_EINVAL;
        t->conns_per_rail = (unsigned)v;
    }
    t->connect_ms = TCP_DEF_CONNECT_MS;
    if ((s = rio__url_param(u, "connect_timeout")) &&
        (rio__opt_ms("connect_timeout", s, &t->connect_ms) < 0 || t->connect_ms == 0))
        return RIO_EINVAL;
    t->user_timeout_ms = TCP_DEF_USER_TIMEOUT_MS;
    if ((s = rio__url_param(u, "user_timeout")) &&
        rio__opt_ms("user_timeout", s, &t->user_timeout_ms) < 0)
        return RIO_EINVAL;
    t->progress_ms = t->o.op_timeout_ms;
    if ((s = rio__url_param(u, "progress_timeout")) &&
        rio__opt_ms("progress_timeout", s, &t->progress_ms) < 0)
        return RIO_EINVAL;
    if ((s = rio__url_param(u, "ttl")) && rio__opt_ms("ttl", s, &t->ttl_ms) < 0)
        return RIO_EINVAL;
    t->backoff_ms = TCP_DIAL_BACKOFF_BASE_MS;
    t->backoff_cap_ms = TCP_DIAL_BACKOFF_CAP_MS;
    if ((s = rio__url_param(u, "dial_backoff")) &&
        rio__opt_ms("dial_backoff", s, &t->backoff_ms) < 0)
        return RIO_EINVAL;
    if ((s = rio__url_param(u, "dial_backoff_cap")) &&
        rio__opt_ms("dial_backoff_cap", s, &t->backoff_cap_ms) < 0)
        return RIO_EINVAL;
    if (t->backoff_ms > t->backoff_cap_ms)
        return RIO_EINVAL;
    t->grace_ms = TCP_DEF_CANCEL_GRACE_MS;
    if ((s = rio__url_param(u, "cancel_grace")) &&
        (rio__opt_ms("cancel_grace", s, &t->grace_ms) < 0 || !t->grace_ms))
        return RIO_EINVAL;
    t->keepalive = true;
    if ((s = rio__url_param(u, "keepalive")) && rio__opt_bool("keepalive", s, &t->keepalive) < 0)
        return RIO_EINVAL;
    ret = parse_tls(t, u);
    if (ret < 0)
        return ret;
    const char *tok = rio__url_param(u, "token");
    const char *tokf = rio__url_param(u, "token_file");
    if (!tok && !tokf)
        tokf = getenv("RIO_TOKEN_FILE");
    if (tok && tokf)
        return RIO_EINVAL;
    if (tok) {
        size_t n = strlen(tok);
        if (n == 0 || n > TCP_TOKEN_MAX)
            return RIO_EINVAL;
        t->token = rio__malloc(n);
        if (!t->token)
            return -ENOMEM;
        memcpy(t->token, tok, n);
        t->token_len = n;
    } else if (tokf && *tokf) {
        const char *why;
        int loose;
        ret = rio__proto_token_read(tokf, &t->token, &t->token_len, &loose, &why);
        if (ret < 0)
            return ret;
    }
    return 0;
}

static void tcp_close(struct rio_transport *tt)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_slot *s;

    if (!t)
        return;
    for (unsigned i = 0; i < t->nconns; i++) {
        struct tcp_conn *cn = &t->conns[i];
        rio__tls_cleanup(&cn->tls);
        if (cn->fd >= 0)
            close(cn->fd);
        rio__free(cn->ctrl);
        rio__proto_sess_free(&cn->sess);
        /* The engine closes only when nothing is in flight; tombstones
         * (answers still owed to cancelled ops) may remain. */
        while ((s = sl_pop(&cn->wq)))
            rio__free(s);
        while ((s = sl_pop(&cn->sq)))
            rio__free(s);
    }
    while ((s = sl_pop(&t->pending)))
        rio__free(s);
    while ((s = t->free_slots)) {
        t->free_slots = s->next;
        rio__free(s);
    }
    for (unsigned i = 0; i < t->nmembers; i++) {
        ctl_close_locked(&t->members[i]);
        pthread_mutex_destroy(&t->members[i].ctl_mu);
    }
    if (t->epfd >= 0)
        close(t->epfd);
    if (t->evfd >= 0)
        close(t->evfd);
    pthread_mutex_destroy(&t->mu);
    if (t->token) {
        OPENSSL_cleanse(t->token, t->token_len);
        rio__free(t->token);
    }
    rio__tls_ctx_free(t->tls_ctx);
    rio__free(t->tls_name);
    rio__free(t->discard);
    rio__free(t->conns);
    rio__free(t->members);
    rio__free(t);
}

/*
 * Greet every member on its control connection: this checks that it
 * answers and that the token is accepted, and learns its rails (unless
 * ?rails= names them). A member that does not answer keeps its URL address
 * as its one rail; open fails only when no member answers.
 */
static int greet_members(struct tcp_transport *t, bool explicit_rails)
{
    int first_err = 0;
    unsigned ok = 0;

    for (unsigned i = 0; i < t->nmembers; i++) {
        struct tcp_member *m = &t->members[i];
        struct hs_info hi;
        int ret;

        /* A damaged or cut greeting is tried again like any metadata call;
         * a refusal (-EACCES) is final. */
        for (unsigned n = 1;; n++) {
            pthread_mutex_lock(&m->ctl_mu);
            ret = ctl_dial_locked(t, m, &hi);
            pthread_mutex_unlock(&m->ctl_mu);
            if (ret == 0 || n >= t->o.retry_attempts || !(ret == RIO_EPROTO || reset_class(ret)))
                break;
            ctr_add(t, &t->ctr.ctl_retries, 1);
            ctl_backoff(t, n);
        }
        if (ret < 0) {
            if (!first_err)
                first_err = ret;
            if (ret == -EACCES || ret == RIO_EPROTO)
                return ret; /* a refusal, not an outage */
        } else {
            ok++;
            m->max_depth = hi.max_depth;
        }
        if (explicit_rails)
            continue;
        m->nrails = 0;
        for (unsigned k = 0; ret == 0 && k < hi.nrails; k++)
            if (rail_from_text(m, hi.rail[k], &m->rail[m->nrails]) == 0)
                m->nrails++;
        if (m->nrails == 0) {
            m->rail[0] = m->url;
            m->nrails = 1;
        }
        pair_rails_by_subnet(m);
    }
    return ok ? 0 : first_err;
}

static int tcp_open(const struct rio_url *u, const struct rio_options *o,
                    struct rio_transport **out)
{
    struct tcp_transport *t;
    unsigned maxr = 1, npaths;
    const char *rails;
    int ret;

    if (!u || !o || !out)
        return RIO_EINVAL;
    t = rio__calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->base.ops = &rio__tcp_ops;
    t->o = *o;
    t->epfd = t->evfd = -1;
    ret = -pthread_mutex_init(&t->mu, NULL);
    if (ret < 0) {
        rio__free(t);
        return ret;
    }
    t->members = rio__calloc(TCP_MAX_MEMBERS, sizeof(*t->members));
    ret = -ENOMEM;
    if (!t->members)
        goto err;
    ret = parse_params(t, u);
    if (ret < 0)
        goto err;
    ret = parse_members(t, u->authority);
    if (ret < 0)
        goto err;
    rails = rio__url_param(u, "rails");
    if (rails) {
        ret = parse_rails(t, rails);
        if (ret < 0)
            goto err;
    }
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->epfd < 0 || t->evfd < 0) {
        ret = -errno;
        goto err;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = EV_WAKE};
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &e) < 0) {
        ret = -errno;
        goto err;
    }
    ret = greet_members(t, rails != NULL);
    if (ret < 0)
        goto err;

    for (unsigned i = 0; i < t->nmembers; i++)
        if (t->members[i].nrails > maxr)
            maxr = t->members[i].nrails;
    npaths = maxr * t->conns_per_rail;
    if (npaths > RIO_MAX_PATHS)
        npaths = RIO_MAX_PATHS;
    if (o->paths)
        npaths = o->paths;
    if (npaths < 1 || npaths > RIO_MAX_PATHS) {
        ret = RIO_EINVAL;
        goto err;
    }
    t->base.npaths = npaths;
    t->conns = rio__calloc(t->nmembers * npaths, sizeof(*t->conns));
    ret = -ENOMEM;
    if (!t->conns)
        goto err;
    t->nconns = t->nmembers * npaths;
    for (unsigned mi = 0; mi < t->nmembers; mi++) {
        struct tcp_member *m = &t->members[mi];
        for (unsigned p = 0; p < npaths; p++) {
            struct tcp_conn *cn = &t->conns[mi * npaths + p];
            cn->t = t;
            cn->m = m;
            cn->rail = &m->rail[p % m->nrails];
            cn->idx = mi * npaths + p;
            cn->path = p;
            cn->fd = -1;
            /* Until its own greeting, a connection's window is what the
             * member announced at open. */
            cn->window = o->depth;
            if (m->max_depth && m->max_depth < cn->window)
                cn->window = m->max_depth;
        }
    }
    *out = &t->base;
    return 0;
err:
    tcp_close(&t->base);
    return ret;
}

/* ------------------------------------------------------------- test hooks */

static struct tcp_transport *tcp_cast(struct rio_transport *t)
{
    return t && t->ops == &rio__tcp_ops ? (struct tcp_transport *)t : NULL;
}

int rio__tcp_counters(struct rio_transport *tt, struct rio__tcp_counters *out)
{
    struct tcp_transport *t = tcp_cast(tt);

    if (!out)
        return RIO_EINVAL;
    memset(out, 0, sizeof(*out));
    if (!t)
        return RIO_EINVAL;
    pthread_mutex_lock(&t->mu);
    *out = t->ctr;
    pthread_mutex_unlock(&t->mu);
    out->bytes_in = atomic_load_explicit(&t->bytes_in, memory_order_relaxed);
    out->bytes_out = atomic_load_explicit(&t->bytes_out, memory_order_relaxed);
    return 0;
}

void rio__tcp_reset_peaks(struct rio_transport *tt)
{
    struct tcp_transport *t = tcp_cast(tt);

    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->ctr.slots_peak = t->ctr.slots_armed;
    t->ctr.conns_peak = t->ctr.conns_open;
    pthread_mutex_unlock(&t->mu);
}

int rio__tcp_owner(struct rio_transport *tt, const char *key)
{
    struct tcp_transport *t = tcp_cast(tt);
    size_t klen;

    if (!t || rio__key_len(key, &klen) < 0)
        return -1;
    return (int)owner_of(t, key, klen);
}

const struct rio_transport_ops rio__tcp_ops = {
    .scheme = "railio",
    .caps = RIO_CAP_ETAG,
    .open = tcp_open,
    .close = tcp_close,
    .submit = tcp_submit,
    .reap = tcp_reap,
    .wake = tcp_wake,
    .cancel = tcp_cancel,
    .lookup = tcp_lookup,
    .put_open = tcp_put_open,
    .put_commit = tcp_put_commit,
    .put_abort = tcp_put_abort,
    .remove = tcp_remove,
};
