/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 240 */
/*
 * railiod's S3 gateway with --s3-keys: the aws CLI and curl --aws-sigv4
 * sign their requests (signed payloads over http), presigned URLs (valid and
 * expired), users limited to their buckets, anonymous access to the bucket
 * the keys file opens only, and every refusal with its S3 error: wrong
 * secret, unknown key, a body that is not what its signed hash says
 * (nothing published).
 */
#include "gw_util.h"

#define AK1 "AKGWTEST1"
#define SK1 "secret-one/abcdefghij"
#define AK2 "AKGWTEST2"
#define SK2 "secret-two+klmnopqrst"

/* The aws CLI as user ak. */
static int aws_as(struct gw *g, const char *ak, const char *sk, const char *out, const char *args)
{
    char env[256];

    snprintf(env, sizeof(env), "AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s'", ak, sk);
    return gw_aws(g, env, out, "%s", args);
}

TEST(signed_requests)
{
    struct gw g;
    char keys[256], presigned[4096];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    if (t_sh("command -v aws >/dev/null") != 0)
        T_SKIP("the aws CLI is not installed");
    snprintf(keys, sizeof(keys), "%s/keys", t_scratch_dir("gwkeys"));
    {
        const char *text = AK1 " " SK1 " *\n" AK2 " " SK2 " onlyb\n* - pub\n";
        t_write_file(keys, text, strlen(text));
        T_EQ(chmod(keys, 0600), 0);
    }
    gw_start(&g, NULL, extra);
    gw_file(&g, "f", 2 * 1024 * 1024 + 9, 7);

    /* The aws CLI, signed: buckets, PUT (signed payload hash), GET, list, delete. */
    T_EQ(aws_as(&g, AK1, SK1, "o", "s3 mb s3://sigb"), 0);
    T_EQ(aws_as(&g, AK1, SK1, "o", "s3 mb s3://onlyb"), 0);
    T_EQ(aws_as(&g, AK1, SK1, "o", "s3 mb s3://pub"), 0);
    T_EQ(aws_as(&g, AK1, SK1, "o", "s3 cp f s3://sigb/d/f"), 0);
    T_EQ(aws_as(&g, AK1, SK1, "o", "s3 cp s3://sigb/d/f back"), 0);
    T_TRUE(gw_same(&g, "back", "f"));
    T_EQ(aws_as(&g, AK1, SK1, "o", "s3api list-objects-v2 --bucket sigb --prefix 'd/'"), 0);
    T_TRUE(gw_has(&g, "o", "\"Key\": \"d/f\""));
    T_EQ(aws_as(&g, AK1, SK1, "o",
                "s3api delete-objects --bucket sigb --delete "
                "'Objects=[{Key=none1},{Key=none2}]'"),
         0);

    /* Refusals */
    T_NE(aws_as(&g, AK1, "wrong-secret", "o", "s3 ls s3://sigb"), 0);
    T_TRUE(gw_has(&g, "o", "SignatureDoesNotMatch"));
    T_NE(aws_as(&g, "AKNOBODY", SK1, "o", "s3 ls s3://sigb"), 0);
    T_TRUE(gw_has(&g, "o", "InvalidAccessKeyId"));
    T_NE(aws_as(&g, AK2, SK2, "o", "s3 ls s3://sigb"), 0);
    T_TRUE(gw_has(&g, "o", "AccessDenied"));
    T_EQ(aws_as(&g, AK2, SK2, "o", "s3 cp f s3://onlyb/f"), 0);
    T_EQ(aws_as(&g, AK2, SK2, "o", "s3 ls"), 0);
    T_TRUE(gw_has(&g, "o", "onlyb"));
    T_FALSE(gw_has(&g, "o", "sigb")); /* ListBuckets shows a user's buckets only */

    /* Anonymous: only where the keys file says (* - pub). */
    T_EQ(gw_curl(&g, "o", "%s/sigb/d/f", g.url), 403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    T_EQ(gw_curl(&g, "o", "-T %s %s/pub/anon", gw_path(&g, "f"), g.url), 200);
    T_EQ(gw_curl(&g, "got", "%s/pub/anon", g.url), 200);
    T_TRUE(gw_same(&g, "got", "f"));

    /* Presigned URLs: valid, then expired. */
    T_EQ(aws_as(&g, AK1, SK1, "url", "s3 presign s3://sigb/d/f --expires-in 300"), 0);
    {
        size_t n = 0;
        char *u = (char *)t_slurp(gw_path(&g, "url"), &n);
        snprintf(presigned, sizeof(presigned), "%.*s", (int)strcspn(u, "\n"), u);
        free(u);
    }
    T_EQ(gw_curl(&g, "got", "'%s'", presigned), 200);
    T_TRUE(gw_same(&g, "got", "f"));
    T_EQ(aws_as(&g, AK1, SK1, "url", "s3 presign s3://sigb/d/f --expires-in 1"), 0);
    {
        size_t n = 0;
        char *u = (char *)t_slurp(gw_path(&g, "url"), &n);
        snprintf(presigned, sizeof(presigned), "%.*s", (int)strcspn(u, "\n"), u);
        free(u);
    }
    t_sleep_ms(2500);
    T_EQ(gw_curl(&g, "o", "'%s'", presigned), 403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    /* A presigned URL's signature bound to its key. */
    {
        char *k = strstr(presigned, "/d/f?");
        T_NOTNULL(k);
        k[3] = 'g';
        T_EQ(gw_curl(&g, "o", "'%s'", presigned), 403);
    }

    /* curl --aws-sigv4: signed, unsigned body; then a body that is not what
     * its signed hash says: refused, nothing published. */
    T_EQ(gw_curl(&g, "o", "--aws-sigv4 aws:amz:us-east-1:s3 --user '%s:%s' -T %s %s/sigb/c", AK1,
                 SK1, gw_path(&g, "f"), g.url),
         200);
    T_EQ(gw_curl(&g, "got", "--aws-sigv4 aws:amz:us-east-1:s3 --user '%s:%s' %s/sigb/c", AK1, SK1,
                 g.url),
         200);
    T_TRUE(gw_same(&g, "got", "f"));
    gw_file(&g, "other", 2 * 1024 * 1024 + 9, 8);
    T_EQ(gw_curl(&g, "o",
                 "--aws-sigv4 aws:amz:us-east-1:s3 --user '%s:%s' "
                 "-H \"x-amz-content-sha256: $(sha256sum %s | cut -c1-64)\" -T %s %s/sigb/t",
                 AK1, SK1, gw_path(&g, "f"), gw_path(&g, "other"), g.url),
         400);
    T_TRUE(gw_has(&g, "o", "XAmzContentSHA256Mismatch"));
    T_EQ(gw_curl(&g, "o", "--aws-sigv4 aws:amz:us-east-1:s3 --user '%s:%s' -I %s/sigb/t", AK1, SK1,
                 g.url),
         404);
    /* The same with the right hash: published. */
    T_EQ(gw_curl(&g, "o",
                 "--aws-sigv4 aws:amz:us-east-1:s3 --user '%s:%s' "
                 "-H \"x-amz-content-sha256: $(sha256sum %s | cut -c1-64)\" -T %s %s/sigb/t",
                 AK1, SK1, gw_path(&g, "other"), gw_path(&g, "other"), g.url),
         200);
    gw_stop(&g);
}
