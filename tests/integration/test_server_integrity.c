/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * Frame integrity against railiod (protocol version 2, issue 13 item 4):
 * one flipped byte anywhere in a request closes its connection and takes no
 * effect (never an object under another key, never an expiry nobody asked
 * for, never another etag); after AUTH a frame a proxy injects or replays is
 * refused and closes the connection; a version 1 client gets "no common
 * version" in its own framing.
 */
#include "server_env.h"

/* STAT on a clean connection: objects stored and uploads in progress. */
static void stat_counts(const char *addr, const char *token, uint64_t *objects, uint64_t *uploads)
{
    struct wc c;
    uint8_t *body = NULL;
    uint32_t blen = 0;
    struct rio_proto_stat_resp r;

    wc_connect(&c, addr);
    wc_hello(&c, token);
    T_EQ(wc_call(&c, RIO_OP_STAT, NULL, 0, NULL, 0, &body, &blen), 0);
    T_OK(rio__proto_dec_stat_resp(body, blen, &r));
    free(body);
    wc_close(&c);
    *objects = r.objects;
    *uploads = r.uploads;
}

/* A whole PUT_OPEN frame (header, body, tag) for key into out; its length. */
static size_t put_open_frame(struct wc *c, const char *key, uint64_t size, uint32_t ttl_ms,
                             uint8_t *out)
{
    struct rio_proto_put_open m = {.size = size,
                                   .chunk_size = 4096,
                                   .ttl_ms = ttl_ms,
                                   .key = key,
                                   .key_len = (uint16_t)strlen(key)};
    int n = rio__proto_enc_put_open(&m, out + 32, 1024);
    T_GT(n, 0);
    struct rio_proto_hdr h = {
        .opcode = RIO_OP_PUT_OPEN, .id = c->next_id++, .body_len = (uint32_t)n + RIO_PROTO_TAG_LEN};
    rio__proto_hdr_encode(&h, out);
    struct iovec part = {out, 32 + (size_t)n};
    T_OK(rio__proto_seal(&c->sess, 0, &part, 1, out + 32 + n));
    return 32 + (size_t)n + RIO_PROTO_TAG_LEN;
}

/* Send frame with byte pos flipped on a fresh connection: the server closes
 * it without an answer that says success. */
static void send_flipped(const char *addr, const uint8_t *frame, size_t len, size_t pos)
{
    uint8_t b[2048];
    struct wc c;
    struct rio_proto_hdr h;
    uint8_t *body = NULL;

    memcpy(b, frame, len);
    b[pos] ^= 0x20;
    wc_open(&c, addr);
    T_OK(wc_send_raw(&c, b, len));
    shutdown(c.fd, SHUT_WR); /* a length made longer waits for nothing */
    int r = wc_recv(&c, &h, &body);
    if (r == 0 && h.status == 0)
        T_FAIL("byte %zu flipped: answered success", pos);
    free(body);
    T_EQ(wc_wait_closed(&c, 3000), 0);
    wc_close(&c);
}

/* A PUT_OPEN frame for key (size bytes, request id next_id) sent once a
 * connection with its byte at each offset in [from, to) flipped: nothing
 * is stored, no upload opened. */
static void flip_put_open(struct srv_env *e, const char *key, uint64_t size, uint64_t next_id,
                          size_t from, size_t to)
{
    struct wc c;
    uint8_t frame[2048];
    uint64_t objects, uploads;

    memset(&c, 0, sizeof(c));
    c.next_id = next_id;
    size_t len = put_open_frame(&c, key, size, 0, frame);
    for (size_t pos = from; pos < len && pos < to; pos++)
        send_flipped(e->addr[0], frame, len, pos);
    stat_counts(e->addr[0], NULL, &objects, &uploads);
    T_EQ(objects, 0u);
    T_EQ(uploads, 0u);
}

/*
 * The reproducer: one flipped byte in a PUT_OPEN frame stored the object
 * under another key and said success. Every byte of the frame, flipped in
 * turn: the connection closes, no upload is opened, nothing is stored; the
 * intended PUT then works.
 */
TEST(put_open_flip_never_opens_another_key)
{
    struct srv_env e;
    struct wc c;

    srv_start(&e, NULL);
    flip_put_open(&e, "model/weights-00", 8192, 5, 0, SIZE_MAX);

    uint8_t data[8192];
    t_fill_pattern(data, sizeof(data), 3);
    wc_open(&c, e.addr[0]);
    uint64_t gen = wc_put(&c, "model/weights-00", data, sizeof(data), 4096);
    uint8_t back[8192];
    T_EQ(wc_read(&c, "model/weights-00", gen, 0, sizeof(back), back), 0);
    T_MEMEQ(back, data, sizeof(back));
    srv_end_wc(&e, &c);
}

/* A flip in ttl_ms (bytes 16..19 of the body) gave an acknowledged object an
 * expiry; now each is refused before any upload exists. */
TEST(put_open_ttl_flip_is_detected)
{
    struct srv_env e;

    srv_start(&e, NULL);
    flip_put_open(&e, "kv/block", 4096, 0, 32 + 16, 32 + 20);
    T_EQ(srv_stop(&e), 0);
}

/* A flip in the commit's etag was stored silently: now the commit frame is
 * refused, the connection closed, and nothing published. */
TEST(commit_etag_flip_is_detected)
{
    struct srv_env e;
    struct wc c, d;
    uint8_t data[4096];
    char etag[33];
    uint64_t up = 0, x;

    srv_start(&e, NULL);
    t_fill_pattern(data, sizeof(data), 9);
    wc_etag(data, sizeof(data), etag);
    x = rio__xxh3(data, sizeof(data));
    wc_open(&c, e.addr[0]);
    T_EQ(wc_put_open(&c, "etagged", sizeof(data), sizeof(data), 0, &up), 0);
    T_EQ(wc_put_chunk(&c, up, 0, x, data, sizeof(data)), 0);

    struct rio_proto_put_commit m = {.upload_id = up, .nchunks = 1};
    uint8_t b[32 + 56 + RIO_PROTO_TAG_LEN];
    memcpy(m.etag, etag, 32);
    T_EQ(rio__proto_enc_put_commit(&m, &x, b + 32, 56), 56);
    struct rio_proto_hdr h = {
        .opcode = RIO_OP_PUT_COMMIT, .id = c.next_id++, .body_len = 56 + RIO_PROTO_TAG_LEN};
    rio__proto_hdr_encode(&h, b);
    struct iovec part = {b, 32 + 56};
    T_OK(rio__proto_seal(&c.sess, 0, &part, 1, b + 32 + 56));
    b[32 + 16 + 5] ^= 0x01; /* one bit of the etag, on the wire */
    T_OK(wc_send_raw(&c, b, sizeof(b)));
    T_EQ(wc_wait_closed(&c, 3000), 0);
    wc_close(&c);

    struct rio_proto_desc desc;
    uint8_t *keep = NULL;
    wc_open(&d, e.addr[0]);
    T_EQ(wc_lookup(&d, "etagged", &desc, &keep), RIO_ENOTFOUND);
    free(keep);
    srv_end_wc(&e, &d);
}

/*
 * With auth, frames are bound to the session: a DELETE a proxy injects after
 * AUTH (it can make the frame check, not the MAC), a frame replayed from
 * earlier in the session, and one sent under the other direction's sequence
 * are each refused and close the connection; the object stays.
 */
TEST(injected_frames_after_auth_are_rejected)
{
    struct srv_env e;
    char tok[256];
    struct wc c, v;
    uint8_t data[1000];

    srv_prepare(&e);
    srv_write_token(&e, "s3cret-token", tok, sizeof(tok));
    const char *args[] = {"--auth-token-file", tok, NULL};
    srv_start_listen(&e, NULL, args);
    t_fill_pattern(data, sizeof(data), 8);
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, "s3cret-token");
    uint64_t gen = wc_put(&c, "victim", data, sizeof(data), 512);
    T_GT(gen, 0u);

    struct rio_proto_key k = {.key = "victim", .key_len = 6};
    uint8_t kb[16];
    int n = rio__proto_enc_key(&k, kb, sizeof(kb));
    for (int mode = 0; mode < 3; mode++) {
        uint8_t b[32 + 16 + RIO_PROTO_TAG_LEN];
        struct rio_proto_hdr h = {
            .opcode = RIO_OP_DELETE, .id = 900, .body_len = (uint32_t)n + RIO_PROTO_TAG_LEN};
        struct rio_proto_sess unkeyed = {0};
        rio__proto_hdr_encode(&h, b);
        memcpy(b + 32, kb, (size_t)n);
        struct iovec part = {b, 32 + (size_t)n};
        if (mode == 0) {
            /* Injected: the proxy can compute the unkeyed check only. */
            T_OK(rio__proto_seal(&unkeyed, 0, &part, 1, b + 32 + n));
        } else if (mode == 1) {
            /* Replayed: a MAC made for a sequence number already used
             * (the PING's). */
            T_EQ(wc_ping(&c), 0);
            T_OK(rio__proto_seal(&c.sess, 0, &part, 1, b + 32 + n));
        } else {
            /* The next sequence number, but the server's direction key:
             * a response reflected back as a request. */
            struct rio_proto_sess rev = {.tx_key = c.sess.rx_key};
            T_OK(rio__proto_seal(&rev, c.sess.tx_seq, &part, 1, b + 32 + n));
        }
        T_OK(wc_send_raw(&c, b, 32 + (size_t)n + RIO_PROTO_TAG_LEN));
        if (wc_wait_closed(&c, 3000) != 0)
            T_FAIL("mode %d: the connection was not closed", mode);
        wc_close(&c);
        /* The object is still there, for a genuine client. */
        wc_connect(&v, e.addr[0]);
        wc_hello(&v, "s3cret-token");
        uint8_t back[1000];
        T_EQ(wc_read(&v, "victim", gen, 0, sizeof(back), back), 0);
        T_MEMEQ(back, data, sizeof(back));
        wc_close(&v);
        wc_connect(&c, e.addr[0]);
        wc_hello(&c, "s3cret-token");
    }
    /* A genuine DELETE on the session works. */
    T_EQ(wc_delete(&c, "victim"), 0);
    srv_end_wc(&e, &c);
}

/*
 * Version negotiation, the server's side: a version 1 client's HELLO is
 * answered "no common version" (RIO_ENOTSUP) in version 1 framing (a header
 * of version 1, no trailer), then the connection is closed.
 */
TEST(version1_client_gets_no_common_version)
{
    struct srv_env e;
    struct wc c;
    uint8_t b[32 + 24], hb[32];
    struct rio_proto_hello m = {.version_min = 1, .version_max = 1};
    struct rio_proto_hdr h = {.version = 1, .opcode = RIO_OP_HELLO, .id = 3, .body_len = 24};
    struct rio_proto_hdr r;

    srv_start(&e, NULL);
    wc_connect(&c, e.addr[0]);
    memset(m.nonce, 7, sizeof(m.nonce));
    T_EQ(rio__proto_enc_hello(&m, b + 32, 24), 24);
    rio__proto_hdr_encode(&h, b); /* exactly what a version 1 client sends */
    T_OK(wc_send_raw(&c, b, sizeof(b)));
    T_OK(wc_read_full(&c, hb, sizeof(hb)));
    T_EQ(rio__proto_hdr_decode(hb, 0, &r), RIO_EVERSION);
    T_EQ(r.version, 1);
    T_EQ(r.opcode, RIO_OP_HELLO);
    T_EQ(r.id, 3u);
    T_EQ(r.body_len, 0u);
    T_EQ(r.status, RIO_ENOTSUP);
    T_EQ(wc_wait_closed(&c, 3000), 0);
    srv_end_wc(&e, &c);
}
