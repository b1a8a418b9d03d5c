/* SPDX-License-Identifier: Apache-2.0 */
/* ceph_env: one single-host Ceph cluster per test program (see ceph_env.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ceph_env.h"
#include "tlib.h"

static pid_t tc_owner;
static char tc_dir[512];
static char tc_conf[600];
static char tc_script[1024];
static char tc_args[256];

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
    if (getpid() != tc_owner || !tc_exists(tc_dir))
        return;
    if (t_sh("bash '%s' stop '%s' >/dev/null 2>&1", tc_script, tc_dir) != 0)
        fprintf(stderr, "ceph_env: could not stop the cluster in %s\n", tc_dir);
}

__attribute__((constructor)) static void tc_init(void)
{
    const char *tmp = getenv("TMPDIR");

    tc_owner = getpid();
    snprintf(tc_dir, sizeof(tc_dir), "%s/rio-ceph-%d", tmp && *tmp ? tmp : "/tmp", (int)tc_owner);
    snprintf(tc_conf, sizeof(tc_conf), "%s/ceph.conf", tc_dir);
    t_harness_path(tc_script, sizeof(tc_script), "ceph.sh");
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
    st = t_sh("bash '%s' start '%s' --owner %d %s >&2", tc_script, tc_dir, (int)tc_owner, tc_args);
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
