/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's side of CORS (docs/gateway.md, "Browsers and CORS"):
 * PutBucketCors, GetBucketCors and DeleteBucketCors keep a bucket's
 * configuration as the record ".rio-cors/BUCKET" on the backend (cors.c
 * writes and parses it); a preflight OPTIONS is answered from it without a
 * signature, as S3 does; and every other response to a request that names
 * a bucket and carries an Origin gets the headers of the first rule that
 * lets that origin use that method. Configurations read are kept one
 * second (GW_CORS_TTL_NS) per bucket, so that a page's requests cost no
 * backend read each; a change made through another gateway is seen within
 * that second.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <microhttpd.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "railio.h"
#include "server/s3/cors.h"
#include "server/s3/gw.h"
#include "server/server.h"

#define GW_CORS_TTL_NS 1000000000ull
#define GW_CORS_CACHE 64u
#define GW_CORS_REC_MAX (sizeof(GW_CORS_REC_MAGIC) + GW_CORS_DOC_MAX + 4096u)

static struct {
    pthread_mutex_t mu;
    struct {
        char bucket[GW_BUCKET_MAX + 1];
        struct gw_cors *cfg; /* NULL: the bucket has none */
        uint64_t expires_ns;
    } e[GW_CORS_CACHE];
} cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Forget bucket's entry. */
static void cache_drop(const char *bucket)
{
    pthread_mutex_lock(&cache.mu);
    for (unsigned i = 0; i < GW_CORS_CACHE; i++)
        if (strcmp(cache.e[i].bucket, bucket) == 0) {
            rio__gw_cors_free(cache.e[i].cfg);
            memset(&cache.e[i], 0, sizeof(cache.e[i]));
        }
    pthread_mutex_unlock(&cache.mu);
}

void rio__gw_cors_clear(void)
{
    pthread_mutex_lock(&cache.mu);
    for (unsigned i = 0; i < GW_CORS_CACHE; i++) {
        rio__gw_cors_free(cache.e[i].cfg);
        memset(&cache.e[i], 0, sizeof(cache.e[i]));
    }
    pthread_mutex_unlock(&cache.mu);
}

int rio__gw_bucket_rec_get(const char *prefix, const char *bucket, size_t max, char **out,
                           size_t *len)
{
    char k[GW_BUCKET_REC_KEY_MAX];
    char *buf;
    int64_t n;

    *out = NULL;
    *len = 0;
    if (snprintf(k, sizeof(k), "%s%s", prefix, bucket) >= (int)sizeof(k))
        return RIO_EINVAL;
    buf = rio__malloc(max + 1);
    if (!buf)
        return -ENOMEM;
    n = rio_get(rio__gw_client(), k, buf, max, NULL);
    if (n < 0) {
        rio__free(buf);
        return n == RIO_ENOTFOUND ? 0 : (int)n;
    }
    buf[n] = '\0';
    *out = buf;
    *len = (size_t)n;
    return 1;
}

int rio__gw_bucket_rec_put(const char *prefix, const char *bucket, const char *rec, size_t len)
{
    char k[GW_BUCKET_REC_KEY_MAX];
    int ret;

    if (snprintf(k, sizeof(k), "%s%s", prefix, bucket) >= (int)sizeof(k))
        return RIO_EINVAL;
    ret = rio_put(rio__gw_client(), k, rec, len, NULL, NULL);
    /* A DeleteBucket between the caller's lookup of the bucket and this
     * write would leave the record behind, for a bucket made again under
     * the name. */
    if (ret == 0 && rio__gw_bucket_exists(bucket) == 0) {
        (void)rio_delete(rio__gw_client(), k);
        return RIO_ENOTFOUND;
    }
    return ret;
}

int rio__gw_bucket_rec_drop(const char *prefix, const char *bucket)
{
    char k[GW_BUCKET_REC_KEY_MAX];
    int ret;

    if (snprintf(k, sizeof(k), "%s%s", prefix, bucket) >= (int)sizeof(k))
        return RIO_EINVAL;
    ret = rio_delete(rio__gw_client(), k);
    return ret == RIO_ENOTFOUND ? 0 : ret;
}

/* Read bucket's configuration from the backend: 0 with *out (NULL when it
 * has none, or its record is not one this code writes: logged), or a
 * RIO_E* code of the read. */
static int cors_read(const char *bucket, struct gw_cors **out)
{
    char *buf;
    size_t n;
    int ret;

    *out = NULL;
    ret = rio__gw_bucket_rec_get(GW_CORS_PREFIX, bucket, GW_CORS_REC_MAX, &buf, &n);
    if (ret <= 0)
        return ret;
    ret = rio__gw_cors_parse_record(buf, n, out);
    rio__free(buf);
    if (ret == -ENOMEM)
        return ret;
    if (ret < 0) /* not ours, or damaged: no CORS for it rather than a guess */
        SRV_WARN("s3: " GW_CORS_PREFIX "%s on the backend is not a CORS record this gateway "
                 "writes: ignored",
                 bucket);
    return 0;
}

/* Apply fn to bucket's configuration (NULL: none) under the cache's lock,
 * reading it first when the cache has no live entry. fn's result, or a
 * RIO_E* code of the read (fn not called). */
static int with_cors(const char *bucket, int (*fn)(void *arg, const struct gw_cors *c), void *arg)
{
    uint64_t now = rio__now_ns();
    struct gw_cors *cfg;
    unsigned victim = 0;
    int ret;

    pthread_mutex_lock(&cache.mu);
    for (unsigned i = 0; i < GW_CORS_CACHE; i++)
        if (cache.e[i].expires_ns > now && strcmp(cache.e[i].bucket, bucket) == 0) {
            ret = fn(arg, cache.e[i].cfg);
            pthread_mutex_unlock(&cache.mu);
            return ret;
        }
    pthread_mutex_unlock(&cache.mu);
    ret = cors_read(bucket, &cfg);
    if (ret < 0)
        return ret;
    pthread_mutex_lock(&cache.mu);
    for (unsigned i = 0; i < GW_CORS_CACHE; i++) {
        if (strcmp(cache.e[i].bucket, bucket) == 0) {
            victim = i;
            break;
        }
        if (cache.e[i].expires_ns < cache.e[victim].expires_ns)
            victim = i;
    }
    rio__gw_cors_free(cache.e[victim].cfg);
    snprintf(cache.e[victim].bucket, sizeof(cache.e[victim].bucket), "%s", bucket);
    cache.e[victim].cfg = cfg;
    cache.e[victim].expires_ns = rio__now_ns() + GW_CORS_TTL_NS;
    ret = fn(arg, cfg);
    pthread_mutex_unlock(&cache.mu);
    return ret;
}

struct apply {
    struct MHD_Response *resp;
    const char *origin, *method, *req_headers;
    int preflight;
};

static void add_hdr(void *arg, const char *name, const char *value)
{
    MHD_add_response_header(arg, name, value);
}

/* 1: a rule matched and its headers were added; 0: none matched; -1: the
 * bucket has no configuration. */
static int apply_cb(void *arg, const struct gw_cors *c)
{
    struct apply *a = arg;
    int i;

    if (!c)
        return -1;
    i = rio__gw_cors_match(c, a->origin, a->method, a->preflight ? a->req_headers : NULL);
    if (i < 0)
        return 0;
    if (rio__gw_cors_answer(c, i, a->origin, a->req_headers, a->preflight, add_hdr, a->resp) < 0)
        return -ENOMEM;
    return 1;
}

void rio__gw_cors_headers(struct MHD_Connection *c, const struct gw_req *r,
                          struct MHD_Response *resp)
{
    struct apply a = {.resp = resp, .method = r->method};

    if (!r->bucket[0] || r->op == GW_OP_PREFLIGHT || !r->method)
        return;
    a.origin = rio__gw_header(c, "Origin");
    if (!a.origin || !*a.origin || !rio__gw_cors_method(r->method))
        return;
    (void)with_cors(r->bucket, apply_cb, &a); /* a failed read: no CORS headers */
}

int rio__gw_preflight(struct MHD_Connection *c, struct gw_req *r)
{
    struct MHD_Response *resp;
    struct apply a = {.preflight = 1};
    int ret;

    a.origin = rio__gw_header(c, "Origin");
    a.method = rio__gw_header(c, "Access-Control-Request-Method");
    a.req_headers = rio__gw_header(c, "Access-Control-Request-Headers");
    if (!a.origin || !*a.origin)
        return rio__gw_error(c, r, 400, "BadRequest",
                             "Insufficient information. Origin request header needed.");
    if (!a.method || !*a.method)
        return rio__gw_error(c, r, 400, "BadRequest",
                             "Invalid Access-Control-Request-Method: it is missing.");
    if (!r->bucket[0])
        return rio__gw_error(c, r, 403, "AccessForbidden", "CORSResponse: Bucket not found");
    resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp)
        return MHD_NO;
    a.resp = resp;
    ret = with_cors(r->bucket, apply_cb, &a);
    if (ret == 1)
        return rio__gw_send(c, r, 200, resp);
    MHD_destroy_response(resp);
    if (ret == 0)
        return rio__gw_error(c, r, 403, "AccessForbidden",
                             "CORSResponse: This CORS request is not allowed. This is usually "
                             "because the evaluation of Origin, request method / "
                             "Access-Control-Request-Method or Access-Control-Request-Headers "
                             "are not whitelisted by the resource's CORS spec.");
    if (ret == -1)
        return rio__gw_error(c, r, 403, "AccessForbidden",
                             "CORSResponse: CORS is not enabled for this bucket.");
    return rio__gw_rio_error(c, r, ret, GW_READS, "CORS configuration read");
}

int rio__gw_put_bucket_cors(struct MHD_Connection *c, struct gw_req *r)
{
    char msg[160];
    struct gw_cors *cfg = NULL;
    struct gw_buf b = {0};
    const char *code = NULL;
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    if (!r->buf)
        return rio__gw_error(c, r, 400, "MalformedXML", "The request body is empty.");
    ret = rio__gw_cors_parse(r->buf, r->blen, &cfg, &code, msg, sizeof(msg));
    if (ret == -ENOMEM)
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    if (ret < 0)
        return rio__gw_error(c, r, 400, code, msg);
    rio__gw_cors_record(cfg, &b);
    rio__gw_cors_free(cfg);
    if (b.oom) {
        rio__gw_buf_free(&b);
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    ret = rio__gw_bucket_rec_put(GW_CORS_PREFIX, r->bucket, b.p, b.len);
    rio__gw_buf_free(&b);
    cache_drop(r->bucket);
    if (ret == RIO_ENOTFOUND) /* the bucket went meanwhile */
        return rio__gw_error(c, r, 404, "NoSuchBucket", "The specified bucket does not exist.");
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "put CORS configuration");
    return rio__gw_send_empty(c, r, 200);
}

/* GET (its document, or 404 NoSuchCORSConfiguration), read from the
 * backend, not the cache: what was just set is what is answered. */
int rio__gw_get_bucket_cors(struct MHD_Connection *c, struct gw_req *r)
{
    struct gw_cors *cfg;
    struct gw_buf b = {0};
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    ret = cors_read(r->bucket, &cfg);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_READS, "CORS configuration read");
    if (!cfg)
        return rio__gw_error(c, r, 404, "NoSuchCORSConfiguration",
                             "The CORS configuration does not exist.");
    rio__gw_cors_xml(cfg, &b);
    rio__gw_cors_free(cfg);
    return rio__gw_send_buf(c, r, 200, &b);
}

int rio__gw_cors_drop(const char *bucket)
{
    int ret = rio__gw_bucket_rec_drop(GW_CORS_PREFIX, bucket);

    cache_drop(bucket);
    return ret;
}

int rio__gw_delete_bucket_cors(struct MHD_Connection *c, struct gw_req *r)
{
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    ret = rio__gw_cors_drop(r->bucket);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "delete CORS configuration");
    return rio__gw_send_empty(c, r, 204);
}
