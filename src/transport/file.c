/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file:///DIR and file:///PATH?single=1: objects as files, moved with io_uring.
 *
 * Objects. In directory mode the object under KEY is the file DIR/KEY (keys
 * may name subdirectories; "..", "." and empty components and a leading '/'
 * are refused; every path is resolved beneath DIR, see "resolution beneath
 * root" below). With ?single=1 the URL names one file or block device and
 * every key means that one object. docs/file.md is the user's page.
 *
 * Queues. Each path is one io_uring ring ("queue") with `depth` op slots; one
 * eventfd is registered with every ring, so the engine thread's reap waits on
 * all of them at once with one poll(), next to a second eventfd that wake()
 * writes. An op is one chunk; it moves in steps (one SQE in flight at a time):
 * a step is O_DIRECT when the file allows it and the step's offset, length and
 * memory are aligned, buffered otherwise. A short step is never success: the
 * op continues from where it stopped, and a step that moves 0 bytes (EOF) ends
 * the op with RIO_ESHORT. Every other error ends the op with its errno.
 *
 * O_DIRECT and buffered writes never share a page: a direct step covers whole
 * units (max(page size, the file's direct offset alignment)), starting on a
 * unit boundary, and every buffered step covers bytes outside every direct
 * step. So a buffered tail can never dirty a page that a direct write
 * invalidates. Memory that is not aligned for O_DIRECT goes through a pool
 * of bounce buffers the transport owns (huge pages, registered with the ring
 * when the kernel allows), and on a disk-backed file system aligned memory is
 * staged there too (stage=auto): one contiguous registered segment per I/O
 * instead of a page list. The caller's memory is never registered, so a freed
 * and reallocated caller buffer can never receive another call's bytes.
 *
 * Streaming PUT (RIO_CAP_STREAM_PUT): put_open may get RIO_SIZE_UNKNOWN; the
 * chunks then land in any order, put_commit checks them against the size it
 * is given and ftruncates the file to it.
 *
 * Reads. lookup opens the file, and the open file (buffered and O_DIRECT
 * descriptors) is kept in a small cache keyed by (key, generation), which the
 * READ ops of the GET then use; the generation is a hash of (dev, inode, size,
 * mtime, ctime), so a file replaced or modified since the lookup is refused
 * with RIO_EGENERATION at open, and every READ op fstat()s the file again when
 * it ends: a file modified while it is being read ends the op with
 * RIO_EGENERATION instead of handing back a mix.
 *
 * Writes. put_open creates an unnamed file in KEY's directory (O_TMPFILE,
 * preallocated), WRITE ops land at their offsets, put_commit stores the chunk
 * checksums in the xattr user.railio.xxh (when the file system takes it),
 * fsyncs (sync=1), links the file as DIR/KEY (over an existing one: links it
 * under a temporary name and renames that over DIR/KEY) and fsyncs the
 * directory; put_abort only closes it, and a crash leaves no file behind.
 * Where O_TMPFILE or /proc is missing (or with tmpfile=0) the upload is a
 * named DIR/.KEY.railio-tmp-<random> (O_EXCL), renamed at commit and
 * unlinked by put_abort. An unnamed file also keeps the create out of the
 * directory's lock, which a batch of small PUTs otherwise queues on.
 *
 * Locks. ring->mu guards a ring's SQ, its op slots and its bounce pool (the
 * engine submits under its own mutex, but cancel may come from any thread and
 * reap resubmits continuations). t->fmu guards the file cache and the uploads'
 * counters. They are never nested, and complete() is called with neither held.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <liburing.h>
#include <limits.h>
#include <linux/fs.h>
#include <linux/openat2.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/key.h"
#include "core/url.h"
#include "railio.h"
#include "transport/fault.h"
#include "transport/file.h"
#include "transport/transport.h"

extern const struct rio_transport_ops rio__file_ops;

#define NS_PER_MS 1000000ull
#define NEVER UINT64_MAX

#define FILE_MAX_DEPTH 1024u           /* the engine's own cap on depth */
#define FILE_STEP_MAX (1u << 30)       /* one SQE moves at most 1 GiB (len is 32 bits) */
#define FILE_CACHE_MAX 128u            /* open files kept for reads (2 fds each), at most */
#define FILE_BOUNCE_DEFAULT (1u << 20) /* bounce buffer size, at least */
#define FILE_BOUNCE_MAX (64u << 20)
#define FILE_BOUNCE_SLOTS 64u            /* bounce buffers per ring, at most */
#define FILE_BOUNCE_TOTAL (256ull << 20) /* bounce memory of all rings, at most */
#define FILE_EAGAIN_MAX 64u              /* resubmits of a step the kernel answered -EAGAIN */
#define FILE_CLOSE_WAIT_MS 10000u

/* user_data: the op's slot in the top 16 bits, a per-ring sequence below, so a
 * late cancel can never match the next op of the same slot. */
#define UD_SLOT_SHIFT 48
#define UD_SEQ_MASK ((1ull << UD_SLOT_SHIFT) - 1)
#define UD_CANCEL_SLOT 0xFFFFull

#define XATTR_NAME "user.railio.xxh"
#define XREC_MAGIC "railio1"
#define XREC_HDR (8 + 4 * 8 + 48)
#define UPLOAD_MAGIC 0x66696c6575706c64ull

enum { DIRECT_OFF = 0, DIRECT_ON = 1, DIRECT_AUTO = 2 };
enum { STAGE_OFF = 0, STAGE_ON = 1, STAGE_AUTO = 2 };
enum { OP_FREE = 0, OP_RUN, OP_FINISH };

/* An open object for READs: a cache entry under t->fmu. */
struct ffile {
    struct ffile *prev, *next; /* LRU list, most recent first */
    unsigned refs;             /* READ ops using it */
    bool dead;                 /* out of the cache; closed at the last release */
    int fd, dfd;               /* buffered, O_DIRECT (-1: none) */
    uint32_t unit, mem;        /* direct step granularity and memory alignment */
    bool stage;                /* aligned memory is staged too (see want_stage) */
    uint64_t size, gen, khash;
    char key[];
};

struct fupload {
    uint64_t magic;
    unsigned refs; /* under t->fmu: the caller's handle + WRITE ops in flight */
    int fd, dfd;
    uint32_t unit, mem;
    bool stage;
    bool inplace; /* a block device written in place: no temporary file */
    bool stream;  /* size unknown until commit (RIO_SIZE_UNKNOWN at put_open) */
    bool anon;    /* an O_TMPFILE: no name until the commit links it */
    uint64_t size, chunk_size, nchunks;
    uint64_t limit; /* a write may not end past this offset */
    /* under t->fmu */
    uint8_t *written;              /* bitmap of chunks written whole */
    uint64_t wbits;                /* bits the bitmap holds */
    uint64_t short_idx, short_len; /* stream: the one chunk shorter than chunk_size */
    bool has_short, bad_short;     /* stream: one seen; two different ones seen */
    char *tmp, *final, *key;
    int dirfd; /* final's directory, beneath the root (AT_FDCWD: single mode) */
};

struct fring;

struct fop {
    struct rio_io *io;
    struct fring *ring;
    struct ffile *f;    /* READ */
    struct fupload *up; /* WRITE */
    struct fop *next;   /* free list or finish list */
    uint64_t ud;        /* user_data of the step in flight */
    uint64_t done;      /* bytes moved by finished steps */
    uint64_t t0;        /* submit time */
    int64_t res;        /* the op's result once it ends */
    uint32_t cur_len;   /* the step in flight */
    int bounce;         /* bounce slot of the step in flight, -1 none */
    unsigned eagain;
    uint16_t slot;
    uint8_t state;
    bool cancel_req;
    bool cur_direct;
    bool no_direct; /* a direct step failed with EINVAL: buffered from now on */
};

struct fring {
    struct io_uring ring;
    pthread_mutex_t mu;
    bool ring_ok, mu_ok;
    /* under mu */
    struct fop *ops; /* depth slots */
    struct fop *free_ops;
    unsigned inflight;
    unsigned cancels; /* cancel SQEs whose CQE is not reaped yet */
    unsigned unsubmitted;
    uint64_t seq;
    uint8_t *bounce;
    unsigned nbounce;
    uint64_t bounce_free; /* bit i: slot i free */
    bool bounce_reg, bounce_tried;
    struct rio_file_counters ctr; /* inflight unused here: see r->inflight */
};

/* Metadata timings: atomics, added by whichever thread ran the call. */
struct fmeta {
    uint64_t lookups, lookup_ns, put_opens, put_open_ns, commits, commit_ns, commit_sync_ns;
};

struct ftransport {
    struct rio_transport base;
    char *root;              /* absolute, no trailing '/' (except "/") */
    int rootfd;              /* directory mode: the root, every path is resolved beneath it */
    _Atomic bool no_openat2; /* the kernel has no openat2: walk components */
    bool single, blockdev, inplace, sync;
    _Atomic bool tmpfile; /* uploads are O_TMPFILEs (cleared if the file system refuses) */
    int direct;
    bool single_missing; /* ?single=1 and the file does not exist yet */
    uint32_t bounce_size;
    unsigned bounce_slots; /* per ring */
    int stage;             /* aligned caller memory staged too: STAGE_AUTO/ON/OFF */
    unsigned depth, page;
    int cq_efd, wake_efd;
    struct rio_io **ready; /* reap's list of ops to complete: npaths x depth */
    struct fmeta meta;
    struct fring rings[RIO_MAX_PATHS];

    pthread_mutex_t fmu;
    /* under fmu */
    struct ffile *lru_head, *lru_tail;
    unsigned nfiles;
    unsigned cache_max; /* FILE_CACHE_MAX, less under a low RLIMIT_NOFILE */
    uint64_t rng;
};

static struct ftransport *ft(struct rio_transport *t)
{
    return (struct ftransport *)t;
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t ts_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static void meta_add(uint64_t *count, uint64_t *ns, uint64_t t0)
{
    __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(ns, rio__now_ns() - t0, __ATOMIC_RELAXED);
}

static void close_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* ------------------------------------------------------------- paths, keys */

/* Directory mode: 1..RIO_KEY_MAX bytes, relative, no "", "." or ".." component. */
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
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* The file that holds key (rio__malloc'd). */
static int key_path(struct ftransport *t, const char *key, char **out)
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
static const char *cache_key(struct ftransport *t, const char *key)
{
    return t->single ? "" : key;
}

static int open_err(int e)
{
    return e == ENOENT || e == ENOTDIR ? RIO_ENOTFOUND : -e;
}

#define FD_PATH_LEN 32

/* "/proc/self/fd/N": the file fd has open, by a path (a reopen, a link). */
static const char *fd_path(int fd, char buf[FD_PATH_LEN])
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
static const char *rel_of(const struct ftransport *t, const char *path)
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
static int open_beneath(struct ftransport *t, int dirfd, const char *rel, int flags, mode_t mode)
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

/* The directory that holds path's last component, beneath the root, made
 * (mkdir -p, each level beneath the root) when mkdirs and missing: an
 * O_RDONLY directory fd or -errno. */
static int parent_beneath(struct ftransport *t, const char *path, bool mkdirs)
{
    const char *rel = rel_of(t, path), *slash = strrchr(rel, '/');
    char dir[PATH_MAX];
    int fd;

    if (!slash)
        return open_beneath(t, t->rootfd, ".", O_RDONLY | O_DIRECTORY, 0);
    if ((size_t)(slash - rel) >= sizeof(dir))
        return -ENAMETOOLONG;
    memcpy(dir, rel, (size_t)(slash - rel));
    dir[slash - rel] = '\0';
    fd = open_beneath(t, t->rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
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
            pfd = open_beneath(t, t->rootfd, dir, O_PATH | O_DIRECTORY, 0);
            *last = '/';
        }
        if (pfd < 0)
            ret = pfd;
        else if (mkdirat(pfd, last ? last + 1 : dir, 0777) < 0 && errno != EEXIST)
            ret = -errno;
        if (pfd >= 0 && pfd != t->rootfd)
            close(pfd);
        dir[i] = c;
        if (ret < 0)
            return ret;
    }
    return open_beneath(t, t->rootfd, dir, O_RDONLY | O_DIRECTORY, 0);
}

/* The name an upload's *at() calls use for path: its last component
 * relative to up->dirfd, or path itself in single mode. */
static const char *at_name(const struct fupload *up, const char *path)
{
    const char *slash = strrchr(path, '/');

    return up->dirfd == AT_FDCWD || !slash ? path : slash + 1;
}

/* ------------------------------------------------------------ generations */

static uint64_t gen_of(const struct stat *st, uint64_t size)
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
static int fd_size(int fd, const struct stat *st, uint64_t *out)
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
static void dio_geometry(struct ftransport *t, int fd, const struct stat *st, uint32_t *unit,
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
 * buffer instead of a page list of the caller's memory cut the kernel's and
 * the hypervisor's work per I/O by 2-4x here; on tmpfs and other memory file
 * systems a direct step is a copy already, and staging adds a second one.
 */
static bool want_stage(const struct ftransport *t, const struct stat *st)
{
    if (t->stage != STAGE_AUTO)
        return t->stage == STAGE_ON;
    return S_ISBLK(st->st_mode) || major(st->st_dev) != 0;
}

/* A second, O_DIRECT descriptor of the file fd has open at path, or -1.
 * Returns 0, or an error when direct=1 and the file refuses O_DIRECT. */
static int open_direct(struct ftransport *t, const char *path, int flags, const struct stat *st,
                       int *out)
{
    struct stat st2;
    int fd;

    *out = -1;
    if (t->direct == DIRECT_OFF)
        return 0;
    fd = open(path, flags | O_DIRECT | O_CLOEXEC);
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
    *out = fd;
    return 0;
}

/* ----------------------------------------------------------- xattr record */

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/*
 * The checksum record: "railio1\0", size, chunk_size, nchunks, mtime_ns (all
 * u64 LE), etag (48 bytes), xxh[nchunks] (u64 LE), then the xxh3 of all of it.
 * It describes the file only while the file's size and mtime are the ones it
 * names: a file modified after its PUT is served without checksums.
 */
static int xrec_store(int fd, const struct rio_desc *d, uint64_t mtime_ns)
{
    size_t n = XREC_HDR + (size_t)d->nchunks * 8 + 8;
    uint8_t *b;
    int ret = 0;

    if (d->nchunks > (XATTR_SIZE_MAX - XREC_HDR - 8) / 8)
        return 0; /* cannot fit any file system's xattr: stored without */
    b = rio__calloc(1, n);
    if (!b)
        return -ENOMEM;
    memcpy(b, XREC_MAGIC, 8);
    put_le64(b + 8, d->size);
    put_le64(b + 16, d->chunk_size);
    put_le64(b + 24, d->nchunks);
    put_le64(b + 32, mtime_ns);
    memcpy(b + 40, d->etag, 47);
    for (uint64_t i = 0; i < d->nchunks; i++)
        put_le64(b + XREC_HDR + i * 8, d->xxh[i]);
    put_le64(b + n - 8, rio__xxh3(b, n - 8));
    if (fsetxattr(fd, XATTR_NAME, b, n, 0) < 0) {
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
static int xrec_load(int fd, const struct stat *st, uint64_t size, struct rio_desc *d)
{
    ssize_t n = fgetxattr(fd, XATTR_NAME, NULL, 0);
    uint8_t *b;
    uint64_t cs, nc;
    int ret = 0;

    if (n < (ssize_t)(XREC_HDR + 8) || n > XATTR_SIZE_MAX)
        return 0;
    b = rio__malloc((size_t)n);
    if (!b)
        return -ENOMEM;
    if (fgetxattr(fd, XATTR_NAME, b, (size_t)n) != n)
        goto out;
    if (memcmp(b, XREC_MAGIC, 8) != 0 || get_le64(b + n - 8) != rio__xxh3(b, (size_t)n - 8))
        goto out;
    cs = get_le64(b + 16);
    nc = get_le64(b + 24);
    if (get_le64(b + 8) != size || get_le64(b + 32) != ts_ns(&st->st_mtim) || cs == 0 ||
        nc != (size ? (size - 1) / cs + 1 : 0) || nc != ((uint64_t)n - XREC_HDR - 8) / 8 ||
        ((uint64_t)n - XREC_HDR - 8) % 8)
        goto out;
    if (nc) {
        d->xxh = rio__malloc((size_t)nc * sizeof(uint64_t));
        if (!d->xxh) {
            ret = -ENOMEM;
            goto out;
        }
        for (uint64_t i = 0; i < nc; i++)
            d->xxh[i] = get_le64(b + XREC_HDR + i * 8);
    }
    d->chunk_size = cs;
    d->nchunks = nc;
    memcpy(d->etag, b + 40, 47);
    d->etag[47] = '\0';
out:
    rio__free(b);
    return ret;
}

/* ------------------------------------------------------------ file cache */

static void file_close(struct ffile *f)
{
    close_fd(f->fd);
    close_fd(f->dfd);
    rio__free(f);
}

static void lru_unlink_locked(struct ftransport *t, struct ffile *f)
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
            lru_unlink_locked(t, f);
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
        file_close(l);
        l = n;
    }
}

/* Out of descriptors (EMFILE, ENFILE): close every cached file no READ
 * uses and keep half as many from now on (4 at least), so the open that
 * failed can be tried once more. Whether err was that. */
static bool cache_shed(struct ftransport *t, int err)
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
static void cache_forget(struct ftransport *t, const char *key)
{
    uint64_t kh = rio__xxh3(key, strlen(key));
    struct ffile *dead = NULL, *f, *next;

    pthread_mutex_lock(&t->fmu);
    for (f = t->lru_head; f; f = next) {
        next = f->next;
        if (f->khash != kh || strcmp(f->key, key) != 0)
            continue;
        lru_unlink_locked(t, f);
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

static void file_release(struct ftransport *t, struct ffile *f)
{
    bool close_it;

    pthread_mutex_lock(&t->fmu);
    close_it = --f->refs == 0 && f->dead;
    pthread_mutex_unlock(&t->fmu);
    if (close_it)
        file_close(f);
}

/*
 * Open key's file for reading: buffered and (when allowed) O_DIRECT
 * descriptors, its size, generation and direct geometry. *st gets its stat.
 */
static int file_open(struct ftransport *t, const char *key, struct ffile **out, struct stat *st)
{
    const char *ck = cache_key(t, key);
    size_t kl = strlen(ck);
    struct ffile *f;
    char *path;
    int ret, fl;

    ret = key_path(t, key, &path);
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
        f->fd = open_beneath(t, t->rootfd, rel_of(t, path), O_RDONLY | O_NONBLOCK, 0);
    if (f->fd < 0) {
        ret = open_err(t->single ? errno : -f->fd);
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
    ret = fd_size(f->fd, st, &f->size);
    if (ret < 0)
        goto err;
    char pf[FD_PATH_LEN];
    ret = open_direct(t, t->single ? path : fd_path(f->fd, pf), O_RDONLY, st, &f->dfd);
    if (ret < 0)
        goto err;
    dio_geometry(t, f->dfd >= 0 ? f->dfd : f->fd, st, &f->unit, &f->mem);
    f->stage = want_stage(t, st);
    f->gen = gen_of(st, f->size);
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
static struct ffile *cache_insert(struct ftransport *t, struct ffile *f, bool take)
{
    struct ffile *dead = NULL, *e;

    pthread_mutex_lock(&t->fmu);
    e = cache_find_locked(t, f->key, f->khash, f->gen);
    if (e) {
        lru_unlink_locked(t, e);
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
        file_close(f);
    close_list(dead);
    return e;
}

/* The open file a READ of (key, gen) uses, with a reference. */
static int file_get(struct ftransport *t, const char *key, uint64_t gen, struct ffile **out)
{
    const char *ck = cache_key(t, key);
    uint64_t kh = rio__xxh3(ck, strlen(ck));
    struct ffile *f;
    struct stat st;
    int ret;

    pthread_mutex_lock(&t->fmu);
    f = cache_find_locked(t, ck, kh, gen);
    if (f) {
        f->refs++;
        if (f != t->lru_head) {
            lru_unlink_locked(t, f);
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
    ret = file_open(t, key, &f, &st);
    if (ret < 0 && cache_shed(t, ret))
        ret = file_open(t, key, &f, &st);
    if (ret < 0)
        return ret;
    if (f->gen != gen) {
        file_close(f);
        return RIO_EGENERATION;
    }
    *out = cache_insert(t, f, true);
    return 0;
}

/* ----------------------------------------------------------------- rings */

static void ring_destroy(struct fring *r)
{
    if (r->ring_ok)
        io_uring_queue_exit(&r->ring);
    r->ring_ok = false;
    if (r->mu_ok)
        pthread_mutex_destroy(&r->mu);
    r->mu_ok = false;
    rio__free(r->ops);
    rio__free(r->bounce);
    r->ops = NULL;
    r->bounce = NULL;
}

static int ring_init(struct ftransport *t, struct fring *r)
{
    unsigned entries = 8;
    int ret;

    while (entries < 2 * t->depth + 2)
        entries *= 2;
    r->ops = rio__calloc(t->depth, sizeof(*r->ops));
    if (!r->ops)
        return -ENOMEM;
    for (unsigned i = t->depth; i-- > 0;) {
        r->ops[i].slot = (uint16_t)i;
        r->ops[i].ring = r;
        r->ops[i].next = r->free_ops;
        r->free_ops = &r->ops[i];
    }
    ret = -pthread_mutex_init(&r->mu, NULL);
    if (ret < 0)
        return ret;
    r->mu_ok = true;
    /* CQ twice the SQ (the default): room for every op and one cancel each. */
    ret = io_uring_queue_init(entries, &r->ring, 0);
    if (ret < 0)
        return ret;
    r->ring_ok = true;
    ret = io_uring_register_eventfd(&r->ring, t->cq_efd);
    if (ret < 0)
        return ret;
    return 0;
}

/* Allocate (once) and register the ring's bounce buffers. Under r->mu. */
static void bounce_setup_locked(struct ftransport *t, struct fring *r)
{
    struct iovec iov[FILE_BOUNCE_SLOTS];
    unsigned n;

    if (r->bounce_tried)
        return;
    r->bounce_tried = true;
    n = t->bounce_slots;
    /* One region for all slots: rio__alloc_aligned gives regions of 2 MiB or
     * more transparent huge pages, so a step's buffer is physically
     * contiguous and the device sees one segment instead of one per page. */
    size_t sz = ((size_t)n * t->bounce_size + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    r->bounce = rio__alloc_aligned(4096, sz);
    if (!r->bounce)
        return; /* unaligned memory falls back to buffered steps */
    for (unsigned i = 0; i < n; i++) {
        iov[i].iov_base = r->bounce + (size_t)i * t->bounce_size;
        iov[i].iov_len = t->bounce_size;
    }
    /* Registered buffers spare the kernel pinning pages per I/O. They are the
     * transport's own memory, alive until the ring is gone. */
    r->bounce_reg = io_uring_register_buffers(&r->ring, iov, n) == 0;
    if (!r->bounce_reg) /* registering faults every page in; else touch them now */
        for (size_t off = 0; off < sz; off += 4096)
            r->bounce[off] = 0;
    r->nbounce = n;
    r->bounce_free = n >= 64 ? UINT64_MAX : (1ull << n) - 1;
}

static int bounce_take_locked(struct ftransport *t, struct fring *r)
{
    int i;

    if (!t->bounce_size)
        return -1;
    bounce_setup_locked(t, r);
    if (!r->bounce_free)
        return -1;
    i = __builtin_ctzll(r->bounce_free);
    r->bounce_free &= ~(1ull << i);
    return i;
}

static void bounce_put_locked(struct fring *r, int i)
{
    if (i >= 0)
        r->bounce_free |= 1ull << i;
}

static uint8_t *bounce_ptr(struct ftransport *t, struct fring *r, int i)
{
    return r->bounce + (size_t)i * t->bounce_size;
}

/* Hand prepared SQEs to the kernel. A failure (-EAGAIN, -EBUSY, -EINTR) leaves
 * them in the SQ; reap tries again. */
static void ring_flush_locked(struct fring *r)
{
    int ret = io_uring_submit(&r->ring);

    r->ctr.submits++;
    if (ret >= 0)
        r->unsubmitted = 0;
    else
        r->unsubmitted = 1;
}

static struct io_uring_sqe *sqe_get_locked(struct fring *r)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&r->ring);

    if (!sqe) {
        ring_flush_locked(r);
        sqe = io_uring_get_sqe(&r->ring);
    }
    return sqe;
}

/* ------------------------------------------------------------------ steps */

/*
 * Queue the next step of op: from io->off + done, what is left of the chunk.
 * Direct when the file has an O_DIRECT descriptor and the step starts on a
 * unit boundary with at least one whole unit left; buffered otherwise. A
 * direct step goes through a bounce buffer when the caller's memory is not
 * aligned for O_DIRECT, and with stage=1 also when it is (and the step fits
 * one buffer): the device then gets one contiguous, registered segment
 * instead of one per 4 KiB page of the caller's memory, for the price of a
 * copy (docs/file.md, "Staging"). Returns 0 or an error (the op then ends
 * with it).
 */
static int step_queue_locked(struct ftransport *t, struct fring *r, struct fop *op)
{
    struct rio_io *io = op->io;
    bool rd = io->kind == RIO_IO_READ;
    uint64_t pos = io->off + op->done, rem = io->len - op->done, n;
    uint8_t *mem = rd ? (uint8_t *)io->dst + op->done : (uint8_t *)(uintptr_t)io->src + op->done;
    int fd = rd ? op->f->fd : op->up->fd, dfd = rd ? op->f->dfd : op->up->dfd;
    uint32_t unit = rd ? op->f->unit : op->up->unit, mal = rd ? op->f->mem : op->up->mem;
    struct io_uring_sqe *sqe;
    uint8_t *buf = mem;
    int b = -1;
    bool direct = false;

    n = min_u64(rem, FILE_STEP_MAX);
    if (dfd >= 0 && !op->no_direct && pos % unit == 0 && rem >= unit) {
        n = min_u64(rem - rem % unit, FILE_STEP_MAX);
        bool aligned = (uintptr_t)mem % mal == 0;
        bool stage = rd ? op->f->stage : op->up->stage;
        if (aligned && (!stage || n > t->bounce_size || (b = bounce_take_locked(t, r)) < 0)) {
            direct = true;
        } else if (aligned) {
            direct = true;
            buf = bounce_ptr(t, r, b);
            if (!rd)
                memcpy(buf, mem, (size_t)n);
        } else if (t->bounce_size >= unit && (b = bounce_take_locked(t, r)) >= 0) {
            direct = true;
            n = min_u64(n, t->bounce_size - t->bounce_size % unit);
            buf = bounce_ptr(t, r, b);
            if (!rd)
                memcpy(buf, mem, (size_t)n);
        } else {
            /* No bounce buffer free: this step goes buffered. It covers whole
             * units, so it shares no page with a direct step either. */
        }
    }
    sqe = sqe_get_locked(r);
    if (!sqe) {
        bounce_put_locked(r, b);
        return -EBUSY;
    }
    if (b >= 0 && r->bounce_reg) {
        if (rd)
            io_uring_prep_read_fixed(sqe, dfd, buf, (unsigned)n, pos, b);
        else
            io_uring_prep_write_fixed(sqe, dfd, buf, (unsigned)n, pos, b);
    } else if (rd) {
        io_uring_prep_read(sqe, direct ? dfd : fd, buf, (unsigned)n, pos);
    } else {
        io_uring_prep_write(sqe, direct ? dfd : fd, buf, (unsigned)n, pos);
    }
    if (b >= 0) {
        r->ctr.steps_bounce++;
        r->ctr.steps_fixed += r->bounce_reg;
    } else if (direct) {
        r->ctr.steps_direct++;
    } else {
        r->ctr.steps_buffered++;
    }
    if (op->done)
        r->ctr.continuations++;
    op->ud = (uint64_t)op->slot << UD_SLOT_SHIFT | (++r->seq & UD_SEQ_MASK);
    io_uring_sqe_set_data64(sqe, op->ud);
    op->cur_len = (uint32_t)n;
    op->cur_direct = direct;
    op->bounce = b;
    op->state = OP_RUN;
    return 0;
}

/*
 * A step of op ended with res. Either queue the next step (returns false) or
 * end the op with op->res set (returns true). Under r->mu.
 */
static bool step_done_locked(struct ftransport *t, struct fring *r, struct fop *op, int res)
{
    struct rio_io *io = op->io;
    uint8_t *mem;
    int ret;

    if (op->bounce >= 0) {
        if (res > 0 && io->kind == RIO_IO_READ && (uint32_t)res <= op->cur_len) {
            mem = (uint8_t *)io->dst + op->done;
            memcpy(mem, bounce_ptr(t, r, op->bounce), (size_t)res);
        }
        bounce_put_locked(r, op->bounce);
        op->bounce = -1;
    }
    if (res == -EINVAL && op->cur_direct && t->direct == DIRECT_AUTO) {
        /* The file system refused this direct step: redo it buffered, and stay
         * buffered for the rest of the op. */
        op->no_direct = true;
        r->ctr.direct_einval++;
        res = -EAGAIN;
    }
    if (res == -EAGAIN || res == -EINTR) {
        if (++op->eagain <= FILE_EAGAIN_MAX && !op->cancel_req) {
            ret = step_queue_locked(t, r, op);
            if (ret == 0)
                return false;
            op->res = ret;
            return true;
        }
        op->res = op->cancel_req ? -ECANCELED : res;
        return true;
    }
    if (res < 0) {
        op->res = res;
        return true;
    }
    if (res == 0 || (uint32_t)res > op->cur_len) {
        /* EOF before len (the file is shorter than the read says), or a
         * count larger than asked: never success. */
        op->res = res == 0 ? RIO_ESHORT : RIO_EPROTO;
        return true;
    }
    op->done += (uint64_t)res;
    if (op->done == io->len) {
        op->res = (int64_t)io->len;
        return true;
    }
    if (op->cancel_req) {
        op->res = -ECANCELED;
        return true;
    }
    ret = step_queue_locked(t, r, op);
    if (ret == 0)
        return false;
    op->res = ret;
    return true;
}

/* ------------------------------------------------------------ submit etc */

/* Room in a streaming upload's bitmap for chunk index. Under t->fmu. */
static int written_grow_locked(struct fupload *up, uint64_t index)
{
    uint64_t bits;
    uint8_t *w;

    if (index < up->wbits)
        return 0;
    bits = up->wbits * 2 > index + 1 ? up->wbits * 2 : index + 1;
    bits = (bits + 63) & ~(uint64_t)63;
    w = rio__calloc(1, (size_t)(bits / 8));
    if (!w)
        return -ENOMEM;
    memcpy(w, up->written, (size_t)(up->wbits / 8));
    rio__free(up->written);
    up->written = w;
    up->wbits = bits;
    return 0;
}

static int check_write(struct ftransport *t, struct fupload *up, const struct rio_io *io)
{
    uint64_t want;
    int ret;

    if (up->stream) {
        /* Any order, total unknown: a whole chunk, or a shorter one that
         * put_commit checks is the last. */
        if (io->off % up->chunk_size || io->off / up->chunk_size != io->index ||
            io->len > up->chunk_size || io->off > up->limit || io->len > up->limit - io->off)
            return RIO_EPROTO;
        pthread_mutex_lock(&t->fmu);
        ret = written_grow_locked(up, io->index);
        pthread_mutex_unlock(&t->fmu);
        return ret;
    }
    if (io->off > up->size || io->len > up->size - io->off || io->index >= up->nchunks ||
        io->off / up->chunk_size != io->index || io->off % up->chunk_size)
        return RIO_EPROTO;
    want = min_u64(up->chunk_size, up->size - io->off);
    return io->len == want ? 0 : RIO_EPROTO;
}

static int file_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct ftransport *t = ft(tt);
    struct ffile *f = NULL;
    struct fupload *up = NULL;
    struct fring *r;
    struct fop *op;
    int ret;

    if (!io || io->path >= t->base.npaths || !io->complete || io->len == 0)
        return -EINVAL;
    if (io->kind == RIO_IO_READ) {
        if (!io->key || !io->dst)
            return -EINVAL;
        ret = file_get(t, io->key, io->generation, &f);
        if (ret < 0)
            return ret;
        if (io->off > f->size || io->len > f->size - io->off) {
            file_release(t, f);
            return RIO_EPROTO;
        }
    } else if (io->kind == RIO_IO_WRITE) {
        up = io->upload;
        if (!up || up->magic != UPLOAD_MAGIC || !io->src)
            return -EINVAL;
        ret = check_write(t, up, io);
        if (ret < 0)
            return ret;
    } else {
        return -EINVAL;
    }

    r = &t->rings[io->path];
    pthread_mutex_lock(&r->mu);
    op = r->free_ops;
    if (!op) {
        pthread_mutex_unlock(&r->mu);
        if (f)
            file_release(t, f);
        return -EAGAIN;
    }
    r->free_ops = op->next;
    op->io = io;
    op->f = f;
    op->up = up;
    op->next = NULL;
    op->done = 0;
    op->res = 0;
    op->bounce = -1;
    op->eagain = 0;
    op->cancel_req = false;
    op->no_direct = false;
    op->t0 = rio__now_ns();
    ret = step_queue_locked(t, r, op);
    if (ret < 0) {
        op->state = OP_FREE;
        op->io = NULL;
        op->next = r->free_ops;
        r->free_ops = op;
        pthread_mutex_unlock(&r->mu);
        if (f)
            file_release(t, f);
        return ret;
    }
    if (up) {
        pthread_mutex_lock(&t->fmu);
        up->refs++;
        pthread_mutex_unlock(&t->fmu);
    }
    r->inflight++;
    io->tpriv = op;
    /* The SQE waits in the SQ: the engine submits a burst of ops and then
     * reaps, and reap hands the whole burst to the kernel in one system call
     * (ring_harvest). One io_uring_enter per op cost as much as the rest of
     * the transport's CPU per op. */
    r->unsubmitted = 1;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

static void kick(int efd)
{
    uint64_t one = 1;
    ssize_t n;

    do
        n = write(efd, &one, sizeof(one));
    while (n < 0 && errno == EINTR);
}

static void file_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct ftransport *t = ft(tt);
    struct io_uring_sqe *sqe;
    struct fring *r;
    struct fop *op;

    if (!io || io->path >= t->base.npaths)
        return;
    r = &t->rings[io->path];
    pthread_mutex_lock(&r->mu);
    op = io->tpriv;
    if (!op || op->io != io || op->cancel_req || op->state != OP_RUN) {
        pthread_mutex_unlock(&r->mu);
        return;
    }
    op->cancel_req = true;
    /* The step in flight is asked to stop; whatever it reaches, the op ends
     * when its CQE comes (no further step is queued once cancel_req is set). */
    sqe = sqe_get_locked(r);
    if (sqe) {
        io_uring_prep_cancel64(sqe, op->ud, 0);
        io_uring_sqe_set_data64(sqe, UD_CANCEL_SLOT << UD_SLOT_SHIFT);
        r->cancels++;
        r->ctr.cancels++;
        ring_flush_locked(r);
    }
    pthread_mutex_unlock(&r->mu);
}

static void file_wake(struct rio_transport *tt)
{
    kick(ft(tt)->wake_efd);
}

/* An op's I/O is over: the checks that need no ring lock. */
static void op_finish(struct ftransport *t, struct fop *op)
{
    struct rio_io *io = op->io;
    struct stat st;

    if (io->kind == RIO_IO_READ && op->res != -ECANCELED) {
        /* Modified or replaced while we read it: never hand back a mix. */
        uint64_t size = 0;
        if (fstat(op->f->fd, &st) < 0)
            op->res = -errno;
        else if (fd_size(op->f->fd, &st, &size) < 0 || gen_of(&st, size) != op->f->gen)
            op->res = RIO_EGENERATION;
    }
    if (io->kind == RIO_IO_WRITE && op->res == (int64_t)io->len) {
        struct fupload *up = op->up;
        pthread_mutex_lock(&t->fmu);
        up->written[io->index / 8] |= (uint8_t)(1u << (io->index % 8));
        if (up->stream && io->len < up->chunk_size) {
            if (up->has_short && (up->short_idx != io->index || up->short_len != io->len))
                up->bad_short = true;
            up->has_short = true;
            up->short_idx = io->index;
            up->short_len = io->len;
        }
        pthread_mutex_unlock(&t->fmu);
    }
}

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

static void upload_unref(struct ftransport *t, struct fupload *up)
{
    bool last;

    pthread_mutex_lock(&t->fmu);
    last = --up->refs == 0;
    pthread_mutex_unlock(&t->fmu);
    if (last)
        upload_free(up);
}

/*
 * Take what ring r has finished: CQEs, a failed flush to retry. Finished ops
 * go on *fin (still owning their slots).
 */
static void ring_harvest(struct ftransport *t, struct fring *r, struct fop **fin)
{
    struct io_uring_cqe *cqes[64];
    unsigned n, i;

    pthread_mutex_lock(&r->mu);
    if (r->unsubmitted)
        ring_flush_locked(r);
    for (;;) {
        n = io_uring_peek_batch_cqe(&r->ring, cqes, 64);
        if (n == 0)
            break;
        for (i = 0; i < n; i++) {
            uint64_t ud = io_uring_cqe_get_data64(cqes[i]);
            uint64_t slot = ud >> UD_SLOT_SHIFT;
            int res = cqes[i]->res;
            struct fop *op;

            if (slot == UD_CANCEL_SLOT) {
                r->cancels--;
                continue;
            }
            if (slot >= t->depth)
                continue; /* not ours: cannot happen */
            op = &r->ops[slot];
            if (op->state != OP_RUN || op->ud != ud)
                continue; /* a stale completion: cannot happen either */
            if (!step_done_locked(t, r, op, res))
                continue;
            op->state = OP_FINISH;
            op->next = *fin;
            *fin = op;
        }
        io_uring_cq_advance(&r->ring, n);
    }
    if (r->unsubmitted || io_uring_sq_ready(&r->ring))
        ring_flush_locked(r);
    pthread_mutex_unlock(&r->mu);
}

/* Harvest every ring and complete what ended. Returns the count. Only the
 * reaping thread. */
static int drain(struct ftransport *t)
{
    uint64_t now = rio__now_ns();
    unsigned nready = 0;

    for (unsigned pi = 0; pi < t->base.npaths; pi++) {
        struct fring *r = &t->rings[pi];
        struct fop *fin = NULL, *op, *next;

        ring_harvest(t, r, &fin);
        if (!fin)
            continue;
        /* Outside the ring lock: generation checks, receipts. */
        for (op = fin; op; op = op->next)
            op_finish(t, op);
        pthread_mutex_lock(&r->mu);
        for (op = fin; op; op = next) {
            struct rio_io *io = op->io;
            next = op->next;
            io->res = op->res;
            io->svc_ns = now - op->t0;
            io->tpriv = NULL; /* a cancel from now on finds nothing */
            if (op->f)
                file_release(t, op->f);
            if (op->up)
                upload_unref(t, op->up);
            op->f = NULL;
            op->up = NULL;
            op->io = NULL;
            op->state = OP_FREE;
            op->next = r->free_ops;
            r->free_ops = op;
            r->inflight--;
            t->ready[nready++] = io;
        }
        pthread_mutex_unlock(&r->mu);
    }
    /* complete() with no lock held: it may submit the next op. */
    for (unsigned i = 0; i < nready; i++)
        t->ready[i]->complete(t->ready[i]);
    return (int)nready;
}

static void efd_clear(int efd)
{
    uint64_t v;
    ssize_t n;

    do
        n = read(efd, &v, sizeof(v));
    while (n < 0 && errno == EINTR);
}

/*
 * Wait up to timeout_ms for any ring. The CQ eventfd is cleared before the
 * rings are looked at, so a completion that lands after the look makes the
 * poll return at once; the wake eventfd ends the wait.
 */
static int file_reap(struct rio_transport *tt, int timeout_ms)
{
    struct ftransport *t = ft(tt);
    uint64_t deadline, now;
    int n;

    n = drain(t);
    if (n > 0 || timeout_ms == 0)
        return n;
    now = rio__now_ns();
    deadline = timeout_ms < 0 ? NEVER : now + (uint64_t)timeout_ms * NS_PER_MS;
    for (;;) {
        struct pollfd pfd[2] = {{.fd = t->cq_efd, .events = POLLIN},
                                {.fd = t->wake_efd, .events = POLLIN}};
        uint64_t until = deadline;
        int wait_ms;

        efd_clear(t->cq_efd);
        n = drain(t);
        if (n > 0)
            return n;
        now = rio__now_ns();
        if (until == NEVER)
            wait_ms = -1;
        else if (until <= now)
            wait_ms = 0;
        else
            wait_ms = (int)min_u64((until - now + NS_PER_MS - 1) / NS_PER_MS, INT_MAX);
        if (poll(pfd, 2, wait_ms) < 0 && errno != EINTR)
            return -errno;
        if (pfd[1].revents & POLLIN) {
            efd_clear(t->wake_efd);
            return drain(t);
        }
        if (rio__now_ns() >= deadline)
            return drain(t);
    }
}

/* --------------------------------------------------------------- metadata */

static int file_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    struct ftransport *t = ft(tt);
    struct ffile *f;
    struct stat st;
    uint64_t t0 = rio__now_ns();
    size_t kl;
    int ret;

    if (!key || !out)
        return RIO_EINVAL;
    kl = strnlen(key, RIO_KEY_MAX + 1);
    if (kl == 0 || kl > RIO_KEY_MAX)
        return RIO_EINVAL;
    ret = file_open(t, key, &f, &st);
    if (ret < 0 && cache_shed(t, ret))
        ret = file_open(t, key, &f, &st);
    if (ret < 0)
        return ret;
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, kl + 1);
    out->generation = f->gen;
    out->size = f->size;
    if (S_ISREG(st.st_mode)) {
        ret = xrec_load(f->fd, &st, f->size, out);
        if (ret < 0) {
            file_close(f);
            return ret;
        }
    }
    /* Kept open for the READs that usually follow a lookup. */
    cache_insert(t, f, false);
    meta_add(&t->meta.lookups, &t->meta.lookup_ns, t0);
    return 0;
}

/* "DIR/.NAME.railio-tmp-XXXXXXXXXXXXXXXX" next to final. */
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
    if (strlen(base) + 30 > NAME_MAX)
        return -ENAMETOOLONG;
    n = dl + strlen(base) + 40;
    p = rio__malloc(n);
    if (!p)
        return -ENOMEM;
    snprintf(p, n, "%.*s/.%s.railio-tmp-%016llx", (int)dl, final, base, (unsigned long long)rnd);
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

    if (fd < 0 && cache_shed(t, -errno))
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

/* Give the upload its name, DIR/KEY, replacing what is there atomically. */
static int publish(struct ftransport *t, struct fupload *up)
{
    char pf[FD_PATH_LEN], *tmp;
    int ret;

    if (!up->anon) {
        if (renameat(up->dirfd, at_name(up, up->tmp), up->dirfd, at_name(up, up->final)) < 0)
            return -errno;
        rio__free(up->tmp);
        up->tmp = NULL; /* published: nothing to unlink any more */
        return 0;
    }
    fd_path(up->fd, pf);
    if (linkat(AT_FDCWD, pf, up->dirfd, at_name(up, up->final), AT_SYMLINK_FOLLOW) == 0)
        return 0;
    if (errno != EEXIST)
        return -errno;
    /* An object is there: a link cannot replace it, a rename can. */
    ret = tmp_name(t, up->final, &tmp);
    if (ret < 0)
        return ret;
    if (linkat(AT_FDCWD, pf, up->dirfd, at_name(up, tmp), AT_SYMLINK_FOLLOW) < 0) {
        ret = -errno;
    } else if (renameat(up->dirfd, at_name(up, tmp), up->dirfd, at_name(up, up->final)) < 0) {
        ret = -errno;
        unlinkat(up->dirfd, at_name(up, tmp), 0);
    }
    rio__free(tmp);
    return ret;
}

static int file_put_open(struct rio_transport *tt, const char *key, uint64_t size,
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
    ret = key_path(t, key, &up->final);
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
        up->fd = open(up->final, O_WRONLY | O_CLOEXEC);
        if (up->fd < 0) {
            ret = -errno;
            goto err;
        }
        if (fstat(up->fd, &st) < 0 || fd_size(up->fd, &st, &dev_size) < 0) {
            ret = -errno;
            goto err;
        }
        ret = -ENOSPC;
        if (!up->stream && size > dev_size)
            goto err;
        up->limit = dev_size < up->limit ? dev_size : up->limit;
        ret = open_direct(t, up->final, O_WRONLY, &st, &up->dfd);
        if (ret < 0)
            goto err;
        dio_geometry(t, up->dfd >= 0 ? up->dfd : up->fd, &st, &up->unit, &up->mem);
        up->stage = want_stage(t, &st);
        up->magic = UPLOAD_MAGIC;
        *upload = up;
        return 0;
    }

    if (!t->single) {
        /* The key's directory, beneath the root, made if missing. */
        ret = parent_beneath(t, up->final, true);
        if (ret < 0)
            goto err;
        up->dirfd = ret;
    }
    if (atomic_load(&t->tmpfile) && !t->single) {
        ret = open_anon(t, up);
        if (ret < 0)
            goto err;
    }
    if (up->fd >= 0)
        goto created;
    ret = tmp_name(t, up->final, &up->tmp);
    if (ret < 0)
        goto err;
#define TMP_FLAGS (O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC)
    up->fd = openat(up->dirfd, at_name(up, up->tmp), TMP_FLAGS, 0666);
    if (up->fd < 0 && cache_shed(t, -errno))
        up->fd = openat(up->dirfd, at_name(up, up->tmp), TMP_FLAGS, 0666);
#undef TMP_FLAGS
    if (up->fd < 0) {
        ret = -errno;
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
    ret = open_direct(t, t->single ? up->tmp : fd_path(up->fd, pf), O_WRONLY, &st, &up->dfd);
    if (ret < 0)
        goto err;
    dio_geometry(t, up->dfd >= 0 ? up->dfd : up->fd, &st, &up->unit, &up->mem);
    up->stage = want_stage(t, &st);
    up->magic = UPLOAD_MAGIC;
    *upload = up;
    meta_add(&t->meta.put_opens, &t->meta.put_open_ns, t0);
    return 0;
err_tmp:
    rio__free(up->tmp);
    up->tmp = NULL;
err:
    if (up->tmp)
        unlinkat(up->dirfd, at_name(up, up->tmp), 0);
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

static int file_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
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
    if (fstat(up->fd, &st) < 0 || fd_size(up->fd, &st, &size) < 0) {
        ret = -errno;
        goto out_published;
    }
    d->generation = gen_of(&st, size);
    ret = 0;
    __atomic_fetch_add(&t->meta.commit_sync_ns, sync_ns, __ATOMIC_RELAXED);
    meta_add(&t->meta.commits, &t->meta.commit_ns, t0);
out_published:
    cache_forget(t, cache_key(t, up->key));
out:
    if (up->tmp)
        unlinkat(up->dirfd, at_name(up, up->tmp), 0);
    upload_unref(t, up);
    return ret;
}

static void file_put_abort(struct rio_transport *tt, void *upload)
{
    struct fupload *up = upload;

    if (!up || up->magic != UPLOAD_MAGIC)
        return;
    if (up->tmp) {
        unlinkat(up->dirfd, at_name(up, up->tmp), 0);
        rio__free(up->tmp);
        up->tmp = NULL;
    }
    upload_unref(ft(tt), up);
}

static int file_remove(struct rio_transport *tt, const char *key)
{
    struct ftransport *t = ft(tt);
    struct stat st;
    char *path;
    int ret;

    ret = key_path(t, key, &path);
    if (ret < 0)
        return ret;
    /* Directory mode: the key's directory beneath the root, the name in it. */
    int dfd = t->single ? AT_FDCWD : parent_beneath(t, path, false);
    const char *name = path;
    if (!t->single) {
        const char *slash = strrchr(path, '/');
        name = slash ? slash + 1 : path;
    }
    if (dfd < 0 && dfd != AT_FDCWD)
        ret = open_err(-dfd);
    else if (fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
        ret = open_err(errno);
    else if (S_ISDIR(st.st_mode))
        ret = -EISDIR;
    else if (S_ISBLK(st.st_mode))
        ret = RIO_ENOTSUP;
    else if (unlinkat(dfd, name, 0) < 0)
        ret = open_err(errno);
    if (dfd >= 0)
        close(dfd);
    rio__free(path);
    if (ret == 0)
        cache_forget(t, cache_key(t, key));
    return ret;
}

/* ----------------------------------------------------------- open, close */

static int parse_config(struct ftransport *t, const struct rio_url *u, const struct rio_options *o)
{
    const char *s;
    uint64_t v;

    /* Queues: the options' paths (which the engine fills from ?paths= and
     * RIO_PATHS), else ?queues=, else 1. */
    v = 1;
    if (o && o->paths)
        v = o->paths;
    else if ((s = rio__url_param(u, "queues")) && rio__parse_uint(s, RIO_MAX_PATHS, &v) < 0)
        return RIO_EINVAL;
    if (v < 1 || v > RIO_MAX_PATHS)
        return RIO_EINVAL;
    t->base.npaths = (unsigned)v;
    /* Cached files hold two descriptors each: at most an eighth of the
     * process's, so a low limit leaves room for uploads and the rest. */
    struct rlimit rl;
    t->cache_max = FILE_CACHE_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 8 < t->cache_max)
        t->cache_max = rl.rlim_cur / 8 > 4 ? (unsigned)(rl.rlim_cur / 8) : 4;
    t->depth = o && o->depth ? o->depth : 4;
    if (t->depth > FILE_MAX_DEPTH)
        return RIO_EINVAL;

    t->direct = DIRECT_AUTO;
    if ((s = rio__url_param(u, "direct"))) {
        int tri;
        if (rio__opt_tristate("direct", s, "auto", &tri) < 0)
            return RIO_EINVAL;
        t->direct = tri < 0 ? DIRECT_AUTO : tri ? DIRECT_ON : DIRECT_OFF;
    }
    t->sync = true;
    if ((s = rio__url_param(u, "sync")) && rio__opt_bool("sync", s, &t->sync) < 0)
        return RIO_EINVAL;
    if ((s = rio__url_param(u, "single")) && rio__opt_bool("single", s, &t->single) < 0)
        return RIO_EINVAL;
    if ((s = rio__url_param(u, "inplace")) && rio__opt_bool("inplace", s, &t->inplace) < 0)
        return RIO_EINVAL;
    /* Unnamed uploads need /proc to be linked (and reopened O_DIRECT). */
    bool tmpf = true;
    if ((s = rio__url_param(u, "tmpfile")) && rio__opt_bool("tmpfile", s, &tmpf) < 0)
        return RIO_EINVAL;
    atomic_init(&t->tmpfile, tmpf && access("/proc/self/fd", X_OK) == 0);
    /* Bounce buffers: one chunk each (at least 1 MiB, at most 64 MiB), one
     * per command in flight up to 64 per ring and 256 MiB in all. */
    v = o && o->chunk_size ? (o->chunk_size + 4095) / 4096 * 4096 : FILE_BOUNCE_DEFAULT;
    t->bounce_size = (uint32_t)(v < FILE_BOUNCE_DEFAULT ? FILE_BOUNCE_DEFAULT
                                : v > FILE_BOUNCE_MAX   ? FILE_BOUNCE_MAX
                                                        : v);
    if ((s = rio__url_param(u, "bounce"))) {
        if (rio__parse_size(s, &v) < 0 || v > FILE_BOUNCE_MAX || v % 4096)
            return RIO_EINVAL;
        t->bounce_size = (uint32_t)v;
    }
    t->bounce_slots = t->depth < FILE_BOUNCE_SLOTS ? t->depth : FILE_BOUNCE_SLOTS;
    if (t->bounce_size) {
        uint64_t fit = FILE_BOUNCE_TOTAL / t->base.npaths / t->bounce_size;
        if (t->bounce_slots > fit)
            t->bounce_slots = fit ? (unsigned)fit : 1;
    }
    t->stage = STAGE_AUTO;
    if ((s = rio__url_param(u, "stage"))) {
        int tri;
        if (rio__opt_tristate("stage", s, "auto", &tri) < 0)
            return RIO_EINVAL;
        t->stage = tri < 0 ? STAGE_AUTO : tri ? STAGE_ON : STAGE_OFF;
    }
    return 0;
}

/* The URL's path, absolute ("file:///a/b" parses to "a/b"), without trailing '/'. */
static int root_of(const struct rio_url *u, char **out)
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

static void file_close_t(struct rio_transport *tt);

static int file_open_t(const struct rio_url *u, const struct rio_options *o,
                       struct rio_transport **out)
{
    struct ftransport *t;
    struct stat st;
    int ret;

    if (!u || !out)
        return RIO_EINVAL;
    t = rio__calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->base.ops = &rio__file_ops;
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
    ret = parse_config(t, u, o);
    if (ret < 0)
        goto err;
    ret = root_of(u, &t->root);
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
        ret = ring_init(t, &t->rings[i]);
        if (ret < 0)
            goto err;
    }
    /* Where direct steps will be staged (a device behind the files), the
     * bounce buffers are set up now rather than by the first op: registering
     * them faults in and pins every page (here 0.3 s per 128 MiB when the VM
     * must back them), a cost of opening the client, not of its first
     * transfer. Elsewhere they serve only unaligned memory and come when
     * first needed. */
    if (t->direct != DIRECT_OFF && t->bounce_size && !t->single_missing && want_stage(t, &st)) {
        for (unsigned i = 0; i < t->base.npaths; i++) {
            struct fring *r = &t->rings[i];
            pthread_mutex_lock(&r->mu);
            bounce_setup_locked(t, r);
            pthread_mutex_unlock(&r->mu);
        }
    }
    *out = &t->base;
    return 0;
err:
    file_close_t(&t->base);
    return ret;
}

/*
 * The engine closes only when nothing is in flight. Should an op be left over
 * anyway, it is cancelled and its CQE waited for (bounded), so the kernel
 * never writes into memory after close returns; its complete() is not called.
 */
static void ring_quiesce(struct ftransport *t, struct fring *r)
{
    uint64_t end = rio__now_ns() + FILE_CLOSE_WAIT_MS * NS_PER_MS;
    struct io_uring_cqe *cqe;

    if (!r->ring_ok)
        return;
    pthread_mutex_lock(&r->mu);
    if (r->inflight)
        fprintf(stderr, "railio: file: closing with %u op(s) in flight on a queue\n", r->inflight);
    for (unsigned i = 0; i < t->depth; i++) {
        struct fop *op = &r->ops[i];
        struct io_uring_sqe *sqe;
        if (op->state != OP_RUN || op->cancel_req)
            continue;
        op->cancel_req = true;
        sqe = sqe_get_locked(r);
        if (sqe) {
            io_uring_prep_cancel64(sqe, op->ud, 0);
            io_uring_sqe_set_data64(sqe, UD_CANCEL_SLOT << UD_SLOT_SHIFT);
            r->cancels++;
        }
    }
    ring_flush_locked(r);
    for (;;) {
        unsigned running = 0;
        for (unsigned i = 0; i < t->depth; i++)
            running += r->ops[i].state == OP_RUN;
        if ((!running && !r->cancels) || rio__now_ns() >= end)
            break;
        struct __kernel_timespec ts = {0, 10 * (long)NS_PER_MS};
        if (io_uring_wait_cqe_timeout(&r->ring, &cqe, &ts) < 0)
            continue;
        uint64_t ud = io_uring_cqe_get_data64(cqe);
        uint64_t slot = ud >> UD_SLOT_SHIFT;
        if (slot == UD_CANCEL_SLOT) {
            r->cancels--;
        } else if (slot < t->depth && r->ops[slot].ud == ud && r->ops[slot].state == OP_RUN) {
            struct fop *op = &r->ops[slot];
            if (op->bounce >= 0)
                bounce_put_locked(r, op->bounce);
            op->bounce = -1;
            op->state = OP_FINISH;
        }
        io_uring_cqe_seen(&r->ring, cqe);
    }
    for (unsigned i = 0; i < t->depth; i++) {
        struct fop *op = &r->ops[i];
        if (op->state == OP_FREE)
            continue;
        if (op->f)
            file_release(t, op->f);
        if (op->up)
            upload_unref(t, op->up);
        op->f = NULL;
        op->up = NULL;
        op->state = OP_FREE;
    }
    pthread_mutex_unlock(&r->mu);
}

static void file_close_t(struct rio_transport *tt)
{
    struct ftransport *t = ft(tt);

    if (!t)
        return;
    for (unsigned i = 0; i < RIO_MAX_PATHS; i++) {
        ring_quiesce(t, &t->rings[i]);
        ring_destroy(&t->rings[i]);
    }
    while (t->lru_head) {
        struct ffile *f = t->lru_head;
        lru_unlink_locked(t, f);
        file_close(f);
    }
    close_fd(t->cq_efd);
    close_fd(t->wake_efd);
    pthread_mutex_destroy(&t->fmu);
    rio__free(t->ready);
    close_fd(t->rootfd);
    rio__free(t->root);
    rio__free(t);
}

const struct rio_transport_ops rio__file_ops = {
    .scheme = "file",
    /* Checksums only for objects railio wrote: see lookup. */
    .caps = RIO_CAP_ETAG | RIO_CAP_STREAM_PUT,
    .open = file_open_t,
    .close = file_close_t,
    .submit = file_submit,
    .reap = file_reap,
    .wake = file_wake,
    .cancel = file_cancel,
    .lookup = file_lookup,
    .put_open = file_put_open,
    .put_commit = file_put_commit,
    .put_abort = file_put_abort,
    .remove = file_remove,
    .path_cap = NULL,
    .cpu_ns = NULL,
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
