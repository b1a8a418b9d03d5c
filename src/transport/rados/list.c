/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: list and exists (docs/rados.md, "Listing").
 *
 * A listing walks the URL's pool in namespace "" (heads and foreign objects;
 * chunk objects live in their own namespace) with rados_object_list, in the
 * pool's own order: ascending (bit-reversed) object hash, not key order.
 * Each candidate that passes the prefix and start_after filters has its head
 * read (its first RIO_RADOS_HEAD_TOP bytes and a stat, in parallel); what is
 * not a head of its key is skipped, so each railio object shows once, with
 * the size, generation and etag its head says.
 *
 * The continuation token is a position in that order, which librados cannot
 * serialise as such: "r1-HHHHHHHH-T[-SA]" with H the bit-reversed hash
 * position (8 lower-case hex digits) where the next page starts, T how many
 * namespace-"" objects at exactly that hash were already passed (32-bit hash
 * ties: almost always 0) and SA the first page's start_after in lower-case
 * hex, which later pages keep applying. The position is found by bisection
 * over rados_object_list_slice cursors compared to the listing's `next`
 * cursor (local computations, no round trip), so it does not depend on the
 * pool's PG count.
 *
 * Bounds per page: at most max_keys entries, at most list_scan objects
 * examined (the URL's list_scan, default LIST_SCAN_MAX) and LIST_CALLS_MAX listing round trips; a
 * page that reaches a bound before max_keys ends short, with a token.
 */
#define _GNU_SOURCE /* qsort_r */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/key.h"
#include "core/url.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/head.h"
#include "transport/rados/internal.h"
#include "transport/rados/token.h"
#include "transport/transport.h"

#define LIST_BATCH 256u    /* objects asked of one rados_object_list call */
#define LIST_CALLS_MAX 64u /* rados_object_list calls per page */
#define HEADS_WINDOW 64u   /* head reads in flight at once */

/* ------------------------------------------------------- head summaries */

struct hread {
    const char *key;
    char *buf; /* RIO_RADOS_HEAD_TOP bytes */
    size_t got;
    uint64_t size;
    time_t mtime;
    int rv_stat, rv_read, ret;
    rados_read_op_t op;
    rados_completion_t comp;
    struct rio__rados_head h; /* summary only: nothing allocated */
};

/* Send one head read (first bytes and stat); ret < 0 when it could not go. */
static void hread_send(struct rados_transport *t, struct hread *r)
{
    r->ret = -ENOMEM;
    r->op = rados_create_read_op();
    if (!r->op)
        return;
    rados_read_op_stat(r->op, &r->size, &r->mtime, &r->rv_stat);
    rados_read_op_read(r->op, 0, RIO_RADOS_HEAD_TOP, r->buf, &r->got, &r->rv_read);
    if (rados_aio_create_completion2(NULL, NULL, &r->comp) < 0)
        goto err_op;
    r->ret = rados_aio_read_op_operate(r->op, t->head_io, r->comp, r->key, 0);
    if (r->ret < 0)
        goto err_comp;
    r->ret = 1; /* in flight */
    return;
err_comp:
    rados_aio_release(r->comp);
err_op:
    rados_release_read_op(r->op);
    r->op = NULL;
}

/* Wait for one head read: ret 0 (a head of its key: r->h), RIO_ENOTFOUND,
 * RIO_EPROTO (not a head) or an error. */
static void hread_wait(struct hread *r)
{
    if (r->ret != 1)
        return;
    rados_aio_wait_for_complete(r->comp);
    int ret = rados_aio_get_return_value(r->comp);
    rados_aio_release(r->comp);
    rados_release_read_op(r->op);
    r->op = NULL;
    if (ret == 0 && r->rv_read < 0)
        ret = r->rv_read;
    if (ret == 0 && r->rv_stat < 0)
        ret = r->rv_stat;
    if (ret < 0) {
        r->ret = ret == -ENOENT ? RIO_ENOTFOUND : rio__rados_xlate(ret);
        return;
    }
    r->ret = rio__rados_head_summary(r->buf, r->got, r->key, &r->h);
}

/* Read the heads of r[0..n) in parallel, HEADS_WINDOW at a time. */
static int heads_read(struct rados_transport *t, struct hread *r, unsigned n)
{
    pthread_mutex_lock(&t->mu);
    t->ctr.list_heads_read += n;
    pthread_mutex_unlock(&t->mu);
    char *bufs = NULL;

    if (!n)
        return 0;
    unsigned w = n < HEADS_WINDOW ? n : HEADS_WINDOW;
    bufs = rio__malloc((size_t)w * RIO_RADOS_HEAD_TOP);
    if (!bufs)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i += w) {
        unsigned k = n - i < w ? n - i : w;
        for (unsigned j = 0; j < k; j++) {
            r[i + j].buf = bufs + (size_t)j * RIO_RADOS_HEAD_TOP;
            hread_send(t, &r[i + j]);
        }
        for (unsigned j = 0; j < k; j++) {
            hread_wait(&r[i + j]);
            r[i + j].buf = NULL;
        }
    }
    rio__free(bufs);
    return 0;
}

int rio__rados_exists(struct rio_transport *tt, const char *const *keys, unsigned n, uint8_t *out)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct hread *r;
    size_t len;
    int ret;

    if ((n && (!keys || !out)) || n > RIO_LIST_PAGE_MAX)
        return RIO_EINVAL;
    for (unsigned i = 0; i < n; i++)
        if ((ret = rio__key_len(keys[i], &len)) < 0)
            return ret;
    if (!n)
        return 0;
    /* A pool whose key index is ready answers from it; the keys it cannot
     * answer for (a PUT in flight, an entry not marked) have their heads
     * read. */
    unsigned shards;
    bool ready;
    ret = rio__rados_idx_state(t, &shards, &ready);
    if (ret < 0)
        return ret;
    if (shards && ready)
        ret = rio__rados_idx_exists(t, shards, keys, n, out);
    else
        memset(out, 2, n);
    if (ret < 0)
        return ret;
    unsigned m = 0;
    for (unsigned i = 0; i < n; i++)
        m += out[i] == 2;
    if (!m)
        return 0;
    r = rio__calloc(m, sizeof(*r));
    if (!r)
        return -ENOMEM;
    m = 0;
    for (unsigned i = 0; i < n; i++)
        if (out[i] == 2)
            r[m++].key = keys[i];
    ret = heads_read(t, r, m);
    m = 0;
    for (unsigned i = 0; ret == 0 && i < n; i++) {
        if (out[i] != 2)
            continue;
        struct hread *h = &r[m++];
        /* Not a head (a foreign object) is no railio object: absent. */
        if (h->ret == 0 || h->ret == RIO_ENOTFOUND || h->ret == RIO_EPROTO)
            out[i] = h->ret == 0;
        else
            ret = h->ret;
    }
    rio__free(r);
    return ret;
}

/* ------------------------------------------------------------- cursors */

/* A cursor at the start of bit-reversed hash position pos (0..2^32). */
static int cursor_at(rados_ioctx_t io, uint64_t pos, rados_object_list_cursor *out)
{
    rados_object_list_cursor b, e, s, f;

    if (pos >= 1ull << 32) {
        *out = rados_object_list_end(io);
        return *out ? 0 : -ENOMEM;
    }
    b = rados_object_list_begin(io);
    e = rados_object_list_end(io);
    /* librados fills the two result cursors in place: they must exist. */
    s = rados_object_list_begin(io);
    f = rados_object_list_begin(io);
    if (b && e && s && f)
        rados_object_list_slice(io, b, e, (size_t)pos, (size_t)1 << 32, &s, &f);
    if (b)
        rados_object_list_cursor_free(io, b);
    if (e)
        rados_object_list_cursor_free(io, e);
    if (f)
        rados_object_list_cursor_free(io, f);
    if (!(b && e && s && f)) {
        if (s)
            rados_object_list_cursor_free(io, s);
        return -ENOMEM;
    }
    *out = s;
    return 0;
}

/* The hash position of cursor c: the largest pos with cursor_at(pos) <= c. */
static int cursor_pos(rados_ioctx_t io, rados_object_list_cursor c, uint64_t *out)
{
    uint64_t lo = 0, hi = (1ull << 32) - 1;

    while (lo < hi) {
        uint64_t mid = lo + (hi - lo + 1) / 2;
        rados_object_list_cursor s;
        int ret = cursor_at(io, mid, &s);
        if (ret < 0)
            return ret;
        int cmp = rados_object_list_cursor_cmp(io, s, c);
        rados_object_list_cursor_free(io, s);
        if (cmp <= 0)
            lo = mid;
        else
            hi = mid - 1;
    }
    *out = lo;
    return 0;
}

/* ------------------------------------------------------------------ list */

struct lscan {
    struct rados_transport *t;
    const struct rio_list_args *a;
    const char *prefix, *sa;
    size_t plen;
    struct rio_entry *ents;
    unsigned n, max;
    struct hread *r; /* LIST_BATCH candidates of one call */
    char (*keys)[RIO_KEY_MAX + 1];
    unsigned shards; /* the pool's key index is ready: its shards (list_sorted) */
};

/* Whether the listed name can be a key under the listing's prefix. */
static bool under_prefix(const struct lscan *s, const rados_object_list_item *it)
{
    return it->oid_length && it->oid_length <= RIO_KEY_MAX &&
           !memchr(it->oid, '\0', it->oid_length) && it->oid_length >= s->plen &&
           memcmp(it->oid, s->prefix, s->plen) == 0;
}

/* Whether the listed name is a key this listing shows (before its head). */
static bool candidate(const struct lscan *s, const rados_object_list_item *it)
{
    if (!under_prefix(s, it))
        return false;
    if (s->sa) {
        size_t sl = strlen(s->sa), m = sl < it->oid_length ? sl : it->oid_length;
        int c = memcmp(it->oid, s->sa, m);
        if (c < 0 || (c == 0 && it->oid_length <= sl))
            return false;
    }
    return true;
}

/* With RIO_LIST_DELIM: the length of the common prefix key stops at, or 0. */
static size_t delim_len(const struct lscan *s, const char *key)
{
    const char *slash;

    if (!(s->a->flags & RIO_LIST_DELIM))
        return 0;
    slash = strchr(key + s->plen, '/');
    return slash ? (size_t)(slash - key) + 1 : 0;
}

/* A common prefix already on this page. In hash order the keys under one
 * prefix are spread over the whole listing: a later page may show it again. */
static bool dir_seen(const struct lscan *s, const char *key, size_t len)
{
    for (unsigned i = 0; i < s->n; i++)
        if ((s->ents[i].flags & RIO_ENTRY_DIR) && strlen(s->ents[i].key) == len &&
            memcmp(s->ents[i].key, key, len) == 0)
            return true;
    return false;
}

/* The entry of a key whose head r read. */
static void entry_of(struct rio_entry *e, const struct hread *r)
{
    strcpy(e->key, r->key);
    e->size = r->h.size;
    e->generation = r->h.generation;
    e->mtime_ns = (int64_t)r->mtime * 1000000000;
    memcpy(e->etag, r->h.etag, sizeof(e->etag));
}

/* Take the candidates of one listing call: read their heads, add entries. */
static int take(struct lscan *s, const rados_object_list_item *items, unsigned from, unsigned n)
{
    unsigned nc = 0;
    int ret;

    for (unsigned i = from; i < n; i++) {
        if (!candidate(s, &items[i]))
            continue;
        memcpy(s->keys[nc], items[i].oid, items[i].oid_length);
        s->keys[nc][items[i].oid_length] = '\0';
        memset(&s->r[nc], 0, sizeof(s->r[nc]));
        s->r[nc].key = s->keys[nc];
        nc++;
    }
    ret = heads_read(s->t, s->r, nc);
    if (ret < 0)
        return ret;
    for (unsigned i = 0; i < nc; i++) {
        struct hread *r = &s->r[i];
        if (r->ret == RIO_ENOTFOUND || r->ret == RIO_EPROTO)
            continue; /* removed since, or not railio's */
        if (r->ret < 0)
            return r->ret;
        size_t dl = delim_len(s, r->key);
        if (dl && dir_seen(s, r->key, dl))
            continue;
        struct rio_entry *e = &s->ents[s->n++];
        memset(e, 0, sizeof(*e));
        if (dl) {
            memcpy(e->key, r->key, dl);
            e->key[dl] = '\0';
            e->flags = RIO_ENTRY_DIR;
            continue;
        }
        entry_of(e, r);
    }
    return 0;
}

/* ------------------------------------------------------- sorted listing */

/*
 * RIO_LIST_SORTED: a page in byte order of key, as every other backend
 * gives. Each page scans the names of the whole pool under the prefix (no
 * head read: a name costs a few bytes of a rados_object_list reply) and
 * keeps the max + 1 smallest after start_after (common prefixes once, with
 * RIO_LIST_DELIM) in order, in max + 1 slots whatever the pool holds; then
 * it reads the heads of that page's keys only. A name that is no head of
 * its key (foreign, or removed since) is dropped, so a page may hold fewer
 * than max entries. The token is "s1-" and the page's last name in hex,
 * or "s2-" and the name itself when its hex would not fit.
 */
struct sname {
    char key[RIO_KEY_MAX + 1];
    bool dir;
    /* From the key index: its one entry says it is committed, with what
     * the listing shows (no head read). */
    bool known;
    struct rio__rados_ival iv;
    uint64_t gen;
};

/* Keep name (len bytes; a common prefix when dir) among the n smallest
 * (at most cap, sorted, each once). */
static void sorted_keep(struct sname *v, unsigned *n, unsigned cap, const char *name, size_t len,
                        bool dir)
{
    unsigned lo = 0, hi = *n;
    char k[RIO_KEY_MAX + 1];

    memcpy(k, name, len);
    k[len] = '\0';
    if (*n == cap && strcmp(k, v[*n - 1].key) >= 0)
        return;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        int c = strcmp(k, v[mid].key);
        if (c == 0)
            return; /* a common prefix kept already */
        if (c < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (*n == cap)
        (*n)--;
    memmove(&v[lo + 1], &v[lo], (size_t)(*n - lo) * sizeof(*v));
    memcpy(v[lo].key, k, len + 1);
    v[lo].dir = dir;
    v[lo].known = false;
    (*n)++;
}

#define SNAP_BYTES_MAX (32u << 20)        /* what one snapshot may hold, names and all */
#define SNAP_TTL_NS (60ull * 1000000000u) /* a snapshot serves later pages this long */

static void snap_free(struct lsnap *sn)
{
    if (!sn)
        return;
    rio__free(sn->names);
    rio__free(sn->arena);
    rio__free(sn);
}

void rio__rados_snaps_clear(struct rados_transport *t)
{
    for (unsigned i = 0; i < LIST_SNAPS; i++) {
        snap_free(t->snaps[i]);
        t->snaps[i] = NULL;
    }
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Names collected by a scan, to become a snapshot; abandoned (over) past
 * SNAP_BYTES_MAX. */
struct collect {
    char *arena;
    size_t len, cap;
    size_t *offs;
    size_t n, ncap;
    bool over;
};

/* Append name (len bytes) to c: 0, or -ENOMEM. */
static int collect_push(struct collect *c, const char *name, size_t len)
{
    if (c->len + len + 1 > c->cap) {
        size_t ncap = c->cap ? c->cap * 2 : 1u << 16;
        while (ncap < c->len + len + 1)
            ncap *= 2;
        char *na = rio__realloc(c->arena, ncap);
        if (!na)
            return -ENOMEM;
        c->arena = na;
        c->cap = ncap;
    }
    if (c->n == c->ncap) {
        size_t ncap = c->ncap ? c->ncap * 2 : 1024;
        size_t *no = rio__realloc(c->offs, ncap * sizeof(*no));
        if (!no)
            return -ENOMEM;
        c->offs = no;
        c->ncap = ncap;
    }
    c->offs[c->n++] = c->len;
    memcpy(c->arena + c->len, name, len);
    c->arena[c->len + len] = '\0';
    c->len += len + 1;
    return 0;
}

static void collect_add(struct collect *c, const char *name, size_t len)
{
    if (c->over)
        return;
    /* the names, their offsets and (in the snapshot) their pointers */
    if (c->len + len + 1 + (c->n + 1) * (sizeof(size_t) + sizeof(char *)) > SNAP_BYTES_MAX ||
        collect_push(c, name, len) < 0)
        c->over = true;
}

/* The collected names sorted, each once, as a snapshot (c is taken); NULL
 * when out of memory or over. */
static struct lsnap *collect_snap(struct collect *c, const struct lscan *s)
{
    struct lsnap *sn = NULL;
    char **names = NULL;
    size_t k = 0;

    if (!c->over)
        names = rio__malloc((c->n ? c->n : 1) * sizeof(*names));
    if (names)
        sn = rio__calloc(1, sizeof(*sn));
    if (!sn) {
        rio__free(names);
        rio__free(c->arena);
        rio__free(c->offs);
        return NULL;
    }
    for (size_t i = 0; i < c->n; i++)
        names[i] = c->arena + c->offs[i];
    qsort(names, c->n, sizeof(*names), name_cmp);
    for (size_t i = 0; i < c->n; i++)
        if (!k || strcmp(names[k - 1], names[i]) != 0)
            names[k++] = names[i];
    rio__free(c->offs);
    memcpy(sn->prefix, s->prefix, s->plen + 1);
    sn->delim = (s->a->flags & RIO_LIST_DELIM) != 0;
    sn->at = rio__now_ns();
    sn->n = k;
    sn->names = names;
    sn->arena = c->arena;
    return sn;
}

static bool is_dir(const struct lscan *s, const char *name)
{
    return (s->a->flags & RIO_LIST_DELIM) && strchr(name + s->plen, '/') != NULL;
}

/* The page's names from a snapshot: up to cap after s->sa (and the common
 * prefix a caller's start_after lies under, first). */
static void snap_page(const struct lsnap *sn, const struct lscan *s, bool from_token,
                      struct sname *v, unsigned *n, unsigned cap)
{
    size_t lo = 0, hi = sn->n;

    while (s->sa && lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (strcmp(sn->names[mid], s->sa) <= 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (s->sa && !from_token && lo && is_dir(s, sn->names[lo - 1]) &&
        strncmp(s->sa, sn->names[lo - 1], strlen(sn->names[lo - 1])) == 0)
        lo--;
    *n = 0;
    for (size_t i = lo; i < sn->n && *n < cap; i++) {
        snprintf(v[*n].key, sizeof(v[*n].key), "%s", sn->names[i]);
        v[*n].dir = is_dir(s, sn->names[i]);
        v[*n].known = false;
        (*n)++;
    }
}

/* A later page of a listing whose names are in a fresh snapshot: true with
 * the page's names in v. */
static bool snap_take(struct rados_transport *t, const struct lscan *s, struct sname *v,
                      unsigned *n, unsigned cap)
{
    bool hit = false;
    uint64_t now = rio__now_ns();

    pthread_mutex_lock(&t->cache_mu);
    for (unsigned i = 0; i < LIST_SNAPS && !hit; i++) {
        struct lsnap *sn = t->snaps[i];
        if (!sn || now - sn->at > SNAP_TTL_NS ||
            sn->delim != ((s->a->flags & RIO_LIST_DELIM) != 0) ||
            strcmp(sn->prefix, s->prefix) != 0)
            continue;
        snap_page(sn, s, true, v, n, cap);
        hit = true;
    }
    pthread_mutex_unlock(&t->cache_mu);
    return hit;
}

/* Keep sn for the listing's later pages: in place of one of the same
 * listing, or of the oldest. */
static void snap_publish(struct rados_transport *t, struct lsnap *sn)
{
    struct lsnap *old;
    unsigned at = 0;

    pthread_mutex_lock(&t->cache_mu);
    for (unsigned i = 0; i < LIST_SNAPS; i++) {
        struct lsnap *o = t->snaps[i];
        if (!o || (o->delim == sn->delim && strcmp(o->prefix, sn->prefix) == 0)) {
            at = i;
            break;
        }
        if (o->at < t->snaps[at]->at)
            at = i;
    }
    old = t->snaps[at];
    t->snaps[at] = sn;
    pthread_mutex_unlock(&t->cache_mu);
    snap_free(old);
}

/* ------------------------------------------------- from the key index */

#define IDX_ROUNDS 64u /* index reads (one per shard each) per page */

/* One round's entries: keys (as C strings in an arena) from every shard. */
struct iround {
    struct collect c;
    struct ient {
        uint64_t gen;
        struct rio__rados_ival iv; /* committed false: not (or not a value of ours) */
        bool junk;                 /* a name railio does not write: only a place */
        bool cut;                  /* junk whose place is its first RIO_KEY_MAX bytes */
    } * e;                         /* per entry of c */
    size_t ecap;
    size_t *slast; /* per shard: the entry it added last + 1 (0: none) */
};

static int iround_each(void *arg, unsigned shard, const char *name, size_t nlen, const char *val,
                       size_t vlen)
{
    struct iround *r = arg;
    size_t kl;
    uint64_t gen;

    bool junk = rio__rados_idx_entry_split(name, nlen, &kl, &gen) < 0, cut = false;
    if (junk) {
        /* Not an entry railio writes: no key, but where the shard's read
         * got to (the round's bound must not pass it: a shard of such
         * names would hide its keys after them). Its bytes up to a NUL,
         * at most a key's length: at or before its place. */
        const char *nul = memchr(name, '\0', nlen);
        kl = nul ? (size_t)(nul - name) : nlen;
        cut = kl > RIO_KEY_MAX;
        if (cut)
            kl = RIO_KEY_MAX;
        gen = 0;
    }
    if (r->c.n == r->ecap) {
        size_t ncap = r->ecap ? r->ecap * 2 : 1024;
        struct ient *ne = rio__realloc(r->e, ncap * sizeof(*ne));
        if (!ne)
            return -ENOMEM;
        r->e = ne;
        r->ecap = ncap;
    }
    int ret = collect_push(&r->c, name, kl);
    if (ret < 0)
        return ret;
    struct ient *e = &r->e[r->c.n - 1];
    e->gen = gen;
    e->junk = junk;
    e->cut = cut;
    if (junk || rio__rados_ival_parse(val, vlen, &e->iv) < 0)
        e->iv.committed = false; /* read its head */
    r->slast[shard] = r->c.n;
    return 0;
}

static const char *ikey(const struct iround *r, size_t i)
{
    return r->c.arena + r->c.offs[i];
}

static int icmp(const void *a, const void *b, void *arg)
{
    const struct collect *c = arg;
    return strcmp(c->arena + c->offs[*(const size_t *)a], c->arena + c->offs[*(const size_t *)b]);
}

/* Whether key starts with the first clen bytes of cp. */
static bool under(const char *key, const char *cp, size_t clen)
{
    return clen && strncmp(key, cp, clen) == 0;
}

/*
 * Where the next round starts after place p (a key, or the first
 * RIO_KEY_MAX bytes of longer names when cut), into after: past p, and
 * when cut past every name that begins with it (p's successor: its last
 * byte below 0xff raised, what follows dropped). p + "\x01" is no step
 * past names longer than a key that share those bytes: a round of them
 * read the same names again, and a listing past more of them than a round
 * reads failed for good ("no progress"). False when nothing sorts after.
 */
static bool idx_after(char *after, const char *p, bool cut)
{
    size_t n = strlen(p);

    if (!cut) {
        snprintf(after, RIO_KEY_MAX + 2, "%s\x01", p);
        return true;
    }
    while (n && (unsigned char)p[n - 1] == 0xff)
        n--;
    if (!n)
        return false;
    memmove(after, p, n);
    after[n - 1] = (char)((unsigned char)after[n - 1] + 1);
    after[n] = '\0';
    return true;
}

/*
 * The names of a sorted page from the key index (shards of it): the first
 * cap names after s->sa under the prefix, folded into common prefixes with
 * RIO_LIST_DELIM, into v[0..*n). Each round reads up to cap entries of
 * every shard after the position and takes, in order, those no shard with
 * more to read could still precede. *more: the rounds ran out before the
 * index did and before cap names, with resume (a key) where to go on.
 */
static int idx_names(struct rados_transport *t, unsigned shards, const struct lscan *s,
                     bool from_token, struct sname *v, unsigned *n, unsigned cap, bool *more,
                     char *resume)
{
    struct iround r = {0};
    char *after = rio__malloc(RIO_KEY_MAX + 2), *bound = rio__malloc(RIO_KEY_MAX + 1);
    char skip[RIO_KEY_MAX + 1];
    size_t skiplen = 0, sl = s->sa ? strlen(s->sa) : 0;
    bool *smore = rio__calloc(shards, sizeof(bool));
    size_t *slast = rio__calloc(shards, sizeof(size_t));
    int ret = -ENOMEM;

    *n = 0;
    *more = false;
    resume[0] = '\0';
    if (!after || !bound || !smore || !slast)
        goto out;
    r.slast = slast;
    after[0] = '\0';
    if (s->sa)
        snprintf(after, RIO_KEY_MAX + 2, "%s\x01", s->sa);
    if (s->sa && from_token && (s->a->flags & RIO_LIST_DELIM) && sl > s->plen) {
        /* After a token, every key under the common prefix sa is under
         * (or is) was shown already: start past them all. */
        const char *slash = memchr(s->sa + s->plen, '/', sl - s->plen);
        if (slash) {
            rio__key_skip_past(skip, s->sa, (size_t)(slash - s->sa) + 1);
            snprintf(after, RIO_KEY_MAX + 2, "%s\x01", skip);
        }
    }
    for (unsigned round = 0;; round++) {
        if (round == IDX_ROUNDS) {
            *more = true;
            break;
        }
        r.c.n = r.c.len = 0;
        bool any_more = false, bound_cut = false, last_cut = false;
        bound[0] = '\0';
        memset(slast, 0, shards * sizeof(*slast));
        /* Keys spread evenly over the shards: twice a shard's share of
         * what is left to fill, and a margin, most often make the page in
         * one round (a short shard bounds the round; the next reads on). */
        unsigned want = (cap - *n) * 2 / shards + 32;
        if (want > cap)
            want = cap;
        ret =
            rio__rados_idx_read_many(t, 0, shards, after, s->prefix, want, iround_each, &r, smore);
        if (ret < 0)
            goto out;
        for (unsigned sh = 0; sh < shards; sh++) {
            if (smore[sh] && slast[sh]) {
                /* That shard may hold keys before any it did not send:
                 * nothing after its last one is taken this round. */
                const char *lk = ikey(&r, slast[sh] - 1);
                int c = any_more ? strcmp(lk, bound) : -1;
                if (c < 0)
                    snprintf(bound, RIO_KEY_MAX + 1, "%s", lk);
                /* Cut only when every shard that bounds it stopped in
                 * names longer than a key: another may still hold the
                 * key itself, past which the next round must not go. */
                if (c <= 0)
                    bound_cut = r.e[slast[sh] - 1].cut && (c < 0 || bound_cut);
                any_more = true;
            }
        }
        size_t *ord = rio__malloc((r.c.n ? r.c.n : 1) * sizeof(*ord));
        ret = -ENOMEM;
        if (!ord)
            goto out;
        for (size_t i = 0; i < r.c.n; i++)
            ord[i] = i;
        qsort_r(ord, r.c.n, sizeof(*ord), icmp, &r.c);
        const char *last = NULL;
        bool full = false;
        for (size_t i = 0, j; i < r.c.n && !full; i = j) {
            const char *k = ikey(&r, ord[i]);
            /* Its entries: one generation each. Exactly one, committed:
             * what it says is the head's (docs/rados.md). */
            unsigned real = 0;
            bool cut = true;
            for (j = i; j < r.c.n && strcmp(ikey(&r, ord[j]), k) == 0; j++) {
                real += !r.e[ord[j]].junk;
                cut = cut && r.e[ord[j]].cut;
            }
            const struct ient *one = j == i + 1 && r.e[ord[i]].iv.committed ? &r.e[ord[i]] : NULL;
            if (any_more && strcmp(k, bound) > 0)
                break;
            last = k;
            last_cut = cut && (!any_more || strcmp(k, bound) < 0 || bound_cut);
            if (!real)
                continue; /* only names not ours: no key */
            if (under(k, skip, skiplen))
                continue;
            skiplen = 0;
            size_t kl = strlen(k);
            const char *slash = (s->a->flags & RIO_LIST_DELIM) && kl > s->plen
                                    ? memchr(k + s->plen, '/', kl - s->plen)
                                    : NULL;
            if (slash) {
                size_t len = (size_t)(slash - k) + 1;
                memcpy(skip, k, len);
                skip[len] = '\0';
                skiplen = len;
                if (s->sa) { /* as the scan: a common prefix not after sa */
                    size_t m = sl < len ? sl : len;
                    int c = memcmp(k, s->sa, m);
                    if ((c < 0 || (c == 0 && len <= sl)) && (from_token || c != 0))
                        continue;
                }
                memcpy(v[*n].key, k, len);
                v[*n].key[len] = '\0';
                v[*n].dir = true;
            } else {
                memcpy(v[*n].key, k, kl + 1);
                v[*n].dir = false;
            }
            v[*n].known = one && !v[*n].dir;
            if (v[*n].known) {
                v[*n].iv = one->iv;
                v[*n].gen = one->gen;
            }
            if (++*n == cap)
                full = true;
        }
        if (last)
            snprintf(resume, RIO_KEY_MAX + 1, "%s", last);
        rio__free(ord);
        if (full || !any_more)
            break;
        /* The next round starts past what this one took (and past every
         * key under the common prefix it stopped in). */
        if (skiplen) {
            char past[RIO_KEY_MAX + 1];
            rio__key_skip_past(past, skip, skiplen);
            snprintf(after, RIO_KEY_MAX + 2, "%s\x01", past);
        } else if (!idx_after(after, last ? last : bound, last ? last_cut : bound_cut)) {
            break; /* past names that nothing sorts after */
        }
    }
    ret = 0;
out:
    rio__free(r.c.arena);
    rio__free(r.c.offs);
    rio__free(r.e);
    rio__free(after);
    rio__free(bound);
    rio__free(smore);
    rio__free(slast);
    return ret;
}

static int list_sorted(struct rados_transport *t, struct lscan *s, struct rio_list_page *out)
{
    rados_ioctx_t io = t->head_io;
    rados_object_list_item *items = NULL;
    rados_object_list_cursor cur = NULL, end = NULL;
    struct sname *v = NULL;
    struct collect col = {0};
    char sa[RIO_KEY_MAX + 1];
    unsigned n = 0, cap = s->max + 1, nk = 0;
    bool from_token = s->a->token && *s->a->token;
    int ret = 0;

    if (from_token) {
        ret = rio__rados_stok_parse(s->a->token, sa);
        if (ret < 0)
            return ret;
        s->sa = sa;
    } else if (s->a->start_after && *s->a->start_after) {
        snprintf(sa, sizeof(sa), "%s", s->a->start_after);
        s->sa = sa;
    }
    ret = -ENOMEM;
    v = rio__calloc(cap, sizeof(*v));
    s->ents = rio__calloc(s->max, sizeof(*s->ents));
    s->r = rio__calloc(LIST_BATCH, sizeof(*s->r));
    if (!v || !s->ents || !s->r)
        goto out;
    bool more = false;
    char resume[RIO_KEY_MAX + 1];
    if (s->shards) {
        /* The pool's key index: a page's names, not the pool's. */
        ret = idx_names(t, s->shards, s, from_token, v, &n, cap, &more, resume);
        if (ret < 0)
            goto out;
        pthread_mutex_lock(&t->mu);
        t->ctr.list_index_pages++;
        pthread_mutex_unlock(&t->mu);
    } else if (!(from_token && snap_take(t, s, v, &n, cap))) {
        /* A later page: from the snapshot of the listing's first page, when
         * this transport made it less than SNAP_TTL_NS ago; else a scan. */
        items = rio__calloc(LIST_BATCH, sizeof(*items));
        cur = rados_object_list_begin(io);
        end = rados_object_list_end(io);
        if (!items || !cur || !end)
            goto out;
        while (!rados_object_list_is_end(io, cur)) {
            rados_object_list_cursor next = rados_object_list_begin(io);
            ret = -ENOMEM;
            if (!next)
                goto out;
            ret = rados_object_list(io, cur, end, LIST_BATCH, NULL, 0, items, &next);
            if (ret < 0) {
                rados_object_list_cursor_free(io, next);
                ret = rio__rados_xlate(ret);
                goto out;
            }
            for (unsigned i = 0; i < (unsigned)ret; i++) {
                const rados_object_list_item *it = &items[i];
                if (!under_prefix(s, it))
                    continue;
                const char *slash = (s->a->flags & RIO_LIST_DELIM)
                                        ? memchr(it->oid + s->plen, '/', it->oid_length - s->plen)
                                        : NULL;
                size_t len = slash ? (size_t)(slash - it->oid) + 1 : it->oid_length;
                collect_add(&col, it->oid, len); /* every name: the snapshot */
                if (!candidate(s, it))
                    continue;
                /* A common prefix not after start_after: shown only where a
                 * caller's start_after lies under it (it comes first then,
                 * as in byte-order listings), never again after a token. */
                if (slash && s->sa) {
                    size_t sl = strlen(s->sa), m = sl < len ? sl : len;
                    int c = memcmp(it->oid, s->sa, m);
                    if ((c < 0 || (c == 0 && len <= sl)) && (from_token || c != 0))
                        continue;
                }
                sorted_keep(v, &n, cap, it->oid, len, slash != NULL);
            }
            rados_object_list_free((size_t)ret, items);
            rados_object_list_cursor_free(io, cur);
            cur = next;
        }
        struct lsnap *sn = collect_snap(&col, s);
        memset(&col, 0, sizeof(col));
        if (sn)
            snap_publish(t, sn);
    }
    out->next_token[0] = '\0';
    if (more && n <= s->max) {
        /* The index's rounds ran out: a shorter page, on from its last
         * name (or, with none, the last key passed over). */
        const char *at = n ? v[n - 1].key : resume;
        if (!*at || rio__rados_stok_format(at, out->next_token) < 0) {
            rio__detail("rados:// list: no progress through the key index");
            ret = RIO_EPROTO;
            goto out;
        }
    } else if (n > s->max) {
        /* The page ends at its last name a token can hold (all but names
         * of over 1021 bytes): shorter, never skipping one. */
        n = s->max;
        while (n && rio__rados_stok_format(v[n - 1].key, out->next_token) < 0)
            n--;
        if (!n) {
            rio__detail("rados:// sorted list: a page of names too long for a token");
            ret = RIO_EINVAL;
            goto out;
        }
    }
    /* The heads of the page's keys, LIST_BATCH at a time. */
    for (unsigned i = 0; i < n;) {
        unsigned m = 0, from = i;
        for (; i < n && m < LIST_BATCH; i++) {
            if (v[i].dir || v[i].known)
                continue;
            memset(&s->r[m], 0, sizeof(s->r[m]));
            s->r[m++].key = v[i].key;
        }
        ret = heads_read(t, s->r, m);
        if (ret < 0)
            goto out;
        m = 0;
        for (unsigned j = from; j < i; j++) {
            struct rio_entry *e = &s->ents[nk];
            if (v[j].dir) {
                memset(e, 0, sizeof(*e));
                strcpy(e->key, v[j].key);
                e->flags = RIO_ENTRY_DIR;
                nk++;
                continue;
            }
            if (v[j].known) { /* from its index entry */
                memset(e, 0, sizeof(*e));
                strcpy(e->key, v[j].key);
                e->size = v[j].iv.size;
                e->generation = v[j].gen;
                e->mtime_ns = v[j].iv.mtime_s * 1000000000;
                memcpy(e->etag, v[j].iv.etag, sizeof(e->etag));
                nk++;
                continue;
            }
            struct hread *r = &s->r[m++];
            if (r->ret == RIO_ENOTFOUND || r->ret == RIO_EPROTO)
                continue; /* removed since, or not railio's */
            if (r->ret < 0) {
                ret = r->ret;
                goto out;
            }
            memset(e, 0, sizeof(*e));
            entry_of(e, r);
            nk++;
        }
    }
    out->entries = s->ents;
    out->n = nk;
    s->ents = NULL;
    ret = 0;
out:
    if (cur)
        rados_object_list_cursor_free(io, cur);
    if (end)
        rados_object_list_cursor_free(io, end);
    rio__free(s->ents);
    s->ents = NULL;
    rio__free(items);
    rio__free(s->r);
    s->r = NULL;
    rio__free(v);
    rio__free(col.arena);
    rio__free(col.offs);
    if (ret < 0)
        memset(out, 0, sizeof(*out));
    return ret;
}

int rio__rados_list(struct rio_transport *tt, const struct rio_list_args *a,
                    struct rio_list_page *out)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    rados_ioctx_t io = t->head_io;
    rados_object_list_item *items = NULL;
    rados_object_list_cursor cur = NULL, end = NULL;
    struct lscan s = {.t = t, .a = a};
    struct rio__rados_ltok tk;
    unsigned skip, scanned = 0, calls = 0;
    bool done = false;
    int ret;

    if (!a || !out)
        return RIO_EINVAL;
    memset(out, 0, sizeof(*out));
    s.max = a->max_keys ? a->max_keys : 1000;
    if (s.max > RIO_LIST_PAGE_MAX)
        s.max = RIO_LIST_PAGE_MAX;
    s.prefix = a->prefix ? a->prefix : "";
    s.plen = strnlen(s.prefix, RIO_KEY_MAX + 1);
    if (s.plen > RIO_KEY_MAX)
        return RIO_EINVAL;
    /* A pool whose key index is ready lists from it, in byte order, sorted
     * asked or not (a hash-order listing begun before goes on in that
     * order: its tokens are "r1-"). */
    if (!(a->token && strncmp(a->token, "r1-", 3) == 0)) {
        bool ready;
        ret = rio__rados_idx_state(t, &s.shards, &ready);
        if (ret < 0)
            return ret;
        if (!ready)
            s.shards = 0;
    }
    if ((a->flags & RIO_LIST_SORTED) || s.shards)
        return list_sorted(t, &s, out);
    if (a->token && *a->token) {
        ret = rio__rados_ltok_parse(a->token, &tk);
        if (ret < 0)
            return ret;
    } else {
        memset(&tk, 0, sizeof(tk));
        if (a->start_after && *a->start_after) {
            size_t sl = strnlen(a->start_after, RIO_KEY_MAX + 1);
            if (sl > RIO_RADOS_TOKEN_SA_MAX) {
                rio__detail("rados:// lists in hash order and carries start_after in its "
                            "tokens: at most %u bytes",
                            RIO_RADOS_TOKEN_SA_MAX);
                return RIO_EINVAL;
            }
            memcpy(tk.sa, a->start_after, sl + 1);
            tk.has_sa = true;
        }
    }
    s.sa = tk.has_sa ? tk.sa : NULL;
    skip = tk.ties;

    ret = -ENOMEM;
    s.ents = rio__calloc(s.max, sizeof(*s.ents)); /* the contract: rio__ allocator */
    items = rio__calloc(LIST_BATCH + RIO_RADOS_TIES_MAX, sizeof(*items));
    s.r = rio__calloc(LIST_BATCH, sizeof(*s.r));
    s.keys = rio__malloc(LIST_BATCH * sizeof(*s.keys));
    end = rados_object_list_end(io);
    if (!s.ents || !items || !s.r || !s.keys || !end)
        goto out;
    ret = cursor_at(io, tk.pos, &cur);
    if (ret < 0) {
        cur = NULL;
        goto out;
    }
    while (s.n < s.max && scanned < t->list_scan && calls < LIST_CALLS_MAX) {
        unsigned want = s.max - s.n;
        if (want > LIST_BATCH)
            want = LIST_BATCH;
        if (want > t->list_scan - scanned)
            want = t->list_scan - scanned;
        rados_object_list_cursor next = rados_object_list_begin(io);
        ret = -ENOMEM;
        if (!next)
            goto out;
        ret = rados_object_list(io, cur, end, want + skip, NULL, 0, items, &next);
        calls++;
        if (ret < 0) {
            rados_object_list_cursor_free(io, next);
            ret = rio__rados_xlate(ret);
            goto out;
        }
        unsigned got = (unsigned)ret;
        scanned += got > skip ? got - skip : 0;
        ret = take(&s, items, got < skip ? got : skip, got);
        rados_object_list_free(got, items);
        rados_object_list_cursor_free(io, cur);
        cur = next;
        skip = 0;
        if (ret < 0)
            goto out;
        if (rados_object_list_is_end(io, cur)) {
            done = true;
            break;
        }
    }
    if (!done) {
        /* The token: where cur is, and what at that hash came before it. */
        rados_object_list_cursor at, nx;
        ret = cursor_pos(io, cur, &tk.pos);
        if (ret == 0)
            ret = cursor_at(io, tk.pos, &at);
        if (ret < 0)
            goto out;
        nx = rados_object_list_begin(io);
        ret = nx ? rados_object_list(io, at, cur, RIO_RADOS_TIES_MAX + 1, NULL, 0, items, &nx)
                 : -ENOMEM;
        rados_object_list_cursor_free(io, at);
        if (nx)
            rados_object_list_cursor_free(io, nx);
        if (ret < 0) {
            ret = rio__rados_xlate(ret);
            goto out;
        }
        rados_object_list_free((size_t)ret, items);
        if ((unsigned)ret > RIO_RADOS_TIES_MAX) {
            rio__detail("rados:// list: more than %u objects share one 32-bit hash",
                        RIO_RADOS_TIES_MAX);
            ret = RIO_EPROTO;
            goto out;
        }
        tk.ties = (unsigned)ret;
        rio__rados_ltok_format(&tk, out->next_token);
    }
    out->entries = s.ents;
    out->n = s.n;
    s.ents = NULL;
    ret = 0;
out:
    if (cur)
        rados_object_list_cursor_free(io, cur);
    if (end)
        rados_object_list_cursor_free(io, end);
    rio__free(s.ents);
    rio__free(items);
    rio__free(s.r);
    rio__free(s.keys);
    if (ret < 0)
        memset(out, 0, sizeof(*out));
    return ret;
}
