/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The in-flight budget: backpressure (wait mode) keeps the bytes in flight
 * under the cap however many callers there are; fail-fast mode refuses a call
 * with RIO_EBUSY at once while the budget is full.
 */
#include <stdatomic.h>

#include "engine_util.h"

/* Samples the client's counters until told to stop; remembers the peak. */
struct sampler {
    struct rio_client *c;
    _Atomic int stop;
    uint64_t peak_bytes, peak_ops, samples;
    pthread_t th;
};

static void *sampler_main(void *p)
{
    struct sampler *s = p;
    struct rio_counters k;

    while (!atomic_load(&s->stop)) {
        rio_client_counters(s->c, &k);
        if (k.inflight_bytes > s->peak_bytes)
            s->peak_bytes = k.inflight_bytes;
        if (k.inflight_ops > s->peak_ops)
            s->peak_ops = k.inflight_ops;
        s->samples++;
        eu_sleep_ms(1);
    }
    return NULL;
}

/* A client on url whose in-flight bytes are held to budget, the mode saying
 * what a caller over it gets. */
static void open_budget(struct eu *e, const char *url, uint64_t budget, int mode)
{
    eu_begin(e);
    e->o.budget_bytes = budget;
    e->o.budget_mode = mode;
    eu_open(e, url, &e->o);
}

/* Objects "a" (na bytes of pattern seed) and "b" (nb bytes of pattern
 * seed + 1), then paths 0..npaths-1 slowed to rate bytes per second. */
struct scene {
    size_t na, nb;
    unsigned seed, npaths;
    double rate;
};

/* open_budget, then the scene's objects stored and its paths slowed. */
static void budget_scene(struct eu *e, const char *url, uint64_t budget, int mode,
                         const struct scene *sc)
{
    open_budget(e, url, budget, mode);
    free(eu_put_pattern(e->c, "a", sc->na, sc->seed, NULL));
    free(eu_put_pattern(e->c, "b", sc->nb, sc->seed + 1, NULL));
    for (unsigned i = 0; i < sc->npaths; i++)
        T_OK(rio_mock_set_path(e->c, i, sc->rate, 0));
}

/* Two threads GET at once through a budget of two chunks: both succeed
 * byte-exact and the client never has more than the budget in flight. */
TEST(budget_wait_two_callers)
{
    struct eu e;
    const size_t n = 2 * EU_MIB;
    const uint64_t budget = 2 * EU_CHUNK;

    /* ~20 MiB/s per path: at most two chunks in flight, ~100 ms per GET. */
    const struct scene sc = {n, n, 1, 4, 20.0 * EU_MIB};
    budget_scene(&e, "mock://bwait?paths=4", budget, RIO_BUDGET_WAIT, &sc);

    struct eu_get_job ja = {.c = e.c, .key = "a", .cap = n}, jb = {.c = e.c, .key = "b", .cap = n};
    ja.buf = eu_fill_buf(n, 0);
    jb.buf = eu_fill_buf(n, 0);
    struct sampler s = {.c = e.c};
    T_EQ(pthread_create(&s.th, NULL, sampler_main, &s), 0);
    eu_get_job_start(&ja);
    eu_get_job_start(&jb);
    eu_get_job_join(&ja);
    eu_get_job_join(&jb);
    atomic_store(&s.stop, 1);
    T_EQ(pthread_join(s.th, NULL), 0);

    T_EQ(ja.result, (int64_t)n);
    T_EQ(jb.result, (int64_t)n);
    T_PATTERN(ja.buf, n, 1);
    T_PATTERN(jb.buf, n, 2);
    T_LE(ja.st.peak_inflight_bytes, budget);
    T_LE(jb.st.peak_inflight_bytes, budget);
    T_GT(ja.st.peak_inflight_bytes, 0u);
    T_LE(s.peak_bytes, budget);
    T_LE(s.peak_ops, 2u);
    T_GT(s.samples, 10u);
    /* They ran at the same time, not one after the other. */
    T_LT(ja.t_start_ns, jb.t_end_ns);
    T_LT(jb.t_start_ns, ja.t_end_ns);
    free(ja.buf);
    free(jb.buf);
    eu_close(&e);
}

/* A chunk larger than the budget still moves, alone. */
TEST(budget_smaller_than_chunk)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    open_budget(&e, "mock://bsmall?paths=3", EU_CHUNK / 2, RIO_BUDGET_WAIT);
    uint8_t *src = eu_put_pattern(e.c, "o", n, 3, &e.call);
    T_EQ(e.st.peak_inflight_bytes, EU_CHUNK);
    eu_get_check(e.c, "o", n, 3, &e.call);
    T_EQ(e.st.peak_inflight_bytes, EU_CHUNK);
    free(src);
    eu_close(&e);
}

/* The per-request budget caps one request below the client's budget. */
TEST(budget_per_request)
{
    struct eu e;
    const size_t n = 2 * EU_MIB;

    eu_begin(&e);
    e.o.budget_bytes = 16 * EU_CHUNK;
    e.o.request_budget = 3 * EU_CHUNK;
    eu_open(&e, "mock://breq?paths=4&rate=100M", &e.o);
    uint8_t *src = eu_put_pattern(e.c, "o", n, 4, &e.call);
    T_LE(e.st.peak_inflight_bytes, 3 * EU_CHUNK);
    eu_get_check(e.c, "o", n, 4, &e.call);
    T_LE(e.st.peak_inflight_bytes, 3 * EU_CHUNK);
    T_GE(e.st.peak_inflight_bytes, 2 * EU_CHUNK);
    free(src);
    eu_close(&e);
}

/* Fail-fast: while one caller's slow GET holds the whole budget, another
 * caller's GET is refused at once with RIO_EBUSY; the first one completes. */
TEST(budget_fail_fast_ebusy)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;
    const uint64_t budget = 2 * EU_CHUNK;

    /* 4 MiB/s per path: two chunks in flight for ~15 ms each, ~130 ms in all. */
    const struct scene sc = {n, 4096, 5, 2, 4.0 * EU_MIB};
    budget_scene(&e, "mock://bfail?paths=2", budget, RIO_BUDGET_FAIL, &sc);

    struct eu_get_job ja = {.c = e.c, .key = "a", .cap = n};
    ja.buf = eu_fill_buf(n, 0);
    eu_get_job_start(&ja);
    /* Wait until the slow GET holds the whole budget. */
    struct rio_counters k;
    uint64_t until = t_now_ms() + 2000;
    do {
        rio_client_counters(e.c, &k);
        if (k.inflight_bytes >= budget)
            break;
        eu_sleep_ms(1);
    } while (t_now_ms() < until);
    T_EQ(k.inflight_bytes, budget);

    uint8_t *dst = eu_fill_buf(4096, 0x42);
    uint64_t t0 = eu_now_ns();
    int64_t ret = rio_get(e.c, "b", dst, 4096, NULL);
    uint64_t took_ns = eu_now_ns() - t0;
    T_ERR(ret, RIO_EBUSY);
    T_LT(took_ns, 50 * 1000000ull);
    T_EQ(eu_count_byte(dst, 4096, 0x42), 4096u); /* nothing of it ran */
    /* A PUT is refused the same way, and publishes nothing. */
    T_ERR(rio_put(e.c, "c", dst, 4096, NULL, NULL), RIO_EBUSY);

    eu_get_job_join(&ja);
    T_EQ(ja.result, (int64_t)n);
    T_PATTERN(ja.buf, n, 5);
    T_LE(ja.st.peak_inflight_bytes, budget);
    struct rio_desc d;
    T_ERR(rio_stat(e.c, "c", &d), RIO_ENOTFOUND);

    /* Idle again: the small GET goes through. */
    T_EQ(rio_get(e.c, "b", dst, 4096, NULL), 4096);
    T_PATTERN(dst, 4096, 6);
    free(ja.buf);
    free(dst);
    eu_close(&e);
}

/* Depth clamp: a single-chunk call uses one op, whatever the depth. */
TEST(depth_single_op_call)
{
    struct eu e;

    eu_begin(&e);
    e.o.depth = 16;
    eu_open(&e, "mock://depth1?paths=4", &e.o);
    uint8_t *src = eu_put_pattern(e.c, "o", 1000, 7, &e.call);
    T_EQ(e.st.peak_inflight_bytes, 1000u);
    eu_get_check(e.c, "o", 1000, 7, &e.call);
    T_EQ(e.st.peak_inflight_bytes, 1000u);
    T_EQ(eu_path_ops(&e.st), 1u);
    uint64_t deepest = 0;
    for (unsigned i = 0; i < e.st.npaths; i++)
        if (e.st.path[i].peak_depth > deepest)
            deepest = e.st.path[i].peak_depth;
    T_EQ(deepest, 1u);
    free(src);
    eu_close(&e);
}
