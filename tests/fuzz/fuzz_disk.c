/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/server/disk_rec.c src/core/checksum.c */
/*
 * libFuzzer target for the disk tier's records as railiod reads them at
 * start-up (src/server/disk_rec.c): the object file header, parsed the way
 * recovery does (its fixed part first, then the whole header), and the
 * tombstone. Whatever a parser accepts must be consistent with the bytes
 * it came from (every pointer inside the buffer, lengths adding up, the
 * checksum holding), so the target checks more than crashes.
 *
 * The seeds come from the writer railiod uses (rio__srv_disk_enc_record,
 * _enc_tomb), so a change of layout on one side fails the other here.
 *
 * Input: byte 0 picks the mode, the rest is the data.
 *   mode 0  object header: bytes 1-8 the file's size (LE), the rest the
 *           file's first bytes (the header), as they are
 *   mode 1  the same with the header length field and the header checksum
 *           recomputed from the fields, so the fuzzer gets past them
 *   mode 2  tombstone file, as it is
 *   mode 3  tombstone with its checksum recomputed
 *
 * Build by hand: clang -fsanitize=fuzzer,address,undefined -Iinclude -Isrc
 * tests/fuzz/fuzz_disk.c src/server/disk_rec.c src/core/checksum.c
 * -lxxhash -lcrypto. Seeds: tests/fuzz/corpus/disk/ (written by the target
 * itself when RIO_FUZZ_SEED_DIR is set). Built with -DRIO_FUZZ_STANDALONE
 * it replays the files given as arguments instead.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checksum.h"
#include "core/le.h"
#include "railio.h"
#include "server/server.h"

#define MAX_CHUNKS (1u << 20)
#define BUF_MAX (RIO_SRV_DISK_HDR_FIXED + RIO_KEY_MAX + 8u * 4096u + 8u)

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_disk: accepted record fails: %s\n", what);
        abort();
    }
}

/* Touch every byte of [p, p+n) so that ASan sees an access out of bounds. */
static volatile uint8_t sink;
static void touch(const void *p, size_t n)
{
    const uint8_t *b = p;
    uint8_t x = 0;
    for (size_t i = 0; i < n; i++)
        x ^= b[i];
    sink = x;
}

static void object(const uint8_t *buf, size_t n, uint64_t file_size)
{
    struct rio_srv_disk_rec r;
    size_t first = n < RIO_SRV_DISK_HDR_FIXED ? n : RIO_SRV_DISK_HDR_FIXED;
    /* As recovery does: the fixed part, then (when it asks) the header. */
    int ret = rio__srv_disk_parse_record(buf, first, file_size, MAX_CHUNKS, &r);

    if (ret < 0) {
        check(r.why != NULL, "a refusal says why");
        return;
    }
    check(ret == 1, "the fixed part alone is never a whole header");
    check(r.header_len > RIO_SRV_DISK_HDR_FIXED && r.header_len <= file_size,
          "header length within the file");
    if (r.header_len > n)
        return; /* the file would be shorter than its header says */
    ret = rio__srv_disk_parse_record(buf, (size_t)r.header_len, file_size, MAX_CHUNKS, &r);
    if (ret != 0) {
        check(ret < 0 && r.why != NULL, "a refusal says why");
        return;
    }
    const uint8_t *end = buf + r.header_len;
    check(r.key_len >= 1 && r.key_len <= RIO_KEY_MAX, "key length");
    check((const uint8_t *)r.key == buf + RIO_SRV_DISK_HDR_FIXED, "key in place");
    check(r.xxh == (const uint8_t *)r.key + r.key_len, "checksums after the key");
    check(r.nchunks <= MAX_CHUNKS && r.xxh + 8 * r.nchunks + 8 == end, "lengths add up");
    check(r.chunk_size > 0 && (r.size ? (r.size - 1) / r.chunk_size + 1 : 0) == r.nchunks,
          "geometry");
    check(r.data_off % RIO_SRV_DISK_ALIGN == 0 &&
              r.data_off >= rio__srv_disk_round_up(r.header_len) &&
              r.data_off <= rio__srv_disk_data_off_max(r.key_len, r.nchunks) &&
              r.data_off + r.size == file_size,
          "data offset and size");
    check(rio__xxh3(buf, (size_t)r.header_len - 8) == rio__le64_get(end - 8), "header checksum");
    touch(r.key, r.key_len);
    touch(r.etag, 32);
    touch(r.xxh, (size_t)r.nchunks * 8);
}

static void tomb(const uint8_t *buf, size_t n)
{
    struct rio_srv_disk_rec r;

    if (rio__srv_disk_parse_tomb(buf, n, &r) < 0) {
        check(r.why != NULL, "a refusal says why");
        return;
    }
    check(r.key_len >= 1 && r.key_len <= RIO_KEY_MAX, "tombstone key length");
    check(n == RIO_SRV_DISK_TOMB_FIXED + r.key_len + 8u, "tombstone length");
    check((const uint8_t *)r.key == buf + RIO_SRV_DISK_TOMB_FIXED, "tombstone key in place");
    touch(r.key, r.key_len);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t buf[BUF_MAX];
    unsigned mode;

    if (size < 1)
        return 0;
    mode = data[0] & 3;
    data++;
    size--;
    if (mode <= 1) {
        if (size < 8)
            return 0;
        uint64_t file_size = rio__le64_get(data);
        data += 8;
        size -= 8;
        if (size > sizeof(buf))
            size = sizeof(buf);
        memcpy(buf, data, size);
        if (mode == 1 && size >= RIO_SRV_DISK_HDR_FIXED) {
            uint64_t hlen = rio__srv_disk_header_len((uint64_t)(buf[12] | buf[13] << 8),
                                                     rio__le64_get(buf + 40), MAX_CHUNKS);
            if (hlen && hlen <= size) {
                for (int i = 0; i < 4; i++)
                    buf[8 + i] = (uint8_t)(hlen >> (8 * i));
                rio__srv_disk_seal(buf, (size_t)hlen);
            }
        }
        /* A copy of exactly size bytes, so a read past them is caught. */
        uint8_t *exact = malloc(size ? size : 1);
        if (!exact)
            return 0;
        memcpy(exact, buf, size);
        object(exact, size, file_size);
        free(exact);
        return 0;
    }
    if (size > sizeof(buf))
        size = sizeof(buf);
    memcpy(buf, data, size);
    if (mode == 3 && size >= RIO_SRV_DISK_TOMB_FIXED + 8u) {
        size_t klen = (size_t)(buf[8] | buf[9] << 8);
        if (RIO_SRV_DISK_TOMB_FIXED + klen + 8u <= size)
            rio__srv_disk_seal(buf, RIO_SRV_DISK_TOMB_FIXED + klen + 8u);
    }
    uint8_t *exact = malloc(size ? size : 1);
    if (!exact)
        return 0;
    memcpy(exact, buf, size);
    tomb(exact, size);
    free(exact);
    return 0;
}

/* ------------------------------------------------------------------ seeds */

/* A valid record, written by railiod's own writer, as the fuzz input of
 * mode 0 (object) or 2 (tombstone). */
static size_t make_seed(uint8_t *out, unsigned which)
{
    static const char *const keys[] = {"k", "models/llama/shard-00001", "a/b/c"};
    static const uint64_t sizes[] = {1, 10u << 20, 0};
    const char *key = keys[which % 3];
    uint16_t klen = (uint16_t)strlen(key);
    uint64_t gen = 1700000000000000000ull + which;

    if (which >= 3) {
        out[0] = 2;
        return 1 + rio__srv_disk_enc_tomb(out + 1, key, klen, gen);
    }
    static uint8_t xxh[8 * 4];
    uint64_t size = sizes[which], chunk = 4u << 20;
    uint64_t nchunks = size ? (size - 1) / chunk + 1 : 0;
    uint64_t hlen = rio__srv_disk_header_len(klen, nchunks, MAX_CHUNKS);
    char etag[32];

    check(nchunks * 8 <= sizeof(xxh), "seed checksums fit");
    for (uint64_t i = 0; i < nchunks; i++)
        rio__le64_put(xxh + 8 * i, 0x1234567890abcdefull + i);
    memset(etag, 'e', sizeof(etag));
    out[0] = 0;
    rio__le64_put(out + 1, rio__srv_disk_round_up(hlen) + size);
    rio__srv_disk_enc_record(out + 9, &(struct rio_srv_disk_rec){
                                          .key_len = klen,
                                          .generation = gen,
                                          .size = size,
                                          .chunk_size = chunk,
                                          .nchunks = nchunks,
                                          .data_off = rio__srv_disk_round_up(hlen),
                                          .header_len = hlen,
                                          .key = key,
                                          .etag = etag,
                                          .xxh = xxh,
                                      });
    return 9 + (size_t)hlen;
}

/* With RIO_FUZZ_SEED_DIR: write the seeds there (6 files); set but empty:
 * only check that each is accepted. */
static void write_seeds(void)
{
    const char *dir = getenv("RIO_FUZZ_SEED_DIR");
    static uint8_t seed[BUF_MAX + 16];

    if (!dir)
        return;
    for (unsigned i = 0; i < 6; i++) {
        char path[4096];
        size_t n = make_seed(seed, i);
        snprintf(path, sizeof(path), "%s/seed-%s-%u", dir, i < 3 ? "object" : "tomb", i);
        FILE *f = *dir ? fopen(path, "wb") : NULL;
        if (f) {
            fwrite(seed, 1, n, f);
            fclose(f);
        }
        /* Every seed must be accepted whole. */
        struct rio_srv_disk_rec r;
        int ok = i < 3 ? rio__srv_disk_parse_record(seed + 9, n - 9, rio__le64_get(seed + 1),
                                                    MAX_CHUNKS, &r) == 0
                       : rio__srv_disk_parse_tomb(seed + 1, n - 1, &r) == 0;
        check(ok, "a seed is refused");
        LLVMFuzzerTestOneInput(seed, n);
    }
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    write_seeds();
    return 0;
}

#ifdef RIO_FUZZ_STANDALONE
/* Replay: each argument is an input file; with none, the seeds and every
 * single-byte truncation and bit flip of them. */
int main(int argc, char **argv)
{
    static uint8_t in[BUF_MAX + 16];

    if (!getenv("RIO_FUZZ_SEED_DIR"))
        setenv("RIO_FUZZ_SEED_DIR", "", 1);
    write_seeds();
    for (int a = 1; a < argc; a++) {
        FILE *f = fopen(argv[a], "rb");
        if (!f) {
            perror(argv[a]);
            return 1;
        }
        size_t n = fread(in, 1, sizeof(in), f);
        fclose(f);
        LLVMFuzzerTestOneInput(in, n);
    }
    if (argc > 1)
        return 0;
    for (unsigned s = 0; s < 6; s++) {
        size_t n = make_seed(in, s);
        for (size_t cut = 0; cut <= n; cut++)
            LLVMFuzzerTestOneInput(in, cut);
        for (size_t i = 1; i < n; i++)
            for (int bit = 0; bit < 8; bit++) {
                in[i] ^= (uint8_t)(1u << bit);
                LLVMFuzzerTestOneInput(in, n);
                in[0] ^= 1; /* the resealing mode too */
                LLVMFuzzerTestOneInput(in, n);
                in[0] ^= 1;
                in[i] ^= (uint8_t)(1u << bit);
            }
    }
    printf("fuzz_disk: replay clean\n");
    return 0;
}
#endif
