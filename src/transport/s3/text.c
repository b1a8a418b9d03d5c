/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Small bounded text helpers the parsers share (parse.h): hex digits, a
 * decimal u64, a truncating copy, a chunk count. No allocation, no libcurl.
 */
#include <ctype.h>
#include <string.h>

#include "transport/s3/parse.h"

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

static int b64_val(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    return c == '+' ? 62 : c == '/' ? 63 : -1;
}

int rio__s3_b64_exact(const char *s, size_t n, uint8_t *out, size_t len)
{
    uint32_t acc = 0;
    unsigned bits = 0;
    size_t o = 0, pad = (3 - len % 3) % 3;

    if (len == 0 || len > 48 || n != 4 * ((len + 2) / 3))
        return -1;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val(s[i]);
        if (i >= n - pad) {
            if (s[i] != '=')
                return -1;
            continue;
        }
        if (v < 0)
            return -1;
        acc = acc << 6 | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o == len)
                return -1;
            out[o++] = (uint8_t)(acc >> bits);
            acc &= (1u << bits) - 1;
        }
    }
    return o == len && acc == 0 ? 0 : -1;
}

void rio__s3_printable(char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s > 0x7e)
            *s = '?';
}

const char *rio__s3_shown(const char *s, char *out, size_t cap)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t o = 0;

    while (*p && o + 1 < cap) {
        if (*p < 0x20 || *p == 0x7f) {
            out[o++] = '?';
            p++;
        } else if (p[0] == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
            out[o++] = '?';
            p += 2;
        } else {
            out[o++] = (char)*p++;
        }
    }
    out[o] = '\0';
    return out;
}
