/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: the pool's key index (docs/rados.md "The key index"). A pool
 * without one lists by scanning every name in it; once `railio fsck --index`
 * built one, a listing reads a page of names from it instead, in byte order,
 * whatever the pool holds.
 *
 * Layout, in the URL's pool, namespace "rio.index":
 *
 *   marker  object "index": "railio-index 1\nshards N\nstate S\n", S
 *           "building" (writers keep it, listings do not use it yet) or
 *           "ready" (listings use it).
 *   shards  objects "shard.I", I in 0..N-1: omap entries, one per
 *           generation of a key that is or may become a head, named
 *           KEY NUL GGGGGGGGGGGGGGGG (the generation, 16 lower-case hex
 *           digits), valued with the time it was written (16 hex digits,
 *           ns since the epoch) and, once that generation was published,
 *           " c SIZE MTIME ETAG" (itext.h). KEY goes to shard
 *           fnv1a64(KEY) mod N.
 *
 * The one rule: every head has its entry (the index holds at least the
 * heads). So a writer puts (KEY, G) before the swap that publishes head G
 * (a PUT sends it beside its chunks at put_open), and takes it out only
 * when G can no longer become a head: after G was replaced or removed, or
 * when the swap was refused. After the swap it marks the entry committed
 * (not waited for). A crash leaves an entry too many, never one too few.
 * A listing believes a key's entry when it is the key's only one and
 * committed (no other generation can be the head then, but for a removal
 * that left its entry: a crashed DELETE, `rados rm`), and reads the heads
 * of the others, skipping those that are gone; fsck removes entries that
 * no head names once they are older than its grace (at least
 * IDX_GC_MIN_NS), each on a compare of its value, which a PUT's commit
 * rewrites when its entry is older than IDX_REFRESH_NS: a slow PUT's entry
 * is never removed under it.
 *
 * Writers re-read the marker every idx_recheck_ns (URL option
 * index_recheck, 10 s), so `fsck --index` writes the marker, waits for
 * every writer to have seen it, then walks the heads and adds what is
 * missing, then marks the index ready.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
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
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/internal.h"
#include "transport/rados/itext.h"

/* ------------------------------------------------------------- the marker */

unsigned rio__rados_idx_shard(const char *key, size_t len, unsigned shards)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 0x100000001b3ull;
    return (unsigned)(h % shards);
}

int rio__rados_idx_marker_write(struct rados_transport *t, unsigned shards, bool ready, bool create)
{
    char buf[RIO_RADOS_IDX_MARKER_MAX];
    int len = rio__rados_idx_marker_format(buf, sizeof(buf), shards, ready);
    rados_write_op_t op = rados_create_write_op();
    int ret;

    if (!op)
        return -ENOMEM;
    if (create)
        rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
    rados_write_op_write_full(op, buf, (size_t)len);
    ret = rados_write_op_operate(op, t->idx_io, RIO_RADOS_IDX_MARKER, NULL, WOP_FLAGS);
    rados_release_write_op(op);
    if (ret == 0) {
        pthread_mutex_lock(&t->cache_mu);
        t->idx_checked_ns = 0; /* read it again */
        pthread_mutex_unlock(&t->cache_mu);
    }
    return ret == -EEXIST ? 1 : ret < 0 ? rio__rados_xlate(ret) : 0;
}

int rio__rados_idx_state(struct rados_transport *t, unsigned *shards, bool *ready)
{
    char buf[RIO_RADOS_IDX_MARKER_MAX];
    uint64_t now = rio__now_ns();
    unsigned n = 0;
    bool r = false;
    int ret;

    pthread_mutex_lock(&t->cache_mu);
    if (t->idx_checked_ns && now - t->idx_checked_ns < t->idx_recheck_ns) {
        *shards = t->idx_shards;
        *ready = t->idx_ready;
        pthread_mutex_unlock(&t->cache_mu);
        return 0;
    }
    pthread_mutex_unlock(&t->cache_mu);
    ret = rados_read(t->idx_io, RIO_RADOS_IDX_MARKER, buf, sizeof(buf), 0);
    if (ret == -ENOENT) {
        ret = 0;
    } else if (ret < 0) {
        rio__detail("rados:// could not read the key index's marker (%s)", strerror(-ret));
        return rio__rados_xlate(ret);
    } else {
        ret = rio__rados_idx_marker_parse(buf, (size_t)ret, &n, &r);
        if (ret < 0) {
            /* Not ours to guess at: keeping an index we cannot read could
             * leave a head out of it. Writes and listings refuse. */
            rio__detail("rados:// pool %s: the key index's marker (namespace %s, object %s) is "
                        "not one this railio reads (made by a newer one, or damaged)",
                        t->pools[t->url_pool].name, RIO_RADOS_IDX_NS, RIO_RADOS_IDX_MARKER);
            return ret;
        }
    }
    pthread_mutex_lock(&t->cache_mu);
    t->idx_shards = n;
    t->idx_ready = r;
    t->idx_checked_ns = now ? now : 1;
    pthread_mutex_unlock(&t->cache_mu);
    *shards = n;
    *ready = r;
    return 0;
}

/* ------------------------------------------------------------ the entries */

static void shard_name(char *out, size_t cap, unsigned i)
{
    snprintf(out, cap, "shard.%u", i);
}

/* Where (key, gen)'s entry lives: its omap name and its shard's object. */
struct ewhere {
    char ename[RIO_RADOS_IDX_NAME_MAX];
    size_t elen;
    char sname[24];
};

static int entry_where(const char *key, uint64_t gen, unsigned shards, struct ewhere *w)
{
    size_t keylen;
    int ret = rio__key_len(key, &keylen);

    if (ret < 0)
        return ret;
    w->elen = (size_t)rio__rados_idx_entry_name(w->ename, key, keylen, gen);
    shard_name(w->sname, sizeof(w->sname), rio__rados_idx_shard(key, keylen, shards));
    return 0;
}

static uint64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A write op setting (key, gen)'s entry, not committed, sent with comp
 * (NULL: waited for here); its value into val (17 bytes). The op is
 * released by the caller after the wait. */
static int put_op(struct rados_transport *t, unsigned shards, const char *key, uint64_t gen,
                  rados_write_op_t *opp, rados_completion_t comp, char *val)
{
    struct ewhere w;
    int ret = entry_where(key, gen, shards, &w);

    if (ret < 0)
        return ret;
    const char *k = w.ename, *v = val;
    struct rio__rados_ival iv = {.at_ns = wall_ns()};
    size_t vlen = (size_t)rio__rados_ival_format(&iv, val);
    rados_write_op_t op = rados_create_write_op();
    if (!op)
        return -ENOMEM;
    rados_write_op_omap_set2(op, &k, &v, &w.elen, &vlen, 1);
    if (comp) {
        ret = rados_aio_write_op_operate(op, t->idx_io, comp, w.sname, NULL, WOP_FLAGS);
        if (ret < 0) {
            rados_release_write_op(op);
            return rio__rados_xlate(ret);
        }
        *opp = op;
        return 0;
    }
    ret = rados_write_op_operate(op, t->idx_io, w.sname, NULL, WOP_FLAGS);
    rados_release_write_op(op);
    if (ret < 0) {
        rio__detail("rados:// could not write the key index's entry of a key (%s)", strerror(-ret));
        return rio__rados_xlate(ret);
    }
    return 0;
}

int rio__rados_idx_uncommit(struct rados_transport *t, const char *key, uint64_t gen)
{
    unsigned shards;
    bool ready;
    char val[17];
    int ret = rio__rados_idx_state(t, &shards, &ready);

    if (ret < 0 || !shards)
        return ret;
    return put_op(t, shards, key, gen, NULL, NULL, val);
}

void rio__rados_idx_open(struct rados_transport *t, struct rupload *up)
{
    unsigned shards;
    bool ready;

    if (rio__rados_idx_state(t, &shards, &ready) < 0 || !shards)
        return; /* the commit decides again */
    if (rados_aio_create_completion2(NULL, NULL, &up->idx_comp) < 0) {
        up->idx_comp = NULL;
        return;
    }
    up->idx_sent = true;
    up->idx_at_ns = rio__now_ns();
    if (put_op(t, shards, up->key, up->generation, &up->idx_op, up->idx_comp, up->idx_val) < 0) {
        rados_aio_release(up->idx_comp);
        up->idx_comp = NULL;
    }
}

void rio__rados_idx_open_wait(struct rupload *up, int *ret)
{
    if (!up || !up->idx_comp)
        return;
    rados_aio_wait_for_complete(up->idx_comp);
    if (ret)
        *ret = rados_aio_get_return_value(up->idx_comp);
    rados_aio_release(up->idx_comp);
    rados_release_write_op(up->idx_op);
    up->idx_comp = NULL;
    up->idx_op = NULL;
}

int rio__rados_idx_ensure(struct rados_transport *t, const char *key, uint64_t gen,
                          struct rupload *up, bool *wrote, char *val)
{
    unsigned shards;
    bool ready;
    int ret = rio__rados_idx_state(t, &shards, &ready);

    if (ret < 0 || !shards)
        return ret;
    if (*wrote)
        return 0;
    if (up && up->idx_comp) {
        int r = -1;
        rio__rados_idx_open_wait(up, &r);
        if (r == 0) { /* it is there (a failed renewal below still drops it) */
            memcpy(val, up->idx_val, 17);
            *wrote = true;
            if (rio__now_ns() - up->idx_at_ns < IDX_REFRESH_NS)
                return 0;
        }
    }
    /* Not sent at put_open (no index then, or it failed), or long ago:
     * (again) now, which also renews it against fsck's sweep. */
    ret = put_op(t, shards, key, gen, NULL, NULL, val);
    if (ret == 0)
        *wrote = true;
    return ret;
}

void rio__rados_idx_drop_many(struct rados_transport *t, const char *const *keys,
                              const uint64_t *gens, size_t n)
{
    struct ridx_drop d[REMOVE_WINDOW];

    /* Best effort: an entry left is skipped by listings (its head is gone
     * or another generation) and swept by fsck. */
    for (size_t b = 0; b < n; b += REMOVE_WINDOW) {
        size_t k = n - b < REMOVE_WINDOW ? n - b : REMOVE_WINDOW;
        for (size_t j = 0; j < k; j++)
            rio__rados_idx_drop_send(t, keys[b + j], gens[b + j], &d[j]);
        for (size_t j = 0; j < k; j++)
            rio__rados_idx_drop_wait(&d[j]);
    }
}

void rio__rados_idx_drop(struct rados_transport *t, const char *key, uint64_t gen)
{
    rio__rados_idx_drop_many(t, &key, &gen, 1);
}

void rio__rados_idx_drop_send(struct rados_transport *t, const char *key, uint64_t gen,
                              struct ridx_drop *p)
{
    unsigned shards;
    bool ready;
    struct ewhere w;

    memset(p, 0, sizeof(*p));
    if (!gen || rio__rados_idx_state(t, &shards, &ready) < 0 || !shards ||
        entry_where(key, gen, shards, &w) < 0)
        return;
    const char *e = w.ename;
    p->op = rados_create_write_op();
    if (!p->op)
        return;
    rados_write_op_omap_rm_keys2(p->op, &e, &w.elen, 1);
    if (rados_aio_create_completion2(NULL, NULL, &p->comp) < 0) {
        p->comp = NULL;
    } else if (rados_aio_write_op_operate(p->op, t->idx_io, p->comp, w.sname, NULL, WOP_FLAGS) <
               0) {
        rados_aio_release(p->comp);
        p->comp = NULL;
    }
    if (!p->comp) {
        rados_release_write_op(p->op);
        p->op = NULL;
    }
}

void rio__rados_idx_drop_wait(struct ridx_drop *p)
{
    if (!p->comp)
        return;
    rados_aio_wait_for_complete(p->comp);
    rados_aio_release(p->comp);
    rados_release_write_op(p->op);
    p->comp = NULL;
    p->op = NULL;
}

/* --------------------------------------------------------------- reading */

int rio__rados_idx_read_many(struct rados_transport *t, unsigned first, unsigned count,
                             const char *start_after, const char *prefix, unsigned max,
                             rio__rados_idx_each_fn each, void *arg, bool *more)
{
    struct sread {
        rados_read_op_t op;
        rados_completion_t comp;
        rados_omap_iter_t it;
        unsigned char pmore;
        int rv, ret;
    } *r = rio__calloc(count, sizeof(*r));
    char sname[24];
    int ret = 0;

    if (!r)
        return -ENOMEM;
    /* Every shard's read in flight at once, then each shard's entries in
     * shard order. */
    for (unsigned i = 0; i < count; i++) {
        r[i].ret = -ENOMEM;
        shard_name(sname, sizeof(sname), first + i);
        r[i].op = rados_create_read_op();
        if (!r[i].op)
            continue;
        rados_read_op_omap_get_vals2(r[i].op, start_after, prefix, max, &r[i].it, &r[i].pmore,
                                     &r[i].rv);
        if (rados_aio_create_completion2(NULL, NULL, &r[i].comp) < 0) {
            r[i].comp = NULL;
            continue;
        }
        r[i].ret = rados_aio_read_op_operate(r[i].op, t->idx_io, r[i].comp, sname, 0);
        if (r[i].ret < 0) {
            rados_aio_release(r[i].comp);
            r[i].comp = NULL;
        }
    }
    for (unsigned i = 0; i < count; i++) {
        if (r[i].comp) {
            rados_aio_wait_for_complete(r[i].comp);
            r[i].ret = rados_aio_get_return_value(r[i].comp);
            rados_aio_release(r[i].comp);
            if (r[i].ret == 0 && r[i].rv < 0)
                r[i].ret = r[i].rv;
        }
        more[i] = false;
        if (r[i].ret == -ENOENT) /* a shard nothing was written to yet */
            continue;
        if (r[i].ret < 0 && ret == 0) {
            rio__detail("rados:// could not read the key index (%s)", strerror(-r[i].ret));
            ret = r[i].ret == -ENOMEM ? -ENOMEM : rio__rados_xlate(r[i].ret);
        }
        if (r[i].ret < 0 || ret < 0)
            continue;
        more[i] = r[i].pmore != 0;
        for (;;) {
            char *k = NULL, *v = NULL;
            size_t kl = 0, vl = 0;
            if (rados_omap_get_next2(r[i].it, &k, &v, &kl, &vl) < 0 || !k)
                break;
            ret = each(arg, first + i, k, kl, v, vl);
            if (ret < 0)
                break;
        }
    }
    for (unsigned i = 0; i < count; i++) {
        if (r[i].it)
            rados_omap_get_end(r[i].it);
        if (r[i].op)
            rados_release_read_op(r[i].op);
    }
    rio__free(r);
    return ret;
}

#define EXISTS_PER_OP 64u /* keys asked of one shard in one read op */

int rio__rados_idx_exists(struct rados_transport *t, unsigned shards, const char *const *keys,
                          unsigned n, uint8_t *out)
{
    struct q {
        rados_omap_iter_t it;
        unsigned char pmore;
        int rv;
    } *q = rio__calloc(n ? n : 1, sizeof(*q));
    unsigned *order = rio__malloc((n ? n : 1) * sizeof(*order));
    unsigned nops = 0, *first = NULL;
    rados_read_op_t *ops = NULL;
    rados_completion_t *comps = NULL;
    char sname[24];
    int ret = -ENOMEM;

    if (!q || !order)
        goto out;
    /* The keys grouped by shard: a read op asks one shard about up to
     * EXISTS_PER_OP of them, each its first two entries under the key
     * after the key itself (its entries, KEY NUL GEN, sort first). */
    unsigned k = 0;
    for (unsigned sh = 0; sh < shards; sh++)
        for (unsigned i = 0; i < n; i++)
            if (rio__rados_idx_shard(keys[i], strlen(keys[i]), shards) == sh)
                order[k++] = i;
    unsigned maxops = n / EXISTS_PER_OP + shards + 1;
    ops = rio__calloc(maxops, sizeof(*ops));
    comps = rio__calloc(maxops, sizeof(*comps));
    first = rio__calloc(maxops + 1, sizeof(*first));
    if (!ops || !comps || !first)
        goto out;
    for (unsigned i = 0; i < n;) {
        unsigned sh = rio__rados_idx_shard(keys[order[i]], strlen(keys[order[i]]), shards), m = 0;
        rados_read_op_t op = rados_create_read_op();
        if (!op)
            goto wait;
        first[nops] = i;
        for (; i < n && m < EXISTS_PER_OP &&
               rio__rados_idx_shard(keys[order[i]], strlen(keys[order[i]]), shards) == sh;
             i++, m++) {
            struct q *x = &q[order[i]];
            rados_read_op_omap_get_vals2(op, keys[order[i]], keys[order[i]], 2, &x->it, &x->pmore,
                                         &x->rv);
        }
        first[nops + 1] = i;
        ops[nops] = op;
        shard_name(sname, sizeof(sname), sh);
        if (rados_aio_create_completion2(NULL, NULL, &comps[nops]) < 0) {
            comps[nops] = NULL;
            nops++;
            goto wait;
        }
        if (rados_aio_read_op_operate(op, t->idx_io, comps[nops], sname, 0) < 0) {
            rados_aio_release(comps[nops]);
            comps[nops] = NULL;
            nops++;
            goto wait;
        }
        nops++;
    }
    ret = 0;
wait:
    for (unsigned o = 0; o < nops; o++) {
        int r = -EIO;
        if (comps[o]) {
            rados_aio_wait_for_complete(comps[o]);
            r = rados_aio_get_return_value(comps[o]);
            rados_aio_release(comps[o]);
        }
        for (unsigned j = first[o]; ret == 0 && j < first[o + 1]; j++) {
            unsigned i = order[j];
            size_t kl = strlen(keys[i]);
            out[i] = 2;         /* read its head */
            if (r == -ENOENT) { /* a shard nobody wrote to: no entry */
                out[i] = 0;
                continue;
            }
            if (r < 0 || q[i].rv < 0)
                continue;
            unsigned found = 0, other = 0;
            bool committed = false, past = false;
            for (;;) {
                char *en = NULL, *v = NULL;
                size_t el = 0, vl = 0;
                struct rio__rados_ival iv;
                size_t ekl;
                uint64_t eg;
                if (rados_omap_get_next2(q[i].it, &en, &v, &el, &vl) < 0 || !en)
                    break;
                if (el <= kl || memcmp(en, keys[i], kl) != 0 || en[kl] != '\0') {
                    past = true; /* another key's: the key's names sort first */
                    break;
                }
                if (rio__rados_idx_entry_split(en, el, &ekl, &eg) < 0) {
                    other++; /* KEY NUL and not ours: decide on the head */
                    continue;
                }
                found++;
                committed = rio__rados_ival_parse(v, vl, &iv) == 0 && iv.committed;
            }
            bool all = past || !q[i].pmore; /* every name of the key was read */
            if (!found && !other && all)
                out[i] = 0; /* no entry: no head (the index holds every head) */
            else if (found == 1 && !other && committed && all)
                out[i] = 1; /* believed, as a listing believes it */
        }
        for (unsigned j = first[o]; j < first[o + 1]; j++)
            if (q[order[j]].it)
                rados_omap_get_end(q[order[j]].it);
        rados_release_read_op(ops[o]);
    }
    if (ret < 0)
        for (unsigned i = 0; i < n; i++)
            out[i] = 2;
    ret = 0;
out:
    rio__free(q);
    rio__free(order);
    rio__free(ops);
    rio__free(comps);
    rio__free(first);
    return ret;
}

/* A write op setting w's entry to iv's value, only while its value is
 * was[0..waslen) when was is not NULL; NULL when it cannot be made. */
static rados_write_op_t set_op(const struct ewhere *w, const struct rio__rados_ival *iv,
                               const char *was, size_t waslen)
{
    char val[RIO_RADOS_IDX_VAL_MAX];
    int vl = rio__rados_ival_format(iv, val);
    rados_write_op_t op = vl < 0 ? NULL : rados_create_write_op();

    if (!op)
        return NULL;
    const char *k = w->ename, *v = val;
    size_t vlen = (size_t)vl;
    if (was)
        rados_write_op_omap_cmp2(op, w->ename, LIBRADOS_CMPXATTR_OP_EQ, was, w->elen, waslen, NULL);
    rados_write_op_omap_set2(op, &k, &v, &w->elen, &vlen, 1); /* the op copies them */
    return op;
}

int rio__rados_idx_set(struct rados_transport *t, unsigned shards, const char *key, uint64_t gen,
                       const struct rio__rados_ival *iv, const char *was, size_t waslen)
{
    struct ewhere w;
    int ret = entry_where(key, gen, shards, &w);

    if (ret < 0)
        return ret;
    rados_write_op_t op = set_op(&w, iv, was, waslen);
    if (!op)
        return -ENOMEM;
    ret = rados_write_op_operate(op, t->idx_io, w.sname, NULL, WOP_FLAGS);
    rados_release_write_op(op);
    if (was && (ret == -ECANCELED || ret == -ENOENT))
        return RIO_EGENERATION;
    return ret < 0 ? rio__rados_xlate(ret) : 0;
}

/* ------------------------------------------------------------ committed */

static void mark_release(struct rmark *m)
{
    rados_aio_wait_for_complete(m->comp);
    rados_aio_release(m->comp);
    rados_release_write_op(m->op);
}

/* Release the marks that completed; under t->mu (never waits: librados'
 * threads take t->mu to deliver chunk completions). */
static void marks_reap(struct rados_transport *t)
{
    unsigned k = 0;
    for (unsigned i = 0; i < t->nmarks; i++) {
        if (rados_aio_is_complete(t->marks[i].comp))
            mark_release(&t->marks[i]);
        else
            t->marks[k++] = t->marks[i];
    }
    t->nmarks = k;
}

void rio__rados_idx_marks_wait(struct rados_transport *t)
{
    for (unsigned i = 0; i < t->nmarks; i++) /* at close: nobody else */
        mark_release(&t->marks[i]);
    t->nmarks = 0;
}

void rio__rados_idx_mark(struct rados_transport *t, const char *key, uint64_t gen,
                         const char *pending, uint64_t size, int64_t mtime_s, const char *etag)
{
    struct rio__rados_ival iv = {
        .at_ns = wall_ns(), .committed = true, .size = size, .mtime_s = mtime_s};
    unsigned shards;
    bool ready;
    struct ewhere w;

    snprintf(iv.etag, sizeof(iv.etag), "%s", etag ? etag : "");
    if (rio__rados_idx_state(t, &shards, &ready) < 0 || !shards ||
        entry_where(key, gen, shards, &w) < 0)
        return; /* the entry stays as written: listings read its head */
    struct rmark m;
    /* Only over the entry as this writer wrote it: one dropped meanwhile
     * (the object replaced or removed already) is not written again. */
    m.op = set_op(&w, &iv, pending, strlen(pending));
    if (!m.op)
        return;
    if (rados_aio_create_completion2(NULL, NULL, &m.comp) < 0) {
        rados_release_write_op(m.op);
        return;
    }
    if (rados_aio_write_op_operate(m.op, t->idx_io, m.comp, w.sname, NULL, WOP_FLAGS) < 0) {
        rados_aio_release(m.comp);
        rados_release_write_op(m.op);
        return;
    }
    /* Nobody waits for it: released once complete (at the latest when
     * IDX_MARKS are in flight, or at close). */
    struct rmark oldest = {0};
    pthread_mutex_lock(&t->mu);
    marks_reap(t);
    if (t->nmarks == IDX_MARKS) {
        oldest = t->marks[0];
        memmove(&t->marks[0], &t->marks[1], (IDX_MARKS - 1) * sizeof(t->marks[0]));
        t->nmarks--;
    }
    t->marks[t->nmarks++] = m;
    pthread_mutex_unlock(&t->mu);
    if (oldest.comp)
        mark_release(&oldest); /* waited for outside the lock */
}

int rio__rados_idx_rm_if(struct rados_transport *t, unsigned shards, const char *key, uint64_t gen,
                         const char *val, size_t vlen)
{
    struct ewhere w;
    int ret = entry_where(key, gen, shards, &w);

    if (ret < 0)
        return ret;
    const char *e = w.ename;
    rados_write_op_t op = rados_create_write_op();
    if (!op)
        return -ENOMEM;
    rados_write_op_omap_cmp2(op, w.ename, LIBRADOS_CMPXATTR_OP_EQ, val, w.elen, vlen, NULL);
    rados_write_op_omap_rm_keys2(op, &e, &w.elen, 1);
    ret = rados_write_op_operate(op, t->idx_io, w.sname, NULL, WOP_FLAGS);
    rados_release_write_op(op);
    if (ret == -ECANCELED || ret == -ENOENT)
        return RIO_EGENERATION; /* renewed or gone meanwhile */
    return ret < 0 ? rio__rados_xlate(ret) : 0;
}
