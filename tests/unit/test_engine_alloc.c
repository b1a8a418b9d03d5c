/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Allocation-failure sweep (curl's torture mode, for the engine): fail the
 * 1st, 2nd, ... allocation of a PUT+GET in turn. Each run must end in success
 * with exact bytes or a clean -ENOMEM, never a crash, a hang, a torn object
 * or a leaked block, and the client must work normally afterwards.
 */
#include "engine_util.h"

static const size_t SWEEP_SIZE = 200 * EU_KIB + 17; /* 4 chunks, the last partial */

/* One PUT+GET of the sweep object; returns the first error, 0 on success.
 * Checks what can be checked whatever happened. */
static int put_get_once(struct rio_client *c, const uint8_t *src, uint8_t *dst, int atomic,
                        int *put_ret, int64_t *get_ret)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};

    if (atomic)
        call.flags = RIO_ATOMIC;
    *put_ret = rio_put(c, "sweep", src, SWEEP_SIZE, &call, NULL);
    memset(dst, 0, SWEEP_SIZE);
    *get_ret = rio_get(c, "sweep", dst, SWEEP_SIZE, &call);
    if (*put_ret < 0)
        return *put_ret;
    if (*get_ret < 0)
        return (int)*get_ret;
    return 0;
}

static void sweep(const char *url, int atomic)
{
    struct eu e;
    uint8_t *src = eu_pattern_buf(SWEEP_SIZE, 1);
    uint8_t *dst = eu_fill_buf(SWEEP_SIZE, 0);
    unsigned hits = 0, enomem = 0, ok = 0;
    uint64_t n;

    eu_start(&e, url);

    /* A clean run first: how many allocations it makes, and the client's
     * caches (staging buffers kept for reuse) warm up. The baseline is taken
     * after it; eu_close checks that destroy gives everything back. */
    int pr;
    int64_t gr;
    T_EQ(put_get_once(e.c, src, dst, atomic, &pr, &gr), 0);
    T_OK(rio_delete(e.c, "sweep"));
    const int64_t base = rio__alloc_outstanding();
    uint64_t c0 = rio__alloc_calls();
    T_EQ(put_get_once(e.c, src, dst, atomic, &pr, &gr), 0);
    T_PATTERN(dst, SWEEP_SIZE, 1);
    uint64_t clean = rio__alloc_calls() - c0;
    T_OK(rio_delete(e.c, "sweep"));
    T_EQ(rio__alloc_outstanding(), base); /* a second clean run takes nothing more */
    T_GT(clean, 0u);

    for (n = 1; n < 10000; n++) {
        uint64_t before = rio__alloc_calls();
        rio__alloc_fail_nth(n);
        int ret = put_get_once(e.c, src, dst, atomic, &pr, &gr);
        rio__alloc_fail_nth(0);
        int hit = rio__alloc_calls() - before >= n;

        if (pr == 0) {
            /* The PUT committed: the GET returns it whole, or fails cleanly. */
            if (gr >= 0) {
                T_EQ(gr, (int64_t)SWEEP_SIZE);
                T_PATTERN(dst, SWEEP_SIZE, 1);
            } else {
                T_ERR(gr, -ENOMEM);
            }
        } else {
            /* The PUT failed: nothing of it is visible. */
            T_ERR(pr, -ENOMEM);
            if (gr != RIO_ENOTFOUND)
                T_FAIL("n=%" PRIu64 ": PUT failed with -ENOMEM but GET returned %" PRId64 " (%s)",
                       n, gr, gr < 0 ? rio_errname((int)gr) : "data");
        }
        if (ret == 0)
            ok++;
        else
            enomem++;
        eu_idle(e.c);
        /* Clean up and check nothing leaked. */
        int dr = rio_delete(e.c, "sweep");
        T_TRUE(dr == 0 || dr == RIO_ENOTFOUND);
        if (rio__alloc_outstanding() != base)
            T_FAIL("n=%" PRIu64 " (put %d %s, get %" PRId64 " %s): %" PRId64 " block(s) leaked", n,
                   pr, rio_errname(pr), gr, gr < 0 ? rio_errname((int)gr) : "OK",
                   rio__alloc_outstanding() - base);
        /* The client still works. */
        T_EQ(put_get_once(e.c, src, dst, atomic, &pr, &gr), 0);
        T_PATTERN(dst, SWEEP_SIZE, 1);
        T_OK(rio_delete(e.c, "sweep"));
        if (!hit)
            break; /* a run with no injected failure: every allocation was tried */
        hits++;
    }
    fprintf(stderr,
            "  %s%s: clean run %" PRIu64 " allocations; %u injected: %u ENOMEM, %u "
            "recovered\n",
            url, atomic ? " (atomic)" : "", clean, hits, enomem, ok);
    T_GE(hits, clean / 2);
    T_LT(n, 10000u);
    free(src);
    free(dst);
    eu_close(&e);
}

TEST(alloc_fail_sweep_put_get)
{
    sweep("mock://sweep1?paths=2", 0);
}

TEST(alloc_fail_sweep_atomic)
{
    sweep("mock://sweep2?paths=3", 1);
}

/* Client creation under allocation failure: a clean error, no leak. */
TEST(alloc_fail_sweep_client_new)
{
    struct rio_options o;
    unsigned n;

    eu_opts(&o);
    for (n = 1; n < 1000; n++) {
        struct rio_client *c = NULL;
        int64_t base = rio__alloc_outstanding();
        uint64_t before = rio__alloc_calls();
        rio__alloc_fail_nth(n);
        int ret = rio_client_new("mock://cnew?paths=4", &o, &c);
        rio__alloc_fail_nth(0);
        int hit = rio__alloc_calls() - before >= n;
        if (ret == 0) {
            T_NOTNULL(c);
            eu_idle(c);
            rio_client_destroy(c);
        } else {
            T_ERR(ret, -ENOMEM);
            T_NULL(c);
        }
        T_EQ(rio__alloc_outstanding(), base);
        if (!hit)
            break;
    }
    T_GT(n, 3u);
    T_LT(n, 1000u);
}

/*
 * The same sweep over a PUT that replaces an object and asks for the
 * committed descriptor (out_desc): a PUT that returns an error must not have
 * published anything (the old generation stays, whole); one that returns 0
 * has published exactly what its descriptor says.
 */
TEST(alloc_fail_sweep_put_replace_desc)
{
    struct eu e;
    const size_t n = SWEEP_SIZE;
    uint8_t *old = eu_pattern_buf(n, 1), *nw = eu_pattern_buf(n, 2);
    uint8_t *dst = eu_fill_buf(n, 0);
    struct rio_desc d0, d, cur;
    unsigned hits = 0;
    uint64_t k;

    eu_start(&e, "mock://sweep3?paths=2");
    T_OK(rio_put(e.c, "r", old, n, NULL, &d0));
    rio_desc_cleanup(&d0);
    T_OK(rio_put(e.c, "r", old, n, NULL, &d0));        /* warm: a replace, as below */
    const int64_t base = rio__alloc_outstanding() - 1; /* less d0.xxh */

    for (k = 1; k < 10000; k++) {
        uint64_t before = rio__alloc_calls();
        memset(&d, 0, sizeof(d));
        rio__alloc_fail_nth(k);
        int pr = rio_put(e.c, "r", nw, n, NULL, &d);
        rio__alloc_fail_nth(0);
        int hit = rio__alloc_calls() - before >= k;
        eu_idle(e.c);

        T_OK(rio_stat(e.c, "r", &cur));
        int64_t gr = rio_get(e.c, "r", dst, n, NULL);
        T_EQ(gr, (int64_t)n);
        if (pr == 0) {
            T_EQ(cur.generation, d.generation);
            T_EQ(d.size, n);
            T_NOTNULL(d.xxh);
            T_PATTERN(dst, n, 2);
            rio_desc_cleanup(&d);
        } else {
            T_ERR(pr, -ENOMEM);
            if (cur.generation != d0.generation)
                T_FAIL("k=%" PRIu64 ": rio_put returned %s but published generation %" PRIu64
                       " (was %" PRIu64 ")",
                       k, rio_errname(pr), cur.generation, d0.generation);
            T_PATTERN(dst, n, 1);
        }
        rio_desc_cleanup(&cur);
        /* Back to the old content for the next round. */
        rio_desc_cleanup(&d0);
        T_OK(rio_put(e.c, "r", old, n, NULL, &d0));
        T_EQ(rio__alloc_outstanding(), base + 1);
        if (!hit)
            break;
        hits++;
    }
    T_GT(hits, 3u);
    T_LT(k, 10000u);
    rio_desc_cleanup(&d0);
    free(old);
    free(nw);
    free(dst);
    eu_close(&e);
}
