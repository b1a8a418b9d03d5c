/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 300 */
/* T_LABELS net;ceph */
/*
 * railiod's S3 gateway over rados:// on a single-host Ceph cluster
 * (tests/harness/ceph.sh), two gateways on one pool: an object PUT through
 * one is listed, read (whole and a range) and deleted through the other,
 * every byte compared; a bucket made through one is seen by the other;
 * concurrent PUTs of one key through both leave one whole version; a
 * gateway killed in the middle of a PUT leaves nothing visible; metadata and
 * the multipart ETag written through one are what the other answers; the
 * head cache of one never serves what the other replaced or deleted; the
 * metadata records it keeps with the heads (and "no record") are what a
 * cached GET or HEAD answers, and every write through it replaces them; a
 * Complete of parts in whole chunks composes them without a copy. Listings
 * come in key order, scanned or (a pool given a key index while the
 * gateway runs) from the index.
 */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(gw_rados_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS "--osds 1 --pool rio --pool rix"
#include "ceph_env.h"
#include "gw_util.h"
#include "rados_util.h"
#include <stdbool.h>

TEST(two_gateways_one_pool)
{
    struct gw a, b;
    char url[1024];

    gw_need();
    ru_url(url, sizeof(url), "rio", NULL);
    gw_start(&a, url, NULL);
    gw_start(&b, url, NULL);
    gw_file(&a, "src", 9 * 1024 * 1024 + 5, 21);

    T_EQ(gw_curl(&a, "o", "-X PUT %s/cbk", a.url), 200);
    T_EQ(gw_curl(&b, "o", "-I %s/cbk", b.url), 200);
    T_EQ(gw_curl(&b, "o", "-X PUT %s/cbk", b.url), 200); /* it exists: as it was */
    T_EQ(gw_curl(&a, "o", "-T %s %s/cbk/d/obj", gw_path(&a, "src"), a.url), 200);
    T_EQ(t_sh("md5sum %s | cut -c1-32 > %s", gw_path(&a, "src"), gw_path(&a, "md5")), 0);
    T_EQ(t_sh("grep -qi \"etag: \\\"$(cat %s)\\\"\" %s", gw_path(&a, "md5"), gw_path(&a, "o.h")),
         0);
    /* Through the other gateway: listed, read, ranged. */
    T_EQ(gw_curl(&b, "l", "'%s/cbk?list-type=2&prefix=d/'", b.url), 200);
    T_TRUE(gw_has(&b, "l", "<Key>d/obj</Key>"));
    T_TRUE(gw_has(&b, "l", "<Size>9437189</Size>"));
    T_EQ(gw_curl(&b, "got", "%s/cbk/d/obj", b.url), 200);
    T_EQ(t_sh("cmp -s %s %s", gw_path(&a, "src"), gw_path(&b, "got")), 0);
    T_EQ(gw_curl(&b, "r", "-r 4194300-4194400 %s/cbk/d/obj", b.url), 206);
    T_EQ(t_sh("tail -c +4194301 %s | head -c 101 | cmp -s - %s", gw_path(&a, "src"),
              gw_path(&b, "r")),
         0);
    /* A bad digest through one: nothing visible through the other. */
    T_EQ(gw_curl(&a, "o", "-T %s -H 'Content-MD5: AAAAAAAAAAAAAAAAAAAAAA==' %s/cbk/d/bad",
                 gw_path(&a, "src"), a.url),
         400);
    T_EQ(gw_curl(&b, "o", "-I %s/cbk/d/bad", b.url), 404);
    /* Concurrent PUTs of one key through both: one whole version. */
    gw_file(&a, "v1", 6 * 1024 * 1024 + 1, 31);
    gw_file(&a, "v2", 6 * 1024 * 1024 + 2, 32);
    T_EQ(t_sh("curl -sf -o /dev/null -T %s %s/cbk/same & curl -sf -o /dev/null -T %s %s/cbk/same "
              "& wait",
              gw_path(&a, "v1"), a.url, gw_path(&a, "v2"), b.url),
         0);
    T_EQ(gw_curl(&a, "same", "%s/cbk/same", a.url), 200);
    T_TRUE(gw_same(&a, "same", "v1") || gw_same(&a, "same", "v2"));
    /* A gateway killed in the middle of a PUT: nothing visible. */
    {
        struct gw k;
        gw_start(&k, url, NULL);
        T_EQ(t_sh("(curl -s -o /dev/null --limit-rate 2M -T %s %s/cbk/half &) ; sleep 1.5",
                  gw_path(&a, "src"), k.url),
             0);
        srv_kill9(&k.e);
        T_EQ(gw_curl(&b, "o", "-I %s/cbk/half", b.url), 404);
        T_EQ(gw_curl(&b, "l", "'%s/cbk?list-type=2'", b.url), 200);
        T_FALSE(gw_has(&b, "l", "half"));
    }
    T_EQ(gw_curl(&b, "o", "-X DELETE %s/cbk/same", b.url), 204);
    /* Metadata and the multipart ETag: written through one, read through the other. */
    T_EQ(gw_curl(&a, "c",
                 "-X POST -H 'x-amz-meta-who: a' -H 'Content-Type: text/x-a' "
                 "'%s/cbk/mp?uploads'",
                 a.url),
         200);
    T_EQ(t_sh("sed -n 's#.*<UploadId>\\(.*\\)</UploadId>.*#\\1#p' %s > %s", gw_path(&a, "c"),
              gw_path(&a, "id")),
         0);
    {
        /* gw_path's buffers are few: the paths first. */
        char id[256], ph[256], src[256], cx[256], done[256];
        snprintf(id, sizeof(id), "%s", gw_path(&a, "id"));
        snprintf(ph, sizeof(ph), "%s", gw_path(&a, "p.h"));
        snprintf(src, sizeof(src), "%s", gw_path(&a, "src"));
        snprintf(cx, sizeof(cx), "%s", gw_path(&a, "c.xml"));
        snprintf(done, sizeof(done), "%s", gw_path(&a, "done"));
        T_EQ(t_sh("id=$(cat %s) && curl -sf -o /dev/null -D %s -T %s "
                  "\"%s/cbk/mp?uploadId=$id&partNumber=1\" "
                  "&& etag=$(grep -i '^etag:' %s | tr -d '\\r' | cut -d' ' -f2) "
                  "&& printf '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
                  "<ETag>%%s</ETag></Part></CompleteMultipartUpload>' \"$etag\" > %s "
                  "&& curl -sf -o %s -X POST --data-binary @%s \"%s/cbk/mp?uploadId=$id\"",
                  id, ph, src, a.url, ph, cx, done, cx, a.url),
             0);
    }
    T_TRUE(gw_has(&a, "done", "-1&quot;</ETag>"));
    T_EQ(gw_curl(&b, "o", "-I %s/cbk/mp", b.url), 200);
    T_TRUE(gw_has(&b, "o.h", "x-amz-meta-who: a\r\n"));
    T_TRUE(gw_has(&b, "o.h", "Content-Type: text/x-a\r\n"));
    T_TRUE(gw_has(&b, "o.h", "-1\"\r\n"));
    T_EQ(gw_curl(&b, "l", "'%s/cbk?list-type=2&prefix=mp'", b.url), 200);
    T_TRUE(gw_has(&b, "l", "-1&quot;</ETag>"));
    /* A plain PUT through b: a reads it back without a's metadata. */
    T_EQ(gw_curl(&b, "o", "-T %s %s/cbk/mp", gw_path(&a, "v1"), b.url), 200);
    T_EQ(gw_curl(&a, "o", "-I %s/cbk/mp", a.url), 200);
    T_FALSE(gw_has(&a, "o.h", "x-amz-meta-who"));
    T_FALSE(gw_has(&a, "o.h", "-1\"\r\n"));
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/cbk/mp", a.url), 204);
    /* Deleted through the other; the bucket then goes. */
    T_EQ(gw_curl(&b, "o", "-X DELETE %s/cbk/d/obj", b.url), 204);
    T_EQ(gw_curl(&a, "o", "-I %s/cbk/d/obj", a.url), 404);
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/cbk", a.url), 204);
    T_EQ(gw_curl(&b, "o", "-I %s/cbk", b.url), 404);
    gw_stop(&b);
    gw_stop(&a);
}

/* The head cache is a hint, never the answer: gateway a keeps (for an hour
 * here) the descriptors it wrote and read, gateway b replaces and deletes
 * the objects behind its back; every GET through a still serves the bytes
 * of the object as it is now, whole or a range, and a deleted one is 404. */
/* Conditional writes and deletes through two gateways over one pool: the condition
 * is the RADOS head's guarded swap, so of eight If-None-Match PUTs of a new
 * key, four through each gateway, exactly one is 200 (and its body is the
 * object), and an If-Match on an ETag one gateway saw fails once the other
 * replaced the object. */
TEST(conditional_puts_two_gateways)
{
    struct gw a, b;
    char url[1024];

    gw_need();
    ru_url(url, sizeof(url), "rio", NULL);
    gw_start(&a, url, NULL);
    gw_start(&b, url, NULL);
    T_EQ(gw_curl(&a, "o", "-X PUT %s/cnd", a.url), 200);
    gw_race_if_none_match(&a, a.url, b.url, "cnd/race");
    /* If-Match on the ETag a saw, after b replaced it: refused. */
    T_EQ(gw_curl(&a, "o", "-X PUT -d one %s/cnd/k", a.url), 200);
    T_EQ(gw_curl(&b, "o",
                 "-X PUT -d two -H 'If-Match: \"f97c5d29941bfb1b2fdab0874906ab82\"' "
                 "%s/cnd/k",
                 b.url),
         200);
    T_EQ(gw_curl(&a, "o",
                 "-X PUT -d three -H 'If-Match: \"f97c5d29941bfb1b2fdab0874906ab82\"' "
                 "%s/cnd/k",
                 a.url),
         412);
    T_EQ(gw_curl(&a, "got", "%s/cnd/k", a.url), 200);
    T_TRUE(t_sh("printf two | cmp -s - %s", gw_path(&a, "got")) == 0);
    /* CompleteMultipartUpload: over rados:// the parts composed, the
     * condition decided by the composed head's swap. */
    gw_conditional_completes(&a, "cnd");
    /* DeleteObject's If-Match on the ETag a saw, after b replaced it: the
     * object stays; on the one it holds: gone through both. */
    T_EQ(gw_curl(&a, "o", "-X PUT -d one %s/cnd/d", a.url), 200);
    T_EQ(gw_curl(&b, "o", "-X PUT -d two %s/cnd/d", b.url), 200);
    T_EQ(gw_curl(&a, "o", "-X DELETE -H 'If-Match: \"f97c5d29941bfb1b2fdab0874906ab82\"' %s/cnd/d",
                 a.url),
         412);
    T_EQ(gw_curl(&b, "o", "-X DELETE -H 'If-Match: \"b8a9f715dbb64fd5c56e7783c6820a61\"' %s/cnd/d",
                 b.url),
         204);
    T_EQ(gw_curl(&a, "o", "-I %s/cnd/d", a.url), 404);
    gw_stop(&a);
    gw_stop(&b);
}

TEST(head_cache_never_stale)
{
    static const char *const hour[] = {"--s3-head-cache", "1h", NULL};
    struct gw a, b;
    char url[1024];

    gw_need();
    ru_url(url, sizeof(url), "rio", NULL);
    gw_start(&a, url, hour);
    gw_start(&b, url, NULL);
    gw_file(&a, "v1", 9 * 1024 * 1024 + 5, 41);
    gw_file(&a, "v2", 5 * 1024 * 1024 + 7, 42);
    gw_file(&a, "v3", 70 * 1024, 43);
    T_EQ(gw_curl(&a, "o", "-X PUT %s/hcb", a.url), 200);

    /* Written through a: its descriptor cached there; read back. */
    T_EQ(gw_curl(&a, "o", "-T %s %s/hcb/k", gw_path(&a, "v1"), a.url), 200);
    T_EQ(gw_curl(&a, "got", "%s/hcb/k", a.url), 200);
    T_TRUE(gw_same(&a, "got", "v1"));
    T_GE(srv_scrape(&a.e, "railiod_s3_head_cache_total{result=\"hit\"}"), 1);
    /* Replaced through b: a serves the new bytes, whole and a range. */
    T_EQ(gw_curl(&b, "o", "-T %s %s/hcb/k", gw_path(&a, "v2"), b.url), 200);
    T_EQ(gw_curl(&a, "got", "%s/hcb/k", a.url), 200);
    T_TRUE(gw_same(&a, "got", "v2"));
    T_EQ(gw_curl(&b, "o", "-T %s %s/hcb/k", gw_path(&a, "v1"), b.url), 200);
    T_EQ(gw_curl(&a, "r", "-r 4194300-4194400 %s/hcb/k", a.url), 206);
    T_EQ(t_sh("tail -c +4194301 %s | head -c 101 | cmp -s - %s", gw_path(&a, "v1"),
              gw_path(&a, "r")),
         0);
    /* A smaller one (one chunk) behind a range a has cached. */
    T_EQ(gw_curl(&b, "o", "-T %s %s/hcb/k", gw_path(&a, "v3"), b.url), 200);
    T_EQ(gw_curl(&a, "got", "%s/hcb/k", a.url), 200);
    T_TRUE(gw_same(&a, "got", "v3"));
    T_EQ(gw_curl(&a, "o", "-I %s/hcb/k", a.url), 200);
    T_TRUE(gw_has(&a, "o.h", "Content-Length: 71680"));
    /* Deleted through b, cached in a: 404 NoSuchKey. */
    T_EQ(gw_curl(&a, "got", "%s/hcb/k", a.url), 200);
    T_EQ(gw_curl(&b, "o", "-X DELETE %s/hcb/k", b.url), 204);
    T_EQ(gw_curl(&a, "got", "%s/hcb/k", a.url), 404);
    T_TRUE(gw_has(&a, "got", "NoSuchKey"));
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/hcb", a.url), 204);
    gw_stop(&b);
    gw_stop(&a);
}

/* The records of cached objects come from the head cache (an hour here):
 * a record removed behind gateway a's back still shows through a (not
 * through b, which reads the backend), and one written behind its back for
 * an object a cached without a record does not; every write through a
 * (PUT with and without metadata, CopyObject, DeleteObject) shows at once. */
TEST(meta_cache)
{
    static const char *const hour[] = {"--s3-head-cache", "1h", NULL};
    struct gw a, b;
    struct rio_options o;
    struct rio_client *c;
    struct rio_desc d;
    char url[1024], rk[256], rec[512];
    double hits;

    gw_need();
    ru_url(url, sizeof(url), "rio", NULL);
    gw_start(&a, url, hour);
    gw_start(&b, url, NULL);
    ru_opts(&o, 4 * RU_MIB, 4);
    c = ru_client("rio", NULL, &o);
    gw_file(&a, "src", 70 * 1024, 51);
    T_EQ(gw_curl(&a, "o", "-X PUT %s/mcb", a.url), 200);

    /* PUT with metadata through a: head and record cached there. */
    T_EQ(gw_curl(&a, "o", "-T %s -H 'x-amz-meta-v: 1' %s/mcb/k", gw_path(&a, "src"), a.url), 200);
    hits = srv_scrape(&a.e, "railiod_s3_meta_cache_total{result=\"hit\"}");
    T_EQ(gw_curl(&a, "o", "-I %s/mcb/k", a.url), 200);
    T_TRUE(gw_has(&a, "o.h", "x-amz-meta-v: 1\r\n"));
    T_EQ(srv_scrape(&a.e, "railiod_s3_meta_cache_total{result=\"hit\"}"), hits + 1);
    /* The record removed behind a's back: a still answers it, b does not. */
    gw_record_key(&a, "mcb", "k", rk, sizeof(rk));
    T_OK(rio_delete(c, rk));
    T_EQ(gw_curl(&a, "got", "%s/mcb/k", a.url), 200);
    T_TRUE(gw_has(&a, "got.h", "x-amz-meta-v: 1\r\n"));
    T_TRUE(gw_same(&a, "got", "src"));
    T_EQ(gw_curl(&b, "o", "-I %s/mcb/k", b.url), 200);
    T_FALSE(gw_has(&b, "o.h", "x-amz-meta-v"));
    /* Writes through a replace what it answers at once. */
    T_EQ(gw_curl(&a, "o", "-T %s -H 'x-amz-meta-v: 2' %s/mcb/k", gw_path(&a, "src"), a.url), 200);
    T_EQ(gw_curl(&a, "o", "-I %s/mcb/k", a.url), 200);
    T_TRUE(gw_has(&a, "o.h", "x-amz-meta-v: 2\r\n"));
    T_EQ(gw_curl(&a, "o", "-T %s %s/mcb/k", gw_path(&a, "src"), a.url), 200);
    T_EQ(gw_curl(&a, "got", "%s/mcb/k", a.url), 200);
    T_FALSE(gw_has(&a, "got.h", "x-amz-meta-v"));
    T_EQ(gw_curl(&a, "o", "-T %s -H 'x-amz-meta-v: 3' %s/mcb/k3", gw_path(&a, "src"), a.url), 200);
    T_EQ(gw_curl(&a, "o", "-X PUT -H 'x-amz-copy-source: /mcb/k3' %s/mcb/k", a.url), 200);
    T_EQ(gw_curl(&a, "o", "-I %s/mcb/k", a.url), 200);
    T_TRUE(gw_has(&a, "o.h", "x-amz-meta-v: 3\r\n"));
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/mcb/k", a.url), 204);
    T_EQ(gw_curl(&a, "o", "-I %s/mcb/k", a.url), 404);
    T_EQ(gw_curl(&a, "got", "%s/mcb/k", a.url), 404);

    /* No record is cached too: a record written behind a's back for the
     * object a cached without one shows through b only. */
    T_EQ(gw_curl(&a, "o", "-T %s %s/mcb/p", gw_path(&a, "src"), a.url), 200);
    T_EQ(gw_curl(&a, "o", "-I %s/mcb/p", a.url), 200);
    T_FALSE(gw_has(&a, "o.h", "x-amz-meta-w"));
    memset(&d, 0, sizeof(d));
    T_OK(rio_stat(c, "mcb/p", &d));
    snprintf(rec, sizeof(rec),
             "railio-s3-meta 1\nkey mcb/p\nsize %llu\ngeneration %016llx\netag %s\n"
             "s3-etag -\nmeta w behind\nend\n",
             (unsigned long long)d.size, (unsigned long long)d.generation, d.etag);
    rio_desc_cleanup(&d);
    gw_record_key(&a, "mcb", "p", rk, sizeof(rk));
    T_OK(rio_put(c, rk, rec, strlen(rec), NULL, NULL));
    T_EQ(gw_curl(&b, "o", "-I %s/mcb/p", b.url), 200);
    T_TRUE(gw_has(&b, "o.h", "x-amz-meta-w: behind\r\n"));
    T_EQ(gw_curl(&a, "o", "-I %s/mcb/p", a.url), 200);
    T_FALSE(gw_has(&a, "o.h", "x-amz-meta-w"));
    T_EQ(gw_curl(&a, "got", "%s/mcb/p", a.url), 200);
    T_FALSE(gw_has(&a, "got.h", "x-amz-meta-w"));
    T_TRUE(gw_same(&a, "got", "src"));

    T_EQ(gw_curl(&a, "o", "-X DELETE %s/mcb/p", a.url), 204);
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/mcb/k3", a.url), 204);
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/mcb", a.url), 204);
    ru_idle(c);
    rio_client_destroy(c);
    gw_stop(&b);
    gw_stop(&a);
}

/* A multipart upload of parts in whole chunks through one gateway
 * (`mpu PARTS...`: sizes in bytes): every part sent, then Complete. The
 * part files are p1, p2, ...; the whole object is "all". */
static void mpu(struct gw *g, struct gw *also, const char *key, const size_t *sizes, unsigned n)
{
    char dir[512], name[16];

    snprintf(dir, sizeof(dir), "%s", gw_path(g, ""));
    T_EQ(t_sh("rm -f %s/all %s/cx", dir, dir), 0);
    for (unsigned i = 0; i < n; i++) {
        snprintf(name, sizeof(name), "p%u", i + 1);
        gw_file(g, name, sizes[i], 60 + i);
        T_EQ(t_sh("cat %s/%s >> %s/all", dir, name, dir), 0);
    }
    T_EQ(gw_curl(g, "c", "-X POST '%s/cbk/%s?uploads'", g->url, key), 200);
    T_EQ(
        t_sh("cd %s && id=$(sed -n 's#.*<UploadId>\\(.*\\)</UploadId>.*#\\1#p' c) && echo $id > id "
             "&& printf '<CompleteMultipartUpload>' > cx && for i in $(seq %u); do "
             "curl -sf -o /dev/null -D ph -T p$i \"%s/cbk/%s?uploadId=$id&partNumber=$i\" || exit "
             "1; "
             "etag=$(grep -i '^etag:' ph | tr -d '\\r' | cut -d' ' -f2); "
             "printf '<Part><PartNumber>%%s</PartNumber><ETag>%%s</ETag></Part>' $i \"$etag\" >> "
             "cx; "
             "done && printf '</CompleteMultipartUpload>' >> cx",
             dir, n, g->url, key),
        0);
    if (!also) {
        T_EQ(t_sh("cd %s && curl -sf -o done -X POST --data-binary @cx \"%s/cbk/%s?uploadId=$(cat "
                  "id)\"",
                  dir, g->url, key),
             0);
        T_TRUE(gw_has(g, "done", "&quot;</ETag>"));
        return;
    }
    /* Complete through both gateways at once: one wins (or both make the
     * same object); the other may find the upload gone. */
    T_EQ(t_sh("cd %s && id=$(cat id) && (curl -s -o done -w '%%{http_code}\\n' -X POST "
              "--data-binary @cx \"%s/cbk/%s?uploadId=$id\" & curl -s -o done2 -w "
              "'%%{http_code}\\n' -X POST --data-binary @cx \"%s/cbk/%s?uploadId=$id\" & wait) > "
              "codes && grep -q '^200$' codes",
              dir, g->url, key, also->url, key),
         0);
}

/* Complete over rados:// composes parts of whole chunks without a copy:
 * the object's head lists the parts' chunks (version 2), no part's head
 * is left, the object reads back byte-exact with S3's multipart ETag, and
 * its delete removes every chunk. Parts of 5 MiB (one chunk each) compose,
 * with a last part smaller than them or (copied onto itself in their chunk
 * size) larger. Parts of uneven sizes are copied as before. Two gateways completing one upload at
 * once leave one whole object and nothing fsck must not remove. */
TEST(complete_composes_parts)
{
    struct gw a;
    char url[1024];
    const size_t even[] = {8u << 20, 8u << 20, (3u << 20) + 11};
    const size_t odd[] = {5u << 20, (6u << 20) + 3, 1u << 20};
    /* 5 MiB parts (railio's, rclone's): each one chunk of its own size. */
    const size_t five[] = {5u << 20, 5u << 20, 5u << 20, 1u << 20};
    /* A last part larger than the others' chunk: copied onto itself. */
    const size_t fivel[] = {5u << 20, 5u << 20, (5u << 20) + 3};

    gw_need();
    ru_url(url, sizeof(url), "rio", NULL);
    gw_start(&a, url, NULL);
    T_EQ(gw_curl(&a, "o", "-X PUT %s/cbk", a.url), 200);
    uint64_t before = ru_chunks("rio", NULL);

    mpu(&a, NULL, "big", even, 3);
    T_TRUE(gw_has(&a, "done", "-3&quot;</ETag>"));
    size_t len = 0;
    char *h = ru_head("rio", "cbk/big", &len);
    T_TRUE(len > 20 && memcmp(h, RIO_RADOS_HEAD_MAGIC2 "\n", 20) == 0);
    unsigned long nch = 0;
    T_TRUE(strstr(h, "\nnchunks ") && sscanf(strstr(h, "\nnchunks "), "\nnchunks %lu", &nch) == 1);
    free(h);
    /* The parts' chunks are the object's, exactly; no part head is left. */
    T_EQ(ru_objects("rio", ".rio-mpu/cbk/"), 0);
    T_EQ(ru_chunks("rio", "cbk/big."), 0);
    T_GT(nch, 2);
    T_EQ(ru_chunks("rio", ".rio-mpu/cbk/"), nch);
    T_EQ(gw_curl(&a, "got", "%s/cbk/big", a.url), 200);
    T_TRUE(gw_same(&a, "got", "all"));
    T_TRUE(gw_has(&a, "got.h", "-3\""));
    T_EQ(gw_curl(&a, "r", "-r 8388600-8388700 %s/cbk/big", a.url), 206);
    T_TRUE(gw_range_is(&a, "r", "all", 8388600, 101));
    T_EQ(gw_curl(&a, "r", "'%s/cbk/big?partNumber=3'", a.url), 206); /* a composed part */
    T_TRUE(gw_range_is(&a, "r", "all", 16u << 20, (3u << 20) + 11));
    T_TRUE(gw_has(&a, "r.h", "x-amz-mp-parts-count: 3"));
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/cbk/big", a.url), 204);
    T_EQ(ru_chunks("rio", ".rio-mpu/cbk/"), 0);

    for (int v = 0; v < 2; v++) {
        mpu(&a, NULL, "five", v ? fivel : five, v ? 3 : 4);
        h = ru_head("rio", "cbk/five", &len);
        T_TRUE(len > 20 && memcmp(h, RIO_RADOS_HEAD_MAGIC2 "\n", 20) == 0);
        nch = 0;
        T_TRUE(strstr(h, "\nnchunks ") &&
               sscanf(strstr(h, "\nnchunks "), "\nnchunks %lu", &nch) == 1);
        T_TRUE(strstr(h, ".rio-mpu/cbk/") != NULL); /* the parts' chunks, not copies */
        T_TRUE(strstr(h, "\nchunk_size 5242880\n") != NULL);
        free(h);
        T_EQ(nch, 4);
        T_EQ(ru_objects("rio", ".rio-mpu/cbk/"), 0);
        T_EQ(ru_chunks("rio", "cbk/five."), 0);
        T_EQ(ru_chunks("rio", ".rio-mpu/cbk/"), nch);
        T_EQ(gw_curl(&a, "got", "%s/cbk/five", a.url), 200);
        T_TRUE(gw_same(&a, "got", "all"));
        T_TRUE(gw_has(&a, "got.h", v ? "-3\"" : "-4\""));
        T_EQ(gw_curl(&a, "r", "-r 10485700-15728650 %s/cbk/five", a.url), 206);
        T_TRUE(gw_range_is(&a, "r", "all", 10485700, 15728650 - 10485700 + 1));
        T_EQ(gw_curl(&a, "o", "-X DELETE %s/cbk/five", a.url), 204);
        T_EQ(ru_chunks("rio", ".rio-mpu/cbk/"), 0);
    }

    mpu(&a, NULL, "odd", odd, 3);
    h = ru_head("rio", "cbk/odd", &len);
    T_TRUE(len > 20 && memcmp(h, RIO_RADOS_HEAD_MAGIC "\n", 20) == 0);
    free(h);
    T_EQ(ru_chunks("rio", ".rio-mpu/cbk/"), 0);
    T_EQ(gw_curl(&a, "got", "%s/cbk/odd", a.url), 200);
    T_TRUE(gw_same(&a, "got", "all"));
    T_EQ(gw_curl(&a, "r", "'%s/cbk/odd?partNumber=2'", a.url), 206); /* parts of three sizes */
    T_TRUE(gw_range_is(&a, "r", "all", 5u << 20, (6u << 20) + 3));
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/cbk/odd", a.url), 204);

    /* Two gateways complete one upload at once, three times: the object is
     * whole, its chunks are exactly what its head lists, no part is left;
     * after its delete what a losing Complete lent last is fsck's. */
    struct gw b;
    gw_start(&b, url, NULL);
    for (int round = 0; round < 3; round++) {
        mpu(&a, &b, "race", even, 3);
        T_EQ(gw_curl(&a, "got", "%s/cbk/race", b.url), 200); /* through b */
        T_TRUE(gw_same(&a, "got", "all"));
        T_TRUE(gw_has(&a, "got.h", "-3\""));
        h = ru_head("rio", "cbk/race", &len);
        nch = 0;
        T_TRUE(strstr(h, "\nnchunks ") &&
               sscanf(strstr(h, "\nnchunks "), "\nnchunks %lu", &nch) == 1);
        free(h);
        T_EQ(ru_objects("rio", ".rio-mpu/cbk/"), 0);
        /* Every chunk the head lists is there; when the losing Complete
         * lent last, its delete leaves them (docs/rados.md), for fsck. */
        T_GE(ru_chunks("rio", ".rio-mpu/cbk/"), nch);
        T_TRUE(nch == 5);
        T_EQ(gw_curl(&b, "o", "-X DELETE %s/cbk/race", b.url), 204);
        char out[1024];
        T_EQ(ru_railio(out, sizeof(out), "fsck --grace 0 'rados://rio'"), 0);
        T_EQ(ru_chunks("rio", ".rio-mpu/cbk/"), 0);
    }
    gw_stop(&b);
    T_EQ(gw_curl(&a, "o", "-X DELETE %s/cbk", a.url), 204);
    T_EQ(ru_chunks("rio", NULL), before);
    gw_stop(&a);
}
/*
 * Listings in byte order of key, as S3's, although RADOS lists in the pool's
 * hash order: V2 paged by its tokens, V1 by its markers, with and without
 * the '/' delimiter and another one ('0', folded by the gateway), every key
 * once and in order. Clients rely on it: `aws s3
 * sync --delete` walks the local tree and the listing side by side, and a
 * key out of order looked absent to it: the second sync of an unchanged
 * tree deleted 37 of 40 objects before this.
 */
static const char order_script[] =
    "import sys, urllib.request, urllib.parse, xml.etree.ElementTree as ET\n"
    "url, want = sys.argv[1], sys.argv[2].split(',')\n"
    "ns = '{http://s3.amazonaws.com/doc/2006-03-01/}'\n"
    "def get(q):\n"
    "    return ET.fromstring(urllib.request.urlopen(url + '/ord?' + q).read())\n"
    "def walk(v2, n, delim=''):\n"
    "    got, tok = [], None\n"
    "    while True:\n"
    "        q = {'max-keys': str(n)}\n"
    "        if delim: q['delimiter'] = delim\n"
    "        if v2:\n"
    "            q['list-type'] = '2'\n"
    "            if tok: q['continuation-token'] = tok\n"
    "        elif tok: q['marker'] = tok\n"
    "        x = get(urllib.parse.urlencode(q))\n"
    "        page = [e.text for e in x.iter(ns + 'Key')] + \\\n"
    "            [e.find(ns + 'Prefix').text for e in x.iter(ns + 'CommonPrefixes')]\n"
    "        assert len(page) <= n, page\n"
    "        got += sorted(page)\n"
    "        if x.find(ns + 'IsTruncated').text != 'true': return got\n"
    "        tok = x.find(ns + ('NextContinuationToken' if v2 else 'NextMarker')).text\n"
    "for v2 in (True, False):\n"
    "    for n in (1, 7, 1000):\n"
    "        got = walk(v2, n)\n"
    "        assert got == sorted(want), (v2, n, got)\n"
    "        for d in ('/', '0'):\n"
    "            tops = sorted(set(k[:k.index(d) + 1] if d in k else k for k in want))\n"
    "            got = walk(v2, n, d)\n"
    "            assert got == tops, (v2, n, d, got)\n"
    "x = get('list-type=2&start-after=k30')\n"
    "assert [e.text for e in x.iter(ns + 'Key')] == sorted(k for k in want if k > 'k30')\n"
    "try:\n"
    "    get('list-type=2&continuation-token=0000000000000000s6b')\n"
    "    raise AssertionError('a token of another listing was taken')\n"
    "except urllib.error.HTTPError as e:\n"
    "    assert e.code == 400, e.code\n"
    "print('order ok')\n";

static void key_order(const char *pool, bool indexed)
{
    struct gw g;
    char url[1024], want[4096] = "";
    size_t o = 0;

    gw_need();
    if (t_sh("command -v python3 >/dev/null") != 0)
        T_SKIP("python3 is not installed");
    ru_url(url, sizeof(url), pool, "index_recheck=50ms");
    gw_start(&g, url, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/ord", g.url), 200);
    T_EQ(t_sh("mkdir -p %s/tree/d/e %s/tree/z", g.dir, g.dir), 0);
    for (int i = 0; i < 40; i++) {
        o += (size_t)snprintf(want + o, sizeof(want) - o, "%sk%02d", o ? "," : "", i);
        T_EQ(t_sh("echo %d > %s/tree/k%02d", i, g.dir, i), 0);
    }
    T_EQ(t_sh("echo x > %s/tree/d/a; echo y > %s/tree/d/e/b; echo z > %s/tree/z/c", g.dir, g.dir,
              g.dir),
         0);
    o += (size_t)snprintf(want + o, sizeof(want) - o, ",d/a,d/e/b,z/c");
    /* older than the objects (their mtime is in whole seconds): the sync
     * below has nothing to upload */
    T_EQ(t_sh("find %s/tree -type f -exec touch -d 2020-01-01 {} +", g.dir), 0);
    T_EQ(t_sh("cd %s/tree && for f in $(find . -type f | sed 's|^./||'); do "
              "curl -sf -o /dev/null -T $f %s/ord/$f || exit 1; done",
              g.dir, g.url),
         0);
    if (indexed) {
        /* The pool gets its index while the gateway runs: it reads the
         * marker again within 50 ms and lists from the index once ready. */
        struct rio_options ro;
        struct rio_client *c;
        struct rio_fsck_report r;
        char iurl[1024];
        ru_opts(&ro, 64 * RU_KIB, 4);
        ru_url(iurl, sizeof(iurl), pool, "index_recheck=50ms&abort_timeout=2&timeout=1");
        T_OK(rio_client_new(iurl, &ro, &c));
        T_OK(rio_fsck(c, &(struct rio_fsck_args){.flags = RIO_FSCK_INDEX}, &r));
        T_EQ(r.index_built, 1u);
        T_EQ(r.index_added, 44u); /* the bucket's marker, 43 objects */
        rio_client_destroy(c);
        t_sleep_ms(100);
    }
    t_write_file(gw_path(&g, "o.py"), order_script, strlen(order_script));
    T_EQ(t_sh("python3 %s %s '%s' > %s 2>&1 || { cat %s >&2; exit 1; }", gw_path(&g, "o.py"), g.url,
              want, gw_path(&g, "out"), gw_path(&g, "out")),
         0);
    T_TRUE(gw_has(&g, "out", "order ok"));
    if (t_sh("command -v aws >/dev/null") == 0) {
        /* The tree is what the bucket holds: a sync --delete changes
         * nothing, deletes nothing. */
        T_EQ(gw_aws(&g, "", "o", "s3 sync tree s3://ord --delete"), 0);
        T_FALSE(gw_has(&g, "o", "delete:"));
        T_FALSE(gw_has(&g, "o", "upload:"));
        T_EQ(gw_aws(&g, "", "o", "s3 ls --recursive s3://ord"), 0);
        T_EQ(t_sh("test $(wc -l < %s) = 43", gw_path(&g, "o")), 0);
    }
    if (indexed) {
        /* A committed entry's etag is believed without its head, and
         * anyone who can write the pool can write one: a listing prints
         * it escaped (it was printed as it was, and this one added a key
         * "I" to the listing, and the aws CLI's `s3 ls` failed on it). */
        ru_idx_entry(pool, "ord/zz", 0xab,
                     "0000000000000001 c 5 1700000000 "
                     "</ETag></Contents><Contents><Key>I</Key><ETag>");
        T_EQ(gw_curl(&g, "o", "'%s/ord?list-type=2&prefix=zz'", g.url), 200);
        T_FALSE(gw_has(&g, "o", "<Key>I</Key>"));
        T_TRUE(gw_has(&g, "o", "<Key>zz</Key>"));
        T_TRUE(gw_has(&g, "o", "&lt;/ETag&gt;&lt;/Contents&gt;"));
    }
    gw_stop(&g);
}
/*
 * A gateway killed in the middle of a CompleteMultipartUpload, after the
 * object was published and its record written, while the upload's parts
 * and marker were being dropped: the client retries the Complete through
 * another gateway (its answer was lost). That retry found a part gone and
 * answered 400 InvalidPart for an upload that had succeeded, and the
 * upload stayed listed for ever. Found with kill -9 of a gateway during
 * Completes of 60-part uploads (boto3, three gateways): 10 of 12 retries
 * InvalidPart. The state is made here exactly: a Complete that ends, then
 * its upload's marker put back as the crash leaves it.
 */
TEST(complete_retried_after_a_crash_mid_cleanup)
{
    struct gw a, b;
    char url[1024], id[64], ukey[128], etag[64];
    struct rio_options o;

    gw_need();
    ru_url(url, sizeof(url), "rio", NULL);
    gw_start(&a, url, NULL);
    gw_start(&b, url, NULL);
    T_EQ(gw_curl(&a, "o", "-X PUT %s/crb", a.url), 200);
    gw_file(&a, "p1", 5u << 20, 71);
    gw_file(&a, "p2", (1u << 20) + 9, 72);
    T_EQ(t_sh("cat %s %s > %s", gw_path(&a, "p1"), gw_path(&a, "p2"), gw_path(&a, "all")), 0);
    T_EQ(gw_curl(&a, "c", "-X POST -H 'x-amz-meta-who: a' '%s/crb/k?uploads'", a.url), 200);
    gw_upload_id(&a, "c", id, sizeof(id));
    for (unsigned i = 1; i <= 2; i++) {
        char part[8];
        snprintf(part, sizeof(part), "p%u", i);
        T_EQ(gw_curl(&a, "o", "-T %s '%s/crb/k?partNumber=%u&uploadId=%s'", gw_path(&a, part),
                     a.url, i, id),
             200);
    }
    gw_mpu_xml(&a, 2);
    snprintf(ukey, sizeof(ukey), ".rio-mpu/crb/%s", id);
    ru_opts(&o, 4 * RU_MIB, 4);
    struct rio_client *c = ru_client("rio", NULL, &o);
    char marker[4096];
    int64_t mlen = rio_get(c, ukey, marker, sizeof(marker), NULL);
    T_GT(mlen, 0);
    T_EQ(gw_curl(&a, "o", "-X POST --data-binary @%s '%s/crb/k?uploadId=%s'",
                 gw_path(&a, "done.xml"), a.url, id),
         200);
    T_EQ(t_sh("sed -n 's/.*<ETag>\\(.*\\)<\\/ETag>.*/\\1/p' %s | tr -d '\\n' > %s",
              gw_path(&a, "o"), gw_path(&a, "etag")),
         0);
    gw_slurp_str(&a, "etag", etag, sizeof(etag));
    T_TRUE(strstr(etag, "-2") != NULL);
    /* The crash: the object and its record are in, a part and the marker
     * not yet dropped (here: every part gone, the marker back). */
    T_OK(rio_put(c, ukey, marker, (size_t)mlen, NULL, NULL));
    T_EQ(gw_curl(&b, "l", "'%s/crb?uploads'", b.url), 200);
    T_TRUE(gw_has(&b, "l", id));
    /* The client's retry, through the other gateway: the first answer. */
    T_EQ(gw_curl(&b, "o", "-X POST --data-binary @%s '%s/crb/k?uploadId=%s'",
                 gw_path(&a, "done.xml"), b.url, id),
         200);
    T_TRUE(gw_has(&b, "o", etag));
    T_EQ(gw_curl(&b, "l", "'%s/crb?uploads'", b.url), 200);
    T_FALSE(gw_has(&b, "l", id));
    T_EQ(gw_curl(&b, "got", "%s/crb/k", b.url), 200);
    T_EQ(t_sh("cmp -s %s %s", gw_path(&b, "got"), gw_path(&a, "all")), 0);
    T_TRUE(gw_has(&b, "got.h", "x-amz-meta-who: a\r\n"));
    rio_client_destroy(c);
    gw_stop(&b);
    gw_stop(&a);
}

/* A CopyObject whose source is replaced while it copies (its old chunks
 * removed under the reader) is answered 503 SlowDown, which S3 clients
 * retry, as a GET that keeps meeting new versions is; it was 500
 * InternalError with a warning in the log. Nothing is published. Gateway a
 * reads with chunk 1 of every read held back 2 s (the fault filter), and
 * the source is replaced through b meanwhile. */
TEST(copy_of_a_source_replaced_meanwhile_is_slowdown)
{
    struct gw a, b;
    char url[1024], furl[1200];

    gw_need();
    ru_url(url, sizeof(url), "rio", NULL);
    ru_url(furl, sizeof(furl), "rio", "faults=delay:op=read:chunk=1:delay=2000");
    gw_start(&a, furl, NULL);
    gw_start(&b, url, NULL);
    T_EQ(gw_curl(&b, "o", "-X PUT %s/cpr", b.url), 200);
    gw_file(&b, "src", 40u << 20, 81);
    gw_file(&b, "src2", 40u << 20, 82);
    T_EQ(gw_curl(&b, "o", "-T %s %s/cpr/src", gw_path(&b, "src"), b.url), 200);
    T_EQ(t_sh("(curl -s -o %s -w '%%{http_code}' -X PUT -H 'x-amz-copy-source: /cpr/src' "
              "%s/cpr/dst > %s.tmp; mv %s.tmp %s) >/dev/null 2>&1 &",
              gw_path(&a, "cp"), a.url, gw_path(&a, "code"), gw_path(&a, "code"),
              gw_path(&a, "code")),
         0);
    usleep(700 * 1000);
    T_EQ(gw_curl(&b, "o", "-T %s %s/cpr/src", gw_path(&b, "src2"), b.url), 200);
    for (int i = 0; i < 300 && access(gw_path(&a, "code"), F_OK) != 0; i++)
        usleep(100 * 1000);
    char code[16] = "";
    gw_slurp_str(&a, "code", code, sizeof(code));
    fprintf(stderr, "copy answered %s\n", code);
    T_STREQ(code, "503");
    T_TRUE(gw_has(&a, "cp", "<Code>SlowDown</Code>"));
    T_EQ(gw_curl(&b, "o", "-I %s/cpr/dst", b.url), 404);
    gw_stop(&b);
    gw_stop(&a);
}

TEST(listings_in_key_order)
{
    key_order("rio", false);
}

TEST(listings_from_the_key_index)
{
    key_order("rix", true);
}

#endif
