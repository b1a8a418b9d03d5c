/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS integration net */
/* T_TIMEOUT 240 */
/*
 * A bucket's CORS configuration through the S3 gateway (docs/gateway.md,
 * "Browsers and CORS"): PutBucketCors, GetBucketCors and DeleteBucketCors
 * from boto3 and the aws CLI, each refusal with S3's code; preflight
 * OPTIONS answered without a signature from the bucket's rules (the origin
 * patterns of Ceph's s3-tests CORS cases), and the rule's headers on the
 * requests themselves, errors included; the configuration gone with its
 * bucket, one a crash or a race left never given to a new bucket of the
 * name, a damaged record ignored, a change made through one gateway seen
 * by another within the cache's second; and a real browser
 * (chromium-headless-shell) on another origin uploading with a presigned
 * PUT, reading the ETag the rule exposes, and blocked where no rule lets it.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "gw_util.h"
#include "t.h"

#define AK "AKIACORSTEST00000001"
#define SK "cors/secret/key/0123456789abcdefghijklmn"
#define AK2 "AKIACORSTEST00000002"
#define SK2 "another/secret/key/0123456789abcdefghijk"
/* curl 7.88 signs the empty body's hash unless told the payload is unsigned;
 * it also leaves the '=' off a query parameter without a value ("?cors"),
 * which SigV4 puts in: "?cors=" here */
#define SIGN                                                                                       \
    "--aws-sigv4 aws:amz:us-east-1:s3 -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' --user " AK ":" SK

static const char config_script[] =
    "import sys, boto3, botocore\n"
    "from botocore.config import Config\n"
    "url, ak, sk = sys.argv[1:4]\n"
    "def client(a, s):\n"
    "    return boto3.client('s3', endpoint_url=url, aws_access_key_id=a,\n"
    "        aws_secret_access_key=s, region_name='us-east-1',\n"
    "        config=Config(s3={'addressing_style': 'path'}))\n"
    "s3 = client(ak, sk)\n"
    "def refused(fn, status, code, **kw):\n"
    "    try:\n"
    "        fn(**kw)\n"
    "    except botocore.exceptions.ClientError as e:\n"
    "        got = (e.response['ResponseMetadata']['HTTPStatusCode'], "
    "e.response['Error']['Code'])\n"
    "        assert got == (status, code), (got, status, code)\n"
    "        return e.response['Error']['Message']\n"
    "    raise AssertionError('not refused: %s' % kw)\n"
    "s3.create_bucket(Bucket='web')\n"
    "refused(s3.get_bucket_cors, 404, 'NoSuchCORSConfiguration', Bucket='web')\n"
    "rules = [{'ID': 'app', 'AllowedOrigins': ['https://app.example.com', 'http://*.dev.test'],\n"
    "          'AllowedMethods': ['GET', 'PUT', 'POST'], 'AllowedHeaders': ['content-type',\n"
    "          'x-amz-*'], 'ExposeHeaders': ['ETag', 'x-amz-request-id'],\n"
    "          'MaxAgeSeconds': 600},\n"
    "         {'AllowedOrigins': ['*'], 'AllowedMethods': ['GET', 'HEAD']}]\n"
    "s3.put_bucket_cors(Bucket='web', CORSConfiguration={'CORSRules': rules})\n"
    "got = s3.get_bucket_cors(Bucket='web')['CORSRules']\n"
    "assert got == rules, got\n"
    "m = refused(s3.put_bucket_cors, 400, 'InvalidRequest', Bucket='web',\n"
    "    CORSConfiguration={'CORSRules': [{'AllowedOrigins': ['*'], 'AllowedMethods': "
    "['PATCH']}]})\n"
    "assert 'PATCH' in m, m\n"
    "refused(s3.put_bucket_cors, 400, 'InvalidRequest', Bucket='web',\n"
    "    CORSConfiguration={'CORSRules': [{'AllowedOrigins': ['*.a.*'], 'AllowedMethods': "
    "['GET']}]})\n"
    "refused(s3.put_bucket_cors, 400, 'InvalidRequest', Bucket='web',\n"
    "    CORSConfiguration={'CORSRules': [{'AllowedOrigins': ['*'], 'AllowedMethods': ['GET']}] * "
    "101})\n"
    "refused(s3.put_bucket_cors, 404, 'NoSuchBucket', Bucket='nobucket',\n"
    "    CORSConfiguration={'CORSRules': rules})\n"
    "# what was refused changed nothing\n"
    "assert s3.get_bucket_cors(Bucket='web')['CORSRules'] == rules\n"
    "# a user without the bucket may neither read nor change it\n"
    "other = client('" AK2 "', '" SK2 "')\n"
    "refused(other.get_bucket_cors, 403, 'AccessDenied', Bucket='web')\n"
    "refused(other.put_bucket_cors, 403, 'AccessDenied', Bucket='web',\n"
    "    CORSConfiguration={'CORSRules': rules})\n"
    "refused(other.delete_bucket_cors, 403, 'AccessDenied', Bucket='web')\n"
    "s3.delete_bucket_cors(Bucket='web')\n"
    "refused(s3.get_bucket_cors, 404, 'NoSuchCORSConfiguration', Bucket='web')\n"
    "s3.delete_bucket_cors(Bucket='web')  # none: still 204, as S3\n"
    "print('cors config ok')\n";

TEST(config_by_boto3_and_the_aws_cli)
{
    static const char cli_json[] = "{\"CORSRules\": [{\"AllowedOrigins\": [\"https://cli.test\"], "
                                   "\"AllowedMethods\": [\"DELETE\"], \"MaxAgeSeconds\": 5}]}";
    struct gw g;
    char keys[256], env[256];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    if (t_sh("python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("boto3 is not installed");
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n" AK2 " " SK2 " other\n");
    gw_start(&g, NULL, extra);
    gw_python(&g, config_script, AK, SK, "cors config ok");
    /* the aws CLI: its JSON in, the same rules out */
    snprintf(env, sizeof(env), "AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s'", AK, SK);
    t_write_file(gw_path(&g, "cors.json"), cli_json, strlen(cli_json));
    T_EQ(gw_aws(&g, env, "o",
                "s3api put-bucket-cors --bucket web --cors-configuration "
                "file://cors.json"),
         0);
    T_EQ(gw_aws(&g, env, "o", "s3api get-bucket-cors --bucket web --output json"), 0);
    T_TRUE(gw_has(&g, "o", "\"https://cli.test\""));
    T_TRUE(gw_has(&g, "o", "\"DELETE\""));
    T_TRUE(gw_has(&g, "o", "\"MaxAgeSeconds\": 5"));
    T_EQ(gw_aws(&g, env, "o", "s3api delete-bucket-cors --bucket web"), 0);
    T_NE(gw_aws(&g, env, "o", "s3api get-bucket-cors --bucket web"), 0);
    T_TRUE(gw_has(&g, "o", "NoSuchCORSConfiguration"));
    /* unsigned, with anonymous requests off: refused before anything */
    T_EQ(
        gw_curl(&g, "o", "-X PUT --data-binary @%s '%s/web?cors'", gw_path(&g, "cors.json"), g.url),
        403);
    T_TRUE(gw_has(&g, "o", "AccessDenied"));
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"PutBucketCors\",status=\"2xx\"}"), 2);
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"GetBucketCors\",status=\"4xx\"}"), 2);
    gw_stop(&g);
}

/* The rules of Ceph's s3-tests test_cors_origin_response, one more for
 * headers; PUT as curl --aws-sigv4 sends it. */
static const char rules_xml[] =
    "<CORSConfiguration>"
    "<CORSRule><AllowedOrigin>*suffix</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
    "</CORSRule>"
    "<CORSRule><AllowedOrigin>start*end</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
    "</CORSRule>"
    "<CORSRule><AllowedOrigin>prefix*</AllowedOrigin><AllowedMethod>PUT</AllowedMethod>"
    "</CORSRule>"
    "<CORSRule><AllowedOrigin>*.put</AllowedOrigin><AllowedMethod>PUT</AllowedMethod>"
    "</CORSRule>"
    "<CORSRule><AllowedOrigin>https://hdr.test</AllowedOrigin><AllowedMethod>PUT"
    "</AllowedMethod><AllowedHeader>x-amz-meta-*</AllowedHeader><AllowedHeader>content-type"
    "</AllowedHeader><ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>60</MaxAgeSeconds>"
    "</CORSRule></CORSConfiguration>";

/* OPTIONS of /web/obj from origin asking for method (and headers): the
 * status; the answer in scratch files o and o.h. */
static int preflight(struct gw *g, const char *path, const char *origin, const char *method,
                     const char *headers)
{
    char o[200] = "", m[200] = "", h[300] = "";

    if (origin)
        snprintf(o, sizeof(o), "-H 'Origin: %s'", origin);
    if (method)
        snprintf(m, sizeof(m), "-H 'Access-Control-Request-Method: %s'", method);
    if (headers)
        snprintf(h, sizeof(h), "-H 'Access-Control-Request-Headers: %s'", headers);
    return gw_curl(g, "o", "-X OPTIONS %s %s %s '%s%s'", o, m, h, g->url, path);
}

TEST(preflight_and_responses)
{
    struct gw g;
    char keys[256];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};
    static const struct {
        const char *origin, *method;
        int status;
    } cases[] = {
        {"foo.suffix", "GET", 200},     {"foo.bar", "GET", 403},
        {"foo.suffix.get", "GET", 403}, {"foo.bar.suffix", "GET", 200},
        {"startend", "GET", 200},       {"start1end", "GET", 200},
        {"start12end", "GET", 200},     {"0start12end", "GET", 403},
        {"prefix", "PUT", 200},         {"prefix.suffix", "PUT", 200},
        {"bla.prefix", "PUT", 403},     {"foo.put", "GET", 403},
        {"foo.put", "PUT", 200},        {"foo.suffix", "DELETE", 403},
        {"foo.suffix", "PATCH", 403},
    };

    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    gw_start(&g, NULL, extra);
    T_EQ(gw_curl(&g, "", "%s -X PUT '%s/web'", SIGN, g.url), 200);
    T_EQ(gw_curl(&g, "", "%s -X PUT '%s/bare'", SIGN, g.url), 200);
    t_write_file(gw_path(&g, "rules.xml"), rules_xml, strlen(rules_xml));
    T_EQ(gw_curl(&g, "o", "%s -X PUT --data-binary @%s '%s/web?cors='", SIGN,
                 gw_path(&g, "rules.xml"), g.url),
         200);
    T_EQ(gw_curl(&g, "", "%s -X PUT --data-binary 'the object' '%s/web/obj'", SIGN, g.url), 200);

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int st = preflight(&g, "/web/obj", cases[i].origin, cases[i].method, NULL);
        if (st != cases[i].status)
            T_FAIL("OPTIONS from %s for %s: %d, not %d", cases[i].origin, cases[i].method, st,
                   cases[i].status);
        if (st == 200) {
            char want[160];
            snprintf(want, sizeof(want), "Access-Control-Allow-Origin: %s", cases[i].origin);
            T_TRUE(gw_has(&g, "o.h", want));
            T_TRUE(gw_has(&g, "o.h", "Access-Control-Allow-Methods: "));
        } else {
            T_TRUE(gw_has(&g, "o", "<Code>AccessForbidden</Code>"));
            T_FALSE(gw_has(&g, "o.h", "Access-Control-Allow-Origin"));
        }
    }
    /* requested headers: each must be allowed (case-blind, wildcards) */
    T_EQ(preflight(&g, "/web/obj", "https://hdr.test", "PUT", "Content-Type, X-Amz-Meta-Color"),
         200);
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Allow-Headers: Content-Type, X-Amz-Meta-Color"));
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Expose-Headers: ETag"));
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Max-Age: 60"));
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Allow-Credentials: true"));
    T_TRUE(gw_has(&g, "o.h", "Vary: Origin"));
    T_EQ(preflight(&g, "/web/obj", "https://hdr.test", "PUT", "x-amz-meta-a, authorization"), 403);
    /* a preflight carries the query of the request it is for */
    T_EQ(preflight(&g, "/web/obj?uploadId=abc&partNumber=2&X-Amz-Signature=00", "https://hdr.test",
                   "PUT", NULL),
         200);
    /* what a preflight needs, and buckets without rules */
    T_EQ(preflight(&g, "/web/obj", NULL, "GET", NULL), 400);
    T_TRUE(gw_has(&g, "o", "Origin request header needed"));
    T_EQ(preflight(&g, "/web/obj", "foo.suffix", NULL, NULL), 400);
    T_EQ(preflight(&g, "/bare/obj", "foo.suffix", "GET", NULL), 403);
    T_TRUE(gw_has(&g, "o", "CORS is not enabled for this bucket"));
    T_EQ(preflight(&g, "/nobucket/obj", "foo.suffix", "GET", NULL), 403);
    T_EQ(preflight(&g, "/web", "foo.suffix", "GET", NULL), 200); /* the bucket's own URL */
    T_EQ(preflight(&g, "/", "foo.suffix", "GET", NULL), 403);

    /* The requests themselves: the matching rule's headers, errors too
     * (a browser shows a script the error only then); none for an origin
     * no rule lets in, nor without an Origin. */
    T_EQ(gw_curl(&g, "o", "%s -H 'Origin: foo.suffix' '%s/web/obj'", SIGN, g.url), 200);
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Allow-Origin: foo.suffix"));
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Allow-Methods: GET"));
    T_EQ(gw_curl(&g, "o", "%s -H 'Origin: foo.bar' '%s/web/obj'", SIGN, g.url), 200);
    T_FALSE(gw_has(&g, "o.h", "Access-Control"));
    T_EQ(gw_curl(&g, "o", "%s '%s/web/obj'", SIGN, g.url), 200);
    T_FALSE(gw_has(&g, "o.h", "Access-Control"));
    T_EQ(gw_curl(&g, "o", "%s -H 'Origin: foo.suffix' '%s/web/missing'", SIGN, g.url), 404);
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Allow-Origin: foo.suffix"));
    T_EQ(gw_curl(&g, "o", "-H 'Origin: foo.suffix' '%s/web/obj'", g.url), 403); /* unsigned */
    T_TRUE(gw_has(&g, "o", "AccessDenied"));
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Allow-Origin: foo.suffix"));
    /* the method decides: PUT from an origin with only a GET rule */
    T_EQ(gw_curl(&g, "o", "%s -X PUT --data-binary x -H 'Origin: foo.suffix' '%s/web/o2'", SIGN,
                 g.url),
         200);
    T_FALSE(gw_has(&g, "o.h", "Access-Control"));
    T_EQ(gw_curl(&g, "o", "%s -X PUT --data-binary x -H 'Origin: x.put' '%s/web/o2'", SIGN, g.url),
         200);
    T_TRUE(gw_has(&g, "o.h", "Access-Control-Allow-Origin: x.put"));
    /* deleted through this gateway: gone at once */
    T_EQ(gw_curl(&g, "", "%s -X DELETE '%s/web?cors='", SIGN, g.url), 204);
    T_EQ(preflight(&g, "/web/obj", "foo.suffix", "GET", NULL), 403);
    T_EQ(gw_curl(&g, "o", "%s -H 'Origin: foo.suffix' '%s/web/obj'", SIGN, g.url), 200);
    T_FALSE(gw_has(&g, "o.h", "Access-Control"));
    T_GE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"PreflightRequest\",status=\"2xx\"}"), 8);
    gw_stop(&g);
}

/* The configuration goes with its bucket; one a race or another program
 * left is not the new bucket's; a damaged one is no configuration; a
 * second gateway over the same store sees a change within its second. */
TEST(lifecycle_records_and_two_gateways)
{
    struct gw g, g2;
    char be[128];
    const char *extra2[2];

    gw_start(&g, NULL, NULL);
    t_write_file(gw_path(&g, "rules.xml"), rules_xml, strlen(rules_xml));
    T_EQ(gw_curl(&g, "", "-X PUT '%s/web'", g.url), 200);
    T_EQ(gw_curl(&g, "", "-X PUT --data-binary @%s '%s/web?cors'", gw_path(&g, "rules.xml"), g.url),
         200);
    T_EQ(preflight(&g, "/web/k", "foo.suffix", "GET", NULL), 200);
    /* the record is the backend object .rio-cors/web; a railio client
     * reads it */
    T_EQ(t_sh("%s/railio get railio://%s/.rio-cors/web %s > /dev/null 2>&1", getenv("T_BUILD_DIR"),
              g.e.addr[0], gw_path(&g, "rec")),
         0);
    T_EQ(t_sh("head -1 %s | grep -qx 'railio-s3-cors 1'", gw_path(&g, "rec")), 0);

    /* a second gateway over the first's store */
    snprintf(be, sizeof(be), "railio://%s", g.e.addr[0]);
    extra2[0] = NULL;
    gw_start(&g2, be, extra2);
    T_EQ(preflight(&g2, "/web/k", "foo.suffix", "GET", NULL), 200);
    T_EQ(gw_curl(&g, "", "-X DELETE '%s/web?cors'", g.url), 204);
    usleep(1200 * 1000); /* the second gateway's cached copy expires */
    T_EQ(preflight(&g2, "/web/k", "foo.suffix", "GET", NULL), 403);
    T_EQ(gw_curl(&g2, "", "-X PUT --data-binary @%s '%s/web?cors'", gw_path(&g, "rules.xml"),
                 g2.url),
         200);
    usleep(1200 * 1000);
    T_EQ(preflight(&g, "/web/k", "foo.suffix", "GET", NULL), 200);
    gw_stop(&g2);

    /* damaged on the backend: no CORS (and a warning), never a crash */
    t_write_file(gw_path(&g, "bad"), "railio-s3-cors 1\n<CORSConfiguration>", 37);
    T_EQ(t_sh("%s/railio put railio://%s/.rio-cors/web %s > /dev/null 2>&1", getenv("T_BUILD_DIR"),
              g.e.addr[0], gw_path(&g, "bad")),
         0);
    usleep(1200 * 1000);
    T_EQ(preflight(&g, "/web/k", "foo.suffix", "GET", NULL), 403);
    T_EQ(gw_curl(&g, "o", "'%s/web?cors'", g.url), 404);
    T_TRUE(gw_has(&g, "o", "NoSuchCORSConfiguration"));

    /* DeleteBucket takes it away: the bucket made again has none */
    T_EQ(gw_curl(&g, "", "-X PUT --data-binary @%s '%s/web?cors'", gw_path(&g, "rules.xml"), g.url),
         200);
    T_EQ(gw_curl(&g, "", "-X DELETE '%s/web'", g.url), 204);
    T_NE(t_sh("%s/railio stat railio://%s/.rio-cors/web > /dev/null 2>&1", getenv("T_BUILD_DIR"),
              g.e.addr[0]),
         0);
    T_EQ(gw_curl(&g, "", "-X PUT '%s/web'", g.url), 200);
    T_EQ(gw_curl(&g, "o", "'%s/web?cors'", g.url), 404);
    T_EQ(preflight(&g, "/web/k", "foo.suffix", "GET", NULL), 403);
    /* one left behind for a bucket that does not exist (a PutBucketCors
     * that raced the DeleteBucket): CreateBucket removes it */
    T_EQ(t_sh("%s/railio put railio://%s/.rio-cors/fresh %s > /dev/null 2>&1",
              getenv("T_BUILD_DIR"), g.e.addr[0], gw_path(&g, "rec")),
         0);
    T_EQ(gw_curl(&g, "", "-X PUT '%s/fresh'", g.url), 200);
    T_EQ(gw_curl(&g, "o", "'%s/fresh?cors'", g.url), 404);
    T_EQ(preflight(&g, "/fresh/k", "foo.suffix", "GET", NULL), 403);
    gw_stop(&g);
}

/* The page a browser loads from another origin: a presigned PUT of a
 * string, then a presigned GET of it (reading the ETag the rule exposes),
 * a presigned DELETE (no rule lets it: the browser must not send it), and
 * a PUT into a bucket without CORS (blocked too). */
static const char page_script[] =
    "import sys, json, boto3\n"
    "from botocore.config import Config\n"
    "url, ak, sk, d = sys.argv[1:5]\n"
    "origin = open(d + '/origin').read().strip()\n"
    "s3 = boto3.client('s3', endpoint_url=url, aws_access_key_id=ak, aws_secret_access_key=sk,\n"
    "    region_name='us-east-1', config=Config(signature_version='s3v4',\n"
    "    s3={'addressing_style': 'path'}))\n"
    "s3.create_bucket(Bucket='web')\n"
    "s3.create_bucket(Bucket='closed')\n"
    "s3.put_bucket_cors(Bucket='web', CORSConfiguration={'CORSRules': [{\n"
    "    'AllowedOrigins': [origin], 'AllowedMethods': ['GET', 'PUT'],\n"
    "    'AllowedHeaders': ['*'], 'ExposeHeaders': ['ETag']}]})\n"
    "u = {'put': s3.generate_presigned_url('put_object', Params={'Bucket': 'web',\n"
    "         'Key': 'from/browser.txt'}, ExpiresIn=600),\n"
    "     'get': s3.generate_presigned_url('get_object', Params={'Bucket': 'web',\n"
    "         'Key': 'from/browser.txt'}, ExpiresIn=600),\n"
    "     'del': s3.generate_presigned_url('delete_object', Params={'Bucket': 'web',\n"
    "         'Key': 'from/browser.txt'}, ExpiresIn=600),\n"
    "     'closed': s3.generate_presigned_url('put_object', Params={'Bucket': 'closed',\n"
    "         'Key': 'x'}, ExpiresIn=600)}\n"
    "page = '''<!doctype html><html><body><pre id=\"out\">pending</pre><script>\n"
    "const u = %s;\n"
    "async function step(out, name, f) {\n"
    "  try { out.push(name + ' ' + await f()); } catch (e) { out.push(name + ' blocked ' + "
    "e.name); }\n"
    "}\n"
    "(async () => {\n"
    "  const out = [];\n"
    "  await step(out, 'put', async () => { const r = await fetch(u.put, {method: 'PUT',\n"
    "      body: 'bytes from a browser', headers: {'Content-Type': 'text/plain'}});\n"
    "      return r.status + ' etag=' + r.headers.get('ETag'); });\n"
    "  await step(out, 'get', async () => { const r = await fetch(u.get);\n"
    "      return r.status + ' ' + await r.text(); });\n"
    "  await step(out, 'delete', async () => (await fetch(u.del, {method: 'DELETE'})).status);\n"
    "  await step(out, 'closed', async () => (await fetch(u.closed, {method: 'PUT', body: "
    "'x'})).status);\n"
    "  document.getElementById('out').textContent = out.join(' | ') + ' | done';\n"
    "})();\n"
    "</script></body></html>''' % json.dumps(u)\n"
    "import os\n"
    "os.makedirs(d + '/site', exist_ok=True)\n"
    "open(d + '/site/page.html', 'w').write(page)\n"
    "print('page ok')\n";

static void kill_site(void *arg)
{
    t_sh("kill %d 2>/dev/null", *(int *)arg);
}

TEST(a_browser_on_another_origin)
{
    struct gw g;
    char keys[256], origin[64];
    static int site_pid;
    int port;

    if (t_sh("command -v chromium-headless-shell >/dev/null") != 0)
        T_SKIP("chromium-headless-shell is not installed (scripts/install-deps.sh test installs "
               "it)");
    if (t_sh("python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("boto3 is not installed");
    gw_keys_file(keys, sizeof(keys), AK " " SK " *\n");
    {
        const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};
        gw_start(&g, NULL, extra);
    }
    port = t_free_port();
    snprintf(origin, sizeof(origin), "http://127.0.0.1:%d", port);
    t_write_file(gw_path(&g, "origin"), origin, strlen(origin));
    gw_python(&g, page_script, AK, SK, "page ok");
    /* the page's origin: another port, so another origin than the gateway */
    T_EQ(t_sh("cd %s/site && { python3 -m http.server %d --bind 127.0.0.1 > ../site.log 2>&1 & "
              "echo $! > ../site.pid; }",
              g.dir, port),
         0);
    site_pid = t_read_int(gw_path(&g, "site.pid"));
    t_on_exit(kill_site, &site_pid);
    T_EQ(t_sh("for i in $(seq 100); do curl -sf -o /dev/null %s/page.html && exit 0; sleep 0.1; "
              "done; exit 1",
              origin),
         0);
    T_EQ(t_sh("cd %s && HOME=%s timeout 90 chromium-headless-shell --no-sandbox --disable-gpu "
              "--user-data-dir=%s/chrome --virtual-time-budget=30000 --dump-dom "
              "%s/page.html > dom 2> chrome.log || { tail -20 chrome.log >&2; exit 1; }",
              g.dir, g.dir, g.dir, origin),
         0);
    if (!gw_has(&g, "dom", "| done"))
        t_sh("cat %s >&2; tail -20 %s >&2", gw_path(&g, "dom"), gw_path(&g, "chrome.log"));
    /* The PUT went through its preflight; the script read the ETag (the
     * MD5 of its 20 bytes) because the rule exposes it, and the body. */
    T_TRUE(gw_has(&g, "dom", "put 200 etag=\"09da44e5c1efdf284fea4e426eff6737\""));
    T_TRUE(gw_has(&g, "dom", "get 200 bytes from a browser"));
    T_TRUE(gw_has(&g, "dom", "delete blocked TypeError"));
    T_TRUE(gw_has(&g, "dom", "closed blocked TypeError"));
    T_TRUE(gw_has(&g, "dom", "| done"));
    /* what the browser did, seen from outside: the object is there, whole
     * (the DELETE was never sent), nothing in the closed bucket */
    T_EQ(gw_curl(&g, "got", "%s '%s/web/from/browser.txt'", SIGN, g.url), 200);
    T_TRUE(gw_has(&g, "got", "bytes from a browser"));
    T_EQ(gw_curl(&g, "", "%s '%s/closed/x'", SIGN, g.url), 404);
    T_LE(srv_scrape(&g.e, "railiod_s3_requests_total{op=\"DeleteObject\",status=\"2xx\"}"), 0);
    gw_stop(&g);
}
