/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The CLI's wildcard matcher (src/cli/glob.c) and URL splitting of the
 * listing verbs (src/cli/tree.c's query start): what matches, what the list
 * prefix is, that '/' is crossed only when asked, and that a hostile pattern
 * costs linear time, not exponential.
 */
#include <string.h>

#include "cli/glob.c"
#include "t.h"
#include "tlib.h"

TEST(glob_matches)
{
    T_TRUE(rio_cli_glob_match("*.bin", "a.bin", false));
    T_FALSE(rio_cli_glob_match("*.bin", "a.bin2", false));
    T_TRUE(rio_cli_glob_match("dir/*.bin", "dir/x.bin", false));
    T_FALSE(rio_cli_glob_match("dir/*.bin", "dir/sub/x.bin", false));
    T_TRUE(rio_cli_glob_match("dir/*.bin", "dir/sub/x.bin", true));
    T_TRUE(rio_cli_glob_match("k?", "k1", false));
    T_FALSE(rio_cli_glob_match("k?", "k", false));
    T_FALSE(rio_cli_glob_match("k?", "k12", false));
    T_FALSE(rio_cli_glob_match("a?b", "a/b", false));
    T_TRUE(rio_cli_glob_match("a?b", "a/b", true));
    T_TRUE(rio_cli_glob_match("f[0-3]", "f2", false));
    T_FALSE(rio_cli_glob_match("f[0-3]", "f4", false));
    T_TRUE(rio_cli_glob_match("f[!0-3]", "f4", false));
    T_TRUE(rio_cli_glob_match("f[^0-3]", "fx", false));
    T_FALSE(rio_cli_glob_match("f[!0-3]", "f1", false));
    T_TRUE(rio_cli_glob_match("[]]x", "]x", false));
    T_TRUE(rio_cli_glob_match("[ab]*[cd]", "a--d", false));
    T_TRUE(rio_cli_glob_match("a\\*b", "a*b", false));
    T_FALSE(rio_cli_glob_match("a\\*b", "axb", false));
    T_TRUE(rio_cli_glob_match("a\\?", "a?", false));
    T_FALSE(rio_cli_glob_match("a\\?", "ab", false));
    T_TRUE(rio_cli_glob_match("x[", "x[", false)); /* an unclosed '[' is literal */
    T_TRUE(rio_cli_glob_match("*", "", false));
    T_TRUE(rio_cli_glob_match("**", "abc", false));
    T_FALSE(rio_cli_glob_match("", "a", false));
    T_TRUE(rio_cli_glob_match("*a*b*c", "xxaxxbxxc", false));
    T_FALSE(rio_cli_glob_match("*a*b*c", "xxaxxbxx", false));
}

TEST(glob_prefix_and_first)
{
    char p[64];
    T_EQ(rio_cli_glob_prefix("dir/k*.bin", p, sizeof(p)), 5u);
    T_STREQ(p, "dir/k");
    T_EQ(rio_cli_glob_prefix("a\\*b?", p, sizeof(p)), 3u);
    T_STREQ(p, "a*b");
    T_EQ(rio_cli_glob_prefix("plain", p, sizeof(p)), 5u);
    T_STREQ(p, "plain");
    T_EQ(rio_cli_glob_prefix("x[", p, sizeof(p)), 2u);
    T_NULL(rio_cli_glob_first("x["));
    T_NULL(rio_cli_glob_first("a\\*"));
    const char *s = "d/[ab]";
    T_PTREQ(rio_cli_glob_first(s), s + 2);
    T_EQ(rio_cli_glob_prefix("abcdef*", p, 4), 6u); /* truncated, full length returned */
    T_STREQ(p, "abc");
}

/* a*a*a*...*b against aaaa...a: a backtracking matcher takes exponential
 * time; this one stays well inside the test's timeout. */
TEST(glob_hostile_pattern_is_linear)
{
    char pat[256], key[1025];
    size_t n = 0;
    for (int i = 0; i < 60; i++) {
        pat[n++] = 'a';
        pat[n++] = '*';
    }
    pat[n++] = 'b';
    pat[n] = '\0';
    memset(key, 'a', 1024);
    key[1024] = '\0';
    uint64_t t0 = t_now_ns();
    T_FALSE(rio_cli_glob_match(pat, key, true));
    T_LT(t_now_ns() - t0, 2000000000ull);
}
