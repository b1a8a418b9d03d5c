/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * A railio:// server's status codes as the client returns them
 * (wire_status, src/transport/tcp/tcp_int.h): the codes a server answers
 * pass; one the engine reads for its own decisions (an unknown outcome, a
 * cancel, a deadline, a failed path) cannot come from a server, which
 * could otherwise make a GET say "outcome unknown" or take a rail down by
 * answering -ECONNRESET.
 */
#include <errno.h>

#include "t.h"
#include "transport/tcp/tcp_int.h"

TEST(server_codes_pass)
{
    static const int pass[] = {RIO_EPROTO, RIO_ENOTFOUND, RIO_EGENERATION, RIO_ECHECKSUM,
                               RIO_EINVAL, RIO_ETHROTTLE, RIO_ENOTSUP,     RIO_ESERVER,
                               -EACCES,    -ENOSPC,       -EFBIG,          -ENOMEM,
                               -EIO,       -EROFS,        -EDQUOT};
    for (size_t i = 0; i < sizeof(pass) / sizeof(pass[0]); i++)
        T_EQ(wire_status(pass[i]), pass[i]);
    T_EQ(wire_status(-ENOENT), RIO_ENOTFOUND);
    T_EQ(wire_status(0), RIO_EPROTO);
    T_EQ(wire_status(7), RIO_EPROTO);
}

TEST(engine_codes_do_not_come_from_a_server)
{
    static const int eng[] = {RIO_EUNKNOWN, RIO_ECANCELED, RIO_EDEADLINE, RIO_ENOPATH, RIO_EAUTH,
                              RIO_ETLS,     RIO_EVERSION,  -ETIMEDOUT,    -ECONNRESET, -EPIPE,
                              -ECANCELED,   -ECONNREFUSED, -EHOSTUNREACH, -11000,      INT32_MIN};
    for (size_t i = 0; i < sizeof(eng) / sizeof(eng[0]); i++)
        T_EQ(wire_status(eng[i]), RIO_ESERVER);
}
