/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mitm_env.h: put tests/harness/mitm.py (a TCP proxy that damages traffic on
 * request) between a test's client and a server.
 *
 *     struct mitm_env m;
 *     const char *args[] = {"--proto", "railio", "--mode", "flip", "--dir", "c2s",
 *                           "--nth", "3", NULL};
 *     mitm_start(&m, "127.0.0.1:5000", args);   // clients connect to m.addr
 *     ...
 *     T_EQ(mitm_faults(&m), 1);
 *     mitm_stop(&m);                            // SIGTERM, wait, remove its files
 *
 * An atexit hook stops the proxy when a test exits without mitm_stop. It
 * runs in a process group of its own, so that when a failed assertion or
 * the harness ends the test at once, it outlives the test by up to half a
 * second, notices its parent is gone and removes its files and directory
 * before it exits. Failures end the test through T_FAIL; no python3 skips
 * it.
 */
#ifndef RIO_TEST_MITM_ENV_H
#define RIO_TEST_MITM_ENV_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "t.h"

#define MITM_MAX_ARGS 64

struct mitm_env {
    pid_t pid;
    int port;
    char dir[128];
    char summary[192];
    char port_file[192];
    char addr[32]; /* "127.0.0.1:PORT", for clients */
    int exited;
};

/* Path of mitm.py: $T_SOURCE_DIR/tests/harness, else next to this header. */
void mitm_script(char *out, size_t cap);

/*
 * Start the proxy in front of target ("127.0.0.1:PORT") with the
 * NULL-terminated extra args, and wait up to 10 s for its port.
 */
void mitm_start(struct mitm_env *m, const char *target, const char *const *args);

/* The summary's JSON text (malloc'ed, "" before the first write). */
char *mitm_summary(struct mitm_env *m);

/* The integer after the nth (0-based) "key": of the summary, or -1. */
long mitm_field(struct mitm_env *m, const char *key, int nth);

/* Faults applied so far (the summary is rewritten before a fault's bytes
 * leave, so a client that saw them reads the count that includes them). */
int mitm_faults(struct mitm_env *m);

/* Connections accepted, and messages framed in "c2s" or "s2c"; these may
 * lag by up to 100 ms. */
int mitm_connections(struct mitm_env *m);

int mitm_messages(struct mitm_env *m, const char *dir);

/* SIGTERM (the proxy writes its final summary and exits), wait up to 5 s
 * (then SIGKILL); the summary stays readable until mitm_stop. */
void mitm_halt(struct mitm_env *m);

/* mitm_halt, then remove its files. */
void mitm_stop(struct mitm_env *m);

#endif
