/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Listing on s3:// against a real radosgw (ListObjectsV2, tests/harness/
 * ceph.sh --rgw): pages through continuation tokens in byte order, prefix,
 * start-after, the '/' delimiter (common prefixes as RIO_ENTRY_DIR), keys
 * that need encoding, railio's sidecars left out, and a missing bucket
 * (RIO_ENOCONTAINER, distinct from a missing key, on every op).
 */
/* T_TIMEOUT 240 */
/* T_LABELS net;ceph */
#include "t.h"

#ifndef RIO_HAVE_CURL
TEST(s3_not_built)
{
    T_SKIP("built without libcurl (RIO_WITH_CURL)");
}
#else

#define SU_WITH_RGW
#include "s3_util.h"

#define CH (5 * SU_MIB)
#define BUCKET "riolist"

static struct rio_client *client_for(const char *bucket, const char *path, const char *extra,
                                     int64_t *alloc0, struct rio_options *o)
{
    char url[512];

    *alloc0 = rio__alloc_outstanding();
    su_opts(o, CH, 4);
    snprintf(url, sizeof(url), "s3://%s%s?endpoint=%s%s", bucket, path, su_rgw(BUCKET),
             extra ? extra : "");
    return su_client(url, o);
}

/* One page (rio_list). */
static int list_page(struct rio_client *c, const char *prefix, const char *token, const char *after,
                     unsigned max, unsigned flags, struct rio_list_page *p)
{
    struct rio_list_args a = {
        .prefix = prefix, .token = token, .start_after = after, .max_keys = max, .flags = flags};

    return rio_list(c, &a, p, NULL);
}

/* Every key under prefix, pages of max: the keys joined by '\n' into out. */
static unsigned list_all(struct rio_client *c, const char *prefix, unsigned max, unsigned flags,
                         char *out, size_t cap, unsigned *pages)
{
    struct rio_list_page p = {0};
    char token[RIO_LIST_TOKEN_MAX + 1] = "";
    unsigned n = 0;
    size_t o = 0;

    *pages = 0;
    out[0] = '\0';
    do {
        T_OK(list_page(c, prefix, token, NULL, max, flags, &p));
        T_LE(p.n, max);
        (*pages)++;
        T_LE(*pages, 1000u);
        for (unsigned i = 0; i < p.n; i++) {
            int w = snprintf(out + o, cap - o, "%s%s", p.entries[i].key,
                             p.entries[i].flags & RIO_ENTRY_DIR ? "(dir)\n" : "\n");
            T_GT(w, 0);
            T_LT((size_t)w, cap - o);
            o += (size_t)w;
            n++;
        }
        memcpy(token, p.next_token, sizeof(token));
        rio_list_page_cleanup(&p);
    } while (token[0]);
    return n;
}

/* 23 keys in pages of 5: every key once, in byte order, with its size,
 * MD5 and a modification time of now; the sidecar of a multipart object
 * is not listed; prefix, start-after and the delimiter. */
TEST(list_pages_prefix_delim)
{
    struct rio_options o;
    int64_t alloc0;
    char key[64], want[4096], got[4096];
    unsigned pages;
    size_t wo = 0;
    struct rio_client *c = client_for(BUCKET, "", NULL, &alloc0, &o);
    int64_t t0 = (int64_t)time(NULL) * 1000000000ll;

    /* a/00..a/19, then b/x, b/y/z and the multipart object m (2 parts,
     * so a sidecar m.railio-ID sits next to it). */
    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "a/%02d", i);
        t_put_pattern(c, key, 100 + (size_t)i, (uint64_t)i);
        wo += (size_t)snprintf(want + wo, sizeof(want) - wo, "%s\n", key);
    }
    t_put_pattern(c, "b/x", 1, 7);
    t_put_pattern(c, "b/y/z", 2, 8);
    t_put_pattern(c, "m", CH + 1, 9);
    T_EQ(su_curl_count(su_rgw(BUCKET), BUCKET "?prefix=m.railio-", "<Key>"), 1u);
    wo += (size_t)snprintf(want + wo, sizeof(want) - wo, "b/x\nb/y/z\nm\n");

    T_EQ(list_all(c, "", 5, 0, got, sizeof(got), &pages), 23u);
    T_STREQ(got, want);
    T_GE(pages, 5u);

    /* Sizes, MD5s, times. */
    struct rio_list_page p = {0};
    T_OK(list_page(c, "a/1", NULL, NULL, 100, 0, &p));
    T_EQ(p.n, 10u);
    T_STREQ(p.next_token, "");
    for (unsigned i = 0; i < p.n; i++) {
        struct rio_desc d;
        T_EQ(p.entries[i].size, 110u + i);
        T_EQ(p.entries[i].flags, 0u);
        T_OK(rio_stat(c, p.entries[i].key, &d));
        T_STREQ(p.entries[i].etag, d.etag);
        rio_desc_cleanup(&d);
        T_GT(p.entries[i].mtime_ns, t0 - 600 * 1000000000ll);
        T_LT(p.entries[i].mtime_ns, t0 + 600 * 1000000000ll);
    }
    rio_list_page_cleanup(&p);

    /* start-after (first page only). */
    T_OK(list_page(c, "a/", NULL, "a/17", 100, 0, &p));
    T_EQ(p.n, 2u);
    T_STREQ(p.entries[0].key, "a/18");
    T_STREQ(p.entries[1].key, "a/19");
    rio_list_page_cleanup(&p);

    /* The delimiter: a/ and b/ as directories, m as an object. */
    T_EQ(list_all(c, "", 1, RIO_LIST_DELIM, got, sizeof(got), &pages), 3u);
    T_STREQ(got, "a/(dir)\nb/(dir)\nm\n");
    T_EQ(list_all(c, "b/", 1000, RIO_LIST_DELIM, got, sizeof(got), &pages), 2u);
    T_STREQ(got, "b/x\nb/y/(dir)\n");
    T_EQ(pages, 1u);

    /* Nothing under a prefix: one empty last page. */
    T_EQ(list_all(c, "nothing/", 10, 0, got, sizeof(got), &pages), 0u);
    T_EQ(pages, 1u);

    for (int i = 0; i < 20; i++) {
        snprintf(key, sizeof(key), "a/%02d", i);
        T_OK(rio_delete(c, key));
    }
    T_OK(rio_delete(c, "b/x"));
    T_OK(rio_delete(c, "b/y/z"));
    T_OK(rio_delete(c, "m"));
    T_EQ(list_all(c, "", 1000, 0, got, sizeof(got), &pages), 0u);
    su_close(c, alloc0);
}

/* Keys that need encoding (space, '+', '%', '&', '<', UTF-8, a control
 * byte) come back byte-exact; the URL's own prefix is listed beneath and
 * stripped. */
TEST(list_encoded_keys_and_url_prefix)
{
    static const char *const keys[] = {"enc/ a",    "enc/+b",          "enc/%c",
                                       "enc/&d<e>", "enc/caf\xc3\xa9", "enc/tab\tx"};
    const size_t nk = sizeof(keys) / sizeof(keys[0]);
    struct rio_options o;
    int64_t alloc0;
    char got[4096], want[4096];
    unsigned pages;
    size_t wo = 0;
    struct rio_client *c = client_for(BUCKET, "/root", NULL, &alloc0, &o);

    for (size_t i = 0; i < nk; i++)
        t_put_pattern(c, keys[i], 10, i);
    /* Byte order: ' ' < '%' < '&' < '+' < 'c' < 't'. */
    static const size_t order[] = {0, 2, 3, 1, 4, 5};
    for (size_t i = 0; i < nk; i++)
        wo += (size_t)snprintf(want + wo, sizeof(want) - wo, "%s\n", keys[order[i]]);
    T_EQ(list_all(c, "enc/", 2, 0, got, sizeof(got), &pages), (unsigned)nk);
    T_STREQ(got, want);
    /* The objects are under root/ in the bucket. */
    T_EQ(su_curl_count(su_rgw(BUCKET), BUCKET "?prefix=root%2Fenc%2F", "<Key>"), (unsigned)nk);
    for (size_t i = 0; i < nk; i++)
        T_OK(rio_delete(c, keys[i]));
    su_close(c, alloc0);
}

/* A bucket that does not exist: RIO_ENOCONTAINER on every op, with the
 * bucket and S3's code in rio_error_detail; a missing key in a bucket
 * that exists stays RIO_ENOTFOUND. */
TEST(no_such_bucket_is_enocontainer)
{
    struct rio_options o;
    struct rio_desc d;
    struct rio_list_page p = {0};
    uint8_t buf[64] = {0};
    int64_t alloc0;
    struct rio_client *c = client_for("rio-missing-bucket", "", NULL, &alloc0, &o);

    T_ERR(rio_stat(c, "k", &d), RIO_ENOCONTAINER);
    T_NOTNULL(strstr(rio_error_detail(), "rio-missing-bucket"));
    T_ERR(rio_get(c, "k", buf, sizeof(buf), NULL), RIO_ENOCONTAINER);
    T_ERR(rio_put(c, "k", buf, sizeof(buf), NULL, NULL), RIO_ENOCONTAINER);
    T_ERR(rio_delete(c, "k"), RIO_ENOCONTAINER);
    T_ERR(list_page(c, "", NULL, NULL, 10, 0, &p), RIO_ENOCONTAINER);
    T_NOTNULL(strstr(rio_error_detail(), "rio-missing-bucket"));
    T_NOTNULL(strstr(rio_error_detail(), "NoSuchBucket"));
    T_NULL(p.entries);
    su_close(c, alloc0);

    c = client_for(BUCKET, "", NULL, &alloc0, &o);
    T_ERR(rio_stat(c, "no/such/key", &d), RIO_ENOTFOUND);
    T_ERR(rio_get(c, "no/such/key", buf, sizeof(buf), NULL), RIO_ENOTFOUND);
    T_ERR(rio_delete(c, "no/such/key"), RIO_ENOTFOUND);
    su_close(c, alloc0);
}

/* rio_exists_batch on s3:// (no exists op: the engine's HEADs in
 * parallel): which of 200 keys exist, the run of hits from the first, the
 * time it took; a missing bucket fails the batch with RIO_ENOCONTAINER. */
TEST(exists_batch_heads)
{
    enum { N = 200, HIT = 61 };
    struct rio_options o;
    int64_t alloc0;
    static char names[N][32];
    const char *keys[N];
    uint8_t ex[N];
    unsigned hits = 0;
    struct rio_client *c = client_for(BUCKET, "/ex", NULL, &alloc0, &o);

    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof(names[i]), "blk/%04d", i);
        keys[i] = names[i];
        /* the first HIT, then every third */
        if (i < HIT || i % 3 == 0)
            t_put_pattern(c, names[i], 64, (uint64_t)i);
    }
    int64_t t0 = su_now_ms();
    int n = rio_exists_batch(c, keys, N, ex, &hits, NULL);
    int64_t ms = su_now_ms() - t0;
    int want = HIT;
    for (int i = HIT; i < N; i++)
        want += i % 3 == 0;
    T_EQ(n, want);
    T_EQ(hits, (unsigned)HIT);
    for (int i = 0; i < N; i++)
        T_EQ(ex[i], (uint8_t)(i < HIT || i % 3 == 0));
    fprintf(stderr, "  exists_batch: %d keys (%d present) in %lld ms\n", N, want, (long long)ms);
    for (int i = 0; i < N; i++)
        if (ex[i])
            T_OK(rio_delete(c, names[i]));
    su_close(c, alloc0);

    c = client_for("rio-missing-bucket", "", NULL, &alloc0, &o);
    T_ERR(rio_exists_batch(c, keys, 4, ex, &hits, NULL), RIO_ENOCONTAINER);
    su_close(c, alloc0);
}
#endif
