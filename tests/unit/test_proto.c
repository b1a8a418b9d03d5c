/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The wire format (src/proto): every message encodes and decodes back to
 * itself, byte layouts match docs/protocol.md, and a corpus of malformed
 * inputs (truncated, wrong lengths, counts that would overflow n*8, bad keys,
 * bad header fields) is each rejected with RIO_EPROTO, never read past.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/key.h"
#include "core/secret.h"
#include "proto/proto.h"
#include "railio.h"
#include "t.h"

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Decode body[0..len) from an exactly-sized heap copy, so ASan catches any
 * read past the end. */
#define DEC(fn, body, len, m) dec_exact((int (*)(const uint8_t *, size_t, void *))fn, body, len, m)
static int dec_exact(int (*fn)(const uint8_t *, size_t, void *), const uint8_t *body, size_t len,
                     void *m)
{
    uint8_t *copy = malloc(len ? len : 1);
    memcpy(copy, body, len);
    int r = fn(copy, len, m);
    free(copy);
    return r;
}

/* Every strict prefix of a valid body is rejected, and so is one extra byte. */
#define CHECK_PREFIXES(fn, body, len, mtype)                                                       \
    do {                                                                                           \
        mtype t__m;                                                                                \
        uint8_t *t__b = malloc((len) + 1);                                                         \
        memcpy(t__b, body, len);                                                                   \
        t__b[len] = 0;                                                                             \
        for (size_t t__i = 0; t__i < (size_t)(len); t__i++)                                        \
            T_EQ(DEC(fn, t__b, t__i, &t__m), RIO_EPROTO);                                          \
        T_EQ(DEC(fn, t__b, (size_t)(len) + 1, &t__m), RIO_EPROTO);                                 \
        free(t__b);                                                                                \
    } while (0)

/* ---------------------------------------------------------------- header */

TEST(header_round_trip_and_layout)
{
    struct rio_proto_hdr h = {.opcode = RIO_OP_READ,
                              .flags = RIO_PF_RESPONSE,
                              .id = 0x0102030405060708ull,
                              .body_len = 4096,
                              .status = RIO_EGENERATION};
    struct rio_proto_hdr d;
    uint8_t b[32];

    rio__proto_hdr_encode(&h, b);
    /* "RIO1", version, opcode, flags LE, id LE, body_len LE, status LE. */
    T_MEMEQ(b, "RIO1", 4);
    T_EQ(b[4], 2);
    T_EQ(b[5], RIO_OP_READ);
    T_EQ(b[6], 1);
    T_EQ(b[7], 0);
    T_EQ(b[8], 0x08);
    T_EQ(b[15], 0x01);
    T_EQ(b[16], 0x00);
    T_EQ(b[17], 0x10);
    T_EQ(rio__proto_u64(b + 16) & 0xffffffffu, 4096u);
    T_EQ((int32_t)(uint32_t)(rio__proto_u64(b + 20) & 0xffffffffu), RIO_EGENERATION);
    T_EQ((uint32_t)(rio__proto_u64(b + 24) & 0xffffffffu), (uint32_t)rio__xxh3(b, 24));
    for (int i = 28; i < 32; i++)
        T_EQ(b[i], 0);
    T_OK(rio__proto_hdr_decode(b, 4096, &d));
    T_EQ(d.magic, RIO_PROTO_MAGIC);
    T_EQ(d.version, RIO_PROTO_VERSION);
    T_EQ(d.opcode, RIO_OP_READ);
    T_EQ(d.flags, RIO_PF_RESPONSE);
    T_EQ(d.id, h.id);
    T_EQ(d.body_len, 4096u);
    T_EQ(d.status, RIO_EGENERATION);
    /* Every opcode. */
    for (int op = 1; op <= RIO_OP__MAX; op++) {
        h = (struct rio_proto_hdr){.opcode = (uint8_t)op, .id = (uint64_t)op};
        rio__proto_hdr_encode(&h, b);
        T_OK(rio__proto_hdr_decode(b, 0, &d));
        T_EQ(d.opcode, op);
        T_NE(strcmp(rio__proto_op_name(op), "?"), 0);
    }
    T_STREQ(rio__proto_op_name(0), "?");
    T_STREQ(rio__proto_op_name(RIO_OP__MAX + 1), "?");
}

/* Set bytes [off, off+n) of a valid header to v (LE), then re-seal the check. */
static void hdr_mut(uint8_t b[32], unsigned off, unsigned n, uint64_t v, int reseal)
{
    struct rio_proto_hdr h = {.opcode = RIO_OP_PING, .id = 1};
    rio__proto_hdr_encode(&h, b);
    for (unsigned i = 0; i < n; i++)
        b[off + i] = (uint8_t)(v >> (8 * i));
    if (reseal) {
        uint32_t ck = (uint32_t)rio__xxh3(b, 24);
        for (int i = 0; i < 4; i++)
            b[24 + i] = (uint8_t)(ck >> (8 * i));
    }
}

TEST(header_rejects)
{
    struct rio_proto_hdr d;
    uint8_t b[32];

    hdr_mut(b, 0, 4, 0x32494f52u, 1); /* "RIO2" */
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 4, 1, 1, 1); /* version 1: well formed, another version */
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EVERSION);
    T_EQ(d.version, 1);
    hdr_mut(b, 4, 1, 3, 1);
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EVERSION);
    hdr_mut(b, 4, 1, 0, 1);
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 5, 1, 0, 1); /* opcode 0 */
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 5, 1, RIO_OP__MAX + 1, 1);
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 5, 1, 255, 1);
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 6, 2, 0x0004, 1); /* unknown flag */
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 6, 2, 0x8000, 1);
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 16, 4, 101, 1); /* body_len > max */
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 16, 4, 100, 1);
    T_OK(rio__proto_hdr_decode(b, 100, &d));
    hdr_mut(b, 16, 4, 0xffffffffu, 1); /* over the cap whatever the max */
    T_EQ(rio__proto_hdr_decode(b, 0xffffffffu, &d), RIO_EPROTO);
    hdr_mut(b, 16, 4, RIO_PROTO_BODY_CAP + 1, 1);
    T_EQ(rio__proto_hdr_decode(b, 0xffffffffu, &d), RIO_EPROTO);
    hdr_mut(b, 20, 4, (uint32_t)-5, 1); /* status on a request */
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 28, 4, 1, 1); /* reserved */
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    hdr_mut(b, 31, 1, 0x80, 1);
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    /* Any flipped bit in bytes 0..27 breaks the check (or a field). */
    for (unsigned bit = 0; bit < 28 * 8; bit++) {
        hdr_mut(b, 0, 0, 0, 0);
        b[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    }
    /* A response may carry a status. */
    hdr_mut(b, 6, 2, RIO_PF_RESPONSE, 0);
    hdr_mut(b, 20, 4, (uint32_t)RIO_ENOTFOUND, 0);
    b[6] = RIO_PF_RESPONSE;
    uint32_t ck = (uint32_t)rio__xxh3(b, 24);
    for (int i = 0; i < 4; i++)
        b[24 + i] = (uint8_t)(ck >> (8 * i));
    T_OK(rio__proto_hdr_decode(b, 100, &d));
    T_EQ(d.status, RIO_ENOTFOUND);
}

/*
 * The service time: bytes 28..31 of an answer with RIO_PF_SVC, under the
 * frame's tag but not the header check; zero everywhere else (a request
 * with the flag, an answer without it). The client clamps a server's
 * value to the op's own time, whatever the server says.
 */
TEST(service_time_field_and_clamp)
{
    struct rio_proto_hdr h = {
        .opcode = RIO_OP_READ, .flags = RIO_PF_RESPONSE | RIO_PF_SVC, .id = 7, .svc_us = 123456};
    struct rio_proto_hdr d;
    uint8_t b[32];

    rio__proto_hdr_encode(&h, b);
    T_OK(rio__proto_hdr_decode(b, 100, &d));
    T_EQ(d.flags, RIO_PF_RESPONSE | RIO_PF_SVC);
    T_EQ(d.svc_us, 123456u);
    T_EQ(b[28] | b[29] << 8 | b[30] << 16 | (uint32_t)b[31] << 24, 123456u);
    /* Without the flag nothing is written, and a value is refused. */
    h.flags = RIO_PF_RESPONSE;
    rio__proto_hdr_encode(&h, b);
    T_EQ(b[28] | b[29] | b[30] | b[31], 0);
    T_OK(rio__proto_hdr_decode(b, 100, &d));
    T_EQ(d.svc_us, 0u);
    b[28] = 1;
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    /* A request asks with the flag; it carries no value. */
    h.flags = RIO_PF_SVC;
    rio__proto_hdr_encode(&h, b);
    T_EQ(b[28] | b[29] | b[30] | b[31], 0);
    T_OK(rio__proto_hdr_decode(b, 100, &d));
    T_EQ(d.flags, RIO_PF_SVC);
    b[28] = 1;
    T_EQ(rio__proto_hdr_decode(b, 100, &d), RIO_EPROTO);
    /* Setting the flags of an encoded request keeps it valid. */
    h.flags = 0;
    rio__proto_hdr_encode(&h, b);
    rio__proto_hdr_set_flags(b, RIO_PF_SVC);
    T_OK(rio__proto_hdr_decode(b, 100, &d));
    T_EQ(d.flags, RIO_PF_SVC);
    T_EQ(d.id, 7u);
    rio__proto_hdr_set_flags(b, 0);
    T_OK(rio__proto_hdr_decode(b, 100, &d));
    T_EQ(d.flags, 0);

    /* Microseconds, saturated. */
    T_EQ(rio__proto_svc_us(0), 0u);
    T_EQ(rio__proto_svc_us(999), 0u);
    T_EQ(rio__proto_svc_us(1500000), 1500u);
    T_EQ(rio__proto_svc_us(UINT64_MAX), UINT32_MAX);
    /* A server's value larger than the op took here is clamped to it; a
     * true one is taken as said; the largest, times 1000, does not wrap. */
    T_EQ(rio__proto_svc_clamp(50000, 10000000), 10000000u);
    T_EQ(rio__proto_svc_clamp(UINT32_MAX, 10000000), 10000000u);
    T_EQ(rio__proto_svc_clamp(UINT32_MAX, UINT64_MAX), (uint64_t)UINT32_MAX * 1000u);
    T_EQ(rio__proto_svc_clamp(3000, 10000000), 3000000u);
    T_EQ(rio__proto_svc_clamp(3000, 0), 0u);
}

/* ----------------------------------------------------------------- bodies */

TEST(hello_round_trip)
{
    struct rio_proto_hello m = {.version_min = 1, .version_max = 3, .caps = 0xa5a5};
    struct rio_proto_hello d;
    uint8_t b[64];

    for (int i = 0; i < 16; i++)
        m.nonce[i] = (uint8_t)(i * 7);
    int n = rio__proto_enc_hello(&m, b, sizeof(b));
    T_EQ(n, 24);
    T_OK(DEC(rio__proto_dec_hello, b, (size_t)n, &d));
    T_EQ(d.version_min, 1);
    T_EQ(d.version_max, 3);
    T_EQ(d.caps, 0xa5a5u);
    T_MEMEQ(d.nonce, m.nonce, 16);
    CHECK_PREFIXES(rio__proto_dec_hello, b, (size_t)n, struct rio_proto_hello);
    T_EQ(rio__proto_enc_hello(&m, b, 23), -ENOBUFS);
    /* min > max */
    m.version_min = 4;
    n = rio__proto_enc_hello(&m, b, sizeof(b));
    T_EQ(DEC(rio__proto_dec_hello, b, (size_t)n, &d), RIO_EPROTO);
}

TEST(hello_resp_round_trip)
{
    struct rio_proto_hello_resp m = {.version = 1,
                                     .caps = 3,
                                     .auth_required = 1,
                                     .max_body = 1u << 30,
                                     .max_depth = 64,
                                     .nrails = 3};
    struct rio_proto_hello_resp d;
    const char *rails[3] = {"127.0.0.1:7070", "10.99.1.2:7070", "[::1]:7071"};
    uint8_t b[512];

    for (int i = 0; i < 16; i++)
        m.nonce[i] = (uint8_t)(255 - i);
    for (int i = 0; i < 3; i++) {
        m.rail[i] = rails[i];
        m.rail_len[i] = (uint16_t)strlen(rails[i]);
    }
    int n = rio__proto_enc_hello_resp(&m, b, sizeof(b));
    T_EQ(n, 36 + 3 * 2 + 14 + 14 + 10);
    T_OK(rio__proto_dec_hello_resp(b, (size_t)n, &d));
    T_EQ(d.version, 1);
    T_EQ(d.caps, 3u);
    T_EQ(d.auth_required, 1u);
    T_EQ(d.max_body, 1u << 30);
    T_EQ(d.max_depth, 64u);
    T_MEMEQ(d.nonce, m.nonce, 16);
    T_EQ(d.nrails, 3u);
    for (int i = 0; i < 3; i++) {
        T_EQ(d.rail_len[i], strlen(rails[i]));
        T_MEMEQ(d.rail[i], rails[i], d.rail_len[i]);
    }
    CHECK_PREFIXES(rio__proto_dec_hello_resp, b, (size_t)n, struct rio_proto_hello_resp);
    /* nrails over the maximum, a zero or oversized rail, auth_required 2. */
    uint8_t bad[512];
    memcpy(bad, b, (size_t)n);
    bad[2] = RIO_PROTO_MAX_RAILS + 1;
    T_EQ(DEC(rio__proto_dec_hello_resp, bad, (size_t)n, &d), RIO_EPROTO);
    memcpy(bad, b, (size_t)n);
    bad[36] = 0;
    bad[37] = 0;
    T_EQ(DEC(rio__proto_dec_hello_resp, bad, (size_t)n, &d), RIO_EPROTO);
    memcpy(bad, b, (size_t)n);
    bad[36] = RIO_PROTO_ADDR_MAX + 1;
    T_EQ(DEC(rio__proto_dec_hello_resp, bad, (size_t)n, &d), RIO_EPROTO);
    memcpy(bad, b, (size_t)n);
    bad[8] = 2;
    T_EQ(DEC(rio__proto_dec_hello_resp, bad, (size_t)n, &d), RIO_EPROTO);
    /* Encoders refuse what a decoder would refuse. */
    m.nrails = RIO_PROTO_MAX_RAILS + 1;
    T_EQ(rio__proto_enc_hello_resp(&m, b, sizeof(b)), -ENOBUFS);
    m.nrails = 1;
    m.rail_len[0] = 0;
    T_EQ(rio__proto_enc_hello_resp(&m, b, sizeof(b)), -ENOBUFS);
}

TEST(auth_round_trip_and_mac)
{
    struct rio_proto_auth m, d;
    struct rio_proto_auth_resp r, rd;
    uint8_t b[64], cn[16], sn[16], m1[32], m2[32];

    for (int i = 0; i < 32; i++)
        m.mac[i] = (uint8_t)i;
    int n = rio__proto_enc_auth(&m, b, sizeof(b));
    T_EQ(n, 32);
    T_OK(DEC(rio__proto_dec_auth, b, 32, &d));
    T_MEMEQ(d.mac, m.mac, 32);
    CHECK_PREFIXES(rio__proto_dec_auth, b, 32, struct rio_proto_auth);
    memcpy(r.mac, m.mac, 32);
    T_EQ(rio__proto_enc_auth_resp(&r, b, sizeof(b)), 32);
    T_OK(DEC(rio__proto_dec_auth_resp, b, 32, &rd));
    T_MEMEQ(rd.mac, r.mac, 32);

    /* The MACs: HMAC-SHA256(token, label || a || b); both directions differ,
     * and any change of token, nonce or order changes them. */
    memset(cn, 1, 16);
    memset(sn, 2, 16);
    T_OK(rio__proto_auth_mac((const uint8_t *)"tok", 3, "railio-auth-v1", sn, cn, m1));
    T_OK(rio__proto_auth_mac((const uint8_t *)"tok", 3, "railio-server-v1", cn, sn, m2));
    T_NE(memcmp(m1, m2, 32), 0);
    T_OK(rio__proto_auth_mac((const uint8_t *)"tok", 3, "railio-auth-v1", cn, sn, m2));
    T_NE(memcmp(m1, m2, 32), 0);
    T_OK(rio__proto_auth_mac((const uint8_t *)"tok2", 4, "railio-auth-v1", sn, cn, m2));
    T_NE(memcmp(m1, m2, 32), 0);
    T_OK(rio__proto_auth_mac((const uint8_t *)"tok", 3, "railio-auth-v1", sn, cn, m2));
    T_MEMEQ(m1, m2, 32);
    /* A known answer (Python's hmac module): HMAC-SHA256("key",
     * "railio-auth-v1" || 16 x 0x02 || 16 x 0x01). */
    static const uint8_t kat[32] = {0xf5, 0x75, 0x0f, 0x0d, 0x45, 0xe1, 0xd0, 0x87,
                                    0x54, 0x3d, 0xd8, 0xd3, 0xcb, 0xba, 0x6f, 0x84,
                                    0x7f, 0x54, 0xcd, 0x3f, 0xdb, 0x1e, 0xca, 0x47,
                                    0xa0, 0xd7, 0x38, 0x8e, 0x22, 0xad, 0x2c, 0xf5};
    T_OK(rio__proto_auth_mac((const uint8_t *)"key", 3, "railio-auth-v1", sn, cn, m1));
    T_MEMEQ(m1, kat, 32);
}

TEST(key_round_trip_and_rejects)
{
    struct rio_proto_key m = {.key = "dir/obj.bin", .key_len = 11}, d;
    static uint8_t b[2 + 0xffff];
    char big[RIO_KEY_MAX + 1];

    int n = rio__proto_enc_key(&m, b, sizeof(b));
    T_EQ(n, 13);
    T_EQ(b[0], 11);
    T_EQ(b[1], 0);
    T_OK(rio__proto_dec_key(b, (size_t)n, &d));
    T_EQ(d.key_len, 11);
    T_MEMEQ(d.key, "dir/obj.bin", 11);
    CHECK_PREFIXES(rio__proto_dec_key, b, (size_t)n, struct rio_proto_key);
    /* The longest key. */
    memset(big, 'k', sizeof(big));
    m.key = big;
    m.key_len = RIO_KEY_MAX;
    n = rio__proto_enc_key(&m, b, sizeof(b));
    T_EQ(n, RIO_KEY_MAX + 2);
    T_OK(DEC(rio__proto_dec_key, b, (size_t)n, &d));
    T_EQ(d.key_len, RIO_KEY_MAX);
    /* Zero-length, oversized, NUL inside, NUL at the end. */
    b[0] = 0;
    b[1] = 0;
    T_EQ(DEC(rio__proto_dec_key, b, 2, &d), RIO_EPROTO);
    b[0] = (uint8_t)((RIO_KEY_MAX + 1) & 0xff);
    b[1] = (uint8_t)((RIO_KEY_MAX + 1) >> 8);
    T_EQ(DEC(rio__proto_dec_key, b, RIO_KEY_MAX + 3, &d), RIO_EPROTO);
    b[0] = 0xff;
    b[1] = 0xff;
    T_EQ(DEC(rio__proto_dec_key, b, 2 + 0xffff, &d), RIO_EPROTO);
    memcpy(b, "\x03\x00k\0y", 5);
    T_EQ(DEC(rio__proto_dec_key, b, 5, &d), RIO_EPROTO);
    memcpy(b, "\x03\x00ky\0", 5);
    T_EQ(DEC(rio__proto_dec_key, b, 5, &d), RIO_EPROTO);
    /* Encoder refuses the same. */
    m.key_len = 0;
    T_EQ(rio__proto_enc_key(&m, b, sizeof(b)), -ENOBUFS);
    m.key_len = RIO_KEY_MAX + 1;
    T_EQ(rio__proto_enc_key(&m, b, sizeof(b)), -ENOBUFS);
}

TEST(desc_round_trip_and_rejects)
{
    uint64_t xxh[5] = {1, 0xffffffffffffffffull, 3, 0x8000000000000000ull, 5};
    struct rio_proto_desc m = {
        .generation = 77, .size = 4 * 4096 + 1, .chunk_size = 4096, .nchunks = 5};
    struct rio_proto_desc d;
    uint8_t b[256];

    memcpy(m.etag, "0123456789abcdef0123456789abcdef", 32);
    int n = rio__proto_enc_desc(&m, xxh, b, sizeof(b));
    T_EQ(n, 64 + 40);
    T_OK(DEC(rio__proto_dec_desc, b, (size_t)n, &d));
    T_EQ(d.generation, 77u);
    T_EQ(d.size, m.size);
    T_EQ(d.chunk_size, 4096u);
    T_EQ(d.nchunks, 5u);
    T_MEMEQ(d.etag, m.etag, 32);
    T_OK(rio__proto_dec_desc(b, (size_t)n, &d));
    for (int i = 0; i < 5; i++)
        T_EQ(rio__proto_u64(d.xxh + 8 * i), xxh[i]);
    CHECK_PREFIXES(rio__proto_dec_desc, b, (size_t)n, struct rio_proto_desc);
    /* Empty object: no chunks, no list. */
    struct rio_proto_desc e0 = {.generation = 1, .size = 0, .chunk_size = 4096, .nchunks = 0};
    memcpy(e0.etag, m.etag, 32);
    n = rio__proto_enc_desc(&e0, NULL, b, sizeof(b));
    T_EQ(n, 64);
    T_OK(DEC(rio__proto_dec_desc, b, 64, &d));
    T_EQ(d.nchunks, 0u);
    T_NULL(d.xxh);

    /* Geometry that does not add up, generation 0, huge nchunks whose n*8
     * would wrap to a small number. */
    uint8_t bad[256];
    n = rio__proto_enc_desc(&m, xxh, b, sizeof(b));
    memcpy(bad, b, (size_t)n);
    put64(bad + 24, 4); /* nchunks 4 for 5 chunks' worth */
    T_EQ(DEC(rio__proto_dec_desc, bad, (size_t)n - 8, &d), RIO_EPROTO);
    memcpy(bad, b, (size_t)n);
    put64(bad, 0);
    T_EQ(DEC(rio__proto_dec_desc, bad, (size_t)n, &d), RIO_EPROTO);
    memcpy(bad, b, (size_t)n);
    put64(bad + 16, 0); /* chunk size 0 */
    T_EQ(DEC(rio__proto_dec_desc, bad, (size_t)n, &d), RIO_EPROTO);
    memcpy(bad, b, (size_t)n);
    put64(bad + 16, (1ull << 30) + 1);
    T_EQ(DEC(rio__proto_dec_desc, bad, (size_t)n, &d), RIO_EPROTO);
    /* size 2^61 in chunks of 1: nchunks 2^61, and 2^61 * 8 == 0 mod 2^64. */
    memcpy(bad, b, 64);
    put64(bad + 8, 1ull << 61);
    put64(bad + 16, 1);
    put64(bad + 24, 1ull << 61);
    T_EQ(DEC(rio__proto_dec_desc, bad, 64, &d), RIO_EPROTO);
    put64(bad + 8, (1ull << 61) + 1);
    put64(bad + 24, (1ull << 61) + 1); /* n*8 == 8 mod 2^64 */
    put64(bad + 64, 9);
    T_EQ(DEC(rio__proto_dec_desc, bad, 72, &d), RIO_EPROTO);
    /* size 0 with chunks. */
    memcpy(bad, b, 64);
    put64(bad + 8, 0);
    put64(bad + 24, 1);
    put64(bad + 64, 1);
    T_EQ(DEC(rio__proto_dec_desc, bad, 72, &d), RIO_EPROTO);
    /* A list that is not a multiple of 8. */
    memcpy(bad, b, (size_t)n);
    T_EQ(DEC(rio__proto_dec_desc, bad, (size_t)n - 3, &d), RIO_EPROTO);
    T_EQ(rio__proto_enc_desc(&m, xxh, b, 64 + 39), -ENOBUFS);
}

TEST(put_messages_round_trip)
{
    uint8_t b[2048];
    int n;

    /* PUT_OPEN */
    struct rio_proto_put_open o = {.size = 123456789012ull,
                                   .chunk_size = 4u << 20,
                                   .ttl_ms = 60000,
                                   .key = "kv/block/17",
                                   .key_len = 11},
                              od;
    n = rio__proto_enc_put_open(&o, b, sizeof(b));
    T_EQ(n, 20 + 2 + 11);
    T_OK(rio__proto_dec_put_open(b, (size_t)n, &od));
    T_EQ(od.size, o.size);
    T_EQ(od.chunk_size, o.chunk_size);
    T_EQ(od.ttl_ms, 60000u);
    T_EQ(od.key_len, 11);
    T_MEMEQ(od.key, o.key, 11);
    CHECK_PREFIXES(rio__proto_dec_put_open, b, (size_t)n, struct rio_proto_put_open);
    o.chunk_size = 0;
    n = rio__proto_enc_put_open(&o, b, sizeof(b));
    T_EQ(DEC(rio__proto_dec_put_open, b, (size_t)n, &od), RIO_EPROTO);
    o.chunk_size = (1ull << 30) + 1;
    n = rio__proto_enc_put_open(&o, b, sizeof(b));
    T_EQ(DEC(rio__proto_dec_put_open, b, (size_t)n, &od), RIO_EPROTO);

    /* PUT_OPEN response */
    struct rio_proto_put_open_resp orr = {.upload_id = 0xdeadbeefcafef00dull}, ord;
    n = rio__proto_enc_put_open_resp(&orr, b, sizeof(b));
    T_EQ(n, 8);
    T_OK(DEC(rio__proto_dec_put_open_resp, b, 8, &ord));
    T_EQ(ord.upload_id, orr.upload_id);
    CHECK_PREFIXES(rio__proto_dec_put_open_resp, b, 8, struct rio_proto_put_open_resp);

    /* PUT_CHUNK: fixed part, then the data. */
    struct rio_proto_put_chunk c = {.upload_id = 9, .index = 3, .xxh = 0x1122334455667788ull}, cd;
    n = rio__proto_enc_put_chunk_fixed(&c, b, sizeof(b));
    T_EQ(n, 24);
    memcpy(b + 24, "payload", 7);
    T_OK(DEC(rio__proto_dec_put_chunk, b, 31, &cd));
    T_EQ(cd.upload_id, 9u);
    T_EQ(cd.index, 3u);
    T_EQ(cd.xxh, c.xxh);
    T_EQ(cd.len, 7u);
    T_OK(rio__proto_dec_put_chunk(b, 31, &cd));
    T_MEMEQ(cd.data, "payload", 7);
    for (size_t i = 0; i <= 24; i++) /* no data at all is an error too */
        T_EQ(DEC(rio__proto_dec_put_chunk, b, i, &cd), RIO_EPROTO);

    /* PUT_COMMIT */
    uint64_t xxh[3] = {10, 20, 30};
    struct rio_proto_put_commit m = {.upload_id = 9, .nchunks = 3}, md;
    memcpy(m.etag, "ffffffffffffffffffffffffffffffff", 32);
    n = rio__proto_enc_put_commit(&m, xxh, b, sizeof(b));
    T_EQ(n, 48 + 24);
    T_OK(DEC(rio__proto_dec_put_commit, b, (size_t)n, &md));
    T_EQ(md.upload_id, 9u);
    T_EQ(md.nchunks, 3u);
    T_MEMEQ(md.etag, m.etag, 32);
    T_OK(rio__proto_dec_put_commit(b, (size_t)n, &md));
    for (int i = 0; i < 3; i++)
        T_EQ(rio__proto_u64(md.xxh + 8 * i), xxh[i]);
    CHECK_PREFIXES(rio__proto_dec_put_commit, b, (size_t)n, struct rio_proto_put_commit);
    /* nchunks that overflow n*8: 2^61 (product 0) with an empty list, 2^61+3
     * (product 24) with a 24-byte list. */
    uint8_t bad[128];
    memcpy(bad, b, (size_t)n);
    put64(bad + 8, 1ull << 61);
    T_EQ(DEC(rio__proto_dec_put_commit, bad, 48, &md), RIO_EPROTO);
    put64(bad + 8, (1ull << 61) + 3);
    T_EQ(DEC(rio__proto_dec_put_commit, bad, (size_t)n, &md), RIO_EPROTO);
    put64(bad + 8, UINT64_MAX);
    T_EQ(DEC(rio__proto_dec_put_commit, bad, (size_t)n, &md), RIO_EPROTO);
    /* nchunks 0: no list. */
    m.nchunks = 0;
    n = rio__proto_enc_put_commit(&m, NULL, b, sizeof(b));
    T_EQ(n, 48);
    T_OK(DEC(rio__proto_dec_put_commit, b, 48, &md));
    T_EQ(md.nchunks, 0u);

    /* PUT_COMMIT response: generation 0 is never valid. */
    struct rio_proto_put_commit_resp cr = {.generation = 42}, crd;
    n = rio__proto_enc_put_commit_resp(&cr, b, sizeof(b));
    T_EQ(n, 8);
    T_OK(DEC(rio__proto_dec_put_commit_resp, b, 8, &crd));
    T_EQ(crd.generation, 42u);
    CHECK_PREFIXES(rio__proto_dec_put_commit_resp, b, 8, struct rio_proto_put_commit_resp);
    cr.generation = 0;
    rio__proto_enc_put_commit_resp(&cr, b, sizeof(b));
    T_EQ(DEC(rio__proto_dec_put_commit_resp, b, 8, &crd), RIO_EPROTO);

    /* PUT_ABORT */
    struct rio_proto_put_abort a = {.upload_id = 5}, ad;
    n = rio__proto_enc_put_abort(&a, b, sizeof(b));
    T_EQ(n, 8);
    T_OK(DEC(rio__proto_dec_put_abort, b, 8, &ad));
    T_EQ(ad.upload_id, 5u);
    CHECK_PREFIXES(rio__proto_dec_put_abort, b, 8, struct rio_proto_put_abort);
}

TEST(read_and_stat_round_trip)
{
    uint8_t b[2048];
    struct rio_proto_read r = {.generation = 3,
                               .off = 1ull << 40,
                               .len = 1u << 30,
                               .key = "x",
                               .key_len = 1},
                          rd;
    int n = rio__proto_enc_read(&r, b, sizeof(b));
    T_EQ(n, 20 + 2 + 1);
    T_OK(rio__proto_dec_read(b, (size_t)n, &rd));
    T_EQ(rd.generation, 3u);
    T_EQ(rd.off, 1ull << 40);
    T_EQ(rd.len, 1u << 30);
    T_EQ(rd.key_len, 1);
    T_EQ(rd.key[0], 'x');
    CHECK_PREFIXES(rio__proto_dec_read, b, (size_t)n, struct rio_proto_read);
    r.len = 0;
    n = rio__proto_enc_read(&r, b, sizeof(b));
    T_EQ(DEC(rio__proto_dec_read, b, (size_t)n, &rd), RIO_EPROTO);
    r.len = (1u << 30) + 1;
    n = rio__proto_enc_read(&r, b, sizeof(b));
    T_EQ(DEC(rio__proto_dec_read, b, (size_t)n, &rd), RIO_EPROTO);

    struct rio_proto_stat_resp s = {.objects = 1,
                                    .bytes = 2,
                                    .capacity = 3,
                                    .uploads = 4,
                                    .connections = 5},
                               sd;
    n = rio__proto_enc_stat_resp(&s, b, sizeof(b));
    T_EQ(n, 40);
    T_OK(DEC(rio__proto_dec_stat_resp, b, 40, &sd));
    T_EQ(sd.objects, 1u);
    T_EQ(sd.bytes, 2u);
    T_EQ(sd.capacity, 3u);
    T_EQ(sd.uploads, 4u);
    T_EQ(sd.connections, 5u);
    CHECK_PREFIXES(rio__proto_dec_stat_resp, b, 40, struct rio_proto_stat_resp);
}

/* Random bytes into every decoder: no crash, no read past the end (ASan),
 * and anything accepted re-encodes to the same bytes. */
TEST(random_bodies)
{
    uint64_t s = 12345;
    uint8_t *b = malloc(512), out[1024];

    for (int iter = 0; iter < 20000; iter++) {
        size_t len = (size_t)(rio__xxh3(&s, 8) % 200);
        s++;
        for (size_t i = 0; i < len; i++)
            b[i] = (uint8_t)(rio__xxh3(&s, 8) >> (i % 56)), s++;
        /* Often make the leading length fields plausible. */
        if (len >= 2 && iter % 2)
            b[0] = (uint8_t)(len - 2), b[1] = 0;
        uint8_t *c = malloc(len ? len : 1);
        memcpy(c, b, len);
        struct rio_proto_key k;
        if (rio__proto_dec_key(c, len, &k) == 0) {
            T_EQ(rio__proto_enc_key(&k, out, sizeof(out)), (int)len);
            T_MEMEQ(out, c, len);
        }
        /* The other decoders only must not read past c. */
        union {
            struct rio_proto_hello h;
            struct rio_proto_hello_resp hr;
            struct rio_proto_desc d;
            struct rio_proto_put_open po;
            struct rio_proto_put_chunk pc;
            struct rio_proto_put_commit pm;
            struct rio_proto_read rd;
        } any;
        (void)rio__proto_dec_hello(c, len, &any.h);
        (void)rio__proto_dec_hello_resp(c, len, &any.hr);
        (void)rio__proto_dec_desc(c, len, &any.d);
        (void)rio__proto_dec_put_open(c, len, &any.po);
        (void)rio__proto_dec_put_chunk(c, len, &any.pc);
        (void)rio__proto_dec_put_commit(c, len, &any.pm);
        (void)rio__proto_dec_read(c, len, &any.rd);
        struct rio_proto_hdr hd;
        if (len >= 32)
            T_EQ(rio__proto_hdr_decode(c, RIO_PROTO_BODY_CAP, &hd), RIO_EPROTO);
        free(c);
    }
    free(b);
}

/* Where the tag sits: after the control part; bulk data after it. */
TEST(frame_layout)
{
    struct rio_proto_hdr h = {.opcode = RIO_OP_PUT_CHUNK, .body_len = 24 + 16 + 100};
    uint32_t ctl = 0, data = 0;

    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, 24u);
    T_EQ(data, 100u);
    h.body_len = 24 + 16; /* PUT_CHUNK without data */
    T_EQ(rio__proto_layout(&h, &ctl, &data), RIO_EPROTO);
    h = (struct rio_proto_hdr){
        .opcode = RIO_OP_READ, .flags = RIO_PF_RESPONSE, .body_len = 8 + 16 + 5};
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, 8u);
    T_EQ(data, 5u);
    h.status = RIO_ENOTFOUND; /* an error answer: its tag only */
    h.body_len = 16;
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, 0u);
    T_EQ(data, 0u);
    h = (struct rio_proto_hdr){.opcode = RIO_OP_READ, .body_len = 30}; /* a READ request */
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, 14u);
    T_EQ(data, 0u);
    h.body_len = 15;
    T_EQ(rio__proto_layout(&h, &ctl, &data), RIO_EPROTO);
}

/* PUT_ONE: fixed part, key, tag, data. The layout counts the key with the
 * data (its length is in the fixed part); the decoder takes the control
 * part with the data's length and refuses what breaks the rules. */
TEST(put_one_round_trip_and_rejects)
{
    uint8_t b[RIO_PROTO_ONE_FIXED + RIO_KEY_MAX];
    struct rio_proto_put_one m = {.chunk_size = 4096,
                                  .xxh = 0x1122334455667788ull,
                                  .ttl_ms = 9000,
                                  .key = "k/one",
                                  .key_len = 5};
    struct rio_proto_put_one d;
    uint16_t klen = 0;

    memset(m.etag, 'a', sizeof(m.etag));
    int n = rio__proto_enc_put_one(&m, b, sizeof(b));
    T_EQ(n, (int)RIO_PROTO_ONE_FIXED + 5);
    T_OK(rio__proto_put_one_key_len(b, &klen));
    T_EQ(klen, 5u);
    T_OK(rio__proto_dec_put_one(b, (size_t)n, 4096, &d));
    T_EQ(d.chunk_size, 4096u);
    T_EQ(d.xxh, m.xxh);
    T_EQ(d.ttl_ms, 9000u);
    T_EQ(d.key_len, 5u);
    T_MEMEQ(d.key, "k/one", 5);
    T_MEMEQ(d.etag, m.etag, 32);
    /* data: 1..chunk_size */
    T_OK(rio__proto_dec_put_one(b, (size_t)n, 1, &d));
    T_EQ(rio__proto_dec_put_one(b, (size_t)n, 0, &d), RIO_EPROTO);
    T_EQ(rio__proto_dec_put_one(b, (size_t)n, 4097, &d), RIO_EPROTO);
    /* a control part cut or longer than its key */
    T_EQ(rio__proto_dec_put_one(b, (size_t)n - 1, 10, &d), RIO_EPROTO);
    T_EQ(rio__proto_dec_put_one(b, (size_t)n + 1, 10, &d), RIO_EPROTO);
    /* flags, a chunk size of 0 or over 2^30 */
    m.flags = 1;
    T_EQ(rio__proto_enc_put_one(&m, b, sizeof(b)), n);
    T_EQ(rio__proto_dec_put_one(b, (size_t)n, 10, &d), RIO_EPROTO);
    m.flags = 0;
    m.chunk_size = 0;
    T_EQ(rio__proto_enc_put_one(&m, b, sizeof(b)), n);
    T_EQ(rio__proto_dec_put_one(b, (size_t)n, 10, &d), RIO_EPROTO);
    m.chunk_size = (1ull << 30) + 1;
    T_EQ(rio__proto_enc_put_one(&m, b, sizeof(b)), n);
    T_EQ(rio__proto_dec_put_one(b, (size_t)n, 10, &d), RIO_EPROTO);
    /* a key of 0 or over 1024 bytes, a NUL in the key */
    b[RIO_PROTO_ONE_OFF_KEYLEN] = 0;
    b[RIO_PROTO_ONE_OFF_KEYLEN + 1] = 0;
    T_EQ(rio__proto_put_one_key_len(b, &klen), RIO_EPROTO);
    b[RIO_PROTO_ONE_OFF_KEYLEN] = 1;
    b[RIO_PROTO_ONE_OFF_KEYLEN + 1] = 4; /* 1025 */
    T_EQ(rio__proto_put_one_key_len(b, &klen), RIO_EPROTO);
    m.chunk_size = 4096;
    m.key = "k\0one";
    T_EQ(rio__proto_enc_put_one(&m, b, sizeof(b)), n);
    T_EQ(rio__proto_dec_put_one(b, (size_t)n, 10, &d), RIO_EPROTO);
    /* the layout: fixed part, then key and data counted together */
    struct rio_proto_hdr h = {.opcode = RIO_OP_PUT_ONE, .body_len = (uint32_t)n + 16 + 100};
    uint32_t ctl = 0, data = 0;
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, RIO_PROTO_ONE_FIXED);
    T_EQ(data, 5u + 100u);
    h.body_len = RIO_PROTO_ONE_FIXED + 16;
    T_EQ(rio__proto_layout(&h, &ctl, &data), RIO_EPROTO);
    /* its answer is a control frame: the generation */
    h = (struct rio_proto_hdr){.opcode = RIO_OP_PUT_ONE, .flags = RIO_PF_RESPONSE, .body_len = 24};
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, 8u);
    T_EQ(data, 0u);
}

/* GET_ONE: max_len, flags, key; its answer the descriptor's fixed part
 * alone or with the chunk's xxh3 and the bytes, which the layout tells
 * apart by body_len, and the decoder holds to the rule that an object of
 * one chunk within max_len comes with its bytes and nothing else does. */
TEST(get_one_round_trip_and_rejects)
{
    uint8_t b[RIO_PROTO_GET_ONE_FIXED + 2 + RIO_KEY_MAX];
    struct rio_proto_get_one m = {.max_len = 32768, .key = "k/one", .key_len = 5}, g;

    int n = rio__proto_enc_get_one(&m, b, sizeof(b));
    T_EQ(n, (int)RIO_PROTO_GET_ONE_FIXED + 2 + 5);
    T_OK(rio__proto_dec_get_one(b, (size_t)n, &g));
    T_EQ(g.max_len, 32768u);
    T_EQ(g.flags, 0u);
    T_EQ(g.key_len, 5u);
    T_MEMEQ(g.key, "k/one", 5);
    T_EQ(rio__proto_dec_get_one(b, (size_t)n - 1, &g), RIO_EPROTO);
    T_EQ(rio__proto_dec_get_one(b, (size_t)n + 1, &g), RIO_EPROTO);
    uint32_t bad_max[] = {0, (1u << 30) + 1};
    for (unsigned i = 0; i < 2; i++) {
        m.max_len = bad_max[i];
        T_EQ(rio__proto_enc_get_one(&m, b, sizeof(b)), n);
        T_EQ(rio__proto_dec_get_one(b, (size_t)n, &g), RIO_EPROTO);
    }
    m.max_len = 1u << 30;
    m.flags = 2;
    T_EQ(rio__proto_enc_get_one(&m, b, sizeof(b)), n);
    T_EQ(rio__proto_dec_get_one(b, (size_t)n, &g), RIO_EPROTO);

    /* Answers. */
    uint8_t a[RIO_PROTO_GET_ONE_WITH_DATA];
    struct rio_proto_desc d = {.generation = 7, .size = 100, .chunk_size = 4096, .nchunks = 1}, o;
    uint64_t x = 0;
    memset(d.etag, 'e', 32);
    T_EQ(rio__proto_enc_get_one_resp(&d, 1, 0xabcull, a, sizeof(a)),
         (int)RIO_PROTO_GET_ONE_WITH_DATA);
    T_OK(rio__proto_dec_get_one_resp(a, sizeof(a), 100, 100, &o, &x));
    T_EQ(o.generation, 7u);
    T_EQ(o.size, 100u);
    T_EQ(o.chunk_size, 4096u);
    T_EQ(x, 0xabcull);
    T_MEMEQ(o.etag, d.etag, 32);
    T_NULL(o.xxh);
    /* the bytes must be the object's size, within max_len */
    T_EQ(rio__proto_dec_get_one_resp(a, sizeof(a), 99, 100, &o, &x), RIO_EPROTO);
    T_EQ(rio__proto_dec_get_one_resp(a, sizeof(a), 100, 99, &o, &x), RIO_EPROTO);
    /* an object that fits must come with its bytes */
    T_EQ(rio__proto_enc_get_one_resp(&d, 0, 0, a, sizeof(a)), (int)RIO_PROTO_GET_ONE_DESC);
    T_EQ(rio__proto_dec_get_one_resp(a, RIO_PROTO_GET_ONE_DESC, 0, 100, &o, &x), RIO_EPROTO);
    /* larger than max_len, several chunks, empty: the descriptor alone */
    T_OK(rio__proto_dec_get_one_resp(a, RIO_PROTO_GET_ONE_DESC, 0, 99, &o, &x));
    d.size = 10000;
    d.nchunks = 3;
    rio__proto_enc_get_one_resp(&d, 0, 0, a, sizeof(a));
    T_OK(rio__proto_dec_get_one_resp(a, RIO_PROTO_GET_ONE_DESC, 0, 1u << 30, &o, &x));
    T_EQ(o.nchunks, 3u);
    rio__proto_enc_get_one_resp(&d, 1, 0, a, sizeof(a));
    T_EQ(rio__proto_dec_get_one_resp(a, sizeof(a), 10000, 1u << 30, &o, &x), RIO_EPROTO);
    d = (struct rio_proto_desc){.generation = 3};
    memset(d.etag, '0', 32);
    rio__proto_enc_get_one_resp(&d, 0, 0, a, sizeof(a));
    T_OK(rio__proto_dec_get_one_resp(a, RIO_PROTO_GET_ONE_DESC, 0, 100, &o, &x));
    T_EQ(o.size, 0u);
    /* a geometry that contradicts itself, generation 0, another length */
    d = (struct rio_proto_desc){.generation = 0, .size = 10000, .chunk_size = 4096, .nchunks = 3};
    rio__proto_enc_get_one_resp(&d, 0, 0, a, sizeof(a));
    T_EQ(rio__proto_dec_get_one_resp(a, RIO_PROTO_GET_ONE_DESC, 0, 100, &o, &x), RIO_EPROTO);
    d.generation = 1;
    d.nchunks = 2;
    rio__proto_enc_get_one_resp(&d, 0, 0, a, sizeof(a));
    T_EQ(rio__proto_dec_get_one_resp(a, RIO_PROTO_GET_ONE_DESC, 0, 100, &o, &x), RIO_EPROTO);
    T_EQ(rio__proto_dec_get_one_resp(a, RIO_PROTO_GET_ONE_DESC + 8, 0, 100, &o, &x), RIO_EPROTO);
    /* the layout: 80 bytes is the descriptor alone; more, with bytes (1 at least) */
    struct rio_proto_hdr h = {.opcode = RIO_OP_GET_ONE, .flags = RIO_PF_RESPONSE, .body_len = 80};
    uint32_t ctl = 0, data = 0;
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, RIO_PROTO_GET_ONE_DESC);
    T_EQ(data, 0u);
    h.body_len = 72 + 16 + 100;
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, RIO_PROTO_GET_ONE_WITH_DATA);
    T_EQ(data, 100u);
    h.body_len = 72 + 16;
    T_EQ(rio__proto_layout(&h, &ctl, &data), RIO_EPROTO);
    h.body_len = 81;
    T_EQ(rio__proto_layout(&h, &ctl, &data), RIO_EPROTO);
    /* an error answer is its tag alone; the request a control frame */
    h.status = RIO_ENOTFOUND;
    h.body_len = 16;
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, 0u);
    h = (struct rio_proto_hdr){.opcode = RIO_OP_GET_ONE, .body_len = (uint32_t)n + 16};
    T_OK(rio__proto_layout(&h, &ctl, &data));
    T_EQ(ctl, (uint32_t)n);
    T_EQ(data, 0u);
}

/* A PUT_OPEN frame as sent: header and body, and its unkeyed tag. */
static size_t put_open_frame(uint8_t *b, uint32_t ttl)
{
    struct rio_proto_put_open m = {
        .size = 1 << 20, .chunk_size = 65536, .ttl_ms = ttl, .key = "some/key", .key_len = 8};
    int n = rio__proto_enc_put_open(&m, b + 32, 256);
    struct rio_proto_hdr h = {.opcode = RIO_OP_PUT_OPEN, .id = 4, .body_len = (uint32_t)n + 16};
    rio__proto_hdr_encode(&h, b);
    return 32 + (size_t)n;
}

/* Unkeyed: every single-bit flip in the header or the body is caught. */
TEST(frame_check_catches_every_flip)
{
    struct rio_proto_sess s = {0};
    uint8_t b[512], tag[16];
    size_t len = put_open_frame(b, 0);
    struct iovec parts[2] = {{b, 32}, {b + 32, len - 32}};

    T_OK(rio__proto_seal(&s, 0, parts, 2, tag));
    T_OK(rio__proto_rx_check(&s, b, b + 32, len - 32, tag));
    for (size_t i = 0; i < len; i++)
        for (int bit = 0; bit < 8; bit++) {
            b[i] ^= (uint8_t)(1u << bit);
            T_EQ(rio__proto_rx_check(&s, b, b + 32, len - 32, tag), RIO_EPROTO);
            b[i] ^= (uint8_t)(1u << bit);
        }
    for (int i = 0; i < 16; i++) {
        tag[i] ^= 1;
        T_EQ(rio__proto_rx_check(&s, b, b + 32, len - 32, tag), RIO_EPROTO);
        tag[i] ^= 1;
    }
    rio__proto_sess_free(&s);
}

/* Keyed: each direction its own key; a frame verifies once, at its
 * sequence number; replayed, reordered, or under the wrong key it fails. */
TEST(session_mac_binds_sequence_and_direction)
{
    const uint8_t tok[] = "tok", nc[16] = {1}, ns[16] = {2};
    struct rio_proto_sess cl = {0}, sv = {0}, other = {0};
    uint8_t b[512], t0[16], t1[16];
    size_t len = put_open_frame(b, 0);
    struct iovec part = {b, len};

    T_OK(rio__proto_sess_key(&cl, tok, 3, nc, ns, 0));
    T_OK(rio__proto_sess_key(&sv, tok, 3, nc, ns, 1));
    T_OK(rio__proto_sess_key(&other, tok, 3, nc, (const uint8_t[16]){3}, 1));
    T_OK(rio__proto_seal(&cl, 0, &part, 1, t0));
    T_OK(rio__proto_seal(&cl, 1, &part, 1, t1));
    T_NE(memcmp(t0, t1, 16), 0);
    /* Out of order: seq 1's tag at seq 0. */
    T_EQ(rio__proto_rx_check(&sv, b, b + 32, len - 32, t1), RIO_EPROTO);
    sv.rx_seq = 0;
    T_OK(rio__proto_rx_check(&sv, b, b + 32, len - 32, t0));
    T_EQ(sv.rx_seq, 1u);
    /* Replayed: seq 0's tag again. */
    T_EQ(rio__proto_rx_check(&sv, b, b + 32, len - 32, t0), RIO_EPROTO);
    sv.rx_seq = 1;
    T_OK(rio__proto_rx_check(&sv, b, b + 32, len - 32, t1));
    /* Another session's nonces, the other direction, the unkeyed check. */
    other.rx_seq = 0;
    T_EQ(rio__proto_rx_check(&other, b, b + 32, len - 32, t0), RIO_EPROTO);
    struct rio_proto_sess unkeyed = {0};
    uint8_t tu[16];
    T_OK(rio__proto_seal(&unkeyed, 0, &part, 1, tu));
    cl.rx_seq = 0;
    T_EQ(rio__proto_rx_check(&cl, b, b + 32, len - 32, t0), RIO_EPROTO); /* c2s tag as s2c */
    sv.rx_seq = 2;
    T_EQ(rio__proto_rx_check(&sv, b, b + 32, len - 32, tu), RIO_EPROTO);
    rio__proto_sess_free(&cl);
    rio__proto_sess_free(&sv);
    rio__proto_sess_free(&other);
    rio__proto_sess_free(&unkeyed);
}

/* The HELLO request's check rides in caps. */
TEST(hello_request_check)
{
    uint8_t f[56];
    struct rio_proto_hello m = {.version_min = 2, .version_max = 2, .nonce = {9}};
    struct rio_proto_hdr h = {.version = 1, .opcode = RIO_OP_HELLO, .id = 1, .body_len = 24};

    rio__proto_hdr_encode(&h, f);
    T_EQ(rio__proto_enc_hello(&m, f + 32, 24), 24);
    rio__proto_hello_seal(f, f + 32);
    T_OK(rio__proto_hello_check(f, f + 32));
    for (size_t i = 0; i < sizeof(f); i++) {
        if (i >= 36 && i < 40)
            continue; /* the check itself */
        f[i] ^= 0x10;
        T_EQ(rio__proto_hello_check(f, f + 32), RIO_EPROTO);
        f[i] ^= 0x10;
    }
}

/* The one key rule (core/key.h) that the client, every transport and the
 * server apply: 1..RIO_KEY_MAX bytes, read no further than one past it. */
TEST(key_rule)
{
    char big[RIO_KEY_MAX + 2];
    size_t n = 7;

    T_ERR(rio__key_len(NULL, &n), RIO_EINVAL);
    T_ERR(rio__key_len("", &n), RIO_EINVAL);
    T_OK(rio__key_len("a", &n));
    T_EQ(n, 1u);
    memset(big, 'k', sizeof(big));
    big[RIO_KEY_MAX] = '\0';
    T_OK(rio__key_len(big, &n));
    T_EQ(n, (size_t)RIO_KEY_MAX);
    big[RIO_KEY_MAX] = 'k'; /* not terminated within RIO_KEY_MAX + 1: refused unread */
    T_ERR(rio__key_len(big, &n), RIO_EINVAL);
    T_FALSE(rio__key_len_ok(0));
    T_TRUE(rio__key_len_ok(1));
    T_TRUE(rio__key_len_ok(RIO_KEY_MAX));
    T_FALSE(rio__key_len_ok(RIO_KEY_MAX + 1));
}

/* The offsets railiod reads PUT_CHUNK and PUT_COMMIT at, and the LOOKUP
 * fixed part it writes, are the encoders' (proto.h names them once). */
TEST(named_offsets_match_encoders)
{
    uint8_t b[RIO_PROTO_DESC_FIXED + 2 * RIO_PROTO_XXH_LEN], f[RIO_PROTO_DESC_FIXED];
    struct rio_proto_put_chunk pc = {.upload_id = 11, .index = 22, .xxh = 33};
    T_EQ(rio__proto_enc_put_chunk_fixed(&pc, b, sizeof(b)), (int)RIO_PROTO_CHUNK_FIXED);
    T_EQ(rio__proto_u64(b + RIO_PROTO_CHUNK_OFF_ID), 11u);
    T_EQ(rio__proto_u64(b + RIO_PROTO_CHUNK_OFF_INDEX), 22u);
    T_EQ(rio__proto_u64(b + RIO_PROTO_CHUNK_OFF_XXH), 33u);

    uint64_t xxh[2] = {5, 6};
    struct rio_proto_put_commit pm = {.upload_id = 44, .nchunks = 2};
    memset(pm.etag, 'e', sizeof(pm.etag));
    T_EQ(rio__proto_enc_put_commit(&pm, xxh, b, sizeof(b)),
         (int)(RIO_PROTO_COMMIT_FIXED + 2 * RIO_PROTO_XXH_LEN));
    T_EQ(rio__proto_u64(b + RIO_PROTO_COMMIT_OFF_ID), 44u);
    T_EQ(rio__proto_u64(b + RIO_PROTO_COMMIT_OFF_NCHUNKS), 2u);
    T_EQ(memcmp(b + RIO_PROTO_COMMIT_OFF_ETAG, pm.etag, RIO_PROTO_ETAG_LEN), 0);
    T_EQ(rio__proto_u64(b + RIO_PROTO_COMMIT_FIXED + RIO_PROTO_XXH_LEN), 6u);

    struct rio_proto_desc d = {.generation = 7, .size = 100, .chunk_size = 64, .nchunks = 2};
    memset(d.etag, 'a', sizeof(d.etag));
    T_EQ(rio__proto_enc_desc(&d, xxh, b, sizeof(b)),
         (int)(RIO_PROTO_DESC_FIXED + 2 * RIO_PROTO_XXH_LEN));
    T_EQ(rio__proto_enc_desc_fixed(&d, f), (int)RIO_PROTO_DESC_FIXED);
    T_EQ(memcmp(b, f, RIO_PROTO_DESC_FIXED), 0);
    T_EQ(rio__proto_u64(b + RIO_PROTO_DESC_FIXED), 5u);
}

static void write_file(const char *path, const char *s, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    T_TRUE(fd >= 0);
    T_EQ(write(fd, s, n), (ssize_t)n);
    T_OK(fchmod(fd, mode));
    close(fd);
}

/* The one token-file reader of railio:// token_file= and railiod
 * --auth-token-file: trailing whitespace trimmed, empty and over-long
 * refused, group/other-readable reported. */
TEST(token_file_reader)
{
    char path[] = "/tmp/rio_token_XXXXXX";
    const char *why;
    uint8_t *tok = NULL;
    size_t len = 0;
    int loose = 0, fd = mkstemp(path);

    T_TRUE(fd >= 0);
    close(fd);
    write_file(path, "s3cret \r\n", 9, 0600);
    T_OK(rio__proto_token_read(path, &tok, &len, &loose, &why));
    T_EQ(len, 6u);
    T_EQ(memcmp(tok, "s3cret", 6), 0);
    T_EQ(loose, 0);
    rio__secret_free(tok);
    write_file(path, "s3cret", 6, 0644);
    T_OK(rio__proto_token_read(path, &tok, &len, &loose, &why));
    T_EQ(loose, 1);
    rio__secret_free(tok);
    write_file(path, "\n\n", 2, 0600);
    T_ERR(rio__proto_token_read(path, &tok, &len, &loose, &why), RIO_EINVAL);
    T_STREQ(why, "empty");
    char *big = malloc(RIO_PROTO_TOKEN_MAX + 1);
    memset(big, 'x', RIO_PROTO_TOKEN_MAX + 1);
    write_file(path, big, RIO_PROTO_TOKEN_MAX, 0600);
    T_OK(rio__proto_token_read(path, &tok, &len, &loose, &why));
    T_EQ(len, (size_t)RIO_PROTO_TOKEN_MAX);
    rio__secret_free(tok);
    write_file(path, big, RIO_PROTO_TOKEN_MAX + 1, 0600);
    T_ERR(rio__proto_token_read(path, &tok, &len, &loose, &why), RIO_EINVAL);
    T_STREQ(why, "longer than 4096 bytes");
    free(big);
    unlink(path);
    T_ERR(rio__proto_token_read(path, &tok, &len, &loose, &why), -ENOENT);
    T_NULL(why);
}
