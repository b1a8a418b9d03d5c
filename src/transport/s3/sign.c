/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SigV4 signing (see sign.h). The canonical request is never built as one
 * string: it is hashed piece by piece, so a request with a 1 KiB key and a
 * dozen headers needs no buffer larger than the Authorization value itself.
 * HMAC-SHA256 is written over the caller's EVP_MD_CTX (HMAC = H(K^opad ||
 * H(K^ipad || m))) so that signing allocates nothing on the hot path.
 */
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "transport/s3/sign.h"

#define SHA256_LEN 32
#define SHA256_BLOCK 64

static int is_unreserved(unsigned char c)
{
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '.' || c == '_' || c == '~';
}

ssize_t rio__s3_uri_encode(const char *s, size_t n, int keep_slash, char *out, size_t cap)
{
    static const char hexd[] = "0123456789ABCDEF";
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (is_unreserved(c) || (keep_slash && c == '/')) {
            if (cap - o < 2)
                return -1;
            out[o++] = (char)c;
        } else {
            if (cap - o < 4)
                return -1;
            out[o++] = '%';
            out[o++] = hexd[c >> 4];
            out[o++] = hexd[c & 15];
        }
    }
    if (cap - o < 1)
        return -1;
    out[o] = '\0';
    return (ssize_t)o;
}

/* Parameters are sorted by their encoded names; ours are all unreserved
 * characters, for which encoded and raw order agree, but the comparison is
 * done on the encoded form to stay right for any name. */
static int kv_cmp_encoded(const struct rio_s3_kv *a, const struct rio_s3_kv *b)
{
    char ea[256], eb[256];
    int r;

    if (rio__s3_uri_encode(a->k, strlen(a->k), 0, ea, sizeof(ea)) < 0 ||
        rio__s3_uri_encode(b->k, strlen(b->k), 0, eb, sizeof(eb)) < 0)
        return strcmp(a->k, b->k);
    r = strcmp(ea, eb);
    if (r)
        return r;
    return strcmp(a->v ? a->v : "", b->v ? b->v : "");
}

ssize_t rio__s3_canon_query(const struct rio_s3_kv *q, unsigned n, char *out, size_t cap)
{
    unsigned idx[RIO_S3_MAX_SIGNED];
    size_t o = 0;

    if (n > RIO_S3_MAX_SIGNED || cap == 0)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        unsigned j = i;
        while (j > 0 && kv_cmp_encoded(&q[idx[j - 1]], &q[i]) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    out[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        const struct rio_s3_kv *p = &q[idx[i]];
        const char *v = p->v ? p->v : "";
        ssize_t l;

        if (i) {
            if (cap - o < 2)
                return -1;
            out[o++] = '&';
        }
        l = rio__s3_uri_encode(p->k, strlen(p->k), 0, out + o, cap - o);
        if (l < 0)
            return -1;
        o += (size_t)l;
        if (cap - o < 2)
            return -1;
        out[o++] = '=';
        l = rio__s3_uri_encode(v, strlen(v), 0, out + o, cap - o);
        if (l < 0)
            return -1;
        o += (size_t)l;
    }
    out[o] = '\0';
    return (ssize_t)o;
}

void rio__s3_amzdate(time_t t, char out[17])
{
    struct tm tm;

    if (!gmtime_r(&t, &tm) || strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
        memcpy(out, "19700101T000000Z", 17);
}

void rio__s3_hex(const uint8_t *in, size_t n, char *out)
{
    static const char hexd[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hexd[in[i] >> 4];
        out[2 * i + 1] = hexd[in[i] & 15];
    }
    out[2 * n] = '\0';
}

void rio__s3_base64(const uint8_t *in, size_t n, char *out)
{
    EVP_EncodeBlock((unsigned char *)out, in, (int)n);
}

/* --- SHA-256 and HMAC over one reusable context --- */

static int sha_init(EVP_MD_CTX *m)
{
    return EVP_DigestInit_ex(m, EVP_sha256(), NULL) == 1 ? 0 : -1;
}

static int sha_put(EVP_MD_CTX *m, const void *p, size_t n)
{
    return EVP_DigestUpdate(m, p, n) == 1 ? 0 : -1;
}

static int sha_str(EVP_MD_CTX *m, const char *s)
{
    return sha_put(m, s, strlen(s));
}

static int sha_end(EVP_MD_CTX *m, uint8_t out[SHA256_LEN])
{
    unsigned len = 0;
    return EVP_DigestFinal_ex(m, out, &len) == 1 && len == SHA256_LEN ? 0 : -1;
}

static int hmac(EVP_MD_CTX *m, const void *key, size_t klen, const void *msg, size_t mlen,
                uint8_t out[SHA256_LEN])
{
    uint8_t k[SHA256_BLOCK], pad[SHA256_BLOCK], inner[SHA256_LEN];

    memset(k, 0, sizeof(k));
    if (klen > SHA256_BLOCK) {
        if (sha_init(m) || sha_put(m, key, klen) || sha_end(m, k))
            return -1;
    } else {
        memcpy(k, key, klen);
    }
    for (int i = 0; i < SHA256_BLOCK; i++)
        pad[i] = k[i] ^ 0x36;
    if (sha_init(m) || sha_put(m, pad, sizeof(pad)) || sha_put(m, msg, mlen) || sha_end(m, inner))
        return -1;
    for (int i = 0; i < SHA256_BLOCK; i++)
        pad[i] = k[i] ^ 0x5c;
    if (sha_init(m) || sha_put(m, pad, sizeof(pad)) || sha_put(m, inner, sizeof(inner)) ||
        sha_end(m, out))
        return -1;
    return 0;
}

int rio__s3_hmac(void *mdctx, const void *key, size_t klen, const void *msg, size_t mlen,
                 uint8_t out[32])
{
    return hmac(mdctx, key, klen, msg, mlen, out);
}

int rio__s3_sha256_hex(void *mdctx, const void *p, size_t n, char out[65])
{
    uint8_t h[SHA256_LEN];

    if (sha_init(mdctx) || sha_put(mdctx, p, n) || sha_end(mdctx, h))
        return -1;
    rio__s3_hex(h, sizeof(h), out);
    return 0;
}

static int hmac_str(EVP_MD_CTX *m, const uint8_t key[SHA256_LEN], const char *msg,
                    uint8_t out[SHA256_LEN])
{
    return hmac(m, key, SHA256_LEN, msg, strlen(msg), out);
}

/* Trimmed value bounds (leading and trailing blanks are not signed). */
static void trim(const char *v, const char **b, size_t *len)
{
    const char *e;

    while (*v == ' ' || *v == '\t')
        v++;
    e = v + strlen(v);
    while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    *b = v;
    *len = (size_t)(e - v);
}

int rio__s3_signing_key(void *mdctx, const char *secret, const char *date8, const char *region,
                        const char *service, uint8_t out[32])
{
    uint8_t kbuf[4 + 256], k1[SHA256_LEN], k2[SHA256_LEN];
    size_t klen = strlen(secret);
    int ret = -1;

    if (klen > sizeof(kbuf) - 4 || strlen(date8) != 8)
        return -1;
    memcpy(kbuf, "AWS4", 4);
    memcpy(kbuf + 4, secret, klen);
    if (!hmac(mdctx, kbuf, klen + 4, date8, 8, k1) && !hmac_str(mdctx, k1, region, k2) &&
        !hmac_str(mdctx, k2, service, k1) && !hmac_str(mdctx, k1, "aws4_request", out))
        ret = 0;
    OPENSSL_cleanse(kbuf, sizeof(kbuf));
    OPENSSL_cleanse(k1, sizeof(k1));
    OPENSSL_cleanse(k2, sizeof(k2));
    return ret;
}

int rio__s3_canon_hash(void *mdctx, const char *method, const char *canon_uri,
                       const char *canon_query, const struct rio_s3_kv *hdrs, unsigned n,
                       const char *payload_hash, char *signed_names, size_t sncap, char hex[65])
{
    EVP_MD_CTX *m = mdctx;
    unsigned idx[RIO_S3_MAX_VERIFIED];
    uint8_t h[SHA256_LEN];
    size_t sl = 0;

    if (!m || !method || !canon_uri || !canon_query || !payload_hash || n > RIO_S3_MAX_VERIFIED ||
        sncap == 0)
        return -1;

    /* Headers sorted by name (insertion sort: a request has a dozen). */
    for (unsigned i = 0; i < n; i++) {
        unsigned j = i;
        if (!hdrs[i].k || !hdrs[i].v)
            return -1;
        while (j > 0 && strcmp(hdrs[idx[j - 1]].k, hdrs[i].k) > 0) {
            idx[j] = idx[j - 1];
            j--;
        }
        idx[j] = i;
    }
    signed_names[0] = '\0';
    for (unsigned i = 0; i < n; i++) {
        size_t l = strlen(hdrs[idx[i]].k);
        if (sncap - sl < l + 2)
            return -1;
        if (i)
            signed_names[sl++] = ';';
        memcpy(signed_names + sl, hdrs[idx[i]].k, l + 1);
        sl += l;
    }

    /* Hash of the canonical request, fed piece by piece. */
    if (sha_init(m) || sha_str(m, method) || sha_str(m, "\n") || sha_str(m, canon_uri) ||
        sha_str(m, "\n") || sha_str(m, canon_query) || sha_str(m, "\n"))
        return -1;
    for (unsigned i = 0; i < n; i++) {
        const char *vb;
        size_t vl;
        trim(hdrs[idx[i]].v, &vb, &vl);
        if (sha_str(m, hdrs[idx[i]].k) || sha_str(m, ":") || sha_put(m, vb, vl) || sha_str(m, "\n"))
            return -1;
    }
    if (sha_str(m, "\n") || sha_str(m, signed_names) || sha_str(m, "\n") ||
        sha_str(m, payload_hash) || sha_end(m, h))
        return -1;
    rio__s3_hex(h, sizeof(h), hex);
    return 0;
}

int rio__s3_sign_sts(void *mdctx, const uint8_t key[32], const char *sts, char sig[65])
{
    uint8_t h[SHA256_LEN];

    if (hmac_str(mdctx, key, sts, h))
        return -1;
    rio__s3_hex(h, sizeof(h), sig);
    return 0;
}

int rio__s3_sign(const struct rio_s3_signer *s, void *mdctx, const char *method,
                 const char *canon_uri, const char *canon_query, const struct rio_s3_kv *hdrs,
                 unsigned n, const char *payload_hash, const char *amzdate, char *auth, size_t cap)
{
    uint8_t key[SHA256_LEN];
    char signed_names[RIO_S3_MAX_SIGNED * 48], sts[256], date[9], hexs[2 * SHA256_LEN + 1];
    int w;

    if (!s || !mdctx || !s->access_key || !s->secret_key || !s->region || !s->service || !amzdate ||
        strlen(amzdate) != 16)
        return -1;
    if (rio__s3_canon_hash(mdctx, method, canon_uri, canon_query, hdrs, n, payload_hash,
                           signed_names, sizeof(signed_names), hexs))
        return -1;

    memcpy(date, amzdate, 8);
    date[8] = '\0';
    w = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256\n%s\n%s/%s/%s/aws4_request\n%s", amzdate, date,
                 s->region, s->service, hexs);
    if (w < 0 || (size_t)w >= sizeof(sts))
        return -1;

    /* Signing key: HMAC chain over date, region, service, "aws4_request". */
    if (rio__s3_signing_key(mdctx, s->secret_key, date, s->region, s->service, key))
        return -1;
    w = rio__s3_sign_sts(mdctx, key, sts, hexs);
    OPENSSL_cleanse(key, sizeof(key));
    if (w)
        return -1;

    w = snprintf(auth, cap,
                 "AWS4-HMAC-SHA256 Credential=%s/%s/%s/%s/aws4_request, SignedHeaders=%s, "
                 "Signature=%s",
                 s->access_key, date, s->region, s->service, signed_names, hexs);
    if (w < 0 || (size_t)w >= cap)
        return -1;
    return 0;
}

/* ------------------------------------------------------------ addressing */

/* A bucket name that can be a DNS label of a virtual-hosted address: 3 to
 * 63 lower-case letters, digits, '-' (and '.', but not over https, where
 * the certificate's one-level wildcard would not cover it), starting and
 * ending with a letter or digit. */
int rio__s3_bucket_dns_ok(const char *bucket, int https)
{
    size_t n = strlen(bucket);

    if (n < 3 || n > 63 || bucket[0] == '-' || bucket[0] == '.' || bucket[n - 1] == '-' ||
        bucket[n - 1] == '.')
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = bucket[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || (c == '.' && !https)))
            return 0;
    }
    return 1;
}

/* host ("h", "h:port") is an AWS S3 endpoint: its name ends in
 * .amazonaws.com (or .amazonaws.com.cn), any case. */
int rio__s3_host_is_aws(const char *host)
{
    static const char *const sfx[] = {".amazonaws.com", ".amazonaws.com.cn"};
    size_t n = strcspn(host, ":");

    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        size_t l = strlen(sfx[i]);
        if (n > l && strncasecmp(host + n - l, sfx[i], l) == 0)
            return 1;
    }
    return 0;
}

ssize_t rio__s3_url(const char *endpoint, const char *bucket, const char *prefix, const char *key,
                    const char *query, char *out, size_t cap)
{
    size_t o;
    ssize_t l;
    int w = snprintf(out, cap, "%s/", endpoint);

    if (w < 0 || (size_t)w >= cap)
        return -1;
    o = (size_t)w;
    if (bucket) {
        l = rio__s3_uri_encode(bucket, strlen(bucket), 0, out + o, cap - o);
        if (l < 0)
            return -1;
        o += (size_t)l;
        if (key) {
            if (cap - o < 2)
                return -1;
            out[o++] = '/';
        }
    }
    if (key) {
        l = rio__s3_uri_encode(prefix, strlen(prefix), 1, out + o, cap - o);
        if (l < 0)
            return -1;
        o += (size_t)l;
        l = rio__s3_uri_encode(key, strlen(key), 1, out + o, cap - o);
        if (l < 0)
            return -1;
        o += (size_t)l;
    }
    if (query && query[0]) {
        size_t ql = strlen(query);
        if (cap - o < ql + 2)
            return -1;
        out[o++] = '?';
        memcpy(out + o, query, ql + 1);
        o += ql;
    }
    out[o] = '\0';
    return (ssize_t)o;
}

int rio__s3_vhost_endpoint(const char *endpoint, const char *bucket, char *out, size_t cap)
{
    const char *hs = strstr(endpoint, "://");
    int w;

    if (!hs)
        return -1;
    hs += 3;
    w = snprintf(out, cap, "%.*s%s.%s", (int)(hs - endpoint), endpoint, bucket, hs);
    return w < 0 || (size_t)w >= cap ? -1 : 0;
}
