/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 90 */
/*
 * The railio:// transport against a scripted server in the test process (a
 * thread per connection speaking src/proto), for the faults a real railiod
 * does not produce on demand: an answer of the wrong length, an answer to a
 * request nobody sent, a garbage frame, a connection that stalls, a READ body
 * cut by a cancel, a PUT cancelled in the middle of its data, refused dials,
 * a server that cannot prove it knows the token, and a server that takes
 * fewer requests per connection than the client's depth.
 *
 * Some tests drive the transport's ops table directly (submit, reap, cancel)
 * to watch exactly which bytes land where and when.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4 */
#endif
#include <poll.h>
#include <stdatomic.h>
#include <sys/resource.h>

#include "core/clock.h"
#include "core/engine.h"
#include "tcp_util.h"

#define F_CHUNK TU_CHUNK
#define F_MS 1000000ull /* ns */
#define F_SIZE (16 * F_CHUNK)
#define F_GEN 77u
#define F_SEED 0xfa11
#define F_ONE 1000u         /* "one": one chunk of the object's first F_ONE bytes */
#define TCP_DESC_FIXED_T 64 /* LOOKUP answer: generation, size, chunk, count, etag */
#define F_HUGE_N (1u << 23) /* TCP_LOOKUP_MAX_CHUNKS */
#define F_HUGE_CHUNK 4096u
#define F_HUGE_LEN (TCP_DESC_FIXED_T + 8ull * F_HUGE_N)
/* The huge descriptor's checksum of chunk i. */
#define F_HUGE_XXH(i) (0x9e3779b97f4a7c15ull * ((uint64_t)(i) + 1))

struct fake {
    int lfd;
    char addr[64];
    pthread_t acc;
    _Atomic int stop;
    /* behaviour: each counter is how many times it still happens */
    _Atomic int short_reads;   /* READ answered with len - 1 bytes */
    _Atomic int bad_id_reads;  /* READ answered under another id */
    _Atomic int garbage_reads; /* READ answered with 32 bytes of garbage */
    _Atomic int stall_reads;   /* READ never answered; the connection hangs */
    _Atomic int slow_body;     /* READ: header and all the body but 4 KiB, then wait for release */
    _Atomic int release;
    /* READ: header (sent by under_mark_head_ns), then (once the client
     * waits under its receive low-water mark, 250 ms later: between two
     * of its looks) 8 KiB of the body, when in under_mark_ns, then the
     * rest after release */
    _Atomic int under_mark;
    _Atomic uint64_t under_mark_head_ns, under_mark_ns;
    _Atomic int slow_put;      /* PUT_CHUNK: wait for release before reading the data */
    _Atomic int dup_reads;     /* READ answered twice */
    _Atomic int bad_lookups;   /* LOOKUP answered with 32 bytes of garbage */
    _Atomic int stall_lookups; /* LOOKUP never answered; the connection hangs */
    _Atomic int hold_lookups;  /* LOOKUP answered only after release */
    /* LOOKUP answered with RIO_PF_SVC and a service time it was not asked */
    _Atomic int svc_lookups;
    _Atomic int commits;       /* PUT_COMMITs seen (each answered generation 1000 + n) */
    _Atomic int bad_commit_at; /* that PUT_COMMIT (commits' count) answered with garbage */
    /* PUT_COMMITs from that count on: the first never answered (a disk
     * tier still writing), every later one RIO_ETHROTTLE ("still being
     * applied", the answer to a commit asked again meanwhile). */
    _Atomic int pending_commit_at;
    int pending_throttles;  /* > 0: only that many RIO_ETHROTTLE, then the generation */
    int batch_lookups;      /* > 1: LOOKUPs answered in groups of this many, last first */
    _Atomic int bump_reads; /* READ: the key gets a new generation first (a PUT won) */
    /* LOOKUP of "big": the largest descriptor the client takes (F_HUGE_N
     * chunks of 4 KiB, 64 MiB of checksums); huge_flips of them with a byte
     * of the list flipped after the tag was made. Set before fake_start. */
    int huge;
    _Atomic int huge_flips;
    uint8_t *huge_body;
    _Atomic uint64_t gen; /* the object's generation (F_GEN at start) */
    _Atomic int lookups;
    _Atomic int bad_deletes; /* DELETE answered with 32 bytes of garbage */
    _Atomic int deletes;
    uint32_t max_depth;
    const char *token;
    _Atomic int bad_server_mac;
    int no_auth;          /* HELLO says auth_required 0, whatever the token (an impostor) */
    int v1;               /* an older server: version 1 only */
    _Atomic int data_ops; /* requests past the handshake it saw (LOOKUP, PUT_OPEN...) */
    /* GET_ONE: offered in HELLO (get_one), and what its answers to the
     * key "one" (F_ONE bytes, one chunk) do, each counter how many times:
     * bytes past the request's max_len, an xxh3 not the bytes', the
     * descriptor alone; "obj" (16 chunks) is answered with its descriptor */
    int get_one;
    _Atomic int one_long, one_bad_xxh, one_desc_only;
    int one_tiny_chunk; /* "one" answered as one chunk of F_ONE bytes */
    /* PUT_ONE: offered in HELLO (put_one); its answers, each counter how
     * many times: a generation of 0 (a broken answer), else 2000 + n */
    int put_one;
    _Atomic int put_one_bad, put_ones;
    /* PUT_ONEs answered RIO_ENOTFOUND: the upload dropped before its data
     * all came (railiod's --upload-timeout), nothing published */
    _Atomic int put_one_gone;
    _Atomic int get_ones;
    /* what it saw */
    _Atomic int conns;
    _Atomic int reads;
    _Atomic int puts_ok;
    /* the object */
    uint8_t *data;
    uint64_t xxh[F_SIZE / F_CHUNK];
    /* connections */
    pthread_mutex_t mu;
    int fds[64];
    pthread_t th[64];
    int nth;
};

struct fconn {
    struct fake *f;
    int fd;
    uint8_t snonce[RIO_PROTO_NONCE_LEN], cnonce[RIO_PROTO_NONCE_LEN];
    struct rio_proto_sess sess;
    int v1;            /* answer in version 1 framing */
    int svc;           /* the next answer carries RIO_PF_SVC and svc_us UINT32_MAX */
    uint64_t held[64]; /* batch_lookups: ids read, not answered yet */
    int nheld;
};

static int f_read(int fd, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, (uint8_t *)p + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

static int f_write(int fd, const void *p, size_t n)
{
    size_t put = 0;
    while (put < n) {
        ssize_t w = send(fd, (const uint8_t *)p + put, n - put, MSG_NOSIGNAL);
        if (w <= 0)
            return -1;
        put += (size_t)w;
    }
    return 0;
}

/* The header and checked part of an answer whose body is ctl, its tag, then
 * data_len bytes the caller sends (READ data); cut: body_len less by that. */
static int f_respond_head(struct fconn *c, int op, uint64_t id, int32_t status, const void *ctl,
                          size_t len, size_t data_len, size_t cut)
{
    size_t tag_len = c->v1 ? 0 : RIO_PROTO_TAG_LEN;
    struct rio_proto_hdr h = {.version = (uint8_t)(c->v1 ? 1 : RIO_PROTO_VERSION),
                              .opcode = (uint8_t)op,
                              .flags = RIO_PF_RESPONSE,
                              .id = id,
                              .body_len = (uint32_t)(len + tag_len + data_len - cut),
                              .status = status};
    if (c->svc) {
        h.flags |= RIO_PF_SVC;
        h.svc_us = UINT32_MAX;
        c->svc = 0;
    }
    uint8_t hb[RIO_PROTO_HDR_LEN], tag[RIO_PROTO_TAG_LEN];
    struct iovec parts[2] = {{hb, sizeof(hb)}, {(void *)ctl, len}};
    rio__proto_hdr_encode(&h, hb);
    uint64_t seq = rio__proto_sess_keyed(&c->sess) ? c->sess.tx_seq++ : 0;
    if (rio__proto_seal(&c->sess, seq, parts, 2, tag) < 0 || f_write(c->fd, hb, sizeof(hb)) < 0)
        return -1;
    if (len && f_write(c->fd, ctl, len) < 0)
        return -1;
    return tag_len ? f_write(c->fd, tag, tag_len) : 0;
}

static int f_respond(struct fconn *c, int op, uint64_t id, int32_t status, const void *body,
                     size_t len)
{
    return f_respond_head(c, op, id, status, body, len, 0, 0);
}

/* A READ answer: the data's xxh3, the tag, the data (cut bytes short). */
static int f_respond_read(struct fconn *c, uint64_t id, const uint8_t *data, size_t len, size_t cut)
{
    uint8_t x[8];
    uint64_t v = rio__xxh3(data, len);
    for (int i = 0; i < 8; i++)
        x[i] = (uint8_t)(v >> (8 * i));
    if (f_respond_head(c, RIO_OP_READ, id, 0, x, sizeof(x), len, cut) < 0)
        return -1;
    return f_write(c->fd, data, len - cut);
}

static void f_wait_release(struct fake *f)
{
    while (!atomic_load(&f->release) && !atomic_load(&f->stop))
        usleep(1000);
}

static int f_read_op(struct fconn *c, uint64_t id, const uint8_t *body, size_t len)
{
    struct fake *f = c->f;
    struct rio_proto_read m;

    if (rio__proto_dec_read(body, len, &m) < 0)
        return -1;
    atomic_fetch_add(&f->reads, 1);
    if (atomic_fetch_sub(&f->bump_reads, 1) > 0)
        atomic_fetch_add(&f->gen, 1);
    if (m.generation != atomic_load(&f->gen))
        return f_respond(c, RIO_OP_READ, id, RIO_EGENERATION, NULL, 0);
    if (m.off > F_SIZE || m.len > F_SIZE - m.off)
        return f_respond(c, RIO_OP_READ, id, RIO_EPROTO, NULL, 0);
    if (atomic_fetch_sub(&f->stall_reads, 1) > 0) {
        while (!atomic_load(&f->stop))
            usleep(1000);
        return -1;
    }
    if (atomic_fetch_sub(&f->short_reads, 1) > 0)
        return f_respond_read(c, id, f->data + m.off, m.len, 1);
    if (atomic_fetch_sub(&f->bad_id_reads, 1) > 0)
        return f_respond_read(c, id + 1000, f->data + m.off, m.len, 0);
    if (atomic_fetch_sub(&f->garbage_reads, 1) > 0) {
        uint8_t junk[RIO_PROTO_HDR_LEN];
        memset(junk, 0x5a, sizeof(junk));
        return f_write(c->fd, junk, sizeof(junk));
    }
    if (atomic_fetch_sub(&f->dup_reads, 1) > 0 &&
        f_respond_read(c, id, f->data + m.off, m.len, 0) < 0)
        return -1;
    if (atomic_fetch_sub(&f->slow_body, 1) > 0) {
        uint8_t x[8];
        uint64_t v = rio__xxh3(f->data + m.off, m.len);
        for (int i = 0; i < 8; i++)
            x[i] = (uint8_t)(v >> (8 * i));
        /* All of the body but its last 4 KiB: the client wakes for a
         * large body once half of what it still owes is there (its
         * receive low-water mark, transport/tcp/conn.c), so it takes all
         * of this but at most the last 8 KiB, well over the quarter
         * raw_cancel_mid_body waits for. Of half the body, all but what
         * a first read took could sit under the mark. */
        uint64_t first = m.len > 8192 ? m.len - 4096 : m.len / 2;
        if (f_respond_head(c, RIO_OP_READ, id, 0, x, sizeof(x), m.len, 0) < 0 ||
            f_write(c->fd, f->data + m.off, first) < 0)
            return -1;
        f_wait_release(f);
        return f_write(c->fd, f->data + m.off + first, m.len - first);
    }
    if (atomic_fetch_sub(&f->under_mark, 1) > 0) {
        uint8_t x[8];
        uint64_t v = rio__xxh3(f->data + m.off, m.len);
        for (int i = 0; i < 8; i++)
            x[i] = (uint8_t)(v >> (8 * i));
        /* The client reads the header, then waits for half of the body
         * (its receive low-water mark): 8 KiB wakes nobody. */
        const uint64_t first = 8192;
        if (m.len < 4 * first || f_respond_head(c, RIO_OP_READ, id, 0, x, sizeof(x), m.len, 0) < 0)
            return -1;
        atomic_store(&f->under_mark_head_ns, rio__now_ns());
        usleep(250 * 1000);
        atomic_store(&f->under_mark_ns, rio__now_ns());
        if (f_write(c->fd, f->data + m.off, first) < 0)
            return -1;
        f_wait_release(f);
        return f_write(c->fd, f->data + m.off + first, m.len - first);
    }
    return f_respond_read(c, id, f->data + m.off, m.len, 0);
}

static int f_hello(struct fconn *c, uint64_t id, const uint8_t *body, size_t len)
{
    struct fake *f = c->f;
    struct rio_proto_hello m;
    struct rio_proto_hello_resp r;
    uint8_t out[256];

    if (rio__proto_dec_hello(body, len, &m) < 0)
        return -1;
    if (f->v1) {
        /* What a version 1 railiod answers: no common version, and closes. */
        c->v1 = 1;
        if (m.version_min > 1)
            f_respond(c, RIO_OP_HELLO, id, RIO_ENOTSUP, NULL, 0);
        return -1;
    }
    memcpy(c->cnonce, m.nonce, sizeof(c->cnonce));
    memset(c->snonce, 0x33, sizeof(c->snonce));
    memset(&r, 0, sizeof(r));
    r.version = RIO_PROTO_VERSION;
    r.caps = (f->get_one ? RIO_PROTO_CAP_GET_ONE : 0) | (f->put_one ? RIO_PROTO_CAP_PUT_ONE : 0);
    r.auth_required = f->token && !f->no_auth ? 1 : 0;
    r.max_body = RIO_PROTO_BODY_CAP;
    r.max_depth = f->max_depth;
    memcpy(r.nonce, c->snonce, sizeof(r.nonce));
    r.nrails = 1;
    r.rail[0] = f->addr;
    r.rail_len[0] = (uint16_t)strlen(f->addr);
    int n = rio__proto_enc_hello_resp(&r, out, sizeof(out));
    return f_respond(c, RIO_OP_HELLO, id, 0, out, (size_t)n);
}

static int f_auth(struct fconn *c, uint64_t id, const uint8_t *body, size_t len)
{
    struct fake *f = c->f;
    struct rio_proto_auth m;
    struct rio_proto_auth_resp r;
    uint8_t want[RIO_PROTO_MAC_LEN];
    size_t tl = strlen(f->token);

    if (rio__proto_dec_auth(body, len, &m) < 0)
        return -1;
    rio__proto_auth_mac((const uint8_t *)f->token, tl, "railio-auth-v1", c->snonce, c->cnonce,
                        want);
    if (memcmp(want, m.mac, sizeof(want)))
        return f_respond(c, RIO_OP_AUTH, id, -EACCES, NULL, 0);
    rio__proto_auth_mac((const uint8_t *)f->token, tl, "railio-server-v1", c->cnonce, c->snonce,
                        r.mac);
    if (f->bad_server_mac)
        r.mac[0] ^= 1;
    if (f_respond(c, RIO_OP_AUTH, id, 0, r.mac, sizeof(r.mac)) < 0)
        return -1;
    return rio__proto_sess_key(&c->sess, (const uint8_t *)f->token, tl, c->cnonce, c->snonce, 1);
}

/* The huge descriptor, as it is or (huge_flips) with a byte of its list
 * flipped on the wire, under the tag of the right one. */
static int f_respond_huge(struct fconn *c, uint64_t id)
{
    const uint8_t *b = c->f->huge_body;
    size_t at = F_HUGE_LEN - 12345;

    if (atomic_fetch_sub(&c->f->huge_flips, 1) <= 0)
        return f_respond(c, RIO_OP_LOOKUP, id, 0, b, F_HUGE_LEN);
    struct rio_proto_hdr h = {.version = RIO_PROTO_VERSION,
                              .opcode = RIO_OP_LOOKUP,
                              .flags = RIO_PF_RESPONSE,
                              .id = id,
                              .body_len = (uint32_t)(F_HUGE_LEN + RIO_PROTO_TAG_LEN)};
    uint8_t hb[RIO_PROTO_HDR_LEN], tag[RIO_PROTO_TAG_LEN], bad = b[at] ^ 0x10;
    struct iovec parts[2] = {{hb, sizeof(hb)}, {(void *)b, F_HUGE_LEN}};
    rio__proto_hdr_encode(&h, hb);
    uint64_t seq = rio__proto_sess_keyed(&c->sess) ? c->sess.tx_seq++ : 0;
    if (rio__proto_seal(&c->sess, seq, parts, 2, tag) < 0 || f_write(c->fd, hb, sizeof(hb)) < 0 ||
        f_write(c->fd, b, at) < 0 || f_write(c->fd, &bad, 1) < 0 ||
        f_write(c->fd, b + at + 1, F_HUGE_LEN - at - 1) < 0)
        return -1;
    return f_write(c->fd, tag, sizeof(tag));
}

static int f_lookup(struct fconn *c, uint64_t id, const uint8_t *body, size_t len)
{
    struct rio_proto_key k;
    struct rio_proto_desc d;
    uint8_t out[TCP_DESC_FIXED_T + 8 * (F_SIZE / F_CHUNK)];

    if (rio__proto_dec_key(body, len, &k) < 0)
        return -1;
    atomic_fetch_add(&c->f->lookups, 1);
    if (c->f->huge_body && k.key_len == 3 && !memcmp(k.key, "big", 3))
        return f_respond_huge(c, id);
    if (k.key_len == 3 && !memcmp(k.key, "one", 3)) {
        /* "one" (F_ONE bytes, one chunk), as GET_ONE brings it */
        uint64_t xxh = rio__xxh3(c->f->data, F_ONE);
        memset(&d, 0, sizeof(d));
        d.generation = atomic_load(&c->f->gen);
        d.size = F_ONE;
        d.chunk_size = F_CHUNK;
        d.nchunks = 1;
        memset(d.etag, '0', sizeof(d.etag));
        int n = rio__proto_enc_desc(&d, &xxh, out, sizeof(out));
        return f_respond(c, RIO_OP_LOOKUP, id, 0, out, (size_t)n);
    }
    if (k.key_len != 3 || memcmp(k.key, "obj", 3))
        return f_respond(c, RIO_OP_LOOKUP, id, RIO_ENOTFOUND, NULL, 0);
    if (atomic_fetch_sub(&c->f->bad_lookups, 1) > 0) {
        uint8_t junk[RIO_PROTO_HDR_LEN];
        memset(junk, 0xa5, sizeof(junk));
        return f_write(c->fd, junk, sizeof(junk));
    }
    if (atomic_fetch_sub(&c->f->stall_lookups, 1) > 0) {
        while (!atomic_load(&c->f->stop))
            usleep(1000);
        return -1;
    }
    memset(&d, 0, sizeof(d));
    d.generation = atomic_load(&c->f->gen);
    d.size = F_SIZE;
    d.chunk_size = F_CHUNK;
    d.nchunks = F_SIZE / F_CHUNK;
    memset(d.etag, '0', sizeof(d.etag));
    int n = rio__proto_enc_desc(&d, c->f->xxh, out, sizeof(out));
    if (atomic_fetch_sub(&c->f->svc_lookups, 1) > 0)
        c->svc = 1;
    if (atomic_fetch_sub(&c->f->hold_lookups, 1) > 0) {
        f_wait_release(c->f);
    } else if (c->f->batch_lookups > 1) {
        /* Pipelined requests: read a group, answer it in reverse order. */
        c->held[c->nheld++] = id;
        if (c->nheld < c->f->batch_lookups)
            return 0;
        while (c->nheld > 0)
            if (f_respond(c, RIO_OP_LOOKUP, c->held[--c->nheld], 0, out, (size_t)n) < 0)
                return -1;
        return 0;
    }
    return f_respond(c, RIO_OP_LOOKUP, id, 0, out, (size_t)n);
}

/* GET_ONE: "one" with its bytes (or a lie), "obj" its descriptor alone. */
static int f_get_one(struct fconn *c, uint64_t id, const uint8_t *body, size_t len)
{
    struct fake *f = c->f;
    struct rio_proto_get_one m;
    struct rio_proto_desc d = {.generation = atomic_load(&f->gen), .chunk_size = F_CHUNK};
    uint8_t out[RIO_PROTO_GET_ONE_WITH_DATA];

    if (!f->get_one || rio__proto_dec_get_one(body, len, &m) < 0)
        return -1;
    atomic_fetch_add(&f->get_ones, 1);
    memset(d.etag, '0', sizeof(d.etag));
    if (m.key_len == 3 && !memcmp(m.key, "obj", 3)) {
        d.size = F_SIZE;
        d.nchunks = F_SIZE / F_CHUNK;
        rio__proto_enc_get_one_resp(&d, 0, 0, out, sizeof(out));
        return f_respond(c, RIO_OP_GET_ONE, id, 0, out, RIO_PROTO_GET_ONE_DESC);
    }
    if (m.key_len != 3 || memcmp(m.key, "one", 3))
        return f_respond(c, RIO_OP_GET_ONE, id, RIO_ENOTFOUND, NULL, 0);
    d.size = F_ONE;
    d.nchunks = 1;
    if (f->one_tiny_chunk)
        d.chunk_size = F_ONE; /* under the engine's least chunk size */
    uint64_t xxh = rio__xxh3(f->data, F_ONE);
    if (atomic_fetch_sub(&f->one_desc_only, 1) > 0) {
        rio__proto_enc_get_one_resp(&d, 0, 0, out, sizeof(out));
        return f_respond(c, RIO_OP_GET_ONE, id, 0, out, RIO_PROTO_GET_ONE_DESC);
    }
    if (atomic_fetch_sub(&f->one_long, 1) > 0)
        d.size = m.max_len + 100u; /* more than the client takes */
    if (atomic_fetch_sub(&f->one_bad_xxh, 1) > 0)
        xxh ^= 1;
    rio__proto_enc_get_one_resp(&d, 1, xxh, out, sizeof(out));
    if (f_respond_head(c, RIO_OP_GET_ONE, id, 0, out, sizeof(out), d.size, 0) < 0)
        return -1;
    return f_write(c->fd, f->data, d.size);
}

/* A request the fake answers in place (PUT_OPEN, PUT_CHUNK, DELETE,
 * PUT_ABORT; anything else: RIO_ENOTSUP). */
static int f_other(struct fake *f, struct fconn *c, const struct rio_proto_hdr *h)
{
    int ret;

    switch (h->opcode) {
    case RIO_OP_PUT_OPEN: {
        uint8_t out[8] = {1};
        ret = f_respond(c, h->opcode, h->id, 0, out, sizeof(out));
        break;
    }
    case RIO_OP_PUT_CHUNK:
        atomic_fetch_add(&f->puts_ok, 1);
        ret = f_respond(c, h->opcode, h->id, 0, NULL, 0);
        break;
    case RIO_OP_DELETE:
        atomic_fetch_add(&f->deletes, 1);
        if (atomic_fetch_sub(&f->bad_deletes, 1) > 0) {
            uint8_t junk[RIO_PROTO_HDR_LEN];
            memset(junk, 0xa5, sizeof(junk));
            ret = f_write(c->fd, junk, sizeof(junk));
            break;
        }
        ret = f_respond(c, h->opcode, h->id, 0, NULL, 0);
        break;
    case RIO_OP_PUT_ABORT:
        ret = f_respond(c, h->opcode, h->id, 0, NULL, 0);
        break;
    case RIO_OP_PUT_ONE: {
        uint8_t out[8];
        int n = atomic_fetch_add(&f->put_ones, 1) + 1;
        if (f->put_one && atomic_fetch_sub(&f->put_one_gone, 1) > 0) {
            ret = f_respond(c, h->opcode, h->id, RIO_ENOTFOUND, NULL, 0);
            break;
        }
        rio__le64_put(out, atomic_fetch_sub(&f->put_one_bad, 1) > 0 ? 0 : 2000u + (uint64_t)n);
        ret = f->put_one ? f_respond(c, h->opcode, h->id, 0, out, sizeof(out)) : -1;
        break;
    }
    case RIO_OP_PUT_COMMIT: {
        uint8_t out[8];
        int n = atomic_fetch_add(&f->commits, 1) + 1;
        int pend = atomic_load(&f->pending_commit_at);
        if (pend && n == pend) {
            while (!atomic_load(&f->stop))
                usleep(1000);
            ret = -1;
            break;
        }
        if (pend && n > pend && (!f->pending_throttles || n <= pend + f->pending_throttles)) {
            ret = f_respond(c, h->opcode, h->id, RIO_ETHROTTLE, NULL, 0);
            break;
        }
        if (n == atomic_load(&f->bad_commit_at)) {
            uint8_t junk[RIO_PROTO_HDR_LEN];
            memset(junk, 0xa5, sizeof(junk));
            ret = f_write(c->fd, junk, sizeof(junk));
            break;
        }
        rio__le64_put(out, 1000u + (uint64_t)n);
        ret = f_respond(c, h->opcode, h->id, 0, out, sizeof(out));
        break;
    }
    default:
        ret = f_respond(c, h->opcode, h->id, RIO_ENOTSUP, NULL, 0);
        break;
    }
    return ret;
}

/* The requests the fake answers by a handler of its own, by opcode. */
typedef int f_handler(struct fconn *c, uint64_t id, const uint8_t *body, size_t len);
static f_handler *const f_ops[] = {
    [RIO_OP_HELLO] = f_hello,  [RIO_OP_AUTH] = f_auth,       [RIO_OP_LOOKUP] = f_lookup,
    [RIO_OP_READ] = f_read_op, [RIO_OP_GET_ONE] = f_get_one,
};

static void *f_conn_main(void *p)
{
    struct fconn *c = p;
    struct fake *f = c->f;
    uint8_t *body = malloc(RIO_PROTO_BODY_CAP < (64u << 20) ? RIO_PROTO_BODY_CAP : (64u << 20));

    for (;;) {
        uint8_t hb[RIO_PROTO_HDR_LEN];
        struct rio_proto_hdr h;
        int ret = -1;

        uint32_t ctl, data;
        if (f_read(c->fd, hb, sizeof(hb)) < 0)
            break;
        ret = rio__proto_hdr_decode(hb, 64u << 20, &h);
        if (ret == RIO_EVERSION && h.opcode == RIO_OP_HELLO && h.body_len == 24) {
            ctl = 24; /* the HELLO request keeps version 1 framing */
        } else if (ret < 0 || rio__proto_layout(&h, &ctl, &data) < 0) {
            break;
        }
        ret = -1;
        if (h.opcode == RIO_OP_PUT_CHUNK && atomic_fetch_sub(&f->slow_put, 1) > 0)
            f_wait_release(f);
        if (f_read(c->fd, body, h.body_len) < 0)
            break;
        if (h.opcode != RIO_OP_HELLO && h.opcode != RIO_OP_AUTH && h.opcode != RIO_OP_PING)
            atomic_fetch_add(&f->data_ops, 1);
        /* The fake takes the checks on trust; only the control part matters. */
        h.body_len = ctl;
        f_handler *op = h.opcode < sizeof(f_ops) / sizeof(f_ops[0]) ? f_ops[h.opcode] : NULL;
        if (op)
            ret = op(c, h.id, body, h.body_len);
        else
            ret = f_other(f, c, &h);
        if (ret < 0)
            break;
    }
    free(body);
    shutdown(c->fd, SHUT_RDWR);
    rio__proto_sess_free(&c->sess);
    free(c);
    return NULL;
}

static void *f_accept_main(void *p)
{
    struct fake *f = p;
    while (!atomic_load(&f->stop)) {
        struct pollfd pf = {.fd = f->lfd, .events = POLLIN};
        if (poll(&pf, 1, 20) <= 0)
            continue;
        int fd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        /* Answers go out in pieces (header, body, tag): no Nagle delay
         * between them, as railiod writes an answer at once. */
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct fconn *c = calloc(1, sizeof(*c));
        c->f = f;
        c->fd = fd;
        atomic_fetch_add(&f->conns, 1);
        pthread_mutex_lock(&f->mu);
        if (f->nth < 64 && pthread_create(&f->th[f->nth], NULL, f_conn_main, c) == 0) {
            f->fds[f->nth++] = fd;
        } else {
            close(fd);
            free(c);
        }
        pthread_mutex_unlock(&f->mu);
    }
    return NULL;
}

static void fake_start(struct fake *f)
{
    if (!f->max_depth)
        f->max_depth = 64;
    atomic_store(&f->gen, F_GEN);
    pthread_mutex_init(&f->mu, NULL);
    f->data = tu_pattern(F_SIZE, F_SEED);
    for (unsigned i = 0; i < F_SIZE / F_CHUNK; i++)
        f->xxh[i] = rio__xxh3(f->data + (size_t)i * F_CHUNK, F_CHUNK);
    if (f->huge) {
        struct rio_proto_desc d = {.generation = F_GEN,
                                   .size = (uint64_t)F_HUGE_N * F_HUGE_CHUNK,
                                   .chunk_size = F_HUGE_CHUNK,
                                   .nchunks = F_HUGE_N};
        uint64_t *xxh = malloc(F_HUGE_N * sizeof(*xxh));
        f->huge_body = malloc(F_HUGE_LEN);
        T_NOTNULL(xxh);
        T_NOTNULL(f->huge_body);
        memset(d.etag, '0', sizeof(d.etag));
        for (uint64_t i = 0; i < F_HUGE_N; i++)
            xxh[i] = F_HUGE_XXH(i);
        T_EQ(rio__proto_enc_desc(&d, xxh, f->huge_body, F_HUGE_LEN), (int)F_HUGE_LEN);
        free(xxh);
    }
    f->lfd = t_listen_loopback(f->addr, sizeof(f->addr));
    T_EQ(pthread_create(&f->acc, NULL, f_accept_main, f), 0);
}

/* Stop accepting (the port refuses from now on); connections stay. */
static void fake_close_listener(struct fake *f)
{
    atomic_store(&f->stop, 1);
    pthread_join(f->acc, NULL);
    close(f->lfd);
    f->lfd = -1;
}

/* Listen again on the same port (a server that comes back). */
static void fake_relisten(struct fake *f)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int one = 1;

    sa.sin_port = htons((uint16_t)atoi(strrchr(f->addr, ':') + 1));
    f->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    T_GE(f->lfd, 0);
    setsockopt(f->lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    T_EQ(bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    T_EQ(listen(f->lfd, 64), 0);
    atomic_store(&f->stop, 0);
    T_EQ(pthread_create(&f->acc, NULL, f_accept_main, f), 0);
}

static void fake_stop(struct fake *f)
{
    if (f->lfd >= 0)
        fake_close_listener(f);
    atomic_store(&f->stop, 1);
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < f->nth; i++)
        shutdown(f->fds[i], SHUT_RDWR);
    pthread_mutex_unlock(&f->mu);
    for (int i = 0; i < f->nth; i++) {
        pthread_join(f->th[i], NULL);
        close(f->fds[i]);
    }
    pthread_mutex_destroy(&f->mu);
    free(f->data);
    free(f->huge_body);
}

/* --------------------------------------------------- the raw transport */

struct raw {
    struct rio_url url;
    struct rio_options o;
    struct rio_transport *t;
};

struct rop {
    struct rio_io io;
    _Atomic int done;
};

static void raw_complete(struct rio_io *io)
{
    struct rop *r = (struct rop *)io;
    atomic_store(&r->done, 1);
}

static int raw_open(struct raw *r, const char *url)
{
    T_OK(rio__url_parse(url, &r->url));
    T_OK(rio__options_resolve(NULL, &r->url, &r->o));
    int ret = rio__tcp_ops.open(&r->url, &r->o, &r->t);
    if (ret < 0)
        rio__url_cleanup(&r->url);
    return ret;
}

static void raw_close(struct raw *r)
{
    rio__tcp_ops.close(r->t);
    rio__url_cleanup(&r->url);
}

static void raw_read_io(struct rop *r, uint64_t index, uint64_t len, void *dst)
{
    memset(r, 0, sizeof(*r));
    r->io.kind = RIO_IO_READ;
    r->io.key = "obj";
    r->io.generation = F_GEN;
    r->io.index = index;
    r->io.off = index * F_CHUNK;
    r->io.len = len;
    r->io.dst = dst;
    r->io.complete = raw_complete;
}

/* Reap until r completes; fails after timeout_ms. */
static void raw_wait(struct raw *w, struct rop *r, unsigned timeout_ms)
{
    uint64_t t0 = t_now_ms();
    while (!atomic_load(&r->done)) {
        rio__tcp_ops.reap(w->t, 10);
        if (t_now_ms() - t0 > timeout_ms)
            T_FAIL("op did not complete within %u ms", timeout_ms);
    }
}

static struct rio__tcp_counters raw_ctr(struct raw *w)
{
    struct rio__tcp_counters k;
    T_OK(rio__tcp_counters(w->t, &k));
    return k;
}

/* Reap until the transport holds no slot. */
static void raw_drain(struct raw *w)
{
    uint64_t t0 = t_now_ms();
    while (raw_ctr(w).slots_armed) {
        rio__tcp_ops.reap(w->t, 10);
        if (t_now_ms() - t0 > 5000)
            T_FAIL("slots still armed after 5 s");
    }
}

/* A raw transport on the fake's address with URL params (NULL: none). */
static void raw_open_at(struct raw *w, const struct fake *f, const char *params)
{
    char url[128];

    snprintf(url, sizeof(url), "railio://%s%s%s", f->addr, params ? "?" : "", params ? params : "");
    T_OK(raw_open(w, url));
}

/* READ chunk index (len bytes into dst) submitted and waited for. */
static void raw_read(struct raw *w, struct rop *r, uint64_t index, uint64_t len, void *dst,
                     unsigned timeout_ms)
{
    raw_read_io(r, index, len, dst);
    T_OK(rio__tcp_ops.submit(w->t, &r->io));
    raw_wait(w, r, timeout_ms);
}

/* READ chunk 0 (len bytes into dst, filled with 0xCC first) from a fake
 * with slow_body, cancelled once a quarter of the body has landed (the
 * greeting is < 256 bytes): it completes at once with -ECANCELED. */
static void raw_cancel_mid_body(struct raw *w, struct rop *r, uint8_t *dst, uint64_t len)
{
    memset(dst, 0xCC, len);
    raw_read_io(r, 0, len, dst);
    T_OK(rio__tcp_ops.submit(w->t, &r->io));
    uint64_t t0 = t_now_ms();
    while (raw_ctr(w).bytes_in < 256 + len / 4) {
        rio__tcp_ops.reap(w->t, 5);
        if (t_now_ms() - t0 > 5000)
            T_FAIL("no byte of the body arrived");
    }
    rio__tcp_ops.cancel(w->t, &r->io);
    raw_wait(w, r, 1000);
    T_EQ(r->io.res, -ECANCELED);
}

/* A raw test's bench: the fake server f (its knobs set before rx_start)
 * and a raw transport w on it. */
struct rx {
    struct fake f;
    struct raw w;
};

/* The fake started, w open on it with URL params (NULL: none). */
static void rx_start(struct rx *x, const char *params)
{
    fake_start(&x->f);
    raw_open_at(&x->w, &x->f, params);
}

/* w closed, then the fake stopped. */
static void rx_stop(struct rx *x)
{
    raw_close(&x->w);
    fake_stop(&x->f);
}

/* ------------------------------------------------------------------ tests */

static void open_client(struct tu *u, struct fake *f, const char *params, struct rio_options *o)
{
    char url[256];
    snprintf(url, sizeof(url), "railio://%s%s%s", f->addr, params ? "?" : "", params ? params : "");
    tu_open(u, url, o);
}

/* A test's bench: the fake server f (its knobs set before fx_start), the
 * tests' options o (depth and op_timeout_ms as set before fx_start), a client
 * u on f, a call with stats st, and a buffer b of F_SIZE bytes. */
struct fx {
    struct fake f;
    unsigned depth;         /* o.depth, unless 0 */
    uint32_t op_timeout_ms; /* o.op_timeout_ms, unless 0 */
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call;
    struct tu u;
    uint8_t *b;
};

static void fx_open(struct fx *x, const char *params)
{
    open_client(&x->u, &x->f, params, &x->o);
}

/* The bench, without a client. */
static void fx_init(struct fx *x)
{
    fake_start(&x->f);
    tu_opts(&x->o);
    if (x->depth)
        x->o.depth = x->depth;
    if (x->op_timeout_ms)
        x->o.op_timeout_ms = x->op_timeout_ms;
    x->call = (struct rio_call){.stats = &x->st};
    x->b = malloc(F_SIZE);
    T_NOTNULL(x->b);
}

/* The bench, with the client open on URL params (NULL: none). */
static void fx_start(struct fx *x, const char *params)
{
    fx_init(x);
    fx_open(x, params);
}

/* The bench, whose client is refused at open on URL params with err. */
static void fx_refused(struct fx *x, const char *params, int err)
{
    struct rio_client *c = NULL;
    char url[256];

    fx_init(x);
    snprintf(url, sizeof(url), "railio://%s%s%s", x->f.addr, params ? "?" : "",
             params ? params : "");
    T_ERR(rio_client_new(url, &x->o, &c), err);
}

/* The bench with a client whose chunk holds the whole object (obj fits
 * one of its buffers: a GET of it may go as one GET_ONE). */
static void fx_start_whole_chunk(struct fx *x)
{
    fx_init(x);
    x->o.chunk_size = F_SIZE;
    fx_open(x, NULL);
}

/* n GETs of obj, each into a buffer of its own b[i] (malloc'ed). */
static void obj_gets(struct rio_op *ops, uint8_t **b, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        b[i] = malloc(F_SIZE);
        T_NOTNULL(b[i]);
        ops[i] = (struct rio_op){.type = RIO_OP_GET, .key = "obj", .buf = b[i], .len = F_SIZE};
    }
}

/* GET obj with call (NULL: none) into b: the whole object, byte-exact. */
static void fx_get(struct fx *x, struct rio_call *call)
{
    T_EQ(rio_get(x->u.c, "obj", x->b, F_SIZE, call), (int64_t)F_SIZE);
    T_PATTERN(x->b, F_SIZE, F_SEED);
}

/* The client closed (when open), b freed, the fake stopped. */
static void fx_stop(struct fx *x)
{
    if (x->u.c)
        tu_close(&x->u);
    free(x->b);
    fake_stop(&x->f);
}

/*
 * A server that lies in its GET_ONE answers: more bytes than the request
 * took (the connection is dropped on the header: not one byte past the
 * buffer), an xxh3 that is not the bytes' (RIO_ECHECKSUM, retried), the
 * descriptor alone for an object that had to come with its bytes (a
 * protocol error, retried). Each once: the GET then succeeds byte-exact,
 * the buffer's tail untouched. Always lying: the GET fails within its
 * retries, nothing past the buffer. An object of several chunks answered
 * with its descriptor is looked up and read (one re-plan).
 */
TEST(lying_get_one_answers_land_no_wrong_byte)
{
    struct {
        int lg, bx, desc;
        int want_class;
    } cases[] = {
        {1, 0, 0, RIO_CLASS_RESET}, {0, 1, 0, RIO_CLASS_CHECKSUM}, {0, 0, 1, RIO_CLASS_RESET}};
    for (unsigned k = 0; k < 3; k++) {
        struct fx x = {.f = {.get_one = 1,
                             .one_long = cases[k].lg,
                             .one_bad_xxh = cases[k].bx,
                             .one_desc_only = cases[k].desc}};
        fx_start(&x, NULL);
        uint8_t *b = malloc(2 * F_ONE);
        T_NOTNULL(b);
        memset(b, 0xEE, 2 * F_ONE);
        T_EQ(rio_get(x.u.c, "one", b, F_ONE, &x.call), (int64_t)F_ONE);
        T_PATTERN(b, F_ONE, F_SEED);
        for (unsigned i = F_ONE; i < 2 * F_ONE; i++)
            if (b[i] != 0xEE)
                T_FAIL("case %u: byte %u past the buffer written", k, i);
        T_GE(x.st.retries[cases[k].want_class], 1u);
        T_EQ(atomic_load(&x.f.get_ones), 2);
        T_EQ(atomic_load(&x.f.lookups), 0);
        free(b);
        fx_stop(&x);
    }
    /* Always more than the buffer: a bounded failure, the tail untouched. */
    struct fx x = {.f = {.get_one = 1, .one_long = 1000}};
    fx_start(&x, NULL);
    uint8_t *b = malloc(2 * F_ONE);
    T_NOTNULL(b);
    memset(b, 0xEE, 2 * F_ONE);
    int64_t got = rio_get(x.u.c, "one", b, F_ONE, &x.call);
    T_TRUE(got == RIO_ERETRIES || got == RIO_ENOPATH);
    for (unsigned i = F_ONE; i < 2 * F_ONE; i++)
        if (b[i] != 0xEE)
            T_FAIL("byte %u past the buffer written", i);
    free(b);
    fx_stop(&x);
    /* Several chunks of 64 KiB, into a buffer that takes them and is no
     * larger than the client's chunk: the descriptor, then LOOKUP and
     * READs (one re-plan). */
    struct fx y = {.f = {.get_one = 1}};
    fx_start_whole_chunk(&y);
    fx_get(&y, &y.call);
    T_EQ(y.st.replans, 1u);
    T_EQ(atomic_load(&y.f.get_ones), 1);
    T_EQ(atomic_load(&y.f.lookups), 1);
    fx_stop(&y);
}

/*
 * A GET_ONE answer's descriptor passes the check every descriptor a lookup
 * brings passes (rio__desc_check): a chunk size under 4 KiB is refused as
 * a LOOKUP's is (RIO_EPROTO), not taken because the wire codec allows it.
 */
TEST(get_one_descriptor_is_checked_as_a_lookups)
{
    struct fx x = {.f = {.get_one = 1, .one_tiny_chunk = 1}};

    fx_start(&x, NULL);
    uint8_t b[F_ONE];
    T_ERR(rio_get(x.u.c, "one", b, F_ONE, &x.call), RIO_EPROTO);
    T_EQ(atomic_load(&x.f.get_ones), 1);
    fx_stop(&x);
}

static void *get_obj_main(void *p)
{
    struct fx *x = p;
    T_EQ(rio_get(x->u.c, "obj", x->b, F_SIZE, NULL), (int64_t)F_SIZE);
    return NULL;
}

static void *release_main(void *p)
{
    usleep(300000);
    atomic_store(&((struct fake *)p)->release, 1);
    return NULL;
}

/* x open with a budget_mode fail budget of a chunk and a half, a GET of
 * the large object (get) holding its first chunk in flight, and a thread
 * (rel) that lets it go on in 300 ms. */
static void fail_budget_held(struct fx *x, pthread_t *get, pthread_t *rel)
{
    fx_init(x);
    x->o.budget_bytes = F_CHUNK + F_CHUNK / 2;
    x->o.budget_mode = RIO_BUDGET_FAIL;
    fx_open(x, NULL);
    T_EQ(pthread_create(get, NULL, get_obj_main, x), 0);
    while (atomic_load(&x->f.reads) < 1) /* its first chunk in flight, held */
        usleep(1000);
    T_EQ(pthread_create(rel, NULL, release_main, &x->f), 0);
}

/* The end of fail_budget_held: the GET read it whole. */
static void fail_budget_end(struct fx *x, pthread_t get, pthread_t rel)
{
    T_EQ(pthread_join(rel, NULL), 0);
    T_EQ(pthread_join(get, NULL), 0);
    T_PATTERN(x->b, F_SIZE, F_SEED);
    fx_stop(x);
}

/*
 * rio_get_alloc's first try asks for its guess (a chunk here), not for the
 * object's size, which it does not know yet. Under budget_mode fail, with a
 * chunk of another GET in flight and room in the budget for the object but
 * not for the guess, that try's RIO_EBUSY is the guess's: the object is
 * looked up and read into a buffer of its size, as before there was a
 * guess (the call failed RIO_EBUSY, a budget that had room for it).
 */
TEST(get_alloc_guess_over_a_fail_budget_looks_up)
{
    struct fx x = {.f = {.get_one = 1, .slow_body = 1}};
    pthread_t get, rel;
    void *p = NULL;

    fail_budget_held(&x, &get, &rel);
    T_EQ(rio_get_alloc(x.u.c, "one", &p, &x.call), (int64_t)F_ONE);
    T_PATTERN(p, F_ONE, F_SEED);
    T_EQ(x.st.replans, 1u);
    free(p);
    fail_budget_end(&x, get, rel);
}

/*
 * A reader of a whole object makes rio_get_alloc's first try (its guess):
 * under budget_mode fail, with a chunk of another GET in flight and room
 * in the budget for the object but not for the guess, that try's RIO_EBUSY
 * is the guess's, and the reader looks the object up and reads it.
 */
TEST(reader_guess_over_a_fail_budget_looks_up)
{
    struct fx x = {.f = {.get_one = 1, .slow_body = 1}};
    pthread_t get, rel;
    struct rio_reader *rd;
    uint8_t b[F_ONE];

    fail_budget_held(&x, &get, &rel);
    T_OK(rio_reader_open(x.u.c, "one", 0, NULL, &rd));
    size_t got = 0;
    for (int64_t k; (k = rio_reader_read(rd, b + got, sizeof(b) - got)) > 0;)
        got += (size_t)k;
    T_EQ(got, (size_t)F_ONE);
    T_PATTERN(b, F_ONE, F_SEED);
    T_OK(rio_reader_close(rd));
    fail_budget_end(&x, get, rel);
}

/*
 * A batch of GETs whose GET_ONEs found an object of several chunks runs
 * them again looked up and read; when a PUT then races those reads
 * (RIO_EGENERATION) they are planned again, as a batch that looked them up
 * first would: the runs again that GET_ONE asked for do not spend the
 * re-plans a race has (a batch of 4 such GETs or more had none left, and
 * each ended RIO_EGENERATION).
 */
TEST(batch_get_one_of_several_chunks_still_replans_a_race)
{
    enum { N = 5 };
    struct fx y = {.f = {.get_one = 1}};
    struct rio_op ops[N];
    uint8_t *b[N];

    fx_start_whole_chunk(&y);
    obj_gets(ops, b, N);
    atomic_store(&y.f.bump_reads, 1);
    T_EQ(rio_batch(y.u.c, ops, N, &y.call), N);
    for (unsigned i = 0; i < N; i++) {
        T_EQ(ops[i].result, (int64_t)F_SIZE);
        T_PATTERN(b[i], F_SIZE, F_SEED);
        free(b[i]);
    }
    T_EQ(atomic_load(&y.f.get_ones), N);
    /* A single GET keeps all its re-plans for the race as well. */
    atomic_store(&y.f.bump_reads, 1000000);
    int before = atomic_load(&y.f.lookups);
    T_ERR(rio_get(y.u.c, "obj", y.b, F_SIZE, &y.call), RIO_EGENERATION);
    T_EQ(atomic_load(&y.f.lookups) - before, 5);
    fx_stop(&y);
}

/*
 * A PUT_ONE answered with a generation of 0 (a broken answer) fails its
 * connection with the op on it: sent again at once on a fresh one (before,
 * the op was taken off the connection first, left to the op timeout), and
 * the second answer's generation is the PUT's.
 */
TEST(broken_put_one_answer_is_retried_at_once)
{
    struct fx x = {.f = {.put_one = 1, .put_one_bad = 1}, .op_timeout_ms = 3000};

    fx_start(&x, NULL);
    struct rio_desc d;
    memset(&d, 0, sizeof(d));
    uint64_t t0 = t_now_ms();
    T_OK(rio_put(x.u.c, "p1", x.f.data, 500, &x.call, &d));
    T_LE(t_now_ms() - t0, 1500u);
    T_EQ(d.generation, 2002u);
    T_EQ(atomic_load(&x.f.put_ones), 2);
    T_EQ(x.st.retries[RIO_CLASS_RESET], 1u);
    T_EQ(x.st.retries[RIO_CLASS_TIMEOUT], 0u);
    rio_desc_cleanup(&d);
    fx_stop(&x);
}

/*
 * A PUT_ONE whose upload the server dropped before its data all came
 * (railiod answers RIO_ENOTFOUND: nothing published) starts the PUT over,
 * as a PUT_CHUNK or commit so answered does (RIO_ENOUPLOAD), rather than
 * failing the PUT with "not found".
 */
TEST(put_one_whose_upload_was_dropped_starts_over)
{
    struct fx x = {.f = {.put_one = 1, .put_one_gone = 1}, .op_timeout_ms = 3000};

    fx_start(&x, NULL);
    struct rio_desc d;
    memset(&d, 0, sizeof(d));
    T_OK(rio_put(x.u.c, "p2", x.f.data, 500, &x.call, &d));
    T_EQ(d.generation, 2002u);
    T_EQ(atomic_load(&x.f.put_ones), 2);
    T_EQ(x.st.replans, 1u);
    T_EQ(x.st.retries_total, 0u);
    rio_desc_cleanup(&d);
    fx_stop(&x);
}

/* A READ answered short fails with RIO_ESHORT (never more than len bytes
 * land); the engine retries that chunk and the object comes back whole. */
TEST(short_answer_fails_its_op_then_retry_heals)
{
    struct fx x = {.f = {.short_reads = 1}, .depth = 4};

    fx_start(&x, NULL);
    fx_get(&x, &x.call);
    T_EQ(x.st.retries[RIO_CLASS_SHORT], 1u);
    /* The ops behind it on that connection went out again, not failed. */
    T_EQ(x.st.retries_total, 1u);
    fx_stop(&x);
}

/* An answer to a request nobody sent, or a garbage frame: the connection
 * is poisoned (closed, its ops fail with -EPROTO, a reset-class error) and
 * the engine retries the chunk on a fresh connection: the call succeeds,
 * byte-exact, and the retry is counted. */
TEST(bad_frame_poisons_the_connection_and_retries)
{
    for (int garbage = 0; garbage < 2; garbage++) {
        struct fx x = {.f = {.bad_id_reads = !garbage, .garbage_reads = garbage}};

        fx_start(&x, NULL);
        fx_get(&x, &x.call);
        T_EQ(tu_tcp(x.u.c).conn_failures, 1u);
        T_EQ(tu_tcp(x.u.c).poisoned, 1u);
        T_GE(x.st.retries[RIO_CLASS_RESET], 1u);
        fx_stop(&x);
    }
}

/* A READ answered twice: the second answer is for no outstanding request,
 * so the connection is poisoned and its other ops are retried; every byte
 * delivered is right. */
TEST(duplicated_answer_poisons_the_connection_and_retries)
{
    struct fx x = {.f = {.dup_reads = 1}, .depth = 4};

    fx_start(&x, NULL);
    for (int i = 0; i < 3; i++) {
        memset(x.b, 0, F_SIZE);
        fx_get(&x, &x.call);
    }
    T_EQ(tu_tcp(x.u.c).poisoned, 1u);
    fx_stop(&x);
}

/* A LOOKUP whose answer is damaged, or never comes, is sent again on a
 * fresh control connection (each try bounded by the op timeout). */
TEST(damaged_or_stalled_lookup_is_retried)
{
    struct fx x = {.f = {.bad_lookups = 1}, .op_timeout_ms = 300};

    fx_start(&x, NULL);
    fx_get(&x, NULL);
    T_EQ(tu_tcp(x.u.c).ctl_retries, 1u);

    atomic_store(&x.f.stall_lookups, 1);
    uint64_t t0 = t_now_ms();
    fx_get(&x, NULL);
    T_EQ(tu_tcp(x.u.c).ctl_retries, 2u);
    T_LE(t_now_ms() - t0, 300u + 1000u);
    fx_stop(&x);
}

/* The process's peak resident size so far, in KiB. */
static uint64_t peak_rss_kib(void)
{
    struct rusage ru;
    T_EQ(getrusage(RUSAGE_SELF, &ru), 0);
    return (uint64_t)ru.ru_maxrss;
}

/*
 * A LOOKUP answer may carry 2^23 checksums (64 MiB): a server that answers
 * every lookup so could make a client hold that much, twice over, for each
 * small GET (and a batch runs dozens at once), only to refuse the object
 * as larger than the buffer. A GET into a buffer keeps no more of the list
 * than an object that fits it could have: the rest is read into the frame
 * check and dropped, and the GET fails as too big without the process
 * growing by a list's worth. The control connection stays in step (no new
 * dial), and a list damaged in the part not kept still fails its check.
 */
TEST(huge_lookup_for_a_small_get_is_not_held)
{
    for (int keyed = 0; keyed < 2; keyed++) {
        struct fx x = {.f = {.huge = 1, .token = keyed ? "tok" : NULL}};
        struct rio_op ops[16];
        uint8_t small[16][4096];

        fx_start(&x, keyed ? "token=tok" : NULL);
        fx_get(&x, NULL);
        uint64_t rss0 = peak_rss_kib();
        for (int i = 0; i < 3; i++)
            T_ERR(rio_get(x.u.c, "big", small[0], sizeof(small[0]), NULL), RIO_ETOOBIG);
        for (unsigned i = 0; i < 16; i++)
            ops[i] = (struct rio_op){
                .type = RIO_OP_GET, .key = "big", .buf = small[i], .len = sizeof(small[i])};
        T_EQ(rio_batch(x.u.c, ops, 16, NULL), 0);
        for (unsigned i = 0; i < 16; i++)
            T_EQ(ops[i].result, (int64_t)RIO_ETOOBIG);
        T_LT(peak_rss_kib() - rss0, 16u * 1024u);
        T_EQ(tu_tcp(x.u.c).ctl_retries, 0u);

        /* The part of the list dropped still goes through the check. */
        atomic_store(&x.f.huge_flips, 1);
        T_ERR(rio_get(x.u.c, "big", small[0], sizeof(small[0]), NULL), RIO_ETOOBIG);
        T_EQ(tu_tcp(x.u.c).ctl_retries, 1u);
        fx_get(&x, NULL);
        fx_stop(&x);
    }
}

/* The largest list still arrives whole where the caller asked for all of
 * it (a lookup, a stat), in order, each checksum right. */
TEST(huge_lookup_list_arrives_whole)
{
    struct rx x = {.f = {.huge = 1}};
    struct rio_desc d;

    rx_start(&x, NULL);
    T_EQ(rio__tcp_ops.lookup(x.w.t, "big", &d), 0);
    T_EQ(d.nchunks, (uint64_t)F_HUGE_N);
    T_EQ(d.size, (uint64_t)F_HUGE_N * F_HUGE_CHUNK);
    T_NOTNULL(d.xxh);
    for (uint64_t i = 0; i < F_HUGE_N; i += 4099)
        T_EQ(d.xxh[i], F_HUGE_XXH(i));
    T_EQ(d.xxh[F_HUGE_N - 1], F_HUGE_XXH(F_HUGE_N - 1));
    rio_desc_cleanup(&d);
    /* Within a bound it is over: the descriptor, without the list. */
    T_EQ(rio__tcp_ops.lookup_within(x.w.t, "big", 1u << 20, &d), 0);
    T_EQ(d.nchunks, (uint64_t)F_HUGE_N);
    T_EQ(d.generation, (uint64_t)F_GEN);
    T_NULL(d.xxh);
    rio_desc_cleanup(&d);
    /* Within a bound it fits: whole. */
    T_EQ(rio__tcp_ops.lookup_within(x.w.t, "obj", F_SIZE, &d), 0);
    T_EQ(d.nchunks, (uint64_t)(F_SIZE / F_CHUNK));
    T_NOTNULL(d.xxh);
    T_EQ(d.xxh[3], x.f.xxh[3]);
    rio_desc_cleanup(&d);
    rx_stop(&x);
}

/* A server that never answers a LOOKUP held a GET with a 300 ms deadline
 * for the whole op timeout (5 s here): the control connection's try knew
 * only the op timeout. Now the try ends at the call's deadline. */
TEST(stalled_lookup_ends_at_the_call_deadline)
{
    struct fx x = {.f = {.stall_lookups = 1}, .op_timeout_ms = 5000};
    struct rio_call call = {.deadline_ms = 300};

    fx_start(&x, NULL);
    uint64_t t0 = t_now_ms();
    T_ERR(rio_get(x.u.c, "obj", x.b, F_SIZE, &call), RIO_EDEADLINE);
    T_LE(t_now_ms() - t0, 1500u);
    /* Without a deadline the op timeout bounds the try, as before; the
     * next one goes on a fresh connection. */
    fx_get(&x, NULL);
    fx_stop(&x);
}

static void *fire_main(void *p)
{
    usleep(200000);
    rio_cancel_fire(p);
    return NULL;
}

/* And its cancel token: the GET blocked in that LOOKUP ended only at the
 * op timeout, not within a few ms of the token firing. */
TEST(stalled_lookup_ends_at_the_call_cancel)
{
    struct fx x = {.f = {.stall_lookups = 1}, .op_timeout_ms = 5000};
    struct rio_cancel *cx;
    pthread_t th;

    fx_start(&x, NULL);
    T_OK(rio_cancel_new(&cx));
    struct rio_call call = {.cancel = cx};
    T_EQ(pthread_create(&th, NULL, fire_main, cx), 0);
    uint64_t t0 = t_now_ms();
    T_ERR(rio_get(x.u.c, "obj", x.b, F_SIZE, &call), RIO_ECANCELED);
    T_LE(t_now_ms() - t0, 1500u);
    pthread_join(th, NULL);
    rio_cancel_destroy(cx);
    fx_get(&x, NULL);
    fx_stop(&x);
}

struct lookup_thread {
    pthread_t th;
    struct rio_transport *t;
    struct rio_desc d;
    int ret;
};

static void *lookup_main(void *p)
{
    struct lookup_thread *l = p;
    l->ret = rio__tcp_ops.lookup(l->t, "obj", &l->d);
    return NULL;
}

/*
 * Metadata calls that overlap share a round on the control connection: while
 * one LOOKUP's answer is held, four more callers queue; once it comes, the
 * next round sends all four in one write, and the server (which answers them
 * in reverse order, as pipelining allows) sees them pipelined on one
 * connection. Each caller gets its own answer.
 */
TEST(overlapping_metadata_calls_share_a_round)
{
    struct fake f = {.hold_lookups = 1, .batch_lookups = 4};
    struct lookup_thread first, more[4];
    struct raw w;

    fake_start(&f);
    raw_open_at(&w, &f, NULL);
    first.t = w.t;
    T_EQ(pthread_create(&first.th, NULL, lookup_main, &first), 0);
    while (atomic_load(&f.lookups) < 1)
        usleep(1000);
    for (int i = 0; i < 4; i++) {
        more[i].t = w.t;
        T_EQ(pthread_create(&more[i].th, NULL, lookup_main, &more[i]), 0);
    }
    while (raw_ctr(&w).ctl_queued < 4)
        usleep(1000);
    atomic_store(&f.release, 1);
    T_EQ(pthread_join(first.th, NULL), 0);
    T_OK(first.ret);
    T_EQ(first.d.generation, (uint64_t)F_GEN);
    rio_desc_cleanup(&first.d);
    for (int i = 0; i < 4; i++) {
        T_EQ(pthread_join(more[i].th, NULL), 0);
        T_OK(more[i].ret);
        T_EQ(more[i].d.generation, (uint64_t)F_GEN);
        T_EQ(more[i].d.nchunks, (uint64_t)(F_SIZE / F_CHUNK));
        rio_desc_cleanup(&more[i].d);
    }
    struct rio__tcp_counters k = raw_ctr(&w);
    T_EQ(k.ctl_rounds, 2u);
    T_EQ(k.ctl_requests, 5u);
    T_EQ(k.ctl_round_peak, 4u);
    T_EQ(k.ctl_queued, 0u);
    T_EQ(k.ctl_retries, 0u);
    T_EQ(atomic_load(&f.lookups), 5);
    raw_close(&w);
    fake_stop(&f);
}

struct lookup_loop {
    pthread_t th;
    struct rio_transport *t;
    int n, ok;
};

static void *lookup_loop_main(void *p)
{
    struct lookup_loop *l = p;
    for (int i = 0; i < l->n; i++) {
        struct rio_desc d;
        if (rio__tcp_ops.lookup(l->t, "obj", &d) == 0 && d.generation == F_GEN)
            l->ok++;
        rio_desc_cleanup(&d);
    }
    return NULL;
}

/* Many callers at once, each call in whatever round it lands: every one
 * gets its answer, none is lost or answered twice, and every request was
 * sent exactly once (no failure: no round sent anything again). */
TEST(many_overlapping_metadata_calls_each_get_their_answer)
{
    struct fake f = {0};
    struct lookup_loop l[8];
    struct raw w;

    fake_start(&f);
    raw_open_at(&w, &f, NULL);
    for (int i = 0; i < 8; i++) {
        l[i] = (struct lookup_loop){.t = w.t, .n = 1000};
        T_EQ(pthread_create(&l[i].th, NULL, lookup_loop_main, &l[i]), 0);
    }
    for (int i = 0; i < 8; i++) {
        T_EQ(pthread_join(l[i].th, NULL), 0);
        T_EQ(l[i].ok, 1000);
    }
    struct rio__tcp_counters k = raw_ctr(&w);
    T_EQ(k.ctl_requests, 8u * 1000u);
    T_EQ(atomic_load(&f.lookups), 8 * 1000);
    T_LE(k.ctl_rounds, k.ctl_requests);
    T_EQ(k.ctl_queued, 0u);
    T_EQ(k.ctl_retries, 0u);
    raw_close(&w);
    fake_stop(&f);
}

/* n empty uploads opened on w, and their descriptors. */
static void open_uploads(struct raw *w, void **ups, struct rio_desc *ds, struct rio_desc **dp,
                         unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        T_OK(rio__tcp_ops.put_open(w->t, "obj", 0, F_CHUNK, &ups[i]));
        memset(&ds[i], 0, sizeof(ds[i]));
        ds[i].chunk_size = F_CHUNK;
        dp[i] = &ds[i];
    }
}

/*
 * A call worker's ready PUTs commit together: put_commit_many sends the
 * commits of one member in one round and its caller waits once. When the
 * round breaks (a damaged answer to the second), the first keeps its
 * answer and each of the others is asked again alone on a fresh
 * connection (the commit is idempotent by upload id), as put_commit does
 * for a lost answer: every commit gets its generation.
 */
TEST(commits_ready_together_share_a_round)
{
    struct fake f = {0};
    void *ups[6];
    struct rio_desc ds[6], *dp[6];
    int rets[6];
    struct raw w;

    fake_start(&f);
    raw_open_at(&w, &f, NULL);
    open_uploads(&w, ups, ds, dp, 6);
    uint64_t rounds0 = raw_ctr(&w).ctl_rounds;
    rio__tcp_ops.put_commit_many(w.t, ups, dp, rets, 6);
    struct rio__tcp_counters k = raw_ctr(&w);
    T_EQ(k.ctl_rounds - rounds0, 1u);
    T_EQ(k.ctl_round_peak, 6u);
    for (int i = 0; i < 6; i++) {
        T_EQ(rets[i], 0);
        T_GT(ds[i].generation, 1000u);
    }
    T_EQ(atomic_load(&f.commits), 6);
    T_EQ(k.ctl_retries, 0u);

    open_uploads(&w, ups, ds, dp, 4);
    atomic_store(&f.commits, 0);
    atomic_store(&f.bad_commit_at, 2);
    rio__tcp_ops.put_commit_many(w.t, ups, dp, rets, 4);
    for (int i = 0; i < 4; i++) {
        T_EQ(rets[i], 0);
        T_GT(ds[i].generation, 1000u);
    }
    T_EQ(ds[0].generation, 1001u); /* answered in the round that broke */
    k = raw_ctr(&w);
    T_EQ(k.ctl_retries, 1u); /* one fresh connection for the three asked again */
    raw_close(&w);
    fake_stop(&f);
}

/*
 * A commit whose answer did not come within the op timeout, and which the
 * server, asked again, says it is still applying (RIO_ETHROTTLE: a disk
 * tier writing a large object): it may well be published. The PUT used to
 * give up with RIO_ETHROTTLE (or RIO_EDEADLINE), which says nothing was
 * published; the outcome is unknown (RIO_EUNKNOWN), and the server is not
 * asked without end.
 */
TEST(commit_still_being_applied_is_an_unknown_outcome)
{
    struct fx x = {.f = {.pending_commit_at = 1}, .op_timeout_ms = 300};

    fx_start(&x, NULL);
    memset(x.b, 7, F_SIZE);
    uint64_t t0 = t_now_ms();
    T_ERR(rio_put(x.u.c, "obj", x.b, F_SIZE, NULL, NULL), RIO_EUNKNOWN);
    T_LE(t_now_ms() - t0, 15000u);
    T_GE(atomic_load(&x.f.commits), 2);
    fx_stop(&x);

    /* One that settles while it is asked again: the PUT succeeds, with
     * the generation the server gave the commit. */
    struct fx y = {.f = {.pending_commit_at = 1, .pending_throttles = 3}, .op_timeout_ms = 300};
    struct rio_desc d;
    fx_start(&y, NULL);
    memset(y.b, 7, F_SIZE);
    T_OK(rio_put(y.u.c, "obj", y.b, F_SIZE, NULL, &d));
    T_EQ(d.generation, 1005u);
    rio_desc_cleanup(&d);
    fx_stop(&y);

    /* A batch's commits go out together (put_commit_many): the same. */
    struct fx z = {.f = {.pending_commit_at = 1}, .op_timeout_ms = 300};
    struct rio_call call = {.deadline_ms = 2000};
    fx_start(&z, NULL);
    memset(z.b, 7, F_SIZE);
    struct rio_op op = {.type = RIO_OP_PUT, .key = "obj", .buf = z.b, .len = F_SIZE};
    T_EQ(rio_batch(z.u.c, &op, 1, &call), 0);
    T_EQ(op.result, (int64_t)RIO_EUNKNOWN);
    fx_stop(&z);

    /* The wait for it ends at the call's deadline (op timeout 4 s: its
     * own bound, times the retries, is 20 s), and at its cancel. */
    struct fx w = {.f = {.pending_commit_at = 1}, .op_timeout_ms = 4000};
    struct rio_call dl = {.deadline_ms = 1500};
    fx_start(&w, NULL);
    memset(w.b, 7, F_SIZE);
    t0 = t_now_ms();
    T_ERR(rio_put(w.u.c, "obj", w.b, F_SIZE, &dl, NULL), RIO_EUNKNOWN);
    T_LE(t_now_ms() - t0, 6000u);
    fx_stop(&w);
}

/*
 * The transport makes one try of a metadata op; trying again is the
 * engine's. A damaged LOOKUP answer is a reset-class error (-EPROTO: the
 * control connection was dropped), so the engine counts the failed try in
 * the call's retries and tries again on a fresh connection; with a budget
 * of one try the call fails with that class, after exactly one LOOKUP.
 * (When the transport retried on its own, the engine saw no failed try, and
 * one it gave up on was RIO_EPROTO, a class nobody retries.)
 */
TEST(metadata_retry_is_the_engines)
{
    struct fx x = {.f = {.bad_lookups = 1}};

    fx_start(&x, NULL);
    fx_get(&x, &x.call);
    T_EQ(x.st.retries[RIO_CLASS_RESET], 1u); /* the damaged try, seen by the engine */
    T_EQ(x.st.retries_total, 1u);
    T_EQ(atomic_load(&x.f.lookups), 2);
    T_EQ(tu_tcp(x.u.c).ctl_retries, 1u);
    tu_close(&x.u);

    x.o.retry_attempts = 1;
    atomic_store(&x.f.bad_lookups, 1);
    atomic_store(&x.f.lookups, 0);
    fx_open(&x, NULL);
    T_ERR(rio_get(x.u.c, "obj", x.b, F_SIZE, &x.call), -EPROTO);
    T_EQ(atomic_load(&x.f.lookups), 1);
    fx_stop(&x);
}

/*
 * A metadata answer that carries a service time (RIO_PF_SVC, bytes 28..31)
 * although its request never asked for one breaks the protocol
 * (docs/protocol.md, "Service time"), as it does on a data connection: the
 * control connection is dropped and the LOOKUP goes again on a fresh one.
 * Before, the control connection took such an answer (the flag and any
 * value in bytes 28..31) as if it were well formed.
 */
TEST(unasked_service_time_on_a_metadata_answer_is_refused)
{
    struct fx x = {.f = {.svc_lookups = 1}};

    fx_start(&x, NULL);
    fx_get(&x, &x.call);
    T_EQ(x.st.retries[RIO_CLASS_RESET], 1u);
    T_EQ(atomic_load(&x.f.lookups), 2);
    T_EQ(tu_tcp(x.u.c).ctl_retries, 1u);
    fx_stop(&x);
}

/*
 * A DELETE whose answer is damaged may have been applied, and a second one
 * would say "no such object" for a delete that worked (or remove a newer
 * PUT): the transport does not send it again and says RIO_EUNKNOWN, a class
 * the engine does not retry. The server saw one DELETE.
 */
TEST(delete_answer_lost_is_unknown_and_not_repeated)
{
    struct fx x = {.f = {.bad_deletes = 1}};

    fx_start(&x, NULL);
    T_ERR(rio_delete(x.u.c, "obj"), RIO_EUNKNOWN);
    T_EQ(atomic_load(&x.f.deletes), 1);
    T_OK(rio_delete(x.u.c, "obj")); /* the next one, on a fresh connection */
    T_EQ(atomic_load(&x.f.deletes), 2);
    fx_stop(&x);
}

struct sink {
    uint8_t *buf;
    size_t cap, got;
};

static int sink_cb(void *arg, const void *data, size_t len)
{
    struct sink *k = arg;
    if (len > k->cap - k->got)
        return -EOVERFLOW;
    memcpy(k->buf + k->got, data, len);
    k->got += len;
    return 0;
}

/* A GET that races a PUT of its key (its READs answered "the generation
 * changed") is planned again from a fresh LOOKUP and returns the new
 * generation whole; when the key never stops changing it ends with
 * RIO_EGENERATION after a bounded number of re-plans. A caller that named
 * the generation gets RIO_EGENERATION at once. */
TEST(get_racing_a_put_replans)
{
    struct fx x = {.f = {.bump_reads = 1}};

    fx_start(&x, NULL);
    fx_get(&x, &x.call);
    T_EQ(x.st.replans, 1u);

    /* A stream: before its first byte is handed out, the same. */
    struct sink k = {.buf = x.b, .cap = F_SIZE};
    memset(x.b, 0, F_SIZE);
    atomic_store(&x.f.bump_reads, 1);
    T_EQ(rio_get_stream(x.u.c, "obj", 4, sink_cb, &k, &x.call), (int64_t)F_SIZE);
    T_PATTERN(x.b, F_SIZE, F_SEED);
    T_EQ(x.st.replans, 1u);

    atomic_store(&x.f.bump_reads, 1000000);
    int before = atomic_load(&x.f.lookups);
    T_ERR(rio_get(x.u.c, "obj", x.b, F_SIZE, &x.call), RIO_EGENERATION);
    T_EQ(x.st.replans, 4u);
    T_EQ(atomic_load(&x.f.lookups) - before, 5);

    struct rio_call pinned = {.expect_generation = atomic_load(&x.f.gen)};
    T_ERR(rio_get(x.u.c, "obj", x.b, F_SIZE, &pinned), RIO_EGENERATION);
    fx_stop(&x);
}

/*
 * A batch of GETs racing PUTs: each GET runs again up to RIO__REPLANS_MAX
 * times, as a single rio_get does, however many race in one round. A key
 * that never stops changing: 5 lookups per GET (10 in all before: the
 * bound counted the GETs run again, so five racing in one round had no
 * second round).
 */
TEST(batch_racing_puts_replans_each_get_four_times)
{
    enum { N = 5 };
    struct fx x = {.f = {.bump_reads = 1000000}};
    struct rio_op ops[N];
    uint8_t *b[N];

    fx_start(&x, NULL);
    obj_gets(ops, b, N);
    int before = atomic_load(&x.f.lookups);
    T_EQ(rio_batch(x.u.c, ops, N, &x.call), 0);
    for (unsigned i = 0; i < N; i++) {
        T_ERR(ops[i].result, RIO_EGENERATION);
        free(b[i]);
    }
    T_EQ(atomic_load(&x.f.lookups) - before, 5 * N);
    T_EQ(x.st.replans, 4u * N);
    fx_stop(&x);
}

/* A connection that accepts requests and answers nothing is cut by the
 * progress watchdog well before the op timeout; the chunk goes again on a
 * fresh connection. */
TEST(stalled_connection_trips_the_watchdog)
{
    struct fx x = {.f = {.stall_reads = 1}, .op_timeout_ms = 10000, .depth = 1};

    fx_start(&x, "progress_timeout=300ms");
    uint64_t t0 = t_now_ms();
    T_EQ(rio_get(x.u.c, "obj", x.b, F_SIZE, &x.call), (int64_t)F_SIZE);
    uint64_t took = t_now_ms() - t0;
    T_PATTERN(x.b, F_SIZE, F_SEED);
    T_EQ(tu_tcp(x.u.c).watchdog_trips, 1u);
    T_EQ(x.st.retries[RIO_CLASS_TIMEOUT], 1u);
    T_GE(took, 250u);
    T_LT(took, 5000u);
    fx_stop(&x);
}

/*
 * Cancel while a READ body streams into dst: complete(-ECANCELED) comes at
 * once, and not one byte lands in dst afterwards; the rest of the body is
 * drained and the connection serves the next op byte-exact.
 */
TEST(cancel_mid_body_lands_nothing_after_complete)
{
    struct rx x = {.f = {.slow_body = 1}};
    struct rop r, r2;
    const uint64_t len = F_CHUNK;
    uint8_t *dst = malloc(len), *dst2 = malloc(len);

    rx_start(&x, NULL);
    raw_cancel_mid_body(&x.w, &r, dst, len);
    uint8_t *snap = malloc(len);
    memcpy(snap, dst, len);
    T_EQ(raw_ctr(&x.w).slots_armed, 1u); /* the tombstone, owed the rest */
    atomic_store(&x.f.release, 1);
    raw_drain(&x.w);
    /* Nothing moved in dst after complete(), and the last 4 KiB (sent
     * after the release) never came. */
    T_MEMEQ(dst, snap, len);
    for (size_t i = len - 4096; i < len; i++)
        if (dst[i] != 0xCC)
            T_FAIL("byte %zu of dst written after complete()", i);
    free(snap);
    T_EQ(raw_ctr(&x.w).tombstones, 1u);
    T_EQ(raw_ctr(&x.w).conn_failures, 0u);
    /* Same connection, next op: byte-exact. */
    raw_read(&x.w, &r2, 1, len, dst2, 5000);
    T_EQ(r2.io.res, (int64_t)len);
    T_EQ(t_check_pattern_at(dst2, len, F_SEED, F_CHUNK), -1);
    T_EQ(raw_ctr(&x.w).dials, 1u);
    rx_stop(&x);
    free(dst);
    free(dst2);
}

/* A READ of chunk 0 from a fake with under_mark, reaped until 8 KiB of
 * its body came under the receive low-water mark (when: *sent), then 1.2 s
 * more in reap, as the engine waits out its silence window; or (!reap)
 * reaped only until its header is read, the loop left alone from then.
 * Then path_moved, the engine's question. The rest of the body then lands
 * whole. */
static uint64_t under_mark_moved(bool reap, uint64_t *sent)
{
    struct rx x = {.f = {.under_mark = 1}};
    struct rop r;
    uint8_t *dst = malloc(F_CHUNK);
    uint64_t t0 = t_now_ms();

    rx_start(&x, NULL);
    raw_read_io(&r, 0, F_CHUNK, dst);
    T_OK(rio__tcp_ops.submit(x.w.t, &r.io));
    while (!(*sent = atomic_load(&x.f.under_mark_ns))) {
        uint64_t head = atomic_load(&x.f.under_mark_head_ns);
        if (reap || !head || rio__now_ns() < head + 50 * F_MS)
            rio__tcp_ops.reap(x.w.t, 10); /* !reap: until the header is read */
        else
            usleep(1000);
        if (t_now_ms() - t0 > 5000)
            T_FAIL("the fake sent no byte under the mark");
    }
    uint64_t ask = *sent + 1200 * F_MS, now;
    while ((now = rio__now_ns()) < ask) {
        if (reap)
            rio__tcp_ops.reap(x.w.t, (int)((ask - now) / F_MS) + 1);
        else
            usleep((useconds_t)((ask - now) / 1000) + 1);
    }
    uint64_t moved = rio__tcp_ops.path_moved(x.w.t, 0);
    T_EQ(atomic_load(&r.done), 0);
    atomic_store(&x.f.release, 1);
    raw_wait(&x.w, &r, 5000);
    T_EQ(r.io.res, (int64_t)F_CHUNK);
    T_EQ(t_check_pattern_at(dst, F_CHUNK, F_SEED, 0), -1);
    rx_stop(&x);
    free(dst);
    return moved;
}

/*
 * Bytes of a READ answer that arrive under the receive low-water mark wake
 * nobody; the loop looks at the socket's queue every TCP_LOWAT_LOOK_MS
 * while the answer is owed, so path_moved dates them to within a look of
 * their arrival, not to when it is asked. They were found only when the
 * engine asked (its silence window, 1 s later, the watchdog's quarter
 * being 2.5 s) and dated then: a rail black-holed just after such bytes
 * came looked alive for a second more, and the rails that had done their
 * share sat idle.
 */
TEST(bytes_under_the_lowat_mark_are_dated_when_they_came)
{
    uint64_t sent, moved = under_mark_moved(true, &sent);
    T_GE(moved, sent);              /* the bytes were seen */
    T_LT(moved - sent, 600 * F_MS); /* a look (100 ms) late, and room for a loaded machine */
}

/*
 * Bytes under the mark that the loop could not see (it did not run after
 * the header) are found by path_moved 1.2 s later, which cannot tell when
 * after the last look they came: it dates them a look's step after that
 * look, as the loop would have, not to itself. Dated to the question, bytes that came
 * just before a rail went dark, found while the engine's thread was away
 * from the loop, made the rail look alive for the whole silence window
 * more.
 */
TEST(bytes_under_the_lowat_mark_unseen_are_not_dated_now)
{
    uint64_t sent, moved = under_mark_moved(false, &sent);
    T_GE(moved + 300 * F_MS, sent); /* the bytes were seen, a look's step after the last */
    T_LT(moved, sent + 600 * F_MS);
}

/*
 * A PUT_CHUNK cancelled while its data is half on the wire: the transport
 * stops reading io->src at once (the caller frees it right after complete;
 * ASan would catch a late read), closes that connection, and sends the op
 * queued behind it again on a fresh one.
 */
TEST(cancel_put_mid_data_closes_and_requeues)
{
    struct rx x = {.f = {.slow_put = 1}};
    struct rop a, b;
    void *up = NULL;
    const uint64_t big = 32 * TU_MIB;

    rx_start(&x, "depth=4");
    T_OK(rio__tcp_ops.put_open(x.w.t, "obj", big + F_CHUNK, big, &up));
    uint8_t *src = tu_pattern(big, 1), *src2 = tu_pattern(F_CHUNK, 2);
    memset(&a, 0, sizeof(a));
    a.io.kind = RIO_IO_WRITE;
    a.io.upload = up;
    a.io.index = 0;
    a.io.off = 0;
    a.io.len = big;
    a.io.src = src;
    a.io.complete = raw_complete;
    b = a;
    b.io.index = 1;
    b.io.off = big;
    b.io.len = F_CHUNK;
    b.io.src = src2;
    T_OK(rio__tcp_ops.submit(x.w.t, &a.io));
    T_OK(rio__tcp_ops.submit(x.w.t, &b.io));
    /* Let the socket buffers fill: the server is not reading. */
    uint64_t t0 = t_now_ms();
    while (raw_ctr(&x.w).bytes_out < 1 * TU_MIB && t_now_ms() - t0 < 5000)
        rio__tcp_ops.reap(x.w.t, 10);
    T_GE(raw_ctr(&x.w).bytes_out, 1 * TU_MIB);
    T_LT(raw_ctr(&x.w).bytes_out, big);
    rio__tcp_ops.cancel(x.w.t, &a.io);
    raw_wait(&x.w, &a, 1000);
    T_EQ(a.io.res, -ECANCELED);
    free(src); /* the transport must not read it any more */
    atomic_store(&x.f.release, 1);
    raw_wait(&x.w, &b, 5000);
    T_EQ(b.io.res, (int64_t)F_CHUNK);
    struct rio__tcp_counters k = raw_ctr(&x.w);
    T_EQ(k.requeued, 1u);
    T_EQ(k.dials, 2u);
    T_EQ(k.conn_failures, 0u);
    raw_drain(&x.w);
    rio__tcp_ops.put_abort(x.w.t, up);
    rx_stop(&x);
    free(src2);
}

/*
 * Refused dials fail the ops at once with ECONNREFUSED, and the rail backs
 * off: an op submitted during the backoff fails without a new dial.
 */
TEST(refused_dials_back_off)
{
    struct rx x = {.f = {0}};
    struct rop r;
    uint8_t *dst = malloc(F_CHUNK);

    rx_start(&x, "dial_backoff=500ms");
    fake_close_listener(&x.f);
    raw_read(&x.w, &r, 0, F_CHUNK, dst, 2000);
    T_EQ(r.io.res, -ECONNREFUSED);
    T_EQ(raw_ctr(&x.w).dials, 1u);
    T_EQ(raw_ctr(&x.w).dial_failures, 1u);
    /* Within the backoff: fails the same way, no dial. */
    raw_read(&x.w, &r, 0, F_CHUNK, dst, 2000);
    T_EQ(r.io.res, -ECONNREFUSED);
    T_EQ(raw_ctr(&x.w).dials, 1u);
    /* After it: a new dial. */
    usleep(600000);
    raw_read(&x.w, &r, 0, F_CHUNK, dst, 2000);
    T_EQ(r.io.res, -ECONNREFUSED);
    T_EQ(raw_ctr(&x.w).dials, 2u);
    raw_drain(&x.w);
    rx_stop(&x);
    free(dst);
}

/* Authentication is mutual: a server that cannot prove the token is refused. */
TEST(server_must_prove_the_token)
{
    struct fx x = {.f = {.token = "tok", .bad_server_mac = 1}};

    fx_refused(&x, "token=tok", RIO_EAUTH);
    x.f.bad_server_mac = 0;
    fx_open(&x, "token=tok");
    fx_get(&x, NULL);
    fx_stop(&x);
}

/* Every connection the fake holds is cut (the server went away); it keeps
 * listening. */
static void fake_drop_conns(struct fake *f)
{
    pthread_mutex_lock(&f->mu);
    for (int i = 0; i < f->nth; i++)
        shutdown(f->fds[i], SHUT_RDWR);
    pthread_mutex_unlock(&f->mu);
}

/*
 * Auth downgrade (issue 13 item 3): a client holding a token refuses a server
 * whose HELLO says auth_required 0, since such a server cannot prove it holds
 * the token; it sends that server no request past the handshake. At open,
 * and when an impostor takes the address over while the client is up: GET
 * and PUT fail with RIO_EAUTH, the impostor sees no LOOKUP, PUT_OPEN or data.
 */
TEST(token_client_refuses_a_server_without_auth)
{
    struct fx x = {.f = {.token = "tok", .no_auth = 1}};

    fx_refused(&x, "token=tok", RIO_EAUTH);
    T_EQ(atomic_load(&x.f.data_ops), 0);
    T_NOTNULL(strstr(rio_strerror(RIO_EAUTH), "did not prove it holds the token"));

    /* The genuine server first, then an impostor on its address. */
    x.f.no_auth = 0;
    fx_open(&x, "token=tok");
    fx_get(&x, NULL);
    x.f.no_auth = 1;
    fake_drop_conns(&x.f);
    usleep(50000);
    int before = atomic_load(&x.f.data_ops);
    int puts = atomic_load(&x.f.puts_ok);
    T_EQ(rio_get(x.u.c, "obj", x.b, F_SIZE, NULL), (int64_t)RIO_EAUTH);
    T_EQ(rio_put(x.u.c, "obj", x.b, F_SIZE, NULL, NULL), RIO_EAUTH);
    T_EQ(atomic_load(&x.f.data_ops), before);
    T_EQ(atomic_load(&x.f.puts_ok), puts);
    rio_client_destroy(x.u.c);
    x.u.c = NULL;
    fx_stop(&x);
}

/*
 * Version negotiation, the client's side: an older (version 1) server
 * answers the HELLO "no common version" in its framing and closes; the
 * client reports RIO_EVERSION, not a reset or a malformed frame.
 */
TEST(version1_server_is_a_version_error)
{
    struct fx x = {.f = {.v1 = 1}};

    fx_refused(&x, NULL, RIO_EVERSION);
    T_NOTNULL(strstr(rio_strerror(RIO_EVERSION), "protocol version"));
    T_EQ(atomic_load(&x.f.data_ops), 0);
    fx_stop(&x);
}

/* The server's max_depth caps a connection's window below the client's depth. */
TEST(server_max_depth_caps_the_window)
{
    struct fx x = {.f = {.max_depth = 2}, .depth = 8};

    fx_start(&x, NULL);
    fx_get(&x, NULL);
    struct rio__tcp_counters k = tu_tcp(x.u.c);
    T_LE(k.slots_peak, 2u);
    T_EQ(k.conns_open, 1u);
    fx_stop(&x);
}

/* READ chunk i on path i, for each of 4 paths, into dst; each ends in res
 * within timeout_ms. */
static void read_each_path(struct raw *w, uint8_t *dst, unsigned timeout_ms, int64_t res)
{
    struct rop r[4];

    for (unsigned i = 0; i < 4; i++) {
        raw_read_io(&r[i], i, F_CHUNK, dst + i * F_CHUNK);
        r[i].io.path = i;
        T_OK(rio__tcp_ops.submit(w->t, &r[i].io));
    }
    for (unsigned i = 0; i < 4; i++) {
        raw_wait(w, &r[i], timeout_ms);
        T_EQ(r[i].io.res, res);
    }
}

/*
 * Four connections on one rail (conns=4): while the rail has no good dial,
 * one dial goes and the others wait for it, sharing its failure; when the
 * server is back (after the backoff) they all connect.
 */
TEST(dials_are_single_flight_per_rail)
{
    struct rx x = {.f = {0}};
    uint8_t *dst = malloc(4 * F_CHUNK);

    rx_start(&x, "conns=4&dial_backoff=200ms");
    T_EQ(x.w.t->npaths, 4u);
    fake_close_listener(&x.f);
    read_each_path(&x.w, dst, 2000, -ECONNREFUSED);
    T_EQ(raw_ctr(&x.w).dials, 1u);
    T_EQ(raw_ctr(&x.w).dial_failures, 1u);
    /* The server is back: after the backoff every path connects. */
    fake_relisten(&x.f);
    usleep(300000);
    read_each_path(&x.w, dst, 5000, (int64_t)F_CHUNK);
    T_EQ(t_check_pattern(dst, 4 * F_CHUNK, F_SEED), -1);
    struct rio__tcp_counters k = raw_ctr(&x.w);
    T_EQ(k.dials, 5u);
    T_EQ(k.conns_open, 4u);
    raw_drain(&x.w);
    rx_stop(&x);
    free(dst);
}

/*
 * A cancelled READ whose answer never finishes (a link that still ACKs but
 * moves almost nothing): after cancel_grace the connection is closed and the
 * op queued behind the tombstone goes out again on a fresh one.
 */
TEST(stuck_tombstone_is_cut_after_the_grace)
{
    struct rx x = {.f = {.slow_body = 1}};
    struct rop r, r2;
    const uint64_t len = F_CHUNK;
    uint8_t *dst = malloc(len), *dst2 = malloc(len), *snap = malloc(len);

    rx_start(&x, "cancel_grace=200ms");
    raw_cancel_mid_body(&x.w, &r, dst, len);
    memcpy(snap, dst, len);
    /* Queued behind the tombstone on the same connection. */
    raw_read_io(&r2, 1, len, dst2);
    uint64_t t0 = t_now_ms();
    T_OK(rio__tcp_ops.submit(x.w.t, &r2.io));
    raw_wait(&x.w, &r2, 5000);
    uint64_t took = t_now_ms() - t0;
    T_EQ(r2.io.res, (int64_t)len);
    T_EQ(t_check_pattern_at(dst2, len, F_SEED, F_CHUNK), -1);
    T_GE(took, 150u);
    T_LT(took, 3000u);
    struct rio__tcp_counters k = raw_ctr(&x.w);
    T_EQ(k.grace_closes, 1u);
    T_EQ(k.requeued, 1u);
    T_EQ(k.dials, 2u);
    T_EQ(k.slots_armed, 0u);
    T_MEMEQ(dst, snap, len);
    raw_close(&x.w);
    atomic_store(&x.f.release, 1);
    free(dst);
    free(dst2);
    free(snap);
    fake_stop(&x.f);
}
