/* SPDX-License-Identifier: Apache-2.0 */
/*
 * AWS Signature Version 4 for S3 requests, and the encodings it rests on.
 * Pure functions over caller-owned buffers: no allocation, no locks, safe
 * from any thread as long as each thread passes its own digest context.
 * Used by the s3:// transport (request.c); kept apart so the unit tests can check
 * it against AWS's published examples without libcurl.
 */
#ifndef RIO_TRANSPORT_S3_SIGN_H
#define RIO_TRANSPORT_S3_SIGN_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

/* A name/value pair: a header (lower-case name) or a query parameter. */
struct rio_s3_kv {
    const char *k;
    const char *v;
};

/* What signs a request. Strings are NUL-terminated; service is "s3". */
struct rio_s3_signer {
    const char *access_key;
    const char *secret_key;
    const char *region;
    const char *service;
};

#define RIO_S3_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
#define RIO_S3_UNSIGNED "UNSIGNED-PAYLOAD"
#define RIO_S3_MAX_SIGNED 24 /* most headers one request may sign */
/* Most signed headers the gateway verifies in one request: every x-amz-meta-*
 * of a PutObject is signed, and S3 takes up to 2 KB of them (boto3 signs 25
 * headers for 20 one-letter ones). */
#define RIO_S3_MAX_VERIFIED 128

/*
 * Percent-encode s[0..n) the way SigV4 wants it: the unreserved characters
 * A-Z a-z 0-9 - . _ ~ stay, every other byte becomes %XX (upper-case hex),
 * and '/' stays too when keep_slash is set (object keys in a path). Writes a
 * NUL-terminated string. Returns its length, or -1 when cap is too small.
 */
ssize_t rio__s3_uri_encode(const char *s, size_t n, int keep_slash, char *out, size_t cap);

/*
 * The canonical query string of n parameters: each name and value
 * percent-encoded, sorted by name then value, joined as "a=1&b=&c=3" (a
 * parameter without a value keeps its '='). The same string is the query the
 * request sends, so what is signed is what goes on the wire. Returns its
 * length, or -1 when cap is too small or n is too large.
 */
ssize_t rio__s3_canon_query(const struct rio_s3_kv *q, unsigned n, char *out, size_t cap);

/* "YYYYMMDDTHHMMSSZ" (the x-amz-date value) of t, in UTC. */
void rio__s3_amzdate(time_t t, char out[17]);

/* Lower-case hex of in[0..n) into out (2n characters and a NUL). */
void rio__s3_hex(const uint8_t *in, size_t n, char *out);

/* Standard base64 of in[0..n) into out (4*ceil(n/3) characters and a NUL). */
void rio__s3_base64(const uint8_t *in, size_t n, char *out);

/*
 * The Authorization header value ("AWS4-HMAC-SHA256 Credential=...,
 * SignedHeaders=..., Signature=...") for a request.
 *
 * canon_uri is the path as sent (already encoded, e.g. "/bucket/a%20b");
 * canon_query as built by rio__s3_canon_query ("" when none). hdrs are every
 * header to sign, with lower-case names and trimmed values, in any order (at
 * most RIO_S3_MAX_SIGNED, no duplicates); they must include host and
 * x-amz-date (= amzdate) and, for S3, x-amz-content-sha256 (= payload_hash).
 * mdctx is an EVP_MD_CTX the caller owns and may reuse (so signing allocates
 * nothing). Returns 0, or -1 when cap is too small or an argument is bad.
 */
int rio__s3_sign(const struct rio_s3_signer *s, void *mdctx, const char *method,
                 const char *canon_uri, const char *canon_query, const struct rio_s3_kv *hdrs,
                 unsigned n, const char *payload_hash, const char *amzdate, char *auth, size_t cap);

/*
 * The pieces of rio__s3_sign, shared with railiod's S3 gateway, which
 * verifies what clients signed (src/server/s3/sigv4v.c). All take the
 * caller's EVP_MD_CTX and return 0, or -1 on a bad argument or a digest
 * failure.
 *
 * rio__s3_hmac: HMAC-SHA256 of msg under key. rio__s3_sha256_hex: the
 * lower-case hex SHA-256 of p[0..n). rio__s3_signing_key: the SigV4 signing
 * key (the HMAC chain over date8 "YYYYMMDD", region, service and
 * "aws4_request"; the secret at most 256 bytes). rio__s3_canon_hash: the hex
 * SHA-256 of the canonical request (hdrs as for rio__s3_sign, but up to
 * RIO_S3_MAX_VERIFIED of them, sorted here;
 * the ';'-joined sorted names into signed_names). rio__s3_sign_sts: the hex
 * signature of a string to sign under a signing key.
 */
int rio__s3_hmac(void *mdctx, const void *key, size_t klen, const void *msg, size_t mlen,
                 uint8_t out[32]);
int rio__s3_sha256_hex(void *mdctx, const void *p, size_t n, char out[65]);
int rio__s3_signing_key(void *mdctx, const char *secret, const char *date8, const char *region,
                        const char *service, uint8_t out[32]);
int rio__s3_canon_hash(void *mdctx, const char *method, const char *canon_uri,
                       const char *canon_query, const struct rio_s3_kv *hdrs, unsigned n,
                       const char *payload_hash, char *signed_names, size_t sncap, char hex[65]);
int rio__s3_sign_sts(void *mdctx, const uint8_t key[32], const char *sts, char sig[65]);

/*
 * Addressing. Path style: ENDPOINT/BUCKET/PREFIXKEY (radosgw, MinIO, any
 * endpoint given by hand); virtual-hosted: the bucket is the first label
 * of the host, https://BUCKET.s3.REGION.amazonaws.com/PREFIXKEY (AWS).
 *
 * rio__s3_bucket_dns_ok: bucket can be that label (1) or not (0); https:
 * no '.' in it (the certificate's wildcard covers one label).
 * rio__s3_host_is_aws: host (with or without ":port") is under
 * amazonaws.com (or amazonaws.com.cn).
 * rio__s3_url: the URL of a request: endpoint (scheme://host[:port], no
 * trailing '/'), then bucket (NULL when it is in the host), then prefix
 * and key percent-encoded ('/' kept; key NULL: the bucket itself), then
 * '?' and query (canonical form, "" or NULL for none). Its length, or -1
 * when cap is too small.
 */
int rio__s3_bucket_dns_ok(const char *bucket, int https);
int rio__s3_host_is_aws(const char *host);
ssize_t rio__s3_url(const char *endpoint, const char *bucket, const char *prefix, const char *key,
                    const char *query, char *out, size_t cap);
/* The virtual-hosted endpoint of bucket at endpoint ("https://s3.x.com" ->
 * "https://BUCKET.s3.x.com"): 0, or -1 (no "://", or cap too small). */
int rio__s3_vhost_endpoint(const char *endpoint, const char *bucket, char *out, size_t cap);

#endif
