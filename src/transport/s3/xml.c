/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The S3 XML answers (an error's <Code> and <Message>, an upload id, a
 * complete's ETag) and the HTTP status and S3 <Code> of a failed request as
 * a railio error. Reads hostile bytes: every length is bounded by the
 * caller's buffers. No allocation, no libcurl (tests/fuzz/fuzz_s3xml.c).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "railio.h"
#include "transport/s3/parse.h"

/* Text between <tag> and </tag> in an XML body, or "" (no entity decoding
 * beyond &quot;, which ETags carry). */
void rio__s3_xml_text(const char *body, size_t len, const char *tag, char *out, size_t cap)
{
    char open[64], close[64];
    const char *b, *e;
    size_t o = 0;

    out[0] = '\0';
    if (!body || !len)
        return;
    snprintf(open, sizeof(open), "<%s>", tag);
    snprintf(close, sizeof(close), "</%s>", tag);
    b = memmem(body, len, open, strlen(open));
    if (!b)
        return;
    b += strlen(open);
    e = memmem(b, len - (size_t)(b - body), close, strlen(close));
    if (!e)
        return;
    while (b < e && o + 1 < cap) {
        if (e - b >= 6 && memcmp(b, "&quot;", 6) == 0) {
            out[o++] = '"';
            b += 6;
        } else if (e - b >= 5 && memcmp(b, "&#34;", 5) == 0) {
            out[o++] = '"';
            b += 5;
        } else {
            out[o++] = *b++;
        }
    }
    out[o] = '\0';
}

/*
 * An HTTP status (and the S3 <Code> from the error body) as a railio error.
 * Retryable: 408, 429, 5xx but 501, and the 400s that S3 uses for transient trouble
 * (RequestTimeout) or for bytes damaged in flight (BadDigest: the part is
 * sent again). Everything else is the caller's or the object's problem and
 * fails the request.
 */
int rio__s3_map_http(long status, const char *code)
{
    if (status >= 200 && status < 300)
        return 0;
    if (!strcmp(code, "SlowDown") || status == 429)
        return RIO_ETHROTTLE;
    /* The server cannot do it at all: asking again will not help. */
    if (status == 501)
        return RIO_ENOTSUP;
    if (status >= 500)
        return RIO_ESERVER;
    /* The server gave up waiting for the request (S3: RequestTimeout): a
     * server-side condition, retried, but the path is not at fault and
     * must not cool down as a timeout would make it. */
    if (!strcmp(code, "RequestTimeout") || status == 408)
        return RIO_ESERVER;
    if (!strcmp(code, "BadDigest") || !strcmp(code, "XAmzContentSHA256Mismatch"))
        return RIO_ECHECKSUM;
    switch (status) {
    case 301:
    case 302:
    case 307:
    case 308:
        return RIO_EURL; /* wrong endpoint or region: S3 redirects */
    case 304:
    case 412:
        return RIO_EGENERATION;
    case 401:
    case 403:
        return -EACCES;
    case 404:
        /* The bucket itself is missing: not the same as a missing key. */
        return !strcmp(code, "NoSuchBucket") ? RIO_ENOCONTAINER : RIO_ENOTFOUND;
    case 410:
        return RIO_ENOTFOUND;
    case 405:
        return RIO_ENOTSUP;
    case 409:
        /* ConditionalRequestConflict: another conditional write of the key
         * was under way; S3 says to try again. */
        return !strcmp(code, "OperationAborted") || !strcmp(code, "ConditionalRequestConflict")
                   ? RIO_ESERVER
                   : -EEXIST;
    case 400:
        return !strcmp(code, "EntityTooSmall") || !strcmp(code, "EntityTooLarge") ||
                       !strcmp(code, "InvalidArgument") || !strcmp(code, "KeyTooLongError")
                   ? RIO_EINVAL
                   : RIO_EPROTO;
    default:
        return RIO_EPROTO;
    }
}
