/* SPDX-License-Identifier: Apache-2.0 */
/*
 * LIST and EXISTS (docs/protocol.md), and the key-ordered index a LIST page
 * is read from. A page is chosen under the table's lock (the memory
 * store's, or the disk tier's index's) by searching the index: the first
 * key after the cursor (or the prefix), then each next one, a common
 * prefix passed over with one search, until max_keys + 1 are kept (the
 * extra one says the page is not the last); they are encoded while the
 * lock still keeps the objects' keys alive. A page of k entries costs
 * about k searches of 2 ln n nodes, whatever the table holds. (Before the
 * index, each page walked every object: 0.17-0.2 s under the lock per page
 * among a million objects, so `railio ls` of a million keys took 187-218 s
 * in pages of 1000, and the PUTs and GETs beside it waited up to a second.)
 * The selection and the answer are allocated before the lock, bounded by
 * RIO_PROTO_LIST_MAX_KEYS and RIO_PROTO_LIST_RESP_MAX whatever was asked.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "railio.h"
#include "server/server.h"

static int key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
    int c = memcmp(a, b, alen < blen ? alen : blen);
    if (c)
        return c;
    return alen < blen ? -1 : alen > blen;
}

/* ---------------------------------------------------------------- index */

void rio__srv_index_init(struct rio_srv_index *x)
{
    x->root = NULL;
    if (getrandom(&x->rng, sizeof(x->rng), GRND_NONBLOCK) != sizeof(x->rng))
        x->rng = rio__now_ns();
    x->rng |= 1; /* xorshift's state is never 0 */
}

static uint32_t index_prio(struct rio_srv_index *x)
{
    x->rng ^= x->rng << 13;
    x->rng ^= x->rng >> 7;
    x->rng ^= x->rng << 17;
    return (uint32_t)(x->rng >> 32);
}

void rio__srv_index_insert(struct rio_srv_index *x, struct rio_srv_obj *o)
{
    struct rio_srv_obj **t = &x->root, *n, **l, **r;

    o->iprio = index_prio(x);
    /* Down to where o's priority puts it... */
    while (*t && (*t)->iprio >= o->iprio)
        t = key_cmp(o->key, o->key_len, (*t)->key, (*t)->key_len) < 0 ? &(*t)->ileft
                                                                      : &(*t)->iright;
    /* ...then the subtree there split around o's key. */
    n = *t;
    l = &o->ileft;
    r = &o->iright;
    while (n) {
        if (key_cmp(n->key, n->key_len, o->key, o->key_len) < 0) {
            *l = n;
            l = &n->iright;
            n = n->iright;
        } else {
            *r = n;
            r = &n->ileft;
            n = n->ileft;
        }
    }
    *l = *r = NULL;
    *t = o;
}

void rio__srv_index_remove(struct rio_srv_index *x, struct rio_srv_obj *o)
{
    struct rio_srv_obj **t = &x->root, *a, *b, **p;

    while (*t && *t != o)
        t = key_cmp(o->key, o->key_len, (*t)->key, (*t)->key_len) < 0 ? &(*t)->ileft
                                                                      : &(*t)->iright;
    if (!*t)
        return; /* not in the index: nothing to take out */
    /* o's place goes to its two subtrees merged, by priority. */
    a = o->ileft;
    b = o->iright;
    p = t;
    while (a && b) {
        if (a->iprio >= b->iprio) {
            *p = a;
            p = &a->iright;
            a = a->iright;
        } else {
            *p = b;
            p = &b->ileft;
            b = b->ileft;
        }
    }
    *p = a ? a : b;
    o->ileft = o->iright = NULL;
}

const struct rio_srv_obj *rio__srv_index_first(const struct rio_srv_index *x, const char *key,
                                               size_t len, int strict)
{
    const struct rio_srv_obj *t = x->root, *best = NULL;

    while (t) {
        int c = key_cmp(t->key, t->key_len, key, len);
        if (c > 0 || (c == 0 && !strict)) {
            best = t;
            t = t->ileft;
        } else {
            t = t->iright;
        }
    }
    return best;
}

/* ---------------------------------------------------------------- pages */

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

/* The first object whose key does not start with the common prefix
 * key[0, len) (which ends with its '/'): the first not below the prefix
 * with its '/' turned into the next byte, '0'. */
static const struct rio_srv_obj *past_common_prefix(struct rio_srv_lister *l,
                                                    const struct rio_srv_index *x, const char *key,
                                                    size_t len)
{
    if (len > RIO_KEY_MAX)
        return NULL; /* no table holds such a key */
    memcpy(l->next, key, len);
    l->next[len - 1] = (char)('/' + 1);
    return rio__srv_index_first(x, l->next, len, 0);
}

void rio__srv_list_index_locked(struct rio_srv_lister *l, const struct rio_srv_index *x)
{
    const struct rio_proto_list *m = &l->m;
    const struct rio_srv_obj *o;

    /* Keys carrying the prefix are one run of the index, from the prefix
     * on; the page starts after the cursor if that is further. */
    if (key_cmp(m->after, m->after_len, m->prefix, m->prefix_len) >= 0)
        o = rio__srv_index_first(x, m->after, m->after_len, 1);
    else
        o = rio__srv_index_first(x, m->prefix, m->prefix_len, 0);
    while (o && l->n <= l->max) {
        size_t len = o->key_len;
        int dir = 0;

        if (len < m->prefix_len || memcmp(o->key, m->prefix, m->prefix_len) != 0)
            break; /* past the prefix's run */
        if (o->expiry_ns && o->expiry_ns <= l->now) {
            o = rio__srv_index_first(x, o->key, o->key_len, 1);
            continue;
        }
        if (m->flags & RIO_PROTO_LIST_DELIM) {
            /* Keys below a '/' after the prefix show as that common
             * prefix, once; a cursor equal to it (or inside it) skips
             * them all. */
            const char *sl = memchr(o->key + m->prefix_len, '/', len - m->prefix_len);
            if (sl) {
                len = (size_t)(sl - o->key) + 1;
                dir = 1;
            }
        }
        if (!dir || key_cmp(o->key, len, m->after, m->after_len) > 0) {
            l->sel[l->n].key = o->key;
            l->sel[l->n].len = (uint16_t)len;
            l->sel[l->n].o = dir ? NULL : o;
            l->n++;
        }
        o = dir ? past_common_prefix(l, x, o->key, len)
                : rio__srv_index_first(x, o->key, o->key_len, 1);
    }
    encode_locked(l);
}
