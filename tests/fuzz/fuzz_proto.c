/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/proto/proto.c src/core/checksum.c */
/*
 * libFuzzer target for the wire format (src/proto): the header decoder and
 * every body decoder, on raw bytes and on a stream of frames. Anything a
 * decoder accepts must re-encode to exactly the bytes it came from (the
 * format has one encoding per message), so the target checks decoding
 * against encoding, not only for crashes.
 *
 * Input: byte 0 picks the mode, the rest is the data.
 *   mode 0       the header decoder on the first 32 bytes, as they are
 *   mode 1       a header with its check recomputed (so the fuzzer gets past
 *                it and explores the other fields), decoded and re-encoded
 *   mode 2       a stream of frames, each header resealed, each body given
 *                to its opcode's request or response decoder
 *   modes 3..17  one body decoder each, on the rest of the input
 *   modes 20..23 LIST and EXISTS requests and answers, one body decoder each
 *
 * Build and run: scripts/fuzz-smoke.sh (clang -fsanitize=fuzzer,address).
 * With RIO_FUZZ_SEED_DIR set, the target first writes a seed corpus of valid
 * messages there. Built with -DRIO_FUZZ_STANDALONE (any compiler), it is a
 * replay program instead: each argument is a file to run; with no argument it
 * runs the seeds and a deterministic set of mutations of them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "core/checksum.h"
#include "proto/proto.h"
#include "railio.h"

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz_proto: check failed: %s (line %d)\n", #cond, __LINE__);          \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

enum {
    M_HDR_RAW = 0,
    M_HDR_SEALED,
    M_STREAM,
    M_HELLO,
    M_HELLO_RESP,
    M_AUTH,
    M_AUTH_RESP,
    M_KEY,
    M_DESC,
    M_PUT_OPEN,
    M_PUT_OPEN_RESP,
    M_PUT_CHUNK,
    M_PUT_COMMIT,
    M_PUT_COMMIT_RESP,
    M_PUT_ABORT,
    M_READ,
    M_STAT_RESP,
    M_PING,
    M_STREAM_KEYED,
    M_HELLO_FRAME,
    M_LIST,
    M_LIST_RESP,
    M_EXISTS,
    M_EXISTS_RESP,
    M_DELETE,
    M_PUT_ONE,
    M_GET_ONE,
    M_GET_ONE_RESP,
    M__COUNT
};

static uint8_t enc_buf[RIO_PROTO_CTRL_MAX * 8];

/* Re-encoding must give back the input. */
static void same(int n, const uint8_t *in, size_t len)
{
    CHECK(n >= 0);
    CHECK((size_t)n == len);
    CHECK(memcmp(enc_buf, in, len) == 0);
}

static uint32_t le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* The checksum list of a decoded view, as the host-order array encoders take. */
static uint64_t *xxh_array(const uint8_t *le, uint64_t n)
{
    uint64_t *a = malloc(n ? (size_t)n * 8 : 1);
    CHECK(a != NULL);
    for (uint64_t i = 0; i < n; i++)
        a[i] = rio__proto_u64(le + 8 * i);
    return a;
}

/*
 * A body decoder and its encoder, rio__proto_dec_NAME and rio__proto_enc_NAME,
 * on b: when b decodes into m, the checks given after NAME hold of m and
 * re-encoding m gives b back.
 */
#define ROUND_TRIP(NAME, ...)                                                                      \
    do {                                                                                           \
        struct rio_proto_##NAME m;                                                                 \
        if (rio__proto_dec_##NAME(b, len, &m) == 0) {                                              \
            __VA_ARGS__;                                                                           \
            same(rio__proto_enc_##NAME(&m, enc_buf, sizeof(enc_buf)), b, len);                     \
        }                                                                                          \
    } while (0)

static void body(int mode, const uint8_t *b, size_t len)
{
    switch (mode) {
    case M_HELLO:
        ROUND_TRIP(hello, CHECK(m.version_min <= m.version_max));
        break;
    case M_AUTH:
        ROUND_TRIP(auth);
        break;
    case M_AUTH_RESP:
        ROUND_TRIP(auth_resp);
        break;
    case M_KEY:
        ROUND_TRIP(key, CHECK(m.key_len >= 1 && m.key_len <= RIO_KEY_MAX);
                   CHECK(memchr(m.key, 0, m.key_len) == NULL));
        break;
    case M_DELETE:
        ROUND_TRIP(delete, CHECK(m.key_len >= 1 && m.key_len <= RIO_KEY_MAX);
                   CHECK(memchr(m.key, 0, m.key_len) == NULL));
        break;
    case M_PUT_OPEN:
        ROUND_TRIP(put_open, CHECK(m.chunk_size >= 1 && m.chunk_size <= (1ull << 30)));
        break;
    case M_PUT_OPEN_RESP:
        ROUND_TRIP(put_open_resp);
        break;
    case M_PUT_COMMIT_RESP:
        ROUND_TRIP(put_commit_resp, CHECK(m.generation != 0));
        break;
    case M_PUT_ABORT:
        ROUND_TRIP(put_abort);
        break;
    case M_READ:
        ROUND_TRIP(read, CHECK(m.len >= 1 && m.len <= (1u << 30)));
        break;
    case M_STAT_RESP:
        ROUND_TRIP(stat_resp);
        break;
    case M_HELLO_RESP: {
        struct rio_proto_hello_resp m;
        if (rio__proto_dec_hello_resp(b, len, &m) == 0) {
            CHECK(m.nrails <= RIO_PROTO_MAX_RAILS);
            for (uint32_t i = 0; i < m.nrails; i++) {
                CHECK(m.rail_len[i] >= 1 && m.rail_len[i] <= RIO_PROTO_ADDR_MAX);
                CHECK(m.rail[i] >= (const char *)b &&
                      m.rail[i] + m.rail_len[i] <= (const char *)b + len);
            }
            same(rio__proto_enc_hello_resp(&m, enc_buf, sizeof(enc_buf)), b, len);
        }
        break;
    }
    case M_DESC: {
        struct rio_proto_desc m;
        if (rio__proto_dec_desc(b, len, &m) == 0) {
            CHECK(m.generation != 0);
            CHECK(64 + m.nchunks * 8 == len);
            uint64_t *x = xxh_array(m.xxh, m.nchunks);
            if (len <= sizeof(enc_buf))
                same(rio__proto_enc_desc(&m, x, enc_buf, sizeof(enc_buf)), b, len);
            free(x);
        }
        break;
    }
    case M_PUT_CHUNK: {
        struct rio_proto_put_chunk m;
        if (rio__proto_dec_put_chunk(b, len, &m) == 0) {
            CHECK(m.len >= 1 && (size_t)m.len + 24 == len);
            CHECK(m.data == b + 24);
            same(rio__proto_enc_put_chunk_fixed(&m, enc_buf, sizeof(enc_buf)), b, 24);
        }
        break;
    }
    case M_PUT_ONE: {
        /* The fixed part, the key (its length from the fixed part), then
         * the data: what a receiver splits before it checks the tag. */
        struct rio_proto_put_one m;
        uint16_t klen;
        if (len < RIO_PROTO_ONE_FIXED || rio__proto_put_one_key_len(b, &klen) < 0)
            break;
        CHECK(klen >= 1 && klen <= RIO_KEY_MAX);
        size_t ctl = RIO_PROTO_ONE_FIXED + (size_t)klen;
        if (ctl > len)
            break;
        if (rio__proto_dec_put_one(b, ctl, len - ctl, &m) == 0) {
            CHECK(m.key_len == klen && m.key == (const char *)b + RIO_PROTO_ONE_FIXED);
            CHECK(m.flags == 0 && len - ctl >= 1 && len - ctl <= m.chunk_size);
            CHECK(m.chunk_size <= (1ull << 30));
            same(rio__proto_enc_put_one(&m, enc_buf, sizeof(enc_buf)), b, ctl);
        }
        break;
    }
    case M_GET_ONE:
        ROUND_TRIP(get_one, CHECK(m.key_len >= 1 && m.key_len <= RIO_KEY_MAX);
                   CHECK(m.flags == 0 && m.max_len >= 1 && m.max_len <= (1u << 30)));
        break;
    case M_GET_ONE_RESP: {
        /* The request's max_len and the data's length first (what the
         * receiver knows from its request and the header), then the
         * control part. */
        if (len < 8)
            break;
        uint32_t max = le32(b), data = le32(b + 4);
        struct rio_proto_desc d;
        uint64_t xxh = 0;
        if (rio__proto_dec_get_one_resp(b + 8, len - 8, data, max, &d, &xxh) == 0) {
            int with = len - 8 == RIO_PROTO_GET_ONE_WITH_DATA;
            CHECK(with || len - 8 == RIO_PROTO_GET_ONE_DESC);
            CHECK(d.generation != 0 && d.xxh == NULL);
            /* With the bytes: one chunk of exactly them, within max. */
            CHECK(!with || (d.nchunks == 1 && d.size == data && data >= 1 && data <= max &&
                            d.size <= d.chunk_size));
            /* Without: never an object that had to come with them. */
            CHECK(with || (data == 0 && !(d.nchunks == 1 && d.size <= max)));
            same(rio__proto_enc_get_one_resp(&d, with, xxh, enc_buf, sizeof(enc_buf)), b + 8,
                 len - 8);
        }
        break;
    }
    case M_PUT_COMMIT: {
        struct rio_proto_put_commit m;
        if (rio__proto_dec_put_commit(b, len, &m) == 0) {
            CHECK(48 + m.nchunks * 8 + (m.if_gen ? 8 : 0) == len); /* the condition: 8 more */
            uint64_t *x = xxh_array(m.xxh, m.nchunks);
            if (len <= sizeof(enc_buf))
                same(rio__proto_enc_put_commit(&m, x, enc_buf, sizeof(enc_buf)), b, len);
            free(x);
        }
        break;
    }
    case M_LIST:
        ROUND_TRIP(list, CHECK(m.prefix_len <= RIO_KEY_MAX && m.after_len <= RIO_KEY_MAX);
                   CHECK((m.flags & ~RIO_PROTO_LIST_DELIM) == 0));
        break;
    case M_LIST_RESP: {
        struct rio_proto_list_resp m;
        if (rio__proto_dec_list_resp(b, len, &m) == 0) {
            struct rio_proto_entry e;
            size_t off = 0, sum = RIO_PROTO_LIST_FIXED;
            CHECK(m.n <= RIO_PROTO_LIST_MAX_KEYS);
            for (uint32_t i = 0; i < m.n; i++) {
                CHECK(rio__proto_list_entry(&m, &off, &e) == 0);
                CHECK(e.key_len >= 1 && e.key_len <= RIO_KEY_MAX);
                CHECK(e.key >= (const char *)b && e.key + e.key_len <= (const char *)b + len);
                /* Each entry re-encodes to its own bytes. */
                int k = rio__proto_enc_entry(&e, enc_buf, sizeof(enc_buf));
                CHECK(k > 0 && memcmp(enc_buf, b + sum, (size_t)k) == 0);
                sum += (size_t)k;
            }
            CHECK(rio__proto_list_entry(&m, &off, &e) == RIO_EPROTO);
            CHECK(sum == len);
            if (len <= sizeof(enc_buf))
                same(rio__proto_enc_list_resp(&m, enc_buf, sizeof(enc_buf)), b, len);
        }
        break;
    }
    case M_EXISTS: {
        struct rio_proto_exists m;
        if (rio__proto_dec_exists(b, len, &m) == 0) {
            const char *k;
            uint16_t kl;
            size_t off = 0;
            CHECK(m.n >= 1 && m.n <= RIO_PROTO_EXISTS_MAX_KEYS);
            for (uint32_t i = 0; i < m.n; i++) {
                CHECK(rio__proto_exists_key(&m, &off, &k, &kl) == 0);
                CHECK(kl >= 1 && kl <= RIO_KEY_MAX && memchr(k, 0, kl) == NULL);
            }
            CHECK(off == m.keys_len);
            if (len <= sizeof(enc_buf))
                same(rio__proto_enc_exists(&m, enc_buf, sizeof(enc_buf)), b, len);
        }
        break;
    }
    case M_EXISTS_RESP:
        ROUND_TRIP(exists_resp, CHECK(m.n >= 1 && m.n <= RIO_PROTO_EXISTS_MAX_KEYS);
                   CHECK(len == 4 + (m.n + 7) / 8));
        break;
    default:
        break;
    }
}

/* Which body decoder a frame of op goes to (request or response); M_PING,
 * which decodes no body, for an op not listed. */
static const struct {
    int op, request, response;
} body_modes[] = {
    {RIO_OP_HELLO, M_HELLO, M_HELLO_RESP},
    {RIO_OP_AUTH, M_AUTH, M_AUTH_RESP},
    {RIO_OP_LOOKUP, M_KEY, M_DESC},
    {RIO_OP_DELETE, M_DELETE, M_PING},
    {RIO_OP_PUT_OPEN, M_PUT_OPEN, M_PUT_OPEN_RESP},
    {RIO_OP_PUT_CHUNK, M_PUT_CHUNK, M_PING},
    {RIO_OP_PUT_COMMIT, M_PUT_COMMIT, M_PUT_COMMIT_RESP},
    {RIO_OP_PUT_ABORT, M_PUT_ABORT, M_PING},
    {RIO_OP_READ, M_READ, M_PING},
    {RIO_OP_STAT, M_PING, M_STAT_RESP},
    {RIO_OP_LIST, M_LIST, M_LIST_RESP},
    {RIO_OP_EXISTS, M_EXISTS, M_EXISTS_RESP},
    {RIO_OP_PUT_ONE, M_PUT_ONE, M_PUT_COMMIT_RESP},
    {RIO_OP_GET_ONE, M_GET_ONE, M_PING},
};

static int body_mode(int op, int response)
{
    for (size_t i = 0; i < sizeof(body_modes) / sizeof(body_modes[0]); i++)
        if (body_modes[i].op == op)
            return response ? body_modes[i].response : body_modes[i].request;
    return M_PING;
}

static void seal(uint8_t h[RIO_PROTO_HDR_LEN])
{
    uint32_t ck = (uint32_t)rio__xxh3(h, 24);
    for (int i = 0; i < 4; i++)
        h[24 + i] = (uint8_t)(ck >> (8 * i));
}

static void header(const uint8_t *in, size_t len, int sealed)
{
    uint8_t h[RIO_PROTO_HDR_LEN] = {0};
    struct rio_proto_hdr d;
    uint32_t max;

    if (len < RIO_PROTO_HDR_LEN)
        return;
    memcpy(h, in, RIO_PROTO_HDR_LEN);
    if (sealed)
        seal(h);
    max = len > 36 ? (uint32_t)rio__proto_u64(in + 28) : RIO_PROTO_BODY_CAP;
    if (rio__proto_hdr_decode(h, max, &d) == 0) {
        uint8_t out[RIO_PROTO_HDR_LEN];
        CHECK(d.opcode >= 1 && d.opcode <= RIO_OP__MAX);
        CHECK(d.body_len <= max && d.body_len <= RIO_PROTO_BODY_CAP);
        CHECK(sealed || memcmp(h, in, RIO_PROTO_HDR_LEN) == 0);
        rio__proto_hdr_encode(&d, out);
        CHECK(memcmp(out, h, RIO_PROTO_HDR_LEN) == 0);
    }
}

/*
 * A stream of frames as a receiver sees them: each header and tag is sealed
 * (the fuzzer cannot find an xxh3-128 or an HMAC), the frame must then
 * check out, the same frame with one bit flipped in its header or control
 * part must not, and its control part goes to its decoder. keyed: the frames
 * are a session's after AUTH (HMAC with sequence numbers).
 */
static void stream(const uint8_t *in, size_t len, int keyed)
{
    static const uint8_t tok[] = "fuzz-token", nc[RIO_PROTO_NONCE_LEN] = {1},
                         ns[RIO_PROTO_NONCE_LEN] = {2};
    struct rio_proto_sess tx = {0}, rx = {0};
    uint64_t seq = 0;

    if (keyed) {
        CHECK(rio__proto_sess_key(&tx, tok, sizeof(tok) - 1, nc, ns, 0) == 0);
        CHECK(rio__proto_sess_key(&rx, tok, sizeof(tok) - 1, nc, ns, 1) == 0);
    }
    while (len >= RIO_PROTO_HDR_LEN) {
        uint8_t h[RIO_PROTO_HDR_LEN];
        struct rio_proto_hdr d;
        uint32_t ctl, data;
        memcpy(h, in, sizeof(h));
        seal(h);
        in += sizeof(h);
        len -= sizeof(h);
        if (rio__proto_hdr_decode(h, RIO_PROTO_CTRL_MAX * 4, &d) < 0)
            break;
        if (rio__proto_layout(&d, &ctl, &data) < 0)
            break;
        CHECK((uint64_t)ctl + RIO_PROTO_TAG_LEN + data == d.body_len);
        size_t blen = d.body_len < len ? d.body_len : len;
        if (blen < (size_t)ctl + RIO_PROTO_TAG_LEN)
            break;
        /* An exact-size copy, so reading past the body is caught. */
        uint8_t *b = malloc(blen);
        CHECK(b != NULL);
        memcpy(b, in, blen);
        struct iovec parts[2] = {{h, sizeof(h)}, {b, ctl}};
        CHECK(rio__proto_seal(&tx, seq, parts, 2, b + ctl) == 0);
        if (keyed)
            seq++;
        /* One bit flipped, anywhere in the header or the control part. */
        size_t at = (size_t)(d.id % (RIO_PROTO_HDR_LEN + ctl));
        uint8_t *p = at < RIO_PROTO_HDR_LEN ? h + at : b + (at - RIO_PROTO_HDR_LEN);
        uint64_t seq0 = rx.rx_seq;
        *p ^= 0x04;
        CHECK(rio__proto_rx_check(&rx, h, b, ctl, b + ctl) == RIO_EPROTO);
        *p ^= 0x04;
        rx.rx_seq = seq0;
        CHECK(rio__proto_rx_check(&rx, h, b, ctl, b + ctl) == 0);
        body(body_mode(d.opcode, d.flags & RIO_PF_RESPONSE), b, ctl);
        free(b);
        in += blen;
        len -= blen;
    }
    rio__proto_sess_free(&tx);
    rio__proto_sess_free(&rx);
}

/* The HELLO request's check in caps: right once sealed, wrong after a flip. */
static void hello_frame(const uint8_t *in, size_t len)
{
    uint8_t f[RIO_PROTO_HDR_LEN + 24];

    if (len < sizeof(f))
        return;
    memcpy(f, in, sizeof(f));
    rio__proto_hello_seal(f, f + RIO_PROTO_HDR_LEN);
    CHECK(rio__proto_hello_check(f, f + RIO_PROTO_HDR_LEN) == 0);
    size_t at = in[0] % sizeof(f);
    if (at >= RIO_PROTO_HDR_LEN + 4 && at < RIO_PROTO_HDR_LEN + 8)
        return; /* the check itself */
    f[at] ^= 0x80;
    CHECK(rio__proto_hello_check(f, f + RIO_PROTO_HDR_LEN) == RIO_EPROTO);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    int mode = data[0] % M__COUNT;
    /* Bodies get an exact-size heap copy of their bytes. */
    size_t len = size - 1;
    uint8_t *b = malloc(len ? len : 1);
    if (!b)
        return 0;
    memcpy(b, data + 1, len);
    if (mode == M_HDR_RAW || mode == M_HDR_SEALED)
        header(b, len, mode == M_HDR_SEALED);
    else if (mode == M_STREAM || mode == M_STREAM_KEYED)
        stream(b, len, mode == M_STREAM_KEYED);
    else if (mode == M_HELLO_FRAME)
        hello_frame(b, len);
    else
        body(mode, b, len);
    free(b);
    return 0;
}

/* ------------------------------------------------------------------ seeds */

struct seed {
    uint8_t b[600];
    size_t len;
};

static size_t make_seeds(struct seed *s)
{
    size_t n = 0;
    int k;
    uint64_t xxh[3] = {1, 2, 3};

#define ADD(mode, expr)                                                                            \
    do {                                                                                           \
        s[n].b[0] = (uint8_t)(mode);                                                               \
        k = (expr);                                                                                \
        if (k >= 0)                                                                                \
            s[n++].len = (size_t)k + 1;                                                            \
    } while (0)
    struct rio_proto_hello he = {.version_min = 2, .version_max = 2};
    ADD(M_HELLO, rio__proto_enc_hello(&he, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_hello_resp hr = {.version = 2,
                                      .max_body = 1u << 30,
                                      .max_depth = 64,
                                      .nrails = 2,
                                      .rail = {"127.0.0.1:7070", "10.0.0.2:7071"},
                                      .rail_len = {14, 13}};
    ADD(M_HELLO_RESP, rio__proto_enc_hello_resp(&hr, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_auth au = {{0}};
    ADD(M_AUTH, rio__proto_enc_auth(&au, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_key ke = {.key = "some/key", .key_len = 8};
    ADD(M_KEY, rio__proto_enc_key(&ke, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_delete dl = {.key = "some/key", .key_len = 8, .if_gen = 7};
    ADD(M_DELETE, rio__proto_enc_delete(&dl, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_desc de = {.generation = 9, .size = 10, .chunk_size = 4, .nchunks = 3};
    memset(de.etag, 'a', 32);
    ADD(M_DESC, rio__proto_enc_desc(&de, xxh, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_put_open po = {.size = 10, .chunk_size = 4, .key = "k", .key_len = 1};
    ADD(M_PUT_OPEN, rio__proto_enc_put_open(&po, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_put_chunk pc = {.upload_id = 1, .index = 2, .xxh = 3};
    ADD(M_PUT_CHUNK, rio__proto_enc_put_chunk_fixed(&pc, s[n].b + 1, sizeof(s[n].b) - 1) + 4);
    struct rio_proto_put_commit pm = {.upload_id = 1, .nchunks = 3};
    memset(pm.etag, 'b', 32);
    ADD(M_PUT_COMMIT, rio__proto_enc_put_commit(&pm, xxh, s[n].b + 1, sizeof(s[n].b) - 1));
    pm.if_gen = RIO_PROTO_IF_ABSENT; /* a conditional commit */
    ADD(M_PUT_COMMIT, rio__proto_enc_put_commit(&pm, xxh, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_put_commit_resp cr = {.generation = 5};
    ADD(M_PUT_COMMIT_RESP, rio__proto_enc_put_commit_resp(&cr, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_read rd = {.generation = 5, .off = 4, .len = 4, .key = "k", .key_len = 1};
    ADD(M_READ, rio__proto_enc_read(&rd, s[n].b + 1, sizeof(s[n].b) - 1));
    struct rio_proto_stat_resp st = {1, 2, 3, 4, 5};
    ADD(M_STAT_RESP, rio__proto_enc_stat_resp(&st, s[n].b + 1, sizeof(s[n].b) - 1));
    /* Headers and a stream of two frames (LOOKUP request, READ response:
     * its xxh3, tag and 3 bytes of data); tags are left zero. */
    struct rio_proto_hdr h = {.opcode = RIO_OP_LOOKUP, .id = 1, .body_len = 10 + RIO_PROTO_TAG_LEN};
    s[n].b[0] = M_HDR_RAW;
    rio__proto_hdr_encode(&h, s[n].b + 1);
    s[n++].len = 33;
    s[n] = s[n - 1];
    s[n++].b[0] = M_HDR_SEALED;
    /* An answer with its service time in bytes 28..31. */
    struct rio_proto_hdr hs = {.opcode = RIO_OP_READ,
                               .flags = RIO_PF_RESPONSE | RIO_PF_SVC,
                               .id = 1,
                               .body_len = RIO_PROTO_TAG_LEN,
                               .status = RIO_ENOTFOUND,
                               .svc_us = 4321};
    s[n].b[0] = M_HDR_RAW;
    rio__proto_hdr_encode(&hs, s[n].b + 1);
    s[n++].len = 33;
    s[n].b[0] = M_STREAM;
    rio__proto_hdr_encode(&h, s[n].b + 1);
    k = rio__proto_enc_key(&ke, s[n].b + 33, 100) + RIO_PROTO_TAG_LEN;
    struct rio_proto_hdr h2 = {.opcode = RIO_OP_READ,
                               .flags = RIO_PF_RESPONSE,
                               .id = 1,
                               .body_len = RIO_PROTO_READ_FIXED + RIO_PROTO_TAG_LEN + 3};
    rio__proto_hdr_encode(&h2, s[n].b + 33 + k);
    memcpy(s[n].b + 33 + k + 32 + RIO_PROTO_READ_FIXED + RIO_PROTO_TAG_LEN, "abc", 3);
    s[n].len = 33 + (size_t)k + 32 + RIO_PROTO_READ_FIXED + RIO_PROTO_TAG_LEN + 3;
    n++;
    s[n] = s[n - 1];
    s[n++].b[0] = M_STREAM_KEYED;
    /* A HELLO request frame: version 1 header, 24-byte body. */
    struct rio_proto_hdr h3 = {.version = 1, .opcode = RIO_OP_HELLO, .id = 1, .body_len = 24};
    s[n].b[0] = M_HELLO_FRAME;
    rio__proto_hdr_encode(&h3, s[n].b + 1);
    rio__proto_enc_hello(&he, s[n].b + 33, 24);
    s[n++].len = 57;
    struct rio_proto_list li = {.max_keys = 1000,
                                .flags = 1,
                                .prefix = "p/",
                                .prefix_len = 2,
                                .after = "p/a",
                                .after_len = 3};
    ADD(M_LIST, rio__proto_enc_list(&li, s[n].b + 1, sizeof(s[n].b) - 1));
    {
        /* Two entries, a common prefix and an object, after the fixed part. */
        struct rio_proto_entry e1 = {.flags = RIO_PROTO_ENTRY_DIR, .key = "p/a/", .key_len = 4};
        struct rio_proto_entry e2 = {.size = 7,
                                     .generation = 3,
                                     .mtime_ns = 1700000000000000000,
                                     .key = "p/b",
                                     .key_len = 3};
        memset(e2.etag, 'c', 32);
        uint8_t *q = s[n].b + 1;
        int a = rio__proto_enc_list_resp_fixed(2, RIO_PROTO_LIST_TRUNCATED, q, 8);
        a += rio__proto_enc_entry(&e1, q + a, 200);
        a += rio__proto_enc_entry(&e2, q + a, 200);
        ADD(M_LIST_RESP, a);
    }
    {
        const char *ek[] = {"a", "bb", "some/key"};
        const uint16_t el[] = {1, 2, 8};
        ADD(M_EXISTS, rio__proto_enc_exists_keys(ek, el, 3, s[n].b + 1, sizeof(s[n].b) - 1));
        uint8_t bits[2] = {0x05, 0x01};
        struct rio_proto_exists_resp er = {.n = 9, .bits = bits};
        ADD(M_EXISTS_RESP, rio__proto_enc_exists_resp(&er, s[n].b + 1, sizeof(s[n].b) - 1));
    }
    struct rio_proto_get_one go = {.max_len = 65536, .key = "k/one", .key_len = 5};
    ADD(M_GET_ONE, rio__proto_enc_get_one(&go, s[n].b + 1, sizeof(s[n].b) - 1));
    /* answers: max_len, the data's length, the control part */
    struct rio_proto_desc od = {.generation = 4, .size = 100, .chunk_size = 4096, .nchunks = 1};
    memset(od.etag, 'c', 32);
    put32(s[n].b + 1, 65536);
    put32(s[n].b + 5, 100);
    ADD(M_GET_ONE_RESP,
        8 + rio__proto_enc_get_one_resp(&od, 1, 77, s[n].b + 9, sizeof(s[n].b) - 9));
    od.size = 10000;
    od.nchunks = 3;
    put32(s[n].b + 1, 65536);
    put32(s[n].b + 5, 0);
    ADD(M_GET_ONE_RESP, 8 + rio__proto_enc_get_one_resp(&od, 0, 0, s[n].b + 9, sizeof(s[n].b) - 9));
#undef ADD
    return n;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    static struct seed seeds[32];
    const char *dir = getenv("RIO_FUZZ_SEED_DIR");
    (void)argc;
    (void)argv;
    if (!dir || !*dir)
        return 0;
    size_t n = make_seeds(seeds);
    for (size_t i = 0; i < n; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/seed-%02zu", dir, i);
        FILE *f = fopen(path, "wb");
        if (!f)
            continue;
        fwrite(seeds[i].b, 1, seeds[i].len, f);
        fclose(f);
    }
    return 0;
}

#ifdef RIO_FUZZ_STANDALONE
/* Replay: files from argv, or the seeds and deterministic mutations. */
int main(int argc, char **argv)
{
    static struct seed seeds[32];
    uint8_t *buf = malloc(1 << 20);
    uint64_t r = 1;

    if (!buf)
        return 1;
    if (argc > 1) {
        for (int i = 1; i < argc; i++) {
            FILE *f = fopen(argv[i], "rb");
            if (!f) {
                perror(argv[i]);
                return 1;
            }
            size_t len = fread(buf, 1, 1 << 20, f);
            fclose(f);
            LLVMFuzzerTestOneInput(buf, len);
        }
        printf("fuzz_proto: %d inputs ran clean\n", argc - 1);
        free(buf);
        return 0;
    }
    size_t n = make_seeds(seeds);
    unsigned runs = 0;
    for (size_t i = 0; i < n; i++) {
        LLVMFuzzerTestOneInput(seeds[i].b, seeds[i].len);
        runs++;
        for (int m = 0; m < 5000; m++) {
            size_t len = seeds[i].len;
            memcpy(buf, seeds[i].b, len);
            for (int f = 0; f < 1 + m % 4; f++) {
                r = r * 6364136223846793005ull + 1442695040888963407ull;
                size_t at = 1 + (size_t)(r >> 33) % (len > 1 ? len - 1 : 1);
                buf[at] ^= (uint8_t)(r >> 13);
            }
            if (m % 7 == 0)
                len = 1 + (size_t)(r >> 40) % len; /* truncated */
            LLVMFuzzerTestOneInput(buf, len);
            runs++;
        }
    }
    printf("fuzz_proto: %zu seeds, %u runs clean\n", n, runs);
    free(buf);
    return 0;
}
#endif
