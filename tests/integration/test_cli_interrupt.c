/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file;net */
/* T_TIMEOUT 120 */
/*
 * SIGINT and SIGTERM in the middle of a railio transfer (the fault filter
 * holds the peer's answers 20 s, so "the middle" is certain): the transfer
 * is cancelled, a PUT's upload is aborted on the server (railiod's uploads
 * gauge back to 0 with none dropped for a closed connection or a timeout),
 * no temporary file is left, and railio ends by the signal (130, 143) at
 * once, not after the 20 s. (The GETs here are interrupted before any chunk
 * was written: only a get that wrote a chunk keeps FILE.railio-tmp and its
 * resume record, test_cli_resume.)
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_util.h"
#include "server_env.h"

#define OBJ_SIZE (3 * 1024 * 1024 + 11)

static const char *dir;

static void setup(void)
{
    dir = cli_scratch("rio-intr", NULL, OBJ_SIZE, 3);
}

/* railio with argv (NULL-terminated, after "railio"), stdin from in_fd
 * (-1: /dev/null), stdout and stderr to /dev/null. */
static pid_t start(int in_fd, const char *const *args)
{
    const char *argv[16] = {"railio"};
    size_t n = 1;
    for (; args[n - 1] && n < 15; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    pid_t pid = fork();
    T_TRUE(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(in_fd >= 0 ? in_fd : nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        execv(cli_bin(), (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Its exit status (128 + the signal that ended it), and how long it took
 * from the signal. */
static int wait_exit(pid_t pid, double *secs)
{
    int st;
    double t0 = cli_now_s();
    T_EQ(waitpid(pid, &st, 0), pid);
    *secs = cli_now_s() - t0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* `railio get` of DIR/store/obj (put first) with faults into DIR/out.bin
 * (holding "old"), started wait_ms ago. */
static pid_t held_get(const char *faults, unsigned wait_ms)
{
    char url[256], out[128];
    setup();
    T_EQ(cli_run(NULL, 0, "put -q file://%s/store/obj %s/in.bin", dir, dir), 0);
    snprintf(url, sizeof(url), "file://%s/store/obj?faults=%s", dir, faults);
    snprintf(out, sizeof(out), "%s/out.bin", dir);
    t_write_file(out, "old", 3);
    const char *args[] = {"get", url, out, NULL};
    pid_t pid = start(-1, args);
    usleep(wait_ms * 1000);
    return pid;
}

/* A GET held mid-object: sig ends it at once, with no temporary file and
 * the old file whole. */
static void get_interrupted(int sig)
{
    char out[128];
    double secs;
    pid_t pid = held_get("delay:delay=20000", 700);
    snprintf(out, sizeof(out), "%s/out.bin", dir);
    T_EQ(kill(pid, sig), 0);
    T_EQ(wait_exit(pid, &secs), 128 + sig);
    T_TRUE(secs < 5);
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
    struct stat sb;
    T_EQ(stat(out, &sb), 0);
    T_EQ(sb.st_size, 3);
}

TEST(sigint_mid_get)
{
    get_interrupted(SIGINT);
}

TEST(sigterm_mid_get)
{
    get_interrupted(SIGTERM);
}

/* A PUT to railiod held mid-object (the chunk's answer delayed 20 s): the
 * signal aborts the upload on the server. */
static void put_interrupted(int sig)
{
    struct srv_env e;
    char url[256], in[128];
    double secs;
    setup();
    const char *sargs[] = {"--memory", "64M", "--metrics", "127.0.0.1:0", NULL};
    srv_start(&e, sargs);
    snprintf(url, sizeof(url), "railio://%s/k?faults=delay:delay=20000", e.addr[0]);
    snprintf(in, sizeof(in), "%s/in.bin", dir);
    const char *args[] = {"put", url, in, NULL};
    pid_t pid = start(-1, args);
    /* Mid-PUT: the server holds an upload. */
    double t0 = cli_now_s();
    while (srv_scrape(&e, "railiod_uploads") < 1 && cli_now_s() - t0 < 10)
        usleep(20 * 1000);
    T_EQ(srv_scrape(&e, "railiod_uploads"), 1.0);
    T_EQ(kill(pid, sig), 0);
    T_EQ(wait_exit(pid, &secs), 128 + sig);
    T_TRUE(secs < 5);
    /* Aborted, not left for --upload-timeout nor dropped by a closed
     * connection. */
    t0 = cli_now_s();
    while (srv_scrape(&e, "railiod_uploads") > 0 && cli_now_s() - t0 < 5)
        usleep(20 * 1000);
    T_EQ(srv_scrape(&e, "railiod_uploads"), 0.0);
    T_EQ(srv_scrape(&e, "railiod_uploads_closed_total"), 0.0);
    T_EQ(srv_scrape(&e, "railiod_uploads_reclaimed_total"), 0.0);
    /* Nothing was published. */
    T_EQ(cli_run(NULL, 0, "stat railio://%s/k 2>/dev/null", e.addr[0]), 3);
    T_EQ(srv_stop(&e), 0);
}

TEST(sigint_mid_put_aborts_upload)
{
    put_interrupted(SIGINT);
}

TEST(sigterm_mid_put_aborts_upload)
{
    put_interrupted(SIGTERM);
}

/* An upload from a pipe that went silent, streamed (file://) or read
 * whole first (railio:// before it takes uploads of unknown size): the
 * blocked read of stdin does not hold the signal, nothing is published. */
static void stdin_interrupted(const char *url)
{
    int p[2];
    double secs;
    T_EQ(pipe(p), 0);
    const char *args[] = {"put", url, "-", NULL};
    pid_t pid = start(p[0], args);
    close(p[0]);
    static uint8_t b[1 << 16];
    memset(b, 7, sizeof(b));
    for (int i = 0; i < 4; i++)
        T_EQ(write(p[1], b, sizeof(b)), (ssize_t)sizeof(b));
    usleep(500 * 1000);
    T_EQ(kill(pid, SIGINT), 0);
    T_EQ(wait_exit(pid, &secs), 128 + SIGINT);
    T_TRUE(secs < 5);
    close(p[1]);
}

TEST(sigint_mid_stdin_put)
{
    char url[256];
    setup();
    snprintf(url, sizeof(url), "file://%s/store/k", dir);
    stdin_interrupted(url);
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/k 2>/dev/null", dir), 3);
    struct srv_env e;
    const char *sargs[] = {"--memory", "64M", NULL};
    srv_start(&e, sargs);
    snprintf(url, sizeof(url), "railio://%s/k", e.addr[0]);
    stdin_interrupted(url);
    T_EQ(cli_run(NULL, 0, "stat railio://%s/k 2>/dev/null", e.addr[0]), 3);
    T_EQ(srv_stop(&e), 0);
}

/* Two signals at once (an impatient ^C^C) during a stalled GET: still one
 * clean end by SIGINT, no temporary file. (The second signal's own path,
 * the watcher removing the file and ending the process, is what answers
 * when the first one's unwinding is slow.) */
TEST(sigint_twice_mid_get)
{
    double secs;
    pid_t pid = held_get("stall", 500);
    T_EQ(kill(pid, SIGINT), 0);
    T_EQ(kill(pid, SIGINT), 0);
    T_EQ(wait_exit(pid, &secs), 128 + SIGINT);
    T_TRUE(secs < 5);
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

/* `railio put URL FIFO` with no writer on the FIFO yet: a SIGINT ends it
 * at once (130), nothing stored. The open(2) of the FIFO waited for a
 * writer where no signal could end it (the first one only marked the
 * command cancelled; it took a second). */
TEST(sigint_while_put_waits_for_a_fifo_writer)
{
    char url[256], fifo[256];
    setup();
    snprintf(url, sizeof(url), "file://%s/store/k", dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo", dir);
    T_EQ(mkfifo(fifo, 0600), 0);
    const char *args[] = {"put", url, fifo, NULL};
    pid_t pid = start(-1, args);
    usleep(500 * 1000);
    T_EQ(kill(pid, SIGINT), 0);
    int st = 0;
    pid_t w = 0;
    for (int i = 0; i < 500 && (w = waitpid(pid, &st, WNOHANG)) == 0; i++)
        usleep(10 * 1000);
    if (w == 0) { /* still in the open after 5 s: end it, fail */
        kill(pid, SIGKILL);
        waitpid(pid, &st, 0);
    }
    T_EQ(w, pid);
    T_TRUE(WIFSIGNALED(st));
    T_EQ(WTERMSIG(st), SIGINT);
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/k 2>/dev/null", dir), 3);
}
