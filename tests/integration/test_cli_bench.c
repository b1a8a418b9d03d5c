/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/*
 * railio bench through the real binary: the options a bench reads from its
 * URL follow the transport's syntax (the one boolean syntax of every option,
 * any case; a value that is not one is refused with its name), so the bench
 * and the transport it drives never disagree about direct= or sync=.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"

/* Run cmd, its stdout and stderr into out (NUL-terminated); the exit status. */
static int run_capture(const char *cmd, char *out, size_t cap)
{
    char full[8300];
    FILE *p;
    size_t n;
    int st;

    snprintf(full, sizeof(full), "%s 2>&1", cmd);
    p = popen(full, "r");
    T_NOTNULL(p);
    n = fread(out, 1, cap - 1, p);
    out[n] = '\0';
    st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* sync=OFF and direct=FALSE are "off" in every option of the library; the
 * bench read both as on (it matched "0", "off" and "false" by hand). */
TEST(bench_file_reads_booleans_as_the_transport_does)
{
    static const struct {
        const char *opts, *want;
    } cases[] = {
        {"sync=OFF&direct=FALSE", "\"direct\":0,\"sync\":0"},
        {"sync=ON&direct=auto", "\"direct\":1,\"sync\":1"},
    };
    const char *dir = t_scratch_dir("rio-clibench");
    char cmd[8192], out[1 << 16];

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        snprintf(cmd, sizeof(cmd),
                 "'%s' bench 'file://%s?%s' --size 1M --chunks 1M --queues 1 "
                 "--inflight 1 --modes seqwrite --no-fio --json",
                 cli_bin(), dir, cases[i].opts);
        int rc = run_capture(cmd, out, sizeof(out));
        if (rc != 0)
            T_FAIL("%s: bench exited %d: %s", cases[i].opts, rc, out);
        if (!strstr(out, cases[i].want))
            T_FAIL("%s: no %s in the JSON: %s", cases[i].opts, cases[i].want, out);
    }
}

/* A value that is no boolean is refused, naming the option, before any run. */
TEST(bench_file_refuses_a_bad_boolean_by_name)
{
    const char *dir = t_scratch_dir("rio-clibench");
    char cmd[8192], out[1 << 16];

    snprintf(cmd, sizeof(cmd), "'%s' bench 'file://%s?sync=maybe' --size 1M --no-fio", cli_bin(),
             dir);
    T_EQ(run_capture(cmd, out, sizeof(out)), 2);
    T_NOTNULL(strstr(out, "sync=maybe: expected on or off"));
    snprintf(cmd, sizeof(cmd), "'%s' bench 'file://%s?direct=sometimes' --size 1M --no-fio",
             cli_bin(), dir);
    T_EQ(run_capture(cmd, out, sizeof(out)), 2);
    T_NOTNULL(strstr(out, "direct=sometimes: expected on, off or auto"));
}
