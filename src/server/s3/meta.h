/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The S3 gateway's object metadata (docs/gateway.md, "Object metadata"):
 * what an S3 object carries that railio's backends do not keep (the ETag to
 * present, the stored content headers, x-amz-meta-*), as a small text
 * record stored beside the object on the same backend. metarec.c builds,
 * encodes and parses a record and knows nothing of HTTP or the backend (the
 * fuzz target links it alone); objmeta.c reads and writes records for the
 * operations. A record read back is untrusted: the parser bounds every
 * length and refuses anything it did not write.
 */
#ifndef RIO_SERVER_S3_META_H
#define RIO_SERVER_S3_META_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#include "railio.h"

#define GW_META_USER_MAX 2048u      /* S3: x-amz-meta-* names and values, bytes */
#define GW_META_VALUE_MAX 2048u     /* one stored content header's value */
#define GW_META_REC_MAX 65536u      /* a record, encoded */
#define GW_META_RUNS_MAX 1024u      /* runs of equal part sizes a record keeps */
#define GW_META_PARTS_MAX 10000u    /* S3: parts of a multipart object */
#define GW_META_PREFIX ".rio-meta/" /* records: ".rio-meta/BUCKET/<SHA-256 of KEY>" */
#define GW_META_DEFAULT_TYPE "binary/octet-stream"
#define GW_META_CK_MAX 56u         /* a checksum's value: base64 of a SHA-256 (44) and "-10000" */
#define GW_META_TAGS_MAX 10u       /* S3: tags of an object */
#define GW_BUCKET_TAGS_MAX 50u     /* S3: tags of a bucket */
#define GW_META_TAG_KEY_MAX 128u   /* S3: a tag's key, characters */
#define GW_META_TAG_VALUE_MAX 256u /* S3: a tag's value, characters */

/* The stored content headers, in record order. */
enum gw_meta_hdr {
    GW_MH_CONTENT_TYPE = 0,
    GW_MH_CONTENT_ENCODING,
    GW_MH_CONTENT_DISPOSITION,
    GW_MH_CONTENT_LANGUAGE,
    GW_MH_CACHE_CONTROL,
    GW_MH_EXPIRES,
    GW_MH__COUNT
};
/* Their HTTP names ("Content-Type", ...). */
extern const char *const rio__gw_meta_hdr_names[GW_MH__COUNT];

struct gw_meta_kv {
    char *name; /* lower-case, without "x-amz-meta-" */
    char *value;
};

/* count parts of size bytes each, in a row */
struct gw_meta_run {
    uint64_t size;
    uint32_t count;
};

struct gw_meta {
    /* The object the record describes: a record whose identity is not the
     * current object's is ignored. generation 0 and etag "" when unknown. */
    uint64_t size, generation;
    char etag[48];   /* the backend's etag */
    char s3etag[48]; /* the ETag to present; "" = the backend's */
    /* A multipart object's part sizes, in order, as runs of one size (none:
     * not multipart, or not recorded) */
    struct gw_meta_run *runs;
    unsigned nruns;
    /* The object's S3 checksum, checked on its way in (S3's
     * x-amz-checksum-ALGO and -type): ck_algo "crc32", "crc32c",
     * "crc64nvme", "sha1" or "sha256" ("" none), ck_value its base64, and
     * for a composite one (the checksum of the parts' checksums) "-N". An
     * upload's record may carry the algorithm alone (CreateMultipartUpload's
     * x-amz-checksum-algorithm). */
    char ck_algo[12];
    char ck_value[GW_META_CK_MAX];
    char *hdr[GW_MH__COUNT]; /* NULL when not stored */
    struct gw_meta_kv *user;
    unsigned nuser, capuser;
    size_t user_bytes; /* names + values */
    /* The object's tags (S3 tagging), in the order given; keys once each.
     * A record with tags is written as version 2 ("railio-s3-meta 2"),
     * which gateways before tagging refuse: they serve such objects with
     * the defaults, and read every other record as before. */
    struct gw_meta_kv *tags;
    unsigned ntags, captags;
    unsigned tags_max; /* how many add_tag takes: 0 is GW_META_TAGS_MAX (an object's) */
};

/* Errors of the setters besides -ENOMEM. */
#define GW_META_EBADVALUE RIO_EINVAL /* a control character, or too long */
#define GW_META_ETOOLARGE (-E2BIG)   /* user metadata over GW_META_USER_MAX */

/** A new, empty record (every field default); NULL when out of memory. */
struct gw_meta *rio__gw_meta_new(void);
/** Free m (NULL is fine). */
void rio__gw_meta_free(struct gw_meta *m);
/** Store content header h's value (replacing it). 0, GW_META_EBADVALUE, -ENOMEM. */
int rio__gw_meta_set_hdr(struct gw_meta *m, int h, const char *value);
/**
 * Add user metadata name (without "x-amz-meta-", any case: stored lower-case)
 * = value. A name given twice keeps both values joined by ",", as HTTP does.
 * 0, GW_META_EBADVALUE (a name that is not an HTTP token, a bad value),
 * GW_META_ETOOLARGE, -ENOMEM.
 */
int rio__gw_meta_add_user(struct gw_meta *m, const char *name, const char *value);
/** 1 when a value may be stored: at most max bytes, no control character
 * (tab allowed), no DEL. */
int rio__gw_meta_valid_value(const char *v, size_t max);
/** 1 when m holds nothing but defaults for an object whose backend etag is
 * etag: no record is needed. NULL is default. */
int rio__gw_meta_is_default(const struct gw_meta *m, const char *etag);
/** 1 when m holds a checksum and nothing else but defaults: a record that
 * depends on the object's bytes alone. */
int rio__gw_meta_bytes_only(const struct gw_meta *m);
/**
 * Record the sizes of a multipart object's n parts (1..GW_META_PARTS_MAX,
 * summing to m->size), replacing any. 0, RIO_EINVAL (n out of bounds, or
 * more than GW_META_RUNS_MAX runs: nothing recorded), -ENOMEM.
 */
int rio__gw_meta_set_parts(struct gw_meta *m, const uint64_t *sizes, unsigned n);
/**
 * Part pn (1-based) of the multipart object m describes: [*off, *off +
 * *len), and *count the object's parts. 1, 0 when pn is past the last part,
 * -1 when m records no parts.
 */
int rio__gw_meta_part(const struct gw_meta *m, unsigned pn, uint64_t *off, uint64_t *len,
                      unsigned *count);
/**
 * The digest length in bytes of S3 checksum algorithm algo ("crc32", ...,
 * any case), 0 when it is none of S3's.
 */
size_t rio__gw_ck_len(const char *algo);
/**
 * Record the object's checksum: algo (any case, stored lower-case) and value,
 * the base64 of an algo digest, optionally followed by "-N" (1..10000, a
 * composite one; not for crc64nvme); value "" records the algorithm alone.
 * 0, or RIO_EINVAL (nothing recorded).
 */
int rio__gw_meta_set_checksum(struct gw_meta *m, const char *algo, const char *value);
/**
 * Add a tag: key of 1 to 128 characters, value of 0 to 256 (UTF-8; letters,
 * digits, blanks and "+-=._:/@", as S3 takes them), not starting with
 * "aws:", a key not yet there. 0; RIO_EINVAL (*why: what is wrong, static
 * text); -E2BIG (already GW_META_TAGS_MAX); -ENOMEM.
 */
int rio__gw_meta_add_tag(struct gw_meta *m, const char *key, const char *value, const char **why);
/** Drop m's tags (their room too). */
void rio__gw_meta_clear_tags(struct gw_meta *m);
/** Replace m's tags with src's. 0 or -ENOMEM (m then has none). */
int rio__gw_meta_copy_tags(struct gw_meta *m, const struct gw_meta *src);
/**
 * m's tags from an x-amz-tagging header: "K1=V1&K2=V2", URL-encoded ('+'
 * a blank). Replaces any. As rio__gw_meta_add_tag, and RIO_EINVAL for
 * text that is not such a list (a bad escape, a key twice).
 */
int rio__gw_meta_tags_from_query(struct gw_meta *m, const char *q, const char **why);
/** Copy the content headers and user metadata of src into dst (not the
 * identity nor the ETag). 0 or -ENOMEM. */
int rio__gw_meta_copy_content(struct gw_meta *dst, const struct gw_meta *src);
/** A copy of m, identity and ETag too; NULL when out of memory. */
struct gw_meta *rio__gw_meta_dup(const struct gw_meta *m);

/**
 * Encode m as a record naming backend key bkey: *out is a new NUL-terminated
 * string (rio__free) of *len bytes. 0, RIO_EINVAL (over GW_META_REC_MAX),
 * -ENOMEM.
 */
int rio__gw_meta_encode(const struct gw_meta *m, const char *bkey, char **out, size_t *len);
/**
 * Parse a record of n bytes (not terminated). *out is a new record, and
 * *bkey (when not NULL) the backend key it names (rio__free). 0, or
 * RIO_EPROTO with *why (static text, may be NULL) when the bytes are not a
 * record this code writes, or -ENOMEM. Bounded: at most GW_META_REC_MAX
 * bytes are looked at (more is RIO_EPROTO).
 */
int rio__gw_meta_parse(const char *p, size_t n, struct gw_meta **out, char **bkey,
                       const char **why);

#endif
