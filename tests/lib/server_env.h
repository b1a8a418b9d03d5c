/* SPDX-License-Identifier: Apache-2.0 */
/*
 * server_env.h: start a real railiod for a test, and a tiny blocking client
 * that speaks the wire protocol directly (no engine, no transport), so the
 * server's tests depend on nothing but src/proto.
 *
 *     struct srv_env e;
 *     const char *args[] = {"--memory", "64M", NULL};
 *     srv_start(&e, args);                  // --listen 127.0.0.1:0 --port-file ...
 *     struct wc c;
 *     wc_connect(&c, e.addr[0]);
 *     wc_hello(&c, NULL);
 *     uint64_t gen = wc_put(&c, "k", buf, n, chunk);
 *     ...
 *     wc_close(&c);
 *     srv_stop(&e);                         // SIGTERM, wait; returns the exit status
 *
 * The server runs in the test's process group (the harness kills the group
 * when a test ends, whatever happened, even after a failed assertion, which
 * _exits); an atexit hook also stops it when a test exits normally without
 * srv_stop. Its log goes to the test's stderr (ctest prints it for a failed
 * test), or with SRV_LOG_FILE=1 to a file that srv_dump_log prints.
 * Every call has a timeout; failures end the test through T_FAIL.
 */
#ifndef RIO_TEST_SERVER_ENV_H
#define RIO_TEST_SERVER_ENV_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
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

#include "core/checksum.h"
#include "proto/proto.h"
#include "railio.h"
#include "t.h"

#define SRV_MAX_ADDRS 16
#define SRV_MAX_ARGS 64

struct srv_env {
    pid_t pid;
    char dir[128];
    char port_file[192];
    char log[192];
    unsigned naddr;
    char addr[SRV_MAX_ADDRS][80];
    char metrics[80];
    char s3[80]; /* the S3 gateway's address (--s3-listen), "" if none */
    int exited;  /* srv_stop reaped it */
    /* Set between srv_prepare and srv_start_listen to run another program
     * (e.g. "$T_BUILD_DIR/railio") with a first argument (e.g. "serve"). */
    const char *bin;
    const char *subcommand;
};

void srv_dump_log(const struct srv_env *e);

/* Lines of the server's log file (started with SRV_LOG_FILE=1) that
 * contain needle; 0 when there is no log file. */
unsigned srv_log_count(const struct srv_env *e, const char *needle);

/* Path of the railiod under test: $T_BUILD_DIR/railiod. */
void srv_binary(char *out, size_t cap);

/* Write a token file in the server's directory (call after srv_prepare). */
void srv_write_token(struct srv_env *e, const char *token, char *path, size_t cap);

/* Create the temporary directory, to place files in it before
 * srv_start_listen. Not before srv_start, which prepares e itself (the
 * first directory would be forgotten, and left behind). */
void srv_prepare(struct srv_env *e);

/*
 * Start railiod with --listen (listen, or one loopback listener on a free
 * port when NULL), --port-file and the NULL-terminated extra args, then wait
 * (up to 10 s) until it has written its ports. e must come from srv_prepare.
 */
void srv_start_listen(struct srv_env *e, const char *listen, const char *const *extra);

/* srv_prepare(e), then srv_start_listen(e, NULL, extra). */
void srv_start(struct srv_env *e, const char *const *extra);

/* Wait up to timeout_ms for the server to exit; its wait status, or -1. */
int srv_wait(struct srv_env *e, unsigned timeout_ms);

/* SIGTERM, wait up to 15 s (then SIGKILL); returns the exit code, or -1 when
 * it had to be killed or died of a signal. Removes the temporary directory. */
int srv_stop(struct srv_env *e);
/* kill -9 the server and reap it (no drain, no clean-up of its own). */
void srv_kill9(struct srv_env *e);

/* ------------------------------------------------------ the wire client */

struct wc;
/* srv_start, then c connected to its first listener and said HELLO. */
void srv_start_wc(struct srv_env *e, const char *const *extra, struct wc *c);
/* c closed, then the server stopped: its exit status must be 0. */
#define srv_end_wc(e, c) srv__end_wc((e), (c), __FILE__, __LINE__)
void srv__end_wc(struct srv_env *e, struct wc *c, const char *file, int line);

struct wc {
    int fd;
    uint64_t next_id;
    struct rio_proto_sess sess; /* frame checks; keyed after AUTH */
};

/* Connect with timeouts of timeout_s; rcvbuf > 0 sets SO_RCVBUF first. */
int wc_try_connect_ex(struct wc *c, const char *addr, unsigned timeout_s, int rcvbuf);

int wc_try_connect(struct wc *c, const char *addr, unsigned timeout_s);

void wc_connect(struct wc *c, const char *addr);
/* wc_connect, then HELLO (no token). */
void wc_open(struct wc *c, const char *addr);

void wc_close(struct wc *c);
/* wc_close on each of c[0..n). */
void wc_close_all(struct wc *c, unsigned n);

/* A "Vm...:" field of /proc/PID/status in KiB. */
uint64_t srv_proc_kb(pid_t pid, const char *field);

/* Send all of iov; 0 or -errno. */
int wc_sendv(struct wc *c, struct iovec *iov, int n);

int wc_send_raw(struct wc *c, const void *p, size_t n);

/* Send one request: header, then body parts a (alen) and b (blen), with
 * its tag: after a when b is PUT_CHUNK data, else after both (docs/protocol.md). */
int wc_send2(struct wc *c, int op, uint64_t id, const void *a, size_t alen, const void *b,
             size_t blen);

/* The start of a PUT_CHUNK of len data bytes: header, fixed fields and tag,
 * no data (the caller sends it, or not). */
int wc_chunk_head(struct wc *c, uint64_t upload, uint64_t index, uint64_t xxh, uint32_t len);

int wc_read_full(struct wc *c, void *p, size_t n);

/* Receive one response; *body is malloc'ed (free it) or NULL when empty:
 * its control part, or a READ's data (whose xxh3 was checked), or a
 * GET_ONE's control part followed by its bytes (checked), and
 * h->body_len says that length (tag excluded). Returns 0, RIO_ECLOSED on
 * EOF, RIO_EPROTO on a bad header or a frame check that failed,
 * RIO_ECHECKSUM on READ data that does not match its xxh3, -errno. */
int wc_recv(struct wc *c, struct rio_proto_hdr *h, uint8_t **body);

/* One request and its response (no pipelining): the response's status, or
 * a transport error (RIO_ECLOSED, -errno). *body as wc_recv (NULL allowed). */
int wc_call(struct wc *c, int op, const void *a, size_t alen, const void *b, size_t blen,
            uint8_t **body, uint32_t *body_len);

/* A HELLO request m in its version 1 framing (check in caps); the answer's
 * status, its body as wc_recv. */
int wc_hello_raw(struct wc *c, const struct rio_proto_hello *m, uint8_t **body, uint32_t *blen);

/* HELLO (and AUTH when token is not NULL). Returns the AUTH status (0 when
 * no AUTH was needed); fills *hr (its rail pointers borrow *keep, freed by
 * the caller) when hr is not NULL. */
int wc_hello_ex(struct wc *c, const char *token, struct rio_proto_hello_resp *hr, uint8_t **keep);

void wc_hello(struct wc *c, const char *token);

int wc_put_open(struct wc *c, const char *key, uint64_t size, uint64_t chunk, uint32_t ttl_ms,
                uint64_t *upload);

int wc_put_chunk(struct wc *c, uint64_t upload, uint64_t index, uint64_t xxh, const void *data,
                 size_t len);

int wc_put_commit(struct wc *c, uint64_t upload, uint64_t nchunks, const uint64_t *xxh,
                  const char *etag, uint64_t *gen);

/* DELETE of key with the generation gen after it (sent as given, 0 too). */
int wc_delete_if(struct wc *c, const char *key, uint64_t gen);

/* PUT_COMMIT with, when with_cond, the condition if_gen after the list
 * (sent as given, 0 included: docs/protocol.md). */
int wc_put_commit_if(struct wc *c, uint64_t upload, uint64_t nchunks, const uint64_t *xxh,
                     const char *etag, int with_cond, uint64_t if_gen, uint64_t *gen);

void wc_etag(const void *data, size_t n, char etag[33]);
/* PUT_ONE of data (len bytes, one chunk of chunk), its etag wc_etag's: the
 * status, and the generation (status 0). _ex sends m as given. */
int wc_put_one(struct wc *c, const char *key, const void *data, size_t len, uint64_t chunk,
               uint64_t *gen);
int wc_put_one_ex(struct wc *c, const struct rio_proto_put_one *m, const void *data, size_t len,
                  uint64_t *gen);

uint64_t wc_nchunks(uint64_t size, uint64_t chunk);

/* The checksum list of data split in chunks (malloc'ed). */
uint64_t *wc_xxh_list(const uint8_t *data, uint64_t size, uint64_t chunk);

/*
 * A whole PUT over conns[0..nconns) (chunk i on conns[i % nconns]); returns
 * the generation, fails the test on any error.
 */
uint64_t wc_put_multi(struct wc *conns, unsigned nconns, const char *key, const uint8_t *data,
                      uint64_t size, uint64_t chunk);

uint64_t wc_put(struct wc *c, const char *key, const uint8_t *data, uint64_t size, uint64_t chunk);

/* LOOKUP: status; on success *d (its xxh borrows *keep, which the caller frees). */
int wc_lookup(struct wc *c, const char *key, struct rio_proto_desc *d, uint8_t **keep);

/* READ [off, off+len) of generation gen into dst (len bytes); the status. */
int wc_read(struct wc *c, const char *key, uint64_t gen, uint64_t off, uint32_t len, void *dst);

int wc_delete(struct wc *c, const char *key);

int wc_ping(struct wc *c);

/* STAT: the server's counters (fails the test on any error). */
struct rio_proto_stat_resp wc_stat(struct wc *c);

/* Wait until the peer closes the connection (EOF or reset) within
 * timeout_ms, discarding anything it sends first; 0, or -ETIMEDOUT. */
int wc_wait_closed(struct wc *c, unsigned timeout_ms);

/* GET http://addr/metrics with a raw socket; malloc'ed text, or NULL. */
char *srv_http_get(const char *addr, const char *path);

/* Value of a metric line "name{labels} value" (exact name+labels), or -1. */
double srv_metric(const char *text, const char *series);

/* The value of one series on the server's metrics endpoint (started with
 * --metrics 127.0.0.1:0); fails the test when the scrape fails. */
double srv_scrape(struct srv_env *e, const char *series);

#endif
