/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * railio:// through a man in the middle (tests/harness/mitm.py) that flips a
 * byte, truncates and closes, stalls, duplicates or delays a frame, in
 * either direction, between the client and a real railiod. Whatever it
 * does: not one wrong byte is handed to a caller, not one wrong key or wrong
 * object is written (every key is read back through a clean connection),
 * and every call ends within op_timeout + 1 s with success or an error that
 * says what happened. The client's data connections go through the proxy
 * too (rails= names it: the server's HELLO would announce its own address).
 *
 * Also the lost commit answer (issue 13, item 6): the commit is idempotent,
 * so rio_put succeeds with the generation the server committed; when no
 * answer can be had it says RIO_EUNKNOWN, and the object may indeed be
 * there; an upload the server dropped before its commit makes rio_put start
 * over from its buffer.
 */
#include "mitm_env.h"
#include "server_disk_util.h"
#include "tcp_util.h"

#define M_OP_TIMEOUT_MS 2000u
#define M_SIZE (3 * TU_CHUNK + 123) /* four chunks, the last one short */

struct mt {
    struct srv_env e;
    struct mitm_env m;
    struct tu clean; /* straight to the server */
};

static void mt_start(struct mt *x, const char *const *srv_args, const char *const *mitm_args)
{
    struct rio_options o;
    char url[256];

    srv_start(&x->e, srv_args);
    mitm_start(&x->m, x->e.addr[0], mitm_args);
    tu_opts(&o);
    tu_url(url, sizeof(url), &x->e, NULL);
    tu_open(&x->clean, url, &o);
}

static void mt_stop(struct mt *x)
{
    tu_close(&x->clean);
    mitm_stop(&x->m);
    T_EQ(srv_stop(&x->e), 0);
}

/* A client through the proxy: its control and data connections both. */
static void mt_client(struct mt *x, struct tu *u, const char *extra, struct rio_options *o)
{
    char url[512];

    snprintf(url, sizeof(url), "railio://%s?rails=%s%s%s", x->m.addr, x->m.addr, extra ? "&" : "",
             extra ? extra : "");
    tu_open(u, url, o);
}

static void mt_opts(struct rio_options *o)
{
    tu_opts(o);
    o->op_timeout_ms = M_OP_TIMEOUT_MS;
    o->deadline_ms = 20000;
}

/* A pattern seed per (tag, i): no two keys of the file share their bytes. */
static uint64_t xxh_seed(const char *tag, unsigned i)
{
    uint64_t h = 1469598103934665603ull;
    for (; *tag; tag++)
        h = (h ^ (uint8_t)*tag) * 1099511628211ull;
    return h ^ ((uint64_t)i << 40) ^ i;
}

/* What a key must hold: the pattern of seed, or (put < 0 and not unknown)
 * nothing new. */
struct expect {
    char key[64];
    uint64_t seed;
    int put; /* rio_put's result */
};

/* Through the clean client: a key whose PUT succeeded (or whose outcome is
 * unknown and that exists) holds exactly its bytes; one whose PUT failed
 * holds nothing. */
static void check_keys(struct mt *x, const struct expect *ex, unsigned n)
{
    uint8_t *b = malloc(M_SIZE + 1);

    for (unsigned i = 0; i < n; i++) {
        memset(b, 0xEE, M_SIZE + 1);
        int64_t got = rio_get(x->clean.c, ex[i].key, b, M_SIZE, NULL);
        if (ex[i].put >= 0 || (ex[i].put == RIO_EUNKNOWN && got != RIO_ENOTFOUND)) {
            if (got != (int64_t)M_SIZE)
                T_FAIL("%s: PUT said %d, clean GET %" PRId64 " %s", ex[i].key, ex[i].put, got,
                       got < 0 ? rio_errname((int)got) : "");
            int64_t bad = t_check_pattern(b, M_SIZE, ex[i].seed);
            if (bad >= 0)
                T_FAIL("%s: wrong byte at %" PRId64 " (a wrong object written)", ex[i].key, bad);
        } else if (got != RIO_ENOTFOUND) {
            T_FAIL("%s: PUT failed (%s) but the key holds %" PRId64, ex[i].key,
                   rio_errname(ex[i].put), got);
        }
    }
    free(b);
}

/* The errors a damaged link may end a call with: each says what happened. */
static void check_err(int64_t ret, const char *what)
{
    static const int ok[] = {RIO_ERETRIES, RIO_ENOPATH, RIO_EUNKNOWN, RIO_ENOUPLOAD,
                             -ETIMEDOUT,   -ECONNRESET, -EPROTO};
    if (ret >= 0)
        return;
    for (unsigned i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
        if (ret == ok[i])
            return;
    T_FAIL("%s: %" PRId64 " %s (%s): not an error a damaged link explains", what, ret,
           rio_errname((int)ret), rio_strerror((int)ret));
}

/*
 * nput PUTs of fresh keys then nget GETs of them through the proxy (a new
 * client, so the proxy's frame count starts with its greeting). Every GET
 * that succeeds is byte-exact; every call ends within op_timeout + 1 s;
 * errors are ones a damaged link explains. Returns the retries counted
 * (engine retries, re-plans and control connection tries again).
 */
static uint64_t workload(struct mt *x, const char *tag, unsigned nput, unsigned nget,
                         struct expect *ex, const char *extra)
{
    struct rio_options o;
    struct tu u;
    uint64_t retries = 0;
    uint8_t *src = malloc(M_SIZE), *dst = malloc(M_SIZE + 1);

    mt_opts(&o);
    mt_client(x, &u, extra, &o);
    for (unsigned i = 0; i < nput; i++) {
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        snprintf(ex[i].key, sizeof(ex[i].key), "mitm/%s/%u", tag, i);
        ex[i].seed = xxh_seed(tag, i);
        t_fill_pattern(src, M_SIZE, ex[i].seed);
        uint64_t t0 = t_now_ms();
        ex[i].put = rio_put(u.c, ex[i].key, src, M_SIZE, &call, NULL);
        uint64_t took = t_now_ms() - t0;
        if (took > M_OP_TIMEOUT_MS + 1000)
            T_FAIL("%s: PUT took %" PRIu64 " ms (%s)", ex[i].key, took, rio_errname(ex[i].put));
        check_err(ex[i].put, ex[i].key);
        retries += st.retries_total + st.replans;
    }
    for (unsigned k = 0; k < nget; k++) {
        unsigned i = k % nput;
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        memset(dst, 0xEE, M_SIZE + 1);
        uint64_t t0 = t_now_ms();
        int64_t got = rio_get(u.c, ex[i].key, dst, M_SIZE, &call);
        uint64_t took = t_now_ms() - t0;
        if (took > M_OP_TIMEOUT_MS + 1000)
            T_FAIL("%s: GET took %" PRIu64 " ms (%" PRId64 ")", ex[i].key, took, got);
        if (got >= 0) {
            if (got != (int64_t)M_SIZE || dst[M_SIZE] != 0xEE)
                T_FAIL("%s: GET returned %" PRId64 " bytes", ex[i].key, got);
            int64_t bad = t_check_pattern(dst, M_SIZE, ex[i].seed);
            if (bad >= 0)
                T_FAIL("%s: wrong byte delivered at %" PRId64, ex[i].key, bad);
        } else if (!(got == RIO_ENOTFOUND && ex[i].put < 0)) {
            check_err(got, ex[i].key);
        }
        retries += st.retries_total + st.replans;
    }
    retries += tu_tcp(u.c).ctl_retries;
    tu_close(&u);
    free(src);
    free(dst);
    return retries;
}

/*
 * One round of ten PUTs and ten GETs (keys tag-*) through a proxy started
 * with args: every PUT succeeds, every key reads back right. Two frames are
 * due per round; the second may be cut off with its connection (a request
 * half sent when the first poisoned it) and never leave the proxy at all:
 * one or two faults applied, returned. The client's retries add to *retries.
 */
static int fault_round(const char *const *args, const char *tag, unsigned r, uint64_t *retries)
{
    struct mt x;
    struct expect ex[10];

    mt_start(&x, NULL, args);
    *retries += workload(&x, tag, 10, 10, ex, "conns=2");
    for (unsigned i = 0; i < 10; i++)
        if (ex[i].put < 0)
            T_FAIL("%s: PUT failed: %s", ex[i].key, rio_errname(ex[i].put));
    check_keys(&x, ex, 10);
    int f = mitm_faults(&x.m);
    if (f < 1 || f > 2)
        T_FAIL("round %u: %d faults applied, want 1 or 2", r, f);
    mt_stop(&x);
    return f;
}

/* ------------------------------------------------- duplicated frames */

/*
 * A duplicated frame (c2s: a PUT_CHUNK or any request is served twice and
 * answered twice; s2c: an answer comes twice) poisons that connection only,
 * and the chunk is retried on a fresh one: 50 PUTs and 50 GETs succeed with
 * the right bytes, the retries counted. Five proxies, each duplicating two
 * frames somewhere in its ten PUTs and ten GETs.
 */
static void dup_rounds(const char *dir)
{
    uint64_t retries = 0;
    int faults = 0;

    for (unsigned r = 0; r < 5; r++) {
        char nth[16], tag[32];
        snprintf(nth, sizeof(nth), "%u", 6 + 9 * r);
        const char *args[] = {"--proto", "railio", "--mode",  "dup", "--dir", dir,
                              "--nth",   nth,      "--count", "2",   NULL};
        snprintf(tag, sizeof(tag), "dup-%s-%u", dir, r);
        faults += fault_round(args, tag, r, &retries);
    }
    T_GE(faults, 5);
    T_GE(retries, 1u);
}

TEST(duplicated_frame_c2s_50_puts_50_gets)
{
    dup_rounds("c2s");
}

TEST(duplicated_frame_s2c_50_puts_50_gets)
{
    dup_rounds("s2c");
}

/* One flipped byte in an answer's header (a READ answer's among them): the
 * header check fails, that connection is dropped and its ops retried. */
TEST(flipped_answer_header_50_puts_50_gets)
{
    uint64_t retries = 0;
    int faults = 0;

    for (unsigned r = 0; r < 5; r++) {
        char nth[16], off[16], tag[32];
        snprintf(nth, sizeof(nth), "%u", 30 + 3 * r); /* among the GETs' answers */
        snprintf(off, sizeof(off), "%u", (7 * r + 3) % RIO_PROTO_HDR_LEN);
        const char *args[] = {"--proto", "railio",  "--mode", "flip",     "--dir", "s2c", "--nth",
                              nth,       "--count", "2",      "--offset", off,     NULL};
        snprintf(tag, sizeof(tag), "fliph-%u", r);
        faults += fault_round(args, tag, r, &retries);
    }
    T_GE(faults, 5);
    T_GE(retries, (uint64_t)faults);
}

/* ------------------------------------------------------ every mode */

/*
 * Each mode in each direction, one fault (at a frame in the middle of four
 * PUTs and four GETs): 0 wrong bytes delivered, 0 wrong keys written, every
 * call within op_timeout + 1 s. A flip hits a header here (a flip in a
 * body is caught once frames carry a body check; a READ answer's body is
 * caught by the chunk's xxh3 already).
 */
TEST(every_mode_every_direction)
{
    static const char *const modes[] = {"flip", "truncate", "stall", "dup", "delay"};
    static const char *const dirs[] = {"c2s", "s2c"};

    for (unsigned mi = 0; mi < 5; mi++)
        for (unsigned di = 0; di < 2; di++) {
            struct mt x;
            struct expect ex[4];
            char tag[32], nth[16];
            const char *args[16];
            int n = 0;
            snprintf(nth, sizeof(nth), "%u", 7 + 2 * mi + di);
            args[n++] = "--proto";
            args[n++] = "railio";
            args[n++] = "--mode";
            args[n++] = modes[mi];
            args[n++] = "--dir";
            args[n++] = dirs[di];
            args[n++] = "--nth";
            args[n++] = nth;
            args[n++] = "--seed";
            args[n++] = nth;
            if (mi == 0) {
                args[n++] = "--offset";
                args[n++] = di == 0 ? "17" : "9";
            }
            if (mi == 4) {
                args[n++] = "--delay-ms";
                args[n++] = "500";
            }
            args[n] = NULL;
            mt_start(&x, NULL, args);
            snprintf(tag, sizeof(tag), "%s-%s", modes[mi], dirs[di]);
            workload(&x, tag, 4, 4, ex, NULL);
            check_keys(&x, ex, 4);
            if (mitm_faults(&x.m) != 1)
                T_FAIL("%s: %d faults applied, want 1", tag, mitm_faults(&x.m));
            mt_stop(&x);
        }
}

/* ------------------------------------------------------------ LOOKUP */

/* The answer to a GET's LOOKUP (s2c frame 2: the greeting's answer is 1)
 * damaged or stalled: the LOOKUP goes again on a fresh control connection.
 * The last pass damages the greeting itself, at rio_client_new. */
TEST(lookup_answer_damaged_or_stalled_is_retried)
{
    static const char *const modes[] = {"flip", "stall", "truncate", "flip"};

    for (unsigned mi = 0; mi < 4; mi++) {
        struct mt x;
        struct rio_options o;
        struct tu u;
        const char *args[] = {"--proto",  "railio", "--mode", modes[mi],
                              "--dir",    "s2c",    "--nth",  mi == 3 ? "1" : "2",
                              "--offset", "9",      NULL};
        mt_start(&x, NULL, args);
        tu_put(x.clean.c, "mitm/lookup", M_SIZE, 5);
        mt_opts(&o);
        mt_client(&x, &u, NULL, &o);
        uint64_t t0 = t_now_ms();
        tu_get_check(u.c, "mitm/lookup", M_SIZE, 5, 0);
        T_LE(t_now_ms() - t0, M_OP_TIMEOUT_MS + 1000u);
        T_EQ(mitm_faults(&x.m), 1);
        T_EQ(tu_tcp(u.c).ctl_retries, 1u);
        tu_close(&u);
        mt_stop(&x);
    }
}

/* ------------------------------------------------------------ GET_ONE */

/*
 * A GET in one exchange (GET_ONE) whose answer is damaged: a flipped byte
 * in its descriptor (the frame check fails: the connection is dropped and
 * the GET goes again on a fresh one) or in its bytes (RIO_ECHECKSUM: they
 * are fetched again), the answer cut with its connection, stalled past the
 * op timeout, or duplicated. Every GET ends byte-exact within the op
 * timeout and a second. On a fresh client the frames from the server are:
 * 1 the greeting of the control connection (at open), 2 the data
 * connection's, 3 the GET_ONE's answer (32 bytes of header, 72 of
 * descriptor and xxh3, 16 of tag, then the bytes).
 */
TEST(get_one_answer_damaged_is_retried)
{
    static const struct {
        const char *mode, *offset;
    } cases[] = {
        {"flip", "40"}, {"flip", "150"}, {"truncate", "60"}, {"stall", "0"}, {"dup", NULL}};
    enum { ONE = 1000 };

    for (unsigned k = 0; k < sizeof(cases) / sizeof(cases[0]); k++) {
        struct mt x;
        struct rio_options o;
        struct tu u;
        const char *args[12] = {"--proto", "railio", "--mode", cases[k].mode,
                                "--dir",   "s2c",    "--nth",  "3"};
        int n = 8;
        if (cases[k].offset) {
            args[n++] = "--offset";
            args[n++] = cases[k].offset;
        }
        args[n] = NULL;
        mt_start(&x, NULL, args);
        tu_put(x.clean.c, "mitm/one", ONE, 11 + k);
        mt_opts(&o);
        mt_client(&x, &u, NULL, &o);
        uint64_t t0 = t_now_ms();
        tu_get_check(u.c, "mitm/one", ONE, 11 + k, 0);
        T_LE(t_now_ms() - t0, M_OP_TIMEOUT_MS + 1000u);
        if (mitm_faults(&x.m) != 1)
            T_FAIL("%s at %s: %d faults applied, want 1", cases[k].mode,
                   cases[k].offset ? cases[k].offset : "-", mitm_faults(&x.m));
        /* sent again, but for the duplicate (it came after the answer) */
        T_EQ(tu_tcp(u.c).get_one, strcmp(cases[k].mode, "dup") ? 2u : 1u);
        tu_get_check(u.c, "mitm/one", ONE, 11 + k, 0);
        tu_close(&u);
        mt_stop(&x);
    }
}

/* ------------------------------------------------------------ commit */

/*
 * A one-chunk PUT on a fresh client frames, in each direction: 1 the
 * greeting of the control connection, 2 PUT_OPEN, 3 the data connection's
 * greeting, 4 PUT_CHUNK, 5 PUT_COMMIT.
 */
#define M_COMMIT_NTH "5"
#define M_ONE (TU_CHUNK / 2)

/*
 * The answer that publishes a one-chunk PUT cut off (truncated with its
 * connection, or stalled past the op timeout), in each of its two ways:
 * with put_one=off (extra) the commit goes again on a fresh connection and
 * gets the generation the server committed; by default the PUT is one
 * PUT_ONE frame (open, data and commit), which goes again and publishes the
 * same bytes again. Either way rio_put answers the generation every reader
 * sees. The third pass is the disk tier, whose commits the server applies
 * on a commit thread (remembered as pending meanwhile). nth: the answer's
 * message number from the server.
 */
static void answer_lost_put_succeeds(const char *nth, const char *extra, const char *key,
                                     uint64_t seed)
{
    static const char *const modes[] = {"truncate", "stall", "truncate"};

    for (unsigned mi = 0; mi < 3; mi++) {
        struct mt x;
        struct rio_options o;
        struct tu u;
        struct rio_desc d, s;
        const char *args[] = {"--proto", "railio", "--mode",   modes[mi], "--dir", "s2c",
                              "--nth",   nth,      "--offset", "8",       NULL};
        const char *disk[] = {"--data-dir", mi == 2 ? disk_dir_make() : NULL, NULL};
        mt_start(&x, mi == 2 ? disk : NULL, args);
        mt_opts(&o);
        o.op_timeout_ms = 1000;
        mt_client(&x, &u, extra, &o);
        uint8_t *p = tu_pattern(M_ONE, seed + mi);
        memset(&d, 0, sizeof(d));
        uint64_t t0 = t_now_ms();
        T_EQ(rio_put(u.c, key, p, M_ONE, NULL, &d), 0);
        /* One op timeout (1 s), then the try again: not the 20 s deadline.
         * (A PUT_ONE's try again follows its path's cooldown and a fresh
         * dial: 2.02 s once on a loaded machine, so room is left.) */
        T_LE(t_now_ms() - t0, 1000u + 4000u);
        T_EQ(mitm_faults(&x.m), 1);
        char *sum = mitm_summary(&x.m);
        /* The answer: header, u64 generation, tag. */
        if (!strstr(sum, "\"len\": 56"))
            T_FAIL("the fault did not hit the publishing answer: %s", sum);
        free(sum);
        if (extra) {
            T_EQ(tu_tcp(u.c).ctl_retries, 1u);
            T_EQ(tu_tcp(u.c).put_one, 0u);
        } else {
            T_EQ(tu_tcp(u.c).put_one, 2u);
        }
        T_OK(rio_stat(x.clean.c, key, &s));
        T_EQ(s.generation, d.generation);
        T_EQ(s.nchunks, 1u);
        T_EQ(d.xxh[0], s.xxh[0]);
        T_MEMEQ(d.etag, s.etag, sizeof(d.etag));
        rio_desc_cleanup(&s);
        rio_desc_cleanup(&d);
        tu_get_check(x.clean.c, key, M_ONE, seed + mi, 0);
        free(p);
        tu_close(&u);
        mt_stop(&x);
    }
}

/* s2c: the HELLO answers of the control and data connections, then PUT_ONE's. */
#define M_ONE_ANSWER_NTH "3"

TEST(commit_answer_lost_put_succeeds)
{
    answer_lost_put_succeeds(M_COMMIT_NTH, "put_one=off", "mitm/commit", 41);
}

TEST(put_one_answer_lost_put_succeeds)
{
    answer_lost_put_succeeds(M_ONE_ANSWER_NTH, NULL, "mitm/one", 141);
}

/*
 * No answer at all to what publishes the PUT nor to any try again (every
 * later frame stalled): the outcome cannot be known and rio_put says so
 * with RIO_EUNKNOWN, never a plain failure. Here it did reach the server
 * (its answer was stalled), and the object is there. The commit of
 * put_one=off (extra), or a PUT_ONE each of whose tries went out whole.
 */
static void outcome_unknown(const char *nth, const char *extra, const char *key, uint64_t seed)
{
    struct mt x;
    struct rio_options o;
    struct tu u;
    const char *args[] = {"--proto", "railio", "--mode",  "stall", "--dir", "s2c",
                          "--nth",   nth,      "--count", "0",     NULL};
    char params[128];

    mt_start(&x, NULL, args);
    mt_opts(&o);
    o.op_timeout_ms = 500;
    o.retry_attempts = 2;
    snprintf(params, sizeof(params), "connect_timeout=500ms%s%s", extra ? "&" : "",
             extra ? extra : "");
    mt_client(&x, &u, params, &o);
    uint8_t *p = tu_pattern(M_ONE, seed);
    uint64_t t0 = t_now_ms();
    T_ERR(rio_put(u.c, key, p, M_ONE, NULL, NULL), RIO_EUNKNOWN);
    T_LE(t_now_ms() - t0, 4000u);
    if (!extra) {
        T_NOTNULL(strstr(rio_error_detail(), "may or may not"));
        T_GE(tu_tcp(u.c).put_one, 1u);
    }
    tu_get_check(x.clean.c, key, M_ONE, seed, 0);
    free(p);
    tu_close(&u);
    mt_stop(&x);
}

TEST(commit_outcome_unknown)
{
    outcome_unknown(M_COMMIT_NTH, "put_one=off", "mitm/unknown", 43);
}

TEST(put_one_outcome_unknown)
{
    outcome_unknown(M_ONE_ANSWER_NTH, NULL, "mitm/one-unknown", 143);
}

/*
 * The server dropped the upload before the commit (reclaimed: idle past its
 * --upload-timeout) and nothing of it was written: rio_put hears "no such
 * upload" and starts over from the caller's buffer: success, one re-plan.
 * Pass 0: the commit's request stalls (the commit tried again hears it);
 * pass 1: the chunk's request is delayed past the timeout (the chunk's
 * answer says it).
 */
TEST(upload_lost_before_commit_put_starts_over)
{
    for (unsigned pass = 0; pass < 2; pass++) {
        struct mt x;
        struct rio_options o;
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        struct tu u;
        const char *srv_args[] = {"--upload-timeout", "300ms", NULL};
        const char *stall[] = {"--proto", "railio", "--mode",     "stall", "--dir",
                               "c2s",     "--nth",  M_COMMIT_NTH, NULL};
        const char *delay[] = {"--proto", "railio", "--mode",     "delay", "--dir", "c2s",
                               "--nth",   "4",      "--delay-ms", "800",   NULL};

        mt_start(&x, srv_args, pass ? delay : stall);
        mt_opts(&o);
        o.op_timeout_ms = pass ? 2000 : 1000;
        mt_client(&x, &u, "put_one=off", &o);
        uint8_t *p = tu_pattern(M_ONE, 44 + pass);
        T_EQ(rio_put(u.c, "mitm/lost", p, M_ONE, &call, NULL), 0);
        T_EQ(st.replans, 1u);
        T_EQ(mitm_faults(&x.m), 1);
        tu_get_check(x.clean.c, "mitm/lost", M_ONE, 44 + pass, 0);
        free(p);
        tu_close(&u);
        mt_stop(&x);
    }
}
