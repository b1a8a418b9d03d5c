/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS integration net */
/* T_TIMEOUT 240 */
/*
 * Object tagging through the S3 gateway (docs/gateway.md, "Tags"), over the
 * server's own store and over file://: x-amz-tagging on PutObject, on
 * CreateMultipartUpload (boto3's upload_file) and on a POST form;
 * PutObjectTagging, GetObjectTagging and DeleteObjectTagging; the tags
 * kept apart from the content headers and x-amz-meta-* (neither changes
 * the other); CopyObject's x-amz-tagging-directive (the source's tags by
 * default, with either metadata directive); x-amz-tagging-count on GET and
 * HEAD; every refusal with S3's code and the object's tags left as they
 * were; a bucket's own tags (up to 50, gone with the bucket); the aws
 * CLI's s3api calls.
 */
#include <stdio.h>
#include <string.h>

#include "gw_util.h"
#include "t.h"

#define AK "AKIATAGGING000000001"
#define SK "tagging/secret/key/0123456789abcdefghij"
#define AK2 "AKIATAGGING000000002"
#define SK2 "other/tagging/key/0123456789abcdefghijk"

static const char script[] =
    "import sys, subprocess, boto3, botocore\n"
    "from botocore.config import Config\n"
    "from boto3.s3.transfer import TransferConfig\n"
    "url, ak, sk, d = sys.argv[1:5]\n"
    "def client(a, s):\n"
    "    return boto3.client('s3', endpoint_url=url, aws_access_key_id=a,\n"
    "        aws_secret_access_key=s, region_name='us-east-1',\n"
    "        config=Config(s3={'addressing_style': 'path'}))\n"
    "s3 = client(ak, sk)\n"
    "def tags(key):\n"
    "    return s3.get_object_tagging(Bucket='tagb', Key=key)['TagSet']\n"
    "def count(key):\n"
    "    h = s3.head_object(Bucket='tagb', Key=key)['ResponseMetadata']['HTTPHeaders']\n"
    "    g = s3.get_object(Bucket='tagb', Key=key)\n"
    "    assert g.get('TagCount') == (int(h['x-amz-tagging-count'])\n"
    "        if 'x-amz-tagging-count' in h else None), (g.get('TagCount'), h)\n"
    "    return g.get('TagCount', 0)\n"
    "def refused(status, code, fn, **kw):\n"
    "    try:\n"
    "        fn(**kw)\n"
    "    except botocore.exceptions.ClientError as e:\n"
    "        got = (e.response['ResponseMetadata']['HTTPStatusCode'], "
    "e.response['Error']['Code'])\n"
    "        assert got == (status, code), (got, status, code, kw)\n"
    "        return\n"
    "    raise AssertionError('not refused: %s' % kw)\n"
    "s3.create_bucket(Bucket='tagb')\n"
    "# on PutObject, with the content headers and metadata\n"
    "s3.put_object(Bucket='tagb', Key='a', Body=b'abc', Tagging='k1=v1&k%202=v+2&empty=',\n"
    "    ContentType='text/plain', Metadata={'m': 'x'})\n"
    "assert tags('a') == [{'Key': 'k1', 'Value': 'v1'}, {'Key': 'k 2', 'Value': 'v 2'},\n"
    "    {'Key': 'empty', 'Value': ''}], tags('a')\n"
    "assert count('a') == 3\n"
    "# replaced, the rest of the object's metadata kept\n"
    "ts = [{'Key': 'z', 'Value': ''}, {'Key': '\\u00fc ok', 'Value': 'a:b/c@d+e=f_g.h-i'}]\n"
    "s3.put_object_tagging(Bucket='tagb', Key='a', Tagging={'TagSet': ts})\n"
    "assert tags('a') == ts, tags('a')\n"
    "h = s3.head_object(Bucket='tagb', Key='a')\n"
    "assert h['ContentType'] == 'text/plain' and h['Metadata'] == {'m': 'x'}, h\n"
    "assert s3.get_object(Bucket='tagb', Key='a')['Body'].read() == b'abc'\n"
    "# a copy takes the source's tags, or the request's with REPLACE\n"
    "s3.copy_object(Bucket='tagb', Key='c1', CopySource='tagb/a')\n"
    "assert tags('c1') == ts\n"
    "s3.copy_object(Bucket='tagb', Key='c2', CopySource='tagb/a', TaggingDirective='REPLACE',\n"
    "    Tagging='n=1')\n"
    "assert tags('c2') == [{'Key': 'n', 'Value': '1'}]\n"
    "s3.copy_object(Bucket='tagb', Key='c3', CopySource='tagb/a', MetadataDirective='REPLACE',\n"
    "    ContentType='x/y', Tagging='ignored=1')\n"
    "assert tags('c3') == ts and s3.head_object(Bucket='tagb', Key='c3')['ContentType'] == 'x/y'\n"
    "s3.copy_object(Bucket='tagb', Key='c4', CopySource='tagb/a', MetadataDirective='REPLACE',\n"
    "    TaggingDirective='REPLACE')\n"
    "assert tags('c4') == [] and count('c4') == 0\n"
    "# refusals: the tags stay as they were\n"
    "for bad, code in [([{'Key': 'aws:x', 'Value': '1'}], 'InvalidTag'),\n"
    "                  ([{'Key': 'k', 'Value': '1'}, {'Key': 'k', 'Value': '2'}], 'InvalidTag'),\n"
    "                  ([{'Key': 'k%d' % i, 'Value': '1'} for i in range(11)], 'BadRequest'),\n"
    "                  ([{'Key': 'a<b', 'Value': '1'}], 'InvalidTag'),\n"
    "                  ([{'Key': 'k' * 129, 'Value': '1'}], 'InvalidTag'),\n"
    "                  ([{'Key': 'k', 'Value': 'v' * 257}], 'InvalidTag')]:\n"
    "    refused(400, code, s3.put_object_tagging, Bucket='tagb', Key='a',\n"
    "        Tagging={'TagSet': bad})\n"
    "assert tags('a') == ts\n"
    "refused(400, 'InvalidArgument', s3.put_object, Bucket='tagb', Key='no', Body=b'x',\n"
    "    Tagging='a=%zz')\n"
    "refused(400, 'InvalidTag', s3.put_object, Bucket='tagb', Key='no', Body=b'x',\n"
    "    Tagging='aws:a=1')\n"
    "refused(400, 'BadRequest', s3.put_object, Bucket='tagb', Key='no', Body=b'x',\n"
    "    Tagging='&'.join('k%d=v' % i for i in range(11)))\n"
    "refused(404, 'NoSuchKey', s3.get_object, Bucket='tagb', Key='no')\n"
    "refused(400, 'InvalidArgument', s3.copy_object, Bucket='tagb', Key='no', "
    "CopySource='tagb/a',\n"
    "    TaggingDirective='MOVE')\n"
    "refused(404, 'NoSuchKey', s3.get_object_tagging, Bucket='tagb', Key='no')\n"
    "refused(404, 'NoSuchKey', s3.put_object_tagging, Bucket='tagb', Key='no',\n"
    "    Tagging={'TagSet': ts})\n"
    "refused(404, 'NoSuchBucket', s3.get_object_tagging, Bucket='nobkt', Key='a')\n"
    "other = client('" AK2 "', '" SK2 "')\n"
    "refused(403, 'AccessDenied', other.get_object_tagging, Bucket='tagb', Key='a')\n"
    "refused(403, 'AccessDenied', other.put_object_tagging, Bucket='tagb', Key='a',\n"
    "    Tagging={'TagSet': []})\n"
    "assert tags('a') == ts\n"
    "# deleted: no tags, the rest kept\n"
    "s3.delete_object_tagging(Bucket='tagb', Key='a')\n"
    "assert tags('a') == [] and count('a') == 0\n"
    "h = s3.head_object(Bucket='tagb', Key='a')\n"
    "assert h['ContentType'] == 'text/plain' and h['Metadata'] == {'m': 'x'}, h\n"
    "# an object with nothing else but tags: its record goes with them\n"
    "s3.put_object(Bucket='tagb', Key='only', Body=b'o')\n"
    "s3.put_object_tagging(Bucket='tagb', Key='only', Tagging={'TagSet': ts})\n"
    "assert tags('only') == ts and count('only') == 2\n"
    "s3.put_object_tagging(Bucket='tagb', Key='only', Tagging={'TagSet': []})\n"
    "assert tags('only') == [] and count('only') == 0\n"
    "# multipart: CreateMultipartUpload's x-amz-tagging becomes the object's\n"
    "s3.upload_file(d + '/big', 'tagb', 'mp', ExtraArgs={'Tagging': 'm=p', 'ContentType': 't/x'},\n"
    "    Config=TransferConfig(multipart_threshold=5 * 1024 * 1024,\n"
    "                          multipart_chunksize=5 * 1024 * 1024))\n"
    "assert s3.head_object(Bucket='tagb', Key='mp')['ETag'].endswith('-3\"')\n"
    "assert tags('mp') == [{'Key': 'm', 'Value': 'p'}] and count('mp') == 1\n"
    "# a POST form's tagging field (a Tagging document the policy names)\n"
    "doc = ('<Tagging><TagSet><Tag><Key>form</Key><Value>yes</Value></Tag></TagSet>'\n"
    "       '</Tagging>')\n"
    "p = s3.generate_presigned_post('tagb', 'posted', Fields={'tagging': doc},\n"
    "    Conditions=[{'tagging': doc}], ExpiresIn=300)\n"
    "args = ['curl', '-s', '-o', '/dev/null', '-w', '%{http_code}']\n"
    "for k, v in p['fields'].items():\n"
    "    args += ['--form-string', '%s=%s' % (k, v)]\n"
    "args += ['-F', 'file=@' + d + '/big', p['url']]\n"
    "assert subprocess.run(args, capture_output=True, text=True).stdout == '204'\n"
    "assert tags('posted') == [{'Key': 'form', 'Value': 'yes'}]\n"
    "# a bucket's own tags: up to 50, kept apart from its objects'\n"
    "refused(404, 'NoSuchTagSet', s3.get_bucket_tagging, Bucket='tagb')\n"
    "bt = [{'Key': 'b%d' % i, 'Value': 'v %d' % i} for i in range(50)]\n"
    "s3.put_bucket_tagging(Bucket='tagb', Tagging={'TagSet': bt})\n"
    "assert s3.get_bucket_tagging(Bucket='tagb')['TagSet'] == bt\n"
    "refused(400, 'BadRequest', s3.put_bucket_tagging, Bucket='tagb',\n"
    "    Tagging={'TagSet': bt + [{'Key': 'one-more', 'Value': ''}]})\n"
    "refused(400, 'InvalidTag', s3.put_bucket_tagging, Bucket='tagb',\n"
    "    Tagging={'TagSet': [{'Key': 'aws:x', 'Value': ''}]})\n"
    "assert s3.get_bucket_tagging(Bucket='tagb')['TagSet'] == bt\n"
    "assert tags('only') == []\n"
    "refused(403, 'AccessDenied', other.get_bucket_tagging, Bucket='tagb')\n"
    "refused(404, 'NoSuchBucket', s3.put_bucket_tagging, Bucket='nobkt', Tagging={'TagSet': bt})\n"
    "s3.delete_bucket_tagging(Bucket='tagb')\n"
    "refused(404, 'NoSuchTagSet', s3.get_bucket_tagging, Bucket='tagb')\n"
    "# gone with its bucket: a bucket made again under the name has none\n"
    "s3.create_bucket(Bucket='tagb2')\n"
    "s3.put_bucket_tagging(Bucket='tagb2', Tagging={'TagSet': bt[:2]})\n"
    "s3.delete_bucket(Bucket='tagb2')\n"
    "s3.create_bucket(Bucket='tagb2')\n"
    "refused(404, 'NoSuchTagSet', s3.get_bucket_tagging, Bucket='tagb2')\n"
    "print('tags ok')\n";

static void run(const char *backend)
{
    struct gw g;
    char keys[256], env[256];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n" AK2 " " SK2 " other\n");
    gw_start(&g, backend, extra);
    gw_file(&g, "big", 12 * 1024 * 1024 + 3, 91);
    gw_python(&g, script, AK, SK, "tags ok");
    /* the aws CLI */
    snprintf(env, sizeof(env), "AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s'", AK, SK);
    T_EQ(gw_aws(&g, env, "o",
                "s3api put-object --bucket tagb --key cli --body big --tagging 'team=ml&tier=hot'"),
         0);
    T_EQ(gw_aws(&g, env, "o", "s3api get-object-tagging --bucket tagb --key cli --output text"), 0);
    T_TRUE(gw_has(&g, "o", "team\tml"));
    T_TRUE(gw_has(&g, "o", "tier\thot"));
    T_EQ(gw_aws(&g, env, "o",
                "s3api put-object-tagging --bucket tagb --key cli --tagging "
                "'TagSet=[{Key=only,Value=one}]'"),
         0);
    T_EQ(gw_aws(&g, env, "o", "s3api get-object-tagging --bucket tagb --key cli --output text"), 0);
    T_TRUE(gw_has(&g, "o", "only\tone"));
    T_FALSE(gw_has(&g, "o", "team"));
    T_EQ(gw_aws(&g, env, "o", "s3api delete-object-tagging --bucket tagb --key cli"), 0);
    T_EQ(gw_aws(&g, env, "o", "s3api get-object-tagging --bucket tagb --key cli --output json"), 0);
    T_TRUE(gw_has(&g, "o", "\"TagSet\": []"));
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"PutObjectTagging\",status=\"2xx\"}"), 4);
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"GetObjectTagging\",status=\"2xx\"}"), 10);
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"DeleteObjectTagging\",status=\"2xx\"}"),
         2);
    T_EQ(gw_aws(&g, env, "o",
                "s3api put-bucket-tagging --bucket tagb --tagging 'TagSet=[{Key=cost,Value=ml}]'"),
         0);
    T_EQ(gw_aws(&g, env, "o", "s3api get-bucket-tagging --bucket tagb --output text"), 0);
    T_TRUE(gw_has(&g, "o", "cost\tml"));
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"PutBucketTagging\",status=\"2xx\"}"), 3);
    gw_stop(&g);
}

TEST(tags_over_the_servers_store)
{
    if (t_sh("python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("boto3 is not installed");
    run(NULL);
}

TEST(tags_over_file)
{
    char url[256];

    if (t_sh("python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("boto3 is not installed");
    snprintf(url, sizeof(url), "file://%s", t_scratch_dir("gwtagfile"));
    run(url);
}
