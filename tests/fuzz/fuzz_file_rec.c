/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/transport/file/rec.c src/core/alloc.c src/core/checksum.c */
/*
 * libFuzzer target for the file:// checksum record (src/transport/file/rec.c),
 * the xattr user.railio.xxh a lookup reads back: anyone who can write the
 * file can set it to any bytes.
 *
 * Input: the file's size and mtime_ns (u64 LE each), then the record. A
 * record the parser accepts must be consistent with the file (chunk count
 * from size and chunk size, a list as long as its count), and encoding what
 * it gave back must decode to the same; the checks abort otherwise.
 */
#include <string.h>

#include "core/alloc.h"
#include "fuzz.h"
#include "railio.h"
#include "transport/file/rec.h"

#define CHECK FUZZ_CHECK

static uint64_t le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct rio_desc d, e;
    uint8_t *b, *again;
    size_t n, m;
    int ret;

    if (size < 16)
        return 0;
    uint64_t fsize = le64(data), mtime = le64(data + 8);
    /* The record in a buffer of exactly its size, so reads past it trap. */
    n = size - 16;
    b = malloc(n ? n : 1);
    CHECK(b != NULL);
    memcpy(b, data + 16, n);
    memset(&d, 0, sizeof(d));
    ret = rio__file_rec_decode(b, n, fsize, mtime, &d);
    CHECK(ret == 0 || ret == 1 || ret == -12 /* ENOMEM */);
    if (ret == 1) {
        CHECK(d.chunk_size != 0);
        CHECK(d.nchunks == (fsize ? (fsize - 1) / d.chunk_size + 1 : 0));
        CHECK((d.nchunks == 0) == (d.xxh == NULL));
        CHECK(memchr(d.etag, '\0', sizeof(d.etag)) != NULL);
        volatile uint64_t sum = 0;
        for (uint64_t i = 0; i < d.nchunks; i++)
            sum += d.xxh[i]; /* every entry readable */
        (void)sum;
        /* Round trip: what was read encodes to a record that reads the same. */
        d.size = fsize;
        CHECK(rio__file_rec_encode(&d, mtime, &again, &m) == 0);
        CHECK(again != NULL && m == n);
        memset(&e, 0, sizeof(e));
        CHECK(rio__file_rec_decode(again, m, fsize, mtime, &e) == 1);
        CHECK(e.chunk_size == d.chunk_size && e.nchunks == d.nchunks);
        CHECK(strcmp(e.etag, d.etag) == 0);
        CHECK(d.nchunks == 0 || memcmp(e.xxh, d.xxh, d.nchunks * sizeof(uint64_t)) == 0);
        /* Another size or mtime: not this file's record. */
        CHECK(rio__file_rec_decode(again, m, fsize + 1, mtime, &e) == 0);
        CHECK(rio__file_rec_decode(again, m, fsize, mtime + 1, &e) == 0);
        rio__free(again);
        rio__free(e.xxh);
        rio__free(d.xxh);
    }
    free(b);
    return 0;
}

/* Records as put_commit writes them, after their file's size and mtime. */
void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len))
{
    static const struct {
        uint64_t size, chunk;
        const char *etag;
    } s[] = {
        {0, 4194304, ""},
        {10, 4, "0123456789abcdef0123456789abcdef"},
        {4194304 * 3 + 1, 4194304, "d41d8cd98f00b204e9800998ecf8427e"},
        {100, 1, "ffffffffffffffffffffffffffffffff-2"},
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++) {
        uint64_t nch = s[i].size ? (s[i].size - 1) / s[i].chunk + 1 : 0;
        uint64_t xxh[128];
        struct rio_desc d;
        uint8_t *rec, *in;
        size_t n;

        memset(&d, 0, sizeof(d));
        d.size = s[i].size;
        d.chunk_size = s[i].chunk;
        d.nchunks = nch;
        for (uint64_t k = 0; k < nch; k++)
            xxh[k] = k * 0x9e3779b97f4a7c15ull;
        d.xxh = xxh;
        strcpy(d.etag, s[i].etag);
        CHECK(rio__file_rec_encode(&d, 1700000000123456789ull + i, &rec, &n) == 0 && rec);
        in = malloc(16 + n);
        CHECK(in != NULL);
        for (int k = 0; k < 8; k++) {
            in[k] = (uint8_t)(d.size >> (8 * k));
            in[8 + k] = (uint8_t)((1700000000123456789ull + i) >> (8 * k));
        }
        memcpy(in + 16, rec, n);
        run(in, 16 + n);
        free(in);
        rio__free(rec);
    }
}
