/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://: the cluster side. The URL's options, one cluster connection
 * (rados_t) per path with librados' own limits set, the pool table (an ioctx
 * per pool and path, opened on first use), open/close, the counters and the
 * ops table. The layout in the pool is docs/rados.md; the design is
 * docs/internals/rados.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rados/librados.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/url.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/internal.h"
#include "transport/transport.h"

static struct rados_transport *rt_cast(struct rio_transport *t)
{
    return t && t->ops == &rio__rados_ops ? (struct rados_transport *)t : NULL;
}

/* A librados result -> the engine's codes: the busy and interrupted
 * answers are a server-side condition the engine may retry. */
int rio__rados_xlate(int ret)
{
    if (ret >= 0)
        return ret;
    switch (ret) {
    case -EAGAIN:
    case -EBUSY:
    case -EINTR:
        return RIO_ESERVER;
    default:
        return ret;
    }
}

/* ---------------------------------------------------------------- pools */

/* A pool that cannot be opened: one that does not exist is named. */
static int pool_err(const char *name, int ret)
{
    if (ret == -ENOENT) {
        rio__detail("pool '%s' does not exist", name);
        return RIO_ENOCONTAINER;
    }
    rio__detail("pool '%s': %s", name, strerror(-ret));
    return rio__rados_xlate(ret);
}

/* Index of pool name in the table, opening its ioctxs on every path if it
 * is new. Blocking (it may ask the monitor): metadata paths only. */
int rio__rados_pool_get(struct rados_transport *t, const char *name)
{
    unsigned n, i, p;
    int ret;

    n = atomic_load(&t->npools);
    for (i = 0; i < n; i++)
        if (strcmp(t->pools[i].name, name) == 0)
            return (int)i;
    pthread_mutex_lock(&t->pools_mu);
    n = atomic_load(&t->npools);
    for (i = 0; i < n; i++)
        if (strcmp(t->pools[i].name, name) == 0)
            goto out;
    ret = RIO_EINVAL;
    if (n >= MAX_POOLS)
        goto err;
    struct rpool *rp = &t->pools[n];
    memset(rp, 0, sizeof(*rp));
    ret = -ENOMEM;
    rp->name = rio__strdup(name);
    if (!rp->name)
        goto err;
    for (p = 0; p < t->base.npaths; p++) {
        ret = rados_ioctx_create(t->cl[p], name, &rp->io[p]);
        if (ret < 0) {
            rp->io[p] = NULL;
            ret = pool_err(name, ret);
            goto err_io;
        }
        rados_ioctx_set_namespace(rp->io[p], RIO_RADOS_CHUNK_NS);
    }
    atomic_store(&t->npools, n + 1);
    i = n;
out:
    pthread_mutex_unlock(&t->pools_mu);
    return (int)i;
err_io:
    for (p = 0; p < t->base.npaths; p++)
        if (rp->io[p])
            rados_ioctx_destroy(rp->io[p]);
    rio__free(rp->name);
    memset(rp, 0, sizeof(*rp));
err:
    pthread_mutex_unlock(&t->pools_mu);
    return ret;
}

/* ------------------------------------------------------------ open/close */

static int conf_set_u64(rados_t cl, const char *opt, uint64_t v)
{
    char s[32];
    snprintf(s, sizeof(s), "%" PRIu64, v);
    return rados_conf_set(cl, opt, s);
}

struct rados_params {
    const char *conf, *id, *keyring;
    bool conf_env; /* conf came from RIO_CEPH_CONF: messages name it */
    uint64_t op_timeout_s;
    const char *inject;
};

/* The configuration file: a missing, unreadable or unparsable one is named
 * (and RIO_CEPH_CONF, when env says it came from there). */
static int conf_read(rados_t cl, const char *conf, bool env)
{
    const char *pre = env ? "RIO_CEPH_CONF: " : "";
    struct stat st;
    int ret;

    if (conf) {
        if (stat(conf, &st) != 0) {
            ret = -errno;
            rio__detail("%sceph.conf '%s': %s", pre, conf, strerror(errno));
            return ret;
        }
        if (S_ISDIR(st.st_mode)) {
            rio__detail("%sceph.conf '%s' is a directory", pre, conf);
            return RIO_EINVAL;
        }
        if (access(conf, R_OK) != 0) {
            ret = -errno;
            rio__detail("%sceph.conf '%s' is not readable: %s", pre, conf, strerror(errno));
            return ret;
        }
    }
    ret = rados_conf_read_file(cl, conf);
    if (ret == -ENOENT && !conf)
        rio__detail("no ceph.conf found: give conf=PATH or RIO_CEPH_CONF (librados also "
                    "looks at $CEPH_CONF, /etc/ceph/ceph.conf, ~/.ceph/config, ./ceph.conf)");
    else if (ret < 0)
        rio__detail("%sceph.conf '%s' cannot be read as a Ceph configuration: %s", pre,
                    conf ? conf : "(librados' search)", strerror(-ret));
    return ret;
}

/* Whether a file the keyring setting (a list: ',', ';' or ' ') names,
 * among those that can be read, has a "[client.ID]" section: 1 yes, 0 no,
 * -1 when none could be read (then nothing is known). Each file is read
 * only up to KEYRING_SCAN bytes. */
#define KEYRING_SCAN (1u << 20)
static int keyring_has(const char *keyring, const char *id)
{
    char list[512], want[160], line[512];
    int seen = -1;

    snprintf(list, sizeof(list), "%s", keyring);
    if (snprintf(want, sizeof(want), "[client.%s]", id) >= (int)sizeof(want))
        return -1;
    for (char *save = NULL, *path = strtok_r(list, ",; ", &save); path;
         path = strtok_r(NULL, ",; ", &save)) {
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        if (seen < 0)
            seen = 0;
        size_t read = 0;
        while (read < KEYRING_SCAN && fgets(line, sizeof(line), f)) {
            read += strlen(line);
            char *b = line + strspn(line, " \t");
            b[strcspn(b, " \t\r\n")] = '\0';
            if (!strcmp(b, want)) {
                seen = 1;
                break;
            }
        }
        fclose(f);
        if (seen == 1)
            break;
    }
    return seen;
}

/* rados_connect failed with ret: say what is missing, keyring or monitor. */
static int connect_err(rados_t cl, const struct rados_params *pp, int ret)
{
    char keyring[512] = "", mons[512] = "";

    if (rados_conf_get(cl, "keyring", keyring, sizeof(keyring)) < 0)
        keyring[0] = '\0';
    if (rados_conf_get(cl, "mon_host", mons, sizeof(mons)) < 0)
        mons[0] = '\0';
    switch (ret) {
    case -ENOENT:
        /* librados found no keyring file among those the setting names. */
        rio__detail("no keyring for client.%s: none of '%s' exists (keyring= or the conf's "
                    "keyring setting)",
                    pp->id, keyring);
        return RIO_ENOCREDS;
    case -ETIMEDOUT:
        rio__detail("no monitor answered within %" PRIu64 " s (mon host = %s)", pp->op_timeout_s,
                    mons[0] ? mons : "none set");
        return -ETIMEDOUT;
    case -EACCES:
    case -EPERM:
        /* The monitors say the same of a wrong key and of a user without
         * mon caps; a keyring without the user's key is told apart here. */
        if (keyring_has(keyring, pp->id) == 0)
            rio__detail("the monitors refused client.%s: '%s' holds no key for client.%s "
                        "(keyring= names the file that does)",
                        pp->id, keyring, pp->id);
        else
            rio__detail("the monitors refused client.%s: its key in '%s' is not the cluster's, "
                        "or the user has no 'mon' caps (ceph auth get client.%s)",
                        pp->id, keyring, pp->id);
        return -EACCES;
    default:
        rio__detail("connecting as client.%s to the monitors (%s): %s", pp->id,
                    mons[0] ? mons : "none set", strerror(-ret));
        return rio__rados_xlate(ret);
    }
}

static int connect_one(const struct rados_params *pp, rados_t *out)
{
    rados_t cl;
    int ret;

    ret = rados_create(&cl, pp->id);
    if (ret < 0)
        return ret;
    ret = conf_read(cl, pp->conf, pp->conf_env);
    if (ret < 0)
        goto err;
    ret = rados_conf_parse_env(cl, NULL);
    if (ret < 0)
        goto err;
    if (pp->keyring && (ret = rados_conf_set(cl, "keyring", pp->keyring)) < 0)
        goto err;
    /* Every op ends within the timeout, so a dead OSD or monitor is an
     * error and not a hang; the engine's budget bounds what is in flight,
     * so librados' own throttle (which would block submit) is lifted. */
    if ((ret = conf_set_u64(cl, "rados_osd_op_timeout", pp->op_timeout_s)) < 0 ||
        (ret = conf_set_u64(cl, "rados_mon_op_timeout", pp->op_timeout_s)) < 0 ||
        (ret = conf_set_u64(cl, "client_mount_timeout", pp->op_timeout_s)) < 0 ||
        (ret = conf_set_u64(cl, "objecter_inflight_op_bytes", 1ull << 40)) < 0 ||
        (ret = conf_set_u64(cl, "objecter_inflight_ops", 1u << 20)) < 0)
        goto err;
    ret = rados_connect(cl);
    if (ret < 0) {
        ret = connect_err(cl, pp, ret);
        goto err;
    }
    if (pp->inject && (ret = rados_conf_set(cl, "ms_inject_socket_failures", pp->inject)) < 0)
        goto err;
    *out = cl;
    return 0;
err:
    rados_shutdown(cl);
    return ret;
}

static void rt_close(struct rio_transport *tt)
{
    struct rados_transport *t = rt_cast(tt);

    if (!t)
        return;
    unsigned n = atomic_load(&t->npools);
    for (unsigned i = 0; i < n; i++) {
        for (unsigned p = 0; p < t->base.npaths; p++)
            if (t->pools[i].io[p])
                rados_ioctx_destroy(t->pools[i].io[p]);
        rio__free(t->pools[i].name);
    }
    rio__rados_idx_marks_wait(t);
    if (t->head_io)
        rados_ioctx_destroy(t->head_io);
    if (t->idx_io)
        rados_ioctx_destroy(t->idx_io);
    for (unsigned p = 0; p < t->nconns; p++) /* cl[nconns..] are aliases */
        if (t->cl[p])
            rados_shutdown(t->cl[p]);
    /* The engine reaps every op before closing; release any stragglers. */
    rio_list_each (op, &t->done, struct rop, dnode)
        rados_aio_release(op->comp);
    for (struct rop *op = t->held; op; op = op->next)
        rados_aio_release(op->comp);
    rio__opool_destroy(&t->pool);
    rio__rados_cache_clear(t);
    rio__rados_snaps_clear(t);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    pthread_mutex_destroy(&t->cache_mu);
    pthread_mutex_destroy(&t->pools_mu);
    rio__free(t);
}

/* A duration option above 0, in whole seconds rounded up. */
static int opt_s(const char *name, const char *v, uint64_t *out_s)
{
    uint32_t ms;

    if (rio__opt_ms(name, v, &ms) < 0)
        return RIO_EINVAL;
    if (!ms) {
        rio__detail("%s=%s: expected a duration above 0", name, v);
        return RIO_EINVAL;
    }
    *out_s = (ms + 999u) / 1000u;
    return 0;
}

static int rt_open(const struct rio_url *u, const struct rio_options *o, struct rio_transport **out)
{
    struct rados_transport *t;
    struct rados_params pp = {0};
    pthread_condattr_t ca;
    const char *s;
    uint64_t v, abort_s;
    unsigned npaths, nconns;
    int ret;

    if (!u || !out || !u->authority || !*u->authority)
        return RIO_EURL; /* rados://POOL */
    if (u->path && *u->path)
        return RIO_EURL; /* the key comes per call */

    /* Parameters. */
    pp.conf = rio__url_param(u, "conf");
    if (!pp.conf || !*pp.conf) {
        const char *e = getenv("RIO_CEPH_CONF");
        pp.conf = e && *e ? e : NULL; /* NULL: librados' search ($CEPH_CONF, /etc/ceph) */
        pp.conf_env = pp.conf != NULL;
    }
    pp.id = rio__url_param(u, "id");
    if (pp.id && !*pp.id)
        return RIO_EINVAL;
    if (pp.id && strncmp(pp.id, "client.", 7) == 0)
        pp.id += 7;
    if (!pp.id)
        pp.id = "admin";
    pp.keyring = rio__url_param(u, "keyring");
    pp.op_timeout_s = o && o->op_timeout_ms ? (o->op_timeout_ms + 999u) / 1000u : 10;
    if ((s = rio__url_param(u, "timeout")) && opt_s("timeout", s, &pp.op_timeout_s) < 0)
        return RIO_EINVAL;
    abort_s = pp.op_timeout_s * 3 > 10 ? pp.op_timeout_s * 3 : 10;
    if ((s = rio__url_param(u, "abort_timeout")) && opt_s("abort_timeout", s, &abort_s) < 0)
        return RIO_EINVAL;
    uint64_t stall_s = 60;
    if ((s = rio__url_param(u, "stall_check")) && opt_s("stall_check", s, &stall_s) < 0)
        return RIO_EINVAL;
    if ((s = rio__url_param(u, "inject_socket_failures"))) {
        if (rio__opt_uint("inject_socket_failures", s, 0, INT_MAX, &v) < 0)
            return RIO_EINVAL;
        pp.inject = s;
    }
    /* Paths are the engine's lanes of chunk ops (depth each); conns is how
     * many cluster connections carry them (path p on connection p mod
     * conns). Paths given: each its own connection unless conns= says
     * otherwise. Not given: DEF_PATHS lanes over one connection, the
     * concurrency `rados bench` uses (docs/tuning.md). */
    npaths = o && o->paths ? o->paths : DEF_PATHS;
    if (npaths > RIO_MAX_PATHS)
        return RIO_EINVAL;
    nconns = o && o->paths ? npaths : 1;
    if ((s = rio__url_param(u, "conns"))) {
        if (rio__opt_uint("conns", s, 1, npaths, &v) < 0)
            return RIO_EINVAL;
        nconns = (unsigned)v;
    }

    ret = rio__transport_new(u, out, sizeof(*t), &rio__rados_ops, &t);
    if (ret < 0)
        return ret;
    t->base.npaths = npaths;
    t->nconns = nconns;
    t->abort_ns = abort_s * 1000000000ull;
    t->stall_check_ns = stall_s * 1000000000ull;
    t->fail_chunk = -1;
    t->rng = o && o->seed ? o->seed : 0x7261646f73ull;
    t->gen_state = rio__now_ns() ^ (uint64_t)(uintptr_t)t;
    if ((s = rio__url_param(u, "fail_chunk"))) {
        ret = RIO_EINVAL;
        if (rio__opt_uint("fail_chunk", s, 0, INT64_MAX, &v) < 0)
            goto err_free;
        t->fail_chunk = (int64_t)v;
        t->fail_err = -EIO;
        if ((s = rio__url_param(u, "fail_error"))) {
            int e = rio__err_from_name(s);
            if (e >= 0)
                goto err_free;
            t->fail_err = e;
        }
    }
    ret = RIO_EINVAL;
    if ((s = rio__url_param(u, "shuffle")) && rio__opt_bool("shuffle", s, &t->shuffle) < 0)
        goto err_free;
    t->idx_recheck_ns = IDX_RECHECK_NS;
    if ((s = rio__url_param(u, "index_recheck"))) {
        uint32_t ms;
        if (rio__opt_ms("index_recheck", s, &ms) < 0 || ms == 0 || ms > 600000)
            goto err_free;
        t->idx_recheck_ns = (uint64_t)ms * 1000000u;
    }
    t->list_scan = LIST_SCAN_MAX;
    if ((s = rio__url_param(u, "list_scan"))) {
        if (rio__opt_uint("list_scan", s, 1, 1000000, &v) < 0)
            goto err_free;
        t->list_scan = (unsigned)v;
    }

    ret = -pthread_mutex_init(&t->pools_mu, NULL);
    if (ret < 0)
        goto err_free;
    ret = -pthread_mutex_init(&t->cache_mu, NULL);
    if (ret < 0)
        goto err_pools_mu;
    ret = -pthread_mutex_init(&t->mu, NULL);
    if (ret < 0)
        goto err_cache_mu;
    ret = -pthread_condattr_init(&ca);
    if (ret < 0)
        goto err_mu;
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    ret = -pthread_cond_init(&t->cv, &ca);
    pthread_condattr_destroy(&ca);
    if (ret < 0)
        goto err_mu;
    rio__opool_init(&t->pool, sizeof(struct rop), SLAB_OPS);
    ret = rio__opool_grow(&t->pool);
    if (ret < 0)
        goto err_cv;

    /* From here rt_close undoes everything. */
    for (unsigned p = 0; p < nconns; p++) {
        ret = connect_one(&pp, &t->cl[p]);
        if (ret < 0) {
            t->cl[p] = NULL;
            goto err_close;
        }
    }
    for (unsigned p = nconns; p < npaths; p++)
        t->cl[p] = t->cl[p % nconns];
    t->ctr.conns = nconns;
    ret = rados_ioctx_create(t->cl[0], u->authority, &t->head_io);
    if (ret < 0) {
        t->head_io = NULL;
        ret = pool_err(u->authority, ret);
        goto err_close;
    }
    ret = rados_ioctx_create(t->cl[0], u->authority, &t->idx_io);
    if (ret < 0) {
        t->idx_io = NULL;
        ret = pool_err(u->authority, ret);
        goto err_close;
    }
    rados_ioctx_set_namespace(t->idx_io, RIO_RADOS_IDX_NS);
    if ((s = rio__url_param(u, "pools")) && *s) {
        /* PUTs spread chunks over these pools, which take the first entries
         * of the pool table in the order given; the URL's pool holds heads. */
        char *list = rio__strdup(s), *save = NULL, *tok;
        ret = -ENOMEM;
        if (!list)
            goto err_close;
        for (tok = strtok_r(list, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            ret = t->nwpools < MAX_HEAD_POOLS ? rio__rados_pool_get(t, tok) : RIO_EINVAL;
            if (ret >= 0 && (unsigned)ret != t->nwpools)
                ret = RIO_EINVAL; /* listed twice */
            if (ret < 0)
                break;
            t->nwpools++;
        }
        rio__free(list);
        if (ret < 0)
            goto err_close;
    }
    ret = rio__rados_pool_get(t, u->authority);
    if (ret < 0)
        goto err_close;
    t->url_pool = ret;
    if (t->nwpools == 0)
        t->nwpools = 1;
    if ((s = rio__url_param(u, "max_object"))) {
        ret = RIO_EINVAL;
        if (rio__opt_size("max_object", s, 1, UINT64_MAX, 0, &t->max_object) < 0)
            goto err_close;
    } else {
        char val[64];
        t->max_object = 128ull << 20;
        if (rados_conf_get(t->cl[0], "osd_max_object_size", val, sizeof(val)) == 0 &&
            rio__parse_size(val, &v) == 0 && v > 0)
            t->max_object = v;
    }
    *out = &t->base;
    return 0;

err_close:
    rt_close(&t->base);
    return ret;
err_cv:
    pthread_cond_destroy(&t->cv);
err_mu:
    pthread_mutex_destroy(&t->mu);
err_cache_mu:
    pthread_mutex_destroy(&t->cache_mu);
err_pools_mu:
    pthread_mutex_destroy(&t->pools_mu);
err_free:
    rio__free(t);
    return ret;
}

void rio__rados_counters(struct rio_transport *tt, struct rio_rados_counters *out)
{
    struct rados_transport *t = rt_cast(tt);

    rio__counters_copy(t ? &t->mu : NULL, out, t ? &t->ctr : NULL, sizeof(*out));
}

void rio__rados_test_after_head_read(struct rio_transport *tt, void (*fn)(void *arg), void *arg)
{
    struct rados_transport *t = rt_cast(tt);

    if (t) {
        t->after_head_read_arg = arg;
        t->after_head_read = fn;
    }
}

/* rt_open reads them; docs/rados.md lists them. */
static const char *const rados_url_options[] = {
    "conf",          "id",
    "keyring",       "timeout",
    "abort_timeout", "inject_socket_failures",
    "fail_chunk",    "fail_error",
    "shuffle",       "pools",
    "max_object",    "list_scan",
    "conns",         "stall_check",
    "index_recheck", NULL,
};

const struct rio_transport_ops rio__rados_ops = {
    .scheme = "rados",
    .url_options = rados_url_options,
    .caps = RIO_CAP_ETAG | RIO_CAP_STREAM_PUT | RIO_CAP_LIST_UNORDERED | RIO_CAP_LIST_DELIM,
    RIO_TRANSPORT_OPS(rt_open, rt_close, rio__rados),
    .put_expect = rio__rados_put_expect,
    .remove_if = rio__rados_remove_if,
    .lookup_mtime = rio__rados_lookup_mtime,
    .list = rio__rados_list,
    .exists = rio__rados_exists,
    .fsck = rio__rados_fsck,
    .compose = rio__rados_compose,
};
