/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/transport/rados/itext.c src/transport/rados/head.c src/core/alloc.c */
/*
 * libFuzzer target for the rados:// key index's text (src/transport/
 * rados/itext.c, docs/rados.md "The key index"): the marker every client
 * reads before a write or a listing, the omap entries' names and values a
 * listing and fsck read. Anyone with write access to the pool can write any
 * bytes there; a listing believes a committed value's size, mtime and etag.
 *
 * Input: one byte choosing the parser, then the bytes (NULs included). What
 * a parser accepts must be what its formatter writes, byte for byte:
 * - marker: shards within 1..RIO_RADOS_IDX_SHARDS_MAX, formatted again the
 *   same bytes;
 * - entry name: a key of 1 to RIO_KEY_MAX bytes without NUL, a generation
 *   that is not 0, named again the same bytes;
 * - value: formatted again the same bytes, an etag of printable bytes that
 *   fits its field, a size of at most INT64_MAX and an mtime whose
 *   nanoseconds fit an int64_t (a listing multiplies it).
 * Seeds: tests/fuzz/corpus/rados_index/.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "railio.h"
#include "transport/rados/itext.h"

#define CHECK FUZZ_CHECK

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char again[RIO_RADOS_IDX_NAME_MAX + RIO_RADOS_IDX_VAL_MAX];
    char *b;
    size_t n;

    if (size < 1 || size > RIO_RADOS_IDX_NAME_MAX + 64)
        return 0;
    n = size - 1;
    b = malloc(n ? n : 1); /* exactly the bytes: reads past them trap */
    CHECK(b != NULL);
    memcpy(b, data + 1, n);

    switch (data[0] % 3) {
    case 0: {
        unsigned shards;
        bool ready;
        if (rio__rados_idx_marker_parse(b, n, &shards, &ready) == 0) {
            CHECK(shards >= 1 && shards <= RIO_RADOS_IDX_SHARDS_MAX);
            int l = rio__rados_idx_marker_format(again, RIO_RADOS_IDX_MARKER_MAX, shards, ready);
            CHECK(l > 0 && (size_t)l == n && memcmp(again, b, n) == 0);
        }
        break;
    }
    case 1: {
        size_t kl;
        uint64_t gen;
        if (rio__rados_idx_entry_split(b, n, &kl, &gen) == 0) {
            CHECK(kl >= 1 && kl <= RIO_KEY_MAX && gen != 0 && !memchr(b, '\0', kl));
            int l = rio__rados_idx_entry_name(again, b, kl, gen);
            CHECK(l > 0 && (size_t)l == n && memcmp(again, b, n) == 0);
        }
        break;
    }
    default: {
        struct rio__rados_ival iv;
        if (rio__rados_ival_parse(b, n, &iv) == 0) {
            size_t el = strnlen(iv.etag, sizeof(iv.etag));
            CHECK(el < sizeof(iv.etag));
            for (size_t i = 0; i < el; i++)
                CHECK(iv.etag[i] >= '!' && iv.etag[i] <= '~');
            CHECK(iv.committed || !el);
            CHECK(iv.mtime_s >= 0);
            /* What a listing shows from it unread: an object's size, an
             * mtime whose nanoseconds fit an int64_t. */
            CHECK(iv.size <= (uint64_t)INT64_MAX);
            CHECK(iv.mtime_s <= INT64_MAX / 1000000000);
            int l = rio__rados_ival_format(&iv, again);
            CHECK(l > 0 && (size_t)l == n && memcmp(again, b, n) == 0);
        }
        break;
    }
    }
    free(b);
    return 0;
}
