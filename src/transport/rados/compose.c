/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: compose, an object made of other objects' chunks without
 * copying a byte (docs/rados.md "Composed objects"). The sources' chunk
 * objects stay where they are; the new object's head (version 2) lists
 * them by name. Possible when the geometry is uniform: every source shares
 * one chunk size and every source but the last is a whole number of
 * chunks, so chunk i of the result covers [i x chunk_size, ...) as in any
 * object; the last may instead be one chunk of its own size, no longer
 * than the others' chunk size. Otherwise RIO_ENOTSUP, nothing changed, and the caller copies.
 *
 *   1. the sources' heads are read (and checked against the generations
 *      the caller expects);
 *   2. each source chunk is lent to the new generation G: one write op
 *      per chunk (assert it exists, set xattr rio.owner = G), which also
 *      makes its mtime new, so a `railio fsck` running meanwhile finds it
 *      young. A chunk already removed fails the compose (RIO_EGENERATION);
 *   3. the head goes in as any commit does (head-last, compare on rio.gen):
 *      the linearization point; a condition on dst (dst_if: absent, or a
 *      generation) is checked there as a PUT's is (commit.c), and once
 *      before step 2 so that a compose it refuses lends nothing but in a
 *      race (what a refused one lent: as a failed compose's, below);
 *   4. the sources' heads are removed (compare on rio.gen, head only).
 *
 * Ownership: a chunk with no rio.owner belongs to the head its name is
 * derived from; one with rio.owner = G to the composed object of
 * generation G. Every removal after a head is replaced or deleted compares
 * rio.owner first (meta.c), so a source replaced or deleted after step 2
 * (an UploadPart sent again, an Abort, a crash before step 4 then an
 * Abort) never takes a lent chunk, and a composed object's removal takes
 * only the chunks lent to its own generation. A crash before step 3 leaves
 * the sources whole (composable again); after it, the object whole. What a
 * failed compose lent and nobody committed is named by its source's head
 * while that head lives, then by none: `railio fsck` removes it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <rados/librados.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "core/key.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/head.h"
#include "transport/rados/internal.h"
#include "transport/transport.h"

#define COMPOSE_SRCS_MAX 10000u
#define SRC_READ (16u << 10) /* a source's head read at once; a larger one again whole */

/* The sources' heads, and the composed head being built from them. */
struct compose {
    struct rio__rados_head *src;
    const char *const *keys; /* the sources' */
    unsigned n;
    struct rio__rados_head h; /* the new head: pools, chunk_pool, xxh, names */
    int map[MAX_HEAD_POOLS];  /* h's pool index -> transport pool index */
};

static void compose_free(struct compose *c)
{
    for (unsigned i = 0; i < c->n; i++)
        rio__rados_head_cleanup(&c->src[i]);
    rio__free(c->src);
    /* h's pool names point into the transport's table, its names into the
     * sources' heads: only its own arrays are freed. */
    rio__free(c->h.chunk_pool);
    rio__free(c->h.xxh);
    rio__free(c->h.names);
}

/* h's pool index for transport pool pi, adding it: -1 past the limit. */
static int pool_slot(struct rados_transport *t, struct compose *c, int pi)
{
    for (unsigned i = 0; i < c->h.npools; i++)
        if (c->map[i] == pi)
            return (int)i;
    if (c->h.npools == MAX_HEAD_POOLS)
        return -1;
    c->map[c->h.npools] = pi;
    c->h.pools[c->h.npools] = t->pools[pi].name;
    return (int)c->h.npools++;
}

/* Whether the last source s ends an object of chunk size cs: chunks of cs
 * (the last of them partial or not), or a single chunk of any chunk size
 * no longer than cs (then it is exactly the object's last chunk: a part
 * the S3 gateway wrote as one chunk, docs/gateway.md), or nothing. */
static bool last_fits(const struct rio__rados_head *s, uint64_t cs)
{
    return s->chunk_size == cs || s->nchunks == 0 || (s->nchunks == 1 && s->size <= cs);
}

/* The new head from the sources: RIO_ENOTSUP when their geometry is not
 * uniform (or the result would not fit one head). Every source but the
 * last is a whole number of chunks of the first one's chunk size; the last
 * fits after them (last_fits). */
static int compose_build(struct rados_transport *t, struct compose *c)
{
    struct rio__rados_head *h = &c->h;
    uint64_t k = 0;

    h->chunk_size = c->src[0].chunk_size;
    for (unsigned i = 0; i < c->n; i++) {
        const struct rio__rados_head *s = &c->src[i];
        if (i + 1 < c->n ? s->chunk_size != h->chunk_size || s->size % s->chunk_size != 0
                         : !last_fits(s, h->chunk_size))
            return RIO_ENOTSUP;
        if (__builtin_add_overflow(h->size, s->size, &h->size) || h->size > INT64_MAX)
            return RIO_ENOTSUP;
        h->nchunks += s->nchunks;
    }
    if (h->nchunks > (uint64_t)RIO_RADOS_HEAD_MAX / 64u)
        return RIO_ENOTSUP;
    if (!h->nchunks)
        return 0;
    h->chunk_pool = rio__malloc((size_t)h->nchunks);
    h->xxh = rio__malloc((size_t)h->nchunks * sizeof(*h->xxh));
    h->names = rio__malloc((size_t)h->nchunks * sizeof(*h->names));
    if (!h->chunk_pool || !h->xxh || !h->names)
        return -ENOMEM;
    for (unsigned i = 0; i < c->n; i++) {
        struct rio__rados_head *s = &c->src[i];
        int pm[MAX_HEAD_POOLS];
        for (unsigned p = 0; p < s->npools; p++) {
            int pi = rio__rados_pool_get(t, s->pools[p]);
            if (pi < 0)
                return pi;
            pm[p] = pool_slot(t, c, pi);
            if (pm[p] < 0)
                return RIO_ENOTSUP; /* more pools than one head names */
        }
        if (!s->names && s->nchunks) {
            /* Version 1: the derived names, kept for the new head. */
            size_t kl = strlen(c->keys[i]);
            s->names = rio__malloc((size_t)s->nchunks * sizeof(char *));
            s->name_buf = rio__malloc((size_t)s->nchunks * (kl + 35));
            if (!s->names || !s->name_buf)
                return -ENOMEM;
            for (uint64_t j = 0; j < s->nchunks; j++) {
                s->names[j] = s->name_buf + j * (kl + 35);
                rio__rados_chunk_name(s->names[j], kl + 35, c->keys[i], s->generation, j);
            }
        }
        for (uint64_t j = 0; j < s->nchunks; j++, k++) {
            h->chunk_pool[k] = (uint8_t)pm[s->chunk_pool[j]];
            h->xxh[k] = s->xxh[j];
            h->names[k] = s->names[j];
        }
    }
    return 0;
}

/* Send write op to object name of io with a new completion in *comp;
 * on failure nothing is in flight (op stays the caller's). */
static int op_send(rados_ioctx_t io, const char *name, rados_write_op_t op,
                   rados_completion_t *comp)
{
    int r = rados_aio_create_completion2(NULL, NULL, comp);

    if (r == 0 && (r = rados_aio_write_op_operate(op, io, *comp, name, NULL, WOP_FLAGS)) < 0)
        rados_aio_release(*comp);
    return r;
}

/* Wait for comp and release it (and op, when set): the op's result. */
static int op_wait(rados_completion_t comp, rados_write_op_t op)
{
    rados_aio_wait_for_complete(comp);
    int r = rados_aio_get_return_value(comp);
    rados_aio_release(comp);
    if (op)
        rados_release_write_op(op);
    return r;
}

/* Step 1: the sources' heads, REMOVE_WINDOW reads in flight (a head larger
 * than SRC_READ read again on its own), each checked against the
 * generation expected (gens[i], 0: any). */
static int read_sources(struct rados_transport *t, struct compose *c, const uint64_t *gens)
{
    rados_completion_t comp[REMOVE_WINDOW];
    char *buf = rio__malloc((size_t)REMOVE_WINDOW * SRC_READ);
    int ret = 0;

    if (!buf)
        return -ENOMEM;
    for (unsigned b = 0; b < c->n && ret == 0; b += REMOVE_WINDOW) {
        unsigned k = c->n - b < REMOVE_WINDOW ? c->n - b : REMOVE_WINDOW, sent = 0;
        for (; sent < k; sent++) {
            int r = rados_aio_create_completion2(NULL, NULL, &comp[sent]);
            if (r == 0) {
                r = rados_aio_read(t->head_io, c->keys[b + sent], comp[sent],
                                   buf + (size_t)sent * SRC_READ, SRC_READ, 0);
                if (r < 0)
                    rados_aio_release(comp[sent]);
            }
            if (r < 0) {
                ret = rio__rados_xlate(r);
                break;
            }
        }
        for (unsigned j = 0; j < sent; j++) {
            int r = op_wait(comp[j], NULL);
            struct rio__rados_head *h = &c->src[b + j];
            if (ret < 0)
                continue;
            if (r == -ENOENT)
                ret = RIO_ENOTFOUND;
            else if (r < 0)
                ret = rio__rados_xlate(r);
            else if ((unsigned)r >= SRC_READ)
                ret = rio__rados_head_read(t, c->keys[b + j], h, NULL);
            else
                ret =
                    rio__rados_head_parse(buf + (size_t)j * SRC_READ, (size_t)r, c->keys[b + j], h);
            if (ret == 0 && gens && gens[b + j] && h->generation != gens[b + j])
                ret = RIO_EGENERATION;
        }
    }
    rio__free(buf);
    return ret;
}

/* Step 2: lend every chunk of h to its generation, REMOVE_WINDOW write ops
 * in flight: 0, RIO_EGENERATION when one is gone, or the error. */
static int lend(struct rados_transport *t, struct compose *c)
{
    rados_completion_t comp[REMOVE_WINDOW];
    rados_write_op_t op[REMOVE_WINDOW];
    char owner[17];
    int ret = 0;

    snprintf(owner, sizeof(owner), "%016" PRIx64, c->h.generation);
    for (uint64_t b = 0; b < c->h.nchunks && ret == 0; b += REMOVE_WINDOW) {
        size_t k = c->h.nchunks - b < REMOVE_WINDOW ? (size_t)(c->h.nchunks - b) : REMOVE_WINDOW;
        size_t sent = 0;
        for (; sent < k; sent++) {
            uint64_t i = b + sent;
            int r = -ENOMEM;
            op[sent] = rados_create_write_op();
            if (op[sent]) {
                rados_write_op_assert_exists(op[sent]);
                rados_write_op_setxattr(op[sent], RIO_RADOS_OWNER_XATTR, owner, 16);
                r = op_send(t->pools[c->map[c->h.chunk_pool[i]]].io[0], c->h.names[i], op[sent],
                            &comp[sent]);
            }
            if (r < 0) {
                if (op[sent])
                    rados_release_write_op(op[sent]);
                ret = rio__rados_xlate(r);
                break;
            }
        }
        for (size_t j = 0; j < sent; j++) {
            int r = op_wait(comp[j], op[j]);
            if (r == -ENOENT && ret == 0) {
                rio__detail("chunk %s is gone: its object was replaced or removed meanwhile",
                            c->h.names[b + j]);
                ret = RIO_EGENERATION;
            } else if (r < 0 && ret == 0) {
                ret = rio__rados_xlate(r);
            }
        }
    }
    return ret;
}

/* Step 4: remove each source's head if it still is the generation composed
 * (heads only: their chunks are the new object's now), REMOVE_WINDOW at a
 * time. Best effort: a source replaced meanwhile is its new writer's, and
 * one left behind takes none of the lent chunks with it. */
static void drop_sources(struct rados_transport *t, const struct compose *c)
{
    rados_completion_t comp[REMOVE_WINDOW];
    rados_write_op_t op[REMOVE_WINDOW];
    const char *keys[REMOVE_WINDOW];
    uint64_t gens[REMOVE_WINDOW];
    unsigned at[REMOVE_WINDOW];
    char hex[17];

    for (unsigned b = 0; b < c->n; b += REMOVE_WINDOW) {
        unsigned k = c->n - b < REMOVE_WINDOW ? c->n - b : REMOVE_WINDOW, sent = 0, nd = 0;
        for (unsigned j = 0; j < k; j++) {
            op[sent] = rados_create_write_op();
            if (!op[sent])
                continue;
            snprintf(hex, sizeof(hex), "%016" PRIx64, c->src[b + j].generation);
            rados_write_op_cmpxattr(op[sent], RIO_RADOS_GEN_XATTR, LIBRADOS_CMPXATTR_OP_EQ, hex,
                                    16);
            rados_write_op_remove(op[sent]);
            if (op_send(t->head_io, c->keys[b + j], op[sent], &comp[sent]) < 0)
                rados_release_write_op(op[sent]);
            else
                at[sent++] = b + j;
        }
        for (unsigned j = 0; j < sent; j++) {
            int r = op_wait(comp[j], op[j]);
            /* That generation is no head now (removed, or another there):
             * its index entry goes. Any other outcome keeps it. */
            if (r == 0 || r == -ENOENT || r == -ECANCELED || r == -ENODATA) {
                keys[nd] = c->keys[at[j]];
                gens[nd++] = c->src[at[j]].generation;
            }
        }
        rio__rados_idx_drop_many(t, keys, gens, nd);
    }
}

int rio__rados_compose(struct rio_transport *tt, const char *dst, const char *const *srcs,
                       const uint64_t *gens, unsigned n, unsigned flags, uint64_t dst_if,
                       struct rio_desc *out)
{
    struct rados_transport *t = (struct rados_transport *)tt;
    struct compose c = {.keys = srcs};
    struct rio__rados_head old;
    bool had_old = false;
    char *buf = NULL;
    size_t len, keylen;
    int ret;

    if (!out || !srcs || n == 0 || n > COMPOSE_SRCS_MAX || (flags & ~RIO_COMPOSE_KEEP_SOURCES))
        return RIO_EINVAL;
    ret = rio__key_len(dst, &keylen);
    for (unsigned i = 0; i < n && ret == 0; i++) {
        size_t kl;
        ret = rio__key_len(srcs[i], &kl);
        if (ret == 0 && strcmp(srcs[i], dst) == 0)
            ret = RIO_EINVAL; /* its head would replace a source's */
    }
    if (ret < 0)
        return ret;
    c.src = rio__calloc(n, sizeof(*c.src));
    if (!c.src)
        return -ENOMEM;
    c.n = n; /* zeroed heads clean up as nothing */
    ret = read_sources(t, &c, gens);
    if (ret < 0)
        goto out;
    ret = compose_build(t, &c);
    if (ret < 0)
        goto out;
    /* A condition on dst that does not hold now fails before any chunk is
     * lent; the swap (step 3) decides it for good. */
    ret = rio__rados_cond_check(t, dst, dst_if);
    if (ret < 0)
        goto out;
    c.h.generation = rio__rados_new_generation(t);
    ret = lend(t, &c);
    if (ret < 0)
        goto out;
    ret = rio__rados_head_format(dst, &c.h, &buf, &len);
    if (ret < 0)
        goto out;
    ret = rio__rados_head_swap(t, dst, buf, len, &c.h, dst_if, &old, &had_old);
    rio__free(buf);
    if (ret < 0)
        goto out;
    if (had_old) {
        if (old.generation != c.h.generation) {
            struct ridx_drop dp;
            rio__rados_idx_drop_send(t, dst, old.generation, &dp);
            rio__rados_remove_head_chunks(t, dst, &old, &c.h);
            rio__rados_idx_drop_wait(&dp);
        }
        rio__rados_head_cleanup(&old);
    }
    if (!(flags & RIO_COMPOSE_KEEP_SOURCES))
        drop_sources(t, &c);
    memset(out, 0, sizeof(*out));
    memcpy(out->key, dst, keylen + 1);
    out->generation = c.h.generation;
    out->size = c.h.size;
    out->chunk_size = c.h.chunk_size;
    out->nchunks = c.h.nchunks;
    out->xxh = c.h.xxh;
    c.h.xxh = NULL;
out:
    compose_free(&c);
    return ret;
}
