/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The client's worker pool (issue 15 item 5, core/pool.c): GET chunks are
 * verified on the pool's threads, off the client lock and the engine
 * thread; a progress callback runs in a thread of its own call, without the
 * client lock, and never after the call returned; rio_batch runs its
 * lookups, opens, commits and workers on the pool and creates no thread.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "engine_util.h"

/* Every pthread_create of this process (the library is linked in
 * statically, so its calls come here). Not under the sanitizers, whose
 * runtimes interpose it themselves: there only the thread count is checked. */
static _Atomic unsigned created;

#if !EU_SANITIZED
int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (!real)
        *(void **)&real = dlsym(RTLD_NEXT, "pthread_create");
    atomic_fetch_add(&created, 1);
    return real(th, attr, fn, arg);
}
#endif

static unsigned task_count(void)
{
    unsigned n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;

    if (!d)
        T_SKIP("no /proc/self/task");
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

#define OBJ (1 * EU_MIB)

TEST(batch_creates_no_threads)
{
    struct eu e;
    struct rio_options o;
    uint8_t *src = eu_pattern_buf(OBJ, 1);
    uint8_t *dst[4];
    char keys[4][8];
    struct rio_op ops[8];

    eu_opts(&o);
    eu_open(&e, "mock://pool1?paths=2", &o);
    for (int i = 0; i < 4; i++) {
        dst[i] = malloc(OBJ);
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
    }
    unsigned tasks0 = task_count(), created0 = atomic_load(&created);
    for (int round = 0; round < 50; round++) {
        for (int i = 0; i < 4; i++) {
            ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = src, .len = OBJ};
            ops[4 + i] =
                (struct rio_op){.type = RIO_OP_GET, .key = keys[i], .buf = dst[i], .len = OBJ};
        }
        /* PUTs first (the GETs of the next batch read them). */
        T_EQ(rio_batch(e.c, ops, 4, NULL), 4);
        T_EQ(rio_batch(e.c, ops + 4, 4, NULL), 4);
        for (int i = 0; i < 4; i++)
            T_MEMEQ(dst[i], src, OBJ);
    }
    T_EQ(atomic_load(&created) - created0, 0u);
    T_EQ(task_count(), tasks0);
    eu_close(&e);
    for (int i = 0; i < 4; i++)
        free(dst[i]);
    free(src);
}

/* The engine thread only schedules: the chunks' xxh3 is the pool's CPU.
 * Few big chunks, so the engine's per-chunk work is small beside the hash
 * even under ASan on a loaded machine (with 1 MiB chunks the engine's CPU
 * overtook the hash's there). */
TEST(verification_leaves_the_engine_thread)
{
    struct eu e;
    struct rio_options o;
    const size_t n = 128 * EU_MIB;
    uint8_t *src = eu_pattern_buf(n, 2), *dst = malloc(n);
    struct rio_stats st;
    struct rio_call call = {.stats = &st};

    eu_opts(&o);
    o.chunk_size = 16 * EU_MIB;
    eu_open(&e, "mock://pool2?paths=4", &o);
    T_OK(rio_put(e.c, "k", src, n, NULL, NULL));
    T_EQ(rio_get(e.c, "k", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, n);
    T_GT(st.verify_cpu_ns, 0u);
    /* Under TSan every lock and atomic of the engine thread costs many
     * times what the hash's plain loops do, and two such programs share
     * the CI's two cores: the comparison says nothing there (the CI's TSan
     * stage saw 5.1 ms of engine CPU against 4.7 of hashing). */
    if (!EU_TSAN)
        T_LT(st.engine_cpu_ns, st.verify_cpu_ns);
    eu_close(&e);
    free(src);
    free(dst);
}

/* A progress callback that blocks holds up neither the transfer nor another
 * call on the same client, and never runs once its call returned. */
struct blocker {
    struct rio_client *c;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    bool entered, other_done, returned;
    bool other_seen; /* the other call finished while the callback waited */
    bool late;       /* the callback ran after its call returned */
    unsigned calls;
};

static void blocking_progress(void *arg, uint64_t done, uint64_t total)
{
    struct blocker *b = arg;
    (void)done;
    (void)total;
    pthread_mutex_lock(&b->mu);
    b->calls++;
    if (b->returned)
        b->late = true;
    if (!b->entered) {
        b->entered = true;
        pthread_cond_broadcast(&b->cond);
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 5;
        while (!b->other_done)
            if (pthread_cond_timedwait(&b->cond, &b->mu, &ts) != 0)
                break;
        b->other_seen = b->other_done;
    }
    pthread_mutex_unlock(&b->mu);
}

static void *other_call(void *arg)
{
    struct blocker *b = arg;
    uint8_t *buf = eu_pattern_buf(OBJ, 3), *out = malloc(OBJ);

    /* (bounded: a test that fails must not hang) */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&b->mu);
    while (!b->entered)
        if (pthread_cond_timedwait(&b->cond, &b->mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&b->mu);
    int ok = rio_put(b->c, "other", buf, OBJ, NULL, NULL) == 0 &&
             rio_get(b->c, "other", out, OBJ, NULL) == (int64_t)OBJ && memcmp(buf, out, OBJ) == 0;
    pthread_mutex_lock(&b->mu);
    b->other_done = ok;
    pthread_cond_broadcast(&b->cond);
    pthread_mutex_unlock(&b->mu);
    free(buf);
    free(out);
    return NULL;
}

TEST(progress_callback_blocks_only_its_call)
{
    struct eu e;
    struct rio_options o;
    const size_t n = 4 * EU_MIB;
    uint8_t *src = eu_pattern_buf(n, 4), *dst = malloc(n);
    struct blocker b = {0};
    pthread_t th;

    eu_opts(&o);
    eu_open(&e, "mock://pool3?paths=2&lat=1ms", &o);
    T_OK(rio_put(e.c, "k", src, n, NULL, NULL));
    b.c = e.c;
    pthread_mutex_init(&b.mu, NULL);
    pthread_cond_init(&b.cond, NULL);
    T_EQ(pthread_create(&th, NULL, other_call, &b), 0);
    struct rio_call call = {.progress = blocking_progress, .progress_arg = &b};
    T_EQ(rio_get(e.c, "k", dst, n, &call), (int64_t)n);
    pthread_mutex_lock(&b.mu);
    b.returned = true;
    pthread_mutex_unlock(&b.mu);
    T_MEMEQ(dst, src, n);
    pthread_join(th, NULL);
    T_TRUE(b.entered);
    T_TRUE(b.other_seen);
    eu_sleep_ms(150); /* a report due later would show up now */
    T_FALSE(b.late);
    pthread_cond_destroy(&b.cond);
    pthread_mutex_destroy(&b.mu);
    eu_close(&e);
    free(src);
    free(dst);
}

/* A batch's PUTs hash their stream MD5s on the pool, several at once: each
 * etag is still the MD5 of its own bytes. */
TEST(batch_etags_hashed_on_the_pool)
{
    struct eu e;
    struct rio_options o;
    uint8_t *src[4];
    char keys[4][8];
    struct rio_op ops[4];

    eu_opts(&o);
    o.etag = 1;
    eu_open(&e, "mock://pool4?paths=2", &o);
    for (int i = 0; i < 4; i++) {
        src[i] = eu_pattern_buf(OBJ + 4096 * (size_t)i, 10 + (uint64_t)i);
        snprintf(keys[i], sizeof(keys[i]), "e%d", i);
        ops[i] = (struct rio_op){
            .type = RIO_OP_PUT, .key = keys[i], .buf = src[i], .len = OBJ + 4096 * (size_t)i};
    }
    T_EQ(rio_batch(e.c, ops, 4, NULL), 4);
    for (int i = 0; i < 4; i++) {
        struct rio_md5 m;
        char want[33];
        struct rio_desc d;
        T_OK(rio__md5_init(&m));
        T_OK(rio__md5_update(&m, src[i], OBJ + 4096 * (size_t)i));
        T_OK(rio__md5_final(&m, want));
        rio__md5_cleanup(&m);
        T_OK(rio_stat(e.c, keys[i], &d));
        T_STREQ(d.etag, want);
        rio_desc_cleanup(&d);
        free(src[i]);
    }
    eu_close(&e);
}

/* A PUT's chunks are hashed by the caller and the cpu pool at once, out of
 * order, and the engine sends each as soon as it and those before it are
 * hashed: never one whose xxh3 is not set yet (the mock checks every chunk
 * it receives against the xxh3 it came with: a chunk sent early would be
 * refused and retried). Many small chunks on four paths, over and again. */
TEST(put_chunks_hashed_on_the_pool_never_sent_early)
{
    struct eu e;
    struct rio_options o;
    const size_t n = 256 * 4096 + 123;
    uint8_t *src = eu_pattern_buf(n, 77), *dst = malloc(n);

    T_NOTNULL(dst);
    eu_opts(&o);
    o.chunk_size = 4096;
    o.depth = 8;
    eu_open(&e, "mock://hashpool?paths=4", &o);
    for (int i = 0; i < 20; i++) {
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        struct rio_desc d;
        src[(size_t)i * 4099 % n] ^= (uint8_t)(i + 1);
        T_OK(rio_put(e.c, "k", src, n, &call, &d));
        T_EQ(st.retries_total, 0u);
        T_EQ(d.nchunks, 257u);
        for (uint64_t k = 0; k < d.nchunks; k++)
            T_EQ(d.xxh[k], rio__xxh3(src + k * 4096, k + 1 < d.nchunks ? 4096 : 123));
        rio_desc_cleanup(&d);
        T_EQ(rio_get(e.c, "k", dst, n, NULL), (int64_t)n);
        T_MEMEQ(dst, src, n);
    }
    eu_close(&e);
    free(src);
    free(dst);
}
