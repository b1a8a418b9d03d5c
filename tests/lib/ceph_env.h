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
 *   <harness pid> ARGS`: the daemons are in their own sessions, so they
 *   outlive that test's process group, and later tests find DIR/env and
 *   reuse them;
 * - if the harness process dies without running atexit (killed by ctest's
 *   timeout), ceph.sh's watchdog sees the owner gone and stops the cluster.
 * When something goes wrong (docs/rados.md, "The test cluster"):
 * - after a test fails, the harness process prints `ceph.sh diag` (ceph -s,
 *   health, OSD tree, the daemons' admin sockets, log tails; the first three
 *   failures) and, at exit, keeps the log tails in
 *   $T_BUILD_DIR/ceph-logs/PROGRAM[-BACKEND]-PID;
 * - with T_CTEST_TIMEOUT set (CMake sets it to the test's TIMEOUT), the
 *   watchdog prints diag into the test's output 20 s before ctest would
 *   kill the program, and if the owner dies with the cluster up, writes
 *   diag.txt and the log tails to that same directory.
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

/* The arguments ceph.sh start gets after the directory (default ""); set
 * in the harness process, before the first test, by a constructor: the
 * one below when the program defines T_CEPH_ARGS. Copied. */
void t_ceph_set_args(const char *args);

#ifdef T_CEPH_ARGS
__attribute__((constructor)) static void t_ceph__program_args(void)
{
    t_ceph_set_args(T_CEPH_ARGS);
}
#endif

/* The cluster's directory (valid once t_ceph_conf() returned). */
const char *t_ceph_dir(void);

/* The cluster's ceph.conf; starts the cluster on first use. Fails or skips
 * the calling test when it cannot. */
const char *t_ceph_conf(void);

/* Print the cluster's state to stderr (ceph.sh diag; bounded in time and
 * size) with why in its header, if a cluster was started. For a test that
 * wants it before it fails (a failed test gets it anyway, after). */
void t_ceph_diag(const char *why);

/* Run a ceph.sh verb against the cluster ("kill-osd 1", "cli osd down 1").
 * Returns the exit status. */
int t_ceph_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
