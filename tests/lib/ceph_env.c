/* SPDX-License-Identifier: Apache-2.0 */
/* ceph_env: one single-host Ceph cluster per test program (see ceph_env.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "ceph_env.h"
#include "tlib.h"

static pid_t tc_owner;
static char tc_dir[512];
static char tc_conf[600];
static char tc_script[1024];
static char tc_args[256];
static char tc_keep[1024];        /* where a failed run's logs are kept */
static time_t tc_diag_at;         /* when the watchdog shows the cluster (0: never) */
static int tc_failed;             /* a test failed: keep the logs at exit */
static unsigned tc_diag_left = 3; /* cluster dumps a failed test may still print */

/* The watchdog shows the cluster this long before ctest's timeout
 * (T_CTEST_TIMEOUT, set by CMake for the ceph-labelled tests) kills the
 * program, while ctest still reads its output: a killed program runs no
 * atexit handler, and ctest drops what comes after. */
#define TC_DIAG_MARGIN_S 20

/* librados keeps a few process-lifetime allocations (static singletons);
 * they are not ours to free. Only read by LeakSanitizer builds. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void)
{
    return "leak:librados.so\nleak:libceph-common.so\nleak:libstdc++.so\n";
}

static int tc_exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int tc_running(void)
{
    char path[600];

    snprintf(path, sizeof(path), "%s/env", tc_dir);
    return tc_exists(path);
}

void t_ceph_diag(const char *why)
{
    char w[160];
    size_t i;

    if (!tc_running())
        return;
    /* Quoted for the shell: keep only harmless characters. */
    snprintf(w, sizeof(w), "%s", why ? why : "");
    for (i = 0; w[i]; i++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 _-.:/,()",
                    w[i]))
            w[i] = '_';
    fflush(NULL);
    t_sh("bash '%s' diag '%s' '%s' >&2", tc_script, tc_dir, w);
}

/* t_on_fail hook, in the harness process: the cluster as the failed test
 * left it, and keep the logs at exit. */
static void tc_on_fail(const char *test)
{
    char why[160];

    if (getpid() != tc_owner || !tc_exists(tc_dir))
        return;
    tc_failed = 1;
    if (!tc_diag_left)
        return;
    tc_diag_left--;
    snprintf(why, sizeof(why), "after %s failed", test);
    t_ceph_diag(why);
}

static void tc_atexit(void)
{
    char failed[600];

    snprintf(failed, sizeof(failed), "%s.failed", tc_dir);
    if (getpid() != tc_owner)
        return;
    if (tc_exists(failed)) {
        tc_failed = 1;
        unlink(failed);
    }
    if (!tc_exists(tc_dir))
        return;
    if (tc_failed && tc_keep[0]) {
        if (t_sh("bash '%s' stop '%s' --keep '%s' >/dev/null 2>&1", tc_script, tc_dir, tc_keep) ==
            0) {
            fprintf(stderr, "ceph_env: a test failed: the cluster's logs are in %s\n", tc_keep);
            return;
        }
    } else if (t_sh("bash '%s' stop '%s' >/dev/null 2>&1", tc_script, tc_dir) == 0) {
        return;
    }
    fprintf(stderr, "ceph_env: could not stop the cluster in %s\n", tc_dir);
}

/* BUILD/ceph-logs/PROGRAM[-BACKEND]-PID: the conformance program runs once a
 * backend (T_CONF_BACKEND). */
static void tc_keep_path(void)
{
    const char *backend = getenv("T_CONF_BACKEND");
    char name[256];

    snprintf(name, sizeof(name), "ceph-logs/%s%s%s-%d", program_invocation_short_name,
             backend && *backend ? "-" : "", backend && *backend ? backend : "", (int)tc_owner);
    t_build_path(tc_keep, sizeof(tc_keep), name);
}

__attribute__((constructor)) static void tc_init(void)
{
    const char *tmp = getenv("TMPDIR");
    const char *limit = getenv("T_CTEST_TIMEOUT");

    tc_owner = getpid();
    snprintf(tc_dir, sizeof(tc_dir), "%s/rio-ceph-%d", tmp && *tmp ? tmp : "/tmp", (int)tc_owner);
    snprintf(tc_conf, sizeof(tc_conf), "%s/ceph.conf", tc_dir);
    t_harness_path(tc_script, sizeof(tc_script), "ceph.sh");
    tc_keep_path();
    if (limit && atoi(limit) > 2 * TC_DIAG_MARGIN_S)
        tc_diag_at = time(NULL) + atoi(limit) - TC_DIAG_MARGIN_S;
    t_on_fail(tc_on_fail);
    atexit(tc_atexit);
}

void t_ceph_set_args(const char *args)
{
    snprintf(tc_args, sizeof(tc_args), "%s", args ? args : "");
}

const char *t_ceph_dir(void)
{
    return tc_dir;
}

const char *t_ceph_conf(void)
{
    char path[700];
    int st;

    snprintf(path, sizeof(path), "%s/env", tc_dir);
    if (tc_exists(path))
        return tc_conf;
    snprintf(path, sizeof(path), "%s.failed", tc_dir);
    if (tc_exists(path))
        T_FAIL("the Ceph cluster failed to start in an earlier test");
    st = t_sh("bash '%s' start '%s' --owner %d --keep '%s' --diag-at %lld %s >&2", tc_script,
              tc_dir, (int)tc_owner, tc_keep, (long long)tc_diag_at, tc_args);
    if (st == 77)
        T_SKIP("no Ceph on this machine (scripts/install-deps.sh installs it)");
    if (st != 0) {
        FILE *f = fopen(path, "w");
        if (f)
            fclose(f);
        T_FAIL("tests/harness/ceph.sh start failed (status %d)", st);
    }
    return tc_conf;
}

int t_ceph_sh(const char *fmt, ...)
{
    char args[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    /* verb DIR rest: split the verb off the front. */
    const char *sp = strchr(args, ' ');
    int vlen = sp ? (int)(sp - args) : (int)strlen(args);
    return t_sh("bash '%s' %.*s '%s'%s >&2", tc_script, vlen, args, tc_dir, sp ? sp : "");
}
