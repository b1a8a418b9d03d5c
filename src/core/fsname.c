/* SPDX-License-Identifier: Apache-2.0 */
/* Replacing a file by name without making the file system write it out. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* renameat2 */
#endif
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/fsname.h"

int rio__replace_at(int dfd, const char *from, const char *to)
{
    struct stat st;

    if (fstatat(dfd, to, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode)) {
        if (renameat2(dfd, from, dfd, to, RENAME_EXCHANGE) == 0) {
            /* from names what was to: unless it was swapped for a
             * directory meanwhile (then left as it is), it goes. */
            if (unlinkat(dfd, from, 0) < 0 && errno != ENOENT && errno != EISDIR)
                return -errno;
            return 0;
        }
        if (errno != EINVAL && errno != ENOSYS && errno != ENOENT)
            return -errno;
    }
    return renameat(dfd, from, dfd, to) < 0 ? -errno : 0;
}
