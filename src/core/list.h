/* SPDX-License-Identifier: Apache-2.0 */
#ifndef RIO_LIST_H
#define RIO_LIST_H

/* One intrusive doubly linked list for every queue and LRU in the tree.
 *
 * A struct embeds a `struct rio_list_node` and gets back to itself with
 * rio_container_of. The list keeps head, tail and a count; the links end in
 * NULL (no sentinel), so a node that is on no list has both links NULL and a
 * zeroed struct is an empty list. The list does no locking: the owner's lock
 * (the `_locked` functions around it) guards it and its nodes. */

#include <stdbool.h>
#include <stddef.h>

struct rio_list_node {
    struct rio_list_node *prev, *next;
};

struct rio_list {
    struct rio_list_node *head, *tail;
    size_t count;
};

#define rio_container_of(ptr, type, member) ((type *)(void *)((char *)(ptr)-offsetof(type, member)))

/* The struct holding node, or NULL for a NULL node (end of the list);
 * node is evaluated once. */
#define rio_list_entry(node, type, member)                                                         \
    __extension__({                                                                                \
        struct rio_list_node *rio__n = (node);                                                     \
        rio__n ? rio_container_of(rio__n, type, member) : (type *)NULL;                            \
    })

/* for (type *it = first; it; it = next): `it` must not be removed in the body
 * unless the loop stops there (a loop that removes keeps the next one first). */
#define rio_list_each(it, list, type, member)                                                      \
    for (type *it = rio_list_entry((list)->head, type, member); it;                                \
         it = rio_list_entry(it->member.next, type, member))

static inline void rio_list_init(struct rio_list *l)
{
    l->head = l->tail = NULL;
    l->count = 0;
}

static inline bool rio_list_empty(const struct rio_list *l)
{
    return l->head == NULL;
}

/* Whether n is on l (n on no list has both links NULL). */
static inline bool rio_list_linked(const struct rio_list *l, const struct rio_list_node *n)
{
    return n->prev || n->next || l->head == n;
}

/* Links n between prev and next (either NULL at an end of l). */
static inline void rio__list_link(struct rio_list *l, struct rio_list_node *n,
                                  struct rio_list_node *prev, struct rio_list_node *next)
{
    n->prev = prev;
    n->next = next;
    *(prev ? &prev->next : &l->head) = n;
    *(next ? &next->prev : &l->tail) = n;
    l->count++;
}

static inline void rio_list_push_front(struct rio_list *l, struct rio_list_node *n)
{
    rio__list_link(l, n, NULL, l->head);
}

static inline void rio_list_push_back(struct rio_list *l, struct rio_list_node *n)
{
    rio__list_link(l, n, l->tail, NULL);
}

static inline void rio_list_remove(struct rio_list *l, struct rio_list_node *n)
{
    *(n->prev ? &n->prev->next : &l->head) = n->next;
    *(n->next ? &n->next->prev : &l->tail) = n->prev;
    n->prev = n->next = NULL;
    l->count--;
}

/* The first node, off the list; NULL when empty. */
static inline struct rio_list_node *rio_list_pop_front(struct rio_list *l)
{
    struct rio_list_node *n = l->head;

    if (n)
        rio_list_remove(l, n);
    return n;
}

/* Moves every node of from to the end of to; from is left empty. */
static inline void rio_list_splice_back(struct rio_list *to, struct rio_list *from)
{
    if (!from->head)
        return;
    if (to->tail) {
        to->tail->next = from->head;
        from->head->prev = to->tail;
    } else {
        to->head = from->head;
    }
    to->tail = from->tail;
    to->count += from->count;
    rio_list_init(from);
}

#endif
