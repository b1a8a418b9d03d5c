/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * railiod's LIST page selection (src/server/list.c) against a model: random
 * tables of keys over a small alphabet (so common prefixes repeat), random
 * prefixes, delimiters, cursors and page sizes, from one key to more than
 * twice the page (so the candidate buffer is cut while the table is
 * walked); the page must be exactly the first max_keys + 1 distinct shown
 * keys after the cursor, in byte order, common prefixes once.
 */
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
    struct rio_srv_obj *tab[64];

    srand(7);
    for (int trial = 0; trial < 400; trial++) {
        unsigned n = (unsigned)rand() % 3000, m = 0, nm = 0, k = 0;
        for (unsigned i = 0; i < n; i++) {
            unsigned len = 1 + (unsigned)rand() % 6;
            for (unsigned j = 0; j < len; j++)
                keys[m][j] = "ab/"[rand() % 3];
            keys[m][len] = '\0';
            int dup = 0;
            for (unsigned q = 0; q < m && !dup; q++)
                dup = strcmp(keys[q], keys[m]) == 0;
            if (dup)
                continue;
            memset(&objs[m], 0, sizeof(objs[m]));
            objs[m].key = keys[m];
            objs[m].key_len = (uint16_t)len;
            m++;
        }
        memset(tab, 0, sizeof(tab));
        for (unsigned i = 0; i < m; i++) { /* each in a random chain */
            size_t b = (size_t)rand() % 64;
            objs[i].hnext = tab[b];
            tab[b] = &objs[i];
        }
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
        rio__srv_list_table_locked(&l, tab, 63);
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
