/* SPDX-License-Identifier: Apache-2.0 */
#ifndef RIO_CHECKSUM_H
#define RIO_CHECKSUM_H

#include <stddef.h>
#include <stdint.h>

uint64_t rio__xxh3(const void *p, size_t n);

/*
 * The same xxh3-64 over bytes that come in pieces (a chunk as its socket
 * delivers it, hashed while the bytes are in cache): the digest equals
 * rio__xxh3 of the pieces put together. rio__xxh3_stream_new returns NULL
 * when out of memory.
 */
struct rio_xxh3_stream;
struct rio_xxh3_stream *rio__xxh3_stream_new(void);
void rio__xxh3_stream_reset(struct rio_xxh3_stream *x);
void rio__xxh3_stream_update(struct rio_xxh3_stream *x, const void *p, size_t n);
uint64_t rio__xxh3_stream_digest(const struct rio_xxh3_stream *x);
void rio__xxh3_stream_free(struct rio_xxh3_stream *x);

/*
 * The fast etag (option etag=fast): 32 lower-case hex digits and a NUL in
 * hex[33], the xxh3-128 of the object's geometry (size, chunk size, chunk
 * count) and its chunk xxh3 list, all little-endian. No pass over the bytes:
 * any change of a byte changes its chunk's xxh3 and so the etag. Not an MD5.
 */
void rio__etag_fast(const uint64_t *xxh, uint64_t nchunks, uint64_t size, uint64_t chunk_size,
                    char hex[33]);

/*
 * CRC32C (Castagnoli, iSCSI; S3's x-amz-checksum-crc32c): crc is the CRC of
 * the bytes before p (0 to start), the result that of all of them. Uses the
 * SSE4.2 crc32 instruction when the CPU has it, else tables.
 * rio__crc32c_sw is the table version alone (tests compare the two).
 */
uint32_t rio__crc32c(uint32_t crc, const void *p, size_t n);
uint32_t rio__crc32c_sw(uint32_t crc, const void *p, size_t n);

/*
 * CRC-32 (IEEE, zlib's; S3's x-amz-checksum-crc32) and CRC-64/NVME (S3's
 * x-amz-checksum-crc64nvme), as rio__crc32c: crc the CRC of the bytes
 * before p (0 to start). Carry-less multiplies where the CPU has them
 * (crc.c); the _sw versions are the tables alone (tests compare).
 */
uint32_t rio__crc32(uint32_t crc, const void *p, size_t n);
uint64_t rio__crc64nvme(uint64_t crc, const void *p, size_t n);
uint32_t rio__crc32_sw(uint32_t crc, const void *p, size_t n);
uint64_t rio__crc64nvme_sw(uint64_t crc, const void *p, size_t n);

/*
 * The MD5s of n buffers (p[i], len[i] bytes) into out[i], 16 or 8 at once in
 * vector lanes where the CPU has AVX-512 or AVX2 (md5mb.c), else one at a
 * time. 0, or -ENOMEM. rio__md5_lanes says how many lanes this CPU gives
 * (16, 8 or 1); rio__md5_many_lanes forces a width (tests compare).
 */
int rio__md5_many(const void *const *p, const size_t *len, unsigned n, uint8_t (*out)[16]);
int rio__md5_many_lanes(unsigned lanes, const void *const *p, const size_t *len, unsigned n,
                        uint8_t (*out)[16]);
unsigned rio__md5_lanes(void);

/* Streaming MD5 of a byte stream (the etag). */
struct rio_md5 {
    void *ctx; /* EVP_MD_CTX */
};
int rio__md5_init(struct rio_md5 *m);
int rio__md5_update(struct rio_md5 *m, const void *p, size_t n);
/* Writes 32 lower-case hex digits and a NUL into hex[33]; frees the context. */
int rio__md5_final(struct rio_md5 *m, char hex[33]);
/* The 16 bytes of the digest into out; frees the context. */
int rio__md5_final_raw(struct rio_md5 *m, uint8_t out[16]);
/* The MD5 of the bytes so far into out[16]; m goes on (a copy is finished). */
int rio__md5_peek(const struct rio_md5 *m, uint8_t out[16]);
/* Free without a result (error paths). Safe on an uninitialised-to-zero m. */
void rio__md5_cleanup(struct rio_md5 *m);

#endif
