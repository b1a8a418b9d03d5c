/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/* T_TIMEOUT 180 */
/*
 * The progress line (stderr on a terminal: script(1) gives railio one) for
 * the transfers whose library call reports none: URL-to-URL cp and a PUT
 * streamed from stdin; none with -q or --json.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"

#define OBJ_SIZE (8 * 1024 * 1024)

static const char *dir;

/* What railio ARGS printed on a terminal (stdin from DIR/in.bin through a
 * pipe), into out. */
static void on_tty(char *out, size_t cap, const char *args)
{
    char cmd[4096];
    snprintf(cmd, sizeof(cmd), "script -qec \"cat %s/in.bin | %s %s\" /dev/null", dir, cli_bin(),
             args);
    FILE *p = popen(cmd, "r");
    T_NOTNULL(p);
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    T_EQ(pclose(p), 0);
}

static void setup(void)
{
    if (system("script -qec true /dev/null >/dev/null 2>&1") != 0)
        T_SKIP("no script(1) to give railio a terminal");
    dir = cli_scratch("rio-prog", NULL, OBJ_SIZE, 6);
    T_EQ(cli_run(NULL, 0, "put -q file://%s/store/a %s/in.bin", dir, dir), 0);
}

TEST(cp_url_to_url_and_stdin_put_show_progress)
{
    static char out[65536];
    char args[1024];
    setup();
    /* Each 1 MiB chunk held 100 ms: about a second, many progress reports. */
    snprintf(args, sizeof(args),
             "cp 'file://%s/store/a?faults=delay:delay=100&chunk=1M' file://%s/store/b", dir, dir);
    on_tty(out, sizeof(out), args);
    T_NOTNULL(strstr(out, "\rcp "));
    T_NOTNULL(strstr(out, "%"));
    snprintf(args, sizeof(args), "put 'file://%s/store/c?faults=delay:delay=100&chunk=1M' -", dir);
    on_tty(out, sizeof(out), args);
    T_NOTNULL(strstr(out, "\rput "));
    /* -q and --json: none. */
    snprintf(args, sizeof(args),
             "cp -q 'file://%s/store/a?faults=delay:delay=100&chunk=1M' file://%s/store/b", dir,
             dir);
    on_tty(out, sizeof(out), args);
    T_NULL(strstr(out, "\rcp "));
    snprintf(args, sizeof(args), "put --json 'file://%s/store/c?faults=delay:delay=100&chunk=1M' -",
             dir);
    on_tty(out, sizeof(out), args);
    T_NULL(strstr(out, "\rput "));
}
