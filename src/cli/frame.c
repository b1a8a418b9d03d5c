/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The CLI frame every verb shares: option parsing, exit statuses, error
 * messages (text or JSON), the URL/KEY splitter, JSON objects, interrupts and
 * the progress line. The contract is in cli.h; the user's side in docs/cli.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/key.h"
#include "core/secret.h"
#include "core/url.h"

/* ------------------------------------------------------------ exit statuses */

/* Set by the signal watcher thread, read by the verb's: an atomic (a
 * volatile sig_atomic_t orders nothing between threads; TSan). */
static atomic_int interrupted_sig;

/* The exit status of a kind of failure (rio_error_kind, the library's one
 * table): timeouts are unreachable, a bad argument other than the URL (that
 * got this far) a plain failure. */
static int exit_of_kind(int kind)
{
    switch (kind) {
    case RIO_KIND_OK:
        return RIO_CLI_EXIT_OK;
    case RIO_KIND_URL:
        return RIO_CLI_EXIT_USAGE;
    case RIO_KIND_NOTFOUND:
        return RIO_CLI_EXIT_NOTFOUND;
    case RIO_KIND_ACCESS:
        return RIO_CLI_EXIT_ACCESS;
    case RIO_KIND_UNREACHABLE:
    case RIO_KIND_TIMEOUT:
        return RIO_CLI_EXIT_UNREACHABLE;
    case RIO_KIND_VERIFY:
        return RIO_CLI_EXIT_VERIFY;
    case RIO_KIND_NOSPACE:
        return RIO_CLI_EXIT_NOSPACE;
    case RIO_KIND_UNKNOWN:
        return RIO_CLI_EXIT_UNKNOWN;
    case RIO_KIND_GENERATION:
        return RIO_CLI_EXIT_CHANGED;
    case RIO_KIND_CANCELED:
        return interrupted_sig ? 128 + interrupted_sig : RIO_CLI_EXIT_FAIL;
    default:
        return RIO_CLI_EXIT_FAIL;
    }
}

int rio_cli_exit_code(int err)
{
    return exit_of_kind(rio_error_kind(err, NULL));
}

int rio_cli_exit_code_st(int err, const struct rio_stats *st)
{
    return exit_of_kind(rio_error_kind(err, st));
}

/* --------------------------------------------------------------- parsing */

static void put_usage(FILE *f, const struct rio_cli *cl)
{
    fputs(cl->usage, f);
    if (cl->usage[0] && cl->usage[strlen(cl->usage) - 1] != '\n')
        fputc('\n', f);
}

int rio_cli_usage_error(const struct rio_cli *cl, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "railio %s: ", cl->cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
    put_usage(stderr, cl);
    return RIO_CLI_EXIT_USAGE;
}

/* The row of opts named by a long option (name without "=value"). */
static const struct rio_cli_opt *find_long(const struct rio_cli_opt *opts, const char *a, size_t n)
{
    for (; opts && (opts->name || opts->short_name); opts++)
        if (opts->name && strlen(opts->name) == n && !strncmp(opts->name, a, n))
            return opts;
    return NULL;
}

static const struct rio_cli_opt *find_short(const struct rio_cli_opt *opts, char c)
{
    for (; opts && (opts->name || opts->short_name); opts++)
        if (opts->short_name == c)
            return opts;
    return NULL;
}

/* The frame's own flags: 1 once taken, 0 when c is none of them. */
static int common_short(struct rio_cli *cl, char c)
{
    if (c == 'q')
        cl->quiet++;
    else if (c == 'v')
        cl->verbose++;
    else
        return 0;
    return 1;
}

int rio_cli_parse(struct rio_cli *cl, const char *cmd, const char *usage,
                  const struct rio_cli_opt *opts, int min_pos, int max_pos, int argc, char **argv)
{
    int npos = 0, help = 0;
    bool options = true;
    /* The last option that took the next argument as its value: when
     * operands are then missing, it may have taken one (ls --page-size URL). */
    char took_opt[64] = "";
    const char *took = NULL, *took_kind = NULL;

    memset(cl, 0, sizeof(*cl));
    cl->cmd = cmd;
    cl->usage = usage;
    /* --help wins over any mistake next to it. */
    for (int i = 0; i < argc && strcmp(argv[i], "--"); i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            put_usage(stdout, cl);
            return 0;
        }
    for (int i = 0; i < argc; i++) {
        char *a = argv[i];
        if (!options || a[0] != '-' || !a[1]) {
            argv[npos++] = a; /* npos <= i: in place */
            continue;
        }
        if (!strcmp(a, "--")) {
            options = false;
            continue;
        }
        if (a[1] == '-') {
            size_t n = strcspn(a, "=");
            const char *eq = a[n] ? a + n + 1 : NULL;
            const struct rio_cli_opt *o = find_long(opts, a, n);
            if (o && o->value) {
                if (!eq && i + 1 >= argc)
                    return rio_cli_usage_error(cl, "option '%s' needs a value (%s)", o->name,
                                               o->value);
                if (!eq) {
                    snprintf(took_opt, sizeof(took_opt), "%s", o->name);
                    took = argv[i + 1];
                    took_kind = o->value;
                }
                *o->arg = eq ? eq : argv[++i];
                continue;
            }
            if (eq)
                return rio_cli_usage_error(cl, "option '%.*s' takes no value", (int)n, a);
            if (o)
                (*o->flag)++;
            else if (!strcmp(a, "--help"))
                help = 1;
            else if (!strcmp(a, "--json"))
                cl->json = 1;
            else if (!strcmp(a, "--quiet"))
                cl->quiet++;
            else if (!strcmp(a, "--verbose"))
                cl->verbose++;
            else
                return rio_cli_usage_error(cl, "unknown option '%s'", a);
            continue;
        }
        /* -abc: bundled short options; one with a value ends the bundle. */
        for (const char *c = a + 1; *c; c++) {
            const struct rio_cli_opt *o = find_short(opts, *c);
            if (o && o->value) {
                if (c[1]) {
                    *o->arg = c + 1;
                } else if (i + 1 < argc) {
                    snprintf(took_opt, sizeof(took_opt), "-%c", *c);
                    took = argv[i + 1];
                    took_kind = o->value;
                    *o->arg = argv[++i];
                } else
                    return rio_cli_usage_error(cl, "option '-%c' needs a value (%s)", *c, o->value);
                break;
            }
            if (o)
                (*o->flag)++;
            else if (*c == 'h')
                help = 1;
            else if (!common_short(cl, *c))
                return rio_cli_usage_error(cl, "unknown option '-%c'", *c);
        }
    }
    if (help) {
        put_usage(stdout, cl);
        return 0;
    }
    cl->npos = npos;
    cl->pos = argv;
    if (npos < min_pos && took && strstr(took, "://")) {
        char shown[1024];
        return rio_cli_usage_error(cl,
                                   "option '%s' needs a value (%s): it took '%s', which left "
                                   "%s",
                                   took_opt, took_kind,
                                   rio_cli_url_safe(took, shown, sizeof(shown)),
                                   npos ? "too few arguments" : "no URL");
    }
    if (npos < min_pos)
        return rio_cli_usage_error(cl, npos ? "too few arguments" : "missing arguments");
    if (max_pos >= 0 && npos > max_pos)
        return rio_cli_usage_error(cl, "too many arguments");
    return -1;
}

/* ------------------------------------------------------------------ JSON */

void rio_cli_json_begin(FILE *f, const char *type)
{
    fprintf(f, "{\"schema\":\"%s\",\"type\":", RIO_CLI_SCHEMA);
    rio_cli_json_str(f, type);
}

void rio_cli_json_end(FILE *f)
{
    fputs("}\n", f);
}

void rio_cli_json_kstr(FILE *f, const char *name, const char *s)
{
    if (!s)
        s = "";
    fprintf(f, ",\"%s\":", name);
    rio_cli_json_str(f, s);
    /* A string that is not UTF-8 (a key is any bytes) loses bytes to
     * U+FFFD above: NAME_hex carries it exactly, two hex digits a byte. */
    if (!rio_cli_utf8_valid(s)) {
        fprintf(f, ",\"%s_hex\":\"", name);
        for (const unsigned char *p = (const unsigned char *)s; *p; p++)
            fprintf(f, "%02x", *p);
        fputc('"', f);
    }
}

void rio_cli_json_ku64(FILE *f, const char *name, uint64_t v)
{
    /* Above 2^53 a double (jq, JavaScript) rounds: a string keeps it. */
    if (v > (1ull << 53))
        fprintf(f, ",\"%s\":\"%llu\"", name, (unsigned long long)v);
    else
        fprintf(f, ",\"%s\":%llu", name, (unsigned long long)v);
}

void rio_cli_json_kgen(FILE *f, const char *name, uint64_t generation)
{
    fprintf(f, ",\"%s\":\"%llu\"", name, (unsigned long long)generation);
}

FILE *rio_cli_json_out(const struct rio_cli *cl)
{
    return cl->data_stdout ? stderr : stdout;
}

/* ---------------------------------------------------------------- errors */

static int fail(const struct rio_cli *cl, const char *doing, const char *what, int err,
                const char *detail, int rc)
{
    char shown[1024], det[1024];

    if (what)
        rio_cli_url_safe(what, shown, sizeof(shown));
    snprintf(det, sizeof(det), "%s", detail ? detail : "");
    detail = rio_cli_ctl_mask(det);
    if (cl->json) {
        FILE *f = rio_cli_json_out(cl);
        rio_cli_json_begin(f, "error");
        rio_cli_json_kstr(f, "command", cl->cmd);
        if (what)
            rio_cli_json_kstr(f, "target", shown);
        if (doing)
            rio_cli_json_kstr(f, "doing", doing);
        rio_cli_json_kstr(f, "error", rio_errname(err));
        fprintf(f, ",\"code\":%d", err);
        rio_cli_json_kstr(f, "message", rio_strerror(err));
        rio_cli_json_kstr(f, "detail", detail);
        fprintf(f, ",\"exit\":%d", rc);
        rio_cli_json_end(f);
        fflush(f);
        return rc;
    }
    if (err == RIO_ECANCELED && interrupted_sig)
        return rc; /* the user pressed ^C: no message needed */
    fprintf(stderr, "railio %s: %s%s%s%s%s (%s)%s%s\n", cl->cmd, doing ? doing : "",
            doing ? " " : "", what ? shown : "", what ? ": " : "", rio_strerror(err),
            rio_errname(err), detail[0] ? ": " : "", detail);
    return rc;
}

int rio_cli_fail(const struct rio_cli *cl, const char *doing, const char *what, int err)
{
    return fail(cl, doing, what, err, rio_error_detail(), rio_cli_exit_code(err));
}

int rio_cli_fail_st(const struct rio_cli *cl, const char *doing, const char *what, int err,
                    const struct rio_stats *st)
{
    return fail(cl, doing, what, err, rio_error_detail(), rio_cli_exit_code_st(err, st));
}

int rio_cli_parse_generation(const struct rio_cli *cl, const char *s, uint64_t *gen)
{
    char *end = (char *)(uintptr_t)s;

    errno = 0;
    *gen = s[0] >= '0' && s[0] <= '9' ? strtoull(s, &end, 10) : 0;
    if (!*gen || *gen == UINT64_MAX || errno || *end) /* UINT64_MAX: no generation */
        return rio_cli_usage_error(cl,
                                   "--if-generation '%s' is not a generation (a number above "
                                   "0, as stat prints it)",
                                   s);
    return 0;
}

int rio_cli_fail_why(const struct rio_cli *cl, const char *doing, const char *what, int err,
                     const char *why)
{
    return fail(cl, doing, what, err, why, rio_cli_exit_code(err));
}

int rio_cli_fail_sys(const struct rio_cli *cl, const char *doing, const char *what, int err)
{
    return fail(cl, doing, what, err, NULL, rio_cli_exit_code(err));
}

int rio_cli_fail_rc(const struct rio_cli *cl, const char *doing, const char *what, int err, int rc)
{
    return fail(cl, doing, what, err, NULL, rc);
}

/* ------------------------------------------------------------------ URLs */

/* Whether URL arg says single= with a true word, read as the file
 * transport reads it: file:// then is one file, the whole path, whatever
 * the key. A bad value is the transport's to refuse, at open. */
static bool url_single(const char *arg)
{
    struct rio_url u;
    bool single = false;

    if (rio__url_parse(arg, &u) < 0)
        return false;
    const char *v = rio__url_param(&u, "single");
    if (v && rio__opt_bool("single", v, &single) < 0)
        single = false;
    rio__url_cleanup(&u);
    return single;
}

char *rio_cli_client_url(const char *arg, size_t blen, const char *q)
{
    size_t qlen = q ? strlen(q) : 0;
    char *u;

    if (blen > SIZE_MAX - 1 - qlen)
        return NULL;
    u = rio__secret_alloc(blen + qlen + 1);
    if (u) {
        memcpy(u, arg, blen);
        memcpy(u + blen, q ? q : "", qlen + 1);
    }
    return u;
}

int rio_cli_split_url(const char *arg, unsigned flags, char **client_url, char **key)
{
    bool optional = flags & RIO_CLI_KEY_OPTIONAL;
    const char *p = strstr(arg, "://");
    if (!p || p == arg)
        return RIO_EURL;
    const char *q = rio_cli_query_start(p + 3);
    const char *end = q ? q : arg + strlen(arg);
    const char *slash = memchr(p + 3, '/', (size_t)(end - (p + 3)));
    if (!slash) {
        if (!optional)
            return RIO_EURL;
        slash = end; /* SCHEME://AUTHORITY: the empty key */
    }
    if (slash < end && p - arg == 4 && !strncmp(arg, "file", 4)) {
        /* file:///DIR/NAME: the directory is the store, the name the key. */
        const char *last = slash;
        for (const char *c = slash; c < end; c++)
            if (*c == '/')
                last = c;
        bool single = url_single(arg);
        if (last == slash && !single)
            return RIO_EURL; /* file:///NAME: no directory */
        if (single && last + 1 < end) {
            /* file:///PATH?single=1: PATH is the store's one file (it may
             * not exist yet); the key is its name, and any would do. It
             * was split like a directory's name: the directory opened as
             * the single file, refused (RIO_EINVAL). */
            size_t kl = (size_t)(end - last - 1);
            if (!rio__key_len_ok(kl))
                return RIO_EINVAL;
            *key = strndup(last + 1, kl);
            *client_url = rio__secret_strdup(arg);
            if (!*key || !*client_url) {
                free(*key);
                rio__secret_free(*client_url);
                *key = *client_url = NULL;
                return -ENOMEM;
            }
            return 0;
        }
        slash = last;
    }
    size_t klen = slash < end ? (size_t)(end - slash - 1) : 0;
    if ((!optional && klen == 0) || (klen && !rio__key_len_ok(klen)))
        return klen ? RIO_EINVAL : RIO_EURL;
    *key = strndup(slash < end ? slash + 1 : "", klen);
    *client_url = rio_cli_client_url(arg, (size_t)(slash - arg), q);
    if (!*key || !*client_url) {
        free(*key);
        rio__secret_free(*client_url);
        *key = *client_url = NULL;
        return -ENOMEM;
    }
    return 0;
}

int rio_cli_open(const struct rio_cli *cl, const char *url, unsigned flags, struct rio_client **c,
                 char **key)
{
    char *curl = NULL;
    int ret = rio_cli_split_url(url, flags, &curl, key);
    *c = NULL;
    if (ret < 0) {
        if (ret == -ENOMEM)
            return rio_cli_fail_sys(cl, NULL, url, ret);
        rio_cli_fail_sys(cl, NULL, url, ret);
        if (!cl->json && ret == RIO_EINVAL) /* the only RIO_EINVAL: the key's length */
            fprintf(stderr, "railio %s: the key is longer than %d bytes\n", cl->cmd, RIO_KEY_MAX);
        else if (!cl->json)
            fprintf(stderr, "railio %s: expected SCHEME://AUTHORITY/KEY[?options]\n", cl->cmd);
        return RIO_CLI_EXIT_USAGE;
    }
    ret = rio_client_new(curl, NULL, c);
    rio__secret_free(curl);
    if (ret < 0) {
        /* A refused URL or option (or RIO_* variable): the command line is
         * wrong. */
        int rc = ret == RIO_EURL || ret == RIO_EINVAL ? RIO_CLI_EXIT_USAGE : rio_cli_exit_code(ret);
        fail(cl, "opening", url, ret, rio_error_detail(), rc);
        free(*key);
        *key = NULL;
        *c = NULL;
        return rc;
    }
    return 0;
}

/* ------------------------------------------------------------- interrupts */

static struct rio_cancel *cancel_token;
static int cancel_pipe[2] = {-1, -1}; /* readable once a signal came */
/* The file a second signal removes: set by the verb's thread, read by the
 * watcher's, under tmp_mu (the watcher holds it to the end, so the path
 * cannot change while it is removed). */
static pthread_mutex_t tmp_mu = PTHREAD_MUTEX_INITIALIZER;
static char tmp_path[4096];
static int tmp_set;

struct rio_cancel *rio_cli_cancel_token(void)
{
    return cancel_token;
}

int rio_cli_wait_readable(int fd)
{
    struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = cancel_pipe[0], .events = POLLIN}};

    if (cancel_pipe[0] < 0)
        return 0;
    for (;;) {
        if (interrupted_sig)
            return RIO_ECANCELED;
        int n = poll(p, 2, -1);
        if (n < 0 && errno != EINTR)
            return -errno;
        if (interrupted_sig || (n > 0 && p[1].revents))
            return RIO_ECANCELED;
        if (n > 0 && p[0].revents)
            return 0; /* data, the end, or an error the read will say */
    }
}

int rio_cli_interrupted(void)
{
    return interrupted_sig;
}

void rio_cli_tmp_register(const char *path)
{
    pthread_mutex_lock(&tmp_mu);
    tmp_set = 0;
    if (path && strlen(path) < sizeof(tmp_path)) {
        strcpy(tmp_path, path);
        tmp_set = 1;
    }
    pthread_mutex_unlock(&tmp_mu);
}

static void *watcher(void *arg)
{
    sigset_t *set = arg;
    for (;;) {
        int sig;
        if (sigwait(set, &sig) != 0)
            continue;
        if (!interrupted_sig) {
            interrupted_sig = sig;
            rio_cancel_fire(cancel_token); /* the verb unwinds and cleans up */
            if (write(cancel_pipe[1], "x", 1) < 0)
                continue; /* a full pipe is readable already */
            continue;
        }
        /* A second signal: no more waiting. The lock is never released:
         * the process ends here. */
        pthread_mutex_lock(&tmp_mu);
        if (tmp_set)
            unlink(tmp_path);
        signal(sig, SIG_DFL);
        pthread_sigmask(SIG_UNBLOCK, set, NULL);
        raise(sig);
        _exit(128 + sig);
    }
    return NULL;
}

int rio_cli_signals_init(void)
{
    static sigset_t set;
    pthread_t t;
    int ret = rio_cancel_new(&cancel_token);

    if (ret < 0)
        return ret;
    if (pipe2(cancel_pipe, O_CLOEXEC) < 0)
        return -errno;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGHUP);
    /* Blocked here before any other thread exists: every thread inherits it. */
    if ((ret = pthread_sigmask(SIG_BLOCK, &set, NULL)) != 0)
        return -ret;
    if ((ret = pthread_create(&t, NULL, watcher, &set)) != 0) {
        pthread_sigmask(SIG_UNBLOCK, &set, NULL);
        return -ret;
    }
    pthread_detach(t);
    return 0;
}

/* -------------------------------------------------------------- progress */

static void progress_show(struct rio_cli_progress *pr, uint64_t done, uint64_t total)
{
    double el = rio_cli_now_s() - pr->t0;
    double pct = total ? 100.0 * (double)done / (double)total : 100.0;

    if (total == RIO_SIZE_UNKNOWN || total == 0)
        fprintf(stderr, "\r%s %8.1f MiB %9.1f MB/s", pr->what, done / 1048576.0,
                el > 0 ? done / el / 1e6 : 0.0);
    else
        fprintf(stderr, "\r%s %8.1f / %.1f MiB %5.1f%% %9.1f MB/s", pr->what, done / 1048576.0,
                total / 1048576.0, pct, el > 0 ? done / el / 1e6 : 0.0);
    pr->shown = 1;
}

static void progress_cb(void *arg, uint64_t done, uint64_t total)
{
    progress_show(arg, done, total);
}

void rio_cli_progress_start(struct rio_cli_progress *pr, const struct rio_cli *cl,
                            struct rio_call *call, const char *what)
{
    memset(pr, 0, sizeof(*pr));
    if (cl->json || cl->quiet || !isatty(2))
        return;
    pr->t0 = rio_cli_now_s();
    pr->what = what;
    if (call) {
        call->progress = progress_cb;
        call->progress_arg = pr;
    }
}

void rio_cli_progress_feed(struct rio_cli_progress *pr, uint64_t n, uint64_t total)
{
    double now;

    pr->done += n;
    if (!pr->what || (now = rio_cli_now_s()) - pr->last < 0.1)
        return;
    pr->last = now;
    progress_show(pr, pr->done, total);
}

void rio_cli_progress_end(struct rio_cli_progress *pr)
{
    if (pr->shown)
        fprintf(stderr, "\r\033[K");
    pr->shown = 0;
}

void rio_cli_report_stats(const struct rio_cli *cl, const char *label, const struct rio_stats *st)
{
    if (cl->quiet || cl->json)
        return;
    if (cl->verbose) {
        if (label)
            fprintf(stderr, "%s: ", label);
        rio_cli_print_stats(stderr, st);
        return;
    }
    fprintf(stderr, "%s%s%.1f MB/s, %llu bytes in %.3f s\n", label ? label : "", label ? ": " : "",
            st->goodput_mbps, (unsigned long long)st->bytes, st->elapsed_ns / 1e9);
}
