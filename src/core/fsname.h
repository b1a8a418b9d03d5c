/* SPDX-License-Identifier: Apache-2.0 */
#ifndef RIO_FSNAME_H
#define RIO_FSNAME_H

/*
 * renameat(dfd, from, dfd, to), atomically, where to may be a regular file:
 * the two names exchanged (renameat2 RENAME_EXCHANGE), then from, which
 * names the old file by then, removed. A plain rename over an existing
 * file makes ext4 (its auto_da_alloc default) write the whole new file out
 * before the rename returns (docs/bench.md: 1 GiB in 1-4 s against 0.6 s);
 * an exchange does not, and to names the old bytes or the new, never
 * neither, all the same. A missing to, one that is no regular file (a
 * symbolic link is replaced, not followed; a directory refused as by
 * rename), or a file system without exchanges: a plain rename.
 * 0 or -errno.
 */
int rio__replace_at(int dfd, const char *from, const char *to);

#endif
