/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 240 */
/*
 * What S3 clients and compatibility suites send that the other test_gw_*
 * files do not (issue 19), over a file:// backend and the server's own
 * store: multipart uploads over file:// (parts under ".rio-mpu/B/ID.p/",
 * not below the upload's own object), keys a tree of directories cannot
 * hold (404, 409 or 400 with S3's XML, never a 500, nothing outside the
 * bucket's directory), CopyObject's x-amz-copy-source-if-* conditions,
 * a body framed twice (request smuggling: 400, connection closed), an
 * absurd Content-Length, unsigned aws-chunked bodies with a checksum
 * trailer (STREAMING-UNSIGNED-PAYLOAD-TRAILER), SigV2 (boto3, the aws CLI's
 * presign, s3cmd; refused with --s3-sigv2 off),
 * the Owner element of the listings, GetBucketVersioning, GetObject's
 * response-* parameters, rclone and restic over file://, and hostile HTTP
 * (huge headers, bad chunk sizes, pipelined requests).
 */
#include "gw_util.h"

/* A file:// backend in a fresh directory: its URL in url, the directory. */
static const char *file_backend(char *url, size_t cap)
{
    const char *dir = t_scratch_dir("gw-compat");
    snprintf(url, cap, "file://%s/store", dir);
    T_EQ(t_sh("mkdir -p %s/store", dir), 0);
    return dir;
}

/* fn over the server's own store, then over file:// (where conditions are
 * decided under the lock of the file replaced or removed). */
static void on_store_and_file(void (*fn)(const char *backend))
{
    char url[256];

    fn(NULL);
    file_backend(url, sizeof(url));
    fn(url);
}

/* "the server's own store with its disk tier" for the *_on tests */
#define DATA_DIR_STORE "(--data-dir)"

/* gw_start over backend, or over the server's own store with --data-dir
 * (DATA_DIR_STORE). */
static void start_on(struct gw *g, const char *backend)
{
    static char dir[256];
    const char *extra[] = {"--data-dir", dir, NULL};

    if (!backend || strcmp(backend, DATA_DIR_STORE) != 0) {
        gw_start(g, backend, NULL);
        return;
    }
    snprintf(dir, sizeof(dir), "%s", t_scratch_dir("gwdisk"));
    gw_start(g, NULL, extra);
}

/* gw_start with the server's log in a file (for no_5xx, srv_log_count). */
static void start_logged(struct gw *g, const char *backend, const char *const *extra)
{
    setenv("SRV_LOG_FILE", "1", 1);
    gw_start(g, backend, extra);
    unsetenv("SRV_LOG_FILE");
}

/* 1 when the server (start_logged) answered requests and none with a 5xx. */
static int no_5xx(struct gw *g)
{
    return srv_log_count(&g->e, " s3 ") > 0 && srv_log_count(&g->e, "status=5") == 0;
}

/* A Complete that must copy its parts (file://: nothing composes) and
 * takes longer than a client's read timeout: the gateway answers 200 at
 * once and sends spaces while it copies, then the result (S3's way); an
 * error met after the 200 comes as an <Error> body, with the upload kept
 * for another Complete. Reads are slowed (0.5 s each) so that the copy
 * takes seconds; the client gives up after 2 s below a byte a second. */
TEST(long_complete_sends_spaces)
{
    struct gw g;
    char url[512], id[64];
    const char *dir = file_backend(url, sizeof(url));

    /* The write of chunk 8 fails once, no room: only the object has one
     * (33 MiB in 4 MiB chunks; the parts have 5 and 4). */
    strcat(url, "?faults=delay:op=read:delay=500;error:op=write:chunk=8:error=ENOSPC:count=1");
    gw_start(&g, url, NULL);
    gw_file(&g, "p1", 20 * 1024 * 1024, 1);
    gw_file(&g, "p2", 13 * 1024 * 1024 + 5, 2);
    T_EQ(t_sh("cat %s %s > %s", gw_path(&g, "p1"), gw_path(&g, "p2"), gw_path(&g, "all")), 0);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/slow", g.url), 200);
    gw_mpu_parts(&g, "slow", "big", 2, id, sizeof(id));
    /* The commit fails after the 200: an <Error>, the object not there. */
    T_EQ(gw_curl(&g, "o",
                 "-X POST --speed-limit 1 --speed-time 2 --data-binary @%s "
                 "'%s/slow/big?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         200);
    T_TRUE(gw_has(&g, "o", "<Error><Code>InsufficientStorage</Code>"));
    T_FALSE(gw_has(&g, "o", "CompleteMultipartUploadResult"));
    T_EQ(gw_curl(&g, "o", "-I %s/slow/big", g.url), 404);
    /* The object's checksum (FULL_OBJECT CRC32), wrong: checked on the
     * bytes as they are copied, an <Error> after the 200, nothing
     * published. */
    T_EQ(gw_curl(&g, "o",
                 "-X POST -H 'x-amz-checksum-crc32: AAAAAA==' --data-binary @%s "
                 "'%s/slow/big?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         200);
    T_TRUE(gw_has(&g, "o", "<Error><Code>BadDigest</Code>"));
    T_EQ(gw_curl(&g, "o", "-I %s/slow/big", g.url), 404);
    /* Again, with the right one: spaces while it copies (curl's
     * --speed-time counts the bytes that keep coming), then the result. */
    char crc[64];
    gw_crc32_b64(&g, "all", crc, sizeof(crc));
    T_EQ(gw_curl(&g, "o",
                 "-X POST -y 2 -Y 1 -H 'x-amz-checksum-crc32: %s' --data-binary @%s "
                 "'%s/slow/big?uploadId=%s'",
                 crc, gw_path(&g, "done.xml"), g.url, id),
         200);
    T_TRUE(gw_has(&g, "o", "?>\n ")); /* a space a second */
    T_TRUE(gw_has(&g, "o", " <CompleteMultipartUploadResult"));
    T_TRUE(gw_has(&g, "o", "-2&quot;</ETag>"));
    T_EQ(gw_curl(&g, "got", "%s/slow/big", g.url), 200);
    T_TRUE(gw_same(&g, "got", "all"));
    T_NE(t_sh("test -e %s/store/.rio-mpu/slow/%s", dir, id), 0);
    gw_stop(&g);
}

/* Multipart over file://: the parts used to be ".rio-mpu/B/ID/NNNNN", below
 * the upload's own object ".rio-mpu/B/ID", which on file:// is a file: every
 * UploadPart failed (500, "not a directory"). Parts now live in
 * ".rio-mpu/B/ID.p/"; never in the bucket's listing. */
/* An UploadPart whose body is still coming in when Abort (or Complete)
 * runs: the part committed after Abort listed the parts, so it stayed for
 * ever, reachable by nothing (ListParts, Abort: NoSuchUpload; fsck: a live
 * head). It is answered 404 NoSuchUpload and dropped (gateways review). */
static const char slow_part_py[] =
    "import socket, sys, os, time\n"
    "port, path, n, d = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4]\n"
    "s = socket.create_connection(('127.0.0.1', port)); s.settimeout(20)\n"
    "s.sendall(('PUT %s HTTP/1.1\\r\\nHost: h\\r\\nContent-Length: %d\\r\\n\\r\\n'"
    " % (path, n)).encode() + b'a' * (n // 2))\n"
    "open(d + '/sent', 'w').close()\n"
    "while not os.path.exists(d + '/go'):\n"
    "    time.sleep(0.02)\n"
    "s.sendall(b'b' * (n - n // 2))\n"
    "got = b''\n"
    "while b'\\r\\n\\r\\n' not in got or len(got) < 40:\n"
    "    b = s.recv(65536)\n"
    "    if not b: break\n"
    "    got += b\n"
    "    if b'</Error>' in got or (b'200 OK' in got and b'\\r\\n\\r\\n' in got): break\n"
    "open(d + '/answer.part', 'wb').write(got)\n"
    "os.rename(d + '/answer.part', d + '/answer')\n";

static void part_racing(const char *what)
{
    struct gw g;
    char url[512], id[64], path[256];
    const char *dir = file_backend(url, sizeof(url));
    const char *colon;

    gw_start(&g, url, NULL);
    colon = strrchr(g.s3, ':');
    T_EQ(gw_curl(&g, "o", "-X PUT %s/race", g.url), 200);
    gw_file(&g, "p1", 1000, 1);
    gw_mpu_parts(&g, "race", "obj", 1, id, sizeof(id)); /* part 1, and done.xml */
    t_write_file(gw_path(&g, "slow.py"), slow_part_py, strlen(slow_part_py));
    snprintf(path, sizeof(path), "/race/obj?partNumber=2&uploadId=%s", id);
    T_EQ(t_sh("python3 %s %s '%s' %d %s > %s 2>&1 &", gw_path(&g, "slow.py"), colon + 1, path,
              6 << 20, g.dir, gw_path(&g, "py.log")),
         0);
    for (int i = 0; i < 500 && t_sh("test -f %s/sent", g.dir) != 0; i++)
        t_sleep_ms(20);
    T_EQ(t_sh("test -f %s/sent", g.dir), 0);
    t_sleep_ms(200); /* the first half is in the writer */
    if (strcmp(what, "abort") == 0) {
        T_EQ(gw_curl(&g, "o", "-X DELETE '%s/race/obj?uploadId=%s'", g.url, id), 204);
    } else {
        T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/race/obj?uploadId=%s'",
                     gw_path(&g, "done.xml"), g.url, id),
             200);
        T_TRUE(gw_has(&g, "o", "<CompleteMultipartUploadResult"));
    }
    T_EQ(t_sh("touch %s/go", g.dir), 0);
    for (int i = 0; i < 500 && t_sh("test -f %s/answer", g.dir) != 0; i++)
        t_sleep_ms(20);
    T_TRUE(gw_has(&g, "answer", "404"));
    T_TRUE(gw_has(&g, "answer", "<Code>NoSuchUpload</Code>"));
    /* Nothing of the upload is left in the backend. */
    T_EQ(t_sh("test -z \"$(find %s/store/.rio-mpu -type f 2>/dev/null)\"", dir), 0);
    gw_stop(&g);
}

TEST(part_racing_abort_is_dropped)
{
    part_racing("abort");
}

TEST(part_racing_complete_is_dropped)
{
    part_racing("complete");
}

/* A GET whose object is replaced between its lookup and its open, again
 * and again (faults: the open's read says RIO_EGENERATION, as after a
 * replace): looked up again a few times and then served; past that 503
 * SlowDown, which clients retry. It was 500 InternalError at the second
 * (gateways review: 15-21 of 6,000-13,000 GETs of a key overwritten
 * without pause). */
/* A gateway over file:// whose reads fail as faults says, holding
 * churn/k (scratch file "body"). */
static void churn_start(struct gw *g, const char *faults)
{
    char url[512];

    file_backend(url, sizeof(url));
    strcat(url, faults);
    gw_start(g, url, NULL);
    gw_file(g, "body", 1000, 7);
    T_EQ(gw_curl(g, "o", "-X PUT %s/churn", g->url), 200);
    T_EQ(gw_curl(g, "o", "-T %s %s/churn/k", gw_path(g, "body"), g->url), 200);
}

TEST(get_of_a_key_replaced_again_and_again)
{
    struct gw g;

    churn_start(&g, "?faults=error:op=read:error=RIO_EGENERATION:count=3");
    T_EQ(gw_curl(&g, "got", "%s/churn/k", g.url), 200);
    T_TRUE(gw_same(&g, "got", "body"));
    gw_stop(&g);

    churn_start(&g, "?faults=error:op=read:error=RIO_EGENERATION");
    T_EQ(gw_curl(&g, "o", "%s/churn/k", g.url), 503);
    T_TRUE(gw_has(&g, "o", "<Code>SlowDown</Code>"));
    gw_stop(&g);
}

TEST(multipart_over_file)
{
    struct gw g;
    char url[512], id[64], xml[1024];
    const char *dir = file_backend(url, sizeof(url));

    gw_start(&g, url, NULL);
    gw_file(&g, "p1", 5 * 1024 * 1024, 1);
    gw_file(&g, "p2", 5 * 1024 * 1024, 2);
    gw_file(&g, "p3", 1234, 3);
    T_EQ(t_sh("cat %s %s %s > %s", gw_path(&g, "p1"), gw_path(&g, "p2"), gw_path(&g, "p3"),
              gw_path(&g, "all")),
         0);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/mpfile", g.url), 200);
    gw_mpu_parts(&g, "mpfile", "d/obj", 3, id, sizeof(id)); /* done.xml: their MD5s */
    T_EQ(t_sh("test -f %s/store/.rio-mpu/mpfile/%s.p/00002", dir, id), 0);
    T_EQ(gw_curl(&g, "o", "'%s/mpfile/d/obj?uploadId=%s'", g.url, id), 200); /* ListParts */
    T_TRUE(gw_has(&g, "o", "<PartNumber>3</PartNumber>"));
    T_TRUE(gw_has(&g, "o", "<Size>1234</Size>"));
    T_EQ(gw_curl(&g, "o", "'%s/mpfile?uploads'", g.url), 200); /* ListMultipartUploads */
    T_TRUE(gw_has(&g, "o", id));
    /* The parts are nowhere in the bucket's listing. */
    T_EQ(gw_curl(&g, "o", "'%s/mpfile?list-type=2'", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<KeyCount>0</KeyCount>"));
    /* Complete with the parts' MD5s. */
    snprintf(xml, sizeof(xml), "-X POST --data-binary @%s '%s/mpfile/d/obj?uploadId=%s'",
             gw_path(&g, "done.xml"), g.url, id);
    T_EQ(gw_curl(&g, "o", "%s", xml), 200);
    T_TRUE(gw_has(&g, "o", "-3&quot;</ETag>"));
    T_EQ(gw_curl(&g, "got", "%s/mpfile/d/obj", g.url), 200);
    T_TRUE(gw_same(&g, "got", "all"));
    T_EQ(gw_curl(&g, "o", "'%s/mpfile?list-type=2'", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<KeyCount>1</KeyCount>"));
    T_TRUE(gw_has(&g, "o", "<Size>10486994</Size>"));
    /* What is left of the upload: no part, no marker. */
    T_NE(t_sh("test -e %s/store/.rio-mpu/mpfile/%s", dir, id), 0);
    T_NE(t_sh("test -e %s/store/.rio-mpu/mpfile/%s.p/00001", dir, id), 0);
    T_EQ(gw_curl(&g, "o", "'%s/mpfile/d/obj?uploadId=%s'", g.url, id), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchUpload</Code>"));

    /* Abort drops the parts. */
    T_EQ(gw_curl(&g, "c", "-X POST '%s/mpfile/e?uploads'", g.url), 200);
    gw_upload_id(&g, "c", id, sizeof(id));
    T_EQ(gw_curl(&g, "o", "-T %s '%s/mpfile/e?partNumber=1&uploadId=%s'", gw_path(&g, "p3"), g.url,
                 id),
         200);
    T_EQ(gw_curl(&g, "o", "-X DELETE '%s/mpfile/e?uploadId=%s'", g.url, id), 204);
    T_NE(t_sh("test -e %s/store/.rio-mpu/mpfile/%s.p/00001", dir, id), 0);

    /* The aws CLI's own multipart cp (5 MiB parts), when it is there. */
    if (t_sh("command -v aws >/dev/null") == 0) {
        char env[256];
        snprintf(env, sizeof(env), "AWS_CONFIG_FILE=%s/mpcfg", g.dir);
        T_EQ(t_sh("printf '[default]\\ns3 =\\n    multipart_threshold = 5MB\\n"
                  "    multipart_chunksize = 5MB\\n' > %s/mpcfg",
                  g.dir),
             0);
        gw_file(&g, "big", 12 * 1000 * 1000 + 7, 4);
        T_EQ(gw_aws(&g, env, "o", "s3 cp big s3://mpfile/big"), 0);
        T_EQ(gw_aws(&g, env, "o", "s3 cp s3://mpfile/big back"), 0);
        T_TRUE(gw_same(&g, "back", "big"));
    }
    gw_stop(&g);
}

/* Keys a tree of directories cannot hold, over file://: every answer is
 * S3's XML with a 4xx, none a 500, and nothing lands outside the bucket's
 * directory. */
TEST(folder_keys_over_file)
{
    static const struct {
        const char *key;  /* as sent (curl --path-as-is) */
        int put, get;     /* statuses of a PUT, then a GET */
        const char *code; /* the PUT's error code */
    } cases[] = {
        {"a", 200, 200, NULL},
        {"a/b", 409, 404, "ParentIsObject"},   /* a is an object */
        {"a/b/c", 409, 404, "ParentIsObject"}, /* deeper */
        {"c/d", 200, 200, NULL},
        {"c", 409, 404, "ObjectExistsAsDirectory"}, /* c/d exists */
        {"x/", 400, 404, "InvalidArgument"},        /* a "folder" marker */
        {"e//f", 400, 404, "InvalidArgument"},
        {"g/../h", 400, 404, "InvalidArgument"},
        {"../esc", 400, 404, "InvalidArgument"},
        {"%2e%2e/esc2", 400, 404, "InvalidArgument"},
        {"..%2fesc3", 400, 404, "InvalidArgument"},
        {"./y", 400, 404, "InvalidArgument"},
        {"z/.", 400, 404, "InvalidArgument"},
        {"/abs", 400, 404, "InvalidArgument"},
    };
    struct gw g;
    char url[512];
    const char *dir = file_backend(url, sizeof(url));

    start_logged(&g, url, NULL);
    gw_file(&g, "body", 100, 5);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/fkeys", g.url), 200);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *k = cases[i].key;
        fprintf(stderr, "key %s\n", k);
        T_EQ(gw_curl(&g, "o", "--path-as-is -X PUT --data-binary @%s '%s/fkeys/%s'",
                     gw_path(&g, "body"), g.url, k),
             cases[i].put);
        if (cases[i].code) {
            char want[96];
            snprintf(want, sizeof(want), "<Code>%s</Code>", cases[i].code);
            T_TRUE(gw_has(&g, "o", want));
            T_TRUE(gw_has(&g, "o.h", "Content-Type: application/xml"));
        }
        T_EQ(gw_curl(&g, "o", "--path-as-is '%s/fkeys/%s'", g.url, k), cases[i].get);
        if (cases[i].get == 404)
            T_TRUE(gw_has(&g, "o", "<Code>NoSuchKey</Code>"));
        T_EQ(gw_curl(&g, "", "--path-as-is -I '%s/fkeys/%s'", g.url, k), cases[i].get);
        /* CopyObject onto it, from a key that exists. */
        if (cases[i].put != 200)
            T_EQ(gw_curl(&g, "o",
                         "--path-as-is -X PUT -H 'x-amz-copy-source: /fkeys/a' '%s/fkeys/%s'",
                         g.url, k),
                 cases[i].put);
    }
    /* A segment longer than a file name (255 bytes): KeyTooLongError. */
    {
        char seg[301];
        memset(seg, 's', 300);
        seg[300] = '\0';
        T_EQ(gw_curl(&g, "o", "-X PUT --data-binary @%s '%s/fkeys/d/%s'", gw_path(&g, "body"),
                     g.url, seg),
             400);
        T_TRUE(gw_has(&g, "o", "<Code>KeyTooLongError</Code>"));
        T_EQ(gw_curl(&g, "o", "'%s/fkeys/d/%s'", g.url, seg), 404);
        T_EQ(gw_curl(&g, "o", "-X DELETE '%s/fkeys/d/%s'", g.url, seg), 204);
    }
    /* Copy from a key that cannot be: NoSuchKey. */
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /fkeys/c' '%s/fkeys/copy'", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchKey</Code>"));
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /fkeys/e//f' '%s/fkeys/copy'", g.url),
         404);
    /* Multipart onto a key below an object: refused at Complete. */
    T_EQ(gw_curl(&g, "o", "-X POST '%s/fkeys/a/mp?uploads'", g.url), 200);
    /* Deleting such keys: 204 as for any missing key; DeleteObjects too. */
    T_EQ(gw_curl(&g, "o", "-X DELETE '%s/fkeys/c'", g.url), 204);
    T_EQ(gw_curl(&g, "o", "--path-as-is -X DELETE '%s/fkeys/e//f'", g.url), 204);
    T_EQ(gw_curl(&g, "o", "--path-as-is -X DELETE '%s/fkeys/x/'", g.url), 204);
    T_EQ(gw_curl(&g, "o", "-X DELETE '%s/fkeys/a/b'", g.url), 204);
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<Delete><Object><Key>c</Key></Object><Object><Key>x/"
                 "</Key></Object><Object><Key>a/b</Key></Object></Delete>' '%s/fkeys?delete'",
                 g.url),
         200);
    T_FALSE(gw_has(&g, "o", "<Error>"));
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>x/</Key></Deleted>"));
    /* Listings below an object or with such a prefix: empty, not errors. */
    T_EQ(gw_curl(&g, "o", "'%s/fkeys?list-type=2&prefix=a/b/&delimiter=/'", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<KeyCount>0</KeyCount>"));
    T_EQ(gw_curl(&g, "o", "'%s/fkeys?list-type=2&prefix=../&delimiter=/'", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<KeyCount>0</KeyCount>"));
    /* The objects that could be are whole; nothing escaped. */
    T_EQ(gw_curl(&g, "got", "%s/fkeys/a", g.url), 200);
    T_TRUE(gw_same(&g, "got", "body"));
    T_EQ(gw_curl(&g, "got", "%s/fkeys/c/d", g.url), 200);
    T_TRUE(gw_same(&g, "got", "body"));
    T_EQ(t_sh("test -z \"$(find %s -name 'esc*')\"", dir), 0);
    T_EQ(t_sh("test \"$(find %s/store/fkeys -type f | wc -l)\" = 2", dir), 0);
    /* Once c/d is gone, c is a key again: the delete removed the directory
     * it emptied (it answered 409 while the empty directory stayed). */
    T_EQ(gw_curl(&g, "o", "-X DELETE '%s/fkeys/c/d'", g.url), 204);
    T_EQ(gw_curl(&g, "o", "-X PUT --data-binary @%s '%s/fkeys/c'", gw_path(&g, "body"), g.url),
         200);
    T_EQ(gw_curl(&g, "o", "'%s/fkeys/c'", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X DELETE '%s/fkeys/c'", g.url), 204);
    T_EQ(no_5xx(&g), 1);
    gw_stop(&g);
}

/* x-amz-copy-source-if-*: evaluated against the source (its ETag and
 * Last-Modified), 412 PreconditionFailed when they do not hold and
 * nothing copied. */
TEST(copy_conditions)
{
    struct gw g;
    char url[512], md5[40], h[256];
    size_t n = 0;
    char *t;
    static const char *const past = "Sat, 01 Jan 2000 00:00:00 GMT";
    static const char *const future = "Sun, 01 Jan 2090 00:00:00 GMT";
    struct {
        const char *name, *value;
        int status;
    } cases[] = {
        {"if-match", md5, 200},
        {"if-match", "\"0123456789abcdef0123456789abcdef\"", 412},
        {"if-match", "*", 200},
        {"if-none-match", md5, 412},
        {"if-none-match", "\"0123456789abcdef0123456789abcdef\"", 200},
        {"if-modified-since", past, 200},
        {"if-modified-since", future, 412},
        {"if-unmodified-since", past, 412},
        {"if-unmodified-since", future, 200},
    };

    file_backend(url, sizeof(url));
    gw_start(&g, url, NULL);
    gw_file(&g, "src", 70000, 6);
    T_EQ(t_sh("md5sum %s | cut -c1-32 | tr -d '\\n' > %s", gw_path(&g, "src"), gw_path(&g, "md5")),
         0);
    t = (char *)t_slurp(gw_path(&g, "md5"), &n);
    T_TRUE(t && n == 32);
    snprintf(md5, sizeof(md5), "\"%.32s\"", t);
    free(t);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/ccond", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-T %s %s/ccond/src", gw_path(&g, "src"), g.url), 200);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fprintf(stderr, "x-amz-copy-source-%s: %s\n", cases[i].name, cases[i].value);
        T_EQ(gw_curl(&g, "", "-X DELETE %s/ccond/dst", g.url), 204);
        snprintf(h, sizeof(h), "x-amz-copy-source-%s: %s", cases[i].name, cases[i].value);
        T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /ccond/src' -H '%s' %s/ccond/dst", h,
                     g.url),
             cases[i].status);
        if (cases[i].status == 412) {
            T_TRUE(gw_has(&g, "o", "<Code>PreconditionFailed</Code>"));
            T_EQ(gw_curl(&g, "", "-I %s/ccond/dst", g.url), 404);
        } else {
            T_EQ(gw_curl(&g, "got", "%s/ccond/dst", g.url), 200);
            T_TRUE(gw_same(&g, "got", "src"));
        }
    }
    /* If-Match decides over If-Unmodified-Since, If-None-Match over
     * If-Modified-Since (as S3 and GET). */
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /ccond/src' -H 'x-amz-copy-source-if-match: %s' "
                 "-H 'x-amz-copy-source-if-unmodified-since: %s' %s/ccond/dst",
                 md5, past, g.url),
         200);
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /ccond/src' -H 'x-amz-copy-source-if-none-match: "
                 "\"other\"' -H 'x-amz-copy-source-if-modified-since: %s' %s/ccond/dst",
                 future, g.url),
         200);
    /* A multipart source: its ETag is the "-N" one. */
    T_EQ(gw_curl(&g, "c", "-X POST '%s/ccond/mp?uploads'", g.url), 200);
    {
        char id[64], xml[1024];
        gw_upload_id(&g, "c", id, sizeof(id));
        T_EQ(gw_curl(&g, "o", "-T %s '%s/ccond/mp?partNumber=1&uploadId=%s'", gw_path(&g, "src"),
                     g.url, id),
             200);
        snprintf(xml, sizeof(xml),
                 "-X POST --data-binary '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
                 "<ETag>%s</ETag></Part></CompleteMultipartUpload>' '%s/ccond/mp?uploadId=%s'",
                 md5, g.url, id);
        T_EQ(gw_curl(&g, "o", "%s", xml), 200);
    }
    T_EQ(gw_curl(&g, "mph", "-I %s/ccond/mp", g.url), 200);
    T_EQ(t_sh("grep -i '^etag' %s | tr -d '\\r\"' | cut -d' ' -f2 | tr -d '\\n' > %s",
              gw_path(&g, "mph.h"), gw_path(&g, "mpetag")),
         0);
    t = (char *)t_slurp(gw_path(&g, "mpetag"), &n);
    T_TRUE(t && n > 33 && t[32] == '-');
    snprintf(h, sizeof(h), "x-amz-copy-source-if-match: \"%.*s\"", (int)n, t);
    free(t);
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /ccond/mp' -H '%s' %s/ccond/dst2", h,
                 g.url),
         200);
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /ccond/mp' -H 'x-amz-copy-source-if-match: %s' "
                 "%s/ccond/dst3",
                 md5, g.url),
         412);
    gw_stop(&g);
}

/* Raw HTTP: tests/integration's python3 helper sends bytes on one
 * connection and writes what came back (until the server closes it, or
 * 3 s of silence) and whether it closed. */
static const char raw_py[] =
    "import socket, sys\n"
    "port, name, out = int(sys.argv[1]), sys.argv[2], sys.argv[3]\n"
    "data = open(name, 'rb').read()\n"
    "s = socket.create_connection(('127.0.0.1', port)); s.settimeout(3)\n"
    "try:\n"
    "    s.sendall(data)\n"
    "except OSError:\n"
    "    pass\n"
    "got, closed = b'', False\n"
    "try:\n"
    "    while True:\n"
    "        b = s.recv(65536)\n"
    "        if not b:\n"
    "            closed = True; break\n"
    "        got += b\n"
    "except socket.timeout:\n"
    "    pass\n"
    "except OSError:\n"
    "    closed = True\n"
    "open(out, 'wb').write(got + (b'\\n<CLOSED>\\n' if closed else b'\\n<OPEN>\\n'))\n";

/* Send the bytes of request (n of them) to g raw; the answer in scratch
 * file "raw". */
static void raw(struct gw *g, const void *request, size_t n)
{
    const char *colon = strrchr(g->s3, ':');

    t_write_file(gw_path(g, "raw.py"), raw_py, strlen(raw_py));
    t_write_file(gw_path(g, "req"), request, n);
    T_EQ(t_sh("python3 %s %s %s %s", gw_path(g, "raw.py"), colon + 1, gw_path(g, "req"),
              gw_path(g, "raw")),
         0);
}

#define RAW(g, s) raw((g), (s), sizeof(s) - 1)

/* Count of status lines ("HTTP/1.1 ") in scratch file raw. */
static int raw_answers(struct gw *g)
{
    T_EQ(t_sh("grep -ao 'HTTP/1.1 [0-9][0-9][0-9]' %s | wc -l > %s", gw_path(g, "raw"),
              gw_path(g, "n")),
         0);
    return t_read_int(gw_path(g, "n"));
}

/* A body framed twice (Content-Length twice, even with one value, or with
 * Transfer-Encoding, or Transfer-Encoding twice) is how requests are
 * smuggled past a proxy that reads the other framing: 400, the
 * connection closed, nothing stored, a request behind it not served. */
TEST(framing_twice)
{
    static const char *const reqs[] = {
        "PUT /smug/k1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 5\r\n\r\n"
        "abcde",
        "PUT /smug/k2 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
        "PUT /smug/k3 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\nTransfer-Encoding: "
        "chunked\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\nGET /smug/k0 HTTP/1.1\r\nHost: h\r\n\r\n",
        "PUT /smug/k4 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: "
        "3\r\n\r\n"
        "3\r\nabc\r\n0\r\n\r\n",
        "PUT /smug/k5 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: "
        "chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n",
        "GET /smug/k0 HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\nTransfer-Encoding: "
        "chunked\r\n\r\n"
        "0\r\n\r\nGET /smug/k0 HTTP/1.1\r\nHost: h\r\n\r\n",
    };
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/smug", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d k0 %s/smug/k0", g.url), 200);
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        fprintf(stderr, "request %zu\n", i);
        raw(&g, reqs[i], strlen(reqs[i]));
        T_TRUE(gw_has(&g, "raw", "HTTP/1.1 400 "));
        T_TRUE(gw_has(&g, "raw", "<Code>InvalidRequest</Code>"));
        T_TRUE(gw_has(&g, "raw", "Connection: close"));
        T_TRUE(gw_has(&g, "raw", "<CLOSED>"));
        T_EQ(raw_answers(&g), 1); /* the request behind it: never read */
    }
    for (int i = 1; i <= 5; i++)
        T_EQ(gw_curl(&g, "", "-I %s/smug/k%d", g.url, i), 404);
    /* One Content-Length, one Transfer-Encoding: fine, and kept alive. */
    RAW(&g, "PUT /smug/k6 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
            "PUT /smug/k7 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
            "3\r\nabc\r\n0\r\n\r\nGET /smug/k7 HTTP/1.1\r\nHost: h\r\n\r\n");
    T_EQ(raw_answers(&g), 3);
    T_TRUE(gw_has(&g, "raw", "<OPEN>"));
    T_EQ(gw_curl(&g, "got", "%s/smug/k6", g.url), 200);
    T_TRUE(gw_has(&g, "got", "abc"));
    gw_stop(&g);
}

/* Hostile HTTP: absurd or malformed lengths and chunk sizes, huge header
 * blocks, a long target; pipelined requests answered in order. Every
 * answer a 4xx (never a hang, never a 500), the server alive after. */
TEST(hostile_http)
{
    static const struct {
        const char *req;
        const char *status; /* "HTTP/1.1 4xx" */
    } cases[] = {
        /* 2^64 - 1 is libmicrohttpd's "unknown size" */
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nContent-Length: 18446744073709551615\r\n\r\nabc",
         "HTTP/1.1 400"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nContent-Length: 6000000000000\r\n\r\nabc",
         "HTTP/1.1 400"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nContent-Length: 99999999999999999999999\r\n\r\nabc",
         "HTTP/1.1 413"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nContent-Length: -1\r\n\r\nabc", "HTTP/1.1 400"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nContent-Length: +3\r\n\r\nabc", "HTTP/1.1 400"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nContent-Length: 3, 3\r\n\r\nabc", "HTTP/1.1 400"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: "
         "chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
         "HTTP/1.1 400"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n"
         "ffffffffffffffffffff\r\nabc\r\n0\r\n\r\n",
         "HTTP/1.1 4"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nx-amz-decoded-content-length: "
         "18446744073709551615\r\n"
         "x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER\r\nContent-Length: 5\r\n\r\n"
         "0\r\n\r\n",
         "HTTP/1.1 400"},
        {"PUT /hostile/a HTTP/1.1\r\nHost: h\r\nx-amz-decoded-content-length: 3\r\n"
         "x-amz-content-sha256: STREAMING-UNSIGNED-PAYLOAD-TRAILER\r\nContent-Length: 11\r\n\r\n"
         "zz\r\nabc\r\n\r\n",
         "HTTP/1.1 400"},
    };
    struct gw g;
    char *big;
    size_t n;

    start_logged(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/hostile", g.url), 200);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fprintf(stderr, "case %zu\n", i);
        raw(&g, cases[i].req, strlen(cases[i].req));
        T_TRUE(gw_has(&g, "raw", cases[i].status));
    }
    T_EQ(gw_curl(&g, "", "-I %s/hostile/a", g.url), 404);
    /* A 300 KiB header, 20000 small ones: 431. */
    n = 300 * 1024;
    big = malloc(n + 200);
    T_NOTNULL(big);
    n = (size_t)snprintf(big, 200, "GET /hostile/a HTTP/1.1\r\nHost: h\r\nX-A: ");
    memset(big + n, 'a', 300 * 1024);
    n += 300 * 1024;
    memcpy(big + n, "\r\n\r\n", 4);
    raw(&g, big, n + 4);
    T_TRUE(gw_has(&g, "raw", "HTTP/1.1 431"));
    n = (size_t)snprintf(big, 200, "GET /hostile/a HTTP/1.1\r\nHost: h\r\n");
    for (int i = 0; i < 20000; i++, n += 8)
        memcpy(big + n, "X-A: b\r\n", 8);
    memcpy(big + n, "\r\n", 2);
    raw(&g, big, n + 2);
    T_TRUE(gw_has(&g, "raw", "HTTP/1.1 431"));
    free(big);
    /* A target over 8 KiB: 400 InvalidURI. */
    big = calloc(1, 10000);
    T_NOTNULL(big);
    n = (size_t)snprintf(big, 10000, "GET /hostile/");
    memset(big + n, 'k', 9000);
    n += 9000;
    n += (size_t)snprintf(big + n, 10000 - n, " HTTP/1.1\r\nHost: h\r\n\r\n");
    raw(&g, big, n);
    T_TRUE(gw_has(&g, "raw", "<Code>InvalidURI</Code>"));
    free(big);
    /* Pipelined: PUT, GET, HEAD, GET of a missing key, in order. */
    RAW(&g, "PUT /hostile/p HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello"
            "GET /hostile/p HTTP/1.1\r\nHost: h\r\n\r\n"
            "HEAD /hostile/p HTTP/1.1\r\nHost: h\r\n\r\n"
            "GET /hostile/nope HTTP/1.1\r\nHost: h\r\n\r\n");
    T_EQ(raw_answers(&g), 4);
    T_EQ(t_sh("grep -ao 'HTTP/1.1 [0-9]*' %s | tr '\\n' ' ' | grep -q '^HTTP/1.1 200 HTTP/1.1 200 "
              "HTTP/1.1 200 HTTP/1.1 404 $'",
              gw_path(&g, "raw")),
         0);
    T_TRUE(gw_has(&g, "raw", "hello"));
    T_EQ(no_5xx(&g), 1);
    T_EQ(gw_curl(&g, "got", "%s/hostile/p", g.url), 200);
    T_TRUE(gw_has(&g, "got", "hello"));
    gw_stop(&g);
}

/* The log: a terminal escape a client put in the method is written as
 * \x1b (it cleared the screen of whoever tailed the log), and every
 * request has its line, however many come in a second (the rate limit
 * of other messages dropped all but 20 a second). */
TEST(log_lines_escaped_and_one_per_request)
{
    struct gw g;

    start_logged(&g, NULL, NULL);
    RAW(&g, "P\x1b[2J\x1b[HUT /logb/k HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n");
    T_GE(raw_answers(&g), 1);
    T_EQ(t_sh("grep -q \"$(printf '\\033')\" %s", g.e.log), 1);
    T_GE(srv_log_count(&g.e, "P\\x1b[2J\\x1b[HUT"), 1u);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/logb", g.url), 200);
    /* 60 HEADs on one connection (curl's URL range), well within a second. */
    T_EQ(t_sh("curl -s -I -o /dev/null '%s/logb/k[1-60]'", g.url), 0);
    /* The last line is written as its answer completes: a moment. */
    for (int i = 0; i < 100 && srv_log_count(&g.e, "keylen=3 status=404") < 51u; i++)
        t_sleep_ms(20);
    T_EQ(srv_log_count(&g.e, "HEAD HeadObject bucket=logb keylen="), 60u);
    T_EQ(srv_log_count(&g.e, "repeated "), 0u);
    gw_stop(&g);
}

/* STREAMING-UNSIGNED-PAYLOAD-TRAILER without a signature (what newer aws
 * CLIs and SDKs send by default over HTTPS): decoded, its trailer checked;
 * it used to be stored with its chunk framing. Under --s3-anonymous and
 * under a keys file's "*" line. A signed aws-chunked mode without a
 * signature: 403. */
static const char trailer_py[] =
    "import base64, http.client, struct, sys, zlib\n"
    "port, bucket = int(sys.argv[1]), sys.argv[2]\n"
    "creds = sys.argv[3:5]  # ACCESS_KEY SECRET: sign (SigV4) each request\n"
    "data = bytes(range(256)) * 300 + b'tail'\n"
    "crc = base64.b64encode(struct.pack('>I', zlib.crc32(data))).decode()\n"
    "def put(key, trailer, mode='STREAMING-UNSIGNED-PAYLOAD-TRAILER', name='crc32'):\n"
    "    body = b''\n"
    "    for i in range(0, len(data), 65536):\n"
    "        c = data[i:i + 65536]\n"
    "        body += b'%x\\r\\n' % len(c) + c + b'\\r\\n'\n"
    "    body += b'0\\r\\n'\n"
    "    if trailer is not None:\n"
    "        body += b'x-amz-checksum-' + name.encode() + b':' + trailer.encode() + b'\\r\\n'\n"
    "    body += b'\\r\\n'\n"
    "    h = {'x-amz-content-sha256': mode, 'Content-Encoding': 'aws-chunked',\n"
    "         'x-amz-decoded-content-length': str(len(data)), 'Content-Length': str(len(body))}\n"
    "    if trailer is not None:\n"
    "        h['x-amz-trailer'] = 'x-amz-checksum-' + name\n"
    "    if creds:  # SigV4Auth signs the x-amz-content-sha256 given (S3SigV4Auth would\n"
    "        # replace it with the body's hash)\n"
    "        import botocore.auth, botocore.credentials, botocore.awsrequest\n"
    "        q = botocore.awsrequest.AWSRequest('PUT', 'http://127.0.0.1:%d/%s/%s' % (port,\n"
    "            bucket, key), data=body, headers=h)\n"
    "        botocore.auth.SigV4Auth(botocore.credentials.Credentials(*creds), 's3',\n"
    "            'us-east-1').add_auth(q)\n"
    "        h = dict(q.headers.items())\n"
    "    c = http.client.HTTPConnection('127.0.0.1', port)\n"
    "    c.request('PUT', '/%s/%s' % (bucket, key), body=body, headers=h)\n"
    "    r = c.getresponse(); text = r.read()\n"
    "    c.request('GET', '/%s/%s' % (bucket, key)); g = c.getresponse(); got = g.read()\n"

    "    print(key, r.status, g.status, got == data, b'<Code>' in text or r.status == 200)\n"
    "put('good', crc)\n"
    "put('bad', 'AAAAAA==')\n"
    "put('none', None)\n"
    "put('bogus', crc, name='md5')\n"
    "if not creds:\n"
    "    put('signedmode', crc, mode='STREAMING-AWS4-HMAC-SHA256-PAYLOAD')\n";

/* creds: "" (unsigned) or "ACCESS_KEY SECRET" (signed with botocore). */
static void trailer_checks(struct gw *g, const char *bucket, const char *creds)
{
    const char *colon = strrchr(g->s3, ':');

    t_write_file(gw_path(g, "t.py"), trailer_py, strlen(trailer_py));
    T_EQ(t_sh("python3 %s %s %s %s > %s 2>&1", gw_path(g, "t.py"), colon + 1, bucket, creds,
              gw_path(g, "out")),
         0);
    T_TRUE(gw_has(g, "out", "good 200 200 True True"));
    T_TRUE(gw_has(g, "out", "bad 400 404 False True"));
    T_TRUE(gw_has(g, "out", "none 200 200 True True"));
    T_TRUE(gw_has(g, "out", "bogus 400 404 False True"));
    if (!*creds)
        T_TRUE(gw_has(g, "out", "signedmode 403 404 False True"));
}

TEST(unsigned_trailer_anonymous)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/trailb", g.url), 200);
    trailer_checks(&g, "trailb", "");
    gw_stop(&g);
}

TEST(unsigned_trailer_keys_star_line)
{
    struct gw g;
    char path[256];
    static const char text[] = "AKCOMPAT sk-compat trailk\n* - trailk\n";
    const char *args[] = {"--no-anon", "--s3-keys", path, NULL};

    snprintf(path, sizeof(path), "%s/keys", t_scratch_dir("gw-compat-keys"));
    t_write_file(path, text, strlen(text));
    T_EQ(chmod(path, 0600), 0);
    gw_start(&g, NULL, args);
    T_EQ(gw_curl(&g, "o",
                 "--aws-sigv4 aws:amz:us-east-1:s3 --user AKCOMPAT:sk-compat -X PUT %s/trailk",
                 g.url),
         200);
    trailer_checks(&g, "trailk", "");
    /* Signed (SigV4, botocore): the same mode, the same checks (the GETs
     * unsigned, through the "*" line). */
    if (t_sh("python3 -c 'import botocore' 2>/dev/null") == 0)
        trailer_checks(&g, "trailk", "AKCOMPAT sk-compat");
    gw_stop(&g);
}

/*
 * SigV2 (HMAC-SHA1: an "AWS AK:SIG" Authorization header, or a presigned
 * URL's AWSAccessKeyId, Signature and Expires), what the aws CLI v1's `s3
 * presign`, s3cmd's `signurl` and `--signature-v2` and botocore's 's3'
 * signer send: verified, and refused when wrong, tampered with or expired,
 * or with --s3-sigv2 off.
 */
#define V2AK "AKSIGV2"
#define V2SK "v2-secret/0123+x"

static const char sigv2_script[] =
    "import boto3, sys, time, urllib.request, urllib.error\n"
    "from botocore.config import Config\n"
    "url, d = sys.argv[1:3]\n"
    "def client(sk='" V2SK "'):\n"
    "    return boto3.client('s3', endpoint_url=url, aws_access_key_id='" V2AK "',\n"
    "        aws_secret_access_key=sk, region_name='us-east-1',\n"
    "        config=Config(signature_version='s3', s3={'addressing_style': 'path'}))\n"
    "s3 = client()\n"
    "data = open(d + '/f', 'rb').read()\n"
    "s3.create_bucket(Bucket='v2b')\n"
    "s3.put_object(Bucket='v2b', Key='k one+', Body=data, ContentType='text/csv',\n"
    "    Metadata={'run': 'r1'})\n"
    "h = s3.head_object(Bucket='v2b', Key='k one+')\n"
    "assert h['Metadata'] == {'run': 'r1'} and h['ContentType'] == 'text/csv', h\n"
    "md = {'m%02d' % i: 'v' for i in range(70)}  # 70 x-amz-* headers, S3 takes them\n"
    "s3.put_object(Bucket='v2b', Key='meta70', Body=b'x', Metadata=md)\n"
    "assert s3.head_object(Bucket='v2b', Key='meta70')['Metadata'] == md\n"
    "assert s3.get_object(Bucket='v2b', Key='k one+')['Body'].read() == data\n"
    "r = s3.get_object(Bucket='v2b', Key='k one+', ResponseContentType='a/b', Range='bytes=0-9')\n"
    "assert r['ContentType'] == 'a/b' and r['Body'].read() == data[:10], r\n"
    "assert [o['Key'] for o in s3.list_objects(Bucket='v2b', Prefix='k')['Contents']] == \\\n"
    "    ['k one+']\n"
    "up = s3.create_multipart_upload(Bucket='v2b', Key='m')['UploadId']\n"
    "e = s3.upload_part(Bucket='v2b', Key='m', UploadId=up, PartNumber=1, Body=data)['ETag']\n"
    "s3.complete_multipart_upload(Bucket='v2b', Key='m', UploadId=up,\n"
    "    MultipartUpload={'Parts': [{'PartNumber': 1, 'ETag': e}]})\n"
    "assert s3.get_object(Bucket='v2b', Key='m')['Body'].read() == data\n"
    "s3.copy_object(Bucket='v2b', Key='c', CopySource='v2b/m')\n"
    "u = s3.generate_presigned_url('get_object', Params={'Bucket': 'v2b', 'Key': 'k one+'},\n"
    "    ExpiresIn=300)\n"
    "assert 'AWSAccessKeyId=' in u and 'Signature=' in u, u\n"
    "assert urllib.request.urlopen(u).read() == data, 'presigned GET'\n"
    "p = s3.generate_presigned_url('put_object', Params={'Bucket': 'v2b', 'Key': 'p',\n"
    "    'ContentType': 'text/plain'}, ExpiresIn=300)\n"
    "urllib.request.urlopen(urllib.request.Request(p, data=b'put!', method='PUT',\n"
    "    headers={'Content-Type': 'text/plain'}))\n"
    "assert s3.get_object(Bucket='v2b', Key='p')['Body'].read() == b'put!'\n"
    "def refused(u, why, method='GET', body=None):\n"
    "    try:\n"
    "        urllib.request.urlopen(urllib.request.Request(u, data=body, method=method))\n"
    "    except urllib.error.HTTPError as x:\n"
    "        t = x.read().decode()\n"
    "        assert x.code == 403 and why in t, (x.code, t)\n"
    "        return\n"
    "    raise AssertionError('taken: ' + u)\n"
    "refused(u.replace('/k%20one%2B', '/c'), 'SignatureDoesNotMatch')\n"
    "refused(p.replace('/p?', '/q?'), 'SignatureDoesNotMatch', 'PUT', b'x')\n"
    "refused(p, 'SignatureDoesNotMatch', 'PUT', b'x')  # urllib's own Content-Type\n"
    "x = s3.generate_presigned_url('get_object', Params={'Bucket': 'v2b', 'Key': 'm'},\n"
    "    ExpiresIn=1)\n"
    "time.sleep(2.5)\n"
    "refused(x, 'Request has expired')\n"
    "try:\n"
    "    client('wrong').get_object(Bucket='v2b', Key='m')\n"
    "    raise AssertionError('a wrong secret was taken')\n"
    "except s3.exceptions.ClientError as x:\n"
    "    assert x.response['Error']['Code'] == 'SignatureDoesNotMatch', x.response\n"
    "r = s3.delete_objects(Bucket='v2b', Delete={'Objects': [{'Key': 'c'}, {'Key': 'p'}]})\n"
    "assert len(r['Deleted']) == 2, r\n"
    "print('sigv2 ok')\n";

TEST(sigv2)
{
    struct gw g;
    char keys[256], env[256];
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};
    const char *off[] = {"--no-anon", "--s3-keys", keys, "--s3-sigv2", "off", NULL};
    static const char text[] = V2AK " " V2SK " *\n";

    snprintf(keys, sizeof(keys), "%s/keys", t_scratch_dir("gwv2keys"));
    t_write_file(keys, text, strlen(text));
    T_EQ(chmod(keys, 0600), 0);
    start_logged(&g, NULL, extra);
    gw_file(&g, "f", 300 * 1024 + 5, 91);
    if (t_sh("python3 -c 'import boto3' 2>/dev/null") == 0) {
        t_write_file(gw_path(&g, "t.py"), sigv2_script, strlen(sigv2_script));
        T_EQ(t_sh("python3 %s %s %s > %s 2>&1 || { cat %s >&2; exit 1; }", gw_path(&g, "t.py"),
                  g.url, g.dir, gw_path(&g, "out"), gw_path(&g, "out")),
             0);
        T_TRUE(gw_has(&g, "out", "sigv2 ok"));
    } else {
        T_EQ(gw_curl(&g, "o", "--aws-sigv4 aws:amz:us-east-1:s3 -u '%s:%s' -X PUT %s/v2b", V2AK,
                     V2SK, g.url),
             200);
    }
    snprintf(env, sizeof(env), "AWS_ACCESS_KEY_ID=%s AWS_SECRET_ACCESS_KEY='%s'", V2AK, V2SK);
    if (t_sh("command -v aws >/dev/null") == 0) {
        /* The aws CLI v1 presigns with SigV2 for an endpoint of its own. */
        T_EQ(gw_aws(&g, env, "o", "s3 cp f s3://v2b/cli"), 0);
        T_EQ(gw_aws(&g, env, "url", "s3 presign s3://v2b/cli --expires-in 300"), 0);
        T_EQ(t_sh("curl -sf -o %s \"$(cat %s)\"", gw_path(&g, "got"), gw_path(&g, "url")), 0);
        T_TRUE(gw_same(&g, "got", "f"));
    }
    if (t_sh("command -v s3cmd >/dev/null") == 0) {
        T_EQ(t_sh("printf '[default]\\naccess_key = %s\\nsecret_key = %s\\nhost_base = %s\\n"
                  "host_bucket = %s\\nuse_https = False\\nsignature_v2 = True\\n' > %s/s3cfg",
                  V2AK, V2SK, g.s3, g.s3, g.dir),
             0);
#define S3CMD "cd %s && s3cmd -c s3cfg --no-progress "
        T_EQ(t_sh(S3CMD "put f s3://v2b/cmd > out 2>&1", g.dir), 0);
        T_EQ(t_sh(S3CMD "get --force s3://v2b/cmd got2 > out 2>&1", g.dir), 0);
        T_TRUE(gw_same(&g, "got2", "f"));
        T_EQ(t_sh(S3CMD "ls s3://v2b/ > ls 2>&1", g.dir), 0);
        T_TRUE(gw_has(&g, "ls", "s3://v2b/cmd"));
        T_EQ(t_sh(S3CMD "signurl s3://v2b/cmd +300 > surl 2>&1", g.dir), 0);
        T_EQ(t_sh("curl -sf -o %s \"$(cat %s)\"", gw_path(&g, "got3"), gw_path(&g, "surl")), 0);
        T_TRUE(gw_same(&g, "got3", "f"));
#undef S3CMD
    }
    /* Raw: a wrong signature, an unknown key, a date far off. */
    T_EQ(gw_curl(&g, "o",
                 "-H 'Date: %s' -H 'Authorization: AWS " V2AK ":AAAAAAAAAAAAAAAAAAAAAAAAAAA=' "
                 "%s/v2b/m",
                 "Wed, 02 Dec 2026 08:00:00 GMT", g.url),
         403);
    T_TRUE(gw_has(&g, "o", "<Code>SignatureDoesNotMatch</Code>") ||
           gw_has(&g, "o", "<Code>RequestTimeTooSkewed</Code>"));
    T_EQ(gw_curl(&g, "o", "-H 'Authorization: AWS NOSUCH:AAAAAAAAAAAAAAAAAAAAAAAAAAA=' %s/v2b/m",
                 g.url),
         403);
    T_EQ(gw_curl(&g, "o", "'%s/v2b/m?AWSAccessKeyId=" V2AK "&Signature=c2ln&Expires=4102444800'",
                 g.url),
         403);
    T_TRUE(gw_has(&g, "o", "<Code>SignatureDoesNotMatch</Code>"));
    T_TRUE(no_5xx(&g));
    gw_stop(&g);

    /* --s3-sigv2 off: 400 naming the option, nothing done. */
    start_logged(&g, NULL, off);
    T_EQ(gw_curl(&g, "o", "'%s/v2b/k?AWSAccessKeyId=AK&Signature=c2ln&Expires=4102444800'", g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidRequest</Code>"));
    T_TRUE(gw_has(&g, "o", "--s3-sigv2 off"));
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'Authorization: AWS AK:c2ln' -d y %s/v2b", g.url), 400);
    T_TRUE(gw_has(&g, "o", "--s3-sigv2 off"));
    gw_stop(&g);

    /* Anonymous access on: a SigV2 request is still a signed one, never
     * served as an unsigned request when its signature is no good. */
    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/v2anon", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d secret %s/v2anon/k", g.url), 200);
    T_EQ(gw_curl(&g, "o", "'%s/v2anon/k?AWSAccessKeyId=AK&Signature=c2ln&Expires=4102444800'",
                 g.url),
         403);
    T_FALSE(gw_has(&g, "o", "secret"));
    T_EQ(gw_curl(&g, "o", "-X DELETE -H 'Authorization: AWS AK:c2ln' %s/v2anon/k", g.url), 403);
    T_EQ(gw_curl(&g, "o", "%s/v2anon/k", g.url), 200);
    gw_stop(&g);
    {
        char bin[512];
        srv_binary(bin, sizeof(bin));
        T_EQ(t_sh("%s --s3-listen 127.0.0.1:0 --s3-sigv2 maybe 2>&1 | grep -q 's3-sigv2'", bin), 0);
        T_EQ(t_sh("%s --s3-sigv2 off 2>&1 | grep -q 'need --s3-listen'", bin), 0);
    }
}

/* Owner in ListObjects (V1 always, V2 with fetch-owner=true) and
 * ListBuckets, as S3 gives it. */
TEST(list_owner)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/owner", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d x %s/owner/k", g.url), 200);
    T_EQ(gw_curl(&g, "o", "%s/owner", g.url), 200);
    T_TRUE(gw_has(&g, "o",
                  "<Size>1</Size><Owner><ID>railio</ID><DisplayName>railio</DisplayName></Owner>"
                  "<StorageClass>"));
    T_EQ(gw_curl(&g, "o", "'%s/owner?list-type=2'", g.url), 200);
    T_FALSE(gw_has(&g, "o", "<Owner>"));
    T_EQ(gw_curl(&g, "o", "'%s/owner?list-type=2&fetch-owner=true'", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<Owner><ID>railio</ID><DisplayName>railio</DisplayName></Owner>"));
    T_EQ(gw_curl(&g, "o", "%s/", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<Owner><ID>railio</ID><DisplayName>railio</DisplayName></Owner>"));
    if (t_sh("command -v aws >/dev/null") == 0) {
        T_EQ(gw_aws(&g, "", "o", "s3api list-objects --bucket owner"), 0);
        T_TRUE(gw_has(&g, "o", "\"DisplayName\": \"railio\""));
    }
    gw_stop(&g);
}

/* GetBucketVersioning: an empty VersioningConfiguration (never enabled),
 * as S3 answers; rclone's purge and cleanup ask it and logged an ERROR on
 * the 501. PutBucketVersioning stays 501. */
TEST(bucket_versioning)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "'%s/nover?versioning'", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchBucket</Code>"));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/verb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "'%s/verb?versioning'", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<VersioningConfiguration xmlns="));
    T_FALSE(gw_has(&g, "o", "<Status>"));
    T_EQ(gw_curl(&g, "o",
                 "-X PUT --data-binary '<VersioningConfiguration><Status>Enabled</Status>"
                 "</VersioningConfiguration>' '%s/verb?versioning'",
                 g.url),
         501);
    T_EQ(gw_curl(&g, "o", "'%s/verb?versioning'", g.url), 200);
    T_FALSE(gw_has(&g, "o", "<Status>"));
    if (t_sh("command -v aws >/dev/null") == 0)
        T_EQ(gw_aws(&g, "", "o", "s3api get-bucket-versioning --bucket verb"), 0);
    gw_stop(&g);
}

/*
 * Subresources the gateway keeps none of: a GET answers what S3 answers
 * for a configuration never set (s3cmd info and Terraform's bucket refresh
 * read them and stopped on the 501), for an existing bucket or object only;
 * setting one is still 501 (but CORS: test_gw_cors).
 */
TEST(bucket_config_never_set)
{
    static const struct {
        const char *q;
        int status;
        const char *want;
    } cases[] = {
        {"acl", 200, "<Permission>FULL_CONTROL</Permission>"},
        {"policy", 404, "<Code>NoSuchBucketPolicy</Code>"},
        {"cors", 404, "<Code>NoSuchCORSConfiguration</Code>"},
        {"lifecycle", 404, "<Code>NoSuchLifecycleConfiguration</Code>"},
        {"tagging", 404, "<Code>NoSuchTagSet</Code>"},
        {"encryption", 404, "<Code>ServerSideEncryptionConfigurationNotFoundError</Code>"},
        {"website", 404, "<Code>NoSuchWebsiteConfiguration</Code>"},
        {"replication", 404, "<Code>ReplicationConfigurationNotFoundError</Code>"},
        {"object-lock", 404, "<Code>ObjectLockConfigurationNotFoundError</Code>"},
        {"ownershipControls", 404, "<Code>OwnershipControlsNotFoundError</Code>"},
        {"publicAccessBlock", 404, "<Code>NoSuchPublicAccessBlockConfiguration</Code>"},
        {"logging", 200, "<BucketLoggingStatus xmlns="},
        {"notification", 200, "<NotificationConfiguration xmlns="},
        {"accelerate", 200, "<AccelerateConfiguration xmlns="},
        {"requestPayment", 200, "<Payer>BucketOwner</Payer>"},
    };
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "'%s/nocfg?acl'", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchBucket</Code>"));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/cfg", g.url), 200);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int st = gw_curl(&g, "o", "'%s/cfg?%s'", g.url, cases[i].q);
        if (st != cases[i].status || !gw_has(&g, "o", cases[i].want))
            T_FAIL("GET ?%s: %d, want %d with %s", cases[i].q, st, cases[i].status, cases[i].want);
        /* Setting it is not implemented; but CORS and tags, which are
         * (test_gw_cors, test_gw_tagging): this is no document of theirs */
        T_EQ(gw_curl(&g, "o", "-X PUT --data-binary '<x/>' '%s/cfg?%s'", g.url, cases[i].q),
             strcmp(cases[i].q, "cors") == 0 || strcmp(cases[i].q, "tagging") == 0 ? 400 : 501);
    }
    /* An object's ACL and tags, once it exists. */
    T_EQ(gw_curl(&g, "o", "'%s/cfg/k?acl'", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchKey</Code>"));
    T_EQ(gw_curl(&g, "o", "-X PUT -d x %s/cfg/k", g.url), 200);
    T_EQ(gw_curl(&g, "o", "'%s/cfg/k?acl'", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<Grantee"));
    T_TRUE(gw_has(&g, "o", "<Permission>FULL_CONTROL</Permission>"));
    T_EQ(gw_curl(&g, "o", "'%s/cfg/k?tagging'", g.url), 200);
    T_TRUE(gw_has(&g, "o", "<TagSet></TagSet>"));
    T_EQ(gw_curl(&g, "o", "'%s/cfg/k?cors'", g.url), 501);
    /* an object's tags are kept (test_gw_tagging): this is no Tagging */
    T_EQ(gw_curl(&g, "o", "-X PUT -d '<Tagging/>' '%s/cfg/k?tagging'", g.url), 400);
    T_EQ(gw_curl(&g, "o", "-X PUT -d '<Tagging/>' '%s/cfg/k?retention'", g.url), 501);
    /* The object itself is untouched by all of it. */
    T_EQ(gw_curl(&g, "o", "%s/cfg/k", g.url), 200);
    T_TRUE(gw_has(&g, "o", "x"));
    if (t_sh("command -v aws >/dev/null") == 0) {
        T_EQ(gw_aws(&g, "", "o", "s3api get-bucket-acl --bucket cfg"), 0);
        T_TRUE(gw_has(&g, "o", "FULL_CONTROL"));
        T_EQ(gw_aws(&g, "", "o", "s3api get-object-tagging --bucket cfg --key k"), 0);
        T_NE(gw_aws(&g, "", "o", "s3api get-bucket-policy --bucket cfg"), 0);
        T_TRUE(gw_has(&g, "o", "NoSuchBucketPolicy"));
    }
    gw_stop(&g);
}

/* Clients beyond those of test_gw_clients, signed (SigV4), over
 * file://: rclone (5 MiB multipart parts, purge without an ERROR) and
 * restic (a repository: init, backup, check --read-data, restore, forget
 * --prune). */
static void start_signed(struct gw *g)
{
    static char url[512], keys[256];
    static const char text[] = "AKCLIENT sk-client *\n";
    const char *extra[] = {"--no-anon", "--s3-keys", keys, NULL};

    file_backend(url, sizeof(url));
    snprintf(keys, sizeof(keys), "%s/keys", t_scratch_dir("gw-compat-ck"));
    t_write_file(keys, text, strlen(text));
    T_EQ(chmod(keys, 0600), 0);
    start_logged(g, url, extra);
}

/* Bounded: a gateway that fails makes rclone retry for minutes. */
#define RCLONE "timeout 120 rclone --retries 1 --low-level-retries 2 "

TEST(rclone_over_file)
{
    struct gw g;
    char env[768];

    if (t_sh("command -v rclone >/dev/null") != 0)
        T_SKIP("rclone is not installed");
    start_signed(&g);
    snprintf(env, sizeof(env),
             "env -u AWS_CA_BUNDLE RCLONE_CONFIG=/dev/null RCLONE_CONFIG_GW_TYPE=s3 "
             "RCLONE_CONFIG_GW_PROVIDER=Other RCLONE_CONFIG_GW_ACCESS_KEY_ID=AKCLIENT "
             "RCLONE_CONFIG_GW_SECRET_ACCESS_KEY=sk-client RCLONE_CONFIG_GW_ENDPOINT=%s "
             "RCLONE_CONFIG_GW_FORCE_PATH_STYLE=true RCLONE_CONFIG_GW_CHUNK_SIZE=5M "
             "RCLONE_CONFIG_GW_UPLOAD_CUTOFF=5M",
             g.url);
    T_EQ(t_sh("mkdir -p %s/tree/sub", g.dir), 0);
    gw_file(&g, "tree/big", 11 * 1024 * 1024 + 3, 61); /* three parts */
    gw_file(&g, "tree/sub/b", 77, 62);
    T_EQ(t_sh("cd %s && %s " RCLONE "mkdir gw:rcf > out 2>&1", g.dir, env), 0);
    T_EQ(t_sh("cd %s && %s " RCLONE "copy tree gw:rcf/t > out 2>&1", g.dir, env), 0);
    T_EQ(t_sh("cd %s && %s " RCLONE "check tree gw:rcf/t > out 2>&1", g.dir, env), 0);
    T_EQ(t_sh("cd %s && %s " RCLONE "copy gw:rcf/t back > out 2>&1", g.dir, env), 0);
    T_TRUE(gw_same(&g, "back/big", "tree/big"));
    T_TRUE(gw_same(&g, "back/sub/b", "tree/sub/b"));
    T_EQ(t_sh("cd %s && %s " RCLONE "purge gw:rcf/t > out 2>&1", g.dir, env), 0);
    T_FALSE(gw_has(&g, "out", "ERROR"));
    T_EQ(t_sh("cd %s && %s " RCLONE "lsf -R gw:rcf > ls 2>&1", g.dir, env), 0);
    T_EQ(t_sh("test ! -s %s", gw_path(&g, "ls")), 0);
    gw_stop(&g);
}

TEST(restic_over_file)
{
    struct gw g;
    char env[768];

    if (t_sh("command -v restic >/dev/null") != 0)
        T_SKIP("restic is not installed");
    start_signed(&g);
    snprintf(env, sizeof(env),
             "env -u AWS_CA_BUNDLE AWS_ACCESS_KEY_ID=AKCLIENT AWS_SECRET_ACCESS_KEY=sk-client "
             "RESTIC_PASSWORD=compat RESTIC_CACHE_DIR=%s/cache "
             "RESTIC_REPOSITORY=s3:%s/repo",
             g.dir, g.url);
    T_EQ(t_sh("mkdir -p %s/src/sub", g.dir), 0);
    gw_file(&g, "src/a", 3 * 1024 * 1024 + 5, 71);
    gw_file(&g, "src/sub/b", 4096, 72);
    T_EQ(t_sh("cd %s && %s timeout 60 restic init > out 2>&1", g.dir, env), 0);
    T_EQ(t_sh("cd %s && %s timeout 60 restic backup src > out 2>&1", g.dir, env), 0);
    gw_file(&g, "src/c", 1000, 73);
    T_EQ(t_sh("cd %s && %s timeout 60 restic backup src > out 2>&1", g.dir, env), 0);
    T_EQ(t_sh("cd %s && %s timeout 60 restic check --read-data > out 2>&1", g.dir, env), 0);
    T_TRUE(gw_has(&g, "out", "no errors were found"));
    T_EQ(t_sh("cd %s && %s timeout 60 restic restore latest --target rest > out 2>&1", g.dir, env),
         0);
    T_EQ(t_sh("diff -r %s/src %s/rest/src", g.dir, g.dir), 0);
    T_EQ(t_sh("cd %s && %s timeout 60 restic forget --keep-last 1 --prune > out 2>&1", g.dir, env),
         0);
    T_EQ(t_sh("cd %s && %s timeout 60 restic check > out 2>&1", g.dir, env), 0);
    T_TRUE(gw_has(&g, "out", "no errors were found"));
    T_EQ(no_5xx(&g), 1);
    gw_stop(&g);
}

/* GetObject's response-content-type, -disposition, ... (presigned download
 * links set them): they replace the stored header, one of each, for signed
 * requests; they used to be taken and ignored. Anonymous: 400, as S3 (a
 * link to a public object must not serve it as text/html). */
TEST(response_params)
{
    struct gw g;
    char keys[256];
    static const char text[] = "AKRESP sk-resp *\n* - rpub\n";
    const char *args[] = {"--no-anon", "--s3-keys", keys, NULL};
#define SIGNED "--aws-sigv4 aws:amz:us-east-1:s3 --user AKRESP:sk-resp "

    snprintf(keys, sizeof(keys), "%s/keys", t_scratch_dir("gw-compat-rp"));
    t_write_file(keys, text, strlen(text));
    T_EQ(chmod(keys, 0600), 0);
    gw_start(&g, NULL, args);
    T_EQ(gw_curl(&g, "o", SIGNED "-X PUT %s/rpub", g.url), 200);
    T_EQ(gw_curl(&g, "o",
                 SIGNED "-X PUT -H 'Content-Type: text/plain' "
                        "-H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -d hello %s/rpub/k",
                 g.url),
         200);
    T_EQ(gw_curl(&g, "got",
                 SIGNED "'%s/rpub/k?response-content-type=application%%2Fx-over&"
                        "response-content-disposition=attachment&response-cache-control=no-store'",
                 g.url),
         200);
    T_TRUE(gw_has(&g, "got", "hello"));
    T_EQ(t_sh("test \"$(grep -ci '^content-type:' %s)\" = 1", gw_path(&g, "got.h")), 0);
    T_TRUE(gw_has(&g, "got.h", "Content-Type: application/x-over"));
    T_TRUE(gw_has(&g, "got.h", "Content-Disposition: attachment"));
    T_TRUE(gw_has(&g, "got.h", "Cache-Control: no-store"));
    T_EQ(gw_curl(&g, "got", SIGNED "-I '%s/rpub/k?response-content-type=a%%2Fb'", g.url), 200);
    T_TRUE(gw_has(&g, "got.h", "Content-Type: a/b"));
    T_EQ(gw_curl(&g, "got", SIGNED "'%s/rpub/k'", g.url), 200);
    T_TRUE(gw_has(&g, "got.h", "Content-Type: text/plain"));
    /* Unsigned (the keys file's "*" line opens rpub): refused, as S3. */
    T_EQ(gw_curl(&g, "o", "'%s/rpub/k?response-content-type=text%%2Fhtml'", g.url), 400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidRequest</Code>"));
    T_EQ(gw_curl(&g, "got", "%s/rpub/k", g.url), 200);
    T_TRUE(gw_has(&g, "got.h", "Content-Type: text/plain"));
    gw_stop(&g);
#undef SIGNED
}

/* UploadPartCopy into an upload created with x-amz-checksum-algorithm:
 * the copied part gets its checksum, computed on the bytes copied (S3
 * answers it in CopyPartResult and keeps it), so Complete gives the object
 * its composite checksum, as with parts uploaded with theirs. It had none
 * (found with the AWS SDK for JavaScript v3's UploadPartCopy). */
/* (and CopyObject's x-amz-checksum-algorithm) */
TEST(upload_part_copy_checksum)
{
    struct gw g;
    char url[512], id[64], c1[16], c2[16], comp[24], xml[1024], want[96];

    file_backend(url, sizeof(url));
    gw_start(&g, url, NULL);
    gw_file(&g, "src", 7 * 1024 * 1024 + 9, 82);
    T_EQ(t_sh("head -c 5242880 %s > %s && tail -c +5242881 %s > %s", gw_path(&g, "src"),
              gw_path(&g, "a"), gw_path(&g, "src"), gw_path(&g, "b")),
         0);
    gw_crc32_b64(&g, "a", c1, sizeof(c1));
    gw_crc32_b64(&g, "b", c2, sizeof(c2));
    /* S3's composite: the CRC-32 of the parts' CRC-32s, then -2. */
    T_EQ(t_sh("python3 -c 'import base64,sys,zlib; "
              "d = b\"\".join(base64.b64decode(x) for x in sys.argv[1:]); "
              "print(base64.b64encode(zlib.crc32(d).to_bytes(4, \"big\")).decode(), end=\"\")' "
              "%s %s > %s",
              c1, c2, gw_path(&g, "comp")),
         0);
    gw_slurp_str(&g, "comp", comp, sizeof(comp));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/upk", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-T %s %s/upk/src", gw_path(&g, "src"), g.url), 200);
    T_EQ(gw_curl(&g, "c", "-X POST -H 'x-amz-checksum-algorithm: CRC32' '%s/upk/dst?uploads'",
                 g.url),
         200);
    gw_upload_id(&g, "c", id, sizeof(id));
    const char *ranges[2] = {"0-5242879", "5242880-7340040"}, *crcs[2] = {c1, c2};
    for (int i = 0; i < 2; i++) {
        T_EQ(gw_curl(&g, "p",
                     "-X PUT -H 'x-amz-copy-source: /upk/src' -H 'x-amz-copy-source-range: "
                     "bytes=%s' '%s/upk/dst?partNumber=%d&uploadId=%s'",
                     ranges[i], g.url, i + 1, id),
             200);
        snprintf(want, sizeof(want), "<ChecksumCRC32>%s</ChecksumCRC32>", crcs[i]);
        T_TRUE(gw_has(&g, "p", want));
    }
    snprintf(xml, sizeof(xml),
             "-X POST --data-binary '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
             "<ETag>\"'$(md5sum %s | cut -c1-32)'\"</ETag><ChecksumCRC32>%s</ChecksumCRC32></Part>"
             "<Part><PartNumber>2</PartNumber><ETag>\"'$(md5sum %s | cut -c1-32)'\"</ETag>"
             "<ChecksumCRC32>%s</ChecksumCRC32></Part></CompleteMultipartUpload>' "
             "'%s/upk/dst?uploadId=%s'",
             gw_path(&g, "a"), c1, gw_path(&g, "b"), c2, g.url, id);
    T_EQ(gw_curl(&g, "o", "%s", xml), 200);
    snprintf(want, sizeof(want), "<ChecksumCRC32>%s-2</ChecksumCRC32>", comp);
    T_TRUE(gw_has(&g, "o", want));
    /* The same Complete again (a client's retry of an answer it lost) is
     * answered as the first was, checksum and all. */
    T_EQ(gw_curl(&g, "o", "%s", xml), 200);
    T_TRUE(gw_has(&g, "o", want));
    T_TRUE(gw_has(&g, "o", "<ChecksumType>COMPOSITE</ChecksumType>"));
    T_EQ(gw_curl(&g, "h", "-I -H 'x-amz-checksum-mode: ENABLED' %s/upk/dst", g.url), 200);
    snprintf(want, sizeof(want), "x-amz-checksum-crc32: %s-2", comp);
    T_TRUE(gw_has(&g, "h.h", want));
    T_EQ(gw_curl(&g, "got", "%s/upk/dst", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    /* CopyObject with x-amz-checksum-algorithm: the copy's own checksum,
     * of the whole object, in place of the source's composite one */
    gw_crc32_b64(&g, "src", c1, sizeof(c1));
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /upk/dst' -H 'x-amz-checksum-algorithm: CRC32' "
                 "%s/upk/whole",
                 g.url),
         200);
    snprintf(want, sizeof(want), "<ChecksumCRC32>%s</ChecksumCRC32>", c1);
    T_TRUE(gw_has(&g, "o", want));
    T_EQ(gw_curl(&g, "h", "-I -H 'x-amz-checksum-mode: ENABLED' %s/upk/whole", g.url), 200);
    snprintf(want, sizeof(want), "x-amz-checksum-crc32: %s\r", c1);
    T_TRUE(gw_has(&g, "h.h", want));
    T_TRUE(gw_has(&g, "h.h", "x-amz-checksum-type: FULL_OBJECT"));
    /* without it, a composite checksum is not the copy's: none */
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /upk/dst' %s/upk/plain", g.url), 200);
    T_FALSE(gw_has(&g, "o", "<ChecksumCRC32>"));
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /upk/dst' -H 'x-amz-checksum-algorithm: MD5' "
                 "%s/upk/bad",
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "InvalidRequest"));
    T_EQ(gw_curl(&g, "o", "%s/upk/bad", g.url), 404);
    gw_stop(&g);
}

/* UploadPartCopy (x-amz-copy-source on an UploadPart, with or without
 * x-amz-copy-source-range): what boto3's managed copy and `aws s3 cp
 * s3://... s3://...` send for objects above their multipart threshold;
 * it was 501. Parts copied from ranges complete into the bytes of those
 * ranges; a bad range is 400; the copy-source conditions hold here too. */
TEST(upload_part_copy)
{
    struct gw g;
    char url[512], id[64], e1[40], e2[40], xml[1024];
    size_t n = 0;
    char *t;

    file_backend(url, sizeof(url));
    start_logged(&g, url, NULL);
    gw_file(&g, "src", 7 * 1024 * 1024 + 9, 81);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/upc", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-T %s %s/upc/src", gw_path(&g, "src"), g.url), 200);
    T_EQ(gw_curl(&g, "c", "-X POST '%s/upc/dst?uploads'", g.url), 200);
    gw_upload_id(&g, "c", id, sizeof(id));
    T_EQ(gw_curl(&g, "p1",
                 "-X PUT -H 'x-amz-copy-source: /upc/src' -H 'x-amz-copy-source-range: "
                 "bytes=0-5242879' '%s/upc/dst?partNumber=1&uploadId=%s'",
                 g.url, id),
         200);
    T_TRUE(gw_has(&g, "p1", "<CopyPartResult"));
    T_EQ(gw_curl(&g, "p2",
                 "-X PUT -H 'x-amz-copy-source: /upc/src' -H 'x-amz-copy-source-range: "
                 "bytes=5242880-7340040' '%s/upc/dst?partNumber=2&uploadId=%s'",
                 g.url, id),
         200);
    T_EQ(t_sh("sed -n 's/.*<ETag>&quot;\\([0-9a-f]*\\)&quot;.*/\\1/p' %s | tr -d '\\n' > %s",
              gw_path(&g, "p1"), gw_path(&g, "e1")),
         0);
    T_EQ(t_sh("sed -n 's/.*<ETag>&quot;\\([0-9a-f]*\\)&quot;.*/\\1/p' %s | tr -d '\\n' > %s",
              gw_path(&g, "p2"), gw_path(&g, "e2")),
         0);
    t = (char *)t_slurp(gw_path(&g, "e1"), &n);
    T_TRUE(t && n == 32);
    snprintf(e1, sizeof(e1), "%.32s", t);
    free(t);
    t = (char *)t_slurp(gw_path(&g, "e2"), &n);
    T_TRUE(t && n == 32);
    snprintf(e2, sizeof(e2), "%.32s", t);
    free(t);
    /* A part's ETag is the MD5 of its bytes. */
    T_EQ(t_sh("test \"$(head -c 5242880 %s | md5sum | cut -c1-32)\" = %s", gw_path(&g, "src"), e1),
         0);
    /* Bad ranges, a condition that does not hold, a missing source. */
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /upc/src' -H 'x-amz-copy-source-range: "
                 "bytes=5-2' '%s/upc/dst?partNumber=3&uploadId=%s'",
                 g.url, id),
         400);
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /upc/src' -H 'x-amz-copy-source-range: "
                 "bytes=0-7340041' '%s/upc/dst?partNumber=3&uploadId=%s'",
                 g.url, id),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidArgument</Code>"));
    T_TRUE(gw_has(&g, "o", "not valid for source object of size: 7340041"));
    {
        static const char *const bad[] = {"0-4",         "bytes=0",      "bytes=hello-world",
                                          "bytes=0-bar", "bytes=hello-", "bytes=0-2,3-5"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            T_EQ(gw_curl(&g, "o",
                         "-X PUT -H 'x-amz-copy-source: /upc/src' -H 'x-amz-copy-source-range: "
                         "%s' '%s/upc/dst?partNumber=3&uploadId=%s'",
                         bad[i], g.url, id),
                 400);
            T_TRUE(gw_has(&g, "o", "<Code>InvalidArgument</Code>"));
        }
    }
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /upc/src' -H 'x-amz-copy-source-if-match: "
                 "\"0123\"' '%s/upc/dst?partNumber=3&uploadId=%s'",
                 g.url, id),
         412);
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /upc/none' '%s/upc/dst?partNumber=3&uploadId=%s'",
                 g.url, id),
         404);
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /upc/src' '%s/upc/dst?partNumber=3&"
                 "uploadId=0123456789abcdef0123456789abcdef'",
                 g.url),
         404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchUpload</Code>"));
    snprintf(xml, sizeof(xml),
             "-X POST --data-binary '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber>"
             "<ETag>\"%s\"</ETag></Part><Part><PartNumber>2</PartNumber><ETag>\"%s\"</ETag>"
             "</Part></CompleteMultipartUpload>' '%s/upc/dst?uploadId=%s'",
             e1, e2, g.url, id);
    T_EQ(gw_curl(&g, "o", "%s", xml), 200);
    T_EQ(gw_curl(&g, "got", "%s/upc/dst", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    /* Without a range: the whole source as one part. */
    T_EQ(gw_curl(&g, "c", "-X POST '%s/upc/whole?uploads'", g.url), 200);
    gw_upload_id(&g, "c", id, sizeof(id));
    T_EQ(gw_curl(&g, "p1",
                 "-X PUT -H 'x-amz-copy-source: /upc/src' '%s/upc/whole?partNumber=1&uploadId=%s'",
                 g.url, id),
         200);
    T_EQ(gw_curl(&g, "o", "'%s/upc/whole?uploadId=%s'", g.url, id), 200);
    T_TRUE(gw_has(&g, "o", "<Size>7340041</Size>"));
    /* The aws CLI's copy between keys above its threshold (5 MB): part copies. */
    if (t_sh("command -v aws >/dev/null") == 0) {
        char env[256];
        /* A new second of the log's rate limit (20 lines a second per
         * message): the request lines counted below are not dropped. */
        t_sleep_ms(1100);
        snprintf(env, sizeof(env), "AWS_CONFIG_FILE=%s/mpcfg", g.dir);
        T_EQ(t_sh("printf '[default]\\ns3 =\\n    multipart_threshold = 5MB\\n"
                  "    multipart_chunksize = 5MB\\n' > %s/mpcfg",
                  g.dir),
             0);
        T_EQ(gw_aws(&g, env, "o", "s3 cp s3://upc/src s3://upc/awscopy"), 0);
        T_EQ(gw_curl(&g, "got", "%s/upc/awscopy", g.url), 200);
        T_TRUE(gw_same(&g, "got", "src"));
        T_GE(srv_log_count(&g.e, "UploadPartCopy bucket=upc keylen=7 status=200"), 2);
    }
    gw_stop(&g);
}

/*
 * Conditional PutObject and Complete (S3 since 2024): If-None-Match: * writes only a key
 * that holds nothing (a lock, as Terraform's S3 backend takes one), If-Match
 * only over the ETag the client saw; decided with the backend's commit, so
 * of eight racing If-None-Match PUTs of a new key exactly one is 200 and
 * the others 412, and a refused one leaves the object as it was. What it
 * cannot decide (another If-None-Match than '*', both headers) is 501. Over
 * the server's own store (railio://); tests/integration/test_gw_rados.c
 * races two gateways over one pool. The aws CLI's --if-none-match and
 * --if-match when it has them.
 */
static void conditional_puts_on(const char *backend)
{
    struct gw g;
    char etag[64];

    start_on(&g, backend);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/cpb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d one -H 'If-None-Match: *' %s/cpb/k", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d two -H 'If-None-Match: *' %s/cpb/k", g.url), 412);
    T_TRUE(gw_has(&g, "o", "<Code>PreconditionFailed</Code>"));
    T_EQ(gw_curl(&g, "got", "%s/cpb/k", g.url), 200);
    T_TRUE(t_sh("printf one | cmp -s - %s", gw_path(&g, "got")) == 0);
    T_EQ(gw_curl(&g, "o", "-X PUT -d two -H 'If-None-Match: \"abc\"' %s/cpb/k", g.url), 501);
    T_EQ(gw_curl(&g, "o", "-X PUT -d two -H 'If-None-Match: *' -H 'If-Match: *' %s/cpb/k", g.url),
         501);
    /* If-Match: the ETag of "one" (MD5), another, a key that is not there. */
    snprintf(etag, sizeof(etag), "f97c5d29941bfb1b2fdab0874906ab82");
    T_EQ(gw_curl(&g, "o", "-X PUT -d two -H 'If-Match: \"0123\"' %s/cpb/k", g.url), 412);
    T_EQ(gw_curl(&g, "o", "-X PUT -d two -H 'If-Match: \"%s\"' %s/cpb/missing", etag, g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchKey</Code>"));
    T_EQ(gw_curl(&g, "o", "-X PUT -d two -H 'If-Match: \"%s\"' %s/cpb/k", etag, g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d three -H 'If-Match: \"%s\"' %s/cpb/k", etag, g.url), 412);
    T_EQ(gw_curl(&g, "got", "%s/cpb/k", g.url), 200);
    T_TRUE(t_sh("printf two | cmp -s - %s", gw_path(&g, "got")) == 0);
    /* A larger body (several chunks, streamed) refused whole. */
    gw_file(&g, "big", 9u << 20, 77);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'If-None-Match: *' %s/cpb/k", gw_path(&g, "big"), g.url), 412);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'If-None-Match: *' %s/cpb/big", gw_path(&g, "big"), g.url),
         200);
    T_EQ(gw_curl(&g, "got", "%s/cpb/big", g.url), 200);
    T_TRUE(gw_same(&g, "got", "big"));
    /* Eight at once on a new key: one 200, seven 412. */
    gw_race_if_none_match(&g, g.url, g.url, "cpb/race");
    /* CompleteMultipartUpload (over this store: the parts copied). */
    gw_conditional_completes(&g, "cpb");
    /* CopyObject: the condition on the destination (the source's own
     * x-amz-copy-source-if-* are another thing). */
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /cpb/k' -H 'If-None-Match: *' %s/cpb/m1",
                 g.url),
         412);
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /cpb/k' -H 'If-None-Match: *' %s/cpb/cp",
                 g.url),
         200);
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-copy-source: /cpb/big' -H 'If-Match: \"0123\"' "
                 "%s/cpb/cp",
                 g.url),
         412);
    T_EQ(gw_curl(&g, "got", "%s/cpb/cp", g.url), 200);
    T_TRUE(t_sh("printf two | cmp -s - %s", gw_path(&g, "got")) == 0);
    T_EQ(gw_curl(&g, "got", "%s/cpb/m1", g.url), 200);
    T_TRUE(gw_same(&g, "got", "whole2"));
    /* A refused PUT that sent a checksum (the SDKs send one with every PUT)
     * leaves the object's own record: its checksum is still the one given. */
    char crc1[64], crc2[64];
    gw_file(&g, "c1", 1000, 41);
    gw_file(&g, "c2", 1000, 42);
    gw_crc32_b64(&g, "c1", crc1, sizeof(crc1));
    gw_crc32_b64(&g, "c2", crc2, sizeof(crc2));
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: %s' %s/cpb/ck", gw_path(&g, "c1"), crc1,
                 g.url),
         200);
    for (int i = 0; i < 5; i++)
        T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: %s' -H 'If-None-Match: *' %s/cpb/ck",
                     gw_path(&g, "c2"), crc2, g.url),
             412);
    T_EQ(gw_curl(&g, "o", "-I -H 'x-amz-checksum-mode: ENABLED' %s/cpb/ck", g.url), 200);
    T_TRUE(gw_has(&g, "o.h", crc1));
    if (t_sh("command -v aws >/dev/null && aws s3api put-object help 2>/dev/null | "
             "grep -q -- --if-none-match") == 0) {
        gw_file(&g, "a", 1000, 5);
        T_EQ(gw_aws(&g, "", "o",
                    "s3api put-object --bucket cpb --key ak --body %s --if-none-match '*'",
                    gw_path(&g, "a")),
             0);
        T_NE(gw_aws(&g, "", "o",
                    "s3api put-object --bucket cpb --key ak --body %s --if-none-match '*'",
                    gw_path(&g, "a")),
             0);
        T_TRUE(gw_has(&g, "o", "PreconditionFailed"));
        if (t_sh("aws s3api put-object help 2>/dev/null | grep -q -- --if-match") == 0) {
            T_NE(gw_aws(&g, "", "o",
                        "s3api put-object --bucket cpb --key ak --body %s --if-match '\"0123\"'",
                        gw_path(&g, "a")),
                 0);
            T_TRUE(gw_has(&g, "o", "PreconditionFailed"));
        }
    }
    gw_stop(&g);
}

/*
 * A key that is not UTF-8 (a byte %FF, an overlong form, a surrogate, a
 * sequence cut short) is refused 400 InvalidURI, "Couldn't parse the
 * specified URI.", as S3 refuses it, by PutObject, CopyObject,
 * CreateMultipartUpload and a POST form, and nothing is stored: XML cannot
 * carry such a key, and one stored made every listing of its bucket no XML
 * at all for the clients that list without encoding-type=url (s3cmd ls,
 * the Go SDK). The error answered is XML too (without the key). UTF-8 keys
 * go on as before, and a key another railio client wrote (any bytes) is
 * still read and deleted.
 */
static void key_not_utf8_on(const char *backend)
{
    static const char *const bad[] = {"p%FFk", "p%C0%AFk", "p%ED%A0%80k", "p%F4%90%80%80k",
                                      "p%E2%82"};
    struct gw g;

    start_on(&g, backend);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/kutf", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d x %s/kutf/ok%%C3%%A9%%F0%%9F%%A5%%B3", g.url), 200);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T_EQ(gw_curl(&g, "o", "-X PUT -d x %s/kutf/%s", g.url, bad[i]), 400);
        T_TRUE(gw_has(&g, "o", "<Code>InvalidURI</Code>"));
        T_EQ(t_sh("python3 -c 'import sys, xml.etree.ElementTree as E; "
                  "E.fromstring(open(sys.argv[1], \"rb\").read())' %s",
                  gw_path(&g, "o")),
             0);
        T_EQ(gw_curl(&g, "o", "-X POST '%s/kutf/%s?uploads'", g.url, bad[i]), 400);
        T_EQ(gw_curl(&g, "o",
                     "-X PUT -H 'x-amz-copy-source: /kutf/ok%%C3%%A9%%F0%%9F%%A5%%B3' %s/kutf/%s",
                     g.url, bad[i]),
             400);
    }
    T_EQ(gw_curl(&g, "o", "-F \"key=$(printf 'f\\377k')\" -F file=@%s %s/kutf", gw_path(&g, "o.h"),
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidURI</Code>"));
    /* An XML body that is no UTF-8 is no XML (S3: MalformedXML): a
     * DeleteObjects naming such a key was 200 with a DeleteResult that was
     * no XML either (the key in it as sent). */
    T_EQ(t_sh("printf '<Delete><Object><Key>d\377k</Key></Object></Delete>' > %s",
              gw_path(&g, "del.xml")),
         0);
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/kutf?delete'", gw_path(&g, "del.xml"),
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>MalformedXML</Code>"));
    T_EQ(gw_curl(&g, "up", "-X POST '%s/kutf/mk?uploads'", g.url), 200);
    char uid[64];
    gw_upload_id(&g, "up", uid, sizeof(uid));
    T_EQ(gw_curl(&g, "o", "-X PUT -d part '%s/kutf/mk?uploadId=%s&partNumber=1'", g.url, uid), 200);
    T_EQ(t_sh("printf '<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>\355\240"
              "\200</ETag></Part></CompleteMultipartUpload>' > %s",
              gw_path(&g, "cmp.xml")),
         0);
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/kutf/mk?uploadId=%s'",
                 gw_path(&g, "cmp.xml"), g.url, uid),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>MalformedXML</Code>"));
    T_EQ(gw_curl(&g, "o", "-X DELETE '%s/kutf/mk?uploadId=%s'", g.url, uid), 204);
    T_EQ(gw_curl(&g, "o", "%s/kutf?list-type=2", g.url), 200);
    T_EQ(t_sh("python3 -c 'import sys, xml.etree.ElementTree as E; "
              "t = E.fromstring(open(sys.argv[1], \"rb\").read()); "
              "k = [e.text for e in t.iter(\"{http://s3.amazonaws.com/doc/2006-03-01/}Key\")]; "
              "assert k == [\"ok\\u00e9\\U0001f973\"], k' %s",
              gw_path(&g, "o")),
         0);
    if (!backend) { /* written by railio put: read and deleted through S3 */
        T_EQ(t_sh("%s/railio put -q \"railio://%s/kutf/$(printf 'r\\377')\" %s",
                  getenv("T_BUILD_DIR"), g.e.addr[0], gw_path(&g, "o.h")),
             0);
        T_EQ(gw_curl(&g, "o", "%s/kutf/r%%FF", g.url), 200);
        T_EQ(gw_curl(&g, "o", "-X DELETE %s/kutf/r%%FF", g.url), 204);
        T_EQ(gw_curl(&g, "o", "%s/kutf/r%%FF", g.url), 404);
    }
    gw_stop(&g);
}

TEST(key_not_utf8_refused)
{
    on_store_and_file(key_not_utf8_on);
}

TEST(conditional_puts)
{
    on_store_and_file(conditional_puts_on);
    conditional_puts_on(DATA_DIR_STORE); /* railiod's disk tier decides them too */
}

/*
 * GetObjectAttributes: what x-amz-object-attributes names, and only that:
 * the ETag (unquoted), the kept checksum and its type, StorageClass,
 * ObjectSize; ObjectParts for a multipart object (the count, and the
 * parts' sizes paged by x-amz-max-parts and x-amz-part-number-marker). A
 * missing or unknown attribute 400, a missing key 404. The aws CLI's
 * s3api get-object-attributes reads it.
 */
TEST(object_attributes)
{
    struct gw g;
    char id[64], crc[64];
    const char *all = "-H 'x-amz-object-attributes: ETag,Checksum,ObjectParts,StorageClass,"
                      "ObjectSize'";

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/oab", g.url), 200);
    gw_file(&g, "one", 1000, 61);
    gw_crc32_b64(&g, "one", crc, sizeof(crc));
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: %s' %s/oab/one", gw_path(&g, "one"), crc,
                 g.url),
         200);
    T_EQ(t_sh("md5sum %s | cut -c1-32 | tr -d '\\n' > %s", gw_path(&g, "one"), gw_path(&g, "md5")),
         0);
    char md5[40], want[160];
    gw_slurp_str(&g, "md5", md5, sizeof(md5));
    T_EQ(gw_curl(&g, "a", "%s '%s/oab/one?attributes'", all, g.url), 200);
    snprintf(want, sizeof(want), "<ETag>%s</ETag>", md5);
    T_TRUE(gw_has(&g, "a", want));
    snprintf(want, sizeof(want),
             "<Checksum><ChecksumCRC32>%s</ChecksumCRC32><ChecksumType>FULL_OBJECT</ChecksumType>"
             "</Checksum>",
             crc);
    T_TRUE(gw_has(&g, "a", want));
    T_TRUE(gw_has(&g, "a", "<StorageClass>STANDARD</StorageClass><ObjectSize>1000</ObjectSize>"));
    T_FALSE(gw_has(&g, "a", "<ObjectParts>"));
    T_TRUE(gw_has(&g, "a.h", "Last-Modified: "));
    /* Only what was asked. */
    T_EQ(
        gw_curl(&g, "a", "-H 'x-amz-object-attributes: ObjectSize' '%s/oab/one?attributes'", g.url),
        200);
    T_TRUE(gw_has(&g, "a", "<ObjectSize>1000</ObjectSize>"));
    T_FALSE(gw_has(&g, "a", "<ETag>"));
    T_EQ(gw_curl(&g, "a", "'%s/oab/one?attributes'", g.url), 400);
    T_TRUE(gw_has(&g, "a", "<Code>InvalidArgument</Code>"));
    T_EQ(gw_curl(&g, "a", "-H 'x-amz-object-attributes: ETag,Colour' '%s/oab/one?attributes'",
                 g.url),
         400);
    T_EQ(gw_curl(&g, "a", "%s '%s/oab/none?attributes'", all, g.url), 404);
    T_TRUE(gw_has(&g, "a", "<Code>NoSuchKey</Code>"));

    /* A multipart object of three parts: 5 MiB, 5 MiB, 1000 bytes. */
    gw_file(&g, "p1", 5u << 20, 62);
    gw_file(&g, "p2", 5u << 20, 63);
    gw_file(&g, "p3", 1000, 64);
    gw_mpu_parts(&g, "oab", "mp", 3, id, sizeof(id));
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/oab/mp?uploadId=%s'",
                 gw_path(&g, "done.xml"), g.url, id),
         200);
    T_EQ(gw_curl(&g, "a", "%s '%s/oab/mp?attributes'", all, g.url), 200);
    T_TRUE(gw_has(&g, "a", "-3</ETag>"));
    T_TRUE(gw_has(&g, "a", "<PartsCount>3</PartsCount>"));
    T_TRUE(gw_has(&g, "a", "<Part><PartNumber>3</PartNumber><Size>1000</Size></Part>"));
    T_TRUE(gw_has(&g, "a", "<IsTruncated>false</IsTruncated>"));
    T_TRUE(gw_has(&g, "a", "<ObjectSize>10486760</ObjectSize>"));
    T_EQ(gw_curl(&g, "a",
                 "%s -H 'x-amz-max-parts: 1' -H 'x-amz-part-number-marker: 1' "
                 "'%s/oab/mp?attributes'",
                 all, g.url),
         200);
    T_TRUE(gw_has(&g, "a", "<Part><PartNumber>2</PartNumber><Size>5242880</Size></Part>"));
    T_FALSE(gw_has(&g, "a", "<PartNumber>1</PartNumber>"));
    T_FALSE(gw_has(&g, "a", "<PartNumber>3</PartNumber>"));
    T_TRUE(gw_has(&g, "a", "<IsTruncated>true</IsTruncated>"));
    T_TRUE(gw_has(&g, "a", "<NextPartNumberMarker>2</NextPartNumberMarker>"));
    if (t_sh("command -v aws >/dev/null && aws s3api get-object-attributes help >/dev/null 2>&1") ==
        0) {
        T_EQ(gw_aws(&g, "", "o",
                    "s3api get-object-attributes --bucket oab --key mp --object-attributes "
                    "ObjectSize ObjectParts"),
             0);
        T_TRUE(gw_has(&g, "o", "10486760"));
        T_TRUE(gw_has(&g, "o", "\"TotalPartsCount\": 3") || gw_has(&g, "o", "\"PartsCount\": 3"));
    }
    gw_stop(&g);
}

/*
 * Buckets are never versioned, and the gateway says so in S3's terms, so
 * that tools that walk versions work: ListObjectVersions lists every
 * object as its one version "null" (IsLatest), paged by key-marker and
 * version-id-marker, with a delimiter's common prefixes; versionId=null
 * names the object on GET, HEAD and DELETE, any other id none (404
 * NoSuchVersion); ?versions on an object, ?versionId on a PUT, and
 * ?attributes on anything but an object's GET are 501. The aws CLI's
 * s3api list-object-versions reads it.
 */
TEST(object_versions)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/ovb", g.url), 200);
    for (int i = 0; i < 5; i++)
        T_EQ(gw_curl(&g, "o", "-X PUT -d v%d %s/ovb/d/k%d", i, g.url, i), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d top %s/ovb/top", g.url), 200);
    T_EQ(gw_curl(&g, "l", "'%s/ovb?versions&max-keys=2'", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<ListVersionsResult"));
    T_TRUE(gw_has(&g, "l",
                  "<Version><Key>d/k0</Key><VersionId>null</VersionId>"
                  "<IsLatest>true</IsLatest>"));
    T_TRUE(gw_has(&g, "l", "<Key>d/k1</Key>"));
    T_FALSE(gw_has(&g, "l", "<Key>d/k2</Key>"));
    T_TRUE(gw_has(&g, "l", "<IsTruncated>true</IsTruncated>"));
    T_TRUE(gw_has(&g, "l",
                  "<NextKeyMarker>d/k1</NextKeyMarker>"
                  "<NextVersionIdMarker>null</NextVersionIdMarker>"));
    T_EQ(gw_curl(&g, "l", "'%s/ovb?versions&key-marker=d/k1&version-id-marker=null'", g.url), 200);
    T_FALSE(gw_has(&g, "l", "<Key>d/k1</Key>"));
    T_TRUE(gw_has(&g, "l", "<Key>d/k2</Key>"));
    T_TRUE(gw_has(&g, "l", "<Key>top</Key>"));
    T_TRUE(gw_has(&g, "l", "<IsTruncated>false</IsTruncated>"));
    T_EQ(gw_curl(&g, "l", "'%s/ovb?versions&delimiter=/'", g.url), 200);
    T_TRUE(gw_has(&g, "l", "<CommonPrefixes><Prefix>d/</Prefix></CommonPrefixes>"));
    T_FALSE(gw_has(&g, "l", "<Key>d/k0</Key>"));
    T_EQ(gw_curl(&g, "l", "'%s/ovb?versions&version-id-marker=null'", g.url), 400);
    T_EQ(gw_curl(&g, "l", "'%s/ovb?versions&key-marker=top&version-id-marker=abc'", g.url), 400);
    /* versionId=null is the object; another id none. */
    T_EQ(gw_curl(&g, "got", "'%s/ovb/top?versionId=null'", g.url), 200);
    T_TRUE(t_sh("printf top | cmp -s - %s", gw_path(&g, "got")) == 0);
    T_EQ(gw_curl(&g, "o", "'%s/ovb/top?versionId=3HL4kqtJlcpXroDTDmJ'", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchVersion</Code>"));
    T_EQ(gw_curl(&g, "o", "-I '%s/ovb/top?versionId=3HL4kqtJlcpXroDTDmJ'", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-X DELETE '%s/ovb/top?versionId=3HL4kqtJlcpXroDTDmJ'", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-I %s/ovb/top", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d x '%s/ovb/top?versionId=null'", g.url), 501);
    T_EQ(gw_curl(&g, "o", "'%s/ovb/top?versions'", g.url), 501);
    T_EQ(gw_curl(&g, "o", "-X PUT -d x '%s/ovb/top?attributes'", g.url), 501);
    T_EQ(gw_curl(&g, "o", "-X PUT '%s/ovb?versions'", g.url), 501);
    T_EQ(gw_curl(&g, "o", "-X DELETE '%s/ovb/top?versionId=null'", g.url), 204);
    T_EQ(gw_curl(&g, "o", "-I %s/ovb/top", g.url), 404);
    if (t_sh("command -v aws >/dev/null") == 0) {
        T_EQ(gw_aws(&g, "", "o", "s3api list-object-versions --bucket ovb --prefix d/"), 0);
        T_TRUE(gw_has(&g, "o", "\"VersionId\": \"null\""));
        T_TRUE(gw_has(&g, "o", "d/k4"));
    }
    gw_stop(&g);
}

/*
 * DeleteObject with If-Match, x-amz-if-match-size and
 * x-amz-if-match-last-modified-time (S3, 2025): each that does not hold is
 * 412 with the object left; all that hold delete it; on a key with nothing
 * 404; a malformed size or date 400. DeleteObjects the same per Object
 * (<ETag>, <Size>, <LastModifiedTime>), answered per key. The removal compares the generation
 * the check saw (rio_delete_if), so an object written in between is not
 * deleted. The aws CLI's --if-match when it has it.
 */
static void conditional_deletes_on(const char *backend)
{
    struct gw g;
    char lm[64];

    start_on(&g, backend);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/cdb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d one %s/cdb/k", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X DELETE -H 'If-Match: \"0123\"' %s/cdb/k", g.url), 412);
    T_TRUE(gw_has(&g, "o", "<Code>PreconditionFailed</Code>"));
    T_EQ(gw_curl(&g, "o", "-X DELETE -H 'x-amz-if-match-size: 4' %s/cdb/k", g.url), 412);
    T_EQ(gw_curl(&g, "o",
                 "-X DELETE -H 'x-amz-if-match-last-modified-time: Wed, 01 Jan 2025 00:00:00 GMT' "
                 "%s/cdb/k",
                 g.url),
         412);
    T_EQ(gw_curl(&g, "o", "-X DELETE -H 'x-amz-if-match-size: three' %s/cdb/k", g.url), 400);
    T_EQ(gw_curl(&g, "o", "-X DELETE -H 'x-amz-if-match-last-modified-time: soon' %s/cdb/k", g.url),
         400);
    T_EQ(gw_curl(&g, "o", "-I %s/cdb/k", g.url), 200);
    T_EQ(t_sh("grep -i '^last-modified:' %s | cut -d' ' -f2- | tr -d '\r\n' > %s",
              gw_path(&g, "o.h"), gw_path(&g, "lm")),
         0);
    gw_slurp_str(&g, "lm", lm, sizeof(lm));
    T_EQ(gw_curl(&g, "o",
                 "-X DELETE -H 'If-Match: \"f97c5d29941bfb1b2fdab0874906ab82\"' "
                 "-H 'x-amz-if-match-size: 3' -H 'x-amz-if-match-last-modified-time: %s' "
                 "%s/cdb/k",
                 lm, g.url),
         204);
    T_EQ(gw_curl(&g, "o", "-I %s/cdb/k", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-X DELETE -H 'If-Match: *' %s/cdb/k", g.url), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchKey</Code>"));
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/cdb/k", g.url), 204); /* unconditional: as S3 */
    /* DeleteObjects, each Object on its own <ETag>, <Size>,
     * <LastModifiedTime> (ISO 8601): refused ones left and answered as
     * errors, the others deleted. */
    T_EQ(gw_curl(&g, "o", "-X PUT -d one %s/cdb/k2", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d one %s/cdb/k3", g.url), 200);
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<Delete>"
                 "<Object><Key>k2</Key><ETag>\"0123\"</ETag></Object>"
                 "<Object><Key>k3</Key><ETag>\"f97c5d29941bfb1b2fdab0874906ab82\"</ETag>"
                 "<Size>3</Size></Object>"
                 "<Object><Key>k4</Key><Size>3</Size></Object>"
                 "<Object><Key>k2</Key><Size>x</Size></Object>"
                 "</Delete>' '%s/cdb?delete'",
                 g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<Error><Key>k2</Key><Code>PreconditionFailed</Code>"));
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>k3</Key></Deleted>"));
    T_TRUE(gw_has(&g, "o", "<Error><Key>k4</Key><Code>NoSuchKey</Code>"));
    T_TRUE(gw_has(&g, "o", "<Error><Key>k2</Key><Code>InvalidArgument</Code>"));
    T_EQ(gw_curl(&g, "o", "-I %s/cdb/k3", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-I %s/cdb/k2", g.url), 200);
    T_EQ(t_sh("grep -i '^last-modified:' %s | cut -d' ' -f2- | tr -d '\r\n' > %s",
              gw_path(&g, "o.h"), gw_path(&g, "lm")),
         0);
    T_EQ(t_sh("date -u -d \"$(cat %s)\" +%%Y-%%m-%%dT%%H:%%M:%%S.000Z | tr -d '\n' > %s",
              gw_path(&g, "lm"), gw_path(&g, "iso")),
         0);
    gw_slurp_str(&g, "iso", lm, sizeof(lm));
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<Delete><Object><Key>k2</Key>"
                 "<LastModifiedTime>%s</LastModifiedTime></Object></Delete>' '%s/cdb?delete'",
                 lm, g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>k2</Key></Deleted>"));
    T_EQ(gw_curl(&g, "o", "-I %s/cdb/k2", g.url), 404);
    if (t_sh("command -v aws >/dev/null && aws s3api delete-object help 2>/dev/null | "
             "grep -q -- --if-match") == 0) {
        T_EQ(gw_curl(&g, "o", "-X PUT -d one %s/cdb/a", g.url), 200);
        T_NE(gw_aws(&g, "", "o", "s3api delete-object --bucket cdb --key a --if-match '\"0123\"'"),
             0);
        T_TRUE(gw_has(&g, "o", "PreconditionFailed"));
        T_EQ(gw_aws(&g, "", "o",
                    "s3api delete-object --bucket cdb --key a "
                    "--if-match '\"f97c5d29941bfb1b2fdab0874906ab82\"'"),
             0);
        T_EQ(gw_curl(&g, "o", "-I %s/cdb/a", g.url), 404);
    }
    gw_stop(&g);
}

TEST(conditional_deletes)
{
    on_store_and_file(conditional_deletes_on);
    conditional_deletes_on(DATA_DIR_STORE);
}

/*
 * What the gateway does not do, asked for where going on without it would do
 * something else, silently: SSE-C would store the bytes in the clear; an object lock would
 * not hold. Each is refused before anything is written, with S3's answer
 * where a store lacks the feature.
 */
TEST(writes_it_cannot_honour_refused)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/wcb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d one %s/wcb/k", g.url), 200);
    /* SSE-C, writing and reading. */
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -d two -H 'x-amz-server-side-encryption-customer-algorithm: AES256' "
                 "-H 'x-amz-server-side-encryption-customer-key: "
                 "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=' %s/wcb/k",
                 g.url),
         501);
    T_TRUE(gw_has(&g, "o", "SSE-C"));
    T_EQ(gw_curl(&g, "o", "-H 'x-amz-server-side-encryption-customer-algorithm: AES256' %s/wcb/k",
                 g.url),
         501);
    /* Object lock, on an object and on a new bucket. */
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -d two -H 'x-amz-object-lock-mode: COMPLIANCE' "
                 "-H 'x-amz-object-lock-retain-until-date: 2030-01-01T00:00:00Z' %s/wcb/k",
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidRequest</Code>"));
    T_EQ(gw_curl(&g, "o", "-X PUT -d two -H 'x-amz-object-lock-legal-hold: ON' %s/wcb/k", g.url),
         400);
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-bucket-object-lock-enabled: true' %s/wclock", g.url),
         501);
    T_EQ(gw_curl(&g, "o", "-I %s/wclock", g.url), 404);
    /* A storage class S3 does not have (S3's answer); one it has is taken
     * and stored as the gateway's one class. */
    T_EQ(gw_curl(&g, "o", "-X PUT -d two -H 'x-amz-storage-class: CHEAP' %s/wcb/k", g.url), 400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidStorageClass</Code>"));
    T_EQ(gw_curl(&g, "o",
                 "-X PUT -H 'x-amz-storage-class: standard' -H 'x-amz-copy-source: /wcb/k' "
                 "%s/wcb/k2",
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidStorageClass</Code>"));
    T_EQ(gw_curl(&g, "o", "-X POST -H 'x-amz-storage-class: X' '%s/wcb/k3?uploads'", g.url), 400);
    T_TRUE(gw_has(&g, "o", "<Code>InvalidStorageClass</Code>"));
    T_EQ(gw_curl(&g, "o", "-I %s/wcb/k2", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-X PUT -d ia -H 'x-amz-storage-class: STANDARD_IA' %s/wcb/ia", g.url),
         200);
    T_EQ(gw_curl(&g, "o", "-I %s/wcb/ia", g.url), 200);
    /* Nothing of it was written. */
    T_EQ(gw_curl(&g, "got", "%s/wcb/k", g.url), 200);
    T_TRUE(t_sh("printf one | cmp -s - %s", gw_path(&g, "got")) == 0);

    gw_stop(&g);
}

/* x-amz-copy-source is split at a literal '?' before its key is decoded, as
 * S3 does: a key with '?' in it (sent as %3F) is copied, and "x%3FversionId=
 * null" names that key, not "x". */
TEST(copy_source_key_with_question_mark)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/cqb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d AAAA '%s/cqb/what%%3F'", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d XXXX '%s/cqb/x'", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d BBBB '%s/cqb/x%%3FversionId%%3Dnull'", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /cqb/what%%3F' %s/cqb/c1", g.url), 200);
    T_EQ(gw_curl(&g, "got", "%s/cqb/c1", g.url), 200);
    T_TRUE(t_sh("printf AAAA | cmp -s - %s", gw_path(&g, "got")) == 0);
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /cqb/x%%3FversionId%%3Dnull' %s/cqb/c2",
                 g.url),
         200);
    T_EQ(gw_curl(&g, "got", "%s/cqb/c2", g.url), 200);
    T_TRUE(t_sh("printf BBBB | cmp -s - %s", gw_path(&g, "got")) == 0);
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /cqb/x?versionId=null' %s/cqb/c3", g.url),
         200);
    T_EQ(gw_curl(&g, "got", "%s/cqb/c3", g.url), 200);
    T_TRUE(t_sh("printf XXXX | cmp -s - %s", gw_path(&g, "got")) == 0);
    T_EQ(gw_curl(&g, "o", "-X PUT -H 'x-amz-copy-source: /cqb/x?versionId=abc' %s/cqb/c4", g.url),
         501);
    if (t_sh("command -v aws >/dev/null") == 0) {
        T_EQ(gw_aws(&g, "", "o", "s3 cp 's3://cqb/what?' s3://cqb/c5"), 0);
        T_EQ(gw_curl(&g, "got", "%s/cqb/c5", g.url), 200);
        T_TRUE(t_sh("printf AAAA | cmp -s - %s", gw_path(&g, "got")) == 0);
    }
    gw_stop(&g);
}

/* DeleteObjects: a VersionId other than "null" (the only version an
 * unversioned bucket has) names no version here: that key's <Error> is
 * NoSuchVersion and the object stays; "null" deletes it. A body that is not
 * one well-formed Delete of one Object or more deletes nothing
 * (MalformedXML), a comment hiding an Object included; CompleteMultipartUpload
 * likewise. */
/* The ETag of the last answer "o" (its headers, o.h) into file name, bare. */
static void etag_to(struct gw *g, const char *name)
{
    T_EQ(t_sh("sed -n 's/^[Ee][Tt]ag: *\"\\([0-9a-f]*\\)\".*/\\1/p' %s | tr -d '\\r\\n' > %s",
              gw_path(g, "o.h"), gw_path(g, name)),
         0);
}

TEST(delete_objects_versions_and_malformed_xml)
{
    static const char *const bad[] = {
        "<Delete><Object><Key>a</Key></Object>",
        "<Delete></Delete>",
        "<Delete><Object></Object></Delete>",
        "<Delete><Object><Key>a</Key></Object></DeleteXX>",
        "<Delete><Object><Key>b</Key></Object><!-- <Object><Key>a</Key></Object> --></Delete>",
        "<Delete><Object><Key><X>a</X></Key></Object></Delete>",
        "<Delete><Object><Key>a</Key></Object></Delete><Delete/>",
        /* numeric references: a digit not of its base, no digit, past
         * U+10FFFF, a surrogate, NUL (each read leniently before) */
        "<Delete><Object><Key>&#x61zz;</Key></Object></Delete>",
        "<Delete><Object><Key>&#97a;</Key></Object></Delete>",
        "<Delete><Object><Key>&#x;</Key></Object></Delete>",
        "<Delete><Object><Key>&#x110000;</Key></Object></Delete>",
        "<Delete><Object><Key>&#xd800;</Key></Object></Delete>",
        "<Delete><Object><Key>&#0;</Key></Object></Delete>",
    };
    struct gw g;
    char id[64];

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/dxb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d a %s/dxb/a", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d b %s/dxb/b", g.url), 200);
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int st = gw_curl(&g, "o", "-X POST --data-binary '%s' '%s/dxb?delete'", bad[i], g.url);
        if (st != 400 || !gw_has(&g, "o", "<Code>MalformedXML</Code>"))
            T_FAIL("DeleteObjects %s: %d, want 400 MalformedXML", bad[i], st);
    }
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/a", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/b", g.url), 200);
    /* A key named by numeric references of characters past ASCII (2, 3
     * and 4 bytes of UTF-8): deleted, as an XML parser reads them (they
     * were refused: only ASCII was taken). */
    T_EQ(gw_curl(&g, "o", "-X PUT -d u %s/dxb/%%C3%%A9%%E2%%82%%AC%%F0%%9F%%A5%%B3", g.url), 200);
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<Delete><Object><Key>&#233;&#x20AC;&#x1F973;</Key>"
                 "</Object></Delete>' '%s/dxb?delete'",
                 g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>\xc3\xa9\xe2\x82\xac\xf0\x9f\xa5\xb3</Key></Deleted>"));
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/%%C3%%A9%%E2%%82%%AC%%F0%%9F%%A5%%B3", g.url), 404);
    /* A malformed <Object> after good ones, and 1001 of them: refused
     * before anything is deleted (the first ones went before the 400). */
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<Delete><Object><Key>a</Key></Object><Object><Key>b"
                 "</Key></Object><Object><Key>c</Key><Key>x</Key></Object></Delete>' "
                 "'%s/dxb?delete'",
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>MalformedXML</Code>"));
    T_EQ(t_sh("(printf '<Delete><Object><Key>a</Key></Object><Object><Key>b</Key></Object>'; "
              "for i in $(seq 999); do printf '<Object><Key>k%%d</Key></Object>' $i; done; "
              "printf '</Delete>') > %s",
              gw_path(&g, "many.xml")),
         0);
    T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/dxb?delete'", gw_path(&g, "many.xml"),
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "At most 1000 keys"));
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/a", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/b", g.url), 200);
    /* An <Object> with an attribute is one (it was skipped: the key stayed). */
    T_EQ(gw_curl(&g, "o", "-X PUT -d c %s/dxb/c", g.url), 200);
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<Delete><Object id=\"1\"><Key>c</Key></Object></Delete>' "
                 "'%s/dxb?delete'",
                 g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>c</Key></Deleted>"));
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/c", g.url), 404);
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Delete "
                 "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Object><Key>a</Key>"
                 "<VersionId>3sL4kqtJlcpXroDTDmJ+rmSpXd3dIbrHY</VersionId></Object></Delete>' "
                 "'%s/dxb?delete'",
                 g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchVersion</Code>"));
    T_FALSE(gw_has(&g, "o", "<Deleted>"));
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/a", g.url), 200);
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<Delete><Object><Key>a</Key><VersionId>null</VersionId>"
                 "</Object><Object><Key>b</Key></Object></Delete>' '%s/dxb?delete'",
                 g.url),
         200);
    T_TRUE(gw_has(&g, "o", "<Deleted><Key>a</Key></Deleted><Deleted><Key>b</Key></Deleted>"));
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/a", g.url), 404);
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/b", g.url), 404);
    /* CompleteMultipartUpload with a wrong closing tag or none. */
    T_EQ(gw_curl(&g, "up", "-X POST '%s/dxb/m?uploads'", g.url), 200);
    gw_upload_id(&g, "up", id, sizeof(id));
    T_EQ(gw_curl(&g, "o", "-X PUT -d part '%s/dxb/m?uploadId=%s&partNumber=1'", g.url, id), 200);
    etag_to(&g, "etag");
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary \"<CompleteMultipartUpload><Part><PartNumber>1"
                 "</PartNumber><ETag>$(cat %s)</ETag></Part></CompleteMultipartUploadXX>\" "
                 "'%s/dxb/m?uploadId=%s'",
                 gw_path(&g, "etag"), g.url, id),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>MalformedXML</Code>"));
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary \"<CompleteMultipartUpload><Part><PartNumber>1"
                 "</PartNumber><ETag>$(cat %s)</ETag></Part>\" '%s/dxb/m?uploadId=%s'",
                 gw_path(&g, "etag"), g.url, id),
         400);
    T_EQ(gw_curl(&g, "o", "-I %s/dxb/m", g.url), 404);
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary \"<CompleteMultipartUpload><Part><PartNumber>1"
                 "</PartNumber><ETag>$(cat %s)</ETag></Part></CompleteMultipartUpload>\" "
                 "'%s/dxb/m?uploadId=%s'",
                 gw_path(&g, "etag"), g.url, id),
         200);
    T_EQ(gw_curl(&g, "got", "%s/dxb/m", g.url), 200);
    T_TRUE(t_sh("printf part | cmp -s - %s", gw_path(&g, "got")) == 0);
    /* A <Part> with an attribute is a part: it was skipped, and the object
     * completed without it (200, ETag -1). */
    gw_file(&g, "p1", 5 * 1024 * 1024, 31);
    T_EQ(gw_curl(&g, "up", "-X POST '%s/dxb/m2?uploads'", g.url), 200);
    gw_upload_id(&g, "up", id, sizeof(id));
    char e1[64], e2[64];
    T_EQ(gw_curl(&g, "o", "-X PUT --data-binary @%s '%s/dxb/m2?uploadId=%s&partNumber=1'",
                 gw_path(&g, "p1"), g.url, id),
         200);
    etag_to(&g, "e1");
    T_EQ(gw_curl(&g, "o", "-X PUT -d tail '%s/dxb/m2?uploadId=%s&partNumber=2'", g.url, id), 200);
    etag_to(&g, "e2");
    snprintf(e1, sizeof(e1), "$(cat %s)", gw_path(&g, "e1"));
    snprintf(e2, sizeof(e2), "$(cat %s)", gw_path(&g, "e2"));
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary \"<CompleteMultipartUpload><Part><PartNumber>1"
                 "</PartNumber><ETag>%s</ETag></Part><Part a='x'><PartNumber>2</PartNumber>"
                 "<ETag>%s</ETag></Part></CompleteMultipartUpload>\" '%s/dxb/m2?uploadId=%s'",
                 e1, e2, g.url, id),
         200);
    T_TRUE(gw_has(&g, "o", "-2&quot;</ETag>"));
    T_EQ(gw_curl(&g, "got", "%s/dxb/m2", g.url), 200);
    T_EQ(t_sh("(cat %s; printf tail) | cmp -s - %s", gw_path(&g, "p1"), gw_path(&g, "got")), 0);
    gw_stop(&g);
}

/* An XML body that declares ISO-8859-1 and holds Latin-1 bytes (a Java or
 * PHP client's), the name in any case: read as S3 reads it, its characters
 * transcoded, where it was refused 400 MalformedXML as no UTF-8. Another
 * declared encoding is refused by its name. */
static const char *const latin1_deletes[] = {
    "<?xml version='1.0' encoding='ISO-8859-1'?>\n"
    "<Delete><Object><Key>caf\xe9</Key></Object><Object><Key>na\xefve</Key></Object></Delete>",
    "<?xml version=\"1.0\" encoding=\"Latin1\"?><Delete><Object><Key>caf\xe9</Key></Object>"
    "</Delete>",
};

TEST(xml_body_in_latin1)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/lat", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-X PUT -d c %s/lat/keep", g.url), 200);
    for (size_t i = 0; i < sizeof(latin1_deletes) / sizeof(latin1_deletes[0]); i++) {
        const char *body = latin1_deletes[i];
        T_EQ(gw_curl(&g, "o", "-X PUT -d c %s/lat/caf%%C3%%A9", g.url), 200);
        t_write_file(gw_path(&g, "l1.xml"), body, strlen(body));
        T_EQ(gw_curl(&g, "o", "-X POST --data-binary @%s '%s/lat?delete'", gw_path(&g, "l1.xml"),
                     g.url),
             200);
        /* The answer is UTF-8: the key as its characters are written there. */
        T_TRUE(gw_has(&g, "o", "<Deleted><Key>caf\xc3\xa9</Key></Deleted>"));
        T_TRUE(i > 0 || gw_has(&g, "o", "<Deleted><Key>na\xc3\xafve</Key></Deleted>"));
        T_FALSE(gw_has(&g, "o", "caf\xe9") || gw_has(&g, "o", "<Error>"));
        T_EQ(gw_curl(&g, "o", "-I %s/lat/caf%%C3%%A9", g.url), 404);
    }
    /* UTF-16 (its declaration written in ASCII): refused, by its name, and
     * nothing deleted. */
    T_EQ(gw_curl(&g, "o",
                 "-X POST --data-binary '<?xml version=\"1.0\" encoding=\"UTF-16\"?><Delete>"
                 "<Object><Key>keep</Key></Object></Delete>' '%s/lat?delete'",
                 g.url),
         400);
    T_TRUE(gw_has(&g, "o", "<Code>MalformedXML</Code>") && gw_has(&g, "o", "UTF-16"));
    T_EQ(gw_curl(&g, "o", "-I %s/lat/keep", g.url), 200);
    gw_stop(&g);
}

/* The largest bodies S3 takes, shaped as boto3 sends them: a DeleteObjects
 * of 1000 keys of 1020 bytes (with the bucket's name, railio's 1024), each
 * holding an '&' (&amp; in the XML: 1,052,084 bytes), and a Complete of
 * 8400 parts each with its CRC-32, as the aws CLI and boto3 list them
 * (ETag, ChecksumCRC32, PartNumber: 1,074,192 bytes; a 66 GiB file in the
 * CLI's 8 MiB parts). Both passed 1 MiB and were refused 400 MalformedXML,
 * the Complete after every part was in. */
static const char big_xml_py[] =
    "import base64, http.client, re, struct, sys, zlib\n"
    "url = sys.argv[1].split('//')[1]\n"
    "c = http.client.HTTPConnection(url, timeout=120)\n"
    "def req(m, p, body=None, h={}):\n"
    "    c.request(m, p, body=body, headers=h); r = c.getresponse(); d = r.read()\n"
    "    return r.status, r.getheader('ETag'), d\n"
    "assert req('PUT', '/bxl')[0] == 200\n"
    "keys = ['%04d&' % i + 'k' * 1015 for i in range(1000)]\n"
    "for k in keys[:3]:\n"
    "    assert req('PUT', '/bxl/' + k.replace('&', '%26'), b'x')[0] == 200\n"
    "body = '<Delete xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Quiet>true</Quiet>' + "
    "''.join('<Object><Key>%s</Key></Object>' % k.replace('&', '&amp;') for k in keys) + "
    "'</Delete>'\n"
    "assert len(body) > 1 << 20\n"
    "st, _, d = req('POST', '/bxl?delete', body.encode())\n"
    "assert st == 200 and b'<Error>' not in d, (st, d[:300])\n"
    "for k in keys[:3]:\n"
    "    assert req('HEAD', '/bxl/' + k.replace('&', '%26'))[0] == 404\n"
    "st, _, d = req('POST', '/bxl/big?uploads', None, {'x-amz-checksum-algorithm': 'CRC32'})\n"
    "u = re.search(rb'<UploadId>(\\w+)', d).group(1).decode()\n"
    "parts, data = [], b''\n"
    "for i in range(1, 8401):\n"
    "    b = b'%d,' % i\n"
    "    ck = base64.b64encode(struct.pack('>I', zlib.crc32(b))).decode()\n"
    "    st, e, _ = req('PUT', '/bxl/big?uploadId=%s&partNumber=%d' % (u, i), b,\n"
    "                   {'x-amz-checksum-crc32': ck})\n"
    "    assert st == 200, st\n"
    "    parts.append((i, e, ck)); data += b\n"
    "body = '<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">' + "
    "''.join('<Part><ETag>%s</ETag><ChecksumCRC32>%s</ChecksumCRC32><PartNumber>%d</PartNumber>"
    "</Part>' % (e, ck, i) for i, e, ck in parts) + "
    "'</CompleteMultipartUpload>'\n"
    "assert len(body) > 1 << 20\n"
    "st, _, d = req('POST', '/bxl/big?uploadId=' + u, body.encode())\n"
    "assert st == 200 and b'<Error>' not in d and b'-8400' in d, (st, d[:300])\n"
    "st, _, d = req('GET', '/bxl/big')\n"
    "assert st == 200 and d == data, st\n"
    "print('ok')\n";

TEST(xml_bodies_as_large_as_s3_takes)
{
    static const char *const any_part[] = {"--s3-min-part-size", "0", NULL};
    struct gw g;

    gw_start(&g, NULL, any_part);
    gw_python(&g, big_xml_py, "-", "-", "ok");
    gw_stop(&g);
}

/* Many connections each sending a DeleteObjects body of 7 MiB at once,
 * held before its last bytes: the gateway holds GW_XML_BODIES_MAX (64 MiB)
 * of them in all, not 7 MiB times --s3-max-conns (7 GiB: 32 held 224 MB,
 * 200 of them 1.4 GB); one past it is answered 503 SlowDown, and what the
 * held ones took is given back when they end. */
/* The two tests below: conn(src) from a source address, answer(c) the
 * XML of one answer, a bucket B made, and hdr + body a DeleteObjects of
 * 7 MiB whose last bytes (tail) are held back. */
#define XML_SENDERS_PY(B)                                                                          \
    "import socket, sys, time\n"                                                                   \
    "host, port = sys.argv[1].split('//')[1].split(':')\n"                                         \
    "def conn(src='127.0.0.1'):\n"                                                                 \
    "    return socket.create_connection((host, int(port)), timeout=120, "                         \
    "source_address=(src, 0))\n"                                                                   \
    "def answer(c):\n"                                                                             \
    "    d = b''\n"                                                                                \
    "    while b'</Error>' not in d and b'</DeleteResult>' not in d:\n"                            \
    "        x = c.recv(65536)\n"                                                                  \
    "        if not x: break\n"                                                                    \
    "        d += x\n"                                                                             \
    "    return d\n"                                                                               \
    "s = conn(); s.sendall(b'PUT /" B                                                              \
    " HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: 0\\r\\n\\r\\n')\n"                                \
    "assert b' 200 ' in s.recv(4096); s.close()\n"                                                 \
    "tail = b'</Key></Object></Delete>'\n"                                                         \
    "body = b'<Delete><Object><Key>' + b'k' * 7000000 + tail\n"                                    \
    "hdr = b'POST /" B "?delete HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: %d\\r\\n\\r\\n' % "     \
    "len(body)\n"

static const char xml_aggregate_py[] = XML_SENDERS_PY(
    "bagg") "pid = open(sys.argv[4] + '/pid').read().strip()\n"
            "def rss():\n"
            "    for l in open('/proc/%s/status' % pid):\n"
            "        if l.startswith('VmRSS:'): return int(l.split()[1])\n"
            "r0 = rss(); peak = r0; held = []\n"
            "for i in range(32):\n"
            "    c = conn(); c.sendall(hdr + body[:-len(tail)]); held.append(c)\n"
            "    peak = max(peak, rss())\n"
            "for i in range(20):\n"
            "    time.sleep(0.1); peak = max(peak, rss())\n"
            "grew = peak - r0\n"
            "print('RSS %d KiB before, %d KiB more at most' % (r0, grew))\n"
            "assert grew < int(open(sys.argv[4] + '/limit').read()), grew\n"
            "held[-1].sendall(tail)\n"
            "d = answer(held[-1])\n"
            "assert b' 503 ' in d and b'<Code>SlowDown</Code>' in d, d[:300]\n"
            "for c in held: c.close()\n"
            "# as large as the most one request may hold: the held ones gave theirs back\n"
            "again = b'<Delete>' + b' ' * 6000000 + b'<Object><Key>a</Key></Object></Delete>'\n"
            "for i in range(100):\n"
            "    c = conn()\n"
            "    c.sendall(b'POST /bagg?delete HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: "
            "%d\\r\\n\\r\\n' "
            "% len(again) + again)\n"
            "    d = answer(c); c.close()\n"
            "    if b' 200 ' in d: break\n"
            "    time.sleep(0.1)\n"
            "assert b' 200 ' in d, d[:300]\n"
            "print('ok')\n";

TEST(xml_bodies_bounded_in_aggregate)
{
    struct gw g;
    char pid[32];

    gw_start(&g, NULL, NULL);
    snprintf(pid, sizeof(pid), "%d\n", (int)g.e.pid);
    t_write_file(gw_path(&g, "pid"), pid, strlen(pid));
    /* KiB the server may grow by: 64 MiB of bodies, the connections'
     * buffers and slack (a sanitizer's quarantine keeps what realloc
     * freed: no bound to check there) */
    snprintf(pid, sizeof(pid), "%d", T_SANITIZED ? 4 << 20 : 140 << 10);
    t_write_file(gw_path(&g, "limit"), pid, strlen(pid));
    gw_python(&g, xml_aggregate_py, "-", "-", "ok");
    gw_stop(&g);
}

/* Slow senders from one address holding DeleteObjects bodies of 7 MiB
 * unfinished hold at most GW_XML_ADDR_MAX (16 MiB) of the 64 MiB all XML
 * bodies share: another client's DeleteObjects as large is answered 200
 * while they hold theirs (before, ten of them held it all: 503 SlowDown
 * for everyone until they ended, up to the idle timeout), and one more of
 * theirs is refused 503 SlowDown. */
static const char xml_share_py[] = XML_SENDERS_PY(
    "bshr") "held = []\n"
            "for i in range(10):\n"
            "    c = conn(); c.sendall(hdr + body[:-len(tail)]); held.append(c)\n"
            "time.sleep(1)\n"
            "other = b'<Delete>' + b' ' * 6000000 + b'<Object><Key>a</Key></Object></Delete>'\n"
            "for src in ('127.0.0.2', '127.0.0.3'):\n"
            "    c = conn(src)\n"
            "    c.sendall(b'POST /bshr?delete HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: "
            "%d\\r\\n\\r\\n' "
            "% len(other) + other)\n"
            "    d = answer(c); c.close()\n"
            "    assert b' 200 ' in d and b'<Deleted>' in d, (src, d[:300])\n"
            "held[-1].sendall(tail)\n"
            "d = answer(held[-1])\n"
            "assert b' 503 ' in d and b'<Code>SlowDown</Code>' in d, d[:300]\n"
            "for c in held: c.close()\n"
            "print('ok')\n";

TEST(xml_bodies_shared_by_client_address)
{
    struct gw g;

    gw_start(&g, NULL, NULL);
    gw_python(&g, xml_share_py, "-", "-", "ok");
    gw_stop(&g);
}

/* XML bodies held must keep coming (GW_XML_MIN_RATE, here 4 MiB/s from 1 s
 * on, 2 s idle at most, by RAILIOD_TEST_XML_RATE). Before, two senders from
 * one address each holding a DeleteObjects body of 7 MiB, one of them
 * stalled and one adding a byte now and then, kept their 14 MiB for as long
 * as they liked (a byte every 119 s: for ever), and a third request of that
 * address was refused 503 SlowDown meanwhile; with four addresses, every
 * client's. Now the stalled one is closed after the idle time and the slow
 * one once it falls below the rate (S3 would answer 400 RequestTimeout;
 * libmicrohttpd sends nothing before a body is in), their bytes given
 * back: the third is answered 200. A body sent at once is not touched (the other tests). */
static const char xml_slow_py[] = XML_SENDERS_PY(
    "bslo") "stalled = conn(); stalled.sendall(hdr + body[:-len(tail)])\n"
            "slow = conn(); slow.sendall(hdr + body[:-len(tail) - 64])\n"
            "t0 = time.time(); closed = False\n"
            "slow.settimeout(0.5)\n"
            "for i in range(64):\n"
            "    try:\n"
            "        slow.sendall(b'k')\n"
            "        closed = slow.recv(65536) == b''\n"
            "    except socket.timeout:\n"
            "        pass\n"
            "    except OSError:\n"
            "        closed = True\n"
            "    if closed: break\n"
            "print('slow one closed after %.1f s' % (time.time() - t0))\n"
            "assert closed, 'the slow one was not closed'\n"
            "stalled.settimeout(10)\n"
            "assert stalled.recv(65536) == b'', 'the stalled one was not closed'\n"
            "other = b'<Delete>' + b' ' * 6000000 + b'<Object><Key>a</Key></Object></Delete>'\n"
            "c = conn()\n"
            "c.sendall(b'POST /bslo?delete HTTP/1.1\\r\\nHost: x\\r\\nContent-Length: "
            "%d\\r\\n\\r\\n' % len(other) + other)\n"
            "d = answer(c); c.close()\n"
            "assert b' 200 ' in d and b'<Deleted>' in d, d[:300]\n"
            "print('ok')\n";

TEST(xml_bodies_must_keep_coming)
{
    struct gw g;

    setenv("RAILIOD_TEST_XML_RATE", "4194304:1:2", 1);
    gw_start(&g, NULL, NULL);
    unsetenv("RAILIOD_TEST_XML_RATE");
    gw_python(&g, xml_slow_py, "-", "-", "ok");
    gw_stop(&g);
}

/* Over the server's own memory the gateway refuses what does not fit (507
 * InsufficientStorage) rather than evicting objects it acknowledged: a 200
 * means kept, to an S3 client. --evict lru, given, makes it a cache again,
 * with a warning at start. */
TEST(own_memory_refuses_rather_than_evicts)
{
    const char *refuse[] = {"--memory", "16M", NULL};
    const char *lru[] = {"--memory", "16M", "--evict", "lru", NULL};
    struct gw g;
    int st = 0;

    start_logged(&g, NULL, refuse);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/evb", g.url), 200);
    gw_file(&g, "src", 6000000, 3);
    T_EQ(gw_curl(&g, "o", "-T %s %s/evb/first", gw_path(&g, "src"), g.url), 200);
    for (int i = 0; i < 4 && st != 507; i++)
        st = gw_curl(&g, "o", "-T %s %s/evb/more%d", gw_path(&g, "src"), g.url, i);
    T_EQ(st, 507);
    T_TRUE(gw_has(&g, "o", "<Code>InsufficientStorage</Code>"));
    T_EQ(gw_curl(&g, "got", "%s/evb/first", g.url), 200);
    T_TRUE(gw_same(&g, "got", "src"));
    T_EQ(srv_log_count(&g.e, "objects written through S3 are dropped"), 0);
    gw_stop(&g);

    start_logged(&g, NULL, lru);
    for (int i = 0; i < 100 && !srv_log_count(&g.e, "objects written through S3 are dropped"); i++)
        t_sleep_ms(20); /* logged just after the port file is written */
    T_GT(srv_log_count(&g.e, "objects written through S3 are dropped"), 0);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/evb", g.url), 200);
    gw_file(&g, "src", 6000000, 3);
    T_EQ(gw_curl(&g, "o", "-T %s %s/evb/first", gw_path(&g, "src"), g.url), 200);
    for (int i = 0; i < 4; i++)
        T_EQ(gw_curl(&g, "o", "-T %s %s/evb/more%d", gw_path(&g, "src"), g.url, i), 200);
    T_EQ(gw_curl(&g, "o", "-I %s/evb/first", g.url), 404);
    gw_stop(&g);
}

/* DeleteBucket takes the bucket's multipart uploads with it, parts and all:
 * a bucket created again under the name neither lists them nor completes
 * them. Over file://, where leftovers would be files. */
TEST(delete_bucket_drops_its_uploads)
{
    struct gw g;
    char url[512], id[64];
    const char *dir = file_backend(url, sizeof(url));

    gw_start(&g, url, NULL);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/rbb", g.url), 200);
    T_EQ(gw_curl(&g, "up", "-X POST '%s/rbb/m?uploads'", g.url), 200);
    gw_upload_id(&g, "up", id, sizeof(id));
    T_EQ(gw_curl(&g, "o", "-X PUT -d part '%s/rbb/m?uploadId=%s&partNumber=1'", g.url, id), 200);
    T_EQ(gw_curl(&g, "o", "'%s/rbb?uploads'", g.url), 200);
    T_TRUE(gw_has(&g, "o", id));
    T_EQ(gw_curl(&g, "o", "-X DELETE %s/rbb", g.url), 204);
    T_EQ(gw_curl(&g, "o", "-X PUT %s/rbb", g.url), 200);
    T_EQ(gw_curl(&g, "o", "'%s/rbb?uploads'", g.url), 200);
    T_FALSE(gw_has(&g, "o", id));
    T_EQ(gw_curl(&g, "o", "'%s/rbb/m?uploadId=%s'", g.url, id), 404);
    T_TRUE(gw_has(&g, "o", "<Code>NoSuchUpload</Code>"));
    T_NE(t_sh("find %s/store -path '*.rio-mpu*' -type f | grep -q .", dir), 0);
    gw_stop(&g);
}

/* ListObjects (V1 and V2) name the checksum an object keeps, as S3 does
 * since 2022 (ChecksumAlgorithm) and 2025 (ChecksumType); an object
 * without one none. */
TEST(list_checksum_algorithm)
{
    struct gw g;
    char url[512], crc[16];

    file_backend(url, sizeof(url));
    gw_start(&g, url, NULL);
    gw_file(&g, "f", 70000, 83);
    gw_crc32_b64(&g, "f", crc, sizeof(crc));
    T_EQ(gw_curl(&g, "o", "-X PUT %s/lck", g.url), 200);
    T_EQ(gw_curl(&g, "o", "-T %s -H 'x-amz-checksum-crc32: %s' %s/lck/with", gw_path(&g, "f"), crc,
                 g.url),
         200);
    T_EQ(gw_curl(&g, "o", "-T %s %s/lck/without", gw_path(&g, "f"), g.url), 200);
    for (int v2 = 0; v2 < 2; v2++) {
        T_EQ(gw_curl(&g, "l", "'%s/lck%s'", g.url, v2 ? "?list-type=2" : ""), 200);
        T_TRUE(gw_has(&g, "l", "<Key>with</Key><LastModified>") &&
               gw_has(&g, "l",
                      "</ETag><ChecksumAlgorithm>CRC32</ChecksumAlgorithm><ChecksumType>FULL_OBJECT"
                      "</ChecksumType><Size>70000</Size>"));
        T_EQ(t_sh("grep -o '<Contents>.*</Contents>' %s | grep -o '<ChecksumAlgorithm>' | wc -l | "
                  "grep -qx 1",
                  gw_path(&g, "l")),
             0);
    }
    gw_stop(&g);
}

/* n connections from 127.0.0.1 that each send half a request and hold it
 * (the fds in fds[]); how many the gateway kept open after a moment. */
static unsigned hold_half_requests(const struct gw *g, int *fds, unsigned n)
{
    const char *colon = strrchr(g->url, ':');
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)atoi(colon + 1))};
    static const char half[] = "GET /b/k HTTP/1.1\r\nHost: x\r\n";
    unsigned kept = 0;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (unsigned i = 0; i < n; i++) {
        fds[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        T_GE(fds[i], 0);
        T_EQ(connect(fds[i], (struct sockaddr *)&sa, sizeof(sa)), 0);
        T_EQ(send(fds[i], half, sizeof(half) - 1, MSG_NOSIGNAL), (ssize_t)(sizeof(half) - 1));
    }
    usleep(500 * 1000);
    for (unsigned i = 0; i < n; i++) {
        char b;
        ssize_t r = recv(fds[i], &b, 1, MSG_DONTWAIT);
        kept += r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK); /* still open, silent */
    }
    return kept;
}

/* 256 connections from one address that send half a request and wait took
 * every connection the gateway had (256, no limit per address): every
 * other client got nothing for as long as they were held (120 s each, more
 * with a byte now and then). Now one address holds at most
 * --s3-max-conns-per-ip (default 256 of --s3-max-conns 1024): a client from
 * another address is served meanwhile, and, with the limits lowered, the
 * holder's own next connection is closed. */
TEST(one_address_cannot_hold_every_connection)
{
    const char *small[] = {"--s3-max-conns", "64", "--s3-max-conns-per-ip", "16", NULL};
    static int fds[300];
    struct gw g;

    gw_start(&g, NULL, NULL);
    T_EQ(gw_curl(&g, "", "-X PUT %s/held", g.url), 200);
    usleep(300 * 1000); /* (the curl's own connection gone from the count) */
    unsigned kept = hold_half_requests(&g, fds, 300);
    T_LE(kept, 256u);
    T_GE(kept, 250u);
    T_EQ(gw_curl(&g, "", "-m 10 --interface 127.0.0.2 -I %s/held", g.url), 200);
    for (unsigned i = 0; i < 300; i++)
        close(fds[i]);
    gw_stop(&g);

    gw_start(&g, NULL, small);
    T_EQ(gw_curl(&g, "", "-X PUT %s/held", g.url), 200);
    usleep(300 * 1000);
    kept = hold_half_requests(&g, fds, 40);
    T_LE(kept, 16u);
    T_GE(kept, 14u); /* (one still closing may count a moment longer) */
    T_EQ(gw_curl(&g, "", "-m 10 --interface 127.0.0.2 -I %s/held", g.url), 200);
    if (kept == 16)
        T_NE(gw_curl(&g, "", "-m 10 -I %s/held", g.url), 200); /* its 17th */
    for (unsigned i = 0; i < 40; i++)
        close(fds[i]);
    usleep(300 * 1000);
    T_EQ(gw_curl(&g, "", "-m 10 -I %s/held", g.url), 200);
    gw_stop(&g);
}
