/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Invariant 8 at the API: bad input gets a clear error, never a crash; and the
 * edge sizes around a chunk boundary move exactly.
 */
#include "engine_util.h"

TEST(bad_urls)
{
    struct rio_options o;
    struct rio_client *c = (struct rio_client *)1;
    const int64_t base = rio__alloc_outstanding();

    eu_opts(&o);
    T_ERR(rio_client_new("not a url", &o, &c), RIO_EURL);
    T_NULL(c);
    T_ERR(rio_client_new("", &o, &c), RIO_EURL);
    T_ERR(rio_client_new("nosuchscheme://x", &o, &c), RIO_EURL);
    T_NULL(c);
    T_ERR(rio_client_new("://x", &o, &c), RIO_EURL);
    T_ERR(rio_client_new(NULL, &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("mock://x", &o, NULL), RIO_EINVAL);
    /* Bad mock parameters and options. */
    T_ERR(rio_client_new("mock://x?paths=0", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("mock://x?paths=99", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("mock://x?rate=fast", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("mock://x?faults=explode", &o, &c), RIO_EINVAL);
    struct rio_options bad = o;
    bad.chunk_size = 100; /* below the minimum */
    T_ERR(rio_client_new("mock://x", &bad, &c), RIO_EINVAL);
    bad = o;
    bad.budget_mode = 7;
    T_ERR(rio_client_new("mock://x", &bad, &c), RIO_EINVAL);
    bad = o;
    bad.backoff_base_ms = 100;
    bad.backoff_cap_ms = 10;
    T_ERR(rio_client_new("mock://x", &bad, &c), RIO_EINVAL);
    T_NULL(c);
    T_EQ(rio__alloc_outstanding(), base);

    /* NULL client: an error, not a crash. */
    char b[8];
    T_ERR(rio_put(NULL, "k", b, 8, NULL, NULL), RIO_EINVAL);
    T_ERR(rio_get(NULL, "k", b, 8, NULL), RIO_EINVAL);
    T_ERR(rio_batch(NULL, NULL, 0, NULL), RIO_EINVAL);
    rio_client_destroy(NULL);
    T_EQ(rio__alloc_outstanding(), base);
}

TEST(bad_keys)
{
    struct eu e;
    char *longkey = malloc(RIO_KEY_MAX + 2);
    uint8_t buf[4096];

    eu_start(&e, "mock://keys?paths=2");
    memset(longkey, 'k', RIO_KEY_MAX + 1);
    longkey[RIO_KEY_MAX + 1] = '\0';
    t_fill_pattern(buf, sizeof(buf), 1);

    T_ERR(rio_put(e.c, "", buf, sizeof(buf), NULL, NULL), RIO_EINVAL);
    T_ERR(rio_put(e.c, NULL, buf, sizeof(buf), NULL, NULL), RIO_EINVAL);
    T_ERR(rio_put(e.c, longkey, buf, sizeof(buf), NULL, NULL), RIO_EINVAL);
    T_ERR(rio_get(e.c, "", buf, sizeof(buf), NULL), RIO_EINVAL);
    T_ERR(rio_get(e.c, longkey, buf, sizeof(buf), NULL), RIO_EINVAL);
    struct rio_desc d;
    T_ERR(rio_stat(e.c, "", &d), RIO_EINVAL);
    T_ERR(rio_stat(e.c, longkey, &d), RIO_EINVAL);
    T_ERR(rio_delete(e.c, longkey), RIO_EINVAL);
    eu_idle(e.c);

    /* Exactly RIO_KEY_MAX bytes is a valid key. */
    longkey[RIO_KEY_MAX] = '\0';
    T_OK(rio_put(e.c, longkey, buf, sizeof(buf), NULL, NULL));
    memset(buf, 0, sizeof(buf));
    T_EQ(rio_get(e.c, longkey, buf, sizeof(buf), NULL), (int64_t)sizeof(buf));
    T_PATTERN(buf, sizeof(buf), 1);
    T_OK(rio_stat(e.c, longkey, &d));
    T_STREQ(d.key, longkey);
    rio_desc_cleanup(&d);

    /* A NULL buffer with a non-zero length. */
    T_ERR(rio_put(e.c, "k", NULL, 10, NULL, NULL), RIO_EINVAL);
    T_ERR(rio_get(e.c, longkey, NULL, 10, NULL), RIO_EINVAL);
    /* A batch op with a bad key fails alone. */
    struct rio_op ops[2] = {
        {.type = RIO_OP_PUT, .key = "", .buf = buf, .len = 16},
        {.type = RIO_OP_GET, .key = longkey, .buf = buf, .len = sizeof(buf)},
    };
    T_EQ(rio_batch(e.c, ops, 2, NULL), 1);
    T_ERR(ops[0].result, RIO_EINVAL);
    T_EQ(ops[1].result, (int64_t)sizeof(buf));
    free(longkey);
    eu_close(&e);
}

TEST(get_errors)
{
    struct eu e;
    const size_t n = 3 * EU_CHUNK;

    eu_start_put(&e, "mock://geterr?paths=2", n, 2);
    uint8_t *dst = eu_fill_buf(n, 0x5C);

    /* Too small a buffer: refused before anything moves, buffer untouched. */
    T_ERR(rio_get(e.c, "o", dst, n - 1, NULL), RIO_ETOOBIG);
    T_EQ(eu_count_byte(dst, n, 0x5C), n);
    T_ERR(rio_get(e.c, "o", dst, 0, NULL), RIO_ETOOBIG);
    /* A missing key. */
    T_ERR(rio_get(e.c, "missing", dst, n, NULL), RIO_ENOTFOUND);
    struct rio_desc d;
    T_ERR(rio_stat(e.c, "missing", &d), RIO_ENOTFOUND);
    T_ERR(rio_delete(e.c, "missing"), RIO_ENOTFOUND);
    eu_idle(e.c);
    /* A larger buffer is fine: the count says how much is the object. */
    uint8_t *big = eu_fill_buf(n + 1000, 0x5C);
    T_EQ(rio_get(e.c, "o", big, n + 1000, NULL), (int64_t)n);
    T_PATTERN(big, n, 2);
    T_EQ(eu_count_byte(big + n, 1000, 0x5C), 1000u);
    free(big);
    free(dst);
    eu_close(&e);
}

/* Sizes 0, 1, chunk-1, chunk, chunk+1, 2*chunk-1 and a few more: exact. */
TEST(edge_sizes)
{
    struct eu e;
    const size_t sizes[] = {0,
                            1,
                            EU_CHUNK - 1,
                            EU_CHUNK,
                            EU_CHUNK + 1,
                            2 * EU_CHUNK - 1,
                            2 * EU_CHUNK,
                            5 * EU_CHUNK + 3};

    eu_start(&e, "mock://edges?paths=3");
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        size_t n = sizes[i];
        char key[32];
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        struct rio_desc d;

        snprintf(key, sizeof(key), "size-%zu", n);
        uint8_t *src = eu_pattern_buf(n, 10 + i);
        T_OK(rio_put(e.c, key, src, n, &call, &d));
        T_EQ(d.size, n);
        T_EQ(d.nchunks, (n + EU_CHUNK - 1) / EU_CHUNK);
        T_EQ(st.bytes, n);
        T_EQ(st.chunks, d.nchunks);
        rio_desc_cleanup(&d);
        eu_get_check(e.c, key, n, 10 + i, &call);
        T_EQ(st.bytes, n);
        T_EQ(st.chunks, (n + EU_CHUNK - 1) / EU_CHUNK);
        struct rio_call ac = {.flags = RIO_ATOMIC};
        eu_get_check(e.c, key, n, 10 + i, &ac);
        free(src);
        eu_idle(e.c);
    }
    /* A size-0 object: NULL buffers are fine both ways. */
    T_OK(rio_put(e.c, "empty", NULL, 0, NULL, NULL));
    T_EQ(rio_get(e.c, "empty", NULL, 0, NULL), 0);
    void *p = NULL;
    T_EQ(rio_get_alloc(e.c, "empty", &p, NULL), 0);
    T_NOTNULL(p);
    free(p);
    /* rio_get_alloc looks the object up once (its size, then the GET
     * planned from that descriptor), not twice, and verifies every chunk. */
    enum { LEN = 3 * EU_CHUNK + 5 };
    static uint8_t src[LEN];
    t_fill_pattern(src, LEN, 44);
    T_OK(rio_put(e.c, "alloc", src, LEN, NULL, NULL));
    struct rio_mock_counters k0, k1;
    struct rio_stats st;
    struct rio_call sc = {.stats = &st};
    rio_mock_counters(e.c, &k0);
    T_EQ(rio_get_alloc(e.c, "alloc", &p, &sc), (int64_t)LEN);
    rio_mock_counters(e.c, &k1);
    T_EQ(k1.lookups - k0.lookups, 1u);
    T_MEMEQ(p, src, LEN);
    T_EQ(st.chunks, 4u);
    free(p);
    eu_close(&e);
}

/* Options come back resolved, and URL parameters set the knobs. */
TEST(options_resolved)
{
    struct eu e;
    struct rio_options o, eff;

    rio_options_init(&o);
    eu_open(&e, "mock://opts?paths=3&chunk=128K&depth=2&retries=7", &o);
    rio_client_options(e.c, &eff);
    T_EQ(eff.paths, 3u);
    T_EQ(eff.chunk_size, 128 * EU_KIB);
    T_EQ(eff.depth, 2u);
    T_EQ(eff.retry_attempts, 7u);
    T_EQ(eff.budget_mode, RIO_BUDGET_WAIT);
    T_GT(eff.budget_bytes, 0u);
    T_GT(eff.deadline_ms, 0u);
    T_NE(eff.seed, 0u);
    uint8_t *src = eu_put_pattern(e.c, "o", 300 * EU_KIB, 3, NULL);
    struct rio_desc d;
    T_OK(rio_stat(e.c, "o", &d));
    T_EQ(d.chunk_size, 128 * EU_KIB);
    T_EQ(d.nchunks, 3u);
    rio_desc_cleanup(&d);
    free(src);
    eu_close(&e);
}

/* The calls that return nothing take NULL as the lifetime ones do
 * (rio_client_destroy, rio_desc_cleanup): rio_options_init(NULL),
 * rio_client_options and rio_client_counters with a NULL client or a NULL
 * out crashed (a write through NULL, or a read of c->o). */
TEST(void_calls_take_null)
{
    struct rio_options o;
    struct rio_counters k;
    struct rio_client *c;

    rio_options_init(NULL);
    memset(&o, 0xab, sizeof(o));
    rio_client_options(NULL, &o);
    T_EQ(o.chunk_size, 0u);
    T_EQ(o.reserved[6], 0u);
    memset(&k, 0xab, sizeof(k));
    rio_client_counters(NULL, &k);
    T_EQ(k.inflight_ops, 0u);
    T_EQ(k.budget_reserved, 0u);
    eu_opts(&o);
    T_OK(rio_client_new("mock://vn", &o, &c));
    rio_client_options(c, NULL);
    rio_client_counters(c, NULL);
    rio_client_options(c, &o);
    T_GT(o.chunk_size, 0u);
    rio_client_destroy(c);
}

/* rio_cancel_new(NULL) wrote the new token through NULL. */
TEST(cancel_new_null)
{
    struct rio_cancel *cx = (struct rio_cancel *)1;
    const int64_t base = rio__alloc_outstanding();

    T_ERR(rio_cancel_new(NULL), RIO_EINVAL);
    T_EQ(rio__alloc_outstanding(), base);
    T_OK(rio_cancel_new(&cx));
    T_TRUE(cx != NULL && cx != (struct rio_cancel *)1);
    rio_cancel_destroy(cx);
    T_EQ(rio__alloc_outstanding(), base);
}

/* struct rio_call.reserved must be zero (railio.h, ABI rules), as
 * rio_list_args' and rio_fsck_args' are: a call struct left uninitialised
 * was taken as is. */
TEST(call_reserved_refused)
{
    struct rio_options o;
    struct rio_client *c;
    uint8_t buf[100] = {0};
    struct rio_reader *rd;
    struct rio_writer *w;

    eu_opts(&o);
    T_OK(rio_client_new("mock://cr", &o, &c));
    T_OK(rio_put(c, "k", buf, sizeof(buf), NULL, NULL));
    struct rio_call call = {0};
    call.reserved[7] = 1;
    T_ERR(rio_put(c, "k", buf, sizeof(buf), &call, NULL), RIO_EINVAL);
    T_TRUE(strstr(rio_error_detail(), "reserved") != NULL);
    T_ERR(rio_get(c, "k", buf, sizeof(buf), &call), RIO_EINVAL);
    T_ERR(rio_reader_open(c, "k", 0, &call, &rd), RIO_EINVAL);
    T_ERR(rio_writer_open(c, "w", 10, 0, &call, &w), RIO_EINVAL);
    struct rio_op op = {.type = RIO_OP_GET, .key = "k", .buf = buf, .len = sizeof(buf)};
    T_LT(rio_batch(c, &op, 1, &call), 1);
    call.reserved[7] = 0;
    T_EQ(rio_get(c, "k", buf, sizeof(buf), &call), (int64_t)sizeof(buf));
    rio_client_destroy(c);
}

/* A refused key or buffer says why in rio_error_detail (it was "": the
 * code alone, RIO_EINVAL, for a NULL, empty or too long key, and a NULL
 * buffer). */
TEST(bad_key_says_why)
{
    struct rio_options o;
    struct rio_client *c;
    uint8_t buf[16] = {0};
    char big[RIO_KEY_MAX + 2];
    struct rio_reader *rd;

    memset(big, 'k', sizeof(big) - 1);
    big[sizeof(big) - 1] = '\0';
    eu_opts(&o);
    T_OK(rio_client_new("mock://kw", &o, &c));
    T_ERR(rio_put(c, NULL, buf, sizeof(buf), NULL, NULL), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "key is NULL"));
    T_ERR(rio_get(c, "", buf, sizeof(buf), NULL), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "key is empty"));
    T_ERR(rio_reader_open(c, big, 0, NULL, &rd), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "RIO_KEY_MAX"));
    T_ERR(rio_put(c, "k", NULL, sizeof(buf), NULL, NULL), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "buffer is NULL"));
    const char *keys[] = {"a", ""};
    T_ERR(rio_exists_batch(c, keys, 2, NULL, NULL, NULL), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "keys[1]: the key is empty"));
    T_OK(rio_put(c, "k", buf, sizeof(buf), NULL, NULL));
    T_STREQ(rio_error_detail(), "");
    rio_client_destroy(c);
}

/* An unknown scheme says which one and what this build opens (the detail
 * was "", where a left-out backend or an unknown option says why). */
TEST(unknown_scheme_says_why)
{
    struct rio_client *c = (struct rio_client *)1;

    T_ERR(rio_client_new("nosuchscheme://x/k", NULL, &c), RIO_EURL);
    T_NULL(c);
    T_NOTNULL(strstr(rio_error_detail(), "unknown scheme 'nosuchscheme://'"));
    T_NOTNULL(strstr(rio_error_detail(), "mock"));
}

/* A PUT whose length makes more than RIO__DESC_CHUNKS_MAX chunks (as many
 * as a descriptor, so a GET, may have) is refused
 * before anything is allocated or read: a length past the buffer (1 PiB
 * in 4 MiB chunks) had 268 M chunks' state zeroed (13 GiB) before the
 * first send, and here (4 KiB chunks, 64 GiB + 1 byte of a 16-byte
 * buffer) a read past the buffer; with a larger chunk size it is taken. */
TEST(put_of_too_many_chunks_refused_first)
{
    struct rio_options o;
    struct rio_client *c;
    static uint8_t buf[16];

    eu_opts(&o);
    o.chunk_size = 4096;
    T_OK(rio_client_new("mock://many", &o, &c));
    T_ERR(rio_put(c, "k", buf, (size_t)(RIO__DESC_CHUNKS_MAX * 4096 + 1), NULL, NULL), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "option chunk"));
    T_ERR(rio_put(c, "k", buf, SIZE_MAX, NULL, NULL), RIO_EINVAL);
    T_OK(rio_put(c, "k", buf, sizeof(buf), NULL, NULL));
    rio_client_destroy(c);
}
