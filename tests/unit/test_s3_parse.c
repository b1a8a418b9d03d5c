/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The HTTP response head as the s3:// and http:// transports read it
 * (src/transport/s3/http.c): Content-Length repeated with values that
 * disagree is believed in none of them (a HEAD claiming 64 then 1,000,000,000
 * bytes made every GET wait for bytes that never came, 44 s, instead of
 * failing at once), while the same value repeated still counts. Also
 * Content-Range (range.c) and the checksum sidecar, written and read back
 * (sidecar.c).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "railio.h"
#include "t.h"
#include "transport/s3/parse.h"

static void feed(struct s3_rsp *r, const char *const *lines)
{
    rio__s3_rsp_reset(r);
    for (; *lines; lines++)
        rio__s3_rsp_header(r, *lines, strlen(*lines));
}

TEST(content_length_conflict_is_no_length)
{
    struct s3_rsp r;
    const char *conflict[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n",
                              "Content-Length: 1000000000\r\n", NULL};
    const char *conflict3[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n",
                               "content-length: 65\r\n", "Content-Length: 64\r\n", NULL};
    const char *bad_then_good[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: -1\r\n",
                                   "Content-Length: 64\r\n", NULL};
    const char *same[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n", "Content-Length: 64\r\n",
                          NULL};
    const char *one[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 18446744073709551615\r\n", NULL};

    feed(&r, conflict);
    T_EQ(r.status, 200);
    T_FALSE(r.have_clen);
    feed(&r, conflict3);
    T_FALSE(r.have_clen);
    feed(&r, bad_then_good);
    T_FALSE(r.have_clen);
    feed(&r, same);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, 64u);
    feed(&r, one);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, UINT64_MAX);
    /* A new status line (after 100 Continue) starts over. */
    const char *again[] = {"HTTP/1.1 100 Continue\r\n", "Content-Length: 1\r\n",
                           "Content-Length: 2\r\n",     "HTTP/1.1 200 OK\r\n",
                           "Content-Length: 5\r\n",     NULL};
    feed(&r, again);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, 5u);
}

/* An answer that says its object is encrypted with a key the server does
 * not keep in the clear (SSE-KMS, SSE-C) has an ETag that is no MD5 of its
 * bytes; SSE-S3 (AES256) keeps the MD5 ETag. A new status line forgets. */
TEST(encrypted_object_etag_is_no_md5)
{
    struct s3_rsp r;
    const char *kms[] = {"HTTP/1.1 200 OK\r\n", "x-amz-server-side-encryption: aws:kms\r\n", NULL};
    const char *dsse[] = {"HTTP/1.1 200 OK\r\n", "X-Amz-Server-Side-Encryption: aws:kms:dsse\r\n",
                          NULL};
    const char *ssec[] = {"HTTP/1.1 200 OK\r\n",
                          "x-amz-server-side-encryption-customer-algorithm: AES256\r\n", NULL};
    const char *sse_s3[] = {"HTTP/1.1 200 OK\r\n", "x-amz-server-side-encryption: AES256\r\n",
                            NULL};
    const char *forgot[] = {"HTTP/1.1 100 Continue\r\n",
                            "x-amz-server-side-encryption: aws:kms\r\n", "HTTP/1.1 200 OK\r\n",
                            NULL};

    feed(&r, kms);
    T_TRUE(r.etag_no_md5);
    feed(&r, dsse);
    T_TRUE(r.etag_no_md5);
    feed(&r, ssec);
    T_TRUE(r.etag_no_md5);
    feed(&r, sse_s3);
    T_FALSE(r.etag_no_md5);
    feed(&r, forgot);
    T_FALSE(r.etag_no_md5);
    /* railiod's gateway: a railio client's etag=fast */
    const char *fast[] = {"HTTP/1.1 200 OK\r\n", "x-railio-etag: fast\r\n", NULL};
    const char *other[] = {"HTTP/1.1 200 OK\r\n", "x-railio-etag: md5\r\n", NULL};
    feed(&r, fast);
    T_TRUE(r.etag_no_md5);
    feed(&r, other);
    T_FALSE(r.etag_no_md5);
}

/* A full-object checksum (x-amz-checksum-mode: ENABLED): exactly the
 * base64 of its bytes, the strongest of several taken; a composite one
 * ("...-N", or named COMPOSITE) and anything else are not. */
TEST(full_object_checksum)
{
    struct s3_rsp r;
    const char *crc64[] = {"HTTP/1.1 200 OK\r\n",
                           "x-amz-checksum-crc32: y/Q5Jg==\r\n",
                           "X-Amz-Checksum-CRC64NVME: rosUhgp5mIg=\r\n",
                           "x-amz-checksum-crc32c: 4waSgw==\r\n",
                           "x-amz-checksum-type: FULL_OBJECT\r\n",
                           NULL};
    const char *crc32[] = {"HTTP/1.1 200 OK\r\n", "x-amz-checksum-crc32: y/Q5Jg==\r\n", NULL};
    const char *crc32c[] = {"HTTP/1.1 200 OK\r\n", "x-amz-checksum-crc32c:  4waSgw==  \r\n", NULL};
    const char *composite[] = {"HTTP/1.1 200 OK\r\n", "x-amz-checksum-crc32: y/Q5Jg==-3\r\n", NULL};
    const char *named[] = {"HTTP/1.1 200 OK\r\n", "x-amz-checksum-crc32c: 4waSgw==\r\n",
                           "x-amz-checksum-type: COMPOSITE\r\n", NULL};
    const char *const bad[] = {"y/Q5Jg=",   "y/Q5Jg===", "y/Q5Jh==", "y/Q5J g==", "y/Q5Jg",
                               "y/Q5Jg==x", "=/Q5Jg==",  "y*Q5Jg==", "",          "rosUhgp5mIg="};

    feed(&r, crc64);
    T_EQ(r.ck_algo, RIO_S3_CK_CRC64NVME);
    T_EQ(r.ck_value, 0xae8b14860a799888ull);
    T_FALSE(r.ck_composite);
    feed(&r, crc32);
    T_EQ(r.ck_algo, RIO_S3_CK_CRC32);
    T_EQ(r.ck_value, 0xcbf43926u);
    feed(&r, crc32c);
    T_EQ(r.ck_algo, RIO_S3_CK_CRC32C);
    T_EQ(r.ck_value, 0xe3069283u);
    feed(&r, composite);
    T_EQ(r.ck_algo, RIO_S3_CK_NONE);
    feed(&r, named);
    T_TRUE(r.ck_composite);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char line[64];
        const char *lines[] = {"HTTP/1.1 200 OK\r\n", line, NULL};
        snprintf(line, sizeof(line), "x-amz-checksum-crc32: %s\r\n", bad[i]);
        feed(&r, lines);
        T_EQ(r.ck_algo, RIO_S3_CK_NONE);
    }
    /* A new status line (after a 100 Continue) forgets it. */
    const char *again[] = {"HTTP/1.1 200 OK\r\n", "x-amz-checksum-crc32: y/Q5Jg==\r\n",
                           "HTTP/1.1 200 OK\r\n", NULL};
    feed(&r, again);
    T_EQ(r.ck_algo, RIO_S3_CK_NONE);
}

/* Google Cloud Storage's x-goog-hash: its crc32c (in a list, or a header
 * of its own) is the object's; not for an object stored gzipped and served
 * decompressed, nor when two values disagree or one is unreadable; an
 * x-amz-checksum comes first. */
TEST(goog_hash_crc32c)
{
    struct s3_rsp r;
    uint64_t v = 0;
    const char *list[] = {"HTTP/1.1 200 OK\r\n",
                          "x-goog-hash: crc32c=4waSgw==,md5=JfnnlDI7RTiF9RgfG2JNCw==\r\n", NULL};
    const char *two[] = {"HTTP/1.1 200 OK\r\n", "X-Goog-Hash: md5=JfnnlDI7RTiF9RgfG2JNCw==\r\n",
                         "X-Goog-Hash:  crc32c=4waSgw== \r\n", NULL};
    const char *gz[] = {"HTTP/1.1 200 OK\r\n", "x-goog-hash: crc32c=4waSgw==\r\n",
                        "x-goog-stored-content-encoding: gzip\r\n", NULL};
    const char *ident[] = {"HTTP/1.1 200 OK\r\n", "x-goog-stored-content-encoding: identity\r\n",
                           "x-goog-hash: crc32c=4waSgw==\r\n", NULL};
    const char *differ[] = {"HTTP/1.1 200 OK\r\n", "x-goog-hash: crc32c=4waSgw==\r\n",
                            "x-goog-hash: crc32c=y/Q5Jg==\r\n", NULL};
    const char *bad[] = {"HTTP/1.1 200 OK\r\n", "x-goog-hash: crc32c=4waSgw=\r\n", NULL};
    const char *amz[] = {"HTTP/1.1 200 OK\r\n", "x-goog-hash: crc32c=4waSgw==\r\n",
                         "x-amz-checksum-crc64nvme: rosUhgp5mIg=\r\n", NULL};

    feed(&r, list);
    T_EQ(rio__s3_rsp_checksum(&r, &v), RIO_S3_CK_CRC32C);
    T_EQ(v, 0xe3069283u);
    feed(&r, two);
    T_EQ(rio__s3_rsp_checksum(&r, &v), RIO_S3_CK_CRC32C);
    T_EQ(v, 0xe3069283u);
    feed(&r, ident);
    T_EQ(rio__s3_rsp_checksum(&r, &v), RIO_S3_CK_CRC32C);
    feed(&r, gz);
    T_EQ(rio__s3_rsp_checksum(&r, &v), RIO_S3_CK_NONE);
    T_TRUE(r.etag_no_md5); /* its ETag is the stored bytes' MD5 */
    feed(&r, differ);
    T_EQ(rio__s3_rsp_checksum(&r, &v), RIO_S3_CK_NONE);
    feed(&r, bad);
    T_EQ(rio__s3_rsp_checksum(&r, &v), RIO_S3_CK_NONE);
    feed(&r, amz);
    T_EQ(rio__s3_rsp_checksum(&r, &v), RIO_S3_CK_CRC64NVME);
    T_EQ(v, 0xae8b14860a799888ull);
}

/* The part count of a multipart ETag: "32 hex-N", quoted, N from 1 to
 * 10000 without a leading 0; anything else is none. */
TEST(etag_part_count)
{
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789ABCDEF-5\""), 5u);
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789abcdef-10000\""), 10000u);
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789abcdef-10001\""), 0u);
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789abcdef-05\""), 0u);
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789abcdef-0\""), 0u);
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789abcdef-\""), 0u);
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789abcdef\""), 0u);
    T_EQ(rio__s3_etag_parts("0123456789abcdef0123456789abcdef-5"), 0u);
    T_EQ(rio__s3_etag_parts("W/\"0123456789abcdef0123456789abcdef-5\""), 0u);
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789abcdeg-5\""), 0u);
    T_EQ(rio__s3_etag_parts("\"0123456789abcdef0123456789abcdef-5x\""), 0u);
    T_EQ(rio__s3_etag_parts(""), 0u);
}

/* Content-Range: in order, a total or '*', nothing else. */
TEST(content_range)
{
    struct s3_rsp r;

    rio__s3_rsp_reset(&r);
    T_TRUE(rio__s3_parse_crange("bytes 0-99/200", &r));
    T_EQ(r.cr_first, 0u);
    T_EQ(r.cr_last, 99u);
    T_EQ(r.cr_total, 200u);
    T_TRUE(rio__s3_parse_crange("bytes 4096-8191/*", &r));
    T_EQ(r.cr_total, UINT64_MAX);
    T_FALSE(rio__s3_parse_crange("bytes 5-4/10", &r));
    T_FALSE(rio__s3_parse_crange("bytes 0-9", &r));
    T_FALSE(rio__s3_parse_crange("items 0-9/10", &r));
}

/* What sidecar.c writes it reads back; a damaged or foreign one is refused. */
/* A sidecar's name from an object's metadata id: only the 16 hex digits
 * railio writes (the id is whoever wrote the object's choice; "/../../x"
 * made rm send DELETE KEY.railio-/../../x). */
TEST(sidecar_key_from_a_hostile_id)
{
    char k[RIO_KEY_MAX + 1];

    T_OK(rio__s3_sidecar_key("a/k", "0123456789abcdef", k, sizeof(k)));
    T_STREQ(k, "a/k.railio-0123456789abcdef");
    T_ERR(rio__s3_sidecar_key("a/k", "/../../victim", k, sizeof(k)), RIO_EPROTO);
    T_ERR(rio__s3_sidecar_key("a/k", "0123456789abcde", k, sizeof(k)), RIO_EPROTO);
    T_ERR(rio__s3_sidecar_key("a/k", "0123456789abcdef0", k, sizeof(k)), RIO_EPROTO);
    T_ERR(rio__s3_sidecar_key("a/k", "0123456789abcde/", k, sizeof(k)), RIO_EPROTO);
    T_ERR(rio__s3_sidecar_key("a/k", "", k, sizeof(k)), RIO_EPROTO);
}

/* A lying HEAD's geometry (chunk 1, size 2^60: n = 2^60) made n * 16 wrap
 * to 0, the length of an empty list: taken, then 2^63 bytes asked of
 * malloc (ENOMEM where the answer is a protocol error); the sidecar's n *
 * 17 the same way. */
TEST(xxh_list_count_does_not_wrap)
{
    uint64_t *x = NULL;

    T_ERR(rio__s3_parse_xxh_list("", 1ull << 60, &x), RIO_EPROTO);
    T_ERR(rio__s3_parse_xxh_list("0000000000000001", (1ull << 60) + 1, &x), RIO_EPROTO);
    T_NULL(x);
    T_OK(rio__s3_parse_xxh_list("0000000000000001", 1, &x));
    T_EQ(x[0], 1u);
    rio__free(x);
}

/* Server text shown to people (errors, RIO_S3_DEBUG): printable ASCII. */
TEST(server_text_made_printable)
{
    char s[] = "ok\x1b[31mred\nFAKE LINE\x7f\xc3\xa9";
    rio__s3_printable(s);
    T_STREQ(s, "ok?[31mred?FAKE LINE???");
}

/* A key shown on a terminal: controls (C0, DEL, C1) masked, UTF-8 kept,
 * the copy bounded by its buffer. */
TEST(key_shown_without_controls)
{
    char out[64], small[5];

    T_STREQ(rio__s3_shown("a\x1b[31m\nb\x7f\xc2\x9b\xc3\xa9\xc2\xa0", out, sizeof(out)),
            "a?[31m?b??\xc3\xa9\xc2\xa0");
    T_STREQ(rio__s3_shown("abcdefgh", small, sizeof(small)), "abcd");
    T_STREQ(rio__s3_shown("", out, sizeof(out)), "");
}

TEST(sidecar_round_trip)
{
    const uint64_t xxh[4] = {1, 0xfedcba9876543210ull, 0, UINT64_MAX};
    const char *id = "0123456789abcdef", *md5 = "d41d8cd98f00b204e9800998ecf8427e";
    uint64_t size = 3 * 4096 + 5, *got = NULL;
    char *sc = NULL, got_md5[33], key[RIO_KEY_MAX + 8], big[RIO_KEY_MAX + 1];
    size_t len = 0;

    T_EQ(rio__s3_sidecar_format(id, size, 4096, md5, 4, xxh, &sc, &len), 0);
    T_EQ(strlen(sc), len);
    T_EQ(rio__s3_sidecar_parse(sc, len, id, size, 4096, got_md5, &got), 0);
    T_STREQ(got_md5, md5);
    for (int i = 0; i < 4; i++)
        T_EQ(got[i], xxh[i]);
    rio__free(got);
    got = NULL;
    /* Another upload's, another geometry's: not this object's. */
    T_EQ(rio__s3_sidecar_parse(sc, len, "0123456789abcdee", size, 4096, got_md5, &got), RIO_EPROTO);
    T_EQ(rio__s3_sidecar_parse(sc, len, id, size + 1, 4096, got_md5, &got), RIO_EPROTO);
    /* One checksum digit changed: the trailing xxh3 no longer matches. */
    char *line = strstr(sc, "fedcba");
    T_NOTNULL(line);
    line[0] = 'e';
    T_EQ(rio__s3_sidecar_parse(sc, len, id, size, 4096, got_md5, &got), RIO_EPROTO);
    T_NULL(got);
    rio__free(sc);

    /* Written without the stream MD5 (etag=none): read back as "". */
    T_EQ(rio__s3_sidecar_format(id, 0, 4096, "", 0, NULL, &sc, &len), 0);
    T_EQ(rio__s3_sidecar_parse(sc, len, id, 0, 4096, got_md5, &got), 0);
    T_STREQ(got_md5, "");
    T_NULL(got);
    rio__free(sc);

    T_EQ(rio__s3_sidecar_key("a/b", id, key, sizeof(key)), 0);
    T_STREQ(key, "a/b.railio-0123456789abcdef");
    memset(big, 'k', RIO_KEY_MAX);
    big[RIO_KEY_MAX] = '\0';
    T_EQ(rio__s3_sidecar_key(big, id, key, sizeof(key)), RIO_EINVAL);
}

/* ------------------------------------------------------ ListObjectsV2 */

struct items {
    struct rio_s3_list_item it[8];
    unsigned n;
};

static int collect(void *arg, const struct rio_s3_list_item *it)
{
    struct items *x = arg;

    if (x->n == 8)
        return -1;
    x->it[x->n++] = *it;
    return 0;
}

static int parse_list(const char *body, struct rio_s3_list_result *res, struct items *x)
{
    memset(x, 0, sizeof(*x));
    return rio__s3_list_parse(body, strlen(body), res, collect, x);
}

/* A radosgw answer, URL-encoded keys, one common prefix, entities. */
TEST(list_answer_read)
{
    static const char body[] =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>"
        "<ListBucketResult xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<Name>rio</Name><Prefix>p%2F</Prefix><MaxKeys>2</MaxKeys>"
        "<IsTruncated>true</IsTruncated>"
        "<Contents><Key>p/a%20b%2Bc</Key><LastModified>2026-12-02T04:05:06.789Z</LastModified>"
        "<ETag>&quot;0CC175B9C0F1B6A831C399E269772661&quot;</ETag><Size>1</Size>"
        "<StorageClass>STANDARD</StorageClass><Owner><ID>x</ID></Owner></Contents>"
        "<CommonPrefixes><Prefix>p/d+1%2F</Prefix></CommonPrefixes>"
        "<Contents><Key>p/x&amp;y</Key><Size>18446744073709551615</Size></Contents>"
        "<NextContinuationToken>tok/+=</NextContinuationToken>"
        "<KeyCount>2</KeyCount><EncodingType>url</EncodingType></ListBucketResult>";
    struct rio_s3_list_result res;
    struct items x;

    /* Size over INT64_MAX is refused... */
    T_ERR(parse_list(body, &res, &x), RIO_EPROTO);
    T_EQ(res.nitems, 0u);
    /* ...and with a sane one the whole answer reads. */
    char ok[sizeof(body)];
    memcpy(ok, body, sizeof(body));
    memcpy(strstr(ok, "18446744073709551615"), "00000000000000000042", 20);
    T_OK(parse_list(ok, &res, &x));
    T_TRUE(res.truncated);
    T_STREQ(res.next_token, "tok/+=");
    T_EQ(res.nitems, 3u);
    T_EQ(x.n, 3u);
    T_STREQ(x.it[0].key, "p/a b+c");
    T_EQ(x.it[0].klen, 7u);
    T_FALSE(x.it[0].dir);
    T_EQ(x.it[0].size, 1u);
    T_EQ(x.it[0].mtime_ns, 1796184306789000000ll);
    T_STREQ(x.it[0].etag, "\"0CC175B9C0F1B6A831C399E269772661\"");
    T_TRUE(x.it[1].dir);
    T_STREQ(x.it[1].key, "p/d 1/");
    T_STREQ(x.it[2].key, "p/x&y");
    T_EQ(x.it[2].size, 42u);
    T_EQ(x.it[2].mtime_ns, 0);
}

/* Without EncodingType the keys are taken as sent ('%' and '+' kept). */
TEST(list_answer_plain_keys)
{
    struct rio_s3_list_result res;
    struct items x;

    T_OK(parse_list("<ListBucketResult><IsTruncated>false</IsTruncated>"
                    "<Contents><Key>a%20+b</Key><Size>0</Size></Contents>"
                    "<NextContinuationToken>ignored</NextContinuationToken></ListBucketResult>",
                    &res, &x));
    T_FALSE(res.truncated);
    T_STREQ(res.next_token, "");
    T_EQ(x.n, 1u);
    T_STREQ(x.it[0].key, "a%20+b");
    /* An empty bucket. */
    T_OK(parse_list("<ListBucketResult><IsTruncated>false</IsTruncated></ListBucketResult>\n", &res,
                    &x));
    T_EQ(x.n, 0u);
    T_OK(parse_list("<ListBucketResult/>", &res, &x));
}

static int refuse(void *arg, const struct rio_s3_list_item *it)
{
    (void)arg;
    (void)it;
    return -EIO;
}

/* Bounds: a key over RIO_KEY_MAX (decoded), a token over
 * RIO_LIST_TOKEN_MAX, truncated without a token, and malformed XML. */
TEST(list_answer_bounds)
{
    static const char *const bad[] = {
        "<Error><Code>NoSuchBucket</Code></Error>",
        "<ListBucketResult><IsTruncated>true</IsTruncated></ListBucketResult>",
        "<ListBucketResult><IsTruncated>maybe</IsTruncated></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a</Key></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key></Key><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a</Key><Key>b</Key><Size>1</Size></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><Contents><Key>a</Key><Size>-1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a</Key><Size>1 </Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a</Key><Size>1</Size>"
        "<LastModified>2026-02-30T00:00:00Z</LastModified></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a&#0;</Key><Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a&bogus;</Key><Size>1</Size></Contents>"
        "</ListBucketResult>",
        "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%00</Key>"
        "<Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>a%4</Key>"
        "<Size>1</Size></Contents></ListBucketResult>",
        "<ListBucketResult><Contents><Key>a</Key><Size>1</Size></Contents>",
        "<ListBucketResult><a><b></a></b></ListBucketResult>",
        "<!DOCTYPE x [<!ENTITY e \"boom\">]><ListBucketResult/>",
        "<ListBucketResult><![CDATA[x]]></ListBucketResult>",
        "<ListBucketResult/><ListBucketResult/>",
        "<ListBucketResult><a><a><a><a><a><a><a><a></a></a></a></a></a></a></a></a>"
        "</ListBucketResult>",
        "",
    };
    struct rio_s3_list_result res;
    struct items x;
    size_t n = 40 + 3 * (RIO_KEY_MAX + 1) + RIO_LIST_TOKEN_MAX + 200;
    char *b = malloc(n), *p;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T_ERR(parse_list(bad[i], &res, &x), RIO_EPROTO);
        T_EQ(x.n, 0u);
    }
    T_NOTNULL(b);
    /* A key of RIO_KEY_MAX bytes, encoded: taken; one more byte: refused. */
    for (int extra = 0; extra < 2; extra++) {
        p = b + sprintf(b, "<ListBucketResult><EncodingType>url</EncodingType><Contents><Key>");
        for (int i = 0; i < RIO_KEY_MAX + extra; i++)
            p += sprintf(p, "%%41");
        sprintf(p, "</Key><Size>7</Size></Contents></ListBucketResult>");
        if (extra) {
            T_ERR(parse_list(b, &res, &x), RIO_EPROTO);
        } else {
            T_OK(parse_list(b, &res, &x));
            T_EQ(x.it[0].klen, (size_t)RIO_KEY_MAX);
        }
    }
    /* A token of RIO_LIST_TOKEN_MAX bytes: taken; one more: refused. */
    for (int extra = 0; extra < 2; extra++) {
        p = b + sprintf(b, "<ListBucketResult><IsTruncated>true</IsTruncated>"
                           "<NextContinuationToken>");
        memset(p, 'T', RIO_LIST_TOKEN_MAX + extra);
        p += RIO_LIST_TOKEN_MAX + extra;
        sprintf(p, "</NextContinuationToken></ListBucketResult>");
        if (extra) {
            T_ERR(parse_list(b, &res, &x), RIO_EPROTO);
        } else {
            T_OK(parse_list(b, &res, &x));
            T_EQ(strlen(res.next_token), (size_t)RIO_LIST_TOKEN_MAX);
        }
    }
    free(b);
    /* The callback's error stops the parse and is returned. */
    static const char one[] = "<ListBucketResult><Contents><Key>a</Key><Size>1</Size></Contents>"
                              "</ListBucketResult>";
    T_ERR(rio__s3_list_parse(one, sizeof(one) - 1, &res, refuse, NULL), -EIO);
}

TEST(iso8601_strict)
{
    int64_t ns = -1;

    T_OK(rio__s3_parse_iso8601("1970-01-01T00:00:00Z", &ns));
    T_EQ(ns, 0);
    T_OK(rio__s3_parse_iso8601("2000-02-29T23:59:59.123456789Z", &ns));
    T_EQ(ns, 951868799123456789ll);
    T_OK(rio__s3_parse_iso8601("1969-12-31T23:59:59.5Z", &ns));
    T_EQ(ns, -500000000ll);
    static const char *const bad[] = {
        "",
        "2000-02-30T00:00:00Z",
        "1900-02-29T00:00:00Z",
        "2000-13-01T00:00:00Z",
        "2000-01-01T24:00:00Z",
        "2000-01-01T00:60:00Z",
        "2000-01-01T00:00:00",
        "2000-01-01T00:00:00+00:00",
        "2000-01-01T00:00:00.Z",
        "2000-01-01T00:00:00.1234567890Z",
        "2000-01-01 00:00:00Z",
        "2000-1-01T00:00:00Z",
        "+200-01-01T00:00:00Z",
        "9999-01-01T00:00:00Z",
        "2000-01-01T00:00:00ZZ",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        T_ERR(rio__s3_parse_iso8601(bad[i], &ns), -1);
}

/* ------------------------------------------------ AWS credentials files */

static int ini(const char *text, const char *profile, bool config, struct rio_awsini *out)
{
    return rio__awsini_parse(text, strlen(text), profile, config, out);
}

/* The credentials file: [NAME] sections, keys in any case, '=' or ':',
 * comments, CRLF, a BOM, the last setting wins, nested settings and
 * unknown keys ignored. */
TEST(awsini_credentials_file)
{
    static const char text[] = "\xef\xbb\xbf# comment\r\n"
                               "[default]\r\n"
                               "aws_access_key_id = AKDEFAULT\r\n"
                               "aws_secret_access_key=SECRETDEFAULT\r\n"
                               "\n"
                               "[dev]\n"
                               "  ; an indented comment\n"
                               "AWS_Access_Key_ID :  AKDEV  \n"
                               "aws_secret_access_key = first\n"
                               "aws_secret_access_key = SECRET=DEV\n"
                               "aws_session_token = TOKEN\n"
                               "s3 =\n"
                               "  endpoint_url = http://nested.invalid\n"
                               "  region = nested-1\n"
                               "unknown_key = whatever\n"
                               "[profile dev]\n"
                               "aws_access_key_id = NOT-IN-A-CREDENTIALS-FILE\n";
    struct rio_awsini a;

    T_OK(ini(text, "default", false, &a));
    T_TRUE(a.found);
    T_STREQ(a.access_key, "AKDEFAULT");
    T_STREQ(a.secret_key, "SECRETDEFAULT");
    T_STREQ(a.token, "");
    T_OK(ini(text, "dev", false, &a));
    T_STREQ(a.access_key, "AKDEV");
    T_STREQ(a.secret_key, "SECRET=DEV");
    T_STREQ(a.token, "TOKEN");
    T_STREQ(a.endpoint_url, "");
    T_STREQ(a.region, "");
    T_ERR(ini(text, "prod", false, &a), RIO_ENOTFOUND);
    T_FALSE(a.found);
    T_STREQ(a.access_key, "");
}

/* The config file: [profile NAME], [default] or [profile default]. */
TEST(awsini_config_file)
{
    static const char text[] = "[default]\n"
                               "region = eu-west-3\n"
                               "[profile  dev ]\n"
                               "region=us-west-2\n"
                               "endpoint_url = http://127.0.0.1:7480\n"
                               "ca_bundle = /etc/railio/ca.pem\n"
                               "[dev]\n"
                               "region = not-a-config-profile\n"
                               "[profile default]\n"
                               "endpoint_url = http://default.invalid\n";
    struct rio_awsini a;

    T_OK(ini(text, "dev", true, &a));
    T_STREQ(a.region, "us-west-2");
    T_STREQ(a.endpoint_url, "http://127.0.0.1:7480");
    T_STREQ(a.ca_bundle, "/etc/railio/ca.pem");
    T_OK(ini(text, "default", true, &a));
    T_STREQ(a.region, "eu-west-3");
    T_STREQ(a.endpoint_url, "http://default.invalid");
    T_STREQ(a.ca_bundle, "");
    T_ERR(ini("[dev]\nregion = x\n", "dev", true, &a), RIO_ENOTFOUND);
    T_ERR(ini("", "default", true, &a), RIO_ENOTFOUND);
}

/* Hostile files: a line over the bound, a value longer than its field, a
 * line that is neither, a broken header: refused with the line number and
 * nothing of the value kept; the same in another profile's section (lines
 * are bounded whatever their section) or an over-long unknown key's value
 * in ours: only the line bound applies. */
TEST(awsini_bounds)
{
    struct rio_awsini a;
    size_t n = RIO_AWSINI_LINE_MAX + 64;
    char *b = malloc(n + 64);
    int o;

    T_NOTNULL(b);
    T_ERR(ini("[default]\nthis is no setting\n", "default", false, &a), RIO_EPROTO);
    T_EQ(a.bad_line, 2u);
    /* A refusal keeps nothing read before it (fuzz_awsini found found set). */
    T_ERR(ini("[default]\naws_secret_access_key = S\nno setting\n", "default", false, &a),
          RIO_EPROTO);
    T_EQ(a.bad_line, 3u);
    T_FALSE(a.found);
    T_STREQ(a.secret_key, "");
    T_ERR(ini("[default\n", "default", false, &a), RIO_EPROTO);
    T_EQ(a.bad_line, 1u);
    T_ERR(ini("[]\n", "default", false, &a), RIO_ENOTFOUND);
    /* A secret one byte too long for its field. */
    o = sprintf(b, "[default]\naws_secret_access_key = ");
    memset(b + o, 's', sizeof(a.secret_key));
    b[o + sizeof(a.secret_key)] = '\0';
    T_ERR(ini(b, "default", false, &a), RIO_EPROTO);
    T_EQ(a.bad_line, 2u);
    T_STREQ(a.secret_key, "");
    /* One byte less fits. */
    b[o + sizeof(a.secret_key) - 1] = '\0';
    T_OK(ini(b, "default", false, &a));
    T_EQ(strlen(a.secret_key), sizeof(a.secret_key) - 1);
    /* An unknown key's long value in our section: ignored. */
    o = sprintf(b, "[default]\nsomething_else = ");
    memset(b + o, 'x', RIO_AWSINI_LINE_MAX - (size_t)o + 1);
    b[RIO_AWSINI_LINE_MAX - 1] = '\0';
    T_OK(ini(b, "default", false, &a));
    /* A line over the bound, anywhere. */
    o = sprintf(b, "[other]\nk = ");
    memset(b + o, 'x', RIO_AWSINI_LINE_MAX);
    b[o + RIO_AWSINI_LINE_MAX] = '\0';
    T_ERR(ini(b, "default", false, &a), RIO_EPROTO);
    T_EQ(a.bad_line, 2u);
    free(b);
    /* A NUL inside a value. */
    static const char nul[] = "[default]\nregion = a\0b\n";
    T_ERR(rio__awsini_parse(nul, sizeof(nul) - 1, "default", false, &a), RIO_EPROTO);
    /* The file bound. */
    T_ERR(rio__awsini_parse("", RIO_AWSINI_FILE_MAX + 1, "default", false, &a), RIO_EPROTO);
}

/* An S3 error answer as a railio error: the ones a conditional PUT meets
 * (412 refused, 409 ConditionalRequestConflict retried), and neighbours
 * that must stay as they are. */
TEST(http_status_classes)
{
    T_EQ(rio__s3_map_http(412, "PreconditionFailed"), RIO_EGENERATION);
    T_EQ(rio__s3_map_http(409, "ConditionalRequestConflict"), RIO_ESERVER);
    T_EQ(rio__s3_map_http(409, "OperationAborted"), RIO_ESERVER);
    T_EQ(rio__s3_map_http(409, "BucketAlreadyExists"), -EEXIST);
    T_EQ(rio__s3_map_http(404, "NoSuchKey"), RIO_ENOTFOUND);
    T_EQ(rio__s3_map_http(404, "NoSuchBucket"), RIO_ENOCONTAINER);
    T_EQ(rio__s3_map_http(503, "SlowDown"), RIO_ETHROTTLE);
    T_EQ(rio__s3_map_http(200, ""), 0);
}
