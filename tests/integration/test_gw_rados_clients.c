/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 400 */
/* T_LABELS net;ceph */
/*
 * The S3 clients people use, against two gateways over one RADOS pool on a
 * single-host Ceph cluster (tests/harness/ceph.sh), with --s3-keys (no
 * anonymous access): what one client writes through gateway a, another
 * reads, lists and deletes through gateway b, every byte compared. The aws
 * CLI (s3 mb, cp single and multipart, sync both ways, ls, rm, rb; s3api
 * head-object, ranged and partNumber get-object, put-object with
 * Content-MD5, list-objects-v2 with a delimiter, copy-object,
 * delete-objects, the multipart calls one by one across both gateways),
 * s3cmd, rclone, boto3 (and a form of its generate_presigned_post, POSTed
 * by curl: a POST upload) and curl --aws-sigv4; a wrong secret, an unknown
 * key, an expired presigned URL and a body that is not the signed one are
 * refused with S3's codes. The same clients over the server's own store:
 * test_gw_aws.c, test_gw_clients.c, test_gw_auth.c.
 */
#include "t.h"

#ifndef RIO_HAVE_RADOS
TEST(gw_rados_clients_not_built)
{
    T_SKIP("built without librados (RIO_WITH_RADOS)");
}
#else

#define T_CEPH_ARGS "--osds 1 --pool rio"
#include "ceph_env.h"
#include "gw_util.h"
#include "rados_util.h"

#define AK "AKRADOSCLIENTS"
#define SK "rados-clients-secret/42"
#define CRED "AWS_ACCESS_KEY_ID=" AK " AWS_SECRET_ACCESS_KEY=" SK
#define SIGV4 "--aws-sigv4 aws:amz:us-east-1:s3 --user '" AK ":" SK "' "

/* The aws CLI through gateway g, signed, in a's scratch directory (both
 * gateways share it); cfg: "" or "mp" (5 MiB parts above 8 MB). */
static int aws(struct gw *g, const char *cfg, const char *out, const char *args)
{
    char env[512];

    snprintf(env, sizeof(env), CRED "%s%s%s", *cfg ? " AWS_CONFIG_FILE=" : "", *cfg ? g->dir : "",
             *cfg ? "/mpcfg" : "");
    return gw_aws(g, env, out, "%s", args);
}

/* CreateMultipartUpload of rcb/key through g: its id. */
static void create_upload(struct gw *g, const char *key, char *id, size_t cap)
{
    char cmd[256];
    size_t n = 0;
    char *t;

    snprintf(cmd, sizeof(cmd), "s3api create-multipart-upload --bucket rcb --key %s", key);
    T_EQ(aws(g, "", "c", cmd), 0);
    T_EQ(t_sh("python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[\"UploadId\"], "
              "end=\"\")' %s > %s",
              gw_path(g, "c"), gw_path(g, "id")),
         0);
    t = (char *)t_slurp(gw_path(g, "id"), &n);
    T_TRUE(t && n == 32);
    snprintf(id, cap, "%.*s", (int)n, t);
    free(t);
}

static const char boto_py[] =
    "import boto3, botocore, hashlib, sys, time, urllib.request\n"
    "from botocore.config import Config\n"
    "from botocore.awsrequest import AWSRequest\n"
    "a, b, ak, sk, d = sys.argv[1:6]\n"
    "cfg = Config(signature_version='s3v4', s3={'addressing_style': 'path'},\n"
    "             retries={'max_attempts': 1})\n"
    "def client(ep, secret=sk, key=ak):\n"
    "    return boto3.client('s3', endpoint_url=ep, aws_access_key_id=key,\n"
    "        aws_secret_access_key=secret, region_name='us-east-1', config=cfg)\n"
    "ca, cb = client(a), client(b)\n"
    "def code(f):\n"
    "    try:\n"
    "        f(); return 'OK'\n"
    "    except botocore.exceptions.ClientError as e:\n"
    "        return e.response['Error']['Code']\n"
    "body = open(d + '/f1', 'rb').read()\n"
    "r = ca.put_object(Bucket='rcb', Key='boto/one', Body=body, Metadata={'run': 'r7'},\n"
    "    ContentType='text/csv')\n"
    "h = cb.head_object(Bucket='rcb', Key='boto/one')\n"
    "assert h['ETag'] == r['ETag'] and h['Metadata'] == {'run': 'r7'}, h\n"
    "assert h['ContentType'] == 'text/csv', h\n"
    "assert cb.get_object(Bucket='rcb', Key='boto/one')['Body'].read() == body\n"
    "from boto3.s3.transfer import TransferConfig\n"
    "t = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)\n"
    "cb.upload_file(d + '/big', 'rcb', 'boto/big', Config=t)\n"
    "ca.download_file('rcb', 'boto/big', d + '/boto_big', Config=t)\n"
    "assert open(d + '/boto_big', 'rb').read() == open(d + '/big', 'rb').read()\n"
    "import subprocess\n"
    "pp = ca.generate_presigned_post('rcb', 'boto/form/${filename}',\n"
    "    Fields={'x-amz-meta-via': 'form'}, Conditions=[{'x-amz-meta-via': 'form'},\n"
    "    ['content-length-range', 1, 64 << 20]], ExpiresIn=60)\n"
    "args = ['curl', '-s', '-o', '/dev/null', '-w', '%{http_code}']\n"
    "for k, v in pp['fields'].items():\n"
    "    args += ['--form-string', k + '=' + v]\n"
    "args += ['-F', 'file=@' + d + '/big', pp['url']]\n"
    "st = subprocess.run(args, capture_output=True, text=True, check=True).stdout\n"
    "assert st == '204', st\n"
    "fo = cb.get_object(Bucket='rcb', Key='boto/form/big')\n"
    "assert fo['Body'].read() == open(d + '/big', 'rb').read() and fo['Metadata'] == {'via': "
    "'form'}\n"
    "url = cb.generate_presigned_url('get_object', Params={'Bucket': 'rcb', 'Key': 'boto/one'},\n"
    "    ExpiresIn=60)\n"
    "assert urllib.request.urlopen(url).read() == body, 'presigned'\n"
    "old = ca.generate_presigned_url('get_object', Params={'Bucket': 'rcb', 'Key': 'boto/one'},\n"
    "    ExpiresIn=1)\n"
    "print('wrong', code(lambda: client(a, sk + 'x').head_object(Bucket='rcb', Key='boto/one')))\n"
    "print('unknown', code(lambda: client(b, key='NOSUCHKEY').list_objects_v2(Bucket='rcb')))\n"
    "req = AWSRequest('PUT', a + '/rcb/boto/tampered', data=b'good body',\n"
    "    headers={'x-amz-content-sha256': hashlib.sha256(b'good body').hexdigest()})\n"
    "botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(ak, sk), 's3',\n"
    "    'us-east-1').add_auth(req)\n"
    "p = req.prepare()\n"
    "try:\n"
    "    urllib.request.urlopen(urllib.request.Request(p.url, data=b'evil body', method='PUT',\n"
    "        headers=dict(p.headers)))\n"
    "    print('tampered OK')\n"
    "except urllib.error.HTTPError as e:\n"
    "    print('tampered', e.code, b'XAmzContentSHA256Mismatch' in e.read())\n"
    "print('after', code(lambda: cb.head_object(Bucket='rcb', Key='boto/tampered')))\n"
    "time.sleep(2.1)\n"
    "try:\n"
    "    urllib.request.urlopen(old); print('expired OK')\n"
    "except urllib.error.HTTPError as e:\n"
    "    print('expired', e.code)\n"
    "r = cb.delete_objects(Bucket='rcb', Delete={'Objects': [{'Key': 'boto/one'},\n"
    "    {'Key': 'boto/big'}, {'Key': 'boto/form/big'}]})\n"
    "assert len(r['Deleted']) == 3, r\n"
    "assert 'Contents' not in ca.list_objects_v2(Bucket='rcb', Prefix='boto/'), 'deleted'\n"
    "print('boto3 ok')\n";

TEST(clients_through_two_gateways)
{
    static const char cors_json[] = "{\"CORSRules\": [{\"AllowedOrigins\": [\"https://app.test\"], "
                                    "\"AllowedMethods\": [\"PUT\"]}]}";
    struct gw a, b;
    char url[1024], keys[256], cmd[1024], id[64];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};
    const char *text = AK " " SK " *\n";

    gw_need();
    if (t_sh("command -v aws >/dev/null && command -v s3cmd >/dev/null && "
             "command -v rclone >/dev/null && python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("the aws CLI, s3cmd, rclone or boto3 is not installed");
    snprintf(keys, sizeof(keys), "%s/keys", t_scratch_dir("gwrckeys"));
    t_write_file(keys, text, strlen(text));
    T_EQ(chmod(keys, 0600), 0);
    ru_url(url, sizeof(url), "rio", NULL);
    gw_start(&a, url, extra);
    gw_start(&b, url, extra);
    snprintf(b.dir, sizeof(b.dir), "%s", a.dir); /* one scratch directory */
    T_EQ(t_sh("printf '[default]\\ns3 =\\n    multipart_threshold = 8MB\\n"
              "    multipart_chunksize = 5MB\\n' > %s/mpcfg",
              a.dir),
         0);
    gw_file(&a, "f1", 6 * 1024 * 1024 + 17, 3);
    gw_file(&a, "big", 23 * 1000 * 1000 + 11, 9); /* five parts of 5 MiB at most */
    gw_file(&a, "f2", 1, 4);
    T_EQ(t_sh("mkdir -p %s/tree/sub && cp %s %s/tree/a && cp %s %s/tree/sub/b", a.dir,
              gw_path(&a, "f1"), a.dir, gw_path(&a, "f2"), a.dir),
         0);

    /* aws s3: written through a, read through b. */
    T_EQ(aws(&a, "", "o", "s3 mb s3://rcb"), 0);
    T_EQ(aws(&b, "", "o", "s3 ls"), 0);
    T_TRUE(gw_has(&a, "o", "rcb"));
    T_EQ(aws(&a, "", "o", "s3 cp f1 s3://rcb/x/f1"), 0);
    T_EQ(aws(&a, "mp", "o", "s3 cp big s3://rcb/x/big"), 0);
    T_EQ(aws(&a, "", "o", "s3 sync tree s3://rcb/tree"), 0);
    T_EQ(aws(&b, "", "o", "s3 ls --recursive s3://rcb"), 0);
    T_TRUE(gw_has(&a, "o", "6291473 x/f1"));
    T_TRUE(gw_has(&a, "o", "tree/sub/b"));
    T_EQ(aws(&b, "", "o", "s3 cp s3://rcb/x/f1 back1"), 0);
    T_TRUE(gw_same(&a, "back1", "f1"));
    T_EQ(aws(&b, "mp", "o", "s3 cp s3://rcb/x/big backbig"), 0);
    T_TRUE(gw_same(&a, "backbig", "big"));
    T_EQ(aws(&b, "", "o", "s3 sync s3://rcb/tree tree2"), 0);
    T_TRUE(gw_same(&a, "tree2/a", "f1"));
    T_TRUE(gw_same(&a, "tree2/sub/b", "f2"));

    /* aws s3api, across the two. */
    T_EQ(aws(&b, "", "o", "s3api head-object --bucket rcb --key x/big"), 0);
    T_TRUE(gw_has(&a, "o", "-5\\\"\""));
    T_EQ(aws(&b, "", "o", "s3api get-object --bucket rcb --key x/f1 --range bytes=100-199 part"),
         0);
    T_TRUE(gw_range_is(&a, "part", "f1", 100, 100));
    T_EQ(aws(&a, "", "o", "s3api get-object --bucket rcb --key x/big --part-number 2 part"), 0);
    T_TRUE(gw_range_is(&a, "part", "big", 5242880, 5242880));
    T_EQ(aws(&a, "", "o",
             "s3api put-object --bucket rcb --key p/f2 --body f2 --content-md5 "
             "$(openssl dgst -md5 -binary f2 | base64)"),
         0);
    T_NE(aws(&a, "", "o",
             "s3api put-object --bucket rcb --key p/bad --body f2 --content-md5 "
             "AAAAAAAAAAAAAAAAAAAAAA=="),
         0);
    T_TRUE(gw_has(&a, "o", "BadDigest"));
    T_EQ(aws(&b, "", "o", "s3api head-object --bucket rcb --key p/f2"), 0);
    T_NE(aws(&b, "", "o", "s3api head-object --bucket rcb --key p/bad"), 0);
    T_EQ(aws(&b, "", "o", "s3api list-objects-v2 --bucket rcb --prefix tree/ --delimiter /"), 0);
    T_TRUE(gw_has(&a, "o", "\"Prefix\": \"tree/sub/\""));
    T_TRUE(gw_has(&a, "o", "\"Key\": \"tree/a\""));
    T_EQ(aws(&a, "", "o", "s3api copy-object --bucket rcb --key c/f1 --copy-source rcb/x/f1"), 0);
    T_EQ(aws(&b, "", "o", "s3 cp s3://rcb/c/f1 back2"), 0);
    T_TRUE(gw_same(&a, "back2", "f1"));
    /* A bucket's CORS rules set through a apply through b, and deleted
     * through b no longer through a. */
    t_write_file(gw_path(&a, "cors.json"), cors_json, strlen(cors_json));
    T_EQ(aws(&a, "", "o",
             "s3api put-bucket-cors --bucket rcb --cors-configuration file://cors.json"),
         0);
    T_EQ(gw_curl(&b, "o",
                 "-X OPTIONS -H 'Origin: https://app.test' -H 'Access-Control-Request-Method: PUT' "
                 "%s/rcb/x/f1",
                 b.url),
         200);
    T_TRUE(gw_has(&a, "o.h", "Access-Control-Allow-Origin: https://app.test"));
    T_EQ(aws(&b, "", "o", "s3api delete-bucket-cors --bucket rcb"), 0);
    T_EQ(gw_curl(&a, "o",
                 "-X OPTIONS -H 'Origin: https://app.test' -H 'Access-Control-Request-Method: PUT' "
                 "%s/rcb/x/f1",
                 a.url),
         403);
    /* Tags put through a are read through b. */
    T_EQ(aws(&a, "", "o",
             "s3api put-object-tagging --bucket rcb --key x/f1 --tagging "
             "'TagSet=[{Key=k,Value=v}]'"),
         0);
    T_EQ(aws(&b, "", "o", "s3api get-object-tagging --bucket rcb --key x/f1 --output text"), 0);
    T_TRUE(gw_has(&a, "o", "k\tv"));
    /* Multipart one call at a time, every other call through the other. */
    create_upload(&a, "m/k", id, sizeof(id));
    T_EQ(t_sh("head -c 5242880 %s > %s && tail -c +5242881 %s > %s", gw_path(&a, "f1"),
              gw_path(&a, "m1"), gw_path(&a, "f1"), gw_path(&a, "m2")),
         0);
    snprintf(cmd, sizeof(cmd),
             "s3api upload-part --bucket rcb --key m/k --upload-id %s --part-number 1 --body m1",
             id);
    T_EQ(aws(&b, "", "o", cmd), 0);
    snprintf(cmd, sizeof(cmd),
             "s3api upload-part --bucket rcb --key m/k --upload-id %s --part-number 2 --body m2",
             id);
    T_EQ(aws(&a, "", "o", cmd), 0);
    snprintf(cmd, sizeof(cmd), "s3api list-parts --bucket rcb --key m/k --upload-id %s", id);
    T_EQ(aws(&b, "", "o", cmd), 0);
    T_TRUE(gw_has(&a, "o", "\"PartNumber\": 2"));
    T_EQ(aws(&a, "", "o", "s3api list-multipart-uploads --bucket rcb --prefix m/"), 0);
    T_TRUE(gw_has(&a, "o", id));
    T_EQ(t_sh("printf '{\"Parts\":[{\"PartNumber\":1,\"ETag\":\"'$(md5sum %s | cut -c1-32)'\"},"
              "{\"PartNumber\":2,\"ETag\":\"'$(md5sum %s | cut -c1-32)'\"}]}' > %s",
              gw_path(&a, "m1"), gw_path(&a, "m2"), gw_path(&a, "parts.json")),
         0);
    snprintf(cmd, sizeof(cmd),
             "s3api complete-multipart-upload --bucket rcb --key m/k --upload-id %s "
             "--multipart-upload file://parts.json",
             id);
    T_EQ(aws(&b, "", "o", cmd), 0);
    T_EQ(aws(&a, "", "o", "s3 cp s3://rcb/m/k backm"), 0);
    T_TRUE(gw_same(&a, "backm", "f1"));
    create_upload(&a, "m/gone", id, sizeof(id));
    snprintf(cmd, sizeof(cmd),
             "s3api abort-multipart-upload --bucket rcb --key m/gone --upload-id %s", id);
    T_EQ(aws(&b, "", "o", cmd), 0);
    T_EQ(aws(&a, "", "o", "s3api list-multipart-uploads --bucket rcb"), 0);
    T_FALSE(gw_has(&a, "o", id));

    /* s3cmd through b, what the aws CLI wrote through a and back. */
    T_EQ(t_sh("printf '[default]\\naccess_key = %s\\nsecret_key = %s\\nhost_base = %s\\n"
              "host_bucket = %s\\nuse_https = False\\nsignature_v2 = False\\n"
              "bucket_location = us-east-1\\n' > %s/s3cfg",
              AK, SK, b.s3, b.s3, a.dir),
         0);
#define S3CMD "cd %s && s3cmd -c s3cfg --no-progress "
    T_EQ(t_sh(S3CMD "get s3://rcb/x/big cmdbig > out 2>&1", a.dir), 0);
    T_TRUE(gw_same(&a, "cmdbig", "big"));
    T_EQ(t_sh(S3CMD "put big s3://rcb/s3cmd/big > out 2>&1", a.dir), 0);
#undef S3CMD
    T_EQ(aws(&a, "", "o", "s3 cp s3://rcb/s3cmd/big cmdback"), 0);
    T_TRUE(gw_same(&a, "cmdback", "big"));

    /* rclone: copy through a, check and copy back through b. */
    {
        char env[512];
        const char *rc =
            "env -u AWS_CA_BUNDLE RCLONE_CONFIG=/dev/null "
            "RCLONE_CONFIG_%s_TYPE=s3 RCLONE_CONFIG_%s_PROVIDER=Other "
            "RCLONE_CONFIG_%s_ACCESS_KEY_ID=" AK " RCLONE_CONFIG_%s_SECRET_ACCESS_KEY='" SK "' "
            "RCLONE_CONFIG_%s_ENDPOINT=%s RCLONE_CONFIG_%s_FORCE_PATH_STYLE=true ";
        snprintf(env, sizeof(env), rc, "GA", "GA", "GA", "GA", "GA", a.url, "GA");
        snprintf(cmd, sizeof(cmd), rc, "GB", "GB", "GB", "GB", "GB", b.url, "GB");
        T_EQ(t_sh("cd %s && %s rclone copy tree ga:rcb/rc > out 2>&1", a.dir, env), 0);
        T_EQ(t_sh("cd %s && %s rclone check tree gb:rcb/rc > out 2>&1", a.dir, cmd), 0);
        T_EQ(t_sh("cd %s && %s rclone copy gb:rcb/rc rcback > out 2>&1", a.dir, cmd), 0);
        T_TRUE(gw_same(&a, "rcback/a", "tree/a"));
        T_TRUE(gw_same(&a, "rcback/sub/b", "tree/sub/b"));
    }

    /* boto3 across both, and the refusals. */
    t_write_file(gw_path(&a, "t.py"), boto_py, strlen(boto_py));
    T_EQ(t_sh("python3 %s %s %s " AK " '" SK "' %s > %s 2>&1 || { cat %s >&2; exit 1; }",
              gw_path(&a, "t.py"), a.url, b.url, a.dir, gw_path(&a, "py"), gw_path(&a, "py")),
         0);
    T_TRUE(gw_has(&a, "py", "boto3 ok"));
    T_TRUE(gw_has(&a, "py", "wrong SignatureDoesNotMatch") || gw_has(&a, "py", "wrong 403"));
    T_TRUE(gw_has(&a, "py", "unknown InvalidAccessKeyId"));
    T_TRUE(gw_has(&a, "py", "tampered 400 True"));
    T_TRUE(gw_has(&a, "py", "after 404") || gw_has(&a, "py", "after NoSuchKey"));
    T_TRUE(gw_has(&a, "py", "expired 403"));

    /* curl --aws-sigv4: PUT through b, GET through a. */
    T_EQ(gw_curl(&b, "o", SIGV4 "-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -T %s %s/rcb/curl/f1",
                 gw_path(&a, "f1"), b.url),
         200);
    T_EQ(gw_curl(&a, "got", SIGV4 "%s/rcb/curl/f1", a.url), 200);
    T_TRUE(gw_same(&a, "got", "f1"));
    T_EQ(gw_curl(&a, "o", "%s/rcb/curl/f1", a.url), 403); /* unsigned */

    /* Emptied and removed through b; gone through a. */
    T_NE(aws(&b, "", "o", "s3 rb s3://rcb"), 0);
    T_TRUE(gw_has(&a, "o", "BucketNotEmpty"));
    T_EQ(aws(&b, "", "o", "s3api delete-objects --bucket rcb --delete 'Objects=[{Key=c/f1}]'"), 0);
    T_EQ(aws(&b, "", "o", "s3 rm --recursive s3://rcb"), 0);
    T_EQ(aws(&b, "", "o", "s3 rb s3://rcb"), 0);
    T_EQ(aws(&a, "", "o", "s3 ls"), 0);
    T_FALSE(gw_has(&a, "o", "rcb"));
    gw_stop(&b);
    gw_stop(&a);
}
#endif
