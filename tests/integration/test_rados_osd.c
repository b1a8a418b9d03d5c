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

#endif /* RIO_HAVE_RADOS */
