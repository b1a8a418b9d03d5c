/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 90 */
/*
 * railiod's disk tier with commits held open on purpose: the server is
 * started with RAILIOD_TEST_COMMIT_HOLD=PATH, and a commit of a key under
 * "hold/" waits (on a commit thread, after its data is on disk, before its
 * rename) while PATH does not exist, after creating PATH.reached. With that:
 *
 * - a held --sync commit does not stall the worker (--threads 1, so every
 *   connection is on it): another connection's READ, LOOKUP and a whole PUT
 *   are served promptly, and so is a PING on the committing connection;
 * - a DELETE wins over a PUT whose upload opened before it and whose commit
 *   lands after it, also after kill -9 and a restart, and also when the
 *   server is killed while the commit is still held; a PUT opened after the
 *   DELETE is visible; the tombstone is reclaimed once no older upload can
 *   commit;
 * - recovery honours a tombstone file and quarantines a corrupt one;
 * - a cached commit that lands after a newer one (an empty object, which
 *   the hold lets through) is not what the key serves.
 */
#include "server_disk_util.h"

#define MAXSZ (200u * 1024u)
#define CHUNK (64u * 1024u)
#define PROMPT_MS 3000u

static char hold[300];

/* on: commits of hold/ keys wait; off: they (and any waiting) go on. */
static void hold_set(int on)
{
    if (on) {
        unlink(hold);
        return;
    }
    int fd = open(hold, O_WRONLY | O_CREAT, 0644);
    T_GE(fd, 0);
    close(fd);
}

/* Wait until a held commit announced itself. */
static void hold_wait_reached(void)
{
    char reached[320];
    uint64_t t0 = t_now_ms();

    snprintf(reached, sizeof(reached), "%s.reached", hold);
    while (access(reached, F_OK) != 0) {
        if (t_now_ms() - t0 > 20000)
            T_FAIL("no commit reached the hold point within 20 s");
        usleep(2000);
    }
    unlink(reached);
}

static void start(struct srv_env *e, const char *dir)
{
    const char *args[] = {"--data-dir", dir,         "--sync",      "--threads",
                          "1",          "--metrics", "127.0.0.1:0", NULL};
    setenv("RAILIOD_TEST_COMMIT_HOLD", hold, 1);
    srv_start(e, args);
}

static void setup(void)
{
    const char *hdir = disk_dir_make();
    snprintf(hold, sizeof(hold), "%s/release", hdir);
    hold_set(0);
}

/* A PUT of version seq of key (key number k) up to its commit, which is sent
 * and not waited for: the commit's request id. */
static uint64_t put_until_commit(struct wc *c, const char *key, unsigned k, uint64_t seq)
{
    uint64_t n, up = 0;
    uint8_t *d = dv_make(k, seq, MAXSZ, &n);
    uint64_t nch = wc_nchunks(n, CHUNK), *x = wc_xxh_list(d, n, CHUNK);
    struct rio_proto_put_commit m = {.nchunks = nch};
    size_t cap = 48 + 8 * (size_t)nch;
    uint8_t *out = malloc(cap);
    char etag[33];
    uint64_t id;
    int st, len;

    wc_etag(d, n, etag);
    T_EQ(wc_put_open(c, key, n, CHUNK, 0, &up), 0);
    for (uint64_t i = 0; i < nch; i++) {
        uint64_t off = i * CHUNK, l = n - off < CHUNK ? n - off : CHUNK;
        T_EQ(wc_put_chunk(c, up, i, x[i], d + off, l), 0);
    }
    m.upload_id = up;
    memcpy(m.etag, etag, 32);
    len = rio__proto_enc_put_commit(&m, x, out, cap);
    T_GT(len, 0);
    id = c->next_id++;
    st = wc_send2(c, RIO_OP_PUT_COMMIT, id, out, (size_t)len, NULL, 0);
    T_EQ(st, 0);
    free(out);
    free(x);
    free(d);
    return id;
}

/* The answer to commit id: its status, and *gen. */
static int commit_answer(struct wc *c, uint64_t id, uint64_t *gen)
{
    struct rio_proto_hdr h;
    struct rio_proto_put_commit_resp r;
    uint8_t *body = NULL;

    T_EQ(wc_recv(c, &h, &body), 0);
    T_EQ(h.id, id);
    T_EQ(h.opcode, RIO_OP_PUT_COMMIT);
    if (h.status == 0) {
        T_EQ(rio__proto_dec_put_commit_resp(body, h.body_len, &r), 0);
        *gen = r.generation;
    }
    free(body);
    return h.status;
}

static uint64_t put_version(struct wc *c, const char *key, unsigned k, uint64_t seq)
{
    return dv_put(c, key, k, seq, MAXSZ, CHUNK);
}

#define expect_version(c, key, k, seq, gen) dv_expect((c), (key), (k), (seq), MAXSZ, (gen))

static void expect_absent(struct wc *c, const char *key)
{
    struct rio_proto_desc d;
    uint8_t *keep = NULL, b;
    T_EQ(wc_lookup(c, key, &d, &keep), RIO_ENOTFOUND);
    free(keep);
    T_EQ(wc_read(c, key, 0, 0, 1, &b), RIO_ENOTFOUND);
}

TEST(held_commit_does_not_stall_the_worker)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc a, b;
    uint64_t id, gen = 0, g1;

    setup();
    start(&e, dir);
    wc_open(&a, e.addr[0]);
    wc_open(&b, e.addr[0]);
    g1 = put_version(&b, "plain", 1, 1);

    hold_set(1);
    id = put_until_commit(&a, "hold/a", 2, 1);
    hold_wait_reached();
    /* The commit is held on a commit thread. The one worker serves on. */
    uint64_t t0 = t_now_ms();
    expect_version(&b, "plain", 1, 1, g1);
    uint64_t t_read = t_now_ms() - t0;
    t0 = t_now_ms();
    uint64_t g2 = put_version(&b, "other", 3, 1); /* a --sync commit of its own */
    uint64_t t_put = t_now_ms() - t0;
    t0 = t_now_ms();
    T_EQ(wc_ping(&a), 0); /* the committing connection reads on too */
    uint64_t t_ping = t_now_ms() - t0;
    fprintf(stderr, "while a commit is held: READ %llu ms, PUT %llu ms, PING %llu ms\n",
            (unsigned long long)t_read, (unsigned long long)t_put, (unsigned long long)t_ping);
    T_LT(t_read, PROMPT_MS);
    T_LT(t_put, PROMPT_MS);
    T_LT(t_ping, PROMPT_MS);
    expect_version(&b, "other", 3, 1, g2);
    /* Not visible before it is durable and renamed. */
    expect_absent(&b, "hold/a");
    T_EQ(srv_scrape(&e, "railiod_uploads"), 0.0);

    hold_set(0);
    T_EQ(commit_answer(&a, id, &gen), 0);
    T_GT(gen, g1);
    expect_version(&b, "hold/a", 2, 1, gen);
    wc_close(&a);
    srv_end_wc(&e, &b);
}

TEST(delete_wins_over_an_older_put)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc a, b;
    uint64_t id, gen = 0, g1, g3;

    setup();
    start(&e, dir);
    wc_open(&a, e.addr[0]);
    wc_open(&b, e.addr[0]);
    g1 = put_version(&a, "hold/k", 5, 1);
    expect_version(&b, "hold/k", 5, 1, g1);

    /* Version 2's upload opens, its commit is held, DELETE, then the
     * commit lands: the DELETE wins. */
    hold_set(1);
    id = put_until_commit(&a, "hold/k", 5, 2);
    hold_wait_reached();
    T_EQ(wc_delete(&b, "hold/k"), 0);
    expect_absent(&b, "hold/k");
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 1u); /* the tombstone */
    hold_set(0);
    T_EQ(commit_answer(&a, id, &gen), 0);
    expect_absent(&b, "hold/k");
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 0u);
    T_EQ(disk_dir_count(dir, "t-", NULL, 0), 0u);
    wc_close(&a);
    wc_close(&b);

    /* And after kill -9 and a restart. */
    srv_kill9(&e);
    start(&e, dir);
    wc_open(&b, e.addr[0]);
    expect_absent(&b, "hold/k");
    /* A PUT opened after the DELETE is visible. */
    g3 = put_version(&b, "hold/k", 5, 3);
    T_GT(g3, gen);
    expect_version(&b, "hold/k", 5, 3, g3);
    /* No upload older than a tombstone is left: none stays behind. */
    uint64_t t0 = t_now_ms();
    while (disk_dir_count(dir, "d-", NULL, 0) != 0) {
        if (t_now_ms() - t0 > 5000)
            T_FAIL("tombstone not reclaimed within 5 s");
        usleep(20000);
    }
    wc_close(&b);

    /* The server killed while the commit is still held after the DELETE. */
    wc_open(&a, e.addr[0]);
    wc_open(&b, e.addr[0]);
    hold_set(1);
    put_until_commit(&a, "hold/k", 5, 4);
    hold_wait_reached();
    T_EQ(wc_delete(&b, "hold/k"), 0);
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 1u);
    wc_close(&a);
    wc_close(&b);
    srv_kill9(&e);
    hold_set(0);
    start(&e, dir);
    wc_open(&b, e.addr[0]);
    expect_absent(&b, "hold/k");
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 0u);
    T_EQ(disk_dir_count(dir, "t-", NULL, 0), 0u);
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 0u); /* reclaimed at start-up */
    srv_end_wc(&e, &b);
}

static void le64_at(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* A tombstone file as disk.c writes it (docs/server.md has the layout). */
static void write_tomb(const char *dir, const char *key, uint64_t gen, int corrupt)
{
    uint8_t f[24 + 64 + 8] = {0};
    size_t klen = strlen(key), n = 24 + klen + 8;
    char path[512];

    memcpy(f, "RIOTMB1\n", 8);
    f[8] = (uint8_t)klen;
    le64_at(f + 16, gen);
    memcpy(f + 24, key, klen);
    le64_at(f + 24 + klen, rio__xxh3(f, 24 + klen));
    if (corrupt)
        f[24] ^= 1;
    snprintf(path, sizeof(path), "%s/d-%016llx-%016llx", dir,
             (unsigned long long)rio__xxh3(key, klen), (unsigned long long)gen);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    T_GE(fd, 0);
    T_EQ(write(fd, f, n), (ssize_t)n);
    close(fd);
}

TEST(recovery_honours_tombstones)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc c;
    uint64_t g1, g2, g3;

    setup();
    start(&e, dir);
    wc_open(&c, e.addr[0]);
    g1 = put_version(&c, "gone", 1, 1);
    g2 = put_version(&c, "kept", 2, 1);
    g3 = put_version(&c, "newer", 3, 1);
    srv_end_wc(&e, &c);

    /* A tombstone above "gone", one below "newer", a corrupt one for "kept". */
    write_tomb(dir, "gone", g1 + 1, 0);
    write_tomb(dir, "newer", g3 - 1, 0);
    write_tomb(dir, "kept", g2 + 1, 1);
    start(&e, dir);
    T_EQ(srv_scrape(&e, "railiod_disk_corrupt_records_total"), 1.0);
    wc_open(&c, e.addr[0]);
    expect_absent(&c, "gone");
    expect_version(&c, "kept", 2, 1, g2);
    expect_version(&c, "newer", 3, 1, g3);
    T_EQ(disk_dir_count(dir, "o-", NULL, 0), 2u);
    T_EQ(disk_dir_count(dir, "d-", NULL, 0), 1u); /* the quarantined one */
    T_EQ(srv_scrape(&e, "railiod_disk_objects"), 2.0);
    /* Generations continue above the tombstones too. */
    T_GT(put_version(&c, "gone", 1, 2), g3);
    srv_end_wc(&e, &c);
}

/* Two PUTs of one key: the older, cached in memory, held at its commit;
 * the newer, empty (not held, not cached), committed meanwhile. When the
 * older commit lands, the disk index keeps the newer one and removes the
 * older file, and the older was still published in memory: every LOOKUP
 * and READ served it (an acknowledged newer version hidden) until it was
 * evicted or the server restarted. Now the key serves the newer one,
 * before and after a restart. */
TEST(older_cached_commit_landing_late_is_not_served)
{
    const char *dir = disk_dir_make();
    struct srv_env e;
    struct wc a, b;
    struct rio_proto_desc d;
    uint8_t *keep = NULL, byte;
    uint64_t ga = 0, gb;

    setup();
    start(&e, dir);
    wc_open(&a, e.addr[0]);
    wc_open(&b, e.addr[0]);
    hold_set(1);
    uint64_t id = put_until_commit(&a, "hold/k", 3, 1);
    hold_wait_reached();
    gb = wc_put(&b, "hold/k", NULL, 0, CHUNK);
    hold_set(0);
    T_EQ(commit_answer(&a, id, &ga), 0); /* ordered before the newer one */
    T_LT(ga, gb);
    for (int round = 0; round < 2; round++) {
        T_EQ(wc_lookup(&b, "hold/k", &d, &keep), 0);
        free(keep);
        keep = NULL;
        T_EQ(d.generation, gb);
        T_EQ(d.size, 0u);
        T_EQ(wc_read(&b, "hold/k", 0, 0, 1, &byte), RIO_EPROTO); /* past the end of nothing */
        T_EQ(disk_dir_count(dir, "o-", NULL, 0), 1u);
        wc_close(&a);
        srv_end_wc(&e, &b);
        if (round == 0) {
            start(&e, dir);
            wc_open(&a, e.addr[0]);
            wc_open(&b, e.addr[0]);
        }
    }
}
