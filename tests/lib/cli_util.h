/* SPDX-License-Identifier: Apache-2.0 */
/* Helpers for the tests that run the railio binary. */
#ifndef RIO_TEST_CLI_UTIL_H
#define RIO_TEST_CLI_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "t.h"
#include "tlib.h"

/* $T_BUILD_DIR/railio (build/railio when unset). Static storage. */
const char *cli_bin(void);
/* Create or truncate path with n bytes. */
#define cli_write_file t_write_file

/* Monotonic seconds. */
static inline double cli_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static char cli__scratch[64];
static inline void cli__scratch_rm(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", cli__scratch);
    if (cli__scratch[0] && system(cmd) != 0)
        fprintf(stderr, "cleanup of %s failed\n", cli__scratch);
}

/* A scratch directory (removed at exit) holding store/ (empty) and in.bin
 * (n pattern bytes of seed, also into obj when not NULL); its path. */
static inline const char *cli_scratch(const char *prefix, uint8_t *obj, size_t n, uint64_t seed)
{
    char path[128];
    t_mkdtemp(cli__scratch, sizeof(cli__scratch), prefix);
    atexit(cli__scratch_rm);
    snprintf(path, sizeof(path), "%s/store", cli__scratch);
    T_EQ(mkdir(path, 0755), 0);
    uint8_t *b = obj ? obj : malloc(n);
    T_NOTNULL(b);
    t_fill_pattern(b, n, seed);
    snprintf(path, sizeof(path), "%s/in.bin", cli__scratch);
    t_write_file(path, b, n);
    if (!obj)
        free(b);
    return cli__scratch;
}

/* Whether python3 runs (the JSON tests parse with it). */
static inline bool cli_have_python(void)
{
    return system("python3 -c 'import json' >/dev/null 2>&1") == 0;
}

/* A loopback port nothing listens on. */
static inline int cli_dead_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    T_TRUE(fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    T_EQ(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
    T_EQ(getsockname(fd, (struct sockaddr *)&a, &al), 0);
    close(fd);
    return ntohs(a.sin_port);
}

/*
 * Run `railio ARGS` through sh -c (ARGS may hold redirections): its stdout
 * into out (NUL-terminated, truncated to cap; out NULL: stdout discarded
 * unless ARGS redirects it), stderr to the test's stderr. The exit status,
 * or 128 + the signal that killed it.
 */
static inline int cli_run(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int cli_run(char *out, size_t cap, const char *fmt, ...)
{
    char args[4096], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "%s %s", cli_bin(), args);
    FILE *p = popen(cmd, "r");
    T_NOTNULL(p);
    char sink[4096];
    size_t n = 0, r;
    for (;;) {
        bool room = out && n < cap - 1;
        r = fread(room ? out + n : sink, 1, room ? cap - 1 - n : sizeof(sink), p);
        if (!r)
            break;
        n += room ? r : 0;
    }
    if (out)
        out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

#endif
