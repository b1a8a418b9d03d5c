/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CRC-32 (IEEE 802.3, zlib's) and CRC-64/NVME: S3's x-amz-checksum-crc32
 * and -crc64nvme, the full-object checksums an S3 server keeps for the
 * objects it holds (Amazon S3 adds a CRC-64/NVME to every new object a
 * client sent none with). Both are reflected CRCs with their register
 * inverted on the way in and out.
 *
 * Long runs are folded 64 bytes a step with carry-less multiplies
 * (PCLMULQDQ, where the CPU has it): the bytes, as a polynomial M read
 * first bit highest, and M's remainder have the same CRC, and four lanes
 * of 128 bits each are carried forward by multiplying them by x^512 modulo
 * the CRC's polynomial P (two 64 x 64 bit products per lane, the constants
 * x^(d + 63) and x^(d - 1) mod P for a distance of d bits: the operands are
 * bit-reflected, so each product comes out one bit short of where it
 * belongs). What is left, 16 bytes, and the tail go through tables, eight
 * bytes a step. The constants are worked out at start, not copied.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/checksum.h"
#include "core/le.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define RIO_CRC_CLMUL 1
#endif

/* The polynomials, normal (x^63 .. x^0 without the x^64 term) and
 * reflected. */
#define CRC64_NVME_POLY 0xad93d23594c93659ull
#define CRC32_POLY 0x04c11db7u

struct crc_kind {
    int width;            /* 32 or 64 */
    uint64_t tab[8][256]; /* slicing by 8, reflected */
    uint64_t k512[2];     /* fold by 4 x 128 bits: x^575, x^511 mod P, reflected */
    uint64_t k128[2];     /* fold by 128 bits: x^191, x^127 */
};

static struct crc_kind crc64k = {.width = 64}, crc32k = {.width = 32};
static bool clmul_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint64_t reflect(uint64_t v, int bits)
{
    uint64_t r = 0;

    for (int i = 0; i < bits; i++)
        if (v >> i & 1)
            r |= 1ull << (bits - 1 - i);
    return r;
}

/* x^n mod P (P of the given width, normal form), normal form. */
static uint64_t xpow_mod(uint64_t poly, int width, unsigned n)
{
    uint64_t top = 1ull << (width - 1), mask = width == 64 ? ~0ull : (1ull << width) - 1, r = 1;

    for (unsigned i = 0; i < n; i++)
        r = ((r << 1) ^ (r & top ? poly : 0)) & mask;
    return r;
}

/* The fold constant for x^n: reflected as a 64-bit operand, so that a
 * product with a reflected 64-bit lane lands reflected in 128 bits. */
static uint64_t fold_k(uint64_t poly, int width, unsigned n)
{
    return reflect(xpow_mod(poly, width, n), 64);
}

static void kind_init(struct crc_kind *k, uint64_t poly)
{
    uint64_t rpoly = reflect(poly, k->width);

    for (uint64_t i = 0; i < 256; i++) {
        uint64_t c = i;
        for (int b = 0; b < 8; b++)
            c = c & 1 ? rpoly ^ (c >> 1) : c >> 1;
        k->tab[0][i] = c;
    }
    for (int s = 1; s < 8; s++)
        for (int i = 0; i < 256; i++)
            k->tab[s][i] = (k->tab[s - 1][i] >> 8) ^ k->tab[0][k->tab[s - 1][i] & 0xff];
    k->k512[0] = fold_k(poly, k->width, 512 + 63);
    k->k512[1] = fold_k(poly, k->width, 512 - 1);
    k->k128[0] = fold_k(poly, k->width, 128 + 63);
    k->k128[1] = fold_k(poly, k->width, 128 - 1);
}

static void crc_init(void)
{
    kind_init(&crc64k, CRC64_NVME_POLY);
    kind_init(&crc32k, CRC32_POLY);
#ifdef RIO_CRC_CLMUL
    __builtin_cpu_init();
    clmul_hw = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
#endif
}

/* The register (not inverted) after n more bytes at p, eight a step. */
static uint64_t tab_raw(const struct crc_kind *k, uint64_t crc, const uint8_t *p, size_t n)
{
    const uint64_t(*t)[256] = k->tab;

    for (; n >= 8; n -= 8, p += 8) {
        uint64_t x = crc ^ rio__le64_get(p);
        crc = t[7][x & 0xff] ^ t[6][(x >> 8) & 0xff] ^ t[5][(x >> 16) & 0xff] ^
              t[4][(x >> 24) & 0xff] ^ t[3][(x >> 32) & 0xff] ^ t[2][(x >> 40) & 0xff] ^
              t[1][(x >> 48) & 0xff] ^ t[0][x >> 56];
    }
    for (; n > 0; n--, p++)
        crc = k->tab[0][(crc ^ *p) & 0xff] ^ (crc >> 8);
    return crc;
}

#ifdef RIO_CRC_CLMUL
/* Multiply the 128-bit lane x by x^d (constants kd) and add y. The
 * reflected operands: the lane's low half holds the high-degree terms. */
__attribute__((target("pclmul,sse4.1"))) static inline __m128i fold(__m128i x, __m128i kd,
                                                                    __m128i y)
{
    __m128i hi = _mm_clmulepi64_si128(x, kd, 0x00); /* low half * x^(d+63) */
    __m128i lo = _mm_clmulepi64_si128(x, kd, 0x11); /* high half * x^(d-1) */
    return _mm_xor_si128(_mm_xor_si128(hi, lo), y);
}

/* The register after n >= 64 bytes (a multiple of 16): the bytes folded
 * down to 16 with the same CRC, then those through the tables. */
__attribute__((target("pclmul,sse4.1"))) static uint64_t
clmul_raw(const struct crc_kind *k, uint64_t crc, const uint8_t *p, size_t n)
{
    __m128i k512 = _mm_set_epi64x((long long)k->k512[1], (long long)k->k512[0]);
    __m128i k128 = _mm_set_epi64x((long long)k->k128[1], (long long)k->k128[0]);
    __m128i a = _mm_loadu_si128((const __m128i *)p), b = _mm_loadu_si128((const __m128i *)p + 1),
            c = _mm_loadu_si128((const __m128i *)p + 2),
            d = _mm_loadu_si128((const __m128i *)p + 3);
    uint8_t last[16];

    /* The register joins the first bytes (linearity: a CRC from crc over
     * M is one from 0 over M with crc added to its first bytes). */
    a = _mm_xor_si128(a, _mm_set_epi64x(0, (long long)crc));
    p += 64;
    n -= 64;
    for (; n >= 64; n -= 64, p += 64) {
        a = fold(a, k512, _mm_loadu_si128((const __m128i *)p));
        b = fold(b, k512, _mm_loadu_si128((const __m128i *)p + 1));
        c = fold(c, k512, _mm_loadu_si128((const __m128i *)p + 2));
        d = fold(d, k512, _mm_loadu_si128((const __m128i *)p + 3));
    }
    a = fold(a, k128, b);
    a = fold(a, k128, c);
    a = fold(a, k128, d);
    for (; n >= 16; n -= 16, p += 16)
        a = fold(a, k128, _mm_loadu_si128((const __m128i *)p));
    _mm_storeu_si128((__m128i *)last, a);
    return tab_raw(k, 0, last, sizeof(last));
}
#endif

static uint64_t crc_raw(const struct crc_kind *k, uint64_t crc, const uint8_t *p, size_t n)
{
#ifdef RIO_CRC_CLMUL
    if (clmul_hw && n >= 128) {
        size_t body = n & ~(size_t)15;
        crc = clmul_raw(k, crc, p, body);
        p += body;
        n -= body;
    }
#endif
    return tab_raw(k, crc, p, n);
}

uint64_t rio__crc64nvme(uint64_t crc, const void *p, size_t n)
{
    pthread_once(&once, crc_init);
    return ~crc_raw(&crc64k, ~crc, p, n);
}

uint32_t rio__crc32(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&once, crc_init);
    return (uint32_t)~crc_raw(&crc32k, (uint32_t)~crc, p, n);
}

uint64_t rio__crc64nvme_sw(uint64_t crc, const void *p, size_t n)
{
    pthread_once(&once, crc_init);
    return ~tab_raw(&crc64k, ~crc, p, n);
}

uint32_t rio__crc32_sw(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&once, crc_init);
    return (uint32_t)~tab_raw(&crc32k, (uint32_t)~crc, p, n);
}
