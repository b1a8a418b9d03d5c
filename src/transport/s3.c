/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3://BUCKET[/PREFIX] and http(s)://HOST[/PREFIX]: objects over HTTP through
 * libcurl. Read docs/s3.md first; this comment is the map of the code.
 *
 * Data ops (chunk READs and WRITEs) run on curl multi handles, one per path,
 * all driven by reap() in the engine thread over one epoll set
 * (curl_multi_socket_action): a socket callback keeps each multi's sockets in
 * the epoll set, a timer callback records each multi's next deadline, and an
 * eventfd in the same set is how submit, cancel and wake reach a blocked
 * reap. Nothing but reap ever touches a multi or a data easy handle, so
 * submit and cancel (which other threads may call) only queue work under
 * t->mu. Each path keeps a pool of ops, each with its own easy handle, header
 * nodes and buffers, so the hot path allocates nothing once the pool has
 * grown to the depth in use; the multi's connection cache gives connection
 * reuse.
 *
 * Metadata ops (lookup, put_open, put_commit, put_abort, remove) are
 * synchronous curl_easy_perform calls on easy handles from a small pool, so
 * several threads can run them at once. The idempotent ones are retried a
 * few times on retryable errors.
 *
 * READ: a ranged GET pinned with If-Match to the ETag the lookup saw (the
 * generation is a hash of it, and the ETag is found again through a small
 * table); the response's status, Content-Range, Content-Length and ETag are
 * checked before the first body byte is stored, and every body callback
 * checks it stays inside [0, len) of the op's destination. WRITE: one
 * UploadPart per chunk (part number = chunk index + 1), or for an object of
 * one chunk a single PutObject carrying all the metadata. Commit completes
 * the multipart upload after writing the per-chunk xxh3 list to a sidecar
 * object. A stream of unknown size (RIO_CAP_STREAM_PUT) is always a
 * multipart upload: its parts arrive in any order before the count is known,
 * so their records live in pages allocated at submit, and commit checks the
 * final geometry (every part below the count sent whole, none beyond) before
 * completing parts 1..n; an empty stream aborts the upload and PUTs an empty
 * object. Errors are translated at the boundary (map_curl, map_http).
 *
 * Locks: t->mu guards the pending and cancel queues, the op pools, each
 * path's count of ops held, io->tpriv and the cancel marks; an op's transfer
 * state belongs to the reap thread once reap has taken it from the pending
 * queue. t->gen_mu guards the generation table, t->meta_mu the metadata
 * handle pool. None is held while curl runs or while complete() is called.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/copy.h"
#include "core/internal.h"
#include "core/key.h"
#include "core/url.h"
#include "railio.h"
#include "transport/s3_parse.h"
#include "transport/s3_sign.h"
#include "transport/transport.h"

extern const struct rio_transport_ops rio__s3_ops;
extern const struct rio_transport_ops rio__http_ops;
extern const struct rio_transport_ops rio__https_ops;

#define S3_MAX_PARTS 10000u          /* S3's limit on parts per upload */
#define S3_DEF_MIN_PART (5ull << 20) /* S3's minimum part size (all but the last) */
#define S3_DEPTH_CAP 1024u           /* ops queued per path before -EAGAIN */
#define S3_SLAB_OPS 8u               /* ops allocated at once when a pool grows */
#define S3_URL_MAX 4608              /* endpoint + bucket + encoded 1 KiB key + query */
#define S3_HBUF 4096                 /* header text of one data op */
#define S3_NODES 24                  /* headers of one request */
#define S3_GEN_SLOTS 1024u           /* generation -> ETag table */
#define S3_EBODY 1024                /* error body kept for the S3 <Code> */
#define S3_META_BODY_MAX (4u << 20)  /* a metadata reply (upload id, sidecar, error) */
#define S3_META_TRIES 3              /* attempts of an idempotent metadata request */
#define S3_META_POOL 16              /* idle metadata easy handles kept */
#define S3_FORMAT "1"                /* x-amz-meta-railio-v */
#define S3_SIDECAR_SUFFIX ".railio-" /* KEY + this + upload id */
#define UPLOAD_MAGIC 0x733375706c6f6164ull
#define NS_PER_MS 1000000ull
#define NEVER UINT64_MAX
#define EV_WAKE UINT64_MAX

/* A stream's part records are allocated this many at once, as parts come. */
#define S3_PART_PAGE 64u
#define S3_PART_PAGES ((S3_MAX_PARTS + S3_PART_PAGE - 1) / S3_PART_PAGE)

enum { SCHEME_S3 = 0, SCHEME_HTTP, SCHEME_HTTPS };
enum { OP_FREE = 0, OP_PENDING, OP_ACTIVE, OP_DONE };
enum { UP_SINGLE = 1, UP_MULTI = 2 };
/* How a part's bytes are checked (knob content_md5). */
enum {
    MD5_OFF = 0,    /* not at all (TCP checksums only) */
    MD5_VERIFY = 1, /* MD5 computed as the part is sent, compared with its ETag */
    MD5_HEADER = 2, /* MD5 computed first and sent as Content-MD5 */
};

/* ------------------------------------------------------------ responses */

/* Header text and the curl_slist nodes over it, owned by the request: built
 * by hand so a data op sends headers without allocating. */
struct s3_hdrs {
    struct curl_slist node[S3_NODES];
    unsigned n;
    char *buf;
    size_t cap, used;
    struct rio_s3_kv sig[RIO_S3_MAX_SIGNED]; /* headers to sign (point into buf) */
    unsigned nsig;
    bool overflow;
};

/* ----------------------------------------------------------- transport */

struct s3_transport;

struct s3_op {
    struct s3_path *p;
    struct s3_op *next;  /* free list, pending list, done list */
    struct s3_op *cnext; /* cancel list */
    struct rio_io *io;
    CURL *e;
    EVP_MD_CTX *md;
    int state;               /* under t->mu while queued; reap thread once taken */
    _Atomic bool cancel_req; /* set by cancel (any thread), read by reap */
    bool on_clist;           /* under t->mu */
    bool checked;            /* response headers validated (first body byte) */
    bool md5_stream;         /* WRITE: md is an MD5 fed by op_read */
    char md5hex[33];         /* WRITE: MD5 of the part, "" if not computed */
    int err;                 /* an error a callback detected, or 0 */
    int64_t res;
    uint64_t got; /* READ: body bytes stored; WRITE: bytes sent */
    uint64_t svc_ns;
    struct s3_rsp rsp;
    char ebody[S3_EBODY];
    size_t elen;
    char errbuf[CURL_ERROR_SIZE];
    char url[S3_URL_MAX];
    struct s3_hdrs h;
    char hbuf[S3_HBUF];
};

struct s3_slab {
    struct s3_slab *next;
    struct s3_op ops[S3_SLAB_OPS];
};

struct s3_path {
    struct s3_transport *t;
    unsigned idx;
    CURLM *m;
    const char *iface; /* CURLOPT_INTERFACE, or NULL */
    uint64_t timer_at; /* reap thread: when curl wants socket_action(TIMEOUT) */
    /* under t->mu */
    unsigned held; /* ops submitted and not yet completed */
    struct s3_op *free_ops;
    struct s3_slab *slabs;
};

struct s3_gen {
    uint64_t gen;
    char etag[RIO_S3_ETAG_MAX];
    bool lastmod; /* the validator is a Last-Modified date (If-Unmodified-Since) */
};

struct s3_transport {
    struct rio_transport base; /* first: the engine's handle */
    int scheme;

    /* configuration, read once at open */
    char *endpoint; /* "http://127.0.0.1:7480" (no trailing '/') */
    char *host;     /* Host header value */
    char *bucket;   /* s3 only */
    char *prefix;   /* key prefix, "" or ending in '/' */
    char *access_key, *secret_key, *token, *region;
    char *rails_buf; /* the ?rails= list, cut in place */
    bool sign;
    bool discard;
    bool nt_copy;    /* non-temporal stores into the destination (knob nt_copy) */
    int content_md5; /* MD5_* */
    bool dns_shuffle;
    bool debug;
    long bufsize, upbufsize;
    int rcvbuf;
    long stall_s, min_speed;
    long connect_ms, op_timeout_ms;
    bool verify_off; /* verify=off: a multipart object without its sidecar is read unverified */
    uint64_t min_part;

    /* data ops */
    int epfd, evfd;
    struct s3_path path[RIO_MAX_PATHS];
    pthread_mutex_t mu;
    /* under mu */
    struct s3_op *pend_head, *pend_tail;
    struct s3_op *cancels;
    bool waiting; /* reap is (about to be) blocked in epoll_wait */
    bool woken;

    /* metadata handles, under meta_mu */
    pthread_mutex_t meta_mu;
    CURL *meta_pool[S3_META_POOL];
    unsigned nmeta;

    /* generation -> validator, under gen_mu */
    pthread_mutex_t gen_mu;
    struct s3_gen *gens;
};

struct s3_part {
    char etag[RIO_S3_ETAG_MAX];
    uint64_t xxh; /* what was sent */
    uint64_t len; /* bytes sent */
    bool ok;
};

struct s3_upload {
    uint64_t magic;
    int mode;
    char *key;
    uint64_t size, chunk, nparts;
    char id[17];
    char *upload_id;            /* UP_MULTI */
    struct s3_part *parts;      /* sized: nparts records (1 for UP_SINGLE) */
    char md5[33];               /* UP_SINGLE: MD5 of the one chunk sent */
    char etag[RIO_S3_ETAG_MAX]; /* UP_SINGLE: the ETag PutObject returned */
    /*
     * A stream (size RIO_SIZE_UNKNOWN until commit): size and nparts are set
     * by commit; the part records are S3_PART_PAGES pages, each allocated by
     * the first submit of one of its parts. Pages and hi are written under
     * t->mu by submit; a record is written by the reap thread that completes
     * its part (its page exists by then) and read by commit after the fence.
     */
    bool stream;
    struct s3_part **pages;
    uint64_t hi; /* 1 + the highest part index ever submitted */
};

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc;

static void curl_init_once(void)
{
    g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

/* ------------------------------------------------------------- helpers */

/* The record of part index (chunk index) i, or NULL for a stream part
 * whose page was never allocated (never submitted). */
static struct s3_part *part_at(struct s3_upload *up, uint64_t i)
{
    if (up->stream) {
        struct s3_part *pg = i < S3_MAX_PARTS ? up->pages[i / S3_PART_PAGE] : NULL;
        return pg ? &pg[i % S3_PART_PAGE] : NULL;
    }
    return &up->parts[up->mode == UP_SINGLE ? 0 : i];
}

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void random_id(char out[17])
{
    static _Atomic uint64_t ctr;
    uint64_t v = 0;
    uint8_t b[8];

    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
        v = rio__now_ns() ^ (uint64_t)getpid() << 32 ^
            atomic_fetch_add(&ctr, 1) * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    rio__s3_hex(b, 8, out);
}

/*
 * The generation of an object: a nonzero 64-bit hash (xxh3) of its validator.
 * For a strong ETag that is ETag + NUL + railio's upload id (empty for
 * objects railio did not write), so two railio PUTs of identical bytes are
 * still two generations; without an ETag it is the Last-Modified date, and
 * without either the size alone (then a change of content cannot be seen).
 */
static uint64_t gen_hash(const char *kind, const char *a, const char *b)
{
    char buf[RIO_S3_ETAG_MAX + 96];
    int n = snprintf(buf, sizeof(buf), "%s%c%s%c%s", kind, 0, a, 0, b ? b : "");
    uint64_t h;

    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(buf))
        n = (int)sizeof(buf) - 1;
    h = rio__xxh3(buf, (size_t)n);
    return h ? h : 1;
}

static bool etag_strong(const char *etag)
{
    return etag[0] && strncmp(etag, "W/", 2) != 0;
}

/* The generation and validator a response (HEAD or GET) describes. */
static uint64_t rsp_gen(const struct s3_rsp *r, uint64_t size, struct s3_gen *g)
{
    char sz[24];

    memset(g, 0, sizeof(*g));
    if (etag_strong(r->etag)) {
        g->gen = gen_hash("etag", r->etag, r->m_id);
        rio__s3_copy_str(g->etag, sizeof(g->etag), r->etag, strlen(r->etag));
    } else if (r->lastmod[0]) {
        g->gen = gen_hash("lastmod", r->lastmod, NULL);
        rio__s3_copy_str(g->etag, sizeof(g->etag), r->lastmod, strlen(r->lastmod));
        g->lastmod = true;
    } else {
        snprintf(sz, sizeof(sz), "%" PRIu64, size);
        g->gen = gen_hash("size", sz, NULL);
    }
    return g->gen;
}

static void gen_put(struct s3_transport *t, const struct s3_gen *g)
{
    if (!g->etag[0])
        return;
    pthread_mutex_lock(&t->gen_mu);
    t->gens[g->gen % S3_GEN_SLOTS] = *g;
    pthread_mutex_unlock(&t->gen_mu);
}

static bool gen_get(struct s3_transport *t, uint64_t gen, struct s3_gen *out)
{
    bool ok;

    pthread_mutex_lock(&t->gen_mu);
    *out = t->gens[gen % S3_GEN_SLOTS];
    pthread_mutex_unlock(&t->gen_mu);
    ok = out->gen == gen && out->etag[0];
    return ok;
}

/* ------------------------------------------------------ error mapping */

/*
 * A CURLcode as a railio error. Transfer failures that never carried an HTTP
 * status keep their own meaning: refused/unreachable from the socket's errno
 * when curl saw one, resolve failures as RIO_EDNS, stalls and timeouts as
 * ETIMEDOUT, a body cut short as RIO_ESHORT, a connection that died as
 * ECONNRESET. All of those retry; a bad URL, TLS verification or an unknown
 * failure do not.
 */
static int map_curl(CURLcode rc, long oserr, const struct s3_rsp *rsp)
{
    /* A response head over curl's limit (100 KiB; a hostile server's
     * endless header line) is the server's fault, not our memory: curl
     * before 8.6 fails it with CURLE_OUT_OF_MEMORY (and no message) once
     * the status line is in, later ones with CURLE_TOO_LARGE. */
    if (rc == CURLE_OUT_OF_MEMORY && rsp && rsp->status)
        return RIO_EPROTO;
#if LIBCURL_VERSION_NUM >= 0x080600
    if (rc == CURLE_TOO_LARGE)
        return RIO_EPROTO;
#endif
    switch (rc) {
    case CURLE_OK:
        return 0;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return RIO_EDNS;
    case CURLE_COULDNT_CONNECT:
        if (oserr == ENETUNREACH || oserr == EHOSTUNREACH || oserr == ENETDOWN ||
            oserr == EHOSTDOWN || oserr == ETIMEDOUT)
            return -(int)oserr;
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_PARTIAL_FILE:
        return RIO_ESHORT;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
        if (oserr == ETIMEDOUT || oserr == ENETUNREACH || oserr == EHOSTUNREACH || oserr == EPIPE ||
            oserr == ECONNABORTED)
            return -(int)oserr;
        return -ECONNRESET;
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_FAIL_REWIND:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return -ECONNRESET;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP_RETURNED_ERROR:
        return RIO_ESERVER;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return RIO_EURL;
    case CURLE_INTERFACE_FAILED:
        return -ENODEV;
    default:
        return RIO_EPROTO;
    }
}

/* --------------------------------------------------------- header callback */

/* curl's header callback: one line at a time (s3_parse.c reads it). */
static size_t on_header(char *p, size_t sz, size_t nmemb, void *arg)
{
    size_t len = sz * nmemb;
    rio__s3_rsp_header(arg, p, len);
    return len;
}

/* ---------------------------------------------------------- requests */

static void hdrs_init(struct s3_hdrs *h, char *buf, size_t cap)
{
    h->n = 0;
    h->buf = buf;
    h->cap = cap;
    h->used = 0;
    h->nsig = 0;
    h->overflow = false;
}

/* Add "name: value" (sent) and, when sign, (name, value) to the signed set. */
static void hdr_add(struct s3_hdrs *h, const char *name, const char *value, bool sign)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *s;

    /* curl does not send a header without a value: sign none either. */
    if (!vl && sign)
        return;

    if (h->n == S3_NODES || h->cap - h->used < nl + vl + 3 ||
        (sign && h->nsig == RIO_S3_MAX_SIGNED)) {
        h->overflow = true;
        return;
    }
    s = h->buf + h->used;
    memcpy(s, name, nl);
    s[nl] = ':';
    s[nl + 1] = ' ';
    memcpy(s + nl + 2, value, vl + 1);
    h->used += nl + vl + 3;
    h->node[h->n].data = s;
    h->node[h->n].next = NULL;
    if (h->n)
        h->node[h->n - 1].next = &h->node[h->n];
    h->n++;
    if (sign) {
        h->sig[h->nsig].k = name;
        h->sig[h->nsig].v = s + nl + 2;
        h->nsig++;
    }
}

static struct curl_slist *hdrs_list(struct s3_hdrs *h)
{
    return h->n ? &h->node[0] : NULL;
}

/*
 * Build the URL and headers of one request into url/h and sign it.
 * key NULL addresses the bucket. query: parameters (canonical form is what
 * goes on the wire). extra: headers to send and sign. payload: the
 * x-amz-content-sha256 value. Returns 0 or RIO_EINVAL (too long).
 */
static int req_build(struct s3_transport *t, EVP_MD_CTX *md, const char *method, const char *key,
                     const struct rio_s3_kv *query, unsigned nq, const struct rio_s3_kv *extra,
                     unsigned nx, const char *payload, char *url, size_t urlcap, struct s3_hdrs *h)
{
    char amzdate[17], auth[512 + 256], q[1024];
    size_t o, pl;
    ssize_t l;
    int w;

    w = snprintf(url, urlcap, "%s/", t->endpoint);
    if (w < 0 || (size_t)w >= urlcap)
        return RIO_EINVAL;
    o = (size_t)w;
    if (t->scheme == SCHEME_S3) {
        l = rio__s3_uri_encode(t->bucket, strlen(t->bucket), 0, url + o, urlcap - o);
        if (l < 0)
            return RIO_EINVAL;
        o += (size_t)l;
        if (key) {
            if (urlcap - o < 2)
                return RIO_EINVAL;
            url[o++] = '/';
        }
    }
    if (key) {
        pl = strlen(t->prefix);
        l = rio__s3_uri_encode(t->prefix, pl, 1, url + o, urlcap - o);
        if (l < 0)
            return RIO_EINVAL;
        o += (size_t)l;
        l = rio__s3_uri_encode(key, strlen(key), 1, url + o, urlcap - o);
        if (l < 0)
            return RIO_EINVAL;
        o += (size_t)l;
    }
    q[0] = '\0';
    if (nq) {
        l = rio__s3_canon_query(query, nq, q, sizeof(q));
        if (l < 0 || urlcap - o < (size_t)l + 2)
            return RIO_EINVAL;
        url[o++] = '?';
        memcpy(url + o, q, (size_t)l + 1);
    }

    hdr_add(h, "host", t->host, true);
    if (t->sign) {
        rio__s3_amzdate(time(NULL), amzdate);
        hdr_add(h, "x-amz-date", amzdate, true);
        hdr_add(h, "x-amz-content-sha256", payload, true);
        if (t->token)
            hdr_add(h, "x-amz-security-token", t->token, true);
    }
    for (unsigned i = 0; i < nx; i++)
        hdr_add(h, extra[i].k, extra[i].v, true);
    /* curl would add "Expect: 100-continue" to large uploads: a round trip
     * per part for nothing. */
    hdr_add(h, "expect", "", false);
    if (h->overflow)
        return RIO_EINVAL;
    if (t->sign) {
        /* The canonical URI is the path as sent: from the first '/' after
         * the scheme's "//", up to the query. */
        const char *path = strchr(strstr(url, "//") + 2, '/');
        char *qm = strchr(path, '?');
        char save = 0;
        int ret;

        if (qm) {
            save = *qm;
            *qm = '\0';
        }
        ret =
            rio__s3_sign(&(struct rio_s3_signer){t->access_key, t->secret_key, t->region, "s3"}, md,
                         method, path, q, h->sig, h->nsig, payload, amzdate, auth, sizeof(auth));
        if (qm)
            *qm = save;
        if (ret < 0)
            return RIO_EINVAL;
        hdr_add(h, "authorization", auth, false);
        if (h->overflow)
            return RIO_EINVAL;
    }
    return 0;
}

static void debug_log(struct s3_transport *t, const char *method, const char *url, long status,
                      const char *body, size_t blen, int err, const char *curlmsg)
{
    char code[64], msg[256];
    const char *q;
    int ul;

    if (!t->debug)
        return;
    rio__s3_xml_text(body, blen, "Code", code, sizeof(code));
    rio__s3_xml_text(body, blen, "Message", msg, sizeof(msg));
    q = strchr(url, '?');
    ul = q ? (int)(q - url) : (int)strlen(url);
    fprintf(stderr, "railio s3: %s %.*s%s -> %ld %s%s%s%s%s (%s)\n", method, ul, url,
            q ? "?..." : "", status, code, msg[0] ? ": " : "", msg,
            curlmsg && curlmsg[0] ? " curl: " : "", curlmsg ? curlmsg : "", rio_errname(err));
}

/* ---------------------------------------------------- curl handle setup */

static int sockopt_cb(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    struct s3_transport *t = arg;

    if (purpose == CURLSOCKTYPE_IPCXN && t->rcvbuf > 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &t->rcvbuf, sizeof(t->rcvbuf));
    return CURL_SOCKOPT_OK;
}

/* Options every handle gets (data and metadata). */
static void easy_common(struct s3_transport *t, CURL *e, const char *iface)
{
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, t->connect_ms);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, t->min_speed);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, t->stall_s);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 5L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 2L);
    if (t->bufsize)
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, t->bufsize);
    if (t->upbufsize)
        curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, t->upbufsize);
    if (t->rcvbuf > 0) {
        curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
        curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, t);
    }
    if (t->dns_shuffle)
        curl_easy_setopt(e, CURLOPT_DNS_SHUFFLE_ADDRESSES, 1L);
    if (iface)
        curl_easy_setopt(e, CURLOPT_INTERFACE, iface);
}

/* ------------------------------------------------------------ data ops */

static size_t op_body(char *p, size_t sz, size_t nmemb, void *arg);
static size_t op_read(char *p, size_t sz, size_t nmemb, void *arg);
static int op_seek(void *arg, curl_off_t off, int origin);

static int op_create(struct s3_path *p, struct s3_op *op)
{
    op->p = p;
    op->e = curl_easy_init();
    op->md = EVP_MD_CTX_new();
    if (!op->e || !op->md) {
        curl_easy_cleanup(op->e);
        EVP_MD_CTX_free(op->md);
        op->e = NULL;
        op->md = NULL;
        return -ENOMEM;
    }
    easy_common(p->t, op->e, p->iface);
    curl_easy_setopt(op->e, CURLOPT_PRIVATE, op);
    curl_easy_setopt(op->e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(op->e, CURLOPT_HEADERDATA, &op->rsp);
    curl_easy_setopt(op->e, CURLOPT_WRITEFUNCTION, op_body);
    curl_easy_setopt(op->e, CURLOPT_WRITEDATA, op);
    curl_easy_setopt(op->e, CURLOPT_READFUNCTION, op_read);
    curl_easy_setopt(op->e, CURLOPT_READDATA, op);
    curl_easy_setopt(op->e, CURLOPT_SEEKFUNCTION, op_seek);
    curl_easy_setopt(op->e, CURLOPT_SEEKDATA, op);
    curl_easy_setopt(op->e, CURLOPT_ERRORBUFFER, op->errbuf);
    if (p->t->op_timeout_ms)
        curl_easy_setopt(op->e, CURLOPT_TIMEOUT_MS, p->t->op_timeout_ms + 5000L);
    return 0;
}

static void op_destroy(struct s3_op *op)
{
    curl_easy_cleanup(op->e);
    EVP_MD_CTX_free(op->md);
    op->e = NULL;
    op->md = NULL;
}

static int pool_grow_locked(struct s3_path *p)
{
    struct s3_slab *s = rio__calloc(1, sizeof(*s));
    unsigned i;

    if (!s)
        return -ENOMEM;
    for (i = 0; i < S3_SLAB_OPS; i++) {
        if (op_create(p, &s->ops[i]) < 0) {
            while (i--)
                op_destroy(&s->ops[i]);
            rio__free(s);
            return -ENOMEM;
        }
    }
    s->next = p->slabs;
    p->slabs = s;
    for (i = 0; i < S3_SLAB_OPS; i++) {
        s->ops[i].next = p->free_ops;
        p->free_ops = &s->ops[i];
    }
    return 0;
}

/*
 * Check a READ response before its first body byte is stored (or at the end
 * when there is no body): the range and the object must be the ones asked
 * for. A 206 with a missing or wrong Content-Range, a Content-Length that is
 * not the chunk's, or a 200 for a range that is not the whole object are
 * server faults (RIO_ESERVER: retried); another generation is
 * RIO_EGENERATION (never stitched).
 */
static int check_read_rsp(struct s3_op *op)
{
    struct rio_io *io = op->io;
    struct s3_rsp *r = &op->rsp;
    struct s3_gen g;

    if (r->status == 206) {
        if (!r->have_crange || r->cr_first != io->off || r->cr_last - r->cr_first + 1 != io->len)
            return RIO_ESERVER;
        if (r->have_clen && r->clen != io->len)
            return RIO_ESERVER;
    } else if (r->status == 200) {
        /* The whole object instead of a range: right only if the range was
         * the whole object. */
        if (io->off != 0 || !r->have_clen || r->clen != io->len)
            return RIO_ESERVER;
    } else {
        return RIO_ESERVER;
    }
    if (io->generation) {
        uint64_t size = r->status == 206 ? r->cr_total : r->clen;
        if (rsp_gen(r, size, &g) != io->generation)
            return RIO_EGENERATION;
    }
    return 0;
}

static size_t op_body(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct s3_op *op = arg;
    struct rio_io *io = op->io;
    size_t n = sz * nmemb;

    if (op->rsp.status < 200 || op->rsp.status >= 300 || io->kind != RIO_IO_READ) {
        /* An error body (kept for the <Code>) or a WRITE's reply. */
        size_t room = sizeof(op->ebody) - 1 - op->elen;
        size_t k = n < room ? n : room;
        memcpy(op->ebody + op->elen, p, k);
        op->elen += k;
        op->ebody[op->elen] = '\0';
        return n;
    }
    if (!op->checked) {
        op->checked = true;
        op->err = check_read_rsp(op);
        if (op->err)
            return 0; /* CURLE_WRITE_ERROR: nothing stored */
    }
    /* Never past the chunk: more bytes than asked is a server fault. */
    if (n > io->len - op->got) {
        op->err = RIO_ESERVER;
        return 0;
    }
    if (op->p->t->discard)
        ; /* counted, not stored */
    else if (op->p->t->nt_copy)
        rio__copy_nt((uint8_t *)io->dst + op->got, p, n);
    else
        memcpy((uint8_t *)io->dst + op->got, p, n);
    op->got += n;
    return n;
}

static size_t op_read(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct s3_op *op = arg;
    struct rio_io *io = op->io;
    size_t n = sz * nmemb;
    uint64_t left = io->len - op->got;

    if (n > left)
        n = (size_t)left;
    memcpy(p, (const uint8_t *)io->src + op->got, n);
    if (op->md5_stream && EVP_DigestUpdate(op->md, p, n) != 1)
        return CURL_READFUNC_ABORT;
    op->got += n;
    return n;
}

/* curl sends a request again by itself when a reused connection turns out
 * dead; for an upload it rewinds the body first. */
static int op_seek(void *arg, curl_off_t off, int origin)
{
    struct s3_op *op = arg;

    if (origin != SEEK_SET || off < 0 || (uint64_t)off > op->io->len)
        return CURL_SEEKFUNC_FAIL;
    if (op->md5_stream) {
        /* The running MD5 can only start over. */
        if (off != 0 || EVP_DigestInit_ex(op->md, EVP_md5(), NULL) != 1)
            return CURL_SEEKFUNC_FAIL;
    }
    op->got = (uint64_t)off;
    return CURL_SEEKFUNC_OK;
}

/* MD5 of a chunk: hex (for the metadata) and base64 (Content-MD5). */
static int md5_of(EVP_MD_CTX *md, const void *p, size_t n, char hex[33], char b64[25])
{
    uint8_t d[16];
    unsigned len = 0;

    if (EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1 || EVP_DigestUpdate(md, p, n) != 1 ||
        EVP_DigestFinal_ex(md, d, &len) != 1 || len != 16)
        return -ENOMEM;
    if (hex)
        rio__s3_hex(d, 16, hex);
    if (b64)
        rio__s3_base64(d, 16, b64);
    return 0;
}

/* Set an op's request up on its easy handle (reap thread, no lock held). */
static int op_prepare(struct s3_transport *t, struct s3_op *op)
{
    struct rio_io *io = op->io;
    struct s3_upload *up = io->upload;
    struct rio_s3_kv x[10];
    unsigned nx = 0;
    char range[64], md5hex[33], md5b64[25], xxh[17], chunk[24], size[24], pnum[16];
    struct s3_gen g;
    int ret;

    op->checked = false;
    op->md5_stream = false;
    op->md5hex[0] = '\0';
    op->err = 0;
    op->res = 0;
    op->got = 0;
    op->svc_ns = 0;
    op->elen = 0;
    op->ebody[0] = '\0';
    op->errbuf[0] = '\0';
    rio__s3_rsp_reset(&op->rsp);
    hdrs_init(&op->h, op->hbuf, sizeof(op->hbuf));

    if (io->kind == RIO_IO_READ) {
        snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, io->off,
                 io->off + io->len - 1);
        x[nx++] = (struct rio_s3_kv){"range", range};
        if (io->generation && gen_get(t, io->generation, &g))
            x[nx++] = (struct rio_s3_kv){g.lastmod ? "if-unmodified-since" : "if-match", g.etag};
        ret = req_build(t, op->md, "GET", io->key, NULL, 0, x, nx, RIO_S3_EMPTY_SHA256, op->url,
                        sizeof(op->url), &op->h);
        if (ret < 0)
            return ret;
        curl_easy_setopt(op->e, CURLOPT_HTTPGET, 1L);
    } else {
        struct rio_s3_kv q[2];
        unsigned nq = 0;

        if (t->content_md5 == MD5_HEADER) {
            ret = md5_of(op->md, io->src, (size_t)io->len, md5hex, md5b64);
            if (ret < 0)
                return ret;
            x[nx++] = (struct rio_s3_kv){"content-md5", md5b64};
            memcpy(op->md5hex, md5hex, sizeof(md5hex));
        }
        if (up->mode == UP_SINGLE) {
            snprintf(xxh, sizeof(xxh), "%016" PRIx64, io->xxh);
            snprintf(chunk, sizeof(chunk), "%" PRIu64, up->chunk);
            snprintf(size, sizeof(size), "%" PRIu64, up->size);
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-v", S3_FORMAT};
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-id", up->id};
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-chunk", chunk};
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-size", size};
            /* Known before the body only with Content-MD5; otherwise the
             * object's ETag is its MD5 (one PutObject). */
            if (op->md5hex[0])
                x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-md5", op->md5hex};
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-xxh", xxh};
        } else {
            snprintf(pnum, sizeof(pnum), "%" PRIu64, io->index + 1);
            q[nq++] = (struct rio_s3_kv){"partNumber", pnum};
            q[nq++] = (struct rio_s3_kv){"uploadId", up->upload_id};
        }
        ret = req_build(t, op->md, "PUT", io->key, q, nq, x, nx, RIO_S3_UNSIGNED, op->url,
                        sizeof(op->url), &op->h);
        if (ret < 0)
            return ret;
        /* After signing, which used md for SHA-256. */
        if (t->content_md5 == MD5_VERIFY) {
            if (EVP_DigestInit_ex(op->md, EVP_md5(), NULL) != 1)
                return -ENOMEM;
            op->md5_stream = true;
        }
        curl_easy_setopt(op->e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(op->e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)io->len);
    }
    curl_easy_setopt(op->e, CURLOPT_URL, op->url);
    curl_easy_setopt(op->e, CURLOPT_HTTPHEADER, hdrs_list(&op->h));
    return 0;
}

/* Outcome of a finished transfer (reap thread). */
static int64_t op_result(struct s3_transport *t, struct s3_op *op, CURLcode rc)
{
    struct rio_io *io = op->io;
    struct s3_rsp *r = &op->rsp;
    long oserr = 0;
    char code[64];
    int err;

    if (op->err) {
        err = op->err;
        goto fail;
    }
    if (r->status >= 300 || (r->status && r->status < 200)) {
        rio__s3_xml_text(op->ebody, op->elen, "Code", code, sizeof(code));
        err = rio__s3_map_http(r->status, code);
        if (!err)
            err = RIO_EPROTO;
        goto fail;
    }
    if (rc != CURLE_OK) {
        curl_easy_getinfo(op->e, CURLINFO_OS_ERRNO, &oserr);
        err = map_curl(rc, oserr, &op->rsp);
        goto fail;
    }
    if (io->kind == RIO_IO_READ) {
        if (!op->checked) {
            op->checked = true;
            err = check_read_rsp(op);
            if (err)
                goto fail;
        }
        if (op->got != io->len) {
            err = RIO_ESHORT;
            goto fail;
        }
        curl_off_t pre = 0, start = 0;
        if (curl_easy_getinfo(op->e, CURLINFO_PRETRANSFER_TIME_T, &pre) == CURLE_OK &&
            curl_easy_getinfo(op->e, CURLINFO_STARTTRANSFER_TIME_T, &start) == CURLE_OK &&
            start > pre)
            op->svc_ns = (uint64_t)(start - pre) * 1000ull;
        return (int64_t)io->len;
    } else {
        struct s3_upload *up = io->upload;
        struct s3_part *part = part_at(up, io->index); /* exists: checked at submit */

        if (r->status != 200 || op->got != io->len) {
            err = op->got != io->len ? RIO_ESHORT : RIO_ESERVER;
            goto fail;
        }
        if (!r->etag[0]) {
            err = RIO_EPROTO; /* a part without an ETag cannot be completed */
            goto fail;
        }
        if (op->md5_stream) {
            uint8_t d[16];
            unsigned dl = 0;
            if (EVP_DigestFinal_ex(op->md, d, &dl) != 1 || dl != 16) {
                err = -ENOMEM;
                goto fail;
            }
            rio__s3_hex(d, 16, op->md5hex);
        }
        /* The server's MD5 of what it stored (a plain ETag) must be ours. */
        if (op->md5hex[0] && strlen(r->etag) == 34 && rio__s3_is_hex(r->etag + 1, 32) &&
            strncasecmp(r->etag + 1, op->md5hex, 32) != 0) {
            err = RIO_ECHECKSUM;
            goto fail;
        }
        rio__s3_copy_str(part->etag, sizeof(part->etag), r->etag, strlen(r->etag));
        if (up->mode == UP_SINGLE) {
            rio__s3_copy_str(up->etag, sizeof(up->etag), r->etag, strlen(r->etag));
            memcpy(up->md5, op->md5hex, sizeof(up->md5));
        }
        part->xxh = io->xxh;
        part->len = io->len;
        part->ok = true;
        return (int64_t)io->len;
    }
fail:
    debug_log(t, io->kind == RIO_IO_READ ? "GET" : "PUT", op->url, r->status, op->ebody, op->elen,
              err, op->errbuf);
    return err;
}

/* --- curl multi callbacks: sockets into epoll, timers into the path --- */

static int sock_cb(CURL *e, curl_socket_t fd, int what, void *userp, void *socketp)
{
    struct s3_path *p = userp;
    struct epoll_event ev;

    (void)e;
    (void)socketp;
    if (what == CURL_POLL_REMOVE) {
        epoll_ctl(p->t->epfd, EPOLL_CTL_DEL, fd, NULL);
        return 0;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = (what & CURL_POLL_IN ? EPOLLIN : 0) | (what & CURL_POLL_OUT ? EPOLLOUT : 0);
    ev.data.u64 = (uint64_t)p->idx << 32 | (uint32_t)fd;
    if (epoll_ctl(p->t->epfd, EPOLL_CTL_MOD, fd, &ev) < 0 && errno == ENOENT)
        epoll_ctl(p->t->epfd, EPOLL_CTL_ADD, fd, &ev);
    return 0;
}

static int timer_cb(CURLM *m, long timeout_ms, void *userp)
{
    struct s3_path *p = userp;

    (void)m;
    p->timer_at = timeout_ms < 0 ? NEVER : rio__now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
    return 0;
}

/* ------------------------------------------------- submit, cancel, reap */

static void wake_fd(struct s3_transport *t)
{
    uint64_t one = 1;
    ssize_t r = write(t->evfd, &one, sizeof(one));
    (void)r;
}

static int s3_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up = NULL;
    struct s3_path *p;
    struct s3_op *op;
    bool kick;

    if (!io || io->path >= t->base.npaths || !io->complete || io->len == 0 || !io->key)
        return -EINVAL;
    if (io->kind == RIO_IO_READ) {
        if (!io->dst && !t->discard)
            return -EINVAL;
    } else if (io->kind == RIO_IO_WRITE) {
        up = io->upload;
        if (t->scheme != SCHEME_S3)
            return RIO_ENOTSUP;
        if (!up || up->magic != UPLOAD_MAGIC || !io->src)
            return -EINVAL;
        if (up->stream) {
            /* Part index + 1 of a whole chunk, or of the short last one. */
            if (io->index >= S3_MAX_PARTS || io->len > up->chunk ||
                io->index > UINT64_MAX / up->chunk || io->off != io->index * up->chunk)
                return -EINVAL;
        } else if ((up->mode == UP_MULTI && io->index >= up->nparts) ||
                   (up->mode == UP_SINGLE && io->index != 0) || io->off > up->size ||
                   io->len > up->size - io->off) {
            return -EINVAL;
        }
    } else {
        return -EINVAL;
    }
    p = &t->path[io->path];
    pthread_mutex_lock(&t->mu);
    if (p->held >= S3_DEPTH_CAP) {
        pthread_mutex_unlock(&t->mu);
        return -EAGAIN;
    }
    if (up && up->stream) {
        struct s3_part **pg = &up->pages[io->index / S3_PART_PAGE];
        if (!*pg && !(*pg = rio__calloc(S3_PART_PAGE, sizeof(**pg)))) {
            pthread_mutex_unlock(&t->mu);
            return -ENOMEM;
        }
        if (io->index >= up->hi)
            up->hi = io->index + 1;
    }
    if (!p->free_ops && pool_grow_locked(p) < 0) {
        pthread_mutex_unlock(&t->mu);
        return -ENOMEM;
    }
    op = p->free_ops;
    p->free_ops = op->next;
    op->next = NULL;
    op->io = io;
    op->state = OP_PENDING;
    op->cancel_req = false;
    op->on_clist = false;
    io->tpriv = op;
    if (t->pend_tail)
        t->pend_tail->next = op;
    else
        t->pend_head = op;
    t->pend_tail = op;
    p->held++;
    kick = t->waiting;
    pthread_mutex_unlock(&t->mu);
    if (kick)
        wake_fd(t);
    return 0;
}

static void s3_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_op *op;
    bool kick = false;

    pthread_mutex_lock(&t->mu);
    /* tpriv is cleared under mu when the op is settled: an op found here
     * has not completed yet (reap tells pending from active). */
    op = io ? io->tpriv : NULL;
    if (op && op->io == io && !op->cancel_req) {
        op->cancel_req = true;
        op->on_clist = true;
        op->cnext = t->cancels;
        t->cancels = op;
        kick = true;
    }
    pthread_mutex_unlock(&t->mu);
    if (kick)
        wake_fd(t);
}

static void s3_wake(struct rio_transport *tt)
{
    struct s3_transport *t = (struct s3_transport *)tt;

    pthread_mutex_lock(&t->mu);
    t->woken = true;
    pthread_mutex_unlock(&t->mu);
    wake_fd(t);
}

static void done_push(struct s3_op ***tail, struct s3_op *op, int64_t res)
{
    op->res = res;
    op->state = OP_DONE;
    op->next = NULL;
    **tail = op;
    *tail = &op->next;
}

/* Collect every finished transfer of path p onto the done list. */
static void drain_path(struct s3_transport *t, struct s3_path *p, struct s3_op ***tail)
{
    CURLMsg *msg;
    int left;

    while ((msg = curl_multi_info_read(p->m, &left))) {
        struct s3_op *op = NULL;
        if (msg->msg != CURLMSG_DONE)
            continue;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, (char **)&op);
        CURLcode rc = msg->data.result;
        curl_multi_remove_handle(p->m, msg->easy_handle);
        int64_t res = op_result(t, op, rc);
        done_push(tail, op, res);
    }
}

static void run_timers(struct s3_transport *t, struct s3_op ***tail)
{
    uint64_t now = rio__now_ns();
    int running;

    for (unsigned i = 0; i < t->base.npaths; i++) {
        struct s3_path *p = &t->path[i];
        if (p->timer_at <= now) {
            p->timer_at = NEVER;
            curl_multi_socket_action(p->m, CURL_SOCKET_TIMEOUT, 0, &running);
            drain_path(t, p, tail);
        }
    }
}

/*
 * Settle finished ops and call their completions: results out, tpriv
 * cleared and the op taken off any cancel list under the lock (so a late
 * cancel finds nothing), then complete() with no lock held, then the ops go
 * back to their pools.
 */
static int settle(struct s3_transport *t, struct s3_op *list)
{
    struct s3_op *op, *next;
    int n = 0;

    if (!list)
        return 0;
    pthread_mutex_lock(&t->mu);
    for (op = list; op; op = op->next) {
        struct rio_io *io = op->io;
        io->res = op->res;
        io->svc_ns = op->svc_ns;
        io->tpriv = NULL;
        op->p->held--;
        if (op->on_clist) {
            struct s3_op **pp = &t->cancels;
            while (*pp && *pp != op)
                pp = &(*pp)->cnext;
            if (*pp)
                *pp = op->cnext;
            op->on_clist = false;
        }
    }
    pthread_mutex_unlock(&t->mu);
    for (op = list; op; op = op->next) {
        op->io->complete(op->io);
        n++;
    }
    pthread_mutex_lock(&t->mu);
    for (op = list; op; op = next) {
        next = op->next;
        op->io = NULL;
        op->state = OP_FREE;
        op->next = op->p->free_ops;
        op->p->free_ops = op;
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

static int s3_reap(struct rio_transport *tt, int timeout_ms)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    uint64_t deadline = timeout_ms < 0    ? NEVER
                        : timeout_ms == 0 ? 0
                                          : rio__now_ns() + (uint64_t)timeout_ms * NS_PER_MS;
    struct s3_op *done = NULL, **tail = &done;
    struct epoll_event evs[64];
    bool last = false;

    for (;;) {
        struct s3_op *pend, *canc, *op;
        bool woken;
        int running;

        pthread_mutex_lock(&t->mu);
        pend = t->pend_head;
        t->pend_head = t->pend_tail = NULL;
        canc = t->cancels;
        /* Cancelled ops stay marked (on_clist) until settled. */
        for (op = canc; op; op = op->cnext)
            op->on_clist = false;
        t->cancels = NULL;
        woken = t->woken;
        t->woken = false;
        pthread_mutex_unlock(&t->mu);

        for (op = canc; op; op = op->cnext) {
            if (op->state == OP_ACTIVE) {
                curl_multi_remove_handle(op->p->m, op->e);
                done_push(&tail, op, -ECANCELED);
            }
            /* OP_PENDING ones are still on pend below; OP_DONE ones finished. */
        }
        while (pend) {
            op = pend;
            pend = op->next;
            op->next = NULL;
            if (op->cancel_req) {
                done_push(&tail, op, -ECANCELED);
                continue;
            }
            int ret = op_prepare(t, op);
            if (ret == 0 && curl_multi_add_handle(op->p->m, op->e) != CURLM_OK)
                ret = -ENOMEM;
            if (ret < 0) {
                done_push(&tail, op, ret);
                continue;
            }
            op->state = OP_ACTIVE;
        }
        run_timers(t, &tail);

        if (done || woken || last)
            break;
        /* Poll once more after the deadline (timeout 0 polls once), then go. */
        uint64_t now = rio__now_ns();
        uint64_t until = deadline;
        for (unsigned i = 0; i < t->base.npaths; i++)
            if (t->path[i].timer_at < until)
                until = t->path[i].timer_at;
        if (now >= deadline)
            last = true;
        int wait_ms = until == NEVER ? -1
                      : until <= now ? 0
                                     : (int)((until - now + NS_PER_MS - 1) / NS_PER_MS);

        pthread_mutex_lock(&t->mu);
        t->waiting = true;
        bool more = t->pend_head || t->cancels || t->woken;
        pthread_mutex_unlock(&t->mu);
        int nev = more ? 0 : epoll_wait(t->epfd, evs, 64, wait_ms);
        pthread_mutex_lock(&t->mu);
        t->waiting = false;
        pthread_mutex_unlock(&t->mu);

        for (int i = 0; i < nev; i++) {
            uint64_t d = evs[i].data.u64;
            if (d == EV_WAKE) {
                uint64_t v;
                ssize_t r = read(t->evfd, &v, sizeof(v));
                (void)r;
                continue;
            }
            struct s3_path *p = &t->path[d >> 32];
            int fd = (int)(uint32_t)d;
            int flags = (evs[i].events & EPOLLIN ? CURL_CSELECT_IN : 0) |
                        (evs[i].events & EPOLLOUT ? CURL_CSELECT_OUT : 0) |
                        (evs[i].events & (EPOLLERR | EPOLLHUP) ? CURL_CSELECT_ERR : 0);
            curl_multi_socket_action(p->m, fd, flags, &running);
            drain_path(t, p, &tail);
        }
        if (deadline != NEVER && rio__now_ns() >= deadline)
            last = true;
    }
    return settle(t, done);
}

/* ----------------------------------------------------- metadata requests */

/* A metadata reply's body. Small replies (an upload id, an error, a
 * complete's answer) stay in the inline buffer, so a reply that says an
 * upload exists can always be read: only a sidecar needs the heap. */
struct meta_body {
    char *p; /* fixed, or a rio__malloc block when heap */
    size_t len, cap, max;
    bool heap;
    bool overflow; /* longer than max */
    bool nomem;    /* the buffer could not grow */
    char fixed[8192];
};

struct meta_src {
    const char *p;
    size_t len, off;
};

static size_t meta_write(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct meta_body *b = arg;
    size_t n = sz * nmemb;

    if (n > b->max - b->len) {
        b->overflow = true;
        return 0;
    }
    if (!b->p) {
        b->p = b->fixed;
        b->cap = sizeof(b->fixed);
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap * 2;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = b->heap ? rio__realloc(b->p, cap) : rio__malloc(cap);
        if (!q) {
            b->nomem = true;
            return 0;
        }
        if (!b->heap)
            memcpy(q, b->p, b->len);
        b->p = q;
        b->cap = cap;
        b->heap = true;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

static size_t meta_read(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct meta_src *s = arg;
    size_t n = sz * nmemb;

    if (n > s->len - s->off)
        n = s->len - s->off;
    memcpy(p, s->p + s->off, n);
    s->off += n;
    return n;
}

static int meta_seek(void *arg, curl_off_t off, int origin)
{
    struct meta_src *s = arg;

    if (origin != SEEK_SET || off < 0 || (uint64_t)off > s->len)
        return CURL_SEEKFUNC_FAIL;
    s->off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

static CURL *meta_get(struct s3_transport *t)
{
    CURL *e = NULL;

    pthread_mutex_lock(&t->meta_mu);
    if (t->nmeta)
        e = t->meta_pool[--t->nmeta];
    pthread_mutex_unlock(&t->meta_mu);
    return e ? e : curl_easy_init();
}

static void meta_put(struct s3_transport *t, CURL *e)
{
    pthread_mutex_lock(&t->meta_mu);
    if (t->nmeta < S3_META_POOL) {
        t->meta_pool[t->nmeta++] = e;
        e = NULL;
    }
    pthread_mutex_unlock(&t->meta_mu);
    curl_easy_cleanup(e);
}

/* One metadata request. */
struct meta_req {
    const char *method; /* HEAD GET PUT POST DELETE */
    const char *key;    /* NULL: the bucket */
    struct rio_s3_kv q[4];
    unsigned nq;
    struct rio_s3_kv x[12]; /* extra signed headers */
    unsigned nx;
    const void *body; /* PUT/POST */
    size_t blen;
    bool retry; /* idempotent: retry retryable failures */
};

struct meta_rsp {
    struct s3_rsp rsp;
    struct meta_body body;
    int err; /* 0, or the request's error */
};

static void meta_rsp_cleanup(struct meta_rsp *r)
{
    if (r->body.heap)
        rio__free(r->body.p);
    r->body.p = NULL;
    r->body.len = r->body.cap = r->body.max = 0;
    r->body.heap = r->body.overflow = r->body.nomem = false;
}

static int meta_once(struct s3_transport *t, EVP_MD_CTX *md, const struct meta_req *q,
                     struct meta_rsp *r)
{
    char url[S3_URL_MAX], hbuf[8192], payload[65], errbuf[CURL_ERROR_SIZE], code[64];
    struct s3_hdrs h;
    struct meta_src src = {q->body, q->blen, 0};
    long oserr = 0;
    CURLcode rc;
    CURL *e;
    int ret;

    meta_rsp_cleanup(r);
    rio__s3_rsp_reset(&r->rsp);
    r->body.max = S3_META_BODY_MAX;
    r->err = 0;
    if (q->body && q->blen) {
        uint8_t d[32];
        unsigned dl = 0;
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
            EVP_DigestUpdate(md, q->body, q->blen) != 1 || EVP_DigestFinal_ex(md, d, &dl) != 1)
            return -ENOMEM;
        rio__s3_hex(d, 32, payload);
    } else {
        memcpy(payload, RIO_S3_EMPTY_SHA256, sizeof(payload));
    }
    hdrs_init(&h, hbuf, sizeof(hbuf));
    ret = req_build(t, md, q->method, q->key, q->q, q->nq, q->x, q->nx, payload, url, sizeof(url),
                    &h);
    if (ret < 0)
        return ret;
    e = meta_get(t);
    if (!e)
        return -ENOMEM;
    curl_easy_reset(e);
    easy_common(t, e, t->path[0].iface);
    errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, hdrs_list(&h));
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &r->rsp);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, meta_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r->body);
    if (t->op_timeout_ms)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, t->op_timeout_ms);
    if (!strcmp(q->method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(q->method, "PUT")) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, meta_read);
        curl_easy_setopt(e, CURLOPT_READDATA, &src);
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, meta_seek);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, &src);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->blen);
    } else if (!strcmp(q->method, "POST")) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->body ? (const char *)q->body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->blen);
    } else if (!strcmp(q->method, "DELETE")) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    rc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &oserr);
    meta_put(t, e);

    if (r->rsp.status >= 300 || (r->rsp.status && r->rsp.status < 200)) {
        rio__s3_xml_text(r->body.p, r->body.len, "Code", code, sizeof(code));
        r->err = rio__s3_map_http(r->rsp.status, code);
        if (!r->err)
            r->err = RIO_EPROTO;
    } else if (rc != CURLE_OK) {
        r->err = r->body.nomem      ? -ENOMEM
                 : r->body.overflow ? RIO_EPROTO
                                    : map_curl(rc, oserr, &r->rsp);
    } else if (r->rsp.status == 200 && r->body.p && !strcmp(q->method, "POST") &&
               memmem(r->body.p, r->body.len, "<Error>", 7)) {
        /* S3 may answer CompleteMultipartUpload 200 and fail in the body. */
        rio__s3_xml_text(r->body.p, r->body.len, "Code", code, sizeof(code));
        r->err = rio__s3_map_http(500, code);
    }
    /* A 404 is an answer, not a trouble worth a log line. */
    if (r->err && !(r->rsp.status == 404 && !strcmp(q->method, "HEAD")))
        debug_log(t, q->method, url, r->rsp.status, r->body.p, r->body.len, r->err, errbuf);
    return r->err;
}

static bool err_retryable(int err)
{
    switch (err) {
    case -ECONNRESET:
    case -ECONNREFUSED:
    case -ECONNABORTED:
    case -EPIPE:
    case -ETIMEDOUT:
    case -ENETUNREACH:
    case -EHOSTUNREACH:
    case RIO_EDNS:
    case RIO_ESHORT:
    case RIO_ESERVER:
    case RIO_ETHROTTLE:
    case RIO_ECHECKSUM: /* BadDigest: damaged in flight, send it again */
        return true;
    default:
        return false;
    }
}

/* A metadata request, retried with backoff when idempotent. r must start
 * zeroed (or hold a previous reply, which is freed); the caller cleans it up. */
static int meta_do(struct s3_transport *t, const struct meta_req *q, struct meta_rsp *r)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ret = -ENOMEM;

    if (!md)
        return -ENOMEM;
    for (int i = 0; i < S3_META_TRIES; i++) {
        ret = meta_once(t, md, q, r);
        if (ret == 0 || !q->retry || !err_retryable(ret) || i + 1 == S3_META_TRIES)
            break;
        sleep_ms(20u << i);
    }
    EVP_MD_CTX_free(md);
    return ret;
}

/* ------------------------------------------------------------- lookup */

static int sidecar_key(const char *key, const char *id, char *out, size_t cap)
{
    int w = snprintf(out, cap, "%s%s%s", key, S3_SIDECAR_SUFFIX, id);
    return w < 0 || (size_t)w >= cap || (size_t)w > RIO_KEY_MAX ? RIO_EINVAL : 0;
}

/* A size and chunk the engine accepts (core/desc.c): only then can a chunk
 * checksum list be missing rather than the whole descriptor wrong. */
static bool sane_geometry(uint64_t size, uint64_t chunk)
{
    return size <= (uint64_t)INT64_MAX && chunk >= RIO__DESC_CHUNK_MIN &&
           chunk <= RIO__DESC_CHUNK_MAX && rio__s3_nchunks(size, chunk) <= RIO__DESC_CHUNKS_MAX;
}

static int s3_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct meta_rsp r = {0}, sr = {0};
    uint64_t size = 0, chunk = 0, xsize;
    uint64_t *xxh = NULL;
    bool streamed;
    char md5[33] = "", skey[RIO_KEY_MAX + 1];
    struct s3_gen g;
    size_t klen;
    int ret = 0;

    if (!out || rio__key_len(key, &klen) < 0)
        return RIO_EINVAL;
    for (int attempt = 0; attempt < 3; attempt++) {
        struct meta_req q = {.method = "HEAD", .key = key, .retry = true};

        rio__free(xxh);
        xxh = NULL;
        md5[0] = '\0';
        chunk = 0;
        ret = meta_do(t, &q, &r);
        if (ret < 0)
            goto out;
        if (!r.rsp.have_clen) {
            ret = RIO_EPROTO;
            goto out;
        }
        size = r.rsp.clen;
        rsp_gen(&r.rsp, size, &g);
        /* A streamed multipart object has no size in its metadata (it was
         * unknown when the upload began): its sidecar checks the size. */
        streamed = !r.rsp.m_size[0] && !strcmp(r.rsp.m_sidecar, "1");
        if (strcmp(r.rsp.m_v, S3_FORMAT) != 0 || !r.rsp.m_id[0] ||
            rio__s3_parse_u64(r.rsp.m_chunk, &chunk) < 0 || chunk == 0 ||
            (!streamed && (rio__s3_parse_u64(r.rsp.m_size, &xsize) < 0 || xsize != size))) {
            /* Not written by railio (or not in a format we know). */
            chunk = 0;
            if (strlen(r.rsp.etag) == 34 && rio__s3_is_hex(r.rsp.etag + 1, 32)) {
                for (int i = 0; i < 32; i++)
                    md5[i] = (char)tolower((unsigned char)r.rsp.etag[1 + i]);
                md5[32] = '\0';
            }
            break;
        }
        if (strcmp(r.rsp.m_sidecar, "1") != 0) {
            ret = rio__s3_parse_xxh_list(r.rsp.m_xxh, rio__s3_nchunks(size, chunk), &xxh);
            if (ret == -ENOMEM)
                goto out;
            /* Written by railio, but its chunk checksums are missing or
             * damaged (a proxy that drops metadata, a hand-made copy):
             * nothing vouches for its bytes, as for a multipart object
             * without its sidecar. (Impossible geometry is left to the
             * engine's descriptor check: RIO_EPROTO naming the field.) */
            if (ret < 0 && !t->verify_off && sane_geometry(size, chunk)) {
                fprintf(stderr,
                        "railio s3: %s: the chunk checksums of this object "
                        "(x-amz-meta-railio-xxh) are missing or damaged; verify=off reads it "
                        "unverified\n",
                        key);
                ret = RIO_ECHECKSUM;
                goto out;
            }
            if (ret == 0 && strlen(r.rsp.m_md5) == 32 && rio__s3_is_hex(r.rsp.m_md5, 32)) {
                memcpy(md5, r.rsp.m_md5, 33);
            } else if (ret == 0 && strlen(r.rsp.etag) == 34 && rio__s3_is_hex(r.rsp.etag + 1, 32)) {
                /* One PutObject: its ETag is the MD5 of its bytes. */
                for (int i = 0; i < 32; i++)
                    md5[i] = (char)tolower((unsigned char)r.rsp.etag[1 + i]);
                md5[32] = '\0';
            }
            ret = 0;
            break;
        }
        /* Multipart: the list is in the sidecar named by the upload id. */
        ret = sidecar_key(key, r.rsp.m_id, skey, sizeof(skey));
        if (ret < 0)
            goto out;
        struct meta_req sq = {.method = "GET", .key = skey, .retry = true};
        ret = meta_do(t, &sq, &sr);
        if (ret == 0)
            ret = rio__s3_sidecar_parse(sr.body.p, sr.body.len, r.rsp.m_id, size, chunk, md5, &xxh);
        meta_rsp_cleanup(&sr);
        if (ret == -ENOMEM)
            goto out;
        if (ret == 0)
            break;
        /* Missing or not ours: the object may have been replaced since the
         * HEAD (then look again), or its sidecar was removed or damaged.
         * Then nothing vouches for its bytes (a multipart ETag is no digest
         * of them): it is refused, unless the caller turned verification
         * off, when it is read without checksums. */
        if (attempt == 2) {
            if (!t->verify_off) {
                fprintf(stderr,
                        "railio s3: %s: the checksum sidecar of this multipart object is "
                        "missing or damaged; verify=off reads it unverified\n",
                        key);
                ret = RIO_ECHECKSUM;
                goto out;
            }
            ret = 0;
            md5[0] = '\0';
            break;
        }
    }
    gen_put(t, &g);
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, klen + 1);
    out->generation = g.gen;
    out->size = size;
    out->chunk_size = chunk;
    out->nchunks = chunk ? rio__s3_nchunks(size, chunk) : 0;
    out->xxh = xxh;
    xxh = NULL;
    memcpy(out->etag, md5, sizeof(md5));
    ret = 0;
out:
    rio__free(xxh);
    meta_rsp_cleanup(&r);
    return ret;
}

/* --------------------------------------------------------------- PUT */

static void upload_free(struct s3_upload *up)
{
    if (!up)
        return;
    up->magic = 0;
    rio__free(up->key);
    rio__free(up->upload_id);
    rio__free(up->parts);
    if (up->pages)
        for (unsigned i = 0; i < S3_PART_PAGES; i++)
            rio__free(up->pages[i]);
    rio__free(up->pages);
    rio__free(up);
}

static int s3_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                       uint64_t chunk_size, void **upload)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up;
    struct meta_rsp r = {0};
    char skey[RIO_KEY_MAX + 1], cs[24], ss[24], uid[1024];
    size_t klen;
    int ret;

    if (t->scheme != SCHEME_S3)
        return RIO_ENOTSUP;
    if (!upload || chunk_size == 0 || rio__key_len(key, &klen) < 0)
        return RIO_EINVAL;
    up = rio__calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    up->key = rio__strdup(key);
    if (!up->key) {
        ret = -ENOMEM;
        goto err;
    }
    up->size = size;
    up->chunk = chunk_size;
    /* A stream is a multipart upload whatever its length turns out to be:
     * its part count is known only at commit. */
    up->stream = size == RIO_SIZE_UNKNOWN;
    up->nparts = up->stream ? 0 : rio__s3_nchunks(size, chunk_size);
    up->mode = up->nparts <= 1 && !up->stream ? UP_SINGLE : UP_MULTI;
    random_id(up->id);
    if (up->mode == UP_MULTI) {
        if (chunk_size < t->min_part) {
            fprintf(stderr,
                    "railio s3: multipart parts must be at least %" PRIu64
                    " bytes (S3's rule, knob min_part); the chunk size is %" PRIu64
                    ": raise it (e.g. RIO_CHUNK_SIZE=8M) to PUT objects larger than one chunk\n",
                    t->min_part, chunk_size);
            ret = RIO_EINVAL;
            goto err;
        }
        if (!up->stream && up->nparts > S3_MAX_PARTS) {
            fprintf(stderr,
                    "railio s3: %" PRIu64 " parts: S3 allows %u per object; raise the chunk size\n",
                    up->nparts, S3_MAX_PARTS);
            ret = RIO_EINVAL;
            goto err;
        }
        ret = sidecar_key(key, up->id, skey, sizeof(skey));
        if (ret < 0)
            goto err;
    }
    if (up->stream)
        up->pages = rio__calloc(S3_PART_PAGES, sizeof(*up->pages));
    else
        up->parts = rio__calloc(up->mode == UP_MULTI ? (size_t)up->nparts : 1, sizeof(*up->parts));
    if (!up->parts && !up->pages) {
        ret = -ENOMEM;
        goto err;
    }
    if (up->mode == UP_MULTI) {
        struct meta_req q = {.method = "POST", .key = key};
        snprintf(cs, sizeof(cs), "%" PRIu64, chunk_size);
        snprintf(ss, sizeof(ss), "%" PRIu64, size);
        q.q[q.nq++] = (struct rio_s3_kv){"uploads", ""};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-v", S3_FORMAT};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-id", up->id};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-chunk", cs};
        /* A stream's size is not known yet: only its sidecar carries it. */
        if (!up->stream)
            q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-size", ss};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-sidecar", "1"};
        /* Not retried: a lost reply would leave an upload nobody aborts. */
        ret = meta_do(t, &q, &r);
        if (ret < 0)
            goto err;
        rio__s3_xml_text(r.body.p, r.body.len, "UploadId", uid, sizeof(uid));
        meta_rsp_cleanup(&r);
        if (!uid[0]) {
            ret = RIO_EPROTO;
            goto err;
        }
        up->upload_id = rio__strdup(uid);
        if (!up->upload_id) {
            ret = -ENOMEM;
            struct meta_req a = {.method = "DELETE", .key = key, .retry = true};
            a.q[a.nq++] = (struct rio_s3_kv){"uploadId", uid};
            meta_do(t, &a, &r);
            meta_rsp_cleanup(&r);
            goto err;
        }
    }
    up->magic = UPLOAD_MAGIC;
    *upload = up;
    return 0;
err:
    upload_free(up);
    return ret;
}

static void abort_multi(struct s3_transport *t, struct s3_upload *up)
{
    struct meta_req q = {.method = "DELETE", .key = up->key, .retry = true};
    struct meta_rsp r = {0};

    q.q[q.nq++] = (struct rio_s3_kv){"uploadId", up->upload_id};
    meta_do(t, &q, &r);
    meta_rsp_cleanup(&r);
}

static void delete_key(struct s3_transport *t, const char *key)
{
    struct meta_req q = {.method = "DELETE", .key = key, .retry = true};
    struct meta_rsp r = {0};

    meta_do(t, &q, &r);
    meta_rsp_cleanup(&r);
}

/* HEAD key: the railio id and whether it has a sidecar. 0, RIO_ENOTFOUND or an error. */
static int head_id(struct s3_transport *t, const char *key, char id[24], bool *sidecar,
                   struct s3_gen *g)
{
    struct meta_req q = {.method = "HEAD", .key = key, .retry = true};
    struct meta_rsp r = {0};
    int ret = meta_do(t, &q, &r);

    if (ret == 0) {
        rio__s3_copy_str(id, 24, r.rsp.m_id, strlen(r.rsp.m_id));
        *sidecar = !strcmp(r.rsp.m_v, S3_FORMAT) && !strcmp(r.rsp.m_sidecar, "1");
        if (g)
            rsp_gen(&r.rsp, r.rsp.clen, g);
    }
    meta_rsp_cleanup(&r);
    return ret;
}

static int commit_single(struct s3_transport *t, struct s3_upload *up, struct rio_desc *d)
{
    struct s3_gen g;

    if (up->nparts == 0) {
        /* An empty object: no WRITE ran; one PutObject now. */
        char cs[24];
        struct meta_req q = {.method = "PUT", .key = up->key, .retry = true};
        struct meta_rsp r = {0};
        int ret;

        /* The MD5 of nothing ("" when the engine computed none: etag=none). */
        if (d->etag[0] && strcmp(d->etag, "d41d8cd98f00b204e9800998ecf8427e") != 0)
            return RIO_ECHECKSUM;
        snprintf(cs, sizeof(cs), "%" PRIu64, up->chunk);
        q.x[q.nx++] = (struct rio_s3_kv){"content-md5", "1B2M2Y8AsgTpgAmY7PhCfg=="};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-v", S3_FORMAT};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-id", up->id};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-chunk", cs};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-size", "0"};
        q.x[q.nx++] =
            (struct rio_s3_kv){"x-amz-meta-railio-md5", "d41d8cd98f00b204e9800998ecf8427e"};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-xxh", ""};
        ret = meta_do(t, &q, &r);
        if (ret == 0 && !r.rsp.etag[0])
            ret = RIO_EPROTO;
        if (ret == 0)
            rio__s3_copy_str(up->etag, sizeof(up->etag), r.rsp.etag, strlen(r.rsp.etag));
        meta_rsp_cleanup(&r);
        if (ret < 0)
            return ret;
    } else {
        if (!up->parts[0].ok)
            return RIO_EPROTO;
        /* The bytes sent must be the bytes the engine hashed. */
        if (d->xxh[0] != up->parts[0].xxh ||
            (up->md5[0] && d->etag[0] && strcmp(d->etag, up->md5) != 0))
            return RIO_ECHECKSUM;
    }
    struct s3_rsp rr;
    memset(&rr, 0, sizeof(rr));
    rio__s3_copy_str(rr.etag, sizeof(rr.etag), up->etag, strlen(up->etag));
    rio__s3_copy_str(rr.m_id, sizeof(rr.m_id), up->id, strlen(up->id));
    d->generation = rsp_gen(&rr, up->size, &g);
    gen_put(t, &g);
    return 0;
}

/* The multipart ETag S3 gives: MD5 of the parts' binary MD5s, "-N". */
static void multipart_etag(struct s3_upload *up, EVP_MD_CTX *md, char *out, size_t cap)
{
    uint8_t d[16];
    unsigned len = 0;
    char hex[33];

    out[0] = '\0';
    if (EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1)
        return;
    for (uint64_t i = 0; i < up->nparts; i++) {
        const struct s3_part *pt = part_at(up, i);
        const char *e = pt ? pt->etag : "";
        uint8_t b[16];
        if (strlen(e) != 34 || !rio__s3_is_hex(e + 1, 32))
            return;
        for (int k = 0; k < 16; k++) {
            char h[3] = {e[1 + 2 * k], e[2 + 2 * k], 0};
            b[k] = (uint8_t)strtoul(h, NULL, 16);
        }
        EVP_DigestUpdate(md, b, 16);
    }
    if (EVP_DigestFinal_ex(md, d, &len) != 1)
        return;
    rio__s3_hex(d, 16, hex);
    snprintf(out, cap, "\"%s-%" PRIu64 "\"", hex, up->nparts);
}

static int commit_multi(struct s3_transport *t, struct s3_upload *up, struct rio_desc *d)
{
    char skey[RIO_KEY_MAX + 1], oskey[RIO_KEY_MAX + 1], old_id[24] = "", cur_id[24],
                                                        etag[RIO_S3_ETAG_MAX];
    char *sc = NULL, *xml = NULL;
    size_t sclen = 0, xlen = 0, cap;
    struct meta_rsp r = {0};
    bool old_sidecar = false, cur_sidecar, wrote_sidecar = false;
    EVP_MD_CTX *md = NULL;
    struct s3_gen g;
    int ret, w;

    etag[0] = '\0';
    ret = 0;
    for (uint64_t i = 0; i < up->nparts && ret == 0; i++) {
        const struct s3_part *pt = part_at(up, i);
        if (!pt || !pt->ok)
            ret = RIO_EPROTO;
        else if (pt->xxh != d->xxh[i])
            ret = RIO_ECHECKSUM;
    }
    /* The stream MD5, or "" when the engine computed none (etag=none). */
    if (ret == 0 && d->etag[0] && (strlen(d->etag) != 32 || !rio__s3_is_hex(d->etag, 32)))
        ret = RIO_EPROTO;
    if (ret == 0)
        ret = sidecar_key(up->key, up->id, skey, sizeof(skey));
    if (ret < 0)
        goto out;

    /* The sidecar first: once the object is visible its checksums are. */
    cap = 256 + (size_t)up->nparts * 17 + 32; /* header, lines, "end" */
    sc = rio__malloc(cap);
    ret = -ENOMEM;
    if (!sc)
        goto out;
    w = snprintf(sc, cap,
                 "railio-sidecar 1\nid %s\nsize %" PRIu64 "\nchunk %" PRIu64 "\nmd5 %s\nn %" PRIu64
                 "\n",
                 up->id, up->size, up->chunk, d->etag[0] ? d->etag : "-", up->nparts);
    ret = RIO_EINVAL;
    if (w < 0 || (size_t)w >= 256)
        goto out;
    sclen = (size_t)w;
    for (uint64_t i = 0; i < up->nparts; i++)
        sclen += (size_t)snprintf(sc + sclen, cap - sclen, "%016" PRIx64 "\n", d->xxh[i]);
    sclen +=
        (size_t)snprintf(sc + sclen, cap - sclen, "end %016" PRIx64 "\n", rio__xxh3(sc, sclen));
    {
        struct meta_req q = {
            .method = "PUT", .key = skey, .body = sc, .blen = sclen, .retry = true};
        ret = meta_do(t, &q, &r);
        meta_rsp_cleanup(&r);
        if (ret < 0)
            goto out;
        wrote_sidecar = true;
    }

    /* Which sidecar the generation we replace has, to remove it after. */
    if (head_id(t, up->key, old_id, &old_sidecar, NULL) < 0)
        old_sidecar = false;

    /* Each <Part> is at most 45 characters, a 5-digit number and an ETag. */
    cap = 128 + (size_t)up->nparts * (64 + RIO_S3_ETAG_MAX);
    xml = rio__malloc(cap);
    ret = -ENOMEM;
    if (!xml)
        goto out;
    xlen = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
    for (uint64_t i = 0; i < up->nparts; i++)
        xlen += (size_t)snprintf(xml + xlen, cap - xlen,
                                 "<Part><PartNumber>%" PRIu64 "</PartNumber><ETag>%s</ETag></Part>",
                                 i + 1, part_at(up, i)->etag);
    xlen += (size_t)snprintf(xml + xlen, cap - xlen, "</CompleteMultipartUpload>");
    {
        struct meta_req q = {
            .method = "POST", .key = up->key, .body = xml, .blen = xlen, .retry = true};
        q.q[q.nq++] = (struct rio_s3_kv){"uploadId", up->upload_id};
        q.x[q.nx++] = (struct rio_s3_kv){"content-type", "application/xml"};
        ret = meta_do(t, &q, &r);
        if (ret == 0)
            rio__s3_xml_text(r.body.p, r.body.len, "ETag", etag, sizeof(etag));
        meta_rsp_cleanup(&r);
    }
    /* A retried complete that finds no upload, or a failure after the server
     * may have acted: the object tells whether it is ours. */
    if (ret < 0 && ret != -EACCES && ret != RIO_EINVAL) {
        if (head_id(t, up->key, cur_id, &cur_sidecar, &g) == 0 && !strcmp(cur_id, up->id)) {
            ret = 0;
            etag[0] = '\0';
        }
    }
    if (ret < 0)
        goto out;

    /* radosgw answers an empty <ETag>: ask the object, and if someone else
     * replaced it already, fall back to computing ours. */
    if (!etag[0] || etag[0] != '"') {
        if (head_id(t, up->key, cur_id, &cur_sidecar, &g) == 0 && !strcmp(cur_id, up->id)) {
            rio__s3_copy_str(etag, sizeof(etag), g.etag, strlen(g.etag));
        } else {
            md = EVP_MD_CTX_new();
            if (md)
                multipart_etag(up, md, etag, sizeof(etag));
            EVP_MD_CTX_free(md);
        }
    }
    {
        struct s3_rsp rr;
        memset(&rr, 0, sizeof(rr));
        rio__s3_copy_str(rr.etag, sizeof(rr.etag), etag, strlen(etag));
        rio__s3_copy_str(rr.m_id, sizeof(rr.m_id), up->id, strlen(up->id));
        d->generation = rsp_gen(&rr, up->size, &g);
        gen_put(t, &g);
    }
    wrote_sidecar = false; /* it belongs to the object now */
    if (old_sidecar && old_id[0] && strcmp(old_id, up->id) != 0 &&
        sidecar_key(up->key, old_id, oskey, sizeof(oskey)) == 0)
        delete_key(t, oskey);
    ret = 0;
out:
    if (ret < 0) {
        abort_multi(t, up);
        if (wrote_sidecar)
            delete_key(t, skey);
    }
    rio__free(sc);
    rio__free(xml);
    return ret;
}

/*
 * A stream learns its size at commit. The parts that went out must be
 * exactly those of d's geometry: every part below the count sent whole at
 * its length (chunk size, the last one the rest), none beyond it (a part
 * past the end is never completed: the commit is refused and the upload
 * aborted). Called after the fence: no WRITE of the upload is in flight.
 */
static int stream_close(struct s3_transport *t, struct s3_upload *up, const struct rio_desc *d)
{
    uint64_t n, hi;

    if (!d || d->chunk_size != up->chunk || d->size == RIO_SIZE_UNKNOWN)
        return RIO_EPROTO;
    pthread_mutex_lock(&t->mu);
    hi = up->hi;
    pthread_mutex_unlock(&t->mu);
    n = rio__s3_nchunks(d->size, up->chunk);
    if (d->nchunks != n || n > S3_MAX_PARTS || hi > n || (n && !d->xxh))
        return RIO_EPROTO;
    for (uint64_t i = 0; i < n; i++) {
        const struct s3_part *pt = part_at(up, i);
        uint64_t want = i + 1 < n ? up->chunk : d->size - i * up->chunk;
        if (!pt || !pt->ok || pt->len != want)
            return RIO_EPROTO;
    }
    up->size = d->size;
    up->nparts = n;
    return 0;
}

static int s3_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up = upload;
    int ret = 0;

    if (!up || up->magic != UPLOAD_MAGIC)
        return RIO_EINVAL;
    if (up->stream)
        ret = stream_close(t, up, d);
    if (ret < 0 || !d || (up->nparts && !d->xxh) || d->size != up->size ||
        d->chunk_size != up->chunk || d->nchunks != up->nparts || strcmp(d->key, up->key) != 0) {
        if (up->mode == UP_MULTI)
            abort_multi(t, up);
        upload_free(up);
        return RIO_EPROTO;
    }
    if (up->stream && up->nparts == 0) {
        /* An empty stream: S3 completes no upload without a part
         * (MalformedXML), so drop the upload and PUT an empty object, as a
         * sized PUT of 0 bytes does. */
        abort_multi(t, up);
        ret = commit_single(t, up, d);
    } else {
        ret = up->mode == UP_SINGLE ? commit_single(t, up, d) : commit_multi(t, up, d);
    }
    upload_free(up);
    return ret;
}

static void s3_put_abort(struct rio_transport *tt, void *upload)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up = upload;

    if (!up || up->magic != UPLOAD_MAGIC)
        return;
    if (up->mode == UP_MULTI)
        abort_multi(t, up);
    upload_free(up);
}

static int s3_remove(struct rio_transport *tt, const char *key)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    char id[24], skey[RIO_KEY_MAX + 1];
    struct meta_req q = {.method = "DELETE", .key = key, .retry = true};
    struct meta_rsp r = {0};
    bool sidecar = false;
    size_t klen;
    int ret;

    if (t->scheme != SCHEME_S3)
        return RIO_ENOTSUP;
    if (rio__key_len(key, &klen) < 0)
        return RIO_EINVAL;
    /* S3 answers DELETE 204 whether or not the key exists: ask first. */
    ret = head_id(t, key, id, &sidecar, NULL);
    if (ret < 0)
        return ret;
    ret = meta_do(t, &q, &r);
    meta_rsp_cleanup(&r);
    if (ret < 0)
        return ret;
    if (sidecar && id[0] && sidecar_key(key, id, skey, sizeof(skey)) == 0)
        delete_key(t, skey);
    return 0;
}

/* ------------------------------------------------------- open and close */

static const char *knob(const struct rio_url *u, const char *param, const char *env)
{
    const char *v = rio__url_param(u, param);
    if (v)
        return v;
    v = getenv(env);
    return v && *v ? v : NULL;
}

static int knob_bool(const struct rio_url *u, const char *param, const char *env, bool def,
                     bool *out)
{
    const char *v = knob(u, param, env);

    *out = def;
    if (!v)
        return 0;
    return rio__parse_bool(v, out);
}

static int knob_size(const struct rio_url *u, const char *param, const char *env, uint64_t def,
                     uint64_t max, uint64_t *out)
{
    const char *v = knob(u, param, env);

    *out = def;
    if (!v)
        return 0;
    if (rio__parse_size(v, out) < 0 || *out > max)
        return RIO_EINVAL;
    return 0;
}

static int knob_ms(const struct rio_url *u, const char *param, const char *env, uint64_t def_ms,
                   uint64_t *out_ms)
{
    const char *v = knob(u, param, env);
    uint64_t ns;

    *out_ms = def_ms;
    if (!v)
        return 0;
    if (rio__parse_duration_ns(v, &ns) < 0 || ns / NS_PER_MS > 86400000ull)
        return RIO_EINVAL;
    *out_ms = (ns + NS_PER_MS - 1) / NS_PER_MS;
    return 0;
}

/* A copy of an environment variable into *out (NULL when unset or empty). */
static int dup_env(const char *name, char **out)
{
    const char *v = getenv(name);

    *out = v && *v ? rio__strdup(v) : NULL;
    return v && *v && !*out ? -ENOMEM : 0;
}

/* Split "http://host:port/path" into the endpoint (no trailing '/') and
 * the Host header; the path part becomes a prefix of every key. */
static int parse_endpoint(struct s3_transport *t, const char *ep, char **path_out)
{
    const char *hs, *he;
    size_t l;

    if (strncasecmp(ep, "http://", 7) == 0)
        hs = ep + 7;
    else if (strncasecmp(ep, "https://", 8) == 0)
        hs = ep + 8;
    else
        return RIO_EURL;
    he = hs + strcspn(hs, "/?#");
    if (he == hs || *he == '?' || *he == '#')
        return RIO_EURL;
    t->host = rio__malloc((size_t)(he - hs) + 1);
    t->endpoint = rio__malloc((size_t)(he - ep) + 1);
    if (!t->host || !t->endpoint)
        return -ENOMEM;
    rio__s3_copy_str(t->host, (size_t)(he - hs) + 1, hs, (size_t)(he - hs));
    rio__s3_copy_str(t->endpoint, (size_t)(he - ep) + 1, ep, (size_t)(he - ep));
    /* "/a/b/" -> "a/b/" */
    while (*he == '/')
        he++;
    l = strlen(he);
    *path_out = rio__malloc(l + 2);
    if (!*path_out)
        return -ENOMEM;
    memcpy(*path_out, he, l + 1);
    return 0;
}

static int set_prefix(struct s3_transport *t, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);

    while (la && a[la - 1] == '/')
        la--;
    while (lb && b[lb - 1] == '/')
        lb--;
    t->prefix = rio__malloc(la + lb + 3);
    if (!t->prefix)
        return -ENOMEM;
    t->prefix[0] = '\0';
    if (la) {
        memcpy(t->prefix, a, la);
        t->prefix[la] = '/';
        t->prefix[la + 1] = '\0';
    }
    if (lb) {
        size_t o = strlen(t->prefix);
        memcpy(t->prefix + o, b, lb);
        t->prefix[o + lb] = '/';
        t->prefix[o + lb + 1] = '\0';
    }
    return 0;
}

static int parse_config(struct s3_transport *t, const struct rio_url *u,
                        const struct rio_options *o)
{
    char *ep_path = NULL, *rails[RIO_MAX_PATHS];
    const char *ep, *v;
    unsigned nrails = 0;
    uint64_t x;
    int ret;

    if (t->scheme == SCHEME_S3) {
        if (!u->authority || !*u->authority)
            return RIO_EURL;
        t->bucket = rio__strdup(u->authority);
        if (!t->bucket)
            return -ENOMEM;
        ep = knob(u, "endpoint", "RIO_S3_ENDPOINT");
        if (!ep)
            ep = getenv("AWS_ENDPOINT_URL");
        if (!ep || !*ep) {
            fprintf(stderr, "railio s3: no endpoint: give ?endpoint=URL, RIO_S3_ENDPOINT or "
                            "AWS_ENDPOINT_URL\n");
            return RIO_EURL;
        }
        ret = parse_endpoint(t, ep, &ep_path);
        if (ret < 0)
            goto out;
        ret = set_prefix(t, ep_path, u->path);
        if (ret < 0)
            goto out;
        v = knob(u, "region", "AWS_REGION");
        if (!v)
            v = getenv("AWS_DEFAULT_REGION");
        t->region = rio__strdup(v && *v ? v : "us-east-1");
        if (dup_env("AWS_ACCESS_KEY_ID", &t->access_key) < 0 ||
            dup_env("AWS_SECRET_ACCESS_KEY", &t->secret_key) < 0 ||
            dup_env("AWS_SESSION_TOKEN", &t->token) < 0 || !t->region) {
            ret = -ENOMEM;
            goto out;
        }
        /* Without keys the requests go unsigned (a public bucket). */
        t->sign = t->access_key && t->secret_key;
        if ((t->access_key && !t->secret_key) || (!t->access_key && t->secret_key)) {
            fprintf(stderr, "railio s3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY go together\n");
            ret = RIO_EINVAL;
            goto out;
        }
    } else {
        char full[S3_URL_MAX];
        int w = snprintf(full, sizeof(full), "%s://%s", u->scheme, u->authority);
        if (!u->authority || !*u->authority || w < 0 || (size_t)w >= sizeof(full))
            return RIO_EURL;
        ret = parse_endpoint(t, full, &ep_path);
        if (ret < 0)
            goto out;
        ret = set_prefix(t, u->path, "");
        if (ret < 0)
            goto out;
        t->region = rio__strdup("");
        if (!t->region) {
            ret = -ENOMEM;
            goto out;
        }
    }

    ret = RIO_EINVAL;
    if ((v = rio__url_param(u, "rails"))) {
        /* "if!eth1,if!eth2": one rail per item, none empty. */
        char *s;
        t->rails_buf = rio__strdup(v);
        if (!t->rails_buf) {
            ret = -ENOMEM;
            goto out;
        }
        for (s = t->rails_buf;;) {
            char *comma = strchr(s, ',');
            if (comma)
                *comma = '\0';
            if (!*s || nrails == RIO_MAX_PATHS)
                goto out;
            rails[nrails++] = s;
            if (!comma)
                break;
            s = comma + 1;
        }
    }
    t->base.npaths = o && o->paths ? o->paths : nrails ? nrails : 1;
    t->base.put_chunks_max = S3_MAX_PARTS;
    if (t->base.npaths < 1 || t->base.npaths > RIO_MAX_PATHS)
        goto out;
    for (unsigned i = 0; i < t->base.npaths; i++)
        t->path[i].iface = nrails ? rails[i % nrails] : NULL;

    t->content_md5 = MD5_VERIFY;
    if ((v = knob(u, "content_md5", "RIO_S3_CONTENT_MD5"))) {
        if (!strcasecmp(v, "verify"))
            t->content_md5 = MD5_VERIFY;
        else if (!strcmp(v, "1") || !strcasecmp(v, "on") || !strcasecmp(v, "header"))
            t->content_md5 = MD5_HEADER;
        else if (!strcmp(v, "0") || !strcasecmp(v, "off"))
            t->content_md5 = MD5_OFF;
        else
            goto out;
    }
    if (knob_bool(u, "nt_copy", "RIO_S3_NT_COPY", false, &t->nt_copy) < 0 ||
        knob_bool(u, "discard", "RIO_S3_DISCARD", false, &t->discard) < 0 ||
        knob_bool(u, "dns_shuffle", "RIO_S3_DNS_SHUFFLE", false, &t->dns_shuffle) < 0)
        goto out;
    v = getenv("RIO_S3_DEBUG");
    t->debug = v && *v && strcmp(v, "0") != 0;
    if (knob_size(u, "bufsize", "RIO_S3_BUFSIZE", 0, CURL_MAX_READ_SIZE, &x) < 0 || (x && x < 1024))
        goto out;
    t->bufsize = (long)x;
    if (knob_size(u, "upbufsize", "RIO_S3_UPBUFSIZE", 512 * 1024, 2 * 1024 * 1024, &x) < 0 ||
        (x && x < 16 * 1024))
        goto out;
    t->upbufsize = (long)x;
    if (knob_size(u, "rcvbuf", "RIO_S3_RCVBUF", 0, 1u << 30, &x) < 0)
        goto out;
    t->rcvbuf = (int)x;
    if (knob_ms(u, "stall", "RIO_S3_STALL", 5000, &x) < 0 || x == 0)
        goto out;
    t->stall_s = (long)((x + 999) / 1000);
    if (knob_size(u, "min_speed", "RIO_S3_MIN_SPEED", 1, 1ull << 40, &x) < 0)
        goto out;
    t->min_speed = (long)x;
    if (knob_ms(u, "connect_timeout", "RIO_S3_CONNECT_TIMEOUT", 5000, &x) < 0 || x == 0)
        goto out;
    t->connect_ms = (long)x;
    if (knob_size(u, "min_part", "RIO_S3_MIN_PART", S3_DEF_MIN_PART, 5ull << 30, &t->min_part) < 0)
        goto out;
    t->base.put_chunk_min = t->min_part; /* the engine sizes multipart chunks by it */
    t->op_timeout_ms = o && o->op_timeout_ms ? (long)o->op_timeout_ms : 0;
    t->verify_off = o && o->verify < 0;
    if (t->discard && (!o || o->verify >= 0))
        fprintf(stderr, "railio s3: discard=1 stores nothing: the engine's verification will "
                        "fail unless verify=off\n");
    ret = 0;
out:
    rio__free(ep_path);
    return ret;
}

static void s3_free(struct s3_transport *t)
{
    rio__free(t->endpoint);
    rio__free(t->host);
    rio__free(t->bucket);
    rio__free(t->prefix);
    rio__free(t->access_key);
    if (t->secret_key) {
        memset(t->secret_key, 0, strlen(t->secret_key));
        rio__free(t->secret_key);
    }
    rio__free(t->token);
    rio__free(t->region);
    rio__free(t->rails_buf);
    rio__free(t->gens);
    rio__free(t);
}

static void s3_close(struct rio_transport *tt);

static int open_scheme(int scheme, const struct rio_url *u, const struct rio_options *o,
                       struct rio_transport **out)
{
    struct s3_transport *t;
    struct epoll_event ev;
    int ret;

    if (!u || !out)
        return RIO_EINVAL;
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init_rc != CURLE_OK)
        return -ENOMEM;
    t = rio__calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->scheme = scheme;
    t->base.ops = scheme == SCHEME_S3     ? &rio__s3_ops
                  : scheme == SCHEME_HTTP ? &rio__http_ops
                                          : &rio__https_ops;
    t->epfd = t->evfd = -1;
    ret = parse_config(t, u, o);
    if (ret < 0) {
        s3_free(t);
        return ret;
    }
    t->gens = rio__calloc(S3_GEN_SLOTS, sizeof(*t->gens));
    if (!t->gens) {
        s3_free(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    pthread_mutex_init(&t->gen_mu, NULL);
    pthread_mutex_init(&t->meta_mu, NULL);
    ret = -ENOMEM;
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->epfd < 0 || t->evfd < 0) {
        ret = -errno;
        goto err;
    }
    memset(&ev, 0, sizeof(ev));
    ev.events = EPOLLIN;
    ev.data.u64 = EV_WAKE;
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &ev) < 0) {
        ret = -errno;
        goto err;
    }
    for (unsigned i = 0; i < t->base.npaths; i++) {
        struct s3_path *p = &t->path[i];
        p->t = t;
        p->idx = i;
        p->timer_at = NEVER;
        p->m = curl_multi_init();
        if (!p->m)
            goto err;
        curl_multi_setopt(p->m, CURLMOPT_SOCKETFUNCTION, sock_cb);
        curl_multi_setopt(p->m, CURLMOPT_SOCKETDATA, p);
        curl_multi_setopt(p->m, CURLMOPT_TIMERFUNCTION, timer_cb);
        curl_multi_setopt(p->m, CURLMOPT_TIMERDATA, p);
        curl_multi_setopt(p->m, CURLMOPT_MAX_HOST_CONNECTIONS, 0L);
        curl_multi_setopt(p->m, CURLMOPT_MAXCONNECTS, (long)S3_DEPTH_CAP);
    }
    *out = &t->base;
    return 0;
err:
    s3_close(&t->base);
    return ret;
}

static void s3_close(struct rio_transport *tt)
{
    struct s3_transport *t = (struct s3_transport *)tt;

    if (!t)
        return;
    for (unsigned i = 0; i < t->base.npaths; i++) {
        struct s3_path *p = &t->path[i];
        while (p->slabs) {
            struct s3_slab *s = p->slabs;
            p->slabs = s->next;
            for (unsigned k = 0; k < S3_SLAB_OPS; k++) {
                if (s->ops[k].state == OP_ACTIVE && p->m)
                    curl_multi_remove_handle(p->m, s->ops[k].e);
                op_destroy(&s->ops[k]);
            }
            rio__free(s);
        }
        if (p->m)
            curl_multi_cleanup(p->m); /* closes cached connections (sock_cb) */
        p->m = NULL;
    }
    while (t->nmeta)
        curl_easy_cleanup(t->meta_pool[--t->nmeta]);
    if (t->evfd >= 0)
        close(t->evfd);
    if (t->epfd >= 0)
        close(t->epfd);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->gen_mu);
    pthread_mutex_destroy(&t->meta_mu);
    s3_free(t);
}

static int s3_open(const struct rio_url *u, const struct rio_options *o, struct rio_transport **out)
{
    return open_scheme(SCHEME_S3, u, o, out);
}

static int http_open(const struct rio_url *u, const struct rio_options *o,
                     struct rio_transport **out)
{
    return open_scheme(SCHEME_HTTP, u, o, out);
}

static int https_open(const struct rio_url *u, const struct rio_options *o,
                      struct rio_transport **out)
{
    return open_scheme(SCHEME_HTTPS, u, o, out);
}

#define S3_OPS_COMMON                                                                              \
    .close = s3_close, .submit = s3_submit, .reap = s3_reap, .wake = s3_wake, .cancel = s3_cancel, \
    .lookup = s3_lookup, .put_open = s3_put_open, .put_commit = s3_put_commit,                     \
    .put_abort = s3_put_abort, .remove = s3_remove

const struct rio_transport_ops rio__s3_ops = {
    .scheme = "s3",
    .caps = RIO_CAP_ETAG | RIO_CAP_STREAM_PUT,
    .open = s3_open,
    S3_OPS_COMMON,
};

/* Plain HTTP(S): ranged reads only (put_open and remove: RIO_ENOTSUP). */
const struct rio_transport_ops rio__http_ops = {
    .scheme = "http",
    .caps = 0,
    .open = http_open,
    S3_OPS_COMMON,
};

const struct rio_transport_ops rio__https_ops = {
    .scheme = "https",
    .caps = 0,
    .open = https_open,
    S3_OPS_COMMON,
};
