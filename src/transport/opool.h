/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An op pool for a transport: elements of one fixed size, carved from slabs
 * that grow when the pool runs dry and are freed only at destroy, so an op
 * costs no allocation on the hot path. get and put are O(1). Not locked:
 * the caller serialises every call on its own lock (the _locked functions
 * of a transport). A free element's first pointer-sized bytes hold the free
 * list; the rest keeps what put left there, so a walk over every element
 * (rio__opool_walk) can tell free ones by a field the owner clears on put.
 */
#ifndef RIO_OPOOL_H
#define RIO_OPOOL_H

#include <stddef.h>

struct rio_opool_slab;

struct rio_opool {
    size_t size;  /* an element, rounded up to max_align_t */
    unsigned per; /* elements a slab holds */
    struct rio_opool_slab *slabs;
    void *free;   /* free list through each element's first bytes */
    size_t cap;   /* elements in every slab */
    size_t nfree; /* on the free list */
    /* rio__opool_hooks: elements that own resources */
    int (*make)(void *e, void *arg);
    void (*unmake)(void *e, void *arg);
    void *arg;
};

/* An empty pool of elements of size bytes (at least a pointer), per_slab
 * to a slab. Allocates nothing. */
void rio__opool_init(struct rio_opool *p, size_t size, unsigned per_slab);
/*
 * For elements that own resources (a curl handle): make runs on each
 * element of a new slab (a failure unmakes the ones made and drops the
 * slab), unmake on every element at destroy, and get no longer zeroes an
 * element, which keeps what it owns from one use to the next. make must
 * leave the first pointer-sized bytes to the pool.
 */
void rio__opool_hooks(struct rio_opool *p, int (*make)(void *e, void *arg),
                      void (*unmake)(void *e, void *arg), void *arg);
/* One slab more on the free list: 0 or -ENOMEM. */
int rio__opool_grow(struct rio_opool *p);
/* A zeroed element (without hooks); grows by one slab when none is free.
 * NULL: -ENOMEM. */
void *rio__opool_get(struct rio_opool *p);
/* Back on the free list (e came from this pool's get). */
void rio__opool_put(struct rio_opool *p, void *e);
/* Every element, free or in use, one a call: begin with a zeroed it; NULL
 * at the end. The pool must not grow during the walk. */
struct rio_opool_it {
    struct rio_opool_slab *s;
    unsigned i;
    int started;
};
void *rio__opool_walk(const struct rio_opool *p, struct rio_opool_it *it);
/* unmake every element, free every slab; the pool is empty again. */
void rio__opool_destroy(struct rio_opool *p);

#endif
