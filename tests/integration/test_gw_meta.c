/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 180 */
/*
 * Object metadata through railiod's S3 gateway (docs/gateway.md, "Object
 * metadata"), driven with curl(1) over the server's own store and file://:
 * x-amz-meta-* and the stored content headers on PutObject come back on
 * HeadObject and GetObject; the 2 KiB limit (MetadataTooLarge, nothing
 * published) and bad values refused; CopyObject's COPY and REPLACE
 * directives and the copy onto itself; a later PUT without metadata reads
 * back S3's defaults; Delete and DeleteObjects drop the record; a plain PUT
 * writes none. On file://, records written straight into the backend that
 * are malformed, too large, of another key or of another version are
 * ignored (the object reads back with the defaults, a warning is logged).
 */
#include "gw_util.h"

static void metadata(const char *backend, const char *dir)
{
    struct gw g;
    char big[1200], rk[256];

    gw_start(&g, backend, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/mdb", g.url), 200);
    gw_file(&g, "src", 100000, 3);

    /* PutObject with everything S3 stores; HEAD and GET give it back. */
    T_EQ(gw_curl(&g, "o",
                 "-T %s -H 'x-amz-meta-Color: blue' -H 'x-amz-meta-color: red' "
                 "-H 'x-amz-meta-sp: a  b' -H 'x-amz-meta-empty;' -H 'x-amz-meta-ws: v1  ' "
                 "-H 'Content-Type: text/plain; charset=utf-8' -H 'Content-Encoding: x-test' "
                 "-H 'Content-Disposition: attachment; filename=\"a b.txt\"' "
                 "-H 'Content-Language: de' -H 'Cache-Control: max-age=60' "
                 "-H 'Expires: Thu, 01 Jan 2037 00:00:00 GMT' %s/mdb/k1",
                 gw_path(&g, "src"), g.url),
         200);
    for (int get = 0; get < 2; get++) {
        const char *f = get ? "got.h" : "o.h";
        T_EQ(gw_curl(&g, get ? "got" : "o", "%s %s/mdb/k1", get ? "" : "-I", g.url), 200);
        T_TRUE(gw_has(&g, f, "x-amz-meta-color: blue,red\r\n"));
        T_TRUE(gw_has(&g, f, "x-amz-meta-sp: a  b\r\n"));
        T_TRUE(gw_has(&g, f, "x-amz-meta-ws: v1\r\n"));   /* the blanks around a value: none */
        T_TRUE(gw_has(&g, f, "x-amz-meta-empty:  \r\n")); /* an empty value (a blank) */
        T_TRUE(gw_has(&g, f, "Content-Type: text/plain; charset=utf-8\r\n"));
        T_TRUE(gw_has(&g, f, "Content-Encoding: x-test\r\n"));
        T_TRUE(gw_has(&g, f, "Content-Disposition: attachment; filename=\"a b.txt\"\r\n"));
        T_TRUE(gw_has(&g, f, "Content-Language: de\r\n"));
        T_TRUE(gw_has(&g, f, "Cache-Control: max-age=60\r\n"));
        T_TRUE(gw_has(&g, f, "Expires: Thu, 01 Jan 2037 00:00:00 GMT\r\n"));
        T_FALSE(gw_has(&g, f, "binary/octet-stream"));
    }
    T_TRUE(gw_same(&g, "got", "src"));

    /* A plain PUT: S3's defaults, and no record written. */
    T_EQ(gw_curl(&g, "o", "-T %s %s/mdb/plain", gw_path(&g, "src"), g.url), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/plain", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "Content-Type: binary/octet-stream\r\n"));
    T_FALSE(gw_has(&g, "o.h", "x-amz-meta-"));
    if (dir) {
        gw_record_key(&g, "mdb", "plain", rk, sizeof(rk));
        T_NE(t_sh("test -e '%s/%s'", dir, rk), 0);
        gw_record_key(&g, "mdb", "k1", rk, sizeof(rk));
        T_EQ(t_sh("test -e '%s/%s'", dir, rk), 0);
    }

    /* aws-chunked names the request's framing: not stored (as S3). */
    T_EQ(gw_curl(&g, "o", "-T %s -H 'Content-Encoding: aws-chunked, x-z' %s/mdb/ce",
                 gw_path(&g, "src"), g.url),
         200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/ce", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "Content-Encoding: x-z\r\n"));
    T_EQ(gw_curl(&g, "o", "-T %s -H 'Content-Encoding: aws-chunked' %s/mdb/ce", gw_path(&g, "src"),
                 g.url),
         200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/ce", g.url), 200);
    T_FALSE(gw_has(&g, "o.h", "Content-Encoding"));
    /* The other codings as they came, spaces and all. */
    T_EQ(gw_curl(&g, "o", "-T %s -H 'Content-Encoding: deflate, gzip' %s/mdb/ce",
                 gw_path(&g, "src"), g.url),
         200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/ce", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "Content-Encoding: deflate, gzip\r\n"));
    T_EQ(gw_curl(&g, "o", "-T %s -H 'Content-Encoding: deflate, aws-chunked,gzip ' %s/mdb/ce",
                 gw_path(&g, "src"), g.url),
         200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/ce", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "Content-Encoding: deflate,gzip\r\n"));

    /* 2 KiB of names and values at most: 2048 is fine, 2049 refused. */
    memset(big, 'v', sizeof(big));
    snprintf(big + 1023, sizeof(big) - 1023, "%s", "");
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-meta-a: %s' -H 'x-amz-meta-b: %s' %s/mdb/full",
                 gw_path(&g, "src"), big, big, g.url),
         200); /* 2 x (1 + 1023) */
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/full", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "x-amz-meta-b: vvvv"));
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-meta-a: %s' -H 'x-amz-meta-bb: %s' %s/mdb/over",
                 gw_path(&g, "src"), big, big, g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>MetadataTooLarge</Code>"));
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/over", g.url), 404);
    /* A control character in a value; a name that is not a token. */
    T_EQ(gw_curl(&g, "o", "-T %s -H \"x-amz-meta-c: $(printf 'a\\001b')\" %s/mdb/bad",
                 gw_path(&g, "src"), g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidArgument</Code>"));
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-meta-a(b): 1' %s/mdb/bad", gw_path(&g, "src"), g.url),
         400);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/bad", g.url), 404);

    /* CopyObject: COPY (the default) keeps it, REPLACE takes the request's. */
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /mdb/k1' %s/mdb/c1", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/c1", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "x-amz-meta-color: blue,red\r\n"));
    T_TRUE(gw_has(&g, "o.h", "Content-Type: text/plain; charset=utf-8\r\n"));
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /mdb/k1' -H 'x-amz-metadata-directive: REPLACE' "
                 "-H 'x-amz-meta-new: 1' %s/mdb/c2",
                 g.url),
         200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/c2", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "x-amz-meta-new: 1\r\n"));
    T_FALSE(gw_has(&g, "o.h", "x-amz-meta-color"));
    T_TRUE(gw_has(&g, "o.h", "Content-Type: binary/octet-stream\r\n"));
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /mdb/k1' -H 'x-amz-metadata-directive: MOVE' "
                 "%s/mdb/c3",
                 g.url),
         400);
    /* Onto itself: only with REPLACE, as S3. */
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /mdb/c1' %s/mdb/c1", g.url), 400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidRequest</Code>"));
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /mdb/c1' -H 'x-amz-metadata-directive: REPLACE' "
                 "-H 'Content-Type: image/png' %s/mdb/c1",
                 g.url),
         200);
    T_EQ(gw_curl(&g, "got", "%s/mdb/c1", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    T_TRUE(gw_has(&g, "got.h", "Content-Type: image/png\r\n"));
    T_FALSE(gw_has(&g, "got.h", "x-amz-meta-"));

    /* A later PUT without metadata: the old record no longer applies. */
    T_EQ(gw_curl(&g, "o", "-T %s %s/mdb/k1", gw_path(&g, "src"), g.url), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/k1", g.url), 200);
    T_FALSE(gw_has(&g, "o.h", "x-amz-meta-"));
    T_TRUE(gw_has(&g, "o.h", "Content-Type: binary/octet-stream\r\n"));

    /* Delete and DeleteObjects drop the records; a new object of the same
     * key starts without metadata. */
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/mdb/c2", g.url), 204);
    if (dir) {
        gw_record_key(&g, "mdb", "c2", rk, sizeof(rk));
        T_NE(t_sh("test -e '%s/%s'", dir, rk), 0);
    }
    t_write_file(gw_path(&g, "del.xml"), "<Delete><Object><Key>full</Key></Object></Delete>", 49);
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/mdb?delete'", gw_path(&g, "del.xml"),
                 g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>full</Key></Deleted>"));
    if (dir) {
        gw_record_key(&g, "mdb", "full", rk, sizeof(rk));
        T_NE(t_sh("test -e '%s/%s'", dir, rk), 0);
    }
    T_EQ(gw_curl(&g, "o", "-T %s %s/mdb/full", gw_path(&g, "src"), g.url), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/full", g.url), 200);
    T_FALSE(gw_has(&g, "o.h", "x-amz-meta-"));
    /* A key of 1000 bytes: its record's name is a hash, and fits. */
    {
        char lk[1001];
        for (int i = 0; i < 1000; i++) /* in names of 199 bytes: file:// has files */
            lk[i] = i % 200 == 199 && i < 999 ? '/' : 'k';
        lk[1000] = '\0';
        T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-meta-long: yes' %s/mdb/%s", gw_path(&g, "src"),
                     g.url, lk),
             200);
        T_EQ(gw_curl(&g, "o", "-I %s/mdb/%s", g.url, lk), 200);
        T_TRUE(gw_has(&g, "o.h", "x-amz-meta-long: yes\r\n"));
        T_EQ(gw_curl(&g, "o", "-X DELETE %s/mdb/%s", g.url, lk), 204);
    }
    /* Records never show in a listing. */
    T_EQ(gw_curl(&g, "l", "'%s/mdb?list-type=2'", g.url), 200);
    T_FALSE(gw_has(&g, "l", "rio-meta"));
    T_EQ(gw_curl(&g, "l", "%s/", g.url), 200);
    T_FALSE(gw_has(&g, "l", "rio-meta"));
    gw_stop(&g);
}

TEST(metadata_own_store)
{
    metadata(NULL, NULL);
}

TEST(metadata_file)
{
    char url[256];
    const char *dir = t_scratch_dir("gw-meta-file");
    snprintf(url, sizeof(url), "file://%s", dir);
    metadata(url, dir);
}

/* Records written straight into the backend: never trusted. */
TEST(bad_records)
{
    static const struct {
        const char *name, *text;
    } bad[] = {
        {"garbage", "\x01\x02not a record at all\xff"},
        {"magic", "railio-s3-meta 2\nkey mdb/obj\n"},
        {"truncated", "railio-s3-meta 1\nkey mdb/obj\nsize 100000\ngeneration -\netag -\n"
                      "s3-etag 00-1\nmeta x 1\n"},
        {"other_key", "railio-s3-meta 1\nkey mdb/other\nsize 100000\ngeneration -\netag -\n"
                      "s3-etag 00-1\nmeta x 1\nend\n"},
        {"other_size", "railio-s3-meta 1\nkey mdb/obj\nsize 7\ngeneration -\netag -\n"
                       "s3-etag 00-1\nmeta x 1\nend\n"},
        {"crlf", "railio-s3-meta 1\nkey mdb/obj\nsize 100000\ngeneration -\netag -\n"
                 "s3-etag -\nmeta x a%0D%0ASet-Cookie:%20y\nend\n"},
        {"trailing", "railio-s3-meta 1\nkey mdb/obj\nsize 100000\ngeneration -\netag -\n"
                     "s3-etag -\nend\nmore\n"},
    };
    char url[256], rk[256], bin[512], md5[64] = "";
    const char *dir = t_scratch_dir("gw-meta-bad");
    struct gw g;

    setenv("SRV_LOG_FILE", "1", 1);
    snprintf(url, sizeof(url), "file://%s", dir);
    t_build_path(bin, sizeof(bin), "railio");
    gw_start(&g, url, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/mdb", g.url), 200);
    gw_file(&g, "src", 100000, 4);
    T_EQ(t_sh("md5sum %s | cut -c1-32 | tr -d '\\n' > %s", gw_path(&g, "src"), gw_path(&g, "md5")),
         0);
    {
        size_t n = 0;
        char *m = (char *)t_slurp(gw_path(&g, "md5"), &n);
        snprintf(md5, sizeof(md5), "%.*s", (int)n, m);
        free(m);
    }
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-meta-x: 1' %s/mdb/obj", gw_path(&g, "src"), g.url), 200);
    gw_record_key(&g, "mdb", "obj", rk, sizeof(rk));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        t_write_file(gw_path(&g, "rec"), bad[i].text, strlen(bad[i].text));
        T_EQ(t_sh("%s put -q 'file://%s/%s' %s", bin, dir, rk, gw_path(&g, "rec")), 0);
        T_EQ(gw_curl(&g, "got", "%s/mdb/obj", g.url), 200);
        T_TRUE(gw_same(&g, "got", "src"));
        T_TRUE(gw_has(&g, "got.h", "Content-Type: binary/octet-stream\r\n"));
        T_FALSE(gw_has(&g, "got.h", "x-amz-meta-"));
        T_FALSE(gw_has(&g, "got.h", "Set-Cookie"));
        T_TRUE(gw_has(&g, "got.h", md5));
        T_EQ(gw_curl(&g, "l", "'%s/mdb?list-type=2'", g.url), 200);
        T_TRUE(gw_has(&g, "l", md5));
    }
    /* Larger than any record: not read whole, ignored. */
    gw_file(&g, "rec", 200000, 5);
    T_EQ(t_sh("%s put -q 'file://%s/%s' %s", bin, dir, rk, gw_path(&g, "rec")), 0);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/obj", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "Content-Type: binary/octet-stream\r\n"));
    T_GE(srv_log_count(&g.e, "metadata record .rio-meta/mdb/"), 6u);
    /* The object is still whole and can get metadata again. */
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-meta-x: 2' %s/mdb/obj", gw_path(&g, "src"), g.url), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/obj", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "x-amz-meta-x: 2\r\n"));
    /* The object removed behind the gateway's back: its record describes
     * nothing, and DeleteBucket removes it with the bucket. */
    T_EQ(t_sh("%s rm -q 'file://%s/mdb/obj'", bin, dir), 0);
    T_EQ(gw_curl(&g, "o", "-I %s/mdb/obj", g.url), 404);
    T_EQ(t_sh("test -e '%s/%s'", dir, rk), 0);
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/mdb", g.url), 204);
    T_NE(t_sh("test -e '%s/%s'", dir, rk), 0);
    gw_stop(&g);
}

/*
 * A PutObject whose commit fails leaves the object that stays as it was,
 * its record included. The record of a checksum alone is written beside
 * the commit; the key's record as it was is read while the body comes in
 * and put back when the commit fails (else the old object would read with
 * the new record and lose its headers and metadata). The backend's 4th
 * commit fails, 300 ms after it was made: 1 the bucket's marker, 2 and 3
 * the first object and its record, 4 the failing PUT's object; the 4th
 * chunk write (the record written beside it) is held 100 ms, so that the
 * record lands after the commit was made and before it failed.
 */
TEST(failed_put_keeps_record)
{
    struct gw g;

    setenv("SRV_LOG_FILE", "1", 1);
    gw_start(&g,
             "mock://?faults=meta_error:op=put_commit:error=RIO_EUNKNOWN:skip=3:count=1:"
             "delay=300;delay:op=write:skip=3:count=1:delay=100",
             NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/fbk", g.url), 200);
    t_write_file(gw_path(&g, "old"), "hello\n", 6);
    t_write_file(gw_path(&g, "new"), "new bytes\n", 10);
    T_EQ(gw_curl(&g, "o",
                 "-T %s -H 'Content-Type: text/x-old' -H 'x-amz-meta-v: 1' "
                 "-H 'x-amz-checksum-crc32: NjowIA==' %s/fbk/k",
                 gw_path(&g, "old"), g.url),
         200);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: rADojw==' %s/fbk/k", gw_path(&g, "new"),
                 g.url),
         500);
    T_EQ(gw_curl(&g, "got", "-H 'x-amz-checksum-mode: ENABLED' %s/fbk/k", g.url), 200);
    T_TRUE(gw_same(&g, "got", "old"));
    T_TRUE(gw_has(&g, "got.h", "Content-Type: text/x-old\r\n"));
    T_TRUE(gw_has(&g, "got.h", "x-amz-meta-v: 1\r\n"));
    T_TRUE(gw_has(&g, "got.h", "x-amz-checksum-crc32: NjowIA==\r\n"));
    T_EQ(srv_log_count(&g.e, "put back after a failed PUT"), 1u);

    /* The fault spent, the same PUT lands; its checksum is kept (written
     * after the commit, over a key with a record) and nothing of the old
     * record stays. */
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: rADojw==' %s/fbk/k", gw_path(&g, "new"),
                 g.url),
         200);
    T_EQ(gw_curl(&g, "got", "-H 'x-amz-checksum-mode: ENABLED' %s/fbk/k", g.url), 200);
    T_TRUE(gw_same(&g, "got", "new"));
    T_TRUE(gw_has(&g, "got.h", "x-amz-checksum-crc32: rADojw==\r\n"));
    T_TRUE(gw_has(&g, "got.h", "Content-Type: binary/octet-stream\r\n"));
    T_FALSE(gw_has(&g, "got.h", "x-amz-meta-"));

    /* A new key: its record beside the commit, given back the same. */
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: NjowIA==' %s/fbk/k2", gw_path(&g, "old"),
                 g.url),
         200);
    T_EQ(gw_curl(&g, "got", "-I -H 'x-amz-checksum-mode: ENABLED' %s/fbk/k2", g.url), 200);
    T_TRUE(gw_has(&g, "got.h", "x-amz-checksum-crc32: NjowIA==\r\n"));
    gw_stop(&g);

    /* A key without a record: the record written beside a commit that
     * failed is removed (it names bytes never published). Commit 2 (the
     * object's) fails; chunk write 2 (the record's) is held. */
    gw_start(&g,
             "mock://?faults=meta_error:op=put_commit:error=RIO_EUNKNOWN:skip=1:count=1:"
             "delay=300;delay:op=write:skip=1:count=1:delay=100",
             NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/fbk", g.url), 200);
    t_write_file(gw_path(&g, "old"), "hello\n", 6);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: NjowIA==' %s/fbk/k", gw_path(&g, "old"),
                 g.url),
         500);
    T_EQ(gw_curl(&g, "o", "-I %s/fbk/k", g.url), 404);
    T_EQ(srv_log_count(&g.e, "of a failed PUT removed"), 1u);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: NjowIA==' %s/fbk/k", gw_path(&g, "old"),
                 g.url),
         200);
    T_EQ(gw_curl(&g, "got", "-H 'x-amz-checksum-mode: ENABLED' %s/fbk/k", g.url), 200);
    T_TRUE(gw_same(&g, "got", "old"));
    T_TRUE(gw_has(&g, "got.h", "x-amz-checksum-crc32: NjowIA==\r\n"));
    gw_stop(&g);
}

/* curl ARGS1 (its "%s" the gateway's URL) in the background, 150 ms later
 * curl ARGS2; both answered as expected. */
static void race(struct gw *g, const char *args1, int code1, const char *args2, int code2)
{
    char a1[512], a2[512];

    snprintf(a1, sizeof(a1), args1, g->url);
    snprintf(a2, sizeof(a2), args2, g->url);
    T_EQ(t_sh("cd %s && { curl -s -m 30 -o a.out -w '%%{http_code}' %s > a.code & } && "
              "sleep 0.15 && curl -s -m 30 -o b.out -w '%%{http_code}' %s > b.code; wait; "
              "test \"$(cat a.code)\" = %d && test \"$(cat b.code)\" = %d",
              g->dir, a1, a2, code1, code2),
         0);
}

/* GET key: 200 with body and the metadata PUT with it (Content-Type
 * text/x-BODY, x-amz-meta-who: BODY), where body is one of the two. */
static void reads_own(struct gw *g, const char *key, const char *b1, const char *b2)
{
    char want[128];

    T_EQ(gw_curl(g, "got", "%s/%s", g->url, key), 200);
    const char *b = t_sh("printf %s | cmp -s - %s", b1, gw_path(g, "got")) == 0 ? b1 : b2;
    T_TRUE(t_sh("printf %s | cmp -s - %s", b, gw_path(g, "got")) == 0);
    snprintf(want, sizeof(want), "Content-Type: text/x-%s\r\n", b);
    T_TRUE(gw_has(g, "got.h", want));
    snprintf(want, sizeof(want), "x-amz-meta-who: %s\r\n", b);
    T_TRUE(gw_has(g, "got.h", want));
}

/*
 * Two PutObjects of one key with metadata, the first one's record landing
 * after the second one's (its commit of the record held 400 ms): the
 * object that stays (the second) keeps its own record. A record is written
 * on the condition that the key's record is still the one read before the
 * object's commit; when another writer wrote it since, it is written only
 * if the key's object is still this PUT's. The backend's 3rd commit (the
 * first PUT's record: 1 the bucket's marker, 2 its object) is held.
 */
TEST(late_record_never_replaces_newer)
{
    struct gw g;

    gw_start(&g, "mock://?faults=delay:op=put_commit:skip=2:count=1:delay=400", NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/lrb", g.url), 200);
    race(&g,
         "-X PUT -d first -H 'Content-Type: text/x-first' -H 'x-amz-meta-who: first' "
         "%s/lrb/k",
         200,
         "-X PUT -d second -H 'Content-Type: text/x-second' -H 'x-amz-meta-who: second' "
         "%s/lrb/k",
         200);
    /* The second, unless a loaded machine let it in first: whichever
     * stays reads with its own metadata. */
    reads_own(&g, "lrb/k", "second", "first");
    gw_stop(&g);
}

/*
 * A DeleteObject and a PutObject of one key at once, the delete's removal
 * of the old record landing after the new object's record was written
 * (the backend's 2nd removal is held 400 ms: 1 the delete's object, 2 its
 * record): the new object keeps its record. The delete removes the record
 * only while it is the one it read before the object went.
 */
TEST(late_delete_never_drops_new_record)
{
    struct gw g;

    gw_start(&g, "mock://?faults=delay:op=remove:skip=1:count=1:delay=400", NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/ldb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d old -H 'Content-Type: text/x-old' %s/ldb/k", g.url), 200);
    race(&g, "-X DELETE %s/ldb/k", 204,
         "-X PUT -d new -H 'Content-Type: text/x-new' -H 'x-amz-meta-who: new' %s/ldb/k", 200);
    /* The new object, unless a loaded machine let the delete go last:
     * then nothing. */
    if (gw_curl(&g, "o", "-I %s/ldb/k", g.url) != 404)
        reads_own(&g, "ldb/k", "new", "new");
    gw_stop(&g);
}

/*
 * The same through DeleteObjects, whose records go after all its objects:
 * k1's object goes, k2's removal is held 400 ms, and a PutObject of k1
 * with metadata lands meanwhile: k1's new record stays (only the record
 * read before k1's object went is removed).
 */
TEST(late_delete_objects_never_drops_new_record)
{
    struct gw g;

    gw_start(&g, "mock://?faults=delay:op=remove:skip=1:count=1:delay=400", NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/ldm", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d old -H 'Content-Type: text/x-old' %s/ldm/k1", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d old -H 'Content-Type: text/x-old' %s/ldm/k2", g.url), 200);
    race(&g,
         "-X POST --data-binary '<Delete><Object><Key>k1</Key></Object><Object><Key>k2</Key>"
         "</Object></Delete>' '%s/ldm?delete'",
         200, "-X PUT -d new -H 'Content-Type: text/x-new' -H 'x-amz-meta-who: new' %s/ldm/k1",
         200);
    T_TRUE(t_sh("grep -q '<Deleted><Key>k2</Key></Deleted>' %s/a.out", g.dir) == 0);
    if (gw_curl(&g, "o", "-I %s/ldm/k1", g.url) != 404)
        reads_own(&g, "ldm/k1", "new", "new");
    gw_stop(&g);
}
