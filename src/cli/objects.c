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
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/key.h"
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
        "\"retries\":{",
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
        (unsigned long long)st->cpu_wait_ns);
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
    fprintf(f, "],\"verdict\":\"%s\",\"verdict_text\":", rio_verdict_name(st->verdict));
    rio_cli_json_str(f, st->verdict_text);
    fputc('}', f);
}

/* The cause behind a call's error (rio_error_detail()) for the error line:
 * ": CAUSE", or nothing. Two printf arguments, for "%s%s". */
#define DETAIL (*rio_error_detail() ? ": " : ""), rio_error_detail()

/* A progress line on stderr when it is a terminal. Called from the engine
 * thread: it only formats and writes. */
struct progress {
    struct timespec t0;
    const char *what;
    int shown;
};

static void progress_cb(void *arg, uint64_t done, uint64_t total)
{
    struct progress *pr = arg;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double el = (double)(now.tv_sec - pr->t0.tv_sec) + (now.tv_nsec - pr->t0.tv_nsec) / 1e9;
    double pct = total ? 100.0 * (double)done / (double)total : 100.0;
    fprintf(stderr, "\r%s %8.1f / %.1f MiB %5.1f%% %9.1f MB/s", pr->what, done / 1048576.0,
            total / 1048576.0, pct, el > 0 ? done / el / 1e6 : 0.0);
    pr->shown = 1;
}

static void progress_start(struct progress *pr, struct rio_call *call, const char *what, int json)
{
    memset(pr, 0, sizeof(*pr));
    if (json || !isatty(2))
        return;
    clock_gettime(CLOCK_MONOTONIC, &pr->t0);
    pr->what = what;
    call->progress = progress_cb;
    call->progress_arg = pr;
}

static void progress_end(struct progress *pr)
{
    if (pr->shown)
        fprintf(stderr, "\r\033[K");
}

/* Split "scheme://authority/key?query" into a client URL and a key; for
 * file:// the key is the last path component. */
static int split_url(const char *arg, char **client_url, char **key)
{
    const char *p = strstr(arg, "://");
    if (!p)
        return RIO_EURL;
    const char *slash = strchr(p + 3, '/');
    const char *q = strchr(p + 3, '?');
    if (!slash || (q && q < slash))
        return RIO_EURL;
    if (p - arg == 4 && !strncmp(arg, "file", 4)) {
        /* file:///DIR/NAME: the directory is the store, the name the key. */
        const char *end = q ? q : arg + strlen(arg);
        const char *last = slash;
        for (const char *c = slash; c < end; c++)
            if (*c == '/')
                last = c;
        if (last == slash)
            return RIO_EURL; /* file:///NAME: no directory */
        slash = last;
    }
    size_t klen = q ? (size_t)(q - slash - 1) : strlen(slash + 1);
    if (!rio__key_len_ok(klen))
        return RIO_EINVAL;
    *key = strndup(slash + 1, klen);
    size_t blen = (size_t)(slash - arg);
    size_t qlen = q ? strlen(q) : 0;
    *client_url = malloc(blen + qlen + 1);
    if (!*key || !*client_url) {
        free(*key);
        free(*client_url);
        return -ENOMEM;
    }
    memcpy(*client_url, arg, blen);
    memcpy(*client_url + blen, q ? q : "", qlen + 1);
    return 0;
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
        ssize_t r = read(fd, b + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            int e = -errno;
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

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -errno;
        }
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* A streaming PUT's source: read(2) from a pipe, a socket or stdin. */
static int64_t fd_fill(void *arg, void *buf, size_t cap)
{
    int fd = *(int *)arg;
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r >= 0)
            return r;
        if (errno != EINTR)
            return -errno;
    }
}

static void put_report(const char *key, const struct rio_desc *d, const struct rio_stats *st,
                       int json)
{
    if (json) {
        printf("{\"key\":");
        rio_cli_json_str(stdout, key);
        printf(",\"generation\":%llu,\"size\":%llu,\"etag\":\"%s\",\"stats\":",
               (unsigned long long)d->generation, (unsigned long long)d->size, d->etag);
        rio_cli_json_stats(stdout, st);
        printf("}\n");
    } else {
        fprintf(stderr, "put %s: %llu bytes, generation %llu, etag %s\n", key,
                (unsigned long long)d->size, (unsigned long long)d->generation,
                d->etag[0] ? d->etag : "-");
        rio_cli_print_stats(stderr, st);
    }
}

/* A PUT's outcome on stderr/stdout; the exit status. */
static int put_done(const char *key, int ret, struct rio_desc *d, const struct rio_stats *st,
                    int json)
{
    if (ret < 0) {
        fprintf(stderr, "railio put: %s: %s (%s)%s%s\n", key, rio_strerror(ret), rio_errname(ret),
                DETAIL);
        return 1;
    }
    put_report(key, d, st, json);
    rio_desc_cleanup(d);
    return 0;
}

/*
 * PUT from a stream of unknown length (stdin, a pipe): chunks are read
 * straight into the writer's buffers and sent while the next fills, memory
 * bounded by slots x chunk size. Returns 1 with *unsupported set when the
 * backend cannot take an upload of unknown size (nothing was read yet).
 */
static int put_stream_fd(struct rio_client *c, const char *key, int fd, int json, bool *unsupported)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    memset(&d, 0, sizeof(d));
    int ret = rio_put_stream(c, key, RIO_SIZE_UNKNOWN, 0, fd_fill, &fd, &call, &d);
    if (ret == RIO_ENOTSUP) {
        *unsupported = true;
        return 1;
    }
    return put_done(key, ret, &d, &st, json);
}

static int cmd_put(struct rio_client *c, const char *key, const char *file, int json)
{
    uint8_t *buf = NULL;
    size_t len = 0;
    int ret;
    bool mapped = false;

    if (!strcmp(file, "-")) {
        bool unsupported = false;
        struct stat sb;
        if (fstat(0, &sb) < 0 || !S_ISREG(sb.st_mode)) {
            int rc = put_stream_fd(c, key, 0, json, &unsupported);
            if (!unsupported)
                return rc;
        }
        /* a regular file on stdin, or a backend that needs the size first */
        ret = read_all(0, &buf, &len);
    } else {
        int fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0) {
            fprintf(stderr, "railio put: cannot open '%s': %s\n", file, strerror(errno));
            return 1;
        }
        struct stat sb;
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
    if (ret < 0) {
        fprintf(stderr, "railio put: cannot read '%s': %s\n", file, rio_strerror(ret));
        return 1;
    }
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    struct progress pr;
    memset(&d, 0, sizeof(d));
    progress_start(&pr, &call, "put", json);
    ret = rio_put(c, key, buf, len, &call, &d);
    progress_end(&pr);
    if (mapped)
        munmap(buf, len);
    else
        free(buf);
    return put_done(key, ret, &d, &st, json);
}

struct out_sink {
    int fd;
    int err;
};

static int sink_write(void *arg, const void *data, size_t len)
{
    struct out_sink *o = arg;
    int ret = write_all(o->fd, data, len);
    if (ret < 0)
        o->err = ret;
    return ret;
}

/*
 * A GET to a regular FILE writes a temporary file in FILE's directory and
 * renames it over FILE once every chunk arrived verified. The temporary file
 * is unnamed (O_TMPFILE: the kernel removes it whatever kills the process)
 * until the commit links it under a random name and renames that over FILE;
 * where the file system has no O_TMPFILE it is created under a random name
 * with O_CREAT | O_EXCL | O_NOFOLLOW. While it has a name, SIGINT, SIGTERM
 * and SIGHUP remove it before the process dies.
 */
static char tmp_name[PATH_MAX];
static volatile sig_atomic_t tmp_named;

static void on_exit_signal(int sig)
{
    if (tmp_named)
        unlink(tmp_name); /* async-signal-safe */
    raise(sig);           /* SA_RESETHAND: the default action, once we return */
}

static void exit_signals(bool on)
{
    static const int sigs[] = {SIGINT, SIGTERM, SIGHUP};
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on ? on_exit_signal : SIG_DFL;
    sa.sa_flags = on ? SA_RESETHAND : 0;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        sigaction(sigs[i], &sa, NULL);
}

/* "DIR/.BASE.railio-tmp-<16 random hex digits>" for file into tmp_name. */
static int random_tmp_name(const char *file)
{
    uint64_t r;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return -errno;
    const char *slash = strrchr(file, '/');
    int dl = slash ? (int)(slash - file + 1) : 0;
    int n = snprintf(tmp_name, sizeof(tmp_name), "%.*s.%s.railio-tmp-%016llx", dl, file, file + dl,
                     (unsigned long long)r);
    return n < 0 || (size_t)n >= sizeof(tmp_name) ? -ENAMETOOLONG : 0;
}

/* The directory part of file ("." for a bare name), for O_TMPFILE. */
static int dir_part(const char *file, char *dir, size_t cap)
{
    const char *slash = strrchr(file, '/');
    size_t dl = slash ? (size_t)(slash - file) : 1;
    if (slash && dl == 0)
        dl = 1; /* "/name" */
    if (dl >= cap)
        return -ENAMETOOLONG;
    memcpy(dir, slash ? file : ".", dl);
    dir[dl] = '\0';
    return 0;
}

/* A fresh temporary file next to file: an fd, *anon when unnamed. */
static int tmp_create(const char *file, bool *anon)
{
    char dir[PATH_MAX];
    int ret = dir_part(file, dir, sizeof(dir));
    if (ret < 0)
        return ret;
    int fd = open(dir, O_WRONLY | O_TMPFILE | O_CLOEXEC, 0644);
    if (fd >= 0 && access("/proc/self/fd", X_OK) == 0) {
        *anon = true;
        return fd;
    }
    if (fd >= 0)
        close(fd); /* no /proc to link it by */
    else if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        return -errno;
    *anon = false;
    for (int i = 0; i < 16; i++) {
        if ((ret = random_tmp_name(file)) < 0)
            return ret;
        tmp_named = 1;
        fd = open(tmp_name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
            return fd;
        tmp_named = 0;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* Name the unnamed temporary file fd: a link under a random name. */
static int tmp_link(int fd, const char *file)
{
    char pf[64];
    snprintf(pf, sizeof(pf), "/proc/self/fd/%d", fd);
    for (int i = 0; i < 16; i++) {
        int ret = random_tmp_name(file);
        if (ret < 0)
            return ret;
        tmp_named = 1;
        if (linkat(AT_FDCWD, pf, AT_FDCWD, tmp_name, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        tmp_named = 0;
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
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
static int planted(const char *file, const struct stat *lsb)
{
    char dir[PATH_MAX];
    struct stat dsb;
    int ret = dir_part(file, dir, sizeof(dir));
    if (ret < 0)
        return ret;
    if (stat(dir, &dsb) < 0)
        return -errno;
    if (!(dsb.st_mode & S_ISVTX) || !(dsb.st_mode & S_IWOTH))
        return 0;
    return lsb->st_uid != geteuid() && lsb->st_uid != dsb.st_uid ? -EACCES : 0;
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
 * someone else planted it in a sticky directory (planted()).
 */
static int cmd_get(struct rio_client *c, const char *key, const char *file, int json)
{
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct out_sink o = {.fd = 1};
    bool tmp = false, anon = false;

    if (strcmp(file, "-")) {
        struct stat lsb, sb;
        int ret = 0;
        int missing = lstat(file, &lsb) < 0 ? errno : 0;
        if (missing && missing != ENOENT) {
            ret = -missing;
        } else if (missing || S_ISREG(lsb.st_mode)) {
            tmp = true;
            o.fd = tmp_create(file, &anon);
            ret = o.fd < 0 ? o.fd : 0;
            exit_signals(true);
        } else if ((ret = planted(file, &lsb)) < 0) {
            fprintf(stderr,
                    "railio get: refusing to write through '%s': %s owned by uid %u in a "
                    "sticky, world-writable directory (someone else put it there)\n",
                    file, S_ISLNK(lsb.st_mode) ? "a symbolic link" : "a special file",
                    (unsigned)lsb.st_uid);
            return 1;
        } else {
            /* In place: O_TRUNC only for a regular file behind a link. */
            bool reg = stat(file, &sb) == 0 && S_ISREG(sb.st_mode);
            o.fd = open(file, O_WRONLY | O_NOCTTY | O_CLOEXEC | (reg ? O_TRUNC : 0));
            ret = o.fd < 0 ? -errno : 0;
        }
        if (ret < 0) {
            if (tmp)
                exit_signals(false);
            fprintf(stderr, "railio get: cannot %s '%s': %s\n",
                    tmp ? "create a temporary file for" : "open", file, strerror(-ret));
            return 1;
        }
    }
    struct progress pr;
    progress_start(&pr, &call, "get", json);
    int64_t n = rio_get_stream(c, key, 0, sink_write, &o, &call);
    progress_end(&pr);
    int ret = n < 0 ? (int)n : 0;
    if (tmp) {
        if (ret == 0 && anon)
            ret = tmp_link(o.fd, file);
        if (close(o.fd) < 0 && ret == 0)
            ret = -errno;
        if (ret == 0 && rename(tmp_name, file) < 0)
            ret = -errno;
        if (ret < 0 && tmp_named)
            unlink(tmp_name);
        tmp_named = 0;
        exit_signals(false);
    } else if (o.fd != 1 && close(o.fd) < 0 && ret == 0) {
        ret = -errno;
    }
    if (ret < 0) {
        if (o.err)
            fprintf(stderr, "railio get: writing '%s': %s\n", file, rio_strerror(o.err));
        else
            fprintf(stderr, "railio get: %s: %s (%s)%s%s\n", key, rio_strerror(ret),
                    rio_errname(ret), DETAIL);
        return 1;
    }
    if (json) {
        /* With the data on stdout, the stats go to stderr. */
        FILE *jf = strcmp(file, "-") ? stdout : stderr;
        fprintf(jf, "{\"key\":");
        rio_cli_json_str(jf, key);
        fprintf(jf, ",\"bytes\":%lld,\"stats\":", (long long)n);
        rio_cli_json_stats(jf, &st);
        fprintf(jf, "}\n");
    } else {
        rio_cli_print_stats(stderr, &st);
    }
    return 0;
}

static int cmd_stat(struct rio_client *c, const char *key, int json)
{
    struct rio_desc d;
    int ret = rio_stat(c, key, &d);
    if (ret < 0) {
        fprintf(stderr, "railio stat: %s: %s (%s)%s%s\n", key, rio_strerror(ret), rio_errname(ret),
                DETAIL);
        return 1;
    }
    if (json) {
        printf("{\"key\":");
        rio_cli_json_str(stdout, d.key);
        printf(",\"generation\":%llu,\"size\":%llu,\"chunk_size\":%llu,\"chunks\":%llu,"
               "\"etag\":\"%s\"}\n",
               (unsigned long long)d.generation, (unsigned long long)d.size,
               (unsigned long long)d.chunk_size, (unsigned long long)d.nchunks, d.etag);
    } else {
        printf("key:        %s\ngeneration: %llu\nsize:       %llu\nchunk size: %llu\n"
               "chunks:     %llu\netag:       %s\n",
               d.key, (unsigned long long)d.generation, (unsigned long long)d.size,
               (unsigned long long)d.chunk_size, (unsigned long long)d.nchunks, d.etag);
    }
    rio_desc_cleanup(&d);
    return 0;
}

static int open_url(const char *cmd, const char *arg, struct rio_client **c, char **key)
{
    char shown[1024];
    char *curl = NULL;
    int ret = split_url(arg, &curl, key);
    if (ret < 0) {
        fprintf(stderr, "railio %s: '%s': %s (expected SCHEME://AUTHORITY/KEY)\n", cmd,
                rio_cli_url_safe(arg, shown, sizeof(shown)), rio_strerror(ret));
        return 2;
    }
    ret = rio_client_new(curl, NULL, c);
    if (ret < 0) {
        fprintf(stderr, "railio %s: cannot open '%s': %s (%s)\n", cmd,
                rio_cli_url_safe(curl, shown, sizeof(shown)), rio_strerror(ret), rio_errname(ret));
        free(curl);
        free(*key);
        *key = NULL;
        return 1;
    }
    free(curl);
    return 0;
}

/* cp's source when both sides are URLs: the reader's verified bytes go
 * straight into the writer's buffers. */
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

/*
 * railio cp SRC DST: either side a URL or a local file ("-" for stdio). URL to
 * URL streams: a reader on the source (chunks verified as they arrive) feeds
 * a writer on the destination (declared size, so any backend), memory
 * bounded by both windows, and the destination publishes the new generation
 * only after every byte arrived verified: whole or not at all.
 */
/* `railio cp` could not read its source or write its destination: says
 * which (the URL without secrets) and why; the exit status, 1. */
static int cp_failed(const char *doing, const char *url, int err)
{
    char shown[1024];

    fprintf(stderr, "railio cp: %s %s: %s (%s)\n", doing,
            rio_cli_url_safe(url, shown, sizeof(shown)), rio_strerror(err), rio_errname(err));
    return 1;
}

static int cmd_cp(int argc, char **argv)
{
    int json = 0, npos = 0, rc = 1;
    const char *pos[2] = {NULL, NULL};
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (npos < 2)
            pos[npos++] = argv[i];
        else
            npos = 3;
    }
    if (npos != 2) {
        fprintf(stderr, "usage: railio cp SRC DST [--json]   (each a URL/KEY, a file or -)\n");
        return 2;
    }
    bool src_url = strstr(pos[0], "://") != NULL, dst_url = strstr(pos[1], "://") != NULL;
    char shown[1024];
    struct rio_client *sc = NULL, *dc = NULL;
    char *skey = NULL, *dkey = NULL;
    void *buf = NULL;
    if (!src_url && !dst_url) {
        fprintf(stderr, "railio cp: neither side is a URL; use cp(1)\n");
        return 2;
    }
    if (src_url && (rc = open_url("cp", pos[0], &sc, &skey)))
        goto out;
    if (dst_url && (rc = open_url("cp", pos[1], &dc, &dkey)))
        goto out;
    if (!dst_url) {
        rc = cmd_get(sc, skey, pos[1], json);
    } else if (!src_url) {
        rc = cmd_put(dc, dkey, pos[0], json);
    } else {
        struct rio_stats gst, pst;
        struct rio_call gcall = {.stats = &gst}, pcall = {.stats = &pst};
        struct rio_desc d;
        memset(&d, 0, sizeof(d));
        struct rio_reader *rd;
        int ret = rio_reader_open(sc, skey, 0, &gcall, &rd);
        if (ret < 0) {
            rc = cp_failed("reading", pos[0], ret);
            goto out;
        }
        int64_t n = (int64_t)rio_reader_desc(rd)->size;
        struct reader_src rs = {.rd = rd};
        ret = rio_put_stream(dc, dkey, (uint64_t)n, 0, reader_fill, &rs, &pcall, &d);
        int gret = rio_reader_close(rd);
        if (rs.err < 0 || (ret == 0 && gret < 0)) {
            rc = cp_failed("reading", pos[0], rs.err < 0 ? rs.err : gret);
            goto out;
        }
        if (ret < 0) {
            rc = cp_failed("writing", pos[1], ret);
            goto out;
        }
        if (json) {
            printf("{\"bytes\":%lld,\"generation\":%llu,\"etag\":\"%s\",\"get\":", (long long)n,
                   (unsigned long long)d.generation, d.etag);
            rio_cli_json_stats(stdout, &gst);
            printf(",\"put\":");
            rio_cli_json_stats(stdout, &pst);
            printf("}\n");
        } else {
            char shown2[1024];
            fprintf(stderr, "cp %s -> %s: %lld bytes, generation %llu, etag %s\nget: ",
                    rio_cli_url_safe(pos[0], shown, sizeof(shown)),
                    rio_cli_url_safe(pos[1], shown2, sizeof(shown2)), (long long)n,
                    (unsigned long long)d.generation, d.etag);
            rio_cli_print_stats(stderr, &gst);
            fprintf(stderr, "put: ");
            rio_cli_print_stats(stderr, &pst);
        }
        rio_desc_cleanup(&d);
        rc = 0;
    }
out:
    free(buf);
    rio_client_destroy(sc);
    rio_client_destroy(dc);
    free(skey);
    free(dkey);
    return rc;
}

int rio_cli_objects(const char *cmd, int argc, char **argv)
{
    if (!strcmp(cmd, "cp"))
        return cmd_cp(argc, argv);
    int json = 0;
    const char *pos[2] = {NULL, NULL};
    int npos = 0;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (npos < 2)
            pos[npos++] = argv[i];
        else {
            fprintf(stderr, "railio %s: too many arguments\n", cmd);
            return 2;
        }
    }
    int need = (!strcmp(cmd, "put") || !strcmp(cmd, "get")) ? 2 : 1;
    if (npos != need) {
        fprintf(stderr, "usage: railio %s URL/KEY%s [--json]\n", cmd, need == 2 ? " FILE|-" : "");
        return 2;
    }
    char shown[1024];
    char *curl = NULL, *key = NULL;
    int ret = split_url(pos[0], &curl, &key);
    if (ret < 0) {
        fprintf(stderr, "railio %s: '%s': %s (expected SCHEME://AUTHORITY/KEY)\n", cmd,
                rio_cli_url_safe(pos[0], shown, sizeof(shown)), rio_strerror(ret));
        return 2;
    }
    struct rio_client *c;
    ret = rio_client_new(curl, NULL, &c);
    if (ret < 0) {
        fprintf(stderr, "railio %s: cannot open '%s': %s (%s)\n", cmd,
                rio_cli_url_safe(curl, shown, sizeof(shown)), rio_strerror(ret), rio_errname(ret));
        free(curl);
        free(key);
        return 1;
    }
    int rc;
    if (!strcmp(cmd, "put"))
        rc = cmd_put(c, key, pos[1], json);
    else if (!strcmp(cmd, "get"))
        rc = cmd_get(c, key, pos[1], json);
    else if (!strcmp(cmd, "stat"))
        rc = cmd_stat(c, key, json);
    else {
        ret = rio_delete(c, key);
        rc = ret < 0;
        if (ret < 0)
            fprintf(stderr, "railio rm: %s: %s (%s)%s%s\n", key, rio_strerror(ret),
                    rio_errname(ret), DETAIL);
    }
    rio_client_destroy(c);
    free(curl);
    free(key);
    return rc;
}
