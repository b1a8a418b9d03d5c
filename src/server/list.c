/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LIST and EXISTS (docs/protocol.md). A LIST page is chosen in one pass
 * over an object table (the memory store's, or the disk tier's index) under
 * that table's lock: the max_keys + 1 smallest keys after the cursor are
 * kept (the extra one says whether the page is the last), then encoded
 * while the lock still keeps the objects' keys alive. Candidates are
 * appended to a buffer of twice that; when it fills it is sorted, common
 * prefixes met twice dropped, and cut to max_keys + 1, whose largest key
 * then turns away every later key not below it with one comparison. (A
 * sorted array kept by insertion cost a binary search per object and a
 * move of up to 10,000 entries per key taken: 0.85 s under the lock for a
 * page of 10,000 among a million objects, against 0.17 s for the walk.)
 * The buffer and the answer are allocated before the lock, both bounded by
 * RIO_PROTO_LIST_MAX_KEYS and RIO_PROTO_LIST_RESP_MAX whatever was asked.
 */
#include <errno.h>
#include <stdlib.h>
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
    l->sel = rio__malloc(2 * ((size_t)max + 1) * sizeof(*l->sel));
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

static int sel_cmp(const void *a, const void *b)
{
    const struct rio_srv_list_sel *x = a, *y = b;
    return key_cmp(x->key, x->len, y->key, y->len);
}

/* Sort the candidates, drop repeats (a common prefix offered by each of
 * its keys), keep the max + 1 smallest; the largest kept bounds the rest. */
static void prune_locked(struct rio_srv_lister *l)
{
    unsigned k = 0;

    qsort(l->sel, l->n, sizeof(*l->sel), sel_cmp);
    for (unsigned i = 0; i < l->n && k <= l->max; i++)
        if (k == 0 || sel_cmp(&l->sel[k - 1], &l->sel[i]) != 0)
            l->sel[k++] = l->sel[i];
    l->n = k;
    l->bounded = k == l->max + 1;
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
    /* Not below the largest of max + 1 kept keys: not on this page (equal:
     * that common prefix is kept already). */
    if (l->bounded) {
        const struct rio_srv_list_sel *top = &l->sel[l->max];
        if (key_cmp(o->key, len, top->key, top->len) >= 0)
            return;
    }
    l->sel[l->n].key = o->key;
    l->sel[l->n].len = (uint16_t)len;
    l->sel[l->n].o = dir ? NULL : o;
    if (++l->n == 2 * (l->max + 1))
        prune_locked(l);
}

static void encode_locked(struct rio_srv_lister *l)
{
    size_t off = RIO_PROTO_LIST_FIXED;
    uint32_t n = 0;

    prune_locked(l);
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
