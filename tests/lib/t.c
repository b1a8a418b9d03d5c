/* SPDX-License-Identifier: Apache-2.0 */
/*
 * t: the test runner and assertion helpers (see t.h). The parent process
 * only forks, waits and counts; everything a test does happens in a child
 * in its own process group, which is killed with whatever it started when
 * the test ends.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/alloc.h"
#include "railio.h"
#include "t.h"
#include "tlib.h"

#define T_DEFAULT_TIMEOUT 60

static struct t_case *cases_head;
static struct t_case **cases_tail = &cases_head;

/* The test running in this process (the child, or the harness with T_NOFORK). */
static const struct t_case *current;
static int leak_check_on;
static void (*fail_hooks[4])(const char *test);

void t__register(struct t_case *c)
{
    c->next = NULL;
    *cases_tail = c;
    cases_tail = &c->next;
}

uint64_t t_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

void t_on_fail(void (*fn)(const char *test))
{
    size_t i;

    for (i = 0; i < sizeof(fail_hooks) / sizeof(fail_hooks[0]); i++) {
        if (!fail_hooks[i]) {
            fail_hooks[i] = fn;
            return;
        }
    }
    fprintf(stderr, "t_on_fail: more than %zu hooks\n", i);
    abort();
}

void t_leak_check(int on)
{
    leak_check_on = on;
}

/* ------------------------------------------------------------ assertions */

static void vreport(const char *kind, const char *file, int line, const char *fmt, va_list ap)
{
    fprintf(stderr, "%s:%d: %s: %s: ", file, line, current ? current->name : "?", kind);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

/* _exit, not exit: a failed or skipped test may hold memory on purpose, and
 * LeakSanitizer at exit would turn that into a second, misleading report.
 * The t_on_exit hooks run first all the same: they stop the peers the test
 * started (showing their logs) and remove their directories. */
static void __attribute__((noreturn))
report_exit(const char *kind, int code, const char *file, int line, const char *fmt, va_list ap)
{
    vreport(kind, file, line, fmt, ap);
    fflush(NULL);
    t__run_exit_hooks();
    fflush(NULL);
    _exit(code);
}

void t__fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report_exit("FAIL", T_EXIT_FAIL, file, line, fmt, ap);
}

void t__skip(const char *file, int line, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    report_exit("SKIP", T_EXIT_SKIP, file, line, fmt, ap);
}

const char *t__build_dir(const char *file, int line)
{
    const char *b = getenv("T_BUILD_DIR");

    if (!b)
        t__skip(file, line, "T_BUILD_DIR not set (run through ctest)");
    return b;
}

static const char *op_str(int op)
{
    static const char *const s[] = {"==", "!=", "<", "<=", ">", ">="};
    return op >= 0 && op <= T__GE ? s[op] : "?";
}

static const char *op_name(int op)
{
    static const char *const s[] = {"T_EQ", "T_NE", "T_LT", "T_LE", "T_GT", "T_GE"};
    return op >= 0 && op <= T__GE ? s[op] : "T_?";
}

/* cmp: <0, 0, >0 as for a vs b. */
static int op_holds(int op, int cmp)
{
    switch (op) {
    case T__EQ:
        return cmp == 0;
    case T__NE:
        return cmp != 0;
    case T__LT:
        return cmp < 0;
    case T__LE:
        return cmp <= 0;
    case T__GT:
        return cmp > 0;
    case T__GE:
        return cmp >= 0;
    default:
        return 0;
    }
}

void t__check_i(const char *file, int line, const char *ea, const char *eb, int op, int64_t a,
                int64_t b)
{
    if (op_holds(op, (a > b) - (a < b)))
        return;
    t__fail(file, line, "%s(%s, %s): %" PRId64 " %s %" PRId64 " is false", op_name(op), ea, eb, a,
            op_str(op), b);
}

void t__check_u(const char *file, int line, const char *ea, const char *eb, int op, uint64_t a,
                uint64_t b)
{
    if (op_holds(op, (a > b) - (a < b)))
        return;
    t__fail(file, line,
            "%s(%s, %s): %" PRIu64 " (0x%" PRIx64 ") %s %" PRIu64 " (0x%" PRIx64 ") is false",
            op_name(op), ea, eb, a, a, op_str(op), b, b);
}

void t__check_f(const char *file, int line, const char *ea, const char *eb, int op, double a,
                double b)
{
    /* NaN compares unordered: only != holds. */
    int cmp = (a > b) - (a < b);

    if (a == a && b == b && op_holds(op, cmp))
        return;
    if (!(a == a && b == b) && op == T__NE)
        return;
    t__fail(file, line, "%s(%s, %s): %.17g %s %.17g is false", op_name(op), ea, eb, a, op_str(op),
            b);
}

/* A return code's name and message, for a failed T_OK or T_ERR. */
static const char *code_text(int64_t ret, int msg)
{
    if (ret >= 0)
        return msg ? "success" : "OK";
    if (ret < INT32_MIN)
        return msg ? "out of range" : "?";
    return msg ? rio_strerror((int)ret) : rio_errname((int)ret);
}

void t__ok(const char *file, int line, const char *expr, int64_t ret)
{
    if (ret >= 0)
        return;
    t__fail(file, line, "T_OK(%s): %" PRId64 " %s (%s)", expr, ret, code_text(ret, 0),
            code_text(ret, 1));
}

void t__err(const char *file, int line, const char *expr, const char *ecode, int64_t ret,
            int64_t want)
{
    if (ret == want)
        return;
    t__fail(file, line, "T_ERR(%s, %s): got %" PRId64 " %s (%s), want %" PRId64 " %s (%s)", expr,
            ecode, ret, code_text(ret, 0), code_text(ret, 1), want, code_text(want, 0),
            code_text(want, 1));
}

static void hex_window(char *out, size_t cap, const unsigned char *p, size_t n, size_t at)
{
    size_t from = at >= 8 ? at - 8 : 0;
    size_t to = at + 8 < n ? at + 8 : n;
    size_t i, len = 0;

    out[0] = '\0';
    for (i = from; i < to && len + 5 < cap; i++)
        len += (size_t)snprintf(out + len, cap - len, i == at ? "[%02x]" : " %02x", p[i]);
}

void t__memeq(const char *file, int line, const char *ea, const char *eb, const void *a,
              const void *b, size_t n)
{
    const unsigned char *pa = a, *pb = b;
    char wa[96], wb[96];
    size_t i;

    if (n == 0 || memcmp(a, b, n) == 0)
        return;
    for (i = 0; i < n && pa[i] == pb[i]; i++)
        ;
    hex_window(wa, sizeof(wa), pa, n, i);
    hex_window(wb, sizeof(wb), pb, n, i);
    t__fail(file, line,
            "T_MEMEQ(%s, %s, %zu): first difference at offset %zu: 0x%02x vs 0x%02x\n"
            "  %s:%s\n  %s:%s",
            ea, eb, n, i, pa[i], pb[i], ea, wa, eb, wb);
}

void t__streq(const char *file, int line, const char *ea, const char *eb, const char *a,
              const char *b)
{
    if (a == b || (a && b && strcmp(a, b) == 0))
        return;
    if (!a || !b)
        t__fail(file, line, "T_STREQ(%s, %s): %s%s%s vs %s%s%s", ea, eb, a ? "\"" : "",
                a ? a : "NULL", a ? "\"" : "", b ? "\"" : "", b ? b : "NULL", b ? "\"" : "");
    t__fail(file, line, "T_STREQ(%s, %s): \"%s\" vs \"%s\"", ea, eb, a, b);
}

/* --------------------------------------------------------------- patterns */

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The 8 bytes of word k of the stream, little-endian. */
static uint64_t pattern_word(uint64_t key, uint64_t k)
{
    return mix64(key ^ (k * 0x9e3779b97f4a7c15ull));
}

static uint64_t pattern_key(uint64_t seed)
{
    return mix64(seed + 0x632be59bd9b4e019ull);
}

static unsigned char pattern_byte(uint64_t key, uint64_t pos)
{
    return (unsigned char)(pattern_word(key, pos / 8) >> (8 * (pos % 8)));
}

static void store_le64(unsigned char *p, uint64_t v)
{
    int i;

    for (i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

void t_fill_pattern_at(void *buf, size_t n, uint64_t seed, uint64_t off)
{
    unsigned char *p = buf;
    uint64_t key = pattern_key(seed);
    size_t i = 0;

    for (; i < n && (off + i) % 8; i++)
        p[i] = pattern_byte(key, off + i);
    for (; i + 8 <= n; i += 8)
        store_le64(p + i, pattern_word(key, (off + i) / 8));
    for (; i < n; i++)
        p[i] = pattern_byte(key, off + i);
}

void t_fill_pattern(void *buf, size_t n, uint64_t seed)
{
    t_fill_pattern_at(buf, n, seed, 0);
}

int64_t t_check_pattern_at(const void *buf, size_t n, uint64_t seed, uint64_t off)
{
    const unsigned char *p = buf;
    uint64_t key = pattern_key(seed);
    unsigned char w[8];
    size_t i = 0, j;

    for (; i < n && (off + i) % 8; i++)
        if (p[i] != pattern_byte(key, off + i))
            return (int64_t)i;
    for (; i + 8 <= n; i += 8) {
        store_le64(w, pattern_word(key, (off + i) / 8));
        if (memcmp(p + i, w, 8) != 0)
            for (j = 0; j < 8; j++)
                if (p[i + j] != w[j])
                    return (int64_t)(i + j);
    }
    for (; i < n; i++)
        if (p[i] != pattern_byte(key, off + i))
            return (int64_t)i;
    return -1;
}

int64_t t_check_pattern(const void *buf, size_t n, uint64_t seed)
{
    return t_check_pattern_at(buf, n, seed, 0);
}

/* ----------------------------------------------------------------- runner */

static unsigned case_timeout(const struct t_case *c)
{
    const char *env = getenv("T_TIMEOUT");

    if (env && atoi(env) > 0)
        return (unsigned)atoi(env);
    return c->timeout_s ? c->timeout_s : T_DEFAULT_TIMEOUT;
}

/* The body of one test, in the process that runs it. */
static void run_body(const struct t_case *c)
{
    int64_t before;

    current = c;
    leak_check_on = 1;
    before = rio__alloc_outstanding();
    c->fn();
    if (leak_check_on && rio__alloc_outstanding() != before)
        t__fail(c->file, 0,
                "%" PRId64 " rio__malloc block(s) still allocated when the test ended"
                " (t_leak_check(0) allows it)",
                rio__alloc_outstanding() - before);
    current = NULL;
}

enum { R_PASS, R_FAIL, R_SKIP };

static int run_forked(const struct t_case *c, unsigned timeout, char *why, size_t whycap)
{
    pid_t pid;
    int status;

    fflush(NULL);
    pid = fork();
    if (pid < 0) {
        snprintf(why, whycap, "fork: %s", strerror(errno));
        return R_FAIL;
    }
    if (pid == 0) {
        setpgid(0, 0);
        alarm(timeout);
        run_body(c);
        fflush(NULL);
        exit(0);
    }
    /* Also set here: the child may not have run yet when we kill the group. */
    setpgid(pid, pid);
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            snprintf(why, whycap, "waitpid: %s", strerror(errno));
            kill(-pid, SIGKILL);
            return R_FAIL;
        }
    }
    /* Whatever the test started (servers, helpers) goes with it. */
    kill(-pid, SIGKILL);

    if (WIFEXITED(status)) {
        if (WEXITSTATUS(status) == 0)
            return R_PASS;
        if (WEXITSTATUS(status) == T_EXIT_SKIP)
            return R_SKIP;
        if (WEXITSTATUS(status) == T_EXIT_FAIL)
            return R_FAIL; /* an assertion, reported by the test */
        snprintf(why, whycap, "exit code %d", WEXITSTATUS(status));
        return R_FAIL;
    }
    if (WIFSIGNALED(status)) {
        if (WTERMSIG(status) == SIGALRM)
            snprintf(why, whycap, "timed out after %u s", timeout);
        else
            snprintf(why, whycap, "killed by signal %d (%s)", WTERMSIG(status),
                     strsignal(WTERMSIG(status)));
        return R_FAIL;
    }
    snprintf(why, whycap, "unexpected wait status 0x%x", status);
    return R_FAIL;
}

static const struct t_case *find_case(const char *name)
{
    const struct t_case *c;

    for (c = cases_head; c; c = c->next)
        if (strcmp(c->name, name) == 0)
            return c;
    return NULL;
}

static int selected(const struct t_case *c, int argc, char **argv)
{
    int i;

    if (argc <= 1)
        return 1;
    for (i = 1; i < argc; i++)
        if (strcmp(argv[i], c->name) == 0)
            return 1;
    return 0;
}

static void usage(const char *prog)
{
    printf("usage: %s [--list] [TEST...]\n"
           "  runs every test (or the named ones), each in its own process\n"
           "  env: T_TIMEOUT=seconds per test, T_NOFORK=1 to run in this process\n",
           prog);
}

int main(int argc, char **argv)
{
    const struct t_case *c;
    unsigned passed = 0, failed = 0, skipped = 0;
    int nofork = getenv("T_NOFORK") && atoi(getenv("T_NOFORK")) > 0;
    int i;

    setvbuf(stdout, NULL, _IOLBF, 0);
#ifdef T_MODULE_DIR
    /* Backend modules (rados://) from this build tree, also when run by hand. */
    setenv("RIO_MODULE_DIR", T_MODULE_DIR, 0);
#endif
    if (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
        usage(argv[0]);
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "--list") == 0) {
        for (c = cases_head; c; c = c->next)
            printf("%s\n", c->name);
        return 0;
    }
    /* ctest's T_LEFT_OUT (CMakeLists.txt): this file's tests need a
     * backend the build left out. */
    if (getenv("T_LEFT_OUT") && *getenv("T_LEFT_OUT")) {
        printf("SKIP every test: needs %s\n", getenv("T_LEFT_OUT"));
        return T_EXIT_SKIP;
    }
    for (i = 1; i < argc; i++) {
        if (!find_case(argv[i])) {
            fprintf(stderr, "%s: no test named '%s' (--list shows them)\n", argv[0], argv[i]);
            return 2;
        }
    }
    if (!cases_head) {
        fprintf(stderr, "%s: no tests registered\n", argv[0]);
        return 1;
    }

    for (c = cases_head; c; c = c->next) {
        unsigned timeout = case_timeout(c);
        char why[160] = "";
        uint64_t t0;
        int r;

        if (!selected(c, argc, argv))
            continue;
        t0 = t_now_ms();
        if (nofork) {
            run_body(c);
            r = R_PASS;
        } else {
            r = run_forked(c, timeout, why, sizeof(why));
        }
        switch (r) {
        case R_PASS:
            passed++;
            printf("PASS %s (%" PRIu64 " ms)\n", c->name, t_now_ms() - t0);
            break;
        case R_SKIP:
            skipped++;
            printf("SKIP %s\n", c->name);
            break;
        default:
            failed++;
            printf("FAIL %s: %s (%" PRIu64 " ms)\n", c->name, why[0] ? why : "assertion failed",
                   t_now_ms() - t0);
            for (i = 0; i < (int)(sizeof(fail_hooks) / sizeof(fail_hooks[0])) && fail_hooks[i];
                 i++) {
                fflush(NULL);
                fail_hooks[i](c->name);
            }
            break;
        }
    }

    printf("%u passed, %u failed, %u skipped\n", passed, failed, skipped);
    if (failed)
        return 1;
    if (passed == 0 && skipped > 0)
        return T_EXIT_SKIP;
    return 0;
}
