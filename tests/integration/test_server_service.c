/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * railiod as a service: SIGHUP reopens --log-file and re-reads the token
 * file (as often as it changes, even while clients AUTH), and never stops
 * the server; a listen or metrics port outside
 * 0..65535 is refused at start (it used to bind the port modulo 65536).
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/resource.h>
#include <sys/socket.h>

#include "server_env.h"

/* Run railiod with args (NULL-terminated); its exit status, stderr in err. */
static int run_railiod(const char *const *args, char *err, size_t cap)
{
    char bin[512], path[] = "/tmp/railiod-svc-XXXXXX";
    const char *argv[16];
    int n = 0, fd, st = -1;
    ssize_t got;
    pid_t pid;

    srv_binary(bin, sizeof(bin));
    argv[n++] = bin;
    for (; *args && n < 15; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    fd = mkstemp(path);
    if (fd < 0)
        T_FAIL("mkstemp: %s", strerror(errno));
    unlink(path);
    fflush(NULL);
    pid = fork();
    if (pid < 0)
        T_FAIL("fork: %s", strerror(errno));
    if (pid == 0) {
        dup2(fd, 2);
        execv(bin, (char *const *)argv);
        _exit(127);
    }
    for (int i = 0; i < 1000 && waitpid(pid, &st, WNOHANG) != pid; i++)
        usleep(10000);
    if (kill(pid, 0) == 0) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(fd);
        T_FAIL("railiod %s did not exit within 10 s", args[-1]);
    }
    got = pread(fd, err, cap - 1, 0);
    close(fd);
    err[got > 0 ? got : 0] = '\0';
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(port_out_of_range_is_refused)
{
    char err[4096];
    const char *listen[] = {"--listen", "127.0.0.1:80000", "--memory", "16M", NULL};
    const char *big[] = {"--listen", "127.0.0.1:123456", "--memory", "16M", NULL};
    const char *metrics[] = {"--listen", "127.0.0.1:0", "--metrics", "127.0.0.1:65536",
                             "--memory", "16M",         NULL};
    const char *sign[] = {"--listen", "127.0.0.1:-1", "--memory", "16M", NULL};

    T_EQ(run_railiod(listen, err, sizeof(err)), 1);
    T_NOTNULL(strstr(err, "port '80000' is not a number in 0..65535"));
    T_EQ(run_railiod(big, err, sizeof(err)), 1);
    T_NOTNULL(strstr(err, "0..65535"));
    T_EQ(run_railiod(metrics, err, sizeof(err)), 1);
    T_NOTNULL(strstr(err, "port '65536'"));
    T_EQ(run_railiod(sign, err, sizeof(err)), 1);
    T_NOTNULL(strstr(err, "0..65535"));
}

/* A start-up error names the option at fault: a --metrics port in use
 * said only "listen on 127.0.0.1:P: Address already in use", which of
 * the listeners unsaid; a value under an option's least said the range
 * "from 1 to 18446744073709551615" (review). */
TEST(startup_errors_name_the_option)
{
    char err[4096], addr[64];
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);

    T_TRUE(fd >= 0);
    T_EQ(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    T_EQ(listen(fd, 1), 0);
    T_EQ(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
    snprintf(addr, sizeof(addr), "127.0.0.1:%u", ntohs(sa.sin_port));
    const char *busy[] = {"--listen", "127.0.0.1:0", "--metrics", addr, "--memory", "16M", NULL};
    T_EQ(run_railiod(busy, err, sizeof(err)), 1);
    T_NOTNULL(strstr(err, "--metrics: listen on"));
    T_NOTNULL(strstr(err, "Address already in use"));
    const char *busy2[] = {"--listen", addr, "--memory", "16M", NULL};
    T_EQ(run_railiod(busy2, err, sizeof(err)), 1);
    T_NOTNULL(strstr(err, "--listen: listen on"));
    close(fd);
    const char *zero[] = {"--listen", "127.0.0.1:0", "--memory", "0", NULL};
    T_EQ(run_railiod(zero, err, sizeof(err)), 2);
    T_NOTNULL(strstr(err, "the least it takes is 1"));
    T_NULL(strstr(err, "18446744073709551615"));
}

/* A soft open-files limit under what --max-conns needs is raised toward
 * the hard one, and one line says so when even the hard one is short
 * (idle connections took every descriptor: new clients waited, review). */
TEST(open_files_limit_raised_for_max_conns)
{
    struct srv_env e;
    char limits[64], line[256];
    struct rlimit rl = {.rlim_cur = 64, .rlim_max = 4096};
    const char *args[] = {"--max-conns", "1000", NULL};

    T_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0); /* the server inherits it */
    srv_start(&e, args);
    snprintf(limits, sizeof(limits), "/proc/%d/limits", (int)e.pid);
    FILE *f = fopen(limits, "r");
    T_NOTNULL(f);
    unsigned long long soft = 0, hard = 0;
    while (fgets(line, sizeof(line), f))
        if (sscanf(line, "Max open files %llu %llu", &soft, &hard) == 2)
            break;
    fclose(f);
    T_EQ(soft, 2024u); /* --max-conns 1000 + 1024 */
    T_EQ(hard, 4096u);
    T_EQ(srv_stop(&e), 0);

    rl.rlim_max = 200;
    T_EQ(setrlimit(RLIMIT_NOFILE, &rl), 0);
    setenv("SRV_LOG_FILE", "1", 1);
    srv_start(&e, args);
    T_EQ(srv_log_count(&e, "open files limit 200 (hard 200) is below the 2024 that --max-conns "
                           "1000 needs"),
         1u);
    T_EQ(srv_stop(&e), 0);
}

/* 1 if file holds needle. */
static int file_has(const char *file, const char *needle)
{
    char text[16384];
    FILE *f = fopen(file, "r");
    size_t n;

    if (!f)
        return 0;
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = '\0';
    return strstr(text, needle) != NULL;
}

/* Print file (the server's log) to stderr, for a failure's reader. */
static void dump_file(const char *file)
{
    char text[16384];
    FILE *f = fopen(file, "r");
    size_t n;

    if (!f)
        return;
    n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    fprintf(stderr, "--- %s\n%.*s---\n", file, (int)n, text);
}

/* 1 once file holds needle (waits up to 5 s). */
static int wait_for_text(const char *file, const char *needle)
{
    for (int i = 0; i < 500; i++) {
        if (file_has(file, needle))
            return 1;
        usleep(10000);
    }
    return 0;
}

TEST(sighup_reopens_the_log_and_rereads_the_token)
{
    struct srv_env e;
    char token[256], log[256], rotated[300];
    struct wc c;

    srv_prepare(&e);
    srv_write_token(&e, "first-token", token, sizeof(token));
    snprintf(log, sizeof(log), "%s/railiod.log", e.dir);
    snprintf(rotated, sizeof(rotated), "%s.1", log);
    const char *args[] = {"--auth-token-file", token, "--log-file", log, NULL};
    srv_start_listen(&e, NULL, args);
    T_TRUE(wait_for_text(log, "serving"));

    wc_connect(&c, e.addr[0]);
    wc_hello(&c, "first-token");
    wc_close(&c);

    /* logrotate: the file moves away, a new token is written, SIGHUP. */
    T_EQ(rename(log, rotated), 0);
    srv_write_token(&e, "second-token", token, sizeof(token));
    T_EQ(kill(e.pid, SIGHUP), 0);
    T_TRUE(wait_for_text(log, "SIGHUP: token reloaded"));
    T_EQ(srv_wait(&e, 200), -1); /* still running */

    wc_connect(&c, e.addr[0]);
    T_EQ(wc_hello_ex(&c, "first-token", NULL, NULL), -EACCES);
    wc_close(&c);
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, "second-token");
    wc_close(&c);

    /* The same token again (a logrotate SIGHUP): nothing changes. */
    T_EQ(kill(e.pid, SIGHUP), 0);
    T_TRUE(wait_for_text(log, "SIGHUP: token unchanged"));

    /* A token file that fails to read keeps the token in force. */
    T_EQ(unlink(token), 0);
    T_EQ(kill(e.pid, SIGHUP), 0);
    T_TRUE(wait_for_text(log, "keeping the previous token"));
    wc_connect(&c, e.addr[0]);
    wc_hello(&c, "second-token");
    wc_close(&c);

    /* Many SIGHUPs in a row: never a stop. */
    for (int i = 0; i < 20; i++)
        T_EQ(kill(e.pid, SIGHUP), 0);
    usleep(200000);
    T_EQ(srv_wait(&e, 100), -1);
    T_FALSE(file_has(rotated, "SIGHUP"));
    T_TRUE(file_has(rotated, "serving"));
    T_EQ(srv_stop(&e), 0);
}

/* Token rotation under load: a thread writes a new token and SIGHUPs
 * railiod every 2 ms, 100 times; meanwhile connections AUTH with one of the
 * two latest tokens. Every AUTH must either pass, with the server proving
 * the same token (wc_hello_ex fails the test otherwise), or be refused:
 * never a proof made with another token than the one checked. Then a last
 * token, past the 64 changes railiod used to allow, must be in force. */
struct rotator {
    char path[256];
    pid_t pid;
    atomic_int done;
    atomic_int round;
};

static void rotator_write(const char *path, int round)
{
    char tmp[300], text[64];
    int fd, n = snprintf(text, sizeof(text), "rotating-token-%d\n", round);

    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, text, (size_t)n) != n || close(fd) < 0 || rename(tmp, path) < 0)
        abort();
}

static void *rotator_main(void *arg)
{
    struct rotator *r = arg;

    for (int i = 1; i <= 100; i++) {
        rotator_write(r->path, i);
        atomic_store(&r->round, i);
        kill(r->pid, SIGHUP);
        usleep(2000);
    }
    atomic_store(&r->done, 1);
    return NULL;
}

TEST(token_rotation_under_load)
{
    struct srv_env e;
    struct rotator r = {.done = 0, .round = 0};
    char token[64], log[256];
    unsigned ok = 0, refused = 0;
    pthread_t th;
    struct wc c;
    int st = -1;

    srv_prepare(&e);
    snprintf(r.path, sizeof(r.path), "%s/token", e.dir);
    rotator_write(r.path, 0);
    snprintf(log, sizeof(log), "%s/railiod.log", e.dir);
    const char *args[] = {"--auth-token-file", r.path,    "--log-file", log,
                          "--auth-failures",   "1000000", NULL};
    srv_start_listen(&e, NULL, args);
    T_TRUE(wait_for_text(log, "serving"));
    r.pid = e.pid;
    T_EQ(pthread_create(&th, NULL, rotator_main, &r), 0);
    while (!atomic_load(&r.done)) {
        int round = atomic_load(&r.round) - (int)((ok + refused) % 2);
        snprintf(token, sizeof(token), "rotating-token-%d", round < 0 ? 0 : round);
        wc_connect(&c, e.addr[0]);
        st = wc_hello_ex(&c, token, NULL, NULL);
        wc_close(&c);
        if (st != 0 && st != -EACCES)
            dump_file(log);
        T_TRUE(st == 0 || st == -EACCES);
        st == 0 ? ok++ : refused++;
    }
    T_EQ(pthread_join(th, NULL), 0);
    /* How many AUTHs met a swap depends on the machine's load: not asserted. */
    fprintf(stderr, "token_rotation_under_load: %u AUTHs passed, %u refused\n", ok, refused);
    T_EQ(srv_wait(&e, 100), -1); /* still running */

    /* The 101st token: in force once read (the old cap kept the 65th). */
    rotator_write(r.path, 101);
    T_EQ(kill(e.pid, SIGHUP), 0);
    for (int i = 0; i < 500; i++) {
        wc_connect(&c, e.addr[0]);
        st = wc_hello_ex(&c, "rotating-token-101", NULL, NULL);
        wc_close(&c);
        if (st == 0)
            break;
        usleep(10000);
    }
    T_EQ(st, 0);
    T_EQ(srv_stop(&e), 0);
}
