/* T_LABELS file */
/* T_TIMEOUT 120 */
/*
 * file:// round trips: every size around the chunk and page boundaries,
 * O_DIRECT and buffered, 1..8 queues, unaligned caller memory (bounce buffers
 * and the buffered fallback), subdirectory keys, a single file, the checksum
 * xattr, and a fresh caller buffer per read at a reused address.
 */
#include "file_util.h"
#include "transport/file.h"

#define CH (128 * EU_KIB)

static void opts(struct rio_options *o, unsigned queues, unsigned depth)
{
    eu_opts(o);
    o->chunk_size = CH;
    o->paths = queues;
    o->depth = depth;
}

/* PUT then GET of n bytes; checks the bytes, the file on disk, the descriptor. */
static void round_trip(struct rio_client *c, const char *key, size_t n, uint64_t seed)
{
    uint8_t *src = eu_put_pattern(c, key, n, seed, NULL);
    struct rio_desc d;
    size_t fn;
    uint8_t *disk;

    eu_get_check(c, key, n, seed, NULL);
    disk = fu_slurp(fu_path(key), &fn);
    T_EQ(fn, n);
    T_MEMEQ(disk, src, n);
    free(disk);

    T_OK(rio_stat(c, key, &d));
    T_EQ(d.size, n);
    T_NE(d.generation, 0u);
    /* railio wrote it: the xattr record gives its geometry and checksums. */
    T_EQ(d.chunk_size, CH);
    T_EQ(d.nchunks, n ? (n - 1) / CH + 1 : 0);
    if (n) {
        T_NOTNULL(d.xxh);
        T_EQ(d.xxh[0], rio__xxh3(src, n < CH ? n : CH));
    }
    T_EQ(strlen(d.etag), 32u);
    rio_desc_cleanup(&d);
    free(src);
}

static const size_t sizes[] = {0,  1,      4095,   4096,       4097,       CH - 1,
                               CH, CH + 1, 2 * CH, 3 * CH + 5, 1000 * 1000};

static void sizes_with(const char *direct, unsigned queues)
{
    struct eu e;
    struct rio_options o;
    char key[64];

    fu_mkdir();
    opts(&o, queues, 4);
    eu_open(&e, fu_url("?direct=%s", direct), &o);
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        snprintf(key, sizeof(key), "obj-%zu", sizes[i]);
        round_trip(e.c, key, sizes[i], 100 + i);
        eu_idle(e.c);
    }
    T_EQ(fu_tmp_files(), 0);
    struct rio_file_counters k;
    T_OK(rio_file_counters(e.c, &k));
    fprintf(stderr, "  direct %llu, bounce %llu (fixed %llu), buffered %llu\n",
            (unsigned long long)k.steps_direct, (unsigned long long)k.steps_bounce,
            (unsigned long long)k.steps_fixed, (unsigned long long)k.steps_buffered);
    if (strcmp(direct, "0") == 0) {
        T_EQ(k.steps_direct + k.steps_bounce, 0u);
    } else {
        /* eu_pattern_buf's malloc is not 512-aligned: the big ones bounce. */
        T_GT(k.steps_direct + k.steps_bounce, 0u);
        T_EQ(k.direct_einval, 0u);
    }
    T_GT(k.steps_buffered, 0u); /* the unaligned tails */
    eu_close(&e);
}

TEST(sizes_direct_1q)
{
    sizes_with("1", 1);
}

TEST(sizes_buffered_1q)
{
    sizes_with("0", 1);
}

TEST(sizes_auto_3q)
{
    sizes_with("auto", 3);
}

TEST(sizes_direct_8q)
{
    sizes_with("1", 8);
}

/* 64 MiB over 1, 2, 4 and 8 queues, direct and buffered, 1 MiB chunks. */
TEST(big_64m_queues)
{
    const size_t n = 64 * EU_MIB;
    static const unsigned qs[] = {1, 2, 4, 8};
    struct rio_options o;
    struct eu e;

    fu_mkdir();
    uint8_t *src = NULL, *dst = NULL;
    T_EQ(posix_memalign((void **)&src, 4096, n), 0);
    T_EQ(posix_memalign((void **)&dst, 4096, n), 0);
    t_fill_pattern(src, n, 7);
    for (int direct = 0; direct <= 1; direct++) {
        for (size_t i = 0; i < sizeof(qs) / sizeof(qs[0]); i++) {
            struct rio_stats st;
            struct rio_call call = {.stats = &st};
            opts(&o, qs[i], 4);
            o.chunk_size = EU_MIB;
            eu_open(&e, fu_url("?direct=%d&sync=0", direct), &o);
            T_OK(rio_put(e.c, "big", src, n, NULL, NULL));
            memset(dst, 0, n);
            T_EQ(rio_get(e.c, "big", dst, n, &call), (int64_t)n);
            T_MEMEQ(dst, src, n);
            unsigned used;
            T_EQ(eu_path_bytes(&st, &used), n);
            T_EQ(used, qs[i]);
            struct rio_file_counters k;
            T_OK(rio_file_counters(e.c, &k));
            if (direct)
                T_GT(k.steps_direct, 0u); /* src and dst are page-aligned */
            else
                T_EQ(k.steps_direct + k.steps_bounce, 0u);
            eu_close(&e);
        }
    }
    free(src);
    free(dst);
}

/*
 * Caller memory that O_DIRECT cannot use (1 byte past an aligned address):
 * through the transport's bounce buffers, and with bounce=0 through buffered
 * steps. Reads and writes both.
 */
TEST(unaligned_memory)
{
    const size_t n = 3 * CH + 4097;
    static const char *const modes[] = {"?direct=1", "?direct=1&bounce=0", "?direct=1&bounce=64K"};
    struct rio_options o;
    struct eu e;

    fu_mkdir();
    uint8_t *sbuf = malloc(n + 64), *dbuf = malloc(n + 64);
    T_NOTNULL(sbuf);
    T_NOTNULL(dbuf);
    uint8_t *src = (uint8_t *)(((uintptr_t)sbuf + 63) & ~(uintptr_t)63) + 1;
    uint8_t *dst = (uint8_t *)(((uintptr_t)dbuf + 63) & ~(uintptr_t)63) + 3;
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        opts(&o, 2, 4);
        eu_open(&e, fu_url("%s", modes[m]), &o);
        t_fill_pattern(src, n, 40 + m);
        T_OK(rio_put(e.c, "u", src, n, NULL, NULL));
        memset(dst, 0, n);
        T_EQ(rio_get(e.c, "u", dst, n, NULL), (int64_t)n);
        T_PATTERN(dst, n, 40 + m);
        struct rio_file_counters k;
        T_OK(rio_file_counters(e.c, &k));
        T_EQ(k.steps_direct, 0u); /* the memory is never aligned */
        if (m == 1)
            T_EQ(k.steps_bounce, 0u);
        else
            T_GT(k.steps_bounce, 0u);
        eu_close(&e);
    }
    free(sbuf);
    free(dbuf);
}

/*
 * Each read goes into a buffer freshly malloc'd after the last one was freed,
 * so the allocator usually hands back the same address, while the file holds
 * new bytes each time. A registration cached by address would pin the first
 * buffer's pages and land the reads where the caller no longer looks.
 */
TEST(fresh_buffer_same_address)
{
    const size_t n = 2 * EU_MIB + 12345;
    struct rio_options o;
    struct eu e;
    unsigned reused = 0;
    void *last = NULL;

    fu_mkdir();
    for (int aligned = 0; aligned <= 1; aligned++) {
        opts(&o, 2, 4);
        eu_open(&e, fu_url("?direct=1"), &o);
        for (unsigned it = 0; it < 12; it++) {
            uint8_t *src = eu_pattern_buf(n, 1000 + it);
            T_OK(rio_put(e.c, "reuse", src, n, NULL, NULL));
            free(src);
            uint8_t *dst = NULL;
            if (aligned)
                T_EQ(posix_memalign((void **)&dst, 4096, n), 0);
            else
                dst = malloc(n);
            T_NOTNULL(dst);
            memset(dst, 0xEE, n);
            reused += dst == last;
            last = dst;
            T_EQ(rio_get(e.c, "reuse", dst, n, NULL), (int64_t)n);
            T_PATTERN(dst, n, 1000 + it);
            free(dst);
        }
        eu_close(&e);
    }
    fprintf(stderr, "  address reused in %u of 24 iterations\n", reused);
}

/* Keys with subdirectories: created on PUT, read back, removed. */
TEST(subdirectory_keys)
{
    struct rio_options o;
    struct eu e;

    fu_mkdir();
    opts(&o, 1, 2);
    eu_open(&e, fu_url(""), &o);
    round_trip(e.c, "a/b/c/obj", 5000, 3);
    round_trip(e.c, "a/b/other", 1, 4);
    T_OK(rio_delete(e.c, "a/b/c/obj"));
    T_ERR(rio_delete(e.c, "a/b/c/obj"), RIO_ENOTFOUND);
    struct rio_desc d;
    T_ERR(rio_stat(e.c, "a/b/c/obj", &d), RIO_ENOTFOUND);
    eu_close(&e);
}

/* ?single=1: one file, whatever the key. */
TEST(single_file)
{
    struct rio_options o;
    struct eu e;
    const size_t n = 300000;

    fu_mkdir();
    opts(&o, 2, 4);
    eu_open(&e, fu_url("/one.bin?single=1"), &o);
    uint8_t *src = eu_put_pattern(e.c, "any-key", n, 9, NULL);
    eu_get_check(e.c, "another-key", n, 9, NULL);
    size_t fn;
    uint8_t *disk = fu_slurp(fu_path("one.bin"), &fn);
    T_EQ(fn, n);
    T_MEMEQ(disk, src, n);
    free(disk);
    free(src);
    T_OK(rio_delete(e.c, "x"));
    T_ERR(rio_delete(e.c, "x"), RIO_ENOTFOUND);
    eu_close(&e);
}

/* A file railio did not write (no xattr) reads without checksums; a file
 * railio wrote and someone modified afterwards loses its record (size or
 * mtime no longer match) and gets a new generation. */
TEST(foreign_and_modified_files)
{
    struct rio_options o;
    struct eu e;
    struct rio_desc d;
    const size_t n = 3 * CH + 17;

    fu_mkdir();
    uint8_t *src = eu_pattern_buf(n, 21);
    fu_write(fu_path("foreign"), src, n);
    opts(&o, 2, 4);
    eu_open(&e, fu_url(""), &o);
    T_OK(rio_stat(e.c, "foreign", &d));
    T_EQ(d.size, n);
    T_EQ(d.chunk_size, 0u);
    T_NULL(d.xxh);
    rio_desc_cleanup(&d);
    eu_get_check(e.c, "foreign", n, 21, NULL);

    free(eu_put_pattern(e.c, "mine", n, 22, NULL));
    T_OK(rio_stat(e.c, "mine", &d));
    uint64_t gen0 = d.generation;
    T_NOTNULL(d.xxh);
    rio_desc_cleanup(&d);
    eu_sleep_ms(5);
    int fd = open(fu_path("mine"), O_WRONLY);
    T_GE(fd, 0);
    T_EQ(pwrite(fd, "X", 1, 10), 1);
    close(fd);
    T_OK(rio_stat(e.c, "mine", &d));
    T_NE(d.generation, gen0);
    T_NULL(d.xxh);
    T_EQ(d.chunk_size, 0u);
    rio_desc_cleanup(&d);
    /* Reading it names the old generation: refused, never mixed. */
    struct rio_call call = {.expect_generation = gen0};
    uint8_t *dst = malloc(n);
    T_ERR(rio_get(e.c, "mine", dst, n, &call), RIO_EGENERATION);
    free(dst);
    free(src);
    eu_close(&e);
}

/* sync=0 and sync=1 both publish whole files and leave no temporary file. */
TEST(sync_modes)
{
    struct rio_options o;
    struct eu e;

    fu_mkdir();
    for (int s = 0; s <= 1; s++) {
        opts(&o, 2, 4);
        eu_open(&e, fu_url("?sync=%d", s), &o);
        round_trip(e.c, s ? "synced" : "unsynced", 2 * CH + 3, 30 + s);
        eu_close(&e);
    }
    T_EQ(fu_tmp_files(), 0);
}

/* Many small objects at once through rio_batch (more than the open-file
 * cache holds, so some READs reopen their file). */
TEST(batch_many_objects)
{
    enum { N = 300 };
    const size_t n = 10000;
    struct rio_op ops[N];
    struct rio_options o;
    struct eu e;
    char keys[N][32];

    fu_mkdir();
    opts(&o, 4, 8);
    eu_open(&e, fu_url("?sync=0"), &o);
    uint8_t *bufs = malloc((size_t)N * n);
    T_NOTNULL(bufs);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%03d", i);
        t_fill_pattern(bufs + (size_t)i * n, n, 500 + i);
        ops[i] = (struct rio_op){
            .type = RIO_OP_PUT, .key = keys[i], .buf = bufs + (size_t)i * n, .len = n};
    }
    T_EQ(rio_batch(e.c, ops, N, NULL), N);
    memset(bufs, 0, (size_t)N * n);
    for (int i = 0; i < N; i++)
        ops[i] = (struct rio_op){
            .type = RIO_OP_GET, .key = keys[i], .buf = bufs + (size_t)i * n, .len = n};
    T_EQ(rio_batch(e.c, ops, N, NULL), N);
    for (int i = 0; i < N; i++) {
        T_EQ(ops[i].result, (int64_t)n);
        T_PATTERN(bufs + (size_t)i * n, n, 500 + i);
    }
    free(bufs);
    eu_close(&e);
}
