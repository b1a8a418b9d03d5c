/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: counting allocator and failure injection (src/core/alloc.c). */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "t.h"

TEST(outstanding_counts)
{
    int64_t base = rio__alloc_outstanding();
    uint64_t calls = rio__alloc_calls();
    void *a, *b, *c, *d;
    char *s;

    a = rio__malloc(10);
    b = rio__calloc(4, 8);
    c = rio__alloc_aligned(4096, 100);
    s = rio__strdup("hello");
    T_NOTNULL(a);
    T_NOTNULL(b);
    T_NOTNULL(c);
    T_NOTNULL(s);
    T_STREQ(s, "hello");
    T_EQ((uintptr_t)c % 4096, 0);
    T_EQ(((unsigned char *)b)[31], 0);
    T_EQ(rio__alloc_outstanding(), base + 4);
    T_EQ(rio__alloc_calls(), calls + 4);

    /* realloc moves a block: the count of live blocks does not change. */
    d = rio__realloc(a, 1 << 20);
    T_NOTNULL(d);
    T_EQ(rio__alloc_outstanding(), base + 4);
    a = rio__realloc(NULL, 16);
    T_EQ(rio__alloc_outstanding(), base + 5);

    rio__free(a);
    rio__free(b);
    rio__free(c);
    rio__free(d);
    rio__free(s);
    rio__free(NULL);
    T_EQ(rio__alloc_outstanding(), base);
}

TEST(zero_sizes_are_not_failures)
{
    void *a = rio__malloc(0), *b = rio__calloc(0, 8), *c = rio__alloc_aligned(0, 0);

    T_NOTNULL(a);
    T_NOTNULL(b);
    T_NOTNULL(c);
    a = rio__realloc(a, 0);
    T_NOTNULL(a);
    rio__free(a);
    rio__free(b);
    rio__free(c);
}

TEST(calloc_overflow)
{
    int64_t base = rio__alloc_outstanding();

    T_NULL(rio__calloc(SIZE_MAX / 2, 3));
    T_NULL(rio__calloc(3, SIZE_MAX / 2));
    T_NULL(rio__alloc_aligned(3000, 10)); /* not a power of two */
    T_EQ(rio__alloc_outstanding(), base);
}

TEST(fail_nth)
{
    int64_t base = rio__alloc_outstanding();
    void *p[5];
    int i;

    rio__alloc_fail_nth(3);
    for (i = 0; i < 5; i++)
        p[i] = rio__malloc(8);
    T_NOTNULL(p[0]);
    T_NOTNULL(p[1]);
    T_NULL(p[2]);
    T_NOTNULL(p[3]); /* one-shot */
    T_NOTNULL(p[4]);
    T_EQ(rio__alloc_outstanding(), base + 4);
    for (i = 0; i < 5; i++)
        rio__free(p[i]);

    /* Every kind of allocation honours it, and 0 disarms it. */
    rio__alloc_fail_nth(1);
    T_NULL(rio__calloc(1, 1));
    rio__alloc_fail_nth(1);
    T_NULL(rio__strdup("x"));
    rio__alloc_fail_nth(1);
    T_NULL(rio__alloc_aligned(64, 64));
    p[0] = rio__malloc(1);
    rio__alloc_fail_nth(1);
    T_NULL(rio__realloc(p[0], 100)); /* p[0] still valid and counted */
    T_EQ(rio__alloc_outstanding(), base + 1);
    rio__free(p[0]);
    rio__alloc_fail_nth(1);
    rio__alloc_fail_nth(0);
    p[0] = rio__malloc(1);
    T_NOTNULL(p[0]);
    rio__free(p[0]);
    T_EQ(rio__alloc_outstanding(), base);
}

TEST(torture_loop_pattern)
{
    /* The curl-style loop the other tests use: fail the 1st, 2nd, ...
     * allocation of an operation until it succeeds, checking no leak. */
    int64_t base = rio__alloc_outstanding();
    unsigned n, failures = 0;

    for (n = 1;; n++) {
        char *a, *b;

        rio__alloc_fail_nth(n);
        a = rio__strdup("one");
        b = a ? rio__strdup("two") : NULL;
        rio__alloc_fail_nth(0);
        if (a && b) {
            rio__free(a);
            rio__free(b);
            break;
        }
        failures++;
        rio__free(a);
        T_EQ(rio__alloc_outstanding(), base);
    }
    T_EQ(n, 3);
    T_EQ(failures, 2);
}

#define THREADS 4
#define PER_THREAD 20000

static void *alloc_many(void *arg)
{
    uintptr_t nulls = 0;
    int i;

    (void)arg;
    for (i = 0; i < PER_THREAD; i++) {
        void *p = rio__malloc(32);
        if (!p)
            nulls++;
        rio__free(p);
    }
    return (void *)nulls;
}

TEST(fail_nth_threads_exactly_once)
{
    int64_t base = rio__alloc_outstanding();
    uint64_t calls = rio__alloc_calls();
    pthread_t th[THREADS];
    uintptr_t total = 0;
    void *r;
    int i;

    rio__alloc_fail_nth(PER_THREAD);
    for (i = 0; i < THREADS; i++)
        T_EQ(pthread_create(&th[i], NULL, alloc_many, NULL), 0);
    for (i = 0; i < THREADS; i++) {
        T_EQ(pthread_join(th[i], &r), 0);
        total += (uintptr_t)r;
    }
    T_EQ(total, 1);
    T_EQ(rio__alloc_calls(), calls + THREADS * PER_THREAD);
    T_EQ(rio__alloc_outstanding(), base);
}

/* Still reachable, so LeakSanitizer does not report it either. */
static void *kept;

TEST(leak_check_can_be_disabled)
{
    t_leak_check(0);
    kept = rio__malloc(1); /* deliberately kept past the test */
    T_NOTNULL(kept);
}
