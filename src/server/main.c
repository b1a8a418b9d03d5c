/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railiod: the railio object server (docs/server.md). The main thread parses
 * options, binds one listener per rail address, starts the workers and the
 * metrics responder, then accepts connections, sweeps the store, and on
 * SIGTERM/SIGINT stops accepting and drains.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <malloc.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/secret.h"
#include "core/url.h"
#include "server/server.h"
#if RIO_HAVE_MHD
#include "server/s3/gw.h"
#endif

#include "railio.h"

#define SEC 1000000000ull
#define SWEEP_NS (250ull * 1000000ull)
#define TOKEN_MAX RIO_SRV_TOKEN_MAX
#define EV_SIGNAL 1000u
#define EV_LISTENER 0u
#define COMMIT_THREADS 4u

static void usage(FILE *f)
{
    fprintf(
        f, "usage: railiod [OPTIONS]\n"
           "\n"
           "The railio object server: an in-memory store served over the railio:// protocol.\n"
           "\n"
           "  --listen ADDR:PORT[,ADDR:PORT...]  one listener per rail (default 127.0.0.1:7070,\n"
           "                                     none with --s3-backend; port 0 picks a free\n"
           "                                     port, see --port-file)\n"
           "  --port-file F             write the bound addresses to F once serving\n"
           "  --memory SIZE             capacity for objects and uploads (default 4G)\n"
           "  --prefault                touch all of --memory at start, so that no PUT pays\n"
           "                            the first touch of fresh memory (RSS = --memory)\n"
           "  --evict lru|refuse        when full: evict least recently used objects (default;\n"
           "                            refuse with --s3-listen over this server's memory)\n"
           "                            or refuse new uploads with ENOSPC\n"
           "  --ttl DURATION            default object lifetime (default 0 = forever)\n"
           "  --auth-token-file F       require HMAC authentication with the token in F\n"
           "  --tls-cert F              serve TLS only, with the certificate chain in F (PEM)\n"
           "  --tls-key F               the private key of --tls-cert (PEM)\n"
           "  --metrics ADDR:PORT       serve Prometheus text on GET /metrics, on its own\n"
           "                            listener (also --metrics-listen)\n"
           "  --threads N               worker threads (default: online CPUs)\n"
           "  --max-conns N             connections open at once (default 1024)\n"
           "  --max-inflight-bytes SIZE queued response bytes per connection (default 256M)\n"
           "  --max-depth N             outstanding requests per connection (default 64)\n"
           "  --max-body SIZE           largest request body (default 1G + 4K)\n"
           "  --idle-timeout DURATION   close connections idle this long (default 120s, 0 = "
           "never)\n"
           "  --progress-timeout DUR    cut a frame that stalls this long (default 10s)\n"
           "  --min-rate SIZE           bytes/s a frame must at least move at (default 1M)\n"
           "  --upload-timeout DUR      reclaim uploads idle this long (default 60s)\n"
           "  --drain-timeout DUR       on SIGTERM, finish in-flight work this long (default 5s)\n"
           "  --max-uploads-per-conn N  uploads one connection may have open (default 64, <= 256)\n"
           "  --max-uploads-per-client N  uploads one client address may have open\n"
           "                            (default 256, 0 = no limit)\n"
           "  --max-handshakes N        connections still in their handshake (default 128);\n"
           "                            the oldest goes when a new one needs the slot\n"
           "  --handshake-timeout DUR   close a connection with no request (with a token:\n"
           "                            no successful AUTH) by then\n"
           "                            (default 5s, 0 = never)\n"
           "  --auth-failures N         failed AUTHs per client address before AUTH is\n"
           "                            throttled to one a second (default 10)\n"
           "  --data-dir DIR            keep objects on disk in DIR (created if missing); the\n"
           "                            memory becomes an LRU cache in front of it (objects\n"
           "                            larger than --memory stream through to disk)\n"
           "  --sync                    with --data-dir: answer a PUT's commit only once its\n"
           "                            data and metadata are durable (fsync)\n"
           "  --disk-read-memory SIZE   with --data-dir: memory for the buffers of READs from\n"
           "                            disk, all connections together (default 1G); a READ\n"
           "                            that does not fit waits for room\n"
           "  --log-level LEVEL         error, warn, info (default) or debug\n"
           "  --log-file F              log to F (appended; reopened on SIGHUP), not stderr\n"
           "  --s3-listen ADDR:PORT     serve the S3 API on ADDR:PORT (docs/gateway.md)\n"
           "  --s3-backend URL          the gateway's store: any railio URL (default: this\n"
           "                            server, over railio:// on its first listener)\n"
           "  --s3-keys F               access keys and secrets of the gateway's users\n"
           "  --s3-anonymous            let unsigned requests in (off by default)\n"
           "  --s3-head-cache DURATION  rados:// backends: how long the gateway keeps a\n"
           "                            descriptor it read (and the object's metadata\n"
           "                            record), a hint each GET verifies (default 1s;\n"
           "                            0: off)\n"
           "  --s3-domain NAME          also serve virtual-hosted style: a request to\n"
           "                            BUCKET.NAME is for BUCKET\n"
           "  --s3-checksums keep|check PutObject's x-amz-checksum-*: checked and kept\n"
           "                            for GET and HEAD (keep, the default: one record\n"
           "                            write more per PUT that sends one), or checked\n"
           "                            only\n"
           "  --s3-min-part-size SIZE   the least size of a multipart upload's parts but\n"
           "                            the last, checked at Complete (default 5M, S3's;\n"
           "                            0: any)\n"
           "  --s3-sigv2 on|off         take Signature Version 2 requests and presigned\n"
           "                            URLs (on, the default: the aws CLI v1's s3 presign\n"
           "                            and s3cmd's signurl make them), or refuse them\n"
           "  --s3-max-conns N          the gateway's connections at once (default 1024)\n"
           "  --s3-max-conns-per-ip N   of them from one client address (default 256;\n"
           "                            0: no limit, behind a proxy)\n"
           "  --s3-memory SIZE          what the body buffers of all requests in flight\n"
           "                            may hold (PUT writers', GET readers' windows;\n"
           "                            default: a quarter of RAM, at most 1G), a\n"
           "                            quarter of it per client address (all of it\n"
           "                            with --s3-max-conns-per-ip 0); past it: 503\n"
           "                            SlowDown\n"
           "  --s3-tls-cert F           serve the S3 API over HTTPS only, with the\n"
           "                            certificate chain in F (PEM)\n"
           "  --s3-tls-key F            the private key of --s3-tls-cert (PEM)\n"
           "  --version, --help\n"
           "\n"
           "Durations: 250ms, 2s, 5m, 1h (a bare number is milliseconds). Sizes: 4G, 64M, 4096.\n");
}

/* ------------------------------------------------------------ addresses */

void rio__srv_addr_name(const struct sockaddr *sa, char *out, size_t cap)
{
    char host[INET6_ADDRSTRLEN] = "?";
    char port[8] = "0";
    socklen_t len =
        sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);

    getnameinfo(sa, len, host, sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
    if (sa->sa_family == AF_INET6)
        snprintf(out, cap, "[%s]:%s", host, port);
    else
        snprintf(out, cap, "%s:%s", host, port);
}

/* Split "host:port" or "[v6]:port" into host and port (in buf). */
static int split_hostport(const char *spec, char *buf, size_t cap, const char **host,
                          const char **port)
{
    char *colon;

    if (strlen(spec) >= cap || !*spec)
        return RIO_EINVAL;
    strcpy(buf, spec);
    if (buf[0] == '[') {
        char *end = strchr(buf, ']');
        if (!end || end[1] != ':')
            return RIO_EINVAL;
        *end = '\0';
        *host = buf + 1;
        *port = end + 2;
    } else {
        colon = strrchr(buf, ':');
        if (!colon)
            return RIO_EINVAL;
        *colon = '\0';
        *host = buf;
        *port = colon + 1;
    }
    if (!**host || !**port)
        return RIO_EINVAL;
    return 0;
}

static int open_listener(const char *opt, const char *spec, struct rio_srv_listener *l)
{
    struct addrinfo hints = {0}, *ai = NULL;
    const char *host, *port;
    char buf[256];
    int fd = -1, one = 1, ret;

    if (split_hostport(spec, buf, sizeof(buf), &host, &port) < 0) {
        SRV_ERR("bad listen address '%s' (want HOST:PORT or [V6]:PORT)", spec);
        return RIO_EINVAL;
    }
    /* getaddrinfo takes "80000" and binds 80000 mod 65536. */
    if (strspn(port, "0123456789") != strlen(port) || strlen(port) > 5 || atoi(port) > 65535) {
        SRV_ERR("listen address '%s': port '%s' is not a number in 0..65535", spec, port);
        return RIO_EINVAL;
    }
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    ret = getaddrinfo(host, port, &hints, &ai);
    if (ret != 0) {
        SRV_ERR("%s: listen address '%s': %s", opt, spec, gai_strerror(ret));
        return RIO_EINVAL;
    }
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        goto err_errno;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) < 0 || listen(fd, 1024) < 0)
        goto err_errno;
    l->addrlen = sizeof(l->addr);
    if (getsockname(fd, (struct sockaddr *)&l->addr, &l->addrlen) < 0)
        goto err_errno;
    rio__srv_addr_name((struct sockaddr *)&l->addr, l->name, sizeof(l->name));
    if (l->addr.ss_family == AF_INET)
        l->wildcard = ((struct sockaddr_in *)&l->addr)->sin_addr.s_addr == htonl(INADDR_ANY);
    else if (l->addr.ss_family == AF_INET6)
        l->wildcard = IN6_IS_ADDR_UNSPECIFIED(&((struct sockaddr_in6 *)&l->addr)->sin6_addr);
    l->fd = fd;
    freeaddrinfo(ai);
    return 0;
err_errno:
    ret = -errno;
    SRV_ERR("%s: listen on %s: %s", opt, spec, strerror(errno));
    if (fd >= 0)
        close(fd);
    freeaddrinfo(ai);
    return ret;
}

/*
 * Descriptors for --max-conns connections and FD_RESERVE more (listeners,
 * the data directory's files, the S3 gateway's connections, the log): the
 * soft limit goes up toward the hard one. A soft limit of 1024 (a common
 * default, and --max-conns's) let idle connections take every descriptor:
 * accept failed with EMFILE and a new client waited for --handshake-timeout
 * before --max-handshakes could make room for it (review). Below even the
 * hard limit: said once at start.
 */
#define FD_RESERVE 1024u
static void fd_limit(uint64_t max_conns)
{
    struct rlimit rl;
    rlim_t want = (rlim_t)max_conns + FD_RESERVE;

    if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= want)
        return;
    rlim_t cur = rl.rlim_cur;
    rl.rlim_cur = rl.rlim_max != RLIM_INFINITY && rl.rlim_max < want ? rl.rlim_max : want;
    if (rl.rlim_cur > cur && setrlimit(RLIMIT_NOFILE, &rl) != 0)
        rl.rlim_cur = cur;
    if (rl.rlim_cur < want)
        SRV_WARN("open files limit %llu (hard %llu) is below the %llu that --max-conns %llu "
                 "needs: connections past it wait; raise it (ulimit -n, LimitNOFILE=) or lower "
                 "--max-conns",
                 (unsigned long long)rl.rlim_cur, (unsigned long long)rl.rlim_max,
                 (unsigned long long)want, (unsigned long long)max_conns);
}

static void tune_socket(int fd, const struct rio_srv_config *cfg)
{
    int one = 1;
    /* Clamped to what the socket options hold (TCP_USER_TIMEOUT: an
     * unsigned of ms; TCP_KEEPIDLE: at most 32767 s): a longer timeout was
     * truncated, to 1 ms for 2^32 + 1 ms, and the keepalive refused. */
    uint64_t ms = cfg->progress_timeout_ns / 1000000ull,
             half_s = cfg->progress_timeout_ns / SEC / 2;
    unsigned prog_ms = ms > UINT32_MAX ? UINT32_MAX : (unsigned)ms;
    int idle = half_s > 32767 ? 32767 : (int)half_s;
    int intvl = 1, cnt = 3;

    if (idle < 1)
        idle = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    /* A peer that vanishes (link down, blackhole) is noticed by TCP itself:
     * keepalive for a quiet connection, TCP_USER_TIMEOUT for unacknowledged
     * data. A brownout (a trickle of ACKs) is the watchdog's job. */
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
    if (prog_ms)
        setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &prog_ms, sizeof(prog_ms));
}

/* ---------------------------------------------------------------- options */

_Static_assert(RIO_SRV_TOKEN_MAX == RIO_PROTO_TOKEN_MAX, "one token bound");

static int read_token(const char *path, uint8_t **out, size_t *len)
{
    const char *why;
    int loose;
    int ret = rio__proto_token_read(path, out, len, &loose, &why);

    if (ret == 0 && loose)
        SRV_WARN("auth token file %s is readable by group or others", path);
    if (ret < 0)
        SRV_ERR("auth token file %s: %s", path, why ? why : strerror(-ret));
    return ret;
}

enum {
    OPT_LISTEN = 256,
    OPT_PORT_FILE,
    OPT_MEMORY,
    OPT_EVICT,
    OPT_TTL,
    OPT_TOKEN,
    OPT_METRICS,
    OPT_THREADS,
    OPT_MAX_CONNS,
    OPT_MAX_INFLIGHT,
    OPT_MAX_DEPTH,
    OPT_MAX_BODY,
    OPT_IDLE,
    OPT_PROGRESS,
    OPT_MIN_RATE,
    OPT_UPLOAD,
    OPT_DRAIN,
    OPT_LOG,
    OPT_VERSION,
    OPT_DATA_DIR,
    OPT_SYNC,
    OPT_DISK_READ_MEM,
    OPT_PREFAULT,
    OPT_UP_CONN,
    OPT_UP_CLIENT,
    OPT_HANDSHAKES,
    OPT_HS_TIMEOUT,
    OPT_AUTH_FAIL,
    OPT_METRICS_LISTEN,
    OPT_LOG_FILE,
    OPT_TLS_CERT,
    OPT_TLS_KEY,
    OPT_S3_LISTEN,
    OPT_S3_BACKEND,
    OPT_S3_KEYS,
    OPT_S3_ANON,
    OPT_S3_HEAD_CACHE,
    OPT_S3_DOMAIN,
    OPT_S3_MIN_PART,
    OPT_S3_CHECKSUMS,
    OPT_S3_SIGV2,
    OPT_S3_TLS_CERT,
    OPT_S3_TLS_KEY,
    OPT_S3_MAX_CONNS,
    OPT_S3_MAX_CONNS_IP,
    OPT_S3_MEMORY,
};

static const struct option long_opts[] = {
    {"listen", required_argument, NULL, OPT_LISTEN},
    {"port-file", required_argument, NULL, OPT_PORT_FILE},
    {"memory", required_argument, NULL, OPT_MEMORY},
    {"evict", required_argument, NULL, OPT_EVICT},
    {"ttl", required_argument, NULL, OPT_TTL},
    {"auth-token-file", required_argument, NULL, OPT_TOKEN},
    {"metrics", required_argument, NULL, OPT_METRICS},
    {"threads", required_argument, NULL, OPT_THREADS},
    {"max-conns", required_argument, NULL, OPT_MAX_CONNS},
    {"max-inflight-bytes", required_argument, NULL, OPT_MAX_INFLIGHT},
    {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
    {"max-body", required_argument, NULL, OPT_MAX_BODY},
    {"idle-timeout", required_argument, NULL, OPT_IDLE},
    {"progress-timeout", required_argument, NULL, OPT_PROGRESS},
    {"min-rate", required_argument, NULL, OPT_MIN_RATE},
    {"upload-timeout", required_argument, NULL, OPT_UPLOAD},
    {"drain-timeout", required_argument, NULL, OPT_DRAIN},
    {"log-level", required_argument, NULL, OPT_LOG},
    {"version", no_argument, NULL, OPT_VERSION},
    {"data-dir", required_argument, NULL, OPT_DATA_DIR},
    {"sync", no_argument, NULL, OPT_SYNC},
    {"disk-read-memory", required_argument, NULL, OPT_DISK_READ_MEM},
    {"prefault", no_argument, NULL, OPT_PREFAULT},
    {"max-uploads-per-conn", required_argument, NULL, OPT_UP_CONN},
    {"max-uploads-per-client", required_argument, NULL, OPT_UP_CLIENT},
    {"max-handshakes", required_argument, NULL, OPT_HANDSHAKES},
    {"handshake-timeout", required_argument, NULL, OPT_HS_TIMEOUT},
    {"auth-failures", required_argument, NULL, OPT_AUTH_FAIL},
    {"metrics-listen", required_argument, NULL, OPT_METRICS_LISTEN},
    {"log-file", required_argument, NULL, OPT_LOG_FILE},
    {"tls-cert", required_argument, NULL, OPT_TLS_CERT},
    {"tls-key", required_argument, NULL, OPT_TLS_KEY},
    {"s3-listen", required_argument, NULL, OPT_S3_LISTEN},
    {"s3-backend", required_argument, NULL, OPT_S3_BACKEND},
    {"s3-keys", required_argument, NULL, OPT_S3_KEYS},
    {"s3-anonymous", no_argument, NULL, OPT_S3_ANON},
    {"s3-head-cache", required_argument, NULL, OPT_S3_HEAD_CACHE},
    {"s3-domain", required_argument, NULL, OPT_S3_DOMAIN},
    {"s3-min-part-size", required_argument, NULL, OPT_S3_MIN_PART},
    {"s3-checksums", required_argument, NULL, OPT_S3_CHECKSUMS},
    {"s3-sigv2", required_argument, NULL, OPT_S3_SIGV2},
    {"s3-tls-cert", required_argument, NULL, OPT_S3_TLS_CERT},
    {"s3-tls-key", required_argument, NULL, OPT_S3_TLS_KEY},
    {"s3-max-conns", required_argument, NULL, OPT_S3_MAX_CONNS},
    {"s3-max-conns-per-ip", required_argument, NULL, OPT_S3_MAX_CONNS_IP},
    {"s3-memory", required_argument, NULL, OPT_S3_MEMORY},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

struct args {
    const char *listen;
    const char *port_file;
    const char *metrics;
    const char *token_file;
    const char *log_file;
    const char *tls_cert, *tls_key;
    const char *s3_listen, *s3_backend, *s3_keys, *s3_domain;
    const char *s3_tls_cert, *s3_tls_key;
    int evict_given; /* --evict was on the command line */
    int s3_anonymous;
    uint64_t s3_head_cache_ns; /* UINT64_MAX: not given */
    uint64_t s3_min_part;      /* UINT64_MAX: not given */
    int s3_checksums;          /* -1 not given, 1 keep, 0 check only */
    int s3_sigv2;              /* -1 not given, 1 on, 0 off */
    uint64_t s3_max_conns;     /* UINT64_MAX: not given */
    uint64_t s3_max_conns_ip;  /* UINT64_MAX: not given */
    uint64_t s3_memory;        /* 0: not given */
};

/* The numeric options: parsed as a count, a size or a duration, range
 * checked, and stored in their field of struct rio_srv_config. */
enum num_kind { NUM_UINT, NUM_SIZE, NUM_DURATION };
/* The longest duration an option takes: 100 years, so that now + it
 * cannot wrap (a --ttl near 2^64 ns expired every object at once). */
#define DUR_MAX (100ull * 365 * 24 * 3600 * SEC)
static const struct num_opt {
    int id;
    enum num_kind kind;
    uint64_t min, max;
    size_t off, width; /* the field: 4 (unsigned, uint32_t) or 8 bytes */
} num_opts[] = {
#define NUM(id, kind, min, max, field)                                                             \
    {                                                                                              \
        id, kind, min, max, offsetof(struct rio_srv_config, field),                                \
            sizeof(((struct rio_srv_config *)0)->field)                                            \
    }
    NUM(OPT_MEMORY, NUM_SIZE, 1, UINT64_MAX, memory),
    NUM(OPT_TTL, NUM_DURATION, 0, DUR_MAX, ttl_ns),
    NUM(OPT_THREADS, NUM_UINT, 1, 256, threads),
    NUM(OPT_MAX_CONNS, NUM_UINT, 1, 1000000, max_conns),
    NUM(OPT_MAX_INFLIGHT, NUM_SIZE, 1, UINT64_MAX, max_inflight_bytes),
    NUM(OPT_DISK_READ_MEM, NUM_SIZE, 1, UINT64_MAX, disk_read_memory),
    NUM(OPT_MAX_DEPTH, NUM_UINT, 1, 65536, max_depth),
    NUM(OPT_MAX_BODY, NUM_SIZE, RIO_PROTO_CTRL_MAX, RIO_PROTO_BODY_CAP, max_body),
    NUM(OPT_IDLE, NUM_DURATION, 0, DUR_MAX, idle_timeout_ns),
    NUM(OPT_PROGRESS, NUM_DURATION, 1000000, DUR_MAX, progress_timeout_ns),
    NUM(OPT_MIN_RATE, NUM_SIZE, 1, UINT64_MAX, min_rate),
    NUM(OPT_UPLOAD, NUM_DURATION, 1, DUR_MAX, upload_timeout_ns),
    NUM(OPT_DRAIN, NUM_DURATION, 0, DUR_MAX, drain_timeout_ns),
    NUM(OPT_UP_CONN, NUM_UINT, 1, 256, max_uploads_conn),
    NUM(OPT_UP_CLIENT, NUM_UINT, 0, 1000000, max_uploads_client),
    NUM(OPT_HANDSHAKES, NUM_UINT, 1, 1000000, max_handshakes),
    NUM(OPT_HS_TIMEOUT, NUM_DURATION, 0, DUR_MAX, handshake_timeout_ns),
    NUM(OPT_AUTH_FAIL, NUM_UINT, 1, 1000000, auth_fail_burst),
#undef NUM
};

/* Option id's value into cfg: 1 taken, 0 not a numeric option, -1 bad. */
static int num_opt_set(struct rio_srv_config *cfg, int id, const char *v)
{
    for (size_t i = 0; i < sizeof(num_opts) / sizeof(num_opts[0]); i++) {
        const struct num_opt *n = &num_opts[i];
        uint64_t x;
        int ret;

        if (n->id != id)
            continue;
        ret = n->kind == NUM_UINT   ? rio__parse_uint(v, n->max, &x)
              : n->kind == NUM_SIZE ? rio__parse_size(v, &x)
                                    : rio__parse_duration_ns(v, &x);
        if (ret < 0)
            return -1;
        if (x < n->min || x > n->max) {
            if (n->kind == NUM_DURATION && x > n->max && n->max == DUR_MAX)
                fprintf(stderr, "railiod: at most 100 years (876000h)\n");
            else if (n->kind != NUM_DURATION && x < n->min)
                fprintf(stderr, "railiod: the least it takes is %llu\n",
                        (unsigned long long)n->min);
            else if (n->kind != NUM_DURATION)
                fprintf(stderr, "railiod: the most it takes is %llu\n", (unsigned long long)n->max);
            return -1;
        }
        if (n->width == 4) {
            uint32_t x32 = (uint32_t)x;
            memcpy((char *)cfg + n->off, &x32, 4);
        } else {
            memcpy((char *)cfg + n->off, &x, 8);
        }
        return 1;
    }
    return 0;
}

/* The options that name an address or a file, kept as given in struct args. */
static const struct {
    int id;
    size_t off;
} path_opts[] = {
    {OPT_LISTEN, offsetof(struct args, listen)},
    {OPT_PORT_FILE, offsetof(struct args, port_file)},
    {OPT_TOKEN, offsetof(struct args, token_file)},
    {OPT_LOG_FILE, offsetof(struct args, log_file)},
    {OPT_TLS_CERT, offsetof(struct args, tls_cert)},
    {OPT_TLS_KEY, offsetof(struct args, tls_key)},
    {OPT_METRICS, offsetof(struct args, metrics)},
    {OPT_METRICS_LISTEN, offsetof(struct args, metrics)},
    {OPT_S3_LISTEN, offsetof(struct args, s3_listen)},
    {OPT_S3_BACKEND, offsetof(struct args, s3_backend)},
    {OPT_S3_KEYS, offsetof(struct args, s3_keys)},
    {OPT_S3_TLS_CERT, offsetof(struct args, s3_tls_cert)},
    {OPT_S3_TLS_KEY, offsetof(struct args, s3_tls_key)},
};

/* Option id's value into a: whether it was one of those. */
static bool path_opt_set(struct args *a, int id, const char *v)
{
    for (size_t i = 0; i < sizeof(path_opts) / sizeof(path_opts[0]); i++)
        if (path_opts[i].id == id) {
            memcpy((char *)a + path_opts[i].off, &v, sizeof(v));
            return true;
        }
    return false;
}

static int bad_value(const char *opt, const char *v)
{
    fprintf(stderr, "railiod: invalid value '%s' for --%s\n", v, opt);
    return 2;
}

/* 0, or the exit status (2 usage error, 1 help/version printed -> 0 via *done). */
static int parse_args(int argc, char **argv, struct rio_srv_config *cfg, struct args *a, int *done)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    int c, idx = 0;

    memset(cfg, 0, sizeof(*cfg));
    cfg->memory = 4ull << 30;
    cfg->evict_lru = 1;
    cfg->threads = ncpu > 0 ? (unsigned)(ncpu > 64 ? 64 : ncpu) : 2;
    cfg->max_conns = 1024;
    cfg->max_inflight_bytes = 256ull << 20;
    cfg->max_depth = 64;
    cfg->max_body = RIO_PROTO_BODY_CAP;
    cfg->idle_timeout_ns = 120 * SEC;
    cfg->progress_timeout_ns = 10 * SEC;
    cfg->min_rate = 1u << 20;
    cfg->upload_timeout_ns = 60 * SEC;
    cfg->drain_timeout_ns = 5 * SEC;
    cfg->max_uploads_conn = 64;
    cfg->max_uploads_client = 256;
    cfg->max_handshakes = 128;
    cfg->handshake_timeout_ns = 5 * SEC;
    cfg->auth_fail_burst = 10;
    a->s3_head_cache_ns = UINT64_MAX;
    a->s3_min_part = UINT64_MAX;
    a->s3_checksums = -1;
    a->s3_sigv2 = -1;
    a->s3_max_conns = UINT64_MAX;
    a->s3_max_conns_ip = UINT64_MAX;
    *done = 0;

    optind = 1;
    while ((c = getopt_long(argc, argv, "h", long_opts, &idx)) != -1) {
        const char *name = "";
        for (const struct option *o = long_opts; o->name; o++)
            if (o->val == c)
                name = o->name; /* the option's name for messages, by its value */
        switch (c) {
        case OPT_EVICT:
            a->evict_given = 1;
            if (strcmp(optarg, "lru") == 0)
                cfg->evict_lru = 1;
            else if (strcmp(optarg, "refuse") == 0)
                cfg->evict_lru = 0;
            else
                return bad_value(name, optarg);
            break;
        case OPT_LOG: {
            int l = rio__srv_log_parse(optarg);
            if (l < 0)
                return bad_value(name, optarg);
            rio__srv_log_level = l;
            break;
        }
        case OPT_DATA_DIR:
            if (!*optarg)
                return bad_value(name, optarg);
            cfg->data_dir = optarg;
            break;
        case OPT_SYNC:
            cfg->sync = 1;
            break;
        case OPT_PREFAULT:
            cfg->prefault = 1;
            break;
        case OPT_S3_ANON:
            a->s3_anonymous = 1;
            break;
        case OPT_S3_DOMAIN:
            /* A DNS name: labels of [a-z0-9-], dots between them. */
            if (!*optarg || strlen(optarg) > 253 || optarg[0] == '.' ||
                optarg[strlen(optarg) - 1] == '.' || strstr(optarg, "..") ||
                strspn(optarg, "abcdefghijklmnopqrstuvwxyz0123456789.-") != strlen(optarg))
                return bad_value(name, optarg);
            a->s3_domain = optarg;
            break;
        case OPT_S3_CHECKSUMS:
            if (strcmp(optarg, "keep") != 0 && strcmp(optarg, "check") != 0)
                return bad_value(name, optarg);
            a->s3_checksums = strcmp(optarg, "keep") == 0;
            break;
        case OPT_S3_SIGV2:
            if (strcmp(optarg, "on") != 0 && strcmp(optarg, "off") != 0)
                return bad_value(name, optarg);
            a->s3_sigv2 = strcmp(optarg, "on") == 0;
            break;
        case OPT_S3_MIN_PART:
            if (rio__parse_size(optarg, &a->s3_min_part) < 0 || a->s3_min_part > (5ull << 30))
                return bad_value(name, optarg);
            break;
        case OPT_S3_MAX_CONNS:
            if (rio__parse_uint(optarg, 65536, &a->s3_max_conns) < 0 || a->s3_max_conns == 0)
                return bad_value(name, optarg);
            break;
        case OPT_S3_MAX_CONNS_IP:
            if (rio__parse_uint(optarg, 65536, &a->s3_max_conns_ip) < 0)
                return bad_value(name, optarg);
            break;
        case OPT_S3_MEMORY:
            /* At most 1 PiB: sums of windows stay far from 2^64. */
            if (rio__parse_size(optarg, &a->s3_memory) < 0 || a->s3_memory < GW_MEM_MIN ||
                a->s3_memory > (1ull << 50))
                return bad_value(name, optarg);
            break;
        case OPT_S3_HEAD_CACHE:
            if (rio__parse_duration_ns(optarg, &a->s3_head_cache_ns) < 0 ||
                a->s3_head_cache_ns > 3600 * SEC)
                return bad_value(name, optarg);
            break;
        case OPT_VERSION:
            printf("railiod %d.%d.%d (protocol %d)\n", RIO_VERSION_MAJOR, RIO_VERSION_MINOR,
                   RIO_VERSION_PATCH, RIO_PROTO_VERSION);
            *done = 1;
            return 0;
        case 'h':
            usage(stdout);
            *done = 1;
            return 0;
        default: {
            int ret = num_opt_set(cfg, c, optarg);
            if (ret < 0)
                return bad_value(name, optarg);
            if (ret > 0 || path_opt_set(a, c, optarg))
                break;
            usage(stderr);
            return 2;
        }
        }
    }
    if (optind < argc) {
        fprintf(stderr, "railiod: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    if ((a->s3_backend || a->s3_keys || a->s3_anonymous || a->s3_domain ||
         a->s3_head_cache_ns != UINT64_MAX || a->s3_min_part != UINT64_MAX ||
         a->s3_checksums >= 0 || a->s3_sigv2 >= 0 || a->s3_tls_cert || a->s3_tls_key ||
         a->s3_max_conns != UINT64_MAX || a->s3_max_conns_ip != UINT64_MAX || a->s3_memory) &&
        !a->s3_listen) {
        fprintf(stderr, "railiod: --s3-backend, --s3-keys, --s3-anonymous, --s3-domain, "
                        "--s3-head-cache, --s3-min-part-size, --s3-checksums, --s3-sigv2, "
                        "--s3-tls-cert, --s3-tls-key, --s3-max-conns, --s3-max-conns-per-ip "
                        "and --s3-memory need --s3-listen\n");
        return 2;
    }
    if (!a->s3_tls_cert != !a->s3_tls_key) {
        fprintf(stderr, "railiod: --s3-tls-cert and --s3-tls-key go together\n");
        return 2;
    }
#if !RIO_HAVE_MHD
    if (a->s3_listen) {
        fprintf(stderr, "railiod: --s3-listen: this railiod was built without the S3 gateway "
                        "(libmicrohttpd was not found at build time)\n");
        return 2;
    }
#endif
    if (cfg->sync && !cfg->data_dir) {
        fprintf(stderr, "railiod: --sync needs --data-dir\n");
        return 2;
    }
    if (cfg->disk_read_memory && !cfg->data_dir) {
        fprintf(stderr, "railiod: --disk-read-memory needs --data-dir\n");
        return 2;
    }
    /* The gateway over the server's own memory: an S3 client takes a 200
     * to mean the object is kept, so what does not fit is refused (507
     * InsufficientStorage) rather than older objects evicted, unless
     * --evict lru says this store is a cache. With --data-dir memory is a
     * cache of the disk, which keeps everything. */
    if (a->s3_listen && !a->s3_backend && !cfg->data_dir && !a->evict_given)
        cfg->evict_lru = 0;
    /* The data listener's default, unless a gateway over another backend
     * alone was asked for: `--s3-listen --s3-backend URL` without
     * `--listen` opened 127.0.0.1:7070 too, a railio:// listener nobody
     * asked for (without a token: open to every local user), which also
     * failed the start where 7070 was taken. A gateway over this server's
     * own store reaches it through its first listener. */
    if (!a->listen && !(a->s3_listen && a->s3_backend))
        a->listen = "127.0.0.1:7070";
    return 0;
}

/* ------------------------------------------------------------- start-up */

/* MemAvailable of /proc/meminfo in bytes, 0 if unknown. */
static uint64_t mem_available(void)
{
    char line[256];
    unsigned long long kb = 0;
    FILE *f = fopen("/proc/meminfo", "r");

    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    fclose(f);
    return (uint64_t)kb * 1024;
}

static int open_listeners(struct rio_srv *srv, const char *list)
{
    char *copy = rio__strdup(list), *save = NULL, *tok;
    int ret = 0;

    if (!copy)
        return -ENOMEM;
    for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (srv->nlis == RIO_SRV_MAX_LISTENERS) {
            SRV_ERR("at most %d listen addresses", RIO_SRV_MAX_LISTENERS);
            ret = RIO_EINVAL;
            break;
        }
        ret = open_listener("--listen", tok, &srv->lis[srv->nlis]);
        if (ret < 0)
            break;
        srv->lis[srv->nlis].index = (int)srv->nlis;
        srv->nlis++;
    }
    if (!ret && srv->nlis == 0) {
        SRV_ERR("no listen address");
        ret = RIO_EINVAL;
    }
    rio__free(copy);
    return ret;
}

/* Write the bound addresses: line 1 is the comma-separated rail list (ready
 * for a railio:// URL), line 2 "metrics=ADDR" when metrics are on. Written
 * to a temporary name and renamed, so a reader never sees half a file. */
static int write_port_file(const struct rio_srv *srv, const char *path, const char *metrics,
                           const char *s3)
{
    char tmp[4096];
    FILE *f;

    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return RIO_EINVAL;
    f = fopen(tmp, "w");
    if (!f)
        return -errno;
    for (unsigned i = 0; i < srv->nlis; i++)
        fprintf(f, "%s%s", i ? "," : "", srv->lis[i].name);
    fputc('\n', f);
    if (metrics)
        fprintf(f, "metrics=%s\n", metrics);
    if (s3)
        fprintf(f, "s3=%s\n", s3);
    if (fclose(f) != 0 || rename(tmp, path) != 0) {
        int e = -errno;
        unlink(tmp);
        return e;
    }
    return 0;
}

static void accept_all(struct rio_srv *srv, struct rio_srv_listener *l)
{
    for (;;) {
        int fd = accept4(l->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                static uint64_t last_log;
                uint64_t now = rio__now_ns();
                int e = errno;
                /* Once a second at most: this can repeat at every wake-up. */
                if (now - last_log > SEC) {
                    SRV_WARN("accept on %s: %s", l->name, strerror(e));
                    last_log = now;
                }
                /* Out of descriptors: give the workers a moment to close some. */
                if (e == EMFILE || e == ENFILE)
                    usleep(10000);
            }
            return;
        }
        if (rio__srv_admit(srv, fd) < 0) {
            atomic_fetch_add(&srv->m.conns_rejected, 1);
            SRV_INFO("connection refused on %s: %u authenticated connections open (--max-conns)",
                     l->name, srv->cfg.max_conns);
            close(fd);
            continue;
        }
        atomic_fetch_add(&srv->m.conns_accepted, 1);
        atomic_fetch_add(&srv->m.listener_conns[l->index], 1);
        tune_socket(fd, &srv->cfg);
        rio__srv_dispatch(srv, fd, l->index);
    }
}

static void close_listeners(struct rio_srv *srv, int epfd)
{
    for (unsigned i = 0; i < srv->nlis; i++)
        if (srv->lis[i].fd >= 0) {
            if (epfd >= 0)
                epoll_ctl(epfd, EPOLL_CTL_DEL, srv->lis[i].fd, NULL);
            close(srv->lis[i].fd);
            srv->lis[i].fd = -1;
        }
}

/*
 * SIGHUP: reopen --log-file (after logrotate moved it) and re-read
 * --auth-token-file. A token that fails to read keeps the old one. The swap
 * is token.c's: an AUTH in progress keeps the key it started with.
 */
static const struct args *hup_args;

/* Read path into *t (made when NULL): 1 changed, 0 the same, < 0 kept. */
static int token_load(const char *path, struct rio_srv_token **t)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int ret = read_token(path, &buf, &len);

    if (ret < 0)
        return ret;
    ret = *t ? rio__srv_token_set(*t, buf, len) : rio__srv_token_new(t, buf, len);
    rio__secret_free(buf);
    return ret;
}

static int open_log(const char *path)
{
    int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);

    if (fd < 0 || dup2(fd, STDERR_FILENO) < 0) {
        int err = -errno;
        if (fd >= 0)
            close(fd);
        return err;
    }
    close(fd);
    return 0;
}

static void hup(struct rio_srv *srv)
{
    int ret;

    if (hup_args->log_file) {
        ret = open_log(hup_args->log_file);
        if (ret < 0)
            SRV_ERR("SIGHUP: log file %s: %s", hup_args->log_file, strerror(-ret));
    }
    SRV_INFO("SIGHUP: %s", hup_args->log_file ? "log file reopened" : "no log file to reopen");
    if (!hup_args->token_file)
        return;
    ret = token_load(hup_args->token_file, &srv->cfg.token);
    if (ret < 0)
        SRV_ERR("SIGHUP: keeping the previous token");
    else
        SRV_INFO("SIGHUP: token %s", ret ? "reloaded" : "unchanged");
}

static int serve(struct rio_srv *srv, int sfd)
{
    struct epoll_event e, evs[32];
    uint64_t next_sweep = 0, deadline = 0;
    int epfd, draining = 0;

    epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return -errno;
    e.events = EPOLLIN;
    e.data.u64 = EV_SIGNAL;
    epoll_ctl(epfd, EPOLL_CTL_ADD, sfd, &e);
    for (unsigned i = 0; i < srv->nlis; i++) {
        e.events = EPOLLIN;
        e.data.u64 = EV_LISTENER + i;
        epoll_ctl(epfd, EPOLL_CTL_ADD, srv->lis[i].fd, &e);
    }
    for (;;) {
        int n = epoll_wait(epfd, evs, 32, draining ? 20 : 250);
        if (n < 0 && errno != EINTR) {
            SRV_ERR("epoll_wait: %s", strerror(errno));
            break;
        }
        for (int i = 0; i < n; i++) {
            if (evs[i].data.u64 == EV_SIGNAL) {
                struct signalfd_siginfo si;
                if (read(sfd, &si, sizeof(si)) != (ssize_t)sizeof(si))
                    continue;
                if (si.ssi_signo == SIGHUP) {
                    hup(srv);
                    continue;
                }
                if (draining) {
                    SRV_WARN("second signal %d: stopping now", (int)si.ssi_signo);
                    deadline = 1;
                    continue;
                }
                SRV_INFO("signal %d: draining (%u connections, up to %llu ms)", (int)si.ssi_signo,
                         rio__srv_workers_conns(srv),
                         (unsigned long long)(srv->cfg.drain_timeout_ns / 1000000ull));
                close_listeners(srv, epfd);
                draining = 1;
                deadline = rio__now_ns() + srv->cfg.drain_timeout_ns;
                atomic_store(&srv->draining, 1);
                rio__srv_workers_wake(srv);
            } else if (!draining && evs[i].data.u64 < srv->nlis) {
                accept_all(srv, &srv->lis[evs[i].data.u64]);
            }
        }
        uint64_t now = rio__now_ns();
        if (now >= next_sweep) {
            rio__srv_store_sweep(&srv->store, now);
            rio__srv_log_flush(0);
            if (srv->disk)
                rio__srv_disk_reclaim(srv->disk);
            next_sweep = now + SWEEP_NS;
        }
        if (draining) {
            unsigned left = rio__srv_workers_conns(srv);
            if (left == 0) {
                SRV_INFO("drained");
                break;
            }
            if (now >= deadline) {
                SRV_WARN("drain deadline passed: closing %u connections", left);
                break;
            }
        }
    }
    close(epfd);
    return 0;
}

/* The S3 gateway on its listener (docs/gateway.md): 0, or -1 (logged). */
static int start_s3(struct rio_srv *srv, const struct args *a, struct rio_srv_listener *l)
{
#if RIO_HAVE_MHD
    struct rio_s3_gw_config gc = {
        .backend = a->s3_backend,
        .keys = a->s3_keys,
        .anonymous = a->s3_anonymous,
        .head_cache_ns = a->s3_head_cache_ns,
        .domain = a->s3_domain,
        .min_part = a->s3_min_part,
        .check_only = a->s3_checksums == 0,
        .no_sigv2 = a->s3_sigv2 == 0,
        .tls_cert = a->s3_tls_cert,
        .tls_key = a->s3_tls_key,
        .max_conns = a->s3_max_conns == UINT64_MAX ? 1024u : (unsigned)a->s3_max_conns,
        .max_conns_ip = a->s3_max_conns_ip == UINT64_MAX ? 256u : (unsigned)a->s3_max_conns_ip,
        .memory = a->s3_memory};
    char url[3 * PATH_MAX + 512], host[RIO_PROTO_ADDR_MAX + 1];

    if (!a->s3_backend) {
        /* This server over railio://, on its first listener (a wildcard one
         * through loopback). */
        const char *name = srv->lis[0].name;
        if (srv->tls) {
            SRV_ERR(
                "--s3-listen with --tls-cert: give --s3-backend (railio://...?tls=on&tls_ca=...)");
            return -1;
        }
        if (srv->lis[0].wildcard) {
            const char *port = strrchr(name, ':');
            snprintf(host, sizeof(host), "%s%s",
                     srv->lis[0].addr.ss_family == AF_INET6 ? "[::1]" : "127.0.0.1", port);
            name = host;
        }
        /* The token file's path percent-encoded: a '&', '%', '#' or '?'
         * in it was read as URL syntax (every S3 request then failed). */
        char tf[3 * PATH_MAX + 1] = "";
        if (a->token_file) {
            static const char hex[] = "0123456789ABCDEF";
            size_t o = 0;
            for (const unsigned char *p = (const unsigned char *)a->token_file; *p; p++) {
                if (o + 4 > sizeof(tf)) {
                    SRV_ERR("--auth-token-file: the path is too long");
                    return -1;
                }
                if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                    (*p >= '0' && *p <= '9') || strchr("/-._~", *p)) {
                    tf[o++] = (char)*p;
                } else {
                    tf[o++] = '%';
                    tf[o++] = hex[*p >> 4];
                    tf[o++] = hex[*p & 15];
                }
            }
            tf[o] = '\0';
        }
        if (snprintf(url, sizeof(url), "railio://%s%s%s", name, a->token_file ? "?token_file=" : "",
                     tf) >= (int)sizeof(url)) {
            SRV_ERR("--s3-listen: the default backend's URL is too long");
            return -1;
        }
        gc.backend = url;
        gc.lazy = 1; /* this server accepts once it serves */
    }
    if (open_listener("--s3-listen", a->s3_listen, l) < 0)
        return -1;
    gc.listen_fd = l->fd;
    if (rio__s3_gw_start(&gc) < 0)
        return -1;
    return 0;
#else
    (void)srv;
    (void)a;
    (void)l;
    return -1;
#endif
}

int main(int argc, char **argv)
{
    struct rio_srv *srv;
    struct args a = {0};
    sigset_t mask;
    int ret, done, sfd = -1, mfd_ok = 0;
    struct rio_srv_listener mlis = {.fd = -1}, s3lis = {.fd = -1};

    /* One heap for every thread: small allocations only (object memory is
     * mapped on its own, see below). */
    mallopt(M_ARENA_MAX, 1);

    srv = rio__calloc(1, sizeof(*srv));
    if (!srv) {
        fprintf(stderr, "railiod: out of memory\n");
        return 1;
    }
    ret = parse_args(argc, argv, &srv->cfg, &a, &done);
    if (ret || done) {
        rio__free(srv);
        return ret;
    }
    pthread_mutex_init(&srv->admit_mu, NULL);
    if (srv->cfg.prefault) {
        /*
         * --prefault: object memory from one heap, large blocks from it
         * rather than an mmap/munmap per object, never trimmed: memory the
         * VM hands back to the host costs a page fault again at its next
         * first touch (docs/server.md, "Memory"). RSS stays at its peak.
         * Without it every large buffer has its own mapping, unmapped when
         * freed, so RSS follows what the store holds.
         */
        rio__srv_data_heap = 1;
        mallopt(M_MMAP_MAX, 0);
        mallopt(M_TRIM_THRESHOLD, -1);
        /* One arena: the prefault touches the main one, and a worker
         * thread's own arena would carve uploads from memory never
         * touched (and hold freed objects where the others cannot reuse
         * them). */
        mallopt(M_ARENA_MAX, 1);
    }
    srv->start_ns = rio__now_ns();
    for (unsigned i = 0; i < RIO_SRV_MAX_LISTENERS; i++)
        srv->lis[i].fd = -1;

    /* Signals are taken through a signalfd; every thread inherits the mask. */
    signal(SIGPIPE, SIG_IGN);
    sigemptyset(&mask);
    sigaddset(&mask, SIGTERM);
    sigaddset(&mask, SIGINT);
    sigaddset(&mask, SIGHUP); /* reload, never stop: hup() */
    pthread_sigmask(SIG_BLOCK, &mask, NULL);
    sfd = signalfd(-1, &mask, SFD_CLOEXEC);
    if (sfd < 0) {
        SRV_ERR("signalfd: %s", strerror(errno));
        ret = 1;
        goto out_free;
    }

    hup_args = &a;
    if (a.log_file && (ret = open_log(a.log_file)) < 0) {
        fprintf(stderr, "railiod: log file %s: %s\n", a.log_file, strerror(-ret));
        ret = 1;
        goto out_sfd;
    }
    if (a.token_file && token_load(a.token_file, &srv->cfg.token) < 0) {
        ret = 1;
        goto out_sfd;
    }
    if (!a.tls_cert != !a.tls_key) {
        SRV_ERR("--tls-cert and --tls-key go together");
        ret = 1;
        goto out_token;
    }
    if (a.tls_cert) {
        char why[512];
        srv->tls = rio__tls_server_ctx(a.tls_cert, a.tls_key, why, sizeof(why));
        if (!srv->tls) {
            SRV_ERR("%s", why);
            ret = 1;
            goto out_token;
        }
    }
    fd_limit(srv->cfg.max_conns);
    /* The largest upload's checksum list must fit a LOOKUP/COMMIT body. */
    ret = rio__srv_store_init(&srv->store, srv->cfg.memory, srv->cfg.evict_lru, srv->cfg.ttl_ns,
                              srv->cfg.upload_timeout_ns, (srv->cfg.max_body - 64) / 8);
    if (ret < 0) {
        SRV_ERR("store: %s", rio_strerror(ret));
        ret = 1;
        goto out_token;
    }
    if (srv->cfg.prefault) {
        /* Touching more than the machine has would end in the OOM killer. */
        uint64_t avail = mem_available();
        double sec =
            avail && srv->cfg.memory > avail ? -1 : rio__srv_store_prefault(srv->cfg.memory);
        if (sec < 0) {
            SRV_WARN("--prefault: %llu bytes %s; uploads get fresh memory",
                     (unsigned long long)srv->cfg.memory,
                     avail && srv->cfg.memory > avail ? "is more than the memory available"
                                                      : "could not be allocated");
            srv->cfg.prefault = 0;
        } else {
            SRV_INFO("prefaulted %llu bytes of object memory in %.2f s",
                     (unsigned long long)srv->cfg.memory, sec);
        }
    }
    /* Tests only (docs/server.md, "Tests"): a server that offers no PUT of
     * unknown size, as railiod's disk tier was before it took them. */
    const char *no_stream = getenv("RAILIOD_TEST_NO_STREAM_PUT");
    srv->test_no_stream = no_stream && strcmp(no_stream, "1") == 0;
    /* Tests only: a server that has no PUT_ONE, as railiod before it. */
    const char *no_one = getenv("RAILIOD_TEST_NO_PUT_ONE");
    srv->test_no_put_one = no_one && strcmp(no_one, "1") == 0;
    const char *no_get_one = getenv("RAILIOD_TEST_NO_GET_ONE");
    srv->test_no_get_one = no_get_one && strcmp(no_get_one, "1") == 0;
    /* Tests only: a server that sends no service times, as railiod before. */
    const char *no_svc = getenv("RAILIOD_TEST_NO_SVC_TIME");
    srv->test_no_svc_time = no_svc && strcmp(no_svc, "1") == 0;
    if (srv->cfg.data_dir) {
        uint64_t max_gen = 0;
        ret = rio__srv_disk_open(&srv->disk, srv->cfg.data_dir, srv->cfg.sync,
                                 (srv->cfg.max_body - 64) / 8, &srv->store, &max_gen);
        if (ret < 0) {
            ret = 1;
            goto out_listeners;
        }
        rio__srv_disk_read_budget(srv->disk, srv->cfg.disk_read_memory ? srv->cfg.disk_read_memory
                                                                       : RIO_SRV_DISK_READ_MEMORY);
        /* Commits (fsync, rename) run on their own threads, never on a
         * worker: several, so that fsyncs of different PUTs overlap. */
        ret = rio__srv_disk_pool_start(srv->disk, COMMIT_THREADS);
        if (ret < 0) {
            SRV_ERR("commit threads: %s", rio_strerror(ret));
            ret = 1;
            goto out_listeners;
        }
        /* Uploads stream to temporary files in the data directory. */
        srv->store.disk = srv->disk;
        /* Above every generation on disk, whatever the clock says. */
        rio__srv_store_gen_floor(&srv->store, max_gen);
        /* Memory is a cache in front of the disk: evict, never refuse, and
         * no TTL (objects on disk do not expire). */
        if (!srv->cfg.evict_lru || srv->cfg.ttl_ns)
            SRV_WARN("--data-dir: the memory tier is an LRU cache; --evict refuse and --ttl "
                     "do not apply");
        srv->store.evict_lru = 1;
        srv->store.default_ttl_ns = 0;
        srv->store.no_ttl = 1;
    }
    if (a.listen && open_listeners(srv, a.listen) < 0) {
        ret = 1;
        goto out_listeners;
    }
    if (a.metrics) {
        if (open_listener("--metrics", a.metrics, &mlis) < 0) {
            ret = 1;
            goto out_listeners;
        }
        if (rio__srv_metrics_start(srv, mlis.fd) < 0) {
            SRV_ERR("metrics thread failed to start");
            close(mlis.fd);
            ret = 1;
            goto out_listeners;
        }
        mfd_ok = 1;
    }
    ret = rio__srv_workers_start(srv);
    if (ret < 0) {
        SRV_ERR("workers: %s", rio_strerror(ret));
        atomic_store(&srv->stopping, 1);
        ret = 1;
        goto out_workers;
    }
    if (a.s3_listen && start_s3(srv, &a, &s3lis) < 0) {
        atomic_store(&srv->stopping, 1);
        ret = 1;
        goto out_workers;
    }
    if (a.port_file) {
        ret = write_port_file(srv, a.port_file, a.metrics ? mlis.name : NULL,
                              a.s3_listen ? s3lis.name : NULL);
        if (ret < 0) {
            SRV_ERR("port file %s: %s", a.port_file, rio_strerror(ret));
            atomic_store(&srv->stopping, 1);
            ret = 1;
            goto out_workers;
        }
    }
    for (unsigned i = 0; i < srv->nlis; i++)
        SRV_INFO("listening on %s (rail %u)", srv->lis[i].name, i);
    if (a.metrics)
        SRV_INFO("metrics on http://%s/metrics", mlis.name);
    if (a.s3_listen) {
        char red[1024]; /* the backend's secrets (token=, a password) never logged */
        SRV_INFO("s3 on %s://%s/ over %s", a.s3_tls_cert ? "https" : "http", s3lis.name,
                 a.s3_backend ? rio__url_redact(a.s3_backend, red, sizeof(red)) : "this server");
    }
    if (a.s3_listen && !a.s3_backend && !srv->cfg.data_dir && srv->store.evict_lru)
        SRV_WARN("--evict lru: objects written through S3 are dropped, oldest first, when "
                 "--memory is full (the store is a cache); --evict refuse answers 507 instead");
    SRV_INFO("serving: memory=%llu%s evict=%s threads=%u auth=%s tls=%s max_conns=%u "
             "max_depth=%u data_dir=%s sync=%s",
             (unsigned long long)srv->cfg.memory, srv->cfg.prefault ? " (prefaulted)" : "",
             srv->store.evict_lru ? "lru" : "refuse", srv->cfg.threads,
             srv->cfg.token ? "on" : "off", srv->tls ? "on" : "off", srv->cfg.max_conns,
             srv->cfg.max_depth, srv->cfg.data_dir ? srv->cfg.data_dir : "-",
             srv->cfg.sync ? "on" : "off");

    serve(srv, sfd);
    ret = 0;
    atomic_store(&srv->stopping, 1);
    /* A stale port file would send the next reader to a dead server. */
    if (a.port_file)
        unlink(a.port_file);
out_workers:
    /* /metrics renders the gateway's counters and head cache: it stops
     * before them (TSan: a scrape during the stop read what the stop was
     * clearing). */
    if (mfd_ok)
        rio__srv_metrics_stop();
    mfd_ok = 0;
#if RIO_HAVE_MHD
    /* The gateway is a client of the workers (its default backend): first. */
    rio__s3_gw_stop();
#endif
    rio__srv_workers_wake(srv);
    rio__srv_workers_join(srv);
out_listeners:
    if (mfd_ok)
        rio__srv_metrics_stop();
    close_listeners(srv, -1);
    rio__srv_store_cleanup(&srv->store);
    rio__srv_disk_close(srv->disk);
out_token:
    rio__tls_ctx_free(srv->tls);
    rio__srv_token_free(srv->cfg.token);
out_sfd:
    close(sfd);
out_free:
    rio__srv_log_flush(1);
    if (ret == 0)
        SRV_INFO("exit");
    rio__free(srv);
    return ret;
}
