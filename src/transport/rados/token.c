/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados:// listing tokens (token.h): written by list.c, read back from
 * whoever holds them.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "core/url.h"
#include "transport/rados/token.h"

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int rio__rados_ltok_parse(const char *s, struct rio__rados_ltok *tk)
{
    size_t len = strnlen(s, RIO_LIST_TOKEN_MAX + 1), i;
    uint64_t v = 0;

    memset(tk, 0, sizeof(*tk));
    if (len > RIO_LIST_TOKEN_MAX || len < 13 || memcmp(s, "r1-", 3) != 0 || s[11] != '-')
        goto bad;
    for (i = 3; i < 11; i++) {
        int d = hexval(s[i]);
        if (d < 0)
            goto bad;
        v = v << 4 | (unsigned)d;
    }
    tk->pos = v;
    v = 0;
    for (i = 12; i < len && s[i] != '-'; i++) {
        if (s[i] < '0' || s[i] > '9' || i - 12 >= 3)
            goto bad;
        v = v * 10 + (unsigned)(s[i] - '0');
    }
    if (i == 12 || v > RIO_RADOS_TIES_MAX || (s[12] == '0' && i > 13))
        goto bad;
    tk->ties = (unsigned)v;
    if (i == len)
        return 0;
    i++; /* '-' then start_after in hex */
    size_t hl = len - i;
    if (hl == 0 || hl / 2 > RIO_RADOS_TOKEN_SA_MAX || rio__hex_decode_str(s + i, hl, tk->sa) < 0)
        goto bad;
    tk->has_sa = true;
    return 0;
bad:
    rio__detail("rados:// list token: not a token this listing gave (expected r1-HASH-TIES[-HEX])");
    return RIO_EINVAL;
}

void rio__rados_ltok_format(const struct rio__rados_ltok *tk, char *out)
{
    int n = snprintf(out, RIO_LIST_TOKEN_MAX + 1, "r1-%08" PRIx64 "-%u", tk->pos, tk->ties);

    if (tk->has_sa) {
        out[n] = '-';
        rio__hex_encode(tk->sa, strlen(tk->sa), out + n + 1);
    }
}

int rio__rados_stok_parse(const char *tok, char *sa)
{
    size_t len = strnlen(tok, RIO_LIST_TOKEN_MAX + 1);

    if (len > 3 && memcmp(tok, "s2-", 3) == 0 && len - 3 <= RIO_KEY_MAX) {
        memcpy(sa, tok + 3, len - 3 + 1);
        return 0;
    }
    if (len > 3 && len <= RIO_LIST_TOKEN_MAX && memcmp(tok, "s1-", 3) == 0 &&
        rio__hex_decode_str(tok + 3, len - 3, sa) == 0)
        return 0;
    rio__detail("rados:// sorted list token: not a token this listing gave (expected s1-HEX)");
    return RIO_EINVAL;
}

int rio__rados_stok_format(const char *key, char *out)
{
    size_t n = strlen(key);

    if (3 + n > RIO_LIST_TOKEN_MAX)
        return -1;
    if (3 + 2 * n > RIO_LIST_TOKEN_MAX) {
        memcpy(out, "s2-", 3);
        memcpy(out + 3, key, n + 1);
        return 0;
    }
    memcpy(out, "s1-", 3);
    rio__hex_encode(key, n, out + 3);
    return 0;
}
