/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/*
 * A secret in a URL never reaches a message: railio get/stat/cp with
 * ?token=SECRET (and user:PASSWORD@) that fail (nothing listens, a bad
 * option, no key) name the URL with the secret replaced by "***".
 */
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"

#define SECRET "Sekr1tT0ken"

/* Run "railio ARGS" with stderr captured into err; its exit status. */
static int run_err(char *err, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int run_err(char *err, size_t cap, const char *fmt, ...)
{
    char args[2048], cmd[8192];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    snprintf(cmd, sizeof(cmd), "%s %s 2>&1 >/dev/null", cli_bin(), args);
    FILE *p = popen(cmd, "r");
    T_NOTNULL(p);
    size_t n = fread(err, 1, cap - 1, p);
    err[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void check(const char *err)
{
    if (strstr(err, SECRET) || strstr(err, "PaSsW0rd"))
        fprintf(stderr, "leaked: %s\n", err);
    T_NULL(strstr(err, SECRET));
    T_NULL(strstr(err, "PaSsW0rd"));
    T_NOTNULL(strstr(err, "***"));
}

TEST(token_never_in_messages)
{
    char err[8192], out[] = "/tmp/rio-secrets-XXXXXX";
    int port = cli_dead_port();
    int fd = mkstemp(out);
    T_TRUE(fd >= 0);
    close(fd);

    /* Nothing listens: "cannot open URL". */
    T_NE(
        run_err(err, sizeof(err), "get 'railio://127.0.0.1:%d/obj?token=" SECRET "' %s", port, out),
        0);
    check(err);
    T_NOTNULL(strstr(err, "token=***"));
    /* A bad option after the token, and a password. */
    T_NE(run_err(err, sizeof(err),
                 "stat 'railio://u:PaSsW0rd@127.0.0.1:%d/obj?x=1&token=" SECRET "&op_timeout=0'",
                 port),
         0);
    check(err);
    /* No key: the whole argument is echoed. */
    T_NE(run_err(err, sizeof(err), "get 'railio://127.0.0.1:%d?token=" SECRET "' %s", port, out),
         0);
    check(err);
    /* cp, either side. */
    T_NE(run_err(err, sizeof(err),
                 "cp 'railio://127.0.0.1:%d/a?token=" SECRET
                 "' 'railio://127.0.0.1:%d/b?token=" SECRET "'",
                 port, port),
         0);
    check(err);
    /* put to a URL with no key, from stdin: no name to take. */
    T_EQ(run_err(err, sizeof(err), "put 'file:///tmp/?token=" SECRET "' - < /dev/null"), 2);
    check(err);
    unlink(out);
}

/* Issue 17 item 8: an unknown option beside a token, a password inside an
 * option's value (an S3 endpoint's user:password@) and a refused option
 * next to them: the messages name the option, never the secrets. */
TEST(secrets_never_in_option_errors)
{
    char err[8192];
    int port = cli_dead_port();

    T_NE(
        run_err(err, sizeof(err), "stat 'railio://127.0.0.1:%d/obj?tokn=1&token=" SECRET "'", port),
        0);
    check(err);
    T_NOTNULL(strstr(err, "unknown URL option 'tokn' (did you mean 'token'?)"));
    T_NE(run_err(err, sizeof(err),
                 "stat 's3://b/obj?endpoint=http://ak:PaSsW0rd@127.0.0.1:%d&bufsize=1&token=" SECRET
                 "'",
                 port),
         0);
    check(err);
    T_NE(run_err(err, sizeof(err),
                 "stat 'railio://127.0.0.1:%d/obj?token=" SECRET "&conns=0&depht=2'", port),
         0);
    check(err);
}

/* railio:// has no user information: user:password@ (or user@) is
 * refused as a malformed URL (exit 2) with a detail that says so (it was
 * none, or a DNS failure for "user@host"), the password never shown. */
TEST(railio_userinfo_refused_with_a_reason)
{
    char err[8192];
    int port = cli_dead_port();

    T_EQ(run_err(err, sizeof(err), "stat 'railio://u:PaSsW0rd@127.0.0.1:%d/obj'", port), 2);
    check(err);
    T_NOTNULL(strstr(err, "(RIO_EURL): railio:// URLs take no user information"));
    T_EQ(run_err(err, sizeof(err), "--json stat 'railio://u:PaSsW0rd@127.0.0.1:%d/obj'", port), 2);
    T_NULL(strstr(err, "PaSsW0rd"));
    T_EQ(run_err(err, sizeof(err), "stat 'railio://u@127.0.0.1:%d/obj'", port), 2);
    T_NOTNULL(strstr(err, "railio:// URLs take no user information"));
}

/* s3://AK:SECRET@bucket (keys where an s3:// URL's bucket goes) was taken
 * as a bucket named so: the secret was in the error's detail ("s3 bucket
 * AK:SECRET@..."), and with an endpoint and unsigned=1 in the path of every
 * request. Now refused as a malformed URL, saying where keys go, and no
 * message shows the secret. The same for an http:// password holding a '/'
 * that was not written %2F: the host was "u:Pa", a part of the password in
 * the detail; a port that is no number is refused without showing it. */
TEST(s3_bucket_with_keys_refused)
{
    char err[8192];
    int port = cli_dead_port();

    if (!rio_has_scheme("s3"))
        T_SKIP("s3:// is not built");
    T_EQ(run_err(err, sizeof(err), "stat 's3://AKIA:PaSsW0rd@127.0.0.1:%d/b/k'", port), 2);
    check(err);
    T_NOTNULL(strstr(err, "an s3:// URL takes no user:password@"));
    T_EQ(run_err(err, sizeof(err),
                 "stat 's3://AKIA:PaSsW0rd@bkt/k?endpoint=http://127.0.0.1:%d&unsigned=1'", port),
         2);
    check(err);
    T_EQ(run_err(err, sizeof(err), "stat 'http://u:Pa/SsW0rd@127.0.0.1:%d/x'", port), 2);
    T_NULL(strstr(err, "u:Pa"));
    T_NOTNULL(strstr(err, "is no port number"));
}

/* The cause behind a runtime error reaches the CLI's line: an S3 PUT to an
 * endpoint that refuses connections says so per path, not only "no
 * healthy path left", and still shows no secret key. */
TEST(cause_in_the_error_line)
{
    char err[8192], in[] = "/tmp/rio-secrets-in-XXXXXX";

    if (!rio_has_scheme("s3"))
        T_SKIP("s3:// is not built");
    int fd = mkstemp(in);
    T_TRUE(fd >= 0);
    T_EQ(write(fd, "hello", 5), 5);
    close(fd);
    setenv("AWS_ACCESS_KEY_ID", "ak", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "PaSsW0rd", 1);
    T_NE(run_err(err, sizeof(err), "put 's3://b/obj?endpoint=http://127.0.0.1:%d&retries=2' %s",
                 cli_dead_port(), in),
         0);
    fprintf(stderr, "%s", err);
    T_NULL(strstr(err, "PaSsW0rd"));
    T_NOTNULL(strstr(err, "connection refused (ECONNREFUSED)"));
    unlink(in);
}

/* An http:// URL's user:password@ is curl's Basic auth, nothing more: it
 * went into the Host header of every request (servers and proxies log it)
 * and into the error's detail ("http host alice:PaSsW0rd@..."). Now the
 * server sees Host: 127.0.0.1:PORT and an Authorization: Basic header,
 * and no message shows the password. An s3:// endpoint's user:password@
 * (signed, sent as the Host of every request) is refused, nothing sent. */
TEST(http_userinfo_stays_out_of_host_and_messages)
{
    char err[8192], dir[] = "/tmp/rio-userinfo-XXXXXX", cmd[2048], path[512];

    if (!rio_has_scheme("http") || !rio_has_scheme("s3"))
        T_SKIP("http:// or s3:// is not built");
    T_NOTNULL(mkdtemp(dir));
    snprintf(cmd, sizeof(cmd),
             "cd %s && /usr/bin/python3 -c '\n"
             "import http.server, socketserver\n"
             "class H(http.server.BaseHTTPRequestHandler):\n"
             "    def answer(self):\n"
             "        open(\"seen\", \"a\").write(\"%%s|%%s\\n\" %% (self.headers.get(\"Host\"),\n"
             "            self.headers.get(\"Authorization\", \"\")))\n"
             "        self.send_response(403); self.send_header(\"Content-Length\", \"0\")\n"
             "        self.end_headers()\n"
             "    do_GET = do_HEAD = do_PUT = answer\n"
             "    def log_message(self, *a): pass\n"
             "s = socketserver.TCPServer((\"127.0.0.1\", 0), H)\n"
             "open(\"port.tmp\", \"w\").write(str(s.server_address[1]))\n"
             "__import__(\"os\").rename(\"port.tmp\", \"port\")\n"
             "s.serve_forever()' > /dev/null 2>&1 & echo $! > %s/pid",
             dir, dir);
    T_EQ(system(cmd), 0);
    snprintf(path, sizeof(path), "%s/port", dir);
    for (int i = 0; i < 500 && access(path, F_OK) != 0; i++)
        usleep(10000);
    int port = t_read_int(path);
    T_GT(port, 0);
    T_NE(run_err(err, sizeof(err), "stat 'http://alice:PaSsW0rd@127.0.0.1:%d/obj'", port), 0);
    check(err);
    T_EQ(t_sh("grep -q '^127.0.0.1:%d|Basic ' %s/seen", port, dir), 0);
    T_NE(t_sh("grep -q PaSsW0rd %s/seen", dir), 0);
    T_EQ(t_sh("wc -l < %s/seen > %s/n1", dir, dir), 0);
    T_NE(run_err(err, sizeof(err), "stat 's3://b/obj?endpoint=http://ak:PaSsW0rd@127.0.0.1:%d'",
                 port),
         0);
    check(err);
    T_NOTNULL(strstr(err, "an s3 endpoint takes no user:password@"));
    T_EQ(t_sh("wc -l < %s/seen | cmp -s - %s/n1", dir, dir), 0); /* nothing sent */
    T_EQ(t_sh("kill $(cat %s/pid); rm -rf %s", dir, dir), 0);
}

/* A FIFO given as ?token_file= (or planted where it points) was waited on
 * for ever by the open; now it is read without waiting: no token in it,
 * and the command fails at once naming the file. */
TEST(fifo_token_file_not_waited_on)
{
    char err[8192], dir[] = "/tmp/rio-tokfifo-XXXXXX", fifo[256];

    T_NOTNULL(mkdtemp(dir));
    snprintf(fifo, sizeof(fifo), "%s/tok", dir);
    T_OK(mkfifo(fifo, 0600));
    uint64_t t0 = t_now_ms();
    int rc = run_err(err, sizeof(err), "stat 'railio://127.0.0.1:%d/k?token_file=%s'",
                     cli_dead_port(), fifo);
    T_NE(rc, 0);
    T_LT(t_now_ms() - t0, 10000u);
    T_NOTNULL(strstr(err, "token_file"));
    T_EQ(t_sh("rm -rf %s", dir), 0);
}

/* A token file others can read is used, with a warning naming the file
 * (never the token), as railiod warns of its own; a private one is not
 * warned of. */
TEST(loose_token_file_warned)
{
    char err[8192], dir[] = "/tmp/rio-tokloose-XXXXXX";

    T_NOTNULL(mkdtemp(dir));
    T_EQ(t_sh("printf 'sekrit-token-9\\n' > %s/tok && chmod 644 %s/tok", dir, dir), 0);
    T_NE(run_err(err, sizeof(err), "stat 'railio://127.0.0.1:%d/k?token_file=%s/tok'",
                 cli_dead_port(), dir),
         0);
    T_NOTNULL(strstr(err, "is readable by group or others"));
    T_NOTNULL(strstr(err, "/tok"));
    T_NULL(strstr(err, "sekrit"));
    T_EQ(t_sh("chmod 600 %s/tok", dir), 0);
    T_NE(run_err(err, sizeof(err), "stat 'railio://127.0.0.1:%d/k?token_file=%s/tok'",
                 cli_dead_port(), dir),
         0);
    T_NULL(strstr(err, "readable by group"));
    T_EQ(t_sh("rm -rf %s", dir), 0);
}

/* The command line the kernel shows of `railio stat URL` once it has
 * connected (well past its start, where the mask goes) to a server that
 * never answers; NULs as spaces. */
static void cmdline_of(const char *fmt, char *cmdline, size_t cap)
{
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof(a);
    char url[256], path[64];
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    T_GE(lfd, 0);
    T_EQ(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
    T_EQ(listen(lfd, 4), 0);
    T_EQ(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    snprintf(url, sizeof(url), fmt, (unsigned)ntohs(a.sin_port));
    pid_t pid = fork();
    T_GE(pid, 0);
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        dup2(null, 2);
        execl(cli_bin(), cli_bin(), "stat", url, (char *)NULL);
        _exit(127);
    }
    struct pollfd pf = {.fd = lfd, .events = POLLIN};
    T_EQ(poll(&pf, 1, 10000), 1);
    snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
    FILE *f = fopen(path, "r");
    T_NOTNULL(f);
    size_t n = fread(cmdline, 1, cap - 1, f);
    fclose(f);
    cmdline[n] = '\0';
    for (size_t j = 0; j < n; j++)
        cmdline[j] = cmdline[j] ? cmdline[j] : ' ';
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    close(lfd);
    fprintf(stderr, "cmdline: %s\n", cmdline);
}

/* A token in a URL argument is not in the command line the kernel shows
 * other users (/proc/PID/cmdline, ps) while railio runs: it was, for as
 * long as the transfer took. Nor an http:// URL's password (Basic auth).
 * The CLI works on a copy; the options themselves still work (the other
 * tests). */
TEST(token_hidden_from_cmdline)
{
    char cmdline[4096];

    cmdline_of("railio://127.0.0.1:%u/k?connect_timeout=5s&token=" SECRET, cmdline,
               sizeof(cmdline));
    T_NOTNULL(strstr(cmdline, "token=*"));
    T_NULL(strstr(cmdline, SECRET));
    /* The parser takes a '#' as part of a value (no fragment): a token
     * holding one is masked whole (its part after the '#' was shown). */
    cmdline_of("railio://127.0.0.1:%u/k?token=Sekr1t#T0ken&connect_timeout=5s", cmdline,
               sizeof(cmdline));
    T_NOTNULL(strstr(cmdline, "token=************&connect_timeout=5s"));
    T_NULL(strstr(cmdline, "T0ken"));
    if (!rio_has_scheme("http"))
        return;
    cmdline_of("http://alice:PaSsW0rd@127.0.0.1:%u/k", cmdline, sizeof(cmdline));
    T_NOTNULL(strstr(cmdline, "http://alice:********@127.0.0.1:"));
}
