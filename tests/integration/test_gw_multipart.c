/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 240 */
/*
 * Multipart uploads through railiod's S3 gateway: the aws CLI's own
 * multipart cp (5 MiB parts) read back byte for byte, and the s3api calls
 * one by one: CreateMultipartUpload, UploadPart, ListParts,
 * ListMultipartUploads, CompleteMultipartUpload (S3's "-N" ETag; parts
 * missing, with a wrong ETag or out of order refused, nothing published),
 * AbortMultipartUpload, NoSuchUpload. The "-N" ETag is what HeadObject,
 * GetObject and the listings give afterwards, and CreateMultipartUpload's
 * metadata and Content-Type are the object's.
 */
#include "gw_util.h"

/* The aws CLI with 5 MiB parts above 8 MB (mpcfg). */
#define aws(g, out, ...) gw_aws((g), mpenv, (out), __VA_ARGS__)
static char mpenv[256];

/* The value of "UploadId" in scratch file name (JSON), into id. */
static void upload_id(struct gw *g, const char *name, char *id, size_t cap)
{
    T_EQ(t_sh("python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"UploadId\"], "
              "end=\"\")' %s > %s",
              gw_path(g, name), gw_path(g, "id")),
         0);
    size_t n = 0;
    char *t = (char *)t_slurp(gw_path(g, "id"), &n);
    snprintf(id, cap, "%.*s", (int)n, t);
    free(t);
}

/* The aws CLI of mpenv for g: 5 MiB parts above 8 MB. */
static void aws_parts(struct gw *g)
{
    snprintf(mpenv, sizeof(mpenv), "AWS_CONFIG_FILE=%s/mpcfg", g->dir);
    T_EQ(t_sh("printf '[default]\\ns3 =\\n    multipart_threshold = 8MB\\n"
              "    multipart_chunksize = 5MB\\n' > %s/mpcfg",
              g->dir),
         0);
}

TEST(multipart)
{
    struct gw g;
    char id[64], xml[1024];

    if (t_sh("command -v aws >/dev/null") != 0)
        T_SKIP("the aws CLI is not installed");
    gw_start(&g, NULL, NULL);
    aws_parts(&g);
    gw_file(&g, "big", 23 * 1000 * 1000 + 11, 9);
    gw_file(&g, "p1", 5 * 1024 * 1024, 1);
    gw_file(&g, "p2", 1000, 2);
    T_EQ(t_sh("cat %s %s > %s", gw_path(&g, "p1"), gw_path(&g, "p2"), gw_path(&g, "p12")), 0);

    /* aws s3 cp: five parts up, ranged parallel GETs down. */
    T_EQ(aws(&g, "o", "s3 mb s3://mpb"), 0);
    T_EQ(aws(&g, "o", "s3 cp big s3://mpb/d/big"), 0);
    T_EQ(aws(&g, "o", "s3 cp s3://mpb/d/big back"), 0);
    T_TRUE(gw_same(&g, "back", "big"));
    T_EQ(aws(&g, "o", "s3api head-object --bucket mpb --key d/big"), 0);
    T_TRUE(gw_has(&g, "o", "-5\\\"\"")); /* "ETag": "\"...-5\"" */

    /* Metadata given to CreateMultipartUpload (aws s3 cp --metadata). */
    T_EQ(aws(&g, "o",
             "s3 cp big s3://mpb/d/meta --metadata Owner=me,Shard=7 "
             "--content-type application/x-shard --cache-control no-store"),
         0);
    T_EQ(aws(&g, "h", "s3api head-object --bucket mpb --key d/meta"), 0);
    T_TRUE(gw_has(&g, "h", "\"owner\": \"me\""));
    T_TRUE(gw_has(&g, "h", "\"shard\": \"7\""));
    T_TRUE(gw_has(&g, "h", "\"ContentType\": \"application/x-shard\""));
    T_TRUE(gw_has(&g, "h", "\"CacheControl\": \"no-store\""));
    T_TRUE(gw_has(&g, "h", "-5\\\"\""));
    T_EQ(aws(&g, "o", "s3 cp s3://mpb/d/meta back"), 0);
    T_TRUE(gw_same(&g, "back", "big"));

    /* One by one. */
    T_EQ(aws(&g, "c", "s3api create-multipart-upload --bucket mpb --key k"), 0);
    upload_id(&g, "c", id, sizeof(id));
    T_EQ(aws(&g, "o",
             "s3api upload-part --bucket mpb --key k --upload-id %s --part-number 2 "
             "--body p2",
             id),
         0);
    T_EQ(aws(&g, "o",
             "s3api upload-part --bucket mpb --key k --upload-id %s --part-number 1 "
             "--body p1",
             id),
         0);
    T_EQ(aws(&g, "o", "s3api list-parts --bucket mpb --key k --upload-id %s", id), 0);
    T_TRUE(gw_has(&g, "o", "\"PartNumber\": 2"));
    T_TRUE(gw_has(&g, "o", "\"Size\": 5242880"));
    T_EQ(aws(&g, "o", "s3api list-multipart-uploads --bucket mpb"), 0);
    T_TRUE(gw_has(&g, "o", id));
    /* Refusals: out of order, a wrong ETag, a missing part: nothing published. */
    snprintf(xml, sizeof(xml),
             "<CompleteMultipartUpload><Part><PartNumber>2</PartNumber>"
             "<ETag>x</ETag></Part><Part><PartNumber>1</PartNumber><ETag>y</ETag>"
             "</Part></CompleteMultipartUpload>");
    t_write_file(gw_path(&g, "c.xml"), xml, strlen(xml));
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/mpb/k?uploadId=%s'", gw_path(&g, "c.xml"),
                 g.url, id),
         400);
    T_TRUE(gw_has(&g, "o", "InvalidPartOrder"));
    snprintf(xml, sizeof(xml),
             "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
             "<ETag>\"0123456789abcdef0123456789abcdef\"</ETag></Part>"
             "</CompleteMultipartUpload>");
    t_write_file(gw_path(&g, "c.xml"), xml, strlen(xml));
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/mpb/k?uploadId=%s'", gw_path(&g, "c.xml"),
                 g.url, id),
         400);
    T_TRUE(gw_has(&g, "o", "InvalidPart"));
    T_EQ(gw_curl(&g, "o", "-I %s/mpb/k", g.url), 404);
    T_EQ(t_sh("printf '{\"Parts\":[{\"PartNumber\":1,\"ETag\":\"'$(md5sum %s | cut -c1-32)'\"},"
              "{\"PartNumber\":2,\"ETag\":\"'$(md5sum %s | cut -c1-32)'\"}]}' > %s",
              gw_path(&g, "p1"), gw_path(&g, "p2"), gw_path(&g, "parts.json")),
         0);
    T_EQ(aws(&g, "o",
             "s3api complete-multipart-upload --bucket mpb --key k --upload-id %s "
             "--multipart-upload file://parts.json",
             id),
         0);
    T_TRUE(gw_has(&g, "o", "-2\\\"")); /* S3's multipart ETag: MD5 of the MD5s, "-2" */
    /* The same ETag from HEAD, GET (also ranged, and If-Match) and both listings. */
    T_EQ(t_sh("python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"ETag\"], "
              "end=\"\")' %s > %s",
              gw_path(&g, "o"), gw_path(&g, "etag")),
         0);
    {
        size_t n = 0;
        char *t = (char *)t_slurp(gw_path(&g, "etag"), &n), etag[64], bare[64];
        snprintf(etag, sizeof(etag), "%.*s", (int)n, t);
        snprintf(bare, sizeof(bare), "%.34s", etag + 1);
        free(t);
        T_EQ(strlen(etag), 36u); /* "32 hex digits-2" with its quotes */
        T_EQ(gw_curl(&g, "got", "%s/mpb/k", g.url), 200);
        T_TRUE(gw_same(&g, "got", "p12"));
        T_TRUE(gw_has(&g, "got.h", etag));
        T_EQ(gw_curl(&g, "o", "-I %s/mpb/k", g.url), 200);
        T_TRUE(gw_has(&g, "o.h", etag));
        T_EQ(gw_curl(&g, "o", "-r 0-9 -H 'If-Match: %s' %s/mpb/k", etag, g.url), 206);
        T_TRUE(gw_has(&g, "o.h", etag));
        T_EQ(gw_curl(&g, "o", "-H 'If-None-Match: %s' %s/mpb/k", etag, g.url), 304);
        T_EQ(aws(&g, "o", "s3api list-objects-v2 --bucket mpb --prefix k"), 0);
        T_TRUE(gw_has(&g, "o", bare));
        T_EQ(aws(&g, "o", "s3api list-objects --bucket mpb --prefix k"), 0);
        T_TRUE(gw_has(&g, "o", bare));
        T_EQ(gw_curl(&g, "o", "'%s/mpb?list-type=2&prefix=k'", g.url), 200);
        T_TRUE(gw_has(&g, "o", bare));
    }
    /* GET and HEAD ?partNumber: that part's bytes, as S3 (206, its range,
     * the count of parts); past the last part 416; with a Range 400. */
    T_EQ(gw_curl(&g, "got", "'%s/mpb/k?partNumber=2'", g.url), 206);
    T_TRUE(gw_same(&g, "got", "p2"));
    T_TRUE(gw_has(&g, "got.h", "x-amz-mp-parts-count: 2"));
    T_TRUE(gw_has(&g, "got.h", "Content-Range: bytes 5242880-5243879/5243880"));
    T_EQ(gw_curl(&g, "got", "'%s/mpb/k?partNumber=1'", g.url), 206);
    T_TRUE(gw_same(&g, "got", "p1"));
    T_EQ(gw_curl(&g, "o", "-I '%s/mpb/k?partNumber=1'", g.url), 206);
    T_TRUE(gw_has(&g, "o.h", "Content-Length: 5242880"));
    T_TRUE(gw_has(&g, "o.h", "x-amz-mp-parts-count: 2"));
    T_EQ(gw_curl(&g, "o", "'%s/mpb/k?partNumber=3'", g.url), 416);
    T_TRUE(gw_has(&g, "o", "InvalidPartNumber"));
    T_EQ(gw_curl(&g, "o", "'%s/mpb/k?partNumber=0'", g.url), 400);
    T_EQ(gw_curl(&g, "o", "'%s/mpb/k?partNumber=1x'", g.url), 400);
    T_EQ(gw_curl(&g, "o", "-r 0-9 '%s/mpb/k?partNumber=1'", g.url), 400);
    T_TRUE(gw_has(&g, "o", "InvalidRequest"));
    /* The aws CLI's own multipart upload (five parts of 5 MiB, the last
     * smaller), part by part. */
    T_EQ(aws(&g, "o", "s3api get-object --bucket mpb --key d/big --part-number 5 part5"), 0);
    T_TRUE(gw_has(&g, "o", "\"PartsCount\": 5"));
    T_TRUE(gw_range_is(&g, "part5", "big", 4 * 5242880ull, 23 * 1000 * 1000 + 11 - 4 * 5242880ull));
    /* An object put whole is its one part. */
    T_EQ(aws(&g, "o", "s3 cp p2 s3://mpb/whole"), 0);
    T_EQ(gw_curl(&g, "got", "'%s/mpb/whole?partNumber=1'", g.url), 206);
    T_TRUE(gw_same(&g, "got", "p2"));
    T_FALSE(gw_has(&g, "got.h", "x-amz-mp-parts-count"));
    T_EQ(gw_curl(&g, "o", "'%s/mpb/whole?partNumber=2'", g.url), 416);
    /* The upload and its parts are gone. */
    T_EQ(aws(&g, "o", "s3api list-multipart-uploads --bucket mpb"), 0);
    T_FALSE(gw_has(&g, "o", id));
    T_EQ(aws(&g, "o", "s3api list-parts --bucket mpb --key k --upload-id %s", id), 255);
    T_TRUE(gw_has(&g, "o", "NoSuchUpload"));
    /* Complete sent again (a client's retry after a lost answer): the same
     * answer while the key holds the object those parts made; another list
     * of parts, or once the object is replaced, NoSuchUpload. */
    T_EQ(aws(&g, "o",
             "s3api complete-multipart-upload --bucket mpb --key k --upload-id %s "
             "--multipart-upload file://parts.json",
             id),
         0);
    T_TRUE(gw_has(&g, "o", "-2\\\""));
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/mpb/k?uploadId=%s'", gw_path(&g, "c.xml"),
                 g.url, id),
         404);
    T_TRUE(gw_has(&g, "o", "NoSuchUpload"));
    T_EQ(aws(&g, "o", "s3 cp p2 s3://mpb/k"), 0);
    T_EQ(aws(&g, "o",
             "s3api complete-multipart-upload --bucket mpb --key k --upload-id %s "
             "--multipart-upload file://parts.json",
             id),
         255);
    T_TRUE(gw_has(&g, "o", "NoSuchUpload"));

    /* Abort */
    T_EQ(aws(&g, "c", "s3api create-multipart-upload --bucket mpb --key a"), 0);
    upload_id(&g, "c", id, sizeof(id));
    T_EQ(aws(&g, "o",
             "s3api upload-part --bucket mpb --key a --upload-id %s --part-number 1 "
             "--body p2",
             id),
         0);
    /* A part number is digits alone: not signed, spaced or out of range. */
    static const char *const badpn[] = {"%2B2", "%202",  "2%20", "-2",
                                        "0",    "10001", "",     "99999999999999999999"};
    for (size_t i = 0; i < sizeof(badpn) / sizeof(badpn[0]); i++) {
        T_EQ(gw_curl(&g, "o", "-X PUT -T %s '%s/mpb/a?uploadId=%s&partNumber=%s'",
                     gw_path(&g, "p2"), g.url, id, badpn[i]),
             400);
        T_TRUE(gw_has(&g, "o", "InvalidArgument"));
    }
    T_EQ(aws(&g, "o", "s3api abort-multipart-upload --bucket mpb --key a --upload-id %s", id), 0);
    T_EQ(aws(&g, "o",
             "s3api upload-part --bucket mpb --key a --upload-id %s --part-number 2 "
             "--body p2",
             id),
         255);
    T_TRUE(gw_has(&g, "o", "NoSuchUpload"));
    T_EQ(gw_curl(&g, "o", "-X PUT -T %s '%s/mpb/a?uploadId=../../x&partNumber=1'",
                 gw_path(&g, "p2"), g.url),
         404);
    T_EQ(gw_curl(&g, "o", "-I %s/mpb/a", g.url), 404);
    gw_stop(&g);
}

/* A Complete may carry the object's own checksum (x-amz-checksum-crc32 of
 * the whole object, S3's FULL_OBJECT type) and its size
 * (x-amz-mp-object-size): both are checked, on the bytes as the parts are
 * joined; a mismatch publishes nothing and keeps the upload. They are the
 * object's, not the XML body's (they were checked against the body: always
 * BadDigest). A composite checksum ("-N") of parts that carried none cannot
 * be checked: 400 InvalidRequest (test checksums_kept has the other
 * case). */
/* Edit the gateway's metadata record of bucket/key (the gateway over
 * file://DIR) with the sed expression expr, through the railio CLI. */
static void record_edit(struct gw *g, const char *dir, const char *bucket, const char *key,
                        const char *expr)
{
    char rk[256], bin[512];

    t_build_path(bin, sizeof(bin), "railio");
    gw_record_key(g, bucket, key, rk, sizeof(rk));
    T_EQ(t_sh("cd %s && '%s' get -q 'file://%s/%s' rec && sed -i '%s' rec && "
              "'%s' put -q 'file://%s/%s' rec",
              g->dir, bin, dir, rk, expr, bin, dir, rk),
         0);
}

/*
 * railio's own s3:// client reading what the aws CLI and curl put through
 * the gateway (objects railio did not write: no chunk checksums): each is
 * checked by its ETag, the MD5 of its bytes, or, put in 5 MiB parts, the
 * MD5 of its parts' MD5s (the gateway answers HEAD ?partNumber with the
 * part's size and the count), with 4 MiB chunks that cut across the parts.
 * An object whose metadata record was written over with another ETag (a
 * server that lies) fails RIO_ECHECKSUM instead of handing its bytes out.
 */
TEST(railio_client_checks_what_others_put)
{
    char url[256];
    const char *dir = t_scratch_dir("gw-mp-check");
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct gw g;
    size_t nb = 0, n1 = 0;

    if (t_sh("command -v aws >/dev/null") != 0)
        T_SKIP("the aws CLI is not installed");
    snprintf(url, sizeof(url), "file://%s", dir);
    gw_start(&g, url, NULL);
    aws_parts(&g);
    gw_file(&g, "big", 23 * 1000 * 1000 + 11, 19);
    gw_file(&g, "one", 3 * 1000 * 1000 + 5, 20);
    uint8_t *big = t_slurp(gw_path(&g, "big"), &nb), *one = t_slurp(gw_path(&g, "one"), &n1);
    uint8_t *dst = malloc(nb);
    T_NOTNULL(dst);
    T_EQ(aws(&g, "o", "s3 mb s3://mpc"), 0);
    T_EQ(aws(&g, "o", "s3 cp big s3://mpc/big"), 0);
    /* (with user metadata: a metadata record the test can write over) */
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-meta-x: 1' %s/mpc/one", gw_path(&g, "one"), g.url), 200);

    t_opts(&o, T_PROFILE_S3);
    snprintf(url, sizeof(url), "s3://mpc?endpoint=%s&unsigned=1", g.url);
    struct rio_client *c = t_client_new(url, &o);
    T_EQ(rio_get(c, "big", dst, nb, &call), (int64_t)nb);
    T_MEMEQ(dst, big, nb);
    T_EQ(st.verify_bytes, (uint64_t)nb);
    T_EQ(rio_get(c, "one", dst, nb, &call), (int64_t)n1);
    T_MEMEQ(dst, one, n1);
    T_EQ(st.verify_bytes, (uint64_t)n1);

    /* The record of "one" says another ETag: refused, after two reads. */
    record_edit(&g, dir, "mpc", "one", "s/^s3-etag .*/s3-etag 0123456789abcdef0123456789abcdef/");
    T_EQ(gw_curl(&g, "o", "-I %s/mpc/one", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "0123456789abcdef0123456789abcdef"));
    T_ERR(rio_get(c, "one", dst, nb, &call), RIO_ECHECKSUM);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 2u);
    rio_client_destroy(c);
    free(big);
    free(one);
    free(dst);
    gw_stop(&g);
}

/*
 * An object put through the gateway with an x-amz-checksum-crc32 (as the
 * AWS SDKs send by default): railio's s3:// client asks for the checksum
 * the gateway keeps (x-amz-checksum-mode: ENABLED) and checks the object by
 * it, not by its ETag: with the record's ETag written over with another the
 * GET still succeeds (the CRC is right), with its checksum written over it
 * fails RIO_ECHECKSUM naming the checksum.
 */
TEST(railio_client_checks_by_the_kept_checksum)
{
    char url[256], crc[64];
    const char *dir = t_scratch_dir("gw-mp-crc");
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct gw g;
    size_t n = 0;

    snprintf(url, sizeof(url), "file://%s", dir);
    gw_start(&g, url, NULL);
    gw_file(&g, "one", 3 * 1000 * 1000 + 5, 21);
    uint8_t *one = t_slurp(gw_path(&g, "one"), &n), *dst = malloc(n);
    T_NOTNULL(dst);
    gw_crc32_b64(&g, "one", crc, sizeof(crc));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/ckc", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: %s' %s/ckc/one", gw_path(&g, "one"), crc,
                 g.url),
         200);

    t_opts(&o, T_PROFILE_S3);
    snprintf(url, sizeof(url), "s3://ckc?endpoint=%s&unsigned=1", g.url);
    struct rio_client *c = t_client_new(url, &o);
    T_EQ(rio_get(c, "one", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, one, n);
    T_EQ(st.verify_bytes, (uint64_t)n);

    /* Another ETag in its record: its CRC, not its ETag, vouches for it. */
    record_edit(&g, dir, "ckc", "one", "s/^s3-etag .*/s3-etag 0123456789abcdef0123456789abcdef/");
    memset(dst, 0, n);
    T_EQ(rio_get(c, "one", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, one, n);
    T_EQ(st.verify_bytes, (uint64_t)n);
    /* Another CRC: refused, after two reads. */
    record_edit(&g, dir, "ckc", "one", "s/^checksum crc32 .*/checksum crc32 AAAAAA==/");
    T_EQ(gw_curl(&g, "o", "-I -H 'x-amz-checksum-mode: ENABLED' %s/ckc/one", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "AAAAAA=="));
    T_ERR(rio_get(c, "one", dst, n, &call), RIO_ECHECKSUM);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 2u);
    T_NOTNULL(strstr(rio_error_detail(), "x-amz-checksum"));
    rio_client_destroy(c);
    free(one);
    free(dst);
    gw_stop(&g);
}

TEST(complete_checks_the_object_checksum)
{
    struct gw g;
    char id[64], xml[1024];

    gw_start(&g, NULL, NULL);
    gw_file(&g, "p1", 5 * 1024 * 1024, 1);
    gw_file(&g, "p2", 1000, 2);
    T_EQ(t_sh("cat %s %s > %s", gw_path(&g, "p1"), gw_path(&g, "p2"), gw_path(&g, "p12")), 0);
    char crc[64];
    gw_crc32_b64(&g, "p12", crc, sizeof(crc));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/ckb", g.url), 200);
    gw_mpu_parts(&g, "ckb", "k", 2, id, sizeof(id));
    snprintf(xml, sizeof(xml), "-X POST --data-binary @%s '%s/ckb/k?uploadId=%s'",
             gw_path(&g, "done.xml"), g.url, id);
    /* Wrong: BadDigest, nothing published, the upload kept. */
    T_EQ(gw_curl(&g, "o", "-H 'x-amz-checksum-crc32: AAAAAA==' %s", xml), 400);
    T_TRUE(gw_has(&g, "o", "<Code>BadDigest</Code>"));
    T_EQ(gw_curl(&g, "o", "-I %s/ckb/k", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-H 'x-amz-mp-object-size: 5243881' %s", xml), 400);
    T_EQ(gw_curl(&g, "o", "-H 'x-amz-checksum-crc32: %s-2' %s", crc, xml), 400);
    T_TRUE(gw_has(&g, "o", "did not all carry an x-amz-checksum-crc32"));
    T_EQ(gw_curl(&g, "o", "-H 'x-amz-checksum-type: COMPOSITE' -H 'x-amz-checksum-crc32: %s' %s",
                 crc, xml),
         400);
    T_EQ(gw_curl(&g, "o", "-H 'x-amz-checksum-type: OTHER' %s", xml), 400);
    T_EQ(gw_curl(&g, "o", "-H 'x-amz-checksum-sha256: bad' %s", xml), 400);
    T_TRUE(gw_has(&g, "o", "did not all carry an x-amz-checksum-sha256"));
    T_EQ(gw_curl(&g, "o",
                 "-H 'x-amz-checksum-type: FULL_OBJECT' -H 'x-amz-checksum-sha256: bad' %s", xml),
         400);
    T_TRUE(gw_has(&g, "o", "not supported for SHA-1 or SHA-256"));
    T_EQ(gw_curl(&g, "o", "-I %s/ckb/k", g.url), 404);
    /* Right: the object, whole. */
    T_EQ(gw_curl(&g, "o",
                 "-H 'x-amz-checksum-type: FULL_OBJECT' -H 'x-amz-checksum-crc32: %s' "
                 "-H 'x-amz-mp-object-size: 5243880' %s",
                 crc, xml),
         200);
    T_TRUE(gw_has(&g, "o", "-2&quot;</ETag>"));
    T_EQ(gw_curl(&g, "got", "%s/ckb/k", g.url), 200);
    T_TRUE(gw_same(&g, "got", "p12"));
    gw_stop(&g);
}

/* Every part but the last is at least 5 MiB, S3's rule (--s3-min-part-size
 * changes it): a Complete listing a smaller one is 400 EntityTooSmall that
 * names the part, nothing is published and the upload stays, so the client
 * may list, upload again and complete. */
TEST(parts_under_the_least_size)
{
    struct gw g;
    char id[64];
    char bin[512];
    static const char *const any[] = {"--s3-min-part-size", "0", NULL};

    gw_start(&g, NULL, NULL);
    gw_file(&g, "p1", 5 * 1024 * 1024 - 1, 1);
    gw_file(&g, "p2", 1000, 2);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/tsb", g.url), 200);
    gw_mpu_parts(&g, "tsb", "k", 2, id, sizeof(id));
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/tsb/k?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>EntityTooSmall</Code>"));
    T_TRUE(gw_has(&g, "o", "Part 1 is 5242879 bytes"));
    T_EQ(gw_curl(&g, "o", "-I %s/tsb/k", g.url), 404);
    T_EQ(gw_curl(&g, "o", "'%s/tsb/k?uploadId=%s'", g.url, id), 200); /* ListParts */
    T_TRUE(gw_has(&g, "o", "<PartNumber>2</PartNumber>"));
    /* Part 1 again at 5 MiB: the same upload completes. */
    gw_file(&g, "p1", 5 * 1024 * 1024, 1);
    T_EQ(
        gw_curl(&g, "o", "-T %s '%s/tsb/k?partNumber=1&uploadId=%s'", gw_path(&g, "p1"), g.url, id),
        200);
    gw_mpu_xml(&g, 2);
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/tsb/k?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         200);
    /* One part alone may be small: it is the last. */
    gw_mpu_parts(&g, "tsb", "one", 1, id, sizeof(id));
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/tsb/one?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         200);
    gw_stop(&g);

    /* --s3-min-part-size 0: any size. */
    gw_start(&g, NULL, any);
    gw_file(&g, "p1", 1000, 1);
    gw_file(&g, "p2", 1000, 2);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/tsb", g.url), 200);
    gw_mpu_parts(&g, "tsb", "k", 2, id, sizeof(id));
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/tsb/k?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         200);
    T_EQ(t_sh("cat %s %s > %s", gw_path(&g, "p1"), gw_path(&g, "p2"), gw_path(&g, "p12")), 0);
    T_EQ(gw_curl(&g, "got", "%s/tsb/k", g.url), 200);
    T_TRUE(gw_same(&g, "got", "p12"));
    gw_stop(&g);

    /* The option's value is checked, and it needs --s3-listen. */
    srv_binary(bin, sizeof(bin));
    T_EQ(t_sh("%s --s3-listen 127.0.0.1:0 --s3-min-part-size 6G 2>&1 | grep -q "
              "'s3-min-part-size'",
              bin),
         0);
    T_EQ(t_sh("%s --s3-min-part-size 1M 2>&1 | grep -q 'need --s3-listen'", bin), 0);
}

/* The checksum a body carried is kept: PutObject's comes back on GET and
 * HEAD with x-amz-checksum-mode: ENABLED (whole-object answers only), a
 * part's is compared with the one Complete's list names for it, and an
 * upload whose parts all carried one gets S3's composite checksum (the
 * checksum of the parts' checksums, "-N"), checked when the client sends
 * it, answered by Complete and kept like PutObject's. */
TEST(checksums_kept)
{
    struct gw g;
    char id[64], ck1[64], bin[512];
    static const char script[] =
        "import base64, hashlib, io, os, sys, zlib\n"
        "import boto3, botocore\n"
        "from botocore.config import Config\n"
        "from botocore.exceptions import ClientError\n"
        "s3 = boto3.client('s3', endpoint_url=sys.argv[1], region_name='us-east-1',\n"
        "    config=Config(signature_version=botocore.UNSIGNED, s3={'addressing_style': 'path'}))\n"
        "b64 = lambda d: base64.b64encode(d).decode()\n"
        "crc = lambda d: zlib.crc32(d).to_bytes(4, 'big')\n"
        "sha = lambda d: hashlib.sha256(d).digest()\n"
        "hdr = lambda r, h: r['ResponseMetadata']['HTTPHeaders'].get(h)\n"
        "def code(f, **kw):\n"
        "    try:\n"
        "        f(**kw)\n"
        "    except ClientError as e:\n"
        "        return e.response['Error']['Code']\n"
        "s3.create_bucket(Bucket='ckb')\n"
        "data = os.urandom(300000)\n"
        "r = s3.put_object(Bucket='ckb', Key='a', Body=data, ChecksumAlgorithm='CRC32')\n"
        "assert r.get('ChecksumCRC32') == b64(crc(data)), r\n"
        "for f in (s3.get_object, s3.head_object):\n"
        "    r = f(Bucket='ckb', Key='a', ChecksumMode='ENABLED')\n"
        "    assert r.get('ChecksumCRC32') == b64(crc(data)), r\n"
        "    assert hdr(r, 'x-amz-checksum-type') == 'FULL_OBJECT', r\n"
        "assert s3.get_object(Bucket='ckb', Key='a', ChecksumMode='ENABLED')['Body'].read() == "
        "data\n"
        "r = s3.get_object(Bucket='ckb', Key='a', ChecksumMode='ENABLED', Range='bytes=0-9')\n"
        "assert 'ChecksumCRC32' not in r and r['Body'].read() == data[:10], r\n"
        "r = s3.put_object(Bucket='ckb', Key='u', Body=data, ChecksumAlgorithm='CRC32',\n"
        "                  Metadata={'owner': 'alice'}, ContentType='text/csv')\n"
        "r = s3.head_object(Bucket='ckb', Key='u', ChecksumMode='ENABLED')\n"
        "assert r.get('ChecksumCRC32') == b64(crc(data)) and r['Metadata'] == {'owner': 'alice'}, "
        "r\n"
        "assert r['ContentType'] == 'text/csv', r\n"
        "r = s3.put_object(Bucket='ckb', Key='s', Body=data, ChecksumAlgorithm='SHA256')\n"
        "r = s3.head_object(Bucket='ckb', Key='s', ChecksumMode='ENABLED')\n"
        "assert r.get('ChecksumSHA256') == b64(sha(data)), r\n"
        "# multipart, SHA-256 parts: the composite one\n"
        "p1, p2 = os.urandom(5 << 20), os.urandom(1000)\n"
        "up = s3.create_multipart_upload(Bucket='ckb', Key='m', ChecksumAlgorithm='SHA256')\n"
        "assert hdr(up, 'x-amz-checksum-algorithm') == 'SHA256', up\n"
        "kw = dict(Bucket='ckb', Key='m', UploadId=up['UploadId'])\n"
        "e = [s3.upload_part(PartNumber=i + 1, Body=p, ChecksumAlgorithm='SHA256', **kw)\n"
        "     for i, p in enumerate((p1, p2))]\n"
        "assert [x['ChecksumSHA256'] for x in e] == [b64(sha(p1)), b64(sha(p2))], e\n"
        "parts = [{'PartNumber': i + 1, 'ETag': x['ETag'], 'ChecksumSHA256': x['ChecksumSHA256']}\n"
        "         for i, x in enumerate(e)]\n"
        "bad = [dict(parts[0], ChecksumSHA256=b64(sha(b'x'))), parts[1]]\n"
        "assert code(s3.complete_multipart_upload, MultipartUpload={'Parts': bad}, **kw) == \\\n"
        "    'InvalidPart'\n"
        "comp = b64(sha(sha(p1) + sha(p2))) + '-2'\n"
        "assert code(s3.complete_multipart_upload, MultipartUpload={'Parts': parts},\n"
        "            ChecksumSHA256=b64(sha(b'y')) + '-2', **kw) == 'BadDigest'\n"
        "# SHA-256 is composite only: without -N it is the composite too\n"
        "for v in ('bad', b64(sha(b'y'))):\n"
        "    assert code(s3.complete_multipart_upload, MultipartUpload={'Parts': parts},\n"
        "                ChecksumSHA256=v, **kw) == 'BadDigest', v\n"
        "r = s3.complete_multipart_upload(MultipartUpload={'Parts': parts}, ChecksumSHA256=comp,\n"
        "                                 **kw)\n"
        "assert r.get('ChecksumSHA256') == comp, r\n"
        "r = s3.head_object(Bucket='ckb', Key='m', ChecksumMode='ENABLED')\n"
        "assert r.get('ChecksumSHA256') == comp, r\n"
        "assert hdr(r, 'x-amz-checksum-type') == 'COMPOSITE', r\n"
        "# a copy keeps a whole-object checksum (same bytes), not a composite one\n"
        "s3.copy_object(Bucket='ckb', Key='a2', CopySource={'Bucket': 'ckb', 'Key': 'a'})\n"
        "r = s3.head_object(Bucket='ckb', Key='a2', ChecksumMode='ENABLED')\n"
        "assert r.get('ChecksumCRC32') == b64(crc(data)), r\n"
        "s3.copy_object(Bucket='ckb', Key='m2', CopySource={'Bucket': 'ckb', 'Key': 'm'})\n"
        "r = s3.head_object(Bucket='ckb', Key='m2', ChecksumMode='ENABLED')\n"
        "assert 'ChecksumSHA256' not in r, r\n"
        "# the list names no checksums: the upload's algorithm is enough\n"
        "up = s3.create_multipart_upload(Bucket='ckb', Key='n', ChecksumAlgorithm='CRC32')\n"
        "kw = dict(Bucket='ckb', Key='n', UploadId=up['UploadId'])\n"
        "e = [s3.upload_part(PartNumber=i + 1, Body=p, ChecksumAlgorithm='CRC32', **kw)\n"
        "     for i, p in enumerate((p1, p2))]\n"
        "parts = [{'PartNumber': i + 1, 'ETag': x['ETag']} for i, x in enumerate(e)]\n"
        "r = s3.complete_multipart_upload(MultipartUpload={'Parts': parts}, **kw)\n"
        "assert r.get('ChecksumCRC32') == b64(crc(crc(p1) + crc(p2))) + '-2', r\n"
        "assert s3.get_object(Bucket='ckb', Key='n', ChecksumMode='ENABLED')['Body'].read() == \\\n"
        "    p1 + p2\n"
        "print('checksums ok')\n";

    gw_boto3(&g, script, "checksums ok");
    /* Without x-amz-checksum-mode: no checksum. */
    T_EQ(gw_curl(&g, "o", "-D %s -o /dev/null %s/ckb/a", gw_path(&g, "h"), g.url), 200);
    T_FALSE(gw_has(&g, "h", "x-amz-checksum"));
    T_EQ(gw_curl(&g, "o", "-D %s -o /dev/null -H 'x-amz-checksum-mode: ENABLED' %s/ckb/a",
                 gw_path(&g, "h"), g.url),
         200);
    T_TRUE(gw_has(&g, "h", "x-amz-checksum-crc32:"));
    /* A part written again, without a checksum and with other bytes: the
     * checksum it carried before no longer counts. */
    gw_file(&g, "p1", 5 * 1024 * 1024, 1);
    gw_file(&g, "p2", 1000, 2);
    gw_crc32_b64(&g, "p1", ck1, sizeof(ck1));
    T_EQ(gw_curl(&g, "c", "-X POST -H 'x-amz-checksum-algorithm: CRC32' '%s/ckb/r?uploads'", g.url),
         200);
    gw_upload_id(&g, "c", id, sizeof(id));
    T_EQ(gw_curl(&g, "o",
                 "-D %s -T %s -H 'x-amz-checksum-crc32: %s' '%s/ckb/r?partNumber=1&uploadId=%s'",
                 gw_path(&g, "h"), gw_path(&g, "p1"), ck1, g.url, id),
         200);
    T_TRUE(gw_has(&g, "h", ck1));
    gw_file(&g, "p1", 5 * 1024 * 1024, 3);
    T_EQ(
        gw_curl(&g, "o", "-T %s '%s/ckb/r?partNumber=1&uploadId=%s'", gw_path(&g, "p1"), g.url, id),
        200);
    T_EQ(
        gw_curl(&g, "o", "-T %s '%s/ckb/r?partNumber=2&uploadId=%s'", gw_path(&g, "p2"), g.url, id),
        200);
    gw_mpu_xml(&g, 2);
    T_EQ(t_sh("cd %s && sed -i 's|</ETag></Part><Part><PartNumber>2|</ETag><ChecksumCRC32>%s"
              "</ChecksumCRC32></Part><Part><PartNumber>2|' done.xml",
              g.dir, ck1),
         0);
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/ckb/r?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidPart</Code>"));
    T_TRUE(gw_has(&g, "o", "s ChecksumCRC32 in the list"));
    /* Without the stale checksum it completes, with no checksum of its own
     * (part 1 carried none). */
    gw_mpu_xml(&g, 2);
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/ckb/r?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         200);
    T_FALSE(gw_has(&g, "o", "Checksum"));
    /* An algorithm S3 does not have. */
    T_EQ(gw_curl(&g, "o", "-X POST -H 'x-amz-checksum-algorithm: MD5' '%s/ckb/x?uploads'", g.url),
         400);
    T_TRUE(gw_has(&g, "o", "InvalidRequest"));
    gw_stop(&g);

    /* --s3-checksums check: checked (a wrong one refused), answered, not
     * kept. */
    static const char *const check[] = {"--s3-checksums", "check", NULL};
    gw_start(&g, NULL, check);
    gw_file(&g, "p1", 1000, 1);
    gw_crc32_b64(&g, "p1", ck1, sizeof(ck1));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/ckb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: AAAAAA==' %s/ckb/c", gw_path(&g, "p1"),
                 g.url),
         400);
    T_EQ(gw_curl(&g, "o", "-D %s -T %s -H 'x-amz-checksum-crc32: %s' %s/ckb/c", gw_path(&g, "h"),
                 gw_path(&g, "p1"), ck1, g.url),
         200);
    T_TRUE(gw_has(&g, "h", ck1));
    T_EQ(gw_curl(&g, "o", "-I -D %s -H 'x-amz-checksum-mode: ENABLED' %s/ckb/c", gw_path(&g, "h"),
                 g.url),
         200);
    T_FALSE(gw_has(&g, "h", "x-amz-checksum"));
    gw_stop(&g);
    srv_binary(bin, sizeof(bin));
    T_EQ(t_sh("%s --s3-listen 127.0.0.1:0 --s3-checksums maybe 2>&1 | grep -q 's3-checksums'", bin),
         0);
    T_EQ(t_sh("%s --s3-checksums check 2>&1 | grep -q 'need --s3-listen'", bin), 0);
}

/* ListMultipartUploads and ListParts page as S3's (boto3's paginators, the
 * markers, prefix and delimiter), in order whatever the backend's listing
 * order; aborting what a prefix lists leaves the other uploads alone. */
TEST(listings_page)
{
    struct gw g;
    static const char script[] =
        "import boto3, botocore, sys\n"
        "from botocore.config import Config\n"
        "url = sys.argv[1]\n"
        "s3 = boto3.client('s3', endpoint_url=url, region_name='us-east-1',\n"
        "    config=Config(signature_version=botocore.UNSIGNED, s3={'addressing_style': 'path'}))\n"
        "s3.create_bucket(Bucket='pgb')\n"
        "keys = ['a/%d' % i for i in range(10)] + ['a/3'] + ['b/x/%d' % i for i in range(5)]\n"
        "keys += ['c', 'd/e/f', 'd/e/g', 'top']\n"
        "ids = {}\n"
        "for k in keys:\n"
        "    ids.setdefault(k, []).append(s3.create_multipart_upload(Bucket='pgb', "
        "Key=k)['UploadId'])\n"
        "want = sorted((k, u) for k in ids for u in ids[k])\n"
        "def uploads(**kw):\n"
        "    ups, cps = [], []\n"
        "    for p in s3.get_paginator('list_multipart_uploads').paginate(Bucket='pgb', **kw):\n"
        "        n = len(p.get('Uploads', [])) + len(p.get('CommonPrefixes', []))\n"
        "        assert n <= kw.get('PaginationConfig', {}).get('PageSize', 1000), p\n"
        "        ups += [(u['Key'], u['UploadId']) for u in p.get('Uploads', [])]\n"
        "        cps += [c['Prefix'] for c in p.get('CommonPrefixes', [])]\n"
        "    return ups, cps\n"
        "assert uploads(PaginationConfig={'PageSize': 4}) == (want, []), uploads()\n"
        "got = uploads(Prefix='a/', PaginationConfig={'PageSize': 3})\n"
        "assert got == ([x for x in want if x[0].startswith('a/')], []), got\n"
        "got = uploads(Delimiter='/', PaginationConfig={'PageSize': 2})\n"
        "assert got == ([x for x in want if '/' not in x[0]], ['a/', 'b/', 'd/']), got\n"
        "assert uploads(Prefix='d/', Delimiter='/') == ([], ['d/e/']), uploads(Prefix='d/')\n"
        "got = uploads(Delimiter='/x/', PaginationConfig={'PageSize': 2})\n"
        "assert got == ([x for x in want if '/x/' not in x[0]], ['b/x/']), got\n"
        "got = uploads(Prefix='d', Delimiter='e')\n"
        "assert got == ([], ['d/e']), got\n"
        "r = s3.list_multipart_uploads(Bucket='pgb', KeyMarker='a/3')\n"
        "assert r['Uploads'][0]['Key'] == 'a/4', r\n"
        "u3 = sorted(ids['a/3'])\n"
        "r = s3.list_multipart_uploads(Bucket='pgb', KeyMarker='a/3', UploadIdMarker=u3[0],\n"
        "    MaxUploads=1)\n"
        "assert [u['UploadId'] for u in r['Uploads']] == [u3[1]] and r['IsTruncated'], r\n"
        "assert r['NextKeyMarker'] == 'a/3' and r['NextUploadIdMarker'] == u3[1], r\n"
        "up = ids['c'][0]\n"
        "etags = {}\n"
        "for n in [7, 1, 12, 3, 2, 4, 5, 6, 8, 9, 10, 11]:\n"
        "    etags[n] = s3.upload_part(Bucket='pgb', Key='c', UploadId=up, PartNumber=n,\n"
        "        Body=b'%d' % n * 100)['ETag']\n"
        "got = []\n"
        "for p in s3.get_paginator('list_parts').paginate(Bucket='pgb', Key='c', UploadId=up,\n"
        "        PaginationConfig={'PageSize': 5}):\n"
        "    assert len(p['Parts']) <= 5, p\n"
        "    got += [(x['PartNumber'], x['ETag'], x['Size']) for x in p['Parts']]\n"
        "assert got == [(n, etags[n], len(b'%d' % n * 100)) for n in range(1, 13)], got\n"
        "r = s3.list_parts(Bucket='pgb', Key='c', UploadId=up, PartNumberMarker=10)\n"
        "assert [x['PartNumber'] for x in r['Parts']] == [11, 12] and not r['IsTruncated'], r\n"
        "assert r.get('NextPartNumberMarker') == 12, r  # the last page too, as S3's\n"
        "assert r['Initiator']['ID'] == 'railio', r\n"
        "assert s3.head_bucket(Bucket='pgb')['ResponseMetadata']['HTTPHeaders']\\\n"
        "    .get('x-amz-bucket-region') == 'us-east-1'\n"
        "for k, u in uploads(Prefix='a/')[0]:\n"
        "    s3.abort_multipart_upload(Bucket='pgb', Key=k, UploadId=u)\n"
        "assert uploads() == ([x for x in want if not x[0].startswith('a/')], []), uploads()\n"
        "print('listings ok')\n";

    gw_boto3(&g, script, "listings ok");
    /* Bad paging parameters are refused, not ignored. */
    T_EQ(gw_curl(&g, "o", "'%s/pgb?uploads&max-uploads=-1'", g.url), 400);
    T_EQ(gw_curl(&g, "o", "'%s/pgb?uploads&delimiter=x'", g.url), 200);
    T_EQ(gw_curl(&g, "o", "'%s/pgb?uploads&delimiter=%s'", g.url,
                 "0123456789012345678901234567890123456789012345678901234567890123456789"),
         400); /* longer than GW_DELIM_MAX */
    gw_stop(&g);
}
