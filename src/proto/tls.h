/* SPDX-License-Identifier: Apache-2.0 */
/*
 * TLS under the railio wire protocol (docs/protocol.md, "TLS"), shared by the
 * railio:// transport (src/transport/tcp/) and railiod (src/server/conn.c).
 * OpenSSL over a non-blocking socket: every call returns at once, and
 * -EAGAIN says which readiness to wait for (rio__tls_want). The protocol
 * inside the TLS stream is unchanged.
 *
 * One struct rio__tls per connection, used by one thread at a time.
 */
#ifndef RIO_PROTO_TLS_H
#define RIO_PROTO_TLS_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

/* What an -EAGAIN waits for. */
#define RIO_TLS_WANT_READ 1
#define RIO_TLS_WANT_WRITE 2

/* The largest record's plaintext: what one write takes at most. */
#define RIO_TLS_RECORD 16384u

struct rio__tls {
    SSL *ssl;
    bool client;
    bool done;      /* handshake finished */
    int want;       /* RIO_TLS_WANT_* of the last -EAGAIN */
    size_t pend;    /* bytes in stage already taken from the caller, not yet sent */
    uint8_t *stage; /* RIO_TLS_RECORD bytes: small pieces gathered, a blocked record kept */
};

/**
 * A client context: verify the server against ca_file (PEM bundle; NULL: the
 * system store) unless verify is false. Returns NULL with a reason in why.
 */
SSL_CTX *rio__tls_client_ctx(const char *ca_file, bool verify, char *why, size_t whylen);
/** A server context with its certificate chain and key (PEM files). */
SSL_CTX *rio__tls_server_ctx(const char *cert_file, const char *key_file, char *why, size_t whylen);
void rio__tls_ctx_free(SSL_CTX *ctx);

/**
 * Start TLS on a connected non-blocking fd. name (client only, may be NULL):
 * the name sent in SNI and verified against the certificate (a host name or
 * an IP address). 0 or -ENOMEM / RIO_ETLS.
 */
int rio__tls_init(struct rio__tls *t, SSL_CTX *ctx, int fd, bool client, const char *name);
/** Free what rio__tls_init made (the fd stays open). Accepts a zeroed t. */
void rio__tls_cleanup(struct rio__tls *t);

/**
 * Drive the handshake: 0 when done, -EAGAIN (see t->want), or RIO_ETLSVERIFY
 * (the peer's certificate failed verification), RIO_ETLS (the peer does not
 * speak TLS, or the handshake failed for good), or, on a client whose server
 * already answered with TLS, -EPROTO (a damaged handshake) / -ECONNRESET
 * (cut): both worth another try. why gets a line naming the reason.
 */
int rio__tls_handshake(struct rio__tls *t, char *why, size_t whylen);

/**
 * Read up to n bytes: the count, 0 at end of stream, -EAGAIN, or -EPROTO
 * (a damaged or forged record) / -errno.
 */
ssize_t rio__tls_read(struct rio__tls *t, void *buf, size_t n);
/** Plaintext already decrypted and not yet read (no readiness event comes for it). */
size_t rio__tls_pending_in(const struct rio__tls *t);

/**
 * Write a prefix of iov: the count taken (as sendmsg; bytes once taken are
 * the connection's to send, so the caller may drop them), -EAGAIN, -EPROTO or
 * -errno. A record that could not leave yet is kept: rio__tls_flush sends it,
 * and writev does before it takes more.
 */
ssize_t rio__tls_writev(struct rio__tls *t, const struct iovec *iov, int n);
/** Send a kept record: 0 when nothing is left, -EAGAIN, or an error. */
int rio__tls_flush(struct rio__tls *t);
bool rio__tls_has_pending_out(const struct rio__tls *t);

/** Whether kernel TLS carries each direction of t ("tx", "rx" or "none"). */
const char *rio__tls_ktls(const struct rio__tls *t);

/*
 * OpenSSL writes to the socket with write(2): a peer that is gone raises
 * SIGPIPE. A library cannot ignore it for the process, so the client blocks
 * it in the calling thread around its TLS calls and takes back a SIGPIPE
 * they raised (railiod ignores SIGPIPE).
 */
struct rio__tls_sigguard {
    sigset_t old;
    bool was_pending;
};
void rio__tls_sig_block(struct rio__tls_sigguard *g);
void rio__tls_sig_restore(struct rio__tls_sigguard *g);

/** The bytes of a plain reader's first frame that show a TLS record (an alert or handshake). */
bool rio__tls_looks_like_record(const uint8_t *p, size_t n);

#endif
