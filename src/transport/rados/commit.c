/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: the head in the pool and the head-last commit. A PUT's chunks
 * are all written before its head; the head goes in with one atomic write op
 * guarded by a compare on the rio.gen xattr, so a reader sees the old head or
 * the new one, and two racing PUTs of one key each learn which head they
 * replaced and remove its chunks.
 */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <rados/librados.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/internal.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/head.h"
#include "transport/rados/internal.h"
#include "transport/transport.h"

/* ------------------------------------------------------------------ head */

/* The head text for an upload; *out is rio__malloc'd. */
static int head_build(struct rados_transport *t, struct rupload *up, const struct rio_desc *d,
                      char **out, size_t *outlen)
{
    struct rio__rados_head h = {
        .generation = up->generation,
        .size = up->size,
        .chunk_size = up->chunk_size,
        .nchunks = up->nchunks,
        .npools = up->npools,
        .xxh = d->xxh,
    };

    memcpy(h.etag, d->etag, sizeof(h.etag));
    h.etag[sizeof(h.etag) - 1] = '\0';
    for (unsigned i = 0; i < up->npools; i++)
        h.pools[i] = t->pools[up->pools[i]].name;
    return rio__rados_head_format(up->key, &h, out, outlen);
}

/* A failed read of a head: no such object is no such key. */
static int head_err(int ret)
{
    return ret == -ENOENT ? RIO_ENOTFOUND : rio__rados_xlate(ret);
}

/* Read up to cap bytes of object key, and (mtime not NULL) its
 * modification time, in one round trip. The count read, or -errno. */
static int head_read_op(struct rados_transport *t, const char *key, char *b, size_t cap,
                        time_t *mtime)
{
    rados_read_op_t op;
    size_t got = 0;
    uint64_t osize;
    int rv_read = 0, rv_stat = 0, ret;

    if (!mtime)
        return rados_read(t->head_io, key, b, cap, 0);
    op = rados_create_read_op();
    if (!op)
        return -ENOMEM;
    rados_read_op_stat(op, &osize, mtime, &rv_stat);
    rados_read_op_read(op, 0, cap, b, &got, &rv_read);
    ret = rados_read_op_operate(op, t->head_io, key, 0);
    rados_release_read_op(op);
    if (ret == 0)
        ret = rv_stat < 0 ? rv_stat : rv_read < 0 ? rv_read : 0;
    if (ret < 0)
        return ret;
    return got > cap ? -EIO : (int)got;
}

/*
 * Read key's head (and mtime, when not NULL). Returns 0 with *buf, *len
 * (rio__malloc'd), RIO_ENOTFOUND, or an error. A head replaced while it is
 * read shows as a size change: read again.
 */
static int head_read_raw(struct rados_transport *t, const char *key, char **buf, size_t *len,
                         time_t *mtime)
{
    size_t cap = HEAD_READ0;
    char *b = NULL;
    int ret;

    for (int tries = 0; tries < 4; tries++) {
        rio__free(b);
        b = rio__malloc(cap);
        if (!b)
            return -ENOMEM;
        ret = head_read_op(t, key, b, cap, mtime);
        if (ret < 0) {
            ret = head_err(ret);
            break;
        }
        if ((size_t)ret < cap) {
            *buf = b;
            *len = (size_t)ret;
            return 0;
        }
        uint64_t size;
        time_t mt;
        ret = rados_stat(t->head_io, key, &size, &mt);
        if (ret < 0) {
            ret = head_err(ret);
            break;
        }
        if (size >= RIO_RADOS_HEAD_MAX) {
            ret = RIO_EPROTO;
            break;
        }
        cap = (size_t)size + 1;
        ret = RIO_EPROTO;
    }
    rio__free(b);
    return ret;
}

/* Read and parse key's head (and its mtime when not NULL). RIO_EPROTO: an
 * object that is not a head. */
int rio__rados_head_read(struct rados_transport *t, const char *key, struct rio__rados_head *h,
                         time_t *mtime)
{
    char *buf = NULL;
    size_t len = 0;
    int ret;

    ret = head_read_raw(t, key, &buf, &len, mtime);
    if (ret < 0)
        return ret;
    ret = rio__rados_head_parse(buf, len, key, h);
    rio__free(buf);
    return ret;
}

/*
 * The head put_open read beside the chunk writes (up->pre_comp), parsed into
 * *h: 0, RIO_ENOTFOUND, or -1 when it is of no use (not sent, failed, larger
 * than its buffer, not a head: the caller reads the head again). Waits for
 * the read, which has most often landed long before.
 */
static int head_pre(struct rupload *up, const char *key, struct rio__rados_head *h)
{
    int ret;

    if (!up || !up->pre_comp)
        return -1;
    rados_aio_wait_for_complete(up->pre_comp);
    ret = rados_aio_get_return_value(up->pre_comp);
    if (ret == -ENOENT)
        return RIO_ENOTFOUND;
    if (ret < 0 || (size_t)ret >= HEAD_READ0)
        return -1;
    return rio__rados_head_parse(up->pre_buf, (size_t)ret, key, h) == 0 ? 0 : -1;
}

int rio__rados_gen_stuck(struct rados_transport *t, const char *key, uint64_t text_gen)
{
    char buf[17] = {0};
    uint64_t g = 0;
    int r = rados_getxattr(t->head_io, key, RIO_RADOS_GEN_XATTR, buf, 16);

    if (r == 16 && rio__rados_hex16(buf, &g) && g == text_gen)
        return RIO_ESERVER; /* they agree now: raced that often */
    if (r < 0 && r != -ENODATA)
        return RIO_ESERVER; /* gone, or unreadable: nothing proven */
    rio__detail("the head of '%s' says generation %016" PRIx64 " but its rio.gen xattr %s: not "
                "railio's doing, and no try can pass (remove the head object, or set rio.gen "
                "to the generation its text says)",
                key, text_gen, r < 0 ? "is missing" : "says another");
    return RIO_EPROTO;
}

/* A swap that will not happen: gen will never be a head, its index entry
 * (if written) goes, here, and not again at the upload's discard. */
static void idx_refused(struct rados_transport *t, const char *key, uint64_t gen, bool *wrote,
                        struct rupload *pre)
{
    if (*wrote)
        rio__rados_idx_drop(t, key, gen);
    *wrote = false;
    if (pre && !pre->idx_comp)
        pre->idx_sent = false; /* put_open's landed: dropped above, or never written */
}

/*
 * Write the head atomically over whatever head is there now, and report the
 * head it replaced (*old, valid when *had_old). The write op compares the
 * rio.gen xattr with the generation just read, so if another PUT landed in
 * between, the op fails and we read again: each writer learns exactly which
 * generation it replaced, and no chunk object is orphaned by a race. pre
 * (or NULL): an upload whose head read, sent at put_open, is the first
 * try's guess; a stale guess fails the guard (the head's generation, or
 * the exclusive create) like a race, and the next try reads afresh. A guess
 * of "not a head" is never used: that write would go unguarded.
 */
int rio__rados_head_swap_pre(struct rados_transport *t, const char *key, const char *buf,
                             size_t len, const struct rio__rados_head *sum, struct rupload *pre,
                             uint64_t put_if, struct rio__rados_head *old, bool *had_old)
{
    char newhex[17], oldhex[17], ival[RIO_RADOS_IDX_VAL_MAX];
    bool wrote_here = false, *wrote = pre ? &pre->idx_put : &wrote_here;
    uint64_t gen = sum->generation, text_gen = 0;
    int ret = 0;

    snprintf(newhex, sizeof(newhex), "%016" PRIx64, gen);
    for (int tries = 0; tries < COMMIT_TRIES; tries++) {
        bool guarded = false;
        *had_old = false;
        ret = tries == 0 ? head_pre(pre, key, old) : -1;
        bool guessed = ret != -1;
    again:
        if (ret == -1)
            ret = rio__rados_head_read(t, key, old, NULL);
        if (ret != 0 && ret != RIO_ENOTFOUND && ret != RIO_EPROTO) {
            idx_refused(t, key, gen, wrote, pre);
            return ret;
        }
        /* The condition is checked against the head read, and the write
         * below is guarded on that same head (its generation, or its
         * absence): it holds at the swap or the swap fails and goes again.
         * A guess from put_open is read again before it refuses. */
        bool refused = put_if && (ret == RIO_ENOTFOUND ? put_if != RIO__PUT_IF_ABSENT
                                                       : put_if == RIO__PUT_IF_ABSENT || ret != 0 ||
                                                             old->generation != put_if);
        if (refused) {
            if (ret == 0)
                rio__rados_head_cleanup(old);
            if (guessed) {
                guessed = false;
                ret = -1;
                goto again;
            }
            idx_refused(t, key, gen, wrote, pre);
            return RIO_EGENERATION;
        }
        if (ret == 0) {
            *had_old = true;
            guarded = true;
            text_gen = old->generation;
            snprintf(oldhex, sizeof(oldhex), "%016" PRIx64, old->generation);
        }
        /* The key index holds the head before it is one (index.c). */
        int iret = rio__rados_idx_ensure(t, key, gen, pre, wrote, ival);
        rados_write_op_t op = iret == 0 ? rados_create_write_op() : NULL;
        if (!op) {
            if (*had_old)
                rio__rados_head_cleanup(old);
            *had_old = false;
            idx_refused(t, key, gen, wrote, pre);
            return iret < 0 ? iret : -ENOMEM;
        }
        if (guarded)
            rados_write_op_cmpxattr(op, RIO_RADOS_GEN_XATTR, LIBRADOS_CMPXATTR_OP_EQ, oldhex, 16);
        else if (ret == RIO_ENOTFOUND)
            rados_write_op_create(op, LIBRADOS_CREATE_EXCLUSIVE, NULL);
        /* else: an object that is not a head sits under the key: overwrite it. */
        rados_write_op_write_full(op, buf, len);
        rados_write_op_setxattr(op, RIO_RADOS_GEN_XATTR, newhex, 16);
        /* The head's mtime is this client's clock, as the index entry's
         * (so a listing from the index says what a lookup says). */
        time_t mtime = time(NULL);
        ret = rados_write_op_operate(op, t->head_io, key, &mtime, WOP_FLAGS);
        rados_release_write_op(op);
        if (ret == 0) {
            /* The caller drops the replaced one's entry. */
            if (*wrote)
                rio__rados_idx_mark(t, key, gen, ival, sum->size, (int64_t)mtime, sum->etag);
            return 0;
        }
        if (*had_old)
            rio__rados_head_cleanup(old);
        *had_old = false;
        if (ret != -ECANCELED && ret != -EEXIST && ret != -ENOENT && ret != -ENODATA) {
            /* The swap may have landed: its entry stays. */
            if (pre)
                pre->swap_tried = true;
            return rio__rados_xlate(ret);
        }
        pthread_mutex_lock(&t->mu);
        t->ctr.commits_raced++;
        pthread_mutex_unlock(&t->mu);
    }
    idx_refused(t, key, gen, wrote, pre);
    return text_gen ? rio__rados_gen_stuck(t, key, text_gen) : RIO_ESERVER;
}

int rio__rados_head_swap(struct rados_transport *t, const char *key, const char *buf, size_t len,
                         const struct rio__rados_head *sum, uint64_t put_if,
                         struct rio__rados_head *old, bool *had_old)
{
    return rio__rados_head_swap_pre(t, key, buf, len, sum, NULL, put_if, old, had_old);
}

int rio__rados_cond_check(struct rados_transport *t, const char *key, uint64_t put_if)
{
    struct rio__rados_head h;
    int ret;

    if (!put_if)
        return 0;
    ret = rio__rados_head_read(t, key, &h, NULL);
    if (ret == 0) {
        ret = put_if != RIO__PUT_IF_ABSENT && h.generation == put_if ? 0 : RIO_EGENERATION;
        rio__rados_head_cleanup(&h);
        return ret;
    }
    if (ret == RIO_ENOTFOUND)
        return put_if == RIO__PUT_IF_ABSENT ? 0 : RIO_EGENERATION;
    return ret == RIO_EPROTO ? RIO_EGENERATION : ret;
}

/*
 * A streaming upload learns its size at commit: check that the chunks that
 * went out are exactly those of d's geometry (none beyond the last; the one
 * short chunk, if any, is the last and has the right length), then fix the
 * size and count. Called after the fence: no WRITE of it is in flight.
 */
static int stream_close(struct rupload *up, const struct rio_desc *d)
{
    uint64_t last;

    if (d->chunk_size != up->chunk_size || d->size > INT64_MAX ||
        d->nchunks != nchunks_of(d->size, up->chunk_size) || d->nchunks > up->cap ||
        up->hi > d->nchunks)
        return RIO_EPROTO;
    last = d->nchunks ? d->size - (d->nchunks - 1) * up->chunk_size : 0;
    if (last && last < up->chunk_size) {
        if (up->short_index != d->nchunks - 1 || up->short_len != last)
            return RIO_EPROTO;
    } else if (up->short_index != NO_INDEX) {
        return RIO_EPROTO;
    }
    up->size = d->size;
    up->nchunks = d->nchunks;
    return 0;
}

/*
 * An upload that went stall_check without a chunk landing (its source
 * stalled), at any point or before this commit, may have lost its chunks to
 * a `railio fsck` whose grace is shorter than the stall: before publishing,
 * check that every chunk is still there, so that the head does not name a
 * chunk that is gone (docs/rados.md "Orphans and fsck"). Costs a PUT
 * nothing unless it stalled that long. Called after the fence.
 */
static int stall_check(struct rados_transport *t, struct rupload *up)
{
    struct rstat st[REMOVE_WINDOW];
    char *names;
    int ret = 0;

    uint64_t gap = rio__now_ns() - up->last_write_ns;
    if (up->max_gap_ns > gap)
        gap = up->max_gap_ns;
    if (!up->nchunks || gap < t->stall_check_ns)
        return 0;
    names = rio__malloc((size_t)REMOVE_WINDOW * NAME_MAX_LEN);
    if (!names)
        return -ENOMEM;
    for (uint64_t b = 0; b < up->nchunks && ret == 0; b += REMOVE_WINDOW) {
        size_t k = up->nchunks - b < REMOVE_WINDOW ? (size_t)(up->nchunks - b) : REMOVE_WINDOW;
        for (size_t j = 0; j < k; j++) {
            st[j].name = names + j * NAME_MAX_LEN;
            st[j].pool = up->pools[(b + j) % up->npools];
            rio__rados_chunk_name(st[j].name, NAME_MAX_LEN, up->key, up->generation, b + j);
        }
        rio__rados_stat_many(t, st, k, sizeof(*st));
        for (size_t j = 0; j < k && ret == 0; j++) {
            if (st[j].err == -ENOENT) {
                rio__detail("chunk %" PRIu64 " of this upload is gone: it went %" PRIu64
                            " s without a write (railio fsck with a shorter --grace?)",
                            b + j, gap / 1000000000u);
                ret = RIO_EGENERATION;
            } else if (st[j].err < 0) {
                ret = st[j].err;
            }
        }
    }
    rio__free(names);
    return ret;
}

int rio__rados_put_expect(struct rio_transport *tt, void *upload, uint64_t gen)
{
    struct rupload *up = upload;
    (void)tt;
    if (!up || up->magic != UPLOAD_MAGIC || !gen)
        return RIO_EINVAL;
    up->put_if = gen;
    return 0;
}

int rio__rados_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct rupload *up = upload;
    struct rio__rados_head old;
    bool had_old = false;
    char *buf = NULL;
    size_t len;
    int ret;

    if (!up || up->magic != UPLOAD_MAGIC)
        return RIO_EINVAL;
    ret = RIO_EINVAL;
    if (!d || (d->nchunks && !d->xxh))
        goto err;
    if (up->stream) {
        ret = stream_close(up, d);
        if (ret < 0)
            goto err;
    }
    ret = rio__put_commit_desc(d, up->key, up->size, up->chunk_size, up->nchunks);
    if (ret < 0)
        goto err;
    ret = RIO_EPROTO;
    for (uint64_t i = 0; i < up->nchunks; i++)
        if (!up->done[i])
            goto err; /* a chunk never landed: nothing to publish */
    ret = stall_check(t, up);
    if (ret < 0)
        goto err;
    ret = head_build(t, up, d, &buf, &len);
    if (ret < 0)
        goto err;
    struct rio__rados_head sum = {.generation = up->generation, .size = up->size};
    memcpy(sum.etag, d->etag, sizeof(sum.etag));
    sum.etag[sizeof(sum.etag) - 1] = '\0';
    ret = rio__rados_head_swap_pre(t, up->key, buf, len, &sum, up, up->put_if, &old, &had_old);
    rio__free(buf);
    if (ret < 0)
        goto err;
    d->generation = up->generation;
    if (had_old) {
        if (old.generation != up->generation) {
            struct ridx_drop dp;
            rio__rados_idx_drop_send(t, up->key, old.generation, &dp);
            rio__rados_remove_head_chunks(t, up->key, &old, NULL);
            rio__rados_idx_drop_wait(&dp);
        }
        rio__rados_head_cleanup(&old);
    }
    rio__rados_upload_free(up);
    return 0;
err:
    rio__rados_upload_discard(t, up);
    return ret;
}
