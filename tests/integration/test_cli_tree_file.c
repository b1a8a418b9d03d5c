/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS slow */
/* T_TIMEOUT 60 */
/*
 * railio ls, cat, rm (several keys, -r, wildcards) and cp -r through the
 * real binary against a file:// store root (a directory): one level and
 * wildcards, a tree of 1000 files copied both ways and prefix to prefix
 * with every byte compared (diff -r), rm -r that leaves siblings alone
 * (ls of 10,000 keys: test_cli_tree_paged.c).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>

#include "cli_tree_suite.h"

TEST(file_ls_one_level_and_wildcards)
{
    struct tb b;
    tb_file(&b, NULL);
    tb_ls_level(&b);
}

TEST(file_cat_and_rm_keys)
{
    struct tb b;
    tb_file(&b, NULL);
    tb_cat(&b);
}

TEST(file_cp_tree_both_ways)
{
    struct tb b;
    tb_file(&b, NULL);
    tb_cp_tree(&b, NULL);
}

/* cp -r of a prefix into a prefix beneath it on the same store would list
 * its own new keys: refused up front (exit 2, both named), nothing written;
 * a sibling prefix that only shares the leading characters is copied. */
TEST(file_cp_into_itself_refused)
{
    struct tb b;
    char u[2048], u2[2048];
    tb_file(&b, NULL);
    tb_need_list(&b);
    uint8_t data[100];
    t_fill_pattern(data, sizeof(data), 7);
    tb_put(&b, "a/x.bin", data, sizeof(data));
    tb_put(&b, "a/d/y.bin", data, sizeof(data));
    static const char *const into[][2] = {
        {"a", "a/b"}, {"a/", "a/b/"}, {"a", "a//b?paths=2"}, {"", "a/b"}, {"a", "a"}};
    for (size_t i = 0; i < sizeof(into) / sizeof(into[0]); i++) {
        T_EQ(tb_cli(&b, "cp -r '%s' '%s'", tb_url(&b, u, sizeof(u), into[i][0]),
                    tb_url(&b, u2, sizeof(u2), into[i][1])),
             2);
        T_EQ(t_sh("grep -q 'cannot copy .* into itself' %s/err", b.tmp), 0);
    }
    T_EQ(tb_cli(&b, "cp -r '%s' '%s'", tb_url(&b, u, sizeof(u), "a*"),
                tb_url(&b, u2, sizeof(u2), "ab")),
         2);
    T_EQ(t_sh("test $(find %s/store -type f | wc -l) -eq 2 && test ! -e %s/store/a/b && "
              "test ! -e %s/store/ab",
              b.tmp, b.tmp, b.tmp),
         0);
    /* "ab" is not beneath "a/": copied. */
    T_EQ(tb_cli(&b, "cp -r -q '%s' '%s'", tb_url(&b, u, sizeof(u), "a"),
                tb_url(&b, u2, sizeof(u2), "ab")),
         0);
    T_EQ(t_sh("cmp %s/store/a/d/y.bin %s/store/ab/d/y.bin", b.tmp, b.tmp), 0);
}

/* cp -r of a prefix into a directory writes each file through an unnamed
 * temporary file (O_TMPFILE) where the file system has it: killed with
 * SIGKILL while an object is on its way (its reads held back), it leaves
 * no temporary file behind. */
TEST(file_cp_tree_killed_leaves_no_temporary)
{
    struct tb b;
    char out[512];
    tb_file(&b, NULL);
    tb_need_list(&b);
    snprintf(out, sizeof(out), "%s/out", b.tmp);
    T_EQ(mkdir(out, 0755), 0);
    int fd = open(out, O_WRONLY | O_TMPFILE, 0600);
    if (fd < 0)
        T_SKIP("no O_TMPFILE in %s: errno %d", out, errno);
    close(fd);
    uint8_t data[100000];
    t_fill_pattern(data, sizeof(data), 3);
    tb_put(&b, "slow/obj", data, sizeof(data));
    /* $! is railio's pid: the SIGKILL is for it, not for a wrapper. */
    T_EQ(t_sh("%s cp -r -q '%s/slow?faults=delay:op=read:delay=5000' %s & "
              "pid=$!; found=0; for i in $(seq 1 1000); do if ls -l /proc/$pid/fd 2>/dev/null "
              "| grep -q %s/; then found=1; break; fi; sleep 0.01; done; ls -la %s > %s/during; "
              "kill -9 $pid; wait $pid; test $found = 1",
              cli_bin(), b.base, out, out, out, b.tmp),
         0);
    T_EQ(t_sh("cat %s/during >&2; ! grep -q railio-tmp %s/during", b.tmp, b.tmp), 0);
    T_EQ(t_sh("test -z \"$(ls -A %s)\"", out), 0);
}
