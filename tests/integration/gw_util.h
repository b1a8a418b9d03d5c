/* SPDX-License-Identifier: Apache-2.0 */
/*
 * gw_util.h: the S3 gateway's tests (test_gw_*.c) start railiod with
 * --s3-listen on a free loopback port and drive it with curl(1) and the aws
 * CLI. Every command's output goes to files in the server's directory;
 * bodies are compared byte for byte with cmp(1).
 *
 *     struct gw g;
 *     gw_start(&g, "mock://", NULL);        // NULL backend: the server's own store
 *     T_EQ(gw_curl(&g, "out", "-X PUT %s/bkt", g.url), 200);
 *     gw_stop(&g);
 */
#ifndef RIO_TEST_GW_UTIL_H
#define RIO_TEST_GW_UTIL_H

#include <stdarg.h>

#include "server_env.h"
#include "tlib.h"

struct gw {
    struct srv_env e;
    char s3[80];      /* host:port of the gateway */
    char url[96];     /* http://host:port */
    char dir[160];    /* scratch files (the server's directory) */
    char awsenv[512]; /* the aws CLI's environment: its config, no credentials file */
};

/* Skip unless railiod was built with the gateway and curl(1) is there. */
static inline void gw_need(void)
{
    char bin[512];

    srv_binary(bin, sizeof(bin));
    if (t_sh("%s --s3-listen 127.0.0.1:0 --sync 2>&1 | grep -q 'built without the S3 gateway'",
             bin) == 0)
        T_SKIP("railiod built without libmicrohttpd (no --s3-listen)");
    if (t_sh("command -v curl >/dev/null") != 0)
        T_SKIP("curl(1) not installed");
}

/* Start railiod with the gateway over backend (NULL: its own store), extra
 * args (NULL-terminated, may be NULL); anonymous unless extra says
 * otherwise through "--no-anon" as its first element. */
static inline void gw_start(struct gw *g, const char *backend, const char *const *extra)
{
    const char *args[40];
    int n = 0, anon = 1;

    gw_need();
    memset(g, 0, sizeof(*g));
    args[n++] = "--s3-listen";
    args[n++] = "127.0.0.1:0";
    args[n++] = "--metrics";
    args[n++] = "127.0.0.1:0";
    if (extra && extra[0] && strcmp(extra[0], "--no-anon") == 0) {
        anon = 0;
        extra++;
    }
    if (anon)
        args[n++] = "--s3-anonymous";
    if (backend) {
        args[n++] = "--s3-backend";
        args[n++] = backend;
    }
    for (; extra && *extra && n < 38; extra++)
        args[n++] = *extra;
    args[n] = NULL;
    srv_start(&g->e, args);
    T_TRUE(g->e.s3[0] != '\0');
    snprintf(g->s3, sizeof(g->s3), "%s", g->e.s3);
    snprintf(g->url, sizeof(g->url), "http://%s", g->s3);
    snprintf(g->dir, sizeof(g->dir), "%s", t_scratch_dir("gw"));
    snprintf(g->awsenv, sizeof(g->awsenv),
             "AWS_CONFIG_FILE=%s/awscfg AWS_SHARED_CREDENTIALS_FILE=/dev/null "
             "AWS_DEFAULT_REGION=us-east-1 AWS_EC2_METADATA_DISABLED=true",
             g->dir);
    /* One PUT per object (test_gw_multipart has its own config). */
    t_sh("printf '[default]\\ns3 =\\n    multipart_threshold = 4GB\\n    signature_version = "
         "s3v4\\n' > %s/awscfg",
         g->dir);
}

static inline void gw_stop(struct gw *g)
{
    T_EQ(srv_stop(&g->e), 0);
}

/* Run the aws CLI in the scratch directory: env (extra assignments, e.g.
 * credentials or another AWS_CONFIG_FILE; "" for none), unsigned when env
 * gives no credentials; its output in scratch file out. The exit status. */
static inline int gw_aws(struct gw *g, const char *env, const char *out, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* A --s3-keys file holding text (mode 0600, as railiod wants it) in a
 * scratch directory of its own, its path into path. */
static inline void gw_keys_file(char *path, size_t cap, const char *text)
{
    snprintf(path, cap, "%s/keys", t_scratch_dir("gwkeys"));
    t_write_file(path, text, strlen(text));
    T_EQ(chmod(path, 0600), 0);
}

/* Path of a scratch file. */
static inline const char *gw_path(struct gw *g, const char *name)
{
    static __thread char p[4][256];
    static __thread int i;
    i = (i + 1) % 4;
    snprintf(p[i], sizeof(p[i]), "%s/%s", g->dir, name);
    return p[i];
}

/* curl -s ARGS (printf-style, after the fixed options); the body goes to
 * the scratch file out ("" discards it), headers to out.h. Returns the HTTP
 * status, or -1 when curl failed. */
static inline int gw_curl(struct gw *g, const char *out, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int gw_curl(struct gw *g, const char *out, const char *fmt, ...)
{
    char args[4096], code[256];
    va_list ap;
    int st;

    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(code, sizeof(code), "%s/code", g->dir);
    st = t_sh("curl -s -m 60 -o '%s' -D '%s%s' -w '%%{http_code}' %s > '%s'",
              *out ? gw_path(g, out) : "/dev/null", *out ? gw_path(g, out) : "/dev/null",
              *out ? ".h" : "", args, code);
    if (st != 0)
        return -1;
    return t_read_int(code);
}

static inline int gw_aws(struct gw *g, const char *env, const char *out, const char *fmt, ...)
{
    char args[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    return t_sh("cd %s && %s %s aws --endpoint-url %s %s %s > %s 2>&1", g->dir, g->awsenv, env,
                g->url, strstr(env, "AWS_ACCESS_KEY_ID") ? "" : "--no-sign-request", args,
                gw_path(g, out));
}

/* Does scratch file name contain needle? */
static inline int gw_has(struct gw *g, const char *name, const char *needle)
{
    size_t n = 0;
    char *text = (char *)t_slurp(gw_path(g, name), &n);
    int ret;

    if (!text)
        return 0;
    text = realloc(text, n + 1);
    text[n] = '\0';
    ret = strstr(text, needle) != NULL;
    free(text);
    return ret;
}

/* Run the Python script text (written to the scratch file t.py) as
 * `python3 t.py URL AK SK DIR` against g, its output in scratch file out,
 * shown when it fails; it must exit 0 and print ok_line. */
static inline void gw_python(struct gw *g, const char *text, const char *ak, const char *sk,
                             const char *ok_line)
{
    const char *py = gw_path(g, "t.py"), *out = gw_path(g, "out");

    t_write_file(py, text, strlen(text));
    T_EQ(t_sh("python3 %s %s %s '%s' %s > %s 2>&1 || { cat %s >&2; exit 1; }", py, g->url, ak, sk,
              g->dir, out, out),
         0);
    T_TRUE(gw_has(g, "out", ok_line));
}

/* Write n bytes of pattern seed to scratch file name. */
static inline void gw_file(struct gw *g, const char *name, size_t n, uint64_t seed)
{
    uint8_t *b = t_pattern_buf(n, seed);
    t_write_file(gw_path(g, name), b, n);
    free(b);
}

/* Is scratch file got the n bytes of scratch file src from offset off on? */
static inline int gw_range_is(struct gw *g, const char *got, const char *src, uint64_t off,
                              uint64_t n)
{
    char s[256];
    snprintf(s, sizeof(s), "%s", gw_path(g, src));
    return t_sh("tail -c +%llu '%s' | head -c %llu | cmp -s - '%s'", (unsigned long long)off + 1, s,
                (unsigned long long)n, gw_path(g, got)) == 0;
}

/* Are scratch files a and b the same bytes? */
static inline int gw_same(struct gw *g, const char *a, const char *b)
{
    return t_sh("cmp -s '%s' '%s'", gw_path(g, a), gw_path(g, b)) == 0;
}

/* Eight PUTs of bucket/key at once, each `If-None-Match: *` with body
 * "racerI", odd I through url_a and even through url_b: exactly one is
 * 200, the other seven 412 (checked), and the key holds the winner's body
 * (checked through url_b). */
static inline void gw_race_if_none_match(struct gw *g, const char *url_a, const char *url_b,
                                         const char *bk)
{
    T_EQ(t_sh("cd %s && for i in 1 2 3 4 5 6 7 8; do u=%s; [ $((i %% 2)) = 0 ] && u=%s; "
              "curl -s -o /dev/null -w '%%{http_code}\\n' -X PUT -d racer$i "
              "-H 'If-None-Match: *' $u/%s > st$i & done; wait; "
              "cat st? | sort | uniq -c | tr -s ' ' > counts; grep -l 200 st? | tr -dc 0-9 > won",
              g->dir, url_a, url_b, bk),
         0);
    T_TRUE(gw_has(g, "counts", " 1 200\n"));
    T_TRUE(gw_has(g, "counts", " 7 412\n"));
    T_EQ(t_sh("cd %s && curl -sf -o winner %s/%s && printf racer$(cat won) | cmp -s - winner",
              g->dir, url_b, bk),
         0);
}

/* The record key of bucket/key: ".rio-meta/BUCKET/<SHA-256 of KEY>". */
static inline void gw_record_key(struct gw *g, const char *bucket, const char *key, char *out,
                                 size_t cap)
{
    size_t n = 0;
    char *h;

    T_EQ(t_sh("printf %%s '%s' | sha256sum | cut -c1-64 > %s", key, gw_path(g, "sha")), 0);
    h = (char *)t_slurp(gw_path(g, "sha"), &n);
    T_TRUE(h != NULL);
    T_EQ(n, 65u);
    snprintf(out, cap, ".rio-meta/%s/%.64s", bucket, h);
    free(h);
}

/* The text of scratch file name (at most cap - 1 bytes) into out. */
static inline void gw_slurp_str(struct gw *g, const char *name, char *out, size_t cap)
{
    size_t n = 0;
    char *t = (char *)t_slurp(gw_path(g, name), &n);

    T_TRUE(t != NULL);
    snprintf(out, cap, "%.*s", (int)n, t);
    free(t);
}

/* The <UploadId> (32 hex digits) of scratch file name, an XML answer, into id. */
static inline void gw_upload_id(struct gw *g, const char *name, char *id, size_t cap)
{
    T_EQ(t_sh("sed -n 's/.*<UploadId>\\([0-9a-f]*\\)<\\/UploadId>.*/\\1/p' %s | tr -d '\\n' > %s",
              gw_path(g, name), gw_path(g, "id")),
         0);
    gw_slurp_str(g, "id", id, cap);
    T_EQ(strlen(id), 32u);
}

/* Start a gateway over the server's own store (anonymous) and run the
 * boto3 script (its argument the gateway's URL): it must exit 0 and print
 * ok. Skips when boto3 is not installed. */
static inline void gw_boto3(struct gw *g, const char *script, const char *ok)
{
    if (t_sh("python3 -c 'import boto3' 2>/dev/null") != 0)
        T_SKIP("boto3 is not installed");
    gw_start(g, NULL, NULL);
    t_write_file(gw_path(g, "t.py"), script, strlen(script));
    T_EQ(t_sh("python3 %s %s > %s 2>&1 || { cat %s >&2; exit 1; }", gw_path(g, "t.py"), g->url,
              gw_path(g, "out"), gw_path(g, "out")),
         0);
    T_TRUE(gw_has(g, "out", ok));
}

/* done.xml: the Complete body listing scratch files p1..pN as parts 1..n,
 * each with its MD5 as ETag. */
static inline void gw_mpu_xml(struct gw *g, unsigned n)
{
    T_EQ(t_sh("cd %s && printf '<CompleteMultipartUpload>' > done.xml && for i in $(seq 1 %u); "
              "do printf '<Part><PartNumber>%%s</PartNumber><ETag>\"%%s\"</ETag></Part>' $i "
              "$(md5sum p$i | cut -c1-32) >> done.xml; done && "
              "printf '</CompleteMultipartUpload>' >> done.xml",
              g->dir, n),
         0);
}

/* A multipart upload of bucket/key (curl) of scratch files p1 .. pN as
 * parts 1 .. n; its id into id; scratch file done.xml the Complete that
 * lists them with their MD5s. */
static inline void gw_mpu_parts(struct gw *g, const char *bucket, const char *key, unsigned n,
                                char *id, size_t cap)
{
    T_EQ(gw_curl(g, "c", "-X POST '%s/%s/%s?uploads'", g->url, bucket, key), 200);
    gw_upload_id(g, "c", id, cap);
    for (unsigned i = 1; i <= n; i++) {
        char part[16];
        snprintf(part, sizeof(part), "p%u", i);
        T_EQ(gw_curl(g, "o", "-T %s '%s/%s/%s?partNumber=%u&uploadId=%s'", gw_path(g, part), g->url,
                     bucket, key, i, id),
             200);
    }
    gw_mpu_xml(g, n);
}

/* Complete upload id of bucket/key with scratch file done.xml and the
 * header hdr (a condition); the status, the answer in scratch file "o". */
static inline int gw_complete_if(struct gw *g, const char *bucket, const char *key, const char *id,
                                 const char *hdr)
{
    return gw_curl(g, "o", "-X POST -H '%s' --data-binary @%s '%s/%s/%s?uploadId=%s'", hdr,
                   gw_path(g, "done.xml"), g->url, bucket, key, id);
}

/* CompleteMultipartUpload with If-None-Match: * and If-Match, in bucket:
 * a new key is written; over a key that holds an object 412, nothing
 * written and the upload kept (Complete again with If-Match: * makes it);
 * If-Match on a key with nothing 404. Every byte compared. */
static inline void gw_conditional_completes(struct gw *g, const char *bucket)
{
    char id[64];

    gw_file(g, "p1", 5u << 20, 51);
    gw_file(g, "p2", 1000, 52);
    T_EQ(t_sh("cat %s %s > %s", gw_path(g, "p1"), gw_path(g, "p2"), gw_path(g, "whole")), 0);
    gw_mpu_parts(g, bucket, "m1", 2, id, sizeof(id));
    T_EQ(gw_complete_if(g, bucket, "m1", id, "If-None-Match: *"), 200);
    T_TRUE(gw_has(g, "o", "<CompleteMultipartUploadResult"));
    T_EQ(gw_curl(g, "got", "%s/%s/m1", g->url, bucket), 200);
    T_TRUE(gw_same(g, "got", "whole"));
    /* The same Complete again (a client's retry of an answer it lost): the
     * object is its own, 200. */
    T_EQ(gw_complete_if(g, bucket, "m1", id, "If-None-Match: *"), 200);
    gw_file(g, "p1", 5u << 20, 53);
    T_EQ(t_sh("cat %s %s > %s", gw_path(g, "p1"), gw_path(g, "p2"), gw_path(g, "whole2")), 0);
    gw_mpu_parts(g, bucket, "m1", 2, id, sizeof(id));
    T_EQ(gw_complete_if(g, bucket, "m1", id, "If-None-Match: *"), 412);
    T_TRUE(gw_has(g, "o", "<Code>PreconditionFailed</Code>"));
    T_EQ(gw_curl(g, "got", "%s/%s/m1", g->url, bucket), 200);
    T_TRUE(gw_same(g, "got", "whole"));
    T_EQ(gw_complete_if(g, bucket, "m1", id, "If-Match: *"), 200);
    T_EQ(gw_curl(g, "got", "%s/%s/m1", g->url, bucket), 200);
    T_TRUE(gw_same(g, "got", "whole2"));
    /* Another upload of the very bytes the key holds: refused all the same
     * (one If-None-Match: * wins), not taken for a retry of the Complete
     * that made the object; its upload stays until aborted. */
    gw_mpu_parts(g, bucket, "m1", 2, id, sizeof(id));
    T_EQ(gw_complete_if(g, bucket, "m1", id, "If-None-Match: *"), 412);
    T_EQ(gw_curl(g, "o", "-X DELETE '%s/%s/m1?uploadId=%s'", g->url, bucket, id), 204);
    gw_mpu_parts(g, bucket, "m2", 2, id, sizeof(id));
    T_EQ(gw_complete_if(g, bucket, "m2", id, "If-Match: \"0123\""), 404);
    T_EQ(gw_curl(g, "o", "-X DELETE '%s/%s/m2?uploadId=%s'", g->url, bucket, id), 204);
    T_EQ(gw_curl(g, "o", "-I %s/%s/m2", g->url, bucket), 404);
}

/* S3's x-amz-checksum-crc32 of scratch file name (base64 of the big-endian
 * CRC-32) into out. */
static inline void gw_crc32_b64(struct gw *g, const char *name, char *out, size_t cap)
{
    T_EQ(t_sh("python3 -c 'import base64,sys,zlib; "
              "c = zlib.crc32(open(sys.argv[1], \"rb\").read()); "
              "print(base64.b64encode(c.to_bytes(4, \"big\")).decode(), end=\"\")' %s > %s",
              gw_path(g, name), gw_path(g, "crc")),
         0);
    gw_slurp_str(g, "crc", out, cap);
}

#endif
