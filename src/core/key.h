/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one key rule, for the client, every transport and the server: a key is
 * 1..RIO_KEY_MAX bytes with no NUL inside (any other byte is the backend's
 * business: file:// adds its path rules on top). Header-only so that the
 * loadable modules and railiod share it without a host-table entry.
 */
#ifndef RIO_KEY_H
#define RIO_KEY_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "railio.h"

/* A key length the wire, the stores and the disk records accept. */
static inline bool rio__key_len_ok(size_t n)
{
    return n >= 1 && n <= RIO_KEY_MAX;
}

/* The length of a C-string key into *len (read at most RIO_KEY_MAX + 1
 * bytes); 0, or RIO_EINVAL for NULL, "" or a key too long. */
static inline int rio__key_len(const char *key, size_t *len)
{
    if (!key)
        return RIO_EINVAL;
    *len = strnlen(key, RIO_KEY_MAX + 1);
    return rio__key_len_ok(*len) ? 0 : RIO_EINVAL;
}

/* The key to list after so as to skip every key under common prefix cp
 * (clen bytes, at most RIO_KEY_MAX): cp padded with 0xff to RIO_KEY_MAX
 * bytes into dst (RIO_KEY_MAX + 1), the greatest key that starts with cp,
 * so the next key in byte order is past them all (keys may hold any byte
 * but NUL: 0xff after cp is no end of them). */
static inline void rio__key_skip_past(char *dst, const char *cp, size_t clen)
{
    memmove(dst, cp, clen);
    memset(dst + clen, 0xff, RIO_KEY_MAX - clen);
    dst[RIO_KEY_MAX] = '\0';
}

#endif
