/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PUT and GET against a URL, several times each, with the client process's
 * CPU per GiB (getrusage: every thread of the client, the caller, the
 * engine, the worker pools and the transport's). Public API only.
 * docs/bench.md has the figures and the command lines:
 *
 *   cc -O2 -Iinclude bench/putget.c -Lbuild -lrailio -Wl,-rpath,$PWD/build -o build/putget
 *   build/putget URL [SIZE] [runs] [count] [min_MiB]
 *
 * SIZE: bytes per object, with a K, M or G suffix (a bare number is MiB).
 * count: objects per call; 1 (the default) is rio_put/rio_get of one object,
 * more is one rio_batch of count PUTs, then one of count GETs. min_MiB: each
 * timed sample repeats the call until at least that many MiB moved (default
 * 0: one call), so that small objects are not timed one call at a time.
 * Every GET is compared byte for byte with what was PUT. The last line,
 * "putget-raw PUT_MBps PUT_CPU GET_MBps GET_CPU", is for scripts
 * (bench/peers.sh, bench/depth.sh).
 */
#include <stdint.h>
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

/* "256M", "32K", "1G", or a bare number of MiB; 0 when it is not one. */
static size_t parse_size(const char *s)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 10);
    unsigned shift = 20;
    if (end == s)
        return 0;
    if (*end == 'K' || *end == 'k')
        shift = 10;
    else if (*end == 'M' || *end == 'm')
        shift = 20;
    else if (*end == 'G' || *end == 'g')
        shift = 30;
    else if (*end != '\0')
        return 0;
    if (*end != '\0' && end[1] != '\0' && strcmp(end + 1, "iB") != 0)
        return 0;
    if (v == 0 || v > (1ull << 40) >> shift)
        return 0;
    return (size_t)(v << shift);
}

/* One PUT or GET call over count objects of n bytes each; 0 or an error. */
static int call(struct rio_client *c, int type, struct rio_op *ops, unsigned count,
                unsigned char *src, unsigned char *dst, size_t n, char *etag, size_t etag_len)
{
    if (count == 1 && type == RIO_OP_PUT) {
        struct rio_desc d;
        int ret = rio_put(c, ops[0].key, src, n, NULL, &d);
        if (ret < 0)
            return ret;
        snprintf(etag, etag_len, "%s", d.etag);
        rio_desc_cleanup(&d);
        return 0;
    }
    if (count == 1) {
        int64_t got = rio_get(c, ops[0].key, dst, n, NULL);
        return got < 0 ? (int)got : got == (int64_t)n ? 0 : RIO_EPROTO;
    }
    for (unsigned i = 0; i < count; i++) {
        ops[i].type = type;
        ops[i].buf = type == RIO_OP_PUT ? src + (size_t)i * n : dst + (size_t)i * n;
        ops[i].len = n;
        ops[i].result = 0;
    }
    int ok = rio_batch(c, ops, count, NULL);
    if (ok < 0)
        return ok;
    for (unsigned i = 0; i < count; i++) {
        if (ops[i].result < 0)
            return (int)ops[i].result;
        if (type == RIO_OP_GET && ops[i].result != (int64_t)n)
            return RIO_EPROTO;
    }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: putget URL [SIZE] [runs] [count] [min_MiB]\n");
        return 2;
    }
    size_t n = argc > 2 ? parse_size(argv[2]) : (size_t)256 << 20;
    int runs = argc > 3 ? atoi(argv[3]) : 5;
    long lcount = argc > 4 ? atol(argv[4]) : 1;
    long min_mib = argc > 5 ? atol(argv[5]) : 0;
    size_t total;
    if (n == 0) {
        fprintf(stderr, "putget: SIZE '%s': a number of bytes with K, M or G (up to 1T)\n",
                argv[2]);
        return 2;
    }
    if (runs < 1 || runs > 64)
        runs = 5;
    if (lcount < 1 || lcount > 65536 || min_mib < 0 || min_mib > (1L << 20)) {
        fprintf(stderr, "putget: count must be 1..65536, min_MiB 0..1048576\n");
        return 2;
    }
    unsigned count = (unsigned)lcount;
    if (__builtin_mul_overflow(n, (size_t)count, &total)) {
        fprintf(stderr, "putget: SIZE x count overflows\n");
        return 2;
    }
    unsigned calls = 1;
    if ((uint64_t)min_mib << 20 > total)
        calls = (unsigned)((((uint64_t)min_mib << 20) + total - 1) / total);
    struct rio_client *c;
    int ret = rio_client_new(argv[1], NULL, &c);
    if (ret < 0) {
        fprintf(stderr, "putget: %s: %s\n", argv[1], rio_strerror(ret));
        return 1;
    }
    unsigned char *src = malloc(total), *dst = malloc(total);
    struct rio_op *ops = calloc(count, sizeof(*ops));
    char(*keys)[32] = calloc(count, sizeof(*keys));
    if (!src || !dst || !ops || !keys) {
        fprintf(stderr, "putget: out of memory for %zu bytes\n", total);
        return 1;
    }
    for (size_t i = 0; i < total; i++)
        src[i] = (unsigned char)(i * 2654435761u >> 13);
    memset(dst, 0, total);
    for (unsigned i = 0; i < count; i++) {
        snprintf(keys[i], sizeof(keys[i]), "putget/obj-%u", i);
        ops[i].key = keys[i];
    }
    double put[64], get[64], putc[64], getc[64];
    char etag[48] = "";
    for (int i = 0; i < runs; i++) {
        double t = now_s(), u = cpu_s();
        for (unsigned k = 0; k < calls && ret == 0; k++)
            ret = call(c, RIO_OP_PUT, ops, count, src, dst, n, etag, sizeof(etag));
        put[i] = now_s() - t;
        putc[i] = cpu_s() - u;
        if (ret < 0) {
            fprintf(stderr, "putget: PUT: %s\n", rio_strerror(ret));
            return 1;
        }
        t = now_s();
        u = cpu_s();
        for (unsigned k = 0; k < calls && ret == 0; k++)
            ret = call(c, RIO_OP_GET, ops, count, src, dst, n, etag, sizeof(etag));
        get[i] = now_s() - t;
        getc[i] = cpu_s() - u;
        if (ret < 0 || memcmp(src, dst, total) != 0) {
            fprintf(stderr, "putget: GET: %s\n", ret < 0 ? rio_strerror(ret) : "wrong bytes");
            return 1;
        }
        memset(dst, 0, total);
    }
    qsort(put, (size_t)runs, sizeof(double), cmp);
    qsort(get, (size_t)runs, sizeof(double), cmp);
    qsort(putc, (size_t)runs, sizeof(double), cmp);
    qsort(getc, (size_t)runs, sizeof(double), cmp);
    double moved = (double)total * calls;
    double gib = moved / (1 << 30), mb = moved / 1e6;
    int m = runs / 2;
    printf("%u x %zu KiB x %u calls x %d runs, medians: PUT %.0f MB/s %.2f CPU s/GiB | GET %.0f "
           "MB/s %.2f CPU s/GiB | PUT/GET %.2f | etag %s\n",
           count, n >> 10, calls, runs, mb / put[m], putc[m] / gib, mb / get[m], getc[m] / gib,
           get[m] / put[m], etag[0] ? etag : "-");
    printf("putget-raw %.1f %.3f %.1f %.3f\n", mb / put[m], putc[m] / gib, mb / get[m],
           getc[m] / gib);
    for (unsigned i = 0; i < count; i++)
        rio_delete(c, keys[i]);
    rio_client_destroy(c);
    free(src);
    free(dst);
    free(ops);
    free(keys);
    return 0;
}
