/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Listing and batch existence in directory mode: the regular files beneath
 * the root, as keys relative to it, in byte order of key.
 *
 * A page is a depth-first walk that visits each directory's entries sorted
 * as their keys sort (a directory as its name and '/', so "a.b" comes
 * before "a/x"), skips every directory whose keys all sort at or before
 * the cursor or none of which can start with the prefix, and stops at the
 * first key past a full page: a page costs the directories on its way,
 * not the tree. The token is the page's last key.
 *
 * Nothing leads out of the root: the root is opened beneath itself, every
 * directory below it with O_NOFOLLOW from its parent, and symbolic links
 * are neither followed nor listed. The transport's temporary files (and
 * the CLI's partial downloads: rio__file_tmp_name) are not objects and
 * are not listed; keys cannot name them.
 */
#include "transport/file/internal.h"

#include <dirent.h>

/* A walk's state: the page it fills and the key it is at. */
struct walk {
    struct rio__list_span sp;
    struct rio_list_page *out;
    bool more; /* a key past the full page exists */
    char key[RIO_KEY_MAX + 2];
};

/* One directory entry: its name as it sorts (a directory's ends in '/'),
 * at off in its list's names. */
struct dent {
    size_t off;
    bool dir;
};

/*
 * A directory's entries worth a look, sorted, and what the directory was
 * when they were read. A large one stays in the transport's cache and
 * serves the next pages of the same listing while the directory's mtime
 * and ctime say it has not changed: without it every page of a flat
 * directory read and sorted the whole of it again (300,000 files listed
 * in 64 s; docs/bench.md). A list is trusted again only if the directory
 * had last changed at least LIST_QUIET_NS before it was read: a change
 * made in the same clock tick as an earlier one may leave both
 * timestamps as they were (git's "racy" index entries), one made a second
 * later cannot. The cache holds the lists of RIO_FILE_LIST_CACHE
 * directories, so that a walk through a tree does not push its large
 * parent out.
 */
struct dlist {
    unsigned refs; /* under fmu */
    uint64_t used; /* under fmu: the transport's list_clock when last taken */
    dev_t dev;
    ino_t ino;
    struct timespec mtime, ctime;
    uint64_t read_ns; /* CLOCK_REALTIME when it was read */
    size_t n, bytes;
    struct dent *v;
    char *names;
};

#define LIST_QUIET_NS 1000000000ull            /* a directory unchanged this long before its read */
#define LIST_CACHE_MIN 1024                    /* entries: smaller directories are read again */
#define LIST_CACHE_BYTES (64u << 20)           /* the most the kept lists hold, together */
#define LIST_CACHE_AGE_NS (60 * 1000000000ull) /* and the longest it serves */

static const char *dent_name(const struct dlist *l, size_t i)
{
    return l->names + l->v[i].off;
}

static int dent_cmp(const void *a, const void *b, void *names)
{
    return strcmp((const char *)names + ((const struct dent *)a)->off,
                  (const char *)names + ((const struct dent *)b)->off);
}

static bool skip_name(const char *name)
{
    return (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]))) ||
           rio__file_tmp_name(name, strlen(name));
}

static void dlist_free(struct dlist *l)
{
    if (!l)
        return;
    rio__free(l->v);
    rio__free(l->names);
    rio__free(l);
}

/* Drop a reference to l (taken from the cache or made by dlist_read). */
static void dlist_put(struct ftransport *t, struct dlist *l)
{
    bool last;

    if (!l)
        return;
    pthread_mutex_lock(&t->fmu);
    last = --l->refs == 0;
    pthread_mutex_unlock(&t->fmu);
    if (last)
        dlist_free(l);
}

void rio__file_list_cache_drop(struct ftransport *t)
{
    for (unsigned i = 0; i < RIO_FILE_LIST_CACHE; i++) {
        dlist_put(t, t->list_cache[i]);
        t->list_cache[i] = NULL;
    }
}

static bool same_ts(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* The cached list of the directory st describes, if one may serve. */
static struct dlist *dlist_cached(struct ftransport *t, const struct stat *st, uint64_t now)
{
    struct dlist *l = NULL;

    pthread_mutex_lock(&t->fmu);
    for (unsigned i = 0; i < RIO_FILE_LIST_CACHE && !l; i++) {
        struct dlist *c = t->list_cache[i];
        if (c && c->dev == st->st_dev && c->ino == st->st_ino && same_ts(&c->mtime, &st->st_mtim) &&
            same_ts(&c->ctime, &st->st_ctim) && now >= c->read_ns &&
            now - c->read_ns < LIST_CACHE_AGE_NS) {
            l = c;
            l->refs++;
            l->used = ++t->list_clock;
        }
    }
    pthread_mutex_unlock(&t->fmu);
    return l;
}

/* Keep l (one reference is the caller's) in the cache, if it may serve
 * later pages: in the slot of an older list of the same directory, else
 * in the one used longest ago, others dropped while the cache holds more
 * than LIST_CACHE_BYTES. */
static void dlist_keep(struct ftransport *t, struct dlist *l)
{
    struct dlist *old[RIO_FILE_LIST_CACHE] = {0};
    uint64_t m = ts_ns(&l->mtime), c = ts_ns(&l->ctime);
    unsigned slot = 0, nold = 0;
    size_t bytes = l->bytes;

    if (l->n < LIST_CACHE_MIN || l->bytes > LIST_CACHE_BYTES || l->read_ns < LIST_QUIET_NS ||
        m > l->read_ns - LIST_QUIET_NS || c > l->read_ns - LIST_QUIET_NS)
        return;
    pthread_mutex_lock(&t->fmu);
    uint64_t best = 0;
    for (unsigned i = 0; i < RIO_FILE_LIST_CACHE; i++) {
        const struct dlist *e = t->list_cache[i];
        if (e && e->dev == l->dev && e->ino == l->ino) {
            slot = i; /* an older list of the same directory */
            break;
        }
        /* else an empty slot, else the one used longest ago */
        uint64_t rank = e ? UINT64_MAX - e->used : UINT64_MAX;
        if (i == 0 || rank > best) {
            slot = i;
            best = rank;
        }
    }
    old[nold++] = t->list_cache[slot];
    t->list_cache[slot] = l;
    l->refs++;
    l->used = ++t->list_clock;
    for (unsigned i = 0; i < RIO_FILE_LIST_CACHE; i++)
        if (i != slot && t->list_cache[i])
            bytes += t->list_cache[i]->bytes;
    while (bytes > LIST_CACHE_BYTES) { /* the least recently used go first */
        unsigned v = slot;
        for (unsigned i = 0; i < RIO_FILE_LIST_CACHE; i++)
            if (i != slot && t->list_cache[i] &&
                (v == slot || t->list_cache[i]->used < t->list_cache[v]->used))
                v = i;
        bytes -= t->list_cache[v]->bytes;
        old[nold++] = t->list_cache[v];
        t->list_cache[v] = NULL;
    }
    for (unsigned i = 0; i < nold; i++)
        if (old[i] && --old[i]->refs > 0)
            old[i] = NULL;
    pthread_mutex_unlock(&t->fmu);
    for (unsigned i = 0; i < nold; i++)
        dlist_free(old[i]);
}

static int dlist_add(struct dlist *l, size_t *cap, size_t *ncap, const char *name, bool dir)
{
    size_t len = strlen(name);

    if (l->n == *cap) {
        size_t nc = *cap ? *cap * 2 : 64;
        struct dent *nv = rio__realloc(l->v, nc * sizeof(*l->v));
        if (!nv)
            return -ENOMEM;
        l->v = nv;
        *cap = nc;
    }
    if (*ncap - l->bytes < len + 2) {
        size_t nc = *ncap ? *ncap : 4096;
        while (nc - l->bytes < len + 2)
            nc *= 2;
        char *nn = rio__realloc(l->names, nc);
        if (!nn)
            return -ENOMEM;
        l->names = nn;
        *ncap = nc;
    }
    memcpy(l->names + l->bytes, name, len);
    l->names[l->bytes + len] = dir ? '/' : '\0';
    l->names[l->bytes + len + 1] = '\0';
    l->v[l->n].off = l->bytes;
    l->v[l->n].dir = dir;
    l->n++;
    l->bytes += len + 2;
    return 0;
}

/* The entries of the directory dirfd (st its stat) worth a look: regular
 * files and directories, not symbolic links; from the cache where it may
 * serve. */
static int dlist_get(struct ftransport *t, int dirfd, const struct stat *st, struct dlist **out)
{
    struct timespec now;
    struct dlist *l;
    struct dirent *de;
    size_t cap = 0, ncap = 0;
    int ret = 0, fd;
    DIR *d;

    clock_gettime(CLOCK_REALTIME, &now);
    l = dlist_cached(t, st, ts_ns(&now));
    if (l) {
        *out = l;
        return 0;
    }
    l = rio__calloc(1, sizeof(*l));
    if (!l)
        return -ENOMEM;
    l->refs = 1;
    l->dev = st->st_dev;
    l->ino = st->st_ino;
    l->mtime = st->st_mtim;
    l->ctime = st->st_ctim;
    l->read_ns = ts_ns(&now);
    fd = dup(dirfd);
    if (fd < 0) {
        ret = -errno;
        goto err;
    }
    d = fdopendir(fd);
    if (!d) {
        ret = -errno;
        close(fd);
        goto err;
    }
    errno = 0;
    while ((de = readdir(d))) {
        bool dir;
        if (skip_name(de->d_name))
            continue;
        if (de->d_type == DT_DIR || de->d_type == DT_REG) {
            dir = de->d_type == DT_DIR;
        } else if (de->d_type == DT_UNKNOWN) {
            struct stat est;
            if (fstatat(dirfd, de->d_name, &est, AT_SYMLINK_NOFOLLOW) < 0)
                continue; /* gone meanwhile */
            if (!S_ISDIR(est.st_mode) && !S_ISREG(est.st_mode))
                continue;
            dir = S_ISDIR(est.st_mode);
        } else {
            continue; /* links, devices, sockets, fifos */
        }
        ret = dlist_add(l, &cap, &ncap, de->d_name, dir);
        if (ret < 0)
            break;
        errno = 0;
    }
    if (!ret && errno)
        ret = -errno;
    closedir(d);
    if (ret < 0)
        goto err;
    if (l->n > 1) /* v is NULL in an empty directory: qsort's pointer must not be */
        qsort_r(l->v, l->n, sizeof(*l->v), dent_cmp, l->names);
    dlist_keep(t, l);
    *out = l;
    return 0;
err:
    dlist_free(l);
    return ret;
}

/* The first entry of l, a directory whose keys start with key[0..base),
 * that can hold a key at or after bound (the cursor or the prefix): the
 * keys of the entries before it (a directory's, every key beneath it)
 * sort before bound and do not start with it. */
static size_t dlist_from(const struct dlist *l, const char *key, size_t base, const char *bound)
{
    if (strncmp(bound, key, base) != 0)
        return 0; /* outside: dir_wanted put the whole directory after it or in the prefix */
    const char *rem = bound + base;
    const char *slash = strchr(rem, '/');
    size_t clen = slash ? (size_t)(slash - rem) + 1 : strlen(rem);
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const char *nm = dent_name(l, mid);
        size_t nlen = strlen(nm);
        int c = memcmp(nm, rem, nlen < clen ? nlen : clen);
        if (c < 0 || (c == 0 && nlen < clen))
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether any key under directory key k (klen bytes, ending in '/') can be
 * in the page: it and the prefix agree, and not all its keys sort at or
 * before the cursor. */
static bool dir_wanted(const struct walk *w, const char *k, size_t klen)
{
    size_t m = klen < w->sp.plen ? klen : w->sp.plen;
    if (memcmp(k, w->sp.prefix, m) != 0)
        return false;
    const char *after = w->sp.after;
    return !after[0] || strcmp(k, after) > 0 || strncmp(after, k, klen) == 0;
}

/* ret (< 0), having said which of the store's paths failed: the file or
 * directory whose key is w->key[0..klen) ("" the root). A listing that
 * fails on one unreadable directory among thousands said only
 * "permission denied", and nothing said where. */
static int walk_fail(struct ftransport *t, const struct walk *w, size_t klen, const char *doing,
                     int ret)
{
    rio__detail("file://: %s %s/%.*s: %s", doing, t->root, (int)klen, w->key, rio_strerror(ret));
    return ret;
}

/* Add file name (its key is w->key, klen bytes) to the page, or note that
 * the page is full. */
static int walk_file(struct ftransport *t, struct walk *w, int dirfd, const char *name, size_t klen)
{
    struct rio_list_page *p = w->out;
    struct stat st;

    if (!rio__list_span_has(&w->sp, w->key, klen))
        return 0;
    if (p->n == w->sp.max) {
        w->more = true;
        return 0;
    }
    /* Opened (never through a link) for its stat and its checksum record,
     * whose etag the entry carries when the record still describes it. */
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (fd < 0 && errno != EACCES && errno != EPERM)
        return errno == ENOENT || errno == ELOOP ? 0 /* gone, or now a link */
                                                 : walk_fail(t, w, klen, "cannot open", -errno);
    int ret = 0;
    /* One we may not read is listed all the same, without its etag. */
    if (fd < 0 ? fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 : fstat(fd, &st) < 0) {
        ret = errno == ENOENT ? 0 : walk_fail(t, w, klen, "cannot stat", -errno);
        goto out;
    }
    if (!S_ISREG(st.st_mode))
        goto out; /* replaced meanwhile: not in this page */
    struct rio_entry *e = &p->entries[p->n++];
    struct rio_desc d;
    memset(e, 0, sizeof(*e));
    memcpy(e->key, w->key, klen + 1);
    e->size = (uint64_t)st.st_size;
    e->generation = rio__file_gen_of(&st, e->size);
    e->mtime_ns = (int64_t)ts_ns(&st.st_mtim);
    memset(&d, 0, sizeof(d));
    if (fd >= 0)
        ret = rio__file_xrec_load(fd, &st, e->size, &d);
    memcpy(e->etag, d.etag, sizeof(e->etag));
    e->etag[sizeof(e->etag) - 1] = '\0';
    rio_desc_cleanup(&d);
out:
    close_fd(fd);
    return ret;
}

/* Walk directory dirfd, whose keys start with w->key[0..base). */
static int walk_dir(struct ftransport *t, struct walk *w, int dirfd, size_t base)
{
    struct dlist *l = NULL;
    struct stat st;
    int ret;

    if (fstat(dirfd, &st) < 0)
        return -errno;
    ret = dlist_get(t, dirfd, &st, &l);
    if (ret < 0)
        return ret == -ENOMEM ? ret : walk_fail(t, w, base, "cannot read the directory", ret);
    size_t from = dlist_from(l, w->key, base, w->sp.after);
    size_t pfrom = dlist_from(l, w->key, base, w->sp.prefix);
    for (size_t i = from > pfrom ? from : pfrom; i < l->n && !w->more; i++) {
        const char *nm = dent_name(l, i);
        size_t len = strlen(nm); /* with the '/' of a directory */
        /* A directory's keys are at least one byte longer than its name. */
        if (base + len + (l->v[i].dir ? 1 : 0) > RIO_KEY_MAX)
            continue;
        memcpy(w->key + base, nm, len + 1);
        if (!l->v[i].dir) {
            ret = walk_file(t, w, dirfd, nm, base + len);
        } else if (dir_wanted(w, w->key, base + len)) {
            char name[NAME_MAX + 2];
            memcpy(name, nm, len - 1);
            name[len - 1] = '\0';
            int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) {
                /* Gone, or replaced by a link, meanwhile: nothing of it. */
                ret = errno == ENOENT || errno == ENOTDIR || errno == ELOOP
                          ? 0
                          : walk_fail(t, w, base + len, "cannot open the directory", -errno);
            } else {
                ret = walk_dir(t, w, fd, base + len);
                close(fd);
            }
        }
        if (ret < 0)
            break;
    }
    dlist_put(t, l);
    return ret;
}

int rio__file_list(struct rio_transport *tt, const struct rio_list_args *a,
                   struct rio_list_page *out)
{
    struct ftransport *t = ft(tt);
    struct walk *w;
    int fd, ret;

    memset(out, 0, sizeof(*out));
    if (t->single)
        return RIO_ENOTSUP; /* every key is the one file: nothing to list */
    w = rio__calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    rio__list_span_of(a, &w->sp);
    w->out = out;
    out->entries = rio__calloc(w->sp.max, sizeof(*out->entries));
    ret = -ENOMEM;
    if (!out->entries)
        goto err_w;
    fd = rio__file_open_beneath(t, t->rootfd, ".", O_RDONLY | O_DIRECTORY, 0);
    if (fd < 0) {
        ret = fd == -ENOENT ? RIO_ENOCONTAINER : fd;
        goto err_entries;
    }
    ret = walk_dir(t, w, fd, 0);
    close(fd);
    if (ret < 0)
        goto err_entries;
    if (w->more)
        memcpy(out->next_token, out->entries[out->n - 1].key,
               strlen(out->entries[out->n - 1].key) + 1);
    rio__free(w);
    return 0;
err_entries:
    rio__free(out->entries);
    memset(out, 0, sizeof(*out));
err_w:
    rio__free(w);
    return ret;
}

/* Each key a stat beneath the root: a regular file (or, in single mode,
 * the one file) exists; a key that names nothing does not. */
int rio__file_exists(struct rio_transport *tt, const char *const *keys, unsigned n, uint8_t *out)
{
    struct ftransport *t = ft(tt);

    for (unsigned i = 0; i < n; i++) {
        char *path;
        struct stat st;
        int ret = rio__file_key_path(t, keys[i], &path);
        if (ret < 0)
            return ret;
        int fd = t->single
                     ? open(path, O_PATH | O_CLOEXEC)
                     : rio__file_open_beneath(t, t->rootfd, rio__file_rel_of(t, path), O_PATH, 0);
        if (t->single && fd < 0)
            fd = -errno;
        rio__free(path);
        if (fd == -ENOENT || fd == -ENOTDIR) {
            out[i] = 0;
            continue;
        }
        if (fd < 0)
            return fd;
        ret = fstat(fd, &st);
        close(fd);
        if (ret < 0)
            return -errno;
        out[i] = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
    }
    return 0;
}
