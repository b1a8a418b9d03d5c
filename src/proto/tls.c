/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS for railio:// connections (tls.h). The socket BIO stays OpenSSL's own
 * so that kernel TLS (SSL_OP_ENABLE_KTLS) takes over the records where the
 * kernel offers it; without it OpenSSL encrypts in user space.
 *
 * Writes: sendmsg's contract (bytes taken are gone) meets SSL_write's (a
 * write that blocked must be repeated with the same bytes) in stage: a
 * record that blocks is copied there and counted as taken, and goes out
 * before anything else. Each SSL_write is one record at most, so a blocked
 * write holds at most RIO_TLS_RECORD bytes.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>

#include "core/alloc.h"
#include "proto/tls.h"
#include "railio.h"

static void why_set(char *why, size_t len, const char *fmt, const char *arg)
{
    if (why && len)
        snprintf(why, len, fmt, arg);
}

static const char *ssl_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "unknown error";
}

/* Why a file did not load: the first error (the last is OpenSSL's own
 * "PEM lib" where the first says "no start line"). */
static const char *load_reason(void)
{
    unsigned long e = ERR_peek_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "unknown error";
}

static SSL_CTX *ctx_common(const SSL_METHOD *m, char *why, size_t whylen)
{
    SSL_CTX *ctx;

    ERR_clear_error();
    ctx = SSL_CTX_new(m);
    if (!ctx) {
        why_set(why, whylen, "TLS: cannot make a context: %s", ssl_reason());
        return NULL;
    }
    (void)SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* KTLS: the kernel encrypts when it can (no-op where it cannot). A peer
     * closing without close_notify is a plain end of stream: the protocol's
     * own lengths and checks catch a truncated frame. */
    SSL_CTX_set_options(ctx, SSL_OP_ENABLE_KTLS | SSL_OP_IGNORE_UNEXPECTED_EOF |
                                 SSL_OP_NO_RENEGOTIATION | SSL_OP_CIPHER_SERVER_PREFERENCE);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* AES-128-GCM first: the cheapest AEAD where the CPU has AES-NI. */
    (void)SSL_CTX_set_ciphersuites(
        ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
    /* TLS 1.2: the same AEADs in the same order, with ECDHE only. OpenSSL's
     * default list also takes CBC with HMAC-SHA1 (ECDHE-ECDSA-AES128-SHA:
     * MAC-then-encrypt, padding oracles) and puts AES-256 first. */
    if (SSL_CTX_set_cipher_list(ctx,
                                "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:"
                                "ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:"
                                "ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305") != 1) {
        why_set(why, whylen, "TLS: cannot set the cipher list: %s", ssl_reason());
        SSL_CTX_free(ctx);
        return NULL;
    }
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* Fewer, larger reads from the socket. */
    SSL_CTX_set_read_ahead(ctx, 1);
    SSL_CTX_set_default_read_buffer_len(ctx, 64 * 1024);
    return ctx;
}

/* path names a regular file (checked without waiting: OpenSSL opens the
 * files it loads itself, and a FIFO there would have it wait for a writer
 * for ever). */
static bool regular_file(const char *path)
{
    struct stat st;
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    bool ok = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode);

    if (fd >= 0)
        close(fd);
    return ok;
}

SSL_CTX *rio__tls_client_ctx(const char *ca_file, bool verify, char *why, size_t whylen)
{
    SSL_CTX *ctx;

    ctx = ctx_common(TLS_client_method(), why, whylen);
    if (!ctx)
        return NULL;
    if (verify) {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
        if (ca_file
                ? !regular_file(ca_file) || SSL_CTX_load_verify_locations(ctx, ca_file, NULL) != 1
                : SSL_CTX_set_default_verify_paths(ctx) != 1) {
            why_set(why, whylen, "TLS: cannot load the CA bundle %s",
                    ca_file ? ca_file : "(system)");
            SSL_CTX_free(ctx);
            return NULL;
        }
    } else {
        SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
    }
    return ctx;
}

/* The passphrase of an encrypted key: none. OpenSSL's default asks on the
 * terminal (or reads stdin), so a server started with one waited there for
 * ever, or failed without saying why. */
static int no_passphrase(char *buf, int size, int rwflag, void *asked)
{
    (void)buf;
    (void)size;
    (void)rwflag;
    if (asked)
        *(int *)asked = 1;
    return -1;
}

SSL_CTX *rio__tls_server_ctx(const char *cert_file, const char *key_file, char *why, size_t whylen)
{
    SSL_CTX *ctx;
    int asked = 0;

    ctx = ctx_common(TLS_server_method(), why, whylen);
    if (!ctx)
        return NULL;
    SSL_CTX_set_default_passwd_cb(ctx, no_passphrase);
    SSL_CTX_set_default_passwd_cb_userdata(ctx, &asked);
    /* No session tickets: nothing arrives on a client's idle connection
     * after the handshake (the client takes stray bytes for a dead one). */
    (void)SSL_CTX_set_num_tickets(ctx, 0);
    const char *odd = !regular_file(cert_file)  ? cert_file
                      : !regular_file(key_file) ? key_file
                                                : NULL;
    if (odd) {
        why_set(why, whylen, "TLS: %s is not a regular file", odd);
        goto err;
    }
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, cert_file) != 1) {
        if (why && whylen)
            snprintf(why, whylen, "TLS: cannot load the certificate %s: %s", cert_file,
                     load_reason());
        goto err;
    }
    ERR_clear_error();
    if (SSL_CTX_use_PrivateKey_file(ctx, key_file, SSL_FILETYPE_PEM) != 1) {
        if (asked)
            why_set(why, whylen,
                    "TLS: the private key %s is encrypted and a passphrase is never asked "
                    "for: keep it unencrypted, readable by this user only (openssl pkey -in "
                    "KEY -out PLAIN)",
                    key_file);
        else if (why && whylen)
            snprintf(why, whylen, "TLS: cannot load the private key %s: %s", key_file,
                     load_reason());
        goto err;
    }
    /* Not kept: the context outlives this frame. */
    SSL_CTX_set_default_passwd_cb_userdata(ctx, NULL);
    if (SSL_CTX_check_private_key(ctx) != 1) {
        why_set(why, whylen, "TLS: the private key %s does not match the certificate", key_file);
        goto err;
    }
    return ctx;
err:
    SSL_CTX_free(ctx);
    return NULL;
}

void rio__tls_ctx_free(SSL_CTX *ctx)
{
    SSL_CTX_free(ctx);
}

#define WBUF (256u * 1024u)

/* Whether this kernel can take TLS records over (the tls ULP). */
static bool kernel_tls(void)
{
    static int have = -1; /* racy but idempotent */
    if (have < 0) {
        char b[256] = "";
        FILE *f = fopen("/proc/sys/net/ipv4/tcp_available_ulp", "re");
        if (f) {
            if (!fgets(b, sizeof(b), f))
                b[0] = 0;
            fclose(f);
        }
        have = strstr(b, "tls") != NULL;
    }
    return have == 1;
}

int rio__tls_init(struct rio__tls *t, SSL_CTX *ctx, int fd, bool client, const char *name)
{
    memset(t, 0, sizeof(*t));
    t->client = client;
    t->stage = rio__malloc(RIO_TLS_RECORD);
    if (!t->stage)
        return -ENOMEM;
    ERR_clear_error();
    t->ssl = SSL_new(ctx);
    if (!t->ssl)
        goto err;
    if (kernel_tls()) {
        /* Kernel TLS needs OpenSSL's socket BIO as it is. */
        if (SSL_set_fd(t->ssl, fd) != 1)
            goto err;
    } else {
        /* Records gather in a buffer in front of the socket: one send per
         * WBUF bytes rather than one per 16 KiB record. */
        BIO *sock = BIO_new_socket(fd, BIO_NOCLOSE);
        BIO *buf = BIO_new(BIO_f_buffer());
        if (!sock || !buf || BIO_set_write_buffer_size(buf, WBUF) != 1 || !BIO_up_ref(sock)) {
            BIO_free(sock);
            BIO_free(buf);
            goto err;
        }
        BIO_push(buf, sock);
        SSL_set_bio(t->ssl, sock, buf);
    }
    if (client) {
        SSL_set_connect_state(t->ssl);
        if (name && *name) {
            struct in6_addr a6;
            struct in_addr a4;
            X509_VERIFY_PARAM *vp = SSL_get0_param(t->ssl);
            if (inet_pton(AF_INET, name, &a4) == 1 || inet_pton(AF_INET6, name, &a6) == 1) {
                if (X509_VERIFY_PARAM_set1_ip_asc(vp, name) != 1)
                    goto err;
            } else {
                X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
                if (SSL_set_tlsext_host_name(t->ssl, name) != 1 ||
                    X509_VERIFY_PARAM_set1_host(vp, name, 0) != 1)
                    goto err;
            }
        }
    } else {
        SSL_set_accept_state(t->ssl);
    }
    return 0;
err:
    rio__tls_cleanup(t);
    return RIO_ETLS;
}

void rio__tls_cleanup(struct rio__tls *t)
{
    if (t->ssl)
        SSL_free(t->ssl);
    rio__free(t->stage);
    memset(t, 0, sizeof(*t));
}

/* Before an SSL call whose failure is read from the error queue and errno:
 * both cleared, so what they hold afterwards is that call's. */
static void ssl_call_prep(void)
{
    ERR_clear_error();
    errno = 0;
}

/* -EAGAIN with what to wait for, or 0 when err is no retry. */
static int want_of(struct rio__tls *t, int err)
{
    if (err == SSL_ERROR_WANT_READ) {
        t->want = RIO_TLS_WANT_READ;
        return -EAGAIN;
    }
    if (err == SSL_ERROR_WANT_WRITE) {
        t->want = RIO_TLS_WANT_WRITE;
        return -EAGAIN;
    }
    return 0;
}

/* The server's hello (its random) arrived. */
static bool server_spoke(const struct rio__tls *t)
{
    uint8_t r[SSL3_RANDOM_SIZE] = {0};
    static const uint8_t zero[SSL3_RANDOM_SIZE];

    return SSL_get_server_random(t->ssl, r, sizeof(r)) == sizeof(r) &&
           memcmp(r, zero, sizeof(r)) != 0;
}

int rio__tls_handshake(struct rio__tls *t, char *why, size_t whylen)
{
    int r, err, ret;

    if (t->done)
        return 0;
    ssl_call_prep();
    r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        t->done = true;
        return 0;
    }
    err = SSL_get_error(t->ssl, r);
    ret = want_of(t, err);
    if (ret)
        return ret;
    if (err == SSL_ERROR_SSL && t->client) {
        long v = SSL_get_verify_result(t->ssl);
        if (v != X509_V_OK) {
            why_set(why, whylen, "TLS: certificate verify failed: %s",
                    X509_verify_cert_error_string(v));
            return RIO_ETLSVERIFY;
        }
    }
    /* A server that answered with TLS speaks it: a handshake that breaks
     * after its ServerHello was damaged on the way (a flipped byte fails an
     * AEAD record) or cut, and is tried again like any damaged connection. */
    if (t->client && server_spoke(t)) {
        if (err == SSL_ERROR_SSL) {
            why_set(why, whylen, "TLS: handshake damaged: %s", ssl_reason());
            return -EPROTO;
        }
        why_set(why, whylen, "%s", "TLS: the server closed the connection in the handshake");
        return -ECONNRESET;
    }
    if (err == SSL_ERROR_SSL)
        why_set(why, whylen, "TLS: handshake failed: %s", ssl_reason());
    else if (errno && errno != EAGAIN && why && whylen)
        snprintf(why, whylen, "TLS: handshake failed: %s%s", strerror(errno),
                 t->client ? " (does the server speak TLS?)" : "");
    else
        why_set(why, whylen, "%s",
                "TLS: the peer closed the connection in the handshake (does it speak TLS?)");
    return RIO_ETLS;
}

ssize_t rio__tls_read(struct rio__tls *t, void *buf, size_t n)
{
    size_t got = 0;
    int r, err, ret;

    ssl_call_prep();
    r = SSL_read_ex(t->ssl, buf, n, &got);
    if (r == 1)
        return (ssize_t)got;
    err = SSL_get_error(t->ssl, r);
    ret = want_of(t, err);
    if (ret)
        return ret;
    if (err == SSL_ERROR_ZERO_RETURN)
        return 0;
    if (err == SSL_ERROR_SYSCALL)
        return errno && errno != EAGAIN ? -errno : 0;
    return -EPROTO; /* a record failed its check, or broke TLS */
}

size_t rio__tls_pending_in(const struct rio__tls *t)
{
    return SSL_has_pending(t->ssl) ? 1 : 0;
}

/* One SSL_write of at most a record: 1 when all of it went, -EAGAIN, or an error. */
static int write_one(struct rio__tls *t, const void *p, size_t len)
{
    size_t w = 0;
    int r, err, ret;

    ssl_call_prep();
    r = SSL_write_ex(t->ssl, p, len, &w);
    if (r == 1)
        return w == len ? 1 : -EPROTO; /* one record goes whole */
    err = SSL_get_error(t->ssl, r);
    ret = want_of(t, err);
    if (ret)
        return ret;
    if (err == SSL_ERROR_SYSCALL)
        return errno ? -errno : -EPIPE;
    return -EPROTO;
}

int rio__tls_flush(struct rio__tls *t)
{
    if (t->pend) {
        int r = write_one(t, t->stage, t->pend);
        if (r < 0)
            return r;
        t->pend = 0;
    }
    BIO *w = SSL_get_wbio(t->ssl);
    if (BIO_wpending(w) > 0) {
        errno = 0;
        if (BIO_flush(w) != 1) {
            if (BIO_should_retry(w)) {
                t->want = RIO_TLS_WANT_WRITE;
                return -EAGAIN;
            }
            return errno ? -errno : -EPIPE;
        }
    }
    return 0;
}

bool rio__tls_has_pending_out(const struct rio__tls *t)
{
    return t->pend != 0 || (t->ssl && BIO_wpending(SSL_get_wbio(t->ssl)) > 0);
}

ssize_t rio__tls_writev(struct rio__tls *t, const struct iovec *iov, int n)
{
    size_t total = 0, off = 0;
    int i = 0, r;

    r = rio__tls_flush(t);
    if (r < 0)
        return r;
    for (;;) {
        while (i < n && off == iov[i].iov_len) {
            i++;
            off = 0;
        }
        if (i == n)
            break;
        const uint8_t *src;
        size_t len;
        if (iov[i].iov_len - off >= RIO_TLS_RECORD) {
            /* A full record straight from the caller's buffer. */
            src = (const uint8_t *)iov[i].iov_base + off;
            len = RIO_TLS_RECORD;
        } else {
            /* Small pieces (headers, fixed fields, tails) share one record. */
            int j = i;
            size_t o = off;
            len = 0;
            while (j < n && len < RIO_TLS_RECORD) {
                size_t take = iov[j].iov_len - o;
                if (take > RIO_TLS_RECORD - len)
                    take = RIO_TLS_RECORD - len;
                memcpy(t->stage + len, (const uint8_t *)iov[j].iov_base + o, take);
                len += take;
                o += take;
                if (o == iov[j].iov_len) {
                    j++;
                    o = 0;
                }
            }
            src = t->stage;
        }
        r = write_one(t, src, len);
        if (r == -EAGAIN) {
            /* Encrypted and partly on its way: it is ours now. */
            if (src != t->stage)
                memcpy(t->stage, src, len);
            t->pend = len;
        } else if (r < 0) {
            return total ? (ssize_t)total : r;
        }
        total += len;
        /* Step over len bytes of iov. */
        size_t left = len;
        while (left) {
            size_t k = iov[i].iov_len - off;
            if (left < k) {
                off += left;
                break;
            }
            left -= k;
            i++;
            off = 0;
        }
        if (r == -EAGAIN)
            break;
    }
    /* What the buffer holds leaves now (or the caller waits for POLLOUT). */
    if (!t->pend) {
        r = rio__tls_flush(t);
        if (r < 0 && r != -EAGAIN && !total)
            return r;
    }
    return (ssize_t)total;
}

const char *rio__tls_ktls(const struct rio__tls *t)
{
    bool tx = t->ssl && BIO_get_ktls_send(SSL_get_wbio(t->ssl));
    bool rx = t->ssl && BIO_get_ktls_recv(SSL_get_rbio(t->ssl));
    return tx && rx ? "tx+rx" : tx ? "tx" : rx ? "rx" : "none";
}

bool rio__tls_looks_like_record(const uint8_t *p, size_t n)
{
    /* content type alert (21) or handshake (22), version 3.x */
    return n >= 2 && (p[0] == 21 || p[0] == 22) && p[1] == 3;
}

void rio__tls_sig_block(struct rio__tls_sigguard *g)
{
    sigset_t pend, blk;

    sigemptyset(&blk);
    sigaddset(&blk, SIGPIPE);
    g->was_pending = sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &blk, &g->old);
}

void rio__tls_sig_restore(struct rio__tls_sigguard *g)
{
    sigset_t pend, blk;

    sigemptyset(&blk);
    sigaddset(&blk, SIGPIPE);
    if (!g->was_pending && sigpending(&pend) == 0 && sigismember(&pend, SIGPIPE)) {
        struct timespec zero = {0, 0};
        (void)sigtimedwait(&blk, NULL, &zero);
    }
    pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}
