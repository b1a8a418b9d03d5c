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
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

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

/* One test's client, a cancel token and a call carrying it, OBJ bytes of
 * pattern seed in src and OBJ bytes of room in dst. */
struct life {
    struct eu e;
    struct rio_cancel *cx;
    struct rio_call call;
    uint8_t *src, *dst;
};

static void life_open(struct life *l, const char *url, unsigned seed)
{
    l->src = eu_pattern_buf(OBJ, seed);
    l->dst = malloc(OBJ);
    eu_start(&l->e, url);
    T_OK(rio_cancel_new(&l->cx));
    l->call = (struct rio_call){.cancel = l->cx};
}

/* The client idle and closed (no leak), the buffers freed. */
static void life_close(struct life *l)
{
    eu_idle(l->e.c);
    eu_close(&l->e);
    free(l->src);
    free(l->dst);
}

TEST(token_outlived_by_reader)
{
    struct life l;

    life_open(&l, "mock://life1?paths=2&lat=1ms", 5);
    T_OK(rio_put(l.e.c, "k", l.src, OBJ, NULL, NULL));
    struct rio_reader *rd;
    T_OK(rio_reader_open(l.e.c, "k", 2, &l.call, &rd));
    rio_cancel_destroy(l.cx); /* the reader keeps its own reference */
    scribble();
    uint64_t got = 0;
    int64_t n;
    while ((n = rio_reader_read(rd, l.dst + got, 100000)) > 0)
        got += (uint64_t)n;
    T_EQ(n, 0);
    T_EQ(got, (uint64_t)OBJ);
    T_MEMEQ(l.dst, l.src, OBJ);
    T_OK(rio_reader_close(rd));
    life_close(&l);
}

TEST(token_outlived_by_writer)
{
    struct life l;

    life_open(&l, "mock://life2?paths=2&lat=1ms", 6);
    struct rio_writer *w;
    T_OK(rio_writer_open(l.e.c, "k", OBJ, 2, &l.call, &w));
    rio_cancel_destroy(l.cx);
    scribble();
    for (size_t off = 0; off < OBJ; off += 300000)
        T_OK(rio_writer_write(w, l.src + off, OBJ - off < 300000 ? OBJ - off : 300000));
    T_OK(rio_writer_close(w, NULL));
    T_EQ(rio_get(l.e.c, "k", l.dst, OBJ, NULL), (int64_t)OBJ);
    T_MEMEQ(l.dst, l.src, OBJ);
    life_close(&l);
}

/* A token fired while a reader holds it still cancels the reader, and a
 * plain call's reference is dropped when it returns. */
TEST(token_still_cancels)
{
    struct life l;

    life_open(&l, "mock://life3?paths=2&lat=1ms", 7);
    T_OK(rio_put(l.e.c, "k", l.src, OBJ, &l.call, NULL));
    struct rio_reader *rd;
    T_OK(rio_reader_open(l.e.c, "k", 2, &l.call, &rd));
    T_GT(rio_reader_read(rd, l.dst, 1000), 0);
    rio_cancel_fire(l.cx);
    rio_cancel_destroy(l.cx);
    int64_t n;
    while ((n = rio_reader_read(rd, l.dst, EU_MIB)) > 0)
        ;
    T_ERR(n, RIO_ECANCELED);
    T_ERR(rio_reader_close(rd), RIO_ECANCELED);
    life_close(&l);
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

/*
 * A client used in a child after fork() (include/railio.h: it must not be):
 * its engine and worker threads stayed in the parent, so a PUT waited
 * forever for a completion nobody delivers, and a stat went down the
 * transport the parent still uses. Each call now refuses at once with
 * RIO_EINVAL and says why, and rio_client_destroy returns without touching
 * the copy; the parent's client goes on working.
 */
static int child_calls(struct rio_client *c, const uint8_t *src, uint8_t *dst)
{
    struct rio_desc d;
    struct rio_reader *rd;
    struct rio_writer *w;
    struct rio_list_page pg;
    struct rio_list_args la = {0};
    struct rio_op op = {.type = RIO_OP_GET, .key = "k", .buf = dst, .len = OBJ};
    void *p;
    const char *keys[] = {"k"};
    int64_t r[] = {
        rio_put(c, "k", src, OBJ, NULL, NULL),
        rio_get(c, "k", dst, OBJ, NULL),
        rio_get_alloc(c, "k", &p, NULL),
        rio_stat(c, "k", &d),
        rio_delete(c, "k"),
        rio_delete_if(c, "k", 1),
        rio_batch(c, &op, 1, NULL),
        rio_list(c, &la, &pg, NULL),
        rio_exists_batch(c, keys, 1, NULL, NULL, NULL),
        rio_reader_open(c, "k", 0, NULL, &rd),
        rio_writer_open(c, "w", OBJ, 0, NULL, &w),
    };
    for (unsigned i = 0; i < sizeof(r) / sizeof(r[0]); i++)
        if (r[i] != RIO_EINVAL || !strstr(rio_error_detail(), "fork()"))
            return 10 + (int)i;
    rio_client_destroy(c);
    return 0;
}

/* The same for a reader and a writer the parent opened: a read waited for
 * a fetch the parent's engine runs. Closing them in the child leaves them
 * alone too. */
static int child_streams(struct rio_reader *rd, struct rio_writer *w, uint8_t *buf)
{
    int64_t r[] = {
        rio_reader_read(rd, buf, OBJ),
        rio_writer_write(w, buf, OBJ),
        rio_writer_close(w, NULL),
        rio_reader_close(rd),
    };
    for (unsigned i = 0; i < sizeof(r) / sizeof(r[0]); i++)
        if (r[i] != RIO_EINVAL || !strstr(rio_error_detail(), "fork()"))
            return 30 + (int)i;
    rio_writer_abort(w);
    return 0;
}

TEST_TIMEOUT(used_in_a_fork_child, 60)
{
    struct life l;
    int st;

    life_open(&l, "mock://life6?paths=2", 9);
    T_OK(rio_put(l.e.c, "k", l.src, OBJ, NULL, NULL));
    fflush(NULL);
    pid_t pid = fork();
    T_GE(pid, 0);
    if (pid == 0) {
        alarm(20); /* a call that hangs ends the child by SIGALRM */
        _exit(child_calls(l.e.c, l.src, l.dst));
    }
    T_EQ(waitpid(pid, &st, 0), pid);
    T_EQ(WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st), 0);
    T_EQ(rio_get(l.e.c, "k", l.dst, OBJ, NULL), (int64_t)OBJ);
    T_EQ(memcmp(l.src, l.dst, OBJ), 0);

    struct rio_reader *rd;
    struct rio_writer *w;
    T_OK(rio_reader_open(l.e.c, "k", 2, NULL, &rd));
    T_OK(rio_writer_open(l.e.c, "w", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    fflush(NULL);
    pid = fork();
    T_GE(pid, 0);
    if (pid == 0) {
        alarm(20);
        _exit(child_streams(rd, w, l.dst));
    }
    T_EQ(waitpid(pid, &st, 0), pid);
    T_EQ(WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st), 0);
    T_GT(rio_reader_read(rd, l.dst, OBJ), 0);
    T_OK(rio_writer_write(w, l.src, 1000));
    T_OK(rio_writer_close(w, NULL));
    T_ERR(rio_reader_close(rd), RIO_ECANCELED); /* closed before its end */
    rio_cancel_destroy(l.cx);
    life_close(&l);
}
