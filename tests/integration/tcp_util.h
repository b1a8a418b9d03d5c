/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the railio:// transport's tests (tests/integration/
 * test_tcp*.c): a railiod started from tests/harness/server_env.h, clients
 * opened on it with small fast settings, and the closing checks every test
 * ends with: the engine's in-flight counters are zero and the transport holds
 * no request slot (tombstones of cancelled ops drained). The harness fails a
 * test that leaves any rio__malloc block behind.
 */
#ifndef RIO_TEST_TCP_UTIL_H
#define RIO_TEST_TCP_UTIL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../harness/server_env.h"
#include "core/alloc.h"
#include "core/internal.h"
#include "railio.h"
#include "t.h"
#include "transport/tcp.h"

#define TU_KIB 1024ull
#define TU_MIB (1024ull * 1024ull)
#define TU_CHUNK (64u * 1024u)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define TU_SANITIZED 1
#else
#define TU_SANITIZED 0
#endif

struct tu {
    struct rio_client *c;
};

/* 64 KiB chunks, a fixed seed, short backoff and cooldown, and an op timeout
 * and deadline that bound a hung test well inside the harness timeout. */
static inline void tu_opts(struct rio_options *o)
{
    rio_options_init(o);
    o->chunk_size = TU_CHUNK;
    o->seed = 0x7c9;
    o->backoff_base_ms = 1;
    o->backoff_cap_ms = 50;
    o->cooldown_base_ms = 20;
    o->cooldown_cap_ms = 200;
    o->op_timeout_ms = 5000;
    o->deadline_ms = 30000;
}

/* "railio://ADDR[?params]" for the server's first listener. */
static inline void tu_url(char *out, size_t cap, const struct srv_env *e, const char *params)
{
    snprintf(out, cap, "railio://%s%s%s", e->addr[0], params && *params ? "?" : "",
             params ? params : "");
}

static inline void tu__open(struct tu *u, const char *url, const struct rio_options *o,
                            const char *file, int line)
{
    int ret;

    ret = rio_client_new(url, o, &u->c);
    if (ret < 0)
        t__fail(file, line, "rio_client_new(%s): %d %s (%s)", url, ret, rio_errname(ret),
                rio_strerror(ret));
}
#define tu_open(u, url, o) tu__open((u), (url), (o), __FILE__, __LINE__)

static inline struct rio__tcp_counters tu_tcp(struct rio_client *c)
{
    struct rio__tcp_counters k;
    if (rio__tcp_counters(rio__client_transport(c), &k) < 0)
        T_FAIL("not a railio:// client");
    return k;
}

/*
 * The client is idle: every engine counter is zero, and (within 3 s, the time
 * for cancelled ops' answers to drain) the transport holds no slot.
 */
static inline void tu__idle(struct rio_client *c, const char *file, int line)
{
    struct rio_counters k;
    struct rio__tcp_counters tk;
    uint64_t t0 = t_now_ms();

    rio_client_counters(c, &k);
    if (k.inflight_ops || k.inflight_bytes || k.requests || k.budget_reserved)
        t__fail(file, line,
                "client not idle: ops %" PRIu64 " bytes %" PRIu64 " requests %" PRIu64
                " reserved %" PRIu64,
                k.inflight_ops, k.inflight_bytes, k.requests, k.budget_reserved);
    for (unsigned i = 0; i < RIO_MAX_PATHS; i++)
        if (k.path_inflight_ops[i] || k.path_inflight_bytes[i])
            t__fail(file, line, "path %u not idle: ops %" PRIu64 " bytes %" PRIu64, i,
                    k.path_inflight_ops[i], k.path_inflight_bytes[i]);
    for (;;) {
        rio__tcp_counters(rio__client_transport(c), &tk);
        if (tk.slots_armed == 0)
            break;
        if (t_now_ms() - t0 > 3000)
            t__fail(file, line, "transport still holds %" PRIu64 " slot(s)", tk.slots_armed);
        usleep(2000);
    }
}
#define tu_idle(c) tu__idle((c), __FILE__, __LINE__)

/* Idle, then destroyed; the harness fails the test if any rio__malloc block
 * is left when it ends. */
static inline void tu__close(struct tu *u, const char *file, int line)
{
    tu__idle(u->c, file, line);
    rio_client_destroy(u->c);
    u->c = NULL;
}
#define tu_close(u) tu__close((u), __FILE__, __LINE__)

static inline uint8_t *tu_pattern(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    if (!p)
        T_FAIL("malloc(%zu)", n);
    t_fill_pattern(p, n, seed);
    return p;
}

/* PUT n pattern bytes under key; returns the generation. */
static inline uint64_t tu__put(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                               const char *file, int line)
{
    uint8_t *p = tu_pattern(n, seed);
    struct rio_desc d;
    int ret;

    memset(&d, 0, sizeof(d));
    ret = rio_put(c, key, p, n, NULL, &d);
    free(p);
    if (ret < 0)
        t__fail(file, line, "rio_put(%s, %zu): %d %s", key, n, ret, rio_errname(ret));
    rio_desc_cleanup(&d);
    return d.generation;
}
#define tu_put(c, key, n, seed) tu__put((c), (key), (n), (seed), __FILE__, __LINE__)

/* GET key and check it is exactly the n pattern bytes of seed. */
static inline void tu__get_check(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                                 unsigned flags, const char *file, int line)
{
    uint8_t *b = malloc(n + 1);
    struct rio_call call = {.flags = flags};
    int64_t got, bad;

    memset(b, 0xEE, n + 1);
    got = rio_get(c, key, b, n, &call);
    if (got != (int64_t)n)
        t__fail(file, line, "rio_get(%s): %" PRId64 " %s, want %zu bytes", key, got,
                got < 0 ? rio_errname((int)got) : "", n);
    bad = t_check_pattern(b, n, seed);
    if (bad >= 0)
        t__fail(file, line, "rio_get(%s): first bad byte at offset %" PRId64, key, bad);
    if (b[n] != 0xEE)
        t__fail(file, line, "rio_get(%s) wrote past the object's end", key);
    free(b);
}
#define tu_get_check(c, key, n, seed, flags)                                                       \
    tu__get_check((c), (key), (n), (seed), (flags), __FILE__, __LINE__)

#endif
