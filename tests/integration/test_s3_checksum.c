/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One integrity check per S3 part (knob checksum): CRC32C where the server
 * checks x-amz-checksum-crc32c, else a Content-MD5 where this CPU hashes
 * several parts at once (AVX2, AVX-512), else the part's SHA-256 signed as
 * its payload hash where the server checks that, else MD5, asked once per
 * client by probes carrying a wrong CRC32C, then a wrong payload hash. Against
 * tests/harness/s3fault.py (whose "ck" buckets check the CRC32C as S3 does, the others ignore it as
 * radosgw before Squid does) and against the real radosgw of this machine.
 */
/* T_TIMEOUT 240 */
/* T_LABELS net;ceph */
#include <stdbool.h>

#include "t.h"

#ifndef RIO_HAVE_CURL
TEST(s3_not_built)
{
    T_SKIP("built without libcurl (RIO_WITH_CURL)");
}
#else

#define SU_WITH_RGW
#include "s3_util.h"

#include "core/checksum.h"

#define CH (64 * SU_KIB)
#define OBJ (16 * CH + 777) /* 17 parts, the last one short */

/* A client of bucket on the fault server: unsigned (it checks no signature),
 * 64 KiB parts, extra. */
static struct rio_client *fault_client(const char *bucket, const char *extra, int64_t *alloc0)
{
    struct rio_options o;
    char url[512];

    *alloc0 = rio__alloc_outstanding();
    su_opts(&o, CH, 4);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    snprintf(url, sizeof(url),
             "s3://%s?endpoint=http://127.0.0.1:%d&unsigned=1&min_part=0&stall=1s%s%s", bucket,
             su_fault_port(), extra && *extra ? "&" : "", extra ? extra : "");
    return su_client(url, &o);
}

/* The same, signed (dummy keys: the fault server checks no signature), so
 * that requests carry a payload hash. The keys are read at open only. */
static struct rio_client *signed_client(const char *bucket, const char *extra, int64_t *alloc0)
{
    struct rio_options o;
    char url[512];

    *alloc0 = rio__alloc_outstanding();
    su_opts(&o, CH, 4);
    setenv("AWS_ACCESS_KEY_ID", "AKIDRAILIOTEST", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "railio-test-secret", 1);
    unsetenv("AWS_SESSION_TOKEN");
    snprintf(url, sizeof(url), "s3://%s?endpoint=http://127.0.0.1:%d&min_part=0&stall=1s%s%s",
             bucket, su_fault_port(), extra && *extra ? "&" : "", extra ? extra : "");
    struct rio_client *c = su_client(url, &o);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    return c;
}

/* PUT n pattern bytes of seed under key (must succeed), GET them back
 * byte-exact; the PUT's stats in st. */
static void put_get(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                    struct rio_stats *st)
{
    struct rio_call call = {.stats = st};
    uint8_t *src = su_pattern(n, seed), *dst = malloc(n);
    T_NOTNULL(dst);
    int ret = rio_put(c, key, src, n, &call, NULL);
    if (ret != 0)
        T_FAIL("rio_put(%s): %s", key, rio_errname(ret));
    T_EQ(rio_get(c, key, dst, n, NULL), (int64_t)n);
    T_MEMEQ(dst, src, n);
    free(src);
    free(dst);
}

/* A server that checks the CRC32C refuses the probe: every part then
 * carries one (and the probe is not asked again), none an MD5. */
TEST(probe_picks_crc32c_where_the_server_checks_it)
{
    int64_t alloc0;
    struct rio_stats st;
    int port = su_fault_port();
    struct rio_client *c = fault_client("ck1", NULL, &alloc0);

    unsigned k0 = su_fault_count(port, "crc32c");
    put_get(c, "crc/a", OBJ, 1, &st);
    unsigned k1 = su_fault_count(port, "crc32c");
    T_EQ(k1 - k0, 17u + 1u);           /* the parts and the probe */
    put_get(c, "crc/b", 1000, 2, &st); /* one PutObject */
    T_EQ(su_fault_count(port, "crc32c") - k1, 1u);
    su_close(c, alloc0);
}

/* A server that ignores the header stores the probe: it is removed, and
 * parts are checked by MD5 (no CRC32C sent after the probe). */
TEST(probe_falls_back_to_md5_where_ignored)
{
    int64_t alloc0;
    struct rio_stats st;
    int port = su_fault_port();
    struct rio_client *c = fault_client("fb1", NULL, &alloc0);

    unsigned k0 = su_fault_count(port, "crc32c"), o0 = su_fault_count(port, "objects");
    put_get(c, "md5/a", OBJ, 3, &st);
    put_get(c, "md5/b", OBJ, 4, &st);
    T_EQ(su_fault_count(port, "crc32c") - k0, 1u);       /* the probe only */
    T_EQ(su_fault_count(port, "objects") - o0, 2u * 2u); /* objects and sidecars */
    su_close(c, alloc0);
}

/*
 * content_md5=off with checksum=auto, where the server ignores the CRC32C
 * (so parts would be checked by MD5): no MD5 at all, neither a Content-MD5
 * nor one computed as a part goes and compared with its ETag, whatever
 * the CPU's MD5 lanes (docs/s3.md, knob content_md5): a PutObject whose
 * ETag is no MD5 of its bytes (putetag, as under SSE-KMS) is stored as it
 * is, not refused and sent again until the retries run out.
 */
TEST(probe_md5_off_checks_no_md5)
{
    int64_t alloc0;
    struct rio_stats st;
    int port = su_fault_port();
    struct rio_client *c = fault_client("fb5", "checksum=auto&content_md5=off", &alloc0);

    unsigned m0 = su_fault_count(port, "md5");
    put_get(c, "F_putetag_0/off", 1000, 8, &st);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u);
    T_EQ(su_fault_count(port, "md5") - m0, 0u);
    su_close(c, alloc0);
}

/*
 * content_md5=header where the server encrypts with SSE-KMS: its ETag is
 * no MD5 of the bytes (x-amz-server-side-encryption: aws:kms says so), and
 * the server itself checked the Content-MD5: the PutObject stands, not
 * refused as damaged and sent again until the retries run out (docs/s3.md,
 * knob content_md5: header "also works where ETags are not MD5s").
 */
TEST(content_md5_header_takes_a_kms_etag)
{
    int64_t alloc0;
    struct rio_stats st;
    struct rio_client *c = fault_client("fb6", "checksum=md5&content_md5=header", &alloc0);

    put_get(c, "F_putkms_0/hdr", 1000, 9, &st);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u);
    su_close(c, alloc0);
}

/*
 * A server that ignores the CRC32C but checks the signed payload hash (as
 * radosgw before Squid does): the second probe (a wrong payload hash) is
 * refused, and every part is then signed with its own SHA-256, which the
 * server recomputes and compares (a wrong one would be refused, and the
 * PUT retried until it fails): no checksum retry, every part counted, the
 * probes asked once per client.
 */
TEST(probe_picks_sha256_where_crc32c_ignored)
{
    int64_t alloc0;
    struct rio_stats st;
    int port = su_fault_port();
    /* As on a CPU that hashes one MD5 at a time. */
    setenv("RIO_MD5_LANES", "1", 1);
    struct rio_client *c = signed_client("sh1", NULL, &alloc0);

    unsigned k0 = su_fault_count(port, "crc32c"), s0 = su_fault_count(port, "sha256");
    put_get(c, "sha/a", OBJ, 5, &st);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u);
    /* The CRC32C probe only; the payload hashes of both probes (the CRC32C
     * one's is right, the other's wrong), the 17 parts and the sidecar. */
    T_EQ(su_fault_count(port, "crc32c") - k0, 1u);
    unsigned s1 = su_fault_count(port, "sha256");
    T_EQ(s1 - s0, 2u + 17u + 1u);
    put_get(c, "sha/b", 1000, 6, &st); /* one PutObject, no probe */
    T_EQ(su_fault_count(port, "sha256") - s1, 1u);
    T_EQ(su_fault_count(port, "crc32c") - k0, 1u);
    su_close(c, alloc0);

    /* Unsigned, there is no payload hash: MD5 (whose check refuses the
     * putetag part and sends it again). */
    c = fault_client("sh1", "checksum=sha256", &alloc0);
    s1 = su_fault_count(port, "sha256");
    put_get(c, "F_putetag_2/md5", OBJ, 8, &st);
    T_GE(st.retries[RIO_CLASS_CHECKSUM], 2u);
    T_EQ(su_fault_count(port, "sha256") - s1, 0u);
    su_close(c, alloc0);
}

/*
 * The same server, on a CPU that hashes 16 or 8 MD5s at once: every part
 * carries a Content-MD5 (which the server computes anyway, for the part's
 * ETag) taken on the pool before it is sent, not its SHA-256 (which costs
 * the client and the server more); the payload hash is not asked about.
 * The content_md5 knob, given, has its way: verify hashes each part as it
 * goes out and compares the part's ETag, sending no Content-MD5.
 */
TEST(probe_picks_content_md5_in_lanes_where_crc32c_ignored)
{
    int64_t alloc0;
    struct rio_stats st;
    int port = su_fault_port();

    if (rio__md5_lanes() < 8)
        T_SKIP("this CPU has neither AVX2 nor AVX-512: one MD5 at a time");
    struct rio_client *c = signed_client("md1", NULL, &alloc0);
    unsigned k0 = su_fault_count(port, "crc32c"), s0 = su_fault_count(port, "sha256");
    unsigned m0 = su_fault_count(port, "md5");
    put_get(c, "md5/a", OBJ, 5, &st);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u);
    T_EQ(su_fault_count(port, "crc32c") - k0, 1u);
    /* The CRC32C probe's payload hash and the sidecar's: no second probe,
     * no part's. */
    T_EQ(su_fault_count(port, "sha256") - s0, 2u);
    unsigned m1 = su_fault_count(port, "md5");
    T_EQ(m1 - m0, 17u);
    put_get(c, "md5/b", 1000, 6, &st); /* one PutObject */
    T_EQ(su_fault_count(port, "md5") - m1, 1u);
    su_close(c, alloc0);

    c = fault_client("md1", "content_md5=verify", &alloc0);
    m1 = su_fault_count(port, "md5");
    put_get(c, "F_putetag_2/verify", OBJ, 7, &st);
    T_GE(st.retries[RIO_CLASS_CHECKSUM], 2u); /* the ETag's comparison */
    T_EQ(su_fault_count(port, "md5") - m1, 0u);
    su_close(c, alloc0);
}

/*
 * A part damaged on the way (one bit of the body flipped before the server
 * reads it): the server's CRC32C check refuses it (BadDigest), the engine
 * sends it again, the object lands byte-exact. So does MD5 (the part's ETag
 * is not the MD5 of what was sent). Unchecked (checksum=none) the damaged
 * part is stored, and the chunk checksums refuse it at GET: no wrong byte
 * is ever handed out.
 */
TEST(corrupted_part_is_refused)
{
    static const char *const modes[] = {"checksum=crc32c", "checksum=md5",
                                        "checksum=md5&content_md5=header",
                                        "checksum=md5&content_md5=verify", NULL};
    char key[64];
    int64_t alloc0;

    for (unsigned m = 0; modes[m]; m++) {
        struct rio_client *c = fault_client("ck2", modes[m], &alloc0);
        for (unsigned single = 0; single < 2; single++) {
            struct rio_stats st;
            snprintf(key, sizeof(key), "F_putflip_2/m%u-%u", m, single);
            put_get(c, key, single ? 1000 : OBJ, 10 + m, &st);
            if (st.retries[RIO_CLASS_CHECKSUM] < 2)
                T_FAIL("%s: %" PRIu64 " checksum retries", modes[m],
                       st.retries[RIO_CLASS_CHECKSUM]);
        }
        su_close(c, alloc0);
    }
    /* The payload hash refuses it too (XAmzContentSHA256Mismatch). */
    for (unsigned single = 0; single < 2; single++) {
        struct rio_client *c = signed_client("sh2", single ? "checksum=sha256" : NULL, &alloc0);
        struct rio_stats st;
        snprintf(key, sizeof(key), "F_putflip_2/sha-%u", single);
        put_get(c, key, single ? 1000 : OBJ, 12, &st);
        if (st.retries[RIO_CLASS_CHECKSUM] < 2)
            T_FAIL("sha256: %" PRIu64 " checksum retries", st.retries[RIO_CLASS_CHECKSUM]);
        su_close(c, alloc0);
    }

    struct rio_client *c = fault_client("ck2", "checksum=none", &alloc0);
    uint8_t *src = su_pattern(OBJ, 20), *dst = malloc(OBJ);
    T_NOTNULL(dst);
    T_OK(rio_put(c, "F_putflip_1/none", src, OBJ, NULL, NULL));
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    int64_t got = rio_get(c, "F_putflip_1/none", dst, OBJ, &call);
    T_EQ(got, (int64_t)RIO_ERETRIES); /* the damaged chunk, every try */
    T_GT(st.retries[RIO_CLASS_CHECKSUM], 0u);
    free(src);
    free(dst);
    su_close(c, alloc0);
}

/*
 * A part damaged after the caller's buffer and before the wire (the fault
 * filter sends a copy with one bit flipped, as a bad copy in the client
 * would): the part's check is taken from the caller's bytes on the cpu pool
 * (put_prep), not from what is sent, so the server refuses the damaged part
 * and the engine sends it again: the object lands byte-exact. Were the
 * check taken from the copy at submit, the server would store the damage
 * and only the GET's chunk checksums would find it.
 */
TEST(part_damaged_before_the_wire_is_refused)
{
    static const struct {
        const char *bucket, *extra;
        bool sign;
    } modes[] = {
        {"sh3", "checksum=sha256", true},
        {"ck3", "checksum=crc32c", false},
        {"ck3", "checksum=md5&content_md5=header", false},
        {"fb3", "checksum=md5", false}, /* 16 or 8 at once, where the CPU can */
    };
    char key[64], extra[160];
    int64_t alloc0;

    for (unsigned m = 0; m < sizeof(modes) / sizeof(modes[0]); m++) {
        for (unsigned single = 0; single < 2; single++) {
            snprintf(extra, sizeof(extra), "%s&faults=bitflip:op=write:chunk=%u:count=1",
                     modes[m].extra, single ? 0u : 3u);
            struct rio_client *c = modes[m].sign ? signed_client(modes[m].bucket, extra, &alloc0)
                                                 : fault_client(modes[m].bucket, extra, &alloc0);
            struct rio_stats st;
            snprintf(key, sizeof(key), "flip/m%u-%u", m, single);
            put_get(c, key, single ? 1000 : OBJ, 30 + m, &st);
            if (st.retries[RIO_CLASS_CHECKSUM] < 1)
                T_FAIL("%s (%s): the damaged part was stored", modes[m].extra,
                       single ? "one PutObject" : "multipart");
            su_close(c, alloc0);
        }
    }
}

/* The same in a batch of small objects, whose uploads the batch's workers
 * open (and whose checks they take as they open them) while the caller
 * hashes: the damaged one is refused and sent again, each lands whole. */
TEST(part_damaged_before_the_wire_is_refused_in_a_batch)
{
    enum { N = 6, LEN = 3000 };
    int64_t alloc0;
    struct rio_client *c =
        signed_client("sh4", "checksum=sha256&faults=bitflip:op=write:chunk=0:count=1", &alloc0);
    struct rio_op ops[N];
    uint8_t *src[N], *dst = malloc(LEN);
    char keys[N][32];
    struct rio_stats st;
    struct rio_call call = {.stats = &st};

    T_NOTNULL(dst);
    memset(ops, 0, sizeof(ops));
    for (unsigned i = 0; i < N; i++) {
        snprintf(keys[i], sizeof(keys[i]), "bflip/%u", i);
        src[i] = su_pattern(LEN, 40 + i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = src[i], .len = LEN};
    }
    T_EQ(rio_batch(c, ops, N, &call), N);
    T_GE(st.retries[RIO_CLASS_CHECKSUM], 1u);
    for (unsigned i = 0; i < N; i++) {
        T_EQ(rio_get(c, keys[i], dst, LEN, NULL), (int64_t)LEN);
        T_MEMEQ(dst, src[i], LEN);
        free(src[i]);
    }
    free(dst);
    su_close(c, alloc0);
}

/* And in a stream (rio_writer, size unknown): each part's check is taken
 * as the writer hashes it, so the damaged part is refused too. */
TEST(part_damaged_before_the_wire_is_refused_in_a_stream)
{
    int64_t alloc0;
    struct rio_client *c =
        signed_client("sh5", "checksum=sha256&faults=bitflip:op=write:chunk=3:count=1", &alloc0);
    uint8_t *src = su_pattern(OBJ, 50), *dst = malloc(OBJ);
    struct rio_writer *w = NULL;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;

    T_NOTNULL(dst);
    T_OK(rio_writer_open(c, "sflip", RIO_SIZE_UNKNOWN, 0, &call, &w));
    for (size_t off = 0; off < OBJ; off += 10000)
        T_OK(rio_writer_write(w, src + off, OBJ - off < 10000 ? OBJ - off : 10000));
    T_OK(rio_writer_close(w, &d));
    T_EQ(d.size, (uint64_t)OBJ);
    rio_desc_cleanup(&d);
    T_GE(st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_EQ(rio_get(c, "sflip", dst, OBJ, NULL), (int64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    free(src);
    free(dst);
    su_close(c, alloc0);
}

/* An unknown value is refused by name. */
TEST(checksum_knob_refuses_unknown)
{
    struct rio_client *c = NULL;
    char url[256];

    snprintf(url, sizeof(url), "s3://fb?endpoint=http://127.0.0.1:%d&unsigned=1&checksum=sha512",
             su_fault_port());
    T_ERR(rio_client_new(url, NULL, &c), RIO_EINVAL);
    T_NULL(c);
}

/*
 * This machine's radosgw: does it check x-amz-checksum-crc32c? A PutObject
 * with a wrong one tells (by curl, signed independently). Whatever it
 * answers, railio's default PUT round-trips, leaves no probe object, and a
 * forced checksum=crc32c upload (its CompleteMultipartUpload listing each
 * part's CRC32C) round-trips too.
 */
TEST(radosgw_probe)
{
    const char *ep = su_rgw("rck");
    char url[512];
    struct rio_options o;
    struct rio_stats st;

    int status = su_curl(ep, "-X PUT -H 'x-amz-checksum-crc32c: AAAAAA==' --data-binary railio",
                         "rck/wrong-crc", NULL, NULL);
    fprintf(stderr, "  radosgw answers a wrong x-amz-checksum-crc32c with %d (%s)\n", status,
            status == 200 ? "ignored: parts are checked by MD5" : "checked: parts carry CRC32C");
    T_TRUE(status == 200 || status == 400);
    /* su_curl sends UNSIGNED-PAYLOAD: this one signs a wrong hash. */
    char code[700];
    snprintf(code, sizeof(code), "%s/sha.code", su_dir);
    T_EQ(t_sh("curl -s -m 60 --aws-sigv4 aws:amz:us-east-1:s3 --user \"$AWS_ACCESS_KEY_ID:"
              "$AWS_SECRET_ACCESS_KEY\" -H 'x-amz-content-sha256: %064d' -X PUT "
              "--data-binary railio -o /dev/null -w '%%{http_code}' '%s/rck/wrong-sha' >'%s'",
              0, ep, code),
         0);
    int sh = t_read_int(code);
    fprintf(stderr, "  radosgw answers a wrong signed payload hash with %d (%s)\n", sh,
            sh == 400 ? "checked: parts are signed with their SHA-256" : "ignored");
    T_TRUE(sh == 200 || sh == 400);

    int64_t alloc0 = rio__alloc_outstanding();
    su_opts(&o, 5 * SU_MIB, 4);
    snprintf(url, sizeof(url), "s3://rck?endpoint=%s", ep);
    struct rio_client *c = su_client(url, &o);
    put_get(c, "auto/obj", 3 * 5 * SU_MIB + 11, 30, &st);
    put_get(c, "auto/one", 1000, 31, &st);
    T_EQ(su_curl_count(ep, "rck", ".railio-probe"), 0u);
    su_close(c, alloc0);

    alloc0 = rio__alloc_outstanding();
    snprintf(url, sizeof(url), "s3://rck?endpoint=%s&checksum=crc32c", ep);
    c = su_client(url, &o);
    put_get(c, "crc/obj", 3 * 5 * SU_MIB + 11, 32, &st);
    put_get(c, "crc/one", 1000, 33, &st);
    su_close(c, alloc0);

    alloc0 = rio__alloc_outstanding();
    snprintf(url, sizeof(url), "s3://rck?endpoint=%s&checksum=sha256", ep);
    c = su_client(url, &o);
    put_get(c, "sha/obj", 3 * 5 * SU_MIB + 11, 34, &st);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 0u);
    put_get(c, "sha/one", 1000, 35, &st);
    su_close(c, alloc0);
}

#endif
