/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The optional list and exists ops of railio:// (docs/protocol.md, LIST and
 * EXISTS), on each member's control connection. A ring of several members
 * holds each key on one of them: a LIST page asks every member for a page
 * after the same cursor and merges them (the smallest max_keys keys win,
 * the others come again on the next page; a member's page that says more
 * keys follow vouches only for keys up to its last one, so the merged page
 * ends there: past it that member's next keys would be skipped); EXISTS sends each member one
 * request with the keys it owns, so a batch costs one round trip per
 * member (per RIO_PROTO_EXISTS_MAX bytes of keys), not one per key.
 */
#include <stdlib.h>

#include "core/internal.h"
#include "transport/tcp/tcp_int.h"

static int check_list_resp(const uint8_t *body, size_t len)
{
    struct rio_proto_list_resp r;
    return rio__proto_dec_list_resp(body, len, &r);
}

static int check_exists_resp(const uint8_t *body, size_t len)
{
    struct rio_proto_exists_resp r;
    return rio__proto_dec_exists_resp(body, len, &r);
}

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* One member's page while the pages are merged. */
struct mpage {
    uint8_t *body;
    struct rio_proto_list_resp r;
    uint32_t left;              /* entries not yet taken */
    size_t off;                 /* of the next one */
    struct rio_proto_entry cur; /* the next one, while left */
};

static int mpage_next(struct mpage *p)
{
    if (p->left == 0)
        return 0;
    return rio__proto_list_entry(&p->r, &p->off, &p->cur);
}

int rio__tcp_list(struct rio_transport *tt, const struct rio_list_args *a,
                  struct rio_list_page *out)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    uint8_t req[8 + 2 * (2 + RIO_KEY_MAX)];
    struct mpage pg[TCP_MAX_MEMBERS];
    struct rio_proto_list m = {0};
    const char *prefix = a->prefix ? a->prefix : "";
    const char *cursor = a->token && *a->token ? a->token : a->start_after ? a->start_after : "";
    size_t plen = strlen(prefix), clen = strlen(cursor), total = 0;
    unsigned max = a->max_keys ? a->max_keys : 1000;
    bool more = false;
    int n, ret = 0;

    memset(out, 0, sizeof(*out));
    if (plen > RIO_KEY_MAX || clen > RIO_KEY_MAX)
        return RIO_EINVAL;
    if (max > RIO_PROTO_LIST_MAX_KEYS)
        max = RIO_PROTO_LIST_MAX_KEYS;
    m.max_keys = max;
    m.flags = (a->flags & RIO_LIST_DELIM) ? RIO_PROTO_LIST_DELIM : 0;
    m.prefix = prefix;
    m.prefix_len = (uint16_t)plen;
    m.after = cursor;
    m.after_len = (uint16_t)clen;
    n = rio__proto_enc_list(&m, req, sizeof(req));
    if (n < 0)
        return RIO_EINVAL;
    memset(pg, 0, sizeof(pg));
    for (unsigned mi = 0; mi < t->nmembers; mi++) {
        struct iovec iov;
        struct rio_proto_hdr h;
        struct ctl_req rq = rio__tcp_body_req(RIO_OP_LIST, &iov, req, n, RIO_PROTO_LIST_RESP_MAX,
                                              t->o.op_timeout_ms);
        rq.idempotent = true;
        rq.need_cap = RIO_PROTO_CAP_LIST;
        rq.check = check_list_resp;
        ret = rio__tcp_ctl_call(t, &t->members[mi], &rq, &h, &pg[mi].body);
        if (ret == 0 && h.status != 0)
            ret = wire_status(h.status);
        if (ret == 0 && rio__proto_dec_list_resp(pg[mi].body, h.body_len, &pg[mi].r) < 0)
            ret = RIO_EPROTO;
        if (ret < 0)
            goto out;
        pg[mi].left = pg[mi].r.n;
        total += pg[mi].r.n;
        if (pg[mi].r.flags & RIO_PROTO_LIST_TRUNCATED)
            more = true;
        if (mpage_next(&pg[mi]) < 0) {
            ret = RIO_EPROTO;
            goto out;
        }
    }
    if (total > max)
        total = max;
    /* The smallest last key of the members whose page was cut (by
     * max_keys, or by the answer's byte cap, before max_keys): the merged
     * page holds nothing after it. */
    const char *lim = NULL;
    size_t lim_len = 0;
    for (unsigned mi = 0; mi < t->nmembers; mi++) {
        struct rio_proto_entry last;
        size_t off = 0;
        if (!(pg[mi].r.flags & RIO_PROTO_LIST_TRUNCATED))
            continue;
        if (pg[mi].r.n == 0) {
            ret = RIO_EPROTO; /* "more" with nothing to continue from */
            goto out;
        }
        for (uint32_t k = 0; k < pg[mi].r.n; k++)
            if (rio__proto_list_entry(&pg[mi].r, &off, &last) < 0) {
                ret = RIO_EPROTO;
                goto out;
            }
        if (!lim || key_cmp(last.key, last.key_len, lim, lim_len) < 0) {
            lim = last.key;
            lim_len = last.key_len;
        }
    }
    if (total) {
        out->entries = rio__calloc(total, sizeof(*out->entries));
        if (!out->entries) {
            ret = -ENOMEM;
            goto out;
        }
    }
    /* Merge: the smallest key of the members' next entries, each once (a
     * common prefix may come from several members). */
    while (out->n < total) {
        struct mpage *best = NULL;
        for (unsigned mi = 0; mi < t->nmembers; mi++) {
            struct mpage *p = &pg[mi];
            if (p->left && (!best || key_cmp(p->cur.key, p->cur.key_len, best->cur.key,
                                             best->cur.key_len) < 0))
                best = p;
        }
        if (!best || (lim && key_cmp(best->cur.key, best->cur.key_len, lim, lim_len) > 0))
            break;
        const struct rio_proto_entry *e = &best->cur;
        /* A server answers only what was asked: keys under the prefix,
         * after the cursor. */
        if (e->key_len < plen || memcmp(e->key, prefix, plen) != 0 ||
            key_cmp(e->key, e->key_len, cursor, clen) <= 0) {
            ret = RIO_EPROTO;
            goto out;
        }
        struct rio_entry *prev = out->n ? &out->entries[out->n - 1] : NULL;
        if (!prev || key_cmp(prev->key, strlen(prev->key), e->key, e->key_len) != 0) {
            struct rio_entry *d = &out->entries[out->n++];
            memcpy(d->key, e->key, e->key_len);
            d->key[e->key_len] = '\0';
            if (e->flags & RIO_PROTO_ENTRY_DIR) {
                d->flags = RIO_ENTRY_DIR;
            } else {
                d->size = e->size;
                d->generation = e->generation;
                d->mtime_ns = e->mtime_ns;
                rio__tcp_etag_out(d->etag, e->etag);
            }
        }
        best->left--;
        if (mpage_next(best) < 0) {
            ret = RIO_EPROTO;
            goto out;
        }
    }
    for (unsigned mi = 0; mi < t->nmembers; mi++)
        if (pg[mi].left)
            more = true;
    if (more) {
        if (out->n == 0) {
            ret = RIO_EPROTO; /* "more" with nothing to continue from */
            goto out;
        }
        /* The cursor of the next page: the last key (or common prefix). */
        snprintf(out->next_token, sizeof(out->next_token), "%s", out->entries[out->n - 1].key);
    }
out:
    for (unsigned mi = 0; mi < t->nmembers; mi++)
        rio__free(pg[mi].body);
    if (ret < 0)
        rio_list_page_cleanup(out);
    return ret;
}

/* One EXISTS request to member mi for the keys it owns from index *from
 * on, as many as fit one request; their bits into out. */
static int exists_batch(struct tcp_transport *t, unsigned mi, const char *const *keys,
                        const uint16_t *klen, const uint8_t *owner, unsigned n, unsigned *from,
                        uint8_t *body, uint32_t *idx, uint8_t *out)
{
    struct rio_proto_exists_resp r;
    struct rio_proto_hdr h;
    struct iovec iov;
    uint8_t *resp = NULL;
    size_t len = 4;
    uint32_t cnt = 0;
    unsigned i = *from;
    int ret;

    for (; i < n && cnt < RIO_PROTO_EXISTS_MAX_KEYS; i++) {
        if (owner[i] != mi)
            continue;
        if (len + 2 + klen[i] > RIO_PROTO_EXISTS_MAX)
            break;
        body[len] = (uint8_t)klen[i];
        body[len + 1] = (uint8_t)(klen[i] >> 8);
        memcpy(body + len + 2, keys[i], klen[i]);
        len += 2 + (size_t)klen[i];
        idx[cnt++] = i;
    }
    *from = i;
    if (cnt == 0)
        return 0;
    body[0] = (uint8_t)cnt;
    body[1] = (uint8_t)(cnt >> 8);
    body[2] = (uint8_t)(cnt >> 16);
    body[3] = (uint8_t)(cnt >> 24);
    struct ctl_req rq =
        rio__tcp_body_req(RIO_OP_EXISTS, &iov, body, (int)len,
                          4 + (RIO_PROTO_EXISTS_MAX_KEYS + 7) / 8, t->o.op_timeout_ms);
    rq.idempotent = true;
    rq.need_cap = RIO_PROTO_CAP_EXISTS;
    rq.check = check_exists_resp;
    ret = rio__tcp_ctl_call(t, &t->members[mi], &rq, &h, &resp);
    if (ret < 0)
        return ret;
    if (h.status != 0)
        ret = wire_status(h.status);
    else if (rio__proto_dec_exists_resp(resp, h.body_len, &r) < 0 || r.n != cnt)
        ret = RIO_EPROTO;
    else
        for (uint32_t k = 0; k < cnt; k++)
            out[idx[k]] = (r.bits[k / 8] >> (k % 8)) & 1;
    rio__free(resp);
    return ret;
}

int rio__tcp_exists(struct rio_transport *tt, const char *const *keys, unsigned n, uint8_t *out)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    uint16_t *klen = NULL;
    uint8_t *owner = NULL, *body = NULL;
    uint32_t *idx = NULL;
    int ret = 0;

    if (n == 0)
        return 0;
    if (!keys || !out || n > RIO_LIST_PAGE_MAX)
        return RIO_EINVAL;
    klen = rio__malloc((size_t)n * sizeof(*klen));
    owner = rio__malloc(n);
    idx = rio__malloc((size_t)n * sizeof(*idx));
    body = rio__malloc(RIO_PROTO_EXISTS_MAX);
    if (!klen || !owner || !idx || !body) {
        ret = -ENOMEM;
        goto out;
    }
    for (unsigned i = 0; i < n; i++) {
        size_t l;
        ret = rio__key_len(keys[i], &l);
        if (ret < 0)
            goto out;
        klen[i] = (uint16_t)l;
        owner[i] = (uint8_t)rio__tcp_owner_of(t, keys[i], l);
        out[i] = 0;
    }
    for (unsigned mi = 0; mi < t->nmembers && ret == 0; mi++)
        for (unsigned from = 0; from < n && ret == 0;)
            ret = exists_batch(t, mi, keys, klen, owner, n, &from, body, idx, out);
out:
    rio__free(klen);
    rio__free(owner);
    rio__free(idx);
    rio__free(body);
    return ret;
}
