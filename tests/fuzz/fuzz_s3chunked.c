/* SPDX-License-Identifier: Apache-2.0 */
/* clang-format off */
/* FUZZ_SOURCES src/server/s3/chunked.c src/server/s3/bodycheck.c src/transport/s3/sign.c src/core/alloc.c src/core/errors.c src/core/checksum.c src/core/crc.c */
/* clang-format on */
/*
 * libFuzzer target for the S3 gateway's aws-chunked decoder
 * (src/server/s3/chunked.c). The first input byte picks the mode (signed
 * chunks with AWS's example key and seed, the unsigned-trailer form, the
 * signed-trailer form; a CRC32 trailer announced or not) and the slice size
 * the body is fed in; the rest is the body. Checked: no call consumes more than it was given or
 * writes more than its cap, progress is made until an error, an error sticks, the payload count
 * adds up, and "done" only after a final chunk. Seeds: AWS's example body shape and botocore's
 * trailer body, and tests/fuzz/corpus/s3chunked/.
 */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "server/s3/auth.h"
#include "transport/s3/sign.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static struct rio_s3_auth a;
    static int ready;
    struct rio_s3_chunked *d;
    uint8_t out[64];
    size_t i = 1, step, total = 0;
    const char *code;
    int failed = 0;

    if (size < 1)
        return 0;
    if (!ready) {
        void *m = EVP_MD_CTX_new();
        if (!m || rio__s3_signing_key(m, "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "20130524",
                                      "us-east-1", "s3", a.signing_key))
            abort();
        EVP_MD_CTX_free(m);
        memcpy(a.seed_signature, "4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9",
               65);
        memcpy(a.amz_date, "20130524T000000Z", 17);
        strcpy(a.scope, "20130524/us-east-1/s3/aws4_request");
        ready = 1;
    }
    static const int modes[3] = {RIO_S3_PAYLOAD_STREAMING,
                                 RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER,
                                 RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER};
    a.payload_mode = modes[data[0] % 3];
    strcpy(a.trailer,
           data[0] & 4 && a.payload_mode != RIO_S3_PAYLOAD_STREAMING ? "x-amz-checksum-crc32" : "");
    step = 1 + (data[0] >> 3);
    if (rio_s3_chunked_new(&a, &d) != 0)
        abort();
    while (i < size) {
        size_t take = size - i < step ? size - i : step, used = 12345;
        uint8_t *in = malloc(take);
        ssize_t got;

        if (!in)
            break;
        memcpy(in, data + i, take);
        code = NULL;
        got = rio_s3_chunked_feed(d, in, take, &used, out, 1 + (i % sizeof(out)), &code);
        free(in);
        if (got < 0) {
            FUZZ_CHECK(code != NULL);
            FUZZ_CHECK(!rio_s3_chunked_done(d));
            code = NULL;
            FUZZ_CHECK(rio_s3_chunked_feed(d, "0", 1, &used, out, sizeof(out), &code) < 0);
            FUZZ_CHECK(code != NULL);
            failed = 1;
            break;
        }
        FUZZ_CHECK(used <= take);
        FUZZ_CHECK((size_t)got <= 1 + (i % sizeof(out)));
        FUZZ_CHECK(used > 0 || got > 0);
        total += (size_t)got;
        i += used;
    }
    FUZZ_CHECK(failed || rio_s3_chunked_total(d) == total);
    rio_s3_chunked_free(d);
    return 0;
}

void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len))
{
    static const char *const seeds[] = {
        ("\x48"
         "1;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648"
         "\r\na\r\n0;chunk-signature="
         "b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
         "\r\n\r\n"),
        ("\x0d"
         "a\r\n1234567891\r\na\r\n2345678912\r\n7\r\n3456789\r\n0\r\n"
         "x-amz-checksum-crc32:Td9uWQ==\r\n\r\n"),
        ("\x01"
         "3\r\nabc\r\n0\r\n\r\n"),
        ("\x0e"
         "3;chunk-signature=ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648\r\nabc"
         "\r\n0;chunk-signature=b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9"
         "\r\nx-amz-checksum-crc32:NSRBwg==\r\nx-amz-trailer-signature:"
         "d81f82fc3505edab99d459891051a732e8730629a2e4a59689829ca17fe2e435\r\n\r\n"),
    };
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
        run((const uint8_t *)seeds[i], strlen(seeds[i]));
}
