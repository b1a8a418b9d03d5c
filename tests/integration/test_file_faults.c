/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/* T_TIMEOUT 120 */
/*
 * file:// under faults and bad input: injected EIO, short completions and EOF
 * on one chunk, a failing queue while a sibling queue still holds commands, a
 * cancel while commands are held, a file replaced while it is being read, and
 * keys, URLs and files that must be refused cleanly. Every case ends with the
 * engine's counters and the transport's in-flight count at zero, within a
 * time bound. The faults come from the fault filter stacked over the file
 * transport (`faults=` in the URL, include/railio_mock.h): file.c itself has
 * no fault hooks.
 */
#include "file_util.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#include "transport/file/file.h"

#define CH (128 * EU_KIB)
#define NCH 16
#define SIZE ((size_t)NCH * CH)

static void opts(struct rio_options *o, unsigned queues, unsigned depth)
{
    eu_opts(o);
    o->chunk_size = CH;
    o->paths = queues;
    o->depth = depth;
    o->adapt = -1; /* every queue from the first op: the faults name queues */
}

/* Write the pattern object "obj" through a clean client. */
static void seed_object(uint64_t seed)
{
    struct rio_options o;
    struct eu e;

    opts(&o, 2, 4);
    eu_open(&e, fu_url("?sync=0"), &o);
    free(eu_put_pattern(e.c, "obj", SIZE, seed, NULL));
    eu_close(&e);
}

/* A fresh directory holding "obj" (the pattern of seed), and a client on it
 * with queues x depth and the URL query (faults, direct, ...). */
static void open_seeded(struct eu *e, uint64_t seed, unsigned queues, unsigned depth,
                        const char *query)
{
    struct rio_options o;

    fu_mkdir();
    seed_object(seed);
    opts(&o, queues, depth);
    eu_open(e, fu_url("%s", query), &o);
}

static uint64_t faults_fired(struct rio_client *c)
{
    struct rio_mock_counters m;

    rio_mock_counters(c, &m);
    return m.faults_fired;
}

static struct rio_file_counters fcounters(struct rio_client *c)
{
    struct rio_file_counters k;

    T_OK(rio_file_counters(c, &k));
    return k;
}

/* A GET of "obj" fails with err, in less than ms. */
static void get_fails_within(struct eu *e, int err, uint64_t ms)
{
    uint8_t *dst = malloc(SIZE);
    uint64_t t0 = t_now_ms();

    T_NOTNULL(dst);
    T_ERR(rio_get(e->c, "obj", dst, SIZE, NULL), err);
    T_LT(t_now_ms() - t0, ms);
    free(dst);
}

/* Idle engine and transport, then close (leak check included). */
static void close_idle(struct eu *e)
{
    T_EQ(fcounters(e->c).inflight, 0u);
    eu_close(e);
}

TEST(eio_on_read_chunk)
{
    struct eu e;

    open_seeded(&e, 1, 2, 4, "?faults=error:op=read:chunk=5:error=EIO");
    get_fails_within(&e, -EIO, 2000);
    T_GE(faults_fired(e.c), 1u);
    eu_idle(e.c);
    /* The client stays usable for objects the fault does not reach. */
    free(eu_put_pattern(e.c, "small", 1000, 2, NULL));
    eu_get_check(e.c, "small", 1000, 2, NULL);
    close_idle(&e);
}

TEST(eio_on_write_leaves_nothing)
{
    struct rio_options o;
    struct eu e;
    struct rio_desc d;

    fu_mkdir();
    opts(&o, 3, 4);
    eu_open(&e, fu_url("?faults=error:op=write:chunk=2:error=EIO"), &o);
    uint8_t *src = eu_pattern_buf(SIZE, 3);
    T_ERR(rio_put(e.c, "obj", src, SIZE, NULL, NULL), -EIO);
    eu_idle(e.c);
    T_ERR(rio_stat(e.c, "obj", &d), RIO_ENOTFOUND);
    T_EQ(fu_tmp_files(), 0);
    free(src);
    close_idle(&e);
}

/* A short completion is never success: the chunk is retried from its start
 * and the object arrives whole, direct or buffered. */
TEST(short_completion_is_retried)
{
    struct rio_options o;
    struct eu e;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};

    fu_mkdir();
    for (int direct = 0; direct <= 1; direct++) {
        opts(&o, 2, 4);
        eu_open(&e,
                fu_url("?direct=%d&faults=short:op=write:chunk=3:bytes=5000:count=1;"
                       "short:op=read:chunk=3:bytes=5000:count=1",
                       direct),
                &o);
        free(eu_put_pattern(e.c, "obj", SIZE - 777, 4, &call));
        T_EQ(st.retries[RIO_CLASS_SHORT], 1u);
        eu_get_check(e.c, "obj", SIZE - 777, 4, &call);
        T_EQ(st.retries[RIO_CLASS_SHORT], 1u);
        T_EQ(faults_fired(e.c), 2u); /* the PUT's chunk 3 and the GET's */
        struct rio_file_counters k = fcounters(e.c);
        if (direct)
            T_GT(k.steps_direct + k.steps_bounce, 0u);
        else
            T_EQ(k.steps_direct + k.steps_bounce, 0u);
        close_idle(&e);
    }
}

/* EOF before len: RIO_ESHORT, which the engine retries; a persistent one
 * exhausts the retries, a transient one heals. */
TEST(eof_is_short_never_success)
{
    struct rio_options o;
    struct eu e;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};

    fu_mkdir();
    seed_object(5);
    opts(&o, 2, 4);
    o.retry_attempts = 3;
    uint8_t *dst = malloc(SIZE);
    eu_open(&e, fu_url("?faults=short:op=read:chunk=7:bytes=0"), &o);
    T_ERR(rio_get(e.c, "obj", dst, SIZE, &call), RIO_ERETRIES);
    T_GE(st.retries[RIO_CLASS_SHORT], 3u);
    close_idle(&e);

    eu_open(&e, fu_url("?faults=short:op=read:chunk=7:bytes=0:count=1"), &o);
    T_EQ(rio_get(e.c, "obj", dst, SIZE, &call), (int64_t)SIZE);
    T_PATTERN(dst, SIZE, 5);
    T_EQ(st.retries[RIO_CLASS_SHORT], 1u);
    close_idle(&e);
    free(dst);
}

/*
 * Queue 1 fails every op with EIO while queue 0 holds its commands for 3 s:
 * the request fails with EIO, the held commands are cancelled, and the call
 * returns long before they would have finished, with every counter at zero.
 */
TEST(failing_queue_with_sibling_pending)
{
    struct eu e;

    open_seeded(&e, 6, 2, 4, "?faults=error:path=1:error=EIO;delay:path=0:delay=3000ms");
    get_fails_within(&e, -EIO, 1500);
    eu_idle(e.c);

    /* The same with writes. */
    uint8_t *src = eu_pattern_buf(SIZE, 6);
    uint64_t t0 = t_now_ms();
    T_ERR(rio_put(e.c, "obj2", src, SIZE, NULL, NULL), -EIO);
    T_LT(t_now_ms() - t0, 1500u);
    eu_idle(e.c);
    T_EQ(fu_tmp_files(), 0);
    free(src);
    close_idle(&e);
}

/* A queue failing with a path-class error (reset) degrades: its chunks move
 * to the healthy queue and the GET succeeds. */
TEST(failing_queue_degrades_on_path_error)
{
    struct eu e;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};

    open_seeded(&e, 7, 3, 4, "?faults=error:path=2:error=ECONNRESET");
    uint8_t *dst = eu_fill_buf(SIZE, 0);
    T_EQ(rio_get(e.c, "obj", dst, SIZE, &call), (int64_t)SIZE);
    T_PATTERN(dst, SIZE, 7);
    T_GT(st.path[2].errors, 0u);
    T_EQ(st.path[2].bytes, 0u);
    free(dst);
    close_idle(&e);
}

/* A cancel while every command is held: returns promptly, nothing left. */
TEST(cancel_while_held)
{
    struct eu e;
    struct t_fire k = {.after_ms = 100};
    pthread_t th;

    open_seeded(&e, 8, 2, 4, "?faults=delay:path=0:delay=5000ms&queues=1");
    T_OK(rio_cancel_new(&k.cx));
    struct rio_call call = {.cancel = k.cx};
    uint8_t *dst = malloc(SIZE);
    T_EQ(pthread_create(&th, NULL, t_fire_main, &k), 0);
    uint64_t t0 = t_now_ms();
    T_ERR(rio_get(e.c, "obj", dst, SIZE, &call), RIO_ECANCELED);
    T_LT(t_now_ms() - t0, 2000u);
    pthread_join(th, NULL);
    rio_cancel_destroy(k.cx);
    free(dst);
    close_idle(&e);
}

/* ------------------------------------------------- replaced while read */

struct replacer {
    _Atomic int stop;
    _Atomic unsigned versions;
    size_t n;
};

static void *replace_main(void *arg)
{
    struct replacer *r = arg;
    char tmp[1024], dst[1024];
    uint8_t *b = malloc(r->n);

    snprintf(tmp, sizeof(tmp), "%s/.replacer", fu_dir);
    snprintf(dst, sizeof(dst), "%s/obj", fu_dir);
    while (!atomic_load(&r->stop)) {
        unsigned v = atomic_load(&r->versions) + 1;
        t_fill_pattern(b, r->n, 1000 + v);
        fu_write(tmp, b, r->n);
        if (rename(tmp, dst) != 0)
            break;
        atomic_store(&r->versions, v);
        eu_sleep_ms(1);
    }
    free(b);
    return NULL;
}

/* Which version a buffer holds whole, or -1 if it is no single version. */
static int64_t whole_version(const uint8_t *buf, size_t n, unsigned maxv)
{
    for (unsigned v = 0; v <= maxv + 1; v++) {
        uint64_t seed = v == 0 ? 9 : 1000 + v;
        if (t_check_pattern(buf, 64, seed) < 0)
            return t_check_pattern(buf, n, seed) < 0 ? (int64_t)v : -1;
    }
    return -1;
}

/*
 * Another process replaces the object (write a new file, rename it over)
 * every millisecond while GETs run: each GET returns one version whole, or
 * RIO_EGENERATION; never a mix.
 */
TEST(replaced_while_read)
{
    struct eu e;
    struct replacer rp = {.n = SIZE};
    unsigned whole = 0, refused = 0, other = 0;
    pthread_t th;

    open_seeded(&e, 9, 4, 2, "?direct=auto");
    uint8_t *dst = malloc(SIZE);
    T_EQ(pthread_create(&th, NULL, replace_main, &rp), 0);
    uint64_t end = t_now_ms() + 1500;
    while (t_now_ms() < end) {
        int64_t got = rio_get(e.c, "obj", dst, SIZE, NULL);
        if (got == (int64_t)SIZE) {
            if (whole_version(dst, SIZE, atomic_load(&rp.versions)) < 0)
                T_FAIL("a GET returned a mix of versions");
            whole++;
        } else if (got == RIO_EGENERATION) {
            refused++;
        } else {
            other++; /* the file vanished between two opens of a rename: none here */
            fprintf(stderr, "  GET: %lld %s\n", (long long)got, rio_errname((int)got));
        }
        eu_idle(e.c);
    }
    atomic_store(&rp.stop, 1);
    pthread_join(th, NULL);
    fprintf(stderr, "  %u versions written; GETs: %u whole, %u RIO_EGENERATION, %u other\n",
            atomic_load(&rp.versions), whole, refused, other);
    T_GT(whole + refused, 0u);
    T_EQ(other, 0u);
    free(dst);
    close_idle(&e);
}

/* ------------------------------------------------------------ bad input */

TEST(bad_keys)
{
    static const char *const bad[] = {"..",   "../x", "a/../b", "a/..", "/abs",
                                      "a//b", "./a",  "a/./b",  "a/",   "."};
    struct rio_options o;
    struct eu e;
    struct rio_desc d;
    uint8_t buf[16] = {0};

    fu_mkdir();
    opts(&o, 1, 2);
    eu_open(&e, fu_url(""), &o);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T_ERR(rio_stat(e.c, bad[i], &d), RIO_EINVAL);
        T_ERR(rio_put(e.c, bad[i], buf, sizeof(buf), NULL, NULL), RIO_EINVAL);
        T_ERR(rio_get(e.c, bad[i], buf, sizeof(buf), NULL), RIO_EINVAL);
        T_ERR(rio_delete(e.c, bad[i]), RIO_EINVAL);
    }
    /* Nothing was created outside (or inside) the directory. */
    T_EQ(fu_tmp_files(), 0);
    eu_close(&e);
}

TEST(bad_files)
{
    struct rio_options o;
    struct eu e;
    struct rio_desc d;
    uint8_t buf[64];

    fu_mkdir();
    T_EQ(mkdir(fu_path("adir"), 0755), 0);
    T_EQ(mkfifo(fu_path("fifo"), 0644), 0);
    fu_write(fu_path("file"), "0123456789", 10);
    opts(&o, 1, 2);
    eu_open(&e, fu_url(""), &o);
    T_ERR(rio_stat(e.c, "missing", &d), RIO_ENOTFOUND);
    T_ERR(rio_get(e.c, "missing", buf, sizeof(buf), NULL), RIO_ENOTFOUND);
    T_ERR(rio_delete(e.c, "missing"), RIO_ENOTFOUND);
    T_ERR(rio_stat(e.c, "file/below", &d), RIO_ENOTFOUND); /* ENOTDIR */
    T_ERR(rio_stat(e.c, "adir", &d), -EISDIR);
    T_ERR(rio_get(e.c, "adir", buf, sizeof(buf), NULL), -EISDIR);
    T_ERR(rio_delete(e.c, "adir"), -EISDIR);
    T_ERR(rio_put(e.c, "adir", buf, 10, NULL, NULL), -EISDIR);
    T_ERR(rio_stat(e.c, "fifo", &d), RIO_EINVAL); /* and no hang */
    T_ERR(rio_get(e.c, "file", buf, 5, NULL), RIO_ETOOBIG);
    T_ERR(rio_put(e.c, "file/below", buf, 10, NULL, NULL), -ENOTDIR);
    T_EQ(rio_get(e.c, "file", buf, sizeof(buf), NULL), 10);
    T_MEMEQ(buf, "0123456789", 10);
    T_EQ(fu_tmp_files(), 0);
    eu_close(&e);
}

TEST(bad_urls)
{
    struct rio_client *c = NULL;

    fu_mkdir();
    fu_write(fu_path("plain"), "x", 1);
    T_EQ(mkdir(fu_path("adir"), 0755), 0);
    T_ERR(rio_client_new("file://otherhost/tmp", NULL, &c), RIO_EURL);
    T_ERR(rio_client_new("file://", NULL, &c), RIO_EURL);
    T_ERR(rio_client_new("file:///", NULL, &c), RIO_EURL);
    T_ERR(rio_client_new(fu_url("/does-not-exist"), NULL, &c), -ENOENT);
    T_ERR(rio_client_new(fu_url("/plain"), NULL, &c), -ENOTDIR);
    T_ERR(rio_client_new(fu_url("/adir?single=1"), NULL, &c), RIO_EINVAL);
    T_ERR(rio_client_new(fu_url("?direct=maybe"), NULL, &c), RIO_EINVAL);
    T_ERR(rio_client_new(fu_url("?bounce=1000"), NULL, &c), RIO_EINVAL);
    T_ERR(rio_client_new(fu_url("?stage=sometimes"), NULL, &c), RIO_EINVAL);
    T_ERR(rio_client_new(fu_url("?queues=17"), NULL, &c), RIO_EINVAL);
    T_ERR(rio_client_new(fu_url("?queues=0"), NULL, &c), RIO_EINVAL);
    T_ERR(rio_client_new(fu_url("?sync=2"), NULL, &c), RIO_EINVAL);
    T_ERR(rio_client_new(fu_url("?faults=error:error=NOPE"), NULL, &c), RIO_EINVAL);
    T_ERR(rio_client_new(fu_url("?faults=genchange"), NULL, &c), RIO_EINVAL); /* mock:// only */
    T_NULL(c);
    /* localhost is this machine; a single file may not exist yet. */
    char url[600];
    snprintf(url, sizeof(url), "file://localhost%s/new.bin?single=1", fu_dir);
    T_OK(rio_client_new(url, NULL, &c));
    rio_client_destroy(c);
}

/* io_uring refused, as a container's seccomp profile (Docker's default)
 * or kernel.io_uring_disabled do with EPERM: the open fails with that
 * errno, and its detail says it was io_uring, not the directory, that was
 * not permitted ("operation not permitted" alone sent users to chmod). */
TEST(io_uring_refused_is_named)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | EPERM),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
    struct rio_client *c = NULL;

    fu_mkdir();
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        T_SKIP("seccomp filter: %s", strerror(errno));
    T_ERR(rio_client_new(fu_url(""), NULL, &c), -EPERM);
    T_NULL(c);
    T_NOTNULL(strstr(rio_error_detail(), "io_uring"));
}

/* ------------------------------------------- the transport contract, bare */

#include "transport/transport.h"

struct bare_io {
    struct rio_io io;
    int completions;
};

static void bare_complete(struct rio_io *io)
{
    ((struct bare_io *)io)->completions++;
}

/*
 * Without the engine: a queue takes `depth` ops and answers -EAGAIN after;
 * each submitted op completes exactly once through reap, cancelled or not;
 * wake ends a blocked reap; a close after that leaves nothing behind.
 */
TEST(transport_contract_bare)
{
    enum { DEPTH = 4, NQ = 2 };
    const struct rio_transport_ops *ops = rio__transport_find("file");
    struct rio_transport *t = NULL;
    struct rio_options o;
    struct rio_url u;
    struct rio_desc d;
    struct bare_io io[NQ * DEPTH + 1];
    int64_t alloc0;

    fu_mkdir();
    seed_object(10);
    T_NOTNULL(ops);
    alloc0 = rio__alloc_outstanding();
    rio_options_init(&o);
    o.paths = NQ;
    o.depth = DEPTH;
    /* Queue 1's ops are held 2 s after their I/O by the fault filter. */
    T_OK(rio__url_parse(fu_url("?faults=delay:path=1:delay=2000ms"), &u));
    T_OK(rio__transport_open(ops, &u, &o, &t));
    ops = t->ops;
    T_EQ(t->npaths, (unsigned)NQ);
    memset(&d, 0, sizeof(d));
    T_OK(ops->lookup(t, "obj", &d));
    T_EQ(d.size, SIZE);
    uint8_t *dst = malloc(SIZE);
    memset(io, 0, sizeof(io));
    for (unsigned i = 0; i < NQ * DEPTH + 1; i++) {
        struct rio_io *x = &io[i].io;
        unsigned chunk = i % NCH;
        x->kind = RIO_IO_READ;
        x->path = i % NQ;
        x->key = "obj";
        x->generation = d.generation;
        x->index = chunk;
        x->off = (uint64_t)chunk * CH;
        x->len = CH;
        x->dst = dst + x->off;
        x->complete = bare_complete;
        int ret = ops->submit(t, x);
        if (i < NQ * DEPTH)
            T_OK(ret);
        else
            T_ERR(ret, -EAGAIN); /* queue 0 is full */
    }
    /* Queue 0's ops complete; queue 1's are held 2 s, then cancelled. */
    unsigned done = 0;
    uint64_t t0 = t_now_ms();
    while (done < DEPTH && t_now_ms() - t0 < 1000) {
        int n = ops->reap(t, 100);
        T_GE(n, 0);
        done += (unsigned)n;
    }
    T_EQ(done, (unsigned)DEPTH);
    for (unsigned i = 1; i < NQ * DEPTH; i += 2)
        ops->cancel(t, &io[i].io);
    while (done < NQ * DEPTH && t_now_ms() - t0 < 1500) {
        int n = ops->reap(t, 100);
        T_GE(n, 0);
        done += (unsigned)n;
    }
    T_LT(t_now_ms() - t0, 1500u);
    T_EQ(done, (unsigned)(NQ * DEPTH));
    for (unsigned i = 0; i < NQ * DEPTH; i++) {
        T_EQ(io[i].completions, 1);
        if (i % 2 == 0)
            T_EQ(io[i].io.res, (int64_t)CH);
        else if (io[i].io.res != -ECANCELED)
            /* Cancelled while its read was still in the kernel (which cannot
             * take back a read the device has): it ends with what it reached. */
            T_EQ(io[i].io.res, (int64_t)CH);
    }
    T_EQ(io[NQ * DEPTH].completions, 0);
    /* A cancel after completion changes nothing. */
    ops->cancel(t, &io[0].io);
    T_EQ(ops->reap(t, 0), 0);
    /* wake ends a blocked reap. */
    ops->wake(t);
    t0 = t_now_ms();
    T_EQ(ops->reap(t, 5000), 0);
    T_LT(t_now_ms() - t0, 1000u);
    ops->close(t);
    rio_desc_cleanup(&d);
    rio__url_cleanup(&u);
    T_EQ(rio__alloc_outstanding(), alloc0);
    free(dst);
}
