/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rados:// head object (docs/rados.md): parsed without librados.
 */
#ifndef RIO_TRANSPORT_RADOS_HEAD_H
#define RIO_TRANSPORT_RADOS_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "railio.h"

#define RIO_RADOS_MAX_HEAD_POOLS 16 /* pools one head may name */
#define RIO_RADOS_NAME_MAX (RIO_KEY_MAX + 40)

struct rio__rados_head {
    uint64_t generation, size, chunk_size, nchunks;
    char etag[48];
    unsigned npools;
    char *pools[RIO_RADOS_MAX_HEAD_POOLS];
    uint8_t *chunk_pool; /* per chunk, index into pools */
    uint64_t *xxh;
    /* Version 2 (a composed object): per chunk, its object name (each a
     * chunk name of some KEY.G.I, pointing into name_buf). NULL: version 1,
     * chunk i is the name derived from (key, generation, i). */
    char **names;
    char *name_buf;
};

/* Chunk i's object name in h (of key) into out (cap bytes): the listed
 * name for version 2, the derived one for version 1. Its length or -1. */
int rio__rados_head_chunk_name(const struct rio__rados_head *h, const char *key, uint64_t i,
                               char *out, size_t cap);

/* Exactly 16 lower-case hex digits at s (as railio writes a generation or
 * an index) into *out. */
bool rio__rados_hex16(const char *s, uint64_t *out);

/*
 * Whether name[0..len) is a chunk object name "KEY.G.I" (KEY 1..RIO_KEY_MAX
 * bytes without NUL, G and I 16 lower-case hex digits each, G not 0); its
 * key length, generation and index when so.
 */
int rio__rados_chunk_name_split(const char *name, size_t len, size_t *keylen, uint64_t *gen,
                                uint64_t *index);

/*
 * Parse the head text buf[0..len) of key into *h (rio__malloc'd lists:
 * rio__rados_head_cleanup). Returns 0, RIO_EPROTO for anything but a
 * well-formed head of key, or -ENOMEM.
 */
int rio__rados_head_parse(const char *buf, size_t len, const char *key, struct rio__rados_head *h);
void rio__rados_head_cleanup(struct rio__rados_head *h);

/* The head's leading lines only (magic, key, generation, size, chunk_size,
 * nchunks, etag) from its first bytes: what a listing shows. Nothing is
 * allocated (no cleanup needed); RIO_EPROTO when those lines are not a head
 * of key. RIO_RADOS_HEAD_TOP bytes always hold them. */
#define RIO_RADOS_HEAD_TOP 4096u
int rio__rados_head_summary(const char *buf, size_t len, const char *key,
                            struct rio__rados_head *h);

/*
 * The head text of key for *h (what rio__rados_head_parse reads back):
 * chunk i in pool h->chunk_pool[i], or i % npools when chunk_pool is NULL;
 * version 2 (h->names listed) when names is set, else version 1.
 * *out is rio__malloc'd, *outlen its length. RIO_EINVAL when the head would
 * pass RIO_RADOS_HEAD_MAX (too many chunks: larger chunks make it fit).
 */
int rio__rados_head_format(const char *key, const struct rio__rados_head *h, char **out,
                           size_t *outlen);

/* Percent-encoding of names in the head: bytes <= 0x20, '%' and >= 0x7f as
 * %XX. The encoded length of s; pct_put writes it at d and returns the end. */
size_t rio__rados_pct_len(const char *s);
char *rio__rados_pct_put(char *d, const char *s);

#endif
