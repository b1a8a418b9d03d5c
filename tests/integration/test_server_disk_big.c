/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 180 */
/*
 * railiod's disk tier with an object four times larger than --memory: the
 * upload streams to its file a chunk at a time, the object is read back
 * byte-exact from disk, and the server's peak resident memory (VmHWM in
 * /proc/PID/status) stays well under the object's size. An object that
 * fits is still cached (read without touching the disk).
 */
#include "server_disk_util.h"

#define BIG (256ull << 20)
#define BCHUNK (4u << 20)
#define SEED 0xb16b16ull
#define HWM_LIMIT_KB (128u * 1024u) /* half the object */

TEST(object_larger_than_memory)
{
    const char *dir = disk_dir_make();
    const char *args[] = {"--data-dir", dir, "--memory", "64M", "--metrics", "127.0.0.1:0", NULL};
    const uint64_t nch = BIG / BCHUNK;
    struct srv_env e;
    struct wc c[2];
    struct rio_md5 md5;
    struct rio_proto_desc d;
    uint64_t *x = calloc(nch, 8), up = 0, gen = 0;
    uint8_t *buf = malloc(BCHUNK), *keep = NULL;
    char etag[33], opts[1024];
    const char *asan = getenv("ASAN_OPTIONS");

    /* Under ASan freed memory waits in a quarantine (256 MiB by default),
     * which would count as the server's: keep it small for the child. */
    snprintf(opts, sizeof(opts), "%s%squarantine_size_mb=16", asan ? asan : "",
             asan && *asan ? ":" : "");
    setenv("ASAN_OPTIONS", opts, 1);
    srv_start(&e, args);
    for (unsigned i = 0; i < 2; i++) {
        wc_open(&c[i], e.addr[0]);
    }

    /* One that fits is cached: reading it does not touch the disk. */
    t_fill_pattern(buf, 1u << 20, 7);
    uint64_t gs = wc_put(&c[0], "small", buf, 1u << 20, 256u * 1024u);
    T_EQ(wc_read(&c[1], "small", gs, 0, 1u << 20, buf), 0);
    T_PATTERN(buf, 1u << 20, 7);
    T_EQ(srv_scrape(&e, "railiod_disk_reads_total"), 0.0);

    /* The big one, generated a chunk at a time on this side too. */
    uint64_t t0 = t_now_ms();
    T_EQ(rio__md5_init(&md5), 0);
    for (uint64_t i = 0; i < nch; i++) {
        t_fill_pattern_at(buf, BCHUNK, SEED, i * BCHUNK);
        x[i] = rio__xxh3(buf, BCHUNK);
        T_EQ(rio__md5_update(&md5, buf, BCHUNK), 0);
    }
    T_EQ(rio__md5_final(&md5, etag), 0);
    T_EQ(wc_put_open(&c[0], "big", BIG, BCHUNK, 0, &up), 0);
    for (uint64_t i = 0; i < nch; i++) {
        t_fill_pattern_at(buf, BCHUNK, SEED, i * BCHUNK);
        int st = wc_put_chunk(&c[i % 2], up, i, x[i], buf, BCHUNK);
        if (st != 0)
            T_FAIL("PUT_CHUNK #%llu: %s", (unsigned long long)i, rio_errname(st));
    }
    T_EQ(wc_put_commit(&c[0], up, nch, x, etag, &gen), 0);
    uint64_t t_put = t_now_ms() - t0;

    T_EQ(wc_lookup(&c[1], "big", &d, &keep), 0);
    T_EQ(d.size, BIG);
    T_EQ(d.generation, gen);
    free(keep);
    t0 = t_now_ms();
    for (uint64_t i = 0; i < nch; i++) {
        memset(buf, 0, BCHUNK);
        T_EQ(wc_read(&c[i % 2], "big", gen, i * BCHUNK, BCHUNK, buf), 0);
        int64_t bad = t_check_pattern_at(buf, BCHUNK, SEED, i * BCHUNK);
        if (bad >= 0)
            T_FAIL("byte %llu differs", (unsigned long long)(i * BCHUNK + (uint64_t)bad));
    }
    uint64_t t_get = t_now_ms() - t0;
    /* Also a range across two chunks. */
    T_EQ(wc_read(&c[0], "big", gen, BCHUNK - 1000, 5000, buf), 0);
    T_EQ(t_check_pattern_at(buf, 5000, SEED, BCHUNK - 1000), -1);
    T_GE(srv_scrape(&e, "railiod_disk_reads_total"), (double)nch);
    /* Every staging buffer's charge was released: what is left is the
     * cached small object (1 MiB and its metadata). */
    T_LT(srv_scrape(&e, "railiod_used_bytes"), (double)(2u << 20));
    T_EQ(srv_scrape(&e, "railiod_objects"), 1.0);
    T_EQ(disk_dir_count(dir, "t-", NULL, 0), 0u);

    /* An aborted upload leaves no file behind, staged or cached. */
    for (unsigned big = 0; big < 2; big++) {
        uint64_t size = big ? 128ull << 20 : 1u << 20, id = 0;
        struct rio_proto_put_abort ab;
        uint8_t out[16];
        t_fill_pattern_at(buf, BCHUNK, SEED, 0);
        T_EQ(wc_put_open(&c[0], "aborted", size, BCHUNK, 0, &id), 0);
        T_EQ(wc_put_chunk(&c[0], id, 0, rio__xxh3(buf, size < BCHUNK ? size : BCHUNK), buf,
                          size < BCHUNK ? size : BCHUNK),
             0);
        T_EQ(disk_dir_count(dir, "t-", NULL, 0), 1u);
        ab.upload_id = id;
        int n = rio__proto_enc_put_abort(&ab, out, sizeof(out));
        T_EQ(wc_call(&c[0], RIO_OP_PUT_ABORT, out, (size_t)n, NULL, 0, NULL, NULL), 0);
        T_EQ(disk_dir_count(dir, "t-", NULL, 0), 0u);
    }
    T_LT(srv_scrape(&e, "railiod_used_bytes"), (double)(2u << 20));

    uint64_t hwm = srv_proc_kb(e.pid, "VmHWM"), rss = srv_proc_kb(e.pid, "VmRSS");
    fprintf(stderr,
            "256 MiB with --memory 64M: PUT %llu ms, GET %llu ms; server VmHWM %llu KiB, "
            "VmRSS %llu KiB\n",
            (unsigned long long)t_put, (unsigned long long)t_get, (unsigned long long)hwm,
            (unsigned long long)rss);
    T_LT(hwm, (uint64_t)HWM_LIMIT_KB);
    for (unsigned i = 0; i < 2; i++)
        wc_close(&c[i]);
    T_EQ(srv_stop(&e), 0);
    free(buf);
    free(x);
}
