/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * railiod under hostile or broken peers: a corpus of malformed frames, each
 * closing only its own connection while another client keeps working;
 * slowloris peers (receiving and sending) cut off within the progress
 * timeout; max connections; authentication; idle connections.
 */
#include "server_env.h"
#include "tlib.h"
#include <pthread.h>
#include <stdatomic.h>

#define CHUNK 65536u

/* A header with every field chosen; check = 1 computes a valid check. */
static void raw_hdr(uint8_t b[32], uint32_t magic, uint8_t version, uint8_t op, uint16_t flags,
                    uint64_t id, uint32_t body_len, int32_t status, int check, uint32_t reserved)
{
    memset(b, 0, 32);
    for (int i = 0; i < 4; i++)
        b[i] = (uint8_t)(magic >> (8 * i));
    b[4] = version;
    b[5] = op;
    b[6] = (uint8_t)flags;
    b[7] = (uint8_t)(flags >> 8);
    for (int i = 0; i < 8; i++)
        b[8 + i] = (uint8_t)(id >> (8 * i));
    for (int i = 0; i < 4; i++) {
        b[16 + i] = (uint8_t)(body_len >> (8 * i));
        b[20 + i] = (uint8_t)((uint32_t)status >> (8 * i));
        b[28 + i] = (uint8_t)(reserved >> (8 * i));
    }
    uint32_t ck = (uint32_t)rio__xxh3(b, 24);
    if (!check)
        ck ^= 0x5a5a;
    for (int i = 0; i < 4; i++)
        b[24 + i] = (uint8_t)(ck >> (8 * i));
}

static void good_hdr(uint8_t b[32], uint8_t op, uint32_t body_len)
{
    raw_hdr(b, RIO_PROTO_MAGIC, RIO_PROTO_VERSION, op, 0, 9, body_len, 0, 1, 0);
}

/* The bystander: a client with an object, which must keep working. */
struct bystander {
    struct wc c;
    uint64_t gen;
    uint8_t *data;
};

/* A client of its own on e that stored "keep" (4 chunks of pattern seed). */
static void bystander_start(struct bystander *b, struct srv_env *e, uint64_t seed)
{
    b->data = t_pattern_buf(4 * 4096, seed);
    wc_open(&b->c, e->addr[0]);
    b->gen = wc_put(&b->c, "keep", b->data, 4 * 4096, 4096);
}

static void bystander_check(struct bystander *b)
{
    uint8_t buf[4096];
    T_EQ(wc_ping(&b->c), 0);
    T_EQ(wc_read(&b->c, "keep", b->gen, 4096, sizeof(buf), buf), 0);
    T_MEMEQ(buf, b->data + 4096, sizeof(buf));
}

enum { CLOSE_WRITE = 1 }; /* shut our sending side after the bytes */

struct bad_case {
    const char *name;
    uint8_t bytes[128];
    size_t len;
    int flags;
};

static void corpus_add(struct bad_case *cs, unsigned *n, const char *name, const uint8_t *hdr,
                       const void *body, size_t blen, int flags)
{
    struct bad_case *c = &cs[(*n)++];
    c->name = name;
    c->len = 0;
    if (hdr) {
        memcpy(c->bytes, hdr, 32);
        c->len = 32;
    }
    if (blen)
        memcpy(c->bytes + c->len, body, blen);
    c->len += blen;
    c->flags = flags;
}

/* A version 2 frame of op with body (its tag appended, made right, or
 * wrong when bad_tag). */
static void corpus_sealed(struct bad_case *cs, unsigned *n, const char *name, uint8_t op,
                          const void *body, size_t blen, int flags, int bad_tag)
{
    uint8_t b[128];
    struct rio_proto_sess sess = {0};
    struct iovec part = {b, 32 + blen};

    good_hdr(b, op, (uint32_t)(blen + RIO_PROTO_TAG_LEN));
    memcpy(b + 32, body, blen);
    T_OK(rio__proto_seal(&sess, 0, &part, 1, b + 32 + blen));
    if (bad_tag)
        b[32 + blen + 3] ^= 0x10;
    corpus_add(cs, n, name, b, b + 32, blen + RIO_PROTO_TAG_LEN, flags);
}

TEST(malformed_frames_close_only_their_connection)
{
    struct srv_env e;
    struct bystander by;
    struct bad_case cs[40];
    unsigned n = 0;
    uint8_t h[32];
    const char *args[] = {"--metrics", "127.0.0.1:0", NULL};

    srv_start(&e, args);
    bystander_start(&by, &e, 5);

    /* Header-level garbage. */
    good_hdr(h, RIO_OP_PING, 0);
    corpus_add(cs, &n, "truncated header", h, NULL, 0, 0);
    cs[n - 1].len = 13;
    cs[n - 1].flags = CLOSE_WRITE;
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_PING, 0, 1, 0xffffffffu, 0, 1, 0);
    corpus_add(cs, &n, "huge length", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_PUT_CHUNK, 0, 1, RIO_PROTO_BODY_CAP + 1, 0, 1, 0);
    corpus_add(cs, &n, "length over the cap", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, 0, 0, 1, 0, 0, 1, 0);
    corpus_add(cs, &n, "opcode 0", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP__MAX + 1, 0, 1, 0, 0, 1, 0);
    corpus_add(cs, &n, "opcode past the last", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, 0xff, 0, 1, 0, 0, 1, 0);
    corpus_add(cs, &n, "opcode 255", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 3, RIO_OP_PING, 0, 1, 0, 0, 1, 0);
    corpus_add(cs, &n, "version 3", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, RIO_PROTO_VERSION, RIO_OP_PING, 0, 1, 0, 0, 1, 0);
    corpus_add(cs, &n, "no room for the tag", h, NULL, 0, 0);
    raw_hdr(h, 0x474e4950u, 1, RIO_OP_PING, 0, 1, 0, 0, 1, 0);
    corpus_add(cs, &n, "bad magic", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_PING, 0, 1, 0, 0, 0, 0);
    corpus_add(cs, &n, "bad header check", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_PING, 0, 1, 0, 0, 1, 7);
    corpus_add(cs, &n, "reserved bytes", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_PING, 0x0100, 1, 0, 0, 1, 0);
    corpus_add(cs, &n, "unknown flag", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_PING, RIO_PF_RESPONSE, 1, 0, 0, 1, 0);
    corpus_add(cs, &n, "response flag on a request", h, NULL, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_PING, 0, 1, 0, -5, 1, 0);
    corpus_add(cs, &n, "status on a request", h, NULL, 0, 0);
    static const char http[] = "GET /metrics HTTP/1.1\r\nHost: localhost\r\n\r\n";
    corpus_add(cs, &n, "HTTP request", NULL, http, strlen(http), 0);
    /* Bodies. */
    good_hdr(h, RIO_OP_LOOKUP, 100);
    corpus_add(cs, &n, "body shorter than declared, then close", h, "\x05\x00keyke", 7,
               CLOSE_WRITE);
    good_hdr(h, RIO_OP_PING, RIO_PROTO_CTRL_BODY_MAX + 1);
    corpus_add(cs, &n, "control body over its limit", h, NULL, 0, 0);
    corpus_sealed(cs, &n, "key with NUL", RIO_OP_LOOKUP, "\x03\x00k\0y", 5, 0, 0);
    corpus_sealed(cs, &n, "zero-length key", RIO_OP_LOOKUP, "\x00\x00", 2, 0, 0);
    corpus_sealed(cs, &n, "key length past the body", RIO_OP_DELETE, "\x10\x00kk", 4, 0, 0);
    corpus_sealed(cs, &n, "frame check failed", RIO_OP_DELETE, "\x04\x00keep", 6, 0, 1);
    corpus_sealed(cs, &n, "HELLO one byte short", RIO_OP_HELLO,
                  "\x02\x00\x02\x00\0\0\0\0"
                  "0123456789abcde",
                  23, 0, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_HELLO, 0, 1, 24, 0, 1, 0);
    corpus_add(cs, &n, "HELLO whose check in caps is wrong", h,
               "\x02\x00\x02\x00\1\2\3\4"
               "0123456789abcdef",
               24, 0);
    raw_hdr(h, RIO_PROTO_MAGIC, 1, RIO_OP_LOOKUP, 0, 1, 6, 0, 1, 0);
    corpus_add(cs, &n, "version 1 LOOKUP", h, "\x04\x00keep", 6, 0);
    good_hdr(h, RIO_OP_PUT_CHUNK, 24 + RIO_PROTO_TAG_LEN);
    corpus_add(cs, &n, "PUT_CHUNK without data", h, "0123456789abcdef0123456789abcdef01234567", 40,
               0);
    good_hdr(h, RIO_OP_PUT_COMMIT, 48 + 8 + RIO_PROTO_TAG_LEN);
    corpus_add(cs, &n, "PUT_COMMIT list length mismatch", h,
               "\1\0\0\0\0\0\0\0\xff\xff\xff\xff\xff\xff\xff\x1f"
               "0123456789abcdef0123456789abcdef",
               48, CLOSE_WRITE);
    good_hdr(h, RIO_OP_PUT_COMMIT, 47 + RIO_PROTO_TAG_LEN);
    corpus_add(cs, &n, "PUT_COMMIT too short", h, NULL, 0, 0);
    corpus_sealed(cs, &n, "STAT with a body", RIO_OP_STAT, "abc", 3, 0, 0);
    corpus_sealed(cs, &n, "READ of length 0", RIO_OP_READ,
                  "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", 22, 0, 0);

    for (unsigned i = 0; i < n; i++) {
        struct wc bad;
        uint64_t t0 = t_now_ms();
        wc_connect(&bad, e.addr[0]);
        T_OK(wc_send_raw(&bad, cs[i].bytes, cs[i].len));
        if (cs[i].flags & CLOSE_WRITE)
            shutdown(bad.fd, SHUT_WR);
        if (wc_wait_closed(&bad, 3000) != 0)
            T_FAIL("case '%s': the connection was not closed", cs[i].name);
        T_LT(t_now_ms() - t0, 2000u);
        wc_close(&bad);
        bystander_check(&by);
    }
    /* Each case was counted once. */
    char *text = srv_http_get(e.metrics, "/metrics");
    T_NOTNULL(text);
    T_EQ(srv_metric(text, "railiod_rejected_frames_total"), (double)n);
    free(text);
    wc_close(&by.c);
    free(by.data);
    T_EQ(srv_stop(&e), 0);
}

static uint64_t rnd(uint64_t *r)
{
    *r = *r * 6364136223846793005ull + 1442695040888963407ull;
    return *r >> 33;
}

/*
 * Hundreds of connections sending random frames (valid headers, random
 * opcodes and bodies, plausible key lengths, real upload ids now and then),
 * each closed at a random point: the server stays up, the bystander keeps
 * working, and the server still exits 0 (no leak under the sanitizers).
 */
TEST(random_frames_against_live_server)
{
    struct srv_env e;
    struct bystander by;
    uint64_t r = 0x9e3779b97f4a7c15ull;
    uint8_t *buf = malloc(1 << 16);

    srv_start(&e, NULL);
    bystander_start(&by, &e, 7);
    uint64_t up = 0;
    T_EQ(wc_put_open(&by.c, "fuzzed", 3 * 4096, 4096, 0, &up), 0);

    for (int conn = 0; conn < 300; conn++) {
        struct wc c;
        size_t len = 0;
        int frames = 1 + (int)(rnd(&r) % 8);
        wc_connect(&c, e.addr[0]);
        for (int f = 0; f < frames && len < (1 << 16) - 4200; f++) {
            uint8_t op = (uint8_t)(rnd(&r) % (RIO_OP__MAX + 2));
            uint32_t blen = (uint32_t)(rnd(&r) % 4 == 0 ? rnd(&r) % 4096 : rnd(&r) % 64);
            if (op == RIO_OP_PUT_CHUNK && rnd(&r) % 2)
                blen = 24 + 4096;
            raw_hdr(buf + len, RIO_PROTO_MAGIC, 1, op, rnd(&r) % 16 == 0 ? 1 : 0, rnd(&r), blen, 0,
                    rnd(&r) % 32 != 0, 0);
            len += 32;
            for (uint32_t i = 0; i < blen; i++)
                buf[len + i] = (uint8_t)rnd(&r);
            if (blen >= 2 && rnd(&r) % 2) { /* a key length that fits */
                buf[len] = (uint8_t)(blen - 2);
                buf[len + 1] = (uint8_t)((blen - 2) >> 8);
            }
            if (blen >= 24 && (op == RIO_OP_PUT_CHUNK || op == RIO_OP_PUT_COMMIT) && rnd(&r) % 2) {
                memcpy(buf + len, &up, 8); /* the real upload id */
                memset(buf + len + 8, 0, 8);
            }
            len += blen;
        }
        size_t cut = rnd(&r) % 4 == 0 ? (size_t)(rnd(&r) % len) : len;
        if (wc_send_raw(&c, buf, cut) == 0 && rnd(&r) % 2)
            wc_wait_closed(&c, 20); /* sometimes read what comes back */
        wc_close(&c);
        if (conn % 50 == 0)
            bystander_check(&by);
    }
    bystander_check(&by);
    wc_close(&by.c);
    free(by.data);
    free(buf);
    T_EQ(srv_stop(&e), 0);
}

/* One byte per 200 ms (faster than any slowloris needs to be): cut within
 * the progress timeout, header or body; the bystander never notices. */
TEST(slowloris_is_cut_off)
{
    struct srv_env e;
    struct bystander by;
    const char *args[] = {"--progress-timeout", "1s",          "--min-rate", "16M",
                          "--metrics",          "127.0.0.1:0", NULL};
    uint8_t h[32];

    srv_start(&e, args);
    bystander_start(&by, &e, 6);

    for (int body = 0; body < 2; body++) {
        struct wc s;
        wc_connect(&s, e.addr[0]);
        uint64_t t0 = t_now_ms();
        int closed = 0;
        if (body) {
            /* A whole header, then a 64 KiB chunk body at 5 bytes/s. */
            uint64_t up = 0;
            struct wc w;
            wc_connect(&w, e.addr[0]);
            T_EQ(wc_put_open(&w, "slow", CHUNK, CHUNK, 0, &up), 0);
            wc_close(&w);
            T_OK(wc_chunk_head(&s, up, 0, 1, CHUNK));
            t0 = t_now_ms();
        } else {
            good_hdr(h, RIO_OP_PING, 0);
        }
        for (int i = 0; i < 40 && !closed; i++) {
            uint8_t byte = body ? 0x55 : h[i % 32];
            if (send(s.fd, &byte, 1, MSG_NOSIGNAL) != 1)
                closed = 1;
            else if (wc_wait_closed(&s, 200) == 0)
                closed = 1;
            bystander_check(&by);
        }
        uint64_t el = t_now_ms() - t0;
        T_TRUE(closed);
        /* progress-timeout 1 s (+ 64 KiB at the 16 MiB/s minimum rate for
         * the body), checked every 100 ms. */
        T_LT(el, 2500u); /* slack for sanitizer builds on a busy machine */
        T_GT(el, 900u);
        wc_close(&s);
    }
    /* A reader that asks for 48 MiB and then reads a trickle (4 KiB every
     * 100 ms: ACKs keep coming, so TCP itself never gives up): the
     * watchdog cuts it after 1 s + 48 MiB / 16 MiB/s. */
    {
        const uint32_t bn = 48u << 20;
        uint8_t *big = malloc(bn);
        t_fill_pattern(big, bn, 8);
        uint64_t g = wc_put(&by.c, "big", big, bn, 4u << 20);
        struct wc s;
        T_OK(wc_try_connect_ex(&s, e.addr[0], 10, 4096));
        struct rio_proto_read m = {
            .generation = g, .off = 0, .len = bn, .key = "big", .key_len = 3};
        uint8_t out[64], sink[4096];
        int len = rio__proto_enc_read(&m, out, sizeof(out));
        uint64_t t0 = t_now_ms();
        T_OK(wc_send2(&s, RIO_OP_READ, 1, out, (size_t)len, NULL, 0));
        for (;;) {
            ssize_t r = recv(s.fd, sink, sizeof(sink), 0);
            if (r <= 0)
                break;
            T_LT(t_now_ms() - t0, 8000u);
            usleep(100000);
        }
        bystander_check(&by);
        T_GT(t_now_ms() - t0, 3900u);
        T_LT(t_now_ms() - t0, 7000u);
        wc_close(&s);
        free(big);
    }
    char *text = srv_http_get(e.metrics, "/metrics");
    T_NOTNULL(text);
    T_EQ(srv_metric(text, "railiod_timeouts_total{kind=\"progress\"}"), 3.0);
    free(text);
    wc_close(&by.c);
    free(by.data);
    T_EQ(srv_stop(&e), 0);
}

/* a's side of take_over: one more byte of the chunk every 5 ms (a rail
 * that browned out: it still moves bytes, almost none), until the server
 * drops the connection or the test says stop. */
struct trickle {
    struct wc *a;
    const uint8_t *next;
    _Atomic int stop;
    int sent;
};

static void *trickle_main(void *arg)
{
    struct trickle *t = arg;
    while (!atomic_load(&t->stop) && wc_send_raw(t->a, t->next + t->sent, 1) == 0) {
        t->sent++;
        usleep(5000);
    }
    return NULL;
}

/*
 * A chunk whose first receiver stalled (trickle 0: a rail that died
 * mid-chunk) or still trickles (trickle 1: a brownout) and that the client
 * sends again on another connection, as it does once it gave up on the
 * first attempt: the first retry is refused while the first receiver holds
 * the chunk, and that connection is dropped at once, so the next retry 50 ms
 * later gets the chunk; long before the progress timeout (30 s), and however
 * the first receiver still moves bytes. The bytes that land are the
 * retry's, whole.
 */
static void take_over(int trickle)
{
    struct srv_env e;
    const char *args[] = {"--progress-timeout", "30s", "--min-rate", "1", NULL};
    const size_t size = 2 * CHUNK;
    uint8_t *data = malloc(size);
    uint64_t up = 0, gen = 0;
    struct wc a, b;
    struct trickle t = {.a = &a, .next = NULL};
    pthread_t th;

    t_fill_pattern(data, size, 21);
    srv_start_wc(&e, args, &a);
    wc_open(&b, e.addr[0]);
    T_EQ(wc_put_open(&b, "taken", size, CHUNK, 0, &up), 0);
    uint64_t x0 = rio__xxh3(data, CHUNK), x1 = rio__xxh3(data + CHUNK, CHUNK);

    /* a: chunk 0's header and half its bytes, then silence or a trickle. */
    T_OK(wc_chunk_head(&a, up, 0, x0, CHUNK));
    T_OK(wc_send_raw(&a, data, CHUNK / 2));
    t.next = data + CHUNK / 2;
    if (trickle)
        T_EQ(pthread_create(&th, NULL, trickle_main, &t), 0);
    usleep(50000);

    /* b sends chunk 0 again: refused while a holds it, until a is dropped. */
    uint64_t t0 = t_now_ms();
    int st, tries = 0;
    while ((st = wc_put_chunk(&b, up, 0, x0, data, CHUNK)) == RIO_ETHROTTLE) {
        T_LT(t_now_ms() - t0, 3000u);
        tries++;
        usleep(50000);
    }
    T_EQ(st, 0);
    T_EQ(tries, 1); /* refused once: a went with that refusal */
    T_EQ(wc_wait_closed(&a, 1000), 0);
    T_LT(t_now_ms() - t0, 1000u); /* not the 30 s progress timeout */
    if (trickle) {
        atomic_store(&t.stop, 1);
        pthread_join(th, NULL);
        T_GT(t.sent, 0); /* a did move bytes while b retried */
    }
    T_EQ(wc_put_chunk(&b, up, 1, x1, data + CHUNK, CHUNK), 0);
    uint64_t xl[2] = {x0, x1};
    char etag[33];
    wc_etag(data, size, etag);
    T_EQ(wc_put_commit(&b, up, 2, xl, etag, &gen), 0);
    T_GT(gen, 0u);
    wc_close(&a);
    wc_close(&b);
    free(data);
    T_EQ(srv_stop(&e), 0);
}

TEST(stalled_chunk_is_taken_over)
{
    take_over(0);
}

TEST(trickling_chunk_is_taken_over)
{
    take_over(1);
}

TEST(max_connections)
{
    struct srv_env e;
    const char *args[] = {"--max-conns", "4", NULL};
    struct wc c[4], extra;

    srv_start(&e, args);
    for (int i = 0; i < 4; i++) {
        wc_open(&c[i], e.addr[0]);
    }
    /* The fifth is accepted by the kernel, then closed at once. */
    wc_connect(&extra, e.addr[0]);
    T_EQ(wc_wait_closed(&extra, 2000), 0);
    wc_close(&extra);
    for (int i = 0; i < 4; i++)
        T_EQ(wc_ping(&c[i]), 0);
    /* A slot frees when a connection closes. */
    wc_close(&c[3]);
    int ok = 0;
    for (int tries = 0; tries < 100 && !ok; tries++) {
        usleep(20000);
        wc_connect(&c[3], e.addr[0]);
        if (wc_ping(&c[3]) == 0)
            ok = 1;
        else
            wc_close(&c[3]);
    }
    T_TRUE(ok);
    wc_close_all(c, 4);
    T_EQ(srv_stop(&e), 0);
}

TEST(authentication)
{
    struct srv_env e;
    char token[256];
    struct wc c;
    struct rio_proto_desc d;
    uint8_t *keep;
    uint8_t buf[16];

    srv_prepare(&e);
    srv_write_token(&e, "s3cret-token", token, sizeof(token));
    const char *args[] = {"--auth-token-file", token, NULL};
    srv_start_listen(&e, NULL, args);

    /* Wrong token: refused, and that connection is closed. */
    wc_connect(&c, e.addr[0]);
    T_EQ(wc_hello_ex(&c, "wrong-token", NULL, NULL), -EACCES);
    T_EQ(wc_wait_closed(&c, 2000), 0);
    wc_close(&c);

    /* No AUTH: PING works, everything else is refused (connection kept). */
    wc_connect(&c, e.addr[0]);
    T_EQ(wc_ping(&c), 0);
    T_EQ(wc_lookup(&c, "k", &d, &keep), -EACCES);
    T_EQ(wc_read(&c, "k", 0, 0, 1, buf), -EACCES);
    T_EQ(wc_delete(&c, "k"), -EACCES);
    T_EQ(wc_call(&c, RIO_OP_STAT, NULL, 0, NULL, 0, NULL, NULL), -EACCES);
    uint64_t up;
    T_EQ(wc_put_open(&c, "k", 1, 1, 0, &up), -EACCES);
    /* AUTH without a HELLO first: refused, closed. */
    uint8_t mac[RIO_PROTO_MAC_LEN] = {0};
    T_EQ(wc_call(&c, RIO_OP_AUTH, mac, sizeof(mac), NULL, 0, NULL, NULL), -EACCES);
    T_EQ(wc_wait_closed(&c, 2000), 0);
    wc_close(&c);

    /* Before AUTH no large body is read: the connection is cut. */
    wc_connect(&c, e.addr[0]);
    uint8_t h[32];
    good_hdr(h, RIO_OP_PUT_CHUNK, 1u << 20);
    T_OK(wc_send_raw(&c, h, 32));
    T_EQ(wc_wait_closed(&c, 2000), 0);
    wc_close(&c);

    /* The right token: everything works, and the server proved it too. */
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, "s3cret-token");
    uint8_t data[100];
    t_fill_pattern(data, sizeof(data), 4);
    uint64_t gen = wc_put(&c, "k", data, sizeof(data), 64);
    T_EQ(wc_read(&c, "k", gen, 90, 10, buf), 0);
    T_MEMEQ(buf, data + 90, 10);
    srv_end_wc(&e, &c);
}

/* A second AUTH on a keyed session closes it: it was answered, and keyed
 * the session again with the same keys and sequence numbers from 0, so
 * the session's earlier frames would check out again (a replay). */
TEST(second_auth_closes)
{
    struct srv_env e;
    char token[256];
    struct wc c;
    struct rio_proto_hello_resp hr;
    uint8_t cn[RIO_PROTO_NONCE_LEN], mac[RIO_PROTO_MAC_LEN];

    setenv("SRV_LOG_FILE", "1", 1);
    srv_prepare(&e);
    srv_write_token(&e, "s3cret-token", token, sizeof(token));
    const char *args[] = {"--auth-token-file", token, NULL};
    srv_start_listen(&e, NULL, args);
    wc_connect(&c, e.addr[0]);
    /* wc_hello_ex draws its nonce from rand(): the same seed, the same nonce. */
    srand(77);
    T_EQ(wc_hello_ex(&c, "s3cret-token", &hr, NULL), 0);
    srand(77);
    for (int i = 0; i < RIO_PROTO_NONCE_LEN; i++)
        cn[i] = (uint8_t)rand();
    T_EQ(wc_ping(&c), 0); /* keyed */
    T_OK(rio__proto_auth_mac((const uint8_t *)"s3cret-token", 12, "railio-auth-v1", hr.nonce, cn,
                             mac));
    T_NE(wc_call(&c, RIO_OP_AUTH, mac, sizeof(mac), NULL, 0, NULL, NULL), 0);
    T_EQ(wc_wait_closed(&c, 2000), 0);
    wc_close(&c);
    for (int i = 0; i < 100 && !srv_log_count(&e, "AUTH after AUTH"); i++)
        t_sleep_ms(20);
    T_GE(srv_log_count(&e, "AUTH after AUTH"), 1u);
    T_EQ(srv_stop(&e), 0);
}

TEST(idle_connections_are_closed)
{
    struct srv_env e;
    const char *args[] = {"--idle-timeout", "400ms", NULL};
    struct wc c;

    srv_start_wc(&e, args, &c);
    uint64_t t0 = t_now_ms();
    T_EQ(wc_wait_closed(&c, 3000), 0);
    T_GT(t_now_ms() - t0, 300u);
    T_LT(t_now_ms() - t0, 2500u);
    srv_end_wc(&e, &c);
}
