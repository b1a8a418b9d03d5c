/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Connections and workers. Each worker thread owns an epoll and the
 * connections the main thread hands it; nothing of a connection is touched
 * by another thread.
 *
 * A connection reads frames with a small state machine: the 32-byte header
 * is validated before anything else is read or allocated; control bodies go
 * into a fixed per-connection buffer; PUT_CHUNK data is received straight
 * into the upload's buffer at the chunk's offset, once the upload id, index
 * and length have been checked against the upload's geometry, and is then
 * verified; PUT_COMMIT's checksum list is compared as it streams in, never
 * buffered whole. Responses queue in order and leave with sendmsg over an
 * iovec: READ and LOOKUP send from the object's own memory under a
 * reference, so replacing the object never frees bytes being sent.
 *
 * Backpressure: the worker stops reading a connection at a frame boundary
 * while it has max_depth responses queued (with jobs running) or
 * max_inflight_bytes of them (with the bytes of the disk READs running,
 * whose buffers are allocated before their answers queue).
 * A watchdog tick cuts a peer whose frame (in either direction) does not
 * complete within progress_timeout + size / min_rate, and closes idle ones.
 *
 * With the disk tier a PUT_COMMIT is handed to the disk's commit threads
 * (fsync, rename, directory fsync): the frame ends at once, the connection
 * goes on reading, and the answer is queued when the commit thread hands the
 * job back through the worker's done list and eventfd. A job counts as an
 * outstanding request of its connection; a connection closed meanwhile
 * leaves it orphaned, and the worker frees it when it comes back.
 *
 * Uploads: a connection is attached to the uploads it opened or sent a
 * chunk of (up to ATT_MAX); when the last connection attached to an upload
 * closes, the upload is reclaimed at once (nobody is left to commit it).
 * A connection may have --max-uploads-per-conn uploads open.
 *
 * Admission: until a connection is through its handshake (its first request
 * answered; with a token, a successful AUTH) it is on the server's
 * handshake list, oldest first.
 * It has --handshake-timeout to get through; at most --max-handshakes are
 * on the list, and when that budget or --max-conns is full the oldest one
 * is dropped to admit a new connection (the oldest of the new one's own
 * address when that address holds a quarter of the list), so connections
 * that never speak cannot keep a client out. Failed AUTHs are throttled per client address
 * (a token bucket: --auth-failures at once, then one a second).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
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
#include "core/le.h"
#include "server/server.h"

#include "railio.h"

#define RBUF_SIZE (64u * 1024u)
/* Bulk bytes are received straight into their destination when at least
 * this much is wanted and nothing is buffered. */
#define DIRECT_MIN (16u * 1024u)
#define SCRATCH_SIZE (64u * 1024u)
/* Bytes taken from one socket per readiness event before others get a turn. */
#define READ_BUDGET (8u << 20)
/* Queued answers' control parts (heap copies: a LIST page is up to 1 MiB)
 * a connection may hold before the server stops reading it. */
#define COPIED_MAX (64u * 1024u)
#define MAX_IOV 64
#define TICK_NS (100ull * 1000000ull)
#define MAX_EVENTS 128
/* Uploads a connection is attached to at most (opened or sent chunks of). */
#define ATT_MAX 256u
/* Client addresses whose failed AUTHs are tracked. */
#define AFAIL_SLOTS 1024u
#define AFAIL_PROBE 8u

enum {
    RS_HDR,
    RS_BODY,
    RS_CHUNK_FIXED,
    RS_CHUNK_DATA,
    RS_COMMIT_FIXED,
    RS_COMMIT_LIST,
    RS_COMMIT_COND,
    RS_COMMIT_TAG,
    RS_DISCARD,
    RS_ONE_FIXED,
    RS_ONE_KEY,
};

struct resp {
    struct resp *next;
    uint8_t hdr[RIO_PROTO_HDR_LEN];
    uint8_t tag[RIO_PROTO_TAG_LEN];
    int tag_len;         /* 0: a version 1 answer (no trailer) */
    int tag_middle;      /* the tag sits between small and data (READ data) */
    const uint8_t *data; /* bulk bytes of obj (READ data, LOOKUP checksums) */
    size_t data_len;
    struct rio_srv_obj *obj;
    size_t small_len;
    size_t total, sent;
    uint8_t small[];
};

struct conn;

/* A PUT_COMMIT on the disk's commit threads (see the top of this file). */
struct cjob {
    struct rio_srv_commit base;
    struct rio_srv_worker *w;
    struct conn *c; /* NULL once the connection closed (worker thread only) */
    struct rio_list_node cnode;
    int op;
    uint64_t id;
    uint64_t t_req; /* its request complete (its service time starts) */
    int svc;        /* the request asked for its service time (RIO_PF_SVC) */
    int have_xxh;   /* READ: xxh is the stored xxh3 of exactly the range */
    uint64_t xxh;
    /* GET_ONE: the answer's control part (the descriptor's fixed fields,
     * the chunk's xxh3), sent before the bytes read */
    uint8_t one_ctl[RIO_PROTO_GET_ONE_WITH_DATA];
    uint64_t upload_id, nchunks; /* remembered as pending until it is applied */
};

struct conn {
    struct rio_list_node wnode; /* on the worker's list */
    struct conn *next;          /* the incoming list, the graveyard */
    struct conn *pnext;         /* the worker's pending list */
    struct rio_srv_worker *w;
    int fd;
    int lis;
    int dead;
    int closing; /* answer what is queued, then close */
    int rd_eof;  /* the peer closed its side */
    int lowat;   /* SO_RCVLOWAT as last set, 0: the default (1) */
    int pending; /* on the pending list */
    uint32_t ev; /* epoll mask registered */
    char peer[64];
    struct rio__tls tls; /* --tls-cert: ssl set */
    int tls_wantw;       /* TLS waits for the socket to take bytes before it reads */
    int tls_peeked;      /* the first bytes were looked at: not a plain railio frame */

    /* read side */
    uint8_t *rbuf;
    size_t rpos, rend;
    int rstate;
    uint8_t *want;
    size_t want_len, want_got;
    /* A PUT chunk's xxh3, hashed as its bytes arrive (in cache) rather
     * than in a second pass once they all have; made at the connection's
     * first chunk (NULL if that failed: one pass at the end). */
    struct rio_xxh3_stream *xs;
    uint8_t hdrbuf[RIO_PROTO_HDR_LEN];
    struct rio_proto_hdr hdr;
    int in_frame; /* bytes of a request arrived and its response is not queued */
    int req_open; /* the current request is counted in inflight_requests */
    uint64_t frame_start, frame_deadline;
    /* When the piece of the current request last read came in whole: at
     * its answer, when the request was complete (its service time starts
     * there, RIO_PF_SVC) */
    uint64_t req_ns;
    uint32_t ctl_len;  /* the current request's control part */
    int deny;          /* answer -EACCES once its frame checked out */
    int v1;            /* a version 1 HELLO: answered in version 1 framing */
    int commit_status; /* PUT_COMMIT refused before its list: answered after it */
    uint8_t ctrl[RIO_PROTO_CTRL_BODY_MAX];
    uint8_t *big; /* an EXISTS body above ctrl's size, while it is read and served */

    /* PUT_CHUNK / PUT_COMMIT in progress */
    uint64_t one_id; /* a PUT_ONE's upload while its data arrives (0: none) */
    struct rio_srv_upload *up;
    struct rio_srv_claim claim; /* while up: this connection receives chunk up_index */
    uint64_t up_index, up_xxh, up_seq;
    uint64_t commit_i, commit_n;
    int commit_missing, commit_bad;
    bool commit_cond;   /* its condition follows the list (not read yet) */
    uint64_t commit_if; /* the condition read (0: none) */
    char etag[32];
    uint64_t discard_left;
    int discard_status;
    uint64_t discard_gen; /* a retried commit already applied: its answer */

    /* PUT_COMMITs on the commit threads */
    struct rio_list jobs; /* of struct cjob, by cnode; count: commits running */
    uint64_t job_bytes;   /* the bytes of the disk READs among them */

    /* write side */
    struct resp *oh, *ot;
    unsigned nout;
    uint64_t out_bytes;
    uint64_t out_copied; /* their control parts: copies (COPIED_MAX) */
    uint64_t send_deadline;
    uint64_t last_active;

    /* uploads attached (see the top of this file) */
    uint64_t att[ATT_MAX]; /* upload ids */
    uint8_t att_opened[ATT_MAX];
    unsigned natt;

    /* admission: on the server's handshake list (admit_mu) until admitted */
    struct rio_list_node hs_node;
    int on_hs;
    int admitted;
    uint64_t born;
    uint8_t peer_ip[16];

    /* session */
    struct rio_proto_sess sess; /* frame checks; keyed after AUTH */
    int hello, authed;
    uint8_t cnonce[RIO_PROTO_NONCE_LEN], snonce[RIO_PROTO_NONCE_LEN];
};

struct rio_srv_worker {
    struct rio_srv *srv;
    pthread_t th;
    int started;
    int epfd, evfd;
    pthread_mutex_t mu;
    struct conn *incoming; /* guarded by mu */
    struct cjob *done;     /* guarded by mu: commits handed back */
    struct rio_list conns; /* of struct conn by wnode; worker thread only */
    struct conn *pending;  /* conns with buffered input to process */
    struct conn *graveyard;
    _Atomic unsigned nconns;
    uint8_t scratch[SCRATCH_SIZE];
};

static void conn_flush(struct conn *c);

static void conn_big_free(struct conn *c)
{
    rio__free(c->big);
    c->big = NULL;
}

static struct conn *conn_of(struct rio_list_node *n)
{
    return rio_list_entry(n, struct conn, wnode);
}
static void conn_read(struct conn *c);
static void cjob_start(struct conn *c, struct cjob *j);

/* ------------------------------------------------------------ admission */

static void hs_unlink_locked(struct rio_srv *srv, struct conn *c)
{
    if (!c->on_hs)
        return;
    rio_list_remove(&srv->hs, &c->hs_node);
    c->on_hs = 0;
}

static void hs_unlink(struct conn *c)
{
    struct rio_srv *srv = c->w->srv;

    pthread_mutex_lock(&srv->admit_mu);
    hs_unlink_locked(srv, c);
    pthread_mutex_unlock(&srv->admit_mu);
}

/* A peer's address as 16 bytes (IPv4 as ::ffff:a.b.c.d); zeros when
 * unknown. The whole IPv6 address, not its /64: a cluster's hosts share
 * one /64, and keyed on it one node's failed AUTHs throttled them all. */
static void peer_ip16(const struct sockaddr_storage *ss, uint8_t ip[16])
{
    memset(ip, 0, 16);
    if (ss->ss_family == AF_INET6) {
        memcpy(ip, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
    } else if (ss->ss_family == AF_INET) {
        ip[10] = ip[11] = 0xff;
        memcpy(ip + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
    }
}

/*
 * The handshake to drop for a new connection from ip (lock held): the
 * oldest of ip's own when ip already holds its share of the list (a quarter
 * of --max-handshakes), else the oldest of all. So one address that floods
 * connections only pushes out its own, never another address's client
 * halfway through HELLO and AUTH.
 */
static struct conn *hs_victim_locked(struct rio_srv *srv, const uint8_t ip[16])
{
    unsigned share = srv->cfg.max_handshakes / 4 ? srv->cfg.max_handshakes / 4 : 1, own = 0;
    struct conn *first = NULL;

    rio_list_each (c, &srv->hs, struct conn, hs_node)
        if (!memcmp(c->peer_ip, ip, 16) && !own++)
            first = c;
    return own >= share ? first : rio_list_entry(srv->hs.head, struct conn, hs_node);
}

/* Drop a connection still in its handshake (lock held): off the list, its
 * socket shut down; its worker closes it on the end of stream. */
static int hs_evict_locked(struct rio_srv *srv, struct conn *c)
{
    if (!c)
        return 0;
    hs_unlink_locked(srv, c);
    shutdown(c->fd, SHUT_RDWR);
    atomic_fetch_add(&srv->m.handshake_evictions, 1);
    SRV_INFO("connection peer=%s dropped: still in its handshake and a new one needs its slot "
             "(--max-handshakes %u, --max-conns %u)",
             c->peer, srv->cfg.max_handshakes, srv->cfg.max_conns);
    return 1;
}

int rio__srv_admit(struct rio_srv *srv, int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    uint8_t ip[16];
    int ret = 0;

    if (getpeername(fd, (struct sockaddr *)&ss, &sl) < 0)
        ss.ss_family = AF_UNSPEC;
    peer_ip16(&ss, ip);
    pthread_mutex_lock(&srv->admit_mu);
    if (srv->hs.count >= srv->cfg.max_handshakes)
        hs_evict_locked(srv, hs_victim_locked(srv, ip));
    if ((uint64_t)atomic_load(&srv->m.conns_open) >= srv->cfg.max_conns &&
        !hs_evict_locked(srv, hs_victim_locked(srv, ip)))
        ret = -1; /* every connection is through its handshake */
    pthread_mutex_unlock(&srv->admit_mu);
    return ret;
}

/* Through the handshake: off the list, no deadline any more. With a token
 * that is a successful AUTH; without, a first request answered (HELLO is
 * optional then). */
static void conn_admitted(struct conn *c)
{
    if (c->admitted || (c->w->srv->cfg.token && !c->authed))
        return;
    c->admitted = 1;
    hs_unlink(c);
}

/* Failed AUTHs per client address: a token bucket (burst, then 1/s). */
static struct {
    pthread_mutex_t mu;
    struct {
        uint8_t addr[16];
        int used;
        double tokens;
        uint64_t t;
    } e[AFAIL_SLOTS];
} afail = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* The bucket of addr (lock held), refilled to now; a new one full. */
static double *afail_bucket_locked(const uint8_t addr[16], unsigned burst, uint64_t now)
{
    unsigned h = (unsigned)(rio__xxh3(addr, 16) % AFAIL_SLOTS), pick = h;
    double *tk;

    for (unsigned k = 0; k < AFAIL_PROBE; k++) {
        unsigned i = (h + k) % AFAIL_SLOTS;
        if (afail.e[i].used && memcmp(afail.e[i].addr, addr, 16) == 0) {
            pick = i;
            goto found;
        }
        /* A free slot, else the fullest bucket (the least to forget). */
        if (!afail.e[i].used || (afail.e[pick].used && afail.e[i].tokens > afail.e[pick].tokens))
            pick = i;
    }
    memcpy(afail.e[pick].addr, addr, 16);
    afail.e[pick].used = 1;
    afail.e[pick].tokens = burst;
    afail.e[pick].t = now;
found:
    tk = &afail.e[pick].tokens;
    *tk += (double)(now - afail.e[pick].t) / 1e9;
    if (*tk > burst)
        *tk = burst;
    afail.e[pick].t = now;
    return tk;
}

/* 1 when addr has no failed AUTH left to spend (answer it unchecked). */
static int afail_throttled(const struct rio_srv *srv, const uint8_t addr[16])
{
    int ret;

    pthread_mutex_lock(&afail.mu);
    ret = *afail_bucket_locked(addr, srv->cfg.auth_fail_burst, rio__now_ns()) < 1.0;
    pthread_mutex_unlock(&afail.mu);
    return ret;
}

static void afail_spend(const struct rio_srv *srv, const uint8_t addr[16])
{
    pthread_mutex_lock(&afail.mu);
    double *tk = afail_bucket_locked(addr, srv->cfg.auth_fail_burst, rio__now_ns());
    if (*tk >= 1.0)
        *tk -= 1.0;
    pthread_mutex_unlock(&afail.mu);
}

/* --------------------------------------------------------------- uploads */

/* Forget the uploads that are gone (committed, aborted, reclaimed). */
static void conn_prune(struct conn *c)
{
    uint8_t gone[ATT_MAX];
    unsigned k = 0;

    rio__srv_uploads_gone(&c->w->srv->store, c->att, c->natt, gone);
    for (unsigned i = 0; i < c->natt; i++) {
        if (gone[i])
            continue;
        c->att[k] = c->att[i];
        c->att_opened[k++] = c->att_opened[i];
    }
    c->natt = k;
}

/* Remember that c is attached to upload id (the store counted it). */
static void conn_attach(struct conn *c, uint64_t id, int opened)
{
    c->att[c->natt] = id;
    c->att_opened[c->natt++] = (uint8_t)opened;
}

/* Attach c to u, which it sends a chunk of, when it has room (else the
 * upload lives by its other connections and its timeout). */
static void conn_attach_chunk(struct conn *c, struct rio_srv_upload *u)
{
    for (unsigned i = 0; i < c->natt; i++)
        if (c->att[i] == u->id)
            return;
    if (c->natt == ATT_MAX)
        conn_prune(c);
    if (c->natt == ATT_MAX)
        return;
    rio__srv_upload_attach(&c->w->srv->store, u);
    conn_attach(c, u->id, 0);
}

/* ---------------------------------------------------------------- utils */

static uint64_t frame_budget_ns(const struct rio_srv *srv, uint64_t bytes)
{
    uint64_t rate = srv->cfg.min_rate ? srv->cfg.min_rate : 1;
    return srv->cfg.progress_timeout_ns + bytes / rate * 1000000000ull +
           bytes % rate * 1000000000ull / rate;
}

static int conn_authorized(const struct conn *c)
{
    return c->authed || !c->w->srv->cfg.token;
}

static void conn_set_events(struct conn *c, int in, int out)
{
    uint32_t ev = 0;
    struct epoll_event e;

    if (c->dead)
        return;
    if (in && !c->rd_eof)
        ev |= EPOLLIN | EPOLLRDHUP;
    if (out || c->tls_wantw)
        ev |= EPOLLOUT;
    if (ev == c->ev)
        return;
    e.events = ev;
    e.data.ptr = c;
    if (epoll_ctl(c->w->epfd, EPOLL_CTL_MOD, c->fd, &e) == 0)
        c->ev = ev;
}

static void conn_piece(struct conn *c, int state, uint8_t *dst, size_t len)
{
    c->rstate = state;
    c->want = dst;
    c->want_len = len;
    c->want_got = 0;
}

static void conn_next_frame(struct conn *c)
{
    c->in_frame = 0;
    conn_piece(c, RS_HDR, c->hdrbuf, RIO_PROTO_HDR_LEN);
}

static void conn_kill(struct conn *c, const char *why)
{
    struct rio_srv_worker *w = c->w;
    struct rio_srv *srv = w->srv;

    if (c->dead)
        return;
    SRV_DEBUG("close peer=%s reason=%s queued=%u", c->peer, why, c->nout);
    c->dead = 1;
    epoll_ctl(w->epfd, EPOLL_CTL_DEL, c->fd, NULL);
    /* The chunk first, the socket after: another connection's claim may
     * shut this socket down while this one owns a chunk (store.c). */
    if (c->up) {
        if (c->rstate == RS_CHUNK_DATA)
            rio__srv_upload_chunk_abandon(&srv->store, c->up, c->up_index);
        else
            rio__srv_upload_unref(c->up);
        c->up = NULL;
    }
    /* Uploads nobody else uses go now. */
    for (unsigned i = 0; i < c->natt; i++)
        if (rio__srv_upload_detach(&srv->store, c->att[i]))
            atomic_fetch_add(&srv->m.uploads_closed, 1);
    c->natt = 0;
    /* Off the handshake list before the fd closes: the admission may shut
     * down a listed connection's socket (under admit_mu). */
    hs_unlink(c);
    close(c->fd);
    c->fd = -1;
    c->claim.fd = -1;
    /* Commits still running finish without us; each carried a request. */
    for (struct rio_list_node *n; (n = rio_list_pop_front(&c->jobs));) {
        rio_container_of(n, struct cjob, cnode)->c = NULL;
        atomic_fetch_sub(&srv->m.inflight_requests, 1);
    }
    c->job_bytes = 0;
    while (c->oh) {
        struct resp *r = c->oh;
        c->oh = r->next;
        atomic_fetch_sub(&srv->m.inflight_requests, 1);
        atomic_fetch_sub(&srv->m.inflight_bytes, (int64_t)r->total);
        rio__srv_obj_unref(r->obj);
        rio__free(r);
    }
    c->ot = NULL;
    c->nout = 0;
    if (c->req_open)
        atomic_fetch_sub(&srv->m.inflight_requests, 1);
    c->req_open = 0;
    atomic_fetch_sub(&srv->m.conns_open, 1);
    /* Out of the live list, into the graveyard (freed after this round of
     * events, when no pointer to it can be in use). */
    rio_list_remove(&w->conns, &c->wnode);
    c->next = w->graveyard;
    w->graveyard = c;
    atomic_fetch_sub(&w->nconns, 1);
}

/* Close with a reset: whatever the kernel still holds for this peer is
 * dropped now, not trickled out (a stalled or hostile peer). */
static void conn_abort(struct conn *c, const char *why)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};

    if (!c->dead)
        setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
    conn_kill(c, why);
}

/* Another connection claimed the chunk this one receives (store.c): drop
 * this one. 1 when it was dropped. */
static int conn_doomed(struct conn *c)
{
    if (c->dead || !c->up || !atomic_load(&c->claim.doomed))
        return 0;
    atomic_fetch_add(&c->w->srv->m.timeouts_progress, 1);
    SRV_INFO("chunk claimed again peer=%s upload=%llu index=%llu: dropping the stalled receiver",
             c->peer, (unsigned long long)c->up->id, (unsigned long long)c->up_index);
    conn_abort(c, "chunk sent again on another connection");
    return 1;
}

static void conn_free(struct conn *c)
{
    rio__tls_cleanup(&c->tls);
    rio__proto_sess_free(&c->sess);
    rio__free(c->rbuf);
    rio__xxh3_stream_free(c->xs);
    conn_big_free(c);
    rio__free(c);
}

/* A frame that cannot be parsed: the stream cannot be trusted any more. */
static void conn_reject(struct conn *c, const char *why)
{
    atomic_fetch_add(&c->w->srv->m.rejected_frames, 1);
    SRV_INFO("rejected frame peer=%s reason=%s op=%s", c->peer, why,
             rio__proto_op_name(c->hdr.opcode));
    conn_abort(c, why);
}

/* ------------------------------------------------------------ responses */

/* Whether the current request asked for its service time in its answer. */
static int conn_svc_asked(const struct conn *c)
{
    return (c->hdr.flags & RIO_PF_SVC) && !c->v1;
}

/*
 * Queue a response to request id of opcode op: status, a small body copied
 * from small, and optionally bulk bytes of obj (whose reference the response
 * takes over). counted: the request is already in inflight_requests. t_req:
 * when the request was complete; its service time (up to now, the answer
 * ready) is counted in the metrics and, when svc (the request asked), goes
 * in the header. -1 when the connection had to be closed (out of memory).
 */
static int conn_queue(struct conn *c, int op, uint64_t id, int counted, uint64_t t_req, int svc,
                      int status, const void *small, size_t small_len, struct rio_srv_obj *obj,
                      const uint8_t *data, size_t data_len)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_proto_hdr h = {0};
    struct resp *r;
    uint64_t now = rio__now_ns(); /* the service's end, the send budget's start */

    r = rio__malloc(sizeof(*r) + small_len);
    if (!r || small_len + data_len > UINT32_MAX - RIO_PROTO_TAG_LEN)
        goto err_nomem;
    h.opcode = (uint8_t)op;
    h.flags = RIO_PF_RESPONSE;
    if (t_req) {
        uint64_t svc_ns = now > t_req ? now - t_req : 0;
        rio__srv_svc_note(&srv->m, op, svc_ns);
        if (svc) {
            h.flags |= RIO_PF_SVC;
            h.svc_us = rio__proto_svc_us(svc_ns);
        }
    }
    h.id = id;
    /* The tag follows the control part: after the READ data's xxh3 and
     * before the data, else at the end (LOOKUP's list is control). */
    r->tag_len = c->v1 ? 0 : RIO_PROTO_TAG_LEN;
    r->tag_middle = (op == RIO_OP_READ || op == RIO_OP_GET_ONE) && status == 0;
    h.version = c->v1 ? RIO_PROTO_HELLO_VERSION : RIO_PROTO_VERSION;
    h.body_len = (uint32_t)(small_len + (size_t)r->tag_len + data_len);
    h.status = status;
    rio__proto_hdr_encode(&h, r->hdr);
    r->next = NULL;
    if (small_len)
        memcpy(r->small, small, small_len);
    r->small_len = small_len;
    r->obj = obj;
    r->data = data;
    r->data_len = data_len;
    r->total = RIO_PROTO_HDR_LEN + small_len + (size_t)r->tag_len + data_len;
    if (r->tag_len) {
        struct iovec parts[3] = {{r->hdr, RIO_PROTO_HDR_LEN},
                                 {r->small, small_len},
                                 {(void *)data, r->tag_middle ? 0 : data_len}};
        uint64_t seq = rio__proto_sess_keyed(&c->sess) ? c->sess.tx_seq++ : 0;
        if (rio__proto_seal(&c->sess, seq, parts, 3, r->tag) < 0)
            goto err_nomem;
    }
    r->sent = 0;
    if (c->ot)
        c->ot->next = r;
    else {
        c->oh = r;
        c->send_deadline = now + frame_budget_ns(srv, r->total);
    }
    c->ot = r;
    c->nout++;
    c->out_bytes += r->total;
    c->out_copied += small_len;
    if (!counted)
        atomic_fetch_add(&srv->m.inflight_requests, 1);
    /* The response carries the count from here. */
    atomic_fetch_add(&srv->m.inflight_bytes, (int64_t)r->total);
    atomic_fetch_add_explicit(&srv->m.req[op][rio__srv_status_class(status)], 1,
                              memory_order_relaxed);
    atomic_fetch_add_explicit(&srv->m.op_bytes_out[op], r->total, memory_order_relaxed);
    if (status < 0)
        SRV_DEBUG("answer peer=%s op=%s id=%llu status=%s", c->peer, rio__proto_op_name(op),
                  (unsigned long long)h.id, rio_errname(status));
    return 0;
err_nomem:
    rio__free(r);
    rio__srv_obj_unref(obj);
    if (counted)
        atomic_fetch_sub(&srv->m.inflight_requests, 1);
    conn_kill(c, "out of memory");
    return -1;
}

/* Queue the response to the current request (see conn_queue). Ends the
 * current frame. */
static void conn_respond(struct conn *c, int status, const void *small, size_t small_len,
                         struct rio_srv_obj *obj, const uint8_t *data, size_t data_len)
{
    int counted = c->req_open;

    c->req_open = 0;
    if (!c->admitted)
        conn_admitted(c);
    if (conn_queue(c, c->hdr.opcode, c->hdr.id, counted, c->req_ns, conn_svc_asked(c), status,
                   small, small_len, obj, data, data_len) < 0)
        return;
    conn_next_frame(c);
}

static void conn_status(struct conn *c, int status)
{
    conn_respond(c, status, NULL, 0, NULL, NULL, 0);
}

/* A body that does not decode: answer RIO_EPROTO, then close. */
static void conn_bad_body(struct conn *c)
{
    atomic_fetch_add(&c->w->srv->m.rejected_frames, 1);
    SRV_INFO("rejected frame peer=%s reason=bad body op=%s", c->peer,
             rio__proto_op_name(c->hdr.opcode));
    c->closing = 1;
    conn_status(c, RIO_EPROTO);
}

/* Read and drop n more body bytes, then answer status. */
static void conn_discard(struct conn *c, uint64_t n, int status)
{
    c->discard_status = status;
    c->discard_left = n;
    if (n == 0) {
        if (status == 0 && c->discard_gen) {
            uint8_t out[8];
            rio__le64_put(out, c->discard_gen);
            c->discard_gen = 0;
            conn_respond(c, 0, out, sizeof(out), NULL, NULL, 0);
            return;
        }
        conn_status(c, status);
        return;
    }
    conn_piece(c, RS_DISCARD, c->w->scratch, n < SCRATCH_SIZE ? (size_t)n : SCRATCH_SIZE);
}

/* ------------------------------------------------------------- requests */

static void do_hello(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_proto_hello m;
    struct rio_proto_hello_resp r = {0};
    char names[RIO_SRV_MAX_LISTENERS][RIO_PROTO_ADDR_MAX + 1];
    uint8_t out[64 + RIO_SRV_MAX_LISTENERS * (RIO_PROTO_ADDR_MAX + 2)];
    int n;

    if (rio__proto_dec_hello(body, len, &m) < 0) {
        conn_bad_body(c);
        return;
    }
    if (m.version_min > RIO_PROTO_VERSION || m.version_max < RIO_PROTO_VERSION) {
        /* An older client reads a version 1 answer: "no common version". */
        atomic_fetch_add(&srv->m.rejected_frames, 1);
        SRV_INFO("protocol version mismatch peer=%s: it speaks %u..%u, this server %u", c->peer,
                 m.version_min, m.version_max, RIO_PROTO_VERSION);
        c->v1 = 1;
        c->closing = 1;
        conn_status(c, RIO_ENOTSUP);
        return;
    }
    if (rio__proto_hello_check(c->hdrbuf, body) < 0) {
        conn_reject(c, "frame check failed");
        return;
    }
    c->v1 = 0;
    if (rio__proto_sess_keyed(&c->sess)) {
        /* A session once keyed stays keyed: no starting over unprotected. */
        conn_reject(c, "HELLO after AUTH");
        return;
    }
    memcpy(c->cnonce, m.nonce, RIO_PROTO_NONCE_LEN);
    if (getrandom(c->snonce, RIO_PROTO_NONCE_LEN, 0) != RIO_PROTO_NONCE_LEN) {
        c->closing = 1;
        conn_status(c, RIO_ESERVER);
        return;
    }
    c->hello = 1;
    c->authed = 0;
    r.version = RIO_PROTO_VERSION;
    /* The disk tier's commit threads decide a commit's condition under the
     * key's lock, just before the file is published, as a conditional
     * delete's; a PUT of unknown size gets a file laid out for the most
     * chunks it may hold. */
    r.caps = RIO_PROTO_CAP_LIST | RIO_PROTO_CAP_EXISTS | RIO_PROTO_CAP_COND_COMMIT |
             RIO_PROTO_CAP_COND_DELETE | RIO_PROTO_CAP_STREAM_PUT | RIO_PROTO_CAP_PUT_ONE |
             RIO_PROTO_CAP_GET_ONE | RIO_PROTO_CAP_SVC_TIME;
    /* Tests only: a server that takes no upload of unknown size, as
     * railiod's disk tier was (the CLI's spooling of stdin is for it). */
    if (srv->test_no_stream)
        r.caps &= ~(uint32_t)RIO_PROTO_CAP_STREAM_PUT;
    if (srv->test_no_put_one)
        r.caps &= ~(uint32_t)RIO_PROTO_CAP_PUT_ONE;
    if (srv->test_no_get_one)
        r.caps &= ~(uint32_t)RIO_PROTO_CAP_GET_ONE;
    if (srv->test_no_svc_time)
        r.caps &= ~(uint32_t)RIO_PROTO_CAP_SVC_TIME;
    r.auth_required = srv->cfg.token ? 1 : 0;
    r.max_body = srv->cfg.max_body;
    r.max_depth = srv->cfg.max_depth;
    memcpy(r.nonce, c->snonce, RIO_PROTO_NONCE_LEN);
    r.nrails = srv->nlis;
    for (unsigned i = 0; i < srv->nlis; i++) {
        const struct rio_srv_listener *l = &srv->lis[i];
        const char *name = l->name;
        if (l->wildcard) {
            /* A wildcard listener is advertised under the address this
             * connection reached, with that listener's port. */
            struct sockaddr_storage ss;
            socklen_t sl = sizeof(ss);
            if (getsockname(c->fd, (struct sockaddr *)&ss, &sl) == 0 &&
                ss.ss_family == l->addr.ss_family) {
                if (ss.ss_family == AF_INET)
                    ((struct sockaddr_in *)&ss)->sin_port =
                        ((const struct sockaddr_in *)&l->addr)->sin_port;
                else
                    ((struct sockaddr_in6 *)&ss)->sin6_port =
                        ((const struct sockaddr_in6 *)&l->addr)->sin6_port;
                rio__srv_addr_name((struct sockaddr *)&ss, names[i], sizeof(names[i]));
                name = names[i];
            }
        }
        r.rail[i] = name;
        r.rail_len[i] = (uint16_t)strlen(name);
    }
    n = rio__proto_enc_hello_resp(&r, out, sizeof(out));
    if (n < 0) {
        conn_status(c, RIO_ESERVER);
        return;
    }
    conn_respond(c, 0, out, (size_t)n, NULL, NULL, 0);
}

static void do_auth(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_proto_auth m;
    struct rio_proto_auth_resp r;
    uint8_t want[RIO_PROTO_MAC_LEN];
    struct rio_srv_key *k; /* the token in force, for every MAC of this AUTH */

    if (rio__proto_dec_auth(body, len, &m) < 0) {
        conn_bad_body(c);
        return;
    }
    if (!srv->cfg.token) {
        conn_status(c, RIO_ENOTSUP);
        return;
    }
    if (rio__proto_sess_keyed(&c->sess)) {
        /* A second AUTH would key the session again with the same nonces,
         * so the same keys, and number each direction from 0 again: every
         * frame of the session so far would be valid once more, for a
         * proxy to replay. One AUTH per connection, as one HELLO. */
        conn_reject(c, "AUTH after AUTH");
        return;
    }
    if (afail_throttled(srv, c->peer_ip)) {
        /* Too many failures from this address: not even checked (a token
         * cannot be guessed faster than the bucket refills). */
        atomic_fetch_add(&srv->m.auth_failures, 1);
        atomic_fetch_add(&srv->m.auth_throttled, 1);
        SRV_WARN("auth refused peer=%s: too many failed AUTHs from this address "
                 "(--auth-failures %u, then 1/s)",
                 c->peer, srv->cfg.auth_fail_burst);
        c->closing = 1;
        conn_status(c, RIO_ETHROTTLE);
        return;
    }
    k = rio__srv_token_get(srv->cfg.token);
    if (!c->hello ||
        rio__proto_auth_mac(k->bytes, k->len, "railio-auth-v1", c->snonce, c->cnonce, want) < 0 ||
        CRYPTO_memcmp(want, m.mac, RIO_PROTO_MAC_LEN) != 0) {
        atomic_fetch_add(&srv->m.auth_failures, 1);
        afail_spend(srv, c->peer_ip);
        SRV_WARN("auth refused peer=%s%s", c->peer, c->hello ? "" : " (no HELLO first)");
        /* One try per connection (and per server nonce). */
        c->closing = 1;
        conn_status(c, -EACCES);
        goto out_key;
    }
    if (rio__proto_auth_mac(k->bytes, k->len, "railio-server-v1", c->cnonce, c->snonce, r.mac) <
        0) {
        c->closing = 1;
        conn_status(c, RIO_ESERVER);
        goto out_key;
    }
    c->authed = 1;
    conn_admitted(c);
    SRV_DEBUG("auth ok peer=%s", c->peer);
    uint8_t out[RIO_PROTO_MAC_LEN];
    int n = rio__proto_enc_auth_resp(&r, out, sizeof(out));
    /* The answer goes with the frame check; every frame after it, in each
     * direction, with the session's MAC. */
    conn_respond(c, 0, out, (size_t)n, NULL, NULL, 0);
    if (!c->dead && rio__proto_sess_key(&c->sess, k->bytes, k->len, c->cnonce, c->snonce, 1) < 0)
        conn_kill(c, "out of memory");
out_key:
    rio__srv_key_put(k);
}

static void do_stat(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_srv_store_stats st;
    struct rio_proto_stat_resp r;
    uint8_t out[64];
    int n;

    (void)body;
    if (len != 0) { /* STAT takes no body */
        conn_bad_body(c);
        return;
    }
    rio__srv_store_stats(&srv->store, &st);
    r.objects = st.objects;
    r.bytes = st.bytes;
    if (srv->disk) {
        /* The disk holds every object; memory only caches some. */
        struct rio_srv_disk_stats ds;
        rio__srv_disk_stats(srv->disk, &ds);
        r.objects = ds.objects;
        r.bytes = ds.bytes;
    }
    r.capacity = st.capacity;
    r.uploads = st.uploads;
    r.connections = (uint64_t)atomic_load(&srv->m.conns_open);
    n = rio__proto_enc_stat_resp(&r, out, sizeof(out));
    conn_respond(c, 0, out, (size_t)n, NULL, NULL, 0);
}

/* The object under key: from memory, else (disk tier) its disk index entry
 * (data NULL, disk_entry set); referenced. NULL once RIO_ENOTFOUND is
 * answered. */
static struct rio_srv_obj *obj_get(struct conn *c, const char *key, uint16_t klen)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_srv_obj *o = rio__srv_store_get(&srv->store, key, klen, 1);

    if (!o && srv->disk)
        o = rio__srv_disk_get(srv->disk, key, klen);
    if (!o)
        conn_status(c, RIO_ENOTFOUND);
    return o;
}

/* The descriptor's fixed fields of o (d->xxh untouched: LOOKUP sends the
 * list from o's memory, GET_ONE none). */
static void obj_desc(const struct rio_srv_obj *o, struct rio_proto_desc *d)
{
    d->generation = o->generation;
    d->size = o->size;
    d->chunk_size = o->chunk_size;
    d->nchunks = o->nchunks;
    memcpy(d->etag, o->etag, RIO_PROTO_ETAG_LEN);
}

static void do_lookup(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_proto_key m;
    struct rio_srv_obj *o;
    struct rio_proto_desc d;
    uint8_t out[RIO_PROTO_DESC_FIXED];

    if (rio__proto_dec_key(body, len, &m) < 0) {
        conn_bad_body(c);
        return;
    }
    o = obj_get(c, m.key, m.key_len);
    if (!o)
        return;
    /* The fixed part here, the checksum list from the object's memory. */
    obj_desc(o, &d);
    rio__proto_enc_desc_fixed(&d, out);
    conn_respond(c, 0, out, sizeof(out), o, o->xxh, (size_t)o->nchunks * RIO_PROTO_XXH_LEN);
}

/*
 * The range [off, off + len) of o, a disk index entry whose reference this
 * takes over, is read (and verified) from its file on a READ thread, never
 * here; the answer comes back like a commit's (cjob_answer). have_xxh: xxh
 * is the range's stored xxh3. one_ctl: a GET_ONE's answer's control part
 * (its xxh3 set once the bytes are in), else NULL (a READ).
 */
static void disk_read_start(struct conn *c, struct rio_srv_obj *o, uint64_t off, uint64_t len,
                            int have_xxh, uint64_t xxh, const uint8_t *one_ctl)
{
    struct cjob *j = rio__calloc(1, sizeof(*j));
    if (!j) {
        rio__srv_obj_unref(o);
        conn_status(c, -ENOMEM);
        return;
    }
    j->base.read = 1;
    j->base.e = o;
    j->base.off = off;
    j->base.len = len;
    j->have_xxh = have_xxh;
    j->xxh = xxh;
    if (one_ctl)
        memcpy(j->one_ctl, one_ctl, sizeof(j->one_ctl));
    cjob_start(c, j);
    c->job_bytes += len; /* its buffer: backpressure (conn_should_pause) */
    rio__srv_disk_read_submit(c->w->srv->disk, &j->base);
}

static void do_read(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_proto_read m;
    struct rio_srv_obj *o;

    if (rio__proto_dec_read(body, len, &m) < 0) {
        conn_bad_body(c);
        return;
    }
    o = obj_get(c, m.key, m.key_len);
    if (!o)
        return;
    if (m.generation && m.generation != o->generation) {
        rio__srv_obj_unref(o);
        conn_status(c, RIO_EGENERATION);
        return;
    }
    if (m.off > o->size || m.len > o->size - m.off) {
        rio__srv_obj_unref(o);
        conn_status(c, RIO_EPROTO);
        return;
    }
    /* The data's xxh3 goes in the answer's checked part: the stored one
     * when the range is exactly a chunk, else hashed here. */
    uint8_t fixed[RIO_PROTO_READ_FIXED];
    int have_xxh = 0;
    if (o->xxh && o->chunk_size && m.off % o->chunk_size == 0) {
        uint64_t idx = m.off / o->chunk_size;
        uint64_t clen = o->size - m.off < o->chunk_size ? o->size - m.off : o->chunk_size;
        if (idx < o->nchunks && m.len == clen) {
            memcpy(fixed, o->xxh + RIO_PROTO_XXH_LEN * idx, RIO_PROTO_XXH_LEN);
            have_xxh = 1;
        }
    }
    if (o->disk_entry) {
        disk_read_start(c, o, m.off, m.len, have_xxh, rio__proto_u64(fixed), NULL);
        return;
    }
    if (!have_xxh)
        rio__le64_put(fixed, rio__xxh3(o->data + m.off, m.len));
    conn_respond(c, 0, fixed, sizeof(fixed), o, o->data + m.off, m.len);
}

/*
 * GET_ONE: a LOOKUP whose answer carries the object's bytes when it is one
 * chunk of at most max_len bytes (its xxh3 after the descriptor, checked
 * with it, then the bytes as a READ of that chunk sends them), else the
 * descriptor's fixed fields alone: the client then looks it up and reads
 * it the usual way. The disk tier reads the bytes on a READ thread.
 */
static void do_get_one(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_proto_get_one m;
    struct rio_proto_desc d;
    uint8_t out[RIO_PROTO_GET_ONE_WITH_DATA];

    if (srv->test_no_get_one || rio__proto_dec_get_one(body, len, &m) < 0) {
        conn_bad_body(c); /* (as a server without it, under the test knob) */
        return;
    }
    struct rio_srv_obj *o = obj_get(c, m.key, m.key_len);
    if (!o)
        return;
    obj_desc(o, &d);
    int with = o->nchunks == 1 && o->size <= m.max_len;
    if (!with) {
        rio__srv_obj_unref(o);
        rio__proto_enc_get_one_resp(&d, 0, 0, out, sizeof(out));
        conn_respond(c, 0, out, RIO_PROTO_GET_ONE_DESC, NULL, NULL, 0);
        return;
    }
    uint64_t xxh = o->xxh ? rio__proto_u64(o->xxh) : 0;
    if (o->disk_entry) {
        /* As a READ of its chunk. */
        rio__proto_enc_get_one_resp(&d, 1, xxh, out, sizeof(out));
        disk_read_start(c, o, 0, d.size, o->xxh != NULL, xxh, out);
        return;
    }
    if (!o->xxh)
        xxh = rio__xxh3(o->data, d.size);
    rio__proto_enc_get_one_resp(&d, 1, xxh, out, sizeof(out));
    conn_respond(c, 0, out, sizeof(out), o, o->data, d.size);
}

/* DELETE: from memory and, with the disk tier, from disk (durably with
 * --sync) under the key's lock, with a tombstone that every upload of the
 * key opened before it loses to (disk.c). */
static void do_delete(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_proto_delete k;

    if (rio__proto_dec_delete(body, len, &k) < 0) {
        conn_bad_body(c);
        return;
    }
    conn_status(c, srv->disk ? rio__srv_disk_delete(srv->disk, k.key, k.key_len, k.if_gen)
                             : rio__srv_store_delete(&srv->store, k.key, k.key_len, k.if_gen));
}

/* PUT_ABORT: the upload goes; nobody commits it any more. */
static void do_put_abort(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_proto_put_abort a;

    if (rio__proto_dec_put_abort(body, len, &a) < 0) {
        conn_bad_body(c);
        return;
    }
    conn_status(c, rio__srv_store_abort(&c->w->srv->store, a.upload_id));
}

/* Open an upload for c (PUT_OPEN, PUT_ONE) within the per-connection and
 * per-client limits; 0 and *id, or the status to answer. */
static int upload_open(struct conn *c, const struct rio_proto_put_open *m, uint64_t *id)
{
    struct rio_srv *srv = c->w->srv;

    conn_prune(c);
    unsigned open_here = 0;
    for (unsigned i = 0; i < c->natt; i++)
        open_here += c->att_opened[i];
    if (open_here >= srv->cfg.max_uploads_conn || c->natt == ATT_MAX) {
        SRV_INFO("put refused peer=%s: %u uploads open on this connection "
                 "(--max-uploads-per-conn %u)",
                 c->peer, open_here, srv->cfg.max_uploads_conn);
        return RIO_ETHROTTLE;
    }
    struct rio_srv_admit ad = {.max_per_client = srv->cfg.max_uploads_client};
    memcpy(ad.addr, c->peer_ip, 16);
    int ret = rio__srv_store_open(&srv->store, m, &ad, id, 1);
    if (ret == 0)
        conn_attach(c, *id, 1); /* room was checked above */
    if (ret == -ENOSPC || ret == -EFBIG)
        SRV_INFO("put refused peer=%s size=%llu status=%s", c->peer, (unsigned long long)m->size,
                 rio_errname(ret));
    return ret;
}

static void do_put_open(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_proto_put_open m;
    struct rio_proto_put_open_resp r;
    uint8_t out[8];
    int ret;

    if (rio__proto_dec_put_open(body, len, &m) < 0) {
        conn_bad_body(c);
        return;
    }
    ret = upload_open(c, &m, &r.upload_id);
    if (ret < 0) {
        conn_status(c, ret);
        return;
    }
    rio__proto_enc_put_open_resp(&r, out, sizeof(out));
    conn_respond(c, 0, out, sizeof(out), NULL, NULL, 0);
}

/* LIST: one page of the keys, from the disk index (which holds every
 * object of the disk tier) or the memory store; never an upload. */
static void do_list(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_proto_list m;
    struct rio_srv_lister l;

    if (rio__proto_dec_list(body, len, &m) < 0) {
        conn_bad_body(c);
        return;
    }
    if (rio__srv_lister_init(&l, &m) < 0) {
        conn_status(c, -ENOMEM);
        return;
    }
    if (srv->disk)
        rio__srv_disk_list(srv->disk, &l);
    else
        rio__srv_store_list(&srv->store, &l);
    conn_respond(c, 0, l.out, l.out_len, NULL, NULL, 0);
    rio__srv_lister_cleanup(&l);
}

/* EXISTS: one bit per key, from memory or the disk index. */
static void do_exists(struct conn *c, const uint8_t *body, size_t len)
{
    struct rio_srv *srv = c->w->srv;
    struct rio_proto_exists m;
    uint8_t out[4 + (RIO_PROTO_EXISTS_MAX_KEYS + 7) / 8] = {0};
    size_t off = 0;

    if (rio__proto_dec_exists(body, len, &m) < 0) {
        conn_bad_body(c);
        return;
    }
    for (uint32_t i = 0; i < m.n; i++) {
        const char *key;
        uint16_t klen;
        if (rio__proto_exists_key(&m, &off, &key, &klen) < 0)
            break; /* cannot happen: the decoder walked them all */
        struct rio_srv_obj *o = rio__srv_store_get(&srv->store, key, klen, 0);
        if (!o && srv->disk)
            o = rio__srv_disk_get(srv->disk, key, klen);
        if (o)
            out[4 + i / 8] |= (uint8_t)(1u << (i % 8));
        rio__srv_obj_unref(o);
    }
    struct rio_proto_exists_resp r = {.n = m.n, .bits = out + 4};
    uint8_t enc[sizeof(out)];
    int n = rio__proto_enc_exists_resp(&r, enc, sizeof(enc));
    conn_respond(c, 0, enc, (size_t)n, NULL, NULL, 0);
}

/* PING: the body back as it came. */
static void do_ping(struct conn *c, const uint8_t *body, size_t len)
{
    conn_respond(c, 0, body, len, NULL, NULL, 0);
}

/* The control requests, by opcode; PUT_CHUNK and PUT_COMMIT take their
 * own paths, and an opcode with no handler is a bad body. */
static void (*const ctrl_ops[RIO_OP__MAX + 1])(struct conn *, const uint8_t *, size_t) = {
    [RIO_OP_HELLO] = do_hello,   [RIO_OP_AUTH] = do_auth,         [RIO_OP_PING] = do_ping,
    [RIO_OP_STAT] = do_stat,     [RIO_OP_LOOKUP] = do_lookup,     [RIO_OP_READ] = do_read,
    [RIO_OP_DELETE] = do_delete, [RIO_OP_PUT_OPEN] = do_put_open, [RIO_OP_PUT_ABORT] = do_put_abort,
    [RIO_OP_LIST] = do_list,     [RIO_OP_EXISTS] = do_exists,     [RIO_OP_GET_ONE] = do_get_one,
};

static void do_ctrl(struct conn *c)
{
    unsigned op = c->hdr.opcode;

    if (op <= RIO_OP__MAX && ctrl_ops[op])
        ctrl_ops[op](c, c->big ? c->big : c->ctrl, c->ctl_len);
    else
        conn_bad_body(c);
}

/* ------------------------------------------------------------ PUT data */

static void one_commit(struct conn *c, int chunk_ret);

static void chunk_fixed(struct conn *c)
{
    struct rio_srv *srv = c->w->srv;
    uint64_t id = rio__proto_u64(c->ctrl + RIO_PROTO_CHUNK_OFF_ID);
    uint64_t index = rio__proto_u64(c->ctrl + RIO_PROTO_CHUNK_OFF_INDEX);
    uint64_t xxh = rio__proto_u64(c->ctrl + RIO_PROTO_CHUNK_OFF_XXH);
    uint64_t len = (uint64_t)c->hdr.body_len - RIO_PROTO_CHUNK_FIXED - RIO_PROTO_TAG_LEN;
    struct rio_srv_upload *u = NULL;
    uint8_t *dst = NULL;
    int ret;

    ret = rio__srv_upload_claim(&srv->store, id, index, len, xxh, &c->claim, &u, &dst);
    if (ret != 0) {
        conn_discard(c, len, ret == 1 ? 0 : ret);
        return;
    }
    conn_attach_chunk(c, u);
    c->up = u;
    c->up_index = index;
    c->up_xxh = xxh;
    if (!c->xs)
        c->xs = rio__xxh3_stream_new();
    if (c->xs)
        rio__xxh3_stream_reset(c->xs);
    conn_piece(c, RS_CHUNK_DATA, dst, (size_t)len);
}

static void chunk_data(struct conn *c)
{
    struct rio_srv *srv = c->w->srv;
    uint64_t h = c->xs ? rio__xxh3_stream_digest(c->xs) : rio__xxh3(c->want, c->want_len);
    int ok = h == c->up_xxh;
    struct rio_srv_upload *u = c->up;
    int ret;

    if (!ok) {
        atomic_fetch_add(&srv->m.chunk_checksum_errors, 1);
        SRV_INFO("chunk checksum mismatch peer=%s upload=%llu index=%llu", c->peer,
                 (unsigned long long)u->id, (unsigned long long)c->up_index);
    }
    c->up = NULL;
    ret = rio__srv_upload_chunk_done(&srv->store, u, c->up_index, h, ok);
    if (c->one_id) {
        one_commit(c, ret);
        return;
    }
    conn_status(c, ret);
}

/* On a commit thread: hand the job back to its worker. */
static void cjob_done(struct rio_srv_commit *base)
{
    struct cjob *j = (struct cjob *)base;
    struct rio_srv_worker *w = j->w;
    uint64_t one = 1;

    rio__srv_store_settle(&w->srv->store, j->upload_id, j->nchunks, j->base.generation,
                          j->base.status);
    pthread_mutex_lock(&w->mu);
    j->base.next = (struct rio_srv_commit *)w->done;
    w->done = j;
    pthread_mutex_unlock(&w->mu);
    if (write(w->evfd, &one, sizeof(one)) < 0)
        SRV_WARN("eventfd: %s", strerror(errno));
}

/* The current request goes on as job j (a commit or a disk READ): it
 * carries the request's count, and the connection reads on. A request
 * taken on lets the connection through its handshake as an answer would
 * (conn_respond): a disk READ may wait for buffer room (--disk-read-memory)
 * far longer than --handshake-timeout, and its answer, queued by
 * cjob_answer, admitted nothing. */
static void cjob_start(struct conn *c, struct cjob *j)
{
    if (!c->admitted)
        conn_admitted(c);
    j->base.done = cjob_done;
    j->w = c->w;
    j->c = c;
    j->op = c->hdr.opcode;
    j->id = c->hdr.id;
    j->t_req = c->req_ns;
    j->svc = conn_svc_asked(c);
    rio_list_push_front(&c->jobs, &j->cnode);
    c->req_open = 0;
    conn_next_frame(c);
}

/* Queue the answer of job j on c; 0, or -1 when c had to close. */
static int cjob_answer(struct conn *c, struct cjob *j)
{
    uint8_t out[8];

    if (j->base.read) {
        struct rio_srv_obj *b = j->base.buf;
        j->base.buf = NULL;
        if (j->base.status < 0 || !b) {
            rio__srv_obj_unref(b);
            return conn_queue(c, j->op, j->id, 1, j->t_req, j->svc,
                              j->base.status < 0 ? j->base.status : -ENOMEM, NULL, 0, NULL, NULL,
                              0);
        }
        if (!b->data) {
            rio__srv_obj_unref(b);
            return conn_queue(c, j->op, j->id, 1, j->t_req, j->svc, RIO_ESERVER, NULL, 0, NULL,
                              NULL, 0);
        }
        /* The answer's checked part: the range's xxh3 (hashed here only
         * when the range is not exactly one chunk). */
        const uint8_t *p = b->data + j->base.skip;
        uint64_t xxh = j->have_xxh ? j->xxh : rio__xxh3(p, (size_t)j->base.len);
        if (j->op == RIO_OP_GET_ONE) {
            rio__le64_put(j->one_ctl + RIO_PROTO_GET_ONE_DESC, xxh);
            return conn_queue(c, j->op, j->id, 1, j->t_req, j->svc, 0, j->one_ctl,
                              sizeof(j->one_ctl), b, p, (size_t)j->base.len);
        }
        rio__le64_put(out, xxh);
        return conn_queue(c, j->op, j->id, 1, j->t_req, j->svc, 0, out, sizeof(out), b, p,
                          (size_t)j->base.len);
    }
    rio__le64_put(out, j->base.generation);
    return conn_queue(c, j->op, j->id, 1, j->t_req, j->svc, j->base.status, out,
                      j->base.status < 0 ? 0 : sizeof(out), NULL, NULL, 0);
}

/* On the worker: answer the commits handed back. */
static void worker_commits(struct rio_srv_worker *w)
{
    struct cjob *list, *rev = NULL;

    pthread_mutex_lock(&w->mu);
    list = w->done;
    w->done = NULL;
    pthread_mutex_unlock(&w->mu);
    /* In the order they were handed back. */
    while (list) {
        struct cjob *n = (struct cjob *)list->base.next;
        list->base.next = (struct rio_srv_commit *)rev;
        rev = list;
        list = n;
    }
    while (rev) {
        struct cjob *j = rev;
        struct conn *c = j->c;
        rev = (struct cjob *)j->base.next;
        if (c) {
            rio_list_remove(&c->jobs, &j->cnode);
            if (j->base.read)
                c->job_bytes -= j->base.len;
            if (!c->dead && cjob_answer(c, j) == 0)
                conn_flush(c);
        }
        rio__srv_obj_unref(j->base.buf); /* a READ nobody is waiting for */
        rio__free(j);
    }
}

/*
 * A commit refused with ret. One that found its upload gone (RIO_ENOTFOUND)
 * may have lost it to another PUT_COMMIT of it that took effect while this
 * one was arriving: the client's retry of a commit whose answer was late,
 * on another connection. Both took the upload before either applied, so
 * this one is answered as a retry that came after the other (commits.c):
 * its generation, or RIO_ETHROTTLE while the disk tier applies it; never
 * "not written" for an object that was.
 */
static void commit_refused(struct conn *c, uint64_t id, int ret)
{
    uint64_t gen = 0;
    uint8_t out[8];

    if (ret == RIO_ENOTFOUND)
        ret = rio__srv_store_recall(&c->w->srv->store, id, c->commit_n, &gen);
    if (ret == 0 && gen) {
        rio__le64_put(out, gen);
        conn_respond(c, 0, out, sizeof(out), NULL, NULL, 0);
        return;
    }
    conn_status(c, ret == 0 ? RIO_ENOTFOUND : ret);
}

static void commit_finish(struct conn *c)
{
    struct rio_srv *srv = c->w->srv;
    uint64_t gen = 0, id = c->up->id;
    uint8_t out[8];
    int ret;

    ret = rio__srv_upload_finalize(&srv->store, c->up, c->commit_n);
    if (ret < 0) {
        rio__srv_upload_unref(c->up);
        c->up = NULL;
        commit_refused(c, id, ret);
        return;
    }
    if (srv->disk) {
        /* Disk tier: the object becomes visible, and the commit is answered,
         * only once its file is complete (and with --sync durable). That
         * runs on a commit thread; the connection reads on meanwhile. */
        struct rio_srv_obj *o = NULL;
        struct rio_srv_dfile *df = NULL;
        struct cjob *j = rio__calloc(1, sizeof(*j));
        if (j) {
            j->upload_id = c->up->id;
            j->nchunks = c->up->nchunks;
        }
        ret = j ? rio__srv_store_commit_take(&srv->store, c->up, c->up_seq, c->etag,
                                             c->commit_missing, c->commit_bad, 0, &o, &df)
                : -ENOMEM;
        rio__srv_upload_unref(c->up);
        c->up = NULL;
        if (ret < 0) {
            rio__free(j);
            commit_refused(c, id, ret);
            return;
        }
        j->base.o = o;
        j->base.df = df;
        j->base.if_gen = c->commit_if; /* decided by the commit thread */
        cjob_start(c, j);
        rio__srv_disk_submit(srv->disk, &j->base);
        return;
    } else {
        ret = rio__srv_store_commit(&srv->store, c->up, c->up_seq, c->etag, c->commit_missing,
                                    c->commit_bad, c->commit_if, &gen);
        rio__srv_upload_unref(c->up);
        c->up = NULL;
    }
    if (ret < 0) {
        commit_refused(c, id, ret);
        return;
    }
    rio__le64_put(out, gen);
    conn_respond(c, 0, out, sizeof(out), NULL, NULL, 0);
}

static void commit_next_batch(struct conn *c)
{
    uint64_t left = c->commit_n - c->commit_i;
    size_t n = left * RIO_PROTO_XXH_LEN < RIO_PROTO_CTRL_MAX ? (size_t)left * RIO_PROTO_XXH_LEN
                                                             : RIO_PROTO_CTRL_MAX;
    if (n == 0 && c->commit_cond)
        conn_piece(c, RS_COMMIT_COND, c->ctrl, 8);
    else if (n == 0)
        conn_piece(c, RS_COMMIT_TAG, c->ctrl, RIO_PROTO_TAG_LEN);
    else
        conn_piece(c, RS_COMMIT_LIST, c->ctrl, n);
}

static void commit_fixed(struct conn *c)
{
    struct rio_srv *srv = c->w->srv;
    uint64_t id = rio__proto_u64(c->ctrl + RIO_PROTO_COMMIT_OFF_ID);
    uint64_t n = rio__proto_u64(c->ctrl + RIO_PROTO_COMMIT_OFF_NCHUNKS);
    uint64_t list = (uint64_t)c->ctl_len - RIO_PROTO_COMMIT_FIXED;
    struct rio_srv_upload *u;
    uint64_t seq = 0;

    /* The list, and a condition after it where the body is one entry
     * longer (offered in HELLO). */
    c->commit_cond = false;
    c->commit_if = 0;
    if (list / RIO_PROTO_XXH_LEN != n) {
        if (list < RIO_PROTO_XXH_LEN || list / RIO_PROTO_XXH_LEN - 1 != n) {
            conn_reject(c, "commit list length");
            return;
        }
        c->commit_cond = true;
    }
    rio__proto_rx_update(&c->sess, c->ctrl, RIO_PROTO_COMMIT_FIXED);
    /* Nothing takes effect before the frame's tag checked out: a refusal
     * is answered after the list and the tag too. */
    c->commit_status = 0;
    u = rio__srv_upload_get(&srv->store, id, &seq);
    if (!u) {
        /* A commit sent again after its answer was lost: the generation
         * the upload became, if it did (commits.c); answered once the
         * frame's tag checked out. */
        uint64_t gen = 0;
        int ret = rio__srv_store_recall(&srv->store, id, n, &gen);
        if (ret == 0)
            c->discard_gen = gen;
        c->commit_status = ret == 0 && !gen ? RIO_ENOTFOUND : ret;
    } else if (n != u->nchunks && !(u->unknown && n <= u->nchunks)) {
        /* (An upload of unknown size learns its count here: at most its
         * bound, checked against its chunks once the frame checked out.) */
        rio__srv_upload_unref(u);
        u = NULL;
        c->commit_status = RIO_EPROTO;
    }
    c->up = u;
    c->up_seq = seq;
    c->commit_i = 0;
    c->commit_n = n;
    c->commit_missing = c->commit_bad = 0;
    memcpy(c->etag, c->ctrl + RIO_PROTO_COMMIT_OFF_ETAG, RIO_PROTO_ETAG_LEN);
    commit_next_batch(c);
}

static void commit_list(struct conn *c)
{
    uint64_t cnt = c->want_len / RIO_PROTO_XXH_LEN;

    rio__proto_rx_update(&c->sess, c->ctrl, c->want_len);
    if (c->up)
        rio__srv_upload_compare(&c->w->srv->store, c->up, c->commit_i, cnt, c->ctrl,
                                &c->commit_missing, &c->commit_bad);
    c->commit_i += cnt;
    commit_next_batch(c);
}

/* The condition after the list: a generation, or RIO_PROTO_IF_ABSENT. */
static void commit_cond(struct conn *c)
{
    rio__proto_rx_update(&c->sess, c->ctrl, 8);
    c->commit_cond = false;
    c->commit_if = rio__proto_u64(c->ctrl);
    if (!c->commit_if) {
        conn_reject(c, "PUT_COMMIT condition 0");
        return;
    }
    conn_piece(c, RS_COMMIT_TAG, c->ctrl, RIO_PROTO_TAG_LEN);
}

static void commit_tag(struct conn *c)
{
    if (rio__proto_rx_end(&c->sess, c->ctrl) < 0) {
        conn_reject(c, "frame check failed");
        return;
    }
    if (!c->up) {
        /* Refused, or a retried commit already applied (conn_discard
         * answers its generation). */
        conn_discard(c, 0, c->commit_status);
        return;
    }
    commit_finish(c);
}

/* ------------------------------------------------------------- PUT_ONE */

/*
 * PUT_ONE: an upload of one chunk opened, sent and committed in one frame,
 * as PUT_OPEN, PUT_CHUNK and PUT_COMMIT would (the same limits, the same
 * data path straight into the upload's memory, the same commit, on the
 * disk's commit threads with the disk tier). Its fixed part first (the
 * key's length), then the key and the tag: the frame is checked before an
 * upload is opened or a byte of data taken.
 */
static void one_fixed(struct conn *c)
{
    uint16_t klen;

    if (rio__proto_put_one_key_len(c->ctrl, &klen) < 0 ||
        (uint64_t)RIO_PROTO_ONE_FIXED + klen + RIO_PROTO_TAG_LEN >= c->hdr.body_len) {
        conn_reject(c, "PUT_ONE key length");
        return;
    }
    c->ctl_len = RIO_PROTO_ONE_FIXED + klen;
    conn_piece(c, RS_ONE_KEY, c->ctrl + RIO_PROTO_ONE_FIXED, (size_t)klen + RIO_PROTO_TAG_LEN);
}

static void one_key(struct conn *c)
{
    struct rio_srv *srv = c->w->srv;
    uint64_t len = (uint64_t)c->hdr.body_len - c->ctl_len - RIO_PROTO_TAG_LEN;
    struct rio_proto_put_one m;
    struct rio_srv_upload *u = NULL;
    uint8_t *dst = NULL;
    uint64_t id = 0;
    int ret;

    if (rio__proto_rx_check(&c->sess, c->hdrbuf, c->ctrl, c->ctl_len, c->ctrl + c->ctl_len) < 0) {
        conn_reject(c, "frame check failed");
        return;
    }
    if (rio__proto_dec_put_one(c->ctrl, c->ctl_len, len, &m) < 0) {
        conn_reject(c, "PUT_ONE fields");
        return;
    }
    struct rio_proto_put_open o = {.size = len,
                                   .chunk_size = m.chunk_size,
                                   .ttl_ms = m.ttl_ms,
                                   .key = m.key,
                                   .key_len = m.key_len};
    ret = upload_open(c, &o, &id);
    if (ret == 0) {
        ret = rio__srv_upload_claim(&srv->store, id, 0, len, m.xxh, &c->claim, &u, &dst);
        if (ret != 0) {
            rio__srv_store_abort(&srv->store, id);
            ret = ret == 1 ? RIO_ESERVER : ret; /* a fresh upload has no chunk yet */
        }
    }
    if (ret < 0) {
        conn_discard(c, len, ret);
        return;
    }
    conn_attach_chunk(c, u);
    memcpy(c->etag, m.etag, RIO_PROTO_ETAG_LEN);
    c->one_id = id;
    c->up = u;
    c->up_index = 0;
    c->up_xxh = m.xxh;
    if (!c->xs)
        c->xs = rio__xxh3_stream_new();
    if (c->xs)
        rio__xxh3_stream_reset(c->xs);
    conn_piece(c, RS_CHUNK_DATA, dst, (size_t)len);
}

/* The data arrived (chunk_ret: the chunk's outcome, checksum included):
 * commit the upload as a PUT_COMMIT of its one checksum, or drop it. */
static void one_commit(struct conn *c, int chunk_ret)
{
    struct rio_srv *srv = c->w->srv;
    uint64_t id = c->one_id, seq = 0;
    uint8_t xxh[RIO_PROTO_XXH_LEN];

    c->one_id = 0;
    struct rio_srv_upload *u = chunk_ret == 0 ? rio__srv_upload_get(&srv->store, id, &seq) : NULL;
    if (!u) {
        rio__srv_store_abort(&srv->store, id);
        conn_status(c, chunk_ret < 0 ? chunk_ret : RIO_ENOTFOUND);
        return;
    }
    c->up = u;
    c->up_seq = seq;
    c->commit_i = c->commit_n = 1;
    c->commit_missing = c->commit_bad = 0;
    c->commit_cond = false;
    c->commit_if = 0;
    rio__le64_put(xxh, c->up_xxh);
    rio__srv_upload_compare(&srv->store, u, 0, 1, xxh, &c->commit_missing, &c->commit_bad);
    commit_finish(c);
}

/* ---------------------------------------------------------------- frames */

static void header_done(struct conn *c)
{
    struct rio_srv *srv = c->w->srv;
    uint32_t blen, data = 0;
    int op, ret;

    ret = rio__proto_hdr_decode(c->hdrbuf, srv->cfg.max_body, &c->hdr);
    c->v1 = 0;
    if (ret == RIO_EVERSION && c->hdr.version == RIO_PROTO_HELLO_VERSION &&
        c->hdr.opcode == RIO_OP_HELLO && !(c->hdr.flags & RIO_PF_RESPONSE) &&
        c->hdr.body_len == 24 && c->hdr.status == 0) {
        /* The HELLO request, in version 1 framing whatever the client
         * speaks: its body says which (do_hello). */
        c->v1 = 1;
        ret = 0;
    }
    if (ret == RIO_EVERSION) {
        atomic_fetch_add(&srv->m.rejected_frames, 1);
        SRV_INFO("protocol version mismatch peer=%s: a frame of version %u, this server speaks %u",
                 c->peer, c->hdr.version, RIO_PROTO_VERSION);
        conn_abort(c, "protocol version");
        return;
    }
    if (ret < 0) {
        conn_reject(c, "bad header");
        return;
    }
    if (c->hdr.flags & RIO_PF_RESPONSE) {
        conn_reject(c, "response flag on a request");
        return;
    }
    if ((c->hdr.flags & RIO_PF_SVC) && srv->test_no_svc_time) {
        conn_reject(c, "bad header"); /* as a server without service times */
        return;
    }
    op = c->hdr.opcode;
    blen = c->hdr.body_len;
    c->deny = 0;
    if (c->v1) {
        c->ctl_len = blen;
    } else if (rio__proto_layout(&c->hdr, &c->ctl_len, &data) < 0) {
        conn_reject(c, "body too short for its tag");
        return;
    }
    c->req_open = 1;
    atomic_fetch_add(&srv->m.inflight_requests, 1);
    atomic_fetch_add_explicit(&srv->m.op_bytes_in[op], RIO_PROTO_HDR_LEN + (uint64_t)blen,
                              memory_order_relaxed);
    c->frame_deadline = c->frame_start + frame_budget_ns(srv, blen);

    if (!conn_authorized(c) && op != RIO_OP_HELLO && op != RIO_OP_AUTH && op != RIO_OP_PING) {
        /* Before AUTH a peer gets no large body read for it; a small one is
         * read and checked, then refused. */
        if (blen > RIO_PROTO_CTRL_BODY_MAX) {
            conn_reject(c, "large body before authentication");
            return;
        }
        c->deny = 1;
        conn_piece(c, RS_BODY, c->ctrl, blen);
        return;
    }
    switch (op) {
    case RIO_OP_PUT_CHUNK:
        /* The fixed fields and the tag: checked before any data is taken. */
        conn_piece(c, RS_CHUNK_FIXED, c->ctrl, RIO_PROTO_CHUNK_FIXED + RIO_PROTO_TAG_LEN);
        return;
    case RIO_OP_PUT_ONE:
        if (srv->test_no_put_one) {
            conn_reject(c, "bad header"); /* as a server without it */
            return;
        }
        conn_piece(c, RS_ONE_FIXED, c->ctrl, RIO_PROTO_ONE_FIXED);
        return;
    case RIO_OP_PUT_COMMIT:
        if (c->ctl_len < RIO_PROTO_COMMIT_FIXED ||
            (c->ctl_len - RIO_PROTO_COMMIT_FIXED) % RIO_PROTO_XXH_LEN != 0) {
            conn_reject(c, "PUT_COMMIT length");
            return;
        }
        /* Its list streams: the check is fed piece by piece. */
        if (rio__proto_rx_begin(&c->sess, c->hdrbuf) < 0) {
            conn_kill(c, "out of memory");
            return;
        }
        conn_piece(c, RS_COMMIT_FIXED, c->ctrl, RIO_PROTO_COMMIT_FIXED);
        return;
    case RIO_OP_EXISTS:
        if (blen > RIO_PROTO_CTRL_BODY_MAX) {
            /* The one control body that may be larger: its keys, bounded,
             * in a buffer held only while the request is read and served. */
            if (blen > RIO_PROTO_EXISTS_MAX + RIO_PROTO_TAG_LEN) {
                conn_reject(c, "EXISTS body too long");
                return;
            }
            c->big = rio__malloc(blen);
            if (!c->big) {
                conn_kill(c, "out of memory");
                return;
            }
            conn_piece(c, RS_BODY, c->big, blen);
            return;
        }
        conn_piece(c, RS_BODY, c->ctrl, blen);
        return;
    default:
        if (blen > RIO_PROTO_CTRL_BODY_MAX) {
            conn_reject(c, "control body too long");
            return;
        }
        conn_piece(c, RS_BODY, c->ctrl, blen);
        return;
    }
}

/* A control body (or a refused request's body) arrived whole: check its
 * tag, then serve it. */
static void body_done(struct conn *c)
{
    const uint8_t *b = c->big ? c->big : c->ctrl;

    if (!c->v1 && rio__proto_rx_check(&c->sess, c->hdrbuf, b, c->ctl_len, b + c->ctl_len) < 0) {
        conn_big_free(c);
        conn_reject(c, "frame check failed");
        return;
    }
    if (c->deny)
        conn_status(c, -EACCES);
    else
        do_ctrl(c);
    conn_big_free(c);
}

static void chunk_fixed_tag(struct conn *c)
{
    if (rio__proto_rx_check(&c->sess, c->hdrbuf, c->ctrl, RIO_PROTO_CHUNK_FIXED,
                            c->ctrl + RIO_PROTO_CHUNK_FIXED) < 0) {
        conn_reject(c, "frame check failed");
        return;
    }
    chunk_fixed(c);
}

/* The piece being read is complete. */
static void conn_step(struct conn *c)
{
    c->req_ns = rio__now_ns();
    switch (c->rstate) {
    case RS_HDR:
        header_done(c);
        return;
    case RS_BODY:
        body_done(c);
        return;
    case RS_CHUNK_FIXED:
        chunk_fixed_tag(c);
        return;
    case RS_CHUNK_DATA:
        chunk_data(c);
        return;
    case RS_COMMIT_FIXED:
        commit_fixed(c);
        return;
    case RS_COMMIT_LIST:
        commit_list(c);
        return;
    case RS_COMMIT_COND:
        commit_cond(c);
        return;
    case RS_COMMIT_TAG:
        commit_tag(c);
        return;
    case RS_ONE_FIXED:
        one_fixed(c);
        return;
    case RS_ONE_KEY:
        one_key(c);
        return;
    case RS_DISCARD:
        c->discard_left -= c->want_len;
        conn_discard(c, c->discard_left, c->discard_status);
        return;
    }
}

/*
 * A client without TLS sends a railio frame first ("RIO1"): it gets a TLS
 * alert it can name (protocol_version, in the clear), once its bytes are
 * read so that the close does not reset the connection before the alert
 * arrives. 1 to go on with TLS, 0 to wait for bytes, or an error.
 */
static ssize_t conn_tls_plain_peer(struct conn *c)
{
    static const uint8_t magic[4] = {'R', 'I', 'O', '1'};
    static const uint8_t alert[7] = {21, 3, 3, 0, 2, 2, 70};
    uint8_t b[4];
    ssize_t r = recv(c->fd, b, sizeof(b), MSG_PEEK | MSG_DONTWAIT);

    if (r == 0)
        return RIO_ECLOSED;
    if (r < 0)
        return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
    if (memcmp(b, magic, (size_t)r) != 0) {
        c->tls_peeked = 1;
        return 1;
    }
    if (r < 4)
        return 0;
    while (recv(c->fd, c->rbuf, RBUF_SIZE, MSG_DONTWAIT) > 0)
        ;
    (void)send(c->fd, alert, sizeof(alert), MSG_NOSIGNAL | MSG_DONTWAIT);
    SRV_INFO("plain railio client on a TLS listener peer=%s: closing (the client needs tls=on)",
             c->peer);
    return RIO_ETLS;
}

/*
 * TLS: finish the handshake, then read. Returns as conn_take; a failed
 * handshake (a client without TLS, a broken one) is RIO_ETLS, a damaged
 * record -EPROTO.
 */
static ssize_t conn_tls_recv(struct conn *c, uint8_t *dst, size_t n)
{
    ssize_t r;

    c->tls_wantw = 0;
    if (!c->tls_peeked) {
        r = conn_tls_plain_peer(c);
        if (r <= 0)
            return r;
    }
    if (!c->tls.done) {
        char why[256];
        r = rio__tls_handshake(&c->tls, why, sizeof(why));
        if (r == RIO_ETLS || r == RIO_ETLSVERIFY) {
            /* A plain client was caught before (conn_tls_plain_peer): this
             * one speaks TLS. An alert about the certificate is its
             * refusal of ours ("a client without tls=on?" misled). */
            bool cert = strstr(why, "unknown ca") || strstr(why, "certificate");
            SRV_INFO("TLS handshake failed peer=%s: %s%s", c->peer, why,
                     cert ? " (the client does not trust this server's certificate: its tls_ca= "
                            "must name the CA that signed it)"
                          : "");
            return r;
        }
        if (r < 0 && r != -EAGAIN)
            return r;
        if (r == -EAGAIN) {
            c->tls_wantw = c->tls.want == RIO_TLS_WANT_WRITE;
            conn_set_events(c, 1, c->oh != NULL);
            return 0;
        }
    }
    r = rio__tls_read(&c->tls, dst, n);
    if (r == -EAGAIN) {
        if (c->tls.want == RIO_TLS_WANT_WRITE) {
            c->tls_wantw = 1;
            conn_set_events(c, 1, c->oh != NULL);
        }
        return 0;
    }
    if (r == -EPROTO)
        SRV_INFO("TLS record failed its check peer=%s: closing", c->peer);
    if (r == 0)
        return RIO_ECLOSED;
    return r;
}

/*
 * Take up to want bytes into dst: from the read buffer first, else from the
 * socket (straight into dst for large wants). Returns the count, 0 when the
 * socket has nothing now, RIO_ECLOSED at end of stream or -errno.
 */
static ssize_t conn_take(struct conn *c, uint8_t *dst, size_t want)
{
    struct rio_srv *srv = c->w->srv;
    size_t avail = c->rend - c->rpos;
    ssize_t r;

    if (avail) {
        size_t n = avail < want ? avail : want;
        memcpy(dst, c->rbuf + c->rpos, n);
        c->rpos += n;
        return (ssize_t)n;
    }
    if (c->tls.ssl) {
        r = conn_tls_recv(c, want >= DIRECT_MIN ? dst : c->rbuf,
                          want >= DIRECT_MIN ? want : RBUF_SIZE);
        if (r <= 0)
            return r;
    } else {
        if (want >= DIRECT_MIN)
            r = recv(c->fd, dst, want, 0);
        else
            r = recv(c->fd, c->rbuf, RBUF_SIZE, 0);
        if (r < 0)
            return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? 0 : -errno;
        if (r == 0)
            return RIO_ECLOSED;
    }
    atomic_fetch_add_explicit(&srv->m.listener_in[c->lis], (uint64_t)r, memory_order_relaxed);
    c->last_active = rio__now_ns();
    if (want >= DIRECT_MIN)
        return r;
    c->rpos = 0;
    c->rend = (size_t)r;
    return conn_take(c, dst, want);
}

static int conn_should_pause(const struct conn *c)
{
    const struct rio_srv *srv = c->w->srv;

    if (c->closing || c->rd_eof || atomic_load(&srv->draining))
        return 1;
    if (c->nout + c->jobs.count >= srv->cfg.max_depth)
        return 1;
    /* Disk READs hold their buffers from the moment they are read, not
     * from when their answers queue: a peer that pipelines READs and never
     * reads the answers held 64 x 1 GiB of them (at least one thing
     * outstanding is always let through). Answers built on the heap count
     * apart: 64 pipelined LISTs whose pages nobody read held 64 MiB a
     * connection, far below --max-inflight-bytes (20 such peers took a
     * server of --memory 16M to 1.2 GiB resident). */
    if (c->nout && c->out_copied >= COPIED_MAX)
        return 1;
    return (c->nout || c->jobs.count) && c->out_bytes + c->job_bytes >= srv->cfg.max_inflight_bytes;
}

/*
 * Before the worker waits on c again: the receive low-water mark for the
 * large body now arriving straight into its buffer (rio__proto_rcvlowat),
 * whatever ended the read (no data, the budget, a pause at a frame's end,
 * where the header is owed and the mark is the default). Not with TLS, nor
 * with bytes in the read buffer. A peer that stalls in the middle of a
 * body is cut by its frame deadline, as before.
 */
static void conn_lowat(struct conn *c)
{
    size_t owed = c->want_len - c->want_got;
    rio__proto_rcvlowat(c->fd, &c->lowat, !c->tls.ssl && c->rpos == c->rend ? owed : 0);
}

static void conn_read(struct conn *c)
{
    size_t budget = READ_BUDGET;

    if (conn_doomed(c))
        return;
    while (!c->dead) {
        if (!c->in_frame && c->want_got == 0 && conn_should_pause(c)) {
            conn_set_events(c, 0, c->oh != NULL);
            break;
        }
        ssize_t n = conn_take(c, c->want + c->want_got, c->want_len - c->want_got);
        if (n == 0)
            break;
        if (n < 0) {
            if (n == RIO_ECLOSED && !c->in_frame) {
                /* A clean end: answer what is queued, then close. */
                c->rd_eof = 1;
                conn_set_events(c, 0, c->oh != NULL);
                if (!c->oh && !c->jobs.count)
                    conn_kill(c, "peer closed");
                return;
            }
            if (c->in_frame) {
                atomic_fetch_add(&c->w->srv->m.rejected_frames, 1);
                SRV_INFO("truncated frame peer=%s op=%s got=%zu/%zu: %s", c->peer,
                         c->rstate == RS_HDR ? "?" : rio__proto_op_name(c->hdr.opcode), c->want_got,
                         c->want_len, rio_strerror((int)n));
            }
            conn_kill(c, "read failed");
            return;
        }
        if (!c->in_frame) {
            c->in_frame = 1;
            c->frame_start = rio__now_ns();
            c->frame_deadline = c->frame_start + c->w->srv->cfg.progress_timeout_ns;
        }
        if (c->xs && c->rstate == RS_CHUNK_DATA)
            rio__xxh3_stream_update(c->xs, c->want + c->want_got, (size_t)n);
        c->want_got += (size_t)n;
        if (c->want_got == c->want_len)
            conn_step(c);
        if ((size_t)n >= budget) {
            if (c->rpos == c->rend)
                break; /* more later: epoll is level-triggered */
            budget = 0;
        } else {
            budget -= (size_t)n;
        }
    }
    if (!c->dead) {
        conn_lowat(c);
        conn_flush(c);
    }
}

/* ---------------------------------------------------------------- writes */

static void conn_done_closing(struct conn *c)
{
    if (c->oh || c->jobs.count || c->dead)
        return;
    if (c->closing)
        conn_kill(c, "closed after error");
    else if (c->rd_eof)
        conn_kill(c, "peer closed");
    else if (atomic_load(&c->w->srv->draining) && !c->in_frame)
        conn_kill(c, "drained");
}

/* TLS: send the record it kept. 0 when none is left, 1 when the socket is
 * full (EPOLLOUT armed), -1 when the connection died. */
static int conn_tls_flush(struct conn *c)
{
    if (!c->tls.ssl || !rio__tls_has_pending_out(&c->tls))
        return 0;
    int r = rio__tls_flush(&c->tls);
    if (r == -EAGAIN) {
        conn_set_events(c, !conn_should_pause(c), 1);
        return 1;
    }
    if (r < 0) {
        SRV_DEBUG("send failed peer=%s: %s", c->peer, strerror(-r));
        conn_kill(c, "send failed");
        return -1;
    }
    return 0;
}

static void conn_flush(struct conn *c)
{
    struct rio_srv *srv = c->w->srv;

    if (conn_tls_flush(c) != 0)
        return;
    while (c->oh && !c->dead) {
        struct iovec iov[MAX_IOV];
        struct msghdr mh = {0};
        int n = 0;
        ssize_t w;

        for (struct resp *r = c->oh; r && n <= MAX_IOV - 5; r = r->next) {
            size_t off = r == c->oh ? r->sent : 0;
            size_t mid = r->tag_middle ? (size_t)r->tag_len : 0;
            const uint8_t *p[5] = {r->hdr, r->small, r->tag, r->data, r->tag};
            size_t l[5] = {RIO_PROTO_HDR_LEN, r->small_len, mid, r->data_len,
                           (size_t)r->tag_len - mid};
            for (int k = 0; k < 5; k++) {
                if (off >= l[k]) {
                    off -= l[k];
                    continue;
                }
                iov[n].iov_base = (void *)(p[k] + off);
                iov[n].iov_len = l[k] - off;
                n++;
                off = 0;
            }
        }
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)n;
        if (c->tls.ssl) {
            w = rio__tls_writev(&c->tls, iov, n);
            if (w < 0) {
                errno = (int)-w;
                w = -1;
            }
        } else {
            w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                conn_set_events(c, !conn_should_pause(c), 1);
                return;
            }
            SRV_DEBUG("send failed peer=%s: %s", c->peer, strerror(errno));
            conn_kill(c, "send failed");
            return;
        }
        atomic_fetch_add_explicit(&srv->m.listener_out[c->lis], (uint64_t)w, memory_order_relaxed);
        uint64_t now = rio__now_ns();
        c->last_active = now;
        size_t left = (size_t)w;
        while (left && c->oh) {
            struct resp *r = c->oh;
            size_t rem = r->total - r->sent;
            if (left < rem) {
                r->sent += left;
                break;
            }
            left -= rem;
            c->oh = r->next;
            if (!c->oh)
                c->ot = NULL;
            c->nout--;
            c->out_bytes -= r->total;
            c->out_copied -= r->small_len;
            atomic_fetch_sub(&srv->m.inflight_requests, 1);
            atomic_fetch_sub(&srv->m.inflight_bytes, (int64_t)r->total);
            rio__srv_obj_unref(r->obj);
            rio__free(r);
            if (c->oh)
                c->send_deadline = now + frame_budget_ns(srv, c->oh->total);
        }
    }
    if (c->dead || conn_tls_flush(c) != 0)
        return;
    conn_done_closing(c);
    if (c->dead)
        return;
    int in = !conn_should_pause(c);
    conn_set_events(c, in, 0);
    /* Requests already buffered (here or in TLS) get no readiness event of their own. */
    if (in && (c->rpos < c->rend || (c->tls.ssl && rio__tls_pending_in(&c->tls))) && !c->pending) {
        c->pending = 1;
        c->pnext = c->w->pending;
        c->w->pending = c;
    }
}

static void conn_event(struct conn *c, uint32_t ev)
{
    if (ev & EPOLLERR) {
        conn_kill(c, "socket error");
        return;
    }
    if (ev & EPOLLOUT)
        conn_flush(c);
    if (c->dead)
        return;
    if ((ev & (EPOLLIN | EPOLLRDHUP)) || ((ev & EPOLLOUT) && c->tls_wantw)) {
        conn_read(c);
    } else if (ev & EPOLLHUP) {
        conn_kill(c, "hang-up");
    }
}

/* --------------------------------------------------------------- workers */

static void worker_adopt(struct rio_srv_worker *w)
{
    struct conn *list, *c, *n;

    pthread_mutex_lock(&w->mu);
    list = w->incoming;
    w->incoming = NULL;
    pthread_mutex_unlock(&w->mu);
    for (c = list; c; c = n) {
        struct epoll_event e = {.events = EPOLLIN | EPOLLRDHUP, .data.ptr = c};
        n = c->next;
        c->w = w;
        rio_list_push_front(&w->conns, &c->wnode);
        c->ev = e.events;
        c->last_active = rio__now_ns();
        conn_next_frame(c);
        if (epoll_ctl(w->epfd, EPOLL_CTL_ADD, c->fd, &e) < 0) {
            SRV_WARN("epoll_ctl: %s", strerror(errno));
            c->ev = 0;
            conn_kill(c, "epoll");
        }
    }
}

static void worker_tick(struct rio_srv_worker *w, uint64_t now)
{
    struct rio_srv *srv = w->srv;
    int draining = atomic_load(&srv->draining);

    for (struct conn *c = conn_of(w->conns.head), *n; c; c = n) {
        n = conn_of(c->wnode.next);
        if (conn_doomed(c)) {
            continue;
        } else if (!c->admitted && srv->cfg.handshake_timeout_ns &&
                   now - c->born > srv->cfg.handshake_timeout_ns) {
            atomic_fetch_add(&srv->m.handshake_timeouts, 1);
            SRV_INFO("handshake timeout peer=%s: %s within %llu ms (--handshake-timeout)", c->peer,
                     srv->cfg.token ? "no successful AUTH" : "no request",
                     (unsigned long long)(srv->cfg.handshake_timeout_ns / 1000000ull));
            conn_abort(c, "handshake timeout");
        } else if (c->in_frame && now > c->frame_deadline) {
            atomic_fetch_add(&srv->m.timeouts_progress, 1);
            SRV_INFO("progress timeout peer=%s receiving op=%s got=%zu/%zu", c->peer,
                     c->rstate == RS_HDR ? "?" : rio__proto_op_name(c->hdr.opcode), c->want_got,
                     c->want_len);
            conn_abort(c, "progress timeout (receiving)");
        } else if (c->oh && now > c->send_deadline) {
            atomic_fetch_add(&srv->m.timeouts_progress, 1);
            SRV_INFO("progress timeout peer=%s sending queued=%u", c->peer, c->nout);
            conn_abort(c, "progress timeout (sending)");
        } else if (draining) {
            conn_done_closing(c);
            if (!c->dead && !c->in_frame)
                conn_set_events(c, 0, c->oh != NULL);
        } else if (srv->cfg.idle_timeout_ns && !c->in_frame && !c->oh && !c->jobs.count &&
                   now - c->last_active > srv->cfg.idle_timeout_ns) {
            atomic_fetch_add(&srv->m.timeouts_idle, 1);
            SRV_DEBUG("idle timeout peer=%s", c->peer);
            conn_kill(c, "idle timeout");
        }
    }
}

static void worker_bury(struct rio_srv_worker *w)
{
    while (w->graveyard) {
        struct conn *c = w->graveyard;
        w->graveyard = c->next;
        conn_free(c);
    }
}

static void *worker_main(void *arg)
{
    struct rio_srv_worker *w = arg;
    struct rio_srv *srv = w->srv;
    struct epoll_event evs[MAX_EVENTS];
    uint64_t next_tick = rio__now_ns() + TICK_NS;

    while (!atomic_load(&srv->stopping)) {
        int n = epoll_wait(w->epfd, evs, MAX_EVENTS, w->pending ? 0 : (int)(TICK_NS / 1000000));
        if (n < 0 && errno != EINTR) {
            SRV_ERR("epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (!evs[i].data.ptr) {
                uint64_t v;
                if (read(w->evfd, &v, sizeof(v)) < 0 && errno != EAGAIN)
                    SRV_WARN("eventfd: %s", strerror(errno));
                worker_adopt(w);
                worker_commits(w);
                continue;
            }
            struct conn *c = evs[i].data.ptr;
            if (!c->dead)
                conn_event(c, evs[i].events);
        }
        while (w->pending) {
            struct conn *list = w->pending;
            w->pending = NULL;
            for (struct conn *c = list, *nx; c; c = nx) {
                nx = c->pnext;
                c->pending = 0;
                if (!c->dead)
                    conn_read(c);
            }
        }
        uint64_t now = rio__now_ns();
        if (now >= next_tick || atomic_load(&srv->draining)) {
            worker_tick(w, now);
            next_tick = now + TICK_NS;
        }
        worker_bury(w);
        if (atomic_load(&srv->draining) && rio_list_empty(&w->conns)) {
            pthread_mutex_lock(&w->mu);
            int more = w->incoming != NULL;
            pthread_mutex_unlock(&w->mu);
            if (!more)
                break;
        }
    }
    /* Stopping (or drained): close what is left, adopted or not. */
    worker_adopt(w);
    while (!rio_list_empty(&w->conns))
        conn_kill(conn_of(w->conns.head), "server stopping");
    worker_bury(w);
    return NULL;
}

int rio__srv_workers_start(struct rio_srv *srv)
{
    unsigned n = srv->cfg.threads ? srv->cfg.threads : 1;

    srv->workers = rio__calloc(n, sizeof(*srv->workers));
    if (!srv->workers)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        struct rio_srv_worker *w = rio__calloc(1, sizeof(*w));
        struct epoll_event e = {.events = EPOLLIN, .data.ptr = NULL};
        if (!w)
            return -ENOMEM;
        srv->workers[i] = w;
        srv->nworkers = i + 1;
        w->srv = srv;
        w->epfd = epoll_create1(EPOLL_CLOEXEC);
        w->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        pthread_mutex_init(&w->mu, NULL);
        if (w->epfd < 0 || w->evfd < 0 || epoll_ctl(w->epfd, EPOLL_CTL_ADD, w->evfd, &e) < 0)
            return -errno;
        int ret = pthread_create(&w->th, NULL, worker_main, w);
        if (ret != 0)
            return -ret;
        w->started = 1;
    }
    return 0;
}

void rio__srv_dispatch(struct rio_srv *srv, int fd, int listener)
{
    static unsigned next;
    struct rio_srv_worker *w = srv->workers[next++ % srv->nworkers];
    struct conn *c;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    uint64_t one = 1;

    c = rio__calloc(1, sizeof(*c));
    if (c)
        c->rbuf = rio__malloc(RBUF_SIZE);
    if (!c || !c->rbuf) {
        SRV_WARN("out of memory for a connection");
        if (c)
            conn_free(c);
        close(fd);
        return;
    }
    c->fd = fd;
    c->claim.fd = fd;
    c->lis = listener;
    if (srv->tls && rio__tls_init(&c->tls, srv->tls, fd, false, NULL) < 0) {
        SRV_WARN("out of memory for a TLS connection");
        conn_free(c);
        close(fd);
        return;
    }
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) == 0) {
        rio__srv_addr_name((struct sockaddr *)&ss, c->peer, sizeof(c->peer));
        peer_ip16(&ss, c->peer_ip);
    } else {
        strcpy(c->peer, "?");
    }
    c->born = rio__now_ns();
    /* On the handshake list until HELLO (and AUTH) are through. */
    pthread_mutex_lock(&srv->admit_mu);
    c->on_hs = 1;
    rio_list_push_back(&srv->hs, &c->hs_node);
    pthread_mutex_unlock(&srv->admit_mu);
    atomic_fetch_add(&srv->m.conns_open, 1);
    atomic_fetch_add(&w->nconns, 1);
    pthread_mutex_lock(&w->mu);
    c->next = w->incoming;
    w->incoming = c;
    pthread_mutex_unlock(&w->mu);
    if (write(w->evfd, &one, sizeof(one)) < 0)
        SRV_WARN("eventfd: %s", strerror(errno));
}

void rio__srv_workers_wake(struct rio_srv *srv)
{
    uint64_t one = 1;

    for (unsigned i = 0; i < srv->nworkers; i++)
        if (srv->workers[i]->evfd >= 0 && write(srv->workers[i]->evfd, &one, sizeof(one)) < 0)
            SRV_WARN("eventfd: %s", strerror(errno));
}

unsigned rio__srv_workers_conns(struct rio_srv *srv)
{
    unsigned n = 0;

    for (unsigned i = 0; i < srv->nworkers; i++)
        n += atomic_load(&srv->workers[i]->nconns);
    return n;
}

void rio__srv_workers_join(struct rio_srv *srv)
{
    for (unsigned i = 0; i < srv->nworkers; i++)
        if (srv->workers[i]->started)
            pthread_join(srv->workers[i]->th, NULL);
    /* Commits still queued finish (their connections are gone) before
     * their workers are freed. */
    if (srv->disk)
        rio__srv_disk_pool_stop(srv->disk);
    for (unsigned i = 0; i < srv->nworkers; i++) {
        struct rio_srv_worker *w = srv->workers[i];
        worker_commits(w);
        if (w->epfd >= 0)
            close(w->epfd);
        if (w->evfd >= 0)
            close(w->evfd);
        pthread_mutex_destroy(&w->mu);
        rio__free(w);
    }
    rio__free(srv->workers);
    srv->workers = NULL;
    srv->nworkers = 0;
}
