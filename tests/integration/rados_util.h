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

#include "../harness/ceph_env.h"
#include "core/alloc.h"
#include "core/internal.h"
#include "railio.h"
#include "t.h"
#include "transport/rados.h"

#define RU_KIB 1024ull
#define RU_MIB (1024ull * 1024ull)

/* Options for fast tests: small chunks, short backoff, bounded time. */
static inline void ru_opts(struct rio_options *o, uint64_t chunk, unsigned depth)
{
    rio_options_init(o);
    o->chunk_size = chunk;
    o->depth = depth;
    o->seed = 0x7ad05;
    o->backoff_base_ms = 5;
    o->backoff_cap_ms = 100;
    o->cooldown_base_ms = 20;
    o->cooldown_cap_ms = 200;
    o->op_timeout_ms = 10000;
    o->deadline_ms = 60000;
}

/* rados://POOL?conf=...[&extra] */
static inline void ru_url(char *out, size_t cap, const char *pool, const char *extra)
{
    snprintf(out, cap, "rados://%s?conf=%s%s%s", pool, t_ceph_conf(), extra && *extra ? "&" : "",
             extra ? extra : "");
}

static inline struct rio_client *ru_client_at(const char *file, int line, const char *pool,
                                              const char *extra, const struct rio_options *o)
{
    char url[2048];
    struct rio_client *c = NULL;
    int ret;

    ru_url(url, sizeof(url), pool, extra);
    ret = rio_client_new(url, o, &c);
    if (ret < 0)
        t__fail(file, line, "rio_client_new(%s): %s (%s)", url, rio_errname(ret),
                rio_strerror(ret));
    return c;
}
#define ru_client(pool, extra, o) ru_client_at(__FILE__, __LINE__, (pool), (extra), (o))

/* Nothing in flight in the engine or in the transport. */
static inline void ru_idle_at(const char *file, int line, struct rio_client *c)
{
    struct rio_counters k;
    struct rio_rados_counters r;

    rio_client_counters(c, &k);
    rio__rados_counters(rio__client_transport(c), &r);
    if (k.inflight_ops || k.inflight_bytes || k.requests || r.inflight_ops || r.inflight_bytes)
        t__fail(file, line,
                "not idle: engine ops %" PRIu64 " bytes %" PRIu64 " requests %" PRIu64
                ", rados ops %" PRIu64 " bytes %" PRIu64,
                k.inflight_ops, k.inflight_bytes, k.requests, r.inflight_ops, r.inflight_bytes);
}
#define ru_idle(c) ru_idle_at(__FILE__, __LINE__, (c))

/* An admin connection of the test's own, for looking under the transport. */
static inline rados_t ru_admin(void)
{
    rados_t cl;

    if (rados_create(&cl, "admin") < 0)
        T_FAIL("rados_create");
    if (rados_conf_read_file(cl, t_ceph_conf()) < 0)
        T_FAIL("rados_conf_read_file");
    rados_conf_set(cl, "rados_osd_op_timeout", "20");
    rados_conf_set(cl, "rados_mon_op_timeout", "20");
    rados_conf_set(cl, "client_mount_timeout", "20");
    int ret = rados_connect(cl);
    if (ret < 0)
        T_FAIL("rados_connect: %d", ret);
    return cl;
}

/* Objects in pool: chunk objects (namespace rio.chunk) and others. With
 * prefix, only chunk objects whose name starts with it count as chunks. */
static inline void ru_count(const char *pool, const char *prefix, uint64_t *chunks,
                            uint64_t *others)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    rados_list_ctx_t lc;
    const char *entry, *key, *ns;
    int ret;

    *chunks = *others = 0;
    ret = rados_ioctx_create(cl, pool, &io);
    if (ret < 0)
        T_FAIL("rados_ioctx_create(%s): %d", pool, ret);
    rados_ioctx_set_namespace(io, LIBRADOS_ALL_NSPACES);
    ret = rados_nobjects_list_open(io, &lc);
    if (ret < 0)
        T_FAIL("rados_nobjects_list_open: %d", ret);
    while ((ret = rados_nobjects_list_next(lc, &entry, &key, &ns)) == 0) {
        if (ns && strcmp(ns, RIO_RADOS_CHUNK_NS) == 0) {
            if (!prefix || strncmp(entry, prefix, strlen(prefix)) == 0)
                (*chunks)++;
        } else {
            (*others)++;
        }
    }
    rados_nobjects_list_close(lc);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    if (ret != -ENOENT)
        T_FAIL("rados_nobjects_list_next: %d", ret);
}

static inline uint64_t ru_chunks(const char *pool, const char *prefix)
{
    uint64_t ch, other;
    ru_count(pool, prefix, &ch, &other);
    return ch;
}

/* MD5 of buf in lower-case hex, by OpenSSL directly (independent of the
 * library's streaming hasher). */
static inline void ru_md5(const void *buf, size_t n, char hex[33])
{
    unsigned char d[16];
    unsigned int dl = 0;

    if (!EVP_Digest(buf, n, d, &dl, EVP_md5(), NULL) || dl != 16)
        T_FAIL("EVP_Digest");
    for (int i = 0; i < 16; i++)
        sprintf(hex + 2 * i, "%02x", d[i]);
}

static inline uint8_t *ru_pattern(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        T_FAIL("malloc(%zu)", n);
    t_fill_pattern(p, n, seed);
    return p;
}

/* The head object of key, raw. *len bytes, malloc'd. */
static inline char *ru_head(const char *pool, const char *key, size_t *len)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    uint64_t size;
    time_t mt;
    char *b;

    if (rados_ioctx_create(cl, pool, &io) < 0)
        T_FAIL("rados_ioctx_create");
    if (rados_stat(io, key, &size, &mt) < 0)
        T_FAIL("no head object for %s", key);
    b = malloc(size + 1);
    int ret = rados_read(io, key, b, size, 0);
    if (ret < 0 || (uint64_t)ret != size)
        T_FAIL("rados_read head: %d", ret);
    b[size] = '\0';
    *len = size;
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    return b;
}

#endif
