/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The URL and the options: the root, queues, depth and the I/O policy.
 */
#include "transport/contract.h"
#include "transport/file/internal.h"

int rio__file_parse_config(struct ftransport *t, const struct rio_url *u,
                           const struct rio_options *o)
{
    const char *s;
    uint64_t v;

    /* Queues: the options' paths (which the engine fills from ?paths= and
     * RIO_PATHS), else ?queues=, else 1. */
    if (rio__transport_npaths(&t->base, u, o, "queues") < 0)
        return RIO_EINVAL;
    /* Cached files hold two descriptors each: at most an eighth of the
     * process's, so a low limit leaves room for uploads and the rest. */
    struct rlimit rl;
    t->cache_max = FILE_CACHE_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 8 < t->cache_max)
        t->cache_max = rl.rlim_cur / 8 > 4 ? (unsigned)(rl.rlim_cur / 8) : 4;
    t->depth = o && o->depth ? o->depth : 4;
    if (t->depth > FILE_RING_SLOTS_MAX)
        t->depth = FILE_RING_SLOTS_MAX;
    t->base.max_depth = t->depth; /* the engine never sends more to a ring */

    int direct = -1, stage = -1; /* auto */
    bool tmpf = true;
    t->sync = true;
    if (rio__url_tristate(u, "direct", "auto", &direct) < 0 ||
        rio__url_bool(u, "sync", &t->sync) < 0 || rio__url_bool(u, "single", &t->single) < 0 ||
        rio__url_bool(u, "inplace", &t->inplace) < 0 || rio__url_bool(u, "tmpfile", &tmpf) < 0)
        return RIO_EINVAL;
    t->direct = direct < 0 ? DIRECT_AUTO : direct ? DIRECT_ON : DIRECT_OFF;
    /* Unnamed uploads need /proc to be linked (and reopened O_DIRECT). */
    atomic_init(&t->tmpfile, tmpf && access("/proc/self/fd", X_OK) == 0);
    /* Bounce buffers: one chunk each (at least 1 MiB, at most 64 MiB), one
     * per command in flight up to 64 per ring and 256 MiB in all. */
    v = o && o->chunk_size ? (o->chunk_size + 4095) / 4096 * 4096 : FILE_BOUNCE_DEFAULT;
    t->bounce_size = (uint32_t)(v < FILE_BOUNCE_DEFAULT ? FILE_BOUNCE_DEFAULT
                                : v > FILE_BOUNCE_MAX   ? FILE_BOUNCE_MAX
                                                        : v);
    if ((s = rio__url_param(u, "bounce"))) {
        if (rio__opt_size("bounce", s, 0, FILE_BOUNCE_MAX, RIO_OPT_SIZE_4K, &v) < 0)
            return RIO_EINVAL;
        t->bounce_size = (uint32_t)v;
    }
    t->bounce_slots = t->depth < FILE_BOUNCE_SLOTS ? t->depth : FILE_BOUNCE_SLOTS;
    if (t->bounce_size) {
        uint64_t fit = FILE_BOUNCE_TOTAL / t->base.npaths / t->bounce_size;
        if (t->bounce_slots > fit)
            t->bounce_slots = fit ? (unsigned)fit : 1;
    }
    if (rio__url_tristate(u, "stage", "auto", &stage) < 0)
        return RIO_EINVAL;
    t->stage = stage < 0 ? STAGE_AUTO : stage ? STAGE_ON : STAGE_OFF;
    return 0;
}

/* The URL's path, absolute ("file:///a/b" parses to "a/b"), without trailing '/'. */
int rio__file_root_of(const struct rio_url *u, char **out)
{
    size_t n;
    char *p;

    if (u->authority && *u->authority && strcmp(u->authority, "localhost") != 0)
        return RIO_EURL; /* file://host/... names another machine */
    if (!u->path || !*u->path)
        return RIO_EURL;
    n = strlen(u->path);
    if (n + 2 > PATH_MAX)
        return -ENAMETOOLONG;
    p = rio__malloc(n + 2);
    if (!p)
        return -ENOMEM;
    p[0] = '/';
    memcpy(p + 1, u->path, n + 1);
    while (n > 0 && p[n] == '/')
        p[n--] = '\0';
    *out = p;
    return 0;
}
