/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 180 */
/*
 * LIST and EXISTS on railio:// against a real railiod: pages of a few
 * thousand keys in byte order with their size, generation, etag and
 * modified time, common prefixes, uploads never listed, the disk tier
 * (before and after a restart), a ring of servers merged into one order;
 * EXISTS of 10,000 keys answered in one request per server. The transport's
 * list and exists ops are called as the engine calls them.
 */
#include "tcp_util.h"
#include "transport/transport.h"

static struct rio_transport *tp(struct rio_client *c)
{
    return rio__client_transport(c);
}

/* One page through rio_list (odd pages) or straight through the
 * transport's op as the engine asks it (even ones). */
static unsigned npages;
static int page(struct rio_client *c, const char *prefix, const char *token, unsigned max,
                unsigned flags, struct rio_list_page *out)
{
    struct rio_list_args a = {.prefix = prefix, .token = token, .max_keys = max, .flags = flags};
    T_NOTNULL(rio__t_ops(tp(c))->list);
    if (npages++ % 2)
        return rio_list(c, &a, out, NULL);
    return rio__t_ops(tp(c))->list(tp(c), &a, out);
}

/* Every key under prefix, paged by max: their count; checks byte order
 * across pages. keys (if not NULL) gets a copy of each. */
static unsigned list_all(struct rio_client *c, const char *prefix, unsigned max, unsigned flags,
                         char (*keys)[64], unsigned cap, unsigned *pages)
{
    char token[RIO_LIST_TOKEN_MAX + 1] = "", last[RIO_KEY_MAX + 1] = "";
    unsigned n = 0;

    *pages = 0;
    for (;;) {
        struct rio_list_page p;
        T_EQ(page(c, prefix, token, max, flags, &p), 0);
        T_LE(p.n, max);
        (*pages)++;
        for (unsigned i = 0; i < p.n; i++) {
            T_GT(strcmp(p.entries[i].key, last), 0);
            snprintf(last, sizeof(last), "%s", p.entries[i].key);
            T_EQ(strncmp(p.entries[i].key, prefix, strlen(prefix)), 0);
            if (keys && n < cap)
                snprintf(keys[n], sizeof(keys[n]), "%.63s", p.entries[i].key);
            n++;
        }
        snprintf(token, sizeof(token), "%s", p.next_token);
        rio_list_page_cleanup(&p);
        if (!token[0])
            return n;
        T_LT(*pages, 100000u);
    }
}

/* The transport's op, then rio_exists_batch, which must agree: the count
 * of keys that exist, or the error. */
static int exists(struct rio_client *c, const char *const *keys, unsigned n, uint8_t *out)
{
    static uint8_t again[10000];
    T_NOTNULL(rio__t_ops(tp(c))->exists);
    T_LE(n, 10000u);
    int ret = rio__t_ops(tp(c))->exists(tp(c), keys, n, out);
    int cnt = rio_exists_batch(c, keys, n, again, NULL, NULL);
    if (ret < 0) {
        T_LT(cnt, 0);
        return ret;
    }
    T_MEMEQ(again, out, n);
    return cnt;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp((const char *)a, (const char *)b);
}

/* nkeys keys under "ls/" (and a few outside it), listed in pages of 1000. */
static void paged(struct tu_env *x, unsigned nkeys, int check_meta)
{
    static char want[4000][64], got[4000][64];
    unsigned pages;

    T_LE(nkeys, 4000u);
    for (unsigned i = 0; i < nkeys; i++) {
        snprintf(want[i], sizeof(want[i]), "ls/%x/k%u", i % 7, i * 2654435761u);
        tu_put(x->u.c, want[i], i % 5, i);
    }
    tu_put(x->u.c, "lr", 1, 1);
    tu_put(x->u.c, "lt/x", 1, 1);
    qsort(want, nkeys, sizeof(want[0]), cmp_str);
    T_EQ(list_all(x->u.c, "ls/", 1000, 0, got, 4000, &pages), nkeys);
    T_EQ(pages, (nkeys + 999) / 1000 + (nkeys % 1000 == 0 ? 1 : 0));
    for (unsigned i = 0; i < nkeys; i++)
        T_STREQ(got[i], want[i]);
    if (!check_meta)
        return;
    /* The fields of an entry are the object's. */
    struct rio_list_page p;
    T_EQ(page(x->u.c, "ls/", NULL, 3, 0, &p), 0);
    T_EQ(p.n, 3u);
    T_STREQ(p.next_token, p.entries[2].key);
    for (unsigned i = 0; i < p.n; i++) {
        struct rio_desc d;
        T_EQ(rio_stat(x->u.c, p.entries[i].key, &d), 0);
        T_EQ(p.entries[i].size, d.size);
        T_EQ(p.entries[i].generation, d.generation);
        T_STREQ(p.entries[i].etag, d.etag);
        T_EQ(p.entries[i].flags, 0u);
        struct timespec now;
        clock_gettime(CLOCK_REALTIME, &now);
        T_GT(p.entries[i].mtime_ns, (int64_t)(now.tv_sec - 600) * 1000000000);
        T_LE(p.entries[i].mtime_ns, (int64_t)(now.tv_sec + 1) * 1000000000);
        rio_desc_cleanup(&d);
    }
    rio_list_page_cleanup(&p);
}

TEST(list_memory_paged)
{
    struct tu_env x;

    tu_env_start(&x, NULL, NULL);
    paged(&x, 2500, 1);
    /* Past the end, and a prefix nothing has. */
    struct rio_list_page p;
    T_EQ(page(x.u.c, "ls/", "ls/zzz", 10, 0, &p), 0);
    T_EQ(p.n, 0u);
    T_STREQ(p.next_token, "");
    T_EQ(page(x.u.c, "nothing/", NULL, 10, 0, &p), 0);
    T_EQ(p.n, 0u);
    T_STREQ(p.next_token, "");
    tu_env_stop(&x);
}

TEST(list_delimiter)
{
    struct tu_env x;
    static const char *const keys[] = {"d/a/1", "d/a/2", "d/b", "d/c/x/y", "d/c/z", "d/d"};
    static const char *const want[] = {"d/a/", "d/b", "d/c/", "d/d"};

    tu_env_start(&x, NULL, NULL);
    for (unsigned i = 0; i < 6; i++)
        tu_put(x.u.c, keys[i], 10, i);
    /* One entry per page: a common prefix is the cursor of the next. */
    char token[RIO_LIST_TOKEN_MAX + 1] = "";
    for (unsigned i = 0; i < 4; i++) {
        struct rio_list_page p;
        T_EQ(page(x.u.c, "d/", token, 1, RIO_LIST_DELIM, &p), 0);
        T_EQ(p.n, 1u);
        T_STREQ(p.entries[0].key, want[i]);
        T_EQ(p.entries[0].flags, (want[i][strlen(want[i]) - 1] == '/') ? RIO_ENTRY_DIR : 0u);
        if (p.entries[0].flags)
            T_EQ(p.entries[0].size, 0u);
        else
            T_EQ(p.entries[0].size, 10u);
        snprintf(token, sizeof(token), "%s", p.next_token);
        rio_list_page_cleanup(&p);
        T_EQ(token[0] != '\0', i < 3);
    }
    /* Below a common prefix. */
    unsigned pages;
    T_EQ(list_all(x.u.c, "d/c/", 10, RIO_LIST_DELIM, NULL, 0, &pages), 2u);
    T_EQ(list_all(x.u.c, "d/", 1000, 0, NULL, 0, &pages), 6u);
    tu_env_stop(&x);
}

/* An upload in progress is never listed; once committed it is. */
TEST(list_skips_uploads)
{
    struct tu_env x;
    void *up = NULL;

    tu_env_start(&x, NULL, NULL);
    tu_put(x.u.c, "u/done", 5, 1);
    T_EQ(rio__t_put_open(tp(x.u.c), "u/pending", 100, TU_CHUNK, &up), 0);
    struct rio_list_page p;
    T_EQ(page(x.u.c, "u/", NULL, 100, 0, &p), 0);
    T_EQ(p.n, 1u);
    T_STREQ(p.entries[0].key, "u/done");
    rio_list_page_cleanup(&p);
    rio__t_put_abort(tp(x.u.c), up);
    T_EQ(rio_delete(x.u.c, "u/done"), 0);
    T_EQ(page(x.u.c, "u/", NULL, 100, 0, &p), 0);
    T_EQ(p.n, 0u);
    tu_env_stop(&x);
}

/* The disk tier lists its index, the same after a restart. */
TEST(list_disk_restart)
{
    struct tu_env x;
    char dir[] = "/tmp/rio-list-XXXXXX", url[256];
    T_NOTNULL(mkdtemp(dir));
    const char *args[] = {"--data-dir", dir, NULL};

    tu_env_start(&x, args, NULL);
    paged(&x, 1200, 1);
    struct rio_list_page before;
    T_EQ(page(x.u.c, "ls/", NULL, 5, 0, &before), 0);
    tu_env_stop(&x);

    tu_env_start(&x, args, NULL);
    struct rio_list_page after;
    T_EQ(page(x.u.c, "ls/", NULL, 5, 0, &after), 0);
    T_EQ(after.n, before.n);
    for (unsigned i = 0; i < after.n; i++) {
        T_STREQ(after.entries[i].key, before.entries[i].key);
        T_EQ(after.entries[i].generation, before.entries[i].generation);
        T_EQ(after.entries[i].size, before.entries[i].size);
        T_STREQ(after.entries[i].etag, before.entries[i].etag);
        /* The file's time: the commit's, to the second. */
        T_LE(llabs(after.entries[i].mtime_ns - before.entries[i].mtime_ns), 2000000000ll);
    }
    rio_list_page_cleanup(&before);
    rio_list_page_cleanup(&after);
    unsigned pages;
    T_EQ(list_all(x.u.c, "ls/", 1000, 0, NULL, 0, &pages), 1200u);
    tu_env_stop(&x);
    snprintf(url, sizeof(url), "rm -rf %s", dir);
    T_EQ(system(url), 0);
}

/* Keys replaced and deleted leave the listing as they leave the store: each
 * live key once, in order, with its latest size; nothing deleted. Memory
 * store, then disk tier (also after a restart, its index rebuilt). */
static void replaced_and_deleted(struct tu_env *x)
{
    static char got[400][64];
    char key[64];
    unsigned pages, live = 0;

    for (unsigned i = 0; i < 400; i++) {
        snprintf(key, sizeof(key), "rd/%c%03u", "ab/"[i % 3], i);
        tu_put(x->u.c, key, 10, i);
    }
    for (unsigned i = 0; i < 400; i++) {
        snprintf(key, sizeof(key), "rd/%c%03u", "ab/"[i % 3], i);
        if (i % 5 == 0)
            T_EQ(rio_delete(x->u.c, key), 0);
        else if (i % 3 == 0)
            tu_put(x->u.c, key, 20, i + 1);
    }
    T_EQ(list_all(x->u.c, "rd/", 7, 0, got, 400, &pages), 320u);
    for (unsigned i = 0; i < 400; i++) {
        if (i % 5 == 0)
            continue;
        snprintf(key, sizeof(key), "rd/%c%03u", "ab/"[i % 3], i);
        unsigned found = 0;
        for (unsigned j = 0; j < 320; j++)
            found += strcmp(got[j], key) == 0;
        T_EQ(found, 1u);
        live++;
    }
    T_EQ(live, 320u);
    /* A replaced key lists its new size. */
    struct rio_list_page p;
    T_EQ(page(x->u.c, "rd/a003", NULL, 1, 0, &p), 0);
    T_EQ(p.n, 1u);
    T_STREQ(p.entries[0].key, "rd/a003");
    T_EQ(p.entries[0].size, 20u);
    rio_list_page_cleanup(&p);
    /* With the delimiter: "rd//" once, between the a and b keys. */
    T_EQ(list_all(x->u.c, "rd/", 1000, RIO_LIST_DELIM, got, 400, &pages), 215u);
}

TEST(list_after_replace_and_delete)
{
    struct tu_env x;
    char dir[] = "/tmp/rio-list-XXXXXX", cmd[256];

    tu_env_start(&x, NULL, NULL);
    replaced_and_deleted(&x);
    tu_env_stop(&x);
    T_NOTNULL(mkdtemp(dir));
    const char *args[] = {"--data-dir", dir, NULL};
    tu_env_start(&x, args, NULL);
    replaced_and_deleted(&x);
    tu_env_stop(&x);
    tu_env_start(&x, args, NULL);
    unsigned pages;
    T_EQ(list_all(x.u.c, "rd/", 7, 0, NULL, 0, &pages), 320u);
    tu_env_stop(&x);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    T_EQ(system(cmd), 0);
}

/* A ring: each server lists its own keys, the client merges them. */
TEST(list_exists_ring)
{
    struct srv_env e[3];
    struct rio_options o;
    struct tu u;
    char url[512];
    static char want[900][64], got[900][64];
    const char *args[] = {"--metrics", "127.0.0.1:0", NULL};

    for (int i = 0; i < 3; i++)
        srv_start(&e[i], args);
    snprintf(url, sizeof(url), "railio://%s,%s,%s", e[0].addr[0], e[1].addr[0], e[2].addr[0]);
    tu_opts(&o);
    tu_open(&u, url, &o);
    for (unsigned i = 0; i < 900; i++) {
        snprintf(want[i], sizeof(want[i]), "r/%04u", i);
        tu_put(u.c, want[i], 3, i);
    }
    tu_put(u.c, "r/dir/a", 3, 1);
    tu_put(u.c, "r/dir/b", 3, 1);
    unsigned pages;
    T_EQ(list_all(u.c, "r/", 100, 0, got, 900, &pages), 902u);
    T_EQ(pages, 10u);
    for (unsigned i = 0; i < 900; i++)
        T_STREQ(got[i], want[i]);
    /* "r/dir/" once, whichever servers hold keys below it. */
    T_EQ(list_all(u.c, "r/", 7, RIO_LIST_DELIM, NULL, 0, &pages), 901u);

    /* EXISTS: hits and misses, one request per server. */
    static char kb[10000][16];
    static const char *keys[10000];
    static uint8_t ex[10000];
    double before[3];
    for (int i = 0; i < 3; i++)
        before[i] = srv_scrape(&e[i], "railiod_requests_total{op=\"EXISTS\",status=\"ok\"}");
    for (unsigned i = 0; i < 10000; i++) {
        snprintf(kb[i], sizeof(kb[i]), "r/%04u", i % 2 ? i / 2 : 5000 + i);
        keys[i] = kb[i];
    }
    T_EQ(exists(u.c, keys, 10000, ex), 900);
    for (unsigned i = 0; i < 10000; i++)
        T_EQ(ex[i], (i % 2 && i / 2 < 900) ? 1 : 0);
    for (int i = 0; i < 3; i++)
        T_EQ(srv_scrape(&e[i], "railiod_requests_total{op=\"EXISTS\",status=\"ok\"}"),
             before[i] + 2); /* the op's, then rio_exists_batch's */
    tu_close(&u);
    for (int i = 0; i < 3; i++)
        T_EQ(srv_stop(&e[i]), 0);
}

/* EXISTS against the memory and the disk tier. */
TEST(exists_tiers)
{
    for (int disk = 0; disk < 2; disk++) {
        struct tu_env x;
        char dir[] = "/tmp/rio-exists-XXXXXX", cmd[128];
        T_NOTNULL(mkdtemp(dir));
        const char *args[] = {"--data-dir", dir, NULL};
        tu_env_start(&x, disk ? args : NULL, NULL);
        tu_put(x.u.c, "e/1", 100, 1);
        tu_put(x.u.c, "e/3", 0, 1);
        const char *keys[] = {"e/1", "e/2", "e/3", "e/1"};
        uint8_t ex[4] = {9, 9, 9, 9};
        T_EQ(exists(x.u.c, keys, 4, ex), 3);
        T_EQ(ex[0], 1);
        T_EQ(ex[1], 0);
        T_EQ(ex[2], 1);
        T_EQ(ex[3], 1);
        T_EQ(rio_delete(x.u.c, "e/1"), 0);
        T_EQ(exists(x.u.c, keys, 4, ex), 1);
        T_EQ(ex[0], 0);
        T_EQ(ex[2], 1);
        /* A bad key is refused before anything is sent. */
        const char *bad[] = {"e/1", ""};
        T_EQ(exists(x.u.c, bad, 2, ex), RIO_EINVAL);
        tu_env_stop(&x);
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        T_EQ(system(cmd), 0);
    }
}

/* A ring of two railiods, 10,000 keys of 208 bytes, pages of 10,000: each
 * member's page is cut by the answer's 1 MiB cap (about 4,900 entries) and
 * says more follow. The merged page took up to 10,000 keys from the two, so
 * it went past the end of one member's page, and the next cursor skipped
 * that member's keys in between: 9,997 of 10,000 listed, no error. A
 * member's cut page vouches for keys up to its last one only: the merged
 * page ends there, and every key is listed once. */
TEST(ring_member_pages_cut_by_bytes)
{
    struct srv_env e[2];
    struct rio_options o;
    struct tu u;
    char url[512], key[300], pad[201];
    const char *args[] = {"--memory", "256M", NULL};
    const unsigned n = 10000;
    unsigned pages;

    for (int i = 0; i < 2; i++)
        srv_start(&e[i], args);
    snprintf(url, sizeof(url), "railio://%s,%s", e[0].addr[0], e[1].addr[0]);
    tu_opts(&o);
    tu_open(&u, url, &o);
    memset(pad, 'x', 200);
    pad[200] = '\0';
    for (unsigned i = 0; i < n; i++) {
        snprintf(key, sizeof(key), "t/%s%06u", pad, i);
        tu_put(u.c, key, 1, i);
    }
    T_EQ(list_all(u.c, "t/", 10000, 0, NULL, 0, &pages), n);
    T_GE(pages, 2u);
    tu_close(&u);
    for (int i = 0; i < 2; i++)
        T_EQ(srv_stop(&e[i]), 0);
}
