/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Errors at the boundary: a transfer's CURLcode as a railio error (the HTTP
 * status and the S3 <Code> are xml.c's rio__s3_map_http), and the one line
 * RIO_S3_DEBUG=1 writes for each failed request.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/internal.h"
#include "transport/s3/internal.h"

/*
 * A CURLcode as a railio error. Transfer failures that never carried an HTTP
 * status keep their own meaning: refused/unreachable from the socket's errno
 * when curl saw one, resolve failures as RIO_EDNS, stalls and timeouts as
 * ETIMEDOUT, a body cut short as RIO_ESHORT, a connection that died as
 * ECONNRESET. All of those retry; a bad URL, TLS verification or an unknown
 * failure do not.
 */
int rio__s3_map_curl(CURLcode rc, long oserr, const struct s3_rsp *rsp)
{
    /* A response head over curl's limit (100 KiB; a hostile server's
     * endless header line) is the server's fault, not our memory: curl
     * before 8.6 fails it with CURLE_OUT_OF_MEMORY (and no message) once
     * the status line is in, later ones with CURLE_TOO_LARGE. */
    if (rc == CURLE_OUT_OF_MEMORY && rsp && rsp->status)
        return RIO_EPROTO;
#if LIBCURL_VERSION_NUM >= 0x080600
    if (rc == CURLE_TOO_LARGE)
        return RIO_EPROTO;
#endif
    switch (rc) {
    case CURLE_OK:
        return 0;
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_COULDNT_RESOLVE_PROXY:
        return RIO_EDNS;
    case CURLE_COULDNT_CONNECT:
        if (oserr == ENETUNREACH || oserr == EHOSTUNREACH || oserr == ENETDOWN ||
            oserr == EHOSTDOWN || oserr == ETIMEDOUT)
            return -(int)oserr;
        return -ECONNREFUSED;
    case CURLE_OPERATION_TIMEDOUT:
        return -ETIMEDOUT;
    case CURLE_PARTIAL_FILE:
        return RIO_ESHORT;
    case CURLE_SEND_ERROR:
    case CURLE_RECV_ERROR:
        if (oserr == ETIMEDOUT || oserr == ENETUNREACH || oserr == EHOSTUNREACH || oserr == EPIPE ||
            oserr == ECONNABORTED)
            return -(int)oserr;
        return -ECONNRESET;
    case CURLE_GOT_NOTHING:
    case CURLE_SEND_FAIL_REWIND:
    case CURLE_HTTP2:
    case CURLE_HTTP2_STREAM:
    case CURLE_SSL_CONNECT_ERROR:
        return -ECONNRESET;
    /* The server's certificate not trusted (or not the pinned key): as
     * railio:// says it, never a protocol error ("verification failed"
     * is about bytes). A client certificate or CA file it cannot use:
     * TLS set up wrong here. */
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
        return RIO_ETLSVERIFY;
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_ENGINE_NOTFOUND:
    case CURLE_SSL_ENGINE_SETFAILED:
    case CURLE_SSL_ENGINE_INITFAILED:
    case CURLE_SSL_CRL_BADFILE:
        return RIO_ETLS;
    case CURLE_WEIRD_SERVER_REPLY:
    case CURLE_HTTP_RETURNED_ERROR:
        return RIO_ESERVER;
    case CURLE_OUT_OF_MEMORY:
        return -ENOMEM;
    case CURLE_ABORTED_BY_CALLBACK:
        return -ECANCELED;
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
        return RIO_EURL;
    case CURLE_INTERFACE_FAILED:
        return -ENODEV;
    default:
        return RIO_EPROTO;
    }
}

void rio__s3_answer_text(const char *body, size_t len, char code[64], char msg[256])
{
    rio__s3_xml_text(body, len, "Code", code, 64);
    rio__s3_xml_text(body, len, "Message", msg, 256);
    rio__s3_printable(code);
    rio__s3_printable(msg);
}

void rio__s3_debug_log(struct s3_transport *t, const char *method, const char *url, long status,
                       const char *body, size_t blen, int err, const char *curlmsg)
{
    char code[64], msg[256];
    const char *q;
    int ul;

    if (!t->debug)
        return;
    rio__s3_answer_text(body, blen, code, msg);
    /* Without its query (a presigned one holds a signature), and with any
     * user:password@ of the endpoint masked. */
    char shown[1024];
    url = rio__url_redact(url, shown, sizeof(shown));
    q = strchr(url, '?');
    ul = q ? (int)(q - url) : (int)strlen(url);
    fprintf(stderr, "railio s3: %s %.*s%s -> %ld %s%s%s%s%s (%s)\n", method, ul, url,
            q ? "?..." : "", status, code, msg[0] ? ": " : "", msg,
            curlmsg && curlmsg[0] ? " curl: " : "", curlmsg ? curlmsg : "", rio_errname(err));
}

bool rio__s3_retryable(int err)
{
    return err < 0 && rio__class_is_retryable(rio__err_class(err));
}
