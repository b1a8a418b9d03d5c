/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The HTTP response head as the s3:// and http:// transports read it
 * (src/transport/s3_parse.c): Content-Length repeated with values that
 * disagree is believed in none of them (a HEAD claiming 64 then 1,000,000,000
 * bytes made every GET wait for bytes that never came, 44 s, instead of
 * failing at once), while the same value repeated still counts.
 */
#include <string.h>

#include "t.h"
#include "transport/s3_parse.h"

static void feed(struct s3_rsp *r, const char *const *lines)
{
    rio__s3_rsp_reset(r);
    for (; *lines; lines++)
        rio__s3_rsp_header(r, *lines, strlen(*lines));
}

TEST(content_length_conflict_is_no_length)
{
    struct s3_rsp r;
    const char *conflict[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n",
                              "Content-Length: 1000000000\r\n", NULL};
    const char *conflict3[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n",
                               "content-length: 65\r\n", "Content-Length: 64\r\n", NULL};
    const char *bad_then_good[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: -1\r\n",
                                   "Content-Length: 64\r\n", NULL};
    const char *same[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 64\r\n", "Content-Length: 64\r\n",
                          NULL};
    const char *one[] = {"HTTP/1.1 200 OK\r\n", "Content-Length: 18446744073709551615\r\n", NULL};

    feed(&r, conflict);
    T_EQ(r.status, 200);
    T_FALSE(r.have_clen);
    feed(&r, conflict3);
    T_FALSE(r.have_clen);
    feed(&r, bad_then_good);
    T_FALSE(r.have_clen);
    feed(&r, same);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, 64u);
    feed(&r, one);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, UINT64_MAX);
    /* A new status line (after 100 Continue) starts over. */
    const char *again[] = {"HTTP/1.1 100 Continue\r\n", "Content-Length: 1\r\n",
                           "Content-Length: 2\r\n",     "HTTP/1.1 200 OK\r\n",
                           "Content-Length: 5\r\n",     NULL};
    feed(&r, again);
    T_TRUE(r.have_clen);
    T_EQ(r.clen, 5u);
}
