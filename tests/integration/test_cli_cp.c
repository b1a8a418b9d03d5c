/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/*
 * railio cp end to end through the real binary: local file -> file:// ->
 * file:// (another store) -> local file, byte-exact, and a missing source
 * fails with a clear message and leaves no destination behind.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"

#define run t_sh

static uint8_t *read_file(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    T_NOTNULL(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = malloc((size_t)len + 1);
    T_NOTNULL(p);
    T_EQ(fread(p, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    *n = (size_t)len;
    return p;
}

TEST(cp_between_files_and_stores)
{
    char dir[] = "/tmp/rio-cp-XXXXXX";
    T_NOTNULL(mkdtemp(dir));
    T_EQ(run("mkdir -p %s/a %s/b", dir, dir), 0);
    const size_t n = 9 * 1024 * 1024 + 17;
    uint8_t *src = malloc(n);
    T_NOTNULL(src);
    t_fill_pattern(src, n, 77);
    char in[256], out[256];
    snprintf(in, sizeof(in), "%s/in.bin", dir);
    snprintf(out, sizeof(out), "%s/out.bin", dir);
    cli_write_file(in, src, n);

    T_EQ(run("%s cp %s file://%s/a/obj 2>/dev/null", cli_bin(), in, dir), 0);
    T_EQ(run("%s cp file://%s/a/obj file://%s/b/obj2 2>/dev/null", cli_bin(), dir, dir), 0);
    T_EQ(run("%s cp file://%s/b/obj2 %s 2>/dev/null", cli_bin(), dir, out), 0);
    size_t m;
    uint8_t *got = read_file(out, &m);
    T_EQ(m, n);
    T_MEMEQ(got, src, n);
    free(got);

    /* A missing source: non-zero exit, and no destination file appears. */
    char missing[256];
    snprintf(missing, sizeof(missing), "%s/never.bin", dir);
    T_NE(run("%s cp file://%s/a/nope %s 2>/dev/null", cli_bin(), dir, missing), 0);
    T_NE(access(missing, F_OK), 0);
    T_NE(run("%s cp %s %s 2>/dev/null", cli_bin(), in, out), 0); /* no URL on either side */

    T_EQ(run("rm -rf %s", dir), 0);
    free(src);
}

/* `railio cp -r DIR URL` reads the files its walk found and nothing else:
 * a directory of the tree swapped for a link to another (a user's private
 * one) while the copy runs, or a file swapped for a FIFO, is refused by
 * name, not copied (the secret's bytes were uploaded) and not waited on
 * (the FIFO's open blocked the copy for good). The first object's commit
 * is held back a second; the swap happens once cp has the first file
 * open (any process holding it: $! is timeout's), so the walk is over. */
static int cp_with_swap(const char *dir, const char *swap, char *err, size_t cap)
{
    T_EQ(run("rm -rf %s/src %s/dst %s/src.old %s/err; mkdir -p %s/src/sub %s/dst; "
             "printf real1 > %s/src/sub/f1; printf real2 > %s/src/sub/f2",
             dir, dir, dir, dir, dir, dir, dir, dir),
         0);
    int rc =
        run("timeout -s KILL 30 %s cp -r --jobs 1 %s/src "
            "'file://%s/dst?faults=delay:op=put_commit:delay=1000:count=1' 2>%s/err & pid=$!; "
            "for i in $(seq 1 1000); do ls -l /proc/[0-9]*/fd 2>/dev/null | grep -q %s/src/sub/f "
            "&& break; sleep 0.01; done; %s; wait $pid",
            cli_bin(), dir, dir, dir, dir, swap);
    size_t n = 0;
    char path[512];
    snprintf(path, sizeof(path), "%s/err", dir);
    char *e = (char *)read_file(path, &n);
    snprintf(err, cap, "%.*s", (int)n, e);
    free(e);
    return rc;
}

TEST(cp_tree_reads_only_what_the_walk_found)
{
    char dir[] = "/tmp/rio-cp-XXXXXX", err[4096], cmd[1024];
    T_NOTNULL(mkdtemp(dir));
    T_EQ(run("mkdir -p %s/secret && printf secret1 > %s/secret/f1 && "
             "printf secret2 > %s/secret/f2",
             dir, dir, dir),
         0);

    snprintf(cmd, sizeof(cmd), "mv %s/src/sub %s/src.old && ln -s %s/secret %s/src/sub", dir, dir,
             dir, dir);
    T_EQ(cp_with_swap(dir, cmd, err, sizeof(err)), 1);
    T_NOTNULL(strstr(err, "replaced meanwhile"));
    T_NE(run("grep -rqs secret %s/dst", dir), 0); /* nothing of the secret copied */
    T_EQ(run("cat %s/dst/sub/f1 %s/dst/sub/f2 2>/dev/null | grep -q real", dir, dir), 0);

    /* The file that was opened second, replaced by a FIFO. */
    snprintf(cmd, sizeof(cmd),
             "for f in f1 f2; do ls -l /proc/[0-9]*/fd 2>/dev/null | grep -q %s/src/sub/$f || "
             "{ rm %s/src/sub/$f && mkfifo %s/src/sub/$f; }; done",
             dir, dir, dir);
    T_EQ(cp_with_swap(dir, cmd, err, sizeof(err)), 1);
    T_NOTNULL(strstr(err, "replaced meanwhile"));
    T_EQ(run("rm -rf %s", dir), 0);
}

/* `railio cp -r LINK URL`, LINK a symbolic link to a directory named on
 * the command line, copies the directory (links beneath it are still not
 * followed): the walk took LINK for an entry to skip and copied nothing,
 * exit 0. */
TEST(cp_tree_from_a_linked_directory)
{
    char dir[] = "/tmp/rio-cp-XXXXXX";
    T_NOTNULL(mkdtemp(dir));
    T_EQ(run("mkdir -p %s/real/sub && printf one > %s/real/sub/f && printf two > %s/real/g && "
             "ln -s %s/real %s/link && ln -s /etc/hostname %s/real/inner",
             dir, dir, dir, dir, dir, dir),
         0);
    static const char *const forms[] = {"link", "link/"};
    for (int i = 0; i < 2; i++) {
        T_EQ(run("%s cp -r -q %s/%s file://%s/dst%d", cli_bin(), dir, forms[i], dir, i), 0);
        T_EQ(run("test \"$(cat %s/dst%d/sub/f %s/dst%d/g)\" = onetwo", dir, i, dir, i), 0);
        T_EQ(run("test $(find %s/dst%d -type f | wc -l) = 2", dir, i), 0); /* not inner */
    }
    T_EQ(run("rm -rf %s", dir), 0);
}

/* `railio cp -r` whose local side fails before any copy (a destination
 * directory that cannot be created, a source directory that is missing):
 * said as every failure is, with the exit status of its errno and the
 * JSON error object under --json. It was exit 1 whatever the cause (a
 * read-only destination is 4, a missing parent 3), in words of its own,
 * and no JSON at all. */
TEST(cp_tree_local_side_failures_said_as_errors)
{
    char dir[] = "/tmp/rio-cp-XXXXXX", out[4096];
    T_NOTNULL(mkdtemp(dir));
    T_EQ(run("mkdir -p %s/store/t && printf one > %s/f && %s put -q file://%s/store/t/f %s/f", dir,
             dir, cli_bin(), dir, dir),
         0);

    /* The destination's parent is missing: 3, not 1. */
    T_EQ(cli_run(out, sizeof(out), "cp -r --json file://%s/store/t %s/no/such/dst", dir, dir), 3);
    T_NOTNULL(strstr(out, "\"type\":\"error\""));
    T_NOTNULL(strstr(out, "\"doing\":\"creating directory\""));
    T_NOTNULL(strstr(out, "\"error\":\"ENOENT\""));
    T_NOTNULL(strstr(out, "\"exit\":3"));
    T_EQ(cli_run(out, sizeof(out), "cp -r file://%s/store/t %s/no/such/dst 2>&1", dir, dir), 3);
    T_NOTNULL(strstr(out, "railio cp: creating directory "));
    T_NOTNULL(strstr(out, "(ENOENT)"));
    /* A file where the destination directory should be. */
    T_EQ(cli_run(out, sizeof(out), "cp -r --json file://%s/store/t %s/f", dir, dir), 3);
    T_NOTNULL(strstr(out, "\"error\":\"ENOTDIR\""));
    T_EQ(run("test \"$(cat %s/f)\" = one", dir), 0);

    /* The source directory is missing: not found (3), not a usage error. */
    T_EQ(cli_run(out, sizeof(out), "cp -r --json %s/nodir file://%s/store/u/", dir, dir), 3);
    T_NOTNULL(strstr(out, "\"doing\":\"opening directory\""));
    T_NOTNULL(strstr(out, "\"exit\":3"));
    /* A source that is a file stays a usage error. */
    T_EQ(cli_run(NULL, 0, "cp -r %s/f file://%s/store/u/ 2>/dev/null", dir, dir), 2);
    T_EQ(run("rm -rf %s", dir), 0);
}

/* cp -r of a file whose key below the destination would be over 1024
 * bytes: refused by name with the reason (it was "invalid argument
 * (RIO_EINVAL)" and nothing more); the others still land. */
TEST(cp_tree_key_too_long_said_why)
{
    char dir[] = "/tmp/rio-cp-XXXXXX", out[8192], deep[1400];
    T_NOTNULL(mkdtemp(dir));
    size_t n = 0;
    for (int i = 0; i < 9; i++) { /* 9 x "/" + 120 'd': over 1024 with the file */
        deep[n++] = '/';
        memset(deep + n, 'd', 120);
        n += 120;
    }
    deep[n] = '\0';
    T_EQ(run("mkdir -p %s/src%s %s/store && printf x > %s/src%s/f && printf y > %s/src/g", dir,
             deep, dir, dir, deep, dir),
         0);
    T_EQ(cli_run(out, sizeof(out), "cp -r -q %s/src file://%s/store 2>&1", dir, dir), 1);
    T_NOTNULL(strstr(out, "its destination key would be empty or longer than 1024 bytes"));
    T_EQ(run("test \"$(cat %s/store/g)\" = y", dir), 0);
    T_EQ(run("rm -rf %s", dir), 0);
}
