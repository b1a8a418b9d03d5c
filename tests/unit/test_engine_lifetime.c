/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Lifetimes (issue 13 item 18, include/railio.h): a cancel token may be
 * destroyed while a reader or writer that took it is still open (each holds
 * a reference), and rio_client_destroy with readers and writers open returns
 * at once, ends them (RIO_ECLOSED afterwards), publishes nothing and leaks
 * nothing. Run under ASan too: a use after free of the token or the client
 * is then reported, not only its symptoms.
 */
#include "engine_util.h"

#define OBJ (8 * EU_MIB)

/* Reuse a freed token's memory with bytes that read as "fired". */
static void scribble(void)
{
    for (int i = 0; i < 64; i++) {
        void *p = malloc(16);
        memset(p, 0xFF, 16);
        free(p);
    }
}

TEST(token_outlived_by_reader)
{
    struct eu e;
    struct rio_cancel *cx;
    uint8_t *src = eu_pattern_buf(OBJ, 5), *dst = malloc(OBJ);

    eu_start(&e, "mock://life1?paths=2&lat=1ms");
    T_OK(rio_put(e.c, "k", src, OBJ, NULL, NULL));
    T_OK(rio_cancel_new(&cx));
    struct rio_call call = {.cancel = cx};
    struct rio_reader *rd;
    T_OK(rio_reader_open(e.c, "k", 2, &call, &rd));
    rio_cancel_destroy(cx); /* the reader keeps its own reference */
    scribble();
    uint64_t got = 0;
    int64_t n;
    while ((n = rio_reader_read(rd, dst + got, 100000)) > 0)
        got += (uint64_t)n;
    T_EQ(n, 0);
    T_EQ(got, (uint64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    T_OK(rio_reader_close(rd));
    eu_idle(e.c);
    eu_close(&e);
    free(src);
    free(dst);
}

TEST(token_outlived_by_writer)
{
    struct eu e;
    struct rio_cancel *cx;
    uint8_t *src = eu_pattern_buf(OBJ, 6), *dst = malloc(OBJ);

    eu_start(&e, "mock://life2?paths=2&lat=1ms");
    T_OK(rio_cancel_new(&cx));
    struct rio_call call = {.cancel = cx};
    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "k", OBJ, 2, &call, &w));
    rio_cancel_destroy(cx);
    scribble();
    for (size_t off = 0; off < OBJ; off += 300000)
        T_OK(rio_writer_write(w, src + off, OBJ - off < 300000 ? OBJ - off : 300000));
    T_OK(rio_writer_close(w, NULL));
    T_EQ(rio_get(e.c, "k", dst, OBJ, NULL), (int64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    eu_idle(e.c);
    eu_close(&e);
    free(src);
    free(dst);
}

/* A token fired while a reader holds it still cancels the reader, and a
 * plain call's reference is dropped when it returns. */
TEST(token_still_cancels)
{
    struct eu e;
    struct rio_cancel *cx;
    uint8_t *src = eu_pattern_buf(OBJ, 7), *dst = malloc(OBJ);

    eu_start(&e, "mock://life3?paths=2&lat=1ms");
    T_OK(rio_cancel_new(&cx));
    struct rio_call call = {.cancel = cx};
    T_OK(rio_put(e.c, "k", src, OBJ, &call, NULL));
    struct rio_reader *rd;
    T_OK(rio_reader_open(e.c, "k", 2, &call, &rd));
    T_GT(rio_reader_read(rd, dst, 1000), 0);
    rio_cancel_fire(cx);
    rio_cancel_destroy(cx);
    int64_t n;
    while ((n = rio_reader_read(rd, dst, EU_MIB)) > 0)
        ;
    T_ERR(n, RIO_ECANCELED);
    T_ERR(rio_reader_close(rd), RIO_ECANCELED);
    eu_idle(e.c);
    eu_close(&e);
    free(src);
    free(dst);
}

/* rio_client_destroy with a reader and a writer open: returns, ends both,
 * the writer's object is never published, nothing is leaked. */
TEST_TIMEOUT(destroy_with_open_streams, 30)
{
    struct rio_options o;
    struct rio_client *c, *other;
    struct rio_cancel *cx;
    uint8_t *src = eu_pattern_buf(OBJ, 8), *dst = malloc(OBJ);
    const int64_t base = rio__alloc_outstanding();

    eu_opts(&o);
    T_OK(rio_client_new("mock://life4?paths=2&lat=1ms", &o, &other));
    T_OK(rio_client_new("mock://life4?paths=2&lat=1ms", &o, &c));
    T_OK(rio_put(c, "r", src, OBJ, NULL, NULL));
    T_OK(rio_cancel_new(&cx));
    struct rio_call call = {.cancel = cx};
    struct rio_reader *rd, *rd2;
    struct rio_writer *w;
    T_OK(rio_reader_open(c, "r", 2, &call, &rd));
    T_OK(rio_reader_open(c, "r", 0, NULL, &rd2));
    T_GT(rio_reader_read(rd, dst, 1000), 0);
    T_OK(rio_writer_open(c, "w", OBJ, 2, &call, &w));
    T_OK(rio_writer_write(w, src, OBJ / 2));

    uint64_t t0 = eu_now_ns();
    rio_client_destroy(c);
    T_LT((eu_now_ns() - t0) / 1000000, 2000u);

    T_ERR(rio_reader_read(rd, dst, 1000), RIO_ECLOSED);
    T_NULL(rio_reader_desc(rd));
    T_ERR(rio_reader_close(rd), RIO_ECLOSED);
    T_ERR(rio_reader_close(rd2), RIO_ECLOSED);
    T_ERR(rio_writer_write(w, src, 1000), RIO_ECLOSED);
    T_ERR(rio_writer_close(w, NULL), RIO_ECLOSED);
    rio_cancel_fire(cx);
    rio_cancel_destroy(cx);

    struct rio_desc d;
    T_ERR(rio_stat(other, "w", &d), RIO_ENOTFOUND);
    rio_client_destroy(other);
    T_EQ(rio__alloc_outstanding(), base);

    /* And an abort after the destroy frees the writer too. */
    T_OK(rio_client_new("mock://life5", &o, &c));
    T_OK(rio_writer_open(c, "w", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    rio_client_destroy(c);
    rio_writer_abort(w);
    T_EQ(rio__alloc_outstanding(), base);
    free(src);
    free(dst);
}
