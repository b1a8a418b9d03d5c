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
 * the CLI's partial downloads: names with ".railio-tmp") are not objects
 * and are not listed.
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

/* One directory entry: its name as it sorts (a directory's ends in '/'). */
struct dent {
    char *name;
    bool dir;
};

static int dent_cmp(const void *a, const void *b)
{
    return strcmp(((const struct dent *)a)->name, ((const struct dent *)b)->name);
}

static bool skip_name(const char *name)
{
    return (name[0] == '.' && (!name[1] || (name[1] == '.' && !name[2]))) ||
           strstr(name, ".railio-tmp") != NULL;
}

static void dents_free(struct dent *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        rio__free(v[i].name);
    rio__free(v);
}

/* The entries of the directory dirfd (taken: closed by closedir) worth a
 * look: regular files and directories, not symbolic links. */
static int dents_read(int dirfd, struct dent **out, size_t *nout)
{
    struct dent *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    int fd = dup(dirfd);
    DIR *d;

    if (fd < 0)
        return -errno;
    d = fdopendir(fd);
    if (!d) {
        close(fd);
        return -errno;
    }
    errno = 0;
    while ((de = readdir(d))) {
        bool dir;
        if (skip_name(de->d_name))
            continue;
        if (de->d_type == DT_DIR || de->d_type == DT_REG) {
            dir = de->d_type == DT_DIR;
        } else if (de->d_type == DT_UNKNOWN) {
            struct stat st;
            if (fstatat(dirfd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                continue; /* gone meanwhile */
            if (!S_ISDIR(st.st_mode) && !S_ISREG(st.st_mode))
                continue;
            dir = S_ISDIR(st.st_mode);
        } else {
            continue; /* links, devices, sockets, fifos */
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 64;
            struct dent *nv = rio__realloc(v, nc * sizeof(*v));
            if (!nv)
                goto err_nomem;
            v = nv;
            cap = nc;
        }
        size_t l = strlen(de->d_name);
        v[n].name = rio__malloc(l + 2);
        if (!v[n].name)
            goto err_nomem;
        memcpy(v[n].name, de->d_name, l);
        v[n].name[l] = dir ? '/' : '\0';
        v[n].name[l + 1] = '\0';
        v[n].dir = dir;
        n++;
        errno = 0;
    }
    if (errno) {
        int e = errno;
        closedir(d);
        dents_free(v, n);
        return -e;
    }
    closedir(d);
    if (n > 1) /* v is NULL in an empty directory: qsort's pointer must not be */
        qsort(v, n, sizeof(*v), dent_cmp);
    *out = v;
    *nout = n;
    return 0;
err_nomem:
    closedir(d);
    dents_free(v, n);
    return -ENOMEM;
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

/* Add file name (its key is w->key, klen bytes) to the page, or note that
 * the page is full. */
static int walk_file(struct walk *w, int dirfd, const char *name, size_t klen)
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
        return errno == ENOENT || errno == ELOOP ? 0 : -errno; /* gone, or now a link */
    int ret = 0;
    /* One we may not read is listed all the same, without its etag. */
    if (fd < 0 ? fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 : fstat(fd, &st) < 0) {
        ret = errno == ENOENT ? 0 : -errno;
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
static int walk_dir(struct walk *w, int dirfd, size_t base)
{
    struct dent *v = NULL;
    size_t n = 0;
    int ret = dents_read(dirfd, &v, &n);

    if (ret < 0)
        return ret;
    for (size_t i = 0; i < n && !w->more; i++) {
        size_t l = strlen(v[i].name); /* with the '/' of a directory */
        /* A directory's keys are at least one byte longer than its name. */
        if (base + l + (v[i].dir ? 1 : 0) > RIO_KEY_MAX)
            continue;
        memcpy(w->key + base, v[i].name, l + 1);
        if (!v[i].dir) {
            ret = walk_file(w, dirfd, v[i].name, base + l);
        } else if (dir_wanted(w, w->key, base + l)) {
            v[i].name[l - 1] = '\0';
            int fd = openat(dirfd, v[i].name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) {
                /* Gone, or replaced by a link, meanwhile: nothing of it. */
                ret = errno == ENOENT || errno == ENOTDIR || errno == ELOOP ? 0 : -errno;
            } else {
                ret = walk_dir(w, fd, base + l);
                close(fd);
            }
        }
        if (ret < 0)
            break;
    }
    dents_free(v, n);
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
    ret = walk_dir(w, fd, 0);
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
