/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: xxh3-64 and the streaming MD5 etag (src/core/checksum.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/checksum.h"
#include "t.h"

TEST(xxh3_known_values)
{
    T_EQ(rio__xxh3("", 0), 0x2D06800538D394C2ull);
    T_EQ(rio__xxh3("abc", 3), 0x78AF5F94892F3950ull);
    T_NE(rio__xxh3("abd", 3), rio__xxh3("abc", 3));
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
