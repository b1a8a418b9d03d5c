/* SPDX-License-Identifier: Apache-2.0 */
/* clang-format off */
/* FUZZ_SOURCES src/transport/s3/sidecar.c src/transport/s3/text.c src/core/alloc.c src/core/checksum.c */
/* clang-format on */
/*
 * libFuzzer target for a multipart object's checksum sidecar as the s3://
 * transport reads it (rio__s3_sidecar_parse, docs/s3.md) and the inline
 * checksum list of the object's metadata (rio__s3_parse_xxh_list).
 *
 * Input: byte 0 is the mode, the rest the sidecar (terminated, as the
 * transport's body buffer is). Mode bit 0: reseal the trailing "end XXH"
 * line with the right xxh3, so the fuzzer explores what follows the check.
 * The expected id, size and chunk are read from the sidecar's own lines
 * when they parse (so a consistent one is accepted), else fixed. An
 * accepted sidecar must give nchunks values and a 32-digit MD5 or "".
 * Seeds: tests/fuzz/corpus/sidecar/.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "railio.h"
#include "transport/s3/parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static volatile uint64_t sink;

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1 || size > (1u << 20))
        return 0;
    unsigned mode = data[0];
    size_t len = size - 1;
    char *b = malloc(len + 1);
    if (!b)
        return 0;
    memcpy(b, data + 1, len);
    b[len] = '\0';

    if (mode & 1) {
        /* The last "\nend " gets the xxh3 of everything before it. */
        char *end = NULL;
        for (char *p = b; (p = memmem(p, len - (size_t)(p - b), "\nend ", 5)); p++)
            end = p;
        if (end && (size_t)(end - b) + 5 + 16 <= len) {
            char hex[17];
            snprintf(hex, sizeof(hex), "%016" PRIx64, rio__xxh3(b, (size_t)(end - b + 1)));
            memcpy(end + 5, hex, 16);
        }
    }

    char id[24] = "0123456789abcdef";
    unsigned long long sz = 1000, ch = 100;
    (void)sscanf(b, "railio-sidecar 1\nid %23s\nsize %llu\nchunk %llu\n", id, &sz, &ch);
    if (ch == 0)
        ch = 1;
    char md5[33];
    uint64_t *xxh = NULL;
    memset(md5, 'Z', sizeof(md5));
    int ret = rio__s3_sidecar_parse(b, len, id, sz, ch, md5, &xxh);
    if (ret == 0) {
        size_t m = strnlen(md5, sizeof(md5));
        if (m != 0 && m != 32)
            abort();
        if (rio__s3_nchunks(sz, ch) && !xxh)
            abort();
        /* Every value must be there: read each (ASan checks the bounds). */
        for (uint64_t i = 0; i < rio__s3_nchunks(sz, ch); i++)
            sink += xxh[i];
    } else if (xxh) {
        abort();
    }
    rio__free(xxh);

    xxh = NULL;
    if (rio__s3_parse_xxh_list(b, strlen(b) / 16, &xxh) == 0 && strlen(b) >= 16 && !xxh)
        abort();
    rio__free(xxh);
    free(b);
    return 0;
}
