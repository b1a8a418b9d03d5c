/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the s3:// and http:// tests (tests/integration/test_s3*.c,
 * the s3:// conformance run).
 *
 * Peers, each started once per test program by the first test that asks and
 * stopped when the program exits (the harness forks one process per test,
 * so the start is lazy and the stop runs in the harness process only):
 * - su_fault_port(): tests/harness/s3fault.py, the scripted S3-like server
 *   that misbehaves on request (faults chosen by the key, see the script);
 *   detached with setsid, its PID recorded, killed by PID at exit, and gone
 *   by itself when the harness process dies (--owner);
 * - su_rgw(): radosgw on a single-host Ceph cluster from
 *   tests/harness/ceph.sh --rgw (through ceph_env.h; define SU_WITH_RGW
 *   before including this file, which makes the cluster start with radosgw
 *   on a free port); exports the S3 keys into the environment.
 *
 * Independent checks: the curl CLI signing with its own SigV4 (su_curl),
 * an MD5 by OpenSSL (t_md5_hex), and the closing checks every test ends
 * with (nothing in flight, nothing leaked: tlib.h).
 */
#ifndef RIO_TEST_S3_UTIL_H
#define RIO_TEST_S3_UTIL_H

#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "railio.h"
#include "t.h"
#include "tlib.h"

#define SU_KIB T_KIB
#define SU_MIB T_MIB

/* The directory of this program's S3 peers' files ($TMPDIR/rio-s3-PID). */
extern char su_dir[512];

/* The fault server's port; starts it on first use. */
int su_fault_port(void);
/* "requests=N fired=N uploads=N objects=N" from the fault server. */
void su_fault_stats(int port, unsigned *fired, unsigned *uploads);
/* The counter NAME of the fault server's /_stats line (completes, heads...). */
unsigned su_fault_count(int port, const char *name);

/* The Ceph cluster's arguments for radosgw on a free port (ceph_env.h's
 * t_ceph_set_args), chosen once in the harness process. */
void su_rgw_args(void);
#ifdef SU_WITH_RGW
#include "ceph_env.h"
__attribute__((constructor)) static void su__with_rgw(void)
{
    su_rgw_args();
}
#endif

/* Start radosgw (once), export its keys, and make sure bucket exists.
 * Returns the endpoint ("http://127.0.0.1:PORT", static storage). */
const char *su_rgw(const char *bucket);
/*
 * The curl CLI against radosgw with its own SigV4 (an independent signer):
 * `curl ARGS URL` where URL is endpoint/path. Output in *out (malloc'd,
 * NUL-terminated, *len bytes) when out != NULL. Returns the HTTP status, or
 * -1 when curl failed.
 */
int su_curl(const char *endpoint, const char *args, const char *path, char **out, size_t *len);
/* Occurrences of needle in a curl reply for path (bucket listings). */
unsigned su_curl_count(const char *endpoint, const char *path, const char *needle);

/* ------------------------------------------------------------ clients */

/* Options for fast tests (t_opts T_PROFILE_S3) with chunk and depth. */
#define su_opts(o, chunk, depth) t_opts_sized((o), T_PROFILE_S3, (chunk), (depth))
#define su_client(url, o) t__client_new((url), (o), __FILE__, __LINE__)
#define su_idle(c) t__idle((c), __FILE__, __LINE__)
#define su_close(c, alloc0) t__close((c), (alloc0), __FILE__, __LINE__)
#define su_pattern t_pattern_buf
#define su_md5 t_md5_hex
#define su_now_ms t_now_ms
#define su_sleep_ms t_sleep_ms
#define su_sh t_sh
#define su_free_port t_free_port

#endif
