/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: xxh3-64, the streaming MD5 etag, the MD5s of several buffers
 * at once, the CRCs (src/core/checksum.c, src/core/md5mb.c, src/core/crc.c). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/checksum.h"
#include "t.h"

TEST(xxh3_known_values)
{
    T_EQ(rio__xxh3("", 0), 0x2D06800538D394C2ull);
    T_EQ(rio__xxh3("abc", 3), 0x78AF5F94892F3950ull);
    T_NE(rio__xxh3("abd", 3), rio__xxh3("abc", 3));
}

/* The streaming xxh3 (a PUT chunk hashed as railiod receives it) equals
 * the one-shot hash whatever the pieces: empty, one byte, the sizes around
 * xxh3's internal block (1 KiB stripes, 256-byte buffer) and whole. Reset
 * starts over. */
TEST(xxh3_stream_equals_one_shot)
{
    const size_t n = 3u << 20;
    uint8_t *b = malloc(n);
    struct rio_xxh3_stream *x = rio__xxh3_stream_new();
    static const size_t cuts[] = {1, 7, 240, 255, 256, 1024, 1025, 65536, 262144, 3u << 20};

    T_TRUE(b != NULL && x != NULL);
    t_fill_pattern(b, n, 42);
    T_EQ(rio__xxh3_stream_digest(x), rio__xxh3("", 0));
    for (size_t k = 0; k < sizeof(cuts) / sizeof(cuts[0]); k++) {
        rio__xxh3_stream_reset(x);
        for (size_t off = 0; off < n;) {
            size_t m = cuts[k] < n - off ? cuts[k] : n - off;
            rio__xxh3_stream_update(x, b + off, 0); /* an empty piece changes nothing */
            rio__xxh3_stream_update(x, b + off, m);
            off += m;
        }
        T_EQ(rio__xxh3_stream_digest(x), rio__xxh3(b, n));
    }
    /* Pieces of every size from 1 up, and a one-byte change is seen. */
    rio__xxh3_stream_reset(x);
    for (size_t off = 0, m = 1; off < n; off += m, m++)
        rio__xxh3_stream_update(x, b + off, m < n - off ? m : n - off);
    T_EQ(rio__xxh3_stream_digest(x), rio__xxh3(b, n));
    b[n / 2] ^= 1;
    T_NE(rio__xxh3_stream_digest(x), rio__xxh3(b, n));
    rio__xxh3_stream_free(x);
    rio__xxh3_stream_free(NULL);
    free(b);
}

static void md5_of(const void *p, size_t n, char hex[33])
{
    struct rio_md5 m;

    T_OK(rio__md5_init(&m));
    T_OK(rio__md5_update(&m, p, n));
    T_OK(rio__md5_final(&m, hex));
    T_NULL(m.ctx);
}

TEST(md5_known_values)
{
    char hex[33];

    md5_of("", 0, hex);
    T_STREQ(hex, "d41d8cd98f00b204e9800998ecf8427e");
    md5_of("abc", 3, hex);
    T_STREQ(hex, "900150983cd24fb0d6963f7d28e17f72");
    md5_of("The quick brown fox jumps over the lazy dog", 43, hex);
    T_STREQ(hex, "9e107d9d372bb6826bd81d3542a419d6");
}

TEST(md5_incremental_equals_one_shot)
{
    size_t n = (1u << 20) + 13, off, step;
    unsigned char *buf = malloc(n);
    char one[33], inc[33];
    struct rio_md5 m;

    T_NOTNULL(buf);
    t_fill_pattern(buf, n, 42);
    md5_of(buf, n, one);

    T_OK(rio__md5_init(&m));
    for (off = 0, step = 1; off < n; off += step, step = step * 3 + 1) {
        size_t len = step < n - off ? step : n - off;
        T_OK(rio__md5_update(&m, buf + off, len));
        T_OK(rio__md5_update(&m, buf, 0));
    }
    T_OK(rio__md5_final(&m, inc));
    T_STREQ(inc, one);
    free(buf);
}

/*
 * The MD5s of several buffers at once (16 lanes with AVX-512, 8 with AVX2,
 * else one at a time): each equal to the one-shot MD5 of its buffer, for
 * every width this CPU has (a wider one than it has is done narrower), any
 * count (more than a width: in turns), lengths unequal (a lane with no
 * whole block left carried unchanged while others go on), around the
 * padding's edges (55, 56, 63, 64, 65), empty, and unaligned.
 */
TEST(md5_many_equals_one_at_a_time)
{
    static const size_t edges[] = {0, 1, 55, 56, 57, 63, 64, 65, 119, 120, 127, 128, 129, 4096};
    const size_t nb = (3u << 20) + 64;
    unsigned char *buf = malloc(nb);
    static const unsigned widths[] = {1, 8, 16};
    uint64_t seed = 7;

    T_NOTNULL(buf);
    t_fill_pattern(buf, nb, 99);
    T_GE(rio__md5_lanes(), 1u);
    for (unsigned round = 0; round < 300; round++) {
        const void *p[40];
        size_t len[40];
        uint8_t got[40][16];
        unsigned n = 1 + round % 37;

        for (unsigned i = 0; i < n; i++) {
            seed = seed * 6364136223846793005ull + 1442695040888963407ull;
            size_t l = round % 3 == 0   ? edges[(seed >> 33) % (sizeof(edges) / sizeof(edges[0]))]
                       : round % 3 == 1 ? (size_t)((seed >> 20) % 9000)
                                        : (size_t)((seed >> 24) % (96u << 10));
            /* one lane much longer than the rest, now and then */
            if (round % 17 == 5 && i == n / 2)
                l = (1u << 20) + 3;
            len[i] = l;
            p[i] = buf + (seed >> 40) % (nb - l);
        }
        for (unsigned w = 0; w < 3; w++) {
            memset(got, 0, sizeof(got));
            T_OK(rio__md5_many_lanes(widths[w], p, len, n, got));
            for (unsigned i = 0; i < n; i++) {
                char one[33], hex[33];
                md5_of(p[i], len[i], one);
                for (int j = 0; j < 16; j++)
                    snprintf(hex + 2 * j, 3, "%02x", got[i][j]);
                if (strcmp(hex, one) != 0)
                    T_FAIL("width %u, %u buffers, #%u (%zu bytes): %s, not %s", widths[w], n, i,
                           len[i], hex, one);
            }
        }
        T_OK(rio__md5_many(p, len, n, got));
    }
    /* The known value through every width. */
    const void *abc[16];
    size_t three[16];
    uint8_t d[16][16];
    for (unsigned i = 0; i < 16; i++) {
        abc[i] = "abc";
        three[i] = 3;
    }
    for (unsigned w = 0; w < 3; w++) {
        T_OK(rio__md5_many_lanes(widths[w], abc, three, 16, d));
        T_EQ(d[15][0], 0x90u);
        T_EQ(d[15][15], 0x72u);
    }
    free(buf);
}

TEST(md5_cleanup_safe)
{
    struct rio_md5 zero = {0};
    struct rio_md5 m;
    char hex[33];

    rio__md5_cleanup(&zero);
    rio__md5_cleanup(&zero);
    rio__md5_cleanup(NULL);
    T_ERR(rio__md5_update(&zero, "x", 1), -EINVAL);
    T_ERR(rio__md5_final(&zero, hex), -EINVAL);
    T_STREQ(hex, "");

    /* Abandoned midway (an error path): cleanup frees it. */
    T_OK(rio__md5_init(&m));
    T_OK(rio__md5_update(&m, "abc", 3));
    rio__md5_cleanup(&m);
    T_NULL(m.ctx);
    rio__md5_cleanup(&m);
}

/* RFC 3720 (iSCSI) B.4 and the "123456789" check value. */
TEST(crc32c_known_values)
{
    uint8_t b[32];

    T_EQ(rio__crc32c(0, "", 0), 0u);
    T_EQ(rio__crc32c(0, "123456789", 9), 0xE3069283u);
    T_EQ(rio__crc32c_sw(0, "123456789", 9), 0xE3069283u);
    memset(b, 0, sizeof(b));
    T_EQ(rio__crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xff, sizeof(b));
    T_EQ(rio__crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)i;
    T_EQ(rio__crc32c(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++)
        b[i] = (uint8_t)(31 - i);
    T_EQ(rio__crc32c(0, b, 32), 0x113FDB5Cu);
}

/* The interleaved hardware path (three streams of 8 KiB and of 256 bytes,
 * folded) equals the tables at every length and alignment around its
 * block edges, and a CRC fed piece by piece equals the one-shot CRC. */
TEST(crc32c_hw_equals_tables_and_chains)
{
    size_t n = 3 * 8192 * 2 + 3 * 256 * 3 + 77;
    uint8_t *buf = malloc(n + 8);
    T_NOTNULL(buf);
    t_fill_pattern(buf, n + 8, 7);
    static const size_t lens[] = {0,    1,    7,    8,     9,     255,   256,   767,   768,  769,
                                  1000, 8191, 8192, 24575, 24576, 24577, 25000, 49152, 50000};
    for (size_t a = 0; a < 8; a++)
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            size_t len = lens[i] < n ? lens[i] : n;
            T_EQ(rio__crc32c(0, buf + a, len), rio__crc32c_sw(0, buf + a, len));
        }
    uint32_t one = rio__crc32c(0, buf, n), inc = 0;
    for (size_t off = 0, step = 1; off < n; off += step, step = step * 5 + 3) {
        size_t len = step < n - off ? step : n - off;
        inc = rio__crc32c(inc, buf + off, len);
    }
    T_EQ(inc, one);
    buf[n / 2] ^= 0x10;
    T_NE(rio__crc32c(0, buf, n), one);
    free(buf);
}

/* CRC-32 and CRC-64/NVME: the catalogue's check values ("123456789"), and
 * zlib's CRC-32 of other bytes. */
TEST(crc32_crc64nvme_known_values)
{
    uint8_t b[4096];

    T_EQ(rio__crc32(0, "", 0), 0u);
    T_EQ(rio__crc64nvme(0, "", 0), 0u);
    T_EQ(rio__crc32(0, "123456789", 9), 0xcbf43926u);
    T_EQ(rio__crc64nvme(0, "123456789", 9), 0xae8b14860a799888ull);
    t_fill_pattern(b, sizeof(b), 3);
    for (size_t n = 0; n <= sizeof(b); n = n * 3 + 1)
        T_EQ(rio__crc32(0, b, n), (uint32_t)crc32(0, b, (uInt)n));
    T_EQ(rio__crc32(0, b, sizeof(b)), (uint32_t)crc32(0, b, sizeof(b)));
}

/* The folded path (carry-less multiplies, 64 bytes a step, from 128
 * bytes) equals the tables at every length around its edges and at every
 * alignment, and a CRC fed in pieces of any size equals the one-shot CRC;
 * a flipped bit anywhere changes it. */
TEST(crc32_crc64nvme_folded_equal_tables)
{
    size_t n = 3 * 65536 + 77;
    uint8_t *buf = malloc(n + 16);
    T_NOTNULL(buf);
    t_fill_pattern(buf, n + 16, 11);
    static const size_t lens[] = {
        0,   1,   15,  16,  63,   64,   65,   127,  128,   129,   143,   144,    191,           192,
        193, 255, 256, 257, 1000, 4095, 4096, 4097, 65535, 65536, 65537, 100000, 3 * 65536 + 77};
    for (size_t a = 0; a < 16; a++)
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            size_t len = lens[i] < n ? lens[i] : n;
            T_EQ(rio__crc64nvme(0, buf + a, len), rio__crc64nvme_sw(0, buf + a, len));
            T_EQ(rio__crc32(0, buf + a, len), rio__crc32_sw(0, buf + a, len));
            T_EQ(rio__crc64nvme(0x1234567890abcdefull, buf + a, len),
                 rio__crc64nvme_sw(0x1234567890abcdefull, buf + a, len));
            T_EQ(rio__crc32(0xdeadbeefu, buf + a, len), rio__crc32_sw(0xdeadbeefu, buf + a, len));
        }
    uint64_t one64 = rio__crc64nvme(0, buf, n), inc64 = 0;
    uint32_t one32 = rio__crc32(0, buf, n), inc32 = 0;
    for (size_t off = 0, step = 1; off < n; off += step, step = step * 3 + 5) {
        size_t len = step < n - off ? step : n - off;
        inc64 = rio__crc64nvme(inc64, buf + off, len);
        inc32 = rio__crc32(inc32, buf + off, len);
    }
    T_EQ(inc64, one64);
    T_EQ(inc32, one32);
    for (size_t at = 0; at < n; at += n / 7) {
        buf[at] ^= 0x01;
        T_NE(rio__crc64nvme(0, buf, n), one64);
        T_NE(rio__crc32(0, buf, n), one32);
        buf[at] ^= 0x01;
    }
    free(buf);
}

/* The fast etag is 32 lower-case hex digits, stable for the same list and
 * geometry, and changes when any chunk's xxh3 (so any byte), the size or
 * the chunk size does. */
TEST(etag_fast_stable_and_sensitive)
{
    uint64_t xxh[130];
    char a[33], b[33], c[33];

    for (int i = 0; i < 130; i++)
        xxh[i] = rio__xxh3(&i, sizeof(i));
    rio__etag_fast(xxh, 130, 130u * 4096 - 5, 4096, a);
    T_EQ(strlen(a), 32u);
    for (int i = 0; i < 32; i++)
        T_TRUE((a[i] >= '0' && a[i] <= '9') || (a[i] >= 'a' && a[i] <= 'f'));
    rio__etag_fast(xxh, 130, 130u * 4096 - 5, 4096, b);
    T_STREQ(a, b);
    rio__etag_fast(xxh, 130, 130u * 4096 - 4, 4096, c);
    T_NE(strcmp(a, c), 0);
    rio__etag_fast(xxh, 130, 130u * 4096 - 5, 8192, c);
    T_NE(strcmp(a, c), 0);
    for (int i = 0; i < 130; i += 43) {
        xxh[i] ^= 1;
        rio__etag_fast(xxh, 130, 130u * 4096 - 5, 4096, c);
        T_NE(strcmp(a, c), 0);
        xxh[i] ^= 1;
    }
    /* The etag of nothing is defined too. */
    rio__etag_fast(NULL, 0, 0, 4096, c);
    T_EQ(strlen(c), 32u);
}
