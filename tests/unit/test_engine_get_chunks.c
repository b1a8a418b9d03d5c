/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * rio__get_chunks (the CLI's GET to a file): every byte from the offset on
 * handed exactly once, at its offset, each chunk verified, in whatever
 * order chunks verify (paths of very different rates); planned from the
 * caller's descriptor (no lookup, its generation named); a callback that
 * stops, a replaced object and a failing chunk each end it with the
 * error, fenced, counters back to zero.
 */
#include <stdbool.h>

#include "core/stream.h"
#include "engine_util.h"

struct sink {
    const uint8_t *src;
    uint8_t *seen; /* handed count per byte */
    uint64_t lo;   /* the offset asked for */
    uint64_t handed, calls;
    bool out_of_order;
    uint64_t last;
    int bad;
    int stop_after; /* > 0: return stop_ret at that call */
    int stop_ret;
};

static int sink_cb(void *arg, uint64_t off, const void *data, size_t len)
{
    struct sink *s = arg;
    s->calls++;
    if (off < s->lo || memcmp(data, s->src + off, len) != 0)
        s->bad++;
    for (size_t i = 0; i < len; i++)
        s->seen[off + i]++;
    if (s->calls > 1 && off < s->last)
        s->out_of_order = true;
    s->last = off;
    s->handed += len;
    if (s->stop_after && (int)s->calls == s->stop_after)
        return s->stop_ret;
    return 0;
}

static void sink_init(struct sink *s, const uint8_t *src, size_t n, uint64_t lo)
{
    memset(s, 0, sizeof(*s));
    s->src = src;
    s->lo = lo;
    s->seen = calloc(n + 1, 1);
    T_NOTNULL(s->seen);
}

/* Offsets 0, inside the first chunk, inside a later one, on a boundary, the
 * last byte, the size: bytes [off, n) each handed once, nothing else. */
TEST(get_chunks_every_byte_once)
{
    struct eu e;
    const size_t n = 24 * EU_CHUNK + 777;
    const uint64_t offs[] = {0, 1, 3 * EU_CHUNK + 5, 10 * EU_CHUNK, n - 1, n};
    uint8_t *src = eu_start_put(&e, "mock://gc1?paths=3&rate=400M,100M,20M", n, 41);
    struct rio_desc d;
    T_OK(rio_stat(e.c, "o", &d));
    for (unsigned i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        struct sink s;
        sink_init(&s, src, n, offs[i]);
        T_EQ(rio__get_chunks(e.c, &d, offs[i], 0, sink_cb, &s, &e.call), (int64_t)(n - offs[i]));
        T_EQ(s.bad, 0);
        T_EQ(s.handed, n - offs[i]);
        for (size_t b = 0; b < n; b++)
            if (s.seen[b] != (b >= offs[i]))
                T_FAIL("byte %zu handed %u times (offset %llu)", b, s.seen[b],
                       (unsigned long long)offs[i]);
        uint64_t first = offs[i] == n ? n : offs[i] / EU_CHUNK * EU_CHUNK;
        T_EQ(e.st.bytes, n - first);
        free(s.seen);
        eu_idle(e.c);
    }
    rio_desc_cleanup(&d);
    eu_close(&e);
}

/* A chunk held back (its first try fails and is retried) does not hold the
 * chunks after it: they are handed first, the held one at its offset
 * later. The retry is delayed 500 ms (the first rule that matches an op
 * fires: the bitflip takes the first read, the delay the second), so the
 * others are surely back before it (without the delay a fast retry could
 * come back first: seen once under TSan). */
TEST(get_chunks_hands_out_of_order)
{
    struct eu e;
    const size_t n = 16 * EU_CHUNK;
    uint8_t *src = eu_start_put(&e, "mock://gc2?paths=2&depth=4", n, 42);
    eu_fault(e.c, "bitflip:op=read:chunk=0:count=1");
    eu_fault(e.c, "delay:op=read:chunk=0:count=1:delay=500");
    struct rio_desc d;
    T_OK(rio_stat(e.c, "o", &d));
    struct sink s;
    sink_init(&s, src, n, 0);
    T_EQ(rio__get_chunks(e.c, &d, 0, 0, sink_cb, &s, &e.call), (int64_t)n);
    T_EQ(s.bad, 0);
    T_EQ(s.handed, (uint64_t)n);
    T_TRUE(s.out_of_order);
    T_GE(e.st.retries_total, 1u);
    T_EQ(eu_faults_fired(e.c), 2u);
    free(s.seen);
    rio_desc_cleanup(&d);
    eu_idle(e.c);
    eu_close(&e);
}

/* The callback stops it: its negative value, or RIO_ECANCELED for a
 * positive one; nothing left in flight. */
TEST(get_chunks_callback_stops)
{
    struct eu e;
    const size_t n = 12 * EU_CHUNK + 3;
    uint8_t *src = eu_start_put(&e, "mock://gc3?paths=2", n, 43);
    struct rio_desc d;
    T_OK(rio_stat(e.c, "o", &d));
    const int rets[] = {-ENOSPC, 1};
    for (unsigned i = 0; i < 2; i++) {
        struct sink s;
        sink_init(&s, src, n, 0);
        s.stop_after = 3;
        s.stop_ret = rets[i];
        T_ERR(rio__get_chunks(e.c, &d, 0, 2, sink_cb, &s, NULL), i ? RIO_ECANCELED : -ENOSPC);
        T_EQ(s.calls, 3u);
        free(s.seen);
        eu_idle(e.c);
    }
    rio_desc_cleanup(&d);
    eu_close(&e);
}

/* The descriptor names the generation: a replaced object fails
 * RIO_EGENERATION, never stitched; a chunk that keeps failing its checksum
 * fails the whole; bad arguments RIO_EINVAL. */
TEST(get_chunks_errors)
{
    struct eu e;
    const size_t n = 6 * EU_CHUNK + 9;
    uint8_t *src = eu_start_put(&e, "mock://gc4?paths=2&retries=2", n, 44);
    struct rio_desc d;
    T_OK(rio_stat(e.c, "o", &d));
    struct sink s;
    sink_init(&s, src, n, 0);
    T_ERR(rio__get_chunks(e.c, NULL, 0, 0, sink_cb, &s, NULL), RIO_EINVAL);
    T_ERR(rio__get_chunks(e.c, &d, 0, 0, NULL, &s, NULL), RIO_EINVAL);
    T_ERR(rio__get_chunks(e.c, &d, n + 1, 0, sink_cb, &s, NULL), RIO_EINVAL);
    T_EQ(s.calls, 0u);
    eu_fault(e.c, "bitflip:op=read:chunk=4");
    T_ERR(rio__get_chunks(e.c, &d, 0, 0, sink_cb, &s, NULL), RIO_ERETRIES);
    T_EQ(s.bad, 0);
    T_EQ(s.seen[4 * EU_CHUNK], 0); /* the bad chunk was never handed */
    rio_mock_faults_clear(e.c);
    eu_idle(e.c);
    free(eu_put_pattern(e.c, "o", n, 45, NULL)); /* replaced */
    memset(s.seen, 0, n);
    s.calls = 0;
    T_ERR(rio__get_chunks(e.c, &d, 0, 0, sink_cb, &s, NULL), RIO_EGENERATION);
    T_EQ(s.calls, 0u);
    free(s.seen);
    rio_desc_cleanup(&d);
    eu_idle(e.c);
    eu_close(&e);
}
