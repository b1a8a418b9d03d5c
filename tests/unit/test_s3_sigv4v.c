/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The S3 gateway's SigV4 verification (src/server/s3/sigv4v.c) against
 * requests signed by others: AWS's published examples for S3 (header-signed
 * GET with Range, PUT with an encoded key, GET with a query, the presigned
 * URL, the aws-chunked upload's seed) and requests botocore signed (fixed
 * clock, recorded by tests/unit/data/gen_s3_sigv4v.py). Then what must be
 * refused, each with its S3 error: a tampered header, path, query or body,
 * a wrong secret, an unknown key, skew, an expired or overlong presigned
 * URL, malformed Authorization headers, and anonymous access when off.
 */
#include <errno.h>
#include <string.h>

#include "core/internal.h"
#include "railio.h"
#include "s3auth_vec.h"
#include "server/s3/auth.h"
#include "t.h"
#include "transport/s3/sign.h"

#define T2013 1369353600 /* 20130524T000000Z */
#define T2026 1796198400 /* 20261202T080000Z, the botocore vectors' clock */
static const char keys_text[] = "# test users\n"
                                "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
                                "GWTESTKEY01 gw/test+secret=01 bkt,other\n"
                                "OTHERKEY othersecret *\n";

/* Verify v at now: the return value, and *code into code. */
static int verify(const struct rio_s3_keys *k, const struct vec *v, int64_t now,
                  struct rio_s3_auth *a, const char **code)
{
    struct rio_s3_req r = req_of(v);
    return rio_s3_verify(k, &r, now, a, code);
}

static void expect_ok(const struct rio_s3_keys *k, const struct vec *v, int64_t now, const char *ak)
{
    struct rio_s3_auth a;
    const char *code = "unset";

    T_EQ(verify(k, v, now, &a, &code), 0);
    T_NULL(code);
    T_STREQ(a.access_key, ak);
    T_EQ(a.anonymous, 0);
}

static void expect_refused(const struct rio_s3_keys *k, const struct vec *v, int64_t now,
                           const char *want)
{
    struct rio_s3_auth a;
    const char *code = NULL;
    int ret = verify(k, v, now, &a, &code);

    T_LT(ret, 0);
    T_NOTNULL(code);
    T_STREQ(code, want);
    T_STREQ(a.access_key, ""); /* nothing of a refused request is kept */
}

#define AWS_CRED                                                                                   \
    "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"

static const struct vec aws_get_range = {
    "GET",
    "/test.txt",
    "",
    "",
    {{"Host", "examplebucket.s3.amazonaws.com"},
     {"Range", "bytes=0-9"},
     {"x-amz-content-sha256", RIO_S3_EMPTY_SHA256},
     {"x-amz-date", "20130524T000000Z"},
     {"Authorization",
      AWS_CRED ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,"
               "Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41"}}};

static const struct vec aws_put = {
    "PUT",
    "/test%24file.text",
    "",
    "Welcome to Amazon S3.",
    {{"Host", "examplebucket.s3.amazonaws.com"},
     {"Date", "Fri, 24 May 2013 00:00:00 GMT"},
     {"x-amz-date", "20130524T000000Z"},
     {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
     {"x-amz-content-sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072"},
     {"Authorization",
      AWS_CRED ",SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,"
               "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd"}}};

static const struct vec aws_lifecycle = {
    "GET",
    "/",
    "lifecycle",
    "",
    {{"Host", "examplebucket.s3.amazonaws.com"},
     {"x-amz-date", "20130524T000000Z"},
     {"x-amz-content-sha256", RIO_S3_EMPTY_SHA256},
     {"Authorization",
      AWS_CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
               "Signature=fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"}}};

static const struct vec aws_list = {
    "GET",
    "/",
    "max-keys=2&prefix=J",
    "",
    {{"Host", "examplebucket.s3.amazonaws.com"},
     {"x-amz-date", "20130524T000000Z"},
     {"x-amz-content-sha256", RIO_S3_EMPTY_SHA256},
     {"Authorization",
      AWS_CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,"
               "Signature=34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"}}};

#define AWS_PRESIGN_Q                                                                              \
    "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-" \
    "1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders="   \
    "host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"

static const struct vec aws_presigned = {
    "GET", "/test.txt", AWS_PRESIGN_Q, "", {{"Host", "examplebucket.s3.amazonaws.com"}}};

static const struct vec aws_chunked = {
    "PUT",
    "/examplebucket/chunkObject.txt",
    "",
    "",
    {{"Host", "s3.amazonaws.com"},
     {"x-amz-date", "20130524T000000Z"},
     {"x-amz-storage-class", "REDUCED_REDUNDANCY"},
     {"Authorization",
      AWS_CRED ",SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-"
               "date;x-amz-decoded-content-length;x-amz-storage-class,"
               "Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9"},
     {"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"},
     {"Content-Encoding", "aws-chunked"},
     {"x-amz-decoded-content-length", "66560"},
     {"Content-Length", "66824"}}};

/* Requests botocore signed (tests/unit/data/gen_s3_sigv4v.py; keys_text's
 * GWTESTKEY01), as sent: a PUT with a signed payload hash and a key full of
 * characters that need encoding, a ranged GET of a UTF-8 key, a
 * ListObjectsV2 whose parameters need encoding, a HEAD, a presigned GET;
 * from botocore 1.43 and from Debian's 1.29 (whose signer is the AWS CRT's). */
static const struct vec boto[] = {
    {"PUT",
     "/bkt/dir/a%20b%2Bc~d%3De%25f.txt",
     "",
     "hello, gateway\x0a"
     "",
     {
         {"Expect", "100-continue"},
         {"X-Amz-Date", "20261202T080000Z"},
         {"X-Amz-Content-SHA256",
          "48bb7120117b7ec655b142054322459602d16d9f29c902154ef904a282832b17"},
         {"Authorization",
          "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/railio-1/s3/aws4_request, "
          "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
          "Signature=f853c5b26d9732af366de592f769d615f558fcde18c6dff7190cf4ca37df2fe3"},
         {"amz-sdk-request", "attempt=1"},
         {"Content-Length", "15"},
         {"Host", "127.0.0.1:9000"},
     }},
    {"GET",
     "/bkt/k%C3%A9y/with%20spaces",
     "",
     "",
     {
         {"Range", "bytes=0-4"},
         {"X-Amz-Date", "20261202T080000Z"},
         {"X-Amz-Content-SHA256",
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
         {"Authorization",
          "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/railio-1/s3/aws4_request, "
          "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
          "Signature=926c104b69577220f162833ebed213eac71c88f2441b38afc15bf26136f31c7f"},
         {"amz-sdk-request", "attempt=1"},
         {"Host", "127.0.0.1:9000"},
     }},
    {"GET",
     "/bkt",
     "list-type=2&prefix=a%20b%2F&delimiter=%2F&start-after=x%3Dy%26z&encoding-type=url",
     "",
     {
         {"X-Amz-Date", "20261202T080000Z"},
         {"X-Amz-Content-SHA256",
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
         {"Authorization",
          "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/railio-1/s3/aws4_request, "
          "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
          "Signature=b74e57755d9cff0af12242b93e9778799370ceebccb06579f0c37cc0353c2096"},
         {"amz-sdk-request", "attempt=1"},
         {"Host", "127.0.0.1:9000"},
     }},
    {"HEAD",
     "/bkt",
     "",
     "",
     {
         {"X-Amz-Date", "20261202T080000Z"},
         {"X-Amz-Content-SHA256",
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
         {"Authorization",
          "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/railio-1/s3/aws4_request, "
          "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
          "Signature=1291ba1da1642ddb3ff6c17364212a9bc3779980f85afa21df0bb0a4537f2e1e"},
         {"amz-sdk-request", "attempt=1"},
         {"Host", "127.0.0.1:9000"},
     }},
    {"GET",
     "/bkt/p%20r/e.bin",
     "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=GWTESTKEY01%2F20261202%2Frailio-1%2Fs3%"
     "2Faws4_request&X-Amz-Date=20261202T080000Z&X-Amz-Expires=3600&X-Amz-SignedHeaders=host&X-Amz-"
     "Signature=6b86fca747399d8b5a2d917d6613e5915fe9abe33ffb7c2cdbf523790df4df94",
     "",
     {{"Host", "127.0.0.1:9000"}}},
    /* Debian's python3-botocore 1.29.27 with python3-awscrt: the same calls,
     * signed by the AWS CRT's C signer. */
    {"PUT",
     "/bkt/dir/a%20b%2Bc~d%3De%25f.txt",
     "",
     "hello, gateway\x0a"
     "",
     {
         {"Content-MD5", "jZ1B8LZu8DIfYoFRGVmrLQ=="},
         {"Expect", "100-continue"},
         {"host", "127.0.0.1:9000"},
         {"X-Amz-Date", "20261202T080000Z"},
         {"x-amz-content-sha256",
          "48bb7120117b7ec655b142054322459602d16d9f29c902154ef904a282832b17"},
         {"Authorization",
          "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/railio-1/s3/aws4_request, "
          "SignedHeaders=content-md5;host;x-amz-content-sha256;x-amz-date, "
          "Signature=db41b13474973b162734e07c498baf1b0b673548a19fa727ccd3ea2d76678715"},
         {"amz-sdk-request", "attempt=1"},
         {"Content-Length", "15"},
     }},
    {"GET",
     "/bkt/k%C3%A9y/with%20spaces",
     "",
     "",
     {
         {"Range", "bytes=0-4"},
         {"host", "127.0.0.1:9000"},
         {"X-Amz-Date", "20261202T080000Z"},
         {"x-amz-content-sha256",
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
         {"Authorization",
          "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/railio-1/s3/aws4_request, "
          "SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
          "Signature=926c104b69577220f162833ebed213eac71c88f2441b38afc15bf26136f31c7f"},
         {"amz-sdk-request", "attempt=1"},
     }},
    {"GET",
     "/bkt",
     "list-type=2&prefix=a%20b%2F&delimiter=%2F&start-after=x%3Dy%26z&encoding-type=url",
     "",
     {
         {"host", "127.0.0.1:9000"},
         {"X-Amz-Date", "20261202T080000Z"},
         {"x-amz-content-sha256",
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
         {"Authorization",
          "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/railio-1/s3/aws4_request, "
          "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
          "Signature=b74e57755d9cff0af12242b93e9778799370ceebccb06579f0c37cc0353c2096"},
         {"amz-sdk-request", "attempt=1"},
     }},
    {"HEAD",
     "/bkt",
     "",
     "",
     {
         {"host", "127.0.0.1:9000"},
         {"X-Amz-Date", "20261202T080000Z"},
         {"x-amz-content-sha256",
          "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
         {"Authorization",
          "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/railio-1/s3/aws4_request, "
          "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
          "Signature=1291ba1da1642ddb3ff6c17364212a9bc3779980f85afa21df0bb0a4537f2e1e"},
         {"amz-sdk-request", "attempt=1"},
     }},
    {"GET",
     "/bkt/p%20r/e.bin",
     "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=GWTESTKEY01%2F20261202%2Frailio-1%2Fs3%"
     "2Faws4_request&X-Amz-Date=20261202T080000Z&X-Amz-SignedHeaders=host&X-Amz-Expires=3600&X-Amz-"
     "Signature=6b86fca747399d8b5a2d917d6613e5915fe9abe33ffb7c2cdbf523790df4df94",
     "",
     {{"Host", "127.0.0.1:9000"}}},
};
#define NBOTO (sizeof(boto) / sizeof(boto[0]))

/* Requests curl 7.88 signed with --aws-sigv4 "aws:amz:us-east-1:s3" and
 * --user GWTESTKEY01:gw/test+secret=01, captured on a loopback socket: a GET
 * with a query ('+' for a space), a PUT -T (no x-amz-content-sha256: curl
 * signs the empty payload's hash), a PUT -T with UNSIGNED-PAYLOAD. */
#define TCURL 1796199626 /* 20261202T082026Z */
#define CURL_CRED "AWS4-HMAC-SHA256 Credential=GWTESTKEY01/20261202/us-east-1/s3/aws4_request, "
static const struct vec curl_reqs[] = {
    {"GET",
     "/bkt/a%20b.txt",
     "x-id=GetObject&prefix=a+b",
     "",
     {{"Host", "127.0.0.1:37953"},
      {"Authorization",
       CURL_CRED "SignedHeaders=host;x-amz-date, "
                 "Signature=886a2462348e84ca580791f3d0857b17e3fe431c7ec06582465794caf57a93e6"},
      {"X-Amz-Date", "20261202T082026Z"},
      {"User-Agent", "curl/7.88.1"},
      {"Accept", "*/*"}}},
    {"PUT",
     "/bkt/up.txt",
     "",
     "hello curl\n",
     {{"Host", "127.0.0.1:37953"},
      {"Authorization",
       CURL_CRED "SignedHeaders=host;x-amz-date, "
                 "Signature=48f35b2baa8df350b9288d31451bb853969b6472134772371d4d087091cfe7f7"},
      {"X-Amz-Date", "20261202T082026Z"},
      {"User-Agent", "curl/7.88.1"},
      {"Accept", "*/*"},
      {"Content-Length", "11"},
      {"Expect", "100-continue"}}},
    {"PUT",
     "/bkt/up2.txt",
     "",
     "hello curl\n",
     {{"Host", "127.0.0.1:37953"},
      {"Authorization",
       CURL_CRED "SignedHeaders=host;x-amz-content-sha256;x-amz-date, "
                 "Signature=9f1913310be547f2f87796ca1ace669c11e4b1b8d73cb062c87ddabf2a983818"},
      {"X-Amz-Date", "20261202T082026Z"},
      {"User-Agent", "curl/7.88.1"},
      {"Accept", "*/*"},
      {"x-amz-content-sha256", "UNSIGNED-PAYLOAD"},
      {"Content-Length", "11"},
      {"Expect", "100-continue"}}},
};

TEST(curl_aws_sigv4_requests_verify)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct rio_s3_auth a;
    const char *code;
    struct vec v;

    for (size_t i = 0; i < sizeof(curl_reqs) / sizeof(curl_reqs[0]); i++) {
        T_EQ(verify(k, &curl_reqs[i], TCURL, &a, &code), 0);
        T_STREQ(a.access_key, "GWTESTKEY01");
        /* Their bodies are not signed. */
        T_EQ(a.payload_mode, RIO_S3_PAYLOAD_UNSIGNED);
        v = with_header(&curl_reqs[i], "X-Amz-Date", "20261202T082027Z");
        expect_refused(k, &v, TCURL, "SignatureDoesNotMatch");
    }
    /* curl signed its query as sent, unsorted: that exact string, no other. */
    v = curl_reqs[0];
    v.query = "prefix=a+b&x-id=GetObject";
    expect_refused(k, &v, TCURL, "SignatureDoesNotMatch");
    v.query = "x-id=GetObject&prefix=a%20b";
    expect_refused(k, &v, TCURL, "SignatureDoesNotMatch");
    rio_s3_keys_free(k);
}

TEST(aws_examples_verify)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct rio_s3_auth a;
    const char *code;

    expect_ok(k, &aws_get_range, T2013, "AKIAIOSFODNN7EXAMPLE");
    T_EQ(verify(k, &aws_get_range, T2013, &a, &code), 0);
    T_EQ(a.payload_mode, RIO_S3_PAYLOAD_SIGNED);
    T_STREQ(a.payload_sha256, RIO_S3_EMPTY_SHA256);
    T_STREQ(a.scope, "20130524/us-east-1/s3/aws4_request");
    expect_ok(k, &aws_put, T2013, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &aws_lifecycle, T2013, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &aws_list, T2013, "AKIAIOSFODNN7EXAMPLE");
    /* The same requests a few minutes either side of their date. */
    expect_ok(k, &aws_list, T2013 + 899, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &aws_list, T2013 - 899, "AKIAIOSFODNN7EXAMPLE");
    rio_s3_keys_free(k);
}

TEST(aws_put_body_hash_checked_as_it_streams)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct rio_s3_auth a;
    struct rio_s3_check *c;
    const char *code, *body = aws_put.body;

    T_EQ(verify(k, &aws_put, T2013, &a, &code), 0);
    T_EQ(a.payload_mode, RIO_S3_PAYLOAD_SIGNED);
    T_EQ(rio_s3_check_new("x-amz-content-sha256", a.payload_sha256, &c, &code), 0);
    for (size_t i = 0; i < strlen(body); i += 4)
        T_EQ(rio_s3_check_update(c, body + i, strlen(body) - i < 4 ? strlen(body) - i : 4), 0);
    T_EQ(rio_s3_check_done(c, &code), 0);
    rio_s3_check_free(c);
    /* One byte changed: the body no longer matches what was signed. */
    T_EQ(rio_s3_check_new("x-amz-content-sha256", a.payload_sha256, &c, &code), 0);
    T_EQ(rio_s3_check_update(c, "Welcome to Amazon S4.", 21), 0);
    T_EQ(rio_s3_check_done(c, &code), -EINVAL);
    T_STREQ(code, "XAmzContentSHA256Mismatch");
    rio_s3_check_free(c);
    /* A short body too. */
    T_EQ(rio_s3_check_new("x-amz-content-sha256", a.payload_sha256, &c, &code), 0);
    T_EQ(rio_s3_check_update(c, body, 20), 0);
    T_EQ(rio_s3_check_done(c, &code), -EINVAL);
    rio_s3_check_free(c);
    rio_s3_keys_free(k);
}

TEST(aws_presigned_url)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct rio_s3_auth a;
    const char *code;
    struct vec v = aws_presigned;

    T_EQ(verify(k, &aws_presigned, T2013, &a, &code), 0);
    T_STREQ(a.access_key, "AKIAIOSFODNN7EXAMPLE");
    T_EQ(a.payload_mode, RIO_S3_PAYLOAD_UNSIGNED);
    /* Valid until X-Amz-Date + X-Amz-Expires, expired after. */
    expect_ok(k, &aws_presigned, T2013 + 86400, "AKIAIOSFODNN7EXAMPLE");
    expect_refused(k, &aws_presigned, T2013 + 86401, "AccessDenied");
    T_TRUE(strstr(rio_error_detail(), "Request has expired"));
    /* Not valid long before its date. */
    expect_refused(k, &aws_presigned, T2013 - 3600, "AccessDenied");
    /* A longer life written into the URL breaks the signature. */
    v.query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524"
              "%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86401&"
              "X-Amz-SignedHeaders=host&X-Amz-Signature="
              "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
    expect_refused(k, &v, T2013, "SignatureDoesNotMatch");
    /* An extra parameter is signed too. */
    v.query = AWS_PRESIGN_Q "&x-id=GetObject";
    expect_refused(k, &v, T2013, "SignatureDoesNotMatch");
    /* More than seven days is refused outright. */
    v.query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524"
              "%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=604801&"
              "X-Amz-SignedHeaders=host&X-Amz-Signature="
              "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404";
    expect_refused(k, &v, T2013, "AuthorizationQueryParametersError");
    /* Parameters missing. */
    v.query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Date=20130524T000000Z";
    expect_refused(k, &v, T2013, "AuthorizationQueryParametersError");
    /* Another path. */
    v = aws_presigned;
    v.path = "/test.txu";
    expect_refused(k, &v, T2013, "SignatureDoesNotMatch");
    /* Another host. */
    v = with_header(&aws_presigned, "Host", "otherbucket.s3.amazonaws.com");
    expect_refused(k, &v, T2013, "SignatureDoesNotMatch");
    /* Both a presigned query and an Authorization header. */
    v = with_header(&aws_presigned, "Authorization", aws_list.h[3].value);
    expect_refused(k, &v, T2013, "InvalidArgument");
    rio_s3_keys_free(k);
}

TEST(aws_chunked_seed_signature)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct rio_s3_auth a;
    const char *code;

    T_EQ(verify(k, &aws_chunked, T2013, &a, &code), 0);
    T_EQ(a.payload_mode, RIO_S3_PAYLOAD_STREAMING);
    T_STREQ(a.seed_signature, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9");
    T_STREQ(a.amz_date, "20130524T000000Z");
    T_STREQ(a.scope, "20130524/us-east-1/s3/aws4_request");
    rio_s3_keys_free(k);
}

TEST(botocore_requests_verify)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct rio_s3_auth a;
    struct rio_s3_check *c;
    const char *code;

    for (size_t i = 0; i < NBOTO; i++) {
        T_EQ(verify(k, &boto[i], T2026, &a, &code), 0);
        T_STREQ(a.access_key, "GWTESTKEY01");
        T_EQ(a.payload_mode,
             boto[i].query[0] == 'X' ? RIO_S3_PAYLOAD_UNSIGNED : RIO_S3_PAYLOAD_SIGNED);
        if (a.payload_mode != RIO_S3_PAYLOAD_SIGNED)
            continue;
        /* The signed payload hash is the body's. */
        T_EQ(rio_s3_check_new("x-amz-content-sha256", a.payload_sha256, &c, &code), 0);
        T_EQ(rio_s3_check_update(c, boto[i].body, strlen(boto[i].body)), 0);
        T_EQ(rio_s3_check_done(c, &code), 0);
        rio_s3_check_free(c);
    }
    T_TRUE(rio_s3_user_may(k, "GWTESTKEY01", "bkt"));
    T_TRUE(rio_s3_user_may(k, "GWTESTKEY01", "other"));
    T_FALSE(rio_s3_user_may(k, "GWTESTKEY01", "bkt2"));
    T_TRUE(rio_s3_user_may(k, "OTHERKEY", "anything"));
    T_TRUE(rio_s3_user_may(k, "AKIAIOSFODNN7EXAMPLE", "anything"));
    T_FALSE(rio_s3_user_may(k, "NOSUCHKEY", "bkt"));
    T_FALSE(rio_s3_user_may(k, "", "bkt"));
    rio_s3_keys_free(k);
}

TEST(tampered_requests_refused)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct vec v;

    for (size_t i = 0; i < NBOTO; i++) {
        int presigned = boto[i].query[0] == 'X';
        const char *code;

        /* Another signed header value. */
        v = with_header(&boto[i], "Host", "127.0.0.1:9001");
        expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
        /* Another path: one byte, and the same key encoded otherwise. */
        v = boto[i];
        v.path = "/bkt/x";
        expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
        if (!presigned) {
            /* Another method. */
            v = boto[i];
            v.method = strcmp(v.method, "GET") ? "GET" : "DELETE";
            expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
            /* A query added. */
            v = boto[i];
            v.query = "acl";
            expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
            /* Another payload hash (the body it stands for swapped). */
            v = with_header(&boto[i], "X-Amz-Content-SHA256", "UNSIGNED-PAYLOAD");
            expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
            /* Another date, within the skew. */
            v = with_header(&boto[i], "X-Amz-Date", "20261202T080001Z");
            expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
            /* Skew: the signature is right but the clock is 15 minutes off. */
            expect_refused(k, &boto[i], T2026 + 901, "RequestTimeTooSkewed");
            expect_refused(k, &boto[i], T2026 - 901, "RequestTimeTooSkewed");
        } else {
            expect_refused(k, &boto[i], T2026 + 3601, "AccessDenied");
            v = boto[i];
            v.query = "X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=GWTESTKEY01%2F20261202%"
                      "2Frailio-1%2Fs3%2Faws4_request&X-Amz-Date=20261202T080000Z&X-Amz-Expires="
                      "3600&X-Amz-SignedHeaders=host&X-Amz-Signature="
                      "0000000000000000000000000000000000000000000000000000000000000000";
            expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
        }
        /* A signed header left out of the request. */
        v = boto[i];
        for (int j = 0; j < MAXH && v.h[j].name; j++)
            if (strcasecmp(v.h[j].name, "host") == 0)
                v.h[j].name = "X-Not-Host";
        expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
        (void)code;
    }
    rio_s3_keys_free(k);
}

TEST(wrong_secret_and_unknown_key)
{
    struct rio_s3_keys *k =
        keys_of("GWTESTKEY01 gw/test+secret=02\nAKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/"
                "bPxRfiCYEXAMPLEKEZ\n");
    struct rio_s3_keys *k2 = keys_of("SOMEONEELSE secret\n");

    for (size_t i = 0; i < NBOTO; i++) {
        expect_refused(k, &boto[i], T2026, "SignatureDoesNotMatch");
        expect_refused(k2, &boto[i], T2026, "InvalidAccessKeyId");
        /* The reason names the access key, never the secret. */
        T_NULL(strstr(rio_error_detail(), "secret"));
    }
    expect_refused(k, &aws_get_range, T2013, "SignatureDoesNotMatch");
    expect_refused(k, &aws_presigned, T2013, "SignatureDoesNotMatch");
    expect_refused(k, &aws_chunked, T2013, "SignatureDoesNotMatch");
    T_NULL(strstr(rio_error_detail(), "EXAMPLEKEZ"));
    rio_s3_keys_free(k);
    rio_s3_keys_free(k2);
}

TEST(malformed_authorization)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    static const struct {
        const char *auth, *code;
    } bad[] = {
        {"AWS AKIAIOSFODNN7EXAMPLE:frJIUN8DYpKDtOLCwo//yllqDzg=", "AuthorizationHeaderMalformed"},
        {"AWS4-HMAC-SHA256", "AuthorizationHeaderMalformed"},
        {"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request",
         "AuthorizationHeaderMalformed"},
        {AWS_CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date",
         "AuthorizationHeaderMalformed"},
        {AWS_CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature=abc",
         "SignatureDoesNotMatch"},
        {AWS_CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="
                  "34B48302E7B5FA45BDE8084F4B7868A86F0A534BC59DB6670ED5711EF69DC6F7",
         "SignatureDoesNotMatch"},
        {"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s4/aws4_request,"
         "SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="
         "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
         "AuthorizationHeaderMalformed"},
        {"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130525/us-east-1/s3/aws4_request,"
         "SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="
         "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
         "AuthorizationHeaderMalformed"},
        {"AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3,"
         "SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="
         "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
         "AuthorizationHeaderMalformed"},
        /* host not signed */
        {AWS_CRED ",SignedHeaders=x-amz-content-sha256;x-amz-date,Signature="
                  "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
         "AuthorizationHeaderMalformed"},
        /* the date not signed */
        {AWS_CRED ",SignedHeaders=host;x-amz-content-sha256,Signature="
                  "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
         "AuthorizationHeaderMalformed"},
        /* not sorted */
        {AWS_CRED ",SignedHeaders=x-amz-date;host;x-amz-content-sha256,Signature="
                  "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
         "AuthorizationHeaderMalformed"},
        {AWS_CRED ",SignedHeaders=host;;x-amz-date,Signature="
                  "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7",
         "AuthorizationHeaderMalformed"},
        {AWS_CRED ",SignedHeaders=host;x-amz-date,Signature=1,Signature=2",
         "AuthorizationHeaderMalformed"},
    };
    struct vec v;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        v = with_header(&aws_list, "Authorization", bad[i].auth);
        expect_refused(k, &v, T2013, bad[i].code);
    }
    /* Without x-amz-content-sha256 the empty payload's hash was signed:
     * that header is not what made these signatures. */
    v = with_header(&aws_put, "x-amz-content-sha256", "");
    v.h[4].name = "x-other";
    v.h[5].value =
        AWS_CRED ",SignedHeaders=date;host;x-amz-date;x-amz-storage-class,"
                 "Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd";
    expect_refused(k, &v, T2013, "SignatureDoesNotMatch");
    v = with_header(&aws_list, "x-amz-content-sha256", "not-a-hash");
    expect_refused(k, &v, T2013, "InvalidArgument");
    /* A date that is no date. */
    v = with_header(&aws_list, "x-amz-date", "2013-05-24T00:00:00Z");
    expect_refused(k, &v, T2013, "AccessDenied");
    /* An unknown access key in a well-formed header. */
    v = with_header(&aws_list, "Authorization",
                    "AWS4-HMAC-SHA256 Credential=NOSUCHKEY/20130524/us-east-1/s3/aws4_request,"
                    "SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="
                    "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7");
    expect_refused(k, &v, T2013, "InvalidAccessKeyId");
    rio_s3_keys_free(k);
}

TEST(anonymous_access)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct rio_s3_keys *ka = keys_of("GWTESTKEY01 s\n* - public,www\n");
    struct rio_s3_auth a;
    const char *code;
    struct vec v = {"GET", "/public/x", "", "", {{"Host", "h"}}};

    /* Off unless the keys file says so. */
    expect_refused(k, &v, T2026, "AccessDenied");
    T_EQ(verify(ka, &v, T2026, &a, &code), 0);
    T_EQ(a.anonymous, 1);
    T_STREQ(a.access_key, "");
    T_TRUE(rio_s3_user_may(ka, "", "public"));
    T_TRUE(rio_s3_user_may(ka, "", "www"));
    T_FALSE(rio_s3_user_may(ka, "", "bkt"));
    rio_s3_keys_free(k);
    rio_s3_keys_free(ka);
}

/* Unsigned requests with an aws-chunked body: the unsigned-trailer mode is
 * decoded (payload mode and trailer set), the signed modes need a
 * signature, a bad x-amz-trailer is refused; with the keys file's "*" line
 * (rio_s3_verify) and without keys (rio_s3_anon_payload, --s3-anonymous). */
TEST(anonymous_aws_chunked)
{
    struct rio_s3_keys *ka = keys_of("GWTESTKEY01 s\n* - public\n");
    struct rio_s3_auth a;
    const char *code;
    struct vec v = {"PUT",
                    "/public/x",
                    "",
                    "",
                    {{"Host", "h"},
                     {"x-amz-content-sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER"},
                     {"X-Amz-Trailer", "x-amz-checksum-CRC32"}}};
    struct rio_s3_req r = req_of(&v);

    T_EQ(verify(ka, &v, T2026, &a, &code), 0);
    T_EQ(a.anonymous, 1);
    T_EQ(a.payload_mode, RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER);
    T_STREQ(a.trailer, "x-amz-checksum-crc32");
    memset(&a, 0, sizeof(a));
    T_EQ(rio_s3_anon_payload(&r, &a, &code), 0);
    T_EQ(a.payload_mode, RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER);
    T_STREQ(a.trailer, "x-amz-checksum-crc32");
    /* No trailer announced: the mode still, no trailer to check. */
    v.h[2] = (struct rio_s3_hdr){"x-other", "1"};
    r = req_of(&v);
    memset(&a, 0, sizeof(a));
    T_EQ(rio_s3_anon_payload(&r, &a, &code), 0);
    T_STREQ(a.trailer, "");
    /* A bad trailer name. */
    v.h[2] = (struct rio_s3_hdr){"x-amz-trailer", "content-md5"};
    r = req_of(&v);
    T_LT(rio_s3_anon_payload(&r, &a, &code), 0);
    T_STREQ(code, "InvalidRequest");
    /* The signed modes without a signature. */
    v.h[1] = (struct rio_s3_hdr){"x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"};
    v.h[2] = (struct rio_s3_hdr){"x-other", "1"};
    r = req_of(&v);
    T_EQ(rio_s3_anon_payload(&r, &a, &code), -EACCES);
    T_STREQ(code, "AccessDenied");
    expect_refused(ka, &v, T2026, "AccessDenied");
    /* A plain body (a hex hash or UNSIGNED-PAYLOAD): unsigned, as before. */
    v.h[1] = (struct rio_s3_hdr){"x-amz-content-sha256", "UNSIGNED-PAYLOAD"};
    r = req_of(&v);
    T_EQ(rio_s3_anon_payload(&r, &a, &code), 0);
    T_EQ(a.payload_mode, RIO_S3_PAYLOAD_UNSIGNED);
    rio_s3_keys_free(ka);
}

TEST(canonical_forms)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct vec v;

    /* The query's parameter order on the wire does not matter: it is sorted. */
    v = aws_list;
    v.query = "prefix=J&max-keys=2";
    expect_ok(k, &v, T2013, "AKIAIOSFODNN7EXAMPLE");
    /* Encoded otherwise on the wire, the same parameters. */
    v.query = "prefix=%4A&max%2Dkeys=2";
    expect_ok(k, &v, T2013, "AKIAIOSFODNN7EXAMPLE");
    /* A path with '$' sent raw is canonicalised as %24. */
    v = aws_put;
    v.path = "/test$file.text";
    expect_ok(k, &v, T2013, "AKIAIOSFODNN7EXAMPLE");
    /* Lower-case hex in the path. */
    v = boto[1];
    v.path = "/bkt/k%c3%a9y/with%20spaces";
    expect_ok(k, &v, T2026, "GWTESTKEY01");
    /* Inner runs of blanks in a signed value are one space. */
    v = with_header(&aws_get_range, "Range", "  bytes=0-9  ");
    expect_ok(k, &v, T2013, "AKIAIOSFODNN7EXAMPLE");
    /* Header names in any case. */
    v = with_header(&aws_get_range, "RANGE", "bytes=0-9");
    expect_ok(k, &v, T2013, "AKIAIOSFODNN7EXAMPLE");
    /* A second Range header joins the first: no longer what was signed. */
    v = aws_get_range;
    v.h[5].name = "Range";
    v.h[5].value = "bytes=10-19";
    expect_refused(k, &v, T2013, "SignatureDoesNotMatch");
    rio_s3_keys_free(k);
}

TEST(bounds)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    static char longq[20000], longp[20000];
    struct vec v;

    memset(longq, 'a', sizeof(longq) - 1);
    v = aws_list;
    v.query = longq;
    expect_refused(k, &v, T2013, "AuthorizationQueryParametersError");
    v = aws_list;
    longp[0] = '/';
    memset(longp + 1, 'p', sizeof(longp) - 2);
    v.path = longp;
    expect_refused(k, &v, T2013, "InvalidRequest");
    /* 200 parameters. */
    for (int i = 0; i < 200; i++)
        memcpy(longq + 4 * i, "a=1&", 4);
    longq[800] = '\0';
    v = aws_list;
    v.query = longq;
    expect_refused(k, &v, T2013, "AuthorizationQueryParametersError");
    rio_s3_keys_free(k);
}

TEST(trailer_header_and_unsupported_modes)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct vec v = with_header(&aws_list, "x-amz-trailer", "x-amz-checksum-md4");

    expect_refused(k, &v, T2013, "InvalidRequest");
    v = with_header(&aws_list, "x-amz-content-sha256", "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD");
    expect_refused(k, &v, T2013, "NotImplemented");
    /* Each code's HTTP status, as S3 answers it. */
    T_EQ(rio_s3_status_of("NotImplemented"), 501);
    T_EQ(rio_s3_status_of("AuthorizationHeaderMalformed"), 400);
    T_EQ(rio_s3_status_of("AuthorizationQueryParametersError"), 400);
    T_EQ(rio_s3_status_of("XAmzContentSHA256Mismatch"), 400);
    T_EQ(rio_s3_status_of("SignatureDoesNotMatch"), 403);
    T_EQ(rio_s3_status_of("RequestTimeTooSkewed"), 403);
    T_EQ(rio_s3_status_of("AccessDenied"), 403);
    T_EQ(rio_s3_status_of(NULL), 403);
    rio_s3_keys_free(k);
}
