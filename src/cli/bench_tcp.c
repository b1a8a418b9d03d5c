/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio bench railio://HOST:PORT[?options] | serve: a sweep of object size x
 * concurrency x depth x batch against a railiod, GETs (and with --put PUTs),
 * every chunk verified by the engine and every object compared once per row.
 *
 * A row: C caller threads share one client (depth D per connection); each
 * thread owns B objects of size S and calls rio_get (B = 1) or rio_batch of
 * B GETs into buffers it touched beforehand, again and again for --secs.
 * Reported: goodput (all bytes over the row's wall time), the call latency
 * percentiles, the median first-done and last-done chunk times of a call,
 * the peak bytes in flight of any call, the process's peak RSS, retries and
 * the last call's verdict. With --ceiling, iperf3's single-stream loopback
 * figure is measured first, in the same run, and every row shows its ratio
 * to it. docs/bench.md has the figures and how they were taken.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tcp_cli.h"
#include "railio.h"

#define MAX_LIST 8
#define MAX_CALLS 100000

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* "4M", "64MiB", "1G", "4096" */
/* ----------------------------------------------------------------- iperf3 */

static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), port = -1;

    if (fd < 0)
        return -1;
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 &&
        getsockname(fd, (struct sockaddr *)&sa, &sl) == 0)
        port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/*
 * iperf3's single-stream figure on loopback (bits/s, receiver side), from
 * `iperf3 -s -1` and `iperf3 -c 127.0.0.1 -t secs -J`; 0 when iperf3 is
 * missing or fails (why says so).
 */
static double iperf3_bps(unsigned secs, char *why, size_t cap)
{
    int port = free_port();
    char ps[16], cmd[256];
    double bps = 0;

    snprintf(why, cap, "ok");
    if (system("command -v iperf3 >/dev/null 2>&1") != 0) {
        snprintf(why, cap, "iperf3 not installed (scripts/install-deps.sh installs it)");
        return 0;
    }
    if (port <= 0) {
        snprintf(why, cap, "no free port");
        return 0;
    }
    snprintf(ps, sizeof(ps), "%d", port);
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        snprintf(why, cap, "fork: %s", strerror(errno));
        return 0;
    }
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execlp("iperf3", "iperf3", "-s", "-1", "-B", "127.0.0.1", "-p", ps, (char *)NULL);
        _exit(127);
    }
    snprintf(cmd, sizeof(cmd), "iperf3 -c 127.0.0.1 -p %d -t %u -J 2>/dev/null", port, secs);
    for (int attempt = 0; attempt < 20 && bps == 0; attempt++) {
        usleep(100000);
        FILE *f = popen(cmd, "r");
        if (!f)
            break;
        static char out[1 << 20];
        size_t n = fread(out, 1, sizeof(out) - 1, f);
        out[n] = '\0';
        int st = pclose(f);
        char *p = strstr(out, "\"sum_received\"");
        if (p && (p = strstr(p, "\"bits_per_second\":")))
            bps = strtod(p + 18, NULL);
        if (bps == 0 && st != 0 && !strstr(out, "Connection refused") &&
            !strstr(out, "connection refused"))
            break;
    }
    if (bps == 0)
        snprintf(why, cap, "iperf3 run failed");
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    return bps;
}

/* ------------------------------------------------------------------- rows */

struct setup {
    struct rio_client *c;
    uint64_t size;
    unsigned batch;
    int put;
    double secs;
    uint8_t *src; /* the pattern object; object j differs in its first 8 bytes */
};

struct worker {
    struct setup *s;
    unsigned id;
    uint8_t **bufs;   /* batch buffers, touched */
    char (*keys)[48]; /* batch keys */
    uint64_t *lat;    /* call latencies */
    uint64_t *first, *last;
    uint64_t ncalls, bytes, retries, peak;
    struct rio_stats last_st;
    int err;
};

struct result {
    int ok, err, skipped;
    double mbps, ratio;
    uint64_t p50, p95, p99, first_med, last_med, peak, rss_kib, retries, calls;
    char verdict[16], verdict_text[192];
};

static void obj_fill(const struct setup *s, unsigned j, uint8_t *dst)
{
    uint64_t tag = j;
    memcpy(dst, s->src, s->size);
    memcpy(dst, &tag, s->size < 8 ? s->size : 8);
}

static void *worker_main(void *p)
{
    struct worker *w = p;
    struct setup *s = w->s;
    struct rio_op *ops = calloc(s->batch, sizeof(*ops));
    uint64_t t_end = now_ns() + (uint64_t)(s->secs * 1e9);

    if (!ops) {
        w->err = -ENOMEM;
        return NULL;
    }
    while (w->ncalls < MAX_CALLS && (w->ncalls < 2 || now_ns() < t_end)) {
        struct rio_stats st;
        struct rio_call call = {.stats = &st};
        uint64_t t0 = now_ns();
        int ret;
        if (s->batch == 1 && !s->put) {
            int64_t n = rio_get(s->c, w->keys[0], w->bufs[0], s->size, &call);
            ret = n < 0 ? (int)n : (uint64_t)n == s->size ? 0 : RIO_ESHORT;
        } else if (s->batch == 1) {
            ret = rio_put(s->c, w->keys[0], w->bufs[0], s->size, &call, NULL);
        } else {
            for (unsigned k = 0; k < s->batch; k++) {
                ops[k].type = s->put ? RIO_OP_PUT : RIO_OP_GET;
                ops[k].key = w->keys[k];
                ops[k].buf = w->bufs[k];
                ops[k].len = s->size;
            }
            ret = rio_batch(s->c, ops, s->batch, &call);
            if (ret >= 0 && (unsigned)ret != s->batch) {
                for (unsigned k = 0; k < s->batch; k++)
                    if (ops[k].result < 0)
                        ret = (int)ops[k].result;
            } else if (ret >= 0) {
                ret = 0;
            }
        }
        if (ret < 0) {
            w->err = ret;
            break;
        }
        w->lat[w->ncalls] = now_ns() - t0;
        w->first[w->ncalls] = st.first_done_ns;
        w->last[w->ncalls] = st.last_done_ns;
        w->ncalls++;
        w->bytes += s->size * s->batch;
        w->retries += st.retries_total;
        if (st.peak_inflight_bytes > w->peak)
            w->peak = st.peak_inflight_bytes;
        w->last_st = st;
    }
    free(ops);
    return NULL;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static uint64_t pct(uint64_t *v, uint64_t n, double q)
{
    if (!n)
        return 0;
    uint64_t i = (uint64_t)(q * (double)(n - 1) + 0.5);
    return v[i < n ? i : n - 1];
}

/* Objects 0..count-1 of this size exist on the server. */
static int ensure_objects(struct rio_client *c, const struct setup *s, unsigned count,
                          unsigned *have, uint8_t *tmp)
{
    for (unsigned j = *have; j < count; j++) {
        char key[48];
        snprintf(key, sizeof(key), "bench/%" PRIu64 "/%u", s->size, j);
        obj_fill(s, j, tmp);
        int ret = rio_put(c, key, tmp, s->size, NULL, NULL);
        if (ret < 0)
            return ret;
        *have = j + 1;
    }
    return 0;
}

static void run_row(struct setup *s, unsigned conc, struct result *res)
{
    struct worker *w = calloc(conc, sizeof(*w));
    pthread_t *th = calloc(conc, sizeof(*th));
    uint64_t *all = NULL;
    int err = 0;

    memset(res, 0, sizeof(*res));
    if (!w || !th) {
        res->err = -ENOMEM;
        goto out;
    }
    for (unsigned i = 0; i < conc && !err; i++) {
        w[i].s = s;
        w[i].id = i;
        w[i].bufs = calloc(s->batch, sizeof(uint8_t *));
        w[i].keys = calloc(s->batch, sizeof(*w[i].keys));
        w[i].lat = calloc(MAX_CALLS, sizeof(uint64_t));
        w[i].first = calloc(MAX_CALLS, sizeof(uint64_t));
        w[i].last = calloc(MAX_CALLS, sizeof(uint64_t));
        if (!w[i].bufs || !w[i].keys || !w[i].lat || !w[i].first || !w[i].last) {
            err = -ENOMEM;
            break;
        }
        for (unsigned k = 0; k < s->batch; k++) {
            unsigned j = i * s->batch + k;
            w[i].bufs[k] = malloc(s->size ? s->size : 1);
            if (!w[i].bufs[k]) {
                err = -ENOMEM;
                break;
            }
            /* Touch every page now: the row measures the network, not faults. */
            if (s->put)
                obj_fill(s, j, w[i].bufs[k]);
            else
                memset(w[i].bufs[k], 0, s->size);
            snprintf(w[i].keys[k], sizeof(w[i].keys[k]), "bench/%" PRIu64 "/%u", s->size, j);
        }
    }
    if (err) {
        res->err = err;
        goto out;
    }
    uint64_t t0 = now_ns();
    for (unsigned i = 0; i < conc; i++)
        pthread_create(&th[i], NULL, worker_main, &w[i]);
    for (unsigned i = 0; i < conc; i++)
        pthread_join(th[i], NULL);
    double wall = (double)(now_ns() - t0) / 1e9;

    uint64_t n = 0, bytes = 0;
    for (unsigned i = 0; i < conc; i++) {
        if (w[i].err && !res->err)
            res->err = w[i].err;
        n += w[i].ncalls;
        bytes += w[i].bytes;
        res->retries += w[i].retries;
        if (w[i].peak > res->peak)
            res->peak = w[i].peak;
    }
    if (res->err)
        goto out;
    /* The bytes of the last call of each thread are the objects, exactly. */
    if (!s->put) {
        uint8_t *want = malloc(s->size ? s->size : 1);
        for (unsigned i = 0; want && i < conc && !res->err; i++)
            for (unsigned k = 0; k < s->batch; k++) {
                obj_fill(s, i * s->batch + k, want);
                if (memcmp(want, w[i].bufs[k], s->size) != 0) {
                    res->err = RIO_ECHECKSUM;
                    break;
                }
            }
        free(want);
        if (res->err)
            goto out;
    }
    all = malloc(n * sizeof(uint64_t) * 3 + 1);
    if (!all) {
        res->err = -ENOMEM;
        goto out;
    }
    uint64_t *lat = all, *first = all + n, *last = all + 2 * n, m = 0;
    for (unsigned i = 0; i < conc; i++)
        for (uint64_t k = 0; k < w[i].ncalls; k++, m++) {
            lat[m] = w[i].lat[k];
            first[m] = w[i].first[k];
            last[m] = w[i].last[k];
        }
    qsort(lat, n, sizeof(uint64_t), cmp_u64);
    qsort(first, n, sizeof(uint64_t), cmp_u64);
    qsort(last, n, sizeof(uint64_t), cmp_u64);
    res->ok = 1;
    res->calls = n;
    res->mbps = (double)bytes / wall / 1e6;
    res->p50 = pct(lat, n, 0.50);
    res->p95 = pct(lat, n, 0.95);
    res->p99 = pct(lat, n, 0.99);
    res->first_med = pct(first, n, 0.5);
    res->last_med = pct(last, n, 0.5);
    snprintf(res->verdict, sizeof(res->verdict), "%s", rio_verdict_name(w[0].last_st.verdict));
    snprintf(res->verdict_text, sizeof(res->verdict_text), "%s", w[0].last_st.verdict_text);
out : {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        res->rss_kib = (uint64_t)ru.ru_maxrss;
}
    for (unsigned i = 0; w && i < conc; i++) {
        for (unsigned k = 0; w[i].bufs && k < s->batch; k++)
            free(w[i].bufs[k]);
        free(w[i].bufs);
        free(w[i].keys);
        free(w[i].lat);
        free(w[i].first);
        free(w[i].last);
    }
    free(all);
    free(w);
    free(th);
}

struct rowdef {
    int put;
    uint64_t conc, depth;
    unsigned batch;
};

/* The run of row r with the median goodput (failed runs count as 0). */
static const struct result *median_run(const struct result *res, int nrows, int repeat, int r)
{
    int idx[64] = {0}, n = repeat < 1 ? 1 : repeat < 64 ? repeat : 64;

    for (int i = 0; i < n; i++)
        idx[i] = i;
    for (int i = 1; i < n; i++)
        for (int k = i; k > 0 && res[idx[k] * nrows + r].mbps < res[idx[k - 1] * nrows + r].mbps;
             k--) {
            int x = idx[k];
            idx[k] = idx[k - 1];
            idx[k - 1] = x;
        }
    const struct result *m = &res[idx[n / 2] * nrows + r];
    /* Any failed run makes the row fail. */
    for (int i = 0; i < n; i++)
        if (!res[i * nrows + r].ok && !res[i * nrows + r].skipped)
            return &res[i * nrows + r];
    return m;
}

static void print_row(int json, int *first_row, uint64_t size, const struct rowdef *d,
                      const struct result *res, int nrows, int repeat, int r,
                      const struct result *m)
{
    const char *op = d->put ? "PUT" : "GET";
    char hs[32];

    rio_cli_human(hs, sizeof(hs), (double)size);
    if (json) {
        printf("%s{\"op\":\"%s\",\"size\":%" PRIu64 ",\"conc\":%" PRIu64 ",\"depth\":%" PRIu64
               ",\"batch\":%u,\"ok\":%s,\"skipped\":%s,\"error\":\"%s\",\"mbps\":%.1f,"
               "\"ratio_to_iperf3\":%.3f,\"calls\":%" PRIu64 ",\"call_ns\":{\"p50\":%" PRIu64
               ",\"p95\":%" PRIu64 ",\"p99\":%" PRIu64 "},\"first_done_ns_median\":%" PRIu64
               ",\"last_done_ns_median\":%" PRIu64 ",\"peak_inflight_bytes\":%" PRIu64
               ",\"rss_kib\":%" PRIu64 ",\"retries\":%" PRIu64 ",\"mbps_runs\":[",
               *first_row ? "" : ",", op, size, d->conc, d->depth, d->batch,
               m->ok ? "true" : "false", m->skipped ? "true" : "false",
               m->ok || m->skipped ? "" : rio_errname(m->err), m->mbps, m->ratio, m->calls, m->p50,
               m->p95, m->p99, m->first_med, m->last_med, m->peak, m->rss_kib, m->retries);
        for (int i = 0; i < repeat; i++)
            printf("%s%.1f", i ? "," : "", res[i * nrows + r].mbps);
        printf("],\"ratio_runs\":[");
        for (int i = 0; i < repeat; i++)
            printf("%s%.3f", i ? "," : "", res[i * nrows + r].ratio);
        printf("],\"verdict\":\"%s\",\"verdict_text\":", m->verdict);
        rio_cli_json_str(stdout, m->verdict_text);
        printf("}");
    } else if (m->skipped) {
        printf("%-4s %8s %4" PRIu64 " %5" PRIu64 " %5u  skipped: needs %" PRIu64 " x %s of buffers"
               " (--max-mem)\n",
               op, hs, d->conc, d->depth, d->batch, d->conc * d->batch, hs);
    } else if (!m->ok) {
        printf("%-4s %8s %4" PRIu64 " %5" PRIu64 " %5u  error: %s (%s)\n", op, hs, d->conc,
               d->depth, d->batch, rio_strerror(m->err), rio_errname(m->err));
    } else {
        char rs[16] = "-";
        if (m->ratio > 0)
            snprintf(rs, sizeof(rs), "%.3f", m->ratio);
        printf("%-4s %8s %4" PRIu64 " %5" PRIu64 " %5u %9.1f %6s %8.2f %8.2f %8.2f %8.2f %8.2f "
               "%7.1f %7.0f %4" PRIu64 "  %s: %s\n",
               op, hs, d->conc, d->depth, d->batch, m->mbps, rs, m->p50 / 1e6, m->p95 / 1e6,
               m->p99 / 1e6, m->first_med / 1e6, m->last_med / 1e6, (double)m->peak / (1 << 20),
               (double)m->rss_kib / 1024, m->retries, m->verdict, m->verdict_text);
    }
    *first_row = 0;
    fflush(stdout);
}

static void usage(void)
{
    fprintf(stderr,
            "usage: railio bench railio://HOST:PORT[?options]|serve [flags]\n"
            "  --sizes LIST    object sizes (default 4M,64M)\n"
            "  --conc LIST     caller threads sharing the client (default 1,4)\n"
            "  --depth LIST    ops in flight per connection (default 1,8)\n"
            "  --batch LIST    GETs per rio_batch call (default 1,16)\n"
            "  --chunk SIZE    chunk size (default 4M)\n"
            "  --secs S        seconds per row (default 1.5; at least 2 calls per thread)\n"
            "  --max-mem SIZE  skip rows needing more client buffer memory (default 1G)\n"
            "  --put           PUT rows too\n"
            "  --ceiling       measure iperf3's single-stream loopback figure first\n"
            "  --ceiling-secs S  iperf3 duration (default 5)\n"
            "  --repeat N      run the sweep N times (1..64), the ceiling re-measured before\n"
            "                  each run; a row shows its median run (for busy machines)\n"
            "  --json          one JSON document instead of the table\n"
            "URL options (conns=, rails=, token=...) apply to every row; 'serve[?options]'\n"
            "starts a private railiod on loopback (next to this program) and stops it at\n"
            "the end.\n");
}

/* v is a number of seconds in [lo, 3600] and nothing else (not "nan",
 * which no comparison stops, nor "inf"). */
static bool secs_ok(const char *v, double lo, double *out)
{
    char *end;
    *out = strtod(v, &end);
    return end != v && !*end && *out >= lo && *out <= 3600;
}

/* v is a whole number in [1, max] and nothing else. */
static bool count_ok(const char *v, int max, int *out)
{
    char *end;
    long n = strtol(v, &end, 10);
    *out = (int)(n >= 1 && n <= max ? n : 0);
    return end != v && !*end && n >= 1 && n <= max;
}

int rio_cli_bench_tcp(const char *url_in, int argc, char **argv)
{
    uint64_t sizes[MAX_LIST] = {4ull << 20, 64ull << 20}, conc[MAX_LIST] = {1, 4};
    uint64_t depth[MAX_LIST] = {1, 8}, batch[MAX_LIST] = {1, 16};
    int nsizes = 2, nconc = 2, ndepth = 2, nbatch = 2;
    uint64_t chunk = 4ull << 20, max_mem = 1ull << 30;
    double secs = 1.5, ceiling_secs = 5;
    int json = 0, put = 0, ceiling = 0, rc = 0, repeat = 1;
    struct rio_cli_srv srv = {.pid = -1};
    char base[512];
    int served = 0;

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--json"))
            json = 1;
        else if (!strcmp(a, "--put"))
            put = 1;
        else if (!strcmp(a, "--ceiling"))
            ceiling = 1;
        else if (!v)
            bad = 1;
        else if (!strcmp(a, "--sizes"))
            bad = (nsizes = rio_cli_parse_list(v, sizes, MAX_LIST)) < 0, i++;
        else if (!strcmp(a, "--conc"))
            bad = (nconc = rio_cli_parse_list(v, conc, MAX_LIST)) < 0, i++;
        else if (!strcmp(a, "--depth"))
            bad = (ndepth = rio_cli_parse_list(v, depth, MAX_LIST)) < 0, i++;
        else if (!strcmp(a, "--batch"))
            bad = (nbatch = rio_cli_parse_list(v, batch, MAX_LIST)) < 0, i++;
        else if (!strcmp(a, "--chunk"))
            bad = rio_cli_parse_size(v, &chunk) < 0, i++;
        else if (!strcmp(a, "--max-mem"))
            bad = rio_cli_parse_size(v, &max_mem) < 0, i++;
        else if (!strcmp(a, "--secs"))
            bad = !secs_ok(v, 0.01, &secs), i++;
        else if (!strcmp(a, "--repeat"))
            bad = !count_ok(v, 64, &repeat), i++;
        else if (!strcmp(a, "--ceiling-secs"))
            bad = !secs_ok(v, 1, &ceiling_secs), i++;
        else
            bad = 1;
        if (bad)
            return rio_cli_bench_other("railio://", a, usage);
    }
    for (int i = 0; i < nconc; i++)
        if (conc[i] > 256) {
            fprintf(stderr, "railio bench: concurrency up to 256\n");
            return 2;
        }
    for (int i = 0; i < nbatch; i++)
        if (batch[i] > 4096) {
            fprintf(stderr, "railio bench: batch up to 4096\n");
            return 2;
        }

    if (!strncmp(url_in, "serve", 5) && (url_in[5] == '\0' || url_in[5] == '?')) {
        int ret = rio_cli_srv_start(&srv, NULL);
        if (ret < 0) {
            fprintf(stderr, "railio bench: cannot start railiod: %s\n", rio_strerror(ret));
            return 1;
        }
        served = 1;
        snprintf(base, sizeof(base), "railio://%s%s", srv.addr, url_in + 5);
    } else if (strncmp(url_in, "railio://", 9) != 0) {
        fprintf(stderr, "railio bench: expected railio://HOST:PORT[?options] or serve\n");
        return 2;
    } else {
        snprintf(base, sizeof(base), "%s", url_in);
    }

    char why[128] = "not measured";
    double memcpy_mbps = rio_cli_memcpy_mbps(64u << 20), xxh_mbps = rio_cli_xxh3_mbps(64u << 20);
    double ceil_first = ceiling ? iperf3_bps((unsigned)ceiling_secs, why, sizeof(why)) : 0;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    char shown[1024];
    rio_cli_url_safe(base, shown, sizeof(shown)); /* the results never carry the token */
    if (json) {
        printf("{\"bench\":\"railio\",\"setup\":{\"url\":");
        rio_cli_json_str(stdout, shown);
        printf(",\"chunk_bytes\":%" PRIu64 ",\"secs_per_row\":%.2f,\"repeat\":%d,\"cores\":%ld},"
               "\"ceilings\":{\"iperf3_single_stream_bps\":%.0f,\"iperf3\":",
               chunk, secs, repeat, ncpu, ceil_first);
        rio_cli_json_str(stdout, why);
        printf(",\"memcpy_mbps\":%.0f,\"xxh3_mbps\":%.0f},\"rows\":[", memcpy_mbps, xxh_mbps);
    } else {
        char hc[32];
        rio_cli_human(hc, sizeof(hc), (double)chunk);
        printf("railio bench: %s, %s chunks, %.1f s per row, %d run(s) per row, %ld cores\n", shown,
               hc, secs, repeat, ncpu);
        printf("ceilings measured now: memcpy %.0f MB/s, xxh3 %.0f MB/s (one core)", memcpy_mbps,
               xxh_mbps);
        if (ceiling && ceil_first <= 0)
            printf(", iperf3: %s", why);
        if (ceil_first > 0)
            printf(", iperf3 loopback one stream %.2f Gbit/s = %.0f MB/s%s", ceil_first / 1e9,
                   ceil_first / 8 / 1e6, repeat > 1 ? " (first of the runs)" : "");
        printf("\n\n%-4s %8s %4s %5s %5s %9s %6s %8s %8s %8s %8s %8s %7s %7s %4s  %s\n", "op",
               "size", "conc", "depth", "batch", "MB/s", "ratio", "p50 ms", "p95 ms", "p99 ms",
               "first", "last", "peak M", "rss M", "rtry", "verdict");
    }

    int first_row = 1, nrows = (put ? 2 : 1) * nconc * ndepth * nbatch;
    struct rowdef *defs = calloc((size_t)nrows, sizeof(*defs));
    struct result *res = calloc((size_t)nrows * (size_t)repeat, sizeof(*res));
    double *ceil_mbps = calloc((size_t)repeat, sizeof(double));
    if (!defs || !res || !ceil_mbps) {
        fprintf(stderr, "railio bench: out of memory\n");
        rc = 1;
        goto out;
    }
    for (int pass = 0, r = 0; pass < (put ? 2 : 1); pass++)
        for (int ci = 0; ci < nconc; ci++)
            for (int di = 0; di < ndepth; di++)
                for (int bi = 0; bi < nbatch; bi++, r++) {
                    defs[r].put = pass;
                    defs[r].conc = conc[ci];
                    defs[r].depth = depth[di];
                    defs[r].batch = (unsigned)batch[bi];
                }

    for (int si = 0; si < nsizes; si++) {
        struct setup s = {.size = sizes[si], .secs = secs};
        unsigned have = 0;
        s.src = malloc(s.size ? s.size : 1);
        uint8_t *tmp = malloc(s.size ? s.size : 1);
        if (!s.src || !tmp) {
            fprintf(stderr, "railio bench: cannot allocate %" PRIu64 " bytes\n", s.size);
            free(s.src);
            free(tmp);
            rc = 1;
            break;
        }
        rio_cli_fill(s.src, s.size, s.size);
        memset(res, 0, (size_t)nrows * (size_t)repeat * sizeof(*res));
        for (int rep = 0; rep < repeat; rep++) {
            /* The ceiling of this run, measured right before its rows. */
            double bps = si == 0 && rep == 0 ? ceil_first
                         : ceiling           ? iperf3_bps((unsigned)ceiling_secs, why, sizeof(why))
                                             : 0;
            ceil_mbps[rep] = bps / 8 / 1e6;
            for (int r = 0; r < nrows; r++) {
                struct result *rs = &res[rep * nrows + r];
                struct rowdef *d = &defs[r];
                unsigned nobj = (unsigned)d->conc * d->batch;
                char url[640];
                struct rio_options o;
                s.put = d->put;
                s.batch = d->batch;
                if ((double)nobj * (double)s.size > (double)max_mem) {
                    rs->skipped = 1;
                    continue;
                }
                snprintf(url, sizeof(url), "%s%sdepth=%" PRIu64, base,
                         strchr(base, '?') ? "&" : "?", d->depth);
                rio_options_init(&o);
                o.chunk_size = chunk;
                o.budget_bytes = max_mem;
                int ret = rio_cli_bench_open(url, &o, &s.c);
                if (ret == 0 && !s.put)
                    ret = ensure_objects(s.c, &s, nobj, &have, tmp);
                if (ret == 0)
                    run_row(&s, (unsigned)d->conc, rs);
                else
                    rs->err = ret;
                if (s.put && nobj > have)
                    have = nobj; /* for the clean-up below */
                rio_client_destroy(s.c);
                s.c = NULL;
                rs->ratio = ceil_mbps[rep] > 0 ? rs->mbps / ceil_mbps[rep] : 0;
                if (repeat > 1)
                    fprintf(stderr,
                            "run %d/%d: %s %" PRIu64 " B conc %" PRIu64 " depth %" PRIu64
                            " batch %u: %.1f MB/s (ceiling %.0f MB/s)\n",
                            rep + 1, repeat, s.put ? "PUT" : "GET", s.size, d->conc, d->depth,
                            d->batch, rs->mbps, ceil_mbps[rep]);
            }
        }
        for (int r = 0; r < nrows; r++) {
            const struct result *m = median_run(res, nrows, repeat, r);
            if (!m->ok && !m->skipped)
                rc = 1;
            print_row(json, &first_row, s.size, &defs[r], res, nrows, repeat, r, m);
        }
        /* Leave the server as it was. */
        if (have) {
            struct rio_client *c = NULL;
            if (rio_client_new(base, NULL, &c) == 0) {
                for (unsigned j = 0; j < have; j++) {
                    char key[48];
                    snprintf(key, sizeof(key), "bench/%" PRIu64 "/%u", s.size, j);
                    rio_delete(c, key);
                }
                rio_client_destroy(c);
            }
        }
        free(s.src);
        free(tmp);
    }
    if (json)
        printf("]}\n");
    else
        printf("\n(MB/s = 10^6 bytes/s over the row's wall time%s; ratio = MB/s / iperf3's in the "
               "same run;\n p50/95/99 = call latency; first/last = median ms from call start to "
               "its first/last chunk\n done; peak M = most bytes in flight in one call; rss M = "
               "process peak RSS so far;\n chunks verified by xxh3, and each object compared byte "
               "for byte once per row)\n",
               repeat > 1 ? ", the median run" : "");
out:
    free(defs);
    free(res);
    free(ceil_mbps);
    if (served)
        rio_cli_srv_stop(&srv);
    return rc;
}
