/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio bench s3://BUCKET: PUT and GET goodput of large objects through the
 * s3:// transport at several depths (ranges or parts in flight per path),
 * against the tools people use on the same endpoint in the same run:
 *
 *   curl     one stream: `curl --aws-sigv4 -T FILE` and a GET to /dev/null
 *            (the single-connection ceiling of the server and the loopback);
 *   aws      `aws s3 cp` (its own multipart, 10 requests in flight by
 *            default), when the aws program is installed.
 *
 * railio's PUT hashes (xxh3 per chunk, MD5 of the stream) and its GET
 * verifies every chunk and lands it in memory; curl's GET writes to
 * /dev/null. The ratio railio/curl is the figure that matters: the server's
 * own rate moves run to run on a shared machine.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_s3.h"
#include "cli/cli.h"
#include "railio.h"

#define MAXLIST RIO_CLI_LIST_MAX
#define BENCH_PREFIX "railio-bench/"

struct cfg {
    const char *url;
    char bucket[256];
    char endpoint[512];
    const char *params;          /* the URL's "?..." part, or "" */
    struct rio_cli_bench_opts o; /* sizes, chunk, reps, json */
    unsigned depths[MAXLIST], ndepths;
    unsigned paths;
    bool curl, aws, discard;
};

struct row {
    uint64_t size;
    unsigned depth;
    double put_mbps, get_mbps, get_discard_mbps;
    int put_err, get_err;
};

struct base {
    uint64_t size;
    double curl_put, curl_get, aws_put, aws_get; /* MB/s, 0 when not run */
};

static void usage(void)
{
    fprintf(stderr,
            "usage: railio bench s3://BUCKET[?endpoint=URL&knobs] [options]\n"
            "  --sizes LIST   object sizes (default 256M)\n"
            "  --chunk SIZE   chunk = part size (default 8M; S3 parts are >= 5M)\n"
            "  --depths LIST  ranges/parts in flight per path (default 1,2,4,8,16,32)\n"
            "  --paths N      curl multi handles (default 1)\n"
            "  --reps N       runs of each measurement; the best is shown (default 1)\n"
            "  --discard      also GET with discard=1 (bytes counted, not stored; verify off)\n"
            "  --no-curl      skip the curl baseline\n"
            "  --no-aws       skip the aws s3 cp baseline\n"
            "  --json         one JSON document on stdout instead of the table\n"
            "Endpoint and credentials as for any s3:// URL (?endpoint=, RIO_S3_ENDPOINT,\n"
            "AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_REGION). Objects go under\n" BENCH_PREFIX
            " and are removed.\n");
}

/* "s3://BUCKET[/...]?a=b" -> bucket, params; the endpoint from ?endpoint=,
 * RIO_S3_ENDPOINT or AWS_ENDPOINT_URL. */
static int split_url(struct cfg *c)
{
    const char *p = c->url, *q, *e, *ep = NULL;
    size_t n;

    if (strncmp(p, "s3://", 5) != 0)
        return -1;
    p += 5;
    n = strcspn(p, "/?");
    if (n == 0 || n >= sizeof(c->bucket))
        return -1;
    memcpy(c->bucket, p, n);
    c->bucket[n] = '\0';
    q = strchr(p, '?');
    c->params = q ? q : "";
    if (q && (e = strstr(q, "endpoint=")) && (e[-1] == '?' || e[-1] == '&')) {
        size_t l = strcspn(e + 9, "&");
        if (l >= sizeof(c->endpoint))
            return -1;
        memcpy(c->endpoint, e + 9, l);
        c->endpoint[l] = '\0';
        return 0;
    }
    ep = getenv("RIO_S3_ENDPOINT");
    if (!ep || !*ep)
        ep = getenv("AWS_ENDPOINT_URL");
    if (!ep || !*ep || strlen(ep) >= sizeof(c->endpoint))
        return -1;
    strcpy(c->endpoint, ep);
    return 0;
}

/* curl single stream: PUT the file, GET to /dev/null. MB/s (0 on failure). */
static void curl_base(const struct cfg *c, const char *file, uint64_t size, struct base *b)
{
    char url[1024], user[512], region[128];
    const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
    const char *rg = getenv("AWS_REGION");
    double best_put = 0, best_get = 0;

    snprintf(url, sizeof(url), "%s/%s/" BENCH_PREFIX "curl-%" PRIu64, c->endpoint, c->bucket, size);
    snprintf(user, sizeof(user), "%s:%s", ak ? ak : "", sk ? sk : "");
    snprintf(region, sizeof(region), "aws:amz:%s:s3", rg && *rg ? rg : "us-east-1");
    for (unsigned r = 0; r < c->o.reps; r++) {
        char *put[] = {
            "curl",   "-sf",       "--aws-sigv4", region,
            "--user", user,        "-H",          "x-amz-content-sha256: UNSIGNED-PAYLOAD",
            "-o",     "/dev/null", "-T",          (char *)file,
            url,      NULL};
        char *get[] = {
            "curl",   "-sf",       "--aws-sigv4", region,
            "--user", user,        "-H",          "x-amz-content-sha256: UNSIGNED-PAYLOAD",
            "-o",     "/dev/null", url,           NULL};
        rio_cli_keep_best(&best_put, size, rio_cli_run_timed(put, RIO_CLI_MUTE_OUT));
        rio_cli_keep_best(&best_get, size, rio_cli_run_timed(get, RIO_CLI_MUTE_OUT));
    }
    char *del[] = {"curl",   "-sf",       "--aws-sigv4", region,
                   "--user", user,        "-H",          "x-amz-content-sha256: UNSIGNED-PAYLOAD",
                   "-o",     "/dev/null", "-X",          "DELETE",
                   url,      NULL};
    rio_cli_run_timed(del, RIO_CLI_MUTE_OUT);
    b->curl_put = best_put;
    b->curl_get = best_get;
}

static void aws_base(const struct cfg *c, const char *file, uint64_t size, struct base *b)
{
    char s3url[1024];
    double best_put = 0, best_get = 0;

    snprintf(s3url, sizeof(s3url), "s3://%s/" BENCH_PREFIX "aws-%" PRIu64, c->bucket, size);
    for (unsigned r = 0; r < c->o.reps; r++) {
        char *put[] = {"aws", "--endpoint-url",     (char *)c->endpoint, "s3",
                       "cp",  "--only-show-errors", (char *)file,        s3url,
                       NULL};
        char *get[] = {"aws",
                       "--endpoint-url",
                       (char *)c->endpoint,
                       "s3",
                       "cp",
                       "--only-show-errors",
                       s3url,
                       "-",
                       NULL};
        rio_cli_keep_best(&best_put, size, rio_cli_run_timed(put, RIO_CLI_MUTE_OUT));
        rio_cli_keep_best(&best_get, size, rio_cli_run_timed(get, RIO_CLI_MUTE_OUT));
    }
    char *del[] = {
        "aws", "--endpoint-url", (char *)c->endpoint, "s3", "rm", "--only-show-errors", s3url,
        NULL};
    rio_cli_run_timed(del, RIO_CLI_MUTE_OUT);
    b->aws_put = best_put;
    b->aws_get = best_get;
}

static int open_client(const struct cfg *c, unsigned depth, bool discard, struct rio_client **out)
{
    char url[2048];
    struct rio_options o;

    rio_options_init(&o);
    o.chunk_size = c->o.chunk;
    o.depth = depth;
    o.paths = c->paths;
    o.op_timeout_ms = 60000;
    o.deadline_ms = 3600000;
    o.budget_bytes = (uint64_t)depth * c->paths * c->o.chunk + c->o.chunk;
    if (discard)
        o.verify = -1;
    if (discard)
        snprintf(url, sizeof(url), "s3://%s%s%sdiscard=1", c->bucket, c->params,
                 c->params[0] ? "&" : "?");
    else
        snprintf(url, sizeof(url), "s3://%s%s", c->bucket, c->params);
    return rio_cli_bench_open(url, &o, out);
}

static void run_row(const struct cfg *c, const uint8_t *src, uint8_t *dst, struct row *rw)
{
    struct rio_client *cl = NULL;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    char key[128];

    snprintf(key, sizeof(key), BENCH_PREFIX "railio-%" PRIu64, rw->size);
    rw->put_err = open_client(c, rw->depth, false, &cl);
    if (rw->put_err < 0) {
        rw->get_err = rw->put_err;
        return;
    }
    for (unsigned r = 0; r < c->o.reps; r++) {
        int ret = rio_put(cl, key, src, rw->size, &call, NULL);
        if (ret < 0) {
            rw->put_err = ret;
            break;
        }
        if (st.goodput_mbps > rw->put_mbps)
            rw->put_mbps = st.goodput_mbps;
    }
    for (unsigned r = 0; r < c->o.reps && rw->put_err == 0; r++) {
        int64_t got = rio_get(cl, key, dst, rw->size, &call);
        if (got < 0) {
            rw->get_err = (int)got;
            break;
        }
        if (st.goodput_mbps > rw->get_mbps)
            rw->get_mbps = st.goodput_mbps;
    }
    rio_client_destroy(cl);
    if (c->discard && rw->put_err == 0 && open_client(c, rw->depth, true, &cl) == 0) {
        for (unsigned r = 0; r < c->o.reps; r++)
            if (rio_get(cl, key, dst, rw->size, &call) >= 0 &&
                st.goodput_mbps > rw->get_discard_mbps)
                rw->get_discard_mbps = st.goodput_mbps;
        rio_client_destroy(cl);
    }
    if (open_client(c, 1, false, &cl) == 0) {
        rio_delete(cl, key);
        rio_client_destroy(cl);
    }
}

static double ratio(double a, double b)
{
    return b > 0 ? a / b : 0;
}

int rio_cli_bench_s3(int argc, char **argv)
{
    struct cfg c = {.o = {.chunk = 8u << 20, .reps = 1}, .paths = 1, .curl = true, .aws = true};
    static const unsigned def_depths[] = {1, 2, 4, 8, 16, 32};
    struct row rows[MAXLIST * MAXLIST];
    struct base bases[MAXLIST];
    unsigned nrows = 0;
    uint64_t v[MAXLIST], maxsize;
    char file[512];
    int ret = 0;

    int status = rio_cli_bench_target(argc, argv, usage);
    if (status >= 0)
        return status;
    c.url = argv[0];
    c.o.sizes[0] = 256u << 20;
    c.o.nsizes = 1;
    memcpy(c.depths, def_depths, sizeof(def_depths));
    c.ndepths = 6;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *n = i + 1 < argc ? argv[i + 1] : NULL;
        int k;
        if (rio_cli_bench_opt(&c.o, 100, argc, argv, &i)) {
            continue;
        } else if (!strcmp(a, "--depths") && n &&
                   (k = rio_cli_parse_counts(n, c.depths, MAXLIST, 1024)) > 0) {
            c.ndepths = (unsigned)k;
            i++;
        } else if (!strcmp(a, "--paths") && n && !rio_cli_parse_size(n, v) && v[0] >= 1 &&
                   v[0] <= RIO_MAX_PATHS) {
            c.paths = (unsigned)v[0];
            i++;
        } else if (!strcmp(a, "--discard")) {
            c.discard = true;
        } else if (!strcmp(a, "--no-curl")) {
            c.curl = false;
        } else if (!strcmp(a, "--no-aws")) {
            c.aws = false;
        } else {
            return rio_cli_bench_other("s3", a, usage);
        }
    }
    if (split_url(&c) < 0) {
        fprintf(stderr, "railio bench s3: need s3://BUCKET and an endpoint (?endpoint=URL or "
                        "RIO_S3_ENDPOINT)\n");
        return 2;
    }
    if (c.curl && !rio_cli_have_program("curl"))
        c.curl = false;
    if (c.aws && !rio_cli_have_program("aws"))
        c.aws = false;
    maxsize = rio_cli_bench_max_size(&c.o);

    uint8_t *src, *dst;
    if (rio_cli_bench_buffers("railio bench s3", maxsize, &src, &dst) < 0)
        return 1;
    rio_cli_bench_path(file, sizeof(file), "s3");

    for (unsigned si = 0; si < c.o.nsizes; si++) {
        uint64_t size = c.o.sizes[si];
        struct base *b = &bases[si];
        memset(b, 0, sizeof(*b));
        b->size = size;
        if (c.curl || c.aws) {
            if (rio_cli_write_file("railio bench s3", file, src, size) < 0) {
                ret = 1;
                break;
            }
            if (c.curl)
                curl_base(&c, file, size, b);
            if (c.aws)
                aws_base(&c, file, size, b);
            unlink(file);
        }
        for (unsigned di = 0; di < c.ndepths; di++) {
            struct row *rw = &rows[nrows++];
            memset(rw, 0, sizeof(*rw));
            rw->size = size;
            rw->depth = c.depths[di];
            run_row(&c, src, dst, rw);
            if (rw->put_err || rw->get_err)
                ret = 1;
            if (!c.o.json)
                fprintf(stderr, "  %" PRIu64 " MiB depth %u: PUT %.0f MB/s GET %.0f MB/s\n",
                        size >> 20, rw->depth, rw->put_mbps, rw->get_mbps);
        }
    }

    if (c.o.json) {
        char shown[512];
        printf("{\"bench\":\"s3\",\"endpoint\":\"%s\",\"chunk\":%" PRIu64 ",\"paths\":%u,"
               "\"reps\":%u,\"memcpy_mbps\":%.0f,\"baselines\":[",
               rio_cli_url_safe(c.endpoint, shown, sizeof(shown)), c.o.chunk, c.paths, c.o.reps,
               rio_cli_memcpy_mbps(64u << 20));
        for (unsigned i = 0; i < c.o.nsizes; i++)
            printf("%s{\"size\":%" PRIu64 ",\"curl_put_mbps\":%.1f,\"curl_get_mbps\":%.1f,"
                   "\"aws_put_mbps\":%.1f,\"aws_get_mbps\":%.1f}",
                   i ? "," : "", bases[i].size, bases[i].curl_put, bases[i].curl_get,
                   bases[i].aws_put, bases[i].aws_get);
        printf("],\"rows\":[");
        for (unsigned i = 0; i < nrows; i++)
            printf("%s{\"size\":%" PRIu64 ",\"depth\":%u,\"put_mbps\":%.1f,\"get_mbps\":%.1f,"
                   "\"get_discard_mbps\":%.1f,\"put_err\":\"%s\",\"get_err\":\"%s\"}",
                   i ? "," : "", rows[i].size, rows[i].depth, rows[i].put_mbps, rows[i].get_mbps,
                   rows[i].get_discard_mbps, rio_errname(rows[i].put_err),
                   rio_errname(rows[i].get_err));
        printf("]}\n");
    } else {
        printf("railio bench s3: %s/%s, chunk %" PRIu64 " MiB, %u path(s), best of %u\n",
               c.endpoint, c.bucket, c.o.chunk >> 20, c.paths, c.o.reps);
        for (unsigned i = 0; i < c.o.nsizes; i++)
            printf("  %" PRIu64 " MiB ceilings: curl PUT %.0f GET %.0f MB/s; aws s3 cp PUT %.0f "
                   "GET %.0f MB/s\n",
                   bases[i].size >> 20, bases[i].curl_put, bases[i].curl_get, bases[i].aws_put,
                   bases[i].aws_get);
        printf("%10s %6s %10s %10s %9s %9s %9s %9s%s\n", "size", "depth", "PUT MB/s", "GET MB/s",
               "PUT/curl", "GET/curl", "PUT/aws", "GET/aws", c.discard ? "  GET-discard" : "");
        for (unsigned i = 0; i < nrows; i++) {
            const struct base *b = NULL;
            for (unsigned k = 0; k < c.o.nsizes; k++)
                if (bases[k].size == rows[i].size)
                    b = &bases[k];
            printf("%7" PRIu64 "MiB %6u %10.0f %10.0f %9.2f %9.2f %9.2f %9.2f", rows[i].size >> 20,
                   rows[i].depth, rows[i].put_mbps, rows[i].get_mbps,
                   ratio(rows[i].put_mbps, b->curl_put), ratio(rows[i].get_mbps, b->curl_get),
                   ratio(rows[i].put_mbps, b->aws_put), ratio(rows[i].get_mbps, b->aws_get));
            if (c.discard)
                printf("  %11.0f", rows[i].get_discard_mbps);
            if (rows[i].put_err || rows[i].get_err)
                printf("  (%s / %s)", rio_errname(rows[i].put_err), rio_errname(rows[i].get_err));
            printf("\n");
        }
    }
    free(src);
    free(dst);
    return ret;
}
