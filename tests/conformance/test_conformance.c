/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport contract, once, against any backend: the same cases run on
 * mock://, file://, railio://, s3:// (against radosgw, and as s3gw against
 * railiod's own S3 gateway) and rados:// (as rados-index, over a pool
 * given a key index first: its listings come from the index). ctest runs this program
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
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../integration/gw_util.h"
#include "core/checksum.h"
#include "core/internal.h"
#include "core/url.h"
#include "railio_mock.h"
#include "s3_util.h"
#include "server_env.h"
#include "t.h"
#include "tlib.h"
#include "transport/transport.h"
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

/* railio-disk: railiod with its disk tier (--data-dir), whose commit
 * threads decide conditions. */
static void railio_disk_setup(char *base, size_t cap, char *params, size_t pcap)
{
    static char dir[256];
    const char *args[] = {"--data-dir", dir, NULL};

    snprintf(dir, sizeof(dir), "%s", t_scratch_dir("confdisk"));
    srv_start(&srv, args);
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

/* s3:// against railiod's own S3 gateway (over its memory store), which
 * decides If-None-Match and If-Match: conditional=on. */
static char gw_endpoint[96];

static void s3gw_setup(char *base, size_t cap, char *params, size_t pcap)
{
    static const char *const args[] = {"--s3-listen", "127.0.0.1:0", "--s3-anonymous", NULL};

    gw_need();
    srv_start(&srv, args);
    T_TRUE(srv.s3[0] != '\0');
    snprintf(gw_endpoint, sizeof(gw_endpoint), "http://%s", srv.s3);
    T_EQ(t_sh("curl -sf -X PUT %s/" S3_BUCKET " >/dev/null", gw_endpoint), 0);
    snprintf(base, cap, "s3://" S3_BUCKET);
    snprintf(params, pcap, "endpoint=%s&unsigned=1&conditional=on", gw_endpoint);
}

/* Unsigned requests: the gateway takes them (--s3-anonymous). */
static void s3gw_leftovers(const char *prefix)
{
    T_EQ(t_sh("curl -sf '%s/" S3_BUCKET "?uploads=' > /dev/null && "
              "! curl -s '%s/" S3_BUCKET "?uploads=' | grep -q '<Upload>'",
              gw_endpoint, gw_endpoint),
         0);
    T_EQ(t_sh("curl -sf '%s/" S3_BUCKET "?prefix=%s' > /dev/null && "
              "! curl -s '%s/" S3_BUCKET "?prefix=%s' | grep -q '<Key>'",
              gw_endpoint, prefix, gw_endpoint, prefix),
         0);
}

#ifdef RIO_HAVE_RADOS
static void rados_setup(char *base, size_t cap, char *params, size_t pcap)
{
    snprintf(base, cap, "rados://rio");
    snprintf(params, pcap, "conf=%s", t_ceph_conf());
}

/* rados-index: the same pool given a key index (docs/rados.md "The key
 * index") before the case (each case runs in a process of its own: the
 * first builds it, the others find it ready): every listing comes from it. */
static void rados_index_setup(char *base, size_t cap, char *params, size_t pcap)
{
    char url[1024], marker[64] = "";
    struct rio_client *c;
    struct rio_options o;
    struct rio_fsck_report r;

    rados_setup(base, cap, params, pcap);
    rio_options_init(&o);
    snprintf(url, sizeof(url), "%s?%s&index_recheck=20ms&abort_timeout=1&timeout=1", base, params);
    T_OK(rio_client_new(url, &o, &c));
    T_OK(rio_fsck(c, &(struct rio_fsck_args){.flags = RIO_FSCK_INDEX}, &r));
    rio_client_destroy(c);
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    T_EQ(rados_ioctx_create(cl, "rio", &io), 0);
    rados_ioctx_set_namespace(io, "rio.index");
    T_GT(rados_read(io, "index", marker, sizeof(marker) - 1, 0), 0);
    T_TRUE(strstr(marker, "state ready\n") != NULL);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
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
    {"railio-disk", "railio", 64 * T_KIB, T_PROFILE_TCP, railio_disk_setup, NULL},
    {"s3", "s3", 5 * T_MIB, T_PROFILE_S3, s3_setup, s3_leftovers},
    {"s3gw", "s3", 5 * T_MIB, T_PROFILE_S3, s3gw_setup, s3gw_leftovers},
#ifdef RIO_HAVE_RADOS
    {"rados", "rados", 64 * T_KIB, T_PROFILE_RADOS, rados_setup, rados_leftovers},
    {"rados-index", "rados", 64 * T_KIB, T_PROFILE_RADOS, rados_index_setup, rados_leftovers},
#endif
};

/* In the harness process, before any case: which backend, and what the
 * program-wide peers need (radosgw on a free port for s3). */
__attribute__((constructor)) static void conf_pick(void)
{
    const char *name = getenv("T_CONF_BACKEND");

    /* railiod's log (railio, railio-disk, s3gw) in a file, shown after a
     * failed case's message (srv_at_exit): on stderr, every case's log came
     * first, and a CI excerpt of the head of the output showed the first
     * case's log and not the failure. */
    setenv("SRV_LOG_FILE", "1", 0);
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
static char conf_url[4096]; /* the URL of the last conf_open */

static void conf_open(struct conf *k, const char *prefix, const char *extra)
{
    char *url = conf_url;
    size_t cap = sizeof(conf_url);

    if (!be)
        T_SKIP("T_CONF_BACKEND=%s: no such backend in this build", getenv("T_CONF_BACKEND"));
    if (!rio_has_scheme(be->scheme))
        T_SKIP("%s:// is not built in", be->scheme);
    if (!be_base[0])
        be->setup(be_base, sizeof(be_base), be_params, sizeof(be_params));
    snprintf(url, cap, "%s%s%s%s%s", be_base, be_params[0] || (extra && *extra) ? "?" : "",
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
        t_desc_check(k.c, key, src, n, gen, k.chunk, 0);
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

/* ------------------------------------------------------------ streams of unknown size */

/* A writer of unknown size (RIO_SIZE_UNKNOWN, what `railio put` of a pipe and
 * the S3 gateway's chunked and POST uploads open), fed in pieces of an odd
 * length: the object is the bytes written, at 0, 1, chunk-1, chunk, chunk+1
 * and several chunks with a short last one; an aborted one leaves nothing
 * (the closing check) and the key as it was. */
TEST(stream_unknown_size)
{
    struct conf k;

    conf_open(&k, "stream", NULL);
    const uint64_t ch = k.chunk;
    const uint64_t sizes[] = {0, 1, ch - 1, ch, ch + 1, 3 * ch + ch / 2};
    const size_t piece_len = (size_t)(ch / 3 + 7);
    uint8_t *piece = t_fill_buf(piece_len, 0);
    char key[128];

    for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint64_t n = sizes[i];
        struct rio_writer *w = NULL;
        struct rio_desc d;

        conf_key(&k, key, sizeof(key), "");
        snprintf(key + strlen(key), sizeof(key) - strlen(key), "%llu", (unsigned long long)n);
        T_OK(rio_writer_open(k.c, key, RIO_SIZE_UNKNOWN, 0, NULL, &w));
        for (uint64_t off = 0; off < n;) {
            size_t m = n - off < piece_len ? (size_t)(n - off) : piece_len;
            t_fill_pattern_at(piece, m, size_seed(n), off);
            T_OK(rio_writer_write(w, piece, m));
            off += m;
        }
        memset(&d, 0, sizeof(d));
        T_OK(rio_writer_close(w, &d));
        T_EQ(d.size, n);
        rio_desc_cleanup(&d);
        memset(&d, 0, sizeof(d));
        T_OK(rio_stat(k.c, key, &d));
        T_EQ(d.size, n);
        rio_desc_cleanup(&d);
        t__get_check(k.c, key, n, size_seed(n), NULL, __FILE__, __LINE__);
        if (i + 1 < sizeof(sizes) / sizeof(sizes[0]))
            T_OK(rio_delete(k.c, key));
    }
    /* Aborted over the last one, after more than a chunk went: the object
     * stays as it was. */
    const uint64_t last = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
    struct rio_writer *w = NULL;
    T_OK(rio_writer_open(k.c, key, RIO_SIZE_UNKNOWN, 0, NULL, &w));
    memset(piece, 0xa5, piece_len);
    for (int j = 0; j < 4; j++)
        T_OK(rio_writer_write(w, piece, piece_len));
    rio_writer_abort(w);
    t__get_check(k.c, key, last, size_seed(last), NULL, __FILE__, __LINE__);
    T_OK(rio_delete(k.c, key));
    conf_close(&k);
    free(piece);
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

/* ------------------------------------------------------------ conditional PUTs */

struct cond_racer {
    struct rio_client *c;
    const char *key;
    uint64_t n;
    int ret;
};

static void *cond_race_main(void *arg)
{
    struct cond_racer *r = arg;
    uint8_t *b = t_pattern_buf(r->n, size_seed(r->n));
    struct rio_call call = {.flags = RIO_IF_ABSENT};
    r->ret = rio_put(r->c, r->key, b, r->n, &call, NULL);
    free(b);
    return NULL;
}

/* RIO_IF_ABSENT and a PUT's expect_generation: where the backend decides
 * them (mock://, railio://, rados://, file://, and s3:// with conditional=on
 * against a server that decides them, railiod's gateway here) a PUT that does not meet its
 * condition fails (RIO_EGENERATION) and leaves the object as it was, through rio_put and a writer;
 * of four racing RIO_IF_ABSENT PUTs of an absent key exactly one wins. Elsewhere (s3:// by default
 * against radosgw) such a PUT is RIO_ENOTSUP and writes nothing. Flags the library does not know,
 * or both conditions, are RIO_EINVAL. */
TEST(conditional_put)
{
    struct conf k;
    char key[128];
    uint64_t g1 = 0, g2 = 0, n1, n2;
    struct rio_writer *w = NULL;
    struct rio_desc d;

    conf_open(&k, "cond", NULL);
    int absent_ok = strcmp(be->name, "s3") != 0;
    int gen_ok = absent_ok;
    n1 = 2 * k.chunk + 5;
    n2 = k.chunk + 77;
    conf_key(&k, key, sizeof(key), "obj");
    uint8_t *b1 = t_pattern_buf(n1, size_seed(n1)), *b2 = t_pattern_buf(n2, size_seed(n2));
    struct rio_call absent = {.flags = RIO_IF_ABSENT};

    struct rio_call bad = {.flags = 0x80};
    T_ERR(rio_put(k.c, key, b1, n1, &bad, NULL), RIO_EINVAL);
    T_ERR(rio_get(k.c, key, b1, n1, &bad), RIO_EINVAL);
    struct rio_call both = {.flags = RIO_IF_ABSENT, .expect_generation = 5};
    T_ERR(rio_put(k.c, key, b1, n1, &both, NULL), RIO_EINVAL);
    T_ERR(rio_writer_open(k.c, key, n1, 0, &both, &w), RIO_EINVAL);
    memset(&d, 0, sizeof(d));
    T_ERR(rio_stat(k.c, key, &d), RIO_ENOTFOUND);

    if (!absent_ok) {
        T_ERR(rio_put(k.c, key, b1, n1, &absent, NULL), RIO_ENOTSUP);
        T_ERR(rio_writer_open(k.c, key, n1, 0, &absent, &w), RIO_ENOTSUP);
        struct rio_call on_gen = {.expect_generation = 1};
        T_ERR(rio_put(k.c, key, b1, n1, &on_gen, NULL), RIO_ENOTSUP);
        T_ERR(rio_stat(k.c, key, &d), RIO_ENOTFOUND);
        free(b1);
        free(b2);
        conf_close(&k);
        return;
    }
    /* Absent: written. Present: refused, through rio_put and a writer. */
    t__put_pattern(k.c, key, n1, size_seed(n1), &absent, 0, &g1, __FILE__, __LINE__);
    T_ERR(rio_put(k.c, key, b2, n2, &absent, NULL), RIO_EGENERATION);
    T_OK(rio_writer_open(k.c, key, n2, 0, &absent, &w));
    T_OK(rio_writer_write(w, b2, n2));
    T_ERR(rio_writer_close(w, NULL), RIO_EGENERATION);
    T_OK(rio_stat(k.c, key, &d));
    T_EQ(d.generation, g1);
    rio_desc_cleanup(&d);
    t_get_check(k.c, key, n1, size_seed(n1));

    struct rio_call on_g1 = {.expect_generation = g1};
    if (gen_ok) {
        /* On the generation it holds: written; on one it no longer holds,
         * or on a key gone: refused. */
        t__put_pattern(k.c, key, n2, size_seed(n2), &on_g1, 0, &g2, __FILE__, __LINE__);
        T_NE(g2, g1);
        T_ERR(rio_put(k.c, key, b1, n1, &on_g1, NULL), RIO_EGENERATION);
        /* Refused at the close, or at the open: s3:// matches a generation
         * by the ETag it kept for it, and one its table (a cache) no
         * longer holds is asked with one HEAD at the open, which already
         * sees another generation (CI and a loaded run here). */
        int wret = rio_writer_open(k.c, key, n1, 0, &on_g1, &w);
        if (wret == 0) {
            T_OK(rio_writer_write(w, b1, n1));
            T_ERR(rio_writer_close(w, NULL), RIO_EGENERATION);
        } else {
            T_ERR(wret, RIO_EGENERATION);
        }
        t_get_check(k.c, key, n2, size_seed(n2));
        T_OK(rio_delete(k.c, key));
        struct rio_call on_g2 = {.expect_generation = g2};
        T_ERR(rio_put(k.c, key, b1, n1, &on_g2, NULL), RIO_EGENERATION);
        T_ERR(rio_stat(k.c, key, &d), RIO_ENOTFOUND);
    } else {
        T_ERR(rio_put(k.c, key, b2, n2, &on_g1, NULL), RIO_ENOTSUP);
        t_get_check(k.c, key, n1, size_seed(n1));
        T_OK(rio_delete(k.c, key));
    }

    /* Four at once on an absent key: one wins, its bytes whole. */
    struct cond_racer rc[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        rc[i] = (struct cond_racer){.c = k.c, .key = key, .n = n1 + (uint64_t)i};
        T_EQ(pthread_create(&th[i], NULL, cond_race_main, &rc[i]), 0);
    }
    int won = -1, wins = 0;
    for (int i = 0; i < 4; i++) {
        T_EQ(pthread_join(th[i], NULL), 0);
        if (rc[i].ret == 0) {
            won = i;
            wins++;
        } else {
            T_EQ(rc[i].ret, RIO_EGENERATION);
        }
    }
    T_EQ(wins, 1);
    t_get_check(k.c, key, rc[won].n, size_seed(rc[won].n));
    /* A batch's PUTs, each decided alone. */
    char key2[128];
    conf_key(&k, key2, sizeof(key2), "obj2");
    struct rio_op ops[2] = {{.type = RIO_OP_PUT, .key = key, .buf = b1, .len = n1},
                            {.type = RIO_OP_PUT, .key = key2, .buf = b2, .len = n2}};
    T_EQ(rio_batch(k.c, ops, 2, &absent), 1);
    T_EQ(ops[0].result, RIO_EGENERATION);
    T_EQ(ops[1].result, 0);
    t_get_check(k.c, key, rc[won].n, size_seed(rc[won].n));
    t_get_check(k.c, key2, n2, size_seed(n2));
    T_OK(rio_delete(k.c, key2));
    T_OK(rio_delete(k.c, key));
    free(b1);
    free(b2);
    conf_close(&k);
}

/* rio_delete_if: where the backend decides it (mock://, railio://, rados://, file://, and
 * s3:// with conditional=on against a server that decides If-Match on DELETE, railiod's
 * gateway here) a
 * generation the key no longer holds is RIO_EGENERATION with the object
 * left whole, the one it holds removes it, none is RIO_ENOTFOUND;
 * elsewhere RIO_ENOTSUP with the object left. Generation 0 is RIO_EINVAL. */
TEST(conditional_delete)
{
    struct conf k;
    char key[128];
    uint64_t g1 = 0, g2 = 0, n = 0;
    struct rio_desc d;

    conf_open(&k, "cdel", NULL);
    int ok = !strcmp(be->name, "mock") || !strcmp(be->scheme, "rados") ||
             !strcmp(be->scheme, "railio") || !strcmp(be->name, "file") ||
             !strcmp(be->name, "s3gw");
    n = k.chunk + 3;
    conf_key(&k, key, sizeof(key), "obj");
    t__put_pattern(k.c, key, n, size_seed(n), NULL, 0, &g1, __FILE__, __LINE__);
    t__put_pattern(k.c, key, n, size_seed(n), NULL, 0, &g2, __FILE__, __LINE__);
    T_ERR(rio_delete_if(k.c, key, 0), RIO_EINVAL);
    if (!ok) {
        T_ERR(rio_delete_if(k.c, key, g2), RIO_ENOTSUP);
        t_get_check(k.c, key, n, size_seed(n));
        T_OK(rio_delete(k.c, key));
        conf_close(&k);
        return;
    }
    T_ERR(rio_delete_if(k.c, key, g1), RIO_EGENERATION);
    t_get_check(k.c, key, n, size_seed(n));
    T_OK(rio_delete_if(k.c, key, g2));
    memset(&d, 0, sizeof(d));
    T_ERR(rio_stat(k.c, key, &d), RIO_ENOTFOUND);
    T_ERR(rio_delete_if(k.c, key, g2), RIO_ENOTFOUND);
    conf_close(&k);
}

/* Read-modify-write on a generation, from several threads at once: each
 * reads the counter and its generation and writes the counter plus one on
 * that generation, again when refused. Where the backend decides the
 * condition with the publish, no increment is lost: the counter ends at
 * the number of PUTs that succeeded. A backend that checked before it
 * published would let two writers of one generation both succeed, and the
 * count fall short. */
struct counter {
    struct rio_client *c;
    const char *key;
    unsigned done, refused;
    int err;
};

static void *counter_main(void *arg)
{
    struct counter *x = arg;

    while (x->done < 8 && !x->err) {
        uint64_t v = 0;
        struct rio_desc d;
        memset(&d, 0, sizeof(d));
        int r = rio_stat(x->c, x->key, &d);
        struct rio_call at = {.expect_generation = d.generation};
        if (r == 0)
            r = rio_get(x->c, x->key, &v, sizeof(v), &at);
        rio_desc_cleanup(&d);
        if (r == RIO_EGENERATION || r == RIO_ENOTFOUND) {
            x->refused++;
            continue; /* replaced between the stat and the GET */
        }
        if (r < 0) {
            x->err = r;
            break;
        }
        v++;
        r = rio_put(x->c, x->key, &v, sizeof(v), &at, NULL);
        if (r == 0)
            x->done++;
        else if (r == RIO_EGENERATION)
            x->refused++;
        else
            x->err = r;
    }
    return NULL;
}

TEST(conditional_counter)
{
    struct conf k;
    char key[128];
    uint64_t v = 0;
    struct counter x[4];
    pthread_t th[4];

    conf_open(&k, "ctr", NULL);
    if (!strcmp(be->name, "s3")) {
        conf_close(&k);
        T_SKIP("s3:// against radosgw does not decide a PUT's generation");
    }
    conf_key(&k, key, sizeof(key), "counter");
    T_OK(rio_put(k.c, key, &v, sizeof(v), NULL, NULL));
    for (int i = 0; i < 4; i++) {
        x[i] = (struct counter){.c = k.c, .key = key};
        T_EQ(pthread_create(&th[i], NULL, counter_main, &x[i]), 0);
    }
    unsigned refused = 0;
    for (int i = 0; i < 4; i++) {
        T_EQ(pthread_join(th[i], NULL), 0);
        T_EQ(x[i].err, 0);
        T_EQ(x[i].done, 8);
        refused += x[i].refused;
    }
    T_OK(rio_get(k.c, key, &v, sizeof(v), NULL));
    T_EQ(v, 32); /* every increment that succeeded, none lost */
    T_OK(rio_delete(k.c, key));
    conf_close(&k);
    (void)refused;
}

/* A read from an offset (rio_reader_open_at): the bytes from it on, byte-exact,
 * at 0, inside a chunk, on a chunk boundary, at the size; past the size
 * refused; only the chunks from the one holding the offset fetched; a
 * replaced object fails RIO_EGENERATION when the old generation is expected. */
TEST(ranged_read)
{
    struct conf k;
    char key[128];
    uint64_t gen = 0;

    conf_open(&k, "range", NULL);
    const uint64_t ch = k.chunk, n = 3 * ch + ch / 2;
    conf_key(&k, key, sizeof(key), "obj");
    uint8_t *src = t__put_pattern(k.c, key, n, size_seed(n), NULL, 1, &gen, __FILE__, __LINE__);
    uint8_t *dst = malloc(n + 1);
    T_NOTNULL(dst);
    const uint64_t offs[] = {0, 1, ch - 1, ch, 2 * ch + 3, n - 1, n};
    for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
        struct rio_stats st;
        struct rio_call call = {.stats = &st, .expect_generation = gen};
        struct rio_reader *rd;
        uint64_t off = offs[i], got = 0;
        T_OK(rio_reader_open_at(k.c, key, off, 2, &call, &rd));
        for (;;) {
            int64_t r = rio_reader_read(rd, dst + got, (size_t)(n + 1 - got));
            T_GE(r, 0);
            if (r == 0)
                break;
            got += (uint64_t)r;
        }
        T_EQ(rio_reader_close(rd), 0);
        T_EQ(got, n - off);
        T_MEMEQ(dst, src + off, n - off);
        T_EQ(st.bytes, off == n ? 0 : n - off / ch * ch);
    }
    struct rio_reader *rd;
    T_ERR(rio_reader_open_at(k.c, key, n + 1, 0, NULL, &rd), RIO_EINVAL);
    free(t__put_pattern(k.c, key, n, size_seed(n) + 1, NULL, 1, NULL, __FILE__, __LINE__));
    struct rio_call old = {.expect_generation = gen};
    T_ERR(rio_reader_open_at(k.c, key, ch, 0, &old, &rd), RIO_EGENERATION);
    free(dst);
    free(src);
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
    atomic_int done;
    atomic_uint whole, notfound, changed; /* both readers count */
};

static void *race_reader(void *arg)
{
    struct race *r = arg;
    uint8_t *b = t_fill_buf(r->cap, 0x5a);
    int published = 0;

    while (!atomic_load(&r->done) || !published) {
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
    unsigned versions = strcmp(be->scheme, "s3") == 0 ? 4 : 12;

    /* The readers' chunks take 5 ms more: PUTs land in the middle of GETs. */
    conf_open(&k, "race", "faults=delay:op=read:delay=5ms");
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
    atomic_store(&r.done, 1);
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

    /* Every op takes 20 ms more: the cancels land while ops are in flight. */
    conf_open(&k, "cancel", "faults=delay:delay=20ms");
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

/* ------------------------------------------------------------ faults */

enum { F_GET, F_PUT };
enum {
    FC_MOCK = 1,        /* the mock's store only (genchange) */
    FC_STORE_CHECK = 2, /* a backend that does not check what it stores may keep the flipped
                           bytes: the next GET is RIO_ECHECKSUM, never those bytes */
};

/*
 * Every fault class of the filter (include/railio_mock.h), on a GET or a
 * PUT of several chunks. fail: the call must fail with it (a fatal error);
 * may_fail: it may fail with it (a transient metadata error the engine need
 * not hide), else it succeeds with verified data. Either way no wrong byte
 * is ever returned, a failed PUT publishes nothing, and the client is idle.
 */
static const struct fault_case {
    const char *name;
    const char *spec;
    int op;
    int fail, may_fail;
    unsigned flags;
} fault_cases[] = {
    {"disconnect", "disconnect:op=read:count=1:bytes=1000:down=20ms", F_GET, 0, 0, 0},
    {"short_read", "short:op=read:chunk=1:count=1:bytes=100", F_GET, 0, 0, 0},
    {"short_write", "short:op=write:chunk=1:count=1:bytes=100", F_PUT, 0, 0, 0},
    {"bitflip_read", "bitflip:op=read:chunk=2:count=1", F_GET, 0, 0, 0},
    {"bitflip_write", "bitflip:op=write:chunk=1:count=1", F_PUT, 0, 0, FC_STORE_CHECK},
    {"stall", "stall:op=read:count=1", F_GET, 0, 0, 0},
    {"error_server", "error:op=read:chunk=1:count=2:error=RIO_ESERVER", F_GET, 0, 0, 0},
    {"error_timeout_write", "error:op=write:chunk=1:count=1:error=ETIMEDOUT", F_PUT, 0, 0, 0},
    {"error_fatal_read", "error:op=read:chunk=1:error=EACCES", F_GET, -EACCES, 0, 0},
    {"error_fatal_write", "error:op=write:chunk=1:error=EACCES", F_PUT, -EACCES, 0, 0},
    {"late", "late:op=read:count=1:delay=30ms", F_GET, 0, 0, 0},
    {"genchange", "genchange:chunk=2:count=1", F_GET, 0, 0, FC_MOCK},
    {"delay", "delay:delay=30ms:count=4", F_GET, 0, 0, 0},
    {"meta_lookup", "meta_error:op=lookup:count=1:error=RIO_ESERVER", F_GET, 0, RIO_ESERVER, 0},
    {"meta_commit", "meta_error:op=put_commit:count=1:error=RIO_ESERVER", F_PUT, 0, RIO_ESERVER, 0},
    {"meta_fatal", "meta_error:op=lookup:error=EACCES", F_GET, -EACCES, 0, 0},
};

/* key holds the version of n bytes (pattern size_seed(n)) whole; with
 * may_refuse, RIO_ECHECKSUM is allowed instead (then the key is deleted). */
static void expect_whole(struct conf *k, const char *key, uint64_t n, int may_refuse)
{
    uint8_t *b = t_fill_buf(n + 1, 0xA5);
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t got = rio_get(k->c, key, b, n + 1, &call);

    if ((got == RIO_ECHECKSUM || got == RIO_ERETRIES) && may_refuse) {
        /* Every try failed its chunk's check: the flipped bytes never leave. */
        fprintf(stderr, "    the stored flipped bytes are refused: %s, %llu checksum retries\n",
                rio_errname((int)got), (unsigned long long)st.retries[RIO_CLASS_CHECKSUM]);
        T_GE(st.retries[RIO_CLASS_CHECKSUM], 1u);
        T_OK(rio_delete(k->c, key));
    } else {
        if (got != (int64_t)n)
            T_FAIL("GET after the fault: %lld %s, want %llu bytes", (long long)got,
                   got < 0 ? rio_errname((int)got) : "", (unsigned long long)n);
        T_PATTERN(b, n, size_seed(n));
    }
    free(b);
}

/* b (n bytes) is the object key holds now: its size and every chunk's xxh3. */
static void xxh_check(struct conf *k, const char *key, const uint8_t *b, uint64_t n)
{
    struct rio_desc d;

    memset(&d, 0, sizeof(d));
    T_OK(rio_stat(k->c, key, &d));
    T_EQ(d.size, n);
    T_NOTNULL(d.xxh);
    for (uint64_t i = 0; i < d.nchunks; i++) {
        uint64_t off = i * d.chunk_size, len = n - off < d.chunk_size ? n - off : d.chunk_size;
        T_EQ(d.xxh[i], rio__xxh3(b + off, (size_t)len));
    }
    rio_desc_cleanup(&d);
}

TEST(fault_classes)
{
    struct conf k;
    char key[128];

    conf_open(&k, "faults", "faults=");
    conf_key(&k, key, sizeof(key), "obj");
    rio_client_destroy(k.c);
    k.o.op_timeout_ms = strcmp(be->scheme, "s3") == 0 ? 3000 : 1000;
    k.o.retry_attempts = 4;
    {
        char url[4096];

        snprintf(url, sizeof(url), "%s?%s%sfaults=", be_base, be_params, be_params[0] ? "&" : "");
        k.c = t_client_new(url, &k.o);
    }
    const uint64_t n0 = 3 * k.chunk + 77, n1 = 3 * k.chunk + 99;

    for (size_t i = 0; i < sizeof(fault_cases) / sizeof(fault_cases[0]); i++) {
        const struct fault_case *f = &fault_cases[i];
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        uint64_t now = n0;
        int64_t ret;

        if ((f->flags & FC_MOCK) && strcmp(be->name, "mock") != 0)
            continue;
        rio_mock_faults_clear(k.c);
        rio_mock_heal(k.c);
        t_put_pattern(k.c, key, n0, size_seed(n0));
        uint64_t fired0 = t_faults_fired(k.c);
        t_fault(k.c, f->spec);
        uint64_t t0 = t_now_ms();
        if (f->op == F_GET) {
            uint8_t *b = t_fill_buf(n0, 0xA5);
            ret = rio_get(k.c, key, b, n0, &call);
            if (ret >= 0 && (f->flags & FC_MOCK))
                xxh_check(&k, key, b, (uint64_t)ret); /* the replacement, whole */
            else if (ret >= 0) {
                T_EQ(ret, (int64_t)n0);
                T_PATTERN(b, n0, size_seed(n0));
            }
            free(b);
        } else {
            uint8_t *src = t_pattern_buf(n1, size_seed(n1));
            ret = rio_put(k.c, key, src, n1, &call, NULL);
            free(src);
            if (ret == 0)
                now = n1;
        }
        uint64_t fired = t_faults_fired(k.c) - fired0;
        fprintf(stderr, "  %-20s %-6s %s in %llu ms, %llu retries, %llu fired\n", f->name,
                ret >= 0 ? "ok" : "failed", ret >= 0 ? "" : rio_errname((int)ret),
                (unsigned long long)(t_now_ms() - t0), (unsigned long long)st.retries_total,
                (unsigned long long)fired);
        if (f->fail)
            T_ERR(ret, f->fail);
        else if (ret < 0 && !(f->may_fail && ret == f->may_fail))
            T_FAIL("%s (%s): %s", f->name, f->spec, rio_errname((int)ret));
        T_GE(fired, 1u);
        rio_mock_faults_clear(k.c);
        rio_mock_heal(k.c);
        t_idle(k.c);
        /* A failed PUT published nothing: the old version is there whole. */
        if (!(f->flags & FC_MOCK))
            expect_whole(&k, key, now, (f->flags & FC_STORE_CHECK) != 0);
    }
    rio_delete(k.c, key);
    conf_close(&k);
}

/* ------------------------------------------------------------ keys */

/* ------------------------------------------------------------ listing */

/* rio_list on the backend: RIO_ENOTSUP skips the case (a backend whose
 * list is not there yet); anything else must succeed. */
static void list_or_skip(struct conf *k, const struct rio_list_args *a, struct rio_list_page *p)
{
    int ret = rio_list(k->c, a, p, NULL);
    if (ret == RIO_ENOTSUP) {
        conf_close(k);
        T_SKIP("%s:// does not list (%s)", be->name, rio_error_detail());
    }
    T_OK(ret);
}

/* The keys of every page of a listing under prefix, max per page, joined
 * with ','; a backend that lists in its own order (rados) gets its keys
 * sorted first, the others are checked in byte order page by page. */
static int str_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static char *conf_list(struct conf *k, const char *prefix, const char *after, unsigned max,
                       unsigned flags, bool *ordered)
{
    struct rio_list_args a = {
        .prefix = prefix, .start_after = after, .max_keys = max, .flags = flags};
    struct rio_list_page p;
    char token[RIO_LIST_TOKEN_MAX + 1] = "";
    char **keys = NULL, *s;
    size_t n = 0, len = 1;
    unsigned pages = 0;

    *ordered = !rio__t_has_cap(rio__client_transport(k->c), RIO_CAP_LIST_UNORDERED) ||
               strcmp(be->name, "rados-index") == 0; /* the index lists in byte order */
    for (;;) {
        a.token = token;
        list_or_skip(k, &a, &p);
        T_LE(p.n, max);
        for (unsigned i = 0; i < p.n; i++) {
            const struct rio_entry *e = &p.entries[i];
            T_EQ(strncmp(e->key, prefix, strlen(prefix)), 0);
            if (*ordered && n)
                T_GT(strcmp(e->key, keys[n - 1]), 0);
            if (e->flags & RIO_ENTRY_DIR)
                T_EQ(e->key[strlen(e->key) - 1], '/');
            keys = realloc(keys, (n + 1) * sizeof(*keys));
            keys[n++] = strdup(e->key);
            len += strlen(e->key) + 1;
        }
        memcpy(token, p.next_token, sizeof(token));
        rio_list_page_cleanup(&p);
        T_LT(++pages, 10000u);
        if (!token[0])
            break;
    }
    if (!*ordered && n > 1)
        qsort(keys, n, sizeof(*keys), str_cmp);
    s = calloc(1, len);
    for (size_t i = 0; i < n; i++) {
        /* A backend in its own order folds each page alone: a common
         * prefix may come again on a later page. */
        bool again = !*ordered && (flags & RIO_LIST_DELIM) && i && !strcmp(keys[i], keys[i - 1]);
        if (!again) {
            strcat(s, keys[i]);
            strcat(s, ",");
        }
    }
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    return s;
}

/* Keys under a prefix, paged, with start_after, RIO_LIST_DELIM (the
 * engine's or the backend's own) and what an entry says of its object. */
TEST(list_prefix_pages_delim)
{
    static const char *const names[] = {"a",    "b/1",  "b/2",  "c",    "d/e/f", "p/00", "p/01",
                                        "p/02", "p/03", "p/04", "p/05", "p/06",  "p/07", "z"};
    const size_t nn = sizeof(names) / sizeof(names[0]);
    struct rio_list_args a = {.prefix = "lst/"};
    struct rio_list_page p;
    struct conf k;
    char key[128], want[1024] = "";
    bool ordered;

    conf_open(&k, "lst", NULL);
    list_or_skip(&k, &a, &p); /* nothing yet */
    T_EQ(p.n, 0u);
    T_STREQ(p.next_token, "");
    rio_list_page_cleanup(&p);
    for (size_t i = 0; i < nn; i++) {
        conf_key(&k, key, sizeof(key), names[i]);
        t_put_pattern(k.c, key, 100 + i, 40 + i);
        strcat(want, key);
        strcat(want, ",");
    }
    /* A sibling prefix that must not show: "lst" is a prefix of "lstx/". */
    t_put_pattern(k.c, "lstx/q", 10, 1);

    for (unsigned max = 1; max <= 15; max += 7) {
        char *s = conf_list(&k, "lst/", NULL, max, 0, &ordered);
        T_STREQ(s, want);
        free(s);
    }
    char *s = conf_list(&k, "lst/p/", NULL, 3, 0, &ordered);
    T_STREQ(s, "lst/p/00,lst/p/01,lst/p/02,lst/p/03,lst/p/04,lst/p/05,lst/p/06,lst/p/07,");
    free(s);
    if (ordered) {
        s = conf_list(&k, "lst/", "lst/p/05", 2, 0, &ordered);
        T_STREQ(s, "lst/p/06,lst/p/07,lst/z,");
        free(s);
    }
    a.flags = RIO_LIST_DELIM;
    if (rio_list(k.c, &a, &p, NULL) != RIO_ENOTSUP) {
        rio_list_page_cleanup(&p);
        for (unsigned max = 1; max <= 7; max += 3) {
            s = conf_list(&k, "lst/", NULL, max, RIO_LIST_DELIM, &ordered);
            T_STREQ(s, "lst/a,lst/b/,lst/c,lst/d/,lst/p/,lst/z,");
            free(s);
        }
    }

    /* An entry: its size, and its generation where the listing knows it. */
    a = (struct rio_list_args){.prefix = "lst/c"};
    T_OK(rio_list(k.c, &a, &p, NULL));
    T_EQ(p.n, 1u);
    struct rio_desc d;
    T_OK(rio_stat(k.c, "lst/c", &d));
    T_EQ(p.entries[0].size, d.size);
    T_EQ(p.entries[0].flags, 0u);
    if (p.entries[0].generation)
        T_EQ(p.entries[0].generation, d.generation);
    if (p.entries[0].etag[0])
        T_STREQ(p.entries[0].etag, d.etag);
    rio_desc_cleanup(&d);
    rio_list_page_cleanup(&p);

    for (size_t i = 0; i < nn; i++) {
        conf_key(&k, key, sizeof(key), names[i]);
        T_OK(rio_delete(k.c, key));
    }
    T_OK(rio_delete(k.c, "lstx/q"));
    s = conf_list(&k, "lst", NULL, 5, 0, &ordered);
    T_STREQ(s, "");
    free(s);
    conf_close(&k);
}

/* How many of a batch exist and the run of hits from the first; a missing
 * key is 0, not an error. */
TEST(exists_batch)
{
    struct conf k;
    char k0[64], k1[64], k2[64], no[64];
    uint8_t ex[5];
    unsigned hits = 9;

    conf_open(&k, "ex", NULL);
    conf_key(&k, k0, sizeof(k0), "k0");
    conf_key(&k, k1, sizeof(k1), "k1");
    conf_key(&k, k2, sizeof(k2), "k2");
    conf_key(&k, no, sizeof(no), "none");
    const char *keys[] = {k0, k1, no, k2, no};
    T_EQ(rio_exists_batch(k.c, keys, 5, ex, &hits, NULL), 0);
    T_EQ(hits, 0u);
    t_put_pattern(k.c, k0, 10, 1);
    t_put_pattern(k.c, k1, 0, 2);
    t_put_pattern(k.c, k2, k.chunk + 1, 3);
    T_EQ(rio_exists_batch(k.c, keys, 5, ex, &hits, NULL), 3);
    T_EQ(hits, 2u);
    const uint8_t want[5] = {1, 1, 0, 1, 0};
    T_MEMEQ(ex, want, 5);
    T_OK(rio_delete(k.c, k0));
    T_EQ(rio_exists_batch(k.c, keys, 5, NULL, &hits, NULL), 2);
    T_EQ(hits, 0u);
    T_OK(rio_delete(k.c, k1));
    T_OK(rio_delete(k.c, k2));
    conf_close(&k);
}

/* The one key rule (core/key.h), the same on every backend: "" and a key
 * of RIO_KEY_MAX + 1 bytes are RIO_EINVAL from the client and from the
 * transport itself (lookup, put_open, remove, before any I/O); a key of
 * RIO_KEY_MAX bytes round-trips on mock, file and railio (file:// with
 * components under NAME_MAX; S3 names a sidecar after the key, so its keys
 * are shorter by the suffix). */
TEST(key_rule_same_everywhere)
{
    static char big[RIO_KEY_MAX + 2], max[RIO_KEY_MAX + 1];
    const char *bad[] = {"", big};
    const struct rio_transport_ops *ops;
    struct rio_transport *t = NULL;
    struct rio_desc d;
    struct rio_url u;
    struct conf k;
    uint8_t b[16] = {0};

    conf_open(&k, "keys", NULL);
    memset(big, 'k', RIO_KEY_MAX + 1);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        memset(&d, 0, sizeof(d));
        T_ERR(rio_stat(k.c, bad[i], &d), RIO_EINVAL);
        T_ERR(rio_put(k.c, bad[i], b, sizeof(b), NULL, NULL), RIO_EINVAL);
        T_ERR(rio_get(k.c, bad[i], b, sizeof(b), NULL), RIO_EINVAL);
        T_ERR(rio_delete(k.c, bad[i]), RIO_EINVAL);
    }
    T_OK(rio__url_parse(conf_url, &u));
    ops = rio__transport_find(u.scheme);
    T_TRUE(ops != NULL);
    T_OK(rio__t_open(ops, &u, &k.o, &t));
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        void *up = NULL;

        memset(&d, 0, sizeof(d));
        T_ERR(rio__t_lookup(t, bad[i], &d), RIO_EINVAL);
        T_ERR(rio__t_put_open(t, bad[i], sizeof(b), k.chunk, &up), RIO_EINVAL);
        T_TRUE(up == NULL);
        T_ERR(rio__t_remove(t, bad[i]), RIO_EINVAL);
    }
    rio__t_close(t);
    rio__url_cleanup(&u);
    if (strcmp(be->scheme, "s3") != 0 && strcmp(be->scheme, "rados") != 0) {
        /* "keys/" then components of 200 bytes: RIO_KEY_MAX in all */
        size_t n = (size_t)snprintf(max, sizeof(max), "%s/", k.prefix);
        for (; n < RIO_KEY_MAX; n++)
            max[n] = (n + 1) % 201 == 0 && n + 1 < RIO_KEY_MAX ? '/' : 'm';
        max[RIO_KEY_MAX] = '\0';
        t_put_pattern(k.c, max, 1000, 11);
        t_get_check(k.c, max, 1000, 11);
        T_OK(rio_delete(k.c, max));
    }
    conf_close(&k);
}
