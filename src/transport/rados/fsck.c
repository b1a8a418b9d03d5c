/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: rio_fsck, the sweep of orphan chunk objects (docs/rados.md
 * "Orphans and fsck"). A chunk object KEY.G.I is an orphan when the head
 * KEY does not name generation G: an upload that was killed, one that lost
 * a race and whose cleanup failed, a replaced or deleted generation whose
 * removal failed. An upload in progress looks the same, so:
 *
 *   1. every head's generation is read (xattr rio.gen) before any chunk is
 *      listed; a head that cannot be read keeps every chunk of its key; a
 *      version 2 head (a composed object) is read whole, and every chunk
 *      it lists is live, whatever key its name carries (a composed
 *      object's chunks keep the names they were written under) and
 *      whatever its rio.gen says; a head whose chunks cannot be known (a
 *      version 2 that does not parse, a first line of no version this
 *      railio reads) fails the check;
 *   2. the chunks no head names are grouped by generation and stat'ed; a
 *      generation is young, and kept whole, while its newest chunk was
 *      written within the grace: an upload that goes on writing never
 *      loses a chunk, however long it runs;
 *   3. just before a generation goes, its key's head is read again: a head
 *      committed meanwhile keeps it. Generations go REMOVE_WINDOW at a
 *      time: their heads read in parallel, then their chunks removed.
 *
 * Memory: one record per head (its key) and one per orphan (its name).
 * Round trips: aio, REMOVE_WINDOW in flight (getxattr, stat, remove).
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/head.h"
#include "transport/rados/internal.h"

#define GEN_HEX 16u
#define MAGIC_LEN (sizeof(RIO_RADOS_HEAD_MAGIC2 "\n") - 1)

struct fhead {
    char *key;
    size_t keylen;
    uint64_t gen; /* 0: the head could not be read (err): its chunks stay */
    int err;
};

struct fchunk {
    struct rstat st; /* first (rio__rados_stat_many); the key: st.name's first keylen bytes */
    size_t keylen;
    uint64_t gen, index;
};

struct fscan {
    struct rados_transport *t;
    const struct rio_fsck_args *a;
    struct rio_fsck_report *r;
    struct fhead *heads;
    size_t nheads, capheads;
    /* The chunk names version 2 heads list (sorted after the scan): live
     * whatever key their name carries. */
    char **live;
    size_t nlive, caplive;
    struct fchunk *c;
    size_t n, cap;
    /* heads_scan: names listed, their rio.gen not read yet */
    char *hnames[REMOVE_WINDOW];
    size_t hlens[REMOVE_WINDOW], hn;
    char *tops; /* REMOVE_WINDOW x RIO_RADOS_HEAD_TOP: each head's first bytes */
};

/* Room for one more element in *p (of *cap, elem bytes each): 0 or -ENOMEM. */
static int grow(void **p, size_t *cap, size_t n, size_t elem)
{
    size_t ncap;
    void *q;

    if (n < *cap)
        return 0;
    ncap = *cap ? *cap * 2 : 256;
    if (ncap > SIZE_MAX / elem)
        return -ENOMEM;
    q = rio__realloc(*p, ncap * elem);
    if (!q)
        return -ENOMEM;
    *p = q;
    *cap = ncap;
    return 0;
}

/* Keys in byte order, a shorter one first when it is a prefix. */
static int key_cmp(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int head_cmp(const void *x, const void *y)
{
    const struct fhead *a = x, *b = y;
    return key_cmp(a->key, a->keylen, b->key, b->keylen);
}

static const struct fhead *head_find(const struct fscan *s, const char *key, size_t keylen)
{
    struct fhead probe = {.key = (char *)key, .keylen = keylen};
    if (!s->nheads)
        return NULL;
    return bsearch(&probe, s->heads, s->nheads, sizeof(*s->heads), head_cmp);
}

/* By key, generation, pool, index: a generation's chunks side by side. */
static int chunk_cmp(const void *x, const void *y)
{
    const struct fchunk *a = x, *b = y;
    int c = key_cmp(a->st.name, a->keylen, b->st.name, b->keylen);

    if (c)
        return c;
    if (a->gen != b->gen)
        return a->gen < b->gen ? -1 : 1;
    if (a->st.pool != b->st.pool)
        return a->st.pool < b->st.pool ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* The generation in a head's rio.gen value (r bytes read, or an error):
 * > 0, 0 when the object is no railio head (or is gone), < 0 on error. */
static int64_t gen_of(int r, const char *buf, uint64_t *gen)
{
    if (r == -ENOENT || r == -ENODATA)
        return 0;
    if (r < 0)
        return r;
    *gen = 0;
    if (r != (int)GEN_HEX || !rio__rados_hex16(buf, gen) || *gen == 0)
        return 0;
    return 1;
}

/* ------------------------------------------------------------- the heads */

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* A version 2 head (a composed object): its chunk names are live. A head
 * that cannot be read, or that says version 2 and does not parse, fails
 * the check (which chunks it keeps is not known: any key's, and every one
 * removed would be lost to a repair of the head); one gone meanwhile
 * names nothing. Its generation in *gen. */
static int head_v2(struct fscan *s, const char *key, uint64_t *gen)
{
    struct rio__rados_head h;
    int ret = rio__rados_head_read(s->t, key, &h, NULL);

    if (ret == RIO_ENOTFOUND)
        return 0;
    if (ret == RIO_EPROTO) {
        rio__detail("the head of '%s' says it is a composed object (railio-rados-head 2) but "
                    "does not parse: which chunks it keeps is not known, so nothing is removed "
                    "until it is repaired or removed",
                    key);
        return ret;
    }
    if (ret < 0) {
        rio__detail("reading the head of '%s' failed: %s", key, rio_errname(ret));
        return ret;
    }
    *gen = h.generation;
    for (uint64_t i = 0; i < h.nchunks && h.names && ret == 0; i++) {
        ret = grow((void **)&s->live, &s->caplive, s->nlive, sizeof(*s->live));
        if (ret == 0 && !(s->live[s->nlive] = rio__strdup(h.names[i])))
            ret = -ENOMEM;
        if (ret == 0)
            s->nlive++;
    }
    rio__rados_head_cleanup(&h);
    return ret;
}

/* Read rio.gen of names[0..n) in parallel and keep the heads (the names'
 * ownership passes to s->heads or is freed). */
static int heads_flush(struct fscan *s, char **names, size_t *lens, size_t n)
{
    rados_completion_t comp[REMOVE_WINDOW], mcomp[REMOVE_WINDOW];
    char buf[REMOVE_WINDOW][GEN_HEX + 1];
    int sent[REMOVE_WINDOW], msent[REMOVE_WINDOW];
    int ret = 0;

    if (!s->tops && !(s->tops = rio__malloc((size_t)REMOVE_WINDOW * RIO_RADOS_HEAD_TOP))) {
        for (size_t i = 0; i < n; i++)
            rio__free(names[i]);
        return -ENOMEM;
    }

    /* Each head's rio.gen, and its first lines (the generation its text
     * says, what a GET believes): a version 2 head is read whole for the
     * chunks it lists. */
    for (size_t i = 0; i < n; i++) {
        sent[i] = rados_aio_create_completion2(NULL, NULL, &comp[i]);
        if (sent[i] == 0) {
            sent[i] = rados_aio_getxattr(s->t->head_io, names[i], comp[i], RIO_RADOS_GEN_XATTR,
                                         buf[i], sizeof(buf[i]));
            if (sent[i] < 0)
                rados_aio_release(comp[i]);
        }
        msent[i] = rados_aio_create_completion2(NULL, NULL, &mcomp[i]);
        if (msent[i] == 0) {
            msent[i] = rados_aio_read(s->t->head_io, names[i], mcomp[i],
                                      s->tops + i * RIO_RADOS_HEAD_TOP, RIO_RADOS_HEAD_TOP, 0);
            if (msent[i] < 0)
                rados_aio_release(mcomp[i]);
        }
    }
    for (size_t i = 0; i < n; i++) {
        int r = sent[i], mr = msent[i];
        uint64_t gen = 0;
        if (r == 0) {
            rados_aio_wait_for_complete(comp[i]);
            r = rados_aio_get_return_value(comp[i]);
            rados_aio_release(comp[i]);
        }
        if (mr == 0) {
            rados_aio_wait_for_complete(mcomp[i]);
            mr = rados_aio_get_return_value(mcomp[i]);
            rados_aio_release(mcomp[i]);
        }
        const char *top = s->tops + i * RIO_RADOS_HEAD_TOP;
        struct rio__rados_head sum;
        int herr = 0;
        int64_t k = gen_of(r, buf[i], &gen);
        if (k > 0 && ret == 0 && mr < 0 && mr != -ENOENT)
            k = mr; /* its first line unknown: keep every chunk of its key */
        if (k >= 0 && mr > 0 && rio__rados_head_summary(top, (size_t)mr, names[i], &sum) == 0 &&
            (k == 0 || sum.generation != gen)) {
            /* A head whose text (what GET and lookups read) names another
             * generation than its rio.gen, or has none: not railio's
             * doing. Which chunks are live is not known: every chunk of
             * its key is kept, and counted an error (the text's chunks
             * were removed, and the object GET served was lost). */
            rio__detail("the head of '%s' says generation %016" PRIx64
                        " but its rio.gen xattr %s: kept, not railio's doing",
                        names[i], sum.generation, k ? "says another" : "is missing");
            k = -1;
            herr = RIO_EPROTO;
        }
        /* A head (by its rio.gen) whose first line is neither version:
         * a newer railio's (which may list any key's chunks, as version 2
         * does), or a damaged one (a version 2 whose chunks would all be
         * lost to a repair). Which chunks it keeps is not known. */
        if (k != 0 && ret == 0 && mr >= 0 &&
            !(mr >= (int)MAGIC_LEN && (memcmp(top, RIO_RADOS_HEAD_MAGIC "\n", MAGIC_LEN) == 0 ||
                                       memcmp(top, RIO_RADOS_HEAD_MAGIC2 "\n", MAGIC_LEN) == 0))) {
            rio__detail("the object '%s' has a rio.gen but its first line is no head version this "
                        "railio reads (a newer railio's, or damaged): which chunks it keeps is "
                        "not known, so nothing is removed until it is repaired or removed",
                        names[i]);
            ret = RIO_EPROTO;
        }
        /* A composed head's chunks are live whatever its rio.gen says: a
         * GET reads its text only, so one whose rio.gen is missing or
         * disagrees (kept above as an error) still serves them. */
        if (k != 0 && ret == 0 && mr >= (int)MAGIC_LEN &&
            memcmp(top, RIO_RADOS_HEAD_MAGIC2 "\n", MAGIC_LEN) == 0) {
            uint64_t text_gen = gen;
            ret = head_v2(s, names[i], &text_gen);
            if (k > 0)
                gen = text_gen;
        }
        if (k == 0 || ret < 0) {
            rio__free(names[i]); /* no head: its chunks, if any, are orphans */
            continue;
        }
        ret = grow((void **)&s->heads, &s->capheads, s->nheads, sizeof(*s->heads));
        if (ret < 0) {
            rio__free(names[i]);
            continue;
        }
        s->heads[s->nheads++] = (struct fhead){.key = names[i],
                                               .keylen = lens[i],
                                               .gen = k > 0 ? gen : 0,
                                               .err = herr    ? herr
                                                      : k < 0 ? rio__rados_xlate((int)k)
                                                              : 0};
        if (k > 0)
            s->r->heads++;
    }
    return ret;
}

/* Every object io lists (name, locator length): fn(s, pool, ...) for each
 * until one fails. A listing that fails fails the whole check (what: the
 * objects, for the message): a head it missed would lose its chunks. */
static int each_object(struct fscan *s, rados_ioctx_t io, int pool, const char *what,
                       int (*fn)(struct fscan *s, int pool, const char *name, size_t len,
                                 size_t loclen))
{
    rados_list_ctx_t ctx;
    int ret;

    ret = rados_nobjects_list_open(io, &ctx);
    if (ret < 0)
        return rio__rados_xlate(ret);
    for (;;) {
        const char *entry, *loc, *ns;
        size_t elen = 0, llen = 0, nslen = 0;
        ret = rados_nobjects_list_next2(ctx, &entry, &loc, &ns, &elen, &llen, &nslen);
        if (ret == -ENOENT) {
            ret = 0;
            break;
        }
        if (ret < 0) {
            ret = rio__rados_xlate(ret);
            rio__detail("listing %s failed: %s", what, rio_errname(ret));
            break;
        }
        ret = fn(s, pool, entry, elen, llen);
        if (ret < 0)
            break;
    }
    rados_nobjects_list_close(ctx);
    return ret;
}

/* One listed name of the heads' namespace: batched for heads_flush. */
static int head_seen(struct fscan *s, int pool, const char *name, size_t len, size_t loclen)
{
    (void)pool;
    if (len == 0 || len > RIO_KEY_MAX || memchr(name, '\0', len) || loclen > 0)
        return 0; /* not a key: no head */
    char *k = rio__malloc(len + 1);
    if (!k)
        return -ENOMEM;
    memcpy(k, name, len);
    k[len] = '\0';
    s->hnames[s->hn] = k;
    s->hlens[s->hn++] = len;
    if (s->hn < REMOVE_WINDOW)
        return 0;
    size_t n = s->hn;
    s->hn = 0;
    return heads_flush(s, s->hnames, s->hlens, n);
}

/* Every object of the URL's pool (namespace "") whose rio.gen is a
 * generation: the heads, sorted by key. */
static int heads_scan(struct fscan *s)
{
    int ret = each_object(s, s->t->head_io, 0, "the heads of the pool", head_seen);
    size_t n = s->hn;

    s->hn = 0;
    if (ret < 0)
        for (size_t i = 0; i < n; i++)
            rio__free(s->hnames[i]);
    else
        ret = heads_flush(s, s->hnames, s->hlens, n);
    if (ret == 0 && s->nheads > 1)
        qsort(s->heads, s->nheads, sizeof(*s->heads), head_cmp);
    if (ret == 0 && s->nlive > 1)
        qsort(s->live, s->nlive, sizeof(*s->live), name_cmp);
    return ret;
}

/* ------------------------------------------------------------ the chunks */

static void report(struct fscan *s, const struct fchunk *c, int verdict, int err)
{
    struct rio_fsck_item it;
    char key[RIO_KEY_MAX + 1];

    switch (verdict) {
    case RIO_FSCK_REMOVED:
    case RIO_FSCK_WOULD_REMOVE:
        s->r->removed++;
        s->r->bytes_freed += c->st.size;
        break;
    case RIO_FSCK_YOUNG:
        s->r->young++;
        break;
    case RIO_FSCK_RACED:
        s->r->raced++;
        break;
    default:
        s->r->errors++;
        break;
    }
    s->r->orphans++;
    if (!s->a->each)
        return;
    memcpy(key, c->st.name, c->keylen);
    key[c->keylen] = '\0';
    it = (struct rio_fsck_item){.where = s->t->pools[c->st.pool].name,
                                .name = c->st.name,
                                .key = key,
                                .generation = c->gen,
                                .bytes = c->st.size,
                                .mtime_ns = (int64_t)c->st.mtime * 1000000000LL,
                                .verdict = verdict,
                                .err = err};
    s->a->each(s->a->arg, &it);
}

/* One listed name of the chunk namespace: counted, and kept as a candidate
 * when no head names its generation. */
static int chunk_seen(struct fscan *s, int pool, const char *name, size_t len)
{
    struct fchunk c = {.st.pool = pool};
    const struct fhead *h;

    if (rio__rados_chunk_name_split(name, len, &c.keylen, &c.gen, &c.index) < 0) {
        s->r->foreign++; /* not a name railio writes: never touched */
        return 0;
    }
    s->r->chunks++;
    h = head_find(s, name, c.keylen);
    if (h && h->gen == c.gen)
        return 0; /* the head's own */
    c.st.name = rio__malloc(len + 1);
    if (!c.st.name)
        return -ENOMEM;
    memcpy(c.st.name, name, len);
    c.st.name[len] = '\0';
    if (s->nlive && bsearch(&c.st.name, s->live, s->nlive, sizeof(*s->live), name_cmp)) {
        rio__free(c.st.name); /* a composed object's */
        return 0;
    }
    if (h && h->gen == 0) { /* its head could not be read: kept */
        report(s, &c, RIO_FSCK_FAILED, h->err);
        rio__free(c.st.name);
        return 0;
    }
    if (grow((void **)&s->c, &s->cap, s->n, sizeof(*s->c)) < 0) {
        rio__free(c.st.name);
        return -ENOMEM;
    }
    s->c[s->n++] = c;
    return 0;
}

/* A listed object of the chunk namespace: one with a locator is not
 * railio's. */
static int chunk_listed(struct fscan *s, int pool, const char *name, size_t len, size_t loclen)
{
    if (loclen > 0) {
        s->r->foreign++;
        return 0;
    }
    return chunk_seen(s, pool, name, len);
}

static int chunks_scan(struct fscan *s, int pool)
{
    char what[160];

    snprintf(what, sizeof(what), "the chunk objects of pool '%s'", s->t->pools[pool].name);
    return each_object(s, s->t->pools[pool].io[0], pool, what, chunk_listed);
}

/* Size and mtime of n objects, REMOVE_WINDOW at a time; each begins a
 * record of stride bytes from base. Each one's err: 0, -ENOENT (gone) or
 * the error. */
void rio__rados_stat_many(struct rados_transport *t, void *base, size_t n, size_t stride)
{
    rados_completion_t comp[REMOVE_WINDOW];
    int sent[REMOVE_WINDOW];

    for (size_t b = 0; b < n; b += REMOVE_WINDOW) {
        size_t k = n - b < REMOVE_WINDOW ? n - b : REMOVE_WINDOW;
        for (size_t j = 0; j < k; j++) {
            struct rstat *c = (struct rstat *)((char *)base + (b + j) * stride);
            sent[j] = rados_aio_create_completion2(NULL, NULL, &comp[j]);
            if (sent[j] == 0) {
                sent[j] =
                    rados_aio_stat(t->pools[c->pool].io[0], c->name, comp[j], &c->size, &c->mtime);
                if (sent[j] < 0)
                    rados_aio_release(comp[j]);
            }
        }
        for (size_t j = 0; j < k; j++) {
            struct rstat *c = (struct rstat *)((char *)base + (b + j) * stride);
            int r = sent[j];
            if (r == 0) {
                rados_aio_wait_for_complete(comp[j]);
                r = rados_aio_get_return_value(comp[j]);
                rados_aio_release(comp[j]);
            }
            c->err = r < 0 ? (r == -ENOENT ? r : rio__rados_xlate(r)) : 0;
        }
    }
}

/* ------------------------------------------------------- the generations */

/* One (key, generation) of candidates, judged with others in a batch. */
struct fgen {
    struct fchunk *c; /* its chunks, c[0..n) */
    size_t n, live;   /* live: not gone meanwhile */
    char *key;        /* NUL-terminated, for the head read */
    int verdict;      /* 0 until judged */
    int err;
    int sent;
    rados_completion_t comp;
    char buf[GEN_HEX + 1];
};

/* Without a round trip: gone, failed to stat, or young. */
static void gen_judge(const struct fscan *s, struct fgen *g, int64_t now_ns)
{
    time_t newest = 0;

    for (size_t i = 0; i < g->n; i++) {
        if (g->c[i].st.err == -ENOENT)
            continue; /* removed meanwhile (its writer's cleanup): not an orphan */
        g->live++;
        if (g->c[i].st.err < 0 && !g->err)
            g->err = g->c[i].st.err;
        if (g->c[i].st.mtime > newest)
            newest = g->c[i].st.mtime;
    }
    /* mtime has whole seconds: a chunk of mtime T was written before T + 1.
     * A grace of 0 protects nothing, not even what was written this second. */
    int64_t written_ns = ((int64_t)newest + 1) * 1000000000LL;
    if (g->err)
        g->verdict = RIO_FSCK_FAILED;
    else if (s->a->grace_ns &&
             (now_ns < written_ns || (uint64_t)(now_ns - written_ns) < s->a->grace_ns))
        g->verdict = RIO_FSCK_YOUNG;
}

/* The generations g[0..ng): judged, the heads of the old ones read again
 * (in parallel), their chunks removed (REMOVE_WINDOW in flight across
 * generations), each chunk reported. */
static void sweep_batch(struct fscan *s, struct fgen *g, size_t ng, int64_t now_ns)
{
    struct rm_item *items = NULL;
    size_t nitems = 0;

    for (size_t i = 0; i < ng; i++) {
        gen_judge(s, &g[i], now_ns);
        if (!g[i].live || g[i].verdict)
            continue;
        g[i].key = rio__malloc(g[i].c[0].keylen + 1);
        g[i].sent = g[i].key ? rados_aio_create_completion2(NULL, NULL, &g[i].comp) : -ENOMEM;
        if (g[i].sent == 0) {
            memcpy(g[i].key, g[i].c[0].st.name, g[i].c[0].keylen);
            g[i].key[g[i].c[0].keylen] = '\0';
            g[i].sent = rados_aio_getxattr(s->t->head_io, g[i].key, g[i].comp, RIO_RADOS_GEN_XATTR,
                                           g[i].buf, sizeof(g[i].buf));
            if (g[i].sent < 0)
                rados_aio_release(g[i].comp);
        }
        if (g[i].sent < 0) {
            g[i].verdict = RIO_FSCK_FAILED;
            g[i].err = rio__rados_xlate(g[i].sent);
        }
    }
    for (size_t i = 0; i < ng; i++) {
        if (!g[i].live || g[i].verdict)
            continue;
        rados_aio_wait_for_complete(g[i].comp);
        int r = rados_aio_get_return_value(g[i].comp);
        rados_aio_release(g[i].comp);
        uint64_t head_gen = 0;
        int64_t k = gen_of(r, g[i].buf, &head_gen);
        if (k < 0) {
            g[i].verdict = RIO_FSCK_FAILED;
            g[i].err = rio__rados_xlate((int)k);
        } else if (k > 0 && head_gen == g[i].c[0].gen) {
            g[i].verdict = RIO_FSCK_RACED; /* committed meanwhile */
        } else if (s->a->flags & RIO_FSCK_DRY_RUN) {
            g[i].verdict = RIO_FSCK_WOULD_REMOVE;
        } else {
            g[i].verdict = RIO_FSCK_REMOVED;
            nitems += g[i].live;
        }
    }
    if (nitems) {
        items = rio__calloc(nitems, sizeof(*items));
        nitems = 0;
        for (size_t i = 0; i < ng; i++) {
            if (g[i].verdict != RIO_FSCK_REMOVED)
                continue;
            if (!items) {
                g[i].verdict = RIO_FSCK_FAILED;
                g[i].err = -ENOMEM;
                continue;
            }
            for (size_t j = 0; j < g[i].n; j++)
                if (g[i].c[j].st.err != -ENOENT)
                    items[nitems++] =
                        (struct rm_item){.name = g[i].c[j].st.name, .pool = g[i].c[j].st.pool};
        }
        if (items)
            rio__rados_remove_chunks(s->t, NULL, 0, items, nitems, NULL);
    }
    nitems = 0;
    for (size_t i = 0; i < ng; i++) {
        for (size_t j = 0; j < g[i].n; j++) {
            struct fchunk *c = &g[i].c[j];
            if (c->st.err == -ENOENT)
                continue;
            if (g[i].verdict == RIO_FSCK_REMOVED && items[nitems++].ret < 0)
                report(s, c, RIO_FSCK_FAILED, rio__rados_xlate(items[nitems - 1].ret));
            else
                report(s, c, g[i].verdict,
                       g[i].verdict == RIO_FSCK_FAILED ? (c->st.err ? c->st.err : g[i].err) : 0);
        }
        rio__free(g[i].key);
    }
    rio__free(items);
}

/* ------------------------------------------------------- the key index */

struct ientry {
    char *key;
    size_t keylen;
    uint64_t gen;
    char val[RIO_RADOS_IDX_VAL_MAX];
    size_t vlen;
};

struct iwalk {
    struct ientry *e;
    size_t n, cap;
    char last[RIO_KEY_MAX + 1]; /* the shard's last entry read: its key, generation */
    uint64_t last_gen;
    /* The last name read, railio's or not, up to its NUL (at most a key's
     * length): where the shard's walk got to. */
    char raw[RIO_KEY_MAX + 1];
    bool raw_cut; /* raw is the first RIO_KEY_MAX bytes of a longer name */
};

static int iwalk_each(void *arg, unsigned shard, const char *name, size_t len, const char *val,
                      size_t vlen)
{
    struct iwalk *w = arg;
    (void)shard;
    size_t kl;
    uint64_t gen;
    int ret;

    const char *nul = memchr(name, '\0', len);
    size_t rl = nul ? (size_t)(nul - name) : len;
    w->raw_cut = rl > RIO_KEY_MAX;
    if (w->raw_cut)
        rl = RIO_KEY_MAX;
    memcpy(w->raw, name, rl);
    w->raw[rl] = '\0';
    if (rio__rados_idx_entry_split(name, len, &kl, &gen) < 0)
        return 0; /* not ours: left alone */
    int c = key_cmp(name, kl, w->last, strlen(w->last));
    if (c < 0 || (c == 0 && gen <= w->last_gen))
        return 0; /* read before: the page began at this key again */
    ret = grow((void **)&w->e, &w->cap, w->n, sizeof(*w->e));
    if (ret < 0)
        return ret;
    char *k = rio__malloc(kl + 1);
    if (!k)
        return -ENOMEM;
    memcpy(k, name, kl);
    k[kl] = '\0';
    struct ientry *e = &w->e[w->n++];
    *e = (struct ientry){.key = k, .keylen = kl, .gen = gen};
    e->vlen =
        vlen < sizeof(e->val) ? vlen : sizeof(e->val); /* longer: not ours, compares unequal */
    memcpy(e->val, val, e->vlen);
    memcpy(w->last, k, kl + 1);
    w->last_gen = gen;
    return 0;
}

static int ientry_cmp(const void *x, const void *y)
{
    const struct ientry *a = x, *b = y;
    int c = key_cmp(a->key, a->keylen, b->key, b->keylen);
    return c ? c : (a->gen > b->gen) - (a->gen < b->gen);
}

/* Every entry of the index's shards, sorted by key and generation. */
static int index_read_all(struct fscan *s, unsigned shards, struct iwalk *w)
{
    char after[RIO_KEY_MAX + 2];

    for (unsigned sh = 0; sh < shards; sh++) {
        w->last[0] = '\0';
        w->last_gen = 0;
        after[0] = '\0';
        for (;;) {
            bool more = false;
            /* From the last name read, up to its NUL (an omap name holds
             * one, start_after not: that key's names come again, and its
             * entries read before are passed over); past every name of
             * that key when that is no step forward (a page of one key's
             * names only, or of names that are no entry). */
            int ret = rio__rados_idx_read_many(s->t, sh, 1, after, "", 1000, iwalk_each, w, &more);
            if (ret < 0)
                return ret;
            if (!more)
                break;
            if (strcmp(w->raw, after) > 0) {
                snprintf(after, sizeof(after), "%s", w->raw);
            } else if (w->raw_cut) {
                /* A page of names longer than a key that share their first
                 * RIO_KEY_MAX bytes (no entry's: railio's hold a NUL
                 * within): past every name that begins so, the prefix's
                 * successor (its last byte below 0xff raised, what
                 * follows dropped). raw + "\x01" was no step past them,
                 * and the walk never ended. */
                size_t n = strlen(w->raw);
                while (n && (unsigned char)w->raw[n - 1] == 0xff)
                    n--;
                if (!n)
                    break; /* nothing sorts after them */
                memcpy(after, w->raw, n);
                after[n - 1] = (char)((unsigned char)after[n - 1] + 1);
                after[n] = '\0';
            } else {
                snprintf(after, sizeof(after), "%s\x01", w->raw);
            }
        }
    }
    if (w->n > 1)
        qsort(w->e, w->n, sizeof(*w->e), ientry_cmp);
    return 0;
}

static const struct ientry *ientry_find(const struct iwalk *w, const char *key, size_t keylen,
                                        uint64_t gen)
{
    struct ientry probe = {.key = (char *)key, .keylen = keylen, .gen = gen};
    return w->n ? bsearch(&probe, w->e, w->n, sizeof(*w->e), ientry_cmp) : NULL;
}

/* What a committed entry of head h says: its size and etag (its first
 * bytes) and mtime, read now; RIO_ENOTFOUND when it is no longer h. */
static int head_ival(struct fscan *s, const struct fhead *h, struct rio__rados_ival *iv)
{
    char *buf = rio__malloc(RIO_RADOS_HEAD_TOP);
    struct rio__rados_head sum;
    uint64_t size = 0;
    time_t mtime = 0;
    size_t got = 0;
    int rv_stat = 0, rv_read = 0, ret;

    if (!buf)
        return -ENOMEM;
    rados_read_op_t op = rados_create_read_op();
    if (!op) {
        rio__free(buf);
        return -ENOMEM;
    }
    rados_read_op_stat(op, &size, &mtime, &rv_stat);
    rados_read_op_read(op, 0, RIO_RADOS_HEAD_TOP, buf, &got, &rv_read);
    ret = rados_read_op_operate(op, s->t->head_io, h->key, 0);
    rados_release_read_op(op);
    if (ret == 0)
        ret = rv_stat < 0 ? rv_stat : rv_read;
    if (ret < 0) {
        rio__free(buf);
        return ret == -ENOENT ? RIO_ENOTFOUND : rio__rados_xlate(ret);
    }
    ret = rio__rados_head_summary(buf, got, h->key, &sum);
    rio__free(buf);
    if (ret < 0 || sum.generation != h->gen)
        return RIO_ENOTFOUND;
    memset(iv, 0, sizeof(*iv));
    iv->committed = true;
    iv->size = sum.size;
    iv->mtime_s = (int64_t)mtime;
    memcpy(iv->etag, sum.etag, sizeof(iv->etag));
    iv->etag[sizeof(iv->etag) - 1] = '\0';
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    iv->at_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    return 0;
}

/* What index_mark_all's workers count. */
struct mcount {
    uint64_t added, errors;
    int first;
};

/* What they share. */
struct imark {
    struct fscan *s;
    unsigned shards;
    const struct iwalk *w;
    bool dry;
    _Atomic size_t next;
    pthread_mutex_t mu;
    struct mcount sum; /* under mu */
};

/* Head h's entry: there and committed, or written so now; counted in c. */
static void mark_one(const struct imark *im, struct mcount *m, const struct fhead *h)
{
    struct fscan *s = im->s;
    unsigned shards = im->shards;
    const struct iwalk *w = im->w;
    bool dry = im->dry;

    const struct ientry *e = ientry_find(w, h->key, h->keylen, h->gen);
    struct rio__rados_ival iv;
    if (e && rio__rados_ival_parse(e->val, e->vlen, &iv) == 0 && iv.committed)
        return;
    /* No entry, or one that does not say its head was published (the
     * writer's mark was lost): one that says so, with what listings
     * show, read from the head now. */
    if (dry) {
        m->added += !e;
        return;
    }
    int r = head_ival(s, h, &iv);
    if (r == 0)
        r = rio__rados_idx_set(s->t, shards, h->key, h->gen, &iv, e ? e->val : NULL,
                               e ? e->vlen : 0);
    if (r == 0 && !e) {
        /* Set with no compare: should the head have changed since it
         * was read (a writer that dropped no entry of it, there being
         * none), the entry would outlive it: take it out again. */
        char buf[GEN_HEX + 1], val[RIO_RADOS_IDX_VAL_MAX];
        uint64_t now_gen = 0;
        int64_t k =
            gen_of(rados_getxattr(s->t->head_io, h->key, RIO_RADOS_GEN_XATTR, buf, sizeof(buf)),
                   buf, &now_gen);
        int vl = rio__rados_ival_format(&iv, val);
        if (k >= 0 && !(k > 0 && now_gen == h->gen) && vl > 0) {
            rio__rados_idx_rm_if(s->t, shards, h->key, h->gen, val, (size_t)vl);
            return;
        }
    }
    if (r == RIO_EGENERATION || r == RIO_ENOTFOUND)
        return; /* changed meanwhile: its writer's */
    if (r < 0) {
        m->errors++;
        m->first = m->first ? m->first : r;
    } else if (!e) {
        m->added++;
    }
}

static void *mark_run(void *arg)
{
    struct imark *im = arg;
    struct mcount m = {0};

    for (;;) {
        size_t i = atomic_fetch_add(&im->next, 1);
        if (i >= im->s->nheads)
            break;
        if (im->s->heads[i].gen)
            mark_one(im, &m, &im->s->heads[i]);
    }
    pthread_mutex_lock(&im->mu);
    im->sum.added += m.added;
    im->sum.errors += m.errors;
    if (!im->sum.first)
        im->sum.first = m.first;
    pthread_mutex_unlock(&im->mu);
    return NULL;
}

#define MARK_THREADS 8 /* heads read and entries written at once */

/* Every head's entry, there and committed: MARK_THREADS workers (one
 * head read and one or two entry ops each per head missing one). */
static int index_mark_all(struct fscan *s, unsigned shards, const struct iwalk *w, bool dry,
                          int *first)
{
    struct imark m = {.s = s, .shards = shards, .w = w, .dry = dry};
    pthread_t th[MARK_THREADS];
    unsigned nt = 0;

    if (pthread_mutex_init(&m.mu, NULL) != 0)
        return -ENOMEM;
    for (; nt < MARK_THREADS && s->nheads > 64 * nt; nt++)
        if (pthread_create(&th[nt], NULL, mark_run, &m) != 0)
            break;
    if (!nt)
        mark_run(&m);
    for (unsigned i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_destroy(&m.mu);
    s->r->index_added += m.sum.added;
    s->r->errors += m.sum.errors;
    if (!*first)
        *first = m.sum.first;
    return 0;
}

/*
 * The index against the heads just read: a head without its entry gets
 * one (a pool indexed while writers that had not seen the marker yet
 * wrote, or an entry someone removed); an entry whose generation is no
 * head, older than the grace (at least IDX_GC_MIN_NS), is removed once
 * its key's head is read again and still is not it, on a compare of its
 * value (a commit renewing it keeps it).
 */
static int index_check(struct fscan *s, unsigned shards, int64_t now_ns)
{
    struct iwalk w = {0};
    bool dry = s->a->flags & RIO_FSCK_DRY_RUN;
    uint64_t grace = s->a->flags & RIO_FSCK_GRACE ? s->a->grace_ns : RIO_FSCK_GRACE_DEFAULT_NS;
    int ret, first = 0;

    if (grace < IDX_GC_MIN_NS)
        grace = IDX_GC_MIN_NS;
    ret = index_read_all(s, shards, &w);
    if (ret < 0)
        goto out;
    s->r->index_entries = w.n;
    ret = index_mark_all(s, shards, &w, dry, &first);
    if (ret < 0)
        goto out;
    for (size_t i = 0; i < w.n; i++) {
        const struct ientry *e = &w.e[i];
        const struct fhead *h = head_find(s, e->key, e->keylen);
        struct rio__rados_ival iv;
        if (h && (h->gen == e->gen || !h->gen))
            continue; /* its head, or a head that could not be read */
        if (rio__rados_ival_parse(e->val, e->vlen, &iv) == 0 && now_ns > 0 &&
            (uint64_t)now_ns < iv.at_ns + grace)
            continue; /* young: its PUT may still commit (a bad value is old) */
        /* Its key's head now: committed since the scan keeps it. */
        char buf[GEN_HEX + 1];
        uint64_t gen = 0;
        int64_t k =
            gen_of(rados_getxattr(s->t->head_io, e->key, RIO_RADOS_GEN_XATTR, buf, sizeof(buf)),
                   buf, &gen);
        if (k < 0) {
            s->r->errors++;
            continue;
        }
        if (k > 0 && gen == e->gen)
            continue;
        int r = dry ? 0 : rio__rados_idx_rm_if(s->t, shards, e->key, e->gen, e->val, e->vlen);
        if (r == RIO_EGENERATION)
            continue;
        if (r < 0) {
            s->r->errors++;
            first = first ? first : r;
            continue;
        }
        s->r->index_removed++;
    }
    ret = first;
out:
    for (size_t i = 0; i < w.n; i++)
        rio__free(w.e[i].key);
    rio__free(w.e);
    return ret;
}

static void sleep_ns(uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/*
 * RIO_FSCK_INDEX on a pool without an index: write its marker
 * ("building"), then wait until every writer has read it (two of their
 * re-reads, and a commit's longest swap) before the heads are walked, so
 * that a head committed by a writer that did not know yet is among those
 * walked. A marker still "building" (an fsck stopped before its end) waits
 * only what is left of that since it was written.
 */
static int index_begin(struct fscan *s, unsigned *shards, bool *ready)
{
    struct rados_transport *t = s->t;
    uint64_t wait = 2 * t->idx_recheck_ns + t->abort_ns;
    int ret;

    pthread_mutex_lock(&t->cache_mu);
    t->idx_checked_ns = 0;
    pthread_mutex_unlock(&t->cache_mu);
    ret = rio__rados_idx_state(t, shards, ready);
    if (ret < 0 || *ready || !(s->a->flags & RIO_FSCK_INDEX) || (s->a->flags & RIO_FSCK_DRY_RUN))
        return ret;
    if (!*shards) {
        ret = rio__rados_idx_marker_write(t, RIO_RADOS_IDX_SHARDS_DEF, false, true);
        if (ret < 0)
            return ret;
        ret = rio__rados_idx_state(t, shards, ready);
        if (ret < 0 || !*shards || *ready)
            return ret < 0 ? ret : 0;
    }
    uint64_t size;
    time_t mt;
    ret = rados_stat(t->idx_io, RIO_RADOS_IDX_MARKER, &size, &mt);
    if (ret < 0)
        return rio__rados_xlate(ret);
    time_t now = time(NULL);
    uint64_t age = now > mt ? (uint64_t)(now - mt) * 1000000000u : 0;
    if (age < wait + 1000000000u) /* mtime has whole seconds */
        sleep_ns(wait + 1000000000u - age);
    return 0;
}

int rio__rados_fsck(struct rio_transport *tt, const struct rio_fsck_args *a,
                    struct rio_fsck_report *out)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct fscan s = {.t = t, .a = a, .r = out};
    struct timespec ts;
    int pools[MAX_HEAD_POOLS + 1], npools = 0, ret;

    /* The URL's pool, then each pool PUTs spread over (pools=). */
    pools[npools++] = t->url_pool;
    for (unsigned i = 0; i < t->nwpools; i++)
        if ((int)i != t->url_pool)
            pools[npools++] = (int)i;

    unsigned shards = 0;
    bool ready = false;
    ret = index_begin(&s, &shards, &ready);
    if (ret == 0)
        ret = heads_scan(&s);
    for (int i = 0; ret == 0 && i < npools; i++)
        ret = chunks_scan(&s, pools[i]);
    if (ret < 0)
        goto out;
    rio__rados_stat_many(t, s.c, s.n, sizeof(*s.c));
    if (s.n > 1)
        qsort(s.c, s.n, sizeof(*s.c), chunk_cmp);
    clock_gettime(CLOCK_REALTIME, &ts);
    int64_t now_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    struct fgen g[REMOVE_WINDOW];
    size_t ng = 0;
    for (size_t i = 0, j; i < s.n; i = j) {
        for (j = i + 1; j < s.n && s.c[j].gen == s.c[i].gen &&
                        key_cmp(s.c[j].st.name, s.c[j].keylen, s.c[i].st.name, s.c[i].keylen) == 0;
             j++)
            ;
        g[ng++] = (struct fgen){.c = s.c + i, .n = j - i};
        if (ng == REMOVE_WINDOW || j == s.n) {
            sweep_batch(&s, g, ng, now_ns);
            ng = 0;
        }
    }
    if (shards) {
        ret = index_check(&s, shards, now_ns);
        /* Built: listings may use it (each transport within its recheck). */
        if (ret == 0 && !ready && (a->flags & RIO_FSCK_INDEX) && !(a->flags & RIO_FSCK_DRY_RUN)) {
            ret = rio__rados_idx_marker_write(t, shards, true, false);
            if (ret == 0)
                out->index_built = 1;
        }
        out->index_state = ready || out->index_built ? 2 : 1;
    }
out:
    for (size_t i = 0; i < s.nheads; i++)
        rio__free(s.heads[i].key);
    rio__free(s.heads);
    for (size_t i = 0; i < s.n; i++)
        rio__free(s.c[i].st.name);
    rio__free(s.c);
    for (size_t i = 0; i < s.nlive; i++)
        rio__free(s.live[i]);
    rio__free(s.live);
    rio__free(s.tops);
    return ret;
}
