/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the rails tests (tests/integration/test_rails*.c): N veth rails
 * between a client and a server network namespace built by
 * tests/harness/rails.sh, a railiod listening on every server end, iperf3
 * ceilings over the same rails, and the client (this process) inside the
 * client namespace.
 *
 * Both ends run inside the namespaces: the test's own thread enters the
 * server namespace (setns) to fork railiod, then the client namespace for
 * the rest of the test, so the engine and transport threads the client
 * starts live there too. Nothing in the root namespace ever routes to the
 * rails' 10.99.0.0/16 addresses.
 *
 *     struct rl r;
 *     rl_up(&r, 4, "1gbit");                // or "1gbit,1gbit,500mbit,250mbit"
 *     rl_server(&r, NULL);                  // railiod on 10.99.i.2:7070, then enter the client ns
 *     double mbps = rl_iperf(&r, 0xf, 1);   // rails 0..3, server -> client, Mbit/s summed
 *     ...
 *     rl_down(&r);                          // also at exit
 */
#ifndef RIO_TEST_RAILS_UTIL_H
#define RIO_TEST_RAILS_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "tcp_util.h"

#define RL_PORT 7070
#define RL_IPERF_PORT 5201

struct rl {
    unsigned n;
    char id[32];
    char script[512];
    char cns[64], sns[64];
    int cfd, sfd, rootfd;
    struct srv_env srv;
    int have_srv;
};

static struct rl *rl__live;

static inline int rl__sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int rl__sh(const char *fmt, ...)
{
    char cmd[2048];
    va_list ap;
    int st;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    fflush(NULL);
    st = system(cmd);
    if (st == -1 || !WIFEXITED(st))
        return -1;
    return WEXITSTATUS(st);
}

static inline void rl__enter(int fd, const char *what)
{
    if (setns(fd, CLONE_NEWNET) < 0)
        T_FAIL("setns(%s): %s", what, strerror(errno));
}

/* Remove the rails (and kill what still runs in their namespaces: only
 * processes this test started live there). */
static inline void rl_down(struct rl *r)
{
    if (!r->id[0])
        return;
    if (r->rootfd >= 0)
        (void)setns(r->rootfd, CLONE_NEWNET);
    if (r->have_srv) {
        srv_stop(&r->srv);
        r->have_srv = 0;
    }
    rl__sh("for ns in %s %s; do for p in $(ip netns pids $ns 2>/dev/null); do kill -9 $p; done; "
           "done; RIO_RAILS_ID=%s bash %s down",
           r->cns, r->sns, r->id, r->script);
    if (r->cfd >= 0)
        close(r->cfd);
    if (r->sfd >= 0)
        close(r->sfd);
    if (r->rootfd >= 0)
        close(r->rootfd);
    r->cfd = r->sfd = r->rootfd = -1;
    r->id[0] = '\0';
    if (rl__live == r)
        rl__live = NULL;
}

static inline void rl__atexit(void)
{
    if (rl__live)
        rl_down(rl__live);
}

/* Build n rails (rates: one tc rate, or one per rail, comma-separated), or
 * skip the test when this machine cannot host network namespaces. */
static inline void rl_up(struct rl *r, unsigned n, const char *rates)
{
    const char *src = getenv("T_SOURCE_DIR");
    char path[128];
    int st;

    memset(r, 0, sizeof(*r));
    r->cfd = r->sfd = r->rootfd = -1;
    r->n = n;
    snprintf(r->script, sizeof(r->script), "%s/tests/harness/rails.sh", src && *src ? src : ".");
    if (geteuid() != 0)
        T_SKIP("rails tests need root (network namespaces, veth, tc)");
    st = rl__sh("bash %s check", r->script);
    if (st == 77)
        T_SKIP("network namespaces are not available on this machine");
    if (st != 0)
        T_FAIL("rails.sh check: status %d", st);
    snprintf(r->id, sizeof(r->id), "%d", (int)getpid());
    snprintf(r->cns, sizeof(r->cns), "rio-c-%s", r->id);
    snprintf(r->sns, sizeof(r->sns), "rio-s-%s", r->id);
    r->rootfd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (r->rootfd < 0)
        T_FAIL("open /proc/self/ns/net: %s", strerror(errno));
    rl__live = r;
    atexit(rl__atexit);
    st = rl__sh("RIO_RAILS_ID=%s bash %s up %u %s >/dev/null", r->id, r->script, n, rates);
    if (st != 0)
        T_FAIL("rails.sh up %u %s: status %d", n, rates, st);
    snprintf(path, sizeof(path), "/var/run/netns/%s", r->cns);
    r->cfd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof(path), "/var/run/netns/%s", r->sns);
    r->sfd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->cfd < 0 || r->sfd < 0)
        T_FAIL("open the rails' namespaces: %s", strerror(errno));
}

/* railiod in the server namespace on every rail (10.99.i.2:7070), with the
 * NULL-terminated extra args; then this thread enters the client namespace. */
static inline void rl_server(struct rl *r, const char *const *extra)
{
    char listen[512];
    size_t len = 0;

    for (unsigned i = 0; i < r->n; i++)
        len += (size_t)snprintf(listen + len, sizeof(listen) - len, "%s10.99.%u.2:%d", i ? "," : "",
                                i, RL_PORT);
    rl__enter(r->sfd, r->sns);
    srv_prepare(&r->srv);
    r->have_srv = 1;
    srv_start_listen(&r->srv, listen, extra);
    rl__enter(r->cfd, r->cns);
}

/* The server is still running (did not crash). */
static inline int rl_server_alive(struct rl *r)
{
    return r->have_srv && waitpid(r->srv.pid, NULL, WNOHANG) == 0;
}

/* Fault helpers (rails.sh fail/heal); 0 on success. */
static inline void rl_fail(struct rl *r, unsigned rail, const char *how)
{
    int st = rl__sh("RIO_RAILS_ID=%s bash %s fail %u %s", r->id, r->script, rail, how);
    if (st != 0)
        T_FAIL("rails.sh fail %u %s: status %d", rail, how, st);
}

static inline void rl_heal(struct rl *r, unsigned rail)
{
    int st = rl__sh("RIO_RAILS_ID=%s bash %s heal %u", r->id, r->script, rail);
    if (st != 0)
        T_FAIL("rails.sh heal %u: status %d", rail, st);
}

static inline void rl_rate(struct rl *r, unsigned rail, const char *rate)
{
    int st = rl__sh("RIO_RAILS_ID=%s bash %s rate %u %s", r->id, r->script, rail, rate);
    if (st != 0)
        T_FAIL("rails.sh rate %u %s: status %d", rail, rate, st);
}

static inline double rl__json_bps(const char *file)
{
    char *buf;
    FILE *f = fopen(file, "r");
    size_t n;
    double v = -1;

    if (!f)
        return -1;
    buf = malloc(1 << 20);
    n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strstr(buf, "\"sum_received\"");
    if (p)
        p = strstr(p, "\"bits_per_second\"");
    if (p && (p = strchr(p, ':')))
        v = strtod(p + 1, NULL);
    free(buf);
    return v;
}

/*
 * The iperf3 ceiling over the rails in mask, all at once (one server and
 * one client process per rail, 2 s after 1 s omitted): summed Mbit/s (1e6)
 * received. reverse: server -> client (a GET's direction).
 */
static inline double rl_iperf(struct rl *r, unsigned mask, int reverse, double *per_rail)
{
    char dir[] = "/tmp/rio-iperf-XXXXXX";
    char cmd[4096];
    size_t len = 0;
    double sum = 0;

    if (!mkdtemp(dir))
        T_FAIL("mkdtemp: %s", strerror(errno));
    for (unsigned i = 0; i < r->n; i++)
        if (mask & (1u << i))
            len += (size_t)snprintf(cmd + len, sizeof(cmd) - len,
                                    "ip netns exec %s iperf3 -s -1 -B 10.99.%u.2 -p %u "
                                    ">/dev/null 2>&1 & ",
                                    r->sns, i, RL_IPERF_PORT + i);
    len += (size_t)snprintf(cmd + len, sizeof(cmd) - len, "sleep 0.3; ");
    for (unsigned i = 0; i < r->n; i++)
        if (mask & (1u << i))
            len += (size_t)snprintf(cmd + len, sizeof(cmd) - len,
                                    "ip netns exec %s iperf3 -c 10.99.%u.2 -B 10.99.%u.1 -p %u "
                                    "-t 2 -O 1 -J %s >%s/%u.json 2>&1 & ",
                                    r->cns, i, i, RL_IPERF_PORT + i, reverse ? "-R" : "", dir, i);
    snprintf(cmd + len, sizeof(cmd) - len, "wait");
    if (rl__sh("%s", cmd) != 0)
        T_FAIL("iperf3 over the rails failed");
    for (unsigned i = 0; i < r->n; i++) {
        char f[128];
        double v;
        if (!(mask & (1u << i)))
            continue;
        snprintf(f, sizeof(f), "%s/%u.json", dir, i);
        v = rl__json_bps(f) / 1e6;
        if (v <= 0)
            T_FAIL("iperf3 on rail %u gave no result (%s)", i, f);
        if (per_rail)
            per_rail[i] = v;
        sum += v;
        unlink(f);
    }
    rmdir(dir);
    return sum;
}

/*
 * A destination buffer as an application that reads into memory it already
 * uses: 2 MiB aligned, huge pages asked for, and touched once before the
 * measured call. A fresh malloc'ed buffer pays one page fault per 4 KiB
 * inside the transport's recv() (on this VM that cost more CPU than the
 * transfer itself), which would measure the allocator, not the rails.
 */
static inline uint8_t *rl_buf(size_t n)
{
    size_t len = (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    uint8_t *b = aligned_alloc(2u << 20, len ? len : 2u << 20);
    if (!b)
        T_FAIL("aligned_alloc(%zu)", n);
    (void)madvise(b, len, MADV_HUGEPAGE);
    memset(b, 0xEE, len);
    return b;
}

/* A buffer of n pattern bytes of seed in memory like rl_buf's (a source the
 * application already uses; filling 4 KiB pages, and the kernel's first read
 * of them, cost seconds of CPU per 512 MiB on this kind of VM). */
static inline uint8_t *rl_pattern(size_t n, uint64_t seed)
{
    uint8_t *b = rl_buf(n);
    t_fill_pattern(b, n, seed);
    return b;
}

/* PUT n pattern bytes of seed under key, from an rl_pattern buffer. */
static inline void rl__put(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                           const char *file, int line)
{
    uint8_t *b = rl_pattern(n, seed);
    int ret = rio_put(c, key, b, n, NULL, NULL);

    free(b);
    if (ret < 0)
        t__fail(file, line, "rio_put(%s, %zu): %d %s", key, n, ret, rio_errname(ret));
}
#define rl_put(c, key, n, seed) rl__put((c), (key), (n), (seed), __FILE__, __LINE__)

/* Options for the rails tests: 1 MiB chunks, depth 4, short cooldowns, op
 * timeout and the transport's timeouts low enough that a dead rail is
 * noticed in about a second. RIO_DEPTH / RIO_CHUNK_SIZE in the environment
 * override depth and chunk (for the sweeps in docs/tuning.md). */
static inline void rl_opts(struct rio_options *o)
{
    tu_opts(o);
    o->chunk_size = getenv("RIO_CHUNK_SIZE") ? 0 : 1u << 20;
    o->depth = getenv("RIO_DEPTH") ? 0 : 4;
    o->op_timeout_ms = 2000;
    o->deadline_ms = 60000;
    o->budget_bytes = 256ull << 20;
}

/* The client URL: the first rail's server address; the others come from
 * HELLO and are paired with this namespace's addresses by subnet.
 * RAILS_URL_PARAMS in the environment adds parameters (e.g. conns=2). */
static inline void rl_url(char *out, size_t cap, const char *params)
{
    const char *env = getenv("RAILS_URL_PARAMS");
    snprintf(
        out, cap,
        "railio://10.99.0.2:%d?user_timeout=1s&progress_timeout=1s&connect_timeout=500ms%s%s%s%s",
        RL_PORT, params && *params ? "&" : "", params ? params : "", env && *env ? "&" : "",
        env ? env : "");
}

static inline double rl_mbit(uint64_t bytes, uint64_t ns)
{
    return ns ? (double)bytes * 8.0 * 1e3 / (double)ns : 0;
}

/*
 * User CPU that processes other than this test and its railiod took while a
 * measured call ran, in cores on average over the call: another job, a
 * stray busy loop. rio_stats' run-queue wait does not see it when the
 * client's threads still get a core and the rails simply move less (a
 * shell spinning on one of the two cores took a 4-rail PUT after a rail
 * fault from 0.95 to 0.70 of iperf3, its threads barely waiting).
 * rl_busy_start before the call, rl_busy_end after.
 */
struct rl_busy {
    uint64_t t0, mach0, own0;
    double others;
};

static inline uint64_t rl__mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t rl__tick_ns(void)
{
    long hz = sysconf(_SC_CLK_TCK);
    return 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
}

/* User time of the whole machine (user + nice of every CPU). */
static inline uint64_t rl__mach_user_ns(void)
{
    unsigned long long u = 0, n = 0;
    FILE *f = fopen("/proc/stat", "r");
    if (f) {
        if (fscanf(f, "cpu %llu %llu", &u, &n) != 2)
            u = n = 0;
        fclose(f);
    }
    return (uint64_t)(u + n) * rl__tick_ns();
}

/* User time of this process and of the railiod it runs. */
static inline uint64_t rl__own_user_ns(void)
{
    struct rusage ru;
    uint64_t ns = 0;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000ull + (uint64_t)ru.ru_utime.tv_usec * 1000ull;
    if (rl__live && rl__live->have_srv) {
        char p[64], buf[1024];
        unsigned long long ut;
        snprintf(p, sizeof(p), "/proc/%d/stat", (int)rl__live->srv.pid);
        FILE *f = fopen(p, "r");
        if (f) {
            size_t len = fread(buf, 1, sizeof(buf) - 1, f);
            fclose(f);
            buf[len] = '\0';
            /* after "pid (comm) ": state, 5 ints, flags, 4 fault counts, utime */
            const char *q = strrchr(buf, ')');
            if (q && sscanf(q + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu", &ut) == 1)
                ns += (uint64_t)ut * rl__tick_ns();
        }
    }
    return ns;
}

static inline void rl_busy_start(struct rl_busy *b)
{
    b->t0 = rl__mono_ns();
    b->mach0 = rl__mach_user_ns();
    b->own0 = rl__own_user_ns();
    b->others = 0;
}

static inline void rl_busy_end(struct rl_busy *b)
{
    uint64_t dt = rl__mono_ns() - b->t0;
    uint64_t mach = rl__mach_user_ns() - b->mach0, own = rl__own_user_ns() - b->own0;
    b->others = dt && mach > own ? (double)(mach - own) / (double)dt : 0;
}

/* A miss is not railio's to answer for: a sanitized build, a starved call
 * (its threads spent a quarter of it in the run queue), one the engine
 * itself calls software-bound, or other processes took a quarter of a core
 * or more (b may be NULL). */
static inline bool rl_excused(const struct rio_stats *st, const struct rl_busy *b)
{
    return TU_SANITIZED || (st && (double)st->cpu_wait_ns >= 0.25 * (double)st->elapsed_ns) ||
           (st && st->verdict == RIO_VERDICT_SOFTWARE) || (b && b->others >= 0.25);
}

/*
 * A rate check: got >= need x ceil, in Mbit/s. A miss fails the test,
 * unless other processes took a quarter of a core or more during the call
 * (busy, rl_busy), the process was starved of CPU during the call (its
 * threads spent a quarter of it or more in the run queue: other processes
 * own the machine, the rate says nothing about railio; same rule as
 * tests/unit/test_engine_perf.c), the engine's own verdict for the call is "software"
 * (a client thread, not the rails, was the bottleneck), or the build is sanitized (ASan/UBSan cost
 * far more CPU than the transfer): then the test is skipped with the figures, after every
 * correctness check has passed. Call it last.
 */
static inline void rl__ratio(const char *file, int line, const char *what, double got, double ceil,
                             double need, const struct rio_stats *st, const struct rl_busy *b)
{
    if (got >= need * ceil)
        return;
    if (b && b->others >= 0.25)
        t__skip(file, line,
                "%s: %.0f of %.0f Mbit/s (%.3f < %.2f), machine too busy to measure: other "
                "processes took %.2f cores during the call",
                what, got, ceil, got / ceil, need, b->others);
    if (TU_SANITIZED)
        t__skip(file, line,
                "%s: %.0f of %.0f Mbit/s (%.3f < %.2f): not checked in a sanitized build", what,
                got, ceil, got / ceil, need);
    if (st && (double)st->cpu_wait_ns >= 0.25 * (double)st->elapsed_ns)
        t__skip(file, line,
                "%s: %.0f of %.0f Mbit/s (%.3f < %.2f), machine too busy to measure: threads "
                "waited %.1f ms for a CPU in a %.1f ms call",
                what, got, ceil, got / ceil, need, st->cpu_wait_ns / 1e6, st->elapsed_ns / 1e6);
    if (st && st->verdict == RIO_VERDICT_SOFTWARE)
        t__skip(file, line,
                "%s: %.0f of %.0f Mbit/s (%.3f < %.2f): the engine's verdict is software, the "
                "client's CPU bounded the call, not the rails (%s)",
                what, got, ceil, got / ceil, need, st->verdict_text);
    t__fail(file, line, "%s: %.0f of %.0f Mbit/s: ratio %.3f < %.2f (verdict %s: %s)", what, got,
            ceil, got / ceil, need, st ? rio_verdict_name(st->verdict) : "-",
            st ? st->verdict_text : "");
}
#define rl_ratio(what, got, ceil, need, st, busy)                                                  \
    rl__ratio(__FILE__, __LINE__, (what), (got), (ceil), (need), (st), (busy))

#endif
