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
 * one blocking control connection per member, under that member's mutex,
 * one try each: the engine tries them again (core/meta.c), so each returns
 * a retryable class only when repeating it is safe (LOOKUP, PUT_OPEN, and
 * PUT_COMMIT, idempotent by upload id), else RIO_EUNKNOWN (a DELETE or a
 * commit whose answer never came). Kept as protocol steps: an idempotent
 * request whose reused connection the server had closed goes once more on a
 * fresh one, and a commit whose answer was lost is asked once more by its
 * upload id.
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
 * member's queue of control requests; the caller leading a round owns the
 * control connection itself while it sends and reads (control.c). Everything else on the data side
 * belongs to the thread running reap. t->mu is never held across a system call that waits, nor
 * across complete().
 *
 * Files (src/transport/tcp/), one concern each:
 *
 *   tcp_int.h    this header: constants, the structs the files share, small
 *                inline helpers, and what each file offers the others
 *   config.c     URL, members and their ring, rails (?rails=, paired by
 *                subnet), the query options
 *   handshake.c  sockets, plain or TLS I/O, HELLO and the mutual AUTH
 *   control.c    the blocking control connection of each member
 *   metadata.c   lookup, put_open, put_commit, put_abort, remove
 *   conn.c       the data connections: non-blocking dial and handshake,
 *                path state reported to the engine, framing of chunk ops
 *                (send requests, receive answers)
 *   loop.c       slots, submit, cancel, wake, reap (the event loop)
 *   tcp.c        open, close, the ops table, the test hooks (tcp.h)
 */
#ifndef RIO_TRANSPORT_TCP_INT_H
#define RIO_TRANSPORT_TCP_INT_H

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
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <openssl/crypto.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/key.h"
#include "core/list.h"
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
/* How often the loop looks at the queue of a socket under a receive
 * low-water mark while an answer is owed (loop.c, lowat_look): a tenth of
 * the engine's least silence window, so bytes that arrived unseen are
 * dated at most this late. */
#define TCP_LOWAT_LOOK_MS 100u
#define TCP_TOKEN_MAX RIO_PROTO_TOKEN_MAX
/* A LOOKUP answer carries one u64 per chunk: refuse a descriptor whose list
 * would take more than 64 MiB to hold. */
#define TCP_LOOKUP_MAX_CHUNKS (1u << 23)
#define TCP_DESC_FIXED 64u
#define TCP_CHUNK_MAX (1ull << 30)
/* The most uploads one call keeps open at once (transport.h uploads_max). */
#define TCP_UPLOADS_AHEAD 48u
/* The most PUT_ONEs one connection carries at once (within the server's
 * max_depth). */
#define TCP_ONE_WINDOW 64u
#define TCP_PUT_FIXED 24u
#define TCP_IOV_MAX 64
#define TCP_SEND_BATCH (16u << 20)  /* bytes offered to one sendmsg */
#define TCP_RECV_BUDGET (16u << 20) /* bytes read from one connection per event */
#define TCP_DISCARD_LEN (64u << 10)
#define TCP_EVENTS 64
/* (PUT_ONE's control part is the largest: its fixed fields, then the key) */
#define TCP_REQ_MAX (RIO_PROTO_HDR_LEN + RIO_PROTO_ONE_FIXED + 2 + RIO_KEY_MAX + RIO_PROTO_TAG_LEN)
#define TCP_HS_MAX (RIO_PROTO_HDR_LEN + 64 + RIO_PROTO_TAG_LEN)
#define NS_PER_MS 1000000ull
#define EV_WAKE UINT64_MAX
#define NEVER UINT64_MAX
#define UPLOAD_MAGIC 0x7270757055504c44ull

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

struct ctl_wait;

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
    struct ctl_wait *ctl_qh, *ctl_qt; /* requests waiting for a round (control.c) */
    bool ctl_leading;                 /* a caller is running rounds */
    uint32_t ctl_max_body;
    uint32_t ctl_caps; /* RIO_PROTO_CAP_* the server said it has */
    /* A data connection's server did not take PUT_ONE (one restarted as an
     * older version): no more PUT_ONEs to this member. */
    _Atomic bool put_one_off;
    _Atomic bool get_one_off; /* the same for GET_ONE */
    /* the leading caller's (ctl_leading set), or under ctl_mu when none leads */
    int ctl_fd;
    struct rio__tls ctl_tls;        /* tls=on: the control connection's TLS */
    struct rio_proto_sess ctl_sess; /* the control connection's frame checks */
    bool ctl_failed;                /* its last exchange (or dial) failed */
    /* Where the control connection dials: 0 the URL address, k the
     * member's rail k-1 (another route to the same server), moved on when
     * a dial or an exchange failed as a dead route does (control.c,
     * ctl_route) */
    unsigned ctl_via;
};

enum { SL_FREE = 0, SL_PENDING, SL_QUEUED, SL_WAIT };

struct tcp_conn;

struct tcp_slot {
    struct rio_io *io;          /* the op; NULL once it completed or was cancelled (a tombstone) */
    struct tcp_conn *conn;      /* the op's path's connection: its window counts the slot */
    struct rio_list_node qnode; /* the pending list, a send queue or a wait list */
    struct tcp_slot *next;      /* the free list */
    struct tcp_slot *cnext;     /* the cancel list (t->mu) */
    struct rio_list_node dnode; /* the done list (loop) */
    struct rio_io *done_io;
    int64_t done_res;
    uint64_t id;
    uint64_t expect_len;       /* READ: the body of a successful answer */
    uint64_t tomb_deadline_ns; /* a tombstone's answer is drained by then */
    const uint8_t *data;       /* PUT_CHUNK: io->src while the op is attached */
    uint64_t data_len;
    uint8_t op;
    uint8_t where;
    bool answered;     /* PUT_ONE: the server's answer came (loop) */
    bool sent_whole;   /* the whole request went out once (on any connection) */
    bool done_unsure;  /* PUT_ONE: ended unanswered once wholly sent (loop) */
    uint64_t done_gen; /* PUT_ONE, GET_ONE: the generation answered (loop) */
    /* Service time: asked of the server in the request's header (its
     * connection's server has RIO_PROTO_CAP_SVC_TIME), when the request's
     * first byte went, and the server's answer, clamped to the time the op
     * took as seen here (loop) */
    bool svc_asked;
    uint64_t sent_ns;
    uint64_t done_svc_ns;
    /* GET_ONE: the descriptor answered, and the xxh3 of the bytes that
     * came with it (done_xxh_valid) (loop) */
    uint64_t done_size, done_chunk_size, done_nchunks, done_xxh;
    char done_etag[RIO_PROTO_ETAG_LEN];
    bool done_xxh_valid;
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
    /* SO_RCVLOWAT as last set (0: the default, 1), while a large READ
     * answer arrives straight into its destination; lowat_seen: the
     * socket's queue (FIONREAD) at the last look, since bytes below the
     * mark arrive without a wake-up. */
    int lowat;
    int lowat_seen;
    uint64_t lowat_look_ns; /* the last look (the loop's or path_moved's) or read */
    uint64_t hs_id;
    uint8_t cnonce[RIO_PROTO_NONCE_LEN], snonce[RIO_PROTO_NONCE_LEN];
    uint32_t max_body, max_depth, caps;
    uint8_t hs[TCP_HS_MAX];
    uint16_t hs_len, hs_off;
    struct rio_list sq; /* to send; the head may be partly sent */
    uint64_t sq_off;    /* bytes of the head already sent */
    struct rio_list wq; /* sent, answer owed (tombstones included) */
    unsigned ntombs;    /* tombstones in sq and wq */
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
    uint64_t size, chunk_size, nchunks; /* size RIO_SIZE_UNKNOWN: nchunks comes at commit */
    bool commit_sent;                   /* a commit request for it reached the server */
    uint64_t put_if;                    /* put_expect's condition (0: none) */
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
    bool put_one;                        /* put_one=on (the default): small PUTs in one exchange */
    bool get_one;                        /* get_one=on (the default): small GETs in one exchange */
    uint32_t backoff_ms, backoff_cap_ms; /* dial backoff */
    uint32_t grace_ms;                   /* a tombstone's drain deadline */
    bool keepalive;
    uint8_t *token; /* secret memory (core/secret.h): out of core dumps */
    size_t token_len;
    SSL_CTX *tls_ctx;      /* tls=on: every connection is TLS */
    char *tls_name;        /* tls_name=: the name verified instead of the URL host */
    _Atomic bool tls_said; /* one line on stderr per client for a TLS failure */
    /* Open's greeting of the members (the caller's thread, before any loop
     * thread): a TLS failure then is the caller's detail when the open
     * fails, and said on stderr only once the open succeeded without that
     * member (tls_held). */
    bool greeting;
    char tls_held[320];
    int epfd, evfd;
    uint8_t *discard; /* loop: lazily, for tombstones' bodies */
    _Atomic uint64_t next_id;
    _Atomic uint64_t bytes_in, bytes_out;

    pthread_mutex_t mu;
    /* under mu */
    struct rio_list pending;
    struct tcp_slot *cancels;
    struct tcp_slot *free_slots;
    bool sleeping;
    bool wake_req;
    struct rio__tcp_counters ctr;

    /* loop only */
    struct rio_list done; /* of struct tcp_slot by dnode (loop) */
    bool window_freed;
};

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

/* The slot queues (t->pending, a connection's sq and wq) on core/list.h. */
static inline struct tcp_slot *sl_of(struct rio_list_node *n)
{
    return rio_list_entry(n, struct tcp_slot, qnode);
}

static inline struct tcp_slot *sl_head(const struct rio_list *l)
{
    return sl_of(l->head);
}

static inline struct tcp_slot *sl_next(const struct tcp_slot *s)
{
    return sl_of(s->qnode.next);
}

static inline void sl_push(struct rio_list *l, struct tcp_slot *s)
{
    rio_list_push_back(l, &s->qnode);
}

static inline void sl_unlink(struct rio_list *l, struct tcp_slot *s)
{
    rio_list_remove(l, &s->qnode);
}

static inline struct tcp_slot *sl_pop(struct rio_list *l)
{
    return sl_of(rio_list_pop_front(l));
}

/*
 * A status from the wire as a return code: the codes a server answers
 * (docs/protocol.md, "Status codes") pass, -ENOENT is RIO_ENOTFOUND, a
 * positive one is RIO_EPROTO, and any other, RIO_ESERVER: a code the engine
 * reads for its own decisions (RIO_EUNKNOWN "the commit may or may not be
 * done", RIO_ECANCELED, RIO_EDEADLINE, -ETIMEDOUT or -ECONNRESET "this path
 * failed") is the client's to say, never the server's.
 */
static inline int wire_status(int32_t s)
{
    if (s >= 0)
        return RIO_EPROTO;
    switch (s) {
    case -ENOENT:
        return RIO_ENOTFOUND;
    case RIO_EPROTO:
    case RIO_ENOTFOUND:
    case RIO_EGENERATION:
    case RIO_ECHECKSUM:
    case RIO_EINVAL:
    case RIO_ETHROTTLE:
    case RIO_ENOTSUP:
    case RIO_ESERVER:
    case -EACCES:
    case -EPERM:
    case -ENOSPC:
    case -EDQUOT:
    case -EFBIG:
    case -ENOMEM:
    case -EIO:
    case -EROFS:
    case -EMSGSIZE:
    case -ENAMETOOLONG:
    case -EINVAL:
    case -EAGAIN:
        return s;
    default:
        rio__detail("railio:// server answered status %d, which no server sends", (int)s);
        return RIO_ESERVER;
    }
}

static inline uint64_t next_id(struct tcp_transport *t)
{
    return atomic_fetch_add_explicit(&t->next_id, 1, memory_order_relaxed) + 1;
}

struct hs_info {
    uint32_t auth_required, max_body, max_depth, caps;
    uint8_t snonce[RIO_PROTO_NONCE_LEN];
    unsigned nrails;
    char rail[RIO_PROTO_MAX_RAILS][RIO_PROTO_ADDR_MAX + 1];
};

struct ctl_req {
    uint8_t op;
    const struct iovec *iov; /* the body */
    int niov;
    size_t body_len;
    uint64_t resp_cap; /* largest successful answer body accepted */
    /* Not 0: of a successful answer's control part only its first keep
     * bytes are stored; the rest is read and goes into the frame check,
     * never into memory (ctl_many.ctl_len says how long it was). */
    uint64_t keep;
    uint32_t timeout_ms;
    /* The caller's deadline (rio__meta_deadline_ns; UINT64_MAX: none): its
     * round (dial included) ends by then at the latest, unless another
     * request of the round has a later one (control.c). */
    uint64_t deadline_ns;
    /* The caller's cancel token (rio__meta_cancel; NULL: none): its round
     * ends soon after the tokens of all its unanswered requests fired. */
    const struct rio_cancel *cancel;
    bool idempotent;   /* a reused connection found closed: once more on a fresh one */
    bool no_dial;      /* only on an open connection */
    uint32_t need_cap; /* RIO_PROTO_CAP_* the server must have, else RIO_ENOTSUP */
    uint32_t dial_ms;  /* a dial, when one is needed, within this (0: connect_ms) */
    /* A successful answer's body must decode: 0 or RIO_EPROTO (a damaged
     * answer, handled like a damaged frame). NULL: any body. */
    int (*check)(const uint8_t *body, size_t len);
};

static inline bool reset_class(int err)
{
    return err == -ECONNRESET || err == -EPIPE || err == -ECONNABORTED || err == -ENOTCONN;
}

/* config.c */
unsigned rio__tcp_owner_of(const struct tcp_transport *t, const char *key, size_t klen);
int rio__tcp_rail_from_text(const struct tcp_member *m, const char *text, struct tcp_rail *r);
void rio__tcp_pair_rails_by_subnet(struct tcp_member *m);
int rio__tcp_parse_members(struct tcp_transport *t, const char *auth);
int rio__tcp_parse_rails(struct tcp_transport *t, const char *s);
int rio__tcp_parse_params(struct tcp_transport *t, const struct rio_url *u);

/* handshake.c */
int rio__tcp_sock_open(const struct tcp_transport *t, const struct tcp_rail *r, int *out);
int rio__tcp_sock_error(int fd);
ssize_t rio__tcp_io_send(int fd, struct rio__tls *tls, struct iovec *iov, int n);
ssize_t rio__tcp_io_recv(int fd, struct rio__tls *tls, void *p, size_t n);
short rio__tcp_io_wants(const struct rio__tls *tls, short plain);
void rio__tcp_tls_say(struct tcp_transport *t, const char *host, const char *why);
const char *rio__tcp_tls_name_of(const struct tcp_transport *t, const struct tcp_member *m);
int rio__tcp_plain_got_tls(struct tcp_transport *t, const struct tcp_member *m, const uint8_t *p,
                           size_t n);
void rio__tcp_frame_header(uint8_t op, uint64_t id, uint32_t body_len, uint8_t *out);
int rio__tcp_seal_contig(struct rio_proto_sess *s, uint64_t seq, uint8_t *buf, size_t ctl);
uint64_t rio__tcp_next_seq(struct rio_proto_sess *s);
size_t rio__tcp_hs_hello(uint64_t id, const uint8_t cnonce[RIO_PROTO_NONCE_LEN], uint8_t *out);
size_t rio__tcp_hs_auth(const struct tcp_transport *t, struct rio_proto_sess *sess, uint64_t id,
                        const uint8_t snonce[RIO_PROTO_NONCE_LEN],
                        const uint8_t cnonce[RIO_PROTO_NONCE_LEN], uint8_t *out);
int rio__tcp_resp_check(const struct rio_proto_hdr *h, uint8_t op, uint64_t id);
int rio__tcp_hs_on_hello(const struct tcp_transport *t, const struct rio_proto_hdr *h,
                         const uint8_t *body, struct hs_info *hi);
int rio__tcp_hs_on_auth(const struct tcp_transport *t, struct rio_proto_sess *sess,
                        const struct rio_proto_hdr *h, const uint8_t *body,
                        const uint8_t cnonce[RIO_PROTO_NONCE_LEN],
                        const uint8_t snonce[RIO_PROTO_NONCE_LEN]);
int rio__tcp_new_nonce(uint8_t nonce[RIO_PROTO_NONCE_LEN]);

/* A control request whose body is the n bytes at b, in *iov (the caller's,
 * alive until the call returns). Callers add idempotent, no_dial and check
 * where they apply. */
static inline struct ctl_req rio__tcp_body_req(uint8_t op, struct iovec *iov, void *b, int n,
                                               uint64_t resp_cap, uint32_t timeout_ms)
{
    iov->iov_base = b;
    iov->iov_len = (size_t)n;
    return (struct ctl_req){.op = op,
                            .iov = iov,
                            .niov = 1,
                            .body_len = (size_t)n,
                            .resp_cap = resp_cap,
                            .timeout_ms = timeout_ms,
                            .deadline_ns = rio__meta_deadline_ns(),
                            .cancel = rio__meta_cancel()};
}

/* control.c */
void rio__tcp_ctl_close_locked(struct tcp_member *m);
int rio__tcp_ctl_dial_locked(struct tcp_transport *t, struct tcp_member *m, struct hs_info *hi);
int rio__tcp_ctl_call_sent(struct tcp_transport *t, struct tcp_member *m, const struct ctl_req *rq,
                           struct rio_proto_hdr *h, uint8_t **body, bool *sent);
int rio__tcp_ctl_call(struct tcp_transport *t, struct tcp_member *m, const struct ctl_req *rq,
                      struct rio_proto_hdr *h, uint8_t **body);
uint64_t rio__tcp_ctl_queued(struct tcp_transport *t);
/* One request of rio__tcp_ctl_call_many and what came of it. */
struct ctl_many {
    const struct ctl_req *rq;
    struct rio_proto_hdr h;
    uint8_t *body;    /* the caller frees */
    uint64_t ctl_len; /* the answer's whole control part (h.body_len: what body holds) */
    int ret;
    bool sent;
};
int rio__tcp_ctl_call_many(struct tcp_transport *t, struct tcp_member *m, struct ctl_many *it,
                           unsigned n);

/* metadata.c */
int rio__tcp_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out);
int rio__tcp_lookup_within(struct rio_transport *tt, const char *key, uint64_t max_size,
                           struct rio_desc *out);
int rio__tcp_put_open(struct rio_transport *tt, const char *key, uint64_t size, uint64_t chunk_size,
                      void **upload);
int rio__tcp_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d);
int rio__tcp_put_expect(struct rio_transport *tt, void *upload, uint64_t gen);
bool rio__tcp_put_one(struct rio_transport *tt, const char *key, uint64_t size,
                      uint64_t chunk_size);
int rio__tcp_put_one_refused(struct tcp_transport *t, struct tcp_conn *cn);
bool rio__tcp_get_one(struct rio_transport *tt, const char *key, uint64_t cap);
int rio__tcp_get_one_refused(struct tcp_transport *t, struct tcp_conn *cn);
int rio__tcp_remove_if(struct rio_transport *tt, const char *key, uint64_t gen);
void rio__tcp_put_commit_many(struct rio_transport *tt, void **uploads, struct rio_desc **ds,
                              int *rets, unsigned n);
void rio__tcp_put_abort(struct rio_transport *tt, void *upload);
int rio__tcp_remove(struct rio_transport *tt, const char *key);

/* The hex etag of a frame (zeros or not hex: unknown) into dst[33]. */
void rio__tcp_etag_out(char *dst, const char src[RIO_PROTO_ETAG_LEN]);

/* listing.c */
int rio__tcp_list(struct rio_transport *tt, const struct rio_list_args *a,
                  struct rio_list_page *out);
int rio__tcp_exists(struct rio_transport *tt, const char *const *keys, unsigned n, uint8_t *out);

/* conn.c */
void rio__tcp_ctr_add(struct tcp_transport *t, uint64_t *field, int64_t delta);
void rio__tcp_conn_fail(struct tcp_transport *t, struct tcp_conn *cn, int err);
bool rio__tcp_rail_has_conn(const struct tcp_transport *t, const struct tcp_conn *cn);
void rio__tcp_dial_failed(struct tcp_transport *t, struct tcp_conn *cn, int err, uint64_t now);
void rio__tcp_conn_abort(struct tcp_transport *t, struct tcp_conn *cn, struct tcp_slot *victim,
                         int64_t res, uint64_t now);
int rio__tcp_conn_dial(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now);
void rio__tcp_conn_kick(struct tcp_transport *t, struct tcp_conn *cn, uint64_t now);
void rio__tcp_conn_event(struct tcp_transport *t, struct tcp_conn *cn, uint32_t ev, uint64_t now);

/* loop.c */
void rio__tcp_slot_done(struct tcp_transport *t, struct tcp_slot *s, int64_t res, bool keep_live);
int rio__tcp_reap(struct rio_transport *tt, int timeout_ms);
void rio__tcp_wake(struct rio_transport *tt);
void rio__tcp_cancel(struct rio_transport *tt, struct rio_io *io);
int rio__tcp_submit(struct rio_transport *tt, struct rio_io *io);
uint64_t rio__tcp_path_moved(struct rio_transport *tt, unsigned path);

#endif
