/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net;slow */
/* T_TIMEOUT 60 */
/*
 * railio ls of 10,000 keys through the real binary, in pages of 1000 (the
 * binary says how many pages it fetched: at least ten) and of 999 with
 * --json, a wildcard over them, and rm -r of them all, against a railiod
 * the test starts and against a file:// store root.
 */
#include "cli_tree_suite.h"
#include "server_env.h"

TEST(railiod_ls_10000_paged)
{
    struct srv_env srv;
    struct tb b;
    srv_start(&srv, (const char *const[]){"--memory", "256M", NULL});
    memset(&b, 0, sizeof(b));
    snprintf(b.base, sizeof(b.base), "railio://%s", srv.addr[0]);
    snprintf(b.tmp, sizeof(b.tmp), "%s", t_scratch_dir("rio-clitree"));
    tb_ls_10000(&b);
    T_EQ(srv_stop(&srv), 0);
}

TEST(file_ls_10000_paged)
{
    struct tb b;
    tb_file(&b, NULL);
    tb_ls_10000(&b);
}
