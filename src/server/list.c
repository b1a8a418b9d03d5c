/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LIST and EXISTS (docs/protocol.md). A LIST page is chosen in one pass
 * over an object table (the memory store's, or the disk tier's index) under
 * that table's lock: the max_keys + 1 smallest keys after the cursor are
 * kept in a sorted array (the extra one says whether the page is the last),
 * then encoded while the lock still keeps the objects' keys alive. The
 * array and the answer are allocated before the lock, both bounded by
 * RIO_PROTO_LIST_MAX_KEYS and RIO_PROTO_LIST_RESP_MAX whatever was asked.
 */
#include <errno.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "railio.h"
#include "server/server.h"

int rio__srv_lister_init(struct rio_srv_lister *l, const struct rio_proto_list *m)
{
    unsigned max = m->max_keys ? m->max_keys : RIO_SRV_LIST_DEFAULT;

    memset(l, 0, sizeof(*l));
    if (max > RIO_PROTO_LIST_MAX_KEYS)
        max = RIO_PROTO_LIST_MAX_KEYS;
    l->m = *m;
    l->max = max;
    l->now = rio__now_ns();
    l->sel = rio__malloc(((size_t)max + 1) * sizeof(*l->sel));
    /* What max entries can take, at most RIO_PROTO_LIST_RESP_MAX. */
    size_t cap = RIO_PROTO_LIST_FIXED + (size_t)max * (RIO_PROTO_ENTRY_FIXED + RIO_KEY_MAX);
    l->cap = cap < RIO_PROTO_LIST_RESP_MAX ? cap : RIO_PROTO_LIST_RESP_MAX;
    l->out = rio__malloc(l->cap);
    if (!l->sel || !l->out) {
        rio__srv_lister_cleanup(l);
        return -ENOMEM;
    }
    return 0;
}

void rio__srv_lister_cleanup(struct rio_srv_lister *l)
{
    rio__free(l->sel);
    rio__free(l->out);
    l->sel = NULL;
    l->out = NULL;
}

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

static void offer_locked(struct rio_srv_lister *l, const struct rio_srv_obj *o)
{
    const struct rio_proto_list *m = &l->m;
    size_t len = o->key_len;
    int dir = 0;

    if (o->expiry_ns && o->expiry_ns <= l->now)
        return;
    if (len < m->prefix_len || memcmp(o->key, m->prefix, m->prefix_len) != 0)
        return;
    if (m->flags & RIO_PROTO_LIST_DELIM) {
        /* Keys below a '/' after the prefix show as that common prefix:
         * a cursor equal to it then skips all of them. */
        const char *sl = memchr(o->key + m->prefix_len, '/', len - m->prefix_len);
        if (sl) {
            len = (size_t)(sl - o->key) + 1;
            dir = 1;
        }
    }
    if (key_cmp(o->key, len, m->after, m->after_len) <= 0)
        return;
    /* Where it goes in the sorted selection. */
    unsigned lo = 0, hi = l->n;
    while (lo < hi) {
        unsigned mid = lo + (hi - lo) / 2;
        int c = key_cmp(l->sel[mid].key, l->sel[mid].len, o->key, len);
        if (c == 0)
            return; /* a common prefix already selected */
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo > l->max)
        return; /* after every selected key, and the selection is full */
    unsigned n = l->n <= l->max ? l->n : l->max; /* the last one drops when full */
    memmove(&l->sel[lo + 1], &l->sel[lo], (size_t)(n - lo) * sizeof(*l->sel));
    l->sel[lo].key = o->key;
    l->sel[lo].len = (uint16_t)len;
    l->sel[lo].o = dir ? NULL : o;
    l->n = n + 1;
}

static void encode_locked(struct rio_srv_lister *l)
{
    size_t off = RIO_PROTO_LIST_FIXED;
    uint32_t n = 0;

    for (; n < l->n && n < l->max; n++) {
        const struct rio_srv_list_sel *s = &l->sel[n];
        struct rio_proto_entry e = {.key = s->key, .key_len = s->len};
        if (s->o) {
            e.size = s->o->size;
            e.generation = s->o->generation;
            e.mtime_ns = s->o->mtime_ns;
            memcpy(e.etag, s->o->etag, RIO_PROTO_ETAG_LEN);
        } else {
            e.flags = RIO_PROTO_ENTRY_DIR;
        }
        int k = rio__proto_enc_entry(&e, l->out + off, l->cap - off);
        if (k < 0)
            break; /* the byte cap: the rest is the next page's */
        off += (size_t)k;
    }
    rio__proto_enc_list_resp_fixed(n, n < l->n ? RIO_PROTO_LIST_TRUNCATED : 0, l->out,
                                   RIO_PROTO_LIST_FIXED);
    l->out_len = off;
}

void rio__srv_list_table_locked(struct rio_srv_lister *l, struct rio_srv_obj *const *tab,
                                size_t mask)
{
    for (size_t i = 0; i <= mask; i++)
        for (const struct rio_srv_obj *o = tab[i]; o; o = o->hnext)
            offer_locked(l, o);
    encode_locked(l);
}
