/* SPDX-License-Identifier: Apache-2.0 */
/* server_env: railiod for a test and a blocking wire client (see server_env.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "server_env.h"
#include "core/checksum.h"
#include "core/le.h"
#include "proto/proto.h"
#include "railio.h"
#include "t.h"
#include "tlib.h"
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

void srv_dump_log(const struct srv_env *e)
{
    char line[1024];
    FILE *f = fopen(e->log, "r");
    if (!f)
        return;
    fprintf(stderr, "---- railiod log (%s)\n", e->log);
    while (fgets(line, sizeof(line), f))
        fputs(line, stderr);
    fprintf(stderr, "---- end of railiod log\n");
    fclose(f);
}

/* railiod writes its log from a thread of its own, a moment after the
 * event (docs/server.md, "Logs"): wait until the file has stopped growing
 * for 30 ms (at most 2 s) so a line logged before the answer a test just
 * got is in it. */
static void srv__log_settle(const struct srv_env *e)
{
    struct stat a, b;
    unsigned stable = 0;

    if (stat(e->log, &a) != 0)
        return;
    for (int i = 0; i < 200 && stable < 3; i++) {
        usleep(10000);
        if (stat(e->log, &b) != 0)
            return;
        stable = b.st_size == a.st_size ? stable + 1 : 0;
        a = b;
    }
}

unsigned srv_log_count(const struct srv_env *e, const char *needle)
{
    char line[2048];
    unsigned n = 0;
    srv__log_settle(e);
    FILE *f = fopen(e->log, "r");
    if (!f)
        return 0;
    while (fgets(line, sizeof(line), f))
        if (strstr(line, needle))
            n++;
    fclose(f);
    return n;
}

static void srv__rmdir(struct srv_env *e)
{
    t_rm_tree(e->dir);
    e->dir[0] = '\0';
}

/* At exit, a server the test did not stop is killed, its log shown. */
static void srv_at_exit(void *arg)
{
    struct srv_env *e = arg;

    if (e->pid > 0 && !e->exited) {
        t_proc_kill(e->pid);
        srv_dump_log(e);
    }
    srv__rmdir(e);
}

/* e's directory removed, and e no longer stopped at exit. */
static void srv_forget(struct srv_env *e)
{
    srv__rmdir(e);
    t_on_exit_cancel(e);
}

void srv_binary(char *out, size_t cap)
{
    t_build_path(out, cap, "railiod");
}

void srv_write_token(struct srv_env *e, const char *token, char *path, size_t cap)
{
    snprintf(path, cap, "%s/token", e->dir);
    FILE *f = fopen(path, "w");
    if (!f)
        T_FAIL("token file %s: %s", path, strerror(errno));
    fprintf(f, "%s\n", token);
    fclose(f);
    chmod(path, 0600);
}

void srv_prepare(struct srv_env *e)
{
    memset(e, 0, sizeof(*e));
    t_mkdtemp(e->dir, sizeof(e->dir), "railiod-test");
    snprintf(e->port_file, sizeof(e->port_file), "%s/ports", e->dir);
    snprintf(e->log, sizeof(e->log), "%s/railiod.log", e->dir);
    t_on_exit(srv_at_exit, e);
}

static void srv__parse_ports(struct srv_env *e, char *text)
{
    char *nl = strchr(text, '\n');
    char *save = NULL, *tok;
    if (!nl)
        T_FAIL("port file without a newline: '%s'", text);
    *nl = '\0';
    for (tok = strtok_r(text, ",", &save); tok && e->naddr < SRV_MAX_ADDRS;
         tok = strtok_r(NULL, ",", &save))
        snprintf(e->addr[e->naddr++], sizeof(e->addr[0]), "%s", tok);
    char *s3 = strstr(nl + 1, "s3=");
    if (s3) {
        s3 += 3;
        snprintf(e->s3, sizeof(e->s3), "%.*s", (int)strcspn(s3, "\n"), s3);
    }
    char *m = strstr(nl + 1, "metrics=");
    if (m) {
        m += 8;
        m[strcspn(m, "\n")] = '\0';
        snprintf(e->metrics, sizeof(e->metrics), "%s", m);
    }
}

void srv_start_listen(struct srv_env *e, const char *listen, const char *const *extra)
{
    char bin[512];
    const char *argv[SRV_MAX_ARGS];
    int n = 0;

    if (e->bin)
        snprintf(bin, sizeof(bin), "%s", e->bin);
    else
        srv_binary(bin, sizeof(bin));
    if (access(bin, X_OK) != 0)
        T_FAIL("%s not found (build it first)", bin);
    argv[n++] = bin;
    if (e->subcommand)
        argv[n++] = e->subcommand;
    argv[n++] = "--listen";
    argv[n++] = listen ? listen : "127.0.0.1:0";
    argv[n++] = "--port-file";
    argv[n++] = e->port_file;
    argv[n++] = "--log-level";
    argv[n++] = "debug";
    t_argv_add(argv, &n, SRV_MAX_ARGS, extra);
    /* The log goes to the test's stderr: ctest shows it when the test
     * fails. SRV_LOG_FILE=1 sends it to a file instead. */
    e->pid = t_spawn(bin, argv, 0, getenv("SRV_LOG_FILE") ? e->log : NULL);
    /* Generous: --prefault touches all of --memory first (~3 s a GiB on
     * the 2-vCPU VM). */
    char text[2048];
    int st = 0;
    int r = t_wait_file(e->pid, e->port_file, 30000, text, sizeof(text), &st);
    if (r == -1) {
        e->exited = 1;
        srv_dump_log(e);
        T_FAIL("railiod exited during start-up (status %d)", st);
    }
    if (r == -2) {
        srv_dump_log(e);
        T_FAIL("railiod did not write %s within 30 s", e->port_file);
    }
    srv__parse_ports(e, text);
    if (e->naddr == 0)
        T_FAIL("empty port file");
    /* The ports are read: unless the directory holds more (a token a
     * client reads, a log, the test's own files), remove it now; else it
     * goes at srv_stop or at exit (a failed assertion's too). */
    unlink(e->port_file);
    if (rmdir(e->dir) == 0)
        e->dir[0] = '\0';
}

void srv_start(struct srv_env *e, const char *const *extra)
{
    srv_prepare(e);
    srv_start_listen(e, NULL, extra);
}

int srv_wait(struct srv_env *e, unsigned timeout_ms)
{
    int st = t_proc_wait(e->pid, timeout_ms);

    if (st != -1)
        e->exited = 1;
    return st;
}

int srv_stop(struct srv_env *e)
{
    int st = -1, code = -1;
    if (e->pid > 0 && !e->exited) {
        st = t_proc_stop(e->pid, 15000);
        e->exited = 1;
    }
    if (st != -1 && WIFEXITED(st))
        code = WEXITSTATUS(st);
    if (code != 0)
        srv_dump_log(e);
    srv_forget(e);
    return code;
}

void srv_kill9(struct srv_env *e)
{
    if (e->pid > 0 && !e->exited) {
        t_proc_kill(e->pid);
        e->exited = 1;
    }
    srv_forget(e);
}

int wc_try_connect_ex(struct wc *c, const char *addr, unsigned timeout_s, int rcvbuf)
{
    char host[80];
    const char *colon = strrchr(addr, ':');
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct timeval tv = {.tv_sec = timeout_s};
    int one = 1;

    if (!colon || (size_t)(colon - addr) >= sizeof(host))
        return -EINVAL;
    memcpy(host, addr, (size_t)(colon - addr));
    host[colon - addr] = '\0';
    sa.sin_port = htons((uint16_t)atoi(colon + 1));
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
        return -EINVAL;
    memset(&c->sess, 0, sizeof(c->sess));
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return -errno;
    setsockopt(c->fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    if (rcvbuf > 0)
        setsockopt(c->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int e = -errno;
        close(c->fd);
        c->fd = -1;
        return e;
    }
    c->next_id = 1;
    return 0;
}

int wc_try_connect(struct wc *c, const char *addr, unsigned timeout_s)
{
    return wc_try_connect_ex(c, addr, timeout_s, 0);
}

void wc_connect(struct wc *c, const char *addr)
{
    int r = wc_try_connect(c, addr, 20);
    if (r < 0)
        T_FAIL("connect %s: %s", addr, strerror(-r));
}

void wc_close(struct wc *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    rio__proto_sess_free(&c->sess);
}

void wc_close_all(struct wc *c, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        wc_close(&c[i]);
}

uint64_t srv_proc_kb(pid_t pid, const char *field)
{
    char path[64], line[256];
    uint64_t v = 0;
    size_t fl = strlen(field);
    FILE *f;

    snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
    f = fopen(path, "r");
    if (!f)
        T_FAIL("%s: %s", path, strerror(errno));
    while (fgets(line, sizeof(line), f))
        if (!strncmp(line, field, fl) && line[fl] == ':')
            v = strtoull(line + fl + 1, NULL, 10);
    fclose(f);
    if (!v)
        T_FAIL("no %s in %s", field, path);
    return v;
}

int wc_sendv(struct wc *c, struct iovec *iov, int n)
{
    while (n > 0) {
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w < 0)
            return -errno;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

int wc_send_raw(struct wc *c, const void *p, size_t n)
{
    struct iovec iov = {.iov_base = (void *)p, .iov_len = n};
    return wc_sendv(c, &iov, 1);
}

int wc_send2(struct wc *c, int op, uint64_t id, const void *a, size_t alen, const void *b,
             size_t blen)
{
    struct rio_proto_hdr h = {
        .opcode = (uint8_t)op, .id = id, .body_len = (uint32_t)(alen + blen + RIO_PROTO_TAG_LEN)};
    uint8_t hb[RIO_PROTO_HDR_LEN], tag[RIO_PROTO_TAG_LEN];
    int data = op == RIO_OP_PUT_CHUNK || op == RIO_OP_PUT_ONE;
    struct iovec iov[4] = {
        {hb, sizeof(hb)}, {(void *)a, alen}, {(void *)b, blen}, {tag, sizeof(tag)}};
    uint64_t seq = rio__proto_sess_keyed(&c->sess) ? c->sess.tx_seq++ : 0;
    rio__proto_hdr_encode(&h, hb);
    if (rio__proto_seal(&c->sess, seq, iov, data ? 2 : 3, tag) < 0)
        return -ENOMEM;
    if (data) {
        struct iovec d[4] = {iov[0], iov[1], iov[3], iov[2]};
        return wc_sendv(c, d, 4);
    }
    return wc_sendv(c, iov, 4);
}

int wc_chunk_head(struct wc *c, uint64_t upload, uint64_t index, uint64_t xxh, uint32_t len)
{
    struct rio_proto_put_chunk m = {.upload_id = upload, .index = index, .xxh = xxh};
    struct rio_proto_hdr h = {.opcode = RIO_OP_PUT_CHUNK,
                              .id = c->next_id++,
                              .body_len = RIO_PROTO_CHUNK_FIXED + RIO_PROTO_TAG_LEN + len};
    uint8_t b[RIO_PROTO_HDR_LEN + RIO_PROTO_CHUNK_FIXED + RIO_PROTO_TAG_LEN];
    struct iovec part = {b, RIO_PROTO_HDR_LEN + RIO_PROTO_CHUNK_FIXED};
    uint64_t seq = rio__proto_sess_keyed(&c->sess) ? c->sess.tx_seq++ : 0;

    rio__proto_hdr_encode(&h, b);
    rio__proto_enc_put_chunk_fixed(&m, b + RIO_PROTO_HDR_LEN, RIO_PROTO_CHUNK_FIXED);
    if (rio__proto_seal(&c->sess, seq, &part, 1, b + RIO_PROTO_HDR_LEN + RIO_PROTO_CHUNK_FIXED) < 0)
        return -ENOMEM;
    return wc_send_raw(c, b, sizeof(b));
}

int wc_read_full(struct wc *c, void *p, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = recv(c->fd, (char *)p + got, n - got, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -errno;
        if (r == 0)
            return RIO_ECLOSED;
        got += (size_t)r;
    }
    return 0;
}

int wc_recv(struct wc *c, struct rio_proto_hdr *h, uint8_t **body)
{
    uint8_t hb[RIO_PROTO_HDR_LEN];
    uint32_t ctl, data;
    int r;

    *body = NULL;
    r = wc_read_full(c, hb, sizeof(hb));
    if (r < 0)
        return r;
    r = rio__proto_hdr_decode(hb, RIO_PROTO_BODY_CAP, h);
    if (r < 0)
        return r;
    if (!(h->flags & RIO_PF_RESPONSE) || rio__proto_layout(h, &ctl, &data) < 0)
        return RIO_EPROTO;
    *body = malloc(h->body_len);
    if (!*body)
        return -ENOMEM;
    r = wc_read_full(c, *body, h->body_len);
    if (r == 0 && rio__proto_rx_check(&c->sess, hb, *body, ctl, *body + ctl) < 0)
        r = RIO_EPROTO;
    if (r == 0 && data && h->opcode == RIO_OP_GET_ONE) {
        /* the descriptor and the xxh3, then the bytes: kept together */
        uint64_t x = rio__proto_u64(*body + ctl - 8);
        memmove(*body + ctl, *body + ctl + RIO_PROTO_TAG_LEN, data);
        if (rio__xxh3(*body + ctl, data) != x)
            r = RIO_ECHECKSUM;
        data += ctl;
    } else if (r == 0 && data) {
        uint64_t x = rio__proto_u64(*body);
        memmove(*body, *body + ctl + RIO_PROTO_TAG_LEN, data);
        if (rio__xxh3(*body, data) != x)
            r = RIO_ECHECKSUM;
    }
    if (r < 0) {
        free(*body);
        *body = NULL;
        return r;
    }
    h->body_len = data ? data : ctl;
    if (h->body_len == 0) {
        free(*body);
        *body = NULL;
    }
    return 0;
}

int wc_call(struct wc *c, int op, const void *a, size_t alen, const void *b, size_t blen,
            uint8_t **body, uint32_t *body_len)
{
    struct rio_proto_hdr h;
    uint8_t *bd = NULL;
    uint64_t id = c->next_id++;
    int r = wc_send2(c, op, id, a, alen, b, blen);
    if (r < 0)
        return r;
    r = wc_recv(c, &h, &bd);
    if (r < 0)
        return r;
    if (h.id != id || h.opcode != op)
        T_FAIL("response id/op %llu/%d for request %llu/%d", (unsigned long long)h.id, h.opcode,
               (unsigned long long)id, op);
    if (body_len)
        *body_len = h.body_len;
    if (body)
        *body = bd;
    else
        free(bd);
    return h.status;
}

/* A request the encoder wrote (n bytes; n < 0, the encoder refused it, is a
 * bug of the test, named by what), sent with no payload; its answer. */
static int wc_request(struct wc *c, int op, const char *what, const uint8_t *out, int n,
                      uint8_t **body, uint32_t *body_len)
{
    if (n < 0)
        T_FAIL("encode %s", what);
    return wc_call(c, op, out, (size_t)n, NULL, 0, body, body_len);
}

int wc_hello_raw(struct wc *c, const struct rio_proto_hello *m, uint8_t **body, uint32_t *blen)
{
    struct rio_proto_hdr h = {.version = RIO_PROTO_HELLO_VERSION,
                              .opcode = RIO_OP_HELLO,
                              .id = c->next_id++,
                              .body_len = 24};
    uint8_t b[RIO_PROTO_HDR_LEN + 24];
    int r;

    if (rio__proto_enc_hello(m, b + RIO_PROTO_HDR_LEN, 24) != 24)
        return RIO_EINVAL;
    rio__proto_hdr_encode(&h, b);
    rio__proto_hello_seal(b, b + RIO_PROTO_HDR_LEN);
    r = wc_send_raw(c, b, sizeof(b));
    if (r < 0)
        return r;
    r = wc_recv(c, &h, body);
    if (r < 0)
        return r;
    *blen = h.body_len;
    return h.status;
}

int wc_hello_ex(struct wc *c, const char *token, struct rio_proto_hello_resp *hr, uint8_t **keep)
{
    struct rio_proto_hello m = {.version_min = RIO_PROTO_VERSION, .version_max = RIO_PROTO_VERSION};
    struct rio_proto_hello_resp r;
    uint8_t out[64], *body = NULL;
    uint32_t blen = 0;
    int n, st;

    for (int i = 0; i < RIO_PROTO_NONCE_LEN; i++)
        m.nonce[i] = (uint8_t)rand();
    rio__proto_sess_free(&c->sess);
    st = wc_hello_raw(c, &m, &body, &blen);
    if (st != 0)
        T_FAIL("HELLO: %s", rio_errname(st));
    if (rio__proto_dec_hello_resp(body, blen, &r) < 0)
        T_FAIL("HELLO response does not decode");
    if (hr)
        *hr = r;
    if (token && r.auth_required) {
        struct rio_proto_auth a;
        struct rio_proto_auth_resp ar;
        uint8_t want[RIO_PROTO_MAC_LEN], *ab = NULL;
        uint32_t alen = 0;
        rio__proto_auth_mac((const uint8_t *)token, strlen(token), "railio-auth-v1", r.nonce,
                            m.nonce, a.mac);
        rio__proto_auth_mac((const uint8_t *)token, strlen(token), "railio-server-v1", m.nonce,
                            r.nonce, want);
        n = rio__proto_enc_auth(&a, out, sizeof(out));
        st = wc_request(c, RIO_OP_AUTH, "AUTH", out, n, &ab, &alen);
        if (st == 0) {
            if (rio__proto_dec_auth_resp(ab, alen, &ar) < 0 ||
                memcmp(ar.mac, want, RIO_PROTO_MAC_LEN) != 0)
                T_FAIL("the server's AUTH answer does not prove the token");
            if (rio__proto_sess_key(&c->sess, (const uint8_t *)token, strlen(token), m.nonce,
                                    r.nonce, 0) < 0)
                T_FAIL("session key");
        }
        free(ab);
    } else {
        st = 0;
    }
    if (keep)
        *keep = body;
    else
        free(body);
    return st;
}

void wc_hello(struct wc *c, const char *token)
{
    int st = wc_hello_ex(c, token, NULL, NULL);
    if (st != 0)
        T_FAIL("AUTH: %s", rio_errname(st));
}

int wc_put_open(struct wc *c, const char *key, uint64_t size, uint64_t chunk, uint32_t ttl_ms,
                uint64_t *upload)
{
    struct rio_proto_put_open m = {.size = size,
                                   .chunk_size = chunk,
                                   .ttl_ms = ttl_ms,
                                   .key = key,
                                   .key_len = (uint16_t)strlen(key)};
    struct rio_proto_put_open_resp r;
    uint8_t out[2048], *body = NULL;
    uint32_t blen = 0;
    int n = rio__proto_enc_put_open(&m, out, sizeof(out));
    int st = wc_request(c, RIO_OP_PUT_OPEN, "PUT_OPEN", out, n, &body, &blen);
    if (st == 0 && rio__proto_dec_put_open_resp(body, blen, &r) < 0)
        T_FAIL("PUT_OPEN response does not decode");
    *upload = st == 0 ? r.upload_id : 0;
    free(body);
    return st;
}

int wc_put_chunk(struct wc *c, uint64_t upload, uint64_t index, uint64_t xxh, const void *data,
                 size_t len)
{
    struct rio_proto_put_chunk m = {.upload_id = upload, .index = index, .xxh = xxh};
    uint8_t fixed[24];
    rio__proto_enc_put_chunk_fixed(&m, fixed, sizeof(fixed));
    return wc_call(c, RIO_OP_PUT_CHUNK, fixed, sizeof(fixed), data, len, NULL, NULL);
}

int wc_put_one_ex(struct wc *c, const struct rio_proto_put_one *m, const void *data, size_t len,
                  uint64_t *gen)
{
    uint8_t ctl[RIO_PROTO_ONE_FIXED + RIO_KEY_MAX], *body = NULL;
    uint32_t blen = 0;
    int n = rio__proto_enc_put_one(m, ctl, sizeof(ctl));
    if (n < 0)
        T_FAIL("encode PUT_ONE");
    int st = wc_call(c, RIO_OP_PUT_ONE, ctl, (size_t)n, data, len, &body, &blen);
    if (st == 0 && (blen != 8 || !body))
        T_FAIL("PUT_ONE answer of %u bytes", blen);
    if (st == 0 && gen)
        *gen = rio__proto_u64(body);
    free(body);
    return st;
}

int wc_put_one(struct wc *c, const char *key, const void *data, size_t len, uint64_t chunk,
               uint64_t *gen)
{
    struct rio_proto_put_one m = {.chunk_size = chunk,
                                  .xxh = rio__xxh3(data, len),
                                  .key = key,
                                  .key_len = (uint16_t)strlen(key)};
    char etag[33];
    wc_etag(data, len, etag);
    memcpy(m.etag, etag, 32);
    return wc_put_one_ex(c, &m, data, len, gen);
}

int wc_put_commit_if(struct wc *c, uint64_t upload, uint64_t nchunks, const uint64_t *xxh,
                     const char *etag, int with_cond, uint64_t if_gen, uint64_t *gen)
{
    struct rio_proto_put_commit m = {.upload_id = upload, .nchunks = nchunks};
    struct rio_proto_put_commit_resp r;
    size_t cap = 48 + 8 * (size_t)nchunks + 8;
    uint8_t *out = malloc(cap), *body = NULL;
    uint32_t blen = 0;
    int n, st;
    memcpy(m.etag, etag, 32);
    n = rio__proto_enc_put_commit(&m, xxh, out, cap);
    if (with_cond && n >= 0) {
        /* Written here, not by the encoder: 0 too (a malformed one). */
        rio__le64_put(out + n, if_gen);
        n += 8;
    }
    st = wc_request(c, RIO_OP_PUT_COMMIT, "PUT_COMMIT", out, n, &body, &blen);
    free(out);
    if (st == 0 && rio__proto_dec_put_commit_resp(body, blen, &r) < 0)
        T_FAIL("PUT_COMMIT response does not decode");
    if (st == 0)
        *gen = r.generation;
    free(body);
    return st;
}

int wc_put_commit(struct wc *c, uint64_t upload, uint64_t nchunks, const uint64_t *xxh,
                  const char *etag, uint64_t *gen)
{
    return wc_put_commit_if(c, upload, nchunks, xxh, etag, 0, 0, gen);
}

void wc_etag(const void *data, size_t n, char etag[33])
{
    struct rio_md5 m;
    if (rio__md5_init(&m) < 0 || rio__md5_update(&m, data, n) < 0 || rio__md5_final(&m, etag) < 0)
        T_FAIL("md5");
}

uint64_t wc_nchunks(uint64_t size, uint64_t chunk)
{
    return size ? (size - 1) / chunk + 1 : 0;
}

uint64_t *wc_xxh_list(const uint8_t *data, uint64_t size, uint64_t chunk)
{
    uint64_t n = wc_nchunks(size, chunk);
    uint64_t *x = calloc(n ? n : 1, 8);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = i * chunk, len = size - off < chunk ? size - off : chunk;
        x[i] = rio__xxh3(data + off, len);
    }
    return x;
}

uint64_t wc_put_multi(struct wc *conns, unsigned nconns, const char *key, const uint8_t *data,
                      uint64_t size, uint64_t chunk)
{
    uint64_t up = 0, gen = 0, n = wc_nchunks(size, chunk);
    uint64_t *x = wc_xxh_list(data, size, chunk);
    char etag[33];
    int st;

    wc_etag(data, size, etag);
    st = wc_put_open(&conns[0], key, size, chunk, 0, &up);
    if (st != 0)
        T_FAIL("PUT_OPEN %s: %s", key, rio_errname(st));
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = i * chunk, len = size - off < chunk ? size - off : chunk;
        st = wc_put_chunk(&conns[i % nconns], up, i, x[i], data + off, len);
        if (st != 0)
            T_FAIL("PUT_CHUNK %s #%llu: %s", key, (unsigned long long)i, rio_errname(st));
    }
    st = wc_put_commit(&conns[0], up, n, x, etag, &gen);
    if (st != 0)
        T_FAIL("PUT_COMMIT %s: %s", key, rio_errname(st));
    free(x);
    return gen;
}

uint64_t wc_put(struct wc *c, const char *key, const uint8_t *data, uint64_t size, uint64_t chunk)
{
    return wc_put_multi(c, 1, key, data, size, chunk);
}

int wc_lookup(struct wc *c, const char *key, struct rio_proto_desc *d, uint8_t **keep)
{
    struct rio_proto_key m = {.key = key, .key_len = (uint16_t)strlen(key)};
    uint8_t out[2048], *body = NULL;
    uint32_t blen = 0;
    int n = rio__proto_enc_key(&m, out, sizeof(out));
    int st = wc_request(c, RIO_OP_LOOKUP, "LOOKUP", out, n, &body, &blen);
    *keep = NULL;
    if (st == 0) {
        if (rio__proto_dec_desc(body, blen, d) < 0)
            T_FAIL("LOOKUP response does not decode");
        *keep = body;
    } else {
        free(body);
    }
    return st;
}

int wc_read(struct wc *c, const char *key, uint64_t gen, uint64_t off, uint32_t len, void *dst)
{
    struct rio_proto_read m = {
        .generation = gen, .off = off, .len = len, .key = key, .key_len = (uint16_t)strlen(key)};
    uint8_t out[2048], *body = NULL;
    uint32_t blen = 0;
    int n = rio__proto_enc_read(&m, out, sizeof(out));
    int st = wc_request(c, RIO_OP_READ, "READ", out, n, &body, &blen);
    if (st == 0) {
        if (blen != len)
            T_FAIL("READ answered %u bytes for %u", blen, len);
        memcpy(dst, body, len);
    } else if (blen != 0) {
        T_FAIL("an error response with a %u-byte body", blen);
    }
    free(body);
    return st;
}

int wc_delete(struct wc *c, const char *key)
{
    struct rio_proto_key m = {.key = key, .key_len = (uint16_t)strlen(key)};
    uint8_t out[2048];
    int n = rio__proto_enc_key(&m, out, sizeof(out));
    return wc_request(c, RIO_OP_DELETE, "DELETE", out, n, NULL, NULL);
}

int wc_delete_if(struct wc *c, const char *key, uint64_t gen)
{
    uint8_t out[2048];
    int n = 0;
    struct rio_proto_key m = {.key = key, .key_len = (uint16_t)strlen(key)};
    n = rio__proto_enc_key(&m, out, sizeof(out));
    /* Written here, not by the encoder: 0 too (a malformed one). */
    if (n >= 0)
        rio__le64_put(out + n, gen);
    return wc_request(c, RIO_OP_DELETE, "DELETE", out, n < 0 ? n : n + 8, NULL, NULL);
}

int wc_ping(struct wc *c)
{
    return wc_call(c, RIO_OP_PING, NULL, 0, NULL, 0, NULL, NULL);
}

int wc_wait_closed(struct wc *c, unsigned timeout_ms)
{
    uint64_t t0 = t_now_ms();
    char buf[4096];
    for (;;) {
        uint64_t el = t_now_ms() - t0;
        if (el >= timeout_ms)
            return -ETIMEDOUT;
        struct pollfd p = {.fd = c->fd, .events = POLLIN};
        int n = poll(&p, 1, (int)(timeout_ms - el));
        if (n <= 0)
            continue;
        ssize_t r = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
        if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR))
            return 0;
    }
}

char *srv_http_get(const char *addr, const char *path)
{
    struct wc c;
    char req[256];
    size_t cap = 1 << 20, len = 0;
    char *out;

    if (wc_try_connect(&c, addr, 5) < 0)
        return NULL;
    snprintf(req, sizeof(req), "GET %s HTTP/1.0\r\nHost: %s\r\n\r\n", path, addr);
    if (wc_send_raw(&c, req, strlen(req)) < 0) {
        wc_close(&c);
        return NULL;
    }
    out = malloc(cap);
    for (;;) {
        ssize_t r = recv(c.fd, out + len, cap - 1 - len, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
        if (len == cap - 1)
            break;
    }
    out[len] = '\0';
    wc_close(&c);
    return out;
}

double srv_metric(const char *text, const char *series)
{
    size_t n = strlen(series);
    for (const char *p = text; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
        if (strncmp(p, series, n) == 0 && p[n] == ' ')
            return strtod(p + n + 1, NULL);
    }
    return -1;
}

double srv_scrape(struct srv_env *e, const char *series)
{
    char *text = srv_http_get(e->metrics, "/metrics");
    double v;
    if (!text)
        T_FAIL("GET /metrics failed");
    v = srv_metric(text, series);
    free(text);
    return v;
}

void srv_start_wc(struct srv_env *e, const char *const *extra, struct wc *c)
{
    srv_start(e, extra);
    wc_open(c, e->addr[0]);
}

void srv__end_wc(struct srv_env *e, struct wc *c, const char *file, int line)
{
    wc_close(c);
    t__check_i(file, line, "srv_stop(e)", "0", T__EQ, srv_stop(e), 0);
}

void wc_open(struct wc *c, const char *addr)
{
    wc_connect(c, addr);
    wc_hello(c, NULL);
}

struct rio_proto_stat_resp wc_stat(struct wc *c)
{
    struct rio_proto_stat_resp st;
    uint8_t *body = NULL;
    uint32_t blen = 0;
    T_EQ(wc_call(c, RIO_OP_STAT, NULL, 0, NULL, 0, &body, &blen), 0);
    T_OK(rio__proto_dec_stat_resp(body, blen, &st));
    free(body);
    return st;
}
