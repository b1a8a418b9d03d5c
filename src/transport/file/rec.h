/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The file transport's on-disk checksum record (the xattr user.railio.xxh),
 * as bytes: encoded at put_commit, decoded at lookup. No I/O and no state, so
 * tests and the fuzz harness (tests/fuzz/fuzz_file_rec.c) call it directly.
 *
 * Layout: "railio1\0", size, chunk_size, nchunks, mtime_ns (each u64 LE),
 * etag (48 bytes), xxh[nchunks] (u64 LE), then the xxh3-64 of all of it
 * (u64 LE). It describes the file only while the file's size and mtime are
 * the ones it names: a file modified after its PUT is served without
 * checksums.
 */
#ifndef RIO_TRANSPORT_FILE_REC_H
#define RIO_TRANSPORT_FILE_REC_H

#include <stddef.h>
#include <stdint.h>

#include "railio.h"

#define RIO_FILE_REC_XATTR "user.railio.xxh"
#define RIO_FILE_REC_MAGIC "railio1"
#define RIO_FILE_REC_HDR (8 + 4 * 8 + 48)
/* The largest record: Linux's XATTR_SIZE_MAX, what any file system takes. */
#define RIO_FILE_REC_MAX 65536u

/*
 * The record of d (size, chunk_size, nchunks, xxh, etag) for a file whose
 * mtime is mtime_ns, in *out (rio__malloc'd, *n bytes). *out is NULL (and 0
 * returned) when the record could not fit any file system's xattr. Returns 0
 * or -ENOMEM.
 */
int rio__file_rec_encode(const struct rio_desc *d, uint64_t mtime_ns, uint8_t **out, size_t *n);

/*
 * Check the record b[0..n) against the file it was read from (its size and
 * mtime_ns) and, when it matches, fill d's chunk_size, nchunks, xxh
 * (rio__malloc'd, nchunks entries, NULL when 0) and etag. Returns 1 when it
 * matched, 0 when it did not (bad magic or checksum, another size or mtime,
 * a geometry that does not add up: d untouched), or -ENOMEM.
 */
int rio__file_rec_decode(const uint8_t *b, size_t n, uint64_t size, uint64_t mtime_ns,
                         struct rio_desc *d);

#endif
