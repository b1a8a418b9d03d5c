/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: the placement cache. A lookup records which pool holds each
 * chunk of (key, generation) as the head says, so the READs that follow find
 * them even when the head's pools are not this client's. Bounded (LRU), under
 * t->cache_mu.
 */
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "transport/rados/internal.h"

uint64_t rio__rados_hash_key(const char *key, size_t len, uint64_t gen)
{
    uint64_t h = 0xcbf29ce484222325ull ^ gen;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 0x100000001b3ull;
    return h ^ (h >> 29);
}

/* ------------------------------------------------------ placement cache */

void rio__rados_centry_free(struct centry *e)
{
    if (!e)
        return;
    rio__free(e->chunk_pool);
    rio__free(e);
}

static void lru_unlink_locked(struct rados_transport *t, struct centry *e)
{
    if (e->lprev)
        e->lprev->lnext = e->lnext;
    else
        t->lru_head = e->lnext;
    if (e->lnext)
        e->lnext->lprev = e->lprev;
    else
        t->lru_tail = e->lprev;
    e->lprev = e->lnext = NULL;
}

static void lru_push_locked(struct rados_transport *t, struct centry *e)
{
    e->lprev = NULL;
    e->lnext = t->lru_head;
    if (t->lru_head)
        t->lru_head->lprev = e;
    t->lru_head = e;
    if (!t->lru_tail)
        t->lru_tail = e;
}

static struct centry **cache_slot_locked(struct rados_transport *t, const char *key, size_t keylen,
                                         uint64_t gen, uint64_t h)
{
    struct centry **pp = &t->cbuckets[h % CACHE_BUCKETS];
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->hash == h && (*pp)->generation == gen && (*pp)->keylen == keylen &&
            memcmp((*pp)->key, key, keylen) == 0)
            break;
    return pp;
}

/* Insert e (replacing an equal entry); evicts the least recently used. */
void rio__rados_cache_put(struct rados_transport *t, struct centry *e)
{
    struct centry *old, *victim = NULL;
    struct centry **pp;

    pthread_mutex_lock(&t->cache_mu);
    pp = cache_slot_locked(t, e->key, e->keylen, e->generation, e->hash);
    old = *pp;
    if (old) {
        *pp = old->hnext;
        lru_unlink_locked(t, old);
        t->ncache--;
    }
    e->hnext = t->cbuckets[e->hash % CACHE_BUCKETS];
    t->cbuckets[e->hash % CACHE_BUCKETS] = e;
    lru_push_locked(t, e);
    t->ncache++;
    if (t->ncache > CACHE_MAX) {
        victim = t->lru_tail;
        lru_unlink_locked(t, victim);
        pp = cache_slot_locked(t, victim->key, victim->keylen, victim->generation, victim->hash);
        *pp = victim->hnext;
        t->ncache--;
    }
    pthread_mutex_unlock(&t->cache_mu);
    rio__rados_centry_free(old);
    rio__rados_centry_free(victim);
}

/* Transport pool index of chunk index of (key, gen), or -1 if not cached. */
int rio__rados_cache_pool_of(struct rados_transport *t, const char *key, uint64_t gen,
                             uint64_t index)
{
    size_t keylen = strlen(key);
    uint64_t h = rio__rados_hash_key(key, keylen, gen);
    struct centry *e;
    int pi = -1;

    pthread_mutex_lock(&t->cache_mu);
    e = *cache_slot_locked(t, key, keylen, gen, h);
    if (e && index < e->nchunks) {
        unsigned hp = e->chunk_pool ? e->chunk_pool[index] : (unsigned)(index % e->npools);
        pi = e->map[hp];
        if (e != t->lru_head) {
            lru_unlink_locked(t, e);
            lru_push_locked(t, e);
        }
    }
    pthread_mutex_unlock(&t->cache_mu);
    return pi;
}

void rio__rados_cache_clear(struct rados_transport *t)
{
    struct centry *e = t->lru_head;
    while (e) {
        struct centry *n = e->lnext;
        rio__rados_centry_free(e);
        e = n;
    }
    t->lru_head = t->lru_tail = NULL;
    memset(t->cbuckets, 0, sizeof(t->cbuckets));
    t->ncache = 0;
}
