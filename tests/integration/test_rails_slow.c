/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net;rails;serial */
/* T_TIMEOUT 120 */
/*
 * One rail far slower than the others (tests/harness/rails.sh: three veth
 * rails at 1gbit, rail 1 reshaped to 20mbit after the PUT), one connection
 * per rail, a stream GET (what `railio get FILE` and a reader do) by a
 * fresh client (as each `railio get` is) with the default chunk size,
 * adapt on. "A fast rail is never held back by a slow one": the two fast
 * rails carry the object.
 *
 * Before, the slow rail took chunks that sat at the head of the reader's
 * window while the fast rails ran out of window (the scheduler counted
 * the whole rest of the object as work to share), and adapt's 2-path
 * level was rails 0 and 1 by index, which moved no more than rail 0, so
 * the class settled on one path: rail 2 never carried a byte and a 256
 * MiB GET took 7.4-8.9 s against 2.6 s with both fast rails (rails
 * review).
 *
 * Needs root (namespaces); skips otherwise.
 */
#include "rails_util.h"

static int sink(void *arg, const void *data, size_t len)
{
    uint8_t **at = arg;
    memcpy(*at, data, len);
    *at += len;
    return 0;
}

TEST(slow_rail_holds_back_no_fast_one)
{
    const size_t n = 256u << 20;
    struct rl r;
    struct rio_options o;
    struct tu u, g;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    char url[512];

    rl_up(&r, 3, "1gbit");
    rl_server(&r, NULL);
    rl_opts(&o);
    o.adapt = 1; /* the defaults */
    o.chunk_size = 4u << 20;
    rl_url(url, sizeof(url),
           "rails=10.99.0.1>10.99.0.2,10.99.1.1>10.99.1.2,10.99.2.1>10.99.2.2&conns=1");
    tu_open(&u, url, &o);
    T_EQ(rio__client_transport(u.c)->npaths, 3u);
    uint8_t *src = rl_pattern(n, 0x51);
    T_OK(rio_put(u.c, "o", src, n, NULL, NULL));
    tu_close(&u);
    rl_rate(&r, 1, "20mbit");
    uint8_t *dst = rl_buf(n);
    for (int i = 0; i < 2; i++) {
        uint8_t *at = dst;
        tu_open(&g, url, &o);
        T_EQ(rio_get_stream(g.c, "o", 0, sink, &at, &call), (int64_t)n);
        T_MEMEQ(dst, src, n);
        t_stats_print("stream", &st);
        tu_close(&g);
        /* Both fast rails carry it; the slow one its first chunk (how its
         * rate is learned) or little more. */
        T_GE(st.path[0].bytes, n / 4);
        T_GE(st.path[2].bytes, n / 4);
        T_LE(st.path[1].bytes, n / 16);
        /* Two fast rails: about 2.2 s here (the slow rail's first chunk
         * alone takes 1.6 s); holding the window, 7-9 s. */
        T_LE(st.elapsed_ns / 1000000, 5000u);
    }
    free(src);
    free(dst);
    T_TRUE(rl_server_alive(&r));
    rl_down(&r);
}

/*
 * A large answer over a slow link, against the receive low-water mark.
 * Both ends wake for a large body's data only once half of what it still
 * owes is there, at most 512 KiB (SO_RCVLOWAT); on a rail at 4 Mbit/s
 * those bytes take a second, longer than the transport's progress
 * watchdog (300 ms here), and bytes that arrive under the mark wake
 * nobody. The watchdog must see them (the socket's queue grows since it
 * last looked, and what it saw is forgotten once read: with the mark at
 * 512 KiB for a 2 MiB chunk's first MiB, a queue smaller than the last
 * look's after a read is still progress): a GET of a 2 MiB chunk must not
 * be cut for making no progress. (Not a PUT: its chunk leaves for the
 * socket's send buffer at once, so its progress is its answer, and a
 * progress_timeout under the chunk's time at the link's rate cuts it, as
 * docs/tuning.md says.)
 */
TEST(slow_link_large_chunk_is_not_cut)
{
    const size_t n = 2u << 20;
    struct rl r;
    struct rio_options o;
    struct tu u;
    char url[512];

    rl_up(&r, 1, "1gbit");
    rl_server(&r, NULL);
    rl_opts(&o);
    o.chunk_size = n;
    o.op_timeout_ms = 20000;
    snprintf(url, sizeof(url),
             "railio://10.99.0.2:%d?user_timeout=1s&progress_timeout=300ms&connect_timeout=500ms",
             RL_PORT);
    tu_open(&u, url, &o);
    uint8_t *src = rl_pattern(n, 0x3b);
    T_OK(rio_put(u.c, "o", src, n, NULL, NULL));
    rl_rate(&r, 0, "4mbit");
    uint8_t *dst = rl_buf(n);
    uint64_t t0 = t_now_ms();
    T_EQ(rio_get(u.c, "o", dst, n, NULL), (int64_t)n);
    T_MEMEQ(dst, src, n);
    /* 4.2 s at the rail's rate: it took that long, so the rate held. */
    T_GE(t_now_ms() - t0, 3000u);
    T_EQ(tu_tcp(u.c).watchdog_trips, 0u);
    tu_close(&u);
    free(src);
    free(dst);
    T_TRUE(rl_server_alive(&r));
    rl_down(&r);
}
