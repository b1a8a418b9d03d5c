/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine's tests (tests/unit/test_engine_*.c) under their short names:
 * a mock client with small, fast settings (t_opts T_PROFILE_ENGINE), faults,
 * byte-exact PUT/GET, and the closing checks every engine test ends with:
 * the client's in-flight counters are all zero (invariant 3), the mock holds
 * no op and saw no stale retry state (invariant 4), and rio_client_destroy
 * returns every rio__malloc block the client took (no leak). The helpers
 * themselves are in tlib.c.
 */
#ifndef RIO_TEST_ENGINE_UTIL_H
#define RIO_TEST_ENGINE_UTIL_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/internal.h"
#include "railio.h"
#include "railio_mock.h"
#include "t.h"
#include "tlib.h"

#define EU_KIB T_KIB
#define EU_MIB T_MIB
#define EU_SANITIZED T_SANITIZED
#define EU_TSAN T_TSAN

/* The chunk size most engine tests use: small, so a 1-8 MiB object has many. */
#define EU_CHUNK (64 * EU_KIB)

/* A client under test, what it must give back, and the options and call
 * record most tests set up the same way. */
struct eu {
    struct rio_client *c;
    int64_t alloc0;       /* rio__alloc_outstanding() before rio_client_new */
    struct rio_options o; /* eu_begin: the engine profile, for the test to adjust */
    struct rio_stats st;  /* filled by every call made with &e->call */
    struct rio_call call; /* .stats = &st */
    uint8_t *src;         /* eu_open_put's source buffer; eu_close frees it */
};

/* Engine-profile options in e->o, a zeroed call record reporting into e->st;
 * no client yet (eu_open(e, url, &e->o) makes one). */
static inline void eu_begin(struct eu *e)
{
    memset(e, 0, sizeof(*e));
    t_opts(&e->o, T_PROFILE_ENGINE);
    e->call.stats = &e->st;
}

#define eu_opts(o) t_opts((o), T_PROFILE_ENGINE)
#define eu_now_ns t_now_ns
#define eu_sleep_ms t_sleep_ms
#define eu_pattern_buf t_pattern_buf
#define eu_fill_buf t_fill_buf
#define eu_count_byte t_count_byte

#define eu_open(e, url, o)                                                                         \
    do {                                                                                           \
        (e)->alloc0 = t_alloc_now();                                                               \
        (e)->src = NULL;                                                                           \
        (e)->c = t__client_new((url), (o), __FILE__, __LINE__);                                    \
    } while (0)
/* eu_begin(e), then eu_open(e, url, &e->o). */
#define eu_start(e, url)                                                                           \
    do {                                                                                           \
        eu_begin(e);                                                                               \
        eu_open((e), (url), &(e)->o);                                                              \
    } while (0)

/* The commonest start: a client on url with e->o, object "o" PUT with n
 * bytes of pattern seed. Returns the source buffer, which e owns (eu_close
 * frees it). */
static inline uint8_t *eu__open_put(struct eu *e, const char *url, size_t n, uint64_t seed,
                                    const char *file, int line)
{
    e->alloc0 = t_alloc_now();
    e->c = t__client_new(url, &e->o, file, line);
    e->src = t__put_pattern(e->c, "o", n, seed, NULL, 1, NULL, file, line);
    return e->src;
}
#define eu_open_put(e, url, n, seed) eu__open_put((e), (url), (n), (seed), __FILE__, __LINE__)
/* eu_begin(e), then eu_open_put. */
#define eu_start_put(e, url, n, seed) (eu_begin(e), eu_open_put((e), (url), (n), (seed)))
/* eu_begin(e), the option changes given as expressions on (e)->o (one or more,
 * comma-separated: `e.o.depth = 4, e.o.paths = 1`), then eu_open_put: the start
 * of a test that needs other options than the engine profile's. */
#define eu_start_put_o(e, url, n, seed, ...)                                                       \
    (eu_begin(e), __VA_ARGS__, eu_open_put((e), (url), (n), (seed)))
/* The same without the PUT: eu_begin(e), the option changes, eu_open(e, url, &e->o). */
#define eu_start_o(e, url, ...)                                                                    \
    do {                                                                                           \
        eu_begin(e);                                                                               \
        __VA_ARGS__;                                                                               \
        eu_open((e), (url), &(e)->o);                                                              \
    } while (0)
/* e owns buf from now on (eu_close frees it); one buffer per client, and
 * not with eu_open_put's. Returns buf. */
static inline uint8_t *eu_keep(struct eu *e, uint8_t *buf)
{
    T_TRUE(e->src == NULL);
    e->src = buf;
    return buf;
}
/* eu_start(e, url) and n bytes of pattern seed, not PUT, that e owns (eu_keep):
 * the source of a test that writes the object its own way. */
static inline uint8_t *eu__start_src(struct eu *e, const char *url, size_t n, uint64_t seed,
                                     const char *file, int line)
{
    eu_begin(e);
    e->alloc0 = t_alloc_now();
    e->c = t__client_new(url, &e->o, file, line);
    return eu_keep(e, t_pattern_buf(n, seed));
}
#define eu_start_src(e, url, n, seed) eu__start_src((e), (url), (n), (seed), __FILE__, __LINE__)
#define eu_idle(c) t__idle((c), __FILE__, __LINE__)
#define eu_wait_idle(c, ms) t__wait_idle((c), (ms), __FILE__, __LINE__)
#define eu_close(e)                                                                                \
    do {                                                                                           \
        t__close((e)->c, (e)->alloc0, __FILE__, __LINE__);                                         \
        (e)->c = NULL;                                                                             \
        free((e)->src);                                                                            \
        (e)->src = NULL;                                                                           \
    } while (0)

#define eu_fault(c, spec) t__fault((c), (spec), __FILE__, __LINE__)
/* The faults so far cleared (rio_mock_faults_clear), then spec the only one:
 * the next step of a test that tries one fault after another. */
#define eu_refault(c, spec)                                                                        \
    do {                                                                                           \
        rio_mock_faults_clear(c);                                                                  \
        eu_fault((c), (spec));                                                                     \
    } while (0)
#define eu_faults_fired t_faults_fired

/* PUT n bytes of pattern seed under key; returns the source buffer (caller frees). */
#define eu_put_pattern(c, key, n, seed, call)                                                      \
    t__put_pattern((c), (key), (n), (seed), (call), 1, NULL, __FILE__, __LINE__)
/* GET key into a fresh buffer and check it is the pattern seed, n bytes. */
#define eu_get_check(c, key, n, seed, call)                                                        \
    t__get_check((c), (key), (n), (seed), (call), __FILE__, __LINE__)

/* rio_get(c, key, dst, n, call), timed: *took_ms is how long the call took
 * (wall clock, ms), for the tests that bound how soon a failure ends. */
static inline int64_t eu_get_ms(struct rio_client *c, const char *key, void *dst, size_t n,
                                const struct rio_call *call, uint64_t *took_ms)
{
    uint64_t t0 = t_now_ms();
    int64_t ret = rio_get(c, key, dst, n, call);
    *took_ms = t_now_ms() - t0;
    return ret;
}

#define eu_path_bytes t_path_bytes
#define eu_path_ops t_path_ops
#define eu_stats_print t_stats_print

#define eu_get_job t_get_job
#define eu_get_job_start t_get_job_start
#define eu_get_job_join t_get_job_join

#endif
