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
