/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Path state through the transport contract (transport.h,
 * rio__t_path_event): a path the transport reports down is cooled at once,
 * with no op of it failing; reported up, its cooldown ends early and it gets
 * work again; reported degraded, it gets half the depth until it is up.
 *
 * The test thread reports for the mock transport, standing in for a
 * transport's own thread (the contract allows any thread the transport owns).
 * The event is recorded before the call is submitted, so the engine applies
 * it before it plans that call.
 */
#include "engine_util.h"
#include "transport/transport.h"

#define PE_SIZE (4 * EU_MIB)
#define PE_DEPTH 8u

static void get_stats(struct rio_client *c, struct rio_stats *st)
{
    struct rio_call call = {.stats = st};

    eu_get_check(c, "pe", PE_SIZE, 3, &call);
}

TEST(down_cools_at_once_up_ends_the_cooldown)
{
    struct eu e;
    struct rio_stats st;

    eu_begin(&e);
    /* Longer than the test: only an UP report can end this cooldown. */
    e.o.cooldown_base_ms = 600000;
    e.o.cooldown_cap_ms = 600000;
    eu_open(&e, "mock://pe?paths=2&rate=400M&lat=200us&adapt=off", &e.o);
    free(eu_put_pattern(e.c, "pe", PE_SIZE, 3, NULL));
    eu_idle(e.c);
    struct rio_transport *t = rio__client_transport(e.c);

    rio__t_path_event(t, 1, RIO_PATH_DOWN, -ECONNREFUSED);
    get_stats(e.c, &st);
    T_EQ(st.path[1].bytes, 0u); /* cooled before the call was planned */
    T_EQ(st.path[1].errors, 0u);
    T_EQ(st.retries_total, 0u); /* no op had to fail to learn it */
    T_EQ(st.path[0].bytes, (uint64_t)PE_SIZE);
    T_EQ(st.path[1].state, 1); /* still cooling */

    /* Minutes of cooldown ended by the report. The probe it earns may be
     * failed again as late (probe_late) when this process waited for a
     * CPU on a loaded machine (CI saw path 1 with 0 bytes): each try
     * reports up again; without the report no try moves a byte on it. */
    for (int try = 0; try < 5; try++) {
        rio__t_path_event(t, 1, RIO_PATH_UP, 0);
        get_stats(e.c, &st);
        if (st.path[1].bytes > 0)
            break;
    }
    T_GT(st.path[1].bytes, 0u);
    T_EQ(st.path[1].state, 0);

    /* Out of range and unknown reports change nothing. */
    rio__t_path_event(t, 7, RIO_PATH_DOWN, -ECONNRESET);
    get_stats(e.c, &st);
    T_GT(st.path[0].bytes, 0u);
    T_GT(st.path[1].bytes, 0u);
    eu_idle(e.c);
    eu_close(&e);
}

TEST(degraded_gets_half_the_depth_until_up)
{
    struct eu e;
    struct rio_stats st;

    eu_begin(&e);
    e.o.depth = PE_DEPTH;
    eu_open(&e, "mock://pe?paths=2&rate=2G&lat=2ms&adapt=off", &e.o);
    free(eu_put_pattern(e.c, "pe", PE_SIZE, 3, NULL));
    eu_idle(e.c);
    struct rio_transport *t = rio__client_transport(e.c);

    get_stats(e.c, &st); /* both paths fill their depth: latency-bound */
    T_GT(st.path[1].peak_depth, PE_DEPTH / 2);

    rio__t_path_event(t, 1, RIO_PATH_DEGRADED, 0);
    get_stats(e.c, &st);
    T_GT(st.path[1].bytes, 0u);
    T_LE(st.path[1].peak_depth, PE_DEPTH / 2);
    T_EQ(st.path[1].state, 0);

    rio__t_path_event(t, 1, RIO_PATH_UP, 0);
    get_stats(e.c, &st);
    T_GT(st.path[1].peak_depth, PE_DEPTH / 2);
    eu_idle(e.c);
    eu_close(&e);
}
