/* SPDX-License-Identifier: Apache-2.0 */
/*
 * URL, members, rails and options: the authority's members and their ring,
 * ?rails= and rails paired by subnet, and the transport's query options.
 */
#include "core/internal.h"
#include "core/secret.h"
#include "transport/tcp/tcp_int.h"

/*
 * "host:port", "[v6]:port" or "host" (default port) into host and port.
 * Returns 0 or RIO_EURL.
 */
static int split_hostport(const char *s, size_t len, const char *defport, char host[TCP_HOST_MAX],
                          char port[TCP_PORT_MAX])
{
    const char *h = s, *p = NULL;
    size_t hl, pl = 0;

    if (len == 0)
        return RIO_EURL;
    if (s[0] == '[') {
        const char *rb = memchr(s, ']', len);
        if (!rb)
            return RIO_EURL;
        h = s + 1;
        hl = (size_t)(rb - h);
        if (rb + 1 < s + len) {
            if (rb[1] != ':')
                return RIO_EURL;
            p = rb + 2;
            pl = len - (size_t)(p - s);
        }
    } else {
        const char *colon = NULL;
        for (size_t i = 0; i < len; i++)
            if (s[i] == ':') {
                if (colon)
                    return RIO_EURL; /* a bare IPv6 address needs brackets */
                colon = s + i;
            }
        hl = colon ? (size_t)(colon - s) : len;
        if (colon) {
            p = colon + 1;
            pl = len - (size_t)(p - s);
        }
    }
    if (hl == 0 || hl >= TCP_HOST_MAX)
        return RIO_EURL;
    memcpy(host, h, hl);
    host[hl] = '\0';
    if (!p) {
        snprintf(port, TCP_PORT_MAX, "%s", defport);
        return 0;
    }
    if (pl == 0 || pl >= TCP_PORT_MAX)
        return RIO_EURL;
    memcpy(port, p, pl);
    port[pl] = '\0';
    uint64_t v;
    if (rio__parse_uint(port, 65535, &v) < 0 || v == 0)
        return RIO_EURL;
    return 0;
}

/* numeric: an address only, never a name to look up (what a server
 * announces). */
static int resolve_ex(const char *host, const char *port, struct tcp_addr *a, bool numeric)
{
    struct addrinfo hints, *res = NULL;
    int r;

    memset(&hints, 0, sizeof(hints));
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV | (numeric ? AI_NUMERICHOST : 0);
    r = getaddrinfo(host, port, &hints, &res);
    if (r != 0 || !res)
        return r == EAI_MEMORY ? -ENOMEM : RIO_EDNS;
    if (res->ai_addrlen > sizeof(a->ss)) {
        freeaddrinfo(res);
        return RIO_EDNS;
    }
    memset(a, 0, sizeof(*a));
    memcpy(&a->ss, res->ai_addr, res->ai_addrlen);
    a->len = res->ai_addrlen;
    freeaddrinfo(res);
    return 0;
}

static int resolve(const char *host, const char *port, struct tcp_addr *a)
{
    return resolve_ex(host, port, a, false);
}

unsigned rio__tcp_owner_of(const struct tcp_transport *t, const char *key, size_t klen)
{
    uint8_t buf[TCP_NAME_MAX + RIO_KEY_MAX];
    uint64_t best = 0;
    unsigned who = 0;

    if (t->nmembers == 1 || klen > RIO_KEY_MAX)
        return 0;
    for (unsigned i = 0; i < t->nmembers; i++) {
        const struct tcp_member *m = &t->members[i];
        memcpy(buf, m->name, m->name_len);
        memcpy(buf + m->name_len, key, klen);
        uint64_t h = rio__xxh3(buf, m->name_len + klen);
        if (i == 0 || h > best) {
            best = h;
            who = i;
        }
    }
    return who;
}

/* The rail for announced address text ("host:port"); a wildcard host means
 * the member's own host. A server announces its listeners' addresses
 * (docs/protocol.md, HELLO): a name is refused, never looked up (up to 16
 * lookups a connection, none bounded by connect_timeout, of names a
 * server chose). */
int rio__tcp_rail_from_text(const struct tcp_member *m, const char *text, struct tcp_rail *r)
{
    char host[TCP_HOST_MAX], port[TCP_PORT_MAX];
    int ret = split_hostport(text, strlen(text), m->port, host, port);

    if (ret < 0)
        return ret;
    if (!strcmp(host, "0.0.0.0") || !strcmp(host, "::") || !strcmp(host, "*"))
        snprintf(host, sizeof(host), "%s", m->host);
    memset(r, 0, sizeof(*r));
    ret = resolve_ex(host, port, &r->dst, host != m->host && strcmp(host, m->host) != 0);
    if (ret < 0)
        return ret;
    snprintf(r->text, sizeof(r->text), "%s", text);
    return 0;
}

/* Does a sit in the network of (net, mask)? Same family, masked bytes equal. */
static bool addr_in_subnet(const struct sockaddr *a, const struct sockaddr *net,
                           const struct sockaddr *mask)
{
    const uint8_t *x, *y, *k;
    size_t n;

    if (!a || !net || !mask || a->sa_family != net->sa_family)
        return false;
    if (a->sa_family == AF_INET) {
        x = (const uint8_t *)&((const struct sockaddr_in *)a)->sin_addr;
        y = (const uint8_t *)&((const struct sockaddr_in *)net)->sin_addr;
        k = (const uint8_t *)&((const struct sockaddr_in *)mask)->sin_addr;
        n = 4;
    } else if (a->sa_family == AF_INET6) {
        x = (const uint8_t *)&((const struct sockaddr_in6 *)a)->sin6_addr;
        y = (const uint8_t *)&((const struct sockaddr_in6 *)net)->sin6_addr;
        k = (const uint8_t *)&((const struct sockaddr_in6 *)mask)->sin6_addr;
        n = 16;
    } else {
        return false;
    }
    for (size_t i = 0; i < n; i++)
        if ((x[i] & k[i]) != (y[i] & k[i]))
            return false;
    return true;
}

/*
 * Pair each announced rail of m with a local address on the same network
 * (getifaddrs: the first up, non-loopback interface address whose subnet
 * holds the rail's address): the connection binds it, so the rail's traffic
 * leaves by the interface of that network and its replies come back the
 * same way. A rail no local network holds is left unbound (the routing table
 * decides). Only when several rails are announced: one rail needs no pairing.
 */
void rio__tcp_pair_rails_by_subnet(struct tcp_member *m)
{
    struct ifaddrs *ifa = NULL;

    if (m->nrails < 2 || getifaddrs(&ifa) < 0)
        return;
    for (unsigned k = 0; k < m->nrails; k++) {
        struct tcp_rail *r = &m->rail[k];
        if (r->has_src || r->ifname[0])
            continue;
        for (const struct ifaddrs *i = ifa; i; i = i->ifa_next) {
            if (!i->ifa_addr || !i->ifa_netmask || (i->ifa_flags & IFF_LOOPBACK) ||
                !(i->ifa_flags & IFF_UP))
                continue;
            if (!addr_in_subnet((const struct sockaddr *)&r->dst.ss, i->ifa_addr, i->ifa_netmask))
                continue;
            memset(&r->src, 0, sizeof(r->src));
            r->src.len = i->ifa_addr->sa_family == AF_INET ? sizeof(struct sockaddr_in)
                                                           : sizeof(struct sockaddr_in6);
            memcpy(&r->src.ss, i->ifa_addr, r->src.len);
            if (i->ifa_addr->sa_family == AF_INET)
                ((struct sockaddr_in *)&r->src.ss)->sin_port = 0;
            else
                ((struct sockaddr_in6 *)&r->src.ss)->sin6_port = 0;
            r->has_src = true;
            break;
        }
    }
    freeifaddrs(ifa);
}

/*
 * One item of ?rails=: DST | SRC>DST | if!NAME | if!NAME>DST, where DST is
 * HOST[:PORT] (the member's port by default), SRC a local address to bind
 * and NAME an interface (SO_BINDTODEVICE). A bare if!NAME goes to the
 * member's address.
 */
static int rail_from_param(const struct tcp_member *m, const char *item, size_t len,
                           struct tcp_rail *r)
{
    char host[TCP_HOST_MAX], port[TCP_PORT_MAX];
    const char *gt = memchr(item, '>', len);
    const char *dst = gt ? gt + 1 : item;
    size_t dlen = gt ? len - (size_t)(dst - item) : len;
    int ret;

    memset(r, 0, sizeof(*r));
    if (len > TCP_NAME_MAX)
        return RIO_EURL;
    memcpy(r->text, item, len);
    r->text[len] = '\0';
    if (len > 3 && !strncmp(item, "if!", 3)) {
        size_t nl = (gt ? (size_t)(gt - item) : len) - 3;
        if (nl == 0 || nl >= IF_NAMESIZE)
            return RIO_EURL;
        memcpy(r->ifname, item + 3, nl);
        r->ifname[nl] = '\0';
        if (!gt) {
            r->dst = m->url.dst;
            return 0;
        }
    } else if (gt) {
        char src[TCP_HOST_MAX];
        size_t sl = (size_t)(gt - item);
        if (sl == 0 || sl >= sizeof(src))
            return RIO_EURL;
        memcpy(src, item, sl);
        src[sl] = '\0';
        if (src[0] == '[' && src[sl - 1] == ']') {
            memmove(src, src + 1, sl - 2);
            src[sl - 2] = '\0';
        }
        ret = resolve(src, "0", &r->src);
        if (ret < 0)
            return ret == RIO_EDNS ? RIO_EURL : ret;
        r->has_src = true;
    }
    ret = split_hostport(dst, dlen, m->port, host, port);
    if (ret < 0)
        return ret;
    return resolve(host, port, &r->dst);
}

int rio__tcp_parse_members(struct tcp_transport *t, const char *auth)
{
    const char *p = auth;

    if (!auth || !*auth)
        return RIO_EURL;
    for (;;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        struct tcp_member *m;
        int ret;

        if (t->nmembers == TCP_MAX_MEMBERS || len == 0 || len > TCP_NAME_MAX)
            return RIO_EURL;
        if (memchr(p, '@', len)) {
            /* Not a host: what is before the '@' (a password?) is not echoed. */
            rio__detail("railio:// URLs take no user information (user[:password]@ before the "
                        "host); a server's token goes in token= or token_file=");
            return RIO_EURL;
        }
        m = &t->members[t->nmembers];
        memcpy(m->name, p, len);
        m->name[len] = '\0';
        m->name_len = len;
        ret = split_hostport(p, len, TCP_DEFAULT_PORT, m->host, m->port);
        if (ret < 0)
            return ret;
        ret = resolve(m->host, m->port, &m->url.dst);
        if (ret < 0)
            return ret;
        snprintf(m->url.text, sizeof(m->url.text), "%s", m->name);
        m->ctl_fd = -1;
        ret = -pthread_mutex_init(&m->ctl_mu, NULL);
        if (ret < 0)
            return ret;
        t->nmembers++; /* counted once its mutex exists: close destroys it */
        if (!e)
            return 0;
        p = e + 1;
    }
}

int rio__tcp_parse_rails(struct tcp_transport *t, const char *s)
{
    struct tcp_member *m = &t->members[0];

    /* Explicit rails name one server's addresses. */
    if (t->nmembers != 1)
        return RIO_EINVAL;
    m->nrails = 0;
    for (;;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        int ret;

        if (len == 0 || m->nrails == RIO_PROTO_MAX_RAILS)
            return RIO_EURL;
        ret = rail_from_param(m, s, len, &m->rail[m->nrails]);
        if (ret < 0)
            return ret;
        m->nrails++;
        if (!e)
            return 0;
        s = e + 1;
    }
}

/* tls=on|off (RIO_TLS), tls_ca=FILE (RIO_TLS_CA), tls_verify=on|off, tls_name=NAME. */
static int parse_tls(struct tcp_transport *t, const struct rio_url *u)
{
    const char *s, *ca;
    bool verify = true;
    char why[256];

    /* tls= and RIO_TLS are resolved with the other options (options.c). */
    if ((s = rio__url_param(u, "tls_verify")) && rio__opt_bool("tls_verify", s, &verify) < 0)
        return RIO_EINVAL;
    const char *ca_from = "tls_ca";
    ca = rio__url_param(u, "tls_ca");
    if (!ca) {
        ca = getenv("RIO_TLS_CA");
        ca_from = "RIO_TLS_CA";
    }
    if (ca && !*ca)
        ca = NULL;
    if ((s = rio__url_param(u, "tls_name")) && *s) {
        if (strlen(s) > 255) {
            return rio__opt_refuse("tls_name", s, "longer than 255 bytes (a host name)");
        }
        t->tls_name = rio__malloc(strlen(s) + 1);
        if (!t->tls_name)
            return -ENOMEM;
        strcpy(t->tls_name, s);
    }
    if (t->o.tls != 1) {
        /* A URL that names a CA, a name or a verification wants TLS:
         * without tls=on it would go in the clear, without a word. (Only
         * the URL's: RIO_TLS_CA may be set for other URLs.) */
        static const char *const only_tls[] = {"tls_ca", "tls_name", "tls_verify"};
        const char *on = rio__url_param(u, "tls");
        bool url_on = false, verify_on = false;
        if (on && rio__parse_bool(on, &url_on) < 0)
            url_on = false;
        for (size_t i = 0; i < sizeof(only_tls) / sizeof(only_tls[0]); i++)
            if ((s = rio__url_param(u, only_tls[i])) &&
                (i == 2 ? rio__parse_bool(s, &verify_on) < 0 || verify_on : *s != '\0'))
                return rio__opt_refuse(
                    only_tls[i], s, "TLS is off: %s, or drop %s=",
                    url_on ? "struct rio_options.tls is -1, which takes precedence over tls=on"
                           : "add tls=on (or RIO_TLS=on)",
                    only_tls[i]);
        return 0;
    }
    t->tls_ctx = rio__tls_client_ctx(ca, verify, why, sizeof(why));
    if (!t->tls_ctx && ca) {
        /* A CA bundle that cannot be read is this machine's setting, not
         * the peer's TLS: named with where it came from (RIO_TLS_CA or
         * tls_ca=), a usage error. */
        rio__detail("%s=%.200s: %s", ca_from, ca, why);
        return RIO_EINVAL;
    }
    if (!t->tls_ctx) {
        rio__detail("%s", why);
        return RIO_ETLS;
    }
    return 0;
}

int rio__tcp_parse_params(struct tcp_transport *t, const struct rio_url *u)
{
    const char *s;
    uint64_t v;
    int ret;

    t->conns_per_rail = 1;
    if ((s = rio__url_param(u, "conns"))) {
        if (rio__opt_uint("conns", s, 1, TCP_MAX_CONNS, &v) < 0)
            return RIO_EINVAL;
        t->conns_per_rail = (unsigned)v;
    }
    t->connect_ms = TCP_DEF_CONNECT_MS;
    if ((s = rio__url_param(u, "connect_timeout")) &&
        rio__opt_ms("connect_timeout", s, &t->connect_ms) < 0)
        return RIO_EINVAL;
    if (t->connect_ms == 0)
        return rio__opt_refuse("connect_timeout", s, "must be more than 0");
    t->user_timeout_ms = TCP_DEF_USER_TIMEOUT_MS;
    if ((s = rio__url_param(u, "user_timeout")) &&
        rio__opt_ms("user_timeout", s, &t->user_timeout_ms) < 0)
        return RIO_EINVAL;
    t->progress_ms = t->o.op_timeout_ms;
    if ((s = rio__url_param(u, "progress_timeout")) &&
        rio__opt_ms("progress_timeout", s, &t->progress_ms) < 0)
        return RIO_EINVAL;
    if ((s = rio__url_param(u, "ttl")) && rio__opt_ms("ttl", s, &t->ttl_ms) < 0)
        return RIO_EINVAL;
    t->put_one = true;
    if ((s = rio__url_param(u, "put_one")) && rio__opt_bool("put_one", s, &t->put_one) < 0)
        return RIO_EINVAL;
    t->get_one = true;
    if ((s = rio__url_param(u, "get_one")) && rio__opt_bool("get_one", s, &t->get_one) < 0)
        return RIO_EINVAL;
    t->backoff_ms = TCP_DIAL_BACKOFF_BASE_MS;
    t->backoff_cap_ms = TCP_DIAL_BACKOFF_CAP_MS;
    if ((s = rio__url_param(u, "dial_backoff")) &&
        rio__opt_ms("dial_backoff", s, &t->backoff_ms) < 0)
        return RIO_EINVAL;
    if ((s = rio__url_param(u, "dial_backoff_cap")) &&
        rio__opt_ms("dial_backoff_cap", s, &t->backoff_cap_ms) < 0)
        return RIO_EINVAL;
    if (t->backoff_ms > t->backoff_cap_ms)
        return rio__opt_refuse("dial_backoff", rio__url_param(u, "dial_backoff"),
                               "%llu ms must not exceed dial_backoff_cap (%llu ms)",
                               (unsigned long long)t->backoff_ms,
                               (unsigned long long)t->backoff_cap_ms);
    t->grace_ms = TCP_DEF_CANCEL_GRACE_MS;
    if ((s = rio__url_param(u, "cancel_grace")) && rio__opt_ms("cancel_grace", s, &t->grace_ms) < 0)
        return RIO_EINVAL;
    if (!t->grace_ms)
        return rio__opt_refuse("cancel_grace", s, "must be more than 0");
    t->keepalive = true;
    if ((s = rio__url_param(u, "keepalive")) && rio__opt_bool("keepalive", s, &t->keepalive) < 0)
        return RIO_EINVAL;
    ret = parse_tls(t, u);
    if (ret < 0)
        return ret;
    const char *tok = rio__url_param(u, "token");
    const char *tokf = rio__url_param(u, "token_file");
    if (!tok && !tokf)
        tokf = getenv("RIO_TOKEN_FILE");
    if (tok && tokf)
        return rio__opt_refuse("token", tok,
                               "give token= or token_file= (or RIO_TOKEN_FILE), "
                               "not both");
    if (tok) {
        size_t n = strlen(tok);
        if (n == 0 || n > TCP_TOKEN_MAX)
            return rio__opt_refuse("token", tok, "must be 1 to %u bytes", (unsigned)TCP_TOKEN_MAX);
        t->token = rio__secret_alloc(n);
        if (!t->token)
            return -ENOMEM;
        memcpy(t->token, tok, n);
        t->token_len = n;
    } else if (tokf && *tokf) {
        const char *why;
        int loose;
        ret = rio__proto_token_read(tokf, &t->token, &t->token_len, &loose, &why);
        if (ret < 0) {
            rio__opt_refuse(rio__url_param(u, "token_file") ? "token_file" : "RIO_TOKEN_FILE", tokf,
                            "%s", why ? why : strerror(-ret));
            return ret;
        }
        /* As railiod says of its own: once a process, the path, never the
         * token. */
        static atomic_bool said;
        if (loose && !atomic_exchange(&said, true))
            fprintf(stderr, "railio: token file %s is readable by group or others (chmod 600 it)\n",
                    tokf);
    }
    return 0;
}
