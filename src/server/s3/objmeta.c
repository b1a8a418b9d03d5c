/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object metadata for the S3 operations (docs/gateway.md, "Object
 * metadata"): the record of object BUCKET/KEY is the backend object
 * ".rio-meta/BUCKET/<SHA-256 of KEY, hex>", written after the object's own
 * commit and naming the object it describes (key, size, generation, the
 * backend's etag). A record that does not describe the object there now (a
 * PUT through another gateway or another railio client since, a crash
 * between the two writes) is ignored: the object then reads back with
 * S3's defaults. Records live in the backend, so every gateway on one
 * store agrees; listings of a bucket never show them (they are not under
 * "BUCKET/").
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/engine.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"
#include "server/server.h"

#define LIST_BATCH 16u /* records read at once for a listing page */

int rio__gw_meta_key(const char *bucket, const char *key, char out[GW_META_KEY_MAX])
{
    static const char hex[] = "0123456789abcdef";
    unsigned char md[32];
    unsigned int len = 0;
    int n;

    if (!EVP_Digest(key, strlen(key), md, &len, EVP_sha256(), NULL) || len != 32)
        return RIO_EINVAL;
    n = snprintf(out, GW_META_KEY_MAX, GW_META_PREFIX "%s/", bucket);
    if (n < 0 || (size_t)n + 65 > GW_META_KEY_MAX)
        return RIO_EINVAL;
    for (int i = 0; i < 32; i++) { /* not snprintf: a listing page names a thousand */
        out[n + 2 * i] = hex[md[i] >> 4];
        out[n + 2 * i + 1] = hex[md[i] & 15];
    }
    out[n + 64] = '\0';
    return 0;
}

/* ------------------------------------------------------------ requests */

struct from_req {
    struct gw_meta *m;
    int err;          /* the first error */
    const char *name; /* the header it came from */
    const char *why;  /* x-amz-tagging's: what is wrong with it */
};

/* Content-Encoding without "aws-chunked", which names the request's framing
 * (the gateway decodes it), not the object's: S3 does not store it either.
 * The other codings stay as sent, spaces after commas and all ("deflate,
 * gzip" is given back as it came). */
static int content_encoding(struct gw_meta *m, const char *value)
{
    char out[GW_META_VALUE_MAX + 1];
    size_t o = 0;
    const char *p = value;

    if (strlen(value) > GW_META_VALUE_MAX)
        return GW_META_EBADVALUE;
    while (*p) {
        size_t n = strcspn(p, ","), lead = strspn(p, " \t"), len = n;
        while (len > lead && (p[len - 1] == ' ' || p[len - 1] == '\t'))
            len--;
        if (len > lead && !(len - lead == 11 && strncasecmp(p + lead, "aws-chunked", 11) == 0)) {
            size_t from = o ? 0 : lead; /* the first coding kept starts the value */
            if (o)
                out[o++] = ',';
            memcpy(out + o, p + from, len - from);
            o += len - from;
        }
        p += n;
        if (*p == ',')
            p++;
    }
    out[o] = '\0';
    return o ? rio__gw_meta_set_hdr(m, GW_MH_CONTENT_ENCODING, out) : 0;
}

static int meta_from_pair(struct gw_meta *m, const char *name, const char *value);

/* A field's value without the blanks around it (RFC 9110 5.5: they are no
 * part of it): the server kept a trailing blank and answered it back,
 * where S3 answers "v1" for "v1  " (compatibility probe). */
int rio__gw_meta_from_pair(struct gw_meta *m, const char *name, const char *value)
{
    size_t n;

    while (*value == ' ' || *value == '\t')
        value++;
    n = strlen(value);
    if (!n || (value[n - 1] != ' ' && value[n - 1] != '\t'))
        return meta_from_pair(m, name, value);
    while (n && (value[n - 1] == ' ' || value[n - 1] == '\t'))
        n--;
    char *v = rio__malloc(n + 1);
    if (!v)
        return -ENOMEM;
    memcpy(v, value, n);
    v[n] = '\0';
    int ret = meta_from_pair(m, name, v);
    rio__free(v);
    return ret;
}

static int meta_from_pair(struct gw_meta *m, const char *name, const char *value)
{
    static const char pre[] = "x-amz-meta-";

    if (strncasecmp(name, pre, sizeof(pre) - 1) == 0)
        return rio__gw_meta_add_user(m, name + sizeof(pre) - 1, value);
    if (strcasecmp(name, "Content-Encoding") == 0)
        return content_encoding(m, value);
    for (int i = 0; i < GW_MH__COUNT; i++)
        if (strcasecmp(name, rio__gw_meta_hdr_names[i]) == 0)
            return rio__gw_meta_set_hdr(m, i, value);
    return 0;
}

static enum MHD_Result hdr_each(void *cls, enum MHD_ValueKind kind, const char *name,
                                const char *value)
{
    struct from_req *x = cls;
    int ret;

    (void)kind;
    if (x->err || !name)
        return MHD_YES;
    if (strcasecmp(name, "x-amz-tagging") == 0) /* the object's tags */
        ret = rio__gw_meta_tags_from_query(x->m, value ? value : "", &x->why);
    else
        ret = rio__gw_meta_from_pair(x->m, name, value ? value : "");
    if (ret < 0) {
        x->err = ret;
        x->name = name;
    }
    return MHD_YES;
}

int rio__gw_meta_from_request(struct MHD_Connection *c, struct gw_req *r, struct gw_meta **out,
                              int *ret)
{
    struct from_req x = {0};
    char msg[160];

    *out = NULL;
    x.m = rio__gw_meta_new();
    if (!x.m) {
        *ret = rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
        return -1;
    }
    MHD_get_connection_values(c, MHD_HEADER_KIND, hdr_each, &x);
    if (x.why && x.err != -ENOMEM) { /* x-amz-tagging */
        rio__gw_meta_free(x.m);
        *ret = rio__gw_error(c, r, 400, rio__gw_tag_code(x.err, x.why), x.why);
        return -1;
    }
    if (x.err == GW_META_ETOOLARGE) {
        rio__gw_meta_free(x.m);
        *ret = rio__gw_error(c, r, 400, "MetadataTooLarge",
                             "Your metadata headers exceed the maximum allowed metadata size.");
        return -1;
    }
    if (x.err < 0) {
        snprintf(msg, sizeof(msg), "The header %.64s is not valid: %s.", x.name,
                 x.err == -ENOMEM ? "out of memory" : "control characters, a bad name or too long");
        rio__gw_meta_free(x.m);
        *ret = x.err == -ENOMEM ? rio__gw_error(c, r, 500, "InternalError", "Out of memory.")
                                : rio__gw_error(c, r, 400, "InvalidArgument", msg);
        return -1;
    }
    *out = x.m;
    return 0;
}

/* ------------------------------------------------------------- records */

/* Does record m (naming bkey) describe the object (size, generation, etag)? */
static int describes(const struct gw_meta *m, const char *rec_bkey, const char *bkey, uint64_t size,
                     uint64_t generation, const char *etag)
{
    return strcmp(rec_bkey, bkey) == 0 && m->size == size && strcmp(m->etag, etag) == 0 &&
           (!m->generation || !generation || m->generation == generation);
}

/* rio__gw_meta_parse_logged, and its error in *err. */
static struct gw_meta *parse_logged(const char *mkey, const char *p, size_t n, char **rec_bkey,
                                    int *err)
{
    struct gw_meta *m = NULL;
    const char *why = NULL;
    int ret = rio__gw_meta_parse(p, n, &m, rec_bkey, &why);

    *err = ret;
    if (ret < 0) {
        SRV_WARN("s3: metadata record %s ignored: %s", mkey,
                 ret == -ENOMEM ? "out of memory"
                 : why          ? why
                                : "malformed");
        return NULL;
    }
    return m;
}

struct gw_meta *rio__gw_meta_parse_logged(const char *mkey, const char *p, size_t n,
                                          char **rec_bkey)
{
    int err;

    return parse_logged(mkey, p, n, rec_bkey, &err);
}

/* Conditional writes of records beyond this many refusals in a row give up
 * (others keep writing the key's record, each for its own object). */
#define STORE_TRIES 8

/* rec as the record mkey of object bkey, generation gen (see
 * rio__gw_meta_store); have/prior: the record's generation read before the
 * commit (0: none). */
static int store_cas(const char *mkey, const char *bkey, uint64_t gen, const char *rec, size_t len,
                     int have, uint64_t prior)
{
    struct rio_client *c = rio__gw_client();
    struct rio_desc d;
    int ret = 0;

    if (!gen) /* a backend without generations: the last writer's */
        return rio_put(c, mkey, rec, len, NULL, NULL);
    for (int tries = 0; tries < STORE_TRIES; tries++) {
        struct rio_call call;
        uint64_t rg = prior;
        if (!have || tries > 0) {
            memset(&d, 0, sizeof(d));
            ret = rio_stat(c, mkey, &d);
            rg = ret == 0 ? d.generation : 0;
            rio_desc_cleanup(&d);
            if (ret < 0 && ret != RIO_ENOTFOUND)
                return ret;
        }
        memset(&call, 0, sizeof(call));
        if (rg)
            call.expect_generation = rg;
        else
            call.flags = RIO_IF_ABSENT;
        ret = rio_put(c, mkey, rec, len, &call, NULL);
        if (ret == RIO_ENOTSUP) /* the backend cannot decide it: as it was */
            return rio_put(c, mkey, rec, len, NULL, NULL);
        if (ret != RIO_EGENERATION)
            return ret;
        /* Written since by another: ours only while the object is. */
        memset(&d, 0, sizeof(d));
        ret = rio_stat(c, bkey, &d);
        uint64_t now = ret == 0 ? d.generation : 0;
        rio_desc_cleanup(&d);
        if (ret < 0 && ret != RIO_ENOTFOUND)
            return ret;
        if (now != gen) {
            SRV_DEBUG("s3: metadata record %s: the object was written again since: left", mkey);
            return 0;
        }
    }
    return ret;
}

int rio__gw_meta_store(const char *bucket, const char *key, struct gw_meta_gen *prior,
                       struct gw_meta *m, const struct rio_desc *d)
{
    char mkey[GW_META_KEY_MAX], bkey[RIO_KEY_MAX + 1];
    char *rec = NULL;
    size_t len = 0;
    uint64_t pg = 0;
    int have = 0, ret;

    if (rio__gw_meta_is_default(m, d->etag)) {
        rio__gw_meta_gen_cancel(prior);
        /* Nothing to keep: an object without a record reads back the same.
         * A record of an earlier version never matches this one's
         * generation; a backend without generations can only tell by
         * size and etag, so its record goes. */
        if (!d->generation)
            rio__gw_meta_drop(bucket, key);
        return 0;
    }
    if (prior)
        have = rio__gw_meta_gen_end(prior, &pg) == 0;
    snprintf(bkey, sizeof(bkey), "%s/%s", bucket, key);
    if (m->nruns && m->size != d->size) {
        /* Part sizes that are not this object's: a record holding them
         * would be refused whole when read back. */
        rio__free(m->runs);
        m->runs = NULL;
        m->nruns = 0;
    }
    m->size = d->size;
    m->generation = d->generation;
    snprintf(m->etag, sizeof(m->etag), "%s", d->etag);
    ret = rio__gw_meta_key(bucket, key, mkey);
    if (ret == 0)
        ret = rio__gw_meta_encode(m, bkey, &rec, &len);
    if (ret == 0)
        ret = store_cas(mkey, bkey, d->generation, rec, len, have, pg);
    rio__free(rec);
    if (ret < 0)
        SRV_WARN("s3: metadata record %s not written: %s", mkey, rio_strerror(ret));
    return ret;
}

/* Record reads started before the object's lookup, so that both round
 * trips run at once (rio__gw_meta_fetch_start). The fetch is run once, by
 * whichever comes first: a thread of this pool, or the request's own thread
 * when it asks for the answer (so a busy pool never delays a GET more than
 * reading the record after the lookup would). */
#define FETCH_THREADS 16u

static struct rio__pool fetch_pool;
static bool fetch_pool_on;

/* A job of the fetch pool that runs exactly once: on a pool thread, or in
 * its owner's when the owner wants the answer first. */
struct once {
    struct rio__job job;
    atomic_bool claimed;
    bool posted;
};

/* fn(arg) posted when post and the pool runs (else it runs at once_wait). */
static void once_post(struct once *o, int post, void (*fn)(void *), void *arg)
{
    atomic_init(&o->claimed, false);
    o->posted = post && fetch_pool_on;
    if (o->posted)
        rio__pool_share(&fetch_pool, &o->job, 1, fn, arg);
}

/* A job's first words: whether this caller is the one to run it. */
static bool once_claim(struct once *o)
{
    return !atomic_exchange(&o->claimed, true);
}

/* fn(arg) here unless it ran or runs elsewhere; then nothing of it runs
 * any more. */
static void once_wait(struct once *o, void (*fn)(void *), void *arg)
{
    fn(arg);
    if (o->posted)
        rio__pool_reclaim(&fetch_pool, &o->job);
}

/* Never run if not started; then nothing of it runs any more. */
static void once_cancel(struct once *o)
{
    atomic_store(&o->claimed, true);
    if (o->posted)
        rio__pool_reclaim(&fetch_pool, &o->job);
}

struct gw_meta_fetch {
    struct once once;
    char mkey[GW_META_KEY_MAX];
    char bkey[RIO_KEY_MAX + 1];
    char *buf;
    int64_t n; /* rio_get's answer */
};

int rio__gw_meta_fetch_pool_start(void)
{
    int ret = rio__pool_start(&fetch_pool, FETCH_THREADS, "s3-meta");

    fetch_pool_on = ret == 0;
    return ret;
}

void rio__gw_meta_fetch_pool_stop(void)
{
    if (fetch_pool_on)
        rio__pool_stop(&fetch_pool);
    fetch_pool_on = false;
}

static void fetch_run(void *arg)
{
    struct gw_meta_fetch *f = arg;

    if (!once_claim(&f->once))
        return;
    f->n = rio_get(rio__gw_client(), f->mkey, f->buf, GW_META_REC_MAX, NULL);
}

struct gw_meta_fetch *rio__gw_meta_fetch_start(const char *bucket, const char *key, int post)
{
    struct gw_meta_fetch *f = rio__calloc(1, sizeof(*f));

    if (!f)
        return NULL;
    f->buf = rio__malloc(GW_META_REC_MAX);
    if (!f->buf || rio__gw_meta_key(bucket, key, f->mkey) < 0 ||
        snprintf(f->bkey, sizeof(f->bkey), "%s/%s", bucket, key) >= (int)sizeof(f->bkey)) {
        rio__free(f->buf);
        rio__free(f);
        return NULL;
    }
    once_post(&f->once, post, fetch_run, f);
    return f;
}

/* A record written beside the object's commit (rio__gw_meta_store_start). */
struct gw_meta_put {
    struct once once;
    bool run; /* put_run is due (posted, or to run at store_end) */
    bool wrote;
    char mkey[GW_META_KEY_MAX];
    char *rec;
    size_t len;
    char *prior; /* the key's record before (NULL: it had none) */
    size_t prior_len;
    uint64_t gen; /* the written record's generation (0: unknown) */
    int ret;
};

static void put_run(void *arg)
{
    struct gw_meta_put *p = arg;
    struct rio_desc d;

    if (!once_claim(&p->once))
        return;
    memset(&d, 0, sizeof(d));
    p->ret = rio_put(rio__gw_client(), p->mkey, p->rec, p->len, NULL, &d);
    p->wrote = p->ret == 0;
    p->gen = p->ret == 0 ? d.generation : 0;
    rio_desc_cleanup(&d);
}

struct gw_meta_put *rio__gw_meta_store_start(const char *bucket, const char *key, struct gw_meta *m,
                                             uint64_t size, const char *etag, char *prior,
                                             size_t prior_len)
{
    struct gw_meta_put *p = rio__calloc(1, sizeof(*p));
    char bkey[RIO_KEY_MAX + 1];

    if (!p) {
        rio__free(prior);
        return NULL;
    }
    p->prior = prior;
    p->prior_len = prior_len;
    snprintf(bkey, sizeof(bkey), "%s/%s", bucket, key);
    m->size = size;
    m->generation = 0; /* not known before the commit: the size and MD5 name the bytes */
    snprintf(m->etag, sizeof(m->etag), "%s", etag);
    p->ret = rio__gw_meta_key(bucket, key, p->mkey);
    if (p->ret == 0)
        p->ret = rio__gw_meta_encode(m, bkey, &p->rec, &p->len);
    p->run = p->ret == 0;
    once_post(&p->once, p->run, put_run, p);
    return p;
}

/* The object's commit failed after p's record was written: the key's
 * record goes back to what it was, unless another writer has written it
 * since (the put or the removal is conditional on the generation p wrote,
 * where the backend can decide that). */
static void store_undo(struct gw_meta_put *p)
{
    struct rio_call call;
    int ret;

    memset(&call, 0, sizeof(call));
    call.expect_generation = p->gen;
    if (!p->prior) {
        /* It had none: the one written names bytes never published (by
         * size and MD5), which no object of the key has; removed all the
         * same where that is safe. */
        ret = p->gen ? rio_delete_if(rio__gw_client(), p->mkey, p->gen) : RIO_ENOTSUP;
        if (ret == 0)
            SRV_INFO("s3: metadata record %s of a failed PUT removed", p->mkey);
        else if (ret != RIO_ENOTSUP && ret != RIO_EGENERATION && ret != RIO_ENOTFOUND)
            SRV_WARN("s3: metadata record %s of a failed PUT left: %s", p->mkey, rio_strerror(ret));
        return;
    }
    ret = p->gen ? rio_put(rio__gw_client(), p->mkey, p->prior, p->prior_len, &call, NULL)
                 : RIO_ENOTSUP;
    if (ret == RIO_ENOTSUP) /* the backend cannot decide it: put back as it was */
        ret = rio_put(rio__gw_client(), p->mkey, p->prior, p->prior_len, NULL, NULL);
    if (ret == 0)
        SRV_INFO("s3: metadata record %s put back after a failed PUT", p->mkey);
    else if (ret != RIO_EGENERATION)
        SRV_WARN("s3: metadata record %s not put back after a failed PUT: %s", p->mkey,
                 rio_strerror(ret));
}

int rio__gw_meta_store_end(struct gw_meta_put *p, int failed)
{
    int ret;

    if (!p)
        return -ENOMEM;
    /* Not p->ret: a pool thread running put_run writes it. Read before
     * the job was taken back, a failed write's answer skipped the wait,
     * and p was freed under the thread still writing it (TSan). */
    if (failed)
        once_cancel(&p->once); /* not started: never will */
    else if (p->run)
        once_wait(&p->once, put_run, p);
    ret = p->ret;
    if (ret < 0)
        SRV_WARN("s3: metadata record %s not written: %s", p->mkey, rio_strerror(ret));
    if (failed && p->wrote)
        store_undo(p);
    rio__free(p->rec);
    rio__free(p->prior);
    rio__free(p);
    return ret;
}

struct gw_bucket_check {
    struct once once;
    int ret; /* rio__gw_bucket_exists's answer */
    char bucket[GW_BUCKET_MAX + 1];
};

static void bucket_check_run(void *arg)
{
    struct gw_bucket_check *b = arg;

    if (!once_claim(&b->once))
        return;
    b->ret = rio__gw_bucket_exists(b->bucket);
}

struct gw_bucket_check *rio__gw_bucket_check_start(const char *bucket)
{
    struct gw_bucket_check *b;

    if (!fetch_pool_on || strlen(bucket) > GW_BUCKET_MAX)
        return NULL;
    b = rio__calloc(1, sizeof(*b));
    if (!b)
        return NULL;
    strcpy(b->bucket, bucket);
    once_post(&b->once, 1, bucket_check_run, b);
    return b;
}

void rio__gw_bucket_check_cancel(struct gw_bucket_check *b)
{
    if (!b)
        return;
    once_cancel(&b->once);
    rio__free(b);
}

int rio__gw_bucket_check_end(struct gw_bucket_check *b, const char *bucket)
{
    int ret;

    if (!b)
        return rio__gw_bucket_exists(bucket);
    once_wait(&b->once, bucket_check_run, b);
    ret = b->ret;
    rio__free(b);
    return ret;
}

/* Wait for f (or run it here), then nothing of it runs any more. */
static void fetch_wait(struct gw_meta_fetch *f)
{
    once_wait(&f->once, fetch_run, f);
}

void rio__gw_meta_fetch_cancel(struct gw_meta_fetch *f)
{
    if (!f)
        return;
    once_cancel(&f->once);
    rio__free(f->buf);
    rio__free(f);
}

/* A record's generation read on the fetch pool (rio__gw_meta_gen_start). */
struct gw_meta_gen {
    struct once once;
    char mkey[GW_META_KEY_MAX];
    uint64_t gen;
    int ret;
};

static void gen_run(void *arg)
{
    struct gw_meta_gen *p = arg;
    struct rio_desc d;

    if (!once_claim(&p->once))
        return;
    memset(&d, 0, sizeof(d));
    p->ret = rio_stat(rio__gw_client(), p->mkey, &d);
    p->gen = p->ret == 0 ? d.generation : 0;
    if (p->ret == RIO_ENOTFOUND)
        p->ret = 0;
    rio_desc_cleanup(&d);
}

struct gw_meta_gen *rio__gw_meta_gen_start(const char *bucket, const char *key)
{
    struct gw_meta_gen *p = rio__calloc(1, sizeof(*p));

    if (!p)
        return NULL;
    if (rio__gw_meta_key(bucket, key, p->mkey) < 0) {
        rio__free(p);
        return NULL;
    }
    once_post(&p->once, 1, gen_run, p);
    return p;
}

int rio__gw_meta_gen_end(struct gw_meta_gen *p, uint64_t *gen)
{
    int ret;

    *gen = 0;
    if (!p)
        return -ENOMEM;
    once_wait(&p->once, gen_run, p);
    ret = p->ret;
    *gen = p->gen;
    rio__free(p);
    return ret;
}

void rio__gw_meta_gen_cancel(struct gw_meta_gen *p)
{
    if (!p)
        return;
    once_cancel(&p->once);
    rio__free(p);
}

int rio__gw_meta_fetch_take(struct gw_meta_fetch *f, char **rec, size_t *len)
{
    int ret;

    *rec = NULL;
    *len = 0;
    if (!f)
        return -ENOMEM;
    fetch_wait(f);
    if (f->n >= 0) {
        *rec = f->buf;
        *len = (size_t)f->n;
        f->buf = NULL;
        ret = 1;
    } else {
        ret = f->n == RIO_ENOTFOUND ? 0 : (int)f->n;
    }
    rio__free(f->buf);
    rio__free(f);
    return ret;
}

struct gw_meta *rio__gw_meta_fetch_end(struct gw_meta_fetch *f, const struct rio_desc *d, int *sure)
{
    char *rec_bkey = NULL;
    struct gw_meta *m = NULL;
    int err = 0;

    if (sure)
        *sure = 0;
    if (!f)
        return NULL;
    fetch_wait(f);
    for (int again = f->once.posted;; again = 0) {
        if (f->n >= 0)
            m = parse_logged(f->mkey, f->buf, (size_t)f->n, &rec_bkey, &err);
        else if (f->n != RIO_ENOTFOUND)
            SRV_WARN("s3: metadata record %s ignored: %s", f->mkey, rio_strerror((int)f->n));
        /* The answer is what the backend holds (a record, none, one
         * refused), not a failure to read it or to parse it for want of
         * memory. */
        if (sure)
            *sure = (f->n >= 0 || f->n == RIO_ENOTFOUND) && err != -ENOMEM;
        if (!m || describes(m, rec_bkey, f->bkey, d->size, d->generation, d->etag))
            break;
        rio__gw_meta_free(m);
        m = NULL;
        rio__free(rec_bkey);
        rec_bkey = NULL;
        if (!again) {
            SRV_DEBUG("s3: metadata record %s describes another version: ignored", f->mkey);
            break;
        }
        /* Read before the lookup, it may be the previous version's, written
         * again since: once more, after the lookup. */
        f->n = rio_get(rio__gw_client(), f->mkey, f->buf, GW_META_REC_MAX, NULL);
    }
    rio__free(rec_bkey);
    rio__free(f->buf);
    rio__free(f);
    return m;
}

struct gw_meta *rio__gw_meta_load(const char *bucket, const char *key, const struct rio_desc *d,
                                  int *sure)
{
    if (sure)
        *sure = 0;
    return rio__gw_meta_fetch_end(rio__gw_meta_fetch_start(bucket, key, 0), d, sure);
}

void rio__gw_meta_drop(const char *bucket, const char *key)
{
    char mkey[GW_META_KEY_MAX];
    int ret;

    if (rio__gw_meta_key(bucket, key, mkey) < 0)
        return;
    ret = rio_delete(rio__gw_client(), mkey);
    if (ret < 0 && ret != RIO_ENOTFOUND)
        SRV_WARN("s3: metadata record %s not removed: %s", mkey, rio_strerror(ret));
}

void rio__gw_meta_drop_if(const char *bucket, const char *key, uint64_t gen)
{
    char mkey[GW_META_KEY_MAX];
    int ret;

    if (rio__gw_meta_key(bucket, key, mkey) < 0)
        return;
    ret = rio_delete_if(rio__gw_client(), mkey, gen);
    if (ret == RIO_ENOTSUP)
        ret = rio_delete(rio__gw_client(), mkey);
    if (ret == RIO_EGENERATION)
        SRV_DEBUG("s3: metadata record %s written again since: left", mkey);
    else if (ret < 0 && ret != RIO_ENOTFOUND)
        SRV_WARN("s3: metadata record %s not removed: %s", mkey, rio_strerror(ret));
}

void rio__gw_meta_drop_keys(char (*mkeys)[GW_META_KEY_MAX], const uint64_t *gens,
                            const uint8_t *have, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        int ret = have[i] ? rio_delete_if(rio__gw_client(), mkeys[i], gens[i]) : RIO_ENOTSUP;
        if (ret == RIO_ENOTSUP) /* no generation read, or a backend without conditions */
            ret = rio_delete(rio__gw_client(), mkeys[i]);
        if (ret == RIO_EGENERATION)
            SRV_DEBUG("s3: metadata record %s written again since: left", mkeys[i]);
        else if (ret < 0 && ret != RIO_ENOTFOUND)
            SRV_WARN("s3: metadata record %s not removed: %s", mkeys[i], rio_strerror(ret));
    }
}

void rio__gw_meta_drop_bucket(const char *bucket)
{
    char prefix[GW_META_KEY_MAX];

    snprintf(prefix, sizeof(prefix), GW_META_PREFIX "%s/", bucket);
    rio__gw_each_key(prefix, 0, rio__gw_drop_entry, NULL);
}

const char *rio__gw_meta_etag(const struct gw_meta *m, const char *etag)
{
    return m && m->s3etag[0] ? m->s3etag : etag;
}

void rio__gw_meta_headers(struct MHD_Response *resp, const struct gw_meta *m)
{
    char name[GW_META_USER_MAX + 16];

    if (!m || !m->hdr[GW_MH_CONTENT_TYPE])
        MHD_add_response_header(resp, "Content-Type", GW_META_DEFAULT_TYPE);
    if (!m)
        return;
    for (int i = 0; i < GW_MH__COUNT; i++)
        if (m->hdr[i])
            MHD_add_response_header(resp, rio__gw_meta_hdr_names[i], m->hdr[i]);
    for (unsigned i = 0; i < m->nuser; i++) {
        snprintf(name, sizeof(name), "x-amz-meta-%s", m->user[i].name);
        /* libmicrohttpd takes no empty value: one blank, which a client
         * reads as the empty value (RFC 9110 trims it) */
        MHD_add_response_header(resp, name, m->user[i].value[0] ? m->user[i].value : " ");
    }
    if (m->ntags) {
        snprintf(name, sizeof(name), "%u", m->ntags);
        MHD_add_response_header(resp, "x-amz-tagging-count", name);
    }
}

void rio__gw_checksum_headers(struct MHD_Connection *c, struct MHD_Response *resp,
                              const struct gw_meta *m)
{
    const char *mode = rio__gw_header(c, "x-amz-checksum-mode");
    char name[40];

    if (!mode || strcasecmp(mode, "ENABLED") != 0 || !m || !m->ck_algo[0] || !m->ck_value[0])
        return;
    snprintf(name, sizeof(name), "x-amz-checksum-%s", m->ck_algo);
    MHD_add_response_header(resp, name, m->ck_value);
    MHD_add_response_header(resp, "x-amz-checksum-type",
                            strchr(m->ck_value, '-') ? "COMPOSITE" : "FULL_OBJECT");
}

static const char *const ck_names[] = {"x-amz-checksum-crc32", "x-amz-checksum-crc32c",
                                       "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1",
                                       "x-amz-checksum-sha256"};

int rio__gw_checksum_coming(struct MHD_Connection *c)
{
    for (size_t i = 0; i < sizeof(ck_names) / sizeof(ck_names[0]); i++)
        if (rio__gw_header(c, ck_names[i]))
            return 1;
    return rio__gw_header(c, "x-amz-trailer") != NULL;
}

int rio__gw_sent_checksum(struct MHD_Connection *c, const struct gw_req *r, char algo[12],
                          char value[64])
{
    const char *name = NULL, *v = NULL;

    for (size_t i = 0; i < sizeof(ck_names) / sizeof(ck_names[0]) && !name; i++)
        if ((v = rio__gw_header(c, ck_names[i])) != NULL)
            name = ck_names[i];
    if (!name) {
        name = rio_s3_chunked_trailer(r->chunked, &v);
        if (!name || strncasecmp(name, "x-amz-checksum-", 15) != 0)
            return 0;
    }
    if (strlen(name + 15) >= 12 || strlen(v) >= 64)
        return 0;
    snprintf(algo, 12, "%s", name + 15);
    snprintf(value, 64, "%s", v);
    return 1;
}

/* ------------------------------------------------------------- listings */

/* The S3 ETag of every entry of one batch whose record exists. */
static void list_batch(const char *bucket, struct rio_entry **es, char (*mkeys)[GW_META_KEY_MAX],
                       unsigned n, char *bufs, const struct rio_list_page *p, struct gw_list_ck *ck)
{
    struct rio_op ops[LIST_BATCH];
    size_t blen = strlen(bucket) + 1;

    memset(ops, 0, sizeof(ops));
    for (unsigned i = 0; i < n; i++) {
        ops[i].type = RIO_OP_GET;
        ops[i].key = mkeys[i];
        ops[i].buf = bufs + (size_t)i * GW_META_REC_MAX;
        ops[i].len = GW_META_REC_MAX;
    }
    if (n == 1) /* a batch's set-up costs more than one lookup */
        ops[0].result = rio_get(rio__gw_client(), ops[0].key, ops[0].buf, ops[0].len, NULL);
    else if (rio_batch(rio__gw_client(), ops, n, NULL) < 0)
        return;
    for (unsigned i = 0; i < n; i++) {
        struct rio_entry *e = es[i];
        char *rec_bkey = NULL;
        struct gw_meta *m;
        uint64_t gen = e->generation;
        if (ops[i].result < 0)
            continue;
        m = rio__gw_meta_parse_logged(mkeys[i], ops[i].buf, (size_t)ops[i].result, &rec_bkey);
        if (m && m->generation && !gen) {
            /* The listing does not say which generation: ask. */
            struct rio_desc d;
            memset(&d, 0, sizeof(d));
            if (rio_stat(rio__gw_client(), e->key, &d) == 0 && d.size == e->size &&
                strcmp(d.etag, e->etag) == 0)
                gen = d.generation;
            rio_desc_cleanup(&d);
            if (!gen)
                gen = ~m->generation; /* cannot tell: not this record's */
        }
        if (m && describes(m, rec_bkey, e->key, e->size, gen, e->etag) && strlen(e->key) > blen) {
            if (m->s3etag[0])
                snprintf(e->etag, sizeof(e->etag), "%s", m->s3etag);
            if (ck && m->ck_value[0]) {
                struct gw_list_ck *k = &ck[e - p->entries];
                snprintf(k->algo, sizeof(k->algo), "%s", m->ck_algo);
                k->composite = strchr(m->ck_value, '-') != NULL;
            }
        }
        rio__gw_meta_free(m);
        rio__free(rec_bkey);
    }
}

void rio__gw_meta_list_etags(const char *bucket, struct rio_list_page *p, struct gw_list_ck *ck)
{
    size_t blen = strlen(bucket) + 1;
    const char **keys = NULL;
    char(*mkeys)[GW_META_KEY_MAX] = NULL;
    uint8_t *exists = NULL;
    char *bufs = NULL;
    struct rio_entry *batch[LIST_BATCH];
    unsigned nk = 0, nb = 0;
    unsigned *idx = NULL;

    if (!p->n)
        return;
    keys = rio__calloc(p->n, sizeof(*keys));
    mkeys = rio__calloc(p->n, sizeof(*mkeys));
    exists = rio__calloc(p->n, 1);
    idx = rio__calloc(p->n, sizeof(*idx));
    if (!keys || !mkeys || !exists || !idx)
        goto out;
    for (unsigned i = 0; i < p->n; i++) {
        const struct rio_entry *e = &p->entries[i];
        if ((e->flags & RIO_ENTRY_DIR) || strlen(e->key) <= blen ||
            rio__gw_meta_key(bucket, e->key + blen, mkeys[nk]) < 0)
            continue;
        keys[nk] = mkeys[nk];
        idx[nk++] = i;
    }
    /* One question for the whole page; most objects have no record. */
    if (!nk || rio_exists_batch(rio__gw_client(), keys, nk, exists, NULL, NULL) <= 0)
        goto out;
    bufs = rio__malloc((size_t)LIST_BATCH * GW_META_REC_MAX);
    if (!bufs)
        goto out;
    for (unsigned i = 0; i < nk; i++) {
        if (!exists[i])
            continue;
        if (nb != i) /* compact: the batch's keys side by side */
            memcpy(mkeys[nb], mkeys[i], GW_META_KEY_MAX);
        batch[nb % LIST_BATCH] = &p->entries[idx[i]];
        nb++;
        if (nb % LIST_BATCH == 0)
            list_batch(bucket, batch, mkeys + nb - LIST_BATCH, LIST_BATCH, bufs, p, ck);
    }
    if (nb % LIST_BATCH)
        list_batch(bucket, batch, mkeys + nb - nb % LIST_BATCH, nb % LIST_BATCH, bufs, p, ck);
out:
    rio__free(bufs);
    rio__free(idx);
    rio__free(exists);
    rio__free(mkeys);
    rio__free(keys);
}
