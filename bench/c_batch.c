/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The C side of bench/python_batch.py: the same batch GETs and small GETs
 * through the C API, each timed here in C. python_batch.py builds it as a
 * shared object and calls each function once per repetition (one ctypes
 * call around a whole batch or a whole loop of gets, so ctypes' cost is not
 * in the figures), alternating with the Python package's calls in the same
 * process, on the same CPUs. Public API only:
 *
 *   cc -O2 -shared -fPIC -Iinclude bench/c_batch.c -Lbuild -lrailio \
 *      -Wl,-rpath,$PWD/build -o build/libc_batch.so
 */
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "railio.h"

/* The exported entry points (no header: ctypes declares them). */
struct rio_client *cb_open(const char *url);
void cb_close(struct rio_client *c);
double cb_batch(struct rio_client *c, const char *const *keys, void *const *bufs, unsigned n,
                size_t size);
double cb_get(struct rio_client *c, const char *key, void *buf, size_t size, unsigned calls,
              int with_stats);

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A client for url, or NULL. */
struct rio_client *cb_open(const char *url)
{
    struct rio_client *c;
    return rio_client_new(url, NULL, &c) < 0 ? NULL : c;
}

void cb_close(struct rio_client *c)
{
    rio_client_destroy(c);
}

/* One rio_batch of n GETs of size bytes into bufs: its wall seconds, or a
 * negative error (a failed op, or an op that read another size: -1). */
double cb_batch(struct rio_client *c, const char *const *keys, void *const *bufs, unsigned n,
                size_t size)
{
    struct rio_op *ops = calloc(n ? n : 1, sizeof(*ops));
    if (!ops)
        return -1;
    for (unsigned i = 0; i < n; i++) {
        ops[i].type = RIO_OP_GET;
        ops[i].key = keys[i];
        ops[i].buf = bufs[i];
        ops[i].len = size;
    }
    double t0 = now_s();
    int ok = rio_batch(c, ops, n, NULL);
    double t = now_s() - t0;
    for (unsigned i = 0; ok >= 0 && i < n; i++)
        if (ops[i].result != (int64_t)size)
            ok = ops[i].result < 0 ? (int)ops[i].result : -1;
    free(ops);
    return ok < 0 ? ok : t;
}

/* calls rio_get of key into buf: their wall seconds, or a negative error.
 * with_stats: each call fills a struct rio_stats (as the Python package's
 * calls do, for last_stats), else no struct rio_call at all. */
double cb_get(struct rio_client *c, const char *key, void *buf, size_t size, unsigned calls,
              int with_stats)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    double t0 = now_s();
    for (unsigned i = 0; i < calls; i++) {
        int64_t got = rio_get(c, key, buf, size, with_stats ? &call : NULL);
        if (got != (int64_t)size)
            return got < 0 ? (double)got : -1;
    }
    return now_s() - t0;
}
