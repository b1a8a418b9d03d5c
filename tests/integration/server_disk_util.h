/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the disk-tier tests of railiod (test_server_disk*.c): a data
 * directory removed at exit, objects whose bytes derive from (key, seq) so
 * that any version read back can be recognised and checked, kill -9.
 */
#ifndef RIO_TEST_SERVER_DISK_UTIL_H
#define RIO_TEST_SERVER_DISK_UTIL_H

#include <dirent.h>

#include "../harness/server_env.h"

static char disk__dirs[4][128];

static inline void disk_dir_rm(const char *dir)
{
    char p[512];
    DIR *d;
    struct dirent *de;

    if (!dir[0])
        return;
    d = opendir(dir);
    if (d) {
        while ((de = readdir(d)) != NULL) {
            if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                continue;
            snprintf(p, sizeof(p), "%s/%s", dir, de->d_name);
            unlink(p);
        }
        closedir(d);
    }
    rmdir(dir);
}

static inline void disk__atexit(void)
{
    for (unsigned i = 0; i < 4; i++)
        if (disk__dirs[i][0]) {
            disk_dir_rm(disk__dirs[i]);
            disk__dirs[i][0] = '\0';
        }
}

/* A fresh data directory, removed when the test exits (pass or fail). */
static inline const char *disk_dir_make(void)
{
    static int registered;
    for (unsigned i = 0; i < 4; i++)
        if (!disk__dirs[i][0]) {
            snprintf(disk__dirs[i], sizeof(disk__dirs[i]), "/tmp/railiod-data-XXXXXX");
            if (!mkdtemp(disk__dirs[i]))
                T_FAIL("mkdtemp: %s", strerror(errno));
            if (!registered) {
                atexit(disk__atexit);
                registered = 1;
            }
            return disk__dirs[i];
        }
    T_FAIL("too many data directories");
}

/* Names in dir starting with prefix (0 when none), the first one in *first. */
static inline unsigned disk_dir_count(const char *dir, const char *prefix, char *first, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    unsigned n = 0;

    if (!d)
        T_FAIL("opendir %s: %s", dir, strerror(errno));
    while ((de = readdir(d)) != NULL)
        if (!strncmp(de->d_name, prefix, strlen(prefix))) {
            if (n++ == 0 && first)
                snprintf(first, cap, "%s/%s", dir, de->d_name);
        }
    closedir(d);
    return n;
}

/* kill -9 the server and reap it (no drain, no clean-up of its own). */
static inline void srv_kill9(struct srv_env *e)
{
    if (e->pid > 0 && !e->exited) {
        kill(e->pid, SIGKILL);
        waitpid(e->pid, NULL, 0);
        e->exited = 1;
    }
    srv__rmdir(e);
    for (unsigned i = 0; i < sizeof(srv__live) / sizeof(srv__live[0]); i++)
        if (srv__live[i] == e)
            srv__live[i] = NULL;
}

/* --------------------------------------------- versions derived from (key, seq) */

#define DV_HDR 24

static inline uint64_t dv_size(unsigned key, uint64_t seq, uint64_t max)
{
    uint64_t h = rio__xxh3(&seq, sizeof(seq)) ^ ((uint64_t)key * 0x9e3779b97f4a7c15ull);
    return DV_HDR + h % (max - DV_HDR + 1);
}

/* Version seq of key: "DV1" magic, key, seq, then the pattern of (key, seq). */
static inline uint8_t *dv_make(unsigned key, uint64_t seq, uint64_t max, uint64_t *size)
{
    uint64_t n = dv_size(key, seq, max);
    uint8_t *p = malloc(n);
    t_fill_pattern(p, n, ((uint64_t)key << 32) ^ seq);
    memcpy(p, "DV1\0\0\0\0\0", 8);
    memcpy(p + 8, &seq, 8);
    uint64_t k = key;
    memcpy(p + 16, &k, 8);
    *size = n;
    return p;
}

/* buf (n bytes) is exactly some version of key: its seq, or -1. */
static inline int64_t dv_check(unsigned key, const uint8_t *buf, uint64_t n, uint64_t max)
{
    uint64_t seq, k, want;
    if (n < DV_HDR || memcmp(buf, "DV1\0\0\0\0\0", 8) != 0)
        return -1;
    memcpy(&seq, buf + 8, 8);
    memcpy(&k, buf + 16, 8);
    if (k != key)
        return -1;
    uint8_t *exp = dv_make(key, seq, max, &want);
    int ok = want == n && memcmp(exp, buf, n) == 0;
    free(exp);
    return ok ? (int64_t)seq : -1;
}

/* The whole object under key: 0 and *buf (malloc'ed), *d; or the status. */
static inline int dv_get(struct wc *c, const char *key, uint8_t **buf, struct rio_proto_desc *d)
{
    uint8_t *keep = NULL;
    int st = wc_lookup(c, key, d, &keep);
    free(keep);
    *buf = NULL;
    if (st != 0)
        return st;
    *buf = malloc(d->size ? d->size : 1);
    for (uint64_t off = 0; off < d->size;) {
        uint32_t len = d->size - off > (1u << 20) ? (1u << 20) : (uint32_t)(d->size - off);
        st = wc_read(c, key, d->generation, off, len, *buf + off);
        if (st != 0) {
            free(*buf);
            *buf = NULL;
            return st;
        }
        off += len;
    }
    return 0;
}

#endif
