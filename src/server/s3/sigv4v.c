/* SPDX-License-Identifier: Apache-2.0 */
/*
 * SigV4 verification for the S3 gateway: the Authorization header and
 * presigned URLs (see s3.h). The canonical request is rebuilt from what was
 * received and hashed with the s3:// signer's own pieces
 * (src/transport/s3/sign.c), so the gateway and the client cannot disagree on
 * SigV4 itself; what is here is reading the request: the Authorization
 * fields, the credential scope, the dates, and the canonical URI and query
 * as S3 forms them (the path encoded once, not twice; query parameters
 * decoded, re-encoded and sorted by name then value).
 *
 * Everything comes from the network: each field is bounded before use, and
 * a request that does not fit a bound is refused, never truncated.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* strptime, timegm */
#endif
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "core/url.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "transport/s3/sign.h"

#define ALGO "AWS4-HMAC-SHA256"
#define MAX_PATH 16384    /* bytes of a raw path */
#define MAX_QUERY 16384   /* bytes of a raw query */
#define MAX_QPARAMS 128   /* query parameters */
#define MAX_HVALUES 65536 /* bytes of every signed header value together */
#define SKEW_S 900        /* RequestTimeTooSkewed beyond this */
#define PRESIGN_MAX_S 604800

size_t rio__s3_pct_decode(const char *s, size_t n, int plus_space, char *out)
{
    size_t o = 0;

    for (size_t i = 0; i < n; i++) {
        int hi, lo;
        if (s[i] == '%' && i + 2 < n && (hi = rio__hex_digit(s[i + 1])) >= 0 &&
            (lo = rio__hex_digit(s[i + 2])) >= 0) {
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (plus_space && s[i] == '+') {
            out[o++] = ' ';
        } else {
            out[o++] = s[i];
        }
    }
    return o;
}

static int is_lower_hex64(const char *s)
{
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return s[64] == '\0';
}

/* "YYYYMMDDTHHMMSSZ" to unix seconds; -1 when it is not that. */
static int64_t parse_amzdate(const char *s)
{
    struct tm tm;

    if (strlen(s) != 16 || s[8] != 'T' || s[15] != 'Z')
        return -1;
    for (int i = 0; i < 15; i++)
        if (i != 8 && (s[i] < '0' || s[i] > '9'))
            return -1;
    memset(&tm, 0, sizeof(tm));
#define D2(o) ((s[o] - '0') * 10 + (s[o + 1] - '0'))
    tm.tm_year = D2(0) * 100 + D2(2) - 1900;
    tm.tm_mon = D2(4) - 1;
    tm.tm_mday = D2(6);
    tm.tm_hour = D2(9);
    tm.tm_min = D2(11);
    tm.tm_sec = D2(13);
#undef D2
    if (tm.tm_mon > 11 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 || tm.tm_min > 59 ||
        tm.tm_sec > 60)
        return -1;
    return (int64_t)timegm(&tm);
}

/* An RFC 7231 Date ("Fri, 24 May 2013 00:00:00 GMT") as an x-amz-date. */
static int date_to_amz(const char *v, char out[17])
{
    struct tm tm;
    const char *e;

    memset(&tm, 0, sizeof(tm));
    e = strptime(v, "%a, %d %b %Y %H:%M:%S GMT", &tm);
    if (!e || *e != '\0')
        return -1;
    if (strftime(out, 17, "%Y%m%dT%H%M%SZ", &tm) != 16)
        return -1;
    return 0;
}

const char *rio__s3_hdr_find(const struct rio_s3_req *r, const char *name, unsigned *count)
{
    const char *v = NULL;
    unsigned c = 0;

    for (size_t i = 0; i < r->nheaders; i++) {
        if (r->headers[i].name && r->headers[i].value &&
            strcasecmp(r->headers[i].name, name) == 0) {
            if (!v)
                v = r->headers[i].value;
            c++;
        }
    }
    if (count)
        *count = c;
    return v;
}

int rio__s3_cred_parse(const char *s, size_t n, struct rio__s3_cred *c)
{
    const char *p[5];
    size_t l[5];
    unsigned k = 0;
    size_t i = 0;

    while (k < 5) {
        const char *sl = memchr(s + i, '/', n - i);
        p[k] = s + i;
        l[k] = sl ? (size_t)(sl - (s + i)) : n - i;
        k++;
        if (!sl)
            break;
        i += l[k - 1] + 1;
    }
    if (k != 5 || p[4] + l[4] != s + n)
        return -1;
    if (l[0] == 0 || l[0] >= sizeof(c->ak) || l[1] != 8 || l[2] == 0 || l[2] >= sizeof(c->region) ||
        l[3] != 2 || memcmp(p[3], "s3", 2) != 0 || l[4] != 12 ||
        memcmp(p[4], "aws4_request", 12) != 0)
        return -1;
    for (size_t j = 0; j < 8; j++)
        if (p[1][j] < '0' || p[1][j] > '9')
            return -1;
    for (size_t j = 0; j < l[0]; j++)
        if ((unsigned char)p[0][j] <= ' ' || (unsigned char)p[0][j] >= 0x7f)
            return -1;
    for (size_t j = 0; j < l[2]; j++) {
        char ch = p[2][j];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '-' || ch == '_'))
            return -1;
    }
    memcpy(c->ak, p[0], l[0]);
    c->ak[l[0]] = '\0';
    memcpy(c->date, p[1], 8);
    c->date[8] = '\0';
    memcpy(c->region, p[2], l[2]);
    c->region[l[2]] = '\0';
    snprintf(c->scope, sizeof(c->scope), "%s/%s/s3/aws4_request", c->date, c->region);
    return 0;
}

/* ---------------------------------------------------------- the query */

struct qparam {
    char *name; /* canonical (encoded) */
    char *value;
};

struct query {
    struct qparam p[MAX_QPARAMS];
    unsigned n;
    char *buf; /* every encoded name and value */
    /* Decoded X-Amz-* values of a presigned URL (NULL when absent). */
    char *algo, *credential, *date, *expires, *signed_headers, *signature;
    char *canon; /* the canonical query string */
};

static void query_free(struct query *q)
{
    rio__free(q->buf);
    rio__free(q->canon);
}

/* Decoded value of an X-Amz-* parameter: a NUL-terminated copy in buf. */
static char **presign_slot(struct query *q, const char *name, size_t n)
{
    static const struct {
        const char *name;
        size_t off;
    } slots[] = {
        {"X-Amz-Algorithm", offsetof(struct query, algo)},
        {"X-Amz-Credential", offsetof(struct query, credential)},
        {"X-Amz-Date", offsetof(struct query, date)},
        {"X-Amz-Expires", offsetof(struct query, expires)},
        {"X-Amz-SignedHeaders", offsetof(struct query, signed_headers)},
        {"X-Amz-Signature", offsetof(struct query, signature)},
    };

    for (size_t i = 0; i < sizeof(slots) / sizeof(slots[0]); i++)
        if (strlen(slots[i].name) == n && memcmp(slots[i].name, name, n) == 0)
            return (char **)((char *)q + slots[i].off);
    return NULL;
}

static int qparam_cmp(const struct qparam *a, const struct qparam *b)
{
    int r = strcmp(a->name, b->name);
    return r ? r : strcmp(a->value, b->value);
}

/*
 * Split the raw query into parameters, decode each name and value, keep the
 * X-Amz-* ones a presigned URL needs, and build the canonical query: every
 * parameter but X-Amz-Signature, re-encoded, sorted by name then value,
 * "name=" for a parameter without a value. 0, -ENOMEM, or RIO_EINVAL (too
 * long, too many, or an X-Amz-* parameter twice).
 */
static int query_parse(const char *raw, struct query *q)
{
    size_t rl = strlen(raw), cap, o = 0, co = 0;
    char *tmp;

    memset(q, 0, sizeof(*q));
    if (rl > MAX_QUERY)
        return RIO_EINVAL;
    /* Each decoded byte re-encodes to at most 3; decoded X-Amz-* values
     * (at most rl bytes with their NULs) follow. */
    cap = 3 * rl + 2 * MAX_QPARAMS + rl + 8;
    q->buf = rio__malloc(cap);
    tmp = rio__malloc(rl + 1);
    if (!q->buf || !tmp) {
        rio__free(tmp);
        return -ENOMEM;
    }
    for (size_t i = 0; i < rl;) {
        const char *amp = memchr(raw + i, '&', rl - i);
        size_t l = amp ? (size_t)(amp - (raw + i)) : rl - i;
        const char *eq = memchr(raw + i, '=', l);
        size_t nl = eq ? (size_t)(eq - (raw + i)) : l;
        size_t dn, dv;
        char **slot;
        ssize_t w;

        if (l == 0) {
            i++;
            continue;
        }
        if (q->n == MAX_QPARAMS)
            goto err_inval;
        dn = rio__s3_pct_decode(raw + i, nl, 1, tmp);
        slot = presign_slot(q, tmp, dn);
        q->p[q->n].name = q->buf + o;
        w = rio__s3_uri_encode(tmp, dn, 0, q->buf + o, cap - o);
        if (w < 0)
            goto err_inval;
        o += (size_t)w + 1;
        dv = eq ? rio__s3_pct_decode(eq + 1, l - nl - 1, 1, tmp) : 0;
        q->p[q->n].value = q->buf + o;
        w = rio__s3_uri_encode(tmp, dv, 0, q->buf + o, cap - o);
        if (w < 0)
            goto err_inval;
        o += (size_t)w + 1;
        if (slot) {
            if (*slot || memchr(tmp, '\0', dv))
                goto err_inval;
            if (cap - o < dv + 1)
                goto err_inval;
            *slot = q->buf + o;
            memcpy(q->buf + o, tmp, dv);
            q->buf[o + dv] = '\0';
            o += dv + 1;
        }
        /* The signature signs everything but itself. */
        if (slot == &q->signature)
            q->p[q->n].name = NULL;
        else
            q->n++;
        i += l + 1;
    }
    rio__free(tmp);
    tmp = NULL;

    for (unsigned i = 1; i < q->n; i++) {
        struct qparam x = q->p[i];
        unsigned j = i;
        while (j > 0 && qparam_cmp(&q->p[j - 1], &x) > 0) {
            q->p[j] = q->p[j - 1];
            j--;
        }
        q->p[j] = x;
    }
    q->canon = rio__malloc(o + q->n + 1);
    if (!q->canon)
        return -ENOMEM;
    for (unsigned i = 0; i < q->n; i++) {
        size_t nl = strlen(q->p[i].name), vl = strlen(q->p[i].value);
        if (i)
            q->canon[co++] = '&';
        memcpy(q->canon + co, q->p[i].name, nl);
        co += nl;
        q->canon[co++] = '=';
        memcpy(q->canon + co, q->p[i].value, vl);
        co += vl;
    }
    q->canon[co] = '\0';
    return 0;
err_inval:
    rio__free(tmp);
    return RIO_EINVAL;
}

/* ------------------------------------------------------ signed headers */

struct signed_hdrs {
    struct rio_s3_kv kv[RIO_S3_MAX_VERIFIED];
    char names[RIO_S3_MAX_VERIFIED * 64];
    unsigned n;
    char *values; /* MAX_HVALUES bytes */
    int has_host, has_amzdate, has_date;
};

/*
 * SignedHeaders ("host;range;x-amz-date"): the names, and each one's value as
 * SigV4 signs it: every header of that name, its value trimmed and inner runs
 * of blanks made one space, joined with ','. A signed header the request does
 * not carry fails the signature (-ENOENT); a malformed list is RIO_EINVAL.
 */
static int signed_hdrs_build(const struct rio_s3_req *r, const char *list, struct signed_hdrs *sh)
{
    size_t ll = strlen(list), no = 0, vo = 0;

    sh->n = 0;
    if (ll == 0 || ll >= sizeof(sh->names))
        return RIO_EINVAL;
    memcpy(sh->names, list, ll + 1);
    for (size_t i = 0; i <= ll; i++) {
        if (sh->names[i] != ';' && sh->names[i] != '\0') {
            char c = sh->names[i];
            if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
                  c == '.'))
                return RIO_EINVAL;
            continue;
        }
        if (i == no || sh->n == RIO_S3_MAX_VERIFIED)
            return RIO_EINVAL;
        sh->names[i] = '\0';
        sh->kv[sh->n].k = sh->names + no;
        sh->n++;
        no = i + 1;
    }
    for (unsigned j = 0; j < sh->n; j++) {
        const char *name = sh->kv[j].k;
        size_t start = vo;
        int found = 0;

        sh->has_host |= strcmp(name, "host") == 0;
        sh->has_amzdate |= strcmp(name, "x-amz-date") == 0;
        sh->has_date |= strcmp(name, "date") == 0;
        for (size_t i = 0; i < r->nheaders; i++) {
            const char *v = r->headers[i].value;
            int blank = 0;

            if (!r->headers[i].name || !v || strcasecmp(r->headers[i].name, name) != 0)
                continue;
            if (found++) {
                if (vo + 1 >= MAX_HVALUES)
                    return RIO_EINVAL;
                sh->values[vo++] = ',';
            }
            while (*v == ' ' || *v == '\t')
                v++;
            for (; *v; v++) {
                if (*v == ' ' || *v == '\t') {
                    blank = 1;
                    continue;
                }
                if (vo + 2 >= MAX_HVALUES)
                    return RIO_EINVAL;
                if (blank)
                    sh->values[vo++] = ' ';
                blank = 0;
                sh->values[vo++] = *v;
            }
        }
        if (!found)
            return -ENOENT;
        sh->values[vo++] = '\0';
        sh->kv[j].v = sh->values + start;
    }
    return 0;
}

/* ----------------------------------------------------------- verify */

/* The canonical URI candidates: the path decoded and encoded once as SigV4
 * does for S3 ('/' kept), and, when it differs, the path exactly as sent (a
 * client that encoded more or less than SigV4 asks signs what it sent). */
static int canon_uri(const char *path, char **enc)
{
    size_t pl = strlen(path), dl;
    char *dec;

    *enc = NULL;
    if (pl > MAX_PATH)
        return RIO_EINVAL;
    dec = rio__malloc(pl + 1);
    *enc = rio__malloc(3 * pl + 2);
    if (!dec || !*enc) {
        rio__free(dec);
        rio__free(*enc);
        *enc = NULL;
        return -ENOMEM;
    }
    dl = rio__s3_pct_decode(path, pl, 0, dec);
    if (dl == 0) {
        strcpy(*enc, "/");
    } else if (rio__s3_uri_encode(dec, dl, 1, *enc, 3 * pl + 2) < 0) {
        rio__free(dec);
        rio__free(*enc);
        *enc = NULL;
        return RIO_EINVAL;
    }
    rio__free(dec);
    return 0;
}

/* Hex signature of the request under key, for one canonical URI. */
static int compute_sig(EVP_MD_CTX *m, const struct rio_s3_req *r, const char *uri,
                       const char *cquery, struct signed_hdrs *sh, const char *payload,
                       const char *amzdate, const char *scope, const uint8_t key[32],
                       char signed_names[], size_t sncap, char sig[65])
{
    char creq[65], sts[256];
    int w;

    if (rio__s3_canon_hash(m, r->method, uri, cquery, sh->kv, sh->n, payload, signed_names, sncap,
                           creq))
        return -1;
    w = snprintf(sts, sizeof(sts), ALGO "\n%s\n%s\n%s", amzdate, scope, creq);
    if (w < 0 || (size_t)w >= sizeof(sts))
        return -1;
    return rio__s3_sign_sts(m, key, sts, sig);
}

/* "Credential=..., SignedHeaders=..., Signature=..." after the algorithm:
 * pointers into v and lengths. 0, or -1 when a field is missing, repeated
 * or unknown. */
static int parse_auth_fields(const char *v, const char **f, size_t *fl)
{
    static const char *const names[3] = {"Credential=", "SignedHeaders=", "Signature="};

    f[0] = f[1] = f[2] = NULL;
    while (*v) {
        int k;
        size_t l;

        while (*v == ' ' || *v == ',')
            v++;
        if (!*v)
            break;
        for (k = 0; k < 3; k++)
            if (strncmp(v, names[k], strlen(names[k])) == 0)
                break;
        if (k == 3 || f[k])
            return -1;
        v += strlen(names[k]);
        l = strcspn(v, ", ");
        f[k] = v;
        fl[k] = l;
        v += l;
    }
    return f[0] && f[1] && f[2] ? 0 : -1;
}

/* x-amz-trailer (once, an x-amz-checksum-* other than MD5) into
 * out->trailer, lower-case; 0, or -1 when it is not one. */
static int trailer_of(const struct rio_s3_req *r, struct rio_s3_auth *out)
{
    unsigned nt;
    const char *tr = rio__s3_hdr_find(r, "x-amz-trailer", &nt);

    if (!tr)
        return 0;
    while (*tr == ' ')
        tr++;
    if (nt > 1 || strlen(tr) >= sizeof(out->trailer) || rio__s3_algo_of(tr) < 0 ||
        rio__s3_algo_of(tr) == RIO__S3_MD5 || rio__s3_algo_of(tr) == RIO__S3_SHA256HEX)
        return -1;
    for (size_t i = 0; tr[i]; i++)
        out->trailer[i] = (char)((tr[i] >= 'A' && tr[i] <= 'Z') ? tr[i] + 32 : tr[i]);
    return 0;
}

int rio_s3_anon_payload(const struct rio_s3_req *r, struct rio_s3_auth *out, const char **s3_code)
{
    unsigned nd;
    const char *payload = rio__s3_hdr_find(r, "x-amz-content-sha256", &nd);
    int ret = 0;

    out->payload_mode = RIO_S3_PAYLOAD_UNSIGNED;
    if (!payload || strncmp(payload, "STREAMING-", 10) != 0)
        return 0;
    if (nd > 1)
        REFUSE("InvalidArgument", -EINVAL, "s3 auth: x-amz-content-sha256 twice");
    if (strcmp(payload, "STREAMING-UNSIGNED-PAYLOAD-TRAILER") != 0)
        REFUSE("AccessDenied", -EACCES,
               "s3 auth: a signed aws-chunked body in a request without a signature");
    out->payload_mode = RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
    if (trailer_of(r, out) < 0)
        REFUSE("InvalidRequest", -EINVAL, "s3 auth: x-amz-trailer is not an x-amz-checksum-*");
out:
    return ret;
}

int rio_s3_verify(const struct rio_s3_keys *k, const struct rio_s3_req *r, int64_t now,
                  struct rio_s3_auth *out, const char **s3_code)
{
    struct query q;
    struct signed_hdrs *sh = NULL;
    struct rio__s3_cred c;
    EVP_MD_CTX *m = NULL;
    const char *auth, *secret, *payload, *sigp = NULL, *amzp;
    char amzdate[17], sig[65], list[RIO_S3_MAX_VERIFIED * 64], names[RIO_S3_MAX_VERIFIED * 64];
    char *uri = NULL;
    uint8_t key[32];
    unsigned nauth = 0;
    int presigned, ret = 0, ok, no_payload_hdr = 0;
    int64_t t, expires = 0;

    memset(out, 0, sizeof(*out));
    memset(&q, 0, sizeof(q));
    *s3_code = NULL;
    rio__detail_clear();
    if (!r || !r->method || !r->path || !r->query || (r->nheaders && !r->headers)) {
        *s3_code = "InvalidRequest";
        return RIO_EINVAL;
    }
    ret = query_parse(r->query, &q);
    if (ret == -ENOMEM)
        REFUSE("InternalError", -ENOMEM, "s3 auth: out of memory");
    if (ret < 0)
        REFUSE("AuthorizationQueryParametersError", -EINVAL,
               "s3 auth: query too long, too many parameters or an X-Amz- parameter twice");
    auth = rio__s3_hdr_find(r, "authorization", &nauth);
    presigned = q.algo || q.credential || q.signature;
    if (auth && presigned)
        REFUSE("InvalidArgument", -EINVAL,
               "s3 auth: both an Authorization header and a presigned query");
    if (nauth > 1)
        REFUSE("AuthorizationHeaderMalformed", -EINVAL, "s3 auth: Authorization header twice");

    if (!auth && !presigned) {
        if (!rio__s3_keys_anon(k))
            REFUSE("AccessDenied", -EACCES, "s3 auth: unsigned request, anonymous access off");
        out->anonymous = 1;
        ret = rio_s3_anon_payload(r, out, s3_code);
        goto out;
    }

    if (presigned) {
        if (!q.algo || !q.credential || !q.date || !q.expires || !q.signed_headers || !q.signature)
            REFUSE("AuthorizationQueryParametersError", -EINVAL,
                   "s3 auth: presigned URL without every X-Amz- parameter");
        if (strcmp(q.algo, ALGO) != 0)
            REFUSE("AuthorizationQueryParametersError", -EINVAL,
                   "s3 auth: X-Amz-Algorithm is not " ALGO);
        if (rio__s3_cred_parse(q.credential, strlen(q.credential), &c))
            REFUSE("AuthorizationQueryParametersError", -EINVAL,
                   "s3 auth: malformed X-Amz-Credential");
        {
            char *e;
            long long x;
            errno = 0;
            x = strtoll(q.expires, &e, 10);
            if (errno || e == q.expires || *e || q.expires[0] < '0' || q.expires[0] > '9' ||
                x < 1 || x > PRESIGN_MAX_S)
                REFUSE("AuthorizationQueryParametersError", -EINVAL,
                       "s3 auth: X-Amz-Expires must be 1 to 604800 seconds");
            expires = x;
        }
        if (strlen(q.signed_headers) >= sizeof(list))
            REFUSE("AuthorizationQueryParametersError", -EINVAL,
                   "s3 auth: X-Amz-SignedHeaders too long");
        strcpy(list, q.signed_headers);
        sigp = q.signature;
        amzp = q.date;
        if (strlen(amzp) >= sizeof(amzdate) || parse_amzdate(amzp) < 0)
            REFUSE("AuthorizationQueryParametersError", -EINVAL,
                   "s3 auth: X-Amz-Date is not YYYYMMDDTHHMMSSZ");
        strcpy(amzdate, amzp);
        payload = RIO_S3_UNSIGNED;
    } else {
        const char *f[3];
        size_t fl[3];
        unsigned nd;

        if (strncmp(auth, ALGO " ", strlen(ALGO) + 1) != 0)
            REFUSE("AuthorizationHeaderMalformed", -EINVAL,
                   "s3 auth: Authorization is not " ALGO " (SigV2 is not supported)");
        if (parse_auth_fields(auth + strlen(ALGO) + 1, f, fl))
            REFUSE(
                "AuthorizationHeaderMalformed", -EINVAL,
                "s3 auth: Authorization needs Credential, SignedHeaders and Signature once each");
        if (rio__s3_cred_parse(f[0], fl[0], &c))
            REFUSE("AuthorizationHeaderMalformed", -EINVAL,
                   "s3 auth: malformed Credential (AK/YYYYMMDD/REGION/s3/aws4_request)");
        if (fl[1] >= sizeof(list))
            REFUSE("AuthorizationHeaderMalformed", -EINVAL, "s3 auth: SignedHeaders too long");
        memcpy(list, f[1], fl[1]);
        list[fl[1]] = '\0';
        if (fl[2] != 64)
            REFUSE("SignatureDoesNotMatch", -EACCES, "s3 auth: Signature is not 64 hex characters");
        memcpy(sig, f[2], 64);
        sig[64] = '\0';
        sigp = sig;
        amzp = rio__s3_hdr_find(r, "x-amz-date", &nd);
        if (amzp) {
            if (nd > 1 || strlen(amzp) >= sizeof(amzdate) || parse_amzdate(amzp) < 0)
                REFUSE("AccessDenied", -EACCES, "s3 auth: x-amz-date is not YYYYMMDDTHHMMSSZ");
            strcpy(amzdate, amzp);
        } else {
            const char *d = rio__s3_hdr_find(r, "date", &nd);
            if (!d || nd > 1 || date_to_amz(d, amzdate))
                REFUSE("AccessDenied", -EACCES,
                       "s3 auth: no valid x-amz-date or Date header (SigV4 needs one)");
        }
        payload = rio__s3_hdr_find(r, "x-amz-content-sha256", &nd);
        /* S3 asks for x-amz-content-sha256; curl --aws-sigv4 (before 8.x)
         * does not send it and signs the empty payload's hash. Such a
         * request is taken with its body unsigned, as UNSIGNED-PAYLOAD is. */
        if (!payload) {
            payload = RIO_S3_EMPTY_SHA256;
            no_payload_hdr = 1;
        }
        if (nd > 1)
            REFUSE("InvalidArgument", -EINVAL, "s3 auth: x-amz-content-sha256 twice");
    }
    if (memcmp(c.date, amzdate, 8) != 0)
        REFUSE(presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed",
               -EINVAL, "s3 auth: the credential's date is not the request's date");
    secret = rio__s3_keys_secret(k, c.ak);
    if (!secret)
        REFUSE("InvalidAccessKeyId", -EACCES, "s3 auth: unknown access key");

    if (strcmp(payload, RIO_S3_UNSIGNED) == 0 || no_payload_hdr) {
        out->payload_mode = RIO_S3_PAYLOAD_UNSIGNED;
    } else if (strcmp(payload, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD") == 0) {
        out->payload_mode = RIO_S3_PAYLOAD_STREAMING;
    } else if (strcmp(payload, "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER") == 0) {
        out->payload_mode = RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER;
    } else if (strcmp(payload, "STREAMING-UNSIGNED-PAYLOAD-TRAILER") == 0) {
        out->payload_mode = RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
    } else if (strlen(payload) == 64 && is_lower_hex64(payload)) {
        out->payload_mode = RIO_S3_PAYLOAD_SIGNED;
        memcpy(out->payload_sha256, payload, 65);
    } else if (strncmp(payload, "STREAMING-", 10) == 0) {
        REFUSE("NotImplemented", -ENOTSUP,
               "s3 auth: this aws-chunked mode (x-amz-content-sha256) is not supported");
    } else {
        REFUSE("InvalidArgument", -EINVAL,
               "s3 auth: x-amz-content-sha256 is neither a SHA-256 nor a known mode");
    }

    if (trailer_of(r, out) < 0)
        REFUSE("InvalidRequest", -EINVAL, "s3 auth: x-amz-trailer is not an x-amz-checksum-*");

    sh = rio__calloc(1, sizeof(*sh));
    if (sh)
        sh->values = rio__malloc(MAX_HVALUES);
    if (!sh || !sh->values)
        REFUSE("InternalError", -ENOMEM, "s3 auth: out of memory");
    ret = signed_hdrs_build(r, list, sh);
    if (ret == -ENOENT)
        REFUSE("SignatureDoesNotMatch", -EACCES, "s3 auth: a signed header is not in the request");
    if (ret < 0)
        REFUSE(presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed",
               -EINVAL, "s3 auth: malformed or too long a signed header list");
    if (!sh->has_host)
        REFUSE(presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed",
               -EINVAL, "s3 auth: host is not a signed header");
    if (!presigned && !(rio__s3_hdr_find(r, "x-amz-date", NULL) ? sh->has_amzdate : sh->has_date))
        REFUSE("AuthorizationHeaderMalformed", -EINVAL,
               "s3 auth: the request's date header is not signed");
    if (strlen(sigp) != 64 || !is_lower_hex64(sigp))
        REFUSE("SignatureDoesNotMatch", -EACCES, "s3 auth: Signature is not 64 hex characters");

    ret = canon_uri(r->path, &uri);
    if (ret == -ENOMEM)
        REFUSE("InternalError", -ENOMEM, "s3 auth: out of memory");
    if (ret < 0)
        REFUSE("InvalidRequest", -EINVAL, "s3 auth: path too long");

    m = EVP_MD_CTX_new();
    if (!m || rio__s3_signing_key(m, secret, c.date, c.region, "s3", key))
        REFUSE("InternalError", -ENOMEM, "s3 auth: digest failed");
    if (compute_sig(m, r, uri, q.canon, sh, payload, amzdate, c.scope, key, names, sizeof(names),
                    out->seed_signature))
        REFUSE("InternalError", -ENOMEM, "s3 auth: digest failed");
    if (strcmp(names, list) != 0)
        REFUSE(presigned ? "AuthorizationQueryParametersError" : "AuthorizationHeaderMalformed",
               -EINVAL, "s3 auth: SignedHeaders not sorted, or a name twice");
    ok = CRYPTO_memcmp(out->seed_signature, sigp, 64) == 0;
    /* Then the forms some clients sign instead: the path as sent, and (in an
     * Authorization header) the query as sent, unsorted and not re-encoded
     * (curl --aws-sigv4 before 8.x). Each still covers exactly the bytes on
     * the wire. */
    for (int alt = 1; !ok && alt < 4; alt++) {
        const char *u = alt & 1 ? r->path : uri, *qs = alt & 2 ? r->query : q.canon;
        if ((alt & 1) && (!r->path[0] || strcmp(uri, r->path) == 0))
            continue;
        if ((alt & 2) && (presigned || strcmp(q.canon, r->query) == 0))
            continue;
        if (compute_sig(m, r, u, qs, sh, payload, amzdate, c.scope, key, names, sizeof(names),
                        out->seed_signature))
            REFUSE("InternalError", -ENOMEM, "s3 auth: digest failed");
        ok = CRYPTO_memcmp(out->seed_signature, sigp, 64) == 0;
    }
    if (!ok)
        REFUSE("SignatureDoesNotMatch", -EACCES,
               "s3 auth: signature does not match (access key %s)", c.ak);
    /* Every x-amz-* header of the request is signed, as S3 asks: else
     * whoever holds a presigned URL (or sits between a client and us)
     * could add one that changes what the request does, x-amz-copy-source
     * turning an upload into a copy of another object, x-amz-meta-* adding
     * metadata. A presigned URL's x-amz-content-sha256 is let through: its
     * payload is unsigned whatever that header says, and it is not read. */
    for (size_t i = 0; i < r->nheaders; i++) {
        const char *hn = r->headers[i].name;
        unsigned j = 0;
        if (!hn || strncasecmp(hn, "x-amz-", 6) != 0 ||
            (presigned && strcasecmp(hn, "x-amz-content-sha256") == 0))
            continue;
        while (j < sh->n && strcasecmp(sh->kv[j].k, hn) != 0)
            j++;
        if (j == sh->n) {
            out->message = "There were headers present in the request which were not signed.";
            REFUSE("AccessDenied", -EACCES,
                   "s3 auth: There were headers present in the request which were not signed "
                   "(%.64s): every x-amz-* header must be signed",
                   hn);
        }
    }

    /* Time after the signature: a stranger learns nothing about our clock. */
    t = parse_amzdate(amzdate);
    if (presigned) {
        if (t - now > SKEW_S)
            REFUSE("AccessDenied", -EACCES, "s3 auth: presigned URL not yet valid");
        if (now > t + expires) {
            out->message = "Request has expired"; /* S3's words, as SigV2's */
            REFUSE("AccessDenied", -EACCES, "s3 auth: Request has expired");
        }
    } else if (t - now > SKEW_S || now - t > SKEW_S) {
        REFUSE("RequestTimeTooSkewed", -EACCES,
               "s3 auth: request time too far from the server's (more than 15 minutes)");
    }

    snprintf(out->access_key, sizeof(out->access_key), "%s", c.ak);
    memcpy(out->signing_key, key, sizeof(key));
    memcpy(out->amz_date, amzdate, sizeof(amzdate));
    snprintf(out->scope, sizeof(out->scope), "%s", c.scope);
    ret = 0;
out:
    OPENSSL_cleanse(key, sizeof(key));
    if (ret < 0) {
        const char *msg = out->message;
        OPENSSL_cleanse(out, sizeof(*out));
        out->message = msg;
    }
    if (m)
        EVP_MD_CTX_free(m);
    rio__free(uri);
    if (sh)
        rio__free(sh->values);
    rio__free(sh);
    query_free(&q);
    return ret;
}

int rio_s3_status_of(const char *s3_code)
{
    static const struct {
        const char *code;
        int status;
    } t[] = {
        {"AccessDenied", 403},
        {"SignatureDoesNotMatch", 403},
        {"InvalidAccessKeyId", 403},
        {"RequestTimeTooSkewed", 403},
        {"AuthorizationHeaderMalformed", 400},
        {"AuthorizationQueryParametersError", 400},
        {"InvalidRequest", 400},
        {"InvalidArgument", 400},
        {"XAmzContentSHA256Mismatch", 400},
        {"BadDigest", 400},
        {"InvalidDigest", 400},
        {"IncompleteBody", 400},
        {"NotImplemented", 501},
        {"InternalError", 500},
    };

    for (size_t i = 0; s3_code && i < sizeof(t) / sizeof(t[0]); i++)
        if (strcmp(t[i].code, s3_code) == 0)
            return t[i].status;
    return 403;
}
