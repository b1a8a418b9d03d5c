/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net;slow */
/* T_TIMEOUT 180 */
/*
 * railio:// with a 1 GiB object on loopback: PUT, STAT, GET over one
 * connection and over four, byte-exact, then DELETE. The buffers are filled
 * by copying a patterned 1 MiB block whose first 8 bytes carry the block's
 * index, so a chunk landing at the wrong offset is caught by the compare.
 */
#include "tcp_util.h"

#define BIG (1024 * TU_MIB)

static void fill_blocks(uint8_t *p, size_t n)
{
    uint8_t *blk = tu_pattern(TU_MIB, 0xb16);
    for (size_t off = 0; off < n; off += TU_MIB) {
        size_t len = n - off < TU_MIB ? n - off : TU_MIB;
        uint64_t idx = off / TU_MIB;
        memcpy(p + off, blk, len);
        memcpy(p + off, &idx, len < 8 ? len : 8);
    }
    free(blk);
}

TEST(one_gib_roundtrip)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    const char *args[] = {"--memory", "3G", NULL};

    srv_start(&e, args);
    uint8_t *src = malloc(BIG), *dst = malloc(BIG);
    T_NOTNULL(src);
    T_NOTNULL(dst);
    fill_blocks(src, BIG);
    memset(dst, 0, BIG);
    rio_options_init(&o);
    o.op_timeout_ms = 30000;
    o.deadline_ms = 120000;

    /* PUT once (over 4 connections), then GET over 1 and over 4. */
    uint64_t t0 = t_now_ms();
    struct rio_stats ps;
    struct rio_call pc = {.stats = &ps};
    tu_url(url, sizeof(url), &e, "conns=4");
    tu_open(&u, url, &o);
    T_OK(rio_put(u.c, "big/1g", src, BIG, &pc, NULL));
    struct rio_desc d;
    T_OK(rio_stat(u.c, "big/1g", &d));
    T_EQ(d.size, (uint64_t)BIG);
    T_EQ(d.nchunks, (uint64_t)BIG / d.chunk_size);
    rio_desc_cleanup(&d);
    tu_close(&u);
    fprintf(stderr, "PUT 1 GiB over 4 connections: %.2f s (%.0f MB/s)\n",
            (double)(t_now_ms() - t0) / 1e3, ps.goodput_mbps);

    for (int conns = 1; conns <= 4; conns *= 4) {
        struct rio_stats gs;
        struct rio_call gc = {.stats = &gs};
        char params[64];
        snprintf(params, sizeof(params), "conns=%d&depth=4", conns);
        tu_url(url, sizeof(url), &e, params);
        tu_open(&u, url, &o);
        uint64_t t1 = t_now_ms();
        T_EQ(rio_get(u.c, "big/1g", dst, BIG, &gc), (int64_t)BIG);
        uint64_t t2 = t_now_ms();
        T_EQ(memcmp(src, dst, BIG), 0);
        T_EQ(gs.retries_total, 0u);
        T_EQ(gs.npaths, (unsigned)conns);
        fprintf(stderr, "GET 1 GiB over %d connection(s): %.2f s (%.0f MB/s), verdict %s\n", conns,
                (double)(t2 - t1) / 1e3, gs.goodput_mbps, rio_verdict_name(gs.verdict));
        memset(dst, 0, BIG);
        tu_close(&u);
    }
    /* A hang detector, not a benchmark: docs/bench.md has the figures. */
    T_LT(t_now_ms() - t0, 60000u * (TU_SANITIZED ? 3u : 1u));
    tu_open(&u, url, &o);
    T_OK(rio_delete(u.c, "big/1g"));
    tu_close(&u);
    free(src);
    free(dst);
    T_EQ(srv_stop(&e), 0);
}
