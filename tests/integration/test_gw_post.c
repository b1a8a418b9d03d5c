/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 180 */
/*
 * POST Object, S3's browser-based upload, through railiod's gateway: the
 * forms boto3's generate_presigned_post makes (SigV4 and SigV2), sent by
 * curl -F as a browser sends them, every byte compared; the object's
 * Content-Type and x-amz-meta-* from the form; ${filename}; 204, 200, 201
 * (PostResponse) and the 303 to success_action_redirect; a file of 20 MiB
 * streamed; then each refusal with S3's code and nothing written: over the
 * policy's content-length-range (and under it), a condition not met, a
 * field no condition names, a tampered signature, an expired policy, an
 * unsigned form where anonymous access is off, a body that is not a form,
 * a form cut short, a form without its file.
 */
#include "gw_util.h"

#define AK "AKPOSTFORM1"
#define SK "post-secret/0123456789"

static const char script[] =
    "import boto3, sys, subprocess, re\n"
    "from botocore.config import Config\n"
    "url, ak, sk, d = sys.argv[1:5]\n"
    "def client(sig):\n"
    "    return boto3.client('s3', endpoint_url=url, aws_access_key_id=ak,\n"
    "        aws_secret_access_key=sk, region_name='us-east-1',\n"
    "        config=Config(signature_version=sig, s3={'addressing_style': 'path'}))\n"
    "s3 = client('s3v4')\n"
    "s3.create_bucket(Bucket='postb')\n"
    "def post(p, path, extra=(), filename=None, after=()):\n"
    "    args = ['curl', '-s', '-m', '60', '-o', d + '/resp', '-D', d + '/resp.h',\n"
    "            '-w', '%{http_code}']\n"
    "    for k, v in p['fields'].items():\n"
    "        args += ['--form-string', k + '=' + v]\n"
    "    args += list(extra)\n"
    "    args += ['-F', 'file=@' + path + (';filename=' + filename if filename else '')]\n"
    "    args += list(after) + [p['url']]\n"
    "    code = int(subprocess.run(args, capture_output=True, text=True, check=True).stdout)\n"
    "    return code, open(d + '/resp', 'rb').read().decode(), open(d + '/resp.h').read()\n"
    "def absent(key):\n"
    "    try:\n"
    "        s3.head_object(Bucket='postb', Key=key)\n"
    "    except s3.exceptions.ClientError as e:\n"
    "        assert e.response['Error']['Code'] == '404', e.response\n"
    "        return True\n"
    "    return False\n"
    "def refused(p, code, s3code, key, extra=()):\n"
    "    c, body, h = post(p, d + '/small', extra)\n"
    "    assert c == code and '<Code>' + s3code + '</Code>' in body, (c, body)\n"
    "    assert absent(key), key\n"
    "data = open(d + '/small', 'rb').read()\n"
    "big = open(d + '/big', 'rb').read()\n"
    "for sig in ('s3v4', 's3'):\n"
    "    c = client(sig)\n"
    "    p = c.generate_presigned_post('postb', 'up/' + sig + '/${filename}',\n"
    "        Fields={'Content-Type': 'image/png', 'x-amz-meta-who': 'form',\n"
    "                'Cache-Control': 'max-age=60'},\n"
    "        Conditions=[['starts-with', '$key', 'up/'], {'Content-Type': 'image/png'},\n"
    "                    {'x-amz-meta-who': 'form'}, {'Cache-Control': 'max-age=60'},\n"
    "                    ['content-length-range', 1, 64 << 20]], ExpiresIn=300)\n"
    "    assert ('x-amz-signature' in p['fields']) == (sig == 's3v4'), p['fields']\n"
    "    code, body, h = post(p, d + '/small', filename='pic one.png')\n"
    "    assert code == 204 and body == '', (code, body)\n"
    "    key = 'up/' + sig + '/pic one.png'\n"
    "    etag = re.search(r'(?im)^etag: (\\S+)', h).group(1)\n"
    "    o = s3.get_object(Bucket='postb', Key=key)\n"
    "    assert o['Body'].read() == data, 'bytes'\n"
    "    assert o['ETag'] == etag and o['ContentType'] == 'image/png', o\n"
    "    assert o['Metadata'] == {'who': 'form'} and o['CacheControl'] == 'max-age=60', o\n"
    "    code, body, h = post(p, d + '/big', filename='big.bin')\n"
    "    assert code == 204, (code, body)\n"
    "    assert s3.get_object(Bucket='postb', Key='up/' + sig + '/big.bin')['Body'].read() == big\n"
    "p = s3.generate_presigned_post('postb', 's/201', Fields={'success_action_status': '201'},\n"
    "    Conditions=[{'success_action_status': '201'}], ExpiresIn=300)\n"
    "code, body, h = post(p, d + '/small')\n"
    "assert code == 201 and '<Key>s/201</Key>' in body and '<Bucket>postb</Bucket>' in body, body\n"
    "assert '/postb/s/201</Location>' in body, body\n"
    "p = s3.generate_presigned_post('postb', 's/200', Fields={'success_action_status': '200'},\n"
    "    Conditions=[{'success_action_status': '200'}], ExpiresIn=300)\n"
    "assert post(p, d + '/small')[0] == 200\n"
    "red = 'http://app.test/done?x=1'\n"
    "p = s3.generate_presigned_post('postb', 's/r', Fields={'success_action_redirect': red},\n"
    "    Conditions=[{'success_action_redirect': red}], ExpiresIn=300)\n"
    "code, body, h = post(p, d + '/small')\n"
    "loc = re.search(r'(?im)^location: (\\S+)', h).group(1)\n"
    "assert code == 303 and loc.startswith(red + '&bucket=postb&key=s%2Fr&etag=%22'), (code, h)\n"
    "# a fragment stays last: the query before it is what the browser sends\n"
    "red = 'http://app.test/done#top'\n"
    "p = s3.generate_presigned_post('postb', 's/f', Fields={'success_action_redirect': red},\n"
    "    Conditions=[{'success_action_redirect': red}], ExpiresIn=300)\n"
    "code, body, h = post(p, d + '/small')\n"
    "loc = re.search(r'(?im)^location: (\\S+)', h).group(1)\n"
    "assert code == 303 and "
    "re.match(r'http://app.test/done\\?bucket=postb&key=s%2Ff&etag=%22[0-9a-f]{32}%22#top$', loc), "
    "(code, h)\n"
    "for k in ('s/201', 's/200', 's/r'):\n"
    "    assert s3.get_object(Bucket='postb', Key=k)['Body'].read() == data, k\n"
    "# $key conditions hold for the key with ${filename} replaced, as S3's\n"
    "p = s3.generate_presigned_post('postb', '${filename}',\n"
    "    Conditions=[['starts-with', '$key', 'foo']], ExpiresIn=300)\n"
    "code, body, h = post(p, d + '/small', filename='foo.txt')\n"
    "assert code == 204, (code, body)\n"
    "assert s3.get_object(Bucket='postb', Key='foo.txt')['Body'].read() == data\n"
    "code, body, h = post(p, d + '/small', filename='bar.txt')\n"
    "assert code == 403 and 'Policy Condition failed' in body, (code, body)\n"
    "assert absent('bar.txt')\n"
    "# fields after the file are ignored, not stored\n"
    "p = s3.generate_presigned_post('postb', 's/after', ExpiresIn=300)\n"
    "code, body, h = post(p, d + '/small', after=('--form-string', 'x-amz-meta-late=1'))\n"
    "assert code == 204 and s3.head_object(Bucket='postb', Key='s/after')['Metadata'] == {}\n"
    "# refusals: nothing written\n"
    "p = s3.generate_presigned_post('postb', 'no/range', Conditions=[['content-length-range', 1, "
    "100]],\n"
    "    ExpiresIn=300)\n"
    "refused(p, 400, 'EntityTooLarge', 'no/range')\n"
    "p = s3.generate_presigned_post('postb', 'no/min',\n"
    "    Conditions=[['content-length-range', len(data) + 1, len(data) + 10]], ExpiresIn=300)\n"
    "refused(p, 400, 'EntityTooSmall', 'no/min')\n"
    "p = s3.generate_presigned_post('postb', 'no/cond', Conditions=[['starts-with', '$key', "
    "'up/']],\n"
    "    ExpiresIn=300)\n"
    "refused(p, 403, 'AccessDenied', 'no/cond')\n"
    "p = s3.generate_presigned_post('postb', 'no/extra', ExpiresIn=300)\n"
    "refused(p, 403, 'AccessDenied', 'no/extra', extra=('--form-string', 'x-amz-meta-evil=1'))\n"
    "p['fields']['key'] = 'no/tampered'\n"
    "p['fields']['policy'] = p['fields']['policy'][:-4] + 'fQ=='\n"
    "refused(p, 403, 'SignatureDoesNotMatch', 'no/tampered')\n"
    "p = s3.generate_presigned_post('postb', 'no/expired', ExpiresIn=-10)\n"
    "refused(p, 403, 'AccessDenied', 'no/expired')\n"
    "p = {'url': url + '/postb', 'fields': {'key': 'no/anon'}}\n"
    "refused(p, 403, 'AccessDenied', 'no/anon')\n"
    "print('post ok')\n";

TEST(boto3_forms_sent_by_curl)
{
    struct gw g;
    char keys[256];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    if (t_sh("python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("boto3 is not installed");
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    gw_start(&g, NULL, extra);
    gw_file(&g, "small", 300 * 1024 + 3, 71);
    gw_file(&g, "big", 20 * 1024 * 1024 + 1, 72);
    gw_python(&g, script, AK, SK, "post ok");
    /* the metrics count the operation */
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"PostObject\",status=\"2xx\"}"), 7);
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"PostObject\",status=\"3xx\"}"), 1);
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"PostObject\",status=\"4xx\"}"), 7);
    gw_stop(&g);
}

/* Forms an anonymous gateway takes, and bodies it refuses. */
TEST(anonymous_forms_and_malformed_bodies)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    gw_file(&g, "f", 100 * 1000, 73);
    T_EQ(gw_curl(&g, "", "-X PUT %s/anonb", g.url), 200);
    /* no policy, no signature: anonymous, as a public bucket takes it */
    T_EQ(gw_curl(&g, "r", "-F 'key=a/${filename}' -F Content-Type=text/x -F 'file=@%s' %s/anonb",
                 gw_path(&g, "f"), g.url),
         204);
    T_EQ(gw_curl(&g, "got", "%s/anonb/a/f", g.url), 200);
    T_EQ(t_sh("cmp -s %s %s", gw_path(&g, "got"), gw_path(&g, "f")), 0);
    T_TRUE(gw_has(&g, "got.h", "Content-Type: text/x"));
    /* not a form: 412, as S3 */
    T_EQ(gw_curl(&g, "r", "-X POST -H 'Content-Type: text/plain' --data-binary x %s/anonb", g.url),
         412);
    T_TRUE(gw_has(&g, "r", "<Code>PreconditionFailed</Code>"));
    /* a form without a boundary, a form without its file, a form without a key */
    T_EQ(gw_curl(&g, "r", "-X POST -H 'Content-Type: multipart/form-data' --data-binary x %s/anonb",
                 g.url),
         400);
    T_TRUE(gw_has(&g, "r", "<Code>MalformedPOSTRequest</Code>"));
    T_EQ(gw_curl(&g, "r", "-F key=nofile -F acl=private %s/anonb", g.url), 400);
    T_TRUE(gw_has(&g, "r", "<Code>MalformedPOSTRequest</Code>"));
    T_EQ(gw_curl(&g, "r", "-F 'file=@%s' %s/anonb", gw_path(&g, "f"), g.url), 400);
    T_TRUE(gw_has(&g, "r", "<Code>InvalidArgument</Code>"));
    /* a form cut in the middle of its file: nothing published */
    t_sh("printf -- '--XB\\r\\nContent-Disposition: form-data; name=\"key\"\\r\\n\\r\\ncut\\r\\n"
         "--XB\\r\\nContent-Disposition: form-data; name=\"file\"\\r\\n\\r\\n0123456789' > %s",
         gw_path(&g, "cut"));
    T_EQ(gw_curl(&g, "r",
                 "-H 'Content-Type: multipart/form-data; boundary=XB' --data-binary @%s "
                 "%s/anonb",
                 gw_path(&g, "cut"), g.url),
         400);
    T_TRUE(gw_has(&g, "r", "<Code>IncompleteBody</Code>"));
    T_EQ(gw_curl(&g, "", "-I %s/anonb/cut", g.url), 404);
    /* Digest fields: checked before the commit (BadDigest, nothing
     * published), an x-amz-checksum-* one kept and given back. */
    char crc[16], want[64];
    gw_crc32_b64(&g, "f", crc, sizeof(crc));
    T_EQ(gw_curl(&g, "r", "-F key=ck/good -F x-amz-checksum-crc32=%s -F 'file=@%s' %s/anonb", crc,
                 gw_path(&g, "f"), g.url),
         204);
    T_EQ(gw_curl(&g, "h", "-I -H 'x-amz-checksum-mode: ENABLED' %s/anonb/ck/good", g.url), 200);
    snprintf(want, sizeof(want), "x-amz-checksum-crc32: %s", crc);
    T_TRUE(gw_has(&g, "h.h", want));
    T_EQ(gw_curl(&g, "r", "-F key=ck/bad -F x-amz-checksum-crc32=AAAAAA== -F 'file=@%s' %s/anonb",
                 gw_path(&g, "f"), g.url),
         400);
    T_TRUE(gw_has(&g, "r", "<Code>BadDigest</Code>"));
    T_EQ(gw_curl(&g, "r",
                 "-F key=ck/md5 -F Content-MD5=AAAAAAAAAAAAAAAAAAAAAA== -F 'file=@%s' %s/anonb",
                 gw_path(&g, "f"), g.url),
         400);
    T_TRUE(gw_has(&g, "r", "<Code>BadDigest</Code>"));
    T_EQ(gw_curl(&g, "r", "-F key=ck/junk -F x-amz-checksum-crc32=abc -F 'file=@%s' %s/anonb",
                 gw_path(&g, "f"), g.url),
         400);
    T_TRUE(gw_has(&g, "r", "<Code>InvalidDigest</Code>"));
    T_EQ(gw_curl(&g, "", "-I %s/anonb/ck/bad", g.url), 404);
    T_EQ(gw_curl(&g, "", "-I %s/anonb/ck/md5", g.url), 404);
    T_EQ(gw_curl(&g, "", "-I %s/anonb/ck/junk", g.url), 404);
    /* A storage class S3 has is taken (and stored as STANDARD); one it
     * has not is refused as S3 refuses it, nothing published. */
    T_EQ(gw_curl(&g, "r", "-F key=sc/ia -F x-amz-storage-class=STANDARD_IA -F 'file=@%s' %s/anonb",
                 gw_path(&g, "f"), g.url),
         204);
    T_EQ(gw_curl(&g, "r", "-F key=sc/bad -F x-amz-storage-class=CHEAP -F 'file=@%s' %s/anonb",
                 gw_path(&g, "f"), g.url),
         400);
    T_TRUE(gw_has(&g, "r", "<Code>InvalidStorageClass</Code>"));
    T_EQ(gw_curl(&g, "", "-I %s/anonb/sc/bad", g.url), 404);
    /* into a bucket that does not exist */
    T_EQ(gw_curl(&g, "r", "-F key=k -F 'file=@%s' %s/nobucket", gw_path(&g, "f"), g.url), 404);
    T_TRUE(gw_has(&g, "r", "<Code>NoSuchBucket</Code>"));
    gw_stop(&g);
}

/* Over file://, keys its tree cannot hold are refused as a PutObject's
 * are (409 ParentIsObject, 400 InvalidArgument), not a 500; the others
 * land as files. */
TEST(keys_a_file_tree_cannot_hold)
{
    struct gw g;
    char url[256];
    const char *dir = t_scratch_dir("gw-post-file");

    snprintf(url, sizeof(url), "file://%s/store", dir);
    T_EQ(t_sh("mkdir -p %s/store", dir), 0);
    gw_start(&g, url, NULL);
    gw_file(&g, "f", 5000, 74);
    T_EQ(gw_curl(&g, "", "-X PUT %s/fpb", g.url), 200);
    T_EQ(gw_curl(&g, "r", "-F key=x -F 'file=@%s' %s/fpb", gw_path(&g, "f"), g.url), 204);
    T_EQ(t_sh("cmp -s %s %s/store/fpb/x", gw_path(&g, "f"), dir), 0);
    T_EQ(gw_curl(&g, "r", "-F key=x/y -F 'file=@%s' %s/fpb", gw_path(&g, "f"), g.url), 409);
    T_TRUE(gw_has(&g, "r", "<Code>ParentIsObject</Code>"));
    T_EQ(gw_curl(&g, "r", "-F key=a/../b -F 'file=@%s' %s/fpb", gw_path(&g, "f"), g.url), 400);
    T_TRUE(gw_has(&g, "r", "<Code>InvalidArgument</Code>"));
    gw_stop(&g);
}

/* Over railiod's own store with its disk tier (--data-dir), a POST form's
 * file and a PUT with a chunked body (curl -T - from a pipe: no
 * Content-Length) are written as uploads of unknown size: 501 and 411
 * before, now stored, read back byte-exact, and still there after a
 * restart. */
TEST(forms_and_chunked_puts_over_the_disk_tier)
{
    struct gw g;
    char dir[256];
    const char *extra[] = {"--data-dir", dir, NULL};

    snprintf(dir, sizeof(dir), "%s", t_scratch_dir("gwpostdisk"));
    gw_start(&g, NULL, extra);
    gw_file(&g, "f", 100 * 1000 + 7, 74);
    gw_file(&g, "big", 9 * 1024 * 1024 + 3, 75);
    T_EQ(gw_curl(&g, "", "-X PUT %s/diskb", g.url), 200);
    T_EQ(gw_curl(&g, "r", "-F key=form/f -F 'file=@%s' %s/diskb", gw_path(&g, "f"), g.url), 204);
    T_EQ(gw_curl(&g, "r", "-F key=form/big -F 'file=@%s' %s/diskb", gw_path(&g, "big"), g.url),
         204);
    T_EQ(gw_curl(&g, "r", "-T - %s/diskb/chunked/big < %s", g.url, gw_path(&g, "big")), 200);
    T_EQ(gw_curl(&g, "r", "-H 'Transfer-Encoding: chunked' -T %s %s/diskb/chunked/f",
                 gw_path(&g, "f"), g.url),
         200);
    T_EQ(gw_curl(&g, "r", "-T - %s/diskb/chunked/empty < /dev/null", g.url), 200);
    for (int round = 0; round < 2; round++) {
        T_EQ(gw_curl(&g, "got", "%s/diskb/form/f", g.url), 200);
        T_EQ(t_sh("cmp -s %s %s", gw_path(&g, "got"), gw_path(&g, "f")), 0);
        T_EQ(gw_curl(&g, "got", "%s/diskb/form/big", g.url), 200);
        T_EQ(t_sh("cmp -s %s %s", gw_path(&g, "got"), gw_path(&g, "big")), 0);
        T_EQ(gw_curl(&g, "got", "%s/diskb/chunked/big", g.url), 200);
        T_EQ(t_sh("cmp -s %s %s", gw_path(&g, "got"), gw_path(&g, "big")), 0);
        T_EQ(gw_curl(&g, "got", "%s/diskb/chunked/f", g.url), 200);
        T_EQ(t_sh("cmp -s %s %s", gw_path(&g, "got"), gw_path(&g, "f")), 0);
        T_EQ(gw_curl(&g, "got", "%s/diskb/chunked/empty", g.url), 200);
        T_EQ(t_sh("test -f %s && ! test -s %s", gw_path(&g, "got"), gw_path(&g, "got")), 0);
        if (round == 0) {
            gw_stop(&g);
            gw_start(&g, NULL, extra);
            gw_file(&g, "f", 100 * 1000 + 7, 74); /* (a new scratch directory) */
            gw_file(&g, "big", 9 * 1024 * 1024 + 3, 75);
        }
    }
    gw_stop(&g);
}
