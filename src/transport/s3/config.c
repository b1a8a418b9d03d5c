/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3:// and http(s):// configuration: the URL (bucket, endpoint, prefix,
 * rails), its options and RIO_S3_* knobs, the region, endpoint and
 * addressing, and the AWS credentials (creds.c), read once at open
 * (docs/s3.md lists them).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "transport/s3/internal.h"

/* A knob's value: the URL option param, else the environment variable env
 * (NULL when neither is set). *name (when name is not NULL) is the one the
 * value came from, for the line a refusal writes. */
static const char *knob(const struct rio_url *u, const char *param, const char *env,
                        const char **name)
{
    const char *v = rio__url_param(u, param);

    if (name)
        *name = v ? param : env;
    if (v)
        return v;
    v = getenv(env);
    return v && *v ? v : NULL;
}

static int knob_bool(const struct rio_url *u, const char *param, const char *env, bool def,
                     bool *out)
{
    const char *name, *v = knob(u, param, env, &name);

    *out = def;
    if (!v)
        return 0;
    return rio__opt_bool(name, v, out);
}

/* A size from min to max (rio__opt_size's flags), or def when unset. */
static int knob_size(const struct rio_url *u, const char *param, const char *env, uint64_t def,
                     uint64_t min, uint64_t max, unsigned flags, uint64_t *out)
{
    const char *name, *v = knob(u, param, env, &name);

    *out = def;
    return v ? rio__opt_size(name, v, min, max, flags, out) : 0;
}

/* A duration in milliseconds, above 0. */
static int knob_ms(const struct rio_url *u, const char *param, const char *env, uint32_t def_ms,
                   uint64_t *out_ms)
{
    const char *name, *v = knob(u, param, env, &name);
    uint32_t ms = def_ms;

    *out_ms = def_ms;
    if (!v)
        return 0;
    if (rio__opt_ms(name, v, &ms) < 0)
        return RIO_EINVAL;
    if (ms == 0) {
        rio__detail("%s=%s: expected a duration above 0", name, v);
        return RIO_EINVAL;
    }
    *out_ms = ms;
    return 0;
}

/* Split "http://host:port/path" into the endpoint (no trailing '/') and
 * the Host header; the path part becomes a prefix of every key. An
 * http(s):// URL's user:password@ stays in the endpoint curl is given (its
 * Basic auth) and out of the host, which is sent as the Host header and
 * named in messages; an s3:// endpoint takes none (SigV4 signs; a password
 * there was sent in every Host header). */
static int parse_endpoint(struct s3_transport *t, const char *ep, char **path_out)
{
    const char *hs, *he, *at;
    size_t l;

    if (strncasecmp(ep, "http://", 7) == 0)
        hs = ep + 7;
    else if (strncasecmp(ep, "https://", 8) == 0)
        hs = ep + 8;
    else
        return RIO_EURL;
    he = hs + strcspn(hs, "/?#");
    if (he == hs || *he == '?' || *he == '#')
        return RIO_EURL;
    at = memrchr(hs, '@', (size_t)(he - hs));
    if (at && t->scheme == SCHEME_S3) {
        rio__detail("an s3 endpoint takes no user:password@ (the credentials sign each "
                    "request: docs/s3.md)");
        return RIO_EURL;
    }
    if (at) {
        hs = at + 1;
        if (hs == he)
            return RIO_EURL;
    }
    /* HOST:PORT or [V6]:PORT: a port that is no number is refused without
     * showing it (a password with a '/' not written %2F ends the authority
     * there, and what came before the '/' was taken for the host). */
    const char *rb = *hs == '[' ? memchr(hs, ']', (size_t)(he - hs)) : NULL;
    const char *pc = memrchr(rb ? rb : hs, ':', (size_t)(he - (rb ? rb : hs)));
    if (pc) {
        size_t pl = (size_t)(he - pc - 1);
        unsigned long port = 0;
        bool ok = pl >= 1 && pl <= 5;
        for (const char *x = pc + 1; ok && x < he; x++) {
            ok = *x >= '0' && *x <= '9';
            port = port * 10 + (unsigned long)(*x - '0');
        }
        if (!ok || port == 0 || port > 65535) {
            rio__detail("what follows the host's ':' is no port number (a password holding '/' "
                        "is written %%2F)");
            return RIO_EURL;
        }
    }
    t->host = rio__malloc((size_t)(he - hs) + 1);
    t->endpoint = rio__malloc((size_t)(he - ep) + 1);
    if (!t->host || !t->endpoint)
        return -ENOMEM;
    rio__s3_copy_str(t->host, (size_t)(he - hs) + 1, hs, (size_t)(he - hs));
    rio__s3_copy_str(t->endpoint, (size_t)(he - ep) + 1, ep, (size_t)(he - ep));
    /* "/a/b/" -> "a/b/" */
    while (*he == '/')
        he++;
    l = strlen(he);
    *path_out = rio__malloc(l + 2);
    if (!*path_out)
        return -ENOMEM;
    memcpy(*path_out, he, l + 1);
    return 0;
}

/* ep's authority holds a user:password@ (parse_endpoint said why it
 * refused it). */
static bool at_in(const char *ep)
{
    const char *hs = strstr(ep, "://");
    if (!hs)
        return false;
    hs += 3;
    return memchr(hs, '@', strcspn(hs, "/?#")) != NULL;
}

static int set_prefix(struct s3_transport *t, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);

    while (la && a[la - 1] == '/')
        la--;
    while (lb && b[lb - 1] == '/')
        lb--;
    t->prefix = rio__malloc(la + lb + 3);
    if (!t->prefix)
        return -ENOMEM;
    t->prefix[0] = '\0';
    if (la) {
        memcpy(t->prefix, a, la);
        t->prefix[la] = '/';
        t->prefix[la + 1] = '\0';
    }
    if (lb) {
        size_t o = strlen(t->prefix);
        memcpy(t->prefix + o, b, lb);
        t->prefix[o + lb] = '/';
        t->prefix[o + lb + 1] = '\0';
    }
    return 0;
}

/* A region is a DNS label of the AWS endpoint: letters, digits, '-'. */
static bool region_ok(const char *r)
{
    if (!*r || strlen(r) > 63)
        return false;
    for (; *r; r++)
        if (!((*r >= 'a' && *r <= 'z') || (*r >= '0' && *r <= '9') || *r == '-'))
            return false;
    return true;
}

/* Whether host (an endpoint's authority: "h", "h:port", "[v6]:port") is an
 * IP address, which no bucket name can be put in front of. */
static bool host_is_ip(const char *host)
{
    char h[64];
    unsigned char a[16];
    size_t n;

    if (host[0] == '[')
        return true;
    n = strcspn(host, ":");
    if (n >= sizeof(h))
        return false;
    memcpy(h, host, n);
    h[n] = '\0';
    return inet_pton(AF_INET, h, a) == 1;
}

/* addressing=auto|path|virtual: virtual-hosted for an AWS endpoint and a
 * bucket that can be a DNS label (auto), path style for anything else. */
static int addressing(struct s3_transport *t, const struct rio_url *u)
{
    const char *v = rio__url_param(u, "addressing");
    bool https = strncasecmp(t->endpoint, "https://", 8) == 0;
    bool dns = rio__s3_bucket_dns_ok(t->bucket, https);
    char ep[S3_URL_MAX], *path = NULL;
    int ret;

    if (!v || !*v || !strcmp(v, "auto")) {
        t->vhost = rio__s3_host_is_aws(t->host) && dns;
    } else if (!strcmp(v, "path")) {
        t->vhost = false;
    } else if (!strcmp(v, "virtual")) {
        if (host_is_ip(t->host)) {
            /* "bkt.127.0.0.1" went to the DNS resolver, and the endpoint
             * named was never reached. */
            rio__detail("addressing=virtual: the endpoint %s is an IP address, which cannot "
                        "carry the bucket in its name: use addressing=path (or auto)",
                        t->host);
            return RIO_EINVAL;
        }
        if (!dns) {
            rio__detail("addressing=virtual: bucket %s cannot be a host name (3 to 63 of a-z 0-9 - "
                        "%s)",
                        t->bucket, https ? "over https" : "and .");
            return RIO_EINVAL;
        }
        t->vhost = true;
    } else {
        rio__detail("addressing=%s: expected path, virtual or auto", v);
        return RIO_EINVAL;
    }
    if (!t->vhost)
        return 0;
    if (rio__s3_vhost_endpoint(t->endpoint, t->bucket, ep, sizeof(ep)) < 0)
        return RIO_EURL;
    rio__free(t->endpoint);
    rio__free(t->host);
    t->endpoint = t->host = NULL;
    ret = parse_endpoint(t, ep, &path);
    rio__free(path);
    return ret;
}

/* The CA certificates TLS trusts: ca_bundle=, AWS_CA_BUNDLE, the profile's
 * ca_bundle (s3://, already in t->ca_bundle), else the system's. The file
 * must be there and readable now (an error naming where it came from, not
 * a failed handshake at the first request). 0, RIO_EINVAL, -ENOMEM. */
static int ca_bundle(struct s3_transport *t, const struct rio_url *u)
{
    const char *name, *v = knob(u, "ca_bundle", "AWS_CA_BUNDLE", &name);
    struct stat st;
    int fd;

    if (v) {
        char *c = rio__strdup(v);
        if (!c)
            return -ENOMEM;
        rio__free(t->ca_bundle);
        t->ca_bundle = c;
    } else {
        name = "the profile's ca_bundle";
    }
    if (!t->ca_bundle)
        return 0;
    fd = open(t->ca_bundle, O_RDONLY | O_CLOEXEC | O_NONBLOCK); /* a FIFO: refused, not waited on */
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        rio__detail("%s %.200s: %s", name, t->ca_bundle,
                    fd < 0 ? strerror(errno) : "not a regular file");
        if (fd >= 0)
            close(fd);
        return RIO_EINVAL;
    }
    close(fd);
    return 0;
}

/*
 * s3://: the AWS profile, region, endpoint, addressing and credentials.
 * Region: region=, AWS_REGION, AWS_DEFAULT_REGION, the profile's region,
 * us-east-1. Endpoint: endpoint=, RIO_S3_ENDPOINT, AWS_ENDPOINT_URL_S3,
 * AWS_ENDPOINT_URL, the profile's endpoint_url, AWS's own for the region.
 */
static int s3_settings(struct s3_transport *t, const struct rio_url *u, char **ep_path)
{
    struct s3_profile *pf = rio__calloc(1, sizeof(*pf));
    char aws_ep[128];
    const char *v, *ep, *from;
    bool anon = false;
    int ret;

    if (!pf)
        return -ENOMEM;
    ret = rio__s3_profile_load(u, pf);
    if (ret < 0)
        goto out;
    /* from: where a refused value came from, for the message (the URL
     * option, the variable, the profile). */
    v = knob(u, "region", "AWS_REGION", &from);
    if (!v) {
        v = getenv("AWS_DEFAULT_REGION");
        from = "AWS_DEFAULT_REGION";
    }
    if (!v || !*v) {
        v = pf->conf.region[0] ? pf->conf.region : "us-east-1";
        from = "the profile's region";
    }
    if (!region_ok(v)) {
        rio__detail("%s=%.64s: expected letters, digits and '-' (a region)", from, v);
        ret = RIO_EINVAL;
        goto out;
    }
    t->region = rio__strdup(v);
    if (!t->region) {
        ret = -ENOMEM;
        goto out;
    }
    ep = knob(u, "endpoint", "RIO_S3_ENDPOINT", &from);
    if (!ep)
        ep = knob(u, "endpoint", "AWS_ENDPOINT_URL_S3", &from);
    if (!ep)
        ep = knob(u, "endpoint", "AWS_ENDPOINT_URL", &from);
    if (!ep && pf->conf.endpoint_url[0]) {
        ep = pf->conf.endpoint_url;
        from = "the profile's endpoint_url";
    }
    if (!ep) {
        snprintf(aws_ep, sizeof(aws_ep), "https://s3.%s.amazonaws.com", t->region);
        ep = aws_ep;
        from = "AWS's endpoint for the region";
    }
    ret = parse_endpoint(t, ep, ep_path);
    if (ret == RIO_EURL && !at_in(ep)) {
        char shown[256];
        rio__detail("%s=%.200s: expected http://HOST[:PORT][/PATH] or https://... (an s3 "
                    "endpoint)",
                    from, rio__url_redact(ep, shown, sizeof(shown)));
    }
    if (ret < 0)
        goto out;
    ret = addressing(t, u);
    if (ret < 0)
        goto out;
    ret = knob_bool(u, "unsigned", "RIO_S3_UNSIGNED", false, &anon);
    if (ret < 0)
        goto out;
    if (pf->conf.ca_bundle[0] && !(t->ca_bundle = rio__strdup(pf->conf.ca_bundle))) {
        ret = -ENOMEM; /* the profile's; ca_bundle= and AWS_CA_BUNDLE come first */
        goto out;
    }
    ret = rio__s3_creds_pick(t, pf, anon);
out:
    rio__s3_profile_clear(pf);
    rio__free(pf);
    return ret;
}

int rio__s3_config_parse(struct s3_transport *t, const struct rio_url *u,
                         const struct rio_options *o)
{
    char *ep_path = NULL, *rails[RIO_MAX_PATHS];
    const char *v, *name;
    unsigned nrails = 0;
    uint64_t x;
    bool etag_check;
    int ret;

    if (t->scheme == SCHEME_S3) {
        if (!u->authority || !*u->authority)
            return RIO_EURL;
        /* s3://AK:SECRET@bucket was a bucket of that name: the secret in
         * messages, and in the path of every request. */
        if (strchr(u->authority, '@')) {
            rio__detail("an s3:// URL takes no user:password@ (the keys come from "
                        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, a profile or the "
                        "instance: docs/s3.md)");
            return RIO_EURL;
        }
        t->bucket = rio__strdup(u->authority);
        if (!t->bucket)
            return -ENOMEM;
        ret = s3_settings(t, u, &ep_path);
        if (ret < 0)
            goto out;
        ret = set_prefix(t, ep_path, u->path);
        if (ret < 0)
            goto out;
    } else {
        char full[S3_URL_MAX];
        int w = snprintf(full, sizeof(full), "%s://%s", u->scheme, u->authority);
        if (!u->authority || !*u->authority || w < 0 || (size_t)w >= sizeof(full))
            return RIO_EURL;
        ret = parse_endpoint(t, full, &ep_path);
        if (ret < 0)
            goto out;
        ret = set_prefix(t, u->path, "");
        if (ret < 0)
            goto out;
        t->region = rio__strdup("");
        if (!t->region) {
            ret = -ENOMEM;
            goto out;
        }
    }

    ret = RIO_EINVAL;
    if ((v = rio__url_param(u, "rails"))) {
        /* "if!eth1,if!eth2": one rail per item, none empty. */
        char *s;
        t->rails_buf = rio__strdup(v);
        if (!t->rails_buf) {
            ret = -ENOMEM;
            goto out;
        }
        for (s = t->rails_buf;;) {
            char *comma = strchr(s, ',');
            if (comma)
                *comma = '\0';
            if (!*s || nrails == RIO_MAX_PATHS) {
                rio__detail("rails=%s: expected 1 to %d interface names, comma-separated", v,
                            RIO_MAX_PATHS);
                goto out;
            }
            rails[nrails++] = s;
            if (!comma)
                break;
            s = comma + 1;
        }
    }
    t->base.npaths = o && o->paths ? o->paths : nrails ? nrails : 1;
    t->base.put_chunks_max = S3_MAX_PARTS;
    if (t->base.npaths < 1 || t->base.npaths > RIO_MAX_PATHS)
        goto out;
    for (unsigned i = 0; i < t->base.npaths; i++)
        t->path[i].iface = nrails ? rails[i % nrails] : NULL;

    t->content_md5 = MD5_VERIFY;
    if ((v = knob(u, "content_md5", "RIO_S3_CONTENT_MD5", &name))) {
        int tri;

        t->content_md5_set = true;
        if (!strcasecmp(v, "header")) {
            t->content_md5 = MD5_HEADER;
        } else {
            /* on (header), off, or verify */
            if (rio__opt_tristate(name, v, "verify", &tri) < 0)
                goto out;
            t->content_md5 = tri < 0 ? MD5_VERIFY : tri ? MD5_HEADER : MD5_OFF;
        }
    }
    /* One check per part: CRC32C where the server takes it, else MD5. */
    t->checksum = v ? (t->content_md5 == MD5_OFF ? CK_NONE : CK_MD5) : CK_AUTO;
    if ((v = knob(u, "checksum", "RIO_S3_CHECKSUM", &name))) {
        if (!strcasecmp(v, "auto"))
            t->checksum = CK_AUTO;
        else if (!strcasecmp(v, "crc32c"))
            t->checksum = CK_CRC32C;
        else if (!strcasecmp(v, "md5"))
            t->checksum = CK_MD5;
        else if (!strcasecmp(v, "sha256"))
            t->checksum = CK_SHA256;
        else if (!strcasecmp(v, "none"))
            t->checksum = CK_NONE;
        else {
            rio__detail("%s=%s: expected auto, crc32c, sha256, md5 or none", name, v);
            goto out;
        }
    }
    if (t->checksum == CK_MD5 && t->content_md5 == MD5_OFF)
        t->content_md5 = MD5_VERIFY;
    /* S3's ETag is an MD5: the engine's fast etag is never stored as one. */
    t->base.etag_md5_only = true;
    /* Whether the server decides If-None-Match and If-Match on PutObject and
     * CompleteMultipartUpload: AWS S3 does (auto, for its endpoints); some
     * servers ignore them on the Complete and would overwrite silently. */
    if ((v = knob(u, "conditional", "RIO_S3_CONDITIONAL", &name)) && strcasecmp(v, "auto") != 0) {
        if (rio__opt_bool(name, v, &t->conditional) < 0)
            goto out;
    } else {
        size_t hl = t->host ? strlen(t->host) : 0;
        const char *colon = t->host ? strrchr(t->host, ':') : NULL;
        if (colon && !strchr(colon, ']'))
            hl = (size_t)(colon - t->host);
        t->conditional = t->scheme == SCHEME_S3 && hl > 14 &&
                         (strncasecmp(t->host + hl - 14, ".amazonaws.com", 14) == 0);
    }
    {
        int cr = ca_bundle(t, u);
        if (cr < 0) {
            ret = cr; /* -ENOMEM, or RIO_EINVAL */
            goto out;
        }
    }
    if (knob_bool(u, "nt_copy", "RIO_S3_NT_COPY", false, &t->nt_copy) < 0 ||
        knob_bool(u, "discard", "RIO_S3_DISCARD", false, &t->discard) < 0 ||
        knob_bool(u, "dns_shuffle", "RIO_S3_DNS_SHUFFLE", false, &t->dns_shuffle) < 0 ||
        knob_bool(u, "get_one", "RIO_S3_GET_ONE", true, &t->get_one) < 0 ||
        knob_bool(u, "etag_check", "RIO_S3_ETAG_CHECK", true, &etag_check) < 0)
        goto out;
    /* An object railio did not write is checked by its ETag where that is
     * the MD5 of its bytes (s3:// only: a web server's ETag is no digest). */
    t->base.foreign_etag_md5 = t->scheme == SCHEME_S3 && etag_check;
    v = getenv("RIO_S3_DEBUG");
    if (v && *v && rio__opt_bool("RIO_S3_DEBUG", v, &t->debug) < 0)
        goto out;
    /* 512 KiB: a 16 KiB buffer (curl's) costs a recv and a body callback
     * per 16 KiB (docs/s3.md, bufsize); 0 leaves curl's. */
    if (knob_size(u, "bufsize", "RIO_S3_BUFSIZE", 512 * 1024, 1024, CURL_MAX_READ_SIZE,
                  RIO_OPT_SIZE_ZERO, &x) < 0)
        goto out;
    t->bufsize = (long)x;
    if (knob_size(u, "upbufsize", "RIO_S3_UPBUFSIZE", 512 * 1024, 16 * 1024, 2 * 1024 * 1024,
                  RIO_OPT_SIZE_ZERO, &x) < 0)
        goto out;
    t->upbufsize = (long)x;
    if (knob_size(u, "rcvbuf", "RIO_S3_RCVBUF", 0, 0, 1u << 30, 0, &x) < 0)
        goto out;
    t->rcvbuf = (int)x;
    if (knob_ms(u, "stall", "RIO_S3_STALL", 5000, &x) < 0)
        goto out;
    t->stall_s = (long)((x + 999) / 1000);
    if (knob_size(u, "min_speed", "RIO_S3_MIN_SPEED", 1, 0, 1ull << 40, 0, &x) < 0)
        goto out;
    t->min_speed = (long)x;
    if (knob_ms(u, "connect_timeout", "RIO_S3_CONNECT_TIMEOUT", 5000, &x) < 0)
        goto out;
    t->connect_ms = (long)x;
    if (knob_size(u, "min_part", "RIO_S3_MIN_PART", S3_DEF_MIN_PART, 0, 5ull << 30, 0,
                  &t->min_part) < 0)
        goto out;
    t->base.put_chunk_min = t->min_part; /* the engine sizes multipart chunks by it */
    t->op_timeout_ms = o && o->op_timeout_ms ? (long)o->op_timeout_ms : 0;
    t->verify_off = o && o->verify < 0;
    if (t->discard && (!o || o->verify >= 0))
        fprintf(stderr, "railio s3: discard=1 stores nothing: the engine's verification will "
                        "fail unless verify=off\n");
    ret = 0;
out:
    rio__free(ep_path);
    return ret;
}
