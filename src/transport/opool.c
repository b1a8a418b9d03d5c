/* SPDX-License-Identifier: Apache-2.0 */
/* The op pool of the transports (opool.h). */
#include <errno.h>
#include <stdalign.h>
#include <stdint.h>
#include <string.h>

#include "core/alloc.h"
#include "transport/opool.h"

struct rio_opool_slab {
    struct rio_opool_slab *next;
    alignas(max_align_t) unsigned char e[];
};

void rio__opool_init(struct rio_opool *p, size_t size, unsigned per_slab)
{
    const size_t a = alignof(max_align_t);

    memset(p, 0, sizeof(*p));
    if (size < sizeof(void *))
        size = sizeof(void *);
    p->size = (size + a - 1) / a * a;
    p->per = per_slab ? per_slab : 1;
}

void rio__opool_hooks(struct rio_opool *p, int (*make)(void *e, void *arg),
                      void (*unmake)(void *e, void *arg), void *arg)
{
    p->make = make;
    p->unmake = unmake;
    p->arg = arg;
}

int rio__opool_grow(struct rio_opool *p)
{
    struct rio_opool_slab *s;
    size_t bytes;
    unsigned i;

    if (__builtin_mul_overflow(p->size, (size_t)p->per, &bytes) ||
        __builtin_add_overflow(bytes, sizeof(*s), &bytes))
        return -ENOMEM;
    s = rio__calloc(1, bytes);
    if (!s)
        return -ENOMEM;
    for (i = 0; p->make && i < p->per; i++) {
        if (p->make(s->e + (size_t)i * p->size, p->arg) < 0) {
            while (p->unmake && i-- > 0)
                p->unmake(s->e + (size_t)i * p->size, p->arg);
            rio__free(s);
            return -ENOMEM;
        }
    }
    s->next = p->slabs;
    p->slabs = s;
    for (i = p->per; i-- > 0;) {
        void *e = s->e + (size_t)i * p->size;

        memcpy(e, &p->free, sizeof(void *));
        p->free = e;
    }
    p->cap += p->per;
    p->nfree += p->per;
    return 0;
}

void *rio__opool_get(struct rio_opool *p)
{
    void *e;

    if (!p->free && rio__opool_grow(p) < 0)
        return NULL;
    e = p->free;
    memcpy(&p->free, e, sizeof(void *));
    p->nfree--;
    if (!p->make)
        memset(e, 0, p->size);
    return e;
}

void rio__opool_put(struct rio_opool *p, void *e)
{
    memcpy(e, &p->free, sizeof(void *));
    p->free = e;
    p->nfree++;
}

void *rio__opool_walk(const struct rio_opool *p, struct rio_opool_it *it)
{
    if (!it->started) {
        it->started = 1;
        it->s = p->slabs;
        it->i = 0;
    } else if (it->s && ++it->i == p->per) {
        it->s = it->s->next;
        it->i = 0;
    }
    return it->s ? it->s->e + (size_t)it->i * p->size : NULL;
}

void rio__opool_destroy(struct rio_opool *p)
{
    while (p->slabs) {
        struct rio_opool_slab *s = p->slabs;

        for (unsigned i = 0; p->unmake && i < p->per; i++)
            p->unmake(s->e + (size_t)i * p->size, p->arg);
        p->slabs = s->next;
        rio__free(s);
    }
    p->free = NULL;
    p->cap = p->nfree = 0;
}
