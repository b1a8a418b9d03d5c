/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Adaptive concurrency (issue 16 item 2, option adapt): each call class
 * starts on one path at depth 1 and climbs while goodput grows, within the
 * configured paths and depth.
 *
 * - A target whose total rate falls as it holds more ops at once (the
 *   mock's contend=, a model of a CPU-bound server): adapt=on settles on
 *   one path at depth 1, says so in the stats and the verdict, and moves
 *   the data faster than the fixed ceiling (adapt=off) on the same target.
 * - Independent rails, where goodput scales: every path is reached.
 * - A path that fails while the engine climbs does not count as "goodput
 *   fell": every path is still reached.
 * - adapt=off (the default): every path at full depth from the first call.
 *
 * Decisions are made on 2x differences (a step up halves the contended
 * target's rate, doubles the rails'), so a loaded machine does not turn
 * them; no assertion bounds a time.
 */
#include <string.h>

#include "core/internal.h"
#include "engine_util.h"
#include "transport/mock.h"

#define CHUNK (256 * EU_KIB)
#define N (4 * EU_MIB) /* 16 chunks */
#define GETS_MAX 12    /* calls before the class must have settled */

/* Whether some call so far waited for a CPU a quarter of its time or more
 * (the machine is too busy for its goodput to say anything: a decision made
 * then may go either way, so a test that misses its mark then skips). */
static bool starved;

static void get_one(struct eu *e, uint64_t seed)
{
    eu_get_check(e->c, "o", N, seed, &e->call);
    if ((double)e->st.cpu_wait_ns >= 0.25 * (double)e->st.elapsed_ns)
        starved = true;
}

#define SKIP_IF_STARVED(ok)                                                                        \
    do {                                                                                           \
        if (!(ok) && starved)                                                                      \
            T_SKIP("the machine was too busy to measure goodput (threads waited for a CPU a "      \
                   "quarter of a call)");                                                          \
    } while (0)

/* GET key until the GET class has left its climb (settled or at its
 * ceiling); the last call's stats are in e->st. */
static void get_until_settled(struct eu *e, uint64_t seed)
{
    if (EU_TSAN)
        T_SKIP("goodput is not measurable under ThreadSanitizer");
    for (int i = 0; i < GETS_MAX; i++) {
        get_one(e, seed);
        if (e->st.adapt_state != RIO_ADAPT_GROWING)
            return;
    }
    SKIP_IF_STARVED(false);
    T_FAIL("the GET class still climbs after %d calls (%u paths x depth %u)", GETS_MAX,
           e->st.adapt_paths, e->st.adapt_depth);
}

static unsigned paths_used(const struct rio_stats *st)
{
    unsigned n = 0;
    for (unsigned i = 0; i < st->npaths; i++)
        n += st->path[i].bytes > 0;
    return n;
}

/* Four paths to one service of 40 MB/s that halves with a second op held:
 * the engine settles on one path at depth 1, and the fixed ceiling (four
 * paths x depth 2, eight ops at once) is slower on the same store. */
TEST(adapt_settles_below_the_ceiling_on_a_contended_target)
{
    const char *url = "mock://adapt-contend?paths=4&disk=40MB&contend=1&adapt=on";
    struct eu e, off;

    eu_start_put_o(&e, url, N, 71, e.o.chunk_size = CHUNK, e.o.depth = 2);
    get_until_settled(&e, 71);
    SKIP_IF_STARVED(e.st.adapt_state == RIO_ADAPT_SETTLED && e.st.adapt_paths == 1 &&
                    e.st.adapt_depth == 1 && e.st.adapt_next_pct < 0);
    T_EQ(e.st.adapt_state, RIO_ADAPT_SETTLED);
    T_EQ(e.st.adapt_paths, 1u);
    T_EQ(e.st.adapt_depth, 1u);
    T_LT(e.st.adapt_next_pct, 0); /* two paths moved less (half, on a quiet machine) */
    T_TRUE(strstr(e.st.verdict_text, "adapt GET: 1 path x depth 1, settled: 2 paths x depth 1 "
                                     "gave") != NULL);

    /* Settled: the next call runs on one path from its start. */
    eu_get_check(e.c, "o", N, 71, &e.call);
    T_EQ(e.st.adapt_paths, 1u);
    uint64_t adapt_ns = e.st.elapsed_ns;

    eu_begin(&off);
    off.o.chunk_size = CHUNK;
    off.o.depth = 2;
    off.o.adapt = -1;
    eu_open(&off, url, &off.o); /* the same store: the same object */
    eu_get_check(off.c, "o", N, 71, &off.call);
    T_EQ(off.st.adapt_state, RIO_ADAPT_OFF);
    T_EQ(paths_used(&off.st), 4u);
    /* Eight ops at once move 40 / 8 MB/s where one moves 40: adapt is the
     * faster by far (a ratio, not a time bound). */
    T_LT(adapt_ns, off.st.elapsed_ns);
    eu_close(&off);
    eu_close(&e);
}

/* Four rails of 40 MB/s each: two paths move twice what one does, so the
 * engine goes on to every path. */
TEST(adapt_reaches_every_path_on_independent_rails)
{
    struct eu e;

    eu_start_put_o(&e, "mock://adapt-rails?paths=4&rate=40MB&adapt=on", N, 72,
                   e.o.chunk_size = CHUNK, e.o.depth = 2);
    get_until_settled(&e, 72);
    SKIP_IF_STARVED(e.st.adapt_paths == 4);
    T_EQ(e.st.adapt_paths, 4u);
    T_TRUE(e.st.adapt_depth >= 1 && e.st.adapt_depth <= 2);
    eu_get_check(e.c, "o", N, 72, &e.call);
    T_EQ(e.st.adapt_paths, 4u);
    T_EQ(paths_used(&e.st), 4u);
    eu_close(&e);
}

/* A path that resets while the engine climbs cools down; the window it
 * spoiled is dropped, not read as "more paths gave less". */
TEST(adapt_path_failure_is_not_less_goodput)
{
    struct eu e;

    eu_start_put_o(&e, "mock://adapt-fail?paths=4&rate=40MB&adapt=on", N, 73,
                   e.o.chunk_size = CHUNK, e.o.depth = 2);
    eu_fault(e.c, "disconnect:op=read:path=1:bytes=0:count=2:down=30");
    get_until_settled(&e, 73);
    T_GE(eu_faults_fired(e.c), 1u);
    SKIP_IF_STARVED(e.st.adapt_paths == 4);
    T_EQ(e.st.adapt_paths, 4u);
    eu_close(&e);
}

/* The target changes under a settled client: four independent rails climbed
 * to every path, then the service behind them becomes contended (each op
 * held beyond one divides its rate more). Goodput at the held level falls, the
 * step below is tried at once, and the engine goes down while fewer do
 * better, to one path. */
TEST(adapt_goes_down_when_the_target_wants_fewer)
{
    struct eu e;

    /* 64 chunks a call: a window at 4 x 2 needs 9 completions while work
     * still waits, which a call of 16 never gives at that level. */
    eu_start_put_o(&e, "mock://adapt-down?paths=4&rate=40MB&adapt=on", N, 76,
                   e.o.chunk_size = 64 * EU_KIB, e.o.depth = 2);
    get_until_settled(&e, 76);
    SKIP_IF_STARVED(e.st.adapt_paths == 4);
    T_EQ(e.st.adapt_paths, 4u);
    /* The links no longer limit (each op would overlap the service):
     * one op moves 40 MB/s, two 20. */
    for (unsigned p = 0; p < 4; p++)
        T_OK(rio_mock_set_path(e.c, p, 0, 0));
    T_OK(rio__mock_set_service(rio__client_transport(e.c), 40e6, 1));
    int i;
    for (i = 0; i < GETS_MAX; i++) {
        get_one(&e, 76);
        if (e.st.adapt_paths == 1 && e.st.adapt_state == RIO_ADAPT_SETTLED)
            break;
    }
    SKIP_IF_STARVED(i < GETS_MAX && e.st.adapt_next_pct < 0);
    if (i == GETS_MAX)
        T_FAIL("still on %u paths x depth %u (state %d) after %d calls on the contended "
               "service",
               e.st.adapt_paths, e.st.adapt_depth, e.st.adapt_state, GETS_MAX);
    T_EQ(e.st.adapt_depth, 1u);
    T_LT(e.st.adapt_next_pct, 0); /* the step up (2 paths) moves less */
    eu_close(&e);
}

/* Calls of two chunks never fill a window (the second chunk is out before
 * the first lands): the class climbs unmeasured, a level per three calls,
 * so small calls end up with the configured paths as without adapt. */
TEST(adapt_small_calls_climb_unmeasured)
{
    struct eu e;
    const size_t n = 2 * CHUNK;

    eu_start_put_o(&e, "mock://adapt-small?paths=4&rate=40MB&adapt=on", n, 77,
                   e.o.chunk_size = CHUNK, e.o.depth = 2);
    for (int i = 0; i < 20; i++)
        eu_get_check(e.c, "o", n, 77, &e.call);
    T_EQ(e.st.adapt_paths, 4u);
    T_EQ(e.st.adapt_depth, 2u);
    T_EQ(paths_used(&e.st), 4u); /* the two chunks, split over every path */
    eu_close(&e);
}

/* adapt=off (URL): every path, at full depth, from the first call. */
TEST(adapt_off_uses_every_path_at_once)
{
    struct eu e;

    eu_start_put_o(&e, "mock://adapt-off?paths=4&rate=40MB&adapt=off", N, 74,
                   e.o.chunk_size = CHUNK, e.o.depth = 2);
    eu_get_check(e.c, "o", N, 74, &e.call);
    T_EQ(e.st.adapt_state, RIO_ADAPT_OFF);
    T_EQ(e.st.adapt_paths, 0u);
    T_EQ(paths_used(&e.st), 4u);
    uint64_t peak = 0;
    for (unsigned i = 0; i < e.st.npaths; i++)
        peak = e.st.path[i].peak_depth > peak ? e.st.path[i].peak_depth : peak;
    T_EQ(peak, 2u);
    T_TRUE(strstr(e.st.verdict_text, "adapt") == NULL);
    eu_close(&e);
}

/* The default is off (docs/tuning.md): a fresh client uses every path at
 * the configured depth from its first op, and the verdict names no adapt. */
TEST(adapt_default_off)
{
    struct eu e;

    eu_start_o(&e, "mock://adapt-default?paths=4&rate=40MB", e.o.chunk_size = CHUNK, e.o.depth = 2);
    eu_keep(&e, eu_put_pattern(e.c, "o", N, 75, &e.call));
    T_EQ(e.st.adapt_state, RIO_ADAPT_OFF);
    T_EQ(paths_used(&e.st), 4u);
    T_TRUE(strstr(e.st.verdict_text, "adapt") == NULL);
    eu_close(&e);
}
