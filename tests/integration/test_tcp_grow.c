/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 90 */
/*
 * The railio:// transport under a server's connection limit (railiod
 * --max-conns): a client that asks for more connections than the server
 * grants works with what it got, down to one connection per rail (the
 * paths whose dial the server cut ride on that connection), and grows back
 * to its configured count once capacity frees; and a rail with no
 * connection at all fails cleanly, then works again when capacity frees.
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
        wc_connect(&w[i], e->addr[0]);
        wc_hello(&w[i], NULL);
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
 * --max-conns 5, three held by others, one by the client's control
 * connection: of its four data connections (conns=4) one is granted. Every
 * path still carries its share over the one connection, no op fails and
 * nothing is retried; PUT and GET are byte-exact. Then the others close and
 * the client, in its next calls, grows back to four connections.
 */
TEST(works_with_what_it_got_then_grows_back)
{
    const char *args[] = {"--memory", "128M", "--max-conns", "5", "--metrics", "127.0.0.1:0", NULL};
    struct srv_env e;
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct wc w[3];
    struct tu u;
    char url[256];

    srv_start(&e, args);
    hold(w, 3, &e);
    tu_opts(&o);
    tu_url(url, sizeof(url), &e, "conns=4&dial_backoff=20ms&dial_backoff_cap=200ms");
    tu_open(&u, url, &o);

    uint8_t *src = tu_pattern(G_SIZE, 41);
    T_OK(rio_put(u.c, "grow/obj", src, G_SIZE, &call, NULL));
    free(src);
    T_EQ(st.retries_total, 0u);
    get_stats(u.c, "grow/obj", 41, &st);
    T_EQ(st.retries_total, 0u);
    T_EQ(st.npaths, 4u);
    for (unsigned i = 0; i < 4; i++)
        T_GT(st.path[i].bytes, 0u); /* every path worked, over what was granted */

    struct rio__tcp_counters k = tu_tcp(u.c);
    T_EQ(k.conns_open, 1u);
    T_EQ(k.paths_carried, 3u);
    T_GE(k.dials_refused, 3u);
    T_GT(k.carried_ops, 0u);
    T_EQ(k.conn_failures, 0u);
    T_EQ(k.regrown, 0u);
    T_GE(metric(&e, "railiod_connections_rejected_total"), 3.0);

    /* Capacity frees: within a few backoffs (capped at 200 ms) of the next
     * calls every path has its own connection again. */
    release(w, 3);
    /* The server notices the closes (2 left: the client's control and data
     * connections), or the client already dialled into the room they left
     * (a grow dial from the last call's backoff: more than 2 again). */
    wait_freed(&e, &u);
    uint64_t t0 = t_now_ms();
    unsigned calls = 0;
    for (;;) {
        get_stats(u.c, "grow/obj", 41, &st);
        T_EQ(st.retries_total, 0u);
        calls++;
        k = tu_tcp(u.c);
        if (k.conns_open == 4)
            break;
        if (t_now_ms() - t0 > 10000)
            T_FAIL("still %" PRIu64 " connections after %u calls in 10 s (carried %" PRIu64
                   ", grow dials %" PRIu64 ")",
                   k.conns_open, calls, k.paths_carried, k.grow_dials);
    }
    T_EQ(k.paths_carried, 0u);
    T_EQ(k.regrown, 3u);
    T_GE(k.grow_dials, 3u);
    T_EQ(k.conn_failures, 0u);
    T_EQ(metric(&e, "railiod_connections"), 5.0);
    /* Once grown, a call spreads over four connections again. */
    get_stats(u.c, "grow/obj", 41, &st);
    for (unsigned i = 0; i < 4; i++)
        T_GT(st.path[i].bytes, 0u);
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
    T_EQ(k.paths_carried, 0u);
    T_GT(k.dial_failures, 0u);
    tu_idle(u.c);

    release(w, 2);
    wait_server_conns(&e, 1);
    usleep(300000); /* past the engine's cooldowns and the rail's backoff */
    T_EQ(rio_get(u.c, "min/obj", b, G_SIZE, NULL), (int64_t)G_SIZE);
    T_PATTERN(b, G_SIZE, 7);
    T_EQ(tu_tcp(u.c).conns_open, 2u);
    free(b);
    tu_close(&u);
    T_EQ(srv_stop(&e), 0);
}
