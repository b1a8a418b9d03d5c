/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The parsers of what an S3 or HTTP server sends (the s3:// transport reads
 * through them), one file a format: the status line and headers of a
 * response (http.c), Content-Range (range.c), the S3 XML answers and error
 * codes (xml.c), the checksum list in the metadata and the sidecar, which
 * sidecar.c also writes; text.c holds the helpers they share. Pure
 * functions over caller-owned buffers, no libcurl, so they are unit-tested
 * (tests/unit/test_s3_parse.c) and fuzzed (tests/fuzz/fuzz_http.c,
 * fuzz_s3xml.c, fuzz_sidecar.c) apart.
 */
#ifndef RIO_TRANSPORT_S3_PARSE_H
#define RIO_TRANSPORT_S3_PARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "railio.h"

#define RIO_S3_ETAG_MAX 80
#define RIO_S3_META_XXH_MAX 2048     /* the inline xxh list (S3: 2 KiB of user metadata) */
#define S3_SIDECAR_SUFFIX ".railio-" /* a sidecar's key: KEY + this + upload id */

/* What the header callback extracts from a response (data and metadata). */
struct s3_rsp {
    long status;
    bool have_clen, have_crange;
    bool clen_conflict; /* two Content-Lengths that disagree: none is believed */
    uint64_t clen;
    uint64_t cr_first, cr_last, cr_total;
    char etag[RIO_S3_ETAG_MAX];
    char lastmod[64];
    char m_v[8], m_id[24], m_chunk[24], m_size[24], m_md5[40], m_sidecar[8];
    char m_xxh[RIO_S3_META_XXH_MAX];
    /* Its ETag is no MD5 of the bytes: encrypted with a key the server
     * does not keep in the clear (SSE-KMS, SSE-C), or railiod's gateway
     * saying so (x-railio-etag: fast, a railio client's etag=fast). */
    bool etag_no_md5;
    /* x-amz-mp-parts-count (a GET or HEAD of ?partNumber): 1 to 10000, 0
     * when absent (a server that ignores partNumber), UINT32_MAX when
     * given but no count an S3 object has (not such a server: that
     * object's parts cannot be told, the next ones' may) */
    uint32_t mp_parts;
    /* A checksum of the object's bytes the server keeps (asked with
     * x-amz-checksum-mode: ENABLED): x-amz-checksum-crc64nvme, -crc32c or
     * -crc32, base64 of exactly its bytes (the strongest when several
     * come; one that is not, such as a checksum of parts' checksums
     * "...-N", is not taken), as ck_algo (RIO_S3_CK_*) and ck_value;
     * ck_composite: x-amz-checksum-type COMPOSITE, a checksum of parts'
     * checksums, whatever its value looks like. */
    uint8_t ck_algo;
    bool ck_composite;
    uint64_t ck_value;
    /* Google Cloud Storage's x-goog-hash: crc32c=BASE64 (one header or
     * several, each a comma-separated list), the CRC-32C of the stored
     * bytes, which are not the bytes served when goog_transcoded
     * (x-goog-stored-content-encoding other than identity: a gzip object
     * served decompressed). */
    bool goog_have, goog_transcoded;
    uint32_t goog_crc32c;
    /* x-goog-stored-content-encoding other than identity: the ETag is
     * that of the stored bytes, which another object may store as they
     * are (then the same ETag, other bytes served) */
    bool goog_stored_enc;
};

enum { RIO_S3_CK_NONE, RIO_S3_CK_CRC32, RIO_S3_CK_CRC32C, RIO_S3_CK_CRC64NVME };

/* text.c */
/* Server text shown to people: every byte outside printable ASCII (a
 * newline, an escape sequence) becomes '?'. */
void rio__s3_printable(char *s);
/* A key (or other text that may be UTF-8) shown on a terminal, copied into
 * out (cap > 0): its C0 controls, DEL and C1 controls (UTF-8 0xC2
 * 0x80-0x9F) as '?', as `railio ls` shows keys; other bytes kept. */
const char *rio__s3_shown(const char *s, char *out, size_t cap);

/* ceil(size / chunk); chunk > 0. */
uint64_t rio__s3_nchunks(uint64_t size, uint64_t chunk);
/* n bytes of s are all hex digits. */
bool rio__s3_is_hex(const char *s, size_t n);
/* A decimal u64, the whole string (NUL-terminated): 0, or -1 (empty, not a
 * digit, overflow). */
int rio__s3_parse_u64(const char *s, uint64_t *out);
/* Copy at most cap - 1 of n bytes and terminate (cap > 0). */
void rio__s3_copy_str(char *dst, size_t cap, const char *src, size_t n);
/* Strict base64 (padded, no space) of exactly len bytes (len <= 48) in the
 * n bytes at s, into out: 0, or -1 (another length, a stray character,
 * padding where it cannot be, or bits left over that are not zero). */
int rio__s3_b64_exact(const char *s, size_t n, uint8_t *out, size_t len);
/* xml.c */

/* Text between <tag> and </tag> in body[0..len) (not terminated), or "";
 * &quot; and &#34; decoded (ETags carry them). out has cap > 0 bytes. */
void rio__s3_xml_text(const char *body, size_t len, const char *tag, char *out, size_t cap);
/* An HTTP status and the S3 <Code> as a railio error (0 for 2xx). */
int rio__s3_map_http(long status, const char *code);
/* listxml.c */

/* One <Contents> (dir false) or <CommonPrefixes> (dir true: only key). */
struct rio_s3_list_item {
    char key[RIO_KEY_MAX + 1]; /* decoded, 1..RIO_KEY_MAX bytes, no NUL inside */
    size_t klen;
    bool dir;
    uint64_t size;              /* at most INT64_MAX */
    int64_t mtime_ns;           /* LastModified, 0 when absent */
    char etag[RIO_S3_ETAG_MAX]; /* as sent (quotes kept), "" when absent or too long */
};

struct rio_s3_list_result {
    bool truncated;
    char next_token[RIO_LIST_TOKEN_MAX + 1]; /* "" unless truncated */
    unsigned nitems;                         /* items handed to the callback */
};

/*
 * A ListObjectsV2 answer body[0..len) (not terminated): cb (if not NULL)
 * is called with each item in document order (a negative return stops the
 * parse and is returned). 0, or RIO_EPROTO for anything malformed: not a
 * ListBucketResult, a key or prefix empty or over RIO_KEY_MAX (after
 * decoding), a token over RIO_LIST_TOKEN_MAX, a Size or LastModified not
 * strictly a decimal or ISO 8601 date, more than RIO_LIST_PAGE_MAX items,
 * a truncated answer without a token. On error *res is zeroed (items
 * already handed to cb stay handed).
 */
int rio__s3_list_parse(const char *body, size_t len, struct rio_s3_list_result *res,
                       int (*cb)(void *arg, const struct rio_s3_list_item *it), void *arg);
/* "YYYY-MM-DDTHH:MM:SS[.F{1,9}]Z" (UTC, years 1678..2261) as ns since the
 * epoch: 0, or -1 when it is anything else. */
int rio__s3_parse_iso8601(const char *s, int64_t *ns);
/* awsini.c */

#define RIO_AWSINI_FILE_MAX (1u << 20) /* a credentials or config file */
#define RIO_AWSINI_LINE_MAX 8192       /* one line of it */

/* What one profile of an AWS credentials or config file sets ("" unset). */
struct rio_awsini {
    char access_key[256];    /* aws_access_key_id */
    char secret_key[256];    /* aws_secret_access_key */
    char token[4096];        /* aws_session_token */
    char region[64];         /* region */
    char endpoint_url[1024]; /* endpoint_url (top level, not a service's) */
    char ca_bundle[1024];    /* ca_bundle: the CA certificates to trust (PEM) */
    bool found;              /* the profile's section is in the file */
    unsigned bad_line;       /* the line refused (RIO_EPROTO), from 1 */
};

/*
 * The settings of profile in buf[0..len) (not terminated), a config file
 * ([profile NAME], [default]) when config, else a credentials file
 * ([NAME]). 0 when the profile's section is there, RIO_ENOTFOUND when not,
 * RIO_EPROTO when the file is over RIO_AWSINI_FILE_MAX, a line over
 * RIO_AWSINI_LINE_MAX, a line neither a section, a comment nor key=value,
 * or a value of the profile too long for its field (bad_line says which).
 * Later settings of a key replace earlier ones; unknown keys are ignored.
 */
int rio__awsini_parse(const char *buf, size_t len, const char *profile, bool config,
                      struct rio_awsini *out);
/* http.c */

/* Forget every field of r (a new status line). */
void rio__s3_rsp_reset(struct s3_rsp *r);
/* range.c */

/* "bytes FIRST-LAST/TOTAL" (TOTAL may be '*': UINT64_MAX) into r. */
bool rio__s3_parse_crange(const char *v, struct s3_rsp *r);
/* One line of a response's head, p[0..len) not terminated: the status line
 * (starts r over) or a header this transport reads. */
void rio__s3_rsp_header(struct s3_rsp *r, const char *p, size_t len);
/* N of a multipart ETag, "MD5-N" (quotes included; N from 1 to 10000, no
 * leading 0), else 0. */
uint32_t rio__s3_etag_parts(const char *etag);
/* The checksum of the whole object's bytes as served that r carries: an
 * x-amz-checksum-* not composite, else x-goog-hash's crc32c of an object
 * served as stored; RIO_S3_CK_* (NONE: none) and its value in *value. */
uint8_t rio__s3_rsp_checksum(const struct s3_rsp *r, uint64_t *value);
/* sidecar.c */

/* The sidecar's key of object key and upload id: 0, or RIO_EINVAL when it
 * would be longer than RIO_KEY_MAX (or cap). */
int rio__s3_sidecar_key(const char *key, const char *id, char *out, size_t cap);
/* The sidecar of upload id (size, chunk, md5: the stream MD5 or "" when none
 * was computed, the n chunk checksums xxh), NUL-terminated: 0 with *out
 * (rio__malloc'd) and *outlen, RIO_EINVAL (too long) or -ENOMEM. */
int rio__s3_sidecar_format(const char *id, uint64_t size, uint64_t chunk, const char *md5,
                           uint64_t n, const uint64_t *xxh, char **out, size_t *outlen);
/* n xxh3 values as 16 hex digits each, back to back (NUL-terminated s).
 * 0 (*out rio__malloc'd, NULL for n == 0), RIO_EPROTO or -ENOMEM. */
int rio__s3_parse_xxh_list(const char *s, uint64_t n, uint64_t **out);
/* A sidecar b[0..len) (b[len] == '\0') for upload id of size and chunk:
 * 0 with md5 ("" when it has none) and *xxh (rio__malloc'd), RIO_EPROTO,
 * or -ENOMEM. See docs/s3.md. */
int rio__s3_sidecar_parse(const char *b, size_t len, const char *id, uint64_t size, uint64_t chunk,
                          char md5[33], uint64_t **xxh);

#endif
