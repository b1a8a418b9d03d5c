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
