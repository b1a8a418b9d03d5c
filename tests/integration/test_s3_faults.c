/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3:// and http:// against tests/harness/s3fault.py, a scripted server that
 * misbehaves on request: every fault ends byte-exact (after retries) or in a
 * clean error, never with a byte outside the destination (the ASan build
 * runs these too), never with a chunk of another generation, never with a
 * multipart upload left behind; cancel and deadline end calls in bounded time.
 */
/* T_TIMEOUT 120 */
/* T_LABELS net */
#include "t.h"

#ifndef RIO_HAVE_CURL
TEST(s3_not_built)
{
    T_SKIP("built without libcurl (RIO_WITH_CURL)");
}
#else

#include <pthread.h>
#include <stdbool.h>
#include <sys/resource.h>

#include "cli_util.h"
#include "core/engine.h"
#include "core/internal.h"
#include "core/url.h"
#include "s3_util.h"
#include "transport/transport.h"

#define CH (64 * SU_KIB)
#define OBJ (16 * CH + 777) /* 17 chunks, the last one short */

/* The fault server checks no signature: every client here sends requests
 * unsigned (without keys, s3:// otherwise refuses to open: RIO_ENOCREDS). */
__attribute__((constructor)) static void unsigned_requests(void)
{
    setenv("RIO_S3_UNSIGNED", "1", 1);
}

/* A client on the fault server: unsigned, 64 KiB parts allowed, a 1 s stall
 * timeout so a silent server is given up quickly. */
static struct rio_client *fault_client(const struct rio_options *o, const char *extra)
{
    char url[512];

    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    /* An extra stall= replaces the 1 s (an option given twice is refused;
     * it was first-wins, and "stall=30s" ran with 1 s). */
    bool own_stall = extra && (!strncmp(extra, "stall=", 6) || strstr(extra, "&stall="));
    snprintf(url, sizeof(url), "s3://fb?endpoint=http://127.0.0.1:%d&min_part=0%s%s%s",
             su_fault_port(), own_stall ? "" : "&stall=1s", extra && *extra ? "&" : "",
             extra ? extra : "");
    return su_client(url, o);
}

/* A test's usual end: src and dst freed, c idle, destroyed, and nothing
 * left allocated since alloc0. */
#define close_free(c, alloc0, src, dst)                                                            \
    do {                                                                                           \
        free(src);                                                                                 \
        free(dst);                                                                                 \
        su_close((c), (alloc0));                                                                   \
    } while (0)

/* Its allocation count (for su_close) and the default options (CH parts,
 * depth 4). */
static void opts_start(struct rio_options *o, int64_t *alloc0)
{
    *alloc0 = rio__alloc_outstanding();
    su_opts(o, CH, 4);
}

/* A test's usual start: its allocation count (for su_close) and a fault
 * client with the default options (CH parts, depth 4) and extra. */
static struct rio_client *fault_start(int64_t *alloc0, const char *extra)
{
    struct rio_options o;

    opts_start(&o, alloc0);
    return fault_client(&o, extra);
}

struct piece_src {
    const uint8_t *p;
    size_t n, off;
};

/* A fill callback handing out a pipe-like 10000 bytes at a time. */
static int64_t piece_fill(void *arg, void *buf, size_t cap)
{
    struct piece_src *s = arg;
    size_t k = s->n - s->off;

    if (k > cap)
        k = cap;
    if (k > 10000)
        k = 10000;
    memcpy(buf, s->p + s->off, k);
    s->off += k;
    return (int64_t)k;
}

/* A PUT of n bytes of src under key (a stream of unknown size from ps when
 * ps is not NULL) through faults of kind what succeeds: the fault server
 * fired at least twice (the sidecar's key carries the fault too: its PUT is
 * retried as well) and left no upload. */
static void put_through_faults(struct rio_client *c, const char *what, const char *key,
                               const uint8_t *src, size_t n, struct piece_src *ps,
                               struct rio_stats *st, struct rio_desc *d)
{
    struct rio_call call_ = {.stats = st}, *call = &call_;
    unsigned f0, f1, up;
    int ret;

    su_fault_stats(su_fault_port(), &f0, &up);
    if (ps)
        ret = rio_put_stream(c, key, RIO_SIZE_UNKNOWN, 0, piece_fill, ps, call, d);
    else
        ret = rio_put(c, key, src, n, call, d);
    if (ret != 0)
        T_FAIL("%s: %s: %s", what, ps ? "rio_put_stream" : "rio_put", rio_errname(ret));
    su_fault_stats(su_fault_port(), &f1, &up);
    T_GE(f1 - f0, 2u);
    T_EQ(up, 0u);
}

/* A client with options o on url_fmt, its %d the port. */
static struct rio_client *client_at(const struct rio_options *o, const char *url_fmt, int port)
{
    char url[256];

    T_LT(snprintf(url, sizeof(url), url_fmt, port), (int)sizeof(url));
    return su_client(url, o);
}

/* As fault_client, returning the error instead of failing. */
static struct rio_client *fault_client_try(const struct rio_options *o, int *ret)
{
    char url[512];
    struct rio_client *c = NULL;

    snprintf(url, sizeof(url), "s3://fb?endpoint=http://127.0.0.1:%d&min_part=0&stall=1s",
             su_fault_port());
    *ret = rio_client_new(url, o, &c);
    return c;
}

/* How many multipart uploads the fault server still holds (none after a
 * PUT that ended, whether it succeeded or not). */
static unsigned uploads_left(int port)
{
    unsigned fired, up;

    su_fault_stats(port, &fired, &up);
    return up;
}

/* PUT the pattern under key (faults off for PUT unless the key asks). */
static uint8_t *put_pattern(struct rio_client *c, const char *key, size_t n, uint64_t seed)
{
    uint8_t *src = su_pattern(n, seed);
    int ret = rio_put(c, key, src, n, NULL, NULL);

    if (ret != 0)
        T_FAIL("rio_put(%s): %s", key, rio_errname(ret));
    return src;
}

/* n pattern bytes of seed written under key by a client of its own (options
 * o; idle, then destroyed: su_close with alloc0); *dst a buffer of n bytes.
 * Returns the bytes written. */
static uint8_t *prewrite(const struct rio_options *o, int64_t alloc0, const char *key, size_t n,
                         uint64_t seed, uint8_t **dst)
{
    struct rio_client *w = fault_client(o, NULL);
    uint8_t *src = put_pattern(w, key, n, seed);

    su_close(w, alloc0);
    *dst = malloc(n);
    T_NOTNULL(*dst);
    return src;
}

/*
 * One GET fault, fired `count` times: the GET still returns the object
 * byte-exact, after at least `seen` retries of the expected class, and the
 * server says the fault fired. extra: URL options of the reading client
 * (NULL: none), which also name the key, so each is a fault of its own.
 */
static void get_survives_with(const char *kind, unsigned count, int cls, unsigned seen,
                              const char *extra)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    char key[128];
    unsigned fired0, fired1, up;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    o.retry_attempts = count + 3;
    /* Written by another client, so the reader starts with no connection:
     * curl resends by itself (once) a request whose reused connection dies
     * without an answer, which would hide that fault from the engine. */
    snprintf(key, sizeof(key), "F_%s_%u/obj%s%s", kind, count, extra ? "-" : "",
             extra ? extra : "");
    uint8_t *dst, *src = prewrite(&o, -1, key, OBJ, count, &dst);
    struct rio_client *c = fault_client(&o, extra);
    memset(dst, 0xA5, OBJ);
    su_fault_stats(su_fault_port(), &fired0, &up);
    int64_t got = rio_get(c, key, dst, OBJ, &call);
    if (got != (int64_t)OBJ)
        T_FAIL("%s: rio_get: %" PRId64 " %s", kind, got, got < 0 ? rio_errname((int)got) : "");
    t__memeq(__FILE__, __LINE__, kind, "the object", dst, src, OBJ);
    su_fault_stats(su_fault_port(), &fired1, &up);
    if (fired1 - fired0 != count)
        T_FAIL("%s: the fault fired %u times, want %u", kind, fired1 - fired0, count);
    if (st.retries[cls] < seen)
        T_FAIL("%s: %" PRIu64 " retries of class %s, want >= %u (total %" PRIu64 ")", kind,
               st.retries[cls], rio_class_name(cls), seen, st.retries_total);
    close_free(c, alloc0, src, dst);
}

static void get_survives_n(const char *kind, unsigned count, int cls, unsigned seen)
{
    get_survives_with(kind, count, cls, seen, NULL);
}

static void get_survives(const char *kind, unsigned count, int cls)
{
    get_survives_n(kind, count, cls, count);
}

/* A fault the server fires count times (its kind and count are in the key),
 * the class the engine counts its retries in and how many it must see at
 * least, and the object's size. */
struct fault_case {
    const char *kind;
    unsigned count;
    int cls;
    unsigned seen;
    size_t n;
};

/*
 * Each GET fault, fired count times, is survived after as many retries of
 * its class; a failure names the fault. curl itself sends a request again,
 * once, when a reused connection closes without an answer, so of two silent
 * closes ("nothing") only the second reaches the engine.
 */
TEST(get_faults_retry)
{
    static const struct fault_case cases[] = {
        {"trunc", 2, RIO_CLASS_SHORT, 2, OBJ},
        {"reset", 2, RIO_CLASS_RESET, 2, OBJ},
        {"nothing", 2, RIO_CLASS_RESET, 1, OBJ},
        {"stall", 1, RIO_CLASS_TIMEOUT, 1, OBJ},
        {"503", 3, RIO_CLASS_SERVER, 3, OBJ},
        {"slowdown", 2, RIO_CLASS_THROTTLE, 2, OBJ},
        {"429", 2, RIO_CLASS_THROTTLE, 2, OBJ},
        {"200", 2, RIO_CLASS_SERVER, 2, OBJ}, /* whole object */
        {"norange", 2, RIO_CLASS_SERVER, 2, OBJ},
        {"badrange", 2, RIO_CLASS_SERVER, 2, OBJ},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        get_survives_n(cases[i].kind, cases[i].count, cases[i].cls, cases[i].seen);
}

/*
 * A bit flipped in a range's body: only the chunk's xxh3 can see it. By
 * default the transport hashes the body as it stores it and the engine
 * compares that hash (rio_io.xxh_got); with nt_copy=1 (stores that bypass
 * the cache) the engine reads the chunk back itself. Either way the chunk
 * fails RIO_ECHECKSUM, is read again, and the GET returns the right bytes.
 */
TEST(get_bitflip_caught_by_the_chunk_hash)
{
    get_survives_with("getflip", 2, RIO_CLASS_CHECKSUM, 2, NULL);
    get_survives_with("getflip", 2, RIO_CLASS_CHECKSUM, 2, "nt_copy=1");
}

/* 100 bytes more than the range: the body callback refuses the excess (the
 * ASan build would catch a single byte written past the chunk). */
TEST(overrun_is_refused_and_retried)
{
    get_survives("overrun", 2, RIO_CLASS_SERVER);
}

/*
 * The same faults every time: the GET fails cleanly (retries exhausted or
 * no path left), in bounded time, the caller's buffer untouched under
 * RIO_ATOMIC, nothing in flight.
 */
TEST(persistent_faults_fail_cleanly)
{
    static const char *const kinds[] = {"503", "trunc", "overrun", "200", "norange"};
    struct rio_options o;
    char key[64];
    int64_t alloc0;

    opts_start(&o, &alloc0);
    o.retry_attempts = 3;
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *dst = malloc(OBJ);
    T_NOTNULL(dst);
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        struct rio_call call = {.flags = RIO_ATOMIC};
        snprintf(key, sizeof(key), "F_%s_0/obj", kinds[i]);
        uint8_t *src = put_pattern(c, key, OBJ, 40 + i);
        memset(dst, 0xA5, OBJ);
        uint64_t t0 = su_now_ms();
        int64_t got = rio_get(c, key, dst, OBJ, &call);
        if (got != RIO_ERETRIES && got != RIO_ENOPATH)
            T_FAIL("%s: rio_get: %" PRId64 " (%s), want a clean failure", kinds[i], got,
                   got < 0 ? rio_errname((int)got) : "bytes");
        T_LT(su_now_ms() - t0, 20000u);
        for (size_t k = 0; k < OBJ; k++)
            if (dst[k] != 0xA5)
                T_FAIL("%s: RIO_ATOMIC buffer touched at %zu", kinds[i], k);
        su_idle(c);
        free(src);
    }
    free(dst);
    su_close(c, alloc0);
}

/*
 * The object is replaced under a read that names its generation: the
 * ranges sent with If-Match get 412 and the GET fails with RIO_EGENERATION; no chunk of the new
 * bytes is stitched in (RIO_ATOMIC: the buffer is untouched). The object was written by plain HTTP
 * (not railio), so no checksums help: If-Match alone does it. A new GET then reads the new
 * generation whole.
 */
TEST(etag_change_mid_read_is_a_generation_error)
{
    char cmd[1024], path[700];
    int port = su_fault_port();
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 77), *dst = malloc(n);
    struct rio_desc d1, d2;

    T_NOTNULL(dst);
    snprintf(path, sizeof(path), "%s/etag.src", su_dir);
    t_write_file(path, src, n);
    snprintf(cmd, sizeof(cmd),
             "curl -s -f -m 10 -o /dev/null -T '%s' http://127.0.0.1:%d/fb/F_etag_1/plain", path,
             port);
    T_EQ(system(cmd), 0);

    struct rio_client *c = fault_start(&alloc0, NULL);
    T_OK(rio_stat(c, "F_etag_1/plain", &d1));
    T_NULL(d1.xxh);
    T_EQ(d1.chunk_size, 0u);
    char md5[33];
    su_md5(src, n, md5);
    T_STREQ(d1.etag, md5);
    memset(dst, 0xA5, n);
    /* Named: a GET that names no generation is planned again (client.c). */
    struct rio_call call = {.flags = RIO_ATOMIC, .expect_generation = d1.generation};
    T_ERR(rio_get(c, "F_etag_1/plain", dst, n, &call), RIO_EGENERATION);
    for (size_t k = 0; k < n; k++)
        if (dst[k] != 0xA5)
            T_FAIL("buffer touched at %zu", k);
    su_idle(c);

    /* The new generation, whole: every byte is the old one XOR 0x5A. */
    T_OK(rio_stat(c, "F_etag_1/plain", &d2));
    T_NE(d2.generation, d1.generation);
    T_EQ(rio_get(c, "F_etag_1/plain", dst, n, NULL), (int64_t)n);
    for (size_t k = 0; k < n; k++)
        if (dst[k] != (src[k] ^ 0x5A))
            T_FAIL("byte %zu is not of the new generation", k);
    /* A read that names the old generation is refused before any byte moves. */
    call.expect_generation = d1.generation;
    T_ERR(rio_get(c, "F_etag_1/plain", dst, n, &call), RIO_EGENERATION);
    rio_desc_cleanup(&d1);
    rio_desc_cleanup(&d2);
    free(src);
    free(dst);
    unlink(path);
    su_close(c, alloc0);
}

/* PUT faults: parts (and single objects) that fail are sent again; the
 * object that lands is byte-exact. */
TEST(put_faults_retry)
{
    /* seen: retries the engine must see; curl resends an upload by itself
     * (rewinding it) when a reused connection is reset under it. */
    static const struct fault_case cases[] = {
        {"put503", 2, RIO_CLASS_SERVER, 2, OBJ},
        {"putreset", 2, RIO_CLASS_RESET, 0, OBJ},
        {"putdigest", 2, RIO_CLASS_CHECKSUM, 2, OBJ},
        {"putetag", 2, RIO_CLASS_CHECKSUM, 2, OBJ},  /* the streamed MD5 sees it */
        {"put503", 2, RIO_CLASS_SERVER, 2, 1000},    /* a single PutObject */
        {"putetag", 2, RIO_CLASS_CHECKSUM, 2, 1000}, /* idem */
    };
    char key[64];
    int64_t alloc0;

    struct rio_client *c = fault_start(&alloc0, NULL);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rio_stats st;
        snprintf(key, sizeof(key), "F_%s_%u/obj%zu", cases[i].kind, cases[i].count, i);
        uint8_t *src = su_pattern(cases[i].n, 90 + i), *dst = malloc(cases[i].n);
        T_NOTNULL(dst);
        put_through_faults(c, cases[i].kind, key, src, cases[i].n, NULL, &st, NULL);
        if (st.retries[cases[i].cls] < cases[i].seen)
            T_FAIL("%s: %" PRIu64 " retries of class %s", cases[i].kind, st.retries[cases[i].cls],
                   rio_class_name(cases[i].cls));
        T_EQ(rio_get(c, key, dst, cases[i].n, NULL), (int64_t)cases[i].n);
        T_MEMEQ(dst, src, cases[i].n);
        free(src);
        free(dst);
    }
    su_close(c, alloc0);
}

/* The three ways of checking a part: MD5 while sending (default, checked
 * against the part's ETag), Content-MD5 up front (the server checks), none.
 * Each round-trips; the first two catch a part "damaged in flight". */
TEST(part_check_modes)
{
    static const char *const modes[] = {"content_md5=verify", "content_md5=header",
                                        "content_md5=off"};
    struct rio_options o;
    char key[64];
    int64_t alloc0;

    opts_start(&o, &alloc0);
    o.etag = RIO_ETAG_MD5; /* a multipart object's etag is its stream MD5 */
    for (unsigned m = 0; m < 3; m++) {
        struct rio_client *c = fault_client(&o, modes[m]);
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        struct rio_desc d;
        char md5[33];
        uint8_t *src = su_pattern(OBJ, 60 + m), *dst = malloc(OBJ);
        T_NOTNULL(dst);
        su_md5(src, OBJ, md5);
        for (unsigned single = 0; single < 2; single++) {
            size_t n = single ? 1000 : OBJ;
            snprintf(key, sizeof(key), "F_putetag_1/mode%u-%u", m, single);
            int ret = rio_put(c, key, src, n, &call, NULL);
            if (m < 2) {
                if (ret != 0)
                    T_FAIL("%s: rio_put: %s", modes[m], rio_errname(ret));
                T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
            } else if (ret != 0 && ret != RIO_EPROTO) {
                /* Unchecked, the bad ETag goes into the complete, which the
                 * server refuses (InvalidPart); a single PUT just lands. */
                T_FAIL("%s: rio_put: %s", modes[m], rio_errname(ret));
            }
            if (ret == 0) {
                T_EQ(rio_get(c, key, dst, n, NULL), (int64_t)n);
                T_MEMEQ(dst, src, n);
                T_OK(rio_stat(c, key, &d));
                if (!single)
                    T_STREQ(d.etag, md5);
                rio_desc_cleanup(&d);
            }
        }
        free(src);
        free(dst);
        rio_client_destroy(c);
    }
    T_EQ(rio__alloc_outstanding(), alloc0);
}

/* A PUT of OBJ pattern bytes of seed under key (a stream of unknown size
 * if stream) whose parts fail for good (two tries) ends with the error; no
 * multipart upload is left on the server and the key does not appear. */
static void put_fails_leaving_nothing(const char *key, int stream, uint64_t seed)
{
    struct rio_options o;
    int port = su_fault_port();
    struct rio_desc d;
    int64_t alloc0;
    int ret;

    opts_start(&o, &alloc0);
    o.retry_attempts = 2;
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = su_pattern(OBJ, seed);
    if (stream) {
        struct piece_src ps = {src, OBJ, 0};
        ret = rio_put_stream(c, key, RIO_SIZE_UNKNOWN, 0, piece_fill, &ps, NULL, NULL);
    } else {
        ret = rio_put(c, key, src, OBJ, NULL, NULL);
    }
    fprintf(stderr, "%s: %d\n", key, ret);
    T_TRUE(ret == RIO_ERETRIES || ret == RIO_ESERVER);
    su_idle(c);
    T_EQ(uploads_left(port), 0u);
    T_ERR(rio_stat(c, key, &d), RIO_ENOTFOUND);
    free(src);
    su_close(c, alloc0);
}

/* A PUT that cannot succeed fails cleanly: no multipart upload is left on
 * the server and the key does not appear. */
TEST(failed_put_leaves_nothing)
{
    put_fails_leaving_nothing("F_put503_0/never", 0, 5);
}

/* Chunks under S3's 5 MiB part rule (the default min_part): the engine
 * raises the PUT's chunk to the transport's minimum instead of sending parts
 * the server would refuse at the end. */
TEST(small_parts_raised_to_min_part)
{
    struct rio_options o;
    unsigned fired, up;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    struct rio_client *c = client_at(&o, "s3://fb?endpoint=http://127.0.0.1:%d", su_fault_port());
    uint8_t *src = su_pattern(OBJ, 6);
    T_OK(rio_put(c, "small/parts", src, OBJ, NULL, NULL));
    struct rio_desc d;
    T_OK(rio_stat(c, "small/parts", &d));
    T_GE(d.chunk_size, 5 * SU_MIB);
    rio_desc_cleanup(&d);
    /* One chunk is a single PutObject: no part rule. */
    T_OK(rio_put(c, "small/one", src, CH, NULL, NULL));
    su_fault_stats(su_fault_port(), &fired, &up);
    T_EQ(up, 0u);
    free(src);
    su_close(c, alloc0);
}

/* ------------------------------------------------- streaming PUT */

/* Part faults in a stream of unknown size are retried like a sized PUT's
 * (a 503, a part "damaged in flight" seen by its MD5); the object lands
 * byte-exact and no upload is left. */
TEST(stream_put_faults_retry)
{
    static const struct {
        const char *kind;
        int cls;
    } cases[] = {{"put503", RIO_CLASS_SERVER}, {"putetag", RIO_CLASS_CHECKSUM}};
    char key[64];
    int64_t alloc0;

    struct rio_client *c = fault_start(&alloc0, "etag=md5");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rio_stats st;
        struct rio_desc d;
        char md5[33];
        uint8_t *src = su_pattern(OBJ, 1500 + i), *dst = malloc(OBJ);
        struct piece_src ps = {src, OBJ, 0};
        T_NOTNULL(dst);
        su_md5(src, OBJ, md5);
        snprintf(key, sizeof(key), "F_%s_2/stream%zu", cases[i].kind, i);
        put_through_faults(c, cases[i].kind, key, src, OBJ, &ps, &st, &d);
        T_GE(st.retries[cases[i].cls], 2u);
        T_EQ(d.size, (uint64_t)OBJ);
        T_EQ(d.nchunks, 17u);
        T_STREQ(d.etag, md5);
        rio_desc_cleanup(&d);
        T_EQ(rio_get(c, key, dst, OBJ, NULL), (int64_t)OBJ);
        T_MEMEQ(dst, src, OBJ);
        T_OK(rio_stat(c, key, &d));
        T_EQ(d.chunk_size, CH);
        T_NOTNULL(d.xxh);
        T_STREQ(d.etag, md5);
        rio_desc_cleanup(&d);
        free(src);
        free(dst);
    }
    su_close(c, alloc0);
}

/* A stream whose parts fail for good ends with the error, its upload
 * aborted and the key absent. */
TEST(stream_failed_part_leaves_nothing)
{
    put_fails_leaving_nothing("F_put503_0/stream", 1, 1600);
}

/* Without the stream MD5 (etag=none) every kind of PUT lands, sized or
 * streamed, of 0, 1 or many parts, in each part check mode: the descriptor
 * has no etag (a multipart object's sidecar says "md5 -"), the checksums
 * are all there, and the bytes round-trip. */
TEST(etag_none_puts)
{
    static const size_t sizes[] = {0, 1000, OBJ};
    static const char *const modes[] = {"etag=none", "etag=none&content_md5=header"};
    struct rio_options o;
    char key[64];
    int64_t alloc0;
    uint8_t *src = su_pattern(OBJ, 1800), *dst = malloc(OBJ + 1);

    T_NOTNULL(dst);
    opts_start(&o, &alloc0);
    for (size_t m = 0; m < 2; m++) {
        struct rio_client *c = fault_client(&o, modes[m]);
        for (size_t i = 0; i < 3; i++) {
            for (int stream = 0; stream < 2; stream++) {
                size_t n = sizes[i];
                struct rio_desc d;
                struct piece_src ps = {src, n, 0};
                snprintf(key, sizeof(key), "noetag/%zu-%zu-%d", m, n, stream);
                memset(&d, 0, sizeof(d));
                int ret =
                    stream ? rio_put_stream(c, key, RIO_SIZE_UNKNOWN, 0, piece_fill, &ps, NULL, &d)
                           : rio_put(c, key, src, n, NULL, &d);
                if (ret != 0)
                    T_FAIL("%s %s %zu: %s", modes[m], stream ? "stream" : "put", n,
                           rio_errname(ret));
                /* One PutObject checked by MD5: that MD5 is its etag, as
                 * its ETag says to a lookup; none otherwise. */
                char md5[33];
                su_md5(src, n, md5);
                if (stream || n == 0 || n > CH)
                    T_STREQ(d.etag, "");
                else if (d.etag[0])
                    T_STREQ(d.etag, md5);
                rio_desc_cleanup(&d);
                T_OK(rio_stat(c, key, &d));
                T_EQ(d.size, (uint64_t)n);
                if (n > CH) {
                    T_STREQ(d.etag, "");
                    T_NOTNULL(d.xxh);
                }
                rio_desc_cleanup(&d);
                T_EQ(rio_get(c, key, dst, OBJ + 1, NULL), (int64_t)n);
                T_MEMEQ(dst, src, n);
                T_OK(rio_delete(c, key));
            }
        }
        rio_client_destroy(c);
    }
    free(src);
    free(dst);
    T_EQ(rio__alloc_outstanding(), alloc0);
}

struct bare {
    const struct rio_transport_ops *ops;
    struct rio_transport *t;
    struct rio_url u;
};

static void bare_complete(struct rio_io *io)
{
    *(int *)io->engine_priv = 1;
}

/* One WRITE of part index idx (len bytes of src at index * CH), submitted
 * and reaped to its end. Returns its result, or the submit's error. */
static int64_t bare_write(struct bare *b, void *up, uint64_t idx, uint64_t off, const uint8_t *src,
                          uint64_t len)
{
    int done = 0;
    struct rio_io io = {.kind = RIO_IO_WRITE,
                        .key = "bare/obj",
                        .upload = up,
                        .index = idx,
                        .off = off,
                        .len = len,
                        .src = src,
                        .xxh = rio__xxh3(src, (size_t)len),
                        .complete = bare_complete,
                        .engine_priv = &done};
    int ret = b->ops->submit(b->t, &io);
    if (ret < 0)
        return ret;
    uint64_t t0 = su_now_ms();
    while (!done && su_now_ms() - t0 < 20000)
        b->ops->reap(b->t, 100);
    if (!done)
        T_FAIL("part %" PRIu64 " did not complete", idx);
    return io.res;
}

/* Commit a stream of `size` bytes of src (chunks of CH). */
static int bare_commit(struct bare *b, void *up, const uint8_t *src, uint64_t size)
{
    struct rio_desc d;
    uint64_t n = size ? (size - 1) / CH + 1 : 0;
    uint64_t x[64];
    char md5[33];

    memset(&d, 0, sizeof(d));
    snprintf(d.key, sizeof(d.key), "bare/obj");
    for (uint64_t i = 0; i < n && i < 64; i++)
        x[i] = rio__xxh3(src + i * CH, (size_t)(size - i * CH < CH ? size - i * CH : CH));
    su_md5(src, (size_t)size, md5);
    memcpy(d.etag, md5, sizeof(md5));
    d.size = size;
    d.chunk_size = CH;
    d.nchunks = n;
    d.xxh = n ? x : NULL;
    return b->ops->put_commit(b->t, up, &d);
}

/*
 * The transport's side of RIO_CAP_STREAM_PUT, driven by hand: parts in any
 * order before the size is known complete as parts 1..n; a commit whose
 * geometry does not match what was sent (a part past the end, a part
 * missing, a short part that is not the last) is refused and its upload
 * aborted; parts of the wrong shape are refused at submit; an empty stream
 * is an empty object. The fault server says no upload is ever left.
 */
TEST(stream_transport_contract)
{
    const size_t max = 4 * CH;
    struct bare b;
    struct rio_options o;
    char url[256];
    unsigned fired, ups;
    int port = su_fault_port();
    void *up = NULL;
    struct rio_desc d;
    uint8_t *src = su_pattern(max, 1700);
    int64_t alloc0 = rio__alloc_outstanding();

    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    snprintf(url, sizeof(url), "s3://fb?endpoint=http://127.0.0.1:%d&min_part=0", port);
    su_opts(&o, CH, 2);
    o.paths = 1;
    b.ops = rio__transport_find("s3");
    T_NOTNULL(b.ops);
    T_NE(b.ops->caps & RIO_CAP_STREAM_PUT, 0u);
    T_EQ(rio__transport_find("http")->caps & RIO_CAP_STREAM_PUT, 0u);
    T_OK(rio__url_parse(url, &b.u));
    T_OK(b.ops->open(&b.u, &o, &b.t));

    /* Out of order, the short last part first: byte-exact. */
    T_OK(b.ops->put_open(b.t, "bare/obj", RIO_SIZE_UNKNOWN, CH, &up));
    T_EQ(bare_write(&b, up, 2, 2 * CH, src + 2 * CH, 777), 777);
    T_EQ(bare_write(&b, up, 0, 0, src, CH), (int64_t)CH);
    T_EQ(bare_write(&b, up, 1, CH, src + CH, CH), (int64_t)CH);
    T_OK(bare_commit(&b, up, src, 2 * CH + 777));
    T_OK(b.ops->lookup(b.t, "bare/obj", &d));
    T_EQ(d.size, 2 * CH + 777);
    T_EQ(d.nchunks, 3u);
    T_NOTNULL(d.xxh);
    T_EQ(d.xxh[2], rio__xxh3(src + 2 * CH, 777));
    rio_desc_cleanup(&d);

    /* Refused commits: the object stays as it was, no upload is left. */
    static const struct {
        uint64_t nparts;  /* parts 0..nparts-1 sent, whole */
        int64_t skip;     /* a part not sent */
        int64_t short_at; /* a part sent with 100 bytes */
        uint64_t commit;  /* the size the commit says */
    } bad[] = {
        {3, -1, -1, 2 * CH},      /* a part past the end */
        {3, 1, -1, 3 * CH},       /* a part missing */
        {3, -1, 0, 2 * CH + 100}, /* the short part is not the last */
        {3, -1, 2, 3 * CH},       /* the last is shorter than the size says */
        {3, -1, -1, 3 * CH + 1},  /* the size names a part never sent */
        {1, -1, -1, 0},           /* "empty", but a part was sent */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T_OK(b.ops->put_open(b.t, "bare/obj", RIO_SIZE_UNKNOWN, CH, &up));
        for (uint64_t k = 0; k < bad[i].nparts; k++) {
            uint64_t len = (int64_t)k == bad[i].short_at ? 100 : CH;
            if ((int64_t)k != bad[i].skip)
                T_EQ(bare_write(&b, up, k, k * CH, src + k * CH, len), (int64_t)len);
        }
        int ret = bare_commit(&b, up, src, bad[i].commit);
        if (ret != RIO_EPROTO)
            T_FAIL("bad commit %zu: %s, want RIO_EPROTO", i, rio_errname(ret));
        su_fault_stats(port, &fired, &ups);
        T_EQ(ups, 0u);
        T_OK(b.ops->lookup(b.t, "bare/obj", &d));
        T_EQ(d.size, 2 * CH + 777);
        rio_desc_cleanup(&d);
    }

    /* Parts of the wrong shape never leave. */
    T_OK(b.ops->put_open(b.t, "bare/obj", RIO_SIZE_UNKNOWN, CH, &up));
    T_ERR(bare_write(&b, up, 1, CH + 1, src, 10), -EINVAL);        /* off is not index x chunk */
    T_ERR(bare_write(&b, up, 0, 0, src, CH + 1), -EINVAL);         /* longer than a chunk */
    T_ERR(bare_write(&b, up, 10000, 10000 * CH, src, 1), -EINVAL); /* part 10001 */
    b.ops->put_abort(b.t, up);
    su_fault_stats(port, &fired, &ups);
    T_EQ(ups, 0u);

    /* An empty stream: an empty object replaces the old one. */
    T_OK(b.ops->put_open(b.t, "bare/obj", RIO_SIZE_UNKNOWN, CH, &up));
    T_OK(bare_commit(&b, up, src, 0));
    T_OK(b.ops->lookup(b.t, "bare/obj", &d));
    T_EQ(d.size, 0u);
    T_EQ(d.nchunks, 0u);
    T_STREQ(d.etag, "d41d8cd98f00b204e9800998ecf8427e");
    rio_desc_cleanup(&d);
    su_fault_stats(port, &fired, &ups);
    T_EQ(ups, 0u);
    T_OK(b.ops->remove(b.t, "bare/obj"));

    /* put_open of a stream under allocation failure: -ENOMEM, nothing
     * leaked, no upload left. */
    for (uint64_t k = 1; k < 100; k++) {
        int64_t a0 = rio__alloc_outstanding();
        uint64_t before = rio__alloc_calls();
        rio__alloc_fail_nth(k);
        int ret = b.ops->put_open(b.t, "bare/obj", RIO_SIZE_UNKNOWN, CH, &up);
        rio__alloc_fail_nth(0);
        if (ret == 0)
            b.ops->put_abort(b.t, up);
        else
            T_ERR(ret, -ENOMEM);
        T_EQ(rio__alloc_outstanding(), a0);
        su_fault_stats(port, &fired, &ups);
        T_EQ(ups, 0u);
        if (rio__alloc_calls() - before < k)
            break;
    }

    b.ops->close(b.t);
    rio__url_cleanup(&b.u);
    T_EQ(rio__alloc_outstanding(), alloc0);
    free(src);
}

struct canceller {
    struct rio_cancel *cx;
    unsigned after_ms;
};

static void *cancel_main(void *arg)
{
    struct canceller *k = arg;

    su_sleep_ms(k->after_ms);
    rio_cancel_fire(k->cx);
    return NULL;
}

/* A PUT cancelled while CreateMultipartUpload waits for its answer: the
 * request is not cut (an upload id never seen cannot be aborted, and S3
 * keeps the upload for good); its answer comes, and the cancelled PUT
 * aborts the upload. The server holds no upload after the call. */
TEST(cancel_during_create_upload_leaves_no_upload)
{
    struct rio_options o;
    struct canceller k = {NULL, 200};
    pthread_t th;
    int64_t alloc0;
    unsigned fired, up;
    size_t n = 3 * CH;

    opts_start(&o, &alloc0);
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = malloc(n);
    T_NOTNULL(src);
    memset(src, 5, n);
    T_OK(rio_cancel_new(&k.cx));
    struct rio_call call = {.cancel = k.cx};
    T_EQ(pthread_create(&th, NULL, cancel_main, &k), 0);
    T_ERR(rio_put(c, "F_createslow_0/obj", src, n, &call, NULL), RIO_ECANCELED);
    T_EQ(pthread_join(th, NULL), 0);
    su_fault_stats(su_fault_port(), &fired, &up);
    T_EQ(up, 0u);
    rio_cancel_destroy(k.cx);
    free(src);
    su_close(c, alloc0);
}

/* A GET stuck on a silent server ends with RIO_ECANCELED soon after the
 * token fires, and with RIO_EDEADLINE soon after its deadline. */
TEST(cancel_and_deadline_end_a_stalled_get)
{
    struct rio_options o;
    struct canceller k = {NULL, 300};
    pthread_t th;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    o.op_timeout_ms = 30000;                              /* neither the engine's op timeout... */
    struct rio_client *c = fault_client(&o, "stall=30s"); /* ...nor curl's stall timeout */
    uint8_t *src = put_pattern(c, "F_stall_0/obj", OBJ, 8), *dst = malloc(OBJ);
    T_NOTNULL(dst);

    T_OK(rio_cancel_new(&k.cx));
    struct rio_call call = {.cancel = k.cx};
    T_EQ(pthread_create(&th, NULL, cancel_main, &k), 0);
    uint64_t t0 = su_now_ms();
    T_ERR(rio_get(c, "F_stall_0/obj", dst, OBJ, &call), RIO_ECANCELED);
    uint64_t el = su_now_ms() - t0;
    T_EQ(pthread_join(th, NULL), 0);
    T_GE(el, 250u);
    T_LT(el, 3000u);
    su_idle(c);
    rio_cancel_destroy(k.cx);

    struct rio_call dl = {.deadline_ms = 500};
    t0 = su_now_ms();
    T_ERR(rio_get(c, "F_stall_0/obj", dst, OBJ, &dl), RIO_EDEADLINE);
    el = su_now_ms() - t0;
    T_GE(el, 450u);
    T_LT(el, 3000u);
    close_free(c, alloc0, src, dst);
}

/* A HEAD whose answer trickles in (a header byte every half second, never
 * slow enough for the stall timeout) held a GET's lookup until op_timeout
 * whatever the call's deadline (5 s for a deadline of 1 s with the default
 * stall) and deaf to its cancel token: the metadata request now stops at
 * the deadline (RIO_EDEADLINE) and when the token fires (RIO_ECANCELED). */
TEST(cancel_and_deadline_end_a_trickling_head)
{
    struct rio_options o;
    struct canceller k = {NULL, 300};
    pthread_t th;
    uint8_t buf[64];
    int64_t alloc0;

    opts_start(&o, &alloc0);
    o.op_timeout_ms = 30000;
    /* (get_one=off: a small GET would send no HEAD) */
    struct rio_client *c = fault_client(&o, "stall=30s&get_one=off");

    struct rio_call dl = {.deadline_ms = 1000};
    uint64_t t0 = su_now_ms();
    T_ERR(rio_get(c, "F_headstall_0/obj", buf, sizeof(buf), &dl), RIO_EDEADLINE);
    uint64_t el = su_now_ms() - t0;
    T_GE(el, 900u);
    T_LT(el, 5000u); /* not the 30 s of the op timeout and the stall */

    T_OK(rio_cancel_new(&k.cx));
    struct rio_call call = {.cancel = k.cx};
    T_EQ(pthread_create(&th, NULL, cancel_main, &k), 0);
    t0 = su_now_ms();
    T_ERR(rio_get(c, "F_headstall_0/obj", buf, sizeof(buf), &call), RIO_ECANCELED);
    el = su_now_ms() - t0;
    T_EQ(pthread_join(th, NULL), 0);
    T_GE(el, 250u);
    T_LT(el, 5000u); /* curl looks at the token about once a second */
    rio_cancel_destroy(k.cx);
    su_close(c, alloc0);
}

/* A key that reaches the transport from a listing (`railio cp -r`) is the
 * server's text: the line the lookup writes on stderr when an object's
 * chunk checksums are missing printed it raw, so a key holding an escape
 * sequence and a newline recoloured the terminal and forged a line of its
 * own. Its controls are shown as '?', as `railio ls` shows them. */
TEST(stderr_line_masks_a_hostile_key)
{
    static const char key[] = "F_nosums_0/e\x1b[31mX\nrailio: forged \xc2\x9b line";
    struct rio_options o;
    struct rio_desc d;
    struct t_stderr cap;
    char text[4096];
    int64_t alloc0;
    uint8_t b = 'x';

    opts_start(&o, &alloc0);
    struct rio_client *c = fault_client(&o, NULL);
    T_OK(rio_put(c, key, &b, 1, NULL, NULL));
    t_stderr_begin(&cap);
    int ret = rio_stat(c, key, &d);
    t_stderr_end(&cap, text, sizeof(text));
    T_ERR(ret, RIO_ECHECKSUM);
    T_NOTNULL(strstr(text, "F_nosums_0/e?[31mX?railio: forged ? line: the chunk checksums"));
    T_NULL(strchr(text, '\x1b'));
    T_NULL(strstr(text, "\xc2\x9b"));
    /* Each line (one a try: the engine tries it again) is the lookup's
     * whole. */
    unsigned lines = 0, ours = 0;
    for (const char *q = text; (q = strchr(q, '\n')); q++)
        lines++;
    for (const char *q = text; (q = strstr(q, "railio s3: F_nosums_0/")); q++)
        ours++;
    T_GE(lines, 1u);
    T_EQ(lines, ours);
    su_close(c, alloc0);
}

/* Issue 13 item 16: 501 means the server cannot do it: one attempt, no
 * retry, RIO_ENOTSUP. */
TEST(http_501_not_retried)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    unsigned fired0, fired1, up;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    uint8_t *dst, *src = prewrite(&o, -1, "F_501_0/obj", CH, 1, &dst);
    struct rio_client *c = fault_client(&o, NULL);
    su_fault_stats(su_fault_port(), &fired0, &up);
    T_ERR(rio_get(c, "F_501_0/obj", dst, CH, &call), RIO_ENOTSUP);
    su_fault_stats(su_fault_port(), &fired1, &up);
    T_EQ(fired1 - fired0, 1u);
    T_EQ(st.retries[RIO_CLASS_SERVER], 0u); /* the one failed attempt is fatal */
    close_free(c, alloc0, src, dst);
}

/* Through the fault filter (faults= in the URL, a rule that lets this GET
 * pass) the server's answer still makes the detail: the filter handed the
 * inner transport a copy of the op and took back its result alone, so the
 * detail said "not supported" and nothing of the 501. */
TEST(detail_passes_the_fault_filter)
{
    struct rio_options o;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    uint8_t *dst, *src = prewrite(&o, -1, "F_501_0/obj", CH, 1, &dst);
    struct rio_client *c = fault_client(&o, "get_one=off&faults=error:op=write:count=1");
    T_ERR(rio_get(c, "F_501_0/obj", dst, CH, NULL), RIO_ENOTSUP);
    T_NOTNULL(strstr(rio_error_detail(), "GET key F_501_0/obj: HTTP 501"));
    close_free(c, alloc0, src, dst);
}

/* 408 (RequestTimeout) is retried as the server's trouble: the path it came
 * on is not cooled down as a timeout would make it. */
TEST(http_408_retries_without_cooling)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;

    opts_start(&o, &alloc0);
    o.cooldown_base_ms = o.cooldown_cap_ms = 60000;
    uint8_t *dst, *src = prewrite(&o, -1, "F_408_3/obj", OBJ, 2, &dst);
    struct rio_client *c = fault_client(&o, NULL);
    T_EQ(rio_get(c, "F_408_3/obj", dst, OBJ, &call), (int64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    T_EQ(st.retries[RIO_CLASS_SERVER], 3u);
    T_EQ(st.retries[RIO_CLASS_TIMEOUT], 0u);
    for (unsigned i = 0; i < st.npaths; i++)
        T_EQ(st.path[i].state, 0);
    close_free(c, alloc0, src, dst);
}

/* Issue 13 item 1: a HEAD claiming Content-Length 2^64 - 1 and a chunk of
 * 2^63 (a heap overflow once: the reader's ring was sized by a product that
 * wrapped to 0) fails every call with RIO_EPROTO, s3:// and http:// alike;
 * so does a small GET's one ranged GET whose answer claims that size (it
 * goes the long way, whose HEAD is refused). */
TEST(hostile_head_refused)
{
    struct rio_options o;
    char url[256];
    struct rio_desc d;
    struct rio_reader *rd = NULL;
    uint8_t buf[4096];
    void *p = NULL;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    for (int k = 0; k < 2; k++) {
        if (k == 0)
            snprintf(url, sizeof(url), "s3://fb?endpoint=http://127.0.0.1:%d", su_fault_port());
        else
            snprintf(url, sizeof(url), "http://127.0.0.1:%d/fb", su_fault_port());
        struct rio_client *c = su_client(url, &o);
        T_ERR(rio_stat(c, "F_hugehead_0/obj", &d), RIO_EPROTO);
        T_ERR(rio_get(c, "F_hugehead_0/obj", buf, sizeof(buf), NULL), RIO_EPROTO);
        T_ERR(rio_get_alloc(c, "F_hugehead_0/obj", &p, NULL), RIO_EPROTO);
        T_ERR(rio_reader_open(c, "F_hugehead_0/obj", 0, NULL, &rd), RIO_EPROTO);
        T_NULL(rd);
        T_ERR(rio_reader_open(c, "F_hugehead_0/obj", 4, NULL, &rd), RIO_EPROTO);
        /* A 1 MiB header line: the server's fault, not "cannot allocate
         * memory" (curl's CURLE_OUT_OF_MEMORY). */
        T_ERR(rio_stat(c, "F_longhead_0/obj", &d), RIO_EPROTO);
        su_close(c, alloc0);
    }
    /* The reproducer: `railio cp http://HOST/obj out` crashed; it exits 6
     * (docs/cli.md: a protocol error is "verification failed") with a line
     * naming the field. */
    const char *b = getenv("T_BUILD_DIR");
    char cmd[2048], log[700];
    snprintf(log, sizeof(log), "%s/hugehead.log", su_dir);
    snprintf(cmd, sizeof(cmd),
             "%s/railio cp http://127.0.0.1:%d/fb/F_hugehead_0/obj '%s/hugehead.out' 2>'%s'",
             b ? b : "build", su_fault_port(), su_dir, log);
    T_EQ(su_sh("%s", cmd), 6);
    snprintf(cmd, sizeof(cmd),
             "grep -q 'server descriptor: size 18446744073709551615 out of range' '%s'", log);
    T_EQ(su_sh("%s", cmd), 0);
    unlink(log);
}

/* An object railio wrote in one PUT whose chunk checksums
 * (x-amz-meta-railio-xxh) a proxy dropped was read with no verification at
 * all (its ETag check went with them). Now it is RIO_ECHECKSUM, as a
 * multipart object without its sidecar, unless verify=off. */
TEST(missing_chunk_checksums_refused)
{
    struct rio_options o;
    struct rio_desc d;
    int64_t alloc0;
    const size_t n = CH / 2 + 7;
    uint8_t *src = su_pattern(n, 17), *dst = malloc(n);

    T_NOTNULL(dst);
    opts_start(&o, &alloc0);
    struct rio_client *c = client_at(&o, "s3://fb?endpoint=http://127.0.0.1:%d", su_fault_port());
    T_OK(rio_put(c, "F_nosums_0/obj", src, n, NULL, NULL));
    T_ERR(rio_stat(c, "F_nosums_0/obj", &d), RIO_ECHECKSUM);
    T_ERR(rio_get(c, "F_nosums_0/obj", dst, n, NULL), RIO_ECHECKSUM);
    su_close(c, alloc0);
    o.verify = -1;
    c = client_at(&o, "s3://fb?endpoint=http://127.0.0.1:%d", su_fault_port());
    T_EQ(rio_get(c, "F_nosums_0/obj", dst, n, NULL), (int64_t)n);
    T_MEMEQ(dst, src, n);
    su_close(c, alloc0);
    free(src);
    free(dst);
}

/* n bytes of src written as key by curl, not railio: no railio metadata,
 * its ETag the MD5 of its bytes (one PutObject). */
static void foreign_put(const char *key, const uint8_t *src, size_t n)
{
    char path[700];
    snprintf(path, sizeof(path), "%s/foreign.src", su_dir);
    t_write_file(path, src, n);
    T_EQ(su_sh("curl -sf -o /dev/null -T '%s' http://127.0.0.1:%d/fb/%s", path, su_fault_port(),
               key),
         0);
    unlink(path);
}

/* Reads key whole with a reader of 4 slots into dst (cap n): its bytes
 * handed out before the end or an error, and its result (0 at the end). */
static int64_t reader_drain(struct rio_reader *rd, uint8_t *dst, size_t n, size_t *got);

static int64_t foreign_read(struct rio_client *c, const char *key, uint8_t *dst, size_t n,
                            size_t *got)
{
    struct rio_reader *rd;
    int64_t k = rio_reader_open(c, key, 4, NULL, &rd);
    *got = 0;
    return k < 0 ? k : reader_drain(rd, dst, n, got);
}

/* Reads rd to its end into dst (cap n) and closes it: as foreign_read. */
static int64_t reader_drain(struct rio_reader *rd, uint8_t *dst, size_t n, size_t *got)
{
    int64_t k;

    *got = 0;
    while ((k = rio_reader_read(rd, dst + *got, n - *got)) > 0)
        *got += (size_t)k;
    int ret = rio_reader_close(rd);
    return k < 0 ? k : ret;
}

/*
 * An object railio did not write has no chunk checksums: a GET of it whole
 * is checked by its ETag, the MD5 of its bytes, hashed as the chunks land.
 * A bit flipped on the way once: the whole object is read again and comes
 * right. Every time: RIO_ECHECKSUM naming the ETag, after two reads. A
 * reader hands out no byte of the last chunk before the MD5 matched, so
 * it ends in the error, not at the end. A small object (one ranged GET,
 * no lookup) the same. The ETag of an object encrypted with SSE-KMS is no
 * MD5: such an object is read unchecked (its etag ""); an ETag that is not
 * the MD5 of the bytes and says nothing else fails, unless etag_check=off
 * (or verify=off). Without the check every one of these GETs succeeded
 * with the flipped bit in the buffer.
 */
TEST(foreign_object_checked_by_its_etag)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    int64_t alloc0;
    const size_t n = OBJ, small = CH / 2 + 3;
    size_t got;
    uint8_t *src = su_pattern(n, 41), *dst = malloc(n);
    char md5[33];
    int port = su_fault_port();

    T_NOTNULL(dst);
    su_md5(src, n, md5);
    foreign_put("F_getflip_1/foreign", src, n);
    foreign_put("F_getflip_0/foreign", src, n);
    foreign_put("F_getflip_0/foreign-r", src, n);
    foreign_put("F_getflip_1/small", src, small);
    foreign_put("F_getflip_0/small", src, small);
    foreign_put("F_kmsetag_0/foreign", src, n);
    foreign_put("F_lieetag_0/foreign", src, n);
    foreign_put("F_lieetag_0/small", src, small);
    foreign_put("plain/foreign", src, n);

    struct rio_client *c = fault_start(&alloc0, NULL);
    T_OK(rio_stat(c, "plain/foreign", &d));
    T_NULL(d.xxh);
    T_STREQ(d.etag, md5);
    rio_desc_cleanup(&d);
    unsigned r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, "plain/foreign", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, (uint64_t)n);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + 17u);

    /* Damaged once: read again whole, right. */
    memset(dst, 0, n);
    r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, "F_getflip_1/foreign", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + 2u * 17u);
    T_EQ(rio_get(c, "F_getflip_1/small", dst, small, &call), (int64_t)small);
    T_MEMEQ(dst, src, small);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);

    /* Damaged every time: refused, after two reads. */
    r0 = su_fault_count(port, "requests");
    T_ERR(rio_get(c, "F_getflip_0/foreign", dst, n, &call), RIO_ECHECKSUM);
    T_NOTNULL(strstr(rio_error_detail(), "ETag"));
    T_EQ(su_fault_count(port, "requests") - r0, 1u + 2u * 17u);
    T_ERR(rio_get(c, "F_getflip_0/small", dst, small, NULL), RIO_ECHECKSUM);
    T_NOTNULL(strstr(rio_error_detail(), "etag_check=off"));
    void *p = NULL;
    T_ERR(rio_get_alloc(c, "F_getflip_0/foreign", &p, NULL), RIO_ECHECKSUM);
    T_NULL(p);

    /* A reader: the damaged object ends in the error, short of its last
     * chunk; the sound one reads whole. */
    T_ERR(foreign_read(c, "F_getflip_0/foreign-r", dst, n, &got), RIO_ECHECKSUM);
    T_LE(got, (size_t)(16 * CH));
    T_NOTNULL(strstr(rio_error_detail(), "ETag"));
    T_EQ(foreign_read(c, "plain/foreign", dst, n, &got), 0);
    T_EQ(got, n);
    T_MEMEQ(dst, src, n);
    T_ERR(foreign_read(c, "F_getflip_0/small", dst, n, &got), RIO_ECHECKSUM);
    T_EQ(got, 0u);

    /* SSE-KMS: its ETag vouches for nothing, the object reads unchecked. */
    T_OK(rio_stat(c, "F_kmsetag_0/foreign", &d));
    T_STREQ(d.etag, "");
    rio_desc_cleanup(&d);
    T_EQ(rio_get(c, "F_kmsetag_0/foreign", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, 0u);

    /* An ETag that is no MD5 of the bytes, said nowhere. */
    T_ERR(rio_get(c, "F_lieetag_0/foreign", dst, n, NULL), RIO_ECHECKSUM);
    T_ERR(rio_get(c, "F_lieetag_0/small", dst, small, NULL), RIO_ECHECKSUM);
    su_close(c, alloc0);

    /* railio get URL FILE (a reader of the object into a temporary file):
     * damaged once, fetched again over the same bytes, FILE right; every
     * time, exit 6 (verify) and no FILE. */
    char bin[700], out[700];
    t_build_path(bin, sizeof(bin), "railio");
    snprintf(out, sizeof(out), "%s/foreign.out", su_dir);
    foreign_put("F_getflip_1/cli", src, n);
#define FOREIGN_GET(key)                                                                           \
    su_sh("'%s' get -q 's3://fb/%s?endpoint=http://127.0.0.1:%d&chunk=64K' '%s' 2>/dev/null", bin, \
          key, port, out)
    T_EQ(FOREIGN_GET("F_getflip_1/cli"), 0);
    uint8_t *back = t_slurp(out, &got);
    T_NOTNULL(back);
    T_EQ(got, n);
    T_MEMEQ(back, src, n);
    free(back);
    unlink(out);
    T_EQ(FOREIGN_GET("F_getflip_0/foreign"), 6);
    T_NE(access(out, F_OK), 0);
#undef FOREIGN_GET
    /* railio cp -r (a reader per object, into a temporary file): each
     * object damaged twice (its first read fails: a reader reads no chunk
     * again), fetched again, whole. */
    foreign_put("F_getflip_2/tree/a", src, n);
    foreign_put("F_getflip_2/tree/b", src, small);
    snprintf(out, sizeof(out), "%s/foreign-tree", su_dir);
    T_EQ(su_sh("rm -rf '%s' && mkdir '%s' && '%s' cp -r -q "
               "'s3://fb/F_getflip_2/tree?endpoint=http://127.0.0.1:%d&chunk=64K' '%s/' "
               "2>/dev/null",
               out, out, bin, port, out),
         0);
    for (int k = 0; k < 2; k++) {
        char f[800];
        snprintf(f, sizeof(f), "%s/%s", out, k ? "b" : "a");
        back = t_slurp(f, &got);
        T_NOTNULL(back);
        T_EQ(got, k ? small : n);
        T_MEMEQ(back, src, got);
        free(back);
    }
    t_rm_tree(out);

    c = fault_start(&alloc0, "etag_check=off");
    T_EQ(rio_get(c, "F_lieetag_0/foreign", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, 0u);
    T_EQ(rio_get(c, "F_lieetag_0/small", dst, small, NULL), (int64_t)small);
    su_close(c, alloc0);
    opts_start(&o, &alloc0);
    o.verify = -1;
    c = fault_client(&o, NULL);
    T_EQ(rio_get(c, "F_lieetag_0/foreign", dst, n, NULL), (int64_t)n);
    T_MEMEQ(dst, src, n);
    su_close(c, alloc0);
    free(src);
    free(dst);
}

/* n bytes of src put by railio as key by a client of its own: 64 KiB
 * parts, which the fault server's bare* kinds serve as another tool's
 * object in parts. */
static void parts_put(const char *key, const uint8_t *src, size_t n)
{
    int64_t alloc0;
    struct rio_client *c = fault_start(&alloc0, NULL);
    T_OK(rio_put(c, key, src, n, NULL, NULL));
    su_close(c, alloc0);
}

/* A client reading in 48 KiB chunks, which cut across those parts, with
 * extra URL options (NULL: none); its allocation count in *alloc0. */
static struct rio_client *parts_reader(int64_t *alloc0, const char *extra)
{
    struct rio_options o;
    opts_start(&o, alloc0);
    o.chunk_size = 48 * 1024;
    return fault_client(&o, extra);
}

/*
 * An object railio did not write that was uploaded in parts: its ETag is
 * the MD5 of its parts' MD5s and "-N", which says nothing of the part
 * size. The client asks the server for part 1 and part N (HEAD
 * ?partNumber, naming the generation) and, where the sizes make the
 * object, hashes each part as the chunks land, cut where the parts are
 * (the reader's chunks, 48 KiB, are not the parts, 64 KiB): a sound object
 * reads checked, one damaged once is read again, one damaged every time
 * fails RIO_ECHECKSUM. A server that ignores partNumber (no part count,
 * as radosgw 16) is read unchecked and asked no more. The objects are
 * railio's, served without their railio metadata (fault kinds bare*),
 * named F_KIND/NAME.
 */
static void parts_checked(const char *name)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    int64_t alloc0;
    const size_t n = OBJ;
    size_t got;
    uint8_t *src = su_pattern(n, 43), *dst = malloc(n);
    int port = su_fault_port();
    static const char *const kinds[] = {"bare_0", "bareflip_1", "bareflip_0", "barenoparts_0"};
    char keys[4][64];

    T_NOTNULL(dst);
    for (size_t i = 0; i < 4; i++) {
        snprintf(keys[i], sizeof(keys[i]), "F_%s/%s", kinds[i], name);
        parts_put(keys[i], src, n);
    }
    struct rio_client *c = parts_reader(&alloc0, NULL);
    T_OK(rio_stat(c, keys[0], &d));
    T_NULL(d.xxh);
    T_STREQ(d.etag, "");
    rio_desc_cleanup(&d);
    const unsigned reads = (unsigned)((n + 48 * 1024 - 1) / (48 * 1024));
    unsigned r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, keys[0], dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, (uint64_t)n);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + 2u + reads);
    memset(dst, 0, n);
    T_EQ(rio_get(c, keys[1], dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_ERR(rio_get(c, keys[2], dst, n, NULL), RIO_ECHECKSUM);
    T_NOTNULL(strstr(rio_error_detail(), "parts' MD5s"));
    T_EQ(foreign_read(c, keys[0], dst, n, &got), 0);
    T_EQ(got, n);
    T_MEMEQ(dst, src, n);
    T_ERR(foreign_read(c, keys[2], dst, n, &got), RIO_ECHECKSUM);
    T_LT(got, n);

    /* No part count in the answer: unchecked, and not asked again. */
    T_EQ(rio_get(c, keys[3], dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, 0u);
    r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, keys[0], dst, n, &call), (int64_t)n);
    T_EQ(st.verify_bytes, 0u);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + reads);
    close_free(c, alloc0, src, dst);
}

TEST(foreign_multipart_object_checked_by_its_parts)
{
    parts_checked("mp");
}

/*
 * The same GETs into memory take their parts' MD5s 16 or 8 at once where
 * the CPU has MD5 lanes (the test above, on such a CPU) and one part after
 * the other, in order, where it has none (here, RIO_MD5_LANES=1): both
 * read a sound object checked, read one damaged once again, and fail one
 * damaged every time.
 */
TEST(foreign_multipart_object_checked_one_md5_at_a_time)
{
    setenv("RIO_MD5_LANES", "1", 1);
    parts_checked("mp1");
}

/* The s3 transport's put_prep_many, counted: calls of more than one
 * upload and the uploads they took. */
static const struct rio_transport_ops *prep_many_real;
static _Atomic unsigned prep_many_calls, prep_many_uploads;

static unsigned prep_many_counted(struct rio_transport *t, unsigned n, void *const *uploads,
                                  const uint64_t *index, const void *const *src,
                                  const uint64_t *len)
{
    if (n > 1) {
        prep_many_calls++;
        prep_many_uploads += n;
    }
    return prep_many_real->put_prep_many(t, n, uploads, index, src, len);
}

#define LANE_PUTS 37u /* two groups of 16, one of 5 */

/*
 * A batch of LANE_PUTS small PUTs (one part each, checked by a
 * Content-MD5) of which the first, a middle and the last of the first
 * group of 16, one of the second and the last, alone in a group not full,
 * are damaged on their way once (putflip): the server refuses each of those
 * five (BadDigest: its Content-MD5 was the MD5 of its own bytes, whatever
 * lane computed it), the batch sends them again, and every object reads
 * back whole. With lanes, the batch's MD5s went to put_prep_many in groups.
 * Without, each is taken as its PUT is sent and checked against the ETag
 * the server answers: the five are sent again all the same.
 */
static void batch_md5s(const char *name, const char *opts, bool lanes)
{
    static const unsigned damaged[] = {0, 7, 15, 20, LANE_PUTS - 1};
    static struct rio_transport_ops patched;
    struct rio_op ops[LANE_PUTS];
    char keys[LANE_PUTS][64];
    uint8_t *srcs[LANE_PUTS], dst[2000];
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    int port = su_fault_port();
    unsigned md5_0 = su_fault_count(port, "md5"), crc_0 = su_fault_count(port, "crc32c");
    struct rio_client *c = fault_start(&alloc0, opts);
    bool md5 = strcmp(opts, "checksum=md5") == 0;

    T_EQ(rio__md5_lanes() > 1, lanes || !md5);
    prep_many_real = c->t->ops;
    T_NOTNULL(prep_many_real->put_prep_many);
    patched = *prep_many_real;
    patched.put_prep_many = prep_many_counted;
    __atomic_store_n(&c->t->ops, &patched, __ATOMIC_RELEASE);
    memset(ops, 0, sizeof(ops));
    for (unsigned i = 0; i < LANE_PUTS; i++) {
        bool bad = false;
        /* (this bucket does not check a CRC32C: only the MD5 case damages) */
        for (unsigned k = 0; md5 && k < sizeof(damaged) / sizeof(damaged[0]); k++)
            bad |= damaged[k] == i;
        snprintf(keys[i], sizeof(keys[i]), "%s/%s-%u", bad ? "F_putflip_1" : "lanes", name, i);
        srcs[i] = su_pattern(1000 + 17 * i, 70 + i);
        ops[i] = (struct rio_op){
            .type = RIO_OP_PUT, .key = keys[i], .buf = srcs[i], .len = 1000 + 17 * i};
    }
    T_EQ(rio_batch(c, ops, LANE_PUTS, &call), (int)LANE_PUTS);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], md5 ? 5u : 0u);
    /* With lanes every PUT, and every one sent again, carried a
     * Content-MD5; without, each MD5 was taken as its PUT went and
     * compared with the ETag answered. */
    T_EQ(su_fault_count(port, "md5") - md5_0, lanes && md5 ? LANE_PUTS + 5 : 0u);
    T_EQ(su_fault_count(port, "crc32c") - crc_0, md5 ? 0u : LANE_PUTS);
    for (unsigned i = 0; i < LANE_PUTS; i++) {
        T_EQ(ops[i].result, 0);
        T_EQ(rio_get(c, keys[i], dst, sizeof(dst), NULL), (int64_t)ops[i].len);
        T_MEMEQ(dst, srcs[i], ops[i].len);
        free(srcs[i]);
    }
    if (lanes) {
        T_GT(prep_many_calls, 0u);
        T_GE(prep_many_uploads, 32u); /* the two full groups at least */
    } else {
        T_EQ(prep_many_calls, 0u);
    }
    __atomic_store_n(&c->t->ops, prep_many_real, __ATOMIC_RELEASE);
    su_close(c, alloc0);
}

TEST(batch_small_puts_md5s_in_lanes)
{
    if (rio__md5_lanes() < 2)
        T_SKIP("this CPU has no MD5 lanes (AVX2, AVX-512); the next test runs without");
    batch_md5s("l", "checksum=md5", true);
}

/* Checked by CRC32C, a batch's PUTs gain nothing in lanes: no group is
 * formed (it would only hold the window back), each PUT carries its CRC32C. */
TEST(batch_small_puts_crc32c_not_grouped)
{
    if (rio__md5_lanes() < 2)
        T_SKIP("this CPU has no MD5 lanes (AVX2, AVX-512): no group is ever formed");
    batch_md5s("c", "checksum=crc32c", false);
}

/* The same batch where the CPU has no lanes (RIO_MD5_LANES=1): one MD5
 * after another, each damaged PUT still refused and sent again. */
TEST(batch_small_puts_md5s_one_at_a_time)
{
    setenv("RIO_MD5_LANES", "1", 1);
    batch_md5s("1", "checksum=md5", false);
}

/* A GET of key, an object damaged on the way (src its bytes): refused
 * RIO_ECHECKSUM, never handed out as the object's. */
static void damaged_refused(struct rio_client *c, const char *key, const uint8_t *src, uint8_t *dst,
                            size_t n, struct rio_call *call)
{
    memset(dst, 0, n);
    int64_t got = rio_get(c, key, dst, n, call);
    if (got == (int64_t)n && memcmp(dst, src, n) != 0)
        T_FAIL("%s: a damaged object handed out as the object's, unchecked", key);
    T_ERR(got, RIO_ECHECKSUM);
}

/*
 * The part HEADs that say how an object another tool uploaded in parts is
 * cut are tried again as a lookup is: a 503 SlowDown on one of them (a
 * busy server) sent the GET on unchecked, and a bit flipped on the way
 * (every ranged GET here) was handed out as the object's. Now a server
 * busy once is asked again, the damage caught (RIO_ECHECKSUM after the
 * read again); one busy every time fails the GET with its error, nothing
 * handed out.
 */
TEST(part_heads_of_a_busy_server_tried_again_not_skipped)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 53), *dst = malloc(n);

    T_NOTNULL(dst);
    parts_put("F_barepart503_1/mp", src, n);
    parts_put("F_barepart503_1000/mp", src, n);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    damaged_refused(c, "F_barepart503_1/mp", src, dst, n, &call);
    T_GE(st.retries[RIO_CLASS_THROTTLE] + st.retries[RIO_CLASS_SERVER], 1u);
    int64_t got = rio_get(c, "F_barepart503_1000/mp", dst, n, NULL);
    T_TRUE(got < 0 && got != RIO_ECHECKSUM);
    close_free(c, alloc0, src, dst);
}

/*
 * A part HEAD whose x-amz-mp-parts-count no S3 object can have (99999, a
 * damaged or lying header) is not a server that ignores partNumber: that
 * object is read unchecked (its parts cannot be told), but the parts of
 * the next ones are still asked. It turned the parts check off for the
 * client's life, so a later object damaged on the way was handed out.
 */
TEST(bad_part_count_leaves_the_parts_check_on)
{
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 59), *dst = malloc(n);

    T_NOTNULL(dst);
    parts_put("F_barebadcount_0/mp", src, n);
    parts_put("F_bareflip_0/after", src, n);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    T_EQ(rio_get(c, "F_barebadcount_0/mp", dst, n, NULL), (int64_t)n);
    T_MEMEQ(dst, src, n);
    damaged_refused(c, "F_bareflip_0/after", src, dst, n, NULL);
    close_free(c, alloc0, src, dst);
}

/*
 * A lookup whose HEAD says fewer bytes than the object has (1000 fewer,
 * as a proxy that mangles a HEAD's length) for an object another tool
 * uploaded in parts: the sizes no longer make its parts (read unchecked),
 * and its reads' answers, whose Content-Range names the object's true
 * size, were taken: rio_get handed out its first bytes as the whole
 * object. A read whose answer names another size than its generation's
 * is a server fault now (RIO_ESERVER, retried): the GET fails, nothing
 * short handed out.
 */
TEST(read_answer_of_another_size_than_the_lookups_is_refused)
{
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 61), *dst = malloc(n);

    T_NOTNULL(dst);
    parts_put("F_headshort_0/mp", src, n);
    struct rio_client *c = parts_reader(&alloc0, "get_one=off");
    memset(dst, 0, n);
    int64_t got = rio_get(c, "F_headshort_0/mp", dst, n, NULL);
    if (got == (int64_t)n - 1000)
        T_FAIL("the object's first %lld bytes handed out as the whole object", (long long)got);
    T_TRUE(got == RIO_ERETRIES || got == RIO_ESERVER); /* its chunks' retries spent */
    close_free(c, alloc0, src, dst);
}

/*
 * An object uploaded in parts and encrypted with SSE-KMS has an ETag
 * "X-N" whose X is no MD5 of its parts' MD5s (S3 says
 * x-amz-server-side-encryption: aws:kms): it is read unchecked, as one
 * put whole is. The parts check took its ETag for the MD5 of the parts'
 * MD5s and failed such a sound object with RIO_ECHECKSUM, after reading it
 * twice; the same for one put whole and shown as "X-1" (no part HEADs).
 */
TEST(foreign_multipart_object_encrypted_with_kms_read_unchecked)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 47), *dst = malloc(n);

    T_NOTNULL(dst);
    parts_put("F_barekms_0/mp", src, n);
    parts_put("F_barekms_0/one", src, CH);
    struct rio_client *c = parts_reader(&alloc0, "get_one=off");
    T_EQ(rio_get(c, "F_barekms_0/mp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, 0u);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u);
    memset(dst, 0, n);
    T_EQ(rio_get(c, "F_barekms_0/one", dst, CH, &call), (int64_t)CH);
    T_MEMEQ(dst, src, CH);
    T_EQ(st.verify_bytes, 0u);
    close_free(c, alloc0, src, dst);
}

/*
 * The part HEADs that check an object uploaded in parts (HEAD ?partNumber)
 * are the call's: a server that trickles their answer (a header byte every
 * half second) holds a GET no longer than its deadline (RIO_EDEADLINE), and
 * its cancel token ends it (RIO_ECANCELED). They were sent outside the
 * call's bounds: each waited for op_timeout (30 s here) whatever the
 * deadline, deaf to the token.
 */
TEST(part_heads_keep_the_deadline_and_cancel)
{
    struct rio_options o;
    struct canceller k = {NULL, 300};
    pthread_t th;
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 53), *dst = malloc(n);

    T_NOTNULL(dst);
    struct rio_client *c = fault_start(&alloc0, NULL);
    T_OK(rio_put(c, "F_barepartstall_0/mp", src, n, NULL, NULL));
    su_close(c, alloc0);

    opts_start(&o, &alloc0);
    o.op_timeout_ms = 30000;
    c = fault_client(&o, "stall=30s");
    struct rio_call dl = {.deadline_ms = 1000};
    uint64_t t0 = su_now_ms();
    T_ERR(rio_get(c, "F_barepartstall_0/mp", dst, n, &dl), RIO_EDEADLINE);
    uint64_t el = su_now_ms() - t0;
    T_GE(el, 900u);
    T_LT(el, 5000u); /* not the 30 s of the op timeout */

    T_OK(rio_cancel_new(&k.cx));
    struct rio_call call = {.cancel = k.cx};
    T_EQ(pthread_create(&th, NULL, cancel_main, &k), 0);
    t0 = su_now_ms();
    T_ERR(rio_get(c, "F_barepartstall_0/mp", dst, n, &call), RIO_ECANCELED);
    el = su_now_ms() - t0;
    T_EQ(pthread_join(th, NULL), 0);
    T_GE(el, 250u);
    T_LT(el, 5000u); /* curl looks at the token about once a second */
    rio_cancel_destroy(k.cx);
    close_free(c, alloc0, src, dst);
}

/*
 * An object uploaded in parts of other sizes (here part 2 1000 bytes
 * longer and part 3 as much shorter; parts 1 and N, which the client asks
 * about, as they would be) is sound: the MD5 of its parts' MD5s is its
 * ETag. Cut at part 1's size, its parts hash to another ETag: the GET
 * failed RIO_ECHECKSUM after reading it twice, a reader at its end. Now
 * the other parts' sizes are asked (HEAD ?partNumber) when the MD5 does
 * not match, and such an object is read unchecked, at once.
 */
TEST(foreign_object_in_parts_of_other_sizes_not_refused)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 59), *dst = malloc(n);

    T_NOTNULL(dst);
    parts_put("F_bareodd_0/mp", src, n);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    size_t got;
    T_EQ(rio_get(c, "F_bareodd_0/mp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u); /* not read twice */
    memset(dst, 0, n);
    T_EQ(foreign_read(c, "F_bareodd_0/mp", dst, n, &got), 0);
    T_EQ(got, n);
    T_MEMEQ(dst, src, n);
    close_free(c, alloc0, src, dst);
}

/*
 * The part HEADs asked when such an object's MD5 does not match (its
 * middle parts' sizes) are tried again as a lookup's are: one 503
 * SlowDown (a busy server) on them made a sound object of parts of other
 * sizes fail RIO_ECHECKSUM after it was read twice (they were one try,
 * and their error taken for parts of one size). A server busy every time
 * fails the GET with its error, not RIO_ECHECKSUM.
 */
TEST(odd_part_heads_of_a_busy_server_tried_again)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 61), *dst = malloc(n);

    T_NOTNULL(dst);
    parts_put("F_bareodd503_1/mp", src, n);
    parts_put("F_bareodd503_1000/mp", src, n);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    T_EQ(rio_get(c, "F_bareodd503_1/mp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_GE(st.retries[RIO_CLASS_THROTTLE] + st.retries[RIO_CLASS_SERVER], 1u);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u); /* not read twice */
    int64_t got = rio_get(c, "F_bareodd503_1000/mp", dst, n, NULL);
    T_TRUE(got < 0 && got != RIO_ECHECKSUM);
    close_free(c, alloc0, src, dst);
}

/*
 * Through the fault filter (faults= in the URL) an object railio did not
 * write that was uploaded in parts is checked by its parts as without it,
 * as one put whole is by its ETag: a bit the filter flips in a read is
 * caught and the object read again. The filter did not pass the part size
 * lookup on (transport op parts_of): such objects were read unchecked, the
 * flipped bit handed out.
 */
TEST(foreign_multipart_object_checked_through_the_fault_filter)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    const size_t n = OBJ;
    uint8_t *src = su_pattern(n, 67), *dst = malloc(n);

    T_NOTNULL(dst);
    struct rio_client *c = fault_start(&alloc0, NULL);
    T_OK(rio_put(c, "F_bare_0/fmp", src, n, NULL, NULL));
    T_OK(rio_put(c, "F_bare_0/fone", src, 3 * CH / 2, NULL, NULL));
    su_close(c, alloc0);

    opts_start(&o, &alloc0);
    c = fault_client(&o, "faults=bitflip:op=read:chunk=3:count=1");
    T_EQ(rio_get(c, "F_bare_0/fmp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_EQ(st.verify_bytes, 2 * (uint64_t)n);
    su_close(c, alloc0);

    /* (the same for one put whole, by its ETag) */
    opts_start(&o, &alloc0);
    c = fault_client(&o, "get_one=off&faults=bitflip:op=read:chunk=1:count=1");
    T_EQ(rio_get(c, "F_bare_0/fone", dst, n, &call), (int64_t)(3 * CH / 2));
    T_MEMEQ(dst, src, 3 * CH / 2);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
    close_free(c, alloc0, src, dst);
}

/*
 * A GET of an object another tool uploaded in parts into a buffer of at
 * most a chunk (one ranged GET, no lookup: get_one) is checked by its
 * parts too: its answer's ETag "MD5-N" sends it the long way (lookup, part
 * HEADs). It was read unchecked there, a flipped bit handed out, while
 * the same GET into a larger buffer was checked.
 */
TEST(small_foreign_multipart_object_checked_in_one_get)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    const size_t n = 3 * CH / 2; /* two parts: CH and CH / 2 */
    uint8_t *src = su_pattern(n, 71), *dst = malloc(n);

    T_NOTNULL(dst);
    struct rio_client *c = fault_start(&alloc0, NULL);
    T_OK(rio_put(c, "F_bare_0/small", src, n, NULL, NULL));
    T_OK(rio_put(c, "F_bareflip_2/small", src, n, NULL, NULL));
    su_close(c, alloc0);

    opts_start(&o, &alloc0);
    o.chunk_size = 4 * CH; /* the object fits a chunk: one GET */
    c = fault_client(&o, NULL);
    T_EQ(rio_get(c, "F_bare_0/small", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, (uint64_t)n);
    memset(dst, 0, n);
    /* (a buffer too small: RIO_ETOOBIG after that one GET, as before) */
    unsigned r0 = su_fault_count(su_fault_port(), "requests");
    T_ERR(rio_get(c, "F_bare_0/small", dst, n - 1, NULL), RIO_ETOOBIG);
    T_EQ(su_fault_count(su_fault_port(), "requests") - r0, 1u);
    /* (the first two ranged GETs flipped: the one GET's, the first read's) */
    T_EQ(rio_get(c, "F_bareflip_2/small", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
    close_free(c, alloc0, src, dst);
}

/*
 * An object railio did not write whose server keeps a checksum of all its
 * bytes (S3 gives every new object a CRC-64/NVME; an SDK uploads with a
 * CRC-32 or CRC-32C), asked for with x-amz-checksum-mode: ENABLED: a GET
 * of it whole is checked by that CRC, not by its ETag. One uploaded in
 * parts needs no part HEADs (its "MD5-N" ETag is not used): one HEAD and
 * the reads. A bit flipped once: read again, right; every time, or a CRC
 * of other bytes: RIO_ECHECKSUM naming the checksum. A composite
 * checksum ("...-3", a CRC of the parts' CRCs) is not taken: that object
 * is checked by its parts as before. Objects put whole, with a CRC-32 or
 * CRC-32C, the same; a reader hands out no byte of the last chunk of a
 * damaged one. With etag_check=off nothing is asked or checked.
 */
TEST(foreign_object_checked_by_its_full_object_crc)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    const size_t n = 5 * CH + 333; /* 6 parts of CH, 7 reads of 48 KiB */
    size_t got;
    uint8_t *src = su_pattern(n, 83), *dst = malloc(n);
    int port = su_fault_port();
    static const char *const parts[] = {"F_crc64_0/mp", "F_crc64flip_1/mp", "F_crc64flip_0/mp",
                                        "F_crc64lie_0/mp", "F_crccomp_0/mp"};

    T_NOTNULL(dst);
    for (size_t i = 0; i < sizeof(parts) / sizeof(parts[0]); i++)
        parts_put(parts[i], src, n);
    foreign_put("F_crc32_0/whole", src, n);
    foreign_put("F_crc32c_0/whole", src, n);
    foreign_put("F_crc64flip_0/whole", src, n);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    const unsigned reads = (unsigned)((n + 48 * 1024 - 1) / (48 * 1024));
    unsigned r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, "F_crc64_0/mp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, (uint64_t)n);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + reads); /* no part HEADs */
    memset(dst, 0, n);
    T_EQ(rio_get(c, "F_crc64flip_1/mp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_ERR(rio_get(c, "F_crc64flip_0/mp", dst, n, NULL), RIO_ECHECKSUM);
    T_NOTNULL(strstr(rio_error_detail(), "x-amz-checksum-crc64nvme"));
    T_ERR(rio_get(c, "F_crc64lie_0/mp", dst, n, NULL), RIO_ECHECKSUM);
    T_ERR(foreign_read(c, "F_crc64flip_0/mp", dst, n, &got), RIO_ECHECKSUM);
    T_LT(got, n);
    r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, "F_crccomp_0/mp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, (uint64_t)n);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + 2u + reads); /* checked by its parts */
    for (int i = 0; i < 2; i++) {
        memset(dst, 0, n);
        T_EQ(rio_get(c, i ? "F_crc32c_0/whole" : "F_crc32_0/whole", dst, n, &call), (int64_t)n);
        T_MEMEQ(dst, src, n);
        T_EQ(st.verify_bytes, (uint64_t)n);
    }
    T_ERR(rio_get(c, "F_crc64flip_0/whole", dst, n, NULL), RIO_ECHECKSUM);
    T_NOTNULL(strstr(rio_error_detail(), "x-amz-checksum"));
    su_close(c, alloc0);

    c = parts_reader(&alloc0, "etag_check=off");
    T_EQ(rio_get(c, "F_crc64_0/mp", dst, n, &call), (int64_t)n);
    T_EQ(st.verify_bytes, 0u);
    close_free(c, alloc0, src, dst);
}

/* S3 answers 403 to a HEAD asking the checksum of an SSE-KMS object from
 * whoever may not use its key (kms:Decrypt), though GetObjectAttributes
 * and HEAD without it work: the lookup asks again without the header, so
 * a stat and a GET work (the GET checked by its ETag here). */
TEST(checksum_denied_head_asked_again_without)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    int64_t alloc0;
    const size_t n = 3 * CH + 5;
    uint8_t *src = su_pattern(n, 85), *dst = malloc(n);

    T_NOTNULL(dst);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    foreign_put("F_ckdenied_0/obj", src, n);
    T_OK(rio_stat(c, "F_ckdenied_0/obj", &d));
    T_EQ(d.size, (uint64_t)n);
    rio_desc_cleanup(&d);
    T_EQ(rio_get(c, "F_ckdenied_0/obj", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, (uint64_t)n);
    close_free(c, alloc0, src, dst);
}

/* Google Cloud Storage sends x-goog-hash (the object's CRC-32C and MD5)
 * with every HEAD and GET: an object in parts is checked by its crc32c
 * with no part HEADs, one whose crc32c is of other bytes is refused, and
 * one stored gzipped (x-goog-stored-content-encoding: gzip, served
 * decompressed: its hash and its ETag are not of the bytes served) is read
 * unchecked, not refused. */
TEST(foreign_object_checked_by_its_goog_hash)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t alloc0;
    const size_t n = 3 * CH + 5;
    uint8_t *src = su_pattern(n, 84), *dst = malloc(n);
    int port = su_fault_port();

    T_NOTNULL(dst);
    parts_put("F_goog_0/mp", src, n);
    parts_put("F_googlie_0/mp", src, n);
    parts_put("F_googgz_0/mp", src, n);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    const unsigned reads = (unsigned)((n + 48 * 1024 - 1) / (48 * 1024));
    unsigned r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, "F_goog_0/mp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, (uint64_t)n);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + reads);
    T_ERR(rio_get(c, "F_googlie_0/mp", dst, n, NULL), RIO_ECHECKSUM);
    T_NOTNULL(strstr(rio_error_detail(), "checksum"));
    r0 = su_fault_count(port, "requests");
    memset(dst, 0, n);
    T_EQ(rio_get(c, "F_googgz_0/mp", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.verify_bytes, 0u);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + reads);
    close_free(c, alloc0, src, dst);
}

/*
 * Objects ka (bytes a) and kb (bytes b), n bytes each, put as another
 * tool's, both looked up (one generation or two, as same_gen says), then
 * ka read by its descriptor: its own bytes, no checksum retry (not
 * refused by a checksum kb's lookup left).
 */
static void read_by_desc_after_other(const char *ka, const uint8_t *a, const char *kb,
                                     const uint8_t *b, size_t n, bool same_gen)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc da, db;
    struct rio_reader *rd;
    int64_t alloc0;
    size_t got = 0;
    uint8_t *dst = malloc(n);

    T_NOTNULL(dst);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    foreign_put(ka, a, n);
    foreign_put(kb, b, n);
    T_OK(rio_stat(c, ka, &da));
    T_OK(rio_stat(c, kb, &db));
    if (same_gen)
        T_EQ(da.generation, db.generation);
    else
        T_NE(da.generation, db.generation);
    T_OK(rio_reader_open_desc(c, &da, 0, UINT64_MAX, 4, &call, &rd));
    T_EQ(reader_drain(rd, dst, n, &got), 0);
    T_EQ(got, n);
    T_MEMEQ(dst, a, n);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u);
    rio_desc_cleanup(&da);
    rio_desc_cleanup(&db);
    free(dst);
    su_close(c, alloc0);
}

/*
 * An object another tool uploaded in parts, read by its descriptor after
 * lookups of other objects: the transport's generation table, whose entry
 * holds the ETag the parts check needs (1024 slots), may have given the
 * entry's slot to another generation since. Its parts were then not
 * checked (rio__s3_parts_of found no ETag: read unchecked) and a bit
 * flipped on every ranged GET was handed out as the object's. Two objects
 * whose generations share a slot are found among 160 (a birthday pair,
 * all but certain), one looked up, then the other, then the first read by
 * its descriptor: its damage is caught (RIO_ECHECKSUM).
 */
TEST(read_by_desc_checked_after_its_table_slot_was_taken)
{
    enum { K = 160 };
    const size_t n = 2 * CH + 100; /* three parts */
    struct rio_desc d[K], dx;
    struct rio_reader *rd;
    int64_t alloc0;
    size_t got = 0;
    char keys[K][48];
    uint8_t *src = malloc(n), *dst = malloc(n);
    int x = -1, y = -1;

    T_NOTNULL(src);
    T_NOTNULL(dst);
    struct rio_client *c = fault_start(&alloc0, NULL);
    for (int i = 0; i < K && y < 0; i++) {
        snprintf(keys[i], sizeof(keys[i]), "F_bareflip_0/slot%d", i);
        uint8_t *p = su_pattern(n, 1000 + (unsigned)i);
        T_OK(rio_put(c, keys[i], p, n, NULL, NULL));
        free(p);
        T_OK(rio_stat(c, keys[i], &d[i]));
        for (int j = 0; j < i && y < 0; j++)
            if (d[j].generation % 1024 == d[i].generation % 1024)
                x = j, y = i;
        if (y < 0)
            continue;
        for (int j = 0; j <= i; j++)
            rio_desc_cleanup(&d[j]);
    }
    su_close(c, alloc0);
    if (y < 0)
        T_SKIP("no two of %d generations share a slot", K);
    uint8_t *want = su_pattern(n, 1000 + (unsigned)x);
    c = parts_reader(&alloc0, NULL);
    T_OK(rio_stat(c, keys[x], &dx));
    rio_desc_cleanup(&d[0]);
    T_OK(rio_stat(c, keys[y], &d[0])); /* takes the slot of x's generation */
    rio_desc_cleanup(&d[0]);
    T_OK(rio_reader_open_desc(c, &dx, 0, UINT64_MAX, 4, NULL, &rd));
    int64_t ret = reader_drain(rd, dst, n, &got);
    if (ret == 0 && got == n && memcmp(dst, want, n) != 0)
        T_FAIL("a damaged object handed out whole, unchecked");
    T_ERR(ret, RIO_ECHECKSUM);
    rio_desc_cleanup(&dx);
    free(want);
    close_free(c, alloc0, src, dst);
}

/*
 * A GCS object stored gzipped and served decompressed has the ETag (the
 * MD5) of its stored bytes, as has another object storing those bytes as
 * they are (a .gz uploaded both ways): the bytes served are not the same,
 * so neither is the generation, and the other's crc32c, looked up last,
 * never checks the decompressed one read by its descriptor.
 */
TEST(goog_gzip_object_not_checked_by_the_crc_of_its_stored_bytes)
{
    const size_t n = 3 * 48 * 1024 + 77;
    uint8_t *src = su_pattern(n, 87), *stored = malloc(n);

    T_NOTNULL(stored);
    for (size_t i = 0; i < n; i++)
        stored[i] = src[i] ^ 0x5A; /* what s3fault's googgz says it stores */
    read_by_desc_after_other("F_googgz_0/a", src, "F_goog_0/a.gz", stored, n, false);
    free(stored);
    free(src);
}

/*
 * An object whose validator is its Last-Modified date (a weak ETag, or
 * none) shares its generation with every object written in the same
 * second, under any key: the checksum its server keeps is no checksum of
 * that generation's bytes. Two such objects of other bytes, both looked
 * up, then one read by its descriptor: read right (unchecked, as before
 * the store's CRC was asked), not refused by the other's CRC.
 */
TEST(crc_of_another_key_never_checks_a_dated_object)
{
    const size_t n = 3 * 48 * 1024 + 77;
    uint8_t *src = su_pattern(n, 85), *other = su_pattern(n, 86);

    read_by_desc_after_other("F_crcweak_0/a", src, "F_crcweak_0/b", other, n, true);
    free(other);
    free(src);
}

/* Progress reports: how many, and how many went back or named another
 * total (the call does not start over here). */
struct redo_prog {
    uint64_t last_done, last_total;
    unsigned calls, back;
};

static void redo_prog_cb(void *arg, uint64_t done, uint64_t total)
{
    struct redo_prog *p = arg;

    if (done > total || done < p->last_done || (p->last_total && total != p->last_total))
        p->back++;
    p->last_done = done;
    p->last_total = total;
    p->calls++;
}

/*
 * A GET of an object railio did not write whose bytes failed its check
 * once is read again whole; its progress stands still meanwhile rather
 * than going back (railio.h: done never goes back but in a call that
 * starts over, and this one does not). The first read: one chunk at once
 * (damaged), the other 350 ms late; the second read's chunks 350 ms late
 * each, so reports every 100 ms come while it runs.
 */
TEST(checksum_reread_progress_never_goes_back)
{
    struct rio_stats st;
    struct redo_prog pg = {0};
    struct rio_call call = {.stats = &st, .progress = redo_prog_cb, .progress_arg = &pg};
    int64_t alloc0;
    const size_t n = 48 * 1024 + 5000;
    uint8_t *src = su_pattern(n, 87), *dst = malloc(n);

    T_NOTNULL(dst);
    struct rio_client *c = parts_reader(&alloc0, NULL);
    foreign_put("F_crcflipslow_1/obj", src, n);
    T_EQ(rio_get(c, "F_crcflipslow_1/obj", dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_EQ(st.replans, 0u);
    T_GE(pg.calls, 4u);
    T_EQ(pg.back, 0u);
    T_EQ(pg.last_done, (uint64_t)n);
    close_free(c, alloc0, src, dst);
}

/* http://HOST/PREFIX: ranged reads from a plain HTTP server; writes and
 * deletes are not supported. */
TEST(plain_http_reads)
{
    struct rio_options o;
    struct rio_desc d;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    uint8_t *dst, *src = prewrite(&o, alloc0, "web/file.bin", OBJ, 9, &dst);

    struct rio_client *c = client_at(&o, "http://127.0.0.1:%d/fb/web", su_fault_port());
    T_OK(rio_stat(c, "file.bin", &d));
    T_EQ(d.size, (uint64_t)OBJ);
    T_NE(d.generation, 0u);
    rio_desc_cleanup(&d);
    T_EQ(rio_get(c, "file.bin", dst, OBJ, NULL), (int64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    T_ERR(rio_get(c, "missing.bin", dst, OBJ, NULL), RIO_ENOTFOUND);
    T_ERR(rio_put(c, "x", src, 10, NULL, NULL), RIO_ENOTSUP);
    T_ERR(rio_delete(c, "file.bin"), RIO_ENOTSUP);
    close_free(c, alloc0, src, dst);
}

/*
 * A GET into a buffer of at most a chunk is one ranged GET whose answer
 * carries the object's metadata: no HEAD before it (half the round trips
 * of a small GET). Every outcome is the lookup's: the bytes, checked
 * against the object's one checksum; an object railio did not write (no
 * checksum list; as its lookup says); an empty one (a range of it is
 * answered 416: the long way); a missing key (the GET's 404); an object
 * larger than the buffer (RIO_ETOOBIG after that one GET, nothing written
 * into the buffer); rio_get_alloc's first guess. get_one=off looks up
 * first, as before.
 */
TEST(small_get_is_one_request)
{
    enum { N = 50000 }; /* one chunk (CH) */
    struct rio_options o;
    int64_t alloc0;
    int port = su_fault_port();
    char path[4200];
    void *p = NULL;

    opts_start(&o, &alloc0);
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = put_pattern(c, "one/a", N, 61), *dst = malloc(CH);
    T_NOTNULL(dst);
    unsigned r0 = su_fault_count(port, "requests"), h0 = su_fault_count(port, "heads");
    T_EQ(rio_get(c, "one/a", dst, N, NULL), (int64_t)N);
    T_MEMEQ(dst, src, N);
    memset(dst, 0, N);
    T_EQ(rio_get(c, "one/a", dst, CH, NULL), (int64_t)N);
    T_MEMEQ(dst, src, N);
    T_EQ(su_fault_count(port, "requests") - r0, 2u);
    T_EQ(su_fault_count(port, "heads") - h0, 0u);

    r0 = su_fault_count(port, "requests");
    T_ERR(rio_get(c, "one/none", dst, N, NULL), RIO_ENOTFOUND);
    T_EQ(su_fault_count(port, "requests") - r0, 1u);

    r0 = su_fault_count(port, "requests");
    memset(dst, 0xEE, 4096);
    T_ERR(rio_get(c, "one/a", dst, 4096, NULL), RIO_ETOOBIG);
    T_EQ(su_fault_count(port, "requests") - r0, 1u);
    for (unsigned i = 0; i < 4096; i++)
        T_EQ(dst[i], 0xEE);

    T_OK(rio_put(c, "one/empty", src, 0, NULL, NULL));
    T_EQ(rio_get(c, "one/empty", dst, N, NULL), 0);

    /* Not railio's: written by curl, no railio metadata. */
    snprintf(path, sizeof(path), "%s/one-foreign", su_dir);
    FILE *f = fopen(path, "wb");
    T_NOTNULL(f);
    T_EQ(fwrite(src, 1, N, f), (size_t)N);
    fclose(f);
    T_EQ(su_sh("curl -sf -o /dev/null -T '%s' http://127.0.0.1:%d/fb/one/foreign", path, port), 0);
    unlink(path);
    r0 = su_fault_count(port, "requests");
    memset(dst, 0, N);
    T_EQ(rio_get(c, "one/foreign", dst, N, NULL), (int64_t)N);
    T_MEMEQ(dst, src, N);
    T_EQ(su_fault_count(port, "requests") - r0, 1u);

    r0 = su_fault_count(port, "requests");
    T_EQ(rio_get_alloc(c, "one/a", &p, NULL), (int64_t)N);
    T_MEMEQ(p, src, N);
    free(p);
    T_EQ(su_fault_count(port, "requests") - r0, 1u);

    /* A reader of the whole object: the same one request. */
    struct rio_reader *rd;
    r0 = su_fault_count(port, "requests");
    T_OK(rio_reader_open(c, "one/a", 0, NULL, &rd));
    size_t got = 0;
    for (int64_t k; (k = rio_reader_read(rd, dst + got, CH - got)) > 0;)
        got += (size_t)k;
    T_EQ(got, (size_t)N);
    T_MEMEQ(dst, src, N);
    T_OK(rio_reader_close(rd));
    T_EQ(su_fault_count(port, "requests") - r0, 1u);

    /* A bit flipped in flight: the one xxh3 sees it, and the GET is
     * tried again (two requests, one retry). */
    uint8_t *src2 = put_pattern(c, "F_getflip_1/one", N, 62);
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, "F_getflip_1/one", dst, N, &call), (int64_t)N);
    T_MEMEQ(dst, src2, N);
    T_EQ(st.retries_total, 1u);
    T_EQ(su_fault_count(port, "requests") - r0, 2u);
    free(src2);
    su_close(c, alloc0);

    opts_start(&o, &alloc0);
    c = fault_client(&o, "get_one=off");
    r0 = su_fault_count(port, "requests");
    h0 = su_fault_count(port, "heads");
    T_EQ(rio_get(c, "one/a", dst, N, NULL), (int64_t)N);
    T_MEMEQ(dst, src, N);
    T_EQ(su_fault_count(port, "requests") - r0, 2u);
    T_EQ(su_fault_count(port, "heads") - h0, 1u);
    close_free(c, alloc0, src, dst);
}

/* Progress reports of a small GET in one request: the buffer's size is
 * only a guess of the object's until the answer, and is never reported as
 * its total (a report every 100 ms comes before the answer here). */
struct one_prog {
    uint64_t last_done, last_total;
    unsigned calls, bad;
};

static void one_prog_cb(void *arg, uint64_t done, uint64_t total)
{
    struct one_prog *p = arg;

    if (done > total || done < p->last_done || (p->last_total && total != p->last_total) ||
        (total && total != 20000))
        p->bad++;
    p->last_done = done;
    p->last_total = total;
    p->calls++;
}

TEST(small_get_reports_no_guessed_total)
{
    enum { N = 20000 };
    struct rio_options o;
    int64_t alloc0;
    struct one_prog pg = {0};
    struct rio_call call = {.progress = one_prog_cb, .progress_arg = &pg};
    int port = su_fault_port();

    opts_start(&o, &alloc0);
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = put_pattern(c, "F_slowget_1/prog", N, 63), *dst = malloc(CH);
    T_NOTNULL(dst);
    unsigned r0 = su_fault_count(port, "requests");
    T_EQ(rio_get(c, "F_slowget_1/prog", dst, CH, &call), (int64_t)N);
    T_MEMEQ(dst, src, N);
    T_EQ(su_fault_count(port, "requests") - r0, 1u); /* one request: the one GET */
    T_GE(pg.calls, 2u); /* reports at 100 and 200 ms, before the answer */
    T_EQ(pg.bad, 0u);
    close_free(c, alloc0, src, dst);
}

/*
 * A small GET's one ranged GET answered by a server that lies about its
 * framing: a 206 whose Content-Range is the object's (smaller than the
 * buffer) and whose body, with no Content-Length, runs 100 bytes past it.
 * The GET fails, and nothing lands in the buffer past the object's size:
 * only the range the headers announced is ever stored. An xxh list of two
 * entries for an object of one chunk is not taken: the GET goes the long
 * way.
 */
TEST(small_get_lying_server)
{
    enum { N = 50000 };
    struct rio_options o;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    o.retry_attempts = 2;
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = put_pattern(c, "F_onetail_0/obj", N, 71), *dst = malloc(CH);
    T_NOTNULL(dst);
    memset(dst, 0x55, CH);
    int64_t r = rio_get(c, "F_onetail_0/obj", dst, CH, NULL);
    T_LT(r, 0);
    for (unsigned i = N; i < CH; i++)
        if (dst[i] != 0x55)
            T_FAIL("byte %u of the buffer, past the object's %u, was written (%#x)", i, (unsigned)N,
                   dst[i]);
    free(src);

    /* (its HEAD is right: the long way reads it, checked by that list) */
    src = put_pattern(c, "F_onexxh2_0/obj", N, 72);
    memset(dst, 0, CH);
    T_EQ(rio_get(c, "F_onexxh2_0/obj", dst, CH, NULL), (int64_t)N);
    T_MEMEQ(dst, src, N);
    close_free(c, alloc0, src, dst);
}

/*
 * A small GET's one ranged GET answered 200 with no body (Content-Length
 * 0) for an object that is not empty (its railio metadata and its ETag
 * say so): that answer made an empty object of it, rio_get returned 0,
 * success (an empty object is neither checked by its chunk checksums nor
 * by its ETag). An empty answer goes the long way, whose lookup decides:
 * the object's bytes. The same for one railio did not write.
 */
TEST(small_get_empty_answer_is_no_empty_object)
{
    enum { N = 50000 };
    int64_t alloc0;
    struct rio_client *c = fault_start(&alloc0, NULL);
    uint8_t *src = put_pattern(c, "F_empty200_1/obj", N, 73), *dst = malloc(CH);

    T_NOTNULL(dst);
    memset(dst, 0, CH);
    T_EQ(rio_get(c, "F_empty200_1/obj", dst, CH, NULL), (int64_t)N);
    T_MEMEQ(dst, src, N);
    foreign_put("F_empty200_1/foreign", src, N);
    memset(dst, 0, CH);
    T_EQ(rio_get(c, "F_empty200_1/foreign", dst, CH, NULL), (int64_t)N);
    T_MEMEQ(dst, src, N);
    close_free(c, alloc0, src, dst);
}

/*
 * A lookup whose HEAD says 0 bytes (a proxy that zeroes the length of a
 * HEAD, which has no body) for an object whose ETag is the MD5 of other
 * bytes than none, or whose railio metadata names its size: rio_get
 * returned 0, success, for an object of 50000 bytes (an empty object is
 * checked by nothing). Such a lookup is a server fault now (RIO_ESERVER
 * once its tries are spent), not an empty object; an object that is
 * empty reads empty.
 */
TEST(lookup_of_zero_bytes_against_its_etag_is_no_empty_object)
{
    enum { N = 50000 };
    struct rio_desc d;
    int64_t alloc0;
    struct rio_client *c = fault_start(&alloc0, "get_one=off");
    uint8_t *src = put_pattern(c, "F_headzero_0/obj", N, 74), *dst = malloc(CH);

    T_NOTNULL(dst);
    foreign_put("F_headzero_0/foreign", src, N);
    foreign_put("F_headzero_0/empty", src, 0);
    const char *keys[] = {"F_headzero_0/obj", "F_headzero_0/foreign"};
    for (int i = 0; i < 2; i++) {
        int64_t got = rio_get(c, keys[i], dst, CH, NULL);
        if (got == 0)
            T_FAIL("%s: an object of %u bytes read as empty", keys[i], (unsigned)N);
        T_ERR(got, RIO_ESERVER);
        T_ERR(rio_stat(c, keys[i], &d), RIO_ESERVER);
    }
    T_EQ(rio_get(c, "F_headzero_0/empty", dst, CH, NULL), 0);
    close_free(c, alloc0, src, dst);
}

/* A 403 to a GET (wrong credentials, a clock off the server's, a policy):
 * the error's detail says what the server answered, its <Code> and
 * <Message>, as a lookup's says; it said "permission denied" and nothing
 * more (the lookup's HEAD, whose answer has no body, then says what a 403
 * may mean). Every way in: rio_get (one request), the reader, the batch,
 * and a GET looked up first. */
static void denied_says_why(int64_t got)
{
    T_ERR(got, -EACCES);
    T_NOTNULL(
        strstr(rio_error_detail(), "GET key F_deny_0/k: HTTP 403 AccessDenied: Access Denied"));
}

TEST(denied_get_says_what_the_server_answered)
{
    int64_t alloc0;
    uint8_t dst[64];
    struct rio_desc d;
    struct rio_reader *rd = NULL;
    struct rio_op op = {.type = RIO_OP_GET, .key = "F_deny_0/k", .buf = dst, .len = sizeof(dst)};

    struct rio_client *c = fault_start(&alloc0, NULL);
    denied_says_why(rio_get(c, "F_deny_0/k", dst, sizeof(dst), NULL));
    denied_says_why(rio_reader_open(c, "F_deny_0/k", 0, NULL, &rd));
    T_TRUE(rd == NULL);
    T_EQ(rio_batch(c, &op, 1, NULL), 0);
    T_ERR(op.result, -EACCES);
    T_ERR(rio_stat(c, "F_deny_0/k", &d), -EACCES);
    T_NOTNULL(strstr(rio_error_detail(),
                     "HEAD key F_deny_0/k: HTTP 403 (a HEAD's answer gives no reason"));
    su_close(c, alloc0);
    c = fault_start(&alloc0, "get_one=off");
    T_ERR(rio_get(c, "F_deny_0/k", dst, sizeof(dst), NULL), -EACCES);
    T_NOTNULL(strstr(rio_error_detail(), "HTTP 403 (a HEAD's answer gives no reason"));
    su_close(c, alloc0);
}

/* The detail names what the store answered to the last failed attempt,
 * not an earlier one's: a GET answered 503 SlowDown once, then damaged on
 * every try after (busyflip), fails on the damage, and its detail said
 * "HTTP 503 SlowDown" all the same. */
TEST(detail_is_the_last_failure_not_an_earlier_answer)
{
    int64_t alloc0;
    struct rio_client *c = fault_start(&alloc0, "get_one=off");
    uint8_t *src = put_pattern(c, "F_busyflip_1/k", 100000, 7);
    uint8_t *dst = malloc(100000);

    T_TRUE(rio_get(c, "F_busyflip_1/k", dst, 100000, NULL) < 0);
    T_NOTNULL(strstr(rio_error_detail(), "last try: chunk checksum mismatch"));
    T_TRUE(strstr(rio_error_detail(), "503") == NULL);
    T_TRUE(strstr(rio_error_detail(), "SlowDown") == NULL);
    close_free(c, alloc0, src, dst);
}

/* An empty object whose ETag is no MD5 (lieetag: the MD5 of other bytes),
 * on a client told its server's ETags are not MD5s (etag_check=0), is
 * empty: the refusal above of a HEAD of 0 bytes against its ETag made it
 * RIO_ESERVER. Where ETags are taken for MD5s it still is. */
TEST(empty_object_with_no_md5_etag_is_empty_with_etag_check_off)
{
    int64_t alloc0;
    uint8_t dst[16] = {0};
    struct rio_desc d;

    struct rio_client *c = fault_start(&alloc0, "get_one=off&etag_check=0");
    foreign_put("F_lieetag_0/empty", dst, 0);
    T_EQ(rio_get(c, "F_lieetag_0/empty", dst, sizeof(dst), NULL), 0);
    T_OK(rio_stat(c, "F_lieetag_0/empty", &d));
    T_EQ(d.size, 0u);
    rio_desc_cleanup(&d);
    su_close(c, alloc0);
    c = fault_start(&alloc0, "get_one=off");
    T_ERR(rio_get(c, "F_lieetag_0/empty", dst, sizeof(dst), NULL), RIO_ESERVER);
    su_close(c, alloc0);
}

/*
 * An object larger than the buffer is RIO_ETOOBIG after the one ranged GET
 * (docs/s3.md, "GET in one request"), whatever its checksum list: a
 * multipart object (its list in its sidecar), as every object of more than
 * a chunk is, was looked up after it (a HEAD and the sidecar's GET) only
 * to say its size, which the GET's Content-Range had said.
 */
TEST(small_get_of_a_multipart_object_too_big_in_one_request)
{
    struct rio_options o;
    int64_t alloc0;
    int port = su_fault_port();
    void *p = NULL;

    opts_start(&o, &alloc0);
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = put_pattern(c, "one/multi", OBJ, 63), *dst = malloc(CH);
    T_NOTNULL(dst);
    unsigned r0 = su_fault_count(port, "requests"), h0 = su_fault_count(port, "heads");
    T_ERR(rio_get(c, "one/multi", dst, CH, NULL), RIO_ETOOBIG);
    T_EQ(su_fault_count(port, "requests") - r0, 1u);
    T_EQ(su_fault_count(port, "heads") - h0, 0u);
    /* rio_get_alloc's guess outgrown: then looked up (HEAD, sidecar) and
     * read (17 ranged GETs), the object byte-exact */
    r0 = su_fault_count(port, "requests");
    T_EQ(rio_get_alloc(c, "one/multi", &p, NULL), (int64_t)OBJ);
    T_MEMEQ(p, src, OBJ);
    free(p);
    T_EQ(su_fault_count(port, "requests") - r0, 1u + 2u + 17u);
    close_free(c, alloc0, src, dst);
}

/* discard=1: bytes are counted, not stored (transport-only benchmarks);
 * with verify off the GET "succeeds" and the buffer is untouched. */
TEST(discard_mode_counts_only)
{
    struct rio_options o;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    uint8_t *dst, *src = prewrite(&o, alloc0, "discard/obj", OBJ, 10, &dst);

    o.verify = -1;
    struct rio_client *c = fault_client(&o, "discard=1");
    memset(dst, 0xA5, OBJ);
    T_EQ(rio_get(c, "discard/obj", dst, OBJ, NULL), (int64_t)OBJ);
    for (size_t k = 0; k < OBJ; k++)
        if (dst[k] != 0xA5)
            T_FAIL("discard stored byte %zu", k);
    close_free(c, alloc0, src, dst);
}

static bool sweep_stream; /* PUT as a stream of unknown size */

/*
 * One PUT+GET of the sweep object (3 parts): the first error, or 0. With k,
 * the k-th allocation from then on fails (*before: the allocation count at
 * that point). A stream's writer is opened before that: rio_writer_open
 * does not survive a failed allocation of its slot table (the engine's
 * writer_free walks the NULL table), which is the engine's to fix.
 */
static int sweep_once(struct rio_client *c, const uint8_t *src, uint8_t *dst, size_t n, uint64_t k,
                      uint64_t *before, int *pr, int64_t *gr)
{
    struct rio_writer *w = NULL;

    if (sweep_stream)
        T_OK(rio_writer_open(c, "sweep/obj", RIO_SIZE_UNKNOWN, 0, NULL, &w));
    if (before)
        *before = rio__alloc_calls();
    rio__alloc_fail_nth(k);
    if (sweep_stream) {
        *pr = 0;
        for (size_t off = 0; off < n && *pr == 0; off += 10000)
            *pr = rio_writer_write(w, src + off, n - off < 10000 ? n - off : 10000);
        if (*pr < 0)
            rio_writer_abort(w);
        else
            *pr = rio_writer_close(w, NULL);
    } else {
        *pr = rio_put(c, "sweep/obj", src, n, NULL, NULL);
    }
    memset(dst, 0, n);
    *gr = rio_get(c, "sweep/obj", dst, n, NULL);
    return *pr < 0 ? *pr : *gr < 0 ? (int)*gr : 0;
}

/*
 * Allocation failures (the 1st, 2nd, ... rio__malloc of a multipart PUT and
 * a GET, in turn): each run ends with exact bytes or a clean -ENOMEM, never a
 * crash, a torn object, a leaked block, an upload left behind, or a silent
 * loss of checksums; the client works normally afterwards.
 */
static void alloc_sweep(void)
{
    struct rio_options o;
    const size_t n = 2 * CH + 1000;
    int port = su_fault_port();
    unsigned hits = 0, fired, up;
    int pr;
    int64_t gr;
    uint64_t k;

    su_opts(&o, CH, 4);
    o.retry_attempts = 2;
    int64_t alloc0 = rio__alloc_outstanding();
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = su_pattern(n, 11), *dst = malloc(n);
    T_NOTNULL(dst);
    T_EQ(sweep_once(c, src, dst, n, 0, NULL, &pr, &gr), 0);
    T_OK(rio_delete(c, "sweep/obj"));
    const int64_t base = rio__alloc_outstanding();
    for (k = 1; k < 2000; k++) {
        uint64_t before = 0;
        sweep_once(c, src, dst, n, k, &before, &pr, &gr);
        rio__alloc_fail_nth(0);
        int hit = rio__alloc_calls() - before >= k;
        if (pr == 0) {
            if (gr >= 0) {
                T_EQ(gr, (int64_t)n);
                T_MEMEQ(dst, src, n);
            } else if (gr != -ENOMEM) {
                T_FAIL("k=%" PRIu64 ": GET %s", k, rio_errname((int)gr));
            }
            /* Checksums were not dropped on the way. */
            struct rio_desc d;
            T_OK(rio_stat(c, "sweep/obj", &d));
            T_NOTNULL(d.xxh);
            rio_desc_cleanup(&d);
        } else {
            if (pr != -ENOMEM)
                T_FAIL("k=%" PRIu64 ": PUT %s", k, rio_errname(pr));
            T_ERR(gr, RIO_ENOTFOUND);
        }
        su_idle(c);
        su_fault_stats(port, &fired, &up);
        T_EQ(up, 0u);
        int dr = rio_delete(c, "sweep/obj");
        T_TRUE(dr == 0 || dr == RIO_ENOTFOUND);
        if (rio__alloc_outstanding() != base)
            T_FAIL("k=%" PRIu64 " (put %s, get %s): %" PRId64 " block(s) leaked", k,
                   rio_errname(pr), gr < 0 ? rio_errname((int)gr) : "OK",
                   rio__alloc_outstanding() - base);
        T_EQ(sweep_once(c, src, dst, n, 0, NULL, &pr, &gr), 0);
        T_OK(rio_delete(c, "sweep/obj"));
        if (!hit)
            break;
        hits++;
    }
    fprintf(stderr, "  %u allocation failures injected\n", hits);
    T_GT(hits, 5u);
    T_LT(k, 2000u);
    close_free(c, alloc0, src, dst);
}

/* The same with the PUT as a stream of unknown size. */
TEST(alloc_fail_sweep_stream)
{
    sweep_stream = true;
    alloc_sweep();
}

TEST(alloc_fail_sweep)
{
    struct rio_options o;
    int pr;
    uint64_t k;

    alloc_sweep();
    su_opts(&o, CH, 4);
    o.retry_attempts = 2;

    /* Opening a client under allocation failure: a clean error, no leak. */
    for (k = 1; k < 1000; k++) {
        struct rio_client *cc = NULL;
        int64_t b0 = rio__alloc_outstanding();
        uint64_t before = rio__alloc_calls();
        rio__alloc_fail_nth(k);
        cc = fault_client_try(&o, &pr);
        rio__alloc_fail_nth(0);
        int hit = rio__alloc_calls() - before >= k;
        if (pr == 0)
            rio_client_destroy(cc);
        else
            T_ERR(pr, -ENOMEM);
        T_EQ(rio__alloc_outstanding(), b0);
        if (!hit)
            break;
    }
    T_LT(k, 1000u);
}

/* Bad configurations are clean errors at open. */
TEST(bad_urls)
{
    struct rio_options o;
    struct rio_client *c = NULL;

    su_opts(&o, CH, 4);
    unsetenv("RIO_S3_ENDPOINT");
    unsetenv("AWS_ENDPOINT_URL");
    T_ERR(rio_client_new("s3://bucket?endpoint=", &o, &c), RIO_EURL);
    T_ERR(rio_client_new("s3://b?endpoint=http://127.0.0.1:1&addressing=dns", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("s3://b?endpoint=http://127.0.0.1:1&addressing=virtual", &o, &c),
          RIO_EINVAL); /* "b" is too short a host label */
    T_ERR(rio_client_new("s3://b?endpoint=http://127.0.0.1:1&region=a/b", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("s3://b?endpoint=http://127.0.0.1:1&unsigned=maybe", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("s3://?endpoint=http://127.0.0.1:1", &o, &c), RIO_EURL);
    T_ERR(rio_client_new("s3://b?endpoint=ftp://127.0.0.1:1", &o, &c), RIO_EURL);
    T_ERR(rio_client_new("s3://b?endpoint=http://127.0.0.1:1&stall=abc", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("s3://b?endpoint=http://127.0.0.1:1&rails=a,,b", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("s3://b?endpoint=http://127.0.0.1:1&discard=maybe", &o, &c), RIO_EINVAL);
    T_ERR(rio_client_new("http://", &o, &c), RIO_EURL);
    T_NULL(c);
}

/*
 * Metadata retry is the engine's (docs/internals/s3.md): GET key (n bytes,
 * written first) through a metadata fault that fires once or twice; the
 * engine tries the lookup again and counts each failed try in the call's
 * retries (a retry inside the transport counted nothing). heads: the HEADs
 * the GET must have sent, or 0 for any.
 */
static void meta_fault_get(const char *key, size_t n, uint64_t seed, unsigned retries,
                           unsigned heads)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int port = su_fault_port();
    int64_t alloc0;

    opts_start(&o, &alloc0);
    /* (get_one=off: a small GET would send no HEAD) */
    struct rio_client *c = fault_client(&o, "get_one=off");
    uint8_t *src = put_pattern(c, key, n, seed), *dst = malloc(n);
    T_NOTNULL(dst);
    unsigned heads0 = su_fault_count(port, "heads");
    T_EQ(rio_get(c, key, dst, n, &call), (int64_t)n);
    T_MEMEQ(dst, src, n);
    if (heads)
        T_EQ(su_fault_count(port, "heads") - heads0, heads);
    T_EQ(st.retries[RIO_CLASS_SERVER], retries);
    close_free(c, alloc0, src, dst);
}

/* A HEAD answered 503 twice: three HEADs, two retries. One PutObject (half
 * a chunk), whose PUT sends no HEAD. */
TEST(head_503_retried_by_engine)
{
    meta_fault_get("F_head503_2/obj", CH / 2, 21, 2, 3);
}

/* A multipart object's sidecar answered 503: the lookup fails with that
 * class and the engine looks up again (HEAD and sidecar). */
TEST(sidecar_503_retried_by_engine)
{
    meta_fault_get("F_get503_1/obj", OBJ, 25, 1, 0);
}

static void sort_u64(uint64_t *v, int n)
{
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && v[j - 1] > v[j]; j--) {
            uint64_t x = v[j];
            v[j] = v[j - 1];
            v[j - 1] = x;
        }
}

/* A lookup of a multipart object is a HEAD and then its sidecar's GET on
 * the same kept-alive connection. The fault server (Python's http.server,
 * Nagle on) writes the sidecar's headers and body apart, so the body waits
 * for the headers' acknowledgement, which Linux delays 40 ms on such a
 * connection unless the client acknowledges at once (rio__s3_on_header).
 * The median of 7 lookups stays well under that. */
TEST(sidecar_not_held_by_a_delayed_ack)
{
    struct rio_options o;
    struct rio_desc d;
    int64_t alloc0;
    uint64_t ms[7];

    opts_start(&o, &alloc0);
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = put_pattern(c, "ack/obj", OBJ, 41);
    for (int i = 0; i < 7; i++) {
        uint64_t t0 = t_now_ms();
        T_OK(rio_stat(c, "ack/obj", &d));
        ms[i] = t_now_ms() - t0;
        T_EQ(d.size, (uint64_t)OBJ);
        T_EQ(d.nchunks, 17u);
        rio_desc_cleanup(&d);
    }
    sort_u64(ms, 7);
    fprintf(stderr, "lookups: min %llu, median %llu, max %llu ms\n", (unsigned long long)ms[0],
            (unsigned long long)ms[3], (unsigned long long)ms[6]);
    T_LT(ms[3], 30u);
    close_free(c, alloc0, src, NULL);
}

/* The same on the data path: a GET of an object smaller than a segment is
 * the response's headers and then its body, which the fault server holds
 * until the headers are acknowledged; the data connections (the multi's
 * shared cache) acknowledge them at once too. One path at depth 1, so every
 * GET after the first reuses one connection. */
TEST(small_get_not_held_by_a_delayed_ack)
{
    enum { N = 7, SMALL = 2000 };
    struct rio_options o;
    int64_t alloc0;
    uint64_t ms[N];
    uint8_t buf[SMALL];

    opts_start(&o, &alloc0);
    o.paths = 1;
    o.depth = 1;
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = put_pattern(c, "ack/small", SMALL, 43);
    T_EQ(rio_get(c, "ack/small", buf, SMALL, NULL), (int64_t)SMALL);
    for (int i = 0; i < N; i++) {
        memset(buf, 0, SMALL);
        uint64_t t0 = t_now_ms();
        T_EQ(rio_get(c, "ack/small", buf, SMALL, NULL), (int64_t)SMALL);
        ms[i] = t_now_ms() - t0;
        T_MEMEQ(buf, src, SMALL);
    }
    sort_u64(ms, N);
    fprintf(stderr, "small GETs: min %llu, median %llu, max %llu ms\n", (unsigned long long)ms[0],
            (unsigned long long)ms[N / 2], (unsigned long long)ms[N - 1]);
    T_LT(ms[N / 2], 30u);
    close_free(c, alloc0, src, NULL);
}

/* The tries of a metadata op are the client's retries=, not a number of
 * the transport's own: 1 is one HEAD, 4 is four. */
TEST(metadata_tries_follow_retries)
{
    static const unsigned tries[] = {1, 4};
    int port = su_fault_port();
    int64_t alloc0 = rio__alloc_outstanding();

    for (unsigned i = 0; i < 2; i++) {
        struct rio_options o;
        struct rio_desc d;
        char key[64];

        su_opts(&o, CH, 4);
        o.retry_attempts = tries[i];
        struct rio_client *c = fault_client(&o, NULL);
        snprintf(key, sizeof(key), "F_head503_0/tries%u", tries[i]);
        free(put_pattern(c, key, CH / 2, 22));
        unsigned heads0 = su_fault_count(port, "heads");
        int ret = rio_stat(c, key, &d);
        if (ret != RIO_ESERVER && ret != RIO_ERETRIES)
            T_FAIL("retries=%u: rio_stat: %s", tries[i], rio_errname(ret));
        T_EQ(su_fault_count(port, "heads") - heads0, tries[i]);
        su_close(c, alloc0);
    }
}

/*
 * A CompleteMultipartUpload the server takes longer on than op_timeout
 * (S3: "could take several minutes"; it answers 200 at once and sends
 * spaces meanwhile), or than the stall time with no byte at all, is waited
 * for: each took op_timeout, then the object was asked, was not there yet,
 * and the PUT failed RIO_EUNKNOWN (an object that then appeared). Here
 * op_timeout 2 s and stall 1 s against 4 s of either.
 */
TEST(slow_complete_is_waited_for)
{
    const char *keys[] = {"F_completeslow_1/obj", "F_completequiet_1/obj"};
    int64_t alloc0;

    struct rio_options o;
    opts_start(&o, &alloc0);
    o.op_timeout_ms = 2000;
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *dst = malloc(OBJ);
    for (unsigned k = 0; k < 2; k++) {
        uint64_t t0 = t_now_ms();
        uint8_t *src = put_pattern(c, keys[k], OBJ, 31 + k);
        T_GE(t_now_ms() - t0, 3500u);
        T_EQ(rio_get(c, keys[k], dst, OBJ, NULL), (int64_t)OBJ);
        T_MEMEQ(dst, src, OBJ);
        free(src);
    }
    close_free(c, alloc0, NULL, dst);
}

/*
 * CompleteMultipartUpload whose answer is lost (the server completed it,
 * then reset the connection): it is not sent again; the transport asks the
 * object (HEAD: its railio id is this upload's) and the PUT succeeds with
 * one complete on the wire.
 */
TEST(lost_complete_answer_not_resent)
{
    int port = su_fault_port();
    int64_t alloc0;

    struct rio_client *c = fault_start(&alloc0, NULL);
    unsigned completes0 = su_fault_count(port, "completes");
    uint8_t *src = put_pattern(c, "F_completelost_1/obj", OBJ, 23), *dst = malloc(OBJ);
    T_NOTNULL(dst);
    T_EQ(su_fault_count(port, "completes") - completes0, 1u);
    T_EQ(uploads_left(port), 0u);
    T_EQ(rio_get(c, "F_completelost_1/obj", dst, OBJ, NULL), (int64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    close_free(c, alloc0, src, dst);
}

/*
 * A complete whose answer is lost and whose object is gone by the time the
 * transport asks (another client deleted it): whether the complete took
 * effect cannot be known, so the PUT is RIO_EUNKNOWN, the complete is not
 * sent again (by the transport, curl or the engine), and no upload is left.
 */
TEST(unknown_complete_outcome_is_eunknown)
{
    int port = su_fault_port();
    int64_t alloc0;

    struct rio_client *c = fault_start(&alloc0, NULL);
    uint8_t *src = su_pattern(OBJ, 26);
    unsigned completes0 = su_fault_count(port, "completes");
    T_ERR(rio_put(c, "F_completegone_1/obj", src, OBJ, NULL, NULL), RIO_EUNKNOWN);
    T_EQ(su_fault_count(port, "completes") - completes0, 1u);
    T_EQ(uploads_left(port), 0u);
    free(src);
    su_close(c, alloc0);
}

/*
 * A complete answered 503 did not take effect: the engine commits again
 * (RIO_CAP_COMMIT_RETRY: the upload is left as it was), counting the failed
 * try; with retries=1 it is not tried again, and the PUT leaves nothing
 * behind: no upload, no sidecar, no object.
 */
TEST(complete_503_retried_by_engine)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    int port = su_fault_port();
    int64_t alloc0;

    opts_start(&o, &alloc0);
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = su_pattern(OBJ, 24), *dst = malloc(OBJ);
    T_NOTNULL(dst);
    unsigned completes0 = su_fault_count(port, "completes");
    T_OK(rio_put(c, "F_complete503_1/obj", src, OBJ, &call, NULL));
    T_EQ(su_fault_count(port, "completes") - completes0, 2u);
    T_EQ(st.retries[RIO_CLASS_SERVER], 1u);
    T_EQ(rio_get(c, "F_complete503_1/obj", dst, OBJ, NULL), (int64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    su_close(c, alloc0);

    o.retry_attempts = 1;
    c = fault_client(&o, NULL);
    unsigned objects0 = su_fault_count(port, "objects");
    completes0 = su_fault_count(port, "completes");
    int ret = rio_put(c, "F_complete503_0/never", src, OBJ, NULL, NULL);
    if (ret != RIO_ESERVER && ret != RIO_ERETRIES)
        T_FAIL("rio_put: %s", rio_errname(ret));
    T_EQ(su_fault_count(port, "completes") - completes0, 1u);
    T_EQ(uploads_left(port), 0u);
    T_EQ(su_fault_count(port, "objects"), objects0);
    T_ERR(rio_stat(c, "F_complete503_0/never", &d), RIO_ENOTFOUND);
    close_free(c, alloc0, src, dst);
}

/*
 * A complete answered 200 with an empty body (neither a
 * CompleteMultipartUploadResult nor an <Error>) that did not complete the
 * upload: the PUT succeeded although nothing was published (the object
 * was asked, was not this upload's, and its ETag was computed instead).
 * Such an answer says nothing: a fresh object there is not this upload's,
 * so the PUT is not reported published.
 */
TEST(empty_complete_answer_not_taken_for_success)
{
    struct rio_options o;
    struct rio_desc d;
    int port = su_fault_port();
    int64_t alloc0;

    opts_start(&o, &alloc0);
    o.retry_attempts = 1;
    struct rio_client *c = fault_client(&o, NULL);
    uint8_t *src = su_pattern(OBJ, 27);
    unsigned completes0 = su_fault_count(port, "completes");
    int ret = rio_put(c, "F_completeempty_0/never", src, OBJ, NULL, NULL);
    T_LT(ret, 0);
    T_EQ(su_fault_count(port, "completes") - completes0, 1u);
    T_EQ(uploads_left(port), 0u);
    T_ERR(rio_stat(c, "F_completeempty_0/never", &d), RIO_ENOTFOUND);
    free(src);
    su_close(c, alloc0);
}

/*
 * A refused option names itself on stderr, as the URL or the environment
 * spelled it (content_md5=sometimes, RIO_S3_DISCARD=maybe), through the
 * library's one parser (the module reaches it through its host table). The
 * client is not created: RIO_EINVAL.
 */
static void refused_says(const char *url, const char *want)
{
    struct rio_options o;

    su_opts(&o, CH, 4);
    t_client_refused(url, &o, want);
}

TEST(refused_option_names_itself)
{
#define EP "s3://b?endpoint=http://127.0.0.1:1&"
    refused_says(EP "content_md5=sometimes", "railio: content_md5=sometimes: expected on, off");
    refused_says(EP "nt_copy=maybe", "railio: nt_copy=maybe: expected on or off");
    refused_says(EP "dns_shuffle=2", "railio: dns_shuffle=2: expected on or off");
    refused_says(EP "etag_check=maybe", "railio: etag_check=maybe: expected on or off");
    refused_says(EP "stall=soon", "railio: stall=soon: expected a duration");
    refused_says(EP "stall=0", "railio: stall=0: expected a duration above 0");
    refused_says(EP "connect_timeout=1fortnight", "railio: connect_timeout=1fortnight:");
    refused_says(EP "bufsize=100", "railio: bufsize=100: expected 0 or a size (e.g. 64K, 1M) from "
                                   "1024 to ");
    refused_says(EP "min_part=lots", "railio: min_part=lots: expected a size (e.g. 64K, 1M) up to "
                                     "5368709120");
    refused_says(EP "upbufsize=4M", "railio: upbufsize=4M: expected 0 or a size (e.g. 64K, 1M) "
                                    "from 16384 to 2097152");
    T_OK(setenv("RIO_S3_RCVBUF", "2G", 1));
    refused_says(EP "stall=1s", "railio: RIO_S3_RCVBUF=2G: expected a size (e.g. 64K, 1M) up to "
                                "1073741824");
    T_OK(unsetenv("RIO_S3_RCVBUF"));
    T_OK(setenv("RIO_S3_DEBUG", "maybe", 1));
    refused_says(EP "stall=1s", "railio: RIO_S3_DEBUG=maybe: expected on or off");
    T_OK(unsetenv("RIO_S3_DEBUG"));
    refused_says(EP "rails=a,,b", "railio: rails=a,,b: expected 1 to");
    T_OK(setenv("RIO_S3_DISCARD", "maybe", 1));
    refused_says(EP "stall=1s", "railio: RIO_S3_DISCARD=maybe: expected on or off");
    T_OK(unsetenv("RIO_S3_DISCARD"));
#undef EP
    /* The one boolean syntax: ON, yes and false are words it knows. */
    struct rio_options o;
    struct rio_client *c = NULL;
    su_opts(&o, CH, 4);
    T_OK(rio_client_new("s3://b?endpoint=http://127.0.0.1:1&nt_copy=ON&dns_shuffle=yes"
                        "&content_md5=false",
                        &o, &c));
    rio_client_destroy(c);
}

/* A server that is not there: refused connections end the call in bounded
 * time, as the metadata request's error (-ECONNREFUSED) or, for a small
 * GET (one ranged GET, no lookup), as a path error: RIO_ENOPATH, whose
 * detail names the refusal. */
TEST(refused_connection_fails_in_bounded_time)
{
    struct rio_options o;
    struct rio_desc d;
    int64_t alloc0;
    int port = su_free_port();

    opts_start(&o, &alloc0);
    struct rio_client *c = client_at(&o, "s3://b?endpoint=http://127.0.0.1:%d", port);
    uint64_t t0 = su_now_ms();
    T_ERR(rio_stat(c, "k", &d), -ECONNREFUSED);
    uint8_t buf[16];
    T_ERR(rio_get(c, "k", buf, sizeof(buf), NULL), RIO_ENOPATH);
    T_NOTNULL(strstr(rio_error_detail(), "connection refused"));
    T_LT(su_now_ms() - t0, 5000u);
    su_close(c, alloc0);
    opts_start(&o, &alloc0);
    c = client_at(&o, "s3://b?endpoint=http://127.0.0.1:%d&get_one=off", port);
    T_ERR(rio_get(c, "k", buf, sizeof(buf), NULL), -ECONNREFUSED);
    su_close(c, alloc0);
}

/* The keys under prefix, paging in pages of one until the token runs out
 * (as `railio ls -r` does; at most 10 pages). */
static unsigned listed_in_pages_of_one(struct rio_client *c, const char *prefix)
{
    struct rio_list_args a = {.max_keys = 1, .prefix = prefix};
    struct rio_list_page p;
    char tok[RIO_LIST_TOKEN_MAX + 1] = "";
    unsigned keys = 0, pages = 0;

    do {
        a.token = tok[0] ? tok : NULL;
        T_OK(rio_list(c, &a, &p, NULL));
        keys += p.n;
        snprintf(tok, sizeof(tok), "%s", p.next_token);
        rio_list_page_cleanup(&p);
        T_LT(++pages, 10u);
    } while (tok[0]);
    return keys;
}

/* ListObjectsV2 answers that never end: every page empty and not the last,
 * the continuation tokens going round T1 -> T2 -> T1 (bucket
 * lie-emptycircle of the fault server). Paging until the token runs out,
 * as `railio ls -r` does, went on for ever (83,000 requests in 10 s): it
 * ends with RIO_EPROTO after 64 empty pages in a row. An honest listing of
 * the same server in pages of one still pages through to its end. */
TEST(list_empty_pages_in_a_circle_end)
{
    struct rio_options o;
    struct rio_list_args a;
    struct rio_list_page p;
    char tok[RIO_LIST_TOKEN_MAX + 1] = "";
    unsigned pages = 0;
    int64_t alloc0;
    int ret;

    opts_start(&o, &alloc0);
    struct rio_client *c = fault_client(&o, NULL);
    free(put_pattern(c, "list/a", 10, 1));
    free(put_pattern(c, "list/b", 10, 2));
    T_EQ(listed_in_pages_of_one(c, "list/"), 2u);
    su_close(c, alloc0);

    c = client_at(&o, "s3://lie-emptycircle?endpoint=http://127.0.0.1:%d&stall=1s",
                  su_fault_port());
    memset(&a, 0, sizeof(a));
    uint64_t t0 = su_now_ms();
    for (;;) {
        a.token = tok[0] ? tok : NULL;
        ret = rio_list(c, &a, &p, NULL);
        if (ret < 0)
            break;
        T_EQ(p.n, 0u);
        T_LT(++pages, 1000u);
        snprintf(tok, sizeof(tok), "%s", p.next_token);
        rio_list_page_cleanup(&p);
    }
    T_ERR(ret, RIO_EPROTO);
    T_LE(pages, 64u);
    T_NOTNULL(strstr(rio_error_detail(), "empty pages in a row"));
    T_LT(su_now_ms() - t0, 10000u);
    su_close(c, alloc0);
}

/* A listing answer without IsTruncated (S3 always sends it) but with a
 * NextContinuationToken goes on: it ended there, and `railio cp -r` or
 * `rm -r` would have done part of the keys and said it succeeded. */
TEST(list_without_is_truncated_goes_on_by_its_token)
{
    struct rio_options o;
    int64_t alloc0;

    opts_start(&o, &alloc0);
    struct rio_client *c =
        client_at(&o, "s3://lie-notrunc?endpoint=http://127.0.0.1:%d", su_fault_port());
    for (int i = 0; i < 3; i++) {
        char key[16];
        snprintf(key, sizeof(key), "nt/%d", i);
        T_OK(rio_put(c, key, "x", 1, NULL, NULL));
    }
    T_EQ(listed_in_pages_of_one(c, "nt/"), 3u);
    su_close(c, alloc0);
}

/* `railio ls` one level down a bucket of a million directories (the fault
 * server's lie-manydirs: 1000 pages of 1000 common prefixes, in byte
 * order) shows each once and keeps only the last it showed: it kept every
 * one, 61 MB at its peak here against 15 for the listing alone (bounded
 * below at 40 MB). */
TEST(cli_ls_of_a_million_directories_in_bounded_memory)
{
    const char *dir = t_scratch_dir("rio-s3-manydirs");
    struct rusage ru;

    setenv("AWS_ACCESS_KEY_ID", "ak", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "sk", 1);
    T_EQ(t_sh("%s ls 's3://lie-manydirs/?endpoint=http://127.0.0.1:%d' >%s/out", cli_bin(),
              su_fault_port(), dir),
         0);
    T_EQ(getrusage(RUSAGE_CHILDREN, &ru), 0);
    printf("railio ls of 1000000 prefixes: peak RSS %ld KiB\n", ru.ru_maxrss);
    /* Every one, once, in order. */
    T_EQ(t_sh("test $(wc -l <%s/out) -eq 1000000 && test $(uniq %s/out | wc -l) -eq 1000000 && "
              "LC_ALL=C sort -c %s/out && grep -q ' d0999999/$' %s/out",
              dir, dir, dir, dir),
         0);
    /* (A sanitizer's quarantine keeps the pages freed: no bound there.) */
    if (!T_SANITIZED)
        T_LT(ru.ru_maxrss, 40L * 1024);
}

/* A FIFO where the AWS credentials file, the config file or the CA bundle
 * should be (someone else's planted file, a misconfigured mount): the open
 * waited for a writer for ever. Now each is refused at once as "not a
 * regular file", naming the file, with nothing sent. */
TEST(fifo_for_a_settings_file_refused)
{
    const char *dir = t_scratch_dir("rio-s3-fifo");
    char fifo[600], home[600], url[256];
    struct rio_client *c = NULL;
    static const char *const vars[] = {"AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",
                                       "AWS_CA_BUNDLE"};

    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    T_OK(mkfifo(fifo, 0600));
    snprintf(home, sizeof(home), "%s/home", dir);
    T_OK(mkdir(home, 0700));
    setenv("HOME", home, 1);
    setenv("AWS_ACCESS_KEY_ID", "ak", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "sk", 1);
    snprintf(url, sizeof(url), "s3://b?endpoint=https://127.0.0.1:1");
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
        setenv(vars[i], fifo, 1);
        uint64_t t0 = t_now_ms();
        T_ERR(rio_client_new(url, NULL, &c), RIO_EINVAL);
        T_LT(t_now_ms() - t0, 5000u);
        T_NOTNULL(strstr(rio_error_detail(), "not a regular file"));
        T_NOTNULL(strstr(rio_error_detail(), fifo));
        unsetenv(vars[i]);
    }
}
#endif
