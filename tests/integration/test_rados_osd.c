/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados:// when an OSD dies mid-PUT: a real failure, not an injected one.
 * Cluster: 2 memstore OSDs, pool "rio" with 2 replicas (min_size 1), so once
 * the dead OSD is marked down the survivor serves every placement group.
 */
/* T_TIMEOUT 120 */
/* T_LABELS net;ceph */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(rados_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS "--osds 2 --pool-size 2 --pool rio"
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

#include "rados_util.h"

struct put_job {
    struct rio_client *c;
    const uint8_t *src;
    size_t n;
    _Atomic int done;
    int ret;
};

static void *put_thread(void *arg)
{
    struct put_job *j = arg;
    j->ret = rio_put(j->c, "kill/obj", j->src, j->n, NULL, NULL);
    atomic_store(&j->done, 1);
    return NULL;
}

/*
 * Kill -9 osd.1 once the PUT has chunks stored: every write then waits on
 * the dead replica, times out (rados_osd_op_timeout = 1 s), and the PUT
 * fails. Its abort keeps retrying the removal of every chunk it wrote; once
 * the monitor marks the OSD down (we tell it to, as an operator or the
 * failure detector would; the test holds it back with the nodown flag until
 * the PUT has failed) the survivor serves the removals. Afterwards no
 * chunk object and no head is left, and an object stored before the failure
 * still reads back whole.
 */
TEST(osd_killed_mid_put_leaves_no_chunks)
{
    struct rio_options o;
    size_t n = 192 * RU_MIB;
    size_t small = 3 * RU_MIB + 5;

    ru_opts(&o, RU_MIB, 4);
    o.op_timeout_ms = 1000;
    o.retry_attempts = 1;
    o.deadline_ms = 4000;
    struct rio_client *c = ru_client("rio", "abort_timeout=40s", &o);
    uint8_t *before = ru_pattern(small, 1), *src = ru_pattern(n, 2), *dst = malloc(small);
    T_OK(rio_put(c, "kill/before", before, small, NULL, NULL));
    /* Keep the dead OSD "up" in the map until we say otherwise, so the PUT
     * really waits on it (the failure detector is quick on one host). */
    T_EQ(t_ceph_sh("cli osd set nodown"), 0);

    struct put_job j = {.c = c, .src = src, .n = n};
    pthread_t th;
    T_EQ(pthread_create(&th, NULL, put_thread, &j), 0);
    uint64_t t0 = t_now_ms();
    while (ru_chunks("rio", "kill/obj") < 4) {
        if (atomic_load(&j.done) || t_now_ms() - t0 > 20000)
            T_FAIL("the PUT ended (%d) before the OSD could be killed", j.ret);
        usleep(10000);
    }
    T_EQ(t_ceph_sh("kill-osd 1"), 0);
    fprintf(stderr, "osd.1 killed after %" PRIu64 " ms\n", t_now_ms() - t0);
    /* Let the PUT fail on its own (op timeout) before the OSD is marked down. */
    uint64_t t_kill = t_now_ms();
    while (!atomic_load(&j.done) && t_now_ms() - t_kill < 3000)
        usleep(50000);
    T_EQ(t_ceph_sh("cli osd unset nodown"), 0);
    T_EQ(t_ceph_sh("cli osd down 1"), 0);
    pthread_join(th, NULL);
    fprintf(stderr, "PUT ended after %" PRIu64 " ms: %s\n", t_now_ms() - t0, rio_errname(j.ret));
    T_LT(j.ret, 0);
    ru_idle(c);
    struct rio_rados_counters rc;
    rio__rados_counters(rio__client_transport(c), &rc);
    fprintf(stderr, "chunk objects removed %" PRIu64 ", not removable %" PRIu64 "\n", rc.removed,
            rc.remove_failed);
    T_EQ(rc.remove_failed, 0);
    T_GE(rc.removed, 4);

    struct rio_desc s;
    T_ERR(rio_stat(c, "kill/obj", &s), RIO_ENOTFOUND);
    T_EQ(ru_chunks("rio", "kill/obj"), 0);
    T_EQ(rio_get(c, "kill/before", dst, small, NULL), (int64_t)small);
    T_MEMEQ(dst, before, small);
    T_OK(rio_delete(c, "kill/before"));
    T_EQ(ru_chunks("rio", NULL), 0);
    free(before);
    free(src);
    free(dst);
    rio_client_destroy(c);
}

/*
 * A user who may read the pool but not write it: the PUT fails with EPERM,
 * and its cleanup does not try its removals (refused as well, for good)
 * again and again until abort_timeout: it held each such PUT 30 s with the
 * defaults (review). Nothing is written; a GET works.
 */
TEST(read_only_user_put_fails_at_once)
{
    struct rio_options o;
    char kr[512], extra[640];
    size_t n = 4 * RU_MIB + 1;

    ru_opts(&o, RU_MIB, 4);
    struct rio_client *admin = ru_client("rio", NULL, &o);
    uint8_t *src = ru_pattern(n, 5), *dst = malloc(n);
    T_OK(rio_put(admin, "ro/obj", src, n, NULL, NULL));
    snprintf(kr, sizeof(kr), "%s/ro.keyring", t_ceph_dir());
    T_EQ(t_sh("timeout 20 ceph -c '%s' auth get-or-create client.ro mon 'allow r' "
              "osd 'allow r pool=rio' > '%s'",
              t_ceph_conf(), kr),
         0);
    snprintf(extra, sizeof(extra), "id=ro&keyring=%s&abort_timeout=30s", kr);
    struct rio_client *c = ru_client("rio", extra, &o);
    T_EQ(rio_get(c, "ro/obj", dst, n, NULL), (int64_t)n);
    T_MEMEQ(dst, src, n);
    uint64_t t0 = t_now_ms();
    T_ERR(rio_put(c, "ro/new", src, n, NULL, NULL), -EPERM);
    uint64_t ms = t_now_ms() - t0;
    fprintf(stderr, "the read-only user's PUT failed in %" PRIu64 " ms\n", ms);
    T_LT(ms, 10000u); /* not abort_timeout's 30 s */
    ru_idle(c);
    T_EQ(ru_chunks("rio", "ro/new"), 0);
    rio_client_destroy(c);
    T_OK(rio_delete(admin, "ro/obj"));
    rio_client_destroy(admin);
    free(src);
    free(dst);
}

/* Whether the pool is marked full in the OSD map (want) within 30 s. */
static int pool_full_is(int want)
{
    for (int i = 0; i < 150; i++) {
        int full = t_sh("timeout 20 ceph -c '%s' osd dump 2>/dev/null | "
                        "grep -qE \"^pool [0-9]+ 'rio' .* flags ([a-z_]+,)*full( |$)\"",
                        t_ceph_conf()) == 0;
        if (full == want)
            return 1;
        usleep(200000);
    }
    return 0;
}

static int ratios_low;

/* The operator's full ratios back to Ceph's defaults. */
static void ratios_restore(void *arg)
{
    (void)arg;
    t_ceph_sh("cli osd set-full-ratio 0.95");
    t_ceph_sh("cli osd set-backfillfull-ratio 0.90");
    t_ceph_sh("cli osd set-nearfull-ratio 0.85");
}

/*
 * A cluster marked full (the full ratio set below what the OSDs hold, as a
 * real one reaches it): a PUT fails at once with ENOSPC, before any op
 * timeout, the key's old version whole and no chunk of the new one left,
 * and a DELETE goes through, so an operator can free space with railio.
 * Before, librados held every write and removal to a full pool: a PUT
 * ended after its op timeouts as "no healthy path" (2 min with the
 * defaults) and rm could not remove anything (review).
 */
TEST(full_cluster_put_fails_at_once_delete_frees)
{
    struct rio_options o;
    size_t n = 8 * RU_MIB, small = RU_MIB + 3;

    ru_opts(&o, RU_MIB, 4);
    o.op_timeout_ms = 5000;
    struct rio_client *c = ru_client("rio", NULL, &o);
    uint8_t *old = ru_pattern(small, 3), *src = ru_pattern(n, 4), *dst = malloc(small);
    T_OK(rio_put(c, "full/old", old, small, NULL, NULL));
    T_OK(rio_put(c, "full/gone", old, small, NULL, NULL));
    t_on_exit(ratios_restore, &ratios_low);
    T_EQ(t_ceph_sh("cli osd set-nearfull-ratio 0.00001"), 0);
    T_EQ(t_ceph_sh("cli osd set-backfillfull-ratio 0.00002"), 0);
    T_EQ(t_ceph_sh("cli osd set-full-ratio 0.00003"), 0);
    T_TRUE(pool_full_is(1));

    uint64_t t0 = t_now_ms();
    T_ERR(rio_put(c, "full/old", src, n, NULL, NULL), -ENOSPC);
    uint64_t ms = t_now_ms() - t0;
    fprintf(stderr, "PUT to the full pool failed in %" PRIu64 " ms\n", ms);
    T_LT(ms, (uint64_t)o.op_timeout_ms); /* at once, not by a timeout */
    ru_idle(c);
    T_EQ(rio_get(c, "full/old", dst, small, NULL), (int64_t)small);
    T_MEMEQ(dst, old, small);
    T_EQ(ru_chunks("rio", "full/old"), 2);
    T_OK(rio_delete(c, "full/gone"));
    struct rio_desc d;
    T_ERR(rio_stat(c, "full/gone", &d), RIO_ENOTFOUND);
    T_EQ(ru_chunks("rio", "full/gone"), 0);

    ratios_restore(NULL);
    t_on_exit_cancel(&ratios_low);
    T_TRUE(pool_full_is(0));
    T_OK(rio_delete(c, "full/old"));
    T_EQ(ru_chunks("rio", "full/"), 0);
    free(old);
    free(src);
    free(dst);
    rio_client_destroy(c);
}

#endif /* RIO_HAVE_RADOS */
