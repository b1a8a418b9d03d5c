/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio bench file:///DIR: sequential and random reads and writes through
 * the file:// transport, swept over chunk size, queues and commands in flight
 * per queue, each row against fio with the same block size, queues (fio jobs,
 * one ring each), depth per queue and direct flag, run right after railio on
 * the same file system. The ratio railio/fio is the figure that matters:
 * absolute rates on a shared disk move run to run.
 *
 * What each mode measures (docs/file.md says why):
 *   seqwrite  rio_put of one SIZE object in CHUNK chunks (hashing, the
 *             temporary file, the commit's fsync when sync=1 and the rename
 *             included) vs fio rw=write over SIZE, end_fsync when sync=1.
 *   seqread   rio_get of that object (every chunk verified against its
 *             xxh3) vs fio rw=read of the same file.
 *   randwrite rio_batch PUT of N objects of CHUNK bytes in shuffled order vs
 *             fio rw=randwrite of N x CHUNK bytes over one file.
 *   randread  rio_batch GET of those N objects in shuffled order (a lookup
 *             and a file open per object) vs fio rw=randread over a file of
 *             the same size. The engine reads whole objects, so "random
 *             reads" are many one-chunk objects: the honest unit of a random
 *             read in an object store.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_file.h"
#include "cli/cli.h"
#include "core/url.h"
#include "railio.h"
#ifdef RIO_HAVE_URING
#include "transport/file/file.h"
#endif

#define MAXLIST 16

enum { M_SEQWRITE = 0, M_SEQREAD, M_RANDWRITE, M_RANDREAD, M__COUNT };
static const char *const mode_names[M__COUNT] = {"seqwrite", "seqread", "randwrite", "randread"};

struct cfg {
    const char *url;    /* as given */
    char dir[4096];     /* the directory */
    const char *params; /* the URL's "?..." part, or "" */
    uint64_t size;
    uint64_t chunks[MAXLIST];
    unsigned nchunks;
    unsigned queues[MAXLIST], nqueues;
    unsigned inflight[MAXLIST], ninflight;
    bool modes[M__COUNT];
    int direct; /* 0 or 1 */
    bool sync;
    unsigned reps;
    unsigned rand_objects;
    bool fio, json, detail;
    const char *fio_bin;
};

/* Where a railio run's time went (--detail), per op or per object. */
struct detail {
    double elapsed_s;
    uint64_t ops, objects;
    double engine_us, caller_us, wait_us; /* CPU per op: engine thread, caller; run-queue wait */
    double lat_p50_us, peak_ops;          /* op latency; peak ops in flight */
    double hash_pct;                      /* caller hashing, % of elapsed */
    double submits_per_op;
    double lookup_us, open_us, commit_us, sync_us; /* metadata per object */
    double meta_pct;                               /* serial metadata, % of elapsed */
};

struct row {
    int mode;
    uint64_t bs, bytes;
    unsigned queues, inflight;
    double railio_mbps, fio_mbps;
    double fio_files_mbps; /* rand modes: fio over one file per object */
    int err;
};

static void usage(void)
{
    fprintf(stderr,
            "usage: railio bench file:///DIR[?direct=0|1&sync=0|1] [options]\n"
            "  --size SIZE        bytes per sequential run (default 256M)\n"
            "  --chunks LIST      chunk = fio block size (default 128K,2M)\n"
            "  --queues LIST      io_uring rings = fio jobs (default 1,4)\n"
            "  --inflight LIST    commands in flight per queue = fio iodepth (default 1,8)\n"
            "  --modes LIST       seqwrite,seqread,randwrite,randread (default all)\n"
            "  --rand-objects N   objects per random run, at most (default SIZE / smallest\n"
            "                     chunk, at most 4096: as many bytes as a sequential run)\n"
            "  --reps N           runs of each side per row; the median is shown (default 1)\n"
            "  --no-fio           railio only\n"
            "  --fio PATH         the fio program (default fio)\n"
            "  --json             one JSON document on stdout instead of the table\n"
            "  --detail           after each row, where railio's time went (CPU per op,\n"
            "                     latency, metadata per object)\n"
            "The transport's direct and sync come from the URL (defaults: direct=1 here, sync=1);\n"
            "fio runs with the same direct flag and end_fsync=sync.\n");
}

static int parse_list_size(const char *s, uint64_t *out, unsigned *n)
{
    int k = rio_cli_parse_list(s, out, MAXLIST);
    if (k < 0)
        return -1;
    *n = (unsigned)k;
    return 0;
}

static int parse_list_uint(const char *s, unsigned *out, unsigned *n, unsigned max)
{
    uint64_t v[MAXLIST];

    if (parse_list_size(s, v, n) < 0)
        return -1;
    for (unsigned i = 0; i < *n; i++) {
        if (v[i] > max)
            return -1;
        out[i] = (unsigned)v[i];
    }
    return 0;
}

/* "file:///a/b?x=y" -> dir "/a/b", params "?x=y". */
static int split_url(struct cfg *c)
{
    const char *p = c->url, *q;
    size_t n;

    if (strncmp(p, "file://", 7) != 0)
        return -1;
    p += 7;
    if (strncmp(p, "localhost/", 10) == 0)
        p += 9;
    if (*p != '/')
        return -1;
    q = strchr(p, '?');
    n = q ? (size_t)(q - p) : strlen(p);
    if (n == 0 || n >= sizeof(c->dir))
        return -1;
    memcpy(c->dir, p, n);
    c->dir[n] = '\0';
    while (n > 1 && c->dir[n - 1] == '/')
        c->dir[--n] = '\0';
    c->params = q ? q : "";
    c->direct = 1;
    c->sync = true;
    if (q) {
        /* The transport's own syntax for both (rio__opt_*): direct=auto runs
         * direct here, as the bench's default does. */
        struct rio_url u;
        const char *v;
        int direct = 1, ret;

        if (rio__url_parse(c->url, &u) < 0)
            return -1;
        ret = (v = rio__url_param(&u, "direct")) ? rio__opt_tristate("direct", v, "auto", &direct)
                                                 : 0;
        if (ret == 0 && (v = rio__url_param(&u, "sync")))
            ret = rio__opt_bool("sync", v, &c->sync);
        rio__url_cleanup(&u);
        if (ret < 0) {
            fprintf(stderr, "railio bench: %s\n", rio_error_detail());
            return -2; /* said */
        }
        c->direct = direct != 0;
    }
    return 0;
}

static int parse_args(struct cfg *c, int argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h"))
        return -1;
    c->url = argv[0];
    int sr = split_url(c);
    if (sr == -2)
        return -1;
    if (sr < 0) {
        fprintf(stderr, "railio bench: expected file:///DIR, got '%s'\n", argv[0]);
        return -1;
    }
    c->size = 256ull << 20;
    c->chunks[0] = 128 << 10;
    c->chunks[1] = 2 << 20;
    c->nchunks = 2;
    c->queues[0] = 1;
    c->queues[1] = 4;
    c->nqueues = 2;
    c->inflight[0] = 1;
    c->inflight[1] = 8;
    c->ninflight = 2;
    for (int m = 0; m < M__COUNT; m++)
        c->modes[m] = true;
    c->reps = 1;
    c->rand_objects = 0; /* SIZE / CHUNK, at most 4096 */
    c->fio = true;
    c->fio_bin = "fio";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--json")) {
            c->json = true;
            continue;
        }
        if (!strcmp(a, "--no-fio")) {
            c->fio = false;
            continue;
        }
        if (!strcmp(a, "--detail")) {
            c->detail = true;
            continue;
        }
        if (!v)
            return -1;
        i++;
        if (!strcmp(a, "--size")) {
            bad = rio_cli_parse_size(v, &c->size) < 0 || c->size == 0;
        } else if (!strcmp(a, "--chunks")) {
            bad = parse_list_size(v, c->chunks, &c->nchunks) < 0;
            for (unsigned k = 0; !bad && k < c->nchunks; k++)
                bad = c->chunks[k] < 4096 || c->chunks[k] > (1u << 30) || c->chunks[k] % 4096;
        } else if (!strcmp(a, "--queues")) {
            bad = parse_list_uint(v, c->queues, &c->nqueues, RIO_MAX_PATHS) < 0;
            for (unsigned k = 0; !bad && k < c->nqueues; k++)
                bad = c->queues[k] == 0;
        } else if (!strcmp(a, "--inflight")) {
            bad = parse_list_uint(v, c->inflight, &c->ninflight, 1024) < 0;
            for (unsigned k = 0; !bad && k < c->ninflight; k++)
                bad = c->inflight[k] == 0;
        } else if (!strcmp(a, "--modes")) {
            char buf[128], *save = NULL, *tok;
            memset(c->modes, 0, sizeof(c->modes));
            bad = strlen(v) >= sizeof(buf);
            if (!bad) {
                strcpy(buf, v);
                for (tok = strtok_r(buf, ",", &save); tok && !bad;
                     tok = strtok_r(NULL, ",", &save)) {
                    int m;
                    for (m = 0; m < M__COUNT && strcmp(tok, mode_names[m]); m++)
                        ;
                    bad = m == M__COUNT;
                    if (!bad)
                        c->modes[m] = true;
                }
            }
        } else if (!strcmp(a, "--rand-objects")) {
            uint64_t n;
            bad = rio_cli_parse_size(v, &n) < 0 || n == 0 || n > 65536;
            c->rand_objects = (unsigned)n;
        } else if (!strcmp(a, "--reps")) {
            uint64_t n;
            bad = rio_cli_parse_size(v, &n) < 0 || n == 0 || n > 99;
            c->reps = (unsigned)n;
        } else if (!strcmp(a, "--fio")) {
            c->fio_bin = v;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "railio bench: bad option %s %s\n", a, v);
            return -1;
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ fio */

/*
 * Run argv, capture its stdout (malloc'd, NUL-terminated). Returns the exit
 * status, or -1 if it could not run. posix_spawn, not fork: a fork marks every
 * page of this process copy-on-write, and railio's next run would then take
 * a page fault on each 4 KiB of its buffer it writes, enough to make a small
 * read's figure meaningless.
 */
static int run_capture(char *const argv[], char **out)
{
    posix_spawn_file_actions_t fa;
    int pfd[2], status, ret;
    size_t len = 0, cap = 65536;
    char *buf;
    pid_t pid;

    *out = NULL;
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    if (posix_spawn_file_actions_init(&fa) != 0) {
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    ret = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (ret != 0) {
        close(pfd[0]);
        return -1;
    }
    buf = malloc(cap);
    for (;;) {
        ssize_t n;
        if (buf && len + 4096 > cap) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
            } else {
                buf = nb;
                cap *= 2;
            }
        }
        if (!buf) {
            char sink[4096];
            n = read(pfd[0], sink, sizeof(sink));
        } else {
            n = read(pfd[0], buf + len, cap - len - 1);
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        if (buf)
            len += (size_t)n;
    }
    close(pfd[0]);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (buf)
        buf[len] = '\0';
    *out = buf;
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

/* bw_bytes of the "read" or "write" section of fio's JSON (group reporting). */
static double fio_bw(const char *json, const char *dir)
{
    char key[32];
    const char *p, *b;

    snprintf(key, sizeof(key), "\"%s\" : {", dir);
    p = strstr(json, key);
    if (!p)
        return -1;
    b = strstr(p, "\"bw_bytes\" : ");
    if (!b)
        return -1;
    return strtod(b + 13, NULL);
}

/* Run fio (argv), MB/s of its "read" or "write" section; -1 on failure. */
static double fio_mbps(char *const argv[], const char *dir)
{
    char *out = NULL;
    int st = run_capture(argv, &out);
    double bw;

    if (st != 0 || !out) {
        free(out);
        return -1;
    }
    bw = fio_bw(out, dir);
    free(out);
    return bw < 0 ? -1 : bw / 1e6;
}

/* The text of the options every fio run here shares. */
struct fio_common {
    char jobs[32], depth[32], direct[32];
};

/* Append those options at argv[n] (after the job's --name): q jobs at
 * depth on io_uring, direct as the transport's, fsync, one JSON report.
 * Returns the new count. */
static int fio_common_args(const struct cfg *c, char **argv, int n, struct fio_common *b,
                           unsigned q, unsigned depth, char *fsync)
{
    snprintf(b->jobs, sizeof(b->jobs), "--numjobs=%u", q);
    snprintf(b->depth, sizeof(b->depth), "--iodepth=%u", depth);
    snprintf(b->direct, sizeof(b->direct), "--direct=%d", c->direct);
    argv[n++] = "--ioengine=io_uring";
    argv[n++] = b->jobs;
    argv[n++] = b->depth;
    argv[n++] = b->direct;
    argv[n++] = fsync;
    argv[n++] = "--group_reporting";
    argv[n++] = "--output-format=json";
    return n;
}

static double run_fio(const struct cfg *c, int mode, const char *file, uint64_t bs, uint64_t bytes,
                      unsigned q, unsigned depth)
{
    static const char *const rw[M__COUNT] = {"write", "read", "randwrite", "randread"};
    char a_file[4400], a_bs[64], a_size[64], a_rw[32], a_off[64], a_io[64], a_fsync[32];
    struct fio_common common;
    char *argv[24];
    int n = 0;
    bool rnd = mode == M_RANDREAD || mode == M_RANDWRITE;
    uint64_t per = bytes / q / bs * bs;

    if (per == 0)
        per = bs;
    snprintf(a_file, sizeof(a_file), "--filename=%s", file);
    snprintf(a_bs, sizeof(a_bs), "--bs=%llu", (unsigned long long)bs);
    snprintf(a_rw, sizeof(a_rw), "--rw=%s", rw[mode]);
    /* Durability as railio's: a sequential PUT syncs once at its commit, a
     * random PUT is one object, committed (synced) each. */
    if (c->sync && mode == M_RANDWRITE)
        snprintf(a_fsync, sizeof(a_fsync), "--fsync=1");
    else
        snprintf(a_fsync, sizeof(a_fsync), "--end_fsync=%d", c->sync && mode == M_SEQWRITE);
    /* railio's PUT always writes a new file (then renames it): so does fio. */
    if (mode == M_SEQWRITE || mode == M_RANDWRITE)
        unlink(file);
    argv[n++] = (char *)c->fio_bin;
    argv[n++] = "--name=railio-bench";
    argv[n++] = a_file;
    argv[n++] = a_rw;
    argv[n++] = a_bs;
    n = fio_common_args(c, argv, n, &common, q, depth, a_fsync);
    if (rnd) {
        /* Every job over the whole file, each moving its share. */
        snprintf(a_size, sizeof(a_size), "--size=%llu", (unsigned long long)(per * q));
        snprintf(a_io, sizeof(a_io), "--io_size=%llu", (unsigned long long)per);
        argv[n++] = a_size;
        argv[n++] = a_io;
        argv[n++] = "--randrepeat=0";
        argv[n++] = "--norandommap";
    } else {
        /* One slice per job, read or written in order, like a queue of chunks. */
        snprintf(a_size, sizeof(a_size), "--size=%llu", (unsigned long long)per);
        snprintf(a_off, sizeof(a_off), "--offset_increment=%llu", (unsigned long long)per);
        argv[n++] = a_size;
        argv[n++] = a_off;
    }
    if (mode == M_SEQREAD || mode == M_RANDREAD)
        argv[n++] = "--readonly";
    argv[n] = NULL;
    return fio_mbps(argv, mode == M_SEQREAD || mode == M_RANDREAD ? "read" : "write");
}

/*
 * fio over one file per object, the random modes' like-for-like ceiling:
 * randwrite creates each file and writes its one block (with fsync=1 when
 * sync: every object durable, as railio's commit makes it, less the rename
 * and the directory fsync), randread reads each file's block once. dir is
 * emptied before a write run. MB/s, or -1.
 */
static double run_fio_files(const struct cfg *c, int mode, const char *dir, uint64_t bs,
                            unsigned nobj, unsigned q, unsigned depth)
{
    char a_dir[4400], a_bs[64], a_fs[64], a_nr[64], a_fsync[32], a_open[32];
    struct fio_common common;
    char *argv[24];
    unsigned per = nobj / q ? nobj / q : 1;
    bool wr = mode == M_RANDWRITE;
    int n = 0;

    if (wr) {
        char p[4600];
        for (unsigned j = 0; j < q; j++)
            for (unsigned i = 0; i < per; i++) {
                snprintf(p, sizeof(p), "%s/o.%u.%u", dir, j, i);
                unlink(p);
            }
    }
    snprintf(a_dir, sizeof(a_dir), "--directory=%s", dir);
    snprintf(a_bs, sizeof(a_bs), "--bs=%llu", (unsigned long long)bs);
    snprintf(a_fs, sizeof(a_fs), "--filesize=%llu", (unsigned long long)bs);
    snprintf(a_nr, sizeof(a_nr), "--nrfiles=%u", per);
    snprintf(a_open, sizeof(a_open), "--openfiles=%u", depth);
    snprintf(a_fsync, sizeof(a_fsync), "--fsync=%d", wr && c->sync);
    argv[n++] = (char *)c->fio_bin;
    argv[n++] = "--name=o";
    argv[n++] = a_dir;
    argv[n++] = "--filename_format=$jobname.$jobnum.$filenum";
    argv[n++] = wr ? "--rw=write" : "--rw=read";
    argv[n++] = a_bs;
    argv[n++] = a_fs;
    argv[n++] = a_nr;
    argv[n++] = "--file_service_type=sequential";
    argv[n++] = a_open;
    n = fio_common_args(c, argv, n, &common, q, depth, a_fsync);
    if (wr)
        argv[n++] = "--create_on_open=1";
    argv[n] = NULL;
    return fio_mbps(argv, wr ? "write" : "read");
}

static void rm_fio_files(const char *dir, unsigned nobj, unsigned qmax)
{
    char p[4600];

    for (unsigned j = 0; j < qmax; j++)
        for (unsigned i = 0; i < nobj; i++) {
            snprintf(p, sizeof(p), "%s/o.%u.%u", dir, j, i);
            if (unlink(p) < 0 && i > 0)
                break;
        }
    rmdir(dir);
}

/* --------------------------------------------------------------- railio */

static int client_open(const struct cfg *c, uint64_t bs, unsigned q, unsigned depth,
                       struct rio_client **out)
{
    struct rio_options o;
    char url[4096 + 1024 + 64];

    rio_options_init(&o);
    o.chunk_size = bs;
    o.paths = q;
    o.depth = depth;
    o.budget_bytes = (uint64_t)q * depth * bs + bs;
    if (o.budget_bytes < (256ull << 20))
        o.budget_bytes = 256ull << 20;
    o.deadline_ms = 600000;
    o.op_timeout_ms = 60000;
    /* The URL's options but its direct=, which c->direct decided (an
     * option given twice is refused). */
    char params[1024] = "";
    size_t pl = 0;
    for (const char *p = *c->params ? c->params + 1 : ""; *p;) {
        size_t l = strcspn(p, "&");
        if (!(l >= 7 && !strncmp(p, "direct=", 7)) && pl + l + 2 < sizeof(params)) {
            char sep = pl ? '&' : '?';
            params[pl++] = sep;
            memcpy(params + pl, p, l);
            pl += l;
            params[pl] = '\0';
        }
        p += l + (p[l] == '&');
    }
    int n = snprintf(url, sizeof(url), "file://%s/railio-bench%s%sdirect=%d", c->dir, params,
                     pl ? "&" : "?", c->direct);
    if (n < 0 || (size_t)n >= sizeof(url))
        return -ENAMETOOLONG;
    return rio_client_new(url, &o, out);
}

/* Drop the file's pages from the page cache (buffered runs start cold). */
static void drop_cache(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return;
    fdatasync(fd);
    posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
}

struct rand_set {
    unsigned n, cap;
    char (*keys)[32];
    unsigned *order;
};

static void shuffle(unsigned *a, unsigned n, uint64_t *rng)
{
    for (unsigned i = n; i > 1; i--) {
        *rng ^= *rng << 13;
        *rng ^= *rng >> 7;
        *rng ^= *rng << 17;
        unsigned j = (unsigned)(*rng % i);
        unsigned t = a[i - 1];
        a[i - 1] = a[j];
        a[j] = t;
    }
}

static void detail_fill(struct detail *d, struct rio_client *cl, const struct rio_stats *st,
                        double dt, uint64_t bs, uint64_t objects)
{
    double ops = st->chunks ? (double)st->chunks : 1;

    memset(d, 0, sizeof(*d));
    d->elapsed_s = dt;
    d->ops = st->chunks;
    d->objects = objects;
    d->engine_us = (double)st->engine_cpu_ns / 1e3 / ops;
    d->caller_us = (double)st->caller_cpu_ns / 1e3 / ops;
    d->wait_us = (double)st->cpu_wait_ns / 1e3 / ops;
    d->lat_p50_us = (double)st->lat_p50_ns / 1e3;
    d->peak_ops = (double)st->peak_inflight_bytes / (double)bs;
    d->hash_pct = dt > 0 ? (double)st->hash_ns / 1e9 / dt * 100 : 0;
#ifdef RIO_HAVE_URING
    struct rio_file_counters fc;
    if (rio_file_counters(cl, &fc) == 0) {
        double n = objects ? (double)objects : 1;
        d->submits_per_op = (double)fc.submits / ops;
        d->lookup_us = (double)fc.lookup_ns / 1e3 / n;
        d->open_us = (double)fc.put_open_ns / 1e3 / n;
        d->commit_us = (double)fc.commit_ns / 1e3 / n;
        d->sync_us = (double)fc.commit_sync_ns / 1e3 / n;
        d->meta_pct =
            dt > 0 ? (double)(fc.lookup_ns + fc.put_open_ns + fc.commit_ns) / 1e9 / dt * 100 : 0;
    }
#else
    (void)cl;
#endif
}

/* One railio run of a mode; MB/s, or < 0 (the error) on failure. With det,
 * where its time went. */
static double run_railio(const struct cfg *c, int mode, uint64_t bs, uint8_t *buf,
                         struct rand_set *rs, unsigned q, unsigned depth, uint64_t *rng,
                         struct detail *det)
{
    struct rio_client *cl;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    double t0, dt, bytes;
    uint64_t objects = 1;
    int ret;

    ret = client_open(c, bs, q, depth, &cl);
    if (ret < 0)
        return ret;
    if (mode == M_SEQWRITE || mode == M_SEQREAD) {
        if (mode == M_SEQREAD && !c->direct) {
            char p[4200];
            snprintf(p, sizeof(p), "%s/railio-bench/seq", c->dir);
            drop_cache(p);
        }
        if (mode == M_SEQWRITE) {
            /* A fresh file, as fio's: replacing the last run's object would
             * charge its deletion (with discard) to this run. */
            char p[4200];
            snprintf(p, sizeof(p), "%s/railio-bench/seq", c->dir);
            unlink(p);
        }
        t0 = rio_cli_now_s();
        if (mode == M_SEQWRITE)
            ret = rio_put(cl, "seq", buf, c->size, &call, NULL);
        else {
            int64_t g = rio_get(cl, "seq", buf, c->size, &call);
            ret = g == (int64_t)c->size ? 0 : g < 0 ? (int)g : RIO_ESHORT;
        }
        dt = rio_cli_now_s() - t0;
        bytes = (double)c->size;
    } else {
        struct rio_op *ops = calloc(rs->n, sizeof(*ops));
        if (!ops) {
            rio_client_destroy(cl);
            return -ENOMEM;
        }
        shuffle(rs->order, rs->n, rng);
        for (unsigned i = 0; i < rs->n; i++) {
            unsigned k = rs->order[i];
            ops[i].type = mode == M_RANDWRITE ? RIO_OP_PUT : RIO_OP_GET;
            ops[i].key = rs->keys[k];
            ops[i].buf = buf + (size_t)k * bs;
            ops[i].len = bs;
            char p[4200];
            snprintf(p, sizeof(p), "%s/railio-bench/%s", c->dir, rs->keys[k]);
            if (mode == M_RANDREAD && !c->direct)
                drop_cache(p);
            if (mode == M_RANDWRITE)
                unlink(p); /* new objects, as fio's new files */
        }
        t0 = rio_cli_now_s();
        ret = rio_batch(cl, ops, rs->n, &call);
        dt = rio_cli_now_s() - t0;
        if (ret >= 0 && (unsigned)ret != rs->n) {
            for (unsigned i = 0; i < rs->n; i++)
                if (ops[i].result < 0) {
                    ret = (int)ops[i].result;
                    break;
                }
        } else if (ret >= 0) {
            ret = 0;
        }
        free(ops);
        bytes = (double)rs->n * (double)bs;
        objects = rs->n;
    }
    if (det)
        detail_fill(det, cl, &st, dt, bs, objects);
    rio_client_destroy(cl);
    if (ret < 0)
        return ret;
    return dt > 0 ? bytes / dt / 1e6 : 0;
}

/* ---------------------------------------------------------------- output */

static void print_header(const struct cfg *c)
{
    struct utsname un;
    struct statfs fs;
    const char *fst = "?";
    double load;

    if (statfs(c->dir, &fs) == 0)
        fst = fs.f_type == 0xEF53       ? "ext4/ext3"
              : fs.f_type == 0x01021994 ? "tmpfs"
              : fs.f_type == 0x58465342 ? "xfs"
              : fs.f_type == 0x9123683E ? "btrfs"
                                        : "other";
    uname(&un);
    if (getloadavg(&load, 1) != 1)
        load = -1;
    char shown[1024];
    printf("railio bench %s: file system %s, kernel %s, %ld cores, load average %.1f\n",
           rio_cli_url_safe(c->url, shown, sizeof(shown)), fst, un.release,
           sysconf(_SC_NPROCESSORS_ONLN), load);
    printf("size %llu MiB, direct=%d, sync=%d, reps %u (median), ceiling: fio (io_uring) same "
           "run\n\n",
           (unsigned long long)(c->size >> 20), c->direct, c->sync, c->reps);
    printf("%-10s %6s %6s %8s %12s %10s %7s %10s %7s\n", "mode", "chunk", "queues", "inflight",
           "railio MB/s", "fio MB/s", "ratio", "fio-files", "ratio");
}

static void print_row(const struct row *r)
{
    char bs[32];

    if (r->bs >= (1u << 20))
        snprintf(bs, sizeof(bs), "%lluM", (unsigned long long)(r->bs >> 20));
    else
        snprintf(bs, sizeof(bs), "%lluK", (unsigned long long)(r->bs >> 10));
    if (r->err) {
        printf("%-10s %6s %6u %8u   error %d %s\n", mode_names[r->mode], bs, r->queues, r->inflight,
               r->err, rio_errname(r->err));
        return;
    }
    printf("%-10s %6s %6u %8u %12.0f", mode_names[r->mode], bs, r->queues, r->inflight,
           r->railio_mbps);
    if (r->fio_mbps > 0)
        printf(" %10.0f %7.2f", r->fio_mbps, r->railio_mbps / r->fio_mbps);
    else
        printf(" %10s %7s", "-", "-");
    if (r->fio_files_mbps > 0)
        printf(" %10.0f %7.2f\n", r->fio_files_mbps, r->railio_mbps / r->fio_files_mbps);
    else
        printf(" %10s %7s\n", "-", "-");
    fflush(stdout);
}

/* The last railio run of the row: where its time went. */
static void print_detail(const struct detail *d)
{
    printf("    railio: %.3f s, %llu ops, %llu objects; per op: engine CPU %.1f us, caller CPU "
           "%.1f us, run-queue wait %.1f us, latency p50 %.0f us, %.2f submits; peak in flight "
           "%.1f ops; hashing %.0f%%\n",
           d->elapsed_s, (unsigned long long)d->ops, (unsigned long long)d->objects, d->engine_us,
           d->caller_us, d->wait_us, d->lat_p50_us, d->submits_per_op, d->peak_ops, d->hash_pct);
    if (d->lookup_us > 0 || d->open_us > 0 || d->commit_us > 0)
        printf("    per object: lookup %.0f us, put_open %.0f us, commit %.0f us (fsyncs %.0f us); "
               "metadata %.0f%% of the time\n",
               d->lookup_us, d->open_us, d->commit_us, d->sync_us, d->meta_pct);
    fflush(stdout);
}

static void print_json(const struct cfg *c, const struct row *rows, unsigned n)
{
    char shown[1024];
    printf("{\"url\":\"%s\",\"size\":%llu,\"direct\":%d,\"sync\":%d,\"reps\":%u,\"rows\":[",
           rio_cli_url_safe(c->url, shown, sizeof(shown)), (unsigned long long)c->size, c->direct,
           c->sync, c->reps);
    for (unsigned i = 0; i < n; i++) {
        const struct row *r = &rows[i];
        printf("%s{\"mode\":\"%s\",\"chunk\":%llu,\"bytes\":%llu,\"queues\":%u,\"inflight\":%u,"
               "\"railio_mbps\":%.1f,\"fio_mbps\":%.1f,\"ratio\":%.3f,\"fio_files_mbps\":%.1f,"
               "\"error\":%d}",
               i ? "," : "", mode_names[r->mode], (unsigned long long)r->bs,
               (unsigned long long)r->bytes, r->queues, r->inflight, r->railio_mbps, r->fio_mbps,
               r->fio_mbps > 0 ? r->railio_mbps / r->fio_mbps : 0.0, r->fio_files_mbps, r->err);
    }
    printf("]}\n");
}

/* ------------------------------------------------------------------ main */

static int rm_tree_files(const char *dir, const struct rand_set *rs)
{
    char p[4200];

    for (unsigned i = 0; rs && i < rs->cap; i++) {
        snprintf(p, sizeof(p), "%s/railio-bench/%s", dir, rs->keys[i]);
        unlink(p);
    }
    snprintf(p, sizeof(p), "%s/railio-bench/rand", dir);
    rmdir(p);
    snprintf(p, sizeof(p), "%s/railio-bench/seq", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/railio-bench/fio-w", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/railio-bench/fio-rw", dir);
    unlink(p);
    snprintf(p, sizeof(p), "%s/railio-bench", dir);
    return rmdir(p);
}

int rio_cli_bench_file(int argc, char **argv)
{
    struct cfg c;
    struct row *rows;
    unsigned nrows = 0, maxrows;
    uint64_t maxbs = 0, rng = 0x243f6a8885a308d3ull;
    struct rand_set rs = {0};
    uint8_t *buf = NULL;
    char path[4200], seqfile[4300], fiow[4300], fio_dir[4300];
    unsigned qmax = 1;
    int rc = 0;

    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h"))
            return rio_cli_bench_other("file://", argv[i], usage);
    if (parse_args(&c, argc, argv) < 0) {
        usage();
        return 2;
    }
    for (unsigned i = 0; i < c.nchunks; i++)
        maxbs = c.chunks[i] > maxbs ? c.chunks[i] : maxbs;
    snprintf(path, sizeof(path), "%s/railio-bench", c.dir);
    if (mkdir(path, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "railio bench: mkdir %s: %s\n", path, strerror(errno));
        return 1;
    }
    snprintf(seqfile, sizeof(seqfile), "%s/seq", path);
    snprintf(fio_dir, sizeof(fio_dir), "%s/fio-files", path);
    if (c.fio && mkdir(fio_dir, 0755) < 0 && errno != EEXIST) {
        fprintf(stderr, "railio bench: mkdir %s: %s\n", fio_dir, strerror(errno));
        return 1;
    }
    snprintf(fiow, sizeof(fiow), "%s/fio-w", path);
    if (!c.rand_objects) {
        /* The random rows move as much as the sequential ones: a run of a
         * few hundred small objects is over in milliseconds, and one
         * scheduling hiccup then moves its figure by half. */
        uint64_t minbs = maxbs;
        for (unsigned i = 0; i < c.nchunks; i++)
            minbs = c.chunks[i] < minbs ? c.chunks[i] : minbs;
        uint64_t n = minbs ? c.size / minbs : 1;
        c.rand_objects = n < 1 ? 1 : n > 4096 ? 4096 : (unsigned)n;
    }
    rs.keys = calloc(c.rand_objects, sizeof(*rs.keys));
    rs.cap = c.rand_objects;
    for (unsigned i = 0; rs.keys && i < rs.cap; i++)
        snprintf(rs.keys[i], sizeof(rs.keys[i]), "rand/%05u", i);
    rs.order = calloc(c.rand_objects, sizeof(*rs.order));
    maxrows = c.nchunks * c.nqueues * c.ninflight * M__COUNT;
    rows = calloc(maxrows, sizeof(*rows));
    /* A random run moves at most SIZE bytes (one chunk if SIZE is less). */
    size_t bufsz = c.size > maxbs ? c.size : maxbs;
    if (!rs.keys || !rs.order || !rows || posix_memalign((void **)&buf, 4096, bufsz) != 0) {
        fprintf(stderr, "railio bench: out of memory\n");
        rc = 1;
        goto out;
    }
    rio_cli_fill(buf, bufsz, 1);
    if (!c.json)
        print_header(&c);

    for (unsigned ci = 0; ci < c.nchunks; ci++) {
        uint64_t bs = c.chunks[ci];
        rs.n = (unsigned)(c.size / bs < c.rand_objects ? c.size / bs : c.rand_objects);
        if (rs.n == 0)
            rs.n = 1;
        for (unsigned i = 0; i < rs.n; i++)
            rs.order[i] = i;
        /* fio's files of the last chunk size have the wrong size now. */
        for (unsigned qi = 0; qi < c.nqueues; qi++)
            qmax = c.queues[qi] > qmax ? c.queues[qi] : qmax;
        if (c.fio) {
            rm_fio_files(fio_dir, rs.cap, qmax);
            mkdir(fio_dir, 0755);
        }
        for (int m = 0; m < M__COUNT; m++) {
            if (!c.modes[m])
                continue;
            /* Reads need their objects: written by the write mode of this
             * chunk size, or here when that mode is off. */
            if (m == M_RANDREAD && c.fio && !c.modes[M_SEQWRITE] && !c.modes[M_SEQREAD] &&
                run_railio(&c, M_SEQWRITE, bs, buf, &rs, 1, 8, &rng, NULL) < 0) {
                /* fio's random reads go over the sequential object's file. */
                fprintf(stderr, "railio bench: setup failed\n");
                rc = 1;
                goto out;
            }
            if ((m == M_SEQREAD && !c.modes[M_SEQWRITE]) ||
                (m == M_RANDREAD && !c.modes[M_RANDWRITE])) {
                double r = run_railio(&c, m == M_SEQREAD ? M_SEQWRITE : M_RANDWRITE, bs, buf, &rs,
                                      1, 8, &rng, NULL);
                if (r < 0) {
                    fprintf(stderr, "railio bench: setup failed: %s\n", rio_errname((int)r));
                    rc = 1;
                    goto out;
                }
            }
            for (unsigned qi = 0; qi < c.nqueues; qi++) {
                for (unsigned ii = 0; ii < c.ninflight; ii++) {
                    struct row *r = &rows[nrows++];
                    double rv[99], fv[99], ffv[99];
                    struct detail det;
                    unsigned nf = 0, nff = 0;
                    r->mode = m;
                    r->bs = bs;
                    r->queues = c.queues[qi];
                    r->inflight = c.inflight[ii];
                    r->bytes = m == M_SEQREAD || m == M_SEQWRITE ? c.size : (uint64_t)rs.n * bs;
                    for (unsigned k = 0; k < c.reps && !r->err; k++) {
                        /* Alternate who goes first: the second reader of a
                         * file often finds it warmer (host caches). */
                        bool fio_first = c.fio && (k + nrows) % 2 == 1;
                        const char *f = m == M_SEQWRITE || m == M_RANDWRITE ? fiow : seqfile;
                        double fb = -1, v;
                        if (fio_first)
                            fb = run_fio(&c, m, f, bs, r->bytes, r->queues, r->inflight);
                        v = run_railio(&c, m, bs, buf, &rs, r->queues, r->inflight, &rng, &det);
                        if (v < 0) {
                            r->err = (int)v;
                            break;
                        }
                        rv[k] = v;
                        if (c.fio && !fio_first)
                            fb = run_fio(&c, m, f, bs, r->bytes, r->queues, r->inflight);
                        if (fb > 0)
                            fv[nf++] = fb;
                        if (c.fio && (m == M_RANDWRITE || m == M_RANDREAD)) {
                            double ff =
                                run_fio_files(&c, m, fio_dir, bs, rs.n, r->queues, r->inflight);
                            if (ff > 0)
                                ffv[nff++] = ff;
                        }
                    }
                    if (!r->err) {
                        r->railio_mbps = rio_cli_median(rv, c.reps);
                        r->fio_mbps = nf ? rio_cli_median(fv, nf) : 0;
                        r->fio_files_mbps = nff ? rio_cli_median(ffv, nff) : 0;
                    } else {
                        rc = 1;
                    }
                    if (!c.json)
                        print_row(r);
                    if (!c.json && c.detail && !r->err)
                        print_detail(&det);
                }
            }
        }
    }
    if (c.json)
        print_json(&c, rows, nrows);
out:
    if (c.fio)
        rm_fio_files(fio_dir, rs.cap, qmax);
    rm_tree_files(c.dir, &rs);
    free(buf);
    free(rows);
    free(rs.keys);
    free(rs.order);
    return rc;
}
