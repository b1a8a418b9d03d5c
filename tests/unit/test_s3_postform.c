/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * POST Object's form and policy (src/server/s3/postform.c). The form: the
 * fields before the file kept, the file's bytes handed on exactly (bytes
 * that look like the start of a delimiter included), whatever the slices
 * the body comes in (1 byte to all of it); fields after the file ignored;
 * each malformed or oversized form refused. The policy: a SigV4 form whose
 * signature is computed here with OpenSSL's HMAC directly (not the
 * gateway's signer) accepted with its content-length-range; a wrong
 * signature, an unknown key, an expired policy, a condition not met, a
 * field no condition names, another bucket, each refused with S3's code;
 * malformed policies refused as InvalidPolicyDocument; SigV2 forms, on and
 * off; an unsigned form is anonymous.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "server/s3/s3.h"
#include "t.h"

#define AK "AKIAIOSFODNN7EXAMPLE"
#define SK "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
#define B "----railioFormBoundary7MA4YWxk"
#define CT "multipart/form-data; boundary=" B
#define NOW 1764892800 /* 2025-12-05T00:00:00Z */

struct body {
    char *p;
    size_t n, cap;
};

static void put(struct body *b, const void *p, size_t n)
{
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2;
        b->p = realloc(b->p, b->cap);
        T_NOTNULL(b->p);
    }
    memcpy(b->p + b->n, p, n);
    b->n += n;
}

static void puts_(struct body *b, const char *s)
{
    put(b, s, strlen(s));
}

static void field(struct body *b, const char *name, const char *value)
{
    puts_(b, "--" B "\r\nContent-Disposition: form-data; name=\"");
    puts_(b, name);
    puts_(b, "\"\r\n\r\n");
    puts_(b, value);
    puts_(b, "\r\n");
}

static void file_part(struct body *b, const void *p, size_t n)
{
    puts_(b, "--" B "\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a b.png\"\r\n"
             "Content-Type: image/png\r\n\r\n");
    put(b, p, n);
    puts_(b, "\r\n");
}

static void end(struct body *b)
{
    puts_(b, "--" B "--\r\n");
}

struct sink {
    struct body got;
    char filename[256], ctype[256];
    int begun;
    int refuse; /* file_begin fails with this when non-zero */
};

static int on_begin(void *arg, const char *filename, const char *ctype)
{
    struct sink *s = arg;
    s->begun++;
    snprintf(s->filename, sizeof(s->filename), "%s", filename);
    snprintf(s->ctype, sizeof(s->ctype), "%s", ctype);
    return s->refuse ? s->refuse : 0;
}

static int on_data(void *arg, const void *p, size_t n)
{
    struct sink *s = arg;
    T_EQ(s->begun, 1);
    put(&s->got, p, n);
    return 0;
}

/* Feed b in slices of step bytes: 0 or the first error (*why). */
static int feed(struct rio_s3_form *f, const struct body *b, size_t step, const char **why)
{
    for (size_t i = 0; i < b->n; i += step) {
        size_t take = b->n - i < step ? b->n - i : step;
        int r = rio_s3_form_feed(f, b->p + i, take, why);
        if (r < 0)
            return r;
    }
    return 0;
}

/* The file's bytes: random, with what looks like the start of a
 * delimiter at places (CR LF "--" and part of the boundary), and a whole
 * boundary not after CR LF. */
static void tricky(struct body *file)
{
    static const char *const bits[] = {"\r\n--",   "\r\n-",       "\r",
                                       "\r\n--" B, "--" B "\r\n", "\r\n\r\n"};
    uint32_t x = 12345;

    for (int i = 0; i < 3000; i++) {
        x = x * 1103515245u + 12345u;
        char c = (char)(x >> 16);
        put(file, &c, 1);
        if (i % 500 == 7) {
            const char *s = bits[(i / 500) % 6];
            size_t n = strlen(s);
            if (strcmp(s, "\r\n--" B) == 0)
                n -= 1; /* all of the delimiter but its last byte */
            put(file, s, n);
        }
    }
}

TEST(fields_then_the_file_in_any_slices)
{
    static const size_t steps[] = {1, 2, 3, 5, 7, 64, 1000, 4096, 1 << 20};
    struct body file = {0}, b = {0};

    tricky(&file);
    puts_(&b, "preamble a client may send\r\n");
    field(&b, "key", "user/${filename}");
    field(&b, "Content-Type", "image/png");
    field(&b, "x-amz-meta-empty", "");
    field(&b, "X-Amz-Meta-Multi", "line one\r\nline two");
    file_part(&b, file.p, file.n);
    field(&b, "after", "ignored");
    end(&b);
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        struct sink k = {0};
        struct rio_s3_form_cb cb = {&k, on_begin, on_data};
        struct rio_s3_form *f;
        const char *why = NULL, *v;
        T_EQ(rio_s3_form_new(CT, &cb, &f), 0);
        T_EQ(feed(f, &b, steps[s], &why), 0);
        T_EQ(rio_s3_form_done(f), 1);
        T_EQ(k.begun, 1);
        T_STREQ(k.filename, "a b.png");
        T_STREQ(k.ctype, "image/png");
        T_EQ(k.got.n, file.n);
        T_EQ(memcmp(k.got.p, file.p, file.n), 0);
        T_EQ(rio_s3_form_nfields(f), 4);
        T_STREQ(rio_s3_form_field(f, "KEY"), "user/${filename}");
        T_STREQ(rio_s3_form_field(f, "content-type"), "image/png");
        T_STREQ(rio_s3_form_field(f, "x-amz-meta-empty"), "");
        T_STREQ(rio_s3_form_field(f, "x-amz-meta-multi"), "line one\r\nline two");
        T_STREQ(rio_s3_form_field_at(f, 3, &v), "x-amz-meta-multi"); /* lower-cased */
        T_NULL(rio_s3_form_field(f, "after"));
        rio_s3_form_free(f);
        free(k.got.p);
    }
    free(file.p);
    free(b.p);
}

TEST(content_types)
{
    struct rio_s3_form *f;

    T_EQ(rio_s3_form_new("multipart/form-data; boundary=\"" B "\"", NULL, &f), 0);
    rio_s3_form_free(f);
    T_EQ(rio_s3_form_new("Multipart/Form-Data; charset=utf-8; boundary=" B, NULL, &f), 0);
    rio_s3_form_free(f);
    T_EQ(rio_s3_form_new("multipart/form-data", NULL, &f), RIO_EINVAL);
    T_EQ(rio_s3_form_new("multipart/form-data; boundary=", NULL, &f), RIO_EINVAL);
    T_EQ(rio_s3_form_new("multipart/mixed; boundary=" B, NULL, &f), RIO_EINVAL);
    T_EQ(rio_s3_form_new("application/x-www-form-urlencoded", NULL, &f), RIO_EINVAL);
    T_EQ(rio_s3_form_new("multipart/form-data; boundary=\"unterminated", NULL, &f), RIO_EINVAL);
    T_EQ(rio_s3_form_new("multipart/form-data; boundary=a\x01"
                         "b",
                         NULL, &f),
         RIO_EINVAL);
    /* 71 characters: over RFC 2046's 70 */
    T_EQ(rio_s3_form_new("multipart/form-data; boundary="
                         "12345678901234567890123456789012345678901234567890123456789012345678901",
                         NULL, &f),
         RIO_EINVAL);
    T_NULL(f);
}

/* A form that must be refused (RIO_EINVAL), fed whole and byte by byte. */
static void refused(const struct body *b, const char *why_has)
{
    for (size_t step = 1; step <= b->n; step = step == 1 ? b->n : b->n + 1) {
        struct sink k = {0};
        struct rio_s3_form_cb cb = {&k, on_begin, on_data};
        struct rio_s3_form *f;
        const char *why = NULL;
        T_EQ(rio_s3_form_new(CT, &cb, &f), 0);
        if (feed(f, b, step, &why) != RIO_EINVAL)
            T_FAIL("a form that must be refused for \"%s\" was taken (slices of %zu)", why_has,
                   step);
        T_NOTNULL(why);
        if (!strstr(why, why_has))
            T_FAIL("refused with \"%s\", not for \"%s\"", why, why_has);
        /* it sticks */
        T_EQ(rio_s3_form_feed(f, "x", 1, &why), RIO_EINVAL);
        T_EQ(rio_s3_form_done(f), 0);
        rio_s3_form_free(f);
        free(k.got.p);
    }
}

TEST(malformed_forms_refused)
{
    struct body b = {0};
    char *big;

    /* no delimiter in the first KiB */
    for (int i = 0; i < 120; i++)
        puts_(&b, "0123456789");
    refused(&b, "no boundary");
    b.n = 0;
    /* the end before the file */
    field(&b, "key", "k");
    end(&b);
    refused(&b, "before its file");
    b.n = 0;
    /* a part without Content-Disposition, one not form-data, one without
     * a name, a header line without a colon, a header with a control byte */
    static const char *const bad_parts[][2] = {
        {"Content-Type: text/plain\r\n\r\nx\r\n", "no Content-Disposition"},
        {"Content-Disposition: attachment; name=\"key\"\r\n\r\nx\r\n", "not form-data"},
        {"Content-Disposition: form-data; filename=\"x\"\r\n\r\nx\r\n", "no name"},
        {"Content-Disposition: form-data; name=\"\"\r\n\r\nx\r\n", "no name"},
        {"Content-Disposition: form-data; name=\"key\r\n\r\nx\r\n", "no name"},
        {"Content-Disposition form-data; name=\"key\"\r\n\r\nx\r\n", "NAME: VALUE"},
        {"Content-Disposition: form-data; name=\"k\x01\"\r\n\r\nx\r\n", "control character"},
        {"Content-Disposition: form-data; name=\"a\"\r\nContent-Disposition: form-data; "
         "name=\"b\"\r\n\r\nx\r\n",
         "two Content-Disposition"},
        {"\r\nx\r\n", "no headers"},
    };
    for (size_t i = 0; i < sizeof(bad_parts) / sizeof(bad_parts[0]); i++) {
        b.n = 0;
        puts_(&b, "--" B "\r\n");
        puts_(&b, bad_parts[i][0]);
        file_part(&b, "f", 1);
        end(&b);
        refused(&b, bad_parts[i][1]);
    }
    /* junk after a delimiter */
    b.n = 0;
    puts_(&b, "--" B "junk\r\n");
    refused(&b, "not followed by CRLF");
    /* a field's value one byte over the bound */
    big = malloc(RIO_S3_FORM_VALUE_MAX + 2);
    memset(big, 'v', RIO_S3_FORM_VALUE_MAX + 1);
    big[RIO_S3_FORM_VALUE_MAX + 1] = '\0';
    b.n = 0;
    field(&b, "policy", big);
    end(&b);
    refused(&b, "too long");
    /* at the bound it is taken */
    {
        struct rio_s3_form *f;
        const char *why;
        big[RIO_S3_FORM_VALUE_MAX] = '\0';
        b.n = 0;
        field(&b, "policy", big);
        file_part(&b, "f", 1);
        end(&b);
        T_EQ(rio_s3_form_new(CT, NULL, &f), 0);
        T_EQ(feed(f, &b, 7, &why), 0);
        T_EQ(rio_s3_form_done(f), 1);
        T_EQ(strlen(rio_s3_form_field(f, "policy")), RIO_S3_FORM_VALUE_MAX);
        rio_s3_form_free(f);
    }
    free(big);
    /* a header block over its bound */
    b.n = 0;
    puts_(&b, "--" B "\r\nContent-Disposition: form-data; name=\"a\"\r\n");
    for (int i = 0; i < 500; i++)
        puts_(&b, "X-Pad: 0123456789\r\n");
    puts_(&b, "\r\nx\r\n");
    refused(&b, "headers are too long");
    /* more fields than the bound, a field twice, a NUL in a field */
    b.n = 0;
    for (int i = 0; i <= RIO_S3_FORM_FIELDS_MAX; i++) {
        char name[16];
        snprintf(name, sizeof(name), "x-ignore-%d", i);
        field(&b, name, "v");
    }
    end(&b);
    refused(&b, "too many form fields");
    b.n = 0;
    field(&b, "key", "a");
    field(&b, "Key", "b");
    end(&b);
    refused(&b, "given twice");
    b.n = 0;
    puts_(&b, "--" B "\r\nContent-Disposition: form-data; name=\"key\"\r\n\r\na");
    put(&b, "\0", 1);
    puts_(&b, "b\r\n");
    end(&b);
    refused(&b, "NUL");
    free(b.p);
}

TEST(truncated_or_refused_file)
{
    struct body b = {0};
    struct sink k = {0};
    struct rio_s3_form_cb cb = {&k, on_begin, on_data};
    struct rio_s3_form *f;
    const char *why;

    field(&b, "key", "k");
    file_part(&b, "0123456789", 10);
    end(&b);
    /* cut inside the file: not done, and no byte past the cut handed on */
    T_EQ(rio_s3_form_new(CT, &cb, &f), 0);
    size_t cut = b.n - strlen("--" B "--\r\n") - 2 - 4; /* 6 of the 10 bytes sent */
    T_EQ(rio_s3_form_feed(f, b.p, cut, &why), 0);
    T_EQ(rio_s3_form_file_seen(f), 1);
    T_EQ(rio_s3_form_done(f), 0);
    T_TRUE(k.got.n <= 6);
    rio_s3_form_free(f);
    /* the caller refuses the file: the error comes back and sticks */
    free(k.got.p);
    memset(&k, 0, sizeof(k));
    k.refuse = -EACCES;
    T_EQ(rio_s3_form_new(CT, &cb, &f), 0);
    T_EQ(rio_s3_form_feed(f, b.p, b.n, &why), -EACCES);
    T_EQ(rio_s3_form_feed(f, b.p, 1, &why), -EACCES);
    T_EQ(k.got.n, 0);
    rio_s3_form_free(f);
    free(b.p);
}

/* ------------------------------------------------------------ policies */

static char *b64(const char *s)
{
    size_t n = strlen(s);
    char *out = malloc(4 * ((n + 2) / 3) + 1);
    EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)s, (int)n);
    return out;
}

/* SigV4's signature of a POST policy, with OpenSSL's HMAC directly. */
static void sig_v4(const char *secret, const char *date, const char *policy_b64, char hex[65])
{
    unsigned char k[32], t[32];
    unsigned int l = 32;
    char ks[300];

    snprintf(ks, sizeof(ks), "AWS4%s", secret);
    HMAC(EVP_sha256(), ks, (int)strlen(ks), (const unsigned char *)date, 8, k, &l);
    HMAC(EVP_sha256(), k, 32, (const unsigned char *)"us-east-1", 9, t, &l);
    HMAC(EVP_sha256(), t, 32, (const unsigned char *)"s3", 2, k, &l);
    HMAC(EVP_sha256(), k, 32, (const unsigned char *)"aws4_request", 12, t, &l);
    HMAC(EVP_sha256(), t, 32, (const unsigned char *)policy_b64, strlen(policy_b64), k, &l);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", k[i]);
}

static struct rio_s3_keys *keys(void)
{
    static const char text[] = AK " " SK "\nAKOTHER otherothersecret bkt2\n";
    struct rio_s3_keys *k;
    unsigned line;
    const char *why;

    T_EQ(rio__s3_keys_parse(text, strlen(text), &k, &line, &why), 0);
    return k;
}

#define POLICY_OK                                                                                  \
    "{ \"expiration\": \"2025-12-30T12:00:00.000Z\",\n  \"conditions\": [\n"                       \
    "    {\"bucket\": \"sigv4examplebucket\"},\n"                                                  \
    "    [\"starts-with\", \"$key\", \"user/user1/\"],\n"                                          \
    "    {\"acl\": \"public-read\"},\n"                                                            \
    "    [\"starts-with\", \"$Content-Type\", \"image/\"],\n"                                      \
    "    {\"x-amz-meta-uuid\": \"14365123651274\"},\n"                                             \
    "    [\"starts-with\", \"$x-amz-meta-tag\", \"\"],\n"                                          \
    "    [\"content-length-range\", 10, 1048576],\n"                                               \
    "    {\"x-amz-credential\": \"" AK "/20251204/us-east-1/s3/aws4_request\"},\n"                 \
    "    {\"x-amz-algorithm\": \"AWS4-HMAC-SHA256\"},\n"                                           \
    "    [\"eq\", \"$x-amz-date\", \"20251204T000000Z\"]\n  ]\n}"

/* A SigV4 form over policy (JSON text), signed with secret; extra fields
 * (name, value pairs, NULL-ended) after the standard ones. */
static struct rio_s3_form *v4_form(const char *policy, const char *secret, const char *key,
                                   const char *const *extra)
{
    struct body b = {0};
    struct rio_s3_form *f;
    char sig[65], *p64 = b64(policy);
    const char *why;

    sig_v4(secret, "20251204", p64, sig);
    field(&b, "key", key);
    field(&b, "acl", "public-read");
    field(&b, "Content-Type", "image/jpeg");
    field(&b, "x-amz-meta-uuid", "14365123651274");
    field(&b, "x-amz-meta-tag", "");
    field(&b, "X-Amz-Credential", AK "/20251204/us-east-1/s3/aws4_request");
    field(&b, "X-Amz-Algorithm", "AWS4-HMAC-SHA256");
    field(&b, "X-Amz-Date", "20251204T000000Z");
    field(&b, "Policy", p64);
    field(&b, "X-Amz-Signature", sig);
    for (; extra && extra[0]; extra += 2)
        field(&b, extra[0], extra[1]);
    file_part(&b, "0123456789", 10);
    end(&b);
    T_EQ(rio_s3_form_new(CT, NULL, &f), 0);
    T_EQ(rio_s3_form_feed(f, b.p, b.n, &why), 0);
    T_EQ(rio_s3_form_done(f), 1);
    free(b.p);
    free(p64);
    return f;
}

/* Verify f against bucket at NOW: the return, and *code / msg. */
static int verify(struct rio_s3_keys *k, struct rio_s3_form *f, const char *bucket, int sigv2,
                  struct rio_s3_post_auth *a, const char **code, char *msg)
{
    int r = rio_s3_post_verify(k, f, bucket, NULL, NOW, sigv2, a, code, msg, 256);
    rio_s3_form_free(f);
    return r;
}

static void expect_refused(struct rio_s3_keys *k, struct rio_s3_form *f, const char *bucket,
                           int ret, const char *code_want, const char *msg_has)
{
    struct rio_s3_post_auth a;
    const char *code = NULL;
    char msg[256];

    T_EQ(verify(k, f, bucket, 1, &a, &code, msg), ret);
    T_NOTNULL(code);
    T_STREQ(code, code_want);
    if (!strstr(msg, msg_has))
        T_FAIL("message \"%s\" lacks \"%s\"", msg, msg_has);
    T_EQ(a.access_key[0], '\0'); /* nothing of a refused form is kept */
}

TEST(sigv4_policy_accepted)
{
    struct rio_s3_keys *k = keys();
    struct rio_s3_post_auth a;
    const char *code = NULL;
    char msg[256];

    T_EQ(verify(k, v4_form(POLICY_OK, SK, "user/user1/${filename}", NULL), "sigv4examplebucket", 1,
                &a, &code, msg),
         0);
    T_STREQ(a.access_key, AK);
    T_EQ(a.anonymous, 0);
    T_EQ(a.len_min, 10);
    T_EQ(a.len_max, 1048576);
    /* the x-ignore- fields need no condition */
    static const char *const ign[] = {"x-ignore-me", "anything", NULL};
    T_EQ(verify(k, v4_form(POLICY_OK, SK, "user/user1/x", ign), "sigv4examplebucket", 1, &a, &code,
                msg),
         0);
    rio_s3_keys_free(k);
}

TEST(sigv4_policy_refused)
{
    struct rio_s3_keys *k = keys();
    const char *bkt = "sigv4examplebucket";
    static const char *const extra[] = {"x-amz-meta-more", "1", NULL};

    expect_refused(k, v4_form(POLICY_OK, "not the secret", "user/user1/a", NULL), bkt, -EACCES,
                   "SignatureDoesNotMatch", "signature");
    expect_refused(k, v4_form(POLICY_OK, SK, "user/user2/a", NULL), bkt, -EACCES, "AccessDenied",
                   "Policy Condition failed: [\"starts-with\", \"$key\", \"user/user1/\"]");
    expect_refused(k, v4_form(POLICY_OK, SK, "user/user1/a", NULL), "otherbucket", -EACCES,
                   "AccessDenied", "\"$bucket\"");
    expect_refused(k, v4_form(POLICY_OK, SK, "user/user1/a", extra), bkt, -EACCES, "AccessDenied",
                   "Extra input fields: x-amz-meta-more");
    {
        char exp[sizeof(POLICY_OK)];
        strcpy(exp, POLICY_OK);
        memcpy(strstr(exp, "2025-12-30"), "2025-12-04", 10); /* before NOW */
        expect_refused(k, v4_form(exp, SK, "user/user1/a", NULL), bkt, -EACCES, "AccessDenied",
                       "Policy expired");
    }
    /* the credential of a user the key file does not have */
    {
        struct body b = {0};
        struct rio_s3_form *f;
        const char *why;
        char *p64 = b64(POLICY_OK);
        field(&b, "key", "user/user1/a");
        field(&b, "x-amz-credential", "AKNOBODY/20251204/us-east-1/s3/aws4_request");
        field(&b, "x-amz-algorithm", "AWS4-HMAC-SHA256");
        field(&b, "x-amz-date", "20251204T000000Z");
        field(&b, "policy", p64);
        field(&b, "x-amz-signature",
              "0000000000000000000000000000000000000000000000000000000000000000");
        file_part(&b, "0123456789", 10);
        end(&b);
        T_EQ(rio_s3_form_new(CT, NULL, &f), 0);
        T_EQ(rio_s3_form_feed(f, b.p, b.n, &why), 0);
        expect_refused(k, f, bkt, -EACCES, "InvalidAccessKeyId", "does not exist");
        free(b.p);
        free(p64);
    }
    rio_s3_keys_free(k);
}

/* A SigV2 form (AWSAccessKeyId, signature: base64 HMAC-SHA1 of the
 * policy's base64 p64). */
static struct rio_s3_form *v2_form_b64(const char *p64, const char *secret, const char *key)
{
    struct body b = {0};
    struct rio_s3_form *f;
    unsigned char mac[20];
    unsigned int ml = 20;
    char sig[29];
    const char *why;

    HMAC(EVP_sha1(), secret, (int)strlen(secret), (const unsigned char *)p64, strlen(p64), mac,
         &ml);
    EVP_EncodeBlock((unsigned char *)sig, mac, 20);
    field(&b, "key", key);
    field(&b, "AWSAccessKeyId", AK);
    field(&b, "policy", p64);
    field(&b, "signature", sig);
    file_part(&b, "0123456789", 10);
    end(&b);
    T_EQ(rio_s3_form_new(CT, NULL, &f), 0);
    T_EQ(rio_s3_form_feed(f, b.p, b.n, &why), 0);
    free(b.p);
    return f;
}

static struct rio_s3_form *v2_form(const char *policy, const char *secret, const char *key)
{
    char *p64 = b64(policy);
    struct rio_s3_form *f = v2_form_b64(p64, secret, key);
    free(p64);
    return f;
}

TEST(malformed_policies_refused)
{
    static const char *const bad[] = {
        "",
        "[]",
        "{\"expiration\": \"2025-12-30T12:00:00Z\"}",
        "{\"conditions\": []}",
        "{\"expiration\": \"2025-12-30\", \"conditions\": []}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": []} x",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [], \"extra\": 1}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"expiration\": \"2025-12-30T12:00:00Z\", "
        "\"conditions\": []}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[\"gt\", \"$key\", \"a\"]]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[\"eq\", \"key\", \"a\"]]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[\"eq\", \"$key\"]]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [{\"key\": 1}]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [{\"a\": \"1\", \"b\": "
        "\"2\"}]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[\"content-length-range\", 5, "
        "1]]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[\"content-length-range\", "
        "-1, "
        "1]]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[\"content-length-range\", "
        "1.5, "
        "2]]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[\"content-length-range\", 1, "
        "99999999999999999999]]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [{\"key\": \"a\\u0000b\"}]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [{\"key\": \"\\ud800\"}]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [{\"key\": \"\\x\"}]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [{\"key\": \"a\nb\"}]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[[\"eq\"]]]}",
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [{\"key\": \"a\"},]}",
        /* two ranges no size meets (found by fuzz_s3post) */
        "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [[\"content-length-range\", 2, "
        "2], [\"content-length-range\", 1, 1], {\"key\": \"a\"}]}",
    };
    struct rio_s3_keys *k = keys();

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *p64 = b64(bad[i]);
        const char *pol = p64[0] ? p64 : "=";
        struct rio_s3_form *f = v2_form_b64(pol, SK, "a");
        struct rio_s3_post_auth a;
        const char *code = NULL;
        char msg[256];
        /* signed: the policy itself is what is refused */
        T_EQ(verify(k, f, "bkt", 1, &a, &code, msg), RIO_EINVAL);
        T_NOTNULL(code);
        T_STREQ(code, "InvalidPolicyDocument");
        free(p64);
    }
    rio_s3_keys_free(k);
}

#define POLICY_V2                                                                                  \
    "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": [{\"bucket\": \"bkt\"}, "          \
    "[\"starts-with\", \"$key\", \"up/\"]]}"

TEST(sigv2_and_anonymous_forms)
{
    struct rio_s3_keys *k = keys();
    struct rio_s3_post_auth a;
    const char *code = NULL;
    char msg[256];
    struct body b = {0};
    struct rio_s3_form *f;
    const char *why;

    T_EQ(verify(k, v2_form(POLICY_V2, SK, "up/x"), "bkt", 1, &a, &code, msg), 0);
    T_STREQ(a.access_key, AK);
    T_EQ(a.len_max, UINT64_MAX); /* no content-length-range */
    expect_refused(k, v2_form(POLICY_V2, "wrong", "up/x"), "bkt", -EACCES, "SignatureDoesNotMatch",
                   "signature");
    expect_refused(k, v2_form(POLICY_V2, SK, "down/x"), "bkt", -EACCES, "AccessDenied",
                   "Policy Condition failed");
    T_EQ(verify(k, v2_form(POLICY_V2, SK, "up/x"), "bkt", 0, &a, &code, msg), RIO_EINVAL);
    T_STREQ(code, "InvalidRequest"); /* --s3-sigv2 off */
    /* no signature fields: anonymous, no policy needed */
    field(&b, "key", "k");
    file_part(&b, "0", 1);
    end(&b);
    T_EQ(rio_s3_form_new(CT, NULL, &f), 0);
    T_EQ(rio_s3_form_feed(f, b.p, b.n, &why), 0);
    T_EQ(verify(k, f, "bkt", 1, &a, &code, msg), 0);
    T_EQ(a.anonymous, 1);
    /* no key field */
    b.n = 0;
    field(&b, "acl", "private");
    file_part(&b, "0", 1);
    end(&b);
    T_EQ(rio_s3_form_new(CT, NULL, &f), 0);
    T_EQ(rio_s3_form_feed(f, b.p, b.n, &why), 0);
    expect_refused(k, f, "bkt", RIO_EINVAL, "InvalidArgument", "field named 'key'");
    free(b.p);
    rio_s3_keys_free(k);
}

TEST(content_type_list_starts_with)
{
    static const char pol[] = "{\"expiration\": \"2025-12-30T12:00:00Z\", \"conditions\": "
                              "[[\"starts-with\", \"$Content-Type\", \"image/\"], "
                              "[\"starts-with\", \"$key\", \"\"]]}";
    struct rio_s3_keys *k = keys();
    static const char *const vals[][2] = {
        {"image/png, image/jpeg", "ok"}, {"image/png,text/html", "no"}, {"text/html", "no"}};

    for (int i = 0; i < 3; i++) {
        struct body b = {0};
        struct rio_s3_form *f;
        unsigned char mac[20];
        unsigned int ml = 20;
        char sig[29], *p64 = b64(pol);
        const char *why, *code = NULL;
        struct rio_s3_post_auth a;
        char msg[256];
        HMAC(EVP_sha1(), SK, (int)strlen(SK), (const unsigned char *)p64, strlen(p64), mac, &ml);
        EVP_EncodeBlock((unsigned char *)sig, mac, 20);
        field(&b, "key", "k");
        field(&b, "AWSAccessKeyId", AK);
        field(&b, "policy", p64);
        field(&b, "signature", sig);
        field(&b, "Content-Type", vals[i][0]);
        file_part(&b, "0", 1);
        end(&b);
        T_EQ(rio_s3_form_new(CT, NULL, &f), 0);
        T_EQ(rio_s3_form_feed(f, b.p, b.n, &why), 0);
        T_EQ(verify(k, f, "b", 1, &a, &code, msg) == 0, strcmp(vals[i][1], "ok") == 0);
        free(b.p);
        free(p64);
    }
    rio_s3_keys_free(k);
}
