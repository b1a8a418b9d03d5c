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
    size_t n = 1024 * RU_MIB + 12345;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    char md5[33];
    struct rio_desc d, s;

    ru_opts(&o, 4 * RU_MIB, 16);
    o.deadline_ms = 240000;
    struct rio_client *c = ru_client("rio", NULL, &o);
    uint8_t *src = ru_pattern(n, 99), *dst = malloc(n);
    T_NOTNULL(dst);
    ru_md5(src, n, md5);
    T_OK(rio_put(c, "big/1g", src, n, &call, &d));
    fprintf(stderr, "PUT 1 GiB: %.0f MB/s (hash %.2f s)\n", st.goodput_mbps, st.hash_ns / 1e9);
    T_STREQ(d.etag, md5);
    T_OK(rio_stat(c, "big/1g", &s));
    T_EQ(s.size, (uint64_t)n);
    T_STREQ(s.etag, md5);
    T_EQ(rio_get(c, "big/1g", dst, n, &call), (int64_t)n);
    fprintf(stderr, "GET 1 GiB: %.0f MB/s\n", st.goodput_mbps);
    T_MEMEQ(dst, src, n);
    free(dst);
    free(src);
    T_OK(rio_delete(c, "big/1g"));
    T_EQ(ru_chunks("rio", NULL), 0);
    rio_desc_cleanup(&d);
    rio_desc_cleanup(&s);
    ru_idle(c);
    rio_client_destroy(c);
}

#endif /* RIO_HAVE_RADOS */
