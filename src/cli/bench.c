/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio bench mock: the capacity model. A sweep over rail counts and rail
 * rates through the mock transport, each row compared with the sum of the
 * rails' rates, plus the machine's CPU ceilings measured in the same run.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_file.h"
#include "cli/bench_rados.h"
#include "cli/bench_rails.h"
#include "cli/bench_s3.h"
#include "cli/cli.h"
#include "cli/tcp_cli.h"
#include "core/checksum.h"
#include "core/copy.h"
#include "railio.h"

void rio_cli_fill(void *buf, size_t n, uint64_t seed)
{
    uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
    uint8_t *p = buf;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(p + i, &x, 8);
    }
    for (; i < n; i++)
        p[i] = (uint8_t)(x >> (8 * (i & 7)));
}

double rio_cli_memcpy_mbps(size_t n)
{
    uint8_t *a = malloc(n), *b = malloc(n);
    if (!a || !b) {
        free(a);
        free(b);
        return 0;
    }
    memset(a, 1, n);
    memset(b, 2, n);
    double best = 0;
    for (int k = 0; k < 3; k++) {
        double t0 = rio_cli_now_s();
        memcpy(b, a, n);
        double dt = rio_cli_now_s() - t0;
        if (dt > 0 && n / dt / 1e6 > best)
            best = n / dt / 1e6;
    }
    free(a);
    free(b);
    return best;
}

double rio_cli_xxh3_mbps(size_t n)
{
    uint8_t *a = malloc(n);
    if (!a)
        return 0;
    memset(a, 3, n);
    double best = 0;
    volatile uint64_t sink = 0;
    for (int k = 0; k < 3; k++) {
        double t0 = rio_cli_now_s();
        sink ^= rio__xxh3(a, n); /* what railio hashes with */
        double dt = rio_cli_now_s() - t0;
        if (dt > 0 && n / dt / 1e6 > best)
            best = n / dt / 1e6;
    }
    (void)sink;
    free(a);
    return best;
}

void rio_cli_human(char *out, size_t n, double bytes)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (bytes >= 1024 && i < 4) {
        bytes /= 1024;
        i++;
    }
    snprintf(out, n, "%.1f %s", bytes, u[i]);
}

struct row {
    char label[48];
    unsigned rails;
    char rates[96]; /* the mock's rate= value */
    double sum_mbps;
    char extra[64]; /* more URL parameters */
};

static void add_row(struct row *rw, const char *label, unsigned rails, const char *rates,
                    double sum_mbps, const char *extra)
{
    memset(rw, 0, sizeof(*rw));
    snprintf(rw->label, sizeof(rw->label), "%s", label);
    rw->rails = rails;
    snprintf(rw->rates, sizeof(rw->rates), "%s", rates);
    rw->sum_mbps = sum_mbps;
    snprintf(rw->extra, sizeof(rw->extra), "%s", extra);
}

/*
 * What any scheduler could reach with whole chunks: identical chunks handed
 * in turn to the rail that would finish each first (optimal for identical
 * jobs on machines of different speeds). With few chunks per rail this is
 * well below the sum of the rates; the table shows both.
 */
static double bound_mbps(const char *rates, unsigned rails, uint64_t size, uint64_t chunk)
{
    double rate[64], t[64];
    unsigned n = 0;
    const char *p = rates;
    while (n < rails && *p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p)
            return 0;
        if (!strncmp(end, "MB", 2))
            v *= 1e6;
        else
            return 0;
        rate[n++] = v;
        p = strchr(end, ',');
        if (!p)
            break;
        p++;
    }
    for (; n < rails; n++)
        rate[n] = rate[n - 1];
    for (unsigned i = 0; i < rails; i++)
        t[i] = 0;
    double makespan = 0;
    for (uint64_t off = 0; off < size; off += chunk) {
        double len = (double)(size - off < chunk ? size - off : chunk);
        unsigned best = 0;
        for (unsigned i = 1; i < rails; i++)
            if (t[i] + len / rate[i] < t[best] + len / rate[best])
                best = i;
        t[best] += len / rate[best];
        if (t[best] > makespan)
            makespan = t[best];
    }
    return makespan > 0 ? (double)size / makespan / 1e6 : 0;
}

struct result {
    int ok;
    int err;
    double mbps, eff, bound, of_bound;
    struct rio_stats st;
};

static int run_row(const struct row *rw, uint64_t size, uint64_t chunk, unsigned depth,
                   uint8_t *src, uint8_t *dst, struct result *res)
{
    char url[512];
    struct rio_options o;
    struct rio_client *c = NULL;
    static unsigned seq;
    int ret;

    memset(res, 0, sizeof(*res));
    snprintf(url, sizeof(url), "mock://bench-%u?paths=%u&rate=%s%s%s", seq++, rw->rails, rw->rates,
             rw->extra[0] ? "&" : "", rw->extra);
    rio_options_init(&o);
    o.chunk_size = chunk;
    o.depth = depth;
    ret = rio_cli_bench_open(url, &o, &c);
    if (ret < 0)
        goto out;
    ret = rio_put(c, "bench-object", src, size, NULL, NULL);
    if (ret < 0)
        goto out;
    struct rio_call call = {.stats = &res->st};
    int64_t got = rio_get(c, "bench-object", dst, size, &call);
    if (got < 0) {
        ret = (int)got;
        goto out;
    }
    if ((uint64_t)got != size || memcmp(src, dst, size) != 0) {
        ret = RIO_ECHECKSUM; /* cannot happen unless the engine is broken */
        goto out;
    }
    res->ok = 1;
    res->mbps = res->st.goodput_mbps;
    res->eff = rw->sum_mbps > 0 ? res->mbps / rw->sum_mbps : 0;
    res->bound = rw->sum_mbps > 0 ? bound_mbps(rw->rates, rw->rails, size, chunk) : 0;
    res->of_bound = res->bound > 0 ? res->mbps / res->bound : 0;
    ret = 0;
out:
    res->err = ret;
    rio_client_destroy(c);
    return ret;
}

static void usage(void)
{
    fprintf(stderr, "usage: railio bench mock [--json] [--size BYTES] [--chunk BYTES] "
                    "[--depth N] [--quick]\n");
}

static int bench_mock(int argc, char **argv)
{
    int json = 0, quick = 0;
    uint64_t size = 64ull << 20, chunk = 4ull << 20, depth = 4;

    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--quick"))
            quick = 1;
        else if (!strcmp(argv[i], "--size") && i + 1 < argc &&
                 !rio_cli_parse_size(argv[i + 1], &size))
            i++;
        else if (!strcmp(argv[i], "--chunk") && i + 1 < argc &&
                 !rio_cli_parse_size(argv[i + 1], &chunk))
            i++;
        else if (!strcmp(argv[i], "--depth") && i + 1 < argc &&
                 !rio_cli_parse_size(argv[i + 1], &depth))
            i++;
        else
            return rio_cli_bench_other("mock", argv[i], usage);
    }
    if (size == 0 || chunk < 4096 || depth < 1 || depth > 1024) {
        fprintf(stderr, "railio bench mock: size must be > 0, chunk >= 4096, depth 1..1024\n");
        return 2;
    }

    struct row rows[32];
    int n = 0;
    const unsigned rails_list[] = {1, 2, 3, 4, 6, 8};
    const double rate_list[] = {125, 1250}; /* MB/s per rail: 1 GbE and 10 GbE */
    char rates[32];
    for (unsigned ri = 0; ri < 2; ri++) {
        for (unsigned k = 0; k < 6; k++) {
            if (quick && rails_list[k] != 1 && rails_list[k] != 4)
                continue;
            snprintf(rates, sizeof(rates), "%.0fMB", rate_list[ri]);
            add_row(&rows[n++], "equal", rails_list[k], rates, rate_list[ri] * rails_list[k], "");
        }
    }
    add_row(&rows[n++], "heterogeneous", 4, "125MB,125MB,62MB,31MB", 125 + 125 + 62 + 31, "");
    add_row(&rows[n++], "storage 200MB/s", 4, "125MB", 500, "disk=200MB");
    /* A CPU-bound server (the mock's contend=): each op it holds beyond one
     * costs it half an op's rate more; the fewer ops at once, the faster. */
    add_row(&rows[n++], "contended 200MB/s", 4, "125MB", 500, "disk=200MB&contend=0.5");
    add_row(&rows[n++], "unlimited rails", 4, "0", 0, "");

    uint8_t *src, *dst;
    if (rio_cli_bench_buffers("railio bench mock", size, &src, &dst) < 0)
        return 1;
    double memcpy_mbps = rio_cli_memcpy_mbps(size);
    double xxh_mbps = rio_cli_xxh3_mbps(size);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);

    if (json) {
        printf("{\"bench\":\"mock\",\"setup\":{\"object_bytes\":%llu,\"chunk_bytes\":%llu,"
               "\"depth\":%llu,\"cores\":%ld,\"environment\":\"in-process mock transport\"},"
               "\"ceilings\":{\"memcpy_mbps\":%.0f,\"xxh3_mbps\":%.0f},\"rows\":[",
               (unsigned long long)size, (unsigned long long)chunk, (unsigned long long)depth, ncpu,
               memcpy_mbps, xxh_mbps);
    } else {
        char hs[32], hc[32];
        rio_cli_human(hs, sizeof(hs), (double)size);
        rio_cli_human(hc, sizeof(hc), (double)chunk);
        printf("railio capacity model: mock rails, GET of %s in %s chunks, depth %llu, "
               "%ld cores\n",
               hs, hc, (unsigned long long)depth, ncpu);
        printf("CPU ceilings measured now (one core): memcpy %.0f MB/s, xxh3 %.0f MB/s\n\n",
               memcpy_mbps, xxh_mbps);
        printf("eff = MB/s / sum of rail rates; bound = the best any scheduler can do with\n"
               "whole chunks (each chunk to the rail that finishes it first); of bound = MB/s / "
               "bound.\n\n");
        printf("%-16s %5s %-22s %8s %8s %6s %8s %6s %7s %7s %4s  %s\n", "case", "rails",
               "rate/rail (B/s)", "MB/s", "sum", "eff", "bound", "of bnd", "p50 ms", "p99 ms",
               "rtry", "verdict");
    }
    int failures = 0;
    for (int i = 0; i < n; i++) {
        struct result res;
        run_row(&rows[i], size, chunk, (unsigned)depth, src, dst, &res);
        if (!res.ok)
            failures++;
        if (json) {
            printf("%s{\"case\":\"%s\",\"rails\":%u,\"rates\":\"%s\",\"extra\":\"%s\","
                   "\"ok\":%s,\"error\":\"%s\",\"mbps\":%.1f,\"sum_mbps\":%.1f,"
                   "\"efficiency\":%.3f,\"bound_mbps\":%.1f,\"of_bound\":%.3f,\"stats\":",
                   i ? "," : "", rows[i].label, rows[i].rails, rows[i].rates, rows[i].extra,
                   res.ok ? "true" : "false", res.ok ? "" : rio_errname(res.err), res.mbps,
                   rows[i].sum_mbps, res.eff, res.bound, res.of_bound);
            rio_cli_json_stats(stdout, &res.st);
            printf("}");
        } else if (!res.ok) {
            printf("%-16s %5u %-22s  error: %s (%s)\n", rows[i].label, rows[i].rails, rows[i].rates,
                   rio_errname(res.err), rio_strerror(res.err));
        } else {
            char sum[16] = "-", eff[16] = "-", bound[16] = "-", ofb[16] = "-";
            if (rows[i].sum_mbps > 0) {
                snprintf(sum, sizeof(sum), "%.0f", rows[i].sum_mbps);
                snprintf(eff, sizeof(eff), "%.3f", res.eff);
            }
            if (res.bound > 0) {
                snprintf(bound, sizeof(bound), "%.0f", res.bound);
                snprintf(ofb, sizeof(ofb), "%.3f", res.of_bound);
            }
            printf("%-16s %5u %-22s %8.1f %8s %6s %8s %6s %7.2f %7.2f %4llu  %s: %s\n",
                   rows[i].label, rows[i].rails, rows[i].rates, res.mbps, sum, eff, bound, ofb,
                   res.st.lat_p50_ns / 1e6, res.st.lat_p99_ns / 1e6,
                   (unsigned long long)res.st.retries_total, rio_verdict_name(res.st.verdict),
                   res.st.verdict_text);
        }
        fflush(stdout);
    }
    if (json)
        printf("]}\n");
    free(src);
    free(dst);
    return failures ? 1 : 0;
}

/*
 * railio bench copy: memcpy against non-temporal stores, writing a
 * destination in 16 KiB pieces (the size libcurl hands its write callback),
 * into a destination that fits the cache and one far larger than it.
 */
static void copy_usage(void)
{
    fprintf(stderr, "usage: railio bench copy\n");
}

static int bench_copy(void)
{
    const size_t piece = 16 << 10;
    const size_t sizes[] = {4u << 20, 1u << 30};
    uint8_t *src = malloc(piece);
    if (!src)
        return 1;
    memset(src, 0x5a, piece);
    printf("copy into a destination in 16 KiB pieces, one core, best of 3 (GB/s = 1e9 B/s)\n");
    printf("%-12s %10s %10s %8s\n", "destination", "memcpy", "nt-copy", "nt/mem");
    for (int k = 0; k < 2; k++) {
        size_t n = sizes[k];
        uint8_t *dst = malloc(n);
        if (!dst) {
            free(src);
            return 1;
        }
        memset(dst, 1, n); /* fault the pages in first: measure the copy only */
        double best[2] = {0, 0};
        int reps = n > (64u << 20) ? 3 : 300;
        for (int mode = 0; mode < 2; mode++) {
            for (int r = 0; r < 3; r++) {
                double t0 = rio_cli_now_s();
                for (int rep = 0; rep < (n > (64u << 20) ? 1 : reps); rep++)
                    for (size_t off = 0; off + piece <= n; off += piece) {
                        if (mode)
                            rio__copy_nt(dst + off, src, piece);
                        else
                            memcpy(dst + off, src, piece);
                    }
                double dt = rio_cli_now_s() - t0;
                double gbs = (double)n * (n > (64u << 20) ? 1 : reps) / dt / 1e9;
                if (gbs > best[mode])
                    best[mode] = gbs;
            }
        }
        char h[32];
        rio_cli_human(h, sizeof(h), (double)n);
        printf("%-12s %10.2f %10.2f %8.2f\n", h, best[0], best[1], best[1] / best[0]);
        free(dst);
    }
    free(src);
    return 0;
}

int rio_cli_bench(int argc, char **argv)
{
    if (argc < 1) {
        usage();
        return 2;
    }
    if (rio_cli_bench_rails_wanted(argc, argv))
        return rio_cli_bench_rails(argc, argv);
    if (!strcmp(argv[0], "mock"))
        return bench_mock(argc - 1, argv + 1);
    if (!strcmp(argv[0], "copy"))
        return argc > 1 ? rio_cli_bench_other("copy", argv[1], copy_usage) : bench_copy();
#ifdef RIO_HAVE_URING
    if (!strncmp(argv[0], "file://", 7))
        return rio_cli_bench_file(argc, argv);
#endif
#ifdef RIO_HAVE_CURL
    if (!strncmp(argv[0], "s3://", 5))
        return rio_cli_bench_s3(argc, argv);
#endif
    if (!strncmp(argv[0], "rados://", 8))
        return rio_cli_bench_rados(argc, argv);
    if (!strncmp(argv[0], "railio://", 9) || !strncmp(argv[0], "serve", 5))
        return rio_cli_bench_tcp(argv[0], argc - 1, argv + 1);
    fprintf(stderr,
            "railio bench: unknown target '%s' (mock, railio://HOST:PORT, serve, "
            "file:///DIR, s3://BUCKET, rados://POOL, --rails-from-harness N)\n",
            argv[0]);
    return 2;
}

int rio_cli_demo(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    printf("railio demo: the striping engine over the in-process mock transport.\n"
           "Each row PUTs a 64 MiB object, then GETs it over N mock rails, verifies every\n"
           "chunk (xxh3) and compares goodput with the sum of the rails' rates.\n\n");
    char *args[] = {NULL};
    return bench_mock(0, args);
}
