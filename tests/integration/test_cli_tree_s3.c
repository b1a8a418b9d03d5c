/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 240 */
/* T_LABELS net;ceph;slow */
/*
 * railio ls, cat, rm and cp -r through the real binary against s3://
 * (radosgw on the harness Ceph cluster; skipped with 77 when Ceph is not
 * installed or the build has no libcurl): the suite of cli_tree_suite.h,
 * every key under a prefix of this process, cp -r prefix to prefix into a
 * file:// store.
 */
#include "t.h"

#ifndef RIO_HAVE_CURL
TEST(s3_not_built)
{
    T_SKIP("built without libcurl (RIO_WITH_CURL)");
}
#else

#define SU_WITH_RGW
#include "cli_tree_suite.h"
#include "s3_util.h"

#define BUCKET "rio"

static void s3_tb(struct tb *b)
{
    const char *ep = su_rgw(BUCKET);
    memset(b, 0, sizeof(*b));
    snprintf(b->base, sizeof(b->base), "s3://" BUCKET);
    snprintf(b->q, sizeof(b->q), "?endpoint=%s", ep);
    snprintf(b->kp, sizeof(b->kp), "clitree-%d/", (int)getpid());
    b->keep_10k = true; /* the cluster is this program's own */
    b->jobs = 32;       /* radosgw answers each small GET slowly: keep many in flight */
    snprintf(b->tmp, sizeof(b->tmp), "%s", t_scratch_dir("rio-clitree-s3"));
}

TEST(s3_ls_10000_paged)
{
    struct tb b;
    s3_tb(&b);
    tb_ls_10000(&b);
}

TEST(s3_ls_one_level_and_wildcards)
{
    struct tb b;
    s3_tb(&b);
    tb_ls_level(&b);
}

TEST(s3_cat_and_rm_keys)
{
    struct tb b;
    s3_tb(&b);
    tb_cat(&b);
}

TEST(s3_cp_tree_both_ways_and_to_file)
{
    struct tb b, f;
    s3_tb(&b);
    tb_file(&f, b.tmp);
    tb_cp_tree(&b, &f);
}

#endif
