/* SPDX-License-Identifier: Apache-2.0 */
/* mitm_env: tests/harness/mitm.py between a test's client and a server (see mitm_env.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "mitm_env.h"
#include "t.h"
#include "tlib.h"
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void mitm__rmdir(struct mitm_env *m)
{
    t_rm_tree(m->dir);
    m->dir[0] = '\0';
}

/* At exit, a proxy the test did not stop is killed, its files removed. */
static void mitm_at_exit(void *arg)
{
    struct mitm_env *m = arg;

    if (m->pid > 0 && !m->exited)
        t_proc_kill(m->pid);
    mitm__rmdir(m);
}

void mitm_script(char *out, size_t cap)
{
    t_harness_path(out, cap, "mitm.py");
}

void mitm_start(struct mitm_env *m, const char *target, const char *const *args)
{
    char script[512];
    const char *argv[MITM_MAX_ARGS];
    int n = 0;

    memset(m, 0, sizeof(*m));
    mitm_script(script, sizeof(script));
    if (access(script, R_OK) != 0)
        T_FAIL("%s: %s", script, strerror(errno));
    t_mkdtemp(m->dir, sizeof(m->dir), "railio-mitm");
    snprintf(m->port_file, sizeof(m->port_file), "%s/port", m->dir);
    snprintf(m->summary, sizeof(m->summary), "%s/summary.json", m->dir);
    t_on_exit(mitm_at_exit, m);

    argv[n++] = "python3";
    argv[n++] = script;
    argv[n++] = "--listen";
    argv[n++] = "127.0.0.1:0";
    argv[n++] = "--target";
    argv[n++] = target;
    argv[n++] = "--port-file";
    argv[n++] = m->port_file;
    argv[n++] = "--summary";
    argv[n++] = m->summary;
    t_argv_add(argv, &n, MITM_MAX_ARGS, args);
    m->pid = t_spawn("python3", argv, 1, NULL);
    char text[64];
    int st = 0, port = 0;
    int r = t_wait_file(m->pid, m->port_file, 10000, text, sizeof(text), &st);
    if (r == -1) {
        m->exited = 1;
        mitm__rmdir(m);
        if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
            T_SKIP("python3 not found");
        T_FAIL("mitm.py exited during start-up (status %d)", st);
    }
    if (r == -2)
        T_FAIL("mitm.py did not write %s within 10 s", m->port_file);
    if (sscanf(text, "%d", &port) != 1 || port <= 0 || port > 65535)
        T_FAIL("mitm.py wrote a bad port file");
    m->port = port;
    snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%d", port);
}

char *mitm_summary(struct mitm_env *m)
{
    char *text = calloc(1, 1 << 20);
    if (!text)
        T_FAIL("out of memory");
    FILE *f = fopen(m->summary, "r");
    if (f) {
        size_t len = fread(text, 1, (1 << 20) - 1, f);
        text[len] = '\0';
        fclose(f);
    }
    return text;
}

/* The integer after "key": in the summary's text (the first one), or -1. */
long mitm_field(struct mitm_env *m, const char *key, int nth)
{
    char *text = mitm_summary(m), pat[64];
    const char *p = text;
    long v = -1;

    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    for (int i = 0; p && i <= nth; i++) {
        p = strstr(p, pat);
        if (p && i < nth)
            p += strlen(pat);
    }
    if (p)
        v = strtol(p + strlen(pat), NULL, 10);
    free(text);
    return v;
}

static long mitm__read(struct mitm_env *m, const char *key)
{
    long v = mitm_field(m, key, 0);

    return v < 0 ? 0 : v;
}

int mitm_faults(struct mitm_env *m)
{
    return (int)mitm__read(m, "faults");
}

int mitm_connections(struct mitm_env *m)
{
    return (int)mitm__read(m, "connections");
}

int mitm_messages(struct mitm_env *m, const char *dir)
{
    return (int)mitm__read(m, dir);
}

void mitm_halt(struct mitm_env *m)
{
    if (m->pid > 0 && !m->exited) {
        t_proc_stop(m->pid, 5000);
        m->exited = 1;
    }
}

void mitm_stop(struct mitm_env *m)
{
    mitm_halt(m);
    mitm__rmdir(m);
    t_on_exit_cancel(m);
}
