/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio bench --rails-from-harness N --rate R[,R...]: railio:// over real
 * kernel networking, N veth rails shaped with tc tbf between two network
 * namespaces this run creates (tests/harness/rails.sh), every row compared
 * with iperf3 over the same rails measured in the same run.
 *
 * A setup (a rail count and its per-rail rates) builds the rails, starts the
 * railiod next to this program inside the server namespace, listening on
 * every rail, and then for each repetition and direction: the iperf3 ceiling
 * (one iperf3 per rail, all at once, in the transfer's direction), then one
 * transfer per depth x conns row, from the client namespace (this thread
 * enters it with setns(2) around each client, so the engine's and the
 * transport's threads live there). A GET lands in a buffer touched before
 * the call and is compared byte for byte; a PUT is checked by its
 * descriptor. A row keeps its best goodput over the repetitions and the best
 * ceiling of its setup and direction (so its ratio is never flattered by a
 * slow iperf3 run), plus every run in --json.
 *
 * Nothing in the root namespace routes to the rails (10.99.0.0/16): every
 * socket that uses them is opened inside the namespaces. The namespaces are
 * named after this process (RIO_RAILS_ID = pid, so `rails.sh gc` of another
 * run leaves them alone) and are torn down at the end of every setup, on
 * every error, and from a SIGINT/SIGTERM/SIGHUP handler (fork + execve of a
 * prepared command: async-signal-safe), with whatever still runs inside them
 * (only processes this run started can).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/bench_rails.h"
#include "cli/cli.h"
#include "core/alloc.h"
#include "railio.h"

#define MAX_RAILS 16
#define MAX_LIST 8
#define MAX_RATESETS 8
#define MAX_SETUPS 32
#define MAX_REPS 20
#define SRV_PORT 7070
#define IPERF_PORT 5201
#define KEY "bench-rails/object"

/* ----------------------------------------------------------- arguments */

struct cfg {
    uint64_t rails[MAX_LIST];
    int nrails;
    char rateset[MAX_RATESETS][256];
    int nratesets;
    uint64_t depth[MAX_LIST];
    int ndepth;
    uint64_t conns[MAX_LIST];
    int nconns;
    int dir[2]; /* RIO_OP_GET / RIO_OP_PUT, in the order given */
    int ndirs;
    uint64_t size, chunk;
    int reps, json;
    double ceil_secs;
    const char *svg;
    const char *harness;
    const char *params;
};

/* One rail count with its per-rail rates: one rails.sh up, one railiod. */
struct setup {
    unsigned n;
    char rate[MAX_RAILS][16];
    char rates[256]; /* comma-separated, for rails.sh */
    double nominal_bps;
};

struct run {
    int ok, err;
    double mbit, ceil;
};

struct row {
    int setup;
    int dir;
    unsigned depth, conns;
    int nruns;
    struct run runs[MAX_REPS];
    /* The pick: best goodput, best ceiling of the setup and direction. */
    int ok, err;
    char why[160];
    double mbit, ceil;
    double ceil_rail[MAX_RAILS];
    uint64_t rail_bytes[MAX_RAILS];
    struct rio_stats st;
};

/* ------------------------------------------------------------- state */

struct ctx {
    struct cfg cfg;
    char script[2100]; /* rails.sh */
    char railiod[1024];
    char dir[64]; /* temporary: port file, logs, iperf3 JSON */
    char id[24];  /* RIO_RAILS_ID */
    char cns[48], sns[48];
    int rootfd, cfd, sfd;
    pid_t srv;
    int have_obj;
    uint8_t *src, *dst;
    size_t buflen;
    struct setup setups[MAX_SETUPS];
    int nsetups;
    struct row *rows;
    int nrows;
    double load0[3], load1[3];
};

/* What the signal handler needs, prepared before anything is built. */
static volatile sig_atomic_t g_srv = -1;
static volatile sig_atomic_t g_sh = -1;
static int g_rootfd = -1;
static char g_abort_cmd[8192];
static char *g_abort_argv[4] = {"sh", "-c", g_abort_cmd, NULL};

static void on_signal(int sig)
{
    static const char msg[] = "railio bench: interrupted; tearing the rails down\n";
    pid_t p;

    (void)!write(2, msg, sizeof(msg) - 1);
    if (g_sh > 0)
        kill((pid_t)g_sh, SIGKILL);
    if (g_srv > 0)
        kill((pid_t)g_srv, SIGKILL);
    p = fork();
    if (p == 0) {
        /* The signal may have landed on a thread inside the client
         * namespace: the tear-down must not count itself among the
         * processes that live there. */
        if (g_rootfd >= 0)
            (void)setns(g_rootfd, CLONE_NEWNET);
        execve("/bin/sh", g_abort_argv, environ);
        _exit(127);
    }
    if (p > 0)
        while (waitpid(p, NULL, 0) < 0 && errno == EINTR)
            ;
    _exit(128 + sig);
}

static void signals(int install)
{
    struct sigaction sa;
    const int sigs[] = {SIGINT, SIGTERM, SIGHUP, SIGPIPE};
    const unsigned n = sizeof(sigs) / sizeof(sigs[0]);

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = install ? on_signal : SIG_DFL;
    sigemptyset(&sa.sa_mask);
    for (unsigned i = 0; i < n; i++)
        sigaddset(&sa.sa_mask, sigs[i]);
    for (unsigned i = 0; i < n; i++)
        sigaction(sigs[i], &sa, NULL);
}

/*
 * Run a shell command and wait for it; its exit status, or -1. Not
 * system(3): that ignores SIGINT while it waits, and a Ctrl-C must reach
 * the handler that tears the rails down.
 */
static int sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int sh(const char *fmt, ...)
{
    char cmd[16384];
    va_list ap;
    int n, st;
    pid_t p;

    va_start(ap, fmt);
    n = vsnprintf(cmd, sizeof(cmd), fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof(cmd))
        return -1;
    fflush(NULL);
    p = fork();
    if (p < 0)
        return -1;
    if (p == 0) {
        char *argv[] = {"sh", "-c", cmd, NULL};
        execve("/bin/sh", argv, environ);
        _exit(127);
    }
    g_sh = p;
    while (waitpid(p, &st, 0) < 0)
        if (errno != EINTR) {
            g_sh = -1;
            return -1;
        }
    g_sh = -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ------------------------------------------------------------- parsing */

/* A tc rate ("250mbit", "1gbit"): bits/s, or 0 when malformed. */
static double rate_bps(const char *r)
{
    char *end;
    unsigned long long v;

    if (!r || *r < '0' || *r > '9')
        return 0;
    errno = 0;
    v = strtoull(r, &end, 10);
    if (errno || v == 0 || v > 1000000)
        return 0;
    if (!strcmp(end, "gbit"))
        return (double)v * 1e9;
    if (!strcmp(end, "mbit"))
        return (double)v * 1e6;
    if (!strcmp(end, "kbit"))
        return (double)v * 1e3;
    return 0;
}

/* "1gbit,500mbit": every entry a valid rate, at most MAX_RAILS. */
static int rateset_ok(const char *s)
{
    char buf[256], *save = NULL, *tok;
    int n = 0;

    if (strlen(s) >= sizeof(buf))
        return 0;
    strcpy(buf, s);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == MAX_RAILS || strlen(tok) >= 16 || rate_bps(tok) == 0)
            return 0;
        n++;
    }
    return n > 0;
}

static int parse_dirs(const char *s, struct cfg *c)
{
    char buf[64], *save = NULL, *tok;

    if (strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    c->ndirs = 0;
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        int d = !strcmp(tok, "get") ? RIO_OP_GET : !strcmp(tok, "put") ? RIO_OP_PUT : 0;
        if (!d || c->ndirs == 2 || (c->ndirs == 1 && c->dir[0] == d))
            return -1;
        c->dir[c->ndirs++] = d;
    }
    return c->ndirs ? 0 : -1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: railio bench --rails-from-harness N[,N...] [--rate R[,R...]]... [flags]\n"
            "  railio:// over N veth rails (tests/harness/rails.sh, tc tbf per rail) between\n"
            "  two network namespaces of its own, railiod in one, the client in the other,\n"
            "  each row against iperf3 over the same rails in the same run. Needs root.\n"
            "  --rails-from-harness LIST  rail counts to sweep (1..16), e.g. 4 or 1,2,4\n"
            "  --rails LIST         the same\n"
            "  --rate R[,R...]      tc rate of every rail, or one per rail (the last one\n"
            "                       repeats): 1gbit, 1gbit,1gbit,500mbit,250mbit; repeat the\n"
            "                       flag to sweep rate sets (default 1gbit)\n"
            "  --dir get,put        directions (default get)\n"
            "  --size SIZE          object size (default 512M)\n"
            "  --chunk SIZE         chunk size (default 1M)\n"
            "  --depth LIST         ops in flight per connection (default 4)\n"
            "  --conns LIST         connections per rail (default 1)\n"
            "  --reps N             repetitions (1..%d); a row keeps its best goodput and its\n"
            "                       setup's best ceiling (default 1)\n"
            "  --ceiling-secs S     iperf3 seconds per rail, after 1 s omitted (default 2)\n"
            "  --params P           more railio:// URL parameters (a=b&c=d)\n"
            "  --harness PATH       rails.sh (default: found from $T_SOURCE_DIR, the build's\n"
            "                       CMakeCache.txt, or ./tests/harness/rails.sh)\n"
            "  --json               one JSON document instead of the table\n"
            "  --svg FILE           also draw goodput against the ceiling per row\n",
            MAX_REPS);
}

static int parse_args(struct cfg *c, int argc, char **argv)
{
    memset(c, 0, sizeof(*c));
    c->size = 512ull << 20;
    c->chunk = 1ull << 20;
    c->depth[0] = 4;
    c->ndepth = 1;
    c->conns[0] = 1;
    c->nconns = 1;
    c->dir[0] = RIO_OP_GET;
    c->ndirs = 1;
    c->reps = 1;
    c->ceil_secs = 2;

    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0;
        if (!strcmp(a, "--json")) {
            c->json = 1;
            continue;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 1;
        }
        if (!v) {
            bad = 1;
        } else if (!strcmp(a, "--rails-from-harness") || !strcmp(a, "--rails")) {
            c->nrails = rio_cli_parse_list(v, c->rails, MAX_LIST);
            bad = c->nrails < 0;
            for (int k = 0; !bad && k < c->nrails; k++)
                bad = c->rails[k] > MAX_RAILS;
        } else if (!strcmp(a, "--rate")) {
            bad = c->nratesets == MAX_RATESETS || !rateset_ok(v);
            if (!bad)
                snprintf(c->rateset[c->nratesets++], sizeof(c->rateset[0]), "%s", v);
        } else if (!strcmp(a, "--dir")) {
            bad = parse_dirs(v, c) < 0;
        } else if (!strcmp(a, "--size")) {
            bad = rio_cli_parse_size(v, &c->size) < 0 || c->size == 0 || c->size > (16ull << 30);
        } else if (!strcmp(a, "--chunk")) {
            bad =
                rio_cli_parse_size(v, &c->chunk) < 0 || c->chunk < 4096 || c->chunk > (1ull << 30);
        } else if (!strcmp(a, "--depth")) {
            c->ndepth = rio_cli_parse_list(v, c->depth, MAX_LIST);
            bad = c->ndepth < 0;
            for (int k = 0; !bad && k < c->ndepth; k++)
                bad = c->depth[k] > 1024;
        } else if (!strcmp(a, "--conns")) {
            c->nconns = rio_cli_parse_list(v, c->conns, MAX_LIST);
            bad = c->nconns < 0;
            for (int k = 0; !bad && k < c->nconns; k++)
                bad = c->conns[k] > 16;
        } else if (!strcmp(a, "--reps")) {
            char *end;
            long r = strtol(v, &end, 10);
            bad = *end || r < 1 || r > MAX_REPS;
            c->reps = (int)r;
        } else if (!strcmp(a, "--ceiling-secs")) {
            char *end;
            c->ceil_secs = strtod(v, &end);
            bad = *end || !(c->ceil_secs >= 1 && c->ceil_secs <= 60);
        } else if (!strcmp(a, "--svg")) {
            c->svg = v;
        } else if (!strcmp(a, "--harness")) {
            c->harness = v;
        } else if (!strcmp(a, "--params")) {
            bad = strlen(v) > 256 || strpbrk(v, " ?#'\"") != NULL;
            c->params = v;
        } else {
            bad = 1;
        }
        if (bad) {
            fprintf(stderr, "railio bench: bad argument '%s'%s%s%s\n", a, v ? " '" : "", v ? v : "",
                    v ? "'" : "");
            usage(stderr);
            return -1;
        }
        i++;
    }
    if (c->nrails <= 0) {
        fprintf(stderr, "railio bench: --rails-from-harness N (or --rails LIST) is required\n");
        usage(stderr);
        return -1;
    }
    if (c->nratesets == 0) {
        snprintf(c->rateset[0], sizeof(c->rateset[0]), "1gbit");
        c->nratesets = 1;
    }
    return 0;
}

/* -------------------------------------------------------------- setup */

/* The setups: every rate set x rail count, without repeating one whose
 * rails would be the same (1 rail of "1gbit,500mbit" is 1 rail of 1gbit). */
static void plan(struct ctx *x)
{
    const struct cfg *c = &x->cfg;

    for (int r = 0; r < c->nratesets; r++)
        for (int k = 0; k < c->nrails && x->nsetups < MAX_SETUPS; k++) {
            struct setup s;
            char buf[256], *save = NULL, *tok, list[MAX_RAILS][16];
            unsigned nl = 0;
            size_t len = 0;

            memset(&s, 0, sizeof(s));
            s.n = (unsigned)c->rails[k];
            strcpy(buf, c->rateset[r]);
            for (tok = strtok_r(buf, ",", &save); tok && nl < MAX_RAILS;
                 tok = strtok_r(NULL, ",", &save))
                snprintf(list[nl++], sizeof(list[0]), "%s", tok);
            for (unsigned i = 0; i < s.n; i++) {
                snprintf(s.rate[i], sizeof(s.rate[i]), "%s", list[i < nl ? i : nl - 1]);
                s.nominal_bps += rate_bps(s.rate[i]);
                len += (size_t)snprintf(s.rates + len, sizeof(s.rates) - len, "%s%s", i ? "," : "",
                                        s.rate[i]);
            }
            int dup = 0;
            for (int j = 0; j < x->nsetups && !dup; j++)
                dup = x->setups[j].n == s.n && !strcmp(x->setups[j].rates, s.rates);
            if (!dup)
                x->setups[x->nsetups++] = s;
        }
}

static int build_rows(struct ctx *x)
{
    const struct cfg *c = &x->cfg;
    int n = x->nsetups * c->ndirs * c->ndepth * c->nconns, k = 0;

    x->rows = rio__calloc((size_t)n, sizeof(*x->rows));
    if (!x->rows)
        return -ENOMEM;
    for (int s = 0; s < x->nsetups; s++)
        for (int d = 0; d < c->ndirs; d++)
            for (int i = 0; i < c->ndepth; i++)
                for (int j = 0; j < c->nconns; j++, k++) {
                    struct row *r = &x->rows[k];
                    r->setup = s;
                    r->dir = c->dir[d];
                    r->depth = (unsigned)c->depth[i];
                    r->conns = (unsigned)c->conns[j];
                    r->err = RIO_EINVAL;
                    snprintf(r->why, sizeof(r->why), "not run");
                }
    x->nrows = n;
    return 0;
}

/* rails.sh: --harness, $T_SOURCE_DIR, the source directory of the build
 * this program sits in (its CMakeCache.txt), or the working directory. */
static int find_script(struct ctx *x)
{
    char cache[1100], line[2048];
    const char *src = getenv("T_SOURCE_DIR");

    if (x->cfg.harness) {
        snprintf(x->script, sizeof(x->script), "%s", x->cfg.harness);
        return access(x->script, R_OK) == 0 ? 0 : -errno;
    }
    if (src && *src) {
        snprintf(x->script, sizeof(x->script), "%s/tests/harness/rails.sh", src);
        if (access(x->script, R_OK) == 0)
            return 0;
    }
    if (rio_cli_sibling("CMakeCache.txt", cache, sizeof(cache)) == 0) {
        FILE *f = fopen(cache, "r");
        while (f && fgets(line, sizeof(line), f)) {
            const char *k = "CMAKE_HOME_DIRECTORY:INTERNAL=";
            if (strncmp(line, k, strlen(k)) != 0)
                continue;
            line[strcspn(line, "\n")] = '\0';
            snprintf(x->script, sizeof(x->script), "%s/tests/harness/rails.sh", line + strlen(k));
            break;
        }
        if (f)
            fclose(f);
        if (x->script[0] && access(x->script, R_OK) == 0)
            return 0;
    }
    snprintf(x->script, sizeof(x->script), "tests/harness/rails.sh");
    return access(x->script, R_OK) == 0 ? 0 : -ENOENT;
}

static int enter(int fd)
{
    return setns(fd, CLONE_NEWNET) < 0 ? -errno : 0;
}

/* Kill what still runs in this run's namespaces (only what it started can),
 * remove the rails. Idempotent. */
static void rails_down(struct ctx *x)
{
    if (x->srv > 0) {
        kill(x->srv, SIGKILL);
        waitpid(x->srv, NULL, 0);
        x->srv = -1;
        g_srv = -1;
    }
    if (x->cfd >= 0)
        close(x->cfd);
    if (x->sfd >= 0)
        close(x->sfd);
    x->cfd = x->sfd = -1;
    sh("for ns in %s %s; do for p in $(ip netns pids $ns 2>/dev/null); do [ $p = %s ] || "
       "kill -9 $p; done; done; RIO_RAILS_ID=%s bash '%s' down",
       x->cns, x->sns, x->id, x->id, x->script);
}

static int rails_up(struct ctx *x, const struct setup *s)
{
    char path[128];
    int st;

    st = sh("RIO_RAILS_ID=%s bash '%s' up %u %s >/dev/null", x->id, x->script, s->n, s->rates);
    if (st != 0) {
        fprintf(stderr, "railio bench: rails.sh up %u %s failed (status %d)\n", s->n, s->rates, st);
        return -EIO;
    }
    snprintf(path, sizeof(path), "/var/run/netns/%s", x->cns);
    x->cfd = open(path, O_RDONLY | O_CLOEXEC);
    snprintf(path, sizeof(path), "/var/run/netns/%s", x->sns);
    x->sfd = open(path, O_RDONLY | O_CLOEXEC);
    if (x->cfd < 0 || x->sfd < 0) {
        fprintf(stderr, "railio bench: cannot open the rails' namespaces: %s\n", strerror(errno));
        return -EIO;
    }
    return 0;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* railiod in the server namespace, one listener per rail; waits (10 s at
 * most) for its port file. */
static int srv_start(struct ctx *x, const struct setup *s)
{
    char listen[512], ports[128], log[128], mem[32];
    size_t len = 0;
    pid_t parent = getpid();

    for (unsigned i = 0; i < s->n; i++)
        len += (size_t)snprintf(listen + len, sizeof(listen) - len, "%s10.99.%u.2:%d", i ? "," : "",
                                i, SRV_PORT);
    snprintf(ports, sizeof(ports), "%s/ports", x->dir);
    snprintf(log, sizeof(log), "%s/railiod.log", x->dir);
    /* The object, a new generation being uploaded over it, and slack. */
    snprintf(mem, sizeof(mem), "%" PRIu64, (uint64_t)(2 * x->cfg.size + (256ull << 20)));
    unlink(ports);
    fflush(NULL);
    pid_t p = fork();
    if (p < 0)
        return -errno;
    if (p == 0) {
        const char *argv[] = {x->railiod, "--listen", listen,       "--port-file", ports,
                              "--memory", mem,        "--prefault", NULL};
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent || setns(x->sfd, CLONE_NEWNET) < 0)
            _exit(126);
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(x->railiod, (char *const *)argv);
        _exit(127);
    }
    x->srv = p;
    g_srv = p;
    /* --prefault touches all of --memory first: seconds a GiB where the
     * host no longer backs the pages (docs/bench.md), so wait up to 60 s. */
    for (uint64_t t0 = now_ms(); now_ms() - t0 < 60000; usleep(10000)) {
        char line[512];
        if (waitpid(p, NULL, WNOHANG) == p) {
            x->srv = g_srv = -1;
            fprintf(stderr, "railio bench: railiod exited at start (log: %s)\n", log);
            return -ECHILD;
        }
        FILE *f = fopen(ports, "r");
        if (!f)
            continue;
        char *ok = fgets(line, sizeof(line), f);
        fclose(f);
        if (ok && strchr(line, '\n'))
            return 0;
    }
    fprintf(stderr, "railio bench: railiod did not start within 60 s (log: %s)\n", log);
    return -ETIMEDOUT;
}

static void srv_stop(struct ctx *x)
{
    if (x->srv <= 0)
        return;
    kill(x->srv, SIGTERM);
    for (uint64_t t0 = now_ms();; usleep(5000)) {
        pid_t r = waitpid(x->srv, NULL, WNOHANG);
        if (r == x->srv)
            break;
        if (r < 0 || now_ms() - t0 > 10000) {
            kill(x->srv, SIGKILL);
            waitpid(x->srv, NULL, 0);
            break;
        }
    }
    x->srv = g_srv = -1;
}

/* ------------------------------------------------------------ ceiling */

/* bits_per_second of "sum_received" in an iperf3 -J file; <= 0 if none. */
static double iperf_json_bps(const char *file)
{
    char *buf;
    FILE *f = fopen(file, "r");
    size_t n;
    double v = -1;

    if (!f)
        return -1;
    buf = rio__malloc(1 << 20);
    if (!buf) {
        fclose(f);
        return -1;
    }
    n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *p = strstr(buf, "\"sum_received\"");
    if (p)
        p = strstr(p, "\"bits_per_second\"");
    if (p && (p = strchr(p, ':')))
        v = strtod(p + 1, NULL);
    rio__free(buf);
    return v;
}

/*
 * The iperf3 ceiling over every rail of s at once, in the transfer's
 * direction (GET: server -> client, -R): one server (in the server
 * namespace, bound to its rail, waited for until it listens) and one client
 * (in the client namespace, bound to its rail) per rail. Summed Mbit/s
 * (1e6) received, per rail in per_rail; < 0 on failure.
 */
static double ceiling(struct ctx *x, const struct setup *s, int dir, double *per_rail)
{
    char cmd[16384];
    size_t len = 0;
    unsigned secs = (unsigned)(x->cfg.ceil_secs + 0.5);
    double sum = 0;

#define ADD(...)                                                                                   \
    len += (size_t)snprintf(cmd + (len < sizeof(cmd) ? len : 0),                                   \
                            len < sizeof(cmd) ? sizeof(cmd) - len : 0, __VA_ARGS__)
    ADD("spids=; cpids=; trap 'kill $spids 2>/dev/null; wait' EXIT; ");
    for (unsigned i = 0; i < s->n; i++)
        ADD("ip netns exec %s timeout %u iperf3 -s -1 -B 10.99.%u.2 -p %u >/dev/null 2>&1 & "
            "spids=\"$spids $!\"; ",
            x->sns, secs + 20, i, IPERF_PORT + i);
    for (unsigned i = 0; i < s->n; i++)
        ADD("k=0; until ip netns exec %s ss -Hltn 'sport = :%u' | grep -q .; do k=$((k+1)); "
            "[ $k -lt 400 ] || exit 3; sleep 0.025; done; ",
            x->sns, IPERF_PORT + i);
    for (unsigned i = 0; i < s->n; i++)
        ADD("ip netns exec %s iperf3 -c 10.99.%u.2 -B 10.99.%u.1 -p %u -t %u -O 1 -J %s "
            "--connect-timeout 3000 >%s/iperf%u.json 2>&1 & cpids=\"$cpids $!\"; ",
            x->cns, i, i, IPERF_PORT + i, secs, dir == RIO_OP_GET ? "-R" : "", x->dir, i);
    ADD("rc=0; for p in $cpids; do wait $p || rc=1; done; exit $rc");
#undef ADD
    if (len >= sizeof(cmd))
        return -1;
    int st = sh("%s", cmd);
    for (unsigned i = 0; i < s->n; i++) {
        char f[128];
        snprintf(f, sizeof(f), "%s/iperf%u.json", x->dir, i);
        double v = st == 0 ? iperf_json_bps(f) / 1e6 : -1;
        unlink(f);
        if (v <= 0) {
            fprintf(stderr, "railio bench: iperf3 on rail %u (10.99.%u.1 -> 10.99.%u.2) failed%s\n",
                    i, i, i, st == 3 ? ": its server never listened" : "");
            return -1;
        }
        per_rail[i] = v;
        sum += v;
    }
    return sum;
}

/* ----------------------------------------------------------- transfer */

static void set_why(struct row *r, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void set_why(struct row *r, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->why, sizeof(r->why), fmt, ap);
    va_end(ap);
    r->err = err;
}

/*
 * One transfer of row r from the client namespace: a client opened on the
 * rails of s (each rail named by its source > destination pair), the
 * object moved once, checked. Fills *st; returns 0 or an error (r->why set).
 */
static int transfer(struct ctx *x, const struct setup *s, struct row *r, struct rio_stats *st)
{
    const struct cfg *c = &x->cfg;
    char url[1024];
    size_t len;
    struct rio_options o;
    struct rio_client *cl = NULL;
    struct rio_call call = {.stats = st};
    int ret;

    len = (size_t)snprintf(url, sizeof(url), "railio://10.99.0.2:%d?rails=", SRV_PORT);
    for (unsigned i = 0; i < s->n; i++)
        len += (size_t)snprintf(url + len, sizeof(url) - len, "%s10.99.%u.1>10.99.%u.2",
                                i ? "," : "", i, i);
    snprintf(url + len, sizeof(url) - len,
             "&conns=%u&depth=%u&user_timeout=1s&progress_timeout=1s&connect_timeout=500ms%s%s",
             r->conns, r->depth, c->params ? "&" : "", c->params ? c->params : "");

    rio_options_init(&o);
    o.chunk_size = c->chunk;
    o.depth = r->depth;
    /* Every path's window full twice over, and never under 256 MiB. */
    uint64_t want = 2ull * s->n * r->conns * r->depth * c->chunk;
    o.budget_bytes = want > (256ull << 20) ? want : 256ull << 20;
    /* Twenty times the transfer at the rails' nominal rate, 60 s to 10 min. */
    double t = (double)c->size * 8 / s->nominal_bps * 20 * 1000;
    o.deadline_ms = t < 60000 ? 60000 : t > 600000 ? 600000 : (uint32_t)t;

    memset(st, 0, sizeof(*st));
    ret = enter(x->cfd);
    if (ret < 0) {
        set_why(r, ret, "setns(client): %s", strerror(-ret));
        return ret;
    }
    ret = rio_client_new(url, &o, &cl);
    if (ret < 0) {
        set_why(r, ret, "rio_client_new: %s (%s)", rio_errname(ret), rio_strerror(ret));
        goto out;
    }
    if (r->dir == RIO_OP_GET && !x->have_obj) {
        ret = rio_put(cl, KEY, x->src, c->size, NULL, NULL);
        if (ret < 0) {
            set_why(r, ret, "PUT of the object to read: %s (%s)", rio_errname(ret),
                    rio_strerror(ret));
            goto out;
        }
        x->have_obj = 1;
    }
    if (r->dir == RIO_OP_PUT) {
        struct rio_desc d;
        ret = rio_put(cl, KEY, x->src, c->size, &call, NULL);
        if (ret < 0) {
            set_why(r, ret, "rio_put: %s (%s)", rio_errname(ret), rio_strerror(ret));
            goto out;
        }
        memset(&d, 0, sizeof(d));
        ret = rio_stat(cl, KEY, &d);
        if (ret == 0 && d.size != c->size)
            ret = RIO_ESHORT;
        rio_desc_cleanup(&d);
        if (ret < 0) {
            set_why(r, ret, "the PUT's object does not read back: %s", rio_errname(ret));
            goto out;
        }
        x->have_obj = 1;
    } else {
        /* Touched, and poisoned so a GET that wrote nothing cannot pass. */
        memset(x->dst, 0xEE, c->size);
        int64_t got = rio_get(cl, KEY, x->dst, c->size, &call);
        if (got < 0) {
            ret = (int)got;
            set_why(r, ret, "rio_get: %s (%s)", rio_errname(ret), rio_strerror(ret));
            goto out;
        }
        if ((uint64_t)got != c->size || memcmp(x->dst, x->src, c->size) != 0) {
            ret = RIO_ECHECKSUM;
            set_why(r, ret, "the GET returned %lld bytes that differ from the object",
                    (long long)got);
            goto out;
        }
    }
    ret = 0;
out:
    rio_client_destroy(cl);
    int back = enter(x->rootfd);
    if (back < 0) {
        /* Everything after this would run in the client namespace. */
        fprintf(stderr, "railio bench: setns back to the root namespace: %s\n", strerror(-back));
        rails_down(x);
        _exit(1);
    }
    return ret;
}

static double mbit(const struct rio_stats *st)
{
    return st->elapsed_ns ? (double)st->bytes * 8.0 * 1e3 / (double)st->elapsed_ns : 0;
}

/* One setup: rails, server, then for every repetition and direction the
 * ceiling and the rows. Returns 0, or an error when the setup itself failed
 * (its rows say why). */
static int run_setup(struct ctx *x, int si)
{
    const struct setup *s = &x->setups[si];
    const struct cfg *c = &x->cfg;
    int ret;

    x->have_obj = 0;
    ret = rails_up(x, s);
    if (ret == 0)
        ret = srv_start(x, s);
    if (ret < 0) {
        for (int k = 0; k < x->nrows; k++)
            if (x->rows[k].setup == si)
                set_why(&x->rows[k], ret, "setup failed (rails or railiod), see above");
        rails_down(x);
        return ret;
    }
    for (int rep = 0; rep < c->reps; rep++)
        for (int d = 0; d < c->ndirs; d++) {
            double per[MAX_RAILS] = {0};
            double cmb = ceiling(x, s, c->dir[d], per);
            for (int k = 0; k < x->nrows; k++) {
                struct row *r = &x->rows[k];
                struct rio_stats st;
                if (r->setup != si || r->dir != c->dir[d])
                    continue;
                struct run *rn = &r->runs[r->nruns++];
                rn->ceil = cmb;
                if (cmb > r->ceil) {
                    r->ceil = cmb;
                    memcpy(r->ceil_rail, per, sizeof(per));
                }
                if (cmb <= 0) {
                    rn->err = -EIO;
                    set_why(r, -EIO, "iperf3 ceiling failed");
                    continue;
                }
                ret = transfer(x, s, r, &st);
                rn->ok = ret == 0;
                rn->err = ret;
                rn->mbit = ret == 0 ? mbit(&st) : 0;
                if (!c->json || isatty(2))
                    fprintf(stderr,
                            "rep %d/%d  %s %u rail(s) %s depth %u conns %u: %s%.0f Mbit/s "
                            "(iperf3 %.0f)\n",
                            rep + 1, c->reps, r->dir == RIO_OP_GET ? "GET" : "PUT", s->n, s->rates,
                            r->depth, r->conns, ret == 0 ? "" : "error, ", rn->mbit, cmb);
                if (ret == 0 && rn->mbit > r->mbit) {
                    r->mbit = rn->mbit;
                    r->st = st;
                }
            }
        }
    srv_stop(x);
    rails_down(x);
    /* A row is good when every run of it was. */
    for (int k = 0; k < x->nrows; k++) {
        struct row *r = &x->rows[k];
        if (r->setup != si)
            continue;
        r->ok = r->nruns == c->reps;
        for (int i = 0; i < r->nruns; i++)
            if (!r->runs[i].ok)
                r->ok = 0;
        if (r->ok) {
            r->err = 0;
            r->why[0] = '\0';
        }
        for (unsigned p = 0; p < r->st.npaths && p < RIO_MAX_PATHS; p++)
            r->rail_bytes[p % s->n] += r->st.path[p].bytes;
    }
    return 0;
}

/* ------------------------------------------------------------- output */

static void xml_str(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&':
            fputs("&amp;", f);
            break;
        case '<':
            fputs("&lt;", f);
            break;
        case '>':
            fputs("&gt;", f);
            break;
        case '"':
            fputs("&quot;", f);
            break;
        default:
            if ((unsigned char)*s >= 0x20)
                fputc(*s, f);
        }
    }
}

/* "1gbit,1gbit" -> "1gbit"; unequal rates stay a list. */
static const char *rates_short(const struct setup *s, char *out, size_t cap)
{
    int same = 1;
    for (unsigned i = 1; i < s->n; i++)
        same &= !strcmp(s->rate[i], s->rate[0]);
    if (snprintf(out, cap, "%s", same ? s->rate[0] : s->rates) >= (int)cap)
        out[cap - 1] = '\0'; /* a label: a long list is cut */
    return out;
}

static double ratio(const struct row *r)
{
    return r->ok && r->ceil > 0 ? r->mbit / r->ceil : 0;
}

static void print_json(struct ctx *x)
{
    const struct cfg *c = &x->cfg;

    printf("{\"bench\":\"rails\",\"setup\":{\"harness\":");
    rio_cli_json_str(stdout, x->script);
    printf(",\"object_bytes\":%" PRIu64 ",\"chunk_bytes\":%" PRIu64 ",\"reps\":%d,"
           "\"pick\":\"best goodput of the reps against the best ceiling of the reps\","
           "\"cores\":%ld,\"load_avg_start\":[%.2f,%.2f,%.2f],\"load_avg_end\":[%.2f,%.2f,%.2f],"
           "\"ceiling\":\"iperf3, one process per rail at once, -t %.0f -O 1, -R for GET\","
           "\"url_params\":",
           c->size, c->chunk, c->reps, sysconf(_SC_NPROCESSORS_ONLN), x->load0[0], x->load0[1],
           x->load0[2], x->load1[0], x->load1[1], x->load1[2], c->ceil_secs);
    rio_cli_json_str(stdout, c->params ? c->params : "");
    printf("},\"rows\":[");
    for (int k = 0; k < x->nrows; k++) {
        const struct row *r = &x->rows[k];
        const struct setup *s = &x->setups[r->setup];
        printf("%s{\"dir\":\"%s\",\"rails\":%u,\"rates\":[", k ? "," : "",
               r->dir == RIO_OP_GET ? "get" : "put", s->n);
        for (unsigned i = 0; i < s->n; i++)
            printf("%s\"%s\"", i ? "," : "", s->rate[i]);
        printf("],\"nominal_mbit\":%.0f,\"depth\":%u,\"conns\":%u,\"ok\":%s,\"error\":",
               s->nominal_bps / 1e6, r->depth, r->conns, r->ok ? "true" : "false");
        rio_cli_json_str(stdout, r->ok ? "" : r->why);
        printf(",\"ceiling_mbit\":%.1f,\"ceiling_rail_mbit\":[", r->ceil);
        for (unsigned i = 0; i < s->n; i++)
            printf("%s%.1f", i ? "," : "", r->ceil_rail[i]);
        printf("],\"goodput_mbit\":%.1f,\"ratio\":%.3f,\"rail_bytes\":[", r->mbit, ratio(r));
        for (unsigned i = 0; i < s->n; i++)
            printf("%s%" PRIu64, i ? "," : "", r->rail_bytes[i]);
        printf("],\"retries\":%" PRIu64 ",\"verdict\":\"%s\",\"verdict_text\":",
               r->st.retries_total, rio_verdict_name(r->st.verdict));
        rio_cli_json_str(stdout, r->st.verdict_text);
        printf(",\"runs\":[");
        for (int i = 0; i < r->nruns; i++)
            printf("%s{\"ok\":%s,\"error\":\"%s\",\"goodput_mbit\":%.1f,\"ceiling_mbit\":%.1f}",
                   i ? "," : "", r->runs[i].ok ? "true" : "false",
                   r->runs[i].ok ? "" : rio_errname(r->runs[i].err), r->runs[i].mbit,
                   r->runs[i].ceil);
        printf("],\"stats\":");
        rio_cli_json_stats(stdout, &r->st);
        printf("}");
    }
    printf("]}\n");
}

static void print_table(struct ctx *x)
{
    const struct cfg *c = &x->cfg;
    char hs[32], hc[32];

    rio_cli_human(hs, sizeof(hs), (double)c->size);
    rio_cli_human(hc, sizeof(hc), (double)c->chunk);
    printf("\nrailio:// over veth rails (tc tbf both ends, %s), %s object, %s chunks, "
           "%ld cores\n",
           x->script, hs, hc, sysconf(_SC_NPROCESSORS_ONLN));
    printf("load average %.2f %.2f %.2f at the start, %.2f %.2f %.2f at the end; %s\n", x->load0[0],
           x->load0[1], x->load0[2], x->load1[0], x->load1[1], x->load1[2],
           c->reps > 1 ? "best of the reps (goodput and ceiling each)" : "one run per row");
    printf("\n%-3s %5s %-27s %5s %5s %8s %8s %6s %-24s %5s %9s  %s\n", "dir", "rails", "rates",
           "depth", "conns", "iperf3", "railio", "ratio", "MB per rail", "rtry", "cpu wait",
           "verdict");
    for (int k = 0; k < x->nrows; k++) {
        const struct row *r = &x->rows[k];
        const struct setup *s = &x->setups[r->setup];
        char rs[64], per[160] = "";
        size_t len = 0;
        rates_short(s, rs, sizeof(rs));
        if (!r->ok) {
            printf("%-3s %5u %-27s %5u %5u  error: %s\n", r->dir == RIO_OP_GET ? "GET" : "PUT",
                   s->n, rs, r->depth, r->conns, r->why);
            continue;
        }
        for (unsigned i = 0; i < s->n && len < sizeof(per); i++)
            len += (size_t)snprintf(per + len, sizeof(per) - len, "%s%.0f", i ? "/" : "",
                                    (double)r->rail_bytes[i] / 1e6);
        char cw[32];
        snprintf(cw, sizeof(cw), "%.0f/%.0f", r->st.cpu_wait_ns / 1e6, r->st.elapsed_ns / 1e6);
        printf("%-3s %5u %-27s %5u %5u %8.0f %8.0f %6.3f %-24s %5" PRIu64 " %9s  %s: %s\n",
               r->dir == RIO_OP_GET ? "GET" : "PUT", s->n, rs, r->depth, r->conns, r->ceil, r->mbit,
               ratio(r), per, r->st.retries_total, cw, rio_verdict_name(r->st.verdict),
               r->st.verdict_text);
    }
    printf("\n(iperf3 and railio in Mbit/s = 1e6 bit/s; iperf3: one process per rail at once, "
           "in the\n transfer's direction; railio: payload over the call's elapsed time; MB per "
           "rail = 1e6 bytes\n of payload; cpu wait = ms the process's threads waited for a CPU / "
           "ms of the call)\n");
}

/* Goodput bars against the ceiling, one pair per row, drawn by hand. */
static int write_svg(struct ctx *x, const char *file)
{
    const struct cfg *c = &x->cfg;
    const double ph = 240, y0 = 56, x0 = 70, gw = 84;
    double maxv = 1, step, top;
    FILE *f = fopen(file, "w");
    char hs[32], hc[32];

    if (!f)
        return -errno;
    for (int k = 0; k < x->nrows; k++) {
        if (x->rows[k].ceil > maxv)
            maxv = x->rows[k].ceil;
        if (x->rows[k].mbit > maxv)
            maxv = x->rows[k].mbit;
    }
    const double steps[] = {10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000};
    step = 20000;
    for (unsigned i = 0; i < sizeof(steps) / sizeof(steps[0]); i++)
        if (maxv / steps[i] <= 8) {
            step = steps[i];
            break;
        }
    top = step * (double)(int)(maxv / step + 0.999);
    if (top < maxv)
        top += step;
    double w = x0 + 20 + gw * x->nrows;
    if (w < 560)
        w = 560;
    double h = y0 + ph + 80;
    rio_cli_human(hs, sizeof(hs), (double)c->size);
    rio_cli_human(hc, sizeof(hc), (double)c->chunk);

    fprintf(f,
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            w, h, w, h);
    fprintf(f,
            "<text x=\"%.0f\" y=\"18\" font-size=\"14\" font-weight=\"bold\">railio:// over "
            "veth rails: goodput against the iperf3 ceiling</text>\n",
            x0);
    fprintf(f,
            "<text x=\"%.0f\" y=\"34\">%s object, %s chunks, %s, load average %.2f at the start, "
            "%.2f at the end</text>\n",
            x0, hs, hc, c->reps > 1 ? "best of the reps" : "one run per row", x->load0[0],
            x->load1[0]);
    /* Legend. */
    fprintf(f,
            "<rect x=\"%.0f\" y=\"40\" width=\"10\" height=\"10\" fill=\"#c0c0c0\"/>"
            "<text x=\"%.0f\" y=\"49\">iperf3 ceiling</text>\n"
            "<rect x=\"%.0f\" y=\"40\" width=\"10\" height=\"10\" fill=\"#2f6db5\"/>"
            "<text x=\"%.0f\" y=\"49\">railio goodput (ratio above)</text>\n",
            x0, x0 + 14, x0 + 110, x0 + 124);
    /* Axis and grid, Mbit/s. */
    for (double v = 0; v <= top + 1e-9; v += step) {
        double y = y0 + ph - v / top * ph;
        fprintf(f,
                "<line x1=\"%.0f\" y1=\"%.1f\" x2=\"%.0f\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>"
                "<text x=\"%.0f\" y=\"%.1f\" text-anchor=\"end\">%.0f</text>\n",
                x0, y, w - 10, y, x0 - 6, y + 4, v);
    }
    fprintf(f,
            "<text x=\"16\" y=\"%.0f\" transform=\"rotate(-90 16 %.0f)\" "
            "text-anchor=\"middle\">Mbit/s</text>\n",
            y0 + ph / 2, y0 + ph / 2);
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", x0,
            y0 + ph, w - 10, y0 + ph);
    for (int k = 0; k < x->nrows; k++) {
        const struct row *r = &x->rows[k];
        const struct setup *s = &x->setups[r->setup];
        double gx = x0 + 10 + gw * k, base = y0 + ph;
        double hc_ = r->ceil / top * ph, hg = r->mbit / top * ph;
        char rs[64], label[96];

        fprintf(f, "<g>\n");
        fprintf(f,
                "<rect x=\"%.1f\" y=\"%.1f\" width=\"24\" height=\"%.1f\" fill=\"#c0c0c0\">"
                "<title>iperf3 %.0f Mbit/s</title></rect>\n",
                gx, base - hc_, hc_, r->ceil);
        if (r->ok) {
            fprintf(f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"24\" height=\"%.1f\" fill=\"#2f6db5\">"
                    "<title>railio %.0f Mbit/s</title></rect>\n"
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\">%.2f"
                    "</text>\n",
                    gx + 26, base - hg, hg, r->mbit, gx + 38, base - hg - 4, ratio(r));
        } else {
            fprintf(f,
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"10\" "
                    "fill=\"#b00000\">error</text>\n",
                    gx + 38, base - 4);
        }
        rates_short(s, rs, sizeof(rs));
        for (char *p = rs; *p; p++) /* "1gbit" -> "1g" to fit */
            if (!strncmp(p, "bit", 3))
                memmove(p, p + 3, strlen(p + 3) + 1);
        snprintf(label, sizeof(label), "%s %u rail%s", r->dir == RIO_OP_GET ? "GET" : "PUT", s->n,
                 s->n > 1 ? "s" : "");
        fprintf(f, "<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\">", gx + 25, base + 14);
        xml_str(f, label);
        fprintf(f,
                "</text>\n<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" "
                "font-size=\"9\">",
                gx + 25, base + 27);
        xml_str(f, rs);
        snprintf(label, sizeof(label), "d%u c%u", r->depth, r->conns);
        fprintf(f,
                "</text>\n<text x=\"%.1f\" y=\"%.0f\" text-anchor=\"middle\" "
                "font-size=\"9\">",
                gx + 25, base + 40);
        xml_str(f, label);
        fprintf(f, "</text>\n</g>\n");
    }
    fprintf(f, "</svg>\n");
    if (fclose(f) != 0)
        return -errno;
    return 0;
}

/* --------------------------------------------------------------- main */

int rio_cli_bench_rails_wanted(int argc, char **argv)
{
    for (int i = 0; i < argc; i++)
        if (!strcmp(argv[i], "--rails-from-harness"))
            return 1;
    return 0;
}

static uint8_t *data_buf(size_t n)
{
    uint8_t *p = rio__alloc_aligned(2u << 20, n);
    if (p)
        (void)madvise(p, n, MADV_HUGEPAGE);
    return p;
}

int rio_cli_bench_rails(int argc, char **argv)
{
    struct ctx *x;
    int rc = 1, ret;

    x = rio__calloc(1, sizeof(*x));
    if (!x) {
        fprintf(stderr, "railio bench: out of memory\n");
        return 1;
    }
    x->rootfd = x->cfd = x->sfd = -1;
    x->srv = -1;
    ret = parse_args(&x->cfg, argc, argv);
    if (ret != 0) {
        rio__free(x);
        return ret > 0 ? 0 : 2;
    }
    if (geteuid() != 0) {
        fprintf(stderr, "railio bench --rails-from-harness: needs root (it builds network "
                        "namespaces, veth pairs and tc qdiscs); run it as root\n");
        rc = 77;
        goto out_free;
    }
    if (find_script(x) < 0) {
        fprintf(stderr,
                "railio bench: tests/harness/rails.sh not found (tried %s); give --harness "
                "PATH or run from the source tree\n",
                x->script);
        goto out_free;
    }
    if (strchr(x->script, '\'')) {
        fprintf(stderr, "railio bench: the harness path must not contain a quote\n");
        goto out_free;
    }
    ret = rio_cli_sibling("railiod", x->railiod, sizeof(x->railiod));
    if (ret < 0 || access(x->railiod, X_OK) != 0) {
        fprintf(stderr, "railio bench: no railiod next to this program (%s)\n", x->railiod);
        goto out_free;
    }
    if (sh("command -v iperf3 >/dev/null && command -v timeout >/dev/null && "
           "command -v ss >/dev/null") != 0) {
        fprintf(stderr, "railio bench: iperf3, timeout or ss missing (scripts/install-deps.sh "
                        "installs them)\n");
        goto out_free;
    }
    ret = sh("bash '%s' check", x->script);
    if (ret == 77) {
        fprintf(stderr, "railio bench: this machine cannot host rails (see above)\n");
        rc = 77;
        goto out_free;
    }
    if (ret != 0) {
        fprintf(stderr, "railio bench: rails.sh check failed (status %d)\n", ret);
        goto out_free;
    }

    plan(x);
    if (build_rows(x) < 0) {
        fprintf(stderr, "railio bench: out of memory\n");
        goto out_free;
    }
    x->src = data_buf(x->cfg.size);
    x->dst = data_buf(x->cfg.size);
    if (!x->src || !x->dst) {
        fprintf(stderr, "railio bench: cannot allocate 2 x %" PRIu64 " bytes\n", x->cfg.size);
        goto out_bufs;
    }
    rio_cli_fill(x->src, x->cfg.size, 0x4a11);
    memset(x->dst, 0xEE, x->cfg.size);
    snprintf(x->dir, sizeof(x->dir), "/tmp/rio-bench-rails-XXXXXX");
    if (!mkdtemp(x->dir)) {
        fprintf(stderr, "railio bench: mkdtemp: %s\n", strerror(errno));
        goto out_bufs;
    }
    snprintf(x->id, sizeof(x->id), "%d", (int)getpid());
    snprintf(x->cns, sizeof(x->cns), "rio-c-%s", x->id);
    snprintf(x->sns, sizeof(x->sns), "rio-s-%s", x->id);
    snprintf(g_abort_cmd, sizeof(g_abort_cmd),
             "for ns in %s %s; do for p in $(ip netns pids $ns 2>/dev/null); do [ $p = %s ] || "
             "kill -9 $p; done; done; RIO_RAILS_ID=%s bash '%s' down; rm -rf '%s'",
             x->cns, x->sns, x->id, x->id, x->script, x->dir);
    x->rootfd = open("/proc/self/ns/net", O_RDONLY | O_CLOEXEC);
    if (x->rootfd < 0) {
        fprintf(stderr, "railio bench: open /proc/self/ns/net: %s\n", strerror(errno));
        goto out_dir;
    }
    g_rootfd = x->rootfd;
    signals(1);
    rio_cli_loadavg(x->load0);
    rc = 0;
    for (int si = 0; si < x->nsetups; si++)
        if (run_setup(x, si) < 0)
            rc = 1;
    rio_cli_loadavg(x->load1);
    for (int k = 0; k < x->nrows; k++)
        if (!x->rows[k].ok)
            rc = 1;
    if (x->cfg.json)
        print_json(x);
    else
        print_table(x);
    fflush(stdout);
    if (x->cfg.svg) {
        ret = write_svg(x, x->cfg.svg);
        if (ret < 0) {
            fprintf(stderr, "railio bench: cannot write %s: %s\n", x->cfg.svg, strerror(-ret));
            rc = 1;
        }
    }
    rails_down(x);
    signals(0);
    g_rootfd = -1;
    close(x->rootfd);
out_dir:
    sh("rm -rf '%s'", x->dir);
out_bufs:
    rio__free(x->src);
    rio__free(x->dst);
    rio__free(x->rows);
out_free:
    rio__free(x);
    return rc;
}
