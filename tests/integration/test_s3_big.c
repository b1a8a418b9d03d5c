/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A 1 GiB object through s3:// and radosgw (tests/harness/ceph.sh --rgw):
 * multipart PUT of 64 parts, ranged GETs 8 in flight, byte-exact, the MD5
 * etag right, nothing left behind. Slow (tens of seconds on two cores), so
 * in its own program with the `slow` label; CI still runs it.
 */
/* T_TIMEOUT 600 */
/* T_LABELS net;ceph;slow */
#include "t.h"

#ifndef RIO_HAVE_CURL
TEST(s3_not_built)
{
    T_SKIP("built without libcurl (RIO_WITH_CURL)");
}
#else

#define SU_WITH_RGW
#include "s3_util.h"

#define BUCKET "rio"

/* MemAvailable in bytes, 0 if unknown. */
static uint64_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;

    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (uint64_t)kb * 1024;
}

TEST(roundtrip_1g)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    char url[512], md5[33];
    const size_t n = 1024 * SU_MIB + 4097;
    int64_t alloc0 = rio__alloc_outstanding();

    /* The OSD keeps about twice what is stored in RAM, the test one copy. */
    if (mem_available() && mem_available() < 4 * n)
        T_SKIP("needs about 4 GiB of free memory (%" PRIu64 " MiB available)",
               mem_available() >> 20);
    su_opts(&o, 16 * SU_MIB, 8);
    o.op_timeout_ms = 60000;
    o.deadline_ms = 500000;
    /* etag=md5: the stream MD5 (the multipart etag check below) is computed
     * only on request since one hash pass per byte became the default. */
    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s&etag=md5", su_rgw(BUCKET));
    struct rio_client *c = su_client(url, &o);

    uint8_t *buf = su_pattern(n, 1000);
    su_md5(buf, n, md5);
    T_OK(rio_put(c, "big/1g", buf, n, &call, &d));
    fprintf(stderr, "  PUT 1 GiB: %.0f MB/s (%" PRIu64 " parts)\n", st.goodput_mbps, st.chunks);
    T_STREQ(d.etag, md5);
    T_EQ(su_curl_count(su_rgw(BUCKET), BUCKET "?uploads=", "<Upload>"), 0u);

    memset(buf, 0xA5, n);
    T_EQ(rio_get(c, "big/1g", buf, n, &call), (int64_t)n);
    fprintf(stderr, "  GET 1 GiB: %.0f MB/s, retries %" PRIu64 "\n", st.goodput_mbps,
            st.retries_total);
    T_PATTERN(buf, n, 1000);
    T_OK(rio_delete(c, "big/1g"));
    T_EQ(su_curl_count(su_rgw(BUCKET), BUCKET "?prefix=big%2F", "<Key>"), 0u);
    rio_desc_cleanup(&d);
    free(buf);
    su_close(c, alloc0);
}

#endif
