/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * railiod's LIST page selection and the key-ordered index it reads
 * (src/server/list.c) against models: random tables of keys over a small
 * alphabet (so common prefixes repeat, with bytes on both sides of '/'),
 * some of them expired, random prefixes, delimiters, cursors and page
 * sizes; the page must be exactly the first max_keys + 1 distinct shown
 * keys after the cursor, in byte order, common prefixes once. The index
 * itself, through random inserts and removals, must keep every key in
 * order, answer each search as a sorted array would, and stay shallow.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/server.h"
#include "t.h"

struct shown {
    char key[8];
    unsigned len;
};

static int shown_cmp(const void *a, const void *b)
{
    const struct shown *x = a, *y = b;
    unsigned n = x->len < y->len ? x->len : y->len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (int)x->len - (int)y->len;
}

TEST(pages_match_a_sorted_model)
{
    static const char *const prefixes[] = {"", "a", "a/", "b/", "/"};
    static const unsigned maxes[] = {1, 2, 3, 7, 50, 1000};
    static struct rio_srv_obj objs[3000];
    static char keys[3000][8];
    static struct shown model[3000];
    struct rio_srv_index index;

    srand(7);
    for (int trial = 0; trial < 400; trial++) {
        unsigned n = (unsigned)rand() % 3000, m = 0, nm = 0, k = 0;
        for (unsigned i = 0; i < n; i++) {
            unsigned len = 1 + (unsigned)rand() % 6;
            for (unsigned j = 0; j < len; j++)
                keys[m][j] = "ab/0."[rand() % 5];
            keys[m][len] = '\0';
            int dup = 0;
            for (unsigned q = 0; q < m && !dup; q++)
                dup = strcmp(keys[q], keys[m]) == 0;
            if (dup)
                continue;
            memset(&objs[m], 0, sizeof(objs[m]));
            objs[m].key = keys[m];
            objs[m].key_len = (uint16_t)len;
            objs[m].expiry_ns = rand() % 8 == 0 ? 1 : 0; /* long past */
            m++;
        }
        rio__srv_index_init(&index);
        for (unsigned i = 0; i < m; i++)
            rio__srv_index_insert(&index, &objs[i]);
        const char *prefix = prefixes[rand() % 5];
        const char *after = rand() % 3 == 0 && m ? keys[rand() % m] : "";
        int delim = rand() % 2;
        struct rio_proto_list req = {.max_keys = maxes[rand() % 6],
                                     .prefix = prefix,
                                     .prefix_len = (uint16_t)strlen(prefix),
                                     .after = after,
                                     .after_len = (uint16_t)strlen(after),
                                     .flags = delim ? RIO_PROTO_LIST_DELIM : 0};
        /* the model */
        for (unsigned i = 0; i < m; i++) {
            size_t len = objs[i].key_len, pl = req.prefix_len;
            if (objs[i].expiry_ns)
                continue;
            if (len < pl || memcmp(keys[i], prefix, pl) != 0)
                continue;
            if (delim) {
                const char *sl = memchr(keys[i] + pl, '/', len - pl);
                if (sl)
                    len = (size_t)(sl - keys[i]) + 1;
            }
            struct shown s = {.len = (unsigned)len};
            memcpy(s.key, keys[i], len);
            struct shown a = {.len = req.after_len};
            memcpy(a.key, after, req.after_len);
            if (shown_cmp(&s, &a) <= 0)
                continue;
            model[nm++] = s;
        }
        qsort(model, nm, sizeof(model[0]), shown_cmp);
        for (unsigned i = 0; i < nm; i++)
            if (k == 0 || shown_cmp(&model[k - 1], &model[i]) != 0)
                model[k++] = model[i];
        /* the lister */
        struct rio_srv_lister l;
        T_OK(rio__srv_lister_init(&l, &req));
        rio__srv_list_index_locked(&l, &index);
        unsigned want = k < req.max_keys + 1 ? k : req.max_keys + 1;
        if (l.n != want)
            T_FAIL("trial %d: %u keys, prefix '%s', after '%s', delim %d, max %u: %u selected, "
                   "the model %u",
                   trial, m, prefix, after, delim, req.max_keys, l.n, want);
        for (unsigned i = 0; i < l.n; i++) {
            T_EQ(l.sel[i].len, model[i].len);
            T_MEMEQ(l.sel[i].key, model[i].key, model[i].len);
            T_EQ(l.sel[i].o == NULL,
                 model[i].key[model[i].len - 1] == '/' && delim && model[i].len > req.prefix_len &&
                     memchr(model[i].key + req.prefix_len, '/', model[i].len - req.prefix_len) !=
                         NULL);
        }
        rio__srv_lister_cleanup(&l);
    }
}

static int depth(const struct rio_srv_obj *t)
{
    if (!t)
        return 0;
    int a = depth(t->ileft), b = depth(t->iright);
    return 1 + (a > b ? a : b);
}

/* In-order walk into out; checks each node's priority against its parent's. */
static unsigned walk(const struct rio_srv_obj *t, const struct rio_srv_obj **out, unsigned n)
{
    if (!t)
        return n;
    if (t->ileft)
        T_LE(t->ileft->iprio, t->iprio);
    if (t->iright)
        T_LE(t->iright->iprio, t->iprio);
    n = walk(t->ileft, out, n);
    out[n++] = t;
    return walk(t->iright, out, n);
}

static int obj_cmp(const void *a, const void *b)
{
    const struct rio_srv_obj *x = *(const struct rio_srv_obj *const *)a,
                             *y = *(const struct rio_srv_obj *const *)b;
    unsigned n = x->key_len < y->key_len ? x->key_len : y->key_len;
    int c = memcmp(x->key, y->key, n);
    return c ? c : (int)x->key_len - (int)y->key_len;
}

TEST(index_keeps_keys_in_order_through_inserts_and_removals)
{
    enum { N = 20000 };
    static struct rio_srv_obj objs[N];
    static char keys[N][12];
    static const struct rio_srv_obj *in[N], *seen[N];
    static int present[N];
    struct rio_srv_index index;
    unsigned nin = 0;

    srand(11);
    rio__srv_index_init(&index);
    for (unsigned i = 0; i < N; i++) {
        /* distinct keys, one of them a prefix of others, some sharing long prefixes */
        snprintf(keys[i], sizeof(keys[i]), "%c%u", "ab/"[i % 3], i * 7919u % 100003u);
        objs[i].key = keys[i];
        objs[i].key_len = (uint16_t)strlen(keys[i]);
    }
    for (int round = 0; round < 40; round++) {
        /* a random half goes in or out */
        for (unsigned k = 0; k < N / 2; k++) {
            unsigned i = (unsigned)rand() % N;
            if (present[i])
                rio__srv_index_remove(&index, &objs[i]);
            else
                rio__srv_index_insert(&index, &objs[i]);
            present[i] = !present[i];
        }
        nin = 0;
        for (unsigned i = 0; i < N; i++)
            if (present[i])
                in[nin++] = &objs[i];
        qsort(in, nin, sizeof(in[0]), obj_cmp);
        T_EQ(walk(index.root, seen, 0), nin);
        for (unsigned i = 0; i < nin; i++)
            T_PTREQ(seen[i], in[i]);
        /* 2 ln n is about 20 here; a degenerate tree would be thousands deep */
        T_LT(depth(index.root), 60);
        /* searches: every key present and absent, strict and not */
        for (unsigned q = 0; q < 200; q++) {
            const struct rio_srv_obj *probe = &objs[(unsigned)rand() % N];
            int strict = rand() % 2;
            const struct rio_srv_obj *want = NULL;
            for (unsigned i = 0; i < nin && !want; i++) {
                int c = obj_cmp(&in[i], &probe);
                if (c > 0 || (c == 0 && !strict))
                    want = in[i];
            }
            T_PTREQ(rio__srv_index_first(&index, probe->key, probe->key_len, strict), want);
        }
    }
    /* everything out: an empty index */
    for (unsigned i = 0; i < N; i++)
        if (present[i])
            rio__srv_index_remove(&index, &objs[i]);
    T_NULL(index.root);
    T_NULL(rio__srv_index_first(&index, "", 0, 0));
}
