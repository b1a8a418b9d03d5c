/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Signature Version 2 verification for the S3 gateway (see s3.h): what the
 * aws CLI v1's `s3 presign`, s3cmd's `signurl` and older clients send. An
 * HMAC-SHA1, under the user's secret, of
 *
 *   METHOD \n Content-MD5 \n Content-Type \n DATE \n
 *   x-amz-* headers (lower-case names, sorted, "name:value\n") RESOURCE
 *
 * where DATE is the Date header (empty when x-amz-date is sent: that one is
 * among the x-amz-* headers) or, in a presigned URL, its Expires; RESOURCE
 * the path as sent ("/BUCKET/KEY"; "/BUCKET" before the path in virtual-
 * hosted style) and, after '?', the subresources of the query S3 signs
 * (uploads, uploadId, partNumber, response-*, ...) sorted by name.
 *
 * SigV2 signs less than SigV4: neither the body nor the other query
 * parameters and headers (Range, Cache-Control, ...). Every x-amz-* header
 * is signed by construction.
 *
 * Everything comes from the network: each field is bounded before use, and
 * a request that does not fit a bound is refused, never truncated.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strptime, timegm */
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "transport/s3/sign.h"

#define MAX_QUERY 16384             /* bytes of a raw query */
#define MAX_QPARAMS 128             /* query parameters */
#define MAX_STS 65536               /* bytes of the string to sign */
#define MAX_AMZ RIO_S3_MAX_VERIFIED /* x-amz-* headers (every x-amz-meta-* is one) */
#define SKEW_S 900                  /* RequestTimeTooSkewed beyond this */
#define SIG_B64_LEN 28              /* base64 of a SHA-1 */

/* The subresources S3 signs in SigV2 (botocore's and s3cmd's list). */
static const char *const subresources[] = {
    "accelerate",
    "acl",
    "analytics",
    "cors",
    "defaultObjectAcl",
    "delete",
    "inventory",
    "lifecycle",
    "location",
    "logging",
    "metrics",
    "notification",
    "object-lock",
    "partNumber",
    "policy",
    "replication",
    "requestPayment",
    "response-cache-control",
    "response-content-disposition",
    "response-content-encoding",
    "response-content-language",
    "response-content-type",
    "response-expires",
    "restore",
    "select",
    "select-type",
    "storageClass",
    "tagging",
    "torrent",
    "uploadId",
    "uploads",
    "versionId",
    "versioning",
    "versions",
    "website",
};

static int is_subresource(const char *name)
{
    for (size_t i = 0; i < sizeof(subresources) / sizeof(subresources[0]); i++)
        if (strcmp(name, subresources[i]) == 0)
            return 1;
    return 0;
}

struct param {
    char *name, *value; /* decoded; value NULL when the parameter has no '=' */
};

struct query {
    char *buf; /* the decoded copy the params point into */
    struct param p[MAX_QPARAMS];
    unsigned n;
};

/* Percent-decode s[0..n) into out (n + 1 bytes at least), NUL-ended; '+'
 * stays '+' (base64 signatures hold it). -1 on a NUL in it. */
static int decode(const char *s, size_t n, char *out)
{
    size_t o = rio__s3_pct_decode(s, n, 0, out);

    if (memchr(out, '\0', o))
        return -1;
    out[o] = '\0';
    return 0;
}

/* 0, -EINVAL (too long, too many parameters, a NUL), -ENOMEM. */
static int query_parse(const char *raw, struct query *q)
{
    size_t n = strlen(raw), off = 0;
    const char *s = raw;

    memset(q, 0, sizeof(*q));
    if (n > MAX_QUERY)
        return -EINVAL;
    q->buf = rio__malloc(2 * n + 2);
    if (!q->buf)
        return -ENOMEM;
    while (*s) {
        size_t len = strcspn(s, "&");
        const char *eq = memchr(s, '=', len);
        size_t nl = eq ? (size_t)(eq - s) : len;
        if (len) {
            struct param *p = &q->p[q->n];
            if (q->n == MAX_QPARAMS)
                return -EINVAL;
            p->name = q->buf + off;
            if (decode(s, nl, p->name) < 0)
                return -EINVAL;
            off += strlen(p->name) + 1;
            if (eq) {
                p->value = q->buf + off;
                if (decode(eq + 1, len - nl - 1, p->value) < 0)
                    return -EINVAL;
                off += strlen(p->value) + 1;
            }
            q->n++;
        }
        s += len;
        if (*s == '&')
            s++;
    }
    return 0;
}

/* The value of name in q ("" for a bare name), NULL when absent; *count how
 * many times it is there. */
static const char *query_get(const struct query *q, const char *name, unsigned *count)
{
    const char *v = NULL;
    unsigned c = 0;

    for (unsigned i = 0; i < q->n; i++)
        if (strcmp(q->p[i].name, name) == 0) {
            if (!c)
                v = q->p[i].value ? q->p[i].value : "";
            c++;
        }
    *count = c;
    return v;
}

int rio_s3_is_v2(const struct rio_s3_req *r)
{
    const char *auth = rio__s3_hdr_find(r, "authorization", NULL);
    const char *s = r->query;

    if (auth && strncmp(auth, "AWS ", 4) == 0)
        return 1;
    /* A presigned URL: AWSAccessKeyId and Signature among the parameters
     * (by their raw names: neither needs escaping). */
    int ak = 0, sig = 0;
    while (s && *s) {
        size_t len = strcspn(s, "&");
        ak |= (len >= 15 && strncmp(s, "AWSAccessKeyId=", 15) == 0);
        sig |= (len >= 10 && strncmp(s, "Signature=", 10) == 0);
        s += len;
        if (*s == '&')
            s++;
    }
    return ak && sig;
}

/* An RFC 7231 date ("Fri, 24 May 2013 00:00:00 GMT"; s3cmd writes
 * "+0000") to unix seconds, -1 when it is not one. */
static int64_t parse_date(const char *v)
{
    struct tm tm;
    const char *e;

    memset(&tm, 0, sizeof(tm));
    e = strptime(v, "%a, %d %b %Y %H:%M:%S", &tm);
    if (!e || (strcmp(e, " GMT") != 0 && strcmp(e, " +0000") != 0 && strcmp(e, " UTC") != 0))
        return -1;
    return (int64_t)timegm(&tm);
}

struct sts {
    char *p;
    size_t len;
    int over;
};

static void put(struct sts *s, const char *t, size_t n)
{
    if (s->over || n > MAX_STS - s->len) {
        s->over = 1;
        return;
    }
    memcpy(s->p + s->len, t, n);
    s->len += n;
}

static void puts_(struct sts *s, const char *t)
{
    put(s, t, strlen(t));
}

/* A header value as S3 signs it: without the blanks around it. */
static void put_trimmed(struct sts *s, const char *v)
{
    size_t n;

    while (*v == ' ' || *v == '\t')
        v++;
    n = strlen(v);
    while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
        n--;
    put(s, v, n);
}

struct amz {
    const char *name, *value;
};

/* The x-amz-* headers: "name:value[,value...]\n", names lower-case and
 * sorted, a name's values joined by ',' in the order they came. */
static int amz_headers(const struct rio_s3_req *r, struct sts *s)
{
    struct amz a[MAX_AMZ];
    size_t n = 0;

    for (size_t i = 0; i < r->nheaders; i++) {
        const char *hn = r->headers[i].name;
        if (!hn || !r->headers[i].value || strncasecmp(hn, "x-amz-", 6) != 0)
            continue;
        if (n == MAX_AMZ)
            return -1;
        a[n].name = hn;
        a[n++].value = r->headers[i].value;
    }
    /* insertion sort by name: stable, and n is small */
    for (size_t i = 1; i < n; i++) {
        struct amz t = a[i];
        size_t j = i;
        while (j && strcasecmp(a[j - 1].name, t.name) > 0) {
            a[j] = a[j - 1];
            j--;
        }
        a[j] = t;
    }
    for (size_t i = 0; i < n; i++) {
        if (i && strcasecmp(a[i - 1].name, a[i].name) == 0) {
            put(s, ",", 1);
        } else {
            if (i)
                put(s, "\n", 1);
            for (const char *c = a[i].name; *c; c++) {
                char l = (*c >= 'A' && *c <= 'Z') ? (char)(*c - 'A' + 'a') : *c;
                put(s, &l, 1);
            }
            put(s, ":", 1);
        }
        put_trimmed(s, a[i].value);
    }
    if (n)
        put(s, "\n", 1);
    return 0;
}

static int param_cmp(const void *a, const void *b)
{
    return strcmp(((const struct param *)a)->name, ((const struct param *)b)->name);
}

/* The canonical resource: path, then '?' and the signed subresources
 * sorted by name ("name" or "name=value", decoded, joined by '&'). */
static void resource(const char *path, const struct query *q, struct sts *s)
{
    struct param sub[MAX_QPARAMS];
    unsigned n = 0;

    puts_(s, path);
    for (unsigned i = 0; i < q->n; i++)
        if (is_subresource(q->p[i].name))
            sub[n++] = q->p[i];
    qsort(sub, n, sizeof(sub[0]), param_cmp);
    for (unsigned i = 0; i < n; i++) {
        put(s, i ? "&" : "?", 1);
        puts_(s, sub[i].name);
        if (sub[i].value) {
            put(s, "=", 1);
            puts_(s, sub[i].value);
        }
    }
}

/* base64(HMAC-SHA1(secret, sts)) into out (SIG_B64_LEN + 1). 0 or -1. */
static int sign(const char *secret, const struct sts *s, char out[SIG_B64_LEN + 1])
{
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int ml = 0;

    if (!HMAC(EVP_sha1(), secret, (int)strlen(secret), (const unsigned char *)s->p, s->len, mac,
              &ml) ||
        ml != 20)
        return -1;
    EVP_EncodeBlock((unsigned char *)out, mac, 20);
    OPENSSL_cleanse(mac, sizeof(mac));
    return 0;
}

int rio_s3_verify_v2(const struct rio_s3_keys *k, const struct rio_s3_req *r, const char *path,
                     int64_t now, struct rio_s3_auth *out, const char **s3_code)
{
    struct query q;
    struct sts s = {0};
    const char *auth, *secret, *sig = NULL, *date_line = "", *v;
    char ak[128], want[SIG_B64_LEN + 1] = "";
    unsigned na, nsig, nexp;
    int presigned, ret = 0, ok = 0;
    int64_t t = 0, expires = 0;

    memset(out, 0, sizeof(*out));
    memset(&q, 0, sizeof(q));
    *s3_code = NULL;
    rio__detail_clear();
    if (!r || !r->method || !path || !r->query || (r->nheaders && !r->headers)) {
        *s3_code = "InvalidRequest";
        return RIO_EINVAL;
    }
    ret = query_parse(r->query, &q);
    if (ret == -ENOMEM)
        REFUSE("InternalError", -ENOMEM, "s3 auth: out of memory");
    if (ret < 0)
        REFUSE("InvalidArgument", -EINVAL, "s3 auth: query too long or too many parameters");
    auth = rio__s3_hdr_find(r, "authorization", &na);
    presigned = query_get(&q, "AWSAccessKeyId", &nsig) != NULL;
    if (auth && presigned)
        REFUSE("InvalidArgument", -EINVAL,
               "s3 auth: both an Authorization header and a presigned query");
    if (na > 1)
        REFUSE("InvalidArgument", -EINVAL, "s3 auth: Authorization header twice");
    if (presigned) {
        const char *a = query_get(&q, "AWSAccessKeyId", &na), *e;
        char *end;
        sig = query_get(&q, "Signature", &nsig);
        e = query_get(&q, "Expires", &nexp);
        if (na != 1 || nsig != 1 || nexp != 1)
            REFUSE("AccessDenied", -EACCES,
                   "s3 auth: a SigV2 presigned URL needs AWSAccessKeyId, Signature and Expires "
                   "once each");
        if (!a[0] || strlen(a) >= sizeof(ak))
            REFUSE("InvalidAccessKeyId", -EACCES, "s3 auth: malformed AWSAccessKeyId");
        strcpy(ak, a);
        errno = 0;
        expires = strtoll(e, &end, 10);
        if (e[0] < '0' || e[0] > '9' || *end || errno || strlen(e) > 19)
            REFUSE("AccessDenied", -EACCES, "s3 auth: Expires is not a number of seconds");
        date_line = e;
    } else {
        const char *colon, *ad = rio__s3_hdr_find(r, "x-amz-date", &na), *d;
        unsigned nd;
        if (strncmp(auth, "AWS ", 4) != 0)
            REFUSE("InvalidArgument", -EINVAL, "s3 auth: Authorization is not AWS AK:SIGNATURE");
        colon = strrchr(auth + 4, ':');
        if (!colon || colon == auth + 4 || (size_t)(colon - (auth + 4)) >= sizeof(ak))
            REFUSE("InvalidArgument", -EINVAL, "s3 auth: Authorization is not AWS AK:SIGNATURE");
        memcpy(ak, auth + 4, (size_t)(colon - (auth + 4)));
        ak[colon - (auth + 4)] = '\0';
        sig = colon + 1;
        d = rio__s3_hdr_find(r, "date", &nd);
        if (na > 1 || nd > 1)
            REFUSE("AccessDenied", -EACCES, "s3 auth: a date header twice");
        /* With x-amz-date, it is the date (signed among the x-amz-*
         * headers) and Date's line is empty, as S3 reads SigV2. */
        if (ad) {
            t = parse_date(ad);
        } else if (d) {
            t = parse_date(d);
            date_line = d;
        }
        if (!(ad || d) || t < 0)
            REFUSE("AccessDenied", -EACCES,
                   "s3 auth: no valid x-amz-date or Date header (SigV2 needs one)");
    }
    for (const char *c = ak; *c; c++)
        if ((unsigned char)*c <= ' ' || (unsigned char)*c >= 0x7f)
            REFUSE("InvalidAccessKeyId", -EACCES, "s3 auth: malformed access key");
    v = rio__s3_hdr_find(r, "x-amz-content-sha256", NULL);
    if (v && strncmp(v, "STREAMING-", 10) == 0)
        REFUSE("InvalidRequest", -EINVAL, "s3 auth: aws-chunked bodies need SigV4");
    secret = rio__s3_keys_secret(k, ak);
    if (!secret)
        REFUSE("InvalidAccessKeyId", -EACCES, "s3 auth: unknown access key");
    if (strlen(sig) != SIG_B64_LEN)
        REFUSE("SignatureDoesNotMatch", -EACCES, "s3 auth: Signature is not a base64 SHA-1");

    s.p = rio__malloc(MAX_STS);
    if (!s.p)
        REFUSE("InternalError", -ENOMEM, "s3 auth: out of memory");
    puts_(&s, r->method);
    put(&s, "\n", 1);
    if ((v = rio__s3_hdr_find(r, "content-md5", NULL)))
        put_trimmed(&s, v);
    put(&s, "\n", 1);
    if ((v = rio__s3_hdr_find(r, "content-type", NULL)))
        put_trimmed(&s, v);
    put(&s, "\n", 1);
    puts_(&s, date_line);
    put(&s, "\n", 1);
    if (amz_headers(r, &s) < 0)
        REFUSE("InvalidArgument", -EINVAL, "s3 auth: too many x-amz-* headers");
    /* The resource: the path as sent; a bucket's ("/b", path style) is
     * "/b/" in S3's examples and botocore's signer, so that one too. */
    for (int alt = 0; !ok && alt < 2; alt++) {
        size_t head = s.len;
        if (alt && (path[0] != '/' || !path[1] || strchr(path + 1, '/')))
            break;
        puts_(&s, path);
        if (alt)
            put(&s, "/", 1);
        resource("", &q, &s);
        if (s.over)
            REFUSE("InvalidArgument", -EINVAL, "s3 auth: request too large to sign");
        if (sign(secret, &s, want) < 0)
            REFUSE("InternalError", -ENOMEM, "s3 auth: digest failed");
        ok = CRYPTO_memcmp(want, sig, SIG_B64_LEN) == 0;
        s.len = head;
    }
    if (!ok)
        REFUSE("SignatureDoesNotMatch", -EACCES,
               "s3 auth: signature does not match (SigV2, access key %s)", ak);

    /* Time after the signature: a stranger learns nothing about our clock. */
    if (presigned) {
        if (now > expires) {
            out->message = "Request has expired";
            REFUSE("AccessDenied", -EACCES, "s3 auth: Request has expired");
        }
    } else if (t - now > SKEW_S || now - t > SKEW_S) {
        REFUSE("RequestTimeTooSkewed", -EACCES,
               "s3 auth: request time too far from the server's (more than 15 minutes)");
    }
    snprintf(out->access_key, sizeof(out->access_key), "%s", ak);
    out->payload_mode = RIO_S3_PAYLOAD_UNSIGNED;
    ret = 0;
out:
    if (ret < 0) {
        const char *msg = out->message;
        OPENSSL_cleanse(out, sizeof(*out));
        out->message = msg;
    }
    OPENSSL_cleanse(want, sizeof(want));
    rio__free(s.p);
    rio__free(q.buf);
    return ret;
}
