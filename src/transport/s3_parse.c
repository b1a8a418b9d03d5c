/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What an S3 or HTTP server sends, parsed: see s3_parse.h. Everything here
 * reads hostile bytes; every length is bounded by the caller's buffers.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "railio.h"
#include "transport/s3_parse.h"

uint64_t rio__s3_nchunks(uint64_t size, uint64_t chunk)
{
    return size ? (size - 1) / chunk + 1 : 0;
}

bool rio__s3_is_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

/* A decimal u64, the whole string. */
int rio__s3_parse_u64(const char *s, uint64_t *out)
{
    uint64_t v = 0;

    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || v > (UINT64_MAX - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

/* Copy at most cap-1 bytes and terminate. */
void rio__s3_copy_str(char *dst, size_t cap, const char *src, size_t n)
{
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

/* Text between <tag> and </tag> in an XML body, or "" (no entity decoding
 * beyond &quot;, which ETags carry). */
void rio__s3_xml_text(const char *body, size_t len, const char *tag, char *out, size_t cap)
{
    char open[64], close[64];
    const char *b, *e;
    size_t o = 0;

    out[0] = '\0';
    if (!body || !len)
        return;
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    b = memmem(body, len, open, strlen(open));
    if (!b)
        return;
    b += strlen(open);
    e = memmem(b, len - (size_t)(b - body), close, strlen(close));
    if (!e)
        return;
    while (b < e && o + 1 < cap) {
        if (e - b >= 6 && memcmp(b, "&quot;", 6) == 0) {
            out[o++] = '"';
            b += 6;
        } else if (e - b >= 5 && memcmp(b, "&#34;", 5) == 0) {
            out[o++] = '"';
            b += 5;
        } else {
            out[o++] = *b++;
        }
    }
    out[o] = '\0';
}

/*
 * An HTTP status (and the S3 <Code> from the error body) as a railio error.
 * Retryable: 408, 429, 5xx but 501, and the 400s that S3 uses for transient trouble
 * (RequestTimeout) or for bytes damaged in flight (BadDigest: the part is
 * sent again). Everything else is the caller's or the object's problem and
 * fails the request.
 */
int rio__s3_map_http(long status, const char *code)
{
    if (status >= 200 && status < 300)
        return 0;
    if (!strcmp(code, "SlowDown") || status == 429)
        return RIO_ETHROTTLE;
    /* The server cannot do it at all: asking again will not help. */
    if (status == 501)
        return RIO_ENOTSUP;
    if (status >= 500)
        return RIO_ESERVER;
    /* The server gave up waiting for the request (S3: RequestTimeout): a
     * server-side condition, retried, but the path is not at fault and
     * must not cool down as a timeout would make it. */
    if (!strcmp(code, "RequestTimeout") || status == 408)
        return RIO_ESERVER;
    if (!strcmp(code, "BadDigest") || !strcmp(code, "XAmzContentSHA256Mismatch"))
        return RIO_ECHECKSUM;
    switch (status) {
    case 301:
    case 302:
    case 307:
    case 308:
        return RIO_EURL; /* wrong endpoint or region: S3 redirects */
    case 304:
    case 412:
        return RIO_EGENERATION;
    case 401:
    case 403:
        return -EACCES;
    case 404:
    case 410:
        return RIO_ENOTFOUND;
    case 405:
        return RIO_ENOTSUP;
    case 409:
        return !strcmp(code, "OperationAborted") ? RIO_ESERVER : -EEXIST;
    case 400:
        return !strcmp(code, "EntityTooSmall") || !strcmp(code, "EntityTooLarge") ||
                       !strcmp(code, "InvalidArgument") || !strcmp(code, "KeyTooLongError")
                   ? RIO_EINVAL
                   : RIO_EPROTO;
    default:
        return RIO_EPROTO;
    }
}

void rio__s3_rsp_reset(struct s3_rsp *r)
{
    r->status = 0;
    r->have_clen = r->have_crange = r->clen_conflict = false;
    r->etag[0] = r->lastmod[0] = '\0';
    r->m_v[0] = r->m_id[0] = r->m_chunk[0] = r->m_size[0] = r->m_md5[0] = r->m_sidecar[0] = '\0';
    r->m_xxh[0] = '\0';
}

/* "bytes FIRST-LAST/TOTAL" (TOTAL may be '*'). */
bool rio__s3_parse_crange(const char *v, struct s3_rsp *r)
{
    unsigned long long a, b, c = 0;
    int n = 0;

    if (sscanf(v, "bytes %llu-%llu/%n", &a, &b, &n) != 2 || n == 0)
        return false;
    if (v[n] == '*')
        c = UINT64_MAX;
    else if (sscanf(v + n, "%llu", &c) != 1)
        return false;
    if (a > b)
        return false;
    r->cr_first = a;
    r->cr_last = b;
    r->cr_total = c;
    return true;
}

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
    } else if (HDR_IS("last-modified")) {
        rio__s3_copy_str(r->lastmod, sizeof(r->lastmod), val, vl);
    } else if (nl > 17 && strncasecmp(p, "x-amz-meta-railio", 17) == 0) {
        const char *s = p + 17;
        size_t sl = nl - 17;
#define META_IS(suffix) (sl == sizeof(suffix) - 1 && strncasecmp(s, suffix, sl) == 0)
        if (META_IS("-v"))
            rio__s3_copy_str(r->m_v, sizeof(r->m_v), val, vl);
        else if (META_IS("-id"))
            rio__s3_copy_str(r->m_id, sizeof(r->m_id), val, vl);
        else if (META_IS("-chunk"))
            rio__s3_copy_str(r->m_chunk, sizeof(r->m_chunk), val, vl);
        else if (META_IS("-size"))
            rio__s3_copy_str(r->m_size, sizeof(r->m_size), val, vl);
        else if (META_IS("-md5"))
            rio__s3_copy_str(r->m_md5, sizeof(r->m_md5), val, vl);
        else if (META_IS("-sidecar"))
            rio__s3_copy_str(r->m_sidecar, sizeof(r->m_sidecar), val, vl);
        else if (META_IS("-xxh"))
            rio__s3_copy_str(r->m_xxh, sizeof(r->m_xxh), val, vl);
#undef META_IS
    }
#undef HDR_IS
}

int rio__s3_parse_xxh_list(const char *s, uint64_t n, uint64_t **out)
{
    uint64_t *x;

    *out = NULL;
    if (n == 0)
        return 0;
    if (strlen(s) != n * 16 || n > SIZE_MAX / sizeof(*x))
        return RIO_EPROTO;
    x = rio__malloc((size_t)n * sizeof(*x));
    if (!x)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        char h[17];
        memcpy(h, s + i * 16, 16);
        h[16] = '\0';
        if (!rio__s3_is_hex(h, 16)) {
            rio__free(x);
            return RIO_EPROTO;
        }
        x[i] = strtoull(h, NULL, 16);
    }
    *out = x;
    return 0;
}

/*
 * The sidecar of a multipart object (see docs/s3.md):
 *   railio-sidecar 1\n id ID\n size N\n chunk N\n md5 HEX\n n N\n
 *   then n lines of 16 hex digits, then "end XXH\n" where XXH is the xxh3 of
 *   everything before "end".
 */
int rio__s3_sidecar_parse(const char *b, size_t len, const char *id, uint64_t size, uint64_t chunk,
                          char md5[33], uint64_t **xxh)
{
    char sid[24], smd5[40];
    unsigned long long ssize, schunk, n, sum;
    const char *end, *p;
    int off = 0;
    uint64_t *x;

    *xxh = NULL;
    if (!b || len < 8)
        return RIO_EPROTO;
    end = NULL;
    for (p = b; (p = memmem(p, len - (size_t)(p - b), "\nend ", 5)); p++)
        end = p;
    if (!end || sscanf(end + 5, "%16llx", &sum) != 1 ||
        rio__xxh3(b, (size_t)(end - b + 1)) != (uint64_t)sum)
        return RIO_EPROTO;
    if (sscanf(b, "railio-sidecar 1\nid %23s\nsize %llu\nchunk %llu\nmd5 %39s\nn %llu\n%n", sid,
               &ssize, &schunk, smd5, &n, &off) != 5 ||
        off == 0)
        return RIO_EPROTO;
    if (strcmp(sid, id) || ssize != size || schunk != chunk || n != rio__s3_nchunks(size, chunk) ||
        (strcmp(smd5, "-") != 0 && (strlen(smd5) != 32 || !rio__s3_is_hex(smd5, 32))))
        return RIO_EPROTO;
    if ((size_t)(end - b + 1 - off) != n * 17)
        return RIO_EPROTO;
    if (n) {
        x = rio__malloc((size_t)n * sizeof(*x));
        if (!x)
            return -ENOMEM;
        for (uint64_t i = 0; i < n; i++) {
            const char *l = b + off + i * 17;
            if (!rio__s3_is_hex(l, 16) || l[16] != '\n') {
                rio__free(x);
                return RIO_EPROTO;
            }
            x[i] = strtoull(l, NULL, 16);
        }
        *xxh = x;
    }
    if (!strcmp(smd5, "-"))
        md5[0] = '\0'; /* written without the stream MD5 (etag=none) */
    else
        memcpy(md5, smd5, 33);
    return 0;
}
