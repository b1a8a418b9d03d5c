/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The checksum record's bytes (rec.h). Every length in a record read from
 * disk is checked before anything is sized from it: the record is as
 * hostile as any input (anyone who can write the file can set the xattr).
 */
#include <errno.h>
#include <string.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/le.h"
#include "transport/file/rec.h"

int rio__file_rec_encode(const struct rio_desc *d, uint64_t mtime_ns, uint8_t **out, size_t *n)
{
    uint8_t *b;

    *out = NULL;
    *n = 0;
    if (d->nchunks > (RIO_FILE_REC_MAX - RIO_FILE_REC_HDR - 8) / 8)
        return 0; /* cannot fit any file system's xattr: stored without */
    *n = RIO_FILE_REC_HDR + (size_t)d->nchunks * 8 + 8;
    b = rio__calloc(1, *n);
    if (!b)
        return -ENOMEM;
    memcpy(b, RIO_FILE_REC_MAGIC, 8);
    rio__le64_put(b + 8, d->size);
    rio__le64_put(b + 16, d->chunk_size);
    rio__le64_put(b + 24, d->nchunks);
    rio__le64_put(b + 32, mtime_ns);
    memcpy(b + 40, d->etag, 47);
    for (uint64_t i = 0; i < d->nchunks; i++)
        rio__le64_put(b + RIO_FILE_REC_HDR + i * 8, d->xxh[i]);
    rio__le64_put(b + *n - 8, rio__xxh3(b, *n - 8));
    *out = b;
    return 0;
}

int rio__file_rec_decode(const uint8_t *b, size_t n, uint64_t size, uint64_t mtime_ns,
                         struct rio_desc *d)
{
    uint64_t cs, nc;

    if (n < RIO_FILE_REC_HDR + 8 || n > RIO_FILE_REC_MAX)
        return 0;
    if (memcmp(b, RIO_FILE_REC_MAGIC, 8) != 0 || rio__le64_get(b + n - 8) != rio__xxh3(b, n - 8))
        return 0;
    cs = rio__le64_get(b + 16);
    nc = rio__le64_get(b + 24);
    if (rio__le64_get(b + 8) != size || rio__le64_get(b + 32) != mtime_ns || cs == 0 ||
        nc != (size ? (size - 1) / cs + 1 : 0) || nc != ((uint64_t)n - RIO_FILE_REC_HDR - 8) / 8 ||
        ((uint64_t)n - RIO_FILE_REC_HDR - 8) % 8)
        return 0;
    d->xxh = NULL;
    if (nc) {
        d->xxh = rio__malloc((size_t)nc * sizeof(uint64_t));
        if (!d->xxh)
            return -ENOMEM;
        for (uint64_t i = 0; i < nc; i++)
            d->xxh[i] = rio__le64_get(b + RIO_FILE_REC_HDR + i * 8);
    }
    d->chunk_size = cs;
    d->nchunks = nc;
    memcpy(d->etag, b + 40, 47);
    d->etag[47] = '\0';
    return 1;
}
