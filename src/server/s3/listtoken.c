/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway's folded-listing tokens (listtoken.h). */
#include <stdio.h>
#include <string.h>

#include "core/url.h"
#include "railio.h"
#include "server/s3/listtoken.h"

static const char hexd[] = "0123456789ABCDEF";

static void pct(const char *t, char *out)
{
    for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
        if (*p < '!' || *p > '~' || *p == '%') {
            *out++ = '%';
            *out++ = hexd[*p >> 4];
            *out++ = hexd[*p & 15];
        } else {
            *out++ = (char)*p;
        }
    }
    *out = '\0';
}

static int hexv(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* The inverse of pct: -1 on a bad escape, an escape of a byte that needed
 * none, a byte that should have been escaped, a NUL, or no room. */
static int unpct(const char *t, char *out, size_t cap)
{
    size_t o = 0;

    for (const unsigned char *p = (const unsigned char *)t; *p; p++) {
        int c = *p;
        if (c < '!' || c > '~')
            return -1;
        if (c == '%') {
            int h = hexv((char)p[1]), l = h < 0 ? -1 : hexv((char)p[2]);
            if (l < 0)
                return -1;
            c = h << 4 | l;
            if (c == 0 || (c >= '!' && c <= '~' && c != '%'))
                return -1;
            p += 2;
        }
        if (o + 1 >= cap)
            return -1;
        out[o++] = (char)c;
    }
    out[o] = '\0';
    return 0;
}

void rio__gw_token_wrap(const char *t, char *out)
{
    out[0] = 'p';
    pct(t, out + 1);
}

int rio__gw_token_unwrap(const char *t, char *out, size_t cap)
{
    return t[0] == 'p' ? unpct(t + 1, out, cap) : -1;
}

void rio__gw_folded_token(const char *rel, char *out, size_t cap)
{
    size_t n = strlen(rel);

    if (1 + 2 * n > RIO_LIST_TOKEN_MAX) {
        if (cap < RIO_GW_TOKEN_WRAPPED(n) + 1) {
            out[0] = '\0';
            return;
        }
        out[0] = 'g';
        pct(rel, out + 1);
        return;
    }
    out[0] = 'f';
    rio__hex_encode(rel, n, out + 1);
}

int rio__gw_folded_token_parse(const char *t, char *rel, size_t cap)
{
    size_t n = strlen(t);

    if (t[0] == 'g' && n > 1)
        return unpct(t + 1, rel, cap);
    if (t[0] != 'f' || n < 3 || (n - 1) / 2 >= cap)
        return -1;
    return rio__hex_decode_str(t + 1, n - 1, rel);
}
