/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The S3 gateway's aws-chunked decoder (src/server/s3/chunked.c) and body
 * digests (bodycheck.c). STREAMING-AWS4-HMAC-SHA256-PAYLOAD against AWS's
 * published example (a 64 KiB chunk, a 1 KiB chunk and the final one, with
 * their chunk signatures chained from the seed), fed whole, byte by byte
 * and in odd slices; then a changed byte, a swapped signature, a truncated
 * body, bytes after the end and malformed chunk lines, each refused.
 * STREAMING-UNSIGNED-PAYLOAD-TRAILER as botocore writes it, with its
 * x-amz-checksum-crc32 trailer, and a wrong trailer refused. The CRCs and
 * digests against their published check values.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "t.h"
#include "transport/s3/sign.h"

#include <openssl/evp.h>

#define SIG1 "ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
#define SIG2 "0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497"
#define SIG3 "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"

/* The example's signing key, seed and scope (what rio_s3_verify hands over
 * for that request; test_s3_sigv4v checks the seed). */
static void aws_auth(struct rio_s3_auth *a)
{
    memset(a, 0, sizeof(*a));
    a->payload_mode = RIO_S3_PAYLOAD_STREAMING;
    memcpy(a->seed_signature, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
           65);
    memcpy(a->amz_date, "20130524T000000Z", 17);
    snprintf(a->scope, sizeof(a->scope), "20130524/us-east-1/s3/aws4_request");
}

static int signing_key(struct rio_s3_auth *a)
{
    void *m = EVP_MD_CTX_new();
    int ret = rio__s3_signing_key(m, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524",
                                  "us-east-1", "s3", a->signing_key);
    EVP_MD_CTX_free(m);
    return ret;
}

/* AWS's example bodies: 65536 and 1024 bytes of 'a' under the chunk
 * signatures s1 and s2, then the final chunk's line with s3 and tail. */
static size_t example_body(char *b, size_t cap, const char *s1, const char *s2, const char *s3,
                           const char *tail)
{
    size_t o = 0;

    o += (size_t)snprintf(b + o, cap - o, "10000;chunk-signature=%s\r\n", s1);
    memset(b + o, 'a', 65536);
    o += 65536;
    o += (size_t)snprintf(b + o, cap - o, "\r\n400;chunk-signature=%s\r\n", s2);
    memset(b + o, 'a', 1024);
    o += 1024;
    o += (size_t)snprintf(b + o, cap - o, "\r\n0;chunk-signature=%s\r\n%s", s3, tail);
    return o;
}

static size_t aws_body(char *b, size_t cap)
{
    return example_body(b, cap, SIG1, SIG2, SIG3, "\r\n");
}

/* Feed body in slices of step bytes (out capped at outcap per call):
 * the first error (its code in *code), else the payload length. */
static ssize_t decode(const struct rio_s3_auth *a, const char *body, size_t n, size_t step,
                      size_t outcap, char *payload, int *done, const char **code)
{
    struct rio_s3_chunked *d;
    size_t i = 0, total = 0;

    *code = NULL;
    T_EQ(rio_s3_chunked_new(a, &d), 0);
    while (i < n) {
        size_t take = n - i < step ? n - i : step, used = 0;
        ssize_t got = rio_s3_chunked_feed(d, body + i, take, &used, payload + total, outcap, code);
        if (got < 0) {
            rio_s3_chunked_free(d);
            return got;
        }
        T_LE(used, take);
        T_TRUE(used > 0 || got > 0);
        total += (size_t)got;
        i += used;
    }
    *done = rio_s3_chunked_done(d);
    T_EQ(rio_s3_chunked_total(d), total);
    rio_s3_chunked_free(d);
    return (ssize_t)total;
}

TEST(aws_streaming_example)
{
    static char body[70000], payload[70000];
    static const size_t steps[] = {70000, 1, 7, 100, 4096, 65537};
    struct rio_s3_auth a;
    const char *code;
    size_t n;
    int done;

    aws_auth(&a);
    T_EQ(signing_key(&a), 0);
    n = aws_body(body, sizeof(body));
    T_EQ(n, 66824); /* the example's Content-Length */
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        memset(payload, 0, sizeof(payload));
        done = 0;
        T_EQ(decode(&a, body, n, steps[s], 1000, payload, &done, &code), 66560);
        T_EQ(done, 1);
        for (size_t i = 0; i < 66560; i++)
            if (payload[i] != 'a')
                T_FAIL("payload byte %zu", i);
    }
}

TEST(aws_streaming_tampered)
{
    static char body[70000], bad[70000], payload[70000];
    struct rio_s3_auth a;
    const char *code;
    size_t n;
    int done = 0;

    aws_auth(&a);
    T_EQ(signing_key(&a), 0);
    n = aws_body(body, sizeof(body));

    /* One payload byte changed, in the first chunk and in the second. */
    memcpy(bad, body, n);
    bad[1000] = 'b';
    T_EQ(decode(&a, bad, n, 4096, 4096, payload, &done, &code), -EACCES);
    T_STREQ(code, "SignatureDoesNotMatch");
    memcpy(bad, body, n);
    bad[n - 200] = 'b';
    T_EQ(decode(&a, bad, n, 4096, 4096, payload, &done, &code), -EACCES);
    T_STREQ(code, "SignatureDoesNotMatch");
    /* One signature character changed (the final chunk's). */
    memcpy(bad, body, n);
    bad[n - 10] = bad[n - 10] == '0' ? '1' : '0';
    T_EQ(decode(&a, bad, n, 4096, 4096, payload, &done, &code), -EACCES);
    T_STREQ(code, "SignatureDoesNotMatch");
    /* Another seed: the chain breaks at the first chunk. */
    a.seed_signature[0] = '5';
    T_EQ(decode(&a, body, n, n, n, payload, &done, &code), -EACCES);
    aws_auth(&a);
    T_EQ(signing_key(&a), 0);
    /* Another signing key (another secret). */
    a.signing_key[0] ^= 1;
    T_EQ(decode(&a, body, n, n, n, payload, &done, &code), -EACCES);
    T_EQ(signing_key(&a), 0);
    /* Cut before the final chunk: decodes what came, never done. */
    T_EQ(decode(&a, body, n - 86, 4096, 4096, payload, &done, &code), 66560);
    T_EQ(done, 0);
    /* Cut inside the final CRLF. */
    T_EQ(decode(&a, body, n - 1, 4096, 4096, payload, &done, &code), 66560);
    T_EQ(done, 0);
    /* Bytes after the final chunk. */
    memcpy(bad, body, n);
    bad[n] = 'x';
    T_EQ(decode(&a, bad, n + 1, 4096, 4096, payload, &done, &code), -EINVAL);
    T_STREQ(code, "InvalidArgument");
}

/* One chunk line (then its data and CRLF) that must be refused. */
static void bad_line(const struct rio_s3_auth *a, const char *body, const char *want)
{
    char payload[64];
    const char *code;
    int done = 0;

    T_LT(decode(a, body, strlen(body), 3, sizeof(payload), payload, &done, &code), 0);
    T_STREQ(code, want);
}

TEST(malformed_chunk_lines)
{
    struct rio_s3_auth a;
    static char longline[400];
    struct rio_s3_chunked *d;
    const char *code;
    char out[8];
    size_t used;

    aws_auth(&a);
    T_EQ(signing_key(&a), 0);
    bad_line(&a, "x;chunk-signature=" SIG1 "\r\n", "InvalidRequest");
    bad_line(&a, "+10;chunk-signature=" SIG1 "\r\n", "InvalidRequest");
    bad_line(&a, " 10;chunk-signature=" SIG1 "\r\n", "InvalidRequest");
    bad_line(&a, "10 ;chunk-signature=" SIG1 "\r\n", "InvalidRequest");
    bad_line(&a, "100000000000;chunk-signature=" SIG1 "\r\n", "InvalidRequest");
    bad_line(&a, "10;chunk-signature=" SIG1 "\n", "InvalidRequest");
    bad_line(&a, "10\r\n", "InvalidRequest");
    bad_line(&a, "10;chunk-signature=abc\r\n", "InvalidRequest");
    bad_line(
        &a,
        "10;chunk-signature=AD80C730A21E5B8D04586A2213DD63B9A0E99E0E2307B0ADE35A65485A288648\r\n",
        "InvalidRequest");
    bad_line(&a, "10;chunk-signatur=" SIG1 "x\r\n", "InvalidRequest");
    /* A chunk carrying another chunk's signature. */
    bad_line(&a, "1;chunk-signature=" SIG1 "\r\naXY", "SignatureDoesNotMatch");
    memset(longline, '0', sizeof(longline) - 1);
    bad_line(&a, longline, "InvalidRequest");
    /* A decoder that failed stays failed. */
    T_EQ(rio_s3_chunked_new(&a, &d), 0);
    T_LT(rio_s3_chunked_feed(d, "zz\r\n", 4, &used, out, sizeof(out), &code), 0);
    code = NULL;
    T_LT(rio_s3_chunked_feed(d, "0", 1, &used, out, sizeof(out), &code), 0);
    T_STREQ(code, "InvalidRequest");
    rio_s3_chunked_free(d);
    /* Only for aws-chunked requests. */
    a.payload_mode = RIO_S3_PAYLOAD_SIGNED;
    T_EQ(rio_s3_chunked_new(&a, &d), RIO_EINVAL);
}

static const char boto_trailer[] = "a\r\n1234567891\r\na\r\n2345678912\r\n7\r\n3456789\r\n0\r\n"
                                   "x-amz-checksum-crc32:Td9uWQ==\r\n\r\n";

TEST(unsigned_trailer_as_botocore_writes_it)
{
    struct rio_s3_auth a;
    char payload[64], bad[sizeof(boto_trailer)];
    const char *code;
    int done = 0;

    memset(&a, 0, sizeof(a));
    a.payload_mode = RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
    snprintf(a.trailer, sizeof(a.trailer), "x-amz-checksum-crc32");
    for (size_t step = 1; step < sizeof(boto_trailer); step += 5) {
        T_EQ(decode(&a, boto_trailer, strlen(boto_trailer), step, 64, payload, &done, &code), 27);
        T_EQ(done, 1);
        T_MEMEQ(payload, "123456789123456789123456789", 27);
    }
    /* A payload byte changed: the trailer's CRC no longer matches. */
    memcpy(bad, boto_trailer, sizeof(bad));
    bad[4] = '9';
    T_EQ(decode(&a, bad, strlen(bad), 7, 64, payload, &done, &code), -EINVAL);
    T_STREQ(code, "BadDigest");
    /* Another checksum than x-amz-trailer announced. */
    snprintf(a.trailer, sizeof(a.trailer), "x-amz-checksum-crc32c");
    T_EQ(decode(&a, boto_trailer, strlen(boto_trailer), 7, 64, payload, &done, &code), -EINVAL);
    T_STREQ(code, "InvalidRequest");
    /* Announced but missing. */
    T_EQ(decode(&a, "1\r\nx\r\n0\r\n\r\n", 11, 2, 64, payload, &done, &code), -EINVAL);
    /* Not announced: no trailer line may come, the body just ends. */
    a.trailer[0] = '\0';
    T_EQ(decode(&a, "1\r\nx\r\n0\r\n\r\n", 11, 2, 64, payload, &done, &code), 1);
    T_EQ(done, 1);
    T_EQ(decode(&a, boto_trailer, strlen(boto_trailer), 7, 64, payload, &done, &code), -EINVAL);
    /* A value that is no CRC32. */
    snprintf(a.trailer, sizeof(a.trailer), "x-amz-checksum-crc32");
    T_EQ(decode(&a, "1\r\nx\r\n0\r\nx-amz-checksum-crc32:Td9uWQ=\r\n\r\n", 39, 4, 64, payload,
                &done, &code),
         -EINVAL);
    T_STREQ(code, "InvalidDigest");
}

/* Each digest of "123456789" against its published check value. */
TEST(body_digests)
{
    static const struct {
        const char *name, *value;
    } ok[] = {
        {"x-amz-checksum-crc32", "y/Q5Jg=="},
        {"x-amz-checksum-crc32c", "4waSgw=="},
        {"x-amz-checksum-crc64nvme", "rosUhgp5mIg="},
        {"x-amz-checksum-sha1", "98O8HYCOBHMq32eZZczDTKeuNEE="},
        {"x-amz-checksum-sha256", "FeKw08M4keuw8e9gnsQZQgwg4yDOlMZfvIwzEkSOsiU="},
        {"Content-MD5", "JfnnlDI7RTiF9RgfG2JNCw=="},
        {"x-amz-content-sha256",
         "15e2b0d3c33891ebb0f1ef609ec419420c20e320ce94c65fbc8c3312448eb225"},
    };
    struct rio_s3_check *c;
    const char *code;

    T_EQ(rio__crc32(0, "123456789", 9), 0xcbf43926u);
    T_EQ(rio__crc64nvme(0, "123456789", 9), 0xae8b14860a799888ull);
    /* In pieces, the same CRC. */
    T_EQ(rio__crc32(rio__crc32(0, "1234", 4), "56789", 5), 0xcbf43926u);
    /* CRC64/NVME eight bytes a step and byte by byte agree, at any split. */
    {
        uint8_t buf[1000];
        uint64_t whole;
        for (size_t i = 0; i < sizeof(buf); i++)
            buf[i] = (uint8_t)(i * 7 + 3);
        whole = rio__crc64nvme(0, buf, sizeof(buf));
        for (size_t cut = 0; cut <= 17; cut++) {
            uint64_t acc = 0;
            for (size_t o = 0; o < sizeof(buf); o += cut + 1)
                acc = rio__crc64nvme(acc, buf + o,
                                     sizeof(buf) - o < cut + 1 ? sizeof(buf) - o : cut + 1);
            T_EQ(acc, whole);
        }
        T_EQ(rio__crc64nvme(0, "123456789123456789", 18),
             rio__crc64nvme(rio__crc64nvme(0, "123456789", 9), "123456789", 9));
    }
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        T_EQ(rio_s3_check_new(ok[i].name, ok[i].value, &c, &code), 0);
        T_EQ(rio_s3_check_update(c, "1234", 4), 0);
        T_EQ(rio_s3_check_update(c, "56789", 5), 0);
        T_EQ(rio_s3_check_done(c, &code), 0);
        rio_s3_check_free(c);
        T_EQ(rio_s3_check_new(ok[i].name, ok[i].value, &c, &code), 0);
        T_EQ(rio_s3_check_update(c, "123456780", 9), 0);
        T_EQ(rio_s3_check_done(c, &code), -EINVAL);
        T_STREQ(code, i == 6 ? "XAmzContentSHA256Mismatch" : "BadDigest");
        rio_s3_check_free(c);
    }
    /* Values that are not digests of that kind. */
    T_EQ(rio_s3_check_new("x-amz-checksum-crc32", "y/Q5Jg=", &c, &code), RIO_EINVAL);
    T_STREQ(code, "InvalidDigest");
    T_EQ(rio_s3_check_new("x-amz-checksum-crc32", "y/Q5Jgx=", &c, &code), RIO_EINVAL);
    T_EQ(rio_s3_check_new("Content-MD5", "JfnnlDI7RTiF9RgfG2JNCw", &c, &code), RIO_EINVAL);
    T_EQ(rio_s3_check_new("Content-MD5", "!fnnlDI7RTiF9RgfG2JNCw==", &c, &code), RIO_EINVAL);
    T_EQ(rio_s3_check_new("x-amz-content-sha256", "15E2", &c, &code), RIO_EINVAL);
    T_STREQ(code, "InvalidArgument");
    T_EQ(rio_s3_check_new("x-amz-checksum-md4", "AAAA", &c, &code), RIO_EINVAL);
    T_STREQ(code, "InvalidRequest");
}

/* AWS's published example of STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER
 * ("Signature calculations ... with trailing headers"): the same 64 KiB and
 * 1 KiB of 'a' under another seed, then the final chunk, the CRC32C trailer
 * and its trailer signature. */
#define TSEED "106e2a8a18243abcf37539882f36619c00e2dfc72633413f02d3b74544bfeb8e"
#define TSIG1 "b474d8862b1487a5145d686f57f013e54db672cee1c953b3010fb58501ef5aa2"
#define TSIG2 "1c1344b170168f8e65b41376b44b20fe354e373826ccbbe2c1d40a8cae51e5c7"
#define TSIG3 "2ca2aba2005185cf7159c6277faf83795951dd77a3a99e6e65d5c9f85863f992"
#define TTRSIG "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435"

static size_t trailer_body(char *b, size_t cap, const char *trailer, const char *trsig)
{
    char tail[200];

    snprintf(tail, sizeof(tail), "%s\r\nx-amz-trailer-signature:%s\r\n\r\n", trailer, trsig);
    return example_body(b, cap, TSIG1, TSIG2, TSIG3, tail);
}

TEST(aws_signed_trailer_example)
{
    static char body[70000], payload[70000];
    struct rio_s3_auth a;
    const char *code;
    size_t n;
    int done = 0;

    aws_auth(&a);
    T_EQ(signing_key(&a), 0);
    a.payload_mode = RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER;
    memcpy(a.seed_signature, TSEED, 65);
    snprintf(a.trailer, sizeof(a.trailer), "x-amz-checksum-crc32c");
    n = trailer_body(body, sizeof(body), "x-amz-checksum-crc32c:sOO8/Q==", TTRSIG);
    for (size_t step = 1; step < 70000; step = step * 3 + 1) {
        T_EQ(decode(&a, body, n, step, 4096, payload, &done, &code), 66560);
        T_EQ(done, 1);
    }
    /* The trailer's value changed: its signature no longer matches (the
     * CRC would not either). */
    n = trailer_body(body, sizeof(body), "x-amz-checksum-crc32c:sOO8/A==", TTRSIG);
    T_LT(decode(&a, body, n, 4096, 4096, payload, &done, &code), 0);
    /* Another trailer signature. */
    n = trailer_body(body, sizeof(body), "x-amz-checksum-crc32c:sOO8/Q==",
                     "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e436");
    T_EQ(decode(&a, body, n, 4096, 4096, payload, &done, &code), -EACCES);
    T_STREQ(code, "SignatureDoesNotMatch");
    /* No trailer signature at all. */
    n = trailer_body(body, sizeof(body), "x-amz-checksum-crc32c:sOO8/Q==", TTRSIG);
    memcpy(body + n - 2 - 64 - 2 - strlen("x-amz-trailer-signature:"), "\r\n", 2);
    n -= 64 + 2 + strlen("x-amz-trailer-signature:");
    T_EQ(decode(&a, body, n, 4096, 4096, payload, &done, &code), -EINVAL);
    T_STREQ(code, "InvalidRequest");
}
