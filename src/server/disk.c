/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The disk tier of railiod (docs/server.md, "Disk tier").
 *
 * One file per object version in the data directory, named by the key's
 * xxh3 and the generation: "o-KEYHASH-GEN" (16 hex digits each). The file is
 * a header, zero padding up to data_off (a multiple of 4096), then the
 * object's bytes. data_off is the header's length rounded up, or, for a
 * PUT of unknown size, what RIO_SRV_DISK_STREAM_CHUNKS checksums would
 * take (the file is laid out before the count is known; what the header
 * does not use is a hole). The header (little endian):
 *
 *     0   magic "RIOOBJ1\n"          8
 *     8   header_len (u32)           bytes of the header, checksum included
 *     12  key_len (u16), flags (u16)
 *     16  generation, size, chunk_size, nchunks, data_off   (u64 each)
 *     56  etag                       32
 *     88  key                        key_len
 *         chunk checksums            nchunks x u64 (xxh3 of each chunk)
 *         header checksum            u64, xxh3 of every byte before it
 *
 * An upload streams into "t-KEYHASH-N.tmp" (N a per-process counter): each
 * chunk is written at data_off + its offset once its checksum held. The
 * commit, on a commit thread (never a connection's worker), writes the
 * header, fsyncs the file (--sync), and then, under the key's lock, checks
 * the key's tombstone, renames the file to its final name, fsyncs the
 * directory (--sync), and indexes and caches the object, before the commit
 * is answered: a file with the final name is always complete.
 *
 * A DELETE takes the same key lock, removes the object from memory, the
 * index and the disk, and, when an upload opened before it could still
 * commit, leaves a tombstone "d-KEYHASH-GEN" (GEN from the counter that
 * orders upload opens and generations; written and fsynced before the
 * object's file goes). A commit whose upload opened before the tombstone
 * loses: its file is removed, never renamed. Tombstones are reclaimed when
 * no upload opened before them remains.
 *
 * Start-up removes temporary files, checks every header (magic, checksum,
 * geometry, the file size against data_off + size, the name against the key
 * and generation), keeps the highest generation of each key and removes
 * older ones, removes versions older than the key's tombstone, then the
 * tombstones, and renames a file that fails a check to NAME.corrupt (logged
 * and counted). Data bytes are verified against the chunk checksums
 * whenever they are read, so a flipped data byte is never served either.
 *
 * A tombstone file (little endian): magic "RIOTMB1\n" (8), key_len (u16),
 * 6 zero bytes, generation (u64), key, xxh3 of every byte before it (u64).
 *
 * Plain POSIX I/O (pwrite/pread/fsync), not the io_uring file transport: a
 * commit waits for its fsyncs anyway, and this keeps the server free of the
 * engine's machinery.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/le.h"
#include "server/server.h"

#include "railio.h"

#define TOMB_FIXED RIO_SRV_DISK_TOMB_FIXED
#define HDR_FIXED RIO_SRV_DISK_HDR_FIXED
#define ALIGN RIO_SRV_DISK_ALIGN
#define KEY_LOCKS 64u
#define TOMB_BUCKETS 256u
/* A DELETE reclaims the tombstones first when this many are kept, and
 * then again at twice as many as it kept (at least this many). */
#define TOMB_RECLAIM_MIN 1024u
#define NAME_LEN 40
#define READ_THREADS 4u
/* A chunk a READ covers only in part is still read whole, and verified,
 * when it is no larger than this; a larger one is read only where the
 * range covers it (docs/server.md, "Disk tier"). */
#define VERIFY_WHOLE_MAX (1u << 20) /* "o-" 16 "-" 16 ".tmp" NUL, rounded up */

/* A DELETE's mark: uploads of key opened before gen lose to it. */
struct tomb {
    struct tomb *next;
    uint64_t gen;
    bool keep; /* a reclaim's mark: an upload of key opened before gen */
    uint16_t key_len;
    char key[];
};

struct rio_srv_dfile {
    struct rio_srv_disk *d;
    int fd;
    uint64_t data_off;
    char tmp[NAME_LEN];
};

struct rio_srv_disk {
    char *dir;
    int dirfd;
    int sync;
    /* RAILIOD_TEST_DISK_DELAY_MS (tests only, docs/server.md): each READ
     * and commit job sleeps this long first, a slow disk on purpose */
    unsigned delay_ms;
    uint64_t max_chunks;
    struct rio_srv_store *store;
    pthread_mutex_t mu; /* the index and the tombstones */
    /* A commit's rename and publication, and a DELETE, of one key. */
    pthread_mutex_t keylock[KEY_LOCKS];
    struct rio_srv_otab tab;
    size_t nobj;
    struct rio_srv_index index; /* tab's entries in key order */
    uint64_t bytes;
    struct tomb *tombs[TOMB_BUCKETS];
    uint64_t ntombs, tomb_reclaim_at;
    _Atomic uint64_t next_tmp;
    _Atomic uint64_t writes, write_errors, write_ns, reads, read_bytes, read_errors, deletes;
    _Atomic uint64_t corrupt, recovered, discarded, superseded;
    /* Commit threads: the queue is guarded by qmu. */
    pthread_mutex_t qmu;
    pthread_cond_t qcv;
    struct rio_srv_commit *qhead, *qtail;
    int qstop;
    pthread_t *threads;
    unsigned nthreads;
    /* READ threads: their own queue (a READ never waits behind an fsync). */
    pthread_mutex_t rmu;
    pthread_cond_t rcv;
    struct rio_srv_commit *rhead, *rtail;
    int rstop;
    pthread_t rthreads[READ_THREADS];
    unsigned nrthreads;
    /* The READs' buffers, server-wide (--disk-read-memory), under rmu: the
     * bound (0: none), the bytes of the buffers alive, the READs waiting
     * for room, and tickets that keep them in order of arrival. bcv: room
     * came back, a ticket was served, or rstop. */
    pthread_cond_t bcv;
    uint64_t rbudget, rheld, rwaiting, rticket, rserving;
    _Atomic uint64_t read_waits;
    /* Tests only: commits of keys under "hold/" wait while this path is
     * missing (RAILIOD_TEST_COMMIT_HOLD, docs/server.md). */
    const char *hold;
};

static uint64_t key_hash(const char *key, uint16_t klen)
{
    return rio__xxh3(key, klen);
}

static void obj_name(char *out, const char *pfx, uint64_t kh, uint64_t gen, const char *sfx)
{
    snprintf(out, NAME_LEN, "%s-%016" PRIx64 "-%016" PRIx64 "%s", pfx, kh, gen, sfx);
}

/* All n bytes at off, in pieces of at most 1 GiB, through EINTR: 0,
 * -ENODATA when the file ends first (a short file: a damaged record), -EIO
 * when a write moves nothing, or -errno (a read's -EIO is the disk's: the
 * record may be intact, and is not taken for a damaged one). */
static int rw_all(int fd, uint8_t *p, uint64_t n, uint64_t off, bool wr)
{
    while (n) {
        size_t want = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t r = wr ? pwrite(fd, p, want, (off_t)off) : pread(fd, p, want, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return wr ? -EIO : -ENODATA;
        p += r;
        n -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return 0;
}

static int pwrite_all(int fd, const uint8_t *p, uint64_t n, uint64_t off)
{
    return rw_all(fd, (uint8_t *)p, n, off, true);
}

static int pread_all(int fd, uint8_t *p, uint64_t n, uint64_t off)
{
    return rw_all(fd, p, n, off, false);
}

static void ent_free(struct rio_srv_obj *e)
{
    rio__free(e->key);
    rio__free(e->xxh);
    rio__free(e);
}

static void ent_unref(struct rio_srv_obj *e)
{
    if (e && atomic_fetch_sub_explicit(&e->refs, 1, memory_order_acq_rel) == 1)
        ent_free(e);
}

/* ----------------------------------------------------------------- index */

static struct rio_srv_obj **slot_locked(struct rio_srv_disk *d, const char *key, uint16_t klen)
{
    return rio__srv_otab_slot(&d->tab, key, klen);
}

/*
 * Insert e unless the key has a newer generation. Returns the generation of
 * the file that is no longer wanted (the replaced entry's, or e's own when
 * e lost), 0 when none; e's reference is taken or dropped.
 */
static uint64_t index_insert(struct rio_srv_disk *d, struct rio_srv_obj *e)
{
    struct rio_srv_obj **slot, *old;
    uint64_t stale = 0;

    pthread_mutex_lock(&d->mu);
    slot = slot_locked(d, e->key, e->key_len);
    old = *slot;
    if (old && old->generation > e->generation) {
        stale = e->generation;
        pthread_mutex_unlock(&d->mu);
        ent_unref(e);
        return stale;
    }
    if (old) {
        *slot = old->hnext;
        old->hnext = NULL;
        rio__srv_index_remove(&d->index, old);
        d->nobj--;
        d->bytes -= old->size;
        stale = old->generation;
        slot = slot_locked(d, e->key, e->key_len);
    }
    e->hnext = *slot;
    *slot = e;
    rio__srv_index_insert(&d->index, e);
    d->nobj++;
    d->bytes += e->size;
    rio__srv_otab_grow(&d->tab, d->nobj);
    pthread_mutex_unlock(&d->mu);
    ent_unref(old);
    return stale;
}

/* A metadata-only entry from a parsed header (copies key and checksums). */
static struct rio_srv_obj *ent_new(const char *key, uint16_t klen, uint64_t gen, uint64_t size,
                                   uint64_t chunk, uint64_t nchunks, const char etag[32],
                                   const uint8_t *xxh, uint64_t data_off)
{
    struct rio_srv_obj *e = rio__calloc(1, sizeof(*e));

    if (!e)
        return NULL;
    atomic_init(&e->refs, 1);
    e->disk_entry = 1;
    e->key = rio__malloc((size_t)klen + 1);
    e->xxh = nchunks ? rio__malloc((size_t)nchunks * 8) : NULL;
    if (!e->key || (nchunks && !e->xxh)) {
        ent_free(e);
        return NULL;
    }
    memcpy(e->key, key, klen);
    e->key[klen] = '\0';
    if (nchunks)
        memcpy(e->xxh, xxh, (size_t)nchunks * 8);
    e->key_len = klen;
    e->generation = gen;
    e->size = size;
    e->chunk_size = chunk;
    e->nchunks = nchunks;
    memcpy(e->etag, etag, 32);
    e->data_off = data_off;
    return e;
}

/* Remove the file pfx-KEYHASH-GEN ("o" an object, "d" a tombstone); one
 * already gone is no error. */
static void unlink_named(struct rio_srv_disk *d, const char *pfx, const char *key, uint16_t klen,
                         uint64_t gen)
{
    char name[NAME_LEN];

    obj_name(name, pfx, key_hash(key, klen), gen, "");
    if (unlinkat(d->dirfd, name, 0) < 0 && errno != ENOENT)
        SRV_WARN("disk: unlink %s/%s: %s", d->dir, name, strerror(errno));
}

static void unlink_gen(struct rio_srv_disk *d, const char *key, uint16_t klen, uint64_t gen)
{
    unlink_named(d, "o", key, klen, gen);
}

/* ----------------------------------------------------------- tombstones */

/* Seeded as the index is (otab.c): with the public hash of the key a
 * client could put every tombstone in one bucket, and each DELETE and
 * commit walked them all under the index's lock. */
static struct tomb **tomb_bucket(struct rio_srv_disk *d, const char *key, uint16_t klen)
{
    return &d->tombs[XXH3_64bits_withSeed(key, klen, d->tab.seed) % TOMB_BUCKETS];
}

static struct tomb **tomb_slot_locked(struct rio_srv_disk *d, const char *key, uint16_t klen)
{
    struct tomb **pp = tomb_bucket(d, key, klen);
    for (; *pp; pp = &(*pp)->next)
        if ((*pp)->key_len == klen && memcmp((*pp)->key, key, klen) == 0)
            break;
    return pp;
}

static struct tomb *tomb_new(const char *key, uint16_t klen, uint64_t gen)
{
    struct tomb *t = rio__malloc(sizeof(*t) + klen);

    if (!t)
        return NULL;
    t->next = NULL;
    t->gen = gen;
    t->key_len = klen;
    memcpy(t->key, key, klen);
    return t;
}

/* The generation of key's tombstone, 0 when it has none. */
static uint64_t tomb_gen(struct rio_srv_disk *d, const char *key, uint16_t klen)
{
    struct tomb *t;
    uint64_t g;

    pthread_mutex_lock(&d->mu);
    t = *tomb_slot_locked(d, key, klen);
    g = t ? t->gen : 0;
    pthread_mutex_unlock(&d->mu);
    return g;
}

static void tomb_unlink_file(struct rio_srv_disk *d, const char *key, uint16_t klen, uint64_t gen)
{
    unlink_named(d, "d", key, klen, gen);
}

/* Open record file name for reading: only a regular file, never through
 * a symbolic link, never waiting on a FIFO (a FIFO planted under a record's
 * name hung start-up, and every READ thread that opened it). The fd, or
 * -errno with *why (when not NULL) saying what the name held instead. */
static int rec_open(struct rio_srv_disk *d, const char *name, struct stat *st, const char **why)
{
    struct stat sb;
    int fd = openat(d->dirfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);

    if (why)
        *why = NULL;
    if (fd < 0) {
        int e = errno;
        if (why && e == ELOOP)
            *why = "a symbolic link, not a record";
        return -e;
    }
    if (!st)
        st = &sb;
    if (fstat(fd, st) < 0) {
        int e = errno;
        close(fd);
        return -e;
    }
    if (!S_ISREG(st->st_mode)) {
        if (why)
            *why = S_ISDIR(st->st_mode) ? "a directory, not a record" : "not a regular file";
        close(fd);
        return -EINVAL;
    }
    return fd;
}

/* Write key's tombstone file for gen (fsynced with --sync; the directory
 * is the caller's). 0 or -errno. */
static int tomb_write(struct rio_srv_disk *d, const char *key, uint16_t klen, uint64_t gen)
{
    uint8_t buf[TOMB_FIXED + RIO_KEY_MAX + 8];
    size_t n;
    char name[NAME_LEN];
    int fd, ret;

    n = rio__srv_disk_enc_tomb(buf, key, klen, gen);
    obj_name(name, "d", key_hash(key, klen), gen, "");
    /* A new file, never through whatever the name holds (a symbolic link
     * planted there had the tombstone written over its target, outside
     * the directory): what is there is removed first. */
    fd = openat(d->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 && errno == EEXIST && unlinkat(d->dirfd, name, 0) == 0)
        fd = openat(d->dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -errno;
    ret = pwrite_all(fd, buf, n, 0);
    if (!ret && d->sync && fsync(fd) < 0)
        ret = -errno;
    if (close(fd) < 0 && !ret)
        ret = -errno;
    if (ret)
        unlinkat(d->dirfd, name, 0);
    return ret;
}

/* ------------------------------------------------------------- recovery */

static void quarantine(struct rio_srv_disk *d, const char *name, const char *why)
{
    char to[300];

    atomic_fetch_add(&d->corrupt, 1);
    SRV_ERR("disk: corrupt record %s/%s: %s; moved to %s.corrupt, not served", d->dir, name, why,
            name);
    snprintf(to, sizeof(to), "%s.corrupt", name);
    if (renameat(d->dirfd, name, d->dirfd, to) < 0)
        SRV_WARN("disk: rename %s: %s", name, strerror(errno));
}

/* rec_open at start-up: what a record's name holds that is no record is
 * quarantined (RIO_ECHECKSUM), another failure logged (-errno). */
static int rec_open_recovering(struct rio_srv_disk *d, const char *name, struct stat *st)
{
    const char *why;
    int fd = rec_open(d, name, st, &why);

    if (fd >= 0)
        return fd;
    if (why) {
        quarantine(d, name, why);
        return RIO_ECHECKSUM;
    }
    SRV_ERR("disk: open %s/%s: %s; not served", d->dir, name, strerror(-fd));
    return fd;
}

/* A record left in place unread (the disk failed its read, or it could not
 * be opened: EACCES) may hold the key's newest generation, which its name
 * says: generations continue above it. They continued above the others
 * only, and above the wall clock: with the clock behind that record's
 * time, a PUT of its key was given a lower generation, and the start that
 * read the record again served the older version and removed the
 * acknowledged one's file as superseded. A name beyond what railiod
 * writes raises nothing. */
static void left_in_place(uint64_t name_gen, uint64_t *max_gen)
{
    if (name_gen <= RIO_SRV_DISK_GEN_MAX && name_gen > *max_gen)
        *max_gen = name_gen;
}

/* Parse and check one object file; 0 and *out, or a reason (logged). An
 * intact record that this start cannot serve is 0 with *out NULL: its
 * generation still raises *max_gen. */
static int recover_one(struct rio_srv_disk *d, const char *name, uint64_t name_kh,
                       uint64_t name_gen, uint64_t *max_gen, struct rio_srv_obj **out)
{
    uint8_t fixed[HDR_FIXED], *hdr = NULL;
    struct rio_srv_disk_rec r;
    const char *why = NULL;
    struct stat st;
    int fd, ret;

    *out = NULL;
    fd = rec_open_recovering(d, name, &st);
    if (fd < 0) {
        if (fd != RIO_ECHECKSUM)
            left_in_place(name_gen, max_gen);
        return fd;
    }
    ret = pread_all(fd, fixed, HDR_FIXED, 0);
    if (ret == -ENODATA) {
        why = "shorter than a header";
        goto bad;
    }
    if (ret < 0)
        goto out_err;
    ret = rio__srv_disk_parse_record(fixed, HDR_FIXED, (uint64_t)st.st_size,
                                     RIO_SRV_DISK_REC_CHUNKS_MAX, &r);
    if (ret < 0) {
        why = r.why;
        goto bad;
    }
    hdr = rio__malloc((size_t)r.header_len);
    if (!hdr) {
        ret = -ENOMEM;
        goto out;
    }
    ret = pread_all(fd, hdr, r.header_len, 0);
    if (ret == -ENODATA) {
        why = "truncated header";
        goto bad;
    }
    if (ret < 0)
        goto out_err;
    ret = rio__srv_disk_parse_record(hdr, (size_t)r.header_len, (uint64_t)st.st_size,
                                     RIO_SRV_DISK_REC_CHUNKS_MAX, &r);
    if (ret != 0) {
        why = r.why ? r.why : "header changed while read";
        goto bad;
    }
    if (r.generation != name_gen || key_hash(r.key, r.key_len) != name_kh) {
        why = "name does not match the header";
        goto bad;
    }
    if (r.nchunks > d->max_chunks) {
        /* Written under a larger --max-body: intact, but LOOKUP could not
         * carry its checksums. Left as it is for a start that can serve
         * it (it was renamed .corrupt as a "bad header length": a restart
         * with a smaller --max-body lost the object for good). */
        SRV_ERR("disk: record %s/%s holds %llu chunks, more than --max-body lets a LOOKUP "
                "carry (%llu); left in place, not served (start with a larger --max-body to "
                "serve it)",
                d->dir, name, (unsigned long long)r.nchunks, (unsigned long long)d->max_chunks);
        if (r.generation > *max_gen)
            *max_gen = r.generation;
        ret = 0;
        goto out;
    }
    *out = ent_new(r.key, r.key_len, r.generation, r.size, r.chunk_size, r.nchunks, r.etag, r.xxh,
                   r.data_off);
    if (*out) /* the file was renamed into place at its commit */
        (*out)->mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
    ret = *out ? 0 : -ENOMEM;
    goto out;
bad:
    quarantine(d, name, why);
    ret = RIO_ECHECKSUM;
    goto out;
out_err: /* not served, and said: a read error is no silent skip */
    SRV_ERR("disk: read %s/%s: %s; not served", d->dir, name, strerror(-ret));
    left_in_place(name_gen, max_gen);
out:
    rio__free(hdr);
    close(fd);
    return ret;
}

/* Parse and check one tombstone file; 0 and *out, or a reason (logged). */
static int recover_tomb(struct rio_srv_disk *d, const char *name, uint64_t name_kh,
                        uint64_t name_gen, struct tomb **out)
{
    uint8_t buf[TOMB_FIXED + RIO_KEY_MAX + 8 + 1];
    struct rio_srv_disk_rec r;
    const char *why = NULL;
    ssize_t n;
    int fd;

    *out = NULL;
    fd = rec_open_recovering(d, name, NULL);
    if (fd < 0)
        return fd;
    n = pread(fd, buf, sizeof(buf), 0);
    if (n < 0) {
        int e = errno;
        close(fd);
        SRV_ERR("disk: read %s/%s: %s; ignored", d->dir, name, strerror(e));
        return -e;
    }
    close(fd);
    if (rio__srv_disk_parse_tomb(buf, (size_t)n, &r) < 0)
        why = r.why;
    else if (r.generation != name_gen || key_hash(r.key, r.key_len) != name_kh)
        why = "name does not match the tombstone";
    if (why) {
        quarantine(d, name, why);
        return RIO_ECHECKSUM;
    }
    *out = tomb_new(r.key, r.key_len, name_gen);
    return *out ? 0 : -ENOMEM;
}

/*
 * After the scan: versions older than their key's tombstone go (the DELETE
 * was acknowledged, or an upload it beat got that far), durably, then the
 * tombstones themselves, since no upload survives a restart.
 */
static void recover_tombs(struct rio_srv_disk *d)
{
    int changed = 0;

    for (unsigned b = 0; b < TOMB_BUCKETS; b++)
        for (struct tomb *t = d->tombs[b]; t; t = t->next) {
            struct rio_srv_obj **slot = slot_locked(d, t->key, t->key_len), *e = *slot;
            if (!e || e->generation >= t->gen)
                continue;
            *slot = e->hnext;
            e->hnext = NULL;
            rio__srv_index_remove(&d->index, e);
            d->nobj--;
            d->bytes -= e->size;
            atomic_fetch_sub(&d->recovered, 1);
            SRV_INFO("disk: removed generation %llu of a key deleted at %llu",
                     (unsigned long long)e->generation, (unsigned long long)t->gen);
            unlink_gen(d, t->key, t->key_len, e->generation);
            ent_unref(e);
            changed = 1;
        }
    if (changed && d->sync)
        fsync(d->dirfd);
    for (unsigned b = 0; b < TOMB_BUCKETS; b++)
        while (d->tombs[b]) {
            struct tomb *t = d->tombs[b];
            d->tombs[b] = t->next;
            tomb_unlink_file(d, t->key, t->key_len, t->gen);
            rio__free(t);
        }
    d->ntombs = 0;
}

/* A record's file name: PFX-KEYHASH-GENERATION, both 16 hex digits. */
static bool rec_name(const char *n, char pfx, unsigned long long *kh, unsigned long long *gen)
{
    /* Exactly the digits obj_name writes: another spelling of the same
     * key and generation ("O-81AF..." or "+"/"0x" forms) must not pass for
     * a second copy, whose recovery unlinked the real one. */
    static const char hex[] = "0123456789abcdef";
    if (strlen(n) != 35 || n[0] != pfx || n[1] != '-' || n[18] != '-' || strspn(n + 2, hex) != 16 ||
        strspn(n + 19, hex) != 16)
        return false;
    *kh = strtoull(n + 2, NULL, 16);
    *gen = strtoull(n + 19, NULL, 16);
    return true;
}

static int recover(struct rio_srv_disk *d, uint64_t *max_gen)
{
    DIR *dir;
    struct dirent *de;
    int dfd = dup(d->dirfd), ret = 0;

    if (dfd < 0)
        return -errno;
    dir = fdopendir(dfd);
    if (!dir) {
        close(dfd);
        return -errno;
    }
    for (;;) {
        errno = 0;
        de = readdir(dir);
        if (!de) {
            /* End of the directory, or a read of it failed (EIO): a start
             * on part of its records would serve with acknowledged objects
             * missing and count generations from part of them. */
            if (errno != 0) {
                ret = -errno;
                SRV_ERR("data dir %s: reading the directory failed: %s", d->dir, strerror(errno));
            }
            break;
        }
        const char *n = de->d_name;
        unsigned long long kh, gen;
        int used = 0;

        if (n[0] == 't' && sscanf(n, "t-%16llx-%16llx.tmp%n", &kh, &gen, &used) == 2 &&
            n[used] == '\0') {
            /* A PUT that never reached its rename: never acknowledged. */
            if (unlinkat(d->dirfd, n, 0) == 0) {
                atomic_fetch_add(&d->discarded, 1);
                SRV_INFO("disk: discarded partial %s", n);
            }
            continue;
        }
        if (rec_name(n, 'd', &kh, &gen)) {
            struct tomb *t = NULL;
            int r = recover_tomb(d, n, kh, gen, &t);
            if (r == -ENOMEM) {
                ret = r;
                break;
            }
            if (r < 0 || !t)
                continue;
            if (t->gen > *max_gen)
                *max_gen = t->gen;
            struct tomb **tb = tomb_bucket(d, t->key, t->key_len);
            t->next = *tb;
            *tb = t;
            d->ntombs++;
            continue;
        }
        if (!rec_name(n, 'o', &kh, &gen))
            continue;
        struct rio_srv_obj *e = NULL;
        int r = recover_one(d, n, kh, gen, max_gen, &e);
        if (r == -ENOMEM) {
            ret = r;
            break;
        }
        if (r < 0 || !e)
            continue;
        if (e->generation > *max_gen)
            *max_gen = e->generation;
        char key[RIO_KEY_MAX + 1];
        uint16_t klen = e->key_len;
        memcpy(key, e->key, klen);
        uint64_t stale = index_insert(d, e);
        atomic_fetch_add(&d->recovered, 1);
        if (stale) {
            /* An older version whose removal a crash interrupted. */
            atomic_fetch_add(&d->recovered, (uint64_t)-1);
            atomic_fetch_add(&d->superseded, 1);
            unlink_gen(d, key, klen, stale);
        }
    }
    closedir(dir);
    if (ret == 0)
        recover_tombs(d);
    return ret;
}

int rio__srv_disk_open(struct rio_srv_disk **out, const char *dir, int sync, uint64_t max_chunks,
                       struct rio_srv_store *store, uint64_t *max_gen)
{
    struct rio_srv_disk *d;
    int ret;

    *out = NULL;
    *max_gen = 0;
    d = rio__calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->dirfd = -1;
    d->sync = sync;
    d->store = store;
    d->hold = getenv("RAILIOD_TEST_COMMIT_HOLD");
    const char *delay = getenv("RAILIOD_TEST_DISK_DELAY_MS");
    if (delay) {
        char *end;
        unsigned long ms = strtoul(delay, &end, 10);
        d->delay_ms = *end == '\0' && ms <= 60000 ? (unsigned)ms : 0;
    }
    d->max_chunks = max_chunks;
    d->tomb_reclaim_at = TOMB_RECLAIM_MIN;
    d->dir = rio__strdup(dir);
    rio__srv_index_init(&d->index);
    if (!d->dir || rio__srv_otab_init(&d->tab, 1024) < 0) {
        ret = -ENOMEM;
        goto err;
    }
    /* Objects are the clients' data: readable by this server's user only
     * (the directory when it makes it, and every file; they were 0755 and
     * 0644, any local user's to read). */
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        ret = -errno;
        SRV_ERR("data dir %s: %s", dir, strerror(errno));
        goto err;
    }
    d->dirfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (d->dirfd < 0) {
        ret = -errno;
        SRV_ERR("data dir %s: %s", dir, strerror(errno));
        goto err;
    }
    /* One railiod per directory, for as long as it runs: a second one's
     * recovery removed the first's uploads in progress, and their indexes
     * drifted apart (objects listed that every GET refused). */
    if (flock(d->dirfd, LOCK_EX | LOCK_NB) < 0) {
        ret = -errno;
        if (errno == EWOULDBLOCK)
            SRV_ERR("data dir %s: another railiod serves it (the directory is locked)", dir);
        else
            SRV_ERR("data dir %s: lock: %s", dir, strerror(errno));
        close(d->dirfd);
        d->dirfd = -1;
        goto err;
    }
    /* Writable by this user: a directory it may only read (one moved from
     * root to a service user) started, said it served, and refused every
     * PUT (review). The probe has a partial upload's name: a crash before
     * its removal leaves what recovery discards. It is a new file under a
     * name of this start (O_EXCL): whatever a name already holds is never
     * opened (a FIFO planted under a fixed probe name hung start-up in
     * open(), a directory or a link there refused it as "not writable"). */
    char probe[NAME_LEN];
    int pfd = -1;
    for (uint64_t i = 0, t = rio__now_ns(); pfd < 0 && i < 16; i++) {
        obj_name(probe, "t", 0, t + i, ".tmp");
        pfd = openat(d->dirfd, probe, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (pfd < 0 && errno != EEXIST)
            break;
    }
    if (pfd < 0 && (errno == ENOSPC || errno == EDQUOT)) {
        /* Writable, but full (no inode left, a quota): what it holds is
         * served, and PUTs fail until there is room. It refused to start,
         * "not writable by this user", and no object could be read. */
        SRV_WARN("data dir %s: full (%s): serving what it holds; uploads fail until space "
                 "is freed",
                 dir, strerror(errno));
    } else if (pfd < 0) {
        ret = -errno;
        SRV_ERR("data dir %s: not writable by this user (uid %u): %s", dir, (unsigned)geteuid(),
                strerror(errno));
        close(d->dirfd);
        d->dirfd = -1;
        goto err;
    } else {
        close(pfd);
        unlinkat(d->dirfd, probe, 0);
    }
    pthread_mutex_init(&d->mu, NULL);
    for (unsigned i = 0; i < KEY_LOCKS; i++)
        pthread_mutex_init(&d->keylock[i], NULL);
    pthread_mutex_init(&d->qmu, NULL);
    pthread_cond_init(&d->qcv, NULL);
    pthread_mutex_init(&d->rmu, NULL);
    pthread_cond_init(&d->rcv, NULL);
    pthread_cond_init(&d->bcv, NULL);
    atomic_init(&d->next_tmp, rio__now_ns());
    ret = recover(d, max_gen);
    if (ret < 0) {
        SRV_ERR("data dir %s: recovery: %s", dir, rio_strerror(ret));
        rio__srv_disk_close(d);
        return ret;
    }
    /* Removals of partial files and older versions become durable too. */
    if (sync)
        fsync(d->dirfd);
    SRV_INFO("disk: %s: recovered %llu objects (%llu bytes), discarded %llu partial, %llu "
             "corrupt, %llu superseded; sync=%s",
             dir, (unsigned long long)atomic_load(&d->recovered), (unsigned long long)d->bytes,
             (unsigned long long)atomic_load(&d->discarded),
             (unsigned long long)atomic_load(&d->corrupt),
             (unsigned long long)atomic_load(&d->superseded), sync ? "on" : "off");
    *out = d;
    return 0;
err:
    if (d->dirfd >= 0)
        close(d->dirfd);
    rio__srv_otab_cleanup(&d->tab);
    rio__free(d->dir);
    rio__free(d);
    return ret;
}

static void ent_unref_each(struct rio_srv_obj *e, void *arg)
{
    (void)arg;
    ent_unref(e);
}

void rio__srv_disk_close(struct rio_srv_disk *d)
{
    if (!d)
        return;
    rio__srv_disk_pool_stop(d);
    for (unsigned b = 0; b < TOMB_BUCKETS; b++)
        while (d->tombs[b]) {
            struct tomb *t = d->tombs[b];
            d->tombs[b] = t->next;
            rio__free(t);
        }
    rio__srv_otab_each(&d->tab, ent_unref_each, NULL);
    pthread_mutex_destroy(&d->mu);
    for (unsigned i = 0; i < KEY_LOCKS; i++)
        pthread_mutex_destroy(&d->keylock[i]);
    pthread_mutex_destroy(&d->qmu);
    pthread_cond_destroy(&d->qcv);
    pthread_mutex_destroy(&d->rmu);
    pthread_cond_destroy(&d->rcv);
    pthread_cond_destroy(&d->bcv);
    close(d->dirfd);
    rio__srv_otab_cleanup(&d->tab);
    rio__free(d->dir);
    rio__free(d);
}

static pthread_mutex_t *key_lock(struct rio_srv_disk *d, const char *key, uint16_t klen)
{
    return &d->keylock[key_hash(key, klen) % KEY_LOCKS];
}

/* ----------------------------------------------------------------- write */

int rio__srv_dfile_new(struct rio_srv_disk *d, const char *key, uint16_t klen, uint64_t nchunks,
                       struct rio_srv_dfile **out)
{
    uint64_t hlen = rio__srv_disk_header_len(klen, nchunks, d->max_chunks);
    struct rio_srv_dfile *f;
    int ret;

    *out = NULL;
    if (!hlen)
        return RIO_EINVAL;
    f = rio__calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->d = d;
    f->data_off = rio__srv_disk_round_up(hlen);
    obj_name(f->tmp, "t", key_hash(key, klen), atomic_fetch_add(&d->next_tmp, 1), ".tmp");
    f->fd = openat(d->dirfd, f->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (f->fd < 0) {
        ret = -errno;
        SRV_ERR("disk: create %s/%s: %s", d->dir, f->tmp, strerror(errno));
        rio__free(f);
        return ret;
    }
    *out = f;
    return 0;
}

int rio__srv_dfile_write(struct rio_srv_dfile *f, uint64_t off, const uint8_t *p, uint64_t n)
{
    int ret;

    if (off > UINT64_MAX - f->data_off || n > UINT64_MAX - f->data_off - off)
        return RIO_EINVAL;
    ret = pwrite_all(f->fd, p, n, f->data_off + off);
    if (ret < 0) {
        atomic_fetch_add(&f->d->write_errors, 1);
        SRV_ERR("disk: write %s/%s (%llu bytes at %llu): %s", f->d->dir, f->tmp,
                (unsigned long long)n, (unsigned long long)off, rio_strerror(ret));
    }
    return ret;
}

void rio__srv_dfile_discard(struct rio_srv_dfile *f)
{
    if (!f)
        return;
    if (f->fd >= 0)
        close(f->fd);
    if (unlinkat(f->d->dirfd, f->tmp, 0) < 0 && errno != ENOENT)
        SRV_WARN("disk: unlink %s/%s: %s", f->d->dir, f->tmp, strerror(errno));
    rio__free(f);
}

/* Tests only: a commit of a non-empty object under "hold/" waits here while
 * d->hold is missing, after announcing itself in d->hold + ".reached" (an
 * empty one goes on: a newer version can land meanwhile). */
static void test_hold(struct rio_srv_disk *d, const struct rio_srv_obj *o)
{
    char reached[4096];
    uint64_t t0 = rio__now_ns();
    int fd;

    if (!d->hold || !o->size || o->key_len < 5 || memcmp(o->key, "hold/", 5) != 0 ||
        access(d->hold, F_OK) == 0)
        return;
    snprintf(reached, sizeof(reached), "%s.reached", d->hold);
    fd = open(reached, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        close(fd);
    SRV_INFO("disk: commit of %s held until %s exists", o->key, d->hold);
    while (access(d->hold, F_OK) != 0 && rio__now_ns() - t0 < 60ull * 1000000000ull)
        usleep(2000);
}

/* The generation of key's object on disk (0: none). Under the key's lock
 * it stays so: every commit and delete of the key holds that lock. */
static uint64_t current_gen(struct rio_srv_disk *d, const char *key, uint16_t klen)
{
    struct rio_srv_obj *e = rio__srv_disk_get(d, key, klen);
    uint64_t g = e ? e->generation : 0;

    ent_unref(e);
    return g;
}

void rio__srv_disk_commit(struct rio_srv_disk *d, struct rio_srv_commit *j)
{
    struct rio_srv_obj *o = j->o, *e = NULL;
    struct rio_srv_dfile *f = j->df;
    uint64_t hlen = rio__srv_disk_header_len(o->key_len, o->nchunks, d->max_chunks);
    uint64_t t0 = rio__now_ns(), stale, tomb, data_off = 0;
    pthread_mutex_t *kl = key_lock(d, o->key, o->key_len);
    char fin[NAME_LEN];
    uint8_t *hdr = NULL;
    int ret;

    j->generation = o->generation;
    obj_name(fin, "o", key_hash(o->key, o->key_len), o->generation, "");
    if (!hlen || rio__srv_disk_round_up(hlen) > f->data_off) {
        ret = RIO_EINVAL;
        goto err;
    }
    data_off = f->data_off;
    hdr = rio__calloc(1, (size_t)rio__srv_disk_round_up(hlen));
    if (!hdr) {
        ret = -ENOMEM;
        goto err;
    }
    rio__srv_disk_enc_record(hdr, &(struct rio_srv_disk_rec){
                                      .key_len = o->key_len,
                                      .generation = o->generation,
                                      .size = o->size,
                                      .chunk_size = o->chunk_size,
                                      .nchunks = o->nchunks,
                                      .data_off = f->data_off,
                                      .header_len = hlen,
                                      .key = o->key,
                                      .etag = o->etag,
                                      .xxh = o->xxh,
                                  });

    /* The data is in the file already (each chunk as it arrived); the
     * file ends where the data does (an object of unknown size laid out
     * for more chunks, or empty, would otherwise end elsewhere). */
    ret = pwrite_all(f->fd, hdr, rio__srv_disk_round_up(hlen), 0);
    if (!ret && ftruncate(f->fd, (off_t)(data_off + o->size)) < 0)
        ret = -errno;
    if (!ret && d->sync && fsync(f->fd) < 0)
        ret = -errno;
    if (close(f->fd) < 0 && !ret)
        ret = -errno;
    f->fd = -1;
    rio__free(hdr);
    if (ret)
        goto err;
    test_hold(d, o);

    pthread_mutex_lock(kl);
    tomb = tomb_gen(d, o->key, o->key_len);
    if (tomb > o->open_gen) {
        /* A DELETE came after this upload opened: it wins (a conditional
         * commit is told: the key changed under it). */
        SRV_DEBUG("disk: commit of generation %llu superseded by a delete at %llu",
                  (unsigned long long)o->generation, (unsigned long long)tomb);
        atomic_fetch_add(&d->superseded, 1);
        rio__srv_dfile_discard(f);
        rio__srv_store_drop(d->store, o);
        pthread_mutex_unlock(kl);
        j->status = j->if_gen ? RIO_EGENERATION : 0;
        return;
    }
    if (j->if_gen) {
        uint64_t cur = current_gen(d, o->key, o->key_len);
        if ((j->if_gen == RIO_PROTO_IF_ABSENT ? cur != 0 : cur != j->if_gen) ||
            rio__srv_store_committing_before(d->store, o)) {
            rio__srv_dfile_discard(f);
            rio__srv_store_drop(d->store, o);
            pthread_mutex_unlock(kl);
            j->status = RIO_EGENERATION;
            return;
        }
    }
    if (renameat(d->dirfd, f->tmp, d->dirfd, fin) < 0) {
        ret = -errno;
        pthread_mutex_unlock(kl);
        goto err;
    }
    if (d->sync && fsync(d->dirfd) < 0) {
        /* The rename may or may not be durable: the PUT is not acknowledged,
         * and the file is removed (a restart that finds it anyway serves a
         * complete, unacknowledged version, which is allowed). */
        ret = -errno;
        unlinkat(d->dirfd, fin, 0);
        pthread_mutex_unlock(kl);
        goto err;
    }
    rio__free(f);
    f = NULL;
    e = ent_new(o->key, o->key_len, o->generation, o->size, o->chunk_size, o->nchunks, o->etag,
                o->xxh, data_off);
    if (e)
        e->mtime_ns = o->mtime_ns;
    if (!e) {
        ret = -ENOMEM;
        unlinkat(d->dirfd, fin, 0);
        pthread_mutex_unlock(kl);
        goto err;
    }
    stale = index_insert(d, e);
    if (stale)
        unlink_gen(d, o->key, o->key_len, stale);
    /* Cached when it was received into memory; otherwise read from disk,
     * and the version it replaced no longer served from memory. A newer
     * version already indexed (its commit got there first: stale is this
     * one, its file removed above) is what the key holds: this one is not
     * published anywhere, in memory neither (it was, and served over the
     * newer one until evicted or restarted). */
    if (stale == o->generation)
        rio__srv_store_drop(d->store, o);
    else if (o->data)
        rio__srv_store_publish(d->store, o);
    else
        rio__srv_store_published_uncached(d->store, o);
    pthread_mutex_unlock(kl);
    atomic_fetch_add(&d->writes, 1);
    atomic_fetch_add(&d->write_ns, rio__now_ns() - t0);
    j->status = 0;
    return;
err:
    atomic_fetch_add(&d->write_errors, 1);
    SRV_ERR("disk: commit %s/%s (%llu bytes): %s", d->dir, fin, (unsigned long long)o->size,
            rio_strerror(ret));
    rio__srv_dfile_discard(f);
    rio__srv_store_drop(d->store, o);
    j->status = ret;
}

/* --------------------------------------------------------- commit threads */

/* A job queue (the commits', the READs'): head/tail guarded by mu. */
struct jobq {
    pthread_mutex_t *mu;
    pthread_cond_t *cv;
    struct rio_srv_commit **head, **tail;
    int *stop;
};

static struct jobq commit_q(struct rio_srv_disk *d)
{
    return (struct jobq){&d->qmu, &d->qcv, &d->qhead, &d->qtail, &d->qstop};
}

static struct jobq read_q(struct rio_srv_disk *d)
{
    return (struct jobq){&d->rmu, &d->rcv, &d->rhead, &d->rtail, &d->rstop};
}

/* The next job, waiting for one; NULL once stopping and empty. */
static struct rio_srv_commit *jobq_pop(struct jobq q)
{
    struct rio_srv_commit *j;

    pthread_mutex_lock(q.mu);
    while (!*q.head && !*q.stop)
        pthread_cond_wait(q.cv, q.mu);
    j = *q.head;
    if (j) {
        *q.head = j->next;
        if (!*q.head)
            *q.tail = NULL;
        j->next = NULL;
    }
    pthread_mutex_unlock(q.mu);
    return j;
}

static void jobq_push(struct jobq q, struct rio_srv_commit *j)
{
    j->next = NULL;
    pthread_mutex_lock(q.mu);
    if (*q.tail)
        (*q.tail)->next = j;
    else
        *q.head = j;
    *q.tail = j;
    pthread_cond_signal(q.cv);
    pthread_mutex_unlock(q.mu);
}

static void jobq_stop(struct jobq q)
{
    pthread_mutex_lock(q.mu);
    *q.stop = 1;
    pthread_cond_broadcast(q.cv);
    pthread_mutex_unlock(q.mu);
}

/* A pool thread: run each job of q, hand it back, until q stops. */
static void job_loop(struct rio_srv_disk *d, struct jobq q,
                     void (*run)(struct rio_srv_disk *d, struct rio_srv_commit *j))
{
    struct rio_srv_commit *j;

    while ((j = jobq_pop(q))) {
        run(d, j);
        j->done(j);
    }
}

/* A slow disk on purpose (RAILIOD_TEST_DISK_DELAY_MS). */
static void test_delay(const struct rio_srv_disk *d)
{
    struct timespec ts = {.tv_sec = d->delay_ms / 1000,
                          .tv_nsec = (long)(d->delay_ms % 1000) * 1000000L};
    while (d->delay_ms && nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

static void commit_job(struct rio_srv_disk *d, struct rio_srv_commit *j)
{
    test_delay(d);
    rio__srv_disk_commit(d, j);
}

static void *commit_main(void *arg)
{
    job_loop(arg, commit_q(arg), commit_job);
    return NULL;
}

/* A READ job: the range read (and verified) into j->buf. */
static void read_job(struct rio_srv_disk *d, struct rio_srv_commit *j)
{
    test_delay(d);
    j->status = rio__srv_disk_read(d, j->e, j->off, j->len, &j->buf, &j->skip);
    rio__srv_obj_unref(j->e);
    j->e = NULL;
}

static void *read_main(void *arg)
{
    job_loop(arg, read_q(arg), read_job);
    return NULL;
}

void rio__srv_disk_read_submit(struct rio_srv_disk *d, struct rio_srv_commit *j)
{
    jobq_push(read_q(d), j);
}

int rio__srv_disk_pool_start(struct rio_srv_disk *d, unsigned n)
{
    for (unsigned i = 0; i < READ_THREADS; i++) {
        int ret = pthread_create(&d->rthreads[i], NULL, read_main, d);
        if (ret != 0) {
            rio__srv_disk_pool_stop(d);
            return -ret;
        }
        d->nrthreads = i + 1;
    }
    d->threads = rio__calloc(n, sizeof(*d->threads));
    if (!d->threads)
        return -ENOMEM;
    for (unsigned i = 0; i < n; i++) {
        int ret = pthread_create(&d->threads[i], NULL, commit_main, d);
        if (ret != 0) {
            rio__srv_disk_pool_stop(d);
            return -ret;
        }
        d->nthreads = i + 1;
    }
    return 0;
}

void rio__srv_disk_submit(struct rio_srv_disk *d, struct rio_srv_commit *j)
{
    jobq_push(commit_q(d), j);
}

void rio__srv_disk_pool_stop(struct rio_srv_disk *d)
{
    struct rio_srv_commit *j;

    jobq_stop(read_q(d));
    pthread_mutex_lock(&d->rmu); /* READs waiting for room: through */
    pthread_cond_broadcast(&d->bcv);
    pthread_mutex_unlock(&d->rmu);
    for (unsigned i = 0; i < d->nrthreads; i++)
        pthread_join(d->rthreads[i], NULL);
    d->nrthreads = 0;
    jobq_stop(commit_q(d));
    for (unsigned i = 0; i < d->nthreads; i++)
        pthread_join(d->threads[i], NULL);
    d->nthreads = 0;
    rio__free(d->threads);
    d->threads = NULL;
    /* Without threads (none started) what is queued runs here. */
    while ((j = jobq_pop(read_q(d)))) {
        read_job(d, j);
        j->done(j);
    }
    while ((j = jobq_pop(commit_q(d)))) {
        rio__srv_disk_commit(d, j);
        j->done(j);
    }
}

/* ------------------------------------------------------------------ read */

struct rio_srv_obj *rio__srv_disk_get(struct rio_srv_disk *d, const char *key, uint16_t klen)
{
    struct rio_srv_obj *e;

    pthread_mutex_lock(&d->mu);
    e = *slot_locked(d, key, klen);
    if (e)
        atomic_fetch_add_explicit(&e->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&d->mu);
    return e;
}

void rio__srv_disk_list(struct rio_srv_disk *d, struct rio_srv_lister *l)
{
    pthread_mutex_lock(&d->mu);
    rio__srv_list_index_locked(l, &d->index);
    pthread_mutex_unlock(&d->mu);
}

/* A READ's buffer object, freed by rio__srv_disk_read_buf_free. */
struct rbuf {
    struct rio_srv_obj o; /* first */
    struct rio_srv_disk *d;
};

void rio__srv_disk_read_budget(struct rio_srv_disk *d, uint64_t bytes)
{
    pthread_mutex_lock(&d->rmu);
    d->rbudget = bytes;
    pthread_mutex_unlock(&d->rmu);
}

static bool read_room_full_locked(const struct rio_srv_disk *d, uint64_t n)
{
    return d->rbudget && d->rheld && (d->rheld >= d->rbudget || n > d->rbudget - d->rheld);
}

/*
 * Room for n bytes of READ buffer: a READ whose buffer does not fit beside
 * those alive waits for them to be freed (their answers sent, or their
 * connections closed), behind the READs that came before it, so a large
 * one is not passed over by small ones for ever. One buffer alone always
 * fits. Stopping lets everyone through.
 */
static void read_room_take(struct rio_srv_disk *d, uint64_t n)
{
    bool waited = false;

    pthread_mutex_lock(&d->rmu);
    uint64_t t = d->rticket++;
    while (!d->rstop && (t != d->rserving || read_room_full_locked(d, n))) {
        if (!waited) {
            waited = true;
            d->rwaiting++;
            atomic_fetch_add_explicit(&d->read_waits, 1, memory_order_relaxed);
        }
        pthread_cond_wait(&d->bcv, &d->rmu);
    }
    if (waited)
        d->rwaiting--;
    d->rserving++;
    d->rheld += n;
    if (d->rwaiting) /* the next ticket's turn */
        pthread_cond_broadcast(&d->bcv);
    pthread_mutex_unlock(&d->rmu);
}

void rio__srv_disk_read_buf_free(struct rio_srv_obj *b)
{
    struct rbuf *r = (struct rbuf *)b;
    struct rio_srv_disk *d = r->d;

    rio__srv_data_free(b->data, b->size);
    pthread_mutex_lock(&d->rmu);
    d->rheld -= b->charge;
    if (d->rwaiting)
        pthread_cond_broadcast(&d->bcv);
    pthread_mutex_unlock(&d->rmu);
    rio__free(r);
}

int rio__srv_disk_read(struct rio_srv_disk *d, const struct rio_srv_obj *e, uint64_t off,
                       uint64_t len, struct rio_srv_obj **out, uint64_t *skip)
{
    struct rbuf *rb;
    char name[NAME_LEN];
    struct rio_srv_obj *b;
    uint64_t first, last, a, z;
    const char *why;
    int fd, ret;

    *out = NULL;
    *skip = 0;
    if (off > e->size || len > e->size - off)
        return RIO_EPROTO;
    rb = rio__calloc(1, sizeof(*rb));
    if (!rb)
        return -ENOMEM;
    rb->d = d;
    b = &rb->o;
    b->read_buf = 1;
    atomic_init(&b->refs, 1);
    if (len == 0) {
        *out = b;
        return 0;
    }
    /* What the range covers: every chunk it covers whole is verified; one
     * it covers in part is read whole (and verified) when it is small, else
     * only the part (a 1-byte READ of a 64 MiB chunk reads 1 byte). */
    first = off / e->chunk_size;
    last = (off + len - 1) / e->chunk_size;
    a = off;
    z = off + len;
    if (e->chunk_size <= VERIFY_WHOLE_MAX) {
        a = first * e->chunk_size;
        z = e->size - last * e->chunk_size < e->chunk_size ? e->size : (last + 1) * e->chunk_size;
    }
    if (z - a > SIZE_MAX / 2) {
        rio__free(rb);
        return -EFBIG;
    }
    read_room_take(d, z - a);
    b->charge = z - a; /* given back when b is freed, whatever happens next */
    b->size = z - a;
    b->data = rio__srv_data_alloc(z - a);
    if (!b->data) {
        rio__srv_obj_unref(b);
        return -ENOMEM;
    }
    obj_name(name, "o", key_hash(e->key, e->key_len), e->generation, "");
    fd = rec_open(d, name, NULL, &why);
    if (fd < 0) {
        ret = fd;
        if (why) { /* replaced by something that is no record */
            atomic_fetch_add(&d->corrupt, 1);
            SRV_ERR("disk: record %s/%s is %s; not served", d->dir, name, why);
            ret = -EIO;
        } else if (ret == -ENOENT) {
            /* Replaced or deleted since the lookup (a commit indexes its
             * file before the old one goes, a DELETE unindexes before it
             * unlinks). Still indexed at this generation, the file was
             * removed behind railiod's back: said as such, not as a new
             * generation that does not exist. */
            struct rio_srv_obj *now = rio__srv_disk_get(d, e->key, e->key_len);
            ret = !now ? RIO_ENOTFOUND : now->generation != e->generation ? RIO_EGENERATION : -EIO;
            if (ret == -EIO) {
                atomic_fetch_add(&d->corrupt, 1);
                SRV_ERR("disk: record %s/%s is gone (removed outside railiod); not served", d->dir,
                        name);
            }
            ent_unref(now);
        }
        goto err;
    }
    ret = pread_all(fd, b->data, z - a, e->data_off + a);
    close(fd);
    if (ret == -ENODATA) {
        atomic_fetch_add(&d->corrupt, 1);
        SRV_ERR("disk: corrupt record %s/%s: data truncated (read of [%llu, %llu)); not served",
                d->dir, name, (unsigned long long)a, (unsigned long long)z);
        ret = -EIO;
        goto err;
    }
    if (ret < 0) {
        SRV_ERR("disk: read %s/%s: %s; not served", d->dir, name, strerror(-ret));
        goto err;
    }
    for (uint64_t i = first; i <= last; i++) {
        uint64_t cs = i * e->chunk_size;
        uint64_t cl = e->size - cs < e->chunk_size ? e->size - cs : e->chunk_size;
        if (cs < a || cs + cl > z)
            continue; /* read in part: not verified here */
        if (rio__xxh3(b->data + (cs - a), (size_t)cl) != rio__le64_get(e->xxh + 8 * i)) {
            atomic_fetch_add(&d->corrupt, 1);
            SRV_ERR("disk: corrupt record %s/%s: chunk %llu checksum mismatch; not served", d->dir,
                    name, (unsigned long long)i);
            ret = -EIO;
            goto err;
        }
    }
    atomic_fetch_add(&d->reads, 1);
    atomic_fetch_add(&d->read_bytes, len);
    *skip = off - a;
    *out = b;
    return 0;
err:
    atomic_fetch_add(&d->read_errors, 1);
    rio__srv_obj_unref(b);
    return ret;
}

/* ---------------------------------------------------------------- delete */

/* Between the periodic reclaims: the tombstones kept stay within twice
 * those still needed (or TOMB_RECLAIM_MIN), however fast DELETEs come. */
static void reclaim_if_grown(struct rio_srv_disk *d)
{
    uint64_t n;
    bool grown;

    pthread_mutex_lock(&d->mu);
    grown = d->ntombs >= d->tomb_reclaim_at;
    pthread_mutex_unlock(&d->mu);
    if (!grown)
        return;
    rio__srv_disk_reclaim(d);
    pthread_mutex_lock(&d->mu);
    n = d->ntombs * 2;
    d->tomb_reclaim_at = n > TOMB_RECLAIM_MIN ? n : TOMB_RECLAIM_MIN;
    pthread_mutex_unlock(&d->mu);
}

int rio__srv_disk_delete(struct rio_srv_disk *d, const char *key, uint16_t klen, uint64_t if_gen)
{
    pthread_mutex_t *kl = key_lock(d, key, klen);
    struct rio_srv_obj **slot, *e;
    char name[NAME_LEN];
    uint64_t gen;
    int ret = 0, r1, dirty = 0;

    pthread_mutex_lock(kl);
    /* every commit and delete of the key holds kl: this is it */
    uint64_t cur = current_gen(d, key, klen);
    if (if_gen && cur != if_gen) {
        pthread_mutex_unlock(kl);
        return cur ? RIO_EGENERATION : RIO_ENOTFOUND;
    }
    /* Every upload opened before this point loses to this DELETE; if one
     * of them can still commit, a tombstone says so. Not for a key that
     * holds nothing: that DELETE removes nothing an upload could bring
     * back, and such DELETEs (cheap, RIO_ENOTFOUND) each left a tombstone
     * file and its memory for as long as any older upload stayed open. An
     * upload of the key that commits after it creates the key, as in
     * memory. Nor while only uploads of other keys are open: one upload
     * held open kept the tombstone of every DELETE after it, and a client
     * that put and deleted keys meanwhile filled the directory and the
     * memory with them. So tombstones are at most the keys of uploads that
     * can still commit, and a DELETE reclaims first when they grew. */
    reclaim_if_grown(d);
    gen = rio__srv_store_tick(d->store);
    if (cur && rio__srv_store_min_open_key(d->store, key, klen) < gen) {
        ret = tomb_write(d, key, klen, gen);
        if (ret < 0) {
            pthread_mutex_unlock(kl);
            SRV_ERR("disk: delete: tombstone in %s: %s", d->dir, rio_strerror(ret));
            return ret;
        }
        struct tomb *t = tomb_new(key, klen, gen), *old = NULL;
        if (!t) {
            obj_name(name, "d", key_hash(key, klen), gen, "");
            unlinkat(d->dirfd, name, 0);
            pthread_mutex_unlock(kl);
            return -ENOMEM;
        }
        pthread_mutex_lock(&d->mu);
        struct tomb **ts = tomb_slot_locked(d, key, klen);
        old = *ts;
        if (old)
            *ts = old->next;
        else
            d->ntombs++;
        struct tomb **tb = tomb_bucket(d, key, klen);
        t->next = *tb;
        *tb = t;
        pthread_mutex_unlock(&d->mu);
        if (old) {
            tomb_unlink_file(d, old->key, old->key_len, old->gen);
            rio__free(old);
        }
        dirty = 1;
    }
    r1 = rio__srv_store_delete(d->store, key, klen, 0);
    pthread_mutex_lock(&d->mu);
    slot = slot_locked(d, key, klen);
    e = *slot;
    if (e) {
        *slot = e->hnext;
        e->hnext = NULL;
        rio__srv_index_remove(&d->index, e);
        d->nobj--;
        d->bytes -= e->size;
    }
    pthread_mutex_unlock(&d->mu);
    if (e) {
        obj_name(name, "o", key_hash(key, klen), e->generation, "");
        if (unlinkat(d->dirfd, name, 0) < 0 && errno != ENOENT)
            ret = -errno;
        dirty = 1;
    }
    if (!ret && dirty && d->sync && fsync(d->dirfd) < 0)
        ret = -errno;
    pthread_mutex_unlock(kl);
    if (ret)
        SRV_ERR("disk: delete in %s: %s", d->dir, rio_strerror(ret));
    else if (e)
        atomic_fetch_add(&d->deletes, 1);
    ent_unref(e);
    if (ret)
        return ret;
    return e || r1 == 0 ? 0 : RIO_ENOTFOUND;
}

static void tomb_mark(void *arg, const char *key, uint16_t klen, uint64_t open_gen)
{
    struct tomb *t = *tomb_slot_locked(arg, key, klen);

    if (t && open_gen < t->gen)
        t->keep = true;
}

void rio__srv_disk_reclaim(struct rio_srv_disk *d)
{
    struct tomb *gone = NULL;

    pthread_mutex_lock(&d->mu);
    if (!d->ntombs) {
        pthread_mutex_unlock(&d->mu);
        return;
    }
    /* A tombstone is kept while an upload of its key opened before it can
     * still commit; uploads opened later get newer tombstones. (The
     * store's lock is taken under the index's, never the other way.) */
    for (unsigned b = 0; b < TOMB_BUCKETS; b++)
        for (struct tomb *t = d->tombs[b]; t; t = t->next)
            t->keep = false;
    rio__srv_store_each_open(d->store, tomb_mark, d);
    for (unsigned b = 0; b < TOMB_BUCKETS; b++)
        for (struct tomb **pp = &d->tombs[b]; *pp;) {
            struct tomb *t = *pp;
            if (!t->keep) {
                *pp = t->next;
                t->next = gone;
                gone = t;
                d->ntombs--;
            } else {
                pp = &t->next;
            }
        }
    pthread_mutex_unlock(&d->mu);
    while (gone) {
        struct tomb *t = gone;
        gone = t->next;
        SRV_DEBUG("disk: tombstone %llu reclaimed", (unsigned long long)t->gen);
        tomb_unlink_file(d, t->key, t->key_len, t->gen);
        rio__free(t);
    }
}

void rio__srv_disk_stats(struct rio_srv_disk *d, struct rio_srv_disk_stats *st)
{
    pthread_mutex_lock(&d->mu);
    st->objects = d->nobj;
    st->bytes = d->bytes;
    st->tombstones = d->ntombs;
    pthread_mutex_unlock(&d->mu);
    st->writes = atomic_load(&d->writes);
    st->write_errors = atomic_load(&d->write_errors);
    st->write_ns = atomic_load(&d->write_ns);
    st->reads = atomic_load(&d->reads);
    st->read_bytes = atomic_load(&d->read_bytes);
    st->read_errors = atomic_load(&d->read_errors);
    st->deletes = atomic_load(&d->deletes);
    st->corrupt = atomic_load(&d->corrupt);
    st->recovered = atomic_load(&d->recovered);
    st->discarded = atomic_load(&d->discarded);
    st->superseded = atomic_load(&d->superseded);
    st->read_buf_waits = atomic_load(&d->read_waits);
    pthread_mutex_lock(&d->rmu);
    st->read_buf_bytes = d->rheld;
    st->read_buf_waiting = d->rwaiting;
    pthread_mutex_unlock(&d->rmu);
}
