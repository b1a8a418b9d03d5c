/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * No whole-request deadline by default (issue 17 item 6): a 130 MB PUT at
 * 1 MB/s failed after 120 s with "request deadline passed". Now the
 * default deadline is none, deadline=0 / deadline=none and RIO_DEADLINE_MS
 * = 0 / none say so explicitly, a slow transfer that keeps moving runs as
 * long as it needs (op_timeout bounds each chunk op, not the request), and
 * a stalled one still ends (op timeouts and retries).
 */
#include "engine_util.h"

static uint32_t effective_deadline(const char *url, uint32_t in_struct)
{
    struct rio_options o, eff;
    struct rio_client *c;

    eu_opts(&o);
    o.deadline_ms = in_struct;
    T_OK(rio_client_new(url, &o, &c));
    rio_client_options(c, &eff);
    rio_client_destroy(c);
    return eff.deadline_ms;
}

TEST(default_deadline_is_none)
{
    unsetenv("RIO_DEADLINE_MS");
    T_EQ(effective_deadline("mock://dl0", 0), (uint32_t)RIO_DEADLINE_NONE);
    struct rio_options o;
    rio_options_init(&o);
    T_EQ(effective_deadline("mock://dl0", o.deadline_ms), (uint32_t)RIO_DEADLINE_NONE);
    T_EQ(effective_deadline("mock://dl1?deadline=0", 0), (uint32_t)RIO_DEADLINE_NONE);
    T_EQ(effective_deadline("mock://dl1?deadline=none", 0), (uint32_t)RIO_DEADLINE_NONE);
    T_EQ(effective_deadline("mock://dl1?deadline=None", 0), (uint32_t)RIO_DEADLINE_NONE);
    T_EQ(effective_deadline("mock://dl1?deadline=30s", 0), 30000u);
    setenv("RIO_DEADLINE_MS", "none", 1);
    T_EQ(effective_deadline("mock://dl2", 0), (uint32_t)RIO_DEADLINE_NONE);
    setenv("RIO_DEADLINE_MS", "0", 1);
    T_EQ(effective_deadline("mock://dl2", 0), (uint32_t)RIO_DEADLINE_NONE);
    setenv("RIO_DEADLINE_MS", "1500", 1);
    T_EQ(effective_deadline("mock://dl2", 0), 1500u);
    /* The struct over the environment, the URL over the environment. */
    T_EQ(effective_deadline("mock://dl2", 700), 700u);
    T_EQ(effective_deadline("mock://dl2?deadline=none", 0), (uint32_t)RIO_DEADLINE_NONE);
    unsetenv("RIO_DEADLINE_MS");

    /* "none" is a word for no limit only where no limit makes sense. */
    struct rio_client *c;
    eu_opts(&o);
    o.op_timeout_ms = 0;
    T_ERR(rio_client_new("mock://dl3?op_timeout=none", &o, &c), RIO_EINVAL);
}

/*
 * A PUT much longer than its op timeout: 20 chunks of 64 KiB at 640 KiB/s
 * on one path with one op in flight (100 ms a chunk, 2 s in all) under a
 * 300 ms op timeout and the default deadline. Each op ends well within its
 * timeout, so nothing is retried and the whole PUT completes.
 */
TEST(slow_put_not_cut_off)
{
    struct eu e;
    const size_t n = 20 * EU_CHUNK;

    unsetenv("RIO_DEADLINE_MS");
    eu_begin(&e);
    e.o.deadline_ms = 0; /* the default */
    e.o.op_timeout_ms = 300;
    e.o.paths = 1;
    e.o.depth = 1;
    eu_open(&e, "mock://dlslow", &e.o);
    struct rio_options eff;
    rio_client_options(e.c, &eff);
    T_EQ(eff.deadline_ms, (uint32_t)RIO_DEADLINE_NONE);
    T_OK(rio_mock_set_path(e.c, 0, 640.0 * EU_KIB, 0));
    uint8_t *src = eu_keep(&e, eu_pattern_buf(n, 5));
    uint64_t t0 = eu_now_ns();
    T_OK(rio_put(e.c, "slow", src, n, &e.call, NULL));
    uint64_t ms = (eu_now_ns() - t0) / 1000000;
    T_GE(ms, 5 * 300u); /* far past one op timeout */
    T_EQ(e.st.retries_total, 0u);
    T_OK(rio_mock_set_path(e.c, 0, 0, 0));
    eu_get_check(e.c, "slow", n, 5, NULL);
    eu_close(&e);
}

/* A transfer that stops moving still ends without a deadline: every try
 * of the stalled chunk times out, and the tries run out. */
TEST(stall_ends_without_deadline)
{
    struct eu e;
    const size_t n = 4 * EU_CHUNK;

    unsetenv("RIO_DEADLINE_MS");
    eu_begin(&e);
    e.o.deadline_ms = 0;
    e.o.op_timeout_ms = 150;
    e.o.retry_attempts = 3;
    e.o.cooldown_base_ms = 10;
    e.o.cooldown_cap_ms = 20;
    eu_open(&e, "mock://dlstall?paths=2", &e.o);
    eu_fault(e.c, "stall:op=write");
    uint8_t *src = eu_keep(&e, eu_pattern_buf(n, 6));
    uint64_t t0 = eu_now_ns();
    int ret = rio_put(e.c, "stuck", src, n, &e.call, NULL);
    uint64_t ms = (eu_now_ns() - t0) / 1000000;
    T_LT(ret, 0);
    T_NE(ret, RIO_EDEADLINE);
    T_GE(e.st.retries[RIO_CLASS_TIMEOUT], 1u);
    T_LT(ms, 10000u);
    rio_mock_faults_clear(e.c);
    eu_close(&e);
}

/*
 * rio_get_alloc's lookup is bounded by the call's deadline and cancel token
 * like rio_get's: a lookup that keeps failing with a retryable error, with
 * backoffs of 400 ms, ends at a 100 ms deadline (RIO_EDEADLINE), and at
 * once when the token has fired (RIO_ECANCELED), its failed tries counted
 * in the call's stats. It used to look up as rio_stat does, bounded by the
 * client's deadline only: both ran through every backoff (about 1 s).
 */
TEST(get_alloc_lookup_bounded_by_call)
{
    struct eu e;
    struct rio_cancel *cx;
    void *p = (void *)&e;
    uint64_t t0, ms;

    unsetenv("RIO_DEADLINE_MS");
    eu_begin(&e);
    e.o.deadline_ms = 0; /* none */
    e.o.retry_attempts = 5;
    e.o.backoff_base_ms = 400;
    e.o.backoff_cap_ms = 400;
    eu_open_put(&e, "mock://dlalloc", 3 * EU_CHUNK, 7);
    eu_fault(e.c, "meta_error:op=lookup:error=RIO_ESERVER");

    /* rio_get, for comparison, and rio_get_alloc: the call's deadline. */
    uint8_t *dst = eu_fill_buf(3 * EU_CHUNK, 0);
    e.call.deadline_ms = 100;
    t0 = t_now_ms();
    T_ERR(rio_get(e.c, "o", dst, 3 * EU_CHUNK, &e.call), RIO_EDEADLINE);
    T_LT(t_now_ms() - t0, 350u);
    free(dst);
    memset(&e.st, 0xff, sizeof(e.st));
    t0 = t_now_ms();
    T_ERR(rio_get_alloc(e.c, "o", &p, &e.call), RIO_EDEADLINE);
    ms = t_now_ms() - t0;
    T_NULL(p);
    T_LT(ms, 350u);
    T_GE(e.st.retries[RIO_CLASS_SERVER], 1u);
    T_LE(e.st.retries_total, 5u);

    /* The call's cancel token, fired before the call. */
    e.call.deadline_ms = 0;
    T_OK(rio_cancel_new(&cx));
    rio_cancel_fire(cx);
    e.call.cancel = cx;
    p = (void *)&e;
    t0 = t_now_ms();
    T_ERR(rio_get_alloc(e.c, "o", &p, &e.call), RIO_ECANCELED);
    T_LT(t_now_ms() - t0, 350u);
    T_NULL(p);
    rio_cancel_destroy(cx);
    e.call.cancel = NULL;

    rio_mock_faults_clear(e.c);
    void *q = NULL;
    T_EQ(rio_get_alloc(e.c, "o", &q, &e.call), (int64_t)(3 * EU_CHUNK));
    T_PATTERN(q, 3 * EU_CHUNK, 7);
    free(q);
    eu_close(&e);
}

/*
 * A call's deadline bounds the whole call, its runs again included: a GET
 * whose object a PUT replaces under every read (genchange) is planned again
 * up to 4 times, and each run had a fresh deadline of its own: with
 * lookups that take 100 ms, a 150 ms deadline held rio_get, rio_get_alloc,
 * rio_batch and rio_get_stream for 5 runs, about 500 ms, and they failed
 * RIO_EGENERATION. Now the runs share the deadline: the call fails
 * RIO_EDEADLINE once it has passed (a lookup already made is waited for).
 */
static int count_cb(void *arg, const void *data, size_t len)
{
    (void)arg;
    (void)data;
    (void)len;
    return 0;
}

TEST(replans_share_the_deadline)
{
    struct eu e;
    const size_t n = 2 * EU_CHUNK;
    uint64_t t0;
    void *p = NULL;

    unsetenv("RIO_DEADLINE_MS");
    eu_begin(&e);
    e.o.deadline_ms = 0; /* none */
    eu_open_put(&e, "mock://dlreplan", n, 8);
    eu_fault(e.c, "genchange:op=read");
    eu_fault(e.c, "delay:op=lookup:delay=100");
    uint8_t *dst = eu_fill_buf(n, 0);
    e.call.deadline_ms = 150;

    t0 = t_now_ms();
    int64_t ret = rio_get(e.c, "o", dst, n, &e.call);
    uint64_t ms = t_now_ms() - t0;
    T_ERR(ret, RIO_EDEADLINE);
    T_LT(ms, 400u);

    t0 = t_now_ms();
    ret = rio_get_alloc(e.c, "o", &p, &e.call);
    ms = t_now_ms() - t0;
    T_ERR(ret, RIO_EDEADLINE);
    T_NULL(p);
    T_LT(ms, 400u);

    struct rio_op op = {.type = RIO_OP_GET, .key = "o", .buf = dst, .len = n};
    t0 = t_now_ms();
    T_EQ(rio_batch(e.c, &op, 1, &e.call), 0);
    ms = t_now_ms() - t0;
    T_ERR(op.result, RIO_EDEADLINE);
    T_LT(ms, 400u);

    t0 = t_now_ms();
    ret = rio_get_stream(e.c, "o", 0, count_cb, NULL, &e.call);
    ms = t_now_ms() - t0;
    T_ERR(ret, RIO_EDEADLINE);
    T_LT(ms, 400u);

    rio_mock_faults_clear(e.c);
    free(dst);
    eu_close(&e);
}
