/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A ListObjectsV2 answer (ListBucketResult) read from hostile bytes: each
 * <Contents> (Key, Size, LastModified, ETag) and each <CommonPrefixes>
 * (Prefix) handed to a callback in document order, and IsTruncated and
 * NextContinuationToken. A small bounded XML reader, not a general one: no
 * DOCTYPE, no CDATA, at most LX_DEPTH levels, the five predefined entities
 * and character references decoded, keys percent-decoded when the answer
 * says <EncodingType>url</EncodingType>. Every field is decoded into a
 * fixed buffer and refused when longer. No allocation, no libcurl
 * (tests/unit/test_s3_parse.c, tests/fuzz/fuzz_s3xml.c).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "core/url.h"
#include "railio.h"
#include "transport/s3/parse.h"

#define LX_DEPTH 8

struct lx {
    const char *p, *end;
    unsigned depth;
    const char *name[LX_DEPTH];
    size_t nlen[LX_DEPTH];
    const char *text[LX_DEPTH]; /* where the element's content starts */
    bool child[LX_DEPTH];       /* it has an element inside */
    /* the answer being read */
    bool pass_items; /* second pass: items, with url known */
    bool url;        /* EncodingType url */
    bool saw_enc;
    bool saw_trunc; /* IsTruncated was there */
    struct rio_s3_list_result *res;
    struct rio_s3_list_item it;
    bool in_item, have_key, have_size, have_mtime, have_etag;
    int (*cb)(void *arg, const struct rio_s3_list_item *it);
    void *arg;
};

static bool name_is(const char *n, size_t l, const char *want)
{
    return l == strlen(want) && memcmp(n, want, l) == 0;
}

static int put_utf8(uint32_t c, char *out, size_t cap, size_t *o)
{
    char b[4];
    size_t n;

    if (c == 0 || c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
        return -1;
    if (c < 0x80) {
        b[0] = (char)c;
        n = 1;
    } else if (c < 0x800) {
        b[0] = (char)(0xC0 | (c >> 6));
        b[1] = (char)(0x80 | (c & 0x3F));
        n = 2;
    } else if (c < 0x10000) {
        b[0] = (char)(0xE0 | (c >> 12));
        b[1] = (char)(0x80 | ((c >> 6) & 0x3F));
        b[2] = (char)(0x80 | (c & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (c >> 18));
        b[1] = (char)(0x80 | ((c >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((c >> 6) & 0x3F));
        b[3] = (char)(0x80 | (c & 0x3F));
        n = 4;
    }
    if (cap - *o <= n)
        return -1;
    memcpy(out + *o, b, n);
    *o += n;
    return 0;
}

/* XML text s[0..n) decoded into out (cap > 0, NUL-terminated): -1 when
 * it does not fit, holds a NUL, or an entity is malformed. */
static int xml_decode(const char *s, size_t n, char *out, size_t cap, size_t *outlen)
{
    size_t o = 0, i = 0;

    while (i < n) {
        uint32_t c;

        if (s[i] == '&') {
            const char *semi = memchr(s + i, ';', n - i < 12 ? n - i : 12);
            size_t el;

            if (!semi)
                return -1;
            el = (size_t)(semi - (s + i)) + 1;
            if (el == 5 && !memcmp(s + i, "&amp;", 5))
                c = '&';
            else if (el == 4 && !memcmp(s + i, "&lt;", 4))
                c = '<';
            else if (el == 4 && !memcmp(s + i, "&gt;", 4))
                c = '>';
            else if (el == 6 && !memcmp(s + i, "&quot;", 6))
                c = '"';
            else if (el == 6 && !memcmp(s + i, "&apos;", 6))
                c = '\'';
            else if (el > 3 && s[i + 1] == '#') {
                bool hex = s[i + 2] == 'x';
                size_t j = i + 2 + (hex ? 1 : 0);
                c = 0;
                if (j >= i + el - 1)
                    return -1;
                for (; j < i + el - 1; j++) {
                    int d =
                        hex ? rio__hex_digit(s[j]) : (s[j] >= '0' && s[j] <= '9' ? s[j] - '0' : -1);
                    if (d < 0 || c > 0x10FFFF)
                        return -1;
                    c = c * (hex ? 16u : 10u) + (uint32_t)d;
                }
            } else {
                return -1;
            }
            i += el;
            if (put_utf8(c, out, cap, &o) < 0)
                return -1;
            continue;
        }
        if (s[i] == '\0' || cap - o <= 1)
            return -1;
        out[o++] = s[i++];
    }
    out[o] = '\0';
    *outlen = o;
    return 0;
}

/*
 * A key or prefix: XML text s[0..n) decoded, then percent-decoded ('+' is
 * a space, as AWS writes it) when url, into out (RIO_KEY_MAX + 1 bytes).
 * -1 when longer than RIO_KEY_MAX, holding a NUL, or malformed.
 */
static int key_decode(const char *s, size_t n, bool url, char *out, size_t *outlen)
{
    char tmp[3 * RIO_KEY_MAX + 1];
    size_t tl, w = 0;

    if (!url)
        return xml_decode(s, n, out, RIO_KEY_MAX + 1, outlen);
    if (xml_decode(s, n, tmp, sizeof(tmp), &tl) < 0)
        return -1;
    for (size_t r = 0; r < tl; r++) {
        char c = tmp[r];

        if (c == '%') {
            int h1 = r + 2 < tl ? rio__hex_digit(tmp[r + 1]) : -1;
            int h2 = h1 >= 0 ? rio__hex_digit(tmp[r + 2]) : -1;
            if (h1 < 0 || h2 < 0 || (h1 | h2) == 0)
                return -1;
            c = (char)(h1 * 16 + h2);
            r += 2;
        } else if (c == '+') {
            c = ' ';
        }
        if (w == RIO_KEY_MAX)
            return -1;
        out[w++] = c;
    }
    out[w] = '\0';
    *outlen = w;
    return 0;
}

static bool is_leap(int64_t y)
{
    return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

/* Days from 1970-01-01 to y-m-d (proleptic Gregorian). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d)
{
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? (unsigned)-3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static int digits(const char *s, size_t n, unsigned *out)
{
    unsigned v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    *out = v;
    return 0;
}

int rio__s3_parse_iso8601(const char *s, int64_t *ns)
{
    static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    unsigned y, mo, d, h, mi, sec, frac = 0, fd = 0;
    size_t n = strlen(s), i = 19;
    int64_t days, t;

    if (n < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') || s[13] != ':' ||
        s[16] != ':' || digits(s, 4, &y) < 0 || digits(s + 5, 2, &mo) < 0 ||
        digits(s + 8, 2, &d) < 0 || digits(s + 11, 2, &h) < 0 || digits(s + 14, 2, &mi) < 0 ||
        digits(s + 17, 2, &sec) < 0)
        return -1;
    if (s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (fd == 9)
                return -1;
            frac = frac * 10 + (unsigned)(s[i] - '0');
            fd++;
        }
        if (!fd)
            return -1;
        for (; fd < 9; fd++)
            frac *= 10;
    }
    if (i + 1 != n || (s[i] != 'Z' && s[i] != 'z'))
        return -1;
    if (y < 1678 || y > 2261 || mo < 1 || mo > 12 || d < 1 ||
        d > mdays[mo - 1] + (mo == 2 && is_leap(y)) || h > 23 || mi > 59 || sec > 60)
        return -1;
    days = days_from_civil(y, mo, d);
    t = ((days * 24 + h) * 60 + mi) * 60 + sec;
    /* 1678..2261 keeps t * 1e9 inside int64 only within the epoch range:
     * check the product. */
    if (__builtin_mul_overflow(t, (int64_t)1000000000, &t) ||
        __builtin_add_overflow(t, (int64_t)frac, &t))
        return -1;
    *ns = t;
    return 0;
}

/* A field an item holds once, short (a size, a date): b[0..len) as a
 * string in tmp. -1 when seen before, empty or too long. */
static int leaf_once(bool *seen, const char *b, size_t len, char *tmp, size_t cap)
{
    if (*seen || len == 0 || len >= cap)
        return -1;
    *seen = true;
    memcpy(tmp, b, len);
    tmp[len] = '\0';
    return 0;
}

/* A leaf element closed: its text is [b, e). */
static int lx_leaf(struct lx *x, const char *b, const char *e)
{
    unsigned d = x->depth - 1; /* the leaf's level */
    const char *pn = d ? x->name[d - 1] : NULL;
    size_t pl = d ? x->nlen[d - 1] : 0;
    const char *n = x->name[d];
    size_t nl = x->nlen[d], len = (size_t)(e - b);
    char tmp[32];

    if (d == 1 && !x->pass_items) {
        if (name_is(n, nl, "IsTruncated")) {
            x->saw_trunc = true;
            if (len == 4 && !memcmp(b, "true", 4))
                x->res->truncated = true;
            else if (len == 5 && !memcmp(b, "false", 5))
                x->res->truncated = false;
            else
                return RIO_EPROTO;
        } else if (name_is(n, nl, "NextContinuationToken")) {
            size_t tl;
            if (x->res->next_token[0] ||
                xml_decode(b, len, x->res->next_token, sizeof(x->res->next_token), &tl) < 0 ||
                tl == 0)
                return RIO_EPROTO;
        } else if (name_is(n, nl, "EncodingType")) {
            if (x->saw_enc)
                return RIO_EPROTO;
            x->saw_enc = true;
            if (len == 3 && !memcmp(b, "url", 3))
                x->url = true;
            else
                return RIO_EPROTO;
        }
        return 0;
    }
    if (d != 2 || !x->pass_items || !x->in_item)
        return 0;
    if (name_is(pn, pl, "CommonPrefixes")) {
        if (!name_is(n, nl, "Prefix"))
            return 0;
    } else if (name_is(n, nl, "Key") || name_is(n, nl, "Prefix")) {
        if (!name_is(n, nl, "Key"))
            return 0;
    } else if (name_is(n, nl, "Size")) {
        if (leaf_once(&x->have_size, b, len, tmp, sizeof(tmp)) < 0 ||
            rio__s3_parse_u64(tmp, &x->it.size) < 0 || x->it.size > (uint64_t)INT64_MAX)
            return RIO_EPROTO;
        return 0;
    } else if (name_is(n, nl, "LastModified")) {
        if (leaf_once(&x->have_mtime, b, len, tmp, sizeof(tmp)) < 0 ||
            rio__s3_parse_iso8601(tmp, &x->it.mtime_ns) < 0)
            return RIO_EPROTO;
        return 0;
    } else if (name_is(n, nl, "ETag")) {
        char et[RIO_S3_ETAG_MAX];
        size_t el;
        if (x->have_etag)
            return RIO_EPROTO;
        x->have_etag = true;
        /* An ETag too long to be one of S3's is no digest we know: none. */
        if (xml_decode(b, len, et, sizeof(et), &el) == 0)
            memcpy(x->it.etag, et, el + 1);
        return 0;
    } else {
        return 0;
    }
    /* Key, or a common prefix's Prefix. */
    if (x->have_key || key_decode(b, len, x->url, x->it.key, &x->it.klen) < 0 || x->it.klen == 0 ||
        x->it.klen > RIO_KEY_MAX)
        return RIO_EPROTO;
    x->have_key = true;
    return 0;
}

static int lx_open(struct lx *x, const char *n, size_t nl)
{
    unsigned d = x->depth;

    if (d == LX_DEPTH)
        return RIO_EPROTO;
    if (d == 0 && !name_is(n, nl, "ListBucketResult"))
        return RIO_EPROTO;
    if (d)
        x->child[d - 1] = true;
    x->name[d] = n;
    x->nlen[d] = nl;
    x->child[d] = false;
    x->depth++;
    if (d == 1 && x->pass_items &&
        (name_is(n, nl, "Contents") || name_is(n, nl, "CommonPrefixes"))) {
        memset(&x->it, 0, sizeof(x->it));
        x->it.dir = name_is(n, nl, "CommonPrefixes");
        x->in_item = true;
        x->have_key = x->have_size = x->have_mtime = x->have_etag = false;
    }
    return 0;
}

static int lx_close(struct lx *x, const char *n, size_t nl, const char *lt)
{
    unsigned d;
    int ret = 0;

    if (!x->depth)
        return RIO_EPROTO;
    d = x->depth - 1;
    if (nl != x->nlen[d] || memcmp(n, x->name[d], nl) != 0)
        return RIO_EPROTO;
    if (!x->child[d])
        ret = lx_leaf(x, x->text[d], lt);
    if (ret < 0)
        return ret;
    if (d == 1 && x->in_item) {
        x->in_item = false;
        if (!x->have_key || (!x->it.dir && !x->have_size))
            return RIO_EPROTO;
        if (x->res->nitems == RIO_LIST_PAGE_MAX)
            return RIO_EPROTO;
        x->res->nitems++;
        if (x->cb) {
            ret = x->cb(x->arg, &x->it);
            if (ret < 0)
                return ret;
        }
    }
    x->depth--;
    return 0;
}

static bool name_char(char c)
{
    return isalnum((unsigned char)c) || c == '_' || c == '-' || c == '.' || c == ':';
}

/* One pass over the document. */
static int lx_run(struct lx *x)
{
    bool root_done = false;

    while (x->p < x->end) {
        const char *lt = memchr(x->p, '<', (size_t)(x->end - x->p));
        const char *q, *n;
        size_t rest, nl;
        bool close = false;

        if (!lt)
            break;
        rest = (size_t)(x->end - lt);
        if (rest >= 2 && lt[1] == '?') {
            q = memmem(lt, rest, "?>", 2);
            if (!q || x->depth)
                return RIO_EPROTO;
            x->p = q + 2;
            continue;
        }
        if (rest >= 4 && !memcmp(lt, "<!--", 4)) {
            q = memmem(lt + 4, rest - 4, "-->", 3);
            if (!q)
                return RIO_EPROTO;
            x->p = q + 3;
            continue;
        }
        if (rest >= 2 && lt[1] == '!')
            return RIO_EPROTO; /* DOCTYPE, CDATA: S3 sends neither */
        if (root_done)
            return RIO_EPROTO; /* a second root */
        n = lt + 1;
        if (n < x->end && *n == '/') {
            close = true;
            n++;
        }
        for (q = n; q < x->end && name_char(*q); q++)
            ;
        nl = (size_t)(q - n);
        if (!nl || q == x->end)
            return RIO_EPROTO;
        /* Attributes (xmlns=...): skipped, quotes respected. */
        {
            char quote = 0;
            for (; q < x->end; q++) {
                if (quote) {
                    if (*q == quote)
                        quote = 0;
                } else if (*q == '"' || *q == '\'') {
                    quote = *q;
                } else if (*q == '>' || *q == '<') {
                    break;
                }
            }
        }
        if (q == x->end || *q != '>')
            return RIO_EPROTO;
        if (close) {
            int ret = lx_close(x, n, nl, lt);
            if (ret < 0)
                return ret;
            if (!x->depth)
                root_done = true;
        } else {
            bool self = q[-1] == '/';
            int ret = lx_open(x, n, nl);
            if (ret < 0)
                return ret;
            x->text[x->depth - 1] = q + 1;
            if (self) {
                ret = lx_close(x, n, nl, q + 1);
                if (ret < 0)
                    return ret;
                if (!x->depth)
                    root_done = true;
            }
        }
        x->p = q + 1;
    }
    return root_done && !x->depth ? 0 : RIO_EPROTO;
}

int rio__s3_list_parse(const char *body, size_t len, struct rio_s3_list_result *res,
                       int (*cb)(void *arg, const struct rio_s3_list_item *it), void *arg)
{
    struct lx x;
    int ret;

    memset(res, 0, sizeof(*res));
    if (!body)
        return RIO_EPROTO;
    /* Pass one: the answer's own fields (EncodingType may come after the
     * keys it applies to); pass two: the items. */
    memset(&x, 0, sizeof(x));
    x.p = body;
    x.end = body + len;
    x.res = res;
    ret = lx_run(&x);
    if (ret < 0)
        goto err;
    /* S3 always says IsTruncated; an answer without it that says where to
     * go on is taken at its token (a listing that stopped there left
     * `railio cp -r` and `rm -r` done with part of the keys, and saying
     * so as success). */
    if (!x.saw_trunc && res->next_token[0])
        res->truncated = true;
    /* A truncated answer must say where to go on; a last one ends here
     * whatever it says. */
    if (res->truncated && !res->next_token[0]) {
        ret = RIO_EPROTO;
        goto err;
    }
    if (!res->truncated)
        res->next_token[0] = '\0';
    bool url = x.url;
    memset(&x, 0, sizeof(x));
    x.p = body;
    x.end = body + len;
    x.res = res;
    x.pass_items = true;
    x.url = url;
    x.cb = cb;
    x.arg = arg;
    res->nitems = 0;
    ret = lx_run(&x);
    if (ret < 0)
        goto err;
    return 0;
err:
    memset(res, 0, sizeof(*res));
    return ret;
}
