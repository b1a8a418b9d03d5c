/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An object table (the store's, the disk index's): buckets of hnext chains
 * by the hash of the key, doubled when the chains grow long.
 *
 * A doubling does not move every object at once: at a million objects that
 * took 73-124 ms under the table's lock, a stall of every PUT and GET
 * (docs/bench.md). The old buckets are kept beside the new ones and moved a
 * few at a time on the inserts that follow (OTAB_STEP each); until bucket b
 * of the old table has moved (b >= mig), the keys that hash to it are found
 * and inserted there. The next doubling comes after at least twice as many
 * inserts as there are old buckets, so the move is over long before; if it
 * is not, the rest moves at once.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/random.h>

#include <xxhash.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "server/server.h"

/* Old buckets moved per insert: at about two objects a bucket, a few
 * microseconds added to an insert while a doubling is in progress. */
#define OTAB_STEP 16
#define OTAB_MAX ((size_t)1 << 28)

/* Seeded with the table's random seed: the unseeded xxh3 of a key is
 * public, so a client could craft keys that all land in one bucket (a
 * few million hashes of its own for a thousand keys of a table of a
 * million objects) and make each lookup or insert of them walk them all,
 * the table's lock held meanwhile (the store's: every PUT and GET waits). */
static uint64_t key_hash(const struct rio_srv_otab *t, const char *key, uint16_t klen)
{
    return XXH3_64bits_withSeed(key, klen, t->seed);
}

int rio__srv_otab_init(struct rio_srv_otab *t, size_t nbuckets)
{
    memset(t, 0, sizeof(*t));
    t->tab = rio__calloc(nbuckets, sizeof(*t->tab));
    if (!t->tab)
        return -ENOMEM;
    t->mask = nbuckets - 1;
    if (getrandom(&t->seed, sizeof(t->seed), GRND_NONBLOCK) != sizeof(t->seed))
        t->seed = rio__now_ns() ^ (uint64_t)(uintptr_t)t->tab;
    return 0;
}

void rio__srv_otab_cleanup(struct rio_srv_otab *t)
{
    rio__free(t->tab);
    rio__free(t->old);
    memset(t, 0, sizeof(*t));
}

struct rio_srv_obj **rio__srv_otab_slot(struct rio_srv_otab *t, const char *key, uint16_t klen)
{
    uint64_t h = key_hash(t, key, klen);
    struct rio_srv_obj **pp;

    if (t->old && (h & t->old_mask) >= t->mig)
        pp = &t->old[h & t->old_mask];
    else
        pp = &t->tab[h & t->mask];
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->key_len == klen && memcmp((*pp)->key, key, klen) == 0)
            break;
    return pp;
}

/* Move up to n old buckets into the new table; the old array goes when
 * the last has moved. */
static void move_buckets(struct rio_srv_otab *t, size_t n)
{
    for (; n && t->mig <= t->old_mask; n--, t->mig++) {
        struct rio_srv_obj *o = t->old[t->mig], *next;
        t->old[t->mig] = NULL;
        for (; o; o = next) {
            next = o->hnext;
            struct rio_srv_obj **b = &t->tab[key_hash(t, o->key, o->key_len) & t->mask];
            o->hnext = *b;
            *b = o;
        }
    }
    if (t->mig > t->old_mask) {
        rio__free(t->old);
        t->old = NULL;
        t->old_mask = t->mig = 0;
    }
}

void rio__srv_otab_grow(struct rio_srv_otab *t, size_t nobj)
{
    size_t nsize = (t->mask + 1) * 2;
    struct rio_srv_obj **nt;

    if (t->old)
        move_buckets(t, OTAB_STEP);
    if (nobj < 2 * (t->mask + 1) || nsize > OTAB_MAX)
        return;
    /* On allocation failure the table stays as it is: longer chains, no
     * error (the next insert tries again). */
    nt = rio__calloc(nsize, sizeof(*nt));
    if (!nt)
        return;
    if (t->old)
        move_buckets(t, SIZE_MAX);
    t->old = t->tab;
    t->old_mask = t->mask;
    t->mig = 0;
    t->tab = nt;
    t->mask = nsize - 1;
}

void rio__srv_otab_each(struct rio_srv_otab *t, void (*fn)(struct rio_srv_obj *o, void *arg),
                        void *arg)
{
    struct rio_srv_obj **arrays[2] = {t->tab, t->old};
    size_t masks[2] = {t->mask, t->old_mask};

    for (int a = 0; a < 2; a++) {
        if (!arrays[a])
            continue;
        for (size_t i = 0; i <= masks[a]; i++) {
            struct rio_srv_obj *o = arrays[a][i], *next;
            for (; o; o = next) {
                next = o->hnext; /* fn may free o */
                fn(o, arg);
            }
        }
    }
}
