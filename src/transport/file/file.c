/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file:// transport: open, close, the ops table and the counters. The design is
 * at the top of internal.h; docs/internals/file.md maps the files.
 */
#include "transport/file/internal.h"

/* ----------------------------------------------------------- open, close */

static void file_close_t(struct rio_transport *tt);

static int file_open_t(const struct rio_url *u, const struct rio_options *o,
                       struct rio_transport **out)
{
    struct ftransport *t;
    struct stat st;
    int ret;

    ret = rio__transport_new(u, out, sizeof(*t), &rio__file_ops, &t);
    if (ret < 0)
        return ret;
    t->cq_efd = t->wake_efd = t->rootfd = -1;
    t->page = (unsigned)sysconf(_SC_PAGESIZE);
    if (t->page < 512 || t->page > (1u << 20))
        t->page = 4096;
    ret = -pthread_mutex_init(&t->fmu, NULL);
    if (ret < 0) {
        rio__free(t);
        return ret;
    }
    t->rng = (o && o->seed ? o->seed : rio__now_ns()) ^ (uint64_t)(uintptr_t)t;
    ret = rio__file_parse_config(t, u, o);
    if (ret < 0)
        goto err;
    ret = rio__file_root_of(u, &t->root);
    if (ret < 0)
        goto err;
    if (stat(t->root, &st) < 0) {
        /* A single file may be created by the first PUT; a directory must exist. */
        ret = -errno;
        if (!t->single || errno != ENOENT)
            goto err;
        t->single_missing = true;
    } else if (t->single) {
        ret = RIO_EINVAL;
        if (!S_ISREG(st.st_mode) && !S_ISBLK(st.st_mode))
            goto err;
        t->blockdev = S_ISBLK(st.st_mode);
    } else if (!S_ISDIR(st.st_mode)) {
        ret = -ENOTDIR;
        goto err;
    } else {
        t->rootfd = open(t->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (t->rootfd < 0) {
            ret = -errno;
            goto err;
        }
    }
    ret = -ENOMEM;
    t->ready = rio__calloc((size_t)t->base.npaths * t->depth, sizeof(*t->ready));
    if (!t->ready)
        goto err;
    t->cq_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    t->wake_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (t->cq_efd < 0 || t->wake_efd < 0) {
        ret = -errno;
        goto err;
    }
    for (unsigned i = 0; i < t->base.npaths; i++) {
        ret = rio__file_ring_init(t, &t->rings[i]);
        if (ret < 0)
            goto err;
    }
    /* Where direct steps will be staged (a device behind the files), the
     * bounce buffers are set up now rather than by the first op: registering
     * them faults in and pins every page (slow when a VM must back them), a cost of opening the
     * client, not of its first transfer. Elsewhere they serve only unaligned memory and come when
     * first needed. */
    if (t->direct != DIRECT_OFF && t->bounce_size && !t->single_missing &&
        rio__file_want_stage(t, &st)) {
        for (unsigned i = 0; i < t->base.npaths; i++) {
            struct fring *r = &t->rings[i];
            pthread_mutex_lock(&r->mu);
            rio__file_bounce_setup_locked(t, r);
            pthread_mutex_unlock(&r->mu);
        }
    }
    *out = &t->base;
    return 0;
err:
    file_close_t(&t->base);
    return ret;
}

static void file_close_t(struct rio_transport *tt)
{
    struct ftransport *t = ft(tt);

    if (!t)
        return;
    for (unsigned i = 0; i < RIO_MAX_PATHS; i++) {
        rio__file_ring_quiesce(t, &t->rings[i]);
        rio__file_ring_destroy(&t->rings[i]);
    }
    rio__file_close_list(&t->lru);
    rio__file_list_cache_drop(t);
    close_fd(t->cq_efd);
    close_fd(t->wake_efd);
    pthread_mutex_destroy(&t->fmu);
    rio__free(t->ready);
    close_fd(t->rootfd);
    rio__free(t->root);
    rio__free(t);
}

/* config.c reads them; docs/file.md lists them. */
static const char *const file_url_options[] = {
    "queues", "direct", "sync", "single", "inplace", "tmpfile", "bounce", "stage", NULL,
};

const struct rio_transport_ops rio__file_ops = {
    .scheme = "file",
    .url_options = file_url_options,
    /* Checksums only for objects railio wrote: see lookup. */
    .caps = RIO_CAP_ETAG | RIO_CAP_STREAM_PUT | RIO_CAP_RANGE_READ,
    RIO_TRANSPORT_OPS(file_open_t, file_close_t, rio__file), /* no path_cap, no cpu_ns */
    .put_expect = rio__file_put_expect,
    .remove_if = rio__file_remove_if,
    .list = rio__file_list,
    .exists = rio__file_exists,
};

int rio_file_counters(struct rio_client *c, struct rio_file_counters *out)
{
    /* Under a fault filter (faults= in the URL), the file transport it wraps. */
    struct rio_transport *tt = rio__fault_inner(c ? rio__client_transport(c) : NULL);
    struct ftransport *t;

    if (!out)
        return RIO_EINVAL;
    memset(out, 0, sizeof(*out));
    if (!tt || tt->ops != &rio__file_ops)
        return RIO_EINVAL;
    t = ft(tt);
    for (unsigned i = 0; i < t->base.npaths; i++) {
        struct fring *r = &t->rings[i];
        pthread_mutex_lock(&r->mu);
        out->steps_direct += r->ctr.steps_direct;
        out->steps_bounce += r->ctr.steps_bounce;
        out->steps_fixed += r->ctr.steps_fixed;
        out->steps_buffered += r->ctr.steps_buffered;
        out->continuations += r->ctr.continuations;
        out->direct_einval += r->ctr.direct_einval;
        out->cancels += r->ctr.cancels;
        out->inflight += r->inflight;
        out->submits += r->ctr.submits;
        out->bounce_bytes += r->bounce ? (uint64_t)r->nbounce * t->bounce_size : 0;
        pthread_mutex_unlock(&r->mu);
    }
    out->lookups = __atomic_load_n(&t->meta.lookups, __ATOMIC_RELAXED);
    out->lookup_ns = __atomic_load_n(&t->meta.lookup_ns, __ATOMIC_RELAXED);
    out->put_opens = __atomic_load_n(&t->meta.put_opens, __ATOMIC_RELAXED);
    out->put_open_ns = __atomic_load_n(&t->meta.put_open_ns, __ATOMIC_RELAXED);
    out->commits = __atomic_load_n(&t->meta.commits, __ATOMIC_RELAXED);
    out->commit_ns = __atomic_load_n(&t->meta.commit_ns, __ATOMIC_RELAXED);
    out->commit_sync_ns = __atomic_load_n(&t->meta.commit_sync_ns, __ATOMIC_RELAXED);
    return 0;
}
