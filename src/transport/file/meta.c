/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metadata: lookup, uploads (O_TMPFILE or a named temporary file), the
 * commit (checksum record, fsync, link or rename, directory fsync), abort
 * and remove.
 */
#include "core/fsname.h"
#include "transport/file/internal.h"
#include "transport/file/rec.h"

#include <sys/file.h> /* flock; after internal.h, which defines _GNU_SOURCE */

/* ----------------------------------------------------------- xattr record */

/* Store d's record (rec.h) on fd, whose mtime is mtime_ns. */
static int xrec_store(int fd, const struct rio_desc *d, uint64_t mtime_ns)
{
    uint8_t *b;
    size_t n;
    int ret;

    ret = rio__file_rec_encode(d, mtime_ns, &b, &n);
    if (ret < 0 || !b)
        return ret;
    if (fsetxattr(fd, RIO_FILE_REC_XATTR, b, n, 0) < 0) {
        /* Too big for this file system, or no user xattrs: the object is
         * stored without checksums, which lookup then reports as none. */
        if (errno != E2BIG && errno != ENOSPC && errno != ERANGE && errno != ENOTSUP &&
            errno != EOPNOTSUPP && errno != EPERM)
            ret = -errno;
    }
    rio__free(b);
    return ret;
}

/* Fill d's geometry, checksums and etag from fd's record when it matches
 * the file; leave them "unknown" otherwise. Returns 0 or -ENOMEM. */
int rio__file_xrec_load(int fd, const struct stat *st, uint64_t size, struct rio_desc *d)
{
    ssize_t n = fgetxattr(fd, RIO_FILE_REC_XATTR, NULL, 0);
    uint8_t *b;
    int ret = 0;

    if (n < (ssize_t)(RIO_FILE_REC_HDR + 8) || n > (ssize_t)RIO_FILE_REC_MAX)
        return 0;
    b = rio__malloc((size_t)n);
    if (!b)
        return -ENOMEM;
    if (fgetxattr(fd, RIO_FILE_REC_XATTR, b, (size_t)n) == n)
        ret = rio__file_rec_decode(b, (size_t)n, size, ts_ns(&st->st_mtim), d);
    rio__free(b);
    return ret < 0 ? ret : 0;
}

/* ---------------------------------------------------------------- uploads */

static void upload_free(struct fupload *up)
{
    up->magic = 0;
    close_fd(up->fd);
    close_fd(up->dfd);
    if (up->dirfd >= 0)
        close(up->dirfd);
    rio__free(up->written);
    rio__free(up->tmp);
    rio__free(up->final);
    rio__free(up->key);
    rio__free(up);
}

void rio__file_upload_unref(struct ftransport *t, struct fupload *up)
{
    bool last;

    pthread_mutex_lock(&t->fmu);
    last = --up->refs == 0;
    pthread_mutex_unlock(&t->fmu);
    if (last)
        upload_free(up);
}

/* --------------------------------------------------------------- metadata */

int rio__file_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    struct ftransport *t = ft(tt);
    struct ffile *f;
    struct stat st;
    uint64_t t0 = rio__now_ns();
    size_t kl;
    int ret;

    if (!key || !out)
        return RIO_EINVAL;
    if (rio__key_len(key, &kl) < 0)
        return RIO_EINVAL;
    ret = rio__file_open(t, key, &f, &st);
    for (unsigned i = 0; ret < 0 && rio__file_cache_shed(t, ret, i); i++)
        ret = rio__file_open(t, key, &f, &st);
    if (ret == RIO_ENOTFOUND) /* removed by another process: let its file go */
        rio__file_cache_forget(t, rio__file_cache_key(t, key));
    if (ret < 0)
        return ret;
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, kl + 1);
    out->generation = f->gen;
    out->size = f->size;
    if (S_ISREG(st.st_mode)) {
        ret = rio__file_xrec_load(f->fd, &st, f->size, out);
        if (ret < 0) {
            rio__file_close(f);
            return ret;
        }
    }
    /* Kept open for the READs that usually follow a lookup. */
    rio__file_cache_insert(t, f, false);
    meta_add(&t->meta.lookups, &t->meta.lookup_ns, t0);
    return 0;
}

/* "DIR/.NAME.railio-tmp-XXXXXXXXXXXXXXXX" next to final (NAME: the first
 * 200 bytes of final's). */
static int tmp_name(struct ftransport *t, const char *final, char **out)
{
    const char *slash = strrchr(final, '/');
    size_t dl = slash ? (size_t)(slash - final) : 0;
    const char *base = slash ? slash + 1 : final;
    uint64_t rnd;
    size_t n;
    char *p;

    if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != (ssize_t)sizeof(rnd)) {
        pthread_mutex_lock(&t->fmu);
        rnd = rio__rand(&t->rng);
        pthread_mutex_unlock(&t->fmu);
    }
    /* At most 200 bytes of the name: a key's last component may be as
     * long as NAME_MAX, and an object must be replaceable all the same. */
    n = dl + 240;
    p = rio__malloc(n);
    if (!p)
        return -ENOMEM;
    snprintf(p, n, "%.*s/.%.200s.railio-tmp-%016llx", (int)dl, final, base,
             (unsigned long long)rnd);
    *out = p;
    return 0;
}

/* The directory part of path ("/" for "/name") into dir. */
static int dir_of(const char *path, char dir[PATH_MAX])
{
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;

    if (dl == 0)
        dl = 1;
    if (dl >= PATH_MAX)
        return -ENAMETOOLONG;
    memcpy(dir, path, dl);
    dir[dl] = '\0';
    return 0;
}

/* An unnamed file (O_TMPFILE) in up->dirfd, the directory of up->final,
 * into up->fd; up->fd stays -1 where the file system has no O_TMPFILE (and
 * no upload tries it again). */
static int open_anon(struct ftransport *t, struct fupload *up)
{
    int fd = openat(up->dirfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0666);

    for (unsigned i = 0; fd < 0 && rio__file_cache_shed(t, -errno, i); i++)
        fd = openat(up->dirfd, ".", O_WRONLY | O_TMPFILE | O_CLOEXEC, 0666);
    if (fd < 0) {
        /* EISDIR: a kernel without O_TMPFILE; EOPNOTSUPP: a file system */
        if (errno == EOPNOTSUPP || errno == EISDIR || errno == EINVAL) {
            atomic_store(&t->tmpfile, false);
            return 0;
        }
        return -errno;
    }
    up->fd = fd;
    up->anon = true;
    return 0;
}

/*
 * Replacing or removing a name: every writer and delete that replaces or
 * removes an object holds a lock on the object's own file while it does
 * (flock, exclusive), taken on the file the name points at and checked to
 * be still there once held. So a PUT or a delete on a generation decides
 * against the very file it replaces or removes: nothing can replace it
 * between the check and the rename or unlink, whichever process does.
 * Readers take no lock (a READ checks its generation). 0 with *lk the
 * locked file, -ENOENT when the name holds nothing, or -errno.
 */
#define LOCK_WAIT_NS (30ull * 1000000000ull) /* then -EBUSY: a lock railio did not take */

/* flock(fd, LOCK_EX), waiting at most LOCK_WAIT_NS: railio holds one only
 * across a rename or an unlink, so a longer wait is someone else's lock
 * (flock(1) on an object's file), and the commit fails rather than hang. */
static int lock_wait(int fd, const char *name)
{
    uint64_t t0 = rio__now_ns();
    useconds_t nap = 50;

    while (flock(fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno != EWOULDBLOCK && errno != EINTR)
            return -errno;
        if (rio__now_ns() - t0 > LOCK_WAIT_NS) {
            rio__detail("file://: %s is locked (flock) by another process for over 30 s", name);
            return -EBUSY;
        }
        usleep(nap);
        nap = nap < 10000 ? nap * 2 : nap;
    }
    return 0;
}

static int name_lock(int dirfd, const char *name, int *lk)
{
    struct stat a, b;

    for (;;) {
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC), ret;
        if (fd < 0)
            return -errno;
        if ((ret = lock_wait(fd, name)) < 0 || (ret = fstat(fd, &a) < 0 ? -errno : 0) < 0) {
            close(fd);
            return ret;
        }
        int sr = fstatat(dirfd, name, &b, AT_SYMLINK_NOFOLLOW);
        if (sr == 0 && a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
            *lk = fd;
            return 0;
        }
        ret = sr < 0 ? errno : 0;
        close(fd);
        if (ret && ret != ENOENT)
            return -ret; /* the name could not be looked at */
        /* replaced or removed while we waited: the name again */
    }
}

/* The generation of the locked file lk: 0, or -errno. */
static int gen_of_fd(int lk, uint64_t *gen)
{
    struct stat st;
    uint64_t size;

    if (fstat(lk, &st) < 0 || rio__file_fd_size(lk, &st, &size) < 0)
        return -errno;
    *gen = rio__file_gen_of(&st, size);
    return 0;
}

/* The upload's name where there is none: a rename that does not replace,
 * or the unnamed file's link; -EEXIST where an object is. A file system
 * without RENAME_NOREPLACE: -EINVAL. */
static int place_new(struct ftransport *t, struct fupload *up)
{
    char pf[FD_PATH_LEN];
    int ret;

    if (!up->anon) {
        if (renameat2(up->dirfd, rio__file_at_name(up, up->tmp), up->dirfd,
                      rio__file_at_name(up, up->final), RENAME_NOREPLACE) < 0)
            return -errno;
        rio__free(up->tmp);
        up->tmp = NULL; /* published: nothing to unlink any more */
        return 0;
    }
    rio__file_fd_path(up->fd, pf);
    for (int tries = 0;; tries++) {
        if (linkat(AT_FDCWD, pf, up->dirfd, rio__file_at_name(up, up->final), AT_SYMLINK_FOLLOW) ==
            0)
            return 0;
        if (errno != ENOENT || tries >= 4)
            return -errno;
        /* An unnamed file keeps no entry in its directory: a delete of the
         * directory's last key removed it (rio__file_remove). Made again,
         * beneath the root, and linked there. */
        ret = rio__file_parent_beneath(t, up->final, true);
        if (ret < 0)
            return ret;
        close(up->dirfd);
        up->dirfd = ret;
    }
}

/* The upload's name over the object there, atomically: a rename (of the
 * unnamed file, first linked under a temporary name), made as an exchange
 * of names where a file is (rio__replace_at: no write-out first on ext4). */
static int place_over(struct ftransport *t, struct fupload *up)
{
    char pf[FD_PATH_LEN], *tmp;
    int ret = 0;

    if (!up->anon) {
        ret = rio__replace_at(up->dirfd, rio__file_at_name(up, up->tmp),
                              rio__file_at_name(up, up->final));
        if (ret < 0)
            return ret;
        rio__free(up->tmp);
        up->tmp = NULL;
        return 0;
    }
    rio__file_fd_path(up->fd, pf);
    ret = tmp_name(t, up->final, &tmp);
    if (ret < 0)
        return ret;
    if (linkat(AT_FDCWD, pf, up->dirfd, rio__file_at_name(up, tmp), AT_SYMLINK_FOLLOW) < 0) {
        ret = -errno;
    } else if ((ret = rio__replace_at(up->dirfd, rio__file_at_name(up, tmp),
                                      rio__file_at_name(up, up->final))) < 0) {
        unlinkat(up->dirfd, rio__file_at_name(up, tmp), 0);
    }
    rio__free(tmp);
    return ret;
}

/* Give the upload its name, DIR/KEY, atomically: where nothing is, by a
 * link or a rename that does not replace (so of two RIO_IF_ABSENT
 * publishes one wins: -EEXIST for the other); over an object, under that
 * object's lock (name_lock), and with up->if_gen only while it is that
 * generation (RIO_EGENERATION otherwise, also where nothing is). */
static int publish(struct ftransport *t, struct fupload *up)
{
    const char *name = rio__file_at_name(up, up->final);
    uint64_t gen = 0;
    int lk = -1, ret;

    if (!up->if_gen) {
        ret = place_new(t, up);
        if (ret != -EEXIST && ret != -EINVAL)
            return ret;
        if (up->if_absent)
            return ret;
    }
    for (;;) {
        ret = name_lock(up->dirfd, name, &lk);
        if (ret == -ENOENT) {
            if (up->if_gen)
                return RIO_EGENERATION;
            ret = place_new(t, up); /* the object went meanwhile */
            if (ret == -EINVAL)     /* no RENAME_NOREPLACE here */
                return place_over(t, up);
            if (ret != -EEXIST)
                return ret;
            continue;
        }
        if (ret < 0 && up->if_gen)
            return ret == -ELOOP ? RIO_EGENERATION : ret; /* a symbolic link is no object */
        if (ret == -EBUSY) /* another program's lock: not waited for longer */
            return ret;
        if (ret < 0) /* no file to lock (a symbolic link, replaced itself): as before */
            return place_over(t, up);
        if (up->if_gen && ((ret = gen_of_fd(lk, &gen)) < 0 || gen != up->if_gen))
            ret = ret < 0 ? ret : RIO_EGENERATION;
        else
            ret = place_over(t, up);
        close(lk); /* the lock goes with it */
        return ret;
    }
}

int rio__file_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                       uint64_t chunk_size, void **upload)
{
    struct ftransport *t = ft(tt);
    struct fupload *up;
    struct stat st;
    uint64_t t0 = rio__now_ns();
    int ret;

    if (!key || !upload || chunk_size == 0 || chunk_size > (uint64_t)INT64_MAX)
        return RIO_EINVAL;
    if (size > (uint64_t)INT64_MAX && size != RIO_SIZE_UNKNOWN)
        return -EFBIG;
    up = rio__calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    up->fd = up->dfd = -1;
    up->dirfd = AT_FDCWD;
    up->stream = size == RIO_SIZE_UNKNOWN;
    up->size = up->stream ? 0 : size;
    up->limit = up->stream ? (uint64_t)INT64_MAX : size;
    up->chunk_size = chunk_size;
    up->nchunks = up->size ? (up->size - 1) / chunk_size + 1 : 0;
    up->wbits = (up->nchunks + 64) & ~(uint64_t)63;
    up->refs = 1;
    ret = -ENOMEM;
    up->key = rio__strdup(key);
    up->written = rio__calloc(1, (size_t)(up->wbits / 8));
    if (!up->key || !up->written)
        goto err;
    ret = rio__file_key_path(t, key, &up->final);
    if (ret < 0)
        goto err;

    if (t->single && stat(up->final, &st) == 0 && S_ISBLK(st.st_mode)) {
        /* A block device has no temporary file to rename: written in place,
         * only when the URL says so. */
        uint64_t dev_size = 0;
        ret = RIO_ENOTSUP;
        if (!t->inplace)
            goto err;
        up->inplace = true;
        /* O_NONBLOCK: the path is looked at again, and a FIFO swapped in
         * since the stat hung this open until a reader came. */
        up->fd = open(up->final, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        if (up->fd < 0) {
            ret = -errno;
            goto err;
        }
        if (fstat(up->fd, &st) < 0) {
            ret = -errno;
            goto err;
        }
        ret = RIO_EINVAL;
        if (!S_ISBLK(st.st_mode))
            goto err; /* replaced since the stat */
        int fl = fcntl(up->fd, F_GETFL);
        if (fl < 0 || fcntl(up->fd, F_SETFL, fl & ~O_NONBLOCK) < 0 ||
            rio__file_fd_size(up->fd, &st, &dev_size) < 0) {
            ret = -errno;
            goto err;
        }
        ret = -ENOSPC;
        if (!up->stream && size > dev_size)
            goto err;
        up->limit = dev_size < up->limit ? dev_size : up->limit;
        ret = rio__file_open_direct(t, up->final, O_WRONLY, &st, &up->dfd);
        if (ret < 0)
            goto err;
        rio__file_dio_geometry(t, up->dfd >= 0 ? up->dfd : up->fd, &st, &up->unit, &up->mem);
        up->stage = rio__file_want_stage(t, &st);
        up->magic = UPLOAD_MAGIC;
        *upload = up;
        return 0;
    }

    /* A delete of the last key in a directory removes the directory
     * (rio__file_remove): one that happens between making the key's
     * directory and creating the file in it leaves ENOENT, and the
     * directory is made again (a few times, then the error stands). */
    for (int tries = 0;; tries++) {
        if (!t->single) {
            /* The key's directory, beneath the root, made if missing. */
            if (up->dirfd >= 0)
                close(up->dirfd);
            up->dirfd = AT_FDCWD;
            ret = rio__file_parent_beneath(t, up->final, true);
            for (unsigned i = 0; ret < 0 && rio__file_cache_shed(t, ret, i); i++)
                ret = rio__file_parent_beneath(t, up->final, true);
            if (ret < 0)
                goto err;
            up->dirfd = ret;
        }
        if (atomic_load(&t->tmpfile) && !t->single) {
            ret = open_anon(t, up);
            if (ret == -ENOENT && tries < 4)
                continue;
            if (ret < 0)
                goto err;
        }
        if (up->fd >= 0)
            goto created;
        if (!up->tmp) {
            ret = tmp_name(t, up->final, &up->tmp);
            if (ret < 0)
                goto err;
        }
#define TMP_FLAGS (O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC)
        up->fd = openat(up->dirfd, rio__file_at_name(up, up->tmp), TMP_FLAGS, 0666);
        for (unsigned i = 0; up->fd < 0 && rio__file_cache_shed(t, -errno, i); i++)
            up->fd = openat(up->dirfd, rio__file_at_name(up, up->tmp), TMP_FLAGS, 0666);
#undef TMP_FLAGS
        if (up->fd >= 0)
            break;
        ret = -errno;
        if (ret != -ENOENT || tries >= 4)
            goto err_tmp;
    }
created:
    if (up->nchunks > 1) {
        /* Reserve the space now: ENOSPC here, not halfway through (one
         * chunk's write is all or nothing anyway, and an object of one
         * chunk skips this call). A stream's size is unknown: its file
         * grows as its chunks land. */
        if (fallocate(up->fd, 0, 0, (off_t)size) < 0) {
            if (errno != EOPNOTSUPP && errno != ENOSYS) {
                ret = -errno;
                goto err;
            }
            if (ftruncate(up->fd, (off_t)size) < 0) {
                ret = -errno;
                goto err;
            }
        }
    }
    if (fstat(up->fd, &st) < 0) {
        ret = -errno;
        goto err;
    }
    char pf[FD_PATH_LEN];
    ret = rio__file_open_direct(t, t->single ? up->tmp : rio__file_fd_path(up->fd, pf), O_WRONLY,
                                &st, &up->dfd);
    if (ret < 0)
        goto err;
    rio__file_dio_geometry(t, up->dfd >= 0 ? up->dfd : up->fd, &st, &up->unit, &up->mem);
    up->stage = rio__file_want_stage(t, &st);
    up->magic = UPLOAD_MAGIC;
    *upload = up;
    meta_add(&t->meta.put_opens, &t->meta.put_open_ns, t0);
    return 0;
err_tmp:
    rio__free(up->tmp);
    up->tmp = NULL;
err:
    if (up->tmp)
        unlinkat(up->dirfd, rio__file_at_name(up, up->tmp), 0);
    upload_free(up);
    return ret;
}

static int fsync_parent(const char *path)
{
    char dir[PATH_MAX];
    int fd, ret = dir_of(path, dir);

    if (ret < 0)
        return ret;
    fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    if (fsync(fd) < 0)
        ret = -errno;
    close(fd);
    return ret;
}

int rio__file_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct ftransport *t = ft(tt);
    struct fupload *up = upload;
    struct stat st;
    uint64_t size = 0, t0 = rio__now_ns(), ts, sync_ns = 0;
    int ret;

    if (!up || up->magic != UPLOAD_MAGIC)
        return RIO_EINVAL;
    ret = RIO_EINVAL;
    if (!d || (up->nchunks && !d->xxh))
        goto out;
    ret = RIO_EPROTO;
    if (up->stream) {
        /* The total arrives now: it must be exactly the chunks that landed,
         * a shorter chunk only as the last one, with the length it had. */
        uint64_t cs = up->chunk_size, n = d->size ? (d->size - 1) / cs + 1 : 0;
        if (d->size > up->limit || d->chunk_size != cs || d->nchunks != n)
            goto out;
        up->size = d->size;
        up->nchunks = n;
    }
    if (d->size != up->size || d->chunk_size != up->chunk_size || d->nchunks != up->nchunks)
        goto out;
    pthread_mutex_lock(&t->fmu);
    /* Nothing may still be writing, and every chunk must have landed whole. */
    ret = up->refs == 1 ? 0 : RIO_EPROTO;
    for (uint64_t i = 0; ret == 0 && i < up->nchunks; i++)
        if (!(up->written[i / 8] & (1u << (i % 8))))
            ret = RIO_EPROTO;
    if (ret == 0 && up->stream) {
        uint64_t last = up->nchunks ? up->size - (up->nchunks - 1) * up->chunk_size : 0;
        for (uint64_t i = up->nchunks; ret == 0 && i < up->wbits; i++)
            if (up->written[i / 8] & (1u << (i % 8)))
                ret = RIO_EPROTO; /* a chunk past the end */
        if (up->bad_short ||
            (up->has_short && (up->short_idx + 1 != up->nchunks || up->short_len != last)))
            ret = RIO_EPROTO;
    }
    pthread_mutex_unlock(&t->fmu);
    if (ret < 0)
        goto out;
    /* A stream's file is as long as its chunks reached: that is the size
     * checked above, and an empty stream is an empty file. */
    if (up->stream && !up->inplace && ftruncate(up->fd, (off_t)up->size) < 0) {
        ret = -errno;
        goto out;
    }

    if (!up->inplace) {
        if (fstat(up->fd, &st) < 0) {
            ret = -errno;
            goto out;
        }
        ret = xrec_store(up->fd, d, ts_ns(&st.st_mtim));
        if (ret < 0)
            goto out;
    }
    /* Data, size and the record are durable before the name points at them. */
    ts = rio__now_ns();
    if (t->sync && fsync(up->fd) < 0) {
        ret = -errno;
        goto out;
    }
    sync_ns += rio__now_ns() - ts;
    if (!up->inplace) {
        ret = publish(t, up);
        if (ret == -EEXIST && up->if_absent)
            ret = RIO_EGENERATION; /* the key holds an object: not replaced */
        if (ret < 0)
            goto out;
        if (t->sync) {
            ts = rio__now_ns();
            ret = up->dirfd == AT_FDCWD ? fsync_parent(up->final)
                                        : (fsync(up->dirfd) < 0 ? -errno : 0);
            if (ret < 0)
                goto out_published;
            sync_ns += rio__now_ns() - ts;
        }
    }
    if (fstat(up->fd, &st) < 0 || rio__file_fd_size(up->fd, &st, &size) < 0) {
        ret = -errno;
        goto out_published;
    }
    d->generation = rio__file_gen_of(&st, size);
    ret = 0;
    __atomic_fetch_add(&t->meta.commit_sync_ns, sync_ns, __ATOMIC_RELAXED);
    meta_add(&t->meta.commits, &t->meta.commit_ns, t0);
out_published:
    rio__file_cache_forget(t, rio__file_cache_key(t, up->key));
out:
    if (up->tmp)
        unlinkat(up->dirfd, rio__file_at_name(up, up->tmp), 0);
    rio__file_upload_unref(t, up);
    return ret;
}

/* RIO_IF_ABSENT: the name is given by a link or a rename that does not
 * replace. A generation: the rename is made under the lock of the file it
 * replaces, once that is seen to be the generation (publish). A block
 * device written in place has no rename to make it on: RIO_ENOTSUP. */
int rio__file_put_expect(struct rio_transport *tt, void *upload, uint64_t gen)
{
    struct fupload *up = upload;
    (void)tt;
    if (!up || up->magic != UPLOAD_MAGIC || !gen)
        return RIO_EINVAL;
    if (up->inplace) {
        rio__detail("file://: a block device written in place cannot publish on a condition");
        return RIO_ENOTSUP;
    }
    if (gen == RIO__PUT_IF_ABSENT)
        up->if_absent = true;
    else
        up->if_gen = gen;
    return 0;
}

void rio__file_put_abort(struct rio_transport *tt, void *upload)
{
    struct fupload *up = upload;

    if (!up || up->magic != UPLOAD_MAGIC)
        return;
    if (up->tmp) {
        unlinkat(up->dirfd, rio__file_at_name(up, up->tmp), 0);
        rio__free(up->tmp);
        up->tmp = NULL;
    }
    rio__file_upload_unref(ft(tt), up);
}

/*
 * After the delete of path: its directories that the delete left empty go,
 * deepest first, up to the root (not included), so that a key named like
 * one of them can be written again ("c" after "c/d" went) and listings
 * walk no empty directories. rmdir removes only an empty directory: one
 * that holds anything (another key, a PUT's named temporary file) stays,
 * and so do those above it. A PUT that made the directory and had not yet
 * created its file in it finds ENOENT and makes it again (put_open,
 * publish). Best effort: an error leaves the directory, as before.
 */
static void prune_dirs(struct ftransport *t, const char *path)
{
    const char *rel = rio__file_rel_of(t, path);
    char dir[PATH_MAX];
    size_t n = strlen(rel);

    if (n >= sizeof(dir))
        return;
    memcpy(dir, rel, n + 1);
    for (char *slash = strrchr(dir, '/'); slash; slash = strrchr(dir, '/')) {
        *slash = '\0'; /* dir: the directory that held the last one removed */
        char *up = strrchr(dir, '/');
        int pfd = t->rootfd, r;
        if (up) {
            *up = '\0';
            pfd = rio__file_open_beneath(t, t->rootfd, dir, O_PATH | O_DIRECTORY, 0);
            *up = '/';
            if (pfd < 0)
                return;
        }
        r = unlinkat(pfd, up ? up + 1 : dir, AT_REMOVEDIR);
        if (pfd != t->rootfd)
            close(pfd);
        if (r < 0)
            return;
    }
}

/* Remove key, only while it is generation gen when gen is not 0: under the
 * file's lock (name_lock), as a publish replaces it. */
static int remove_gen(struct ftransport *t, const char *key, uint64_t gen)
{
    struct stat st;
    char *path;
    int ret, lk = -1;

    ret = rio__file_key_path(t, key, &path);
    if (ret < 0)
        return ret;
    /* Directory mode: the key's directory beneath the root, the name in it. */
    int dfd = t->single ? AT_FDCWD : rio__file_parent_beneath(t, path, false);
    const char *name = path;
    if (!t->single) {
        const char *slash = strrchr(path, '/');
        name = slash ? slash + 1 : path;
    }
    if (dfd < 0 && dfd != AT_FDCWD)
        ret = rio__file_open_err(-dfd);
    else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        ret = rio__file_open_err(errno);
    else if (S_ISDIR(st.st_mode))
        ret = -EISDIR;
    else if (S_ISBLK(st.st_mode))
        ret = RIO_ENOTSUP;
    else if ((ret = name_lock(dfd, name, &lk)) < 0 && (gen || ret == -ENOENT || ret == -EBUSY))
        ret = rio__file_open_err(-ret); /* a name that cannot be opened: removed unlocked */
    else {
        uint64_t g = 0;
        if (gen && (ret = gen_of_fd(lk, &g)) == 0 && g != gen)
            ret = RIO_EGENERATION;
        else if (ret >= 0 || !gen)
            ret = unlinkat(dfd, name, 0) < 0 ? rio__file_open_err(errno) : 0;
    }
    if (lk >= 0)
        close(lk);
    if (dfd >= 0)
        close(dfd);
    if (ret == 0 && !t->single)
        prune_dirs(t, path);
    rio__free(path);
    if (ret == 0)
        rio__file_cache_forget(t, rio__file_cache_key(t, key));
    return ret;
}

int rio__file_remove(struct rio_transport *tt, const char *key)
{
    return remove_gen(ft(tt), key, 0);
}

int rio__file_remove_if(struct rio_transport *tt, const char *key, uint64_t gen)
{
    return gen ? remove_gen(ft(tt), key, gen) : RIO_EINVAL;
}
