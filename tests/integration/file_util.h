/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the file:// tests: a scratch directory per test (removed at
 * exit, also when an assertion fails), URL building, and reading a file back
 * with plain read(2) to check what the transport left on disk.
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

#include "../unit/engine_util.h"

static char fu_dir[256];

static int fu__rm(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(p);
    return 0;
}

static void fu__cleanup(void)
{
    if (fu_dir[0])
        nftw(fu_dir, fu__rm, 16, FTW_DEPTH | FTW_PHYS);
    fu_dir[0] = '\0';
}

/* A failed test ends with _exit (no atexit): its directory, named after its
 * process, is removed by a later run once that process is gone. */
static void fu__reap_stale(const char *base)
{
    DIR *d = opendir(base);
    struct dirent *de;

    if (!d)
        return;
    while ((de = readdir(d))) {
        long pid;
        char p[512];
        if (sscanf(de->d_name, "railio-file-%ld-", &pid) != 1 || pid <= 0)
            continue;
        if (kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue;
        snprintf(p, sizeof(p), "%s/%s", base, de->d_name);
        nftw(p, fu__rm, 16, FTW_DEPTH | FTW_PHYS);
    }
    closedir(d);
}

/* A fresh scratch directory under $TMPDIR (default /tmp), removed at exit. */
static inline const char *fu_mkdir(void)
{
    const char *base = getenv("TMPDIR");

    if (!base || !*base)
        base = "/tmp";
    fu__reap_stale(base);
    snprintf(fu_dir, sizeof(fu_dir), "%s/railio-file-%ld-XXXXXX", base, (long)getpid());
    if (!mkdtemp(fu_dir))
        T_FAIL("mkdtemp(%s): %s", fu_dir, strerror(errno));
    atexit(fu__cleanup);
    return fu_dir;
}

/* "file://" + the scratch dir + suffix (printf-style). Static buffer. */
static inline const char *fu_url(const char *fmt, ...)
{
    static char url[1024];
    char sfx[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(sfx, sizeof(sfx), fmt, ap);
    va_end(ap);
    snprintf(url, sizeof(url), "file://%s%s", fu_dir, sfx);
    return url;
}

/* The scratch dir + "/" + name. Static buffer. */
static inline const char *fu_path(const char *name)
{
    static char p[1024];

    snprintf(p, sizeof(p), "%s/%s", fu_dir, name);
    return p;
}

/* Whole file at path, malloc'd; *n its size. Fails the test if unreadable. */
static inline uint8_t *fu_slurp(const char *path, size_t *n)
{
    struct stat st;
    uint8_t *b;
    size_t got = 0;
    int fd = open(path, O_RDONLY);

    if (fd < 0 || fstat(fd, &st) < 0)
        T_FAIL("open %s: %s", path, strerror(errno));
    b = malloc((size_t)st.st_size + 1);
    T_NOTNULL(b);
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, b + got, (size_t)st.st_size - got);
        if (r <= 0)
            T_FAIL("read %s: %s", path, r < 0 ? strerror(errno) : "EOF");
        got += (size_t)r;
    }
    close(fd);
    *n = got;
    return b;
}

/* Write n bytes to path (created or truncated), optionally via rename. */
static inline void fu_write(const char *path, const void *buf, size_t n)
{
    size_t done = 0;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);

    if (fd < 0)
        T_FAIL("open %s: %s", path, strerror(errno));
    while (done < n) {
        ssize_t w = write(fd, (const uint8_t *)buf + done, n - done);
        if (w <= 0)
            T_FAIL("write %s: %s", path, strerror(errno));
        done += (size_t)w;
    }
    close(fd);
}

/* Names in the scratch dir (and below) that look like a leftover temp file. */
static int fu__tmp_count;
static int fu__count_tmp(const char *p, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    if (strstr(p + ftw->base, ".railio-tmp-"))
        fu__tmp_count++;
    return 0;
}

static inline int fu_tmp_files(void)
{
    fu__tmp_count = 0;
    nftw(fu_dir, fu__count_tmp, 16, FTW_PHYS);
    return fu__tmp_count;
}

#endif
