/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the disk-tier tests of railiod (test_server_disk*.c): a data
 * directory removed at exit, objects whose bytes derive from (key, seq) so
 * that any version read back can be recognised and checked (srv_kill9 is in
 * server_env.h).
 */
#ifndef RIO_TEST_SERVER_DISK_UTIL_H
#define RIO_TEST_SERVER_DISK_UTIL_H

#include <dirent.h>

#include "server_env.h"

/* A fresh data directory, removed when the test exits (pass or fail). */
const char *disk_dir_make(void);

/* Names in dir starting with prefix (0 when none), the first one in *first. */
unsigned disk_dir_count(const char *dir, const char *prefix, char *first, size_t cap);

/* --------------------------------------------- versions derived from (key, seq) */

#define DV_HDR 24

/* The size of version seq of key: DV_HDR to max bytes. */
uint64_t dv_size(unsigned key, uint64_t seq, uint64_t max);

/* Version seq of key: "DV1" magic, key, seq, then the pattern of (key, seq). */
uint8_t *dv_make(unsigned key, uint64_t seq, uint64_t max, uint64_t *size);

/* buf (n bytes) is exactly some version of key: its seq, or -1. */
int64_t dv_check(unsigned key, const uint8_t *buf, uint64_t n, uint64_t max);

/* The whole object under key: 0 and *buf (malloc'ed), *d; or the status. */
int dv_get(struct wc *c, const char *key, uint8_t **buf, struct rio_proto_desc *d);

/* PUT version seq of key (chunks of chunk bytes); its generation. */
uint64_t dv_put(struct wc *c, const char *key, unsigned k, uint64_t seq, uint64_t max,
                uint64_t chunk);
/* key holds exactly version seq of k (and generation gen unless 0). */
void dv__expect(struct wc *c, const char *key, unsigned k, uint64_t seq, uint64_t max, uint64_t gen,
                const char *file, int line);
#define dv_expect(c, key, k, seq, max, gen)                                                        \
    dv__expect((c), (key), (k), (seq), (max), (gen), __FILE__, __LINE__)

#endif
