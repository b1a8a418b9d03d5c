/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: the placement cache. A lookup records which pool holds each
 * chunk of (key, generation) as the head says, so the READs that follow find
 * them even when the head's pools are not this client's. Bounded (LRU), under
 * t->cache_mu.
 */
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
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
    rio__free(e->names);
    rio__free(e->name_buf);
    rio__free(e);
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
        rio_list_remove(&t->lru, &old->lru);
    }
    e->hnext = t->cbuckets[e->hash % CACHE_BUCKETS];
    t->cbuckets[e->hash % CACHE_BUCKETS] = e;
    rio_list_push_front(&t->lru, &e->lru);
    if (t->lru.count > CACHE_MAX) {
        victim = rio_container_of(t->lru.tail, struct centry, lru);
        rio_list_remove(&t->lru, &victim->lru);
        pp = cache_slot_locked(t, victim->key, victim->keylen, victim->generation, victim->hash);
        *pp = victim->hnext;
    }
    pthread_mutex_unlock(&t->cache_mu);
    rio__rados_centry_free(old);
    rio__rados_centry_free(victim);
}

/* Transport pool index of chunk index of (key, gen), or -1 if not cached;
 * its object name in name (cap bytes) when the head lists it (version 2),
 * else name[0] = '\0' (the derived name). */
int rio__rados_cache_pool_of(struct rados_transport *t, const char *key, uint64_t gen,
                             uint64_t index, char *name, size_t cap)
{
    size_t keylen = strlen(key);
    uint64_t h = rio__rados_hash_key(key, keylen, gen);
    struct centry *e;
    int pi = -1;

    name[0] = '\0';
    pthread_mutex_lock(&t->cache_mu);
    e = *cache_slot_locked(t, key, keylen, gen, h);
    if (e && index < e->nchunks) {
        unsigned hp = e->chunk_pool ? e->chunk_pool[index] : (unsigned)(index % e->npools);
        pi = e->map[hp];
        if (e->names && snprintf(name, cap, "%s", e->names[index]) >= (int)cap) {
            name[0] = '\0';
            pi = -1;
        }
        if (&e->lru != t->lru.head) {
            rio_list_remove(&t->lru, &e->lru);
            rio_list_push_front(&t->lru, &e->lru);
        }
    }
    pthread_mutex_unlock(&t->cache_mu);
    return pi;
}

/* ------------------------------------------------- chunks found missing */

static bool missing_of_key_locked(const struct rmissing *m, const char *key, size_t keylen)
{
    return m->used && m->keylen == keylen && memcmp(m->key, key, keylen) == 0;
}

void rio__rados_missing_note(struct rados_transport *t, const char *key, uint64_t gen,
                             uint64_t index)
{
    size_t keylen = strlen(key);
    struct rmissing *m;

    if (keylen > RIO_KEY_MAX)
        return;
    pthread_mutex_lock(&t->cache_mu);
    for (unsigned i = 0; i < MISSING_MAX; i++) {
        m = &t->missing[i];
        if (missing_of_key_locked(m, key, keylen) && m->generation == gen && m->index == index)
            goto out;
    }
    /* Full: the oldest record goes; a miss forgotten costs only the
     * retries it would have saved. */
    m = &t->missing[t->missing_next++ % MISSING_MAX];
    m->used = true;
    m->generation = gen;
    m->index = index;
    m->keylen = keylen;
    memcpy(m->key, key, keylen + 1);
out:
    pthread_mutex_unlock(&t->cache_mu);
}

int rio__rados_missing_find(struct rados_transport *t, const char *key, uint64_t gen,
                            uint64_t *index)
{
    size_t keylen = strlen(key);
    int found = 0;

    pthread_mutex_lock(&t->cache_mu);
    for (unsigned i = 0; i < MISSING_MAX; i++) {
        struct rmissing *m = &t->missing[i];
        if (!missing_of_key_locked(m, key, keylen))
            continue;
        if (m->generation != gen) {
            m->used = false;
        } else if (!found) {
            *index = m->index;
            found = 1;
        }
    }
    pthread_mutex_unlock(&t->cache_mu);
    return found;
}

void rio__rados_missing_forget(struct rados_transport *t, const char *key, uint64_t gen,
                               uint64_t index)
{
    size_t keylen = strlen(key);

    pthread_mutex_lock(&t->cache_mu);
    for (unsigned i = 0; i < MISSING_MAX; i++) {
        struct rmissing *m = &t->missing[i];
        if (missing_of_key_locked(m, key, keylen) && m->generation == gen && m->index == index)
            m->used = false;
    }
    pthread_mutex_unlock(&t->cache_mu);
}

void rio__rados_cache_clear(struct rados_transport *t)
{
    for (struct rio_list_node *n; (n = rio_list_pop_front(&t->lru));)
        rio__rados_centry_free(rio_container_of(n, struct centry, lru));
    memset(t->cbuckets, 0, sizeof(t->cbuckets));
}
