/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The streaming reader (rio_reader_*, rio_get_stream): bytes in order whatever
 * order chunks complete in, memory bounded by prefetch x chunk, every chunk
 * verified before its bytes are handed out, and a close at any point leaves
 * nothing in flight.
 */
#include "engine_util.h"

/* Read through a reader in pieces of `step` bytes until the end or an error;
 * *got (if given) is how many bytes came out. */
static int64_t read_some(struct rio_reader *rd, uint8_t *dst, size_t cap, size_t step, size_t *got)
{
    size_t off = 0;
    for (;;) {
        size_t want = cap - off < step ? cap - off : step;
        int64_t k = rio_reader_read(rd, dst + off, want ? want : 1);
        if (k <= 0) {
            if (got)
                *got = off;
            return k < 0 ? k : (int64_t)off;
        }
        off += (size_t)k;
    }
}

static int64_t read_all(struct rio_reader *rd, uint8_t *dst, size_t cap, size_t step)
{
    return read_some(rd, dst, cap, step, NULL);
}

/* Unequal paths make chunks complete out of order; the reader still hands
 * them out in order, byte-exact, for every prefetch and read size. */
TEST(reader_in_order_byte_exact)
{
    struct eu e;
    const size_t n = 4 * EU_MIB + 777;
    const unsigned prefetch[] = {1, 2, 5, 64};
    const size_t steps[] = {1000, EU_CHUNK, 3 * EU_CHUNK + 5};

    uint8_t *src = eu_start_put(&e, "mock://rd1?paths=3&rate=400M,200M,50M", n, 7);
    uint8_t *dst = malloc(n + 1);
    T_NOTNULL(dst);
    for (unsigned i = 0; i < 4; i++) {
        for (unsigned k = 0; k < 3; k++) {
            struct rio_reader *rd;
            memset(dst, 0, n);
            T_OK(rio_reader_open(e.c, "o", prefetch[i], NULL, &rd));
            T_EQ(rio_reader_desc(rd)->size, n);
            T_EQ(read_all(rd, dst, n + 1, steps[k]), (int64_t)n);
            T_EQ(rio_reader_read(rd, dst, 10), 0); /* end stays the end */
            T_EQ(rio_reader_close(rd), 0);
            T_MEMEQ(dst, src, n);
            eu_idle(e.c);
        }
    }
    free(dst);
    eu_close(&e);
}

/* Memory stays bounded: with prefetch p, no more than p chunks are ever in
 * flight, however slowly the consumer reads. */
TEST(reader_prefetch_bounds_inflight)
{
    struct eu e;
    const size_t n = 2 * EU_MIB;
    uint8_t buf[4096];
    struct rio_reader *rd;
    struct rio_counters ct;

    eu_start_put_o(&e, "mock://rd2?paths=4", n, 8, e.o.depth = 16);
    T_OK(rio_reader_open(e.c, "o", 3, NULL, &rd));
    for (int i = 0; i < 50; i++) {
        T_GT(rio_reader_read(rd, buf, sizeof(buf)), 0);
        rio_client_counters(e.c, &ct);
        T_LE(ct.inflight_ops, 3u);
        T_LE(ct.inflight_bytes, 3 * EU_CHUNK);
        eu_sleep_ms(1);
    }
    T_EQ(rio_reader_close(rd), RIO_ECANCELED); /* closed before the end */
    eu_idle(e.c);
    eu_close(&e);
}

/* What a reader holds does not grow with the object's chunk count: its
 * chunk state is kept for its window only, and its latency samples are
 * capped. An object of 16384 chunks of 4 KiB, read through a window of 8
 * chunks and through tail pieces (unequal paths), with faults that make
 * chunks go again: the reader's allocations stay within the checksum list
 * (8 bytes a chunk, needed to verify each), the latency samples and a few
 * chunks' worth, where one 88-byte state a chunk (1.4 MiB here; ~850 MB
 * for a 32 GiB object in 4 KiB chunks a lying server may announce) was
 * allocated at open. */
TEST(reader_state_does_not_grow_with_chunks)
{
    struct eu e;
    const size_t n = 64 * EU_MIB;
    const uint64_t nchunks = n / 4096;
    uint8_t *dst = malloc(n + 1);
    struct rio_reader *rd;

    T_NOTNULL(dst);
    uint8_t *src = eu_start_put_o(&e, "mock://rd5?paths=3&rate=800M,400M,100M", n, 12,
                                  e.o.chunk_size = 4096, e.o.depth = 4);
    eu_fault(e.c, "error:op=read:chunk=100:count=1:error=ECONNRESET");
    eu_fault(e.c, "bitflip:op=read:chunk=9000:count=1");
    int64_t base = rio__alloc_bytes_peak(true);
    T_OK(rio_reader_open(e.c, "o", 8, NULL, &rd));
    T_EQ(read_all(rd, dst, n + 1, 100000), (int64_t)n);
    T_EQ(rio_reader_close(rd), 0);
    int64_t grew = rio__alloc_bytes_peak(false) - base;
    T_MEMEQ(dst, src, n);
    T_EQ(eu_faults_fired(e.c), 2u);
    /* checksums + latency samples: 2 x 8 bytes a chunk; then 256 KiB for
     * the ring, the descriptor's copies and the rest */
    T_LT(grew, (int64_t)(2 * 8 * nchunks + 256 * 1024));
    free(dst);
    eu_idle(e.c);
    eu_close(&e);
}

/* Closed mid-stream while chunks are stalled in flight: close cancels them,
 * waits for them, and nothing is left in flight or allocated. */
TEST(reader_close_mid_stream_leaves_nothing)
{
    struct eu e;
    const size_t n = 2 * EU_MIB;
    uint8_t buf[100];
    struct rio_reader *rd;
    struct rio_mock_counters mc;

    /* adapt=off: both paths from the first op (this tests the fence). */
    uint8_t *src = eu_start_put(&e, "mock://rd3?paths=2&adapt=off", n, 9);
    eu_fault(e.c, "stall:op=read:chunk=3");
    eu_fault(e.c, "late:op=read:chunk=4:delay=50");
    T_OK(rio_reader_open(e.c, "o", 8, NULL, &rd));
    T_EQ(rio_reader_read(rd, buf, sizeof(buf)), (int64_t)sizeof(buf));
    T_MEMEQ(buf, src, sizeof(buf));
    /* Both faulty chunks are out (paths start one op deep until measured). */
    for (int i = 0; i < 200 && eu_faults_fired(e.c) < 2; i++)
        eu_sleep_ms(5);
    T_EQ(eu_faults_fired(e.c), 2u);
    uint64_t t0 = eu_now_ns();
    T_EQ(rio_reader_close(rd), RIO_ECANCELED);
    /* The late op lands about 50 ms after its cancel: close waited for it. */
    T_GE(eu_now_ns() - t0, 40000000u);
    rio_mock_counters(e.c, &mc);
    T_EQ(mc.inflight, 0u);
    eu_idle(e.c);
    eu_close(&e);
}

/* A path dies mid-stream: its chunks move, the stream stays byte-exact. A
 * corrupted chunk is retried before any byte of it is handed out. */
TEST(reader_survives_faults)
{
    struct eu e;
    const size_t n = 3 * EU_MIB;

    uint8_t *src = eu_start_put(&e, "mock://rd4?paths=3", n, 10);
    eu_fault(e.c, "disconnect:op=read:count=1:skip=3:bytes=1000:down=50");
    eu_fault(e.c, "bitflip:op=read:chunk=20:count=1");
    uint8_t *dst = malloc(n);
    T_NOTNULL(dst);
    struct rio_reader *rd;
    T_OK(rio_reader_open(e.c, "o", 4, &e.call, &rd));
    T_EQ(read_all(rd, dst, n, 70000), (int64_t)n);
    T_EQ(rio_reader_close(rd), 0);
    T_MEMEQ(dst, src, n);
    T_GE(e.st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_GE(e.st.retries[RIO_CLASS_RESET], 1u);
    eu_idle(e.c);
    free(dst);
    eu_close(&e);
}

/* A chunk that cannot be read surfaces as the reader's error, and every later
 * read returns it too. */
TEST(reader_error_is_sticky)
{
    struct eu e;
    const size_t n = EU_MIB;
    uint8_t *dst = malloc(n);

    uint8_t *src = eu_start_put_o(&e, "mock://rd5?paths=1", n, 11, e.o.retry_attempts = 2);
    eu_fault(e.c, "error:op=read:chunk=5:error=EACCES");
    struct rio_reader *rd;
    T_OK(rio_reader_open(e.c, "o", 2, NULL, &rd));
    size_t got = 0;
    T_EQ(read_some(rd, dst, n, EU_CHUNK, &got), -EACCES);
    T_EQ(rio_reader_read(rd, dst, 10), -EACCES);
    T_EQ(rio_reader_close(rd), -EACCES);
    /* Chunks before the bad one may or may not have come out (the failure
     * cancels what is still in flight), but whatever came out is right and
     * nothing of the bad chunk did. */
    T_LE(got, 5 * EU_CHUNK);
    T_MEMEQ(dst, src, got);
    eu_idle(e.c);
    free(dst);
    eu_close(&e);
}

struct sink {
    const uint8_t *src;
    size_t off;
    size_t stop_at;
    int bad;
};

static int sink_cb(void *arg, const void *data, size_t len)
{
    struct sink *s = arg;
    if (memcmp(data, s->src + s->off, len) != 0)
        s->bad = 1;
    s->off += len;
    if (s->stop_at && s->off >= s->stop_at)
        return -EPIPE;
    return 0;
}

/* rio_get_stream: the callback sees the object in order; a callback error
 * stops it and comes back as the result. Size 0 streams nothing. */
TEST(get_stream_callback)
{
    struct eu e;
    const size_t n = 2 * EU_MIB + 3;

    eu_start(&e, "mock://rd6?paths=2");
    uint8_t *src = eu_put_pattern(e.c, "o", n, 12, NULL);
    struct sink s = {.src = src};
    T_EQ(rio_get_stream(e.c, "o", 0, sink_cb, &s, NULL), (int64_t)n);
    T_EQ(s.off, n);
    T_EQ(s.bad, 0);

    struct sink s2 = {.src = src, .stop_at = EU_MIB};
    T_EQ(rio_get_stream(e.c, "o", 3, sink_cb, &s2, NULL), -EPIPE);
    T_EQ(s2.bad, 0);
    eu_idle(e.c);

    T_OK(rio_put(e.c, "empty", "", 0, NULL, NULL));
    struct sink s3 = {.src = src};
    T_EQ(rio_get_stream(e.c, "empty", 0, sink_cb, &s3, NULL), 0);
    T_EQ(s3.off, 0u);
    T_ERR(rio_get_stream(e.c, "missing", 0, sink_cb, &s3, NULL), RIO_ENOTFOUND);
    eu_idle(e.c);
    free(src);
    eu_close(&e);
}
