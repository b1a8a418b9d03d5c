/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the s3:// and http:// tests (tests/integration/test_s3*.c).
 *
 * Peers, each started once per test program by the first test that asks and
 * stopped when the program exits (the harness forks one process per test,
 * so the start is lazy and the stop runs in the harness process only):
 * - su_fault_port(): tests/harness/s3fault.py, the scripted S3-like server
 *   that misbehaves on request (faults chosen by the key, see the script);
 *   detached with setsid, its PID recorded, killed by PID at exit, and gone
 *   by itself when the harness process dies (--owner);
 * - su_rgw(): radosgw on a single-host Ceph cluster from
 *   tests/harness/ceph.sh --rgw (through ceph_env.h, define SU_WITH_RGW
 *   before including this file); exports the S3 keys into the environment.
 *
 * Independent checks: the curl CLI signing with its own SigV4
 * (su_curl), an MD5 by OpenSSL, and the closing checks every test ends with
 * (nothing in flight, nothing leaked).
 */
#ifndef RIO_TEST_S3_UTIL_H
#define RIO_TEST_S3_UTIL_H

#include <errno.h>
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

#include "core/alloc.h"
#include "core/checksum.h"
#include "railio.h"
#include "t.h"

#ifdef SU_WITH_RGW
/* radosgw's port, chosen once in the harness process (see su_init). */
static char su_ceph_args[64];
#define T_CEPH_ARGS su_ceph_args
#include "../harness/ceph_env.h"
#endif

#define SU_KIB 1024ull
#define SU_MIB (1024ull * 1024ull)

static pid_t su_owner;
static char su_dir[512];
static char su_src[1024];

/* A TCP port on 127.0.0.1 nothing listens on right now, below the kernel's
 * ephemeral range: a port from that range may become the source port of
 * another test's outgoing connection before radosgw binds it. */
static inline int su_free_port(void)
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

static inline int su_read_int(const char *path)
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

static void su_atexit(void)
{
    char path[700];
    int pid;

    if (getpid() != su_owner)
        return;
    snprintf(path, sizeof(path), "%s/fault.pid", su_dir);
    pid = su_read_int(path);
    if (pid > 0)
        kill(pid, SIGKILL);
    snprintf(path, sizeof(path), "rm -rf '%s'", su_dir);
    if (system(path) != 0)
        fprintf(stderr, "s3_util: could not remove %s\n", su_dir);
}

__attribute__((constructor)) static void su_init(void)
{
    const char *tmp = getenv("TMPDIR");
    const char *src = getenv("T_SOURCE_DIR");

    su_owner = getpid();
    snprintf(su_dir, sizeof(su_dir), "%s/rio-s3-%d", tmp && *tmp ? tmp : "/tmp", (int)su_owner);
    if (src && *src) {
        snprintf(su_src, sizeof(su_src), "%s", src);
    } else {
        /* Run by hand: two levels above this header (tests/integration/). */
        snprintf(su_src, sizeof(su_src), "%s", __FILE__);
        for (int i = 0; i < 3; i++) {
            char *slash = strrchr(su_src, '/');
            if (slash)
                *slash = '\0';
        }
    }
#ifdef SU_WITH_RGW
    snprintf(su_ceph_args, sizeof(su_ceph_args), "--rgw %d --memstore 6G", su_free_port());
#endif
    atexit(su_atexit);
}

/* Run a shell command; its exit status (-1 if it did not exit). */
static inline int su_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline int su_sh(const char *fmt, ...)
{
    char cmd[8192];
    va_list ap;
    int st;

    va_start(ap, fmt);
    vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The fault server's port; starts it on first use. */
static inline int su_fault_port(void)
{
    char port_file[700], pid_file[700];
    int port;

    snprintf(port_file, sizeof(port_file), "%s/fault.port", su_dir);
    snprintf(pid_file, sizeof(pid_file), "%s/fault.pid", su_dir);
    port = su_read_int(port_file);
    if (port > 0)
        return port;
    if (su_sh("command -v python3 >/dev/null 2>&1") != 0)
        T_SKIP("python3 is missing (scripts/install-deps.sh installs it)");
    mkdir(su_dir, 0700);
    /* Its own session: it outlives the test that started it (a test's
     * process group is killed on timeout), and later tests reuse it. */
    if (su_sh("py=/usr/bin/python3; [ -x $py ] || py=python3; "
              "setsid $py '%s/tests/harness/s3fault.py' --port-file '%s' --owner %d "
              "</dev/null >'%s/fault.log' 2>&1 & echo $! >'%s'",
              su_src, port_file, (int)su_owner, su_dir, pid_file) != 0)
        T_FAIL("could not start s3fault.py");
    for (int i = 0; i < 200; i++) {
        port = su_read_int(port_file);
        if (port > 0)
            return port;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    T_FAIL("s3fault.py did not write its port within 10 s (see %s/fault.log)", su_dir);
}

/* "requests=N fired=N uploads=N objects=N" from the fault server. */
static inline void su_fault_stats(int port, unsigned *fired, unsigned *uploads)
{
    char out[700];
    unsigned req = 0, obj = 0;

    snprintf(out, sizeof(out), "%s/stats", su_dir);
    if (su_sh("curl -s -m 5 -o '%s' http://127.0.0.1:%d/_stats", out, port) != 0)
        T_FAIL("curl /_stats failed");
    FILE *f = fopen(out, "r");
    if (!f ||
        fscanf(f, "requests=%u fired=%u uploads=%u objects=%u", &req, fired, uploads, &obj) != 4)
        T_FAIL("bad /_stats reply");
    fclose(f);
}

#ifdef SU_WITH_RGW
/* Start radosgw (once), export its keys, and make sure bucket exists.
 * Returns the endpoint ("http://127.0.0.1:PORT", static storage). */
static inline const char *su_rgw(const char *bucket)
{
    static char endpoint[128];
    char path[700], line[512];
    FILE *f;

    t_ceph_conf();
    snprintf(path, sizeof(path), "%s/s3.env", t_ceph_dir());
    f = fopen(path, "r");
    if (!f)
        T_FAIL("no %s: ceph.sh --rgw did not write it", path);
    while (fgets(line, sizeof(line), f)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        line[strcspn(line, "\n")] = '\0';
        eq[1 + strcspn(eq + 1, "\n")] = '\0';
        if (!strcmp(line, "S3_ENDPOINT"))
            snprintf(endpoint, sizeof(endpoint), "%s", eq + 1);
        else if (!strncmp(line, "AWS_", 4))
            setenv(line, eq + 1, 1);
    }
    fclose(f);
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("RIO_S3_ENDPOINT");
    unsetenv("AWS_ENDPOINT_URL");
    if (!endpoint[0])
        T_FAIL("no S3_ENDPOINT in %s", path);
    /* 200 when created, 409 when it exists already: both fine. */
    su_sh("curl -s -o /dev/null -m 20 --aws-sigv4 aws:amz:us-east-1:s3 --user \"$AWS_ACCESS_KEY_ID:"
          "$AWS_SECRET_ACCESS_KEY\" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT '%s/%s'",
          endpoint, bucket);
    return endpoint;
}

/*
 * The curl CLI against radosgw with its own SigV4 (an independent signer):
 * `curl ARGS URL` where URL is endpoint/path. Output in *out (malloc'd,
 * NUL-terminated, *len bytes) when out != NULL. Returns the HTTP status, or
 * -1 when curl failed.
 */
static inline int su_curl(const char *endpoint, const char *args, const char *path, char **out,
                          size_t *len)
{
    char body[700], code[700];
    int st, status = -1;

    snprintf(body, sizeof(body), "%s/curl.body.%d", su_dir, (int)getpid());
    snprintf(code, sizeof(code), "%s/curl.code.%d", su_dir, (int)getpid());
    mkdir(su_dir, 0700);
    st = su_sh("curl -s -m 120 --aws-sigv4 aws:amz:us-east-1:s3 --user \"$AWS_ACCESS_KEY_ID:"
               "$AWS_SECRET_ACCESS_KEY\" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' %s "
               "-o '%s' -w '%%{http_code}' '%s/%s' >'%s'",
               args, body, endpoint, path, code);
    if (st == 0)
        status = su_read_int(code);
    if (out) {
        FILE *f = fopen(body, "rb");
        size_t cap = 1 << 16, n = 0, r;
        char *b = malloc(cap + 1);
        if (!b)
            T_FAIL("malloc");
        while (f && (r = fread(b + n, 1, cap - n, f)) > 0) {
            n += r;
            if (n == cap) {
                cap *= 2;
                b = realloc(b, cap + 1);
                if (!b)
                    T_FAIL("realloc");
            }
        }
        if (f)
            fclose(f);
        b[n] = '\0';
        *out = b;
        if (len)
            *len = n;
    }
    unlink(body);
    unlink(code);
    return status;
}

/* Occurrences of needle in a curl reply for path (bucket listings). */
static inline unsigned su_curl_count(const char *endpoint, const char *path, const char *needle)
{
    char *b;
    unsigned n = 0;

    if (su_curl(endpoint, "", path, &b, NULL) != 200)
        T_FAIL("curl GET %s failed", path);
    for (const char *p = b; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(b);
    return n;
}
#endif

/* ------------------------------------------------------------ clients */

/* Options for fast tests: short backoff and timeouts, bounded time. */
static inline void su_opts(struct rio_options *o, uint64_t chunk, unsigned depth)
{
    rio_options_init(o);
    o->chunk_size = chunk;
    o->depth = depth;
    o->seed = 0x53e;
    o->retry_attempts = 5;
    o->backoff_base_ms = 2;
    o->backoff_cap_ms = 50;
    o->cooldown_base_ms = 10;
    o->cooldown_cap_ms = 100;
    o->op_timeout_ms = 8000;
    o->deadline_ms = 60000;
}

static inline struct rio_client *su_client_at(const char *file, int line, const char *url,
                                              const struct rio_options *o)
{
    struct rio_client *c = NULL;
    int ret = rio_client_new(url, o, &c);

    if (ret < 0)
        t__fail(file, line, "rio_client_new(%s): %s (%s)", url, rio_errname(ret),
                rio_strerror(ret));
    return c;
}
#define su_client(url, o) su_client_at(__FILE__, __LINE__, (url), (o))

/* Nothing in flight anywhere in the client. */
static inline void su_idle_at(const char *file, int line, struct rio_client *c)
{
    struct rio_counters k;

    rio_client_counters(c, &k);
    if (k.inflight_ops || k.inflight_bytes || k.requests || k.budget_reserved)
        t__fail(file, line,
                "not idle: ops %" PRIu64 " bytes %" PRIu64 " requests %" PRIu64
                " reserved %" PRIu64,
                k.inflight_ops, k.inflight_bytes, k.requests, k.budget_reserved);
    for (unsigned i = 0; i < RIO_MAX_PATHS; i++)
        if (k.path_inflight_ops[i] || k.path_inflight_bytes[i])
            t__fail(file, line, "path %u not idle", i);
}
#define su_idle(c) su_idle_at(__FILE__, __LINE__, (c))

/* Destroy c and check every rio__malloc block it took came back. */
static inline void su_close_at(const char *file, int line, struct rio_client *c, int64_t alloc0)
{
    su_idle_at(file, line, c);
    rio_client_destroy(c);
    t__check_i(file, line, "rio__alloc_outstanding()", "before the client", T__EQ,
               rio__alloc_outstanding(), alloc0);
}
#define su_close(c, alloc0) su_close_at(__FILE__, __LINE__, (c), (alloc0))

static inline uint8_t *su_pattern(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);

    if (!p)
        T_FAIL("malloc(%zu)", n);
    t_fill_pattern(p, n, seed);
    return p;
}

static inline void su_md5(const void *buf, size_t n, char hex[33])
{
    unsigned char d[16];
    unsigned int dl = 0;

    if (!EVP_Digest(buf, n, d, &dl, EVP_md5(), NULL) || dl != 16)
        T_FAIL("EVP_Digest");
    for (int i = 0; i < 16; i++)
        sprintf(hex + 2 * i, "%02x", d[i]);
}

static inline uint64_t su_now_ms(void)
{
    return t_now_ms();
}

static inline void su_sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};

    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#endif
