/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railiod's S3 gateway: the interface between the HTTP front door
 * (src/server/s3/, --s3-listen) and request authentication (sigv4v.c,
 * keys.c, chunked.c). Everything here is called from the front door's own
 * threads; a loaded key set is read-only and may be shared by any number of
 * threads; a decoder or hash checker belongs to one request.
 */
#ifndef RIO_SERVER_S3_S3_H
#define RIO_SERVER_S3_S3_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct rio_s3_req {     /* one parsed request, as the verifier sees it */
    const char *method; /* "GET" ... */
    const char *path;   /* raw path as sent, percent-encoded, without the query */
    const char *query;  /* raw query string without '?', "" if none */
    size_t nheaders;
    const struct rio_s3_hdr {
        const char *name;
        const char *value;
    } * headers; /* as received */
};

struct rio_s3_keys; /* loaded --s3-keys file */

/**
 * Load an --s3-keys file: one user a line, `ACCESS_KEY SECRET [BUCKETS]`,
 * BUCKETS a comma-separated list of bucket names or `*` (all buckets, also
 * the default when absent); `#` starts a comment line; blank lines are
 * skipped. A line `* - BUCKETS` allows anonymous (unsigned) requests to
 * those buckets; without one, anonymous access is off. The file must be a
 * regular file that neither group nor others can read or write. Returns 0
 * and *out, or -errno / RIO_EINVAL with rio__detail naming the file and the
 * line (never a secret).
 */
int rio_s3_keys_load(const char *path, struct rio_s3_keys **out);
/** Free a key set (NULL is fine). Secrets are wiped. */
void rio_s3_keys_free(struct rio_s3_keys *k);

enum rio_s3_payload_mode {
    RIO_S3_PAYLOAD_UNSIGNED = 0,  /* UNSIGNED-PAYLOAD (and every presigned URL) */
    RIO_S3_PAYLOAD_SIGNED = 1,    /* the body's SHA-256 is payload_sha256 */
    RIO_S3_PAYLOAD_STREAMING = 2, /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD (aws-chunked) */
    RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER = 3, /* STREAMING-UNSIGNED-PAYLOAD-TRAILER */
    RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER = 4,   /* STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER */
};

struct rio_s3_auth { /* outcome of verification */
    char access_key[128];
    int anonymous;
    int payload_mode; /* RIO_S3_PAYLOAD_* */
    char payload_sha256[65];
    /* for _STREAMING: what the chunk decoder needs */
    unsigned char signing_key[32];
    char seed_signature[65];
    char amz_date[17];
    char scope[128];
    /* for the _TRAILER modes: the x-amz-trailer header, lower-case
     * ("x-amz-checksum-crc32"), "" if none */
    char trailer[40];
    /* on refusal: the message to give the client (static text), or NULL
     * for the code's usual one */
    const char *message;
};

/**
 * The body of a request accepted without a signature: plain
 * (RIO_S3_PAYLOAD_UNSIGNED), or aws-chunked with an unsigned checksum
 * trailer (x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER, what
 * newer aws CLIs and SDKs send), into out->payload_mode and out->trailer.
 * 0, or -EINVAL / -EACCES with *s3_code (a signed aws-chunked mode without
 * a signature, a bad x-amz-trailer).
 */
int rio_s3_anon_payload(const struct rio_s3_req *r, struct rio_s3_auth *out, const char **s3_code);

/**
 * Verify a request's SigV4 signature (Authorization header or presigned
 * query), or accept it as anonymous when it carries neither and the key set
 * allows anonymous access. now is the server's clock, unix seconds. A
 * header-signed request without x-amz-content-sha256 (curl --aws-sigv4)
 * is verified with the empty payload's hash and its body is unsigned.
 *
 * Returns 0 and fills *out, or -EACCES / -EINVAL with *s3_code the S3 error
 * code to answer: "AccessDenied" (anonymous refused, presigned URL expired or
 * not yet valid), "SignatureDoesNotMatch", "InvalidAccessKeyId",
 * "AuthorizationHeaderMalformed", "AuthorizationQueryParametersError",
 * "RequestTimeTooSkewed", "InvalidRequest" (bad x-amz-trailer, path too long),
 * "InvalidArgument" (x-amz-content-sha256 not a known value),
 * "NotImplemented" (-ENOTSUP: an aws-chunked mode not supported), and
 * out->message S3's own message where it has one for the case (else NULL;
 * the rest of *out is cleared). A short reason
 * for the log is in rio__detail (no secret, no signature). -ENOMEM with
 * "InternalError". Thread-safe on a shared key set.
 */
int rio_s3_verify(const struct rio_s3_keys *k, const struct rio_s3_req *r, int64_t now,
                  struct rio_s3_auth *out, const char **s3_code);

/** 1 when r is signed with Signature Version 2: an "Authorization: AWS
 * AK:SIGNATURE" header, or AWSAccessKeyId and Signature in the query. */
int rio_s3_is_v2(const struct rio_s3_req *r);
/**
 * Verify a Signature Version 2 request (HMAC-SHA1; sigv2v.c): the
 * Authorization header (its Date or x-amz-date within 15 minutes of now) or
 * a presigned URL (AWSAccessKeyId, Signature, Expires, not past). path is
 * the resource as S3 signs it: the path as sent, "/BUCKET" before it in
 * virtual-hosted style. The body is unsigned (out->payload_mode
 * RIO_S3_PAYLOAD_UNSIGNED); aws-chunked bodies are refused. Returns as
 * rio_s3_verify.
 */
int rio_s3_verify_v2(const struct rio_s3_keys *k, const struct rio_s3_req *r, const char *path,
                     int64_t now, struct rio_s3_auth *out, const char **s3_code);

/** The HTTP status S3 answers with each code this interface returns
 * (403 for the authentication failures, 400 for malformed requests and
 * body mismatches, 501 NotImplemented, 500 InternalError; 403 if unknown). */
int rio_s3_status_of(const char *s3_code);

/** 1 when access_key ("" for anonymous) may use bucket, else 0. */
int rio_s3_user_may(const struct rio_s3_keys *k, const char *access_key, const char *bucket);

/*
 * POST Object, S3's browser-based upload (postform.c): a POST to a bucket
 * whose multipart/form-data body carries the key, the other fields, a
 * policy and its signature, and the file last. The form is read as it
 * streams: the fields before the file kept (bounded below), the file's
 * bytes handed on as they come; fields after the file are ignored, as S3
 * ignores them.
 */
#define RIO_S3_FORM_FIELDS_MAX 64      /* fields before the file */
#define RIO_S3_FORM_VALUE_MAX 20480    /* bytes of one field's value (S3's policy: 20 KB) */
#define RIO_S3_FORM_FIELDS_BYTES 65536 /* the fields' names and values together */
#define RIO_S3_FORM_NAME_MAX 1024      /* a part's name, filename or Content-Type */
struct rio_s3_form;
struct rio_s3_form_cb {
    void *arg;
    /* The part named "file" begins: every field before it is in
     * (rio_s3_form_field). filename and content_type "" when not given. A
     * negative return stops the form with that error. */
    int (*file_begin)(void *arg, const char *filename, const char *content_type);
    /* The file's bytes, in order; a negative return stops the form. */
    int (*file_data)(void *arg, const void *p, size_t n);
};
/** A form for a request of this Content-Type (multipart/form-data with a
 * boundary of 1 to 70 characters, else RIO_EINVAL); cb may be NULL.
 * 0, -ENOMEM. */
int rio_s3_form_new(const char *content_type, const struct rio_s3_form_cb *cb,
                    struct rio_s3_form **out);
/** Feed the next n bytes of the body: 0, RIO_EINVAL with *why when the
 * form is malformed or exceeds a bound, or a callback's error; an error
 * sticks. */
int rio_s3_form_feed(struct rio_s3_form *f, const void *in, size_t n, const char **why);
/** 1 once the file part has ended at its delimiter. */
int rio_s3_form_done(const struct rio_s3_form *f);
/** 1 once the file part has begun. */
int rio_s3_form_file_seen(const struct rio_s3_form *f);
/** The value of the field name (any case) before the file, or NULL. */
const char *rio_s3_form_field(const struct rio_s3_form *f, const char *name);
unsigned rio_s3_form_nfields(const struct rio_s3_form *f);
/** Field i's name (lower-case) and *value; NULL past the last. */
const char *rio_s3_form_field_at(const struct rio_s3_form *f, unsigned i, const char **value);
void rio_s3_form_free(struct rio_s3_form *f);

struct rio_s3_post_auth {
    char access_key[128];      /* the user whose signature matched */
    int anonymous;             /* the form carries no signature */
    uint64_t len_min, len_max; /* the policy's content-length-range (0, UINT64_MAX: none) */
};
/**
 * Authenticate a POST form whose fields are in (at file_begin): the
 * signature over its policy (SigV4: x-amz-algorithm, x-amz-credential,
 * x-amz-date, x-amz-signature; SigV2, when sigv2: AWSAccessKeyId and
 * signature), the policy's expiration against now (unix seconds) and each
 * of its conditions (bucket is the request's), and that every field but
 * policy, the signature fields, file and x-ignore-* is named by a
 * condition. A form without signature fields is anonymous (its policy, if
 * any, still checked). key: the key field with ${filename} replaced by the
 * file's name, what $key conditions are checked against, as S3 does (NULL:
 * the field as sent). 0 and *out; or RIO_EINVAL / -EACCES / -ENOMEM with
 * *s3_code and S3's message in msg (no secret in it).
 */
int rio_s3_post_verify(const struct rio_s3_keys *k, const struct rio_s3_form *f, const char *bucket,
                       const char *key, int64_t now, int sigv2, struct rio_s3_post_auth *out,
                       const char **s3_code, char *msg, size_t msgcap);

/*
 * aws-chunked body decoder: feed the raw body, get the payload; verifies
 * each chunk's signature, chained from the seed signature. Payload bytes of
 * a chunk are handed out as they arrive, before that chunk's signature (at
 * its end) is checked: the caller commits nothing until rio_s3_chunked_done
 * says 1, and drops the upload on any error.
 */
struct rio_s3_chunked;
/** A decoder for a request verified with payload_mode _STREAMING or
 * one of the _TRAILER modes (else RIO_EINVAL). 0, -ENOMEM. */
int rio_s3_chunked_new(const struct rio_s3_auth *a, struct rio_s3_chunked **out);
/**
 * Consume up to n bytes of in (*consumed says how many) and write payload to
 * out (at most cap bytes). Returns the payload bytes written (0 is fine: a
 * chunk line, or cap 0), or a negative error with *s3_code:
 * "SignatureDoesNotMatch" (a chunk signature), "InvalidRequest" (malformed
 * framing or trailer), "BadDigest" / "InvalidDigest" (the trailer's checksum),
 * "InvalidArgument" (bytes after the end), "InternalError". A body that ends
 * early is not an error here: rio_s3_chunked_done stays 0 (IncompleteBody).
 * Once an error is returned, every later call returns it again.
 */
ssize_t rio_s3_chunked_feed(struct rio_s3_chunked *d, const void *in, size_t n, size_t *consumed,
                            void *out, size_t cap, const char **s3_code);
/** 1 once the final 0-size chunk (and trailer, if any) was verified. */
int rio_s3_chunked_done(const struct rio_s3_chunked *d);
/** Payload bytes decoded so far (to compare with x-amz-decoded-content-length). */
uint64_t rio_s3_chunked_total(const struct rio_s3_chunked *d);
void rio_s3_chunked_free(struct rio_s3_chunked *d);
/* The trailer checksum the body carried and that matched it: its name
 * ("x-amz-checksum-crc32", ...) and *value (base64); NULL when none. Valid
 * until rio_s3_chunked_free. */
const char *rio_s3_chunked_trailer(const struct rio_s3_chunked *d, const char **value);

/*
 * A body checked as it streams, against what a header claims: the signed
 * payload hash (name "x-amz-content-sha256", value 64 hex characters: pass
 * auth.payload_sha256 when payload_mode is _SIGNED), "content-md5" or
 * "x-amz-checksum-{crc32,crc32c,crc64nvme,sha1,sha256}" (base64 values). Feed
 * every body byte, then check once. One per request and header.
 */
struct rio_s3_check;
/** 0; RIO_EINVAL with *s3_code "InvalidDigest" (a value that is not a digest
 * of that kind) or "InvalidRequest" (a name it does not know); -ENOMEM. */
int rio_s3_check_new(const char *name, const char *value, struct rio_s3_check **out,
                     const char **s3_code);
/** 0, or -EIO on a digest failure. */
int rio_s3_check_update(struct rio_s3_check *c, const void *p, size_t n);
/** 0 when the bytes fed match, else -EINVAL and *s3_code
 * "XAmzContentSHA256Mismatch" (the payload hash) or "BadDigest" (the others). */
int rio_s3_check_done(struct rio_s3_check *c, const char **s3_code);
/** Instead of rio_s3_check_done, for a check made with value NULL: the
 * base64 digest of the bytes fed into out (cap: 45 bytes hold any), as
 * S3 answers it; 0, or -EIO (also for x-amz-content-sha256). */
int rio_s3_check_digest(struct rio_s3_check *c, char *out, size_t cap);
void rio_s3_check_free(struct rio_s3_check *c);

#endif
