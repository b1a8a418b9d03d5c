/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * railiod's object table (src/server/otab.c) against a model: random
 * inserts, replacements and removals through many doublings; every key
 * must be found where it is and nowhere else, whether its bucket has moved
 * yet or not, and rio__srv_otab_each must visit each object once. A
 * doubling must move its buckets a few per insert (the table's lock held
 * for microseconds, not a walk of every object).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checksum.h"
#include "server/server.h"
#include "t.h"

#define N 20000

static struct rio_srv_obj objs[N];
static char keys[N][12];
static int in[N];

static void count_each(struct rio_srv_obj *o, void *arg)
{
    unsigned *seen = arg;
    seen[o - objs]++;
}

static void check_all(struct rio_srv_otab *t)
{
    static unsigned seen[N];

    memset(seen, 0, sizeof(seen));
    rio__srv_otab_each(t, count_each, seen);
    for (unsigned i = 0; i < N; i++) {
        struct rio_srv_obj *o = *rio__srv_otab_slot(t, keys[i], objs[i].key_len);
        T_EQ(o == &objs[i], in[i]);
        if (!in[i])
            T_NULL(o);
        T_EQ(seen[i], (unsigned)in[i]);
    }
}

TEST(matches_a_model_through_doublings)
{
    struct rio_srv_otab t;
    size_t nobj = 0, doublings = 0, checks = 0;

    srand(11);
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "k%u", i);
        memset(&objs[i], 0, sizeof(objs[i]));
        objs[i].key = keys[i];
        objs[i].key_len = (uint16_t)strlen(keys[i]);
    }
    T_EQ(rio__srv_otab_init(&t, 16), 0);
    for (unsigned step = 0; step < 6 * N; step++) {
        unsigned i = (unsigned)rand() % N;
        struct rio_srv_obj **slot = rio__srv_otab_slot(&t, keys[i], objs[i].key_len);
        if (in[i] && rand() % 3 == 0) {
            T_TRUE(*slot == &objs[i]);
            *slot = objs[i].hnext;
            objs[i].hnext = NULL;
            in[i] = 0;
            nobj--;
            continue;
        }
        if (in[i]) {
            T_TRUE(*slot == &objs[i]);
            continue;
        }
        T_NULL(*slot);
        objs[i].hnext = *slot;
        *slot = &objs[i];
        in[i] = 1;
        nobj++;
        size_t mask = t.mask, mig = t.mig;
        int moving = t.old != NULL;
        rio__srv_otab_grow(&t, nobj);
        if (t.mask != mask) {
            /* A doubling starts with nothing moved. */
            doublings++;
            T_EQ(t.mask, 2 * mask + 1);
            T_TRUE(t.old != NULL);
            T_EQ(t.old_mask, mask);
            T_EQ(t.mig, 0);
        } else if (moving) {
            /* At most a few buckets an insert. */
            T_TRUE(t.old == NULL || t.mig - mig <= 16);
            T_TRUE(t.old == NULL || t.mig > mig);
        }
        if (step % 997 == 0 || (t.old && t.mig < 40)) {
            check_all(&t);
            checks++;
        }
    }
    check_all(&t);
    T_TRUE(doublings >= 8);
    T_TRUE(checks > 50);
    rio__srv_otab_cleanup(&t);
}

/*
 * Keys crafted to share a bucket: a client knows the unseeded xxh3 of any
 * key, so it could pick keys whose hashes agree in their low bits (all in
 * one bucket of any table up to 65,536 buckets) and make every lookup of
 * them walk one long chain under the table's lock. The table's hash is
 * seeded at random: such keys spread like any others.
 */
#define CRAFTED 64
TEST(crafted_keys_do_not_share_a_bucket)
{
    static struct rio_srv_obj co[CRAFTED];
    static char ck[CRAFTED][24];
    struct rio_srv_otab t;
    unsigned found = 0;

    for (unsigned long long i = 0; found < CRAFTED; i++) {
        char k[24];
        int n = snprintf(k, sizeof(k), "c%llu", i);
        if ((rio__xxh3(k, (size_t)n) & 0xffff) != 0)
            continue;
        memcpy(ck[found], k, (size_t)n + 1);
        co[found].key = ck[found];
        co[found].key_len = (uint16_t)n;
        found++;
    }
    T_EQ(rio__srv_otab_init(&t, 1024), 0);
    for (unsigned i = 0; i < CRAFTED; i++) {
        struct rio_srv_obj **slot = rio__srv_otab_slot(&t, ck[i], co[i].key_len);
        T_NULL(*slot);
        co[i].hnext = *slot;
        *slot = &co[i];
    }
    unsigned longest = 0;
    for (size_t b = 0; b <= t.mask; b++) {
        unsigned len = 0;
        for (struct rio_srv_obj *o = t.tab[b]; o; o = o->hnext)
            len++;
        longest = len > longest ? len : longest;
    }
    printf("%u crafted keys in 1024 buckets: the longest chain holds %u\n", CRAFTED, longest);
    T_TRUE(longest <= 8); /* 64 when the hash was the unseeded xxh3 */
    for (unsigned i = 0; i < CRAFTED; i++)
        T_TRUE(*rio__srv_otab_slot(&t, ck[i], co[i].key_len) == &co[i]);
    rio__srv_otab_cleanup(&t);
}
