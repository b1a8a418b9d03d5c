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

static struct mitm_env *mitm__live[8];
static void mitm__rmdir(struct mitm_env *m)
{
    char tmp[256];
    if (!m->dir[0])
        return;
    unlink(m->port_file);
    unlink(m->summary);
    snprintf(tmp, sizeof(tmp), "%s.tmp", m->port_file);
    unlink(tmp);
    rmdir(m->dir);
    m->dir[0] = '\0';
}

static void mitm__atexit(void)
{
    for (unsigned i = 0; i < sizeof(mitm__live) / sizeof(mitm__live[0]); i++) {
        struct mitm_env *m = mitm__live[i];
        if (!m)
            continue;
        if (m->pid > 0 && !m->exited) {
            kill(m->pid, SIGKILL);
            waitpid(m->pid, NULL, 0);
        }
        mitm__rmdir(m);
        mitm__live[i] = NULL;
    }
}

void mitm_script(char *out, size_t cap)
{
    t_harness_path(out, cap, "mitm.py");
}

void mitm_start(struct mitm_env *m, const char *target, const char *const *args)
{
    static int registered;
    char script[512];
    const char *argv[MITM_MAX_ARGS];
    int n = 0;

    memset(m, 0, sizeof(*m));
    mitm_script(script, sizeof(script));
    if (access(script, R_OK) != 0)
        T_FAIL("%s: %s", script, strerror(errno));
    snprintf(m->dir, sizeof(m->dir), "/tmp/railio-mitm-XXXXXX");
    if (!mkdtemp(m->dir))
        T_FAIL("mkdtemp: %s", strerror(errno));
    snprintf(m->port_file, sizeof(m->port_file), "%s/port", m->dir);
    snprintf(m->summary, sizeof(m->summary), "%s/summary.json", m->dir);
    if (!registered) {
        atexit(mitm__atexit);
        registered = 1;
    }
    for (unsigned i = 0; i < sizeof(mitm__live) / sizeof(mitm__live[0]); i++)
        if (!mitm__live[i]) {
            mitm__live[i] = m;
            break;
        }

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
    for (; args && *args; args++) {
        if (n >= MITM_MAX_ARGS - 1)
            T_FAIL("mitm_start: more than %d arguments", MITM_MAX_ARGS - n);
        argv[n++] = *args;
    }
    argv[n] = NULL;

    fflush(NULL);
    m->pid = fork();
    if (m->pid < 0)
        T_FAIL("fork: %s", strerror(errno));
    if (m->pid == 0) {
        setpgid(0, 0);
        execvp("python3", (char *const *)argv);
        _exit(127);
    }
    uint64_t t0 = t_now_ms();
    for (;;) {
        int st;
        if (waitpid(m->pid, &st, WNOHANG) == m->pid) {
            m->exited = 1;
            mitm__rmdir(m);
            if (WIFEXITED(st) && WEXITSTATUS(st) == 127)
                T_SKIP("python3 not found");
            T_FAIL("mitm.py exited during start-up (status %d)", st);
        }
        FILE *f = fopen(m->port_file, "r");
        if (f) {
            int port = 0;
            int ok = fscanf(f, "%d", &port);
            fclose(f);
            if (ok != 1 || port <= 0 || port > 65535)
                T_FAIL("mitm.py wrote a bad port file");
            m->port = port;
            snprintf(m->addr, sizeof(m->addr), "127.0.0.1:%d", port);
            return;
        }
        if (t_now_ms() - t0 > 10000)
            T_FAIL("mitm.py did not write %s within 10 s", m->port_file);
        usleep(10000);
    }
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
static long mitm__field(const char *text, const char *key)
{
    char pat[64];
    snprintf(pat, sizeof(pat), "\"%s\": ", key);
    const char *p = strstr(text, pat);
    return p ? strtol(p + strlen(pat), NULL, 10) : -1;
}

static long mitm__read(struct mitm_env *m, const char *key)
{
    char *text = mitm_summary(m);
    long v = mitm__field(text, key);
    free(text);
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
        int st;
        uint64_t t0 = t_now_ms();
        kill(m->pid, SIGTERM);
        for (;;) {
            if (waitpid(m->pid, &st, WNOHANG) == m->pid)
                break;
            if (t_now_ms() - t0 > 5000) {
                kill(m->pid, SIGKILL);
                waitpid(m->pid, &st, 0);
                break;
            }
            usleep(5000);
        }
        m->exited = 1;
    }
}

void mitm_stop(struct mitm_env *m)
{
    mitm_halt(m);
    mitm__rmdir(m);
    for (unsigned i = 0; i < sizeof(mitm__live) / sizeof(mitm__live[0]); i++)
        if (mitm__live[i] == m)
            mitm__live[i] = NULL;
}
