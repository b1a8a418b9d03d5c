/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Tail splitting (issue 16 item 4): a GET's last chunks are split into ranges
 * across the live paths, and each split chunk is still checked whole against
 * its xxh3 before its bytes count: a flipped bit in one piece is caught and
 * the chunk is read again whole.
 */
#include "engine_util.h"
#include "transport/mock.h"

#define TAIL_URL "mock://tail?paths=3&rate=40MB,20MB,10MB"
#define TAIL_CHUNK (512 * EU_KIB)
#define TAIL_N (16 * TAIL_CHUNK)

static uint64_t ops_total(const struct rio_stats *st, unsigned *paths_used)
{
    uint64_t ops = 0;
    *paths_used = 0;
    for (unsigned i = 0; i < st->npaths; i++) {
        ops += st->path[i].ops;
        if (st->path[i].ops)
            (*paths_used)++;
    }
    return ops;
}

/* Three unequal rails: more ops than chunks (pieces were issued), every rail
 * carried some, and the bytes are the object's. */
TEST(tail_split_unequal_rails)
{
    struct eu e;
    unsigned used;

    eu_start_put_o(&e, TAIL_URL, TAIL_N, 41, e.o.chunk_size = TAIL_CHUNK, e.o.depth = 2);
    eu_get_check(e.c, "o", TAIL_N, 41, &e.call);
    uint64_t ops = ops_total(&e.st, &used);
    T_EQ(e.st.bytes, TAIL_N);
    T_EQ(e.st.chunks, TAIL_N / TAIL_CHUNK); /* one check per chunk */
    T_GT(ops, e.st.chunks);                 /* and more ops: ranged pieces */
    /* Rates 4x apart: a split chunk has more pieces than live paths, so
     * more ops than one piece per path for each of the last 3 chunks. */
    T_GT(ops, e.st.chunks + 3 * 2);
    T_EQ(used, 3u);
    T_EQ(e.st.retries_total, 0u);
    uint64_t bytes = 0;
    for (unsigned i = 0; i < e.st.npaths; i++)
        bytes += e.st.path[i].bytes;
    T_EQ(bytes, TAIL_N); /* pieces count once, on the path that moved them */
    eu_close(&e);
}

/* A bit flipped in the first op of the last chunk (a piece of it once it is
 * split) is caught by the chunk's whole check; the chunk is read again. */
TEST(tail_split_piece_bitflip_refetched)
{
    struct eu e;
    unsigned used;
    char spec[64];

    eu_start_put_o(&e, TAIL_URL, TAIL_N, 42, e.o.chunk_size = TAIL_CHUNK, e.o.depth = 2);
    snprintf(spec, sizeof(spec), "bitflip:op=read:chunk=%u:count=1",
             (unsigned)(TAIL_N / TAIL_CHUNK - 1));
    eu_fault(e.c, spec);
    eu_get_check(e.c, "o", TAIL_N, 42, &e.call);
    T_EQ(eu_faults_fired(e.c), 1u);
    T_EQ(e.st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_EQ(e.st.bytes, TAIL_N);
    T_GT(ops_total(&e.st, &used), e.st.chunks);
    eu_close(&e);
}

/* With verification off nothing is split: a piece could not be checked. */
TEST(tail_no_split_without_verify)
{
    struct eu e;
    unsigned used;

    eu_start_put_o(&e, TAIL_URL, TAIL_N, 43, e.o.chunk_size = TAIL_CHUNK, e.o.depth = 2,
                   e.o.verify = -1);
    eu_get_check(e.c, "o", TAIL_N, 43, &e.call);
    T_EQ(ops_total(&e.st, &used), e.st.chunks);
    eu_close(&e);
}
