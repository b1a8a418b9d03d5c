/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the file:// tests: a scratch directory per test (removed at
 * exit; a failed test's by a later run), URL building, and reading a file
 * back with plain read(2) to check what the transport left on disk. The
 * engine's helpers (engine_util.h) come with it.
 */
#ifndef RIO_TEST_FILE_UTIL_H
#define RIO_TEST_FILE_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/stat.h>
#include <unistd.h>

#include "engine_util.h"

/* The scratch directory of the last fu_mkdir ("" before). */
extern const char *fu_dir;

/* A fresh scratch directory under $TMPDIR (default /tmp), removed at exit. */
const char *fu_mkdir(void);
/* "file://" + the scratch dir + suffix (printf-style). Static buffer. */
const char *fu_url(const char *fmt, ...);
/* The scratch dir + "/" + name. Static buffer. */
const char *fu_path(const char *name);
#define fu_slurp t_slurp
#define fu_write t_write_file
/* Names in the scratch dir (and below) that look like a leftover temp file. */
int fu_tmp_files(void);

#endif
