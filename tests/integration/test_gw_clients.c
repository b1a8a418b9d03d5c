/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 240 */
/*
 * railiod's S3 gateway with --s3-keys under the S3 clients people use:
 * s3cmd (SigV4, multipart above its 15 MiB chunk), rclone (copy, check, sync
 * back) and boto3 (put/get, its multipart upload_file and download_file,
 * listing, DeleteObjects, a presigned GET; Metadata and ContentType on
 * put_object, upload_file, copy_object with MetadataDirective and their
 * multipart ETag in head_object and the listing), s3fs-fuse (the bucket
 * mounted and used as a file system) and s3backer (the bucket as a block
 * device); every byte compared.
 */
#include "gw_util.h"

#define AK "AKCLIENTS1"
#define SK "clients-secret/0123456789"

TEST(s3cmd)
{
    struct gw g;
    char keys[256];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    if (t_sh("command -v s3cmd >/dev/null") != 0)
        T_SKIP("s3cmd is not installed");
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    gw_start(&g, NULL, extra);
    T_EQ(t_sh("printf '[default]\\naccess_key = %s\\nsecret_key = %s\\nhost_base = %s\\n"
              "host_bucket = %s\\nuse_https = False\\nsignature_v2 = False\\n"
              "bucket_location = us-east-1\\n' > %s/s3cfg",
              AK, SK, g.s3, g.s3, g.dir),
         0);
    gw_file(&g, "big", 20 * 1024 * 1024 + 3, 41); /* two parts of 15 MiB at most */
    gw_file(&g, "small", 1234, 42);
#define S3CMD "cd %s && s3cmd -c s3cfg --no-progress "
    T_EQ(t_sh(S3CMD "mb s3://cmdb > out 2>&1", g.dir), 0);
    T_EQ(t_sh(S3CMD "put big s3://cmdb/d/big > out 2>&1", g.dir), 0);
    T_EQ(t_sh(S3CMD "put small s3://cmdb/d/small > out 2>&1", g.dir), 0);
    T_EQ(t_sh(S3CMD "get s3://cmdb/d/big back > out 2>&1", g.dir), 0);
    T_TRUE(gw_same(&g, "back", "big"));
    T_EQ(t_sh(S3CMD "get s3://cmdb/d/small back2 > out 2>&1", g.dir), 0);
    T_TRUE(gw_same(&g, "back2", "small"));
    T_EQ(t_sh(S3CMD "ls s3://cmdb/d/ > ls 2>&1", g.dir), 0);
    T_TRUE(gw_has(&g, "ls", "s3://cmdb/d/big"));
    T_EQ(t_sh(S3CMD "del s3://cmdb/d/big s3://cmdb/d/small > out 2>&1", g.dir), 0);
    T_EQ(t_sh(S3CMD "rb s3://cmdb > out 2>&1", g.dir), 0);
#undef S3CMD
    gw_stop(&g);
}

TEST(rclone)
{
    struct gw g;
    char keys[256], env[512];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    if (t_sh("command -v rclone >/dev/null") != 0)
        T_SKIP("rclone is not installed");
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    gw_start(&g, NULL, extra);
    /* An AWS_CA_BUNDLE in the environment makes rclone's S3 SDK fail over http. */
    snprintf(env, sizeof(env),
             "env -u AWS_CA_BUNDLE RCLONE_CONFIG=/dev/null RCLONE_CONFIG_GW_TYPE=s3 "
             "RCLONE_CONFIG_GW_PROVIDER=Other "
             "RCLONE_CONFIG_GW_ACCESS_KEY_ID=%s RCLONE_CONFIG_GW_SECRET_ACCESS_KEY='%s' "
             "RCLONE_CONFIG_GW_ENDPOINT=%s RCLONE_CONFIG_GW_FORCE_PATH_STYLE=true",
             AK, SK, g.url);
    T_EQ(t_sh("mkdir -p %s/tree/sub", g.dir), 0);
    gw_file(&g, "tree/a", 3 * 1024 * 1024 + 1, 51);
    gw_file(&g, "tree/sub/b", 77, 52);
    gw_file(&g, "tree/sub/c", 0, 53);
    T_EQ(t_sh("cd %s && %s rclone mkdir gw:rclb > out 2>&1", g.dir, env), 0);
    T_EQ(t_sh("cd %s && %s rclone copy tree gw:rclb/t > out 2>&1", g.dir, env), 0);
    T_EQ(t_sh("cd %s && %s rclone check tree gw:rclb/t > out 2>&1", g.dir, env), 0);
    T_EQ(t_sh("cd %s && %s rclone copy gw:rclb/t back > out 2>&1", g.dir, env), 0);
    T_TRUE(gw_same(&g, "back/a", "tree/a"));
    T_TRUE(gw_same(&g, "back/sub/b", "tree/sub/b"));
    T_TRUE(gw_same(&g, "back/sub/c", "tree/sub/c"));
    T_EQ(t_sh("cd %s && %s rclone lsf -R gw:rclb > ls 2>&1", g.dir, env), 0);
    T_TRUE(gw_has(&g, "ls", "t/sub/b"));
    T_EQ(t_sh("cd %s && %s rclone purge gw:rclb > out 2>&1", g.dir, env), 0);
    T_EQ(gw_curl(&g, "o", "-I %s/rclb", g.url), 403); /* unsigned: refused */
    gw_stop(&g);
}

TEST(boto3)
{
    struct gw g;
    char keys[256];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};
    static const char script[] =
        "import boto3, sys, urllib.request\n"
        "from botocore.config import Config\n"
        "from boto3.s3.transfer import TransferConfig\n"
        "url, ak, sk, d = sys.argv[1:5]\n"
        "s3 = boto3.client('s3', endpoint_url=url, aws_access_key_id=ak,\n"
        "    aws_secret_access_key=sk, region_name='us-east-1',\n"
        "    config=Config(signature_version='s3v4', s3={'addressing_style': 'path'}))\n"
        "s3.create_bucket(Bucket='botob')\n"
        "data = open(d + '/f', 'rb').read()\n"
        "r = s3.put_object(Bucket='botob', Key='k/one', Body=data, ContentType='text/csv',\n"
        "    Metadata={'Run': 'r1', 'note': 'a b'}, ContentDisposition='inline')\n"
        "got = s3.get_object(Bucket='botob', Key='k/one')['Body'].read()\n"
        "assert got == data, 'get_object'\n"
        "h = s3.head_object(Bucket='botob', Key='k/one')\n"
        "assert h['ContentLength'] == len(data) and h['ETag'] == r['ETag'], h\n"
        "assert h['Metadata'] == {'run': 'r1', 'note': 'a b'}, h['Metadata']\n"
        "assert h['ContentType'] == 'text/csv' and h['ContentDisposition'] == 'inline', h\n"
        "g = s3.get_object(Bucket='botob', Key='k/one')\n"
        "assert g['Metadata'] == h['Metadata'] and g['ContentType'] == 'text/csv', g\n"
        "s3.copy_object(Bucket='botob', Key='k/copy', CopySource='botob/k/one')\n"
        "c = s3.head_object(Bucket='botob', Key='k/copy')\n"
        "assert c['Metadata'] == h['Metadata'] and c['ContentType'] == 'text/csv', c\n"
        "s3.copy_object(Bucket='botob', Key='k/copy', CopySource='botob/k/one',\n"
        "    MetadataDirective='REPLACE', Metadata={'x': 'y'})\n"
        "c = s3.head_object(Bucket='botob', Key='k/copy')\n"
        "assert c['Metadata'] == {'x': 'y'} and c['ContentType'] == 'binary/octet-stream', c\n"
        "try:\n"
        "    s3.put_object(Bucket='botob', Key='k/huge', Body=b'x', Metadata={'m': 'v' * 2048})\n"
        "    raise SystemExit('MetadataTooLarge expected')\n"
        "except s3.exceptions.ClientError as e:\n"
        "    assert e.response['Error']['Code'] == 'MetadataTooLarge', e.response\n"
        "s3.delete_object(Bucket='botob', Key='k/copy')\n"
        "cfg = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)\n"
        "s3.upload_file(d + '/big', 'botob', 'k/big', Config=cfg,\n"
        "    ExtraArgs={'Metadata': {'part': 'many'}, 'ContentType': 'application/x-big'})\n"
        "hb = s3.head_object(Bucket='botob', Key='k/big')\n"
        "assert hb['ETag'].endswith('-3\"'), hb['ETag']\n"
        "assert hb['Metadata'] == {'part': 'many'} and hb['ContentType'] == 'application/x-big', "
        "hb\n"
        "s3.download_file('botob', 'k/big', d + '/bigback', Config=cfg)\n"
        "assert open(d + '/bigback', 'rb').read() == open(d + '/big', 'rb').read(), 'big'\n"
        "objs = s3.list_objects_v2(Bucket='botob', Prefix='k/')['Contents']\n"
        "keys = [o['Key'] for o in objs]\n"
        "assert keys == ['k/big', 'k/one'], keys\n"
        "assert objs[0]['ETag'] == hb['ETag'] and objs[1]['ETag'] == r['ETag'], objs\n"
        "u = s3.generate_presigned_url('get_object', Params={'Bucket': 'botob', 'Key': 'k/one'},\n"
        "    ExpiresIn=300)\n"
        "assert urllib.request.urlopen(u).read() == data, 'presigned'\n"
        "r = s3.delete_objects(Bucket='botob', Delete={'Objects': [{'Key': 'k/one'},\n"
        "    {'Key': 'k/big'}]})\n"
        "assert len(r['Deleted']) == 2, r\n"
        "s3.delete_bucket(Bucket='botob')\n"
        "print('boto3 ok')\n";

    if (t_sh("python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("boto3 is not installed");
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    gw_start(&g, NULL, extra);
    gw_file(&g, "f", 1024 * 1024 + 7, 61);
    gw_file(&g, "big", 12 * 1024 * 1024 + 5, 62);
    gw_python(&g, script, AK, SK, "boto3 ok");
    gw_stop(&g);
}

/*
 * s3fs-fuse: the gateway's bucket mounted as a file system and used as one
 * (files and directories made, renamed: CopyObject then DeleteObject;
 * chmod and touch: CopyObject with REPLACE metadata; a symbolic link; an
 * append, a truncate and a write in the middle of a file: the object put
 * again, multipart above s3fs's 10 MiB parts), then mounted again and read
 * back: every byte, mode and link target as written. Needs root and
 * /dev/fuse; each step under a timeout, the mount always undone.
 */
static void s3fs_unmount(void *arg)
{
    t_sh("mountpoint -q %s && umount -l %s", (const char *)arg, (const char *)arg);
}

/* A FUSE client's gateway (program prog, which needs root and
 * /dev/fuse): --s3-keys with one user, bucket made, the user's
 * "AK:SECRET" in scratch file pw, an empty mount point (its path into mnt,
 * unmounted when the test ends whatever happens). */
static void fuse_start(struct gw *g, const char *prog, const char *bucket, char *mnt, size_t cap)
{
    static char keys[256];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    if (t_sh("command -v %s >/dev/null", prog) != 0)
        T_SKIP("%s is not installed", prog);
    if (geteuid() != 0 || access("/dev/fuse", R_OK | W_OK) != 0)
        T_SKIP("%s needs root and /dev/fuse", prog);
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    gw_start(g, NULL, extra);
    T_EQ(gw_curl(g, "o", "-X PUT --aws-sigv4 aws:amz:us-east-1:s3 -u '%s:%s' %s/%s", AK, SK, g->url,
                 bucket),
         200);
    T_EQ(t_sh("printf '%%s:%%s\\n' %s '%s' > %s/pw && chmod 600 %s/pw && mkdir %s/mnt", AK, SK,
              g->dir, g->dir, g->dir),
         0);
    snprintf(mnt, cap, "%s/mnt", g->dir);
    t_on_exit(s3fs_unmount, mnt); /* a failed step leaves no mount behind */
}

TEST(s3fs)
{
    struct gw g;
    static char mnt[256]; /* for the exit hook */
    char opts[768];
    int rc;

    fuse_start(&g, "s3fs", "fsb", mnt, sizeof(mnt));
    snprintf(opts, sizeof(opts),
             "-o passwd_file=%s/pw -o url=%s -o use_path_request_style -o sigv4 "
             "-o endpoint=us-east-1 -o dbglevel=warn -o logfile=%s/s3fs.log",
             g.dir, g.url, g.dir);
    gw_file(&g, "big", 25 * 1024 * 1024 + 11, 71);
    rc = t_sh("timeout 20 s3fs fsb %s %s && for i in $(seq 50); do "
              "mountpoint -q %s && exit 0; sleep 0.1; done; exit 1",
              mnt, opts, mnt);
    if (rc != 0)
        T_SKIP("s3fs could not mount here (FUSE not usable)");
    rc = t_sh("cd %s && timeout 60 sh -e -c '"
              "echo hello > a.txt; mkdir -p d/e; echo x > d/e/b; cp ../big big; cp big big2; "
              "mv a.txt c.txt; echo more >> c.txt; chmod 640 c.txt; touch -d 2020-01-02 c.txt; "
              "ln -s c.txt link; truncate -s 1000000 big2; "
              "printf zz | dd of=big bs=1 seek=5000000 conv=notrunc 2>/dev/null; "
              "mv d/e/b d/e/b2; sync' > %s/fs.out 2>&1",
              mnt, g.dir);
    T_EQ(rc, 0);
    T_EQ(t_sh("timeout 20 umount %s", mnt), 0);
    /* Mounted again: what the gateway holds, not s3fs's cache. */
    T_EQ(t_sh("timeout 20 s3fs fsb %s %s && for i in $(seq 50); do "
              "mountpoint -q %s && exit 0; sleep 0.1; done; exit 1",
              mnt, opts, mnt),
         0);
    T_EQ(t_sh("cd %s && timeout 40 sh -e -c '"
              "test \"$(cat c.txt)\" = \"$(printf \"hello\\nmore\")\"; "
              "test $(stat -c %%a c.txt) = 640; "
              "test $(date -u -r c.txt +%%Y-%%m-%%d) = 2020-01-02 || "
              "test $(date -r c.txt +%%Y-%%m-%%d) = 2020-01-02; "
              "test \"$(readlink link)\" = c.txt; test ! -e a.txt; "
              "test \"$(cat d/e/b2)\" = x; test ! -e d/e/b; "
              "test $(stat -c %%s big2) = 1000000; cmp -s big2 ../big -n 1000000; "
              "cp ../big ../want; printf zz | dd of=../want bs=1 seek=5000000 conv=notrunc "
              "2>/dev/null; cmp big ../want; "
              "rm -r d big big2 c.txt link; test -z \"$(ls -A)\"' > %s/fs2.out 2>&1",
              mnt, g.dir),
         0);
    T_EQ(t_sh("timeout 20 umount %s", mnt), 0);
    /* Through the S3 API: nothing left in the bucket. */
    T_EQ(gw_curl(&g, "o", "--aws-sigv4 aws:amz:us-east-1:s3 -u '%s:%s' '%s/fsb?list-type=2'", AK,
                 SK, g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<KeyCount>0</KeyCount>"));
    gw_stop(&g);
}

/*
 * s3backer: the gateway's bucket as a block device of 16 MiB in 128 KiB
 * blocks, each block an object (PUT with Content-MD5, GET, HEAD; a block
 * written all zeros is DELETEd; its mount token written and removed; the
 * blocks listed at mount). Writes at unaligned offsets, a block zeroed,
 * unmounted (every block flushed), mounted again by a new process: the
 * device reads back byte for byte what the same writes make of a local
 * file. Needs root and /dev/fuse.
 */
TEST(s3backer)
{
    struct gw g;
    static char mnt[256]; /* for the exit hook */
    char opts[512];
    const char *writes = "dd if=big of=%s bs=4096 seek=300 conv=notrunc 2>/dev/null && "
                         "printf zz | dd of=%s bs=1 seek=5000001 conv=notrunc 2>/dev/null && "
                         "dd if=/dev/zero of=%s bs=128k seek=12 count=1 conv=notrunc 2>/dev/null";
    char cmd[1024];
    int rc;

    fuse_start(&g, "s3backer", "blk", mnt, sizeof(mnt));
    snprintf(opts, sizeof(opts),
             "--accessFile=%s/pw --baseURL=%s/ --authVersion=aws4 --blockSize=128k "
             "--size=16M --listBlocks",
             g.dir, g.url);
    gw_file(&g, "big", 3 * 1024 * 1024 + 5, 81);
    rc = t_sh("timeout 20 s3backer %s blk %s > %s/s3b.log 2>&1 && for i in $(seq 50); do "
              "test -e %s/file && exit 0; sleep 0.1; done; exit 1",
              opts, mnt, g.dir, mnt);
    if (rc != 0)
        T_SKIP("s3backer could not mount here (FUSE not usable)");
    /* the same writes on the device and on a local file */
    T_EQ(t_sh("cd %s && truncate -s 16M want", g.dir), 0);
    snprintf(cmd, sizeof(cmd), writes, "want", "want", "want");
    T_EQ(t_sh("cd %s && %s", g.dir, cmd), 0);
    snprintf(cmd, sizeof(cmd), writes, "mnt/file", "mnt/file", "mnt/file");
    T_EQ(t_sh("cd %s && timeout 60 sh -c '%s' && sync", g.dir, cmd), 0);
    /* unmounted: every block flushed before s3backer exits */
    T_EQ(t_sh("timeout 30 umount %s && for i in $(seq 300); do pgrep -x s3backer >/dev/null || "
              "exit 0; sleep 0.1; done; exit 1",
              mnt),
         0);
    /* 3 MiB from byte 1228800 on: blocks 9 to 33 but 12, all zeros; and
     * block 38 ("zz"); the mount token gone */
    T_EQ(gw_curl(&g, "o", "--aws-sigv4 aws:amz:us-east-1:s3 -u '%s:%s' '%s/blk?list-type=2'", AK,
                 SK, g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<KeyCount>25</KeyCount>"));
    T_EQ(t_sh("timeout 20 s3backer %s blk %s > %s/s3b2.log 2>&1 && for i in $(seq 50); do "
              "test -e %s/file && exit 0; sleep 0.1; done; exit 1",
              opts, mnt, g.dir, mnt),
         0);
    T_EQ(t_sh("cd %s && timeout 60 cmp mnt/file want", g.dir), 0);
    T_EQ(t_sh("timeout 30 umount %s && for i in $(seq 300); do pgrep -x s3backer >/dev/null || "
              "exit 0; sleep 0.1; done; exit 1",
              mnt),
         0);
    gw_stop(&g);
}
