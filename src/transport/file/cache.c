/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache of open files for READs, keyed by (key, generation): lookup
 * opens a file, the GET's READ ops use it, the LRU closes what is idle.
 */
#include "transport/file/internal.h"

/* ------------------------------------------------------------ file cache */

void rio__file_close(struct ffile *f)
{
    close_fd(f->fd);
    close_fd(f->dfd);
    rio__free(f);
}

void rio__file_lru_unlink_locked(struct ftransport *t, struct ffile *f)
{
    if (f->prev)
        f->prev->next = f->next;
    else
        t->lru_head = f->next;
    if (f->next)
        f->next->prev = f->prev;
    else
        t->lru_tail = f->prev;
    f->prev = f->next = NULL;
    t->nfiles--;
}

static void lru_front_locked(struct ftransport *t, struct ffile *f)
{
    f->prev = NULL;
    f->next = t->lru_head;
    if (t->lru_head)
        t->lru_head->prev = f;
    t->lru_head = f;
    if (!t->lru_tail)
        t->lru_tail = f;
    t->nfiles++;
}

static struct ffile *cache_find_locked(struct ftransport *t, const char *key, uint64_t kh,
                                       uint64_t gen)
{
    for (struct ffile *f = t->lru_head; f; f = f->next)
        if (f->khash == kh && f->gen == gen && strcmp(f->key, key) == 0)
            return f;
    return NULL;
}

/* Drop idle entries past the cap onto *out (closed by the caller, unlocked). */
static void cache_trim_to_locked(struct ftransport *t, unsigned max, struct ffile **out)
{
    struct ffile *f = t->lru_tail;

    while (t->nfiles > max && f) {
        struct ffile *prev = f->prev;
        if (f->refs == 0) {
            rio__file_lru_unlink_locked(t, f);
            f->next = *out;
            *out = f;
        }
        f = prev;
    }
}

static void cache_trim_locked(struct ftransport *t, struct ffile **out)
{
    cache_trim_to_locked(t, t->cache_max, out);
}

static void close_list(struct ffile *l)
{
    while (l) {
        struct ffile *n = l->next;
        rio__file_close(l);
        l = n;
    }
}

/* Out of descriptors (EMFILE, ENFILE): close every cached file no READ
 * uses and keep half as many from now on (4 at least), so the open that
 * failed can be tried once more. Whether err was that. */
bool rio__file_cache_shed(struct ftransport *t, int err)
{
    struct ffile *dead = NULL;

    if (err != -EMFILE && err != -ENFILE)
        return false;
    pthread_mutex_lock(&t->fmu);
    unsigned half = t->nfiles / 2;
    if (half < t->cache_max)
        t->cache_max = half > 4 ? half : 4;
    cache_trim_to_locked(t, 0, &dead);
    pthread_mutex_unlock(&t->fmu);
    close_list(dead);
    return true;
}

/* Forget every cached open of key (a remove or a new PUT made them stale). */
void rio__file_cache_forget(struct ftransport *t, const char *key)
{
    uint64_t kh = rio__xxh3(key, strlen(key));
    struct ffile *dead = NULL, *f, *next;

    pthread_mutex_lock(&t->fmu);
    for (f = t->lru_head; f; f = next) {
        next = f->next;
        if (f->khash != kh || strcmp(f->key, key) != 0)
            continue;
        rio__file_lru_unlink_locked(t, f);
        if (f->refs == 0) {
            f->next = dead;
            dead = f;
        } else {
            f->dead = true;
        }
    }
    pthread_mutex_unlock(&t->fmu);
    close_list(dead);
}

void rio__file_release(struct ftransport *t, struct ffile *f)
{
    bool close_it;

    pthread_mutex_lock(&t->fmu);
    close_it = --f->refs == 0 && f->dead;
    pthread_mutex_unlock(&t->fmu);
    if (close_it)
        rio__file_close(f);
}

/*
 * Open key's file for reading: buffered and (when allowed) O_DIRECT
 * descriptors, its size, generation and direct geometry. *st gets its stat.
 */
int rio__file_open(struct ftransport *t, const char *key, struct ffile **out, struct stat *st)
{
    const char *ck = rio__file_cache_key(t, key);
    size_t kl = strlen(ck);
    struct ffile *f;
    char *path;
    int ret, fl;

    ret = rio__file_key_path(t, key, &path);
    if (ret < 0)
        return ret;
    f = rio__calloc(1, sizeof(*f) + kl + 1);
    if (!f) {
        rio__free(path);
        return -ENOMEM;
    }
    f->dfd = -1;
    /* O_NONBLOCK so that a FIFO under the key cannot hang the open; cleared
     * at once, since io_uring honours it on regular files too. */
    if (t->single)
        f->fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    else
        f->fd = rio__file_open_beneath(t, t->rootfd, rio__file_rel_of(t, path),
                                       O_RDONLY | O_NONBLOCK, 0);
    if (f->fd < 0) {
        ret = rio__file_open_err(t->single ? errno : -f->fd);
        goto err;
    }
    if (fstat(f->fd, st) < 0) {
        ret = -errno;
        goto err;
    }
    if (S_ISDIR(st->st_mode)) {
        ret = -EISDIR;
        goto err;
    }
    if (!S_ISREG(st->st_mode) && !(t->single && S_ISBLK(st->st_mode))) {
        ret = RIO_EINVAL;
        goto err;
    }
    fl = fcntl(f->fd, F_GETFL);
    if (fl < 0 || fcntl(f->fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
        ret = -errno;
        goto err;
    }
    ret = rio__file_fd_size(f->fd, st, &f->size);
    if (ret < 0)
        goto err;
    char pf[FD_PATH_LEN];
    ret = rio__file_open_direct(t, t->single ? path : rio__file_fd_path(f->fd, pf), O_RDONLY, st,
                                &f->dfd);
    if (ret < 0)
        goto err;
    rio__file_dio_geometry(t, f->dfd >= 0 ? f->dfd : f->fd, st, &f->unit, &f->mem);
    f->stage = rio__file_want_stage(t, st);
    f->gen = rio__file_gen_of(st, f->size);
    f->khash = rio__xxh3(ck, kl);
    memcpy(f->key, ck, kl + 1);
    rio__free(path);
    *out = f;
    return 0;
err:
    close_fd(f->fd);
    rio__free(f);
    rio__free(path);
    return ret;
}

/*
 * Put f in the cache, or use the entry already there for the same (key,
 * generation) and close f. With take, the entry returned carries a reference.
 */
struct ffile *rio__file_cache_insert(struct ftransport *t, struct ffile *f, bool take)
{
    struct ffile *dead = NULL, *e;

    pthread_mutex_lock(&t->fmu);
    e = cache_find_locked(t, f->key, f->khash, f->gen);
    if (e) {
        rio__file_lru_unlink_locked(t, e);
        lru_front_locked(t, e);
    } else {
        e = f;
        lru_front_locked(t, e);
        f = NULL;
    }
    if (take)
        e->refs++;
    cache_trim_locked(t, &dead);
    pthread_mutex_unlock(&t->fmu);
    if (f)
        rio__file_close(f);
    close_list(dead);
    return e;
}

/* The open file a READ of (key, gen) uses, with a reference. */
int rio__file_get(struct ftransport *t, const char *key, uint64_t gen, struct ffile **out)
{
    const char *ck = rio__file_cache_key(t, key);
    uint64_t kh = rio__xxh3(ck, strlen(ck));
    struct ffile *f;
    struct stat st;
    int ret;

    pthread_mutex_lock(&t->fmu);
    f = cache_find_locked(t, ck, kh, gen);
    if (f) {
        f->refs++;
        if (f != t->lru_head) {
            rio__file_lru_unlink_locked(t, f);
            lru_front_locked(t, f);
        }
    }
    pthread_mutex_unlock(&t->fmu);
    if (f) {
        *out = f;
        return 0;
    }
    /* Not cached (evicted since the lookup, or never looked up): open it
     * again. A cached dentry makes this a few microseconds. */
    ret = rio__file_open(t, key, &f, &st);
    if (ret < 0 && rio__file_cache_shed(t, ret))
        ret = rio__file_open(t, key, &f, &st);
    if (ret < 0)
        return ret;
    if (f->gen != gen) {
        rio__file_close(f);
        return RIO_EGENERATION;
    }
    *out = rio__file_cache_insert(t, f, true);
    return 0;
}
