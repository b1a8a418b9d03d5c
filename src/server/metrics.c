/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metrics: atomic counters everywhere, rendered as Prometheus text (format
 * 0.0.4) by a minimal HTTP/1.0 responder on its own thread. It answers one
 * request per connection, several connections at once on a poll, each with
 * a deadline for its whole exchange, so a slow scraper delays no other.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "server/server.h"
#if RIO_HAVE_MHD
#include "server/s3/gw.h"
#endif

#include "railio.h"

#define RENDER_CAP (256u * 1024u)

int rio__srv_status_class(int status)
{
    switch (status) {
    case 0:
        return RIO_SRV_ST_OK;
    case RIO_EPROTO:
        return RIO_SRV_ST_PROTO;
    case RIO_ENOTFOUND:
        return RIO_SRV_ST_NOTFOUND;
    case RIO_EGENERATION:
        return RIO_SRV_ST_GENERATION;
    case RIO_ECHECKSUM:
        return RIO_SRV_ST_CHECKSUM;
    case RIO_EINVAL:
        return RIO_SRV_ST_INVAL;
    case -EACCES:
        return RIO_SRV_ST_ACCES;
    case -ENOSPC:
        return RIO_SRV_ST_NOSPC;
    case -EFBIG:
        return RIO_SRV_ST_FBIG;
    case RIO_ETHROTTLE:
        return RIO_SRV_ST_THROTTLE;
    case RIO_ENOTSUP:
        return RIO_SRV_ST_NOTSUP;
    case -ENOMEM:
        return RIO_SRV_ST_NOMEM;
    default:
        return RIO_SRV_ST_OTHER;
    }
}

const char *rio__srv_status_name(int cls)
{
    static const char *const names[RIO_SRV_ST__COUNT] = {
        "ok",          "RIO_EPROTO", "RIO_ENOTFOUND", "RIO_EGENERATION", "RIO_ECHECKSUM",
        "RIO_EINVAL",  "EACCES",     "ENOSPC",        "EFBIG",           "RIO_ETHROTTLE",
        "RIO_ENOTSUP", "ENOMEM",     "other",
    };
    return cls >= 0 && cls < RIO_SRV_ST__COUNT ? names[cls] : "other";
}

/* Upper bounds (microseconds) of the service time buckets: from a request
 * answered from memory (tens of microseconds) to a disk read queued behind
 * others (seconds). */
static const uint64_t svc_bounds_us[RIO_SRV_SVC_BUCKETS] = {
    50,    100,   250,    500,    1000,   2500,    5000,    10000,
    25000, 50000, 100000, 250000, 500000, 1000000, 2500000, 5000000,
};

void rio__srv_svc_note(struct rio_srv_metrics *m, int op, uint64_t ns)
{
    int k = 0;

    if (op < 0 || op > RIO_OP__MAX)
        return;
    while (k < RIO_SRV_SVC_BUCKETS && ns > svc_bounds_us[k] * 1000)
        k++;
    atomic_fetch_add_explicit(&m->svc[op][k], 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&m->svc_us_sum[op], ns / 1000, memory_order_relaxed);
}

struct out {
    char *p;
    size_t len, cap;
};

static void __attribute__((format(printf, 2, 3))) put(struct out *o, const char *fmt, ...)
{
    va_list ap;
    int n;

    if (o->len >= o->cap)
        return;
    va_start(ap, fmt);
    n = vsnprintf(o->p + o->len, o->cap - o->len, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    o->len += (size_t)n;
    if (o->len > o->cap)
        o->len = o->cap;
}

static void help(struct out *o, const char *name, const char *type, const char *text)
{
    put(o, "# HELP railiod_%s %s\n# TYPE railiod_%s %s\n", name, text, name, type);
}

/* A metric with one sample: its HELP and TYPE lines, then its value. */
static void metric(struct out *o, const char *name, const char *type, const char *text,
                   unsigned long long v)
{
    help(o, name, type, text);
    put(o, "railiod_%s %llu\n", name, v);
}

/* The disk tier's figures (--data-dir), in the order they are written. */
#define DISK_FIELD(f) offsetof(struct rio_srv_disk_stats, f)
static const struct {
    const char *name, *type, *text;
    size_t off;
    bool seconds; /* a count of nanoseconds, written in seconds */
} disk_metrics[] = {
    {"disk_objects", "gauge", "Objects on disk (--data-dir).", DISK_FIELD(objects), false},
    {"disk_bytes", "gauge", "Bytes of the objects on disk.", DISK_FIELD(bytes), false},
    {"disk_writes_total", "counter", "Objects written to disk (committed PUTs).",
     DISK_FIELD(writes), false},
    {"disk_write_errors_total", "counter", "PUTs whose disk write failed.",
     DISK_FIELD(write_errors), false},
    {"disk_write_seconds_total", "counter",
     "Time spent writing objects (temporary file, fsyncs, rename).", DISK_FIELD(write_ns), true},
    {"disk_reads_total", "counter", "READs served from disk.", DISK_FIELD(reads), false},
    {"disk_read_bytes_total", "counter", "Bytes of READs served from disk.", DISK_FIELD(read_bytes),
     false},
    {"disk_read_errors_total", "counter", "READs from disk that failed.", DISK_FIELD(read_errors),
     false},
    {"disk_read_buffer_bytes", "gauge",
     "Bytes of the buffers of READs from disk alive now (--disk-read-memory).",
     DISK_FIELD(read_buf_bytes), false},
    {"disk_read_buffer_waiting", "gauge", "READs from disk waiting for buffer room now.",
     DISK_FIELD(read_buf_waiting), false},
    {"disk_read_buffer_waits_total", "counter",
     "READs from disk that waited for buffer room (--disk-read-memory).",
     DISK_FIELD(read_buf_waits), false},
    {"disk_tombstones", "gauge",
     "DELETE marks kept now (one a key, while an upload of it opened before can still commit).",
     DISK_FIELD(tombstones), false},
    {"disk_deletes_total", "counter", "Object files removed by DELETE.", DISK_FIELD(deletes),
     false},
    {"disk_corrupt_records_total", "counter",
     "Corrupt records found (bad checksum, truncated data) at start-up or on read.",
     DISK_FIELD(corrupt), false},
    {"disk_recovered_objects", "gauge", "Objects recovered from disk at start-up.",
     DISK_FIELD(recovered), false},
    {"disk_discarded_partial", "gauge", "Partial (temporary) files removed at start-up.",
     DISK_FIELD(discarded), false},
    {"disk_superseded", "gauge",
     "Older versions removed at start-up (a crash interrupted their removal).",
     DISK_FIELD(superseded), false},
};
#undef DISK_FIELD

static void metric_signed(struct out *o, const char *name, const char *type, const char *text,
                          long long v)
{
    help(o, name, type, text);
    put(o, "railiod_%s %lld\n", name, v);
}

static uint64_t ld(_Atomic uint64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

static int64_t lds(_Atomic int64_t *v)
{
    return atomic_load_explicit(v, memory_order_relaxed);
}

size_t rio__srv_metrics_render(struct rio_srv *srv, char *buf, size_t cap)
{
    struct out o = {.p = buf, .cap = cap ? cap - 1 : 0};
    struct rio_srv_metrics *m = &srv->m;
    struct rio_srv_store_stats st;

    if (!cap)
        return 0;
    rio__srv_store_stats(&srv->store, &st);

    help(&o, "requests_total", "counter",
         "Requests answered, by opcode and status (status ok for every op, others when seen).");
    for (int op = 1; op <= RIO_OP__MAX; op++)
        for (int s = 0; s < RIO_SRV_ST__COUNT; s++) {
            uint64_t v = ld(&m->req[op][s]);
            if (v || s == RIO_SRV_ST_OK)
                put(&o, "railiod_requests_total{op=\"%s\",status=\"%s\"} %llu\n",
                    rio__proto_op_name(op), rio__srv_status_name(s), (unsigned long long)v);
        }
    help(&o, "request_bytes_total", "counter",
         "Frame bytes (header and body) by opcode: in = requests, out = responses.");
    for (int op = 1; op <= RIO_OP__MAX; op++) {
        put(&o, "railiod_request_bytes_total{op=\"%s\",direction=\"in\"} %llu\n",
            rio__proto_op_name(op), (unsigned long long)ld(&m->op_bytes_in[op]));
        put(&o, "railiod_request_bytes_total{op=\"%s\",direction=\"out\"} %llu\n",
            rio__proto_op_name(op), (unsigned long long)ld(&m->op_bytes_out[op]));
    }
    help(&o, "request_service_seconds", "histogram",
         "Time from a request complete to its answer queued (disk reads and commits "
         "waiting for the disk tier included), by opcode.");
    for (int op = 1; op <= RIO_OP__MAX; op++) {
        uint64_t cum = 0;
        for (int k = 0; k <= RIO_SRV_SVC_BUCKETS; k++)
            cum += ld(&m->svc[op][k]);
        if (!cum)
            continue;
        cum = 0;
        for (int k = 0; k <= RIO_SRV_SVC_BUCKETS; k++) {
            cum += ld(&m->svc[op][k]);
            if (k < RIO_SRV_SVC_BUCKETS)
                put(&o, "railiod_request_service_seconds_bucket{op=\"%s\",le=\"%g\"} %llu\n",
                    rio__proto_op_name(op), (double)svc_bounds_us[k] / 1e6,
                    (unsigned long long)cum);
            else
                put(&o, "railiod_request_service_seconds_bucket{op=\"%s\",le=\"+Inf\"} %llu\n",
                    rio__proto_op_name(op), (unsigned long long)cum);
        }
        put(&o, "railiod_request_service_seconds_sum{op=\"%s\"} %.6f\n", rio__proto_op_name(op),
            (double)ld(&m->svc_us_sum[op]) / 1e6);
        put(&o, "railiod_request_service_seconds_count{op=\"%s\"} %llu\n", rio__proto_op_name(op),
            (unsigned long long)cum);
    }
    metric_signed(&o, "inflight_requests", "gauge",
                  "Requests received whose response is not fully sent.",
                  lds(&m->inflight_requests));
    metric_signed(&o, "inflight_response_bytes", "gauge", "Response bytes queued and not yet sent.",
                  lds(&m->inflight_bytes));
    metric(&o, "objects", "gauge", "Objects stored (committed, not expired).", st.objects);
    metric(&o, "stored_bytes", "gauge", "Bytes of the objects stored.", st.bytes);
    metric(&o, "used_bytes", "gauge",
           "Bytes charged against the capacity: objects, uploads in progress and their metadata.",
           st.used);
    metric(&o, "capacity_bytes", "gauge", "The configured capacity (--memory).", st.capacity);
    metric(&o, "uploads", "gauge", "Uploads opened and not yet committed, aborted or reclaimed.",
           st.uploads);
    metric(&o, "evictions_total", "counter", "Objects evicted to make room (--evict lru).",
           st.evictions);
    metric(&o, "expirations_total", "counter", "Objects dropped because their TTL passed.",
           st.expirations);
    metric(&o, "uploads_reclaimed_total", "counter",
           "Uploads dropped after --upload-timeout without activity.", st.reclaimed);
    metric(&o, "kept_mapping_bytes", "gauge",
           "Freed object memory kept for the next upload of the same size (counts against "
           "the capacity).",
           st.map_cached);
    metric(&o, "reused_mappings_total", "counter",
           "Uploads received into kept object memory instead of fresh memory.", st.map_reused);
    if (srv->disk) {
        struct rio_srv_disk_stats ds;
        rio__srv_disk_stats(srv->disk, &ds);
        for (size_t i = 0; i < sizeof(disk_metrics) / sizeof(disk_metrics[0]); i++) {
            const uint64_t v = *(const uint64_t *)((const char *)&ds + disk_metrics[i].off);
            if (!disk_metrics[i].seconds) {
                metric(&o, disk_metrics[i].name, disk_metrics[i].type, disk_metrics[i].text, v);
                continue;
            }
            help(&o, disk_metrics[i].name, disk_metrics[i].type, disk_metrics[i].text);
            put(&o, "railiod_%s %.6f\n", disk_metrics[i].name, (double)v / 1e9);
        }
    }
    metric(&o, "rejected_frames_total", "counter",
           "Malformed or truncated frames; each closed its connection.", ld(&m->rejected_frames));
    metric(&o, "chunk_checksum_errors_total", "counter",
           "PUT_CHUNK bodies whose xxh3 did not match (answered RIO_ECHECKSUM).",
           ld(&m->chunk_checksum_errors));
    metric(&o, "auth_failures_total", "counter", "AUTH requests refused.", ld(&m->auth_failures));
    metric(&o, "auth_throttled_total", "counter",
           "AUTH requests refused unchecked: their address failed too often (--auth-failures).",
           ld(&m->auth_throttled));
    help(&o, "timeouts_total", "counter",
         "Connections cut by the watchdog: progress (stalled frame), idle, or handshake "
         "(no request, or with a token no AUTH, within --handshake-timeout).");
    put(&o, "railiod_timeouts_total{kind=\"progress\"} %llu\n",
        (unsigned long long)ld(&m->timeouts_progress));
    put(&o, "railiod_timeouts_total{kind=\"idle\"} %llu\n",
        (unsigned long long)ld(&m->timeouts_idle));
    put(&o, "railiod_timeouts_total{kind=\"handshake\"} %llu\n",
        (unsigned long long)ld(&m->handshake_timeouts));
    metric(&o, "handshake_evictions_total", "counter",
           "Connections still in their handshake dropped to admit a new one (--max-handshakes, "
           "--max-conns).",
           ld(&m->handshake_evictions));
    metric(&o, "uploads_closed_total", "counter",
           "Uploads reclaimed because every connection that used them closed.",
           ld(&m->uploads_closed));
    metric_signed(&o, "connections", "gauge", "Connections open.", lds(&m->conns_open));
    metric(&o, "connections_total", "counter", "Connections accepted.", ld(&m->conns_accepted));
    metric(&o, "connections_rejected_total", "counter", "Connections refused (--max-conns).",
           ld(&m->conns_rejected));
    help(&o, "listener_bytes_total", "counter", "Bytes received (in) and sent (out) per listener.");
    for (unsigned i = 0; i < srv->nlis; i++) {
        put(&o, "railiod_listener_bytes_total{listener=\"%s\",direction=\"in\"} %llu\n",
            srv->lis[i].name, (unsigned long long)ld(&m->listener_in[i]));
        put(&o, "railiod_listener_bytes_total{listener=\"%s\",direction=\"out\"} %llu\n",
            srv->lis[i].name, (unsigned long long)ld(&m->listener_out[i]));
    }
    help(&o, "listener_connections_total", "counter", "Connections accepted per listener.");
    for (unsigned i = 0; i < srv->nlis; i++)
        put(&o, "railiod_listener_connections_total{listener=\"%s\"} %llu\n", srv->lis[i].name,
            (unsigned long long)ld(&m->listener_conns[i]));
    help(&o, "uptime_seconds", "gauge", "Seconds since the server started.");
    put(&o, "railiod_uptime_seconds %.3f\n", (double)(rio__now_ns() - srv->start_ns) / 1e9);
#if RIO_HAVE_MHD
    if (o.len < o.cap) /* the S3 gateway's, when it runs */
        o.len += rio__s3_gw_metrics(o.p + o.len, o.cap - o.len);
#endif
    buf[o.len] = '\0';
    return o.len;
}

/* ------------------------------------------------------------------ HTTP */

/* Scrapes served at once; a newcomer takes the oldest one's slot. */
#define HTTP_CONNS 16
/* A scrape must be read and answered within this, however it trickles. */
#define HTTP_DEADLINE_NS (2ull * 1000000000ull)
#define HTTP_REQ_MAX 4096

struct hconn {
    int fd; /* -1: free slot */
    uint64_t deadline;
    size_t got;
    char req[HTTP_REQ_MAX];
    char *out; /* the answer once the request is in */
    size_t out_len, sent;
};

static struct {
    pthread_t th;
    int running;
    int fd;
    int wake[2];
    struct rio_srv *srv;
    struct hconn c[HTTP_CONNS];
} mt = {.fd = -1, .wake = {-1, -1}};

static void hconn_close(struct hconn *h)
{
    if (h->fd >= 0)
        close(h->fd);
    h->fd = -1;
    rio__free(h->out);
    h->out = NULL;
}

/* The whole answer (header and body) in one buffer; NULL when out of memory. */
static char *http_answer(const char *status, const char *body, size_t len, size_t *out_len)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, len);
    char *p = rio__malloc((size_t)n + len);

    if (!p)
        return NULL;
    memcpy(p, head, (size_t)n);
    memcpy(p + n, body, len);
    *out_len = (size_t)n + len;
    return p;
}

/* The request is complete (or as much of it as fits): prepare the answer. */
static void http_prepare(struct hconn *h)
{
    static const char msg405[] = "only GET /metrics is served\n";
    static const char msg404[] = "not found: try GET /metrics\n";
    const char *path = h->req + 4;

    h->req[h->got] = '\0';
    if (strncmp(h->req, "GET ", 4) != 0) {
        h->out = http_answer("405 Method Not Allowed", msg405, sizeof(msg405) - 1, &h->out_len);
    } else if (strncmp(path, "/metrics", 8) != 0 ||
               (path[8] != ' ' && path[8] != '?' && path[8] != '\r' && path[8] != '\n')) {
        h->out = http_answer("404 Not Found", msg404, sizeof(msg404) - 1, &h->out_len);
    } else {
        char *body = rio__malloc(RENDER_CAP);
        if (body) {
            size_t len = rio__srv_metrics_render(mt.srv, body, RENDER_CAP);
            h->out = http_answer("200 OK", body, len, &h->out_len);
            rio__free(body);
        }
    }
    h->sent = 0;
    if (!h->out)
        hconn_close(h);
}

/* Readiness on h: read the request, then send the answer, never blocking. */
static void http_step(struct hconn *h)
{
    while (!h->out) {
        ssize_t r = recv(h->fd, h->req + h->got, sizeof(h->req) - 1 - h->got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (r < 0) {
            hconn_close(h);
            return;
        }
        h->got += (size_t)r;
        h->req[h->got] = '\0';
        if (r == 0 || h->got == sizeof(h->req) - 1 || strstr(h->req, "\r\n\r\n") ||
            strstr(h->req, "\n\n"))
            http_prepare(h);
        if (h->fd < 0)
            return;
    }
    while (h->sent < h->out_len) {
        ssize_t w = send(h->fd, h->out + h->sent, h->out_len - h->sent, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        if (w <= 0)
            break;
        h->sent += (size_t)w;
    }
    hconn_close(h);
}

/*
 * Accept every waiting scrape. When all HTTP_CONNS slots are taken, the
 * newcomer takes the slot of the oldest connection (the one that has had
 * the longest to send its request): connections that trickle, however
 * many and however fast they come, only push each other out, while a
 * scraper that sends its request at once is answered at once. (Left in
 * the backlog instead, a steady trickle of such connections delays every
 * scrape a little more than the last until scrapes time out: docs/bench.md,
 * "railiod's metrics endpoint under trickling connections".)
 */
static void http_accept(void)
{
    for (;;) {
        struct hconn *h = NULL;
        for (int i = 0; i < HTTP_CONNS && (!h || h->fd >= 0); i++)
            if (!h || mt.c[i].fd < 0 || mt.c[i].deadline < h->deadline)
                h = &mt.c[i];
        int fd = accept4(mt.fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (fd < 0)
            return;
        hconn_close(h);
        h->fd = fd;
        h->got = 0;
        h->deadline = rio__now_ns() + HTTP_DEADLINE_NS;
        http_step(h);
    }
}

/*
 * One thread, every scrape on a poll: each connection has a deadline for
 * its whole exchange, and at most HTTP_CONNS are served at once (a
 * newcomer takes the oldest one's slot), so a slow or stalled client holds
 * one slot for at most the deadline and never delays the others.
 */
static void *metrics_main(void *arg)
{
    (void)arg;
    for (int i = 0; i < HTTP_CONNS; i++)
        mt.c[i].fd = -1;
    for (;;) {
        struct pollfd p[2 + HTTP_CONNS];
        struct hconn *who[2 + HTTP_CONNS];
        int np = 2;
        uint64_t now = rio__now_ns();

        for (int i = 0; i < HTTP_CONNS; i++) {
            struct hconn *h = &mt.c[i];
            if (h->fd >= 0 && now >= h->deadline)
                hconn_close(h);
            if (h->fd < 0)
                continue;
            p[np].fd = h->fd;
            p[np].events = h->out ? POLLOUT : POLLIN;
            p[np].revents = 0;
            who[np++] = h;
        }
        p[0] = (struct pollfd){.fd = mt.fd, .events = POLLIN};
        p[1] = (struct pollfd){.fd = mt.wake[0], .events = POLLIN};
        int n = poll(p, (nfds_t)np, 100);
        if (n < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (n <= 0)
            continue;
        for (int i = 2; i < np; i++)
            if (p[i].revents)
                http_step(who[i]);
        if (p[0].revents & POLLIN)
            http_accept();
    }
    for (int i = 0; i < HTTP_CONNS; i++)
        hconn_close(&mt.c[i]);
    return NULL;
}

int rio__srv_metrics_start(struct rio_srv *srv, int fd)
{
    int ret;

    mt.srv = srv;
    mt.fd = fd;
    if (pipe2(mt.wake, O_CLOEXEC) < 0)
        return -errno;
    ret = pthread_create(&mt.th, NULL, metrics_main, NULL);
    if (ret != 0)
        return -ret;
    mt.running = 1;
    return 0;
}

void rio__srv_metrics_stop(void)
{
    if (mt.running) {
        if (write(mt.wake[1], "x", 1) < 0)
            SRV_WARN("metrics wake: %s", strerror(errno));
        pthread_join(mt.th, NULL);
        mt.running = 0;
    }
    for (int i = 0; i < 2; i++)
        if (mt.wake[i] >= 0)
            close(mt.wake[i]);
    if (mt.fd >= 0)
        close(mt.fd);
    mt.fd = -1;
    mt.wake[0] = mt.wake[1] = -1;
}
