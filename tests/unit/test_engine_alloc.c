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
    struct rio_options o;
    uint8_t *src = eu_pattern_buf(SWEEP_SIZE, 1);
    uint8_t *dst = eu_fill_buf(SWEEP_SIZE, 0);
    unsigned hits = 0, enomem = 0, ok = 0;
    uint64_t n;

    eu_opts(&o);
    eu_open(&e, url, &o);
    const int64_t base = rio__alloc_outstanding();

    /* How many allocations a clean run makes, for the log. */
    uint64_t c0 = rio__alloc_calls();
    int pr;
    int64_t gr;
    T_EQ(put_get_once(e.c, src, dst, atomic, &pr, &gr), 0);
    T_PATTERN(dst, SWEEP_SIZE, 1);
    uint64_t clean = rio__alloc_calls() - c0;
    T_OK(rio_delete(e.c, "sweep"));
    T_EQ(rio__alloc_outstanding(), base);
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
                T_FAIL("n=%" PRIu64 ": PUT failed with -ENOMEM but GET returned %" PRId64
                       " (%s)",
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
            T_FAIL("n=%" PRIu64 " (put %d %s, get %" PRId64 " %s): %" PRId64
                   " block(s) leaked",
                   n, pr, rio_errname(pr), gr, gr < 0 ? rio_errname((int)gr) : "OK",
                   rio__alloc_outstanding() - base);
        /* The client still works. */
        T_EQ(put_get_once(e.c, src, dst, atomic, &pr, &gr), 0);
        T_PATTERN(dst, SWEEP_SIZE, 1);
        T_OK(rio_delete(e.c, "sweep"));
        if (!hit)
            break; /* a run with no injected failure: every allocation was tried */
        hits++;
    }
    fprintf(stderr, "  %s%s: clean run %" PRIu64 " allocations; %u injected: %u ENOMEM, %u "
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
