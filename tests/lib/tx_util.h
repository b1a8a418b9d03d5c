/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for tests that drive a transport through its ops table, without a
 * client: open it as a client would (the fault filter stacked where the URL
 * asks for it, and always over mock://), ops that record their completion,
 * whole-object PUT and GET, and the fault and mock counters.
 */
#ifndef RIO_TEST_TX_UTIL_H
#define RIO_TEST_TX_UTIL_H

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/url.h"
#include "railio.h"
#include "railio_mock.h"
#include "t.h"
#include "transport/fault.h"
#include "transport/mock.h"
#include "transport/transport.h"

#define KiB (1024ull)
#define MiB (1024ull * 1024ull)

struct tx {
    struct rio_url url;
    struct rio_transport *t;
    const struct rio_transport_ops *ops;
};

int tx_open_opts(struct tx *x, const char *url, const struct rio_options *o);

void tx_open(struct tx *x, const char *url);

void tx_close(struct tx *x);

/* Another transport on the same store (opened first, so the store lives on). */
void tx_reopen(struct tx *x, const char *url);

/* A test op: the io first, so complete() can cast back. */
struct top {
    struct rio_io io;
    int ncomplete;
    int64_t res;
    uint64_t done_ns;
};

void top_complete(struct rio_io *io);

void top_read(struct top *o, const struct rio_desc *d, uint64_t idx, unsigned path, void *dst);

void top_write(struct top *o, void *up, uint64_t size, uint64_t cs, uint64_t idx, unsigned path,
               const uint8_t *src);

/* Reap until every op of ops[0..n) completed or timeout_ms passed; returns
 * how many completed. */
unsigned reap_all(struct tx *x, struct top *ops, unsigned n, int timeout_ms);

void reap_one(struct tx *x, struct top *o);

/* Upload size bytes of buf under key in chunks of cs; fills d (caller cleans up). */
int put_object(struct tx *x, const char *key, const uint8_t *buf, uint64_t size, uint64_t cs,
               struct rio_desc *d);

/* Read the whole object of d into dst; 0 or the first op error. */
int64_t get_object(struct tx *x, const struct rio_desc *d, uint8_t *dst);

uint8_t *pattern(uint64_t size, uint64_t seed);

int all_bytes(const uint8_t *p, uint64_t n, uint8_t v);

struct rio_mock_counters counters(struct tx *x);

void add_fault(struct tx *x, const char *spec);

#endif
