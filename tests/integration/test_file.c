/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/* T_TIMEOUT 120 */
/*
 * file:// round trips: every size around the chunk and page boundaries,
 * O_DIRECT and buffered, 1..8 queues, unaligned caller memory (bounce buffers
 * and the buffered fallback), subdirectory keys, a single file, the checksum
 * xattr, and a fresh caller buffer per read at a reused address.
 */
#include "file_util.h"

#include "transport/file/file.h"
#include <dirent.h>
#include <grp.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/file.h>
#include <sys/resource.h>
#include <sys/wait.h>

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

/* PUT src, filled with the pattern of seed, as key and GET it back into dst
 * (zeroed first): whole and exact. Returns the transport's counters then;
 * *get_ops (if not NULL) is the GET's ops over all paths: one per chunk,
 * more when the engine split the last chunks into ranges (tail splitting). */
static struct rio_file_counters roundtrip_counters(struct eu *e, const char *key, uint8_t *src,
                                                   uint8_t *dst, size_t n, uint64_t seed,
                                                   uint64_t *get_ops)
{
    struct rio_file_counters k;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};

    t_fill_pattern(src, n, seed);
    T_OK(rio_put(e->c, key, src, n, NULL, NULL));
    memset(dst, 0, n);
    T_EQ(rio_get(e->c, key, dst, n, &call), (int64_t)n);
    T_PATTERN(dst, n, seed);
    T_OK(rio_file_counters(e->c, &k));
    if (get_ops) {
        *get_ops = 0;
        for (unsigned i = 0; i < st.npaths; i++)
            *get_ops += st.path[i].ops;
        T_GE(*get_ops, st.chunks);
    }
    return k;
}

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
            o.adapt = -1; /* every queue from the first op: the queues are counted */
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
                T_GT(k.steps_direct + k.steps_bounce, 0u); /* page-aligned: staged */
            else
                T_EQ(k.steps_direct + k.steps_bounce, 0u);
            eu_close(&e);
        }
    }
    free(src);
    free(dst);
}

/*
 * Aligned caller memory: staged through the registered bounce buffers with
 * stage=1 (the default on a disk-backed file system), straight into the
 * caller's memory with stage=0. A chunk
 * larger than a bounce buffer is never split to be staged: it goes direct.
 */
TEST(staging)
{
    const size_t n = 8 * CH + 4096;
    static const char *const modes[] = {"?direct=1&sync=0&stage=1", "?direct=1&sync=0&stage=0",
                                        "?direct=1&sync=0&bounce=64K"};
    struct rio_options o;
    struct eu e;
    uint8_t *src = NULL, *dst = NULL;

    fu_mkdir();
    T_EQ(posix_memalign((void **)&src, 4096, n), 0);
    T_EQ(posix_memalign((void **)&dst, 4096, n), 0);
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        opts(&o, 2, 4);
        eu_open(&e, fu_url("%s", modes[m]), &o);
        /* Staged: the bounce buffers are set up by the open, not by the
         * first transfer (registering them faults every page in). */
        struct rio_file_counters k0;
        T_OK(rio_file_counters(e.c, &k0));
        if (m == 1)
            T_EQ(k0.bounce_bytes, 0u);
        else
            T_GE(k0.bounce_bytes, 2u * 4u * (m == 0 ? CH : 65536u));
        uint64_t rd;
        struct rio_file_counters k = roundtrip_counters(&e, "st", src, dst, n, 70 + m, &rd);
        fprintf(stderr,
                "  %s: direct %llu, bounce %llu (fixed %llu), buffered %llu, read ops %llu\n",
                modes[m], (unsigned long long)k.steps_direct, (unsigned long long)k.steps_bounce,
                (unsigned long long)k.steps_fixed, (unsigned long long)k.steps_buffered,
                (unsigned long long)rd);
        /* One step per op: 9 chunk writes, and the reads: 9 chunks, more when
         * the last 128 KiB chunks were split into 64 KiB ranges (tail
         * splitting; the 4 KiB last chunk is too small to split). Every op
         * is whole pages, so none is buffered. */
        T_LE(rd, 9u + 8u);
        T_EQ(k.steps_buffered, 0u);
        if (m == 0) {
            T_EQ(k.steps_direct, 0u); /* 4 ops per ring, 4 bounce buffers per ring */
            T_EQ(k.steps_bounce, 9u + rd);
        } else if (m == 1) {
            T_EQ(k.steps_bounce, 0u);
            T_EQ(k.steps_direct, 9u + rd);
        } else {
            /* 64 KiB buffers: the 128 KiB chunks go direct, what fits one
             * buffer is staged: the 4 KiB last chunk (written and read) and
             * each 64 KiB range of a split chunk (rd - 9 chunks split in two). */
            T_EQ(k.steps_direct, 8u + 8u - (rd - 9u));
            T_EQ(k.steps_bounce, 2u + 2u * (rd - 9u));
        }
        T_EQ(k.continuations, 0u);
        eu_close(&e);
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
        struct rio_file_counters k = roundtrip_counters(&e, "u", src, dst, n, 40 + m, NULL);
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

/* Entries of the scratch directory, "." and ".." aside. */
static int dir_entries(void);

/*
 * A delete removes the directories it leaves empty, up to the root: the
 * name of one is a key again ("c" after "c/d" went), a directory that
 * still holds a key stays. An upload open in a directory that a delete
 * empties and removes (an unnamed file holds no entry in it) still
 * commits: its directory is made again. Same with named temporaries.
 */
TEST(delete_prunes_empty_directories)
{
    struct rio_options o;
    struct rio_writer *w;
    struct eu e;
    struct stat st;
    char p[PATH_MAX];
    uint8_t *a = eu_pattern_buf(3 * CH, 51);

    fu_mkdir();
    opts(&o, 1, 2);
    for (int named = 0; named < 2; named++) {
        eu_open(&e, fu_url(named ? "?tmpfile=0" : ""), &o);
        round_trip(e.c, "c/d/e", 100, 1);
        round_trip(e.c, "c/x", 100, 2);
        T_OK(rio_delete(e.c, "c/d/e"));
        snprintf(p, sizeof(p), "%s/c/d", fu_dir);
        T_EQ(stat(p, &st), -1); /* c/d went */
        snprintf(p, sizeof(p), "%s/c", fu_dir);
        T_OK(stat(p, &st)); /* c holds c/x */
        T_OK(rio_delete(e.c, "c/x"));
        T_EQ(stat(p, &st), -1);
        T_EQ(dir_entries(), 0);
        round_trip(e.c, "c", 100, 3); /* a file where the directory was */
        T_OK(rio_delete(e.c, "c"));

        /* An upload into q/ while q/'s only key is deleted. */
        round_trip(e.c, "q/old", 10, 4);
        T_OK(rio_writer_open(e.c, "q/new", 3 * CH, 2, NULL, &w));
        T_OK(rio_writer_write(w, a, CH));
        T_OK(rio_delete(e.c, "q/old"));
        T_OK(rio_writer_write(w, a + CH, 2 * CH));
        T_OK(rio_writer_close(w, NULL));
        eu_get_check(e.c, "q/new", 3 * CH, 51, NULL);
        T_OK(rio_delete(e.c, "q/new"));
        T_EQ(dir_entries(), 0);
        eu_close(&e);
    }
    free(a);
}

/* A replacing PUT and a delete take a lock on the object's file (the one a
 * PUT on a generation decides under: docs/file.md "Conditional writes"):
 * with another open file holding it for 300 ms, each waits for it, then
 * goes on. Both with unnamed and named
 * uploads. */
struct holder {
    int fd;
};

static void *unlock_later(void *arg)
{
    struct holder *h = arg;
    usleep(300 * 1000);
    flock(h->fd, LOCK_UN);
    return NULL;
}

static uint64_t held_for(struct rio_client *c, const char *key, int put)
{
    struct holder h = {open(fu_path(key), O_RDONLY)};
    pthread_t th;
    uint64_t t0;

    T_GE(h.fd, 0);
    T_EQ(flock(h.fd, LOCK_EX), 0);
    T_EQ(pthread_create(&th, NULL, unlock_later, &h), 0);
    t0 = t_now_ns();
    if (put)
        free(eu_put_pattern(c, key, 100, 62, NULL));
    else
        T_OK(rio_delete(c, key));
    uint64_t ns = t_now_ns() - t0;
    T_EQ(pthread_join(th, NULL), 0);
    close(h.fd);
    return ns;
}

TEST(replace_and_delete_wait_for_the_files_lock)
{
    struct rio_options o;
    struct eu e;

    fu_mkdir();
    opts(&o, 1, 2);
    for (int named = 0; named < 2; named++) {
        eu_open(&e, fu_url(named ? "?tmpfile=0" : ""), &o);
        free(eu_put_pattern(e.c, "lk", 100, 61, NULL));
        T_GE(held_for(e.c, "lk", 1), 250 * 1000 * 1000ull);
        eu_get_check(e.c, "lk", 100, 62, NULL);
        T_GE(held_for(e.c, "lk", 0), 250 * 1000 * 1000ull);
        struct rio_desc d;
        T_ERR(rio_stat(e.c, "lk", &d), RIO_ENOTFOUND);
        eu_close(&e);
    }
}

/* A listing walks the tree beneath the root in byte order of key, which
 * is not the order of a plain directory walk ("a.b" < "a/x" < "a0": a
 * directory sorts as its name and '/'), a page at a time, each page
 * bounded; a page resumes after the token; with ?single=1 there is
 * nothing to list. */
static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

TEST(list_byte_order_paged)
{
    static const char *const tricky[] = {"a.b",   "a/x",   "a-",      "a0",      "ab/c",
                                         "a/b/c", "a/b.c", "z/z/z/z", "\xc3\xa9"};
    const size_t nt = sizeof(tricky) / sizeof(tricky[0]);
    const size_t n = nt + 300;
    char **want = calloc(n, sizeof(*want));
    struct rio_options o;
    struct eu e;

    fu_mkdir();
    opts(&o, 1, 2);
    eu_open(&e, fu_url(""), &o);
    for (size_t i = 0; i < n; i++) {
        char k[64];
        if (i < nt)
            snprintf(k, sizeof(k), "%s", tricky[i]);
        else
            snprintf(k, sizeof(k), "d%zu/f%zu", (i - nt) % 7, i);
        want[i] = strdup(k);
        T_OK(rio_put(e.c, k, "x", 1, NULL, NULL));
    }
    qsort(want, n, sizeof(*want), cmp_str);
    static const unsigned maxes[] = {7, 100, 1000};
    for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
        const unsigned max = maxes[m];
        struct rio_list_args a = {.max_keys = max};
        struct rio_list_page p;
        char token[RIO_LIST_TOKEN_MAX + 1] = "";
        size_t at = 0;
        for (;;) {
            a.token = token;
            T_OK(rio_list(e.c, &a, &p, NULL));
            T_LE(p.n, max);
            for (unsigned i = 0; i < p.n; i++, at++) {
                T_LT(at, n);
                T_STREQ(p.entries[i].key, want[at]);
                T_EQ(p.entries[i].size, 1u);
                T_NE(p.entries[i].generation, 0u);
                T_GT(p.entries[i].mtime_ns, 0);
            }
            memcpy(token, p.next_token, sizeof(token));
            rio_list_page_cleanup(&p);
            if (!token[0])
                break;
        }
        T_EQ(at, n);
    }
    /* The generation a listing gives is the one a lookup gives. */
    struct rio_list_args a = {.prefix = "a/b", .start_after = "a/b.c"};
    struct rio_list_page p;
    struct rio_desc d;
    T_OK(rio_list(e.c, &a, &p, NULL));
    T_EQ(p.n, 1u);
    T_STREQ(p.entries[0].key, "a/b/c");
    T_OK(rio_stat(e.c, "a/b/c", &d));
    T_EQ(p.entries[0].generation, d.generation);
    T_STREQ(p.entries[0].etag, d.etag);
    T_EQ(strlen(d.etag), 32u);
    rio_desc_cleanup(&d);
    rio_list_page_cleanup(&p);
    for (size_t i = 0; i < n; i++) {
        T_OK(rio_delete(e.c, want[i]));
        free(want[i]);
    }
    free(want);
    eu_close(&e);

    eu_open(&e, fu_url("/one.bin?single=1"), &o);
    a = (struct rio_list_args){0};
    T_ERR(rio_list(e.c, &a, &p, NULL), RIO_ENOTSUP);
    eu_close(&e);
}

/* Every key of a listing of prefix in pages of max, in order, joined by
 * '\n'; between the first page and the second, between(arg) runs. */
static char *list_all(struct rio_client *c, const char *prefix, unsigned max,
                      void (*between)(void *), void *arg)
{
    struct rio_list_args a = {.prefix = prefix, .max_keys = max};
    struct rio_list_page p;
    char token[RIO_LIST_TOKEN_MAX + 1] = "";
    size_t len = 0, pages = 0;
    char *all = calloc(1, 1);

    for (;;) {
        a.token = token;
        T_OK(rio_list(c, &a, &p, NULL));
        T_LE(p.n, max);
        for (unsigned i = 0; i < p.n; i++) {
            size_t kl = strlen(p.entries[i].key);
            all = realloc(all, len + kl + 2);
            memcpy(all + len, p.entries[i].key, kl);
            all[len + kl] = '\n';
            len += kl + 1;
            all[len] = '\0';
        }
        memcpy(token, p.next_token, sizeof(token));
        rio_list_page_cleanup(&p);
        if (!token[0])
            break;
        if (pages++ == 0 && between)
            between(arg);
    }
    return all;
}

static void touch(const char *name)
{
    int fd = open(fu_path(name), O_CREAT | O_WRONLY | O_TRUNC, 0644);
    T_GE(fd, 0);
    close(fd);
}

static void change_big(void *arg)
{
    (void)arg;
    touch("big/f02000x");
    T_EQ(unlink(fu_path("big/f01500")), 0);
    touch("big/sub/s00700x");
    T_EQ(unlink(fu_path("big/sub/s00100")), 0);
}

/* A listing that meets a directory it may not read fails (a page with a
 * hole would pass for the whole store) and says which directory: it said
 * only "permission denied", with thousands of directories to search. Run
 * as nobody where the test is root (root reads a directory of mode 0). */
static int list_unreadable_child(void)
{
    struct rio_options o;
    struct rio_client *c = NULL;
    struct rio_list_args a = {.max_keys = 100};
    struct rio_list_page p;
    char want[1100];

    if (geteuid() == 0 && (setgroups(0, NULL) < 0 || setgid(65534) < 0 || setuid(65534) < 0))
        return 10;
    opts(&o, 1, 2);
    if (rio_client_new(fu_url(""), &o, &c) < 0)
        return 11;
    int ret = rio_list(c, &a, &p, NULL);
    snprintf(want, sizeof(want), "%s/b/", fu_dir);
    if (ret != -EACCES || !strstr(rio_error_detail(), want)) {
        fprintf(stderr, "list: %s, detail \"%s\"\n", rio_errname(ret), rio_error_detail());
        return 12;
    }
    rio_client_destroy(c);
    return 0;
}

TEST(list_names_the_directory_it_cannot_read)
{
    struct rio_options o;
    struct eu e;
    int st;

    fu_mkdir();
    opts(&o, 1, 2);
    eu_open(&e, fu_url(""), &o);
    T_OK(rio_put(e.c, "a/1", "x", 1, NULL, NULL));
    T_OK(rio_put(e.c, "b/2", "y", 1, NULL, NULL));
    T_OK(rio_put(e.c, "c/3", "z", 1, NULL, NULL));
    eu_close(&e);
    T_EQ(chmod(fu_dir, 0755), 0);
    T_EQ(chmod(fu_path("a"), 0755), 0);
    T_EQ(chmod(fu_path("c"), 0755), 0);
    T_EQ(chmod(fu_path("b"), 0), 0);
    pid_t pid = fork();
    T_GE(pid, 0);
    if (pid == 0)
        _exit(list_unreadable_child());
    T_EQ(waitpid(pid, &st, 0), pid);
    T_EQ(chmod(fu_path("b"), 0755), 0);
    T_TRUE(WIFEXITED(st));
    T_EQ(WEXITSTATUS(st), 0);
}

/* A large directory's sorted entries serve the next pages of a listing
 * while the directory is as it was read (a flat directory of 300,000
 * files was read and sorted again for every page); a page after a file
 * came or went sees it, in the directory and in one beneath it, and a
 * page that resumes inside a subdirectory, or lists a prefix, starts
 * where its keys begin. */
TEST(list_large_directory_pages_see_changes)
{
    struct rio_options o;
    struct eu e;
    char name[64];

    fu_mkdir();
    T_EQ(mkdir(fu_path("big"), 0755), 0);
    T_EQ(mkdir(fu_path("big/sub"), 0755), 0);
    for (int i = 0; i < 3000; i++) {
        snprintf(name, sizeof(name), "big/f%05d", i);
        touch(name);
    }
    for (int i = 0; i < 1500; i++) {
        snprintf(name, sizeof(name), "big/sub/s%05d", i);
        touch(name);
    }
    touch("big/t"); /* after "big/sub/": the walk comes back up */
    touch("a");
    /* Quiet for more than a second: the directories' lists may be kept. */
    usleep(1200 * 1000);
    opts(&o, 1, 2);
    eu_open(&e, fu_url(""), &o);
    static const unsigned maxes[] = {1, 333, 1000};
    for (size_t m = 0; m < sizeof(maxes) / sizeof(maxes[0]); m++) {
        char *got = list_all(e.c, "", maxes[m], NULL, NULL);
        size_t n = 0;
        for (char *q = got; *q; q++)
            n += *q == '\n';
        T_EQ(n, 4502u);
        T_TRUE(strncmp(got, "a\nbig/f00000\nbig/f00001\n", 24) == 0);
        T_TRUE(strstr(got, "\nbig/f02999\nbig/sub/s00000\n") != NULL);
        T_TRUE(strstr(got, "\nbig/sub/s01499\nbig/t\n") != NULL);
        free(got);
    }
    /* Once the lists are kept (the listings above), a change between
     * pages is seen by the next page. */
    char *got = list_all(e.c, "big/", 500, change_big, NULL);
    T_TRUE(strstr(got, "\nbig/f02000\nbig/f02000x\nbig/f02001\n") != NULL);
    T_TRUE(strstr(got, "\nbig/f01499\nbig/f01501\n") != NULL);
    T_TRUE(strstr(got, "\nbig/sub/s00700\nbig/sub/s00700x\nbig/sub/s00701\n") != NULL);
    T_TRUE(strstr(got, "\nbig/sub/s00099\nbig/sub/s00101\n") != NULL);
    free(got);
    /* Resuming inside the subdirectory and with a start key between. */
    struct rio_list_args a = {.start_after = "big/sub/s01000", .max_keys = 2};
    struct rio_list_page p;
    T_OK(rio_list(e.c, &a, &p, NULL));
    T_EQ(p.n, 2u);
    T_STREQ(p.entries[0].key, "big/sub/s01001");
    T_STREQ(p.entries[1].key, "big/sub/s01002");
    rio_list_page_cleanup(&p);
    a = (struct rio_list_args){.start_after = "big/sub/s01499", .max_keys = 2};
    T_OK(rio_list(e.c, &a, &p, NULL));
    T_EQ(p.n, 1u);
    T_STREQ(p.entries[0].key, "big/t");
    rio_list_page_cleanup(&p);
    a = (struct rio_list_args){.start_after = "big/sub", .max_keys = 1};
    T_OK(rio_list(e.c, &a, &p, NULL));
    T_EQ(p.n, 1u);
    T_STREQ(p.entries[0].key, "big/sub/s00000");
    rio_list_page_cleanup(&p);
    /* A prefix starts the walk where its keys begin. */
    static const struct {
        const char *prefix, *first;
        unsigned n;
    } pre[] = {{"big/f0299", "big/f02990", 10},   {"big/sub/s0149", "big/sub/s01490", 10},
               {"big/s", "big/sub/s00000", 1000}, {"big/t", "big/t", 1},
               {"big/sub/s00100", "", 0},         {"big/u", "", 0}};
    for (size_t i = 0; i < sizeof(pre) / sizeof(pre[0]); i++) {
        a = (struct rio_list_args){.prefix = pre[i].prefix};
        T_OK(rio_list(e.c, &a, &p, NULL));
        T_EQ(p.n, pre[i].n);
        if (p.n)
            T_STREQ(p.entries[0].key, pre[i].first);
        for (unsigned j = 0; j < p.n; j++)
            T_TRUE(strncmp(p.entries[j].key, pre[i].prefix, strlen(pre[i].prefix)) == 0);
        rio_list_page_cleanup(&p);
    }
    a = (struct rio_list_args){.start_after = "big/f01499zz", .max_keys = 1};
    T_OK(rio_list(e.c, &a, &p, NULL));
    T_EQ(p.n, 1u);
    T_STREQ(p.entries[0].key, "big/f01501");
    rio_list_page_cleanup(&p);
    eu_close(&e);
}

/* A key whose last component is as long as a file name may be (255
 * bytes) is written and replaced, with O_TMPFILE and with named
 * temporary files: the temporary name was built from the whole name
 * and went past NAME_MAX, so such an object could never be replaced. */
TEST(long_last_component_replaced)
{
    struct rio_options o;
    struct eu e;
    char key[300];

    fu_mkdir();
    opts(&o, 1, 2);
    memcpy(key, "dir/", 4);
    memset(key + 4, 'L', NAME_MAX);
    key[4 + NAME_MAX] = '\0';
    for (int named = 0; named < 2; named++) {
        eu_open(&e, fu_url(named ? "?tmpfile=0" : ""), &o);
        for (int i = 0; i < 3; i++) {
            free(eu_put_pattern(e.c, key, 5000, 70 + i, NULL));
            eu_get_check(e.c, key, 5000, 70 + i, NULL);
        }
        T_OK(rio_delete(e.c, key));
        eu_close(&e);
    }
    T_EQ(fu_tmp_files(), 0);
}

/* An overwrite replaces the object's file (its names exchanged with the
 * upload's, the old file then removed): a second name of the old file
 * keeps the old bytes, and no temporary name is left, named or unnamed
 * upload, synced or not. */
TEST(overwrite_replaces_the_file)
{
    struct rio_options o;
    struct eu e;
    const size_t n = 3 * CH + 5;

    fu_mkdir();
    opts(&o, 1, 2);
    for (int v = 0; v < 4; v++) {
        eu_open(&e, fu_url("?tmpfile=%d&sync=%d", v & 1, v >> 1), &o);
        uint8_t *old = eu_put_pattern(e.c, "over", n, 80 + v, NULL);
        char *from = strdup(fu_path("over")), *to = strdup(fu_path("old"));
        unlink(to);
        T_EQ(link(from, to), 0);
        free(from);
        free(to);
        free(eu_put_pattern(e.c, "over", n, 90 + v, NULL));
        eu_get_check(e.c, "over", n, 90 + v, NULL);
        size_t fn;
        uint8_t *kept = fu_slurp(fu_path("old"), &fn);
        T_EQ(fn, n);
        T_MEMEQ(kept, old, n);
        free(kept);
        free(old);
        T_EQ(fu_tmp_files(), 0);
        eu_close(&e);
    }
    unlink(fu_path("old"));
}

/* Descriptors of this process that hold a file of the scratch directory
 * that no name points at any more (its space not given back). */
static int deleted_files_held(void)
{
    char lp[300], target[4200];
    int n = 0;
    DIR *d = opendir("/proc/self/fd");

    T_NOTNULL(d);
    for (struct dirent *de; (de = readdir(d));) {
        snprintf(lp, sizeof(lp), "/proc/self/fd/%s", de->d_name);
        ssize_t l = readlink(lp, target, sizeof(target) - 1);
        if (l <= 0)
            continue;
        target[l] = '\0';
        if (strncmp(target, fu_dir, strlen(fu_dir)) == 0 && strstr(target, " (deleted)"))
            n++;
    }
    closedir(d);
    return n;
}

/* Another process replaces or removes an object this client has read: the
 * open file its lookup cached is of no use any more, and keeping it open
 * kept the old file's space taken (up to 128 such files, of any size,
 * until the cache evicted them). A lookup that finds another file under
 * the key, or none, closes it. */
TEST(replaced_elsewhere_gives_back_the_old_file)
{
    struct rio_options o;
    struct eu e;
    struct rio_desc d;
    const size_t n = 2 * CH + 3;

    fu_mkdir();
    opts(&o, 1, 2);
    eu_open(&e, fu_url(""), &o);
    for (int round = 0; round < 3; round++) {
        free(eu_put_pattern(e.c, "rep", n, 60 + round, NULL));
        eu_get_check(e.c, "rep", n, 60 + round, NULL);
        uint8_t *src = eu_pattern_buf(n, 70 + round);
        char *tmp = strdup(fu_path("rep.new"));
        fu_write(tmp, src, n);
        T_EQ(rename(tmp, fu_path("rep")), 0); /* another program's replace */
        free(tmp);
        free(src);
        eu_get_check(e.c, "rep", n, 70 + round, NULL);
        T_EQ(deleted_files_held(), 0);
    }
    free(eu_put_pattern(e.c, "gone", n, 64, NULL));
    eu_get_check(e.c, "gone", n, 64, NULL);
    T_EQ(unlink(fu_path("gone")), 0); /* another program's delete */
    T_ERR(rio_stat(e.c, "gone", &d), RIO_ENOTFOUND);
    T_EQ(deleted_files_held(), 0);
    eu_close(&e);
}

/* Swaps ?single=1's file for a FIFO and back, as fast as it can, until
 * *stop. */
struct fifo_swap {
    atomic_bool stop;
    unsigned swaps;
};

static void *fifo_swapper(void *arg)
{
    struct fifo_swap *sw = arg;
    char reg[1024], tmp[1100], fifo[1100], path[1100];

    snprintf(reg, sizeof(reg), "%s", fu_path("reg"));
    snprintf(tmp, sizeof(tmp), "%s.tmp", reg);
    snprintf(fifo, sizeof(fifo), "%s.fifo", reg);
    snprintf(path, sizeof(path), "%s", fu_path("one.bin"));
    while (!atomic_load(&sw->stop)) {
        unlink(tmp);
        if (link(reg, tmp) == 0)
            rename(tmp, path);
        if (mkfifo(fifo, 0644) == 0 || errno == EEXIST)
            rename(fifo, path);
        sw->swaps++;
    }
    return NULL;
}

/* ?single=1 names the file by the user's path, which is opened twice (the
 * buffered and the O_DIRECT descriptor): a FIFO swapped in between hung
 * the second open() for good. Each lookup now ends (found, "not a regular
 * file", or the file changed); a hang is the alarm. */
TEST(single_file_swapped_for_a_fifo_never_hangs)
{
    struct rio_options o;
    struct eu e;
    struct fifo_swap sw = {0};
    pthread_t th;
    unsigned ok = 0;

    fu_mkdir();
    char data[5000];
    memset(data, 'x', sizeof(data));
    char reg[1024];
    snprintf(reg, sizeof(reg), "%s", fu_path("reg")); /* fu_path's buffer is one */
    fu_write(reg, data, sizeof(data));
    T_EQ(link(reg, fu_path("one.bin")), 0);
    opts(&o, 1, 2);
    eu_open(&e, fu_url("/one.bin?single=1"), &o);
    alarm(30);
    T_EQ(pthread_create(&th, NULL, fifo_swapper, &sw), 0);
    uint64_t t0 = t_now_ms();
    for (unsigned i = 0; i < 200000 && t_now_ms() - t0 < 2000; i++) {
        struct rio_desc d;
        int ret = rio_stat(e.c, "k", &d);
        if (ret == 0) {
            T_EQ(d.size, sizeof(data));
            rio_desc_cleanup(&d);
            ok++;
        }
    }
    atomic_store(&sw.stop, true);
    T_EQ(pthread_join(th, NULL), 0);
    alarm(0);
    T_GT(sw.swaps, 0u);
    T_GT(ok, 0u);
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
    /* A batch whose uploads open while it runs: one of them cannot (its
     * key's parent is a file) and fails alone; an empty one is created. */
    struct rio_op mixed[4] = {
        {.type = RIO_OP_PUT, .key = "k000/below", .buf = bufs, .len = n},
        {.type = RIO_OP_PUT, .key = "m1", .buf = bufs + n, .len = n},
        {.type = RIO_OP_PUT, .key = "m2", .buf = bufs + 2 * n, .len = n},
        {.type = RIO_OP_PUT, .key = "m3", .buf = bufs, .len = 0},
    };
    T_EQ(rio_batch(e.c, mixed, 4, NULL), 3);
    T_ERR(mixed[0].result, -ENOTDIR);
    T_EQ(mixed[1].result, 0);
    T_EQ(mixed[2].result, 0);
    T_EQ(mixed[3].result, 0);
    struct rio_desc dm;
    T_OK(rio_stat(e.c, "m3", &dm));
    T_EQ(dm.size, 0u);
    rio_desc_cleanup(&dm);
    eu_get_check(e.c, "m2", n, 502, NULL);
    DIR *dir = opendir(fu_dir);
    T_NOTNULL(dir);
    for (struct dirent *de; (de = readdir(dir));)
        if (strstr(de->d_name, ".railio-tmp-"))
            T_FAIL("temporary file left: %s", de->d_name);
    closedir(dir);
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

/* Entries of the scratch directory, "." and ".." aside. */
static int dir_entries(void)
{
    DIR *dir = opendir(fu_dir);
    int n = 0;
    T_NOTNULL(dir);
    for (struct dirent *de; (de = readdir(dir));)
        n += strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
    closedir(dir);
    return n;
}

/*
 * An upload is an unnamed file (O_TMPFILE) until its commit links it: while
 * it is written the directory shows nothing, an abort leaves nothing, a
 * commit over an existing object replaces it whole; with tmpfile=0 the
 * upload is a named temporary file, renamed at commit.
 */
TEST(unnamed_uploads)
{
    const size_t n = 3 * CH + 5;
    struct rio_options o;
    struct rio_writer *w;
    struct eu e;
    uint8_t *a = eu_pattern_buf(n, 41), *b = eu_pattern_buf(n, 42);

    fu_mkdir();
    opts(&o, 2, 4);
    eu_open(&e, fu_url(""), &o);
    T_OK(rio_put(e.c, "obj", a, n, NULL, NULL));
    T_EQ(dir_entries(), 1);
    /* Replace it: nothing new to see until the commit, then all of b. */
    T_OK(rio_writer_open(e.c, "obj", n, 2, NULL, &w));
    T_OK(rio_writer_write(w, b, 2 * CH));
    T_EQ(dir_entries(), 1);
    eu_get_check(e.c, "obj", n, 41, NULL);
    T_OK(rio_writer_write(w, b + 2 * CH, n - 2 * CH));
    T_OK(rio_writer_close(w, NULL));
    T_EQ(dir_entries(), 1);
    eu_get_check(e.c, "obj", n, 42, NULL);
    /* A new key, aborted: no trace. */
    T_OK(rio_writer_open(e.c, "gone", RIO_SIZE_UNKNOWN, 2, NULL, &w));
    T_OK(rio_writer_write(w, a, 2 * CH));
    rio_writer_abort(w);
    T_EQ(dir_entries(), 1);
    T_ERR(rio_stat(e.c, "gone", &(struct rio_desc){0}), RIO_ENOTFOUND);
    eu_close(&e);

    /* tmpfile=0: the named temporary is there while the upload is open. */
    eu_open(&e, fu_url("?tmpfile=0"), &o);
    T_OK(rio_writer_open(e.c, "obj", n, 2, NULL, &w));
    T_OK(rio_writer_write(w, a, 2 * CH));
    T_EQ(fu_tmp_files(), 1);
    T_OK(rio_writer_write(w, a + 2 * CH, n - 2 * CH));
    T_OK(rio_writer_close(w, NULL));
    T_EQ(fu_tmp_files(), 0);
    T_EQ(dir_entries(), 1);
    eu_get_check(e.c, "obj", n, 41, NULL);
    eu_close(&e);
    struct rio_client *c;
    T_ERR(rio_client_new(fu_url("?tmpfile=maybe"), &o, &c), RIO_EINVAL);
    free(a);
    free(b);
}

/* A client killed (-9) in the middle of an upload leaves no file behind:
 * the unnamed file dies with its last descriptor. */
TEST(killed_upload_leaves_nothing)
{
    int pfd[2];
    fu_mkdir();
    T_OK(pipe(pfd));
    pid_t pid = fork();
    T_GE(pid, 0);
    if (pid == 0) {
        struct rio_options o;
        struct rio_client *c;
        struct rio_writer *w;
        uint8_t *a = eu_pattern_buf(2 * CH, 43);
        opts(&o, 1, 2);
        if (!a || rio_client_new(fu_url(""), &o, &c) < 0 ||
            rio_writer_open(c, "victim", 8 * CH, 2, NULL, &w) < 0 ||
            rio_writer_write(w, a, 2 * CH) < 0)
            _exit(1);
        (void)!write(pfd[1], "x", 1);
        pause();
        _exit(0);
    }
    char x = 0;
    T_EQ(read(pfd[0], &x, 1), 1);
    T_OK(kill(pid, SIGKILL));
    int st;
    T_EQ(waitpid(pid, &st, 0), pid);
    T_TRUE(WIFSIGNALED(st));
    close(pfd[0]);
    close(pfd[1]);
    T_EQ(dir_entries(), 0);
}

/*
 * A batch far larger than the descriptors the process may open: 1000 PUTs
 * under RLIMIT_NOFILE 128 (each open upload holds two descriptors; the
 * batch used to open every upload at once and fail with EMFILE), then 1000
 * GETs, all byte-exact.
 */
TEST(batch_fd_bounded)
{
    enum { N = 1000 };
    const size_t n = 4096;
    struct rio_options o;
    struct eu e;
    struct rlimit old, lim;
    struct rio_op *ops = calloc(N, sizeof(*ops));
    char(*keys)[16] = calloc(N, 16);
    uint8_t *bufs = malloc((size_t)N * n);

    T_NOTNULL(ops);
    T_NOTNULL(keys);
    T_NOTNULL(bufs);
    fu_mkdir();
    opts(&o, 1, 4);
    eu_open(&e, fu_url("?sync=0"), &o);
    for (int i = 0; i < N; i++) {
        snprintf(keys[i], 16, "f%04d", i);
        t_fill_pattern(bufs + (size_t)i * n, n, 900 + i);
        ops[i] = (struct rio_op){
            .type = RIO_OP_PUT, .key = keys[i], .buf = bufs + (size_t)i * n, .len = n};
    }
    T_OK(getrlimit(RLIMIT_NOFILE, &old));
    lim = old;
    lim.rlim_cur = 128;
    T_OK(setrlimit(RLIMIT_NOFILE, &lim));
    int put_ok = rio_batch(e.c, ops, N, NULL);
    int64_t put_err = 0;
    for (int i = 0; i < N && !put_err; i++)
        put_err = ops[i].result < 0 ? ops[i].result : 0;
    memset(bufs, 0, (size_t)N * n);
    for (int i = 0; i < N; i++)
        ops[i] = (struct rio_op){
            .type = RIO_OP_GET, .key = keys[i], .buf = bufs + (size_t)i * n, .len = n};
    int get_ok = rio_batch(e.c, ops, N, NULL);
    T_OK(setrlimit(RLIMIT_NOFILE, &old));
    if (put_err)
        T_FAIL("a PUT failed: %s", rio_errname((int)put_err));
    T_EQ(put_ok, N);
    for (int i = 0; i < N; i++)
        if (ops[i].result < 0)
            T_FAIL("GET %s: %s", keys[i], rio_errname((int)ops[i].result));
    T_EQ(get_ok, N);
    for (int i = 0; i < N; i++) {
        T_EQ(ops[i].result, (int64_t)n);
        T_PATTERN(bufs + (size_t)i * n, n, 900 + i);
    }
    eu_close(&e);
    free(ops);
    free(keys);
    free(bufs);
}

/* Every descriptor the limit allows, held by dup(2); how many. */
static int hog_fds(int *fds, int max)
{
    int n = 0;
    while (n < max && (fds[n] = dup(2)) >= 0)
        n++;
    return n;
}

struct fd_release {
    int *fds;
    int n;
};

static void *release_later(void *arg)
{
    struct fd_release *r = arg;
    usleep(5000);
    for (int i = 0; i < r->n; i++)
        close(r->fds[i]);
    return NULL;
}

/* Out of descriptors because something else holds them (another op's
 * upload, an open on another thread): the open waits for them to come back
 * rather than failing the GET at once; when they never come back, the GET
 * fails in bounded time with "too many open files", and nothing is read. */
TEST(open_waits_for_descriptors_then_fails)
{
    enum { MAXFD = 256 };
    const size_t n = 4096;
    struct rio_options o;
    struct eu e;
    struct rlimit old, lim;
    int fds[MAXFD];
    uint8_t *buf = malloc(n);
    pthread_t th;

    T_NOTNULL(buf);
    fu_mkdir();
    opts(&o, 1, 4);
    eu_open(&e, fu_url("?sync=0"), &o);
    free(eu_put_pattern(e.c, "a", n, 31, NULL));
    free(eu_put_pattern(e.c, "b", n, 32, NULL));
    eu_close(&e);
    eu_open(&e, fu_url("?sync=0"), &o); /* nothing open yet */
    T_OK(getrlimit(RLIMIT_NOFILE, &old));
    lim = old;
    lim.rlim_cur = 64;
    T_OK(setrlimit(RLIMIT_NOFILE, &lim));

    /* Freed 5 ms into the GET. */
    struct fd_release r = {fds, hog_fds(fds, MAXFD)};
    T_OK(pthread_create(&th, NULL, release_later, &r));
    int64_t got = rio_get(e.c, "a", buf, n, NULL);
    T_OK(pthread_join(th, NULL));
    bool same = got == (int64_t)n && t_check_pattern(buf, n, 31) < 0;

    /* Never freed (and nothing cached left to close). */
    memset(buf, 0, n);
    eu_close(&e);
    eu_open(&e, fu_url("?sync=0"), &o);
    int held = hog_fds(fds, MAXFD);
    uint64_t t0 = t_now_ms();
    int64_t none = rio_get(e.c, "b", buf, n, NULL);
    uint64_t ms = t_now_ms() - t0;
    for (int i = 0; i < held; i++)
        close(fds[i]);
    T_OK(setrlimit(RLIMIT_NOFILE, &old));

    T_GT(r.n, 0);
    T_EQ(got, (int64_t)n);
    T_TRUE(same);
    T_EQ(none, (int64_t)-EMFILE);
    T_LT(ms, 5000u);
    eu_get_check(e.c, "a", n, 31, NULL);
    eu_get_check(e.c, "b", n, 32, NULL);
    eu_close(&e);
    free(buf);
}

/* `railio bench file://` end to end at a tiny size, as a user runs it:
 * every row measured on both sides (fio when installed), the random rows
 * with their fio-files ceiling, JSON out, nothing left in DIR. */
TEST(cli_bench_smoke)
{
    const char *bdir = t_build_dir();
    char cmd[8192], outp[512];

    fu_mkdir();
    bool fio = system("fio --version >/dev/null 2>&1") == 0;
    snprintf(outp, sizeof(outp), "%s.json", fu_dir);
    snprintf(cmd, sizeof(cmd),
             "'%s/railio' bench 'file://%s?etag=none' --size 2M --chunks 128K,1M --queues 1,2 "
             "--inflight 4 --reps 1 %s --json >'%s'",
             bdir, fu_dir, fio ? "" : "--no-fio", outp);
    T_EQ(system(cmd), 0);
    size_t len;
    char *buf = (char *)fu_slurp(outp, &len);
    buf[len] = '\0';
    unlink(outp);
    T_NOTNULL(strstr(buf, "\"rows\":["));
    int rows = 0;
    for (const char *p = buf; (p = strstr(p, "\"railio_mbps\":")); p++) {
        rows++;
        T_GT(strtod(p + 14, NULL), 0.0);
    }
    T_EQ(rows, 2 * 2 * 4); /* chunks x queues x modes */
    T_NULL(strstr(buf, "\"error\":-"));
    if (fio) {
        T_NULL(strstr(buf, "\"fio_mbps\":0.0"));
        T_NULL(strstr(buf, "\"fio_mbps\":-"));
    }
    free(buf);
    T_EQ(dir_entries(), 0);
}

/* ------------------------------------------------ streaming PUT, bare */

#include "core/alloc.h"
#include "transport/transport.h"

static void stream_complete(struct rio_io *io)
{
    (*(int *)io->engine_priv)++;
}

/*
 * Submit chunks [0, n) of a streaming upload of src (total len) in reverse
 * order over two queues, the chunk of index skip left out and, with
 * short_at, that chunk cut to 100 bytes; wait for all. Returns the count that
 * failed.
 */
static int stream_write(const struct rio_transport_ops *ops, struct rio_transport *t, void *up,
                        const uint8_t *src, size_t len, uint64_t n, int64_t skip, int64_t short_at)
{
    struct rio_io *ios = calloc(n ? n : 1, sizeof(*ios));
    int done = 0, failed = 0;
    uint64_t sent = 0;

    T_NOTNULL(ios);
    for (uint64_t k = n; k-- > 0;) {
        struct rio_io *x = &ios[k];
        if ((int64_t)k == skip)
            continue;
        x->kind = RIO_IO_WRITE;
        x->path = (unsigned)(k % 2);
        x->key = "s";
        x->upload = up;
        x->index = k;
        x->off = k * CH;
        x->len = len - x->off < CH ? len - x->off : CH;
        if ((int64_t)k == short_at)
            x->len = 100;
        x->src = src + x->off;
        x->xxh = rio__xxh3(x->src, x->len);
        x->complete = stream_complete;
        x->engine_priv = &done;
        while (ops->submit(t, x) == -EAGAIN)
            T_GE(ops->reap(t, 100), 0); /* the queue is full: let some finish */
        sent++;
    }
    uint64_t t0 = t_now_ms();
    while ((uint64_t)done < sent && t_now_ms() - t0 < 10000)
        T_GE(ops->reap(t, 100), 0);
    T_EQ((uint64_t)done, sent);
    for (uint64_t k = 0; k < n; k++)
        if ((int64_t)k != skip && ios[k].res != (int64_t)ios[k].len)
            failed++;
    free(ios);
    return failed;
}

static int stream_commit(const struct rio_transport_ops *ops, struct rio_transport *t, void *up,
                         const uint8_t *src, size_t len)
{
    struct rio_desc d;
    int ret;

    memset(&d, 0, sizeof(d));
    strcpy(d.key, "s");
    d.size = len;
    d.chunk_size = CH;
    d.nchunks = len ? (len - 1) / CH + 1 : 0;
    d.xxh = calloc(d.nchunks ? d.nchunks : 1, sizeof(uint64_t));
    T_NOTNULL(d.xxh);
    for (uint64_t k = 0; k < d.nchunks; k++)
        d.xxh[k] = rio__xxh3(src + k * CH, len - k * CH < CH ? len - k * CH : CH);
    ret = ops->put_commit(t, up, &d);
    free(d.xxh);
    return ret;
}

/*
 * RIO_CAP_STREAM_PUT without the engine: put_open with RIO_SIZE_UNKNOWN, the
 * chunks in reverse order over two queues, the size only at put_commit; the
 * file holds exactly the bytes (its length set at commit, an empty stream an
 * empty file) and its record; direct, buffered and staged. A commit that
 * does not match what landed (a chunk missing, a chunk past the end, a short
 * chunk that is not the last) is refused and leaves nothing.
 */
TEST(stream_put_bare)
{
    static const size_t lens[] = {0, 1, 4096, CH - 1, CH, CH + 1, 3 * CH + 5, 5 * CH};
    static const char *const modes[] = {"?direct=1&sync=0", "?direct=0", "?direct=1&stage=0"};
    const struct rio_transport_ops *ops = rio__transport_find("file");
    const size_t max = 5 * CH + 4096;
    uint8_t *src = NULL;
    int64_t alloc0;

    fu_mkdir();
    T_NOTNULL(ops);
    T_NE(ops->caps & RIO_CAP_STREAM_PUT, 0u);
    T_EQ(posix_memalign((void **)&src, 4096, max), 0);
    alloc0 = rio__alloc_outstanding();
    for (size_t m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        struct rio_transport *t = NULL;
        struct rio_options o;
        struct rio_url u;
        rio_options_init(&o);
        o.paths = 2;
        o.depth = 2;
        o.chunk_size = CH;
        T_OK(rio__url_parse(fu_url("%s", modes[m]), &u));
        T_OK(ops->open(&u, &o, &t));
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            size_t len = lens[i], fn;
            uint64_t n = len ? (len - 1) / CH + 1 : 0;
            void *up = NULL;
            struct rio_desc d;
            t_fill_pattern(src, len, 90 + i + 10 * m);
            T_OK(ops->put_open(t, "s", RIO_SIZE_UNKNOWN, CH, &up));
            T_EQ(stream_write(ops, t, up, src, len, n, -1, -1), 0);
            T_OK(stream_commit(ops, t, up, src, len));
            uint8_t *disk = fu_slurp(fu_path("s"), &fn);
            T_EQ(fn, len);
            T_MEMEQ(disk, src, len);
            free(disk);
            memset(&d, 0, sizeof(d));
            T_OK(ops->lookup(t, "s", &d));
            T_EQ(d.size, (uint64_t)len);
            T_EQ(d.nchunks, n);
            if (n) {
                T_NOTNULL(d.xxh);
                T_EQ(d.xxh[n - 1], rio__xxh3(src + (n - 1) * CH, len - (n - 1) * CH));
            }
            rio_desc_cleanup(&d);
        }
        /* Refused commits: the old object stays, no temporary file is left. */
        static const struct {
            size_t len;       /* bytes the writes cover */
            uint64_t n;       /* chunks written */
            int64_t skip;     /* chunk left out */
            int64_t short_at; /* chunk cut to 100 bytes */
            size_t commit;    /* size the commit says */
        } bad[] = {
            {3 * CH, 3, 1, -1, 3 * CH},       /* a chunk missing */
            {3 * CH, 3, -1, -1, 2 * CH},      /* a chunk past the end */
            {3 * CH, 3, -1, 0, 2 * CH + 100}, /* the short chunk is not the last */
            {3 * CH, 3, -1, 2, 3 * CH},       /* the last is shorter than the size says */
            {3 * CH, 3, -1, -1, 3 * CH + 1},  /* the size names a chunk never written */
        };
        for (size_t b = 0; b < sizeof(bad) / sizeof(bad[0]); b++) {
            void *up = NULL;
            t_fill_pattern(src, bad[b].len, 200 + b);
            T_OK(ops->put_open(t, "s", RIO_SIZE_UNKNOWN, CH, &up));
            T_EQ(stream_write(ops, t, up, src, bad[b].len, bad[b].n, bad[b].skip, bad[b].short_at),
                 0);
            T_ERR(stream_commit(ops, t, up, src, bad[b].commit), RIO_EPROTO);
            T_EQ(fu_tmp_files(), 0);
            size_t fn;
            uint8_t *disk = fu_slurp(fu_path("s"), &fn);
            T_EQ(fn, 5 * CH); /* the last good object */
            free(disk);
        }
        /* A write that cannot be a chunk of the stream is refused at submit. */
        {
            void *up = NULL;
            struct rio_io x;
            int done = 0;
            T_OK(ops->put_open(t, "s", RIO_SIZE_UNKNOWN, CH, &up));
            memset(&x, 0, sizeof(x));
            x.kind = RIO_IO_WRITE;
            x.key = "s";
            x.upload = up;
            x.index = 1;
            x.off = CH + 1; /* not the chunk's offset */
            x.len = 10;
            x.src = src;
            x.complete = stream_complete;
            x.engine_priv = &done;
            T_ERR(ops->submit(t, &x), RIO_EPROTO);
            x.off = CH;
            x.len = CH + 1; /* longer than a chunk */
            T_ERR(ops->submit(t, &x), RIO_EPROTO);
            x.index = UINT64_MAX / CH;
            x.off = x.index * CH; /* past any file */
            x.len = CH;
            T_ERR(ops->submit(t, &x), RIO_EPROTO);
            ops->put_abort(t, up);
            T_EQ(done, 0);
            T_EQ(fu_tmp_files(), 0);
        }
        ops->close(t);
        rio__url_cleanup(&u);
    }
    T_EQ(rio__alloc_outstanding(), alloc0);
    free(src);
}

/*
 * rio_writer over file:// with the size unknown until the end: bytes written
 * in uneven pieces, chunks in flight on 3 queues in whatever order they
 * finish, the file's length set at commit; the object reads back whole and
 * verified. An aborted stream leaves nothing behind.
 */
TEST(stream_put_writer)
{
    static const size_t lens[] = {0, 1, CH, 3 * CH + 5, 40 * CH + 4097};
    const size_t max = 40 * CH + 4097;
    struct rio_options o;
    struct eu e;
    uint8_t *src = malloc(max), *dst = malloc(max);

    T_NOTNULL(src);
    T_NOTNULL(dst);
    fu_mkdir();
    for (int direct = 0; direct <= 1; direct++) {
        opts(&o, 3, 4);
        eu_open(&e, fu_url("?direct=%d&sync=0", direct), &o);
        for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
            size_t len = lens[i], off = 0, piece = 1;
            struct rio_writer *w = NULL;
            struct rio_desc d;
            t_fill_pattern(src, len, 300 + i);
            T_OK(rio_writer_open(e.c, "w", RIO_SIZE_UNKNOWN, 0, NULL, &w));
            while (off < len) {
                size_t n = len - off < piece ? len - off : piece;
                T_OK(rio_writer_write(w, src + off, n));
                off += n;
                piece = piece * 3 + 7; /* 1, 10, 37, ... bytes: never chunk-aligned */
            }
            T_OK(rio_writer_close(w, &d));
            T_EQ(d.size, (uint64_t)len);
            rio_desc_cleanup(&d);
            memset(dst, 0, max);
            T_EQ(rio_get(e.c, "w", dst, max, NULL), (int64_t)len);
            T_MEMEQ(dst, src, len);
            size_t fn;
            uint8_t *disk = fu_slurp(fu_path("w"), &fn);
            T_EQ(fn, len);
            free(disk);
        }
        struct rio_writer *w = NULL;
        T_OK(rio_writer_open(e.c, "w2", RIO_SIZE_UNKNOWN, 0, NULL, &w));
        T_OK(rio_writer_write(w, src, 5 * CH + 3));
        rio_writer_abort(w);
        T_EQ(fu_tmp_files(), 0);
        T_ERR(rio_get(e.c, "w2", dst, max, NULL), RIO_ENOTFOUND);
        eu_close(&e);
    }
    free(src);
    free(dst);
}

/* ------------------------------------- out of descriptors in submit, bare */

static void fd_complete(struct rio_io *io)
{
    (*(int *)io->engine_priv)++;
}

static void fd_read(struct rio_io *x, const char *key, uint64_t gen, void *dst, size_t n, int *done)
{
    memset(x, 0, sizeof(*x));
    x->kind = RIO_IO_READ;
    x->key = key;
    x->generation = gen;
    x->len = n;
    x->dst = dst;
    x->complete = fd_complete;
    x->engine_priv = done;
}

/* sync=1: the directories a PUT makes (mkdir -p below the root) are each
 * fsynced into the level above, so that an acknowledged PUT under a new
 * a/b/c/ survives a power cut on any file system, not only where ext4 and
 * xfs happen to order it; before, only the object's own directory was
 * fsynced. Seen through a preloaded fsync that logs the directories it
 * syncs, around the CLI. */
TEST(sync_makes_new_directories_durable)
{
    static const char shim[] =
        "#define _GNU_SOURCE\n#include <dlfcn.h>\n#include <stdio.h>\n#include <stdlib.h>\n"
        "#include <sys/stat.h>\n#include <unistd.h>\n"
        "int fsync(int fd) {\n"
        "  static int (*real)(int);\n"
        "  if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, \"fsync\");\n"
        "  struct stat st; char l[64], p[4096]; ssize_t n;\n"
        "  snprintf(l, sizeof(l), \"/proc/self/fd/%d\", fd);\n"
        "  const char *f = getenv(\"SHIM_LOG\");\n"
        "  if (f && fstat(fd, &st) == 0 && S_ISDIR(st.st_mode) &&\n"
        "      (n = readlink(l, p, sizeof(p) - 1)) > 0) {\n"
        "    p[n] = 0; FILE *o = fopen(f, \"a\"); if (o) { fprintf(o, \"%s\\n\", p); fclose(o); }\n"
        "  }\n"
        "  return real(fd);\n}\n";
    char so[512], log[600], src[600], want[700];
    const char *b = getenv("T_BUILD_DIR");

    t_build_shim(shim, so, sizeof(so));
    const char *dir = fu_mkdir();
    snprintf(log, sizeof(log), "%s.log", dir);
    snprintf(src, sizeof(src), "%s.src", dir);
    /* the key a/b/c/k: a tree of one file copied in */
    T_EQ(t_sh("mkdir -p %s/a/b/c && echo hello > %s/a/b/c/k", src, src), 0);
    T_EQ(t_sh("SHIM_LOG=%s " T_SHIM_ENV "%s %s/railio cp -q -r %s/ 'file://%s/?sync=1'", log, so,
              b ? b : ".", src, dir),
         0);
    size_t n;
    char *text = (char *)t_slurp(log, &n);
    T_NOTNULL(text);
    /* the root (for a), a (for b), b (for c), and c (the object's own) */
    const char *levels[] = {"", "/a", "/a/b", "/a/b/c"};
    for (unsigned i = 0; i < 4; i++) {
        snprintf(want, sizeof(want), "%s%s\n", dir, levels[i]);
        if (!strstr(text, want))
            T_FAIL("no fsync of %s%s; synced:\n%s", dir, levels[i], text);
    }
    free(text);
    unlink(log);
    T_EQ(t_sh("rm -rf %s", src), 0);
}

/*
 * A READ opens its file in submit, under the engine's lock, so it never
 * waits for descriptors there. Out of them while another READ holds its
 * file: -EAGAIN (the engine offers the chunk again as READs complete), not
 * a failure; once that READ completed its file is idle, the next try sheds
 * it and opens, and the bytes are right.
 */
TEST(read_out_of_descriptors_answers_eagain)
{
    enum { MAXFD = 256 };
    const size_t n = 4096;
    const struct rio_transport_ops *ops = rio__transport_find("file");
    struct rio_transport *t = NULL;
    struct rio_options o;
    struct rio_url u;
    struct rio_desc da, db;
    struct rlimit old, lim;
    struct rio_io ra, rb;
    int fds[MAXFD], done = 0;
    uint8_t *a = calloc(1, n), *b = calloc(1, n);
    struct eu e;

    T_NOTNULL(a);
    T_NOTNULL(b);
    T_NOTNULL(ops);
    fu_mkdir();
    opts(&o, 1, 4);
    eu_open(&e, fu_url("?sync=0"), &o);
    free(eu_put_pattern(e.c, "a", n, 41, NULL));
    free(eu_put_pattern(e.c, "b", n, 42, NULL));
    T_OK(rio_stat(e.c, "b", &db));
    uint64_t bgen = db.generation;
    rio_desc_cleanup(&db);
    eu_close(&e);

    /* A transport that has looked up only "a": "b" is opened by its READ. */
    T_OK(rio__url_parse(fu_url("?sync=0"), &u));
    T_OK(rio__transport_open(ops, &u, &o, &t));
    ops = t->ops;
    memset(&da, 0, sizeof(da));
    T_OK(ops->lookup(t, "a", &da));
    fd_read(&ra, "a", da.generation, a, n, &done);
    T_OK(ops->submit(t, &ra)); /* holds a's file until reaped */

    T_OK(getrlimit(RLIMIT_NOFILE, &old));
    lim = old;
    lim.rlim_cur = 64;
    T_OK(setrlimit(RLIMIT_NOFILE, &lim));
    int held = hog_fds(fds, MAXFD);
    fd_read(&rb, "b", bgen, b, n, &done);
    int busy = ops->submit(t, &rb); /* nothing idle to shed: a's READ holds it */
    uint64_t t0 = t_now_ms();
    while (done < 1 && t_now_ms() - t0 < 5000)
        T_GE(ops->reap(t, 100), 0);
    int again = ops->submit(t, &rb); /* a is idle now: shed, then b opens */
    while (done < 2 && again == 0 && t_now_ms() - t0 < 5000)
        T_GE(ops->reap(t, 100), 0);
    for (int i = 0; i < held; i++)
        close(fds[i]);
    T_OK(setrlimit(RLIMIT_NOFILE, &old));

    T_GT(held, 0);
    T_ERR(busy, -EAGAIN);
    T_EQ(ra.res, (int64_t)n);
    T_TRUE(t_check_pattern(a, n, 41) < 0);
    T_OK(again);
    T_EQ(done, 2);
    T_EQ(rb.res, (int64_t)n);
    T_TRUE(t_check_pattern(b, n, 42) < 0);
    ops->close(t);
    rio_desc_cleanup(&da);
    rio__url_cleanup(&u);
    free(a);
    free(b);
}
