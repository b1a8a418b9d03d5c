/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * kill -9 of a --sync railiod at random points while several threads PUT
 * small objects over several connections each, then a restart on the same
 * data directory, in rounds until 200+ PUTs were acknowledged. After each
 * restart: every acknowledged object reads back byte-exact as the last
 * acknowledged version (same generation) or a later unacknowledged but
 * complete one; objects never acknowledged are absent or whole; nothing torn
 * is ever readable; new generations are above every earlier one. Each
 * version's bytes derive from (key, seq), so any version read is checked.
 * The kill points come from a seed printed at the start (DISK_CRASH_SEED=N
 * replays one).
 */
#include <pthread.h>
#include <stdatomic.h>

#include "server_disk_util.h"

#define THREADS 4
#define KEYS_PER 6
#define NKEYS (THREADS * KEYS_PER)
#define CONNS 2
#define MAXSZ (40u * 1024u)
#define CHUNK (8u * 1024u)
#define MIN_ACKED 200u
#define MIN_ROUNDS 4u
#define MAX_ROUNDS 30u

struct keystate {
    uint64_t attempted; /* highest seq whose PUT started */
    uint64_t acked;     /* highest seq whose PUT_COMMIT was answered 0 */
    uint64_t acked_gen;
};

static struct keystate ks[NKEYS];
static char addr[80];
static _Atomic unsigned acked_total, acked_round;
static uint64_t min_gen_round[THREADS];

/* One PUT of version seq of key k over conns; the first failing status. */
static int put_one(struct wc *conns, unsigned k, uint64_t seq, uint64_t *gen)
{
    char key[32];
    uint64_t n, up = 0;
    uint8_t *d = dv_make(k, seq, MAXSZ, &n);
    uint64_t nch = wc_nchunks(n, CHUNK);
    uint64_t *x = wc_xxh_list(d, n, CHUNK);
    char etag[33];
    int st;

    snprintf(key, sizeof(key), "k%u", k);
    wc_etag(d, n, etag);
    st = wc_put_open(&conns[0], key, n, CHUNK, 0, &up);
    for (uint64_t i = 0; st == 0 && i < nch; i++) {
        uint64_t off = i * CHUNK, len = n - off < CHUNK ? n - off : CHUNK;
        st = wc_put_chunk(&conns[i % CONNS], up, i, x[i], d + off, len);
    }
    if (st == 0)
        st = wc_put_commit(&conns[seq % CONNS], up, nch, x, etag, gen);
    free(x);
    free(d);
    return st;
}

/* HELLO that reports a dead server instead of failing the test. */
static int hello_try(struct wc *c)
{
    struct rio_proto_hello m = {.version_min = RIO_PROTO_VERSION, .version_max = RIO_PROTO_VERSION};
    uint8_t *body = NULL;
    uint32_t blen = 0;
    int st = wc_hello_raw(c, &m, &body, &blen);
    free(body);
    return st;
}

static void *writer(void *arg)
{
    unsigned t = (unsigned)(uintptr_t)arg;
    struct wc conns[CONNS];
    unsigned ok = 0, nconn = 0;

    for (unsigned i = 0; i < CONNS; i++) {
        if (wc_try_connect(&conns[i], addr, 5) < 0)
            goto out; /* killed before we got going */
        if (hello_try(&conns[i]) != 0) {
            wc_close(&conns[i]);
            goto out;
        }
        nconn++;
    }
    for (unsigned it = 0; nconn == CONNS; it++) {
        unsigned k = t * KEYS_PER + it % KEYS_PER;
        uint64_t gen = 0, seq = ++ks[k].attempted;
        int st = put_one(conns, k, seq, &gen);
        if (st != 0)
            break; /* the server is gone (or going): stop */
        ks[k].acked = seq;
        ks[k].acked_gen = gen;
        if (!min_gen_round[t] || gen < min_gen_round[t])
            min_gen_round[t] = gen;
        ok++;
    }
out:
    atomic_fetch_add(&acked_round, ok);
    for (unsigned i = 0; i < nconn; i++)
        wc_close(&conns[i]);
    return NULL;
}

/* After a restart: check every key against what was acknowledged. Returns
 * the highest generation seen. */
static uint64_t verify(struct srv_env *e, unsigned round)
{
    struct wc c;
    uint64_t maxgen = 0;
    unsigned present = 0, newer = 0;

    wc_open(&c, e->addr[0]);
    for (unsigned k = 0; k < NKEYS; k++) {
        char key[32];
        struct rio_proto_desc d;
        uint8_t *buf = NULL;
        int st;

        snprintf(key, sizeof(key), "k%u", k);
        st = dv_get(&c, key, &buf, &d);
        if (st == RIO_ENOTFOUND) {
            if (ks[k].acked)
                T_FAIL("round %u: %s acknowledged (seq %llu) but absent", round, key,
                       (unsigned long long)ks[k].acked);
            continue;
        }
        if (st != 0)
            T_FAIL("round %u: %s: %s", round, key, rio_errname(st));
        int64_t seq = dv_check(k, buf, d.size, MAXSZ);
        free(buf);
        if (seq < 0)
            T_FAIL("round %u: %s: torn or foreign bytes (size %llu)", round, key,
                   (unsigned long long)d.size);
        if ((uint64_t)seq < ks[k].acked || (uint64_t)seq > ks[k].attempted)
            T_FAIL("round %u: %s: version %lld outside [acked %llu, attempted %llu]", round, key,
                   (long long)seq, (unsigned long long)ks[k].acked,
                   (unsigned long long)ks[k].attempted);
        if ((uint64_t)seq == ks[k].acked && d.generation != ks[k].acked_gen)
            T_FAIL("round %u: %s: generation %llu, acknowledged %llu", round, key,
                   (unsigned long long)d.generation, (unsigned long long)ks[k].acked_gen);
        if ((uint64_t)seq > ks[k].acked)
            newer++;
        present++;
        /* What is there now is the baseline for the next round. */
        ks[k].acked = (uint64_t)seq;
        ks[k].acked_gen = d.generation;
        if (d.generation > maxgen)
            maxgen = d.generation;
    }
    wc_close(&c);
    fprintf(stderr, "round %u: %u keys present, %u with a complete unacknowledged version\n", round,
            present, newer);
    return maxgen;
}

TEST(kill9_during_puts)
{
    const char *dir = disk_dir_make();
    const char *args[] = {"--data-dir", dir, "--sync", "--threads", "2", NULL};
    struct srv_env e;
    uint64_t seed = (uint64_t)time(NULL), prev_max = 0;
    const char *s = getenv("DISK_CRASH_SEED");
    unsigned round;
    uint64_t t0 = t_now_ms();

    if (s)
        seed = strtoull(s, NULL, 10);
    fprintf(stderr, "DISK_CRASH_SEED=%llu\n", (unsigned long long)seed);
    uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
    for (round = 0; round < MAX_ROUNDS; round++) {
        pthread_t th[THREADS];

        if (round >= MIN_ROUNDS && acked_total >= MIN_ACKED)
            break;
        if (t_now_ms() - t0 > 45000)
            break;
        srv_start(&e, args);
        if (round > 0) {
            uint64_t m = verify(&e, round);
            if (m > prev_max)
                prev_max = m;
        }
        snprintf(addr, sizeof(addr), "%s", e.addr[0]);
        atomic_store(&acked_round, 0);
        memset(min_gen_round, 0, sizeof(min_gen_round));
        for (unsigned t = 0; t < THREADS; t++)
            T_EQ(pthread_create(&th[t], NULL, writer, (void *)(uintptr_t)t), 0);
        /* Let them run a random while, then kill -9 mid-flight. */
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        usleep((useconds_t)(30000 + rng % 250000));
        srv_kill9(&e);
        for (unsigned t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
        for (unsigned t = 0; t < THREADS; t++)
            if (min_gen_round[t] && min_gen_round[t] <= prev_max)
                T_FAIL("round %u: generation %llu not above %llu from before the restart", round,
                       (unsigned long long)min_gen_round[t], (unsigned long long)prev_max);
        atomic_fetch_add(&acked_total, atomic_load(&acked_round));
        fprintf(stderr, "round %u: %u PUTs acknowledged before kill -9 (%u in all)\n", round,
                atomic_load(&acked_round), atomic_load(&acked_total));
    }
    /* The final restart and check. */
    srv_start(&e, args);
    verify(&e, round);
    T_EQ(srv_stop(&e), 0);
    T_GE(acked_total, MIN_ACKED);
    T_GE(round, MIN_ROUNDS);
    T_EQ(disk_dir_count(dir, "t-", NULL, 0), 0u);
}
