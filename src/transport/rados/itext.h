/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rados:// key index's text (index.c, docs/rados.md "The key index"),
 * without librados: its marker, its entries' names and values. All of it is
 * read back from the pool, so the parsers take hostile bytes and are fuzzed
 * on their own (tests/fuzz/fuzz_rados_index.c).
 */
#ifndef RIO_TRANSPORT_RADOS_ITEXT_H
#define RIO_TRANSPORT_RADOS_ITEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "railio.h"

#define RIO_RADOS_IDX_SHARDS_MAX 4096u
#define RIO_RADOS_IDX_MARKER_MAX 128u /* bytes of a marker */
#define RIO_RADOS_IDX_NAME_MAX (RIO_KEY_MAX + 17u)
#define RIO_RADOS_IDX_VAL_MAX 128u /* bytes of an entry's value */

/* The marker "railio-index 1\nshards N\nstate S\n": exactly that text (N
 * 1..RIO_RADOS_IDX_SHARDS_MAX without leading zeros, S "building" or
 * "ready"), else RIO_EPROTO. format: its length, into out (cap bytes). */
int rio__rados_idx_marker_parse(const char *buf, size_t len, unsigned *shards, bool *ready);
int rio__rados_idx_marker_format(char *out, size_t cap, unsigned shards, bool ready);

/* An entry's omap name: the key, a NUL, the generation (not 0) as 16
 * lower-case hex digits. name: into out (RIO_RADOS_IDX_NAME_MAX bytes),
 * its length; split: the reverse, RIO_EPROTO for any other name. */
int rio__rados_idx_entry_name(char *out, const char *key, size_t keylen, uint64_t gen);
int rio__rados_idx_entry_split(const char *name, size_t len, size_t *keylen, uint64_t *gen);

/* An entry's value: when it was written (ns since the epoch, 16 lower-case
 * hex digits), and once its generation was published (committed), " c
 * SIZE MTIME ETAG": the object's size, its head's mtime (whole seconds
 * since the epoch) and etag (0 to 47 bytes from '!' to '~'), decimal
 * without leading zeros. */
struct rio__rados_ival {
    uint64_t at_ns;
    bool committed;
    uint64_t size;
    int64_t mtime_s;
    char etag[48];
};
/* 0, or RIO_EPROTO for anything format would not write. */
int rio__rados_ival_parse(const char *v, size_t len, struct rio__rados_ival *out);
/* Into out (RIO_RADOS_IDX_VAL_MAX bytes): its length, or -1 when the etag
 * is not one a value holds. */
int rio__rados_ival_format(const struct rio__rados_ival *iv, char *out);

#endif
