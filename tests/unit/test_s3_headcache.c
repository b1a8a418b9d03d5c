/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The S3 gateway's head cache (src/server/s3/headcache.c, docs/gateway.md
 * "GET and the head cache") and the metadata records it keeps with each
 * head: a record (or its absence) is answered only for the generation it
 * was read for; a lookup's put never replaces a live entry of the same
 * generation (nor the record a write left there); a write through the
 * gateway (wrote, drop) replaces or forgets the entry and its record, and a
 * record read before that write is not kept; off (TTL 0), nothing is kept.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"
#include "t.h"

/* A one-chunk object of generation gen (its checksum list malloc'd). */
static struct rio_desc desc(const char *key, uint64_t gen)
{
    struct rio_desc d;

    memset(&d, 0, sizeof(d));
    snprintf(d.key, sizeof(d.key), "%s", key);
    d.generation = gen;
    d.size = 1000;
    d.chunk_size = 4096;
    d.nchunks = 1;
    d.xxh = rio__malloc(sizeof(*d.xxh));
    T_NOTNULL(d.xxh);
    d.xxh[0] = gen * 7;
    snprintf(d.etag, sizeof(d.etag), "%032llx", (unsigned long long)gen);
    return d;
}

static struct gw_meta *meta(const char *who, uint64_t gen)
{
    struct gw_meta *m = rio__gw_meta_new();

    T_NOTNULL(m);
    T_OK(rio__gw_meta_add_user(m, "who", who));
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_TYPE, "text/x-test"));
    m->size = 1000;
    m->generation = gen;
    snprintf(m->etag, sizeof(m->etag), "%032llx", (unsigned long long)gen);
    return m;
}

/* The cached record of key for d: 1 with *who its x-amz-meta-who ("" when
 * the cache says there is no record), 0 when not cached. */
static int cached(const char *key, const struct rio_desc *d, char *who, size_t cap)
{
    struct gw_meta *m = NULL;
    int hit = rio__gw_head_meta(key, d, &m);

    who[0] = '\0';
    if (m) {
        T_EQ(hit, 1);
        T_EQ(m->nuser, 1u);
        T_STREQ(m->hdr[GW_MH_CONTENT_TYPE], "text/x-test");
        T_EQ(m->generation, d->generation);
        snprintf(who, cap, "%s", m->user[0].value);
        rio__gw_meta_free(m);
    }
    return hit;
}

TEST(record_kept_for_its_generation)
{
    struct rio_desc g1 = desc("b/k", 1), g2 = desc("b/k", 2);
    struct gw_meta *m1 = meta("one", 1), *m2 = meta("two", 2);
    char who[32];
    uint64_t e;

    rio__gw_head_ttl(3600ull * 1000000000);
    /* A lookup put the head: the record is not known yet. */
    e = rio__gw_head_epoch("b/k");
    rio__gw_head_put("b/k", &g1, 5);
    T_EQ(cached("b/k", &g1, who, sizeof(who)), 0);
    rio__gw_head_set_meta("b/k", &g1, m1, e);
    T_EQ(cached("b/k", &g1, who, sizeof(who)), 1);
    T_STREQ(who, "one");
    /* Another generation (a lookup found the key replaced): not answered,
     * and not kept for it. */
    T_EQ(cached("b/k", &g2, who, sizeof(who)), 0);
    rio__gw_head_set_meta("b/k", &g2, m2, rio__gw_head_epoch("b/k"));
    T_EQ(cached("b/k", &g2, who, sizeof(who)), 0);
    /* A lookup of the same generation leaves the entry (and its record) as
     * it is; of another one, replaces it, record unknown. */
    rio__gw_head_put("b/k", &g1, 6);
    T_EQ(cached("b/k", &g1, who, sizeof(who)), 1);
    T_STREQ(who, "one");
    rio__gw_head_put("b/k", &g2, 7);
    T_EQ(cached("b/k", &g1, who, sizeof(who)), 0);
    T_EQ(cached("b/k", &g2, who, sizeof(who)), 0);
    /* No record is an answer too. */
    rio__gw_head_set_meta("b/k", &g2, NULL, rio__gw_head_epoch("b/k"));
    T_EQ(cached("b/k", &g2, who, sizeof(who)), 1);
    T_STREQ(who, "");
    /* Once known, a later reader does not replace it. */
    rio__gw_head_set_meta("b/k", &g2, m2, rio__gw_head_epoch("b/k"));
    T_EQ(cached("b/k", &g2, who, sizeof(who)), 1);
    T_STREQ(who, "");
    /* Another key is another entry. */
    T_EQ(cached("b/other", &g2, who, sizeof(who)), 0);
    rio__gw_head_clear();
    T_EQ(cached("b/k", &g2, who, sizeof(who)), 0);
    rio__gw_meta_free(m1);
    rio__gw_meta_free(m2);
    rio_desc_cleanup(&g1);
    rio_desc_cleanup(&g2);
}

TEST(writes_replace_and_invalidate)
{
    struct rio_desc g1 = desc("b/w", 1), g2 = desc("b/w", 2), d;
    struct gw_meta *m1 = meta("one", 1), *m2 = meta("two", 2);
    char who[32];
    int64_t mtime = 0;
    uint64_t e;

    rio__gw_head_ttl(3600ull * 1000000000);
    /* A PUT through the gateway: head and record known at once. */
    rio__gw_head_wrote("b/w", &g1, 9, m1);
    T_EQ(rio__gw_head_get("b/w", &d, &mtime), 1);
    T_EQ(d.generation, 1u);
    T_EQ(mtime, 9);
    T_EQ(d.xxh[0], 7u);
    rio_desc_cleanup(&d);
    T_EQ(cached("b/w", &g1, who, sizeof(who)), 1);
    T_STREQ(who, "one");

    /* A GET that looked g1 up and read its record before a PUT of g2 came
     * through: neither its head nor its record displaces the writer's. */
    e = rio__gw_head_epoch("b/w");
    rio__gw_head_wrote("b/w", &g2, 10, m2);
    rio__gw_head_put("b/w", &g2, 11);
    rio__gw_head_set_meta("b/w", &g2, NULL, e);
    T_EQ(cached("b/w", &g2, who, sizeof(who)), 1);
    T_STREQ(who, "two");
    T_EQ(rio__gw_head_get("b/w", &d, &mtime), 1);
    T_EQ(mtime, 10);
    rio_desc_cleanup(&d);

    /* A PUT without metadata: the cache says "no record". */
    rio__gw_head_wrote("b/w", &g1, 12, NULL);
    T_EQ(cached("b/w", &g1, who, sizeof(who)), 1);
    T_STREQ(who, "");

    /* Copy, Complete, Delete drop the entry; a record read before the drop
     * (the object's old one, or none) is not kept after it. */
    e = rio__gw_head_epoch("b/w");
    rio__gw_head_drop("b/w");
    T_EQ(rio__gw_head_get("b/w", &d, &mtime), 0);
    T_EQ(cached("b/w", &g1, who, sizeof(who)), 0);
    rio__gw_head_put("b/w", &g2, 13);
    rio__gw_head_set_meta("b/w", &g2, NULL, e);
    T_EQ(cached("b/w", &g2, who, sizeof(who)), 0);
    rio__gw_head_set_meta("b/w", &g2, m2, rio__gw_head_epoch("b/w"));
    T_EQ(cached("b/w", &g2, who, sizeof(who)), 1);
    T_STREQ(who, "two");

    /* An object the cache cannot hold (empty: nothing to prove it stale)
     * written over a cached one: the old entry goes. */
    {
        struct rio_desc empty = desc("b/w", 3);
        empty.size = 0;
        rio__gw_head_wrote("b/w", &empty, 14, NULL);
        T_EQ(rio__gw_head_get("b/w", &d, &mtime), 0);
        T_EQ(cached("b/w", &g2, who, sizeof(who)), 0);
        rio_desc_cleanup(&empty);
    }
    rio__gw_head_clear();
    rio__gw_meta_free(m1);
    rio__gw_meta_free(m2);
    rio_desc_cleanup(&g1);
    rio_desc_cleanup(&g2);
}

TEST(off_keeps_nothing)
{
    struct rio_desc g1 = desc("b/o", 1), d;
    struct gw_meta *m1 = meta("one", 1);
    char who[32];
    int64_t mtime = 0;

    rio__gw_head_ttl(0);
    rio__gw_head_wrote("b/o", &g1, 1, m1);
    rio__gw_head_put("b/o", &g1, 1);
    rio__gw_head_set_meta("b/o", &g1, m1, rio__gw_head_epoch("b/o"));
    T_EQ(rio__gw_head_get("b/o", &d, &mtime), 0);
    T_EQ(cached("b/o", &g1, who, sizeof(who)), 0);
    rio__gw_head_ttl(UINT64_MAX); /* the default again */
    rio__gw_head_clear();
    rio__gw_meta_free(m1);
    rio_desc_cleanup(&g1);
}
