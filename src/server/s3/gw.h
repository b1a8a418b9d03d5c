/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railiod's S3 gateway (docs/gateway.md): an HTTP/1.1 front door on
 * libmicrohttpd (one thread per connection, so a request may block in the
 * engine's writer and reader) that maps S3 requests onto one rio_client.
 * gateway.c owns the HTTP side (routing, bodies, responses, the request log,
 * metrics); ops.c the S3 operations; xml.c the XML, dates and encodings.
 */
#ifndef RIO_SERVER_S3_GW_H
#define RIO_SERVER_S3_GW_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "core/checksum.h"
#include "core/list.h"
#include "railio.h"
#include "server/s3/s3.h"

struct MHD_Connection;
struct MHD_Response;
struct gw_buf;
struct gw_meta;
struct rio_client;
struct rio_desc;
struct rio_list_page;
struct rio_writer;

/* What railiod's options give the gateway (main.c). */
struct rio_s3_gw_config {
    int listen_fd;          /* a bound, listening socket (taken) */
    const char *backend;    /* a railio URL */
    const char *keys;       /* --s3-keys file, or NULL */
    int anonymous;          /* --s3-anonymous: unsigned requests are allowed */
    int lazy;               /* open the backend's client at the first request */
    uint64_t head_cache_ns; /* --s3-head-cache: 0 off, UINT64_MAX the default */
    const char *domain;     /* --s3-domain: BUCKET.domain is bucket BUCKET; NULL: path style only */
    uint64_t min_part;      /* --s3-min-part-size: UINT64_MAX the default (GW_MIN_PART) */
    int check_only;         /* --s3-checksums check: PutObject's checksums are not kept */
    int no_sigv2;           /* --s3-sigv2 off: Signature Version 2 is refused */
    const char *tls_cert;   /* --s3-tls-cert: serve HTTPS with this chain (PEM), or NULL */
    const char *tls_key;    /* --s3-tls-key: its private key (PEM) */
    unsigned max_conns;     /* --s3-max-conns: connections at once */
    unsigned max_conns_ip;  /* --s3-max-conns-per-ip: of them from one address (0: any) */
    uint64_t memory;        /* --s3-memory: body buffers of all requests (0: the default) */
};

/* Start the gateway; 0 or an error (logged). */
int rio__s3_gw_start(const struct rio_s3_gw_config *cfg);
/* Stop it: no new requests, wait for those in flight. Safe when not started. */
void rio__s3_gw_stop(void);
/* Append the gateway's Prometheus text to buf; its length (0 when off). */
size_t rio__s3_gw_metrics(char *buf, size_t cap);

/* ------------------------------------------------------------ internals */

/* Bounds on what a request may carry (400 beyond). */
#define GW_URI_MAX 8192             /* request target, path and query */
#define GW_HDR_MAX 160              /* headers kept for verification */
#define GW_QUERY_MAX 32             /* query parameters */
#define GW_POST_BODY_MAX (1u << 20) /* a configuration's XML (CORS, tags) */
/* The XML of the largest DeleteObjects and CompleteMultipartUpload S3
 * takes: 1000 keys of 1024 bytes, each byte an entity of up to 6 (&quot;),
 * with 1 KiB for an <Object>'s other elements; 10000 parts of 512 bytes (a
 * quoted ETag, one checksum, their tags). boto3's Complete of 8256 parts
 * with their CRC-32s passes 1 MiB. A PUT's window holds more (depth 4 x 4
 * MiB chunks). */
#define GW_DELETE_BODY_MAX (1000u * (6u * 1024u + 1024u))
#define GW_COMPLETE_BODY_MAX (10000u * 512u)
/* What the XML bodies of every request in flight hold together: at 7 MiB
 * a request, --s3-max-conns (1024) of them held 7 GiB (200 slow senders of
 * DeleteObjects bodies, 1.4 GB). Past it a request is answered 503
 * SlowDown, which S3 clients retry. */
#define GW_XML_BODIES_MAX (64u << 20)
/* What the XML bodies of one client address (an IPv4 address, an IPv6 /64)
 * hold together, of GW_XML_BODIES_MAX: a few slow senders from one address
 * held the whole budget, every other client's DeleteObjects and Completes
 * refused 503 for as long as they trickled (up to the idle timeout). Two
 * of the largest bodies fit. Addresses past GW_XML_ADDRS holding bodies at
 * once share the last slot: as many as --s3-max-conns' default, so that
 * only a larger --s3-max-conns ever makes addresses share. */
#define GW_XML_ADDR_MAX (16u << 20)
#define GW_XML_ADDRS 1024
/* How fast an XML body must come to be held: from GW_XML_GRACE_S after its
 * first byte, at GW_XML_MIN_RATE bytes a second on average since then, with
 * no pause of GW_XML_IDLE_S (the connection's idle timeout while it comes;
 * GW_CONN_TIMEOUT_S otherwise). A sender holding its bytes and sending one
 * more every 119 s kept them for ever: four client addresses trickling held
 * every XML body's budget, and every other client's DeleteObjects and
 * Completes were refused 503 SlowDown. A body slower than this is answered
 * 400 RequestTimeout, as S3 answers, and its bytes given back. 64 KiB/s (512
 * kbit/s) brings the largest body (7 MiB) in 112 s; RAILIOD_TEST_XML_RATE
 * (RATE:GRACE_S:IDLE_S, tests only) sets the three. */
#define GW_XML_MIN_RATE (64u * 1024u)
#define GW_XML_GRACE_S 10
#define GW_XML_IDLE_S 20
#define GW_CONN_DECODE (256u * 1024u) /* aws-chunked: decoded bytes per feed */
/* The body buffers of every request in flight (bodymem.c): the windows of
 * the engine's writers (PutObject, UploadPart, POST) and readers
 * (GetObject), held together to --s3-memory, by default a quarter of the
 * machine's memory up to GW_MEM_DEFAULT_MAX; those of one client address to
 * a quarter of it (GW_MEM_ADDR_DIV; the whole of it with
 * --s3-max-conns-per-ip 0, behind a proxy). Each request takes its window
 * before its writer or reader opens and gives it back when it ends; past
 * either bound it is answered 503 SlowDown with Retry-After (GW_MEM_RETRY_S),
 * which S3 clients retry. 1024 connections each holding a writer's window
 * (16 MiB) held up to 16 GiB. Addresses past GW_MEM_ADDRS holding windows
 * at once share the last slot (as GW_XML_ADDRS). */
#define GW_MEM_DEFAULT_MAX (1ull << 30)
#define GW_MEM_MIN (1ull << 20) /* the least --s3-memory taken */
#define GW_MEM_ADDR_DIV 4
#define GW_MEM_ADDRS 1024
#define GW_MEM_RETRY_S "1"
#define GW_BUCKET_MAX 63
#define GW_MARKER_PREFIX ".rio-bucket/"
/* A declared body larger than S3's largest object (5 TiB): 400 EntityTooLarge. */
#define GW_OBJECT_MAX (5ull << 40)
/* The owner ListBuckets and ListObjects name (V2: with fetch-owner=true): one
 * for every bucket and object, the gateway keeps no owners. */
#define GW_OWNER_XML "<Owner><ID>railio</ID><DisplayName>railio</DisplayName></Owner>"

enum gw_op {
    GW_OP_LIST_BUCKETS = 0,
    GW_OP_CREATE_BUCKET,
    GW_OP_HEAD_BUCKET,
    GW_OP_DELETE_BUCKET,
    GW_OP_BUCKET_LOCATION,
    GW_OP_LIST_OBJECTS,
    GW_OP_LIST_OBJECTS_V2,
    GW_OP_GET_OBJECT,
    GW_OP_HEAD_OBJECT,
    GW_OP_PUT_OBJECT,
    GW_OP_COPY_OBJECT,
    GW_OP_DELETE_OBJECT,
    GW_OP_DELETE_OBJECTS,
    GW_OP_CREATE_MPU,
    GW_OP_UPLOAD_PART,
    GW_OP_COMPLETE_MPU,
    GW_OP_ABORT_MPU,
    GW_OP_LIST_PARTS,
    GW_OP_LIST_MPUS,
    GW_OP_BUCKET_VERSIONING,
    GW_OP_UPLOAD_PART_COPY,
    GW_OP_BUCKET_CONFIG, /* GET of a bucket subresource never set (?acl, ?policy, ?cors, ...) */
    GW_OP_OBJECT_CONFIG, /* GET ?acl or ?tagging of an object */
    GW_OP_GET_ATTRIBUTES,
    GW_OP_LIST_VERSIONS, /* ListObjectVersions: every object its one version, "null" */
    GW_OP_POST_OBJECT,   /* an HTML form's upload (post.c) */
    GW_OP_PUT_CORS,      /* a bucket's CORS configuration (corsgw.c) */
    GW_OP_GET_CORS,
    GW_OP_DELETE_CORS,
    GW_OP_PREFLIGHT,   /* OPTIONS: a browser's CORS preflight, not signed */
    GW_OP_PUT_TAGGING, /* an object's tags (tagging.c) */
    GW_OP_GET_TAGGING,
    GW_OP_DELETE_TAGGING,
    GW_OP_PUT_BTAGGING, /* a bucket's tags (tagging.c) */
    GW_OP_GET_BTAGGING,
    GW_OP_DELETE_BTAGGING,
    GW_OP_OTHER,
    GW_OP__COUNT
};
const char *rio__gw_op_name(int op);

/* Body digests checked as the body streams: Content-MD5, x-amz-checksum-*
 * and the signed payload hash. */
#define GW_CHECKS 8

struct gw_req {
    char *uri; /* raw request target, as received */
    const char *method;
    int op;
    int sub; /* GW_OP_BUCKET_CONFIG, GW_OP_OBJECT_CONFIG: rio__gw_subresource's index */
    char bucket[GW_BUCKET_MAX + 1];
    char *key;         /* decoded object key, NULL for bucket/service requests */
    char *bkey;        /* "BUCKET/KEY" on the backend */
    const char *query; /* raw query (into uri), "" if none */
    uint64_t t0;
    char id[17]; /* x-amz-request-id, "" until rio__gw_request_id */
    int started, deferred, done, status;
    int close; /* answer with Connection: close (the request's framing is in doubt) */
    int vhost; /* the bucket came from the Host header (virtual-hosted style) */
    uint64_t bytes_in, bytes_out;
    struct rio_s3_auth auth;
    /* PUT */
    struct rio_writer *w;
    uint64_t declared; /* bytes the body must carry (UINT64_MAX: unknown) */
    uint64_t got;      /* payload bytes so far */
    struct rio_s3_check *ck[GW_CHECKS];
    unsigned nck;
    bool md5_bad; /* the writer checks Content-MD5 (rio__gw_checks_to_writer) */
    /* A conditional PutObject or Complete (If-None-Match: *, If-Match):
     * its commit is made only on cond (RIO_IF_ABSENT or expect_generation:
     * rio__gw_write_conditions); a commit it refused is 412. */
    bool put_cond;
    struct rio_call cond;
    struct rio_s3_chunked *chunked;
    unsigned char *dec; /* aws-chunked: decoded payload */
    /* A one-chunk PutObject's bucket check, running (rio__gw_put_open). */
    struct gw_bucket_check *bcheck;
    /* A PutObject that may write its checksum's record beside the commit:
     * the key's record as it was, read while the body streams in. */
    struct gw_meta_fetch *prior;
    /* A PutObject whose record will follow the commit: the generation of
     * the key's record as it was, read while the body streams in. */
    struct gw_meta_gen *prior_gen;
    /* An error met while the body was still coming: sent at its end. */
    int err_status;
    const char *err_code;
    char err_msg[160];
    /* The query, decoded (gateway.c) */
    char *qbuf;
    unsigned nq;
    struct {
        const char *name, *value;
    } q[GW_QUERY_MAX];
    /* POST ?delete */
    char *buf;
    size_t blen;           /* taken from the XML budgets (gateway.c, xml_take) */
    unsigned char addr[8]; /* the client's address (IPv4, IPv6 /64): its XML share */
    unsigned xml_slot;     /* 1 + the share's slot blen was taken from; 0: none yet */
    uint64_t xml_t0;       /* when its XML body's first bytes came (0: not yet) */
    /* The body buffers' room it holds (bodymem.c): given back at its end */
    uint64_t mem_held;
    unsigned mem_slot; /* 1 + its address's slot; 0: none taken */
    /* When it took that room for an object's body, and bytes_in then: the
     * body must keep coming while room is scarce (gateway.c, body_slow) */
    uint64_t body_t0, body_in0;
    int retry_after; /* its error carries Retry-After: GW_MEM_RETRY_S */
    /* PutObject: the metadata to store; GetObject: the record read (objmeta.c) */
    struct gw_meta *meta;
    /* UploadPartCopy into an upload created with this checksum algorithm
     * ("" none): the copy computes the part's checksum */
    char copy_ck_algo[12];
    /* POST Object: the form and what it asked (post.c) */
    struct gw_post *post;
};

/* gateway.c: for the operations */
struct rio_client *rio__gw_client(void);
int rio__gw_ordered(void); /* the backend lists in key order */
/* The least size of a multipart object's parts but the last (Complete). */
uint64_t rio__gw_min_part(void);
/* PutObject keeps the checksum it checked (--s3-checksums keep). */
int rio__gw_keep_checksums(void);
int rio__gw_user_may(const struct gw_req *r, const char *bucket);
const struct rio_s3_keys *rio__gw_keys(void); /* --s3-keys, NULL when none */
/* What a write is refused with (SSE-C: the first 3 for the object itself,
 * then its copy source's; object lock), and the body digests it checks
 * (Content-MD5 first, then x-amz-checksum-*): header names, which POST
 * forms take as field names too (post.c). */
#define GW_SSEC_NAMES 6
#define GW_LOCK_NAMES 3
#define GW_DIGEST_NAMES 6
extern const char *const rio__gw_ssec_names[GW_SSEC_NAMES];
extern const char *const rio__gw_lock_names[GW_LOCK_NAMES];
/* x-amz-storage-class (a header, or a POST form's field): one of S3's
 * storage class names (accepted, and stored as the gateway's one class,
 * STANDARD), else false: 400 InvalidStorageClass. */
bool rio__gw_storage_class_ok(const char *v);
extern const char *const rio__gw_digest_names[GW_DIGEST_NAMES];
int rio__gw_sigv2(void); /* Signature Version 2 taken (--s3-sigv2 on) */
/* Queue resp with the common headers; frees resp; MHD_YES/MHD_NO. */
/* The request's id (x-amz-request-id, an error's <RequestId>): 16 hex
 * digits, one per request, given on first use. */
const char *rio__gw_request_id(struct gw_req *r);
int rio__gw_send(struct MHD_Connection *c, struct gw_req *r, int status, struct MHD_Response *resp);
int rio__gw_send_xml(struct MHD_Connection *c, struct gw_req *r, int status, char *xml, size_t n);
/* As rio__gw_send_xml, with headers hdrs (name, value, ..., NULL). */
int rio__gw_send_xml_with(struct MHD_Connection *c, struct gw_req *r, int status, char *xml,
                          size_t n, const char *const *hdrs);
int rio__gw_error(struct MHD_Connection *c, struct gw_req *r, int status, const char *code,
                  const char *msg);
/* What the failed call did with the request's key, for rio__gw_rio_error:
 * a key the backend cannot hold (rio__gw_path_error) does not exist for a
 * lookup, and is refused (409 or 400) for a call that stores it. */
enum gw_access {
    GW_LOOKUP, /* looked the key (or its upload, its source) up */
    GW_READS,  /* read or listed: only what cannot be a path is "no such key" */
    GW_WRITES, /* stores the key: such a key is refused */
};
/* The S3 code and *status of a rio error that names no key (not
 * RIO_ENOTFOUND): InsufficientStorage, SlowDown, ..., else InternalError. */
const char *rio__gw_code_of(int err, int *status);
/* The S3 error for a rio error (NoSuchKey, ...); what names the step in the
 * message. */
int rio__gw_rio_error(struct MHD_Connection *c, struct gw_req *r, int err, enum gw_access acc,
                      const char *what);
/* Is err what file:// answers for a key its tree cannot hold (below an
 * object, a directory of other keys, a segment over 255 bytes, an empty,
 * "." or ".." segment, a trailing "/")? Such a key does not exist. */
int rio__gw_path_error(int err);
/* A write's refusal of such a key: S3's status (409 ParentIsObject,
 * ObjectExistsAsDirectory; 400 KeyTooLongError, InvalidArgument), *code
 * and *msg; 0 when err is no such error. */
int rio__gw_write_path_error(int err, const char **code, const char **msg);
const char *rio__gw_header(struct MHD_Connection *c, const char *name);
/* A query parameter, decoded: its value ("" when it has none), NULL if absent. */
const char *rio__gw_arg(const struct gw_req *r, const char *name);

/* Record an error met while the body streams (the first one wins); it is
 * answered once the body is in. */
void rio__gw_fail(struct gw_req *r, int status, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
void rio__gw_checks_update(struct gw_req *r, const void *p, size_t n);
/* Every body check passed: 0; else -1 with the error recorded. */
int rio__gw_checks_done(struct gw_req *r);
/* Hand a Content-MD5 check to the fresh writer r->w, which hashes the bytes
 * for the ETag anyway and compares before it commits (r->md5_bad). */
void rio__gw_checks_to_writer(struct gw_req *r);

/* bodymem.c: the body buffers' budget (GW_MEM_DEFAULT_MAX says what) */
/* Set the budget (bytes, 0: the default) and whether one address has a
 * share of it (per_addr) or may take it all; before the daemon starts. */
void rio__gw_mem_init(uint64_t budget, int per_addr);
/* The default budget: a quarter of physical memory, at most GW_MEM_DEFAULT_MAX. */
uint64_t rio__gw_mem_default(void);
/* The window of a stream over len bytes (UINT64_MAX: unknown) in chunks of
 * chunk bytes, the backend client's depth x paths of them at once;
 * saturates instead of overflowing. */
uint64_t rio__gw_mem_window(uint64_t len, uint64_t chunk);
/* A writer's window for a PUT of len bytes at the backend client's chunk
 * size for that length. */
uint64_t rio__gw_mem_put_window(uint64_t len);
/* a + b, UINT64_MAX at most: room sums saturate. */
static inline uint64_t rio__gw_mem_sum(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}
/* Take n bytes of room for r (added to what it holds): 0, or -1 with
 * nothing taken and the refusal counted. A request holding nothing and
 * alone in its address (or the gateway) gets its room even past the share
 * (or the budget): a window larger than either would never be served. */
int rio__gw_mem_take(struct gw_req *r, uint64_t n);
/* Give back all r holds (any number of times; the first gives). */
void rio__gw_mem_give(struct gw_req *r);
/* Hand what r holds to *slot and *n (r then holds nothing), for a stream
 * that outlives the request's bookkeeping (a GET's reader, closed when
 * libmicrohttpd frees the response); rio__gw_mem_release gives it back. */
void rio__gw_mem_move(struct gw_req *r, unsigned *slot, uint64_t *n);
void rio__gw_mem_release(unsigned slot, uint64_t n);
/* Whether room is scarce: the budget more than half taken (an address's
 * own share taken is not: it keeps no one else out). */
int rio__gw_mem_scarce(void);
/* r's object body took room (its writer's): from now on it waits
 * GW_XML_IDLE_S at most for more, and comes at GW_XML_MIN_RATE while room is
 * scarce (gateway.c). */
void rio__gw_body_held(struct MHD_Connection *c, struct gw_req *r);
/* A GET's answer holding room, watched while room is scarce: a client that
 * reads its answer slower than GW_XML_MIN_RATE from GW_XML_GRACE_S on has
 * its connection shut down (bodymem.c, the sweeper). */
struct gw_mem_stream {
    struct rio_list_node node; /* under the sweeper's lock */
    int fd;                    /* the connection's socket, open while linked */
    uint64_t t0;               /* when the answer began */
    _Atomic uint64_t sent;     /* bytes of it handed to libmicrohttpd */
    bool cut;                  /* shut down once */
};
/* Watch s (fd the connection's socket); unwatch before the response that
 * holds s is freed (libmicrohttpd frees it before it closes the socket). */
void rio__gw_mem_stream_add(struct gw_mem_stream *s, int fd);
void rio__gw_mem_stream_del(struct gw_mem_stream *s);
/* Start and stop the sweeper (rate bytes a second, from grace_s on). */
int rio__gw_mem_sweep_start(uint64_t rate, unsigned grace_s);
void rio__gw_mem_sweep_stop(void);
/* Queue 503 SlowDown with Retry-After for a refused take. */
int rio__gw_mem_refuse(struct MHD_Connection *c, struct gw_req *r);
/* The budget's lines for /metrics. */
void rio__gw_mem_metrics(struct gw_buf *b);

/* ops.c */
int rio__gw_bucket_exists(const char *bucket); /* 1, 0 or an error */
/* 0 when r's bucket exists, else the error response was queued (*ret). */
int rio__gw_need_bucket(struct MHD_Connection *c, struct gw_req *r, int *ret);
int rio__gw_send_empty(struct MHD_Connection *c, struct gw_req *r, int status);
/* Send b's XML (or InternalError when it ran out of memory); frees b. */
int rio__gw_send_buf(struct MHD_Connection *c, struct gw_req *r, int status, struct gw_buf *b);
/* As rio__gw_send_buf, with headers hdrs (name, value, ..., NULL). */
int rio__gw_send_buf_with(struct MHD_Connection *c, struct gw_req *r, int status, struct gw_buf *b,
                          const char *const *hdrs);
int rio__gw_list_buckets(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_create_bucket(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_head_bucket(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_delete_bucket(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_bucket_location(struct MHD_Connection *c, struct gw_req *r);
/* GetBucketVersioning: never enabled (an empty VersioningConfiguration, as
 * S3 answers for a bucket whose versioning was never set). */
int rio__gw_bucket_versioning(struct MHD_Connection *c, struct gw_req *r);
/* The subresource query parameters the gateway answers for a GET though it
 * keeps none of them (docs/gateway.md): the index of r's first one, or -1;
 * *object_ok says whether it is one an object has (?acl, ?tagging). */
int rio__gw_subresource(const struct gw_req *r, int *object_ok);
/* Whether name is one of them (the router lets them through). */
int rio__gw_is_subresource(const char *name);
/* GET of one on a bucket: S3's answer for a configuration never set (404
 * with its code, or the default document), once the bucket is known. */
int rio__gw_bucket_config(struct MHD_Connection *c, struct gw_req *r);
/* GET ?acl (the owner's FULL_CONTROL) or ?tagging (no tags) of an object
 * that exists. */
int rio__gw_object_config(struct MHD_Connection *c, struct gw_req *r);
/* ListObjects (mode GW_LIST_V1), ListObjectsV2 (GW_LIST_V2) and
 * ListObjectVersions (GW_LIST_VERSIONS: an unversioned bucket's, every
 * object its one version "null"). */
enum { GW_LIST_V1 = 0, GW_LIST_V2 = 1, GW_LIST_VERSIONS = 2 };
int rio__gw_list_objects(struct MHD_Connection *c, struct gw_req *r, int mode);
int rio__gw_get_object(struct MHD_Connection *c, struct gw_req *r, int head);
/* GetObjectAttributes (GET ?attributes, x-amz-object-attributes). */
int rio__gw_get_attributes(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_delete_object(struct MHD_Connection *c, struct gw_req *r);
/* CopyObject, and UploadPartCopy (r->op; r->bkey the part's key, the range
 * x-amz-copy-source-range, no metadata, a CopyPartResult). */
int rio__gw_copy_object(struct MHD_Connection *c, struct gw_req *r, const char *src);
/* UploadPartCopy: the part's checks, then rio__gw_copy_object into it. */
int rio__gw_mpu_part_copy(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_delete_objects(struct MHD_Connection *c, struct gw_req *r);
/* PutObject in three steps: open (headers in), body bytes, close. */
int rio__gw_put_open(struct MHD_Connection *c, struct gw_req *r);
/* A write's If-None-Match (only "*": the key must hold no object) and
 * If-Match (the key's object must have one of these ETags: its generation
 * then becomes the commit's condition), as S3 has them for PutObject and
 * CompleteMultipartUpload since 2024. The backend decides them with the
 * commit, so a write between this check and the commit fails it too. 0
 * with r->cond and r->put_cond set (untouched without either header), or
 * -1 with the answer queued (*ret): 404, 412, 501. */
int rio__gw_write_conditions(struct MHD_Connection *c, struct gw_req *r, int *ret);
void rio__gw_put_data(struct gw_req *r, const void *p, size_t n);
int rio__gw_put_close(struct MHD_Connection *c, struct gw_req *r);
void rio__gw_put_cleanup(struct gw_req *r);
/* post.c: POST Object. open once the headers are in (MHD_YES, or the error
 * queued); data for each piece of the body; close at its end (commits
 * through rio__gw_put_close, which answers with rio__gw_post_answer);
 * free when the request ends. */
struct gw_post;
int rio__gw_post_open(struct MHD_Connection *c, struct gw_req *r);
void rio__gw_post_data(struct gw_req *r, const void *p, size_t n);
int rio__gw_post_close(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_post_answer(struct MHD_Connection *c, struct gw_req *r, const char *etag);
void rio__gw_post_free(struct gw_req *r);
/* The object's URL, http://HOST/BUCKET/KEY with the request's Host when it
 * is a plain host[:port] (else just the path), the key percent-encoded but
 * for '/', as S3's (multipart.c: Complete's Location). */
void rio__gw_object_url(struct MHD_Connection *c, const struct gw_req *r, struct gw_buf *b);

struct rio_entry;

/* multipart.c: uploads under ".rio-mpu/BUCKET/UPLOADID" (the key) and
 * their parts ".rio-mpu/BUCKET/UPLOADID.p/NNNNN" on the backend. */
#define GW_MPU_PREFIX ".rio-mpu/"
#define GW_MPU_PARTDIR ".p/"
#define GW_MPU_CKSUFFIX ".ck" /* a part's checksum: ".rio-mpu/B/ID.p/NNNNN.ck" */
/* Keep the checksum (algo, base64 value) part part_bkey (whose backend etag
 * is etag) matched, beside it; 0 or an error. */
int rio__gw_part_checksum_store(const char *part_bkey, const char *etag, const char *algo,
                                const char *value);
/* The largest part UploadPart writes as one chunk (ops.c, part_chunk). */
#define GW_PART_CHUNK_MAX (16ull << 20)
#define GW_MPU_PARTS_MAX 10000u
#define GW_MIN_PART (5ull << 20) /* S3's least part size, all parts but the last */
int rio__gw_mpu_create(struct MHD_Connection *c, struct gw_req *r);
/* UploadPart: r->bkey becomes the part's key, then rio__gw_put_open. */
int rio__gw_mpu_part_open(struct MHD_Connection *c, struct gw_req *r);
/* After an UploadPart(Copy)'s commit: 0 while its upload is still there;
 * RIO_ENOTFOUND when an Abort or Complete took it meanwhile (the part, and
 * its checksum, are dropped: nothing would ever reach them), another error
 * when it cannot be told. */
int rio__gw_mpu_part_landed(const struct gw_req *r);
int rio__gw_mpu_complete(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_mpu_abort(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_mpu_list_parts(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_mpu_list_uploads(struct MHD_Connection *c, struct gw_req *r);
/* Every backend key under prefix, in pages; fn(arg, entry) for each until
 * one returns non-zero. 0, fn's value or a listing error. */
int rio__gw_each_key(const char *prefix, unsigned flags,
                     int (*fn)(void *arg, const struct rio_entry *e), void *arg);
/* An rio__gw_each_key fn: delete the entry (not a directory), errors ignored. */
int rio__gw_drop_entry(void *arg, const struct rio_entry *e);

/* objmeta.c: object metadata records ".rio-meta/BUCKET/<SHA-256 of KEY>"
 * (meta.h, docs/gateway.md "Object metadata"). */
#define GW_META_KEY_MAX 160
int rio__gw_meta_key(const char *bucket, const char *key, char out[GW_META_KEY_MAX]);
/* The x-amz-meta-* and content headers of the request: 0 and *out, or -1
 * with the error response queued (*ret): MetadataTooLarge, InvalidArgument. */
int rio__gw_meta_from_request(struct MHD_Connection *c, struct gw_req *r, struct gw_meta **out,
                              int *ret);
/* One header (or POST form field) into m when it is metadata: x-amz-meta-*,
 * Content-Type and the other content headers; others are ignored. 0, or
 * GW_META_E* / -ENOMEM. */
int rio__gw_meta_from_pair(struct gw_meta *m, const char *name, const char *value);
/* The generation of BUCKET/KEY's record, read on the fetch pool while a
 * PutObject's body comes in: start (NULL when out of memory), then end (0
 * and *gen, 0 when there is no record; or an error; frees p) or cancel. */
struct gw_meta_gen;
struct gw_meta_gen *rio__gw_meta_gen_start(const char *bucket, const char *key);
int rio__gw_meta_gen_end(struct gw_meta_gen *p, uint64_t *gen);
void rio__gw_meta_gen_cancel(struct gw_meta_gen *p);
/* Write m as the record of BUCKET/KEY, the object d (just committed): no
 * write when m is all defaults. On the condition that the key's record is
 * still the one it was before the commit (prior's, taken; NULL: read now),
 * where the backend decides conditions: when another writer wrote it
 * since, m is written only while the key's object is still d (a PUT that
 * lost the race to the key leaves the winner's record). 0 or an error
 * (logged). */
int rio__gw_meta_store(const char *bucket, const char *key, struct gw_meta_gen *prior,
                       struct gw_meta *m, const struct rio_desc *d);
/* The record of BUCKET/KEY if it describes the object d, else NULL (none,
 * malformed: logged, or another version's). *sure (when not NULL): 1 when
 * the answer is what the backend holds, 0 after a failure to read it. */
struct gw_meta *rio__gw_meta_load(const char *bucket, const char *key, const struct rio_desc *d,
                                  int *sure);
/* A record read started before the object's lookup, so that both round
 * trips run at once: start (post: on the fetch pool, else when asked; NULL
 * when out of memory), then end (the record if it describes d, as
 * rio__gw_meta_load; frees f) or cancel (frees f). NULL f: end gives NULL,
 * not sure. The pool: started and stopped with the gateway. */
struct gw_meta_fetch;
struct gw_meta_fetch *rio__gw_meta_fetch_start(const char *bucket, const char *key, int post);
struct gw_meta *rio__gw_meta_fetch_end(struct gw_meta_fetch *f, const struct rio_desc *d,
                                       int *sure);
void rio__gw_meta_fetch_cancel(struct gw_meta_fetch *f);
/* What the fetch read, whatever version it describes: 1 and the record's
 * bytes (*rec, the caller's to free, *len of them), 0 when the key has no
 * record, or an error (the answer unknown); frees f (NULL: -ENOMEM). */
int rio__gw_meta_fetch_take(struct gw_meta_fetch *f, char **rec, size_t *len);
/* A bucket's existence checked on the same pool while a request goes on
 * (a one-chunk PutObject's body streams): start (NULL when out of memory:
 * end then checks here), end (rio__gw_bucket_exists's answer; frees b) or
 * cancel (frees b). */
struct gw_bucket_check;
struct gw_bucket_check *rio__gw_bucket_check_start(const char *bucket);
int rio__gw_bucket_check_end(struct gw_bucket_check *b, const char *bucket);
void rio__gw_bucket_check_cancel(struct gw_bucket_check *b);
int rio__gw_meta_fetch_pool_start(void);
void rio__gw_meta_fetch_pool_stop(void);
/* Parse a record read from what (a key, for the log); NULL (logged) when it
 * is not one. *rec_bkey (when not NULL): the backend key it names. */
struct gw_meta *rio__gw_meta_parse_logged(const char *what, const char *p, size_t n,
                                          char **rec_bkey);
/* Remove the record of BUCKET/KEY (best effort, logged). */
void rio__gw_meta_drop(const char *bucket, const char *key);
/* The same, only while it is generation gen (another writer's record
 * written since stays; a backend that cannot decide it: removed). */
void rio__gw_meta_drop_if(const char *bucket, const char *key, uint64_t gen);
/* Remove the records named mkeys[0..n), each only while it is generation
 * gens[i] (read before its object went), or whatever it is when have[i]
 * is 0 (it could not be read) or the backend cannot decide it (best
 * effort, logged). */
void rio__gw_meta_drop_keys(char (*mkeys)[GW_META_KEY_MAX], const uint64_t *gens,
                            const uint8_t *have, unsigned n);
/* A record that depends on the object's bytes alone (its checksum, no other
 * metadata: rio__gw_meta_bytes_only) written beside the object's commit:
 * m's identity becomes size and etag (the MD5), generation unknown (a
 * later PUT of the same bytes has the same checksum), and a pool thread
 * writes it. prior (taken over, freed): the key's record before, prior_len
 * bytes, or NULL when it had none. End waits for it and gives its result
 * (-ENOMEM when start could not allocate); failed: the object's commit
 * failed, so the record is not written if not started, and if it was,
 * the key's record goes back to prior (or, with none, the new one goes),
 * unless another writer wrote it since. */
struct gw_meta_put;
struct gw_meta_put *rio__gw_meta_store_start(const char *bucket, const char *key, struct gw_meta *m,
                                             uint64_t size, const char *etag, char *prior,
                                             size_t prior_len);
int rio__gw_meta_store_end(struct gw_meta_put *p, int failed);
/* Remove every record of a bucket (best effort). */
void rio__gw_meta_drop_bucket(const char *bucket);
/* The ETag to present: the record's, else the backend's etag. */
const char *rio__gw_meta_etag(const struct gw_meta *m, const char *etag);
/* Content-Type (the default without a record), the stored content headers
 * and x-amz-meta-* of m (NULL: the defaults). */
void rio__gw_meta_headers(struct MHD_Response *resp, const struct gw_meta *m);
/* A whole object's answer to a request with x-amz-checksum-mode: ENABLED:
 * the checksum m records (x-amz-checksum-ALGO and x-amz-checksum-type),
 * when it records one. */
void rio__gw_checksum_headers(struct MHD_Connection *c, struct MHD_Response *resp,
                              const struct gw_meta *m);
/* Whether the request says its body carries an x-amz-checksum-* (the
 * header, or x-amz-trailer naming one): 1 or 0. */
int rio__gw_checksum_coming(struct MHD_Connection *c);
/* The x-amz-checksum-* the request's body carried and matched (a header,
 * else the aws-chunked trailer): its algorithm ("crc32", ...) and base64
 * value copied into algo and value; 1, or 0 when none. Call once the body
 * is checked, before the decoder is freed. */
int rio__gw_sent_checksum(struct MHD_Connection *c, const struct gw_req *r, char algo[12],
                          char value[64]);
/* A listing page of bucket: each entry's etag becomes its record's ETag. */
/* And, when ck is not NULL (p->n of them), each entry's checksum
 * algorithm ("" none) and whether the checksum is composite, from the
 * same records (ListObjects' ChecksumAlgorithm and ChecksumType). */
struct gw_list_ck {
    char algo[12];
    bool composite;
};
void rio__gw_meta_list_etags(const char *bucket, struct rio_list_page *p, struct gw_list_ck *ck);
void rio__gw_meta_free(struct gw_meta *m);

/* xml.c */
struct gw_buf {
    char *p;
    size_t len, cap;
    int oom;
};
void rio__gw_buf_put(struct gw_buf *b, const char *s, size_t n);
void rio__gw_buf_printf(struct gw_buf *b, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void rio__gw_buf_xml(struct gw_buf *b, const char *s); /* escaped text */
/* <ETag>&quot;etag&quot;</ETag>, etag escaped: it comes from the backend
 * (a listing's entry, a part's record), which is no trusted source of
 * markup. */
void rio__gw_buf_etag(struct gw_buf *b, const char *etag);
/* Text of a listing: s XML-escaped, or URL-encoded when url
 * (encoding-type=url: every byte but unreserved ones and '/', which leaves
 * nothing to escape for XML). */
void rio__gw_list_text(struct gw_buf *b, const char *s, int url);
/* <tag>rio__gw_list_text</tag> */
void rio__gw_list_elem(struct gw_buf *b, const char *tag, const char *s, int url);
/* m's kept checksum as S3's elements, <ChecksumALGO> and <ChecksumType>
 * (Complete's answer, GetObjectAttributes): 1, or 0 when m has none. */
int rio__gw_checksum_xml(struct gw_buf *b, const struct gw_meta *m);
/* A listing's delimiter (*delim: NULL for none; any one when any_delim,
 * else only "/", others 501; at most GW_DELIM_MAX bytes, else 400) and
 * encoding-type (*url: "url", else 400): 0, or -1 with the error queued
 * (*ret). */
#define GW_DELIM_MAX 64
int rio__gw_list_options(struct MHD_Connection *c, struct gw_req *r, int any_delim,
                         const char **delim, int *url, int *ret);
void rio__gw_buf_free(struct gw_buf *b);
/* Percent-decode n bytes of s into a new string; NULL on a bad escape or a
 * NUL byte. plus: '+' is a space (query strings). */
char *rio__gw_unescape(const char *s, size_t n, int plus);
/* s is UTF-8 (no overlong form, surrogate or code point past U+10FFFF): 1, else
 * 0. S3 refuses a key that is not (400 InvalidURI): XML cannot carry it, so
 * every listing that held it would be no XML at all. */
int rio__gw_utf8_valid(const char *s);
/* The same for len bytes of s (an XML body: one that is not is no XML). */
int rio__gw_utf8_valid_n(const char *s, size_t len);
/* RFC 7231 date (IMF-fixdate) of unix seconds; 30 bytes. */
void rio__gw_http_date(int64_t sec, char out[30]);
/* ISO 8601 with milliseconds, as S3's listings ("2026-12-02T08:00:00.000Z"). */
void rio__gw_iso_date(int64_t ns, char out[32]);
/* Parse an HTTP date (IMF-fixdate, RFC 850, asctime); -1 if none. */
int64_t rio__gw_parse_http_date(const char *s);
/* An HTTP date, or ISO 8601 in UTC as S3 writes timestamps
 * ("2026-12-02T08:00:00Z", with or without ".mmm"): unix seconds, -1 if
 * neither. */
int64_t rio__gw_parse_date(const char *s);
/* ISO 8601 in UTC, exactly "YYYY-MM-DDTHH:MM:SSZ" or with a fraction of 1
 * to 9 digits before the Z (a POST policy's expiration, a DeleteObjects'
 * LastModifiedTime): unix seconds, -1 if not. */
int64_t rio__gw_parse_iso(const char *s);
/* Standard base64 decode into out (cap); the length or -1. */
int rio__gw_b64dec(const char *s, unsigned char *out, size_t cap);
int rio__gw_valid_bucket(const char *name);
/* A count in a query parameter or header: decimal digits only (no sign, no
 * blank), at most max. 0 with *out, or -1. */
int rio__gw_parse_count(const char *s, uint64_t max, uint64_t *out);
/* GetObjectAttributes' names (x-amz-object-attributes): the mask of a
 * comma-separated list of them (spaces and tabs around), 0 when it names
 * none, -1 when it names anything else. */
enum {
    GW_ATTR_ETAG = 1,
    GW_ATTR_CHECKSUM = 2,
    GW_ATTR_PARTS = 4,
    GW_ATTR_CLASS = 8,
    GW_ATTR_SIZE = 16
};
int rio__gw_attr_mask(const char *v);
/* The XML text of every <tag>...</tag> in body, unescaped, called in order
 * (a nonzero return of fn stops it and is returned; -1 for a tag left open,
 * an element inside one, or text that cannot be unescaped). */
int rio__gw_xml_each(const char *body, size_t n, const char *tag,
                     int (*fn)(void *arg, const char *text), void *arg);
/* The same, each element's content as it is in body (len bytes, escaped,
 * with any elements inside it). */
int rio__gw_xml_each_raw(const char *body, size_t n, const char *tag,
                         int (*fn)(void *arg, const char *raw, size_t len), void *arg);
/* 0 when body is one well-formed element named root (an XML declaration
 * and blanks around it; attributes; references in text that
 * rio__gw_xml_each unescapes; no comment, DTD, CDATA or processing
 * instruction; at most 16 deep), else -1: what S3 answers MalformedXML. */
int rio__gw_xml_wellformed(const char *body, size_t n, const char *root);
/* XML's white space (S: space, tab, CR, LF), for xml.c and xmlenc.c. */
static inline int rio__gw_xml_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}
/* xmlenc.c: body in UTF-8, as the reader above takes it, by the encoding
 * its XML declaration names. 0: body is UTF-8 as it is (no declaration,
 * UTF-8, US-ASCII, or ISO-8859-1 of ASCII bytes only); 1: an ISO-8859-1
 * body transcoded into *out (rio__free; *outlen bytes and a NUL, at most
 * twice n); -1: an encoding the gateway does not read, its name in enc
 * (cap bytes, cut short; '?' for a byte no encoding name has); -ENOMEM. */
#define GW_XML_ENC_MAX 32
int rio__gw_xml_utf8(const char *body, size_t n, char **out, size_t *outlen, char *enc, size_t cap);
/* For a body rio__gw_xml_wellformed accepted: the root element's content
 * (*inner, *len bytes; empty for <Root/>). 0, or -1. */
int rio__gw_xml_root(const char *body, size_t n, const char **inner, size_t *len);
/* Each element directly inside raw (the content of a well-formed element),
 * in order: its name (nlen bytes) and content (ilen bytes, escaped, with
 * any elements inside it). A nonzero return of fn stops it and is
 * returned; -1 for text beside the elements (blanks aside). */
int rio__gw_xml_children(const char *raw, size_t n,
                         int (*fn)(void *arg, const char *name, size_t nlen, const char *inner,
                                   size_t ilen),
                         void *arg);
/* An element's content as text: unescaped, a new string in *out
 * (rio__free). 0; -1 when it holds an element, a NUL or a reference the
 * reader does not take; -ENOMEM. */
int rio__gw_xml_text(const char *raw, size_t len, char **out);

/* tagxml.c: an object's tags as S3's Tagging document. from_xml replaces
 * m's tags with a PutObjectTagging body's: 0, RIO_EINVAL with S3's *code
 * ("MalformedXML", "InvalidTag", "BadRequest": more than 10) and *why
 * (static text), -ENOMEM; m then has none. tags_xml: the document of m's
 * (NULL: none), appended to b. */
int rio__gw_tags_from_xml(const char *xml, size_t n, struct gw_meta *m, const char **code,
                          const char **why);
void rio__gw_tags_xml(const struct gw_meta *m, struct gw_buf *b);

/* A bucket's own records (its CORS rules, its tags): the backend object
 * PREFIX + BUCKET. get: 1 with the record's bytes (*out, NUL-terminated,
 * rio__free; at most max: more is an error of the read), 0 when there is
 * none, or an error; put: write it, then RIO_ENOTFOUND (the record removed
 * again) when the bucket is gone by then, so that none is left for a
 * bucket made again under the name; drop: remove it (0 when none). */
#define GW_BUCKET_REC_KEY_MAX 128
int rio__gw_bucket_rec_get(const char *prefix, const char *bucket, size_t max, char **out,
                           size_t *len);
int rio__gw_bucket_rec_put(const char *prefix, const char *bucket, const char *rec, size_t len);
int rio__gw_bucket_rec_drop(const char *prefix, const char *bucket);

/* tagging.c: a bucket's tags (PutBucketTagging, GetBucketTagging,
 * DeleteBucketTagging; btags_drop removes them: DeleteBucket, CreateBucket,
 * as rio__gw_cors_drop). */
int rio__gw_put_bucket_tagging(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_get_bucket_tagging(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_delete_bucket_tagging(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_btags_drop(const char *bucket);

/* tagging.c: PutObjectTagging, GetObjectTagging, DeleteObjectTagging.
 * tag_code (tagxml.c): S3's code for rio__gw_meta_tags_from_query's or
 * rio__gw_meta_add_tag's error err with its why. */
const char *rio__gw_tag_code(int err, const char *why);
int rio__gw_put_tagging(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_get_tagging(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_delete_tagging(struct MHD_Connection *c, struct gw_req *r);

/* corsgw.c: a bucket's CORS configuration (cors.h). cors_headers adds
 * to resp the headers of the rule that lets r's Origin use r's method, if
 * any (a request naming a bucket; not the preflight, which answers them
 * itself); cors_drop removes a bucket's configuration (DeleteBucket, and
 * CreateBucket: one a racing PutBucketCors left); cors_clear empties the
 * cache (at stop). */
int rio__gw_put_bucket_cors(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_get_bucket_cors(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_delete_bucket_cors(struct MHD_Connection *c, struct gw_req *r);
int rio__gw_preflight(struct MHD_Connection *c, struct gw_req *r);
void rio__gw_cors_headers(struct MHD_Connection *c, const struct gw_req *r,
                          struct MHD_Response *resp);
int rio__gw_cors_drop(const char *bucket);
void rio__gw_cors_clear(void);

/* headcache.c: recently read descriptors, a hint a GET verifies by reading
 * (docs/gateway.md), and the metadata records of their generations.
 * get: 1 with a copy in *d (rio_desc_cleanup) and the mtime, 0 on a miss;
 * put: a lookup's answer, keep a copy (objects a read can prove stale only;
 * a live entry of the same generation stays as it is); wrote: the object d
 * just committed through this gateway, whose record is m (NULL: none);
 * drop: forget key (after a write of it); clear: forget all (at stop).
 * Records: epoch is taken before a lookup; meta: 1 with *m a copy of the
 * record of the object d (NULL: it has none), 0 when not cached; set_meta:
 * keep m (NULL: none) as the record of d, unless the entry was written or
 * dropped since epoch. Thread-safe. */
int rio__gw_head_get(const char *key, struct rio_desc *d, int64_t *mtime_ns);
void rio__gw_head_put(const char *key, const struct rio_desc *d, int64_t mtime_ns);
void rio__gw_head_wrote(const char *key, const struct rio_desc *d, int64_t mtime_ns,
                        const struct gw_meta *m);
void rio__gw_head_drop(const char *key);
void rio__gw_head_clear(void);
uint64_t rio__gw_head_epoch(const char *key);
int rio__gw_head_meta_known(const char *key); /* a live entry of key holds its record */
int rio__gw_head_meta(const char *key, const struct rio_desc *d, struct gw_meta **m);
void rio__gw_head_set_meta(const char *key, const struct rio_desc *d, const struct gw_meta *m,
                           uint64_t epoch);
void rio__gw_head_ttl(uint64_t ns); /* at start: 0 off, UINT64_MAX the default */
void rio__gw_head_counts(uint64_t *hits, uint64_t *misses);
void rio__gw_head_meta_counts(uint64_t *hits, uint64_t *misses); /* records */

#endif
