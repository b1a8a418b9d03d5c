/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Encoding and decoding of railio frames. Layouts are in docs/protocol.md;
 * every decoder consumes its body exactly and checks each length against
 * what remains before reading it.
 */
#include <errno.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <xxhash.h>

#include "core/checksum.h"
#include "core/key.h"
#include "proto/proto.h"
#include "railio.h"

#define CHUNK_MAX (1ull << 30)

/* ------------------------------------------------------------- cursors */

struct wbuf {
    uint8_t *p;
    size_t len, cap;
    int err;
};

static void w_bytes(struct wbuf *w, const void *src, size_t n)
{
    if (w->err || n > w->cap - w->len) {
        w->err = 1;
        return;
    }
    memcpy(w->p + w->len, src, n);
    w->len += n;
}

static void w_le(struct wbuf *w, uint64_t v, unsigned n)
{
    uint8_t b[8];
    for (unsigned i = 0; i < n; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    w_bytes(w, b, n);
}

static int w_done(const struct wbuf *w)
{
    return w->err ? -ENOBUFS : (int)w->len;
}

struct rbuf {
    const uint8_t *p;
    size_t len, off;
    int err;
};

static const uint8_t *r_bytes(struct rbuf *r, size_t n)
{
    if (r->err || n > r->len - r->off) {
        r->err = 1;
        return NULL;
    }
    const uint8_t *q = r->p + r->off;
    r->off += n;
    return q;
}

static uint64_t r_le(struct rbuf *r, unsigned n)
{
    const uint8_t *q = r_bytes(r, n);
    uint64_t v = 0;
    if (!q)
        return 0;
    for (int i = (int)n - 1; i >= 0; i--)
        v = (v << 8) | q[i];
    return v;
}

/* The body was consumed exactly and nothing was out of bounds. */
static int r_done(const struct rbuf *r)
{
    return r->err || r->off != r->len ? RIO_EPROTO : 0;
}

static const char *r_key(struct rbuf *r, uint16_t *len)
{
    uint64_t n = r_le(r, 2);
    if (!rio__key_len_ok((size_t)n)) {
        r->err = 1;
        return NULL;
    }
    *len = (uint16_t)n;
    const char *k = (const char *)r_bytes(r, (size_t)n);
    if (k && memchr(k, 0, (size_t)n))
        r->err = 1; /* keys are C strings everywhere else */
    return k;
}

static void w_key(struct wbuf *w, const char *key, uint16_t len)
{
    if (!rio__key_len_ok(len)) {
        w->err = 1;
        return;
    }
    w_le(w, len, 2);
    w_bytes(w, key, len);
}

/* ------------------------------------------------------------- header */

const char *rio__proto_op_name(int op)
{
    static const char *const names[] = {
        "?",         "HELLO", "AUTH",   "PING", "LOOKUP", "PUT_OPEN", "PUT_CHUNK", "PUT_COMMIT",
        "PUT_ABORT", "READ",  "DELETE", "STAT", "LIST",   "EXISTS",   "PUT_ONE",   "GET_ONE",
    };
    return op > 0 && op <= RIO_OP__MAX ? names[op] : "?";
}

static uint32_t hdr_check(const uint8_t *b)
{
    return (uint32_t)rio__xxh3(b, 24);
}

void rio__proto_hdr_encode(const struct rio_proto_hdr *h, uint8_t out[RIO_PROTO_HDR_LEN])
{
    struct wbuf w = {.p = out, .cap = RIO_PROTO_HDR_LEN};
    w_le(&w, RIO_PROTO_MAGIC, 4);
    w_le(&w, h->version ? h->version : RIO_PROTO_VERSION, 1);
    w_le(&w, h->opcode, 1);
    w_le(&w, h->flags, 2);
    w_le(&w, h->id, 8);
    w_le(&w, h->body_len, 4);
    w_le(&w, (uint32_t)h->status, 4);
    w_le(&w, hdr_check(out), 4);
    w_le(&w, (h->flags & RIO_PF_SVC) && (h->flags & RIO_PF_RESPONSE) ? h->svc_us : 0, 4);
}

void rio__proto_hdr_set_flags(uint8_t hdr[RIO_PROTO_HDR_LEN], uint16_t flags)
{
    uint32_t check;

    hdr[6] = (uint8_t)flags;
    hdr[7] = (uint8_t)(flags >> 8);
    check = hdr_check(hdr);
    for (int i = 0; i < 4; i++)
        hdr[24 + i] = (uint8_t)(check >> (8 * i));
}

int rio__proto_hdr_decode(const uint8_t in[RIO_PROTO_HDR_LEN], uint32_t max_body,
                          struct rio_proto_hdr *h)
{
    struct rbuf r = {.p = in, .len = RIO_PROTO_HDR_LEN};
    h->magic = (uint32_t)r_le(&r, 4);
    h->version = (uint8_t)r_le(&r, 1);
    h->opcode = (uint8_t)r_le(&r, 1);
    h->flags = (uint16_t)r_le(&r, 2);
    h->id = r_le(&r, 8);
    h->body_len = (uint32_t)r_le(&r, 4);
    h->status = (int32_t)(uint32_t)r_le(&r, 4);
    uint32_t check = (uint32_t)r_le(&r, 4);
    uint32_t reserved = (uint32_t)r_le(&r, 4);
    h->svc_us = 0;
    if (h->magic != RIO_PROTO_MAGIC || check != hdr_check(in))
        return RIO_EPROTO;
    if (h->version != RIO_PROTO_VERSION)
        return h->version == 0 ? RIO_EPROTO : RIO_EVERSION;
    if (h->opcode < 1 || h->opcode > RIO_OP__MAX)
        return RIO_EPROTO;
    if (h->flags & ~(RIO_PF_RESPONSE | RIO_PF_SVC))
        return RIO_EPROTO;
    /* Bytes 28..31 carry a service time on an answer that says so. */
    if ((h->flags & RIO_PF_SVC) && (h->flags & RIO_PF_RESPONSE))
        h->svc_us = reserved;
    else if (reserved != 0)
        return RIO_EPROTO;
    if (h->body_len > max_body || h->body_len > RIO_PROTO_BODY_CAP)
        return RIO_EPROTO;
    if (!(h->flags & RIO_PF_RESPONSE) && h->status != 0)
        return RIO_EPROTO;
    return 0;
}

int rio__proto_layout(const struct rio_proto_hdr *h, uint32_t *ctl, uint32_t *data)
{
    uint32_t fixed = 0;

    if (h->opcode == RIO_OP_PUT_CHUNK && !(h->flags & RIO_PF_RESPONSE))
        fixed = RIO_PROTO_CHUNK_FIXED;
    else if (h->opcode == RIO_OP_PUT_ONE && !(h->flags & RIO_PF_RESPONSE))
        fixed = RIO_PROTO_ONE_FIXED; /* the key, then the data: data counts both */
    else if (h->opcode == RIO_OP_READ && (h->flags & RIO_PF_RESPONSE) && h->status == 0)
        fixed = RIO_PROTO_READ_FIXED;
    else if (h->opcode == RIO_OP_GET_ONE && (h->flags & RIO_PF_RESPONSE) && h->status == 0) {
        /* The descriptor alone, or with the xxh3 and the bytes. */
        if (h->body_len == RIO_PROTO_GET_ONE_DESC + RIO_PROTO_TAG_LEN) {
            *ctl = RIO_PROTO_GET_ONE_DESC;
            *data = 0;
            return 0;
        }
        fixed = RIO_PROTO_GET_ONE_WITH_DATA;
    }
    if (fixed) {
        /* The data is at least one byte. */
        if (h->body_len <= fixed + RIO_PROTO_TAG_LEN)
            return RIO_EPROTO;
        *ctl = fixed;
        *data = h->body_len - fixed - RIO_PROTO_TAG_LEN;
        return 0;
    }
    if (h->body_len < RIO_PROTO_TAG_LEN)
        return RIO_EPROTO;
    *ctl = h->body_len - RIO_PROTO_TAG_LEN;
    *data = 0;
    return 0;
}

/* ------------------------------------------------------- frame checks */

static uint32_t hello_sum(const uint8_t hdr[RIO_PROTO_HDR_LEN], const uint8_t body[24])
{
    uint8_t b[RIO_PROTO_HDR_LEN + 24];

    memcpy(b, hdr, RIO_PROTO_HDR_LEN);
    memcpy(b + RIO_PROTO_HDR_LEN, body, 24);
    memset(b + RIO_PROTO_HDR_LEN + 4, 0, 4); /* caps, where the sum goes */
    return (uint32_t)rio__xxh3(b, sizeof(b));
}

void rio__proto_hello_seal(const uint8_t hdr[RIO_PROTO_HDR_LEN], uint8_t body[24])
{
    uint32_t v = hello_sum(hdr, body);
    for (int i = 0; i < 4; i++)
        body[4 + i] = (uint8_t)(v >> (8 * i));
}

int rio__proto_hello_check(const uint8_t hdr[RIO_PROTO_HDR_LEN], const uint8_t body[24])
{
    uint32_t v = (uint32_t)body[4] | (uint32_t)body[5] << 8 | (uint32_t)body[6] << 16 |
                 (uint32_t)body[7] << 24;
    return v == hello_sum(hdr, body) ? 0 : RIO_EPROTO;
}

static void *mac_new(const uint8_t key[32])
{
    EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
    EVP_MAC_CTX *ctx = mac ? EVP_MAC_CTX_new(mac) : NULL;
    OSSL_PARAM params[2] = {
        OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, (char *)"SHA256", 0),
        OSSL_PARAM_construct_end(),
    };

    EVP_MAC_free(mac); /* the context keeps its own reference */
    if (ctx && !EVP_MAC_init(ctx, key, 32, params)) {
        EVP_MAC_CTX_free(ctx);
        ctx = NULL;
    }
    return ctx;
}

void rio__proto_sess_free(struct rio_proto_sess *s)
{
    EVP_MAC_CTX_free(s->tx_key);
    EVP_MAC_CTX_free(s->rx_key);
    EVP_MAC_CTX_free(s->rx_mac);
    if (s->rx_xxh)
        XXH3_freeState(s->rx_xxh);
    memset(s, 0, sizeof(*s));
}

int rio__proto_sess_key(struct rio_proto_sess *s, const uint8_t *token, size_t token_len,
                        const uint8_t cnonce[RIO_PROTO_NONCE_LEN],
                        const uint8_t snonce[RIO_PROTO_NONCE_LEN], int server)
{
    uint8_t k[RIO_PROTO_MAC_LEN], c2s[RIO_PROTO_MAC_LEN], s2c[RIO_PROTO_MAC_LEN];
    unsigned int l1 = 0, l2 = 0;
    void *tx, *rx;
    int ret = -ENOMEM;

    if (rio__proto_auth_mac(token, token_len, "railio-session-v2", cnonce, snonce, k) < 0)
        return -ENOMEM;
    if (!HMAC(EVP_sha256(), k, sizeof(k), (const uint8_t *)"railio-c2s-v2", 13, c2s, &l1) ||
        !HMAC(EVP_sha256(), k, sizeof(k), (const uint8_t *)"railio-s2c-v2", 13, s2c, &l2))
        goto out;
    tx = mac_new(server ? s2c : c2s);
    rx = mac_new(server ? c2s : s2c);
    if (!tx || !rx) {
        EVP_MAC_CTX_free(tx);
        EVP_MAC_CTX_free(rx);
        goto out;
    }
    EVP_MAC_CTX_free(s->tx_key);
    EVP_MAC_CTX_free(s->rx_key);
    s->tx_key = tx;
    s->rx_key = rx;
    s->tx_seq = s->rx_seq = 0;
    ret = 0;
out:
    OPENSSL_cleanse(k, sizeof(k));
    OPENSSL_cleanse(c2s, sizeof(c2s));
    OPENSSL_cleanse(s2c, sizeof(s2c));
    return ret;
}

static void xxh128_tag(XXH128_hash_t h, uint8_t tag[RIO_PROTO_TAG_LEN])
{
    for (int i = 0; i < 8; i++) {
        tag[i] = (uint8_t)(h.low64 >> (8 * i));
        tag[8 + i] = (uint8_t)(h.high64 >> (8 * i));
    }
}

/* A keyed frame's MAC context: the template's copy, fed the sequence number. */
static EVP_MAC_CTX *mac_start(void *key, uint64_t seq)
{
    EVP_MAC_CTX *m = EVP_MAC_CTX_dup(key);
    uint8_t sb[8];

    if (!m)
        return NULL;
    for (int i = 0; i < 8; i++)
        sb[i] = (uint8_t)(seq >> (8 * i));
    if (!EVP_MAC_update(m, sb, sizeof(sb))) {
        EVP_MAC_CTX_free(m);
        return NULL;
    }
    return m;
}

static int mac_end(EVP_MAC_CTX *m, uint8_t tag[RIO_PROTO_TAG_LEN])
{
    uint8_t full[RIO_PROTO_MAC_LEN];
    size_t l = 0;
    int ok = EVP_MAC_final(m, full, &l, sizeof(full)) && l == sizeof(full);

    EVP_MAC_CTX_free(m);
    memcpy(tag, full, RIO_PROTO_TAG_LEN);
    OPENSSL_cleanse(full, sizeof(full));
    return ok ? 0 : -ENOMEM;
}

int rio__proto_seal(const struct rio_proto_sess *s, uint64_t seq, const struct iovec *parts, int n,
                    uint8_t tag[RIO_PROTO_TAG_LEN])
{
    if (s->tx_key) {
        EVP_MAC_CTX *m = mac_start(s->tx_key, seq);
        if (!m)
            return -ENOMEM;
        for (int i = 0; i < n; i++)
            if (parts[i].iov_len && !EVP_MAC_update(m, parts[i].iov_base, parts[i].iov_len)) {
                EVP_MAC_CTX_free(m);
                return -ENOMEM;
            }
        return mac_end(m, tag);
    }
    size_t total = 0;
    for (int i = 0; i < n; i++)
        total += parts[i].iov_len;
    if (total <= 512) {
        /* The usual control frame: one pass over a copy. */
        uint8_t b[512];
        size_t off = 0;
        for (int i = 0; i < n; i++) {
            if (parts[i].iov_len)
                memcpy(b + off, parts[i].iov_base, parts[i].iov_len);
            off += parts[i].iov_len;
        }
        xxh128_tag(XXH3_128bits(b, off), tag);
        return 0;
    }
    XXH3_state_t *st = XXH3_createState();
    if (!st || XXH3_128bits_reset(st) != XXH_OK) {
        XXH3_freeState(st);
        return -ENOMEM;
    }
    for (int i = 0; i < n; i++)
        if (parts[i].iov_len)
            XXH3_128bits_update(st, parts[i].iov_base, parts[i].iov_len);
    xxh128_tag(XXH3_128bits_digest(st), tag);
    XXH3_freeState(st);
    return 0;
}

int rio__proto_rx_begin(struct rio_proto_sess *s, const uint8_t hdr[RIO_PROTO_HDR_LEN])
{
    if (s->rx_key) {
        EVP_MAC_CTX_free(s->rx_mac);
        s->rx_mac = mac_start(s->rx_key, s->rx_seq);
        if (!s->rx_mac || !EVP_MAC_update(s->rx_mac, hdr, RIO_PROTO_HDR_LEN))
            return -ENOMEM;
        return 0;
    }
    if (!s->rx_xxh && !(s->rx_xxh = XXH3_createState()))
        return -ENOMEM;
    if (XXH3_128bits_reset(s->rx_xxh) != XXH_OK)
        return -ENOMEM;
    XXH3_128bits_update(s->rx_xxh, hdr, RIO_PROTO_HDR_LEN);
    return 0;
}

void rio__proto_rx_update(struct rio_proto_sess *s, const void *p, size_t n)
{
    if (!n)
        return;
    if (s->rx_key) {
        if (s->rx_mac && !EVP_MAC_update(s->rx_mac, p, n)) {
            EVP_MAC_CTX_free(s->rx_mac);
            s->rx_mac = NULL; /* the end fails */
        }
        return;
    }
    if (s->rx_xxh)
        XXH3_128bits_update(s->rx_xxh, p, n);
}

int rio__proto_rx_end(struct rio_proto_sess *s, const uint8_t tag[RIO_PROTO_TAG_LEN])
{
    uint8_t want[RIO_PROTO_TAG_LEN];

    if (s->rx_key) {
        EVP_MAC_CTX *m = s->rx_mac;
        s->rx_mac = NULL;
        if (!m || mac_end(m, want) < 0)
            return RIO_EPROTO;
        s->rx_seq++;
    } else {
        if (!s->rx_xxh)
            return RIO_EPROTO;
        xxh128_tag(XXH3_128bits_digest(s->rx_xxh), want);
    }
    return CRYPTO_memcmp(want, tag, RIO_PROTO_TAG_LEN) == 0 ? 0 : RIO_EPROTO;
}

int rio__proto_rx_check(struct rio_proto_sess *s, const uint8_t hdr[RIO_PROTO_HDR_LEN],
                        const void *ctl, size_t ctl_len, const uint8_t tag[RIO_PROTO_TAG_LEN])
{
    int ret = rio__proto_rx_begin(s, hdr);

    if (ret < 0)
        return RIO_EPROTO;
    rio__proto_rx_update(s, ctl, ctl_len);
    return rio__proto_rx_end(s, tag);
}

/* --------------------------------------------------------------- HELLO */

int rio__proto_enc_hello(const struct rio_proto_hello *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->version_min, 2);
    w_le(&w, m->version_max, 2);
    w_le(&w, m->caps, 4);
    w_bytes(&w, m->nonce, RIO_PROTO_NONCE_LEN);
    return w_done(&w);
}

int rio__proto_dec_hello(const uint8_t *body, size_t len, struct rio_proto_hello *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->version_min = (uint16_t)r_le(&r, 2);
    m->version_max = (uint16_t)r_le(&r, 2);
    m->caps = (uint32_t)r_le(&r, 4);
    const uint8_t *n = r_bytes(&r, RIO_PROTO_NONCE_LEN);
    if (n)
        memcpy(m->nonce, n, RIO_PROTO_NONCE_LEN);
    if (m->version_min > m->version_max)
        return RIO_EPROTO;
    return r_done(&r);
}

int rio__proto_enc_hello_resp(const struct rio_proto_hello_resp *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    if (m->nrails > RIO_PROTO_MAX_RAILS)
        return -ENOBUFS;
    w_le(&w, m->version, 2);
    w_le(&w, m->nrails, 2);
    w_le(&w, m->caps, 4);
    w_le(&w, m->auth_required, 4);
    w_le(&w, m->max_body, 4);
    w_le(&w, m->max_depth, 4);
    w_bytes(&w, m->nonce, RIO_PROTO_NONCE_LEN);
    for (uint32_t i = 0; i < m->nrails; i++) {
        if (m->rail_len[i] == 0 || m->rail_len[i] > RIO_PROTO_ADDR_MAX)
            return -ENOBUFS;
        w_le(&w, m->rail_len[i], 2);
        w_bytes(&w, m->rail[i], m->rail_len[i]);
    }
    return w_done(&w);
}

int rio__proto_dec_hello_resp(const uint8_t *body, size_t len, struct rio_proto_hello_resp *m)
{
    struct rbuf r = {.p = body, .len = len};
    memset(m, 0, sizeof(*m));
    m->version = (uint16_t)r_le(&r, 2);
    m->nrails = (uint32_t)r_le(&r, 2);
    m->caps = (uint32_t)r_le(&r, 4);
    m->auth_required = (uint32_t)r_le(&r, 4);
    m->max_body = (uint32_t)r_le(&r, 4);
    m->max_depth = (uint32_t)r_le(&r, 4);
    const uint8_t *n = r_bytes(&r, RIO_PROTO_NONCE_LEN);
    if (n)
        memcpy(m->nonce, n, RIO_PROTO_NONCE_LEN);
    if (m->nrails > RIO_PROTO_MAX_RAILS || m->auth_required > 1)
        return RIO_EPROTO;
    for (uint32_t i = 0; i < m->nrails && !r.err; i++) {
        uint64_t l = r_le(&r, 2);
        if (l == 0 || l > RIO_PROTO_ADDR_MAX)
            return RIO_EPROTO;
        m->rail_len[i] = (uint16_t)l;
        m->rail[i] = (const char *)r_bytes(&r, (size_t)l);
    }
    return r_done(&r);
}

/* ---------------------------------------------------------------- AUTH */

int rio__proto_enc_auth(const struct rio_proto_auth *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_bytes(&w, m->mac, RIO_PROTO_MAC_LEN);
    return w_done(&w);
}

int rio__proto_dec_auth(const uint8_t *body, size_t len, struct rio_proto_auth *m)
{
    struct rbuf r = {.p = body, .len = len};
    const uint8_t *p = r_bytes(&r, RIO_PROTO_MAC_LEN);
    if (p)
        memcpy(m->mac, p, RIO_PROTO_MAC_LEN);
    return r_done(&r);
}

int rio__proto_enc_auth_resp(const struct rio_proto_auth_resp *m, uint8_t *out, size_t cap)
{
    return rio__proto_enc_auth((const struct rio_proto_auth *)m, out, cap);
}

int rio__proto_dec_auth_resp(const uint8_t *body, size_t len, struct rio_proto_auth_resp *m)
{
    return rio__proto_dec_auth(body, len, (struct rio_proto_auth *)m);
}

int rio__proto_auth_mac(const uint8_t *token, size_t token_len, const char *label,
                        const uint8_t a[RIO_PROTO_NONCE_LEN], const uint8_t b[RIO_PROTO_NONCE_LEN],
                        uint8_t mac[RIO_PROTO_MAC_LEN])
{
    uint8_t msg[64 + 2 * RIO_PROTO_NONCE_LEN];
    size_t ll = strlen(label);
    unsigned int outlen = 0;
    if (ll > 64)
        return RIO_EINVAL;
    memcpy(msg, label, ll);
    memcpy(msg + ll, a, RIO_PROTO_NONCE_LEN);
    memcpy(msg + ll + RIO_PROTO_NONCE_LEN, b, RIO_PROTO_NONCE_LEN);
    if (!HMAC(EVP_sha256(), token, (int)token_len, msg, ll + 2 * RIO_PROTO_NONCE_LEN, mac,
              &outlen) ||
        outlen != RIO_PROTO_MAC_LEN)
        return -ENOMEM;
    return 0;
}

/* ----------------------------------------------------------------- KEY */

int rio__proto_enc_key(const struct rio_proto_key *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_key(&w, m->key, m->key_len);
    return w_done(&w);
}

int rio__proto_dec_key(const uint8_t *body, size_t len, struct rio_proto_key *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->key = r_key(&r, &m->key_len);
    return r_done(&r);
}

int rio__proto_enc_delete(const struct rio_proto_delete *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_key(&w, m->key, m->key_len);
    if (m->if_gen)
        w_le(&w, m->if_gen, 8);
    return w_done(&w);
}

int rio__proto_dec_delete(const uint8_t *body, size_t len, struct rio_proto_delete *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->key = r_key(&r, &m->key_len);
    m->if_gen = 0;
    if (!r.err && r.len - r.off == 8) {
        m->if_gen = r_le(&r, 8);
        if (!m->if_gen)
            return RIO_EPROTO; /* a generation of 0 names none: malformed */
    }
    return r_done(&r);
}

/* ---------------------------------------------------------- descriptor */

/* A geometry a reader can trust: chunk count matches size and chunk size. */
static int geometry_ok(uint64_t size, uint64_t chunk, uint64_t nchunks)
{
    if (size == 0)
        return nchunks == 0;
    if (chunk == 0 || chunk > CHUNK_MAX)
        return 0;
    return nchunks == (size - 1) / chunk + 1;
}

static void w_xxh_list(struct wbuf *w, uint64_t n, const uint64_t *xxh)
{
    for (uint64_t i = 0; i < n && !w->err; i++)
        w_le(w, xxh[i], 8);
}

static int r_etag(struct rbuf *r, void *etag)
{
    const uint8_t *e = r_bytes(r, RIO_PROTO_ETAG_LEN);

    if (!e)
        return -1;
    memcpy(etag, e, RIO_PROTO_ETAG_LEN);
    return 0;
}

static int r_xxh_list(struct rbuf *r, uint64_t n, const uint8_t **out)
{
    /* n x 8 bytes must be exactly what remains: compare by division so a
     * huge n cannot overflow the product. */
    size_t rem = r->len - r->off;
    if (r->err || rem % 8 != 0 || rem / 8 != n)
        return RIO_EPROTO;
    *out = n ? r_bytes(r, rem) : NULL;
    return 0;
}

static void w_desc_fixed(struct wbuf *w, const struct rio_proto_desc *m)
{
    w_le(w, m->generation, 8);
    w_le(w, m->size, 8);
    w_le(w, m->chunk_size, 8);
    w_le(w, m->nchunks, 8);
    w_bytes(w, m->etag, RIO_PROTO_ETAG_LEN);
}

int rio__proto_enc_desc_fixed(const struct rio_proto_desc *m, uint8_t out[RIO_PROTO_DESC_FIXED])
{
    struct wbuf w = {.p = out, .cap = RIO_PROTO_DESC_FIXED};
    w_desc_fixed(&w, m);
    return w_done(&w);
}

int rio__proto_enc_desc(const struct rio_proto_desc *m, const uint64_t *xxh, uint8_t *out,
                        size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_desc_fixed(&w, m);
    w_xxh_list(&w, m->nchunks, xxh);
    return w_done(&w);
}

int rio__proto_dec_desc(const uint8_t *body, size_t len, struct rio_proto_desc *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->generation = r_le(&r, 8);
    m->size = r_le(&r, 8);
    m->chunk_size = r_le(&r, 8);
    m->nchunks = r_le(&r, 8);
    if (r_etag(&r, m->etag) < 0)
        return RIO_EPROTO;
    if (!geometry_ok(m->size, m->chunk_size, m->nchunks) || m->generation == 0)
        return RIO_EPROTO;
    if (r_xxh_list(&r, m->nchunks, &m->xxh) < 0)
        return RIO_EPROTO;
    return r_done(&r);
}

/* ----------------------------------------------------------------- PUT */

/* PUT_OPEN and READ share one layout: two u64, a u32, then the key. */
static int enc_u64_u64_u32_key(uint64_t a, uint64_t b, uint32_t c, const char *key,
                               uint16_t key_len, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, a, 8);
    w_le(&w, b, 8);
    w_le(&w, c, 4);
    w_key(&w, key, key_len);
    return w_done(&w);
}

static int dec_u64_u64_u32_key(const uint8_t *body, size_t len, uint64_t *a, uint64_t *b,
                               uint32_t *c, const char **key, uint16_t *key_len)
{
    struct rbuf r = {.p = body, .len = len};
    *a = r_le(&r, 8);
    *b = r_le(&r, 8);
    *c = (uint32_t)r_le(&r, 4);
    *key = r_key(&r, key_len);
    return r_done(&r);
}

/* A chunk size or one READ's length: 1..CHUNK_MAX. */
static int chunk_len_ok(int ret, uint64_t n)
{
    return ret < 0 || n == 0 || n > CHUNK_MAX ? RIO_EPROTO : 0;
}

int rio__proto_enc_put_open(const struct rio_proto_put_open *m, uint8_t *out, size_t cap)
{
    return enc_u64_u64_u32_key(m->size, m->chunk_size, m->ttl_ms, m->key, m->key_len, out, cap);
}

int rio__proto_dec_put_open(const uint8_t *body, size_t len, struct rio_proto_put_open *m)
{
    int ret =
        dec_u64_u64_u32_key(body, len, &m->size, &m->chunk_size, &m->ttl_ms, &m->key, &m->key_len);
    return chunk_len_ok(ret, m->chunk_size);
}

/* Messages of n u64 fields and nothing else (an upload id, a generation,
 * STAT's figures): the fields as uint64_t arguments, or pointers to them. */
static int enc_u64s(uint8_t *out, size_t cap, unsigned n, ...)
{
    struct wbuf w = {.p = out, .cap = cap};
    va_list ap;

    va_start(ap, n);
    for (unsigned i = 0; i < n; i++)
        w_le(&w, va_arg(ap, uint64_t), 8);
    va_end(ap);
    return w_done(&w);
}

static int dec_u64s(const uint8_t *body, size_t len, unsigned n, ...)
{
    struct rbuf r = {.p = body, .len = len};
    va_list ap;

    va_start(ap, n);
    for (unsigned i = 0; i < n; i++)
        *va_arg(ap, uint64_t *) = r_le(&r, 8);
    va_end(ap);
    return r_done(&r);
}

int rio__proto_enc_put_open_resp(const struct rio_proto_put_open_resp *m, uint8_t *out, size_t cap)
{
    return enc_u64s(out, cap, 1, m->upload_id);
}

int rio__proto_dec_put_open_resp(const uint8_t *body, size_t len, struct rio_proto_put_open_resp *m)
{
    return dec_u64s(body, len, 1, &m->upload_id);
}

int rio__proto_enc_put_chunk_fixed(const struct rio_proto_put_chunk *m, uint8_t *out, size_t cap)
{
    return enc_u64s(out, cap, 3, m->upload_id, m->index, m->xxh);
}

int rio__proto_dec_put_chunk(const uint8_t *body, size_t len, struct rio_proto_put_chunk *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->upload_id = r_le(&r, 8);
    m->index = r_le(&r, 8);
    m->xxh = r_le(&r, 8);
    size_t rem = r.err ? 0 : r.len - r.off;
    if (rem == 0 || rem > CHUNK_MAX)
        return RIO_EPROTO;
    m->len = (uint32_t)rem;
    m->data = r_bytes(&r, rem);
    return r_done(&r);
}

int rio__proto_enc_put_one(const struct rio_proto_put_one *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->chunk_size, 8);
    w_le(&w, m->xxh, 8);
    w_le(&w, m->ttl_ms, 4);
    w_le(&w, m->flags, 4);
    w_bytes(&w, m->etag, 32);
    w_key(&w, m->key, m->key_len);
    return w_done(&w);
}

int rio__proto_put_one_key_len(const uint8_t *fixed, uint16_t *key_len)
{
    uint16_t n = (uint16_t)(fixed[RIO_PROTO_ONE_OFF_KEYLEN] |
                            (uint16_t)fixed[RIO_PROTO_ONE_OFF_KEYLEN + 1] << 8);
    if (!rio__key_len_ok(n))
        return RIO_EPROTO;
    *key_len = n;
    return 0;
}

int rio__proto_dec_put_one(const uint8_t *ctl, size_t len, uint64_t data_len,
                           struct rio_proto_put_one *m)
{
    struct rbuf r = {.p = ctl, .len = len};
    m->chunk_size = r_le(&r, 8);
    m->xxh = r_le(&r, 8);
    m->ttl_ms = (uint32_t)r_le(&r, 4);
    m->flags = (uint32_t)r_le(&r, 4);
    const uint8_t *etag = r_bytes(&r, 32);
    if (etag)
        memcpy(m->etag, etag, 32);
    m->key = r_key(&r, &m->key_len);
    int ret = chunk_len_ok(r_done(&r), m->chunk_size);
    if (ret == 0 && (m->flags || data_len == 0 || data_len > m->chunk_size))
        ret = RIO_EPROTO;
    return ret;
}

int rio__proto_enc_put_commit(const struct rio_proto_put_commit *m, const uint64_t *xxh,
                              uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->upload_id, 8);
    w_le(&w, m->nchunks, 8);
    w_bytes(&w, m->etag, 32);
    w_xxh_list(&w, m->nchunks, xxh);
    if (m->if_gen)
        w_le(&w, m->if_gen, 8);
    return w_done(&w);
}

int rio__proto_dec_put_commit(const uint8_t *body, size_t len, struct rio_proto_put_commit *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->upload_id = r_le(&r, 8);
    m->nchunks = r_le(&r, 8);
    if (r_etag(&r, m->etag) < 0)
        return RIO_EPROTO;
    if (r_xxh_list(&r, m->nchunks, &m->xxh) < 0)
        return RIO_EPROTO;
    m->if_gen = 0;
    if (!r.err && r.len - r.off == 8) {
        m->if_gen = r_le(&r, 8);
        if (!m->if_gen)
            return RIO_EPROTO; /* a condition of none is no condition: malformed */
    }
    return r_done(&r);
}

int rio__proto_enc_put_commit_resp(const struct rio_proto_put_commit_resp *m, uint8_t *out,
                                   size_t cap)
{
    return enc_u64s(out, cap, 1, m->generation);
}

int rio__proto_dec_put_commit_resp(const uint8_t *body, size_t len,
                                   struct rio_proto_put_commit_resp *m)
{
    int ret = dec_u64s(body, len, 1, &m->generation);
    return ret < 0 || m->generation == 0 ? RIO_EPROTO : 0;
}

int rio__proto_enc_put_abort(const struct rio_proto_put_abort *m, uint8_t *out, size_t cap)
{
    return enc_u64s(out, cap, 1, m->upload_id);
}

int rio__proto_dec_put_abort(const uint8_t *body, size_t len, struct rio_proto_put_abort *m)
{
    return dec_u64s(body, len, 1, &m->upload_id);
}

/* ---------------------------------------------------------------- READ */

int rio__proto_enc_read(const struct rio_proto_read *m, uint8_t *out, size_t cap)
{
    return enc_u64_u64_u32_key(m->generation, m->off, m->len, m->key, m->key_len, out, cap);
}

int rio__proto_dec_read(const uint8_t *body, size_t len, struct rio_proto_read *m)
{
    int ret =
        dec_u64_u64_u32_key(body, len, &m->generation, &m->off, &m->len, &m->key, &m->key_len);
    return chunk_len_ok(ret, m->len);
}

/* ------------------------------------------------------------- GET_ONE */

int rio__proto_enc_get_one(const struct rio_proto_get_one *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->max_len, 4);
    w_le(&w, m->flags, 4);
    w_key(&w, m->key, m->key_len);
    return w_done(&w);
}

int rio__proto_dec_get_one(const uint8_t *body, size_t len, struct rio_proto_get_one *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->max_len = (uint32_t)r_le(&r, 4);
    m->flags = (uint32_t)r_le(&r, 4);
    m->key = r_key(&r, &m->key_len);
    int ret = chunk_len_ok(r_done(&r), m->max_len);
    return ret == 0 && m->flags ? RIO_EPROTO : ret;
}

int rio__proto_enc_get_one_resp(const struct rio_proto_desc *d, int with_data, uint64_t xxh,
                                uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_desc_fixed(&w, d);
    if (with_data)
        w_le(&w, xxh, 8);
    return w_done(&w);
}

int rio__proto_dec_get_one_resp(const uint8_t *ctl, size_t ctl_len, uint64_t data_len,
                                uint32_t max_len, struct rio_proto_desc *d, uint64_t *xxh)
{
    if (ctl_len != RIO_PROTO_GET_ONE_DESC && ctl_len != RIO_PROTO_GET_ONE_WITH_DATA)
        return RIO_EPROTO;
    struct rbuf r = {.p = ctl, .len = ctl_len};
    d->generation = r_le(&r, 8);
    d->size = r_le(&r, 8);
    d->chunk_size = r_le(&r, 8);
    d->nchunks = r_le(&r, 8);
    d->xxh = NULL;
    if (r_etag(&r, d->etag) < 0)
        return RIO_EPROTO;
    if (!geometry_ok(d->size, d->chunk_size, d->nchunks) || d->generation == 0)
        return RIO_EPROTO;
    int fits = d->nchunks == 1 && d->size <= max_len;
    if (ctl_len == RIO_PROTO_GET_ONE_DESC)
        return data_len == 0 && !fits ? r_done(&r) : RIO_EPROTO;
    *xxh = r_le(&r, 8);
    if (!fits || d->size != data_len)
        return RIO_EPROTO;
    return r_done(&r);
}

/* ---------------------------------------------------------------- STAT */

int rio__proto_enc_stat_resp(const struct rio_proto_stat_resp *m, uint8_t *out, size_t cap)
{
    return enc_u64s(out, cap, 5, m->objects, m->bytes, m->capacity, m->uploads, m->connections);
}

int rio__proto_dec_stat_resp(const uint8_t *body, size_t len, struct rio_proto_stat_resp *m)
{
    return dec_u64s(body, len, 5, &m->objects, &m->bytes, &m->capacity, &m->uploads,
                    &m->connections);
}

/* ---------------------------------------------------------------- LIST */

/* A string of 0..RIO_KEY_MAX bytes without NUL (a prefix, a cursor). */
static const char *r_str(struct rbuf *r, uint16_t *len)
{
    uint64_t n = r_le(r, 2);
    if (n > RIO_KEY_MAX) {
        r->err = 1;
        return NULL;
    }
    *len = (uint16_t)n;
    const char *k = (const char *)r_bytes(r, (size_t)n);
    if (k && memchr(k, 0, (size_t)n))
        r->err = 1;
    return n ? k : "";
}

static void w_str(struct wbuf *w, const char *s, uint16_t len)
{
    if (len > RIO_KEY_MAX) {
        w->err = 1;
        return;
    }
    w_le(w, len, 2);
    if (len)
        w_bytes(w, s, len);
}

int rio__proto_enc_list(const struct rio_proto_list *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->max_keys, 4);
    w_le(&w, m->flags, 4);
    w_str(&w, m->prefix, m->prefix_len);
    w_str(&w, m->after, m->after_len);
    return w_done(&w);
}

int rio__proto_dec_list(const uint8_t *body, size_t len, struct rio_proto_list *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->max_keys = (uint32_t)r_le(&r, 4);
    m->flags = (uint32_t)r_le(&r, 4);
    m->prefix = r_str(&r, &m->prefix_len);
    m->after = r_str(&r, &m->after_len);
    if (m->flags & ~RIO_PROTO_LIST_DELIM)
        return RIO_EPROTO;
    return r_done(&r);
}

int rio__proto_enc_list_resp_fixed(uint32_t n, uint32_t flags, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, n, 4);
    w_le(&w, flags, 4);
    return w_done(&w);
}

int rio__proto_enc_list_resp(const struct rio_proto_list_resp *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->n, 4);
    w_le(&w, m->flags, 4);
    if (m->entries_len)
        w_bytes(&w, m->entries, m->entries_len);
    return w_done(&w);
}

int rio__proto_enc_entry(const struct rio_proto_entry *e, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    if (!rio__key_len_ok(e->key_len))
        return -ENOBUFS;
    w_le(&w, e->key_len, 2);
    w_le(&w, e->flags, 4);
    w_le(&w, e->size, 8);
    w_le(&w, e->generation, 8);
    w_le(&w, (uint64_t)e->mtime_ns, 8);
    w_bytes(&w, e->etag, RIO_PROTO_ETAG_LEN);
    w_bytes(&w, e->key, e->key_len);
    return w_done(&w);
}

static int r_entry(struct rbuf *r, struct rio_proto_entry *e)
{
    static const char zero[RIO_PROTO_ETAG_LEN];
    uint64_t n = r_le(r, 2);

    e->flags = (uint32_t)r_le(r, 4);
    e->size = r_le(r, 8);
    e->generation = r_le(r, 8);
    e->mtime_ns = (int64_t)r_le(r, 8);
    if (r_etag(r, e->etag) < 0 || !rio__key_len_ok((size_t)n))
        return RIO_EPROTO;
    e->key_len = (uint16_t)n;
    e->key = (const char *)r_bytes(r, (size_t)n);
    if (!e->key || memchr(e->key, 0, (size_t)n) || (e->flags & ~RIO_PROTO_ENTRY_DIR))
        return RIO_EPROTO;
    if ((e->flags & RIO_PROTO_ENTRY_DIR) &&
        (e->size || e->generation || e->mtime_ns || memcmp(e->etag, zero, sizeof(zero))))
        return RIO_EPROTO;
    return 0;
}

int rio__proto_dec_list_resp(const uint8_t *body, size_t len, struct rio_proto_list_resp *m)
{
    struct rbuf r = {.p = body, .len = len};
    struct rio_proto_entry e;
    const char *prev = NULL;
    uint16_t prev_len = 0;

    m->n = (uint32_t)r_le(&r, 4);
    m->flags = (uint32_t)r_le(&r, 4);
    if (r.err || m->n > RIO_PROTO_LIST_MAX_KEYS || (m->flags & ~RIO_PROTO_LIST_TRUNCATED))
        return RIO_EPROTO;
    m->entries = body + r.off;
    m->entries_len = len - r.off;
    for (uint32_t i = 0; i < m->n; i++) {
        if (r_entry(&r, &e) < 0)
            return RIO_EPROTO;
        if (prev) {
            /* Strictly ascending: a server cannot repeat or reorder keys. */
            int c = memcmp(prev, e.key, prev_len < e.key_len ? prev_len : e.key_len);
            if (c > 0 || (c == 0 && prev_len >= e.key_len))
                return RIO_EPROTO;
        }
        prev = e.key;
        prev_len = e.key_len;
    }
    return r_done(&r);
}

int rio__proto_list_entry(const struct rio_proto_list_resp *m, size_t *off,
                          struct rio_proto_entry *e)
{
    struct rbuf r = {.p = m->entries, .len = m->entries_len, .off = *off};

    if (*off >= m->entries_len || r_entry(&r, e) < 0 || r.err)
        return RIO_EPROTO;
    *off = r.off;
    return 0;
}

/* -------------------------------------------------------------- EXISTS */

int rio__proto_enc_exists_keys(const char *const *keys, const uint16_t *key_len, uint32_t n,
                               uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    if (n == 0 || n > RIO_PROTO_EXISTS_MAX_KEYS)
        return -ENOBUFS;
    w_le(&w, n, 4);
    for (uint32_t i = 0; i < n && !w.err; i++)
        w_key(&w, keys[i], key_len[i]);
    return w_done(&w);
}

int rio__proto_enc_exists(const struct rio_proto_exists *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->n, 4);
    if (m->keys_len)
        w_bytes(&w, m->keys, m->keys_len);
    return w_done(&w);
}

int rio__proto_dec_exists(const uint8_t *body, size_t len, struct rio_proto_exists *m)
{
    struct rbuf r = {.p = body, .len = len};
    uint16_t kl;

    m->n = (uint32_t)r_le(&r, 4);
    if (r.err || m->n == 0 || m->n > RIO_PROTO_EXISTS_MAX_KEYS)
        return RIO_EPROTO;
    m->keys = body + r.off;
    m->keys_len = len - r.off;
    for (uint32_t i = 0; i < m->n && !r.err; i++)
        r_key(&r, &kl);
    return r_done(&r);
}

int rio__proto_exists_key(const struct rio_proto_exists *m, size_t *off, const char **key,
                          uint16_t *key_len)
{
    struct rbuf r = {.p = m->keys, .len = m->keys_len, .off = *off};

    if (*off >= m->keys_len)
        return RIO_EPROTO;
    *key = r_key(&r, key_len);
    if (r.err)
        return RIO_EPROTO;
    *off = r.off;
    return 0;
}

int rio__proto_enc_exists_resp(const struct rio_proto_exists_resp *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    if (m->n == 0 || m->n > RIO_PROTO_EXISTS_MAX_KEYS)
        return -ENOBUFS;
    w_le(&w, m->n, 4);
    w_bytes(&w, m->bits, (m->n + 7) / 8);
    return w_done(&w);
}

int rio__proto_dec_exists_resp(const uint8_t *body, size_t len, struct rio_proto_exists_resp *m)
{
    struct rbuf r = {.p = body, .len = len};

    m->n = (uint32_t)r_le(&r, 4);
    if (r.err || m->n == 0 || m->n > RIO_PROTO_EXISTS_MAX_KEYS)
        return RIO_EPROTO;
    m->bits = r_bytes(&r, (m->n + 7) / 8);
    /* Bits past n are zero: one encoding per answer. */
    if (m->bits && (m->n % 8) && (m->bits[m->n / 8] >> (m->n % 8)))
        return RIO_EPROTO;
    return r_done(&r);
}

void rio__proto_rcvlowat(int fd, int *cur, uint64_t owed)
{
    uint64_t half = owed / 2;
    int v = owed >= RIO_PROTO_LOWAT_MIN
                ? (int)(half < RIO_PROTO_LOWAT_MAX ? half : RIO_PROTO_LOWAT_MAX)
                : 0;
    if (v == *cur)
        return;
    int set = v ? v : 1;
    if (setsockopt(fd, SOL_SOCKET, SO_RCVLOWAT, &set, sizeof(set)) == 0)
        *cur = v;
}
