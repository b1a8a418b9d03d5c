/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: the intrusive list every queue and LRU uses (src/core/list.h). */
#include <stddef.h>

#include "core/list.h"
#include "t.h"

struct item {
    int v;
    struct rio_list_node node;
};

/* The values of l front to back into out; how many. */
static size_t values(struct rio_list *l, int *out)
{
    size_t n = 0;

    rio_list_each (it, l, struct item, node)
        out[n++] = it->v;
    return n;
}

TEST(push_both_ends_and_remove_anywhere)
{
    struct item it[4] = {{.v = 0}, {.v = 1}, {.v = 2}, {.v = 3}};
    struct rio_list l = {0};
    int got[4];

    T_TRUE(rio_list_empty(&l));
    rio_list_push_back(&l, &it[1].node);
    rio_list_push_front(&l, &it[0].node);
    rio_list_push_back(&l, &it[2].node);
    rio_list_push_back(&l, &it[3].node);
    T_EQ(l.count, 4);
    T_EQ(values(&l, got), 4);
    for (int i = 0; i < 4; i++)
        T_EQ(got[i], i);
    T_PTREQ(rio_container_of(l.tail, struct item, node), &it[3]);

    rio_list_remove(&l, &it[2].node); /* middle */
    rio_list_remove(&l, &it[0].node); /* head */
    rio_list_remove(&l, &it[3].node); /* tail */
    T_EQ(l.count, 1);
    T_PTREQ(l.head, &it[1].node);
    T_PTREQ(l.tail, &it[1].node);
    T_TRUE(!rio_list_linked(&l, &it[0].node));
    T_TRUE(rio_list_linked(&l, &it[1].node));
    T_NULL(it[2].node.prev);
    T_NULL(it[2].node.next);
}

TEST(pop_front_empties_in_order)
{
    struct item it[3] = {{.v = 7}, {.v = 8}, {.v = 9}};
    struct rio_list l = {0};
    struct rio_list_node *n;
    int want = 7;

    for (int i = 0; i < 3; i++)
        rio_list_push_back(&l, &it[i].node);
    while ((n = rio_list_pop_front(&l)))
        T_EQ(rio_list_entry(n, struct item, node)->v, want++);
    T_EQ(want, 10);
    T_EQ(l.count, 0);
    T_NULL(l.head);
    T_NULL(l.tail);
    T_NULL(rio_list_pop_front(&l));
    T_NULL(rio_list_entry(l.head, struct item, node));
}

TEST(splice_moves_everything)
{
    struct item it[4] = {{.v = 0}, {.v = 1}, {.v = 2}, {.v = 3}};
    struct rio_list a = {0}, b = {0};
    int got[4];

    rio_list_splice_back(&a, &b); /* both empty */
    T_TRUE(rio_list_empty(&a));
    rio_list_push_back(&b, &it[0].node);
    rio_list_push_back(&b, &it[1].node);
    rio_list_splice_back(&a, &b); /* into an empty one */
    rio_list_push_back(&b, &it[2].node);
    rio_list_push_back(&b, &it[3].node);
    rio_list_splice_back(&a, &b);
    T_TRUE(rio_list_empty(&b));
    T_EQ(b.count, 0);
    T_EQ(a.count, 4);
    T_EQ(values(&a, got), 4);
    for (int i = 0; i < 4; i++)
        T_EQ(got[i], i);
    T_PTREQ(it[2].node.prev, &it[1].node);
}
