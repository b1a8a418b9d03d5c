/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The S3 gateway's Signature Version 2 verification
 * (src/server/s3/sigv2v.c) against requests signed by others: AWS's
 * published SigV2 examples (an object GET, a PUT with Content-Type, a
 * listing whose parameters are not signed, an upload with duplicated and
 * mixed-case x-amz-meta-* headers and Content-MD5, a DELETE dated by
 * x-amz-date) and signatures worked out apart (Python's hmac) for a
 * presigned URL and for subresources. Then what must be refused, each with
 * its S3 error: a tampered path, header, subresource or signature, another
 * secret, an unknown key, skew, an expired presigned URL, malformed
 * Authorization headers and parameters, aws-chunked bodies.
 */
#include <string.h>

#include "core/internal.h"
#include "railio.h"
#include "s3auth_vec.h"
#include "server/s3/auth.h"
#include "t.h"

static const char keys_text[] = "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
                                "GWTESTKEY01 gw/test+secret=01 bkt\n"
                                "OTHERKEY othersecret *\n";

static int verify(const struct rio_s3_keys *k, const struct vec *v, int64_t now,
                  struct rio_s3_auth *a, const char **code)
{
    struct rio_s3_req r = req_of(v);
    T_EQ(rio_s3_is_v2(&r), 1);
    return rio_s3_verify_v2(k, &r, v->path, now, a, code);
}

static void expect_ok(const struct rio_s3_keys *k, const struct vec *v, int64_t now, const char *ak)
{
    struct rio_s3_auth a;
    const char *code = "unset";

    T_EQ(verify(k, v, now, &a, &code), 0);
    T_NULL(code);
    T_STREQ(a.access_key, ak);
    T_EQ(a.payload_mode, RIO_S3_PAYLOAD_UNSIGNED);
}

static void expect_refused(const struct rio_s3_keys *k, const struct vec *v, int64_t now,
                           const char *want)
{
    struct rio_s3_auth a;
    const char *code = NULL;

    T_LT(verify(k, v, now, &a, &code), 0);
    T_NOTNULL(code);
    T_STREQ(code, want);
    T_STREQ(a.access_key, "");
}

#define T_GET 1175024202    /* Tue, 27 Mar 2007 19:36:42 +0000 */
#define T_PUT 1175030145    /* Tue, 27 Mar 2007 21:15:45 +0000 */
#define T_LIST 1175024561   /* Tue, 27 Mar 2007 19:42:41 +0000 */
#define T_UPLOAD 1175029568 /* Tue, 27 Mar 2007 21:06:08 +0000 */
#define T_DELETE 1175030426 /* Tue, 27 Mar 2007 21:20:26 +0000 */
#define T2026 1796198400    /* Wed, 02 Dec 2026 08:00:00 GMT */

static const struct vec aws_get = {
    "GET",
    "/johnsmith/photos/puppy.jpg",
    "",
    "",
    {{"Host", "johnsmith.s3.amazonaws.com"},
     {"Date", "Tue, 27 Mar 2007 19:36:42 +0000"},
     {"Authorization", "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU="}}};

static const struct vec aws_put = {
    "PUT",
    "/johnsmith/photos/puppy.jpg",
    "",
    "",
    {{"Content-Type", "image/jpeg"},
     {"Content-Length", "94328"},
     {"Host", "johnsmith.s3.amazonaws.com"},
     {"Date", "Tue, 27 Mar 2007 21:15:45 +0000"},
     {"Authorization", "AWS AKIAIOSFODNN7EXAMPLE:MyyxeRY7whkBe+bq8fHCL/2kKUg="}}};

/* A listing: prefix, max-keys and marker are not signed in SigV2. */
static const struct vec aws_list = {
    "GET",
    "/johnsmith/",
    "prefix=photos&max-keys=50&marker=puppy",
    "",
    {{"User-Agent", "Mozilla/5.0"},
     {"Host", "johnsmith.s3.amazonaws.com"},
     {"Date", "Tue, 27 Mar 2007 19:42:41 +0000"},
     {"Authorization", "AWS AKIAIOSFODNN7EXAMPLE:htDYFYduRNen8P9ZfE/s9SuKy0U="}}};

/* Content-MD5, mixed-case x-amz-* names, one of them twice (joined by ','
 * in the order sent), a blank before a value. */
static const struct vec aws_upload = {
    "PUT",
    "/static.johnsmith.net/db-backup.dat.gz",
    "",
    "",
    {{"User-Agent", "curl/7.15.5"},
     {"Host", "static.johnsmith.net:8080"},
     {"Date", "Tue, 27 Mar 2007 21:06:08 +0000"},
     {"x-amz-acl", "public-read"},
     {"content-type", "application/x-download"},
     {"Content-MD5", "4gJE4saaMU4BqNR0kLY+lw=="},
     {"X-Amz-Meta-ReviewedBy", "joe@johnsmith.net"},
     {"X-Amz-Meta-ReviewedBy", "jane@johnsmith.net"},
     {"X-Amz-Meta-FileChecksum", "0x02661779"},
     {"X-Amz-Meta-ChecksumAlgorithm", " crc32"},
     {"Content-Disposition", "attachment; filename=database.dat"},
     {"Content-Encoding", "gzip"},
     {"Content-Length", "5913339"},
     {"Authorization", "AWS AKIAIOSFODNN7EXAMPLE:ilyl83RwaSoYIEdixDQcA4OnAnc="}}};

/* x-amz-date makes the Date line empty (it is signed among x-amz-*). */
static const struct vec aws_delete = {
    "DELETE",
    "/johnsmith/photos/puppy.jpg",
    "",
    "",
    {{"User-Agent", "dotnet"},
     {"Host", "s3.amazonaws.com"},
     {"Date", "Tue, 27 Mar 2007 21:20:27 +0000"},
     {"x-amz-date", "Tue, 27 Mar 2007 21:20:26 +0000"},
     {"Authorization", "AWS AKIAIOSFODNN7EXAMPLE:R4dJ53KECjStyBO5iTBJZ4XVOaI="}}};

static const struct vec presigned = {"GET",
                                     "/johnsmith/photos/puppy.jpg",
                                     "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1141889120&"
                                     "Signature=fScKGHCDI0NY5E7CYp9Vc8VKMbY%3D",
                                     "",
                                     {{"Host", "johnsmith.s3.amazonaws.com"}}};

/* Subresources are signed (decoded, sorted); other parameters are not. */
static const struct vec subres = {
    "GET",
    "/bkt/a%20b",
    "uploadId=abc&max-parts=2&response-content-type=text%2Fplain",
    "",
    {{"Date", "Wed, 02 Dec 2026 08:00:00 GMT"},
     {"Authorization", "AWS GWTESTKEY01:di+pxvHJUr9bs4b5qLaHtwJuY/k="}}};

static const struct vec uploads = {
    "POST",
    "/bkt/k",
    "uploads",
    "",
    {{"Date", "Wed, 02 Dec 2026 08:00:00 GMT"},
     {"Authorization", "AWS GWTESTKEY01:QrFwlK8ENMOJODfNoVg4Wjf9uqA="}}};

TEST(aws_examples_verify)
{
    struct rio_s3_keys *k = keys_of(keys_text);

    expect_ok(k, &aws_get, T_GET, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &aws_put, T_PUT + 60, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &aws_list, T_LIST, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &aws_upload, T_UPLOAD, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &aws_delete, T_DELETE, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &subres, T2026, "GWTESTKEY01");
    expect_ok(k, &uploads, T2026, "GWTESTKEY01");
    /* The listing's unsigned parameters may change (SigV2 signs none). */
    {
        struct vec v = aws_list;
        v.query = "prefix=other";
        expect_ok(k, &v, T_LIST, "AKIAIOSFODNN7EXAMPLE");
    }
    rio_s3_keys_free(k);
}

TEST(presigned_url)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct vec v;

    expect_ok(k, &presigned, 1141889120 - 3600, "AKIAIOSFODNN7EXAMPLE");
    expect_ok(k, &presigned, 1141889120, "AKIAIOSFODNN7EXAMPLE");
    expect_refused(k, &presigned, 1141889121, "AccessDenied"); /* expired */
    {
        struct rio_s3_req r = req_of(&presigned);
        struct rio_s3_auth a;
        const char *code;
        T_LT(rio_s3_verify_v2(k, &r, presigned.path, 1141889121, &a, &code), 0);
        T_STREQ(a.message, "Request has expired");
    }
    v = presigned;
    v.query = "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1141889121&"
              "Signature=fScKGHCDI0NY5E7CYp9Vc8VKMbY%3D"; /* a later expiry */
    expect_refused(k, &v, 1141889000, "SignatureDoesNotMatch");
    v.query = "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1141889120&"
              "Signature=fScKGHCDI0NY5E7CYp9Vc8VKMbY%3D&Signature=x";
    expect_refused(k, &v, 1141889000, "AccessDenied");
    v.query = "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=11418891e0&"
              "Signature=fScKGHCDI0NY5E7CYp9Vc8VKMbY%3D";
    expect_refused(k, &v, 1141889000, "AccessDenied");
    v.query = "AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Signature=fScKGHCDI0NY5E7CYp9Vc8VKMbY%3D";
    expect_refused(k, &v, 1141889000, "AccessDenied");
    v = presigned;
    v.path = "/johnsmith/photos/kitten.jpg";
    expect_refused(k, &v, 1141889000, "SignatureDoesNotMatch");
    /* Both a header and a presigned query. */
    v = with_header(&presigned, "Authorization",
                    "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
    expect_refused(k, &v, 1141889000, "InvalidArgument");
    rio_s3_keys_free(k);
}

TEST(tampered_or_wrong_refused)
{
    struct rio_s3_keys *k = keys_of(keys_text);
    struct vec v;

    v = aws_get;
    v.path = "/johnsmith/photos/kitten.jpg";
    expect_refused(k, &v, T_GET, "SignatureDoesNotMatch");
    v = aws_get;
    v.method = "DELETE";
    expect_refused(k, &v, T_GET, "SignatureDoesNotMatch");
    /* An x-amz-* header added (a copy source, metadata): signed, so caught. */
    v = with_header(&aws_put, "x-amz-copy-source", "/johnsmith/secret");
    expect_refused(k, &v, T_PUT, "SignatureDoesNotMatch");
    v = with_header(&aws_put, "Content-Type", "text/html");
    expect_refused(k, &v, T_PUT, "SignatureDoesNotMatch");
    v = with_header(&aws_upload, "Content-MD5", "1B2M2Y8AsgTpgAmY7PhCfg==");
    expect_refused(k, &v, T_UPLOAD, "SignatureDoesNotMatch");
    /* A subresource changed or added. */
    v = subres;
    v.query = "uploadId=abd&max-parts=2&response-content-type=text%2Fplain";
    expect_refused(k, &v, T2026, "SignatureDoesNotMatch");
    v = aws_get;
    v.query = "acl";
    expect_refused(k, &v, T_GET, "SignatureDoesNotMatch");
    /* Another user's secret, an unknown key, a signature cut short. */
    v = with_header(&aws_get, "Authorization", "AWS OTHERKEY:bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
    expect_refused(k, &v, T_GET, "SignatureDoesNotMatch");
    v = with_header(&aws_get, "Authorization", "AWS NOSUCHKEY:bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
    expect_refused(k, &v, T_GET, "InvalidAccessKeyId");
    v = with_header(&aws_get, "Authorization", "AWS AKIAIOSFODNN7EXAMPLE:bWq2s1WEIj+Ydj0vQ697zp");
    expect_refused(k, &v, T_GET, "SignatureDoesNotMatch");
    v = with_header(&aws_get, "Authorization", "AWS AKIAIOSFODNN7EXAMPLE");
    expect_refused(k, &v, T_GET, "InvalidArgument");
    v = with_header(&aws_get, "Authorization", "AWS :bWq2s1WEIj+Ydj0vQ697zp+IXMU=");
    expect_refused(k, &v, T_GET, "InvalidArgument");
    /* The clock: 15 minutes either way. */
    expect_ok(k, &aws_get, T_GET + 900, "AKIAIOSFODNN7EXAMPLE");
    expect_refused(k, &aws_get, T_GET + 901, "RequestTimeTooSkewed");
    expect_refused(k, &aws_get, T_GET - 901, "RequestTimeTooSkewed");
    /* No date, or one that is not a date. */
    v = with_header(&aws_get, "Date", "yesterday");
    expect_refused(k, &v, T_GET, "AccessDenied");
    v = aws_get;
    v.h[1].name = "X-Other";
    expect_refused(k, &v, T_GET, "AccessDenied");
    /* aws-chunked needs SigV4's chunk signatures. */
    v = with_header(&aws_put, "x-amz-content-sha256", "STREAMING-AWS4-HMAC-SHA256-PAYLOAD");
    expect_refused(k, &v, T_PUT, "InvalidRequest");
    rio_s3_keys_free(k);
}

TEST(is_v2)
{
    struct rio_s3_req r = {"GET", "/b/k", "", 0, NULL};
    struct rio_s3_hdr h[1] = {{"Authorization", "AWS4-HMAC-SHA256 Credential=x"}};

    T_EQ(rio_s3_is_v2(&r), 0);
    r.query = "AWSAccessKeyId=a&Signature=b&Expires=1";
    T_EQ(rio_s3_is_v2(&r), 1);
    r.query = "AWSAccessKeyId=a";
    T_EQ(rio_s3_is_v2(&r), 0);
    r.query = "X-Amz-Signature=a&X-Amz-Credential=b";
    T_EQ(rio_s3_is_v2(&r), 0);
    r.query = "";
    r.headers = h;
    r.nheaders = 1;
    T_EQ(rio_s3_is_v2(&r), 0);
    h[0].value = "AWS AK:SIG";
    T_EQ(rio_s3_is_v2(&r), 1);
}
