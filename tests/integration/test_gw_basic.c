/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * railiod's S3 gateway driven with curl(1) over the server's own store,
 * mock:// and file://: buckets (create, head, list, delete, BucketNotEmpty),
 * PutObject/GetObject byte for byte with the MD5 ETag, Range (206, suffix,
 * 416), the conditional headers (304, 412), Content-MD5 and
 * x-amz-checksum-crc32 refusals that publish nothing, ListObjects V1/V2
 * (delimiter, pagination, XML escaping, encoding-type=url), CopyObject,
 * DeleteObjects, S3 error codes, bounds, keep-alive, anonymous access off,
 * and the per-operation metrics.
 */
#include "gw_util.h"

/* Buckets and one object's whole life, on one backend. */
static void objects(const char *backend)
{
    struct gw g;
    char md5[64] = "";

    gw_start(&g, backend, NULL);
    /* Buckets */
    T_EQ(gw_curl(&g, "o", "-i %s/nob/k", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchBucket</Code>"));
    T_TRUE(gw_has(&g, "o", "<Resource>/nob/k</Resource>")); /* as S3's */
    T_TRUE(gw_has(&g, "o", "</RequestId><HostId>"));
    T_TRUE(gw_has(&g, "o", "x-amz-id-2: "));
    {
        /* The error names its request, as the x-amz-request-id header and
         * the log line do (what a user quotes to an operator). */
        size_t n;
        char *text = (char *)t_slurp(gw_path(&g, "o"), &n), id[17] = "", body[17] = "";
        const char *h = text ? strcasestr(text, "x-amz-request-id: ") : NULL;
        const char *e = text ? strstr(text, "<RequestId>") : NULL;
        T_TRUE(h && e);
        if (h && e) {
            memcpy(id, h + 18, 16);
            memcpy(body, e + 11, 16);
            T_TRUE(strspn(id, "0123456789abcdef") == 16);
            T_STREQ(id, body);
        }
        free(text);
    }
    T_EQ(gw_curl(&g, "o", "-X PUT %s/bkt1", g.url), 200);
    /* again: 200 and the bucket as it was (S3 in us-east-1, radosgw) */
    T_EQ(gw_curl(&g, "o", "-X PUT --data-binary kept %s/bkt1/k", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/bkt1", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "Location: /bkt1"));
    T_EQ(gw_curl(&g, "o", "%s/bkt1/k", g.url), 200);
    T_TRUE(gw_has(&g, "o", "kept"));
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/bkt1/k", g.url), 204);
    T_EQ(gw_curl(&g, "o", "-I %s/bkt1", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/bkt2", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/Bad_Name", g.url), 400);
    T_TRUE(gw_has(&g, "o", "InvalidBucketName"));
    /* Names S3 refuses for a new bucket: an IPv4 address, a DNS label
     * beginning or ending with '-', its reserved prefixes and suffixes; a
     * near miss is fine. */
    {
        static const char *const bad[] = {"192.168.1.1", "xn--abc",   "sthree-x", "abc-s3alias",
                                          "abc--ol-s3",  "abc--x-s3", "foo-.bar", "foo.-bar"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            if (gw_curl(&g, "o", "-X PUT %s/%s", g.url, bad[i]) != 400 ||
                !gw_has(&g, "o", "InvalidBucketName"))
                T_FAIL("CreateBucket %s: not refused InvalidBucketName", bad[i]);
            T_EQ(gw_curl(&g, "o", "-I %s/%s", g.url, bad[i]), 404);
        }
        T_EQ(gw_curl(&g, "o", "-X PUT %s/192.168.1.1.x", g.url), 200);
        T_EQ(gw_curl(&g, "o", "-X DELETE %s/192.168.1.1.x", g.url), 204);
        T_EQ(gw_curl(&g, "o", "-X PUT %s/foo-x.bar", g.url), 200);
        T_EQ(gw_curl(&g, "o", "-X DELETE %s/foo-x.bar", g.url), 204);
    }
    T_EQ(gw_curl(&g, "o", "%s/", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<Name>bkt1</Name>"));
    /* ListBuckets in name order, a page at a time (max-buckets,
     * continuation-token, prefix), on every backend. */
    {
        static const char *const more[] = {"bkt-c", "bkt-a", "bkt-b"};
        size_t n;
        char *t;
        for (size_t i = 0; i < 3; i++)
            T_EQ(gw_curl(&g, "o", "-X PUT %s/%s", g.url, more[i]), 200);
        T_EQ(gw_curl(&g, "o", "%s/", g.url), 200);
        t = (char *)t_slurp(gw_path(&g, "o"), &n);
        T_TRUE(strstr(t, "<Name>bkt-a</Name>") < strstr(t, "<Name>bkt-b</Name>") &&
               strstr(t, "<Name>bkt-b</Name>") < strstr(t, "<Name>bkt-c</Name>") &&
               strstr(t, "<Name>bkt-c</Name>") < strstr(t, "<Name>bkt1</Name>"));
        T_FALSE(strstr(t, "ContinuationToken") != NULL);
        free(t);
        T_EQ(gw_curl(&g, "o", "'%s/?max-buckets=2'", g.url), 200);
        T_TRUE(gw_has(&g, "o", "<Name>bkt-a</Name>") && gw_has(&g, "o", "<Name>bkt-b</Name>"));
        T_FALSE(gw_has(&g, "o", "<Name>bkt-c</Name>"));
        T_TRUE(gw_has(&g, "o", "<ContinuationToken>bkt-b</ContinuationToken>"));
        T_EQ(gw_curl(&g, "o", "'%s/?max-buckets=2&continuation-token=bkt-b'", g.url), 200);
        T_TRUE(gw_has(&g, "o", "<Name>bkt-c</Name>") && gw_has(&g, "o", "<Name>bkt1</Name>"));
        T_FALSE(gw_has(&g, "o", "<Name>bkt-b</Name>"));
        T_FALSE(gw_has(&g, "o", "ContinuationToken"));
        T_EQ(gw_curl(&g, "o", "'%s/?prefix=bkt-&max-buckets=3'", g.url), 200);
        T_TRUE(gw_has(&g, "o", "<Name>bkt-c</Name>") && gw_has(&g, "o", "<Prefix>bkt-</Prefix>"));
        T_FALSE(gw_has(&g, "o", "<Name>bkt1</Name>"));
        T_FALSE(gw_has(&g, "o", "ContinuationToken")); /* bkt1 is not under the prefix */
        T_EQ(gw_curl(&g, "o", "'%s/?max-buckets=0'", g.url), 400);
        T_TRUE(gw_has(&g, "o", "max-buckets"));
        T_EQ(gw_curl(&g, "o", "'%s/?max-buckets=10001'", g.url), 400);
        T_EQ(gw_curl(&g, "o", "'%s/?continuation-token=Bad_Token'", g.url), 400);
        for (size_t i = 0; i < 3; i++)
            T_EQ(gw_curl(&g, "o", "-X DELETE %s/%s", g.url, more[i]), 204);
    }
    /* A one-chunk PUT (no Expect: 100-continue) checks its bucket while
     * its body comes in: the same 404, and nothing is written. */
    gw_file(&g, "small", 1000, 12);
    T_EQ(gw_curl(&g, "o", "-T %s %s/bkt2/k", gw_path(&g, "small"), g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchBucket</Code>"));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/bkt2", g.url), 200);
    T_EQ(gw_curl(&g, "o", "%s/bkt2/k", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchKey</Code>"));
    T_EQ(gw_curl(&g, "o", "-T %s %s/bkt2/k", gw_path(&g, "small"), g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/bkt2/k", g.url), 204);
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/bkt2", g.url), 204);

    /* PutObject / GetObject: 5 MiB + 3, every byte compared. */
    gw_file(&g, "src", 5 * 1024 * 1024 + 3, 11);
    T_EQ(t_sh("md5sum %s | cut -c1-32 > %s", gw_path(&g, "src"), gw_path(&g, "md5")), 0);
    {
        size_t n = 0;
        char *m = (char *)t_slurp(gw_path(&g, "md5"), &n);
        T_GE(n, 32u);
        memcpy(md5, m, 32);
        free(m);
    }
    T_EQ(gw_curl(&g, "o", "-T %s %s/bkt1/dir/obj%%20one", gw_path(&g, "src"), g.url), 200);
    T_TRUE(gw_has(&g, "o.h", md5)); /* ETag: the MD5 of the bytes */
    T_EQ(gw_curl(&g, "got", "%s/bkt1/dir/obj%%20one", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    T_TRUE(gw_has(&g, "got.h", md5));
    T_EQ(gw_curl(&g, "o", "-I %s/bkt1/dir/obj%%20one", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "Content-Length: 5242883"));
    T_EQ(gw_curl(&g, "o", "%s/bkt1/dir/missing", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchKey</Code>"));
    T_TRUE(gw_has(&g, "o", "<Key>dir/missing</Key>"));

    /* Range: bytes 1000000-1999999, the last 777 bytes, an open end. */
    T_EQ(gw_curl(&g, "r", "-r 1000000-1999999 %s/bkt1/dir/obj%%20one", g.url), 206);
    T_EQ(t_sh("tail -c +1000001 %s | head -c 1000000 | cmp -s - %s", gw_path(&g, "src"),
              gw_path(&g, "r")),
         0);
    T_TRUE(gw_has(&g, "r.h", "Content-Range: bytes 1000000-1999999/5242883"));
    T_EQ(gw_curl(&g, "r", "-r -777 %s/bkt1/dir/obj%%20one", g.url), 206);
    T_EQ(t_sh("tail -c 777 %s | cmp -s - %s", gw_path(&g, "src"), gw_path(&g, "r")), 0);
    T_EQ(gw_curl(&g, "r", "-r 5242880- %s/bkt1/dir/obj%%20one", g.url), 206);
    T_EQ(t_sh("tail -c 3 %s | cmp -s - %s", gw_path(&g, "src"), gw_path(&g, "r")), 0);
    T_EQ(gw_curl(&g, "r", "-r 5242883- %s/bkt1/dir/obj%%20one", g.url), 416);
    T_TRUE(gw_has(&g, "r", "<Code>InvalidRange</Code>"));

    /* Conditionals */
    T_EQ(gw_curl(&g, "c", "-H 'If-None-Match: \"%s\"' %s/bkt1/dir/obj%%20one", md5, g.url), 304);
    T_EQ(gw_curl(&g, "c", "-H 'If-Match: \"%s\"' -r 0-9 %s/bkt1/dir/obj%%20one", md5, g.url), 206);
    T_EQ(gw_curl(&g, "c", "-H 'If-Match: \"0123\"' %s/bkt1/dir/obj%%20one", g.url), 412);
    /* If-Match compares strongly: a weak tag never matches (RFC 9110);
     * If-None-Match weakly. */
    T_EQ(gw_curl(&g, "c", "-H 'If-Match: W/\"%s\"' %s/bkt1/dir/obj%%20one", md5, g.url), 412);
    T_EQ(gw_curl(&g, "c", "-H 'If-None-Match: W/\"%s\"' %s/bkt1/dir/obj%%20one", md5, g.url), 304);
    T_TRUE(gw_has(&g, "c", "<Code>PreconditionFailed</Code>"));
    T_EQ(gw_curl(&g, "c",
                 "-H 'If-Modified-Since: Fri, 01 Jan 2100 00:00:00 GMT' "
                 "%s/bkt1/dir/obj%%20one",
                 g.url),
         304);
    T_EQ(gw_curl(&g, "c",
                 "-H 'If-Unmodified-Since: Mon, 01 Jan 1990 00:00:00 GMT' "
                 "%s/bkt1/dir/obj%%20one",
                 g.url),
         backend && strncmp(backend, "mock:", 5) == 0 ? 200 : 412); /* mock:// has no mtime */

    /* Content-MD5 and x-amz-checksum-crc32 that do not match: nothing published. */
    T_EQ(gw_curl(&g, "o", "-T %s -H 'Content-MD5: AAAAAAAAAAAAAAAAAAAAAA==' %s/bkt1/bad",
                 gw_path(&g, "src"), g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>BadDigest</Code>"));
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: AAAAAA==' %s/bkt1/bad",
                 gw_path(&g, "src"), g.url),
         400);
    T_EQ(gw_curl(&g, "o", "-I %s/bkt1/bad", g.url), 404);
    T_EQ(t_sh("openssl dgst -md5 -binary %s | base64 > %s", gw_path(&g, "src"), gw_path(&g, "b64")),
         0);
    T_EQ(gw_curl(&g, "o", "-T %s -H \"Content-MD5: $(cat %s)\" %s/bkt1/good", gw_path(&g, "src"),
                 gw_path(&g, "b64"), g.url),
         200);
    T_EQ(gw_curl(&g, "got", "%s/bkt1/good", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    /* A wrong Content-MD5 over it (checked by the writer before its commit,
     * in the pass that makes the ETag): refused, the old object stays. */
    gw_file(&g, "big", 9 * 1024 * 1024 + 5, 12);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'Content-MD5: AAAAAAAAAAAAAAAAAAAAAA==' %s/bkt1/good",
                 gw_path(&g, "big"), g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>BadDigest</Code>"));
    T_EQ(gw_curl(&g, "got", "%s/bkt1/good", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    /* A body in chunked transfer encoding (no Content-Length): streamed
     * with its size unknown until the end. */
    T_EQ(gw_curl(&g, "o", "-T - -H 'Transfer-Encoding: chunked' %s/bkt1/chunked < %s", g.url,
                 gw_path(&g, "src")),
         200);
    T_TRUE(gw_has(&g, "o.h", md5));
    T_EQ(gw_curl(&g, "got", "%s/bkt1/chunked", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    /* An empty object. */
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'Content-Length: 0' %s/bkt1/empty", g.url), 200);
    T_EQ(gw_curl(&g, "got", "%s/bkt1/empty", g.url), 200);
    T_EQ(t_sh("test ! -s %s", gw_path(&g, "got")), 0);

    /* CopyObject, then DeleteObjects (one missing key: deleted too, as S3). */
    T_EQ(
        gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /bkt1/dir/obj%%20one' %s/bkt1/copy", g.url),
        200);
    T_TRUE(gw_has(&g, "o", md5));
    T_EQ(gw_curl(&g, "got", "%s/bkt1/copy", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /bkt1/nothere' %s/bkt1/copy2", g.url),
         404);

    /* DeleteBucket of a bucket with objects; DeleteObject; DeleteObjects. */
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/bkt1", g.url), 409);
    T_TRUE(gw_has(&g, "o", "<Code>BucketNotEmpty</Code>"));
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/bkt1/copy", g.url), 204);
    T_EQ(gw_curl(&g, "o", "-I %s/bkt1/copy", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/bkt1/copy", g.url), 204);
    t_write_file(gw_path(&g, "del.xml"),
                 "<Delete><Object><Key>dir/obj one</Key></Object><Object><Key>good</Key></Object>"
                 "<Object><Key>chunked</Key></Object><Object><Key>empty</Key></Object>"
                 "<Object><Key>gone</Key></Object></Delete>",
                 strlen("<Delete><Object><Key>dir/obj one</Key></Object><Object><Key>good</Key>"
                        "</Object><Object><Key>chunked</Key></Object><Object><Key>empty</Key>"
                        "</Object><Object><Key>gone</Key></Object></Delete>"));
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/bkt1?delete'", gw_path(&g, "del.xml"),
                 g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>dir/obj one</Key></Deleted>"));
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>gone</Key></Deleted>"));
    T_EQ(gw_curl(&g, "o", "-I %s/bkt1/good", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/bkt1", g.url), 204);
    T_EQ(gw_curl(&g, "o", "-I %s/bkt1", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/bkt1", g.url), 404);
    gw_stop(&g);
}

TEST(objects_own_store)
{
    objects(NULL);
}

TEST(objects_mock)
{
    objects("mock://");
}

TEST(objects_file)
{
    char url[256];
    const char *dir = t_scratch_dir("gw-file");
    snprintf(url, sizeof(url), "file://%s", dir);
    objects(url);
}

/*
 * railio's own s3:// client through the gateway. An object a railio client
 * wrote natively with the default etag=fast has that etag as its ETag: 32
 * hex digits that are no MD5 of its bytes. s3:// checks an object without
 * its chunk checksums (one it did not write) by its ETag, so the gateway
 * says such an ETag is no MD5 (x-railio-etag: fast): read unchecked, its
 * etag "". Without that every GET of it failed RIO_ECHECKSUM after
 * reading it twice. An object PUT through the gateway (etag=md5) is still
 * checked by its ETag.
 */
TEST(railio_s3_reads_fast_etag_objects)
{
    struct gw g;
    struct rio_client *c;
    struct rio_desc d;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    char url[256], md5[64];
    const size_t n = 300007, small = 1234;
    uint8_t *src = t_pattern_buf(n, 61), *dst = malloc(n);
    void *p = NULL;

    T_NOTNULL(dst);
    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/fetag", g.url), 200);
    snprintf(url, sizeof(url), "railio://%s", g.e.addr[0]);
    T_OK(rio_client_new(url, NULL, &c));
    T_OK(rio_put(c, "fetag/big", src, n, NULL, &d));
    rio_desc_cleanup(&d);
    T_OK(rio_put(c, "fetag/small", src, small, NULL, &d));
    rio_desc_cleanup(&d);
    rio_client_destroy(c);
    t_write_file(gw_path(&g, "src"), src, small);
    T_EQ(gw_curl(&g, "o", "-T %s %s/fetag/curl", gw_path(&g, "src"), g.url), 200);
    T_EQ(t_sh("md5sum %s | cut -c1-32 | tr -d '\\n' > %s", gw_path(&g, "src"), gw_path(&g, "md5")),
         0);
    gw_slurp_str(&g, "md5", md5, sizeof(md5));

    snprintf(url, sizeof(url), "s3://fetag?endpoint=http://%s&unsigned=1&chunk=64K", g.s3);
    T_OK(rio_client_new(url, NULL, &c));
    T_OK(rio_stat(c, "big", &d));
    T_NULL(d.xxh);
    T_STREQ(d.etag, "");
    rio_desc_cleanup(&d);
    T_EQ(rio_get(c, "big", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, 0u);
    T_EQ(rio_get(c, "small", dst, small, NULL), (int64_t)small); /* in one request */
    T_MEMEQ(dst, src, small);
    T_EQ(rio_get_alloc(c, "big", &p, NULL), (int64_t)n);
    T_NOTNULL(p);
    if (p)
        T_MEMEQ(p, src, n);
    free(p);
    /* Written through the gateway: its ETag is the MD5, and checks it. */
    T_OK(rio_stat(c, "curl", &d));
    T_STREQ(d.etag, md5);
    rio_desc_cleanup(&d);
    T_EQ(rio_get(c, "curl", dst, small, &call), (int64_t)small);
    T_MEMEQ(dst, src, small);
    T_EQ(st.verify_bytes, (uint64_t)small);
    rio_client_destroy(c);
    gw_stop(&g);
    free(src);
    free(dst);
}

/* A gateway over another backend opens no railio:// listener unless
 * --listen asks: it opened 127.0.0.1:7070 (tokenless, to every local user)
 * and failed to start where that port was taken. Over its own store it
 * keeps the listener it reaches that store through. */
TEST(gateway_over_a_backend_has_no_data_listener)
{
    char bin[512];
    const char *dir = t_scratch_dir("gw-nolisten");

    gw_need();
    srv_binary(bin, sizeof(bin));
    /* 127.0.0.1:7070 taken: the start must not need it. */
    T_EQ(
        t_sh(
            "python3 -c 'import socket,time,sys; s=socket.socket(); "
            "s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
            "s.bind((\"127.0.0.1\", 7070)); s.listen(); open(sys.argv[1], \"w\").close(); "
            "time.sleep(30)' %s/held 2>/dev/null & echo $! > %s/py.pid; "
            "mkdir -p %s/store; for i in $(seq 100); do [ -e %s/held ] && break; sleep 0.05; done; "
            "timeout -s KILL 20 %s --s3-listen 127.0.0.1:0 --s3-backend file://%s/store "
            "--s3-anonymous --port-file %s/ports --log-level warn 2>%s/log & pid=$!; "
            "for i in $(seq 100); do [ -s %s/ports ] && break; sleep 0.05; done; "
            "test -s %s/ports && l=$(head -1 %s/ports) && "
            "curl -sf -X PUT http://$(sed -n 's/^s3=//p' %s/ports)/bkt -o /dev/null; c=$?; "
            "kill $pid; wait $pid; kill $(cat %s/py.pid) 2>/dev/null; "
            "test $c = 0 && test -z \"$l\"",
            dir, dir, dir, dir, bin, dir, dir, dir, dir, dir, dir, dir, dir),
        0);
}

/* The head cache is for rados:// only: over file:// (whose cache of open
 * files keeps a replaced or removed generation readable a while) a GET
 * through one gateway after another replaced or deleted the object serves
 * the new bytes or 404, even with --s3-head-cache given, and never a hit. */
TEST(head_cache_off_on_file)
{
    static const char *const hour[] = {"--s3-head-cache", "1h", NULL};
    struct gw a, b;
    char url[256];
    const char *dir = t_scratch_dir("gw-hc-file");

    snprintf(url, sizeof(url), "file://%s", dir);
    gw_start(&a, url, hour);
    gw_start(&b, url, NULL);
    gw_file(&a, "v1", 300 * 1024 + 1, 51);
    gw_file(&a, "v2", 200 * 1024 + 2, 52);
    T_EQ(gw_curl(&a, "o", "-X PUT %s/hcf", a.url), 200);
    T_EQ(gw_curl(&a, "o", "-T %s %s/hcf/k", gw_path(&a, "v1"), a.url), 200);
    T_EQ(gw_curl(&a, "got", "%s/hcf/k", a.url), 200);
    T_TRUE(gw_same(&a, "got", "v1"));
    T_EQ(gw_curl(&b, "o", "-T %s %s/hcf/k", gw_path(&a, "v2"), b.url), 200);
    T_EQ(gw_curl(&a, "got", "%s/hcf/k", a.url), 200);
    T_TRUE(gw_same(&a, "got", "v2"));
    T_EQ(gw_curl(&b, "o", "-X DELETE %s/hcf/k", b.url), 204);
    T_EQ(gw_curl(&a, "got", "%s/hcf/k", a.url), 404);
    T_EQ(srv_scrape(&a.e, "railiod_s3_head_cache_total{result=\"hit\"}"), 0);
    gw_stop(&b);
    gw_stop(&a);
}

/* Walks a listing page by page (V2 by its tokens, V1 by its markers) and
 * prints each page's keys and common prefixes ("P:" before those), '|'
 * between entries. */
static const char walk_script[] =
    "import sys, urllib.request, urllib.parse, xml.etree.ElementTree as ET\n"
    "url, v2, n, delim = sys.argv[1], sys.argv[2] == '2', sys.argv[3], sys.argv[4]\n"
    "prefix = sys.argv[5] if len(sys.argv) > 5 else ''\n"
    "ns = '{http://s3.amazonaws.com/doc/2006-03-01/}'\n"
    "got, tok, pages = [], None, 0\n"
    "while True:\n"
    "    q = {'max-keys': n, 'delimiter': delim, 'prefix': prefix}\n"
    "    if v2:\n"
    "        q['list-type'] = '2'\n"
    "        if tok: q['continuation-token'] = tok\n"
    "    elif tok: q['marker'] = tok\n"
    "    x = ET.fromstring(urllib.request.urlopen(url + '?' + urllib.parse.urlencode(q)).read())\n"
    "    page = [e.text for e in x.iter(ns + 'Key')] + \\\n"
    "        ['P:' + e.find(ns + 'Prefix').text for e in x.iter(ns + 'CommonPrefixes')]\n"
    "    got += sorted(page, key=lambda s: s[2:] if s.startswith('P:') else s)\n"
    "    pages += 1\n"
    "    assert pages < 50\n"
    "    if x.find(ns + 'IsTruncated').text != 'true': break\n"
    "    tok = x.find(ns + ('NextContinuationToken' if v2 else 'NextMarker')).text\n"
    "print('|'.join(got))\n";

/* ListObjects V1 and V2 on the server's own store. */
/* walk.py's listing of bucket (ListObjects V1 or V2, n keys a page,
 * delimiter, prefix) is want. */
static void walk_expect(struct gw *g, const char *bucket, int v, int n, const char *delim,
                        const char *prefix, const char *want)
{
    T_EQ(t_sh("python3 %s %s/%s %d %d '%s' '%s' > %s 2>&1", gw_path(g, "walk.py"), g->url, bucket,
              v, n, delim, prefix, gw_path(g, "w")),
         0);
    size_t wn = 0;
    char *w = (char *)t_slurp(gw_path(g, "w"), &wn);
    if (wn && w[wn - 1] == '\n')
        w[wn - 1] = '\0';
    if (strcmp(w, want) != 0)
        T_FAIL("prefix '%s', delimiter '%s', V%d, %d a page: %s", prefix, delim, v, n, w);
    free(w);
}

TEST(listing)
{
    struct gw g;
    const char *keys[] = {"a/1", "a/2", "a/b/3", "b", "c d", "x&y<z>", "z"};
    char cont[2048] = "";
    unsigned seen = 0;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/lst", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/other", g.url), 200);
    gw_file(&g, "s", 10, 1);
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        char enc[64];
        T_EQ(t_sh("python3 -c 'import urllib.parse,sys; print(urllib.parse.quote(sys.argv[1]), "
                  "end=\"\")' '%s' > %s",
                  keys[i], gw_path(&g, "enc")),
             0);
        size_t n = 0;
        char *e = (char *)t_slurp(gw_path(&g, "enc"), &n);
        snprintf(enc, sizeof(enc), "%.*s", (int)n, e);
        free(e);
        T_EQ(gw_curl(&g, "o", "-T %s '%s/lst/%s'", gw_path(&g, "s"), g.url, enc), 200);
    }
    T_EQ(gw_curl(&g, "o", "-T %s '%s/other/a/9'", gw_path(&g, "s"), g.url), 200);
    /* V2 with the delimiter: a/ is one common prefix; keys XML-escaped. */
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&delimiter=/'", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<CommonPrefixes><Prefix>a/</Prefix></CommonPrefixes>"));
    T_TRUE(gw_has(&g, "l", "<Key>x&amp;y&lt;z&gt;</Key>"));
    T_TRUE(gw_has(&g, "l", "<Key>c d</Key>"));
    T_TRUE(gw_has(&g, "l", "<KeyCount>5</KeyCount>"));
    T_FALSE(gw_has(&g, "l", "a/9")); /* another bucket's key */
    T_FALSE(gw_has(&g, "l", "<Key>a/1</Key>"));
    /* prefix a/ with the delimiter: a/1, a/2 and a/b/. */
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&delimiter=/&prefix=a/'", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<Key>a/1</Key>"));
    T_TRUE(gw_has(&g, "l", "<Prefix>a/b/</Prefix>"));
    /* encoding-type=url */
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&encoding-type=url'", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<Key>c%20d</Key>"));
    T_TRUE(gw_has(&g, "l", "<Key>x%26y%3Cz%3E</Key>"));
    /* V2 pages of one key: every key once, in order. */
    for (int page = 0; page < 20; page++) {
        T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&max-keys=1%s%s'", g.url,
                     cont[0] ? "&continuation-token=" : "", cont),
             200);
        if (gw_has(&g, "l", "<Key>"))
            seen++;
        if (!gw_has(&g, "l", "<IsTruncated>true</IsTruncated>"))
            break;
        T_EQ(t_sh("sed -n 's|.*<NextContinuationToken>\\([^<]*\\)</NextContinuationToken>.*|\\1|p' "
                  "%s | python3 -c 'import html,urllib.parse,sys; "
                  "print(urllib.parse.quote(html.unescape(sys.stdin.read().strip())), "
                  "end=\"\")' > %s",
                  gw_path(&g, "l"), gw_path(&g, "tok")),
             0);
        size_t n = 0;
        char *t = (char *)t_slurp(gw_path(&g, "tok"), &n);
        T_GT(n, 0u);
        snprintf(cont, sizeof(cont), "%.*s", (int)n, t);
        free(t);
    }
    T_EQ(seen, 7u);
    /* A token is its listing's: with another prefix, or bytes that are no
     * token, 400 rather than the listing started over. */
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&max-keys=1'", g.url), 200);
    T_EQ(t_sh("sed -n 's|.*<NextContinuationToken>\\([^<]*\\)</NextContinuationToken>.*|\\1|p' "
              "%s | python3 -c 'import html,urllib.parse,sys; "
              "print(urllib.parse.quote(html.unescape(sys.stdin.read().strip())), "
              "end=\"\")' > %s",
              gw_path(&g, "l"), gw_path(&g, "tok")),
         0);
    {
        size_t n = 0;
        char *t = (char *)t_slurp(gw_path(&g, "tok"), &n);
        snprintf(cont, sizeof(cont), "%.*s", (int)n, t);
        free(t);
    }
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&continuation-token=%s'", g.url, cont), 200);
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&prefix=a/&continuation-token=%s'", g.url, cont),
         400);
    T_TRUE(gw_has(&g, "l", "The continuation token provided is incorrect."));
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&continuation-token=garbage'", g.url), 400);
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&continuation-token=%.16s'", g.url, cont), 400);
    /* An empty token lists from the start and is echoed, empty (boto3's
     * ContinuationToken=''). */
    T_EQ(gw_curl(&g, "l", "'%s/lst?list-type=2&continuation-token='", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<ContinuationToken></ContinuationToken>"));
    T_TRUE(gw_has(&g, "l", "<Key>b</Key>"));
    /* V1 with marker and max-keys */
    T_EQ(gw_curl(&g, "l", "'%s/lst?marker=b&max-keys=2'", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<Key>c d</Key>"));
    T_TRUE(gw_has(&g, "l", "<Key>x&amp;y&lt;z&gt;</Key>"));
    T_FALSE(gw_has(&g, "l", "<Key>b</Key>"));
    T_TRUE(gw_has(&g, "l", "<IsTruncated>true</IsTruncated>"));
    T_TRUE(gw_has(&g, "l", "<NextMarker>x&amp;y&lt;z&gt;</NextMarker>"));
    T_EQ(gw_curl(&g, "l", "'%s/lst?max-keys=0'", g.url), 200);
    T_FALSE(gw_has(&g, "l", "<Key>"));
    /* Other delimiters: folded by the gateway, paged (1 entry, 3, 1000) V1
     * and V2, every entry once and in order. */
    t_write_file(gw_path(&g, "walk.py"), walk_script, strlen(walk_script));
    {
        static const struct {
            const char *delim, *want;
        } d[] = {
            {"b", "a/1|a/2|P:a/b|P:b|c d|x&y<z>|z"},
            {"&", "a/1|a/2|a/b/3|b|c d|P:x&|z"},
            {" ", "a/1|a/2|a/b/3|b|P:c |x&y<z>|z"},
            {"/b", "a/1|a/2|P:a/b|b|c d|x&y<z>|z"},
        };
        for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
            for (int v = 1; v <= 2; v++)
                for (int j = 0; j < 3; j++) {
                    int n = j == 0 ? 1 : j == 1 ? 3 : 1000;
                    walk_expect(&g, "lst", v, n, d[i].delim, "", d[i].want);
                }
    }
    /* A key that ends with the delimiter where it overlaps the prefix
     * ("d/" under prefix "d/") is a key, not a common prefix: a page that
     * ends with it goes on with the keys after it (they were skipped as if
     * folded into it, and the listing ended there). */
    T_EQ(gw_curl(&g, "o", "-X PUT %s/lsd", g.url), 200);
    {
        static const char *const k[] = {"d/",   "d/1", "d//2", "d/e/3", "ab",
                                        "ab/1", "abb", "-",    "--",    "-a"};
        static const struct {
            const char *prefix, *delim, *want;
        } d[] = {
            {"d/", "/", "d/|P:d//|d/1|P:d/e/"},
            {"a", "ab", "ab|ab/1|abb"},
            {"-", "-", "-|P:--|-a"},
        };
        for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++)
            T_EQ(gw_curl(&g, "o", "-X PUT -d x '%s/lsd/%s'", g.url, k[i]), 200);
        for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++)
            for (int v = 1; v <= 2; v++)
                for (int n = 1; n <= 2; n++)
                    walk_expect(&g, "lsd", v, n, d[i].delim, d[i].prefix, d[i].want);
    }
    /* Keys may hold any byte but NUL: a common prefix is passed whatever
     * bytes follow it under it (0xff too), so it shows once. The gateway
     * refuses to write a key that is not UTF-8 (as S3: test_gw_compat
     * key_not_utf8_refused); railio's own client writes those. */
    T_EQ(gw_curl(&g, "o", "-X PUT %s/lsx", g.url), 200);
    {
        static const char *const odd[] = {"a-b", "a-\\377\\001", "a-\\377\\377\\002", "c"};
        for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
            T_EQ(t_sh("%s/railio put -q \"railio://%s/lsx/$(printf '%s')\" %s",
                      getenv("T_BUILD_DIR"), g.e.addr[0], odd[i], gw_path(&g, "s")),
                 0);
    }
    T_EQ(gw_curl(&g, "l", "'%s/lsx?delimiter=-&encoding-type=url'", g.url), 200);
    T_EQ(t_sh("test $(grep -o '<Prefix>a-</Prefix>' %s | wc -l) = 1", gw_path(&g, "l")), 0);
    /* V2 pages of one key each, as boto3 asks (encoding-type=url), over
     * keys with control bytes and 0xff: every page is XML a parser takes
     * (a token that held the raw key carried &#x1;, which no XML 1.0
     * parser takes: boto3's paginator stopped), every key once, in order. */
    T_EQ(
        t_sh(
            "python3 -c '\n"
            "import sys, urllib.request, urllib.parse, xml.etree.ElementTree as ET\n"
            "ns = \"{http://s3.amazonaws.com/doc/2006-03-01/}\"\n"
            "got, tok = [], None\n"
            "for _ in range(20):\n"
            "    q = {\"list-type\": \"2\", \"max-keys\": \"1\", \"encoding-type\": \"url\"}\n"
            "    if tok: q[\"continuation-token\"] = tok\n"
            "    x = ET.fromstring(urllib.request.urlopen(sys.argv[1] + \"?\" + "
            "urllib.parse.urlencode(q)).read())\n"
            "    got += [urllib.parse.unquote(e.text, \"latin-1\") for e in x.iter(ns + \"Key\")]\n"
            "    if x.find(ns + \"IsTruncated\").text != \"true\": break\n"
            "    tok = x.find(ns + \"NextContinuationToken\").text\n"
            "want = [\"a-\\xff\\x01\", \"a-\\xff\\xff\\x02\", \"a-b\", \"c\"]\n"
            "assert sorted(got, key=lambda k: k.encode(\"latin-1\")) == got, got\n"
            "assert sorted(got) == sorted(want), got\n"
            "' %s/lsx > %s 2>&1 || { cat %s >&2; exit 1; }",
            g.url, gw_path(&g, "w"), gw_path(&g, "w")),
        0);
    T_TRUE(gw_has(&g, "l", "<Key>c</Key>"));
    /* A marker or start-after that is a common prefix passes the keys
     * under it. */
    T_EQ(gw_curl(&g, "l", "'%s/lst?delimiter=b&marker=a/b'", g.url), 200);
    T_FALSE(gw_has(&g, "l", "<Prefix>a/b</Prefix>"));
    T_TRUE(gw_has(&g, "l", "<Prefix>b</Prefix>"));
    T_EQ(gw_curl(&g, "l", "'%s/lst?delimiter=%%2Fb&list-type=2&continuation-token=garbage'", g.url),
         400);
    /* Subresources: NotImplemented (the unset configurations a GET may
     * read: test_gw_compat). */
    T_EQ(gw_curl(&g, "l", "'%s/lst?inventory'", g.url), 501);
    T_TRUE(gw_has(&g, "l", "<Code>NotImplemented</Code>"));
    T_EQ(gw_curl(&g, "l", "'%s/lst/b?torrent'", g.url), 501);
    /* A parameter S3 does not know is ignored on a read (a cache-buster on
     * a link), refused on a write; S3's own subresources stay 501. */
    T_EQ(gw_curl(&g, "l", "'%s/lst/b?v=2&_=1700000000'", g.url), 200);
    T_EQ(gw_curl(&g, "l", "-I '%s/lst/b?v=2'", g.url), 200);
    T_EQ(gw_curl(&g, "l", "'%s/lst?v=2'", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<ListBucketResult"));
    T_EQ(gw_curl(&g, "l", "'%s/lst/b?retention'", g.url), 501);
    T_EQ(gw_curl(&g, "l", "'%s/lst/b?versionId=abc'", g.url), 404); /* test_gw_compat */
    T_EQ(gw_curl(&g, "l", "-X PUT -d x '%s/lst/b?v=2'", g.url), 501);
    T_EQ(gw_curl(&g, "l", "-X DELETE '%s/lst/b?v=2'", g.url), 501);
    T_EQ(gw_curl(&g, "l", "-I '%s/lst/b'", g.url), 200);
    /* tags are kept (test_gw_tagging): this is no Tagging document */
    T_EQ(gw_curl(&g, "l", "-X PUT -d '<Tagging/>' '%s/lst/b?tagging'", g.url), 400);
    T_TRUE(gw_has(&g, "l", "MalformedXML"));
    T_EQ(gw_curl(&g, "l", "-X PUT -d '<Tagging/>' '%s/lst?tagging'", g.url), 400); /* a bucket's */
    /* UploadPartCopy (test_gw_compat): to an upload that is not there. */
    T_EQ(gw_curl(&g, "l",
                 "-X PUT -H 'x-amz-copy-source: /lst/b' "
                 "'%s/lst/c?uploadId=0123456789abcdef0123456789abcdef&partNumber=1'",
                 g.url),
         404);
    T_TRUE(gw_has(&g, "l", "<Code>NoSuchUpload</Code>"));
    T_EQ(gw_curl(&g, "l", "'%s/lst?max-keys=-1'", g.url), 400);
    T_EQ(gw_curl(&g, "l", "'%s/lst?max-keys=%%2B1'", g.url), 400);
    T_EQ(gw_curl(&g, "l", "'%s/lst?max-keys=%%201'", g.url), 400);
    T_EQ(gw_curl(&g, "l", "'%s/lst?max-keys=4294967297'", g.url), 400);
    T_TRUE(gw_has(&g, "l", "<Code>InvalidArgument</Code>"));
    T_EQ(gw_curl(&g, "l", "'%s/lst?max-keys=1'", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<MaxKeys>1</MaxKeys>"));
    gw_stop(&g);
}

/* Anonymous off, bounds, keep-alive, Expect: 100-continue, the log line and metrics. */
TEST(protocol_and_metrics)
{
    struct gw g;
    const char *noanon[] = {"--no-anon", NULL};

    gw_start(&g, "mock://", noanon);
    T_EQ(gw_curl(&g, "o", "%s/", g.url), 403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/bkt", g.url), 403);
    gw_stop(&g);

    setenv("SRV_LOG_FILE", "1", 1); /* the log in a file: srv_log_count */
    gw_start(&g, "mock://", NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/bkt", g.url), 200);
    /* A request target over 8 KiB: 400 (or the library's own 414/431). */
    {
        char *longk = malloc(9001);
        memset(longk, 'k', 9000);
        longk[9000] = '\0';
        int st = gw_curl(&g, "o", "%s/bkt/%s", g.url, longk);
        free(longk);
        T_TRUE(st == 400 || st == 414 || st == 431);
    }
    /* A header block over the connection's memory: refused. */
    {
        char *big = malloc(300 * 1024);
        memset(big, 'h', 300 * 1024 - 1);
        big[300 * 1024 - 1] = '\0';
        t_write_file(gw_path(&g, "bighdr"), "X-Big: ", 7);
        t_sh("printf '%%s' '%s' >> %s", "", gw_path(&g, "bighdr"));
        FILE *f = fopen(gw_path(&g, "bighdr"), "a");
        fputs(big, f);
        fclose(f);
        free(big);
        int st = gw_curl(&g, "o", "-H @%s %s/bkt/k", gw_path(&g, "bighdr"), g.url);
        T_TRUE(st == 400 || st == 413 || st == 431 || st == -1);
    }
    /* A key longer than the backend's: KeyTooLongError. */
    {
        char *longk = malloc(1101);
        memset(longk, 'k', 1100);
        longk[1100] = '\0';
        T_EQ(gw_curl(&g, "o", "%s/bkt/%s", g.url, longk), 400);
        T_TRUE(gw_has(&g, "o", "KeyTooLongError"));
        free(longk);
    }
    /* Expect: 100-continue (curl sends it for bodies over 1 MiB); a PUT to
     * a missing bucket gets its 404 instead of the 100. */
    gw_file(&g, "src", 3 * 1024 * 1024, 5);
    T_EQ(gw_curl(&g, "o", "-H 'Expect: 100-continue' -T %s %s/bkt/big", gw_path(&g, "src"), g.url),
         200);
    T_TRUE(gw_has(&g, "o.h", "100 Continue"));
    T_EQ(
        gw_curl(&g, "o", "-H 'Expect: 100-continue' -T %s %s/nobkt/big", gw_path(&g, "src"), g.url),
        404);
    T_FALSE(gw_has(&g, "o.h", "100 Continue"));
    /* Keep-alive: two requests, one connection. */
    T_EQ(t_sh("curl -sv -o /dev/null -o /dev/null %s/bkt/big %s/bkt/big 2>&1 | "
              "grep -q 'Re-using existing connection'",
              g.url, g.url),
         0);
    /* One log line per request: the key's length, not the key. A request's
     * line is written once its answer is sent, which the client may see
     * first: wait for the last GET's too. */
    for (int i = 0; i < 50 && (!srv_log_count(&g.e, "s3 PUT PutObject bucket=bkt keylen=3 "
                                                    "status=200 in=3145728 out=0 ms=") ||
                               srv_log_count(&g.e, "s3 GET GetObject bucket=bkt keylen=3 "
                                                   "status=200 in=0 out=3145728 ms=") < 2);
         i++)
        t_sleep_ms(20);
    T_EQ(srv_log_count(&g.e, "s3 PUT PutObject bucket=bkt keylen=3 status=200 in=3145728 out=0 "
                             "ms="),
         1u);
    T_EQ(srv_log_count(&g.e, "s3 GET GetObject bucket=bkt keylen=3 status=200 in=0 "
                             "out=3145728 ms="),
         2u);
    T_EQ(srv_log_count(&g.e, "/big"), 0u);
    {
        /* Each request's line ends with its x-amz-request-id. */
        size_t n;
        char *log = (char *)t_slurp(g.e.log, &n), *p = log;
        unsigned lines = 0;
        while ((p = strstr(p, " keylen=3 status=200 "))) {
            char *eol = strchr(p, '\n'), *id = strstr(p, " id=");
            T_TRUE(eol && id && id < eol && strspn(id + 4, "0123456789abcdef") == 16);
            lines++;
            p = eol ? eol : p + 1;
        }
        T_EQ(lines, 3u);
        free(log);
    }
    /* Metrics. */
    T_EQ(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"PutObject\",status=\"2xx\"}"), 1);
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"GetObject\",status=\"2xx\"}"), 2);
    T_EQ(srv_scrape(&g.e, "railiod_s3_bytes_total{op=\"PutObject\",direction=\"in\"}"),
         3.0 * 1024 * 1024);
    T_GE(srv_scrape(&g.e, "railiod_s3_request_seconds_count{op=\"GetObject\"}"), 2);
    gw_stop(&g);
}
