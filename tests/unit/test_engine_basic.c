/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The engine's happy paths: striping over several paths and back byte-exact,
 * one path, pull-based planning that spreads chunks, batches, and several
 * callers at once on one client.
 */
#include "engine_util.h"

/* 4 paths, PUT then GET of 8 MiB in 64 KiB chunks: byte-exact, and every path
 * carried a part of both transfers. */
TEST(aggregate_four_paths)
{
    struct eu e;
    struct rio_stats pst, gst;
    struct rio_call pc = {.stats = &pst}, gc = {.stats = &gst};
    const size_t n = 8 * EU_MIB;
    unsigned used;

    /* adapt=off: every path from the first op (test_engine_adapt: the climb) */
    eu_start(&e, "mock://agg4?paths=4&rate=400M,400M,400M,400M&adapt=off");
    uint8_t *src = eu_keep(&e, eu_put_pattern(e.c, "obj", n, 1, &pc));
    eu_idle(e.c);
    T_EQ(pst.bytes, n);
    T_EQ(pst.npaths, 4u);
    T_EQ(eu_path_bytes(&pst, &used), n);
    T_EQ(used, 4u);
    T_EQ(pst.chunks, n / EU_CHUNK);

    eu_get_check(e.c, "obj", n, 1, &gc);
    T_EQ(gst.bytes, n);
    T_EQ(eu_path_bytes(&gst, &used), n);
    T_EQ(used, 4u);
    for (unsigned i = 0; i < 4; i++) {
        T_GT(gst.path[i].ops, 0u);
        T_EQ(gst.path[i].errors, 0u);
    }
    T_EQ(eu_path_ops(&gst), n / EU_CHUNK);
    T_EQ(gst.retries_total, 0u);

    /* The descriptor the store holds is the one the PUT computed. */
    struct rio_desc d;
    T_OK(rio_stat(e.c, "obj", &d));
    T_EQ(d.size, n);
    T_EQ(d.chunk_size, EU_CHUNK);
    T_EQ(d.nchunks, n / EU_CHUNK);
    T_NOTNULL(d.xxh);
    for (uint64_t k = 0; k < d.nchunks; k++)
        T_EQ(d.xxh[k], rio__xxh3(src + k * EU_CHUNK, EU_CHUNK));
    T_EQ(strlen(d.etag), 32u);
    rio_desc_cleanup(&d);
    eu_close(&e);
}

/* The default etag (etag=fast) is derived from the chunk list the PUT
 * computed, with no pass over the bytes: the PUT's and the store's
 * descriptor carry it, the same bytes give it again, and one byte changed
 * anywhere gives another. etag=md5 still gives the MD5 of the stream, over
 * several chunks hashed on the pool at once. */
TEST(etag_fast_by_default_md5_on_request)
{
    struct eu e;
    const size_t n = 5 * EU_CHUNK + 777;
    char want[33], first[33];

    eu_start(&e, "mock://etag?paths=2");
    uint8_t *src = eu_keep(&e, eu_pattern_buf(n, 9));
    struct rio_desc d, s;
    T_OK(rio_put(e.c, "k", src, n, NULL, &d));
    T_EQ(d.nchunks, 6u);
    rio__etag_fast(d.xxh, d.nchunks, d.size, d.chunk_size, want);
    T_STREQ(d.etag, want);
    T_OK(rio_stat(e.c, "k", &s));
    T_STREQ(s.etag, want);
    memcpy(first, d.etag, 33);
    rio_desc_cleanup(&d);
    rio_desc_cleanup(&s);
    T_OK(rio_put(e.c, "k", src, n, NULL, &d));
    T_STREQ(d.etag, first);
    rio_desc_cleanup(&d);
    for (size_t at = 0; at < n; at += n / 3) {
        src[at] ^= 0x01;
        T_OK(rio_put(e.c, "k", src, n, NULL, &d));
        T_NE(strcmp(d.etag, first), 0);
        rio_desc_cleanup(&d);
        src[at] ^= 0x01;
    }
    eu_close(&e);

    eu_start(&e, "mock://etag?paths=2&etag=md5");
    src = eu_keep(&e, eu_pattern_buf(n, 9));
    struct rio_md5 m;
    T_OK(rio__md5_init(&m));
    T_OK(rio__md5_update(&m, src, n));
    T_OK(rio__md5_final(&m, want));
    T_OK(rio_put(e.c, "k", src, n, NULL, &d));
    T_STREQ(d.etag, want);
    for (uint64_t k = 0; k < d.nchunks; k++)
        T_EQ(d.xxh[k], rio__xxh3(src + k * EU_CHUNK, k + 1 < d.nchunks ? EU_CHUNK : n % EU_CHUNK));
    rio_desc_cleanup(&d);
    T_OK(rio_stat(e.c, "k", &s));
    T_STREQ(s.etag, want);
    rio_desc_cleanup(&s);
    eu_get_check(e.c, "k", n, 9, NULL);
    eu_close(&e);

    eu_start(&e, "mock://etag?paths=2&etag=none");
    src = eu_keep(&e, eu_pattern_buf(n, 9));
    T_OK(rio_put(e.c, "k", src, n, NULL, &d));
    T_STREQ(d.etag, "");
    rio_desc_cleanup(&d);
    eu_close(&e);
}

/* paths=1: the engine is a plain pass-through. */
TEST(single_path_passthrough)
{
    struct eu e;
    const size_t n = 3 * EU_MIB + 12345;

    eu_start(&e, "mock://single?paths=1");
    T_EQ(rio_get(e.c, "none", NULL, 0, NULL), RIO_ENOTFOUND);
    eu_keep(&e, eu_put_pattern(e.c, "one", n, 2, &e.call));
    T_EQ(e.st.npaths, 1u);
    T_EQ(e.st.path[0].bytes, n);
    eu_get_check(e.c, "one", n, 2, &e.call);
    T_EQ(e.st.npaths, 1u);
    T_EQ(e.st.path[0].bytes, n);
    T_EQ(e.st.path[0].ops, (n + EU_CHUNK - 1) / EU_CHUNK);
    T_EQ(e.st.chunks, (n + EU_CHUNK - 1) / EU_CHUNK);
    struct rio_options eff;
    rio_client_options(e.c, &eff);
    T_EQ(eff.paths, 1u);
    T_EQ(eff.chunk_size, EU_CHUNK);
    eu_close(&e);
}

/* Equal paths share the work: pull-based planning gives each a fair part. */
TEST(planning_spreads_chunks)
{
    struct eu e;
    const size_t n = 8 * EU_MIB;
    const uint64_t nch = n / EU_CHUNK;

    eu_start(&e, "mock://spread?paths=4&rate=100M&lat=100us&adapt=off");
    eu_keep(&e, eu_put_pattern(e.c, "s", n, 3, &e.call));
    for (unsigned i = 0; i < 4; i++)
        T_GE(e.st.path[i].ops * 100, nch * 15);
    eu_get_check(e.c, "s", n, 3, &e.call);
    for (unsigned i = 0; i < 4; i++) {
        T_GE(e.st.path[i].ops * 100, nch * 15);
        T_GE(e.st.path[i].bytes * 100, (uint64_t)n * 15);
    }
    T_EQ(eu_path_ops(&e.st), nch);
    eu_close(&e);
}

/* A batch of many small PUTs commits each one as soon as its chunks are in
 * and it is hashed, while the others still move (the mock counts commits
 * made with ops in flight: none if the commits waited for the whole
 * transfer); every object is whole, with its etag, an empty one included. */
TEST(batch_commits_pipelined)
{
    enum { N = 24 };
    const size_t n = 64 * EU_KIB;
    struct eu e;
    struct rio_op ops[N + 1];
    uint8_t *src[N];
    char keys[N + 1][16];

    eu_start(&e, "mock://pipe?paths=1&rate=20M");
    memset(ops, 0, sizeof(ops));
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "p%u", i);
        src[i] = eu_pattern_buf(n, 100 + i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = src[i], .len = n};
    }
    snprintf(keys[N], sizeof(keys[N]), "empty");
    ops[N] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[N], .buf = src[0], .len = 0};
    T_EQ(rio_batch(e.c, ops, N + 1, NULL), N + 1);
    struct rio_mock_counters k;
    rio_mock_counters(e.c, &k);
    fprintf(stderr, "  commits %llu, with ops in flight %llu\n", (unsigned long long)k.commits,
            (unsigned long long)k.commits_overlapped);
    T_EQ(k.commits, (uint64_t)N + 1);
    T_GE(k.commits_overlapped, 1u);
    eu_idle(e.c);
    for (unsigned i = 0; i < N; i++) {
        T_EQ(ops[i].result, 0);
        T_GT(ops[i].generation, 0u);
        eu_get_check(e.c, keys[i], n, 100 + i, NULL);
        struct rio_desc d;
        T_OK(rio_stat(e.c, keys[i], &d));
        T_EQ(d.generation, ops[i].generation);
        T_EQ(strlen(d.etag), 32u);
        rio_desc_cleanup(&d);
        free(src[i]);
    }
    struct rio_desc d;
    T_OK(rio_stat(e.c, "empty", &d));
    T_EQ(d.size, 0u);
    char empty[33];
    rio__etag_fast(NULL, 0, 0, d.chunk_size, empty); /* the default etag of nothing */
    T_STREQ(d.etag, empty);
    rio_desc_cleanup(&d);
    eu_close(&e);
}

/* A batch's GETs are looked up by its workers while it moves: the lookups
 * overlap the transfer; one for a missing key, one into a buffer too small
 * and one with the wrong generation fail alone; an empty object and an
 * atomic (staged) call come back whole. */
TEST(batch_lookups_pipelined)
{
    enum { N = 24 };
    const size_t n = 64 * EU_KIB;
    struct eu e;
    struct rio_op ops[N + 3];
    uint8_t *src[N], *dst[N + 3];
    char keys[N][16];

    eu_start(&e, "mock://lk?paths=1&rate=20M");
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "g%u", i);
        src[i] = eu_put_pattern(e.c, keys[i], i == 5 ? 0 : n + i, 200 + i, NULL);
    }
    struct rio_mock_counters k0, k;
    rio_mock_counters(e.c, &k0);
    for (unsigned pass = 0; pass < 2; pass++) {
        memset(ops, 0, sizeof(ops));
        for (unsigned i = 0; i < N + 3; i++)
            dst[i] = eu_fill_buf(n + N, 0xEE);
        for (unsigned i = 0; i < N; i++)
            ops[i] =
                (struct rio_op){.type = RIO_OP_GET, .key = keys[i], .buf = dst[i], .len = n + N};
        ops[N] = (struct rio_op){.type = RIO_OP_GET, .key = "missing", .buf = dst[N], .len = n};
        ops[N + 1] =
            (struct rio_op){.type = RIO_OP_GET, .key = keys[7], .buf = dst[N + 1], .len = 9};
        ops[N + 2] =
            (struct rio_op){.type = RIO_OP_GET, .key = keys[8], .buf = dst[N + 2], .len = n + N};
        struct rio_call call = {.flags = pass ? RIO_ATOMIC : 0};
        T_EQ(rio_batch(e.c, ops, N + 3, &call), N + 1);
        for (unsigned i = 0; i < N; i++) {
            size_t len = i == 5 ? 0 : n + i;
            T_EQ(ops[i].result, (int64_t)len);
            T_GT(ops[i].generation, 0u);
            T_EQ(memcmp(dst[i], src[i], len), 0);
            T_EQ(eu_count_byte(dst[i] + len, n + N - len, 0xEE), n + N - len);
        }
        T_ERR(ops[N].result, RIO_ENOTFOUND);
        T_ERR(ops[N + 1].result, RIO_ETOOBIG);
        T_EQ(eu_count_byte(dst[N + 1], n + N, 0xEE), n + N);
        T_EQ(ops[N + 2].result, (int64_t)(n + 8));
        T_EQ(memcmp(dst[N + 2], src[8], n + 8), 0);
        for (unsigned i = 0; i < N + 3; i++)
            free(dst[i]);
    }
    rio_mock_counters(e.c, &k);
    fprintf(stderr, "  lookups %llu, with ops in flight %llu\n",
            (unsigned long long)(k.lookups - k0.lookups),
            (unsigned long long)(k.lookups_overlapped - k0.lookups_overlapped));
    T_EQ(k.lookups - k0.lookups, 2u * (N + 3));
    /* Before: every lookup of a batch ran before its first op moved. */
    T_GE(k.lookups_overlapped - k0.lookups_overlapped, 2u);

    /* expect_generation holds for every GET of the batch. */
    struct rio_op g2[2] = {{.type = RIO_OP_GET, .key = keys[1], .buf = src[1], .len = n + 1},
                           {.type = RIO_OP_GET, .key = keys[2], .buf = src[2], .len = n + 2}};
    struct rio_desc d1;
    T_OK(rio_stat(e.c, keys[1], &d1));
    struct rio_call cg = {.expect_generation = d1.generation};
    T_EQ(rio_batch(e.c, g2, 2, &cg), 1);
    T_EQ(g2[0].result, (int64_t)(n + 1));
    T_ERR(g2[1].result, RIO_EGENERATION);
    rio_desc_cleanup(&d1);
    eu_idle(e.c);
    for (unsigned i = 0; i < N; i++)
        free(src[i]);
    eu_close(&e);
}

/* A batch holds a bounded number of prepared requests: 600 PUTs never have
 * more than the window's uploads open at once (each is a file descriptor,
 * a temporary file, a multipart upload), and all of them land. */
TEST(batch_window_bounded)
{
    enum { N = 600 };
    const size_t n = 4 * EU_KIB;
    struct eu e;
    struct rio_op *ops = calloc(N, sizeof(*ops));
    char(*keys)[16] = calloc(N, 16);
    uint8_t *src = eu_pattern_buf(n * N, 77);

    T_NOTNULL(ops);
    T_NOTNULL(keys);
    eu_start_o(&e, "mock://win?paths=2&rate=50M", e.o.depth = 4);
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], 16, "w%u", i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = src + i * n, .len = n};
    }
    T_EQ(rio_batch(e.c, ops, N, NULL), N);
    struct rio_mock_counters k;
    rio_mock_counters(e.c, &k);
    fprintf(stderr, "  uploads open at once: %llu of %u\n", (unsigned long long)k.uploads_open_peak,
            (unsigned)N);
    T_EQ(k.uploads_open, 0u);
    T_EQ(k.commits, (uint64_t)N);
    /* paths x depth + 2 x workers (16 here) */
    T_LE(k.uploads_open_peak, 2u * 4 + 2u * 16);
    uint8_t *dst = malloc(n);
    T_NOTNULL(dst);
    for (unsigned i = 0; i < N; i += 37) {
        T_EQ(rio_get(e.c, keys[i], dst, n, NULL), (int64_t)n);
        T_MEMEQ(dst, src + i * n, n);
    }
    free(dst);
    eu_idle(e.c);
    free(ops);
    free(keys);
    free(src);
    eu_close(&e);
}

/* Requests a batch has not prepared yet are not on the engine's list, so
 * the workers watch their deadline and the call's cancel: a batch far
 * slower than its deadline ends at the deadline, every GET whole or
 * RIO_EDEADLINE, and a cancelled one ends at once, the same way. */
TEST(batch_deadline_before_prepared)
{
    enum { N = 200 };
    const size_t n = 64 * EU_KIB;
    struct eu e;
    struct rio_op ops[N];
    uint8_t *src = eu_pattern_buf(n, 5), *dst = malloc(N * n);
    char keys[N][16];

    T_NOTNULL(dst);
    eu_start_o(&e, "mock://dl?paths=1", e.o.depth = 2);
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "d%u", i);
        T_OK(rio_put(e.c, keys[i], src, n, NULL, NULL));
    }
    /* 1 MB/s: 200 x 64 KiB would take 13 s */
    T_OK(rio_mock_set_path(e.c, 0, 1e6, 0));
    for (unsigned round = 0; round < 2; round++) {
        struct rio_cancel *cx = NULL;
        struct rio_call call = {.deadline_ms = 300};
        if (round) {
            T_OK(rio_cancel_new(&cx));
            call = (struct rio_call){.cancel = cx};
            rio_cancel_fire(cx);
        }
        for (unsigned i = 0; i < N; i++)
            ops[i] =
                (struct rio_op){.type = RIO_OP_GET, .key = keys[i], .buf = dst + i * n, .len = n};
        uint64_t t0 = eu_now_ns();
        int ok = rio_batch(e.c, ops, N, &call);
        double ms = (double)(eu_now_ns() - t0) / 1e6;
        fprintf(stderr, "  %s: %d of %d in %.0f ms\n", round ? "cancelled" : "deadline 300 ms", ok,
                N, ms);
        T_LT(ms, 3000.0);
        T_LT(ok, N / 2);
        for (unsigned i = 0; i < N; i++) {
            if (ops[i].result >= 0) {
                T_EQ(ops[i].result, (int64_t)n);
                T_MEMEQ(dst + i * n, src, n);
            } else {
                T_ERR(ops[i].result, round ? RIO_ECANCELED : RIO_EDEADLINE);
            }
        }
        rio_cancel_destroy(cx);
    }
    eu_idle(e.c);
    free(src);
    free(dst);
    eu_close(&e);
}

/* A batch of independent PUTs and GETs, one of them for a missing key: that
 * one fails alone with RIO_ENOTFOUND, the others succeed. */
TEST(batch_mixed_ops)
{
    struct eu e;
    const size_t na = 1 * EU_MIB + 7, nb = 2 * EU_MIB, nc = 640 * EU_KIB;

    eu_start_put(&e, "mock://batch?paths=3&rate=300M", nc, 13);
    struct rio_desc dc;
    T_OK(rio_stat(e.c, "o", &dc));
    rio_desc_cleanup(&dc);

    uint8_t *a_src = eu_pattern_buf(na, 11), *b_src = eu_pattern_buf(nb, 12);
    uint8_t *c_dst = eu_fill_buf(nc, 0), *m_dst = eu_fill_buf(4096, 0x77);
    struct rio_op ops[4] = {
        {.type = RIO_OP_PUT, .key = "a", .buf = a_src, .len = na},
        {.type = RIO_OP_GET, .key = "missing", .buf = m_dst, .len = 4096},
        {.type = RIO_OP_PUT, .key = "b", .buf = b_src, .len = nb},
        {.type = RIO_OP_GET, .key = "o", .buf = c_dst, .len = nc},
    };
    int ok = rio_batch(e.c, ops, 4, &e.call);
    T_EQ(ok, 3);
    T_EQ(ops[0].result, 0);
    T_ERR(ops[1].result, RIO_ENOTFOUND);
    T_EQ(ops[2].result, 0);
    T_EQ(ops[3].result, (int64_t)nc);
    T_PATTERN(c_dst, nc, 13);
    T_EQ(ops[3].generation, dc.generation);
    T_GT(ops[0].generation, 0u);
    T_GT(ops[2].generation, 0u);
    /* The batch's stats cover what it moved. */
    T_EQ(e.st.bytes, na + nb + nc);
    T_EQ(eu_path_bytes(&e.st, NULL), na + nb + nc);
    eu_idle(e.c);

    eu_get_check(e.c, "a", na, 11, NULL);
    eu_get_check(e.c, "b", nb, 12, NULL);
    struct rio_desc da;
    T_OK(rio_stat(e.c, "a", &da));
    T_EQ(da.generation, ops[0].generation);
    rio_desc_cleanup(&da);

    /* An empty batch does nothing; a bad op type fails alone. */
    T_EQ(rio_batch(e.c, NULL, 0, NULL), 0);
    struct rio_op bad[2] = {
        {.type = 99, .key = "x", .buf = m_dst, .len = 16},
        {.type = RIO_OP_GET, .key = "o", .buf = c_dst, .len = nc},
    };
    T_EQ(rio_batch(e.c, bad, 2, NULL), 1);
    T_ERR(bad[0].result, RIO_EINVAL);
    T_EQ(bad[1].result, (int64_t)nc);
    free(a_src);
    free(b_src);
    free(c_dst);
    free(m_dst);
    eu_close(&e);
}

/* Clients opened with the same mock name share one store, like one server. */
TEST(two_clients_share_store)
{
    struct eu e1, e2;
    const size_t n = 1 * EU_MIB;

    eu_start(&e1, "mock://shared?paths=2");
    eu_open(&e2, "mock://shared?paths=3", &e1.o);
    uint8_t *src = eu_put_pattern(e1.c, "x", n, 31, NULL);
    eu_get_check(e2.c, "x", n, 31, NULL);
    T_OK(rio_delete(e2.c, "x"));
    eu_idle(e1.c);
    eu_idle(e2.c);
    free(src);
    /* Closing in creation order: the second client's baseline includes the
     * first one's blocks, so close the second one first. */
    eu_close(&e2);
    eu_close(&e1);
}

/* Several threads on one client at once, each on its own key: every result
 * byte-exact, counters zero afterwards. */
struct mt_arg {
    struct rio_client *c;
    int id;
    int rounds;
    int failures;
};

static void *mt_main(void *p)
{
    struct mt_arg *a = p;
    char key[32];
    size_t n = (size_t)(a->id + 1) * 512 * EU_KIB + (size_t)a->id * 1000;
    uint8_t *src = eu_pattern_buf(n, 100 + (uint64_t)a->id);
    uint8_t *dst = malloc(n);

    snprintf(key, sizeof(key), "mt-%d", a->id);
    for (int r = 0; r < a->rounds; r++) {
        memset(dst, 0, n);
        if (rio_put(a->c, key, src, n, NULL, NULL) != 0)
            a->failures++;
        else if (rio_get(a->c, key, dst, n, NULL) != (int64_t)n)
            a->failures++;
        else if (memcmp(src, dst, n) != 0)
            a->failures++;
    }
    free(src);
    free(dst);
    return NULL;
}

TEST(concurrent_callers)
{
    struct eu e;
    pthread_t th[4];
    struct mt_arg args[4];

    eu_start_o(&e, "mock://mt?paths=4&rate=500M&lat=50us", e.o.budget_bytes = 1 * EU_MIB);
    for (int i = 0; i < 4; i++) {
        args[i] = (struct mt_arg){.c = e.c, .id = i, .rounds = 4};
        T_EQ(pthread_create(&th[i], NULL, mt_main, &args[i]), 0);
    }
    for (int i = 0; i < 4; i++) {
        T_EQ(pthread_join(th[i], NULL), 0);
        T_EQ(args[i].failures, 0);
    }
    eu_close(&e);
}

/* A GET follows the object's own chunk geometry (its descriptor), not the
 * reading client's chunk size. */
TEST(get_uses_object_chunk_size)
{
    struct eu e1, e2;
    struct rio_options o1, o2;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    const size_t n = 1 * EU_MIB + 100;

    eu_opts(&o1);
    eu_opts(&o2);
    o2.chunk_size = 256 * EU_KIB;
    eu_open(&e1, "mock://geom?paths=2", &o1);
    eu_open(&e2, "mock://geom?paths=3", &o2);
    uint8_t *src = eu_put_pattern(e1.c, "x", n, 41, NULL);
    eu_get_check(e2.c, "x", n, 41, &call);
    T_EQ(st.chunks, (n + EU_CHUNK - 1) / EU_CHUNK);
    uint8_t *src2 = eu_put_pattern(e2.c, "y", n, 42, NULL);
    eu_get_check(e1.c, "y", n, 42, &call);
    T_EQ(st.chunks, (n + 256 * EU_KIB - 1) / (256 * EU_KIB));
    T_OK(rio_delete(e1.c, "x"));
    T_OK(rio_delete(e1.c, "y"));
    eu_idle(e1.c);
    free(src);
    free(src2);
    eu_close(&e2);
    eu_close(&e1);
}

static int64_t fill_one(void *arg, void *buf, size_t cap)
{
    int *left = arg;
    if (!*left || !cap)
        return 0;
    *left = 0;
    memset(buf, 'x', 1);
    return 1;
}

/* expect_generation UINT64_MAX on a PUT is refused (RIO_EINVAL, nothing
 * published): the transports take that value for "if absent", so a PUT
 * conditioned on that generation published over an absent key and was
 * refused over any object. rio_put and rio_put_stream alike. */
TEST(put_expect_generation_max_refused)
{
    struct eu e;
    struct rio_desc d;
    static const uint8_t b[16] = {1};

    eu_start(&e, "mock://genmax?paths=1");
    struct rio_call call = {.expect_generation = UINT64_MAX};
    T_EQ(rio_put(e.c, "absent", b, sizeof(b), &call, &d), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "no generation"));
    int left = 1;
    T_EQ(rio_put_stream(e.c, "absent", RIO_SIZE_UNKNOWN, 0, fill_one, &left, &call, &d),
         RIO_EINVAL);
    T_EQ(rio_stat(e.c, "absent", &d), RIO_ENOTFOUND);
    eu_close(&e);
}
