/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/server/s3/postform.c src/server/s3/xml.c src/server/s3/sigv4v.c */
/* FUZZ_SOURCES src/server/s3/keys.c src/server/s3/bodycheck.c src/transport/s3/sign.c */
/* FUZZ_SOURCES src/core/alloc.c src/core/secret.c src/core/errors.c src/core/checksum.c */
/* FUZZ_SOURCES src/core/crc.c */
/*
 * libFuzzer target for POST Object's form and policy
 * (src/server/s3/postform.c). The first input byte picks the mode and the
 * slice size. Form mode: the rest is a multipart/form-data body (boundary
 * "XyZ"), fed in slices; checked: the file's bytes handed on never exceed
 * what was fed, an error sticks, "done" only after the file began, and a
 * form whose file began is then verified (no signature: anonymous, with
 * whatever policy field it carries). Policy mode: the rest is a policy's
 * JSON, base64-encoded into an otherwise valid anonymous form and
 * verified; checked: an acceptance has a sane content-length-range.
 */
#include <openssl/evp.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "server/s3/auth.h"
#include "server/s3/s3.h"

struct sink {
    size_t got;
    int begun;
};

static int on_begin(void *arg, const char *filename, const char *ctype)
{
    struct sink *s = arg;
    FUZZ_CHECK(strlen(filename) <= RIO_S3_FORM_NAME_MAX && strlen(ctype) <= RIO_S3_FORM_NAME_MAX);
    s->begun++;
    return 0;
}

static int on_data(void *arg, const void *p, size_t n)
{
    struct sink *s = arg;
    (void)p;
    FUZZ_CHECK(s->begun == 1);
    s->got += n;
    return 0;
}

static void verify(const struct rio_s3_form *f)
{
    struct rio_s3_post_auth a;
    const char *code = NULL;
    char msg[256];
    int r = rio_s3_post_verify(NULL, f, "bkt", NULL, 1764892800, 1, &a, &code, msg, sizeof(msg));

    if (r == 0)
        FUZZ_CHECK(a.len_min <= a.len_max);
    else
        FUZZ_CHECK(code != NULL && strlen(msg) < sizeof(msg));
}

static void form_mode(const uint8_t *data, size_t size, size_t step)
{
    struct sink s = {0, 0};
    struct rio_s3_form_cb cb = {&s, on_begin, on_data};
    struct rio_s3_form *f;
    const char *why;
    int failed = 0;

    if (rio_s3_form_new("multipart/form-data; boundary=XyZ", &cb, &f) != 0)
        abort();
    for (size_t i = 0; i < size; i += step) {
        size_t take = size - i < step ? size - i : step;
        uint8_t *in = malloc(take);
        if (!in)
            break;
        memcpy(in, data + i, take);
        int r = rio_s3_form_feed(f, in, take, &why);
        free(in);
        if (r < 0) {
            FUZZ_CHECK(why != NULL);
            FUZZ_CHECK(rio_s3_form_feed(f, "x", 1, &why) < 0);
            failed = 1;
            break;
        }
    }
    FUZZ_CHECK(s.got <= size);
    FUZZ_CHECK(!rio_s3_form_done(f) || s.begun == 1);
    FUZZ_CHECK(!failed || !rio_s3_form_done(f));
    if (s.begun)
        verify(f);
    rio_s3_form_free(f);
}

static void policy_mode(const uint8_t *data, size_t size)
{
    static const char head[] = "--XyZ\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nk\r\n"
                               "--XyZ\r\nContent-Disposition: form-data; name=\"policy\"\r\n\r\n";
    static const char tail[] = "\r\n--XyZ\r\nContent-Disposition: form-data; name=\"file\"\r\n\r\n"
                               "data\r\n--XyZ--\r\n";
    struct rio_s3_form *f;
    const char *why;
    size_t n = size > 12000 ? 12000 : size; /* base64 within a field's bound */
    char *body = malloc(sizeof(head) + 4 * ((n + 2) / 3) + sizeof(tail) + 1);
    size_t o = 0;

    if (!body)
        return;
    memcpy(body, head, sizeof(head) - 1);
    o = sizeof(head) - 1;
    o += (size_t)EVP_EncodeBlock((unsigned char *)body + o, data, (int)n);
    memcpy(body + o, tail, sizeof(tail) - 1);
    o += sizeof(tail) - 1;
    if (rio_s3_form_new("multipart/form-data; boundary=XyZ", NULL, &f) != 0)
        abort();
    if (rio_s3_form_feed(f, body, o, &why) == 0 && rio_s3_form_done(f))
        verify(f);
    rio_s3_form_free(f);
    free(body);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    if (data[0] & 1)
        policy_mode(data + 1, size - 1);
    else
        form_mode(data + 1, size - 1, 1 + (data[0] >> 1));
    return 0;
}

void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len))
{
    static const char *const seeds[] = {
        ("\x10"
         "--XyZ\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\nup/${filename}\r\n"
         "--XyZ\r\nContent-Disposition: form-data; name=\"Content-Type\"\r\n\r\nimage/png\r\n"
         "--XyZ\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.png\"\r\n"
         "Content-Type: image/png\r\n\r\n\r\n--XyZ-\r\n--Xy\r\n--XyZ--\r\n"),
        ("\x01"
         "{\"expiration\": \"2030-01-01T00:00:00.000Z\", \"conditions\": [{\"bucket\": \"bkt\"}, "
         "[\"starts-with\", \"$key\", \"\"], [\"eq\", \"$Content-Type\", "
         "\"a\\u00e9\\ud83d\\ude00\"], "
         "[\"content-length-range\", 0, \"1048576\"]]}"),
        ("\x01"
         "{\"expiration\": \"2030-01-01T00:00:00Z\", \"conditions\": []}"),
    };
    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
        run((const uint8_t *)seeds[i], strlen(seeds[i]));
}
