/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What the files of the s3:// and http(s):// transport share (the module
 * railio-s3.so; docs/internals/s3.md is the map): limits, the transport,
 * its paths and data ops, uploads, metadata requests, and the functions one
 * file gives another. Not for anything outside src/transport/s3/.
 *
 * Locks: t->mu guards the pending and cancel queues, the op pools, each
 * path's count of ops held, io->tpriv and the cancel marks; an op's transfer
 * state belongs to the reap thread once reap has taken it from the pending
 * queue. t->gen_mu guards the generation table, t->meta_mu the metadata
 * handle pool. None is held while curl runs or while complete() is called.
 */
#ifndef RIO_S3_INTERNAL_H
#define RIO_S3_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "core/list.h"
#include "core/url.h"
#include "railio.h"
#include "transport/opool.h"
#include "transport/s3/parse.h"
#include "transport/s3/sign.h"
#include "transport/transport.h"

extern const struct rio_transport_ops rio__s3_ops;
extern const struct rio_transport_ops rio__http_ops;
extern const struct rio_transport_ops rio__https_ops;

#define S3_MAX_PARTS 10000u          /* S3's limit on parts per upload */
#define S3_DEF_MIN_PART (5ull << 20) /* S3's minimum part size (all but the last) */
#define S3_DEPTH_CAP 1024u           /* ops queued per path before -EAGAIN */
#define S3_SLAB_OPS 8u               /* ops allocated at once when a pool grows */
#define S3_URL_MAX 4608              /* endpoint + bucket + encoded 1 KiB key + query */
#define S3_QUERY_MAX 10240           /* a listing's query: encoded prefix, start-after, token */
#define S3_META_URL_MAX (S3_URL_MAX + S3_QUERY_MAX)
#define S3_HBUF 8192       /* header text of one data op (a session token of up to 4 KiB) */
#define S3_META_HBUF 12288 /* header text of a metadata request */
#define S3_NODES 24        /* headers of one request */
#define S3_GEN_SLOTS 1024u /* generation -> ETag table */
#define S3_EBODY 1024      /* error body kept for the S3 <Code> */
#define S3_META_BODY_MAX (4u << 20) /* a metadata reply (upload id, sidecar, error) */
#define S3_META_POOL 16             /* idle metadata easy handles kept */
/* A CompleteMultipartUpload (meta_req.slow): S3 may work on one for
 * minutes ("could take several minutes"), sending spaces meanwhile, and
 * another server without a word. Its time limit is the larger of
 * op_timeout and this, its stall limit the larger of stall and
 * S3_SLOW_QUIET_S (boto3 and the AWS CLI wait 60 s for a byte). */
#define S3_SLOW_TIMEOUT_MS (15L * 60L * 1000L)
#define S3_SLOW_QUIET_S 60L
#define S3_FORMAT "1" /* x-amz-meta-railio-v */
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

/* What checks a part (knob checksum): CK_AUTO until the first PUT probes
 * whether the server checks x-amz-checksum-crc32c, then whether it checks
 * a signed x-amz-content-sha256 (upload.c). CK_SHA256: the part's SHA-256
 * signed as its payload hash, which the server verifies. */
enum { CK_AUTO = 0, CK_MD5 = 1, CK_CRC32C = 2, CK_NONE = 3, CK_SHA256 = 4 };

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

/* CURLOPT_HEADERDATA of every request: the response the headers fill, and
 * how its connection acknowledges them at once (rio__s3_on_header): for a
 * metadata request, the socket of its handle's one connection (fd); for a
 * data op, whose connection the multi's shared cache chose, a flag the reap
 * loop reads after the socket_action that read the headers (ack_due). */
struct s3_hdr_ctx {
    struct s3_rsp *rsp;
    const int *fd;
    bool *ack_due;
};

/* A metadata request's easy handle (its own connection cache) and the
 * socket of its connection, -1 when it has none. */
struct s3_meta_h {
    CURL *e;
    struct s3_transport *t;
    int fd;
};

struct s3_op {
    struct rio_list_node qnode; /* pending list, done list (first: the pool's while free) */
    struct s3_path *p;
    struct s3_op *cnext; /* cancel list */
    struct rio_io *io;
    CURL *e;
    struct s3_hdr_ctx hctx; /* {&rsp, NULL, &p->ack_due} */
    EVP_MD_CTX *md;
    struct rio_xxh3_stream *xs; /* READ's hash of the bytes stored (xxh_stream) */
    int state;                  /* under t->mu while queued; reap thread once taken */
    _Atomic bool cancel_req;    /* set by cancel (any thread), read by reap */
    bool on_clist;              /* under t->mu */
    bool checked;               /* response headers validated (first body byte) */
    bool md5_stream;            /* WRITE: md is an MD5 fed by op_read */
    bool xxh_stream;            /* READ: xs hashes each piece stored, in order */
    bool one_skip;              /* READ one: the bytes are not the caller's; counted, not stored */
    uint64_t one_len;           /* READ one: the bytes its answer announced (min(len, size)) */
    /* READ one, from the answer's headers (check_one_rsp): the object's
     * size, its railio chunk size (0: not railio's), whether its checksums
     * are in a sidecar, and the MD5 of its bytes ("" unknown). */
    uint64_t one_total, one_chunk;
    bool one_sidecar;
    char one_md5[33];
    char md5hex[33]; /* WRITE: MD5 of the part, "" if not computed */
    uint32_t crc;    /* WRITE with CK_CRC32C: the part's CRC32C */
    int err;         /* an error a callback detected, or 0 */
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

#define S3_PATH_SOCKS 64u /* sockets of a path acknowledged by ack_due (more: not) */

struct s3_path {
    struct s3_transport *t;
    unsigned idx;
    CURLM *m;
    const char *iface; /* CURLOPT_INTERFACE, or NULL */
    uint64_t timer_at; /* reap thread: when curl wants socket_action(TIMEOUT) */
    bool ack_due;      /* reap thread: a response's headers were read (s3_hdr_ctx) */
    /* reap thread: the sockets curl polls for this path's transfers (the
     * socket callback's), each acknowledged when ack_due is set */
    int socks[S3_PATH_SOCKS];
    unsigned nsocks;
    /* under t->mu */
    unsigned held;         /* ops submitted and not yet completed */
    struct rio_opool pool; /* of struct s3_op, each with its easy handle */
};

struct s3_gen {
    uint64_t gen;
    char etag[RIO_S3_ETAG_MAX];
    bool lastmod; /* the validator is a Last-Modified date (If-Unmodified-Since) */
    /* Its ETag is no digest of its bytes (s3_rsp.etag_no_md5: SSE-KMS,
     * SSE-C, railiod's gateway's x-railio-etag: fast). */
    bool etag_no_md5;
    /* The checksum of its bytes the server keeps (s3_rsp.ck_*, not a
     * composite one): RIO_S3_CK_NONE when none. */
    uint8_t ck_algo;
    uint64_t ck_value;
    /* The object's size as the answer that named it said (but of a
     * Last-Modified generation, which objects of any size share). */
    uint64_t size;
};

struct s3_transport {
    struct rio_transport base; /* first: the engine's handle */
    int scheme;

    /* configuration, read once at open */
    char *endpoint; /* "http://127.0.0.1:7480" (no trailing '/') */
    char *host;     /* Host header value */
    char *bucket;   /* s3 only */
    bool vhost;     /* virtual-hosted: the bucket is in host and endpoint */
    char *prefix;   /* key prefix, "" or ending in '/' */
    char *access_key, *secret_key, *token, *region;
    char *ca_bundle; /* the CA certificates TLS trusts (CURLOPT_CAINFO), NULL: the system's */
    char *rails_buf; /* the ?rails= list, cut in place */
    bool sign;
    bool discard;
    bool nt_copy;         /* non-temporal stores into the destination (knob nt_copy) */
    bool conditional;     /* the server decides If-None-Match / If-Match on writes (knob) */
    int content_md5;      /* MD5_* */
    bool content_md5_set; /* knob content_md5 given: its way, whatever the CPU */
    _Atomic int checksum; /* CK_*: CK_AUTO until put_open probed the server */
    bool dns_shuffle;
    bool debug;
    long bufsize, upbufsize;
    int rcvbuf;
    long stall_s, min_speed;
    long connect_ms, op_timeout_ms;
    bool verify_off; /* verify=off: a multipart object without its sidecar is read unverified */
    bool get_one;    /* knob get_one: small GETs in one ranged GET, no HEAD first */
    /* The server answered a HEAD ?partNumber without a part count (it
     * ignores partNumber, as radosgw 16): rio__s3_parts_of asks no more. */
    _Atomic bool no_part_numbers;
    uint64_t min_part;

    /* data ops */
    int epfd, evfd;
    struct s3_path path[RIO_MAX_PATHS];
    pthread_mutex_t mu;
    /* under mu */
    struct rio_list pend; /* of struct s3_op by qnode: submitted, not started */
    struct s3_op *cancels;
    bool waiting; /* reap is (about to be) blocked in epoll_wait */
    bool woken;

    /* metadata handles, under meta_mu */
    pthread_mutex_t meta_mu;
    struct s3_meta_h *meta_pool[S3_META_POOL];
    unsigned nmeta;

    /* When a request last found the bucket there (rio__now_ns), so that a
     * HEAD's 404 (no body, no S3 code) is told apart from a missing bucket
     * without a second request each time. */
    _Atomic uint64_t bucket_seen_ns;

    /* generation -> validator, under gen_mu */
    pthread_mutex_t gen_mu;
    struct s3_gen *gens;
};

struct s3_part {
    char etag[RIO_S3_ETAG_MAX];
    uint64_t xxh; /* what was sent */
    uint64_t len; /* bytes sent */
    uint32_t crc; /* CK_CRC32C: what the server checked */
    bool ok;
    /* Taken by put_prep on the engine's cpu pool from the caller's bytes,
     * before the part may be submitted (the engine's ordering makes them
     * visible to op_prepare): the check of pre_len bytes, of kind pre
     * (PRE_*, 0: none, op_prepare computes it). */
    uint8_t pre;
    uint64_t pre_len;
    uint32_t pre_crc;
    uint8_t pre_digest[32]; /* PRE_SHA256: SHA-256; PRE_MD5: MD5 (16 bytes) */
};

/* What put_prep took for a part. */
enum { PRE_NONE = 0, PRE_SHA256 = 1, PRE_CRC32C = 2, PRE_MD5 = 3 };

struct s3_upload {
    uint64_t magic;
    int mode;
    char *key;
    uint64_t size, chunk, nparts;
    char id[17];
    int ck;                     /* CK_MD5, CK_CRC32C or CK_NONE: how its parts are checked */
    bool md5_lanes;             /* CK_MD5: Content-MD5s computed ahead, several at once */
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
    /* A commit that failed retryably may have left the sidecar: put_abort
     * deletes it. */
    bool sidecar_put;
    /* put_expect's condition, on the request that publishes (the one
     * PutObject, or the Complete): cond_hdr "if-none-match" or "if-match"
     * (NULL: none), cond_val "*" or the ETag of the generation expected. */
    const char *cond_hdr;
    char cond_val[RIO_S3_ETAG_MAX];
    /* UP_SINGLE with a condition: PutObjects sent (the reap thread's); a
     * refusal of a second one may answer the first, which landed. */
    unsigned cond_sends;
};

/* ---------------------------------------------------- metadata requests */

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

/* One metadata request. */
struct meta_req {
    const char *method; /* HEAD GET PUT POST DELETE */
    const char *key;    /* NULL: the bucket */
    struct rio_s3_kv q[8];
    unsigned nq;
    size_t body_max;        /* the longest reply body taken, 0 = S3_META_BODY_MAX */
    struct rio_s3_kv x[12]; /* extra signed headers */
    unsigned nx;
    const void *body; /* PUT/POST */
    size_t blen;
    /* x-amz-content-sha256 to sign instead of the body's (the probe's
     * wrong one), NULL: the body's SHA-256. */
    const char *payload;
    /* Must not be sent twice (CompleteMultipartUpload): on a new connection,
     * since curl sends a request again by itself when a reused connection
     * dies before any answer, even after the whole request went out. */
    bool once;
    /* One the server may take minutes on (S3_SLOW_TIMEOUT_MS). */
    bool slow;
    /* Cleanup after a failure (an abort, a delete): bounded by op_timeout
     * alone, not by the call's deadline or cancel token, which may be what
     * failed the call, so that it is still sent and leaves nothing. */
    bool cleanup;
};

struct meta_rsp {
    struct s3_rsp rsp;
    struct meta_body body;
    int err;       /* 0, or the request's error */
    bool answered; /* err is the server's word (an HTTP error status or an
                    * <Error> body), not a reply lost on the way */
};

/* ------------------------------------------------ between the files */

/* config.c: the URL, its options and the credentials, read once at open. */
int rio__s3_config_parse(struct s3_transport *t, const struct rio_url *u,
                         const struct rio_options *o);

/* creds.c: the AWS profile (its credentials and config files) and the
 * credentials chain. A profile holds secrets: rio__s3_profile_clear wipes it. */
struct s3_profile {
    char name[128];
    bool explicit_name;    /* from the URL's profile= */
    bool named;            /* from profile= or AWS_PROFILE (else "default") */
    bool in_cred, in_conf; /* its section is in that file */
    char cred_path[4096], conf_path[4096];
    struct rio_awsini cred, conf;
};
int rio__s3_profile_load(const struct rio_url *u, struct s3_profile *p);
void rio__s3_profile_clear(struct s3_profile *p);
/* Sets t's keys (and t->sign) from the environment or the profile, or
 * nothing when anonymous; RIO_ENOCREDS (rio_error_detail says where it
 * looked) when no source has any. */
int rio__s3_creds_pick(struct s3_transport *t, const struct s3_profile *p, bool anonymous);

/* errors.c: a CURLcode as a railio error, and the RIO_S3_DEBUG log line.
 * rio__s3_retryable: err is of a class the engine retries (core/errors.c). */
int rio__s3_map_curl(CURLcode rc, long oserr, const struct s3_rsp *rsp);
bool rio__s3_retryable(int err);
/* An error answer's <Code> and <Message>, printable (a server's ESC or
 * newline would forge log lines and terminal output), "" when absent. */
void rio__s3_answer_text(const char *body, size_t len, char code[64], char msg[256]);
void rio__s3_debug_log(struct s3_transport *t, const char *method, const char *url, long status,
                       const char *body, size_t blen, int err, const char *curlmsg);

/* request.c: URL, headers and signature of one request; easy handle setup. */
void rio__s3_hdrs_init(struct s3_hdrs *h, char *buf, size_t cap);
struct curl_slist *rio__s3_hdrs_list(struct s3_hdrs *h);
int rio__s3_req_build(struct s3_transport *t, EVP_MD_CTX *md, const char *method, const char *key,
                      const struct rio_s3_kv *query, unsigned nq, const struct rio_s3_kv *extra,
                      unsigned nx, const char *payload, char *url, size_t urlcap,
                      struct s3_hdrs *h);
void rio__s3_easy_common(struct s3_transport *t, CURL *e, const char *iface);
size_t rio__s3_on_header(char *p, size_t sz, size_t nmemb, void *arg);
/* Acknowledge what socket fd received, now (TCP_QUICKACK). */
void rio__s3_quickack(int fd);
void rio__s3_easy_meta(struct s3_meta_h *mh, const char *iface);

/* data.c: one chunk READ or WRITE on its easy handle. */
/* The op pool's hooks (arg: the path): an op's easy handle and digest,
 * made once and kept from one chunk to the next. */
int rio__s3_op_make(void *e, void *arg);
void rio__s3_op_unmake(void *e, void *arg);
int rio__s3_op_prepare(struct s3_transport *t, struct s3_op *op);
/* x-amz-checksum-crc32c's value: the CRC32C big-endian, base64 (8 + NUL). */
void rio__s3_crc32c_b64(uint32_t crc, char out[12]);
int64_t rio__s3_op_result(struct s3_transport *t, struct s3_op *op, CURLcode rc);

/* loop.c: the curl multi handles, epoll and the ops submit/cancel/wake/reap. */
int rio__s3_loop_open(struct s3_transport *t);
void rio__s3_loop_close(struct s3_transport *t);
int rio__s3_submit(struct rio_transport *tt, struct rio_io *io);
void rio__s3_cancel(struct rio_transport *tt, struct rio_io *io);
void rio__s3_wake(struct rio_transport *tt);
int rio__s3_reap(struct rio_transport *tt, int timeout_ms);

/* meta.c: generations, metadata requests, and the ops lookup and remove. */
uint64_t rio__s3_rsp_gen(const struct s3_rsp *r, uint64_t size, struct s3_gen *g);
void rio__s3_gen_put(struct s3_transport *t, const struct s3_gen *g);
bool rio__s3_gen_get(struct s3_transport *t, uint64_t gen, struct s3_gen *out);
void rio__s3_meta_rsp_cleanup(struct meta_rsp *r);
int rio__s3_meta_do(struct s3_transport *t, const struct meta_req *q, struct meta_rsp *r);
void rio__s3_meta_close(struct s3_transport *t);
void rio__s3_delete_key(struct s3_transport *t, const char *key);
/* key's generation gen for an If-Match, by one HEAD (id and *sidecar as
 * rio__s3_head_id): 0 with *g its ETag, RIO_ENOTFOUND, RIO_EGENERATION (it
 * holds another), RIO_ENOTSUP (no ETag to match), or the HEAD's error. */
int rio__s3_match_etag(struct s3_transport *t, const char *key, uint64_t gen, char id[24],
                       bool *sidecar, struct s3_gen *g);
int rio__s3_head_id(struct s3_transport *t, const char *key, char id[24], bool *sidecar,
                    struct s3_gen *g);
int rio__s3_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out);
bool rio__s3_get_one(struct rio_transport *tt, const char *key, uint64_t cap);
int rio__s3_parts_of(struct rio_transport *tt, const struct rio_desc *d, uint64_t *part,
                     uint32_t *nparts, char want[48]);
int rio__s3_parts_even(struct rio_transport *tt, const struct rio_desc *d, uint64_t part,
                       uint32_t nparts);
int rio__s3_full_checksum(struct rio_transport *tt, const struct rio_desc *d, int *algo,
                          uint64_t *value);
/* Whether requests that look objects up ask for the checksum the server
 * keeps (x-amz-checksum-mode: ENABLED): s3://, checks of foreign objects
 * on. */
bool rio__s3_ask_checksum(const struct s3_transport *t);
/* What the headers of a HEAD or GET say of an object of size bytes: 0 and
 * *chunk its chunk size when railio wrote it (with *sidecar: its checksum
 * list is in a sidecar), or 0 and *chunk 0 when it did not; md5 (33 bytes)
 * the MD5 of its bytes where the headers give one, else "". */
void rio__s3_rsp_kind(const struct s3_rsp *r, uint64_t size, uint64_t *chunk, bool *sidecar,
                      char md5[33]);
int rio__s3_remove(struct rio_transport *tt, const char *key);
int rio__s3_remove_if(struct rio_transport *tt, const char *key, uint64_t gen);

/* list.c: the optional op list (ListObjectsV2). */
int rio__s3_list(struct rio_transport *tt, const struct rio_list_args *a,
                 struct rio_list_page *out);

/* upload.c: PUT: put_open, the part records, commit and abort. */
struct s3_part *rio__s3_part_at(struct s3_upload *up, uint64_t i);
struct s3_part *rio__s3_part_page_locked(struct s3_upload *up, uint64_t index);
int rio__s3_put_open(struct rio_transport *tt, const char *key, uint64_t size, uint64_t chunk_size,
                     void **upload);
int rio__s3_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d);
/* put_expect: RIO_ENOTSUP unless knob conditional says the server decides
 * the conditions (docs/s3.md, "Conditional writes"). */
int rio__s3_put_expect(struct rio_transport *tt, void *upload, uint64_t gen);
void rio__s3_put_abort(struct rio_transport *tt, void *upload);
unsigned rio__s3_put_prep_group(struct rio_transport *tt, void *upload);
unsigned rio__s3_put_prep_many(struct rio_transport *tt, unsigned n, void *const *uploads,
                               const uint64_t *index, const void *const *srcs,
                               const uint64_t *lens);
void rio__s3_put_prep(struct rio_transport *tt, void *upload, uint64_t index, unsigned n,
                      const void *const *src, const uint64_t *len);

#endif
