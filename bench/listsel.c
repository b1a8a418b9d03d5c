/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The time railiod holds an object table's lock to choose one LIST page
 * (src/server/list.c): a table of N objects with random keys ("kv/H/K",
 * 50 top-level prefixes) in its key-ordered index, a page of MAX keys,
 * optionally under PREFIX and with the '/' delimiter; the time to build
 * the index, then three runs, wall milliseconds each, and a hash of the
 * encoded page (to compare two builds' answers). docs/bench.md has the
 * figures:
 *
 *   cc -O2 -Iinclude -Isrc bench/listsel.c src/server/list.c build/librailio.a \
 *      -lxxhash -lcrypto -lpthread -o build/listsel && build/listsel 1000000 10000
 *   build/listsel N MAX [PREFIX [d]]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "server/server.h"

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    unsigned max = argc > 2 ? (unsigned)atoi(argv[2]) : 10000;
    const char *prefix = argc > 3 ? argv[3] : "";
    struct rio_srv_index index;
    double t = now_s();

    rio__srv_index_init(&index);
    srand(1);
    for (size_t i = 0; i < n; i++) {
        struct rio_srv_obj *o = calloc(1, sizeof(*o));
        char *k = malloc(32);
        if (!o || !k)
            return 1;
        o->key = k;
        o->key_len = (uint16_t)snprintf(k, 32, "kv/%x/%08x", rand() % 50, rand());
        (void)rand(); /* the hash bucket of the build before the index: the same keys */
        rio__srv_index_insert(&index, o);
    }
    printf("%zu objects indexed in %.0f ms (with their allocation)\n", n, (now_s() - t) * 1e3);
    for (int r = 0; r < 3; r++) {
        struct rio_srv_lister l;
        struct rio_proto_list m = {.max_keys = max,
                                   .prefix = prefix,
                                   .prefix_len = (uint16_t)strlen(prefix),
                                   .flags = argc > 4 ? RIO_PROTO_LIST_DELIM : 0};
        unsigned long long h = 0;
        if (rio__srv_lister_init(&l, &m) < 0)
            return 1;
        double t0 = now_s();
        rio__srv_list_index_locked(&l, &index);
        double t1 = now_s();
        for (size_t q = 0; q < l.out_len; q++)
            h = h * 131 + l.out[q];
        printf("%zu objects, page of %u: %.1f ms, %u kept, %zu bytes, hash %llx\n", n, max,
               (t1 - t0) * 1e3, l.n, l.out_len, h);
        rio__srv_lister_cleanup(&l);
    }
    return 0;
}
