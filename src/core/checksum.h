/* SPDX-License-Identifier: Apache-2.0 */
#ifndef RIO_CHECKSUM_H
#define RIO_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

uint64_t rio__xxh3(const void *p, size_t n);

/* Streaming MD5 of a byte stream (the etag). */
struct rio_md5 {
    void *ctx; /* EVP_MD_CTX */
};
int rio__md5_init(struct rio_md5 *m);
int rio__md5_update(struct rio_md5 *m, const void *p, size_t n);
/* Writes 32 lower-case hex digits and a NUL into hex[33]; frees the context. */
int rio__md5_final(struct rio_md5 *m, char hex[33]);
/* Free without a result (error paths). Safe on an uninitialised-to-zero m. */
void rio__md5_cleanup(struct rio_md5 *m);

#endif
