/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 30 */
/* T_LABELS unit */
/*
 * The transports' op pool (src/transport/opool.c): zeroed aligned elements,
 * a slab more only when none is free, put and get reuse without allocating,
 * a walk over every element, and nothing left after destroy.
 */
#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "t.h"
#include "transport/opool.h"

struct elem {
    void *first; /* the pool's while free */
    uint64_t id;
    uint8_t bytes[37];
};

TEST(get_put_grow_walk_destroy)
{
    struct rio_opool p;
    struct elem *e[20];
    int64_t a0 = rio__alloc_outstanding();

    rio__opool_init(&p, sizeof(struct elem), 8);
    T_EQ(p.cap, 0u);
    T_EQ(rio__alloc_outstanding(), a0);
    for (unsigned i = 0; i < 20; i++) {
        e[i] = rio__opool_get(&p);
        T_TRUE(e[i] != NULL);
        T_EQ((uintptr_t)e[i] % alignof(max_align_t), 0u);
        T_EQ(e[i]->id, 0u);
        T_EQ(e[i]->bytes[36], 0u);
        for (unsigned j = 0; j < i; j++)
            T_TRUE(e[j] != e[i]);
        e[i]->id = i + 1;
        memset(e[i]->bytes, 0xab, sizeof(e[i]->bytes));
    }
    T_EQ(p.cap, 24u); /* three slabs of 8 */
    T_EQ(p.nfree, 4u);
    T_EQ(rio__alloc_outstanding(), a0 + 3);

    /* put and get: the same element back, zeroed, no allocation */
    rio__opool_put(&p, e[5]);
    T_EQ(p.nfree, 5u);
    struct elem *again = rio__opool_get(&p);
    T_PTREQ(again, e[5]);
    T_EQ(again->id, 0u);
    T_EQ(again->bytes[0], 0u);
    again->id = 6;
    T_EQ(rio__alloc_outstanding(), a0 + 3);

    /* every element once: 20 in use (ids 1..20), 4 free (id 0) */
    struct rio_opool_it it = {0};
    struct elem *w;
    uint64_t seen = 0;
    unsigned n = 0, nfree = 0;
    while ((w = rio__opool_walk(&p, &it))) {
        n++;
        if (w->id)
            seen |= 1ull << (w->id - 1);
        else
            nfree++;
    }
    T_EQ(n, 24u);
    T_EQ(nfree, 4u);
    T_EQ(seen, (1ull << 20) - 1);

    /* a pool drained back to full grows no more */
    for (unsigned i = 0; i < 20; i++)
        rio__opool_put(&p, e[i]);
    T_EQ(p.nfree, 24u);
    for (unsigned i = 0; i < 24; i++)
        T_TRUE(rio__opool_get(&p) != NULL);
    T_EQ(p.cap, 24u);
    rio__opool_destroy(&p);
    T_EQ(rio__alloc_outstanding(), a0);
    T_EQ(p.cap, 0u);
    struct rio_opool_it it2 = {0};
    T_TRUE(rio__opool_walk(&p, &it2) == NULL);
}

TEST(tiny_elements_hold_the_link)
{
    struct rio_opool p;

    rio__opool_init(&p, 1, 0);
    uint8_t *a = rio__opool_get(&p), *b = rio__opool_get(&p);
    T_TRUE(a && b && a != b);
    T_TRUE(p.size >= sizeof(void *));
    rio__opool_put(&p, a);
    rio__opool_put(&p, b);
    T_PTREQ(rio__opool_get(&p), b);
    T_PTREQ(rio__opool_get(&p), a);
    rio__opool_destroy(&p);
}

struct owner {
    void *link;
    int *res; /* what make allocated, kept across get and put */
    unsigned uses;
};

static int made, unmade, fail_at = -1;

static int make(void *e, void *arg)
{
    struct owner *o = e;

    T_PTREQ(arg, &made);
    if (made == fail_at)
        return -ENOMEM;
    o->res = rio__malloc(sizeof(int));
    if (!o->res)
        return -ENOMEM;
    made++;
    return 0;
}

static void unmake(void *e, void *arg)
{
    struct owner *o = e;

    (void)arg;
    rio__free(o->res);
    o->res = NULL;
    unmade++;
}

/* Elements that own something: made once a slab, kept (not zeroed) from
 * one get to the next, unmade at destroy; a make that fails undoes its
 * slab and get gives NULL. */
TEST(hooks_make_keep_unmake)
{
    struct rio_opool p;
    int64_t a0 = rio__alloc_outstanding();

    rio__opool_init(&p, sizeof(struct owner), 4);
    rio__opool_hooks(&p, make, unmake, &made);
    struct owner *o = rio__opool_get(&p);
    T_TRUE(o != NULL);
    T_EQ(made, 4);
    T_TRUE(o->res != NULL);
    int *res = o->res;
    o->uses = 1;
    rio__opool_put(&p, o);
    o = rio__opool_get(&p);
    T_PTREQ(o->res, res);
    T_EQ(o->uses, 1u);
    for (int i = 0; i < 3; i++)
        T_TRUE(rio__opool_get(&p) != NULL);
    fail_at = 6; /* the third make of the next slab fails */
    T_TRUE(rio__opool_get(&p) == NULL);
    T_EQ(unmade, 2);
    T_EQ(p.cap, 4u);
    T_EQ(rio__alloc_outstanding(), a0 + 1 + 4);
    fail_at = -1;
    T_TRUE(rio__opool_get(&p) != NULL);
    T_EQ(p.cap, 8u);
    rio__opool_destroy(&p);
    T_EQ(unmade, 2 + 8);
    T_EQ(rio__alloc_outstanding(), a0);
}
