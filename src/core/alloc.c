/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The library's allocator: libc underneath, with counters and fail-the-Nth
 * injection so tests can check every allocation failure path and fail on any
 * leaked block. All counters are atomics: allocations happen on the engine
 * thread, transport threads and callers at once.
 */
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/alloc.h"

/* Attempts so far, successful or failed. */
static _Atomic uint64_t alloc_calls;
/* Blocks handed out and not yet freed. */
static _Atomic int64_t alloc_outstanding;
/* The attempt number (in alloc_calls) that must fail; 0 = none. */
static _Atomic uint64_t alloc_fail_at;
/* Bytes of the blocks outstanding (as malloc_usable_size counts them, the
 * same at allocation and at free), and the most since the last reset. */
static _Atomic int64_t alloc_bytes;
static _Atomic int64_t alloc_bytes_peak;

static void bytes_add(void *p)
{
    int64_t now = atomic_fetch_add_explicit(&alloc_bytes, (int64_t)malloc_usable_size(p),
                                            memory_order_relaxed) +
                  (int64_t)malloc_usable_size(p);
    int64_t peak = atomic_load_explicit(&alloc_bytes_peak, memory_order_relaxed);
    while (now > peak &&
           !atomic_compare_exchange_weak_explicit(&alloc_bytes_peak, &peak, now,
                                                  memory_order_relaxed, memory_order_relaxed))
        ;
}

/*
 * Count one attempt; 1 if it is the one chosen to fail. Exactly one attempt
 * matches the target however many threads allocate, and it disarms it.
 */
static int alloc_attempt(void)
{
    uint64_t call = atomic_fetch_add_explicit(&alloc_calls, 1, memory_order_relaxed) + 1;
    uint64_t target = atomic_load_explicit(&alloc_fail_at, memory_order_relaxed);

    if (target == 0 || call != target)
        return 0;
    atomic_compare_exchange_strong(&alloc_fail_at, &target, 0);
    return 1;
}

static void *alloc_account(void *p)
{
    if (p) {
        atomic_fetch_add_explicit(&alloc_outstanding, 1, memory_order_relaxed);
        bytes_add(p);
    }
    return p;
}

void *rio__malloc(size_t n)
{
    if (alloc_attempt())
        return NULL;
    /* malloc(0) may return NULL, which callers would take for failure. */
    return alloc_account(malloc(n ? n : 1));
}

void *rio__calloc(size_t n, size_t size)
{
    if (alloc_attempt())
        return NULL;
    if (size && n > SIZE_MAX / size)
        return NULL;
    if (n == 0 || size == 0)
        n = size = 1;
    return alloc_account(calloc(n, size));
}

void *rio__realloc(void *p, size_t n)
{
    void *q;

    if (!p)
        return rio__malloc(n);
    if (alloc_attempt())
        return NULL;
    /* Never the "free and return NULL" of realloc(p, 0): NULL always means
     * failure and p is still the caller's. */
    int64_t was = (int64_t)malloc_usable_size(p);
    q = realloc(p, n ? n : 1);
    if (q) {
        atomic_fetch_sub_explicit(&alloc_bytes, was, memory_order_relaxed);
        bytes_add(q);
    }
    return q;
}

char *rio__strdup(const char *s)
{
    size_t n;
    char *d;

    if (!s)
        return NULL;
    n = strlen(s) + 1;
    d = rio__malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

#define RIO__HUGE (2u << 20)

void *rio__alloc_aligned(size_t align, size_t n)
{
    void *p = NULL;

    if (align == 0) {
        long pg = sysconf(_SC_PAGESIZE);
        align = pg > 0 ? (size_t)pg : 4096;
    }
    if (align < sizeof(void *))
        align = sizeof(void *);
    if (align & (align - 1))
        return NULL;
    if (alloc_attempt())
        return NULL;
    /* Large data buffers get transparent huge pages where the kernel offers
     * them: the first touch of fresh memory then costs one fault per 2 MiB
     * instead of one per 4 KiB (on a VM whose host reclaims free pages, a
     * fault costs about what a 1 GbE rail takes to deliver the page: docs/bench.md). */
    if (n >= RIO__HUGE && align < RIO__HUGE)
        align = RIO__HUGE;
    if (posix_memalign(&p, align, n ? n : 1) != 0)
        return NULL;
    if (n >= RIO__HUGE)
        (void)madvise(p, n, MADV_HUGEPAGE);
    return alloc_account(p);
}

void rio__free(void *p)
{
    if (!p)
        return;
    atomic_fetch_sub_explicit(&alloc_outstanding, 1, memory_order_relaxed);
    atomic_fetch_sub_explicit(&alloc_bytes, (int64_t)malloc_usable_size(p), memory_order_relaxed);
    free(p);
}

bool rio__alloc_attempt_fails(void)
{
    return alloc_attempt() != 0;
}

void rio__alloc_outstanding_add(int64_t d)
{
    atomic_fetch_add_explicit(&alloc_outstanding, d, memory_order_relaxed);
}

void rio__alloc_fail_nth(uint64_t n)
{
    uint64_t target = 0;

    if (n)
        target = atomic_load_explicit(&alloc_calls, memory_order_relaxed) + n;
    atomic_store(&alloc_fail_at, target);
}

uint64_t rio__alloc_calls(void)
{
    return atomic_load_explicit(&alloc_calls, memory_order_relaxed);
}

int64_t rio__alloc_outstanding(void)
{
    return atomic_load_explicit(&alloc_outstanding, memory_order_relaxed);
}

int64_t rio__alloc_bytes(void)
{
    return atomic_load_explicit(&alloc_bytes, memory_order_relaxed);
}

int64_t rio__alloc_bytes_peak(bool reset)
{
    int64_t now = atomic_load_explicit(&alloc_bytes, memory_order_relaxed);
    if (reset) {
        atomic_store_explicit(&alloc_bytes_peak, now, memory_order_relaxed);
        return now;
    }
    return atomic_load_explicit(&alloc_bytes_peak, memory_order_relaxed);
}

int rio__u64_reserve(uint64_t **a, uint64_t *cap, uint64_t used, uint64_t need)
{
    if (need <= *cap)
        return 0;
    uint64_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    uint64_t *b = rio__malloc(n * sizeof(*b));
    if (!b)
        return -ENOMEM;
    if (used)
        memcpy(b, *a, used * sizeof(*b));
    rio__free(*a);
    *a = b;
    *cap = n;
    return 0;
}
