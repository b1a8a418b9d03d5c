/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The aws-chunked body decoder (s3.h): a byte-at-a-time state machine over
 * whatever slices the connection hands in, so a chunk line or a CRLF split
 * across two reads is no special case and nothing is buffered but one
 * bounded line.
 *
 * STREAMING-AWS4-HMAC-SHA256-PAYLOAD: each chunk is
 *   HEX-SIZE;chunk-signature=SIG\r\nDATA\r\n
 * and SIG signs, under the request's signing key, the string
 *   AWS4-HMAC-SHA256-PAYLOAD\nDATE\nSCOPE\nPREVIOUS-SIG\nSHA256("")\nSHA256(DATA)
 * chained from the seed (the Authorization header's signature); the body
 * ends with a signed chunk of size 0, so a truncated body never verifies.
 *
 * STREAMING-UNSIGNED-PAYLOAD-TRAILER: chunks are HEX-SIZE\r\nDATA\r\n, the
 * last is 0\r\n, then trailer lines (the x-amz-checksum-* the x-amz-trailer
 * header announced, checked against the payload) and an empty line.
 * STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER: signed chunks, the final one
 * followed by the trailer lines and x-amz-trailer-signature, which signs
 *   AWS4-HMAC-SHA256-TRAILER\nDATE\nSCOPE\nFINAL-CHUNK-SIG\nSHA256(TRAILER LINES)
 */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>

#include "core/alloc.h"
#include "core/url.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "transport/s3/sign.h"

#define LINE_MAX_ 256          /* a chunk line or a trailer line */
#define CHUNK_MAX (1ull << 40) /* bytes one chunk may announce */
#define SIG_PREFIX ";chunk-signature="

enum state { ST_LINE, ST_DATA, ST_CR, ST_LF, ST_TRAILER, ST_DONE, ST_ERR };

#define TRAILERS_MAX 512 /* the canonical trailer lines a trailer signature signs */

struct rio_s3_chunked {
    int mode;
    enum state st;
    uint8_t key[32];
    char prev[65];
    char amz_date[17];
    char scope[128];
    char trailer[40];
    char tvalue[64];         /* the trailer checksum's value, once checked */
    EVP_MD_CTX *m;           /* HMACs */
    EVP_MD_CTX *data;        /* this chunk's SHA-256 */
    struct rio_s3_check *ck; /* the trailer's checksum over the whole payload */
    char line[LINE_MAX_ + 1];
    size_t ll;
    uint64_t left;
    int final;
    int trailer_seen;
    int signed_chunks; /* chunk signatures (the STREAMING-AWS4-HMAC-SHA256-* modes) */
    int trailer_sig;   /* x-amz-trailer-signature verified (the signed-trailer mode) */
    char canon[TRAILERS_MAX];
    size_t cl;
    char sig[65];
    uint64_t total;
    const char *code;
};

void rio_s3_chunked_free(struct rio_s3_chunked *d)
{
    if (!d)
        return;
    EVP_MD_CTX_free(d->m);
    EVP_MD_CTX_free(d->data);
    rio_s3_check_free(d->ck);
    OPENSSL_cleanse(d->key, sizeof(d->key));
    rio__free(d);
}

int rio_s3_chunked_new(const struct rio_s3_auth *a, struct rio_s3_chunked **out)
{
    struct rio_s3_chunked *d;

    if (!a || (a->payload_mode != RIO_S3_PAYLOAD_STREAMING &&
               a->payload_mode != RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER &&
               a->payload_mode != RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER))
        return RIO_EINVAL;
    d = rio__calloc(1, sizeof(*d));
    if (!d)
        return -ENOMEM;
    d->mode = a->payload_mode;
    d->signed_chunks = d->mode != RIO_S3_PAYLOAD_STREAMING_UNSIGNED_TRAILER;
    d->st = ST_LINE;
    memcpy(d->key, a->signing_key, sizeof(d->key));
    memcpy(d->prev, a->seed_signature, sizeof(d->prev));
    d->prev[64] = '\0';
    memcpy(d->amz_date, a->amz_date, sizeof(d->amz_date));
    d->amz_date[16] = '\0';
    memcpy(d->scope, a->scope, sizeof(d->scope));
    d->scope[sizeof(d->scope) - 1] = '\0';
    memcpy(d->trailer, a->trailer, sizeof(d->trailer));
    d->trailer[sizeof(d->trailer) - 1] = '\0';
    d->m = EVP_MD_CTX_new();
    d->data = EVP_MD_CTX_new();
    if (!d->m || !d->data) {
        rio_s3_chunked_free(d);
        return -ENOMEM;
    }
    if (d->mode != RIO_S3_PAYLOAD_STREAMING && d->trailer[0]) {
        const char *code;
        int ret = rio_s3_check_new(d->trailer, NULL, &d->ck, &code);
        if (ret < 0) {
            rio_s3_chunked_free(d);
            return ret;
        }
    }
    *out = d;
    return 0;
}

static ssize_t fail(struct rio_s3_chunked *d, const char *code, const char **s3_code)
{
    d->st = ST_ERR;
    d->code = code;
    *s3_code = code;
    return code[0] == 'S' ? -EACCES : -EINVAL;
}

/* A chunk line, without its CRLF: the size (strict hex, no sign, no
 * blanks, 1 to 11 digits) and, when signed, its signature. 0 or -1. */
static int chunk_line(struct rio_s3_chunked *d)
{
    size_t i = 0;
    uint64_t v = 0;

    while (i < d->ll && i < 12) {
        int h = rio__hex_digit(d->line[i]);
        if (h < 0)
            break;
        v = v << 4 | (uint64_t)h;
        i++;
    }
    if (i == 0 || i > 11 || v > CHUNK_MAX)
        return -1;
    if (d->signed_chunks) {
        if (d->ll - i != strlen(SIG_PREFIX) + 64 ||
            memcmp(d->line + i, SIG_PREFIX, strlen(SIG_PREFIX)) != 0)
            return -1;
        memcpy(d->sig, d->line + i + strlen(SIG_PREFIX), 64);
        d->sig[64] = '\0';
        for (int k = 0; k < 64; k++)
            if (!((d->sig[k] >= '0' && d->sig[k] <= '9') || (d->sig[k] >= 'a' && d->sig[k] <= 'f')))
                return -1;
    } else if (i != d->ll) {
        return -1;
    }
    d->left = v;
    d->final = v == 0;
    return 0;
}

/* The chunk just read matches its signature; it becomes the previous one. */
static int chunk_verify(struct rio_s3_chunked *d)
{
    uint8_t h[32];
    char hex[65], sts[512], sig[65];
    unsigned len = 0;
    int w;

    if (EVP_DigestFinal_ex(d->data, h, &len) != 1 || len != 32)
        return -1;
    rio__s3_hex(h, 32, hex);
    w = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-PAYLOAD\n%s\n%s\n%s\n%s\n%s", d->amz_date,
                 d->scope, d->prev, RIO_S3_EMPTY_SHA256, hex);
    if (w < 0 || (size_t)w >= sizeof(sts) || rio__s3_sign_sts(d->m, d->key, sts, sig))
        return -1;
    if (CRYPTO_memcmp(sig, d->sig, 64) != 0)
        return -1;
    memcpy(d->prev, d->sig, 65);
    return 0;
}

/* The signed-trailer form's last line: x-amz-trailer-signature signs, chained
 * from the final chunk's signature, the SHA-256 of the trailer lines as
 * "name:value\n". 0 or -1. */
static int trailer_sig_verify(struct rio_s3_chunked *d, const char *sig)
{
    char hex[65], sts[512], want[65];
    int w;

    if (strlen(sig) != 64 || rio__s3_sha256_hex(d->m, d->canon, d->cl, hex))
        return -1;
    w = snprintf(sts, sizeof(sts), "AWS4-HMAC-SHA256-TRAILER\n%s\n%s\n%s\n%s", d->amz_date,
                 d->scope, d->prev, hex);
    if (w < 0 || (size_t)w >= sizeof(sts) || rio__s3_sign_sts(d->m, d->key, sts, want))
        return -1;
    return CRYPTO_memcmp(want, sig, 64) == 0 ? 0 : -1;
}

/* A trailer line: "x-amz-checksum-ALGO:BASE64", the one x-amz-trailer
 * announced, checked against the payload; in the signed-trailer form then
 * "x-amz-trailer-signature:SIG" over the lines before it. */
static const char *trailer_line(struct rio_s3_chunked *d)
{
    char *colon, *v;
    const char *code;
    int w;

    d->line[d->ll] = '\0';
    colon = strchr(d->line, ':');
    if (!colon || d->trailer_sig)
        return "InvalidRequest";
    *colon = '\0';
    v = colon + 1;
    while (*v == ' ')
        v++;
    if (d->mode == RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER &&
        strcasecmp(d->line, "x-amz-trailer-signature") == 0) {
        if (trailer_sig_verify(d, v) < 0)
            return "SignatureDoesNotMatch";
        d->trailer_sig = 1;
        return NULL;
    }
    if (d->trailer_seen || !d->trailer[0] || strcasecmp(d->line, d->trailer) != 0 || !d->ck)
        return "InvalidRequest";
    d->trailer_seen = 1;
    w = snprintf(d->canon + d->cl, sizeof(d->canon) - d->cl, "%s:%s\n", d->trailer, v);
    if (w < 0 || (size_t)w >= sizeof(d->canon) - d->cl)
        return "InvalidRequest";
    d->cl += (size_t)w;
    if (rio__s3_check_expect(d->ck, v, &code) < 0 || rio_s3_check_done(d->ck, &code) < 0)
        return code;
    snprintf(d->tvalue, sizeof(d->tvalue), "%s", v);
    return NULL;
}

const char *rio_s3_chunked_trailer(const struct rio_s3_chunked *d, const char **value)
{
    if (!d || !d->trailer_seen || !d->tvalue[0])
        return NULL;
    *value = d->tvalue;
    return d->trailer;
}

ssize_t rio_s3_chunked_feed(struct rio_s3_chunked *d, const void *in, size_t n, size_t *consumed,
                            void *out, size_t cap, const char **s3_code)
{
    const uint8_t *p = in;
    uint8_t *o = out;
    size_t i = 0, w = 0;

    *consumed = 0;
    *s3_code = NULL;
    if (d->st == ST_ERR) {
        *s3_code = d->code;
        return d->code[0] == 'S' ? -EACCES : -EINVAL;
    }
    while (i < n) {
        switch (d->st) {
        case ST_LINE:
        case ST_TRAILER:
            if (p[i] != '\n') {
                if (d->ll == LINE_MAX_)
                    return fail(d, "InvalidRequest", s3_code);
                d->line[d->ll++] = (char)p[i++];
                break;
            }
            i++;
            if (d->ll == 0 || d->line[d->ll - 1] != '\r')
                return fail(d, "InvalidRequest", s3_code);
            d->ll--;
            if (d->st == ST_TRAILER) {
                const char *code;
                if (d->ll == 0) {
                    if ((d->trailer[0] && !d->trailer_seen) ||
                        (d->mode == RIO_S3_PAYLOAD_STREAMING_SIGNED_TRAILER && !d->trailer_sig))
                        return fail(d, "InvalidRequest", s3_code);
                    d->st = ST_DONE;
                    break;
                }
                code = trailer_line(d);
                d->ll = 0;
                if (code)
                    return fail(d, code, s3_code);
                break;
            }
            if (chunk_line(d) < 0)
                return fail(d, "InvalidRequest", s3_code);
            d->ll = 0;
            if (EVP_DigestInit_ex(d->data, EVP_sha256(), NULL) != 1)
                return fail(d, "InternalError", s3_code);
            if (d->final && d->signed_chunks && chunk_verify(d) < 0)
                return fail(d, "SignatureDoesNotMatch", s3_code);
            if (d->final && d->mode != RIO_S3_PAYLOAD_STREAMING) {
                d->st = ST_TRAILER;
                break;
            }
            d->st = d->left ? ST_DATA : ST_CR;
            break;
        case ST_DATA: {
            size_t k = n - i;
            if (k > d->left)
                k = (size_t)d->left;
            if (k > cap - w)
                k = cap - w;
            if (k == 0)
                goto out;
            memcpy(o + w, p + i, k);
            if (d->signed_chunks && EVP_DigestUpdate(d->data, p + i, k) != 1)
                return fail(d, "InternalError", s3_code);
            if (d->ck && rio_s3_check_update(d->ck, p + i, k) < 0)
                return fail(d, "InternalError", s3_code);
            i += k;
            w += k;
            d->left -= k;
            d->total += k;
            if (d->left == 0) {
                d->st = ST_CR;
                if (d->signed_chunks && chunk_verify(d) < 0)
                    return fail(d, "SignatureDoesNotMatch", s3_code);
            }
            break;
        }
        case ST_CR:
            if (p[i++] != '\r')
                return fail(d, "InvalidRequest", s3_code);
            d->st = ST_LF;
            break;
        case ST_LF:
            if (p[i++] != '\n')
                return fail(d, "InvalidRequest", s3_code);
            d->st = d->final ? ST_DONE : ST_LINE;
            break;
        case ST_DONE:
            return fail(d, "InvalidArgument", s3_code);
        case ST_ERR:
            break;
        }
    }
out:
    *consumed = i;
    return (ssize_t)w;
}

int rio_s3_chunked_done(const struct rio_s3_chunked *d)
{
    return d && d->st == ST_DONE;
}

uint64_t rio_s3_chunked_total(const struct rio_s3_chunked *d)
{
    return d ? d->total : 0;
}
