/* SPDX-License-Identifier: Apache-2.0 */
/* Copies into large destinations. */
#ifndef RIO_COPY_H
#define RIO_COPY_H

#include <stddef.h>

/*
 * memcpy with non-temporal (streaming) stores for the 16-byte-aligned part of
 * dst: the bytes bypass the cache on their way to memory. Worth it only when
 * the destination is far larger than the cache and will not be read soon
 * (docs/tuning.md has the measurement); otherwise memcpy is faster. Falls
 * back to memcpy where SSE2 is not available.
 */
void rio__copy_nt(void *dst, const void *src, size_t n);

#endif
