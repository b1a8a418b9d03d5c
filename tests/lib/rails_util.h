/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Helpers for the rails tests (tests/integration/test_rails*.c): N veth rails
 * between a client and a server network namespace built by
 * tests/harness/rails.sh, a railiod listening on every server end, iperf3
 * ceilings over the same rails, and the client (this process) inside the
 * client namespace.
 *
 * Both ends run inside the namespaces: the test's own thread enters the
 * server namespace (setns) to fork railiod, then the client namespace for
 * the rest of the test, so the engine and transport threads the client
 * starts live there too. Nothing in the root namespace ever routes to the
 * rails' 10.99.0.0/16 addresses.
 *
 *     struct rl r;
 *     rl_up(&r, 4, "1gbit");                // or "1gbit,1gbit,500mbit,250mbit"
 *     rl_server(&r, NULL);                  // railiod on 10.99.i.2:7070, then enter the client ns
 *     double mbps = rl_iperf(&r, 0xf, 1);   // rails 0..3, server -> client, Mbit/s summed
 *     ...
 *     rl_down(&r);                          // also at exit
 */
#ifndef RIO_TEST_RAILS_UTIL_H
#define RIO_TEST_RAILS_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>

#include "tcp_util.h"

#define RL_PORT 7070
#define RL_IPERF_PORT 5201

struct rl {
    unsigned n;
    char id[32];
    char script[512];
    char cns[64], sns[64];
    int cfd, sfd, rootfd;
    struct srv_env srv;
    int have_srv;
};

/* Remove the rails (and kill what still runs in their namespaces: only
 * processes this test started live there). */
void rl_down(struct rl *r);

/* Build n rails (rates: one tc rate, or one per rail, comma-separated), or
 * skip the test when this machine cannot host network namespaces. */
void rl_up(struct rl *r, unsigned n, const char *rates);

/* railiod in the server namespace on every rail (10.99.i.2:7070), with the
 * NULL-terminated extra args; then this thread enters the client namespace. */
void rl_server(struct rl *r, const char *const *extra);

/* The server is still running (did not crash). */
int rl_server_alive(struct rl *r);

/* Fault helpers (rails.sh fail/heal); 0 on success. */
void rl_fail(struct rl *r, unsigned rail, const char *how);

void rl_heal(struct rl *r, unsigned rail);

void rl_rate(struct rl *r, unsigned rail, const char *rate);

/*
 * The iperf3 ceiling over the rails in mask, all at once (one server and
 * one client process per rail, 2 s after 1 s omitted): summed Mbit/s (1e6)
 * received. reverse: server -> client (a GET's direction).
 */
double rl_iperf(struct rl *r, unsigned mask, int reverse, double *per_rail);

/*
 * A destination buffer as an application that reads into memory it already
 * uses: 2 MiB aligned, huge pages asked for, and touched once before the
 * measured call. A fresh malloc'ed buffer pays one page fault per 4 KiB
 * inside the transport's recv() (on this VM that cost more CPU than the
 * transfer itself), which would measure the allocator, not the rails.
 */
uint8_t *rl_buf(size_t n);

/* A buffer of n pattern bytes of seed in memory like rl_buf's (a source the
 * application already uses; filling 4 KiB pages, and the kernel's first read
 * of them, cost seconds of CPU per 512 MiB on this kind of VM). */
uint8_t *rl_pattern(size_t n, uint64_t seed);

void rl__put(struct rio_client *c, const char *key, size_t n, uint64_t seed, const char *file,
             int line);
#define rl_put(c, key, n, seed) rl__put((c), (key), (n), (seed), __FILE__, __LINE__)

/* Options for the rails tests: 1 MiB chunks, depth 4, short cooldowns, op
 * timeout and the transport's timeouts low enough that a dead rail is
 * noticed in about a second. RIO_DEPTH / RIO_CHUNK_SIZE in the environment
 * override depth and chunk (for the sweeps in docs/tuning.md). */
void rl_opts(struct rio_options *o);

/* The client URL: the first rail's server address; the others come from
 * HELLO and are paired with this namespace's addresses by subnet.
 * RAILS_URL_PARAMS in the environment adds parameters (e.g. conns=2). */
void rl_url(char *out, size_t cap, const char *params);

double rl_mbit(uint64_t bytes, uint64_t ns);

/*
 * User CPU that processes other than this test and its railiod took while a
 * measured call ran, in cores on average over the call: another job, a
 * stray busy loop. rio_stats' run-queue wait does not see it when the
 * client's threads still get a core and the rails simply move less (a
 * shell spinning on one of the two cores took a 4-rail PUT after a rail
 * fault from 0.95 to 0.70 of iperf3, its threads barely waiting).
 * rl_busy_start before the call, rl_busy_end after.
 */
struct rl_busy {
    uint64_t t0, mach0, own0, busy0, steal0;
    double others; /* cores of user time taken by other processes */
    double busy;   /* cores the machine spent on anything (all but idle, iowait) */
    double steal;  /* cores the hypervisor took from this VM */
};

void rl_busy_start(struct rl_busy *b);

void rl_busy_end(struct rl_busy *b);

/* A miss is not railio's to answer for: a sanitized build, a starved call
 * (its threads spent a quarter of it in the run queue), one the engine
 * itself calls software-bound, or other processes (or the hypervisor, as
 * steal) took a quarter of a core or more (b may be NULL). */
bool rl_excused(const struct rio_stats *st, const struct rl_busy *b);

void rl__ratio(const char *file, int line, const char *what, double got, double ceil, double need,
               const struct rio_stats *st, const struct rl_busy *b);
#define rl_ratio(what, got, ceil, need, st, busy)                                                  \
    rl__ratio(__FILE__, __LINE__, (what), (got), (ceil), (need), (st), (busy))

#endif
