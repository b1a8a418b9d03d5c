/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * railiod's disk tier (--data-dir): round trips of several sizes, restart
 * with every object byte-exact under its generation and new generations
 * above the old ones, READs served from disk when the memory cache evicted
 * the object, DELETE surviving a restart, partial files discarded, and
 * corrupt records (a flipped metadata byte, a truncated or flipped data
 * file) detected, logged, counted and never served; an overwrite too large
 * to cache, or empty, hiding the cached version it replaced; PUTs of
 * unknown size, cached or not, in files with room for their bound; a
 * FIFO or a directory under a temporary file's name neither hangs nor
 * refuses start-up; records beyond a smaller --max-body left in place; a
 * full data directory still served.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* unshare */
#endif
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "server_disk_util.h"
#include "tlib.h"

#define MAXSZ (300u * 1024u)

static void start(struct srv_env *e, const char *dir, int sync, const char *memory)
{
    const char *args[] = {"--data-dir",           dir,        "--metrics",
                          "127.0.0.1:0",          "--memory", memory,
                          sync ? "--sync" : NULL, NULL};
    srv_start(e, args);
}

static uint64_t put_version(struct wc *c, const char *key, unsigned k, uint64_t seq, uint64_t chunk)
{
    return dv_put(c, key, k, seq, MAXSZ, chunk);
}

#define expect_version(c, key, k, seq, gen) dv_expect((c), (key), (k), (seq), MAXSZ, (gen))

TEST(round_trips_and_restart)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    char key[32];
    uint64_t gens[12], maxgen = 0;
    /* Chunk sizes: one chunk, several, an odd size. */
    const uint64_t chunks[] = {1u << 20, 64u * 1024u, 10007u};

    start(&e, dir, 1, "64M");
    wc_open(&c, e.addr[0]);
    for (unsigned k = 0; k < 12; k++) {
        snprintf(key, sizeof(key), "obj/%u", k);
        gens[k] = put_version(&c, key, k, 1, chunks[k % 3]);
        expect_version(&c, key, k, 1, gens[k]);
        if (gens[k] > maxgen)
            maxgen = gens[k];
    }
    /* An empty object. */
    uint64_t g0 = wc_put(&c, "empty", NULL, 0, 4096);
    T_GT(g0, maxgen);
    maxgen = g0;
    /* Replace one: the old version's file goes. */
    gens[3] = put_version(&c, "obj/3", 3, 2, 64u * 1024u);
    T_GT(gens[3], maxgen);
    maxgen = gens[3];
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 13u);
    T_EQ(disk_dir_count(dir, "t-", NULL, 0), 0u);
    T_EQ(srv_scrape(&e, "railiod_disk_objects"), 13.0);
    srv_end_wc(&e, &c);

    /* Restart: every object byte-exact with the same generation. */
    start(&e, dir, 1, "64M");
    T_EQ(srv_scrape(&e, "railiod_disk_recovered_objects"), 13.0);
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 0.0);
    wc_open(&c, e.addr[0]);
    for (unsigned k = 0; k < 12; k++) {
        snprintf(key, sizeof(key), "obj/%u", k);
        expect_version(&c, key, k, k == 3 ? 2 : 1, gens[k]);
    }
    struct rio_proto_desc d;
    uint8_t *keep = NULL;
    T_EQ(wc_lookup(&c, "empty", &d, &keep), 0);
    T_EQ(d.size, 0u);
    T_EQ(d.generation, g0);
    free(keep);
    /* Partial READs from disk: an unaligned range inside one chunk and one
     * across chunks. */
    {
        uint64_t n;
        uint8_t *want = dv_make(5, 1, MAXSZ, &n), got[300];
        if (n > 70000) {
            T_EQ(wc_read(&c, "obj/5", gens[5], 65530, 300, got), 0);
            T_MEMEQ(got, want + 65530, 300);
        }
        T_EQ(wc_read(&c, "obj/5", gens[5], 1, 20, got), 0);
        T_MEMEQ(got, want + 1, 20);
        T_EQ(wc_read(&c, "obj/5", gens[5], n, 1, got), RIO_EPROTO);
        T_EQ(wc_read(&c, "obj/5", gens[5] + 1, 0, 1, got), RIO_EGENERATION);
        free(want);
    }
    T_GT(srv_scrape(&e, "railiod_disk_reads_total"), 0.0);
    /* New PUTs get higher generations than anything before the restart. */
    uint64_t g = put_version(&c, "obj/0", 0, 2, 64u * 1024u);
    T_GT(g, maxgen);
    expect_version(&c, "obj/0", 0, 2, g);
    /* DELETE survives a restart. */
    T_EQ(wc_delete(&c, "obj/1"), 0);
    T_EQ(wc_delete(&c, "obj/1"), RIO_ENOTFOUND);
    srv_end_wc(&e, &c);

    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    T_EQ(wc_lookup(&c, "obj/1", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    expect_version(&c, "obj/0", 0, 2, g);
    T_EQ(srv_scrape(&e, "railiod_disk_objects"), 12.0);
    srv_end_wc(&e, &c);
}

/* The disk tier decides a conditional commit on its commit thread, under
 * the key's lock, just before the file is published, and a conditional
 * DELETE under the same lock: HELLO offers both (and PUTs of unknown
 * size); RIO_IF_ABSENT and a generation hold or fail with RIO_EGENERATION
 * and nothing written (the refused one's file gone); a generation recovered
 * at restart is the one conditions compare with. */
/* PUT_ONE on the disk tier: committed on a commit thread like a
 * PUT_COMMIT, in a file that survives a restart byte-exact under its
 * generation; a damaged one leaves no file. */
TEST(put_one_round_trips_and_restarts)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    char key[32];
    uint64_t gens[6];

    start(&e, dir, 1, "64M");
    wc_open(&c, e.addr[0]);
    for (unsigned k = 0; k < 6; k++) {
        uint64_t n;
        uint8_t *d = dv_make(k, 1, MAXSZ, &n);
        snprintf(key, sizeof(key), "one/%u", k);
        T_EQ(wc_put_one(&c, key, d, n, MAXSZ, &gens[k]), 0);
        expect_version(&c, key, k, 1, gens[k]);
        free(d);
    }
    uint8_t bad[100] = {1};
    struct rio_proto_put_one m = {.chunk_size = 4096, .xxh = 7, .key = "one/bad", .key_len = 7};
    T_EQ(wc_put_one_ex(&c, &m, bad, sizeof(bad), NULL), RIO_ECHECKSUM);
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 6u);
    T_EQ(disk_dir_count(dir, "t-", NULL, 0), 0u);
    srv_end_wc(&e, &c);
    start(&e, dir, 1, "64M");
    wc_open(&c, e.addr[0]);
    for (unsigned k = 0; k < 6; k++) {
        snprintf(key, sizeof(key), "one/%u", k);
        expect_version(&c, key, k, 1, gens[k]);
    }
    srv_end_wc(&e, &c);
}

TEST(conditional_commits)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    struct rio_proto_hello_resp hr;
    struct rio_client *cl;
    struct rio_desc d, d2;
    uint8_t *keep, b[4096];
    char url[160];
    uint64_t id = 0, gen = 0, xxh;

    start(&e, dir, 1, "64M");
    wc_connect(&c, e.addr[0]);
    T_EQ(wc_hello_ex(&c, NULL, &hr, &keep), 0);
    T_TRUE(hr.caps & RIO_PROTO_CAP_COND_COMMIT);
    T_TRUE(hr.caps & RIO_PROTO_CAP_COND_DELETE);
    T_TRUE(hr.caps & RIO_PROTO_CAP_STREAM_PUT);
    free(keep);
    snprintf(url, sizeof(url), "railio://%s", e.addr[0]);
    T_OK(rio_client_new(url, NULL, &cl));
    memset(b, 7, sizeof(b));
    struct rio_call absent = {.flags = RIO_IF_ABSENT};
    memset(&d, 0, sizeof(d));
    T_OK(rio_put(cl, "k", b, sizeof(b), &absent, &d));
    T_ERR(rio_put(cl, "k", b, 100, &absent, NULL), RIO_EGENERATION);
    struct rio_call on = {.expect_generation = d.generation};
    T_ERR(rio_put(cl, "k", b, 100, &(struct rio_call){.expect_generation = d.generation + 1}, NULL),
          RIO_EGENERATION);
    memset(&d2, 0, sizeof(d2));
    T_OK(rio_stat(cl, "k", &d2));
    T_EQ(d2.generation, d.generation); /* nothing refused was written */
    T_EQ(d2.size, (uint64_t)sizeof(b));
    rio_desc_cleanup(&d2);
    T_OK(rio_put(cl, "k", b, 200, &on, &d2)); /* on its generation: replaced */
    uint64_t last = d2.generation;
    rio_desc_cleanup(&d2);
    T_ERR(rio_delete_if(cl, "k", d.generation), RIO_EGENERATION);
    T_ERR(rio_delete_if(cl, "missing", d.generation), RIO_ENOTFOUND);
    rio_desc_cleanup(&d);
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 1u); /* the refused PUTs left no file */
    rio_client_destroy(cl);
    /* The wire: a commit whose condition does not hold is answered, the
     * connection kept. */
    xxh = rio__xxh3(b, sizeof(b));
    T_EQ(wc_put_open(&c, "k", sizeof(b), sizeof(b), 0, &id), 0);
    T_EQ(wc_put_chunk(&c, id, 0, xxh, b, sizeof(b)), 0);
    T_EQ(wc_put_commit_if(&c, id, 1, &xxh, "00000000000000000000000000000000", 1,
                          RIO_PROTO_IF_ABSENT, &gen),
         RIO_EGENERATION);
    srv_end_wc(&e, &c);
    /* After a restart, the generation read back is the one that counts. */
    start(&e, dir, 1, "64M");
    snprintf(url, sizeof(url), "railio://%s", e.addr[0]);
    T_OK(rio_client_new(url, NULL, &cl));
    memset(&d, 0, sizeof(d));
    T_OK(rio_stat(cl, "k", &d));
    T_EQ(d.generation, last);
    T_ERR(rio_delete_if(cl, "k", d.generation + 1), RIO_EGENERATION);
    T_OK(rio_delete_if(cl, "k", d.generation));
    memset(&d2, 0, sizeof(d2));
    T_ERR(rio_stat(cl, "k", &d2), RIO_ENOTFOUND);
    rio_desc_cleanup(&d);
    rio_desc_cleanup(&d2);
    rio_client_destroy(cl);
    T_EQ(srv_stop(&e), 0);
}

/* A memory cache smaller than the data: evicted objects are read from disk. */
TEST(memory_is_a_cache)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    char key[32];
    uint64_t gens[16];

    start(&e, dir, 0, "1M");
    wc_open(&c, e.addr[0]);
    for (unsigned k = 0; k < 16; k++) {
        snprintf(key, sizeof(key), "c/%u", k);
        gens[k] = put_version(&c, key, k, 7, 32u * 1024u);
    }
    T_GT(srv_scrape(&e, "railiod_evictions_total"), 0.0);
    for (unsigned k = 0; k < 16; k++) {
        snprintf(key, sizeof(key), "c/%u", k);
        expect_version(&c, key, k, 7, gens[k]);
    }
    T_GT(srv_scrape(&e, "railiod_disk_reads_total"), 0.0);
    srv_end_wc(&e, &c);
}

static void write_file(const char *path, const void *p, size_t n)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    T_GE(fd, 0);
    T_EQ(write(fd, p, n), (ssize_t)n);
    close(fd);
}

/* Path of key's current file (by its generation in the name). */
static void file_of(const char *dir, uint64_t gen, char *out, size_t cap)
{
    char suffix[40];
    DIR *d = opendir(dir);
    struct dirent *de;
    snprintf(suffix, sizeof(suffix), "-%016llx", (unsigned long long)gen);
    out[0] = '\0';
    while (d && (de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (!strncmp(de->d_name, "o-", 2) && l == 35 && !strcmp(de->d_name + l - 17, suffix))
            snprintf(out, cap, "%s/%s", dir, de->d_name);
    }
    if (d)
        closedir(d);
    if (!out[0])
        T_FAIL("no file for generation %llu", (unsigned long long)gen);
}

static void flip_byte(const char *path, off_t off)
{
    int fd = open(path, O_RDWR);
    uint8_t b;
    T_GE(fd, 0);
    T_EQ(pread(fd, &b, 1, off), 1);
    b ^= 0x5a;
    T_EQ(pwrite(fd, &b, 1, off), 1);
    close(fd);
}

TEST(corrupt_records_are_detected_and_not_served)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    struct rio_proto_desc d;
    uint8_t *keep = NULL, *buf = NULL;
    char path[512];
    uint64_t g[5];
    struct stat st;

    start(&e, dir, 1, "64M");
    wc_open(&c, e.addr[0]);
    g[0] = put_version(&c, "meta", 0, 1, 16384);
    g[1] = put_version(&c, "trunc", 1, 1, 16384);
    g[2] = put_version(&c, "data", 2, 1, 16384);
    g[3] = put_version(&c, "fine", 3, 1, 16384);
    g[4] = put_version(&c, "hdrtrunc", 4, 1, 16384);
    srv_end_wc(&e, &c);

    /* A byte of the metadata (inside the key) flipped. */
    file_of(dir, g[0], path, sizeof(path));
    flip_byte(path, 90);
    /* The data file cut short by one byte. */
    file_of(dir, g[1], path, sizeof(path));
    T_EQ(stat(path, &st), 0);
    T_EQ(truncate(path, st.st_size - 1), 0);
    /* A data byte flipped: the header is fine, the chunk checksum is not. */
    file_of(dir, g[2], path, sizeof(path));
    T_EQ(stat(path, &st), 0);
    flip_byte(path, st.st_size - 5);
    /* Cut inside the header. */
    file_of(dir, g[4], path, sizeof(path));
    T_EQ(truncate(path, 50), 0);
    /* A partial PUT left behind by a crash. */
    snprintf(path, sizeof(path), "%s/t-0000000000000001-0000000000000002.tmp", dir);
    write_file(path, "partial", 7);

    start(&e, dir, 1, "64M");
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 3.0);
    T_EQ(srv_scrape(&e, "railiod_disk_discarded_partial"), 1.0);
    T_EQ(disk_dir_count(dir, "t-", NULL, 0), 0u);
    T_EQ(disk_dir_count(dir, "o-", NULL, 0) - 3u, 2u); /* .corrupt ones keep the prefix */
    wc_open(&c, e.addr[0]);
    T_EQ(wc_lookup(&c, "meta", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    T_EQ(wc_lookup(&c, "trunc", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    T_EQ(wc_lookup(&c, "hdrtrunc", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    /* The flipped data byte is found when read: an error, never the bytes. */
    T_EQ(dv_get(&c, "data", &buf, &d), -EIO);
    T_NULL(buf);
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 4.0);
    expect_version(&c, "fine", 3, 1, g[3]);
    srv_end_wc(&e, &c);
}

static void le64_at(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/*
 * A record written by hand (the layout of docs/server.md and disk.c) with a
 * generation far above the clock: recovered and served as is, and new PUTs
 * get generations above it, so they do not depend on the clock alone.
 */
/* Write a record by hand (the layout of docs/server.md and disk.c) for
 * key (klen bytes) at gen, of version seq of value k, in chunks of chunk:
 * checksums right, so that only what it says can be wrong. */
static void forge(const char *dir, const char *key, uint64_t klen, uint64_t gen, uint64_t chunk,
                  unsigned k, uint64_t seq)
{
    uint64_t n;
    uint8_t *d = dv_make(k, seq, MAXSZ, &n);
    uint64_t nch = chunk > n ? 1 : wc_nchunks(n, chunk);
    uint64_t *x = wc_xxh_list(d, n, chunk > n ? n : chunk);
    uint64_t hlen = 88 + klen + nch * 8 + 8, off = (hlen + 4095) / 4096 * 4096;
    uint8_t *f = calloc(1, off + n);
    char etag[33], path[512];

    wc_etag(d, n, etag);
    memcpy(f, "RIOOBJ1\n", 8);
    f[8] = (uint8_t)hlen;
    f[9] = (uint8_t)(hlen >> 8);
    f[12] = (uint8_t)klen;
    le64_at(f + 16, gen);
    le64_at(f + 24, n);
    le64_at(f + 32, chunk);
    le64_at(f + 40, nch);
    le64_at(f + 48, off);
    memcpy(f + 56, etag, 32);
    memcpy(f + 88, key, klen);
    for (uint64_t i = 0; i < nch; i++)
        le64_at(f + 88 + klen + 8 * i, x[i]);
    le64_at(f + hlen - 8, rio__xxh3(f, hlen - 8));
    memcpy(f + off, d, n);
    snprintf(path, sizeof(path), "%s/o-%016llx-%016llx", dir,
             (unsigned long long)rio__xxh3(key, klen), (unsigned long long)gen);
    write_file(path, f, off + n);
    free(f);
    free(x);
    free(d);
}

TEST(generations_continue_above_records)
{
    const char *dir = disk_dir_make();
    const uint64_t gen = 0x7000000000000000ull;
    const char *key = "forged";
    struct srv_env e;
    struct wc c;

    forge(dir, key, strlen(key), gen, 4096, 9, 3);
    start(&e, dir, 1, "64M");
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 0.0);
    wc_open(&c, e.addr[0]);
    expect_version(&c, key, 9, 3, gen);
    T_GT(put_version(&c, "next", 10, 1, 4096), gen);
    T_GT(put_version(&c, key, 9, 4, 4096), gen);
    expect_version(&c, key, 9, 4, 0);
    srv_end_wc(&e, &c);
}

/* Records whose checksums hold but which railiod cannot have written are
 * quarantined: a generation at the end of its range (the next PUT's
 * wrapped to 1 and a later acknowledged PUT of that key was lost behind
 * it), a key with a NUL byte (every LIST failed, for every key), a chunk
 * larger than the protocol carries (every GET a bare protocol error). */
TEST(records_railiod_cannot_have_written_quarantined)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    struct rio_proto_desc d;
    uint8_t *keep = NULL;

    forge(dir, "genmax", 6, UINT64_MAX, 4096, 1, 1);
    forge(dir, "nul\0key", 7, 0x7000000000000000ull, 4096, 2, 1);
    forge(dir, "huge", 4, 0x7000000000000001ull, 1ull << 63, 3, 1);
    forge(dir, "fine", 4, 0x7000000000000002ull, 4096, 4, 1);
    start(&e, dir, 0, "64M");
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 3.0);
    wc_open(&c, e.addr[0]);
    expect_version(&c, "fine", 4, 1, 0x7000000000000002ull);
    T_EQ(wc_lookup(&c, "genmax", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    T_EQ(wc_lookup(&c, "huge", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    uint64_t g = put_version(&c, "genmax", 1, 2, 4096);
    T_GT(g, 0x7000000000000002ull);
    expect_version(&c, "genmax", 1, 2, g);
    T_GT(put_version(&c, "other", 5, 1, 4096), g);
    srv_end_wc(&e, &c);
}

/* A sparse record whose fixed header claims millions of chunks while its
 * size says none is refused for its geometry before its header is read:
 * start-up read and hashed every such file's 32 MiB of holes (and
 * allocated as much) only to find its checksum wrong. */
TEST(sparse_record_refused_before_its_header_is_read)
{
    const char *dir = disk_dir_make();
    const uint64_t nch = 4u << 20, gen = 0x7000000000000000ull;
    const uint64_t hlen = 88 + 4 + nch * 8 + 8, off = (hlen + 4095) / 4096 * 4096;
    uint8_t f[96] = {0};
    char path[512];
    struct srv_env e;
    struct wc c;

    memcpy(f, "RIOOBJ1\n", 8);
    for (int i = 0; i < 4; i++)
        f[8 + i] = (uint8_t)(hlen >> (8 * i));
    f[12] = 4;
    le64_at(f + 16, gen);
    le64_at(f + 24, 0); /* size 0: no chunk at all */
    le64_at(f + 32, 4096);
    le64_at(f + 40, nch);
    le64_at(f + 48, off);
    memcpy(f + 88, "hole", 4);
    snprintf(path, sizeof(path), "%s/o-%016llx-%016llx", dir,
             (unsigned long long)rio__xxh3("hole", 4), (unsigned long long)gen);
    write_file(path, f, sizeof(f));
    T_EQ(truncate(path, (off_t)off), 0); /* the rest a hole */
    forge(dir, "fine", 4, gen + 1, 4096, 4, 1);
    setenv("SRV_LOG_FILE", "1", 1);
    start(&e, dir, 0, "64M");
    unsetenv("SRV_LOG_FILE");
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 1.0);
    T_EQ(srv_log_count(&e, "bad geometry"), 1u);
    T_EQ(srv_log_count(&e, "checksum mismatch"), 0u);
    wc_open(&c, e.addr[0]);
    expect_version(&c, "fine", 4, 1, gen + 1);
    srv_end_wc(&e, &c);
}

/* An overwrite published without its bytes in memory (one too large for
 * the cache, an empty one) hides the version it replaced, which memory
 * still held: every later lookup and READ is the new one (they served the
 * old bytes, acknowledged overwrite and all, until a restart). */
TEST(uncached_overwrite_hides_the_cached_version)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct rio_client *c;
    struct rio_desc d, got;
    char url[128];
    size_t big = 12u * 1024u * 1024u; /* over --memory 8M: never cached */
    uint8_t *small = t_pattern_buf(1000, 1), *large = t_pattern_buf(big, 2);
    uint8_t *buf = malloc(big);
    int64_t n;

    start(&e, dir, 0, "8M");
    snprintf(url, sizeof(url), "railio://%s", e.addr[0]);
    T_OK(rio_client_new(url, NULL, &c));
    for (int round = 0; round < 2; round++) {
        T_OK(rio_put(c, "k", small, 1000, NULL, NULL));
        T_EQ(rio_get(c, "k", buf, big, NULL), 1000); /* cached in memory */
        T_EQ(memcmp(buf, small, 1000), 0);
        memset(&d, 0, sizeof(d));
        if (round == 0)
            T_OK(rio_put(c, "k", large, big, NULL, &d));
        else
            T_OK(rio_put(c, "k", "", 0, NULL, &d));
        memset(&got, 0, sizeof(got));
        T_OK(rio_stat(c, "k", &got));
        T_EQ(got.generation, d.generation);
        T_EQ(got.size, round == 0 ? (uint64_t)big : 0u);
        n = rio_get(c, "k", buf, big, NULL);
        T_EQ(n, round == 0 ? (int64_t)big : 0);
        if (round == 0)
            T_EQ(memcmp(buf, large, big), 0);
        rio_desc_cleanup(&d);
        rio_desc_cleanup(&got);
    }
    rio_client_destroy(c);
    free(small);
    free(large);
    free(buf);
    T_EQ(srv_stop(&e), 0);
}

/* An upload of unknown size over the wire: opened so, its chunks (whole,
 * the last one short), committed with their count. Its generation. */
static uint64_t put_stream(struct wc *c, const char *key, const uint8_t *p, uint64_t n,
                           uint64_t chunk)
{
    uint64_t up = 0, gen = 0, nch = wc_nchunks(n, chunk);
    uint64_t *xxh = wc_xxh_list(p, n, chunk);
    char etag[33];

    wc_etag(p, n, etag);
    T_EQ(wc_put_open(c, key, RIO_PROTO_SIZE_UNKNOWN, chunk, 0, &up), 0);
    for (uint64_t i = 0; i < nch; i++) {
        uint64_t len = n - i * chunk < chunk ? n - i * chunk : chunk;
        T_EQ(wc_put_chunk(c, up, i, xxh[i], p + i * chunk, len), 0);
    }
    T_EQ(wc_put_commit(c, up, nch, xxh, etag, &gen), 0);
    free(xxh);
    return gen;
}

/* PUTs of unknown size (a pipe's `railio put`, the S3 gateway's chunked
 * and POST uploads) on the disk tier: refused with RIO_ENOTSUP before. Each
 * object's file is laid out for the most chunks such a PUT may hold
 * (RIO_SRV_DISK_STREAM_CHUNKS) and ends where its data does; the part of
 * the header it does not use is a hole, so a small object takes a few
 * pages of disk, not half a MiB. Cached (small chunks: the bound fits the
 * memory) and staged (it does not), every size read back byte-exact, and
 * again after a restart, nothing counted corrupt. */
TEST(streams_of_unknown_size)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    struct stat st;
    char key[64], path[512];
    const uint64_t chunks[] = {512, 64u * 1024u}; /* bound 32 MiB: cached; 4 GiB: staged */
    const uint64_t sizes[] = {0, 1, 3 * 64u * 1024u + 17};
    uint64_t gens[2][3];
    uint8_t *src = t_pattern_buf(sizes[2], 5), *got = NULL;

    start(&e, dir, 1, "64M");
    wc_open(&c, e.addr[0]);
    /* One byte: a file of the bound's layout, mostly hole. */
    uint64_t g = put_stream(&c, "one", src, 1, 512);
    T_EQ(disk_dir_count(dir, "o-", path, sizeof(path)), 1u);
    T_EQ(stat(path, &st), 0);
    /* Its data starts at a multiple of 4096 past the room for the bound's
     * checksums (8 bytes each; 58254 chunks at --memory 64M: what the
     * metadata share of uploads without data allows), 1 byte of data. */
    T_EQ(((uint64_t)st.st_size - 1) % 4096u, 0u);
    T_GT((uint64_t)st.st_size, 58254u * 8u);
    T_LT((uint64_t)st.st_blocks * 512u, 64u * 1024u);
    for (unsigned i = 0; i < 2; i++)
        for (unsigned j = 0; j < 3; j++) {
            snprintf(key, sizeof(key), "s/%u/%u", i, j);
            gens[i][j] = put_stream(&c, key, src, sizes[j], chunks[i]);
        }
    for (int round = 0; round < 2; round++) {
        struct rio_proto_desc d;
        for (unsigned i = 0; i < 2; i++)
            for (unsigned j = 0; j < 3; j++) {
                snprintf(key, sizeof(key), "s/%u/%u", i, j);
                T_EQ(dv_get(&c, key, &got, &d), 0);
                T_EQ(d.size, sizes[j]);
                T_EQ(d.generation, gens[i][j]);
                T_EQ(d.chunk_size, chunks[i]);
                if (sizes[j])
                    T_MEMEQ(got, src, sizes[j]);
                free(got);
                got = NULL;
            }
        T_EQ(dv_get(&c, "one", &got, &d), 0);
        T_EQ(d.size, 1u);
        T_EQ(d.generation, g);
        T_EQ(got[0], src[0]);
        free(got);
        got = NULL;
        srv_end_wc(&e, &c);
        start(&e, dir, 1, "64M");
        if (round == 0) {
            T_EQ(srv_scrape(&e, "railiod_disk_recovered_objects"), 7.0);
            T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 0.0);
        }
        wc_open(&c, e.addr[0]);
    }
    srv_end_wc(&e, &c);
    free(src);
}

/* DELETEs of keys that hold nothing, while an older upload stays open:
 * each wrote a tombstone file (and kept its memory) until that upload
 * ended, so a client holding one upload open could fill the directory
 * and the memory with DELETEs answered RIO_ENOTFOUND. Now they leave
 * nothing; the open upload commits afterwards and its key is there. A
 * DELETE of a key that holds an object still leaves its tombstone. */
TEST(deletes_of_absent_keys_leave_no_tombstones)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    char key[64];
    uint8_t b[10] = "0123456789";
    uint64_t up = 0, gen = 0, xxh = rio__xxh3(b, sizeof(b));
    char etag[33];

    wc_etag(b, sizeof(b), etag);
    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    T_EQ(wc_put_open(&c, "never/0", sizeof(b), sizeof(b), 0, &up), 0); /* kept open */
    for (unsigned i = 0; i < 2000; i++) {
        snprintf(key, sizeof(key), "never/%u", i);
        T_EQ(wc_delete(&c, key), RIO_ENOTFOUND);
    }
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 0u);
    T_EQ(wc_put_chunk(&c, up, 0, xxh, b, sizeof(b)), 0);
    T_EQ(wc_put_commit(&c, up, 1, &xxh, etag, &gen), 0);
    uint8_t got[10];
    T_EQ(wc_read(&c, "never/0", gen, 0, sizeof(got), got), 0);
    T_MEMEQ(got, b, sizeof(b));
    /* An object's DELETE with an older upload open: its tombstone. */
    T_EQ(wc_put_open(&c, "never/0", sizeof(b), sizeof(b), 0, &up), 0);
    T_EQ(wc_delete(&c, "never/0"), 0);
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 1u);
    T_EQ(wc_put_chunk(&c, up, 0, xxh, b, sizeof(b)), 0);
    T_EQ(wc_put_commit(&c, up, 1, &xxh, etag, &gen), 0); /* loses to the DELETE */
    struct rio_proto_desc d;
    uint8_t *keep = NULL;
    T_EQ(wc_lookup(&c, "never/0", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    srv_end_wc(&e, &c);
}

/* DELETEs of objects while an upload of another key stays open: each kept
 * its tombstone (a file and its memory) until that upload ended, as if the
 * upload could lose to it, so one upload held open let a client fill the
 * directory and the memory with PUTs and DELETEs, counted against no
 * limit. A tombstone is kept only while an upload of its own key opened
 * before it can still commit, and goes when that one ends. */
TEST(tombstones_only_while_an_upload_of_their_key_is_open)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c, c2;
    char key[64];
    uint8_t b[10] = "0123456789";
    uint64_t up = 0, up2 = 0, gen = 0, xxh = rio__xxh3(b, sizeof(b));
    char etag[33];

    wc_etag(b, sizeof(b), etag);
    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    T_EQ(wc_put_open(&c, "held", sizeof(b), sizeof(b), 0, &up), 0); /* kept open */
    for (unsigned i = 0; i < 300; i++) {
        snprintf(key, sizeof(key), "gone/%u", i);
        T_EQ(wc_put_one(&c, key, b, sizeof(b), sizeof(b), &gen), 0);
        T_EQ(wc_delete(&c, key), 0);
    }
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 0u); /* was 300 */
    T_EQ(srv_scrape(&e, "railiod_disk_tombstones"), 0.0);

    /* One an upload of its key opened before it needs: kept while that
     * upload is open, whatever "held" does, and gone once it ends (its
     * connection closed). */
    T_EQ(wc_put_one(&c, "mine", b, sizeof(b), sizeof(b), &gen), 0);
    wc_open(&c2, e.addr[0]);
    T_EQ(wc_put_open(&c2, "mine", sizeof(b), sizeof(b), 0, &up2), 0);
    T_EQ(wc_delete(&c, "mine"), 0);
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 1u);
    T_EQ(srv_scrape(&e, "railiod_disk_tombstones"), 1.0);
    usleep(600000); /* two sweeps: kept */
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 1u);
    wc_close(&c2);
    uint64_t t0 = t_now_ms();
    while (disk_dir_count(dir, "d-", NULL, 0) != 0) {
        if (t_now_ms() - t0 > 5000)
            T_FAIL("tombstone not reclaimed within 5 s of its upload's end");
        usleep(20000);
    }
    T_EQ(srv_scrape(&e, "railiod_disk_tombstones"), 0.0);
    T_EQ(wc_put_chunk(&c, up, 0, xxh, b, sizeof(b)), 0);
    T_EQ(wc_put_commit(&c, up, 1, &xxh, etag, &gen), 0);
    uint8_t got[10];
    T_EQ(wc_read(&c, "held", gen, 0, sizeof(got), got), 0);
    T_MEMEQ(got, b, sizeof(b));
    srv_end_wc(&e, &c);
}

/* The directory railiod makes, and every file in it (records, an upload's
 * temporary file, a tombstone), are its user's only: they were 0755 and
 * 0644 (under umask 022), every object readable by any local user. */
TEST(files_readable_by_the_server_only)
{
    char dir[4200];
    struct srv_env e;
    struct wc c, c2;
    uint8_t b[10] = "0123456789";
    uint64_t up = 0, gen = 0;
    struct stat st;

    snprintf(dir, sizeof(dir), "%s/data", disk_dir_make());
    mode_t old = umask(022);
    start(&e, dir, 0, "64M");
    umask(old);
    wc_open(&c, e.addr[0]);
    T_EQ(wc_put_one(&c, "a", b, sizeof(b), sizeof(b), &gen), 0);
    T_EQ(wc_put_one(&c, "b", b, sizeof(b), sizeof(b), &gen), 0);
    wc_open(&c2, e.addr[0]);
    T_EQ(wc_put_open(&c2, "a", 2 * sizeof(b), sizeof(b), 0, &up), 0);
    T_EQ(wc_put_chunk(&c2, up, 0, rio__xxh3(b, sizeof(b)), b, sizeof(b)), 0);
    T_EQ(wc_delete(&c, "a"), 0); /* a tombstone: the upload of a opened before */
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 1u);
    T_EQ(disk_dir_count(dir, "t-", NULL, 0), 1u);
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 1u);
    T_EQ(stat(dir, &st), 0);
    T_EQ(st.st_mode & 0777, 0700u);
    DIR *dd = opendir(dir);
    T_TRUE(dd != NULL);
    unsigned n = 0;
    for (struct dirent *de; (de = readdir(dd));) {
        char p[8400];
        if (de->d_name[0] == '.')
            continue;
        snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
        T_EQ(lstat(p, &st), 0);
        if (st.st_mode & 077)
            T_FAIL("%s: mode %o", de->d_name, (unsigned)(st.st_mode & 0777));
        n++;
    }
    closedir(dd);
    T_GE(n, 3u);
    wc_close(&c2);
    srv_end_wc(&e, &c);
}

/* What someone else planted in the directory under records' names: a FIFO
 * (start-up hung on it for good, and so did every READ thread that met
 * one), a symbolic link to a record outside (served), a second spelling of
 * a record's name in capitals (its recovery unlinked the real record), and
 * links under the names of tombstones to come (a DELETE wrote its
 * tombstone through one, over a file outside the directory). None is
 * followed or waited on; the real records are served. */
TEST(planted_names_neither_followed_nor_waited_on)
{
    const char *dir = disk_dir_make();
    char outside[512], path[512], other[600], cmd[2048];
    struct srv_env e;
    struct wc c;
    struct rio_proto_desc d;
    uint8_t *keep = NULL, *buf = NULL;
    uint64_t g[4];

    snprintf(outside, sizeof(outside), "%s.outside", dir);
    T_EQ(mkdir(outside, 0755), 0);
    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    g[0] = put_version(&c, "a", 0, 1, 16384);
    g[1] = put_version(&c, "fifo", 1, 1, 16384);
    g[2] = put_version(&c, "link", 2, 1, 16384);
    g[3] = put_version(&c, "b", 1, 2, 16384);
    srv_end_wc(&e, &c);

    file_of(dir, g[1], path, sizeof(path));
    T_EQ(unlink(path), 0);
    T_EQ(mkfifo(path, 0644), 0);
    file_of(dir, g[2], path, sizeof(path));
    snprintf(other, sizeof(other), "%s/rec", outside);
    T_EQ(rename(path, other), 0);
    T_EQ(symlink(other, path), 0);
    file_of(dir, g[0], path, sizeof(path));
    const char *base = strrchr(path, '/') + 1;
    snprintf(cmd, sizeof(cmd), "cp %s \"%s/$(echo %s | tr a-f A-F)\"", path, dir, base);
    T_EQ(t_sh("%s", cmd), 0);

    start(&e, dir, 0, "64M"); /* hung in open() on the FIFO */
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 2.0);
    wc_open(&c, e.addr[0]);
    expect_version(&c, "a", 0, 1, g[0]);
    T_EQ(wc_lookup(&c, "fifo", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    T_EQ(wc_lookup(&c, "link", &d, &keep), RIO_ENOTFOUND);
    free(keep);

    /* At run time: a record replaced by a FIFO (b was recovered, not
     * read: it is not in memory) is an error, at once. */
    uint64_t gb = g[3];
    file_of(dir, gb, path, sizeof(path));
    T_EQ(unlink(path), 0);
    T_EQ(mkfifo(path, 0644), 0);
    T_EQ(dv_get(&c, "b", &buf, &d), -EIO);
    T_NULL(buf);
    expect_version(&c, "a", 0, 1, g[0]);

    /* A record removed behind the server's back is an error that says
     * so (it answered RIO_EGENERATION: "changed during the operation"). */
    T_EQ(unlink(path), 0);
    T_EQ(dv_get(&c, "b", &buf, &d), -EIO);
    T_NULL(buf);

    /* Links under the names the next tombstones of "a" may take (the
     * generations after a probe's), and an upload opened before the
     * DELETE, still open, so that the DELETE writes a tombstone. */
    snprintf(other, sizeof(other), "%s/victim", outside);
    write_file(other, "precious", 8);
    uint8_t b1[100] = {0};
    uint64_t up;
    T_EQ(wc_put_open(&c, "pending", sizeof(b1), sizeof(b1), 0, &up), 0);
    uint64_t gp = put_version(&c, "probe", 3, 1, 16384);
    file_of(dir, g[0], path, sizeof(path));
    char kh[17];
    memcpy(kh, strrchr(path, '/') + 3, 16);
    kh[16] = '\0';
    for (uint64_t i = 1; i <= 64; i++) {
        char name[600];
        snprintf(name, sizeof(name), "%s/d-%s-%016llx", dir, kh, (unsigned long long)(gp + i));
        T_EQ(symlink(other, name), 0);
    }
    T_EQ(wc_delete(&c, "a"), 0);
    T_EQ(wc_lookup(&c, "a", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    size_t n;
    uint8_t *v = t_slurp(other, &n);
    T_EQ(n, 8u);
    T_MEMEQ(v, "precious", 8);
    free(v);
    srv_end_wc(&e, &c);
    T_EQ(t_sh("rm -rf %s", outside), 0);
}

/* A data directory whose file system is full (here: no inode left) still
 * starts and serves what it holds; only uploads fail. It refused to start,
 * "not writable by this user: No space left on device", and no object
 * could be read until space was freed. */
TEST(full_data_dir_still_serves)
{
    const char *dir = disk_dir_make();
    uint8_t *buf = NULL;
    struct rio_proto_desc d;
    struct srv_env e;
    struct wc c;
    uint64_t g[3];

    if (geteuid() != 0 || unshare(CLONE_NEWNS) < 0 ||
        mount("none", "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
        T_SKIP("needs root for a small tmpfs in a mount namespace of its own");
    /* 4 inodes: the root directory and 3 objects. */
    T_EQ(mount("tmpfs", dir, "tmpfs", 0, "size=4m,nr_inodes=4"), 0);
    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    for (unsigned i = 0; i < 3; i++) {
        char key[8];
        snprintf(key, sizeof(key), "k%u", i);
        g[i] = put_version(&c, key, i, 1, 16384);
    }
    T_EQ(dv_get(&c, "k0", &buf, &d), 0);
    free(buf);
    srv_end_wc(&e, &c);

    start(&e, dir, 0, "64M"); /* refused: "not writable by this user" */
    wc_open(&c, e.addr[0]);
    for (unsigned i = 0; i < 3; i++) {
        char key[8];
        snprintf(key, sizeof(key), "k%u", i);
        expect_version(&c, key, i, 1, g[i]);
    }
    uint64_t up;
    T_EQ(wc_put_open(&c, "more", 100, 100, 0, &up), -ENOSPC);
    srv_end_wc(&e, &c);
    T_EQ(umount(dir), 0);
}

/* A record with more chunks than this start's --max-body lets a LOOKUP
 * carry is intact: start-up leaves it in place, unserved, and a start with
 * the larger --max-body serves it again. It was renamed .corrupt ("bad
 * header length"), and a restart with a smaller --max-body lost the
 * object for good. Its generation still counts: later PUTs are newer. */
TEST(records_beyond_max_body_left_in_place)
{
    const char *dir = disk_dir_make();
    const char *small[] = {"--data-dir", dir, "--metrics", "127.0.0.1:0", "--max-body", "8K", NULL};
    const uint64_t n = 1100 * 4096; /* --max-body 8K: LOOKUP carries 1016 */
    uint8_t *want = malloc(n), *buf = NULL;
    struct rio_proto_desc d;
    struct srv_env e;
    struct wc c;

    for (uint64_t i = 0; i < n; i++)
        want[i] = (uint8_t)(i * 131 + (i >> 12));
    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    uint64_t g = wc_put(&c, "many", want, n, 4096);
    uint64_t ga = put_version(&c, "a", 0, 1, 16384);
    srv_end_wc(&e, &c);

    srv_start(&e, small);
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 0.0);
    wc_open(&c, e.addr[0]);
    T_EQ(dv_get(&c, "many", &buf, &d), RIO_ENOTFOUND);
    expect_version(&c, "a", 0, 1, ga);
    uint64_t gb = dv_put(&c, "b", 1, 1, MAXSZ, 4096);
    T_GT(gb, g);
    srv_end_wc(&e, &c);
    T_NE(t_sh("ls %s | grep -q corrupt", dir), 0);

    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    T_EQ(dv_get(&c, "many", &buf, &d), 0);
    T_EQ(d.size, n);
    T_EQ(d.generation, g);
    T_MEMEQ(buf, want, n);
    free(buf);
    dv_expect(&c, "b", 1, 1, MAXSZ, gb);
    srv_end_wc(&e, &c);
    free(want);
}

/* Whatever a temporary file's name holds in the data directory, start-up
 * never opens it: a FIFO under the name of the writability probe
 * (t-0...0-0...0.tmp, fixed then) hung railiod in open() before it logged
 * a line, and a directory there refused the start as "not writable". */
TEST(planted_probe_name_neither_waited_on_nor_refused)
{
    const char *dir = disk_dir_make();
    char path[512];
    struct srv_env e;
    struct wc c;

    snprintf(path, sizeof(path), "%s/t-0000000000000000-0000000000000000.tmp", dir);
    T_EQ(mkfifo(path, 0644), 0);
    start(&e, dir, 0, "64M"); /* hung: railiod never wrote its port file */
    wc_open(&c, e.addr[0]);
    uint64_t g = put_version(&c, "k", 0, 1, 16384);
    srv_end_wc(&e, &c);
    T_EQ(access(path, F_OK), -1); /* discarded as a partial upload */

    T_EQ(mkdir(path, 0755), 0);
    start(&e, dir, 0, "64M"); /* refused: "not writable by this user" */
    wc_open(&c, e.addr[0]);
    expect_version(&c, "k", 0, 1, g);
    srv_end_wc(&e, &c);
}

/* One railiod per data directory: a second one on the same directory
 * refuses to start, saying why (it started, removed the first one's
 * uploads in progress, and the two indexes drifted apart). The first one
 * keeps serving; once it is gone the directory is free again. */
TEST(second_server_on_the_directory_refused)
{
    const char *dir = disk_dir_make();
    struct srv_env e, e2;
    struct wc c;
    char bin[512];

    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    uint64_t g = put_version(&c, "k", 0, 1, 16384);
    srv_binary(bin, sizeof(bin));
    T_EQ(t_sh("timeout -s KILL 20 %s --listen 127.0.0.1:0 --data-dir %s 2>&1 | "
              "grep -q 'another railiod serves it'",
              bin, dir),
         0);
    T_EQ(t_sh("timeout -s KILL 20 %s --listen 127.0.0.1:0 --data-dir %s >/dev/null 2>&1", bin, dir),
         1);
    expect_version(&c, "k", 0, 1, g);
    srv_end_wc(&e, &c);
    start(&e2, dir, 0, "64M");
    wc_open(&c, e2.addr[0]);
    expect_version(&c, "k", 0, 1, g);
    srv_end_wc(&e2, &c);
}

/* A data directory this user may not write (root's, the server started
 * as a service user): railiod refuses to start and says so. It started,
 * logged that it served, and refused every PUT with EACCES (review). */
/* Objects k0..k(n-1) of data in dir, through a railiod started and
 * stopped here. */
static void put_small(const char *dir, unsigned n, const char *data)
{
    struct srv_env e;
    struct wc c;

    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    for (unsigned i = 0; i < n; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%u", i);
        T_GT(wc_put(&c, key, (const uint8_t *)data, strlen(data), 4096), 0u);
    }
    wc_close(&c);
    srv_stop(&e);
}

/* A railiod on dir serves k0..k(n-1), each of size bytes. */
static void expect_small(const char *dir, unsigned n, uint64_t size)
{
    struct srv_env e;
    struct wc c;
    struct rio_proto_desc d;

    start(&e, dir, 0, "64M");
    wc_open(&c, e.addr[0]);
    for (unsigned i = 0; i < n; i++) {
        char key[16];
        uint8_t *keep = NULL;
        snprintf(key, sizeof(key), "k%u", i);
        T_EQ(wc_lookup(&c, key, &d, &keep), 0);
        T_EQ(d.size, size);
        free(keep);
    }
    wc_close(&c);
    srv_stop(&e);
}

/* A read of the data dir that fails part way (EIO from a bad disk; here a
 * readdir(3) that fails once two entries were read, preloaded into
 * railiod) is a refused start, not a server missing the records it did
 * not read and counting generations from the others. */
TEST(data_dir_read_error_refused)
{
    const char *dir = disk_dir_make();
    char bin[512], so[512];
    static const char shim[] =
        "#define _GNU_SOURCE\n#include <dirent.h>\n#include <dlfcn.h>\n#include <errno.h>\n"
        "struct dirent *readdir(DIR *d) {\n"
        "  static struct dirent *(*real)(DIR *); static int n;\n"
        "  if (!real) real = (struct dirent *(*)(DIR *))dlsym(RTLD_NEXT, \"readdir\");\n"
        "  if (++n > 2) { errno = EIO; return 0; }\n"
        "  return real(d);\n}\n";

    t_build_shim(shim, so, sizeof(so));
    put_small(dir, 8, "x");
    srv_binary(bin, sizeof(bin));
    T_EQ(t_sh(T_SHIM_ENV "%s timeout -s KILL 20 %s --listen 127.0.0.1:0 --data-dir %s 2>&1 | "
                         "grep -q 'reading the directory failed: Input/output error'",
              so, bin, dir),
         0);
    T_EQ(t_sh(T_SHIM_ENV
              "%s timeout -s KILL 20 %s --listen 127.0.0.1:0 --data-dir %s >/dev/null 2>&1",
              so, bin, dir),
         1);
    /* Without the fault every record is there. */
    expect_small(dir, 8, 1);
}

/* A read error of the disk's own (EIO) on a record at start is said and
 * the record left where it is, not served: it was taken for a short file
 * and renamed .corrupt, so an intact object a transient error touched was
 * lost for good. Here a pread(2) that fails on every record, preloaded
 * into railiod; the start after it serves every object. */
TEST(read_error_at_start_leaves_records_in_place)
{
    const char *dir = disk_dir_make();
    char bin[512], so[512];
    static const char shim[] =
        "#define _GNU_SOURCE\n#include <errno.h>\n#include <dlfcn.h>\n#include <stdio.h>\n"
        "#include <string.h>\n#include <unistd.h>\n"
        "ssize_t pread(int fd, void *b, size_t n, off_t off) {\n"
        "  static ssize_t (*real)(int, void *, size_t, off_t); char l[64], p[4096];\n"
        "  if (!real) real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "
        "\"pread\");\n"
        "  snprintf(l, sizeof(l), \"/proc/self/fd/%d\", fd);\n"
        "  ssize_t k = readlink(l, p, sizeof(p) - 1);\n"
        "  if (k > 0) { p[k] = 0; if (strstr(p, \"/o-\")) { errno = EIO; return -1; } }\n"
        "  return real(fd, b, n, off);\n}\n"
        "ssize_t pread64(int fd, void *b, size_t n, off_t off) { return pread(fd, b, n, off); }\n";

    t_build_shim(shim, so, sizeof(so));
    put_small(dir, 4, "xyz");
    srv_binary(bin, sizeof(bin));
    T_EQ(t_sh(T_SHIM_ENV "%s timeout 3 %s --listen 127.0.0.1:0 --data-dir %s 2>&1 | "
                         "grep -q 'read .*/o-.*Input/output error; not served'",
              so, bin, dir),
         0);
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 4u);
    T_EQ(t_sh("ls %s | grep -q corrupt", dir), 1);
    expect_small(dir, 4, 3);
}

/* A record the disk fails to read at start is left in place, and its
 * generation (its name's) still counts: generations continued above the
 * records read and the wall clock only, so with the clock behind the
 * record's time (here preloaded: 1970) a PUT of its key got a lower
 * generation, and the next start served the older version again and
 * removed the acknowledged PUT's file as superseded. */
TEST(unread_record_still_raises_generations)
{
    const char *dir = disk_dir_make();
    char so[512];
    static const char shim[] =
        "#define _GNU_SOURCE\n#include <errno.h>\n#include <dlfcn.h>\n#include <stdio.h>\n"
        "#include <string.h>\n#include <time.h>\n#include <unistd.h>\n"
        "ssize_t pread(int fd, void *b, size_t n, off_t off) {\n"
        "  static ssize_t (*real)(int, void *, size_t, off_t); char l[64], p[4096];\n"
        "  if (!real) real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "
        "\"pread\");\n"
        "  snprintf(l, sizeof(l), \"/proc/self/fd/%d\", fd);\n"
        "  ssize_t k = readlink(l, p, sizeof(p) - 1);\n"
        "  if (k > 0) { p[k] = 0; if (strstr(p, \"/o-\")) { errno = EIO; return -1; } }\n"
        "  return real(fd, b, n, off);\n}\n"
        "ssize_t pread64(int fd, void *b, size_t n, off_t off) { return pread(fd, b, n, off); }\n"
        "int clock_gettime(clockid_t id, struct timespec *ts) {\n"
        "  static int (*real)(clockid_t, struct timespec *);\n"
        "  if (!real) real = (int (*)(clockid_t, struct timespec *))dlsym(RTLD_NEXT, "
        "\"clock_gettime\");\n"
        "  int r = real(id, ts);\n"
        "  if (id == CLOCK_REALTIME) { ts->tv_sec = 1000; ts->tv_nsec = 0; }\n"
        "  return r;\n}\n";
    struct srv_env e;
    struct wc c;
    char env[1024];

    t_build_shim(shim, so, sizeof(so));
    put_small(dir, 1, "old");
    snprintf(env, sizeof(env), "%s:verify_asan_link_order=0",
             getenv("ASAN_OPTIONS") ? getenv("ASAN_OPTIONS") : "");
    T_EQ(setenv("ASAN_OPTIONS", env, 1), 0);
    T_EQ(setenv("LD_PRELOAD", so, 1), 0);
    start(&e, dir, 1, "64M");
    T_EQ(unsetenv("LD_PRELOAD"), 0);
    wc_open(&c, e.addr[0]);
    T_GT(wc_put(&c, "k0", (const uint8_t *)"newer", 5, 4096), 0u); /* acknowledged */
    srv_end_wc(&e, &c);
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 2u);
    expect_small(dir, 1, 5); /* was 3: the older version */
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 1u);
}

TEST(data_dir_not_writable_refused)
{
    const char *dir = disk_dir_make();
    char bin[512];

    if (geteuid() != 0 || t_sh("command -v setpriv >/dev/null") != 0)
        T_SKIP("needs root and setpriv(1) to run railiod as another user");
    T_EQ(chmod(dir, 0755), 0);
    srv_binary(bin, sizeof(bin));
    T_EQ(t_sh("timeout -s KILL 20 setpriv --reuid=65534 --regid=65534 --clear-groups %s "
              "--listen 127.0.0.1:0 --data-dir %s 2>&1 | grep -q 'not writable by this user'",
              bin, dir),
         0);
    T_EQ(t_sh("timeout -s KILL 20 setpriv --reuid=65534 --regid=65534 --clear-groups %s "
              "--listen 127.0.0.1:0 --data-dir %s >/dev/null 2>&1",
              bin, dir),
         1);
    /* Nothing of the probe is left. */
    T_EQ(t_sh("[ -z \"$(ls -A %s)\" ]", dir), 0);
}
