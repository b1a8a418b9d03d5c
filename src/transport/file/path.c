/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Keys to paths beneath the root: the checks on a key, resolution beneath
 * the root (openat2 RESOLVE_BENEATH, or a component walk where the kernel has
 * none), generations, and the O_DIRECT geometry of an open file.
 */
#include "transport/file/internal.h"

/* ------------------------------------------------------------- paths, keys */

static bool ends_with(const char *s, size_t l, const char *suf)
{
    size_t n = strlen(suf);
    return l >= n && memcmp(s + l - n, suf, n) == 0;
}

/* Whether name (l bytes) is one of railio's temporary files: an upload's
 * or a download's ".NAME.railio-tmp-<16 hex digits>", a resumable
 * download's "FILE.railio-tmp" and its record "FILE.railio-tmp.resume"
 * (".new" while it is replaced), earlier versions' "FILE.railio-tmp.PID". */
bool rio__file_tmp_name(const char *name, size_t l)
{
    static const char tag[] = ".railio-tmp-";
    const size_t tl = sizeof(tag) - 1;

    if (ends_with(name, l, ".railio-tmp") || ends_with(name, l, ".railio-tmp.resume") ||
        ends_with(name, l, ".railio-tmp.resume.new"))
        return true;
    size_t d = l; /* earlier CLIs' partial downloads: "FILE.railio-tmp.PID" */
    while (d > 0 && name[d - 1] >= '0' && name[d - 1] <= '9')
        d--;
    if (d < l && ends_with(name, d, ".railio-tmp."))
        return true;
    if (l < 1 + tl + 16 || name[0] != '.' || memcmp(name + l - 16 - tl, tag, tl) != 0)
        return false;
    for (size_t i = l - 16; i < l; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f')))
            return false;
    return true;
}

/* Directory mode: 1..RIO_KEY_MAX bytes, relative, no "", "." or ".."
 * component, and none that is a temporary file's name (listings skip
 * them: an object under one could never be listed). */
static int key_check(const char *key)
{
    size_t n;
    const char *p;

    if (rio__key_len(key, &n) < 0 || key[0] == '/')
        return RIO_EINVAL;
    for (p = key;;) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 0 || (l == 1 && p[0] == '.') || (l == 2 && p[0] == '.' && p[1] == '.'))
            return RIO_EINVAL;
        if (l > NAME_MAX)
            return -ENAMETOOLONG;
        if (rio__file_tmp_name(p, l)) {
            rio__detail(
                "file://: a key may not have a component named as railio's temporary "
                "files (\".railio-tmp\", \".railio-tmp.resume\" or \".railio-tmp.\" and digits "
                "at its end, or "
                "\".NAME.railio-tmp-\" and 16 hex digits): such files are never listed");
            return RIO_EINVAL;
        }
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* The file that holds key (rio__malloc'd). */
int rio__file_key_path(struct ftransport *t, const char *key, char **out)
{
    size_t rl, kl;
    char *p;
    int ret;

    if (t->single) {
        if (!key || !*key)
            return RIO_EINVAL;
        p = rio__strdup(t->root);
        if (!p)
            return -ENOMEM;
        *out = p;
        return 0;
    }
    ret = key_check(key);
    if (ret < 0)
        return ret;
    rl = strlen(t->root);
    kl = strlen(key);
    if (rl + 1 + kl >= PATH_MAX)
        return -ENAMETOOLONG;
    p = rio__malloc(rl + kl + 2);
    if (!p)
        return -ENOMEM;
    memcpy(p, t->root, rl);
    p[rl] = '/';
    memcpy(p + rl + 1, key, kl + 1);
    *out = p;
    return 0;
}

/* The key the cache files an object under ("" for the single object). */
const char *rio__file_cache_key(struct ftransport *t, const char *key)
{
    return t->single ? "" : key;
}

int rio__file_open_err(int e)
{
    return e == ENOENT || e == ENOTDIR ? RIO_ENOTFOUND : -e;
}

/* "/proc/self/fd/N": the file fd has open, by a path (a reopen, a link). */
const char *rio__file_fd_path(int fd, char buf[FD_PATH_LEN])
{
    snprintf(buf, FD_PATH_LEN, "/proc/self/fd/%d", fd);
    return buf;
}

/* ------------------------------------------------- resolution beneath root */

/*
 * In directory mode every path is resolved beneath the root: a symlink (a
 * directory component or the key's file) that leads out of it, or a magic
 * link (/proc/PID/fd/N), fails the call with -EXDEV instead of reading or
 * writing outside. openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS) does it;
 * where the kernel has no openat2 the path is walked one component at a
 * time with O_NOFOLLOW (no symlink is followed at all then).
 */

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

/* The path of path below the root ("a/b" for ROOT/a/b). */
const char *rio__file_rel_of(const struct ftransport *t, const char *path)
{
    size_t rl = strlen(t->root);
    const char *r = path + rl;

    while (*r == '/')
        r++;
    return *r ? r : ".";
}

/* -errno for a failed openat(dirfd, name, ...O_NOFOLLOW), -EXDEV where name
 * is a symlink (O_NOFOLLOW says ELOOP, or ENOTDIR with O_DIRECTORY). */
static int walk_err(int dirfd, const char *name, int e)
{
    struct stat st;

    if (e == ELOOP || e == EXDEV)
        return -EXDEV;
    if (e == ENOTDIR && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode))
        return -EXDEV;
    return -e;
}

/* Component by component, O_NOFOLLOW, from dirfd: an fd or -errno. */
static int walk_open(int dirfd, const char *rel, int flags, mode_t mode)
{
    char comp[NAME_MAX + 1];
    int cur = dirfd, fd;

    for (const char *p = rel;;) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l > NAME_MAX || (l == 2 && p[0] == '.' && p[1] == '.')) {
            fd = l > NAME_MAX ? -ENAMETOOLONG : -EXDEV;
            break;
        }
        memcpy(comp, p, l);
        comp[l] = '\0';
        if (!e) {
            fd = openat(cur, comp, flags | O_NOFOLLOW | O_CLOEXEC, mode);
            fd = fd < 0 ? walk_err(cur, comp, errno) : fd;
            break;
        }
        fd = openat(cur, comp, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            fd = walk_err(cur, comp, errno);
            break;
        }
        if (cur != dirfd)
            close(cur);
        cur = fd;
        p = e + 1;
        while (*p == '/')
            p++;
    }
    if (cur != dirfd)
        close(cur);
    return fd;
}

/* open(rel) beneath dirfd (the root or a directory below it): an fd or
 * -errno, -EXDEV for a path that leaves it. */
int rio__file_open_beneath(struct ftransport *t, int dirfd, const char *rel, int flags, mode_t mode)
{
    if (!atomic_load(&t->no_openat2)) {
        struct open_how how = {
            .flags = (uint64_t)(flags | O_CLOEXEC),
            .mode = (flags & (O_CREAT | O_TMPFILE)) ? mode : 0,
            .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
        };
        long fd = syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
        if (fd >= 0)
            return (int)fd;
        if (errno != ENOSYS && errno != EPERM) /* EPERM: a seccomp filter */
            return errno == EXDEV || errno == ELOOP ? -EXDEV : -errno;
        atomic_store(&t->no_openat2, true);
    }
    return walk_open(dirfd, rel, flags, mode);
}

/* sync=1: a directory just made in dir (the level above it: dir cut at
 * last, or the root when last is NULL) is only durable once that level is
 * fsynced (POSIX; ext4 and xfs happen to order it, others need not): an
 * acknowledged PUT under a new a/b/ must survive a power cut. */
static int sync_level(struct ftransport *t, char *dir, char *last)
{
    if (last)
        *last = '\0';
    int fd = rio__file_open_beneath(t, t->rootfd, last ? dir : ".", O_RDONLY | O_DIRECTORY, 0);
    if (last)
        *last = '/';
    if (fd < 0)
        return fd;
    int ret = fsync(fd) < 0 ? -errno : 0;
    close(fd);
    return ret;
}

/* The directory that holds path's last component, beneath the root, made
 * (mkdir -p, each level beneath the root) when mkdirs and missing: an
 * O_RDONLY directory fd or -errno. With sync=1 each level made is
 * fsynced into the one above. */
int rio__file_parent_beneath(struct ftransport *t, const char *path, bool mkdirs)
{
    const char *rel = rio__file_rel_of(t, path), *slash = strrchr(rel, '/');
    char dir[PATH_MAX];
    int fd;

    if (!slash)
        return rio__file_open_beneath(t, t->rootfd, ".", O_RDONLY | O_DIRECTORY, 0);
    if ((size_t)(slash - rel) >= sizeof(dir))
        return -ENAMETOOLONG;
    memcpy(dir, rel, (size_t)(slash - rel));
    dir[slash - rel] = '\0';
    fd = rio__file_open_beneath(t, t->rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
    if (fd != -ENOENT || !mkdirs)
        return fd;
    /* One level at a time: mkdirat in the level above, itself opened
     * beneath the root (a mkdir per component only when one is missing,
     * not per PUT). */
    for (size_t i = 0, n = strlen(dir); i <= n; i++) {
        if (dir[i] != '/' && dir[i] != '\0')
            continue;
        char c = dir[i];
        dir[i] = '\0';
        char *last = strrchr(dir, '/');
        int pfd = t->rootfd, ret = 0;
        if (last) {
            *last = '\0';
            pfd = rio__file_open_beneath(t, t->rootfd, dir, O_PATH | O_DIRECTORY, 0);
            *last = '/';
        }
        if (pfd < 0)
            ret = pfd;
        else if (mkdirat(pfd, last ? last + 1 : dir, 0777) == 0)
            ret = t->sync ? sync_level(t, dir, last) : 0;
        else if (errno != EEXIST)
            ret = -errno;
        if (pfd >= 0 && pfd != t->rootfd)
            close(pfd);
        dir[i] = c;
        if (ret < 0)
            return ret;
    }
    return rio__file_open_beneath(t, t->rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* The name an upload's *at() calls use for path: its last component
 * relative to up->dirfd, or path itself in single mode. */
const char *rio__file_at_name(const struct fupload *up, const char *path)
{
    const char *slash = strrchr(path, '/');

    return up->dirfd == AT_FDCWD || !slash ? path : slash + 1;
}

/* ------------------------------------------------------------ generations */

uint64_t rio__file_gen_of(const struct stat *st, uint64_t size)
{
    uint64_t v[5];
    uint64_t h;

    v[0] = (uint64_t)st->st_dev;
    v[1] = S_ISBLK(st->st_mode) ? (uint64_t)st->st_rdev : (uint64_t)st->st_ino;
    v[2] = size;
    /* A block device's timestamps say nothing about its contents. */
    v[3] = S_ISBLK(st->st_mode) ? 0 : ts_ns(&st->st_mtim);
    v[4] = S_ISBLK(st->st_mode) ? 0 : ts_ns(&st->st_ctim);
    h = rio__xxh3(v, sizeof(v));
    return h ? h : 1;
}

/* Size of what fd holds: a regular file's length or a block device's. */
int rio__file_fd_size(int fd, const struct stat *st, uint64_t *out)
{
    if (S_ISBLK(st->st_mode)) {
        uint64_t n;
        if (ioctl(fd, BLKGETSIZE64, &n) < 0)
            return -errno;
        *out = n;
        return 0;
    }
    *out = (uint64_t)st->st_size;
    return 0;
}

/* Direct I/O geometry of fd: memory alignment and the step unit
 * (max(page, offset alignment)). Unknown alignment: 4096 for both. */
void rio__file_dio_geometry(struct ftransport *t, int fd, const struct stat *st, uint32_t *unit,
                            uint32_t *mem)
{
    uint32_t off_al = 0, mem_al = 0;
    struct statx sx;

#ifdef STATX_DIOALIGN
    if (statx(fd, "", AT_EMPTY_PATH, STATX_DIOALIGN, &sx) == 0 && (sx.stx_mask & STATX_DIOALIGN) &&
        sx.stx_dio_offset_align) {
        off_al = sx.stx_dio_offset_align;
        mem_al = sx.stx_dio_mem_align;
    }
#else
    (void)sx;
#endif
    if (!off_al && S_ISBLK(st->st_mode)) {
        int lbs = 0;
        if (ioctl(fd, BLKSSZGET, &lbs) == 0 && lbs > 0)
            off_al = mem_al = (uint32_t)lbs;
    }
    if (!off_al)
        off_al = mem_al = 4096;
    if (mem_al < 1)
        mem_al = 1;
    *unit = off_al > t->page ? off_al : t->page;
    *mem = mem_al;
}

/*
 * Whether direct steps into aligned caller memory go through the bounce
 * buffers. auto: when a device is behind the file (a block device, or a file
 * system on one: st_dev's major is not 0). There one contiguous registered
 * buffer instead of a page list of the caller's memory cuts the kernel's and
 * the hypervisor's work per I/O (docs/bench.md has the figures); on tmpfs and other memory file
 * systems a direct step is a copy already, and staging adds a second one.
 */
bool rio__file_want_stage(const struct ftransport *t, const struct stat *st)
{
    if (t->stage != STAGE_AUTO)
        return t->stage == STAGE_ON;
    return S_ISBLK(st->st_mode) || major(st->st_dev) != 0;
}

/* A second, O_DIRECT descriptor of the file fd has open at path, or -1.
 * Returns 0, or an error when direct=1 and the file refuses O_DIRECT. */
int rio__file_open_direct(struct ftransport *t, const char *path, int flags, const struct stat *st,
                          int *out)
{
    struct stat st2;
    int fd;

    *out = -1;
    if (t->direct == DIRECT_OFF)
        return 0;
    /* In single mode path is the user's, not /proc/self/fd/N, and may name
     * something else by now: O_NONBLOCK, since a FIFO swapped in between
     * the two opens hung this open until a writer came. Cleared once the
     * descriptor is seen to be the same file (io_uring honours it). */
    int nb = t->single ? O_NONBLOCK : 0;
    fd = open(path, flags | nb | O_DIRECT | O_CLOEXEC);
    if (fd < 0) {
        if (t->direct == DIRECT_ON)
            return -errno;
        return 0; /* auto: this file system or file has no O_DIRECT */
    }
    /* The same file as the buffered descriptor, or none (it was replaced
     * between the two opens: the generation check catches the rest). */
    if (fstat(fd, &st2) < 0 || st2.st_dev != st->st_dev || st2.st_ino != st->st_ino) {
        close(fd);
        return 0;
    }
    if (nb) {
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            int e = errno;
            close(fd);
            return -e;
        }
    }
    *out = fd;
    return 0;
}
