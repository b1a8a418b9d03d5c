/* SPDX-License-Identifier: Apache-2.0 */
/*
 * CPU seconds per GiB of each check railio can make of a byte (xxh3,
 * CRC32C with and without SSE4.2, MD5, SHA-256 as OpenSSL computes it:
 * with SHA-NI where the CPU has it, MD5s of several chunks at once in
 * vector lanes) and the cost of the fast etag, on
 * one core (getrusage around each loop). docs/tuning.md has the figures:
 *
 *   cc -O2 -Iinclude -Isrc bench/hashcost.c build/librailio.a -lxxhash -lcrypto \
 *      -lpthread -o build/hashcost && build/hashcost
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <openssl/evp.h>

#include "core/checksum.h"

static double cpu_s(void)
{
    struct rusage r;
    getrusage(RUSAGE_SELF, &r);
    return (double)r.ru_utime.tv_sec + (double)r.ru_utime.tv_usec / 1e6 +
           (double)r.ru_stime.tv_sec + (double)r.ru_stime.tv_usec / 1e6;
}

int main(void)
{
    const size_t n = 256u << 20, chunk = 4u << 20;
    const double gib = (double)n / (1u << 30);
    const int reps = 8;
    unsigned char *b = malloc(n);
    uint64_t *x = malloc(256 * sizeof(uint64_t));
    volatile uint64_t sink = 0;
    char hex[33];
    double t;

    if (!b || !x)
        return 1;
    for (size_t i = 0; i < n; i++)
        b[i] = (unsigned char)(i * 131 + 7);
    t = cpu_s();
    for (int r = 0; r < reps; r++)
        for (size_t o = 0; o < n; o += chunk)
            sink += rio__xxh3(b + o, chunk);
    printf("xxh3          %.3f CPU s/GiB\n", (cpu_s() - t) / (reps * gib));
    t = cpu_s();
    for (int r = 0; r < reps; r++)
        sink += rio__crc32c(0, b, n);
    printf("crc32c        %.3f CPU s/GiB\n", (cpu_s() - t) / (reps * gib));
    t = cpu_s();
    sink += rio__crc32c_sw(0, b, n);
    printf("crc32c tables %.3f CPU s/GiB\n", (cpu_s() - t) / gib);
    t = cpu_s();
    for (int r = 0; r < 2; r++) {
        struct rio_md5 m;
        if (rio__md5_init(&m) < 0 || rio__md5_update(&m, b, n) < 0 || rio__md5_final(&m, hex) < 0)
            return 1;
    }
    printf("md5           %.3f CPU s/GiB\n", (cpu_s() - t) / (2 * gib));
    t = cpu_s();
    for (int r = 0; r < 2; r++) {
        unsigned char d[32];
        unsigned dl = 0;
        EVP_MD_CTX *md = EVP_MD_CTX_new();
        if (!md || EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
            EVP_DigestUpdate(md, b, n) != 1 || EVP_DigestFinal_ex(md, d, &dl) != 1)
            return 1;
        EVP_MD_CTX_free(md);
        sink += d[0];
    }
    printf("sha256        %.3f CPU s/GiB\n", (cpu_s() - t) / (2 * gib));
    /* S3 parts' Content-MD5s, 64 chunks of 4 MiB, in lanes of each width
     * this CPU has (1: OpenSSL, one at a time). */
    for (unsigned lanes = 1; lanes <= rio__md5_lanes(); lanes *= 2) {
        const void *p[64];
        size_t len[64];
        uint8_t d[64][16];
        if (lanes != 1 && lanes != 8 && lanes != 16)
            continue;
        for (int i = 0; i < 64; i++) {
            p[i] = b + (size_t)i * chunk;
            len[i] = chunk;
        }
        t = cpu_s();
        for (int r = 0; r < 4; r++)
            if (rio__md5_many_lanes(lanes, p, len, 64, d) < 0)
                return 1;
        sink += d[0][0];
        printf("md5, %2u lanes %.3f CPU s/GiB\n", lanes, (cpu_s() - t) / (4 * gib));
    }
    for (int i = 0; i < 256; i++)
        x[i] = (uint64_t)i * 0x9e3779b97f4a7c15ull;
    t = cpu_s();
    for (int r = 0; r < 1000; r++)
        rio__etag_fast(x, 256, 1ull << 30, chunk, hex);
    printf("fast etag of a 1 GiB object (256 chunks): %.1f us\n", (cpu_s() - t) / 1000 * 1e6);
    free(b);
    free(x);
    return (int)(sink & 1);
}
