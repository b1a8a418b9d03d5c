/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * railiod as a process: SIGTERM drains (an in-flight READ completes, new
 * connections are refused, exit 0), the drain deadline, the metrics
 * endpoint (fetched with curl), `railio serve`, and many clients at once on
 * overlapping keys (every read is exactly one generation).
 */
#include <pthread.h>

#include "server_env.h"
#include "tlib.h"

#define MIB (1u << 20)

TEST(sigterm_drains_inflight_read)
{
    struct srv_env e;
    struct wc w, r, idle, late;
    const uint32_t size = 32 * MIB;
    /* Far more than the read needs, even under sanitizers. */
    const char *args[] = {"--drain-timeout", "30s", NULL};
    uint8_t *data = malloc(size), *got = malloc(size);
    struct rio_proto_hdr h;

    t_fill_pattern(data, size, 21);
    srv_start_wc(&e, args, &w);
    uint64_t gen = wc_put(&w, "big", data, size, 4 * MIB);
    wc_close(&w);
    wc_open(&idle, e.addr[0]);

    T_OK(wc_try_connect_ex(&r, e.addr[0], 10, 64 * 1024));
    struct rio_proto_read m = {
        .generation = gen, .off = 0, .len = size, .key = "big", .key_len = 3};
    uint8_t out[64], hb[32];
    int n = rio__proto_enc_read(&m, out, sizeof(out));
    T_OK(wc_send2(&r, RIO_OP_READ, 5, out, (size_t)n, NULL, 0));
    /* The response has started when its header is here. */
    T_OK(wc_read_full(&r, hb, sizeof(hb)));
    T_OK(rio__proto_hdr_decode(hb, RIO_PROTO_BODY_CAP, &h));
    T_EQ(h.status, 0);
    /* The data's xxh3 and the tag, then the data. */
    T_EQ(h.body_len, size + RIO_PROTO_READ_FIXED + RIO_PROTO_TAG_LEN);
    uint8_t fixed[RIO_PROTO_READ_FIXED + RIO_PROTO_TAG_LEN];
    T_OK(wc_read_full(&r, fixed, sizeof(fixed)));
    T_EQ(rio__proto_u64(fixed), rio__xxh3(data, size));
    T_OK(wc_read_full(&r, got, MIB));

    uint64_t t0 = t_now_ms();
    T_EQ(kill(e.pid, SIGTERM), 0);
    /* The idle connection is closed at once; new ones are refused. */
    T_EQ(wc_wait_closed(&idle, 2000), 0);
    wc_close(&idle);
    T_NE(wc_try_connect(&late, e.addr[0], 2), 0);
    /* The READ in flight completes, byte for byte, then the connection ends. */
    usleep(200000);
    T_OK(wc_read_full(&r, got + MIB, size - MIB));
    T_MEMEQ(got, data, size);
    T_EQ(wc_wait_closed(&r, 3000), 0);
    wc_close(&r);
    int st = srv_wait(&e, 25000);
    T_NE(st, -1);
    T_TRUE(WIFEXITED(st));
    T_EQ(WEXITSTATUS(st), 0);
    T_LT(t_now_ms() - t0, 25000u);
    srv_stop(&e);
    free(data);
    free(got);
}

/* A reader that never reads cannot hold the exit past --drain-timeout. */
TEST(drain_deadline)
{
    struct srv_env e;
    const char *args[] = {"--drain-timeout", "500ms", NULL};
    struct wc w, r;
    const uint32_t size = 32 * MIB;
    uint8_t *data = malloc(size);

    t_fill_pattern(data, size, 22);
    srv_start_wc(&e, args, &w);
    uint64_t gen = wc_put(&w, "big", data, size, 4 * MIB);
    T_OK(wc_try_connect_ex(&r, e.addr[0], 10, 4096));
    struct rio_proto_read m = {
        .generation = gen, .off = 0, .len = size, .key = "big", .key_len = 3};
    uint8_t out[64];
    int n = rio__proto_enc_read(&m, out, sizeof(out));
    T_OK(wc_send2(&r, RIO_OP_READ, 5, out, (size_t)n, NULL, 0));
    usleep(100000);
    uint64_t t0 = t_now_ms();
    T_EQ(kill(e.pid, SIGTERM), 0);
    int st = srv_wait(&e, 5000);
    T_NE(st, -1);
    T_TRUE(WIFEXITED(st));
    T_EQ(WEXITSTATUS(st), 0);
    T_GT(t_now_ms() - t0, 400u);
    T_LT(t_now_ms() - t0, 4000u);
    srv_stop(&e);
    wc_close(&w);
    wc_close(&r);
    free(data);
}

/* Run a shell command, return its stdout (malloc'ed). */
static char *run_cmd(const char *cmd)
{
    FILE *p = popen(cmd, "r");
    size_t cap = 1 << 20, len = 0;
    char *out = malloc(cap);
    T_NOTNULL(p);
    while (len < cap - 1) {
        size_t r = fread(out + len, 1, cap - 1 - len, p);
        if (r == 0)
            break;
        len += r;
    }
    out[len] = '\0';
    pclose(p);
    return out;
}

TEST(metrics_endpoint)
{
    struct srv_env e;
    const char *args[] = {"--metrics", "127.0.0.1:0", NULL};
    struct wc c;
    char cmd[512];
    uint8_t data[5000], buf[1000];

    if (system("command -v curl >/dev/null 2>&1") != 0)
        T_FAIL("curl is not installed (scripts/install-deps.sh installs it)");
    srv_start(&e, args);
    T_NE(e.metrics[0], '\0');
    wc_open(&c, e.addr[0]);
    t_fill_pattern(data, sizeof(data), 3);
    uint64_t gen = wc_put(&c, "m", data, sizeof(data), 1000);
    for (int i = 0; i < 3; i++)
        T_EQ(wc_read(&c, "m", gen, 1000u * (unsigned)i, 1000, buf), 0);
    T_EQ(wc_read(&c, "m", gen + 1, 0, 1000, buf), RIO_EGENERATION);
    struct rio_proto_desc d;
    uint8_t *keep;
    T_EQ(wc_lookup(&c, "missing", &d, &keep), RIO_ENOTFOUND);

    snprintf(cmd, sizeof(cmd), "curl -sS -f --max-time 5 http://%s/metrics", e.metrics);
    char *text = run_cmd(cmd);
    static const struct {
        const char *series;
        double want;
    } want[] = {
        {"railiod_requests_total{op=\"READ\",status=\"ok\"}", 3},
        {"railiod_requests_total{op=\"READ\",status=\"RIO_EGENERATION\"}", 1},
        {"railiod_requests_total{op=\"LOOKUP\",status=\"RIO_ENOTFOUND\"}", 1},
        {"railiod_requests_total{op=\"PUT_CHUNK\",status=\"ok\"}", 5},
        {"railiod_requests_total{op=\"PUT_COMMIT\",status=\"ok\"}", 1},
        {"railiod_requests_total{op=\"HELLO\",status=\"ok\"}", 1},
        /* READ out: 4 headers, 3000 bytes, 3 answers' xxh3 and tag, 1 error's tag. */
        {"railiod_request_bytes_total{op=\"READ\",direction=\"out\"}",
         4.0 * 32 + 3000 + 3 * (RIO_PROTO_READ_FIXED + RIO_PROTO_TAG_LEN) + RIO_PROTO_TAG_LEN},
        {"railiod_objects", 1},
        {"railiod_stored_bytes", 5000},
        {"railiod_inflight_requests", 0},
        {"railiod_inflight_response_bytes", 0},
        {"railiod_connections", 1},
        {"railiod_rejected_frames_total", 0},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++)
        if (srv_metric(text, want[i].series) != want[i].want)
            T_FAIL("%s: %g, want %g", want[i].series, srv_metric(text, want[i].series),
                   want[i].want);
    char series[160];
    snprintf(series, sizeof(series),
             "railiod_listener_bytes_total{listener=\"%s\",direction=\"in\"}", e.addr[0]);
    T_GT(srv_metric(text, series), 5000.0);
    T_TRUE(strstr(text, "# TYPE railiod_requests_total counter") != NULL);
    free(text);
    snprintf(cmd, sizeof(cmd), "curl -s -o /dev/null -w '%%{http_code}' --max-time 5 http://%s/",
             e.metrics);
    text = run_cmd(cmd);
    T_STREQ(text, "404");
    free(text);
    srv_end_wc(&e, &c);
}

/* `railio serve ARGS` is railiod ARGS. */
TEST(railio_serve)
{
    struct srv_env e;
    char bin[512], cmd[600];
    const char *b = getenv("T_BUILD_DIR");
    struct wc c;

    snprintf(bin, sizeof(bin), "%s/railio", b && *b ? b : ".");
    snprintf(cmd, sizeof(cmd), "%s serve --version >/dev/null 2>&1", bin);
    int st = system(cmd);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 2)
        T_SKIP("railio has no serve command yet (rio_cli_serve is not hooked into main.c)");
    srv_prepare(&e);
    e.bin = bin;
    e.subcommand = "serve";
    srv_start_listen(&e, NULL, NULL);
    wc_open(&c, e.addr[0]);
    T_EQ(wc_ping(&c), 0);
    srv_end_wc(&e, &c);
}

/* ------------------------------------------------- many clients at once */

#define NKEYS 3
#define OBJ (200u * 1024u + 17u)
#define CH (64u * 1024u)

struct worker {
    const char *addr;
    unsigned id;
    unsigned reads_ok, gen_changes;
};

/* Object bytes: the seed in the first 8 bytes, then the seed's pattern. */
static void make_obj(uint8_t *p, uint64_t seed)
{
    t_fill_pattern(p, OBJ, seed);
    memcpy(p, &seed, 8);
}

static void *client_main(void *arg)
{
    struct worker *w = arg;
    struct wc c;
    uint8_t *obj = malloc(OBJ), *got = malloc(OBJ);
    char key[16];

    wc_open(&c, w->addr);
    for (unsigned it = 0; it < 40; it++) {
        snprintf(key, sizeof(key), "k%u", (w->id + it) % NKEYS);
        if (it % 3 == 0) {
            make_obj(obj, ((uint64_t)w->id << 32) | it);
            wc_put(&c, key, obj, OBJ, CH);
            continue;
        }
        struct rio_proto_desc d;
        uint8_t *keep;
        int st = wc_lookup(&c, key, &d, &keep);
        if (st == RIO_ENOTFOUND)
            continue;
        T_EQ(st, 0);
        T_EQ(d.size, (uint64_t)OBJ);
        int changed = 0;
        for (uint64_t k = 0; k < d.nchunks && !changed; k++) {
            uint64_t off = k * CH;
            uint32_t len = (uint32_t)(OBJ - off < CH ? OBJ - off : CH);
            st = wc_read(&c, key, d.generation, off, len, got + off);
            if (st == RIO_EGENERATION || st == RIO_ENOTFOUND) {
                changed = 1;
                break;
            }
            T_EQ(st, 0);
            T_EQ(rio__xxh3(got + off, len), rio__proto_u64(d.xxh + 8 * k));
        }
        free(keep);
        if (changed) {
            w->gen_changes++;
            continue;
        }
        /* One generation, whole: the bytes of exactly one PUT. */
        uint64_t seed;
        memcpy(&seed, got, 8);
        make_obj(obj, seed);
        T_MEMEQ(got, obj, OBJ);
        w->reads_ok++;
    }
    wc_close(&c);
    free(obj);
    free(got);
    return NULL;
}

TEST(concurrent_clients_overlapping_keys)
{
    struct srv_env e;
    enum { N = 12 };
    struct worker w[N];
    pthread_t th[N];
    unsigned ok = 0;

    srv_prepare(&e);
    srv_start_listen(&e, "127.0.0.1:0,127.0.0.1:0", NULL);
    for (unsigned i = 0; i < N; i++) {
        w[i] = (struct worker){.addr = e.addr[i % e.naddr], .id = i};
        T_EQ(pthread_create(&th[i], NULL, client_main, &w[i]), 0);
    }
    for (unsigned i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        ok += w[i].reads_ok;
    }
    T_GT(ok, 0u);
    T_EQ(srv_stop(&e), 0);
}

/* Durations near the top of their range: --ttl and the other durations
 * stop at 100 years (a --ttl of 5124095h wrapped now + ttl: every object
 * expired as it was written), and a --progress-timeout past what the
 * socket options hold is clamped, not truncated (2^32 + 1 ms became a
 * TCP_USER_TIMEOUT of 1 ms). */
TEST(long_durations_bounded)
{
    char bin[512];
    srv_binary(bin, sizeof(bin));
    T_EQ(
        t_sh("timeout -s KILL 10 %s --ttl 5124095h --listen 127.0.0.1:0 2>&1 | grep -q '100 years'",
             bin),
        0);
    T_EQ(t_sh("timeout -s KILL 10 %s --ttl 5124095h --listen 127.0.0.1:0 >/dev/null 2>&1", bin), 2);

    struct srv_env e;
    struct wc w;
    const char *args[] = {"--ttl", "876000h", "--progress-timeout", "4294967297", NULL};
    uint8_t data[4096];
    t_fill_pattern(data, sizeof(data), 5);
    srv_start_wc(&e, args, &w);
    uint64_t gen = wc_put(&w, "k", data, sizeof(data), 4096);
    T_GT(gen, 0u);
    usleep(50 * 1000); /* a 1 ms user timeout would have cut a quiet connection by now */
    uint8_t got[4096];
    struct rio_proto_desc d;
    uint8_t *keep = NULL;
    T_EQ(wc_lookup(&w, "k", &d, &keep), 0);
    free(keep);
    T_EQ(wc_read(&w, "k", gen, 0, sizeof(got), got), 0);
    T_MEMEQ(got, data, sizeof(data));
    srv_stop(&e);
    wc_close(&w);
}
