/* SPDX-License-Identifier: Apache-2.0 */
/*
 * tlib: the helpers every test program shares (librio_testlib, built from
 * the .c files of tests/lib/ and linked into every test with the harness in t.c). One
 * definition of each: pattern buffers, sleeping and clocks, shell commands,
 * paths of the build and of tests/harness/, scratch directories removed at
 * exit, whole-file reads and writes, and the client checks every test ends
 * with (nothing in flight, nothing leaked).
 *
 * The helpers that assert are macros over t__*(..., __FILE__, __LINE__) so a
 * failure names the test's line, not the library's. The per-backend headers
 * (engine_util.h, tcp_util.h, s3_util.h, rados_util.h, server_env.h, ...)
 * declare the helpers of one kind of peer on top of these.
 */
#ifndef RIO_TEST_TLIB_H
#define RIO_TEST_TLIB_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "railio.h"
#include "t.h"

#define T_KIB 1024ull
#define T_MIB (1024ull * 1024ull)

/* Sanitizer builds run several times slower: timing thresholds relax.
 * gcc says which sanitizer it builds with by __SANITIZE_ADDRESS__ and
 * __SANITIZE_THREAD__, clang only by __has_feature: a test that asked gcc's
 * macros alone ran, under clang's TSan, the race it leaves out on purpose and
 * interposed pthread_create beside the runtime's (a crash in every thread). */
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define T_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define T_TSAN 1
#endif
#endif
#if !defined(T_ASAN) && defined(__SANITIZE_ADDRESS__)
#define T_ASAN 1
#endif
#if !defined(T_TSAN) && defined(__SANITIZE_THREAD__)
#define T_TSAN 1
#endif
#ifndef T_ASAN
#define T_ASAN 0
#endif
#ifndef T_TSAN
#define T_TSAN 0
#endif
#define T_SANITIZED (T_ASAN || T_TSAN)

/* ------------------------------------------------------------ memory */

/* A plain-malloc buffer of n bytes of the harness pattern for seed. */
uint8_t *t_pattern_buf(size_t n, uint64_t seed);
/* A plain-malloc buffer filled with one byte value, every page written (so
 * a timing test pays no first-touch page faults inside the transport). */
uint8_t *t_fill_buf(size_t n, int byte);
/* Number of bytes equal to v in p[0..n). */
size_t t_count_byte(const uint8_t *p, size_t n, uint8_t v);
/* MD5 of buf in lower-case hex, by OpenSSL directly (independent of the
 * library's streaming hasher). */
void t_md5_hex(const void *buf, size_t n, char hex[33]);

/* ------------------------------------------------------------ time */

uint64_t t_now_ns(void);
void t_sleep_ms(unsigned ms);

/* ------------------------------------------------------------ processes and files */

/* Run a shell command (stdio flushed first); its exit status, -1 if it did
 * not exit. */
int t_sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A shared object of C source code, built into so (cap bytes) to be
 * preloaded into a program the test runs (T_SHIM_ENV "so cmd ..."); skips
 * the test without a compiler. */
void t_build_shim(const char *code, char *so, size_t cap);
/* Under ASan a preloaded shim comes before its runtime: allowed. */
#define T_SHIM_ENV "ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD="
/* All n bytes sent (MSG_NOSIGNAL) or received on a socket: 0, or -1 (EOF,
 * an error or the socket's timeout). */
int t_send_all(int fd, const void *p, size_t n);
int t_recv_all(int fd, void *p, size_t n);
/* The first integer in a file, 0 when missing or unreadable. */
int t_read_int(const char *path);
/* A TCP port on 127.0.0.1 nothing listens on right now, below the kernel's
 * ephemeral range (a port from that range may become the source port of
 * another test's outgoing connection before a peer binds it); 0 if none. */
int t_free_port(void);
/* A listening TCP socket (backlog 64, close-on-exec) on 127.0.0.1 at a
 * port the kernel picks, its "127.0.0.1:PORT" in addr; fails the test on
 * error. Returns the socket. */
int t_listen_loopback(char *addr, size_t cap);
/* $T_SOURCE_DIR/tests/harness/NAME (the source tree of this build when
 * unset). Static storage per call site is not needed: out, cap. */
void t_harness_path(char *out, size_t cap, const char *name);
/* $T_BUILD_DIR/NAME (this build's directory when unset). */
void t_build_path(char *out, size_t cap, const char *name);

/* argv[*n...] = the NULL-ended extra, argv[*n] = NULL after it; fails the
 * test when argv (cap entries) cannot hold them and the NULL. */
void t_argv_add(const char **argv, int *n, int cap, const char *const *extra);
/* Fork and exec file (with a '/', as is; else looked up in PATH) with argv:
 * the child in its own process group when own_group, its stdout and stderr
 * into log when log is not NULL. The child's pid; fails the test when fork
 * fails. A child that cannot exec exits 127. */
pid_t t_spawn(const char *file, const char *const *argv, int own_group, const char *log);
/* Wait up to timeout_ms for child pid to exit: its wait status, or -1. */
int t_proc_wait(pid_t pid, unsigned timeout_ms);
/* Wait up to timeout_ms for child pid to write path (a port file): 0, its
 * text in text (NUL-terminated, at most cap - 1 bytes); -1 when the child
 * exited first (*status its wait status); -2 on timeout. */
int t_wait_file(pid_t pid, const char *path, unsigned timeout_ms, char *text, size_t cap,
                int *status);
/* SIGKILL and reap child pid. */
void t_proc_kill(pid_t pid);
/* SIGTERM, wait up to timeout_ms, then SIGKILL: the wait status, or -1
 * when it had to be killed. */
int t_proc_stop(pid_t pid, unsigned timeout_ms);
/* Run fn(arg) when the calling process exits, normally or through a failed
 * or skipped assertion (which runs the hooks, then _exits), not in its
 * forked children; t_on_exit_cancel(arg) drops it. A test killed by its
 * timeout runs none: the harness kills its process group then. */
void t_on_exit(void (*fn)(void *), void *arg);
void t_on_exit_cancel(void *arg);
/* Run the hooks registered by this process (each once). */
void t__run_exit_hooks(void);

/* Remove dir and everything below it (no error when it is gone). */
void t_rm_tree(const char *dir);
/* A fresh directory $TMPDIR/PREFIX-PID-XXXXXX (TMPDIR default /tmp), removed
 * by an exit hook of the process that made it. A failed test ends with
 * _exit: its directories, named after its process, are removed by a later
 * call once that process is gone. Returns the path (valid until exit). */
const char *t_scratch_dir(const char *prefix);
/* A fresh directory /tmp/PREFIX-XXXXXX into dir (cap bytes), which the
 * caller removes; fails the test on error. */
void t_mkdtemp(char *dir, size_t cap, const char *prefix);
/* Whole file at path, malloc'd (one spare byte); *n its size. Fails the
 * test if unreadable. */
uint8_t *t_slurp(const char *path, size_t *n);
/* Create or truncate path with n bytes; fails the test on error. */
void t_write_file(const char *path, const void *buf, size_t n);
/* How many names in dir (not below, not "." or "..") contain part (NULL:
 * any); fails the test if dir cannot be read. */
int t_dir_count(const char *dir, const char *part);

/* A source for rio_put_stream (t_piece_fill) handing out p[0..n) at most
 * step bytes a call, like a pipe; -EIO once off reaches fail_at (0: never). */
struct t_piece_src {
    const uint8_t *p;
    size_t n, off, step;
    size_t fail_at;
};
int64_t t_piece_fill(void *arg, void *buf, size_t cap);

/* ------------------------------------------------------------ options */

/* The option sets of the suites: small chunks, a fixed seed, short backoff
 * and cooldown so retries and path recovery take milliseconds, an op timeout
 * and a deadline that bound a hung test well under the harness timeout. */
enum t_profile {
    T_PROFILE_ENGINE, /* mock://: 64 KiB chunks, 2 s op timeout, 10 s deadline */
    T_PROFILE_TCP,    /* railio://: 64 KiB chunks, 5 s, 30 s */
    T_PROFILE_S3,     /* s3://: 5 retries, 8 s, 60 s */
    T_PROFILE_RADOS,  /* rados://: 10 s, 60 s */
};
void t_opts(struct rio_options *o, enum t_profile p);
/* t_opts with a chunk size and a depth. */
void t_opts_sized(struct rio_options *o, enum t_profile p, uint64_t chunk, unsigned depth);

/* ------------------------------------------------------------ clients */

/* Open a client for url or fail the test. */
struct rio_client *t__client_new(const char *url, const struct rio_options *o, const char *file,
                                 int line);
#define t_client_new(url, o) t__client_new((url), (o), __FILE__, __LINE__)

/*
 * The client is idle: every in-flight counter of the engine is zero
 * (invariant 3), and so is the transport's: mock:// (and any client with a
 * fault filter) holds no op and never saw an attempt submitted with stale
 * state (invariant 4), railio:// holds no request slot within 3 s (the time
 * for cancelled ops' answers to drain), rados:// has no op in flight.
 */
void t__idle(struct rio_client *c, const char *file, int line);
#define t_idle(c) t__idle((c), __FILE__, __LINE__)
/* Wait up to ms for the engine to have no op and no call in flight, then
 * t_idle (for a call that returns before its ops are drained). */
void t__wait_idle(struct rio_client *c, unsigned ms, const char *file, int line);
#define t_wait_idle(c, ms) t__wait_idle((c), (ms), __FILE__, __LINE__)
/* t_idle, destroy, and every rio__malloc block taken since alloc0 (the
 * value of rio__alloc_outstanding() before the client was opened) given
 * back; alloc0 < 0: no check (the harness checks at the test's end). */
void t__close(struct rio_client *c, int64_t alloc0, const char *file, int line);
#define t_close(c, alloc0) t__close((c), (alloc0), __FILE__, __LINE__)
/* rio__alloc_outstanding(), for t_close. */
int64_t t_alloc_now(void);

/* stderr into a scratch file between t_stderr_begin and t_stderr_end,
 * which puts it back and gives what was written (NUL-terminated, cut at
 * cap - 1 bytes). */
struct t_stderr {
    int fd, saved;
};
void t_stderr_begin(struct t_stderr *s);
void t_stderr_end(struct t_stderr *s, char *out, size_t cap);
/* rio_client_new(url, o) fails with RIO_EINVAL, gives no client, and says
 * want on stderr (a refused option names itself, e.g. "railio: disk=x:"). */
void t__client_refused(const char *url, const struct rio_options *o, const char *want,
                       const char *file, int line);
#define t_client_refused(url, o, want) t__client_refused((url), (o), (want), __FILE__, __LINE__)

/* PUT n bytes of pattern seed under key with call (NULL allowed); fails the
 * test on error. Returns the source buffer when keep (caller frees), else
 * NULL; *gen the new generation when gen is not NULL. */
uint8_t *t__put_pattern(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                        const struct rio_call *call, int keep, uint64_t *gen, const char *file,
                        int line);
#define t_put_pattern(c, key, n, seed)                                                             \
    (void)t__put_pattern((c), (key), (n), (seed), NULL, 0, NULL, __FILE__, __LINE__)
/* GET key into a fresh buffer with call (NULL allowed): exactly n bytes,
 * the pattern of seed, nothing written past the end. */
void t__get_check(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                  const struct rio_call *call, const char *file, int line);
#define t_get_check(c, key, n, seed) t__get_check((c), (key), (n), (seed), NULL, __FILE__, __LINE__)

/* key's descriptor is that of src (n bytes) at generation gen: its name,
 * size, chunk size and count, every chunk's xxh3 (required with need_etag,
 * else when the backend stores them) and the MD5 (the same). */
void t__desc_check(struct rio_client *c, const char *key, const uint8_t *src, uint64_t n,
                   uint64_t gen, uint64_t chunk, int need_etag, const char *file, int line);
#define t_desc_check(c, key, src, n, gen, chunk, need_etag)                                        \
    t__desc_check((c), (key), (src), (n), (gen), (chunk), (need_etag), __FILE__, __LINE__)
/* PUT n bytes of pattern seed, its descriptor (t_desc_check with the ETag
 * and checksums required), GET byte-exact, the client idle. */
void t__roundtrip(struct rio_client *c, const char *key, size_t n, uint64_t seed, uint64_t chunk,
                  const char *file, int line);
#define t_roundtrip(c, key, n, seed, chunk)                                                        \
    t__roundtrip((c), (key), (n), (seed), (chunk), __FILE__, __LINE__)

/* A big object's round trip: PUT n bytes of pattern seed (its ETag the
 * MD5 of the bytes or the fast etag of their chunks, never ""), STAT (the
 * same ETag), GET byte-exact, DELETE; the rates on stderr. */
void t__roundtrip_big(struct rio_client *c, const char *key, size_t n, uint64_t seed,
                      const char *file, int line);
#define t_roundtrip_big(c, key, n, seed)                                                           \
    t__roundtrip_big((c), (key), (n), (seed), __FILE__, __LINE__)

/* Parse and add one fault spec ("short:chunk=3:bytes=1000:count=1"). */
void t__fault(struct rio_client *c, const char *spec, const char *file, int line);
#define t_fault(c, spec) t__fault((c), (spec), __FILE__, __LINE__)
/* Faults fired so far (rio_mock_counters). */
uint64_t t_faults_fired(struct rio_client *c);

/* ------------------------------------------------------------ stats */

/* Sum of what every path carried, and the number of paths that carried any. */
uint64_t t_path_bytes(const struct rio_stats *st, unsigned *used);
uint64_t t_path_ops(const struct rio_stats *st);
/* One line of stats (and one a path) on stderr, for a test's log. */
void t_stats_print(const char *what, const struct rio_stats *st);

/* ------------------------------------------------------------ threads */

/* A GET run on its own thread: fill c, key, buf, cap (and call), start,
 * join; result, st and the times are set when it returns. */
struct t_get_job {
    struct rio_client *c;
    const char *key;
    void *buf;
    size_t cap;
    struct rio_call call;
    struct rio_stats st;
    int64_t result;
    uint64_t t_start_ns, t_end_ns;
    pthread_t th;
};
void t_get_job_start(struct t_get_job *j);
void t_get_job_join(struct t_get_job *j);

/* A cancel token fired from another thread: start t_fire_main on a
 * struct t_fire; it sleeps after_ms, notes when it fired and fires cx. */
struct t_fire {
    struct rio_cancel *cx;
    unsigned after_ms;
    uint64_t fired_at_ms; /* t_now_ms() when it fired */
};
void *t_fire_main(void *arg);

#endif
