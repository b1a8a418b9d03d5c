/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados:// with a 1 GiB object: PUT, STAT, GET byte-exact, ETag == MD5, and
 * nothing left after delete. Its own cluster (1 memstore OSD: about 2 GiB of
 * RAM while the object is stored).
 */
/* T_TIMEOUT 300 */
/* T_LABELS net;ceph;slow */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(rados_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS "--osds 1 --pool rio --memstore 16G"
#include "rados_util.h"

TEST(roundtrip_1g)
{
    struct rio_options o;

    ru_opts(&o, 4 * RU_MIB, 16);
    o.deadline_ms = 240000;
    struct rio_client *c = ru_client("rio", NULL, &o);
    t_roundtrip_big(c, "big/1g", 1024 * RU_MIB + 12345, 99);
    T_EQ(ru_chunks("rio", NULL), 0);
    ru_idle(c);
    rio_client_destroy(c);
}

#endif /* RIO_HAVE_RADOS */
