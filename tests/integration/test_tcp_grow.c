/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 90 */
/*
 * The railio:// transport under a server's connection limit (railiod
 * --max-conns): a client that asks for more connections than the server
 * grants works with what it got: the paths whose dial the server cut are
 * reported down to the engine, which moves their chunks to the paths that
 * have a connection, and the per-path stats say which paths carried the
 * bytes (a path's ops never travel on another path's connection). Once
 * capacity frees, the down paths dial again in the background, report up and
 * carry their share. A rail with no connection at all fails cleanly, then
 * works again when capacity frees.
 *
 * Other clients hold the server's capacity with raw wire connections
 * (tests/harness/server_env.h), closed to free it.
 */
#include "tcp_util.h"

#define G_SIZE (8 * TU_MIB)

/* Hold n connections to e (each greeted, so the server has accepted it). */
static void hold(struct wc *w, unsigned n, const struct srv_env *e)
{
    for (unsigned i = 0; i < n; i++) {
        wc_open(&w[i], e->addr[0]);
    }
}

static void release(struct wc *w, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        wc_close(&w[i]);
}

static double metric(const struct srv_env *e, const char *series)
{
    char *text = srv_http_get(e->metrics, "/metrics");
    double v;

    if (!text)
        T_FAIL("GET http://%s/metrics failed", e->metrics);
    v = srv_metric(text, series);
    free(text);
    return v;
}

/* Wait until the server counts n connections open (closes are noticed by
 * its workers asynchronously). */
static void wait_server_conns(const struct srv_env *e, double n)
{
    uint64_t t0 = t_now_ms();
    double v;

    while ((v = metric(e, "railiod_connections")) != n) {
        if (t_now_ms() - t0 > 5000)
            T_FAIL("server has %.0f connections open, want %.0f", v, n);
        usleep(10000);
    }
}

/* After the held connections close: wait until the server counts only the
 * client's two, or the client holds more than one data connection (it grew
 * into the freed room before the server's count could be read at 2). */
static void wait_freed(const struct srv_env *e, struct tu *u)
{
    uint64_t t0 = t_now_ms();
    double v;

    while ((v = metric(e, "railiod_connections")) != 2 && tu_tcp(u->c).conns_open < 2) {
        if (t_now_ms() - t0 > 5000)
            T_FAIL("server has %.0f connections open, want 2", v);
        usleep(10000);
    }
}

static void get_stats(struct rio_client *c, const char *key, uint64_t seed, struct rio_stats *st)
{
    struct rio_call call = {.stats = st};
    uint8_t *b = malloc(G_SIZE);

    T_EQ(rio_get(c, key, b, G_SIZE, &call), (int64_t)G_SIZE);
    T_PATTERN(b, G_SIZE, seed);
    free(b);
}

/*
 * The engine's bytes of each path are the bytes answered on that path's own
 * connections (k1 - k0: the transport's counters around the call), and only
 * paths with a connection of their own carried any. Returns how many paths
 * carried bytes.
 */
static unsigned paths_truthful(const struct rio_stats *st, const struct rio__tcp_counters *k0,
                               const struct rio__tcp_counters *k1)
{
    unsigned used = 0;
    uint64_t sum = 0;

    for (unsigned i = 0; i < st->npaths; i++) {
        T_EQ(st->path[i].bytes, k1->path_bytes[i] - k0->path_bytes[i]);
        used += st->path[i].bytes > 0;
        sum += st->path[i].bytes;
    }
    T_EQ(sum, (uint64_t)G_SIZE);
    T_LE(used, k1->conns_open);
    return used;
}

/*
 * --max-conns 5, three held by others, one by the client's control
 * connection: of its four data connections (conns=4) one is granted. The
 * three paths whose dial the server cut are reported down; PUT and GET are
 * byte-exact over the one connection, and the stats show one path carried
 * every byte (with carrying on a sibling, all four showed bytes over one
 * connection). Then the others close and the down paths dial again in the
 * background, report up, and carry their share. The engine's cooldown is
 * longer than the test: only the transport's up reports bring them back.
 */
TEST(works_with_what_it_got_then_grows_back)
{
    const char *args[] = {"--memory", "128M", "--max-conns", "5", "--metrics", "127.0.0.1:0", NULL};
    struct srv_env e;
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio__tcp_counters k0, k;
    struct wc w[3];
    struct tu u;
    char url[256];

    srv_start(&e, args);
    hold(w, 3, &e);
    tu_opts(&o);
    o.cooldown_base_ms = 600000;
    o.cooldown_cap_ms = 600000;
    o.adapt = -1; /* every path from the first op: which ones have a connection is tested */
    tu_url(url, sizeof(url), &e, "conns=4&dial_backoff=20ms&dial_backoff_cap=200ms");
    tu_open(&u, url, &o);

    uint8_t *src = tu_pattern(G_SIZE, 41);
    k0 = tu_tcp(u.c);
    T_OK(rio_put(u.c, "grow/obj", src, G_SIZE, &call, NULL));
    free(src);
    k = tu_tcp(u.c);
    T_EQ(st.npaths, 4u);
    T_EQ(paths_truthful(&st, &k0, &k), 1u);
    k0 = k;
    get_stats(u.c, "grow/obj", 41, &st);
    k = tu_tcp(u.c);
    T_EQ(paths_truthful(&st, &k0, &k), 1u);
    T_EQ(st.retries_total, 0u); /* the down paths were known before the GET */

    T_EQ(k.conns_open, 1u);
    T_EQ(k.paths_down, 3u);
    T_GE(k.dials_refused, 3u);
    T_GE(k.reported_down, 3u);
    T_EQ(k.conn_failures, 0u);
    T_EQ(k.regrown, 0u);
    T_GE(metric(&e, "railiod_connections_rejected_total"), 3.0);

    /* Capacity frees: within a few dial backoffs (capped at 200 ms) every
     * path has its own connection again, and has said so to the engine. */
    release(w, 3);
    /* The server notices the closes (2 left: the client's control and data
     * connections), or the client already dialled into the room they left
     * (a background dial: more than 2 again). */
    wait_freed(&e, &u);
    uint64_t t0 = t_now_ms();
    unsigned calls = 0;
    for (;;) {
        get_stats(u.c, "grow/obj", 41, &st);
        calls++;
        k = tu_tcp(u.c);
        if (k.conns_open == 4)
            break;
        if (t_now_ms() - t0 > 10000)
            T_FAIL("still %" PRIu64 " connections after %u calls in 10 s (down %" PRIu64
                   ", grow dials %" PRIu64 ")",
                   k.conns_open, calls, k.paths_down, k.grow_dials);
        usleep(20000);
    }
    T_EQ(k.paths_down, 0u);
    T_EQ(k.regrown, 3u);
    T_GE(k.grow_dials, 3u);
    T_EQ(k.conn_failures, 0u);
    T_EQ(metric(&e, "railiod_connections"), 5.0);
    /* Once grown, a call spreads over four connections again, each path's
     * bytes on its own connection. A path reported up is probed with one
     * chunk before it takes its share, and the engine applies the report
     * on its own thread: a call that starts as the last report lands can
     * miss it (once in a make test under load, three of four paths; in
     * CI with two more test runs beside it, three of four in three calls
     * in a row), so the spread is asked of one of the calls of the next
     * 10 s. */
    unsigned used = 0, tries = 0;
    t0 = t_now_ms();
    while (used < 4 && (tries++ < 3 || t_now_ms() - t0 < 10000)) {
        k0 = tu_tcp(u.c);
        get_stats(u.c, "grow/obj", 41, &st);
        k = tu_tcp(u.c);
        used = paths_truthful(&st, &k0, &k);
        if (used < 4)
            usleep(20000);
    }
    T_EQ(used, 4u);
    T_EQ(st.retries_total, 0u);
    tu_close(&u);
    T_EQ(srv_stop(&e), 0);
}

/*
 * The stated minimum is one connection per rail: with only the control
 * connection granted, the GET fails cleanly (the engine runs out of paths)
 * within its deadline, the server stays healthy, and once capacity frees the
 * same client works without a restart.
 */
TEST(no_connection_at_all_fails_cleanly_then_recovers)
{
    const char *args[] = {"--memory", "64M", "--max-conns", "3", "--metrics", "127.0.0.1:0", NULL};
    struct srv_env e;
    struct rio_options o;
    struct wc w[2];
    struct tu u;
    char url[256];

    srv_start(&e, args);
    tu_opts(&o);
    o.deadline_ms = 5000;
    o.adapt = -1; /* every path from the first op: which ones have a connection is tested */
    tu_url(url, sizeof(url), &e, "conns=2&dial_backoff=20ms&dial_backoff_cap=200ms");
    tu_open(&u, url, &o);
    tu_put(u.c, "min/obj", G_SIZE, 7);
    tu_idle(u.c);
    /* The data connections the PUT opened go; others take their places. */
    rio_client_destroy(u.c);
    u.c = NULL;
    wait_server_conns(&e, 0);
    hold(w, 2, &e);
    tu_open(&u, url, &o);

    uint8_t *b = malloc(G_SIZE);
    uint64_t t0 = t_now_ms();
    int64_t got = rio_get(u.c, "min/obj", b, G_SIZE, NULL);
    T_LT(got, 0);
    T_LE(t_now_ms() - t0, 7000u);
    struct rio__tcp_counters k = tu_tcp(u.c);
    T_EQ(k.conns_open, 0u);
    T_EQ(k.paths_down, 2u); /* both reported down: the rail has no connection */
    T_GE(k.reported_down, 2u);
    T_EQ(k.grow_dials, 0u); /* no background dial without a connection on the rail */
    T_GT(k.dial_failures, 0u);
    tu_idle(u.c);

    release(w, 2);
    wait_server_conns(&e, 1);
    usleep(300000); /* past the engine's cooldowns and the rail's backoff */
    T_EQ(rio_get(u.c, "min/obj", b, G_SIZE, NULL), (int64_t)G_SIZE);
    T_PATTERN(b, G_SIZE, 7);
    k = tu_tcp(u.c);
    T_EQ(k.conns_open, 2u);
    T_EQ(k.paths_down, 0u);
    T_EQ(k.regrown, 2u);
    free(b);
    tu_close(&u);
    T_EQ(srv_stop(&e), 0);
}
