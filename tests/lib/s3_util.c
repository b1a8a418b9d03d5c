/* SPDX-License-Identifier: Apache-2.0 */
/* s3_util: the peers and checks of the s3:// tests (see s3_util.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ceph_env.h"
#include "s3_util.h"

static pid_t su_owner;
char su_dir[512];

static void su_atexit(void)
{
    char path[700];
    int pid;

    if (getpid() != su_owner)
        return;
    snprintf(path, sizeof(path), "%s/fault.pid", su_dir);
    pid = t_read_int(path);
    if (pid > 0)
        kill(pid, SIGKILL);
    t_rm_tree(su_dir);
}

__attribute__((constructor)) static void su_init(void)
{
    const char *tmp = getenv("TMPDIR");

    su_owner = getpid();
    snprintf(su_dir, sizeof(su_dir), "%s/rio-s3-%d", tmp && *tmp ? tmp : "/tmp", (int)su_owner);
    atexit(su_atexit);
}

int su_fault_port(void)
{
    char port_file[700], pid_file[700], script[1024];
    int port;

    snprintf(port_file, sizeof(port_file), "%s/fault.port", su_dir);
    snprintf(pid_file, sizeof(pid_file), "%s/fault.pid", su_dir);
    port = t_read_int(port_file);
    if (port > 0)
        return port;
    if (t_sh("command -v python3 >/dev/null 2>&1") != 0)
        T_SKIP("python3 is missing (scripts/install-deps.sh installs it)");
    mkdir(su_dir, 0700);
    t_harness_path(script, sizeof(script), "s3fault.py");
    /* Its own session: it outlives the test that started it (a test's
     * process group is killed on timeout), and later tests reuse it. */
    if (t_sh("py=/usr/bin/python3; [ -x $py ] || py=python3; "
             "setsid $py '%s' --port-file '%s' --owner %d "
             "</dev/null >'%s/fault.log' 2>&1 & echo $! >'%s'",
             script, port_file, (int)su_owner, su_dir, pid_file) != 0)
        T_FAIL("could not start s3fault.py");
    for (int i = 0; i < 200; i++) {
        port = t_read_int(port_file);
        if (port > 0)
            return port;
        t_sleep_ms(50);
    }
    T_FAIL("s3fault.py did not write its port within 10 s (see %s/fault.log)", su_dir);
}

void su_fault_stats(int port, unsigned *fired, unsigned *uploads)
{
    char out[700];
    unsigned req = 0, obj = 0;

    snprintf(out, sizeof(out), "%s/stats", su_dir);
    if (t_sh("curl -s -m 5 -o '%s' http://127.0.0.1:%d/_stats", out, port) != 0)
        T_FAIL("curl /_stats failed");
    FILE *f = fopen(out, "r");
    if (!f ||
        fscanf(f, "requests=%u fired=%u uploads=%u objects=%u", &req, fired, uploads, &obj) != 4)
        T_FAIL("bad /_stats reply");
    fclose(f);
}

unsigned su_fault_count(int port, const char *name)
{
    char out[700], line[512], want[64];
    const char *at;
    unsigned v = 0;

    snprintf(out, sizeof(out), "%s/stats", su_dir);
    if (t_sh("curl -s -m 5 -o '%s' http://127.0.0.1:%d/_stats", out, port) != 0)
        T_FAIL("curl /_stats failed");
    FILE *f = fopen(out, "r");
    if (!f || !fgets(line, sizeof(line), f))
        T_FAIL("bad /_stats reply");
    fclose(f);
    snprintf(want, sizeof(want), " %s=", name);
    size_t wl = strlen(want);
    if (!strncmp(line, want + 1, wl - 1)) /* the first field: no space before it */
        at = line + wl - 1;
    else if ((at = strstr(line, want)))
        at += wl;
    if (!at || sscanf(at, "%u", &v) != 1)
        T_FAIL("/_stats has no %s: %s", name, line);
    return v;
}

void su_rgw_args(void)
{
    char args[64];

    snprintf(args, sizeof(args), "--rgw %d --memstore 6G", t_free_port());
    t_ceph_set_args(args);
}

const char *su_rgw(const char *bucket)
{
    static char endpoint[128];
    char path[700], line[512];
    FILE *f;

    t_ceph_conf();
    snprintf(path, sizeof(path), "%s/s3.env", t_ceph_dir());
    f = fopen(path, "r");
    if (!f)
        T_FAIL("no %s: ceph.sh --rgw did not write it", path);
    while (fgets(line, sizeof(line), f)) {
        char *eq = strchr(line, '=');
        if (!eq)
            continue;
        *eq = '\0';
        line[strcspn(line, "\n")] = '\0';
        eq[1 + strcspn(eq + 1, "\n")] = '\0';
        if (!strcmp(line, "S3_ENDPOINT"))
            snprintf(endpoint, sizeof(endpoint), "%s", eq + 1);
        else if (!strncmp(line, "AWS_", 4))
            setenv(line, eq + 1, 1);
    }
    fclose(f);
    unsetenv("AWS_SESSION_TOKEN");
    unsetenv("RIO_S3_ENDPOINT");
    unsetenv("AWS_ENDPOINT_URL");
    if (!endpoint[0])
        T_FAIL("no S3_ENDPOINT in %s", path);
    /* 200 when created, 409 when it exists already: both fine. */
    t_sh("curl -s -o /dev/null -m 20 --aws-sigv4 aws:amz:us-east-1:s3 --user \"$AWS_ACCESS_KEY_ID:"
         "$AWS_SECRET_ACCESS_KEY\" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' -X PUT '%s/%s'",
         endpoint, bucket);
    return endpoint;
}

int su_curl(const char *endpoint, const char *args, const char *path, char **out, size_t *len)
{
    char body[700], code[700];
    int st, status = -1;

    snprintf(body, sizeof(body), "%s/curl.body.%d", su_dir, (int)getpid());
    snprintf(code, sizeof(code), "%s/curl.code.%d", su_dir, (int)getpid());
    mkdir(su_dir, 0700);
    st = t_sh("curl -s -m 120 --aws-sigv4 aws:amz:us-east-1:s3 --user \"$AWS_ACCESS_KEY_ID:"
              "$AWS_SECRET_ACCESS_KEY\" -H 'x-amz-content-sha256: UNSIGNED-PAYLOAD' %s "
              "-o '%s' -w '%%{http_code}' '%s/%s' >'%s'",
              args, body, endpoint, path, code);
    if (st == 0)
        status = t_read_int(code);
    if (out) {
        size_t n = 0;

        if (access(body, F_OK) == 0) {
            *out = (char *)t_slurp(body, &n);
        } else {
            *out = calloc(1, 1);
            if (!*out)
                T_FAIL("calloc");
        }
        if (len)
            *len = n;
    }
    unlink(body);
    unlink(code);
    return status;
}

unsigned su_curl_count(const char *endpoint, const char *path, const char *needle)
{
    char *b;
    unsigned n = 0;

    if (su_curl(endpoint, "", path, &b, NULL) != 200)
        T_FAIL("curl GET %s failed", path);
    for (const char *p = b; (p = strstr(p, needle)); p += strlen(needle))
        n++;
    free(b);
    return n;
}
