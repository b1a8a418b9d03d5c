/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's head cache (docs/gateway.md, "GET and the head cache"), on
 * rados:// backends only (gateway.c): the descriptors and last-modified
 * times of recently read or written objects, so that the ranged GETs of one
 * object (the aws CLI's and railio's parallel parts) do not each read its
 * head again. Small and bounded: HC_SLOTS slots, direct mapped by a hash of
 * the key (a key evicts whatever held its slot), none for objects of more
 * than HC_CHUNKS_MAX chunks, each entry good for --s3-head-cache at most.
 *
 * An entry is a hint, never the answer: a GET served from it still reads
 * the generation it names, chunk by chunk, each verified against the
 * entry's checksums. A key replaced or removed since (through any gateway)
 * has had that generation's chunks removed before its PUT or DELETE was
 * acknowledged, so the read fails RIO_EGENERATION before any byte is sent
 * and the GET drops the entry and looks the key up again (ops.c). An empty
 * object has no chunk to fail on, so it is never cached. The TTL bounds
 * what a replacing PUT whose chunk removal failed (and left the old chunks
 * in place) could still serve: the old, whole, verified version, for at
 * most that long.
 *
 * An entry also keeps the object's metadata record (or that it has none),
 * so that a GET or HEAD of a cached object reads no record from the
 * backend. A record describes one generation and is written once for it,
 * after its commit, so the entry keeps it for that generation only: any
 * lookup that finds another generation reads the record again. What the
 * TTL bounds: a record another gateway writes after a GET here found the
 * object already committed and no record yet (its PUT's second write), or
 * one removed or rewritten behind the gateway's back. Writes through this
 * gateway (PUT, Copy, Complete, Delete) replace or drop the entry after
 * their record is written or removed, and bump the slot's epoch, so that a
 * GET that read the record before cannot put its stale answer back.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"

#define HC_SLOTS 256u
#define HC_CHUNKS_MAX 4096u     /* 32 KiB of checksums: at most 8 MiB in all */
#define HC_TTL_NS 1000000000ull /* the default of --s3-head-cache */

struct hc_slot {
    char *key; /* NULL: empty */
    struct rio_desc d;
    int64_t mtime_ns;
    uint64_t expires_ns;
    bool meta_known;      /* meta is the record of d's generation */
    struct gw_meta *meta; /* NULL: no record (when meta_known) */
    uint64_t epoch;       /* bumped by every write through the gateway: kept when cleared */
};

static pthread_mutex_t hc_mu = PTHREAD_MUTEX_INITIALIZER;
static struct hc_slot hc[HC_SLOTS]; /* under hc_mu */
static _Atomic uint64_t hc_hits, hc_misses, hc_meta_hits, hc_meta_misses;
static _Atomic uint64_t hc_ttl_ns = HC_TTL_NS; /* 0: off */

void rio__gw_head_ttl(uint64_t ns)
{
    atomic_store(&hc_ttl_ns, ns == UINT64_MAX ? HC_TTL_NS : ns);
}

static struct hc_slot *slot_of(const char *key)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (const unsigned char *p = (const unsigned char *)key; *p; p++)
        h = (h ^ *p) * 0x100000001b3ull;
    return &hc[(h ^ (h >> 29)) % HC_SLOTS];
}

static void slot_clear_locked(struct hc_slot *s)
{
    uint64_t epoch = s->epoch;

    rio__free(s->key);
    rio_desc_cleanup(&s->d);
    rio__gw_meta_free(s->meta);
    memset(s, 0, sizeof(*s));
    s->epoch = epoch;
}

/* The live entry of key, or NULL (an expired one is cleared). */
static struct hc_slot *live_locked(const char *key)
{
    struct hc_slot *s = slot_of(key);

    if (!s->key || strcmp(s->key, key) != 0)
        return NULL;
    if (rio__now_ns() >= s->expires_ns) {
        slot_clear_locked(s);
        return NULL;
    }
    return s;
}

/* Does the entry name the object d (generation, size, etag)? */
static bool same_object(const struct hc_slot *s, const struct rio_desc *d)
{
    return d->generation && s->d.generation == d->generation && s->d.size == d->size &&
           strcmp(s->d.etag, d->etag) == 0;
}

/* A copy of d with its own checksum list; -ENOMEM. */
static int desc_copy(struct rio_desc *out, const struct rio_desc *d)
{
    *out = *d;
    out->xxh = NULL;
    if (!d->xxh)
        return 0;
    out->xxh = rio__malloc((size_t)d->nchunks * sizeof(*d->xxh));
    if (!out->xxh)
        return -ENOMEM;
    memcpy(out->xxh, d->xxh, (size_t)d->nchunks * sizeof(*d->xxh));
    return 0;
}

int rio__gw_head_get(const char *key, struct rio_desc *d, int64_t *mtime_ns)
{
    struct hc_slot *s;
    int hit = 0;

    pthread_mutex_lock(&hc_mu);
    s = live_locked(key);
    if (s && desc_copy(d, &s->d) == 0) {
        *mtime_ns = s->mtime_ns;
        hit = 1;
    }
    pthread_mutex_unlock(&hc_mu);
    atomic_fetch_add(hit ? &hc_hits : &hc_misses, 1);
    return hit;
}

/* Make the entry of key: d, mtime, and the record m when known. A reader's
 * (!wrote) leaves a live entry of the same object as it is, record and
 * expiry included; a writer's replaces whatever was there and bumps the
 * slot's epoch. */
static void head_set(const char *key, const struct rio_desc *d, int64_t mtime_ns, bool wrote,
                     bool meta_known, const struct gw_meta *m)
{
    struct hc_slot *s = slot_of(key), n, *live;

    /* Only what a read can prove stale: a generation to name, chunks that
     * go when it goes, checksums to verify them by. */
    uint64_t ttl = atomic_load(&hc_ttl_ns);
    if (!ttl || !d->generation || !d->size || !d->xxh || d->nchunks > HC_CHUNKS_MAX) {
        if (wrote)
            rio__gw_head_drop(key);
        return;
    }
    memset(&n, 0, sizeof(n));
    n.key = rio__strdup(key);
    n.meta_known = meta_known;
    if (meta_known && m) {
        n.meta = rio__gw_meta_dup(m);
        n.meta_known = n.meta != NULL;
    }
    if (!n.key || desc_copy(&n.d, d) < 0) {
        rio__free(n.key);
        rio__gw_meta_free(n.meta);
        if (wrote)
            rio__gw_head_drop(key);
        return;
    }
    n.mtime_ns = mtime_ns;
    n.expires_ns = rio__now_ns() + ttl;
    pthread_mutex_lock(&hc_mu);
    live = wrote ? NULL : live_locked(key);
    if (live && same_object(live, d)) {
        pthread_mutex_unlock(&hc_mu);
        rio__free(n.key);
        rio_desc_cleanup(&n.d);
        rio__gw_meta_free(n.meta);
        return;
    }
    slot_clear_locked(s);
    n.epoch = s->epoch + (wrote ? 1 : 0);
    *s = n;
    pthread_mutex_unlock(&hc_mu);
}

void rio__gw_head_put(const char *key, const struct rio_desc *d, int64_t mtime_ns)
{
    head_set(key, d, mtime_ns, false, false, NULL);
}

void rio__gw_head_wrote(const char *key, const struct rio_desc *d, int64_t mtime_ns,
                        const struct gw_meta *m)
{
    head_set(key, d, mtime_ns, true, true, m);
}

uint64_t rio__gw_head_epoch(const char *key)
{
    uint64_t e;

    pthread_mutex_lock(&hc_mu);
    e = slot_of(key)->epoch;
    pthread_mutex_unlock(&hc_mu);
    return e;
}

int rio__gw_head_meta_known(const char *key)
{
    struct hc_slot *s;
    int known;

    if (!atomic_load(&hc_ttl_ns))
        return 0;
    pthread_mutex_lock(&hc_mu);
    s = live_locked(key);
    known = s && s->meta_known;
    pthread_mutex_unlock(&hc_mu);
    return known;
}

int rio__gw_head_meta(const char *key, const struct rio_desc *d, struct gw_meta **m)
{
    struct hc_slot *s;
    int hit = 0;

    *m = NULL;
    if (!atomic_load(&hc_ttl_ns))
        return 0;
    pthread_mutex_lock(&hc_mu);
    s = live_locked(key);
    if (s && s->meta_known && same_object(s, d)) {
        *m = s->meta ? rio__gw_meta_dup(s->meta) : NULL;
        hit = !s->meta || *m;
    }
    pthread_mutex_unlock(&hc_mu);
    atomic_fetch_add(hit ? &hc_meta_hits : &hc_meta_misses, 1);
    return hit;
}

void rio__gw_head_set_meta(const char *key, const struct rio_desc *d, const struct gw_meta *m,
                           uint64_t epoch)
{
    struct gw_meta *copy = m ? rio__gw_meta_dup(m) : NULL;
    struct hc_slot *s;

    if (m && !copy)
        return;
    pthread_mutex_lock(&hc_mu);
    s = live_locked(key);
    if (s && !s->meta_known && s->epoch == epoch && same_object(s, d)) {
        s->meta = copy;
        s->meta_known = true;
        copy = NULL;
    }
    pthread_mutex_unlock(&hc_mu);
    rio__gw_meta_free(copy);
}

void rio__gw_head_drop(const char *key)
{
    struct hc_slot *s = slot_of(key);

    pthread_mutex_lock(&hc_mu);
    if (s->key && strcmp(s->key, key) == 0)
        slot_clear_locked(s);
    s->epoch++; /* whatever key held it: a reader's record is stale */
    pthread_mutex_unlock(&hc_mu);
}

void rio__gw_head_clear(void)
{
    pthread_mutex_lock(&hc_mu);
    for (unsigned i = 0; i < HC_SLOTS; i++)
        slot_clear_locked(&hc[i]);
    pthread_mutex_unlock(&hc_mu);
}

void rio__gw_head_counts(uint64_t *hits, uint64_t *misses)
{
    *hits = atomic_load(&hc_hits);
    *misses = atomic_load(&hc_misses);
}

void rio__gw_head_meta_counts(uint64_t *hits, uint64_t *misses)
{
    *hits = atomic_load(&hc_meta_hits);
    *misses = atomic_load(&hc_meta_misses);
}
