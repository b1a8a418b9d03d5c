/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Checksums: xxh3-64 per chunk (libxxhash) and the MD5 etag of the whole
 * byte stream (OpenSSL EVP). Both pick the fastest implementation for the
 * CPU at run time: libxxhash's plain XXH3_64bits is its portable SSE2 build,
 * its dispatcher uses AVX2/AVX-512 when the CPU has them, several times
 * faster (`railio bench copy` prints both; figures in docs/bench.md).
 */
#include <errno.h>

#include <openssl/evp.h>
#include <xxhash.h>
#if defined(__x86_64__) || defined(__i386__)
#include <xxh_x86dispatch.h>
#define RIO_XXH3 XXH3_64bits_dispatch
#else
#define RIO_XXH3 XXH3_64bits
#endif

#include "core/checksum.h"

uint64_t rio__xxh3(const void *p, size_t n)
{
    return RIO_XXH3(p, n);
}

int rio__md5_init(struct rio_md5 *m)
{
    EVP_MD_CTX *ctx;

    m->ctx = NULL;
    ctx = EVP_MD_CTX_new();
    if (!ctx)
        return -ENOMEM;
    if (EVP_DigestInit_ex(ctx, EVP_md5(), NULL) != 1)
        goto err_ctx;
    m->ctx = ctx;
    return 0;
err_ctx:
    EVP_MD_CTX_free(ctx);
    return -EIO;
}

int rio__md5_update(struct rio_md5 *m, const void *p, size_t n)
{
    if (!m->ctx)
        return -EINVAL;
    if (n == 0)
        return 0;
    if (EVP_DigestUpdate(m->ctx, p, n) != 1)
        return -EIO;
    return 0;
}

int rio__md5_final(struct rio_md5 *m, char hex[33])
{
    static const char digits[] = "0123456789abcdef";
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int len = 0;
    unsigned int i;
    int ret = 0;

    hex[0] = '\0';
    if (!m->ctx)
        return -EINVAL;
    if (EVP_DigestFinal_ex(m->ctx, md, &len) != 1 || len != 16) {
        ret = -EIO;
        goto out;
    }
    for (i = 0; i < 16; i++) {
        hex[2 * i] = digits[md[i] >> 4];
        hex[2 * i + 1] = digits[md[i] & 0xf];
    }
    hex[32] = '\0';
out:
    rio__md5_cleanup(m);
    return ret;
}

void rio__md5_cleanup(struct rio_md5 *m)
{
    if (!m)
        return;
    EVP_MD_CTX_free(m->ctx);
    m->ctx = NULL;
}
