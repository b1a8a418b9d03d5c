/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The chunk checksums of an object railio wrote: the inline list of its
 * metadata (x-amz-meta-railio-xxh, one PutObject) and the sidecar object of
 * a multipart one (KEY.railio-ID; the format is in docs/s3.md), written and
 * read here. Reads hostile bytes; no libcurl (tests/unit/test_s3_parse.c,
 * tests/fuzz/fuzz_sidecar.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "railio.h"
#include "transport/s3/parse.h"

int rio__s3_sidecar_key(const char *key, const char *id, char *out, size_t cap)
{
    /* The id comes from the object's metadata (x-amz-meta-railio-id), which
     * whoever wrote the object chose: only the 16 hex digits railio writes
     * name a sidecar. "/../../victim" made `rm` send DELETE
     * KEY.railio-/../../victim, which a server or proxy that folds dot
     * segments takes for another key or a bucket. */
    if (strlen(id) != 16 || !rio__s3_is_hex(id, 16))
        return RIO_EPROTO;
    int w = snprintf(out, cap, "%s%s%s", key, S3_SIDECAR_SUFFIX, id);
    return w < 0 || (size_t)w >= cap || (size_t)w > RIO_KEY_MAX ? RIO_EINVAL : 0;
}

int rio__s3_sidecar_format(const char *id, uint64_t size, uint64_t chunk, const char *md5,
                           uint64_t n, const uint64_t *xxh, char **out, size_t *outlen)
{
    size_t cap, len;
    char *sc;
    int w;

    *out = NULL;
    /* header, n lines of 17, "end" and its sum */
    if (n > (SIZE_MAX - 256 - 32) / 17)
        return RIO_EINVAL;
    cap = 256 + (size_t)n * 17 + 32;
    sc = rio__malloc(cap);
    if (!sc)
        return -ENOMEM;
    w = snprintf(sc, cap,
                 "railio-sidecar 1\nid %s\nsize %" PRIu64 "\nchunk %" PRIu64 "\nmd5 %s\nn %" PRIu64
                 "\n",
                 id, size, chunk, md5[0] ? md5 : "-", n);
    if (w < 0 || (size_t)w >= 256) {
        rio__free(sc);
        return RIO_EINVAL;
    }
    len = (size_t)w;
    for (uint64_t i = 0; i < n; i++)
        len += (size_t)snprintf(sc + len, cap - len, "%016" PRIx64 "\n", xxh[i]);
    len += (size_t)snprintf(sc + len, cap - len, "end %016" PRIx64 "\n", rio__xxh3(sc, len));
    *out = sc;
    *outlen = len;
    return 0;
}

int rio__s3_parse_xxh_list(const char *s, uint64_t n, uint64_t **out)
{
    uint64_t *x;

    *out = NULL;
    if (n == 0)
        return 0;
    /* n from the object's HEAD (size / chunk): n * 16 must not wrap to the
     * list's length (chunk 1, size 2^60 made it 0 == strlen("")). */
    if (n > strlen(s) / 16 || strlen(s) != n * 16 || n > SIZE_MAX / sizeof(*x))
        return RIO_EPROTO;
    x = rio__malloc((size_t)n * sizeof(*x));
    if (!x)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        char h[17];
        memcpy(h, s + i * 16, 16);
        h[16] = '\0';
        if (!rio__s3_is_hex(h, 16)) {
            rio__free(x);
            return RIO_EPROTO;
        }
        x[i] = strtoull(h, NULL, 16);
    }
    *out = x;
    return 0;
}

/*
 * The sidecar of a multipart object (see docs/s3.md):
 *   railio-sidecar 1\n id ID\n size N\n chunk N\n md5 HEX\n n N\n
 *   then n lines of 16 hex digits, then "end XXH\n" where XXH is the xxh3 of
 *   everything before "end".
 */
int rio__s3_sidecar_parse(const char *b, size_t len, const char *id, uint64_t size, uint64_t chunk,
                          char md5[33], uint64_t **xxh)
{
    char sid[24], smd5[40];
    unsigned long long ssize, schunk, n, sum;
    const char *end, *p;
    int off = 0;
    uint64_t *x;

    *xxh = NULL;
    if (!b || len < 8)
        return RIO_EPROTO;
    end = NULL;
    for (p = b; (p = memmem(p, len - (size_t)(p - b), "\nend ", 5)); p++)
        end = p;
    if (!end || sscanf(end + 5, "%16llx", &sum) != 1 ||
        rio__xxh3(b, (size_t)(end - b + 1)) != (uint64_t)sum)
        return RIO_EPROTO;
    if (sscanf(b, "railio-sidecar 1\nid %23s\nsize %llu\nchunk %llu\nmd5 %39s\nn %llu\n%n", sid,
               &ssize, &schunk, smd5, &n, &off) != 5 ||
        off == 0)
        return RIO_EPROTO;
    if (strcmp(sid, id) || ssize != size || schunk != chunk || n != rio__s3_nchunks(size, chunk) ||
        (strcmp(smd5, "-") != 0 && (strlen(smd5) != 32 || !rio__s3_is_hex(smd5, 32))))
        return RIO_EPROTO;
    if (n > len / 17 || (size_t)(end - b + 1 - off) != n * 17)
        return RIO_EPROTO;
    if (n) {
        x = rio__malloc((size_t)n * sizeof(*x));
        if (!x)
            return -ENOMEM;
        for (uint64_t i = 0; i < n; i++) {
            const char *l = b + off + i * 17;
            if (!rio__s3_is_hex(l, 16) || l[16] != '\n') {
                rio__free(x);
                return RIO_EPROTO;
            }
            x[i] = strtoull(l, NULL, 16);
        }
        *xxh = x;
    }
    if (!strcmp(smd5, "-"))
        md5[0] = '\0'; /* written without the stream MD5 (etag=none) */
    else
        memcpy(md5, smd5, 33);
    return 0;
}
