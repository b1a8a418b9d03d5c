/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers shared by the engine's tests (tests/unit/test_engine_*.c): opening a
 * mock client with small, fast settings, adding faults, byte-exact PUT/GET,
 * and the closing checks every engine test ends with: the client's in-flight
 * counters are all zero (invariant 3), the mock holds no op and saw no stale
 * retry state (invariant 4), and rio_client_destroy returns every rio__malloc
 * block the client took (no leak).
 *
 * The helpers that assert are macros over eu__*(..., __FILE__, __LINE__) so a
 * failure names the test's line, not this file's.
 */
#ifndef RIO_TEST_ENGINE_UTIL_H
#define RIO_TEST_ENGINE_UTIL_H

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/internal.h"
#include "railio.h"
#include "railio_mock.h"
#include "t.h"

#define EU_KIB 1024ull
#define EU_MIB (1024ull * 1024ull)

/* Sanitizer builds run several times slower: timing thresholds relax. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define EU_SANITIZED 1
#else
#define EU_SANITIZED 0
#endif
#if defined(__SANITIZE_THREAD__)
#define EU_TSAN 1
#else
#define EU_TSAN 0
#endif

/* The chunk size most engine tests use: small, so a 1-8 MiB object has many. */
#define EU_CHUNK (64 * EU_KIB)

/* A client under test and what it must give back. */
struct eu {
    struct rio_client *c;
    int64_t alloc0; /* rio__alloc_outstanding() before rio_client_new */
};

/*
 * Options for fast tests: 64 KiB chunks, a fixed seed, short backoff and
 * cooldown so retries and path recovery take milliseconds, an op timeout and
 * deadline that bound a hung test well under the harness timeout.
 */
static inline void eu_opts(struct rio_options *o)
{
    rio_options_init(o);
    o->chunk_size = EU_CHUNK;
    o->seed = 0x5eed;
    o->backoff_base_ms = 1;
    o->backoff_cap_ms = 20;
    o->cooldown_base_ms = 10;
    o->cooldown_cap_ms = 100;
    o->op_timeout_ms = 2000;
    o->deadline_ms = 10000;
}

static inline uint64_t eu_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline void eu_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A plain-malloc buffer filled with the harness pattern for seed. */
static inline uint8_t *eu_pattern_buf(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        T_FAIL("malloc(%zu) failed", n);
    t_fill_pattern(p, n, seed);
    return p;
}

/* A plain-malloc buffer filled with one byte value. Every page is written
 * through a volatile pointer so the compiler cannot turn malloc+memset(0) into
 * an untouched calloc: timing tests must not pay first-touch page faults
 * inside the transport. */
static inline uint8_t *eu_fill_buf(size_t n, int byte)
{
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        T_FAIL("malloc(%zu) failed", n);
    memset(p, byte, n);
    for (size_t i = 0; i < n; i += 4096)
        ((volatile uint8_t *)p)[i] = (uint8_t)byte;
    return p;
}

/* Number of bytes equal to v in p[0..n). */
static inline size_t eu_count_byte(const uint8_t *p, size_t n, uint8_t v)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += p[i] == v;
    return k;
}

/* ------------------------------------------------------------ client */

static inline void eu__open(struct eu *e, const char *url, const struct rio_options *o,
                            const char *file, int line)
{
    int ret;

    e->c = NULL;
    e->alloc0 = rio__alloc_outstanding();
    ret = rio_client_new(url, o, &e->c);
    if (ret < 0)
        t__fail(file, line, "rio_client_new(%s): %d %s (%s)", url, ret, rio_errname(ret),
                rio_strerror(ret));
    if (!e->c)
        t__fail(file, line, "rio_client_new(%s) returned 0 and no client", url);
}
#define eu_open(e, url, o) eu__open((e), (url), (o), __FILE__, __LINE__)

/* Every in-flight counter of the client is zero (invariant 3), and the mock
 * holds no op and never saw an attempt submitted with stale state. */
static inline void eu__idle(struct rio_client *c, const char *file, int line)
{
    struct rio_counters k;
    struct rio_mock_counters m;

    rio_client_counters(c, &k);
    t__check_u(file, line, "counters.inflight_ops", "0", T__EQ, k.inflight_ops, 0);
    t__check_u(file, line, "counters.inflight_bytes", "0", T__EQ, k.inflight_bytes, 0);
    t__check_u(file, line, "counters.requests", "0", T__EQ, k.requests, 0);
    t__check_u(file, line, "counters.budget_reserved", "0", T__EQ, k.budget_reserved, 0);
    for (unsigned i = 0; i < RIO_MAX_PATHS; i++) {
        if (k.path_inflight_ops[i] || k.path_inflight_bytes[i])
            t__fail(file, line, "path %u: %" PRIu64 " ops, %" PRIu64 " bytes still in flight", i,
                    k.path_inflight_ops[i], k.path_inflight_bytes[i]);
    }
    memset(&m, 0, sizeof(m));
    rio_mock_counters(c, &m);
    t__check_u(file, line, "mock.inflight", "0", T__EQ, m.inflight, 0);
    t__check_u(file, line, "mock.rollback_violations", "0", T__EQ, m.rollback_violations, 0);
}
#define eu_idle(c) eu__idle((c), __FILE__, __LINE__)

/* Wait up to ms for the client to become idle (only for the no-fence test,
 * where a call returns before its ops are drained), then check it. */
static inline void eu__wait_idle(struct rio_client *c, unsigned ms, const char *file, int line)
{
    uint64_t end = eu_now_ns() + (uint64_t)ms * 1000000ull;
    struct rio_counters k;

    for (;;) {
        rio_client_counters(c, &k);
        if (!k.inflight_ops && !k.requests)
            break;
        if (eu_now_ns() > end)
            break;
        eu_sleep_ms(2);
    }
    eu__idle(c, file, line);
}
#define eu_wait_idle(c, ms) eu__wait_idle((c), (ms), __FILE__, __LINE__)

/* The closing checks of every engine test: idle counters, destroy, and every
 * rio__malloc block of the client given back. */
static inline void eu__close(struct eu *e, const char *file, int line)
{
    eu__idle(e->c, file, line);
    rio_client_destroy(e->c);
    e->c = NULL;
    t__check_i(file, line, "rio__alloc_outstanding() after destroy", "before rio_client_new", T__EQ,
               rio__alloc_outstanding(), e->alloc0);
}
#define eu_close(e) eu__close((e), __FILE__, __LINE__)

/* ------------------------------------------------------------ faults */

static inline void eu__fault(struct rio_client *c, const char *spec, const char *file, int line)
{
    struct rio_mock_fault f;
    int ret;

    memset(&f, 0, sizeof(f));
    ret = rio_mock_fault_parse(spec, &f);
    if (ret < 0)
        t__fail(file, line, "rio_mock_fault_parse(\"%s\"): %d %s", spec, ret, rio_errname(ret));
    ret = rio_mock_fault_add(c, &f);
    if (ret < 0)
        t__fail(file, line, "rio_mock_fault_add(\"%s\"): %d %s", spec, ret, rio_errname(ret));
}
/* Parse and add one fault spec ("short:chunk=3:bytes=1000:count=1"). */
#define eu_fault(c, spec) eu__fault((c), (spec), __FILE__, __LINE__)

static inline uint64_t eu_faults_fired(struct rio_client *c)
{
    struct rio_mock_counters m;

    memset(&m, 0, sizeof(m));
    rio_mock_counters(c, &m);
    return m.faults_fired;
}

/* ------------------------------------------------------------ data */

/* PUT n bytes of pattern seed under key; returns the source buffer (caller frees). */
static inline uint8_t *eu__put_pattern(struct rio_client *c, const char *key, size_t n,
                                       uint64_t seed, const struct rio_call *call, const char *file,
                                       int line)
{
    uint8_t *src = eu_pattern_buf(n, seed);
    int ret = rio_put(c, key, src, n, call, NULL);

    if (ret != 0)
        t__fail(file, line, "rio_put(%s, %zu bytes): %d %s (%s)", key, n, ret, rio_errname(ret),
                rio_strerror(ret));
    return src;
}
#define eu_put_pattern(c, key, n, seed, call)                                                      \
    eu__put_pattern((c), (key), (n), (seed), (call), __FILE__, __LINE__)

/* GET key into a fresh buffer and check it is the pattern seed, n bytes. */
static inline void eu__get_check(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                                 const struct rio_call *call, const char *file, int line)
{
    uint8_t *dst = eu_fill_buf(n, 0xA5);
    int64_t got = rio_get(c, key, dst, n, call);
    int64_t bad;

    if (got != (int64_t)n)
        t__fail(file, line, "rio_get(%s): %" PRId64 " %s, want %zu bytes", key, got,
                got < 0 ? rio_errname((int)got) : "", n);
    bad = t_check_pattern(dst, n, seed);
    if (bad >= 0)
        t__fail(file, line, "rio_get(%s): byte %" PRId64 " (chunk %" PRIu64 ") differs: 0x%02x",
                key, bad, (uint64_t)bad / (uint64_t)EU_CHUNK, dst[bad]);
    free(dst);
}
#define eu_get_check(c, key, n, seed, call)                                                        \
    eu__get_check((c), (key), (n), (seed), (call), __FILE__, __LINE__)

/* Sum of what every path carried, and the number of paths that carried any. */
static inline uint64_t eu_path_bytes(const struct rio_stats *st, unsigned *used)
{
    uint64_t b = 0;
    unsigned u = 0;

    for (unsigned i = 0; i < st->npaths && i < RIO_MAX_PATHS; i++) {
        b += st->path[i].bytes;
        u += st->path[i].bytes > 0;
    }
    if (used)
        *used = u;
    return b;
}

static inline uint64_t eu_path_ops(const struct rio_stats *st)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < st->npaths && i < RIO_MAX_PATHS; i++)
        n += st->path[i].ops;
    return n;
}

/* One line of stats on stderr, for the log of a failing or a timing test. */
static inline void eu_stats_print(const char *what, const struct rio_stats *st)
{
    fprintf(stderr,
            "  %s: %" PRIu64 " B in %.1f ms = %.1f MB/s, chunks %" PRIu64 ", retries %" PRIu64
            ", peak %" PRIu64 " B, verdict %s (%s)\n",
            what, st->bytes, st->elapsed_ns / 1e6, st->goodput_mbps, st->chunks, st->retries_total,
            st->peak_inflight_bytes, rio_verdict_name(st->verdict), st->verdict_text);
    for (unsigned i = 0; i < st->npaths && i < RIO_MAX_PATHS; i++)
        fprintf(stderr,
                "    path %u: %" PRIu64 " B, %" PRIu64 " ops, %" PRIu64
                " errors, %.1f MB/s, busy %.1f ms, state %d\n",
                i, st->path[i].bytes, st->path[i].ops, st->path[i].errors, st->path[i].rate_mbps,
                st->path[i].busy_ns / 1e6, st->path[i].state);
}

/* ------------------------------------------------------------ threads */

/* A GET run on its own thread. */
struct eu_get_job {
    struct rio_client *c;
    const char *key;
    void *buf;
    size_t cap;
    struct rio_call call;
    struct rio_stats st;
    int64_t result;
    uint64_t t_start_ns, t_end_ns;
    pthread_t th;
};

static inline void *eu__get_job_main(void *arg)
{
    struct eu_get_job *j = arg;

    j->call.stats = &j->st;
    j->t_start_ns = eu_now_ns();
    j->result = rio_get(j->c, j->key, j->buf, j->cap, &j->call);
    j->t_end_ns = eu_now_ns();
    return NULL;
}

static inline void eu_get_job_start(struct eu_get_job *j)
{
    T_EQ(pthread_create(&j->th, NULL, eu__get_job_main, j), 0);
}

static inline void eu_get_job_join(struct eu_get_job *j)
{
    T_EQ(pthread_join(j->th, NULL), 0);
}

#endif
