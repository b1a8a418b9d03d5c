/* SPDX-License-Identifier: Apache-2.0 */
/* tlib: the helpers every test program shares (see tlib.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "cli/spawn.h"
#include "cli_util.h"
#include "core/alloc.h"
#include "core/checksum.h"
#include "core/internal.h"
#include "railio_mock.h"
#include "tlib.h"
#include "transport/fault.h"
#include "transport/tcp.h"
#ifdef RIO_HAVE_RADOS
#include "transport/rados.h"
#endif

#ifndef T_SOURCE_DIR_DEFAULT
#define T_SOURCE_DIR_DEFAULT "."
#endif
#ifndef T_BUILD_DIR_DEFAULT
#define T_BUILD_DIR_DEFAULT "."
#endif

/* ------------------------------------------------------------ memory */

uint8_t *t_pattern_buf(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        T_FAIL("malloc(%zu) failed", n);
    t_fill_pattern(p, n, seed);
    return p;
}

uint8_t *t_fill_buf(size_t n, int byte)
{
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        T_FAIL("malloc(%zu) failed", n);
    memset(p, byte, n);
    /* Through a volatile pointer: the compiler may not turn malloc+memset(0)
     * into an untouched calloc. */
    for (size_t i = 0; i < n; i += 4096)
        ((volatile uint8_t *)p)[i] = (uint8_t)byte;
    return p;
}

size_t t_count_byte(const uint8_t *p, size_t n, uint8_t v)
{
    size_t k = 0;

    for (size_t i = 0; i < n; i++)
        k += p[i] == v;
    return k;
}

void t_md5_hex(const void *buf, size_t n, char hex[33])
{
    unsigned char d[16];
    unsigned int dl = 0;

    if (!EVP_Digest(buf, n, d, &dl, EVP_md5(), NULL) || dl != 16)
        T_FAIL("EVP_Digest");
    for (int i = 0; i < 16; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

/* ------------------------------------------------------------ time */

uint64_t t_now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

void t_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

void *t_fire_main(void *arg)
{
    struct t_fire *f = arg;

    t_sleep_ms(f->after_ms);
    f->fired_at_ms = t_now_ms();
    rio_cancel_fire(f->cx);
    return NULL;
}

/* ------------------------------------------------------------ processes and files */

int t_sh(const char *fmt, ...)
{
    char cmd[8192];
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

void t_build_shim(const char *code, char *so, size_t cap)
{
    const char *tmp = t_scratch_dir("rio-shim");
    char src[512];

    if (t_sh("command -v cc >/dev/null") != 0)
        T_SKIP("needs cc to build a shim to preload");
    snprintf(src, sizeof(src), "%s/shim.c", tmp);
    snprintf(so, cap, "%s/shim.so", tmp);
    t_write_file(src, code, strlen(code));
    T_EQ(t_sh("cc -shared -fPIC -o %s %s -ldl", so, src), 0);
}

/* All of p over fd in one direction: 0, or -1. */
static int xfer_all(int fd, char *p, size_t n, int sending)
{
    while (n > 0) {
        ssize_t r = sending ? send(fd, p, n, MSG_NOSIGNAL) : recv(fd, p, n, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int t_send_all(int fd, const void *p, size_t n)
{
    return xfer_all(fd, (char *)p, n, 1);
}

int t_recv_all(int fd, void *p, size_t n)
{
    return xfer_all(fd, p, n, 0);
}

int t_read_int(const char *path)
{
    FILE *f = fopen(path, "r");
    int v = 0;

    if (!f)
        return 0;
    if (fscanf(f, "%d", &v) != 1)
        v = 0;
    fclose(f);
    return v;
}

int t_free_port(void)
{
    unsigned lo = 32768, hi = 60999;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");

    if (f) {
        if (fscanf(f, "%u %u", &lo, &hi) != 2 || lo <= 12000)
            lo = 32768;
        fclose(f);
    }
    /* A generator of its own: the test's rand() sequence stays as it was. */
    unsigned x = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    for (int i = 0; i < 200; i++) {
        struct sockaddr_in a;
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        int port;

        x = x * 1103515245u + 12345u;
        port = (int)(lo - 11000 + (x >> 8) % 11000);
        if (fd < 0)
            return 0;
        memset(&a, 0, sizeof(a));
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)port);
        int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(fd);
        if (ok)
            return port;
    }
    return 0;
}

int t_listen_loopback(char *addr, size_t cap)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int one = 1;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    T_GE(fd, 0);
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    T_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    T_EQ(listen(fd, 64), 0);
    T_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(addr, cap, "127.0.0.1:%u", ntohs(sa.sin_port));
    return fd;
}

static const char *env_or(const char *name, const char *dflt)
{
    const char *v = getenv(name);

    return v && *v ? v : dflt;
}

void t_harness_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/tests/harness/%s", env_or("T_SOURCE_DIR", T_SOURCE_DIR_DEFAULT), name);
}

void t_build_path(char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", env_or("T_BUILD_DIR", T_BUILD_DIR_DEFAULT), name);
}

const char *cli_bin(void)
{
    static char path[4096];

    t_build_path(path, sizeof(path), "railio");
    return path;
}

void t_argv_add(const char **argv, int *n, int cap, const char *const *extra)
{
    for (; extra && *extra; extra++) {
        if (*n >= cap - 1)
            T_FAIL("more than %d arguments", cap - 1);
        argv[(*n)++] = *extra;
    }
    argv[*n] = NULL;
}

pid_t t_spawn(const char *file, const char *const *argv, int own_group, const char *log)
{
    pid_t pid;

    fflush(NULL);
    pid = fork();
    if (pid < 0)
        T_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        if (own_group)
            setpgid(0, 0);
        rio_cli_log_to(log);
        execvp(file, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

int t_proc_wait(pid_t pid, unsigned timeout_ms)
{
    uint64_t t0 = t_now_ms();
    int st;

    for (;;) {
        if (waitpid(pid, &st, WNOHANG) == pid)
            return st;
        if (t_now_ms() - t0 > timeout_ms)
            return -1;
        usleep(5000);
    }
}

int t_wait_file(pid_t pid, const char *path, unsigned timeout_ms, char *text, size_t cap,
                int *status)
{
    uint64_t t0 = t_now_ms();

    for (;;) {
        FILE *f;

        if (waitpid(pid, status, WNOHANG) == pid)
            return -1;
        f = fopen(path, "r");
        if (f) {
            size_t len = fread(text, 1, cap - 1, f);

            fclose(f);
            text[len] = '\0';
            return 0;
        }
        if (t_now_ms() - t0 > timeout_ms)
            return -2;
        usleep(10000);
    }
}

void t_proc_kill(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

int t_proc_stop(pid_t pid, unsigned timeout_ms)
{
    int st;

    kill(pid, SIGTERM);
    st = t_proc_wait(pid, timeout_ms);
    if (st == -1)
        t_proc_kill(pid);
    return st;
}

#define ON_EXIT_MAX 16
static struct {
    void (*fn)(void *);
    void *arg;
    pid_t owner;
} on_exit_hooks[ON_EXIT_MAX];

void t__run_exit_hooks(void)
{
    for (unsigned i = 0; i < ON_EXIT_MAX; i++)
        if (on_exit_hooks[i].fn && on_exit_hooks[i].owner == getpid()) {
            void (*fn)(void *) = on_exit_hooks[i].fn;

            on_exit_hooks[i].fn = NULL;
            fn(on_exit_hooks[i].arg);
        }
}

void t_on_exit(void (*fn)(void *), void *arg)
{
    static int registered;

    if (!registered) {
        atexit(t__run_exit_hooks);
        registered = 1;
    }
    for (unsigned i = 0; i < ON_EXIT_MAX; i++)
        if (!on_exit_hooks[i].fn) {
            on_exit_hooks[i].fn = fn;
            on_exit_hooks[i].arg = arg;
            on_exit_hooks[i].owner = getpid();
            return;
        }
    T_FAIL("more than %d exit hooks", ON_EXIT_MAX);
}

void t_on_exit_cancel(void *arg)
{
    for (unsigned i = 0; i < ON_EXIT_MAX; i++)
        if (on_exit_hooks[i].fn && on_exit_hooks[i].arg == arg)
            on_exit_hooks[i].fn = NULL;
}

static int rm_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

void t_rm_tree(const char *dir)
{
    if (dir && dir[0])
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

#define SCRATCH_MAX 8
static char scratch[SCRATCH_MAX][256];
static pid_t scratch_owner[SCRATCH_MAX];

static void scratch_atexit(void)
{
    for (unsigned i = 0; i < SCRATCH_MAX; i++)
        if (scratch[i][0] && scratch_owner[i] == getpid()) {
            t_rm_tree(scratch[i]);
            scratch[i][0] = '\0';
        }
}

/* Directories PREFIX-PID-* of processes that are gone. */
static void scratch_reap(const char *base, const char *prefix)
{
    DIR *d = opendir(base);
    struct dirent *de;
    size_t pl = strlen(prefix);

    if (!d)
        return;
    while ((de = readdir(d))) {
        char *end;
        long pid;
        char p[512];

        if (strncmp(de->d_name, prefix, pl) != 0 || de->d_name[pl] != '-')
            continue;
        pid = strtol(de->d_name + pl + 1, &end, 10);
        if (pid <= 0 || *end != '-')
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(p, sizeof(p), "%s/%s", base, de->d_name);
        t_rm_tree(p);
    }
    closedir(d);
}

void t_mkdtemp(char *dir, size_t cap, const char *prefix)
{
    if ((size_t)snprintf(dir, cap, "/tmp/%s-XXXXXX", prefix) >= cap)
        T_FAIL("t_mkdtemp: /tmp/%s-XXXXXX is longer than %zu bytes", prefix, cap - 1);
    if (!mkdtemp(dir))
        T_FAIL("mkdtemp %s: %s", dir, strerror(errno));
}

const char *t_scratch_dir(const char *prefix)
{
    static int registered;
    const char *base = env_or("TMPDIR", "/tmp");

    scratch_reap(base, prefix);
    for (unsigned i = 0; i < SCRATCH_MAX; i++) {
        if (scratch[i][0] && scratch_owner[i] == getpid())
            continue;
        snprintf(scratch[i], sizeof(scratch[i]), "%s/%s-%ld-XXXXXX", base, prefix, (long)getpid());
        if (!mkdtemp(scratch[i]))
            T_FAIL("mkdtemp(%s): %s", scratch[i], strerror(errno));
        scratch_owner[i] = getpid();
        if (!registered) {
            atexit(scratch_atexit);
            registered = 1;
        }
        return scratch[i];
    }
    T_FAIL("more than %d scratch directories", SCRATCH_MAX);
}

int t_dir_count(const char *dir, const char *part)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    int n = 0;

    if (!d)
        T_FAIL("opendir %s: %s", dir, strerror(errno));
    while ((de = readdir(d)))
        if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..") &&
            (!part || strstr(de->d_name, part)))
            n++;
    closedir(d);
    return n;
}

int64_t t_piece_fill(void *arg, void *buf, size_t cap)
{
    struct t_piece_src *s = arg;
    size_t k = s->n - s->off;

    if (s->fail_at && s->off >= s->fail_at)
        return -EIO;
    if (k > cap)
        k = cap;
    if (k > s->step)
        k = s->step;
    memcpy(buf, s->p + s->off, k);
    s->off += k;
    return (int64_t)k;
}

uint8_t *t_slurp(const char *path, size_t *n)
{
    struct stat st;
    uint8_t *b;
    size_t got = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) < 0)
        T_FAIL("open %s: %s", path, strerror(errno));
    b = malloc((size_t)st.st_size + 1);
    T_NOTNULL(b);
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r <= 0)
            T_FAIL("read %s: %s", path, r < 0 ? strerror(errno) : "EOF");
        got += (size_t)r;
    }
    close(fd);
    b[got] = '\0';
    *n = got;
    return b;
}

void t_write_file(const char *path, const void *buf, size_t n)
{
    size_t done = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);

    if (fd < 0)
        T_FAIL("open %s: %s", path, strerror(errno));
    while (done < n) {
        ssize_t w = write(fd, (const uint8_t *)buf + done, n - done);
        if (w <= 0)
            T_FAIL("write %s: %s", path, strerror(errno));
        done += (size_t)w;
    }
    if (close(fd) != 0)
        T_FAIL("close %s: %s", path, strerror(errno));
}

/* ------------------------------------------------------------ options */

static const struct profile {
    uint64_t seed;
    unsigned retry_attempts; /* 0: the default */
    uint32_t backoff_base_ms, backoff_cap_ms, cooldown_base_ms, cooldown_cap_ms;
    uint32_t op_timeout_ms, deadline_ms;
} profiles[] = {
    [T_PROFILE_ENGINE] = {0x5eed, 0, 1, 20, 10, 100, 2000, 10000},
    [T_PROFILE_TCP] = {0x7c9, 0, 1, 50, 20, 200, 5000, 30000},
    [T_PROFILE_S3] = {0x53e, 5, 2, 50, 10, 100, 8000, 60000},
    [T_PROFILE_RADOS] = {0x7ad05, 0, 5, 100, 20, 200, 10000, 60000},
};

void t_opts(struct rio_options *o, enum t_profile p)
{
    const struct profile *f = &profiles[p];

    rio_options_init(o);
    o->chunk_size = 64 * T_KIB;
    o->seed = f->seed;
    if (f->retry_attempts)
        o->retry_attempts = f->retry_attempts;
    o->backoff_base_ms = f->backoff_base_ms;
    o->backoff_cap_ms = f->backoff_cap_ms;
    o->cooldown_base_ms = f->cooldown_base_ms;
    o->cooldown_cap_ms = f->cooldown_cap_ms;
    o->op_timeout_ms = f->op_timeout_ms;
    o->deadline_ms = f->deadline_ms;
}

void t_opts_sized(struct rio_options *o, enum t_profile p, uint64_t chunk, unsigned depth)
{
    t_opts(o, p);
    o->chunk_size = chunk;
    o->depth = depth;
}

/* ------------------------------------------------------------ clients */

struct rio_client *t__client_new(const char *url, const struct rio_options *o, const char *file,
                                 int line)
{
    struct rio_client *c = NULL;
    int ret = rio_client_new(url, o, &c);

    if (ret < 0)
        t__fail(file, line, "rio_client_new(%s): %d %s (%s)", url, ret, rio_errname(ret),
                rio_strerror(ret));
    if (!c)
        t__fail(file, line, "rio_client_new(%s) returned 0 and no client", url);
    return c;
}

void t__idle(struct rio_client *c, const char *file, int line)
{
    struct rio_counters k;
    struct rio_mock_counters m;
    struct rio__tcp_counters tk;
    uint64_t t0 = t_now_ms();

    rio_client_counters(c, &k);
    t__check_u(file, line, "counters.inflight_ops", "0", T__EQ, k.inflight_ops, 0);
    t__check_u(file, line, "counters.inflight_bytes", "0", T__EQ, k.inflight_bytes, 0);
    t__check_u(file, line, "counters.requests", "0", T__EQ, k.requests, 0);
    t__check_u(file, line, "counters.budget_reserved", "0", T__EQ, k.budget_reserved, 0);
    for (unsigned i = 0; i < RIO_MAX_PATHS; i++) {
        if (k.path_inflight_ops[i] || k.path_inflight_bytes[i])
            t__fail(file, line, "path %u: %" PRIu64 " ops, %" PRIu64 " bytes still in flight", i,
                    k.path_inflight_ops[i], k.path_inflight_bytes[i]);
    }
    memset(&m, 0, sizeof(m));
    rio_mock_counters(c, &m);
    t__check_u(file, line, "mock.inflight", "0", T__EQ, m.inflight, 0);
    t__check_u(file, line, "mock.rollback_violations", "0", T__EQ, m.rollback_violations, 0);
    /* Under the fault filter (faults= in the URL, always on mock://). */
    struct rio_transport *inner = rio__fault_inner(rio__client_transport(c));

    while (rio__tcp_counters(inner, &tk) >= 0 && tk.slots_armed) {
        if (t_now_ms() - t0 > 3000)
            t__fail(file, line, "transport still holds %" PRIu64 " slot(s)", tk.slots_armed);
        t_sleep_ms(2);
    }
#ifdef RIO_HAVE_RADOS
    struct rio_rados_counters r;

    rio__rados_counters(inner, &r);
    if (r.inflight_ops || r.inflight_bytes)
        t__fail(file, line, "rados: %" PRIu64 " ops, %" PRIu64 " bytes still in flight",
                r.inflight_ops, r.inflight_bytes);
#endif
}

void t__wait_idle(struct rio_client *c, unsigned ms, const char *file, int line)
{
    uint64_t end = t_now_ns() + (uint64_t)ms * 1000000ull;
    struct rio_counters k;

    for (;;) {
        rio_client_counters(c, &k);
        if ((!k.inflight_ops && !k.requests) || t_now_ns() > end)
            break;
        t_sleep_ms(2);
    }
    t__idle(c, file, line);
}

void t__close(struct rio_client *c, int64_t alloc0, const char *file, int line)
{
    t__idle(c, file, line);
    rio_client_destroy(c);
    if (alloc0 >= 0)
        t__check_i(file, line, "rio__alloc_outstanding() after destroy", "before rio_client_new",
                   T__EQ, rio__alloc_outstanding(), alloc0);
}

int64_t t_alloc_now(void)
{
    return rio__alloc_outstanding();
}

void t_stderr_begin(struct t_stderr *s)
{
    char path[] = "/tmp/rio_stderr_XXXXXX";

    s->fd = mkstemp(path);
    s->saved = dup(STDERR_FILENO);
    T_TRUE(s->fd >= 0 && s->saved >= 0);
    unlink(path);
    fflush(stderr);
    T_TRUE(dup2(s->fd, STDERR_FILENO) >= 0);
}

void t_stderr_end(struct t_stderr *s, char *out, size_t cap)
{
    ssize_t n;

    fflush(stderr);
    T_TRUE(dup2(s->saved, STDERR_FILENO) >= 0);
    close(s->saved);
    n = pread(s->fd, out, cap - 1, 0);
    close(s->fd);
    out[n > 0 ? n : 0] = '\0';
}

void t__client_refused(const char *url, const struct rio_options *o, const char *want,
                       const char *file, int line)
{
    struct rio_client *c = NULL;
    struct t_stderr cap;
    char got[1024];
    int ret;

    t_stderr_begin(&cap);
    ret = rio_client_new(url, o, &c);
    t_stderr_end(&cap, got, sizeof(got));
    if (ret != RIO_EINVAL || c)
        t__fail(file, line, "rio_client_new(%s): %d %s, want RIO_EINVAL", url, ret,
                rio_errname(ret));
    /* The reason is the caller's, in rio_error_detail() (what the CLI and
     * the Python exceptions show); the library writes no error of its own
     * to stderr (each one was printed twice). want may keep the prefix
     * "railio: " those lines had. */
    if (!strncmp(want, "railio: ", 8))
        want += 8;
    if (!strstr(rio_error_detail(), want))
        t__fail(file, line, "rio_client_new(%s): detail \"%s\" lacks \"%s\"", url,
                rio_error_detail(), want);
    if (strstr(got, want))
        t__fail(file, line, "rio_client_new(%s): the reason on stderr too: \"%s\"", url, got);
}

uint8_t *t__put_pattern(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                        const struct rio_call *call, int keep, uint64_t *gen, const char *file,
                        int line)
{
    uint8_t *src = t_pattern_buf(n, seed);
    struct rio_desc d;
    int ret;

    memset(&d, 0, sizeof(d));
    ret = rio_put(c, key, src, n, call, gen ? &d : NULL);
    if (ret != 0)
        t__fail(file, line, "rio_put(%s, %zu bytes): %d %s (%s)", key, n, ret, rio_errname(ret),
                rio_strerror(ret));
    if (gen) {
        *gen = d.generation;
        rio_desc_cleanup(&d);
    }
    if (keep)
        return src;
    free(src);
    return NULL;
}

void t__get_check(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                  const struct rio_call *call, const char *file, int line)
{
    uint8_t *dst = t_fill_buf(n + 1, 0xA5);
    int64_t got = rio_get(c, key, dst, n, call);
    int64_t bad;

    if (got != (int64_t)n)
        t__fail(file, line, "rio_get(%s): %" PRId64 " %s, want %zu bytes", key, got,
                got < 0 ? rio_errname((int)got) : "", n);
    bad = t_check_pattern(dst, n, seed);
    if (bad >= 0)
        t__fail(file, line, "rio_get(%s): first bad byte at offset %" PRId64 ": 0x%02x", key, bad,
                dst[bad]);
    if (dst[n] != 0xA5)
        t__fail(file, line, "rio_get(%s) wrote past the object's end", key);
    free(dst);
}

/* etag is that of the n bytes at src in chunks of chunk: their MD5
 * (etag=md5), or the fast etag (the default) of their chunk xxh3 list. */
static void etag_check(const char *file, int line, const char *what, const char *etag,
                       const uint8_t *src, uint64_t n, uint64_t chunk)
{
    char md5[33], fast[33];
    uint64_t nch = n ? (n - 1) / chunk + 1 : 0;
    uint64_t *xxh = calloc(nch ? nch : 1, sizeof(uint64_t));

    if (!xxh)
        t__fail(file, line, "calloc(%" PRIu64 ")", nch);
    for (uint64_t i = 0; i < nch; i++) {
        uint64_t off = i * chunk, len = n - off < chunk ? n - off : chunk;
        xxh[i] = rio__xxh3(src + off, (size_t)len);
    }
    rio__etag_fast(xxh, nch, n, chunk, fast);
    free(xxh);
    t_md5_hex(src, n, md5);
    if (strcmp(etag, md5) != 0 && strcmp(etag, fast) != 0)
        t__fail(file, line, "%s \"%s\" is neither the MD5 (%s) nor the fast etag (%s) of the bytes",
                what, etag, md5, fast);
}

void t__desc_check(struct rio_client *c, const char *key, const uint8_t *src, uint64_t n,
                   uint64_t gen, uint64_t chunk, int need_etag, const char *file, int line)
{
    struct rio_desc d;
    int ret;

    memset(&d, 0, sizeof(d));
    ret = rio_stat(c, key, &d);
    if (ret != 0)
        t__fail(file, line, "rio_stat(%s): %s", key, rio_errname(ret));
    t__streq(file, line, "d.key", "key", d.key, key);
    t__check_u(file, line, "d.size", "n", T__EQ, d.size, n);
    t__check_u(file, line, "d.generation", "gen", T__EQ, d.generation, gen);
    t__check_u(file, line, "d.chunk_size", "chunk", T__EQ, d.chunk_size, chunk);
    t__check_u(file, line, "d.nchunks", "chunks of n", T__EQ, d.nchunks,
               n ? (n - 1) / chunk + 1 : 0);
    if (need_etag && d.nchunks && !d.xxh)
        t__fail(file, line, "%s: no chunk checksums in the descriptor", key);
    for (uint64_t i = 0; d.xxh && i < d.nchunks; i++) {
        uint64_t off = i * chunk, len = n - off < chunk ? n - off : chunk;
        t__check_u(file, line, "d.xxh[i]", "xxh3 of chunk i", T__EQ, d.xxh[i],
                   rio__xxh3(src + off, (size_t)len));
    }
    if (need_etag || d.etag[0])
        etag_check(file, line, "d.etag", d.etag, src, n, chunk);
    rio_desc_cleanup(&d);
}

void t__roundtrip(struct rio_client *c, const char *key, size_t n, uint64_t seed, uint64_t chunk,
                  const char *file, int line)
{
    uint64_t gen = 0;
    uint8_t *src = t__put_pattern(c, key, n, seed, NULL, 1, &gen, file, line);

    if (!gen)
        t__fail(file, line, "rio_put(%s): generation 0", key);
    t__desc_check(c, key, src, n, gen, chunk, 1, file, line);
    free(src);
    t__get_check(c, key, n, seed, NULL, file, line);
    t__idle(c, file, line);
}

void t__roundtrip_big(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                      const char *file, int line)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    uint8_t *src = t_pattern_buf(n, seed), *dst = malloc(n ? n : 1);
    struct rio_desc d, s;
    char md5[33];
    int ret;
    int64_t got;

    if (!dst)
        t__fail(file, line, "malloc(%zu)", n);
    t_md5_hex(src, n, md5);
    memset(&d, 0, sizeof(d));
    ret = rio_put(c, key, src, n, &call, &d);
    if (ret != 0)
        t__fail(file, line, "rio_put(%s, %zu): %s", key, n, rio_errname(ret));
    fprintf(stderr, "  PUT %zu MiB: %.0f MB/s (%" PRIu64 " chunks, hash %.2f s)\n", n >> 20,
            st.goodput_mbps, st.chunks, st.hash_ns / 1e9);
    if (d.etag[0] && strcmp(d.etag, md5) != 0)
        etag_check(file, line, "d.etag", d.etag, src, n, d.chunk_size);
    else
        t__streq(file, line, "d.etag", "md5", d.etag, md5);
    memset(&s, 0, sizeof(s));
    ret = rio_stat(c, key, &s);
    if (ret != 0)
        t__fail(file, line, "rio_stat(%s): %s", key, rio_errname(ret));
    t__check_u(file, line, "s.size", "n", T__EQ, s.size, n);
    t__streq(file, line, "s.etag", "d.etag", s.etag, d.etag);
    memset(dst, 0xA5, n);
    got = rio_get(c, key, dst, n, &call);
    if (got != (int64_t)n)
        t__fail(file, line, "rio_get(%s): %" PRId64 " %s", key, got,
                got < 0 ? rio_errname((int)got) : "");
    fprintf(stderr, "  GET %zu MiB: %.0f MB/s, retries %" PRIu64 "\n", n >> 20, st.goodput_mbps,
            st.retries_total);
    t__memeq(file, line, "dst", "src", dst, src, n);
    ret = rio_delete(c, key);
    if (ret != 0)
        t__fail(file, line, "rio_delete(%s): %s", key, rio_errname(ret));
    rio_desc_cleanup(&d);
    rio_desc_cleanup(&s);
    free(src);
    free(dst);
}

void t__fault(struct rio_client *c, const char *spec, const char *file, int line)
{
    struct rio_mock_fault f;
    int ret;

    memset(&f, 0, sizeof(f));
    ret = rio_mock_fault_parse(spec, &f);
    if (ret < 0)
        t__fail(file, line, "rio_mock_fault_parse(\"%s\"): %d %s", spec, ret, rio_errname(ret));
    ret = rio_mock_fault_add(c, &f);
    if (ret < 0)
        t__fail(file, line, "rio_mock_fault_add(\"%s\"): %d %s", spec, ret, rio_errname(ret));
}

uint64_t t_faults_fired(struct rio_client *c)
{
    struct rio_mock_counters m;

    memset(&m, 0, sizeof(m));
    rio_mock_counters(c, &m);
    return m.faults_fired;
}

/* ------------------------------------------------------------ stats */

uint64_t t_path_bytes(const struct rio_stats *st, unsigned *used)
{
    uint64_t b = 0;
    unsigned u = 0;

    for (unsigned i = 0; i < st->npaths && i < RIO_MAX_PATHS; i++) {
        b += st->path[i].bytes;
        u += st->path[i].bytes > 0;
    }
    if (used)
        *used = u;
    return b;
}

uint64_t t_path_ops(const struct rio_stats *st)
{
    uint64_t n = 0;

    for (unsigned i = 0; i < st->npaths && i < RIO_MAX_PATHS; i++)
        n += st->path[i].ops;
    return n;
}

void t_stats_print(const char *what, const struct rio_stats *st)
{
    fprintf(stderr,
            "  %s: %" PRIu64 " B in %.1f ms = %.1f MB/s, chunks %" PRIu64 ", retries %" PRIu64
            ", peak %" PRIu64 " B, verdict %s (%s)\n",
            what, st->bytes, st->elapsed_ns / 1e6, st->goodput_mbps, st->chunks, st->retries_total,
            st->peak_inflight_bytes, rio_verdict_name(st->verdict), st->verdict_text);
    for (unsigned i = 0; i < st->npaths && i < RIO_MAX_PATHS; i++)
        fprintf(stderr,
                "    path %u: %" PRIu64 " B, %" PRIu64 " ops, %" PRIu64
                " errors, %.1f MB/s, busy %.1f ms, state %d\n",
                i, st->path[i].bytes, st->path[i].ops, st->path[i].errors, st->path[i].rate_mbps,
                st->path[i].busy_ns / 1e6, st->path[i].state);
}

/* ------------------------------------------------------------ threads */

static void *get_job_main(void *arg)
{
    struct t_get_job *j = arg;

    j->call.stats = &j->st;
    j->t_start_ns = t_now_ns();
    j->result = rio_get(j->c, j->key, j->buf, j->cap, &j->call);
    j->t_end_ns = t_now_ns();
    return NULL;
}

void t_get_job_start(struct t_get_job *j)
{
    T_EQ(pthread_create(&j->th, NULL, get_job_main, j), 0);
}

void t_get_job_join(struct t_get_job *j)
{
    T_EQ(pthread_join(j->th, NULL), 0);
}
