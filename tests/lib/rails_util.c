/* SPDX-License-Identifier: Apache-2.0 */
/* rails_util: veth rails, railiod on them and iperf3 ceilings (see rails_util.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "rails_util.h"
#include "cli/iperf_json.h"
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

static struct rl *rl__live;

static void rl__enter(int fd, const char *what)
{
    if (setns(fd, CLONE_NEWNET) < 0)
        T_FAIL("setns(%s): %s", what, strerror(errno));
}

void rl_down(struct rl *r)
{
    if (!r->id[0])
        return;
    if (r->rootfd >= 0)
        (void)setns(r->rootfd, CLONE_NEWNET);
    if (r->have_srv) {
        srv_stop(&r->srv);
        r->have_srv = 0;
    }
    t_sh("for ns in %s %s; do for p in $(ip netns pids $ns 2>/dev/null); do kill -9 $p; done; "
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

static void rl__atexit(void)
{
    if (rl__live)
        rl_down(rl__live);
}

void rl_up(struct rl *r, unsigned n, const char *rates)
{
    char path[128];
    int st;

    memset(r, 0, sizeof(*r));
    r->cfd = r->sfd = r->rootfd = -1;
    r->n = n;
    t_harness_path(r->script, sizeof(r->script), "rails.sh");
    if (geteuid() != 0)
        T_SKIP("rails tests need root (network namespaces, veth, tc)");
    st = t_sh("bash %s check", r->script);
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
    st = t_sh("RIO_RAILS_ID=%s bash %s up %u %s >/dev/null", r->id, r->script, n, rates);
    if (st != 0)
        T_FAIL("rails.sh up %u %s: status %d", n, rates, st);
    snprintf(path, sizeof(path), "/var/run/netns/%s", r->cns);
    r->cfd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof(path), "/var/run/netns/%s", r->sns);
    r->sfd = open(path, O_RDONLY | O_CLOEXEC);
    if (r->cfd < 0 || r->sfd < 0)
        T_FAIL("open the rails' namespaces: %s", strerror(errno));
}

void rl_server(struct rl *r, const char *const *extra)
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

int rl_server_alive(struct rl *r)
{
    return r->have_srv && waitpid(r->srv.pid, NULL, WNOHANG) == 0;
}

void rl_fail(struct rl *r, unsigned rail, const char *how)
{
    int st = t_sh("RIO_RAILS_ID=%s bash %s fail %u %s", r->id, r->script, rail, how);
    if (st != 0)
        T_FAIL("rails.sh fail %u %s: status %d", rail, how, st);
}

void rl_heal(struct rl *r, unsigned rail)
{
    int st = t_sh("RIO_RAILS_ID=%s bash %s heal %u", r->id, r->script, rail);
    if (st != 0)
        T_FAIL("rails.sh heal %u: status %d", rail, st);
}

void rl_rate(struct rl *r, unsigned rail, const char *rate)
{
    int st = t_sh("RIO_RAILS_ID=%s bash %s rate %u %s", r->id, r->script, rail, rate);
    if (st != 0)
        T_FAIL("rails.sh rate %u %s: status %d", rail, rate, st);
}

double rl_iperf(struct rl *r, unsigned mask, int reverse, double *per_rail)
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
    if (t_sh("%s", cmd) != 0)
        T_FAIL("iperf3 over the rails failed");
    for (unsigned i = 0; i < r->n; i++) {
        char f[128];
        double v;
        if (!(mask & (1u << i)))
            continue;
        snprintf(f, sizeof(f), "%s/%u.json", dir, i);
        v = rio_cli_iperf_json_bps(f) / 1e6;
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

uint8_t *rl_buf(size_t n)
{
    size_t len = (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    uint8_t *b = aligned_alloc(2u << 20, len ? len : 2u << 20);
    if (!b)
        T_FAIL("aligned_alloc(%zu)", n);
    (void)madvise(b, len, MADV_HUGEPAGE);
    memset(b, 0xEE, len);
    return b;
}

uint8_t *rl_pattern(size_t n, uint64_t seed)
{
    uint8_t *b = rl_buf(n);
    t_fill_pattern(b, n, seed);
    return b;
}

/* PUT n pattern bytes of seed under key, from an rl_pattern buffer. */
void rl__put(struct rio_client *c, const char *key, size_t n, uint64_t seed, const char *file,
             int line)
{
    uint8_t *b = rl_pattern(n, seed);
    int ret = rio_put(c, key, b, n, NULL, NULL);

    free(b);
    if (ret < 0)
        t__fail(file, line, "rio_put(%s, %zu): %d %s", key, n, ret, rio_errname(ret));
}

void rl_opts(struct rio_options *o)
{
    tu_opts(o);
    o->chunk_size = getenv("RIO_CHUNK_SIZE") ? 0 : 1u << 20;
    o->depth = getenv("RIO_DEPTH") ? 0 : 4;
    o->op_timeout_ms = 2000;
    o->deadline_ms = 60000;
    o->budget_bytes = 256ull << 20;
}

void rl_url(char *out, size_t cap, const char *params)
{
    const char *env = getenv("RAILS_URL_PARAMS");
    snprintf(
        out, cap,
        "railio://10.99.0.2:%d?user_timeout=1s&progress_timeout=1s&connect_timeout=500ms%s%s%s%s",
        RL_PORT, params && *params ? "&" : "", params ? params : "", env && *env ? "&" : "",
        env ? env : "");
}

double rl_mbit(uint64_t bytes, uint64_t ns)
{
    return ns ? (double)bytes * 8.0 * 1e3 / (double)ns : 0;
}

static uint64_t rl__tick_ns(void)
{
    long hz = sysconf(_SC_CLK_TCK);
    return 1000000000ull / (uint64_t)(hz > 0 ? hz : 100);
}

/* The machine's CPU time by kind (every CPU), from one read of /proc/stat:
 * user (user + nice), busy (all but idle and iowait), and steal (time the
 * hypervisor gave the vCPUs to someone else). */
static void rl__mach_cpu_ns(uint64_t *user, uint64_t *busy, uint64_t *steal)
{
    unsigned long long v[8] = {0};
    FILE *f = fopen("/proc/stat", "r");
    *user = *busy = *steal = 0;
    if (!f)
        return;
    if (fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu %llu", &v[0], &v[1], &v[2], &v[3], &v[4],
               &v[5], &v[6], &v[7]) == 8) {
        *user = (uint64_t)(v[0] + v[1]) * rl__tick_ns();
        *busy = (uint64_t)(v[0] + v[1] + v[2] + v[5] + v[6] + v[7]) * rl__tick_ns();
        *steal = (uint64_t)v[7] * rl__tick_ns();
    }
    fclose(f);
}

/* User time of this process and of the railiod it runs. */
static uint64_t rl__own_user_ns(void)
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

void rl_busy_start(struct rl_busy *b)
{
    b->t0 = t_now_ns();
    rl__mach_cpu_ns(&b->mach0, &b->busy0, &b->steal0);
    b->own0 = rl__own_user_ns();
    b->others = b->busy = b->steal = 0;
}

void rl_busy_end(struct rl_busy *b)
{
    uint64_t dt = t_now_ns() - b->t0;
    uint64_t mach, busy, steal, own = rl__own_user_ns() - b->own0;
    rl__mach_cpu_ns(&mach, &busy, &steal);
    mach -= b->mach0;
    b->others = dt && mach > own ? (double)(mach - own) / (double)dt : 0;
    b->busy = dt && busy > b->busy0 ? (double)(busy - b->busy0) / (double)dt : 0;
    b->steal = dt && steal > b->steal0 ? (double)(steal - b->steal0) / (double)dt : 0;
}

bool rl_excused(const struct rio_stats *st, const struct rl_busy *b)
{
    return TU_SANITIZED || (st && (double)st->cpu_wait_ns >= 0.25 * (double)st->elapsed_ns) ||
           (st && st->verdict == RIO_VERDICT_SOFTWARE) || (b && b->others >= 0.25) ||
           (b && b->steal >= 0.25);
}

/*
 * A rate check: got >= need x ceil, in Mbit/s. A miss fails the test,
 * unless other processes took a quarter of a core or more during the call
 * (busy, rl_busy), the hypervisor took as much from this VM (steal), the process was starved of CPU
 * during the call (its threads spent a quarter of it or more in the run queue: other processes own
 * the machine, the rate says nothing about railio; same rule as tests/unit/test_engine_perf.c), the
 * engine's own verdict for the call is "software" (a client thread, not the rails, was the
 * bottleneck), or the build is sanitized (ASan/UBSan cost far more CPU than the transfer): then the
 * test is skipped with the figures, after every correctness check has passed. Call it last.
 */
void rl__ratio(const char *file, int line, const char *what, double got, double ceil, double need,
               const struct rio_stats *st, const struct rl_busy *b)
{
    if (got >= need * ceil)
        return;
    if (b && b->others >= 0.25)
        t__skip(file, line,
                "%s: %.0f of %.0f Mbit/s (%.3f < %.2f), machine too busy to measure: other "
                "processes took %.2f cores during the call",
                what, got, ceil, got / ceil, need, b->others);
    if (b && b->steal >= 0.25)
        t__skip(file, line,
                "%s: %.0f of %.0f Mbit/s (%.3f < %.2f), machine too busy to measure: the "
                "hypervisor took %.2f cores of this VM during the call (steal)",
                what, got, ceil, got / ceil, need, b->steal);
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
