/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The reader at an offset (rio_reader_open_at, rio_get_stream_at): bytes from
 * the offset on, byte-exact, for offsets at 0, inside a chunk, on a chunk
 * boundary, at the size and past it; only the chunks from the one holding the
 * offset are fetched, each verified whole; a changed generation fails.
 */
#include "engine_util.h"

/* Read rd to its end into dst (cap bytes at most); the count or an error. */
static int64_t drain(struct rio_reader *rd, uint8_t *dst, size_t cap)
{
    size_t off = 0;
    for (;;) {
        int64_t k = rio_reader_read(rd, dst + off, cap - off < 70001 ? cap - off : 70001);
        if (k <= 0)
            return k < 0 ? k : (int64_t)off;
        off += (size_t)k;
    }
}

static uint64_t path_bytes(const struct rio_stats *st)
{
    uint64_t b = 0;
    for (unsigned i = 0; i < st->npaths; i++)
        b += st->path[i].bytes;
    return b;
}

/* Every kind of offset hands out exactly the bytes from it on, and fetches
 * only the chunks from the one holding it. */
TEST(reader_at_offsets_byte_exact)
{
    struct eu e;
    const size_t n = 10 * EU_CHUNK + 777;
    const uint64_t offs[] = {0,     1, EU_CHUNK - 1, EU_CHUNK, 3 * EU_CHUNK + 5, 10 * EU_CHUNK,
                             n - 1, n};
    uint8_t *src = eu_start_put(&e, "mock://ra1?paths=3&rate=400M,200M,50M", n, 21);
    uint8_t *dst = malloc(n + 1);
    T_NOTNULL(dst);
    for (unsigned i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        struct rio_reader *rd;
        uint64_t off = offs[i];
        memset(dst, 0, n);
        T_OK(rio_reader_open_at(e.c, "o", off, 3, &e.call, &rd));
        T_EQ(rio_reader_desc(rd)->size, n);
        T_EQ(drain(rd, dst, n + 1), (int64_t)(n - off));
        T_EQ(rio_reader_read(rd, dst, 10), 0); /* the end stays the end */
        T_EQ(rio_reader_close(rd), 0);
        T_MEMEQ(dst, src + off, n - off);
        /* fetched: the chunks from the one holding off (none at the size) */
        uint64_t first = off == n ? n : off / EU_CHUNK * EU_CHUNK;
        T_EQ(e.st.bytes, n - first);
        T_EQ(path_bytes(&e.st), n - first);
        eu_idle(e.c);
    }
    free(dst);
    eu_close(&e);
}

/* Past the size: RIO_EINVAL, nothing left open. */
TEST(reader_at_past_size_refused)
{
    struct eu e;
    const size_t n = 2 * EU_CHUNK;
    eu_start_put(&e, "mock://ra2?paths=2", n, 22);
    struct rio_reader *rd = (struct rio_reader *)&e; /* must be reset */
    T_ERR(rio_reader_open_at(e.c, "o", n + 1, 0, NULL, &rd), RIO_EINVAL);
    T_NULL(rd);
    T_ERR(rio_reader_open_at(e.c, "o", UINT64_MAX, 0, NULL, &rd), RIO_EINVAL);
    T_ERR(rio_reader_open_at(e.c, "missing", 0, 0, NULL, &rd), RIO_ENOTFOUND);
    /* an empty object: offset 0 is its end */
    T_OK(rio_put(e.c, "empty", "", 0, NULL, NULL));
    uint8_t b[8];
    T_OK(rio_reader_open_at(e.c, "empty", 0, 0, NULL, &rd));
    T_EQ(rio_reader_read(rd, b, sizeof(b)), 0);
    T_EQ(rio_reader_close(rd), 0);
    T_ERR(rio_reader_open_at(e.c, "empty", 1, 0, NULL, &rd), RIO_EINVAL);
    eu_idle(e.c);
    eu_close(&e);
}

/* Resuming needs the same object: a generation other than the one asked for
 * fails RIO_EGENERATION, the same one reads on. */
TEST(reader_at_generation_checked)
{
    struct eu e;
    const size_t n = 4 * EU_CHUNK + 3;
    uint8_t *src = eu_start_put(&e, "mock://ra3?paths=2", n, 23);
    struct rio_desc d;
    T_OK(rio_stat(e.c, "o", &d));
    uint64_t gen = d.generation;
    rio_desc_cleanup(&d);
    uint8_t *dst = malloc(n);
    T_NOTNULL(dst);
    struct rio_reader *rd;
    struct rio_call call = {.expect_generation = gen};
    T_OK(rio_reader_open_at(e.c, "o", EU_CHUNK + 9, 0, &call, &rd));
    T_EQ(drain(rd, dst, n), (int64_t)(n - EU_CHUNK - 9));
    T_EQ(rio_reader_close(rd), 0);
    T_MEMEQ(dst, src + EU_CHUNK + 9, n - EU_CHUNK - 9);

    uint8_t *src2 = eu_put_pattern(e.c, "o", n, 24, NULL); /* replaced */
    T_ERR(rio_reader_open_at(e.c, "o", EU_CHUNK + 9, 0, &call, &rd), RIO_EGENERATION);
    T_NULL(rd);
    T_ERR(rio_get_stream_at(e.c, "o", 5, 0, NULL, NULL, &call), RIO_EINVAL); /* no callback */
    eu_idle(e.c);
    free(src2);
    free(dst);
    eu_close(&e);
}

struct at_sink {
    const uint8_t *src;
    uint64_t off;
    int bad;
};

static int at_cb(void *arg, const void *data, size_t len)
{
    struct at_sink *s = arg;
    if (memcmp(data, s->src + s->off, len))
        s->bad++;
    s->off += len;
    return 0;
}

TEST(get_stream_at_counts_from_offset)
{
    struct eu e;
    const size_t n = 5 * EU_CHUNK + 100;
    uint8_t *src = eu_start_put(&e, "mock://ra4?paths=2", n, 25);
    struct rio_desc d;
    T_OK(rio_stat(e.c, "o", &d));
    struct rio_call call = {.expect_generation = d.generation};
    rio_desc_cleanup(&d);
    struct at_sink s = {.src = src, .off = 2 * EU_CHUNK + 50};
    T_EQ(rio_get_stream_at(e.c, "o", 2 * EU_CHUNK + 50, 2, at_cb, &s, &call),
         (int64_t)(n - 2 * EU_CHUNK - 50));
    T_EQ(s.off, n);
    T_EQ(s.bad, 0);
    free(eu_put_pattern(e.c, "o", n, 26, NULL));
    struct at_sink s2 = {.src = src, .off = 7};
    T_ERR(rio_get_stream_at(e.c, "o", 7, 2, at_cb, &s2, &call), RIO_EGENERATION);
    T_EQ(s2.off, 7u);
    eu_idle(e.c);
    eu_close(&e);
}

/* The chunk holding the offset is verified whole before any of its bytes
 * goes out: a bit flipped in it is caught (a retry), never handed out. */
TEST(reader_at_verifies_first_chunk)
{
    struct eu e;
    const size_t n = 4 * EU_CHUNK;
    uint8_t *src = eu_start_put(&e, "mock://ra5?paths=2", n, 27);
    eu_fault(e.c, "bitflip:op=read:chunk=2:count=1");
    uint8_t *dst = malloc(n);
    T_NOTNULL(dst);
    struct rio_reader *rd;
    T_OK(rio_reader_open_at(e.c, "o", 2 * EU_CHUNK + 10, 2, &e.call, &rd));
    T_EQ(drain(rd, dst, n), (int64_t)(n - 2 * EU_CHUNK - 10));
    T_EQ(rio_reader_close(rd), 0);
    T_MEMEQ(dst, src + 2 * EU_CHUNK + 10, n - 2 * EU_CHUNK - 10);
    T_GE(e.st.retries[RIO_CLASS_CHECKSUM], 1u);
    eu_idle(e.c);
    free(dst);
    eu_close(&e);
}

/* A reader of a range made from a descriptor (rio_reader_open_desc): no
 * lookup of its own, exactly the range's bytes, only the chunks holding
 * them fetched, and 0 after its last byte. */
TEST(reader_desc_range_fetches_only_its_chunks)
{
    struct eu e;
    const size_t n = 10 * EU_CHUNK + 777;
    const struct {
        uint64_t off, len;
    } rg[] = {
        {0, 1},
        {5, EU_CHUNK - 5},                /* ends on a chunk boundary */
        {EU_CHUNK - 1, 2},                /* spans two chunks */
        {3 * EU_CHUNK + 5, 4 * EU_CHUNK}, /* spans five */
        {n - 10, 10},                     /* the last bytes */
        {n - 10, UINT64_MAX},             /* past the end: to the end */
        {2 * EU_CHUNK, 0},                /* empty */
        {0, n},                           /* the whole object */
    };
    uint8_t *src = eu_start_put(&e, "mock://rd1?paths=3&rate=400M,200M,50M", n, 31);
    uint8_t *dst = malloc(n + 1);
    struct rio_desc d;
    struct rio_mock_counters k0, k1;
    T_NOTNULL(dst);
    T_OK(rio_stat(e.c, "o", &d));
    for (unsigned i = 0; i < sizeof(rg) / sizeof(rg[0]); i++) {
        struct rio_reader *rd;
        uint64_t off = rg[i].off, len = rg[i].len < n - off ? rg[i].len : n - off;
        rio_mock_counters(e.c, &k0);
        T_OK(rio_reader_open_desc(e.c, &d, off, rg[i].len, 2, &e.call, &rd));
        T_EQ(drain(rd, dst, n + 1), (int64_t)len);
        T_EQ(rio_reader_read(rd, dst, 10), 0); /* the end stays the end */
        T_EQ(rio_reader_close(rd), 0);
        T_MEMEQ(dst, src + off, len);
        rio_mock_counters(e.c, &k1);
        T_EQ(k1.lookups, k0.lookups); /* the descriptor given: no lookup */
        /* fetched: the chunks holding [off, off + len), each whole */
        uint64_t first = off / EU_CHUNK * EU_CHUNK;
        uint64_t end = len ? ((off + len - 1) / EU_CHUNK + 1) * EU_CHUNK : first;
        if (end > n)
            end = n;
        T_EQ(e.st.bytes, end - first);
        T_EQ(path_bytes(&e.st), end - first);
        eu_idle(e.c);
    }
    rio_desc_cleanup(&d);
    free(dst);
    eu_close(&e);
}

/* A descriptor gone stale (the key replaced, or removed) never hands out
 * another generation's bytes: RIO_EGENERATION or not found, before any
 * byte. A descriptor that contradicts itself is refused. */
TEST(reader_desc_stale_or_bad_refused)
{
    struct eu e;
    const size_t n = 4 * EU_CHUNK + 3;
    eu_start_put(&e, "mock://rd2?paths=2", n, 32);
    struct rio_desc d;
    struct rio_reader *rd;
    uint8_t b[16];
    int64_t mt = -1;
    T_OK(rio_stat_mtime(e.c, "o", &d, &mt)); /* mock:// keeps no mtime */
    T_EQ(mt, 0);
    T_EQ(d.size, (uint64_t)n);
    struct rio_call other = {.expect_generation = d.generation + 1};
    T_ERR(rio_reader_open_desc(e.c, &d, 0, 10, 0, &other, &rd), RIO_EGENERATION);
    T_NULL(rd);
    T_ERR(rio_reader_open_desc(e.c, &d, n + 1, 10, 0, NULL, &rd), RIO_EINVAL);
    T_NULL(rd);
    struct rio_desc bad = d;
    bad.nchunks = d.nchunks + 1;
    T_ERR(rio_reader_open_desc(e.c, &bad, 0, 10, 0, NULL, &rd), RIO_EINVAL);
    T_ERR(rio_reader_open_desc(e.c, NULL, 0, 10, 0, NULL, &rd), RIO_EINVAL);

    free(eu_put_pattern(e.c, "o", n, 33, NULL)); /* replaced */
    T_OK(rio_reader_open_desc(e.c, &d, EU_CHUNK + 1, 100, 0, NULL, &rd));
    T_ERR(rio_reader_read(rd, b, sizeof(b)), RIO_EGENERATION);
    T_ERR(rio_reader_close(rd), RIO_EGENERATION);
    T_OK(rio_delete(e.c, "o")); /* removed */
    T_OK(rio_reader_open_desc(e.c, &d, 0, 100, 0, NULL, &rd));
    int64_t r = rio_reader_read(rd, b, sizeof(b));
    T_TRUE(r == RIO_ENOTFOUND || r == RIO_EGENERATION);
    rio_reader_close(rd);
    rio_desc_cleanup(&d);
    eu_idle(e.c);
    eu_close(&e);
}
