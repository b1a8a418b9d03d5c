/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio put / get / stat / rm: one object between a backend and a file or
 * stdin/stdout. The argument is SCHEME://AUTHORITY/KEY[?options]: the key is
 * the path, the client is opened on SCHEME://AUTHORITY[?options].
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/fsname.h"
#include "core/key.h"
#include "core/stream.h"
#include "railio.h"

double rio_cli_verify_gbps_core(const struct rio_stats *st)
{
    return st->verify_cpu_ns ? (double)st->verify_bytes / (double)st->verify_cpu_ns : 0;
}

void rio_cli_print_stats(FILE *f, const struct rio_stats *st)
{
    fprintf(f,
            "%.1f MB/s, %llu bytes in %.3f s, %llu chunks, p50 %.2f ms, p99 %.2f ms, "
            "retries %llu\n",
            st->goodput_mbps, (unsigned long long)st->bytes, st->elapsed_ns / 1e9,
            (unsigned long long)st->chunks, st->lat_p50_ns / 1e6, st->lat_p99_ns / 1e6,
            (unsigned long long)st->retries_total);
    for (unsigned i = 0; i < st->npaths; i++)
        fprintf(f, "  path %u: %llu bytes, %.1f MB/s busy-rate, %llu errors\n", i,
                (unsigned long long)st->path[i].bytes, st->path[i].rate_mbps,
                (unsigned long long)st->path[i].errors);
    if (st->verify_bytes)
        fprintf(f, "verify: %llu bytes, %.1f ms CPU on the client's workers, %.2f GB/s per core\n",
                (unsigned long long)st->verify_bytes, st->verify_cpu_ns / 1e6,
                rio_cli_verify_gbps_core(st));
    if (st->sink_ns || st->source_ns)
        fprintf(f, "destination %.1f ms, source %.1f ms of the caller's time\n", st->sink_ns / 1e6,
                st->source_ns / 1e6);
    fprintf(f, "verdict: %s: %s\n", rio_verdict_name(st->verdict), st->verdict_text);
}

void rio_cli_json_stats(FILE *f, const struct rio_stats *st)
{
    fprintf(
        f,
        "{\"bytes\":%llu,\"elapsed_ns\":%llu,\"goodput_mbps\":%.1f,\"chunks\":%llu,"
        "\"lat_ns\":{\"p50\":%llu,\"p95\":%llu,\"p99\":%llu,\"max\":%llu},"
        "\"first_done_ns\":%llu,\"last_done_ns\":%llu,\"peak_inflight_bytes\":%llu,"
        "\"bytes_staged\":%llu,\"hash_ns\":%llu,\"verify_ns\":%llu,\"copy_ns\":%llu,"
        "\"verify_bytes\":%llu,\"verify_cpu_ns\":%llu,\"verify_gbps_per_core\":%.2f,"
        "\"cpu_ns\":{\"engine\":%llu,\"transport\":%llu,\"caller\":%llu,\"run_queue_wait\":%llu},"
        "\"sink_ns\":%llu,\"source_ns\":%llu,\"retries\":{",
        (unsigned long long)st->bytes, (unsigned long long)st->elapsed_ns, st->goodput_mbps,
        (unsigned long long)st->chunks, (unsigned long long)st->lat_p50_ns,
        (unsigned long long)st->lat_p95_ns, (unsigned long long)st->lat_p99_ns,
        (unsigned long long)st->lat_max_ns, (unsigned long long)st->first_done_ns,
        (unsigned long long)st->last_done_ns, (unsigned long long)st->peak_inflight_bytes,
        (unsigned long long)st->bytes_staged, (unsigned long long)st->hash_ns,
        (unsigned long long)st->verify_ns, (unsigned long long)st->copy_ns,
        (unsigned long long)st->verify_bytes, (unsigned long long)st->verify_cpu_ns,
        rio_cli_verify_gbps_core(st), (unsigned long long)st->engine_cpu_ns,
        (unsigned long long)st->transport_cpu_ns, (unsigned long long)st->caller_cpu_ns,
        (unsigned long long)st->cpu_wait_ns, (unsigned long long)st->sink_ns,
        (unsigned long long)st->source_ns);
    for (int k = 0; k < RIO_CLASS__COUNT; k++)
        fprintf(f, "%s\"%s\":%llu", k ? "," : "", rio_class_name(k),
                (unsigned long long)st->retries[k]);
    fprintf(f, "},\"paths\":[");
    for (unsigned i = 0; i < st->npaths; i++)
        fprintf(f,
                "%s{\"bytes\":%llu,\"busy_ns\":%llu,\"ops\":%llu,\"errors\":%llu,"
                "\"rate_mbps\":%.1f,\"cap_mbps\":%.1f,\"peak_depth\":%llu}",
                i ? "," : "", (unsigned long long)st->path[i].bytes,
                (unsigned long long)st->path[i].busy_ns, (unsigned long long)st->path[i].ops,
                (unsigned long long)st->path[i].errors, st->path[i].rate_mbps, st->path[i].cap_mbps,
                (unsigned long long)st->path[i].peak_depth);
    static const char *const adapt_state[] = {"off", "growing", "settled", "ceiling"};
    fprintf(f,
            "],\"adapt\":{\"state\":\"%s\",\"paths\":%u,\"depth\":%u,\"next_pct\":%d},"
            "\"verdict\":\"%s\",\"verdict_text\":",
            st->adapt_state >= 0 && st->adapt_state <= RIO_ADAPT_CEILING
                ? adapt_state[st->adapt_state]
                : "?",
            st->adapt_paths, st->adapt_depth, st->adapt_next_pct, rio_verdict_name(st->verdict));
    rio_cli_json_str(f, st->verdict_text);
    fputc('}', f);
}

static int read_all(int fd, uint8_t **out, size_t *len)
{
    size_t cap = 1 << 20, n = 0;
    uint8_t *b = malloc(cap);
    if (!b)
        return -ENOMEM;
    for (;;) {
        if (n == cap) {
            uint8_t *nb = realloc(b, cap * 2);
            if (!nb) {
                free(b);
                return -ENOMEM;
            }
            b = nb;
            cap *= 2;
        }
        int w = rio_cli_wait_readable(fd); /* a signal ends the wait */
        ssize_t r = w < 0 ? -1 : read(fd, b + n, cap - n);
        if (w < 0)
            errno = w == RIO_ECANCELED ? ECANCELED : -w;
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = errno == ECANCELED ? RIO_ECANCELED : -errno;
            free(b);
            return e;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    *out = b;
    *len = n;
    return 0;
}

/* A streaming PUT's source: read(2) from a pipe, a socket or stdin, until
 * a signal interrupts the command (then RIO_ECANCELED: the upload is
 * dropped). */
struct fd_src {
    int fd;
    uint64_t got; /* bytes read */
    struct rio_cli_progress pr;
};

static int64_t fd_fill(void *arg, void *buf, size_t cap)
{
    struct fd_src *fs = arg;
    int ret = rio_cli_wait_readable(fs->fd);
    if (ret < 0)
        return ret;
    for (;;) {
        ssize_t r = read(fs->fd, buf, cap);
        if (r >= 0) {
            fs->got += (uint64_t)r;
            rio_cli_progress_feed(&fs->pr, (uint64_t)r, RIO_SIZE_UNKNOWN);
            return r;
        }
        if (errno != EINTR)
            return -errno;
    }
}

/* The last path element of s ("" when s ends with '/'). */
static const char *base_name(const char *s)
{
    const char *slash = strrchr(s, '/');
    return slash ? slash + 1 : s;
}

/* key, or key + the basename of file when key is a "directory" (empty or
 * ending in '/'), as cp(1) and aws s3 cp do: malloc'd, NULL when out of
 * memory or when the name cannot be had (file "-"). */
static char *dest_key(const char *key, const char *file)
{
    char *out;
    size_t kl = strlen(key);
    if (kl && key[kl - 1] != '/')
        return strdup(key);
    const char *b = base_name(file);
    if (!strcmp(file, "-") || !*b || !strcmp(b, ".") || !strcmp(b, ".."))
        return NULL;
    if (asprintf(&out, "%s%s", key, b) < 0)
        return NULL;
    return out;
}

/* One transfer's result object: {"schema":...,"type":TYPE,"url":URL,...}. */
static void json_head(FILE *f, const char *type, const char *url)
{
    char shown[1024];
    rio_cli_json_begin(f, type);
    rio_cli_json_kstr(f, "url", rio_cli_url_safe(url, shown, sizeof(shown)));
}

/* d's members; key when d names none (a backend that does not echo it). */
static void json_desc(FILE *f, const struct rio_desc *d, const char *key)
{
    rio_cli_json_kstr(f, "key", d->key[0] ? d->key : key);
    rio_cli_json_kgen(f, "generation", d->generation);
    rio_cli_json_ku64(f, "size", d->size);
    rio_cli_json_kstr(f, "etag", d->etag);
}

/* put --if-absent, --if-generation G (parsed in rio_cli_objects): the
 * PUT's condition, into call. */
static int put_if_absent;
static uint64_t put_if_gen;

static void put_condition(struct rio_call *call)
{
    if (put_if_absent)
        call->flags |= RIO_IF_ABSENT;
    call->expect_generation = put_if_gen;
}

/* A PUT's outcome; the exit status. */
static int put_done(const struct rio_cli *cl, const char *url, const char *key, int ret,
                    struct rio_desc *d, const struct rio_stats *st)
{
    if (ret == RIO_EGENERATION && (put_if_absent || put_if_gen))
        return rio_cli_fail_why(cl, "writing", url, ret,
                                put_if_absent
                                    ? "--if-absent: the key holds an object; nothing written"
                                    : "--if-generation: the key's object is another "
                                      "generation, or there is none; nothing written");
    if (ret < 0)
        return rio_cli_fail_st(cl, "writing", url, ret, st);
    if (cl->json) {
        json_head(stdout, "put", url);
        json_desc(stdout, d, key);
        fprintf(stdout, ",\"stats\":");
        rio_cli_json_stats(stdout, st);
        rio_cli_json_end(stdout);
    } else if (!cl->quiet) {
        fprintf(stderr, "put %s: %llu bytes, generation %llu, etag %s\n", key,
                (unsigned long long)d->size, (unsigned long long)d->generation,
                d->etag[0] ? d->etag : "-");
        rio_cli_report_stats(cl, NULL, st);
    }
    rio_desc_cleanup(d);
    return 0;
}

/*
 * Copy fd to its end into a temporary file without a name ($TMPDIR, else
 * /tmp: O_TMPFILE, or a random name removed at once), so that whatever
 * ends the process leaves nothing; a signal stops the copy (RIO_ECANCELED).
 * The file's fd, positioned at 0, with *size, or an error.
 */
static int spool_fd(int fd, const char *dir, uint64_t *size)
{
    enum { SPOOL_BUF = 1 << 20 };
    int out = -1, ret = 0;
    uint64_t n = 0;
    uint8_t *buf = malloc(SPOOL_BUF);
    if (!buf)
        return -ENOMEM;
#ifdef O_TMPFILE
    out = open(dir, O_TMPFILE | O_RDWR | O_EXCL | O_CLOEXEC, 0600);
#endif
    if (out < 0) {
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s/.railio-spool-XXXXXX", dir) >= sizeof(path)) {
            ret = -ENAMETOOLONG;
            goto err;
        }
        out = mkostemp(path, O_CLOEXEC);
        if (out < 0) {
            ret = -errno;
            goto err;
        }
        unlink(path);
    }
    for (;;) {
        ret = rio_cli_wait_readable(fd);
        if (ret < 0)
            goto err;
        ssize_t r = read(fd, buf, SPOOL_BUF);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            ret = -errno;
            goto err;
        }
        if (r == 0)
            break;
        if ((ret = rio_cli_write_all(out, buf, (size_t)r)) < 0)
            goto err;
        n += (uint64_t)r;
    }
    if (lseek(out, 0, SEEK_SET) < 0) {
        ret = -errno;
        goto err;
    }
    free(buf);
    *size = n;
    return out;
err:
    if (out >= 0)
        close(out);
    free(buf);
    return ret;
}

/*
 * PUT from a stream of unknown length (stdin, a pipe): chunks are read
 * straight into the writer's buffers and sent while the next fills, memory
 * bounded by slots x chunk size. Returns 1 with *unsupported set when the
 * backend cannot take an upload of unknown size (nothing was read yet).
 */
static int put_stream_fd(const struct rio_cli *cl, struct rio_client *c, const char *url,
                         const char *key, int fd, uint64_t size, bool *unsupported)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st, .cancel = rio_cli_cancel_token()};
    struct rio_desc d;
    struct fd_src fs = {.fd = fd};
    memset(&d, 0, sizeof(d));
    put_condition(&call);
    rio_cli_progress_start(&fs.pr, cl, NULL, "put");
    int ret = rio_put_stream(c, key, size, 0, fd_fill, &fs, &call, &d);
    rio_cli_progress_end(&fs.pr);
    if (ret == RIO_ENOTSUP) {
        *unsupported = true;
        return 1;
    }
    if (ret == RIO_EINVAL && size != RIO_SIZE_UNKNOWN && fs.got != size) {
        /* A file on stdin that another process truncated or appended to:
         * it is the file that is named, not the key. */
        char path[PATH_MAX], why[256];
        ssize_t n = readlink("/proc/self/fd/0", path, sizeof(path) - 1);
        snprintf(path + (n > 0 ? n : 0), sizeof(path) - (n > 0 ? (size_t)n : 0), "%s",
                 n > 0 ? "" : "stdin");
        return rio_cli_fail_why(cl, "reading", path, ret,
                                rio_cli_size_changed(why, sizeof(why), size, fs.got));
    }
    return put_done(cl, url, key, ret, &d, &st);
}

/*
 * PUT from fd, a stream of unknown length (stdin, a FIFO, a device such as
 * <(cmd)'s /dev/fd/N): streamed where the backend takes an upload of
 * unknown size, else first spooled to a temporary file without a name
 * ($TMPDIR, else /tmp) and streamed with its size. Memory stays bounded
 * either way. name is what messages call the source ("-": stdin).
 */
static int put_unsized(const struct rio_cli *cl, struct rio_client *c, const char *url,
                       const char *key, int fd, const char *name)
{
    bool unsupported = false;
    int rc = put_stream_fd(cl, c, url, key, fd, RIO_SIZE_UNKNOWN, &unsupported);
    if (!unsupported)
        return rc;
    /* The backend needs the size first: spool the stream to a temporary
     * file (memory stays bounded), then stream that with its size. */
    const char *dir = getenv("TMPDIR");
    uint64_t size = 0;
    if (!dir || !*dir)
        dir = "/tmp";
    if (cl->verbose)
        fprintf(stderr,
                "railio put: this backend takes no upload of unknown size: spooling %s "
                "to a temporary file in %s first\n",
                strcmp(name, "-") ? name : "stdin", dir);
    int sfd = spool_fd(fd, dir, &size);
    if (sfd < 0)
        return rio_cli_fail_sys(cl, "reading", name, sfd);
    rc = put_stream_fd(cl, c, url, key, sfd, size, &unsupported);
    close(sfd);
    return rc;
}

/* A PUT of a mapped file: a file cut shorter while it is read (truncated
 * by another process) raises SIGBUS on the first page past its new end, in
 * whichever thread reads it. Rather than dying with "Bus error", say what
 * happened and exit: nothing is committed, since every byte is read before
 * the commit (the server drops an upload whose client went away). The
 * message is made before the PUT starts: a handler may only write(2). */
static char sigbus_msg[PATH_MAX + 160];
static size_t sigbus_len;

static void on_sigbus(int sig)
{
    ssize_t r;

    (void)sig;
    r = write(2, sigbus_msg, sigbus_len);
    (void)r;
    _exit(RIO_CLI_EXIT_FAIL);
}

static int cmd_put(const struct rio_cli *cl, struct rio_client *c, const char *url, const char *key,
                   const char *file)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int ret;
    bool mapped = false;

    if (!strcmp(file, "-")) {
        bool unsupported = false;
        struct stat sb;
        off_t at;
        if (fstat(0, &sb) == 0 && S_ISREG(sb.st_mode) && (at = lseek(0, 0, SEEK_CUR)) >= 0)
            return put_stream_fd(cl, c, url, key, 0,
                                 sb.st_size > at ? (uint64_t)(sb.st_size - at) : 0, &unsupported);
        return put_unsized(cl, c, url, key, 0, file);
    } else {
        /* O_NONBLOCK: a FIFO with no writer yet would hold the open, where
         * a signal cannot end it; the wait is the reads' (a signal ends
         * it). Reads block again from here on. */
        int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0)
            return rio_cli_fail_sys(cl, "opening", file, -errno);
        int fl = fcntl(fd, F_GETFL);
        if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
            ret = -errno;
            close(fd);
            return rio_cli_fail_sys(cl, "opening", file, ret);
        }
        struct stat sb;
        if (fstat(fd, &sb) == 0 && S_ISDIR(sb.st_mode)) {
            close(fd);
            return rio_cli_usage_error(cl, "'%s' is a directory (cp -r copies a tree)", file);
        }
        if (fstat(fd, &sb) == 0 && !S_ISREG(sb.st_mode)) {
            /* A FIFO, a pipe or a device (<(cmd), /dev/stdin): streamed as
             * stdin is, never read whole into memory first. */
            int rc = put_unsized(cl, c, url, key, fd, file);
            close(fd);
            return rc;
        }
        if (fstat(fd, &sb) == 0 && S_ISREG(sb.st_mode) && sb.st_size > 0) {
            buf = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
            len = (size_t)sb.st_size;
            ret = buf == MAP_FAILED ? -errno : 0;
            mapped = ret == 0;
            if (ret < 0)
                buf = NULL;
        } else {
            ret = read_all(fd, &buf, &len);
        }
        close(fd);
    }
    if (ret < 0)
        return rio_cli_fail_sys(cl, "reading", file, ret);
    struct rio_stats st;
    struct rio_call call = {.stats = &st, .cancel = rio_cli_cancel_token()};
    struct rio_desc d;
    struct rio_cli_progress pr;
    struct sigaction sa, old;
    memset(&d, 0, sizeof(d));
    if (mapped) {
        int n = snprintf(sigbus_msg, sizeof(sigbus_msg),
                         "railio %s: reading %.*s: the file was cut shorter while it was being "
                         "read (SIGBUS); nothing was written\n",
                         cl->cmd, PATH_MAX, file);
        sigbus_len = n < 0                            ? 0
                     : (size_t)n < sizeof(sigbus_msg) ? (size_t)n
                                                      : sizeof(sigbus_msg) - 1;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = on_sigbus;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGBUS, &sa, &old);
    }
    put_condition(&call);
    rio_cli_progress_start(&pr, cl, &call, "put");
    ret = rio_put(c, key, buf, len, &call, &d);
    rio_cli_progress_end(&pr);
    if (mapped) {
        sigaction(SIGBUS, &old, NULL);
        munmap(buf, len);
    } else {
        free(buf);
    }
    return put_done(cl, url, key, ret, &d, &st);
}

struct out_sink {
    int fd;
    int err;
};

static int sink_write(void *arg, const void *data, size_t len)
{
    struct out_sink *o = arg;
    int ret = rio_cli_write_all(o->fd, data, len);
    if (ret < 0)
        o->err = ret;
    return ret;
}

/*
 * A GET to a regular FILE writes a temporary file in FILE's directory
 * (rio_cli_tmpfile: unnamed where the file system allows) and renames it
 * over FILE once every chunk arrived verified. While it has a name it is
 * registered with the frame: a signal cancels the GET, which removes it; a
 * second signal removes it before the process dies.
 */

/* Before the temporary file fd replaces FILE: give it FILE's permission
 * bits (and, when root, its owner and group), as cp(1) and curl, which
 * write into the existing file, leave them; a private FILE stays private.
 * A FILE that is missing or not a regular file changes nothing. */
static void keep_mode(int fd, const char *file)
{
    struct stat sb;
    if (lstat(file, &sb) < 0 || !S_ISREG(sb.st_mode))
        return;
    if (geteuid() == 0)
        (void)!fchown(fd, sb.st_uid, sb.st_gid);
    (void)!fchmod(fd, sb.st_mode & 0777);
}

/*
 * Whether writing through file (lstat as lsb: a symbolic link, a FIFO, a
 * device) is refused: the kernel's protected_symlinks / protected_fifos
 * rule, applied whatever the sysctls say. In a sticky, world-writable
 * directory (/tmp) an entry owned by someone else than us and the
 * directory's owner was planted: following such a link as root overwrites
 * whatever it names (/etc/passwd), a FIFO hands the object to whoever reads
 * it. -EACCES, or 0.
 */
int rio_cli_planted(const char *file, const struct stat *lsb)
{
    char dir[PATH_MAX];
    struct stat dsb;
    int ret = rio_cli_dir_part(file, dir, sizeof(dir));
    if (ret < 0)
        return ret;
    if (stat(dir, &dsb) < 0)
        return -errno;
    if (!(dsb.st_mode & S_ISVTX) || !(dsb.st_mode & S_IWOTH))
        return 0;
    return lsb->st_uid != geteuid() && lsb->st_uid != dsb.st_uid ? -EACCES : 0;
}

int rio_cli_planted_link(const char *path, unsigned *owner)
{
    char p[PATH_MAX];
    struct stat lsb;
    size_t n = strlen(path);

    while (n > 1 && path[n - 1] == '/')
        n--; /* "LINK/" is the link */
    if (n >= sizeof(p))
        return 0;
    memcpy(p, path, n);
    p[n] = '\0';
    if (lstat(p, &lsb) < 0 || !S_ISLNK(lsb.st_mode))
        return 0;
    *owner = (unsigned)lsb.st_uid;
    return rio_cli_planted(p, &lsb) == -EACCES ? -EACCES : 0;
}

/* rio_cli_planted_link's refusal of a destination directory, said (exit 4). */
int rio_cli_planted_dir_refused(const struct rio_cli *cl, const char *dir, unsigned owner)
{
    char why[160];
    snprintf(why, sizeof(why),
             "refusing to write into a directory through a symbolic link owned by uid %u in a "
             "sticky, world-writable directory (someone else put it there)",
             owner);
    return rio_cli_fail_why(cl, "opening directory", dir, -EACCES, why);
}

/*
 * Where a GET of key to file writes: file itself, or DIR/<basename of key>
 * when file is an existing directory or ends in '/' (as cp(1) and aws s3 cp
 * do). Decided before any byte is fetched. 0 with *out malloc'd, or the exit
 * status once the failure was said.
 */
static int get_target(const struct rio_cli *cl, const char *key, const char *file, char **out)
{
    struct stat sb;
    size_t fl = strlen(file);
    bool slash = fl && file[fl - 1] == '/';

    if (!strcmp(file, "-") || (!slash && (stat(file, &sb) < 0 || !S_ISDIR(sb.st_mode)))) {
        *out = strdup(file);
        return *out ? 0 : rio_cli_fail_sys(cl, NULL, file, -ENOMEM);
    }
    if (stat(file, &sb) < 0)
        return rio_cli_fail_sys(cl, "opening directory", file, -errno);
    if (!S_ISDIR(sb.st_mode))
        return rio_cli_fail_sys(cl, "opening directory", file, -ENOTDIR);
    /* A directory named through a link another user planted in /tmp: as
     * root, the object went into whatever directory the link names. */
    unsigned owner;
    if (rio_cli_planted_link(file, &owner) < 0)
        return rio_cli_planted_dir_refused(cl, file, owner);
    const char *b = base_name(key);
    if (!*b || !strcmp(b, ".") || !strcmp(b, ".."))
        return rio_cli_usage_error(cl, "key '%s' has no file name to write into '%s'", key, file);
    if (asprintf(out, "%s%s%s", file, slash ? "" : "/", b) < 0)
        return rio_cli_fail_sys(cl, NULL, file, -ENOMEM);
    return 0;
}

/* A finished get's result: with --json an object (bytes: the object's size;
 * resumed_from: the bytes kept from an interrupted get, 0 for none), else
 * the stats line. */
static void get_report(const struct rio_cli *cl, const char *url, const char *key, const char *file,
                       uint64_t n, uint64_t from, const struct rio_stats *st)
{
    if (cl->json) {
        /* With the data on stdout, the result goes to stderr. */
        FILE *jf = rio_cli_json_out(cl);
        json_head(jf, "get", url);
        rio_cli_json_kstr(jf, "key", key);
        rio_cli_json_kstr(jf, "file", file);
        rio_cli_json_ku64(jf, "bytes", n);
        rio_cli_json_ku64(jf, "resumed_from", from);
        fprintf(jf, ",\"stats\":");
        rio_cli_json_stats(jf, st);
        rio_cli_json_end(jf);
    } else {
        if (from && !cl->quiet)
            fprintf(stderr, "resumed: %llu bytes kept (verified again), %llu fetched\n",
                    (unsigned long long)from, (unsigned long long)(n - from));
        rio_cli_report_stats(cl, NULL, st);
    }
}

static int no_resume; /* get --no-resume */

#define RESUME_CHUNK_MAX (256ull << 20) /* a larger chunk is not resumed */
#define RESUME_SAVE_S 0.5               /* the record is replaced at most this often */

static int pwrite_all(int fd, const uint8_t *p, size_t n, uint64_t off)
{
    while (n) {
        ssize_t k = pwrite(fd, p, n, (off_t)off);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? -errno : -EIO;
        p += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

/*
 * get_resumable's destination: each chunk pwritten at its offset as soon as
 * it is verified, in whatever order chunks verify, with no copy in between.
 * done is the prefix of the file written whole (what a resume record may
 * claim); the chunks written above it, out of order, wait in above (a few:
 * the reader hands none beyond its prefetch window) until the prefix
 * reaches them.
 */
struct chunk_sink {
    int fd;
    int err; /* the first write's error */
    uint64_t size, chunk_size;
    uint64_t done;
    uint64_t *above;
    size_t nabove, cap;
    struct rio_cli_resume *rs; /* NULL: no record kept (an unnamed file) */
    double saved;              /* when the record was last replaced */
};

static int chunk_write(void *arg, uint64_t off, const void *data, size_t len)
{
    struct chunk_sink *k = arg;
    int ret = pwrite_all(k->fd, data, len, off);
    if (ret < 0)
        return k->err = ret;
    if (!k->rs)
        return 0;
    if (off != k->done) {
        if (k->nabove == k->cap) {
            size_t ncap = k->cap ? 2 * k->cap : 16;
            uint64_t *na = realloc(k->above, ncap * sizeof(*na));
            if (!na)
                return k->err = -ENOMEM;
            k->above = na;
            k->cap = ncap;
        }
        k->above[k->nabove++] = off;
        return 0;
    }
    k->done += len;
    for (size_t i = 0; i < k->nabove;) {
        if (k->above[i] != k->done) {
            i++;
            continue;
        }
        uint64_t l = k->size - k->done < k->chunk_size ? k->size - k->done : k->chunk_size;
        k->done += l;
        k->above[i] = k->above[--k->nabove];
        i = 0; /* the next chunk may sit anywhere in the list */
    }
    double now = rio_cli_now_s();
    if (now - k->saved >= RESUME_SAVE_S || k->rs->done == 0) {
        k->rs->done = k->done;
        if (rio_cli_resume_save(k->rs) == 0)
            rio_cli_tmp_register(NULL); /* resumable: a second signal keeps it */
        k->saved = now;
    }
    return 0;
}

/*
 * A GET to a regular (or missing) FILE that can be resumed: the backend
 * stores the chunk checksums, so bytes kept from an earlier run can be
 * proven again. The bytes go to FILE.railio-tmp, each chunk written at its
 * offset as it verifies (rio__get_chunks, planned from the descriptor the
 * lookup here returned: one lookup, every read naming its generation);
 * FILE.railio-tmp.resume (rio_cli_resume_*) records the object's generation,
 * size, chunk size and the prefix of whole chunks written, replaced as the
 * transfer goes, so an interrupt (or a kill) leaves a pair a later get of
 * the same URL into the same FILE takes up: it re-verifies the kept chunks
 * against the descriptor and fetches only the rest, from the same
 * generation. A changed object, a bad record or kept bytes that do not
 * match start over; a write that fails removes both. Until the first record
 * the bytes are registered with the frame (a second signal removes them).
 * FILE itself is replaced (rename) only once every chunk was written.
 * Returns GET_UNNAMED when the object cannot be resumed (no checksum
 * list): the caller takes the unnamed-temporary-file way, with the
 * descriptor looked up here in *looked where there is one (else *looked
 * is left zeroed); else the exit status (a failure's is 1: it must not be
 * taken for "the other way", which fetched the object again after saying
 * it failed and left the pair behind the new FILE).
 */
#define GET_UNNAMED (-1)

static int get_resumable(struct rio_cli *cl, struct rio_client *c, const char *url, const char *key,
                         const char *file, struct rio_desc *looked)
{
    struct rio_cli_resume rs, old;
    struct rio_desc d;
    struct rio_stats st;
    struct rio_call call = {
        .stats = &st, .cancel = rio_cli_cancel_token(), .deadline_ms = rio_cli_deadline(c)};
    struct chunk_sink k = {.fd = -1};
    uint8_t *buf = NULL;
    uint64_t off = 0;
    int fd = -1, lk = -1, rc, ret, tries = 0;
    bool have_rec;

    memset(&st, 0, sizeof(st));
    if (rio_cli_resume_init(&rs, file, url) < 0)
        return GET_UNNAMED;
    /* A get writing FILE.railio-tmp holds a lock on it (flock) until it
     * ends. Another get into the same FILE (a job's second run, a retry
     * that did not wait) leaves such a pair alone: truncating it to its
     * record, or dropping it and making its own, put zeros or the other's
     * bytes into the FILE the first one then renamed and called done. It
     * takes the unnamed temporary file instead. lk holds the lock on the
     * kept bytes found here, until the end. */
    lk = open(rs.data, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    if (lk >= 0 && flock(lk, LOCK_EX | LOCK_NB) < 0) {
        close(lk);
        return GET_UNNAMED; /* in use (or unlockable: not ours to touch) */
    }
    have_rec = access(rs.rec, F_OK) == 0;
again:
    memset(&d, 0, sizeof(d));
    if (rio_stat(c, key, &d) < 0) {
        free(buf);
        if (lk >= 0)
            close(lk);
        return GET_UNNAMED; /* the other way says what failed; a record stays for later */
    }
    if (!d.xxh || !d.size || !d.chunk_size || d.chunk_size > RESUME_CHUNK_MAX ||
        d.nchunks != (d.size - 1) / d.chunk_size + 1) {
        *looked = d;
        free(buf);
        if (have_rec)
            rio_cli_resume_drop(&rs);
        if (lk >= 0)
            close(lk);
        return GET_UNNAMED; /* nothing to prove kept bytes with */
    }
    old = rs;
    off = 0;
    if (!no_resume && have_rec && rio_cli_resume_load(&old) == 0 &&
        old.generation == d.generation && old.size == d.size && old.chunk_size == d.chunk_size &&
        (fd = rio_cli_resume_open(&rs)) >= 0) {
        /* Kept bytes are read back to be proven: a buffer of a chunk. */
        size_t cap = d.chunk_size < (1u << 20) ? 1u << 20 : (size_t)d.chunk_size;
        if (!buf && !(buf = malloc(cap))) {
            close(fd);
            rio_desc_cleanup(&d);
            if (lk >= 0)
                close(lk);
            return rio_cli_fail_sys(cl, NULL, file, -ENOMEM);
        }
        off = rio_cli_resume_prove(fd, &d, old.done, buf, cap);
    }
    if (!off) {
        /* Start over: whatever was kept is not ours to trust. A
         * FILE.railio-tmp with no record is not ours at all (a user's file,
         * an object of that name): keep it, take the unnamed way. */
        if (fd >= 0)
            close(fd);
        if (have_rec)
            rio_cli_resume_drop(&rs);
        fd = open(rs.data, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC, 0644);
        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
            /* Another get locked it the moment it was made (and, finding
             * no record, leaves it): ours to remove, the unnamed way. */
            unlink(rs.data);
            close(fd);
            fd = -1;
            errno = EEXIST;
            have_rec = false;
        } else if (fd >= 0) {
            /* lk: a second descriptor of the same open file, so that the
             * lock outlives fd's close before the rename. */
            if (lk >= 0)
                close(lk);
            lk = dup(fd);
        }
        if (fd < 0 && errno == EEXIST && !have_rec) {
            *looked = d;
            free(buf);
            if (lk >= 0)
                close(lk);
            return GET_UNNAMED;
        }
        if (fd < 0) {
            rc = rio_cli_fail_sys(cl, "creating a temporary file for", file, -errno);
            goto out;
        }
        rio_cli_tmp_register(rs.data);
    }
    have_rec = true; /* from here on, the pair is ours */
    /* Not a new file (off 0): on ext4 a truncate to 0 makes the close
     * write the whole file out before it returns (auto_da_alloc). */
    if (off && ftruncate(fd, (off_t)off) < 0) {
        rc = rio_cli_fail_sys(cl, "writing", rs.data, -errno);
        goto out_drop;
    }
    rs.generation = d.generation;
    rs.size = d.size;
    rs.chunk_size = d.chunk_size;
    rs.done = off;
    k = (struct chunk_sink){.fd = fd,
                            .size = d.size,
                            .chunk_size = d.chunk_size,
                            .done = off,
                            .rs = &rs,
                            .saved = rio_cli_now_s()};
    struct rio_cli_progress pr;
    call.expect_generation = d.generation;
    rio_cli_progress_start(&pr, cl, &call, "get");
    int64_t n = rio__get_chunks(c, &d, off, 0, chunk_write, &k, &call);
    rio_cli_progress_end(&pr);
    free(k.above);
    k.above = NULL;
    ret = n < 0 ? (int)n : 0;
    int werr = k.err;
    if (ret == RIO_EGENERATION && !off && !werr && ++tries < 5) {
        /* replaced between the lookup and the reads: look again, from
         * nothing (what was written belongs to the old generation) */
        close(fd);
        fd = -1;
        rio_cli_resume_drop(&rs);
        rio_cli_tmp_register(NULL);
        have_rec = false;
        rio_desc_cleanup(&d);
        goto again;
    }
    if (ret == 0) {
        keep_mode(fd, file);
        if (close(fd) < 0)
            werr = -errno;
        fd = -1;
        if (!werr)
            werr = rio__replace_at(AT_FDCWD, rs.data, file);
        if (!werr) {
            unlink(rs.rec);
            rio_cli_tmp_register(NULL);
            get_report(cl, url, key, file, d.size, off, &st);
            rc = 0;
            goto out;
        }
    }
    if (werr) {
        rc = rio_cli_fail_sys(cl, "writing", file, werr);
        goto out_drop;
    }
    /* Interrupted or failed: the prefix written in whole chunks stays for
     * a later get, unless nothing was. */
    rs.done = k.done;
    rc = rio_cli_fail_st(cl, "reading", url, ret, &st);
    if (rs.done && rio_cli_resume_save(&rs) == 0) {
        rio_cli_tmp_register(NULL);
        goto out;
    }
out_drop:
    rio_cli_resume_drop(&rs);
    rio_cli_tmp_register(NULL);
out:
    if (fd >= 0)
        close(fd);
    if (lk >= 0)
        close(lk);
    rio_desc_cleanup(&d);
    free(buf);
    return rc;
}

/*
 * The unnamed temporary file's fill, from the descriptor get_resumable
 * looked up (no second lookup): each chunk pwritten at its offset as it
 * arrives, in any order (the file is renamed over FILE only after the
 * last). A key replaced before the reads named its generation is looked up
 * again and fetched from the start, at most 4 times more, as
 * rio_get_stream does. An object with no chunk checksums whose bytes did
 * not match its ETag (checked as a reader's: it hands out every chunk but
 * the last, then fails) is fetched again once, over the same bytes, as
 * rio_get reads such an object again. *werr: a write's error.
 */
static int64_t get_to_tmp(struct rio_client *c, const char *key, struct rio_desc *d, int fd,
                          int *werr, const struct rio_call *call)
{
    bool again = false;
    for (int tries = 0;; tries++) {
        struct chunk_sink k = {.fd = fd, .size = d->size, .chunk_size = d->chunk_size};
        int64_t n = rio__get_chunks(c, d, 0, 0, chunk_write, &k, call);
        *werr = k.err;
        if (n == RIO_ECHECKSUM && !d->xxh && !k.err && !again) {
            again = true;
            continue;
        }
        if (n != RIO_EGENERATION || k.err || tries >= 4)
            return n;
        rio_desc_cleanup(d);
        int ret = rio_stat(c, key, d);
        if (ret < 0)
            return ret;
        if (ftruncate(fd, 0) < 0)
            return *werr = -errno;
    }
}

/*
 * A FIFO's write end, for get into a FIFO: a blocking open(2) waits for a
 * reader where no signal can end it, so the open is tried without waiting
 * (ENXIO while no reader has it open) every 50 ms until a reader comes or
 * a signal interrupts the command (RIO_ECANCELED). Writes block as usual.
 */
static int open_fifo_writer(const char *file)
{
    for (;;) {
        int fd = open(file, O_WRONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd >= 0) {
            int fl = fcntl(fd, F_GETFL);
            if (fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) < 0) {
                int e = -errno;
                close(fd);
                return e;
            }
            return fd;
        }
        if (errno != ENXIO)
            return -errno;
        if (rio_cli_interrupted())
            return RIO_ECANCELED;
        usleep(50 * 1000);
    }
}

/*
 * Stream the object out. To stdout ("-") as it arrives (a failure mid-way
 * exits non-zero after a partial write, as any pipe producer must). To a
 * FILE that is missing or a regular file: through a temporary file renamed
 * over it only when every chunk arrived verified, so a failed get never
 * leaves a partial file under FILE. Anything else (a device such as
 * /dev/null, a FIFO, a symbolic link, whatever it points to) is opened and
 * written in place, never replaced: a rename only ever replaces a regular
 * file, and a symbolic link is written through like cp(1) does, unless
 * someone else planted it in a sticky directory (rio_cli_planted()).
 */
static int cmd_get(struct rio_cli *cl, struct rio_client *c, const char *url, const char *key,
                   const char *dest)
{
    struct rio_stats st;
    struct rio_call call = {
        .stats = &st, .cancel = rio_cli_cancel_token(), .deadline_ms = rio_cli_deadline(c)};
    struct out_sink o = {.fd = 1};
    struct rio_desc looked;
    struct rio_cli_tmpfile t;
    bool tmp = false;
    char *file = NULL;
    int rc = get_target(cl, key, dest, &file);

    memset(&looked, 0, sizeof(looked));

    if (rc)
        return rc;
    if (strcmp(file, "-")) {
        struct stat lsb, sb;
        int ret = 0;
        int missing = lstat(file, &lsb) < 0 ? errno : 0;
        if (missing && missing != ENOENT) {
            ret = -missing;
        } else if ((missing || S_ISREG(lsb.st_mode)) &&
                   (rc = get_resumable(cl, c, url, key, file, &looked)) != GET_UNNAMED) {
            free(file);
            return rc;
        } else if (missing || S_ISREG(lsb.st_mode)) {
            tmp = true;
            o.fd = rio_cli_tmpfile_open(&t, AT_FDCWD, file, true);
            ret = o.fd < 0 ? o.fd : 0;
        } else if ((ret = rio_cli_planted(file, &lsb)) < 0) {
            /* Said through the frame: with --json, an error object too. */
            char why[160];
            snprintf(why, sizeof(why),
                     "refusing to write through %s owned by uid %u in a sticky, world-writable "
                     "directory (someone else put it there)",
                     S_ISLNK(lsb.st_mode) ? "a symbolic link" : "a special file",
                     (unsigned)lsb.st_uid);
            rc = ret == -EACCES ? rio_cli_fail_why(cl, "opening", file, ret, why)
                                : rio_cli_fail_sys(cl, "opening", file, ret);
            free(file);
            return rc;
        } else {
            /* In place: O_TRUNC only for a regular file behind a link. */
            bool got = stat(file, &sb) == 0, reg = got && S_ISREG(sb.st_mode);
            if (got && S_ISFIFO(sb.st_mode)) {
                o.fd = open_fifo_writer(file);
                ret = o.fd < 0 ? o.fd : 0;
            } else {
                o.fd = open(file, O_WRONLY | O_NOCTTY | O_CLOEXEC | (reg ? O_TRUNC : 0));
                ret = o.fd < 0 ? -errno : 0;
            }
        }
        if (ret < 0) {
            rc = rio_cli_fail_sys(cl, tmp ? "creating a temporary file for" : "opening", file, ret);
            rio_desc_cleanup(&looked);
            free(file);
            return rc;
        }
    } else {
        cl->data_stdout = 1;
    }
    struct rio_cli_progress pr;
    rio_cli_progress_start(&pr, cl, &call, "get");
    int64_t n = tmp && looked.generation ? get_to_tmp(c, key, &looked, o.fd, &o.err, &call)
                                         : rio_get_stream(c, key, 0, sink_write, &o, &call);
    rio_cli_progress_end(&pr);
    rio_desc_cleanup(&looked);
    int ret = n < 0 ? (int)n : 0;
    /* The cleanup calls no rio_*: rio_error_detail() still holds the cause. */
    if (tmp) {
        if (ret == 0) {
            keep_mode(o.fd, file);
            ret = rio_cli_tmpfile_commit(&t, file);
        } else {
            rio_cli_tmpfile_abort(&t);
        }
    } else if (o.fd != 1 && close(o.fd) < 0 && ret == 0) {
        ret = -errno;
    }
    if (ret < 0) {
        if (o.err && o.fd == 1) {
            /* stdout could not take the bytes (/dev/full, EIO) */
            rc = rio_cli_fail_rc(cl, "writing", "stdout", o.err, RIO_CLI_EXIT_OUTPUT);
        } else if (o.err || n >= 0) {
            rc = rio_cli_fail_sys(cl, "writing", file, o.err ? o.err : ret);
        } else {
            rc = rio_cli_fail_st(cl, "reading", url, ret, &st);
        }
        free(file);
        return rc;
    }
    get_report(cl, url, key, file, (uint64_t)n, 0, &st);
    free(file);
    return 0;
}

static int cmd_stat(const struct rio_cli *cl, struct rio_client *c, const char *url,
                    const char *key)
{
    struct rio_desc d;
    int ret = rio_stat(c, key, &d);
    if (ret < 0)
        return rio_cli_fail(cl, NULL, url, ret);
    if (cl->json) {
        json_head(stdout, "object", url);
        json_desc(stdout, &d, key);
        rio_cli_json_ku64(stdout, "chunk_size", d.chunk_size);
        rio_cli_json_ku64(stdout, "chunks", d.nchunks);
        rio_cli_json_end(stdout);
    } else {
        printf("key:        %s\ngeneration: %llu\nsize:       %llu\nchunk size: %llu\n"
               "chunks:     %llu\netag:       %s\n",
               d.key, (unsigned long long)d.generation, (unsigned long long)d.size,
               (unsigned long long)d.chunk_size, (unsigned long long)d.nchunks, d.etag);
    }
    rio_desc_cleanup(&d);
    return 0;
}

static int cmd_rm(const struct rio_cli *cl, struct rio_client *c, const char *url, const char *key)
{
    int ret = rio_delete(c, key);
    if (ret < 0)
        return rio_cli_fail(cl, NULL, url, ret);
    if (cl->json) {
        json_head(stdout, "removed", url);
        rio_cli_json_kstr(stdout, "key", key);
        rio_cli_json_end(stdout);
    }
    return 0;
}

/* cp's source when both sides are URLs: the reader's verified bytes go
 * straight into the writer's buffers. */
struct reader_src {
    struct rio_reader *rd;
    uint64_t size;
    struct rio_cli_progress pr;
    int err;
};

static int64_t reader_fill(void *arg, void *buf, size_t cap)
{
    struct reader_src *rs = arg;
    int64_t n = rio_reader_read(rs->rd, buf, cap);
    if (n < 0)
        rs->err = (int)n;
    else
        rio_cli_progress_feed(&rs->pr, (uint64_t)n, rs->size);
    return n;
}

/*
 * railio cp SRC DST, both URLs: a reader on the source (chunks verified as
 * they arrive) feeds a writer on the destination (declared size, so any
 * backend), memory bounded by both windows, and the destination publishes
 * the new generation only after every byte arrived verified: whole or not
 * at all. A signal cancels both: the upload is dropped.
 */
static int cp_urls(const struct rio_cli *cl, struct rio_client *sc, const char *src,
                   const char *skey, struct rio_client *dc, const char *dst, const char *dkey)
{
    struct rio_stats gst, pst;
    struct rio_cancel *cx = rio_cli_cancel_token();
    struct rio_call gcall = {.stats = &gst, .cancel = cx, .deadline_ms = rio_cli_deadline(sc)},
                    pcall = {.stats = &pst, .cancel = cx};
    struct rio_desc d;
    struct rio_reader *rd;
    char shown[1024], shown2[1024];

    memset(&d, 0, sizeof(d));
    int ret = rio_reader_open(sc, skey, 0, &gcall, &rd);
    if (ret < 0)
        return rio_cli_fail(cl, "reading", src, ret);
    int64_t n = (int64_t)rio_reader_desc(rd)->size;
    struct reader_src rs = {.rd = rd, .size = (uint64_t)n};
    rio_cli_progress_start(&rs.pr, cl, NULL, "cp");
    ret = rio_put_stream(dc, dkey, (uint64_t)n, 0, reader_fill, &rs, &pcall, &d);
    rio_cli_progress_end(&rs.pr);
    int gret = rio_reader_close(rd);
    if (rs.err < 0 || (ret == 0 && gret < 0))
        return rio_cli_fail_st(cl, "reading", src, rs.err < 0 ? rs.err : gret, &gst);
    if (ret < 0)
        return rio_cli_fail_st(cl, "writing", dst, ret, &pst);
    if (cl->json) {
        rio_cli_json_begin(stdout, "cp");
        rio_cli_json_kstr(stdout, "src", rio_cli_url_safe(src, shown, sizeof(shown)));
        rio_cli_json_kstr(stdout, "dst", rio_cli_url_safe(dst, shown2, sizeof(shown2)));
        rio_cli_json_ku64(stdout, "bytes", (uint64_t)n);
        rio_cli_json_kgen(stdout, "generation", d.generation);
        rio_cli_json_kstr(stdout, "etag", d.etag);
        printf(",\"get\":");
        rio_cli_json_stats(stdout, &gst);
        printf(",\"put\":");
        rio_cli_json_stats(stdout, &pst);
        rio_cli_json_end(stdout);
    } else if (!cl->quiet) {
        fprintf(stderr, "cp %s -> %s: %lld bytes, generation %llu, etag %s\n",
                rio_cli_url_safe(src, shown, sizeof(shown)),
                rio_cli_url_safe(dst, shown2, sizeof(shown2)), (long long)n,
                (unsigned long long)d.generation, d.etag);
        rio_cli_report_stats(cl, "get", &gst);
        rio_cli_report_stats(cl, "put", &pst);
    }
    rio_desc_cleanup(&d);
    return 0;
}

static const char put_usage[] =
    "usage: railio put [-q] [-v] [--json] [--if-absent | --if-generation G] URL/KEY FILE|-\n"
    "Store FILE (or stdin, streamed where the backend allows) under KEY. A KEY\n"
    "ending in '/' (or none) takes FILE's name.\n"
    "      --if-absent        only if KEY holds no object (else exit 10, nothing written)\n"
    "      --if-generation G  only if KEY's object is generation G (else exit 10)\n"
    "  -q, --quiet     no progress line, no stats\n"
    "  -v, --verbose   full stats, the verdict, error details\n"
    "      --json      one JSON object on stdout (docs/cli.md)\n"
    "  -h, --help      this text\n";
static const char get_usage[] =
    "usage: railio get [-q] [-v] [--json] [--no-resume] URL/KEY [FILE|DIR/|-]\n"
    "Fetch KEY, every chunk verified, into FILE (replaced whole only when every\n"
    "byte arrived), into DIR/<last element of KEY> when DIR is a directory, or\n"
    "to stdout (-). Without FILE: ./<last element of KEY>. An interrupted get\n"
    "keeps FILE.railio-tmp and FILE.railio-tmp.resume; the next get of the same\n"
    "URL into FILE re-verifies the kept chunks and fetches only the rest, if the\n"
    "object did not change.\n"
    "      --no-resume start over (removes what an interrupted get kept)\n"
    "  -q, --quiet     no progress line, no stats\n"
    "  -v, --verbose   full stats, the verdict, error details\n"
    "      --json      one JSON object on stdout (stderr with -)\n"
    "  -h, --help      this text\n";
static const char stat_usage[] = "usage: railio stat [--json] URL/KEY\n"
                                 "Print KEY's descriptor: generation, size, chunks, etag.\n"
                                 "      --json      one JSON object on stdout\n"
                                 "  -h, --help      this text\n";
static const char rm_usage[] = "usage: railio rm [--json] URL/KEY\n"
                               "Remove KEY.\n"
                               "      --json      one JSON object on stdout\n"
                               "  -h, --help      this text\n";
static const char cp_usage[] =
    "usage: railio cp [-q] [-v] [--json] SRC DST\n"
    "Copy between backends; each side a URL/KEY, a local file or - (stdio); at\n"
    "least one a URL. A local DST directory takes SRC's last key element, a\n"
    "URL DST ending in '/' the source file's name.\n"
    "  -q, --quiet     no progress line, no stats\n"
    "  -v, --verbose   full stats, the verdict, error details\n"
    "      --json      one JSON object on stdout\n"
    "  -h, --help      this text\n";

/* A destination URL with no key and no file name to take one from. */
static int no_key(const struct rio_cli *cl, const char *url)
{
    char shown[1024];
    return rio_cli_usage_error(cl, "'%s' names no key",
                               rio_cli_url_safe(url, shown, sizeof(shown)));
}

static int run_cp(struct rio_cli *cl)
{
    const char *src = cl->pos[0], *dst = cl->pos[1];
    bool src_url = strstr(src, "://") != NULL, dst_url = strstr(dst, "://") != NULL;
    struct rio_client *sc = NULL, *dc = NULL;
    char *skey = NULL, *dkey = NULL, *key = NULL;
    int rc;

    if (!src_url && !dst_url)
        return rio_cli_usage_error(cl, "neither side is a URL; use cp(1)");
    if (src_url && (rc = rio_cli_open(cl, src, 0, &sc, &skey)))
        goto out;
    if (dst_url && (rc = rio_cli_open(cl, dst, RIO_CLI_KEY_OPTIONAL, &dc, &dkey)))
        goto out;
    if (dst_url) {
        key = dest_key(dkey, src_url ? skey : src);
        if (!key) {
            rc = no_key(cl, dst);
            goto out;
        }
    }
    if (!dst_url)
        rc = cmd_get(cl, sc, src, skey, dst);
    else if (!src_url)
        rc = cmd_put(cl, dc, dst, key, src);
    else
        rc = cp_urls(cl, sc, src, skey, dc, dst, key);
out:
    rio_client_destroy(sc);
    rio_client_destroy(dc);
    free(skey);
    free(dkey);
    free(key);
    return rc;
}

int rio_cli_objects(const char *cmd, int argc, char **argv)
{
    struct rio_cli cl;
    const char *usage = !strcmp(cmd, "put")   ? put_usage
                        : !strcmp(cmd, "get") ? get_usage
                        : !strcmp(cmd, "cp")  ? cp_usage
                        : !strcmp(cmd, "rm")  ? rm_usage
                                              : stat_usage;
    bool put = !strcmp(cmd, "put"), get = !strcmp(cmd, "get");
    int min = put || !strcmp(cmd, "cp") ? 2 : 1, max = put || get || !strcmp(cmd, "cp") ? 2 : 1;
    const struct rio_cli_opt get_opts[] = {{"--no-resume", 0, NULL, &no_resume, NULL}, {0}};
    const char *if_gen = NULL;
    const struct rio_cli_opt put_opts[] = {{"--if-absent", 0, NULL, &put_if_absent, NULL},
                                           {"--if-generation", 0, "G", NULL, &if_gen},
                                           {0}};
    int rc = rio_cli_parse(&cl, cmd, usage,
                           get   ? get_opts
                           : put ? put_opts
                                 : NULL,
                           min, max, argc, argv);

    if (rc >= 0)
        return rc;
    if (if_gen) {
        if (rio_cli_parse_generation(&cl, if_gen, &put_if_gen))
            return RIO_CLI_EXIT_USAGE;
        if (put_if_absent)
            return rio_cli_usage_error(&cl, "--if-absent and --if-generation exclude each other");
    }
    /* Object bytes on stdout (get URL -, cp URL -): JSON, errors included,
     * goes to stderr from the start. */
    cl.data_stdout = (get || !strcmp(cmd, "cp")) && cl.npos == 2 && !strcmp(cl.pos[1], "-");
    if (!strcmp(cmd, "cp"))
        return run_cp(&cl);
    const char *url = cl.pos[0];
    struct rio_client *c;
    char *key = NULL, *pkey = NULL;
    if ((rc = rio_cli_open(&cl, url, put ? RIO_CLI_KEY_OPTIONAL : 0, &c, &key)))
        return rc;
    if (put) {
        pkey = dest_key(key, cl.pos[1]);
        rc = pkey ? cmd_put(&cl, c, url, pkey, cl.pos[1]) : no_key(&cl, url);
    } else if (get) {
        rc = cmd_get(&cl, c, url, key, cl.npos > 1 ? cl.pos[1] : ".");
    } else if (!strcmp(cmd, "stat")) {
        rc = cmd_stat(&cl, c, url, key);
    } else {
        rc = cmd_rm(&cl, c, url, key);
    }
    rio_client_destroy(c);
    free(key);
    free(pkey);
    return rc;
}
