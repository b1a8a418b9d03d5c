/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio serve: runs the server. The server is its own program, railiod,
 * installed next to railio; serve replaces this process with it (same pid,
 * so signals and exit status are the server's own) and passes every
 * argument through: `railio serve --listen ...` is `railiod --listen ...`.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "core/alloc.h"

/* argv[0..argc) are the arguments after "serve". Returns only on failure. */
int rio_cli_serve(int argc, char **argv)
{
    char path[PATH_MAX];
    char **args;
    int ret;

    ret = rio_cli_sibling("railiod", path, sizeof(path));
    if (ret < 0) {
        fprintf(stderr, "railio serve: cannot find railiod: %s\n", strerror(-ret));
        return 1;
    }
    /* argv of the exec: "railiod", the arguments, NULL. */
    args = rio__calloc((size_t)argc + 2, sizeof(*args));
    if (!args) {
        fprintf(stderr, "railio serve: out of memory\n");
        return 1;
    }
    args[0] = path;
    for (int i = 0; i < argc; i++)
        args[i + 1] = argv[i];
    args[argc + 1] = NULL;
    fflush(NULL);
    execv(path, args);
    fprintf(stderr, "railio serve: cannot run %s: %s (it is built and installed next to railio)\n",
            path, strerror(errno));
    rio__free(args);
    return 127;
}
