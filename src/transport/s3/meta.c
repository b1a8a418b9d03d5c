/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metadata: synchronous requests (curl_easy_perform on handles from a small
 * pool, so several threads run them at once), the generation of an object
 * and its validator table, and the ops lookup (HEAD, and the sidecar of a
 * multipart object) and remove.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/key.h"
#include "transport/s3/internal.h"

/*
 * The generation of an object: a nonzero 64-bit hash (xxh3) of its validator.
 * For a strong ETag that is ETag + NUL + railio's upload id (empty for
 * objects railio did not write), so two railio PUTs of identical bytes are
 * still two generations; without an ETag it is the Last-Modified date, and
 * without either the size alone (then a change of content cannot be seen).
 */
static uint64_t gen_hash(const char *kind, const char *a, const char *b)
{
    char buf[RIO_S3_ETAG_MAX + 96];
    int n = snprintf(buf, sizeof(buf), "%s%c%s%c%s", kind, 0, a, 0, b ? b : "");
    uint64_t h;

    if (n < 0)
        n = 0;
    if ((size_t)n >= sizeof(buf))
        n = (int)sizeof(buf) - 1;
    h = rio__xxh3(buf, (size_t)n);
    return h ? h : 1;
}

static bool etag_strong(const char *etag)
{
    return etag[0] && strncmp(etag, "W/", 2) != 0;
}

/* The generation and validator a response (HEAD or GET) describes. */
uint64_t rio__s3_rsp_gen(const struct s3_rsp *r, uint64_t size, struct s3_gen *g)
{
    char sz[24];

    memset(g, 0, sizeof(*g));
    g->size = size;
    g->etag_no_md5 = r->etag_no_md5;
    g->ck_algo = rio__s3_rsp_checksum(r, &g->ck_value);
    if (etag_strong(r->etag)) {
        /* A GCS object served decompressed shares its ETag with any object
         * storing its gzipped bytes as they are: other bytes served, so
         * another generation (the table's checksum of one would check
         * the other). */
        g->gen = gen_hash(r->goog_stored_enc ? "etag-gz" : "etag", r->etag, r->m_id);
        rio__s3_copy_str(g->etag, sizeof(g->etag), r->etag, strlen(r->etag));
    } else if (r->lastmod[0]) {
        g->gen = gen_hash("lastmod", r->lastmod, NULL);
        rio__s3_copy_str(g->etag, sizeof(g->etag), r->lastmod, strlen(r->lastmod));
        g->lastmod = true;
    } else {
        snprintf(sz, sizeof(sz), "%" PRIu64, size);
        g->gen = gen_hash("size", sz, NULL);
    }
    return g->gen;
}

void rio__s3_gen_put(struct s3_transport *t, const struct s3_gen *g)
{
    if (!g->etag[0])
        return;
    pthread_mutex_lock(&t->gen_mu);
    t->gens[g->gen % S3_GEN_SLOTS] = *g;
    pthread_mutex_unlock(&t->gen_mu);
}

bool rio__s3_gen_get(struct s3_transport *t, uint64_t gen, struct s3_gen *out)
{
    bool ok;

    pthread_mutex_lock(&t->gen_mu);
    *out = t->gens[gen % S3_GEN_SLOTS];
    pthread_mutex_unlock(&t->gen_mu);
    ok = out->gen == gen && out->etag[0];
    return ok;
}

/* ----------------------------------------------------- metadata requests */

struct meta_src {
    const char *p;
    size_t len, off;
};

static size_t meta_write(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct meta_body *b = arg;
    size_t n = sz * nmemb;

    if (n > b->max - b->len) {
        b->overflow = true;
        return 0;
    }
    if (!b->p) {
        b->p = b->fixed;
        b->cap = sizeof(b->fixed);
    }
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap * 2;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *q = b->heap ? rio__realloc(b->p, cap) : rio__malloc(cap);
        if (!q) {
            b->nomem = true;
            return 0;
        }
        if (!b->heap)
            memcpy(q, b->p, b->len);
        b->p = q;
        b->cap = cap;
        b->heap = true;
    }
    memcpy(b->p + b->len, p, n);
    b->len += n;
    b->p[b->len] = '\0';
    return n;
}

static size_t meta_read(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct meta_src *s = arg;
    size_t n = sz * nmemb;

    if (n > s->len - s->off)
        n = s->len - s->off;
    memcpy(p, s->p + s->off, n);
    s->off += n;
    return n;
}

static int meta_seek(void *arg, curl_off_t off, int origin)
{
    struct meta_src *s = arg;

    if (origin != SEEK_SET || off < 0 || (uint64_t)off > s->len)
        return CURL_SEEKFUNC_FAIL;
    s->off = (size_t)off;
    return CURL_SEEKFUNC_OK;
}

static void meta_free(struct s3_meta_h *mh)
{
    if (!mh)
        return;
    curl_easy_cleanup(mh->e); /* closes its connection: meta_close_cb */
    rio__free(mh);
}

static struct s3_meta_h *meta_get(struct s3_transport *t)
{
    struct s3_meta_h *mh = NULL;

    pthread_mutex_lock(&t->meta_mu);
    if (t->nmeta)
        mh = t->meta_pool[--t->nmeta];
    pthread_mutex_unlock(&t->meta_mu);
    if (mh)
        return mh;
    mh = rio__calloc(1, sizeof(*mh));
    if (!mh)
        return NULL;
    mh->t = t;
    mh->fd = -1;
    mh->e = curl_easy_init();
    if (!mh->e) {
        rio__free(mh);
        return NULL;
    }
    return mh;
}

static void meta_put(struct s3_transport *t, struct s3_meta_h *mh)
{
    pthread_mutex_lock(&t->meta_mu);
    if (t->nmeta < S3_META_POOL) {
        t->meta_pool[t->nmeta++] = mh;
        mh = NULL;
    }
    pthread_mutex_unlock(&t->meta_mu);
    meta_free(mh);
}

/* The idle metadata handles (at close). */
void rio__s3_meta_close(struct s3_transport *t)
{
    while (t->nmeta)
        meta_free(t->meta_pool[--t->nmeta]);
}

void rio__s3_meta_rsp_cleanup(struct meta_rsp *r)
{
    if (r->body.heap)
        rio__free(r->body.p);
    r->body.p = NULL;
    r->body.len = r->body.cap = r->body.max = 0;
    r->body.heap = r->body.overflow = r->body.nomem = false;
}

/* A HEAD's 404 within this long of a request that found the bucket is
 * taken as a missing key without asking about the bucket again. */
#define S3_BUCKET_SEEN_NS (5ull * 1000000000ull)

/* rio_error_detail for a failed request: the bucket (or host), the
 * request, and what the server said (its <Code> and <Message>) or curl's
 * message. Never the query string (it may carry an upload id) nor any
 * header. */
static void meta_detail(struct s3_transport *t, const struct meta_req *q, const struct meta_rsp *r,
                        const char *errbuf)
{
    char code[64], msg[256];
    const char *what = t->scheme == SCHEME_S3 ? "s3 bucket" : "http host";
    const char *name = t->scheme == SCHEME_S3 ? t->bucket : t->host;

    rio__s3_answer_text(r->body.p, r->body.len, code, msg);
    if (r->err == RIO_ENOCONTAINER)
        rio__detail("%s %s: no such bucket (%s %s: HTTP %ld%s%s%s%s)", what, name, q->method,
                    q->key ? "object" : "bucket", r->rsp.status, code[0] ? " " : "", code,
                    msg[0] ? ": " : "", msg);
    else if (r->answered && r->rsp.status == 403 && !code[0] && !strcmp(q->method, "HEAD"))
        /* A HEAD's answer has no body: say what a 403 may mean. */
        rio__detail("%s %s: %s %s%s: HTTP 403 (a HEAD's answer gives no reason: the access key "
                    "or secret, the clock (more than 15 minutes off the server's), or the "
                    "bucket's policy)",
                    what, name, q->method, q->key ? "key " : "the bucket", q->key ? q->key : "");
    else if (r->answered)
        rio__detail("%s %s: %s %s%s: HTTP %ld%s%s%s%s", what, name, q->method,
                    q->key ? "key " : "the bucket", q->key ? q->key : "", r->rsp.status,
                    code[0] ? " " : "", code, msg[0] ? ": " : "", msg);
    else
        rio__detail("%s %s: %s %s%s: %s%s%s", what, name, q->method, q->key ? "key " : "the bucket",
                    q->key ? q->key : "", rio_errname(r->err), errbuf && errbuf[0] ? ": " : "",
                    errbuf ? errbuf : "");
}

static int meta_once(struct s3_transport *t, EVP_MD_CTX *md, const struct meta_req *q,
                     struct meta_rsp *r);

/* curl's progress callback (at least once a second while a request waits):
 * the call's cancel token fired stops the request. */
static int meta_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    return rio__cancel_fired(arg) ? 1 : 0;
}

/* The request's time limit in ms (0: none): op_timeout, cut to what is
 * left of the call's deadline, so a server that trickles its answer (each
 * byte soon enough for the stall timeout) holds the call no longer than
 * its deadline; the engine then says RIO_EDEADLINE. */
static long meta_timeout_ms(const struct s3_transport *t)
{
    uint64_t dl = rio__meta_deadline_ns(), now = rio__now_ns();
    long ms = t->op_timeout_ms;

    if (dl != UINT64_MAX) {
        uint64_t left = dl > now ? (dl - now + NS_PER_MS - 1) / NS_PER_MS : 1;
        if (!ms || left < (uint64_t)ms)
            ms = (long)left;
    }
    return ms;
}

/*
 * A HEAD on a key answered 404 (a HEAD has no body, so no S3 code): whether
 * the bucket is missing, unless a request found it there just now.
 */
static void head_404_bucket(struct s3_transport *t, EVP_MD_CTX *md, struct meta_rsp *r)
{
    struct meta_req bq = {.method = "HEAD", .key = NULL};
    struct meta_rsp br = {0};

    if (rio__now_ns() - atomic_load(&t->bucket_seen_ns) < S3_BUCKET_SEEN_NS)
        return;
    if (meta_once(t, md, &bq, &br) == RIO_ENOCONTAINER)
        r->err = RIO_ENOCONTAINER;
    rio__s3_meta_rsp_cleanup(&br);
}

static int meta_once(struct s3_transport *t, EVP_MD_CTX *md, const struct meta_req *q,
                     struct meta_rsp *r)
{
    char url[S3_META_URL_MAX], hbuf[S3_META_HBUF], payload[65], errbuf[CURL_ERROR_SIZE], code[64];
    struct s3_hdrs h;
    struct meta_src src = {q->body, q->blen, 0};
    long oserr = 0;
    CURLcode rc;
    struct s3_meta_h *mh;
    CURL *e;
    int ret;

    rio__s3_meta_rsp_cleanup(r);
    rio__s3_rsp_reset(&r->rsp);
    r->body.max = q->body_max ? q->body_max : S3_META_BODY_MAX;
    r->err = 0;
    r->answered = false;
    if (q->payload) {
        rio__s3_copy_str(payload, sizeof(payload), q->payload, strlen(q->payload));
    } else if (q->body && q->blen) {
        uint8_t d[32];
        unsigned dl = 0;
        if (EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1 ||
            EVP_DigestUpdate(md, q->body, q->blen) != 1 || EVP_DigestFinal_ex(md, d, &dl) != 1)
            return -ENOMEM;
        rio__s3_hex(d, 32, payload);
    } else {
        memcpy(payload, RIO_S3_EMPTY_SHA256, sizeof(payload));
    }
    rio__s3_hdrs_init(&h, hbuf, sizeof(hbuf));
    ret = rio__s3_req_build(t, md, q->method, q->key, q->q, q->nq, q->x, q->nx, payload, url,
                            sizeof(url), &h);
    if (ret < 0)
        return ret;
    mh = meta_get(t);
    if (!mh)
        return -ENOMEM;
    e = mh->e;
    curl_easy_reset(e);
    rio__s3_easy_meta(mh, t->path[0].iface);
    errbuf[0] = '\0';
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(e, CURLOPT_URL, url);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, rio__s3_hdrs_list(&h));
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, rio__s3_on_header);
    struct s3_hdr_ctx hctx = {&r->rsp, &mh->fd, NULL}; /* used until curl_easy_perform returns */
    curl_easy_setopt(e, CURLOPT_HEADERDATA, &hctx);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, meta_write);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, &r->body);
    /* The call's deadline and cancel cut only requests that read (HEAD,
     * GET): one that makes something on the server (CreateMultipartUpload,
     * a sidecar's PUT) cut before its answer leaves what it made with no
     * one to remove it (an upload id never seen cannot be aborted), and a
     * cleanup runs whatever the call's state. */
    bool reads = !q->cleanup && (!strcmp(q->method, "HEAD") || !strcmp(q->method, "GET"));
    long tmo = reads ? meta_timeout_ms(t) : t->op_timeout_ms;
    if (q->slow) {
        /* A Complete: the server's time, not a stall (it took op_timeout,
         * then the object was asked before it was there: RIO_EUNKNOWN for
         * an upload that was then completed). */
        tmo = tmo > S3_SLOW_TIMEOUT_MS ? tmo : S3_SLOW_TIMEOUT_MS;
        curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME,
                         t->stall_s > S3_SLOW_QUIET_S ? t->stall_s : S3_SLOW_QUIET_S);
    }
    if (tmo)
        curl_easy_setopt(e, CURLOPT_TIMEOUT_MS, tmo);
    const struct rio_cancel *cx = reads ? rio__meta_cancel() : NULL;
    if (cx) {
        curl_easy_setopt(e, CURLOPT_XFERINFOFUNCTION, meta_progress);
        curl_easy_setopt(e, CURLOPT_XFERINFODATA, (void *)cx);
        curl_easy_setopt(e, CURLOPT_NOPROGRESS, 0L);
    }
    if (q->once)
        curl_easy_setopt(e, CURLOPT_FRESH_CONNECT, 1L);
    if (!strcmp(q->method, "HEAD")) {
        curl_easy_setopt(e, CURLOPT_NOBODY, 1L);
    } else if (!strcmp(q->method, "PUT")) {
        curl_easy_setopt(e, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(e, CURLOPT_READFUNCTION, meta_read);
        curl_easy_setopt(e, CURLOPT_READDATA, &src);
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, meta_seek);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, &src);
        curl_easy_setopt(e, CURLOPT_INFILESIZE_LARGE, (curl_off_t)q->blen);
    } else if (!strcmp(q->method, "POST")) {
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDS, q->body ? (const char *)q->body : "");
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->blen);
    } else if (!strcmp(q->method, "DELETE")) {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, "DELETE");
    }
    rc = curl_easy_perform(e);
    curl_easy_getinfo(e, CURLINFO_OS_ERRNO, &oserr);
    meta_put(t, mh);

    if (r->rsp.status >= 300 || (r->rsp.status && r->rsp.status < 200)) {
        rio__s3_xml_text(r->body.p, r->body.len, "Code", code, sizeof(code));
        r->err = rio__s3_map_http(r->rsp.status, code);
        if (!r->err)
            r->err = RIO_EPROTO;
        r->answered = true;
        /* A request on the bucket itself found none. */
        if (r->err == RIO_ENOTFOUND && !q->key && t->scheme == SCHEME_S3)
            r->err = RIO_ENOCONTAINER;
        else if (r->err == RIO_ENOTFOUND && t->scheme == SCHEME_S3 && !strcmp(q->method, "HEAD"))
            head_404_bucket(t, md, r);
    } else if (rc == CURLE_ABORTED_BY_CALLBACK && cx && rio__cancel_fired(cx)) {
        r->err = RIO_ECANCELED; /* meta_progress: the call was cancelled */
    } else if (rc != CURLE_OK) {
        r->err = r->body.nomem      ? -ENOMEM
                 : r->body.overflow ? RIO_EPROTO
                                    : rio__s3_map_curl(rc, oserr, &r->rsp);
    } else if (t->scheme == SCHEME_S3) {
        atomic_store(&t->bucket_seen_ns, rio__now_ns());
    }
    if (!r->err && r->rsp.status == 200 && r->body.p && !strcmp(q->method, "POST") &&
        memmem(r->body.p, r->body.len, "<Error>", 7)) {
        /* S3 may answer CompleteMultipartUpload 200 and fail in the body. */
        rio__s3_xml_text(r->body.p, r->body.len, "Code", code, sizeof(code));
        r->err = rio__s3_map_http(500, code);
        r->answered = true;
    }
    if (r->err)
        meta_detail(t, q, r, errbuf);
    /* A 404 is an answer, not a trouble worth a log line. */
    if (r->err && !(r->rsp.status == 404 && !strcmp(q->method, "HEAD")))
        rio__s3_debug_log(t, q->method, url, r->rsp.status, r->body.p, r->body.len, r->err, errbuf);
    return r->err;
}

/*
 * One metadata request, one try: retry is the engine's (each op returns a
 * retryable class only when repeating it is safe: transport.h). r must
 * start zeroed (or hold a previous reply, which is freed); the caller cleans
 * it up.
 */
int rio__s3_meta_do(struct s3_transport *t, const struct meta_req *q, struct meta_rsp *r)
{
    EVP_MD_CTX *md = EVP_MD_CTX_new();
    int ret;

    if (!md)
        return -ENOMEM;
    ret = meta_once(t, md, q, r);
    EVP_MD_CTX_free(md);
    return ret;
}

void rio__s3_delete_key(struct s3_transport *t, const char *key)
{
    struct meta_req q = {.method = "DELETE", .key = key, .cleanup = true};
    struct meta_rsp r = {0};

    rio__s3_meta_do(t, &q, &r);
    rio__s3_meta_rsp_cleanup(&r);
}

/* HEAD key: the railio id and whether it has a sidecar. 0, RIO_ENOTFOUND or an error. */
int rio__s3_head_id(struct s3_transport *t, const char *key, char id[24], bool *sidecar,
                    struct s3_gen *g)
{
    struct meta_req q = {.method = "HEAD", .key = key};
    struct meta_rsp r = {0};
    int ret = rio__s3_meta_do(t, &q, &r);

    if (ret == 0) {
        rio__s3_copy_str(id, 24, r.rsp.m_id, strlen(r.rsp.m_id));
        *sidecar = !strcmp(r.rsp.m_v, S3_FORMAT) && !strcmp(r.rsp.m_sidecar, "1");
        if (g)
            rio__s3_rsp_gen(&r.rsp, r.rsp.clen, g);
    }
    rio__s3_meta_rsp_cleanup(&r);
    return ret;
}

int rio__s3_match_etag(struct s3_transport *t, const char *key, uint64_t gen, char id[24],
                       bool *sidecar, struct s3_gen *g)
{
    int ret = rio__s3_head_id(t, key, id, sidecar, g);

    if (ret < 0)
        return ret;
    if (g->gen != gen)
        return RIO_EGENERATION;
    if (g->lastmod || !g->etag[0]) {
        rio__detail("s3: the object has no ETag to match (If-Match): nothing was sent");
        return RIO_ENOTSUP;
    }
    return 0;
}

/* A size and chunk the engine accepts (core/desc.c): only then can a chunk
 * checksum list be missing rather than the whole descriptor wrong. */
static bool sane_geometry(uint64_t size, uint64_t chunk)
{
    return size <= (uint64_t)INT64_MAX && chunk >= RIO__DESC_CHUNK_MIN &&
           chunk <= RIO__DESC_CHUNK_MAX && rio__s3_nchunks(size, chunk) <= RIO__DESC_CHUNKS_MAX;
}

/* Looks at an object whose sidecar does not match its HEAD: another PUT
 * replaced it between the two requests (a race, not a transient error: the
 * engine's retry does not cover it), so HEAD and sidecar are read again. */
#define S3_LOOKUP_RACE_LOOKS 3

/* A plain 32-hex ETag (one PutObject: the MD5 of the bytes) into md5, in
 * lower case, else "" (also for an object encrypted with SSE-KMS or SSE-C,
 * whose ETag is no MD5 of its bytes). */
static void etag_md5(const struct s3_rsp *r, char md5[33])
{
    const char *etag = r->etag;
    md5[0] = '\0';
    if (!r->etag_no_md5 && strlen(etag) == 34 && etag[0] == '"' && etag[33] == '"' &&
        rio__s3_is_hex(etag + 1, 32)) {
        for (int i = 0; i < 32; i++)
            md5[i] = (char)tolower((unsigned char)etag[1 + i]);
        md5[32] = '\0';
    }
}

void rio__s3_rsp_kind(const struct s3_rsp *r, uint64_t size, uint64_t *chunk, bool *sidecar,
                      char md5[33])
{
    /* A streamed multipart object has no size in its metadata (it was
     * unknown when the upload began): its sidecar checks the size. */
    bool streamed = !r->m_size[0] && !strcmp(r->m_sidecar, "1");
    uint64_t xsize;

    *sidecar = false;
    if (strcmp(r->m_v, S3_FORMAT) != 0 || !r->m_id[0] || rio__s3_parse_u64(r->m_chunk, chunk) < 0 ||
        *chunk == 0 || (!streamed && (rio__s3_parse_u64(r->m_size, &xsize) < 0 || xsize != size))) {
        /* Not written by railio (or not in a format we know). */
        *chunk = 0;
        etag_md5(r, md5);
        return;
    }
    md5[0] = '\0';
    *sidecar = !strcmp(r->m_sidecar, "1");
    if (*sidecar)
        return; /* the MD5 is the sidecar's */
    if (strlen(r->m_md5) == 32 && rio__s3_is_hex(r->m_md5, 32))
        memcpy(md5, r->m_md5, 33);
    else
        etag_md5(r, md5); /* one PutObject: its ETag is the MD5 of its bytes */
}

/* Whether an answer that says 0 bytes (r, md5 as rio__s3_rsp_kind gave it)
 * is of an empty object by its ETag (the MD5 of nothing, where t takes
 * ETags for MD5s: not with etag_check=0, nor on http://) and its railio
 * metadata (no size, or 0). */
static bool empty_ok(const struct s3_transport *t, const struct s3_rsp *r, const char *md5)
{
    uint64_t n;

    if (t->base.foreign_etag_md5 && md5[0] && strcmp(md5, "d41d8cd98f00b204e9800998ecf8427e") != 0)
        return false;
    return strcmp(r->m_v, S3_FORMAT) != 0 || !r->m_size[0] ||
           (rio__s3_parse_u64(r->m_size, &n) == 0 && n == 0);
}

int rio__s3_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct meta_rsp r = {0}, sr = {0};
    uint64_t size = 0, chunk = 0;
    uint64_t *xxh = NULL;
    bool sidecar;
    char md5[33] = "", skey[RIO_KEY_MAX + 1];
    struct s3_gen g;
    size_t klen;
    int ret = 0;

    if (!out || rio__key_len(key, &klen) < 0)
        return RIO_EINVAL;
    for (int look = 0; look < S3_LOOKUP_RACE_LOOKS; look++) {
        struct meta_req q = {.method = "HEAD", .key = key};

        if (rio__s3_ask_checksum(t))
            q.x[q.nx++] = (struct rio_s3_kv){"x-amz-checksum-mode", "ENABLED"};
        rio__free(xxh);
        xxh = NULL;
        md5[0] = '\0';
        chunk = 0;
        ret = rio__s3_meta_do(t, &q, &r);
        if (ret == -EACCES && q.nx) {
            /* S3 refuses the checksum of an object encrypted with SSE-KMS
             * to whoever may not use the key (kms:Decrypt), and a HEAD has
             * no body to say so: asked again without it, a stat or an
             * existence check of such an object works as it did. */
            q.nx = 0;
            ret = rio__s3_meta_do(t, &q, &r);
        }
        if (ret < 0)
            goto out;
        if (!r.rsp.have_clen) {
            ret = RIO_EPROTO;
            goto out;
        }
        size = r.rsp.clen;
        rio__s3_rsp_gen(&r.rsp, size, &g);
        rio__s3_rsp_kind(&r.rsp, size, &chunk, &sidecar, md5);
        if (size == 0 && !empty_ok(t, &r.rsp, md5)) {
            /* Nothing checks an empty object: one the answer's own ETag or
             * railio metadata says is not (a proxy that zeroes a HEAD's
             * Content-Length, a HEAD has no body) is no empty object. */
            rio__detail("s3: a HEAD says 0 bytes, its ETag or railio metadata another size");
            ret = RIO_ESERVER;
            goto out;
        }
        if (!chunk)
            break; /* not written by railio */
        if (!sidecar) {
            ret = rio__s3_parse_xxh_list(r.rsp.m_xxh, rio__s3_nchunks(size, chunk), &xxh);
            if (ret == -ENOMEM)
                goto out;
            /* Written by railio, but its chunk checksums are missing or
             * damaged (a proxy that drops metadata, a hand-made copy):
             * nothing vouches for its bytes, as for a multipart object
             * without its sidecar. (Impossible geometry is left to the
             * engine's descriptor check: RIO_EPROTO naming the field.) */
            if (ret < 0 && !t->verify_off && sane_geometry(size, chunk)) {
                /* The key may come from a listing (cp -r): the server's
                 * escape sequences and newlines are not written out. */
                fprintf(stderr,
                        "railio s3: %s: the chunk checksums of this object "
                        "(x-amz-meta-railio-xxh) are missing or damaged; verify=off reads it "
                        "unverified\n",
                        rio__s3_shown(key, skey, sizeof(skey)));
                ret = RIO_ECHECKSUM;
                goto out;
            }
            if (ret < 0)
                md5[0] = '\0'; /* read unverified: no digest vouched for */
            ret = 0;
            break;
        }
        /* Multipart: the list is in the sidecar named by the upload id. */
        ret = rio__s3_sidecar_key(key, r.rsp.m_id, skey, sizeof(skey));
        if (ret < 0)
            goto out;
        struct meta_req sq = {.method = "GET", .key = skey};
        ret = rio__s3_meta_do(t, &sq, &sr);
        if (ret == 0)
            ret = rio__s3_sidecar_parse(sr.body.p, sr.body.len, r.rsp.m_id, size, chunk, md5, &xxh);
        rio__s3_meta_rsp_cleanup(&sr);
        if (ret == -ENOMEM)
            goto out;
        if (ret == 0)
            break;
        /* A sidecar the server could not send now (a reset, a 503): the
         * lookup fails with its class, and the engine tries it again. */
        if (rio__s3_retryable(ret))
            goto out;
        /* Missing or not ours: the object may have been replaced since the
         * HEAD (then look again), or its sidecar was removed or damaged.
         * Then nothing vouches for its bytes (a multipart ETag is no digest
         * of them): it is refused, unless the caller turned verification
         * off, when it is read without checksums. */
        if (look == S3_LOOKUP_RACE_LOOKS - 1) {
            if (!t->verify_off) {
                fprintf(stderr,
                        "railio s3: %s: the checksum sidecar of this multipart object is "
                        "missing or damaged; verify=off reads it unverified\n",
                        rio__s3_shown(key, skey, sizeof(skey)));
                ret = RIO_ECHECKSUM;
                goto out;
            }
            ret = 0;
            md5[0] = '\0';
            break;
        }
    }
    rio__s3_gen_put(t, &g);
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, klen + 1);
    out->generation = g.gen;
    out->size = size;
    out->chunk_size = chunk;
    out->nchunks = chunk ? rio__s3_nchunks(size, chunk) : 0;
    out->xxh = xxh;
    xxh = NULL;
    memcpy(out->etag, md5, sizeof(md5));
    ret = 0;
out:
    rio__free(xxh);
    rio__s3_meta_rsp_cleanup(&r);
    return ret;
}

/* HEAD key?partNumber=n of generation g: 0 with the part's size and the
 * object's part count (0: the server did not say: it ignores partNumber),
 * or an error. */
static int head_part(struct s3_transport *t, const char *key, const struct s3_gen *g, uint32_t n,
                     uint64_t *size, uint32_t *count)
{
    char num[16];
    snprintf(num, sizeof(num), "%" PRIu32, n);
    struct meta_req q = {.method = "HEAD", .key = key, .nq = 1, .nx = 1};
    q.q[0] = (struct rio_s3_kv){"partNumber", num};
    q.x[0] = (struct rio_s3_kv){"If-Match", g->etag};
    struct meta_rsp r = {0};
    int ret = rio__s3_meta_do(t, &q, &r);

    if (ret == 0 && !r.rsp.have_clen)
        ret = RIO_EPROTO;
    if (ret == 0) {
        *size = r.rsp.clen;
        *count = r.rsp.mp_parts;
    }
    rio__s3_meta_rsp_cleanup(&r);
    return ret;
}

bool rio__s3_ask_checksum(const struct s3_transport *t)
{
    return t->base.foreign_etag_md5 && !t->verify_off;
}

int rio__s3_full_checksum(struct rio_transport *tt, const struct rio_desc *d, int *algo,
                          uint64_t *value)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_gen g;

    /* Not by a generation that is a Last-Modified date (a weak ETag, or
     * none): every object written in that second has it, under any key,
     * and the table's entry is the last one looked up, whose checksum is
     * of other bytes. */
    if (!rio__s3_ask_checksum(t) || !d->size || !rio__s3_gen_get(t, d->generation, &g) ||
        g.lastmod || g.ck_algo == RIO_S3_CK_NONE)
        return RIO_ENOTSUP;
    *algo = g.ck_algo == RIO_S3_CK_CRC64NVME ? RIO__CK_CRC64NVME
            : g.ck_algo == RIO_S3_CK_CRC32C  ? RIO__CK_CRC32C
                                             : RIO__CK_CRC32;
    *value = g.ck_value;
    return 0;
}

/* d's generation in the table (g), looked up again when its slot went to
 * another generation since d was read (a descriptor read after lookups of
 * other objects): 0, RIO_ENOTSUP when the key holds another generation
 * now (its reads fail RIO_EGENERATION), or the lookup's error. */
static int gen_of_desc(struct s3_transport *t, const struct rio_desc *d, struct s3_gen *g)
{
    struct rio_desc now;
    int ret;

    if (rio__s3_gen_get(t, d->generation, g))
        return 0;
    memset(&now, 0, sizeof(now));
    ret = rio__s3_lookup(&t->base, d->key, &now);
    rio__free(now.xxh);
    if (ret < 0)
        return ret;
    return now.generation == d->generation && rio__s3_gen_get(t, d->generation, g) ? 0
                                                                                   : RIO_ENOTSUP;
}

int rio__s3_parts_of(struct rio_transport *tt, const struct rio_desc *d, uint64_t *part,
                     uint32_t *nparts, char want[48])
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_gen g;
    uint64_t n = 0, p1, pn;
    uint32_t c1, cn;
    int ret;

    /* Its ETag, "MD5-N": the MD5 of the MD5s of N parts; not so for one
     * encrypted with SSE-KMS or SSE-C (as for one put whole: etag_md5). */
    if (t->scheme != SCHEME_S3 || atomic_load(&t->no_part_numbers) || !d->size)
        return RIO_ENOTSUP;
    ret = gen_of_desc(t, d, &g);
    if (ret < 0) {
        if (ret != -ENOMEM && !rio__s3_retryable(ret))
            rio__detail_clear(); /* the GET goes on, unchecked: not its error */
        return ret;
    }
    if (g.lastmod || g.etag_no_md5)
        return RIO_ENOTSUP;
    size_t len = strlen(g.etag);
    n = rio__s3_etag_parts(g.etag);
    if (!n)
        return RIO_ENOTSUP;
    /* Every part but the last of one size, as every S3 client uploads
     * them: part 1's size, checked against the object's and the last
     * part's; anything else is read unchecked rather than refused. */
    p1 = d->size;
    if (n > 1) {
        ret = head_part(t, d->key, &g, 1, &p1, &c1);
        if (ret == 0 && c1 == 0) {
            atomic_store(&t->no_part_numbers, true); /* it ignores partNumber: ask no more */
            ret = RIO_ENOTSUP;
        }
        if (ret == 0 &&
            (c1 != n || p1 == 0 || p1 > d->size / (n - 1) || (d->size - 1) / p1 + 1 != n))
            ret = RIO_ENOTSUP;
        if (ret == 0)
            ret = head_part(t, d->key, &g, (uint32_t)n, &pn, &cn);
        if (ret == 0 && (cn != n || pn != d->size - (n - 1) * p1))
            ret = RIO_ENOTSUP;
        if (ret < 0) {
            /* The GET goes on, unchecked: nothing of this is its error. */
            rio__detail_clear();
            return ret;
        }
    }
    *part = p1;
    *nparts = (uint32_t)n;
    for (size_t i = 0; i < len - 2; i++)
        want[i] = (char)tolower((unsigned char)g.etag[1 + i]);
    want[len - 2] = '\0';
    return 0;
}

int rio__s3_parts_even(struct rio_transport *tt, const struct rio_desc *d, uint64_t part,
                       uint32_t nparts)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    struct s3_gen g;
    uint64_t size;
    uint32_t count;
    int ret = 0;

    if (!rio__s3_gen_get(t, d->generation, &g) || g.lastmod)
        return RIO_ENOTSUP;
    for (uint32_t k = 2; ret == 0 && k < nparts; k++) {
        ret = head_part(t, d->key, &g, k, &size, &count);
        if (ret == 0 && count != nparts)
            ret = RIO_ENOTSUP;
        if (ret == 0 && size != part)
            return 1; /* a part of another size: the cut was not the upload's */
    }
    if (ret < 0)
        rio__detail_clear(); /* not the GET's error */
    return ret;
}

/* A GET of a buffer of cap bytes goes as one ranged GET, no HEAD first,
 * on an s3:// transport with get_one (data.c, check_one_rsp). */
bool rio__s3_get_one(struct rio_transport *tt, const char *key, uint64_t cap)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    size_t klen;

    return t->scheme == SCHEME_S3 && t->get_one && !t->discard && cap > 0 &&
           rio__key_len(key, &klen) == 0;
}

int rio__s3_remove(struct rio_transport *tt, const char *key)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    char id[24], id2[24], skey[RIO_KEY_MAX + 1];
    struct meta_req q = {.method = "DELETE", .key = key};
    struct meta_rsp r = {0};
    bool sidecar = false, sidecar2, answered;
    size_t klen;
    int ret;

    if (t->scheme != SCHEME_S3)
        return RIO_ENOTSUP;
    if (rio__key_len(key, &klen) < 0)
        return RIO_EINVAL;
    /* S3 answers DELETE 204 whether or not the key exists: ask first. */
    ret = rio__s3_head_id(t, key, id, &sidecar, NULL);
    if (ret < 0)
        return ret;
    ret = rio__s3_meta_do(t, &q, &r);
    answered = r.answered;
    rio__s3_meta_rsp_cleanup(&r);
    /* A DELETE whose answer was lost may have taken effect, and the
     * engine's next try would then find no key (RIO_ENOTFOUND for a key
     * that was there): the key gone now is this remove done. */
    if (ret < 0 && !answered && rio__s3_head_id(t, key, id2, &sidecar2, NULL) == RIO_ENOTFOUND)
        ret = 0;
    if (ret < 0)
        return ret;
    if (sidecar && id[0] && rio__s3_sidecar_key(key, id, skey, sizeof(skey)) == 0)
        rio__s3_delete_key(t, skey);
    return 0;
}

/*
 * rio_delete_if: one HEAD finds the key's generation (RIO_ENOTFOUND when
 * there is none, RIO_EGENERATION when it holds another), then DELETE with
 * If-Match: its ETag, which the server decides with the delete (S3 since
 * 2025, railiod's gateway): a PUT between the two is left whole (412:
 * RIO_EGENERATION). Only where the server is known to decide it (knob
 * conditional), as for conditional PUTs: one that ignores If-Match would
 * delete whatever is there.
 */
int rio__s3_remove_if(struct rio_transport *tt, const char *key, uint64_t gen)
{
    struct s3_transport *t = (struct s3_transport *)tt;
    char id[24], id2[24], skey[RIO_KEY_MAX + 1];
    struct meta_req q = {.method = "DELETE", .key = key};
    struct meta_rsp r = {0};
    struct s3_gen g = {0}, g2 = {0};
    bool sidecar = false, sidecar2, answered;
    size_t klen;
    int ret;

    if (t->scheme != SCHEME_S3)
        return RIO_ENOTSUP;
    if (rio__key_len(key, &klen) < 0 || !gen)
        return RIO_EINVAL;
    if (!t->conditional) {
        rio__detail("s3: this server is not known to decide If-Match on DELETE "
                    "(conditional=on says it does): nothing was sent");
        return RIO_ENOTSUP;
    }
    ret = rio__s3_match_etag(t, key, gen, id, &sidecar, &g);
    if (ret < 0)
        return ret;
    q.x[q.nx++] = (struct rio_s3_kv){"if-match", g.etag};
    ret = rio__s3_meta_do(t, &q, &r);
    answered = r.answered;
    rio__s3_meta_rsp_cleanup(&r);
    /* A key gone since the HEAD (404) was removed by another: not this
     * generation's removal, but nothing of it is left either. */
    if (ret == RIO_ENOTFOUND)
        return RIO_ENOTFOUND;
    /* The answer lost: done when the key is gone or holds another object
     * (the delete took it first); else unknown. */
    if (ret < 0 && !answered) {
        int h = rio__s3_head_id(t, key, id2, &sidecar2, &g2);
        if (h == RIO_ENOTFOUND)
            ret = 0;
        else if (h == 0 && g2.gen == gen)
            ret = RIO_EUNKNOWN;
    }
    if (ret < 0)
        return ret;
    if (sidecar && id[0] && rio__s3_sidecar_key(key, id, skey, sizeof(skey)) == 0)
        rio__s3_delete_key(t, skey);
    return 0;
}
