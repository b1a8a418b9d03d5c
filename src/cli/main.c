/* SPDX-License-Identifier: Apache-2.0 */
/* railio: the command-line tool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/tcp_cli.h"
#include "cli/tree.h"
#include "railio.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: railio COMMAND [ARGS]\n"
        "\n"
        "commands:\n"
        "  bench mock [--json] [--size N] [--chunk N]   capacity model sweep over mock rails\n"
        "  bench railio://HOST:PORT|serve [--ceiling] [--repeat N] [--put] [--json]\n"
        "        [--sizes L] [--conc L] [--depth L] [--batch L]   sweep against railiod\n"
        "  bench file:///DIR [--json] ...                file:// against fio\n"
        "  bench s3://BUCKET[?endpoint=URL] [--sizes L] [--chunk N] [--depths L]\n"
        "        [--discard] [--json]                     s3:// against curl and aws s3 cp\n"
        "  bench rados://POOL[?conf=F] [--sizes L] [--conc L] [--chunk N] [--reps N] [--json]\n"
        "                                                 rados:// against librados aio and rados\n"
        "  bench --rails-from-harness N --rate R[,R..] [--json] [--svg F]\n"
        "                                                 veth rails sweep against iperf3 (root)\n"
        "  demo                    railiod on loopback: PUT, LOOKUP, GET over 1 and 4 conns\n"
        "  demo mock               the capacity model over mock rails\n"
        "  serve [railiod options] run the server (same as railiod; --help for options)\n"
        "  put URL/KEY FILE|-      store a file or stdin (streamed where the backend allows)\n"
        "  get URL/KEY FILE|-      fetch KEY into a file or stdout\n"
        "  stat URL/KEY            print the descriptor\n"
        "  rm URL/KEY              remove KEY\n"
        "  cp SRC DST              copy between backends (each a URL/KEY, a file or -)\n"
        "  ls [-r] URL[/PREFIX]    list keys (--json: one object per line)\n"
        "  cat URL/KEY...          objects to stdout\n"
        "  rm [-r] URL/KEY...      remove several keys, or every key beneath PREFIX/\n"
        "  cp -r SRC DST           a directory or prefix to a directory or prefix\n"
        "  version                 print the version and the backends (URL schemes)\n"
        "\n"
        "URL/KEY is SCHEME://AUTHORITY/KEY[?options], e.g. mock://lab/obj?paths=4.\n"
        "Options: --json (machine-readable stats), RIO_* environment variables.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "-h") || !strcmp(cmd, "--help") || !strcmp(cmd, "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("railio %d.%d.%d\nbackends: %s\n", RIO_VERSION_MAJOR, RIO_VERSION_MINOR,
               RIO_VERSION_PATCH, rio_backends());
        return 0;
    }
    if (!strcmp(cmd, "bench"))
        return rio_cli_bench(argc - 2, argv + 2);
    if (!strcmp(cmd, "serve"))
        return rio_cli_serve(argc - 2, argv + 2);
    if (!strcmp(cmd, "demo"))
        return argc > 2 && !strcmp(argv[2], "mock") ? rio_cli_demo(argc - 3, argv + 3)
                                                    : rio_cli_demo_server(argc - 2, argv + 2);
    if (!strcmp(cmd, "ls"))
        return rio_cli_ls(argc - 2, argv + 2);
    if (!strcmp(cmd, "cat"))
        return rio_cli_cat(argc - 2, argv + 2);
    if ((!strcmp(cmd, "rm") || !strcmp(cmd, "cp")) && rio_cli_tree_wants(cmd, argc - 2, argv + 2))
        return !strcmp(cmd, "rm") ? rio_cli_rm_tree(argc - 2, argv + 2)
                                  : rio_cli_cp_tree(argc - 2, argv + 2);
    if (!strcmp(cmd, "put") || !strcmp(cmd, "get") || !strcmp(cmd, "stat") || !strcmp(cmd, "rm") ||
        !strcmp(cmd, "cp"))
        return rio_cli_objects(cmd, argc - 2, argv + 2);
    fprintf(stderr, "railio: unknown command '%s'\n", cmd);
    usage(stderr);
    return 2;
}
