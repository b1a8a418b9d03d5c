/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/transport/rados/head.c src/core/alloc.c */
/*
 * libFuzzer target for the chunk object names `railio fsck rados://` lists
 * from a pool and splits into key, generation and index
 * (rio__rados_chunk_name_split in src/transport/rados/head.c): anyone with
 * write access to the pool can create objects of any name, and fsck decides
 * from the split which of them are railio's and may be removed.
 *
 * Input: the name, bytes as listed (NULs included). A name the split accepts
 * must be one the writer could have made: a key of 1 to RIO_KEY_MAX bytes,
 * a generation that is not 0, and the writer's name for that key,
 * generation and index (rio__rados_chunk_name) is the same bytes. Seeds:
 * tests/fuzz/corpus/rados_name/.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/head.h"

#define CHECK FUZZ_CHECK

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t keylen = 0;
    uint64_t gen = 0, index = 0;
    /* The name in a buffer of exactly its size, so reads past it trap. */
    char *name = malloc(size ? size : 1);
    static char key[RIO_KEY_MAX + 1], again[RIO_KEY_MAX + 64];

    CHECK(name != NULL);
    memcpy(name, data, size);
    int ret = rio__rados_chunk_name_split(name, size, &keylen, &gen, &index);
    CHECK(ret == 0 || ret == RIO_EPROTO);
    if (ret == 0) {
        CHECK(keylen >= 1 && keylen <= RIO_KEY_MAX && keylen < size && gen != 0);
        CHECK(memchr(name, '\0', size) == NULL);
        memcpy(key, name, keylen);
        key[keylen] = '\0';
        int n = rio__rados_chunk_name(again, sizeof(again), key, gen, index);
        CHECK(n >= 0 && (size_t)n == size && memcmp(again, name, size) == 0);
    }
    free(name);
    return 0;
}
