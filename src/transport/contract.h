/* SPDX-License-Identifier: Apache-2.0 */
#ifndef RIO_TRANSPORT_CONTRACT_H
#define RIO_TRANSPORT_CONTRACT_H

/* The steps every backend takes the same way at the contract's edges
 * (transport.h): making the head at open, checking put_open's arguments,
 * copying its test counters out. One copy here, so the backends agree. */

#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/key.h"
#include "transport/transport.h"

/* open's first step: url and out checked, a zeroed transport of size bytes
 * (its struct rio_transport first) with ops set, in *t. 0, RIO_EINVAL or
 * -ENOMEM. */
static inline int rio__transport_new(const struct rio_url *url, struct rio_transport **out,
                                     size_t size, const struct rio_transport_ops *ops, void *t)
{
    struct rio_transport *head;

    if (!url || !out)
        return RIO_EINVAL;
    head = rio__calloc(1, size);
    if (!head)
        return -ENOMEM;
    head->ops = ops;
    *(void **)t = head;
    return 0;
}

/* put_open's arguments as the contract takes them: a valid key (its length
 * in *keylen), somewhere to put the upload, a chunk size. 0 or RIO_EINVAL. */
static inline int rio__put_open_args(const char *key, size_t *keylen, uint64_t chunk_size,
                                     void **upload)
{
    int ret = rio__key_len(key, keylen);

    if (ret < 0)
        return ret;
    return !upload || chunk_size == 0 ? RIO_EINVAL : 0;
}

/* put_commit's descriptor describes what put_open was given (after a
 * streaming upload learnt its size): same key and geometry. 0 or RIO_EPROTO. */
static inline int rio__put_commit_desc(const struct rio_desc *d, const char *key, uint64_t size,
                                       uint64_t chunk_size, uint64_t nchunks)
{
    if (d->size != size || d->chunk_size != chunk_size || d->nchunks != nchunks ||
        strcmp(d->key, key) != 0)
        return RIO_EPROTO;
    return 0;
}

/* A snapshot of n bytes of counters under mu; zeros when there is no
 * transport (src NULL), nothing when there is nowhere to put them. */
static inline void rio__counters_copy(pthread_mutex_t *mu, void *out, const void *src, size_t n)
{
    if (!out)
        return;
    if (!src) {
        memset(out, 0, n);
        return;
    }
    pthread_mutex_lock(mu);
    memcpy(out, src, n);
    pthread_mutex_unlock(mu);
}

/* list's arguments as a backend that lists in byte order of key takes them
 * (the engine has checked and clamped them): the prefix ("" none), the key
 * the page starts after ("" none: the token, a key for such a backend,
 * else start_after) and the page size (1..RIO_LIST_PAGE_MAX). */
struct rio__list_span {
    const char *prefix;
    size_t plen;
    const char *after;
    unsigned max;
};

static inline void rio__list_span_of(const struct rio_list_args *a, struct rio__list_span *sp)
{
    sp->prefix = a->prefix ? a->prefix : "";
    sp->plen = strlen(sp->prefix);
    sp->after = a->token && a->token[0] ? a->token : a->start_after ? a->start_after : "";
    sp->max = a->max_keys == 0 || a->max_keys > RIO_LIST_PAGE_MAX ? RIO_LIST_PAGE_MAX : a->max_keys;
}

/* Whether key (klen bytes) belongs in a page of sp: under the prefix and
 * after sp->after in byte order. */
static inline bool rio__list_span_has(const struct rio__list_span *sp, const char *key, size_t klen)
{
    return klen >= sp->plen && memcmp(key, sp->prefix, sp->plen) == 0 &&
           (!sp->after[0] || strcmp(key, sp->after) > 0);
}

/* A transport's path count: the options' paths (the engine fills them from
 * ?paths= and RIO_PATHS), else the URL's param (a backend's own name for its
 * paths, e.g. file's ?queues=), else 1. Sets t->npaths; RIO_EINVAL (the
 * refused value named on stderr) when out of 1..RIO_MAX_PATHS. */
static inline int rio__transport_npaths(struct rio_transport *t, const struct rio_url *u,
                                        const struct rio_options *o, const char *param)
{
    const char *s;
    uint64_t v = 1;

    if (o && o->paths)
        v = o->paths;
    else if ((s = rio__url_param(u, param)) && rio__opt_uint(param, s, 1, RIO_MAX_PATHS, &v) < 0)
        return RIO_EINVAL;
    if (v < 1 || v > RIO_MAX_PATHS)
        return RIO_EINVAL;
    t->npaths = (unsigned)v;
    return 0;
}

#endif
