/*
 * The disk tier of railiod (docs/server.md, "Disk tier").
 *
 * One file per object version in the data directory, named by the key's
 * xxh3 and the generation: "o-KEYHASH-GEN" (16 hex digits each). The file is
 * a header, zero padding up to data_off (a multiple of 4096), then the
 * object's bytes. The header (little endian):
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
 * A PUT is written to "t-KEYHASH-GEN.tmp", fsynced (--sync), renamed to its
 * final name, and the directory fsynced (--sync) before the commit is
 * answered: a file with the final name is always complete. Start-up removes
 * temporary files, checks every header (magic, checksum, geometry, the file
 * size against data_off + size, the name against the key and generation),
 * keeps the highest generation of each key and removes older ones, and
 * renames a file that fails a check to NAME.corrupt (logged and counted).
 * Data bytes are verified against the chunk checksums whenever they are
 * read, so a flipped data byte is never served either.
 *
 * Plain POSIX I/O (pwrite/pread/fsync) in the worker that handles the
 * commit or read, not the io_uring file transport: a commit waits for its
 * fsyncs anyway, and this keeps the server free of the engine's machinery.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "server/server.h"

#include "railio.h"

#define MAGIC "RIOOBJ1\n"
#define HDR_FIXED 88u
#define ALIGN 4096u
#define NAME_LEN 40 /* "o-" 16 "-" 16 ".tmp" NUL, rounded up */

struct rio_srv_disk {
    char *dir;
    int dirfd;
    int sync;
    uint64_t max_chunks;
    pthread_mutex_t mu;  /* the index */
    pthread_mutex_t pub; /* rio__srv_disk_lock */
    struct rio_srv_obj **tab;
    size_t tab_mask, nobj;
    uint64_t bytes;
    _Atomic uint64_t writes, write_errors, write_ns, reads, read_bytes, read_errors, deletes;
    _Atomic uint64_t corrupt, recovered, discarded, superseded;
};

static void put64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t key_hash(const char *key, uint16_t klen)
{
    return rio__xxh3(key, klen);
}

static void obj_name(char *out, const char *pfx, uint64_t kh, uint64_t gen, const char *sfx)
{
    snprintf(out, NAME_LEN, "%s-%016" PRIx64 "-%016" PRIx64 "%s", pfx, kh, gen, sfx);
}

/* Header length for a key and chunk count; 0 when it would not fit. */
static uint64_t header_len(uint64_t key_len, uint64_t nchunks, uint64_t max_chunks)
{
    if (key_len == 0 || key_len > RIO_KEY_MAX || nchunks > max_chunks)
        return 0;
    return HDR_FIXED + key_len + nchunks * 8 + 8;
}

static uint64_t round_up(uint64_t v)
{
    return (v + ALIGN - 1) / ALIGN * ALIGN;
}

static int pwrite_all(int fd, const uint8_t *p, uint64_t n, uint64_t off)
{
    while (n) {
        size_t want = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t w = pwrite(fd, p, want, (off_t)off);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (w == 0)
            return -EIO;
        p += w;
        n -= (uint64_t)w;
        off += (uint64_t)w;
    }
    return 0;
}

/* 0, -EIO at end of file (a short file), or -errno. */
static int pread_all(int fd, uint8_t *p, uint64_t n, uint64_t off)
{
    while (n) {
        size_t want = n > (1u << 30) ? (1u << 30) : (size_t)n;
        ssize_t r = pread(fd, p, want, (off_t)off);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        if (r == 0)
            return -EIO;
        p += r;
        n -= (uint64_t)r;
        off += (uint64_t)r;
    }
    return 0;
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
    struct rio_srv_obj **pp = &d->tab[key_hash(key, klen) & d->tab_mask];
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->key_len == klen && memcmp((*pp)->key, key, klen) == 0)
            break;
    return pp;
}

static void grow_locked(struct rio_srv_disk *d)
{
    size_t nsize = (d->tab_mask + 1) * 2;
    struct rio_srv_obj **nt;

    if (d->nobj < 2 * (d->tab_mask + 1) || nsize > ((size_t)1 << 28))
        return;
    nt = rio__calloc(nsize, sizeof(*nt));
    if (!nt)
        return;
    for (size_t i = 0; i <= d->tab_mask; i++) {
        struct rio_srv_obj *o = d->tab[i], *n;
        for (; o; o = n) {
            n = o->hnext;
            size_t b = key_hash(o->key, o->key_len) & (nsize - 1);
            o->hnext = nt[b];
            nt[b] = o;
        }
    }
    rio__free(d->tab);
    d->tab = nt;
    d->tab_mask = nsize - 1;
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
        d->nobj--;
        d->bytes -= old->size;
        stale = old->generation;
        slot = slot_locked(d, e->key, e->key_len);
    }
    e->hnext = *slot;
    *slot = e;
    d->nobj++;
    d->bytes += e->size;
    grow_locked(d);
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

static void unlink_gen(struct rio_srv_disk *d, const char *key, uint16_t klen, uint64_t gen)
{
    char name[NAME_LEN];

    obj_name(name, "o", key_hash(key, klen), gen, "");
    if (unlinkat(d->dirfd, name, 0) < 0 && errno != ENOENT)
        SRV_WARN("disk: unlink %s/%s: %s", d->dir, name, strerror(errno));
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

/* Parse and check one object file; 0 and *out, or a reason (logged). */
static int recover_one(struct rio_srv_disk *d, const char *name, uint64_t name_kh,
                       uint64_t name_gen, struct rio_srv_obj **out)
{
    uint8_t fixed[HDR_FIXED], *hdr = NULL;
    const char *why = NULL;
    struct stat st;
    uint64_t hlen, gen, size, chunk, nchunks, data_off;
    uint16_t klen;
    int fd, ret;

    *out = NULL;
    fd = openat(d->dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        SRV_WARN("disk: open %s/%s: %s", d->dir, name, strerror(errno));
        return -errno;
    }
    if (fstat(fd, &st) < 0) {
        ret = -errno;
        close(fd);
        return ret;
    }
    ret = pread_all(fd, fixed, HDR_FIXED, 0);
    if (ret == -EIO) {
        why = "shorter than a header";
        goto bad;
    }
    if (ret < 0)
        goto out;
    if (memcmp(fixed, MAGIC, 8) != 0) {
        why = "bad magic";
        goto bad;
    }
    klen = (uint16_t)(fixed[12] | fixed[13] << 8);
    gen = get64(fixed + 16);
    size = get64(fixed + 24);
    chunk = get64(fixed + 32);
    nchunks = get64(fixed + 40);
    data_off = get64(fixed + 48);
    hlen = header_len(klen, nchunks, d->max_chunks);
    /* Bounded by the file itself before anything is allocated for it. */
    if (!hlen || get32(fixed + 8) != hlen || hlen > (uint64_t)st.st_size) {
        why = "bad header length";
        goto bad;
    }
    hdr = rio__malloc((size_t)hlen);
    if (!hdr) {
        ret = -ENOMEM;
        goto out;
    }
    ret = pread_all(fd, hdr, hlen, 0);
    if (ret == -EIO) {
        why = "truncated header";
        goto bad;
    }
    if (ret < 0)
        goto out;
    if (rio__xxh3(hdr, (size_t)hlen - 8) != get64(hdr + hlen - 8)) {
        why = "header checksum mismatch";
        goto bad;
    }
    /* The checksum holds: the rest is the writer's word, but check anyway. */
    if (chunk == 0 || (size ? (size - 1) / chunk + 1 : 0) != nchunks ||
        data_off != round_up(hlen) || size > UINT64_MAX - data_off) {
        why = "bad geometry";
        goto bad;
    }
    if ((uint64_t)st.st_size != data_off + size) {
        why = (uint64_t)st.st_size < data_off + size ? "data truncated" : "trailing bytes";
        goto bad;
    }
    if (gen != name_gen || key_hash((const char *)hdr + HDR_FIXED, klen) != name_kh) {
        why = "name does not match the header";
        goto bad;
    }
    *out = ent_new((const char *)hdr + HDR_FIXED, klen, gen, size, chunk, nchunks,
                   (const char *)fixed + 56, hdr + HDR_FIXED + klen, data_off);
    ret = *out ? 0 : -ENOMEM;
    goto out;
bad:
    quarantine(d, name, why);
    ret = RIO_ECHECKSUM;
out:
    rio__free(hdr);
    close(fd);
    return ret;
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
    while ((de = readdir(dir)) != NULL) {
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
        if (n[0] != 'o' || sscanf(n, "o-%16llx-%16llx%n", &kh, &gen, &used) != 2 ||
            n[used] != '\0' || strlen(n) != 35)
            continue;
        struct rio_srv_obj *e = NULL;
        int r = recover_one(d, n, kh, gen, &e);
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
    return ret;
}

int rio__srv_disk_open(struct rio_srv_disk **out, const char *dir, int sync, uint64_t max_chunks,
                       uint64_t *max_gen)
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
    d->max_chunks = max_chunks;
    d->tab_mask = 1023;
    d->dir = rio__strdup(dir);
    d->tab = rio__calloc(d->tab_mask + 1, sizeof(*d->tab));
    if (!d->dir || !d->tab) {
        ret = -ENOMEM;
        goto err;
    }
    if (mkdir(dir, 0755) < 0 && errno != EEXIST) {
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
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->pub, NULL);
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
    rio__free(d->tab);
    rio__free(d->dir);
    rio__free(d);
    return ret;
}

void rio__srv_disk_close(struct rio_srv_disk *d)
{
    if (!d)
        return;
    for (size_t i = 0; i <= d->tab_mask; i++) {
        struct rio_srv_obj *e = d->tab[i], *n;
        for (; e; e = n) {
            n = e->hnext;
            ent_unref(e);
        }
    }
    pthread_mutex_destroy(&d->mu);
    pthread_mutex_destroy(&d->pub);
    close(d->dirfd);
    rio__free(d->tab);
    rio__free(d->dir);
    rio__free(d);
}

void rio__srv_disk_lock(struct rio_srv_disk *d)
{
    pthread_mutex_lock(&d->pub);
}

void rio__srv_disk_unlock(struct rio_srv_disk *d)
{
    pthread_mutex_unlock(&d->pub);
}

/* ----------------------------------------------------------------- write */

int rio__srv_disk_put(struct rio_srv_disk *d, const struct rio_srv_obj *o)
{
    char tmp[NAME_LEN], fin[NAME_LEN];
    uint64_t kh = key_hash(o->key, o->key_len);
    uint64_t hlen = header_len(o->key_len, o->nchunks, d->max_chunks), data_off;
    uint64_t t0 = rio__now_ns(), stale;
    struct rio_srv_obj *e = NULL;
    uint8_t *hdr = NULL;
    int fd = -1, ret;

    if (!hlen)
        return RIO_EINVAL;
    data_off = round_up(hlen);
    hdr = rio__calloc(1, (size_t)data_off);
    if (!hdr)
        return -ENOMEM;
    memcpy(hdr, MAGIC, 8);
    put32(hdr + 8, (uint32_t)hlen);
    hdr[12] = (uint8_t)o->key_len;
    hdr[13] = (uint8_t)(o->key_len >> 8);
    put64(hdr + 16, o->generation);
    put64(hdr + 24, o->size);
    put64(hdr + 32, o->chunk_size);
    put64(hdr + 40, o->nchunks);
    put64(hdr + 48, data_off);
    memcpy(hdr + 56, o->etag, 32);
    memcpy(hdr + HDR_FIXED, o->key, o->key_len);
    if (o->nchunks)
        memcpy(hdr + HDR_FIXED + o->key_len, o->xxh, (size_t)o->nchunks * 8);
    put64(hdr + hlen - 8, rio__xxh3(hdr, (size_t)hlen - 8));

    obj_name(tmp, "t", kh, o->generation, ".tmp");
    obj_name(fin, "o", kh, o->generation, "");
    fd = openat(d->dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) {
        ret = -errno;
        goto err;
    }
    ret = pwrite_all(fd, hdr, data_off, 0);
    if (!ret && o->size)
        ret = pwrite_all(fd, o->data, o->size, data_off);
    if (!ret && d->sync && fsync(fd) < 0)
        ret = -errno;
    if (close(fd) < 0 && !ret)
        ret = -errno;
    fd = -1;
    if (ret)
        goto err_unlink;
    if (renameat(d->dirfd, tmp, d->dirfd, fin) < 0) {
        ret = -errno;
        goto err_unlink;
    }
    if (d->sync && fsync(d->dirfd) < 0) {
        /* The rename may or may not be durable: the PUT is not acknowledged,
         * and the file is removed (a restart that finds it anyway serves a
         * complete, unacknowledged version, which is allowed). */
        ret = -errno;
        unlinkat(d->dirfd, fin, 0);
        goto err;
    }
    e = ent_new(o->key, o->key_len, o->generation, o->size, o->chunk_size, o->nchunks, o->etag,
                o->xxh, data_off);
    if (!e) {
        ret = -ENOMEM;
        unlinkat(d->dirfd, fin, 0);
        goto err;
    }
    stale = index_insert(d, e);
    if (stale)
        unlink_gen(d, o->key, o->key_len, stale);
    rio__free(hdr);
    atomic_fetch_add(&d->writes, 1);
    atomic_fetch_add(&d->write_ns, rio__now_ns() - t0);
    return 0;
err_unlink:
    unlinkat(d->dirfd, tmp, 0);
err:
    rio__free(hdr);
    atomic_fetch_add(&d->write_errors, 1);
    SRV_ERR("disk: write %s/%s (%llu bytes): %s", d->dir, fin, (unsigned long long)o->size,
            rio_strerror(ret));
    return ret;
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

int rio__srv_disk_read(struct rio_srv_disk *d, const struct rio_srv_obj *e, uint64_t off,
                       uint64_t len, struct rio_srv_obj **out, uint64_t *skip)
{
    char name[NAME_LEN];
    struct rio_srv_obj *b;
    uint64_t first, last, a, z;
    int fd, ret;

    *out = NULL;
    *skip = 0;
    if (off > e->size || len > e->size - off)
        return RIO_EPROTO;
    b = rio__calloc(1, sizeof(*b));
    if (!b)
        return -ENOMEM;
    atomic_init(&b->refs, 1);
    if (len == 0) {
        *out = b;
        return 0;
    }
    /* Whole chunks, so that each can be checked against its checksum. */
    first = off / e->chunk_size;
    last = (off + len - 1) / e->chunk_size;
    a = first * e->chunk_size;
    z = last * e->chunk_size + (e->size - last * e->chunk_size < e->chunk_size
                                    ? e->size - last * e->chunk_size
                                    : e->chunk_size);
    if (z - a > SIZE_MAX / 2) {
        rio__free(b);
        return -EFBIG;
    }
    b->size = z - a;
    b->data = rio__alloc_aligned(0, (size_t)(z - a));
    if (!b->data) {
        rio__free(b);
        return -ENOMEM;
    }
    obj_name(name, "o", key_hash(e->key, e->key_len), e->generation, "");
    fd = openat(d->dirfd, name, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        ret = -errno;
        if (ret == -ENOENT) {
            /* Replaced or deleted since the lookup. */
            struct rio_srv_obj *now = rio__srv_disk_get(d, e->key, e->key_len);
            ret = now ? RIO_EGENERATION : RIO_ENOTFOUND;
            ent_unref(now);
        }
        goto err;
    }
    ret = pread_all(fd, b->data, z - a, e->data_off + a);
    close(fd);
    if (ret == -EIO) {
        atomic_fetch_add(&d->corrupt, 1);
        SRV_ERR("disk: corrupt record %s/%s: data truncated (read of [%llu, %llu)); not served",
                d->dir, name, (unsigned long long)a, (unsigned long long)z);
        goto err;
    }
    if (ret < 0)
        goto err;
    for (uint64_t i = first; i <= last; i++) {
        uint64_t co = i * e->chunk_size - a;
        uint64_t cl = e->size - i * e->chunk_size < e->chunk_size ? e->size - i * e->chunk_size
                                                                  : e->chunk_size;
        if (rio__xxh3(b->data + co, (size_t)cl) != get64(e->xxh + 8 * i)) {
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

int rio__srv_disk_delete(struct rio_srv_disk *d, const char *key, uint16_t klen)
{
    struct rio_srv_obj **slot, *e;
    char name[NAME_LEN];
    int ret = 0;

    pthread_mutex_lock(&d->mu);
    slot = slot_locked(d, key, klen);
    e = *slot;
    if (e) {
        *slot = e->hnext;
        e->hnext = NULL;
        d->nobj--;
        d->bytes -= e->size;
    }
    pthread_mutex_unlock(&d->mu);
    if (!e)
        return RIO_ENOTFOUND;
    obj_name(name, "o", key_hash(key, klen), e->generation, "");
    if (unlinkat(d->dirfd, name, 0) < 0 && errno != ENOENT)
        ret = -errno;
    else if (d->sync && fsync(d->dirfd) < 0)
        ret = -errno;
    if (ret)
        SRV_ERR("disk: delete %s/%s: %s", d->dir, name, strerror(-ret));
    else
        atomic_fetch_add(&d->deletes, 1);
    ent_unref(e);
    return ret;
}

void rio__srv_disk_stats(struct rio_srv_disk *d, struct rio_srv_disk_stats *st)
{
    pthread_mutex_lock(&d->mu);
    st->objects = d->nobj;
    st->bytes = d->bytes;
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
}
