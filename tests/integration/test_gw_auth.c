/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * The S3 gateway's authentication end to end: railiod --s3-listen with
 * --s3-keys (anonymous off), driven by curl --aws-sigv4, by boto3 (Debian's
 * python3-boto3: header-signed PUT/GET, presigned GET and PUT through curl)
 * and by aws-chunked uploads signed here with the s3:// client's own SigV4
 * code. Refused, each with its S3 error and nothing published: a wrong
 * secret, an unknown key, an unsigned request, a user outside its buckets,
 * an expired or tampered presigned URL, a body that is not the signed one,
 * a changed or truncated aws-chunked body. And railiod refuses to start on
 * a keys file others can read, naming it.
 */
#include <openssl/evp.h>

#include "gw_util.h"
#include "transport/s3/sign.h"

#define AK "GWAUTHKEY1"
#define SK "gw/auth+secret=1"

/* A private keys file in a fresh directory: its path. */
static const char *keys_file(void)
{
    static char path[256];
    static const char text[] = "# test_gw_auth\n" AK " " SK " bkt\n"
                               "NOBKTKEY other-secret elsewhere\n";

    snprintf(path, sizeof(path), "%s/keys", t_scratch_dir("gwauth"));
    t_write_file(path, text, strlen(text));
    T_EQ(chmod(path, 0600), 0);
    return path;
}

static void start(struct gw *g)
{
    const char *args[] = {"--no-anon", "--s3-keys", keys_file(), NULL};
    gw_start(g, NULL, args);
}

/* curl arguments for a GET of uri signed as of t. */
static const char *signed_get(struct gw *g, const char *uri, time_t t)
{
    static char args[2048];
    const struct rio_s3_signer s = {AK, SK, "us-east-1", "s3"};
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    char amz[17], auth[1024];
    struct rio_s3_kv h[3];

    T_NOTNULL(m);
    rio__s3_amzdate(t, amz);
    h[0] = (struct rio_s3_kv){"host", g->s3};
    h[1] = (struct rio_s3_kv){"x-amz-date", amz};
    h[2] = (struct rio_s3_kv){"x-amz-content-sha256", RIO_S3_UNSIGNED};
    T_EQ(rio__s3_sign(&s, m, "GET", uri, "", h, 3, RIO_S3_UNSIGNED, amz, auth, sizeof(auth)), 0);
    EVP_MD_CTX_free(m);
    snprintf(args, sizeof(args),
             "-H 'Authorization: %s' -H 'x-amz-date: %s' -H 'x-amz-content-sha256: %s' %s%s", auth,
             amz, RIO_S3_UNSIGNED, g->url, uri);
    return args;
}

#define SIGV4 "--aws-sigv4 aws:amz:us-east-1:s3 -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' "

TEST(curl_sigv4_users_and_refusals)
{
    struct gw g;

    start(&g);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -X PUT %s/bkt", g.url), 200);
    gw_file(&g, "src", 300000, 5);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -T %s %s/bkt/a%%20b", gw_path(&g, "src"),
                 g.url),
         200);
    T_EQ(gw_curl(&g, "got", SIGV4 "--user '" AK ":" SK "' %s/bkt/a%%20b", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    /* curl 7.x without x-amz-content-sha256 (it signs the empty hash). */
    T_EQ(gw_curl(&g, "got", "--aws-sigv4 aws:amz:us-east-1:s3 --user '" AK ":" SK "' %s/bkt/a%%20b",
                 g.url),
         200);
    T_TRUE(gw_same(&g, "got", "src"));

    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":wrong' %s/bkt/a%%20b", g.url), 403);
    T_TRUE(gw_has(&g, "o", "<Code>SignatureDoesNotMatch</Code>"));
    T_TRUE(gw_has(&g, "o", "The request signature we calculated does not match")); /* S3's */
    T_EQ(gw_curl(&g, "o", SIGV4 "--user 'NOSUCHKEY:" SK "' %s/bkt/a%%20b", g.url), 403);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidAccessKeyId</Code>"));
    T_EQ(gw_curl(&g, "o", "%s/bkt/a%%20b", g.url), 403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    /* A user whose keys file line does not list bkt. */
    T_EQ(gw_curl(&g, "o", SIGV4 "--user 'NOBKTKEY:other-secret' %s/bkt/a%%20b", g.url), 403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    /* An Authorization header that is not SigV4: 400, not 403. */
    T_EQ(gw_curl(&g, "o", "-H 'Authorization: AWS4-HMAC-SHA256 Credential=x' %s/bkt/a%%20b", g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>AuthorizationHeaderMalformed</Code>"));
    /* Signed right (here, with the s3:// client's signer), but dated 16
     * minutes off either way; 14 minutes is fine. */
    T_EQ(gw_curl(&g, "o", "%s", signed_get(&g, "/bkt/a%20b", time(NULL) - 16 * 60)), 403);
    T_TRUE(gw_has(&g, "o", "<Code>RequestTimeTooSkewed</Code>"));
    T_EQ(gw_curl(&g, "o", "%s", signed_get(&g, "/bkt/a%20b", time(NULL) + 16 * 60)), 403);
    T_TRUE(gw_has(&g, "o", "<Code>RequestTimeTooSkewed</Code>"));
    T_EQ(gw_curl(&g, "got", "%s", signed_get(&g, "/bkt/a%20b", time(NULL) - 14 * 60)), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    gw_stop(&g);
}

static const char boto_py[] =
    "import sys, datetime, hashlib, urllib.request, subprocess\n"
    "import boto3, botocore, botocore.auth, botocore.credentials\n"
    "from botocore.config import Config\n"
    "from botocore.awsrequest import AWSRequest\n"
    "ep, ak, sk, d = sys.argv[1:5]\n"
    "cfg = Config(signature_version='s3v4', s3={'addressing_style': 'path'},\n"
    "             retries={'max_attempts': 1})\n"
    "c = boto3.client('s3', endpoint_url=ep, aws_access_key_id=ak, aws_secret_access_key=sk,\n"
    "                 region_name='us-east-1', config=cfg)\n"
    "def code(f):\n"
    "    try:\n"
    "        f(); return 'OK'\n"
    "    except botocore.exceptions.ClientError as e:\n"
    "        return e.response['Error']['Code']\n"
    "body = open(d + '/src', 'rb').read()\n"
    "c.put_object(Bucket='bkt', Key='dir/k e+y~=%.bin', Body=body)\n"
    "assert c.get_object(Bucket='bkt', Key='dir/k e+y~=%.bin')['Body'].read() == body\n"
    "keys = [o['Key'] for o in c.list_objects_v2(Bucket='bkt', Prefix='dir/k e')['Contents']]\n"
    "assert keys == ['dir/k e+y~=%.bin'], keys\n"
    "url = c.generate_presigned_url('get_object', Params={'Bucket': 'bkt', 'Key': 'dir/k "
    "e+y~=%.bin'}, ExpiresIn=60)\n"
    "open(d + '/url_get', 'w').write(url)\n"
    "open(d + '/url_get_tampered', 'w').write(url.replace('Expires=60', 'Expires=61'))\n"
    "open(d + '/url_put', 'w').write(c.generate_presigned_url('put_object',\n"
    "    Params={'Bucket': 'bkt', 'Key': 'pre/put'}, ExpiresIn=60))\n"
    "open(d + '/url_expired', 'w').write(c.generate_presigned_url('get_object',\n"
    "    Params={'Bucket': 'bkt', 'Key': 'dir/k e+y~=%.bin'}, ExpiresIn=1))\n"
    "bad = boto3.client('s3', endpoint_url=ep, aws_access_key_id=ak,\n"
    "                   aws_secret_access_key=sk + 'x', region_name='us-east-1', config=cfg)\n"
    "print('wrong', code(lambda: bad.head_object(Bucket='bkt', Key='dir/k e+y~=%.bin')))\n"
    "req = AWSRequest('PUT', ep + '/bkt/tampered', data=b'good body',\n"
    "                 headers={'x-amz-content-sha256': hashlib.sha256(b'good body').hexdigest()})\n"
    "botocore.auth.S3SigV4Auth(botocore.credentials.Credentials(ak, sk), 's3',\n"
    "                          'us-east-1').add_auth(req)\n"
    "p = req.prepare()\n"
    "r = urllib.request.Request(p.url, data=b'evil body', method='PUT', headers=dict(p.headers))\n"
    "try:\n"
    "    urllib.request.urlopen(r); print('tampered OK')\n"
    "except urllib.error.HTTPError as e:\n"
    "    print('tampered', e.code, b'XAmzContentSHA256Mismatch' in e.read())\n"
    "print('after', code(lambda: c.head_object(Bucket='bkt', Key='tampered')))\n";

TEST(boto3_signed_and_presigned)
{
    struct gw g;

    if (t_sh("/usr/bin/python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("python3-boto3 not installed");
    start(&g);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -X PUT %s/bkt", g.url), 200);
    gw_file(&g, "src", 1000003, 9);
    t_write_file(gw_path(&g, "t.py"), boto_py, strlen(boto_py));
    T_EQ(t_sh("/usr/bin/python3 %s %s " AK " '" SK "' %s > %s 2>&1", gw_path(&g, "t.py"), g.url,
              g.dir, gw_path(&g, "py.out")) != 0
             ? t_sh("cat %s >&2", gw_path(&g, "py.out")) + 1
             : 0,
         0);
    T_TRUE(gw_has(&g, "py.out", "wrong 403") ||
           gw_has(&g, "py.out", "wrong SignatureDoesNotMatch"));
    T_TRUE(gw_has(&g, "py.out", "tampered 400 True"));
    T_TRUE(gw_has(&g, "py.out", "after 404") || gw_has(&g, "py.out", "after NoSuchKey"));

    /* Presigned GET through curl; a longer life written in: refused;
     * one valid for a second, two seconds later: expired. */
    T_EQ(gw_curl(&g, "got", "\"$(cat %s)\"", gw_path(&g, "url_get")), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    T_EQ(gw_curl(&g, "o", "\"$(cat %s)\"", gw_path(&g, "url_get_tampered")), 403);
    T_TRUE(gw_has(&g, "o", "<Code>SignatureDoesNotMatch</Code>"));
    t_sleep_ms(2100);
    T_EQ(gw_curl(&g, "o", "\"$(cat %s)\"", gw_path(&g, "url_expired")), 403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    T_TRUE(gw_has(&g, "o", "<Message>Request has expired</Message>")); /* S3's */
    /* Presigned PUT. */
    T_EQ(gw_curl(&g, "o", "-T %s \"$(cat %s)\"", gw_path(&g, "src"), gw_path(&g, "url_put")), 200);
    T_EQ(gw_curl(&g, "got", SIGV4 "--user '" AK ":" SK "' %s/bkt/pre/put", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    /* The same URL with an x-amz-* header it does not sign: refused, and
     * nothing written. x-amz-copy-source would make the upload a copy of
     * any object the signer may read; x-amz-meta-* would add metadata. */
    T_EQ(gw_curl(&g, "o", "-X PUT -d x -H 'x-amz-copy-source: /bkt/pre/put' \"$(cat %s)\"",
                 gw_path(&g, "url_put")),
         403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    T_TRUE(gw_has(&g, "o", "not signed"));
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-meta-evil: 1' \"$(cat %s)\"", gw_path(&g, "src"),
                 gw_path(&g, "url_put")),
         403);
    T_EQ(gw_curl(&g, "got", SIGV4 "--user '" AK ":" SK "' %s/bkt/pre/put", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    T_FALSE(gw_has(&g, "got.h", "x-amz-meta-evil"));
    gw_stop(&g);
}

/* Every x-amz-meta-* of a PutObject is signed, and S3 takes up to 2 KB of
 * them: boto3's put_object with 20 one-letter entries signs 25 headers,
 * curl with 30 signs 33. The verifier took at most 24 (the s3:// client's
 * own bound) and refused more 400 AuthorizationHeaderMalformed. */
static const char many_meta_py[] =
    "import sys, boto3\n"
    "from botocore.config import Config\n"
    "url, ak, sk = sys.argv[1:4]\n"
    "s3 = boto3.client('s3', endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk,\n"
    "                  region_name='us-east-1', config=Config(retries={'max_attempts': 1}))\n"
    "md = {'m%02d' % i: 'v%d' % i for i in range(60)}\n"
    "s3.put_object(Bucket='bkt', Key='meta60', Body=b'x', Metadata=md)\n"
    "assert s3.head_object(Bucket='bkt', Key='meta60')['Metadata'] == md\n"
    "print('ok')\n";

TEST(many_signed_metadata_headers)
{
    char hdrs[2048] = "";
    struct gw g;

    start(&g);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -X PUT %s/bkt", g.url), 200);
    for (unsigned i = 1; i <= 30; i++) /* two digits each: curl sorts "m1:" after "m10:" */
        snprintf(hdrs + strlen(hdrs), sizeof(hdrs) - strlen(hdrs), "-H 'x-amz-meta-m%02u: v%u' ", i,
                 i);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' %s -X PUT -d x %s/bkt/meta30", hdrs, g.url),
         200);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -I %s/bkt/meta30", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "x-amz-meta-m01: v1"));
    T_TRUE(gw_has(&g, "o.h", "x-amz-meta-m30: v30"));
    if (t_sh("python3 -c 'import boto3' 2>/dev/null") == 0) /* as gw_python runs it */
        gw_python(&g, many_meta_py, AK, SK, "ok");
    gw_stop(&g);
}

/* A header-signed request carrying an x-amz-* header its SignedHeaders do
 * not name: 403, as S3 answers ("There were headers present in the request
 * which were not signed"); the same request without it passes. */
TEST(unsigned_amz_header_refused)
{
    struct gw g;

    start(&g);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -X PUT %s/bkt", g.url), 200);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -X PUT -d hello %s/bkt/k", g.url), 200);
    T_EQ(gw_curl(&g, "got", "%s", signed_get(&g, "/bkt/k", time(NULL))), 200);
    T_TRUE(gw_has(&g, "got", "hello"));
    T_EQ(gw_curl(&g, "o", "-H 'x-amz-meta-extra: 1' %s", signed_get(&g, "/bkt/k", time(NULL))),
         403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    T_TRUE(gw_has(&g, "o", "There were headers present in the request which were not signed"));
    T_EQ(gw_curl(&g, "o", "-H 'X-Amz-Server-Side-Encryption: AES256' %s",
                 signed_get(&g, "/bkt/k", time(NULL))),
         403);
    /* Headers that are not x-amz-* need no signature. */
    T_EQ(gw_curl(&g, "got", "-H 'Accept: */*' -H 'X-Other: 1' %s",
                 signed_get(&g, "/bkt/k", time(NULL))),
         200);
    gw_stop(&g);
}

/*
 * An aws-chunked (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) PUT of n bytes of
 * pattern seed to /bkt/key in chunks of csize, signed now; corrupt: 1 flips
 * a payload byte after signing, 2 drops the final chunk; 3 is the
 * signed-trailer form (STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER) with an
 * x-amz-checksum-crc32c trailer, 4 the same with a wrong CRC signed. Written
 * to the scratch file "chunked"; the curl arguments that send it into args.
 */
static void chunked_put(struct gw *g, const char *key, size_t n, size_t csize, int corrupt,
                        char *args, size_t cap)
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    const struct rio_s3_signer s = {AK, SK, "us-east-1", "s3"};
    uint8_t *pay = t_pattern_buf(n, 21), skey[32];
    size_t bodycap = n + (n / csize + 2) * 128, o = 0;
    char *body = malloc(bodycap), amz[17], auth[1024], uri[256], prev[65], declen[32], host[96];
    char clen[32], sts[512], sha[65];
    struct rio_s3_kv h[7];
    const char *mode = corrupt >= 3 ? "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
                                    : "STREAMING-AWS4-HMAC-SHA256-PAYLOAD";
    int nh = corrupt == 2 ? 5 : 6;

    T_NOTNULL(m);
    T_NOTNULL(body);
    rio__s3_amzdate(time(NULL), amz);
    snprintf(uri, sizeof(uri), "/bkt/%s", key);
    snprintf(host, sizeof(host), "%s", g->s3);
    snprintf(declen, sizeof(declen), "%zu", n);
    /* The body's length first: it is signed (content-length). */
    {
        size_t len = 0;
        for (size_t off = 0;; off += csize) {
            size_t c = off >= n ? 0 : n - off < csize ? n - off : csize;
            len += (size_t)snprintf(NULL, 0, "%zx", c) + strlen(";chunk-signature=") + 64 + 4 + c;
            if (c == 0)
                break;
        }
        snprintf(clen, sizeof(clen), "%zu", len);
    }
    h[0] = (struct rio_s3_kv){"host", host};
    h[1] = (struct rio_s3_kv){"x-amz-date", amz};
    h[2] = (struct rio_s3_kv){"x-amz-content-sha256", mode};
    h[3] = (struct rio_s3_kv){"content-encoding", "aws-chunked"};
    h[4] = (struct rio_s3_kv){"x-amz-decoded-content-length", declen};
    h[5] = (struct rio_s3_kv){"content-length", clen};
    /* A cut body is sent with its own length: sign none, so that the
     * decoder, not the header, finds the missing final chunk. */
    if (corrupt >= 3) { /* the trailer: announced and signed, no content-length */
        h[5] = (struct rio_s3_kv){"x-amz-trailer", "x-amz-checksum-crc32c"};
        nh = 6;
    }
    T_EQ(rio__s3_sign(&s, m, "PUT", uri, "", h, (unsigned)nh, mode, amz, auth, sizeof(auth)), 0);
    memcpy(prev, strstr(auth, "Signature=") + 10, 65);
    {
        char date[9];
        memcpy(date, amz, 8);
        date[8] = '\0';
        T_EQ(rio__s3_signing_key(m, SK, date, "us-east-1", "s3", skey), 0);
    }
    for (size_t off = 0;; off += csize) {
        size_t c = off >= n ? 0 : n - off < csize ? n - off : csize;
        T_EQ(rio__s3_sha256_hex(m, pay + off, c, sha), 0);
        snprintf(sts, sizeof(sts),
                 "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%.8s/us-east-1/s3/aws4_request\n%s\n%s\n%s", amz,
                 amz, prev, RIO_S3_EMPTY_SHA256, sha);
        T_EQ(rio__s3_sign_sts(m, skey, sts, prev), 0);
        if (c == 0 && corrupt == 2)
            break;
        o += (size_t)snprintf(body + o, bodycap - o, "%zx;chunk-signature=%s\r\n", c, prev);
        if (c == 0 && corrupt >= 3) {
            uint32_t crc = rio__crc32c(0, pay, n) ^ (corrupt == 4);
            uint8_t be[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8),
                             (uint8_t)crc};
            char b64[16], canon[64], tsig[65];
            rio__s3_base64(be, 4, b64);
            snprintf(canon, sizeof(canon), "x-amz-checksum-crc32c:%s\n", b64);
            T_EQ(rio__s3_sha256_hex(m, canon, strlen(canon), sha), 0);
            snprintf(sts, sizeof(sts),
                     "AWS4-HMAC-SHA256-TRAILER\n%s\n%.8s/us-east-1/s3/aws4_request\n%s\n%s", amz,
                     amz, prev, sha);
            T_EQ(rio__s3_sign_sts(m, skey, sts, tsig), 0);
            o += (size_t)snprintf(body + o, bodycap - o,
                                  "x-amz-checksum-crc32c:%s\r\nx-amz-trailer-signature:%s\r\n\r\n",
                                  b64, tsig);
            break;
        }
        memcpy(body + o, pay + off, c);
        o += c;
        memcpy(body + o, "\r\n", 2);
        o += 2;
        if (c == 0)
            break;
    }
    if (corrupt == 1)
        body[o / 2] ^= 1;
    t_write_file(gw_path(g, "chunked"), body, o);
    t_write_file(gw_path(g, "chunked.src"), pay, n);
    snprintf(args, cap,
             "-X PUT --data-binary @%s -H 'Authorization: %s' -H 'x-amz-date: %s' "
             "-H 'x-amz-content-sha256: %s' %s "
             "-H 'Content-Encoding: aws-chunked' -H 'x-amz-decoded-content-length: %s' "
             "-H 'Content-Type:' %s%s",
             gw_path(g, "chunked"), auth, amz, mode,
             corrupt >= 3 ? "-H 'x-amz-trailer: x-amz-checksum-crc32c'" : "", declen, g->url, uri);
    if (corrupt >= 2) /* what was signed is longer than what is sent */
        T_NE(o, (size_t)atol(clen));
    else
        T_EQ(o, (size_t)atol(clen));
    free(body);
    free(pay);
    EVP_MD_CTX_free(m);
}

TEST(aws_chunked_uploads)
{
    struct gw g;
    static char args[4096];

    start(&g);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -X PUT %s/bkt", g.url), 200);
    chunked_put(&g, "ch/ok", 200000, 65536, 0, args, sizeof(args));
    T_EQ(gw_curl(&g, "o", "-m 20 %s", args), 200);
    T_EQ(gw_curl(&g, "got", SIGV4 "--user '" AK ":" SK "' %s/bkt/ch/ok", g.url), 200);
    T_TRUE(gw_same(&g, "got", "chunked.src"));
    T_FALSE(gw_has(&g, "got.h", "Content-Encoding")); /* the framing's, not stored */

    chunked_put(&g, "ch/bad", 200000, 65536, 1, args, sizeof(args));
    T_EQ(gw_curl(&g, "o", "%s", args), 403);
    T_TRUE(gw_has(&g, "o", "<Code>SignatureDoesNotMatch</Code>"));
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' %s/bkt/ch/bad", g.url), 404);

    chunked_put(&g, "ch/cut", 100000, 8192, 2, args, sizeof(args));
    T_EQ(gw_curl(&g, "o", "%s", args), 400);
    T_TRUE(gw_has(&g, "o", "<Code>IncompleteBody</Code>"));
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' %s/bkt/ch/cut", g.url), 404);

    /* Signed chunks and a signed CRC32C trailer (what the AWS SDKs for Java
     * and Go send over plain http); then a CRC that is not the payload's. */
    chunked_put(&g, "ch/trailer", 150000, 65536, 3, args, sizeof(args));
    T_EQ(gw_curl(&g, "o", "%s", args), 200);
    T_EQ(gw_curl(&g, "got", SIGV4 "--user '" AK ":" SK "' %s/bkt/ch/trailer", g.url), 200);
    T_TRUE(gw_same(&g, "got", "chunked.src"));
    chunked_put(&g, "ch/badcrc", 150000, 65536, 4, args, sizeof(args));
    T_EQ(gw_curl(&g, "o", "%s", args), 400);
    T_TRUE(gw_has(&g, "o", "<Code>BadDigest</Code>"));
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' %s/bkt/ch/badcrc", g.url), 404);
    gw_stop(&g);
}

TEST(keys_file_others_can_read)
{
    char bin[512];
    const char *keys = keys_file();

    gw_need();
    srv_binary(bin, sizeof(bin));
    T_EQ(chmod(keys, 0644), 0);
    T_NE(t_sh("timeout 20 %s --listen 127.0.0.1:0 --memory 64M --s3-listen 127.0.0.1:0 "
              "--s3-keys %s > %s.log 2>&1",
              bin, keys, keys),
         0);
    {
        char log[300];
        size_t n = 0;
        char *text;
        snprintf(log, sizeof(log), "%s.log", keys);
        text = (char *)t_slurp(log, &n);
        text = realloc(text, n + 1);
        text[n] = '\0';
        T_TRUE(strstr(text, keys) != NULL);
        T_TRUE(strstr(text, "chmod 600") != NULL);
        T_NULL(strstr(text, SK));
        free(text);
    }
}

/* Virtual-hosted style (--s3-domain): a request to BUCKET.DOMAIN is for
 * BUCKET, signed over the path it was sent with; the same objects as path
 * style. curl reaches the names through --connect-to, boto3
 * (addressing_style virtual) through a getaddrinfo that maps *.s3.test to
 * loopback. */
static const char vhost_py[] =
    "import socket, sys, urllib.request\n"
    "real = socket.getaddrinfo\n"
    "def fake(host, *a, **k):\n"
    "    return real('127.0.0.1' if str(host).endswith('s3.test') else host, *a, **k)\n"
    "socket.getaddrinfo = fake\n"
    "import boto3, botocore\n"
    "from botocore.config import Config\n"
    "from boto3.s3.transfer import TransferConfig\n"
    "ep, ak, sk, d = sys.argv[1:5]\n"
    "c = boto3.client('s3', endpoint_url=ep, aws_access_key_id=ak, aws_secret_access_key=sk,\n"
    "    region_name='us-east-1', config=Config(signature_version='s3v4',\n"
    "    s3={'addressing_style': 'virtual'}, retries={'max_attempts': 1}))\n"
    "body = open(d + '/src', 'rb').read()\n"
    "c.put_object(Bucket='bkt', Key='v/one', Body=body)\n"
    "assert c.get_object(Bucket='bkt', Key='v/one')['Body'].read() == body\n"
    "keys = [o['Key'] for o in c.list_objects_v2(Bucket='bkt', Prefix='v/')['Contents']]\n"
    "assert keys == ['v/one'], keys\n"
    "u = c.generate_presigned_url('get_object', Params={'Bucket': 'bkt', 'Key': 'v/one'})\n"
    "assert '//bkt.s3.test:' in u, u\n"
    "assert urllib.request.urlopen(u).read() == body, 'presigned'\n"
    "t = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20)\n"
    "c.upload_file(d + '/big', 'bkt', 'v/big', Config=t)\n"
    "c.download_file('bkt', 'v/big', d + '/bigback', Config=t)\n"
    "assert open(d + '/bigback', 'rb').read() == open(d + '/big', 'rb').read(), 'big'\n"
    "# SigV2 in virtual-hosted style: the resource is /BUCKET and the path\n"
    "c2 = boto3.client('s3', endpoint_url=ep, aws_access_key_id=ak, aws_secret_access_key=sk,\n"
    "    region_name='us-east-1', config=Config(signature_version='s3',\n"
    "    s3={'addressing_style': 'virtual'}, retries={'max_attempts': 1}))\n"
    "c2.put_object(Bucket='bkt', Key='v/two', Body=body)\n"
    "assert c2.get_object(Bucket='bkt', Key='v/two')['Body'].read() == body\n"
    "keys = [o['Key'] for o in c2.list_objects(Bucket='bkt', Prefix='v/t')['Contents']]\n"
    "assert keys == ['v/two'], keys\n"
    "u = c2.generate_presigned_url('get_object', Params={'Bucket': 'bkt', 'Key': 'v/two'})\n"
    "assert '//bkt.s3.test:' in u and 'Signature=' in u, u\n"
    "assert urllib.request.urlopen(u).read() == body, 'presigned v2'\n"
    "print('vhost ok')\n";

TEST(virtual_hosted_style)
{
    struct gw g;
    const char *args[] = {"--no-anon", "--s3-keys", keys_file(), "--s3-domain", "s3.test", NULL};
    char to[320], port[16], bin[512];

    srv_binary(bin, sizeof(bin));
    T_EQ(t_sh("%s --s3-listen 127.0.0.1:0 --s3-domain 'S3..test' 2>&1 | "
              "grep -q \"invalid value 'S3..test' for --s3-domain\"",
              bin),
         0);
    gw_start(&g, NULL, args);
    snprintf(port, sizeof(port), "%s", strrchr(g.s3, ':') + 1);
    /* curl: the names to loopback, the Host header as the name. */
    snprintf(to, sizeof(to),
             "--connect-to bkt.s3.test:%s:127.0.0.1:%s --connect-to BKT.S3.TEST:%s:"
             "127.0.0.1:%s --connect-to other.s3.test:%s:127.0.0.1:%s",
             port, port, port, port, port, port);
    gw_file(&g, "src", 300001, 11);
    gw_file(&g, "big", 11 * 1024 * 1024 + 3, 12);
    T_EQ(
        gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' %s -X PUT http://bkt.s3.test:%s/", to, port),
        200);
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' %s -T %s 'http://bkt.s3.test:%s/d/o%%201'",
                 to, gw_path(&g, "src"), port),
         200);
    /* The same object in path style, and through a Host in capitals. */
    T_EQ(gw_curl(&g, "got", SIGV4 "--user '" AK ":" SK "' '%s/bkt/d/o%%201'", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    T_EQ(gw_curl(&g, "got", SIGV4 "--user '" AK ":" SK "' %s 'http://BKT.S3.TEST:%s/d/o%%201'", to,
                 port),
         200);
    T_TRUE(gw_same(&g, "got", "src"));
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' %s 'http://bkt.s3.test:%s/?list-type=2'",
                 to, port),
         200);
    T_TRUE(gw_has(&g, "o", "<Key>d/o 1</Key>"));
    /* A name no bucket has ('/' would move the request elsewhere). */
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' -H 'Host: x/bkt.s3.test:%s' %s/d", port,
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidBucketName</Code>"));
    /* A bucket the user may not use, by name. */
    T_EQ(gw_curl(&g, "o", SIGV4 "--user '" AK ":" SK "' %s http://other.s3.test:%s/x", to, port),
         403);
    T_TRUE(gw_has(&g, "o", "<Code>AccessDenied</Code>"));
    if (t_sh("python3 -c 'import boto3' 2>/dev/null") == 0) {
        char ep[64];
        snprintf(ep, sizeof(ep), "http://s3.test:%s", port);
        t_write_file(gw_path(&g, "v.py"), vhost_py, strlen(vhost_py));
        T_EQ(t_sh("python3 %s %s " AK " '" SK "' %s > %s 2>&1 || { cat %s >&2; exit 1; }",
                  gw_path(&g, "v.py"), ep, g.dir, gw_path(&g, "v.out"), gw_path(&g, "v.out")),
             0);
        T_TRUE(gw_has(&g, "v.out", "vhost ok"));
    }
    gw_stop(&g);
}

/* A FIFO given as --s3-keys (or planted where the file should be): railiod
 * waited at start for a writer for ever; now it refuses it at once as not
 * a regular file, and so for --s3-tls-cert and --tls-cert (which OpenSSL
 * opened itself: SIGTERM did not end that wait either). */
TEST(keys_file_fifo_refused_at_start)
{
    char bin[512], fifo[600], log[640];
    const char *dir = t_scratch_dir("gw-fifo");

    gw_need();
    srv_binary(bin, sizeof(bin));
    snprintf(fifo, sizeof(fifo), "%s/keys", dir);
    snprintf(log, sizeof(log), "%s/log", dir);
    T_OK(mkfifo(fifo, 0600));
    T_EQ(t_sh("timeout -s KILL 20 %s --listen 127.0.0.1:0 --memory 64M --s3-listen "
              "127.0.0.1:0 --s3-keys %s > %s 2>&1",
              bin, fifo, log),
         1);
    T_EQ(t_sh("grep -q 'regular file' %s", log), 0);
    T_EQ(t_sh("timeout -s KILL 20 %s --listen 127.0.0.1:0 --memory 64M --s3-listen "
              "127.0.0.1:0 --s3-anonymous --s3-tls-cert %s --s3-tls-key %s > %s 2>&1",
              bin, fifo, fifo, log),
         1);
    T_EQ(t_sh("grep -q 'regular file' %s", log), 0);
    T_EQ(t_sh("timeout -s KILL 20 %s --listen 127.0.0.1:0 --memory 64M --tls-cert %s "
              "--tls-key %s > %s 2>&1",
              bin, fifo, fifo, log),
         1);
    T_EQ(t_sh("grep -q 'regular file' %s", log), 0);
}

/* The gateway's backend URL says nothing secret in the log ("s3 on ...
 * over railio://...?token=<the token>" was logged at info), and the
 * default backend takes a token file whose path has URL syntax in it (a
 * '&' made every S3 request 503: "unknown URL option"). */
TEST(backend_token_never_logged_and_any_token_path)
{
    struct gw a, b;
    char tok[512], backend[256];

    snprintf(tok, sizeof(tok), "%s/tok&x=1%%41#q?", t_scratch_dir("gwtok"));
    t_write_file(tok, "gw-auth-token-0123456789abcdef\n", 31);
    T_EQ(chmod(tok, 0600), 0);
    const char *args_a[] = {"--auth-token-file", tok, NULL};
    gw_start(&a, NULL, args_a);
    T_EQ(gw_curl(&a, "o", "-X PUT %s/bkt", a.url), 200);
    gw_file(&a, "src", 1000, 3);
    T_EQ(gw_curl(&a, "o", "-T %s %s/bkt/k", gw_path(&a, "src"), a.url), 200);
    T_EQ(gw_curl(&a, "got", "%s/bkt/k", a.url), 200);
    T_TRUE(gw_same(&a, "got", "src"));

    snprintf(backend, sizeof(backend), "railio://%s?token=gw-auth-token-0123456789abcdef",
             a.e.addr[0]);
    char log[512];
    snprintf(log, sizeof(log), "%s/b.log", t_scratch_dir("gwtok"));
    const char *args_b[] = {"--log-file", log, NULL};
    gw_start(&b, backend, args_b);
    T_EQ(gw_curl(&a, "got2", "%s/bkt/k", b.url), 200); /* through b, into a's directory */
    T_TRUE(gw_same(&a, "got2", "src"));
    gw_stop(&b); /* its log complete */
    T_EQ(t_sh("grep -q 's3 on http' %s", log), 0);
    T_NE(t_sh("grep -q 0123456789abcdef %s", log), 0);
    gw_stop(&a);
}
