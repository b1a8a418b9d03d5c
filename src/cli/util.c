/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers shared by the CLI's subcommands. */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/url.h"

int rio_cli_parse_size(const char *s, uint64_t *out)
{
    /* The library's own rule, so a size reads the same on the command line
     * and in a URL: K/M/G are powers of 1024, KB/MB/GB powers of 1000. */
    return s && rio__parse_size(s, out) == 0 ? 0 : -1;
}

int rio_cli_parse_list(const char *s, uint64_t *out, unsigned max)
{
    char buf[256], *save = NULL, *tok;
    unsigned n = 0;

    if (!s || strlen(s) >= sizeof(buf))
        return -1;
    strcpy(buf, s);
    for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
        if (n == max || rio_cli_parse_size(tok, &out[n]) < 0 || out[n] == 0)
            return -1;
        n++;
    }
    return n > 0 ? (int)n : -1;
}

int rio_cli_sibling(const char *name, char *out, size_t cap)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    char *slash;

    if (n < 0)
        return -errno;
    self[n] = '\0';
    slash = strrchr(self, '/');
    if (!slash)
        return -ENOENT;
    *slash = '\0';
    if ((size_t)snprintf(out, cap, "%s/%s", self, name) >= cap)
        return -ENAMETOOLONG;
    /* Installed: railio in BINDIR, railiod in SBINDIR (BINDIR/../sbin). */
    if (access(out, X_OK) != 0 && (size_t)snprintf(out, cap, "%s/../sbin/%s", self, name) < cap &&
        access(out, X_OK) == 0)
        return 0;
    if ((size_t)snprintf(out, cap, "%s/%s", self, name) >= cap)
        return -ENAMETOOLONG;
    return 0;
}

/* s as a JSON string literal, quotes included. */
/* The length of the valid UTF-8 sequence at s (1..4), 0 when the bytes there
 * are not one (a stray continuation byte, an overlong form, a surrogate, a
 * code point above U+10FFFF, a sequence cut short). */
size_t rio_cli_utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    uint32_t cp;

    if (c < 0x80)
        return 1;
    if (c >= 0xc2 && c <= 0xdf)
        n = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef)
        n = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4)
        n = 4, cp = c & 0x07;
    else
        return 0;
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3f);
    }
    if ((n == 3 && cp < 0x800) || (n == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return n;
}

bool rio_cli_utf8_valid(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    while (*p) {
        size_t n = rio_cli_utf8_len(p);
        if (!n)
            return false;
        p += n;
    }
    return true;
}

void rio_cli_json_str(FILE *f, const char *s)
{
    const unsigned char *p = (const unsigned char *)s;

    fputc('"', f);
    while (*p) {
        size_t n = rio_cli_utf8_len(p);
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            fprintf(f, "\\u%04x", *p);
        else if (!n) {
            /* Not UTF-8: JSON cannot carry the byte; U+FFFD stands for it
             * (a key's exact bytes go in key_hex, rio_cli_json_kstr). */
            fputs("\\ufffd", f);
            n = 1;
        } else
            fwrite(p, 1, n, f);
        p += n ? n : 1;
    }
    fputc('"', f);
}

double rio_cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The library's redaction (core/url.h): one list of what is a secret. */
size_t rio_cli_ctl_len(const unsigned char *s)
{
    if (*s && (*s < 0x20 || *s == 0x7f))
        return 1;
    return s[0] == 0xc2 && s[1] >= 0x80 && s[1] <= 0x9f ? 2 : 0;
}

char *rio_cli_ctl_mask(char *s)
{
    unsigned char *p = (unsigned char *)s;

    while (*p) {
        size_t n = rio_cli_ctl_len(p);
        if (!n) {
            p++;
            continue;
        }
        memset(p, '?', n);
        p += n;
    }
    return s;
}

const char *rio_cli_url_safe(const char *url, char *out, size_t cap)
{
    rio__url_redact(url, out, cap);
    return cap ? rio_cli_ctl_mask(out) : out;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double rio_cli_median(double *v, unsigned n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(*v), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

double rio_cli_run_timed(char *const argv[], int mute)
{
    double t0 = rio_cli_now_s();
    pid_t pid = fork();
    int st;

    if (pid < 0)
        return -1;
    if (pid == 0) {
        FILE *n = NULL;
        if (mute & RIO_CLI_MUTE_OUT)
            n = freopen("/dev/null", "w", stdout);
        if (mute & RIO_CLI_MUTE_ERR)
            n = freopen("/dev/null", "w", stderr);
        (void)n;
        execvp(argv[0], argv);
        _exit(127);
    }
    if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1;
    return rio_cli_now_s() - t0;
}

bool rio_cli_have_program(const char *name)
{
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "command -v %s >/dev/null 2>&1", name);
    return system(cmd) == 0;
}

void rio_cli_loadavg(double out[3])
{
    FILE *f = fopen("/proc/loadavg", "r");
    out[0] = out[1] = out[2] = -1;
    if (!f)
        return;
    if (fscanf(f, "%lf %lf %lf", &out[0], &out[1], &out[2]) != 3)
        out[0] = out[1] = out[2] = -1;
    fclose(f);
}

int rio_cli_bench_buffers(const char *who, uint64_t size, uint8_t **src, uint8_t **dst)
{
    uint8_t *s = size <= SIZE_MAX ? malloc(size ? (size_t)size : 1) : NULL;
    uint8_t *d = size <= SIZE_MAX ? malloc(size ? (size_t)size : 1) : NULL;

    if (!s || !d) {
        fprintf(stderr, "%s: cannot allocate 2 x %" PRIu64 " bytes\n", who, size);
        free(s);
        free(d);
        return -1;
    }
    rio_cli_fill(s, (size_t)size, 42);
    memset(d, 0, (size_t)size); /* no first-touch page faults inside a measurement */
    *src = s;
    *dst = d;
    return 0;
}

void rio_cli_bench_path(char *out, size_t cap, const char *tag)
{
    const char *tmp = getenv("TMPDIR");

    snprintf(out, cap, "%s/railio-bench-%s-%d", tmp && *tmp ? tmp : "/tmp", tag, (int)getpid());
}

int rio_cli_write_file(const char *who, const char *path, const void *buf, uint64_t size)
{
    FILE *f = fopen(path, "wb");

    if (!f || fwrite(buf, 1, (size_t)size, f) != size) {
        fprintf(stderr, "%s: cannot write %s\n", who, path);
        if (f)
            fclose(f);
        unlink(path);
        return -1;
    }
    if (fclose(f) != 0) {
        fprintf(stderr, "%s: cannot write %s\n", who, path);
        unlink(path);
        return -1;
    }
    return 0;
}

void rio_cli_keep_best(double *best_mbps, uint64_t bytes, double seconds)
{
    if (seconds > 0 && (double)bytes / seconds / 1e6 > *best_mbps)
        *best_mbps = (double)bytes / seconds / 1e6;
}

int rio_cli_bench_other(const char *bench, const char *a, void (*usage)(void))
{
    if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
        usage();
        return 0;
    }
    fprintf(stderr, "railio bench %s: bad argument '%s'\n", bench, a);
    usage();
    return 2;
}

int rio_cli_bench_target(int argc, char **argv, void (*usage)(void))
{
    if (argc >= 1 && strcmp(argv[0], "--help") && strcmp(argv[0], "-h"))
        return -1;
    usage();
    return argc < 1 ? 2 : 0;
}

uint64_t rio_cli_bench_max_size(const struct rio_cli_bench_opts *o)
{
    uint64_t max = 0;

    for (unsigned i = 0; i < o->nsizes; i++)
        if (o->sizes[i] > max)
            max = o->sizes[i];
    return max;
}

int rio_cli_bench_opt(struct rio_cli_bench_opts *o, unsigned max_reps, int argc, char **argv,
                      int *i)
{
    const char *a = argv[*i], *n = *i + 1 < argc ? argv[*i + 1] : NULL;
    uint64_t v;
    int k;

    if (!strcmp(a, "--json")) {
        o->json = true;
        return 1;
    }
    if (!n)
        return 0;
    if (!strcmp(a, "--sizes") && (k = rio_cli_parse_list(n, o->sizes, RIO_CLI_LIST_MAX)) > 0)
        o->nsizes = (unsigned)k;
    else if (!strcmp(a, "--chunk") && !rio_cli_parse_size(n, &v) && v)
        o->chunk = v;
    else if (!strcmp(a, "--reps") && !rio_cli_parse_size(n, &v) && v >= 1 && v <= max_reps)
        o->reps = (unsigned)v;
    else
        return 0;
    (*i)++;
    return 1;
}

int rio_cli_parse_counts(const char *s, unsigned *out, unsigned max, unsigned cap)
{
    uint64_t v[RIO_CLI_LIST_MAX];
    int k = rio_cli_parse_list(s, v, max < RIO_CLI_LIST_MAX ? max : RIO_CLI_LIST_MAX);

    for (int j = 0; j < k; j++)
        out[j] = v[j] > cap ? cap : (unsigned)v[j];
    return k;
}

int rio_cli_bench_open(const char *url, const struct rio_options *o, struct rio_client **out)
{
    static _Atomic int said;
    int ret = rio_client_new(url, o, out);

    if ((ret == RIO_EINVAL || ret == RIO_EURL) && rio_error_detail()[0] &&
        !atomic_exchange(&said, 1))
        fprintf(stderr, "railio bench: %s\n", rio_error_detail());
    return ret;
}

uint32_t rio_cli_deadline(struct rio_client *c)
{
    struct rio_options o;

    rio_client_options(c, &o);
    return o.deadline_ms == RIO_DEADLINE_NONE ? 0 : o.deadline_ms;
}

const char *rio_cli_size_changed(char *out, size_t cap, uint64_t declared, uint64_t got)
{
    snprintf(out, cap,
             "the file changed size while it was being read (%llu bytes declared, %s%llu "
             "read); nothing was written",
             (unsigned long long)declared, got > declared ? "at least " : "",
             (unsigned long long)got);
    return out;
}

int rio_cli_write_all(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;

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

void rio_cli_fmt_time(char *out, size_t cap, int64_t ns, bool iso)
{
    if (ns <= 0) {
        snprintf(out, cap, "%s", iso ? "" : "-");
        return;
    }
    time_t s = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    char day[40];
    strftime(day, sizeof(day), iso ? "%Y-%m-%dT%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
    if (iso)
        snprintf(out, cap, "%s.%09lldZ", day, (long long)(ns % 1000000000));
    else
        snprintf(out, cap, "%s", day);
}
