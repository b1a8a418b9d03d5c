/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * SigV4 as the s3:// transport computes it, against the worked examples AWS
 * publishes for S3 ("Signature Calculations for the Authorization Header:
 * Transferring Payload in a Single Chunk"): a ranged GET, a PUT whose key
 * needs encoding, and a GET with a query string. Matching them shows the
 * signer agrees with S3 itself, not only with itself; the radosgw tests then
 * show it for every request the transport sends.
 */
#include <string.h>

#include <openssl/evp.h>

#include "t.h"
#include "transport/s3/sign.h"

static const struct rio_s3_signer aws_example = {
    .access_key = "AKIAIOSFODNN7EXAMPLE",
    .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
    .region = "us-east-1",
    .service = "s3",
};

#define CRED "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request, "

TEST(aws_get_object_with_range)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    char auth[512];
    /* Deliberately out of order: the signer sorts. */
    struct rio_s3_kv h[] = {
        {"x-amz-date", "20130524T000000Z"},
        {"range", "bytes=0-9"},
        {"host", "examplebucket.s3.amazonaws.com"},
        {"x-amz-content-sha256", RIO_S3_EMPTY_SHA256},
    };

    T_NOTNULL(m);
    T_EQ(rio__s3_sign(&aws_example, m, "GET", "/test.txt", "", h, 4, RIO_S3_EMPTY_SHA256,
                      "20130524T000000Z", auth, sizeof(auth)),
         0);
    T_STREQ(auth,
            CRED "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
                 "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
    /* The same context signs again (reuse allocates nothing new). */
    T_EQ(rio__s3_sign(&aws_example, m, "GET", "/test.txt", "", h, 4, RIO_S3_EMPTY_SHA256,
                      "20130524T000000Z", auth, sizeof(auth)),
         0);
    T_TRUE(strstr(auth, "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"));
    /* Too small an output buffer is an error, not a truncated header. */
    T_EQ(rio__s3_sign(&aws_example, m, "GET", "/test.txt", "", h, 4, RIO_S3_EMPTY_SHA256,
                      "20130524T000000Z", auth, 40),
         -1);
    EVP_MD_CTX_free(m);
}

TEST(aws_put_object_encoded_key)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    const char *ph = "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072";
    char uri[64], auth[512];
    struct rio_s3_kv h[] = {
        {"host", "examplebucket.s3.amazonaws.com"},
        {"date", "Fri, 24 May 2013 00:00:00 GMT"},
        {"x-amz-date", "20130524T000000Z"},
        {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
        {"x-amz-content-sha256", ph},
    };

    T_NOTNULL(m);
    T_EQ(rio__s3_uri_encode("/test$file.text", 15, 1, uri, sizeof(uri)), 17);
    T_STREQ(uri, "/test%24file.text");
    T_EQ(rio__s3_sign(&aws_example, m, "PUT", uri, "", h, 5, ph, "20130524T000000Z", auth,
                      sizeof(auth)),
         0);
    T_STREQ(auth,
            CRED "SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-"
                 "class, "
                 "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd");
    EVP_MD_CTX_free(m);
}

TEST(aws_list_objects_query)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    char q[64], auth[512];
    struct rio_s3_kv qp[] = {{"prefix", "J"}, {"max-keys", "2"}};
    struct rio_s3_kv h[] = {
        {"host", "examplebucket.s3.amazonaws.com"},
        {"x-amz-date", "20130524T000000Z"},
        {"x-amz-content-sha256", RIO_S3_EMPTY_SHA256},
    };

    T_NOTNULL(m);
    T_EQ(rio__s3_canon_query(qp, 2, q, sizeof(q)), 19);
    T_STREQ(q, "max-keys=2&prefix=J");
    T_EQ(rio__s3_sign(&aws_example, m, "GET", "/", q, h, 3, RIO_S3_EMPTY_SHA256, "20130524T000000Z",
                      auth, sizeof(auth)),
         0);
    T_STREQ(auth,
            CRED "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                 "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
    EVP_MD_CTX_free(m);
}

/* Multipart queries: "uploads" keeps its '=', parameters sorted, values encoded. */
TEST(canonical_queries)
{
    char q[256];
    struct rio_s3_kv up[] = {{"uploads", ""}};
    struct rio_s3_kv part[] = {{"uploadId", "2~a/b+c="}, {"partNumber", "12"}};
    struct rio_s3_kv many[RIO_S3_MAX_SIGNED + 1];

    T_EQ(rio__s3_canon_query(up, 1, q, sizeof(q)), 8);
    T_STREQ(q, "uploads=");
    T_GT(rio__s3_canon_query(part, 2, q, sizeof(q)), 0);
    T_STREQ(q, "partNumber=12&uploadId=2~a%2Fb%2Bc%3D");
    T_EQ(rio__s3_canon_query(part, 2, q, 10), -1);
    T_EQ(rio__s3_canon_query(up, 0, q, sizeof(q)), 0);
    T_STREQ(q, "");
    for (unsigned i = 0; i < RIO_S3_MAX_SIGNED + 1; i++)
        many[i] = up[0];
    T_EQ(rio__s3_canon_query(many, RIO_S3_MAX_SIGNED + 1, q, sizeof(q)), -1);
}

TEST(uri_encoding)
{
    char out[64];

    T_EQ(rio__s3_uri_encode("a b/c~d", 7, 1, out, sizeof(out)), 9);
    T_STREQ(out, "a%20b/c~d");
    T_EQ(rio__s3_uri_encode("a b/c", 5, 0, out, sizeof(out)), 9);
    T_STREQ(out, "a%20b%2Fc");
    T_EQ(rio__s3_uri_encode("\xc3\xa9", 2, 1, out, sizeof(out)), 6);
    T_STREQ(out, "%C3%A9");
    /* Exactly enough room, then one byte short. */
    T_EQ(rio__s3_uri_encode("ab ", 3, 0, out, 6), 5);
    T_EQ(rio__s3_uri_encode("ab ", 3, 0, out, 5), -1);
    T_EQ(rio__s3_uri_encode("", 0, 0, out, 1), 0);
    T_EQ(rio__s3_uri_encode("", 0, 0, out, 0), -1);
}

TEST(small_helpers)
{
    char d[17], hx[9], b64[16];
    const uint8_t bytes[] = {0xde, 0xad, 0xbe, 0xef};

    rio__s3_amzdate(1369353600, d); /* 2013-05-24 00:00:00 UTC */
    T_STREQ(d, "20130524T000000Z");
    rio__s3_hex(bytes, 4, hx);
    T_STREQ(hx, "deadbeef");
    rio__s3_base64((const uint8_t *)"hello", 5, b64);
    T_STREQ(b64, "aGVsbG8=");
}

/* The URL of a request, path style (radosgw, MinIO: the bucket in the
 * path) and virtual-hosted (AWS: the bucket in the host), and which one an
 * endpoint and bucket get by default. */
TEST(request_url_addressing)
{
    char url[256], ep[128];

    T_EQ(rio__s3_url("http://127.0.0.1:7480", "rio", "pre/", "a b/c+d", "", url, sizeof(url)),
         (ssize_t)strlen("http://127.0.0.1:7480/rio/pre/a%20b/c%2Bd"));
    T_STREQ(url, "http://127.0.0.1:7480/rio/pre/a%20b/c%2Bd");
    /* The bucket itself, with a query. */
    T_GE(rio__s3_url("http://127.0.0.1:7480", "rio", "pre/", NULL, "list-type=2&prefix=pre%2F", url,
                     sizeof(url)),
         0);
    T_STREQ(url, "http://127.0.0.1:7480/rio?list-type=2&prefix=pre%2F");
    /* Virtual-hosted: the endpoint gains the bucket, the path loses it. */
    T_OK(rio__s3_vhost_endpoint("https://s3.eu-west-3.amazonaws.com", "my-bucket", ep, sizeof(ep)));
    T_STREQ(ep, "https://my-bucket.s3.eu-west-3.amazonaws.com");
    T_GE(rio__s3_url(ep, NULL, "", "k/1", "partNumber=1&uploadId=x", url, sizeof(url)), 0);
    T_STREQ(url, "https://my-bucket.s3.eu-west-3.amazonaws.com/k/1?partNumber=1&uploadId=x");
    T_GE(rio__s3_url(ep, NULL, "", NULL, "list-type=2", url, sizeof(url)), 0);
    T_STREQ(url, "https://my-bucket.s3.eu-west-3.amazonaws.com/?list-type=2");
    T_ERR(rio__s3_vhost_endpoint("s3.example.com", "b", ep, sizeof(ep)), -1);
    T_ERR(rio__s3_vhost_endpoint("https://s3.example.com", "bucket", ep, 20), -1);
    /* Too small a buffer fails, never truncates. */
    T_ERR(rio__s3_url("http://h", "b", "", "key", "", url, 10), -1);

    /* Which hosts are AWS's. */
    T_TRUE(rio__s3_host_is_aws("s3.us-east-1.amazonaws.com"));
    T_TRUE(rio__s3_host_is_aws("S3.EU-WEST-3.AMAZONAWS.COM:443"));
    T_TRUE(rio__s3_host_is_aws("s3.cn-north-1.amazonaws.com.cn"));
    T_FALSE(rio__s3_host_is_aws("127.0.0.1:7480"));
    T_FALSE(rio__s3_host_is_aws("amazonaws.com"));
    T_FALSE(rio__s3_host_is_aws("s3.amazonaws.com.evil.example"));
    T_FALSE(rio__s3_host_is_aws("minio.local:9000"));
    /* Which buckets can be a host label. */
    T_TRUE(rio__s3_bucket_dns_ok("my-bucket-1", 1));
    T_TRUE(rio__s3_bucket_dns_ok("a.b.c", 0));
    T_FALSE(rio__s3_bucket_dns_ok("a.b.c", 1));
    T_FALSE(rio__s3_bucket_dns_ok("My_Bucket", 0));
    T_FALSE(rio__s3_bucket_dns_ok("ab", 0));
    T_FALSE(rio__s3_bucket_dns_ok("-ab", 0));
    T_FALSE(rio__s3_bucket_dns_ok("ab-", 0));
    T_FALSE(rio__s3_bucket_dns_ok(
        "0123456789012345678901234567890123456789012345678901234567890123", 0));
}
