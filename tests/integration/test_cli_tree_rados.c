/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 120 */
/* T_LABELS net;ceph;slow */
/*
 * railio ls, cat, rm and cp -r through the real binary against rados://
 * (the harness Ceph cluster; skipped with 77 when Ceph is not
 * installed or the build has no librados): the suite of cli_tree_suite.h,
 * every key under a prefix of this process, cp -r prefix to prefix into a
 * file:// store.
 */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(rados_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS "--osds 1 --pool rio"
#include "cli_tree_suite.h"
#include "rados_util.h"

static void rados_tb(struct tb *b)
{
    memset(b, 0, sizeof(*b));
    ru_url(b->base, sizeof(b->base), "rio", NULL);
    char *q = strchr(b->base, '?');
    snprintf(b->q, sizeof(b->q), "%s", q);
    *q = '\0';
    snprintf(b->kp, sizeof(b->kp), "clitree-%d/", (int)getpid());
    b->keep_10k = true; /* the cluster is this program's own */
    snprintf(b->tmp, sizeof(b->tmp), "%s", t_scratch_dir("rio-clitree-rados"));
}

TEST(rados_ls_10000_paged)
{
    struct tb b;
    rados_tb(&b);
    tb_ls_10000(&b);
}

TEST(rados_ls_one_level_and_wildcards)
{
    struct tb b;
    rados_tb(&b);
    tb_ls_level(&b);
}

TEST(rados_cat_and_rm_keys)
{
    struct tb b;
    rados_tb(&b);
    tb_cat(&b);
}

TEST(rados_cp_tree_both_ways_and_to_file)
{
    struct tb b, f;
    rados_tb(&b);
    tb_file(&f, b.tmp);
    tb_cp_tree(&b, &f);
}

#endif
