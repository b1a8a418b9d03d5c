/* SPDX-License-Identifier: Apache-2.0 */
/* railio: the command-line tool. Verbs are rows of cmds[] (cli.h says what a
 * verb's run() does with the frame). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tcp_cli.h"
#include "cli/tree.h"
#include "core/secret.h"
#include "core/url.h"
#include "railio.h"

static const char bench_usage[] =
    "usage: railio bench TARGET [OPTIONS]   (railio bench TARGET --help for its options)\n"
    "  bench mock [--json] [--size N] [--chunk N]   capacity model sweep over mock rails\n"
    "  bench railio://HOST:PORT|serve [--ceiling] [--repeat N] [--put] [--json]\n"
    "        [--sizes L] [--conc L] [--depth L] [--batch L]   sweep against railiod\n"
    "  bench file:///DIR [--json] ...                file:// against fio\n"
    "  bench s3://BUCKET[?endpoint=URL] [--sizes L] [--chunk N] [--depths L]\n"
    "        [--discard] [--json]                     s3:// against curl and aws s3 cp\n"
    "  bench rados://POOL[?conf=F] [--sizes L] [--conc L] [--chunk N] [--reps N] [--json]\n"
    "                                                 rados:// against librados aio and rados\n"
    "  bench --rails-from-harness N --rate R[,R..] [--json] [--svg F]\n"
    "                                                 veth rails sweep against iperf3 (root)\n";

static int run_bench(const char *cmd, int argc, char **argv)
{
    (void)cmd;
    if (argc < 1 || !strcmp(argv[0], "--help") || !strcmp(argv[0], "-h")) {
        fputs(bench_usage, argc < 1 ? stderr : stdout);
        return argc < 1 ? RIO_CLI_EXIT_USAGE : 0;
    }
    return rio_cli_bench(argc, argv);
}

static int run_serve(const char *cmd, int argc, char **argv)
{
    (void)cmd;
    return rio_cli_serve(argc, argv); /* railiod answers --help itself */
}

static const char demo_usage[] =
    "usage: railio demo [mock]\n"
    "  demo        railiod on loopback: PUT, LOOKUP, GET of 256 MiB over 1 and 4 conns\n"
    "  demo mock   the capacity model over mock rails (in process)\n"
    "options: -h, --help   this text\n";

int rio_cli_demo_cmd(const char *cmd, int argc, char **argv)
{
    struct rio_cli cl;
    int rc = rio_cli_parse(&cl, cmd, demo_usage, NULL, 0, 1, argc, argv);

    if (rc >= 0)
        return rc;
    if (cl.npos == 1 && strcmp(cl.pos[0], "mock"))
        return rio_cli_usage_error(&cl, "unknown demo '%s'", cl.pos[0]);
    return cl.npos ? rio_cli_demo(0, cl.pos + 1) : rio_cli_demo_server(0, cl.pos);
}

static int run_version(const char *cmd, int argc, char **argv)
{
    struct rio_cli cl;
    int rc = rio_cli_parse(&cl, cmd, "usage: railio version [--json]\n", NULL, 0, 0, argc, argv);

    if (rc >= 0)
        return rc;
    if (cl.json) {
        char v[32];
        snprintf(v, sizeof(v), "%d.%d.%d", RIO_VERSION_MAJOR, RIO_VERSION_MINOR, RIO_VERSION_PATCH);
        rio_cli_json_begin(stdout, "version");
        rio_cli_json_kstr(stdout, "version", v);
        rio_cli_json_kstr(stdout, "backends", rio_backends());
        rio_cli_json_end(stdout);
        return 0;
    }
    printf("railio %d.%d.%d\nbackends: %s\n", RIO_VERSION_MAJOR, RIO_VERSION_MINOR,
           RIO_VERSION_PATCH, rio_backends());
    return 0;
}

/* The verbs. A helper adding one adds a row (and its file under src/cli/). */
static const struct rio_cli_cmd cmds[] = {
    {"put", rio_cli_objects, RIO_CLI_CMD_SIGNALS,
     "put URL/KEY FILE|-         store a file or stdin (streamed where the backend allows)"},
    {"get", rio_cli_objects, RIO_CLI_CMD_SIGNALS,
     "get URL/KEY [FILE|DIR|-]   fetch KEY into a file, a directory or stdout"},
    {"stat", rio_cli_objects, 0, "stat URL/KEY               print the descriptor"},
    {"rm", rio_cli_tree_cmd, RIO_CLI_CMD_SIGNALS,
     "rm [-r] URL/KEY...         remove keys, or with -r every key beneath PREFIX/"},
    {"cp", rio_cli_tree_cmd, RIO_CLI_CMD_SIGNALS,
     "cp [-r] SRC DST            copy between backends (each a URL/KEY, a file, a DIR or -)"},
    {"ls", rio_cli_tree_cmd, RIO_CLI_CMD_SIGNALS,
     "ls [-r] URL[/PREFIX]...    list keys (-r: everything beneath; wildcards: * ? [...])"},
    {"cat", rio_cli_tree_cmd, RIO_CLI_CMD_SIGNALS, "cat URL/KEY...             objects to stdout"},
    {"fsck", rio_cli_fsck, 0,
     "fsck rados://POOL          remove chunks no head refers to (--dry-run, --grace)"},
    {"bench", run_bench, 0, "bench TARGET ...           measure against a reference (--help)"},
    {"demo", rio_cli_demo_cmd, 0,
     "demo [mock]                railiod on loopback / the mock model"},
    {"serve", run_serve, 0, "serve [railiod options]    run the server (same as railiod)"},
    {"version", run_version, 0, "version                    print the version and the backends"},
    {NULL, NULL, 0, NULL},
};

static void usage(FILE *f)
{
    fprintf(f, "usage: railio COMMAND [OPTIONS] [ARGS]\n\ncommands:\n");
    for (const struct rio_cli_cmd *c = cmds; c->name; c++)
        fprintf(f, "  %s\n", c->summary);
    fprintf(f, "\n"
               "URL/KEY is SCHEME://AUTHORITY/KEY[?options], e.g. mock://lab/obj?paths=4.\n"
               "Every command takes -h/--help, -q (quiet), -v (verbose), --json, options\n"
               "before or after the arguments, and RIO_* environment variables.\n"
               "Exit status: 0 ok, 1 failed, 2 usage, 3 not found, 4 access denied,\n"
               "5 unreachable or timed out, 6 verification failed, 7 out of space,\n"
               "8 outcome unknown, 9 writing stdout failed, 10 the object changed (a condition\n"
               "did not hold), 128+N killed by signal N.\n"
               "See railio(1) and docs/cli.md.\n");
}

/* stdout flushed and closed: a write error (a full disk, /dev/full) fails
 * the command even when everything else went well. */
static int finish_stdout(const char *cmd, int rc)
{
    int bad = fflush(stdout) != 0 || ferror(stdout);
    bad |= fclose(stdout) != 0;
    if (bad) {
        fprintf(stderr, "railio %s: writing stdout: %m\n", cmd);
        if (rc == 0)
            rc = RIO_CLI_EXIT_OUTPUT;
    }
    return rc;
}

static bool is_common_opt(const char *a)
{
    /* -q, -v and their bundles (-qv), as every verb's parser takes them. */
    if (a[0] == '-' && a[1] && a[1] != '-' && !a[strspn(a + 1, "qv") + 1])
        return true;
    return !strcmp(a, "--quiet") || !strcmp(a, "--verbose") || !strcmp(a, "--json");
}

/* A standard descriptor closed by the caller (railio ... >&- 2>&-, a
 * daemon's child) is reopened on /dev/null before anything is opened, so
 * that no file, socket or pipe of ours takes its number: stderr's messages
 * went into the signal pipe (cancelling the command) or whatever else got
 * fd 2, stdout's into a socket or a file being downloaded. Opened the way
 * that fails as the closed one did: stdin for writing only, stdout and
 * stderr for reading only (a read or a write fails EBADF, stat >&- is
 * still exit 9). */
static void std_fds_open(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            int n = open("/dev/null", fd == 0 ? O_WRONLY : O_RDONLY);
            if (n >= 0 && n != fd) /* cannot be: the lowest free number is fd */
                close(n);
        }
}

/*
 * A secret in a URL argument (token=, a secret key: core/url.h's list; the
 * password of a user:password@) is
 * overwritten with '*' where the kernel shows the command line
 * (/proc/PID/cmdline, ps), the CLI working on a copy. Other users of the
 * machine read a process's command line: `railio get
 * 'railio://h/k?token=T'` showed T to them for as long as it ran. (Before
 * this runs it is still there for an instant: token_file= keeps it out.)
 */
static void argv_hide_secrets(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strstr(argv[i], "://"))
            continue;
        /* Secret memory (core/secret.h): a core dump does not carry it. */
        char *copy = rio__secret_strdup(argv[i]);
        if (!copy)
            return; /* no memory: shown, as before */
        /* The copy (never freed) holds the secret; the original, masked,
         * is what /proc shows. */
        if (rio__url_mask_in_place(argv[i]))
            argv[i] = copy;
        else
            rio__secret_free(copy);
    }
}

int main(int argc, char **argv)
{
    std_fds_open();
    argv_hide_secrets(argc, argv);
    if (argc < 2) {
        usage(stderr);
        return RIO_CLI_EXIT_USAGE;
    }
    /* The common options may come before the verb too (railio --json stat
     * URL): they move behind it, where every verb's parser takes them. */
    int k = 1;
    while (k < argc && is_common_opt(argv[k]))
        k++;
    if (k > 1 && k < argc) {
        char *verb = argv[k];
        memmove(argv + 2, argv + 1, (size_t)(k - 1) * sizeof(*argv));
        argv[1] = verb;
    }
    const char *name = argv[1];
    if (!strcmp(name, "-h") || !strcmp(name, "--help") || !strcmp(name, "help")) {
        usage(stdout);
        return finish_stdout(name, 0);
    }
    if (!strcmp(name, "--version"))
        name = "version";
    for (const struct rio_cli_cmd *c = cmds; c->name; c++) {
        if (strcmp(c->name, name))
            continue;
        if ((c->flags & RIO_CLI_CMD_SIGNALS) && rio_cli_signals_init() < 0) {
            fprintf(stderr, "railio %s: cannot set up signal handling\n", name);
            return RIO_CLI_EXIT_FAIL;
        }
        int rc = finish_stdout(name, c->run(c->name, argc - 2, argv + 2));
        int sig = rio_cli_interrupted();
        if (sig) {
            /* End by the signal itself: the parent (a shell loop) sees it. */
            sigset_t set;
            sigemptyset(&set);
            sigaddset(&set, sig);
            signal(sig, SIG_DFL);
            pthread_sigmask(SIG_UNBLOCK, &set, NULL);
            raise(sig);
            return 128 + sig;
        }
        return rc;
    }
    fprintf(stderr, "railio: unknown command '%s'\n", name);
    usage(stderr);
    return RIO_CLI_EXIT_USAGE;
}
