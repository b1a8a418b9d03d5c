/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The S3 gateway's HTTP side (docs/gateway.md): libmicrohttpd with one thread
 * per connection (a handler blocks in the engine's writer and reader, never
 * the other connections), keep-alive, pipelined requests answered in order,
 * Expect: 100-continue (the 100 goes out only once the request passed its
 * checks) and chunked request bodies. Every request: its target taken raw
 * (the URI log callback), bounded, routed to an operation, authenticated,
 * answered, then logged on one line and counted in /metrics.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/engine.h"
#include "proto/tls.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "server/s3/gw.h"
#include "server/server.h"

#define GW_CONN_TIMEOUT_S 120
#define GW_CONN_MEMORY (256u * 1024u)
#define NLAT 8

static const double lat_bounds[NLAT - 1] = {0.001, 0.005, 0.025, 0.1, 0.5, 2.5, 10};

static struct {
    struct MHD_Daemon *d;
    struct rio_client *client;
    struct rio_s3_keys *keys;
    int anonymous;
    int ordered;
    pthread_mutex_t client_mu;
    char *backend;            /* for a client opened at the first request */
    char *domain;             /* --s3-domain, or NULL */
    uint64_t min_part;        /* --s3-min-part-size */
    int check_only;           /* --s3-checksums check */
    int no_sigv2;             /* --s3-sigv2 off */
    char *tls_cert, *tls_key; /* --s3-tls-cert, --s3-tls-key: their PEM text */
    size_t tls_key_len;
    _Atomic uint64_t req[GW_OP__COUNT][6]; /* by status class 1xx..5xx, [0] other */
    _Atomic uint64_t bytes_in[GW_OP__COUNT], bytes_out[GW_OP__COUNT];
    _Atomic uint64_t lat[GW_OP__COUNT][NLAT];
    _Atomic uint64_t lat_us_sum[GW_OP__COUNT];
    _Atomic uint64_t next_id;
    /* Bytes of XML bodies held: in all (GW_XML_BODIES_MAX) and by each
     * client address holding any (GW_XML_ADDR_MAX); under xml_mu. */
    pthread_mutex_t xml_mu;
    uint64_t xml_held;
    struct {
        unsigned char addr[8];
        uint64_t held; /* 0: free */
    } xml_addr[GW_XML_ADDRS];
    /* How fast a held XML body must come (GW_XML_MIN_RATE ...), set at start */
    uint64_t xml_rate;
    unsigned xml_grace_s, xml_idle_s;
} g = {.client_mu = PTHREAD_MUTEX_INITIALIZER, .xml_mu = PTHREAD_MUTEX_INITIALIZER};

/* clang-format off */
static const char *const op_names[GW_OP__COUNT] = {
    "ListBuckets",          "CreateBucket",
    "HeadBucket",           "DeleteBucket",
    "GetBucketLocation",    "ListObjects",
    "ListObjectsV2",        "GetObject",
    "HeadObject",           "PutObject",
    "CopyObject",           "DeleteObject",
    "DeleteObjects",        "CreateMultipartUpload",
    "UploadPart",           "CompleteMultipartUpload",
    "AbortMultipartUpload", "ListParts",
    "ListMultipartUploads", "GetBucketVersioning",
    "UploadPartCopy",       "GetBucketConfig",
    "GetObjectConfig",      "GetObjectAttributes",
    "ListObjectVersions",   "PostObject",
    "PutBucketCors",        "GetBucketCors",
    "DeleteBucketCors",     "PreflightRequest",
    "PutObjectTagging",     "GetObjectTagging",
    "DeleteObjectTagging",  "PutBucketTagging",
    "GetBucketTagging",     "DeleteBucketTagging",
    "Other"};
/* clang-format on */

const char *rio__gw_op_name(int op)
{
    return op >= 0 && op < GW_OP__COUNT ? op_names[op] : "Other";
}

struct rio_client *rio__gw_client(void)
{
    return g.client;
}

int rio__gw_keep_checksums(void)
{
    return !g.check_only;
}

uint64_t rio__gw_min_part(void)
{
    return g.min_part;
}

int rio__gw_ordered(void)
{
    return g.ordered;
}

const struct rio_s3_keys *rio__gw_keys(void)
{
    return g.keys;
}

int rio__gw_sigv2(void)
{
    return !g.no_sigv2;
}

int rio__gw_user_may(const struct gw_req *r, const char *bucket)
{
    if (r->auth.anonymous && g.anonymous)
        return 1; /* --s3-anonymous: every bucket */
    if (!g.keys)
        return 0;
    return rio_s3_user_may(g.keys, r->auth.anonymous ? "" : r->auth.access_key, bucket);
}

/* ------------------------------------------------------------ responses */

const char *rio__gw_header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

const char *rio__gw_arg(const struct gw_req *r, const char *name)
{
    for (unsigned i = 0; i < r->nq; i++)
        if (strcmp(r->q[i].name, name) == 0)
            return r->q[i].value;
    return NULL;
}

const char *rio__gw_request_id(struct gw_req *r)
{
    if (!r->id[0])
        snprintf(r->id, sizeof(r->id), "%016llx",
                 (unsigned long long)atomic_fetch_add(&g.next_id, 1));
    return r->id;
}

int rio__gw_send(struct MHD_Connection *c, struct gw_req *r, int status, struct MHD_Response *resp)
{
    enum MHD_Result ret;

    if (!resp)
        return MHD_NO;
    MHD_add_response_header(resp, "x-amz-request-id", rio__gw_request_id(r));
    /* S3's second request id (HostId in its error XML): the same here,
     * one server answering. */
    MHD_add_response_header(resp, "x-amz-id-2", rio__gw_request_id(r));
    MHD_add_response_header(resp, "Server", "railiod");
    rio__gw_cors_headers(c, r, resp); /* from a browser: its bucket's CORS rule */
    if (r->close)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONNECTION, "close");
    r->status = status;
    r->done = 1;
    ret = MHD_queue_response(c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    return ret;
}

int rio__gw_send_xml_with(struct MHD_Connection *c, struct gw_req *r, int status, char *xml,
                          size_t n, const char *const *hdrs)
{
    struct MHD_Response *resp = MHD_create_response_from_buffer(n, xml, MHD_RESPMEM_MUST_COPY);

    r->bytes_out += n;
    if (resp) {
        MHD_add_response_header(resp, "Content-Type", "application/xml");
        for (; hdrs && hdrs[0]; hdrs += 2)
            MHD_add_response_header(resp, hdrs[0], hdrs[1]);
    }
    return rio__gw_send(c, r, status, resp);
}

int rio__gw_send_xml(struct MHD_Connection *c, struct gw_req *r, int status, char *xml, size_t n)
{
    return rio__gw_send_xml_with(c, r, status, xml, n, NULL);
}

int rio__gw_error(struct MHD_Connection *c, struct gw_req *r, int status, const char *code,
                  const char *msg)
{
    struct gw_buf b = {0};
    /* A key that is no UTF-8 (refused, InvalidURI) would make this no XML. */
    const char *key = r->key && rio__gw_utf8_valid(r->key) ? r->key : NULL;
    int ret;

    rio__gw_buf_printf(&b,
                       "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>%s</Code>"
                       "<Message>",
                       code);
    rio__gw_buf_xml(&b, msg);
    rio__gw_buf_put(&b, "</Message>", 10);
    if (r->bucket[0]) {
        rio__gw_buf_put(&b, "<BucketName>", 12);
        rio__gw_buf_xml(&b, r->bucket);
        rio__gw_buf_put(&b, "</BucketName>", 13);
    }
    if (key) {
        rio__gw_buf_put(&b, "<Key>", 5);
        rio__gw_buf_xml(&b, key);
        rio__gw_buf_put(&b, "</Key>", 6);
    }
    if (r->bucket[0]) { /* S3's Resource: the path of what the request named */
        rio__gw_buf_put(&b, "<Resource>/", 11);
        rio__gw_buf_xml(&b, r->bucket);
        if (key) {
            rio__gw_buf_put(&b, "/", 1);
            rio__gw_buf_xml(&b, key);
        }
        rio__gw_buf_put(&b, "</Resource>", 11);
    }
    rio__gw_buf_printf(&b, "<RequestId>%s</RequestId><HostId>%s</HostId></Error>\n",
                       rio__gw_request_id(r), rio__gw_request_id(r));
    if (b.oom) {
        rio__gw_buf_free(&b);
        return MHD_NO;
    }
    SRV_DEBUG("s3: %s %d %s: %s", r->method, status, code, msg);
    /* A refusal for want of room (bodymem.c) says when to come back. */
    static const char *const retry[] = {"Retry-After", GW_MEM_RETRY_S, NULL};
    ret = rio__gw_send_xml_with(c, r, status, b.p, b.len, r->retry_after ? retry : NULL);
    rio__gw_buf_free(&b);
    return ret;
}

int rio__gw_path_error(int err)
{
    return err == -ENOTDIR || err == -EISDIR || err == -ENAMETOOLONG || err == RIO_EINVAL;
}

int rio__gw_write_path_error(int err, const char **code, const char **msg)
{
    if (!rio__gw_path_error(err))
        return 0;
    switch (err) {
    case -ENOTDIR:
        *code = "ParentIsObject";
        *msg = "A parent of this key is an object: this backend keeps keys as paths.";
        return 409;
    case -ENAMETOOLONG:
        *code = "KeyTooLongError";
        *msg = "A segment of this key (between two \"/\") is too long for a file name on this "
               "backend.";
        return 400;
    case -EISDIR:
        *code = "ObjectExistsAsDirectory";
        *msg = "This key is a directory on this backend, which keeps keys as paths: other keys "
               "are below it.";
        return 409;
    default:
        *code = "InvalidArgument";
        *msg = "This backend cannot store this key: an empty, \".\" or \"..\" segment, or a "
               "trailing \"/\".";
        return 400;
    }
}

int rio__gw_rio_error(struct MHD_Connection *c, struct gw_req *r, int err, enum gw_access acc,
                      const char *what)
{
    char msg[160];
    const char *pcode, *pmsg;
    int status;

    snprintf(msg, sizeof(msg), "%s: %s", what, rio_strerror(err));
    if (r->key && rio__gw_path_error(err)) {
        /* file:// and keys its tree cannot hold (S3's flat keys have no
         * such conflict): a read finds no such key, a write is refused. */
        if (acc == GW_LOOKUP || (acc == GW_READS && err != RIO_EINVAL))
            err = RIO_ENOTFOUND;
        else if (acc == GW_WRITES && (status = rio__gw_write_path_error(err, &pcode, &pmsg)))
            return rio__gw_error(c, r, status, pcode, pmsg);
    }
    if (err == RIO_ENOTFOUND)
        return r->key ? rio__gw_error(c, r, 404, "NoSuchKey", "The specified key does not exist.")
                      : rio__gw_error(c, r, 404, "NoSuchBucket",
                                      "The specified bucket does not exist.");
    const char *code = rio__gw_code_of(err, &status);
    if (status == 500)
        SRV_WARN("s3: %s: %s", what, rio_strerror(err));
    return rio__gw_error(c, r, status, code, msg);
}

const char *rio__gw_code_of(int err, int *status)
{
    switch (err) {
    case -ENOSPC:
    case -EFBIG:
        *status = 507;
        return "InsufficientStorage";
    case RIO_ETHROTTLE:
    case RIO_EBUSY:
        *status = 503;
        return "SlowDown";
    case RIO_ENOTSUP:
        *status = 501;
        return "NotImplemented";
    case -EACCES:
        *status = 403;
        return "AccessDenied";
    default:
        *status = 500;
        return "InternalError";
    }
}

static int open_client(void);

/* ------------------------------------------------------------- requests */

static void *uri_log(void *cls, const char *uri, struct MHD_Connection *c)
{
    struct gw_req *r = rio__calloc(1, sizeof(*r));

    (void)cls;
    (void)c;
    if (!r)
        return NULL;
    r->t0 = rio__now_ns();
    r->op = GW_OP_OTHER;
    r->uri = strlen(uri) <= GW_URI_MAX ? rio__strdup(uri) : NULL;
    return r;
}

/* Split r->uri's query into decoded parameters; 0, or -1 when malformed. */
static int parse_query(struct gw_req *r)
{
    char *save = NULL, *tok;

    r->qbuf = rio__strdup(r->query);
    if (!r->qbuf)
        return -1;
    for (tok = strtok_r(r->qbuf, "&", &save); tok; tok = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(tok, '='), *n, *v;
        if (r->nq == GW_QUERY_MAX)
            return -1;
        if (eq)
            *eq = '\0';
        n = rio__gw_unescape(tok, strlen(tok), 1);
        v = rio__gw_unescape(eq ? eq + 1 : "", eq ? strlen(eq + 1) : 0, 1);
        if (!n || !v || strlen(n) >= strlen(tok) + 1 || strlen(v) > strlen(eq ? eq + 1 : "")) {
            rio__free(n);
            rio__free(v);
            return -1;
        }
        /* decoded text is never longer than its escaped form: write it back */
        strcpy(tok, n);
        if (eq)
            strcpy(eq + 1, v);
        rio__free(n);
        rio__free(v);
        r->q[r->nq].name = tok;
        r->q[r->nq].value = eq ? eq + 1 : "";
        r->nq++;
    }
    return 0;
}

/* Query parameters an operation may carry without being something else
 * (subresources like ?acl, ?uploads, ?tagging are NotImplemented). */
static int known_param(const char *name)
{
    static const char *const ok[] = {
        "list-type", "prefix", "delimiter", "continuation-token", "max-keys", "start-after",
        "marker", "encoding-type", "fetch-owner", "x-id", "response-content-type",
        "response-content-disposition", "response-cache-control", "response-content-encoding",
        "response-content-language", "response-expires", "delete", "uploads", "uploadId",
        "partNumber", "max-parts", "part-number-marker", "max-uploads", "key-marker",
        "upload-id-marker", "location", "versioning", "max-buckets", "AWSAccessKeyId", "Signature",
        "Expires", "attributes", "versions", "version-id-marker", "versionId",
        /* botocore's SigV2 presigned URL repeats the
         * headers it signed; the headers count */
        "content-type", "content-md5"};
    if (strncasecmp(name, "X-Amz-", 6) == 0 || rio__gw_is_subresource(name))
        return 1;
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (strcmp(name, ok[i]) == 0)
            return 1;
    return 0;
}

/* A parameter S3 does not know is ignored on a read (GET, HEAD), as S3
 * does: a cache-buster (?v=2, ?_=1700000000) on a link to an object. The
 * subresources S3 has and the gateway does not are never ignored (501), nor
 * is anything unknown on a write, which could then do something else than
 * asked. */
static int ignored_param(const struct gw_req *r, const char *name)
{
    static const char *const s3_subs[] = {"torrent",       "restore",
                                          "select",        "select-type",
                                          "retention",     "legal-hold",
                                          "analytics",     "inventory",
                                          "metrics",       "intelligent-tiering",
                                          "session",       "renameObject",
                                          "metadataTable", "metadataConfiguration"};
    if (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0)
        return 0;
    for (size_t i = 0; i < sizeof(s3_subs) / sizeof(s3_subs[0]); i++)
        if (strcmp(name, s3_subs[i]) == 0)
            return 0;
    return 1;
}

struct hdrs {
    struct rio_s3_hdr h[GW_HDR_MAX];
    size_t n;
    int over;
};

static enum MHD_Result hdr_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                              const char *value)
{
    struct hdrs *h = cls;

    (void)kind;
    if (h->n == GW_HDR_MAX) {
        h->over = 1;
        return MHD_NO;
    }
    h->h[h->n].name = key;
    h->h[h->n].value = value ? value : "";
    h->n++;
    return MHD_YES;
}

/* Signed with Signature Version 2 (an "AWS AK:SIG" Authorization header or a
 * presigned URL's AWSAccessKeyId and Signature) while --s3-sigv2 off: 400,
 * before routing (the query's parameters are no subresource). 0, or the
 * answer queued (*ret). */
static int sigv2_off(struct MHD_Connection *c, struct gw_req *r, int *ret)
{
    struct rio_s3_req q = {.method = r->method, .path = "", .query = r->query};
    struct rio_s3_hdr h[1];
    const char *authz = rio__gw_header(c, "Authorization");

    if (!g.no_sigv2)
        return 0;
    if (authz) {
        h[0] = (struct rio_s3_hdr){"Authorization", authz};
        q.headers = h;
        q.nheaders = 1;
    }
    if (!rio_s3_is_v2(&q))
        return 0;
    *ret = rio__gw_error(c, r, 400, "InvalidRequest",
                         "Signature Version 2 is turned off here (railiod --s3-sigv2 off): please "
                         "use AWS4-HMAC-SHA256 (Signature Version 4).");
    return -1;
}

/* 0, or an error response was queued (its MHD result in *ret). */
static int authenticate(struct MHD_Connection *c, struct gw_req *r, const char *path,
                        const char *v2path, int *ret)
{
    const char *authz = rio__gw_header(c, "Authorization");
    int signed_ = authz || rio__gw_arg(r, "X-Amz-Signature") ||
                  rio__gw_arg(r, "X-Amz-Credential") || rio__gw_arg(r, "AWSAccessKeyId") ||
                  rio__gw_arg(r, "Signature");
    struct hdrs h = {.n = 0};
    struct rio_s3_req q;
    const char *code = NULL;
    int err;

    memset(&r->auth, 0, sizeof(r->auth));
    if (!signed_ && g.anonymous) {
        const char *p = rio__gw_header(c, "x-amz-content-sha256");
        r->auth.anonymous = 1;
        r->auth.payload_mode = RIO_S3_PAYLOAD_UNSIGNED;
        if (!p || strncmp(p, "STREAMING-", 10) != 0)
            return 0;
        /* aws-chunked without a signature: the unsigned-trailer mode */
        MHD_get_connection_values(c, MHD_HEADER_KIND, hdr_cb, &h);
        q = (struct rio_s3_req){
            .method = r->method, .path = path, .query = r->query, .nheaders = h.n, .headers = h.h};
        if (!h.over && rio_s3_anon_payload(&q, &r->auth, &code) == 0)
            return 0;
        *ret = rio__gw_error(c, r, h.over ? 400 : rio_s3_status_of(code),
                             h.over ? "InvalidRequest" : code,
                             h.over ? "Too many headers." : rio_error_detail());
        return -1;
    }
    if (!g.keys) {
        *ret = signed_ ? rio__gw_error(c, r, 403, "InvalidAccessKeyId",
                                       "No access keys are configured (railiod --s3-keys).")
                       : rio__gw_error(c, r, 403, "AccessDenied",
                                       "Anonymous access is off (railiod --s3-anonymous).");
        return -1;
    }
    MHD_get_connection_values(c, MHD_HEADER_KIND, hdr_cb, &h);
    if (h.over) {
        *ret = rio__gw_error(c, r, 400, "InvalidRequest", "Too many headers.");
        return -1;
    }
    q = (struct rio_s3_req){
        .method = r->method, .path = path, .query = r->query, .nheaders = h.n, .headers = h.h};
    err = rio_s3_is_v2(&q)
              ? rio_s3_verify_v2(g.keys, &q, v2path, (int64_t)time(NULL), &r->auth, &code)
              : rio_s3_verify(g.keys, &q, (int64_t)time(NULL), &r->auth, &code);
    if (err < 0) {
        const char *why = rio_error_detail();
        /* S3's own words for its codes (what clients and their users
         * search for); the reason itself stays in the log. */
        static const struct {
            const char *code, *msg;
        } s3msg[] = {
            {"SignatureDoesNotMatch", "The request signature we calculated does not match the "
                                      "signature you provided. Check your key and signing "
                                      "method."},
            {"InvalidAccessKeyId",
             "The AWS Access Key Id you provided does not exist in our records."},
            {"RequestTimeTooSkewed",
             "The difference between the request time and the current time is too large."},
        };
        const char *msg = r->auth.message;
        for (size_t i = 0; !msg && code && i < sizeof(s3msg) / sizeof(s3msg[0]); i++)
            if (strcmp(code, s3msg[i].code) == 0)
                msg = s3msg[i].msg;
        SRV_INFO("s3: %s refused: %s%s%s", r->method, code ? code : "AccessDenied",
                 why[0] ? ": " : "", why);
        *ret = rio__gw_error(c, r, err == -ENOMEM ? 500 : rio_s3_status_of(code),
                             code ? code : "AccessDenied",
                             msg ? msg : "The request could not be authenticated.");
        return -1;
    }
    return 0;
}

/* Headers asking for what the gateway does not do, where going on without
 * it would do something else than the client asked, silently (a write's
 * If-None-Match and If-Match it does: rio__gw_write_conditions): an object
 * sent for encryption with the client's key (SSE-C) would be stored in the clear
 * and served to anyone allowed to read it; an object lock would not hold.
 * Refused before the body is read, with what S3 answers where it does not
 * take the feature. 0, or the answer queued (*ret). */
const char *const rio__gw_ssec_names[GW_SSEC_NAMES] = {
    "x-amz-server-side-encryption-customer-algorithm",
    "x-amz-server-side-encryption-customer-key",
    "x-amz-server-side-encryption-customer-key-MD5",
    "x-amz-copy-source-server-side-encryption-customer-algorithm",
    "x-amz-copy-source-server-side-encryption-customer-key",
    "x-amz-copy-source-server-side-encryption-customer-key-MD5"};
const char *const rio__gw_lock_names[GW_LOCK_NAMES] = {"x-amz-object-lock-mode",
                                                       "x-amz-object-lock-retain-until-date",
                                                       "x-amz-object-lock-legal-hold"};
const char *const rio__gw_digest_names[GW_DIGEST_NAMES] = {
    "content-md5",           "x-amz-checksum-crc32",
    "x-amz-checksum-crc32c", "x-amz-checksum-crc64nvme",
    "x-amz-checksum-sha1",   "x-amz-checksum-sha256"};

bool rio__gw_storage_class_ok(const char *v)
{
    static const char *const names[] = {
        "STANDARD",       "REDUCED_REDUNDANCY", "STANDARD_IA", "ONEZONE_IA", "INTELLIGENT_TIERING",
        "GLACIER",        "DEEP_ARCHIVE",       "OUTPOSTS",    "GLACIER_IR", "SNOW",
        "EXPRESS_ONEZONE"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(v, names[i]) == 0)
            return true;
    return false;
}

static int unsupported(struct MHD_Connection *c, struct gw_req *r, int *ret)
{
    const char *const *ssec = rio__gw_ssec_names, *const *lock = rio__gw_lock_names;
    int writes = r->op == GW_OP_PUT_OBJECT || r->op == GW_OP_COPY_OBJECT ||
                 r->op == GW_OP_COMPLETE_MPU || r->op == GW_OP_CREATE_MPU;
    const char *v;

    for (size_t i = 0; i < GW_SSEC_NAMES; i++)
        if (rio__gw_header(c, ssec[i])) {
            *ret = rio__gw_error(c, r, 501, "NotImplemented",
                                 "Server-side encryption with customer-provided keys (SSE-C) is "
                                 "not supported.");
            return -1;
        }
    for (size_t i = 0; writes && i < GW_LOCK_NAMES; i++)
        if (rio__gw_header(c, lock[i])) {
            *ret = rio__gw_error(c, r, 400, "InvalidRequest",
                                 "Bucket is missing Object Lock Configuration.");
            return -1;
        }
    /* A storage class S3 does not have is refused as S3 refuses it; one
     * it has is taken, and the object stored as every other (STANDARD). */
    v = writes ? rio__gw_header(c, "x-amz-storage-class") : NULL;
    if (v && !rio__gw_storage_class_ok(v)) {
        *ret = rio__gw_error(c, r, 400, "InvalidStorageClass",
                             "The storage class you specified is not valid.");
        return -1;
    }
    v = rio__gw_header(c, "x-amz-bucket-object-lock-enabled");
    if (r->op == GW_OP_CREATE_BUCKET && v && strcasecmp(v, "true") == 0) {
        *ret = rio__gw_error(c, r, 501, "NotImplemented", "Object Lock is not supported.");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------ body checks */

void rio__gw_fail(struct gw_req *r, int status, const char *code, const char *fmt, ...)
{
    va_list ap;

    if (r->err_status)
        return;
    r->err_status = status;
    r->err_code = code;
    va_start(ap, fmt);
    vsnprintf(r->err_msg, sizeof(r->err_msg), fmt, ap);
    va_end(ap);
}

/* The digests the request's headers claim for its body; 0, or an error
 * response queued (*ret). */
static int checks_init(struct MHD_Connection *c, struct gw_req *r, int *ret)
{
    const char *const *names = rio__gw_digest_names;
    const char *code = NULL;

    for (size_t i = 0; i <= GW_DIGEST_NAMES; i++) {
        const char *name = i < GW_DIGEST_NAMES ? names[i] : "x-amz-content-sha256";
        /* On a Complete the x-amz-checksum-* headers are the object's, not
         * its XML's (multipart.c checks them) */
        if (r->op == GW_OP_COMPLETE_MPU && i > 0 && i < GW_DIGEST_NAMES)
            continue;
        const char *v = i < GW_DIGEST_NAMES                             ? rio__gw_header(c, name)
                        : r->auth.payload_mode == RIO_S3_PAYLOAD_SIGNED ? r->auth.payload_sha256
                                                                        : NULL;
        int err;
        if (!v || r->nck == GW_CHECKS)
            continue;
        err = rio_s3_check_new(name, v, &r->ck[r->nck], &code);
        if (err < 0) {
            *ret = err == -ENOMEM ? rio__gw_error(c, r, 500, "InternalError", "Out of memory.")
                                  : rio__gw_error(c, r, 400, code ? code : "InvalidDigest",
                                                  "A digest header of the request is not valid.");
            return -1;
        }
        r->nck++;
    }
    return 0;
}

void rio__gw_checks_update(struct gw_req *r, const void *p, size_t n)
{
    for (unsigned i = 0; i < r->nck; i++)
        if (rio_s3_check_update(r->ck[i], p, n) < 0)
            rio__gw_fail(r, 500, "InternalError", "The body's digest failed.");
}

int rio__gw_checks_done(struct gw_req *r)
{
    for (unsigned i = 0; i < r->nck; i++) {
        const char *code = NULL;
        if (rio_s3_check_done(r->ck[i], &code) < 0) {
            rio__gw_fail(r, 400, code ? code : "BadDigest",
                         "A digest you specified did not match what we received.");
            return -1;
        }
    }
    return 0;
}

void rio__gw_checks_to_writer(struct gw_req *r)
{
    uint8_t want[16];

    for (unsigned i = 0; i < r->nck; i++) {
        if (rio__s3_check_md5_want(r->ck[i], want) < 0 ||
            rio__writer_expect_md5(r->w, want, &r->md5_bad) < 0)
            continue;
        rio_s3_check_free(r->ck[i]);
        r->ck[i] = r->ck[--r->nck];
        return; /* one Content-MD5 header */
    }
}

static void checks_free(struct gw_req *r)
{
    for (unsigned i = 0; i < r->nck; i++)
        rio_s3_check_free(r->ck[i]);
    r->nck = 0;
}

/* Route r by method, path and query; r->op, bucket, key. 0, or an error
 * response was queued (*ret). */
static int route(struct MHD_Connection *c, struct gw_req *r, char *path, int *ret)
{
    char *slash, *bucket;
    size_t blen;
    /* A preflight carries the query of the request it asks about. */
    int preflight = !strcmp(r->method, "OPTIONS");

    for (unsigned i = 0; i < r->nq && !preflight; i++)
        if (!known_param(r->q[i].name) && !ignored_param(r, r->q[i].name)) {
            char msg[128];
            snprintf(msg, sizeof(msg), "The gateway does not implement the '%.64s' subresource.",
                     r->q[i].name);
            *ret = rio__gw_error(c, r, 501, "NotImplemented", msg);
            return -1;
        }
    if (path[0] != '/') {
        *ret = rio__gw_error(c, r, 400, "InvalidURI", "The request target must start with '/'.");
        return -1;
    }
    bucket = path + 1;
    slash = strchr(bucket, '/');
    blen = slash ? (size_t)(slash - bucket) : strlen(bucket);
    /* ?attributes is an object's GET, ?versions a bucket's, ?versionId an
     * object's GET, HEAD or DELETE: with anything else they are no operation
     * the gateway has. Buckets are never versioned: versionId "null" (the
     * only version of an object) names the object, any other none. */
    if (!preflight) {
        int object = slash && slash[1], get = !strcmp(r->method, "GET");
        int vid_ok = object && (get || !strcmp(r->method, "HEAD") || !strcmp(r->method, "DELETE"));
        const char *vid = rio__gw_arg(r, "versionId");
        const char *sub = rio__gw_arg(r, "attributes") && !(object && get) ? "attributes"
                          : rio__gw_arg(r, "versions") && (object || !get) ? "versions"
                          : vid && !vid_ok                                 ? "versionId"
                                                                           : NULL;
        if (!sub && vid && strcmp(vid, "null") != 0) {
            *ret =
                rio__gw_error(c, r, 404, "NoSuchVersion", "The specified version does not exist.");
            return -1;
        }
        if (sub) {
            char msg[128];
            snprintf(msg, sizeof(msg), "The gateway does not implement the '%s' subresource here.",
                     sub);
            *ret = rio__gw_error(c, r, 501, "NotImplemented", msg);
            return -1;
        }
    }
    if (blen == 0) {
        r->op = preflight                       ? GW_OP_PREFLIGHT
                : strcmp(r->method, "GET") == 0 ? GW_OP_LIST_BUCKETS
                                                : GW_OP_OTHER;
        return 0;
    }
    {
        char *b = rio__gw_unescape(bucket, blen, 0);
        int ok = b && strlen(b) <= GW_BUCKET_MAX && rio__gw_valid_bucket(b);
        if (b && strlen(b) <= GW_BUCKET_MAX)
            strcpy(r->bucket, b);
        rio__free(b);
        if (!ok) {
            r->bucket[0] = '\0';
            *ret =
                rio__gw_error(c, r, 400, "InvalidBucketName", "The specified bucket is not valid.");
            return -1;
        }
    }
    if (slash && slash[1]) {
        size_t klen;
        r->key = rio__gw_unescape(slash + 1, strlen(slash + 1), 0);
        if (!r->key) {
            *ret = rio__gw_error(c, r, 400, "InvalidURI", "The object key is not valid.");
            return -1;
        }
        klen = strlen(r->bucket) + 1 + strlen(r->key);
        if (klen > RIO_KEY_MAX) {
            *ret = rio__gw_error(c, r, 400, "KeyTooLongError", "Your key is too long.");
            return -1;
        }
        r->bkey = rio__malloc(klen + 1);
        if (!r->bkey)
            return *ret = MHD_NO, -1;
        snprintf(r->bkey, klen + 1, "%s/%s", r->bucket, r->key);
        if (preflight) {
            r->op = GW_OP_PREFLIGHT;
            return 0;
        }
        int object_ok;
        if (rio__gw_arg(r, "tagging")) {
            r->op = !strcmp(r->method, "GET")      ? GW_OP_GET_TAGGING
                    : !strcmp(r->method, "PUT")    ? GW_OP_PUT_TAGGING
                    : !strcmp(r->method, "DELETE") ? GW_OP_DELETE_TAGGING
                                                   : GW_OP_OTHER;
            return 0;
        }
        if ((r->sub = rio__gw_subresource(r, &object_ok)) >= 0) {
            /* GET ?acl, ?tagging; anything else about an object's
             * configuration: NotImplemented. */
            r->op = object_ok && !strcmp(r->method, "GET") ? GW_OP_OBJECT_CONFIG : GW_OP_OTHER;
            return 0;
        }
        if (rio__gw_arg(r, "uploadId") || rio__gw_arg(r, "uploads")) {
            if (!strcmp(r->method, "POST"))
                r->op = rio__gw_arg(r, "uploads") ? GW_OP_CREATE_MPU : GW_OP_COMPLETE_MPU;
            else if (!strcmp(r->method, "PUT"))
                r->op = rio__gw_header(c, "x-amz-copy-source") ? GW_OP_UPLOAD_PART_COPY
                                                               : GW_OP_UPLOAD_PART;
            else if (!strcmp(r->method, "DELETE"))
                r->op = GW_OP_ABORT_MPU;
            else if (!strcmp(r->method, "GET"))
                r->op = GW_OP_LIST_PARTS;
            if (r->op != GW_OP_CREATE_MPU && !rio__gw_arg(r, "uploadId"))
                r->op = GW_OP_OTHER;
            return 0;
        }
        if (!strcmp(r->method, "GET"))
            r->op = rio__gw_arg(r, "attributes") ? GW_OP_GET_ATTRIBUTES : GW_OP_GET_OBJECT;
        else if (!strcmp(r->method, "HEAD"))
            r->op = GW_OP_HEAD_OBJECT;
        else if (!strcmp(r->method, "PUT"))
            r->op = rio__gw_header(c, "x-amz-copy-source") ? GW_OP_COPY_OBJECT : GW_OP_PUT_OBJECT;
        else if (!strcmp(r->method, "DELETE"))
            r->op = GW_OP_DELETE_OBJECT;
        return 0;
    }
    int object_ok;
    if (preflight)
        r->op = GW_OP_PREFLIGHT;
    else if (rio__gw_arg(r, "cors"))
        r->op = !strcmp(r->method, "GET")      ? GW_OP_GET_CORS
                : !strcmp(r->method, "PUT")    ? GW_OP_PUT_CORS
                : !strcmp(r->method, "DELETE") ? GW_OP_DELETE_CORS
                                               : GW_OP_OTHER;
    else if (rio__gw_arg(r, "tagging"))
        r->op = !strcmp(r->method, "GET")      ? GW_OP_GET_BTAGGING
                : !strcmp(r->method, "PUT")    ? GW_OP_PUT_BTAGGING
                : !strcmp(r->method, "DELETE") ? GW_OP_DELETE_BTAGGING
                                               : GW_OP_OTHER;
    else if ((r->sub = rio__gw_subresource(r, &object_ok)) >= 0) /* PUT, DELETE: 501 */
        r->op = !strcmp(r->method, "GET") ? GW_OP_BUCKET_CONFIG : GW_OP_OTHER;
    else if (rio__gw_arg(r, "versioning")) /* GET: never enabled; PUT: NotImplemented */
        r->op = !strcmp(r->method, "GET") ? GW_OP_BUCKET_VERSIONING : GW_OP_OTHER;
    else if (!strcmp(r->method, "GET") && rio__gw_arg(r, "uploads"))
        r->op = GW_OP_LIST_MPUS;
    else if (!strcmp(r->method, "GET") && rio__gw_arg(r, "versions"))
        r->op = GW_OP_LIST_VERSIONS;
    else if (!strcmp(r->method, "GET"))
        r->op = rio__gw_arg(r, "location")            ? GW_OP_BUCKET_LOCATION
                : rio__gw_arg(r, "list-type") != NULL ? GW_OP_LIST_OBJECTS_V2
                                                      : GW_OP_LIST_OBJECTS;
    else if (!strcmp(r->method, "PUT"))
        r->op = GW_OP_CREATE_BUCKET;
    else if (!strcmp(r->method, "HEAD"))
        r->op = GW_OP_HEAD_BUCKET;
    else if (!strcmp(r->method, "DELETE"))
        r->op = GW_OP_DELETE_BUCKET;
    else if (!strcmp(r->method, "POST") && rio__gw_arg(r, "delete"))
        r->op = GW_OP_DELETE_OBJECTS;
    else if (!strcmp(r->method, "POST") && r->nq == 0)
        r->op = GW_OP_POST_OBJECT; /* an HTML form's upload: post.c */
    return 0;
}

/* Operations without a request body, run once the headers are in. */
static int run_op(struct MHD_Connection *c, struct gw_req *r)
{
    if (r->op != GW_OP_LIST_BUCKETS && !rio__gw_user_may(r, r->bucket))
        return rio__gw_error(c, r, 403, "AccessDenied", "Access to this bucket is not allowed.");
    switch (r->op) {
    case GW_OP_LIST_BUCKETS:
        return rio__gw_list_buckets(c, r);
    case GW_OP_CREATE_BUCKET:
        return rio__gw_create_bucket(c, r);
    case GW_OP_HEAD_BUCKET:
        return rio__gw_head_bucket(c, r);
    case GW_OP_DELETE_BUCKET:
        return rio__gw_delete_bucket(c, r);
    case GW_OP_BUCKET_LOCATION:
        return rio__gw_bucket_location(c, r);
    case GW_OP_BUCKET_VERSIONING:
        return rio__gw_bucket_versioning(c, r);
    case GW_OP_BUCKET_CONFIG:
        return rio__gw_bucket_config(c, r);
    case GW_OP_PUT_CORS:
        return rio__gw_put_bucket_cors(c, r);
    case GW_OP_GET_CORS:
        return rio__gw_get_bucket_cors(c, r);
    case GW_OP_DELETE_CORS:
        return rio__gw_delete_bucket_cors(c, r);
    case GW_OP_PUT_TAGGING:
        return rio__gw_put_tagging(c, r);
    case GW_OP_GET_TAGGING:
        return rio__gw_get_tagging(c, r);
    case GW_OP_DELETE_TAGGING:
        return rio__gw_delete_tagging(c, r);
    case GW_OP_PUT_BTAGGING:
        return rio__gw_put_bucket_tagging(c, r);
    case GW_OP_GET_BTAGGING:
        return rio__gw_get_bucket_tagging(c, r);
    case GW_OP_DELETE_BTAGGING:
        return rio__gw_delete_bucket_tagging(c, r);
    case GW_OP_OBJECT_CONFIG:
        return rio__gw_object_config(c, r);
    case GW_OP_LIST_OBJECTS:
        return rio__gw_list_objects(c, r, GW_LIST_V1);
    case GW_OP_LIST_OBJECTS_V2:
        return rio__gw_list_objects(c, r, GW_LIST_V2);
    case GW_OP_LIST_VERSIONS:
        return rio__gw_list_objects(c, r, GW_LIST_VERSIONS);
    case GW_OP_GET_OBJECT:
        return rio__gw_get_object(c, r, 0);
    case GW_OP_HEAD_OBJECT:
        return rio__gw_get_object(c, r, 1);
    case GW_OP_GET_ATTRIBUTES:
        return rio__gw_get_attributes(c, r);
    case GW_OP_DELETE_OBJECT:
        return rio__gw_delete_object(c, r);
    case GW_OP_COPY_OBJECT:
        return rio__gw_copy_object(c, r, rio__gw_header(c, "x-amz-copy-source"));
    case GW_OP_UPLOAD_PART_COPY:
        return rio__gw_mpu_part_copy(c, r);
    case GW_OP_DELETE_OBJECTS:
        return rio__gw_delete_objects(c, r);
    case GW_OP_CREATE_MPU:
        return rio__gw_mpu_create(c, r);
    case GW_OP_COMPLETE_MPU:
        return rio__gw_mpu_complete(c, r);
    case GW_OP_ABORT_MPU:
        return rio__gw_mpu_abort(c, r);
    case GW_OP_LIST_PARTS:
        return rio__gw_mpu_list_parts(c, r);
    case GW_OP_LIST_MPUS:
        return rio__gw_mpu_list_uploads(c, r);
    default:
        return rio__gw_error(c, r, 501, "NotImplemented",
                             "A header or method you provided implies functionality that is not "
                             "implemented.");
    }
}

/* Requests whose body streams into a writer: PutObject, UploadPart. */
static int is_put(int op)
{
    return op == GW_OP_PUT_OBJECT || op == GW_OP_UPLOAD_PART;
}

/* The client's address as its XML share's key: an IPv4 address, an IPv6
 * /64 (one host holds a /64), an IPv4-mapped IPv6 address as its IPv4 one;
 * zeros when unknown. */
static void client_addr(struct MHD_Connection *c, unsigned char key[8])
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    static const unsigned char v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};

    memset(key, 0, 8);
    if (!ci || !ci->client_addr)
        return;
    if (ci->client_addr->sa_family == AF_INET) {
        memcpy(key, &((const struct sockaddr_in *)(const void *)ci->client_addr)->sin_addr, 4);
    } else if (ci->client_addr->sa_family == AF_INET6) {
        const unsigned char *a =
            ((const struct sockaddr_in6 *)(const void *)ci->client_addr)->sin6_addr.s6_addr;
        if (memcmp(a, v4mapped, 12) == 0) {
            memcpy(key, a + 12, 4);
        } else {
            memcpy(key, a, 8);
            key[7] |= 1; /* never an IPv4 key's (zeros past its 4 bytes) */
        }
    }
}

/* The slot of addr's share, under xml_mu: the one holding it, else a free
 * one, else the last (addresses past GW_XML_ADDRS share it). */
static unsigned xml_slot(const unsigned char addr[8])
{
    unsigned i, free_i = GW_XML_ADDRS - 1;
    int have_free = 0;

    for (i = 0; i < GW_XML_ADDRS; i++) {
        if (g.xml_addr[i].held && memcmp(g.xml_addr[i].addr, addr, 8) == 0)
            return i;
        if (!g.xml_addr[i].held && !have_free) {
            free_i = i;
            have_free = 1;
        }
    }
    return free_i;
}

/* Takes n more bytes of XML body for r from the server's budget and its
 * address's share: 0, or -1 (nothing taken) past either. */
static int xml_take(struct gw_req *r, size_t n)
{
    int ret = -1;

    pthread_mutex_lock(&g.xml_mu);
    /* The slot r took from keeps its bytes (held > 0) until r gives them
     * back: r's takes and its give are all of that one slot. */
    unsigned i = r->xml_slot ? r->xml_slot - 1 : xml_slot(r->addr);
    if (n <= GW_XML_BODIES_MAX - g.xml_held && n <= GW_XML_ADDR_MAX - g.xml_addr[i].held) {
        if (!g.xml_addr[i].held)
            memcpy(g.xml_addr[i].addr, r->addr, 8);
        g.xml_addr[i].held += n;
        g.xml_held += n;
        r->xml_slot = i + 1;
        ret = 0;
    }
    pthread_mutex_unlock(&g.xml_mu);
    return ret;
}

/* Gives back n bytes xml_take took for r. */
static void xml_give(const struct gw_req *r, size_t n)
{
    if (!n || !r->xml_slot)
        return;
    pthread_mutex_lock(&g.xml_mu);
    unsigned i = r->xml_slot - 1;
    /* Never below zero (what r took is in its slot, with what others
     * sharing it took): a bug here must not open the budget wide. */
    g.xml_addr[i].held -= n <= g.xml_addr[i].held ? n : g.xml_addr[i].held;
    g.xml_held -= n <= g.xml_held ? n : g.xml_held;
    pthread_mutex_unlock(&g.xml_mu);
}

/* Whether r's XML body, n more bytes of it come now, came slower than it
 * must to be held (GW_XML_MIN_RATE). */
static int xml_too_slow(const struct gw_req *r, uint64_t now, size_t n)
{
    double sec = (double)(now - r->xml_t0) / 1e9;

    return sec > (double)g.xml_grace_s && (double)(r->blen + n) < (double)g.xml_rate * sec;
}

void rio__gw_body_held(struct MHD_Connection *c, struct gw_req *r)
{
    if (r->body_t0)
        return;
    r->body_t0 = rio__now_ns();
    r->body_in0 = r->bytes_in;
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, g.xml_idle_s);
}

/*
 * An object's body (PutObject, UploadPart, a POST's file) holding room of
 * the body buffers' budget (bodymem.c) waits GW_XML_IDLE_S at most for more
 * bytes (S3's RequestTimeout), and while that room is scarce (the budget
 * more than half taken) must come at GW_XML_MIN_RATE on
 * average from GW_XML_GRACE_S on, as an XML body must: senders of a byte
 * now and then each held a writer's window (16 MiB) for as long as they
 * liked, and 64 of them (16 per address) every other client's PUTs out
 * with 503 SlowDown. While room is plenty a slow body is let be (a
 * producer feeding its upload as it goes).
 */
static int body_slow(struct gw_req *r)
{
    if (!r->body_t0 || !r->mem_held)
        return 0;
    double sec = (double)(rio__now_ns() - r->body_t0) / 1e9;
    if (sec <= (double)g.xml_grace_s ||
        (double)(r->bytes_in - r->body_in0) >= (double)g.xml_rate * sec)
        return 0;
    return rio__gw_mem_scarce();
}

/* The body of a request that takes one (PUT object, POST ?delete, PUT
 * bucket's configuration, which is read and dropped). */
static void body_data(struct MHD_Connection *c, struct gw_req *r, const char *p, size_t n)
{
    r->bytes_in += n;
    if (r->err_status)
        return; /* an error is pending: drain the rest */
    if ((is_put(r->op) || r->op == GW_OP_POST_OBJECT) && r->mem_held) {
        rio__gw_body_held(c, r); /* a POST's file: the room came with it */
        if (body_slow(r)) {
            r->close = 1;
            r->err_status = 400;
            r->err_code = "RequestTimeout";
            snprintf(r->err_msg, sizeof(r->err_msg),
                     "The body came slower than %llu bytes a second while the gateway was short "
                     "of room.",
                     (unsigned long long)g.xml_rate);
            return;
        }
    }
    if (is_put(r->op)) {
        rio__gw_put_data(r, p, n); /* checks the payload itself (aws-chunked decoded) */
        return;
    }
    if (r->op == GW_OP_POST_OBJECT) {
        rio__gw_post_data(r, p, n); /* the form, its file into a writer */
        return;
    }
    rio__gw_checks_update(r, p, n);
    if (r->op == GW_OP_DELETE_OBJECTS || r->op == GW_OP_COMPLETE_MPU || r->op == GW_OP_PUT_CORS ||
        r->op == GW_OP_PUT_TAGGING || r->op == GW_OP_PUT_BTAGGING) {
        size_t max = r->op == GW_OP_DELETE_OBJECTS ? GW_DELETE_BODY_MAX
                     : r->op == GW_OP_COMPLETE_MPU ? GW_COMPLETE_BODY_MAX
                                                   : GW_POST_BODY_MAX;
        if (n > max - r->blen) {
            r->err_status = 400;
            r->err_code = "MalformedXML";
            snprintf(r->err_msg, sizeof(r->err_msg), "The body is larger than %zu bytes.", max);
            return;
        }
        /* Held bytes must keep coming (GW_XML_MIN_RATE): a trickle held
         * them for ever. The connection waits GW_XML_IDLE_S for more. */
        uint64_t now = rio__now_ns();
        if (!r->xml_t0) {
            r->xml_t0 = now;
            MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, g.xml_idle_s);
        } else if (xml_too_slow(r, now, n)) {
            xml_give(r, r->blen);
            r->blen = 0;
            rio__free(r->buf);
            r->buf = NULL;
            r->close = 1;
            r->err_status = 400;
            r->err_code = "RequestTimeout";
            snprintf(r->err_msg, sizeof(r->err_msg),
                     "The body came slower than %llu bytes a second.",
                     (unsigned long long)g.xml_rate);
            return;
        }
        /* Every request's body is bounded, and so is what they hold
         * together (1024 connections of 7 MiB each were 7 GiB) and what
         * those of one client address hold (a few slow senders held it
         * all). */
        if (xml_take(r, n) < 0) {
            r->err_status = 503;
            r->err_code = "SlowDown";
            snprintf(r->err_msg, sizeof(r->err_msg), "Please reduce your request rate.");
            return;
        }
        char *nb = rio__realloc(r->buf, r->blen + n + 1);
        if (!nb) {
            xml_give(r, n);
            r->err_status = 500;
            r->err_code = "InternalError";
            snprintf(r->err_msg, sizeof(r->err_msg), "Out of memory.");
            return;
        }
        r->buf = nb;
        memcpy(r->buf + r->blen, p, n);
        r->blen += n;
        r->buf[r->blen] = '\0';
    } else if (r->bytes_in > GW_POST_BODY_MAX) {
        r->err_status = 400;
        r->err_code = "MalformedXML";
        snprintf(r->err_msg, sizeof(r->err_msg), "The body is too large.");
    }
}

/* r's whole XML body in UTF-8, the one encoding the reader takes: one that
 * declares ISO-8859-1 transcoded (a byte past ASCII becomes two), any other
 * declared encoding refused by its name (S3: MalformedXML). The body's
 * size limits held for what the client sent; its growth is taken from the
 * XML budgets as its bytes were, and given back with them. Sets r's error
 * when the body is not taken. */
static void xml_body_utf8(struct gw_req *r)
{
    char enc[GW_XML_ENC_MAX], *u;
    size_t ulen;
    int ret = rio__gw_xml_utf8(r->buf, r->blen, &u, &ulen, enc, sizeof(enc));

    if (ret == -1) {
        r->err_status = 400;
        r->err_code = "MalformedXML";
        snprintf(r->err_msg, sizeof(r->err_msg),
                 "The XML declares the encoding \"%s\": the gateway reads UTF-8 and ISO-8859-1 "
                 "only.",
                 enc);
    } else if (ret < 0) {
        r->err_status = 500;
        r->err_code = "InternalError";
        snprintf(r->err_msg, sizeof(r->err_msg), "Out of memory.");
    } else if (ret == 1 && xml_take(r, ulen - r->blen) < 0) {
        rio__free(u);
        r->err_status = 503;
        r->err_code = "SlowDown";
        snprintf(r->err_msg, sizeof(r->err_msg), "Please reduce your request rate.");
    } else if (ret == 1) {
        rio__free(r->buf);
        r->buf = u;
        r->blen = ulen;
    }
}

/* Operations that write an object, or a part of one, under the request's
 * key: such a key must be UTF-8, as S3's keys are (XML cannot carry another:
 * every listing of the bucket without encoding-type=url, s3cmd's, the Go
 * SDK's, would be no XML at all). */
static int makes_key(int op)
{
    return op == GW_OP_PUT_OBJECT || op == GW_OP_COPY_OBJECT || op == GW_OP_CREATE_MPU ||
           op == GW_OP_UPLOAD_PART || op == GW_OP_UPLOAD_PART_COPY || op == GW_OP_COMPLETE_MPU;
}

/* Operations answered once the body is in (the others at once). */
static int takes_body(int op)
{
    return is_put(op) || op == GW_OP_POST_OBJECT || op == GW_OP_DELETE_OBJECTS ||
           op == GW_OP_CREATE_BUCKET || op == GW_OP_CREATE_MPU || op == GW_OP_COMPLETE_MPU ||
           op == GW_OP_COPY_OBJECT || op == GW_OP_UPLOAD_PART_COPY || op == GW_OP_PUT_CORS ||
           op == GW_OP_PUT_TAGGING || op == GW_OP_PUT_BTAGGING;
}

/* Virtual-hosted style (--s3-domain D): a request to Host BUCKET.D[:PORT]
 * is for BUCKET, its path the key. 1 with *out the path it would have in
 * path style ("/BUCKET" then the path: a new string), 0 for a path-style
 * request (any other Host, D itself, an IP address), RIO_EINVAL when the
 * name before D holds what no bucket name holds (a '/' would otherwise
 * move the request to another bucket), -ENOMEM. */
static int vhost_path(struct MHD_Connection *c, const char *path, char **out)
{
    const char *host = rio__gw_header(c, "Host");
    size_t hl, dl, bl;
    char *p;

    *out = NULL;
    if (!g.domain || !host || host[0] == '[')
        return 0;
    hl = strcspn(host, ":");
    dl = strlen(g.domain);
    if (hl <= dl + 1 || host[hl - dl - 1] != '.' || strncasecmp(host + hl - dl, g.domain, dl) != 0)
        return 0;
    bl = hl - dl - 1;
    for (size_t i = 0; i < bl; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-", host[i]))
            return RIO_EINVAL;
    *out = p = rio__malloc(1 + bl + strlen(path) + 1);
    if (!p)
        return -ENOMEM;
    p[0] = '/';
    for (size_t i = 0; i < bl; i++) /* host names are case-blind, bucket names lower-case */
        p[1 + i] = (char)((host[i] >= 'A' && host[i] <= 'Z') ? host[i] - 'A' + 'a' : host[i]);
    strcpy(p + 1 + bl, path);
    return 1;
}

/* The request's headers are in: route, authenticate, and either answer
 * (operations without a body) or get ready for the body. */
static int begin(struct MHD_Connection *c, struct gw_req *r)
{
    char *path, *q, *vpath = NULL;
    int ret = MHD_NO;

    if (open_client() < 0) /* taking its lock orders this thread after the open */
        return rio__gw_error(c, r, 503, "ServiceUnavailable",
                             "The gateway's backend is not reachable.");
    if (!r->uri)
        return rio__gw_error(c, r, 400, "InvalidURI", "The request target is too long.");
    path = rio__strdup(r->uri);
    if (!path)
        return MHD_NO;
    q = strchr(path, '?');
    if (q) {
        *q = '\0';
        r->query = strchr(r->uri, '?') + 1;
    }
    r->vhost = path[0] == '/' ? vhost_path(c, path, &vpath) : 0;
    /* Routed by the path in path style; signed over the path as sent. */
    if (r->vhost < 0) {
        ret = r->vhost == RIO_EINVAL ? rio__gw_error(c, r, 400, "InvalidBucketName",
                                                     "The specified bucket is not valid.")
                                     : rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
        r->vhost = 0;
    } else if (parse_query(r) < 0)
        ret = rio__gw_error(c, r, 400, "InvalidArgument", "The query string is not valid.");
    else if (sigv2_off(c, r, &ret) == 0 && route(c, r, vpath ? vpath : path, &ret) == 0) {
        if (makes_key(r->op) && r->key && !rio__gw_utf8_valid(r->key)) {
            /* S3's answer, its message. A key railio's other clients wrote
             * (any bytes) is still read, listed and deleted. */
            ret = rio__gw_error(c, r, 400, "InvalidURI", "Couldn't parse the specified URI.");
        } else if (r->op == GW_OP_PREFLIGHT) { /* never signed: the bucket's rules decide */
            ret = rio__gw_preflight(c, r);
        } else if (r->op == GW_OP_POST_OBJECT) { /* signed in its form: post.c decides */
            if (unsupported(c, r, &ret) == 0)
                ret = rio__gw_post_open(c, r);
        } else if (authenticate(c, r, path, vpath ? vpath : path, &ret) == 0 &&
                   unsupported(c, r, &ret) == 0) {
            if (!takes_body(r->op))
                ret = run_op(c, r);
            else if (!rio__gw_user_may(r, r->bucket))
                ret = rio__gw_error(c, r, 403, "AccessDenied",
                                    "Access to this bucket is not allowed.");
            else if (checks_init(c, r, &ret) < 0)
                ; /* answered */
            else if (r->op == GW_OP_PUT_OBJECT)
                ret = rio__gw_put_open(c, r);
            else if (r->op == GW_OP_UPLOAD_PART)
                ret = rio__gw_mpu_part_open(c, r); /* MHD_YES without a response: 100, body */
            else if (r->auth.payload_mode != RIO_S3_PAYLOAD_UNSIGNED &&
                     r->auth.payload_mode != RIO_S3_PAYLOAD_SIGNED)
                ret = rio__gw_error(c, r, 501, "NotImplemented",
                                    "aws-chunked bodies are taken by PutObject only.");
            else
                ret = MHD_YES;
        }
    }
    rio__free(vpath);
    rio__free(path);
    return ret;
}

struct framing {
    unsigned cl, te;
};

static enum MHD_Result framing_cb(void *cls, enum MHD_ValueKind kind, const char *key,
                                  const char *value)
{
    struct framing *f = cls;

    (void)kind;
    (void)value;
    f->cl += strcasecmp(key, "Content-Length") == 0;
    f->te += strcasecmp(key, "Transfer-Encoding") == 0;
    return MHD_YES;
}

/* Request smuggling: a body framed twice (Content-Length more than once,
 * Transfer-Encoding more than once, or both) may end where a proxy in
 * front thinks it does not. 400 and the connection closed; 0 when sound. */
static int framing_bad(struct MHD_Connection *c, struct gw_req *r, int *ret)
{
    struct framing f = {0, 0};

    MHD_get_connection_values(c, MHD_HEADER_KIND, framing_cb, &f);
    if (f.cl <= 1 && f.te <= 1 && !(f.cl && f.te))
        return 0;
    r->close = 1;
    *ret = rio__gw_error(c, r, 400, "InvalidRequest",
                         f.cl && f.te ? "Content-Length and Transfer-Encoding together."
                                      : "Content-Length or Transfer-Encoding sent twice.");
    return -1;
}

static enum MHD_Result handler(void *cls, struct MHD_Connection *c, const char *url,
                               const char *method, const char *version, const char *upload_data,
                               size_t *upload_data_size, void **req_cls)
{
    struct gw_req *r = *req_cls;

    (void)cls;
    (void)url;
    (void)version;
    if (!r)
        return MHD_NO; /* out of memory at the URI callback */
    if (!r->started) {
        r->started = 1;
        r->method = method;
        client_addr(c, r->addr);
        r->query = "";
        int ret;
        if (framing_bad(c, r, &ret) < 0)
            return (enum MHD_Result)ret;
        /*
         * A response queued before the request is read whole costs the
         * connection its keep-alive (libmicrohttpd cannot tell where the
         * next request starts): requests without a body are answered at
         * the next call, once the (empty) body is in. Those with one are
         * checked now, so that an error goes out instead of a 100 Continue.
         */
        if (strcmp(method, "PUT") != 0 && strcmp(method, "POST") != 0) {
            r->deferred = 1;
            return MHD_YES;
        }
        return (enum MHD_Result)begin(c, r);
    }
    if (r->deferred) {
        r->deferred = 0;
        if (*upload_data_size) {
            r->bytes_in += *upload_data_size; /* a body nothing asked for: dropped */
            *upload_data_size = 0;
            r->deferred = 1;
            return MHD_YES;
        }
        return (enum MHD_Result)begin(c, r);
    }
    if (r->done) {
        *upload_data_size = 0; /* the answer is queued; drop the rest */
        return MHD_YES;
    }
    if (*upload_data_size) {
        body_data(c, r, upload_data, *upload_data_size);
        *upload_data_size = 0;
        /* Too slow: the connection is closed (the rest of its body would
         * come as slowly). S3 answers 400 RequestTimeout; libmicrohttpd
         * sends no answer queued before the body is in (it closes). */
        if (r->err_status == 400 && strcmp(r->err_code, "RequestTimeout") == 0) {
            SRV_DEBUG("s3: %s closed: %s", r->method, r->err_msg);
            r->status = 400;
            return MHD_NO;
        }
        return MHD_YES;
    }
    /* The whole body is in. */
    if (r->xml_t0 || r->body_t0)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)GW_CONN_TIMEOUT_S);
    if (r->op == GW_OP_POST_OBJECT)
        return (enum MHD_Result)rio__gw_post_close(c, r);
    if (!is_put(r->op) && !r->err_status)
        rio__gw_checks_done(r);
    if (r->buf && !r->err_status) /* checked as it came, read as UTF-8 */
        xml_body_utf8(r);
    if (r->err_status) {
        if (is_put(r->op))
            rio__gw_put_cleanup(r);
        return (enum MHD_Result)rio__gw_error(c, r, r->err_status, r->err_code, r->err_msg);
    }
    if (is_put(r->op))
        return (enum MHD_Result)rio__gw_put_close(c, r);
    if (r->op == GW_OP_DELETE_OBJECTS)
        return (enum MHD_Result)rio__gw_delete_objects(c, r);
    return (enum MHD_Result)run_op(c, r); /* CreateBucket, CopyObject: their body dropped */
}

static void completed(void *cls, struct MHD_Connection *c, void **req_cls,
                      enum MHD_RequestTerminationCode why)
{
    struct gw_req *r = *req_cls;
    uint64_t ns;
    double sec;
    int cls_i, op, b;

    (void)cls;
    (void)c;
    if (!r)
        return;
    *req_cls = NULL;
    if (r->started) {
        ns = rio__now_ns() - r->t0;
        sec = (double)ns / 1e9;
        op = r->op;
        cls_i = r->status >= 100 && r->status < 600 ? r->status / 100 : 0;
        atomic_fetch_add(&g.req[op][cls_i], 1);
        atomic_fetch_add(&g.bytes_in[op], r->bytes_in);
        atomic_fetch_add(&g.bytes_out[op], r->bytes_out);
        for (b = 0; b < NLAT - 1 && sec > lat_bounds[b]; b++)
            ;
        atomic_fetch_add(&g.lat[op][b], 1);
        atomic_fetch_add(&g.lat_us_sum[op], ns / 1000);
        /* The key's length, not the key: keys may be private. */
        SRV_ACCESS("s3 %s %s bucket=%s keylen=%zu status=%d in=%llu out=%llu ms=%.1f id=%s%s",
                   r->method ? r->method : "?", rio__gw_op_name(op), r->bucket[0] ? r->bucket : "-",
                   r->key ? strlen(r->key) : 0, r->status, (unsigned long long)r->bytes_in,
                   (unsigned long long)r->bytes_out, (double)ns / 1e6, rio__gw_request_id(r),
                   why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (cut off)");
    }
    if (is_put(r->op))
        rio__gw_put_cleanup(r);
    rio__gw_post_free(r);
    checks_free(r);
    rio__gw_meta_free(r->meta);
    rio__free(r->uri);
    rio__free(r->key);
    rio__free(r->bkey);
    rio__free(r->qbuf);
    xml_give(r, r->blen); /* what body_data took */
    rio__gw_mem_give(r);  /* what its writer or reader took, now closed */
    rio__free(r->buf);
    /* The signing key of the user's day that verification left in it (an
     * aws-chunked body is checked with it) signs any request of that user
     * that day: not left behind on the heap for a core dump to carry. */
    explicit_bzero(&r->auth, sizeof(r->auth));
    rio__free(r);
}

/* ------------------------------------------------------------ lifecycle */

/* The backend's client, opened once: at start, or at the first request when
 * the backend is this server (whose listeners accept only once it serves). */
static int open_client(void)
{
    struct rio_options o;
    int ret = 0;

    pthread_mutex_lock(&g.client_mu);
    if (!g.client) {
        rio_options_init(&o);
        o.etag = RIO_ETAG_MD5; /* S3's ETag of a single PUT is the MD5 of its bytes */
        ret = rio_client_new(g.backend, &o, &g.client);
        if (ret < 0) {
            g.client = NULL;
            SRV_ERR("s3 backend: %s%s%s", rio_strerror(ret), *rio_error_detail() ? ": " : "",
                    rio_error_detail());
        }
    }
    pthread_mutex_unlock(&g.client_mu);
    return ret;
}

/*
 * The gateway's threads ask the scheduler for a short slice (Linux 6.12+,
 * EEVDF: sched_attr.sched_runtime of a SCHED_OTHER thread). libmicrohttpd
 * starts a thread per connection, and a thread that has not yet slept has
 * no credit with the scheduler: on a busy machine each of a request's
 * wake-ups (the request, then each backend round trip) used to wait for
 * the running task's slice to end, about 2 ms each, 12 ms a small GET
 * (docs/bench.md, "Small GETs under load"). A short slice gives an earlier
 * deadline and shorter turns, not more CPU. Set on the starting thread
 * around the creation of the gateway's threads (they inherit it; the
 * connection threads from libmicrohttpd's listening thread), then put back.
 * Best effort: older kernels ignore the field, and a refusal is only logged.
 */
#define GW_SLICE_NS 150000ull

struct gw_sched_attr {
    uint32_t size, policy;
    uint64_t flags;
    int32_t nice;
    uint32_t priority;
    uint64_t runtime, deadline, period;
};

/* The calling thread's attributes into *old, then a short slice: 1 when
 * set (put *old back with gw_slice_restore), 0 when not. */
static int gw_slice_short(struct gw_sched_attr *old)
{
#if defined(__linux__) && defined(SYS_sched_getattr) && defined(SYS_sched_setattr)
    struct gw_sched_attr a;

    memset(old, 0, sizeof(*old));
    if (syscall(SYS_sched_getattr, 0, old, (unsigned)sizeof(*old), 0) != 0 || old->policy != 0)
        return 0; /* not SCHED_OTHER: leave it */
    a = *old;
    a.size = sizeof(a);
    a.runtime = GW_SLICE_NS;
    if (syscall(SYS_sched_setattr, 0, &a, 0) != 0) {
        SRV_DEBUG("s3: no short scheduler slice: %s", strerror(errno));
        return 0;
    }
    return 1;
#else
    (void)old;
    return 0;
#endif
}

static void gw_slice_restore(int set, struct gw_sched_attr *old)
{
#if defined(__linux__) && defined(SYS_sched_setattr)
    if (set) {
        old->size = sizeof(*old);
        syscall(SYS_sched_setattr, 0, old, 0);
    }
#else
    (void)set;
    (void)old;
#endif
}

#define GW_PEM_MAX (1u << 20) /* a certificate chain or a key file */

/* The whole of PEM file path (--s3-tls-cert or -key: opt), a regular file
 * of at most GW_PEM_MAX bytes, into a new string (*len bytes). 0 or an
 * error (logged, naming the file, never its bytes). */
static int pem_read(const char *path, const char *opt, char **out, size_t *len)
{
    struct stat st;
    char *p = NULL;
    size_t n = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK), ret = 0; /* a FIFO: not waited on */

    if (fd < 0) {
        ret = -errno;
        SRV_ERR("%s %s: %s", opt, path, strerror(-ret));
        return ret;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size <= 0 ||
        st.st_size > (off_t)GW_PEM_MAX) {
        SRV_ERR("%s %s: not a regular file of 1 byte to 1 MiB", opt, path);
        ret = RIO_EINVAL;
        goto out;
    }
    p = rio__malloc((size_t)st.st_size + 1);
    if (!p) {
        ret = -ENOMEM;
        goto out;
    }
    while (n < (size_t)st.st_size) {
        ssize_t r = read(fd, p + n, (size_t)st.st_size - n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            ret = r < 0 ? -errno : RIO_EINVAL;
            SRV_ERR("%s %s: %s", opt, path, r < 0 ? strerror(errno) : "shorter than it was");
            goto out;
        }
        n += (size_t)r;
    }
    p[n] = '\0';
    *out = p;
    *len = n;
    p = NULL;
out:
    if (p) {
        explicit_bzero(p, (size_t)st.st_size + 1);
        rio__free(p);
    }
    close(fd);
    return ret;
}

static void tls_free(void)
{
    if (g.tls_key) {
        explicit_bzero(g.tls_key, g.tls_key_len);
        rio__free(g.tls_key);
    }
    rio__free(g.tls_cert);
    g.tls_key = g.tls_cert = NULL;
    g.tls_key_len = 0;
}

/* --s3-tls-cert and --s3-tls-key: checked with OpenSSL first (the chain
 * loads, the key loads and is the certificate's: an error that says
 * which), then read for libmicrohttpd's TLS (GnuTLS). 0 or an error
 * (logged). */
static int tls_load(const struct rio_s3_gw_config *cfg)
{
    char why[256];
    size_t clen;
    SSL_CTX *ctx;
    int ret;

    if (MHD_is_feature_supported(MHD_FEATURE_TLS) != MHD_YES) {
        SRV_ERR("--s3-tls-cert: this libmicrohttpd was built without TLS");
        return RIO_ENOTSUP;
    }
    ctx = rio__tls_server_ctx(cfg->tls_cert, cfg->tls_key, why, sizeof(why));
    if (!ctx) {
        SRV_ERR("--s3-tls-cert/--s3-tls-key: %s", why);
        return RIO_EINVAL;
    }
    rio__tls_ctx_free(ctx);
    ret = pem_read(cfg->tls_cert, "--s3-tls-cert", &g.tls_cert, &clen);
    if (ret == 0)
        ret = pem_read(cfg->tls_key, "--s3-tls-key", &g.tls_key, &g.tls_key_len);
    if (ret < 0)
        tls_free();
    return ret;
}

int rio__s3_gw_start(const struct rio_s3_gw_config *cfg)
{
    struct gw_sched_attr sched_old;
    int slice;
    int ret;

    if (cfg->keys) {
        ret = rio_s3_keys_load(cfg->keys, &g.keys);
        if (ret < 0) {
            /* The detail names the file and the line at fault, never a secret. */
            SRV_ERR("%s (%s)", rio_error_detail()[0] ? rio_error_detail() : cfg->keys,
                    rio_strerror(ret));
            close(cfg->listen_fd);
            return ret;
        }
    }
    g.anonymous = cfg->anonymous;
    /* The head cache rests on rados://'s layout: a replaced or removed
     * generation's chunk objects are gone before the PUT or DELETE is
     * acknowledged, so a stale entry fails its first read. Elsewhere an old
     * generation may stay readable a while (file://'s cache of open files),
     * so the cache is off. */
    if (strncmp(cfg->backend, "rados://", 8) == 0) {
        rio__gw_head_ttl(cfg->head_cache_ns);
    } else {
        if (cfg->head_cache_ns && cfg->head_cache_ns != UINT64_MAX)
            SRV_WARN("s3: --s3-head-cache is for rados:// backends only: off");
        rio__gw_head_ttl(0);
    }
    if (!g.keys && !g.anonymous)
        SRV_WARN("s3: neither --s3-keys nor --s3-anonymous: every request will be refused");
    g.backend = rio__strdup(cfg->backend);
    g.domain = cfg->domain ? rio__strdup(cfg->domain) : NULL;
    if (!g.backend || (cfg->domain && !g.domain)) {
        ret = -ENOMEM;
        goto err;
    }
    if (!cfg->lazy && (ret = open_client()) < 0)
        goto err;
    if (cfg->tls_cert && (ret = tls_load(cfg)) < 0)
        goto err;
    g.ordered = strncmp(cfg->backend, "rados://", 8) != 0;
    g.min_part = cfg->min_part == UINT64_MAX ? GW_MIN_PART : cfg->min_part;
    g.check_only = cfg->check_only;
    g.no_sigv2 = cfg->no_sigv2;
    rio__gw_mem_init(cfg->memory, cfg->max_conns_ip != 0);
    g.xml_rate = GW_XML_MIN_RATE;
    g.xml_grace_s = GW_XML_GRACE_S;
    g.xml_idle_s = GW_XML_IDLE_S;
    const char *xr = getenv("RAILIOD_TEST_XML_RATE"); /* tests only: RATE:GRACE_S:IDLE_S */
    if (xr) {
        unsigned long long rate;
        unsigned grace, idle;
        if (sscanf(xr, "%llu:%u:%u", &rate, &grace, &idle) != 3 || !rate || !idle) {
            SRV_ERR("RAILIOD_TEST_XML_RATE: expected RATE:GRACE_S:IDLE_S, got \"%s\"", xr);
            ret = RIO_EINVAL;
            goto err;
        }
        g.xml_rate = rate;
        g.xml_grace_s = grace;
        g.xml_idle_s = idle;
    }
    if (rio__gw_mem_sweep_start(g.xml_rate, g.xml_grace_s) < 0) {
        SRV_ERR("s3: no thread for the body buffers' sweeper");
        ret = -ENOMEM;
        goto err;
    }
    slice = gw_slice_short(&sched_old);
    /* Without it, GETs read the record after the lookup instead of beside it. */
    if (rio__gw_meta_fetch_pool_start() < 0)
        SRV_WARN("s3: no threads for metadata record reads: each after its lookup");
    struct MHD_OptionItem tls[] = {
        {MHD_OPTION_HTTPS_MEM_CERT, 0, g.tls_cert},
        {MHD_OPTION_HTTPS_MEM_KEY, 0, g.tls_key},
        {MHD_OPTION_END, 0, NULL},
    };
    if (!g.tls_cert)
        tls[0].option = MHD_OPTION_END;
    g.d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD |
                               (g.tls_cert ? MHD_USE_TLS : 0),
                           0, NULL, NULL, handler, NULL, MHD_OPTION_LISTEN_SOCKET, cfg->listen_fd,
                           MHD_OPTION_URI_LOG_CALLBACK, uri_log, NULL, MHD_OPTION_NOTIFY_COMPLETED,
                           completed, NULL, MHD_OPTION_CONNECTION_LIMIT, cfg->max_conns,
                           MHD_OPTION_PER_IP_CONNECTION_LIMIT, cfg->max_conns_ip,
                           MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)GW_CONN_TIMEOUT_S,
                           MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)GW_CONN_MEMORY,
                           MHD_OPTION_ARRAY, tls, MHD_OPTION_END);
    gw_slice_restore(slice, &sched_old);
    if (!g.d) {
        SRV_ERR(g.tls_cert ? "s3: libmicrohttpd did not start (its TLS library refused "
                             "--s3-tls-cert or --s3-tls-key?)"
                           : "s3: libmicrohttpd did not start");
        ret = RIO_EINVAL;
        goto err;
    }
    return 0;
err:
    rio__gw_mem_sweep_stop();
    rio__gw_meta_fetch_pool_stop();
    rio_client_destroy(g.client);
    g.client = NULL;
    rio__free(g.backend);
    g.backend = NULL;
    rio__free(g.domain);
    g.domain = NULL;
    rio_s3_keys_free(g.keys);
    g.keys = NULL;
    tls_free();
    close(cfg->listen_fd);
    return ret;
}

void rio__s3_gw_stop(void)
{
    if (!g.d)
        return;
    MHD_stop_daemon(g.d);
    g.d = NULL;
    rio__gw_mem_sweep_stop();       /* every response freed: nothing watched */
    rio__gw_meta_fetch_pool_stop(); /* idle: every request took its fetch back */
    rio_client_destroy(g.client);
    g.client = NULL;
    rio__free(g.backend);
    g.backend = NULL;
    rio__free(g.domain);
    g.domain = NULL;
    rio_s3_keys_free(g.keys);
    g.keys = NULL;
    rio__gw_head_clear();
    rio__gw_cors_clear();
    tls_free();
}

size_t rio__s3_gw_metrics(char *buf, size_t cap)
{
    struct gw_buf b = {0};
    size_t n;

    if (!g.d || !cap)
        return 0;
    rio__gw_buf_printf(&b, "# HELP railiod_s3_requests_total S3 requests by operation and "
                           "status class.\n# TYPE railiod_s3_requests_total counter\n");
    for (int op = 0; op < GW_OP__COUNT; op++)
        for (int s = 1; s < 6; s++) {
            uint64_t v = atomic_load(&g.req[op][s]);
            if (v)
                rio__gw_buf_printf(&b,
                                   "railiod_s3_requests_total{op=\"%s\",status=\"%dxx\"} %llu\n",
                                   op_names[op], s, (unsigned long long)v);
        }
    rio__gw_buf_printf(&b, "# HELP railiod_s3_bytes_total S3 body bytes received (in) and sent "
                           "(out) by operation.\n# TYPE railiod_s3_bytes_total counter\n");
    for (int op = 0; op < GW_OP__COUNT; op++) {
        uint64_t i = atomic_load(&g.bytes_in[op]), o = atomic_load(&g.bytes_out[op]);
        if (i || o) {
            rio__gw_buf_printf(&b, "railiod_s3_bytes_total{op=\"%s\",direction=\"in\"} %llu\n",
                               op_names[op], (unsigned long long)i);
            rio__gw_buf_printf(&b, "railiod_s3_bytes_total{op=\"%s\",direction=\"out\"} %llu\n",
                               op_names[op], (unsigned long long)o);
        }
    }
    rio__gw_buf_printf(&b, "# HELP railiod_s3_request_seconds S3 request latency by operation.\n"
                           "# TYPE railiod_s3_request_seconds histogram\n");
    for (int op = 0; op < GW_OP__COUNT; op++) {
        uint64_t cum = 0;
        for (int s = 0; s < 6; s++)
            cum += atomic_load(&g.req[op][s]);
        if (!cum)
            continue;
        cum = 0;
        for (int k = 0; k < NLAT; k++) {
            cum += atomic_load(&g.lat[op][k]);
            if (k < NLAT - 1)
                rio__gw_buf_printf(&b,
                                   "railiod_s3_request_seconds_bucket{op=\"%s\",le=\"%g\"} %llu\n",
                                   op_names[op], lat_bounds[k], (unsigned long long)cum);
            else
                rio__gw_buf_printf(
                    &b, "railiod_s3_request_seconds_bucket{op=\"%s\",le=\"+Inf\"} %llu\n",
                    op_names[op], (unsigned long long)cum);
        }
        rio__gw_buf_printf(&b, "railiod_s3_request_seconds_sum{op=\"%s\"} %.3f\n", op_names[op],
                           (double)atomic_load(&g.lat_us_sum[op]) / 1e6);
        rio__gw_buf_printf(&b, "railiod_s3_request_seconds_count{op=\"%s\"} %llu\n", op_names[op],
                           (unsigned long long)cum);
    }
    uint64_t hits, misses, mhits, mmisses;
    rio__gw_head_counts(&hits, &misses);
    rio__gw_head_meta_counts(&mhits, &mmisses);
    rio__gw_buf_printf(&b,
                       "# HELP railiod_s3_head_cache_total GET lookups answered by the head "
                       "cache (hit) or the backend (miss).\n"
                       "# TYPE railiod_s3_head_cache_total counter\n"
                       "railiod_s3_head_cache_total{result=\"hit\"} %llu\n"
                       "railiod_s3_head_cache_total{result=\"miss\"} %llu\n"
                       "# HELP railiod_s3_meta_cache_total GET and HEAD metadata records "
                       "answered by the head cache (hit) or read from the backend (miss).\n"
                       "# TYPE railiod_s3_meta_cache_total counter\n"
                       "railiod_s3_meta_cache_total{result=\"hit\"} %llu\n"
                       "railiod_s3_meta_cache_total{result=\"miss\"} %llu\n",
                       (unsigned long long)hits, (unsigned long long)misses,
                       (unsigned long long)mhits, (unsigned long long)mmisses);
    rio__gw_mem_metrics(&b);
    n = b.oom ? 0 : b.len;
    if (n >= cap)
        n = cap - 1;
    if (n)
        memcpy(buf, b.p, n);
    rio__gw_buf_free(&b);
    return n;
}
