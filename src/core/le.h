/* SPDX-License-Identifier: Apache-2.0 */
#ifndef RIO_CORE_LE_H
#define RIO_CORE_LE_H

/* Little-endian 64-bit fields, as every on-disk and on-wire format of
 * railio stores them, whatever the host's byte order. */

#include <stdint.h>

static inline void rio__le64_put(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static inline uint64_t rio__le64_get(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

#endif
