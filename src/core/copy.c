/* SPDX-License-Identifier: Apache-2.0 */
/* Non-temporal copy (see copy.h). */
#include <stdint.h>
#include <string.h>

#include "core/copy.h"

#if defined(__x86_64__) || defined(__SSE2__)
#include <emmintrin.h>

void rio__copy_nt(void *dst, const void *src, size_t n)
{
    uint8_t *d = dst;
    const uint8_t *s = src;
    size_t head = (16 - ((uintptr_t)d & 15)) & 15;

    if (n < 256) {
        memcpy(d, s, n);
        return;
    }
    memcpy(d, s, head);
    d += head;
    s += head;
    n -= head;
    for (; n >= 64; n -= 64, d += 64, s += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)s);
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(s + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(s + 32));
        __m128i e = _mm_loadu_si128((const __m128i *)(const void *)(s + 48));
        _mm_stream_si128((__m128i *)(void *)d, a);
        _mm_stream_si128((__m128i *)(void *)(d + 16), b);
        _mm_stream_si128((__m128i *)(void *)(d + 32), c);
        _mm_stream_si128((__m128i *)(void *)(d + 48), e);
    }
    memcpy(d, s, n);
    /* Streaming stores are weakly ordered: make them visible before the
     * caller publishes the bytes (a completion, a flag). */
    _mm_sfence();
}
#else
void rio__copy_nt(void *dst, const void *src, size_t n)
{
    memcpy(dst, src, n);
}
#endif
