/*
 * Metrics: atomic counters everywhere, rendered as Prometheus text (format
 * 0.0.4) by a minimal HTTP/1.0 responder on its own thread. It answers one
 * request per connection, one connection at a time, each bounded by a 2 s
 * socket timeout, so a stuck scraper delays others by at most that.
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
    help(&o, "inflight_requests", "gauge", "Requests received whose response is not fully sent.");
    put(&o, "railiod_inflight_requests %lld\n", (long long)lds(&m->inflight_requests));
    help(&o, "inflight_response_bytes", "gauge", "Response bytes queued and not yet sent.");
    put(&o, "railiod_inflight_response_bytes %lld\n", (long long)lds(&m->inflight_bytes));
    help(&o, "objects", "gauge", "Objects stored (committed, not expired).");
    put(&o, "railiod_objects %llu\n", (unsigned long long)st.objects);
    help(&o, "stored_bytes", "gauge", "Bytes of the objects stored.");
    put(&o, "railiod_stored_bytes %llu\n", (unsigned long long)st.bytes);
    help(&o, "used_bytes", "gauge",
         "Bytes charged against the capacity: objects, uploads in progress and their metadata.");
    put(&o, "railiod_used_bytes %llu\n", (unsigned long long)st.used);
    help(&o, "capacity_bytes", "gauge", "The configured capacity (--memory).");
    put(&o, "railiod_capacity_bytes %llu\n", (unsigned long long)st.capacity);
    help(&o, "uploads", "gauge", "Uploads opened and not yet committed, aborted or reclaimed.");
    put(&o, "railiod_uploads %llu\n", (unsigned long long)st.uploads);
    help(&o, "evictions_total", "counter", "Objects evicted to make room (--evict lru).");
    put(&o, "railiod_evictions_total %llu\n", (unsigned long long)st.evictions);
    help(&o, "expirations_total", "counter", "Objects dropped because their TTL passed.");
    put(&o, "railiod_expirations_total %llu\n", (unsigned long long)st.expirations);
    help(&o, "uploads_reclaimed_total", "counter",
         "Uploads dropped after --upload-timeout without activity.");
    put(&o, "railiod_uploads_reclaimed_total %llu\n", (unsigned long long)st.reclaimed);
    if (srv->disk) {
        struct rio_srv_disk_stats ds;
        rio__srv_disk_stats(srv->disk, &ds);
        help(&o, "disk_objects", "gauge", "Objects on disk (--data-dir).");
        put(&o, "railiod_disk_objects %llu\n", (unsigned long long)ds.objects);
        help(&o, "disk_bytes", "gauge", "Bytes of the objects on disk.");
        put(&o, "railiod_disk_bytes %llu\n", (unsigned long long)ds.bytes);
        help(&o, "disk_writes_total", "counter", "Objects written to disk (committed PUTs).");
        put(&o, "railiod_disk_writes_total %llu\n", (unsigned long long)ds.writes);
        help(&o, "disk_write_errors_total", "counter", "PUTs whose disk write failed.");
        put(&o, "railiod_disk_write_errors_total %llu\n", (unsigned long long)ds.write_errors);
        help(&o, "disk_write_seconds_total", "counter",
             "Time spent writing objects (temporary file, fsyncs, rename).");
        put(&o, "railiod_disk_write_seconds_total %.6f\n", (double)ds.write_ns / 1e9);
        help(&o, "disk_reads_total", "counter", "READs served from disk.");
        put(&o, "railiod_disk_reads_total %llu\n", (unsigned long long)ds.reads);
        help(&o, "disk_read_bytes_total", "counter", "Bytes of READs served from disk.");
        put(&o, "railiod_disk_read_bytes_total %llu\n", (unsigned long long)ds.read_bytes);
        help(&o, "disk_read_errors_total", "counter", "READs from disk that failed.");
        put(&o, "railiod_disk_read_errors_total %llu\n", (unsigned long long)ds.read_errors);
        help(&o, "disk_deletes_total", "counter", "Object files removed by DELETE.");
        put(&o, "railiod_disk_deletes_total %llu\n", (unsigned long long)ds.deletes);
        help(&o, "disk_corrupt_records_total", "counter",
             "Corrupt records found (bad checksum, truncated data) at start-up or on read.");
        put(&o, "railiod_disk_corrupt_records_total %llu\n", (unsigned long long)ds.corrupt);
        help(&o, "disk_recovered_objects", "gauge", "Objects recovered from disk at start-up.");
        put(&o, "railiod_disk_recovered_objects %llu\n", (unsigned long long)ds.recovered);
        help(&o, "disk_discarded_partial", "gauge",
             "Partial (temporary) files removed at start-up.");
        put(&o, "railiod_disk_discarded_partial %llu\n", (unsigned long long)ds.discarded);
        help(&o, "disk_superseded", "gauge",
             "Older versions removed at start-up (a crash interrupted their removal).");
        put(&o, "railiod_disk_superseded %llu\n", (unsigned long long)ds.superseded);
    }
    help(&o, "rejected_frames_total", "counter",
         "Malformed or truncated frames; each closed its connection.");
    put(&o, "railiod_rejected_frames_total %llu\n", (unsigned long long)ld(&m->rejected_frames));
    help(&o, "chunk_checksum_errors_total", "counter",
         "PUT_CHUNK bodies whose xxh3 did not match (answered RIO_ECHECKSUM).");
    put(&o, "railiod_chunk_checksum_errors_total %llu\n",
        (unsigned long long)ld(&m->chunk_checksum_errors));
    help(&o, "auth_failures_total", "counter", "AUTH requests refused.");
    put(&o, "railiod_auth_failures_total %llu\n", (unsigned long long)ld(&m->auth_failures));
    help(&o, "timeouts_total", "counter",
         "Connections cut by the watchdog: progress (stalled frame) or idle.");
    put(&o, "railiod_timeouts_total{kind=\"progress\"} %llu\n",
        (unsigned long long)ld(&m->timeouts_progress));
    put(&o, "railiod_timeouts_total{kind=\"idle\"} %llu\n",
        (unsigned long long)ld(&m->timeouts_idle));
    help(&o, "connections", "gauge", "Connections open.");
    put(&o, "railiod_connections %lld\n", (long long)lds(&m->conns_open));
    help(&o, "connections_total", "counter", "Connections accepted.");
    put(&o, "railiod_connections_total %llu\n", (unsigned long long)ld(&m->conns_accepted));
    help(&o, "connections_rejected_total", "counter", "Connections refused (--max-conns).");
    put(&o, "railiod_connections_rejected_total %llu\n",
        (unsigned long long)ld(&m->conns_rejected));
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
    buf[o.len] = '\0';
    return o.len;
}

/* ------------------------------------------------------------------ HTTP */

static struct {
    pthread_t th;
    int running;
    int fd;
    int wake[2];
    struct rio_srv *srv;
} mt = {.fd = -1, .wake = {-1, -1}};

static void send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return;
        p += w;
        n -= (size_t)w;
    }
}

static void http_answer(int fd, const char *status, const char *body, size_t len)
{
    char head[256];
    int n = snprintf(head, sizeof(head),
                     "HTTP/1.0 %s\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, len);
    send_all(fd, head, (size_t)n);
    send_all(fd, body, len);
}

static void http_serve(int fd)
{
    struct timeval tv = {.tv_sec = 2};
    char req[4096];
    size_t got = 0;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    while (got < sizeof(req) - 1) {
        ssize_t r = recv(fd, req + got, sizeof(req) - 1 - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
        req[got] = '\0';
        if (strstr(req, "\r\n\r\n") || strstr(req, "\n\n"))
            break;
    }
    req[got] = '\0';
    if (strncmp(req, "GET ", 4) != 0) {
        static const char msg[] = "only GET /metrics is served\n";
        http_answer(fd, "405 Method Not Allowed", msg, sizeof(msg) - 1);
        return;
    }
    const char *path = req + 4;
    if (strncmp(path, "/metrics", 8) != 0 ||
        (path[8] != ' ' && path[8] != '?' && path[8] != '\r' && path[8] != '\n')) {
        static const char msg[] = "not found: try GET /metrics\n";
        http_answer(fd, "404 Not Found", msg, sizeof(msg) - 1);
        return;
    }
    char *body = rio__malloc(RENDER_CAP);
    if (!body) {
        static const char msg[] = "out of memory\n";
        http_answer(fd, "503 Service Unavailable", msg, sizeof(msg) - 1);
        return;
    }
    size_t len = rio__srv_metrics_render(mt.srv, body, RENDER_CAP);
    http_answer(fd, "200 OK", body, len);
    rio__free(body);
}

static void *metrics_main(void *arg)
{
    (void)arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = mt.fd, .events = POLLIN},
                              {.fd = mt.wake[0], .events = POLLIN}};
        int n = poll(p, 2, 1000);
        if (n < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (n <= 0 || !(p[0].revents & POLLIN))
            continue;
        int fd = accept4(mt.fd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0)
            continue;
        http_serve(fd);
        close(fd);
    }
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
