/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/transport/rados/head.c src/core/alloc.c */
/*
 * libFuzzer target for the rados:// head object (src/transport/rados/head.c),
 * the text a lookup reads from the cluster: anyone with write access to the
 * pool can put any bytes there. (Its xattr rio.gen is only ever compared by
 * the OSD, cmpxattr, never read back by railio.)
 *
 * Input: byte 0 is the key's length k, the next k bytes the key (cut at a
 * NUL), the rest the head text. A head the parser accepts must be
 * consistent: chunk count from size and chunk size, pool indices in range,
 * every list allocated as long as its count, every name a version 2 head
 * lists a chunk name (KEY.G.I, bounded, no NUL), and the writer's text for
 * it (rio__rados_head_format) parses back to the same head; the checks
 * abort otherwise. Seeds of both versions.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "fuzz.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/head.h"

#define CHECK FUZZ_CHECK

/* What the writer makes of an accepted head parses back to the same head. */
static void round_trip(const char *key, const struct rio__rados_head *h)
{
    struct rio__rados_head b;
    char *text;
    size_t n;
    int ret = rio__rados_head_format(key, h, &text, &n);

    CHECK(ret == 0 || ret == RIO_EINVAL || ret == -12 /* ENOMEM */);
    if (ret < 0)
        return;
    ret = rio__rados_head_parse(text, n, key, &b);
    CHECK(ret == 0 || ret == -12);
    if (ret == 0) {
        CHECK(b.generation == h->generation && b.size == h->size);
        CHECK(b.chunk_size == h->chunk_size && b.nchunks == h->nchunks);
        CHECK(strcmp(b.etag, h->etag) == 0 && b.npools == h->npools);
        for (unsigned i = 0; i < b.npools; i++)
            CHECK(strcmp(b.pools[i], h->pools[i]) == 0);
        for (uint64_t i = 0; i < b.nchunks; i++)
            CHECK(b.chunk_pool[i] == h->chunk_pool[i] && b.xxh[i] == h->xxh[i]);
        CHECK((b.names == NULL) == (h->names == NULL));
        for (uint64_t i = 0; b.names && i < b.nchunks; i++)
            CHECK(strcmp(b.names[i], h->names[i]) == 0);
        rio__rados_head_cleanup(&b);
    }
    rio__free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char key[256];
    struct rio__rados_head h;

    if (size < 1)
        return 0;
    size_t k = data[0] < size - 1 ? data[0] : size - 1;
    memcpy(key, data + 1, k);
    key[k] = '\0';
    /* The head text in a buffer of exactly its size, so reads past it trap. */
    size_t n = size - 1 - k;
    char *buf = malloc(n ? n : 1);
    CHECK(buf != NULL);
    memcpy(buf, data + 1 + k, n);
    int ret = rio__rados_head_parse(buf, n, key, &h);
    CHECK(ret == 0 || ret == RIO_EPROTO || ret == -12 /* ENOMEM */);
    if (ret == 0) {
        CHECK(h.generation != 0);
        CHECK(h.chunk_size != 0);
        CHECK(h.size <= (uint64_t)INT64_MAX);
        CHECK(h.nchunks == h.size / h.chunk_size + (h.size % h.chunk_size != 0));
        CHECK(h.npools >= 1 && h.npools <= RIO_RADOS_MAX_HEAD_POOLS);
        for (unsigned i = 0; i < h.npools; i++)
            CHECK(h.pools[i] && h.pools[i][0]);
        CHECK(h.etag[0] == '\0' || strlen(h.etag) == 32);
        CHECK((h.nchunks == 0) == (h.xxh == NULL));
        volatile uint64_t sum = 0;
        for (uint64_t i = 0; i < h.nchunks; i++) {
            CHECK(h.chunk_pool[i] < h.npools);
            sum += h.xxh[i]; /* every entry readable */
            if (h.names) {
                size_t nl = strlen(h.names[i]), kl;
                uint64_t g, x;
                CHECK(nl < RIO_RADOS_NAME_MAX);
                CHECK(rio__rados_chunk_name_split(h.names[i], nl, &kl, &g, &x) == 0);
                CHECK(kl >= 1 && kl <= RIO_KEY_MAX && g != 0);
            }
        }
        (void)sum;
        round_trip(key, &h);
        rio__rados_head_cleanup(&h);
    }
    free(buf);
    return 0;
}

/* A well-formed head of key, as the writer makes it, after the key prefix. */
static size_t make_head(uint8_t *out, size_t cap, const char *key, uint64_t size, uint64_t chunk,
                        unsigned npools, const char *etag, int version)
{
    static char nbuf[64][96];
    static char *np[64];
    static char names[RIO_RADOS_MAX_HEAD_POOLS][16];
    uint64_t nch = size / chunk + (size % chunk != 0);
    struct rio__rados_head h = {
        .generation = 0x1234abcd5678ef01ull,
        .size = size,
        .chunk_size = chunk,
        .nchunks = nch,
        .npools = npools,
    };
    size_t kl = strlen(key), n;
    char *text;

    CHECK(kl < 256 && npools <= RIO_RADOS_MAX_HEAD_POOLS);
    snprintf(h.etag, sizeof(h.etag), "%s", strcmp(etag, "-") == 0 ? "" : etag);
    for (unsigned i = 0; i < npools; i++) {
        snprintf(names[i], sizeof(names[i]), "pool-%c%s", 'a' + i, i == 1 ? " x" : "");
        h.pools[i] = names[i];
    }
    h.xxh = nch ? malloc((size_t)nch * sizeof(*h.xxh)) : NULL;
    CHECK(!nch || h.xxh);
    for (uint64_t i = 0; i < nch; i++)
        h.xxh[i] = i * 0x9e3779b97f4a7c15ull;
    if (version == 2 && nch) {
        /* A composed object: chunks of other keys (parts), odd bytes too. */
        CHECK(nch <= 64);
        for (uint64_t i = 0; i < nch; i++) {
            snprintf(nbuf[i], sizeof(nbuf[i]), ".rio-mpu/b/%s p%%/%05u.%016" PRIx64 ".%016" PRIx64,
                     key, (unsigned)(i / 2 + 1), (uint64_t)(0xabcdef0123456789ull + i / 2),
                     (uint64_t)(i % 2));
            np[i] = nbuf[i];
        }
        h.names = np;
    }
    CHECK(rio__rados_head_format(key, &h, &text, &n) == 0);
    free(h.xxh);
    CHECK(1 + kl + n <= cap);
    out[0] = (uint8_t)kl;
    memcpy(out + 1, key, kl);
    memcpy(out + 1 + kl, text, n);
    rio__free(text);
    return 1 + kl + n;
}

void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len))
{
    static uint8_t b[1 << 16];
    static const struct {
        const char *key;
        uint64_t size, chunk;
        unsigned npools;
        const char *etag;
        int version;
    } s[] = {
        {"obj", 0, 4194304, 1, "-", 1},
        {"obj", 10, 4, 1, "0123456789abcdef0123456789abcdef", 1},
        {"model/layer 0%", 4194304 * 3 + 1, 4194304, 3, "-", 1},
        {"k", 100, 1, 16, "ffffffffffffffffffffffffffffffff", 1},
        {"composed", 4194304 * 5 + 9, 4194304, 2, "-", 2},
        {"b/big file", 40, 1, 3, "-", 2},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        size_t n = make_head(b, sizeof(b), s[i].key, s[i].size, s[i].chunk, s[i].npools, s[i].etag,
                             s[i].version);
        /* Parsed as valid: the seed is right. */
        char key[256];
        struct rio__rados_head h;
        memcpy(key, b + 1, b[0]);
        key[b[0]] = '\0';
        CHECK(rio__rados_head_parse((const char *)b + 1 + b[0], n - 1 - b[0], key, &h) == 0);
        rio__rados_head_cleanup(&h);
        run(b, n);
    }
}

#ifndef RIO_FUZZ_STANDALONE
/* Under libFuzzer: the built-in seeds go into $RIO_FUZZ_SEED_DIR. */
static FILE *seed_dir_file(size_t i)
{
    const char *d = getenv("RIO_FUZZ_SEED_DIR");
    char p[4096];
    if (!d)
        return NULL;
    snprintf(p, sizeof(p), "%s/seed-%zu", d, i);
    return fopen(p, "wb");
}

static size_t nseed;
static void write_seed(const uint8_t *d, size_t n)
{
    FILE *f = seed_dir_file(nseed++);
    if (f) {
        fwrite(d, 1, n, f);
        fclose(f);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    rio_fuzz_seeds(write_seed);
    return 0;
}
#endif
