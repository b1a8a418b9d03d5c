/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio cp -r: a local directory to a prefix, a prefix to a local
 * directory, a prefix to a prefix on another backend (or the same), and cp
 * of the objects a wildcard matches. Objects move --jobs at a time, each
 * streamed with a few chunks in flight (memory bounded by jobs x slots x
 * chunk size, whatever the objects' sizes). Keys that would land outside
 * the destination directory ('..', '.', an empty or absolute path: a
 * hostile listing) are refused by name; directories are created beneath the
 * destination one component at a time without following symbolic links.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tree.h"
#include "core/fsname.h"

static const char cp_usage[] =
    "usage: railio cp -r [-q] [-v] [--json] [--jobs N] [--page-size N] SRC DST\n"
    "  SRC and DST: a local directory or URL/PREFIX, at least one a URL. Every key\n"
    "  beneath PREFIX/ (every file beneath the directory) is copied, its path below\n"
    "  the source kept below the destination. URL to URL streams between the two\n"
    "  backends. The last element of SRC may hold wildcards (* ? [...]); then -r is\n"
    "  needed only to take what lies beneath matching prefixes. --jobs N objects move\n"
    "  at once (default 8); a summary line ends the run unless -q.\n";

/* Chunks in flight per object: jobs x this x chunk size bounds the memory. */
#define CP_SLOTS 4
#define CP_BATCH 1000

struct cp_item {
    char *src; /* a key, or a local path */
    char *rel; /* the path below the source, kept below the destination */
    uint64_t size;
    dev_t dev; /* a local file: what the walk found */
    ino_t ino;
};

/* A temporary file an earlier run left in a destination directory. */
struct cp_stale {
    char *dir;  /* the directory below DST ("" for DST itself) */
    char *name; /* ".NAME.railio-tmp-<16 hex digits>" */
};

struct cp_run {
    const struct rio_cli_tree_opts *o;
    struct rio_client *sc, *dc; /* NULL for a local side */
    const char *dprefix;        /* destination key prefix ("" or ending in '/') */
    int ddir;                   /* destination directory fd (local) */
    struct cp_item *items;
    struct timespec t0; /* when the run started (CLOCK_REALTIME) */
    pthread_mutex_t mu;
    /* Under mu: */
    uint64_t done, failed, bytes;
    int first_err;
    struct rio_cli_seen seen; /* the destination directories read for stale temporaries */
    struct cp_stale *stale;
    size_t nstale, stale_cap;
};

/* An object failed: said (with the verb's own why when not NULL) and counted. */
static void cp_fail_why(struct cp_run *r, const char *doing, const char *what, int err,
                        const char *why)
{
    pthread_mutex_lock(&r->mu);
    r->failed++;
    if (!r->first_err)
        r->first_err = err;
    if (why)
        rio_cli_fail_why(&r->o->cl, doing, what, err, why);
    else
        rio_cli_tree_error("cp", r->o, what, err);
    pthread_mutex_unlock(&r->mu);
}

static void cp_fail(struct cp_run *r, const char *what, int err)
{
    cp_fail_why(r, NULL, what, err, NULL);
}

static void cp_ok(struct cp_run *r, const struct cp_item *it, uint64_t n)
{
    pthread_mutex_lock(&r->mu);
    r->done++;
    r->bytes += n;
    if (r->o->json) {
        rio_cli_json_begin(stdout, "copied");
        rio_cli_json_kstr(stdout, "src", it->src);
        rio_cli_json_kstr(stdout, "path", it->rel);
        rio_cli_json_ku64(stdout, "bytes", n);
        rio_cli_json_end(stdout);
    } else if (r->o->verbose) {
        char shown[PATH_MAX + 16]; /* a listed key's escapes as '?' */
        fprintf(stderr, "copied %s (%llu bytes)\n", rio_cli_url_safe(it->src, shown, sizeof(shown)),
                (unsigned long long)n);
    }
    pthread_mutex_unlock(&r->mu);
}

/* The destination key of rel; 0 or RIO_EINVAL when it would be too long. */
static int dst_key(const struct cp_run *r, const char *rel, char *out)
{
    size_t a = strlen(r->dprefix), b = strlen(rel);
    if (a + b > RIO_KEY_MAX || a + b == 0)
        return RIO_EINVAL;
    memcpy(out, r->dprefix, a);
    memcpy(out + a, rel, b + 1);
    return 0;
}

/* ---------------------------------------------------- local -> URL */

/* A local file's bytes for rio_put_stream. */
struct file_src {
    int fd;
    uint64_t got; /* bytes read */
};

static int64_t fd_fill(void *arg, void *buf, size_t cap)
{
    struct file_src *fs = arg;
    for (;;) {
        ssize_t n = read(fs->fd, buf, cap);
        if (n >= 0) {
            fs->got += (uint64_t)n;
            return n;
        }
        if (errno != EINTR)
            return -errno;
    }
}

static void cp_put(void *arg, size_t i)
{
    struct cp_run *r = arg;
    const struct cp_item *it = &r->items[i];
    char key[RIO_KEY_MAX + 1];
    int ret = dst_key(r, it->rel, key);
    if (ret < 0) {
        cp_fail_why(r, NULL, it->src, ret,
                    "its destination key would be empty or longer than 1024 bytes");
        return;
    }
    /* What is read is the file the walk found: a name replaced since (a
     * directory of the path swapped for a link, the file for a FIFO) is
     * refused, not read (a FIFO without O_NONBLOCK blocked the open). */
    int fd = open(it->src, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) < 0) {
        ret = -errno;
        if (fd >= 0)
            close(fd);
        cp_fail(r, it->src, ret);
        return;
    }
    if (!S_ISREG(sb.st_mode) || sb.st_dev != it->dev || sb.st_ino != it->ino) {
        close(fd);
        char what[PATH_MAX + 64];
        snprintf(what, sizeof(what), "%s (not the file the walk found: replaced meanwhile)",
                 it->src);
        cp_fail(r, what, -ESTALE);
        return;
    }
    (void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    struct rio_desc d;
    memset(&d, 0, sizeof(d));
    struct rio_call call = {.cancel = rio_cli_cancel_token()};
    struct file_src fs = {.fd = fd};
    ret = rio_put_stream(r->dc, key, (uint64_t)sb.st_size, CP_SLOTS, fd_fill, &fs, &call, &d);
    close(fd);
    if (ret == RIO_EINVAL && fs.got != (uint64_t)sb.st_size) {
        /* Truncated or appended to while it was read: the file is named. */
        char why[256];
        cp_fail_why(r, "reading", it->src, ret,
                    rio_cli_size_changed(why, sizeof(why), (uint64_t)sb.st_size, fs.got));
        return;
    }
    if (ret < 0) {
        cp_fail(r, key, ret);
        return;
    }
    rio_desc_cleanup(&d);
    cp_ok(r, it, (uint64_t)sb.st_size);
}

/* nftw has no argument for its callback: the walk is single-threaded. */
static struct {
    struct cp_item *v;
    size_t n, cap;
    size_t root_len;
    uint64_t skipped, tmps;
    int err;
} walk;

static int walk_one(const char *path, const struct stat *sb, int type, struct FTW *ftw)
{
    if (type == FTW_DNR || type == FTW_NS) {
        fprintf(stderr, "railio cp: cannot read '%s': %s\n", path, strerror(errno));
        walk.err = -EACCES;
        return 0;
    }
    if (type == FTW_SL || type == FTW_SLN) {
        walk.skipped++; /* not followed: said, not silently left out */
        return 0;
    }
    if (type != FTW_F)
        return 0;
    if (!S_ISREG(sb->st_mode)) {
        walk.skipped++; /* a device, a FIFO, a socket: not an object */
        return 0;
    }
    if (rio_cli_tmp_name(path + ftw->base) || rio_cli_resume_name(path)) {
        /* a download's temporary file, left by a killed cp -r, or an
         * interrupted get's kept bytes and record (a later get resumes) */
        walk.tmps++;
        return 0;
    }
    if (walk.n == walk.cap) {
        size_t nc = walk.cap ? walk.cap * 2 : 256;
        struct cp_item *nv = realloc(walk.v, nc * sizeof(*nv));
        if (!nv)
            return -1;
        walk.v = nv;
        walk.cap = nc;
    }
    struct cp_item *it = &walk.v[walk.n];
    it->src = strdup(path);
    it->rel = it->src ? it->src + walk.root_len : NULL;
    it->size = (uint64_t)sb->st_size;
    it->dev = sb->st_dev;
    it->ino = sb->st_ino;
    if (!it->src)
        return -1;
    while (*it->rel == '/')
        it->rel++;
    walk.n++;
    return 0;
}

static int cp_from_dir(struct cp_run *r, const char *dir)
{
    /* The directory named on the command line is walked even when it is
     * named through a symbolic link (as "DIR/."; links beneath it are not
     * followed): the walk took the link for an entry to skip, copied
     * nothing and exited 0. */
    char top[PATH_MAX];
    struct stat lsb, sb;
    size_t dl = strlen(dir);
    while (dl > 1 && dir[dl - 1] == '/')
        dl--; /* "LINK/" is the link too */
    if (dl + 3 <= sizeof(top)) {
        memcpy(top, dir, dl);
        top[dl] = '\0';
        if (lstat(top, &lsb) == 0 && S_ISLNK(lsb.st_mode) && stat(top, &sb) == 0 &&
            S_ISDIR(sb.st_mode)) {
            memcpy(top + dl, "/.", 3);
            dir = top;
        }
    }
    memset(&walk, 0, sizeof(walk));
    walk.root_len = strlen(dir);
    if (nftw(dir, walk_one, 32, FTW_PHYS) != 0) {
        int e = errno ? -errno : -ENOMEM;
        fprintf(stderr, "railio cp: cannot walk '%s': %s\n", dir, strerror(-e));
        for (size_t i = 0; i < walk.n; i++)
            free(walk.v[i].src);
        free(walk.v);
        return e;
    }
    r->items = walk.v;
    rio_cli_pool_run(r->o->jobs, walk.n, cp_put, r);
    for (size_t i = 0; i < walk.n; i++)
        free(walk.v[i].src);
    free(walk.v);
    r->items = NULL;
    if (walk.skipped && !r->o->quiet)
        fprintf(stderr,
                "railio cp: %llu entries that are not regular files (links, FIFOs, devices) "
                "skipped\n",
                (unsigned long long)walk.skipped);
    if (walk.tmps && !r->o->quiet)
        fprintf(stderr,
                "railio cp: %llu temporary files of interrupted downloads "
                "(.NAME.railio-tmp-<16 hex digits>; NAME.railio-tmp with its "
                "NAME.railio-tmp.resume) skipped\n",
                (unsigned long long)walk.tmps);
    if (walk.err && !r->first_err)
        r->first_err = walk.err;
    return 0;
}

/* ---------------------------------------------------- URL -> local */

/* Whether rel may become a path beneath the destination: relative, no
 * empty, "." or ".." component, each component a valid file name. */
static bool rel_safe(const char *rel)
{
    if (!*rel || *rel == '/')
        return false;
    for (const char *p = rel;;) {
        const char *e = strchr(p, '/');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        if (l == 0 || l > NAME_MAX || (l == 1 && p[0] == '.') ||
            (l == 2 && p[0] == '.' && p[1] == '.'))
            return false;
        if (!e)
            return true;
        p = e + 1;
    }
}

/* The directory of rel beneath ddir, created as needed, never through a
 * symbolic link: an fd, and *name the last component. */
static int open_parent(int ddir, char *rel, const char **name)
{
    int dfd = dup(ddir);
    if (dfd < 0)
        return -errno;
    char *p = rel;
    for (char *e; (e = strchr(p, '/')); p = e + 1) {
        *e = '\0';
        if (mkdirat(dfd, p, 0755) < 0 && errno != EEXIST) {
            int ret = -errno;
            *e = '/';
            close(dfd);
            return ret;
        }
        int nfd = openat(dfd, p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        *e = '/';
        close(dfd);
        if (nfd < 0)
            return -errno;
        dfd = nfd;
    }
    *name = p;
    return dfd;
}

static int sink_fd(void *arg, const void *data, size_t len)
{
    return rio_cli_write_all(*(int *)arg, data, len);
}

/* Note dfd's (the destination directory dir's) temporary files that are
 * older than the run, under r->mu. One of another run still writing is
 * newer: it stays. */
static void stale_scan(struct cp_run *r, int dfd, const char *dir)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    for (struct dirent *e; (e = readdir(d));) {
        struct stat sb;
        if (!rio_cli_tmp_name(e->d_name) || fstatat(dfd, e->d_name, &sb, AT_SYMLINK_NOFOLLOW) < 0 ||
            !S_ISREG(sb.st_mode) || sb.st_mtim.tv_sec > r->t0.tv_sec ||
            (sb.st_mtim.tv_sec == r->t0.tv_sec && sb.st_mtim.tv_nsec >= r->t0.tv_nsec))
            continue;
        if (r->nstale == r->stale_cap) {
            size_t nc = r->stale_cap ? r->stale_cap * 2 : 16;
            struct cp_stale *nv = realloc(r->stale, nc * sizeof(*nv));
            if (!nv)
                break;
            r->stale = nv;
            r->stale_cap = nc;
        }
        struct cp_stale *st = &r->stale[r->nstale];
        st->dir = strdup(dir);
        st->name = strdup(e->d_name);
        if (!st->dir || !st->name) {
            free(st->dir);
            free(st->name);
            break;
        }
        r->nstale++;
    }
    closedir(d);
}

/*
 * Before name is written in dfd (rel's directory): remove the temporary
 * files an earlier run (killed, on a file system without O_TMPFILE) left
 * for that name, and only those. Each destination directory is read once
 * a run, before the run writes into it.
 */
static void stale_sweep(struct cp_run *r, int dfd, const char *rel, const char *name)
{
    char dir[RIO_KEY_MAX + 1];
    size_t dl = name > rel ? (size_t)(name - rel - 1) : 0;
    memcpy(dir, rel, dl);
    dir[dl] = '\0';
    pthread_mutex_lock(&r->mu);
    if (rio_cli_seen_add(&r->seen, dir) == 1)
        stale_scan(r, dfd, dir);
    for (size_t i = 0; i < r->nstale;) {
        struct cp_stale *st = &r->stale[i];
        if (strcmp(st->dir, dir) || !rio_cli_tmp_name_of(st->name, name)) {
            i++;
            continue;
        }
        unlinkat(dfd, st->name, 0);
        free(st->dir);
        free(st->name);
        *st = r->stale[--r->nstale];
    }
    pthread_mutex_unlock(&r->mu);
}

static void stale_cleanup(struct cp_run *r)
{
    rio_cli_seen_cleanup(&r->seen);
    for (size_t i = 0; i < r->nstale; i++) {
        free(r->stale[i].dir);
        free(r->stale[i].name);
    }
    free(r->stale);
}

/*
 * One object into DST/rel: written to a temporary file beside it
 * (rio_cli_tmpfile: unnamed where the file system allows, so that even a
 * kill -9 leaves nothing) and renamed over it once every chunk arrived
 * verified, so a failure leaves no partial file under the object's name.
 */
static void cp_get(void *arg, size_t i)
{
    struct cp_run *r = arg;
    const struct cp_item *it = &r->items[i];
    char rel[RIO_KEY_MAX + 1];
    const char *name = NULL;
    struct rio_cli_tmpfile t;
    snprintf(rel, sizeof(rel), "%s", it->rel);
    int dfd = open_parent(r->ddir, rel, &name);
    if (dfd < 0) {
        cp_fail(r, it->rel, dfd);
        return;
    }
    stale_sweep(r, dfd, rel, name);
    int fd = rio_cli_tmpfile_open(&t, dfd, name, false);
    if (fd < 0) {
        close(dfd);
        cp_fail(r, it->rel, fd);
        return;
    }
    struct rio_call call = {.cancel = rio_cli_cancel_token(),
                            .deadline_ms = rio_cli_deadline(r->sc)};
    int64_t n = rio_get_stream(r->sc, it->src, CP_SLOTS, sink_fd, &fd, &call);
    /* Damaged on the way, past what the engine's retries mend (an object
     * with no chunk checksums, checked whole by its ETag as a reader's,
     * reads no chunk again): fetched once more, over the file from its
     * start, as rio_get reads such an object again. */
    if (n == RIO_ECHECKSUM && ftruncate(fd, 0) == 0 && lseek(fd, 0, SEEK_SET) == 0)
        n = rio_get_stream(r->sc, it->src, CP_SLOTS, sink_fd, &fd, &call);
    int ret = n < 0 ? (int)n : 0;
    if (ret == 0)
        ret = rio_cli_tmpfile_commit(&t, name);
    else
        rio_cli_tmpfile_abort(&t);
    close(dfd);
    if (ret < 0)
        cp_fail(r, it->src, ret);
    else
        cp_ok(r, it, (uint64_t)n);
}

/* ---------------------------------------------------- URL -> URL */

struct reader_src {
    struct rio_reader *rd;
    int err;
};

static int64_t reader_fill(void *arg, void *buf, size_t cap)
{
    struct reader_src *rs = arg;
    int64_t n = rio_reader_read(rs->rd, buf, cap);
    if (n < 0)
        rs->err = (int)n;
    return n;
}

static void cp_url(void *arg, size_t i)
{
    struct cp_run *r = arg;
    const struct cp_item *it = &r->items[i];
    char key[RIO_KEY_MAX + 1];
    int ret = dst_key(r, it->rel, key);
    if (ret < 0) {
        cp_fail_why(r, NULL, it->rel, ret,
                    "its destination key would be empty or longer than 1024 bytes");
        return;
    }
    struct rio_reader *rd;
    struct rio_call call = {.cancel = rio_cli_cancel_token(),
                            .deadline_ms = rio_cli_deadline(r->sc)};
    ret = rio_reader_open(r->sc, it->src, CP_SLOTS, &call, &rd);
    if (ret < 0) {
        cp_fail(r, it->src, ret);
        return;
    }
    uint64_t size = rio_reader_desc(rd)->size;
    struct reader_src rs = {.rd = rd};
    struct rio_desc d;
    memset(&d, 0, sizeof(d));
    ret = rio_put_stream(r->dc, key, size, CP_SLOTS, reader_fill, &rs, &call, &d);
    int gret = rio_reader_close(rd);
    if (rs.err < 0 || (ret == 0 && gret < 0)) {
        cp_fail(r, it->src, rs.err < 0 ? rs.err : gret);
        return;
    }
    if (ret < 0) {
        cp_fail(r, key, ret);
        return;
    }
    rio_desc_cleanup(&d);
    cp_ok(r, it, size);
}

/* ------------------------------------------------------- listing side */

/* Every object the lister yields, CP_BATCH at a time through fn. */
static int cp_listed(struct cp_run *r, struct rio_cli_lister *l, size_t base,
                     void (*fn)(void *, size_t))
{
    struct cp_item *v = calloc(CP_BATCH, sizeof(*v));
    if (!v)
        return -ENOMEM;
    r->items = v;
    const struct rio_entry *e;
    size_t n = 0;
    int ret;
    for (;;) {
        ret = rio_cli_lister_next(l, &e);
        if (ret > 0 && (e->flags & RIO_ENTRY_DIR))
            continue;
        if (ret > 0) {
            const char *rel = e->key + (strlen(e->key) >= base ? base : strlen(e->key));
            if (r->ddir >= 0 && !rel_safe(rel)) {
                /* A key ending in '/' is a directory marker some stores keep. */
                size_t rl = strlen(rel);
                if (!(rl && rel[rl - 1] == '/')) {
                    char what[RIO_KEY_MAX + 128];
                    snprintf(what, sizeof(what),
                             "%s: refused, not a path beneath the destination ('..', '.', an "
                             "empty or absolute element)",
                             e->key);
                    cp_fail(r, what, RIO_EINVAL);
                }
                continue;
            }
            v[n].src = strdup(e->key);
            v[n].rel = v[n].src ? v[n].src + (rel - e->key) : NULL;
            v[n].size = e->size;
            if (!v[n].src) {
                ret = -ENOMEM;
            } else if (++n < CP_BATCH) {
                continue;
            }
        }
        rio_cli_pool_run(r->o->jobs, n, fn, r);
        for (size_t i = 0; i < n; i++)
            free(v[i].src);
        n = 0;
        if (ret <= 0)
            break;
    }
    free(v);
    r->items = NULL;
    return ret;
}

/* ------------------------------------------------------------- command */

/* arg's SCHEME://AUTHORITY (options dropped) into loc and its path, with
 * runs of '/' folded and no trailing '/', into path; false when it does not fit. */
static bool url_loc(const char *arg, char *loc, size_t lcap, char *path, size_t pcap)
{
    const char *sep = strstr(arg, "://");
    const char *q = rio_cli_query_start(sep + 3);
    const char *end = q ? q : arg + strlen(arg);
    const char *p = memchr(sep + 3, '/', (size_t)(end - sep - 3));
    if (!p)
        p = end;
    if ((size_t)(p - arg) >= lcap || (size_t)(end - p) >= pcap)
        return false;
    memcpy(loc, arg, (size_t)(p - arg));
    loc[p - arg] = '\0';
    size_t n = 0;
    for (; p < end; p++)
        if (*p != '/' || !n || path[n - 1] != '/')
            path[n++] = *p;
    while (n && path[n - 1] == '/')
        n--;
    path[n] = '\0';
    return true;
}

/* Whether copying src into dst (both URLs) would write beneath what src
 * lists, so that the listing could meet the copy's own new keys: dst on the
 * same SCHEME://AUTHORITY at src's tree or below it (below the literal
 * part of a recursive pattern). cp(1): "cannot copy a directory into itself". */
static bool cp_into_itself(const char *src, const char *dst, bool recursive)
{
    char sl[1024], dl[1024], sp[RIO_KEY_MAX + 256], dp[RIO_KEY_MAX + 256];
    if (!url_loc(src, sl, sizeof(sl), sp, sizeof(sp)) ||
        !url_loc(dst, dl, sizeof(dl), dp, sizeof(dp)) || strcasecmp(sl, dl))
        return false;
    if (rio_cli_glob_first(sp)) {
        char lit[RIO_KEY_MAX + 256];
        if (!recursive) /* one level: the copy's keys lie a level deeper */
            return false;
        size_t n = rio_cli_glob_prefix(sp, lit, sizeof(lit));
        return n < sizeof(lit) && !strncmp(dp, lit, n);
    }
    size_t n = strlen(sp);
    return !n || (!strncmp(dp, sp, n) && (dp[n] == '\0' || dp[n] == '/'));
}

static int cp_run_it(struct cp_run *r, const char *src, const char *dst, double t0)
{
    const struct rio_cli_tree_opts *o = r->o;
    bool surl = strstr(src, "://") != NULL, durl = strstr(dst, "://") != NULL;
    struct rio_cli_target st, dt;
    char *dprefix = NULL, *tree = NULL;
    int rc = 0, ret = 0;
    memset(&st, 0, sizeof(st));
    memset(&dt, 0, sizeof(dt));
    if (!surl && !durl) {
        fprintf(stderr, "railio cp: neither side is a URL; use cp(1)\n");
        return 2;
    }
    if (surl && durl && cp_into_itself(src, dst, o->recursive)) {
        char s1[1024], s2[1024];
        fprintf(stderr, "railio cp: cannot copy '%s' into itself, '%s'\n",
                rio_cli_url_safe(src, s1, sizeof(s1)), rio_cli_url_safe(dst, s2, sizeof(s2)));
        return 2;
    }
    if (surl && (rc = rio_cli_tree_open("cp", o, src, RIO_CLI_TARGET_DIR, &st, &r->sc)))
        goto out;
    if (surl && !st.glob && !o->recursive) {
        fprintf(stderr, "railio cp: several objects need -r (or a wildcard)\n");
        rc = 2;
        goto out;
    }
    if (durl) {
        /* The destination is a prefix as written: '?' and '*' are its own. */
        if ((rc = rio_cli_tree_open(
                 "cp", o, dst, RIO_CLI_TARGET_DIR | RIO_CLI_TARGET_MKDIR | RIO_CLI_TARGET_LITERAL,
                 &dt, &r->dc)))
            goto out;
        size_t pl = strlen(dt.path);
        if (asprintf(&dprefix, "%s%s", dt.path, pl && dt.path[pl - 1] != '/' ? "/" : "") < 0) {
            dprefix = NULL;
            ret = -ENOMEM;
            goto out;
        }
        r->dprefix = dprefix;
    } else {
        /* Said as every failure is (--json, the exit status of its errno:
         * 4 for a read-only or forbidden place, 3 for a missing parent). */
        if (mkdir(dst, 0755) < 0 && errno != EEXIST) {
            rc = rio_cli_fail_sys(&o->cl, "creating directory", dst, -errno);
            goto out;
        }
        unsigned owner; /* DIR through a link planted in /tmp: not followed */
        if (rio_cli_planted_link(dst, &owner) < 0) {
            rc = rio_cli_planted_dir_refused(&o->cl, dst, owner);
            goto out;
        }
        r->ddir = open(dst, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (r->ddir < 0) {
            rc = rio_cli_fail_sys(&o->cl, "opening directory", dst, -errno);
            goto out;
        }
    }
    if (!surl) {
        struct stat sb;
        int sr = stat(src, &sb) < 0 ? -errno : 0;
        if (sr < 0 && sr != -ENOTDIR) { /* missing (3), forbidden (4) */
            rc = rio_cli_fail_sys(&o->cl, "opening directory", src, sr);
            goto out;
        }
        if (sr < 0 || !S_ISDIR(sb.st_mode)) {
            fprintf(stderr, "railio cp: '%s' is not a directory (cp -r copies a tree)\n", src);
            rc = 2;
            goto out;
        }
        ret = cp_from_dir(r, src);
    } else {
        /* What is copied keeps its path below the listed directory: below
         * PREFIX/ for a tree, below the pattern's directory for a wildcard. */
        size_t pl = strlen(st.path), base;
        if (st.glob) {
            const char *s = strrchr(st.path, '/');
            base = s ? (size_t)(s - st.path + 1) : 0;
        } else if (pl && st.path[pl - 1] != '/') {
            if (asprintf(&tree, "%s/", st.path) < 0) {
                tree = NULL;
                ret = -ENOMEM;
                goto out;
            }
            base = pl + 1;
        } else {
            base = pl;
        }
        struct rio_cli_lister l = {.c = r->sc,
                                   .prefix = tree ? tree : st.prefix,
                                   .pattern = st.glob ? st.path : NULL,
                                   .recursive = o->recursive,
                                   .max_keys = o->page_size};
        ret = cp_listed(r, &l, base, durl ? cp_url : cp_get);
        if (ret == 0 && st.glob && !l.matched)
            ret = RIO_ENOTFOUND; /* a wildcard that matches nothing */
        rio_cli_lister_cleanup(&l);
    }
out:
    if (ret < 0) {
        char shown[1024];
        rio_cli_tree_error("cp", o, rio_cli_url_safe(src, shown, sizeof(shown)), ret);
        if (!r->first_err)
            r->first_err = ret;
    }
    if (!rc) {
        double el = rio_cli_now_s() - t0;
        if (o->json) {
            rio_cli_json_begin(stdout, "cp_summary");
            rio_cli_json_ku64(stdout, "copied", r->done);
            rio_cli_json_ku64(stdout, "failed", r->failed);
            rio_cli_json_ku64(stdout, "bytes", r->bytes);
            fprintf(stdout, ",\"seconds\":%.3f", el);
            rio_cli_json_end(stdout);
        } else if (!o->quiet)
            /* The walk's own failure (a listing refused) is no object's:
             * "0 failed" beside exit 1 read as a contradiction. */
            fprintf(stderr, "cp: %llu objects, %llu bytes in %.2f s (%.1f MB/s), %llu failed%s\n",
                    (unsigned long long)r->done, (unsigned long long)r->bytes, el,
                    el > 0 ? (double)r->bytes / el / 1e6 : 0.0, (unsigned long long)r->failed,
                    ret < 0 ? ", the walk stopped (above)" : "");
        rc = r->first_err ? rio_cli_tree_exit(r->first_err) : 0;
    }
    if (r->ddir >= 0)
        close(r->ddir);
    rio_client_destroy(r->sc);
    rio_client_destroy(r->dc);
    rio_cli_target_cleanup(&st);
    rio_cli_target_cleanup(&dt);
    stale_cleanup(r);
    free(dprefix);
    free(tree);
    return rc;
}

int rio_cli_cp_tree(int argc, char **argv)
{
    struct rio_cli_tree_opts o;
    int rc = rio_cli_tree_opts_parse("cp", argc, argv, &o, cp_usage, 2);
    if (rc >= 0)
        return rc;
    if (o.npos != 2) {
        fprintf(stderr, "railio cp: one source and one destination\n");
        return 2;
    }
    struct cp_run r = {.o = &o, .ddir = -1, .dprefix = "", .mu = PTHREAD_MUTEX_INITIALIZER};
    clock_gettime(CLOCK_REALTIME, &r.t0);
    return cp_run_it(&r, o.pos[0], o.pos[1], rio_cli_now_s());
}

/* Whether path quotes a wildcard character ('a\?b', 'a\*', 'a\\b'): a
 * pattern naming one key, which the tree's verbs take with its quoting
 * off (tree.c); a backslash before anything else stays part of the key,
 * as the single-object verbs take it. */
static bool glob_quoted(const char *path)
{
    for (const char *p = path; *p; p++)
        if (*p == '\\' && p[1]) {
            if (strchr("*?[\\", p[1]))
                return true;
            p++;
        }
    return false;
}

bool rio_cli_tree_wants(const char *cmd, int argc, char **argv)
{
    int npos = 0;
    bool glob = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            break;
        if (!strcmp(a, "--recursive") || (a[0] == '-' && a[1] != '-' && strchr(a, 'r')))
            return true; /* -r, or bundled: -rq */
        /* rm --if-generation is the tree's (one key or several): its
         * "=G" form left one operand, and the one-key rm knows no such
         * option. */
        if (!strcmp(cmd, "rm") && !strncmp(a, "--if-generation", 15) && (!a[15] || a[15] == '='))
            return true;
        if (a[0] == '-' && a[1])
            continue;
        npos++;
        const char *sep = strstr(a, "://");
        /* cp's destination is never a pattern: a '?' in its key is the
         * key's ('cp URL/a URL/b?c' copies one object to "b?c"). */
        if (!sep || (!strcmp(cmd, "cp") && npos > 1))
            continue;
        const char *q = rio_cli_query_start(sep + 3);
        char path[RIO_KEY_MAX + 256];
        snprintf(path, sizeof(path), "%.*s", q ? (int)(q - sep - 3) : (int)strlen(sep + 3),
                 sep + 3);
        if (rio_cli_glob_first(path) || glob_quoted(path))
            glob = true;
    }
    return glob || (!strcmp(cmd, "rm") && npos > 1);
}
