/* SPDX-License-Identifier: Apache-2.0 */
/*
 * t: the test harness. One program per test file; each TEST runs in its own
 * forked process under an alarm() timeout, so a crash, a hang or a leak in
 * one test is reported against that test alone.
 *
 *     #include "t.h"
 *
 *     TEST(parse_basic)
 *     {
 *         T_OK(rio__url_parse("mock://a", &u));
 *         T_STREQ(u.scheme, "mock");
 *     }
 *
 * Running: `./test_x` runs every test, `./test_x NAME...` only those,
 * `./test_x --list` lists them. A test passes when its body returns, fails on
 * the first failed assertion (which prints both values and file:line), and is
 * skipped by T_SKIP (exit code 77). The last line is always
 * "N passed, N failed, N skipped"; the program exits 1 if any test failed, 77
 * if every test was skipped, 0 otherwise.
 *
 * Every test also fails if it leaves rio__malloc blocks allocated when its
 * body returns (t_leak_check(0) turns that off for the current test).
 *
 * Timeouts: TEST_TIMEOUT(name, seconds) for one test; otherwise the file's
 * T_FILE_TIMEOUT (set by CMake from a leading "T_TIMEOUT n" comment), else 60
 * seconds. The environment variable T_TIMEOUT overrides both; T_NOFORK=1 runs
 * tests in the harness process (for a debugger; the first failure ends the run).
 */
#ifndef RIO_T_H
#define RIO_T_H

#include <stddef.h>
#include <stdint.h>

#ifndef T_FILE_TIMEOUT
#define T_FILE_TIMEOUT 0
#endif

/* Exit codes of a test's process: skipped (ctest's SKIP_RETURN_CODE), and a
 * failed assertion (distinct from 1, which sanitizers and exit(1) use). */
#define T_EXIT_SKIP 77
#define T_EXIT_FAIL 101

struct t_case {
    const char *name;
    void (*fn)(void);
    unsigned timeout_s; /* 0: the file's or the harness default */
    const char *file;
    struct t_case *next;
};

/* Called by the TEST macros' constructors. */
void t__register(struct t_case *c);

#define TEST_TIMEOUT(tname, seconds)                                                               \
    static void t_test_##tname(void);                                                              \
    static struct t_case t_case_##tname = {#tname, t_test_##tname, (seconds), __FILE__, NULL};     \
    __attribute__((constructor)) static void t_register_##tname(void)                              \
    {                                                                                              \
        t__register(&t_case_##tname);                                                              \
    }                                                                                              \
    static void t_test_##tname(void)

#define TEST(tname) TEST_TIMEOUT(tname, T_FILE_TIMEOUT)

/* ------------------------------------------------------------- assertions */

enum { T__EQ, T__NE, T__LT, T__LE, T__GT, T__GE };

void t__check_i(const char *file, int line, const char *ea, const char *eb, int op, int64_t a,
                int64_t b);
void t__check_u(const char *file, int line, const char *ea, const char *eb, int op, uint64_t a,
                uint64_t b);
void t__check_f(const char *file, int line, const char *ea, const char *eb, int op, double a,
                double b);
void t__fail(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
void t__skip(const char *file, int line, const char *fmt, ...)
    __attribute__((noreturn, format(printf, 3, 4)));
void t__ok(const char *file, int line, const char *expr, int64_t ret);
void t__err(const char *file, int line, const char *expr, const char *ecode, int64_t ret,
            int64_t want);
void t__memeq(const char *file, int line, const char *ea, const char *eb, const void *a,
              const void *b, size_t n);
void t__streq(const char *file, int line, const char *ea, const char *eb, const char *a,
              const char *b);

/*
 * Integer comparisons pick signed or unsigned 64-bit by C's usual arithmetic
 * conversions of the two operands (so T_EQ(size, 4096) compares as unsigned
 * and T_LT(ret, 0) as signed), and floating point when either is a double.
 * Each operand is evaluated once.
 */
/* clang-format off */
#define T__CMP(a, OP, b)                                                                           \
    _Generic((a) + (b),                                                                            \
        unsigned int: t__check_u,                                                                  \
        unsigned long: t__check_u,                                                                 \
        unsigned long long: t__check_u,                                                            \
        float: t__check_f,                                                                         \
        double: t__check_f,                                                                        \
        long double: t__check_f,                                                                   \
        default: t__check_i)(__FILE__, __LINE__, #a, #b, OP, (a), (b))
/* clang-format on */

#define T_EQ(a, b) T__CMP(a, T__EQ, b)
#define T_NE(a, b) T__CMP(a, T__NE, b)
#define T_LT(a, b) T__CMP(a, T__LT, b)
#define T_LE(a, b) T__CMP(a, T__LE, b)
#define T_GT(a, b) T__CMP(a, T__GT, b)
#define T_GE(a, b) T__CMP(a, T__GE, b)

#define T_TRUE(x)                                                                                  \
    do {                                                                                           \
        if (!(x))                                                                                  \
            t__fail(__FILE__, __LINE__, "T_TRUE(%s): false", #x);                                  \
    } while (0)
#define T_FALSE(x)                                                                                 \
    do {                                                                                           \
        if (x)                                                                                     \
            t__fail(__FILE__, __LINE__, "T_FALSE(%s): true", #x);                                  \
    } while (0)
#define T_NULL(p)                                                                                  \
    do {                                                                                           \
        const void *t__p = (p);                                                                    \
        if (t__p)                                                                                  \
            t__fail(__FILE__, __LINE__, "T_NULL(%s): %p", #p, t__p);                               \
    } while (0)
#define T_NOTNULL(p)                                                                               \
    do {                                                                                           \
        const void *t__p = (p);                                                                    \
        if (!t__p)                                                                                 \
            t__fail(__FILE__, __LINE__, "T_NOTNULL(%s): NULL", #p);                                \
    } while (0)
#define T_PTREQ(a, b)                                                                              \
    do {                                                                                           \
        const void *t__a = (a), *t__b = (b);                                                       \
        if (t__a != t__b)                                                                          \
            t__fail(__FILE__, __LINE__, "T_PTREQ(%s, %s): %p vs %p", #a, #b, t__a, t__b);          \
    } while (0)

/* |a - b| <= eps, in double. */
#define T_NEAR(a, b, eps)                                                                          \
    do {                                                                                           \
        double t__a = (a), t__b = (b), t__e = (eps);                                               \
        if (!(t__a - t__b <= t__e && t__b - t__a <= t__e))                                         \
            t__fail(__FILE__, __LINE__, "T_NEAR(%s, %s, %s): %.9g vs %.9g", #a, #b, #eps, t__a,    \
                    t__b);                                                                         \
    } while (0)

/* n bytes equal; on failure prints the first differing offset and the bytes there. */
#define T_MEMEQ(a, b, n) t__memeq(__FILE__, __LINE__, #a, #b, (a), (b), (n))
/* Equal strings; NULL equals only NULL. */
#define T_STREQ(a, b) t__streq(__FILE__, __LINE__, #a, #b, (a), (b))
/* A library return code is a success (>= 0); prints its name and message otherwise. */
#define T_OK(ret) t__ok(__FILE__, __LINE__, #ret, (ret))
/* A library return code is exactly the error code (names both otherwise). */
#define T_ERR(ret, code) t__err(__FILE__, __LINE__, #ret, #code, (ret), (code))
/* Fail now with a message. */
#define T_FAIL(...) t__fail(__FILE__, __LINE__, __VA_ARGS__)
/* Skip the current test (exit code 77) with a reason. */
#define T_SKIP(...) t__skip(__FILE__, __LINE__, __VA_ARGS__)
/* The build directory ctest passes in T_BUILD_DIR (where the railio and
 * railiod binaries are); skips the test when it is not set. */
#define t_build_dir() t__build_dir(__FILE__, __LINE__)
const char *t__build_dir(const char *file, int line);

/* ----------------------------------------------------------------- helpers */

/*
 * Deterministic bytes: byte i of the stream for seed depends on (seed, i)
 * only, so a chunk landing at the wrong offset or from another object (other
 * seed) is caught. t_fill_pattern_at fills buf as the stream's bytes
 * [off, off + n).
 */
void t_fill_pattern(void *buf, size_t n, uint64_t seed);
void t_fill_pattern_at(void *buf, size_t n, uint64_t seed, uint64_t off);
/* Offset of the first byte that differs from the pattern, or -1 if none. */
int64_t t_check_pattern(const void *buf, size_t n, uint64_t seed);
int64_t t_check_pattern_at(const void *buf, size_t n, uint64_t seed, uint64_t off);
#define T_PATTERN(buf, n, seed)                                                                    \
    do {                                                                                           \
        int64_t t__off = t_check_pattern((buf), (n), (seed));                                      \
        if (t__off >= 0)                                                                           \
            t__fail(__FILE__, __LINE__, "T_PATTERN(%s, %s, %s): first bad byte at offset %lld",    \
                    #buf, #n, #seed, (long long)t__off);                                           \
    } while (0)

/* Turn the rio__malloc leak check off (0) or on (1) for the current test. */
void t_leak_check(int on);

/* Milliseconds since an arbitrary start (CLOCK_MONOTONIC). */
uint64_t t_now_ms(void);

/* fn runs in the runner process after a test failed (an assertion, a crash,
 * its timeout), with the test's name: a helper that owns a peer says what
 * state the peer is in (ceph_env.c shows the Ceph cluster). Up to 4 hooks,
 * run in the order added; set them from a constructor or before the tests
 * run. Not with T_NOFORK, where the first failure ends the run. */
void t_on_fail(void (*fn)(const char *test));

#endif
