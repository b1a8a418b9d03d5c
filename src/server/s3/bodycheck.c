/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A request body checked as it streams against the digest a header claims
 * (s3.h, rio_s3_check): the signed payload hash, Content-MD5 and the
 * x-amz-checksum-* family; the CRCs are the library's (core/crc.c,
 * core/checksum.c).
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/url.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "transport/s3/sign.h"

struct rio_s3_check {
    int algo;
    EVP_MD_CTX *md; /* MD5 and the SHAs */
    uint32_t crc32;
    uint64_t crc64;
    uint8_t want[32];
    size_t wantlen;
    int have_want;
};

static const struct {
    const char *name;
    int algo;
    size_t len; /* digest bytes */
} algos[] = {
    {"x-amz-content-sha256", RIO__S3_SHA256HEX, 32},
    {"content-md5", RIO__S3_MD5, 16},
    {"x-amz-checksum-crc32", RIO__S3_CRC32, 4},
    {"x-amz-checksum-crc32c", RIO__S3_CRC32C, 4},
    {"x-amz-checksum-crc64nvme", RIO__S3_CRC64NVME, 8},
    {"x-amz-checksum-sha1", RIO__S3_SHA1, 20},
    {"x-amz-checksum-sha256", RIO__S3_SHA256, 32},
};

int rio__s3_algo_of(const char *name)
{
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++)
        if (strcasecmp(algos[i].name, name) == 0)
            return algos[i].algo;
    return -1;
}

/* Strict base64 (with padding) of exactly len bytes. 0 or -1. */
static int b64_decode(const char *s, uint8_t *out, size_t len)
{
    uint8_t tmp[48];
    size_t sl = strlen(s);
    int n;

    if (sl != 4 * ((len + 2) / 3) || sl > 64)
        return -1;
    for (size_t i = 0; i < sl; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || (c == '=' && i >= sl - 2)))
            return -1;
    }
    n = EVP_DecodeBlock(tmp, (const unsigned char *)s, (int)sl);
    if (n < 0 || (size_t)n < len)
        return -1;
    /* EVP_DecodeBlock counts padding as zero bytes: they must be zero. */
    for (size_t i = len; i < (size_t)n; i++)
        if (tmp[i])
            return -1;
    memcpy(out, tmp, len);
    return 0;
}

static int hex_decode(const char *s, uint8_t *out, size_t len)
{
    if (strlen(s) != 2 * len)
        return -1;
    for (size_t i = 0; i < 2 * len; i++) {
        int v = rio__hex_digit(s[i]);
        if (v < 0 || (s[i] >= 'A' && s[i] <= 'F'))
            return -1;
        if (i & 1)
            out[i / 2] |= (uint8_t)v;
        else
            out[i / 2] = (uint8_t)(v << 4);
    }
    return 0;
}

int rio__s3_check_expect(struct rio_s3_check *c, const char *value, const char **s3_code)
{
    int bad = c->algo == RIO__S3_SHA256HEX ? hex_decode(value, c->want, c->wantlen)
                                           : b64_decode(value, c->want, c->wantlen);

    if (bad) {
        *s3_code = c->algo == RIO__S3_SHA256HEX ? "InvalidArgument" : "InvalidDigest";
        return RIO_EINVAL;
    }
    c->have_want = 1;
    return 0;
}

int rio__s3_check_md5_want(const struct rio_s3_check *c, uint8_t out[16])
{
    if (c->algo != RIO__S3_MD5 || !c->have_want)
        return -1;
    memcpy(out, c->want, 16);
    return 0;
}

int rio_s3_check_new(const char *name, const char *value, struct rio_s3_check **out,
                     const char **s3_code)
{
    struct rio_s3_check *c;
    const EVP_MD *md = NULL;
    size_t i;

    *s3_code = NULL;
    for (i = 0; i < sizeof(algos) / sizeof(algos[0]); i++)
        if (strcasecmp(algos[i].name, name) == 0)
            break;
    if (i == sizeof(algos) / sizeof(algos[0])) {
        *s3_code = "InvalidRequest";
        return RIO_EINVAL;
    }
    c = rio__calloc(1, sizeof(*c));
    if (!c) {
        *s3_code = "InternalError";
        return -ENOMEM;
    }
    c->algo = algos[i].algo;
    c->wantlen = algos[i].len;
    if (value && rio__s3_check_expect(c, value, s3_code) < 0) {
        rio__free(c);
        return RIO_EINVAL;
    }
    if (c->algo == RIO__S3_SHA256HEX || c->algo == RIO__S3_SHA256)
        md = EVP_sha256();
    else if (c->algo == RIO__S3_SHA1)
        md = EVP_sha1();
    else if (c->algo == RIO__S3_MD5)
        md = EVP_md5();
    if (md) {
        c->md = EVP_MD_CTX_new();
        if (!c->md || EVP_DigestInit_ex(c->md, md, NULL) != 1) {
            EVP_MD_CTX_free(c->md);
            rio__free(c);
            *s3_code = "InternalError";
            return -ENOMEM;
        }
    }
    *out = c;
    return 0;
}

int rio_s3_check_update(struct rio_s3_check *c, const void *p, size_t n)
{
    if (c->md)
        return EVP_DigestUpdate(c->md, p, n) == 1 ? 0 : -EIO;
    if (c->algo == RIO__S3_CRC32)
        c->crc32 = rio__crc32(c->crc32, p, n);
    else if (c->algo == RIO__S3_CRC32C)
        c->crc32 = rio__crc32c(c->crc32, p, n);
    else
        c->crc64 = rio__crc64nvme(c->crc64, p, n);
    return 0;
}

/* The digest of what was fed into got (c->wantlen bytes): 0, or -EIO. */
static int final(struct rio_s3_check *c, uint8_t got[EVP_MAX_MD_SIZE])
{
    unsigned len = 0;

    if (c->md) {
        if (EVP_DigestFinal_ex(c->md, got, &len) != 1 || len != c->wantlen)
            return -EIO;
    } else if (c->algo == RIO__S3_CRC64NVME) {
        for (int i = 0; i < 8; i++)
            got[i] = (uint8_t)(c->crc64 >> (56 - 8 * i));
    } else {
        for (int i = 0; i < 4; i++)
            got[i] = (uint8_t)(c->crc32 >> (24 - 8 * i));
    }
    return 0;
}

int rio_s3_check_digest(struct rio_s3_check *c, char *out, size_t cap)
{
    uint8_t got[EVP_MAX_MD_SIZE];

    if (c->algo == RIO__S3_SHA256HEX || cap < 4 * ((c->wantlen + 2) / 3) + 1 || final(c, got) < 0)
        return -EIO;
    EVP_EncodeBlock((unsigned char *)out, got, (int)c->wantlen);
    return 0;
}

int rio_s3_check_done(struct rio_s3_check *c, const char **s3_code)
{
    uint8_t got[EVP_MAX_MD_SIZE];

    *s3_code = NULL;
    if (!c->have_want) {
        *s3_code = "InvalidRequest";
        return -EINVAL;
    }
    if (final(c, got) < 0) {
        *s3_code = "InternalError";
        return -EIO;
    }
    if (CRYPTO_memcmp(got, c->want, c->wantlen) != 0) {
        *s3_code = c->algo == RIO__S3_SHA256HEX ? "XAmzContentSHA256Mismatch" : "BadDigest";
        return -EINVAL;
    }
    return 0;
}

void rio_s3_check_free(struct rio_s3_check *c)
{
    if (!c)
        return;
    EVP_MD_CTX_free(c->md);
    rio__free(c);
}
