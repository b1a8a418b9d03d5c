/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net;rails;serial */
/* T_TIMEOUT 300 */
/*
 * A rail dies in the middle of a transfer over 4 veth rails at 1gbit
 * (tests/harness/rails.sh), by each method a real network offers: the link
 * goes down, every packet is dropped (nft), every segment is answered by a
 * reset (nft), or the rail browns out (tbf at 8kbit: it still ACKs, it moves
 * almost nothing). The GET (and a PUT) must complete byte-exact on the
 * remaining rails, each at >= 0.8 x what they carry; the rail then comes back and
 * the same client uses it again without a restart. With every rail dead the
 * call fails cleanly within its deadline and the server serves the next
 * client.
 *
 * The rate after the fault: rail 3 (not rail 0, the control connection's)
 * fails once a tenth of the object has moved; the transport's byte counter
 * (rio__tcp_counters, payload and headers on data connections) is read the
 * moment the fault is in place (rails.sh returned) and again when the call
 * returns; (bytes after) / (time after) is compared with the iperf3 ceiling
 * of rails 0-2 measured in the same test, in the transfer's direction. So
 * the time to notice the dead rail and to move its chunks is inside the
 * measure. The client runs with etag=none: with the stream MD5 a 4-rail PUT
 * on this 2-vCPU machine is bound by the CPU that both ends and the MD5
 * share (docs/bench.md), not by the rails; test_rails checks the same.
 * A rate that misses 0.8 is measured again, up to twice, and the best run
 * is judged (see the loop after the PUTs).
 *
 * control_rail_dies and control_rail_dies_mid_put black-hole rail 0, the
 * one the control connection (LOOKUP, PUT_OPEN, PUT_COMMIT) dials: the
 * metadata calls must move to another rail of the server.
 *
 * The timeouts are set low: TCP_USER_TIMEOUT and the transport's progress
 * watchdog 1 s, the engine's op timeout 2 s (a brownout shows only as
 * missing progress). Needs root; skips otherwise.
 */
#include "rails_util.h" /* first: it defines _GNU_SOURCE (setns) */

#include <stdatomic.h>

#define F_SIZE (512u << 20)
#define F_RAIL 3u

static const char *const srv_args[] = {"--memory", "2G", "--progress-timeout", "1s", NULL};
/* For the rates: uploads land in memory railiod has already touched (see
 * test_rails.c); not in sanitized builds. Each PUT's object is deleted once
 * read back, so that the store holds the GET object, the small one and one
 * PUT at most and never evicts during a measured PUT: what an eviction
 * costs the server is the store's business (test_server_store), not the
 * rails'. */
static const char *const srv_args_pf[] = {"--memory", "1536M",      "--progress-timeout",
                                          "1s",       "--prefault", NULL};

struct faulter {
    struct rl *r;
    struct rio_client *c;
    const char *how;
    _Atomic uint64_t done; /* from the progress callback */
    uint64_t total;
    uint64_t t_fault_ns, bytes_at_fault;
    int put;
    unsigned rail; /* the rail failed */
    pthread_t th;
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void on_progress(void *arg, uint64_t done, uint64_t total)
{
    struct faulter *f = arg;
    (void)total;
    atomic_store(&f->done, done);
}

static uint64_t wire_bytes(struct rio_client *c, int put)
{
    struct rio__tcp_counters k = tu_tcp(c);
    return put ? k.bytes_out : k.bytes_in;
}

static void *fault_main(void *arg)
{
    struct faulter *f = arg;
    uint64_t t0 = t_now_ms();

    while (atomic_load(&f->done) < f->total / 10 && t_now_ms() - t0 < 20000)
        usleep(1000);
    rl_fail(f->r, f->rail, f->how);
    f->t_fault_ns = now_ns();
    f->bytes_at_fault = wire_bytes(f->c, f->put);
    return NULL;
}

static void fault_start(struct faulter *f, struct rl *r, struct rio_client *c, unsigned rail,
                        const char *how, uint64_t total, int put)
{
    memset(f, 0, sizeof(*f));
    f->r = r;
    f->c = c;
    f->how = how;
    f->total = total;
    f->put = put;
    f->rail = rail;
    if (pthread_create(&f->th, NULL, fault_main, f) != 0)
        T_FAIL("pthread_create");
}

/* The rate after the fault, Mbit/s, given the call ended at t_end. */
static double fault_rate(struct faulter *f, uint64_t t_end)
{
    pthread_join(f->th, NULL);
    uint64_t b = wire_bytes(f->c, f->put) - f->bytes_at_fault;
    return rl_mbit(b, t_end > f->t_fault_ns ? t_end - f->t_fault_ns : 1);
}

/* railiod's minor faults and system time (clock ticks) so far: printed
 * for each PUT, since a server that faults in fresh memory (the store
 * carving uploads from memory never touched) slows a PUT as much as the
 * fault itself. */
static void srv_cost(struct rl *r, unsigned long long *flt, unsigned long long *sys)
{
    char path[64], buf[2048];
    snprintf(path, sizeof(path), "/proc/%d/stat", (int)r->srv.pid);
    FILE *f = fopen(path, "r");
    *flt = *sys = 0;
    if (!f)
        return;
    if (fgets(buf, sizeof(buf), f)) {
        char *q = strrchr(buf, ')');
        if (q &&
            sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %llu %*u %*u %*u %*u %llu", flt, sys) != 2)
            *flt = *sys = 0;
    }
    fclose(f);
}

static void print_stats(const char *what, const char *how, double ceil, double after,
                        const struct rio_stats *st)
{
    fprintf(stderr,
            "RAILS-FAULT %s %s: whole call %.0f Mbit/s in %.0f ms, after the fault %.0f Mbit/s, "
            "rails 0-2 iperf3 %.0f Mbit/s, ratio %.3f, retries %llu (reset %llu timeout %llu "
            "unreach %llu), per-path MB:",
            what, how, rl_mbit(st->bytes, st->elapsed_ns), st->elapsed_ns / 1e6, after, ceil,
            after / ceil, (unsigned long long)st->retries_total,
            (unsigned long long)st->retries[RIO_CLASS_RESET],
            (unsigned long long)st->retries[RIO_CLASS_TIMEOUT],
            (unsigned long long)st->retries[RIO_CLASS_UNREACH]);
    for (unsigned p = 0; p < st->npaths; p++)
        fprintf(stderr, " %.0f", (double)st->path[p].bytes / 1e6);
    fprintf(stderr, "; verdict %s (%s)\n", rio_verdict_name(st->verdict), st->verdict_text);
}

static void get_check(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                      struct rio_stats *st)
{
    uint8_t *b = rl_buf(n);
    struct rio_call call = {.stats = st};
    T_TRUE(b != NULL);
    memset(st, 0, sizeof(*st));
    int64_t got = rio_get(c, key, b, n, &call);
    if (got != (int64_t)n)
        T_FAIL("rio_get(%s): %lld %s", key, (long long)got, got < 0 ? rio_errname((int)got) : "");
    T_PATTERN(b, n, seed);
    free(b);
}

/* After heal: the same client carries bytes on the rail again. The failed
 * path cools (500 ms..1 s in one_rail_dies_each_way) and is probed; a GET or
 * two brings it back. */
static void rail_comes_back(struct rio_client *c, const char *key, size_t n, uint64_t seed)
{
    struct rio_stats st;
    unsigned npaths = rio__client_transport(c)->npaths;

    for (int tries = 0; tries < 5; tries++) {
        uint64_t on_rail = 0;
        usleep(1100 * 1000); /* past the cooldown cap (1 s) */
        get_check(c, key, n, seed, &st);
        for (unsigned p = F_RAIL; p < npaths; p += 4)
            on_rail += st.path[p].bytes;
        fprintf(stderr, "RAILS-FAULT healed: GET %u MiB, %.0f MB on rail %u (try %d)\n",
                (unsigned)(n >> 20), on_rail / 1e6, F_RAIL, tries + 1);
        if (on_rail > 0)
            return;
    }
    T_FAIL("rail %u carried nothing after it came back", F_RAIL);
}

/* One GET of the big object with rail 3 failed by how once a tenth has
 * moved; then the rail heals and the same client uses it again. Returns the
 * rate after the fault (Mbit/s); *st the GET's stats. */
static double get_with_fault(struct rl *r, struct rio_client *c, const char *how, size_t size,
                             double ceil, struct rio_stats *st, struct rl_busy *busy)
{
    struct faulter f;
    uint8_t *b = rl_buf(size);
    struct rio_call call = {.stats = st, .progress = on_progress, .progress_arg = &f};

    memset(st, 0, sizeof(*st));
    fault_start(&f, r, c, F_RAIL, how, size, 0);
    rl_busy_start(busy);
    int64_t got = rio_get(c, "obj", b, size, &call);
    uint64_t t_end = now_ns();
    rl_busy_end(busy);
    double after = fault_rate(&f, t_end);
    if (got != (int64_t)size)
        T_FAIL("rio_get with rail %u %s: %lld %s", F_RAIL, how, (long long)got,
               got < 0 ? rio_errname((int)got) : "");
    T_PATTERN(b, size, 0xdead);
    free(b);
    print_stats("GET", how, ceil, after, st);
    fprintf(stderr, "RAILS-FAULT GET %s: machine busy %.2f cores (steal %.2f)\n", how, busy->busy,
            busy->steal);
    if (busy->others >= 0.05)
        fprintf(stderr, "RAILS-FAULT other processes took %.2f cores during the GET\n",
                busy->others);
    rl_heal(r, F_RAIL);
    rail_comes_back(c, "small", 16u << 20, 0x5a11);
    return after;
}

/* One PUT of src (the pattern of seed 0xbeef) under key with rail 3 failed
 * by how once a tenth has moved: committed whole and read back byte-exact;
 * then the rail heals and the same client uses it again. Returns the rate
 * after the fault (Mbit/s); *st the PUT's stats. */
static double put_with_fault(struct rl *r, struct rio_client *c, const char *how, const char *key,
                             const uint8_t *src, size_t size, double ceil, struct rio_stats *st,
                             struct rl_busy *busy)
{
    struct faulter f;
    struct rio_desc d;
    struct rio_stats gst;
    struct rio_call call = {.stats = st, .progress = on_progress, .progress_arg = &f};

    memset(st, 0, sizeof(*st));
    memset(&d, 0, sizeof(d));
    fault_start(&f, r, c, F_RAIL, how, size, 1);
    unsigned long long f0, s0, f1, s1;
    srv_cost(r, &f0, &s0);
    rl_busy_start(busy);
    int ret = rio_put(c, key, src, size, &call, &d);
    uint64_t t_end = now_ns();
    rl_busy_end(busy);
    srv_cost(r, &f1, &s1);
    fprintf(stderr, "RAILS-FAULT PUT %s: railiod took %llu minor faults, %.2f s of system time\n",
            how, f1 - f0, (double)(s1 - s0) / (double)sysconf(_SC_CLK_TCK));
    double after = fault_rate(&f, t_end);
    if (ret < 0) {
        print_stats("PUT (failed)", how, ceil, after, st);
        for (int k = 0; k < RIO_CLASS__COUNT; k++)
            fprintf(stderr, "  retries[%s] = %llu\n", rio_class_name(k),
                    (unsigned long long)st->retries[k]);
        T_FAIL("rio_put with rail %u %s: %d %s", F_RAIL, how, ret, rio_errname(ret));
    }
    T_EQ(d.size, (uint64_t)size);
    rio_desc_cleanup(&d);
    print_stats("PUT", how, ceil, after, st);
    fprintf(stderr, "RAILS-FAULT PUT %s: machine busy %.2f cores (steal %.2f)\n", how, busy->busy,
            busy->steal);
    if (busy->others >= 0.05)
        fprintf(stderr, "RAILS-FAULT other processes took %.2f cores during the PUT\n",
                busy->others);
    get_check(c, key, size, 0xbeef, &gst);
    T_OK(rio_delete(c, key)); /* the next PUT needs no eviction: see srv_args_pf */
    rl_heal(r, F_RAIL);
    rail_comes_back(c, "small", 16u << 20, 0x5a11);
    return after;
}

/*
 * Rail 3 of 4 killed in the middle of a GET by each method in turn (link
 * down, nft drop, nft reset, brownout), healed after each; then in the
 * middle of a PUT by each method. One rails setup, one client, one server
 * for all: the client must come through every fault without a restart.
 */
TEST(one_rail_dies_each_way)
{
    static const char *const hows[] = {"linkdown", "drop", "reset", "brownout"};
    const size_t size = TU_SANITIZED ? 128u << 20 : F_SIZE;
    struct rl r;
    struct rio_options o;
    struct rio_stats st[8];
    struct rl_busy busy[8];
    double after[8], ceil[8], ceil_get = 0, ceil_put = 0;
    char what[8][32];
    struct tu u;
    struct rio_desc d;
    char url[512];
    int ret;

    rl_up(&r, 4, "1gbit");
    rl_server(&r, TU_SANITIZED ? srv_args : srv_args_pf);
    if (!TU_SANITIZED) {
        ceil_get = rl_iperf(&r, 0x7, 1, NULL);
        ceil_put = rl_iperf(&r, 0x7, 0, NULL);
    }
    rl_opts(&o);
    /* A cooled path is probed with a real chunk; on a rail that still
     * accepts a dial but moves nothing (brownout) that chunk waits for the
     * watchdog, and near the end of a call it is the tail. Cooling 500 ms
     * to 1 s keeps probes out of a 1-2 s transfer's tail (see
     * docs/tuning.md). */
    o.cooldown_base_ms = 500;
    o.cooldown_cap_ms = 1000;
    /* A PUT chunk cut in the middle by the dead rail stays "being written"
     * on the server until the chunk's retry claims it (struct rio_srv_claim:
     * the stalled receiver is dropped within railiod's 100 ms tick), and
     * until its progress timeout if no retry comes; meanwhile a retry is
     * answered RIO_ETHROTTLE. 50 ms doubling to 1 s over 8 attempts (3.5 s)
     * outlasts both (the library's defaults, 10 ms to 1 s over 5 attempts,
     * give 310 ms against railiod's default 10 s: see the issue 4 report). */
    o.backoff_base_ms = 50;
    o.backoff_cap_ms = 1000;
    o.retry_attempts = 8;
    rl_url(url, sizeof(url), "etag=none");
    tu_open(&u, url, &o);
    rl_put(u.c, "obj", size, 0xdead);
    rl_put(u.c, "small", 16u << 20, 0x5a11);

    for (unsigned i = 0; i < 4; i++) {
        after[i] = get_with_fault(&r, u.c, hows[i], size, ceil_get, &st[i], &busy[i]);
        ceil[i] = ceil_get;
        snprintf(what[i], sizeof(what[i]), "GET %s", hows[i]);
    }

    /* The same PUT without a fault first, printed for context. */
    uint8_t *p = rl_pattern(size, 0xbeef);
    struct rio_stats st0;
    struct rio_call call0 = {.stats = &st0};
    memset(&st0, 0, sizeof(st0));
    memset(&d, 0, sizeof(d));
    ret = rio_put(u.c, "put0", p, size, &call0, &d);
    if (ret < 0)
        T_FAIL("rio_put without a fault: %d %s", ret, rio_errname(ret));
    rio_desc_cleanup(&d);
    T_OK(rio_delete(u.c, "put0"));
    fprintf(stderr,
            "RAILS-FAULT PUT without a fault: %.0f Mbit/s (4 rails); rails 0-2 iperf3 %.0f\n",
            rl_mbit(st0.bytes, st0.elapsed_ns), ceil_put);
    for (unsigned i = 0; i < 4; i++) {
        char key[32];
        snprintf(key, sizeof(key), "put-%s", hows[i]);
        after[4 + i] =
            put_with_fault(&r, u.c, hows[i], key, p, size, ceil_put, &st[4 + i], &busy[4 + i]);
        ceil[4 + i] = ceil_put;
        snprintf(what[4 + i], sizeof(what[4 + i]), "PUT %s", hows[i]);
    }

    /* A rate miss that nothing excuses is measured again, up to twice, and
     * the best run is judged (as test_engine_tail_rate takes the best of
     * five): on a shared VM one call in several loses a few hundred ms to
     * something outside railio (a PUT brownout has missed at 0.79 in the
     * project's CI with its server spending 2.6x its usual system time),
     * while a regression in the failover misses every time. Every run is
     * checked byte for byte and printed. */
    for (unsigned i = 0; i < 8; i++) {
        for (int again = 0; again < 2; again++) {
            if (after[i] >= 0.8 * ceil[i] || rl_excused(&st[i], &busy[i]))
                break;
            struct rio_stats st2;
            struct rl_busy busy2;
            double a2;
            fprintf(stderr, "RAILS-FAULT %s: ratio %.3f missed 0.8, measured again\n", what[i],
                    after[i] / ceil[i]);
            if (i < 4) {
                a2 = get_with_fault(&r, u.c, hows[i], size, ceil_get, &st2, &busy2);
            } else {
                char key[32];
                snprintf(key, sizeof(key), "put-%s-%d", hows[i - 4], again);
                a2 = put_with_fault(&r, u.c, hows[i - 4], key, p, size, ceil_put, &st2, &busy2);
            }
            if (a2 > after[i]) {
                after[i] = a2;
                st[i] = st2;
                busy[i] = busy2;
            }
        }
    }
    free(p);

    tu_close(&u);
    T_TRUE(rl_server_alive(&r));
    rl_down(&r);

    /* The rate checks, last (rl_ratio: a miss skips when the run was
     * starved or CPU-bound, fails otherwise); failures before skips. */
    int skip = -1;
    for (unsigned i = 0; i < 8; i++) {
        if (after[i] >= 0.8 * ceil[i])
            continue;
        if (rl_excused(&st[i], &busy[i])) {
            skip = (int)i;
            continue;
        }
        rl_ratio(what[i], after[i], ceil[i], 0.8, &st[i], &busy[i]);
    }
    if (skip >= 0)
        rl_ratio(what[skip], after[skip], ceil[skip], 0.8, &st[skip], &busy[skip]);
}

/* Every rail dropped (the control connection's too): a clean error within
 * the deadline; healed, the server serves a new client. */
TEST(all_rails_die)
{
    struct rl r;
    struct rio_options o;
    struct rio_stats st;
    struct tu u, v;
    char url[512];
    const size_t n = 128u << 20;

    rl_up(&r, 4, "1gbit");
    rl_server(&r, srv_args);
    rl_opts(&o);
    o.deadline_ms = 8000;
    rl_url(url, sizeof(url), NULL);
    tu_open(&u, url, &o);
    rl_put(u.c, "obj", n, 0xa11);

    uint8_t *b = rl_buf(n);
    T_TRUE(b != NULL);
    for (unsigned i = 0; i < 4; i++)
        rl_fail(&r, i, i % 2 ? "drop" : "linkdown");
    struct rio_call call = {.stats = &st};
    uint64_t t0 = t_now_ms();
    int64_t got = rio_get(u.c, "obj", b, n, &call);
    uint64_t el = t_now_ms() - t0;
    fprintf(stderr, "RAILS-FAULT all rails dead: rio_get -> %lld %s after %llu ms (deadline %u)\n",
            (long long)got, got < 0 ? rio_errname((int)got) : "", (unsigned long long)el,
            o.deadline_ms);
    T_LT(got, 0);
    T_LE(el, (uint64_t)o.deadline_ms + 2000);
    free(b);

    for (unsigned i = 0; i < 4; i++)
        rl_heal(&r, i);
    T_TRUE(rl_server_alive(&r));
    /* A new client is served at once; the old one recovers too. */
    tu_open(&v, url, &o);
    tu_get_check(v.c, "obj", n, 0xa11, 0);
    tu_close(&v);
    usleep(300 * 1000);
    tu_get_check(u.c, "obj", n, 0xa11, 0);
    tu_close(&u);
    T_TRUE(rl_server_alive(&r));
    rl_down(&r);
}

/*
 * The rail the control connection dials (the URL's address, rail 0) is
 * black-holed (nft drop) between calls while rails 1 and 2 still reach the
 * server. The metadata requests (LOOKUP, PUT_OPEN, PUT_COMMIT) go on the
 * control connection only; while it dialled the URL's address alone, every
 * GET and PUT of the client failed (RIO_ERETRIES-like: the LOOKUP's tries
 * all timed out) though two rails of three were fine. Now the control
 * connection moves to another rail of the same server: the GET reads the
 * object whole, a PUT commits, within a few op timeouts (2 s here); the
 * rail healed, the client goes on.
 */
TEST(control_rail_dies)
{
    struct rl r;
    struct rio_options o;
    struct rio_stats st;
    struct tu u;
    char url[512];
    const size_t n = 32u << 20;

    rl_up(&r, 3, "1gbit");
    rl_server(&r, srv_args);
    rl_opts(&o);
    o.deadline_ms = 20000;
    o.cooldown_base_ms = 100;
    o.cooldown_cap_ms = 500;
    rl_url(url, sizeof(url), "etag=none");
    tu_open(&u, url, &o);
    rl_put(u.c, "obj", n, 0xc0);

    rl_fail(&r, 0, "drop");
    uint64_t t0 = t_now_ms();
    get_check(u.c, "obj", n, 0xc0, &st);
    uint64_t el = t_now_ms() - t0;
    fprintf(stderr, "RAILS-FAULT control rail dropped: GET %u MiB in %llu ms, retries %llu\n",
            (unsigned)(n >> 20), (unsigned long long)el, (unsigned long long)st.retries_total);
    T_LE(el, (uint64_t)3 * o.op_timeout_ms);

    t0 = t_now_ms();
    rl_put(u.c, "obj2", n, 0xc1);
    el = t_now_ms() - t0;
    fprintf(stderr, "RAILS-FAULT control rail dropped: PUT %u MiB in %llu ms\n",
            (unsigned)(n >> 20), (unsigned long long)el);
    T_LE(el, (uint64_t)3 * o.op_timeout_ms);
    get_check(u.c, "obj2", n, 0xc1, &st);

    /* A client opened now, given the rails by hand: its greeting goes to
     * the URL's address first, then to the next rail. */
    struct tu v;
    char url2[640];
    snprintf(url2, sizeof(url2), "%s&rails=10.99.0.2,10.99.1.2,10.99.2.2", url);
    t0 = t_now_ms();
    tu_open(&v, url2, &o);
    fprintf(stderr, "RAILS-FAULT control rail dropped: open with rails= in %llu ms\n",
            (unsigned long long)(t_now_ms() - t0));
    get_check(v.c, "obj", n, 0xc0, &st);
    tu_close(&v);

    rl_heal(&r, 0);
    usleep(600 * 1000); /* past the cooldown cap */
    get_check(u.c, "obj", n, 0xc0, &st);
    tu_close(&u);
    T_TRUE(rl_server_alive(&r));
    rl_down(&r);
}

/* The same rail black-holed in the middle of a PUT, its chunks going out
 * on the three rails: the commit that follows goes on the control
 * connection, which was the dead rail's. It must commit (not end
 * RIO_EUNKNOWN or a dial error once its tries ran out), the object whole. */
TEST(control_rail_dies_mid_put)
{
    struct rl r;
    struct rio_options o;
    struct rio_stats st;
    struct tu u;
    struct faulter f;
    struct rio_desc d;
    char url[512];
    const size_t n = 256u << 20; /* about 0.8 s on the three rails: the fault lands mid-PUT */

    rl_up(&r, 3, "1gbit");
    rl_server(&r, srv_args);
    rl_opts(&o);
    o.deadline_ms = 20000;
    rl_url(url, sizeof(url), "etag=none");
    tu_open(&u, url, &o);
    uint8_t *src = rl_pattern(n, 0xc2);
    struct rio_call call = {.stats = &st, .progress = on_progress, .progress_arg = &f};

    memset(&st, 0, sizeof(st));
    memset(&d, 0, sizeof(d));
    fault_start(&f, &r, u.c, 0, "drop", n, 1);
    uint64_t t0 = t_now_ms();
    int ret = rio_put(u.c, "obj", src, n, &call, &d);
    uint64_t el = t_now_ms() - t0;
    pthread_join(f.th, NULL);
    fprintf(stderr, "RAILS-FAULT control rail dropped mid-PUT: %d %s in %llu ms\n", ret,
            ret < 0 ? rio_errname(ret) : "", (unsigned long long)el);
    free(src);
    if (ret < 0)
        T_FAIL("rio_put with the control rail dropped: %d %s", ret, rio_errname(ret));
    rio_desc_cleanup(&d);
    T_LE(el, (uint64_t)4 * o.op_timeout_ms);
    get_check(u.c, "obj", n, 0xc2, &st);
    rl_heal(&r, 0);
    tu_close(&u);
    T_TRUE(rl_server_alive(&r));
    rl_down(&r);
}

/*
 * Rail 3 black-holed (nft drop: no reset, no error, no byte) in the middle
 * of a GET and then of a PUT, at the client's default timeouts (op timeout
 * 10 s, the transport's watchdog as long, TCP_USER_TIMEOUT 10 s): the
 * chunks rail 3 holds must move to the other rails once it has moved
 * nothing for about a second while they complete (engine.c, path_silent),
 * not after the op timeout. Before, rails 0-2 finished their share and sat
 * idle until it: each call took more than the op timeout. Byte-exact, and
 * the rail healed, the same client uses it again.
 */
TEST(black_holed_rail_costs_no_op_timeout)
{
    struct rl r;
    struct rio_options o;
    struct rio_stats st;
    struct rio_desc d;
    struct faulter f;
    struct tu u;
    char url[512];
    const size_t n = 256u << 20;

    rl_up(&r, 4, "1gbit");
    rl_server(&r, srv_args);
    rl_opts(&o);
    o.op_timeout_ms = 10000;
    snprintf(url, sizeof(url), "railio://10.99.0.2:%d?etag=none", RL_PORT);
    tu_open(&u, url, &o);
    rl_put(u.c, "obj", n, 0xdead);
    rl_put(u.c, "small", 16u << 20, 0x5a11);

    uint8_t *b = rl_buf(n);
    T_TRUE(b != NULL);
    struct rio_call call = {.stats = &st, .progress = on_progress, .progress_arg = &f};
    fault_start(&f, &r, u.c, F_RAIL, "drop", n, 0);
    uint64_t t0 = t_now_ms();
    int64_t got = rio_get(u.c, "obj", b, n, &call);
    uint64_t el = t_now_ms() - t0;
    pthread_join(f.th, NULL);
    fprintf(stderr,
            "RAILS-FAULT GET 256 MiB, rail 3 black-holed, default timeouts: %lld in %llu ms, "
            "retries %llu, rail 3 errors %llu\n",
            (long long)got, (unsigned long long)el, (unsigned long long)st.retries_total,
            (unsigned long long)st.path[F_RAIL].errors);
    T_EQ(got, (int64_t)n);
    T_PATTERN(b, n, 0xdead);
    T_LT(el, (uint64_t)o.op_timeout_ms / 2);
    T_GE(st.path[F_RAIL].errors, 1u);
    free(b);
    rl_heal(&r, F_RAIL);
    rail_comes_back(u.c, "small", 16u << 20, 0x5a11);

    uint8_t *src = rl_pattern(n, 0xbeef);
    T_TRUE(src != NULL);
    memset(&d, 0, sizeof(d));
    call = (struct rio_call){.stats = &st, .progress = on_progress, .progress_arg = &f};
    fault_start(&f, &r, u.c, F_RAIL, "drop", n, 1);
    t0 = t_now_ms();
    int ret = rio_put(u.c, "put", src, n, &call, &d);
    el = t_now_ms() - t0;
    pthread_join(f.th, NULL);
    fprintf(stderr,
            "RAILS-FAULT PUT 256 MiB, rail 3 black-holed, default timeouts: %d in %llu ms, retries "
            "%llu, rail 3 errors %llu\n",
            ret, (unsigned long long)el, (unsigned long long)st.retries_total,
            (unsigned long long)st.path[F_RAIL].errors);
    T_OK(ret);
    T_EQ(d.size, (uint64_t)n);
    rio_desc_cleanup(&d);
    T_LT(el, (uint64_t)o.op_timeout_ms / 2);
    T_GE(st.path[F_RAIL].errors, 1u);
    get_check(u.c, "put", n, 0xbeef, &st);
    free(src);
    rl_heal(&r, F_RAIL);
    tu_close(&u);
    T_TRUE(rl_server_alive(&r));
    rl_down(&r);
}
