/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One data op: a chunk READ (a ranged GET pinned to the generation the
 * lookup saw; or, in one op, the object's first bytes with its metadata,
 * no lookup before it) or WRITE (an UploadPart, or one PutObject for an object of one
 * chunk) on its own easy handle, from the path's pool. op_prepare sets it
 * up, curl's callbacks move the body with every length checked against the
 * op's buffer, and op_result turns the finished transfer into the op's
 * result. Everything here runs on the reap thread (loop.c), no lock held,
 * but the pool's growth (under t->mu).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/copy.h"
#include "transport/s3/internal.h"

static size_t op_body(char *p, size_t sz, size_t nmemb, void *arg);
static size_t op_read(char *p, size_t sz, size_t nmemb, void *arg);
static int op_seek(void *arg, curl_off_t off, int origin);

int rio__s3_op_make(void *e, void *arg)
{
    struct s3_op *op = e;
    struct s3_path *p = arg;

    op->p = p;
    op->e = curl_easy_init();
    op->md = EVP_MD_CTX_new();
    op->xs = rio__xxh3_stream_new();
    if (!op->e || !op->md || !op->xs) {
        curl_easy_cleanup(op->e);
        EVP_MD_CTX_free(op->md);
        rio__xxh3_stream_free(op->xs);
        op->e = NULL;
        op->md = NULL;
        op->xs = NULL;
        return -ENOMEM;
    }
    rio__s3_easy_common(p->t, op->e, p->iface);
    curl_easy_setopt(op->e, CURLOPT_PRIVATE, op);
    curl_easy_setopt(op->e, CURLOPT_HEADERFUNCTION, rio__s3_on_header);
    op->hctx = (struct s3_hdr_ctx){&op->rsp, NULL, &p->ack_due};
    curl_easy_setopt(op->e, CURLOPT_HEADERDATA, &op->hctx);
    curl_easy_setopt(op->e, CURLOPT_WRITEFUNCTION, op_body);
    curl_easy_setopt(op->e, CURLOPT_WRITEDATA, op);
    curl_easy_setopt(op->e, CURLOPT_READFUNCTION, op_read);
    curl_easy_setopt(op->e, CURLOPT_READDATA, op);
    curl_easy_setopt(op->e, CURLOPT_SEEKFUNCTION, op_seek);
    curl_easy_setopt(op->e, CURLOPT_SEEKDATA, op);
    curl_easy_setopt(op->e, CURLOPT_ERRORBUFFER, op->errbuf);
    if (p->t->op_timeout_ms)
        curl_easy_setopt(op->e, CURLOPT_TIMEOUT_MS, p->t->op_timeout_ms + 5000L);
    return 0;
}

void rio__s3_op_unmake(void *e, void *arg)
{
    struct s3_op *op = e;
    struct s3_path *p = arg;

    if (op->state == OP_ACTIVE && p->m)
        curl_multi_remove_handle(p->m, op->e);
    curl_easy_cleanup(op->e);
    EVP_MD_CTX_free(op->md);
    rio__xxh3_stream_free(op->xs);
    op->e = NULL;
    op->md = NULL;
    op->xs = NULL;
}

/*
 * Check a READ response before its first body byte is stored (or at the end
 * when there is no body): the range and the object must be the ones asked
 * for. A 206 with a missing or wrong Content-Range, a Content-Length that is
 * not the chunk's, or a 200 for a range that is not the whole object are
 * server faults (RIO_ESERVER: retried); another generation is
 * RIO_EGENERATION (never stitched).
 */
static int check_read_rsp(struct s3_op *op)
{
    struct rio_io *io = op->io;
    struct s3_rsp *r = &op->rsp;
    struct s3_gen g, kept;

    if (r->status == 206) {
        if (!r->have_crange || r->cr_first != io->off || r->cr_last - r->cr_first + 1 != io->len)
            return RIO_ESERVER;
        if (r->have_clen && r->clen != io->len)
            return RIO_ESERVER;
    } else if (r->status == 200) {
        /* The whole object instead of a range: right only if the range was
         * the whole object. */
        if (io->off != 0 || !r->have_clen || r->clen != io->len)
            return RIO_ESERVER;
    } else {
        return RIO_ESERVER;
    }
    if (io->generation) {
        uint64_t size = r->status == 206 ? r->cr_total : r->clen;
        if (rio__s3_rsp_gen(r, size, &g) != io->generation)
            return RIO_EGENERATION;
        /* Its generation, but another size than the lookup that named it
         * said (a HEAD whose length a proxy mangled): the chunks the
         * engine asks for are not all the object's, nor its last one its
         * end. ("*", an unknown size, says nothing.) */
        if (size != UINT64_MAX && rio__s3_gen_get(op->p->t, io->generation, &kept) &&
            !kept.lastmod && kept.size != size)
            return RIO_ESERVER;
    }
    return 0;
}

/*
 * A READ in one op (rio_io.one, get_one said yes): a GET of bytes 0 to
 * len - 1 naming no generation, whose answer is the object's first
 * min(len, size) bytes with its metadata: a 206 whose Content-Range starts
 * at 0 and says the size, or a 200 with the whole object when it fits (a
 * 200 with more than len bytes, from a server that ignores Range, stops
 * here and the GET goes the long way). The bytes are stored only when
 * they are the whole object and the object is one railio chunk or not
 * railio's (one_skip otherwise: counted, never stored, and op_one_result
 * hands the engine the descriptor alone).
 */
static int check_one_rsp(struct s3_op *op)
{
    struct rio_io *io = op->io;
    struct s3_rsp *r = &op->rsp;
    uint64_t total, n;

    if (r->status == 206) {
        if (!r->have_crange || r->cr_first != 0 || r->cr_last >= r->cr_total)
            return RIO_ESERVER;
        total = r->cr_total;
        n = total < io->len ? total : io->len;
        if (r->cr_last + 1 != n)
            return RIO_ESERVER;
    } else if (r->status == 200) {
        if (!r->have_clen)
            return RIO_ESERVER;
        total = n = r->clen;
        if (total > io->len)
            return RIO__ENOTONE;
    } else {
        return RIO_ESERVER;
    }
    if (r->have_clen && r->clen != n)
        return RIO_ESERVER;
    op->one_len = n;
    op->one_total = total;
    rio__s3_rsp_kind(r, total, &op->one_chunk, &op->one_sidecar, op->one_md5);
    op->one_skip = total > io->len || op->one_sidecar ||
                   (op->one_chunk && rio__s3_nchunks(total, op->one_chunk) != 1);
    return 0;
}

/* The outcome of a READ in one op whose answer was a success: the object's
 * size, its bytes in dst (checked against its one checksum when railio
 * wrote it), or RIO__ENOTONE with the descriptor alone (gen_out 0: the
 * long way, which looks it up, decides). */
static int64_t op_one_result(struct s3_transport *t, struct s3_op *op)
{
    struct rio_io *io = op->io;
    struct s3_rsp *r = &op->rsp;
    /* What check_one_rsp read of the answer's headers. */
    uint64_t total = op->one_total, chunk = op->one_chunk, *xxh = NULL, ck;
    bool sidecar = op->one_sidecar;
    const char *md5 = op->one_md5;
    struct s3_gen g;

    if (op->got != op->one_len)
        return RIO_ESHORT;
    if (total > (uint64_t)INT64_MAX)
        return RIO__ENOTONE; /* no object is that large: the lookup refuses it, naming why */
    /* An empty answer (a 200 with no body) is checked by nothing (neither
     * a chunk checksum nor an ETag checks an empty object): the lookup
     * says whether the object is empty, as after S3's 416 for one. */
    if (total == 0)
        return RIO__ENOTONE;
    /* Its checksum list is in its sidecar: the lookup reads it, unless the
     * object is larger than len (its size, said here, decides: ETOOBIG). */
    if (sidecar && total <= io->len)
        return RIO__ENOTONE;
    if (chunk && !op->one_skip && rio__s3_parse_xxh_list(r->m_xxh, 1, &xxh) < 0)
        return RIO__ENOTONE; /* no checksum to check it by: the lookup says what to do */
    io->gen_out = rio__s3_rsp_gen(r, total, &g);
    io->one_size = total;
    io->one_chunk_size = chunk;
    io->one_nchunks = chunk ? rio__s3_nchunks(total, chunk) : 0;
    memcpy(io->one_etag, md5, sizeof(io->one_etag));
    if (op->one_skip) {
        rio__free(xxh);
        return RIO__ENOTONE; /* larger than len, or several chunks: the engine decides */
    }
    /* Not railio's and uploaded in parts (ETag "MD5-N"): checked by its
     * parts, whose size only the lookup's part HEADs say (parts_of). */
    if (!chunk && !md5[0] && !r->etag_no_md5 && rio__s3_ask_checksum(t) &&
        !atomic_load(&t->no_part_numbers) && rio__s3_etag_parts(r->etag) &&
        rio__s3_rsp_checksum(r, &ck) == RIO_S3_CK_NONE)
        return RIO__ENOTONE;
    if (chunk) {
        uint64_t got =
            op->xxh_stream ? rio__xxh3_stream_digest(op->xs) : rio__xxh3(io->dst, (size_t)total);
        uint64_t want = xxh[0];
        rio__free(xxh);
        if (got != want)
            return RIO_ECHECKSUM;
        io->xxh_got = got;
        io->xxh_valid = true;
    }
    rio__s3_gen_put(t, &g);
    return (int64_t)total;
}

static size_t op_body(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct s3_op *op = arg;
    struct rio_io *io = op->io;
    size_t n = sz * nmemb;

    if (op->rsp.status < 200 || op->rsp.status >= 300 || io->kind != RIO_IO_READ) {
        /* An error body (kept for the <Code>) or a WRITE's reply. */
        size_t room = sizeof(op->ebody) - 1 - op->elen;
        size_t k = n < room ? n : room;
        memcpy(op->ebody + op->elen, p, k);
        op->elen += k;
        op->ebody[op->elen] = '\0';
        return n;
    }
    if (!op->checked) {
        op->checked = true;
        op->err = io->one ? check_one_rsp(op) : check_read_rsp(op);
        if (op->err)
            return 0; /* CURLE_WRITE_ERROR: nothing stored */
    }
    /* Never past the chunk, nor, in one op, past what the answer's headers
     * announced (a body with no Content-Length may run on to the end of
     * the buffer): more bytes than that is a server fault. */
    if (n > (io->one ? op->one_len : io->len) - op->got) {
        op->err = RIO_ESERVER;
        return 0;
    }
    if (op->one_skip)
        ; /* not the caller's: counted, not stored */
    else if (op->p->t->discard)
        ; /* counted, not stored */
    else if (op->p->t->nt_copy)
        rio__copy_nt((uint8_t *)io->dst + op->got, p, n);
    else
        memcpy((uint8_t *)io->dst + op->got, p, n);
    /* The bytes just stored, while they are in cache: the chunk's xxh3
     * without a second pass (rio_io.xxh_got). */
    if (op->xxh_stream && !op->one_skip)
        rio__xxh3_stream_update(op->xs, (const uint8_t *)io->dst + op->got, n);
    op->got += n;
    return n;
}

static size_t op_read(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct s3_op *op = arg;
    struct rio_io *io = op->io;
    size_t n = sz * nmemb;
    uint64_t left = io->len - op->got;

    if (n > left)
        n = (size_t)left;
    memcpy(p, (const uint8_t *)io->src + op->got, n);
    if (op->md5_stream && EVP_DigestUpdate(op->md, p, n) != 1)
        return CURL_READFUNC_ABORT;
    op->got += n;
    return n;
}

/* curl sends a request again by itself when a reused connection turns out
 * dead; for an upload it rewinds the body first. */
static int op_seek(void *arg, curl_off_t off, int origin)
{
    struct s3_op *op = arg;

    if (origin != SEEK_SET || off < 0 || (uint64_t)off > op->io->len)
        return CURL_SEEKFUNC_FAIL;
    if (op->md5_stream) {
        /* The running MD5 can only start over. */
        if (off != 0 || EVP_DigestInit_ex(op->md, EVP_md5(), NULL) != 1)
            return CURL_SEEKFUNC_FAIL;
    }
    op->got = (uint64_t)off;
    return CURL_SEEKFUNC_OK;
}

void rio__s3_crc32c_b64(uint32_t crc, char out[12])
{
    uint8_t be[4] = {(uint8_t)(crc >> 24), (uint8_t)(crc >> 16), (uint8_t)(crc >> 8), (uint8_t)crc};
    rio__s3_base64(be, 4, out);
}

/* MD5 of a chunk: hex (for the metadata) and base64 (Content-MD5). */
static int md5_of(EVP_MD_CTX *md, const void *p, size_t n, char hex[33], char b64[25])
{
    uint8_t d[16];
    unsigned len = 0;

    if (EVP_DigestInit_ex(md, EVP_md5(), NULL) != 1 || EVP_DigestUpdate(md, p, n) != 1 ||
        EVP_DigestFinal_ex(md, d, &len) != 1 || len != 16)
        return -ENOMEM;
    if (hex)
        rio__s3_hex(d, 16, hex);
    if (b64)
        rio__s3_base64(d, 16, b64);
    return 0;
}

/* SHA-256 of a chunk, hex (x-amz-content-sha256). */
static int sha256_of(EVP_MD_CTX *md, const void *p, size_t n, char hex[65])
{
    uint8_t d[32];
    unsigned len = 0;

    if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 || EVP_DigestUpdate(md, p, n) != 1 ||
        EVP_DigestFinal_ex(md, d, &len) != 1 || len != 32)
        return -ENOMEM;
    rio__s3_hex(d, 32, hex);
    return 0;
}

/*
 * put_prep: a part's check taken from the caller's bytes on the engine's
 * cpu pool, beside the chunk's xxh3 and before the part may be submitted,
 * so that op_prepare, on the engine thread that drives every transfer,
 * only signs (docs/s3.md, WRITE). A part whose digest fails here (or whose
 * record cannot be made) is checked at submit instead.
 */
static struct s3_part *prep_part(struct s3_transport *t, struct s3_upload *up, uint64_t index,
                                 const void *src, uint64_t len)
{
    if (!src || len == 0)
        return NULL;
    if (up->stream) {
        /* A stream's part record lives in a page made at its first submit
         * or here (under mu, as submit makes it). */
        struct s3_part *page;
        if (index >= S3_MAX_PARTS || len > up->chunk)
            return NULL;
        pthread_mutex_lock(&t->mu);
        page = rio__s3_part_page_locked(up, index);
        pthread_mutex_unlock(&t->mu);
        if (!page)
            return NULL; /* checked at submit */
    } else if (up->mode == UP_MULTI ? index >= up->nparts : index != 0) {
        return NULL;
    }
    return rio__s3_part_at(up, index);
}

static void prep_one(struct s3_transport *t, struct s3_upload *up, uint64_t index, const void *src,
                     uint64_t len);

#define MD5_LANE_CHUNK_MAX (64ull << 20)

/* Content-MD5 of each part, computed ahead (rather than hashed as sent and
 * compared with the part's ETag). */
static bool md5_ahead(const struct s3_transport *t, const struct s3_upload *up)
{
    return up->ck == CK_MD5 && (t->content_md5 == MD5_HEADER || up->md5_lanes);
}

unsigned rio__s3_put_prep_group(struct rio_transport *tt, void *upload)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_upload *up = upload;

    /* Parts of more than MD5_LANE_CHUNK_MAX one at a time: 16 of them would
     * keep a thread (and a cancel) waiting for seconds. */
    if (!up || up->magic != UPLOAD_MAGIC || !md5_ahead(t, up) || up->chunk > MD5_LANE_CHUNK_MAX)
        return 1;
    return rio__md5_lanes();
}

/* put_prep of chunk index[i] of ups[i], i < n: the MD5s taken ahead
 * together, in vector lanes where the CPU has them, the other checks one
 * at a time. */
static void prep_many(struct s3_transport *t, unsigned n, struct s3_upload *const *ups,
                      const uint64_t *index, const void *const *srcs, const uint64_t *lens)
{
    struct s3_part *parts[RIO__PREP_MAX];
    const void *mp[RIO__PREP_MAX];
    size_t ml[RIO__PREP_MAX];
    uint8_t md[RIO__PREP_MAX][16];
    unsigned nm = 0;

    for (unsigned i = 0; i < n; i++) {
        struct s3_upload *up = ups[i];
        if (!up || up->magic != UPLOAD_MAGIC)
            continue;
        if (!md5_ahead(t, up)) {
            prep_one(t, up, index[i], srcs[i], lens[i]);
            continue;
        }
        if (!(parts[nm] = prep_part(t, up, index[i], srcs[i], lens[i])))
            continue;
        mp[nm] = srcs[i];
        ml[nm++] = (size_t)lens[i];
    }
    if (nm == 0 || rio__md5_many(mp, ml, nm, md) < 0)
        return;
    for (unsigned i = 0; i < nm; i++) {
        memcpy(parts[i]->pre_digest, md[i], 16);
        parts[i]->pre_len = ml[i];
        parts[i]->pre = PRE_MD5;
    }
}

void rio__s3_put_prep(struct rio_transport *tt, void *upload, uint64_t index, unsigned n,
                      const void *const *srcs, const uint64_t *lens)
{
    struct s3_upload *ups[RIO__PREP_MAX];
    uint64_t idx[RIO__PREP_MAX];

    if (n > RIO__PREP_MAX)
        return;
    for (unsigned i = 0; i < n; i++) {
        ups[i] = upload;
        idx[i] = index + i;
    }
    prep_many((struct s3_transport *)tt, n, ups, idx, srcs, lens);
}

/* A batch's small objects, one part each: their Content-MD5s in lanes
 * like one object's parts (rio__s3_put_prep_group). */
unsigned rio__s3_put_prep_many(struct rio_transport *tt, unsigned n, void *const *uploads,
                               const uint64_t *index, const void *const *srcs, const uint64_t *lens)
{
    struct s3_upload *ups[RIO__PREP_MAX];

    if (n == 0) {
        /* Lanes gain only where the parts' check is an MD5 taken ahead
         * (md5_ahead; before the first probe, maybe): else a group would
         * only hold the batch's window back until it has room for all. */
        struct s3_transport *t = (struct s3_transport *)tt;
        int ck = atomic_load(&t->checksum);
        if ((ck != CK_MD5 && ck != CK_AUTO) || (t->content_md5 != MD5_HEADER && t->content_md5_set))
            return 1;
        return rio__md5_lanes();
    }
    if (n > RIO__PREP_MAX)
        return 0;
    for (unsigned i = 0; i < n; i++) {
        ups[i] = uploads[i];
        /* Parts too large to wait for in lanes: alone (put_prep_group). */
        if (ups[i] && ups[i]->magic == UPLOAD_MAGIC && ups[i]->chunk > MD5_LANE_CHUNK_MAX) {
            prep_many((struct s3_transport *)tt, 1, &ups[i], &index[i], &srcs[i], &lens[i]);
            ups[i] = NULL;
        }
    }
    prep_many((struct s3_transport *)tt, n, ups, index, srcs, lens);
    return n;
}

/* One chunk's check, not an MD5 (put_prep). */
static void prep_one(struct s3_transport *t, struct s3_upload *up, uint64_t index, const void *src,
                     uint64_t len)
{
    struct s3_part *part = prep_part(t, up, index, src, len);
    const EVP_MD *alg = NULL;
    unsigned dl = 0;
    int kind;

    if (!part)
        return;
    if (up->ck == CK_SHA256) {
        alg = EVP_sha256();
        kind = PRE_SHA256;
    } else if (up->ck == CK_CRC32C) {
        part->pre_crc = rio__crc32c(0, src, (size_t)len);
        kind = PRE_CRC32C;
    } else {
        return; /* MD5 as it is sent, or no check: nothing to do ahead */
    }
    if (alg && EVP_Digest(src, (size_t)len, part->pre_digest, &dl, alg, NULL) != 1)
        return;
    part->pre_len = len;
    part->pre = (uint8_t)kind;
}

/* put_prep's result for io, if it took the check op_prepare needs. */
static const struct s3_part *prepped(struct s3_upload *up, const struct rio_io *io, int kind)
{
    const struct s3_part *part = rio__s3_part_at(up, io->index);

    return part && part->pre == kind && part->pre_len == io->len ? part : NULL;
}

/* Set an op's request up on its easy handle (reap thread, no lock held). */
int rio__s3_op_prepare(struct s3_transport *t, struct s3_op *op)
{
    struct rio_io *io = op->io;
    struct s3_upload *up = io->upload;
    struct rio_s3_kv x[10];
    unsigned nx = 0;
    char range[64], md5hex[33], md5b64[25], xxh[17], chunk[24], size[24], pnum[16], crc64[16],
        sha[65];
    const char *payload = RIO_S3_UNSIGNED;
    struct s3_gen g;
    int ret;

    op->checked = false;
    op->md5_stream = false;
    op->xxh_stream = false;
    op->one_skip = false;
    op->one_len = 0;
    op->md5hex[0] = '\0';
    op->crc = 0;
    op->err = 0;
    op->res = 0;
    op->got = 0;
    op->svc_ns = 0;
    op->elen = 0;
    op->ebody[0] = '\0';
    op->errbuf[0] = '\0';
    rio__s3_rsp_reset(&op->rsp);
    rio__s3_hdrs_init(&op->h, op->hbuf, sizeof(op->hbuf));

    if (io->kind == RIO_IO_READ) {
        /* Hashed as stored when the engine will check it (a whole chunk,
         * expected xxh3 known) and every byte lands through memcpy: not
         * with discard (nothing stored) nor nt_copy (not in cache). */
        if ((io->xxh || io->one) && !t->discard && !t->nt_copy) {
            rio__xxh3_stream_reset(op->xs);
            op->xxh_stream = true;
        }
        snprintf(range, sizeof(range), "bytes=%" PRIu64 "-%" PRIu64, io->off,
                 io->off + io->len - 1);
        x[nx++] = (struct rio_s3_kv){"range", range};
        if (io->one) {
            io->gen_out = 0;
            if (rio__s3_ask_checksum(t))
                x[nx++] = (struct rio_s3_kv){"x-amz-checksum-mode", "ENABLED"};
        } else if (io->generation && rio__s3_gen_get(t, io->generation, &g))
            x[nx++] = (struct rio_s3_kv){g.lastmod ? "if-unmodified-since" : "if-match", g.etag};
        ret = rio__s3_req_build(t, op->md, "GET", io->key, NULL, 0, x, nx, RIO_S3_EMPTY_SHA256,
                                op->url, sizeof(op->url), &op->h);
        if (ret < 0)
            return ret;
        curl_easy_setopt(op->e, CURLOPT_HTTPGET, 1L);
    } else {
        struct rio_s3_kv q[2];
        unsigned nq = 0;

        /* One check of the part's bytes: the CRC32C the server verifies,
         * or the SHA-256 signed as the payload hash (the server verifies
         * it), or an MD5 (Content-MD5 up front, or computed as it goes and
         * compared with the part's ETag), or none (docs/s3.md, knob
         * checksum). An MD5 that put_prep was to take in lanes but did
         * not (a batch's large object) is computed as it goes: never a
         * burst here, on the thread that drives every transfer. */
        const struct s3_part *pre = NULL;
        bool md5_hdr = up->ck == CK_MD5 && (t->content_md5 == MD5_HEADER ||
                                            (up->md5_lanes && (pre = prepped(up, io, PRE_MD5))));
        if (up->ck == CK_SHA256) {
            if ((pre = prepped(up, io, PRE_SHA256)))
                rio__s3_hex(pre->pre_digest, 32, sha);
            else if ((ret = sha256_of(op->md, io->src, (size_t)io->len, sha)) < 0)
                return ret;
            payload = sha;
        } else if (up->ck == CK_CRC32C) {
            pre = prepped(up, io, PRE_CRC32C);
            op->crc = pre ? pre->pre_crc : rio__crc32c(0, io->src, (size_t)io->len);
            rio__s3_crc32c_b64(op->crc, crc64);
            x[nx++] = (struct rio_s3_kv){"x-amz-checksum-crc32c", crc64};
            x[nx++] = (struct rio_s3_kv){"x-amz-sdk-checksum-algorithm", "CRC32C"};
        } else if (md5_hdr) {
            if ((pre = prepped(up, io, PRE_MD5))) {
                rio__s3_hex(pre->pre_digest, 16, md5hex);
                rio__s3_base64(pre->pre_digest, 16, md5b64);
            } else if ((ret = md5_of(op->md, io->src, (size_t)io->len, md5hex, md5b64)) < 0) {
                return ret;
            }
            x[nx++] = (struct rio_s3_kv){"content-md5", md5b64};
            memcpy(op->md5hex, md5hex, sizeof(md5hex));
        }
        if (up->mode == UP_SINGLE) {
            snprintf(xxh, sizeof(xxh), "%016" PRIx64, io->xxh);
            snprintf(chunk, sizeof(chunk), "%" PRIu64, up->chunk);
            snprintf(size, sizeof(size), "%" PRIu64, up->size);
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-v", S3_FORMAT};
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-id", up->id};
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-chunk", chunk};
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-size", size};
            /* Known before the body only with Content-MD5; otherwise the
             * object's ETag is its MD5 (one PutObject). */
            if (op->md5hex[0])
                x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-md5", op->md5hex};
            x[nx++] = (struct rio_s3_kv){"x-amz-meta-railio-xxh", xxh};
            /* This PutObject publishes: put_expect's condition is its. */
            if (up->cond_hdr) {
                x[nx++] = (struct rio_s3_kv){up->cond_hdr, up->cond_val};
                up->cond_sends++;
            }
        } else {
            snprintf(pnum, sizeof(pnum), "%" PRIu64, io->index + 1);
            q[nq++] = (struct rio_s3_kv){"partNumber", pnum};
            q[nq++] = (struct rio_s3_kv){"uploadId", up->upload_id};
        }
        ret = rio__s3_req_build(t, op->md, "PUT", io->key, q, nq, x, nx, payload, op->url,
                                sizeof(op->url), &op->h);
        if (ret < 0)
            return ret;
        /* After signing, which used md for SHA-256; not with content_md5=off
         * (checksum=auto may still have picked MD5). */
        if (up->ck == CK_MD5 && !md5_hdr && t->content_md5 == MD5_VERIFY) {
            if (EVP_DigestInit_ex(op->md, EVP_md5(), NULL) != 1)
                return -ENOMEM;
            op->md5_stream = true;
        }
        curl_easy_setopt(op->e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(op->e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)io->len);
    }
    curl_easy_setopt(op->e, CURLOPT_URL, op->url);
    curl_easy_setopt(op->e, CURLOPT_HTTPHEADER, rio__s3_hdrs_list(&op->h));
    return 0;
}

/* What the server said of a failed data op (err), in io->why for the
 * caller's rio_error_detail, as a metadata request's detail says it: the
 * bucket (or host), the request, the status and the answer's <Code> and
 * <Message>, or curl's message when no answer came. Never the query
 * string nor a header. */
static void op_why(const struct s3_transport *t, struct s3_op *op, int err)
{
    struct rio_io *io = op->io;
    const struct s3_rsp *r = &op->rsp;
    char code[64], msg[256], ebuf[CURL_ERROR_SIZE];
    const char *what = t->scheme == SCHEME_S3 ? "s3 bucket" : "http host";
    const char *name = t->scheme == SCHEME_S3 ? t->bucket : t->host;
    const char *method = io->kind == RIO_IO_READ ? "GET" : "PUT";

    if (err == RIO__ENOTONE)
        return; /* no failure: the engine looks the object up */
    if (r->status >= 300 || (r->status && r->status < 200)) {
        rio__s3_answer_text(op->ebody, op->elen, code, msg);
        if (snprintf(io->why, sizeof(io->why), "%s %s: %s key %s: HTTP %ld%s%s%s%s", what, name,
                     method, io->key, r->status, code[0] ? " " : "", code, msg[0] ? ": " : "",
                     msg) < 0)
            io->why[0] = '\0';
    } else if (op->errbuf[0]) {
        snprintf(ebuf, sizeof(ebuf), "%s", op->errbuf);
        rio__s3_printable(ebuf);
        if (snprintf(io->why, sizeof(io->why), "%s %s: %s key %s: %s: %s", what, name, method,
                     io->key, rio_errname(err), ebuf) < 0)
            io->why[0] = '\0';
    }
}

/* Outcome of a finished transfer (reap thread). */
int64_t rio__s3_op_result(struct s3_transport *t, struct s3_op *op, CURLcode rc)
{
    struct rio_io *io = op->io;
    struct s3_rsp *r = &op->rsp;
    long oserr = 0;
    char code[64];
    int err;

    if (op->err) {
        err = op->err;
        goto fail;
    }
    /* A range of an empty object cannot be satisfied (S3's 416
     * InvalidRange): the long way sizes it. */
    if (io->kind == RIO_IO_READ && io->one && r->status == 416) {
        err = RIO__ENOTONE;
        goto fail;
    }
    if (r->status >= 300 || (r->status && r->status < 200)) {
        rio__s3_xml_text(op->ebody, op->elen, "Code", code, sizeof(code));
        err = rio__s3_map_http(r->status, code);
        if (!err)
            err = RIO_EPROTO;
        if (io->kind == RIO_IO_WRITE && ((struct s3_upload *)io->upload)->cond_hdr) {
            /* If-Match over a key that holds nothing: S3's 404. */
            if (err == RIO_ENOTFOUND && !strcmp(code, "NoSuchKey"))
                err = RIO_EGENERATION;
            /* Refused after an earlier try of it whose answer was lost:
             * maybe by that very try's object, so whether this PUT was
             * published is not known here. */
            if (err == RIO_EGENERATION && ((struct s3_upload *)io->upload)->cond_sends > 1)
                err = RIO_EUNKNOWN;
        }
        goto fail;
    }
    if (rc != CURLE_OK) {
        curl_easy_getinfo(op->e, CURLINFO_OS_ERRNO, &oserr);
        err = rio__s3_map_curl(rc, oserr, &op->rsp);
        goto fail;
    }
    if (io->kind == RIO_IO_READ) {
        if (!op->checked) {
            op->checked = true;
            err = io->one ? check_one_rsp(op) : check_read_rsp(op);
            if (err)
                goto fail;
        }
        if (io->one) {
            int64_t res = op_one_result(t, op);
            if (res < 0) {
                err = (int)res;
                goto fail;
            }
            return res;
        }
        if (op->got != io->len) {
            err = RIO_ESHORT;
            goto fail;
        }
        if (op->xxh_stream) {
            io->xxh_got = rio__xxh3_stream_digest(op->xs);
            io->xxh_valid = true;
        }
        curl_off_t pre = 0, start = 0;
        if (curl_easy_getinfo(op->e, CURLINFO_PRETRANSFER_TIME_T, &pre) == CURLE_OK &&
            curl_easy_getinfo(op->e, CURLINFO_STARTTRANSFER_TIME_T, &start) == CURLE_OK &&
            start > pre)
            op->svc_ns = (uint64_t)(start - pre) * 1000ull;
        return (int64_t)io->len;
    } else {
        struct s3_upload *up = io->upload;
        struct s3_part *part = rio__s3_part_at(up, io->index); /* exists: checked at submit */

        if (r->status != 200 || op->got != io->len) {
            err = op->got != io->len ? RIO_ESHORT : RIO_ESERVER;
            goto fail;
        }
        if (!r->etag[0]) {
            err = RIO_EPROTO; /* a part without an ETag cannot be completed */
            goto fail;
        }
        if (op->md5_stream) {
            uint8_t d[16];
            unsigned dl = 0;
            if (EVP_DigestFinal_ex(op->md, d, &dl) != 1 || dl != 16) {
                err = -ENOMEM;
                goto fail;
            }
            rio__s3_hex(d, 16, op->md5hex);
        }
        /* The server's MD5 of what it stored (a plain ETag) must be ours;
         * under SSE-KMS or SSE-C the ETag is no MD5, and a Content-MD5 sent
         * was checked by the server itself. */
        bool etag_md5 = !(r->etag_no_md5 && !op->md5_stream);
        if (op->md5hex[0] && etag_md5 && strlen(r->etag) == 34 && rio__s3_is_hex(r->etag + 1, 32) &&
            strncasecmp(r->etag + 1, op->md5hex, 32) != 0) {
            err = RIO_ECHECKSUM;
            goto fail;
        }
        rio__s3_copy_str(part->etag, sizeof(part->etag), r->etag, strlen(r->etag));
        if (up->mode == UP_SINGLE) {
            rio__s3_copy_str(up->etag, sizeof(up->etag), r->etag, strlen(r->etag));
            memcpy(up->md5, op->md5hex, sizeof(up->md5));
        }
        part->xxh = io->xxh;
        part->crc = op->crc;
        part->len = io->len;
        part->ok = true;
        return (int64_t)io->len;
    }
fail:
    rio__s3_debug_log(t, io->kind == RIO_IO_READ ? "GET" : "PUT", op->url, r->status, op->ebody,
                      op->elen, err, op->errbuf);
    op_why(t, op, err);
    return err;
}
