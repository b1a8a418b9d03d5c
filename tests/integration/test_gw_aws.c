/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 240 */
/*
 * railiod's S3 gateway driven by the aws CLI (anonymous, path-style) over
 * the server's own store: s3 mb/cp/ls/sync/rm/rb and the s3api calls of
 * every operation the gateway implements; every byte compared.
 */
#include "gw_util.h"

#define aws(g, out, ...) gw_aws((g), "", (out), __VA_ARGS__)

TEST(aws_cli)
{
    struct gw g;

    if (t_sh("command -v aws >/dev/null") != 0)
        T_SKIP("the aws CLI is not installed");
    gw_start(&g, NULL, NULL);
    gw_file(&g, "f1", 6 * 1024 * 1024 + 17, 3);
    gw_file(&g, "f2", 1, 4);
    T_EQ(t_sh("mkdir -p %s/tree/sub && cp %s %s/tree/a && cp %s %s/tree/sub/b", g.dir,
              gw_path(&g, "f1"), g.dir, gw_path(&g, "f2"), g.dir),
         0);

    T_EQ(aws(&g, "o", "s3 mb s3://awsb"), 0);
    T_EQ(aws(&g, "o", "s3api head-bucket --bucket awsb"), 0);
    T_NE(aws(&g, "o", "s3api head-bucket --bucket nob"), 0);
    T_EQ(aws(&g, "o", "s3 ls"), 0);
    T_TRUE(gw_has(&g, "o", "awsb"));
    T_EQ(aws(&g, "o", "s3 cp f1 s3://awsb/x/f1"), 0);
    T_EQ(aws(&g, "o", "s3 cp s3://awsb/x/f1 back1"), 0);
    T_TRUE(gw_same(&g, "back1", "f1"));
    T_EQ(aws(&g, "o", "s3 sync tree s3://awsb/tree"), 0);
    T_EQ(aws(&g, "o", "s3 ls --recursive s3://awsb"), 0);
    T_TRUE(gw_has(&g, "o", "tree/sub/b"));
    T_TRUE(gw_has(&g, "o", "6291473 x/f1"));
    T_EQ(aws(&g, "o", "s3 sync s3://awsb/tree tree2"), 0);
    T_TRUE(gw_same(&g, "tree2/a", "f1"));
    T_TRUE(gw_same(&g, "tree2/sub/b", "f2"));

    /* s3api */
    T_EQ(aws(&g, "o", "s3api head-object --bucket awsb --key x/f1"), 0);
    T_TRUE(gw_has(&g, "o", "\"ContentLength\": 6291473"));
    T_EQ(aws(&g, "o", "s3api get-object --bucket awsb --key x/f1 --range bytes=100-199 part"), 0);
    T_EQ(
        t_sh("tail -c +101 %s | head -c 100 | cmp -s - %s", gw_path(&g, "f1"), gw_path(&g, "part")),
        0);
    T_EQ(aws(&g, "o",
             "s3api put-object --bucket awsb --key p/f2 --body f2 --content-md5 "
             "$(openssl dgst -md5 -binary f2 | base64)"),
         0);
    T_NE(aws(&g, "o",
             "s3api put-object --bucket awsb --key p/bad --body f2 --content-md5 "
             "AAAAAAAAAAAAAAAAAAAAAA=="),
         0);
    T_TRUE(gw_has(&g, "o", "BadDigest"));
    T_EQ(aws(&g, "o", "s3api list-objects-v2 --bucket awsb --prefix tree/ --delimiter /"), 0);
    T_TRUE(gw_has(&g, "o", "\"Prefix\": \"tree/sub/\""));
    T_TRUE(gw_has(&g, "o", "\"Key\": \"tree/a\""));
    T_EQ(aws(&g, "o", "s3api list-objects --bucket awsb --max-items 2"), 0);
    T_TRUE(gw_has(&g, "o", "NextToken"));
    T_EQ(aws(&g, "o", "s3api copy-object --bucket awsb --key c/f1 --copy-source awsb/x/f1"), 0);
    T_EQ(aws(&g, "o", "s3 cp s3://awsb/c/f1 back2"), 0);
    T_TRUE(gw_same(&g, "back2", "f1"));
    T_NE(aws(&g, "o", "s3api get-object --bucket awsb --key nothere out"), 0);
    T_TRUE(gw_has(&g, "o", "NoSuchKey"));
    T_NE(aws(&g, "o", "s3 rb s3://awsb"), 0);
    T_TRUE(gw_has(&g, "o", "BucketNotEmpty"));
    T_EQ(aws(&g, "o",
             "s3api delete-objects --bucket awsb --delete "
             "'Objects=[{Key=c/f1},{Key=p/f2}]'"),
         0);
    T_EQ(aws(&g, "o", "s3 rm --recursive s3://awsb"), 0);
    T_EQ(aws(&g, "o", "s3 ls --recursive s3://awsb"), 0);
    T_FALSE(gw_has(&g, "o", "f1"));
    T_EQ(aws(&g, "o", "s3 rb s3://awsb"), 0);
    T_EQ(aws(&g, "o", "s3 ls"), 0);
    T_FALSE(gw_has(&g, "o", "awsb"));
    gw_stop(&g);
}
