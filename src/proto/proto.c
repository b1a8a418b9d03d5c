/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Encoding and decoding of railio frames. Layouts are in docs/protocol.md;
 * every decoder consumes its body exactly and checks each length against
 * what remains before reading it.
 */
#include <errno.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/checksum.h"
#include "proto/proto.h"
#include "railio.h"

#define KEY_MAX RIO_KEY_MAX
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
    if (n == 0 || n > KEY_MAX) {
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
    if (len == 0 || len > KEY_MAX) {
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
        "?",         "HELLO",      "AUTH",      "PING", "LOOKUP", "PUT_OPEN",
        "PUT_CHUNK", "PUT_COMMIT", "PUT_ABORT", "READ", "DELETE", "STAT",
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
    w_le(&w, 0, 4);
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
    if (h->magic != RIO_PROTO_MAGIC || h->version != RIO_PROTO_VERSION)
        return RIO_EPROTO;
    if (check != hdr_check(in) || reserved != 0)
        return RIO_EPROTO;
    if (h->opcode < 1 || h->opcode > RIO_OP__MAX)
        return RIO_EPROTO;
    if (h->flags & ~RIO_PF_RESPONSE)
        return RIO_EPROTO;
    if (h->body_len > max_body || h->body_len > RIO_PROTO_BODY_CAP)
        return RIO_EPROTO;
    if (!(h->flags & RIO_PF_RESPONSE) && h->status != 0)
        return RIO_EPROTO;
    return 0;
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

int rio__proto_enc_desc(const struct rio_proto_desc *m, const uint64_t *xxh, uint8_t *out,
                        size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->generation, 8);
    w_le(&w, m->size, 8);
    w_le(&w, m->chunk_size, 8);
    w_le(&w, m->nchunks, 8);
    w_bytes(&w, m->etag, 32);
    for (uint64_t i = 0; i < m->nchunks && !w.err; i++)
        w_le(&w, xxh[i], 8);
    return w_done(&w);
}

int rio__proto_dec_desc(const uint8_t *body, size_t len, struct rio_proto_desc *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->generation = r_le(&r, 8);
    m->size = r_le(&r, 8);
    m->chunk_size = r_le(&r, 8);
    m->nchunks = r_le(&r, 8);
    const uint8_t *e = r_bytes(&r, 32);
    if (!e)
        return RIO_EPROTO;
    memcpy(m->etag, e, 32);
    if (!geometry_ok(m->size, m->chunk_size, m->nchunks) || m->generation == 0)
        return RIO_EPROTO;
    if (r_xxh_list(&r, m->nchunks, &m->xxh) < 0)
        return RIO_EPROTO;
    return r_done(&r);
}

/* ----------------------------------------------------------------- PUT */

int rio__proto_enc_put_open(const struct rio_proto_put_open *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->size, 8);
    w_le(&w, m->chunk_size, 8);
    w_le(&w, m->ttl_ms, 4);
    w_key(&w, m->key, m->key_len);
    return w_done(&w);
}

int rio__proto_dec_put_open(const uint8_t *body, size_t len, struct rio_proto_put_open *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->size = r_le(&r, 8);
    m->chunk_size = r_le(&r, 8);
    m->ttl_ms = (uint32_t)r_le(&r, 4);
    m->key = r_key(&r, &m->key_len);
    if (m->chunk_size == 0 || m->chunk_size > CHUNK_MAX)
        return RIO_EPROTO;
    return r_done(&r);
}

int rio__proto_enc_put_open_resp(const struct rio_proto_put_open_resp *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->upload_id, 8);
    return w_done(&w);
}

int rio__proto_dec_put_open_resp(const uint8_t *body, size_t len, struct rio_proto_put_open_resp *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->upload_id = r_le(&r, 8);
    return r_done(&r);
}

int rio__proto_enc_put_chunk_fixed(const struct rio_proto_put_chunk *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->upload_id, 8);
    w_le(&w, m->index, 8);
    w_le(&w, m->xxh, 8);
    return w_done(&w);
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

int rio__proto_enc_put_commit(const struct rio_proto_put_commit *m, const uint64_t *xxh,
                              uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->upload_id, 8);
    w_le(&w, m->nchunks, 8);
    w_bytes(&w, m->etag, 32);
    for (uint64_t i = 0; i < m->nchunks && !w.err; i++)
        w_le(&w, xxh[i], 8);
    return w_done(&w);
}

int rio__proto_dec_put_commit(const uint8_t *body, size_t len, struct rio_proto_put_commit *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->upload_id = r_le(&r, 8);
    m->nchunks = r_le(&r, 8);
    const uint8_t *e = r_bytes(&r, 32);
    if (!e)
        return RIO_EPROTO;
    memcpy(m->etag, e, 32);
    if (r_xxh_list(&r, m->nchunks, &m->xxh) < 0)
        return RIO_EPROTO;
    return r_done(&r);
}

int rio__proto_enc_put_commit_resp(const struct rio_proto_put_commit_resp *m, uint8_t *out,
                                   size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->generation, 8);
    return w_done(&w);
}

int rio__proto_dec_put_commit_resp(const uint8_t *body, size_t len,
                                   struct rio_proto_put_commit_resp *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->generation = r_le(&r, 8);
    if (!r.err && m->generation == 0)
        return RIO_EPROTO;
    return r_done(&r);
}

int rio__proto_enc_put_abort(const struct rio_proto_put_abort *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->upload_id, 8);
    return w_done(&w);
}

int rio__proto_dec_put_abort(const uint8_t *body, size_t len, struct rio_proto_put_abort *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->upload_id = r_le(&r, 8);
    return r_done(&r);
}

/* ---------------------------------------------------------------- READ */

int rio__proto_enc_read(const struct rio_proto_read *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->generation, 8);
    w_le(&w, m->off, 8);
    w_le(&w, m->len, 4);
    w_key(&w, m->key, m->key_len);
    return w_done(&w);
}

int rio__proto_dec_read(const uint8_t *body, size_t len, struct rio_proto_read *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->generation = r_le(&r, 8);
    m->off = r_le(&r, 8);
    m->len = (uint32_t)r_le(&r, 4);
    m->key = r_key(&r, &m->key_len);
    if (m->len == 0 || m->len > CHUNK_MAX)
        return RIO_EPROTO;
    return r_done(&r);
}

/* ---------------------------------------------------------------- STAT */

int rio__proto_enc_stat_resp(const struct rio_proto_stat_resp *m, uint8_t *out, size_t cap)
{
    struct wbuf w = {.p = out, .cap = cap};
    w_le(&w, m->objects, 8);
    w_le(&w, m->bytes, 8);
    w_le(&w, m->capacity, 8);
    w_le(&w, m->uploads, 8);
    w_le(&w, m->connections, 8);
    return w_done(&w);
}

int rio__proto_dec_stat_resp(const uint8_t *body, size_t len, struct rio_proto_stat_resp *m)
{
    struct rbuf r = {.p = body, .len = len};
    m->objects = r_le(&r, 8);
    m->bytes = r_le(&r, 8);
    m->capacity = r_le(&r, 8);
    m->uploads = r_le(&r, 8);
    m->connections = r_le(&r, 8);
    return r_done(&r);
}
