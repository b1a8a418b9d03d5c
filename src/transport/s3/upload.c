/* SPDX-License-Identifier: Apache-2.0 */
/*
 * PUT. put_open chooses the mode: an object of one chunk is one PutObject
 * carrying all the metadata (data.c sends it); a larger one, or a stream of
 * unknown size, is a multipart upload (one UploadPart per chunk, part number
 * = chunk index + 1). Commit completes the multipart upload after writing
 * the per-chunk xxh3 list to a sidecar object (sidecar.c), so once the
 * object is visible its checksums are. A stream's parts arrive in any order
 * before the count is known, so their records live in pages allocated at
 * submit, and commit checks the final geometry (every part below the count
 * sent whole, none beyond) before completing parts 1..n; an empty stream
 * aborts the upload and PUTs an empty object.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/key.h"
#include "transport/s3/internal.h"

/* The record of part index (chunk index) i, or NULL for a stream part
 * whose page was never allocated (never submitted). */
struct s3_part *rio__s3_part_at(struct s3_upload *up, uint64_t i)
{
    if (up->stream) {
        struct s3_part *pg = i < S3_MAX_PARTS ? up->pages[i / S3_PART_PAGE] : NULL;
        return pg ? &pg[i % S3_PART_PAGE] : NULL;
    }
    return &up->parts[up->mode == UP_SINGLE ? 0 : i];
}

/* A stream's page of part records holding part index (index <
 * S3_MAX_PARTS), made on first use; NULL out of memory. Under t->mu. */
struct s3_part *rio__s3_part_page_locked(struct s3_upload *up, uint64_t index)
{
    struct s3_part **pg = &up->pages[index / S3_PART_PAGE];

    if (!*pg)
        *pg = rio__calloc(S3_PART_PAGE, sizeof(**pg));
    return *pg;
}

static void random_id(char out[17])
{
    static _Atomic uint64_t ctr;
    uint64_t v = 0;
    uint8_t b[8];

    if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t)sizeof(v))
        v = rio__now_ns() ^ (uint64_t)getpid() << 32 ^
            atomic_fetch_add(&ctr, 1) * 0x9e3779b97f4a7c15ull;
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(v >> (8 * i));
    rio__s3_hex(b, 8, out);
}

/* --------------------------------------------------------------- PUT */

/*
 * A 6-byte PutObject of a fresh probe key carrying one wrong checksum
 * (header k = v, or a wrong signed payload hash): 1 when the server refuses
 * it (BadDigest, XAmzContentSHA256Mismatch: it checks), 0 when it stores
 * it (it ignores it: the probe is removed) or refuses it for another
 * reason, -1 when there is no word on it.
 */
static int probe_one(struct s3_transport *t, const char *k, const char *v, const char *payload)
{
    char key[48], id[17];
    struct meta_req q = {.method = "PUT", .body = "railio", .blen = 6, .payload = payload};
    struct meta_rsp r = {0};
    int ret;

    random_id(id);
    snprintf(key, sizeof(key), ".railio-probe-%s", id);
    q.key = key;
    if (k) {
        q.x[q.nx++] = (struct rio_s3_kv){k, v};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-sdk-checksum-algorithm", "CRC32C"};
    }
    ret = rio__s3_meta_do(t, &q, &r);
    bool answered = r.answered;
    rio__s3_meta_rsp_cleanup(&r);
    if (ret == 0) {
        rio__s3_delete_key(t, key);
        return 0;
    }
    if (ret == RIO_ECHECKSUM && answered)
        return 1;
    if (!answered || ret == RIO_ENOTFOUND || ret == RIO_ENOCONTAINER || ret == -EACCES)
        return -1;
    return 0; /* refused for another reason: not for the checksum */
}

/* Whether a part's MD5 costs less than its SHA-256 here: several at once in
 * vector lanes (0.2-0.25 CPU s/GiB with AVX-512, against SHA-NI's 0.6-0.75;
 * and every S3 server computes the MD5 anyway, for the part's ETag). */
static bool md5_cheap(const struct s3_transport *t)
{
    return !t->content_md5_set && rio__md5_lanes() > 1;
}

/*
 * checksum=auto: what the server checks, asked once per client by small
 * PutObjects carrying a wrong checksum, cheapest first. A server that checks
 * x-amz-checksum-crc32c refuses the first probe: parts then carry a CRC32C
 * (0.12 CPU s/GiB). One that ignores it (radosgw before Squid) gets a
 * Content-MD5 with each part where this CPU computes several MD5s at once
 * (md5_cheap). Otherwise it is asked whether it checks the signed payload
 * hash (x-amz-content-sha256, which S3, radosgw and MinIO verify):
 * refused, parts are signed with their SHA-256 (0.6 CPU s/GiB with SHA-NI)
 * instead of UNSIGNED-PAYLOAD; stored, parts are checked by MD5 (1.8).
 * Unsigned requests carry no payload hash: MD5. No answer leaves the
 * question open for the next PUT, this one by MD5.
 */
static int checksum_probe(struct s3_transport *t)
{
    int ck = CK_MD5, ret;

    /* The CRC32C of "railio" is not zero, so AAAAAA== is wrong. */
    ret = probe_one(t, "x-amz-checksum-crc32c", "AAAAAA==", NULL);
    if (ret < 0)
        return CK_MD5; /* no word on the checksum: asked again by the next PUT */
    if (ret == 1) {
        ck = CK_CRC32C;
    } else if (t->sign && !md5_cheap(t)) {
        /* The SHA-256 of nothing is not that of "railio". */
        ret = probe_one(t, NULL, NULL, RIO_S3_EMPTY_SHA256);
        if (ret < 0)
            return CK_MD5;
        if (ret == 1)
            ck = CK_SHA256;
    }
    atomic_store(&t->checksum, ck);
    return ck;
}

static void upload_free(struct s3_upload *up)
{
    if (!up)
        return;
    up->magic = 0;
    rio__free(up->key);
    rio__free(up->upload_id);
    rio__free(up->parts);
    if (up->pages)
        for (unsigned i = 0; i < S3_PART_PAGES; i++)
            rio__free(up->pages[i]);
    rio__free(up->pages);
    rio__free(up);
}

int rio__s3_put_open(struct rio_transport *tt, const char *key, uint64_t size, uint64_t chunk_size,
                     void **upload)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up;
    struct meta_rsp r = {0};
    char skey[RIO_KEY_MAX + 1], cs[24], ss[24], uid[1024];
    size_t klen;
    int ret;

    if (t->scheme != SCHEME_S3)
        return RIO_ENOTSUP;
    if (!upload || chunk_size == 0 || rio__key_len(key, &klen) < 0)
        return RIO_EINVAL;
    up = rio__calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    up->key = rio__strdup(key);
    if (!up->key) {
        ret = -ENOMEM;
        goto err;
    }
    up->size = size;
    up->chunk = chunk_size;
    /* A stream is a multipart upload whatever its length turns out to be:
     * its part count is known only at commit. */
    up->stream = size == RIO_SIZE_UNKNOWN;
    up->nparts = up->stream ? 0 : rio__s3_nchunks(size, chunk_size);
    up->mode = up->nparts <= 1 && !up->stream ? UP_SINGLE : UP_MULTI;
    random_id(up->id);
    up->ck = atomic_load(&t->checksum);
    if (up->ck == CK_AUTO)
        up->ck = checksum_probe(t);
    /* Unsigned requests carry no payload hash to check. */
    if (up->ck == CK_SHA256 && !t->sign)
        up->ck = CK_MD5;
    /* Where the CPU hashes several parts at once, an MD5 costs less taken
     * ahead, on the pool, 16 or 8 parts together, and sent as Content-MD5,
     * than as each part goes out, on the thread that sends. */
    up->md5_lanes = up->ck == CK_MD5 && !t->content_md5_set && rio__md5_lanes() > 1;
    if (up->mode == UP_MULTI) {
        if (chunk_size < t->min_part) {
            fprintf(stderr,
                    "railio s3: multipart parts must be at least %" PRIu64
                    " bytes (S3's rule, knob min_part); the chunk size is %" PRIu64
                    ": raise it (e.g. RIO_CHUNK_SIZE=8M) to PUT objects larger than one chunk\n",
                    t->min_part, chunk_size);
            ret = RIO_EINVAL;
            goto err;
        }
        if (!up->stream && up->nparts > S3_MAX_PARTS) {
            fprintf(stderr,
                    "railio s3: %" PRIu64 " parts: S3 allows %u per object; raise the chunk size\n",
                    up->nparts, S3_MAX_PARTS);
            ret = RIO_EINVAL;
            goto err;
        }
        ret = rio__s3_sidecar_key(key, up->id, skey, sizeof(skey));
        if (ret < 0)
            goto err;
    }
    if (up->stream)
        up->pages = rio__calloc(S3_PART_PAGES, sizeof(*up->pages));
    else
        up->parts = rio__calloc(up->mode == UP_MULTI ? (size_t)up->nparts : 1, sizeof(*up->parts));
    if (!up->parts && !up->pages) {
        ret = -ENOMEM;
        goto err;
    }
    if (up->mode == UP_MULTI) {
        struct meta_req q = {.method = "POST", .key = key};
        snprintf(cs, sizeof(cs), "%" PRIu64, chunk_size);
        snprintf(ss, sizeof(ss), "%" PRIu64, size);
        q.q[q.nq++] = (struct rio_s3_kv){"uploads", ""};
        /* The object's Content-Type is the one this request names: S3's
         * default, as a PutObject's without one, not the form encoding
         * curl gives a POST by itself. */
        q.x[q.nx++] = (struct rio_s3_kv){"content-type", "binary/octet-stream"};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-v", S3_FORMAT};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-id", up->id};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-chunk", cs};
        /* A stream's size is not known yet: only its sidecar carries it. */
        if (!up->stream)
            q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-size", ss};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-sidecar", "1"};
        if (up->ck == CK_CRC32C)
            q.x[q.nx++] = (struct rio_s3_kv){"x-amz-checksum-algorithm", "CRC32C"};
        /* Safe to try again (the engine does, on a retryable class): an
         * upload whose reply was lost is an orphan nobody completes, left to
         * the bucket's lifecycle rule (AbortIncompleteMultipartUpload). */
        ret = rio__s3_meta_do(t, &q, &r);
        if (ret == 0)
            rio__s3_xml_text(r.body.p, r.body.len, "UploadId", uid, sizeof(uid));
        rio__s3_meta_rsp_cleanup(&r);
        if (ret < 0)
            goto err;
        if (!uid[0]) {
            ret = RIO_EPROTO;
            goto err;
        }
        up->upload_id = rio__strdup(uid);
        if (!up->upload_id) {
            ret = -ENOMEM;
            struct meta_req a = {.method = "DELETE", .key = key, .cleanup = true};
            a.q[a.nq++] = (struct rio_s3_kv){"uploadId", uid};
            rio__s3_meta_do(t, &a, &r);
            rio__s3_meta_rsp_cleanup(&r);
            goto err;
        }
    }
    up->magic = UPLOAD_MAGIC;
    *upload = up;
    return 0;
err:
    upload_free(up);
    return ret;
}

static int set_if_match(struct s3_upload *up, const struct s3_gen *g)
{
    up->cond_hdr = "if-match";
    rio__s3_copy_str(up->cond_val, sizeof(up->cond_val), g->etag, strlen(g->etag));
    return 0;
}

/*
 * A condition on the request that publishes: If-None-Match: * for
 * RIO__PUT_IF_ABSENT, else If-Match: the ETag of generation gen (from the
 * generations this transport saw, else one HEAD: a key that holds another
 * generation, or none, refuses at once). Only where the server is known to
 * decide both on PutObject and CompleteMultipartUpload (knob conditional):
 * one that ignores them would publish anyway.
 */
int rio__s3_put_expect(struct rio_transport *tt, void *upload, uint64_t gen)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up = upload;
    struct s3_gen g;
    char id[24];
    bool sc;
    int ret;

    if (!up || up->magic != UPLOAD_MAGIC || !gen)
        return RIO_EINVAL;
    if (!t->conditional) {
        rio__detail("s3: this server is not known to decide If-None-Match and If-Match on "
                    "uploads (conditional=on says it does): nothing was sent");
        return RIO_ENOTSUP;
    }
    if (gen == RIO__PUT_IF_ABSENT) {
        up->cond_hdr = "if-none-match";
        snprintf(up->cond_val, sizeof(up->cond_val), "*");
        return 0;
    }
    if (!rio__s3_gen_get(t, gen, &g)) {
        ret = rio__s3_match_etag(t, up->key, gen, id, &sc, &g);
        return ret == RIO_ENOTFOUND ? RIO_EGENERATION : ret < 0 ? ret : set_if_match(up, &g);
    }
    if (g.lastmod || !g.etag[0]) {
        rio__detail("s3: the object has no ETag to match (If-Match): nothing was sent");
        return RIO_ENOTSUP;
    }
    return set_if_match(up, &g);
}

static void abort_multi(struct s3_transport *t, struct s3_upload *up)
{
    struct meta_req q = {.method = "DELETE", .key = up->key, .cleanup = true};
    struct meta_rsp r = {0};

    q.q[q.nq++] = (struct rio_s3_kv){"uploadId", up->upload_id};
    rio__s3_meta_do(t, &q, &r);
    rio__s3_meta_rsp_cleanup(&r);
}

/* Give up an upload: abort the multipart upload, delete the sidecar a
 * failed commit may have left, free it. Cleanup is one try each: what a
 * failure leaves, the bucket's lifecycle rule reclaims. */
static void upload_drop(struct s3_transport *t, struct s3_upload *up)
{
    char skey[RIO_KEY_MAX + 1];

    if (up->mode == UP_MULTI)
        abort_multi(t, up);
    if (up->sidecar_put && rio__s3_sidecar_key(up->key, up->id, skey, sizeof(skey)) == 0)
        rio__s3_delete_key(t, skey);
    upload_free(up);
}

static int commit_single(struct s3_transport *t, struct s3_upload *up, struct rio_desc *d)
{
    struct s3_gen g;

    if (up->nparts == 0) {
        /* An empty object: no WRITE ran; one PutObject now. */
        char cs[24];
        struct meta_req q = {.method = "PUT", .key = up->key};
        struct meta_rsp r = {0};
        int ret;

        /* The MD5 of nothing ("" when the engine computed none: etag=none). */
        if (d->etag[0] && strcmp(d->etag, "d41d8cd98f00b204e9800998ecf8427e") != 0)
            return RIO_ECHECKSUM;
        snprintf(cs, sizeof(cs), "%" PRIu64, up->chunk);
        q.x[q.nx++] = (struct rio_s3_kv){"content-md5", "1B2M2Y8AsgTpgAmY7PhCfg=="};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-v", S3_FORMAT};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-id", up->id};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-chunk", cs};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-size", "0"};
        q.x[q.nx++] =
            (struct rio_s3_kv){"x-amz-meta-railio-md5", "d41d8cd98f00b204e9800998ecf8427e"};
        q.x[q.nx++] = (struct rio_s3_kv){"x-amz-meta-railio-xxh", ""};
        if (up->cond_hdr)
            q.x[q.nx++] = (struct rio_s3_kv){up->cond_hdr, up->cond_val};
        ret = rio__s3_meta_do(t, &q, &r);
        if (ret == RIO_ENOTFOUND && up->cond_hdr) /* If-Match over nothing */
            ret = RIO_EGENERATION;
        if (ret == RIO_EGENERATION && up->cond_hdr) {
            /* Refused, or an earlier try of this very PUT (a lost answer
             * the request layer sent again) landed: the object says. */
            char id0[24];
            bool sc0;
            if (rio__s3_head_id(t, up->key, id0, &sc0, &g) == 0 && !strcmp(id0, up->id)) {
                rio__s3_copy_str(r.rsp.etag, sizeof(r.rsp.etag), g.etag, strlen(g.etag));
                ret = 0;
            }
        }
        if (ret == 0 && !r.rsp.etag[0])
            ret = RIO_EPROTO;
        if (ret == 0)
            rio__s3_copy_str(up->etag, sizeof(up->etag), r.rsp.etag, strlen(r.rsp.etag));
        rio__s3_meta_rsp_cleanup(&r);
        if (ret < 0)
            return ret;
    } else {
        if (!up->parts[0].ok)
            return RIO_EPROTO;
        /* The bytes sent must be the bytes the engine hashed. */
        if (d->xxh[0] != up->parts[0].xxh ||
            (up->md5[0] && d->etag[0] && strcmp(d->etag, up->md5) != 0))
            return RIO_ECHECKSUM;
        /* The part's MD5 is the object's: its etag, with no stream MD5. */
        if (!d->etag[0] && up->md5[0])
            memcpy(d->etag, up->md5, sizeof(up->md5));
    }
    struct s3_rsp rr;
    memset(&rr, 0, sizeof(rr));
    rio__s3_copy_str(rr.etag, sizeof(rr.etag), up->etag, strlen(up->etag));
    rio__s3_copy_str(rr.m_id, sizeof(rr.m_id), up->id, strlen(up->id));
    d->generation = rio__s3_rsp_gen(&rr, up->size, &g);
    rio__s3_gen_put(t, &g);
    return 0;
}

/* The multipart ETag S3 gives: MD5 of the parts' binary MD5s, "-N". */
static void multipart_etag(struct s3_upload *up, EVP_MD_CTX *md, char *out, size_t cap)
{
    uint8_t d[16];
    unsigned len = 0;
    char hex[33];

    out[0] = '\0';
    if (EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1)
        return;
    for (uint64_t i = 0; i < up->nparts; i++) {
        const struct s3_part *pt = rio__s3_part_at(up, i);
        const char *e = pt ? pt->etag : "";
        uint8_t b[16];
        if (strlen(e) != 34 || !rio__s3_is_hex(e + 1, 32))
            return;
        for (int k = 0; k < 16; k++) {
            char h[3] = {e[1 + 2 * k], e[2 + 2 * k], 0};
            b[k] = (uint8_t)strtoul(h, NULL, 16);
        }
        EVP_DigestUpdate(md, b, 16);
    }
    if (EVP_DigestFinal_ex(md, d, &len) != 1)
        return;
    rio__s3_hex(d, 16, hex);
    snprintf(out, cap, "\"%s-%" PRIu64 "\"", hex, up->nparts);
}

static int commit_multi(struct s3_transport *t, struct s3_upload *up, struct rio_desc *d)
{
    char skey[RIO_KEY_MAX + 1], oskey[RIO_KEY_MAX + 1], old_id[24] = "", cur_id[24],
                                                        etag[RIO_S3_ETAG_MAX];
    char *sc = NULL, *xml = NULL;
    size_t sclen = 0, xlen = 0, cap;
    struct meta_rsp r = {0};
    bool old_sidecar = false, cur_sidecar, answered = false, unknown = false;
    EVP_MD_CTX *md = NULL;
    struct s3_gen g;
    int ret;

    etag[0] = '\0';
    ret = 0;
    for (uint64_t i = 0; i < up->nparts && ret == 0; i++) {
        const struct s3_part *pt = rio__s3_part_at(up, i);
        if (!pt || !pt->ok)
            ret = RIO_EPROTO;
        else if (pt->xxh != d->xxh[i])
            ret = RIO_ECHECKSUM;
    }
    /* The stream MD5, or "" when the engine computed none (etag=none). */
    if (ret == 0 && d->etag[0] && (strlen(d->etag) != 32 || !rio__s3_is_hex(d->etag, 32)))
        ret = RIO_EPROTO;
    if (ret == 0)
        ret = rio__s3_sidecar_key(up->key, up->id, skey, sizeof(skey));
    if (ret < 0)
        goto out;

    /* The sidecar first: once the object is visible its checksums are. */
    ret = rio__s3_sidecar_format(up->id, up->size, up->chunk, d->etag, up->nparts, d->xxh, &sc,
                                 &sclen);
    if (ret < 0)
        goto out;
    {
        struct meta_req q = {.method = "PUT", .key = skey, .body = sc, .blen = sclen};
        up->sidecar_put = true; /* from now on it may exist */
        ret = rio__s3_meta_do(t, &q, &r);
        rio__s3_meta_rsp_cleanup(&r);
        if (ret < 0)
            goto out;
    }

    /* Which sidecar the generation we replace has, to remove it after. */
    if (rio__s3_head_id(t, up->key, old_id, &old_sidecar, NULL) < 0)
        old_sidecar = false;

    /* Each <Part> is at most 45 characters, a 5-digit number, an ETag and
     * (CRC32C) a 37-character checksum element. */
    cap = 128 + (size_t)up->nparts * (112 + RIO_S3_ETAG_MAX);
    xml = rio__malloc(cap);
    ret = -ENOMEM;
    if (!xml)
        goto out;
    xlen = (size_t)snprintf(xml, cap, "<CompleteMultipartUpload>");
    for (uint64_t i = 0; i < up->nparts; i++) {
        const struct s3_part *pt = rio__s3_part_at(up, i);
        char crc[64] = "";
        if (up->ck == CK_CRC32C) {
            char b64[12];
            rio__s3_crc32c_b64(pt->crc, b64);
            snprintf(crc, sizeof(crc), "<ChecksumCRC32C>%s</ChecksumCRC32C>", b64);
        }
        xlen +=
            (size_t)snprintf(xml + xlen, cap - xlen,
                             "<Part><PartNumber>%" PRIu64 "</PartNumber><ETag>%s</ETag>%s</Part>",
                             i + 1, pt->etag, crc);
    }
    xlen += (size_t)snprintf(xml + xlen, cap - xlen, "</CompleteMultipartUpload>");
    {
        struct meta_req q = {.method = "POST",
                             .key = up->key,
                             .body = xml,
                             .blen = xlen,
                             .once = true,
                             .slow = true};
        q.q[q.nq++] = (struct rio_s3_kv){"uploadId", up->upload_id};
        q.x[q.nx++] = (struct rio_s3_kv){"content-type", "application/xml"};
        if (up->cond_hdr)
            q.x[q.nx++] = (struct rio_s3_kv){up->cond_hdr, up->cond_val};
        ret = rio__s3_meta_do(t, &q, &r);
        answered = r.answered;
        if (ret == 0)
            rio__s3_xml_text(r.body.p, r.body.len, "ETag", etag, sizeof(etag));
        /* A 200 says the upload was completed only with its result (S3 may
         * answer 200 and fail in the body; a body with neither, an empty
         * one, says nothing): without it the object below decides, as for
         * an error, and a PUT that published nothing is never reported
         * done. */
        if (ret == 0 &&
            (!r.body.p || !memmem(r.body.p, r.body.len, "<CompleteMultipartUploadResult", 30))) {
            rio__detail("s3 bucket %s: POST key %s (complete): HTTP 200 without a "
                        "CompleteMultipartUploadResult",
                        t->bucket, up->key);
            ret = RIO_EPROTO;
            answered = true;
        }
        if (ret == RIO_ENOTFOUND && up->cond_hdr) {
            /* If-Match over a key that holds nothing (not the upload gone) */
            char code[32];
            rio__s3_xml_text(r.body.p, r.body.len, "Code", code, sizeof(code));
            if (!strcmp(code, "NoSuchKey"))
                ret = RIO_EGENERATION;
        }
        rio__s3_meta_rsp_cleanup(&r);
    }
    /*
     * A complete that failed may have taken effect: its answer lost on the
     * way back, or (NoSuchUpload) an earlier try's. The complete is never
     * sent again on a guess; the object tells whether it is ours (its
     * railio id is this upload's). If it is not: a server that answered an
     * error did not complete the upload, and a retryable answer (503,
     * SlowDown) leaves the upload for the engine's next try; with no answer
     * at all the complete may still land: RIO_EUNKNOWN, never retried.
     */
    if (ret < 0 && ret != -EACCES && ret != RIO_EINVAL) {
        if (rio__s3_head_id(t, up->key, cur_id, &cur_sidecar, &g) == 0 && !strcmp(cur_id, up->id)) {
            ret = 0;
            etag[0] = '\0';
        } else if (!answered) {
            ret = RIO_EUNKNOWN;
            unknown = true;
        }
    }
    if (ret < 0)
        goto out;

    /* radosgw answers an empty <ETag>: ask the object, and if someone else
     * replaced it already, fall back to computing ours. */
    if (!etag[0] || etag[0] != '"') {
        if (rio__s3_head_id(t, up->key, cur_id, &cur_sidecar, &g) == 0 && !strcmp(cur_id, up->id)) {
            rio__s3_copy_str(etag, sizeof(etag), g.etag, strlen(g.etag));
        } else {
            md = EVP_MD_CTX_new();
            if (md)
                multipart_etag(up, md, etag, sizeof(etag));
            EVP_MD_CTX_free(md);
        }
    }
    {
        struct s3_rsp rr;
        memset(&rr, 0, sizeof(rr));
        rio__s3_copy_str(rr.etag, sizeof(rr.etag), etag, strlen(etag));
        rio__s3_copy_str(rr.m_id, sizeof(rr.m_id), up->id, strlen(up->id));
        d->generation = rio__s3_rsp_gen(&rr, up->size, &g);
        rio__s3_gen_put(t, &g);
    }
    up->sidecar_put = false; /* it belongs to the object now */
    if (old_sidecar && old_id[0] && strcmp(old_id, up->id) != 0 &&
        rio__s3_sidecar_key(up->key, old_id, oskey, sizeof(oskey)) == 0)
        rio__s3_delete_key(t, oskey);
    ret = 0;
out:
    /* A retryable failure leaves the upload and its sidecar as they are,
     * for the engine's next commit or its put_abort (RIO_CAP_COMMIT_RETRY).
     * Any other drops the upload; the sidecar too, unless the complete's
     * outcome is unknown (the object may be ours and need it). */
    if (ret < 0 && !rio__s3_retryable(ret)) {
        abort_multi(t, up);
        if (up->sidecar_put && !unknown)
            rio__s3_delete_key(t, skey);
        up->sidecar_put = false;
    }
    rio__free(sc);
    rio__free(xml);
    return ret;
}

/*
 * A stream learns its size at commit. The parts that went out must be
 * exactly those of d's geometry: every part below the count sent whole at
 * its length (chunk size, the last one the rest), none beyond it (a part
 * past the end is never completed: the commit is refused and the upload
 * aborted). Called after the fence: no WRITE of the upload is in flight.
 */
static int stream_close(struct s3_transport *t, struct s3_upload *up, const struct rio_desc *d)
{
    uint64_t n, hi;

    if (!d || d->chunk_size != up->chunk || d->size == RIO_SIZE_UNKNOWN)
        return RIO_EPROTO;
    pthread_mutex_lock(&t->mu);
    hi = up->hi;
    pthread_mutex_unlock(&t->mu);
    n = rio__s3_nchunks(d->size, up->chunk);
    if (d->nchunks != n || n > S3_MAX_PARTS || hi > n || (n && !d->xxh))
        return RIO_EPROTO;
    for (uint64_t i = 0; i < n; i++) {
        const struct s3_part *pt = rio__s3_part_at(up, i);
        uint64_t want = i + 1 < n ? up->chunk : d->size - i * up->chunk;
        if (!pt || !pt->ok || pt->len != want)
            return RIO_EPROTO;
    }
    up->size = d->size;
    up->nparts = n;
    return 0;
}

int rio__s3_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up = upload;
    int ret = 0;

    if (!up || up->magic != UPLOAD_MAGIC)
        return RIO_EINVAL;
    if (up->stream)
        ret = stream_close(t, up, d);
    if (ret < 0 || !d || (up->nparts && !d->xxh) || d->size != up->size ||
        d->chunk_size != up->chunk || d->nchunks != up->nparts || strcmp(d->key, up->key) != 0) {
        upload_drop(t, up);
        return RIO_EPROTO;
    }
    if (up->stream && up->nparts == 0) {
        /* An empty stream: S3 completes no upload without a part
         * (MalformedXML), so drop the upload and PUT an empty object, as a
         * sized PUT of 0 bytes does. */
        abort_multi(t, up);
        ret = commit_single(t, up, d);
    } else {
        ret = up->mode == UP_SINGLE ? commit_single(t, up, d) : commit_multi(t, up, d);
    }
    /* RIO_CAP_COMMIT_RETRY: a retryable class leaves the upload to the
     * engine (another put_commit, or put_abort); anything else consumes it. */
    if (ret < 0 && rio__s3_retryable(ret))
        return ret;
    upload_free(up);
    return ret;
}

void rio__s3_put_abort(struct rio_transport *tt, void *upload)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up = upload;

    if (!up || up->magic != UPLOAD_MAGIC)
        return;
    upload_drop(t, up);
}
