/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the rados:// tests (tests/integration/test_rados*.c): clients
 * on the harness cluster, object counts straight from librados (every
 * namespace, so a leaked chunk object cannot hide), an independent MD5, and
 * the closing checks (nothing in flight in the engine or the transport).
 */
#ifndef RIO_TEST_RADOS_UTIL_H
#define RIO_TEST_RADOS_UTIL_H

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <openssl/evp.h>
#include <rados/librados.h>

#include "ceph_env.h"
#include "core/alloc.h"
#include "core/internal.h"
#include "railio.h"
#include "t.h"
#include "tlib.h"
#include "transport/rados.h"

#define RU_KIB T_KIB
#define RU_MIB T_MIB

/* Options for fast tests (t_opts T_PROFILE_RADOS) with chunk and depth. */
#define ru_opts(o, chunk, depth) t_opts_sized((o), T_PROFILE_RADOS, (chunk), (depth))

/* rados://POOL?conf=...[&extra] */
void ru_url(char *out, size_t cap, const char *pool, const char *extra);

struct rio_client *ru_client_at(const char *file, int line, const char *pool, const char *extra,
                                const struct rio_options *o);
#define ru_client(pool, extra, o) ru_client_at(__FILE__, __LINE__, (pool), (extra), (o))

/* Nothing in flight in the engine or in the transport. */
#define ru_idle(c) t__idle((c), __FILE__, __LINE__)

/* An admin connection of the test's own, for looking under the transport. */
rados_t ru_admin(void);

/* Objects in pool: chunk objects (namespace rio.chunk) and others. With
 * prefix, only chunk objects whose name starts with it count as chunks. */
void ru_count(const char *pool, const char *prefix, uint64_t *chunks, uint64_t *others);

uint64_t ru_chunks(const char *pool, const char *prefix);
/* Objects of pool outside the chunk namespace whose name starts with prefix. */
uint64_t ru_objects(const char *pool, const char *prefix);

#define ru_md5 t_md5_hex
#define ru_pattern t_pattern_buf

/* Run `$T_BUILD_DIR/railio ARGS` (a shell fragment) with the cluster's
 * conf, stdout and stderr into out (a file in the cluster's directory; its
 * path), echoed on stderr with the time it took; the exit status. */
int ru_railio(char *out, size_t cap, const char *args);
/* How many lines of file hold a, and b when not NULL. */
unsigned ru_lines_with(const char *file, const char *a, const char *b);

/* The key index's layout (docs/rados.md "The key index"). */
#define RU_IDX_NS "rio.index"
#define RU_IDX_SHARDS 8u
/* The shard of key (FNV-1a of its bytes). */
unsigned ru_idx_shard(const char *key, size_t len);
/* Set omap name[0..nlen) to val in shard (every shard when shard < 0) of
 * pool's index: what anyone with write access to the pool can write. */
void ru_idx_set(const char *pool, int shard, const char *name, size_t nlen, const char *val);
/* Set the entry of (key, gen) to val, in key's shard. */
void ru_idx_entry(const char *pool, const char *key, uint64_t gen, const char *val);

/* The head object of key, raw. *len bytes, malloc'd. */
char *ru_head(const char *pool, const char *key, size_t *len);

#endif
