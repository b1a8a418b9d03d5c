/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados:// internals shared with the tests: the head format's constants and
 * the transport's counters. The layout itself is specified in docs/rados.md.
 */
#ifndef RIO_TRANSPORT_RADOS_H
#define RIO_TRANSPORT_RADOS_H

#include <stdint.h>

struct rio_transport;

/* The RADOS namespace every chunk object lives in (heads live in ""). */
#define RIO_RADOS_CHUNK_NS "rio.chunk"
/* The head's first line (version 1: chunk names derived from the key and
 * generation; version 2, composed objects only: chunk names listed), and
 * the xattr holding its generation (16 hex digits). */
#define RIO_RADOS_HEAD_MAGIC "railio-rados-head 1"
#define RIO_RADOS_HEAD_MAGIC2 "railio-rados-head 2"
#define RIO_RADOS_GEN_XATTR "rio.gen"
/* A chunk object's xattr naming the composed object's generation (16 hex
 * digits) it was lent to: only that object's removal may remove it. */
#define RIO_RADOS_OWNER_XATTR "rio.owner"
/* A head larger than this is refused as malformed. */
#define RIO_RADOS_HEAD_MAX (64u << 20)

struct rio_rados_counters {
    uint64_t submitted;        /* chunk ops handed to librados */
    uint64_t completed;        /* chunk ops completed through reap */
    uint64_t inflight_ops;     /* submitted and not yet completed */
    uint64_t inflight_bytes;   /* their bytes */
    uint64_t reordered;        /* WRITE completions that overtook an earlier chunk */
    uint64_t removed;          /* chunk removals confirmed (removed, or found gone) */
    uint64_t remove_failed;    /* chunk removals that never succeeded (left behind) */
    uint64_t commits_raced;    /* head commits that lost a race and retried */
    uint64_t conns;            /* cluster connections the paths share */
    uint64_t list_index_pages; /* listing pages whose names came from the key index */
    uint64_t list_heads_read;  /* heads a listing read (a committed index entry spares one) */
};

/* Snapshot of a rados transport's counters (zeros if t is not one). */
void rio__rados_counters(struct rio_transport *t, struct rio_rados_counters *out);

/* Tests: fn(arg) runs once, in the next lookup of t, right after it read
 * the head (a PUT made there replaces the head the lookup holds). */
void rio__rados_test_after_head_read(struct rio_transport *t, void (*fn)(void *arg), void *arg);

/*
 * The chunk object name for (key, generation, index):
 * "<key>.<generation as 16 hex digits>.<index as 16 hex digits>".
 * Returns the length written (without the NUL) or -1 if cap is too small.
 */
int rio__rados_chunk_name(char *out, size_t cap, const char *key, uint64_t generation,
                          uint64_t index);

#endif
