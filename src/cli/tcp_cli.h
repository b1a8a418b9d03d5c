/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The railio:// parts of the CLI: the server demo (demo_server.c), the
 * loopback bench (bench_tcp.c), and starting a private railiod next to this
 * program for either.
 */
#ifndef RIO_CLI_TCP_H
#define RIO_CLI_TCP_H

#include <stddef.h>
#include <sys/types.h>

/**
 * `railio demo` with a server: start railiod on loopback, PUT a 256 MiB
 * object, LOOKUP it, GET it over 1 connection and over 4, verify, print a
 * table, stop the server. Returns the process exit code (0: all verified).
 */
int rio_cli_demo_server(int argc, char **argv);

/**
 * `railio bench railio://HOST:PORT[?options] [flags]`: a GET (and PUT) sweep
 * of object size x concurrency x depth x batch against that server, with an
 * optional iperf3 ceiling measured in the same run. url may also be
 * "serve[?options]" to start a private railiod on loopback. Returns the exit
 * code.
 */
int rio_cli_bench_tcp(const char *url, int argc, char **argv);

/* A railiod this process started. */
struct rio_cli_srv {
    pid_t pid;
    char dir[64];  /* temporary directory: ports, log */
    char addr[80]; /* "127.0.0.1:PORT" of its listener */
    char log[128];
};

/*
 * Start the railiod that sits next to this program (/proc/self/exe) with
 * --listen 127.0.0.1:0, a port file and the NULL-terminated extra args; wait
 * up to 10 s for its port. It dies with this process (PR_SET_PDEATHSIG).
 * Returns 0, or -errno (-ENOENT: no railiod next to railio).
 */
int rio_cli_srv_start(struct rio_cli_srv *s, const char *const *extra);
/* SIGTERM, wait up to 10 s (then SIGKILL), remove the directory. Returns the
 * server's exit code, or -1 if it had to be killed. */
int rio_cli_srv_stop(struct rio_cli_srv *s);

#endif
