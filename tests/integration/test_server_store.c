/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * railiod's memory store through the wire: capacity with LRU eviction or
 * refusal (uploads in progress count), TTL expiry (per object and the
 * server default), abandoned uploads reclaimed.
 */
#include "../harness/server_env.h"

#define OBJ (256u * 1024u)
#define CHUNK (64u * 1024u)

static uint8_t *data_for(uint64_t seed)
{
    uint8_t *p = malloc(OBJ);
    t_fill_pattern(p, OBJ, seed);
    return p;
}

/* PUT OBJ bytes of seed under key with a TTL; the status of the first
 * failing step (PUT_OPEN's when the store refuses). */
static int put_ttl(struct wc *c, const char *key, uint64_t seed, uint32_t ttl_ms, uint64_t *gen)
{
    uint8_t *d = data_for(seed);
    uint64_t *x = wc_xxh_list(d, OBJ, CHUNK), up = 0;
    char etag[33];
    int st;

    wc_etag(d, OBJ, etag);
    st = wc_put_open(c, key, OBJ, CHUNK, ttl_ms, &up);
    for (unsigned i = 0; st == 0 && i < OBJ / CHUNK; i++)
        st = wc_put_chunk(c, up, i, x[i], d + i * CHUNK, CHUNK);
    if (st == 0)
        st = wc_put_commit(c, up, OBJ / CHUNK, x, etag, gen);
    free(x);
    free(d);
    return st;
}

static int present(struct wc *c, const char *key)
{
    struct rio_proto_desc d;
    uint8_t *keep = NULL;
    int st = wc_lookup(c, key, &d, &keep);
    free(keep);
    if (st != 0 && st != RIO_ENOTFOUND)
        T_FAIL("LOOKUP %s: %s", key, rio_errname(st));
    return st == 0;
}

static struct rio_proto_stat_resp stat_of(struct wc *c)
{
    struct rio_proto_stat_resp st;
    uint8_t *body = NULL;
    uint32_t blen = 0;
    T_EQ(wc_call(c, RIO_OP_STAT, NULL, 0, NULL, 0, &body, &blen), 0);
    T_OK(rio__proto_dec_stat_resp(body, blen, &st));
    free(body);
    return st;
}

static double metric(struct srv_env *e, const char *series)
{
    char *text = srv_http_get(e->metrics, "/metrics");
    T_NOTNULL(text);
    double v = srv_metric(text, series);
    free(text);
    return v;
}

/* 1100 KiB holds four 256 KiB objects (with their metadata), not five. */
TEST(lru_eviction)
{
    struct srv_env e;
    const char *args[] = {"--memory", "1100K", "--metrics", "127.0.0.1:0", NULL};
    struct wc c;
    uint64_t gen;
    char key[16];

    srv_start(&e, args);
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, NULL);
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "o%d", i);
        T_EQ(put_ttl(&c, key, (uint64_t)i, 0, &gen), 0);
    }
    /* o0 is used again, so o1 is now the least recently used. */
    uint8_t b[16];
    T_EQ(wc_read(&c, "o0", 0, 0, sizeof(b), b), 0);
    T_EQ(put_ttl(&c, "o4", 4, 0, &gen), 0);
    T_TRUE(present(&c, "o0"));
    T_FALSE(present(&c, "o1"));
    T_TRUE(present(&c, "o2"));
    T_TRUE(present(&c, "o3"));
    T_TRUE(present(&c, "o4"));
    T_EQ(metric(&e, "railiod_evictions_total"), 1.0);
    T_EQ(stat_of(&c).objects, 4u);
    /* An object that can never fit is refused outright. */
    uint64_t up;
    T_EQ(wc_put_open(&c, "huge", 2u << 20, CHUNK, 0, &up), -EFBIG);
    /* Uploads in progress are never evicted: with 900 KiB held by one,
     * the objects go, then a new upload is refused. */
    T_EQ(wc_put_open(&c, "pending", 900u * 1024u, CHUNK, 0, &up), 0);
    T_EQ(stat_of(&c).objects, 0u);
    T_EQ(put_ttl(&c, "o5", 5, 0, &gen), -ENOSPC);
    T_EQ(wc_call(&c, RIO_OP_PUT_ABORT, &up, 8, NULL, 0, NULL, NULL), 0);
    T_EQ(put_ttl(&c, "o5", 5, 0, &gen), 0);
    wc_close(&c);
    T_EQ(srv_stop(&e), 0);
}

TEST(refuse_when_full)
{
    struct srv_env e;
    const char *args[] = {"--memory", "1100K", "--evict", "refuse", NULL};
    struct wc c;
    uint64_t gen, up;
    char key[16];

    srv_start(&e, args);
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, NULL);
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "o%d", i);
        T_EQ(put_ttl(&c, key, (uint64_t)i, 0, &gen), 0);
    }
    T_EQ(put_ttl(&c, "o4", 4, 0, &gen), -ENOSPC);
    for (int i = 0; i < 4; i++) {
        snprintf(key, sizeof(key), "o%d", i);
        T_TRUE(present(&c, key));
    }
    /* Replacing a key needs room for both generations until the commit. */
    T_EQ(put_ttl(&c, "o0", 9, 0, &gen), -ENOSPC);
    T_EQ(wc_delete(&c, "o1"), 0);
    T_EQ(put_ttl(&c, "o4", 4, 0, &gen), 0);
    /* An upload in progress holds its room. */
    T_EQ(wc_delete(&c, "o2"), 0);
    T_EQ(wc_put_open(&c, "u", OBJ, CHUNK, 0, &up), 0);
    T_EQ(put_ttl(&c, "o5", 5, 0, &gen), -ENOSPC);
    T_EQ(wc_call(&c, RIO_OP_PUT_ABORT, &up, 8, NULL, 0, NULL, NULL), 0);
    T_EQ(put_ttl(&c, "o5", 5, 0, &gen), 0);
    wc_close(&c);
    T_EQ(srv_stop(&e), 0);
}

/* Sleep until ms milliseconds after t0 (t_now_ms). */
static void sleep_until(uint64_t t0, uint64_t ms)
{
    uint64_t now = t_now_ms();
    if (now < t0 + ms)
        usleep((useconds_t)(t0 + ms - now) * 1000u);
}

/* Each check is timed from the commit it depends on, so a slow machine
 * (sanitizers) makes the test longer, not wrong. */
TEST(ttl_expiry)
{
    struct srv_env e;
    const char *args[] = {"--ttl", "1s", "--metrics", "127.0.0.1:0", NULL};
    struct wc c;
    uint64_t g1, g2, g3, t_short, t_default;
    uint8_t b[16];

    srv_start(&e, args);
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, NULL);
    T_EQ(put_ttl(&c, "short", 1, 500, &g1), 0); /* its own TTL */
    t_short = t_now_ms();
    T_TRUE(present(&c, "short"));
    T_EQ(put_ttl(&c, "default", 2, 0, &g2), 0); /* the server's --ttl */
    t_default = t_now_ms();
    T_EQ(wc_read(&c, "default", g2, 0, sizeof(b), b), 0);
    T_EQ(put_ttl(&c, "long", 3, 60000, &g3), 0); /* longer than the default */

    sleep_until(t_short, 600);
    T_FALSE(present(&c, "short"));
    T_EQ(wc_read(&c, "short", g1, 0, sizeof(b), b), RIO_ENOTFOUND);
    /* 1 s TTL + one 250 ms sweep period + slack: gone without being asked
     * for, the sweep dropped it. */
    sleep_until(t_default, 1500);
    T_EQ(stat_of(&c).objects, 1u);
    T_EQ(metric(&e, "railiod_expirations_total"), 2.0);
    T_FALSE(present(&c, "default"));
    T_TRUE(present(&c, "long"));
    T_EQ(metric(&e, "railiod_objects"), 1.0);
    wc_close(&c);
    T_EQ(srv_stop(&e), 0);
}

TEST(abandoned_uploads_are_reclaimed)
{
    struct srv_env e;
    const char *args[] = {"--upload-timeout", "300ms",     "--memory",    "1M", "--evict",
                          "refuse",           "--metrics", "127.0.0.1:0", NULL};
    struct wc c;
    uint64_t up, up2, gen;
    uint8_t *d = data_for(1);

    srv_start(&e, args);
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, NULL);
    T_EQ(wc_put_open(&c, "a", 700u * 1024u, CHUNK, 0, &up), 0);
    T_EQ(wc_put_chunk(&c, up, 0, rio__xxh3(d, CHUNK), d, CHUNK), 0);
    /* While it lives it holds its room. */
    T_EQ(wc_put_open(&c, "b", 700u * 1024u, CHUNK, 0, &up2), -ENOSPC);
    T_EQ(stat_of(&c).uploads, 1u);
    usleep(800000);
    T_EQ(stat_of(&c).uploads, 0u);
    T_EQ(wc_put_chunk(&c, up, 1, rio__xxh3(d, CHUNK), d, CHUNK), RIO_ENOTFOUND);
    T_EQ(metric(&e, "railiod_uploads_reclaimed_total"), 1.0);
    T_EQ(metric(&e, "railiod_used_bytes"), 0.0);
    T_EQ(put_ttl(&c, "b", 2, 0, &gen), 0);
    free(d);
    wc_close(&c);
    T_EQ(srv_stop(&e), 0);
}

/* Resident memory of a server with --memory 64M, in KiB, after start and at
 * its peak after 160 PUTs of 256 KiB (40 MiB, the store evicting as it
 * fills), the last one read back. */
static void memory_after_puts(int prefault, uint64_t *start_kb, uint64_t *peak_kb)
{
    struct srv_env e;
    const char *args[] = {"--memory", "64M", prefault ? "--prefault" : NULL, NULL};
    struct wc c;
    uint64_t gen;
    char key[16];

    srv_start(&e, args);
    *start_kb = srv_proc_kb(e.pid, "VmRSS");
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, NULL);
    for (int i = 0; i < 160; i++) {
        snprintf(key, sizeof(key), "p%d", i);
        T_EQ(put_ttl(&c, key, (uint64_t)i, 0, &gen), 0);
    }
    uint8_t *want = data_for(159), *got = malloc(OBJ);
    T_EQ(wc_read(&c, "p159", 0, 0, OBJ, got), 0);
    T_EQ(memcmp(got, want, OBJ), 0);
    free(want);
    free(got);
    *peak_kb = srv_proc_kb(e.pid, "VmHWM");
    wc_close(&c);
    T_EQ(srv_stop(&e), 0);
}

/* --prefault: all of --memory is resident once the server serves, and
 * uploads are carved from it (the peak does not grow past it by more than
 * slack); without it the server starts small. A --memory larger than the
 * machine is not touched (the OOM killer would end it): the server says so
 * and serves. */
TEST(prefault)
{
    uint64_t s0, p0, s1, p1;
    struct srv_env e;
    const char *huge[] = {"--memory", "64T", "--prefault", NULL};
    struct wc c;
    uint64_t gen;

    srv_start(&e, huge);
    T_LT(srv_proc_kb(e.pid, "VmRSS"), 64u * 1024u);
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, NULL);
    T_EQ(put_ttl(&c, "one", 1, 0, &gen), 0);
    T_TRUE(present(&c, "one"));
    wc_close(&c);
    T_EQ(srv_stop(&e), 0);

    memory_after_puts(0, &s0, &p0);
    memory_after_puts(1, &s1, &p1);
    fprintf(stderr, "RSS at start / peak (KiB): plain %llu / %llu, --prefault %llu / %llu\n",
            (unsigned long long)s0, (unsigned long long)p0, (unsigned long long)s1,
            (unsigned long long)p1);
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
    /* A sanitizer's runtime (the server is built alike) has its own
     * footprint and allocator, which may hand freed memory back at once:
     * glibc's heap, which --prefault fills and keeps, is not used there. */
    T_GE(s1, s0 + 60u * 1024u);
    T_LT(s0, 32u * 1024u);
    T_LT(p1, s1 + 16u * 1024u);
#endif
}
