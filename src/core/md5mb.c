/* SPDX-License-Identifier: Apache-2.0 */
/*
 * MD5 of several buffers at once (an S3 part's Content-MD5, a chunk of
 * each): MD5 is one long chain of dependent 32-bit steps, so one buffer
 * keeps a core's vector units idle, but the same step for 16 (AVX-512) or
 * 8 (AVX2) independent buffers is one vector instruction. Each lane holds
 * one buffer's state; a 64-byte block of each is loaded and transposed so
 * that vector j holds word j of every lane. Buffers of unequal length run
 * together while each has whole blocks left (a lane that has none left is
 * carried unchanged: its additions are masked); what is left of each, less
 * than a block, and the padding are finished one lane at a time.
 * docs/tuning.md has the rates.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>

#include "core/checksum.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define RIO_MD5_LANES_X86 1
#endif

/* The 64 steps: function, the registers in turn, message word, the
 * constant floor(|sin(i + 1)| * 2^32), rotation. */
#define MD5_STEPS(STEP)                                                                            \
    STEP(F, a, b, c, d, 0, 0xd76aa478u, 7)                                                         \
    STEP(F, d, a, b, c, 1, 0xe8c7b756u, 12)                                                        \
    STEP(F, c, d, a, b, 2, 0x242070dbu, 17)                                                        \
    STEP(F, b, c, d, a, 3, 0xc1bdceeeu, 22)                                                        \
    STEP(F, a, b, c, d, 4, 0xf57c0fafu, 7)                                                         \
    STEP(F, d, a, b, c, 5, 0x4787c62au, 12)                                                        \
    STEP(F, c, d, a, b, 6, 0xa8304613u, 17)                                                        \
    STEP(F, b, c, d, a, 7, 0xfd469501u, 22)                                                        \
    STEP(F, a, b, c, d, 8, 0x698098d8u, 7)                                                         \
    STEP(F, d, a, b, c, 9, 0x8b44f7afu, 12)                                                        \
    STEP(F, c, d, a, b, 10, 0xffff5bb1u, 17)                                                       \
    STEP(F, b, c, d, a, 11, 0x895cd7beu, 22)                                                       \
    STEP(F, a, b, c, d, 12, 0x6b901122u, 7)                                                        \
    STEP(F, d, a, b, c, 13, 0xfd987193u, 12)                                                       \
    STEP(F, c, d, a, b, 14, 0xa679438eu, 17)                                                       \
    STEP(F, b, c, d, a, 15, 0x49b40821u, 22)                                                       \
    STEP(G, a, b, c, d, 1, 0xf61e2562u, 5)                                                         \
    STEP(G, d, a, b, c, 6, 0xc040b340u, 9)                                                         \
    STEP(G, c, d, a, b, 11, 0x265e5a51u, 14)                                                       \
    STEP(G, b, c, d, a, 0, 0xe9b6c7aau, 20)                                                        \
    STEP(G, a, b, c, d, 5, 0xd62f105du, 5)                                                         \
    STEP(G, d, a, b, c, 10, 0x02441453u, 9)                                                        \
    STEP(G, c, d, a, b, 15, 0xd8a1e681u, 14)                                                       \
    STEP(G, b, c, d, a, 4, 0xe7d3fbc8u, 20)                                                        \
    STEP(G, a, b, c, d, 9, 0x21e1cde6u, 5)                                                         \
    STEP(G, d, a, b, c, 14, 0xc33707d6u, 9)                                                        \
    STEP(G, c, d, a, b, 3, 0xf4d50d87u, 14)                                                        \
    STEP(G, b, c, d, a, 8, 0x455a14edu, 20)                                                        \
    STEP(G, a, b, c, d, 13, 0xa9e3e905u, 5)                                                        \
    STEP(G, d, a, b, c, 2, 0xfcefa3f8u, 9)                                                         \
    STEP(G, c, d, a, b, 7, 0x676f02d9u, 14)                                                        \
    STEP(G, b, c, d, a, 12, 0x8d2a4c8au, 20)                                                       \
    STEP(H, a, b, c, d, 5, 0xfffa3942u, 4)                                                         \
    STEP(H, d, a, b, c, 8, 0x8771f681u, 11)                                                        \
    STEP(H, c, d, a, b, 11, 0x6d9d6122u, 16)                                                       \
    STEP(H, b, c, d, a, 14, 0xfde5380cu, 23)                                                       \
    STEP(H, a, b, c, d, 1, 0xa4beea44u, 4)                                                         \
    STEP(H, d, a, b, c, 4, 0x4bdecfa9u, 11)                                                        \
    STEP(H, c, d, a, b, 7, 0xf6bb4b60u, 16)                                                        \
    STEP(H, b, c, d, a, 10, 0xbebfbc70u, 23)                                                       \
    STEP(H, a, b, c, d, 13, 0x289b7ec6u, 4)                                                        \
    STEP(H, d, a, b, c, 0, 0xeaa127fau, 11)                                                        \
    STEP(H, c, d, a, b, 3, 0xd4ef3085u, 16)                                                        \
    STEP(H, b, c, d, a, 6, 0x04881d05u, 23)                                                        \
    STEP(H, a, b, c, d, 9, 0xd9d4d039u, 4)                                                         \
    STEP(H, d, a, b, c, 12, 0xe6db99e5u, 11)                                                       \
    STEP(H, c, d, a, b, 15, 0x1fa27cf8u, 16)                                                       \
    STEP(H, b, c, d, a, 2, 0xc4ac5665u, 23)                                                        \
    STEP(I, a, b, c, d, 0, 0xf4292244u, 6)                                                         \
    STEP(I, d, a, b, c, 7, 0x432aff97u, 10)                                                        \
    STEP(I, c, d, a, b, 14, 0xab9423a7u, 15)                                                       \
    STEP(I, b, c, d, a, 5, 0xfc93a039u, 21)                                                        \
    STEP(I, a, b, c, d, 12, 0x655b59c3u, 6)                                                        \
    STEP(I, d, a, b, c, 3, 0x8f0ccc92u, 10)                                                        \
    STEP(I, c, d, a, b, 10, 0xffeff47du, 15)                                                       \
    STEP(I, b, c, d, a, 1, 0x85845dd1u, 21)                                                        \
    STEP(I, a, b, c, d, 8, 0x6fa87e4fu, 6)                                                         \
    STEP(I, d, a, b, c, 15, 0xfe2ce6e0u, 10)                                                       \
    STEP(I, c, d, a, b, 6, 0xa3014314u, 15)                                                        \
    STEP(I, b, c, d, a, 13, 0x4e0811a1u, 21)                                                       \
    STEP(I, a, b, c, d, 4, 0xf7537e82u, 6)                                                         \
    STEP(I, d, a, b, c, 11, 0xbd3af235u, 10)                                                       \
    STEP(I, c, d, a, b, 2, 0x2ad7d2bbu, 15)                                                        \
    STEP(I, b, c, d, a, 9, 0xeb86d391u, 21)

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const uint32_t md5_iv[4] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u};

/* ------------------------------------------------------------ one lane */

#define SF(b, c, d) ((((c) ^ (d)) & (b)) ^ (d))
#define SG(b, c, d) ((((b) ^ (c)) & (d)) ^ (c))
#define SH(b, c, d) ((b) ^ (c) ^ (d))
#define SI(b, c, d) ((c) ^ ((b) | ~(d)))
#define SROTL(x, s) (((x) << (s)) | ((x) >> (32 - (s))))
#define SSTEP(f, a, b, c, d, g, k, s)                                                              \
    a += S##f(b, c, d) + w[g] + (k);                                                               \
    a = SROTL(a, s) + b;

static void block1(uint32_t st[4], const uint8_t *p)
{
    uint32_t w[16], a = st[0], b = st[1], c = st[2], d = st[3];

    for (int i = 0; i < 16; i++)
        w[i] = get32(p + 4 * i);
#define STEP SSTEP
    MD5_STEPS(STEP)
#undef STEP
    st[0] += a;
    st[1] += b;
    st[2] += c;
    st[3] += d;
}

/* A lane's last bytes (tail, under 64 of them) and the padding, for a
 * buffer of len bytes in all; the digest into out. */
static void finish1(uint32_t st[4], const uint8_t *tail, size_t len, uint8_t out[16])
{
    uint8_t b[128] = {0};
    size_t t = len % 64, n = t < 56 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;

    memcpy(b, tail, t);
    b[t] = 0x80;
    for (int i = 0; i < 8; i++)
        b[n - 8 + i] = (uint8_t)(bits >> (8 * i));
    block1(st, b);
    if (n == 128)
        block1(st, b + 64);
    for (int i = 0; i < 16; i++)
        out[i] = (uint8_t)(st[i / 4] >> (8 * (i % 4)));
}

#ifdef RIO_MD5_LANES_X86

static const uint8_t zero_block[64];

/* -------------------------------------------------------- 16 lanes (AVX-512) */

#define ZF(b, c, d) _mm512_ternarylogic_epi32(b, c, d, 0xca) /* b ? c : d */
#define ZG(b, c, d) _mm512_ternarylogic_epi32(d, b, c, 0xca) /* d ? b : c */
#define ZH(b, c, d) _mm512_ternarylogic_epi32(b, c, d, 0x96) /* b ^ c ^ d */
#define ZI(b, c, d) _mm512_ternarylogic_epi32(b, c, d, 0x39) /* c ^ (b | ~d) */
#define ZSTEP(f, a, b, c, d, g, k, s)                                                              \
    a = _mm512_add_epi32(a, _mm512_add_epi32(w[g], _mm512_set1_epi32((int)(k))));                  \
    a = _mm512_add_epi32(a, Z##f(b, c, d));                                                        \
    a = _mm512_add_epi32(_mm512_rol_epi32(a, s), b);

__attribute__((target("avx512f"))) static void lanes16(const uint8_t *const *p, const size_t *len,
                                                       unsigned n, uint32_t st[][4])
{
    __m512i sa = _mm512_set1_epi32((int)md5_iv[0]), sb = _mm512_set1_epi32((int)md5_iv[1]);
    __m512i sc = _mm512_set1_epi32((int)md5_iv[2]), sd = _mm512_set1_epi32((int)md5_iv[3]);
    size_t most = 0, every = SIZE_MAX;
    uint32_t out[4][16];

    for (unsigned i = 0; i < n; i++) {
        most = len[i] / 64 > most ? len[i] / 64 : most;
        every = len[i] / 64 < every ? len[i] / 64 : every;
    }
    for (size_t blk = 0; blk < most; blk++) {
        __m512i r[16], t[16], w[16], a, b, c, d;
        __mmask16 on = 0;

        if (blk < every) { /* every lane of the n has this block */
            on = (__mmask16)((1u << n) - 1);
            for (unsigned i = 0; i < 16; i++)
                r[i] = _mm512_loadu_si512((const void *)(i < n ? p[i] + blk * 64 : zero_block));
        } else {
            for (unsigned i = 0; i < 16; i++) {
                const uint8_t *q = zero_block;
                if (i < n && blk < len[i] / 64) {
                    q = p[i] + blk * 64;
                    on |= (__mmask16)(1u << i);
                }
                r[i] = _mm512_loadu_si512((const void *)q);
            }
        }
        /* Transpose: w[j] lane i = word j of lane i's block. */
        for (int k = 0; k < 8; k++) {
            t[2 * k] = _mm512_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
            t[2 * k + 1] = _mm512_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
        }
        for (int k = 0; k < 4; k++) {
            r[4 * k] = _mm512_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
            r[4 * k + 1] = _mm512_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
            r[4 * k + 2] = _mm512_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
            r[4 * k + 3] = _mm512_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
        }
        /* r[4k + m], 128-bit block q: word 4q + m of lanes 4k .. 4k + 3. */
        for (int m = 0; m < 4; m++) {
            __m512i p0 = _mm512_shuffle_i32x4(r[m], r[4 + m], 0x44);
            __m512i p1 = _mm512_shuffle_i32x4(r[m], r[4 + m], 0xee);
            __m512i p2 = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0x44);
            __m512i p3 = _mm512_shuffle_i32x4(r[8 + m], r[12 + m], 0xee);
            w[m] = _mm512_shuffle_i32x4(p0, p2, 0x88);
            w[4 + m] = _mm512_shuffle_i32x4(p0, p2, 0xdd);
            w[8 + m] = _mm512_shuffle_i32x4(p1, p3, 0x88);
            w[12 + m] = _mm512_shuffle_i32x4(p1, p3, 0xdd);
        }
        a = sa;
        b = sb;
        c = sc;
        d = sd;
#define STEP ZSTEP
        MD5_STEPS(STEP)
#undef STEP
        sa = _mm512_mask_add_epi32(sa, on, sa, a);
        sb = _mm512_mask_add_epi32(sb, on, sb, b);
        sc = _mm512_mask_add_epi32(sc, on, sc, c);
        sd = _mm512_mask_add_epi32(sd, on, sd, d);
    }
    _mm512_storeu_si512((void *)out[0], sa);
    _mm512_storeu_si512((void *)out[1], sb);
    _mm512_storeu_si512((void *)out[2], sc);
    _mm512_storeu_si512((void *)out[3], sd);
    for (unsigned i = 0; i < n; i++)
        for (int j = 0; j < 4; j++)
            st[i][j] = out[j][i];
}

/* ------------------------------------------------------------ 8 lanes (AVX2) */

#define YROTL(x, s) _mm256_or_si256(_mm256_slli_epi32(x, s), _mm256_srli_epi32(x, 32 - (s)))
#define YF(b, c, d) _mm256_xor_si256(_mm256_and_si256(_mm256_xor_si256(c, d), b), d)
#define YG(b, c, d) _mm256_xor_si256(_mm256_and_si256(_mm256_xor_si256(b, c), d), c)
#define YH(b, c, d) _mm256_xor_si256(_mm256_xor_si256(b, c), d)
#define YI(b, c, d) _mm256_xor_si256(c, _mm256_or_si256(b, _mm256_xor_si256(d, ones)))
#define YSTEP(f, a, b, c, d, g, k, s)                                                              \
    a = _mm256_add_epi32(a, _mm256_add_epi32(w[g], _mm256_set1_epi32((int)(k))));                  \
    a = _mm256_add_epi32(a, Y##f(b, c, d));                                                        \
    a = _mm256_add_epi32(YROTL(a, s), b);

/* 8 x 8 words: w[j] lane i = r[i] word j. */
__attribute__((target("avx2"))) static void transpose8(const __m256i r[8], __m256i w[8])
{
    __m256i t[8], u[8];

    for (int k = 0; k < 4; k++) {
        t[2 * k] = _mm256_unpacklo_epi32(r[2 * k], r[2 * k + 1]);
        t[2 * k + 1] = _mm256_unpackhi_epi32(r[2 * k], r[2 * k + 1]);
    }
    for (int k = 0; k < 2; k++) {
        u[4 * k] = _mm256_unpacklo_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 1] = _mm256_unpackhi_epi64(t[4 * k], t[4 * k + 2]);
        u[4 * k + 2] = _mm256_unpacklo_epi64(t[4 * k + 1], t[4 * k + 3]);
        u[4 * k + 3] = _mm256_unpackhi_epi64(t[4 * k + 1], t[4 * k + 3]);
    }
    for (int m = 0; m < 4; m++) {
        w[m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x20);
        w[4 + m] = _mm256_permute2x128_si256(u[m], u[4 + m], 0x31);
    }
}

__attribute__((target("avx2"))) static void lanes8(const uint8_t *const *p, const size_t *len,
                                                   unsigned n, uint32_t st[][4])
{
    const __m256i ones = _mm256_set1_epi32(-1);
    __m256i sa = _mm256_set1_epi32((int)md5_iv[0]), sb = _mm256_set1_epi32((int)md5_iv[1]);
    __m256i sc = _mm256_set1_epi32((int)md5_iv[2]), sd = _mm256_set1_epi32((int)md5_iv[3]);
    size_t most = 0, every = SIZE_MAX;
    uint32_t out[4][8];

    for (unsigned i = 0; i < n; i++) {
        most = len[i] / 64 > most ? len[i] / 64 : most;
        every = len[i] / 64 < every ? len[i] / 64 : every;
    }
    for (size_t blk = 0; blk < most; blk++) {
        __m256i lo[8], hi[8], w[16], a, b, c, d, on;
        int32_t m[8];

        for (unsigned i = 0; i < 8; i++) {
            const uint8_t *q = zero_block;
            m[i] = 0;
            if (i < n && (blk < every || blk < len[i] / 64)) {
                q = p[i] + blk * 64;
                m[i] = -1;
            }
            lo[i] = _mm256_loadu_si256((const __m256i *)q);
            hi[i] = _mm256_loadu_si256((const __m256i *)(q + 32));
        }
        on = _mm256_loadu_si256((const __m256i *)m);
        transpose8(lo, w);
        transpose8(hi, w + 8);
        a = sa;
        b = sb;
        c = sc;
        d = sd;
#define STEP YSTEP
        MD5_STEPS(STEP)
#undef STEP
        sa = _mm256_add_epi32(sa, _mm256_and_si256(a, on));
        sb = _mm256_add_epi32(sb, _mm256_and_si256(b, on));
        sc = _mm256_add_epi32(sc, _mm256_and_si256(c, on));
        sd = _mm256_add_epi32(sd, _mm256_and_si256(d, on));
    }
    _mm256_storeu_si256((__m256i *)out[0], sa);
    _mm256_storeu_si256((__m256i *)out[1], sb);
    _mm256_storeu_si256((__m256i *)out[2], sc);
    _mm256_storeu_si256((__m256i *)out[3], sd);
    for (unsigned i = 0; i < n; i++)
        for (int j = 0; j < 4; j++)
            st[i][j] = out[j][i];
}

#endif /* RIO_MD5_LANES_X86 */

static unsigned cpu_lanes(void)
{
#ifdef RIO_MD5_LANES_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return 16;
    if (__builtin_cpu_supports("avx2"))
        return 8;
#endif
    return 1;
}

/* What the CPU gives, or fewer where RIO_MD5_LANES says (1, 8 or 16: to
 * compare, or to rule a vector unit out). */
unsigned rio__md5_lanes(void)
{
    static unsigned lanes;
    unsigned l = __atomic_load_n(&lanes, __ATOMIC_RELAXED);
    const char *v;

    if (l)
        return l;
    l = cpu_lanes();
    if ((v = getenv("RIO_MD5_LANES")) && *v) {
        if (!strcmp(v, "1") || !strcmp(v, "8") || !strcmp(v, "16")) {
            unsigned want = (unsigned)atoi(v);
            l = want < l ? want : l;
        } else {
            fprintf(stderr, "railio: RIO_MD5_LANES=%.32s: expected 1, 8 or 16; using %u\n", v, l);
        }
    }
    __atomic_store_n(&lanes, l, __ATOMIC_RELAXED);
    return l;
}

/* The whole blocks of up to `lanes` buffers, then each one's tail. */
static void group(unsigned lanes, const uint8_t *const *p, const size_t *len, unsigned n,
                  uint8_t (*out)[16])
{
    uint32_t st[16][4];

#ifdef RIO_MD5_LANES_X86
    if (lanes == 16)
        lanes16(p, len, n, st);
    else
        lanes8(p, len, n, st);
#else
    (void)lanes;
    for (unsigned i = 0; i < n; i++) {
        memcpy(st[i], md5_iv, sizeof(md5_iv));
        for (size_t o = 0; o + 64 <= len[i]; o += 64)
            block1(st[i], p[i] + o);
    }
#endif
    for (unsigned i = 0; i < n; i++)
        finish1(st[i], p[i] + len[i] / 64 * 64, len[i], out[i]);
}

int rio__md5_many_lanes(unsigned lanes, const void *const *p, const size_t *len, unsigned n,
                        uint8_t (*out)[16])
{
    if (lanes > cpu_lanes())
        lanes = cpu_lanes();
    if (lanes == 1 || (lanes != 8 && lanes != 16)) {
        for (unsigned i = 0; i < n; i++) {
            unsigned dl = 0;
            if (EVP_Digest(p[i], len[i], out[i], &dl, EVP_md5(), NULL) != 1 || dl != 16)
                return -ENOMEM;
        }
        return 0;
    }
    for (unsigned i = 0; i < n; i += lanes) {
        unsigned k = n - i < lanes ? n - i : lanes;
        /* Up to 8 left: the narrower vectors do as much in half the work. */
        unsigned use = lanes == 16 && k <= 8 ? 8 : lanes;
        if (k == 1)
            return rio__md5_many_lanes(1, p + i, len + i, 1, out + i);
        group(use, (const uint8_t *const *)(p + i), len + i, k, out + i);
    }
    return 0;
}

int rio__md5_many(const void *const *p, const size_t *len, unsigned n, uint8_t (*out)[16])
{
    return rio__md5_many_lanes(rio__md5_lanes(), p, len, n, out);
}
