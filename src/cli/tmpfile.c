/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The temporary file a download writes before it replaces FILE (get into a
 * file, cp -r into a directory). Unnamed (O_TMPFILE) where the file system
 * has it, so that whatever ends the process, kill -9 included, leaves
 * nothing; it gets a name, ".BASE.railio-tmp-<16 random hex digits>" beside
 * FILE, only once complete, for the rename over FILE. Where O_TMPFILE is
 * refused it is created under such a name with O_CREAT | O_EXCL |
 * O_NOFOLLOW: only then can a killed process leave one behind, which cp -r
 * never uploads and removes when it writes FILE again.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/fsname.h"

#define TMP_MARK ".railio-tmp-"
#define TMP_HEX 16
#define TMP_BASE_MAX 200 /* bytes of FILE's name kept in the temporary's */

int rio_cli_dir_part(const char *file, char *dir, size_t cap)
{
    const char *slash = strrchr(file, '/');
    size_t dl = slash ? (size_t)(slash - file) : 1;
    if (slash && dl == 0)
        dl = 1; /* "/name" */
    if (dl >= cap)
        return -ENAMETOOLONG;
    memcpy(dir, slash ? file : ".", dl);
    dir[dl] = '\0';
    return 0;
}

static void set_named(struct rio_cli_tmpfile *t, bool on)
{
    t->named = on;
    if (t->reg)
        rio_cli_tmp_register(on ? t->name : NULL);
}

/* "DIR/.BASE.railio-tmp-<16 random hex digits>" for file into t->name. */
static int random_name(struct rio_cli_tmpfile *t, const char *file)
{
    uint64_t r;
    if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
        return -errno;
    const char *slash = strrchr(file, '/');
    int dl = slash ? (int)(slash - file + 1) : 0;
    int n = snprintf(t->name, sizeof(t->name), "%.*s.%.*s" TMP_MARK "%016llx", dl, file,
                     TMP_BASE_MAX, file + dl, (unsigned long long)r);
    return n < 0 || (size_t)n >= sizeof(t->name) ? -ENAMETOOLONG : 0;
}

int rio_cli_tmpfile_open(struct rio_cli_tmpfile *t, int dfd, const char *file, bool reg)
{
    char dir[sizeof(t->name)];
    int ret = rio_cli_dir_part(file, dir, sizeof(dir));

    memset(t, 0, sizeof(*t));
    t->dfd = dfd;
    t->fd = -1;
    t->reg = reg;
    if (ret < 0)
        return ret;
    int fd = openat(dfd, dir, O_WRONLY | O_TMPFILE | O_CLOEXEC, 0644);
    if (fd >= 0 && access("/proc/self/fd", X_OK) == 0) {
        t->anon = true;
        return t->fd = fd;
    }
    if (fd >= 0)
        close(fd); /* no /proc to link it by */
    else if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL)
        return -errno;
    for (int i = 0; i < 16; i++) {
        if ((ret = random_name(t, file)) < 0)
            return ret;
        set_named(t, true);
        fd = openat(dfd, t->name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0)
            return t->fd = fd;
        set_named(t, false);
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

/* Name the unnamed temporary file: a link under a random name. */
static int tmp_link(struct rio_cli_tmpfile *t, const char *file)
{
    char pf[64];
    snprintf(pf, sizeof(pf), "/proc/self/fd/%d", t->fd);
    for (int i = 0; i < 16; i++) {
        int ret = random_name(t, file);
        if (ret < 0)
            return ret;
        set_named(t, true);
        if (linkat(AT_FDCWD, pf, t->dfd, t->name, AT_SYMLINK_FOLLOW) == 0)
            return 0;
        set_named(t, false);
        if (errno != EEXIST)
            return -errno;
    }
    return -EEXIST;
}

int rio_cli_tmpfile_commit(struct rio_cli_tmpfile *t, const char *file)
{
    int ret = t->anon ? tmp_link(t, file) : 0;
    if (close(t->fd) < 0 && ret == 0)
        ret = -errno;
    t->fd = -1;
    if (ret == 0)
        ret = rio__replace_at(t->dfd, t->name, file);
    if (ret < 0 && t->named)
        unlinkat(t->dfd, t->name, 0);
    set_named(t, false);
    return ret;
}

void rio_cli_tmpfile_abort(struct rio_cli_tmpfile *t)
{
    if (t->fd >= 0)
        close(t->fd);
    t->fd = -1;
    if (t->named)
        unlinkat(t->dfd, t->name, 0);
    set_named(t, false);
}

/* The length of BASE in ".BASE.railio-tmp-<16 hex digits>", or 0 when
 * name is not such a temporary's. */
static size_t tmp_base_len(const char *name)
{
    size_t n = strlen(name), ml = strlen(TMP_MARK);
    if (n < 2 + ml + TMP_HEX || name[0] != '.')
        return 0;
    const char *hex = name + n - TMP_HEX;
    for (int i = 0; i < TMP_HEX; i++)
        if (!((hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f')))
            return 0;
    if (memcmp(hex - ml, TMP_MARK, ml))
        return 0;
    return n - 1 - ml - TMP_HEX;
}

bool rio_cli_tmp_name(const char *name)
{
    return tmp_base_len(name) > 0;
}

bool rio_cli_tmp_name_of(const char *tmp, const char *name)
{
    size_t bl = tmp_base_len(tmp), nl = strlen(name);
    if (!bl || bl > TMP_BASE_MAX)
        return false;
    /* A name longer than the temporary's part of it: its first bytes. */
    return (bl == nl || (bl == TMP_BASE_MAX && nl > bl)) && !memcmp(tmp + 1, name, bl);
}
