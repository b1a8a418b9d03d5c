/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3://BUCKET[/PREFIX] and http(s)://HOST[/PREFIX]: objects over HTTP through
 * libcurl, built as the module railio-s3.so. Read docs/s3.md first, then
 * docs/internals/s3.md, the map of this folder:
 *
 *   s3.c        open and close, the ops tables of s3://, http:// and https://
 *   config.c    the URL, its options and the credentials
 *   request.c   URL, headers and signature of a request; easy handle options
 *   sign.c      SigV4 (also in the library, for its unit test)
 *   data.c      one chunk READ or WRITE on its easy handle
 *   loop.c      the curl multi handles, epoll, submit, cancel and reap
 *   meta.c      metadata requests, generations, lookup and remove
 *   upload.c    put_open, multipart commit and abort
 *   list.c      the optional op list (ListObjectsV2)
 *   errors.c    CURLcode as a railio error, the debug log line
 *   http.c range.c xml.c listxml.c sidecar.c text.c: the parsers of what a server
 *               sends (parse.h), no libcurl, unit-tested and fuzzed apart
 */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/secret.h"
#include "transport/s3/internal.h"

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init_rc;

static void curl_init_once(void)
{
    g_curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT);
}

static void s3_free(struct s3_transport *t)
{
    rio__free(t->endpoint);
    rio__free(t->host);
    rio__free(t->bucket);
    rio__free(t->prefix);
    rio__free(t->access_key);
    rio__secret_free(t->secret_key);
    rio__secret_free(t->token);
    rio__free(t->region);
    rio__free(t->ca_bundle);
    rio__free(t->rails_buf);
    rio__free(t->gens);
    rio__free(t);
}

static void s3_close(struct rio_transport *tt);

static int open_scheme(int scheme, const struct rio_url *u, const struct rio_options *o,
                       struct rio_transport **out)
{
    struct s3_transport *t;
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
    ret = rio__s3_config_parse(t, u, o);
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
    ret = rio__s3_loop_open(t);
    if (ret < 0)
        goto err;
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
    rio__s3_loop_close(t);
    rio__s3_meta_close(t);
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

/* config.c reads them; docs/s3.md lists them. http(s):// take the same
 * but endpoint and region (the URL is the endpoint; nothing is signed). */
#define S3_HTTP_URL_OPTIONS                                                                        \
    "rails", "content_md5", "checksum", "nt_copy", "discard", "dns_shuffle", "bufsize",            \
        "upbufsize", "rcvbuf", "stall", "min_speed", "connect_timeout", "min_part", "ca_bundle"
static const char *const s3_url_options[] = {
    "endpoint",    "region",  "profile",    "unsigned",          "addressing",
    "conditional", "get_one", "etag_check", S3_HTTP_URL_OPTIONS, NULL};
static const char *const http_url_options[] = {S3_HTTP_URL_OPTIONS, NULL};

const struct rio_transport_ops rio__s3_ops = {
    .scheme = "s3",
    .url_options = s3_url_options,
    .caps = RIO_CAP_ETAG | RIO_CAP_STREAM_PUT | RIO_CAP_COMMIT_RETRY | RIO_CAP_LIST_DELIM,
    RIO_TRANSPORT_OPS(s3_open, s3_close, rio__s3),
    .put_expect = rio__s3_put_expect,
    .put_prep = rio__s3_put_prep,
    .put_prep_group = rio__s3_put_prep_group,
    .put_prep_many = rio__s3_put_prep_many,
    .get_one = rio__s3_get_one,
    .parts_of = rio__s3_parts_of,
    .parts_even = rio__s3_parts_even,
    .full_checksum = rio__s3_full_checksum,
    .remove_if = rio__s3_remove_if,
    /* exists stays NULL: S3 has no batch HEAD, and the engine's HEADs in
     * parallel beat a listing (docs/s3.md). */
    .list = rio__s3_list,
};

/* Plain HTTP(S): ranged reads only (put_open and remove: RIO_ENOTSUP). */
const struct rio_transport_ops rio__http_ops = {
    .scheme = "http",
    .url_options = http_url_options,
    .caps = 0,
    RIO_TRANSPORT_OPS(http_open, s3_close, rio__s3),
};

const struct rio_transport_ops rio__https_ops = {
    .scheme = "https",
    .url_options = http_url_options,
    .caps = 0,
    RIO_TRANSPORT_OPS(https_open, s3_close, rio__s3),
};
