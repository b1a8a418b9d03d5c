/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file:///DIR and file:///PATH?single=1: objects as files, moved with io_uring.
 * What the files of src/transport/file/ share: the design (this comment), the
 * transport's state, and the functions one file calls in another
 * (docs/internals/file.md has the map).
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
#ifndef RIO_TRANSPORT_FILE_INTERNAL_H
#define RIO_TRANSPORT_FILE_INTERNAL_H

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
#include "core/list.h"
#include "core/url.h"
#include "railio.h"
#include "transport/contract.h"
#include "transport/fault.h"
#include "transport/file/file.h"
#include "transport/transport.h"

extern const struct rio_transport_ops rio__file_ops;

#define NS_PER_MS 1000000ull
#define NEVER UINT64_MAX

/* Op slots a ring holds, at most: its SQ of 2 x slots + 2 entries (one
 * cancel each), rounded up to a power of two, stays within io_uring's
 * 32768. Published as the transport's max_depth. */
#define FILE_RING_SLOTS_MAX 8192u
#define FILE_STEP_MAX (1u << 30)       /* one SQE moves at most 1 GiB (len is 32 bits) */
#define FILE_CACHE_MAX 128u            /* open files kept for reads (2 fds each), at most */
#define FILE_SHED_TRIES 10u            /* opens tried again when out of descriptors */
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

#define UPLOAD_MAGIC 0x66696c6575706c64ull
#define FD_PATH_LEN 32 /* "/proc/self/fd/" and an int */

enum { DIRECT_OFF = 0, DIRECT_ON = 1, DIRECT_AUTO = 2 };
enum { STAGE_OFF = 0, STAGE_ON = 1, STAGE_AUTO = 2 };
enum { OP_FREE = 0, OP_RUN, OP_FINISH };

/* An open object for READs: a cache entry under t->fmu. */
struct ffile {
    struct rio_list_node lru; /* on the LRU list, most recent first */
    unsigned refs;            /* READ ops using it */
    bool dead;                /* out of the cache; closed at the last release */
    int fd, dfd;              /* buffered, O_DIRECT (-1: none) */
    uint32_t unit, mem;       /* direct step granularity and memory alignment */
    bool stage;               /* aligned memory is staged too (see rio__file_want_stage) */
    uint64_t size, gen, khash;
    char key[];
};

struct fupload {
    uint64_t magic;
    unsigned refs; /* under t->fmu: the caller's handle + WRITE ops in flight */
    int fd, dfd;
    uint32_t unit, mem;
    bool stage;
    bool inplace;    /* a block device written in place: no temporary file */
    bool if_absent;  /* put_expect RIO__PUT_IF_ABSENT: publish never replaces */
    uint64_t if_gen; /* put_expect of a generation: publish replaces only that one */
    bool stream;     /* size unknown until commit (RIO_SIZE_UNKNOWN at put_open) */
    bool anon;       /* an O_TMPFILE: no name until the commit links it */
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

#define RIO_FILE_LIST_CACHE 8 /* directories whose sorted entries a transport keeps */

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
    struct rio_list lru; /* of struct ffile: the open-file cache, under fmu */
    unsigned cache_max;  /* FILE_CACHE_MAX, less under a low RLIMIT_NOFILE */
    struct dlist *list_cache[RIO_FILE_LIST_CACHE]; /* list.c: large directories' entries */
    uint64_t list_clock;                           /* list.c: of their last use */
    uint64_t rng;
};

static inline struct ftransport *ft(struct rio_transport *t)
{
    return (struct ftransport *)t;
}

static inline uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static inline uint64_t ts_ns(const struct timespec *ts)
{
    return (uint64_t)ts->tv_sec * 1000000000ull + (uint64_t)ts->tv_nsec;
}

static inline void meta_add(uint64_t *count, uint64_t *ns, uint64_t t0)
{
    __atomic_fetch_add(count, 1, __ATOMIC_RELAXED);
    __atomic_fetch_add(ns, rio__now_ns() - t0, __ATOMIC_RELAXED);
}

static inline void close_fd(int fd)
{
    if (fd >= 0)
        close(fd);
}

/* --- between the files (each defined in the one named) --- */

/* path.c */
int rio__file_key_path(struct ftransport *t, const char *key, char **out);
const char *rio__file_cache_key(struct ftransport *t, const char *key);
int rio__file_open_err(int e);
const char *rio__file_fd_path(int fd, char buf[FD_PATH_LEN]);
const char *rio__file_rel_of(const struct ftransport *t, const char *path);
int rio__file_open_beneath(struct ftransport *t, int dirfd, const char *rel, int flags,
                           mode_t mode);
int rio__file_parent_beneath(struct ftransport *t, const char *path, bool mkdirs);
const char *rio__file_at_name(const struct fupload *up, const char *path);
uint64_t rio__file_gen_of(const struct stat *st, uint64_t size);
int rio__file_fd_size(int fd, const struct stat *st, uint64_t *out);
void rio__file_dio_geometry(struct ftransport *t, int fd, const struct stat *st, uint32_t *unit,
                            uint32_t *mem);
bool rio__file_want_stage(const struct ftransport *t, const struct stat *st);
int rio__file_open_direct(struct ftransport *t, const char *path, int flags, const struct stat *st,
                          int *out);

/* cache.c */
void rio__file_close(struct ffile *f);
void rio__file_close_list(struct rio_list *l);
bool rio__file_cache_shed(struct ftransport *t, int err, unsigned attempt);
void rio__file_cache_forget(struct ftransport *t, const char *key);
void rio__file_release(struct ftransport *t, struct ffile *f);
int rio__file_open(struct ftransport *t, const char *key, struct ffile **out, struct stat *st);
struct ffile *rio__file_cache_insert(struct ftransport *t, struct ffile *f, bool take);
int rio__file_get(struct ftransport *t, const char *key, uint64_t gen, struct ffile **out);

/* ring.c */
void rio__file_ring_destroy(struct fring *r);
int rio__file_ring_init(struct ftransport *t, struct fring *r);
void rio__file_bounce_setup_locked(struct ftransport *t, struct fring *r);
int rio__file_submit(struct rio_transport *tt, struct rio_io *io);
void rio__file_cancel(struct rio_transport *tt, struct rio_io *io);
void rio__file_wake(struct rio_transport *tt);
int rio__file_reap(struct rio_transport *tt, int timeout_ms);
void rio__file_ring_quiesce(struct ftransport *t, struct fring *r);

/* meta.c */
int rio__file_xrec_load(int fd, const struct stat *st, uint64_t size, struct rio_desc *d);
void rio__file_upload_unref(struct ftransport *t, struct fupload *up);
int rio__file_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out);
int rio__file_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                       uint64_t chunk_size, void **upload);
int rio__file_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d);
int rio__file_put_expect(struct rio_transport *tt, void *upload, uint64_t gen);
void rio__file_put_abort(struct rio_transport *tt, void *upload);
int rio__file_remove(struct rio_transport *tt, const char *key);
int rio__file_remove_if(struct rio_transport *tt, const char *key, uint64_t gen);

bool rio__file_tmp_name(const char *name, size_t len);

/* list.c */
struct dlist;
void rio__file_list_cache_drop(struct ftransport *t);
int rio__file_list(struct rio_transport *tt, const struct rio_list_args *a,
                   struct rio_list_page *out);
int rio__file_exists(struct rio_transport *tt, const char *const *keys, unsigned n, uint8_t *out);

/* config.c */
int rio__file_parse_config(struct ftransport *t, const struct rio_url *u,
                           const struct rio_options *o);
int rio__file_root_of(const struct rio_url *u, char **out);

#endif
