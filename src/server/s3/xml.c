/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The S3 gateway's text helpers: a growable buffer with XML escaping,
 * percent-decoding, HTTP and ISO dates, base64, bucket names, and a small
 * reader for the one XML body the gateway takes (DeleteObjects).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "server/s3/gw.h"

void rio__gw_buf_put(struct gw_buf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 1024;
        char *p;
        while (cap < b->len + n + 1)
            cap *= 2;
        p = rio__realloc(b->p, cap);
        if (!p) {
            b->oom = 1;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void rio__gw_buf_printf(struct gw_buf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(tmp)) {
        b->oom = 1; /* the callers' formats are short */
        return;
    }
    rio__gw_buf_put(b, tmp, (size_t)n);
}

void rio__gw_buf_etag(struct gw_buf *b, const char *etag)
{
    rio__gw_buf_put(b, "<ETag>&quot;", 12);
    rio__gw_buf_xml(b, etag);
    rio__gw_buf_put(b, "&quot;</ETag>", 13);
}

void rio__gw_buf_xml(struct gw_buf *b, const char *s)
{
    const char *run = s;

    for (; *s; s++) {
        const char *rep = NULL;
        char num[16];
        unsigned char ch = (unsigned char)*s;
        switch (ch) {
        case '&':
            rep = "&amp;";
            break;
        case '<':
            rep = "&lt;";
            break;
        case '>':
            rep = "&gt;";
            break;
        case '"':
            rep = "&quot;";
            break;
        case '\'':
            rep = "&apos;";
            break;
        default:
            if (ch < 0x20 || ch == 0x7f) { /* not allowed raw in XML 1.0 text */
                snprintf(num, sizeof(num), "&#x%X;", ch);
                rep = num;
            }
        }
        if (rep) {
            rio__gw_buf_put(b, run, (size_t)(s - run));
            rio__gw_buf_put(b, rep, strlen(rep));
            run = s + 1;
        }
    }
    rio__gw_buf_put(b, run, (size_t)(s - run));
}

void rio__gw_buf_free(struct gw_buf *b)
{
    rio__free(b->p);
    memset(b, 0, sizeof(*b));
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

int rio__gw_utf8_valid(const char *s)
{
    return rio__gw_utf8_valid_n(s, strlen(s));
}

int rio__gw_utf8_valid_n(const char *s, size_t len)
{
    const unsigned char *p = (const unsigned char *)s, *end = p + len;

    while (p < end) {
        unsigned n = *p < 0x80             ? 1
                     : (*p & 0xe0) == 0xc0 ? 2
                     : (*p & 0xf0) == 0xe0 ? 3
                     : (*p & 0xf8) == 0xf0 ? 4
                                           : 0;
        uint32_t cp = n == 1 ? *p : n == 2 ? *p & 0x1fu : n == 3 ? *p & 0x0fu : *p & 0x07u;

        if (!n || (size_t)(end - p) < n)
            return 0;
        for (unsigned i = 1; i < n; i++) {
            if ((p[i] & 0xc0) != 0x80)
                return 0;
            cp = (cp << 6) | (p[i] & 0x3fu);
        }
        /* overlong forms, surrogates, past U+10FFFF */
        if ((n == 2 && cp < 0x80) || (n == 3 && cp < 0x800) || (n == 4 && cp < 0x10000) ||
            cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
            return 0;
        p += n;
    }
    return 1;
}

char *rio__gw_unescape(const char *s, size_t n, int plus)
{
    char *out = rio__malloc(n + 1), *o = out;

    if (!out)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '%') {
            int hi;
            if (i + 2 >= n) {
                rio__free(out);
                return NULL;
            }
            hi = hexval(s[i + 1]);
            int lo = hexval(s[i + 2]);
            if (hi < 0 || lo < 0) {
                rio__free(out);
                return NULL;
            }
            ch = (char)(hi * 16 + lo);
            i += 2;
        } else if (plus && ch == '+') {
            ch = ' ';
        }
        if (ch == '\0') {
            rio__free(out);
            return NULL;
        }
        *o++ = ch;
    }
    *o = '\0';
    return out;
}

static const char *const wday[] = {"Sun", "Mon", "Tue", "Wed", "Thu", "Fri", "Sat"};
static const char *const mon[] = {"Jan", "Feb", "Mar", "Apr", "May", "Jun",
                                  "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"};

void rio__gw_http_date(int64_t sec, char out[30])
{
    time_t t = (time_t)sec;
    struct tm tm;

    gmtime_r(&t, &tm);
    snprintf(out, 30, "%s, %02d %s %04d %02d:%02d:%02d GMT", wday[tm.tm_wday % 7], tm.tm_mday,
             mon[tm.tm_mon % 12], (tm.tm_year + 1900) % 10000, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

void rio__gw_iso_date(int64_t ns, char out[32])
{
    time_t t = (time_t)(ns / 1000000000);
    struct tm tm;
    char tmp[96];

    if (ns < 0)
        ns = t = 0;
    gmtime_r(&t, &tm);
    snprintf(tmp, sizeof(tmp), "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", (tm.tm_year + 1900) % 10000,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (int)((ns / 1000000) % 1000));
    memcpy(out, tmp, 31);
    out[31] = '\0';
}

int64_t rio__gw_parse_http_date(const char *s)
{
    static const char *const fmts[] = {"%a, %d %b %Y %H:%M:%S GMT", "%A, %d-%b-%y %H:%M:%S GMT",
                                       "%a %b %e %H:%M:%S %Y"};
    for (size_t i = 0; i < sizeof(fmts) / sizeof(fmts[0]); i++) {
        struct tm tm;
        const char *end;
        memset(&tm, 0, sizeof(tm));
        end = strptime(s, fmts[i], &tm);
        if (end && *end == '\0')
            return (int64_t)timegm(&tm);
    }
    return -1;
}

int64_t rio__gw_parse_iso(const char *s)
{
    struct tm tm;
    int n = 0;

    memset(&tm, 0, sizeof(tm));
    if (sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour,
               &tm.tm_min, &tm.tm_sec, &n) != 6 ||
        n != 19)
        return -1;
    for (int i = 0; i < 19; i++)
        if ((i == 4 || i == 7)     ? s[i] != '-'
            : i == 10              ? s[i] != 'T'
            : (i == 13 || i == 16) ? s[i] != ':'
                                   : (s[i] < '0' || s[i] > '9'))
            return -1;
    s += 19;
    if (*s == '.') {
        size_t k = strspn(s + 1, "0123456789");
        if (k < 1 || k > 9)
            return -1;
        s += 1 + k;
    }
    if (strcmp(s, "Z") != 0)
        return -1;
    if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 || tm.tm_hour > 23 ||
        tm.tm_min > 59 || tm.tm_sec > 60)
        return -1;
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    return (int64_t)timegm(&tm);
}

int64_t rio__gw_parse_date(const char *s)
{
    int64_t t = rio__gw_parse_http_date(s);

    return t >= 0 ? t : rio__gw_parse_iso(s);
}

int rio__gw_b64dec(const char *s, unsigned char *out, size_t cap)
{
    static const char al[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t n = strlen(s), o = 0;
    uint32_t acc = 0;
    int bits = 0;

    while (n && s[n - 1] == '=')
        n--;
    for (size_t i = 0; i < n; i++) {
        const char *p = s[i] ? strchr(al, s[i]) : NULL;
        if (!p)
            return -1;
        acc = (acc << 6) | (uint32_t)(p - al);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == cap)
                return -1;
            out[o++] = (unsigned char)(acc >> bits);
        }
    }
    return (int)o;
}

int rio__gw_attr_mask(const char *v)
{
    static const struct {
        const char *name;
        int bit;
    } names[] = {{"ETag", GW_ATTR_ETAG},
                 {"Checksum", GW_ATTR_CHECKSUM},
                 {"ObjectParts", GW_ATTR_PARTS},
                 {"StorageClass", GW_ATTR_CLASS},
                 {"ObjectSize", GW_ATTR_SIZE}};
    int mask = 0;

    while (*v) {
        size_t n;
        int bit = 0;
        while (*v == ' ' || *v == '\t' || *v == ',')
            v++;
        n = strcspn(v, ", \t");
        if (!n)
            break;
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (strlen(names[i].name) == n && strncmp(v, names[i].name, n) == 0)
                bit = names[i].bit;
        if (!bit)
            return -1;
        mask |= bit;
        v += n;
    }
    return mask;
}

int rio__gw_parse_count(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (!s || !*s)
        return -1;
    for (; *s; s++) {
        if (*s < '0' || *s > '9' || (uint64_t)(*s - '0') > max ||
            v > (max - (uint64_t)(*s - '0')) / 10)
            return -1;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return 0;
}

int rio__gw_valid_bucket(const char *name)
{
    size_t n = strlen(name);

    if (n < 3 || n > GW_BUCKET_MAX)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char c = name[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.'))
            return 0;
    }
    if (name[0] == '-' || name[0] == '.' || name[n - 1] == '-' || name[n - 1] == '.')
        return 0;
    return strstr(name, "..") == NULL;
}

/* Unescape the five XML entities and numeric references of text[0..n)
 * into *res: 0, -1 for a reference the reader does not take, -ENOMEM. */
static int xml_unescape(const char *s, size_t n, char **res)
{
    char *out = rio__malloc(n + 1), *o = out;

    *res = NULL;
    if (!out)
        return -ENOMEM;
    for (size_t i = 0; i < n;) {
        static const struct {
            const char *ent;
            char ch;
        } ents[] = {
            {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
        int done = 0;
        if (s[i] != '&') {
            *o++ = s[i++];
            continue;
        }
        for (size_t e = 0; e < sizeof(ents) / sizeof(ents[0]); e++) {
            size_t l = strlen(ents[e].ent);
            if (i + l <= n && memcmp(s + i, ents[e].ent, l) == 0) {
                *o++ = ents[e].ch;
                i += l;
                done = 1;
                break;
            }
        }
        if (!done && i + 3 < n && s[i + 1] == '#') {
            /* &#DDD; or &#xHHH;: every digit one of its base, a code point
             * of XML's characters (the controls but NUL too: the gateway
             * writes a railio key's controls so, and takes them back),
             * written as UTF-8, never longer than the reference. */
            const char *semi = memchr(s + i, ';', n - i);
            size_t a = i + 2, z = semi ? (size_t)(semi - s) : 0;
            int hex = a < n && s[a] == 'x';
            uint32_t v = 0;
            a += (size_t)hex;
            int ok = semi && z > a && z - a <= 8;
            for (size_t k = a; ok && k < z; k++) {
                int d = hex ? hexval(s[k]) : s[k] >= '0' && s[k] <= '9' ? s[k] - '0' : -1;
                ok = d >= 0;
                v = v * (hex ? 16u : 10u) + (uint32_t)(d < 0 ? 0 : d);
            }
            if (ok && v > 0 && v <= 0x10ffff && !(v >= 0xd800 && v <= 0xdfff) && v != 0xfffe &&
                v != 0xffff) {
                if (v < 0x80) {
                    *o++ = (char)v;
                } else if (v < 0x800) {
                    *o++ = (char)(0xc0 | v >> 6);
                    *o++ = (char)(0x80 | (v & 0x3f));
                } else if (v < 0x10000) {
                    *o++ = (char)(0xe0 | v >> 12);
                    *o++ = (char)(0x80 | (v >> 6 & 0x3f));
                    *o++ = (char)(0x80 | (v & 0x3f));
                } else {
                    *o++ = (char)(0xf0 | v >> 18);
                    *o++ = (char)(0x80 | (v >> 12 & 0x3f));
                    *o++ = (char)(0x80 | (v >> 6 & 0x3f));
                    *o++ = (char)(0x80 | (v & 0x3f));
                }
                i = z + 1;
                done = 1;
            }
        }
        if (!done) {
            rio__free(out);
            return -1;
        }
    }
    *o = '\0';
    *res = out;
    return 0;
}

static char *xml_text(const char *s, size_t n)
{
    char *out;

    return xml_unescape(s, n, &out) == 0 ? out : NULL;
}

static const char *tag_end(const char *p, const char *end);

int rio__gw_xml_each_raw(const char *body, size_t n, const char *tag,
                         int (*fn)(void *arg, const char *raw, size_t len), void *arg)
{
    char open[64], close[64];
    const char *p = body, *end = body + n;
    size_t ol, cl;

    /* "<TAG" then '>', or attributes (what the well-formedness check
     * takes, so an element with one is never skipped: a Complete's <Part
     * a="x"> dropped that part from the object), or "/>" (empty). */
    snprintf(open, sizeof(open), "<%s", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    ol = strlen(open);
    cl = strlen(close);
    for (;;) {
        const char *a = memmem(p, (size_t)(end - p), open, ol), *b, *gt;
        int ret;
        if (!a)
            return 0;
        a += ol;
        if (a == end)
            return -1;
        if (*a != '>' && *a != '/' && !rio__gw_xml_blank(*a)) {
            p = a; /* a longer name: "<PartNumber" for "Part" */
            continue;
        }
        gt = *a == '>' ? a : tag_end(a, end);
        if (!gt)
            return -1;
        if (gt[-1] == '/') { /* <TAG/>, <TAG a="x"/>: empty */
            ret = fn(arg, gt + 1, 0);
            if (ret)
                return ret;
            p = gt + 1;
            continue;
        }
        a = gt + 1;
        b = memmem(a, (size_t)(end - a), close, cl);
        if (!b)
            return -1;
        ret = fn(arg, a, (size_t)(b - a));
        if (ret)
            return ret;
        p = b + cl;
    }
}

struct each_text {
    int (*fn)(void *arg, const char *text);
    void *arg;
};

int rio__gw_xml_text(const char *raw, size_t len, char **out)
{
    *out = NULL;
    /* An element read as text holds text only: "<Key><X>a</X></Key>" is
     * not the key "<X>a</X>" (its '<' would be escaped), nor is a NUL XML */
    if (memchr(raw, '<', len) || memchr(raw, '\0', len))
        return -1;
    return xml_unescape(raw, len, out);
}

static int each_text_cb(void *arg, const char *raw, size_t len)
{
    struct each_text *x = arg;
    char *text;
    int ret;

    if (rio__gw_xml_text(raw, len, &text) < 0)
        return -1;
    ret = x->fn(x->arg, text);
    rio__free(text);
    return ret;
}

int rio__gw_xml_each(const char *body, size_t n, const char *tag,
                     int (*fn)(void *arg, const char *text), void *arg)
{
    struct each_text x = {fn, arg};

    return rio__gw_xml_each_raw(body, n, tag, each_text_cb, &x);
}

/* XML name characters as S3's documents use them (ASCII letters, digits,
 * '-', '_', '.', ':'). */
static int name_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_' || c == '.' || c == ':';
}

#define XML_DEPTH_MAX 16

int rio__gw_xml_wellformed(const char *body, size_t n, const char *root)
{
    const char *p = body, *end = body + n, *names[XML_DEPTH_MAX];
    size_t lens[XML_DEPTH_MAX];
    unsigned depth = 0;
    int seen_root = 0;

    if (memchr(body, '\0', n))
        return -1; /* not a character of XML; and would cut a key short */
    if (!rio__gw_utf8_valid_n(body, n))
        return -1; /* no XML (S3: MalformedXML); a key of it would make the answer none */
    if (n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
        p += 3; /* a UTF-8 byte order mark */
    while (p < end && rio__gw_xml_blank(*p))
        p++;
    if (end - p >= 5 && memcmp(p, "<?xml", 5) == 0) {
        const char *q = memmem(p, (size_t)(end - p), "?>", 2);
        if (!q || memchr(p + 1, '<', (size_t)(q - p - 1)) || memchr(p, '>', (size_t)(q - p)))
            return -1;
        p = q + 2;
    }
    while (p < end) {
        if (*p != '<') {
            /* text: inside an element only (blanks around the root), its
             * references ones the gateway's reader takes */
            const char *t = p;
            char *text;
            while (p < end && *p != '<') {
                if (!depth && !rio__gw_xml_blank(*p))
                    return -1;
                p++;
            }
            if (!depth)
                continue;
            if (p == end)
                return -1;
            if (memchr(t, '&', (size_t)(p - t))) {
                text = xml_text(t, (size_t)(p - t));
                if (!text)
                    return -1;
                rio__free(text);
            }
            continue;
        }
        /* A comment, a DTD, CDATA or a processing instruction: none is in
         * S3's request documents, and a comment could hide an element from
         * the reader's scan (rio__gw_xml_each), or show one it holds. */
        if (end - p >= 2 && (p[1] == '!' || p[1] == '?'))
            return -1;
        if (end - p >= 2 && p[1] == '/') {
            const char *a = p + 2, *b = a;
            while (b < end && name_char(*b))
                b++;
            if (!depth || (size_t)(b - a) != lens[depth - 1] ||
                memcmp(a, names[depth - 1], lens[depth - 1]) != 0)
                return -1;
            /* "</Key >" is XML, but no client writes it and the reader's
             * scan looks for "</Key>" */
            if (b == end || *b != '>')
                return -1;
            depth--;
            p = b + 1;
            continue;
        }
        {
            const char *a = p + 1, *b = a;
            int self = 0;
            char quote = 0;
            while (b < end && name_char(*b))
                b++;
            if (b == a || (depth == 0 && seen_root))
                return -1;
            if (depth == 0 &&
                (strlen(root) != (size_t)(b - a) || memcmp(a, root, (size_t)(b - a)) != 0))
                return -1;
            if (depth == XML_DEPTH_MAX)
                return -1;
            names[depth] = a;
            lens[depth] = (size_t)(b - a);
            /* attributes (xmlns="..."): up to the '>' outside quotes */
            for (; b < end; b++) {
                if (quote) {
                    if (*b == quote)
                        quote = 0;
                    else if (*b == '<')
                        return -1;
                    continue;
                }
                if (*b == '"' || *b == '\'')
                    quote = *b;
                else if (*b == '<')
                    return -1;
                else if (*b == '>')
                    break;
            }
            if (b == end)
                return -1;
            self = b[-1] == '/'; /* after the name: a name holds no '/' */
            seen_root = 1;
            if (!self)
                depth++;
            p = b + 1;
        }
    }
    return seen_root && depth == 0 ? 0 : -1;
}

/* The end of the start tag at p ('<'): the '>' outside quotes, NULL when
 * there is none before end. */
static const char *tag_end(const char *p, const char *end)
{
    char quote = 0;

    for (; p < end; p++) {
        if (quote) {
            if (*p == quote)
                quote = 0;
        } else if (*p == '"' || *p == '\'') {
            quote = *p;
        } else if (*p == '>') {
            return p;
        }
    }
    return NULL;
}

int rio__gw_xml_root(const char *body, size_t n, const char **inner, size_t *len)
{
    const char *p = body, *end = body + n, *gt, *close;

    if (n >= 3 && memcmp(p, "\xef\xbb\xbf", 3) == 0)
        p += 3;
    while (p < end && rio__gw_xml_blank(*p))
        p++;
    if (end - p >= 5 && memcmp(p, "<?xml", 5) == 0) {
        const char *q = memmem(p, (size_t)(end - p), "?>", 2);
        if (!q)
            return -1;
        p = q + 2;
        while (p < end && rio__gw_xml_blank(*p))
            p++;
    }
    if (p == end || *p != '<' || !(gt = tag_end(p, end)))
        return -1;
    if (gt[-1] == '/') { /* <Root/> */
        *inner = gt + 1;
        *len = 0;
        return 0;
    }
    /* well-formed (rio__gw_xml_wellformed): the last tag closes the root */
    for (close = end - 1; close > gt && !(close[0] == '<' && close[1] == '/'); close--)
        ;
    if (close <= gt)
        return -1;
    *inner = gt + 1;
    *len = (size_t)(close - (gt + 1));
    return 0;
}

int rio__gw_xml_children(const char *raw, size_t n,
                         int (*fn)(void *arg, const char *name, size_t nlen, const char *inner,
                                   size_t ilen),
                         void *arg)
{
    const char *p = raw, *end = raw + n;

    for (;;) {
        const char *name, *gt, *q, *inner;
        size_t nlen;
        unsigned depth = 1;
        int ret;

        while (p < end && rio__gw_xml_blank(*p))
            p++;
        if (p == end)
            return 0;
        if (*p != '<' || end - p < 2 || p[1] == '/' || p[1] == '!' || p[1] == '?')
            return -1; /* text beside elements, or a stray tag */
        name = p + 1;
        for (q = name; q < end && name_char(*q); q++)
            ;
        nlen = (size_t)(q - name);
        if (!nlen || !(gt = tag_end(q, end)))
            return -1;
        inner = gt + 1;
        if (gt[-1] == '/') { /* <Name/> */
            ret = fn(arg, name, nlen, inner, 0);
            if (ret)
                return ret;
            p = inner;
            continue;
        }
        /* its matching close tag: count the elements opened inside it */
        for (q = inner; depth; q++) {
            const char *t = memchr(q, '<', (size_t)(end - q)), *e;
            if (!t || end - t < 2)
                return -1;
            if (t[1] == '/') {
                e = memchr(t, '>', (size_t)(end - t));
                if (!e)
                    return -1;
                if (--depth == 0) {
                    ret = fn(arg, name, nlen, inner, (size_t)(t - inner));
                    if (ret)
                        return ret;
                }
            } else {
                e = tag_end(t, end);
                if (!e)
                    return -1;
                depth += e[-1] != '/';
            }
            q = e;
        }
        p = q;
    }
}
