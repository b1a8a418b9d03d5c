/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the railio:// transport's tests (tests/integration/
 * test_tcp*.c): a railiod started from server_env.h, clients opened on it
 * with small fast settings (t_opts T_PROFILE_TCP), and the closing checks
 * every test ends with (tlib.h's t_idle: the engine's in-flight counters are
 * zero and the transport holds no request slot, tombstones of cancelled ops
 * drained). The harness fails a test that leaves any rio__malloc block behind.
 */
#ifndef RIO_TEST_TCP_UTIL_H
#define RIO_TEST_TCP_UTIL_H

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "railio.h"
#include "server_env.h"
#include "t.h"
#include "tlib.h"
#include "transport/tcp.h"

#define TU_KIB T_KIB
#define TU_MIB T_MIB
#define TU_CHUNK (64u * 1024u)
#define TU_SANITIZED T_SANITIZED

struct tu {
    struct rio_client *c;
};

#define tu_opts(o) t_opts((o), T_PROFILE_TCP)

/* "railio://ADDR[?params]" for the server's first listener. */
void tu_url(char *out, size_t cap, const struct srv_env *e, const char *params);

#define tu_open(u, url, o) ((u)->c = t__client_new((url), (o), __FILE__, __LINE__))
/* The transport's counters; fails the test if c is not a railio:// client. */
struct rio__tcp_counters tu_tcp(struct rio_client *c);
#define tu_idle(c) t__idle((c), __FILE__, __LINE__)
/* Idle, then destroyed; the harness fails the test if any rio__malloc block
 * is left when it ends. */
#define tu_close(u)                                                                                \
    do {                                                                                           \
        t__close((u)->c, -1, __FILE__, __LINE__);                                                  \
        (u)->c = NULL;                                                                             \
    } while (0)
#define tu_pattern t_pattern_buf

/* PUT n pattern bytes under key; returns the generation. */
#define tu_put(c, key, n, seed) tu__put((c), (key), (n), (seed), __FILE__, __LINE__)
uint64_t tu__put(struct rio_client *c, const char *key, size_t n, uint64_t seed, const char *file,
                 int line);
/* GET key with call flags and check it is exactly the n pattern bytes of seed. */
#define tu_get_check(c, key, n, seed, flags_)                                                      \
    do {                                                                                           \
        struct rio_call tu__call = {.flags = (flags_)};                                            \
        t__get_check((c), (key), (n), (seed), &tu__call, __FILE__, __LINE__);                      \
    } while (0)

/* rio_get_stream's callback hashing what streams (h->st an XXH3_state_t
 * reset by the caller) and counting it: nothing is kept whole. */
struct tu_hasher {
    void *st;
    uint64_t n;
};
int tu_hash_cb(void *arg, const void *data, size_t len);

/* A railiod started with extra args (NULL: none) and a client on its first
 * listener with the tests' options o and URL params (NULL: none). */
struct tu_env {
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
};
void tu_env_start(struct tu_env *x, const char *const *args, const char *params);
/* The client closed (tu_close), the server stopped: it exits 0. */
void tu_env_stop(struct tu_env *x);

#endif
