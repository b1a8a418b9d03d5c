/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados:// compose (head version 2) against the harness cluster: objects
 * made of other objects' chunks read back byte-exact, whole and from any
 * offset; the sources' heads go and their chunks stay, exactly once; a
 * delete or an overwrite of the composed object removes its chunks; a
 * source deleted after its chunks were lent (a crash before the sources'
 * heads went, then an Abort) takes none of them, and the compose can be
 * done again; two composes of the same sources at once leave one whole
 * object; fsck keeps every chunk a head lists and removes what is left of
 * sources no head names; uneven geometry is RIO_ENOTSUP with nothing
 * changed; hostile version 2 heads are RIO_EPROTO.
 */
/* T_TIMEOUT 180 */
/* T_LABELS net;ceph */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(rados_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS "--osds 1 --pool rio --pool rio2"
#include <pthread.h>

#include "core/engine.h"
#include "rados_util.h"
#include "transport/transport.h"

#define CS (1024u * 1024u) /* chunk size of every test object */

static struct rio_client *client(const char *extra)
{
    struct rio_options o;
    ru_opts(&o, CS, 4);
    return ru_client("rio", extra, &o);
}

/* Put key with n pattern bytes of seed. */
static void put(struct rio_client *c, const char *key, size_t n, uint64_t seed)
{
    uint8_t *b = ru_pattern(n, seed);
    T_EQ(rio_put(c, key, b, n, NULL, NULL), 0);
    free(b);
}

/* The parts' bytes one after the other (what the composed object holds). */
static uint8_t *expect(const size_t *sizes, const uint64_t *seeds, unsigned n, size_t *total)
{
    size_t t = 0, o = 0;
    for (unsigned i = 0; i < n; i++)
        t += sizes[i];
    uint8_t *b = malloc(t ? t : 1);
    T_TRUE(b != NULL);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *p = ru_pattern(sizes[i], seeds[i]);
        memcpy(b + o, p, sizes[i]);
        o += sizes[i];
        free(p);
    }
    *total = t;
    return b;
}

static int collect(void *arg, const void *data, size_t len)
{
    struct {
        uint8_t *b;
        size_t n;
    } *x = arg;
    memcpy(x->b + x->n, data, len);
    x->n += len;
    return 0;
}

/* key reads back as want[0..n), whole and from a few offsets. */
static void reads_back(struct rio_client *c, const char *key, const uint8_t *want, size_t n)
{
    uint8_t *got = malloc(n + 1);
    T_TRUE(got != NULL);
    T_EQ(rio_get(c, key, got, n + 1, NULL), (int64_t)n);
    T_TRUE(memcmp(got, want, n) == 0);
    const uint64_t offs[] = {1, CS - 1, CS, 2 * (uint64_t)CS + 12345, n - 1};
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        if (offs[i] >= n)
            continue;
        struct {
            uint8_t *b;
            size_t n;
        } x = {got, 0};
        T_EQ(rio_get_stream_at(c, key, offs[i], 2, collect, &x, NULL), (int64_t)(n - offs[i]));
        T_EQ(x.n, n - offs[i]);
        T_TRUE(memcmp(got, want + offs[i], x.n) == 0);
    }
    free(got);
}

static uint64_t chunks(const char *prefix)
{
    return ru_chunks("rio", prefix) + ru_chunks("rio2", prefix);
}

static void fsck(struct rio_client *c, uint64_t grace_s, struct rio_fsck_report *r)
{
    struct rio_fsck_args a = {.flags = RIO_FSCK_GRACE, .grace_ns = grace_s * 1000000000ull};
    T_EQ(rio_fsck(c, &a, r), 0);
}

static void head_starts(const char *key, const char *magic)
{
    size_t len = 0;
    char *h = ru_head("rio", key, &len);
    T_TRUE(len > strlen(magic) && memcmp(h, magic, strlen(magic)) == 0);
    free(h);
}

TEST(composed_object_reads_back_and_goes_whole)
{
    struct rio_client *c = client(NULL), *c2 = client("pools=rio,rio2");
    const char *keys[] = {"a/p1", "a/p2", "a/p3"};
    const size_t sizes[] = {2 * CS, 3 * CS, CS + CS / 2 + 7};
    const uint64_t seeds[] = {11, 12, 13};
    struct rio_desc d;
    struct rio_fsck_report r;
    size_t n;

    put(c, keys[0], sizes[0], seeds[0]);
    put(c2, keys[1], sizes[1], seeds[1]); /* over two pools */
    put(c, keys[2], sizes[2], seeds[2]);
    uint8_t *want = expect(sizes, seeds, 3, &n);
    T_EQ(chunks("a/"), 7);
    T_EQ(rio__compose(c, "a/obj", keys, NULL, 3, 0, 0, &d), 0);
    T_EQ(d.size, n);
    T_EQ(d.nchunks, 7);
    T_EQ(d.chunk_size, CS);
    T_TRUE(d.generation != 0);
    rio_desc_cleanup(&d);
    head_starts("a/obj", RIO_RADOS_HEAD_MAGIC2 "\n");
    /* The sources' heads are gone, their chunks are the object's. */
    T_EQ(ru_objects("rio", "a/p"), 0);
    T_EQ(chunks("a/"), 7);
    reads_back(c, "a/obj", want, n);
    reads_back(c2, "a/obj", want, n);
    T_EQ(rio_stat(c2, "a/obj", &d), 0);
    T_EQ(d.size, n);
    rio_desc_cleanup(&d);
    /* fsck, even with no grace, keeps every chunk the head lists. */
    fsck(c, 0, &r);
    T_EQ(r.removed, 0);
    T_EQ(chunks("a/"), 7);
    reads_back(c, "a/obj", want, n);
    /* Overwritten by a plain PUT: its chunks go, the new one's stay. */
    put(c, "a/obj", 2 * CS + 1, 14);
    head_starts("a/obj", RIO_RADOS_HEAD_MAGIC "\n");
    T_EQ(chunks("a/p"), 0);
    T_EQ(chunks("a/obj."), 3);
    /* A composed object over a composed object: the old one's chunks go. */
    put(c, keys[0], sizes[0], seeds[0]);
    put(c, keys[1], sizes[1], seeds[1]);
    T_EQ(rio__compose(c, "a/obj", keys, NULL, 2, 0, 0, &d), 0);
    rio_desc_cleanup(&d);
    T_EQ(chunks("a/obj."), 0);
    put(c, "a/q1", CS, 15);
    put(c, "a/q2", 5, 16);
    const char *qk[] = {"a/q1", "a/q2"};
    T_EQ(rio__compose(c, "a/obj", qk, NULL, 2, 0, 0, &d), 0);
    rio_desc_cleanup(&d);
    T_EQ(chunks("a/p"), 0);
    T_EQ(chunks("a/q"), 2);
    /* Deleted: every chunk it lists goes. */
    T_EQ(rio_delete(c, "a/obj"), 0);
    T_EQ(chunks("a/"), 0);
    T_EQ(ru_objects("rio", "a/"), 0);
    free(want);
    ru_idle(c);
    rio_client_destroy(c);
    rio_client_destroy(c2);
}

/* Put key with n pattern bytes of seed in chunks of cs bytes. */
static void put_chunked(struct rio_client *c, const char *key, size_t n, uint64_t cs, uint64_t seed)
{
    struct rio_writer *w = NULL;
    struct rio_desc d;
    uint8_t *b = ru_pattern(n, seed);

    T_EQ(rio__writer_open_chunk(c, key, n, cs, 0, NULL, &w), 0);
    T_EQ(rio_writer_write(w, b, n), 0);
    memset(&d, 0, sizeof(d));
    T_EQ(rio_writer_close(w, &d), 0);
    T_EQ(d.chunk_size, cs);
    rio_desc_cleanup(&d);
    free(b);
}

/* A last source of one chunk of its own size, no longer than the others'
 * chunk, is the object's last chunk (what the S3 gateway writes for a last
 * part): composed. One of several chunks of another size, or one chunk
 * longer than the others', is not. */
/* A condition on the composed object (the gateway's conditional Complete):
 * absent or a generation, refused (RIO_EGENERATION) with the object and
 * the sources as they were and nothing lent, met and composed. */
TEST(conditional_compose)
{
    struct rio_client *c = client(NULL);
    const char *keys[] = {"c/p1", "c/p2"};
    const size_t sizes[] = {2 * CS, CS + 9};
    const uint64_t seeds[] = {21, 22};
    struct rio_desc d, cur;
    size_t n;

    put(c, keys[0], sizes[0], seeds[0]);
    put(c, keys[1], sizes[1], seeds[1]);
    put(c, "c/obj", CS + 1, 23);
    T_EQ(rio_stat(c, "c/obj", &cur), 0);
    uint8_t *want = expect(sizes, seeds, 2, &n);
    T_EQ(rio__compose(c, "c/obj", keys, NULL, 2, 0, RIO__PUT_IF_ABSENT, &d), RIO_EGENERATION);
    T_EQ(rio__compose(c, "c/obj", keys, NULL, 2, 0, cur.generation + 1, &d), RIO_EGENERATION);
    T_EQ(ru_objects("rio", "c/p"), 2); /* the sources' heads */
    uint8_t *old = ru_pattern(CS + 1, 23);
    reads_back(c, "c/obj", old, CS + 1);
    free(old);
    T_EQ(rio__compose(c, "c/obj", keys, NULL, 2, 0, cur.generation, &d), 0);
    rio_desc_cleanup(&d);
    reads_back(c, "c/obj", want, n);
    T_EQ(rio_delete(c, "c/obj"), 0);
    put(c, keys[0], sizes[0], seeds[0]);
    put(c, keys[1], sizes[1], seeds[1]);
    T_EQ(rio__compose(c, "c/obj", keys, NULL, 2, 0, cur.generation, &d), RIO_EGENERATION);
    T_EQ(rio__compose(c, "c/obj", keys, NULL, 2, 0, RIO__PUT_IF_ABSENT, &d), 0);
    rio_desc_cleanup(&d);
    reads_back(c, "c/obj", want, n);
    T_EQ(rio_delete(c, "c/obj"), 0);
    T_EQ(chunks("c/"), 0);
    rio_desc_cleanup(&cur);
    free(want);
    rio_client_destroy(c);
}

TEST(last_source_of_one_chunk_composes)
{
    struct rio_client *c = client(NULL);
    struct rio_writer *w = NULL;
    const char *keys[] = {"l/p1", "l/p2"};
    const size_t sizes[] = {2 * CS, CS / 2 + 5};
    const uint64_t seeds[] = {31, 32};
    struct rio_desc d;
    size_t n;

    /* The writer's chunk size override is bounded. */
    T_EQ(rio__writer_open_chunk(c, "l/x", CS, 1024, 0, NULL, &w), RIO_EINVAL);
    T_EQ(rio__writer_open_chunk(c, "l/x", RIO_SIZE_UNKNOWN, CS, 0, NULL, &w), RIO_EINVAL);
    T_EQ(rio__writer_open_chunk(c, "l/x", CS, 2ull << 30, 0, NULL, &w), RIO_EINVAL);
    T_TRUE(w == NULL);

    put(c, keys[0], sizes[0], seeds[0]);
    put_chunked(c, keys[1], sizes[1], sizes[1], seeds[1]);
    uint8_t *want = expect(sizes, seeds, 2, &n);
    T_EQ(rio__compose(c, "l/obj", keys, NULL, 2, 0, 0, &d), 0);
    T_EQ(d.size, n);
    T_EQ(d.nchunks, 3);
    T_EQ(d.chunk_size, CS);
    rio_desc_cleanup(&d);
    head_starts("l/obj", RIO_RADOS_HEAD_MAGIC2 "\n");
    T_EQ(chunks("l/"), 3);
    reads_back(c, "l/obj", want, n);
    free(want);

    /* Alone, any chunk size is its own. */
    put_chunked(c, "l/q1", CS + 3, CS + 3, 33);
    const char *k1[] = {"l/q1"};
    T_EQ(rio__compose(c, "l/one", k1, NULL, 1, 0, 0, &d), 0);
    T_EQ(d.chunk_size, CS + 3);
    rio_desc_cleanup(&d);

    /* Last sources that do not end an object of chunk size CS. */
    put(c, "l/r1", CS, 34);
    put_chunked(c, "l/r2", CS / 2 + 10, CS / 4, 35); /* 3 chunks of another size */
    put_chunked(c, "l/r3", CS + 10, CS + 10, 36);    /* one chunk, longer */
    const char *k2[] = {"l/r1", "l/r2"}, *k3[] = {"l/r1", "l/r3"};
    T_EQ(rio__compose(c, "l/bad", k2, NULL, 2, 0, 0, &d), RIO_ENOTSUP);
    T_EQ(rio__compose(c, "l/bad", k3, NULL, 2, 0, 0, &d), RIO_ENOTSUP);
    T_EQ(rio_stat(c, "l/bad", &d), RIO_ENOTFOUND);
    const char *del[] = {"l/obj", "l/one", "l/r1", "l/r2", "l/r3"};
    for (size_t i = 0; i < sizeof(del) / sizeof(del[0]); i++)
        T_EQ(rio_delete(c, del[i]), 0);
    T_EQ(chunks("l/"), 0);
    rio_client_destroy(c);
}

TEST(uneven_geometry_is_not_composed)
{
    struct rio_client *c = client(NULL);
    struct rio_options o;
    struct rio_desc d;

    put(c, "u/p1", CS + CS / 2, 21); /* not a whole number of chunks */
    put(c, "u/p2", CS, 22);
    const char *k[] = {"u/p1", "u/p2"};
    T_EQ(rio__compose(c, "u/obj", k, NULL, 2, 0, 0, &d), RIO_ENOTSUP);
    T_EQ(rio_stat(c, "u/obj", &d), RIO_ENOTFOUND);
    T_EQ(ru_objects("rio", "u/p"), 2);
    /* Chunk sizes that differ. */
    ru_opts(&o, 2 * CS, 4);
    struct rio_client *c2 = ru_client("rio", NULL, &o);
    put(c2, "u/p3", 2 * CS, 23);
    const char *k2[] = {"u/p2", "u/p3"};
    T_EQ(rio__compose(c, "u/obj", k2, NULL, 2, 0, 0, &d), RIO_ENOTSUP);
    /* A source missing, a generation that is not the one expected, dst a source. */
    const char *k3[] = {"u/p2", "u/none"};
    T_EQ(rio__compose(c, "u/obj", k3, NULL, 2, 0, 0, &d), RIO_ENOTFOUND);
    const uint64_t gens[] = {1};
    T_EQ(rio__compose(c, "u/obj", k + 1, gens, 1, 0, 0, &d), RIO_EGENERATION);
    T_EQ(rio__compose(c, "u/p2", k + 1, NULL, 1, 0, 0, &d), RIO_EINVAL);
    T_EQ(ru_objects("rio", "u/p"), 3);
    T_EQ(chunks("u/"), 4);
    for (int i = 1; i <= 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "u/p%d", i);
        T_EQ(rio_delete(c, key), 0);
    }
    T_EQ(chunks("u/"), 0);
    rio_client_destroy(c2);
    rio_client_destroy(c);
}

/* A crash after the commit, before the sources' heads went: the sources'
 * own removal (an Abort) takes none of the lent chunks, and the compose
 * can be done again. */
TEST(sources_left_behind_take_nothing)
{
    struct rio_client *c = client(NULL);
    const char *keys[] = {"k/p1", "k/p2"};
    const size_t sizes[] = {2 * CS, CS / 3};
    const uint64_t seeds[] = {31, 32};
    struct rio_desc d;
    size_t n;

    put(c, keys[0], sizes[0], seeds[0]);
    put(c, keys[1], sizes[1], seeds[1]);
    uint8_t *want = expect(sizes, seeds, 2, &n);
    T_EQ(rio__compose(c, "k/obj", keys, NULL, 2, RIO_COMPOSE_KEEP_SOURCES, 0, &d), 0);
    rio_desc_cleanup(&d);
    T_EQ(ru_objects("rio", "k/p"), 2);
    /* Composed again (the Complete sent again): the same chunks. */
    T_EQ(rio__compose(c, "k/obj", keys, NULL, 2, RIO_COMPOSE_KEEP_SOURCES, 0, &d), 0);
    rio_desc_cleanup(&d);
    T_EQ(chunks("k/"), 3);
    reads_back(c, "k/obj", want, n);
    /* The sources deleted, replaced: the object keeps its chunks. */
    T_EQ(rio_delete(c, keys[0]), 0);
    put(c, keys[1], CS, 33);
    T_EQ(rio_delete(c, keys[1]), 0);
    reads_back(c, "k/obj", want, n);
    T_EQ(chunks("k/"), 3);
    T_EQ(rio_delete(c, "k/obj"), 0);
    T_EQ(chunks("k/"), 0);
    free(want);
    rio_client_destroy(c);
}

struct racer {
    const char *const *keys;
    int ret;
};

static void *race(void *arg)
{
    struct racer *x = arg;
    struct rio_client *c = client(NULL);
    struct rio_desc d;

    x->ret = rio__compose(c, "r/obj", x->keys, NULL, 3, 0, 0, &d);
    if (x->ret == 0)
        rio_desc_cleanup(&d);
    rio_client_destroy(c);
    return NULL;
}

/* Two composes of one upload at once (two gateways' Complete): one wins or
 * both do the same; the object is whole; fsck then leaves its chunks and
 * nothing else. */
TEST(concurrent_composes_leave_one_whole_object)
{
    struct rio_client *c = client(NULL);
    const char *keys[] = {"r/p1", "r/p2", "r/p3"};
    const size_t sizes[] = {3 * CS, 2 * CS, CS / 2};
    const uint64_t seeds[] = {41, 42, 43};
    struct rio_fsck_report r;
    size_t n;

    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 3; i++)
            put(c, keys[i], sizes[i], seeds[i]);
        uint8_t *want = expect(sizes, seeds, 3, &n);
        struct racer a = {.keys = keys}, b = {.keys = keys};
        pthread_t ta, tb;
        T_EQ(pthread_create(&ta, NULL, race, &a), 0);
        T_EQ(pthread_create(&tb, NULL, race, &b), 0);
        pthread_join(ta, NULL);
        pthread_join(tb, NULL);
        T_TRUE(a.ret == 0 || b.ret == 0);
        T_TRUE(a.ret == 0 || a.ret == RIO_ENOTFOUND || a.ret == RIO_EGENERATION);
        T_TRUE(b.ret == 0 || b.ret == RIO_ENOTFOUND || b.ret == RIO_EGENERATION);
        reads_back(c, "r/obj", want, n);
        T_EQ(ru_objects("rio", "r/p"), 0);
        T_EQ(chunks("r/"), 6);
        fsck(c, 0, &r);
        T_EQ(r.removed, 0);
        reads_back(c, "r/obj", want, n);
        T_EQ(rio_delete(c, "r/obj"), 0);
        free(want);
        /* A chunk the losing compose lent last is not the object's to
         * remove: what is left no head names, and fsck removes it. */
        fsck(c, 0, &r);
        T_EQ(chunks("r/"), 0);
    }
    rio_client_destroy(c);
}

/* An aborted upload whose parts' heads went but whose chunks stayed (an
 * Abort killed in the middle) next to a composed object: fsck removes the
 * leftovers, keeps the composed object's chunks and an upload's parts whose
 * heads exist. */
TEST(fsck_removes_leftovers_keeps_composed)
{
    struct rio_client *c = client(NULL);
    const char *keys[] = {"f/p1", "f/p2"};
    const size_t sizes[] = {CS, CS + 5};
    const uint64_t seeds[] = {51, 52};
    struct rio_fsck_report r;
    struct rio_desc d;
    size_t n;
    rados_t cl = ru_admin();
    rados_ioctx_t io;

    put(c, keys[0], sizes[0], seeds[0]);
    put(c, keys[1], sizes[1], seeds[1]);
    uint8_t *want = expect(sizes, seeds, 2, &n);
    T_EQ(rio__compose(c, "f/obj", keys, NULL, 2, 0, 0, &d), 0);
    rio_desc_cleanup(&d);
    put(c, "f/ab/p1", 2 * CS, 53);
    put(c, "f/ab/p2", CS, 54);
    put(c, "f/live/p1", 2 * CS, 55); /* an upload in progress: its part's head exists */
    T_EQ(rados_ioctx_create(cl, "rio", &io), 0);
    T_EQ(rados_remove(io, "f/ab/p1"), 0);
    T_EQ(rados_remove(io, "f/ab/p2"), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    T_EQ(chunks("f/"), 3 + 3 + 2);
    /* With the default grace the leftovers are young: kept. */
    fsck(c, 3600, &r);
    T_EQ(r.removed, 0);
    T_EQ(r.young, 3);
    fsck(c, 0, &r);
    T_EQ(r.removed, 3);
    T_EQ(chunks("f/ab/"), 0);
    T_EQ(chunks("f/p"), 3);
    T_EQ(chunks("f/live/"), 2);
    reads_back(c, "f/obj", want, n);
    T_EQ(rio_delete(c, "f/obj"), 0);
    T_EQ(rio_delete(c, "f/live/p1"), 0);
    T_EQ(chunks("f/"), 0);
    free(want);
    rio_client_destroy(c);
}

/* A composed head whose rio.gen is missing or names another generation
 * (a GET reads its text only, so the object still reads back): fsck keeps
 * every chunk it lists (it removed them all: they carry the parts' keys,
 * whose heads are gone). One that says version 2 and does not parse (its
 * last line cut) fails the run with RIO_EPROTO and removes nothing (it
 * removed them all too, and the head could no longer be repaired). */
TEST(fsck_keeps_composed_chunks_whatever_its_head_says)
{
    struct rio_client *c = client(NULL);
    const char *keys[] = {"g/p1", "g/p2"};
    const size_t sizes[] = {2 * CS, CS + 7};
    const uint64_t seeds[] = {61, 62};
    struct rio_fsck_report r;
    struct rio_fsck_args a = {.flags = RIO_FSCK_GRACE, .grace_ns = 0};
    struct rio_desc d;
    size_t n, hlen;
    char gen[17];
    rados_t cl = ru_admin();
    rados_ioctx_t io;

    put(c, keys[0], sizes[0], seeds[0]);
    put(c, keys[1], sizes[1], seeds[1]);
    uint8_t *want = expect(sizes, seeds, 2, &n);
    T_EQ(rio__compose(c, "g/obj", keys, NULL, 2, 0, 0, &d), 0);
    rio_desc_cleanup(&d);
    T_EQ(chunks("g/"), 4);
    T_EQ(rados_ioctx_create(cl, "rio", &io), 0);
    T_EQ(rados_getxattr(io, "g/obj", RIO_RADOS_GEN_XATTR, gen, 16), 16);
    gen[16] = '\0';
    for (int v = 0; v < 2; v++) {
        if (v)
            T_EQ(rados_setxattr(io, "g/obj", RIO_RADOS_GEN_XATTR, "00000000000000bb", 16), 0);
        else
            T_EQ(rados_rmxattr(io, "g/obj", RIO_RADOS_GEN_XATTR), 0);
        reads_back(c, "g/obj", want, n);
        T_EQ(rio_fsck(c, &a, &r), 0);
        T_EQ(r.removed, 0);
        T_EQ(chunks("g/"), 4);
        reads_back(c, "g/obj", want, n);
    }
    T_EQ(rados_setxattr(io, "g/obj", RIO_RADOS_GEN_XATTR, gen, 16), 0);
    char *h = ru_head("rio", "g/obj", &hlen);
    T_TRUE(hlen > 4 && memcmp(h + hlen - 4, "end\n", 4) == 0);
    T_EQ(rados_write_full(io, "g/obj", h, hlen - 4), 0);
    T_ERR(rio_fsck(c, &a, &r), RIO_EPROTO);
    T_TRUE(strstr(rio_error_detail(), "g/obj") != NULL);
    T_EQ(chunks("g/"), 4);
    T_EQ(rados_write_full(io, "g/obj", h, hlen), 0);
    free(h);
    reads_back(c, "g/obj", want, n);
    T_EQ(rio_fsck(c, &a, &r), 0);
    T_EQ(r.removed, 0);
    T_EQ(rio_delete(c, "g/obj"), 0);
    T_EQ(chunks("g/"), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    free(want);
    rio_client_destroy(c);
}

/* A composed head whose first line says a version this railio does not
 * read (a newer railio's, which may list any key's chunks as version 2
 * does, or a damaged magic): fsck fails with RIO_EPROTO naming it and
 * removes nothing. It read the head as version 1 (its chunks derived from
 * its own key) and removed every chunk it lists. */
TEST(fsck_refuses_a_head_version_it_does_not_read)
{
    struct rio_client *c = client(NULL);
    const char *keys[] = {"v/p1", "v/p2"};
    const size_t sizes[] = {CS, CS + 9};
    const uint64_t seeds[] = {71, 72};
    struct rio_fsck_report r;
    struct rio_fsck_args a = {.flags = RIO_FSCK_GRACE, .grace_ns = 0};
    struct rio_desc d;
    size_t n, hlen;
    rados_t cl = ru_admin();
    rados_ioctx_t io;

    put(c, keys[0], sizes[0], seeds[0]);
    put(c, keys[1], sizes[1], seeds[1]);
    uint8_t *want = expect(sizes, seeds, 2, &n);
    T_EQ(rio__compose(c, "v/obj", keys, NULL, 2, 0, 0, &d), 0);
    rio_desc_cleanup(&d);
    T_EQ(chunks("v/"), 3);
    T_EQ(rados_ioctx_create(cl, "rio", &io), 0);
    char *h = ru_head("rio", "v/obj", &hlen);
    T_TRUE(hlen > 20 && memcmp(h, "railio-rados-head 2\n", 20) == 0);
    static const char *const magic[] = {"railio-rados-head 3", "railio-rados-heaf 2", "x"};
    for (size_t i = 0; i < sizeof(magic) / sizeof(magic[0]); i++) {
        size_t ml = strlen(magic[i]);
        char *m = malloc(hlen + ml);
        memcpy(m, magic[i], ml);
        memcpy(m + ml, h + 19, hlen - 19);
        T_EQ(rados_write_full(io, "v/obj", m, hlen - 19 + ml), 0);
        free(m);
        T_ERR(rio_fsck(c, &a, &r), RIO_EPROTO);
        T_TRUE(strstr(rio_error_detail(), "v/obj") != NULL);
        T_EQ(chunks("v/"), 3);
    }
    T_EQ(rados_write_full(io, "v/obj", h, hlen), 0);
    free(h);
    T_EQ(rio_fsck(c, &a, &r), 0);
    T_EQ(r.removed, 0);
    reads_back(c, "v/obj", want, n);
    T_EQ(rio_delete(c, "v/obj"), 0);
    T_EQ(chunks("v/"), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    free(want);
    rio_client_destroy(c);
}

/* Write text as the head of key (and its rio.gen). */
static void raw_head(const char *key, const char *text)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;

    T_EQ(rados_ioctx_create(cl, "rio", &io), 0);
    T_EQ(rados_write_full(io, key, text, strlen(text)), 0);
    T_EQ(rados_setxattr(io, key, RIO_RADOS_GEN_XATTR, "00000000000000aa", 16), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
}

#define V2_TOP(key, nch)                                                                           \
    "railio-rados-head 2\nkey " key "\ngeneration 00000000000000aa\nsize " #nch "000"              \
    "\nchunk_size 4096\nnchunks " #nch "\netag -\nnamespace rio.chunk\npools 1\npool 0 rio\n"
#define NAME_A "x.00000000000000bb.0000000000000000"

TEST(hostile_v2_heads_are_refused)
{
    struct rio_client *c = client(NULL);
    struct rio_desc d;
    static char big[8192];
    static const struct {
        const char *key, *text;
    } bad[] = {
        {"h/notname", V2_TOP("h/notname", 1) "chunk 0 0 0000000000000001 foo\nend\n"},
        {"h/gen0", V2_TOP("h/gen0", 1) "chunk 0 0 0000000000000001 x.0000000000000000."
                                       "0000000000000000\nend\n"},
        {"h/upper", V2_TOP("h/upper", 1) "chunk 0 0 0000000000000001 x.00000000000000BB."
                                         "0000000000000000\nend\n"},
        {"h/nul", V2_TOP("h/nul", 1) "chunk 0 0 0000000000000001 x%00.00000000000000bb."
                                     "0000000000000000\nend\n"},
        {"h/space", V2_TOP("h/space", 1) "chunk 0 0 0000000000000001 x y.00000000000000bb."
                                         "0000000000000000\nend\n"},
        {"h/nokey", V2_TOP("h/nokey", 1) "chunk 0 0 0000000000000001 .00000000000000bb."
                                         "0000000000000000\nend\n"},
        {"h/count", V2_TOP("h/count", 2) "chunk 0 0 0000000000000001 " NAME_A "\nend\n"},
        {"h/fewer",
         "railio-rados-head 2\nkey h/fewer\ngeneration 00000000000000aa\nsize 5000\nchunk_size "
         "4096\nnchunks 2\netag -\nnamespace rio.chunk\npools 1\npool 0 rio\nchunk 0 0 "
         "0000000000000001 " NAME_A "\nend\n"},
        {"h/more", V2_TOP("h/more", 1) "chunk 0 0 0000000000000001 " NAME_A
                                       "\nchunk 1 0 0000000000000001 " NAME_A "\nend\n"},
        {"h/index", V2_TOP("h/index", 1) "chunk 1 0 0000000000000001 " NAME_A "\nend\n"},
        {"h/pool", V2_TOP("h/pool", 1) "chunk 0 1 0000000000000001 " NAME_A "\nend\n"},
        {"h/v3", "railio-rados-head 3\nkey h/v3\n"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        raw_head(bad[i].key, bad[i].text);
        T_EQ(rio_stat(c, bad[i].key, &d), RIO_EPROTO);
    }
    /* A name longer than any key allows. */
    int o = snprintf(big, sizeof(big), V2_TOP("h/long", 1) "chunk 0 0 0000000000000001 ");
    memset(big + o, 'k', RIO_KEY_MAX + 1);
    o += RIO_KEY_MAX + 1;
    snprintf(big + o, sizeof(big) - (size_t)o, ".00000000000000bb.0000000000000000\nend\n");
    raw_head("h/long", big);
    T_EQ(rio_stat(c, "h/long", &d), RIO_EPROTO);
    /* The same, well formed, is a head (its chunk missing: a GET fails). */
    raw_head("h/good", V2_TOP("h/good", 1) "chunk 0 0 0000000000000001 " NAME_A "\nend\n");
    T_EQ(rio_stat(c, "h/good", &d), 0);
    T_EQ(d.size, 1000);
    rio_desc_cleanup(&d);
    char b[1000];
    T_TRUE(rio_get(c, "h/good", b, sizeof(b), NULL) < 0);
    rio_client_destroy(c);
}

#endif
