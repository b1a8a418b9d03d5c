/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The streaming writer (rio_writer_*, rio_put_stream): an object of unknown
 * size goes up chunk by chunk with at most `slots` chunks buffered or in
 * flight, is visible only after close commits it, carries the same xxh3 list
 * and stream MD5 as rio_put of the same bytes, and on any error or abort
 * leaves the previous generation (or nothing) behind. Also the etag=none knob.
 */
#include <unistd.h>

#include "core/engine.h"
#include "engine_util.h"

/* Write n pattern bytes through w in pieces of step bytes. */
static int write_pattern(struct rio_writer *w, const uint8_t *src, size_t n, size_t step)
{
    for (size_t off = 0; off < n;) {
        size_t k = n - off < step ? n - off : step;
        int ret = rio_writer_write(w, src + off, k);
        if (ret < 0)
            return ret;
        off += k;
    }
    return 0;
}

/* Every size around the chunk boundaries, several write sizes and slot
 * counts: byte-exact, and the same descriptor (sizes, xxh3 list, etag) as a
 * plain rio_put of the same bytes. */
TEST(writer_unknown_size_round_trip)
{
    struct eu e;
    const size_t sizes[] = {0, 1, EU_CHUNK - 1, EU_CHUNK, EU_CHUNK + 1, 5 * EU_CHUNK + 333};
    const size_t steps[] = {1000, EU_CHUNK, 3 * EU_CHUNK + 5};
    const unsigned slots[] = {2, 3, 0};

    eu_start(&e, "mock://wr1?paths=3&rate=400M,200M,50M");
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        uint8_t *src = eu_pattern_buf(n, 100 + i);
        struct rio_desc ref;
        T_OK(rio_put(e.c, "ref", src, n, NULL, &ref));
        for (unsigned k = 0; k < 3; k++) {
            struct rio_writer *w;
            struct rio_desc d, st;
            T_OK(rio_writer_open(e.c, "obj", RIO_SIZE_UNKNOWN, slots[k], NULL, &w));
            T_OK(write_pattern(w, src, n, steps[k]));
            T_OK(rio_writer_close(w, &d));
            T_EQ(d.size, n);
            T_EQ(d.nchunks, ref.nchunks);
            T_EQ(d.chunk_size, ref.chunk_size);
            T_STREQ(d.etag, ref.etag);
            T_EQ(strlen(d.etag), 32u);
            for (uint64_t c = 0; c < d.nchunks; c++)
                T_EQ(d.xxh[c], ref.xxh[c]);
            T_OK(rio_stat(e.c, "obj", &st));
            T_EQ(st.size, n);
            T_EQ(st.generation, d.generation);
            T_STREQ(st.etag, ref.etag);
            rio_desc_cleanup(&st);
            rio_desc_cleanup(&d);
            eu_get_check(e.c, "obj", n, 100 + i, NULL);
            eu_idle(e.c);
        }
        rio_desc_cleanup(&ref);
        free(src);
    }
    eu_close(&e);
}

/* A declared size works like rio_put; a stream that ends short or runs long
 * fails with RIO_EINVAL and the previous generation stays whole. */
TEST(writer_declared_size)
{
    struct eu e;
    const size_t n = 3 * EU_CHUNK + 10;

    uint8_t *src = eu_start_src(&e, "mock://wr2?paths=2", n + EU_CHUNK, 9);
    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "obj", n, 2, NULL, &w));
    T_OK(write_pattern(w, src, n, 4096));
    T_OK(rio_writer_close(w, NULL));
    eu_get_check(e.c, "obj", n, 9, NULL);

    T_OK(rio_writer_open(e.c, "obj", n, 2, NULL, &w));
    T_OK(write_pattern(w, src, n - 1, 5000));
    T_EQ(rio_writer_close(w, NULL), RIO_EINVAL);
    eu_get_check(e.c, "obj", n, 9, NULL);

    T_OK(rio_writer_open(e.c, "obj", n, 2, NULL, &w));
    T_EQ(write_pattern(w, src, n + 1, 5000), RIO_EINVAL);
    T_EQ(rio_writer_write(w, src, 1), RIO_EINVAL); /* the error sticks */
    T_EQ(rio_writer_close(w, NULL), RIO_EINVAL);
    eu_get_check(e.c, "obj", n, 9, NULL);
    eu_idle(e.c);
    eu_close(&e);
}

/* With a declared size, the last chunk goes out once its last byte is in,
 * before close: a short one as a full one (the chunk writes the transport
 * took); close sends nothing more, and the object is byte-exact. */
TEST(writer_declared_last_chunk_early)
{
    struct eu e;
    const size_t sizes[] = {1, EU_CHUNK / 2 + 3, EU_CHUNK, 2 * EU_CHUNK + 10};
    struct rio_mock_counters k;

    uint8_t *src = eu_start_src(&e, "mock://wr7?paths=2", 3 * EU_CHUNK, 21);
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        uint64_t w0, chunks = (n + EU_CHUNK - 1) / EU_CHUNK;
        struct rio_writer *w;
        eu_idle(e.c);
        rio_mock_counters(e.c, &k);
        w0 = k.ops_write;
        T_OK(rio_writer_open(e.c, "obj", n, 4, NULL, &w));
        T_OK(write_pattern(w, src, n - 1, 4096));
        rio_mock_counters(e.c, &k);
        T_LE(k.ops_write - w0, chunks - 1); /* the last is not complete yet */
        T_OK(rio_writer_write(w, src + n - 1, 1));
        /* The engine's thread hands the chunk to the transport: wait for it
         * (5 s at most), before close. */
        for (int ms = 0; ms < 5000; ms++) {
            rio_mock_counters(e.c, &k);
            if (k.ops_write - w0 >= chunks)
                break;
            usleep(1000);
        }
        T_EQ(k.ops_write - w0, chunks); /* all sent before close */
        T_OK(rio_writer_close(w, NULL));
        rio_mock_counters(e.c, &k);
        T_EQ(k.ops_write - w0, chunks);
        eu_get_check(e.c, "obj", n, 21, NULL);
    }
    eu_idle(e.c);
    eu_close(&e);
}

/* Memory is bounded by slots x chunk: the bytes in flight never exceed it,
 * and the stats cover the whole stream. */
TEST(writer_bounded_in_flight)
{
    struct eu e;
    const size_t n = 64 * EU_CHUNK + 5;

    eu_start_o(&e, "mock://wr3?paths=4&rate=200M&lat=2ms", e.o.depth = 8);
    uint8_t *src = eu_keep(&e, eu_pattern_buf(n, 3));
    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "obj", RIO_SIZE_UNKNOWN, 3, &e.call, &w));
    T_OK(write_pattern(w, src, n, 100000));
    T_OK(rio_writer_close(w, NULL));
    eu_get_check(e.c, "obj", n, 3, NULL);
    T_EQ(e.st.bytes, n);
    T_EQ(e.st.chunks, 65u);
    T_GE(e.st.elapsed_ns, e.st.last_done_ns);
    T_LE(e.st.peak_inflight_bytes, 3 * EU_CHUNK);
    T_GT(e.st.peak_inflight_bytes, 0u);
    T_EQ(eu_path_bytes(&e.st, NULL), n);
    T_GT(e.st.lat_max_ns, 0u);
    T_GT(e.st.verdict_text[0], 0);
    eu_idle(e.c);
    eu_close(&e);
}

/* Retryable faults on the stream's chunks are retried from the slot's
 * bytes: the object is byte-exact and the retries are counted. */
TEST(writer_retries_faults)
{
    struct eu e;
    const size_t n = 20 * EU_CHUNK + 99;

    eu_start(&e, "mock://wr4?paths=3");
    eu_fault(e.c, "error:op=write:chunk=3:count=2:error=RIO_ESERVER");
    eu_fault(e.c, "bitflip:op=write:chunk=11:count=1");
    eu_fault(e.c, "disconnect:op=write:chunk=17:count=1:down=0:bytes=1000");
    uint8_t *src = eu_keep(&e, eu_pattern_buf(n, 4));
    T_EQ(rio_put_stream(e.c, "obj", RIO_SIZE_UNKNOWN, 4, NULL, NULL, NULL, NULL), RIO_EINVAL);
    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "obj", RIO_SIZE_UNKNOWN, 4, &e.call, &w));
    T_OK(write_pattern(w, src, n, 7777));
    T_OK(rio_writer_close(w, NULL));
    eu_get_check(e.c, "obj", n, 4, NULL);
    T_GE(e.st.retries_total, 4u);
    T_EQ(eu_faults_fired(e.c), 4u);
    eu_idle(e.c);
    eu_close(&e);
}

/* A chunk that cannot be stored fails the stream: close returns the error,
 * the previous generation is untouched, nothing of the upload stays. */
TEST(writer_fatal_error_keeps_old)
{
    struct eu e;
    const size_t n = 10 * EU_CHUNK;

    eu_start_put(&e, "mock://wr5?paths=2", n, 5);
    eu_fault(e.c, "error:op=write:chunk=6:error=EACCES");
    uint8_t *src = eu_pattern_buf(n, 6);
    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "o", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    int wret = write_pattern(w, src, n, 10000);
    T_TRUE(wret == 0 || wret == -EACCES);
    T_EQ(rio_writer_close(w, NULL), -EACCES);
    eu_get_check(e.c, "o", n, 5, NULL);
    eu_idle(e.c);
    free(src);
    eu_close(&e);
}

/* Abort and cancel in the middle of a stream: not visible, nothing in
 * flight, nothing leaked (eu_close checks the blocks). */
TEST(writer_abort_and_cancel)
{
    struct eu e;
    const size_t n = 30 * EU_CHUNK;

    uint8_t *src = eu_start_src(&e, "mock://wr6?paths=2&rate=100M&lat=1ms", n, 7);
    struct rio_writer *w;
    struct rio_desc d;
    T_OK(rio_writer_open(e.c, "obj", RIO_SIZE_UNKNOWN, 4, NULL, &w));
    T_OK(write_pattern(w, src, n / 2, 9000));
    rio_writer_abort(w);
    eu_idle(e.c);
    T_EQ(rio_stat(e.c, "obj", &d), RIO_ENOTFOUND);
    rio_writer_abort(NULL);

    struct rio_cancel *cx;
    T_OK(rio_cancel_new(&cx));
    struct rio_call call = {.cancel = cx};
    T_OK(rio_writer_open(e.c, "obj", RIO_SIZE_UNKNOWN, 4, &call, &w));
    T_OK(write_pattern(w, src, n / 3, 9000));
    rio_cancel_fire(cx);
    int wret = write_pattern(w, src, n / 3, 9000);
    T_TRUE(wret == 0 || wret == RIO_ECANCELED);
    T_EQ(rio_writer_close(w, NULL), RIO_ECANCELED);
    eu_idle(e.c);
    T_EQ(rio_stat(e.c, "obj", &d), RIO_ENOTFOUND);
    rio_cancel_destroy(cx);
    eu_close(&e);
}

/* rio_put_stream reads chunks straight into the writer's buffers; a source
 * error drops the PUT and is returned as is. */
TEST(put_stream_source)
{
    struct eu e;
    const size_t n = 7 * EU_CHUNK + 1;

    uint8_t *src = eu_start_src(&e, "mock://wr7?paths=2", n, 8);
    struct t_piece_src s = {.p = src, .n = n, .step = 12345};
    T_OK(rio_put_stream(e.c, "obj", RIO_SIZE_UNKNOWN, 3, t_piece_fill, &s, NULL, NULL));
    eu_get_check(e.c, "obj", n, 8, NULL);

    struct t_piece_src bad = {.p = src, .n = n, .step = 12345, .fail_at = 3 * EU_CHUNK};
    T_EQ(rio_put_stream(e.c, "obj2", RIO_SIZE_UNKNOWN, 3, t_piece_fill, &bad, NULL, NULL), -EIO);
    struct rio_desc d;
    T_EQ(rio_stat(e.c, "obj2", &d), RIO_ENOTFOUND);
    eu_idle(e.c);
    eu_close(&e);
}

/* A source whose error does not fit in an int (its return is int64_t):
 * the cast made -(1 << 32) a 0, success, and the bytes given before it
 * were published as the whole object. Also a source that claims more
 * bytes than it was given room for. Both RIO_EINVAL, nothing published. */
struct wide_src {
    int calls;
    int64_t err;
};

static int64_t wide_fill(void *arg, void *buf, size_t cap)
{
    struct wide_src *s = arg;
    if (s->calls++ == 0) {
        memset(buf, 'x', cap < 100 ? cap : 100);
        return cap < 100 ? (int64_t)cap : 100;
    }
    return s->err;
}

TEST(put_stream_source_wide_error)
{
    struct eu e;
    struct rio_desc d;
    static const int64_t errs[] = {-(INT64_C(1) << 32), INT64_MIN, 10 * EU_CHUNK};

    eu_start(&e, "mock://wr7w?paths=2");
    for (unsigned i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        struct wide_src s = {.err = errs[i]};
        T_ERR(rio_put_stream(e.c, "obj", RIO_SIZE_UNKNOWN, 2, wide_fill, &s, NULL, NULL),
              RIO_EINVAL);
        T_ERR(rio_stat(e.c, "obj", &d), RIO_ENOTFOUND);
    }
    eu_idle(e.c);
    eu_close(&e);
}

/* A declared size the source does not keep to (a file that shrinks or
 * grows while it is read): RIO_EINVAL with a detail that says both
 * figures, from rio_put_stream and from rio_writer_close; nothing is
 * published. */
TEST(put_stream_size_mismatch_detail)
{
    struct eu e;
    const size_t n = 2 * EU_CHUNK + 7;
    char want[128];

    uint8_t *src = eu_start_src(&e, "mock://wr7s?paths=2", n + EU_CHUNK, 8);
    struct t_piece_src shorter = {.p = src, .n = n - 100, .step = 12345};
    T_EQ(rio_put_stream(e.c, "obj", n, 3, t_piece_fill, &shorter, NULL, NULL), RIO_EINVAL);
    snprintf(want, sizeof(want), "%zu bytes declared, the source gave %zu", n, n - 100);
    T_STREQ(rio_error_detail(), want);
    struct t_piece_src longer = {.p = src, .n = n + EU_CHUNK, .step = 12345};
    T_EQ(rio_put_stream(e.c, "obj", n, 3, t_piece_fill, &longer, NULL, NULL), RIO_EINVAL);
    snprintf(want, sizeof(want), "%zu bytes declared, the source gave more (", n);
    T_TRUE(strncmp(rio_error_detail(), want, strlen(want)) == 0);
    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "obj", n, 2, NULL, &w));
    T_OK(write_pattern(w, src, 10, 10));
    T_EQ(rio_writer_close(w, NULL), RIO_EINVAL);
    snprintf(want, sizeof(want), "%zu bytes declared, the source gave 10", n);
    T_STREQ(rio_error_detail(), want);
    struct rio_desc d;
    T_EQ(rio_stat(e.c, "obj", &d), RIO_ENOTFOUND);
    eu_idle(e.c);
    eu_close(&e);
}

/* etag=none skips the stream MD5: the object and its xxh3 list are the same,
 * the etag is empty. Bad values are refused. */
TEST(etag_none)
{
    struct eu e;
    struct rio_desc d, st;
    const size_t n = 5 * EU_CHUNK + 3;

    uint8_t *src = eu_start_src(&e, "mock://et1?paths=2&etag=none", n, 11);
    T_OK(rio_put(e.c, "obj", src, n, NULL, &d));
    T_STREQ(d.etag, "");
    T_EQ(d.nchunks, 6u);
    T_OK(rio_stat(e.c, "obj", &st));
    T_STREQ(st.etag, "");
    rio_desc_cleanup(&st);
    rio_desc_cleanup(&d);
    eu_get_check(e.c, "obj", n, 11, NULL);
    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "obj", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    T_OK(write_pattern(w, src, n, 50000));
    T_OK(rio_writer_close(w, &d));
    T_STREQ(d.etag, "");
    rio_desc_cleanup(&d);
    eu_idle(e.c);
    eu_close(&e);

    struct rio_client *c;
    T_EQ(rio_client_new("mock://et2?etag=sha1", NULL, &c), RIO_EINVAL);
}

/* rio__writer_expect_md5 (the S3 gateway's Content-MD5): close compares the
 * stream's MD5 before it commits; a wrong one publishes nothing and keeps the
 * old generation, the right one commits; a writer without MD5 refuses it. */
TEST(writer_expect_md5)
{
    struct eu e;
    const size_t n = 3 * EU_CHUNK + 7;
    uint8_t want[16] = {0};
    struct rio_md5 m;
    struct rio_writer *w;
    bool bad = false;

    eu_start_put(&e, "mock://em1?paths=2&etag=md5", n, 5);
    uint8_t *src = eu_pattern_buf(n, 6);
    T_OK(rio_writer_open(e.c, "o", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    T_OK(rio__writer_expect_md5(w, want, &bad));
    T_OK(write_pattern(w, src, n, 70000));
    T_EQ(rio_writer_close(w, NULL), RIO_ECHECKSUM);
    T_TRUE(bad);
    eu_get_check(e.c, "o", n, 5, NULL);

    T_OK(rio__md5_init(&m));
    T_OK(rio__md5_update(&m, src, n));
    T_OK(rio__md5_peek(&m, want));
    rio__md5_cleanup(&m);
    T_OK(rio_writer_open(e.c, "o", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    T_OK(rio__writer_expect_md5(w, want, &bad));
    T_OK(write_pattern(w, src, n, 70000));
    T_OK(rio_writer_close(w, NULL));
    T_FALSE(bad);
    eu_get_check(e.c, "o", n, 6, NULL);
    eu_idle(e.c);
    eu_close(&e);

    eu_start(&e, "mock://em2?etag=fast");
    T_OK(rio_writer_open(e.c, "o", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    T_EQ(rio__writer_expect_md5(w, want, &bad), RIO_ENOTSUP);
    rio_writer_abort(w);
    eu_close(&e);
    free(src);
}

/* rio__writer_no_md5: a writer of an etag=md5 client computes no stream
 * MD5 (the gateway's multipart Complete, whose ETag is the parts'): the
 * object is the same, its etag the empty one; refused once bytes were
 * written, and by a writer that promised an MD5 check. */
TEST(writer_no_md5)
{
    struct eu e;
    const size_t n = 3 * EU_CHUNK + 7;
    struct rio_writer *w;
    struct rio_desc d;
    uint8_t want[16] = {0};
    bool bad;

    eu_start(&e, "mock://nm1?paths=2&etag=md5");
    uint8_t *src = eu_pattern_buf(n, 8);
    T_OK(rio_writer_open(e.c, "o", n, 2, NULL, &w));
    T_OK(rio__writer_no_md5(w));
    T_OK(write_pattern(w, src, n, 70000));
    memset(&d, 0, sizeof(d));
    T_OK(rio_writer_close(w, &d));
    T_STREQ(d.etag, "");
    rio_desc_cleanup(&d);
    eu_get_check(e.c, "o", n, 8, NULL);
    /* The same client's other writers keep their MD5. */
    T_OK(rio_writer_open(e.c, "p", n, 2, NULL, &w));
    T_OK(write_pattern(w, src, n, 70000));
    memset(&d, 0, sizeof(d));
    T_OK(rio_writer_close(w, &d));
    T_EQ(strlen(d.etag), 32u);
    rio_desc_cleanup(&d);
    T_OK(rio_writer_open(e.c, "q", n, 2, NULL, &w));
    T_OK(write_pattern(w, src, 100, 100));
    T_EQ(rio__writer_no_md5(w), RIO_EINVAL);
    rio_writer_abort(w);
    T_OK(rio_writer_open(e.c, "q", n, 2, NULL, &w));
    T_OK(rio__writer_expect_md5(w, want, &bad));
    T_EQ(rio__writer_no_md5(w), RIO_EINVAL);
    rio_writer_abort(w);
    eu_idle(e.c);
    eu_close(&e);
    free(src);
}

/* What rio__writer_before_commit's hook saw, and whether the object was
 * already visible then. */
struct before {
    struct rio_client *c;
    char md5[33];
    uint64_t size;
    int calls, visible;
};

static void before_hook(void *arg, const char md5hex[33], uint64_t size)
{
    struct before *b = arg;
    struct rio_desc d;

    memcpy(b->md5, md5hex, 33);
    b->size = size;
    b->calls++;
    memset(&d, 0, sizeof(d));
    b->visible = rio_stat(b->c, "o", &d) == 0 && d.size == size;
    rio_desc_cleanup(&d);
}

/* rio__writer_before_commit (the S3 gateway writes a record beside the
 * commit): close calls the hook once, with the stream's MD5 (the etag it
 * then commits) and size, before the object is visible; not when the write
 * fails first (fewer bytes than declared); a writer without MD5 refuses. */
TEST(writer_before_commit)
{
    struct eu e;
    const size_t n = 2 * EU_CHUNK + 11;
    struct before b = {0};
    struct rio_writer *w;
    struct rio_desc d;

    eu_start(&e, "mock://bc1?paths=2&etag=md5");
    uint8_t *src = eu_pattern_buf(n, 8);
    b.c = e.c;
    T_OK(rio_writer_open(e.c, "o", n, 2, NULL, &w));
    T_OK(rio__writer_before_commit(w, before_hook, &b));
    T_OK(write_pattern(w, src, n, 50000));
    memset(&d, 0, sizeof(d));
    T_OK(rio_writer_close(w, &d));
    T_EQ(b.calls, 1);
    T_EQ(b.size, (uint64_t)n);
    T_FALSE(b.visible);
    T_STREQ(b.md5, d.etag);
    rio_desc_cleanup(&d);
    eu_get_check(e.c, "o", n, 8, NULL);

    b.calls = 0;
    T_OK(rio_writer_open(e.c, "o", n + 1, 2, NULL, &w));
    T_OK(rio__writer_before_commit(w, before_hook, &b));
    T_OK(write_pattern(w, src, n, 50000));
    T_EQ(rio_writer_close(w, NULL), RIO_EINVAL);
    T_EQ(b.calls, 0);
    eu_get_check(e.c, "o", n, 8, NULL);
    eu_idle(e.c);
    eu_close(&e);

    eu_start(&e, "mock://bc2?etag=fast");
    T_OK(rio_writer_open(e.c, "o", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    T_EQ(rio__writer_before_commit(w, before_hook, &b), RIO_ENOTSUP);
    rio_writer_abort(w);
    eu_close(&e);
    free(src);
}

/* One streamed PUT of n bytes in 3 slots; the error of open, write or close. */
static int stream_once(struct rio_client *c, const uint8_t *src, size_t n)
{
    struct rio_writer *w;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int ret = rio_writer_open(c, "sweep", RIO_SIZE_UNKNOWN, 3, &call, &w);
    if (ret < 0)
        return ret;
    ret = write_pattern(w, src, n, 30000);
    int cret = rio_writer_close(w, NULL);
    return ret < 0 ? ret : cret;
}

/* Every allocation of a streamed PUT failed in turn: each run ends
 * committed whole or with -ENOMEM and nothing visible, nothing leaks, and
 * the client still works. */
TEST(writer_alloc_fail_sweep)
{
    struct eu e;
    const size_t n = 5 * EU_CHUNK + 17;
    unsigned hits = 0;
    uint64_t k;

    eu_start(&e, "mock://wr8?paths=2");
    uint8_t *src = eu_pattern_buf(n, 12);
    T_OK(stream_once(e.c, src, n)); /* warm the staging cache */
    T_OK(rio_delete(e.c, "sweep"));
    const int64_t base = rio__alloc_outstanding();
    for (k = 1; k < 5000; k++) {
        uint64_t before = rio__alloc_calls();
        rio__alloc_fail_nth(k);
        int ret = stream_once(e.c, src, n);
        rio__alloc_fail_nth(0);
        int hit = rio__alloc_calls() - before >= k;
        struct rio_desc d;
        if (ret == 0) {
            eu_get_check(e.c, "sweep", n, 12, NULL);
        } else {
            T_ERR(ret, -ENOMEM);
            T_EQ(rio_stat(e.c, "sweep", &d), RIO_ENOTFOUND);
        }
        eu_idle(e.c);
        int dr = rio_delete(e.c, "sweep");
        T_TRUE(dr == 0 || dr == RIO_ENOTFOUND);
        if (rio__alloc_outstanding() != base)
            T_FAIL("k=%" PRIu64 " (%d): %" PRId64 " block(s) leaked", k, ret,
                   rio__alloc_outstanding() - base);
        T_OK(stream_once(e.c, src, n));
        T_OK(rio_delete(e.c, "sweep"));
        if (!hit)
            break;
        hits++;
    }
    T_GT(hits, 10u);
    T_LT(k, 5000u);
    free(src);
    eu_close(&e);
}
