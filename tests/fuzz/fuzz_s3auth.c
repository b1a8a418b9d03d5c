/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/server/s3/sigv4v.c src/server/s3/sigv2v.c src/server/s3/keys.c */
/* FUZZ_SOURCES src/server/s3/bodycheck.c src/transport/s3/sign.c src/core/alloc.c */
/* FUZZ_SOURCES src/core/secret.c src/core/errors.c src/core/checksum.c src/core/crc.c */
/*
 * libFuzzer target for the S3 gateway's request verification, SigV4
 * (src/server/s3/sigv4v.c) and SigV2 (sigv2v.c, when the input is signed
 * so), and --s3-keys parsing (keys.c). The input is
 * cut at '\n' into: the Authorization header, the query, the path,
 * x-amz-date, x-amz-content-sha256, a Range header and x-amz-trailer (a
 * missing or empty field is a header not sent); every field is its own
 * exact-size allocation so a read past one is caught. The whole input is
 * also parsed as a keys file. Checked: a refusal always names an S3 code and
 * keeps no access key; an acceptance names a known user (or anonymous) and
 * a payload mode that exists. Seeds: AWS's signed examples (they verify, so
 * the fuzzer starts deep) and tests/fuzz/corpus/s3auth/.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "server/s3/auth.h"

#define NF 7
#define NOW 1369353600 /* the seeds' date */

static struct rio_s3_keys *keys;

static void keys_once(void)
{
    static const char text[] = "AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n"
                               "* - pub\n";
    unsigned line;
    const char *why;

    if (!keys && rio__s3_keys_parse(text, strlen(text), &keys, &line, &why) != 0)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const names[NF] = {
        "Authorization",        NULL,    NULL,           "x-amz-date",
        "x-amz-content-sha256", "Range", "x-amz-trailer"};
    char *f[NF] = {0};
    struct rio_s3_hdr h[NF + 1];
    struct rio_s3_req r = {"GET", "/", "", 0, h};
    struct rio_s3_auth a;
    struct rio_s3_keys *k2 = NULL;
    const char *p = (const char *)data, *end = p + size, *code, *why;
    unsigned line;
    int ret;

    keys_once();
    for (int i = 0; i < NF && p <= end; i++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
        f[i] = malloc(l + 1);
        if (!f[i])
            goto out;
        memcpy(f[i], p, l);
        f[i][l] = '\0';
        p += l + 1;
    }
    h[r.nheaders].name = "Host";
    h[r.nheaders++].value = "examplebucket.s3.amazonaws.com";
    for (int i = 0; i < NF; i++) {
        if (!names[i] || !f[i] || !f[i][0])
            continue;
        h[r.nheaders].name = names[i];
        h[r.nheaders++].value = f[i];
    }
    if (f[1])
        r.query = f[1];
    if (f[2] && f[2][0])
        r.path = f[2];

    code = NULL;
    ret = rio_s3_verify(keys, &r, NOW, &a, &code);
    if (ret < 0) {
        FUZZ_CHECK(code != NULL);
        FUZZ_CHECK(a.access_key[0] == '\0');
    } else {
        FUZZ_CHECK(ret == 0);
        FUZZ_CHECK(a.anonymous || strcmp(a.access_key, "AKIAIOSFODNN7EXAMPLE") == 0);
        FUZZ_CHECK(a.payload_mode >= RIO_S3_PAYLOAD_UNSIGNED &&
                   a.payload_mode <= RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER);
        FUZZ_CHECK(memchr(a.trailer, '\0', sizeof(a.trailer)) != NULL);
    }

    if (rio_s3_is_v2(&r)) {
        code = NULL;
        ret = rio_s3_verify_v2(keys, &r, r.path, NOW, &a, &code);
        if (ret < 0) {
            FUZZ_CHECK(code != NULL);
            FUZZ_CHECK(a.access_key[0] == '\0');
        } else {
            FUZZ_CHECK(ret == 0);
            FUZZ_CHECK(strcmp(a.access_key, "AKIAIOSFODNN7EXAMPLE") == 0);
            FUZZ_CHECK(a.payload_mode == RIO_S3_PAYLOAD_UNSIGNED);
        }
    }

    ret = rio__s3_keys_parse((const char *)data, size, &k2, &line, &why);
    FUZZ_CHECK(ret == 0 || why != NULL);
    rio_s3_keys_free(k2);
out:
    for (int i = 0; i < NF; i++)
        free(f[i]);
    return 0;
}

void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len))
{
#define CRED "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request"
    static const char *const seeds[] = {
        CRED ",SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature="
             "f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41\n\n/test.txt\n"
             "20130524T000000Z\n"
             "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
             "\nbytes=0-9\n",
        CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="
             "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7\nmax-keys=2&prefix=J"
             "\n/\n20130524T000000Z\n"
             "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
             "\n",
        "\nX-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-"
        "east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-"
        "SignedHeaders=host&X-Amz-Signature="
        "aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404\n/test.txt\n",
        CRED ",SignedHeaders=host;x-amz-content-sha256;x-amz-date;x-amz-trailer,Signature=00\n\n/"
             "\n20130524T000000Z\nSTREAMING-UNSIGNED-PAYLOAD-TRAILER\n\nx-amz-checksum-crc32\n",
        "\n\n/pub/x\n",
        /* SigV2: a header (dated by x-amz-date) and a presigned URL */
        "AWS AKIAIOSFODNN7EXAMPLE:+rB4ADkP0V1KOCpQK+wVbPqnJlo=\n\n/johnsmith/photos/puppy.jpg\n"
        "Tue, 27 Mar 2007 19:36:42 +0000\n",
        "\nuploadId=1&AWSAccessKeyId=AKIAIOSFODNN7EXAMPLE&Expires=1369440000&Signature="
        "lAxpX3Xzp5PogPe%2BFXjlGpQ2oN8%3D\n/johnsmith/photos/puppy.jpg\n",
        "AK s\nAK2 s2 a,b\n* - pub\n# c\n",
    };
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
        run((const uint8_t *)seeds[i], strlen(seeds[i]));
}
