/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio demo, with the server: start railiod on loopback in the background,
 * PUT a 256 MiB object, LOOKUP it, GET it over one connection and over four,
 * verify every byte, print a table (MB/s, chunk p50/p99, verdict), stop the
 * server. Each GET runs three times into the same (already touched) buffer
 * and the table shows the median run, so page faults of fresh memory and a
 * one-off hiccup do not decide the figure.
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/spawn.h"
#include "cli/tcp_cli.h"
#include "railio.h"

#define DEMO_SIZE (256ull << 20)
#define DEMO_RUNS 3

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* ------------------------------------------------------- the server process */

static void rm_dir(struct rio_cli_srv *s)
{
    char p[160];

    if (!s->dir[0])
        return;
    snprintf(p, sizeof(p), "%s/ports", s->dir);
    unlink(p);
    unlink(s->log);
    rmdir(s->dir);
    s->dir[0] = '\0';
}

int rio_cli_srv_start(struct rio_cli_srv *s, const char *const *extra)
{
    char bin[PATH_MAX], ports[160];
    const char *argv[32];
    int n = 0, ret;

    memset(s, 0, sizeof(*s));
    s->pid = -1;
    ret = rio_cli_sibling("railiod", bin, sizeof(bin));
    if (ret == 0 && access(bin, X_OK) != 0)
        ret = -ENOENT;
    if (ret < 0)
        return ret;
    snprintf(s->dir, sizeof(s->dir), "/tmp/railio-demo-XXXXXX");
    if (!mkdtemp(s->dir)) {
        s->dir[0] = '\0';
        return -errno;
    }
    snprintf(ports, sizeof(ports), "%s/ports", s->dir);
    snprintf(s->log, sizeof(s->log), "%s/railiod.log", s->dir);
    argv[n++] = bin;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--port-file";
    argv[n++] = ports;
    for (; extra && *extra && n < 31; extra++)
        argv[n++] = *extra;
    argv[n] = NULL;

    pid_t parent = getpid();
    fflush(NULL);
    s->pid = fork();
    if (s->pid < 0) {
        ret = -errno;
        rm_dir(s);
        return ret;
    }
    if (s->pid == 0) {
        /* The server goes when the demo goes, however it ends. */
        prctl(PR_SET_PDEATHSIG, SIGTERM);
        if (getppid() != parent)
            _exit(1);
        rio_cli_exec_logged(bin, argv, s->log);
    }
    uint64_t t0 = now_ms();
    for (;;) {
        int st;
        if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
            s->pid = -1;
            return -ECHILD;
        }
        FILE *f = fopen(ports, "r");
        if (f) {
            char line[sizeof(s->addr)] = {0};
            char *ok = fgets(line, sizeof(line), f);
            fclose(f);
            if (ok && strchr(line, '\n')) {
                line[strcspn(line, ",\n")] = '\0';
                snprintf(s->addr, sizeof(s->addr), "%s", line);
                return 0;
            }
        }
        /* The server writes its ports after --prefault: touching 1 GiB of
         * memory the machine never backed before took over 10 s on a VM
         * whose host backs guest memory on first touch (make demo failed
         * there); a server that died is seen above at once. */
        if (now_ms() - t0 > 60000) {
            rio_cli_srv_stop(s);
            return -ETIMEDOUT;
        }
        usleep(10000);
    }
}

int rio_cli_srv_stop(struct rio_cli_srv *s)
{
    int st = 0, code = -1;

    if (s->pid > 0) {
        kill(s->pid, SIGTERM);
        uint64_t t0 = now_ms();
        for (;;) {
            pid_t r = waitpid(s->pid, &st, WNOHANG);
            if (r == s->pid) {
                if (WIFEXITED(st))
                    code = WEXITSTATUS(st);
                break;
            }
            if (r < 0 || now_ms() - t0 > 10000) {
                kill(s->pid, SIGKILL);
                waitpid(s->pid, NULL, 0);
                break;
            }
            usleep(5000);
        }
        s->pid = -1;
    }
    rm_dir(s);
    return code;
}

/* ------------------------------------------------------------------ demo */

struct row {
    const char *what;
    unsigned conns;
    int ok;
    int err;
    struct rio_stats st; /* the median run */
};

static int by_goodput(const void *a, const void *b)
{
    const struct rio_stats *x = a, *y = b;
    return (x->goodput_mbps > y->goodput_mbps) - (x->goodput_mbps < y->goodput_mbps);
}

static int open_client(const char *addr, unsigned conns, struct rio_client **c)
{
    char url[160];
    struct rio_options o;

    rio_options_init(&o);
    snprintf(url, sizeof(url), "railio://%s?conns=%u", addr, conns);
    return rio_client_new(url, &o, c);
}

static void print_row(const struct row *r)
{
    if (!r->ok) {
        printf("%-22s %5u  error: %s (%s)\n", r->what, r->conns, rio_strerror(r->err),
               rio_errname(r->err));
        return;
    }
    printf("%-22s %5u %9.1f %8.2f %8.2f %9s %7.2f  %s: %s\n", r->what, r->conns, r->st.goodput_mbps,
           r->st.lat_p50_ns / 1e6, r->st.lat_p99_ns / 1e6, "yes", rio_cli_verify_gbps_core(&r->st),
           rio_verdict_name(r->st.verdict), r->st.verdict_text);
}

int rio_cli_demo_server(int argc, char **argv)
{
    struct rio_cli_srv srv;
    struct rio_client *c = NULL;
    struct row rows[3];
    uint8_t *src = NULL, *dst = NULL;
    int ret, rc = 1;

    (void)argc;
    (void)argv;
    printf("railio demo: railiod on loopback, one 256 MiB object over railio://\n");
    /* Prefaulted: a cold server's first touch of fresh memory would cost the
     * one PUT more than the transfer (railiod --prefault). 1 GiB holds the
     * object and its upload. */
    static const char *const srv_args[] = {"--memory", "1G", "--prefault", NULL};
    ret = rio_cli_srv_start(&srv, srv_args);
    if (ret < 0) {
        fprintf(stderr, "railio demo: cannot start railiod: %s%s\n", rio_strerror(ret),
                ret == -ENOENT ? " (build it: it must sit next to the railio program)" : "");
        return 1;
    }
    printf("server:  railiod pid %d on %s, started with --memory 1G --prefault (log %s)\n",
           (int)srv.pid, srv.addr, srv.log);

    src = malloc(DEMO_SIZE);
    dst = malloc(DEMO_SIZE);
    if (!src || !dst) {
        fprintf(stderr, "railio demo: cannot allocate 2 x 256 MiB\n");
        goto out;
    }
    rio_cli_fill(src, DEMO_SIZE, 1);
    memset(dst, 0, DEMO_SIZE); /* touched once: the GETs measure the network, not page faults */
    memset(rows, 0, sizeof(rows));

    /* PUT */
    rows[0].what = "PUT 256 MiB";
    rows[0].conns = 1;
    ret = open_client(srv.addr, 1, &c);
    if (ret == 0) {
        struct rio_call call = {.stats = &rows[0].st};
        struct rio_desc d;
        memset(&d, 0, sizeof(d));
        ret = rio_put(c, "demo/object", src, DEMO_SIZE, &call, &d);
        rio_desc_cleanup(&d);
    }
    rows[0].ok = ret == 0;
    rows[0].err = ret;
    if (ret < 0) {
        fprintf(stderr, "railio demo: PUT failed: %s (%s)\n", rio_strerror(ret), rio_errname(ret));
        goto out;
    }

    /* LOOKUP */
    struct rio_desc d;
    ret = rio_stat(c, "demo/object", &d);
    if (ret < 0) {
        fprintf(stderr, "railio demo: LOOKUP failed: %s (%s)\n", rio_strerror(ret),
                rio_errname(ret));
        goto out;
    }
    printf("lookup:  key %s, generation %llu, %llu bytes in %llu chunks of %llu, etag %s\n\n",
           d.key, (unsigned long long)d.generation, (unsigned long long)d.size,
           (unsigned long long)d.nchunks, (unsigned long long)d.chunk_size, d.etag);
    rio_desc_cleanup(&d);
    rio_client_destroy(c);
    c = NULL;

    /* GET over 1 connection, then 4 */
    const unsigned conns[2] = {1, 4};
    for (int k = 0; k < 2; k++) {
        struct row *r = &rows[1 + k];
        struct rio_stats runs[DEMO_RUNS];
        r->what = k == 0 ? "GET 256 MiB, 1 conn" : "GET 256 MiB, 4 conns";
        r->conns = conns[k];
        ret = open_client(srv.addr, conns[k], &c);
        for (int i = 0; ret == 0 && i < DEMO_RUNS; i++) {
            struct rio_call call = {.stats = &runs[i]};
            memset(dst, 0, 4096);
            int64_t got = rio_get(c, "demo/object", dst, DEMO_SIZE, &call);
            if (got < 0)
                ret = (int)got;
            else if ((uint64_t)got != DEMO_SIZE || memcmp(src, dst, DEMO_SIZE) != 0)
                ret = RIO_ECHECKSUM;
        }
        rio_client_destroy(c);
        c = NULL;
        r->ok = ret == 0;
        r->err = ret;
        if (r->ok) {
            qsort(runs, DEMO_RUNS, sizeof(runs[0]), by_goodput);
            r->st = runs[DEMO_RUNS / 2];
        }
    }

    printf("%-22s %5s %9s %8s %8s %9s %7s  %s\n", "step", "conns", "MB/s", "p50 ms", "p99 ms",
           "verified", "vGB/s/c", "verdict");
    for (int i = 0; i < 3; i++)
        print_row(&rows[i]);
    printf("\n(MB/s = 10^6 bytes/s; p50/p99 = chunk latency of 4 MiB chunks; vGB/s/c = GB/s\n"
           " verified per core of the client's workers; GETs are the\n"
           " median of %d runs, each byte compared with what was PUT)\n",
           DEMO_RUNS);
    rc = rows[0].ok && rows[1].ok && rows[2].ok ? 0 : 1;
out:
    rio_client_destroy(c);
    free(src);
    free(dst);
    ret = rio_cli_srv_stop(&srv);
    printf("server:  stopped (exit %d)\n", ret);
    if (ret != 0)
        rc = 1;
    return rc;
}
