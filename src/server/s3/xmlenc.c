/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The encoding an S3 request's XML body declares. The gateway's reader
 * (xml.c) reads UTF-8; S3 also takes a body that declares ISO-8859-1 (a
 * Java or PHP client's default), so such a body is transcoded to UTF-8
 * before it is read, and a body declaring any other encoding is refused
 * by its name rather than read as bytes it is not.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem */
#endif
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "server/s3/gw.h"

/* XML's EncName characters ([A-Za-z] ([A-Za-z0-9._] | '-')*, the first
 * one aside): anything else of a declared name is shown as '?'. */
static int enc_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
           c == '_' || c == '-';
}

/* One pseudo-attribute of the declaration at *p (before end): its name
 * and value (between the quotes), *p after it. 0, or -1 when there is none
 * or it is not name="value". */
static int decl_attr(const char **p, const char *end, const char **name, size_t *nlen,
                     const char **val, size_t *vlen)
{
    const char *q = *p, *close;

    while (q < end && rio__gw_xml_blank(*q))
        q++;
    *name = q;
    while (q < end && *q != '=' && !rio__gw_xml_blank(*q))
        q++;
    *nlen = (size_t)(q - *name);
    while (q < end && rio__gw_xml_blank(*q))
        q++;
    if (!*nlen || q == end || *q++ != '=')
        return -1;
    while (q < end && rio__gw_xml_blank(*q))
        q++;
    if (q == end || (*q != '"' && *q != '\''))
        return -1;
    close = memchr(q + 1, *q, (size_t)(end - q - 1));
    if (!close)
        return -1;
    *val = q + 1;
    *vlen = (size_t)(close - *val);
    *p = close + 1;
    return 0;
}

/* The encoding body's XML declaration names, into enc (cap bytes, cut
 * short, each byte no EncName has as '?'): 1, or 0 when it names none (no
 * declaration, none in it, or one the well-formedness check refuses). */
static int decl_encoding(const char *body, size_t n, char *enc, size_t cap)
{
    const char *p = body, *end = body + n, *q, *name, *val;
    size_t nlen, vlen;

    while (p < end && rio__gw_xml_blank(*p))
        p++;
    if (end - p < 6 || memcmp(p, "<?xml", 5) != 0 || !rio__gw_xml_blank(p[5]))
        return 0;
    q = memmem(p, (size_t)(end - p), "?>", 2);
    if (!q)
        return 0;
    for (p += 5; decl_attr(&p, q, &name, &nlen, &val, &vlen) == 0;) {
        if (nlen != 8 || memcmp(name, "encoding", 8) != 0)
            continue;
        size_t i;
        for (i = 0; i < vlen && i + 1 < cap; i++)
            enc[i] = enc_char(val[i]) ? val[i] : '?';
        enc[i] = '\0';
        return 1;
    }
    return 0;
}

static int enc_is(const char *enc, const char *const *names)
{
    for (; *names; names++)
        if (strcasecmp(enc, *names) == 0)
            return 1;
    return 0;
}

int rio__gw_xml_utf8(const char *body, size_t n, char **out, size_t *outlen, char *enc, size_t cap)
{
    /* US-ASCII is UTF-8's first 128 characters: its bytes read as they are. */
    static const char *const utf8[] = {"UTF-8", "UTF8", "US-ASCII", "ASCII", NULL};
    static const char *const latin1[] = {"ISO-8859-1", "ISO_8859-1", "ISO8859-1",
                                         "latin1",     "latin-1",    NULL};
    const unsigned char *s = (const unsigned char *)body;
    size_t high = 0;
    char *o;

    *out = NULL;
    *outlen = 0;
    enc[0] = '\0';
    /* A UTF-8 byte order mark says what the bytes are, whatever follows. */
    if (n >= 3 && memcmp(body, "\xef\xbb\xbf", 3) == 0)
        return 0;
    if (!decl_encoding(body, n, enc, cap) || enc_is(enc, utf8))
        return 0;
    if (!enc_is(enc, latin1))
        return -1;
    for (size_t i = 0; i < n; i++)
        high += s[i] >= 0x80;
    if (!high)
        return 0; /* ASCII: the same bytes in UTF-8 */
    /* Each byte past ASCII becomes two: at most twice the body, and its NUL. */
    if (n > (SIZE_MAX - 1) / 2)
        return -ENOMEM;
    o = rio__malloc(n + high + 1);
    if (!o)
        return -ENOMEM;
    *out = o;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x80) {
            *o++ = (char)s[i];
        } else {
            *o++ = (char)(0xc0 | s[i] >> 6);
            *o++ = (char)(0x80 | (s[i] & 0x3f));
        }
    }
    *o = '\0';
    *outlen = n + high;
    return 1;
}
