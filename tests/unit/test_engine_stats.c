/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit;serial */
/*
 * Stats of a call and the bottleneck verdict: the figures add up, and the
 * verdict names the part that bounded the transfer in the mock's model.
 */
#include <ctype.h>
#include <pthread.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/engine.h"
#include "engine_util.h"

static void check_sane(const struct rio_stats *st, uint64_t size, uint64_t nchunks)
{
    unsigned used;

    T_EQ(st->bytes, size);
    T_EQ(st->chunks, nchunks);
    T_EQ(eu_path_bytes(st, &used), size);
    T_EQ(eu_path_ops(st), nchunks);
    T_GT(used, 0u);
    T_GT(st->elapsed_ns, 0u);
    T_GT(st->goodput_mbps, 0.0);
    T_NEAR(st->goodput_mbps, (double)size * 1e3 / (double)st->elapsed_ns, st->goodput_mbps * 1e-6);
    T_LE(st->lat_p50_ns, st->lat_p95_ns);
    T_LE(st->lat_p95_ns, st->lat_p99_ns);
    T_LE(st->lat_p99_ns, st->lat_max_ns);
    T_GT(st->lat_p50_ns, 0u);
    T_LE(st->lat_max_ns, st->elapsed_ns);
    T_LE(st->first_done_ns, st->last_done_ns);
    T_LE(st->last_done_ns, st->elapsed_ns);
    T_GT(st->op_ns, 0u);
    T_GE(st->op_ns, st->lat_max_ns);
    T_GT(st->peak_inflight_bytes, 0u);
    for (unsigned i = 0; i < st->npaths; i++) {
        const struct rio_path_stats *p = &st->path[i];
        T_LE(p->busy_ns, st->elapsed_ns + 1000000); /* busy time is within the call */
        if (p->bytes) {
            T_GT(p->ops, 0u);
            T_GT(p->busy_ns, 0u);
            T_GT(p->rate_mbps, 0.0);
            T_GE(p->peak_depth, 1u);
        }
    }
}

TEST(stats_sanity_get_put)
{
    struct eu e;
    const size_t n = 4 * EU_MIB;

    eu_start(&e, "mock://stats?paths=4&rate=200M&lat=100us");
    uint8_t *src = eu_put_pattern(e.c, "o", n, 1, &e.call);
    check_sane(&e.st, n, n / EU_CHUNK);
    T_GT(e.st.hash_ns, 0u);
    T_EQ(e.st.bytes_staged, 0u);
    eu_stats_print("put", &e.st);

    eu_get_check(e.c, "o", n, 1, &e.call);
    check_sane(&e.st, n, n / EU_CHUNK);
    T_GT(e.st.verify_ns, 0u);
    T_EQ(e.st.hash_ns, 0u);
    T_EQ(e.st.retries_total, 0u);
    T_EQ(e.st.npaths, 4u);
    for (unsigned i = 0; i < 4; i++) {
        /* The mock reports its cap: 200 MiB/s. */
        T_NEAR(e.st.path[i].cap_mbps, 200.0 * 1.048576, 0.01);
        T_LE(e.st.path[i].rate_mbps, e.st.path[i].cap_mbps * 1.05);
    }
    /* Latency: at least the 64 KiB at 200 MiB/s plus 100 us. */
    T_GE(e.st.lat_p50_ns, 400000u);

    /* RIO_ATOMIC stages the object and copies it. */
    struct rio_call ac = {.flags = RIO_ATOMIC, .stats = &e.st};
    eu_get_check(e.c, "o", n, 1, &ac);
    check_sane(&e.st, n, n / EU_CHUNK);
    T_EQ(e.st.bytes_staged, n);
    T_GT(e.st.copy_ns, 0u);

    /* Retries show in the stats but not in the chunk count. */
    eu_fault(e.c, "short:op=read:chunk=3:count=1:bytes=10");
    eu_get_check(e.c, "o", n, 1, &e.call);
    check_sane(&e.st, n, n / EU_CHUNK);
    T_EQ(e.st.retries_total, 1u);
    T_EQ(e.st.retries[RIO_CLASS_SHORT], 1u);
    uint64_t errs = 0;
    for (unsigned i = 0; i < 4; i++)
        errs += e.st.path[i].errors;
    T_EQ(errs, 1u);

    /* A failed call still fills its stats, with no bytes delivered. */
    uint8_t *small = eu_fill_buf(16, 0);
    T_ERR(rio_get(e.c, "o", small, 16, &e.call), RIO_ETOOBIG);
    T_EQ(e.st.bytes, 0u);
    free(small);
    free(src);
    eu_close(&e);
}

/* A 2 MiB PUT and checked GET on url: e->st holds the GET's stats, printed. */
static void run_for_verdict(struct eu *e, const char *url, unsigned seed)
{
    const size_t n = 2 * EU_MIB;

    eu_start(e, url);
    uint8_t *src = eu_put_pattern(e->c, "o", n, seed, NULL);
    eu_get_check(e->c, "o", n, seed, &e->call);
    free(src);
    eu_stats_print("get", &e->st);
}

/* The verdict, its name and a sentence that explains it. */
static void expect_verdict(const struct rio_stats *st, int want, const char *name)
{
    T_EQ(st->verdict, want);
    T_STREQ(rio_verdict_name(st->verdict), name);
    T_GT(strlen(st->verdict_text), 0u);
}

static void *idle_thread(void *arg)
{
    int *fd = arg;
    char b;
    (void)!read(*fd, &b, 1); /* until the pipe closes */
    return NULL;
}

/* The run-queue wait (cpu_wait_ns) reads /proc once per thread at both ends
 * of a call: a small call with stats must not pay that. With 256 idle
 * threads in the process a scan costs milliseconds of the caller's CPU; a
 * 4 KiB GET with stats stays far below it and reports no wait. */
TEST(small_call_stats_skip_the_thread_scan)
{
    enum { NT = 256 };
    pthread_t th[NT];
    int fds[2];
    struct eu e;
    uint64_t worst = 0;

    T_OK(pipe(fds));
    for (unsigned i = 0; i < NT; i++)
        T_EQ(pthread_create(&th[i], NULL, idle_thread, &fds[0]), 0);
    eu_start(&e, "mock://small?paths=2");
    uint8_t *src = eu_put_pattern(e.c, "s", 4096, 3, &e.call);
    uint64_t t1 = rio__thread_cpu_ns();
    (void)rio__proc_run_delay_ns();
    uint64_t scan_ns = rio__thread_cpu_ns() - t1; /* one scan of NT + threads */
    for (unsigned i = 0; i < 20; i++) {
        eu_get_check(e.c, "s", 4096, 3, &e.call);
        T_EQ(e.st.cpu_wait_ns, 0u);
        worst = e.st.caller_cpu_ns > worst ? e.st.caller_cpu_ns : worst;
    }
    fprintf(stderr, "one thread scan: %.0f us of CPU; 4 KiB GET with stats: %.0f us at worst\n",
            scan_ns / 1e3, worst / 1e3);
    T_LT(worst, scan_ns); /* two scans would cost twice one */
    free(src);
    eu_close(&e);
    close(fds[1]);
    for (unsigned i = 0; i < NT; i++)
        pthread_join(th[i], NULL);
    close(fds[0]);
}

/* Paths far faster than the storage service: the verdict is storage. */
TEST(verdict_storage)
{
    struct eu e;

    run_for_verdict(&e, "mock://vstor?paths=4&rate=2G&disk=40M", 2); /* ~50 ms per transfer */
    expect_verdict(&e.st, RIO_VERDICT_STORAGE, "storage");
    T_GT(e.st.svc_ns, 0u);
    T_GE((double)e.st.svc_ns, 0.5 * (double)e.st.op_ns);
    eu_close(&e);
}

/* A target that says it took far longer than each op took here (a lying
 * or broken server: svc_lie multiplies the mock's service time, the
 * largest value saturates at 2^64 - 1 per op): the engine takes each op's
 * service time as at most its latency, so the share stays a share and the
 * sums do not wrap. Without the clamp: 100000000% of op time, and a
 * wrapped sum. */
TEST(verdict_storage_clamps_a_lying_target)
{
    static const char *const urls[] = {
        "mock://vlie?paths=4&rate=2G&disk=40M&svc_lie=1000000",
        "mock://vlie2?paths=4&rate=2G&disk=40M&svc_lie=18446744073709551615",
    };
    for (unsigned i = 0; i < 2; i++) {
        struct eu e;

        run_for_verdict(&e, urls[i], 2);
        expect_verdict(&e.st, RIO_VERDICT_STORAGE, "storage");
        T_GT(e.st.svc_ns, 0u);
        T_LE(e.st.svc_ns, e.st.op_ns);
        T_NOTNULL(strstr(e.st.verdict_text, "target service time is 100% of op time"));
        eu_close(&e);
    }
}

/* Rate-limited paths and an unlimited store: the verdict is the network. */
TEST(verdict_network)
{
    struct eu e;

    run_for_verdict(&e, "mock://vnet?paths=2&rate=20M", 3); /* ~50 ms per transfer */
    if (e.st.verdict == RIO_VERDICT_SOFTWARE &&
        (double)e.st.cpu_wait_ns >= 0.25 * (double)e.st.elapsed_ns)
        T_SKIP("machine too busy: threads waited %.1f ms for a CPU in a %.1f ms call, and the "
               "verdict rightly says so",
               e.st.cpu_wait_ns / 1e6, e.st.elapsed_ns / 1e6);
    expect_verdict(&e.st, RIO_VERDICT_NETWORK, "network");
    T_EQ(e.st.svc_ns, 0u);
    for (unsigned i = 0; i < 2; i++)
        T_GE(e.st.path[i].rate_mbps, 0.8 * e.st.path[i].cap_mbps);
    eu_close(&e);
}

/* A link of 50 ms round trips: the path is busy the whole call and moves
 * a few percent of its cap while the client's threads sleep. That is
 * latency (network), not "per-op handling" (software), which the verdict
 * said. A PUT that the adaptive concurrency climbs on: its clause in the
 * text is whole (it was cut mid-word at the text's 192 bytes). */
TEST(verdict_latency_not_software)
{
    static const char *const ends[] = {"goodput", "climbing", "more",   "less",
                                       "down",    "probed",   "stalled"};
    struct eu e;

    run_for_verdict(&e, "mock://vlat?paths=1&rate=1G&lat=50ms", 4);
    if (e.st.verdict == RIO_VERDICT_SOFTWARE &&
        (double)e.st.cpu_wait_ns >= 0.25 * (double)e.st.elapsed_ns)
        T_SKIP("machine too busy: threads waited %.1f ms for a CPU in a %.1f ms call",
               e.st.cpu_wait_ns / 1e6, e.st.elapsed_ns / 1e6);
    expect_verdict(&e.st, RIO_VERDICT_NETWORK, "network");
    T_NOTNULL(strstr(e.st.verdict_text, "latency-bound"));
    free(eu_put_pattern(e.c, "big", 4 * EU_MIB, 5, &e.call));
    eu_stats_print("put", &e.st);
    const char *a = strstr(e.st.verdict_text, "adapt PUT: ");
    if (a) {
        size_t n = strlen(a);
        int whole = isdigit((unsigned char)a[n - 1]); /* "x depth N" alone */
        for (size_t i = 0; i < sizeof(ends) / sizeof(ends[0]); i++)
            if (n >= strlen(ends[i]) && strcmp(a + n - strlen(ends[i]), ends[i]) == 0)
                whole = 1;
        T_TRUE(whole);
    }
    eu_close(&e);
}

/* The verdict function itself, on hand-made figures. */
TEST(verdict_rules)
{
    struct rio_stats st;

    memset(&st, 0, sizeof(st));
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_NONE);

    memset(&st, 0, sizeof(st));
    st.elapsed_ns = 1000000000;
    st.chunks = 100;
    st.npaths = 1;
    st.path[0].bytes = 100;
    st.path[0].busy_ns = 950000000;
    st.op_ns = 100;
    st.svc_ns = 90;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_STORAGE);

    st.svc_ns = 0;
    st.caller_cpu_ns = 990000000;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_SOFTWARE);

    st.caller_cpu_ns = 0;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_NETWORK);
    T_GT(strlen(st.verdict_text), 0u);
    /* Busy paths whose caps and the target's service time are both unknown
     * (railio://): the links or the server behind them, not "the network"
     * with "0 of 1 at >= 90% of cap" (said of a railiod held to 3% of a
     * core). */
    T_NOTNULL(strstr(st.verdict_text, "the links or the target"));
    T_NULL(strstr(st.verdict_text, "of cap"));

    /* Busy below its cap: the client's handling when its threads used
     * most of a core, else the round trips. */
    st.path[0].rate_mbps = 14;
    st.path[0].cap_mbps = 100;
    st.transport_cpu_ns = 600000000;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_SOFTWARE);
    T_NOTNULL(strstr(st.verdict_text, "per-op handling"));
    st.transport_cpu_ns = 100000000;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_NETWORK);
    T_NOTNULL(strstr(st.verdict_text, "latency-bound"));
    st.transport_cpu_ns = 0;
    st.path[0].rate_mbps = 0;
    st.path[0].cap_mbps = 0;

    /* Idle paths behind one that failed: that path, not "raise depth". */
    st.npaths = 2;
    st.path[0].busy_ns = 300000000;
    st.path[1].errors = 3;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_NETWORK);
    T_NOTNULL(strstr(st.verdict_text, "path 1 failed 3 ops"));
    /* A tie: the path still down at the end (and the slower), not the
     * first; a healthy rail that retried one chunk of the down one was
     * named for it. */
    st.path[0].errors = 3;
    st.path[0].rate_mbps = 23;
    st.path[1].rate_mbps = 2;
    st.path[1].state = 2;
    rio__stats_verdict(&st);
    T_NOTNULL(strstr(st.verdict_text, "path 1 failed 3 ops"));
    st.path[1].state = 0;
    rio__stats_verdict(&st);
    T_NOTNULL(strstr(st.verdict_text, "path 1 failed 3 ops"));
    /* Three of four paths dropped, all down at the end: all three named,
     * not the one of them that failed most (the other two read as fine). */
    st.npaths = 4;
    st.path[0].errors = 0;
    st.path[0].rate_mbps = 118;
    for (unsigned i = 1; i < 4; i++) {
        st.path[i].errors = 6;
        st.path[i].state = 1;
        st.path[i].rate_mbps = 4;
    }
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_NETWORK);
    T_NOTNULL(strstr(st.verdict_text, "paths 1, 2, 3 failed 18 ops"));
    for (unsigned i = 1; i < 4; i++)
        memset(&st.path[i], 0, sizeof(st.path[i]));
    st.npaths = 2;
    st.path[0].errors = 0;
    st.path[0].rate_mbps = 0;
    st.path[1].rate_mbps = 0;
    st.path[1].errors = 0;
    rio__stats_verdict(&st);
    T_NOTNULL(strstr(st.verdict_text, "latency-bound"));
    st.npaths = 1;
    st.path[0].busy_ns = 950000000;

    /* Paths busy all the time at their cap are the limit, even when the
     * machine is busy and threads waited for a CPU: the wait did not slow a
     * transfer the links could not have carried faster. */
    st.path[0].rate_mbps = 99;
    st.path[0].cap_mbps = 100;
    st.cpu_wait_ns = 400000000; /* 40% of the call */
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_NETWORK);

    /* Idle paths and a long wait for a CPU: software (contention). */
    st.path[0].busy_ns = 300000000;
    st.path[0].rate_mbps = 30;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_SOFTWARE);

    /* A stream's consumer that took most of the call: the sink, whatever
     * else; its producer: the source; under half the call: neither. */
    st.sink_ns = 600000000;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_SINK);
    T_STREQ(rio_verdict_name(st.verdict), "sink");
    st.sink_ns = 0;
    st.source_ns = 700000000;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_SOURCE);
    T_STREQ(rio_verdict_name(st.verdict), "source");
    st.source_ns = 400000000;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_SOFTWARE);

    /* ... but not while the paths were busy most of the call: the consumer
     * ran beside the transfer, which the links paced. */
    st.source_ns = 0;
    st.sink_ns = 600000000;
    st.cpu_wait_ns = 0;
    st.path[0].busy_ns = 950000000;
    rio__stats_verdict(&st);
    T_EQ(st.verdict, RIO_VERDICT_NETWORK);
}

struct prog {
    unsigned calls;
    uint64_t last, total;
    int bad;
};

static void prog_cb(void *arg, uint64_t done, uint64_t total)
{
    struct prog *p = arg;
    if (done < p->last || done > total)
        p->bad = 1;
    p->last = done;
    p->total = total;
    p->calls++;
}

/* The progress callback: at most every 100 ms, never backwards, never past
 * the total, and the total is the call's size. */
TEST(progress_reports)
{
    struct eu e;
    const size_t n = 4 * EU_MIB;
    struct prog pg = {0};
    struct rio_call call = {.progress = prog_cb, .progress_arg = &pg};

    eu_start(&e, "mock://prog?paths=2&rate=10M"); /* ~200 ms for the GET */
    uint8_t *src = eu_put_pattern(e.c, "o", n, 5, NULL);
    uint64_t t0 = eu_now_ns();
    eu_get_check(e.c, "o", n, 5, &call);
    double ms = (eu_now_ns() - t0) / 1e6;
    T_GE(pg.calls, 1u);
    T_LE(pg.calls, (unsigned)(ms / 100) + 2);
    T_EQ(pg.bad, 0);
    T_EQ(pg.total, n);
    T_LE(pg.last, n);
    free(src);
    eu_close(&e);
}

/* ------------------------------------------------- stream sink and source */

/* A consumer or producer that takes sleep_ms per call; counts its bytes. */
struct slow {
    unsigned sleep_ms;
    const uint8_t *src; /* producer: the bytes to hand out */
    size_t n, off;
};

static int slow_sink(void *arg, const void *data, size_t len)
{
    struct slow *s = arg;
    (void)data;
    if (s->sleep_ms)
        eu_sleep_ms(s->sleep_ms);
    s->off += len;
    return 0;
}

static int64_t slow_fill(void *arg, void *buf, size_t cap)
{
    struct slow *s = arg;
    size_t k = s->n - s->off < cap ? s->n - s->off : cap;
    if (s->sleep_ms && k)
        eu_sleep_ms(s->sleep_ms);
    memcpy(buf, s->src + s->off, k);
    s->off += k;
    return (int64_t)k;
}

static void expect_stream_verdict(const struct rio_stats *st, int want, const char *name,
                                  const char *word)
{
    eu_stats_print(name, st);
    expect_verdict(st, want, name);
    T_TRUE(strstr(st->verdict_text, word) != NULL);
}

/* A GET whose destination is slow (rio_get_stream's callback, a reader's
 * caller between reads): the verdict is the sink, naming the destination;
 * a fast callback on slow paths is not. */
TEST(verdict_sink)
{
    struct eu e;
    const size_t n = EU_MIB; /* 16 chunks */

    eu_start(&e, "mock://vsink?paths=2");
    uint8_t *src = eu_put_pattern(e.c, "o", n, 6, NULL);
    struct slow s = {.sleep_ms = 5};
    T_EQ(rio_get_stream(e.c, "o", 0, slow_sink, &s, &e.call), (int64_t)n);
    T_EQ(s.off, n);
    expect_stream_verdict(&e.st, RIO_VERDICT_SINK, "sink", "destination");
    T_GE(e.st.sink_ns, 16 * 5 * 1000000ull);
    T_LE(e.st.sink_ns, e.st.elapsed_ns);
    T_EQ(e.st.source_ns, 0u);

    /* The same through rio_reader_read: the caller's time between reads. */
    struct rio_reader *rd;
    uint8_t *buf = eu_keep(&e, eu_fill_buf(EU_CHUNK, 0));
    T_OK(rio_reader_open(e.c, "o", 0, &e.call, &rd));
    int64_t k, got = 0;
    while ((k = rio_reader_read(rd, buf, EU_CHUNK)) > 0) {
        got += k;
        eu_sleep_ms(5);
    }
    T_EQ(k, 0);
    T_EQ(got, (int64_t)n);
    T_OK(rio_reader_close(rd));
    expect_stream_verdict(&e.st, RIO_VERDICT_SINK, "sink", "destination");
    T_GE(e.st.sink_ns, 16 * 5 * 1000000ull);

    /* A fast callback: the destination takes a small share, not the verdict. */
    eu_close(&e);
    eu_start(&e, "mock://vsink2?paths=2&rate=20M"); /* ~25 ms for the GET */
    free(src);
    src = eu_put_pattern(e.c, "o", n, 7, NULL);
    struct slow f = {0};
    T_EQ(rio_get_stream(e.c, "o", 0, slow_sink, &f, &e.call), (int64_t)n);
    eu_stats_print("fast sink", &e.st);
    T_NE(e.st.verdict, RIO_VERDICT_SINK);
    T_LT((double)e.st.sink_ns, 0.5 * (double)e.st.elapsed_ns);
    T_EQ(e.st.source_ns, 0u);
    free(src);
    eu_close(&e);
}

/* A PUT whose source is slow (rio_put_stream's fill, a writer's caller
 * between writes): the verdict is the source. */
TEST(verdict_source)
{
    struct eu e;
    const size_t n = EU_MIB;

    eu_start(&e, "mock://vsrc?paths=2");
    uint8_t *src = eu_keep(&e, eu_pattern_buf(n, 8));
    struct slow s = {.sleep_ms = 5, .src = src, .n = n};
    T_OK(rio_put_stream(e.c, "o", RIO_SIZE_UNKNOWN, 0, slow_fill, &s, &e.call, NULL));
    expect_stream_verdict(&e.st, RIO_VERDICT_SOURCE, "source", "source");
    T_GE(e.st.source_ns, 16 * 5 * 1000000ull);
    T_LE(e.st.source_ns, e.st.elapsed_ns);
    T_EQ(e.st.sink_ns, 0u);
    eu_get_check(e.c, "o", n, 8, NULL);

    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "o", n, 0, &e.call, &w));
    for (size_t off = 0; off < n; off += EU_CHUNK) {
        eu_sleep_ms(5);
        T_OK(rio_writer_write(w, src + off, EU_CHUNK));
    }
    T_OK(rio_writer_close(w, NULL));
    expect_stream_verdict(&e.st, RIO_VERDICT_SOURCE, "source", "source");
    T_GE(e.st.source_ns, 16 * 5 * 1000000ull);
    eu_get_check(e.c, "o", n, 8, NULL);
    eu_close(&e);
}

/* A consumer faster than the link it reads from: it took most of the call
 * (its time and the link's overlap) while the path was busy all of it. The
 * link set the pace, not the consumer: the verdict said "sink" (64% of the
 * call, 31 MB/s behind a 20 MB/s path). */
TEST(verdict_sink_beside_busy_path)
{
    struct eu e;
    const size_t n = 4 * EU_MIB; /* 64 chunks, ~205 ms at 20 MB/s */

    eu_start(&e, "mock://vsk2?paths=1&rate=20M");
    free(eu_put_pattern(e.c, "o", n, 6, NULL));
    struct slow s = {.sleep_ms = 2}; /* ~32 MB/s */
    T_EQ(rio_get_stream(e.c, "o", 0, slow_sink, &s, &e.call), (int64_t)n);
    eu_stats_print("sink beside", &e.st);
    double sink_rate = e.st.bytes * 1e3 / (double)e.st.sink_ns;
    if (e.st.sink_ns < e.st.elapsed_ns / 2 || sink_rate < 1.2 * e.st.path[0].cap_mbps)
        T_SKIP("the consumer ran at %.1f MB/s in %.0f%% of the call (sleeps overshot on a "
               "busy machine): not the case under test",
               sink_rate, 100.0 * (double)e.st.sink_ns / (double)e.st.elapsed_ns);
    if ((double)e.st.path[0].busy_ns < 0.85 * (double)e.st.elapsed_ns)
        T_SKIP("the path idled %.0f%% of the call (a busy machine): not the case under test",
               100.0 - 100.0 * (double)e.st.path[0].busy_ns / (double)e.st.elapsed_ns);
    T_NE(e.st.verdict, RIO_VERDICT_SINK);
    if (e.st.verdict == RIO_VERDICT_SOFTWARE &&
        (double)e.st.cpu_wait_ns >= 0.25 * (double)e.st.elapsed_ns)
        T_SKIP("machine too busy: the verdict names CPU contention");
    T_EQ(e.st.verdict, RIO_VERDICT_NETWORK);
    eu_close(&e);
}
