/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio fsck rados://POOL against the harness cluster: real orphans (chunk
 * objects written with librados under a replaced generation and under a key
 * with no head, and the chunks of a `railio put` killed with -9 in the
 * middle of a streamed PUT) are removed, exactly them; an upload in progress
 * (a rio_writer left open, its first chunks older than the grace, its last
 * ones fresh) keeps every chunk and commits afterwards; objects that are no
 * chunk of railio's stay; every committed object reads back byte-exact; a
 * second fsck finds nothing. A head committed while fsck runs keeps its
 * generation (the head is read again before a generation goes); a commit
 * after a stall finds its chunks gone and fails cleanly. Other schemes are
 * refused.
 */
/* T_TIMEOUT 120 */
/* T_LABELS net;ceph */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(rados_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS "--osds 1 --pool rio --pool rio2 --pool rio3"
#include <signal.h>
#include <unistd.h>

#include "rados_util.h"

/* Write one object with librados into pool's namespace ns. */
static void raw_put(const char *pool, const char *ns, const char *name, size_t n, uint64_t seed)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    uint8_t *b = ru_pattern(n, seed);

    T_EQ(rados_ioctx_create(cl, pool, &io), 0);
    rados_ioctx_set_namespace(io, ns);
    T_EQ(rados_write_full(io, name, (const char *)b, n), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    free(b);
}

static uint64_t chunks_both(const char *prefix)
{
    return ru_chunks("rio", prefix) + ru_chunks("rio2", prefix);
}

/* Kill -9 a `railio put ... -` once 3 full chunks of its stream landed. */
static uint64_t killed_writer(void)
{
    char cmd[4096], pidf[1024], sleepf[1024];
    const char *bdir = getenv("T_BUILD_DIR");

    snprintf(pidf, sizeof(pidf), "%s/killed.pid", t_ceph_dir());
    snprintf(sleepf, sizeof(sleepf), "%s/killed-feed.pid", t_ceph_dir());
    snprintf(cmd, sizeof(cmd),
             "(head -c 3145728 /dev/zero; sleep 60 & echo $! >'%s'; wait) | RIO_CEPH_CONF='%s' "
             "'%s/railio' put 'rados://rio/killed?chunk=1M&pools=rio,rio2' - >/dev/null 2>&1 & "
             "echo $! >'%s'",
             sleepf, t_ceph_conf(), bdir, pidf);
    T_EQ(system(cmd), 0);
    int pid = t_read_int(pidf);
    T_GT(pid, 0);
    uint64_t t0 = t_now_ms();
    while (chunks_both("killed.") < 3) {
        if (t_now_ms() - t0 > 30000)
            T_FAIL("the streamed PUT wrote %" PRIu64 " chunks in 30 s", chunks_both("killed."));
        t_sleep_ms(20);
    }
    T_EQ(kill(pid, SIGKILL), 0);
    int feed = t_read_int(sleepf);
    if (feed > 0)
        kill(feed, SIGTERM);
    t_sleep_ms(200);
    T_EQ(ru_objects("rio", "killed"), 0); /* no head */
    return chunks_both("killed.");
}

/* Wait until n chunks of prefix exist (the writer sends each as it fills). */
static void wait_chunks(const char *prefix, uint64_t n)
{
    uint64_t t0 = t_now_ms();
    while (chunks_both(prefix) < n) {
        if (t_now_ms() - t0 > 20000)
            T_FAIL("%" PRIu64 " chunks of %s, not %" PRIu64, chunks_both(prefix), prefix, n);
        t_sleep_ms(10);
    }
}

TEST(fsck_removes_exactly_the_orphans)
{
    const char *bdir = getenv("T_BUILD_DIR");
    char out[1024], name[512];
    struct rio_options o;
    const size_t live_n = 4 * RU_MIB + 100;

    if (!bdir)
        T_SKIP("T_BUILD_DIR not set (run through ctest)");
    t_ceph_conf();
    ru_opts(&o, RU_MIB, 4);
    struct rio_client *c = ru_client("rio", "pools=rio,rio2", &o);

    /* Committed objects: several chunks over both pools, one replaced, an
     * empty one, a key with dots. */
    t_put_pattern(c, "obj/a", 3 * RU_MIB + 5, 1);
    t_put_pattern(c, "obj/b", 2 * RU_MIB, 2);
    t_put_pattern(c, "obj/b", RU_MIB + 7, 3);
    t_put_pattern(c, "obj/empty", 0, 4);
    t_put_pattern(c, "obj/d.e.f", 5000, 5);
    uint64_t committed = chunks_both("obj/");
    T_EQ(committed, 4u + 2u + 0u + 1u);

    /* Orphans: a generation of obj/a no head names, a key with no head. */
    for (unsigned i = 0; i < 2; i++) {
        rio__rados_chunk_name(name, sizeof(name), "obj/a", 0x1234567890abcdefull, i);
        raw_put(i ? "rio2" : "rio", RIO_RADOS_CHUNK_NS, name, 1000 + i, 10 + i);
    }
    for (unsigned i = 0; i < 3; i++) {
        rio__rados_chunk_name(name, sizeof(name), "gone/k.x", 0x42ull, i);
        raw_put("rio2", RIO_RADOS_CHUNK_NS, name, 2000, 20 + i);
    }
    /* Not railio's chunk names: left alone. */
    raw_put("rio", RIO_RADOS_CHUNK_NS, "foreign-object", 10, 30);
    raw_put("rio", RIO_RADOS_CHUNK_NS, "x.0000000000000000.0000000000000001", 10, 31);
    raw_put("rio", RIO_RADOS_CHUNK_NS, "y.000000000000000G.0000000000000001", 10, 32);
    raw_put("rio", "", "plain-object", 10, 33);
    uint64_t killed = killed_writer();

    /* An upload in progress: two chunks now (older than the grace when fsck
     * runs), two more just before it. */
    uint8_t *live = ru_pattern(live_n, 40);
    struct rio_writer *w;
    T_OK(rio_writer_open(c, "live/obj", RIO_SIZE_UNKNOWN, 0, NULL, &w));
    T_OK(rio_writer_write(w, live, 2 * RU_MIB + 50));
    wait_chunks("live/obj.", 2);

    t_sleep_ms(4200); /* everything above is now older than --grace 3s */
    T_OK(rio_writer_write(w, live + 2 * RU_MIB + 50, 2 * RU_MIB));
    wait_chunks("live/obj.", 4);
    uint64_t live_chunks = chunks_both("live/obj.");
    uint64_t orphans = 2 + 3 + killed;

    /* --dry-run --grace 0: every orphan, the live upload's too, would go;
     * nothing goes. */
    T_EQ(ru_railio(out, sizeof(out),
                   "fsck --dry-run --grace 0 -v --json rados://rio?pools=rio,rio2"),
         0);
    T_EQ(ru_lines_with(out, "\"type\":\"fsck_chunk\"", "\"verdict\":\"would-remove\""),
         orphans + live_chunks);
    T_EQ(ru_lines_with(out, "\"verdict\":\"would-remove\"", "\"key\":\"live/obj\""), live_chunks);
    snprintf(name, sizeof(name), "\"orphans\":%" PRIu64 ",", orphans + live_chunks);
    T_EQ(ru_lines_with(out, "\"type\":\"fsck_summary\"", name), 1u);
    T_EQ(ru_lines_with(out, "\"type\":\"fsck_summary\"", "\"heads\":4,"), 1u);
    T_EQ(ru_lines_with(out, "\"type\":\"fsck_summary\"", "\"foreign\":3,\"index_entries\":0,"), 1u);
    T_EQ(ru_lines_with(out, "\"type\":\"fsck_summary\"", "\"index\":\"none\""), 1u);
    /* --dry-run --index on a pool without a key index says so (it used to
     * say nothing of the index), and builds nothing. */
    T_EQ(ru_railio(out, sizeof(out), "fsck --dry-run --index rados://rio?pools=rio,rio2"), 0);
    T_EQ(ru_lines_with(out, "fsck: key index: none; --index without --dry-run builds one", NULL),
         1u);
    T_EQ(ru_railio(out, sizeof(out), "fsck --dry-run --json rados://rio?pools=rio,rio2"), 0);
    T_EQ(ru_lines_with(out, "\"type\":\"fsck_summary\"", "\"index\":\"none\""), 1u);
    T_EQ(chunks_both("killed."), killed);
    T_EQ(chunks_both("gone/"), 3u);
    T_EQ(chunks_both("live/obj."), live_chunks);

    /* --grace 3s: the orphans go, the live upload (newest chunk fresh) stays. */
    T_EQ(ru_railio(out, sizeof(out), "fsck --grace 3s -v rados://rio?pools=rio,rio2"), 0);
    T_EQ(ru_lines_with(out, "removed rio", NULL), orphans);
    T_EQ(ru_lines_with(out, "railio fsck: a grace under 60 s", NULL), 1u);
    T_EQ(ru_lines_with(out, "young rio", "live/obj."), live_chunks);
    snprintf(name, sizeof(name), "%" PRIu64 " orphans: %" PRIu64 " removed", orphans + live_chunks,
             orphans);
    T_EQ(ru_lines_with(out, "fsck: 4 heads, ", name), 1u);
    T_EQ(chunks_both("killed."), 0u);
    T_EQ(chunks_both("gone/"), 0u);
    T_EQ(chunks_both("obj/"), committed);
    T_EQ(chunks_both("live/obj."), live_chunks);
    T_EQ(ru_chunks("rio", "foreign-object"), 1u);
    T_EQ(ru_chunks("rio", "x.0000000000000000"), 1u);
    T_EQ(ru_chunks("rio", "y.000000000000000G"), 1u);
    T_EQ(ru_objects("rio", "plain-object"), 1u);

    /* The upload goes on and commits; everything reads back. */
    T_OK(rio_writer_write(w, live + 4 * RU_MIB + 50, live_n - 4 * RU_MIB - 50));
    T_OK(rio_writer_close(w, NULL));
    t_get_check(c, "live/obj", live_n, 40);
    t_get_check(c, "obj/a", 3 * RU_MIB + 5, 1);
    t_get_check(c, "obj/b", RU_MIB + 7, 3);
    t_get_check(c, "obj/empty", 0, 4);
    t_get_check(c, "obj/d.e.f", 5000, 5);
    free(live);

    /* A second fsck, no grace: nothing left to find. */
    T_EQ(ru_railio(out, sizeof(out), "fsck --grace 0 --json rados://rio?pools=rio,rio2"), 0);
    T_EQ(ru_lines_with(out, "\"type\":\"fsck_summary\"", "\"orphans\":0,"), 1u);
    T_EQ(ru_lines_with(out, "\"type\":\"fsck_summary\"", "\"heads\":5,"), 1u);
    T_EQ(chunks_both("obj/"), committed);
    ru_idle(c);
    rio_client_destroy(c);
}

struct raced {
    unsigned calls, removed, raced;
};

/* The first orphan reported (one of aa/kNN's, judged in fsck's first batch
 * of generations) is the moment a writer commits zz/k's generation (judged
 * in the second batch): a head written here with librados, rio.gen naming
 * it. */
static void raced_each(void *arg, const struct rio_fsck_item *it)
{
    struct raced *x = arg;

    if (x->calls++ == 0) {
        T_EQ(strncmp(it->key, "aa/k", 4), 0);
        rados_t cl = ru_admin();
        rados_ioctx_t io;
        char gen[17];
        T_EQ(rados_ioctx_create(cl, "rio3", &io), 0);
        /* A version 1 first line: a head of another version (or of
         * none) fails the run, which chunks it keeps not known. */
        static const char text[] = "railio-rados-head 1\nthe rest not parsed by fsck\n";
        T_EQ(rados_write_full(io, "zz/k", text, sizeof(text) - 1), 0);
        snprintf(gen, sizeof(gen), "%016" PRIx64, (uint64_t)0x2222);
        T_EQ(rados_setxattr(io, "zz/k", RIO_RADOS_GEN_XATTR, gen, 16), 0);
        rados_ioctx_destroy(io);
        rados_shutdown(cl);
    }
    x->removed += it->verdict == RIO_FSCK_REMOVED;
    x->raced += it->verdict == RIO_FSCK_RACED && !strcmp(it->key, "zz/k");
}

TEST(fsck_keeps_a_generation_committed_meanwhile)
{
    char name[256];
    struct raced x = {0};
    struct rio_fsck_args a = {.flags = RIO_FSCK_GRACE, .each = raced_each, .arg = &x};
    struct rio_fsck_report r;

    t_ceph_conf();
    struct rio_client *c = ru_client("rio3", NULL, NULL);
    /* fsck judges 64 generations at a time: the 64 of aa/kNN first. */
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    T_EQ(rados_ioctx_create(cl, "rio3", &io), 0);
    rados_ioctx_set_namespace(io, RIO_RADOS_CHUNK_NS);
    for (unsigned i = 0; i < 64; i++) {
        char key[16], body[100] = {0};
        snprintf(key, sizeof(key), "aa/k%02u", i);
        rio__rados_chunk_name(name, sizeof(name), key, 0x1111, 0);
        T_EQ(rados_write_full(io, name, body, sizeof(body)), 0);
    }
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    for (unsigned i = 0; i < 2; i++) {
        rio__rados_chunk_name(name, sizeof(name), "zz/k", 0x2222, i);
        raw_put("rio3", RIO_RADOS_CHUNK_NS, name, 100, 2 + i);
    }
    T_OK(rio_fsck(c, &a, &r));
    T_EQ(x.calls, 66u);
    T_EQ(x.removed, 64u);
    T_EQ(x.raced, 2u);
    T_EQ(r.orphans, 66u);
    T_EQ(r.removed, 64u);
    T_EQ(r.bytes_freed, 6400u);
    T_EQ(r.raced, 2u);
    T_EQ(r.errors, 0u);
    T_EQ(ru_chunks("rio3", "aa/k"), 0u);
    T_EQ(ru_chunks("rio3", "zz/k."), 2u);
    /* Now the head names them: a second pass finds no orphan. */
    T_OK(rio_fsck(c, &(struct rio_fsck_args){.flags = RIO_FSCK_GRACE}, &r));
    T_EQ(r.heads, 1u);
    T_EQ(r.chunks, 2u);
    T_EQ(r.orphans, 0u);
    rio_client_destroy(c);
}

/* Remove every chunk object of pool whose name starts with prefix (what a
 * fsck with too short a grace does to a stalled upload); how many. */
static unsigned remove_chunks_of(const char *pool, const char *prefix)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    rados_list_ctx_t lc;
    const char *entry;
    char names[16][256];
    unsigned n = 0;

    T_EQ(rados_ioctx_create(cl, pool, &io), 0);
    rados_ioctx_set_namespace(io, RIO_RADOS_CHUNK_NS);
    T_EQ(rados_nobjects_list_open(io, &lc), 0);
    while (n < 16 && rados_nobjects_list_next(lc, &entry, NULL, NULL) == 0)
        if (strncmp(entry, prefix, strlen(prefix)) == 0)
            snprintf(names[n++], sizeof(names[0]), "%s", entry);
    rados_nobjects_list_close(lc);
    for (unsigned i = 0; i < n; i++)
        T_EQ(rados_remove(io, names[i]), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    return n;
}

/*
 * An upload whose source stalls longer than stall_check checks at commit
 * that its chunks are all still there: one whose chunks are intact commits;
 * one whose first chunks were removed while it stalled fails with
 * RIO_EGENERATION, publishes nothing and leaves no chunk. The stall is in
 * the middle (the last chunk lands just before the commit).
 */
TEST(commit_after_a_stall_checks_its_chunks)
{
    struct rio_options o;
    const size_t n = 3 * RU_MIB + 9, first = 2 * RU_MIB + 3;
    struct rio_writer *kept, *lost;
    struct rio_desc d;

    t_ceph_conf();
    ru_opts(&o, RU_MIB, 4);
    struct rio_client *c = ru_client("rio3", "stall_check=1s", &o);
    uint8_t *src = ru_pattern(n, 50);
    T_OK(rio_writer_open(c, "stall/kept", RIO_SIZE_UNKNOWN, 0, NULL, &kept));
    T_OK(rio_writer_open(c, "stall/lost", RIO_SIZE_UNKNOWN, 0, NULL, &lost));
    T_OK(rio_writer_write(kept, src, first));
    T_OK(rio_writer_write(lost, src, first));
    uint64_t t0 = t_now_ms();
    while (ru_chunks("rio3", "stall/kept.") < 2 || ru_chunks("rio3", "stall/lost.") < 2) {
        if (t_now_ms() - t0 > 20000)
            T_FAIL("the writers' first chunks did not land");
        t_sleep_ms(10);
    }
    T_EQ(remove_chunks_of("rio3", "stall/lost."), 2u);
    t_sleep_ms(1300);
    T_OK(rio_writer_write(kept, src + first, n - first));
    T_OK(rio_writer_close(kept, NULL));
    t_get_check(c, "stall/kept", n, 50);
    T_OK(rio_writer_write(lost, src + first, n - first));
    T_ERR(rio_writer_close(lost, NULL), RIO_EGENERATION);
    T_TRUE(strstr(rio_error_detail(), "is gone") != NULL);
    T_ERR(rio_stat(c, "stall/lost", &d), RIO_ENOTFOUND);
    T_EQ(ru_chunks("rio3", "stall/lost."), 0u);
    free(src);
    ru_idle(c);
    rio_client_destroy(c);
}

/* Other schemes have no chunk objects: refused before anything is opened;
 * through the library, RIO_ENOTSUP. A pool that does not exist: not found. */
/* Set (val) or remove (NULL) rio.gen of key's head, as anyone who can
 * write the pool can. */
static void head_gen_xattr(const char *pool, const char *key, const char *val)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;

    T_EQ(rados_ioctx_create(cl, pool, &io), 0);
    if (val)
        T_EQ(rados_setxattr(io, key, RIO_RADOS_GEN_XATTR, val, strlen(val)), 0);
    else
        T_EQ(rados_rmxattr(io, key, RIO_RADOS_GEN_XATTR), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
}

/* A head whose rio.gen is missing or names another generation than its
 * text (what GET reads): fsck keeps the key's chunks and counts errors
 * (it removed the chunks GET served, and the object was lost); an
 * overwrite or a delete fails with RIO_EPROTO naming rio.gen (it tried 64
 * times and said "server error (retryable)"). */
TEST(head_gen_xattr_disagreeing_keeps_the_chunks)
{
    struct rio_options o;
    struct rio_fsck_report r;
    struct rio_fsck_args a = {.flags = RIO_FSCK_GRACE, .grace_ns = 0};

    t_ceph_conf();
    ru_opts(&o, RU_MIB, 4);
    struct rio_client *c = ru_client("rio3", "", &o);
    for (int v = 0; v < 2; v++) {
        const char *key = v ? "victim-other" : "victim-none";
        t_put_pattern(c, key, 3 * RU_MIB, 40 + v);
        head_gen_xattr("rio3", key, v ? "00000000000000bb" : NULL);
        T_OK(rio_fsck(c, &a, &r));
        T_EQ(r.removed, 0u);
        T_GE(r.errors, 3u);
        T_EQ(ru_chunks("rio3", key), 3u);
        t_get_check(c, key, 3 * RU_MIB, 40 + v);
        T_ERR(rio_delete(c, key), RIO_EPROTO);
        T_TRUE(strstr(rio_error_detail(), "rio.gen") != NULL);
        uint8_t x = 1;
        T_ERR(rio_put(c, key, &x, 1, NULL, NULL), RIO_EPROTO);
        t_get_check(c, key, 3 * RU_MIB, 40 + v);
    }
    rio_client_destroy(c);
}

/* A head whose chunk_size no RADOS read returns (5 GiB; one chunk of a
 * 1 MiB object): RIO_EPROTO that says so (it was librados's EDOM,
 * "numerical argument out of domain"). */
TEST(head_chunk_size_past_a_read_refused)
{
    struct rio_options o;
    size_t len;

    t_ceph_conf();
    ru_opts(&o, RU_MIB, 4);
    struct rio_client *c = ru_client("rio3", "", &o);
    t_put_pattern(c, "bigchunk", RU_MIB, 50);
    char *h = ru_head("rio3", "bigchunk", &len);
    char *at = strstr(h, "\nchunk_size 1048576\n");
    T_NOTNULL(at);
    size_t head = (size_t)(at - h), tail = len - head - strlen("\nchunk_size 1048576\n");
    char *n = malloc(len + 16);
    memcpy(n, h, head);
    int k = sprintf(n + head, "\nchunk_size 5368709120\n");
    memcpy(n + head + (size_t)k, at + strlen("\nchunk_size 1048576\n"), tail);
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    T_EQ(rados_ioctx_create(cl, "rio3", &io), 0);
    T_EQ(rados_write_full(io, "bigchunk", n, head + (size_t)k + tail), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    free(n);
    free(h);
    rio_client_destroy(c);
    c = ru_client("rio3", "", &o); /* no cached head */
    uint8_t *dst = malloc(RU_MIB);
    T_ERR(rio_get(c, "bigchunk", dst, RU_MIB, NULL), RIO_EPROTO);
    T_TRUE(strstr(rio_error_detail(), "chunk_size 5368709120") != NULL);
    free(dst);
    rio_client_destroy(c);
}

TEST(fsck_refuses_other_schemes)
{
    char out[1024];
    struct rio_client *c;
    struct rio_fsck_args a = {0};
    struct rio_fsck_report r;

    if (!getenv("T_BUILD_DIR"))
        T_SKIP("T_BUILD_DIR not set (run through ctest)");
    t_ceph_conf();
    T_EQ(ru_railio(out, sizeof(out), "fsck file:///tmp"), 2);
    T_EQ(ru_lines_with(out, "only rados:// URLs have chunk objects to check", NULL), 1u);
    T_EQ(ru_railio(out, sizeof(out), "fsck --grace 10 rados://rio"), 2);
    T_EQ(ru_railio(out, sizeof(out), "fsck rados://rio/some/key"), 2);
    T_EQ(ru_railio(out, sizeof(out), "fsck rados://no-such-pool"), 3);
    T_OK(rio_client_new("mock://fsck", NULL, &c));
    T_ERR(rio_fsck(c, &a, &r), RIO_ENOTSUP);
    a.reserved[0] = 1;
    T_ERR(rio_fsck(c, &a, &r), RIO_EINVAL);
    rio_client_destroy(c);
}

#endif
