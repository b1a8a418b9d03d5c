/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ceph_env.h: one real single-host Ceph cluster per test program, started by
 * tests/harness/ceph.sh the first time a test asks for it and stopped when
 * the program exits.
 *
 *     #define T_CEPH_ARGS "--osds 2 --pool rio --pool rio2"   (optional)
 *     #include "ceph_env.h"
 *
 *     TEST(x) { const char *conf = t_ceph_conf(); ... }
 *
 * How it fits the harness (tests/lib/t.h forks one process per test):
 * - a constructor in the harness process picks the cluster directory
 *   ($TMPDIR/rio-ceph-<pid>) and registers an atexit handler that runs
 *   `ceph.sh stop` in that process only (the forked tests exit through exit()
 *   too and must not stop it);
 * - the first test that calls t_ceph_conf() runs `ceph.sh start DIR --owner
 *   <harness pid>`: the daemons are in their own sessions, so they outlive
 *   that test's process group, and later tests find DIR/env and reuse them;
 * - if the harness process dies without running atexit (killed by ctest's
 *   timeout), ceph.sh's watchdog sees the owner gone and stops the cluster.
 * A cluster that failed to start is not retried by later tests (they fail at
 * once). Exit 77 from ceph.sh (Ceph not installed) skips the test.
 */
#ifndef RIO_TEST_CEPH_ENV_H
#define RIO_TEST_CEPH_ENV_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#ifndef T_CEPH_ARGS
#define T_CEPH_ARGS ""
#endif

static pid_t tc_owner;
static char tc_dir[512];
static char tc_conf[600];
static char tc_script[1024];

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

static void tc_atexit(void)
{
    char cmd[2048];

    if (getpid() != tc_owner || !tc_exists(tc_dir))
        return;
    snprintf(cmd, sizeof(cmd), "bash '%s' stop '%s' >/dev/null 2>&1", tc_script, tc_dir);
    if (system(cmd) != 0)
        fprintf(stderr, "ceph_env: could not stop the cluster in %s\n", tc_dir);
}

__attribute__((constructor)) static void tc_init(void)
{
    const char *tmp = getenv("TMPDIR");
    const char *src = getenv("T_SOURCE_DIR");

    tc_owner = getpid();
    snprintf(tc_dir, sizeof(tc_dir), "%s/rio-ceph-%d", tmp && *tmp ? tmp : "/tmp", (int)tc_owner);
    snprintf(tc_conf, sizeof(tc_conf), "%s/ceph.conf", tc_dir);
    if (src && *src) {
        snprintf(tc_script, sizeof(tc_script), "%s/tests/harness/ceph.sh", src);
    } else {
        /* Run by hand: this header's own directory (__FILE__ is absolute
         * under CMake). */
        snprintf(tc_script, sizeof(tc_script), "%s", __FILE__);
        char *slash = strrchr(tc_script, '/');
        if (slash)
            snprintf(slash + 1, sizeof(tc_script) - (size_t)(slash + 1 - tc_script), "ceph.sh");
    }
    atexit(tc_atexit);
}

/* The cluster's directory (valid once t_ceph_conf() returned). */
static inline const char *t_ceph_dir(void)
{
    return tc_dir;
}

/* The cluster's ceph.conf; starts the cluster on first use. Fails or skips
 * the calling test when it cannot. */
static inline const char *t_ceph_conf(void)
{
    char path[700], cmd[2048];
    int st;

    snprintf(path, sizeof(path), "%s/env", tc_dir);
    if (tc_exists(path))
        return tc_conf;
    snprintf(path, sizeof(path), "%s.failed", tc_dir);
    if (tc_exists(path))
        T_FAIL("the Ceph cluster failed to start in an earlier test");
    snprintf(cmd, sizeof(cmd), "bash '%s' start '%s' --owner %d %s >&2", tc_script, tc_dir,
             (int)tc_owner, T_CEPH_ARGS);
    st = system(cmd);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 77)
        T_SKIP("no Ceph on this machine (scripts/install-deps.sh installs it)");
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        FILE *f = fopen(path, "w");
        if (f)
            fclose(f);
        T_FAIL("tests/harness/ceph.sh start failed (status 0x%x)", st);
    }
    return tc_conf;
}

/* Run a ceph.sh verb against the cluster ("kill-osd 1", "cli osd down 1").
 * Returns the exit status. */
static inline int t_ceph_sh(const char *fmt, ...)
{
    char args[512], cmd[2048];
    va_list ap;
    int st;

    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    /* verb DIR rest: split the verb off the front. */
    const char *sp = strchr(args, ' ');
    int vlen = sp ? (int)(sp - args) : (int)strlen(args);
    snprintf(cmd, sizeof(cmd), "bash '%s' %.*s '%s'%s >&2", tc_script, vlen, args, tc_dir,
             sp ? sp : "");
    st = system(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
