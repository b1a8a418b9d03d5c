/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * The man-in-the-middle proxy (tests/harness/mitm.py) does what each mode
 * says, and nothing else, in front of a fixture server in the test: a byte
 * echo for railio:// frames (so a frame comes back as the proxy delivered
 * it), and a small HTTP/1.1 server whose answers cover every way a response
 * ends (Content-Length, chunked, HEAD, 204, 304, 100 Continue). The client
 * knows every byte it should get back, so each test compares whole streams.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "mitm_env.h"
#include "server_env.h"
#include "t.h"
#include "tlib.h"

/* ------------------------------------------------------- fixture server */

enum fx_kind { FX_ECHO, FX_HTTP };

struct fx {
    int lfd;
    enum fx_kind kind;
    char addr[32];
    pthread_t th;
};

static void *fx_echo(void *arg)
{
    int fd = (int)(intptr_t)arg;
    size_t cap = 1 << 20;
    char *buf = malloc(cap);
    for (;;) {
        ssize_t r = recv(fd, buf, cap, 0);
        if (r <= 0)
            break;
        t_send_all(fd, buf, (size_t)r);
    }
    free(buf);
    close(fd);
    return NULL;
}

/* The fixture's answer to a request (also what a client expects): a
 * malloc'ed buffer, its length in *len. interim: the 100 Continue sent
 * before the body is read, when the request asks for it. */
#define HTTP_CHUNKED_BODY "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"
#define HTTP_CONTINUE "HTTP/1.1 100 Continue\r\n\r\n"

static char *http_answer(const char *method, const char *path, const void *body, size_t blen,
                         size_t *len)
{
    char *out = malloc(blen + 8192 + (1 << 20));
    int n;
    if (!strcmp(method, "HEAD")) {
        n = sprintf(out, "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
    } else if (!strcmp(method, "DELETE")) {
        n = sprintf(out, "HTTP/1.1 204 No Content\r\n\r\n");
    } else if (!strcmp(path, "/chunked")) {
        n = sprintf(out, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%s",
                    HTTP_CHUNKED_BODY);
    } else if (!strcmp(path, "/304")) {
        n = sprintf(out, "HTTP/1.1 304 Not Modified\r\nContent-Length: 1000\r\n\r\n");
    } else if (!strncmp(path, "/n/", 3)) {
        size_t sz = strtoul(path + 3, NULL, 10);
        if (sz > (1 << 20))
            sz = 1 << 20;
        n = sprintf(out, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", sz);
        t_fill_pattern(out + n, sz, sz);
        n += (int)sz;
    } else {
        n = sprintf(out, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", blen);
        memcpy(out + n, body, blen);
        n += (int)blen;
    }
    *len = (size_t)n;
    return out;
}

/* Read one request header block into hdr (NUL-terminated); its length, or
 * 0 at EOF. Bytes after it stay in the socket (read byte-wise: small). */
static size_t fx_read_head(int fd, char *hdr, size_t cap)
{
    size_t n = 0;
    while (n < cap - 1) {
        ssize_t r = recv(fd, hdr + n, 1, 0);
        if (r <= 0)
            return 0;
        n++;
        if (n >= 4 && !memcmp(hdr + n - 4, "\r\n\r\n", 4))
            break;
    }
    hdr[n] = '\0';
    return n;
}

static void *fx_http(void *arg)
{
    int fd = (int)(intptr_t)arg;
    char hdr[8192], method[16], path[256];
    for (;;) {
        if (!fx_read_head(fd, hdr, sizeof(hdr)))
            break;
        if (sscanf(hdr, "%15s %255s", method, path) != 2)
            break;
        const char *cl = strcasestr(hdr, "\r\nContent-Length:");
        size_t blen = cl ? strtoul(cl + 17, NULL, 10) : 0;
        if (blen > (64 << 20))
            break;
        if (strcasestr(hdr, "\r\nExpect: 100-continue"))
            t_send_all(fd, HTTP_CONTINUE, strlen(HTTP_CONTINUE));
        char *body = malloc(blen + 1);
        if (t_recv_all(fd, body, blen) < 0) {
            free(body);
            break;
        }
        size_t alen;
        char *ans = http_answer(method, path, body, blen, &alen);
        t_send_all(fd, ans, alen);
        free(ans);
        free(body);
    }
    close(fd);
    return NULL;
}

static void *fx_accept(void *arg)
{
    struct fx *f = arg;
    for (;;) {
        int fd = accept(f->lfd, NULL, NULL);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        pthread_t th;
        if (pthread_create(&th, NULL, f->kind == FX_ECHO ? fx_echo : fx_http,
                           (void *)(intptr_t)fd) == 0)
            pthread_detach(th);
        else
            close(fd);
    }
    return NULL;
}

static void fx_start(struct fx *f, enum fx_kind kind)
{
    f->kind = kind;
    f->lfd = t_listen_loopback(f->addr, sizeof(f->addr));
    T_EQ(pthread_create(&f->th, NULL, fx_accept, f), 0);
}

static void fx_stop(struct fx *f)
{
    shutdown(f->lfd, SHUT_RDWR);
    pthread_join(f->th, NULL);
    close(f->lfd);
}

/* ---------------------------------------------------------------- client */

static int cl_connect(const struct mitm_env *m)
{
    struct wc c;

    wc_connect(&c, m->addr); /* no session: nothing to free but the socket */
    return c.fd;
}

static void cl_send(int fd, const void *p, size_t n)
{
    if (t_send_all(fd, p, n) < 0)
        T_FAIL("send: %s", strerror(errno));
}

/* Read up to n bytes, stopping at EOF, an error or timeout_ms of silence;
 * the count read. */
static size_t cl_recv(int fd, void *p, size_t n, int timeout_ms)
{
    char *c = p;
    size_t got = 0;
    while (got < n) {
        struct pollfd pf = {.fd = fd, .events = POLLIN};
        if (poll(&pf, 1, timeout_ms) <= 0)
            break;
        ssize_t r = recv(fd, c + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void cl_recv_exact(int fd, void *p, size_t n)
{
    size_t got = cl_recv(fd, p, n, 5000);
    if (got != n)
        T_FAIL("read %zu bytes of %zu", got, n);
}

/* 1 when the peer closed (EOF or reset) within timeout_ms, 0 when it is
 * still open and silent; fails if bytes arrive. */
static int cl_closed(int fd, int timeout_ms)
{
    struct pollfd pf = {.fd = fd, .events = POLLIN};
    char b;
    if (poll(&pf, 1, timeout_ms) <= 0)
        return 0;
    ssize_t r = recv(fd, &b, 1, MSG_DONTWAIT);
    if (r > 0)
        T_FAIL("a byte arrived after the fault");
    return 1;
}

/* Offsets where a and b differ (up to max), and their count. */
static size_t diffs(const uint8_t *a, const uint8_t *b, size_t n, size_t *at, size_t max)
{
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            if (k < max)
                at[k] = i;
            k++;
        }
    return k;
}

/* The proxy's options from one line of space-separated words, printf-style
 * ("--proto http --mode dup --nth %s"): the words point into the struct. */
struct margs {
    char buf[256];
    const char *v[24];
};

static const char *const *margs(struct margs *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static const char *const *margs(struct margs *a, const char *fmt, ...)
{
    va_list ap;
    size_t n = 0;
    char *save = NULL;

    va_start(ap, fmt);
    int len = vsnprintf(a->buf, sizeof(a->buf), fmt, ap);
    va_end(ap);
    T_LT(len, (int)sizeof(a->buf));
    for (char *w = strtok_r(a->buf, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        T_LT(n, sizeof(a->v) / sizeof(a->v[0]) - 1);
        a->v[n++] = w;
    }
    a->v[n] = NULL;
    return a->v;
}
#define MARGS(...) margs(&(struct margs){.buf = {0}}, __VA_ARGS__)

static void start2(struct mitm_env *m, struct fx *f, enum fx_kind kind, const char *const *args)
{
    fx_start(f, kind);
    mitm_start(m, f->addr, args);
}

static void stop2(struct mitm_env *m, struct fx *f)
{
    mitm_stop(m);
    fx_stop(f);
}

/* start2, and a client connected to the proxy. */
static int open2(struct mitm_env *m, struct fx *f, enum fx_kind kind, const char *const *args)
{
    start2(m, f, kind, args);
    return cl_connect(m);
}

/* The proxy applied faults faults; the client closed, both stopped. */
#define close2(m, f, fd, faults) close2_at((m), (f), (fd), (faults), __FILE__, __LINE__)
static void close2_at(struct mitm_env *m, struct fx *f, int fd, int faults, const char *file,
                      int line)
{
    t__check_i(file, line, "mitm_faults(m)", "faults", T__EQ, mitm_faults(m), faults);
    close(fd);
    stop2(m, f);
}

/* ------------------------------------------------------- railio frames */

#define NFR 5
#define FR_BODY 4000
#define FR_LEN (32 + FR_BODY)

/* Frames 1..n (frame i's body is pattern i), back to back. */
static uint8_t *frames(unsigned n, size_t body)
{
    uint8_t *buf = calloc(n, 32 + body);
    for (unsigned i = 0; i < n; i++) {
        uint8_t *h = buf + (size_t)i * (32 + body);
        uint32_t bl = (uint32_t)body;
        memcpy(h, "RIO!", 4);
        h[8] = (uint8_t)(i + 1);
        memcpy(h + 16, &bl, 4); /* little-endian hosts only, as railio */
        t_fill_pattern(h + 32, body, i + 1);
    }
    return buf;
}

struct sender {
    int fd;
    const uint8_t *p;
    size_t n;
};

static void *send_thread(void *arg)
{
    struct sender *s = arg;
    t_send_all(s->fd, s->p, s->n);
    return NULL;
}

TEST(railio_pass_forwards_every_byte)
{
    const char *const *args = MARGS("--proto railio --mode pass");
    const unsigned n = 32;
    const size_t body = 1 << 20, total = n * (32 + body);
    struct mitm_env m;
    struct fx f;
    uint8_t *out = frames(n, body), *in = malloc(total);
    pthread_t th;

    int fd = open2(&m, &f, FX_ECHO, args);
    struct sender s = {fd, out, total};
    uint64_t t0 = t_now_ms();
    T_EQ(pthread_create(&th, NULL, send_thread, &s), 0);
    cl_recv_exact(fd, in, total);
    uint64_t ms = t_now_ms() - t0;
    pthread_join(th, NULL);
    T_MEMEQ(in, out, total);
    fprintf(stderr, "pass: %zu MiB each way in %llu ms (%.0f MB/s each way)\n", total >> 20,
            (unsigned long long)ms, (double)total / 1e3 / (double)(ms ? ms : 1));
    close(fd);
    mitm_halt(&m);
    T_EQ(mitm_faults(&m), 0);
    T_EQ(mitm_connections(&m), 1);
    T_EQ(mitm_messages(&m, "c2s"), (int)n);
    T_EQ(mitm_messages(&m, "s2c"), (int)n);
    stop2(&m, &f);
    free(out);
    free(in);
}

/* Send NFR frames through an echo behind args; what came back in *in. */
static uint8_t *railio_roundtrip(struct mitm_env *m, struct fx *f, const char *const *args,
                                 uint8_t **in)
{
    uint8_t *out = frames(NFR, FR_BODY);
    *in = calloc(1, NFR * FR_LEN);
    start2(m, f, FX_ECHO, args);
    int fd = cl_connect(m);
    cl_send(fd, out, NFR * FR_LEN);
    cl_recv_exact(fd, *in, NFR * FR_LEN);
    close(fd);
    return out;
}

/* One railio_roundtrip through a proxy with args: ndiff bytes came back
 * changed, the first of them at at[]. */
struct rt {
    struct mitm_env m;
    struct fx f;
    uint8_t *in, *out;
    size_t at[8], ndiff;
};

static void rt_run(struct rt *r, const char *const *args)
{
    r->out = railio_roundtrip(&r->m, &r->f, args, &r->in);
    r->ndiff = diffs(r->in, r->out, NFR * FR_LEN, r->at, 8);
}

static void rt_end(struct rt *r)
{
    stop2(&r->m, &r->f);
    free(r->in);
    free(r->out);
}

TEST(railio_flip_changes_one_byte_of_the_nth_frame)
{
    /* Default offset (seeded), c2s: the echo returns what the server got. */
    struct rt r;

    rt_run(&r, MARGS("--proto railio --mode flip --dir c2s --nth 3 --seed 7"));
    T_EQ(r.ndiff, 1);
    T_EQ(r.at[0] / FR_LEN, 2);                  /* the third frame */
    T_EQ(r.in[r.at[0]] ^ r.out[r.at[0]], 0x80); /* 1 << (7 % 8) */
    T_EQ(mitm_faults(&r.m), 1);
    T_EQ(mitm_field(&r.m, "offset", 0), (long)(r.at[0] % FR_LEN));
    T_EQ(mitm_field(&r.m, "msg", 0), 3);
    T_EQ(mitm_field(&r.m, "conn", 0), 1);
    T_EQ(mitm_field(&r.m, "len", 0), FR_LEN);
    rt_end(&r);
}

TEST(railio_flip_at_an_offset_in_the_header_s2c)
{
    struct rt r;

    rt_run(&r, MARGS("--proto railio --mode flip --dir s2c --nth 2 --offset 5 --seed 3"));
    T_EQ(r.ndiff, 1);
    T_EQ(r.at[0], FR_LEN + 5);
    T_EQ(r.in[r.at[0]] ^ r.out[r.at[0]], 0x08);
    T_EQ(mitm_faults(&r.m), 1);
    rt_end(&r);
}

TEST(railio_count_selects_the_next_messages)
{
    /* --count N: N messages from the nth on (0: all of them). */
    static const struct {
        const char *count;
        size_t n;
    } cases[] = {{"2", 2}, {"0", NFR - 1}};

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rt r;

        fprintf(stderr, "--count %s\n", cases[i].count);
        rt_run(&r, MARGS("--proto railio --mode flip --dir c2s --nth 2 --count %s --offset 40",
                         cases[i].count));
        T_EQ(r.ndiff, cases[i].n);
        for (size_t k = 0; k < cases[i].n && k < 8; k++)
            T_EQ(r.at[k], (k + 1) * FR_LEN + 40);
        T_EQ(mitm_faults(&r.m), (long)cases[i].n);
        rt_end(&r);
    }
}

TEST(railio_nth_counts_across_connections)
{
    const char *const *args = MARGS("--proto railio --mode flip --dir c2s --nth 3 --offset 40");
    struct mitm_env m;
    struct fx f;
    uint8_t *out = frames(2, FR_BODY), in[2 * FR_LEN];
    size_t at[4];

    start2(&m, &f, FX_ECHO, args);
    int a = cl_connect(&m);
    cl_send(a, out, 2 * FR_LEN);
    cl_recv_exact(a, in, 2 * FR_LEN);
    T_EQ(diffs(in, out, 2 * FR_LEN, at, 4), 0);
    int b = cl_connect(&m);
    cl_send(b, out, 2 * FR_LEN);
    cl_recv_exact(b, in, 2 * FR_LEN);
    T_EQ(diffs(in, out, 2 * FR_LEN, at, 4), 1);
    T_EQ(at[0], 40);
    T_EQ(mitm_field(&m, "conn", 0), 2);
    T_EQ(mitm_field(&m, "msg", 0), 3);
    close(a);
    close(b);
    stop2(&m, &f);
    free(out);
}

/* Start args in front of an echo, connect (*fd) and send frames 1..3 of
 * FR_BODY bytes: those frames. */
static uint8_t *railio_send3(struct mitm_env *m, struct fx *f, const char *const *args, int *fd)
{
    uint8_t *out = frames(3, FR_BODY);
    start2(m, f, FX_ECHO, args);
    *fd = cl_connect(m);
    cl_send(*fd, out, 3 * FR_LEN);
    return out;
}

/* One fault was applied; close and stop everything. */
static void railio_end(struct mitm_env *m, struct fx *f, int fd, uint8_t *out)
{
    T_EQ(mitm_faults(m), 1);
    close(fd);
    stop2(m, f);
    free(out);
}

TEST(railio_dup_sends_the_frame_twice)
{
    const char *const *args = MARGS("--proto railio --mode dup --dir s2c --nth 2");
    struct mitm_env m;
    struct fx f;
    uint8_t in[4 * FR_LEN + 1];
    int fd;
    uint8_t *out = railio_send3(&m, &f, args, &fd);

    cl_recv_exact(fd, in, 4 * FR_LEN);
    T_MEMEQ(in, out, 2 * FR_LEN);
    T_MEMEQ(in + 2 * FR_LEN, out + FR_LEN, FR_LEN);
    T_MEMEQ(in + 3 * FR_LEN, out + 2 * FR_LEN, FR_LEN);
    T_EQ(cl_recv(fd, in, 1, 200), 0); /* nothing more */
    railio_end(&m, &f, fd, out);
}

TEST(railio_truncate_closes_after_k_bytes)
{
    const char *const *args =
        MARGS("--proto railio --mode truncate --dir s2c --nth 2 --offset 100");
    struct mitm_env m;
    struct fx f;
    uint8_t in[3 * FR_LEN];
    int fd;
    uint8_t *out = railio_send3(&m, &f, args, &fd);

    T_EQ(cl_recv(fd, in, sizeof(in), 5000), FR_LEN + 100);
    T_MEMEQ(in, out, FR_LEN + 100);
    T_EQ(cl_closed(fd, 2000), 1);
    T_EQ(mitm_faults(&m), 1);
    T_EQ(mitm_field(&m, "offset", 0), 100);
    close(fd);
    stop2(&m, &f);
    free(out);
}

TEST(railio_stall_delivers_nothing_from_the_nth_on)
{
    const char *const *args = MARGS("--proto railio --mode stall --dir s2c --nth 2");
    struct mitm_env m;
    struct fx f;
    uint8_t in[3 * FR_LEN];
    int fd;
    uint8_t *out = railio_send3(&m, &f, args, &fd);

    T_EQ(cl_recv(fd, in, sizeof(in), 700), FR_LEN);
    T_MEMEQ(in, out, FR_LEN);
    T_EQ(cl_closed(fd, 300), 0); /* open and silent */
    railio_end(&m, &f, fd, out);
}

TEST(railio_delay_holds_the_nth_frame)
{
    const char *const *args = MARGS("--proto railio --mode delay --dir s2c --nth 2 --delay-ms 400");
    struct mitm_env m;
    struct fx f;
    uint8_t *out = frames(3, FR_BODY), in[3 * FR_LEN];

    int fd = open2(&m, &f, FX_ECHO, args);
    uint64_t t0 = t_now_ms();
    cl_send(fd, out, 3 * FR_LEN);

    cl_recv_exact(fd, in, FR_LEN);
    uint64_t t1 = t_now_ms();
    cl_recv_exact(fd, in + FR_LEN, 2 * FR_LEN);
    uint64_t t2 = t_now_ms();
    T_MEMEQ(in, out, 3 * FR_LEN);
    T_LT(t1 - t0, 400);
    T_GE(t2 - t0, 400);
    railio_end(&m, &f, fd, out);
}

/* ------------------------------------------------------------------ http */

struct req {
    const char *method, *path;
    size_t blen;
    int expect; /* Expect: 100-continue */
};

/* Requests whose answers end every way a response can. */
static const struct req seq[] = {
    {"HEAD", "/a", 0, 0},        /* s2c 1: no body despite Content-Length */
    {"DELETE", "/a", 0, 0},      /* 2: 204 */
    {"GET", "/chunked", 0, 0},   /* 3: chunked */
    {"GET", "/304", 0, 0},       /* 4: 304, no body */
    {"PUT", "/b", 3000, 1},      /* 5: 100 Continue, 6: 200 echo */
    {"GET", "/n/5000", 0, 0},    /* 7: 200 with 5000 bytes */
    {"PUT", "/big", 4 << 20, 0}, /* 8: 200 echo of 4 MiB */
};
#define NSEQ (sizeof(seq) / sizeof(seq[0]))

static char *req_head(const struct req *r, size_t *len)
{
    char *h = malloc(512);
    int n = snprintf(h, 512, "%s %s HTTP/1.1\r\nHost: fixture\r\n", r->method, r->path);
    if (r->blen)
        n += snprintf(h + n, 512 - (size_t)n, "Content-Length: %zu\r\n", r->blen);
    if (r->expect)
        n += snprintf(h + n, 512 - (size_t)n, "Expect: 100-continue\r\n");
    n += snprintf(h + n, 512 - (size_t)n, "\r\n");
    *len = (size_t)n;
    return h;
}

/* Run requests [from, to) of seq on fd; every byte answered goes to got,
 * every byte expected to want (both grow; *glen, *wlen their lengths). */
static void http_run(int fd, size_t from, size_t to, uint8_t *got, size_t *glen, uint8_t *want,
                     size_t *wlen)
{
    for (size_t i = from; i < to; i++) {
        const struct req *r = &seq[i];
        size_t hl, al;
        char *h = req_head(r, &hl);
        uint8_t *body = malloc(r->blen + 1);
        t_fill_pattern(body, r->blen, 100 + i);
        cl_send(fd, h, hl);
        if (r->expect) {
            size_t cl = strlen(HTTP_CONTINUE);
            memcpy(want + *wlen, HTTP_CONTINUE, cl);
            *wlen += cl;
            *glen += cl_recv(fd, got + *glen, cl, 5000);
        }
        cl_send(fd, body, r->blen);
        char *a = http_answer(r->method, r->path, body, r->blen, &al);
        memcpy(want + *wlen, a, al);
        *wlen += al;
        *glen += cl_recv(fd, got + *glen, al, 5000);
        free(a);
        free(body);
        free(h);
    }
}

#define HTTP_CAP (12 << 20)

/* A proxy with args in front of the HTTP server, a client on it (fd), and
 * what the client got and should have got so far (got/gl, want/wl). */
struct hx {
    struct mitm_env m;
    struct fx f;
    uint8_t *got, *want;
    size_t gl, wl;
    int fd;
};

static void hx_open(struct hx *h, const char *const *args)
{
    if (!h->got) {
        h->got = malloc(HTTP_CAP);
        h->want = malloc(HTTP_CAP);
        T_NOTNULL(h->got);
        T_NOTNULL(h->want);
    }
    h->gl = h->wl = 0;
    h->fd = open2(&h->m, &h->f, FX_HTTP, args);
}

/* Requests from..to-1 sent, their answers read. */
static void hx_run(struct hx *h, size_t from, size_t to)
{
    http_run(h->fd, from, to, h->got, &h->gl, h->want, &h->wl);
}

/* What came is what the server sent, byte-exact. */
static void hx_same(const struct hx *h)
{
    T_EQ(h->gl, h->wl);
    T_MEMEQ(h->got, h->want, h->wl);
}

/* As many bytes came as were sent; how many differ (the first 4 at at). */
static size_t hx_diffs(const struct hx *h, size_t *at)
{
    T_EQ(h->gl, h->wl);
    return diffs(h->got, h->want, h->wl, at, 4);
}

static void hx_free(struct hx *h)
{
    free(h->got);
    free(h->want);
}

TEST(http_pass_frames_every_kind_of_response)
{
    struct hx h = {0};

    hx_open(&h, MARGS("--proto http --mode pass"));
    hx_run(&h, 0, NSEQ);
    hx_same(&h);
    close(h.fd);
    mitm_halt(&h.m);
    T_EQ(mitm_messages(&h.m, "c2s"), (int)NSEQ);
    T_EQ(mitm_messages(&h.m, "s2c"), (int)NSEQ + 1); /* the 100 Continue too */
    T_EQ(mitm_faults(&h.m), 0);
    stop2(&h.m, &h.f);
    hx_free(&h);
}

/* Where response number n (1-based, s2c) starts in the stream of seq's
 * answers, and its header's length. */
static size_t http_resp_at(int n, size_t *hlen)
{
    size_t off = 0;
    int k = 0;
    for (size_t i = 0; i < NSEQ; i++) {
        const struct req *r = &seq[i];
        size_t al;
        uint8_t *body = malloc(r->blen + 1);
        t_fill_pattern(body, r->blen, 100 + i);
        char *a = http_answer(r->method, r->path, body, r->blen, &al);
        free(body);
        if (r->expect && ++k == n) {
            *hlen = strlen(HTTP_CONTINUE);
            free(a);
            return off;
        }
        if (r->expect)
            off += strlen(HTTP_CONTINUE);
        if (++k == n) {
            *hlen = (size_t)(strstr(a, "\r\n\r\n") + 4 - a);
            free(a);
            return off;
        }
        off += al;
        free(a);
    }
    T_FAIL("no response %d", n);
}

TEST(http_flip_s2c_lands_in_the_nth_response)
{
    /* Response 7 (GET /n/5000) comes after a HEAD, a 204, a chunked body,
     * a 304 and a 100 Continue: framing any of them wrong moves the flip. */
    size_t hlen, at7 = http_resp_at(7, &hlen), at[4];
    struct hx h = {0};

    hx_open(&h,
            MARGS("--proto http --mode flip --dir s2c --nth 7 --offset %zu --seed 1", hlen + 100));
    hx_run(&h, 0, NSEQ);
    T_EQ(hx_diffs(&h, at), 1);
    T_EQ(at[0], at7 + hlen + 100);
    T_EQ(h.got[at[0]] ^ h.want[at[0]], 0x02);
    T_EQ(mitm_faults(&h.m), 1);
    T_EQ(mitm_field(&h.m, "msg", 0), 7);
    T_EQ(mitm_field(&h.m, "len", 0), (long)(hlen + 5000));
    close(h.fd);
    stop2(&h.m, &h.f);
    hx_free(&h);
}

TEST(http_flip_c2s_damages_the_request_body)
{
    size_t hl, at[4], h6, at6 = http_resp_at(6, &h6);
    char *head = req_head(&seq[4], &hl);
    struct hx h = {0};

    free(head);
    /* Request 5 is the PUT with Expect: its body after the 100 Continue. */
    hx_open(&h, MARGS("--proto http --mode flip --dir c2s --nth 5 --offset %zu", hl + 10));
    hx_run(&h, 0, NSEQ);
    T_EQ(hx_diffs(&h, at), 1);
    T_EQ(at[0], at6 + h6 + 10); /* the echo shows body byte 10 flipped */
    close2(&h.m, &h.f, h.fd, 1);
    hx_free(&h);
}

/* Requests 0..k-1 answered, then the answer to request k-1 (method path,
 * no body) once more; requests k..3 still framed right after it. */
static void hx_dup(struct hx *h, const char *const *args, size_t k, const char *method,
                   const char *path)
{
    size_t al;

    hx_open(h, args);
    hx_run(h, 0, k);
    char *a = http_answer(method, path, NULL, 0, &al);
    T_EQ(cl_recv(h->fd, h->got + h->gl, al + 1, 1000), al);
    T_MEMEQ(h->got + h->gl, a, al);
    free(a);
    hx_run(h, k, 4);
    hx_same(h);
}

TEST(http_dup_both_directions)
{
    struct hx h = {0};

    /* s2c: the chunked answer (3) arrives twice. */
    hx_dup(&h, MARGS("--proto http --mode dup --dir s2c --nth 3"), 3, "GET", "/chunked");
    close(h.fd);
    stop2(&h.m, &h.f);

    /* c2s: the DELETE (2) reaches the server twice: two 204s. */
    hx_dup(&h, MARGS("--proto http --mode dup --dir c2s --nth 2"), 2, "DELETE", "/a");
    close2(&h.m, &h.f, h.fd, 1);
    hx_free(&h);
}

TEST(http_truncate_stall_delay_s2c)
{
    struct hx h = {0};
    size_t hlen, at7 = http_resp_at(7, &hlen);

    /* truncate, default: half of response 7, then both sides closed. */
    hx_open(&h, MARGS("--proto http --mode truncate --dir s2c --nth 7"));
    hx_run(&h, 0, 6);
    T_EQ(h.gl, at7 + (hlen + 5000) / 2);
    T_MEMEQ(h.got, h.want, h.gl);
    T_EQ(cl_closed(h.fd, 2000), 1);
    close2(&h.m, &h.f, h.fd, 1);

    /* stall: responses 1 and 2, then nothing, the connection open. */
    hx_open(&h, MARGS("--proto http --mode stall --dir s2c --nth 3"));
    hx_run(&h, 0, 2);
    T_EQ(h.gl, h.wl);
    size_t hl;
    char *head = req_head(&seq[2], &hl);
    cl_send(h.fd, head, hl);
    free(head);
    T_EQ(cl_closed(h.fd, 500), 0);
    close2(&h.m, &h.f, h.fd, 1);

    /* delay: response 3 comes >= 400 ms after its request, intact. */
    hx_open(&h, MARGS("--proto http --mode delay --dir s2c --nth 3 --delay-ms 400"));
    hx_run(&h, 0, 2);
    uint64_t t0 = t_now_ms();
    hx_run(&h, 2, 3);
    T_GE(t_now_ms() - t0, 400);
    hx_run(&h, 3, NSEQ);
    hx_same(&h);
    close2(&h.m, &h.f, h.fd, 1);
    hx_free(&h);
}

TEST(bad_arguments_are_refused)
{
    /* Only loopback, and a clear error for a bad option: start-up fails. */
    pid_t pid = fork();
    T_GE(pid, 0);
    if (pid == 0) {
        struct mitm_env m;
        const char *args[] = {"--nth", "0", NULL};
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0)
            dup2(fd, 2);
        mitm_start(&m, "127.0.0.1:9", args);
        _exit(0); /* started: wrong */
    }
    int st;
    T_EQ(waitpid(pid, &st, 0), pid);
    T_TRUE(WIFEXITED(st));
    T_EQ(WEXITSTATUS(st), T_EXIT_FAIL);

    char script[512], cmd[1024];
    mitm_script(script, sizeof(script));
    /* A target or a listener off loopback: refused, exit status 2. */
    static const char *const off_loopback[][2] = {{"127.0.0.1:0", "10.0.0.1:80"},
                                                  {"0.0.0.0:0", "127.0.0.1:80"}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(cmd, sizeof(cmd),
                 "python3 %s --listen %s --target %s --port-file /dev/null 2>/dev/null", script,
                 off_loopback[i][0], off_loopback[i][1]);
        fprintf(stderr, "--listen %s --target %s\n", off_loopback[i][0], off_loopback[i][1]);
        st = system(cmd);
        T_TRUE(WIFEXITED(st));
        T_EQ(WEXITSTATUS(st), 2);
    }
}

TEST(http_flip_without_offset_buffers_a_chunked_answer)
{
    /* The length of a chunked answer is known at its end only: the proxy
     * holds it, then flips a byte inside it. */
    size_t at[4], hlen, at3 = http_resp_at(3, &hlen), al;
    char *a = http_answer("GET", "/chunked", NULL, 0, &al);
    struct hx h = {0};

    hx_open(&h, MARGS("--proto http --mode flip --dir s2c --nth 3"));
    hx_run(&h, 0, 3);
    T_EQ(hx_diffs(&h, at), 1);
    T_GE(at[0], at3);
    T_LT(at[0], at3 + al);
    T_EQ(mitm_field(&h.m, "offset", 0), (long)(at[0] - at3));
    T_EQ(mitm_field(&h.m, "len", 0), (long)al);
    close(h.fd);
    stop2(&h.m, &h.f);
    free(a);
    hx_free(&h);
}

TEST(raw_offset_is_a_stream_offset)
{
    const char *const *flip = MARGS("--proto raw --mode flip --dir c2s --offset 10000");
    const char *const *trunc = MARGS("--proto raw --mode truncate --dir s2c --offset 5000");
    const size_t n = 3 * FR_LEN;
    struct mitm_env m;
    struct fx f;
    uint8_t *out = frames(3, FR_BODY), *in = calloc(1, n);
    size_t at[4];

    int fd = open2(&m, &f, FX_ECHO, flip);
    cl_send(fd, out, n);
    cl_recv_exact(fd, in, n);
    T_EQ(diffs(in, out, n, at, 4), 1);
    T_EQ(at[0], 10000);
    T_EQ(mitm_field(&m, "offset", 0), 10000);
    close(fd);
    stop2(&m, &f);

    fd = open2(&m, &f, FX_ECHO, trunc);
    cl_send(fd, out, n);
    T_EQ(cl_recv(fd, in, n, 5000), 5000);
    T_MEMEQ(in, out, 5000);
    T_EQ(cl_closed(fd, 2000), 1);
    railio_end(&m, &f, fd, out);
    free(in);
}

struct conn_job {
    const struct mitm_env *m;
    const uint8_t *out;
    size_t n;
    int ok;
};

static void *conn_job_run(void *arg)
{
    struct conn_job *j = arg;
    uint8_t *in = malloc(j->n);
    pthread_t th;
    int fd = cl_connect(j->m);
    struct sender s = {fd, j->out, j->n};
    pthread_create(&th, NULL, send_thread, &s);
    j->ok = cl_recv(fd, in, j->n, 5000) == j->n && !memcmp(in, j->out, j->n);
    pthread_join(th, NULL);
    close(fd);
    free(in);
    return NULL;
}

TEST(many_concurrent_connections)
{
    const char *const *args = MARGS("--proto railio");
    enum { NC = 32, NF = 16 };
    struct mitm_env m;
    struct fx f;
    uint8_t *out = frames(NF, 16384);
    struct conn_job jobs[NC];
    pthread_t th[NC];

    start2(&m, &f, FX_ECHO, args);
    for (int i = 0; i < NC; i++) {
        jobs[i] = (struct conn_job){&m, out, NF * (32 + 16384), 0};
        T_EQ(pthread_create(&th[i], NULL, conn_job_run, &jobs[i]), 0);
    }
    for (int i = 0; i < NC; i++) {
        pthread_join(th[i], NULL);
        T_TRUE(jobs[i].ok);
    }
    mitm_halt(&m);
    T_EQ(mitm_connections(&m), NC);
    T_EQ(mitm_messages(&m, "c2s"), NC * NF);
    T_EQ(mitm_messages(&m, "s2c"), NC * NF);
    stop2(&m, &f);
    free(out);
}
