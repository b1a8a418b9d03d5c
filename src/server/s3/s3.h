/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railiod's S3 front door: the interface between the HTTP side (gateway.c,
 * operations) and request verification (SigV4, keys, aws-chunked bodies).
 */
#ifndef RIO_SERVER_S3_H
#define RIO_SERVER_S3_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

enum rio_s3_payload_mode {
    RIO_S3_PAYLOAD_UNSIGNED = 0,
    RIO_S3_PAYLOAD_SIGNED = 1,
    RIO_S3_PAYLOAD_STREAMING = 2,
};

struct rio_s3_req {            /* one parsed request, as the verifier sees it */
    const char *method;        /* "GET" ... */
    const char *path;          /* raw path as sent, percent-encoded, without the query */
    const char *query;         /* raw query string without '?', "" if none */
    size_t nheaders;
    const struct rio_s3_hdr { const char *name; const char *value; } *headers; /* as received */
};
struct rio_s3_keys;            /* loaded --s3-keys file */
int rio_s3_keys_load(const char *path, struct rio_s3_keys **out);   /* -errno/RIO_E*, rio__detail names line */
void rio_s3_keys_free(struct rio_s3_keys *k);
struct rio_s3_auth {           /* outcome of verification */
    char access_key[128];
    int anonymous;
    int payload_mode;          /* RIO_S3_PAYLOAD_UNSIGNED, _SIGNED (sha256 hex in payload_sha256), _STREAMING (aws-chunked) */
    char payload_sha256[65];
    /* for _STREAMING: what the chunk decoder needs */
    unsigned char signing_key[32]; char seed_signature[65]; char amz_date[17]; char scope[128];
};
/* 0, or an S3 error code string in *s3_code ("AccessDenied", "SignatureDoesNotMatch",
 * "InvalidAccessKeyId", "AuthorizationHeaderMalformed", "RequestTimeTooSkewed", "AccessDenied" for expired presigned)
 * with -EACCES/-EINVAL; now = unix seconds. */
int rio_s3_verify(const struct rio_s3_keys *k, const struct rio_s3_req *r, int64_t now,
                  struct rio_s3_auth *out, const char **s3_code);
int rio_s3_user_may(const struct rio_s3_keys *k, const char *access_key, const char *bucket); /* 1/0 */
/* aws-chunked body decoder: feed raw bytes, get payload bytes; verifies each chunk signature. */
struct rio_s3_chunked;
int rio_s3_chunked_new(const struct rio_s3_auth *a, struct rio_s3_chunked **out);
/* consumes up to n bytes of in; writes payload to out (cap); returns payload bytes or negative with *s3_code */
ssize_t rio_s3_chunked_feed(struct rio_s3_chunked *d, const void *in, size_t n, size_t *consumed, void *out, size_t cap, const char **s3_code);
int rio_s3_chunked_done(const struct rio_s3_chunked *d);  /* 1 once the final 0-size chunk was verified */
void rio_s3_chunked_free(struct rio_s3_chunked *d);

#endif
