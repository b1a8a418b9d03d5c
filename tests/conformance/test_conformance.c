/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport contract, once, against any backend: the same cases run on
 * mock://, file://, railio://, s3:// and rados://. ctest runs this program
 * once a backend (conformance/<backend>), naming it in T_CONF_BACKEND; by
 * hand: `T_CONF_BACKEND=file build/tests/conformance/test_conformance`.
 *
 * Each case opens its clients on the backend's URL (a fresh mock name, a
 * scratch directory, a railiod of its own, the program's one radosgw or Ceph
 * cluster), uses keys under a prefix of its own, and ends with the checks
 * every case shares: nothing in flight in the engine or the transport
 * (t_idle), every rio__malloc block back, and, once its keys are deleted,
 * nothing left behind (temporary files, open multipart uploads, chunk
 * objects). A backend that is not built in, or whose peer this machine
 * cannot host, skips (exit 77). How to add a backend:
 * docs/internals/testing.md.
 */
/* T_TIMEOUT 120 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ftw.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/checksum.h"
#include "railio_mock.h"
#include "s3_util.h"
#include "server_env.h"
#include "t.h"
#include "tlib.h"
#ifdef RIO_HAVE_RADOS
#include "rados_util.h"
#endif

/* ------------------------------------------------------------ backends */

struct backend {
    const char *name;
    const char *scheme;
    uint64_t chunk;      /* the chunk size the cases use (S3: its smallest part) */
    enum t_profile opts; /* the option set of the backend's own suite */
    /* Per case, in the case's process: start what the case needs and write
     * the base URL (no query) and its first parameters. */
    void (*setup)(char *base, size_t cap, char *params, size_t pcap);
    /* After the case deleted every key under prefix: nothing of them left. */
    void (*leftovers)(const char *prefix);
};

static const struct backend *be;
static char be_base[1024];
static char be_params[1024];

static void mock_setup(char *base, size_t cap, char *params, size_t pcap)
{
    snprintf(base, cap, "mock://conf-%d", (int)getpid());
    snprintf(params, pcap, "paths=2");
}

static const char *file_dir;

static void file_setup(char *base, size_t cap, char *params, size_t pcap)
{
    file_dir = t_scratch_dir("railio-conf");
    snprintf(base, cap, "file://%s", file_dir);
    params[0] = '\0';
    (void)pcap;
}

static unsigned file_count;
static int file_count_one(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)p;
    (void)st;
    (void)ftw;
    file_count += flag == FTW_F;
    return 0;
}

/* No file at all below the directory: every key is deleted, and no
 * temporary file of a PUT (published or cancelled) stayed behind. */
static void file_leftovers(const char *prefix)
{
    (void)prefix;
    file_count = 0;
    nftw(file_dir, file_count_one, 16, FTW_PHYS);
    T_EQ(file_count, 0u);
}

static struct srv_env srv;

static void railio_setup(char *base, size_t cap, char *params, size_t pcap)
{
    srv_start(&srv, NULL);
    snprintf(base, cap, "railio://%s", srv.addr[0]);
    params[0] = '\0';
    (void)pcap;
}

#define S3_BUCKET "conformance"
static const char *s3_endpoint;

static void s3_setup(char *base, size_t cap, char *params, size_t pcap)
{
    s3_endpoint = su_rgw(S3_BUCKET);
    snprintf(base, cap, "s3://" S3_BUCKET);
    snprintf(params, pcap, "endpoint=%s", s3_endpoint);
}

/* No multipart upload open in the bucket, no object (nor sidecar) left
 * under prefix. */
static void s3_leftovers(const char *prefix)
{
    char path[512];

    T_EQ(su_curl_count(s3_endpoint, S3_BUCKET "?uploads=", "<Upload>"), 0u);
    snprintf(path, sizeof(path), S3_BUCKET "?prefix=%s", prefix);
    T_EQ(su_curl_count(s3_endpoint, path, "<Key>"), 0u);
}

#ifdef RIO_HAVE_RADOS
static void rados_setup(char *base, size_t cap, char *params, size_t pcap)
{
    snprintf(base, cap, "rados://rio");
    snprintf(params, pcap, "conf=%s", t_ceph_conf());
}

/* No chunk object of any key under prefix. */
static void rados_leftovers(const char *prefix)
{
    T_EQ(ru_chunks("rio", prefix), 0u);
}
#endif

static const struct backend backends[] = {
    {"mock", "mock", 64 * T_KIB, T_PROFILE_ENGINE, mock_setup, NULL},
    {"file", "file", 64 * T_KIB, T_PROFILE_ENGINE, file_setup, file_leftovers},
    {"railio", "railio", 64 * T_KIB, T_PROFILE_TCP, railio_setup, NULL},
    {"s3", "s3", 5 * T_MIB, T_PROFILE_S3, s3_setup, s3_leftovers},
#ifdef RIO_HAVE_RADOS
    {"rados", "rados", 64 * T_KIB, T_PROFILE_RADOS, rados_setup, rados_leftovers},
#endif
};

/* In the harness process, before any case: which backend, and what the
 * program-wide peers need (radosgw on a free port for s3). */
__attribute__((constructor)) static void conf_pick(void)
{
    const char *name = getenv("T_CONF_BACKEND");

    if (!name || !*name)
        name = "mock";
    for (size_t i = 0; i < sizeof(backends) / sizeof(backends[0]); i++)
        if (strcmp(backends[i].name, name) == 0)
            be = &backends[i];
    if (be && strcmp(be->name, "s3") == 0)
        su_rgw_args();
}

/* ------------------------------------------------------------ a case's client */

struct conf {
    struct rio_client *c;
    struct rio_options o;
    uint64_t chunk;
    const char *prefix;
};

/* The backend up for this case (or the case skipped), and a client on it
 * with extra URL parameters (NULL: none). */
static void conf_open(struct conf *k, const char *prefix, const char *extra)
{
    char url[4096];

    if (!be)
        T_SKIP("T_CONF_BACKEND=%s: no such backend in this build", getenv("T_CONF_BACKEND"));
    if (!rio_has_scheme(be->scheme))
        T_SKIP("%s:// is not built in", be->scheme);
    if (!be_base[0])
        be->setup(be_base, sizeof(be_base), be_params, sizeof(be_params));
    snprintf(url, sizeof(url), "%s%s%s%s%s", be_base, be_params[0] || (extra && *extra) ? "?" : "",
             be_params, be_params[0] && extra && *extra ? "&" : "", extra ? extra : "");
    k->chunk = be->chunk;
    k->prefix = prefix;
    t_opts_sized(&k->o, be->opts, k->chunk, 4);
    k->c = t_client_new(url, &k->o);
}

static void conf_key(const struct conf *k, char *out, size_t cap, const char *name)
{
    snprintf(out, cap, "%s/%s", k->prefix, name);
}

/* The closing checks: idle, destroyed; then nothing left of the prefix. */
static void conf_close(struct conf *k)
{
    t_close(k->c, -1);
    k->c = NULL;
    if (be->leftovers)
        be->leftovers(k->prefix);
}

/* The pattern seed of an object of n bytes, so a read of any version can
 * be checked knowing only its length. */
static uint64_t size_seed(uint64_t n)
{
    return 0xc0f0000000ull + n;
}

/* ------------------------------------------------------------ round trips */

/* The descriptor of key: its name, generation, size, chunk count, every
 * chunk's xxh3 (when the backend stores them) and the MD5 of the whole
 * stream (when it keeps one). */
static void stat_check(const struct conf *k, const char *key, const uint8_t *src, uint64_t n,
                       uint64_t gen)
{
    struct rio_desc d;

    memset(&d, 0, sizeof(d));
    T_OK(rio_stat(k->c, key, &d));
    T_STREQ(d.key, key);
    T_EQ(d.size, n);
    T_EQ(d.generation, gen);
    T_EQ(d.chunk_size, k->chunk);
    T_EQ(d.nchunks, n ? (n - 1) / k->chunk + 1 : 0);
    for (uint64_t i = 0; d.xxh && i < d.nchunks; i++) {
        uint64_t off = i * k->chunk, len = n - off < k->chunk ? n - off : k->chunk;
        T_EQ(d.xxh[i], rio__xxh3(src + off, (size_t)len));
    }
    if (d.etag[0]) {
        char md5[33];

        t_md5_hex(src, n, md5);
        T_STREQ(d.etag, md5);
    }
    rio_desc_cleanup(&d);
}

/* PUT, STAT, GET byte-exact (in place, RIO_ATOMIC, rio_get_alloc) (nothing past the end written), a
 * buffer one byte short refused, DELETE, at 0, 1, chunk-1, chunk, chunk+1 and several chunks with a
 * short last one. */
TEST(roundtrip_edge_sizes)
{
    struct conf k;

    conf_open(&k, "sizes", NULL);
    const uint64_t ch = k.chunk;
    const uint64_t sizes[] = {0, 1, ch - 1, ch, ch + 1, 3 * ch + ch / 2};
    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t n = sizes[i], gen = 0;
        char key[128];
        struct rio_stats st;
        struct rio_call call = {.stats = &st};

        conf_key(&k, key, sizeof(key), "");
        snprintf(key + strlen(key), sizeof(key) - strlen(key), "%llu", (unsigned long long)n);
        uint8_t *src = t__put_pattern(k.c, key, n, size_seed(n), NULL, 1, &gen, __FILE__, __LINE__);
        T_NE(gen, 0u);
        stat_check(&k, key, src, n, gen);
        free(src);
        t__get_check(k.c, key, n, size_seed(n), &call, __FILE__, __LINE__);
        T_EQ(st.bytes, n);
        struct rio_call atomic = {.flags = RIO_ATOMIC};
        t__get_check(k.c, key, n, size_seed(n), &atomic, __FILE__, __LINE__);
        void *all = NULL;
        T_EQ(rio_get_alloc(k.c, key, &all, NULL), (int64_t)n);
        T_PATTERN(all, n, size_seed(n));
        free(all);
        if (n) {
            uint8_t *small = t_fill_buf(n, 0x5a);

            T_ERR(rio_get(k.c, key, small, n - 1, &atomic), RIO_ETOOBIG);
            T_EQ(t_count_byte(small, n, 0x5a), n);
            free(small);
        }
        T_OK(rio_delete(k.c, key));
    }
    conf_close(&k);
}

/* ------------------------------------------------------------ stat and delete */

TEST(stat_delete_missing)
{
    struct conf k;
    struct rio_desc d;
    char key[128];
    uint8_t b[16];

    conf_open(&k, "del", NULL);
    conf_key(&k, key, sizeof(key), "obj");
    memset(&d, 0, sizeof(d));
    T_ERR(rio_stat(k.c, key, &d), RIO_ENOTFOUND);
    T_ERR(rio_get(k.c, key, b, sizeof(b), NULL), RIO_ENOTFOUND);
    t_put_pattern(k.c, key, 1000, 7);
    T_OK(rio_stat(k.c, key, &d));
    T_EQ(d.size, 1000u);
    rio_desc_cleanup(&d);
    T_OK(rio_delete(k.c, key));
    T_ERR(rio_stat(k.c, key, &d), RIO_ENOTFOUND);
    T_ERR(rio_get(k.c, key, b, sizeof(b), NULL), RIO_ENOTFOUND);
    T_ERR(rio_delete(k.c, key), RIO_ENOTFOUND);
    conf_close(&k);
}

/* ------------------------------------------------------------ generations */

/* An overwrite is a new generation: seen whole by the next GET, and a GET
 * that expects the old one fails without touching its buffer. */
TEST(generation_change)
{
    struct conf k;
    char key[128];
    uint64_t g1 = 0, g2 = 0, n1, n2;

    conf_open(&k, "gen", NULL);
    n1 = 2 * k.chunk + 5;
    n2 = k.chunk + 77;
    conf_key(&k, key, sizeof(key), "obj");
    t__put_pattern(k.c, key, n1, size_seed(n1), NULL, 0, &g1, __FILE__, __LINE__);
    t__put_pattern(k.c, key, n2, size_seed(n2), NULL, 0, &g2, __FILE__, __LINE__);
    T_NE(g1, g2);

    uint8_t *b = t_fill_buf(n1, 0x5a);
    struct rio_call old = {.flags = RIO_ATOMIC, .expect_generation = g1};
    T_ERR(rio_get(k.c, key, b, n1, &old), RIO_EGENERATION);
    T_EQ(t_count_byte(b, n1, 0x5a), n1);
    free(b);

    struct rio_call cur = {.expect_generation = g2};
    t__get_check(k.c, key, n2, size_seed(n2), &cur, __FILE__, __LINE__);
    T_OK(rio_delete(k.c, key));
    conf_close(&k);
}

/*
 * Readers GET while a writer publishes versions of other sizes (several
 * chunks each): a GET returns one whole version (its length names its
 * pattern, so bytes of two generations stitched together fail the check),
 * RIO_ENOTFOUND before the first publish, or RIO_EGENERATION when the key
 * kept changing under it; with RIO_ATOMIC a failed GET leaves the buffer as
 * it was. Never a partial object.
 */
struct race {
    struct rio_client *c;
    const char *key;
    uint64_t cap;
    volatile int done;
    unsigned whole, notfound, changed;
};

static void *race_reader(void *arg)
{
    struct race *r = arg;
    uint8_t *b = t_fill_buf(r->cap, 0x5a);
    int published = 0;

    while (!r->done || !published) {
        struct rio_call call = {.flags = RIO_ATOMIC};
        int64_t got;

        memset(b, 0x5a, r->cap);
        got = rio_get(r->c, r->key, b, r->cap, &call);
        if (got >= 0) {
            int64_t bad = t_check_pattern(b, (size_t)got, size_seed((uint64_t)got));
            if (bad >= 0)
                T_FAIL("GET of %lld bytes: byte %lld is not that version's", (long long)got,
                       (long long)bad);
            published = 1;
            r->whole++;
        } else if (got == RIO_ENOTFOUND && !published) {
            r->notfound++;
        } else if (got == RIO_EGENERATION) {
            r->changed++;
        } else {
            T_FAIL("GET during the overwrites: %s", rio_errname((int)got));
        }
        if (got < 0 && t_count_byte(b, r->cap, 0x5a) != r->cap)
            T_FAIL("a failed RIO_ATOMIC GET (%s) wrote its buffer", rio_errname((int)got));
    }
    free(b);
    return NULL;
}

TEST(publish_atomic_under_readers)
{
    struct conf k, w;
    char key[128];
    struct race r;
    pthread_t th[2];
    unsigned versions = strcmp(be->name, "s3") == 0 ? 4 : 12;

    conf_open(&k, "race", NULL);
    conf_open(&w, "race", NULL);
    conf_key(&k, key, sizeof(key), "obj");
    memset(&r, 0, sizeof(r));
    r.c = k.c;
    r.key = key;
    r.cap = 5 * k.chunk;
    for (unsigned i = 0; i < 2; i++)
        T_EQ(pthread_create(&th[i], NULL, race_reader, &r), 0);
    for (unsigned v = 0; v < versions; v++) {
        uint64_t n = 2 * k.chunk + (v % 3) * k.chunk + 101 * v + 1;
        t_put_pattern(w.c, key, n, size_seed(n));
    }
    r.done = 1;
    for (unsigned i = 0; i < 2; i++)
        T_EQ(pthread_join(th[i], NULL), 0);
    fprintf(stderr, "  %u whole versions read, %u not yet published, %u generation changes\n",
            r.whole, r.notfound, r.changed);
    T_GT(r.whole, 0u);
    T_OK(rio_delete(w.c, key));
    t_close(w.c, -1);
    conf_close(&k);
}

/* ------------------------------------------------------------ cancel and the fence */

struct cancel_job {
    struct rio_client *c;
    const char *key;
    uint8_t *buf;
    uint64_t n;
    int put;
    struct rio_cancel *cx;
    int64_t result;
};

static void *cancel_job_main(void *arg)
{
    struct cancel_job *j = arg;
    struct rio_call call = {.cancel = j->cx};

    if (j->put)
        j->result = rio_put(j->c, j->key, j->buf, j->n, &call, NULL);
    else
        j->result = rio_get(j->c, j->key, j->buf, j->n, &call);
    return NULL;
}

/* Run a GET or PUT of j on a thread, fire the cancel after delay_ms, wait
 * for the call: it returns (complete, or RIO_ECANCELED). */
static void cancel_run(struct cancel_job *j, unsigned delay_ms)
{
    pthread_t th;

    T_OK(rio_cancel_new(&j->cx));
    T_EQ(pthread_create(&th, NULL, cancel_job_main, j), 0);
    t_sleep_ms(delay_ms);
    rio_cancel_fire(j->cx);
    T_EQ(pthread_join(th, NULL), 0);
    rio_cancel_destroy(j->cx);
    j->cx = NULL;
    if (j->result != RIO_ECANCELED && j->result != (j->put ? 0 : (int64_t)j->n))
        T_FAIL("cancelled %s: %lld %s", j->put ? "PUT" : "GET", (long long)j->result,
               j->result < 0 ? rio_errname((int)j->result) : "");
}

/*
 * A cancelled GET returns and its buffer is not written afterwards (the
 * fence); a cancelled PUT publishes all of the new version or nothing of
 * it, and leaves no upload behind; the client serves the next call.
 */
TEST(cancel_and_fence)
{
    struct conf k;
    char key[128];
    struct cancel_job j;
    unsigned cancelled = 0;

    conf_open(&k, "cancel", strcmp(be->name, "mock") == 0 ? "rate=2M" : NULL);
    conf_key(&k, key, sizeof(key), "obj");
    const uint64_t n = 3 * k.chunk + 333;
    const uint64_t n2 = 3 * k.chunk + 444;
    t_put_pattern(k.c, key, n, size_seed(n));

    for (unsigned delay = 0; delay <= 20; delay += 5) {
        memset(&j, 0, sizeof(j));
        j.c = k.c;
        j.key = key;
        j.n = n;
        j.buf = t_fill_buf(n, 0);
        cancel_run(&j, delay);
        cancelled += j.result == RIO_ECANCELED;
        memset(j.buf, 0x5a, n);
        t_sleep_ms(50);
        T_EQ(t_count_byte(j.buf, n, 0x5a), n);
        free(j.buf);
        t_idle(k.c);
    }
    for (unsigned delay = 0; delay <= 20; delay += 10) {
        memset(&j, 0, sizeof(j));
        j.c = k.c;
        j.key = key;
        j.put = 1;
        j.n = n2;
        j.buf = t_pattern_buf(n2, size_seed(n2));
        cancel_run(&j, delay);
        cancelled += j.result == RIO_ECANCELED;
        free(j.buf);
        t_idle(k.c);
        /* The old version or the new one, whole. */
        uint8_t *b = t_fill_buf(n2, 0);
        int64_t got = rio_get(k.c, key, b, n2, NULL);
        T_TRUE(got == (int64_t)n || got == (int64_t)n2);
        T_PATTERN(b, (size_t)got, size_seed((uint64_t)got));
        free(b);
    }
    fprintf(stderr, "  %u of 8 calls cancelled in flight\n", cancelled);
    T_OK(rio_delete(k.c, key));
    conf_close(&k);
}
