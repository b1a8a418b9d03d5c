/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checksums: xxh3-64 per chunk (libxxhash), the fast etag derived from the
 * chunk list (xxh3-128), the MD5 etag of the whole byte stream (OpenSSL
 * EVP) and CRC32C (S3's per-part checksum). Each picks the fastest
 * implementation for the CPU at run time: libxxhash's plain XXH3_64bits is
 * its portable SSE2 build, its dispatcher uses AVX2/AVX-512 when the CPU
 * has them, several times faster; CRC32C uses the SSE4.2 crc32 instruction
 * on three interleaved streams (docs/tuning.md has the cost of each).
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include <openssl/evp.h>
#define XXH_STATIC_LINKING_ONLY /* XXH3_state_t on the stack */
#include <xxhash.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xxh_x86dispatch.h>
#define RIO_XXH3 XXH3_64bits_dispatch
#define RIO_XXH3_UPDATE XXH3_64bits_update_dispatch
#else
#define RIO_XXH3 XXH3_64bits
#define RIO_XXH3_UPDATE XXH3_64bits_update
#endif

#include "core/checksum.h"
#include "core/le.h"

#if defined(__x86_64__)
#include <nmmintrin.h>
#define RIO_CRC32C_HW 1
#endif

uint64_t rio__xxh3(const void *p, size_t n)
{
    return RIO_XXH3(p, n);
}

struct rio_xxh3_stream *rio__xxh3_stream_new(void)
{
    XXH3_state_t *st = XXH3_createState(); /* aligned as the state wants */

    if (st)
        XXH3_64bits_reset(st);
    return (struct rio_xxh3_stream *)st;
}

void rio__xxh3_stream_reset(struct rio_xxh3_stream *x)
{
    XXH3_64bits_reset((XXH3_state_t *)x);
}

void rio__xxh3_stream_update(struct rio_xxh3_stream *x, const void *p, size_t n)
{
    (void)RIO_XXH3_UPDATE((XXH3_state_t *)x, p, n); /* fails only on NULL */
}

uint64_t rio__xxh3_stream_digest(const struct rio_xxh3_stream *x)
{
    return XXH3_64bits_digest((const XXH3_state_t *)x);
}

void rio__xxh3_stream_free(struct rio_xxh3_stream *x)
{
    XXH3_freeState((XXH3_state_t *)x);
}

static void hex_of(const uint8_t *b, size_t n, char *out)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 0xf];
    }
    out[2 * n] = '\0';
}

void rio__etag_fast(const uint64_t *xxh, uint64_t nchunks, uint64_t size, uint64_t chunk_size,
                    char hex[33])
{
    /* A tag first, so the etag of one geometry never equals the xxh3-128
     * of some other list of words. */
    static const char tag[8] = "rioetag1";
    XXH3_state_t st;
    uint8_t buf[8 * 64];
    XXH128_canonical_t canon;

    XXH3_128bits_reset(&st);
    memcpy(buf, tag, 8);
    rio__le64_put(buf + 8, size);
    rio__le64_put(buf + 16, chunk_size);
    rio__le64_put(buf + 24, nchunks);
    XXH3_128bits_update(&st, buf, 32);
    for (uint64_t i = 0; i < nchunks;) {
        size_t k = 0;
        for (; k < 64 && i < nchunks; k++, i++)
            rio__le64_put(buf + 8 * k, xxh[i]);
        XXH3_128bits_update(&st, buf, 8 * k);
    }
    XXH128_canonicalFromHash(&canon, XXH3_128bits_digest(&st));
    hex_of(canon.digest, 16, hex);
}

/* ------------------------------------------------------------- CRC32C */

#define CRC32C_POLY 0x82f63b78u /* reflected Castagnoli */

/* Slicing-by-8 tables: crc_tab[k][b] is the CRC of byte b followed by k
 * zero bytes. */
static uint32_t crc_tab[8][256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

#ifdef RIO_CRC32C_HW
/* The hardware path runs three streams of LONG (then SHORT) bytes at once
 * and folds them with these: shift_x[k][b] moves a CRC past LONG or SHORT
 * zero bytes, byte k of it at a time (Mark Adler's method). */
#define CRC_LONG 8192u
#define CRC_SHORT 256u
static uint32_t shift_long[4][256], shift_short[4][256];
static int crc_hw;

static uint32_t gf2_times(const uint32_t *mat, uint32_t vec)
{
    uint32_t sum = 0;
    while (vec) {
        if (vec & 1)
            sum ^= *mat;
        vec >>= 1;
        mat++;
    }
    return sum;
}

static void gf2_square(uint32_t *sq, const uint32_t *mat)
{
    for (unsigned n = 0; n < 32; n++)
        sq[n] = gf2_times(mat, mat[n]);
}

/* The operator that appends len zero bytes to a CRC, into even[32]. */
static void zeros_op(uint32_t *even, size_t len)
{
    uint32_t odd[32];
    uint32_t row = 1;

    odd[0] = CRC32C_POLY; /* one zero bit */
    for (unsigned n = 1; n < 32; n++) {
        odd[n] = row;
        row <<= 1;
    }
    gf2_square(even, odd); /* two zero bits */
    gf2_square(odd, even); /* four */
    /* The first square puts 8 zero bits (one byte) in even. */
    do {
        gf2_square(even, odd);
        len >>= 1;
        if (len == 0)
            return;
        gf2_square(odd, even);
        len >>= 1;
    } while (len);
    memcpy(even, odd, sizeof(odd));
}

static void zeros_tables(uint32_t zeros[4][256], size_t len)
{
    uint32_t op[32];

    zeros_op(op, len);
    for (unsigned n = 0; n < 256; n++) {
        zeros[0][n] = gf2_times(op, n);
        zeros[1][n] = gf2_times(op, n << 8);
        zeros[2][n] = gf2_times(op, n << 16);
        zeros[3][n] = gf2_times(op, n << 24);
    }
}

static uint32_t crc_shift(uint32_t zeros[4][256], uint32_t crc)
{
    return zeros[0][crc & 0xff] ^ zeros[1][(crc >> 8) & 0xff] ^ zeros[2][(crc >> 16) & 0xff] ^
           zeros[3][crc >> 24];
}
#endif

static void crc_init(void)
{
    for (unsigned n = 0; n < 256; n++) {
        uint32_t crc = n;
        for (int k = 0; k < 8; k++)
            crc = crc & 1 ? (crc >> 1) ^ CRC32C_POLY : crc >> 1;
        crc_tab[0][n] = crc;
    }
    for (unsigned n = 0; n < 256; n++) {
        uint32_t crc = crc_tab[0][n];
        for (int k = 1; k < 8; k++) {
            crc = crc_tab[0][crc & 0xff] ^ (crc >> 8);
            crc_tab[k][n] = crc;
        }
    }
#ifdef RIO_CRC32C_HW
    zeros_tables(shift_long, CRC_LONG);
    zeros_tables(shift_short, CRC_SHORT);
    __builtin_cpu_init();
    crc_hw = __builtin_cpu_supports("sse4.2");
#endif
}

static uint32_t crc_sw_raw(uint32_t crc, const uint8_t *p, size_t n)
{
    while (n && ((uintptr_t)p & 7)) {
        crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
        n--;
    }
    while (n >= 8) {
        uint64_t w = rio__le64_get(p) ^ crc;
        crc = crc_tab[7][w & 0xff] ^ crc_tab[6][(w >> 8) & 0xff] ^ crc_tab[5][(w >> 16) & 0xff] ^
              crc_tab[4][(w >> 24) & 0xff] ^ crc_tab[3][(w >> 32) & 0xff] ^
              crc_tab[2][(w >> 40) & 0xff] ^ crc_tab[1][(w >> 48) & 0xff] ^ crc_tab[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = crc_tab[0][(crc ^ *p++) & 0xff] ^ (crc >> 8);
    return crc;
}

uint32_t rio__crc32c_sw(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
    return ~crc_sw_raw(~crc, p, n);
}

#ifdef RIO_CRC32C_HW
static uint64_t load64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Three streams of len bytes each at p, p + len, p + 2 len, folded. */
#define CRC_TRIPLE(len, shift)                                                                     \
    while (n >= 3 * (len)) {                                                                       \
        uint64_t c1 = 0, c2 = 0;                                                                   \
        const uint8_t *end = p + (len);                                                            \
        do {                                                                                       \
            c0 = _mm_crc32_u64(c0, load64(p));                                                     \
            c1 = _mm_crc32_u64(c1, load64(p + (len)));                                             \
            c2 = _mm_crc32_u64(c2, load64(p + 2 * (len)));                                         \
            p += 8;                                                                                \
        } while (p < end);                                                                         \
        c0 = crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c1;                                        \
        c0 = crc_shift(shift, (uint32_t)c0) ^ (uint32_t)c2;                                        \
        p += 2 * (len);                                                                            \
        n -= 3 * (len);                                                                            \
    }

__attribute__((target("sse4.2"))) static uint32_t crc_hw_raw(uint32_t crc, const uint8_t *p,
                                                             size_t n)
{
    uint64_t c0 = crc;

    while (n && ((uintptr_t)p & 7)) {
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
        n--;
    }
    CRC_TRIPLE(CRC_LONG, shift_long)
    CRC_TRIPLE(CRC_SHORT, shift_short)
    while (n >= 8) {
        c0 = _mm_crc32_u64(c0, load64(p));
        p += 8;
        n -= 8;
    }
    while (n--)
        c0 = _mm_crc32_u8((uint32_t)c0, *p++);
    return (uint32_t)c0;
}
#endif

uint32_t rio__crc32c(uint32_t crc, const void *p, size_t n)
{
    pthread_once(&crc_once, crc_init);
#ifdef RIO_CRC32C_HW
    if (crc_hw)
        return ~crc_hw_raw(~crc, p, n);
#endif
    return ~crc_sw_raw(~crc, p, n);
}

int rio__md5_init(struct rio_md5 *m)
{
    EVP_MD_CTX *ctx;

    m->ctx = NULL;
    ctx = EVP_MD_CTX_new();
    if (!ctx)
        return -ENOMEM;
    if (EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1)
        goto err_ctx;
    m->ctx = ctx;
    return 0;
err_ctx:
    EVP_MD_CTX_free(ctx);
    return -EIO;
}

int rio__md5_update(struct rio_md5 *m, const void *p, size_t n)
{
    if (!m->ctx)
        return -EINVAL;
    if (n == 0)
        return 0;
    if (EVP_DigestUpdate(m->ctx, p, n) != 1)
        return -EIO;
    return 0;
}

int rio__md5_final_raw(struct rio_md5 *m, uint8_t out[16])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    int ret = 0;

    if (!m->ctx)
        return -EINVAL;
    if (EVP_DigestFinal_ex(m->ctx, md, &len) != 1 || len != 16)
        ret = -EIO;
    else
        memcpy(out, md, 16);
    rio__md5_cleanup(m);
    return ret;
}

int rio__md5_final(struct rio_md5 *m, char hex[33])
{
    uint8_t md[16];
    int ret = rio__md5_final_raw(m, md);

    hex[0] = '\0';
    if (ret == 0)
        hex_of(md, 16, hex);
    return ret;
}

int rio__md5_peek(const struct rio_md5 *m, uint8_t out[16])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    EVP_MD_CTX *cp;
    int ret = 0;

    if (!m->ctx)
        return -EINVAL;
    cp = EVP_MD_CTX_new();
    if (!cp)
        return -ENOMEM;
    if (EVP_MD_CTX_copy_ex(cp, m->ctx) != 1 || EVP_DigestFinal_ex(cp, md, &len) != 1 || len != 16)
        ret = -EIO;
    else
        memcpy(out, md, 16);
    EVP_MD_CTX_free(cp);
    return ret;
}

void rio__md5_cleanup(struct rio_md5 *m)
{
    if (!m)
        return;
    EVP_MD_CTX_free(m->ctx);
    m->ctx = NULL;
}
