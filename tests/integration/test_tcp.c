/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 180 */
/*
 * The railio:// transport against a real railiod on loopback: PUT, GET,
 * STAT and DELETE of the edge sizes; 64 concurrent clients on overlapping
 * keys (every GET is exactly one generation some PUT wrote); a generation
 * replaced in the middle of a GET; the server killed in the middle of a GET;
 * authentication; depth that costs a one-op call nothing; rings of several
 * servers; connections per rail; cancellation; idle connections the server
 * closed; malformed URLs. Every test ends with the client idle (engine
 * counters zero, no transport slot held) and nothing leaked.
 */
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "core/engine.h"
#include "tcp_util.h"

static void start(struct srv_env *e)
{
    srv_start(e, NULL);
}

static void stop(struct srv_env *e)
{
    T_EQ(srv_stop(e), 0);
}

/* The CLI end to end: put a file, stat, get it back, rm. */
TEST(cli_put_get_stat_rm)
{
    struct srv_env e;
    char cmd[1024], dir[] = "/tmp/rio-cli-XXXXXX", in[128], out[128], js[128];
    const char *b = getenv("T_BUILD_DIR");

    start(&e);
    T_NOTNULL(mkdtemp(dir));
    snprintf(in, sizeof(in), "%s/in", dir);
    snprintf(out, sizeof(out), "%s/out", dir);
    snprintf(js, sizeof(js), "%s/stat.json", dir);
    size_t n = 5 * TU_MIB + 3;
    uint8_t *src = tu_pattern(n, 99);
    t_write_file(in, src, n);

    snprintf(cmd, sizeof(cmd), "%s/railio put 'railio://%s/cli/obj?chunk=1M' %s 2>/dev/null",
             b ? b : ".", e.addr[0], in);
    T_EQ(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s/railio stat --json railio://%s/cli/obj > %s", b ? b : ".",
             e.addr[0], js);
    T_EQ(system(cmd), 0);
    size_t tlen;
    char *text = (char *)t_slurp(js, &tlen);
    T_GT(tlen, 0u);
    T_NOTNULL(strstr(text, "\"size\":5242883"));
    T_NOTNULL(strstr(text, "\"chunk_size\":1048576"));
    snprintf(cmd, sizeof(cmd), "%s/railio get railio://%s/cli/obj %s 2>/dev/null", b ? b : ".",
             e.addr[0], out);
    T_EQ(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "cmp -s %s %s", in, out);
    T_EQ(system(cmd), 0);
    /* stdout, and stdin */
    snprintf(cmd, sizeof(cmd),
             "%s/railio get railio://%s/cli/obj - 2>/dev/null | %s/railio put "
             "railio://%s/cli/copy - 2>/dev/null",
             b ? b : ".", e.addr[0], b ? b : ".", e.addr[0]);
    T_EQ(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s/railio get railio://%s/cli/copy %s 2>/dev/null", b ? b : ".",
             e.addr[0], out);
    T_EQ(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "cmp -s %s %s", in, out);
    T_EQ(system(cmd), 0);
    snprintf(cmd, sizeof(cmd), "%s/railio rm railio://%s/cli/obj", b ? b : ".", e.addr[0]);
    T_EQ(system(cmd), 0);
    /* Gone: a clear error and a non-zero exit. */
    snprintf(cmd, sizeof(cmd), "%s/railio stat railio://%s/cli/obj 2>%s", b ? b : ".", e.addr[0],
             js);
    T_NE(system(cmd), 0);
    free(text);
    text = (char *)t_slurp(js, &tlen);
    T_GT(tlen, 0u);
    T_NOTNULL(strstr(text, "RIO_ENOTFOUND"));
    free(text);
    unlink(in);
    unlink(out);
    unlink(js);
    rmdir(dir);
    free(src);
    stop(&e);
}

/* ----------------------------------------------------- 64 concurrent clients */

#define CC_THREADS 64u
#define CC_KEYS 8
#define CC_ITERS 8
#define CC_MAXSIZE (8 * TU_CHUNK + 4096)

struct cc {
    struct rio_client *shared;
    char url[256];
    _Atomic uint64_t started[CC_THREADS]; /* PUTs begun per writer */
    _Atomic uint64_t gets_ok, gets_gen, gets_missing, puts_ok;
    _Atomic int failed;
    char why[256];
};

struct cc_arg {
    struct cc *cc;
    unsigned id;
};

/* Object content is a function of its seed: size and bytes; the first 8
 * bytes are the seed itself, so a reader knows which PUT it sees. */
static size_t cc_size(uint64_t seed)
{
    return TU_CHUNK + (size_t)(seed * 0x9e3779b97f4a7c15ull >> 40) % (7 * TU_CHUNK + 4096);
}

static void cc_fill(uint8_t *p, uint64_t seed)
{
    size_t n = cc_size(seed);
    t_fill_pattern(p, n, seed);
    memcpy(p, &seed, 8);
}

static void cc_fail(struct cc *cc, const char *fmt, uint64_t a, int64_t b)
{
    if (atomic_exchange(&cc->failed, 1) == 0)
        snprintf(cc->why, sizeof(cc->why), fmt, a, b);
}

static void *cc_main(void *p)
{
    struct cc_arg *a = p;
    struct cc *cc = a->cc;
    struct rio_client *c = cc->shared;
    struct rio_options o;
    uint8_t *buf = malloc(CC_MAXSIZE);
    uint64_t rng = 0x1234567 + a->id;

    /* Half the threads share one client, half have their own. */
    if (a->id % 2) {
        tu_opts(&o);
        if (rio_client_new(cc->url, &o, &c) < 0) {
            cc_fail(cc, "client %" PRIu64 ": open failed %" PRId64, a->id, 0);
            free(buf);
            return NULL;
        }
    }
    for (unsigned it = 0; it < CC_ITERS && !atomic_load(&cc->failed); it++) {
        char key[16];
        snprintf(key, sizeof(key), "cc/%u", (unsigned)(rio__rand(&rng) % CC_KEYS));
        if (rio__rand(&rng) % 2) {
            uint64_t seq = atomic_fetch_add(&cc->started[a->id], 1);
            uint64_t seed = ((uint64_t)a->id << 32) | seq;
            cc_fill(buf, seed);
            int ret = rio_put(c, key, buf, cc_size(seed), NULL, NULL);
            if (ret < 0)
                cc_fail(cc, "put by %" PRIu64 ": %" PRId64, a->id, ret);
            else
                atomic_fetch_add(&cc->puts_ok, 1);
        } else {
            memset(buf, 0, CC_MAXSIZE);
            int64_t n = rio_get(c, key, buf, CC_MAXSIZE, NULL);
            if (n == RIO_ENOTFOUND) {
                atomic_fetch_add(&cc->gets_missing, 1);
                continue;
            }
            if (n == RIO_EGENERATION) {
                /* Replaced while we read it: an error, never mixed bytes. */
                atomic_fetch_add(&cc->gets_gen, 1);
                continue;
            }
            if (n < 0) {
                cc_fail(cc, "get by %" PRIu64 ": %" PRId64, a->id, n);
                continue;
            }
            uint64_t seed;
            memcpy(&seed, buf, 8);
            unsigned w = (unsigned)(seed >> 32);
            if (w >= CC_THREADS || (uint32_t)seed >= atomic_load(&cc->started[w]))
                cc_fail(cc, "get saw seed %" PRIx64 " that nobody wrote (%" PRId64 " bytes)", seed,
                        n);
            else if ((size_t)n != cc_size(seed))
                cc_fail(cc, "get of seed %" PRIx64 " has %" PRId64 " bytes", seed, n);
            else if (t_check_pattern_at(buf + 8, (size_t)n - 8, seed, 8) >= 0)
                cc_fail(cc, "get of seed %" PRIx64 ": torn at %" PRId64, seed,
                        8 + t_check_pattern_at(buf + 8, (size_t)n - 8, seed, 8));
            else
                atomic_fetch_add(&cc->gets_ok, 1);
        }
    }
    if (c != cc->shared) {
        struct rio_counters k;
        rio_client_counters(c, &k);
        if (k.inflight_ops || k.inflight_bytes || k.requests)
            cc_fail(cc, "client %" PRIu64 " not idle: %" PRId64 " ops", a->id,
                    (int64_t)k.inflight_ops);
        rio_client_destroy(c);
    }
    free(buf);
    return NULL;
}

TEST(concurrent_64_clients_one_generation_each)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    static struct cc cc;
    struct cc_arg args[CC_THREADS];
    pthread_t th[CC_THREADS];

    start(&e);
    memset(&cc, 0, sizeof(cc));
    tu_url(cc.url, sizeof(cc.url), &e, "depth=4");
    tu_opts(&o);
    tu_open(&u, cc.url, &o);
    cc.shared = u.c;
    for (unsigned i = 0; i < CC_THREADS; i++) {
        args[i].cc = &cc;
        args[i].id = i;
        T_EQ(pthread_create(&th[i], NULL, cc_main, &args[i]), 0);
    }
    for (unsigned i = 0; i < CC_THREADS; i++)
        pthread_join(th[i], NULL);
    if (cc.failed)
        T_FAIL("%s", cc.why);
    T_GT(cc.puts_ok, 0u);
    T_GT(cc.gets_ok, 0u);
    fprintf(stderr,
            "puts %" PRIu64 ", gets %" PRIu64 " whole, %" PRIu64 " replaced, %" PRIu64 " missing\n",
            (uint64_t)cc.puts_ok, (uint64_t)cc.gets_ok, (uint64_t)cc.gets_gen,
            (uint64_t)cc.gets_missing);
    /* Every key that exists now holds one whole generation. */
    uint8_t *buf = malloc(CC_MAXSIZE);
    for (unsigned k = 0; k < CC_KEYS; k++) {
        char key[16];
        snprintf(key, sizeof(key), "cc/%u", k);
        int64_t n = rio_get(u.c, key, buf, CC_MAXSIZE, NULL);
        if (n == RIO_ENOTFOUND)
            continue;
        T_OK(n);
        uint64_t seed;
        memcpy(&seed, buf, 8);
        T_EQ((size_t)n, cc_size(seed));
        T_EQ(t_check_pattern_at(buf + 8, (size_t)n - 8, seed, 8), -1);
    }
    free(buf);
    tu_close(&u);
    stop(&e);
}

/* ------------------------------------------------------------ generations */

struct slow_get {
    struct rio_client *c;
    const char *key;
    uint8_t *buf;
    size_t cap;
    unsigned flags;
    struct rio_cancel *cancel;
    uint64_t expect_gen;
    int64_t ret;
    uint64_t end_ms;
    struct rio_stats st;
};

static void *slow_get_main(void *p)
{
    struct slow_get *g = p;
    struct rio_call call = {.flags = g->flags,
                            .cancel = g->cancel,
                            .expect_generation = g->expect_gen,
                            .stats = &g->st};
    g->ret = rio_get(g->c, g->key, g->buf, g->cap, &call);
    g->end_ms = t_now_ms();
    return NULL;
}

/* Wait until c has an op in flight (a GET is under way). */
static void wait_inflight(struct rio_client *c)
{
    uint64_t t0 = t_now_ms();
    for (;;) {
        struct rio_counters k;
        rio_client_counters(c, &k);
        if (k.inflight_ops > 0)
            return;
        if (t_now_ms() - t0 > 10000)
            T_FAIL("the GET never started");
        usleep(200);
    }
}

/* A GET whose object is replaced half-way is planned again against the new
 * generation and returns it whole (never a mix of the two); one that named
 * the generation it wants fails with RIO_EGENERATION, and with RIO_ATOMIC
 * the caller's buffer is untouched. */
TEST(generation_replaced_mid_get)
{
    struct srv_env e;
    struct rio_options o;
    struct tu r, w;
    char url[256];
    const size_t n = 2 * TU_MIB;

    start(&e);
    tu_opts(&o);
    /* Objects of 4 KiB chunks read at depth 1, each chunk held 1 ms more:
     * 512 round trips, a GET of half a second at least however fast the
     * machine, so that the replacement lands in its middle even when the
     * writer waits for a CPU (a GET of 256 chunks without the hold once
     * ended first here). */
    o.chunk_size = 4096;
    o.depth = 1;
    tu_url(url, sizeof(url), &e, "faults=delay:op=read:delay=1ms");
    tu_open(&r, url, &o);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    o.chunk_size = 4096;
    tu_open(&w, url, &o);
    for (int pinned = 0; pinned < 2; pinned++) {
        uint64_t g1 = tu_put(w.c, "gen/obj", n, 1);
        struct slow_get g = {.c = r.c, .key = "gen/obj", .cap = n, .flags = RIO_ATOMIC};
        g.expect_gen = pinned ? g1 : 0;
        g.buf = calloc(1, n);
        pthread_t th;
        T_EQ(pthread_create(&th, NULL, slow_get_main, &g), 0);
        wait_inflight(r.c);
        uint64_t g2 = tu_put(w.c, "gen/obj", 1, 2);
        T_NE(g2, g1);
        pthread_join(th, NULL);
        if (pinned) {
            T_ERR(g.ret, RIO_EGENERATION);
            T_EQ(g.st.replans, 0u);
        } else {
            T_EQ(g.ret, 1);
            T_PATTERN(g.buf, 1, 2);
            T_EQ(g.st.replans, 1u);
        }
        for (size_t i = pinned ? 0 : 1; i < n; i++)
            if (g.buf[i])
                T_FAIL("RIO_ATOMIC buffer touched at %zu", i);
        /* The new generation reads whole. */
        tu_get_check(r.c, "gen/obj", 1, 2, 0);
        free(g.buf);
    }
    tu_close(&r);
    tu_close(&w);
    stop(&e);
}

/* ------------------------------------------------------------ server death */

TEST(server_killed_mid_get)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    const size_t n = 64 * TU_MIB;

    start(&e);
    tu_opts(&o);
    o.depth = 1;
    tu_url(url, sizeof(url), &e, NULL);
    tu_open(&u, url, &o);
    tu_put(u.c, "kill/obj", n, 3);

    struct slow_get g = {.c = u.c, .key = "kill/obj", .cap = n};
    g.buf = malloc(n);
    pthread_t th;
    T_EQ(pthread_create(&th, NULL, slow_get_main, &g), 0);
    wait_inflight(u.c);
    uint64_t t_kill = t_now_ms();
    kill(e.pid, SIGKILL);
    T_NE(srv_wait(&e, 5000), -1);
    pthread_join(th, NULL);
    uint64_t took = g.end_ms - t_kill;
    fprintf(stderr, "GET ended %" PRIu64 " ms after the kill: %s\n", took, rio_errname((int)g.ret));
    /* A clean, classified error, in bounded time. */
    T_LT(g.ret, 0);
    T_TRUE(g.ret == -ECONNRESET || g.ret == -ECONNREFUSED || g.ret == RIO_ENOPATH ||
           g.ret == RIO_ERETRIES);
    T_LT(took, (uint64_t)o.op_timeout_ms + 1000);
    tu_idle(u.c);
    /* The next call fails at once, cleanly. */
    uint64_t t0 = t_now_ms();
    T_ERR(rio_get(u.c, "kill/obj", g.buf, n, NULL), -ECONNREFUSED);
    T_LT(t_now_ms() - t0, 1000u);
    free(g.buf);
    tu_close(&u);
    srv_stop(&e);
}

/* --------------------------------------------------------------- auth */

TEST(auth_refused_then_accepted)
{
    struct srv_env e;
    struct rio_options o;
    struct rio_client *c = NULL;
    struct tu u;
    char tok[256], url[512];
    int64_t a0 = rio__alloc_outstanding();

    srv_prepare(&e);
    srv_write_token(&e, "s3cret-token", tok, sizeof(tok));
    const char *args[] = {"--auth-token-file", tok, NULL};
    srv_start_listen(&e, NULL, args);
    tu_opts(&o);

    tu_url(url, sizeof(url), &e, "token=wrong");
    T_ERR(rio_client_new(url, &o, &c), -EACCES);
    T_NULL(c);
    /* The detail says the token was refused (it was the bare code). */
    T_NOTNULL(strstr(rio_error_detail(), "the server refused the token"));
    tu_url(url, sizeof(url), &e, NULL);
    T_ERR(rio_client_new(url, &o, &c), -EACCES);
    T_NOTNULL(strstr(rio_error_detail(), "the server asks for a token"));
    T_EQ(rio__alloc_outstanding(), a0);

    tu_url(url, sizeof(url), &e, "token=s3cret-token");
    tu_open(&u, url, &o);
    tu_put(u.c, "auth/a", 3 * TU_CHUNK + 1, 5);
    tu_get_check(u.c, "auth/a", 3 * TU_CHUNK + 1, 5, 0);
    tu_close(&u);

    /* The same token from a file (a trailing newline is not part of it). */
    char params[300];
    snprintf(params, sizeof(params), "token_file=%s", tok);
    tu_url(url, sizeof(url), &e, params);
    tu_open(&u, url, &o);
    tu_get_check(u.c, "auth/a", 3 * TU_CHUNK + 1, 5, 0);
    T_OK(rio_delete(u.c, "auth/a"));
    tu_close(&u);
    stop(&e);
}

/* An address that failed AUTH more than --auth-failures times is refused
 * unchecked for a while: the client says so, not a bare "permission
 * denied" that read as a wrong token. */
TEST(auth_throttled_is_named)
{
    struct srv_env e;
    struct rio_options o;
    struct rio_client *c = NULL;
    char tok[256], url[512];

    srv_prepare(&e);
    srv_write_token(&e, "s3cret-token", tok, sizeof(tok));
    const char *args[] = {"--auth-token-file", tok, "--auth-failures", "1", NULL};
    srv_start_listen(&e, NULL, args);
    tu_opts(&o);
    tu_url(url, sizeof(url), &e, "token=wrong");
    T_ERR(rio_client_new(url, &o, &c), -EACCES);
    tu_url(url, sizeof(url), &e, "token=s3cret-token");
    T_ERR(rio_client_new(url, &o, &c), -EACCES);
    T_NULL(c);
    T_NOTNULL(strstr(rio_error_detail(), "too many failed AUTHs"));
    stop(&e);
}

/* ---------------------------------------------------------------- depth */

/*
 * The window a call uses is min(depth, ops it has): a one-chunk GET arms one
 * request slot and one connection at depth 8 exactly as at depth 1, and the
 * slot pool never grows beyond what was in flight.
 */
TEST(depth_8_costs_a_single_op_nothing)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u1, u8;
    char url[256];

    start(&e);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    o.depth = 1;
    tu_open(&u1, url, &o);
    tu_opts(&o);
    o.depth = 8;
    o.adapt = -1; /* depth 8 from the first op: its slots are what is counted */
    tu_open(&u8, url, &o);
    tu_put(u1.c, "depth/one", TU_CHUNK, 7);
    tu_put(u1.c, "depth/many", 32 * TU_CHUNK, 8);

    struct rio__tcp_counters k1, k8;
    rio__tcp_reset_peaks(rio__client_transport(u1.c));
    rio__tcp_reset_peaks(rio__client_transport(u8.c));
    tu_get_check(u1.c, "depth/one", TU_CHUNK, 7, 0);
    tu_get_check(u8.c, "depth/one", TU_CHUNK, 7, 0);
    k1 = tu_tcp(u1.c);
    k8 = tu_tcp(u8.c);
    T_EQ(k8.slots_peak, 1u);
    T_EQ(k8.slots_peak, k1.slots_peak);
    T_EQ(k8.slots_allocated, 1u); /* the pool never held a second slot */
    T_EQ(k8.conns_peak, k1.conns_peak);
    T_EQ(k8.conns_open, 1u);
    T_EQ(k8.slots_armed, 0u);

    /* With 32 chunks the same client does use its depth, once its path has
     * shown its rate (the engine sends one op at a time before: 1 ms of busy
     * time, which 32 chunks on a fast loopback may not add up to in one GET;
     * the rate builds over calls). */
    k8.slots_peak = 0;
    for (int i = 0; i < 50 && k8.slots_peak <= 1; i++) {
        tu_get_check(u8.c, "depth/many", 32 * TU_CHUNK, 8, 0);
        k8 = tu_tcp(u8.c);
    }
    T_GT(k8.slots_peak, 1u);
    T_LE(k8.slots_peak, 8u);
    T_LE(k8.slots_allocated, 8u);
    tu_get_check(u1.c, "depth/many", 32 * TU_CHUNK, 8, 0);
    k1 = tu_tcp(u1.c);
    T_EQ(k1.slots_peak, 1u);
    tu_close(&u1);
    tu_close(&u8);
    stop(&e);
}

/* ----------------------------------------------------------- paths, rings */

/* PUT n bytes of seed under key, then GET them back byte-exact with st as
 * the call's stats: the GET went over npaths paths (0: not checked). */
static void put_get_paths(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                          unsigned npaths, struct rio_stats *st)
{
    struct rio_call call = {.stats = st};

    tu_put(c, key, n, seed);
    uint8_t *b = malloc(n);
    T_NOTNULL(b);
    T_EQ(rio_get(c, key, b, n, &call), (int64_t)n);
    T_PATTERN(b, n, seed);
    if (npaths)
        T_EQ(st->npaths, npaths);
    free(b);
}

TEST(conns_per_rail_are_paths)
{
    struct tu_env x;
    struct rio_stats st;
    const size_t n = 8 * TU_MIB;

    /* adapt=off: every connection from the first op, each a path */
    tu_env_start(&x, NULL, "conns=4&adapt=off");
    put_get_paths(x.u.c, "conns/obj", n, 9, 4, &st);
    uint64_t sum = 0;
    for (unsigned i = 0; i < 4; i++) {
        T_GT(st.path[i].bytes, 0u);
        sum += st.path[i].bytes;
    }
    T_EQ(sum, (uint64_t)n);
    T_EQ(tu_tcp(x.u.c).conns_open, 4u);
    tu_env_stop(&x);
}

/*
 * Tail splitting (RIO_CAP_RANGE_READ): the engine splits a GET's last chunks
 * into READs of ranges inside one chunk over idle connections. railiod
 * answers each range with the range's own xxh3 (hashed there), the client
 * checks it, and the engine checks the chunk whole. Byte-exact from memory
 * and from the disk tier (objects larger than --memory stream to disk), and
 * at least one GET issued more ops than chunks (pieces).
 */
static void tail_split_against(const char *const *args)
{
    const size_t ch = 512u * 1024u, n = 16 * ch;
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    uint64_t split = 0;

    srv_start(&e, args);
    tu_url(url, sizeof(url), &e, "conns=3");
    tu_opts(&o);
    o.chunk_size = ch;
    o.depth = 2;
    o.adapt = -1; /* every connection: the split over them is tested */
    tu_open(&u, url, &o);
    tu_put(u.c, "tail/obj", n, 61);
    uint8_t *b = malloc(n);
    T_NOTNULL(b);
    /* The first GET measures the paths' rates; splitting needs them. */
    for (unsigned i = 0; i < 8; i++) {
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        memset(b, 0, n);
        T_EQ(rio_get(u.c, "tail/obj", b, n, &call), (int64_t)n);
        T_PATTERN(b, n, 61);
        T_EQ(st.retries_total, 0u);
        T_EQ(st.chunks, 16u);
        uint64_t ops = 0, bytes = 0;
        for (unsigned p = 0; p < st.npaths; p++) {
            ops += st.path[p].ops;
            bytes += st.path[p].bytes;
        }
        T_EQ(bytes, (uint64_t)n);
        split += ops > st.chunks;
    }
    fprintf(stderr, "  %s: %llu of 8 GETs split their tail\n", args ? "disk" : "memory",
            (unsigned long long)split);
    T_GT(split, 0u);
    free(b);
    tu_close(&u);
    T_EQ(srv_stop(&e), 0);
}

/* fn against railiod's memory store, then its disk tier (a fresh
 * directory named from prefix, memory 1M: most objects come from disk). */
static void both_tiers(void (*fn)(const char *const *args), const char *prefix)
{
    fn(NULL);
    const char *dir = t_scratch_dir(prefix);
    const char *args[] = {"--data-dir", dir, "--memory", "1M", NULL};
    fn(args);
}

TEST(tail_split_reads_ranges_inside_chunks)
{
    both_tiers(tail_split_against, "railio-tail");
}

/* Three servers form a ring: each key lives on its rendezvous owner only. */
/*
 * A PUT_CHUNK's body is its 24 fixed bytes, its 16-byte tag and its data:
 * under a --max-body that takes the chunk and its fixed bytes but not the
 * tag, the client opened the upload and sent chunks the server cut the
 * connection on, again and again, until the retries ran out. Now it
 * refuses such a chunk size at once (-EMSGSIZE); 16 bytes more and the PUT
 * goes through.
 */
TEST(chunk_that_cannot_fit_max_body_is_refused_at_once)
{
    const size_t ch = 64u * 1024u;
    for (int room = 0; room < 2; room++) {
        char mb[32];
        snprintf(mb, sizeof(mb), "%zu", ch + 24 + (room ? 16 : 8));
        const char *args[] = {"--max-body", mb, NULL};
        struct srv_env e;
        struct rio_options o;
        struct tu u;
        char url[256];

        srv_start(&e, args);
        tu_url(url, sizeof(url), &e, NULL);
        tu_opts(&o);
        o.chunk_size = ch;
        tu_open(&u, url, &o);
        uint8_t *b = t_pattern_buf(4 * ch, 5);
        uint64_t t0 = t_now_ms();
        T_ERR(rio_put(u.c, "mb/obj", b, 4 * ch, NULL, NULL), room ? 0 : -EMSGSIZE);
        if (!room)
            T_LE(t_now_ms() - t0, 1000u);
        free(b);
        tu_close(&u);
        T_EQ(srv_stop(&e), 0);
    }
}

/* A PUT of one chunk goes as one PUT_ONE frame (open, data and commit)
 * to a server that offers it, a single PUT and a batch's alike, and is
 * stored as the three exchanges would store it, more of them in flight
 * than the depth (they take it by their bytes); a conditional PUT, one
 * whose etag is the MD5, one of several chunks and one with put_one=off go
 * the three-exchange way. A server without PUT_ONE gets the three
 * exchanges, also one restarted as such under a client whose greeting had
 * seen PUT_ONE: the refused PUT starts over (one re-plan) and the member
 * gets no more. */
TEST(small_puts_go_in_one_exchange)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u, m;
    char url[256], key[32];
    struct rio_desc d;

    start(&e);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    o.depth = 4;
    tu_open(&u, url, &o);
    uint64_t g1 = tu_put(u.c, "one/a", 1000, 1);
    T_EQ(tu_tcp(u.c).put_one, 1u);
    tu_get_check(u.c, "one/a", 1000, 1, 0);
    T_OK(rio_stat(u.c, "one/a", &d));
    T_EQ(d.generation, g1);
    T_EQ(d.nchunks, 1u);
    T_EQ(d.chunk_size, o.chunk_size);
    T_EQ(strlen(d.etag), 32u); /* the fast etag, as a commit stores it */
    rio_desc_cleanup(&d);
    /* The descriptor rio_put_desc-style callers ask for. */
    uint8_t *p = tu_pattern(TU_CHUNK, 2);
    memset(&d, 0, sizeof(d));
    T_OK(rio_put(u.c, "one/b", p, TU_CHUNK, NULL, &d));
    T_EQ(tu_tcp(u.c).put_one, 2u);
    T_GT(d.generation, g1);
    T_EQ(d.size, TU_CHUNK);
    T_EQ(d.xxh[0], rio__xxh3(p, TU_CHUNK));
    rio_desc_cleanup(&d);
    /* A batch of 40. */
    struct rio_op ops[40];
    char keys[40][16];
    for (unsigned i = 0; i < 40; i++) {
        snprintf(keys[i], sizeof(keys[i]), "one/%u", i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = p, .len = 100 + i};
    }
    /* Whole small objects take the path's depth by their bytes: more of
     * them in flight than the depth (4) would allow chunks. */
    struct rio_stats bst;
    struct rio_call bcall = {.stats = &bst};
    T_EQ(rio_batch(u.c, ops, 40, &bcall), 40);
    T_EQ(tu_tcp(u.c).put_one, 42u);
    T_GT(bst.path[0].peak_depth, (uint64_t)o.depth);
    for (unsigned i = 0; i < 40; i++) {
        uint8_t got[200];
        T_EQ(rio_get(u.c, keys[i], got, sizeof(got), NULL), (int64_t)(100 + i));
        T_MEMEQ(got, p, 100 + i);
    }
    /* The three-exchange way: conditional, several chunks. */
    struct rio_call absent = {.flags = RIO_IF_ABSENT};
    T_OK(rio_put(u.c, "one/cond", p, 500, &absent, NULL));
    tu_put(u.c, "one/big", 3 * TU_CHUNK, 3);
    T_EQ(tu_tcp(u.c).put_one, 42u);
    tu_close(&u);
    tu_url(url, sizeof(url), &e, "put_one=off");
    tu_open(&u, url, &o);
    tu_put(u.c, "one/off", 1000, 4);
    T_EQ(tu_tcp(u.c).put_one, 0u);
    tu_close(&u);
    tu_url(url, sizeof(url), &e, "etag=md5");
    tu_open(&u, url, &o);
    tu_put(u.c, "one/md5", 1000, 5);
    T_EQ(tu_tcp(u.c).put_one, 0u);
    tu_close(&u);

    /* A client that saw PUT_ONE, and the server restarted without it. */
    tu_url(url, sizeof(url), &e, NULL);
    tu_open(&u, url, &o);
    char listen[96];
    snprintf(listen, sizeof(listen), "%s", e.addr[0]);
    stop(&e);
    setenv("RAILIOD_TEST_NO_PUT_ONE", "1", 1);
    srv_prepare(&e);
    srv_start_listen(&e, listen, NULL);
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    T_OK(rio_put(u.c, "one/old", p, 700, &call, NULL));
    T_EQ(st.replans, 1u);
    T_EQ(tu_tcp(u.c).put_one_refused, 1u);
    /* A refusal is no failed try (and no path error). */
    T_EQ(st.retries_total, 0u);
    T_EQ(st.path[0].errors, 0u);
    uint64_t sent = tu_tcp(u.c).put_one;
    for (unsigned i = 0; i < 3; i++) {
        snprintf(key, sizeof(key), "one/old%u", i);
        tu_put(u.c, key, 900, 6 + i);
        tu_get_check(u.c, key, 900, 6 + i, 0);
    }
    T_EQ(tu_tcp(u.c).put_one, sent);
    /* A fresh client of that server never sends one. */
    tu_open(&m, url, &o);
    tu_put(m.c, "one/new", 900, 9);
    T_EQ(tu_tcp(m.c).put_one, 0u);
    tu_close(&m);
    tu_close(&u);
    unsetenv("RAILIOD_TEST_NO_PUT_ONE");
    free(p);
    stop(&e);
}

/*
 * A GET into a buffer of at most a chunk goes as one GET_ONE frame (the
 * lookup and the bytes) to a server that offers it, a single GET and a
 * batch's alike, on both tiers: the bytes checked, the generation the
 * object's, no lookup. The answer decides a missing key (RIO_ENOTFOUND),
 * an object larger than the buffer (RIO_ETOOBIG) and an empty one; an
 * object of several chunks that fits the buffer (written with smaller
 * chunks) comes back as its descriptor and is looked up and read the
 * usual way (one re-plan). A GET into a buffer larger than a chunk, one
 * staged (RIO_ATOMIC), one naming its generation and one with
 * get_one=off go the two-exchange way.
 */
static void small_gets_against(const char *const *args)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u, w;
    char url[256];

    srv_start(&e, args);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    o.depth = 4;
    tu_open(&u, url, &o);
    uint64_t g1 = tu_put(u.c, "g1/a", 1000, 1);
    uint64_t sent = tu_tcp(u.c).get_one;
    /* Into a buffer of its size, and into a larger one. */
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    uint8_t *b = malloc(TU_CHUNK);
    T_NOTNULL(b);
    T_EQ(rio_get(u.c, "g1/a", b, 1000, &call), 1000);
    T_PATTERN(b, 1000, 1);
    T_EQ(st.replans, 0u);
    T_EQ(st.retries_total, 0u);
    T_EQ(st.path[0].bytes, 1000u);
    memset(b, 0, TU_CHUNK);
    T_EQ(rio_get(u.c, "g1/a", b, TU_CHUNK, NULL), 1000);
    T_PATTERN(b, 1000, 1);
    T_EQ(tu_tcp(u.c).get_one, sent + 2);
    /* A batch of 40, more of them in flight than the depth. */
    uint8_t *p = tu_pattern(TU_CHUNK, 2);
    struct rio_op ops[40];
    char keys[40][16];
    uint8_t got[40][256];
    for (unsigned i = 0; i < 40; i++) {
        snprintf(keys[i], sizeof(keys[i]), "g1/%u", i);
        T_OK(rio_put(u.c, keys[i], p + i, 100 + i, NULL, NULL));
        ops[i] = (struct rio_op){
            .type = RIO_OP_GET, .key = keys[i], .buf = got[i], .len = sizeof(got[i])};
    }
    sent = tu_tcp(u.c).get_one;
    struct rio_stats bst;
    struct rio_call bcall = {.stats = &bst};
    /* (until the path's GET rate is known, from 1 ms of its ops' busy
     * time, the schedule keeps one op in flight: a few batches) */
    unsigned rounds = 0;
    do {
        T_EQ(rio_batch(u.c, ops, 40, &bcall), 40);
        T_EQ(bst.replans, 0u);
    } while (++rounds < 20 && bst.path[0].peak_depth <= o.depth);
    T_EQ(tu_tcp(u.c).get_one, sent + 40 * rounds);
    T_GT(bst.path[0].peak_depth, (uint64_t)o.depth);
    for (unsigned i = 0; i < 40; i++) {
        T_EQ(ops[i].result, (int64_t)(100 + i));
        T_GT(ops[i].generation, g1);
        T_MEMEQ(got[i], p + i, 100 + i);
    }
    /* What the answer decides: missing, too large, empty. Such an answer
     * is the path's progress as a chunk landing is: its fail count from
     * earlier failures cleared, its last completion now. */
    sent = tu_tcp(u.c).get_one;
    pthread_mutex_lock(&u.c->mu);
    u.c->paths[0].fails = 3;
    uint64_t done0 = u.c->paths[0].last_done_ns;
    pthread_mutex_unlock(&u.c->mu);
    T_ERR(rio_get(u.c, "g1/none", b, 1000, &call), RIO_ENOTFOUND);
    pthread_mutex_lock(&u.c->mu);
    unsigned fails = u.c->paths[0].fails;
    uint64_t done1 = u.c->paths[0].last_done_ns;
    pthread_mutex_unlock(&u.c->mu);
    T_EQ(fails, 0u);
    T_GT(done1, done0);
    T_EQ(st.replans, 0u);
    T_EQ(st.path[0].errors, 0u);
    T_ERR(rio_get(u.c, "g1/a", b, 999, &call), RIO_ETOOBIG);
    T_EQ(st.replans, 0u);
    tu_put(u.c, "g1/big", 3 * TU_CHUNK, 3);
    T_ERR(rio_get(u.c, "g1/big", b, TU_CHUNK, NULL), RIO_ETOOBIG);
    T_OK(rio_put(u.c, "g1/empty", p, 0, NULL, NULL));
    T_EQ(rio_get(u.c, "g1/empty", b, 100, NULL), 0);
    T_EQ(tu_tcp(u.c).get_one, sent + 4);
    /* Several chunks within the buffer: the descriptor, then the usual way. */
    struct rio_options ow = o;
    ow.chunk_size = 4096;
    tu_open(&w, url, &ow);
    tu_put(w.c, "g1/small-chunks", 10000, 4);
    tu_close(&w);
    memset(b, 0, TU_CHUNK);
    T_EQ(rio_get(u.c, "g1/small-chunks", b, 10000, &call), 10000);
    T_PATTERN(b, 10000, 4);
    T_EQ(st.replans, 1u);
    T_EQ(st.chunks, 3u);
    ops[0] = (struct rio_op){.type = RIO_OP_GET, .key = "g1/small-chunks", .buf = b, .len = 20000};
    ops[1] = (struct rio_op){.type = RIO_OP_GET, .key = "g1/a", .buf = got[0], .len = 1000};
    memset(b, 0, TU_CHUNK);
    T_EQ(rio_batch(u.c, ops, 2, &bcall), 2);
    T_EQ(ops[0].result, 10000);
    T_PATTERN(b, 10000, 4);
    T_EQ(ops[1].result, 1000);
    T_EQ(bst.replans, 1u);
    /* The two-exchange way. */
    sent = tu_tcp(u.c).get_one;
    uint8_t *big = malloc(2 * TU_CHUNK);
    T_NOTNULL(big);
    T_EQ(rio_get(u.c, "g1/a", big, 2 * TU_CHUNK, NULL), 1000);
    struct rio_call atomic = {.flags = RIO_ATOMIC};
    T_EQ(rio_get(u.c, "g1/a", b, 1000, &atomic), 1000);
    struct rio_call named = {.expect_generation = g1};
    T_EQ(rio_get(u.c, "g1/a", b, 1000, &named), 1000);
    T_PATTERN(b, 1000, 1);
    T_EQ(tu_tcp(u.c).get_one, sent);
    if (args) {
        /* The disk tier restarted: nothing in memory, every answer's bytes
         * read from its file on a READ thread. */
        char listen[96];
        snprintf(listen, sizeof(listen), "%s", e.addr[0]);
        T_EQ(srv_stop(&e), 0);
        srv_prepare(&e);
        srv_start_listen(&e, listen, args);
        memset(got, 0, sizeof(got));
        for (unsigned i = 0; i < 40; i++)
            ops[i] = (struct rio_op){
                .type = RIO_OP_GET, .key = keys[i], .buf = got[i], .len = sizeof(got[i])};
        T_EQ(rio_batch(u.c, ops, 40, &bcall), 40);
        T_EQ(tu_tcp(u.c).get_one, sent + 40);
        for (unsigned i = 0; i < 40; i++) {
            T_EQ(ops[i].result, (int64_t)(100 + i));
            T_MEMEQ(got[i], p + i, 100 + i);
        }
        T_EQ(rio_get(u.c, "g1/small-chunks", b, 10000, NULL), 10000);
        T_PATTERN(b, 10000, 4);
    }
    tu_close(&u);
    tu_url(url, sizeof(url), &e, "get_one=off");
    tu_open(&u, url, &o);
    tu_get_check(u.c, "g1/a", 1000, 1, 0);
    T_EQ(tu_tcp(u.c).get_one, 0u);
    tu_close(&u);
    free(big);
    free(p);
    free(b);
    T_EQ(srv_stop(&e), 0);
}

TEST(small_gets_go_in_one_exchange)
{
    both_tiers(small_gets_against, "railio-getone");
}

/* A server (e), a client u of it (options o, URL url) and the objects of
 * the one-exchange tests under pre: a (1000 bytes, seed 1; its generation
 * returned), big (3 chunks, seed 3), empty, chunks (10000 bytes in chunks
 * of 4 KiB, seed 4: several within a guess). */
static uint64_t one_exchange_start(struct srv_env *e, struct tu *u, char *url, size_t cap,
                                   struct rio_options *o, const char *pre)
{
    struct rio_options ow;
    struct tu w;
    char key[64];

    start(e);
    tu_url(url, cap, e, NULL);
    tu_opts(o);
    tu_open(u, url, o);
    snprintf(key, sizeof(key), "%s/a", pre);
    uint64_t gen = tu_put(u->c, key, 1000, 1);
    snprintf(key, sizeof(key), "%s/big", pre);
    tu_put(u->c, key, 3 * TU_CHUNK, 3);
    snprintf(key, sizeof(key), "%s/empty", pre);
    T_OK(rio_put(u->c, key, "", 0, NULL, NULL));
    ow = *o;
    ow.chunk_size = 4096;
    tu_open(&w, url, &ow);
    snprintf(key, sizeof(key), "%s/chunks", pre);
    tu_put(w.c, key, 10000, 4);
    tu_close(&w);
    return gen;
}

/*
 * rio_get_alloc (what Python's Client.get calls) of a small object in one
 * exchange: it guesses the size (the last object's it fetched), GET_ONE
 * into a buffer of the guess, shrunk to what came. An object larger than
 * the guess, or of several chunks, is looked up and read after all; one
 * that follows a large one is looked up first (no try per large object).
 */
TEST(get_alloc_of_a_small_object_is_one_exchange)
{
    struct srv_env e;
    struct rio_options o, ow;
    struct tu u, w;
    char url[256];
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    void *p;

    uint64_t ga = one_exchange_start(&e, &u, url, sizeof(url), &o, "ga");
    ow = o;
    ow.chunk_size = 4096;
    struct rio__tcp_counters k0 = tu_tcp(u.c), k1;
#define GA(key, want, ones, lookups)                                                               \
    do {                                                                                           \
        p = NULL;                                                                                  \
        T_EQ(rio_get_alloc(u.c, key, &p, &call), (int64_t)(want));                                 \
        k1 = tu_tcp(u.c);                                                                          \
        T_EQ(k1.get_one - k0.get_one, (uint64_t)(ones));                                           \
        T_EQ(k1.ctl_requests - k0.ctl_requests, (uint64_t)(lookups));                              \
        k0 = k1;                                                                                   \
    } while (0)
    GA("ga/a", 1000, 1, 0);
    T_PATTERN(p, 1000, 1);
    T_EQ(st.replans, 0u);
    T_EQ(st.retries_total, 0u);
    free(p);
    p = (void *)1;
    T_ERR(rio_get_alloc(u.c, "ga/none", &p, NULL), RIO_ENOTFOUND);
    T_NULL(p);
    k1 = tu_tcp(u.c);
    T_EQ(k1.get_one - k0.get_one, 1u);
    T_EQ(k1.ctl_requests - k0.ctl_requests, 0u);
    k0 = k1;
    GA("ga/empty", 0, 1, 0);
    T_NOTNULL(p);
    free(p);
    /* Several chunks within the guess: its descriptor, then the usual way. */
    GA("ga/chunks", 10000, 1, 1);
    T_PATTERN(p, 10000, 4);
    T_EQ(st.replans, 1u);
    free(p);
    /* Larger than the guess (the last object's size, 10000 bytes, or at
     * least 64 KiB): too big for it, then looked up and read. */
    GA("ga/big", 3 * TU_CHUNK, 1, 1);
    T_PATTERN(p, 3 * TU_CHUNK, 3);
    T_EQ(st.replans, 1u);
    free(p);
    /* After a large object, looked up first; then small again in one. */
    GA("ga/a", 1000, 0, 1);
    T_PATTERN(p, 1000, 1);
    free(p);
    GA("ga/a", 1000, 1, 0);
    T_PATTERN(p, 1000, 1);
    free(p);
    /* A generation named, or RIO_ATOMIC: looked up first. */
    struct rio_call named = {.expect_generation = ga};
    struct rio_call atomic = {.flags = RIO_ATOMIC};
    T_EQ(rio_get_alloc(u.c, "ga/a", &p, &named), 1000);
    free(p);
    T_EQ(rio_get_alloc(u.c, "ga/a", &p, &atomic), 1000);
    T_PATTERN(p, 1000, 1);
    free(p);
    k1 = tu_tcp(u.c);
    T_EQ(k1.get_one - k0.get_one, 0u);
    T_EQ(k1.ctl_requests - k0.ctl_requests, 2u);
    /* A client whose chunk is under the least guess guesses a chunk. */
    tu_open(&w, url, &ow);
    for (unsigned i = 0; i < 3; i++) {
        k0 = tu_tcp(w.c);
        T_EQ(rio_get_alloc(w.c, "ga/a", &p, NULL), 1000);
        T_PATTERN(p, 1000, 1);
        free(p);
        k1 = tu_tcp(w.c);
        T_EQ(k1.get_one - k0.get_one, 1u);
        T_EQ(k1.ctl_requests - k0.ctl_requests, 0u);
    }
    tu_close(&w);
#undef GA
    tu_close(&u);
    stop(&e);
}

/* All of reader rd into a new buffer of at most cap bytes; its length. */
static int64_t read_all(struct rio_reader *rd, uint8_t *buf, size_t cap)
{
    size_t got = 0;
    for (;;) {
        int64_t n = rio_reader_read(rd, buf + got, cap - got);
        if (n <= 0)
            return n < 0 ? n : (int64_t)got;
        got += (size_t)n;
    }
}

/*
 * A reader of a whole object (Python's Client.open("rb"), `railio get URL
 * -`) first asks for it in one GET_ONE into a buffer of the size of the
 * last object the client fetched, as rio_get_alloc does: a small object is
 * one exchange, its descriptor the reader's. One larger than the guess,
 * or of several chunks, is looked up and read after all; after a large
 * object, and for a range, an offset or a generation named, the reader
 * looks up first.
 */
TEST(reader_of_a_small_object_is_one_exchange)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    struct rio_reader *rd;
    uint8_t *buf = malloc(3 * TU_CHUNK);

    T_NOTNULL(buf);
    uint64_t ga = one_exchange_start(&e, &u, url, sizeof(url), &o, "rd");
    struct rio__tcp_counters k0 = tu_tcp(u.c), k1;
#define RD(key, off, want, seed, ones, lookups)                                                    \
    do {                                                                                           \
        T_OK(rio_reader_open_at(u.c, key, off, 0, NULL, &rd));                                     \
        T_EQ(read_all(rd, buf, 3 * TU_CHUNK), (int64_t)(want));                                    \
        T_EQ(rio_reader_desc(rd)->size, (uint64_t)(want) + (off));                                 \
        T_OK(rio_reader_close(rd));                                                                \
        k1 = tu_tcp(u.c);                                                                          \
        T_EQ(k1.get_one - k0.get_one, (uint64_t)(ones));                                           \
        T_EQ(k1.ctl_requests - k0.ctl_requests, (uint64_t)(lookups));                              \
        k0 = k1;                                                                                   \
    } while (0)
    RD("rd/a", 0, 1000, 1, 1, 0);
    T_PATTERN(buf, 1000, 1);
    T_OK(rio_reader_open(u.c, "rd/a", 0, NULL, &rd));
    T_EQ(rio_reader_desc(rd)->generation, ga);
    T_ERR(rio_reader_close(rd), RIO_ECANCELED); /* closed before its end */
    k0 = tu_tcp(u.c);
    T_ERR(rio_reader_open(u.c, "rd/none", 0, NULL, &rd), RIO_ENOTFOUND);
    k1 = tu_tcp(u.c);
    T_EQ(k1.get_one - k0.get_one, 1u);
    T_EQ(k1.ctl_requests - k0.ctl_requests, 0u);
    k0 = k1;
    RD("rd/empty", 0, 0, 0, 1, 0);
    /* Several chunks within the guess; larger than the guess. */
    RD("rd/chunks", 0, 10000, 4, 1, 1);
    T_PATTERN(buf, 10000, 4);
    RD("rd/big", 0, 3 * TU_CHUNK, 3, 1, 1);
    T_PATTERN(buf, 3 * TU_CHUNK, 3);
    /* After a large object, looked up first; then small again in one. */
    RD("rd/a", 0, 1000, 1, 0, 1);
    RD("rd/a", 0, 1000, 1, 1, 0);
    T_PATTERN(buf, 1000, 1);
    /* At an offset, or a generation named: looked up first. */
    RD("rd/a", 10, 990, 1, 0, 1);
    struct rio_call named = {.expect_generation = ga};
    T_OK(rio_reader_open(u.c, "rd/a", 0, &named, &rd));
    T_EQ(read_all(rd, buf, 1000), 1000);
    T_PATTERN(buf, 1000, 1);
    T_OK(rio_reader_close(rd));
    k1 = tu_tcp(u.c);
    T_EQ(k1.get_one - k0.get_one, 0u);
    T_EQ(k1.ctl_requests - k0.ctl_requests, 1u);
#undef RD
    free(buf);
    tu_close(&u);
    stop(&e);
}

/*
 * A reader lives as long as its consumer reads: only a deadline given to
 * the call bounds it, not the client's (options deadline). So it is when
 * its one-exchange try found an object larger than the guess and it was
 * opened again the long way: read slowly, past the client's deadline.
 */
TEST(reader_after_its_one_exchange_ignores_the_client_deadline)
{
    struct srv_env e;
    struct rio_options o, od;
    struct tu u, v;
    char url[256];
    struct rio_reader *rd;
    uint8_t *buf = malloc(3 * TU_CHUNK);

    T_NOTNULL(buf);
    one_exchange_start(&e, &u, url, sizeof(url), &o, "dl");
    od = o;
    od.deadline_ms = 300;
    tu_open(&v, url, &od);
    T_OK(rio_reader_open(v.c, "dl/big", 1, NULL, &rd));
    size_t got = 0;
    while (got < TU_CHUNK) {
        int64_t k = rio_reader_read(rd, buf + got, TU_CHUNK - got);
        T_GT(k, 0);
        got += (size_t)k;
    }
    usleep(700000); /* a slow consumer, past the client's deadline */
    int64_t rest = read_all(rd, buf + got, 3 * TU_CHUNK - got);
    T_EQ(rest, (int64_t)(2 * TU_CHUNK));
    T_PATTERN(buf, 3 * TU_CHUNK, 3);
    T_OK(rio_reader_close(rd));
    free(buf);
    tu_close(&v);
    tu_close(&u);
    stop(&e);
}

/*
 * The descriptor of a reader whose object came in one exchange is the one
 * a lookup gives, its checksum list included: a reader opened from it
 * (rio_reader_open_desc) verifies the chunk it reads.
 */
TEST(reader_in_one_exchange_gives_the_lookups_descriptor)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    struct rio_reader *rd;
    struct rio_desc st;

    one_exchange_start(&e, &u, url, sizeof(url), &o, "ds");
    memset(&st, 0, sizeof(st));
    T_OK(rio_stat(u.c, "ds/a", &st));
    T_NOTNULL(st.xxh);
    struct rio__tcp_counters k0 = tu_tcp(u.c);
    T_OK(rio_reader_open(u.c, "ds/a", 0, NULL, &rd));
    T_EQ(tu_tcp(u.c).get_one - k0.get_one, 1u);
    const struct rio_desc *d = rio_reader_desc(rd);
    T_EQ(d->size, st.size);
    T_EQ(d->generation, st.generation);
    T_EQ(d->chunk_size, st.chunk_size);
    T_EQ(d->nchunks, st.nchunks);
    T_STREQ(d->etag, st.etag);
    T_NOTNULL(d->xxh);
    T_EQ(d->xxh[0], st.xxh[0]);
    T_ERR(rio_reader_close(rd), RIO_ECANCELED); /* closed before its end */
    rio_desc_cleanup(&st);
    tu_close(&u);
    stop(&e);
}

static int discard_cb(void *arg, const void *data, size_t len)
{
    (void)arg;
    (void)data;
    (void)len;
    return 0;
}

/*
 * A reader whose one-exchange try did not bring the object counts the run
 * the long way in its stats as rio_get_alloc does (one re-plan); one that
 * came in one exchange counts none.
 */
TEST(reader_counts_its_run_the_long_way)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    struct rio_reader *rd;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    uint8_t *buf = malloc(3 * TU_CHUNK);

    T_NOTNULL(buf);
    one_exchange_start(&e, &u, url, sizeof(url), &o, "rs");
    T_OK(rio_reader_open(u.c, "rs/a", 0, &call, &rd));
    T_EQ(read_all(rd, buf, 3 * TU_CHUNK), 1000);
    T_OK(rio_reader_close(rd));
    T_EQ(st.replans, 0u);
    T_OK(rio_reader_open(u.c, "rs/chunks", 0, &call, &rd));
    T_EQ(read_all(rd, buf, 3 * TU_CHUNK), 10000);
    T_OK(rio_reader_close(rd));
    T_EQ(st.replans, 1u);
    T_EQ(st.retries_total, 0u);
    T_EQ(rio_get_stream(u.c, "rs/big", 0, discard_cb, NULL, &call), (int64_t)(3 * TU_CHUNK));
    T_EQ(st.replans, 1u);
    free(buf);
    tu_close(&u);
    stop(&e);
}

static void *fire_after_100ms(void *p)
{
    usleep(100000);
    rio_cancel_fire(p);
    return NULL;
}

/* The most requests on the engine's active list while a batch runs. */
struct active_watch {
    struct rio_client *c;
    _Atomic int stop;
    size_t peak;
};

static void *active_watch_main(void *p)
{
    struct active_watch *w = p;
    while (!atomic_load(&w->stop)) {
        pthread_mutex_lock(&w->c->mu);
        if (w->c->active.count > w->peak)
            w->peak = w->c->active.count;
        pthread_mutex_unlock(&w->c->mu);
        usleep(200);
    }
    return NULL;
}

/* Once a call has returned, the engine's window bookkeeping is back to
 * nothing: no one-op request counted active, none held, no call waiting. */
static void window_idle(struct rio_client *c)
{
    pthread_mutex_lock(&c->mu);
    unsigned active = c->active_one, held = c->held_dir[0] + c->held_dir[1];
    bool calls = !rio_list_empty(&c->held_calls);
    pthread_mutex_unlock(&c->mu);
    T_EQ(active, 0u);
    T_EQ(held, 0u);
    T_FALSE(calls);
}

/*
 * A batch of thousands of small objects, each one op (PUT_ONE, GET_ONE):
 * at most the engine's window of them on its active list at once (the
 * engine walks that list at every event), every byte right, and one
 * whose deadline passes or whose call is cancelled while most are held
 * off the list ends promptly, every request with that error.
 */
TEST(one_op_batches_keep_a_window)
{
    enum { N = 3000, SZ = 200 };
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    static char keys[N][16];
    static struct rio_op ops[N];
    static uint8_t got[N][SZ];

    start(&e);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    tu_open(&u, url, &o);
    uint8_t *p = tu_pattern(SZ + N, 9);
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "w/%u", i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = p + i, .len = SZ};
    }
    struct active_watch w = {.c = u.c};
    pthread_t th;
    T_EQ(pthread_create(&th, NULL, active_watch_main, &w), 0);
    T_EQ(rio_batch(u.c, ops, N, NULL), N);
    for (unsigned i = 0; i < N; i++)
        ops[i] = (struct rio_op){.type = RIO_OP_GET, .key = keys[i], .buf = got[i], .len = SZ};
    T_EQ(rio_batch(u.c, ops, N, NULL), N);
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    for (unsigned i = 0; i < N; i++) {
        T_EQ(ops[i].result, SZ);
        T_MEMEQ(got[i], p + i, SZ);
    }
    T_EQ(tu_tcp(u.c).put_one, (uint64_t)N);
    T_GE(tu_tcp(u.c).get_one, (uint64_t)N);
    fprintf(stderr, "  at most %zu requests active of %u\n", w.peak, N);
    T_GT(w.peak, 0u);
    T_LE(w.peak, 256u + 128u * 1u);
    window_idle(u.c);

    /* The server stopped: a deadline, then a cancel, end the batch. */
    T_EQ(kill(e.pid, SIGSTOP), 0);
    struct rio_call dl = {.deadline_ms = 300};
    uint64_t t0 = t_now_ms();
    T_EQ(rio_batch(u.c, ops, N, &dl), 0);
    T_LE(t_now_ms() - t0, 3000u);
    for (unsigned i = 0; i < N; i++)
        T_ERR(ops[i].result, RIO_EDEADLINE);
    window_idle(u.c);
    struct rio_cancel *cx;
    T_OK(rio_cancel_new(&cx));
    struct rio_call cc = {.cancel = cx};
    pthread_t ct;
    T_EQ(pthread_create(&ct, NULL, fire_after_100ms, cx), 0);
    t0 = t_now_ms();
    T_EQ(rio_batch(u.c, ops, N, &cc), 0);
    T_LE(t_now_ms() - t0, 3000u);
    pthread_join(ct, NULL);
    for (unsigned i = 0; i < N; i++)
        T_ERR(ops[i].result, RIO_ECANCELED);
    window_idle(u.c);
    rio_cancel_destroy(cx);
    T_EQ(kill(e.pid, SIGCONT), 0);
    tu_close(&u);
    free(p);
    stop(&e);
}

/*
 * A batch's GETs whose one op found an object of several chunks go again
 * the usual way; when that run cannot start (out of memory: every
 * allocation failed in turn), they fail with what stopped it, never with
 * the library's internal RIO__ENOTONE.
 */
TEST(batch_get_one_run_again_failing_leaks_no_internal_code)
{
    struct srv_env e;
    struct rio_options o, ow;
    struct tu u, w;
    char url[256];
    static uint8_t b[2][20000];

    start(&e);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    tu_open(&u, url, &o);
    ow = o;
    ow.chunk_size = 4096;
    tu_open(&w, url, &ow);
    tu_put(w.c, "en/a", 10000, 4);
    tu_put(w.c, "en/b", 9000, 5);
    tu_close(&w);
    struct rio_op ops[2];
    unsigned hits = 0, n;
    for (n = 1; n < 2000; n++) {
        ops[0] = (struct rio_op){.type = RIO_OP_GET, .key = "en/a", .buf = b[0], .len = 20000};
        ops[1] = (struct rio_op){.type = RIO_OP_GET, .key = "en/b", .buf = b[1], .len = 20000};
        uint64_t before = rio__alloc_calls();
        rio__alloc_fail_nth(n);
        int ret = rio_batch(u.c, ops, 2, NULL);
        rio__alloc_fail_nth(0);
        bool hit = rio__alloc_calls() - before >= n;
        for (unsigned i = 0; ret >= 0 && i < 2; i++)
            if (ops[i].result < 0 && ops[i].result != -ENOMEM)
                T_FAIL("n=%u: op %u ended %" PRId64 " (%s)", n, i, ops[i].result,
                       rio_errname((int)ops[i].result));
        if (!hit)
            break;
        hits++;
    }
    T_GT(hits, 0u);
    T_LT(n, 2000u);
    tu_get_check(u.c, "en/a", 10000, 4, 0);
    tu_close(&u);
    stop(&e);
}

/*
 * Requests held off the active list (past the engine's window of one-op
 * requests) wait through a whole stall window of their own before they
 * fail RIO_ENOPATH, as active ones do: a client whose path was down a
 * while ago, its server back since, runs a large batch of GET_ONEs to
 * the end (each held one failed at once, its stall counted from when the
 * path went down, before any call of it began).
 */
TEST(held_one_ops_wait_their_own_stall)
{
    enum { N = 700, SZ = 100 };
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256], listen[96];
    static char keys[N][16];
    static struct rio_op ops[N];
    static uint8_t got[N][SZ];

    start(&e);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    o.retry_attempts = 2;
    o.op_timeout_ms = 200;
    o.cooldown_base_ms = 20;
    o.cooldown_cap_ms = 50;
    tu_open(&u, url, &o);
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "hs/%u", i);
        ops[i] = (struct rio_op){.type = RIO_OP_GET, .key = keys[i], .buf = got[i], .len = SZ};
    }
    T_EQ(rio_batch(u.c, ops, N, NULL), 0);
    for (unsigned i = 0; i < N; i++)
        T_ERR(ops[i].result, RIO_ENOTFOUND);
    T_GE(tu_tcp(u.c).get_one, (uint64_t)N);
    /* The server goes away: a GET fails, its path not healthy since. */
    snprintf(listen, sizeof(listen), "%s", e.addr[0]);
    stop(&e);
    uint8_t b[SZ];
    struct rio_call dl = {.deadline_ms = 2000};
    T_TRUE(rio_get(u.c, "hs/x", b, SZ, &dl) < 0);
    usleep(800 * 1000); /* past the stall window: 2 x 200 + 50 ms */
    srv_prepare(&e);
    srv_start_listen(&e, listen, NULL);
    for (unsigned i = 0; i < N; i++)
        ops[i] = (struct rio_op){.type = RIO_OP_GET, .key = keys[i], .buf = got[i], .len = SZ};
    T_EQ(rio_batch(u.c, ops, N, NULL), 0);
    unsigned nopath = 0;
    for (unsigned i = 0; i < N; i++)
        nopath += ops[i].result == RIO_ENOPATH;
    T_EQ(nopath, 0u);
    for (unsigned i = 0; i < N; i++)
        T_ERR(ops[i].result, RIO_ENOTFOUND);
    tu_close(&u);
    stop(&e);
}

/* A client that saw GET_ONE offered, and the server restarted without it
 * (as a railiod before it): the GET is refused before it goes out and is
 * looked up and read the usual way (one re-plan), and the member gets no
 * more GET_ONEs; a fresh client of that server sends none. */
TEST(get_one_refused_by_an_older_server)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u, m;
    char url[256], listen[96];

    start(&e);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    tu_open(&u, url, &o);
    tu_put(u.c, "g2/a", 1000, 1);
    tu_get_check(u.c, "g2/a", 1000, 1, 0);
    T_EQ(tu_tcp(u.c).get_one, 1u);
    snprintf(listen, sizeof(listen), "%s", e.addr[0]);
    stop(&e);
    setenv("RAILIOD_TEST_NO_GET_ONE", "1", 1);
    srv_prepare(&e);
    srv_start_listen(&e, listen, NULL);
    unsetenv("RAILIOD_TEST_NO_GET_ONE");
    tu_put(u.c, "g2/b", 700, 2);
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    uint8_t b[1000];
    T_EQ(rio_get(u.c, "g2/b", b, sizeof(b), &call), 700);
    T_PATTERN(b, 700, 2);
    T_EQ(st.replans, 1u);
    T_EQ(tu_tcp(u.c).get_one_refused, 1u);
    /* A refusal is no failed try, and the path's last error is no
     * internal code (rio_error_detail names it when a later call fails). */
    T_EQ(st.retries_total, 0u);
    T_EQ(st.retries[RIO_CLASS_FATAL], 0u);
    pthread_mutex_lock(&u.c->mu);
    int last = u.c->paths[0].last_err;
    pthread_mutex_unlock(&u.c->mu);
    T_NE(last, RIO__ENOTONE);
    uint64_t sent = tu_tcp(u.c).get_one;
    for (unsigned i = 0; i < 3; i++)
        tu_get_check(u.c, "g2/b", 700, 2, 0);
    T_EQ(tu_tcp(u.c).get_one, sent);
    tu_open(&m, url, &o);
    tu_get_check(m.c, "g2/b", 700, 2, 0);
    T_EQ(tu_tcp(m.c).get_one, 0u);
    tu_close(&m);
    tu_close(&u);
    stop(&e);
}

/*
 * Small one-op requests on a client's one path go many at once from the
 * start: the rule that a path carries one op until it has shown its rate
 * (a millisecond of busy time) weighs it against other paths, and there
 * are none. A batch of 64 tiny PUT_ONEs, then GET_ONEs, went one at a
 * time, each well under that millisecond.
 */
TEST(tiny_one_ops_fill_a_lone_path_before_its_rate_is_known)
{
    enum { N = 64, SZ = 100 };
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    struct rio_op ops[N];
    char keys[N][16];
    uint8_t got[N][SZ];

    start(&e);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    o.depth = 4;
    tu_open(&u, url, &o);
    uint8_t *p = tu_pattern(SZ + N, 5);
    tu_put(u.c, "t1/warm", 10, 1); /* greets the control connection */
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "t1/%u", i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = p + i, .len = SZ};
    }
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    T_EQ(rio_batch(u.c, ops, N, &call), N);
    T_GT(st.path[0].peak_depth, 1u);
    for (unsigned i = 0; i < N; i++)
        ops[i] = (struct rio_op){.type = RIO_OP_GET, .key = keys[i], .buf = got[i], .len = SZ};
    T_EQ(rio_batch(u.c, ops, N, &call), N);
    T_GT(st.path[0].peak_depth, 1u);
    T_EQ(tu_tcp(u.c).get_one, (uint64_t)N);
    for (unsigned i = 0; i < N; i++)
        T_MEMEQ(got[i], p + i, SZ);
    free(p);
    tu_close(&u);
    stop(&e);
}

/* PUT_ONEs of whole chunks take one depth slot each, as chunks do: a
 * batch of them at depth 4 has four in flight (each took eight slots, one
 * in flight at a time). */
TEST(whole_chunk_put_ones_fill_the_depth)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    struct rio_op ops[16];
    char keys[16][16];

    start(&e);
    tu_url(url, sizeof(url), &e, NULL);
    tu_opts(&o);
    o.depth = 4;
    o.adapt = -1;
    tu_open(&u, url, &o);
    uint8_t *p = tu_pattern(o.chunk_size, 3);
    for (unsigned i = 0; i < 16; i++) {
        snprintf(keys[i], sizeof(keys[i]), "wc/%u", i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = p, .len = o.chunk_size};
    }
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    T_EQ(rio_batch(u.c, ops, 16, &call), 16);
    T_EQ(tu_tcp(u.c).put_one, 16u);
    T_EQ(st.path[0].peak_depth, 4u);
    free(p);
    tu_close(&u);
    stop(&e);
}

/* A deep batch of PUTs of several chunks keeps fewer uploads open at once
 * than railiod takes on one connection (64 by default): with depth=64 its
 * opens ran ahead of its commits past that, every later open was throttled
 * while the commits waited behind them, and the batch failed
 * (RIO_ERETRIES, "64 uploads open on this connection" in the log). */
TEST(deep_batch_of_uploads_is_not_throttled)
{
    struct srv_env e;
    struct rio_options o;
    struct tu u;
    char url[256];
    enum { N = 1000 };
    static char keys[N][16];
    static struct rio_op ops[N];

    start(&e);
    tu_url(url, sizeof(url), &e, "depth=64");
    tu_opts(&o);
    o.chunk_size = 4096;
    o.depth = 64;
    tu_open(&u, url, &o);
    uint8_t *p = tu_pattern(3 * 4096, 11);
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "deep/%u", i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = p, .len = 2 * 4096 + i};
    }
    T_EQ(rio_batch(u.c, ops, N, NULL), N);
    T_EQ(srv_log_count(&e, "uploads open on this connection"), 0u);
    for (unsigned i = 0; i < N; i += 97) {
        uint8_t got[3 * 4096];
        T_EQ(rio_get(u.c, keys[i], got, sizeof(got), NULL), (int64_t)(2 * 4096 + i));
        T_MEMEQ(got, p, 2 * 4096 + i);
    }
    free(p);
    tu_close(&u);
    stop(&e);
}

TEST(ring_of_three_members)
{
    struct srv_env e[3];
    struct rio_options o;
    struct tu u;
    char url[512];
    unsigned per[3] = {0, 0, 0};

    for (int i = 0; i < 3; i++)
        start(&e[i]);
    snprintf(url, sizeof(url), "railio://%s,%s,%s", e[0].addr[0], e[1].addr[0], e[2].addr[0]);
    tu_opts(&o);
    tu_open(&u, url, &o);
    struct wc w[3];
    for (int i = 0; i < 3; i++) {
        wc_open(&w[i], e[i].addr[0]);
    }
    for (unsigned k = 0; k < 30; k++) {
        char key[32];
        snprintf(key, sizeof(key), "ring/%u", k);
        size_t n = (k % 3 + 1) * TU_CHUNK + k;
        tu_put(u.c, key, n, 100 + k);
        int owner = rio__tcp_owner(rio__client_transport(u.c), key);
        T_GE(owner, 0);
        T_LT(owner, 3);
        per[owner]++;
        for (int i = 0; i < 3; i++) {
            struct rio_proto_desc d;
            uint8_t *keep = NULL;
            int ret = wc_lookup(&w[i], key, &d, &keep);
            free(keep);
            if (i == owner)
                T_EQ(ret, 0);
            else
                T_EQ(ret, RIO_ENOTFOUND);
        }
        tu_get_check(u.c, key, n, 100 + k, 0);
    }
    /* Rendezvous spreads 30 keys over all three. */
    for (int i = 0; i < 3; i++)
        T_GT(per[i], 0u);
    for (unsigned k = 0; k < 30; k++) {
        char key[32];
        snprintf(key, sizeof(key), "ring/%u", k);
        T_OK(rio_delete(u.c, key));
    }
    wc_close_all(w, 3);
    tu_close(&u);
    /* A member that is down fails its own keys only. */
    tu_open(&u, url, &o);
    stop(&e[1]);
    for (unsigned k = 0; k < 12; k++) {
        char key[32];
        snprintf(key, sizeof(key), "ring2/%u", k);
        uint8_t *p = tu_pattern(TU_CHUNK, k);
        int ret = rio_put(u.c, key, p, TU_CHUNK, NULL, NULL);
        /* (A one-chunk PUT goes in one exchange on the member's data
         * path, which is down: no path left, the dial refused.) */
        if (rio__tcp_owner(rio__client_transport(u.c), key) == 1) {
            T_ERR(ret, RIO_ENOPATH);
            T_NOTNULL(strstr(rio_error_detail(), "connection refused"));
        } else
            T_OK(ret);
        free(p);
    }
    tu_close(&u);
    stop(&e[0]);
    stop(&e[2]);
}

/* -------------------------------------------------------------- cancel */

/* -------------------------------------------------------- idle connections */

/* The server closes idle connections; the next calls redial quietly. */
TEST(server_closes_idle_connections)
{
    struct tu_env x;
    /* Long enough that no connection idles that long while in use, even
     * under a sanitizer; the sleeps below outlast it. */
    const char *args[] = {"--idle-timeout", "400ms", NULL};

    tu_env_start(&x, args, "conns=2");
    for (int i = 0; i < 3; i++) {
        struct rio_stats st;
        put_get_paths(x.u.c, "idle/obj", TU_MIB, 30 + (uint64_t)i, 0, &st);
        T_EQ(st.retries_total, 0u);
        usleep(900000);
    }
    T_EQ(tu_tcp(x.u.c).conn_failures, 0u);
    tu_env_stop(&x);
}

/* ------------------------------------------------------------------ URLs */

/* URLs a client refuses, each with its error (and the error's name). */
#define BAD(url, err)                                                                              \
    {                                                                                              \
        (url), (err), #err                                                                         \
    }
static const struct {
    const char *url;
    int err;
    const char *name;
} bad_urls[] = {
    BAD("railio://", RIO_EURL),
    BAD("railio://127.0.0.1:0", RIO_EURL),
    BAD("railio://127.0.0.1:99999", RIO_EURL),
    BAD("railio://::1:7070", RIO_EURL),
    BAD("railio://127.0.0.1:7070,", RIO_EURL),
    BAD("railio://127.0.0.1:7070?conns=0", RIO_EINVAL),
    BAD("railio://127.0.0.1:7070?conns=17", RIO_EINVAL),
    BAD("railio://127.0.0.1:7070?connect_timeout=x", RIO_EINVAL),
    BAD("railio://127.0.0.1:7070?token=a&token_file=/x", RIO_EINVAL),
    BAD("railio://127.0.0.1:1,127.0.0.1:2?rails=127.0.0.1:3", RIO_EINVAL),
    BAD("railio://127.0.0.1:7070?token_file=/nonexistent/token", -ENOENT),
    BAD("railio://127.0.0.1:7070?keepalive=maybe", RIO_EINVAL),
    /* Nobody listens on port 1 of loopback. */
    BAD("railio://127.0.0.1:1", -ECONNREFUSED),
    /* Booleans take any case, as every other option does (keepalive=ON was refused). */
    BAD("railio://127.0.0.1:1?keepalive=ON&tls=on&tls_verify=Yes", -ECONNREFUSED),
    /* A TLS option without tls=on is refused, not run in the clear. */
    BAD("railio://127.0.0.1:1?tls_ca=/etc/ssl/certs/ca-certificates.crt", RIO_EINVAL),
    BAD("railio://127.0.0.1:1?tls_name=localhost", RIO_EINVAL),
    BAD("railio://127.0.0.1:1?tls=off&tls_verify=on", RIO_EINVAL),
    /* ... but tls_verify=off asks nothing of a connection in the clear. */
    BAD("railio://127.0.0.1:1?tls=off&tls_verify=off", -ECONNREFUSED),
};

TEST(bad_urls_and_unreachable_servers)
{
    struct srv_env e;
    struct rio_options o;
    struct rio_client *c = NULL;
    char url[512];
    int64_t a0 = rio__alloc_outstanding();

    tu_opts(&o);
    for (size_t i = 0; i < sizeof(bad_urls) / sizeof(bad_urls[0]); i++)
        t__err(__FILE__, __LINE__, bad_urls[i].url, bad_urls[i].name,
               rio_client_new(bad_urls[i].url, &o, &c), bad_urls[i].err);
    T_NULL(c);
    T_EQ(rio__alloc_outstanding(), a0);

    /* Explicit rails: the URL's server by two routes, plus a path option. */
    start(&e);
    snprintf(url, sizeof(url), "railio://%s?rails=%s,127.0.0.1>%s", e.addr[0], e.addr[0],
             e.addr[0]);
    struct tu u;
    struct rio_stats st;
    tu_open(&u, url, &o);
    put_get_paths(u.c, "rails/obj", 4 * TU_MIB, 40, 2, &st);
    tu_close(&u);
    stop(&e);
}

/* By default the paths are the rails the server announces in HELLO: a server
 * with two listeners gives two paths (one connection each), both used. */
TEST(announced_rails_are_paths)
{
    struct srv_env e;
    struct rio_options o;
    struct rio_stats st;
    struct tu u;
    char url[256];
    const size_t n = 8 * TU_MIB;

    srv_prepare(&e);
    srv_start_listen(&e, "127.0.0.1:0,127.0.0.1:0", NULL);
    T_EQ(e.naddr, 2u);
    tu_opts(&o);
    o.adapt = -1; /* both rails from the first op (on loopback one may do) */
    tu_url(url, sizeof(url), &e, NULL);
    tu_open(&u, url, &o);
    put_get_paths(u.c, "rails/obj", n, 50, 2, &st);
    T_GT(st.path[0].bytes, 0u);
    T_GT(st.path[1].bytes, 0u);
    T_EQ(tu_tcp(u.c).conns_open, 2u);
    tu_close(&u);

    /* The interface form of a rail: SO_BINDTODEVICE needs CAP_NET_RAW. */
    if (geteuid() == 0) {
        tu_url(url, sizeof(url), &e, "rails=if!lo");
        tu_open(&u, url, &o);
        tu_get_check(u.c, "rails/obj", n, 50, 0);
        tu_close(&u);
    } else {
        fprintf(stderr, "not root: rails=if!lo not tried\n");
    }
    stop(&e);
}
