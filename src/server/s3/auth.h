/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Shared between the gateway's authentication files (sigv4v.c, keys.c,
 * chunked.c); the front door uses s3.h only.
 */
#ifndef RIO_SERVER_S3_AUTH_H
#define RIO_SERVER_S3_AUTH_H

#include "server/s3/s3.h"

#define RIO_S3_KEYS_MAX_LINE 4096   /* bytes in one line of --s3-keys */
#define RIO_S3_KEYS_MAX_USERS 10000 /* lines with a user */
#define RIO_S3_KEYS_MAX_FILE (RIO_S3_KEYS_MAX_LINE * (RIO_S3_KEYS_MAX_USERS + 100))
#define RIO_S3_SECRET_MAX 256

/* A verifier's refusal (sigv4v.c, sigv2v.c): the S3 code into *s3_code, a
 * reason for the log (rio__detail), err into ret, then to the function's
 * out label. */
#define REFUSE(code, err, ...)                                                                     \
    do {                                                                                           \
        *s3_code = (code);                                                                         \
        rio__detail(__VA_ARGS__);                                                                  \
        ret = (err);                                                                               \
        goto out;                                                                                  \
    } while (0)

/* Percent-decode s[0..n) into out (at least n bytes); '+' is a space when
 * plus_space (a query, as curl and S3 read it). A '%' without two hex
 * digits stays as it is. Returns the decoded length (sigv4v.c; also
 * SigV2's). */
size_t rio__s3_pct_decode(const char *s, size_t n, int plus_space, char *out);

/* The first header of r named name (any case), or NULL; *count (when not
 * NULL) how many there are (sigv4v.c; also SigV2's). */
const char *rio__s3_hdr_find(const struct rio_s3_req *r, const char *name, unsigned *count);
/* A SigV4 credential scope, "AK/YYYYMMDD/REGION/s3/aws4_request" (n
 * bytes, from the network), into c: 0, or -1 when it is not that
 * (sigv4v.c; also POST forms' x-amz-credential). */
struct rio__s3_cred {
    char ak[128];
    char date[9];
    char region[64];
    char scope[128];
};
int rio__s3_cred_parse(const char *s, size_t n, struct rio__s3_cred *c);
/* The secret of access_key, or NULL when there is no such user. */
const char *rio__s3_keys_secret(const struct rio_s3_keys *k, const char *access_key);
/* 1 when the file allows anonymous requests to some bucket. */
int rio__s3_keys_anon(const struct rio_s3_keys *k);
/* Parse a key file's text (keys.c; the loader and the tests): 0, -ENOMEM, or
 * RIO_EINVAL with *line the 1-based line at fault and *why the reason. */
int rio__s3_keys_parse(const char *text, size_t len, struct rio_s3_keys **out, unsigned *line,
                       const char **why);

/* The digests behind rio_s3_check (bodycheck.c), also used for the trailers
 * of aws-chunked bodies (chunked.c). */
enum rio__s3_algo {
    RIO__S3_SHA256HEX, /* x-amz-content-sha256: hex */
    RIO__S3_MD5,
    RIO__S3_CRC32,
    RIO__S3_CRC32C,
    RIO__S3_CRC64NVME,
    RIO__S3_SHA1,
    RIO__S3_SHA256,
};
/* The algorithm a header name stands for ("content-md5", "x-amz-checksum-crc32", ...), or -1. */
int rio__s3_algo_of(const char *name);
/* rio_s3_check_new with value NULL leaves the expected digest for later
 * (an aws-chunked trailer): set it here. 0, or RIO_EINVAL with *s3_code. */
int rio__s3_check_expect(struct rio_s3_check *c, const char *value, const char **s3_code);
/* A Content-MD5 check whose digest is known: 0 with it in out[16], else -1. */
int rio__s3_check_md5_want(const struct rio_s3_check *c, uint8_t out[16]);

#endif
