/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The optional op list: one ListObjectsV2 request (GET /BUCKET?list-type=2)
 * per page, its answer read by listxml.c. Keys are listed beneath the
 * URL's prefix and returned without it; railio's own sidecars
 * (KEY.railio-ID, docs/s3.md) are left out, so a page may hold fewer
 * entries than max_keys and still not be the last.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "transport/s3/internal.h"

/* The most bytes one listed entry may take in the answer (an encoded
 * 1 KiB key three times over, its date, size and ETag), over the
 * answer's own fields. */
#define S3_LIST_ENTRY_BYTES 4096u
#define S3_LIST_BODY_BASE (64u << 10)

struct list_ctx {
    struct s3_transport *t;
    struct rio_list_page *out;
    unsigned cap, max;
    size_t plen; /* the URL's prefix, stripped from every key */
};

/* KEY.railio-ID with ID 16 hex digits: a sidecar this transport wrote. */
static bool is_sidecar(const char *k, size_t l)
{
    size_t sl = strlen(S3_SIDECAR_SUFFIX);

    return l > sl + 16 && !memcmp(k + l - 16 - sl, S3_SIDECAR_SUFFIX, sl) &&
           rio__s3_is_hex(k + l - 16, 16);
}

static void entry_etag(const char *et, char out[48])
{
    size_t l = strlen(et);

    out[0] = '\0';
    /* The MD5 of the bytes only when the ETag is one (a single PutObject);
     * a multipart ETag ("MD5-N") is no digest of the object. */
    if (l == 34 && et[0] == '"' && et[33] == '"' && rio__s3_is_hex(et + 1, 32)) {
        for (int i = 0; i < 32; i++) {
            char c = et[1 + i];
            out[i] = c >= 'A' && c <= 'F' ? (char)(c - 'A' + 'a') : c;
        }
        out[32] = '\0';
    }
}

static int list_item(void *arg, const struct rio_s3_list_item *it)
{
    struct list_ctx *x = arg;
    struct rio_list_page *p = x->out;
    struct rio_entry *e;

    if (it->klen < x->plen || memcmp(it->key, x->t->prefix, x->plen) != 0 ||
        (it->klen == x->plen && !it->dir))
        return RIO_EPROTO; /* not beneath the prefix asked */
    if (!it->dir && is_sidecar(it->key, it->klen))
        return 0;
    if (p->n == x->max)
        return RIO_EPROTO; /* more than max-keys */
    if (p->n == x->cap) {
        unsigned cap = x->cap ? x->cap * 2 : 64;
        if (cap > x->max)
            cap = x->max;
        e = rio__realloc(p->entries, (size_t)cap * sizeof(*e));
        if (!e)
            return -ENOMEM;
        p->entries = e;
        x->cap = cap;
    }
    e = &p->entries[p->n++];
    memset(e, 0, sizeof(*e));
    memcpy(e->key, it->key + x->plen, it->klen - x->plen + 1);
    if (it->dir) {
        e->flags = RIO_ENTRY_DIR;
        return 0;
    }
    e->size = it->size;
    e->mtime_ns = it->mtime_ns;
    entry_etag(it->etag, e->etag);
    return 0;
}

static int entry_cmp(const void *a, const void *b)
{
    return strcmp(((const struct rio_entry *)a)->key, ((const struct rio_entry *)b)->key);
}

/* The URL's prefix and s, in buf (cap bytes): 0, or RIO_EINVAL when longer
 * than a key. */
static int join_prefix(const struct s3_transport *t, const char *s, char *buf, size_t cap)
{
    int w = snprintf(buf, cap, "%s%s", t->prefix, s ? s : "");
    return w < 0 || (size_t)w >= cap || (size_t)w > RIO_KEY_MAX ? RIO_EINVAL : 0;
}

int rio__s3_list(struct rio_transport *tt, const struct rio_list_args *a, struct rio_list_page *out)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    char prefix[RIO_KEY_MAX + 1], after[RIO_KEY_MAX + 1], maxk[16];
    struct meta_req q = {.method = "GET", .key = NULL};
    struct meta_rsp r = {0};
    struct rio_s3_list_result res;
    struct list_ctx x = {.t = t, .out = out};
    unsigned max = a->max_keys ? a->max_keys : 1000;
    int ret;

    memset(out, 0, sizeof(*out));
    if (t->scheme != SCHEME_S3)
        return RIO_ENOTSUP;
    if (max > RIO_LIST_PAGE_MAX)
        max = RIO_LIST_PAGE_MAX;
    if (a->token && strlen(a->token) > RIO_LIST_TOKEN_MAX)
        return RIO_EINVAL;
    if (join_prefix(t, a->prefix, prefix, sizeof(prefix)) < 0)
        return RIO_EINVAL;
    x.max = max;
    x.plen = strlen(t->prefix);
    snprintf(maxk, sizeof(maxk), "%u", max);
    q.q[q.nq++] = (struct rio_s3_kv){"list-type", "2"};
    q.q[q.nq++] = (struct rio_s3_kv){"max-keys", maxk};
    q.q[q.nq++] = (struct rio_s3_kv){"encoding-type", "url"};
    if (prefix[0])
        q.q[q.nq++] = (struct rio_s3_kv){"prefix", prefix};
    if (a->flags & RIO_LIST_DELIM)
        q.q[q.nq++] = (struct rio_s3_kv){"delimiter", "/"};
    if (a->token && a->token[0]) {
        q.q[q.nq++] = (struct rio_s3_kv){"continuation-token", a->token};
    } else if (a->start_after && a->start_after[0]) {
        if (join_prefix(t, a->start_after, after, sizeof(after)) < 0)
            return RIO_EINVAL;
        q.q[q.nq++] = (struct rio_s3_kv){"start-after", after};
    }
    q.body_max = S3_LIST_BODY_BASE + (size_t)max * S3_LIST_ENTRY_BYTES;
    ret = rio__s3_meta_do(t, &q, &r);
    if (ret == 0) {
        ret = rio__s3_list_parse(r.body.p, r.body.len, &res, list_item, &x);
        if (ret == RIO_EPROTO)
            rio__detail("s3 bucket %s: the ListObjectsV2 answer is malformed", t->bucket);
    }
    rio__s3_meta_rsp_cleanup(&r);
    if (ret < 0) {
        rio__free(out->entries);
        memset(out, 0, sizeof(*out));
        return ret;
    }
    /* S3 sends the objects and the common prefixes as two sorted runs: one
     * page in byte order (strcmp compares unsigned bytes). */
    if (out->n > 1)
        qsort(out->entries, out->n, sizeof(*out->entries), entry_cmp);
    memcpy(out->next_token, res.next_token, sizeof(out->next_token));
    return 0;
}
