/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS integration net */
/* T_TIMEOUT 240 */
/*
 * The S3 gateway over HTTPS (railiod --s3-tls-cert/--s3-tls-key,
 * docs/gateway.md "HTTPS"), with certificates made by the openssl command:
 * curl, the aws CLI (--ca-bundle, multipart), boto3 (verify=CA) and
 * railio's own s3:// client (ca_bundle=, AWS_CA_BUNDLE) move bytes that
 * compare exact; a client that trusts another CA, and one that speaks plain
 * HTTP to the port, fail at once; a key that is not the certificate's, a
 * file that is not there, one option without the other are refused at start
 * with a message naming them, never a key's bytes.
 */
#include <stdio.h>
#include <string.h>

#include "gw_util.h"
#include "pki_util.h"
#include "t.h"

#define AK "AKIATLSGATEWAY000001"
#define SK "tls/gateway/secret/0123456789abcdefghij"
#define SIGN                                                                                       \
    "--aws-sigv4 aws:amz:us-east-1:s3 -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' --user " AK ":" SK

static const char boto3_script[] =
    "import sys, boto3, botocore\n"
    "from botocore.config import Config\n"
    "from boto3.s3.transfer import TransferConfig\n"
    "url, ak, sk, d = sys.argv[1:5]\n"
    "def client(verify):\n"
    "    return boto3.client('s3', endpoint_url=url, aws_access_key_id=ak,\n"
    "        aws_secret_access_key=sk, region_name='us-east-1', verify=verify,\n"
    "        config=Config(s3={'addressing_style': 'path'}, retries={'max_attempts': 1}))\n"
    "s3 = client(d + '/ca.pem')\n"
    "s3.upload_file(d + '/big', 'tlsb', 'boto3', Config=TransferConfig(\n"
    "    multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024))\n"
    "s3.download_file('tlsb', 'boto3', d + '/boto3.back')\n"
    "assert open(d + '/boto3.back', 'rb').read() == open(d + '/big', 'rb').read()\n"
    "try:\n"
    "    client(d + '/other-ca.pem').list_objects_v2(Bucket='tlsb')\n"
    "    raise AssertionError('another CA was trusted')\n"
    "except botocore.exceptions.SSLError:\n"
    "    pass\n"
    "print('boto3 tls ok')\n";

TEST(https_clients)
{
    struct gw g;
    struct t_pki p;
    char keys[256], env[512], pkidir[256];
    const char *extra[] = {"--no-anon", "--s3-keys",    keys, "--s3-tls-cert",
                           NULL,        "--s3-tls-key", NULL, NULL};
    const char *rio = getenv("T_BUILD_DIR");

    snprintf(pkidir, sizeof(pkidir), "%s", t_scratch_dir("gwpki"));
    t_make_pki(pkidir, &p);
    extra[4] = p.cert;
    extra[6] = p.key;
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    gw_start(&g, NULL, extra);
    snprintf(g.url, sizeof(g.url), "https://%s", g.s3); /* gw_start wrote http:// */
    T_EQ(t_sh("cp %s %s %s/", p.ca, p.other_ca, g.dir), 0);
    gw_file(&g, "big", 11 * 1024 * 1024 + 7, 101);

    /* curl */
    T_EQ(gw_curl(&g, "o", "--cacert %s %s -X PUT %s/tlsb", p.ca, SIGN, g.url), 200);
    T_EQ(gw_curl(&g, "o", "--cacert %s %s -T %s %s/tlsb/curl", p.ca, SIGN, gw_path(&g, "big"),
                 g.url),
         200);
    T_EQ(gw_curl(&g, "back", "--cacert %s %s %s/tlsb/curl", p.ca, SIGN, g.url), 200);
    T_TRUE(gw_same(&g, "back", "big"));
    /* trusting another CA, or plain HTTP to the port: refused at once */
    T_EQ(gw_curl(&g, "o", "--cacert %s %s %s/tlsb/curl", p.other_ca, SIGN, g.url), -1);
    T_EQ(gw_curl(&g, "o", "-m 10 %s http://%s/tlsb/curl", SIGN, g.s3), -1);

    /* the aws CLI, multipart above 8 MiB */
    snprintf(env, sizeof(env), "AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s'", AK, SK);
    T_EQ(t_sh("printf '[default]\\ns3 =\\n    multipart_threshold = 8MB\\n"
              "    multipart_chunksize = 5MB\\n' > %s/awscfg",
              g.dir),
         0);
    T_EQ(gw_aws(&g, env, "o", "--ca-bundle %s s3 cp big s3://tlsb/aws", p.ca), 0);
    T_EQ(gw_aws(&g, env, "o", "--ca-bundle %s s3 cp s3://tlsb/aws aws.back", p.ca), 0);
    T_TRUE(gw_same(&g, "aws.back", "big"));
    T_EQ(gw_aws(&g, env, "o", "--ca-bundle %s s3api head-object --bucket tlsb --key aws", p.ca), 0);
    T_TRUE(gw_has(&g, "o", "-3\\\"\"")); /* three parts */
    T_NE(gw_aws(&g, env, "o", "--ca-bundle %s s3 ls s3://tlsb", p.other_ca), 0);
    T_TRUE(gw_has(&g, "o", "SSL") || gw_has(&g, "o", "certificate"));

    /* boto3 */
    if (t_sh("python3 -c 'import boto3' 2>/dev/null") == 0)
        gw_python(&g, boto3_script, AK, SK, "boto3 tls ok");

    /* railio's s3:// client (a build with libcurl): ca_bundle=, then
     * AWS_CA_BUNDLE */
    if (rio_has_scheme("s3")) {
        T_EQ(t_sh("cd %s && AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s' %s/railio put -q "
                  "'s3://tlsb/railio?endpoint=%s&ca_bundle=%s' big > o 2>&1 || { cat o >&2; exit "
                  "1; }",
                  g.dir, AK, SK, rio, g.url, p.ca),
             0);
        T_EQ(t_sh("cd %s && AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s' AWS_CA_BUNDLE=%s "
                  "%s/railio get -q 's3://tlsb/railio?endpoint=%s' railio.back > o 2>&1 || "
                  "{ cat o >&2; exit 1; }",
                  g.dir, AK, SK, p.ca, rio, g.url),
             0);
        T_TRUE(gw_same(&g, "railio.back", "big"));
        /* A certificate not trusted is RIO_ETLSVERIFY, exit 5 (unreachable),
         * as railio:// says it: it was RIO_EPROTO, exit 6 "verification
         * failed", as if the bytes had been bad. */
        T_EQ(t_sh("cd %s && AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s' AWS_CA_BUNDLE=%s "
                  "%s/railio get -q 's3://tlsb/railio?endpoint=%s' x > o 2>&1",
                  g.dir, AK, SK, p.other_ca, rio, g.url),
             5);
        T_TRUE(gw_has(&g, "o", "certificate"));
        T_TRUE(gw_has(&g, "o", "RIO_ETLSVERIFY"));
        T_EQ(t_sh("cd %s && AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s' %s/railio get -q "
                  "'s3://tlsb/railio?endpoint=%s&ca_bundle=/nonexistent/ca.pem' x > o 2>&1",
                  g.dir, AK, SK, rio, g.url),
             2);
        T_TRUE(gw_has(&g, "o", "ca_bundle /nonexistent/ca.pem: No such file or directory"));
    }
    gw_stop(&g);
    t_pki_remove(pkidir);
}

/* railiod with the given arguments after --s3-listen: its exit status
 * (within 10 s), its stderr in scratch file "err" of dir. */
static int start_fails(const char *dir, const char *args)
{
    char bin[512];

    srv_binary(bin, sizeof(bin));
    return t_sh("cd %s && timeout 10 %s --listen 127.0.0.1:0 --s3-listen 127.0.0.1:0 "
                "--s3-anonymous %s > out 2> err",
                dir, bin, args);
}

static int err_has(const char *dir, const char *needle)
{
    return t_sh("grep -qF -- '%s' %s/err", needle, dir) == 0;
}

TEST(refused_at_start)
{
    struct t_pki p;
    char dir[256], args[2048];

    gw_need();
    snprintf(dir, sizeof(dir), "%s", t_scratch_dir("gwtlsbad"));
    t_make_pki(dir, &p);
    snprintf(args, sizeof(args), "--s3-tls-cert %s", p.cert);
    T_EQ(start_fails(dir, args), 2);
    T_TRUE(err_has(dir, "--s3-tls-cert and --s3-tls-key go together"));
    /* the other CA's key is not the certificate's */
    snprintf(args, sizeof(args), "--s3-tls-cert %s --s3-tls-key %s", p.cert, p.other_key);
    T_NE(start_fails(dir, args), 0);
    T_TRUE(err_has(dir, "cannot load the private key") ||
           err_has(dir, "does not match the certificate"));
    T_FALSE(err_has(dir, "PRIVATE KEY"));
    snprintf(args, sizeof(args), "--s3-tls-cert %s/none.pem --s3-tls-key %s", dir, p.key);
    T_NE(start_fails(dir, args), 0);
    T_TRUE(err_has(dir, "none.pem"));
    /* a key where the certificate goes */
    snprintf(args, sizeof(args), "--s3-tls-cert %s --s3-tls-key %s", p.key, p.key);
    T_NE(start_fails(dir, args), 0);
    T_TRUE(err_has(dir, "cannot load the certificate"));
    T_FALSE(err_has(dir, "PRIVATE KEY"));
    /* without --s3-listen */
    {
        char bin[512];
        srv_binary(bin, sizeof(bin));
        T_EQ(t_sh("timeout 10 %s --listen 127.0.0.1:0 --s3-tls-cert %s --s3-tls-key %s 2> %s/err",
                  bin, p.cert, p.key, dir),
             2);
        T_TRUE(err_has(dir, "need --s3-listen"));
    }
    t_pki_remove(dir);
}
