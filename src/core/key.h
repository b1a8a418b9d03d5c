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

#endif
