/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 180 */
/* T_LABELS net;ceph */
/*
 * railio fsck beside the S3 gateway over rados:// (docs/gateway.md,
 * "Scale-out and fsck"): a gateway killed with -9 in the middle of a PUT
 * leaves chunk objects and no head; while another gateway streams a slow
 * PUT (a chunk a second), `railio fsck --grace 4s` removes the dead
 * gateway's chunks, exactly them, and leaves the upload in progress whole,
 * which then completes; every object reads back byte-exact through the
 * gateway; a second fsck finds nothing.
 */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(gw_rados_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS "--osds 1 --pool rio"
#include "ceph_env.h"
#include "gw_util.h"
#include "rados_util.h"

/* Wait until pool holds at least n chunk objects under prefix. */
static void wait_chunks(const char *prefix, uint64_t n)
{
    uint64_t t0 = t_now_ms();
    while (ru_chunks("rio", prefix) < n) {
        if (t_now_ms() - t0 > 30000)
            T_FAIL("%" PRIu64 " chunks of %s after 30 s, not %" PRIu64, ru_chunks("rio", prefix),
                   prefix, n);
        t_sleep_ms(20);
    }
}

TEST(fsck_after_a_gateway_killed_mid_put)
{
    struct gw a, k;
    char url[1024], out[1024];

    gw_need();
    ru_url(url, sizeof(url), "rio", "chunk=1M");
    gw_start(&a, url, NULL);
    gw_start(&k, url, NULL);
    gw_file(&a, "src", 9 * 1024 * 1024 + 5, 41);
    gw_file(&a, "slow", 12 * 1024 * 1024 + 7, 42);
    T_EQ(gw_curl(&a, "o", "-X PUT %s/fbk", a.url), 200);
    T_EQ(gw_curl(&a, "o", "-T %s %s/fbk/kept", gw_path(&a, "src"), a.url), 200);
    uint64_t kept_chunks = ru_chunks("rio", "fbk/kept.");
    T_EQ(kept_chunks, 10u);

    /* A gateway killed mid-PUT: chunks, no head. */
    T_EQ(t_sh("(curl -s -o /dev/null --limit-rate 2M -T %s %s/fbk/half &)", gw_path(&a, "src"),
              k.url),
         0);
    wait_chunks("fbk/half.", 2);
    srv_kill9(&k.e);
    t_sleep_ms(300);
    uint64_t half = ru_chunks("rio", "fbk/half.");
    T_EQ(gw_curl(&a, "o", "-I %s/fbk/half", a.url), 404);

    /* An upload in progress through the live gateway: a chunk a second. */
    T_EQ(t_sh("(curl -s -o /dev/null -w '%%{http_code}' --limit-rate 1M -T %s %s/fbk/live > %s &)",
              gw_path(&a, "slow"), a.url, gw_path(&a, "live.code")),
         0);
    wait_chunks("fbk/live.", 1);
    t_sleep_ms(4600); /* the dead gateway's chunks are now older than 4 s */
    T_EQ(ru_railio(out, sizeof(out), "fsck --grace 4s -v rados://rio"), 0);
    T_EQ(ru_lines_with(out, "removed rio fbk/half.", NULL), half);
    T_EQ(ru_lines_with(out, "removed rio", NULL), half);
    T_GE(ru_lines_with(out, "young rio fbk/live.", NULL), 3u);
    T_EQ(ru_chunks("rio", "fbk/half."), 0u);
    T_EQ(ru_chunks("rio", "fbk/kept."), kept_chunks);

    /* The upload completes; everything reads back. */
    uint64_t t0 = t_now_ms();
    while (t_sh("grep -q 200 %s", gw_path(&a, "live.code")) != 0) {
        if (t_now_ms() - t0 > 30000)
            T_FAIL("the slow PUT did not end with 200 in 30 s");
        t_sleep_ms(50);
    }
    T_EQ(gw_curl(&a, "got", "%s/fbk/live", a.url), 200);
    T_TRUE(gw_same(&a, "got", "slow"));
    T_EQ(gw_curl(&a, "got", "%s/fbk/kept", a.url), 200);
    T_TRUE(gw_same(&a, "got", "src"));
    T_EQ(ru_railio(out, sizeof(out), "fsck --grace 0 rados://rio"), 0);
    T_EQ(ru_lines_with(out, "fsck: ", " 0 orphans: "), 1u);
    gw_stop(&a);
}
#endif
