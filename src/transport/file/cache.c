/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The cache of open files for READs, keyed by (key, generation): lookup
 * opens a file, the GET's READ ops use it, the LRU closes what is idle.
 */
#include <time.h>

#include "transport/file/internal.h"

/* ------------------------------------------------------------ file cache */

void rio__file_close(struct ffile *f)
{
    close_fd(f->fd);
    close_fd(f->dfd);
    rio__free(f);
}

static struct ffile *lru_file(struct rio_list_node *n)
{
    return rio_list_entry(n, struct ffile, lru);
}

static struct ffile *cache_find_locked(struct ftransport *t, const char *key, uint64_t kh,
                                       uint64_t gen)
{
    rio_list_each (f, &t->lru, struct ffile, lru)
        if (f->khash == kh && f->gen == gen && strcmp(f->key, key) == 0)
            return f;
    return NULL;
}

/* Move idle entries past the cap onto out (closed by the caller, unlocked). */
static void cache_trim_to_locked(struct ftransport *t, unsigned max, struct rio_list *out)
{
    struct ffile *f = lru_file(t->lru.tail);

    while (t->lru.count > max && f) {
        struct ffile *prev = lru_file(f->lru.prev);
        if (f->refs == 0) {
            rio_list_remove(&t->lru, &f->lru);
            rio_list_push_back(out, &f->lru);
        }
        f = prev;
    }
}

static void cache_trim_locked(struct ftransport *t, struct rio_list *out)
{
    cache_trim_to_locked(t, t->cache_max, out);
}

void rio__file_close_list(struct rio_list *l)
{
    for (struct rio_list_node *n; (n = rio_list_pop_front(l));)
        rio__file_close(lru_file(n));
}

/* Out of descriptors (EMFILE, ENFILE): close every cached file no READ
 * uses and keep half as many from now on (4 at least), so the open that
 * failed can be tried again. Descriptors the cache does not hold (a READ's
 * file, an upload, an open on another thread) come back as that work ends,
 * so from the second try on it waits first: 1, 2, 4 ... 64 ms, then 64 ms
 * again, about 250 ms over FILE_SHED_TRIES tries. Whether to try again:
 * err was one of those and tries are left. */
bool rio__file_cache_shed(struct ftransport *t, int err, unsigned attempt)
{
    struct rio_list dead = {0};

    if ((err != -EMFILE && err != -ENFILE) || attempt >= FILE_SHED_TRIES)
        return false;
    if (attempt > 0) {
        unsigned ms = attempt < 7 ? 1u << (attempt - 1) : 64u;
        nanosleep(&(struct timespec){.tv_nsec = (long)ms * 1000000L}, NULL);
    }
    pthread_mutex_lock(&t->fmu);
    unsigned half = (unsigned)(t->lru.count / 2);
    if (half < t->cache_max)
        t->cache_max = half > 4 ? half : 4;
    cache_trim_to_locked(t, 0, &dead);
    pthread_mutex_unlock(&t->fmu);
    rio__file_close_list(&dead);
    return true;
}

/* Take every cached open of key (hash kh) out of the cache: those no READ
 * uses onto dead (closed by the caller, unlocked), the others closed by
 * their last release. */
static void cache_drop_key_locked(struct ftransport *t, const char *key, uint64_t kh,
                                  struct rio_list *dead)
{
    struct ffile *f, *next;

    for (f = lru_file(t->lru.head); f; f = next) {
        next = lru_file(f->lru.next);
        if (f->khash != kh || strcmp(f->key, key) != 0)
            continue;
        rio_list_remove(&t->lru, &f->lru);
        if (f->refs == 0) {
            rio_list_push_back(dead, &f->lru);
        } else {
            f->dead = true;
        }
    }
}

/* Forget every cached open of key (a remove or a new PUT made them stale). */
void rio__file_cache_forget(struct ftransport *t, const char *key)
{
    struct rio_list dead = {0};

    pthread_mutex_lock(&t->fmu);
    cache_drop_key_locked(t, key, rio__xxh3(key, strlen(key)), &dead);
    pthread_mutex_unlock(&t->fmu);
    rio__file_close_list(&dead);
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
    struct rio_list dead = {0};
    struct ffile *e;

    pthread_mutex_lock(&t->fmu);
    e = cache_find_locked(t, f->key, f->khash, f->gen);
    if (e) {
        rio_list_remove(&t->lru, &e->lru);
    } else {
        e = f;
        f = NULL;
        /* The key's file was just opened as this generation: any other
         * one cached was replaced (by another process, or changed in
         * place), and holding it open would hold a replaced file's space
         * until the cache evicts it. */
        cache_drop_key_locked(t, e->key, e->khash, &dead);
    }
    rio_list_push_front(&t->lru, &e->lru);
    if (take)
        e->refs++;
    cache_trim_locked(t, &dead);
    pthread_mutex_unlock(&t->fmu);
    if (f)
        rio__file_close(f);
    rio__file_close_list(&dead);
    return e;
}

/* Whether a READ holds one of the cached files. */
static bool files_in_use(struct ftransport *t)
{
    bool used = false;

    pthread_mutex_lock(&t->fmu);
    rio_list_each (f, &t->lru, struct ffile, lru)
        if (f->refs > 0) {
            used = true;
            break;
        }
    pthread_mutex_unlock(&t->fmu);
    return used;
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
        if (&f->lru != t->lru.head) {
            rio_list_remove(&t->lru, &f->lru);
            rio_list_push_front(&t->lru, &f->lru);
        }
    }
    pthread_mutex_unlock(&t->fmu);
    if (f) {
        *out = f;
        return 0;
    }
    /* Not cached (evicted since the lookup, or never looked up): open it
     * again. A cached dentry makes this a few microseconds. This runs in
     * submit, under the engine's lock: out of descriptors it sheds and
     * tries once, without waiting; then, while other READs hold files,
     * -EAGAIN, and the engine offers the chunk again as those complete. */
    ret = rio__file_open(t, key, &f, &st);
    if (ret < 0 && rio__file_cache_shed(t, ret, 0))
        ret = rio__file_open(t, key, &f, &st);
    if ((ret == -EMFILE || ret == -ENFILE) && files_in_use(t))
        return -EAGAIN;
    if (ret < 0)
        return ret;
    if (f->gen != gen) {
        rio__file_close(f);
        return RIO_EGENERATION;
    }
    *out = rio__file_cache_insert(t, f, true);
    return 0;
}
