/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Building a request: its URL (endpoint, bucket, prefix and key, encoded
 * once), its headers as curl_slist nodes over a caller-owned buffer (so a
 * data op sends headers without allocating), its SigV4 signature (sign.c),
 * and the options every easy handle gets.
 */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "transport/s3/internal.h"

/* --------------------------------------------------------- header callback */

void rio__s3_quickack(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_QUICKACK, &one, sizeof(one));
}

/*
 * curl's header callback, one line at a time: each header line into the
 * response. At the blank line that ends them, the connection acknowledges
 * what it received at once (TCP_QUICKACK): a server that writes its headers
 * and a small body separately with Nagle on (radosgw does) holds the body
 * until the headers are acknowledged, and on a kept-alive connection Linux
 * delays that acknowledgement 40 ms, which every small GET on a reused
 * connection (a sidecar after its HEAD, a list page) then waited.
 */
size_t rio__s3_on_header(char *p, size_t sz, size_t nmemb, void *arg)
{
    struct s3_hdr_ctx *h = arg;
    size_t len = sz * nmemb;

    rio__s3_rsp_header(h->rsp, p, len);
    if (h->rsp->status >= 200 && len <= 2 && (len == 0 || p[0] == '\r' || p[0] == '\n')) {
        if (h->fd && *h->fd >= 0)
            rio__s3_quickack(*h->fd);
        else if (h->ack_due)
            *h->ack_due = true;
    }
    return len;
}

/* ---------------------------------------------------------- requests */

void rio__s3_hdrs_init(struct s3_hdrs *h, char *buf, size_t cap)
{
    h->n = 0;
    h->buf = buf;
    h->cap = cap;
    h->used = 0;
    h->nsig = 0;
    h->overflow = false;
}

/* Add "name: value" (sent) and, when sign, (name, value) to the signed set. */
static void hdr_add(struct s3_hdrs *h, const char *name, const char *value, bool sign)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *s;

    /* curl does not send a header without a value: sign none either. */
    if (!vl && sign)
        return;

    if (h->n == S3_NODES || h->cap - h->used < nl + vl + 3 ||
        (sign && h->nsig == RIO_S3_MAX_SIGNED)) {
        h->overflow = true;
        return;
    }
    s = h->buf + h->used;
    memcpy(s, name, nl);
    s[nl] = ':';
    s[nl + 1] = ' ';
    memcpy(s + nl + 2, value, vl + 1);
    h->used += nl + vl + 3;
    h->node[h->n].data = s;
    h->node[h->n].next = NULL;
    if (h->n)
        h->node[h->n - 1].next = &h->node[h->n];
    h->n++;
    if (sign) {
        h->sig[h->nsig].k = name;
        h->sig[h->nsig].v = s + nl + 2;
        h->nsig++;
    }
}

struct curl_slist *rio__s3_hdrs_list(struct s3_hdrs *h)
{
    return h->n ? &h->node[0] : NULL;
}

/*
 * Build the URL and headers of one request into url/h and sign it.
 * key NULL addresses the bucket. query: parameters (canonical form is what
 * goes on the wire). extra: headers to send and sign. payload: the
 * x-amz-content-sha256 value. Returns 0 or RIO_EINVAL (too long).
 */
int rio__s3_req_build(struct s3_transport *t, EVP_MD_CTX *md, const char *method, const char *key,
                      const struct rio_s3_kv *query, unsigned nq, const struct rio_s3_kv *extra,
                      unsigned nx, const char *payload, char *url, size_t urlcap, struct s3_hdrs *h)
{
    char amzdate[17], auth[512 + 256], q[S3_QUERY_MAX];

    q[0] = '\0';
    if (nq && rio__s3_canon_query(query, nq, q, sizeof(q)) < 0)
        return RIO_EINVAL;
    /* Path style names the bucket in the path; virtual-hosted addressing
     * put it in the endpoint's host at open (config.c). */
    if (rio__s3_url(t->endpoint, t->scheme == SCHEME_S3 && !t->vhost ? t->bucket : NULL, t->prefix,
                    key, q, url, urlcap) < 0)
        return RIO_EINVAL;

    hdr_add(h, "host", t->host, true);
    if (t->sign) {
        rio__s3_amzdate(time(NULL), amzdate);
        hdr_add(h, "x-amz-date", amzdate, true);
        hdr_add(h, "x-amz-content-sha256", payload, true);
        if (t->token)
            hdr_add(h, "x-amz-security-token", t->token, true);
    }
    for (unsigned i = 0; i < nx; i++)
        hdr_add(h, extra[i].k, extra[i].v, true);
    /* curl would add "Expect: 100-continue" to large uploads: a round trip
     * per part for nothing. */
    hdr_add(h, "expect", "", false);
    if (h->overflow)
        return RIO_EINVAL;
    if (t->sign) {
        /* The canonical URI is the path as sent: from the first '/' after
         * the scheme's "//", up to the query. */
        const char *path = strchr(strstr(url, "//") + 2, '/');
        char *qm = strchr(path, '?');
        char save = 0;
        int ret;

        if (qm) {
            save = *qm;
            *qm = '\0';
        }
        ret =
            rio__s3_sign(&(struct rio_s3_signer){t->access_key, t->secret_key, t->region, "s3"}, md,
                         method, path, q, h->sig, h->nsig, payload, amzdate, auth, sizeof(auth));
        if (qm)
            *qm = save;
        if (ret < 0)
            return RIO_EINVAL;
        hdr_add(h, "authorization", auth, false);
        if (h->overflow)
            return RIO_EINVAL;
    }
    return 0;
}

/* ---------------------------------------------------- curl handle setup */

static void set_rcvbuf(struct s3_transport *t, curl_socket_t fd, curlsocktype purpose)
{
    if (purpose == CURLSOCKTYPE_IPCXN && t->rcvbuf > 0)
        (void)setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &t->rcvbuf, sizeof(t->rcvbuf));
}

static int sockopt_cb(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    set_rcvbuf(arg, fd, purpose);
    return CURL_SOCKOPT_OK;
}

/* A metadata handle's sockets: which one its connection uses, for the
 * header callback's acknowledgement; forgotten as curl closes it. */
static int meta_sockopt_cb(void *arg, curl_socket_t fd, curlsocktype purpose)
{
    struct s3_meta_h *mh = arg;

    set_rcvbuf(mh->t, fd, purpose);
    if (purpose == CURLSOCKTYPE_IPCXN)
        mh->fd = fd;
    return CURL_SOCKOPT_OK;
}

static int meta_close_cb(void *arg, curl_socket_t fd)
{
    struct s3_meta_h *mh = arg;

    if (mh->fd == fd)
        mh->fd = -1;
    return close(fd);
}

/* rio__s3_easy_common for a metadata handle, which records its socket. */
void rio__s3_easy_meta(struct s3_meta_h *mh, const char *iface)
{
    rio__s3_easy_common(mh->t, mh->e, iface);
    curl_easy_setopt(mh->e, CURLOPT_SOCKOPTFUNCTION, meta_sockopt_cb);
    curl_easy_setopt(mh->e, CURLOPT_SOCKOPTDATA, mh);
    curl_easy_setopt(mh->e, CURLOPT_CLOSESOCKETFUNCTION, meta_close_cb);
    curl_easy_setopt(mh->e, CURLOPT_CLOSESOCKETDATA, mh);
    /* One connection kept: the one mh->fd names (a fresh one closes it). */
    curl_easy_setopt(mh->e, CURLOPT_MAXCONNECTS, 1L);
}

/* Options every handle gets (data and metadata). */
void rio__s3_easy_common(struct s3_transport *t, CURL *e, const char *iface)
{
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_PATH_AS_IS, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION, (long)CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, t->connect_ms);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_LIMIT, t->min_speed);
    curl_easy_setopt(e, CURLOPT_LOW_SPEED_TIME, t->stall_s);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPALIVE, 1L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPIDLE, 5L);
    curl_easy_setopt(e, CURLOPT_TCP_KEEPINTVL, 2L);
    if (t->bufsize)
        curl_easy_setopt(e, CURLOPT_BUFFERSIZE, t->bufsize);
    if (t->upbufsize)
        curl_easy_setopt(e, CURLOPT_UPLOAD_BUFFERSIZE, t->upbufsize);
    if (t->rcvbuf > 0) {
        curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, sockopt_cb);
        curl_easy_setopt(e, CURLOPT_SOCKOPTDATA, t);
    }
    if (t->dns_shuffle)
        curl_easy_setopt(e, CURLOPT_DNS_SHUFFLE_ADDRESSES, 1L);
    if (iface)
        curl_easy_setopt(e, CURLOPT_INTERFACE, iface);
    if (t->ca_bundle)
        curl_easy_setopt(e, CURLOPT_CAINFO, t->ca_bundle);
}
