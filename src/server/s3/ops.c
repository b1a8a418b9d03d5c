/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The S3 operations over one rio_client (docs/gateway.md): a bucket is the
 * key prefix "BUCKET/" on the backend, and exists while its marker object
 * ".rio-bucket/BUCKET" does; objects stream through the engine's writer
 * (PutObject, CopyObject) and reader (GetObject), never whole in memory.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/engine.h"
#include "core/key.h"
#include "core/url.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/listtoken.h"
#include "server/s3/meta.h"
#include "server/server.h"

#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
/* A GET body's buffer: each fill is one write to the socket (fewer, larger
 * writes cost less CPU per byte than 256 KiB ones). */
#define GET_BLOCK (1024u * 1024u)
#define GET_FIRST (64u * 1024u) /* read before a GET answers */
#define HEAD_BLOCK 4096u        /* a HEAD's response buffer: never filled */
#define COPY_BLOCK (1u << 20)
#define DELETE_MAX 1000u
#define BUCKETS_MAX 10000u

static int marker_key(const char *bucket, char *out, size_t cap)
{
    return snprintf(out, cap, "%s%s", GW_MARKER_PREFIX, bucket) < (int)cap ? 0 : RIO_EINVAL;
}

int rio__gw_bucket_exists(const char *bucket)
{
    char k[128];
    struct rio_desc d;
    int ret;

    if (marker_key(bucket, k, sizeof(k)) < 0)
        return 0;
    memset(&d, 0, sizeof(d));
    ret = rio_stat(rio__gw_client(), k, &d);
    rio_desc_cleanup(&d);
    if (ret == RIO_ENOTFOUND)
        return 0;
    return ret < 0 ? ret : 1;
}

/* 0 when the bucket exists, else the error response was queued (*ret). */
int rio__gw_need_bucket(struct MHD_Connection *c, struct gw_req *r, int *ret)
{
    int e = rio__gw_bucket_exists(r->bucket);

    if (e == 1)
        return 0;
    if (e == 0)
        *ret = rio__gw_error(c, r, 404, "NoSuchBucket", "The specified bucket does not exist.");
    else
        *ret = rio__gw_rio_error(c, r, e, GW_LOOKUP, "bucket lookup");
    return -1;
}

/* An UploadPart(Copy) committed: 1 with *answer queued when its upload
 * went meanwhile (an Abort or Complete: 404 NoSuchUpload, the part
 * dropped, as S3 says a part racing them may fail) or that cannot be told;
 * else 0. */
static int part_gone(struct MHD_Connection *c, struct gw_req *r, int *answer)
{
    int ret = rio__gw_mpu_part_landed(r);

    if (ret == 0)
        return 0;
    *answer = ret == RIO_ENOTFOUND
                  ? rio__gw_error(c, r, 404, "NoSuchUpload", "The specified upload does not exist.")
                  : rio__gw_rio_error(c, r, ret, GW_LOOKUP, "upload lookup");
    return 1;
}

/* Lookups of a GET whose object keeps being replaced before its read
 * opens (RIO_EGENERATION) before 503 SlowDown. */
#define GW_GET_TRIES 5

static void etag_hdr(struct MHD_Response *resp, const char *etag)
{
    char q[52];

    if (!etag[0])
        return;
    snprintf(q, sizeof(q), "\"%s\"", etag);
    MHD_add_response_header(resp, "ETag", q);
}

/* Whether d's etag is the fast one a railio client writes by default
 * (etag=fast: an xxh3-128 of its chunk checksums, 32 hex digits, no MD5 of
 * its bytes). Its GET and HEAD then say so (x-railio-etag: fast): railio's
 * s3:// client checks an object it did not write by an ETag of 32 hex
 * digits, taken as the MD5 of its bytes, and refused every such object. */
static bool etag_is_fast(const struct rio_desc *d)
{
    char fast[33];

    if (!d->xxh || strlen(d->etag) != 32)
        return false;
    rio__etag_fast(d->xxh, d->nchunks, d->size, d->chunk_size, fast);
    return strcmp(fast, d->etag) == 0;
}

int rio__gw_send_empty(struct MHD_Connection *c, struct gw_req *r, int status)
{
    return rio__gw_send(c, r, status,
                        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT));
}

int rio__gw_send_buf_with(struct MHD_Connection *c, struct gw_req *r, int status, struct gw_buf *b,
                          const char *const *hdrs)
{
    int ret = b->oom ? rio__gw_error(c, r, 500, "InternalError", "Out of memory.")
                     : rio__gw_send_xml_with(c, r, status, b->p, b->len, hdrs);
    rio__gw_buf_free(b);
    return ret;
}

int rio__gw_send_buf(struct MHD_Connection *c, struct gw_req *r, int status, struct gw_buf *b)
{
    return rio__gw_send_buf_with(c, r, status, b, NULL);
}

/* The last-modified time of a backend key from its listing entry, ns since
 * the epoch; 0 if the backend does not say. */
static int64_t key_mtime(const char *bkey)
{
    struct rio_list_args a;
    struct rio_list_page p;
    int64_t t = 0;

    memset(&a, 0, sizeof(a));
    memset(&p, 0, sizeof(p));
    a.prefix = bkey;
    a.max_keys = rio__gw_ordered() ? 1 : 1000; /* in key order, the key itself comes first */
    if (rio_list(rio__gw_client(), &a, &p, NULL) < 0)
        return 0;
    for (unsigned i = 0; i < p.n; i++)
        if (strcmp(p.entries[i].key, bkey) == 0) {
            t = p.entries[i].mtime_ns;
            break;
        }
    rio_list_page_cleanup(&p);
    return t;
}

/* ------------------------------------------------------------- buckets */

struct bucket_ent {
    char name[GW_BUCKET_MAX + 1];
    int64_t mtime_ns;
};

static int bucket_cmp(const void *a, const void *b)
{
    return strcmp(((const struct bucket_ent *)a)->name, ((const struct bucket_ent *)b)->name);
}

/* The buckets r's user may see, sorted by name (S3's order, on every
 * backend: rados:// lists in the pool's), at most BUCKETS_MAX: *out
 * (malloc'd), *n. 0, or a RIO_E* code. */
static int buckets_read(struct gw_req *r, struct bucket_ent **out, unsigned *n)
{
    struct bucket_ent *v = NULL;
    unsigned cap = 0, k = 0;
    char token[RIO_LIST_TOKEN_MAX + 1] = "";
    const size_t plen = strlen(GW_MARKER_PREFIX);
    int ret = 0;

    do {
        struct rio_list_args a;
        struct rio_list_page p;
        memset(&a, 0, sizeof(a));
        memset(&p, 0, sizeof(p));
        a.prefix = GW_MARKER_PREFIX;
        a.token = token;
        ret = rio_list(rio__gw_client(), &a, &p, NULL);
        if (ret < 0)
            break;
        for (unsigned i = 0; i < p.n && k < BUCKETS_MAX; i++) {
            const char *name = p.entries[i].key + plen;
            if (strlen(p.entries[i].key) <= plen || !rio__gw_valid_bucket(name) ||
                !rio__gw_user_may(r, name))
                continue;
            if (k == cap) {
                unsigned ncap = cap ? cap * 2 : 64;
                struct bucket_ent *nv = rio__realloc(v, (size_t)ncap * sizeof(*v));
                if (!nv) {
                    ret = -ENOMEM;
                    break;
                }
                v = nv;
                cap = ncap;
            }
            snprintf(v[k].name, sizeof(v[k].name), "%s", name);
            v[k++].mtime_ns = p.entries[i].mtime_ns;
        }
        snprintf(token, sizeof(token), "%s", p.next_token);
        rio_list_page_cleanup(&p);
    } while (ret == 0 && token[0] && k < BUCKETS_MAX);
    if (ret < 0) {
        rio__free(v);
        return ret;
    }
    if (k)
        qsort(v, k, sizeof(*v), bucket_cmp);
    *out = v;
    *n = k;
    return 0;
}

/* ListBuckets: every bucket the user may see, or a page of them
 * (max-buckets, continuation-token: the last name of the page before;
 * prefix), as S3 since 2024. */
int rio__gw_list_buckets(struct MHD_Connection *c, struct gw_req *r)
{
    const char *mb = rio__gw_arg(r, "max-buckets"), *after = rio__gw_arg(r, "continuation-token");
    const char *prefix = rio__gw_arg(r, "prefix");
    struct bucket_ent *v = NULL;
    struct gw_buf b = {0};
    uint64_t max = BUCKETS_MAX;
    unsigned n = 0, shown = 0, i = 0;
    int ret;

    if (mb && (rio__gw_parse_count(mb, BUCKETS_MAX, &max) < 0 || max == 0))
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "max-buckets must be an integer from 1 to 10000.");
    if (after && *after && !rio__gw_valid_bucket(after))
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "The continuation token provided is incorrect.");
    ret = buckets_read(r, &v, &n);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_READS, "list buckets");
    rio__gw_buf_printf(&b, XML_HEAD "<ListAllMyBucketsResult xmlns=\"" XMLNS "\">" GW_OWNER_XML
                                    "<Buckets>");
    if (after && *after)
        while (i < n && strcmp(v[i].name, after) <= 0)
            i++;
    for (; i < n; i++) {
        char date[32];
        if (prefix && strncmp(v[i].name, prefix, strlen(prefix)) != 0)
            continue;
        if (shown == max)
            break;
        rio__gw_iso_date(v[i].mtime_ns, date);
        rio__gw_buf_put(&b, "<Bucket><Name>", 14);
        rio__gw_buf_xml(&b, v[i].name);
        rio__gw_buf_printf(&b, "</Name><CreationDate>%s</CreationDate></Bucket>", date);
        shown++;
    }
    rio__gw_buf_printf(&b, "</Buckets>");
    if (i < n && shown) /* more after this page */
        rio__gw_list_elem(&b, "ContinuationToken", v[i - 1].name, 0);
    if (prefix)
        rio__gw_list_elem(&b, "Prefix", prefix, 0);
    rio__gw_buf_printf(&b, "</ListAllMyBucketsResult>\n");
    rio__free(v);
    return rio__gw_send_buf(c, r, 200, &b);
}

/* S3's rules for a new bucket's name beyond its characters (which the
 * router checked): not an IPv4 address, no label of the DNS name it is in
 * virtual-hosted style beginning or ending with '-' ("a-.b", "a.-b"), none
 * of the prefixes and suffixes S3 keeps for itself. Only at CreateBucket: a bucket that exists is
 * served whatever its name. */
static int new_bucket_name_ok(const char *b)
{
    static const char *const prefixes[] = {"xn--", "sthree-", "amzn-s3-demo-"};
    static const char *const suffixes[] = {"-s3alias", "--ol-s3", "--x-s3", ".mrap", "--table-s3"};
    size_t n = strlen(b);
    unsigned a, bb, cc, d;
    char tail;

    if (sscanf(b, "%u.%u.%u.%u%c", &a, &bb, &cc, &d, &tail) == 4)
        return 0;
    if (strstr(b, "-.") || strstr(b, ".-"))
        return 0;
    for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
        if (strncmp(b, prefixes[i], strlen(prefixes[i])) == 0)
            return 0;
    for (size_t i = 0; i < sizeof(suffixes) / sizeof(suffixes[0]); i++) {
        size_t l = strlen(suffixes[i]);
        if (n >= l && strcmp(b + n - l, suffixes[i]) == 0)
            return 0;
    }
    return 1;
}

int rio__gw_create_bucket(struct MHD_Connection *c, struct gw_req *r)
{
    char k[128], loc[80];
    int e, ret;
    struct MHD_Response *resp;

    if (!new_bucket_name_ok(r->bucket))
        return rio__gw_error(c, r, 400, "InvalidBucketName",
                             "The specified bucket is not valid (an IP address, or a prefix or "
                             "suffix S3 reserves).");
    e = rio__gw_bucket_exists(r->bucket);
    if (e < 0)
        return rio__gw_rio_error(c, r, e, GW_LOOKUP, "bucket lookup");
    /* A bucket that exists, for a user who may use it: 200, the bucket
     * left as it is, as S3 answers in us-east-1, the gateway's region (and
     * radosgw); other regions of S3 answer 409 BucketAlreadyOwnedByYou. */
    if (e == 0) {
        /* A CORS configuration a PutBucketCors racing the last DeleteBucket
         * of the name left: not the new bucket's. */
        ret = rio__gw_cors_drop(r->bucket);
        if (ret == 0)
            ret = rio__gw_btags_drop(r->bucket);
        if (ret < 0)
            return rio__gw_rio_error(c, r, ret, GW_WRITES, "create bucket");
        marker_key(r->bucket, k, sizeof(k));
        ret = rio_put(rio__gw_client(), k, "", 0, NULL, NULL);
        if (ret < 0)
            return rio__gw_rio_error(c, r, ret, GW_WRITES, "create bucket");
    }
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    snprintf(loc, sizeof(loc), "/%s", r->bucket);
    if (resp)
        MHD_add_response_header(resp, "Location", loc);
    return rio__gw_send(c, r, 200, resp);
}

int rio__gw_head_bucket(struct MHD_Connection *c, struct gw_req *r)
{
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    /* S3 names the bucket's region on every HeadBucket: SDKs read it to
     * find where a bucket lives. The gateway's is us-east-1 (as its
     * GetBucketLocation's empty constraint says). */
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (resp)
        MHD_add_response_header(resp, "x-amz-bucket-region", "us-east-1");
    return rio__gw_send(c, r, 200, resp);
}

/* A bucket's configuration that is always the default: the empty element
 * tag, once the bucket is known to exist. */
static int bucket_default(struct MHD_Connection *c, struct gw_req *r, const char *tag)
{
    struct gw_buf b = {0};
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    rio__gw_buf_printf(&b, XML_HEAD "<%s xmlns=\"" XMLNS "\"/>\n", tag);
    return rio__gw_send_buf(c, r, 200, &b);
}

int rio__gw_bucket_location(struct MHD_Connection *c, struct gw_req *r)
{
    return bucket_default(c, r, "LocationConstraint");
}

int rio__gw_bucket_versioning(struct MHD_Connection *c, struct gw_req *r)
{
    return bucket_default(c, r, "VersioningConfiguration");
}

/*
 * Subresources a bucket or object has in S3 that the gateway keeps none of:
 * a GET answers what S3 answers where the configuration was never set (404
 * with S3's code, or the default document), so that clients that read them
 * (s3cmd info, `aws s3api get-bucket-*`, Terraform's bucket refresh) go on
 * instead of failing on 501; setting one stays 501 NotImplemented.
 */
static const struct {
    const char *name;
    int object_ok;          /* an object has it too (GET ?acl, ?tagging of a key) */
    const char *code, *msg; /* 404's; NULL: 200 with body */
    const char *body;       /* the document's inside, after its opening tag */
} subs[] = {
    {"acl", 1, NULL, NULL, "AccessControlPolicy"},
    {"tagging", 1, "NoSuchTagSet", "The TagSet does not exist.", "Tagging"},
    {"policy", 0, "NoSuchBucketPolicy", "The bucket policy does not exist.", NULL},
    {"policyStatus", 0, "NoSuchBucketPolicy", "The bucket policy does not exist.", NULL},
    {"cors", 0, "NoSuchCORSConfiguration", "The CORS configuration does not exist.", NULL},
    {"lifecycle", 0, "NoSuchLifecycleConfiguration", "The lifecycle configuration does not exist.",
     NULL},
    {"encryption", 0, "ServerSideEncryptionConfigurationNotFoundError",
     "The server side encryption configuration was not found.", NULL},
    {"website", 0, "NoSuchWebsiteConfiguration",
     "The specified bucket does not have a website configuration.", NULL},
    {"replication", 0, "ReplicationConfigurationNotFoundError",
     "The replication configuration was not found.", NULL},
    {"object-lock", 0, "ObjectLockConfigurationNotFoundError",
     "Object Lock configuration does not exist for this bucket.", NULL},
    {"ownershipControls", 0, "OwnershipControlsNotFoundError",
     "The bucket ownership controls were not found.", NULL},
    {"publicAccessBlock", 0, "NoSuchPublicAccessBlockConfiguration",
     "The public access block configuration was not found.", NULL},
    {"logging", 0, NULL, NULL, "BucketLoggingStatus"},
    {"notification", 0, NULL, NULL, "NotificationConfiguration"},
    {"accelerate", 0, NULL, NULL, "AccelerateConfiguration"},
    {"requestPayment", 0, NULL, NULL, "RequestPaymentConfiguration"},
};

int rio__gw_is_subresource(const char *name)
{
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (strcmp(name, subs[i].name) == 0)
            return 1;
    return 0;
}

int rio__gw_subresource(const struct gw_req *r, int *object_ok)
{
    for (size_t i = 0; i < sizeof(subs) / sizeof(subs[0]); i++)
        if (rio__gw_arg(r, subs[i].name)) {
            *object_ok = subs[i].object_ok;
            return (int)i;
        }
    return -1;
}

/* The document of subs[i] (200): an ACL granting the owner everything, no
 * tags, or a default configuration. */
static int sub_document(struct MHD_Connection *c, struct gw_req *r, int i)
{
    struct gw_buf b = {0};
    const char *tag = subs[i].body;

    rio__gw_buf_printf(&b, XML_HEAD "<%s xmlns=\"" XMLNS "\">", tag);
    if (!strcmp(tag, "AccessControlPolicy"))
        rio__gw_buf_printf(&b, GW_OWNER_XML
                           "<AccessControlList><Grant><Grantee "
                           "xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\" "
                           "xsi:type=\"CanonicalUser\"><ID>railio</ID><DisplayName>railio</"
                           "DisplayName></Grantee><Permission>FULL_CONTROL</Permission></"
                           "Grant></AccessControlList>");
    else if (!strcmp(tag, "Tagging"))
        rio__gw_buf_printf(&b, "<TagSet/>");
    else if (!strcmp(tag, "RequestPaymentConfiguration"))
        rio__gw_buf_printf(&b, "<Payer>BucketOwner</Payer>");
    rio__gw_buf_printf(&b, "</%s>\n", tag);
    return rio__gw_send_buf(c, r, 200, &b);
}

int rio__gw_bucket_config(struct MHD_Connection *c, struct gw_req *r)
{
    int ret, i = r->sub;

    if (i < 0 || (size_t)i >= sizeof(subs) / sizeof(subs[0]))
        return rio__gw_error(c, r, 501, "NotImplemented", "Not implemented.");
    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    /* (A bucket without tags is a 404 NoSuchTagSet; an object without
     * them an empty TagSet.) */
    if (subs[i].code)
        return rio__gw_error(c, r, 404, subs[i].code, subs[i].msg);
    return sub_document(c, r, i);
}

int rio__gw_object_config(struct MHD_Connection *c, struct gw_req *r)
{
    struct rio_desc d;
    int ret, i = r->sub;

    if (i < 0 || (size_t)i >= sizeof(subs) / sizeof(subs[0]) || !subs[i].object_ok)
        return rio__gw_error(c, r, 501, "NotImplemented", "Not implemented.");
    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    memset(&d, 0, sizeof(d));
    ret = rio_stat(rio__gw_client(), r->bkey, &d);
    rio_desc_cleanup(&d);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_LOOKUP, "lookup");
    return sub_document(c, r, i);
}

int rio__gw_delete_bucket(struct MHD_Connection *c, struct gw_req *r)
{
    struct rio_list_args a;
    struct rio_list_page p;
    char prefix[GW_BUCKET_MAX + 2], k[128];
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    snprintf(prefix, sizeof(prefix), "%s/", r->bucket);
    memset(&a, 0, sizeof(a));
    memset(&p, 0, sizeof(p));
    a.prefix = prefix;
    a.max_keys = 1;
    ret = rio_list(rio__gw_client(), &a, &p, NULL);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_READS, "list");
    /* A page may be empty and still not the last one. */
    ret = p.n > 0 || p.next_token[0];
    rio_list_page_cleanup(&p);
    if (ret)
        return rio__gw_error(c, r, 409, "BucketNotEmpty",
                             "The bucket you tried to delete is not empty.");
    rio__gw_meta_drop_bucket(r->bucket); /* records a crash or a direct delete left */
    /* Its multipart uploads go with it, parts and all, as in S3: else they
     * held their parts' room until aborted, and a bucket created again
     * under the name listed them and completed them. */
    {
        char up[sizeof(GW_MPU_PREFIX) + GW_BUCKET_MAX + 2];
        snprintf(up, sizeof(up), GW_MPU_PREFIX "%s/", r->bucket);
        (void)rio__gw_each_key(up, 0, rio__gw_drop_entry, NULL);
    }
    ret = rio__gw_cors_drop(r->bucket); /* before the marker: never one left without it */
    if (ret == 0)
        ret = rio__gw_btags_drop(r->bucket);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "delete bucket");
    marker_key(r->bucket, k, sizeof(k));
    ret = rio_delete(rio__gw_client(), k);
    if (ret < 0 && ret != RIO_ENOTFOUND)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "delete bucket");
    return rio__gw_send_empty(c, r, 204);
}

/* ------------------------------------------------------------- listing */

/* Key text for a listing: XML-escaped, and URL-encoded first with
 * encoding-type=url (every byte but unreserved ones and '/'). */
void rio__gw_list_text(struct gw_buf *b, const char *s, int url)
{
    if (!url) {
        rio__gw_buf_xml(b, s);
        return;
    }
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~' || ch == '/')
            rio__gw_buf_put(b, (const char *)&ch, 1);
        else
            rio__gw_buf_printf(b, "%%%02X", ch);
    }
}

void rio__gw_list_elem(struct gw_buf *b, const char *tag, const char *s, int url)
{
    rio__gw_buf_printf(b, "<%s>", tag);
    rio__gw_list_text(b, s, url);
    rio__gw_buf_printf(b, "</%s>", tag);
}

int rio__gw_list_options(struct MHD_Connection *c, struct gw_req *r, int any_delim,
                         const char **delim, int *url, int *ret)
{
    const char *d = rio__gw_arg(r, "delimiter"), *enc = rio__gw_arg(r, "encoding-type");

    *delim = d && *d ? d : NULL;
    *url = 0;
    if (*delim && strlen(*delim) > GW_DELIM_MAX) {
        *ret = rio__gw_error(c, r, 400, "InvalidArgument", "The delimiter is too long.");
        return -1;
    }
    if (*delim && !any_delim && strcmp(*delim, "/") != 0) {
        *ret = rio__gw_error(c, r, 501, "NotImplemented",
                             "The gateway lists with the delimiter '/' only.");
        return -1;
    }
    if (enc && *enc) {
        if (strcmp(enc, "url") != 0) {
            *ret =
                rio__gw_error(c, r, 400, "InvalidArgument", "Invalid Encoding Method specified.");
            return -1;
        }
        *url = 1;
    }
    return 0;
}

/* ListObjectsV2's continuation tokens: the backend's own token after 16
 * hex digits that name the listing it belongs to (the first 8 bytes of a
 * SHA-256 of the bucket, the prefix and the delimiter), so that a token of
 * another listing, or bytes that are no token, are refused (400, as S3)
 * rather than silently starting the listing over. Not a secret: the
 * backend takes any token a client forges, as it must. The backend's token
 * (a key, often) is wrapped (rio__gw_token_wrap): XML carries no control
 * character. */
#define TOKEN_TAG 16

static void token_tag(const char *bucket, const char *prefix, const char *delim,
                      char out[TOKEN_TAG + 1])
{
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int n = 0;
    EVP_MD_CTX *m = EVP_MD_CTX_new();

    memset(md, 0, sizeof(md));
    if (m && EVP_DigestInit_ex(m, EVP_sha256(), NULL)) {
        EVP_DigestUpdate(m, "railio-list-token", 18);
        EVP_DigestUpdate(m, bucket, strlen(bucket) + 1);
        EVP_DigestUpdate(m, prefix, strlen(prefix) + 1);
        EVP_DigestUpdate(m, delim ? delim : "", delim ? strlen(delim) + 1 : 1);
        EVP_DigestFinal_ex(m, md, &n);
    }
    EVP_MD_CTX_free(m);
    for (int i = 0; i < TOKEN_TAG / 2; i++)
        snprintf(out + 2 * i, 3, "%02x", md[i]);
}

/*
 * A listing folded at a delimiter other than '/' (the backends fold at '/'
 * only): keys in byte order (RIO_LIST_SORTED), each holding delim after the
 * prefix folded into its common prefix (through the delimiter), once; past
 * a common prefix the listing starts again after every key under it
 * (start_after the greatest key under it, rio__key_skip_past). At most max
 * entries after `after` (a backend key, or NULL) into out, *more whether
 * there are others. 0 or an error.
 */
static int list_folded(const char *fprefix, const char *delim, const char *after, unsigned max,
                       struct rio_list_page *out, int *more)
{
    struct rio_entry *e = rio__calloc((size_t)max + 1, sizeof(*e));
    char start[RIO_KEY_MAX + 2], token[RIO_LIST_TOKEN_MAX + 1] = "";
    size_t plen = strlen(fprefix), dl = strlen(delim);
    unsigned n = 0;
    int ret = 0, have_start = after != NULL;

    memset(out, 0, sizeof(*out));
    *more = 0;
    if (!e)
        return -ENOMEM;
    if (after)
        snprintf(start, sizeof(start), "%s", after);
    while (n < max + 1) {
        struct rio_list_args a = {.prefix = fprefix, .max_keys = 1000, .flags = RIO_LIST_SORTED};
        struct rio_list_page p;
        int restart = 0;
        memset(&p, 0, sizeof(p));
        if (token[0])
            a.token = token;
        else if (have_start)
            a.start_after = start;
        ret = rio_list(rio__gw_client(), &a, &p, NULL);
        if (ret < 0)
            break;
        for (unsigned i = 0; i < p.n && n < max + 1; i++) {
            const char *k = p.entries[i].key, *d = strstr(k + plen, delim);
            size_t cl = d ? (size_t)(d - k) + dl : 0;
            if (!d) {
                e[n++] = p.entries[i];
                continue;
            }
            memset(&e[n], 0, sizeof(e[n]));
            memcpy(e[n].key, k, cl);
            e[n].key[cl] = '\0';
            e[n++].flags = RIO_ENTRY_DIR;
            if (cl < RIO_KEY_MAX) { /* else no key is longer: none under it */
                rio__key_skip_past(start, k, cl);
                have_start = 1;
                token[0] = '\0';
                restart = 1;
                break;
            }
        }
        if (!restart)
            snprintf(token, sizeof(token), "%s", p.next_token);
        rio_list_page_cleanup(&p);
        if (!restart && !token[0])
            break;
    }
    if (ret < 0) {
        rio__free(e);
        return ret;
    }
    *more = n > max;
    out->entries = e;
    out->n = n > max ? max : n;
    return 0;
}

/* Where a listing of bucket under prefix starts after `after` (a marker,
 * start-after or a folded token's entry) into out (RIO_KEY_MAX + 1):
 * "BUCKET/after", or, when after names a common prefix (it starts with the
 * prefix and ends with the delimiter, wholly after the prefix), past every
 * key under it. A key that ends with the delimiter only where it overlaps
 * the prefix (key "d/" under prefix "d/", key "ab" under prefix "a" with
 * delimiter "ab") is listed as a key and folds nothing: the keys after it
 * are listed, not skipped. 0, or -1 when too long. */
static int list_after(const char *bucket, const char *prefix, const char *after, const char *delim,
                      char *out)
{
    size_t bl = strlen(bucket), al = strlen(after), dl = delim ? strlen(delim) : 0;
    size_t pl = strlen(prefix);

    if (bl + 1 + al > RIO_KEY_MAX)
        return -1;
    memcpy(out, bucket, bl);
    out[bl] = '/';
    memcpy(out + bl + 1, after, al + 1);
    if (dl && al >= pl + dl && strncmp(after, prefix, pl) == 0 &&
        strcmp(after + al - dl, delim) == 0 && bl + 1 + al < RIO_KEY_MAX)
        rio__key_skip_past(out, out, bl + 1 + al);
    return 0;
}

int rio__gw_list_objects(struct MHD_Connection *c, struct gw_req *r, int mode)
{
    int v2 = mode == GW_LIST_V2, vers = mode == GW_LIST_VERSIONS;
    const char *prefix = rio__gw_arg(r, "prefix"), *delim;
    const char *token = v2 ? rio__gw_arg(r, "continuation-token") : NULL;
    const char *after = rio__gw_arg(r, v2 ? "start-after" : vers ? "key-marker" : "marker");
    const char *vmark = vers ? rio__gw_arg(r, "version-id-marker") : NULL;
    const char *mk = rio__gw_arg(r, "max-keys");
    const char *lt = rio__gw_arg(r, "list-type"), *fo = rio__gw_arg(r, "fetch-owner");
    int owner = !v2 || (fo && strcmp(fo, "true") == 0); /* as S3 */
    char fprefix[RIO_KEY_MAX + 1], fafter[RIO_KEY_MAX + 1], tag[TOKEN_TAG + 1];
    char ftok[RIO_GW_TOKEN_WRAPPED(RIO_KEY_MAX) + 2 * RIO_KEY_MAX + 2] = "";
    char btok[RIO_LIST_TOKEN_MAX + 1], wtok[RIO_GW_TOKEN_WRAPPED(RIO_LIST_TOKEN_MAX)];
    struct rio_list_args a;
    struct rio_list_page p;
    struct gw_list_ck *ck = NULL; /* each entry's checksum, from its record */
    struct gw_buf b = {0};
    size_t blen = strlen(r->bucket) + 1;
    unsigned long max = 1000;
    int url = 0, ret, more = 0, other = 0;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    prefix = prefix ? prefix : "";
    if (v2 && strcmp(lt, "2") != 0)
        return rio__gw_error(c, r, 400, "InvalidArgument", "list-type must be 2.");
    /* Every object has one version, "null": a version-id-marker names it
     * (the listing goes on after key-marker's object) or nothing. */
    if (vmark && *vmark && !(after && *after))
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "A version-id marker cannot be specified without a key marker.");
    if (vmark && *vmark && strcmp(vmark, "null") != 0)
        return rio__gw_error(c, r, 400, "InvalidArgument", "Invalid version id specified");
    if (rio__gw_list_options(c, r, 1, &delim, &url, &ret) < 0)
        return ret;
    other = delim && strcmp(delim, "/") != 0;
    if (mk) {
        uint64_t v;
        if (rio__gw_parse_count(mk, INT32_MAX, &v) < 0)
            return rio__gw_error(c, r, 400, "InvalidArgument",
                                 "max-keys must be a non-negative integer.");
        max = v;
        if (max > 1000)
            max = 1000;
    }
    if (snprintf(fprefix, sizeof(fprefix), "%s/%s", r->bucket, prefix) >= (int)sizeof(fprefix))
        return rio__gw_error(c, r, 400, "InvalidArgument", "The prefix is too long.");
    memset(&a, 0, sizeof(a));
    memset(&p, 0, sizeof(p));
    a.prefix = fprefix;
    a.max_keys = (unsigned)max;
    /* In byte order on every backend, as S3's: clients rely on it (`aws s3
     * sync --delete` walks the local tree and the listing side by side: a
     * key out of order looks absent, and is deleted). */
    a.flags = (delim && !other ? RIO_LIST_DELIM : 0) | RIO_LIST_SORTED;
    token_tag(r->bucket, prefix, delim, tag);
    if (token && *token) {
        char rel[RIO_KEY_MAX + 1];
        if (strlen(token) <= TOKEN_TAG ||
            strlen(token) >= TOKEN_TAG + RIO_GW_TOKEN_WRAPPED(RIO_LIST_TOKEN_MAX) ||
            memcmp(token, tag, TOKEN_TAG) != 0 ||
            (other && (rio__gw_folded_token_parse(token + TOKEN_TAG, rel, sizeof(rel)) < 0 ||
                       list_after(r->bucket, prefix, rel, delim, fafter) < 0)) ||
            (!other && rio__gw_token_unwrap(token + TOKEN_TAG, btok, sizeof(btok)) < 0))
            return rio__gw_error(c, r, 400, "InvalidArgument",
                                 "The continuation token provided is incorrect.");
        if (other)
            a.start_after = fafter;
        else
            a.token = btok;
    } else if (after && *after) {
        if (list_after(r->bucket, prefix, after, delim, fafter) < 0)
            return rio__gw_error(c, r, 400, "InvalidArgument", "The marker is too long.");
        a.start_after = fafter;
    }
    if (max > 0) {
        ret = other ? list_folded(fprefix, delim, a.start_after, (unsigned)max, &p, &more)
                    : rio_list(rio__gw_client(), &a, &p, NULL);
        if (ret == RIO_EINVAL && token && *token)
            return rio__gw_error(c, r, 400, "InvalidArgument",
                                 "The continuation token provided is incorrect.");
        if (ret < 0)
            return rio__gw_rio_error(c, r, ret, GW_READS, "list");
        if (!other)
            more = p.next_token[0] != '\0';
        else if (more)
            rio__gw_folded_token(p.entries[p.n - 1].key + blen, ftok, sizeof(ftok));
        ck = p.n ? rio__calloc(p.n, sizeof(*ck)) : NULL; /* NULL: none listed */
        rio__gw_meta_list_etags(r->bucket, &p, ck);
    }
    rio__gw_buf_printf(&b, XML_HEAD "<%s xmlns=\"" XMLNS "\">",
                       vers ? "ListVersionsResult" : "ListBucketResult");
    rio__gw_list_elem(&b, "Name", r->bucket, 0);
    rio__gw_list_elem(&b, "Prefix", prefix, url);
    if (vers) {
        rio__gw_list_elem(&b, "KeyMarker", after ? after : "", url);
        rio__gw_list_elem(&b, "VersionIdMarker", vmark ? vmark : "", 0);
        if (more && p.n) {
            const struct rio_entry *e = &p.entries[p.n - 1];
            rio__gw_list_elem(&b, "NextKeyMarker", e->key + blen, url);
            if (!(e->flags & RIO_ENTRY_DIR))
                rio__gw_list_elem(&b, "NextVersionIdMarker", "null", 0);
        }
    } else if (v2) {
        rio__gw_buf_printf(&b, "<KeyCount>%u</KeyCount>", p.n);
        if (token) /* an empty one too: it was sent (and listed from the start) */
            rio__gw_list_elem(&b, "ContinuationToken", token, 0);
        if (more) {
            rio__gw_buf_put(&b, "<NextContinuationToken>", 23);
            rio__gw_buf_put(&b, tag, TOKEN_TAG);
            if (!other)
                rio__gw_token_wrap(p.next_token, wtok);
            rio__gw_buf_xml(&b, other ? ftok : wtok);
            rio__gw_buf_put(&b, "</NextContinuationToken>", 24);
        }
        if (after && *after)
            rio__gw_list_elem(&b, "StartAfter", after, url);
    } else {
        rio__gw_list_elem(&b, "Marker", after ? after : "", url);
        if (more && p.n)
            rio__gw_list_elem(&b, "NextMarker", p.entries[p.n - 1].key + blen, url);
    }
    rio__gw_buf_printf(&b, "<MaxKeys>%lu</MaxKeys>", max);
    if (delim)
        rio__gw_list_elem(&b, "Delimiter", delim, url);
    if (url)
        rio__gw_buf_printf(&b, "<EncodingType>url</EncodingType>");
    rio__gw_buf_printf(&b, "<IsTruncated>%s</IsTruncated>", more ? "true" : "false");
    for (unsigned i = 0; i < p.n; i++) {
        const struct rio_entry *e = &p.entries[i];
        char date[32];
        if (strlen(e->key) < blen || (e->flags & RIO_ENTRY_DIR))
            continue;
        rio__gw_iso_date(e->mtime_ns, date);
        rio__gw_buf_put(&b, vers ? "<Version>" : "<Contents>", vers ? 9 : 10);
        rio__gw_list_elem(&b, "Key", e->key + blen, url);
        if (vers)
            rio__gw_buf_put(&b, "<VersionId>null</VersionId><IsLatest>true</IsLatest>", 52);
        rio__gw_buf_printf(&b, "<LastModified>%s</LastModified>", date);
        if (e->etag[0])
            rio__gw_buf_etag(&b, e->etag);
        if (ck && ck[i].algo[0]) { /* S3's names: CRC32, CRC64NVME, ... */
            char up[12];
            for (size_t k = 0; k < sizeof(up); k++)
                up[k] = (char)(ck[i].algo[k] >= 'a' && ck[i].algo[k] <= 'z' ? ck[i].algo[k] - 32
                                                                            : ck[i].algo[k]);
            rio__gw_buf_printf(&b,
                               "<ChecksumAlgorithm>%s</ChecksumAlgorithm><ChecksumType>%s"
                               "</ChecksumType>",
                               up, ck[i].composite ? "COMPOSITE" : "FULL_OBJECT");
        }
        rio__gw_buf_printf(&b, "<Size>%llu</Size>%s<StorageClass>STANDARD</StorageClass>%s",
                           (unsigned long long)e->size, owner ? GW_OWNER_XML : "",
                           vers ? "</Version>" : "</Contents>");
    }
    for (unsigned i = 0; i < p.n; i++) {
        const struct rio_entry *e = &p.entries[i];
        if (strlen(e->key) < blen || !(e->flags & RIO_ENTRY_DIR))
            continue;
        rio__gw_buf_put(&b, "<CommonPrefixes>", 16);
        rio__gw_list_elem(&b, "Prefix", e->key + blen, url);
        rio__gw_buf_put(&b, "</CommonPrefixes>", 17);
    }
    rio__gw_buf_printf(&b, "</%s>\n", vers ? "ListVersionsResult" : "ListBucketResult");
    rio_list_page_cleanup(&p);
    rio__free(ck);
    return rio__gw_send_buf(c, r, 200, &b);
}

/* ------------------------------------------------------------- GET, HEAD */

struct get_state {
    struct rio_reader *rd;
    struct gw_req *r;
    uint64_t left;
    char *first; /* the range's first bytes, read before the answer */
    size_t flen, fpos;
    /* The body buffers' room its reader holds (bodymem.c), r's until the
     * response took it: given back once the reader is closed */
    unsigned mem_slot;
    uint64_t mem;
    /* Watched by bodymem.c's sweeper while it holds room (watched) */
    struct gw_mem_stream ms;
    bool watched;
};

static ssize_t get_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct get_state *st = cls;
    int64_t n;

    (void)pos;
    if (!st->rd)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    if (st->left == 0)
        return MHD_CONTENT_READER_END_OF_STREAM;
    if (max > st->left)
        max = (size_t)st->left;
    if (st->fpos < st->flen) {
        n = (int64_t)(st->flen - st->fpos < max ? st->flen - st->fpos : max);
        memcpy(buf, st->first + st->fpos, (size_t)n);
        st->fpos += (size_t)n;
    } else {
        n = rio_reader_read(st->rd, buf, max);
    }
    if (n <= 0) {
        SRV_WARN("s3: GET cut off: %s", n < 0 ? rio_strerror((int)n) : "the object ended early");
        return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    st->left -= (uint64_t)n;
    st->r->bytes_out += (uint64_t)n;
    atomic_fetch_add(&st->ms.sent, (uint64_t)n);
    return (ssize_t)n;
}

static void get_free(void *cls)
{
    struct get_state *st = cls;

    if (st->watched) /* before libmicrohttpd closes the socket */
        rio__gw_mem_stream_del(&st->ms);
    if (st->rd)
        rio_reader_close(st->rd);
    rio__free(st->first);
    rio__gw_mem_release(st->mem_slot, st->mem);
    rio__free(st);
}

/* Does an If-Match / If-None-Match list name etag? strong: If-Match's
 * comparison (RFC 9110 8.8.3.2), where a weak tag (W/"...") never matches;
 * If-None-Match compares weakly. */
static int etag_in(const char *list, const char *etag, int strong)
{
    const char *p = list;

    while (*p) {
        size_t n;
        int weak = 0;
        while (*p == ' ' || *p == ',')
            p++;
        if (*p == '*')
            return 1;
        if (strncmp(p, "W/", 2) == 0) {
            p += 2;
            weak = 1;
        }
        if (*p == '"')
            p++;
        n = strcspn(p, "\",");
        if (n == strlen(etag) && n && strncmp(p, etag, n) == 0 && !(strong && weak))
            return 1;
        p += n;
        if (*p == '"')
            p++;
    }
    return 0;
}

#define GET_GO (-1000) /* the preconditions hold: serve the object */

/* If-Match, If-Unmodified-Since (412), If-None-Match, If-Modified-Since
 * (304) against the object's etag and mtime (s): GET_GO, or the answer
 * queued. */
static int get_conditions(struct MHD_Connection *c, struct gw_req *r, const char *etag,
                          int64_t mtime, const char *date)
{
    const char *im = rio__gw_header(c, "If-Match"), *inm = rio__gw_header(c, "If-None-Match");
    const char *ims = rio__gw_header(c, "If-Modified-Since");
    const char *ius = rio__gw_header(c, "If-Unmodified-Since");
    struct MHD_Response *resp;

    if (im && !etag_in(im, etag, 1))
        return rio__gw_error(c, r, 412, "PreconditionFailed",
                             "At least one of the pre-conditions you specified did not hold");
    if (!im && ius) {
        int64_t t = rio__gw_parse_http_date(ius);
        if (t >= 0 && mtime > t)
            return rio__gw_error(c, r, 412, "PreconditionFailed",
                                 "At least one of the pre-conditions you specified did not hold");
    }
    if ((inm && etag_in(inm, etag, 0)) || (!inm && ims && rio__gw_parse_http_date(ims) >= 0 &&
                                           mtime <= rio__gw_parse_http_date(ims))) {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
        if (resp) {
            etag_hdr(resp, etag);
            MHD_add_response_header(resp, "Last-Modified", date);
        }
        return rio__gw_send(c, r, 304, resp);
    }
    return GET_GO;
}

/* Range "bytes=a-b", "bytes=a-", "bytes=-n" of an object of size: 1 with
 * [*off, *off + *len), 0 to serve the whole object (no Range, several
 * ranges or a malformed one: ignored, as S3 does), -1 unsatisfiable. */
static int parse_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    unsigned long long a = 0, b = 0;
    const char *p;
    char *end;

    if (!h || strncmp(h, "bytes=", 6) != 0 || strchr(h, ','))
        return 0;
    p = h + 6;
    if (*p == '-') {
        if (p[1] < '0' || p[1] > '9')
            return 0;
        b = strtoull(p + 1, &end, 10);
        if (*end)
            return 0;
        if (b == 0 || size == 0)
            return -1;
        if (b > size)
            b = size;
        *off = size - b;
        *len = b;
        return 1;
    }
    if (*p < '0' || *p > '9')
        return 0;
    a = strtoull(p, &end, 10);
    if (*end != '-')
        return 0;
    p = end + 1;
    if (*p) {
        if (*p < '0' || *p > '9')
            return 0;
        b = strtoull(p, &end, 10);
        if (*end || b < a)
            return 0;
    } else {
        b = UINT64_MAX;
    }
    if (a >= size)
        return -1;
    if (b >= size)
        b = size - 1;
    *off = a;
    *len = b - a + 1;
    return 1;
}

/* Look the object up: from the head cache when cached_ok, else from the
 * backend (and into the cache). 0, or the backend's error. */
static int get_lookup(const struct gw_req *r, int cached_ok, struct rio_desc *d, int64_t *mtime)
{
    int ret;

    if (cached_ok && rio__gw_head_get(r->bkey, d, mtime))
        return 0;
    memset(d, 0, sizeof(*d));
    ret = rio_stat_mtime(rio__gw_client(), r->bkey, d, mtime);
    if (ret < 0) {
        rio_desc_cleanup(d);
        return ret;
    }
    if (!*mtime) /* the backend's lookup does not say: its listing may */
        *mtime = key_mtime(r->bkey);
    rio__gw_head_put(r->bkey, d, *mtime);
    return 0;
}

/* The record of the object d (NULL: none or not to use): from the head
 * cache, else from f (the read started with the lookup) or read now, and
 * kept in the cache unless a write of the key through this gateway came
 * since epoch (taken before the lookup). Takes f. */
static struct gw_meta *get_meta(const struct gw_req *r, const struct rio_desc *d, uint64_t epoch,
                                struct gw_meta_fetch *f)
{
    struct gw_meta *m;
    int sure;

    if (rio__gw_head_meta(r->bkey, d, &m)) {
        rio__gw_meta_fetch_cancel(f);
        return m;
    }
    m = f ? rio__gw_meta_fetch_end(f, d, &sure) : rio__gw_meta_load(r->bucket, r->key, d, &sure);
    if (sure)
        rio__gw_head_set_meta(r->bkey, d, m, epoch);
    return m;
}

/* The ring a reader of [off, off + len) of d fills (core/call.c): whole
 * chunks of the range, as many as its prefetch; one chunk's own bytes when
 * the range is in one. */
static uint64_t get_window(const struct rio_desc *d, uint64_t off, uint64_t len)
{
    uint64_t cs = d->chunk_size, first, n;

    if (!cs || !len || off > d->size || len > d->size - off)
        return len;
    first = off / cs;
    n = (off + len - 1) / cs - first + 1;
    if (n == 1)
        return d->size - first * cs < cs ? d->size - first * cs : cs;
    return rio__gw_mem_window(n > UINT64_MAX / cs ? UINT64_MAX : n * cs, cs);
}

/* Open a reader on [off, off + len) of the generation d names, only the
 * chunks of the range, and read its first bytes before anything is
 * answered: a generation replaced or removed since d was read fails here
 * (RIO_EGENERATION), while the GET can still look again. */
static int get_open(struct get_state *st, const struct rio_desc *d, uint64_t off, uint64_t len)
{
    int ret;

    st->flen = len < GET_FIRST ? (size_t)len : GET_FIRST;
    st->first = rio__malloc(st->flen);
    if (!st->first)
        return -ENOMEM;
    ret = rio_reader_open_desc(rio__gw_client(), d, off, len, 0, NULL, &st->rd);
    for (size_t got = 0; ret == 0 && got < st->flen;) {
        int64_t n = rio_reader_read(st->rd, st->first + got, st->flen - got);
        if (n <= 0)
            ret = n < 0 ? (int)n : RIO_EPROTO;
        else
            got += (size_t)n;
    }
    if (ret < 0) {
        rio_reader_close(st->rd);
        st->rd = NULL;
        rio__free(st->first);
        st->first = NULL;
    }
    return ret;
}

/* GET and HEAD's response-content-type and the other response-*
 * parameters: the header they name, instead of the stored one, as S3's.
 * Signed requests only (S3: 400 for anonymous ones, or a link to a public
 * object could serve it as text/html). */
static const char *const resp_params[][2] = {
    {"response-content-type", "Content-Type"},
    {"response-content-disposition", "Content-Disposition"},
    {"response-content-encoding", "Content-Encoding"},
    {"response-content-language", "Content-Language"},
    {"response-cache-control", "Cache-Control"},
    {"response-expires", "Expires"},
};
#define RESP_PARAMS (sizeof(resp_params) / sizeof(resp_params[0]))

/* 0 when r's response-* parameters may be applied (none, or signed and
 * without a control character), else the error queued (*ret). */
static int resp_params_check(struct MHD_Connection *c, struct gw_req *r, int *ret)
{
    for (size_t i = 0; i < RESP_PARAMS; i++) {
        const char *v = rio__gw_arg(r, resp_params[i][0]);
        if (!v)
            continue;
        if (r->auth.anonymous) {
            *ret = rio__gw_error(c, r, 400, "InvalidRequest",
                                 "Request specific response headers cannot be used for "
                                 "anonymous GET requests.");
            return -1;
        }
        for (const unsigned char *p = (const unsigned char *)v; *p; p++)
            if ((*p < 0x20 && *p != '\t') || *p == 0x7f) {
                *ret = rio__gw_error(c, r, 400, "InvalidArgument",
                                     "A response-* parameter holds a control character.");
                return -1;
            }
    }
    return 0;
}

static void resp_params_apply(struct MHD_Response *resp, const struct gw_req *r)
{
    for (size_t i = 0; i < RESP_PARAMS; i++) {
        const char *v = rio__gw_arg(r, resp_params[i][0]), *old;
        if (!v)
            continue;
        while ((old = MHD_get_response_header(resp, resp_params[i][1])) &&
               MHD_del_response_header(resp, resp_params[i][1], old) == MHD_YES)
            ;
        MHD_add_response_header(resp, resp_params[i][1], v);
    }
}

/* GET and HEAD ?partNumber=N: part N's bytes of the object d, which m
 * (NULL: none) describes. 1 with [*off, *off + *len) and *count the
 * object's parts (0 for an object not uploaded in parts, which is its one
 * part, as S3 answers), 0 when there is no part N, -1 when the object was
 * uploaded in parts whose sizes were not recorded. */
static int part_of(const struct gw_meta *m, const struct rio_desc *d, unsigned pn, uint64_t *off,
                   uint64_t *len, unsigned *count)
{
    int ret = rio__gw_meta_part(m, pn, off, len, count);

    if (ret >= 0)
        return ret;
    *count = 0;
    if (m && strchr(m->s3etag, '-'))
        return -1;
    *off = 0;
    *len = d->size;
    return pn == 1;
}

int rio__gw_checksum_xml(struct gw_buf *b, const struct gw_meta *m)
{
    char el[24];

    if (!m || !m->ck_algo[0] || !m->ck_value[0])
        return 0;
    snprintf(el, sizeof(el), "Checksum%s", m->ck_algo);
    for (char *q = el + 8; *q; q++)
        *q = (char)(*q >= 'a' && *q <= 'z' ? *q - 'a' + 'A' : *q);
    rio__gw_list_elem(b, el, m->ck_value, 0);
    rio__gw_list_elem(b, "ChecksumType", strchr(m->ck_value, '-') ? "COMPOSITE" : "FULL_OBJECT", 0);
    return 1;
}

/*
 * GetObjectAttributes: what x-amz-object-attributes asks of ETag (the one
 * GET presents, without quotes, as S3), Checksum (the kept one and its
 * type), ObjectParts (a multipart object's count, and its parts' sizes
 * where recorded, from x-amz-part-number-marker, at most x-amz-max-parts),
 * StorageClass (STANDARD) and ObjectSize. Last-Modified as GET's.
 */
int rio__gw_get_attributes(struct MHD_Connection *c, struct gw_req *r)
{
    const char *want = rio__gw_header(c, "x-amz-object-attributes");
    const char *mp = rio__gw_header(c, "x-amz-max-parts");
    const char *pm = rio__gw_header(c, "x-amz-part-number-marker");
    uint64_t maxp = 1000, marker = 0;
    struct gw_buf b = {0};
    struct rio_desc d;
    char date[30];
    int64_t mtime;
    int mask, ret;

    mask = want ? rio__gw_attr_mask(want) : 0;
    if (mask == 0)
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "The x-amz-object-attributes header specifying the attributes to be "
                             "retrieved is either missing or empty");
    if (mask < 0)
        return rio__gw_error(c, r, 400, "InvalidArgument", "Invalid attribute name specified.");
    if ((mp && rio__gw_parse_count(mp, INT32_MAX, &maxp) < 0) ||
        (pm && rio__gw_parse_count(pm, INT32_MAX, &marker) < 0))
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "x-amz-max-parts and x-amz-part-number-marker must be non-negative "
                             "integers.");
    if (maxp > 1000)
        maxp = 1000;
    uint64_t epoch = rio__gw_head_epoch(r->bkey);
    ret = get_lookup(r, 0, &d, &mtime);
    if (ret < 0) {
        if (ret == RIO_ENOTFOUND && rio__gw_bucket_exists(r->bucket) == 0)
            return rio__gw_error(c, r, 404, "NoSuchBucket", "The specified bucket does not exist.");
        return rio__gw_rio_error(c, r, ret, GW_LOOKUP, "lookup");
    }
    rio__gw_http_date(mtime / 1000000000, date);
    rio__gw_meta_free(r->meta);
    r->meta = get_meta(r, &d, epoch, NULL);
    const struct gw_meta *m = r->meta;
    const char *etag = rio__gw_meta_etag(m, d.etag), *dash = strchr(etag, '-');

    rio__gw_buf_printf(&b, XML_HEAD "<GetObjectAttributesResponse xmlns=\"" XMLNS "\">");
    if (mask & GW_ATTR_ETAG)
        rio__gw_list_elem(&b, "ETag", etag, 0);
    if ((mask & GW_ATTR_CHECKSUM) && m && m->ck_algo[0] && m->ck_value[0]) {
        rio__gw_buf_put(&b, "<Checksum>", 10);
        rio__gw_checksum_xml(&b, m);
        rio__gw_buf_put(&b, "</Checksum>", 11);
    }
    if ((mask & GW_ATTR_PARTS) && dash) {
        unsigned count = 0, pn;
        uint64_t off, len;
        int sized = rio__gw_meta_part(m, 1, &off, &len, &count) >= 0;
        if (!sized) {
            uint64_t v = 0;
            count = rio__gw_parse_count(dash + 1, GW_MPU_PARTS_MAX, &v) == 0 ? (unsigned)v : 0;
        }
        rio__gw_buf_put(&b, "<ObjectParts>", 13);
        rio__gw_buf_printf(&b, "<PartsCount>%u</PartsCount>", count);
        if (sized) {
            uint64_t last = marker;
            rio__gw_buf_printf(&b,
                               "<PartNumberMarker>%llu</PartNumberMarker><MaxParts>%llu</MaxParts>",
                               (unsigned long long)marker, (unsigned long long)maxp);
            for (pn = (unsigned)(marker < count ? marker + 1 : count + 1);
                 pn <= count && pn - marker <= maxp; pn++) {
                unsigned n;
                rio__gw_meta_part(m, pn, &off, &len, &n);
                rio__gw_buf_printf(&b, "<Part><PartNumber>%u</PartNumber><Size>%llu</Size></Part>",
                                   pn, (unsigned long long)len);
                last = pn;
            }
            rio__gw_buf_printf(&b, "<IsTruncated>%s</IsTruncated>",
                               last < count ? "true" : "false");
            if (last < count)
                rio__gw_buf_printf(&b, "<NextPartNumberMarker>%llu</NextPartNumberMarker>",
                                   (unsigned long long)last);
        }
        rio__gw_buf_put(&b, "</ObjectParts>", 14);
    }
    if (mask & GW_ATTR_CLASS)
        rio__gw_buf_put(&b, "<StorageClass>STANDARD</StorageClass>", 37);
    if (mask & GW_ATTR_SIZE)
        rio__gw_buf_printf(&b, "<ObjectSize>%llu</ObjectSize>", (unsigned long long)d.size);
    rio__gw_buf_put(&b, "</GetObjectAttributesResponse>", 30);
    rio_desc_cleanup(&d);
    const char *hdrs[] = {"Last-Modified", date, NULL};
    return rio__gw_send_buf_with(c, r, 200, &b, hdrs);
}

int rio__gw_get_object(struct MHD_Connection *c, struct gw_req *r, int head)
{
    struct rio_desc d;
    struct MHD_Response *resp;
    struct get_state *st = NULL;
    const char *etag = "";
    char date[30], cr[96];
    const char *pns = rio__gw_arg(r, "partNumber");
    uint64_t off, len;
    int64_t mtime;
    unsigned pn = 0, parts = 0;
    int ret, rg, status;
    /* Preconditions are answered from the backend's head, never a cached one. */
    int conditional = rio__gw_header(c, "If-Match") || rio__gw_header(c, "If-None-Match") ||
                      rio__gw_header(c, "If-Modified-Since") ||
                      rio__gw_header(c, "If-Unmodified-Since");

    if (resp_params_check(c, r, &ret) < 0)
        return ret;
    if (pns) {
        uint64_t v;
        if (rio__gw_parse_count(pns, GW_MPU_PARTS_MAX, &v) < 0 || v < 1)
            return rio__gw_error(c, r, 400, "InvalidArgument",
                                 "Part number must be an integer between 1 and 10000, "
                                 "inclusive");
        if (rio__gw_header(c, "Range"))
            return rio__gw_error(c, r, 400, "InvalidRequest",
                                 "Cannot specify both Range header and partNumber query "
                                 "parameter");
        pn = (unsigned)v;
    }
    for (int tries = 0;; tries++) {
        uint64_t epoch = rio__gw_head_epoch(r->bkey);
        /* The record's read runs beside the lookup, unless the cache holds
         * it (for the generation the lookup will most likely find). */
        struct gw_meta_fetch *mf = rio__gw_head_meta_known(r->bkey)
                                       ? NULL
                                       : rio__gw_meta_fetch_start(r->bucket, r->key, 1);
        ret = get_lookup(r, !head && !conditional && tries == 0, &d, &mtime);
        if (ret < 0) {
            rio__gw_meta_fetch_cancel(mf);
            if (ret == RIO_ENOTFOUND && rio__gw_bucket_exists(r->bucket) == 0)
                return rio__gw_error(c, r, 404, "NoSuchBucket",
                                     "The specified bucket does not exist.");
            return rio__gw_rio_error(c, r, ret, GW_LOOKUP, "lookup");
        }
        mtime /= 1000000000;
        rio__gw_http_date(mtime, date);
        /* The record of this version (the multipart ETag, content headers,
         * x-amz-meta-*): the conditions compare with its ETag. */
        rio__gw_meta_free(r->meta);
        r->meta = get_meta(r, &d, epoch, mf);
        etag = rio__gw_meta_etag(r->meta, d.etag);
        ret = get_conditions(c, r, etag, mtime, date);
        if (ret != GET_GO) {
            rio_desc_cleanup(&d);
            return ret;
        }
        off = 0;
        len = d.size;
        status = 200;
        if (pn) {
            rg = part_of(r->meta, &d, pn, &off, &len, &parts);
            if (rg < 0) {
                rio_desc_cleanup(&d);
                return rio__gw_error(c, r, 501, "NotImplemented",
                                     "The sizes of this object's parts were not recorded "
                                     "(completed by an earlier gateway, or of more than 1024 "
                                     "sizes): read it by Range.");
            }
            if (rg == 0) {
                rio_desc_cleanup(&d);
                return rio__gw_error(c, r, 416, "InvalidPartNumber",
                                     "The requested partnumber is not satisfiable");
            }
            rg = len > 0;
        } else {
            rg = parse_range(rio__gw_header(c, "Range"), d.size, &off, &len);
        }
        if (rg < 0) {
            rio_desc_cleanup(&d);
            return rio__gw_error(c, r, 416, "InvalidRange",
                                 "The requested range is not satisfiable");
        }
        if (rg > 0) {
            status = 206;
            snprintf(cr, sizeof(cr), "bytes %llu-%llu/%llu", (unsigned long long)off,
                     (unsigned long long)(off + len - 1), (unsigned long long)d.size);
        }
        if (head || len == 0)
            break;
        /* Its reader's ring and first bytes, of the body buffers' budget:
         * many readers that read nothing held a ring each (bodymem.c). */
        uint64_t win = rio__gw_mem_sum(get_window(&d, off, len), len < GET_FIRST ? len : GET_FIRST);
        if (!r->mem_held && rio__gw_mem_take(r, win) < 0) {
            rio_desc_cleanup(&d);
            return rio__gw_mem_refuse(c, r);
        }
        st = rio__calloc(1, sizeof(*st));
        if (!st) {
            rio_desc_cleanup(&d);
            return MHD_NO;
        }
        ret = get_open(st, &d, off, len);
        if (ret == 0)
            break;
        rio__free(st);
        st = NULL;
        rio_desc_cleanup(&d);
        rio__gw_head_drop(r->bkey);
        /* Replaced or removed since it was read (or cached): again, a few
         * times (each lookup sees the newest version), then 503 SlowDown,
         * which clients retry: a key overwritten without pause got 500
         * InternalError once two replaces fell between a lookup and its
         * open (gateways review). */
        if (ret != RIO_EGENERATION && ret != RIO_ENOTFOUND)
            return rio__gw_rio_error(c, r, ret, GW_READS, "open");
        if (tries + 1 >= GW_GET_TRIES)
            return rio__gw_error(c, r, 503, "SlowDown",
                                 "The object was replaced while it was being read, again and "
                                 "again; please try again.");
        if (tries)
            usleep(1000u << tries); /* 2, 4 ms ...: let a burst of writes pass */
    }
    bool fast = etag == d.etag && etag_is_fast(&d);
    rio_desc_cleanup(&d); /* frees only its checksum list */
    if (head) {
        /* No body: a response of the object's length whose reader is
         * never called (so its buffer, allocated with it, stays small). */
        st = rio__calloc(1, sizeof(*st));
        if (!st)
            return MHD_NO;
        resp = MHD_create_response_from_callback(len, HEAD_BLOCK, get_cb, st, get_free);
    } else if (len == 0) {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    } else if (st->flen == len) {
        /* The whole range was read before answering (a small object): one
         * buffer, so headers and body leave in one send, and no block of
         * GET_BLOCK bytes is allocated for the callback. */
        char *body = st->first;
        st->first = NULL;
        get_free(st);
        st = NULL;
        r->bytes_out += len;
        resp = MHD_create_response_from_buffer_with_free_callback(len, body, rio__free);
        if (!resp)
            rio__free(body);
    } else {
        st->r = r;
        st->left = len;
        resp = MHD_create_response_from_callback(len, GET_BLOCK, get_cb, st, get_free);
        if (resp) /* given back when the reader is closed, not before */
            rio__gw_mem_move(r, &st->mem_slot, &st->mem);
        /* Its client must read it while room is scarce (the sweeper). */
        const union MHD_ConnectionInfo *ci =
            resp && st->mem ? MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD) : NULL;
        if (ci) {
            rio__gw_mem_stream_add(&st->ms, ci->connect_fd);
            st->watched = true;
        }
    }
    if (!resp) {
        if (st)
            get_free(st);
        return MHD_NO;
    }
    etag_hdr(resp, etag);
    if (fast)
        MHD_add_response_header(resp, "x-railio-etag", "fast");
    MHD_add_response_header(resp, "Last-Modified", date);
    MHD_add_response_header(resp, "Accept-Ranges", "bytes");
    rio__gw_meta_headers(resp, r->meta);
    resp_params_apply(resp, r);
    if (status == 206)
        MHD_add_response_header(resp, "Content-Range", cr);
    if (parts) {
        char pc[16];
        snprintf(pc, sizeof(pc), "%u", parts);
        MHD_add_response_header(resp, "x-amz-mp-parts-count", pc);
    }
    if (status == 200 && !pn)
        rio__gw_checksum_headers(c, resp, r->meta);
    return rio__gw_send(c, r, status, resp);
}

/* ------------------------------------------------------------- DELETE */

/* A delete's conditions (S3, 2025), as strings as sent (NULL: absent):
 * the ETag (a list as If-Match's, or '*'), the size in bytes, the last
 * modification time (an HTTP date or ISO 8601). */
struct del_cond {
    const char *etag, *size, *time;
};

#define DEL_COND_FAILED (-2000) /* a condition does not hold: 412 */
#define DEL_COND_BAD (-2001)    /* a size or a time that is none: 400 */

/* Check dc on the object bucket/key (bkey on the backend) a fresh lookup
 * finds: 0 with *gen its generation (0 when dc names no condition), for a
 * removal that compares it again (rio_delete_if); RIO_ENOTFOUND when there
 * is none, DEL_COND_FAILED, DEL_COND_BAD, or the lookup's error. */
static int del_cond_check(const char *bucket, const char *key, const char *bkey,
                          const struct del_cond *dc, uint64_t *gen)
{
    uint64_t want_size = 0;
    int64_t want_time = -1, mtime = 0;
    struct rio_desc d;
    int ret;

    *gen = 0;
    if (!dc->etag && !dc->size && !dc->time)
        return 0;
    if ((dc->size && rio__gw_parse_count(dc->size, UINT64_MAX, &want_size) < 0) ||
        (dc->time && (want_time = rio__gw_parse_date(dc->time)) < 0))
        return DEL_COND_BAD;
    memset(&d, 0, sizeof(d));
    ret = rio_stat_mtime(rio__gw_client(), bkey, &d, &mtime);
    if (ret < 0) {
        rio_desc_cleanup(&d);
        return ret;
    }
    if (dc->time && !mtime) /* the backend's lookup does not say: its listing may */
        mtime = key_mtime(bkey);
    struct gw_meta *m = dc->etag ? rio__gw_meta_load(bucket, key, &d, NULL) : NULL;
    int hold = (!dc->etag || etag_in(dc->etag, rio__gw_meta_etag(m, d.etag), 1)) &&
               (!dc->size || d.size == want_size) && (!dc->time || mtime / 1000000000 == want_time);
    rio__gw_meta_free(m);
    *gen = d.generation;
    rio_desc_cleanup(&d);
    return hold ? 0 : DEL_COND_FAILED;
}

/* Remove bkey, only the generation gen when not 0: the backend's result,
 * RIO_ENOTSUP where it cannot remove one generation only. */
static int del_gen(const char *bkey, uint64_t gen)
{
    return gen ? rio_delete_if(rio__gw_client(), bkey, gen) : rio_delete(rio__gw_client(), bkey);
}

int rio__gw_delete_object(struct MHD_Connection *c, struct gw_req *r)
{
    /* If-Match, x-amz-if-match-size, x-amz-if-match-last-modified-time:
     * checked on a fresh lookup, and the removal compares the generation
     * that lookup saw, so an object written in between is left. */
    struct del_cond dc = {rio__gw_header(c, "If-Match"), rio__gw_header(c, "x-amz-if-match-size"),
                          rio__gw_header(c, "x-amz-if-match-last-modified-time")};
    uint64_t gen;
    int ret;
    /* The record as it was before the object goes, read beside the
     * bucket's check: only that one is removed after it (a PutObject's
     * record written meanwhile stays). */
    struct gw_meta_gen *rec = rio__gw_meta_gen_start(r->bucket, r->key);

    if (rio__gw_need_bucket(c, r, &ret) < 0) {
        rio__gw_meta_gen_cancel(rec);
        return ret;
    }
    uint64_t rgen = 0;
    int rhave = rio__gw_meta_gen_end(rec, &rgen) == 0;
    ret = del_cond_check(r->bucket, r->key, r->bkey, &dc, &gen);
    if (ret == DEL_COND_BAD)
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "x-amz-if-match-size or x-amz-if-match-last-modified-time is not a "
                             "size or a date.");
    if (ret == DEL_COND_FAILED)
        return rio__gw_error(c, r, 412, "PreconditionFailed",
                             "At least one of the pre-conditions you specified did not hold");
    if (ret == RIO_ENOTFOUND)
        return rio__gw_error(c, r, 404, "NoSuchKey", "The specified key does not exist.");
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_LOOKUP, "lookup");
    ret = del_gen(r->bkey, gen);
    if (gen && ret == RIO_EGENERATION) /* replaced since the lookup: left */
        return rio__gw_error(c, r, 412, "PreconditionFailed",
                             "At least one of the pre-conditions you specified did not hold");
    if (gen && ret == RIO_ENOTSUP)
        return rio__gw_error(c, r, 501, "NotImplemented",
                             "This gateway's backend cannot delete on a condition (If-Match, "
                             "x-amz-if-match-*): the object is not deleted.");
    if (gen && ret == RIO_ENOTFOUND)
        return rio__gw_error(c, r, 404, "NoSuchKey", "The specified key does not exist.");
    if (ret < 0 && ret != RIO_ENOTFOUND && !rio__gw_path_error(ret))
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "delete");
    /* after the object: a record left alone describes nothing */
    if (!rhave)
        rio__gw_meta_drop(r->bucket, r->key);
    else if (rgen)
        rio__gw_meta_drop_if(r->bucket, r->key, rgen);
    rio__gw_head_drop(r->bkey);
    return rio__gw_send_empty(c, r, 204); /* deleting a missing key succeeds, as in S3 */
}

struct del_ctx {
    struct gw_req *r;
    struct gw_buf *b;
    unsigned n;
    int quiet, over;
    char (*mkeys)[GW_META_KEY_MAX]; /* the records of the keys deleted, dropped at the end */
    uint64_t *mgens;                /* each one's generation read before its object went */
    uint8_t *mhave;                 /* 0: it could not be read */
    unsigned nm;
    /* Each <Object>'s record generation, asked of the fetch pool for all
     * of them before the first object goes (NULL: none asked). */
    struct gw_meta_gen **recs;
    unsigned nrecs;
};

/* One key of a DeleteObjects, on its conditions dc (its <ETag>, <Size>,
 * <LastModifiedTime>: as DeleteObject's headers); its <Deleted> or
 * <Error> into the answer. */
static int del_one(void *arg, const char *key, const struct del_cond *dc)
{
    struct del_ctx *x = arg;
    char bkey[RIO_KEY_MAX + 1];
    uint64_t gen = 0;
    int ret;

    if (++x->n > DELETE_MAX) {
        x->over = 1;
        return 1;
    }
    /* The key's record as it was before its object goes, read beside the
     * condition's check: only that one is removed at the end (a PutObject
     * of the key meanwhile keeps its own), as DeleteObject does. */
    struct gw_meta_gen *rec = NULL;
    uint64_t rgen = 0;
    int rhave = 0;
    if (!*key || snprintf(bkey, sizeof(bkey), "%s/%s", x->r->bucket, key) >= (int)sizeof(bkey)) {
        ret = RIO_EINVAL;
    } else {
        if (x->recs && x->n <= x->nrecs) { /* asked ahead */
            rec = x->recs[x->n - 1];
            x->recs[x->n - 1] = NULL;
        }
        if (!rec)
            rec = rio__gw_meta_gen_start(x->r->bucket, key);
        ret = del_cond_check(x->r->bucket, key, bkey, dc, &gen);
        rhave = rio__gw_meta_gen_end(rec, &rgen) == 0;
        if (ret < 0)
            ; /* not deleted: the condition's answer below */
        else if (rio__gw_path_error(ret = del_gen(bkey, gen)) && !gen)
            ret = RIO_ENOTFOUND; /* file:// and a key it cannot hold: none such */
    }
    bool cond = dc->etag || dc->size || dc->time;
    if (cond && (ret == RIO_ENOTFOUND || ret == RIO_EGENERATION || ret == DEL_COND_FAILED ||
                 ret == DEL_COND_BAD || ret == RIO_ENOTSUP)) {
        /* A condition that did not hold, or could not be decided: the
         * object is left (for RIO_EGENERATION: replaced since the check). */
        const char *code = ret == RIO_ENOTFOUND  ? "NoSuchKey"
                           : ret == DEL_COND_BAD ? "InvalidArgument"
                           : ret == RIO_ENOTSUP  ? "NotImplemented"
                                                 : "PreconditionFailed";
        rio__gw_buf_put(x->b, "<Error><Key>", 12);
        rio__gw_buf_xml(x->b, key);
        rio__gw_buf_printf(x->b, "</Key><Code>%s</Code><Message>%s</Message></Error>", code,
                           ret == RIO_ENOTSUP ? "This gateway's backend cannot delete on a "
                                                "condition: the object is not deleted."
                                              : "The object is not deleted.");
        return 0;
    }
    if (ret == 0 || ret == RIO_ENOTFOUND)
        rio__gw_head_drop(bkey);
    if ((ret == 0 || ret == RIO_ENOTFOUND) && (!rhave || rgen) &&
        rio__gw_meta_key(x->r->bucket, key, x->mkeys[x->nm]) == 0) {
        x->mgens[x->nm] = rgen;
        x->mhave[x->nm++] = (uint8_t)rhave;
    }
    if (ret == 0 || ret == RIO_ENOTFOUND) {
        if (!x->quiet) {
            rio__gw_buf_put(x->b, "<Deleted><Key>", 14);
            rio__gw_buf_xml(x->b, key);
            rio__gw_buf_put(x->b, "</Key></Deleted>", 16);
        }
    } else {
        rio__gw_buf_put(x->b, "<Error><Key>", 12);
        rio__gw_buf_xml(x->b, key);
        rio__gw_buf_printf(x->b, "</Key><Code>%s</Code><Message>",
                           ret == RIO_EINVAL ? "InvalidArgument" : "InternalError");
        rio__gw_buf_xml(x->b, rio_strerror(ret));
        rio__gw_buf_put(x->b, "</Message></Error>", 18);
    }
    return 0;
}

struct grab {
    char *text; /* the first one's, to free */
    unsigned n;
};

static int grab_cb(void *arg, const char *text)
{
    struct grab *g = arg;
    if (g->n++ == 0 && !(g->text = rio__strdup(text)))
        return -1;
    return 0;
}

/* One <Object> of a DeleteObjects: its Key (once), and its VersionId if
 * any. There are no versions here: "null" (an unversioned bucket's only
 * version) names the object, any other id none (NoSuchVersion, and the
 * object stays). -1: malformed. */
static int object_fields(const char *raw, size_t len, struct grab *k, struct grab *v,
                         struct grab *e, struct grab *sz, struct grab *lm)
{
    return rio__gw_xml_each(raw, len, "Key", grab_cb, k) < 0 || k->n != 1 ||
                   rio__gw_xml_each(raw, len, "VersionId", grab_cb, v) < 0 || v->n > 1 ||
                   rio__gw_xml_each(raw, len, "ETag", grab_cb, e) < 0 || e->n > 1 ||
                   rio__gw_xml_each(raw, len, "Size", grab_cb, sz) < 0 || sz->n > 1 ||
                   rio__gw_xml_each(raw, len, "LastModifiedTime", grab_cb, lm) < 0 || lm->n > 1
               ? -1
               : 0;
}

static void grabs_free(struct grab *k, struct grab *v, struct grab *e, struct grab *sz,
                       struct grab *lm)
{
    rio__free(k->text);
    rio__free(v->text);
    rio__free(e->text);
    rio__free(sz->text);
    rio__free(lm->text);
}

/* The pass before any removal: every <Object> well-formed, at most
 * DELETE_MAX of them, or the request is refused with nothing deleted (as
 * S3: deleting the first ones and then answering 400 told the client its
 * request failed while objects were gone). */
static int check_object(void *arg, const char *raw, size_t len)
{
    struct grab k = {0}, v = {0}, e = {0}, sz = {0}, lm = {0};
    int ret = object_fields(raw, len, &k, &v, &e, &sz, &lm);

    grabs_free(&k, &v, &e, &sz, &lm);
    if (ret == 0 && ++*(unsigned *)arg > DELETE_MAX)
        ret = 1;
    return ret;
}

static int del_object(void *arg, const char *raw, size_t len)
{
    struct del_ctx *x = arg;
    struct grab k = {0}, v = {0}, e = {0}, sz = {0}, lm = {0};
    int ret = -1;

    if (object_fields(raw, len, &k, &v, &e, &sz, &lm) < 0)
        goto out;
    if (v.n && strcmp(v.text, "null") != 0) {
        if (++x->n > DELETE_MAX) {
            x->over = 1;
            ret = 1;
            goto out;
        }
        rio__gw_buf_put(x->b, "<Error><Key>", 12);
        rio__gw_buf_xml(x->b, k.text);
        rio__gw_buf_put(x->b, "</Key><VersionId>", 17);
        rio__gw_buf_xml(x->b, v.text);
        rio__gw_buf_printf(x->b, "</VersionId><Code>NoSuchVersion</Code><Message>The specified "
                                 "version does not exist.</Message></Error>");
        ret = 0;
        goto out;
    }
    ret = del_one(x, k.text, &(struct del_cond){.etag = e.text, .size = sz.text, .time = lm.text});
out:
    grabs_free(&k, &v, &e, &sz, &lm);
    return ret;
}

/* The first pass over the <Object>s: each one that names a key (and no
 * version but null) has its record's generation asked of the fetch pool,
 * so that the records of up to 1000 keys are read 16 at a time rather than
 * one before each object's removal. */
static int pre_object(void *arg, const char *raw, size_t len)
{
    struct del_ctx *x = arg;
    struct grab k = {0}, v = {0};

    if (x->nrecs == DELETE_MAX)
        return 1;
    if (rio__gw_xml_each(raw, len, "Key", grab_cb, &k) == 0 && k.n == 1 && *k.text &&
        rio__gw_xml_each(raw, len, "VersionId", grab_cb, &v) == 0 &&
        (!v.n || (v.n == 1 && strcmp(v.text, "null") == 0)))
        x->recs[x->nrecs] = rio__gw_meta_gen_start(x->r->bucket, k.text);
    x->nrecs++;
    rio__free(k.text);
    rio__free(v.text);
    return 0;
}

static int quiet_cb(void *arg, const char *text)
{
    *(int *)arg = strcmp(text, "true") == 0;
    return 0;
}

int rio__gw_delete_objects(struct MHD_Connection *c, struct gw_req *r)
{
    struct gw_buf b = {0};
    struct del_ctx x = {.r = r, .b = &b};
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    if (!r->buf)
        return rio__gw_error(c, r, 400, "MalformedXML", "The request body is empty.");
    unsigned nobj = 0;
    ret = rio__gw_xml_wellformed(r->buf, r->blen, "Delete") < 0
              ? -1
              : rio__gw_xml_each_raw(r->buf, r->blen, "Object", check_object, &nobj);
    if (ret == 0 && nobj == 0)
        return rio__gw_error(c, r, 400, "MalformedXML",
                             "The XML you provided was not well-formed or did not validate "
                             "against our published schema (a Delete of one Object or more).");
    if (ret)
        return rio__gw_error(c, r, 400, "MalformedXML",
                             ret > 0 ? "At most 1000 keys per request."
                                     : "The XML you provided was not well-formed.");
    x.mkeys = rio__calloc(DELETE_MAX, sizeof(*x.mkeys));
    x.mgens = rio__calloc(DELETE_MAX, sizeof(*x.mgens));
    x.mhave = rio__calloc(DELETE_MAX, 1);
    if (!x.mkeys || !x.mgens || !x.mhave) {
        rio__free(x.mkeys);
        rio__free(x.mgens);
        rio__free(x.mhave);
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    rio__gw_xml_each(r->buf, r->blen, "Quiet", quiet_cb, &x.quiet);
    rio__gw_buf_printf(&b, XML_HEAD "<DeleteResult xmlns=\"" XMLNS "\">");
    x.recs = rio__calloc(DELETE_MAX, sizeof(*x.recs));
    if (x.recs) /* else one at a time */
        rio__gw_xml_each_raw(r->buf, r->blen, "Object", pre_object, &x);
    ret = rio__gw_xml_each_raw(r->buf, r->blen, "Object", del_object, &x);
    for (unsigned i = 0; x.recs && i < x.nrecs; i++) /* those not taken */
        rio__gw_meta_gen_cancel(x.recs[i]);
    rio__free(x.recs);
    rio__gw_meta_drop_keys(x.mkeys, x.mgens, x.mhave, x.nm); /* after their objects */
    rio__free(x.mkeys);
    rio__free(x.mgens);
    rio__free(x.mhave);
    if (ret < 0 || x.over) {
        rio__gw_buf_free(&b);
        return rio__gw_error(c, r, 400, "MalformedXML",
                             x.over ? "At most 1000 keys per request."
                                    : "The XML you provided was not well-formed.");
    }
    rio__gw_buf_printf(&b, "</DeleteResult>\n");
    return rio__gw_send_buf(c, r, 200, &b);
}

/* ------------------------------------------------------------- PUT */

static void put_fail_rio(struct gw_req *r, int err)
{
    switch (err) {
    case -ENOSPC:
    case -EFBIG:
        rio__gw_fail(r, 507, "InsufficientStorage", "write: %s", rio_strerror(err));
        break;
    case RIO_ETHROTTLE:
    case RIO_EBUSY:
        rio__gw_fail(r, 503, "SlowDown", "write: %s", rio_strerror(err));
        break;
    default:
        SRV_WARN("s3: PUT: %s", rio_strerror(err));
        rio__gw_fail(r, 500, "InternalError", "write: %s", rio_strerror(err));
    }
}

/* A decimal header value; 0, or -1 when absent or malformed. */
static int header_u64(struct MHD_Connection *c, const char *name, uint64_t *out)
{
    const char *v = rio__gw_header(c, name);
    char *end;

    if (!v || *v < '0' || *v > '9')
        return -1;
    errno = 0;
    *out = strtoull(v, &end, 10);
    return *end || errno ? -1 : 0;
}

static int streaming(const struct gw_req *r)
{
    return r->auth.payload_mode == RIO_S3_PAYLOAD_STREAMING ||
           r->auth.payload_mode == RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER ||
           r->auth.payload_mode == RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER;
}

/* The chunk size UploadPart writes a part of size P with: P itself (one
 * chunk) where the client's chunk size would cut it into a partial last
 * chunk and the backend composes, so that Complete composes parts of any
 * one size (5 MiB: railio, rclone; 15 MiB: s3cmd) rather than copying them
 * (docs/gateway.md). A part no larger than the client's chunk is one chunk
 * anyway, one of a whole number of them needs nothing: 0, the client's.
 * Bounded by GW_PART_CHUNK_MAX: a GET of the composed object moves chunks
 * of that size, and its prefetch window (and a writer's slots) are counted
 * in chunks, so the memory a request holds grows with it (4x the 4 MiB
 * default at most); larger parts keep the client's chunks (and a Complete
 * of them copies unless they are a whole number of chunks). */
static uint64_t part_chunk(const struct gw_req *r)
{
    struct rio_client *cl = rio__gw_client();
    uint64_t p = r->declared, cs;

    if (r->op != GW_OP_UPLOAD_PART || p == UINT64_MAX || p > GW_PART_CHUNK_MAX ||
        !rio__t_ops(cl->t)->compose)
        return 0;
    cs = rio__put_chunk_size(cl, p);
    return p > cs && p % cs ? p : 0;
}

int rio__gw_write_conditions(struct MHD_Connection *c, struct gw_req *r, int *ret)
{
    struct rio_call *call = &r->cond;
    const char *im = rio__gw_header(c, "If-Match"), *inm = rio__gw_header(c, "If-None-Match");
    struct rio_desc d;
    int64_t mtime;

    if (!im && !inm)
        return 0;
    if (im && inm) {
        *ret = rio__gw_error(c, r, 501, "NotImplemented",
                             "If-Match and If-None-Match together on a write are not supported: "
                             "the object is not written.");
        return -1;
    }
    r->put_cond = true;
    if (inm) {
        while (*inm == ' ')
            inm++;
        if (inm[0] != '*' || inm[1 + strspn(inm + 1, " ")] != '\0') {
            *ret = rio__gw_error(c, r, 501, "NotImplemented",
                                 "If-None-Match on a write takes only '*': the object is not "
                                 "written.");
            return -1;
        }
        call->flags |= RIO_IF_ABSENT;
        return 0;
    }
    uint64_t epoch = rio__gw_head_epoch(r->bkey);
    int lr = get_lookup(r, 0, &d, &mtime);
    if (lr < 0) {
        *ret = lr == RIO_ENOTFOUND
                   ? rio__gw_error(c, r, 404, "NoSuchKey", "The specified key does not exist.")
                   : rio__gw_rio_error(c, r, lr, GW_LOOKUP, "lookup");
        return -1;
    }
    struct gw_meta *m = get_meta(r, &d, epoch, NULL);
    int match = etag_in(im, rio__gw_meta_etag(m, d.etag), 1);
    rio__gw_meta_free(m);
    call->expect_generation = d.generation;
    rio_desc_cleanup(&d);
    if (!match) {
        *ret = rio__gw_error(c, r, 412, "PreconditionFailed",
                             "At least one of the pre-conditions you specified did not hold");
        return -1;
    }
    return 0;
}

int rio__gw_put_open(struct MHD_Connection *c, struct gw_req *r)
{
    const char *te = rio__gw_header(c, "Transfer-Encoding");
    int ret;

    r->declared = UINT64_MAX;
    if (streaming(r)) {
        if (header_u64(c, "x-amz-decoded-content-length", &r->declared) < 0)
            return rio__gw_error(c, r, 411, "MissingContentLength",
                                 "You must provide x-amz-decoded-content-length.");
    } else if (!te || strcasecmp(te, "chunked") != 0) {
        if (header_u64(c, "Content-Length", &r->declared) < 0)
            return rio__gw_error(c, r, 411, "MissingContentLength",
                                 "You must provide the Content-Length HTTP header.");
    }
    if (r->declared != UINT64_MAX ? r->declared > GW_OBJECT_MAX
                                  : streaming(r) || !te || strcasecmp(te, "chunked") != 0)
        return rio__gw_error(c, r, 400, "EntityTooLarge",
                             "Your proposed upload exceeds the maximum allowed object size.");
    /* A one-chunk PutObject checks its bucket while its body streams in
     * (put_close waits for the answer before the commit): one round trip
     * less on a small PUT's path. A larger body is not taken without it,
     * nor one whose client waits for a 100 Continue (a missing bucket's
     * 404 goes instead of the 100). */
    const char *expect = rio__gw_header(c, "Expect");
    if (r->op == GW_OP_PUT_OBJECT && r->declared != UINT64_MAX && !expect &&
        r->declared <= rio__put_chunk_size(rio__gw_client(), r->declared))
        r->bcheck = rio__gw_bucket_check_start(r->bucket);
    if (!r->bcheck && rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    if (r->op == GW_OP_PUT_OBJECT && rio__gw_meta_from_request(c, r, &r->meta, &ret) < 0)
        return ret;
    if (r->op == GW_OP_PUT_OBJECT && rio__gw_write_conditions(c, r, &ret) < 0)
        return ret;
    /* A record of the checksum alone may go beside the commit (put_close)
     * once the key's record as it was is known: should the commit fail, it
     * is put back, or the object that stays would read with the new one
     * and lose its own (its headers, its metadata, a multipart ETag). It
     * is read while the body comes. */
    if (r->op == GW_OP_PUT_OBJECT && !r->put_cond && rio__gw_keep_checksums() &&
        rio__gw_meta_is_default(r->meta, "") && rio__gw_checksum_coming(c))
        r->prior = rio__gw_meta_fetch_start(r->bucket, r->key, 1);
    /* A record written after the commit is written on the condition that
     * the key's is still the one read now (rio__gw_meta_store). */
    else if (r->op == GW_OP_PUT_OBJECT &&
             (!rio__gw_meta_is_default(r->meta, "") ||
              (rio__gw_keep_checksums() && rio__gw_checksum_coming(c))))
        r->prior_gen = rio__gw_meta_gen_start(r->bucket, r->key);
    if (streaming(r)) {
        ret = rio_s3_chunked_new(&r->auth, &r->chunked);
        r->dec = ret < 0 ? NULL : rio__malloc(GW_CONN_DECODE);
        if (ret < 0 || !r->dec)
            return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    uint64_t pc = part_chunk(r);
    const struct rio_call *cp = r->put_cond ? &r->cond : NULL;
    /* Its writer's slots (and an aws-chunked body's decoding buffer), of
     * the body buffers' budget: many bodies that stalled after a few bytes
     * held a chunk buffer each, up to a window each (bodymem.c). */
    uint64_t win = pc ? rio__gw_mem_window(r->declared, pc) : rio__gw_mem_put_window(r->declared);
    if (r->dec)
        win = rio__gw_mem_sum(win, GW_CONN_DECODE);
    if (rio__gw_mem_take(r, win) < 0)
        return rio__gw_mem_refuse(c, r);
    rio__gw_body_held(c, r);
    if (pc)
        ret = rio__writer_open_chunk(rio__gw_client(), r->bkey, r->declared, pc, 0, cp, &r->w);
    else
        ret = rio_writer_open(rio__gw_client(), r->bkey, r->declared, 0, cp, &r->w);
    if (ret < 0) {
        if (ret == RIO_ENOTSUP && r->put_cond)
            return rio__gw_error(c, r, 501, "NotImplemented",
                                 "This gateway's backend cannot write on a condition (If-Match, "
                                 "If-None-Match): the object is not written.");
        if (ret == RIO_ENOTSUP && r->declared == UINT64_MAX)
            return rio__gw_error(c, r, 411, "MissingContentLength",
                                 "This backend needs the object's size: send Content-Length.");
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "open");
    }
    rio__gw_checks_to_writer(r);
    return MHD_YES;
}

static void put_payload(struct gw_req *r, const void *p, size_t n)
{
    int ret;

    if (r->declared != UINT64_MAX && n > r->declared - r->got) {
        rio__gw_fail(r, 400, "IncompleteBody", "The body is longer than its declared length.");
        return;
    }
    r->got += n;
    rio__gw_checks_update(r, p, n);
    ret = rio_writer_write(r->w, p, n);
    if (ret < 0)
        put_fail_rio(r, ret);
}

void rio__gw_put_data(struct gw_req *r, const void *p, size_t n)
{
    const char *in = p;

    if (!r->chunked) {
        put_payload(r, p, n);
        return;
    }
    while (n && !r->err_status) {
        size_t used = 0;
        const char *code = NULL;
        ssize_t got = rio_s3_chunked_feed(r->chunked, in, n, &used, r->dec, GW_CONN_DECODE, &code);
        if (got < 0) {
            rio__gw_fail(r, code && strcmp(code, "SignatureDoesNotMatch") == 0 ? 403 : 400,
                         code ? code : "IncompleteBody", "The aws-chunked body failed its check.");
            return;
        }
        if (got > 0)
            put_payload(r, r->dec, (size_t)got);
        if (!used && !got)
            break;
        in += used;
        n -= used;
    }
}

struct beside {
    struct gw_req *r;
    struct gw_meta_put *put;
    char *prior; /* the key's record before (NULL: none), until the hook takes it */
    size_t prior_len;
};

/* rio__writer_before_commit's hook: the record of a checksum (which the
 * bytes alone decide) goes to the backend while the object commits. */
static void record_beside(void *arg, const char md5hex[33], uint64_t size)
{
    struct beside *b = arg;

    b->put = rio__gw_meta_store_start(b->r->bucket, b->r->key, b->r->meta, size, md5hex, b->prior,
                                      b->prior_len);
    b->prior = NULL;
}

/* A whole object's write (PutObject, POST Object), not a part's. */
static int object_put(const struct gw_req *r)
{
    return r->op == GW_OP_PUT_OBJECT || r->op == GW_OP_POST_OBJECT;
}

int rio__gw_put_close(struct MHD_Connection *c, struct gw_req *r)
{
    struct beside bs = {r, NULL, NULL, 0};
    int beside = 0;
    struct rio_desc d;
    struct MHD_Response *resp;
    char ck_algo[12], ck_value[64];
    int ret, ck = 0;

    if (r->chunked && !r->err_status && !rio_s3_chunked_done(r->chunked))
        rio__gw_fail(r, 400, "IncompleteBody",
                     "The aws-chunked body ended before its final chunk.");
    if (r->declared != UINT64_MAX && r->got != r->declared)
        rio__gw_fail(r, 400, "IncompleteBody",
                     "You did not provide the number of bytes specified by the Content-Length "
                     "HTTP header.");
    /* (A POST's digest fields are checks too; its checksum is in r->meta.) */
    if (!r->err_status && rio__gw_checks_done(r) == 0 && r->op != GW_OP_POST_OBJECT)
        ck = rio__gw_sent_checksum(c, r, ck_algo, ck_value);
    if (r->err_status) {
        rio__gw_put_cleanup(r); /* nothing is published */
        return rio__gw_error(c, r, r->err_status, r->err_code, r->err_msg);
    }
    if (r->bcheck) {
        ret = rio__gw_bucket_check_end(r->bcheck, r->bucket);
        r->bcheck = NULL;
        if (ret != 1) {
            rio__gw_put_cleanup(r); /* nothing is published */
            return ret == 0 ? rio__gw_error(c, r, 404, "NoSuchBucket",
                                            "The specified bucket does not exist.")
                            : rio__gw_rio_error(c, r, ret, GW_LOOKUP, "bucket lookup");
        }
    }
    /* The checksum the body matched is kept: the object's in its record
     * (GET and HEAD give it back), a part's beside the part (Complete
     * builds the composite one from them). A record of the checksum alone
     * is written beside the commit, not after it, once the key's record
     * as it was is known (r->prior): a commit that fails (or a
     * conditional PUT's, refused) puts it back, so the object that stays
     * keeps its own. */
    if (ck && r->op == GW_OP_PUT_OBJECT && rio__gw_keep_checksums()) {
        rio__gw_meta_set_checksum(r->meta, ck_algo, ck_value);
        if (r->prior && rio__gw_meta_bytes_only(r->meta)) {
            beside = rio__gw_meta_fetch_take(r->prior, &bs.prior, &bs.prior_len) >= 0 &&
                     rio__writer_before_commit(r->w, record_beside, &bs) == 0;
            r->prior = NULL;
        }
    }
    memset(&d, 0, sizeof(d));
    ret = rio_writer_close(r->w, &d);
    r->w = NULL;
    struct gw_meta_gen *prior_gen = r->prior_gen; /* for the record, after the commit */
    r->prior_gen = NULL;
    rio__gw_put_cleanup(r);
    rio__free(bs.prior); /* the hook did not run */
    if (ret < 0 || !object_put(r) || beside) {
        rio__gw_meta_gen_cancel(prior_gen);
        prior_gen = NULL;
    }
    if (bs.put || (beside && ret == 0)) { /* NULL put after the commit: out of memory */
        int mret = rio__gw_meta_store_end(bs.put, ret < 0);
        if (ret == 0 && mret < 0) {
            rio__gw_head_drop(r->bkey);
            rio_desc_cleanup(&d);
            return rio__gw_rio_error(c, r, mret, GW_WRITES, "metadata");
        }
    }
    if (ret < 0) {
        rio_desc_cleanup(&d);
        if (r->md5_bad) /* nothing is published */
            return rio__gw_error(c, r, 400, "BadDigest",
                                 "A digest you specified did not match what we received.");
        if (ret == RIO_EINVAL)
            return rio__gw_error(c, r, 400, "IncompleteBody",
                                 "The body did not match its declared length.");
        if (r->put_cond && ret == RIO_EGENERATION) /* nothing is published */
            return rio__gw_error(c, r, 412, "PreconditionFailed",
                                 "At least one of the pre-conditions you specified did not hold");
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "commit");
    }
    if (ck && r->op == GW_OP_UPLOAD_PART) {
        ret = rio__gw_part_checksum_store(r->bkey, d.etag, ck_algo, ck_value);
        if (ret < 0) {
            rio_desc_cleanup(&d);
            return rio__gw_rio_error(c, r, ret, GW_WRITES, "part checksum");
        }
    }
    if (r->op == GW_OP_UPLOAD_PART && part_gone(c, r, &ret)) {
        rio_desc_cleanup(&d);
        return ret;
    }
    if (object_put(r) && !beside) {
        ret = rio__gw_meta_store(r->bucket, r->key, prior_gen, r->meta, &d);
        if (ret < 0) {
            rio__gw_head_drop(r->bkey);
            rio_desc_cleanup(&d);
            return rio__gw_rio_error(c, r, ret, GW_WRITES, "metadata");
        }
    }
    /* The head just written and its record, for the GETs that follow (a
     * hint they verify: headcache.c); its time is taken after the commit,
     * so never before the backend's own. */
    rio__gw_head_wrote(r->bkey, &d, (int64_t)time(NULL) * 1000000000,
                       object_put(r) && !rio__gw_meta_is_default(r->meta, d.etag) ? r->meta : NULL);
    rio_desc_cleanup(&d);
    if (r->op == GW_OP_POST_OBJECT)
        return rio__gw_post_answer(c, r, d.etag);
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (resp)
        etag_hdr(resp, d.etag);
    if (resp && ck) {
        char name[40];
        snprintf(name, sizeof(name), "x-amz-checksum-%s", ck_algo);
        MHD_add_response_header(resp, name, ck_value);
    }
    return rio__gw_send(c, r, 200, resp);
}

void rio__gw_put_cleanup(struct gw_req *r)
{
    rio__gw_bucket_check_cancel(r->bcheck);
    r->bcheck = NULL;
    rio__gw_meta_fetch_cancel(r->prior);
    r->prior = NULL;
    rio__gw_meta_gen_cancel(r->prior_gen);
    r->prior_gen = NULL;
    if (r->w) {
        rio_writer_abort(r->w); /* nothing of it is published */
        r->w = NULL;
    }
    rio_s3_chunked_free(r->chunked);
    r->chunked = NULL;
    rio__free(r->dec);
    r->dec = NULL;
}

/* ------------------------------------------------------------- COPY */

/* x-amz-copy-source-range "bytes=FIRST-LAST" of a source of size bytes
 * into [*off, *off + *len); absent: the whole source. 0, -1 when
 * malformed, -2 when not within the source. */
static int copy_range(const char *h, uint64_t size, uint64_t *off, uint64_t *len)
{
    unsigned long long a, b;
    char *end;

    if (!h)
        return 0;
    if (strncmp(h, "bytes=", 6) != 0 || h[6] < '0' || h[6] > '9')
        return -1;
    errno = 0;
    a = strtoull(h + 6, &end, 10);
    if (*end != '-' || end[1] < '0' || end[1] > '9')
        return -1;
    b = strtoull(end + 1, &end, 10);
    if (*end || errno || b < a)
        return -1;
    if (b >= size)
        return -2;
    *off = a;
    *len = b - a + 1;
    return 0;
}

/* x-amz-copy-source-if-match, -if-none-match, -if-modified-since and
 * -if-unmodified-since against the source d (bucket sb, backend key sbkey; ETag its
 * record's when it has one): 0 when they hold (as GET's: If-Match decides
 * over If-Unmodified-Since, If-None-Match over If-Modified-Since), else
 * 412 PreconditionFailed queued (*ret), -1. */
static int copy_conditions(struct MHD_Connection *c, struct gw_req *r, const char *sb,
                           const char *sbkey, const struct rio_desc *d, int64_t mtime, int *ret)
{
    const char *im = rio__gw_header(c, "x-amz-copy-source-if-match");
    const char *inm = rio__gw_header(c, "x-amz-copy-source-if-none-match");
    const char *ims = rio__gw_header(c, "x-amz-copy-source-if-modified-since");
    const char *ius = rio__gw_header(c, "x-amz-copy-source-if-unmodified-since");
    int64_t t;
    int fail = 0;

    if (im || inm) {
        struct gw_meta *m = rio__gw_meta_load(sb, sbkey + strlen(sb) + 1, d, NULL);
        const char *etag = rio__gw_meta_etag(m, d->etag);
        fail = (im && !etag_in(im, etag, 1)) || (inm && etag_in(inm, etag, 0));
        rio__gw_meta_free(m);
    }
    if (!fail && (!im && ius) + (!inm && ims)) {
        if (!mtime) /* the backend's lookup does not say: its listing may */
            mtime = key_mtime(sbkey);
        mtime /= 1000000000;
        if (!im && ius && (t = rio__gw_parse_http_date(ius)) >= 0 && mtime > t)
            fail = 1;
        if (!inm && ims && (t = rio__gw_parse_http_date(ims)) >= 0 && mtime <= t)
            fail = 1;
    }
    if (!fail)
        return 0;
    *ret = rio__gw_error(c, r, 412, "PreconditionFailed",
                         "At least one of the pre-conditions you specified did not hold");
    return -1;
}

int rio__gw_copy_object(struct MHD_Connection *c, struct gw_req *r, const char *src)
{
    char *s, *slash, *sb;
    const char *q;
    char sbkey[RIO_KEY_MAX + 2], date[32], sbucket[GW_BUCKET_MAX + 1];
    const char *dir = rio__gw_header(c, "x-amz-metadata-directive");
    const char *tdir = rio__gw_header(c, "x-amz-tagging-directive");
    struct gw_meta *sm = NULL;
    int64_t smtime = 0;
    struct rio_reader *rd = NULL;
    struct rio_writer *w = NULL;
    struct rio_desc d, out;
    struct rio_call call;
    struct gw_buf b = {0};
    char *buf = NULL;
    int ret, e, part = r->op == GW_OP_UPLOAD_PART_COPY;
    uint64_t off = 0, len, left;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    if (dir && strcmp(dir, "COPY") != 0 && strcmp(dir, "REPLACE") != 0)
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "Unknown metadata directive: COPY or REPLACE.");
    if (tdir && strcmp(tdir, "COPY") != 0 && strcmp(tdir, "REPLACE") != 0)
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "Unknown tagging directive: COPY or REPLACE.");
    if (!part) { /* the copy's own checksum, worked out as it streams */
        const char *calgo = rio__gw_header(c, "x-amz-checksum-algorithm");
        if (calgo && !rio__gw_ck_len(calgo))
            return rio__gw_error(c, r, 400, "InvalidRequest",
                                 "Checksum algorithm provided is unsupported. Please try again "
                                 "with any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, "
                                 "SHA256]");
        for (size_t i = 0; calgo && calgo[i] && i + 1 < sizeof(r->copy_ck_algo); i++)
            r->copy_ck_algo[i] =
                (char)(calgo[i] >= 'A' && calgo[i] <= 'Z' ? calgo[i] - 'A' + 'a' : calgo[i]);
    }
    /* The query (?versionId=...) is split off at a literal '?' before the
     * key is decoded, as S3 does: a '?' in a key comes as %3F and stays in
     * the key (decoded first, "x%3FversionId=null" named "x"). */
    q = strchr(src, '?');
    if (q && strcmp(q, "?versionId=null") != 0)
        return rio__gw_error(c, r, 501, "NotImplemented", "Versions are not supported.");
    s = rio__gw_unescape(src, q ? (size_t)(q - src) : strlen(src), 0);
    if (!s)
        return rio__gw_error(c, r, 400, "InvalidArgument", "x-amz-copy-source is not valid.");
    sb = s[0] == '/' ? s + 1 : s;
    slash = strchr(sb, '/');
    if (!slash || !slash[1] || (size_t)(slash - sb) > GW_BUCKET_MAX) {
        rio__free(s);
        return rio__gw_error(c, r, 400, "InvalidArgument", "x-amz-copy-source must be BUCKET/KEY.");
    }
    *slash = '\0';
    if (!rio__gw_valid_bucket(sb) || !rio__gw_user_may(r, sb) ||
        snprintf(sbkey, sizeof(sbkey), "%s/%s", sb, slash + 1) > RIO_KEY_MAX) {
        rio__free(s);
        return rio__gw_error(c, r, 403, "AccessDenied", "The copy source is not allowed.");
    }
    snprintf(sbucket, sizeof(sbucket), "%s", sb);
    e = rio__gw_bucket_exists(sb);
    rio__free(s);
    if (e == 0)
        return rio__gw_error(c, r, 404, "NoSuchBucket", "The source bucket does not exist.");
    memset(&d, 0, sizeof(d));
    ret = rio_stat_mtime(rio__gw_client(), sbkey, &d, &smtime);
    rio_desc_cleanup(&d);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_LOOKUP, "copy source");
    if (copy_conditions(c, r, sbucket, sbkey, &d, smtime, &ret) < 0)
        return ret;
    len = d.size;
    /* The metadata: the request's (REPLACE) or the source's (COPY, the
     * default; the new object's ETag is its own MD5, as S3's). A part has
     * none, and copies x-amz-copy-source-range or the whole source. */
    if (part) {
        int rr = copy_range(rio__gw_header(c, "x-amz-copy-source-range"), d.size, &off, &len);
        if (rr == -1)
            return rio__gw_error(c, r, 400, "InvalidArgument",
                                 "x-amz-copy-source-range must be bytes=FIRST-LAST.");
        if (rr < 0) {
            char msg[96];
            snprintf(msg, sizeof(msg),
                     "Range specified is not valid for source object of size: %llu",
                     (unsigned long long)d.size);
            return rio__gw_error(c, r, 400, "InvalidArgument", msg);
        }
    } else if (dir && strcmp(dir, "REPLACE") == 0) {
        /* the request's headers, its x-amz-tagging among them */
        if (rio__gw_meta_from_request(c, r, &r->meta, &ret) < 0)
            return ret;
        if (!tdir || strcmp(tdir, "REPLACE") != 0) { /* the source's tags */
            sm = rio__gw_meta_load(sbucket, sbkey + strlen(sbucket) + 1, &d, NULL);
            ret = rio__gw_meta_copy_tags(r->meta, sm);
            rio__gw_meta_free(sm);
            if (ret < 0)
                return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
        }
    } else {
        if (strcmp(sbkey, r->bkey) == 0)
            return rio__gw_error(c, r, 400, "InvalidRequest",
                                 "This copy request is illegal because it is trying to copy an "
                                 "object to itself without changing the object's metadata.");
        sm = rio__gw_meta_load(sbucket, sbkey + strlen(sbucket) + 1, &d, NULL);
        r->meta = rio__gw_meta_new();
        ret = r->meta && sm ? rio__gw_meta_copy_content(r->meta, sm) : r->meta ? 0 : -ENOMEM;
        /* The same bytes: the source's whole-object checksum holds for the
         * copy (a composite one, of parts the copy does not have, does not) */
        if (ret == 0 && sm && sm->ck_value[0] && !strchr(sm->ck_value, '-'))
            rio__gw_meta_set_checksum(r->meta, sm->ck_algo, sm->ck_value);
        /* the tags: the source's, or the request's x-amz-tagging */
        if (ret == 0 && (!tdir || strcmp(tdir, "REPLACE") != 0))
            ret = rio__gw_meta_copy_tags(r->meta, sm);
        rio__gw_meta_free(sm);
        if (ret < 0)
            return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
        if (tdir && strcmp(tdir, "REPLACE") == 0) {
            const char *t = rio__gw_header(c, "x-amz-tagging"), *why = NULL;
            ret = rio__gw_meta_tags_from_query(r->meta, t ? t : "", &why);
            if (ret == -ENOMEM)
                return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
            if (ret < 0)
                return rio__gw_error(c, r, 400, rio__gw_tag_code(ret, why), why);
        }
    }
    /* If-None-Match, If-Match: on the destination, its commit's condition. */
    if (!part && rio__gw_write_conditions(c, r, &ret) < 0)
        return ret;
    memset(&call, 0, sizeof(call));
    call.expect_generation = d.generation;
    struct rio_s3_check *ck = NULL;
    char ck_name[40], ck_value[64] = "";
    if (r->copy_ck_algo[0]) {
        const char *code;
        snprintf(ck_name, sizeof(ck_name), "x-amz-checksum-%s", r->copy_ck_algo);
        if (rio_s3_check_new(ck_name, NULL, &ck, &code) < 0)
            return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    /* Its reader's ring, its writer's slots and its block, of the body
     * buffers' budget (bodymem.c), as a GET's and a PUT's: every
     * connection copying a large object held both windows for the copy's
     * length, outside the budget. Given back when the request ends. */
    uint64_t win = rio__gw_mem_sum(
        rio__gw_mem_sum(get_window(&d, off, len), rio__gw_mem_put_window(len)), COPY_BLOCK);
    if (len && rio__gw_mem_take(r, win) < 0) {
        rio_s3_check_free(ck);
        return rio__gw_mem_refuse(c, r);
    }
    buf = rio__malloc(COPY_BLOCK);
    if (!buf) {
        rio_s3_check_free(ck);
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    ret = rio_reader_open_at(rio__gw_client(), sbkey, off, 0, &call, &rd);
    int src_err = ret; /* the source's own failure (replaced while copied) */
    if (ret == 0)
        ret = rio_writer_open(rio__gw_client(), r->bkey, len, 0, r->put_cond ? &r->cond : NULL, &w);
    for (left = len; ret == 0 && left;) {
        int64_t n = rio_reader_read(rd, buf, left < COPY_BLOCK ? (size_t)left : COPY_BLOCK);
        if (n <= 0) {
            ret = n < 0 ? (int)n : -EIO; /* the source ended early */
            src_err = ret;
            break;
        }
        r->bytes_in += (uint64_t)n;
        left -= (uint64_t)n;
        if (ck && rio_s3_check_update(ck, buf, (size_t)n) < 0)
            ret = -EIO;
        else
            ret = rio_writer_write(w, buf, (size_t)n);
    }
    rio__free(buf);
    if (ck && ret == 0 && rio_s3_check_digest(ck, ck_value, sizeof(ck_value)) < 0)
        ret = -EIO;
    if (ck && ret == 0 && !part && r->meta) /* the copy's, whatever the source had */
        ret = rio__gw_meta_set_checksum(r->meta, r->copy_ck_algo, ck_value) < 0 ? -EIO : 0;
    rio_s3_check_free(ck);
    if (rd) {
        int rc = rio_reader_close(rd);
        if (!ret && left) /* every byte wanted was read (and verified): closed early */
            ret = rc;
    }
    memset(&out, 0, sizeof(out));
    if (ret < 0) {
        rio_writer_abort(w);
        /* The source was replaced while it was copied (its old chunks
         * gone under the reader): the client copies again, as a GET that
         * keeps meeting new versions is told (it was 500 InternalError). */
        if (src_err == RIO_EGENERATION)
            return rio__gw_error(c, r, 503, "SlowDown",
                                 "The copy source was replaced while it was copied: please retry.");
        if (ret == RIO_ENOTSUP && r->put_cond)
            return rio__gw_error(c, r, 501, "NotImplemented",
                                 "This gateway's backend cannot write on a condition (If-Match, "
                                 "If-None-Match): the object is not written.");
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "copy");
    }
    ret = rio_writer_close(w, &out);
    rio_desc_cleanup(&out);
    if (ret == RIO_EGENERATION && r->put_cond) /* nothing is published */
        return rio__gw_error(c, r, 412, "PreconditionFailed",
                             "At least one of the pre-conditions you specified did not hold");
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "copy commit");
    if (!part) { /* a part has no record; its ETag is its MD5, as UploadPart's */
        ret = rio__gw_meta_store(r->bucket, r->key, NULL, r->meta, &out);
        rio__gw_head_drop(r->bkey); /* after the record: the next GET reads both */
        if (ret < 0)
            return rio__gw_rio_error(c, r, ret, GW_WRITES, "copy metadata");
    } else if (ck_value[0]) { /* kept beside the part, as an UploadPart's */
        ret = rio__gw_part_checksum_store(r->bkey, out.etag, r->copy_ck_algo, ck_value);
        if (ret < 0)
            return rio__gw_rio_error(c, r, ret, GW_WRITES, "part checksum");
    }
    if (part && part_gone(c, r, &ret))
        return ret;
    rio__gw_iso_date((int64_t)time(NULL) * 1000000000, date);
    rio__gw_buf_printf(&b, XML_HEAD "<%s xmlns=\"" XMLNS "\"><LastModified>%s</LastModified>",
                       part ? "CopyPartResult" : "CopyObjectResult", date);
    rio__gw_buf_etag(&b, out.etag);
    if (ck_value[0]) { /* <ChecksumCRC32> and the others, as S3's CopyPartResult */
        char el[24];
        snprintf(el, sizeof(el), "Checksum%s", r->copy_ck_algo);
        for (char *u = el + 8; *u; u++)
            *u = (char)(*u >= 'a' && *u <= 'z' ? *u - 'a' + 'A' : *u);
        rio__gw_list_elem(&b, el, ck_value, 0);
    }
    rio__gw_buf_printf(&b, "</%s>\n", part ? "CopyPartResult" : "CopyObjectResult");
    return rio__gw_send_buf(c, r, 200, &b);
}
