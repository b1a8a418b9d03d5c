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
