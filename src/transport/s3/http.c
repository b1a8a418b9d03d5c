/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A response's head, one line at a time as curl's header callback hands it
 * over (not terminated): the status line and the headers this transport
 * reads, into struct s3_rsp. Reads hostile bytes: every length is bounded
 * by the fields of s3_rsp. No allocation, no libcurl
 * (tests/unit/test_s3_parse.c, tests/fuzz/fuzz_http.c).
 */
#include <ctype.h>
#include <string.h>
#include <strings.h>

#include "transport/s3/parse.h"

void rio__s3_rsp_reset(struct s3_rsp *r)
{
    r->status = 0;
    r->have_clen = r->have_crange = r->clen_conflict = false;
    r->etag[0] = r->lastmod[0] = '\0';
    r->m_v[0] = r->m_id[0] = r->m_chunk[0] = r->m_size[0] = r->m_md5[0] = r->m_sidecar[0] = '\0';
    r->m_xxh[0] = '\0';
    r->etag_no_md5 = false;
    r->mp_parts = 0;
    r->ck_algo = RIO_S3_CK_NONE;
    r->ck_composite = false;
    r->ck_value = 0;
    r->goog_have = r->goog_transcoded = r->goog_stored_enc = false;
    r->goog_crc32c = 0;
}

uint8_t rio__s3_rsp_checksum(const struct s3_rsp *r, uint64_t *value)
{
    if (r->ck_algo != RIO_S3_CK_NONE && !r->ck_composite) {
        *value = r->ck_value;
        return r->ck_algo;
    }
    if (r->goog_have && !r->goog_transcoded) {
        *value = r->goog_crc32c;
        return RIO_S3_CK_CRC32C;
    }
    return RIO_S3_CK_NONE;
}

/* x-goog-hash: "crc32c=BASE64, md5=BASE64" (v, vl bytes): the crc32c. */
static void goog_hash(struct s3_rsp *r, const char *v, size_t vl)
{
    while (vl) {
        const char *comma = memchr(v, ',', vl);
        size_t n = comma ? (size_t)(comma - v) : vl;
        const char *e = v;
        size_t en = n;
        uint8_t b[4];
        while (en && (*e == ' ' || *e == '\t'))
            e++, en--;
        while (en && (e[en - 1] == ' ' || e[en - 1] == '\t'))
            en--;
        if (en > 7 && strncasecmp(e, "crc32c=", 7) == 0) {
            if (rio__s3_b64_exact(e + 7, en - 7, b, 4) < 0) {
                r->goog_transcoded = true; /* unreadable: none believed */
                return;
            }
            uint32_t crc = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
            if (r->goog_have && r->goog_crc32c != crc) {
                r->goog_transcoded = true; /* two values: none believed */
                return;
            }
            r->goog_crc32c = crc;
            r->goog_have = true;
        }
        if (!comma)
            break;
        v += n + 1;
        vl -= n + 1;
    }
}

/* x-amz-checksum-NAME: v (vl bytes), a full-object checksum if it is
 * base64 of exactly its bytes, taken over a weaker one. */
static void checksum_header(struct s3_rsp *r, const char *name, size_t nl, const char *v, size_t vl)
{
    static const struct {
        const char *name;
        uint8_t algo;
        size_t len;
    } cks[] = {{"crc32", RIO_S3_CK_CRC32, 4},
               {"crc32c", RIO_S3_CK_CRC32C, 4},
               {"crc64nvme", RIO_S3_CK_CRC64NVME, 8}};
    uint8_t b[8];

    for (size_t i = 0; i < sizeof(cks) / sizeof(cks[0]); i++) {
        if (nl != strlen(cks[i].name) || strncasecmp(name, cks[i].name, nl) != 0)
            continue;
        if (cks[i].algo <= r->ck_algo || rio__s3_b64_exact(v, vl, b, cks[i].len) < 0)
            return;
        r->ck_value = 0;
        for (size_t k = 0; k < cks[i].len; k++)
            r->ck_value = r->ck_value << 8 | b[k];
        r->ck_algo = cks[i].algo;
        return;
    }
}

/* The x-amz-meta-railio* headers and where each one's value goes. */
#define META_FIELD(suf, f)                                                                         \
    {                                                                                              \
        suf, offsetof(struct s3_rsp, f), sizeof(((struct s3_rsp *)0)->f)                           \
    }
static const struct {
    const char *suffix;
    size_t off, cap;
} meta_fields[] = {
    META_FIELD("-v", m_v),       META_FIELD("-id", m_id),   META_FIELD("-chunk", m_chunk),
    META_FIELD("-size", m_size), META_FIELD("-md5", m_md5), META_FIELD("-sidecar", m_sidecar),
    META_FIELD("-xxh", m_xxh),
};
#undef META_FIELD

void rio__s3_rsp_header(struct s3_rsp *r, const char *p, size_t len)
{
    size_t nl, vl;
    const char *colon, *v;
    char val[RIO_S3_META_XXH_MAX];

    if (len >= 5 && strncasecmp(p, "HTTP/", 5) == 0) {
        /* A new status line (also after "100 Continue"): start over. */
        const char *sp = memchr(p, ' ', len);
        rio__s3_rsp_reset(r);
        /* Three digits, read within the line (it is not terminated). */
        if (sp && (size_t)(sp - p) + 4 <= len) {
            long st = 0;
            for (int i = 1; i <= 3 && isdigit((unsigned char)sp[i]); i++)
                st = st * 10 + (sp[i] - '0');
            r->status = st;
        }
        return;
    }
    colon = memchr(p, ':', len);
    if (!colon)
        return;
    nl = (size_t)(colon - p);
    v = colon + 1;
    vl = len - nl - 1;
    while (vl && (*v == ' ' || *v == '\t'))
        v++, vl--;
    while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
        vl--;
    rio__s3_copy_str(val, sizeof(val), v, vl);

#define HDR_IS(name) (nl == sizeof(name) - 1 && strncasecmp(p, name, nl) == 0)
    if (HDR_IS("content-length")) {
        /* Repeated with another value (or one unreadable): which one frames
         * the body is anyone's guess (RFC 9112 6.3: an error), so none is
         * believed, however many follow. */
        uint64_t n;
        bool ok = rio__s3_parse_u64(val, &n) == 0;
        if (!ok || (r->have_clen && n != r->clen))
            r->clen_conflict = true;
        r->have_clen = ok && !r->clen_conflict;
        if (r->have_clen)
            r->clen = n;
    } else if (HDR_IS("content-range")) {
        r->have_crange = rio__s3_parse_crange(val, r);
    } else if (HDR_IS("etag")) {
        rio__s3_copy_str(r->etag, sizeof(r->etag), val, vl);
    } else if (HDR_IS("x-amz-server-side-encryption")) {
        /* aws:kms, aws:kms:dsse; AES256 (SSE-S3) keeps the MD5 ETag */
        if (strncasecmp(val, "aws:kms", 7) == 0)
            r->etag_no_md5 = true;
    } else if (HDR_IS("x-amz-mp-parts-count")) {
        uint64_t n;
        r->mp_parts =
            rio__s3_parse_u64(val, &n) == 0 && n >= 1 && n <= 10000 ? (uint32_t)n : UINT32_MAX;
    } else if (HDR_IS("x-amz-server-side-encryption-customer-algorithm")) {
        r->etag_no_md5 = true; /* SSE-C */
    } else if (HDR_IS("x-railio-etag")) {
        /* railiod's gateway: the etag=fast of a railio client, no MD5 */
        if (vl == 4 && strncasecmp(val, "fast", 4) == 0)
            r->etag_no_md5 = true;
    } else if (HDR_IS("x-goog-hash")) {
        goog_hash(r, val, strlen(val));
    } else if (HDR_IS("x-goog-stored-content-encoding")) {
        /* stored gzipped, served decompressed: its hashes and its ETag
         * are of other bytes than those served */
        if (!(vl == 8 && strncasecmp(val, "identity", 8) == 0))
            r->goog_transcoded = r->etag_no_md5 = r->goog_stored_enc = true;
    } else if (HDR_IS("x-amz-checksum-type")) {
        if (vl == 9 && strncasecmp(val, "COMPOSITE", 9) == 0)
            r->ck_composite = true;
    } else if (nl > 15 && strncasecmp(p, "x-amz-checksum-", 15) == 0) {
        checksum_header(r, p + 15, nl - 15, val, strlen(val));
    } else if (HDR_IS("last-modified")) {
        rio__s3_copy_str(r->lastmod, sizeof(r->lastmod), val, vl);
    } else if (nl > 17 && strncasecmp(p, "x-amz-meta-railio", 17) == 0) {
        for (size_t i = 0; i < sizeof(meta_fields) / sizeof(meta_fields[0]); i++) {
            const char *suf = meta_fields[i].suffix;
            if (nl - 17 == strlen(suf) && strncasecmp(p + 17, suf, nl - 17) == 0) {
                rio__s3_copy_str((char *)r + meta_fields[i].off, meta_fields[i].cap, val, vl);
                break;
            }
        }
    }
#undef HDR_IS
}

uint32_t rio__s3_etag_parts(const char *etag)
{
    size_t len = strlen(etag);
    uint32_t n = 0;

    if (len < 36 || len > 40 || etag[0] != '"' || etag[len - 1] != '"' || etag[33] != '-' ||
        !rio__s3_is_hex(etag + 1, 32) || etag[34] == '0')
        return 0;
    for (size_t i = 34; i < len - 1; i++) {
        if (etag[i] < '0' || etag[i] > '9')
            return 0;
        n = n * 10 + (uint32_t)(etag[i] - '0');
    }
    return n <= 10000 ? n : 0;
}
