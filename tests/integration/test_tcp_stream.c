/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * Streaming PUTs on railio:// against a real railiod: uploads of unknown
 * size (RIO_SIZE_UNKNOWN) of the edge sizes and of a few hundred MiB with
 * the client's memory bounded by slots x chunk, bounded on the server (the
 * most it takes is refused with -EFBIG, the disk tier refuses with
 * RIO_ENOTSUP); a writer that is aborted sends PUT_ABORT, so the server
 * frees the upload at once (not after --upload-timeout), also when the
 * server had closed the idle control connection the upload was opened on
 * while its chunks streamed.
 */
#include <time.h>
#include <xxhash.h>

#include "tcp_util.h"

/* The server's upload count reaches 0 within ms; the last count seen. */
static uint64_t uploads_settle(struct wc *w, unsigned ms)
{
    uint64_t n = 0;
    for (unsigned waited = 0;; waited += 10) {
        n = wc_stat(w).uploads;
        if (n == 0 || waited >= ms)
            return n;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
}

static void abort_case(unsigned idle_s)
{
    struct tu_env x;
    struct wc w;
    struct rio_writer *wr = NULL;
    char idle[16];
    snprintf(idle, sizeof(idle), "%us", idle_s ? idle_s : 120);
    const char *args[] = {"--upload-timeout", "60s", "--idle-timeout", idle, NULL};

    tu_env_start(&x, args, NULL);
    uint8_t *buf = tu_pattern(TU_CHUNK, 7);
    T_EQ(rio_writer_open(x.u.c, "ab/obj", 64 * TU_MIB, 2, NULL, &wr), 0);
    /* Chunks stream for longer than the idle timeout: the control
     * connection the upload was opened on sees no traffic meanwhile. */
    unsigned rounds = idle_s ? idle_s * 10 + 15 : 8;
    for (unsigned i = 0; i < rounds; i++) {
        T_EQ(rio_writer_write(wr, buf, TU_CHUNK), 0);
        if (idle_s) {
            struct timespec ts = {0, 100 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    wc_open(&w, x.e.addr[0]);
    T_EQ(wc_stat(&w).uploads, 1u);
    rio_writer_abort(wr);
    /* Freed at once, not after --upload-timeout. */
    T_EQ(uploads_settle(&w, 500), 0u);
    struct rio_proto_desc d;
    uint8_t *keep = NULL;
    T_EQ(wc_lookup(&w, "ab/obj", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    free(buf);
    wc_close(&w);
    tu_env_stop(&x);
}

TEST(writer_abort_frees_upload)
{
    abort_case(0);
}

TEST(writer_abort_after_control_idle)
{
    abort_case(1);
}

/* Stream n pattern bytes (seed) through a writer of unknown size. */
static int put_unknown(struct rio_client *c, const char *key, uint64_t n, uint64_t seed,
                       unsigned slots)
{
    static uint8_t piece[1 << 20];
    struct rio_writer *w = NULL;
    int ret = rio_writer_open(c, key, RIO_SIZE_UNKNOWN, slots, NULL, &w);

    if (ret < 0)
        return ret;
    for (uint64_t off = 0; off < n && ret == 0;) {
        /* Pieces of an odd length, so chunks straddle writes. */
        size_t k = n - off < sizeof(piece) - 3 ? (size_t)(n - off) : sizeof(piece) - 3;
        t_fill_pattern_at(piece, k, seed, off);
        ret = rio_writer_write(w, piece, k);
        off += k;
    }
    if (ret < 0) {
        rio_writer_abort(w);
        return ret;
    }
    return rio_writer_close(w, NULL);
}

/* GET key streaming: its xxh3 and length must be the pattern's. */
static void get_check_stream(struct rio_client *c, const char *key, uint64_t n, uint64_t seed)
{
    static uint8_t piece[1 << 20];
    struct tu_hasher h = {XXH3_createState(), 0};
    XXH3_state_t *want = XXH3_createState();

    XXH3_64bits_reset(h.st);
    XXH3_64bits_reset(want);
    for (uint64_t off = 0; off < n;) {
        size_t k = n - off < sizeof(piece) ? (size_t)(n - off) : sizeof(piece);
        t_fill_pattern_at(piece, k, seed, off);
        XXH3_64bits_update(want, piece, k);
        off += k;
    }
    T_EQ(rio_get_stream(c, key, 0, tu_hash_cb, &h, NULL), (int64_t)n);
    T_EQ(h.n, n);
    T_EQ(XXH3_64bits_digest(h.st), XXH3_64bits_digest(want));
    XXH3_freeState(h.st);
    XXH3_freeState(want);
}

/* A stream committed under --prefault is cut to its size where its heap
 * block is (the tail given back to the heap), not copied whole into a new
 * block under the store's lock, which every other request of the server
 * waited for (a stream of gigabytes: seconds). */
TEST(prefault_stream_commit_copies_nothing)
{
    struct tu_env x;
    const char *args[] = {"--memory", "256M", "--prefault", NULL};

    setenv("SRV_LOG_FILE", "1", 1); /* the log in a file: srv_log_count */
    tu_env_start(&x, args, NULL);
    unsetenv("SRV_LOG_FILE");
    const uint64_t n = 5 * TU_CHUNK + 777;
    T_OK(put_unknown(x.u.c, "pf/s", n, 31, 2));
    get_check_stream(x.u.c, "pf/s", n, 31);
    T_OK(put_unknown(x.u.c, "pf/s", 3 * TU_MIB + 5, 32, 2));
    get_check_stream(x.u.c, "pf/s", 3 * TU_MIB + 5, 32);
    T_EQ(srv_log_count(&x.e, "upload sized"), 2u);
    T_EQ(srv_log_count(&x.e, " copied=0"), 2u);
    tu_env_stop(&x);
}

TEST(unknown_size_edges)
{
    struct tu_env x;
    /* Empty, one byte, a chunk less one, a whole chunk, one more, several. */
    const uint64_t sizes[] = {0, 1, TU_CHUNK - 1, TU_CHUNK, TU_CHUNK + 1, 5 * TU_CHUNK + 77};
    const char *args[] = {"--metrics", "127.0.0.1:0", NULL};

    tu_env_start(&x, args, NULL);
    /* Once committed, a streamed object is charged what the same object
     * PUT with its size is (not the metadata of the bound it was open for). */
    double used0 = srv_scrape(&x.e, "railiod_used_bytes");
    tu_put(x.u.c, "u/known", 3 * TU_CHUNK + 5, 1); /* keys of one length */
    double used1 = srv_scrape(&x.e, "railiod_used_bytes");
    T_EQ(put_unknown(x.u.c, "u/strmd", 3 * TU_CHUNK + 5, 1, 2), 0);
    double used2 = srv_scrape(&x.e, "railiod_used_bytes");
    T_EQ(used2 - used1, used1 - used0);
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        char key[32];
        snprintf(key, sizeof(key), "u/%u", i);
        T_EQ(put_unknown(x.u.c, key, sizes[i], 40 + i, 2), 0);
        struct rio_desc d;
        T_EQ(rio_stat(x.u.c, key, &d), 0);
        T_EQ(d.size, sizes[i]);
        T_EQ(d.nchunks, sizes[i] ? (sizes[i] - 1) / TU_CHUNK + 1 : 0);
        rio_desc_cleanup(&d);
        tu_get_check(x.u.c, key, (size_t)sizes[i], 40 + i, 0);
    }
    tu_env_stop(&x);
}

static uint64_t vm_hwm_kb(void)
{
    return srv_proc_kb(getpid(), "VmHWM");
}

/* A few hundred MiB through a writer of unknown size: the client's peak
 * RSS grows by about slots x chunk, not by the object. Under a sanitizer the
 * slots' shadow memory counts too (TSan: 87 MiB for the 16 MiB of slots), so
 * the bound there is only "well under the object". */
TEST(unknown_size_large_rss_bounded)
{
    struct tu_env x;
    const char *args[] = {"--memory", "1G", NULL};
    const uint64_t n = 300 * TU_MIB + 12345;

    tu_env_start(&x, args, NULL);
    tu_close(&x.u);
    x.o.chunk_size = 4 * TU_MIB;
    tu_open(&x.u, x.url, &x.o);
    uint64_t before = vm_hwm_kb();
    T_EQ(put_unknown(x.u.c, "big/u", n, 9, 4), 0);
    uint64_t after = vm_hwm_kb();
    fprintf(stderr, "VmHWM before %llu KiB, after %llu KiB (300 MiB streamed, 4 x 4 MiB slots)\n",
            (unsigned long long)before, (unsigned long long)after);
    T_LT(after - before, (TU_SANITIZED ? 200u : 64u) * 1024u);
    get_check_stream(x.u.c, "big/u", n, 9);
    tu_env_stop(&x);
}

/* The server bounds what an upload of unknown size may hold: past what
 * --memory takes, -EFBIG, and the upload is gone. */
TEST(unknown_size_bounded_by_server)
{
    struct tu_env x;
    const char *args[] = {"--memory", "8M", "--evict", "refuse", NULL};
    struct wc w;

    tu_env_start(&x, args, NULL);
    T_EQ(put_unknown(x.u.c, "b/too-big", 12 * TU_MIB, 3, 2), -EFBIG);
    wc_open(&w, x.e.addr[0]);
    T_EQ(uploads_settle(&w, 1000), 0u);
    struct rio_proto_desc d;
    uint8_t *keep = NULL;
    T_EQ(wc_lookup(&w, "b/too-big", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    wc_close(&w);
    /* What fits still goes. */
    T_EQ(put_unknown(x.u.c, "b/fits", 2 * TU_MIB + 5, 4, 2), 0);
    tu_get_check(x.u.c, "b/fits", 2 * TU_MIB + 5, 4, 0);
    tu_env_stop(&x);
}

/* The disk tier takes uploads of unknown size too (HELLO offers it): a
 * small one and one of several chunks with a short last one, read back
 * byte-exact. (test_server_disk: the files, their holes, a restart.) */
TEST(unknown_size_disk_tier)
{
    struct tu_env x;
    char dir[] = "/tmp/rio-stream-XXXXXX", cmd[128];
    T_NOTNULL(mkdtemp(dir));
    const char *args[] = {"--data-dir", dir, NULL};

    tu_env_start(&x, args, NULL);
    T_EQ(put_unknown(x.u.c, "d/u", 100, 1, 2), 0);
    tu_get_check(x.u.c, "d/u", 100, 1, 0);
    T_EQ(put_unknown(x.u.c, "d/big", 9 * TU_MIB + 5, 2, 2), 0);
    tu_get_check(x.u.c, "d/big", 9 * TU_MIB + 5, 2, 0);
    tu_env_stop(&x);
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    T_EQ(system(cmd), 0);
}

/* A commit of an upload of unknown size sent while one of its chunks is
 * still arriving on another connection is refused and changes nothing:
 * the commit cuts the upload's buffer to the size it names, and before
 * this check a small object's buffer was copied and the old one unmapped
 * under the chunk still being received into it. The chunk then arrives
 * whole, and a commit after it succeeds. */
TEST(unknown_size_commit_while_a_chunk_arrives)
{
    struct srv_env e;
    struct wc a, b;
    const char *args[] = {"--memory", "64M", NULL};
    struct rio_proto_hdr h;
    struct rio_proto_desc d;
    uint8_t data[1000], got[1000], *body = NULL, *keep = NULL;
    uint64_t up = 0, gen = 0, xxh;
    char etag[33];

    for (unsigned i = 0; i < sizeof(data); i++)
        data[i] = (uint8_t)(i * 7 + 3);
    xxh = rio__xxh3(data, sizeof(data));
    wc_etag(data, sizeof(data), etag);
    srv_start_wc(&e, args, &a);
    wc_open(&b, e.addr[0]);
    T_EQ(wc_put_open(&a, "t/race", RIO_PROTO_SIZE_UNKNOWN, 1u << 20, 0, &up), 0);
    /* Half of chunk 0 (its last, short) on a, then the commit on b. */
    T_EQ(wc_chunk_head(&a, up, 0, xxh, sizeof(data)), 0);
    T_EQ(wc_send_raw(&a, data, 500), 0);
    usleep(200 * 1000);
    T_EQ(wc_put_commit(&b, up, 1, &xxh, etag, &gen), RIO_EINVAL);
    /* The rest of the chunk: stored, acknowledged. */
    T_EQ(wc_send_raw(&a, data + 500, sizeof(data) - 500), 0);
    T_EQ(wc_recv(&a, &h, &body), 0);
    T_EQ(h.opcode, RIO_OP_PUT_CHUNK);
    T_EQ(h.status, 0);
    free(body);
    T_EQ(wc_put_commit(&b, up, 1, &xxh, etag, &gen), 0);
    T_EQ(wc_lookup(&b, "t/race", &d, &keep), 0);
    T_EQ(d.size, (uint64_t)sizeof(data));
    T_EQ(d.generation, gen);
    free(keep);
    T_EQ(wc_read(&b, "t/race", gen, 0, sizeof(got), got), 0);
    T_MEMEQ(got, data, sizeof(data));
    wc_close(&b);
    srv_end_wc(&e, &a);
}

/* A chunk of an upload of unknown size refused for its checksum gives
 * back what it was charged: the short last one too (it gave back a whole
 * chunk's worth, so a client sending bad short chunks drove the server's
 * count of its memory down, past zero into a wrapped figure that refused
 * every PUT after it). */
TEST(unknown_size_bad_short_chunk_uncharged)
{
    struct srv_env e;
    struct wc w;
    const char *args[] = {"--memory", "64M", "--metrics", "127.0.0.1:0", NULL};
    uint8_t data[1000];
    uint64_t up = 0, gen = 0, xxh;
    char etag[33];

    memset(data, 0x3c, sizeof(data));
    xxh = rio__xxh3(data, sizeof(data));
    wc_etag(data, sizeof(data), etag);
    srv_start_wc(&e, args, &w);
    T_EQ(wc_put_open(&w, "t/bad", RIO_PROTO_SIZE_UNKNOWN, 1u << 20, 0, &up), 0);
    double used = srv_scrape(&e, "railiod_used_bytes");
    for (int i = 0; i < 3; i++)
        T_EQ(wc_put_chunk(&w, up, 0, xxh ^ 1, data, sizeof(data)), RIO_ECHECKSUM);
    T_EQ(srv_scrape(&e, "railiod_used_bytes"), used);
    T_EQ(wc_put_chunk(&w, up, 0, xxh, data, sizeof(data)), 0);
    T_EQ(wc_put_commit(&w, up, 1, &xxh, etag, &gen), 0);
    T_EQ(srv_scrape(&e, "railiod_used_bytes") < 64.0 * 1024 * 1024, 1);
    srv_end_wc(&e, &w);
}

/* A chunk of an upload of unknown size sent again shorter, with the
 * checksum it had whole: refused (RIO_EPROTO). It was taken as a retry
 * (answered 0) after marking the chunk the short last one, so the commit
 * made an object of 1 MiB + 10 bytes whose last chunk's checksum covered
 * 1 MiB: every READ of it RIO_ECHECKSUM. */
TEST(unknown_size_whole_chunk_resent_short)
{
    struct srv_env e;
    struct wc w;
    const char *args[] = {"--memory", "64M", NULL};
    const uint64_t ch = 1u << 20;
    uint8_t *data = t_pattern_buf(2 * ch, 17), got[10];
    uint64_t up = 0, gen = 0, x[2] = {rio__xxh3(data, ch), rio__xxh3(data + ch, ch)};
    struct rio_proto_desc d;
    uint8_t *keep = NULL;
    char etag[33];

    wc_etag(data, 2 * ch, etag);
    srv_start_wc(&e, args, &w);
    T_EQ(wc_put_open(&w, "u", RIO_PROTO_SIZE_UNKNOWN, ch, 0, &up), 0);
    T_EQ(wc_put_chunk(&w, up, 0, x[0], data, ch), 0);
    T_EQ(wc_put_chunk(&w, up, 1, x[1], data + ch, ch), 0);
    T_EQ(wc_put_chunk(&w, up, 1, x[1], data + ch, 10), RIO_EPROTO);
    T_EQ(wc_put_chunk(&w, up, 0, x[0], data, 10), RIO_EPROTO);
    T_EQ(wc_put_commit(&w, up, 2, x, etag, &gen), 0);
    T_EQ(wc_lookup(&w, "u", &d, &keep), 0);
    free(keep);
    T_EQ(d.size, 2 * ch);
    T_EQ(wc_read(&w, "u", gen, ch, sizeof(got), got), 0);
    T_MEMEQ(got, data + ch, sizeof(got));
    free(data);
    srv_end_wc(&e, &w);
}

/* Tiny chunks cannot make an upload of unknown size allocate per-chunk
 * arrays for millions of chunks: its bound keeps its metadata within the
 * share of uploads without data (--memory / 64). */
TEST(unknown_size_tiny_chunks_bounded)
{
    struct srv_env e;
    struct wc w;
    const char *args[] = {"--memory", "64M", NULL};
    uint64_t up = 0;
    uint8_t b = 'x';
    uint64_t xxh = rio__xxh3(&b, 1);
    /* (64 MiB / 64) / 18 bytes of metadata per chunk. */
    const uint64_t bound = (64ull << 20) / 64 / 18;

    srv_start_wc(&e, args, &w);
    T_EQ(wc_put_open(&w, "t/tiny", RIO_PROTO_SIZE_UNKNOWN, 1, 0, &up), 0);
    T_EQ(wc_put_chunk(&w, up, bound - 1, xxh, &b, 1), 0);
    T_EQ(wc_put_chunk(&w, up, bound, xxh, &b, 1), -EFBIG);
    srv_end_wc(&e, &w);
}
