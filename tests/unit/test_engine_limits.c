/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Limits the engine takes from the transport (struct rio_transport,
 * transport.h) instead of restating them: a path holds at most max_depth
 * ops, whatever depth the client asks for.
 */
#include "engine_util.h"
#include "transport/mock.h"

/*
 * The mock publishes depth_cap as its max_depth. A client asking for depth 8
 * keeps at most 2 ops on each path and never hears -EAGAIN from submit: it
 * did not size its window from a constant that matches the transport's by
 * chance. Without the clamp every scheduling pass offers the full paths a
 * third op and the mock refuses it (refused > 0).
 */
TEST(depth_clamped_to_transport_max_depth)
{
    struct eu e;
    const size_t n = 4 * EU_MIB;

    /* adapt=off: the full depth from the first call (the clamp is tested) */
    eu_start_o(&e, "mock://limits?paths=2&depth_cap=2&rate=400M&adapt=off", e.o.depth = 8);
    T_EQ(rio__client_transport(e.c)->max_depth, 2u);
    eu_keep(&e, eu_put_pattern(e.c, "o", n, 3, &e.call));
    for (unsigned i = 0; i < 2; i++)
        T_LE(e.st.path[i].peak_depth, 2u);
    eu_get_check(e.c, "o", n, 3, &e.call);
    for (unsigned i = 0; i < 2; i++) {
        T_LE(e.st.path[i].peak_depth, 2u);
        T_GT(e.st.path[i].ops, 0u);
    }
    T_EQ(rio__mock_refused(rio__client_transport(e.c)), 0u);
    eu_idle(e.c);
    eu_close(&e);
}

/* A transport limit above the client's depth (the mock's default 1024): the
 * client's depth is the window. */
TEST(larger_transport_limit_keeps_client_depth)
{
    struct eu e;
    const size_t n = 4 * EU_MIB;

    eu_start_put_o(&e, "mock://limits0?rate=100M", n, 4, e.o.depth = 4, e.o.paths = 1);
    eu_get_check(e.c, "o", n, 4, &e.call);
    T_LE(e.st.path[0].peak_depth, 4u);
    T_GE(e.st.path[0].peak_depth, 2u);
    eu_close(&e);
}
