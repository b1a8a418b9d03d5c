/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Listing a store of many keys, and what it costs the PUTs and GETs beside
 * it. Public API only. Fills URL with COUNT objects of 1 byte ("ls/%08u",
 * rio_batch of 4096 at a time) while a second client GETs one 32 KiB
 * object in a loop (the longest GET and the count over 10 ms: what the
 * store's growth costs other clients, its table's doublings for one),
 * lists them all (rio_list, pages of 1000), then times PUT and GET of one
 * 32 KiB object (RUNS of each, alternating) twice: alone, then while a
 * second client lists the whole store in a loop; between the two, GETs for
 * 3 s count the ones that took over 10 ms (a pause of the whole server: the
 * store's sweep, for one). docs/bench.md has the figures:
 *
 *   cc -O2 -Iinclude bench/listscale.c -Lbuild -lrailio -lpthread \
 *      -Wl,-rpath,$PWD/build -o build/listscale
 *   build/railiod --listen 127.0.0.1:7070 --memory 8G &
 *   build/listscale railio://127.0.0.1:7070 [COUNT] [RUNS]
 *
 * The objects stay (list them again with `railio ls`); COUNT defaults to
 * 1048576, RUNS to 2000. Against a server whose --memory holds fewer
 * objects (--memory 32M holds about 65,000), the fill times PUTs into a
 * full store, each evicting the least recently used object.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "railio.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Every key under "ls/": their count, or -1; *pages gets the page count. */
static long list_all(struct rio_client *c, unsigned *pages)
{
    char token[RIO_LIST_TOKEN_MAX + 1] = "";
    long n = 0;

    *pages = 0;
    for (;;) {
        struct rio_list_args a = {.prefix = "ls/", .token = token};
        struct rio_list_page p;
        int ret = rio_list(c, &a, &p, NULL);
        if (ret) {
            fprintf(stderr, "listscale: rio_list: %s\n", rio_strerror(ret));
            return -1;
        }
        n += p.n;
        (*pages)++;
        snprintf(token, sizeof(token), "%s", p.next_token);
        rio_list_page_cleanup(&p);
        if (!token[0])
            return n;
    }
}

static _Atomic int stop;
static _Atomic unsigned listings;
static const char *url;

static void *lister(void *arg)
{
    struct rio_client *c;
    unsigned pages;
    (void)arg;
    if (rio_client_new(url, NULL, &c))
        return NULL;
    while (!atomic_load(&stop) && list_all(c, &pages) >= 0)
        atomic_fetch_add(&listings, 1);
    rio_client_destroy(c);
    return NULL;
}

/* While the fill runs: GETs of one 32 KiB object, the longest and those
 * over 10 ms. */
static _Atomic int fill_done;

static void *fill_watch(void *arg)
{
    enum { LEN = 32 << 10 };
    static char dst[LEN];
    struct rio_client *c;
    double worst = 0;
    unsigned n = 0, slow = 0;

    (void)arg;
    if (rio_client_new(url, NULL, &c))
        return NULL;
    while (!atomic_load(&fill_done)) {
        double t = now_s();
        if (rio_get(c, "lat/obj", dst, LEN, NULL) != LEN) {
            fprintf(stderr, "listscale: GET during the fill failed\n");
            break;
        }
        t = now_s() - t;
        n++;
        slow += t > 0.01;
        if (t > worst)
            worst = t;
    }
    printf("GETs during the fill: %u, %u over 10 ms, the longest %.1f ms\n", n, slow, worst * 1e3);
    rio_client_destroy(c);
    return NULL;
}

/* PUT then GET of one 32 KiB object, runs times: p50 and p99 of each. */
static int latency(struct rio_client *c, unsigned runs, const char *label)
{
    enum { LEN = 32 << 10 };
    static char src[LEN], dst[LEN];
    double *put = calloc(runs, sizeof(double)), *get = calloc(runs, sizeof(double));
    if (!put || !get)
        return -1;
    memset(src, 7, LEN);
    for (unsigned i = 0; i < runs; i++) {
        double t = now_s();
        int ret = rio_put(c, "lat/obj", src, LEN, NULL, NULL);
        put[i] = now_s() - t;
        t = now_s();
        int64_t got = rio_get(c, "lat/obj", dst, LEN, NULL);
        get[i] = now_s() - t;
        if (ret || got != LEN || memcmp(src, dst, LEN) != 0) {
            fprintf(stderr, "listscale: PUT/GET failed (%d, %lld)\n", ret, (long long)got);
            return -1;
        }
    }
    qsort(put, runs, sizeof(double), cmp);
    qsort(get, runs, sizeof(double), cmp);
    printf("%s: PUT 32 KiB p50 %.0f us p99 %.0f us max %.0f us; GET p50 %.0f us p99 %.0f us "
           "max %.0f us\n",
           label, put[runs / 2] * 1e6, put[runs * 99 / 100] * 1e6, put[runs - 1] * 1e6,
           get[runs / 2] * 1e6, get[runs * 99 / 100] * 1e6, get[runs - 1] * 1e6);
    free(put);
    free(get);
    return 0;
}

/* GETs of one 32 KiB object for 3 s: how many took over 10 ms, and the
 * share of the time they took (what a pause of the whole server costs). */
static int stalls(struct rio_client *c)
{
    enum { LEN = 32 << 10 };
    static char dst[LEN];
    double t0 = now_s(), slow_s = 0, worst = 0;
    unsigned n = 0, slow = 0;

    while (now_s() - t0 < 3.0) {
        double t = now_s();
        if (rio_get(c, "lat/obj", dst, LEN, NULL) != LEN)
            return -1;
        t = now_s() - t;
        n++;
        if (t > 0.01) {
            slow++;
            slow_s += t;
        }
        if (t > worst)
            worst = t;
    }
    printf("GETs for 3 s: %u, %u over 10 ms taking %.0f %% of the time, the longest %.1f ms\n", n,
           slow, 100 * slow_s / (now_s() - t0), worst * 1e3);
    return 0;
}

int main(int argc, char **argv)
{
    enum { BATCH = 4096 };
    static char keys[BATCH][32];
    static struct rio_op ops[BATCH];
    struct rio_client *c;
    unsigned count = argc > 2 ? (unsigned)strtoul(argv[2], NULL, 10) : 1048576;
    unsigned runs = argc > 3 ? (unsigned)strtoul(argv[3], NULL, 10) : 2000, pages;
    char one = 'x';
    pthread_t th;

    if (argc < 2 || count == 0 || runs < 100) {
        fprintf(stderr, "usage: listscale URL [COUNT >= 1] [RUNS >= 100]\n");
        return 2;
    }
    url = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    int ret = rio_client_new(url, NULL, &c);
    if (ret) {
        fprintf(stderr, "listscale: %s: %s\n", url, rio_strerror(ret));
        return 1;
    }
    static char obj[32 << 10];
    memset(obj, 7, sizeof(obj));
    if (rio_put(c, "lat/obj", obj, sizeof(obj), NULL, NULL)) {
        fprintf(stderr, "listscale: PUT of lat/obj failed\n");
        return 1;
    }
    pthread_create(&th, NULL, fill_watch, NULL);
    double t = now_s();
    for (unsigned s = 0; s < count; s += BATCH) {
        unsigned n = count - s < BATCH ? count - s : BATCH;
        for (unsigned i = 0; i < n; i++) {
            snprintf(keys[i], sizeof(keys[i]), "ls/%08u", s + i);
            ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = &one, .len = 1};
        }
        if (rio_batch(c, ops, n, NULL) != (int)n) {
            fprintf(stderr, "listscale: a batch of PUTs failed\n");
            return 1;
        }
    }
    printf("fill: %u objects in %.1f s\n", count, now_s() - t);
    atomic_store(&fill_done, 1);
    pthread_join(th, NULL);
    t = now_s();
    long n = list_all(c, &pages);
    printf("list: %ld keys in %u pages, %.2f s\n", n, pages, now_s() - t);
    if (n < 0)
        return 1;
    if (n < (long)count) /* a server whose --memory holds fewer evicted the rest */
        printf("(%ld of the %u objects evicted)\n", (long)count - n, count);
    if (latency(c, runs, "alone") || stalls(c))
        return 1;
    pthread_create(&th, NULL, lister, NULL);
    ret = latency(c, runs, "beside a listing");
    atomic_store(&stop, 1);
    pthread_join(th, NULL);
    printf("listings completed meanwhile: %u\n", atomic_load(&listings));
    rio_client_destroy(c);
    return ret ? 1 : 0;
}
