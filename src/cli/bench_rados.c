/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio bench rados://POOL: PUT and GET goodput of large objects through the
 * rados:// transport at several concurrencies (chunk ops in flight on one
 * path), against what the same cluster gives without the library, in the
 * same run:
 *
 *   aio      a plain librados aio writer/reader written here: the object as
 *            CHUNK-sized RADOS objects, N rados_aio_write_full/rados_aio_read
 *            in flight on one connection, no hashing, no verification, no
 *            head. What railio costs is the gap to this, row by row.
 *   rados    the stock CLI, `rados --striper -b CHUNK put/get` (libradosstriper;
 *            a plain `rados put` of an object over osd_max_object_size fails
 *            with EFBIG), timed from outside, GET to stdout into /dev/null. It
 *            has no concurrency knob: one figure per size.
 *   bench    with --rados-bench SECS: Ceph's own `rados bench SECS write` then
 *            `seq` (CHUNK objects, 16 in flight, its defaults), the figure
 *            the rows with --defaults (railio with no option set: what a
 *            user gets) are held against, with the CPU each side spends.
 *   md5/xxh3 one core hashing the data here (the library's own MD5 and xxh3):
 *            a PUT computes the stream MD5 (the etag) in the calling thread,
 *            in source order, so MD5 caps a PUT at this rate; the PUT with
 *            etag=none shows the same PUT without it.
 *
 * Every figure is the median of --reps runs. railio's GET lands the object in
 * memory with every chunk verified; the aio reader lands it in memory too.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "cli/bench_rados.h"

#ifdef RIO_HAVE_RADOS
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <dlfcn.h>
#include <rados/librados.h>

#include "cli/cli.h"
#include "core/checksum.h"
#include "railio.h"

/*
 * The aio baseline calls librados itself, opened here on first use (as the
 * rados:// module is), so that the railio program does not load the Ceph
 * libraries unless a rados bench runs. Each call below goes through lr.
 */
#define LR_FUNCS(X)                                                                                \
    X(rados_aio_create_completion2)                                                                \
    X(rados_aio_get_return_value)                                                                  \
    X(rados_aio_read)                                                                              \
    X(rados_aio_release)                                                                           \
    X(rados_aio_write_full)                                                                        \
    X(rados_conf_parse_env)                                                                        \
    X(rados_conf_read_file)                                                                        \
    X(rados_conf_set)                                                                              \
    X(rados_connect)                                                                               \
    X(rados_create)                                                                                \
    X(rados_ioctx_create)                                                                          \
    X(rados_ioctx_destroy)                                                                         \
    X(rados_ioctx_set_namespace)                                                                   \
    X(rados_remove)                                                                                \
    X(rados_shutdown)

static struct {
#define LR_FIELD(name) __typeof__(name) *name;
    LR_FUNCS(LR_FIELD)
#undef LR_FIELD
} lr;

/* 0, or -ENOENT after saying which package is missing. */
static int lr_load(void)
{
    void *h, *sym;

    if (lr.rados_create)
        return 0;
    h = dlopen("librados.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "bench rados: %s (apt-get install librados2)\n", dlerror());
        return -ENOENT;
    }
#define LR_SYM(name)                                                                               \
    if (!(sym = dlsym(h, #name))) {                                                                \
        fprintf(stderr, "bench rados: librados.so.2 lacks %s\n", #name);                           \
        dlclose(h);                                                                                \
        memset(&lr, 0, sizeof(lr));                                                                \
        return -ENOENT;                                                                            \
    }                                                                                              \
    memcpy(&lr.name, &sym, sizeof(sym));
    LR_FUNCS(LR_SYM)
#undef LR_SYM
    return 0;
}

#define rados_aio_create_completion2 lr.rados_aio_create_completion2
#define rados_aio_get_return_value lr.rados_aio_get_return_value
#define rados_aio_read lr.rados_aio_read
#define rados_aio_release lr.rados_aio_release
#define rados_aio_write_full lr.rados_aio_write_full
#define rados_conf_parse_env lr.rados_conf_parse_env
#define rados_conf_read_file lr.rados_conf_read_file
#define rados_conf_set lr.rados_conf_set
#define rados_connect lr.rados_connect
#define rados_create lr.rados_create
#define rados_ioctx_create lr.rados_ioctx_create
#define rados_ioctx_destroy lr.rados_ioctx_destroy
#define rados_ioctx_set_namespace lr.rados_ioctx_set_namespace
#define rados_remove lr.rados_remove
#define rados_shutdown lr.rados_shutdown

#define MAXLIST RIO_CLI_LIST_MAX
#define MAXREPS 25
#define BENCH_PREFIX "railio-bench/"
#define AIO_NS "rio.bench" /* the aio baseline's objects, apart from railio's */

struct cfg {
    char pool[256];
    char conf[1024];             /* "" = librados' own search */
    char id[128];                /* "" = admin */
    const char *params;          /* the URL's "?..." part, or "" */
    struct rio_cli_bench_opts o; /* sizes, chunk, reps, json */
    unsigned conc[MAXLIST], nconc;
    bool cli, aio, nomd5, defaults;
    unsigned rb_secs;                          /* --rados-bench: seconds, 0 = not run */
    double rb_write, rb_seq, rb_wcpu, rb_rcpu; /* MB/s and CPU s/GiB, medians */
};

/* Medians over the reps; 0 when not measured, < 0 never. */
struct row {
    uint64_t size;
    unsigned conc;
    double put, put_nomd5, get, aio_w, aio_r; /* MB/s */
    double hash_s;                            /* the MD5 PUT's hashing time */
    double put_cpu, get_cpu;                  /* process CPU s/GiB (all threads) */
    int err;                                  /* first error met, 0 if none */
    const char *err_what;
};

struct base {
    uint64_t size;
    double cli_put, cli_get; /* MB/s, 0 when not run or failed */
};

static void usage(void)
{
    fprintf(stderr,
            "usage: railio bench rados://POOL[?conf=PATH&id=NAME] [options]\n"
            "  --sizes LIST   object sizes (default 256M,1G)\n"
            "  --conc LIST    chunk ops in flight, one path (default 1,2,4,8,16,32)\n"
            "  --chunk SIZE   chunk size = RADOS object size (default 4M)\n"
            "  --reps N       runs of each measurement; the median is shown (default 3)\n"
            "  --no-cli       skip `rados --striper put/get`\n"
            "  --no-aio       skip the plain librados aio writer/reader\n"
            "  --no-nomd5     skip the PUT without the stream MD5 (etag=none)\n"
            "  --defaults     add a row per size with no option set (conc \"def\": the\n"
            "                 library's defaults; its aio baseline keeps 16 in flight)\n"
            "  --rados-bench SECS  run `rados bench SECS write` and `seq` (-t 16, -b CHUNK)\n"
            "                 first, and show each row against them\n"
            "  --json         one JSON document on stdout instead of the table\n"
            "The cluster configuration as for any rados:// URL (?conf=, RIO_CEPH_CONF,\n"
            "librados' search). Objects go under " BENCH_PREFIX " in POOL and are removed.\n");
}

/* Value of URL parameter name in "?a=b&c=d" into out; false if absent. */
static bool url_param(const char *params, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name);
    const char *p = params;

    while (p && *p) {
        p++; /* '?' or '&' */
        if (strncmp(p, name, nl) == 0 && p[nl] == '=') {
            size_t l = strcspn(p + nl + 1, "&");
            if (l >= cap)
                return false;
            memcpy(out, p + nl + 1, l);
            out[l] = '\0';
            return true;
        }
        p = strchr(p, '&');
    }
    return false;
}

static int split_url(const char *url, struct cfg *c)
{
    const char *p, *q;
    size_t n;

    if (strncmp(url, "rados://", 8) != 0)
        return -1;
    p = url + 8;
    n = strcspn(p, "/?");
    if (n == 0 || n >= sizeof(c->pool) || (p[n] == '/' && p[n + 1] != '?' && p[n + 1]))
        return -1; /* the key comes from the bench */
    memcpy(c->pool, p, n);
    c->pool[n] = '\0';
    q = strchr(p, '?');
    c->params = q ? q : "";
    if (!url_param(c->params, "conf", c->conf, sizeof(c->conf))) {
        const char *e = getenv("RIO_CEPH_CONF");
        if (e && *e && strlen(e) < sizeof(c->conf))
            strcpy(c->conf, e);
    }
    if (url_param(c->params, "id", c->id, sizeof(c->id)) && !strncmp(c->id, "client.", 7))
        memmove(c->id, c->id + 7, strlen(c->id + 7) + 1);
    return 0;
}

/* ------------------------------------------------------------ ceilings */

static double md5_mbps(const uint8_t *buf, size_t n)
{
    double best = 0;
    char hex[33];

    for (int k = 0; k < 3; k++) {
        struct rio_md5 m;
        double t0 = rio_cli_now_s();
        if (rio__md5_init(&m) < 0)
            return 0;
        for (size_t off = 0; off < n; off += 4u << 20)
            rio__md5_update(&m, buf + off, n - off < (4u << 20) ? n - off : (4u << 20));
        rio__md5_final(&m, hex);
        double dt = rio_cli_now_s() - t0;
        if (dt > 0 && n / dt / 1e6 > best)
            best = (double)n / dt / 1e6;
    }
    return best;
}

static double xxh3_mbps(const uint8_t *buf, size_t n)
{
    double best = 0;
    volatile uint64_t sink = 0;

    for (int k = 0; k < 3; k++) {
        double t0 = rio_cli_now_s();
        for (size_t off = 0; off < n; off += 4u << 20)
            sink ^= rio__xxh3(buf + off, n - off < (4u << 20) ? n - off : (4u << 20));
        double dt = rio_cli_now_s() - t0;
        if (dt > 0 && n / dt / 1e6 > best)
            best = (double)n / dt / 1e6;
    }
    (void)sink;
    return best;
}

/* CPU seconds of this process (every thread, librados' included), or of
 * its waited-for children. */
static double cpu_s(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
           ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
}

/* ------------------------------------------------------ the rados CLI */

static void cli_base(const struct cfg *c, const char *file, uint64_t size, struct base *b)
{
    char obj[128], bsz[32];
    double put[MAXREPS], get[MAXREPS];
    unsigned np = 0, ng = 0;

    snprintf(obj, sizeof(obj), BENCH_PREFIX "cli-%" PRIu64, size);
    snprintf(bsz, sizeof(bsz), "%" PRIu64, c->o.chunk);
    char *common[] = {
        "rados", "--conf",        (char *)c->conf, "--id", (char *)(c->id[0] ? c->id : "admin"),
        "-p",    (char *)c->pool, "--striper",     "-b",   bsz};
    enum { NC = sizeof(common) / sizeof(common[0]) };
    unsigned skip = c->conf[0] ? 0 : 2; /* no --conf: librados' search */
    char *argv[NC + 5];
    unsigned k;

    for (unsigned r = 0; r < c->o.reps; r++) {
        k = 0;
        argv[k++] = common[0];
        for (unsigned i = 1 + skip; i < NC; i++)
            argv[k++] = common[i];
        argv[k++] = "put";
        argv[k++] = obj;
        argv[k++] = (char *)file;
        argv[k] = NULL;
        double t = rio_cli_run_timed(argv, RIO_CLI_MUTE_OUT);
        if (t > 0)
            put[np++] = (double)size / t / 1e6;
        argv[k - 3] = "get";
        argv[k - 1] = "-";
        t = rio_cli_run_timed(argv, RIO_CLI_MUTE_OUT);
        if (t > 0)
            get[ng++] = (double)size / t / 1e6;
        argv[k - 3] = "rm";
        argv[k - 1] = NULL;
        /* libradosstriper 16.2 sometimes aborts in its shutdown after the
         * removal is done: its backtrace is not ours to show. */
        if (rio_cli_run_timed(argv, RIO_CLI_MUTE_OUT | RIO_CLI_MUTE_ERR) < 0)
            rio_cli_run_timed(
                argv, RIO_CLI_MUTE_OUT |
                          RIO_CLI_MUTE_ERR); /* once more, should it have died before removing */
    }
    b->cli_put = np == c->o.reps ? rio_cli_median(put, np) : 0;
    b->cli_get = ng == c->o.reps ? rio_cli_median(get, ng) : 0;
}

/* ------------------------------------------------------ rados bench */

#define RB_CONC 16 /* rados bench's own default -t */

/* Run `rados ... ARGS` through the shell: its "Bandwidth (MB/sec)" (MiB/s)
 * in MB/s, and in *cpu the CPU its process spent per GiB moved ("Total time
 * run" x bandwidth); 0 when it failed. */
static double rb_run(const struct cfg *c, const char *args, double *cpu)
{
    char cmd[2048], line[512];
    double mibs = 0, secs = 0, c0 = cpu_s(RUSAGE_CHILDREN);

    if (strchr(c->conf, '\'') || strchr(c->pool, '\'') || strchr(c->id, '\''))
        return 0;
    snprintf(cmd, sizeof(cmd), "rados %s%s%s --id '%s' -p '%s' %s 2>/dev/null",
             c->conf[0] ? "--conf '" : "", c->conf, c->conf[0] ? "'" : "",
             c->id[0] ? c->id : "admin", c->pool, args);
    FILE *f = popen(cmd, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Bandwidth (MB/sec): %lf", &mibs) != 1)
            sscanf(line, "Total time run: %lf", &secs);
    int st = pclose(f);
    double gib = mibs * secs / 1024;
    *cpu = gib > 0 ? (cpu_s(RUSAGE_CHILDREN) - c0) / gib : 0;
    return st == 0 ? mibs * 1.048576 : 0;
}

/* --rados-bench: write then seq, --reps times; medians into c. */
static void rb_base(struct cfg *c)
{
    double w[MAXREPS], r[MAXREPS], wc[MAXREPS], rc[MAXREPS], cpu;
    char args[256];

    for (unsigned i = 0; i < c->o.reps; i++) {
        snprintf(args, sizeof(args),
                 "bench %u write -t %d -b %" PRIu64 " --no-cleanup --run-name railio-bench",
                 c->rb_secs, RB_CONC, c->o.chunk);
        w[i] = rb_run(c, args, &wc[i]);
        snprintf(args, sizeof(args), "bench %u seq -t %d --run-name railio-bench", c->rb_secs,
                 RB_CONC);
        rc[i] = 0;
        r[i] = w[i] > 0 ? rb_run(c, args, &rc[i]) : 0;
        rb_run(c, "cleanup --run-name railio-bench", &cpu);
    }
    c->rb_write = rio_cli_median(w, c->o.reps);
    c->rb_seq = rio_cli_median(r, c->o.reps);
    c->rb_wcpu = rio_cli_median(wc, c->o.reps);
    c->rb_rcpu = rio_cli_median(rc, c->o.reps);
}

/* ---------------------------------------------- the plain aio baseline */

struct aio_run {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    unsigned inflight;
};

static void aio_done(rados_completion_t comp, void *arg)
{
    struct aio_run *r = arg;
    (void)comp;
    pthread_mutex_lock(&r->mu);
    r->inflight--;
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static void aio_name(char *out, size_t cap, uint64_t size, uint64_t i)
{
    snprintf(out, cap, BENCH_PREFIX "aio-%" PRIu64 ".%016" PRIx64, size, i);
}

/*
 * Move size bytes as chunk objects with conc ops in flight, each op issued
 * as soon as one completes. write: src -> objects; else objects -> dst.
 * MB/s, or a negative error.
 */
static double aio_pass(rados_ioctx_t io, bool write, uint8_t *buf, uint64_t size, uint64_t chunk,
                       unsigned conc)
{
    uint64_t n = (size + chunk - 1) / chunk;
    rados_completion_t *comp = calloc((size_t)n, sizeof(*comp));
    struct aio_run r = {.inflight = 0};
    char name[128];
    int err = 0;
    uint64_t issued = 0;

    if (!comp)
        return -ENOMEM;
    pthread_mutex_init(&r.mu, NULL);
    pthread_cond_init(&r.cv, NULL);
    double t0 = rio_cli_now_s();
    for (; issued < n; issued++) {
        uint64_t off = issued * chunk, len = size - off < chunk ? size - off : chunk;
        pthread_mutex_lock(&r.mu);
        while (r.inflight >= conc)
            pthread_cond_wait(&r.cv, &r.mu);
        r.inflight++;
        pthread_mutex_unlock(&r.mu);
        aio_name(name, sizeof(name), size, issued);
        err = rados_aio_create_completion2(&r, aio_done, &comp[issued]);
        if (err == 0)
            err = write ? rados_aio_write_full(io, name, comp[issued], (char *)buf + off, len)
                        : rados_aio_read(io, name, comp[issued], (char *)buf + off, len, 0);
        if (err < 0) {
            if (comp[issued])
                rados_aio_release(comp[issued]);
            comp[issued] = NULL;
            pthread_mutex_lock(&r.mu);
            r.inflight--;
            pthread_mutex_unlock(&r.mu);
            break;
        }
    }
    pthread_mutex_lock(&r.mu);
    while (r.inflight > 0)
        pthread_cond_wait(&r.cv, &r.mu);
    pthread_mutex_unlock(&r.mu);
    double dt = rio_cli_now_s() - t0;
    for (uint64_t i = 0; i < issued; i++) {
        uint64_t off = i * chunk, len = size - off < chunk ? size - off : chunk;
        int ret = rados_aio_get_return_value(comp[i]);
        rados_aio_release(comp[i]);
        if (err == 0 && ret < 0)
            err = ret;
        else if (err == 0 && !write && (uint64_t)ret != len)
            err = RIO_ESHORT;
    }
    free(comp);
    pthread_cond_destroy(&r.cv);
    pthread_mutex_destroy(&r.mu);
    if (err < 0)
        return err;
    return dt > 0 ? (double)size / dt / 1e6 : 0;
}

static void aio_cleanup(rados_ioctx_t io, uint64_t size, uint64_t chunk)
{
    char name[128];
    for (uint64_t i = 0; i < (size + chunk - 1) / chunk; i++) {
        aio_name(name, sizeof(name), size, i);
        rados_remove(io, name);
    }
}

static int aio_connect(const struct cfg *c, rados_t *cl, rados_ioctx_t *io)
{
    int ret = lr_load();

    if (ret < 0)
        return ret;
    ret = rados_create(cl, c->id[0] ? c->id : "admin");
    if (ret < 0)
        return ret;
    if ((ret = rados_conf_read_file(*cl, c->conf[0] ? c->conf : NULL)) < 0 ||
        (ret = rados_conf_parse_env(*cl, NULL)) < 0)
        goto err;
    /* As the transport does: the in-flight cap is the bench's, not librados'
     * (whose 100 MiB default would throttle 32 x 4 MiB). */
    rados_conf_set(*cl, "objecter_inflight_op_bytes", "1099511627776");
    rados_conf_set(*cl, "objecter_inflight_ops", "1048576");
    rados_conf_set(*cl, "rados_osd_op_timeout", "120");
    rados_conf_set(*cl, "client_mount_timeout", "30");
    if ((ret = rados_connect(*cl)) < 0)
        goto err;
    if ((ret = rados_ioctx_create(*cl, c->pool, io)) < 0)
        goto err;
    rados_ioctx_set_namespace(*io, AIO_NS);
    return 0;
err:
    rados_shutdown(*cl);
    return ret;
}

/* ------------------------------------------------------------- railio */

static int open_client(const struct cfg *c, unsigned conc, bool nomd5, struct rio_client **out)
{
    char url[2048];
    struct rio_options o;

    rio_options_init(&o);
    if (conc) { /* conc 0: the library's defaults, nothing set */
        o.chunk_size = c->o.chunk;
        o.depth = conc;
        o.paths = 1;
        o.op_timeout_ms = 120000;
        o.deadline_ms = 3600000;
        /* The window, never the budget, limits what is in flight. */
        o.budget_bytes = 2ull * conc * c->o.chunk + c->o.chunk;
    }
    snprintf(url, sizeof(url), "rados://%s%s%s%s", c->pool, c->params,
             nomd5 ? (c->params[0] ? "&" : "?") : "", nomd5 ? "etag=none" : "");
    return rio_cli_bench_open(url, &o, out);
}

static void fail(struct row *rw, int err, const char *what)
{
    if (!rw->err) {
        rw->err = err;
        rw->err_what = what;
    }
}

/* Open a client (etag=none when nomd5) and PUT the row's object: 0 with *d
 * filled, or the error, recorded in rw. *cl is NULL when no client opened;
 * else the caller destroys it. */
static int put_one(const struct cfg *c, struct row *rw, bool nomd5, const char *key,
                   const uint8_t *src, struct rio_call *call, struct rio_desc *d,
                   struct rio_client **cl, double *cpu)
{
    int ret = open_client(c, rw->conc, nomd5, cl);

    if (ret < 0) {
        *cl = NULL;
        fail(rw, ret, nomd5 ? "client etag=none" : "client");
        return ret;
    }
    memset(d, 0, sizeof(*d));
    double c0 = cpu_s(RUSAGE_SELF);
    ret = rio_put(*cl, key, src, rw->size, call, d);
    if (cpu)
        *cpu = cpu_s(RUSAGE_SELF) - c0;
    if (ret < 0)
        fail(rw, ret, nomd5 ? "PUT etag=none" : "PUT");
    return ret;
}

/* One rep of one row: aio write/read, railio PUT/GET, PUT without MD5. */
static void run_rep(const struct cfg *c, rados_ioctx_t io, const uint8_t *src, uint8_t *dst,
                    struct row *rw, double v[7][MAXREPS], double *hash, unsigned rep)
{
    struct rio_client *cl = NULL;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    char key[128];
    int ret;

    snprintf(key, sizeof(key), BENCH_PREFIX "railio-%" PRIu64, rw->size);
    if (c->aio && io) {
        unsigned conc = rw->conc ? rw->conc : RB_CONC;
        double w = aio_pass(io, true, (uint8_t *)src, rw->size, c->o.chunk, conc);
        double r = w > 0 ? aio_pass(io, false, dst, rw->size, c->o.chunk, conc) : w;
        if (w < 0 || r < 0)
            fail(rw, (int)(w < 0 ? w : r), "aio");
        else if (memcmp(dst, src, rw->size) != 0)
            fail(rw, RIO_ECHECKSUM, "aio read-back");
        v[3][rep] = w > 0 ? w : 0;
        v[4][rep] = r > 0 ? r : 0;
        aio_cleanup(io, rw->size, c->o.chunk);
        memset(dst, 0, rw->size);
    }

    double gib = (double)rw->size / (1u << 30), c0;
    ret = put_one(c, rw, false, key, src, &call, &d, &cl, &c0);
    if (!cl)
        return;
    if (ret == 0) {
        v[5][rep] = c0 / gib;
        v[0][rep] = st.goodput_mbps;
        hash[rep] = st.hash_ns / 1e9;
        rio_desc_cleanup(&d);
        c0 = cpu_s(RUSAGE_SELF);
        int64_t got = rio_get(cl, key, dst, rw->size, &call);
        v[6][rep] = (cpu_s(RUSAGE_SELF) - c0) / gib;
        if (got < 0)
            fail(rw, (int)got, "GET");
        else if ((uint64_t)got != rw->size || memcmp(dst, src, rw->size) != 0)
            fail(rw, RIO_ECHECKSUM, "GET read-back");
        else
            v[2][rep] = st.goodput_mbps;
        memset(dst, 0, rw->size);
        rio_delete(cl, key);
    }
    rio_client_destroy(cl);

    if (!c->nomd5)
        return;
    ret = put_one(c, rw, true, key, src, &call, &d, &cl, NULL);
    if (!cl)
        return;
    if (ret == 0) {
        if (d.etag[0])
            fail(rw, RIO_ENOTSUP, "etag=none"); /* this build computed the MD5 anyway */
        else
            v[1][rep] = st.goodput_mbps;
        rio_desc_cleanup(&d);
    }
    rio_delete(cl, key);
    rio_client_destroy(cl);
}

static void run_row(const struct cfg *c, rados_ioctx_t io, const uint8_t *src, uint8_t *dst,
                    struct row *rw)
{
    double v[7][MAXREPS], hash[MAXREPS];

    memset(v, 0, sizeof(v));
    memset(hash, 0, sizeof(hash));
    for (unsigned r = 0; r < c->o.reps; r++)
        run_rep(c, io, src, dst, rw, v, hash, r);
    rw->put = rio_cli_median(v[0], c->o.reps);
    rw->put_nomd5 = rio_cli_median(v[1], c->o.reps);
    rw->get = rio_cli_median(v[2], c->o.reps);
    rw->aio_w = rio_cli_median(v[3], c->o.reps);
    rw->aio_r = rio_cli_median(v[4], c->o.reps);
    rw->hash_s = rio_cli_median(hash, c->o.reps);
    rw->put_cpu = rio_cli_median(v[5], c->o.reps);
    rw->get_cpu = rio_cli_median(v[6], c->o.reps);
}

static double ratio(double a, double b)
{
    return a > 0 && b > 0 ? a / b : 0;
}

/* PUT rate if the MD5 did not overlap the writes: one after the other. */
static double serial_mbps(double md5, double nomd5)
{
    return md5 > 0 && nomd5 > 0 ? 1.0 / (1.0 / md5 + 1.0 / nomd5) : 0;
}

static void print_json(const struct cfg *c, const struct row *rows, unsigned nrows,
                       const struct base *bases, double md5, double xxh, double memcpy_mbps,
                       const double l0[3], const double l1[3])
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("{\"bench\":\"rados\",\"pool\":\"%s\",\"chunk\":%" PRIu64 ",\"paths\":1,\"reps\":%u,"
           "\"cores\":%ld,\"loadavg_start\":[%.2f,%.2f,%.2f],\"loadavg_end\":[%.2f,%.2f,%.2f],"
           "\"ceilings\":{\"md5_mbps\":%.0f,\"xxh3_mbps\":%.0f,\"memcpy_mbps\":%.0f},"
           "\"rados_bench\":{\"secs\":%u,\"conc\":%d,\"write_mbps\":%.1f,\"seq_mbps\":%.1f,"
           "\"write_cpu_s_gib\":%.3f,\"seq_cpu_s_gib\":%.3f},\"cli\":[",
           c->pool, c->o.chunk, c->o.reps, ncpu, l0[0], l0[1], l0[2], l1[0], l1[1], l1[2], md5, xxh,
           memcpy_mbps, c->rb_secs, RB_CONC, c->rb_write, c->rb_seq, c->rb_wcpu, c->rb_rcpu);
    for (unsigned i = 0; i < c->o.nsizes; i++)
        printf("%s{\"size\":%" PRIu64 ",\"rados_put_mbps\":%.1f,\"rados_get_mbps\":%.1f}",
               i ? "," : "", bases[i].size, bases[i].cli_put, bases[i].cli_get);
    printf("],\"rows\":[");
    for (unsigned i = 0; i < nrows; i++) {
        const struct row *r = &rows[i];
        printf("%s{\"size\":%" PRIu64 ",\"conc\":%u,\"put_mbps\":%.1f,\"put_nomd5_mbps\":%.1f,"
               "\"get_mbps\":%.1f,\"aio_write_mbps\":%.1f,\"aio_read_mbps\":%.1f,"
               "\"put_hash_s\":%.3f,\"put_of_aio\":%.3f,\"get_of_aio\":%.3f,"
               "\"put_of_md5\":%.3f,\"serial_mbps\":%.1f,\"overlap_gain\":%.3f,"
               "\"put_cpu_s_gib\":%.3f,\"get_cpu_s_gib\":%.3f,\"put_of_rados_bench\":%.3f,"
               "\"get_of_rados_bench\":%.3f,\"error\":\"%s\",\"error_at\":\"%s\"}",
               i ? "," : "", r->size, r->conc, r->put, r->put_nomd5, r->get, r->aio_w, r->aio_r,
               r->hash_s, ratio(r->put, r->aio_w), ratio(r->get, r->aio_r), ratio(r->put, md5),
               serial_mbps(md5, r->put_nomd5), ratio(r->put, serial_mbps(md5, r->put_nomd5)),
               r->put_cpu, r->get_cpu, ratio(r->put, c->rb_write), ratio(r->get, c->rb_seq),
               r->err ? rio_errname(r->err) : "", r->err_what ? r->err_what : "");
    }
    printf("]}\n");
}

static void print_table(const struct cfg *c, const struct row *rows, unsigned nrows,
                        const struct base *bases, double md5, double xxh, double memcpy_mbps,
                        const double l0[3], const double l1[3])
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    printf("railio bench rados: pool %s, chunk %" PRIu64 " MiB, 1 path, %ld cores, median of "
           "%u\n",
           c->pool, c->o.chunk >> 20, ncpu, c->o.reps);
    printf("load average: %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end\n", l0[0], l0[1],
           l0[2], l1[0], l1[1], l1[2]);
    printf("one core, measured now: MD5 %.0f MB/s, xxh3 %.0f MB/s, memcpy %.0f MB/s\n", md5, xxh,
           memcpy_mbps);
    for (unsigned i = 0; i < c->o.nsizes; i++)
        printf("rados --striper put/get, %" PRIu64 " MiB: PUT %.0f MB/s, GET %.0f MB/s\n",
               bases[i].size >> 20, bases[i].cli_put, bases[i].cli_get);
    if (c->rb_secs)
        printf("rados bench %u s, -t %d: write %.0f MB/s (%.2f CPU s/GiB), seq %.0f MB/s "
               "(%.2f CPU s/GiB)\n",
               c->rb_secs, RB_CONC, c->rb_write, c->rb_wcpu, c->rb_seq, c->rb_rcpu);
    printf("\n| size | conc | PUT | PUT etag=none | aio write | PUT/aio | GET | aio read | "
           "GET/aio | PUT/MD5 | serial | overlap | hash s | PUT cpu | GET cpu | PUT/bench | "
           "GET/bench |\n");
    printf("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (unsigned i = 0; i < nrows; i++) {
        const struct row *r = &rows[i];
        double ser = serial_mbps(md5, r->put_nomd5);
        char conc[16];
        snprintf(conc, sizeof(conc), r->conc ? "%u" : "def", r->conc);
        printf("| %" PRIu64 " MiB | %s | %.0f | %.0f | %.0f | %.2f | %.0f | %.0f | %.2f | %.2f | "
               "%.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f |",
               r->size >> 20, conc, r->put, r->put_nomd5, r->aio_w, ratio(r->put, r->aio_w), r->get,
               r->aio_r, ratio(r->get, r->aio_r), ratio(r->put, md5), ser, ratio(r->put, ser),
               r->hash_s, r->put_cpu, r->get_cpu, ratio(r->put, c->rb_write),
               ratio(r->get, c->rb_seq));
        if (r->err)
            printf(" %s: %s", r->err_what, rio_errname(r->err));
        printf("\n");
    }
    printf("\nMB/s = 1e6 B/s. PUT hashes (xxh3 per chunk, MD5 of the stream in the calling\n"
           "thread); etag=none skips the MD5. aio = librados aio, same chunks, same ops in\n"
           "flight, no hashing. PUT/MD5 = PUT over the one-core MD5 rate (its cap); serial =\n"
           "1/(1/MD5 + 1/PUT etag=none), the PUT if hashing did not overlap the writes;\n"
           "overlap = PUT / serial. hash s = time the PUT spent hashing. cpu = this process's\n"
           "CPU s/GiB (librados' threads included). conc def = no option set (the library's\n"
           "defaults; aio at 16). PUT/bench, GET/bench: over `rados bench` write and seq.\n");
}

int rio_cli_bench_rados(int argc, char **argv)
{
    struct cfg c = {.o = {.chunk = 4u << 20, .reps = 3}, .cli = true, .aio = true, .nomd5 = true};
    static const unsigned def_conc[] = {1, 2, 4, 8, 16, 32};
    struct row rows[MAXLIST * (MAXLIST + 1)];
    struct base bases[MAXLIST];
    unsigned nrows = 0;
    uint64_t maxsize;
    char file[512];
    double l0[3], l1[3];
    rados_t acl = NULL;
    rados_ioctx_t aio = NULL;
    int ret = 0;

    int status = rio_cli_bench_target(argc, argv, usage);
    if (status >= 0)
        return status;
    c.o.sizes[0] = 256u << 20;
    c.o.sizes[1] = 1u << 30;
    c.o.nsizes = 2;
    memcpy(c.conc, def_conc, sizeof(def_conc));
    c.nconc = 6;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *n = i + 1 < argc ? argv[i + 1] : NULL;
        int k;
        if (rio_cli_bench_opt(&c.o, MAXREPS, argc, argv, &i)) {
            continue;
        } else if (!strcmp(a, "--conc") && n &&
                   (k = rio_cli_parse_counts(n, c.conc, MAXLIST, 1024)) > 0) {
            c.nconc = (unsigned)k;
            i++;
        } else if (!strcmp(a, "--no-cli")) {
            c.cli = false;
        } else if (!strcmp(a, "--no-aio")) {
            c.aio = false;
        } else if (!strcmp(a, "--no-nomd5")) {
            c.nomd5 = false;
        } else if (!strcmp(a, "--defaults")) {
            c.defaults = true;
        } else if (!strcmp(a, "--rados-bench") && n && (k = atoi(n)) > 0 && k <= 600) {
            c.rb_secs = (unsigned)k;
            i++;
        } else {
            return rio_cli_bench_other("rados", a, usage);
        }
    }
    if (split_url(argv[0], &c) < 0) {
        fprintf(stderr, "railio bench rados: need rados://POOL[?conf=PATH]\n");
        return 2;
    }
    maxsize = rio_cli_bench_max_size(&c.o);
    if (maxsize > SIZE_MAX / 2) {
        fprintf(stderr, "railio bench rados: size too large\n");
        return 2;
    }
    if (c.cli && !rio_cli_have_program("rados"))
        c.cli = false;

    uint8_t *src, *dst;
    if (rio_cli_bench_buffers("railio bench rados", maxsize, &src, &dst) < 0)
        return 1;
    rio_cli_loadavg(l0);
    size_t hn = maxsize < (256u << 20) ? maxsize : (256u << 20);
    double md5 = md5_mbps(src, hn), xxh = xxh3_mbps(src, hn);
    double mcp = rio_cli_memcpy_mbps(hn);
    if (c.aio) {
        ret = aio_connect(&c, &acl, &aio);
        if (ret < 0) {
            fprintf(stderr, "railio bench rados: librados connect to pool %s: %s\n", c.pool,
                    strerror(-ret));
            free(src);
            free(dst);
            return 1;
        }
    }
    rio_cli_bench_path(file, sizeof(file), "rados");
    if (c.rb_secs && rio_cli_have_program("rados")) {
        rb_base(&c);
        if (!c.o.json)
            fprintf(stderr,
                    "  rados bench: write %.0f MB/s (%.2f CPU s/GiB), seq %.0f MB/s (%.2f)\n",
                    c.rb_write, c.rb_wcpu, c.rb_seq, c.rb_rcpu);
    }

    for (unsigned si = 0; si < c.o.nsizes && ret == 0; si++) {
        uint64_t size = c.o.sizes[si];
        struct base *b = &bases[si];
        memset(b, 0, sizeof(*b));
        b->size = size;
        if (c.cli) {
            if (rio_cli_write_file("railio bench rados", file, src, size) < 0) {
                ret = 1;
                break;
            }
            cli_base(&c, file, size, b);
            unlink(file);
            if (!c.o.json)
                fprintf(stderr, "  %" PRIu64 " MiB rados --striper: PUT %.0f GET %.0f MB/s\n",
                        size >> 20, b->cli_put, b->cli_get);
        }
        for (unsigned ci = c.defaults ? 0 : 1; ci <= c.nconc; ci++) {
            struct row *rw = &rows[nrows++];
            memset(rw, 0, sizeof(*rw));
            rw->size = size;
            rw->conc = ci ? c.conc[ci - 1] : 0; /* 0: the library's defaults */
            run_row(&c, aio, src, dst, rw);
            if (rw->err && rw->err != RIO_ENOTSUP)
                ret = 1;
            if (!c.o.json)
                fprintf(stderr,
                        "  %" PRIu64 " MiB conc %u: PUT %.0f (etag=none %.0f, aio %.0f) GET %.0f "
                        "(aio %.0f) MB/s%s%s\n",
                        size >> 20, rw->conc, rw->put, rw->put_nomd5, rw->aio_w, rw->get, rw->aio_r,
                        rw->err ? " error at " : "", rw->err ? rw->err_what : "");
        }
    }
    rio_cli_loadavg(l1);
    if (c.o.json)
        print_json(&c, rows, nrows, bases, md5, xxh, mcp, l0, l1);
    else
        print_table(&c, rows, nrows, bases, md5, xxh, mcp, l0, l1);
    if (aio)
        rados_ioctx_destroy(aio);
    if (acl)
        rados_shutdown(acl);
    free(src);
    free(dst);
    return ret;
}

#else /* !RIO_HAVE_RADOS */
#include <stdio.h>

int rio_cli_bench_rados(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    fprintf(stderr, "railio bench rados: built without librados (RIO_WITH_RADOS)\n");
    return 2;
}
#endif
