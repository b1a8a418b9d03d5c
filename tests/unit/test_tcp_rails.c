/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The rails a railiod announces in HELLO (src/transport/tcp/config.c,
 * docs/protocol.md): its listeners' numeric addresses, a wildcard meaning
 * the host the client dialled. A name is refused, never looked up: a
 * server (or whoever rewrote its unauthenticated HELLO) chose it, and up
 * to 16 lookups at open were bounded by nothing.
 */
#include <string.h>

#include "t.h"
#include "transport/tcp/tcp_int.h"

TEST(announced_rails_are_addresses)
{
    struct tcp_member m;
    struct tcp_rail r;

    memset(&m, 0, sizeof(m));
    snprintf(m.host, sizeof(m.host), "127.0.0.1");
    snprintf(m.port, sizeof(m.port), "7070");
    T_OK(rio__tcp_rail_from_text(&m, "127.0.0.2:7071", &r));
    T_STREQ(r.text, "127.0.0.2:7071");
    T_OK(rio__tcp_rail_from_text(&m, "[::1]:7072", &r));
    T_OK(rio__tcp_rail_from_text(&m, "0.0.0.0:7073", &r)); /* the host dialled */
    T_ERR(rio__tcp_rail_from_text(&m, "localhost:7074", &r), RIO_EDNS);
    T_ERR(rio__tcp_rail_from_text(&m, "example.invalid:7075", &r), RIO_EDNS);
    /* A wildcard stands for the URL's host, which the user wrote: a name
     * there is looked up as the URL's own is. */
    snprintf(m.host, sizeof(m.host), "localhost");
    T_OK(rio__tcp_rail_from_text(&m, "0.0.0.0:7076", &r));
}
