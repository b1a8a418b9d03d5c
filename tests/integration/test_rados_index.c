/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados:// key index (docs/rados.md "The key index") against the harness
 * cluster. Two pools hold the same keys, one indexed by `fsck --index`:
 * every listing (prefix, delimiter, start_after, tokens, page sizes) of the
 * indexed pool comes from the index and equals the scan of the other.
 * Writers keep it: after PUTs, overwrites, deletes, refused conditions,
 * aborted uploads, compose, racing writers of one key and an index built
 * while a writer writes, every head has its entry (fsck finds none to add)
 * and no entry of a generation that is no head stays behind (but a crash's).
 * An entry of no head is skipped by listings and swept by fsck once old; a
 * marker railio does not read refuses writes and listings.
 */
/* T_TIMEOUT 240 */
/* T_LABELS net;ceph */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(rados_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS                                                                                \
    "--osds 1 --pool ix --pool sc --pool iy --pool iz --pool iw --pool iu --pool iv --pool it "    \
    "--pool is --pool ir"
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "rados_util.h"

/* The layout, as docs/rados.md "The key index" gives it. */
#define IDX_NS "rio.index"
#define IDX_MARKER "index"
#define IDX_SHARDS 8u

#define FAST "index_recheck=50ms&abort_timeout=2&timeout=1"

static struct rio_client *ix_client(const char *pool)
{
    struct rio_options o;
    ru_opts(&o, 64 * RU_KIB, 4);
    return ru_client(pool, FAST, &o);
}

static struct rio_fsck_report fsck(struct rio_client *c, unsigned flags)
{
    struct rio_fsck_report r;
    struct rio_fsck_args a = {.flags = flags | RIO_FSCK_GRACE, .grace_ns = 0};
    T_OK(rio_fsck(c, &a, &r));
    return r;
}

/* A client of pool, which fsck gives an index (empty: the pool has no key). */
static struct rio_client *indexed_client(const char *pool)
{
    struct rio_client *c = ix_client(pool);
    struct rio_fsck_report r = fsck(c, RIO_FSCK_INDEX);
    T_EQ(r.index_built, 1u);
    T_EQ(r.index_entries, 0u);
    return c;
}

/* The index's entries of key (every shard: one in another than the key's
 * counts too), by librados; the last one's value into val (cap bytes, ""
 * when none), when val is not NULL. */
static unsigned key_entries(const char *pool, const char *key, char *val, size_t cap)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    unsigned n = 0;

    if (val)
        val[0] = '\0';
    T_EQ(rados_ioctx_create(cl, pool, &io), 0);
    rados_ioctx_set_namespace(io, IDX_NS);
    for (unsigned sh = 0; sh < IDX_SHARDS; sh++) {
        char name[32];
        snprintf(name, sizeof(name), "shard.%u", sh);
        rados_read_op_t op = rados_create_read_op();
        rados_omap_iter_t it = NULL;
        unsigned char more = 0;
        int rv = 0;
        rados_read_op_omap_get_vals2(op, "", key, 1000, &it, &more, &rv);
        if (rados_read_op_operate(op, io, name, 0) == 0) {
            char *k, *v;
            size_t kl, vl;
            while (rados_omap_get_next2(it, &k, &v, &kl, &vl) == 0 && k) {
                if (kl != strlen(key) + 17 || memcmp(k, key, strlen(key) + 1) != 0)
                    continue;
                n++;
                if (val && vl < cap) {
                    memcpy(val, v, vl);
                    val[vl] = '\0';
                }
            }
        }
        if (it)
            rados_omap_get_end(it);
        rados_release_read_op(op);
    }
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    return n;
}

static unsigned entries_of(const char *pool, const char *key)
{
    return key_entries(pool, key, NULL, 0);
}

/* The value of key's entry (a static buffer), "" when it has none. */
static const char *entry_val(const char *pool, const char *key)
{
    static char val[256];
    key_entries(pool, key, val, sizeof(val));
    return val;
}

/* Set an entry (key, gen) valued val. */
#define raw_val ru_idx_entry

/* Set omap name[0..len) to "x" in every shard: no entry railio writes. */
static void raw_junk(const char *pool, const char *name, size_t len)
{
    ru_idx_set(pool, -1, name, len, "x");
}

/* Set an entry (key, gen) valued with time at_ns, as a writer does
 * before its commit. */
static void raw_entry(const char *pool, const char *key, uint64_t gen, uint64_t at_ns)
{
    char val[17];
    snprintf(val, sizeof(val), "%016" PRIx64, at_ns);
    raw_val(pool, key, gen, val);
}

static struct rio_rados_counters ctrs(struct rio_client *c)
{
    struct rio_rados_counters rc;
    rio__rados_counters(rio__client_transport(c), &rc);
    return rc;
}

/* Every entry of a listing, as "D:" or "K:" lines with size and etag. */
static char *listing(struct rio_client *c, struct rio_list_args a, unsigned *pages)
{
    char token[RIO_LIST_TOKEN_MAX + 1] = "";
    size_t cap = 1 << 16, len = 0;
    char *out = malloc(cap);

    *pages = 0;
    out[0] = '\0';
    for (;;) {
        struct rio_list_page p;
        a.token = token;
        T_OK(rio_list(c, &a, &p, NULL));
        (*pages)++;
        T_LE(p.n, a.max_keys ? a.max_keys : 1000u);
        for (unsigned i = 0; i < p.n; i++) {
            const struct rio_entry *e = &p.entries[i];
            while (len + strlen(e->key) + 128 > cap)
                out = realloc(out, cap *= 2);
            len += (size_t)sprintf(out + len, "%s:%s:%" PRIu64 ":%s\n",
                                   e->flags & RIO_ENTRY_DIR ? "D" : "K", e->key, e->size, e->etag);
        }
        strcpy(token, p.next_token);
        rio_list_page_cleanup(&p);
        if (!token[0])
            break;
        T_LT(*pages, 10000u);
    }
    return out;
}

static void put_both(struct rio_client *a, struct rio_client *b, const char *key, size_t n,
                     uint64_t seed)
{
    uint8_t *buf = ru_pattern(n, seed);
    T_OK(rio_put(a, key, buf, n, NULL, NULL));
    T_OK(rio_put(b, key, buf, n, NULL, NULL));
    free(buf);
}

TEST(listings_from_the_index_equal_the_scan)
{
    struct rio_client *ix = ix_client("ix"), *sc = ix_client("sc");

    /* Keys in both pools, the same: bytes low and high, empty path
     * elements, dots, a long key, and enough keys under m/ to spread
     * over every shard and pages. */
    static const char *const odd[] = {"k",        "ka",    "k\x01",   "k\001a", "k\xff",
                                      "k/\xff/x", "k/a/b", "k/a/c",   "k//d",   "x y",
                                      "a.b.c",    "k/a/",  "k/a/b/c", "z/",     "zz"};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
        put_both(ix, sc, odd[i], 10 + i, i);
    char name[64];
    for (unsigned i = 0; i < 300; i++) {
        snprintf(name, sizeof(name), "m/%c/%05u", 'a' + i % 5, i);
        put_both(ix, sc, name, i % 7, 100 + i);
    }
    char longkey[RIO_KEY_MAX + 1];
    memset(longkey, 'L', RIO_KEY_MAX - 20);
    longkey[RIO_KEY_MAX - 20] = '\0';
    put_both(ix, sc, longkey, 3, 999);
    /* A foreign object under a key's name in namespace "": no head. */
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    T_EQ(rados_ioctx_create(cl, "sc", &io), 0);
    T_EQ(rados_write_full(io, "m/foreign", "x", 1), 0);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);

    /* Before: the pool has none; listings scan. */
    struct rio_fsck_report r = fsck(ix, RIO_FSCK_DRY_RUN | RIO_FSCK_INDEX);
    T_EQ(r.index_built, 0u);
    T_EQ(r.index_entries, 0u);
    T_EQ(r.index_state, 0u); /* none: the CLI says so, and that --index builds one */
    r = fsck(ix, RIO_FSCK_INDEX);
    T_EQ(r.index_built, 1u);
    T_EQ(r.index_state, 2u);
    T_EQ(r.index_added, 316u); /* every head, none before */
    T_EQ(r.index_removed, 0u);
    r = fsck(ix, 0);
    T_EQ(r.index_entries, 316u);
    T_EQ(r.index_added, 0u);

    /* Names in the shards that no writer makes (anyone with write access
     * to the pool can): skipped, and no shard's keys after them missed.
     * 40 sort among m/a/'s keys in every shard, more than a small page
     * reads of a shard in one round. */
    char junk[64];
    for (unsigned i = 0; i < 40; i++) {
        int jl = snprintf(junk, sizeof(junk), "m/a/00000j%02u", i);
        raw_junk("ix", junk, (size_t)jl);
    }
    raw_junk("ix", "kz\0zz", 5); /* no key kz: nothing to read */
    raw_junk("ix", "m/b/\0", 5);
    raw_junk("ix", "zz/j", 4);

    static const char *const prefixes[] = {"",         "k",     "k/",      "m/", "m/c/",
                                           "m/c/0001", "k\x01", "nothing", "L"};
    static const char *const afters[] = {NULL, "k", "k/a", "k/a/b", "m/b/", "m/b/00099", "zzz"};
    static const unsigned sizes[] = {1, 2, 3, 7, 1000};
    uint64_t before = ctrs(ix).list_index_pages, heads_before = ctrs(ix).list_heads_read;
    unsigned cases = 0;
    for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++)
        for (size_t s = 0; s < sizeof(afters) / sizeof(afters[0]); s++)
            for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
                for (unsigned d = 0; d < 2; d++) {
                    if (sizes[z] < 3 && (p == 0 || p == 3) && !afters[s])
                        continue; /* hundreds of pages: covered by size 3 */
                    struct rio_list_args a = {.prefix = prefixes[p],
                                              .start_after = afters[s],
                                              .max_keys = sizes[z],
                                              .flags = RIO_LIST_SORTED | (d ? RIO_LIST_DELIM : 0)};
                    unsigned pi, ps;
                    char *got = listing(ix, a, &pi);
                    char *want = listing(sc, a, &ps);
                    if (strcmp(got, want) != 0)
                        T_FAIL(
                            "prefix '%s' start_after '%s' max %u delim %u:\nindex:\n%s\nscan:\n%s",
                            prefixes[p], afters[s] ? afters[s] : "", sizes[z], d, got, want);
                    free(got);
                    free(want);
                    cases++;
                }
    T_GT(ctrs(ix).list_index_pages, before + cases);
    /* Every entry fsck wrote says its head's size, etag, mtime: no page
     * read a head (each scan read its page's). */
    T_EQ(ctrs(ix).list_heads_read, heads_before);
    T_GT(ctrs(sc).list_heads_read, 316u);
    /* What an entry says is what a lookup says: size, generation, etag,
     * mtime. */
    {
        struct rio_list_page p;
        T_OK(rio_list(ix, &(struct rio_list_args){.flags = RIO_LIST_SORTED}, &p, NULL));
        T_EQ(p.n, 316u);
        for (unsigned i = 0; i < p.n; i++) {
            struct rio_desc d;
            int64_t mt;
            T_OK(rio_stat_mtime(ix, p.entries[i].key, &d, &mt));
            T_EQ(p.entries[i].size, d.size);
            T_EQ(p.entries[i].generation, d.generation);
            T_STREQ(p.entries[i].etag, d.etag);
            T_EQ(p.entries[i].mtime_ns, mt);
            rio_desc_cleanup(&d);
        }
        rio_list_page_cleanup(&p);
    }

    /* Unsorted asked: the index gives byte order all the same. */
    struct rio_list_args a = {.prefix = "m/", .max_keys = 50};
    unsigned pi, ps;
    char *got = listing(ix, a, &pi);
    a.flags = RIO_LIST_SORTED;
    char *want = listing(sc, a, &ps);
    T_STREQ(got, want);
    T_EQ(pi, 6u);
    free(got);
    free(want);
    rio_client_destroy(ix);
    rio_client_destroy(sc);
}

TEST(writers_keep_every_head_indexed)
{
    struct rio_client *c = indexed_client("iy");
    struct rio_fsck_report r;

    uint8_t *buf = ru_pattern(300 * RU_KIB, 7);
    struct rio_desc d;
    T_OK(rio_put(c, "a", buf, 1000, NULL, NULL));
    T_OK(rio_put(c, "b", buf, 300 * RU_KIB, NULL, &d)); /* 5 chunks */
    uint64_t gb = d.generation;
    rio_desc_cleanup(&d);
    T_EQ(entries_of("iy", "a"), 1u);
    T_EQ(entries_of("iy", "b"), 1u);
    /* Once published, the entry says so (the mark is sent, not waited for:
     * a client's close waits for its marks). */
    rio_client_destroy(c);
    c = ix_client("iy");
    char want[128];
    snprintf(want, sizeof(want), " c %u ", 300u * 1024u);
    T_TRUE(strstr(entry_val("iy", "b"), want) != NULL);
    T_TRUE(strstr(entry_val("iy", "a"), " c 1000 ") != NULL);
    /* Overwrite: the replaced generation's entry goes. */
    T_OK(rio_put(c, "a", buf, 2000, NULL, NULL));
    T_EQ(entries_of("iy", "a"), 1u);
    /* A refused condition: no entry of the generation that never was. */
    struct rio_call call = {.flags = RIO_IF_ABSENT};
    T_ERR(rio_put(c, "a", buf, 10, &call, NULL), RIO_EGENERATION);
    call = (struct rio_call){.expect_generation = gb + 1};
    T_ERR(rio_put(c, "b", buf, 10, &call, NULL), RIO_EGENERATION);
    T_EQ(entries_of("iy", "a"), 1u);
    T_EQ(entries_of("iy", "b"), 1u);
    call = (struct rio_call){.flags = RIO_IF_ABSENT};
    T_OK(rio_put(c, "c", buf, 10, &call, NULL));
    T_EQ(entries_of("iy", "c"), 1u);
    /* Delete, and delete on a condition. */
    T_OK(rio_delete(c, "a"));
    T_EQ(entries_of("iy", "a"), 0u);
    T_ERR(rio_delete_if(c, "b", gb + 1), RIO_EGENERATION);
    T_EQ(entries_of("iy", "b"), 1u);
    T_OK(rio_delete_if(c, "b", gb));
    T_EQ(entries_of("iy", "b"), 0u);
    /* An aborted streamed upload: chunks written, never committed. */
    struct rio_writer *w;
    T_OK(rio_writer_open(c, "w", RIO_SIZE_UNKNOWN, 0, NULL, &w));
    T_OK(rio_writer_write(w, buf, 200 * RU_KIB));
    rio_writer_abort(w);
    T_EQ(entries_of("iy", "w"), 0u);
    /* A streamed upload committed. */
    T_OK(rio_writer_open(c, "w", RIO_SIZE_UNKNOWN, 0, NULL, &w));
    T_OK(rio_writer_write(w, buf, 200 * RU_KIB));
    T_OK(rio_writer_close(w, NULL));
    T_EQ(entries_of("iy", "w"), 1u);
    /* Compose: the parts' heads go, and their entries; dst gets one. */
    T_OK(rio_put(c, "p1", buf, 128 * RU_KIB, NULL, NULL));
    T_OK(rio_put(c, "p2", buf, 100, NULL, NULL));
    const char *srcs[] = {"p1", "p2"};
    T_OK(rio__compose(c, "cat", srcs, NULL, 2, 0, 0, &d));
    rio_desc_cleanup(&d);
    T_EQ(entries_of("iy", "p1"), 0u);
    T_EQ(entries_of("iy", "p2"), 0u);
    T_EQ(entries_of("iy", "cat"), 1u);

    /* Heads c, w, cat: each its entry, nothing else. */
    r = fsck(c, RIO_FSCK_DRY_RUN);
    T_EQ(r.heads, 3u);
    T_EQ(r.index_entries, 3u);
    T_EQ(r.index_added, 0u);
    T_EQ(r.index_removed, 0u);
    unsigned pages;
    char *got = listing(c, (struct rio_list_args){.flags = RIO_LIST_SORTED}, &pages);
    T_TRUE(strncmp(got, "K:c:10:", 7) == 0);
    T_TRUE(strstr(got, "\nK:cat:131172:") != NULL);
    T_TRUE(strstr(got, "\nK:w:204800:") != NULL);
    T_EQ(pages, 1u);
    free(got);
    free(buf);
    rio_client_destroy(c);
}

/* 1,100 omap names that are no entry (more than a page) into shard sh:
 * pad 'a's, then lead and a counter. */
static void junk_page(rados_ioctx_t io, unsigned sh, size_t pad, const char *lead)
{
    static char names[1100][RIO_KEY_MAX + 16];
    const char *ks[1100], *vs[1100];
    size_t kls[1100], vls[1100];
    char sname[32];

    for (unsigned i = 0; i < 1100; i++) {
        memset(names[i], 'a', pad);
        kls[i] = pad + (size_t)snprintf(names[i] + pad, 16, "%s%05u", lead, i);
        ks[i] = names[i];
        vs[i] = "x";
        vls[i] = 1;
    }
    snprintf(sname, sizeof(sname), "shard.%u", sh);
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_omap_set2(op, ks, vs, kls, vls, 1100);
    T_EQ(rados_write_op_operate(op, io, sname, NULL, 0), 0);
    rados_release_write_op(op);
}

TEST(entries_of_no_head_skipped_then_swept)
{
    struct rio_client *c = indexed_client("iz");
    struct rio_fsck_report r;
    T_OK(rio_put(c, "live", "x", 1, NULL, NULL));
    /* What a crash leaves: entries of generations that never became a
     * head (a PUT killed before its commit, a DELETE killed between the
     * head and its entry), one old, one young, one beside a live head. */
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    raw_entry("iz", "old", 0x1111, now - 3600ull * 1000000000u);
    raw_entry("iz", "young", 0x2222, now);
    raw_entry("iz", "live", 0x3333, now - 3600ull * 1000000000u);
    raw_entry("iz", "d/old", 0x4444, now - 3600ull * 1000000000u);
    unsigned pages;
    char *got = listing(c, (struct rio_list_args){.flags = RIO_LIST_SORTED}, &pages);
    T_TRUE(strncmp(got, "K:live:1:", 9) == 0);
    T_EQ((unsigned)strlen(got), (unsigned)(strchr(got, '\n') - got + 1)); /* only it */
    free(got);
    /* A dry run counts; the grace (10 min at least) keeps the young one. */
    r = fsck(c, RIO_FSCK_DRY_RUN);
    T_EQ(r.index_entries, 5u);
    T_EQ(r.index_removed, 3u);
    r = fsck(c, 0);
    T_EQ(r.index_removed, 3u);
    T_EQ(entries_of("iz", "old"), 0u);
    T_EQ(entries_of("iz", "young"), 1u);
    T_EQ(entries_of("iz", "live"), 1u);
    r = fsck(c, RIO_FSCK_DRY_RUN);
    T_EQ(r.index_entries, 2u);
    T_EQ(r.index_removed, 0u);
    /* A committed entry is believed without its head (that is what spares
     * a listing the head reads): one left by a DELETE killed between the
     * head and its entry is listed until fsck sweeps it. */
    char cval[128];
    snprintf(cval, sizeof(cval), "%016" PRIx64 " c 7 1700000000 ghostetag",
             (uint64_t)(now - 3600ull * 1000000000u));
    raw_val("iz", "ghost", 0x5555, cval);
    got = listing(c, (struct rio_list_args){.flags = RIO_LIST_SORTED}, &pages);
    T_TRUE(strstr(got, "K:ghost:7:ghostetag\n") != NULL);
    free(got);
    r = fsck(c, 0);
    T_EQ(r.index_removed, 1u);
    got = listing(c, (struct rio_list_args){.flags = RIO_LIST_SORTED}, &pages);
    T_TRUE(strstr(got, "ghost") == NULL);
    free(got);
    /* The live head's entry, not marked (its writer's mark lost): fsck
     * marks it from the head. */
    struct rio_desc d;
    T_OK(rio_stat(c, "live", &d));
    raw_entry("iz", "live", d.generation, now);
    T_TRUE(strstr(entry_val("iz", "live"), " c ") == NULL);
    r = fsck(c, 0);
    T_EQ(r.index_added, 0u);
    T_TRUE(strstr(entry_val("iz", "live"), " c 1 ") != NULL);
    rio_desc_cleanup(&d);
    /* A shard whose first page of names holds no entry (anyone with write
     * access to the pool can write such names): fsck walks past them, and
     * finds the same entries. */
    rados_t cl2 = ru_admin();
    rados_ioctx_t io2;
    T_EQ(rados_ioctx_create(cl2, "iz", &io2), 0);
    rados_ioctx_set_namespace(io2, IDX_NS);
    for (unsigned sh = 0; sh < IDX_SHARDS; sh++)
        junk_page(io2, sh, 0, "!j");
    /* More than a page of names longer than a key that share their first
     * RIO_KEY_MAX bytes: the walk steps past them (it read the same page
     * again for ever). */
    for (unsigned sh = 0; sh < IDX_SHARDS; sh += 3)
        junk_page(io2, sh, RIO_KEY_MAX, "b");
    rados_ioctx_destroy(io2);
    rados_shutdown(cl2);
    r = fsck(c, RIO_FSCK_DRY_RUN);
    T_EQ(r.index_entries, 2u);
    T_EQ(r.index_added, 0u);
    /* A head whose entry someone removed gets it back. */
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    T_EQ(rados_ioctx_create(cl, "iz", &io), 0);
    rados_ioctx_set_namespace(io, IDX_NS);
    for (unsigned sh = 0; sh < IDX_SHARDS; sh++) {
        char name[32];
        snprintf(name, sizeof(name), "shard.%u", sh);
        rados_write_op_t op = rados_create_write_op();
        rados_write_op_omap_clear(op);
        rados_write_op_operate(op, io, name, NULL, 0);
        rados_release_write_op(op);
    }
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    r = fsck(c, 0);
    T_EQ(r.index_added, 1u);
    T_EQ(entries_of("iz", "live"), 1u);
    rio_client_destroy(c);
}

TEST(exists_from_the_index)
{
    struct rio_client *c = indexed_client("it");
    char key[32];
    for (unsigned i = 0; i < 200; i++) {
        snprintf(key, sizeof(key), "e/%04u", i);
        T_OK(rio_put(c, key, key, strlen(key), NULL, NULL));
    }
    rio_client_destroy(c); /* its marks landed */
    c = ix_client("it");
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    uint64_t now = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    /* e/0000's entry as a PUT in flight leaves it (not committed): its
     * head is read; "pending" has such an entry and no head; "e/00" is a
     * prefix of keys but none itself; "ghost" a committed entry of no head
     * (believed, as a listing believes it). */
    struct rio_desc d;
    T_OK(rio_stat(c, "e/0000", &d));
    raw_entry("it", "e/0000", d.generation, now);
    rio_desc_cleanup(&d);
    raw_entry("it", "pending", 0x77, now);
    char cval[128];
    snprintf(cval, sizeof(cval), "%016" PRIx64 " c 1 1700000000 x", (uint64_t)now);
    raw_val("it", "ghost", 0x88, cval);
    /* A name under e/0001 that is no entry, sorting before its entry: its
     * head is read (not "absent" on the strength of the first name). */
    raw_junk("it", "e/0001\0!!", 9);
    const char *keys[400];
    char names[400][32];
    uint8_t want[400], got[400];
    unsigned n = 0;
    for (unsigned i = 0; i < 390; i++, n++) {
        snprintf(names[n], sizeof(names[n]), "e/%04u", i);
        keys[n] = names[n];
        want[n] = i < 200;
    }
    static const char *const extra[] = {"pending", "e/00", "ghost", "e/0000x", "zzz"};
    static const uint8_t extra_want[] = {0, 0, 1, 0, 0};
    for (unsigned i = 0; i < 5; i++, n++) {
        keys[n] = extra[i];
        want[n] = extra_want[i];
    }
    uint64_t heads0 = ctrs(c).list_heads_read;
    unsigned prefix = 0;
    T_EQ(rio_exists_batch(c, keys, n, got, &prefix, NULL), 201);
    for (unsigned i = 0; i < n; i++)
        if (got[i] != want[i])
            T_FAIL("%s: %u, not %u", keys[i], got[i], want[i]);
    T_EQ(prefix, 200u);
    T_EQ(ctrs(c).list_heads_read - heads0, 3u); /* e/0000, e/0001 and pending only */
    rio_client_destroy(c);
}

/* Writers of a few keys, racing each other and deletes. */
struct racer {
    struct rio_client *c;
    unsigned id, rounds;
};

static void *race_run(void *arg)
{
    struct racer *r = arg;
    char key[16];
    uint8_t b[3000];
    memset(b, (int)r->id, sizeof(b));
    for (unsigned i = 0; i < r->rounds; i++) {
        snprintf(key, sizeof(key), "r%u", (i * 7 + r->id) % 4);
        int ret;
        if ((i + r->id) % 3 == 2)
            ret = rio_delete(r->c, key);
        else
            ret = rio_put(r->c, key, b, 100 + (i % 3) * 1400, NULL, NULL);
        if (ret < 0 && ret != RIO_ENOTFOUND)
            T_FAIL("racer %u round %u: %s", r->id, i, rio_errname(ret));
    }
    return NULL;
}

TEST(racing_writers_leave_no_head_without_its_entry)
{
    struct rio_client *c = indexed_client("iw");
    struct rio_fsck_report r;
    struct racer rs[4];
    pthread_t th[4];
    for (unsigned i = 0; i < 4; i++) {
        rs[i] = (struct racer){.c = ix_client("iw"), .id = i, .rounds = 60};
        T_EQ(pthread_create(&th[i], NULL, race_run, &rs[i]), 0);
    }
    for (unsigned i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        rio_client_destroy(rs[i].c);
    }
    r = fsck(c, RIO_FSCK_DRY_RUN);
    T_EQ(r.index_added, 0u);
    /* Nothing crashed: no entry of a generation that is no head stays. */
    T_EQ(r.index_entries, r.heads);
    unsigned pages;
    char *got = listing(c, (struct rio_list_args){.flags = RIO_LIST_SORTED}, &pages);
    unsigned lines = 0;
    for (const char *p = got; *p; p++)
        lines += *p == '\n';
    T_EQ(lines, (unsigned)r.heads);
    free(got);
    rio_client_destroy(c);
}

/* A writer putting keys until told to stop. */
struct feeder {
    struct rio_client *c;
    atomic_bool stop;
    unsigned n;
};

static void *feed_run(void *arg)
{
    struct feeder *f = arg;
    char key[32];
    while (!atomic_load(&f->stop)) {
        snprintf(key, sizeof(key), "f/%05u", f->n++);
        T_OK(rio_put(f->c, key, key, strlen(key), NULL, NULL));
    }
    return NULL;
}

TEST(index_built_while_a_writer_writes)
{
    /* The writer's client is opened before the index exists: it learns of
     * the marker by re-reading it (index_recheck), and fsck waits for that. */
    struct feeder f = {.c = ix_client("iu")};
    struct rio_client *c = ix_client("iu");
    T_OK(rio_put(f.c, "f/first", "x", 1, NULL, NULL));
    pthread_t th;
    T_EQ(pthread_create(&th, NULL, feed_run, &f), 0);
    t_sleep_ms(200);
    struct rio_fsck_report r = fsck(c, RIO_FSCK_INDEX);
    T_EQ(r.index_built, 1u);
    t_sleep_ms(300);
    atomic_store(&f.stop, true);
    pthread_join(th, NULL);
    T_GT(f.n, 5u);
    r = fsck(c, RIO_FSCK_DRY_RUN);
    T_EQ(r.index_added, 0u);
    unsigned pages;
    char *got =
        listing(c, (struct rio_list_args){.prefix = "f/", .flags = RIO_LIST_SORTED}, &pages);
    unsigned lines = 0;
    for (const char *p = got; *p; p++)
        lines += *p == '\n';
    T_EQ(lines, f.n + 1);
    free(got);
    rio_client_destroy(f.c);
    rio_client_destroy(c);
}

/* Names longer than a key that share their first RIO_KEY_MAX bytes, more
 * of them than a round reads of a shard (anyone who can write the pool can
 * set them): a listing goes past them and shows every key after them. Each
 * round started again at their first RIO_KEY_MAX bytes and "\x01", read
 * the same names, and the page failed with RIO_EPROTO ("no progress
 * through the key index"): j/z was never listed again. */
TEST(names_longer_than_a_key_do_not_stop_a_listing)
{
    struct rio_client *c = indexed_client("is");
    static char names[300][RIO_KEY_MAX + 8];
    const char *np[300], *vp[300];
    size_t nl[300], vl[300];

    T_OK(rio_put(c, "j/a", "a", 1, NULL, NULL));
    T_OK(rio_put(c, "j/z", "z", 1, NULL, NULL));
    for (unsigned i = 0; i < 300; i++) {
        memcpy(names[i], "j/", 2);
        memset(names[i] + 2, 'q', RIO_KEY_MAX);
        nl[i] = 2 + RIO_KEY_MAX + (size_t)sprintf(names[i] + 2 + RIO_KEY_MAX, "%04u", i);
        np[i] = names[i];
        vp[i] = "x";
        vl[i] = 1;
    }
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    T_EQ(rados_ioctx_create(cl, "is", &io), 0);
    rados_ioctx_set_namespace(io, IDX_NS);
    rados_write_op_t op = rados_create_write_op();
    rados_write_op_omap_set2(op, np, vp, nl, vl, 300);
    T_EQ(rados_write_op_operate(op, io, "shard.0", NULL, 0), 0);
    rados_release_write_op(op);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    static const unsigned sizes[] = {1, 10, 1000};
    for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++)
        for (unsigned d = 0; d < 2; d++) {
            unsigned pages;
            struct rio_list_args a = {.prefix = d ? "j/" : "",
                                      .max_keys = sizes[z],
                                      .flags = RIO_LIST_SORTED | (d ? RIO_LIST_DELIM : 0)};
            char *got = listing(c, a, &pages);
            T_TRUE(strncmp(got, "K:j/a:1:", 8) == 0);
            T_TRUE(strstr(got, "\nK:j/z:1:") != NULL);
            unsigned lines = 0;
            for (const char *q = got; (q = strchr(q, '\n')); q++)
                lines++;
            T_EQ(lines, 2u); /* those two keys, nothing else */
            free(got);
        }
    rio_client_destroy(c);
}

TEST(a_marker_not_ours_refuses)
{
    struct rio_client *c = ix_client("iv");
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    T_EQ(rados_ioctx_create(cl, "iv", &io), 0);
    rados_ioctx_set_namespace(io, IDX_NS);
    static const char *const bad[] = {"railio-index 2\nshards 8\nstate ready\n",
                                      "railio-index 1\nshards 0\nstate ready\n",
                                      "railio-index 1\nshards 8\nstate done\n",
                                      "railio-index 1\nshards  8\nstate ready\n",
                                      "railio-index 1\nshards 8\nstate ready\nmore\n",
                                      "railio-index 1\nshards 99999\nstate ready\n",
                                      ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T_EQ(rados_write_full(io, IDX_MARKER, bad[i], strlen(bad[i])), 0);
        t_sleep_ms(60); /* past index_recheck */
        T_ERR(rio_put(c, "refused", "x", 1, NULL, NULL), RIO_EPROTO);
        T_TRUE(strstr(rio_error_detail(), "key index's marker") != NULL);
        struct rio_list_page p;
        T_ERR(rio_list(c, &(struct rio_list_args){0}, &p, NULL), RIO_EPROTO);
    }
    T_EQ(rados_write_full(io, IDX_MARKER, "railio-index 1\nshards 8\nstate ready\n",
                          strlen("railio-index 1\nshards 8\nstate ready\n")),
         0);
    t_sleep_ms(60);
    T_OK(rio_put(c, "refused", "x", 1, NULL, NULL));
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    rio_client_destroy(c);
}

/*
 * A delete whose entry drop never comes (the process killed between the
 * head's removal and the drop, or a drop that failed; here a user that may
 * not write the index) must not leave a committed entry of no head, which
 * listings believe without reading the head: a key listed that no GET
 * finds, until an fsck. Found by killing an S3 gateway (kill -9) in the
 * middle of a DeleteObjects over an indexed pool: another gateway listed
 * a key its GET answered 404.
 */
TEST(a_delete_that_cannot_drop_its_entry_lists_no_ghost)
{
    struct rio_client *c = indexed_client("ir");
    char keyring[1024], extra[1400];
    T_OK(rio_put(c, "gone", "bytes", 5, NULL, NULL));
    T_OK(rio_put(c, "kept", "bytes", 5, NULL, NULL));
    rio_client_destroy(c); /* their marks landed: each entry committed */
    snprintf(keyring, sizeof(keyring), "%s/ir.keyring", t_ceph_dir());
    T_EQ(t_sh("ceph -c %s/ceph.conf auth get-or-create client.irnoidx mon 'allow r' "
              "osd 'allow rw pool=ir namespace=\"\", allow rw pool=ir namespace=rio.chunk, "
              "allow r pool=ir namespace=" IDX_NS "' -o %s >/dev/null",
              t_ceph_dir(), keyring),
         0);
    snprintf(extra, sizeof(extra), FAST "&id=irnoidx&keyring=%s", keyring);
    struct rio_options o;
    ru_opts(&o, 64 * RU_KIB, 4);
    struct rio_client *ro = ru_client("ir", extra, &o);
    int ret = rio_delete(ro, "gone");
    rio_client_destroy(ro);
    c = ix_client("ir");
    unsigned pages;
    char *l = listing(c, (struct rio_list_args){0}, &pages);
    struct rio_desc d;
    int st = rio_stat(c, "gone", &d);
    if (st == 0)
        rio_desc_cleanup(&d);
    /* Refused (the object stays, listed and read) or done (neither). */
    if (ret == 0) {
        T_ERR(st, RIO_ENOTFOUND);
        T_TRUE(strstr(l, "K:gone:") == NULL);
    } else {
        T_OK(st);
        T_TRUE(strstr(l, "K:gone:") != NULL);
    }
    T_TRUE(strstr(l, "K:kept:") != NULL);
    free(l);
    rio_client_destroy(c);
}

#endif
