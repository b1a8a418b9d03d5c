/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: the metadata calls other than the commit (lookup, put_open,
 * put_abort, remove) and the removal of chunk objects. Synchronous on path
 * 0's connection (removals on the path a WRITE went out on), thread-safe.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include <rados/librados.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/key.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/head.h"
#include "transport/rados/internal.h"
#include "transport/transport.h"

static void sleep_ms(unsigned ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* A generation nobody else will pick: random bits mixed with this client's
 * cluster-wide instance id and a counter. Never 0 ("any"). */
uint64_t rio__rados_new_generation(struct rados_transport *t)
{
    uint64_t r = 0, g;

    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r))
        r = rio__now_ns();
    pthread_mutex_lock(&t->mu);
    t->gen_state ^= r;
    g = rio__rand(&t->gen_state);
    pthread_mutex_unlock(&t->mu);
    g ^= rados_get_instance_id(t->cl[0]) * 0x9e3779b97f4a7c15ull;
    return g ? g : 1;
}

/* ---------------------------------------------------- chunk removal (sync) */

/*
 * Remove chunk objects of (key, gen) (or each item's own name, when set:
 * then key and gen are unused), each on its own path, REMOVE_WINDOW at a
 * time; retry those that fail (other than "already gone") until the
 * abort deadline. owner (NULL: none) guards each removal with a compare
 * on the chunk's rio.owner xattr: "" removes only a chunk no composed
 * object borrowed, 16 hex digits only one lent to that generation; a
 * chunk that fails the compare is someone else's and stays (done, not
 * removed). Returns how many could not be removed; each item's ret is 0
 * once it is gone or kept, else the last error.
 */
/* A removal's error that trying again until the abort deadline cannot
 * mend: a user without the caps to remove (EPERM) was held 30 s on each
 * failed PUT's cleanup (review). */
static bool remove_final(int r)
{
    return r < 0 && !rio__class_is_retryable(rio__err_class(rio__rados_xlate(r)));
}

uint64_t rio__rados_remove_chunks(struct rados_transport *t, const char *key, uint64_t gen,
                                  struct rm_item *items, size_t n, const char *owner)
{
    uint64_t deadline = rio__now_ns() + t->abort_ns, removed = 0, failed = 0;
    char name[NAME_MAX_LEN];
    rados_completion_t comp[REMOVE_WINDOW];
    rados_write_op_t wop[REMOVE_WINDOW];
    size_t idx[REMOVE_WINDOW];
    unsigned backoff = 20;

    for (size_t i = 0; i < n; i++) {
        items[i].ret = 1; /* pending */
        items[i].final = false;
    }
    for (;;) {
        size_t k = 0, i = 0, pending = 0;
        while (i < n) {
            k = 0;
            for (; i < n && k < REMOVE_WINDOW; i++) {
                if (items[i].ret != 1 && !(items[i].ret < 0 && !items[i].final))
                    continue;
                const char *nm = items[i].name;
                if (!nm) {
                    rio__rados_chunk_name(name, sizeof(name), key, gen, items[i].index);
                    nm = name;
                }
                if (rados_aio_create_completion2(NULL, NULL, &comp[k]) < 0) {
                    items[i].ret = -ENOMEM;
                    continue;
                }
                rados_ioctx_t io = t->pools[items[i].pool].io[items[i].path];
                int r;
                wop[k] = rados_create_write_op();
                if (!wop[k]) {
                    rados_aio_release(comp[k]);
                    items[i].ret = -ENOMEM;
                    continue;
                }
                if (owner)
                    rados_write_op_cmpxattr(wop[k], RIO_RADOS_OWNER_XATTR, LIBRADOS_CMPXATTR_OP_EQ,
                                            owner, strlen(owner));
                rados_write_op_remove(wop[k]);
                r = rados_aio_write_op_operate(wop[k], io, comp[k], nm, NULL, WOP_FLAGS);
                if (r < 0) {
                    rados_aio_release(comp[k]);
                    rados_release_write_op(wop[k]);
                    items[i].ret = r;
                    items[i].final = remove_final(r);
                    continue;
                }
                idx[k++] = i;
            }
            for (size_t j = 0; j < k; j++) {
                rados_aio_wait_for_complete(comp[j]);
                int r = rados_aio_get_return_value(comp[j]);
                rados_aio_release(comp[j]);
                rados_release_write_op(wop[j]);
                if (r == 0 || r == -ENOENT)
                    removed++; /* gone, whoever removed it */
                /* ECANCELED: the guard's compare failed: not ours to remove. */
                items[idx[j]].ret = r == 0 || r == -ENOENT || r == -ECANCELED ? 0 : r;
                items[idx[j]].final = remove_final(r);
            }
        }
        for (i = 0; i < n; i++)
            if (items[i].ret < 0 && !items[i].final)
                pending++;
        if (!pending || rio__now_ns() >= deadline) {
            for (i = 0; i < n; i++)
                failed += items[i].ret < 0;
            break;
        }
        sleep_ms(backoff);
        backoff = backoff < 500 ? backoff * 2 : 500;
    }
    pthread_mutex_lock(&t->mu);
    t->ctr.removed += removed;
    t->ctr.remove_failed += failed;
    pthread_mutex_unlock(&t->mu);
    return failed;
}

static int name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * Remove every chunk a head names (after the head itself is gone or
 * replaced), except those the head that replaced it lists too (keep, of
 * key, may be NULL). A version 1 head's chunks go only if no composed
 * object borrowed them, a version 2 head's only if they were lent to it
 * (the rio.owner guard).
 */
void rio__rados_remove_head_chunks(struct rados_transport *t, const char *key,
                                   const struct rio__rados_head *h,
                                   const struct rio__rados_head *keep)
{
    struct rm_item *items;
    int map[MAX_HEAD_POOLS];
    char owner[17], **kept = NULL;

    (void)key;
    if (!h->nchunks || h->nchunks > SIZE_MAX / sizeof(*items))
        return;
    for (unsigned i = 0; i < h->npools; i++)
        map[i] = rio__rados_pool_get(t, h->pools[i]);
    if (h->names && keep && keep->names) {
        /* Two composed heads share chunks only when both came from the
         * same sources: sorted, so each lookup is a search. */
        kept = rio__malloc((size_t)keep->nchunks * sizeof(*kept));
        if (!kept)
            return; /* left to fsck rather than risk the new head's chunks */
        memcpy(kept, keep->names, (size_t)keep->nchunks * sizeof(*kept));
        qsort(kept, (size_t)keep->nchunks, sizeof(*kept), name_cmp);
    }
    items = rio__calloc((size_t)h->nchunks, sizeof(*items));
    if (!items) {
        rio__free(kept);
        return;
    }
    size_t n = 0;
    for (uint64_t i = 0; i < h->nchunks; i++) {
        int pi = map[h->chunk_pool[i]];
        if (pi < 0)
            continue; /* the pool itself is gone */
        if (kept && bsearch(&h->names[i], kept, (size_t)keep->nchunks, sizeof(*kept), name_cmp))
            continue; /* the new head's too */
        items[n].name = h->names ? h->names[i] : NULL;
        items[n].pool = pi;
        items[n].path = 0;
        items[n].index = i;
        n++;
    }
    owner[0] = '\0';
    if (h->names)
        snprintf(owner, sizeof(owner), "%016" PRIx64, h->generation);
    rio__rados_remove_chunks(t, key, h->generation, items, n, owner);
    rio__free(items);
    rio__free(kept);
}

/* ------------------------------------------------------------- metadata */

/* chunk_damage_check, lookup_once: the head changed since it was read. */
#define LOOKUP_AGAIN 1

/*
 * A READ of this head's generation found a chunk object missing (data.c):
 * usually a PUT replaced the head meanwhile, and then the head read now
 * names another generation. This one names the same: a chunk object of the
 * generation it names is gone (removed by hand, or by an fsck with too
 * short a grace), which no re-lookup mends. Say so, with -EIO, rather than
 * RIO_EGENERATION, which callers retry. The object there after all: the
 * record goes; its stat failing otherwise: the READs that follow tell.
 * LOOKUP_AGAIN when the head names another generation now (or none).
 */
static int chunk_damage_check(struct rados_transport *t, const char *key, const struct centry *e)
{
    char derived[NAME_MAX_LEN];
    const char *name;
    uint64_t index, size;
    time_t mt;
    int ret;

    if (!rio__rados_missing_find(t, key, e->generation, &index))
        return 0;
    if (index >= e->nchunks) {
        rio__rados_missing_forget(t, key, e->generation, index);
        return 0;
    }
    int pi = e->map[e->chunk_pool ? e->chunk_pool[index] : (unsigned)(index % e->npools)];
    name = e->names ? e->names[index] : derived;
    if (!e->names && rio__rados_chunk_name(derived, sizeof(derived), key, e->generation, index) < 0)
        return 0;
    ret = rados_stat(t->pools[pi].io[0], name, &size, &mt);
    if (ret != -ENOENT) {
        if (ret == 0)
            rio__rados_missing_forget(t, key, e->generation, index);
        return 0;
    }
    /* Gone: damage only if the head still names that generation now. The
     * lookup read it before the stat, so a PUT that replaced it in between
     * (and removed the old chunks, which another reader then found
     * missing) made a sound object read as damaged: a GET racing a PUT of
     * its key failed -EIO, not retried. */
    struct rio__rados_head now;
    ret = rio__rados_head_read(t, key, &now, NULL);
    if (ret == 0) {
        uint64_t g = now.generation;
        rio__rados_head_cleanup(&now);
        if (g != e->generation)
            return LOOKUP_AGAIN;
    } else if (ret == RIO_ENOTFOUND) {
        return LOOKUP_AGAIN; /* removed meanwhile: the next read says so */
    }
    rio__detail("rados://: chunk %" PRIu64 " of '%s' generation %016" PRIx64
                " (object %s in pool %s) is missing: the object is damaged",
                index, key, e->generation, name, t->pools[pi].name);
    return -EIO;
}

/* One read of the head: as lookup, or LOOKUP_AGAIN. */
static int lookup_once(struct rados_transport *t, const char *key, struct rio_desc *out,
                       time_t *mtime)
{
    struct rio__rados_head h;
    struct centry *e;
    size_t keylen;
    int ret;

    if (!out)
        return RIO_EINVAL;
    ret = rio__key_len(key, &keylen);
    if (ret < 0)
        return ret;
    ret = rio__rados_head_read(t, key, &h, mtime);
    if (t->after_head_read) {
        void (*fn)(void *) = t->after_head_read;
        t->after_head_read = NULL;
        fn(t->after_head_read_arg);
    }
    if (ret == RIO_EPROTO)
        rio__detail("the object '%s' in pool '%s' is not a head railio wrote (it does not parse "
                    "as one: written by another tool, or damaged); rados:// reads nothing of it",
                    key, t->pools[t->url_pool].name);
    if (ret < 0)
        return ret;
    if (h.chunk_size > INT_MAX) {
        /* One read of librados returns at most INT_MAX bytes: no chunk
         * of this head could be read (librados said EDOM). */
        rio__detail("the head of '%s' says chunk_size %" PRIu64 ", more than one RADOS read "
                    "returns (%d): not a head railio wrote",
                    key, h.chunk_size, INT_MAX);
        rio__rados_head_cleanup(&h);
        return RIO_EPROTO;
    }

    ret = -ENOMEM;
    e = rio__calloc(1, sizeof(*e) + keylen + 1);
    if (!e)
        goto err_head;
    memcpy(e->key, key, keylen + 1);
    e->keylen = keylen;
    e->generation = h.generation;
    e->hash = rio__rados_hash_key(key, keylen, h.generation);
    e->nchunks = h.nchunks;
    e->npools = h.npools;
    for (unsigned i = 0; i < h.npools; i++) {
        ret = rio__rados_pool_get(t, h.pools[i]);
        if (ret < 0)
            goto err_entry;
        e->map[i] = (uint8_t)ret;
    }
    e->names = h.names;
    e->name_buf = h.name_buf;
    h.names = NULL;
    h.name_buf = NULL;
    for (uint64_t i = 0; i < h.nchunks; i++) {
        if (h.chunk_pool[i] != i % h.npools) {
            /* Not the usual round robin: keep the head's choice per chunk. */
            e->chunk_pool = h.chunk_pool;
            h.chunk_pool = NULL;
            break;
        }
    }
    ret = chunk_damage_check(t, key, e);
    if (ret != 0)
        goto err_entry; /* damaged, or LOOKUP_AGAIN */

    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, keylen + 1);
    out->generation = h.generation;
    out->size = h.size;
    out->chunk_size = h.chunk_size;
    out->nchunks = h.nchunks;
    out->xxh = h.xxh;
    h.xxh = NULL;
    memcpy(out->etag, h.etag, sizeof(out->etag));
    rio__rados_head_cleanup(&h);
    rio__rados_cache_put(t, e);
    return 0;
err_entry:
    rio__rados_centry_free(e);
err_head:
    rio__rados_head_cleanup(&h);
    return ret;
}

/* A lookup; with mtime, the head's modification time read in the same op.
 * A head replaced while it was checked is read again (a few times: each
 * time a PUT replaced the key in between). */
static int lookup(struct rados_transport *t, const char *key, struct rio_desc *out, time_t *mtime)
{
    int ret = LOOKUP_AGAIN;

    for (int i = 0; i < 4 && ret == LOOKUP_AGAIN; i++)
        ret = lookup_once(t, key, out, mtime);
    return ret == LOOKUP_AGAIN ? RIO_EGENERATION : ret;
}

int rio__rados_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    return lookup((struct rados_transport *)tt, key, out, NULL);
}

int rio__rados_lookup_mtime(struct rio_transport *tt, const char *key, struct rio_desc *out,
                            int64_t *mtime_ns)
{
    time_t mt = 0;
    int ret = lookup((struct rados_transport *)tt, key, out, &mt);

    *mtime_ns = ret == 0 && mt > 0 ? (int64_t)mt * 1000000000 : 0;
    return ret;
}

void rio__rados_upload_free(struct rupload *up)
{
    if (!up)
        return;
    up->magic = 0;
    rio__rados_idx_open_wait(up, NULL);
    if (up->pre_comp) {
        /* The read writes into pre_buf: it lands before the buffer goes. */
        rados_aio_wait_for_complete(up->pre_comp);
        rados_aio_release(up->pre_comp);
    }
    rio__free(up->pre_buf);
    rio__free(up->key);
    rio__free(up->paths_tried);
    rio__free(up->done);
    rio__free(up);
}

int rio__rados_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                        uint64_t chunk_size, void **upload)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rupload *up;
    size_t keylen;
    int ret;

    ret = rio__put_open_args(key, &keylen, chunk_size, upload);
    if (ret < 0)
        return ret;
    /* A chunk is one RADOS object: the cluster refuses larger ones (EFBIG). */
    if (chunk_size > t->max_object)
        return RIO_EINVAL;
    up = rio__calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    ret = -ENOMEM;
    up->key = rio__strdup(key);
    if (!up->key)
        goto err;
    up->chunk_size = chunk_size;
    up->short_index = NO_INDEX;
    up->last_write_ns = rio__now_ns();
    if (size == RIO_SIZE_UNKNOWN) {
        /* Streaming: the per-chunk arrays grow as chunks are submitted;
         * size and count come with the commit. */
        up->stream = true;
    } else {
        up->size = size;
        up->nchunks = nchunks_of(size, chunk_size);
    }
    if (up->nchunks) {
        if (up->nchunks > SIZE_MAX / sizeof(uint16_t))
            goto err;
        up->paths_tried = rio__calloc((size_t)up->nchunks, sizeof(uint16_t));
        up->done = rio__calloc((size_t)up->nchunks, 1);
        if (!up->paths_tried || !up->done)
            goto err;
        up->cap = up->nchunks;
    }
    up->npools = t->nwpools;
    for (unsigned i = 0; i < t->nwpools; i++)
        up->pools[i] = (uint8_t)i;
    up->generation = rio__rados_new_generation(t);
    /* The head this PUT will replace, read while its chunks are written
     * (the commit's swap checks the guess). Best effort: without it the
     * commit reads the head itself. */
    up->pre_buf = rio__malloc(HEAD_READ0);
    if (up->pre_buf && rados_aio_create_completion2(NULL, NULL, &up->pre_comp) == 0 &&
        rados_aio_read(t->head_io, key, up->pre_comp, up->pre_buf, HEAD_READ0, 0) < 0) {
        rados_aio_release(up->pre_comp);
        up->pre_comp = NULL;
    }
    /* Its entry in the pool's key index, if it has one: beside the chunks,
     * so that the commit finds it there (index.c). */
    rio__rados_idx_open(t, up);
    up->magic = UPLOAD_MAGIC;
    *upload = up;
    return 0;
err:
    rio__rados_upload_free(up);
    return ret;
}

/* Remove every chunk object a WRITE of the upload may have created, on each
 * connection it went out on (so the remove follows the write on that
 * connection), then free the upload. up->hi bounds the chunks a WRITE went
 * out for, whether or not the size was known. */
void rio__rados_upload_discard(struct rados_transport *t, struct rupload *up)
{
    struct rm_item *items = NULL;
    size_t n = 0;

    /* Its index entry: a generation that never became a head and never
     * will (unless a swap went out whose outcome is unknown: then its
     * entry stays, for fsck to judge). */
    rio__rados_idx_open_wait(up, NULL);
    if ((up->idx_sent || up->idx_put) && !up->swap_tried)
        rio__rados_idx_drop(t, up->key, up->generation);
    for (uint64_t i = 0; i < up->hi; i++)
        n += (size_t)__builtin_popcount(up->paths_tried[i]);
    if (n)
        items = rio__calloc(n, sizeof(*items));
    if (items) {
        n = 0;
        for (uint64_t i = 0; i < up->hi; i++)
            for (unsigned p = 0; p < t->base.npaths; p++)
                if (up->paths_tried[i] & (1u << p)) {
                    items[n].pool = up->pools[i % up->npools];
                    items[n].path = p;
                    items[n].index = i;
                    n++;
                }
        rio__rados_remove_chunks(t, up->key, up->generation, items, n, NULL);
        rio__free(items);
    } else if (n) {
        /* No memory for the batch: one at a time. */
        struct rm_item one = {0};
        for (uint64_t i = 0; i < up->hi; i++)
            for (unsigned p = 0; p < t->base.npaths; p++)
                if (up->paths_tried[i] & (1u << p)) {
                    one.pool = up->pools[i % up->npools];
                    one.path = p;
                    one.index = i;
                    rio__rados_remove_chunks(t, up->key, up->generation, &one, 1, NULL);
                }
    }
    rio__rados_upload_free(up);
}

void rio__rados_put_abort(struct rio_transport *tt, void *upload)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rupload *up = upload;

    if (up && up->magic == UPLOAD_MAGIC)
        rio__rados_upload_discard(t, up);
}

/* Remove key's head (and its chunks), only if it is generation gen (0:
 * any): the removal compares the head's generation with the one read, so a
 * head replaced in between is read again, and gen is checked on it. */
static int remove_gen(struct rados_transport *t, const char *key, uint64_t gen)
{
    struct rio__rados_head h;
    char hex[17];
    uint64_t text_gen = 0;
    size_t keylen;
    int ret;

    ret = rio__key_len(key, &keylen);
    if (ret < 0)
        return ret;
    for (int tries = 0; tries < COMMIT_TRIES; tries++) {
        ret = rio__rados_head_read(t, key, &h, NULL);
        if (ret == RIO_EPROTO) {
            if (gen) /* not a head: of no generation */
                return RIO_EGENERATION;
            /* Not a head: remove the object itself. */
            rados_write_op_t rop = rados_create_write_op();
            if (!rop)
                return -ENOMEM;
            rados_write_op_remove(rop);
            ret = rados_write_op_operate(rop, t->head_io, key, NULL, WOP_FLAGS);
            rados_release_write_op(rop);
            return ret == -ENOENT ? RIO_ENOTFOUND : rio__rados_xlate(ret);
        }
        if (ret < 0)
            return ret;
        if (gen && h.generation != gen) {
            rio__rados_head_cleanup(&h);
            return RIO_EGENERATION;
        }
        /* The entry first: a listing believes a key's one committed
         * entry without reading its head, so one left committed after the
         * head went (this process killed before the drop below, a drop
         * that failed) listed a key no GET finds, until an fsck. */
        ret = rio__rados_idx_uncommit(t, key, h.generation);
        if (ret < 0) {
            rio__rados_head_cleanup(&h);
            return ret;
        }
        rados_write_op_t op = rados_create_write_op();
        if (!op) {
            rio__rados_head_cleanup(&h);
            return -ENOMEM;
        }
        snprintf(hex, sizeof(hex), "%016" PRIx64, h.generation);
        rados_write_op_cmpxattr(op, RIO_RADOS_GEN_XATTR, LIBRADOS_CMPXATTR_OP_EQ, hex, 16);
        rados_write_op_remove(op);
        ret = rados_write_op_operate(op, t->head_io, key, NULL, WOP_FLAGS);
        rados_release_write_op(op);
        if (ret == 0) {
            struct ridx_drop dp;
            rio__rados_idx_drop_send(t, key, h.generation, &dp);
            rio__rados_remove_head_chunks(t, key, &h, NULL);
            rio__rados_idx_drop_wait(&dp);
            rio__rados_head_cleanup(&h);
            return 0;
        }
        text_gen = h.generation;
        if (ret == -ECANCELED || ret == -ENOENT || ret == -ENODATA) {
            /* That generation is no head any more: its replacer (or
             * remover) took its entry out, perhaps before ours above
             * wrote it again. */
            rio__rados_idx_drop(t, key, h.generation);
        }
        rio__rados_head_cleanup(&h);
        if (ret != -ECANCELED && ret != -ENOENT && ret != -ENODATA)
            return rio__rados_xlate(ret);
    }
    return text_gen ? rio__rados_gen_stuck(t, key, text_gen) : RIO_ESERVER;
}

int rio__rados_remove(struct rio_transport *tt, const char *key)
{
    return remove_gen((struct rados_transport *)tt, key, 0);
}

int rio__rados_remove_if(struct rio_transport *tt, const char *key, uint64_t gen)
{
    return gen ? remove_gen((struct rados_transport *)tt, key, gen) : RIO_EINVAL;
}
