/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PUT and GET of one object against a URL, several times each, with the
 * client process's CPU per GiB (getrusage: every thread of the client, the
 * caller, the engine, the worker pools and the transport's). Public API
 * only. docs/bench.md has the figures and the command lines:
 *
 *   cc -O2 -Iinclude bench/putget.c -Lbuild -lrailio -Wl,-rpath,$PWD/build -o build/putget
 *   build/putget URL [MiB] [runs]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "railio.h"

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static double cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec / 1e6 +
           (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec / 1e6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: putget URL [MiB] [runs]\n");
        return 2;
    }
    size_t n = (size_t)(argc > 2 ? atoi(argv[2]) : 256) << 20;
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    if (runs < 1 || runs > 64)
        runs = 5;
    struct rio_client *c;
    int ret = rio_client_new(argv[1], NULL, &c);
    if (ret < 0) {
        fprintf(stderr, "putget: %s: %s\n", argv[1], rio_strerror(ret));
        return 1;
    }
    unsigned char *src = malloc(n), *dst = malloc(n);
    if (!src || !dst)
        return 1;
    for (size_t i = 0; i < n; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(dst, 0, n);
    double put[64], get[64], putc[64], getc[64];
    char etag[48] = "";
    for (int i = 0; i < runs; i++) {
        struct rio_desc d;
        double t = now_s(), u = cpu_s();
        ret = rio_put(c, "putget/obj", src, n, NULL, &d);
        put[i] = now_s() - t;
        putc[i] = cpu_s() - u;
        if (ret < 0) {
            fprintf(stderr, "putget: PUT: %s\n", rio_strerror(ret));
            return 1;
        }
        memcpy(etag, d.etag, sizeof(etag));
        rio_desc_cleanup(&d);
        t = now_s();
        u = cpu_s();
        int64_t got = rio_get(c, "putget/obj", dst, n, NULL);
        get[i] = now_s() - t;
        getc[i] = cpu_s() - u;
        if (got != (int64_t)n || memcmp(src, dst, n) != 0) {
            fprintf(stderr, "putget: GET: %s\n", got < 0 ? rio_strerror((int)got) : "wrong bytes");
            return 1;
        }
    }
    qsort(put, (size_t)runs, sizeof(double), cmp);
    qsort(get, (size_t)runs, sizeof(double), cmp);
    qsort(putc, (size_t)runs, sizeof(double), cmp);
    qsort(getc, (size_t)runs, sizeof(double), cmp);
    double gib = (double)n / (1 << 30), mb = (double)n / 1e6;
    int m = runs / 2;
    printf("%zu MiB x %d, medians: PUT %.0f MB/s %.2f CPU s/GiB | GET %.0f MB/s %.2f CPU s/GiB | "
           "PUT/GET %.2f | etag %s\n",
           n >> 20, runs, mb / put[m], putc[m] / gib, mb / get[m], getc[m] / gib, get[m] / put[m],
           etag[0] ? etag : "-");
    rio_delete(c, "putget/obj");
    rio_client_destroy(c);
    free(src);
    free(dst);
    return 0;
}
