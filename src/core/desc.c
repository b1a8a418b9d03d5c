/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A descriptor comes from outside the process (a server's HEAD, a head
 * object, a file's metadata): every field is checked once, here, before the
 * engine sizes anything from it (chunk lists, staging, a reader's ring).
 */
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"

static int why_set(char *why, size_t cap, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int why_set(char *why, size_t cap, int err, const char *fmt, ...)
{
    va_list ap;

    if (why && cap) {
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    return err;
}

static bool etag_ok(const char *e, size_t cap)
{
    const char *nul = memchr(e, '\0', cap);
    if (!nul)
        return false;
    size_t n = (size_t)(nul - e);
    if (n == 0)
        return true;
    if (n != 32)
        return false;
    for (size_t i = 0; i < n; i++) {
        char ch = e[i];
        if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F')))
            return false;
    }
    return true;
}

int rio__desc_check(const struct rio_desc *d, const char *key, char *why, size_t cap)
{
    if (why && cap)
        why[0] = '\0';
    if (!memchr(d->key, '\0', sizeof(d->key)))
        return why_set(why, cap, RIO_EPROTO, "key not terminated");
    if (key && strcmp(d->key, key) != 0)
        return why_set(why, cap, RIO_EPROTO, "key is not the key asked for");
    if (d->size > (uint64_t)INT64_MAX)
        return why_set(why, cap, RIO_EPROTO, "size %" PRIu64 " out of range (max %" PRId64 ")",
                       d->size, INT64_MAX);
    if (d->chunk_size == 0) {
        /* The backend keeps no geometry: the client's chunk size is used,
         * and there is no checksum list to go with it. */
        if (d->nchunks != 0)
            return why_set(why, cap, RIO_EPROTO, "nchunks %" PRIu64 " without a chunk_size",
                           d->nchunks);
        if (d->xxh)
            return why_set(why, cap, RIO_EPROTO, "checksum list without a chunk_size");
    } else {
        if (d->chunk_size < RIO__DESC_CHUNK_MIN || d->chunk_size > RIO__DESC_CHUNK_MAX)
            return why_set(why, cap, RIO_EPROTO, "chunk_size %" PRIu64 " out of range [%llu, %llu]",
                           d->chunk_size, RIO__DESC_CHUNK_MIN, RIO__DESC_CHUNK_MAX);
        uint64_t n = d->size ? (d->size - 1) / d->chunk_size + 1 : 0;
        if (d->nchunks != n)
            return why_set(why, cap, RIO_EPROTO,
                           "nchunks %" PRIu64 " inconsistent with size %" PRIu64
                           " and chunk_size %" PRIu64 " (%" PRIu64 ")",
                           d->nchunks, d->size, d->chunk_size, n);
        if (n > RIO__DESC_CHUNKS_MAX)
            return why_set(why, cap, RIO_EPROTO, "nchunks %" PRIu64 " out of range (max %llu)", n,
                           RIO__DESC_CHUNKS_MAX);
    }
    if (!etag_ok(d->etag, sizeof(d->etag)))
        return why_set(why, cap, RIO_EPROTO, "etag malformed (not \"\" or 32 hex digits)");
    return 0;
}
