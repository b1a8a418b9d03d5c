/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file;net */
/* T_TIMEOUT 120 */
/*
 * railio's exit statuses (docs/cli.md "Exit status"), one test each, against
 * peers the test starts (file://, a railiod with a token, a port nothing
 * listens on) with faults from the fault filter; and the frame every verb
 * shares: --help answered without work, options after the operands, "--".
 */
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli_util.h"
#include "server_env.h"

#define OBJ_SIZE (300 * 1000 + 7)

static const char *dir;
static uint8_t obj[OBJ_SIZE];

/* DIR/store/obj (OBJ_SIZE pattern bytes) put with railio. */
static void setup(void)
{
    dir = cli_scratch("rio-exit", obj, OBJ_SIZE, 9);
    T_EQ(cli_run(NULL, 0, "put -q file://%s/store/obj %s/in.bin", dir, dir), 0);
}

/* path holds exactly the object's bytes. */
static void check_obj(const char *path)
{
    static uint8_t b[OBJ_SIZE + 16];
    FILE *f = fopen(path, "rb");
    T_NOTNULL(f);
    size_t n = fread(b, 1, sizeof(b), f);
    fclose(f);
    T_EQ(n, (size_t)OBJ_SIZE);
    T_MEMEQ(b, obj, OBJ_SIZE);
}

/* Every verb answers --help (and -h) on stdout with 0, doing nothing: demo
 * would run 256 MiB, stat would take "--help" for a URL. */
TEST(help_everywhere_without_work)
{
    static const char *const verbs[] = {"put", "get",  "stat",  "rm",
                                        "cp",  "demo", "bench", "version"};
    char out[8192];
    for (size_t i = 0; i < sizeof(verbs) / sizeof(verbs[0]); i++) {
        double t0 = cli_now_s();
        T_EQ(cli_run(out, sizeof(out), "%s --help", verbs[i]), 0);
        T_TRUE(cli_now_s() - t0 < 5);
        T_NOTNULL(strstr(out, "usage: railio"));
        T_EQ(cli_run(out, sizeof(out), "%s -h 2>&1", verbs[i]), 0);
        T_NOTNULL(strstr(out, "usage: railio"));
    }
    /* --help after operands too, and the top-level one. */
    T_EQ(cli_run(out, sizeof(out), "stat file:///nowhere/x --help"), 0);
    T_NOTNULL(strstr(out, "usage: railio stat"));
    /* --help wins over a mistake next to it. */
    T_EQ(cli_run(out, sizeof(out), "get --bogus --help"), 0);
    T_NOTNULL(strstr(out, "usage: railio get"));
    T_EQ(cli_run(out, sizeof(out), "--help"), 0);
    T_NOTNULL(strstr(out, "Exit status"));
    /* bench answers --help after its target too (copy would move 1 GiB). */
    static const char *const targets[] = {"mock", "copy", "railio://127.0.0.1:1", "serve"};
    for (size_t i = 0; i < sizeof(targets) / sizeof(targets[0]); i++) {
        double t0 = cli_now_s();
        T_EQ(cli_run(out, sizeof(out), "bench %s --help 2>&1", targets[i]), 0);
        T_TRUE(cli_now_s() - t0 < 5);
        T_NOTNULL(strstr(out, "usage: railio bench"));
    }
}

/* Options after the operands; "--" ends options (a key may start with -). */
TEST(options_anywhere)
{
    char out[8192];
    setup();
    T_EQ(cli_run(out, sizeof(out), "stat file://%s/store/obj --json", dir), 0);
    T_NOTNULL(strstr(out, "\"schema\":\"railio/1\""));
    T_EQ(cli_run(out, sizeof(out), "get file://%s/store/obj -q %s/o1 -v", dir, dir), 0);
    T_EQ(cli_run(out, sizeof(out), "get -- file://%s/store/obj %s/o2", dir, dir), 0);
    char p[128];
    snprintf(p, sizeof(p), "%s/o2", dir);
    check_obj(p);
    /* Before the verb too. */
    T_EQ(cli_run(out, sizeof(out), "--json -q stat file://%s/store/obj", dir), 0);
    T_NOTNULL(strstr(out, "\"type\":\"object\""));
    /* Bundled there too, as after it (it was "unknown command '-qv'"). */
    T_EQ(cli_run(out, sizeof(out), "-qv --json stat file://%s/store/obj", dir), 0);
    T_NOTNULL(strstr(out, "\"type\":\"object\""));
    T_EQ(cli_run(NULL, 0, "-qx stat file://%s/store/obj 2>/dev/null", dir), 2);
    /* After "--", "--json" is an operand: a third one is too many. */
    T_EQ(cli_run(out, sizeof(out), "stat -- file://%s/store/obj --json 2>/dev/null", dir), 2);
}

/* 2: the command line is wrong, nothing was done. */
TEST(exit_usage)
{
    setup();
    T_EQ(cli_run(NULL, 0, "2>/dev/null"), 2);
    T_EQ(cli_run(NULL, 0, "frobnicate 2>/dev/null"), 2);
    T_EQ(cli_run(NULL, 0, "stat 2>/dev/null"), 2);
    T_EQ(cli_run(NULL, 0, "get --bogus file://%s/store/obj x 2>/dev/null", dir), 2);
    T_EQ(cli_run(NULL, 0, "stat not-a-url 2>/dev/null"), 2);
    T_EQ(cli_run(NULL, 0, "put file://%s/store/k a b c 2>/dev/null", dir), 2);
    T_EQ(cli_run(NULL, 0, "cp %s/in.bin %s/x 2>/dev/null", dir, dir), 2);
    /* bench's numbers are checked whole: "nan" seconds ran forever. */
    static const char *const bad_nums[] = {"--secs nan", "--secs inf", "--secs 1x",
                                           "--repeat 4294967297", "--ceiling-secs nan"};
    for (size_t i = 0; i < sizeof(bad_nums) / sizeof(bad_nums[0]); i++)
        T_EQ(cli_run(NULL, 0, "bench railio://127.0.0.1:1 %s 2>/dev/null", bad_nums[i]), 2);
    /* A key over RIO_KEY_MAX is named as such, not as a malformed URL. */
    char longkey[RIO_KEY_MAX + 2], out[4096];
    memset(longkey, 'a', sizeof(longkey) - 1);
    longkey[sizeof(longkey) - 1] = '\0';
    T_EQ(cli_run(out, sizeof(out), "stat mock://lab/%s 2>&1 | tail -1", longkey), 0);
    T_NOTNULL(strstr(out, "the key is longer than 1024 bytes"));
    T_EQ(cli_run(NULL, 0, "stat mock://lab/%s 2>/dev/null", longkey), 2);
    /* A wildcard before the last element: one line with the argument and
     * the reason, then the usage (it was two error lines). */
    T_EQ(cli_run(out, sizeof(out), "ls 'file://%s/st*/x' 2>&1 | head -1", dir), 0);
    T_NOTNULL(strstr(out, "/st*/x: wildcards are allowed in the last path element only"));
    T_EQ(cli_run(NULL, 0, "ls 'file://%s/st*/x' 2>/dev/null", dir), 2);
    /* An option that took the URL as its value is named (it was "missing
     * arguments"), its value shown without secrets. */
    T_EQ(cli_run(out, sizeof(out), "ls --page-size 'file://u:pw@/%s/store/' 2>&1 | head -1", dir),
         0);
    T_NOTNULL(strstr(out, "railio ls: option '--page-size' needs a value (N): it took 'file://"));
    T_NULL(strstr(out, "pw@"));
    T_EQ(cli_run(NULL, 0, "ls --page-size file://%s/store/ 2>/dev/null", dir), 2);
    T_EQ(cli_run(out, sizeof(out), "cp -r file://%s/store/ --jobs %s/d2 2>&1 | head -1", dir, dir),
         0);
    T_NOTNULL(strstr(out, "railio cp: too few arguments"));
}

/* 3: no such object; no such directory to write into (said before any
 * byte is fetched: the reads are held 20 s). */
TEST(exit_not_found)
{
    setup();
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/nope 2>/dev/null", dir), 3);
    /* A key's control bytes (a terminal escape sequence) never reach the
     * terminal as such: each is shown as '?'. */
    char out[4096];
    T_EQ(
        cli_run(out, sizeof(out), "stat \"file://%s/store/z$(printf '\\033]0;x\\007')\" 2>&1", dir),
        3);
    T_NULL(strchr(out, '\033'));
    T_NULL(strchr(out, '\007'));
    T_NOTNULL(strstr(out, "z?]0;x?"));
    /* And a C1 control in UTF-8 (U+009B, CSI: what ESC [ does). */
    T_EQ(cli_run(out, sizeof(out), "stat \"file://%s/store/y$(printf '\302\233')2J\" 2>&1", dir),
         3);
    T_NULL(strstr(out, "\302\233"));
    T_NOTNULL(strstr(out, "y??2J"));
    /* ls on a terminal (script(1) gives it one): a listed key's C0 and C1
     * controls as '?' too. */
    T_EQ(cli_run(NULL, 0, "put -q \"file://%s/store/t$(printf '\033[2J\302\233')k\" %s/in.bin", dir,
                 dir),
         0);
    char cmd[512];
    snprintf(cmd, sizeof(cmd), "script -qec '%s ls file://%s/store/' /dev/null > %s/tty.out",
             cli_bin(), dir, dir);
    if (system("command -v script >/dev/null") == 0) {
        T_EQ(system(cmd), 0);
        char path[512];
        size_t n;
        snprintf(path, sizeof(path), "%s/tty.out", dir);
        char *tty = (char *)t_slurp(path, &n);
        T_NULL(strchr(tty, '\033'));
        T_NULL(strstr(tty, "\302\233"));
        T_NOTNULL(strstr(tty, "t?[2J??k"));
        free(tty);
    }
    /* So does the cause's detail (here naming a bad variable's value). */
    T_EQ(setenv("RIO_DEPTH", "\033]0;x\007", 1), 0);
    T_EQ(cli_run(out, sizeof(out), "stat file://%s/store/obj 2>&1 | tail -1", dir), 0);
    unsetenv("RIO_DEPTH");
    T_NOTNULL(strstr(out, "railio stat: "));
    T_NOTNULL(strstr(out, "RIO_DEPTH=?]0;x?"));
    T_NULL(strchr(out, '\033'));
    T_EQ(cli_run(NULL, 0, "get file://%s/store/nope %s/o 2>/dev/null", dir, dir), 3);
    T_EQ(cli_run(NULL, 0, "rm file://%s/store/nope 2>/dev/null", dir), 3);
    double t0 = cli_now_s();
    T_EQ(cli_run(NULL, 0,
                 "get 'file://%s/store/obj?faults=delay:delay=20000' %s/nodir/ 2>/dev/null", dir,
                 dir),
         3);
    T_TRUE(cli_now_s() - t0 < 10);
    T_EQ(cli_run(NULL, 0, "put file://%s/store/k %s/missing 2>/dev/null", dir, dir), 3);
}

/* 4: access denied: a railiod that wants a token, given a wrong one or none. */
TEST(exit_access_denied)
{
    struct srv_env e;
    char tok[256];
    srv_prepare(&e);
    srv_write_token(&e, "right-token", tok, sizeof(tok));
    const char *args[] = {"--memory", "64M", "--auth-token-file", tok, NULL};
    srv_start_listen(&e, NULL, args);
    T_EQ(cli_run(NULL, 0, "stat 'railio://%s/k?token=wrong-token' 2>/dev/null", e.addr[0]), 4);
    /* No token: the line says the server asks for one (it said only
     * "permission denied"). */
    T_EQ(t_sh("%s stat railio://%s/k 2>%s/err; test $? = 4 && grep -q 'asks for a token' %s/err",
              cli_bin(), e.addr[0], e.dir, e.dir),
         0);
    /* The right token gets as far as the key. */
    T_EQ(cli_run(NULL, 0, "stat 'railio://%s/k?token=right-token' 2>/dev/null", e.addr[0]), 3);
    T_EQ(srv_stop(&e), 0);
}

/* 5 for a TLS client against a plain railiod, and the cause said once: it
 * was a "railio: TLS: ..." line from the library and then the CLI's error
 * line with the same cause as its detail. */
TEST(exit_tls_said_once)
{
    struct srv_env e;
    srv_start(&e, NULL);
    T_EQ(
        t_sh("RIO_TLS=on %s stat railio://%s/k 2>%s/err; test $? = 5", cli_bin(), e.addr[0], e.dir),
        0);
    T_EQ(t_sh("cat %s/err >&2; grep -c 'does the server speak TLS' %s/err | grep -qx 1", e.dir,
              e.dir),
         0);
    T_EQ(t_sh("grep -q '^railio stat: opening railio://.*(RIO_ETLS): TLS: handshake failed' %s/err",
              e.dir),
         0);
    T_EQ(srv_stop(&e), 0);
}

/* 5: unreachable: nothing listens. */
TEST(exit_unreachable)
{
    int port = cli_dead_port();
    T_EQ(cli_run(NULL, 0, "stat railio://127.0.0.1:%d/k 2>/dev/null", port), 5);
    setup();
    T_EQ(cli_run(NULL, 0, "get railio://127.0.0.1:%d/k %s/o 2>/dev/null", port, dir), 5);
}

/* 6: verification failed: every read comes back with a flipped bit. */
TEST(exit_verify_failed)
{
    setup();
    T_EQ(cli_run(NULL, 0, "get 'file://%s/store/obj?faults=bitflip' %s/o 2>/dev/null", dir, dir),
         6);
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
    char p[128];
    snprintf(p, sizeof(p), "%s/o", dir);
    T_NE(access(p, F_OK), 0);
}

/* 7: out of space: the destination cannot take the bytes. */
TEST(exit_no_space)
{
    setup();
    T_EQ(cli_run(NULL, 0, "get file://%s/store/obj /dev/full 2>/dev/null", dir), 7);
}

/* 8: outcome unknown: the commit was sent, no answer came. */
TEST(exit_outcome_unknown)
{
    setup();
    T_EQ(cli_run(NULL, 0,
                 "put 'file://%s/store/k?faults=meta_error:op=put_commit:error=RIO_EUNKNOWN' "
                 "%s/in.bin 2>/dev/null",
                 dir, dir),
         8);
}

/* 5: a deadline (deadline=, RIO_DEADLINE_MS) bounds get, get -, cat and
 * cp: reads that stream were bounded only by a deadline given per call,
 * so a get with deadline=50ms ran its 200 ms reads to the end and exit 0. */
TEST(exit_deadline_bounds_reads)
{
    setup();
    static const char *const cmds[] = {"get %s/out.bin", "get -", "cat", "cp %s/cp.bin"};
    for (int i = 0; i < 4; i++) {
        char sub[1100];
        snprintf(sub, sizeof(sub), cmds[i], dir);
        char *at = strchr(sub, ' ');
        T_EQ(cli_run(NULL, 0,
                     "%.*s 'file://%s/store/obj?deadline=50ms&faults=delay:op=read:delay=200' "
                     "%s >/dev/null 2>%s/err",
                     at ? (int)(at - sub) : (int)strlen(sub), sub, dir, at ? at + 1 : "", dir),
             5);
        T_EQ(t_sh("grep -q RIO_EDEADLINE %s/err", dir), 0);
    }
    T_EQ(cli_run(NULL, 0,
                 "get 'file://%s/store/obj?faults=delay:op=read:delay=200' %s/out.bin 2>/dev/null",
                 dir, dir),
         0);
    T_EQ(cli_run(NULL, 0,
                 "get 'file://%s/store/obj?faults=delay:op=read:delay=200' - >/dev/null 2>&1", dir),
         0);
    T_EQ(t_sh("RIO_DEADLINE_MS=50 %s get 'file://%s/store/obj?faults=delay:op=read:delay=200' "
              "%s/out.bin 2>/dev/null; test $? = 5",
              cli_bin(), dir, dir),
         0);
}

/* 10: put --if-absent over a key that holds an object, put or rm
 * --if-generation over one that is another generation: nothing written or
 * removed, the object as it was;
 * from a file and from stdin; the generation stat prints is the one that
 * works, over railio:// and file://. */
TEST(exit_changed)
{
    struct srv_env e;
    char out[4096], gen[64];

    setup();
    T_EQ(cli_run(NULL, 0, "put -q --if-absent file://%s/store/obj %s/in.bin 2>/dev/null", dir, dir),
         10);
    T_EQ(t_sh("printf x | %s put -q --if-absent file://%s/store/obj - 2>%s/err", cli_bin(), dir,
              dir),
         10);
    T_EQ(t_sh("grep -q -- '--if-absent: the key holds an object' %s/err", dir), 0);
    T_EQ(cli_run(NULL, 0, "get -q file://%s/store/obj %s/back.bin", dir, dir), 0);
    T_EQ(t_sh("cmp -s %s/in.bin %s/back.bin", dir, dir), 0);
    T_EQ(cli_run(NULL, 0, "put -q --if-absent file://%s/store/new %s/in.bin", dir, dir), 0);
    T_EQ(cli_run(NULL, 0, "put -q --if-generation 5 file://%s/store/new %s/in.bin 2>/dev/null", dir,
                 dir),
         10);
    T_EQ(cli_run(
             gen, sizeof(gen),
             "stat --json file://%s/store/new | sed 's/.*\"generation\":\"\\([0-9]*\\)\".*/\\1/'",
             dir),
         0);
    gen[strcspn(gen, "\n")] = '\0';
    T_EQ(cli_run(NULL, 0, "put -q --if-generation %s file://%s/store/new %s/in.bin", gen, dir, dir),
         0);
    /* the put made another generation: a remove on the old one is refused */
    T_EQ(cli_run(NULL, 0, "rm -q --if-generation %s file://%s/store/new 2>/dev/null", gen, dir),
         10);
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/new >/dev/null", dir), 0);
    T_EQ(cli_run(NULL, 0,
                 "put -q --if-absent --if-generation 5 file://%s/store/x %s/in.bin "
                 "2>/dev/null",
                 dir, dir),
         2);
    T_EQ(cli_run(NULL, 0, "put -q --if-generation 0 file://%s/store/x %s/in.bin 2>/dev/null", dir,
                 dir),
         2);
    /* 2^64-1 is no generation (the transports' "if absent": it stored x,
     * absent, and exited 0). */
    T_EQ(cli_run(NULL, 0,
                 "put -q --if-generation 18446744073709551615 file://%s/store/x %s/in.bin "
                 "2>/dev/null",
                 dir, dir),
         2);
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/x 2>/dev/null", dir), 3);

    srv_prepare(&e);
    const char *args[] = {"--memory", "64M", NULL};
    srv_start_listen(&e, NULL, args);
    T_EQ(cli_run(NULL, 0, "put -q --if-absent railio://%s/k %s/in.bin", e.addr[0], dir), 0);
    T_EQ(cli_run(out, sizeof(out),
                 "stat --json railio://%s/k | sed 's/.*\"generation\":\"\\([0-9]*\\)\".*/\\1/'",
                 e.addr[0]),
         0);
    out[strcspn(out, "\n")] = '\0';
    T_EQ(t_sh("printf two | %s put -q --if-generation %s railio://%s/k -", cli_bin(), out,
              e.addr[0]),
         0);
    T_EQ(t_sh("printf three | %s put -q --if-generation %s railio://%s/k - 2>/dev/null", cli_bin(),
              out, e.addr[0]),
         10);
    T_EQ(cli_run(out, sizeof(out), "get -q railio://%s/k -", e.addr[0]), 0);
    T_EQ(strcmp(out, "two"), 0);
    /* rm --if-generation: another generation is 10 and left; its own goes. */
    T_EQ(cli_run(gen, sizeof(gen),
                 "stat --json railio://%s/k | sed 's/.*\"generation\":\"\\([0-9]*\\)\".*/\\1/'",
                 e.addr[0]),
         0);
    gen[strcspn(gen, "\n")] = '\0';
    T_EQ(cli_run(NULL, 0, "rm -q --if-generation 5 railio://%s/k 2>/dev/null", e.addr[0]), 10);
    /* Said as put says it: the condition, not a change during the removal. */
    T_EQ(cli_run(out, sizeof(out), "rm -q --if-generation 5 railio://%s/k 2>&1", e.addr[0]), 10);
    T_NOTNULL(strstr(out, "--if-generation: the key's object is another generation; nothing "
                          "removed"));
    T_EQ(cli_run(out, sizeof(out), "rm --json --if-generation 5 railio://%s/k", e.addr[0]), 10);
    T_NOTNULL(strstr(out, "\"detail\":\"--if-generation: the key's object is another"));
    T_EQ(cli_run(NULL, 0, "rm -q --if-generation %s -r railio://%s/k 2>/dev/null", gen, e.addr[0]),
         2);
    /* Its --if-generation=G form too (it went to the one-key rm, which said
     * "option '--if-generation' takes no value"). */
    T_EQ(cli_run(NULL, 0, "rm -q --if-generation=5 railio://%s/k 2>/dev/null", e.addr[0]), 10);
    T_EQ(cli_run(NULL, 0, "rm -q --if-generation=%s railio://%s/k", gen, e.addr[0]), 0);
    T_EQ(cli_run(NULL, 0, "stat railio://%s/k 2>/dev/null", e.addr[0]), 3);
    T_EQ(srv_stop(&e), 0);
}

/* 9: stdout could not be written: a command that "worked" still fails. */
TEST(exit_stdout_write_error)
{
    setup();
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/obj >/dev/full 2>/dev/null", dir), 9);
    T_EQ(cli_run(NULL, 0, "stat --json file://%s/store/obj >/dev/full 2>/dev/null", dir), 9);
    T_EQ(cli_run(NULL, 0, "get file://%s/store/obj - >/dev/full 2>/dev/null", dir), 9);
    T_EQ(cli_run(NULL, 0, "version >/dev/full 2>/dev/null"), 9);
}

/* 1: anything else (an I/O error of the store). */
TEST(exit_other)
{
    setup();
    T_EQ(cli_run(NULL, 0,
                 "stat 'file://%s/store/obj?faults=meta_error:op=lookup:error=EIO' 2>/dev/null",
                 dir),
         1);
}

/* 1, at once: a backend that lists nothing (file:// with single=1; so
 * http://) makes ls, ls -r and a cat of a pattern fail with RIO_ENOTSUP.
 * They asked again for ever at full CPU. */
TEST(listing_unsupported_fails)
{
    setup();
    static const char *const cmds[] = {"ls", "ls -r", "cat"};
    for (int i = 0; i < 3; i++)
        T_EQ(t_sh("timeout -s KILL 20 %s %s 'file://%s/one/x/%s?single=1' >/dev/null "
                  "2>%s/err; test $? = 1 && grep -q RIO_ENOTSUP %s/err",
                  cli_bin(), cmds[i], dir, i == 2 ? "m*" : "", dir, dir),
             0);
    /* cp -r of it: the summary says the walk stopped (it said "0 failed"
     * beside exit 1). */
    T_EQ(t_sh("timeout -s KILL 20 %s cp -r 'file://%s/one/x/?single=1' %s/cpd 2>%s/err; "
              "test $? = 1 && grep -q 'the walk stopped' %s/err",
              cli_bin(), dir, dir, dir, dir),
         0);
}

/* 1, not a crash: a file cut shorter while `railio put` reads it (it is
 * mapped: the first page past the new end raises SIGBUS) is said by name,
 * and nothing is written. Writes are slowed so that the cut lands in the
 * middle of the PUT. */
TEST(put_of_a_file_cut_short)
{
    /* put FILE URL and cp FILE URL: the message in the documented form,
     * "railio VERB: ...". */
    static const char *const verb[] = {"put", "cp"};
    char out[4096], want[512];
    setup();
    for (int i = 0; i < 2; i++) {
        T_EQ(t_sh("head -c 67108864 /dev/zero > %s/big.bin", dir), 0);
        char url[512], file[256];
        snprintf(url, sizeof(url), "'file://%s/store/cut?faults=delay:op=write:delay=300'", dir);
        snprintf(file, sizeof(file), "%s/big.bin", dir);
        T_EQ(cli_run(out, sizeof(out), "%s %s %s 2>&1 & sleep 0.5; truncate -s 0 %s; wait $!",
                     verb[i], i ? file : url, i ? url : file, file),
             1);
        fprintf(stderr, "%s", out);
        T_NULL(strstr(out, "Bus error"));
        snprintf(want, sizeof(want),
                 "railio %s: reading %s/big.bin: the file was cut shorter while it was being "
                 "read",
                 verb[i], dir);
        T_NOTNULL(strstr(out, want));
    }
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/cut 2>/dev/null", dir), 3);
}

/* A file that another process truncates or appends to while `put URL -
 * < FILE` or `cp -r DIR URL` reads it (the size was declared when the PUT
 * began): exit 1, the file named with both sizes (it was the key and a
 * bare RIO_EINVAL, --json's detail ""), and nothing published. Writes are
 * slowed so that the change lands in the middle of the PUT. */
TEST(put_of_a_file_that_changes_size)
{
    static const char *const change[] = {"truncate -s 1000", "head -c 1048576 /dev/zero >>"};
    char out[4096];
    setup();
    T_EQ(t_sh("mkdir -p %s/tr", dir), 0);
    for (int i = 0; i < 4; i++) {
        bool tree = i >= 2;
        const char *f = tree ? "tr/big.bin" : "big.bin";
        T_EQ(t_sh("head -c 67108864 /dev/zero > %s/%s", dir, f), 0);
        if (tree)
            T_EQ(cli_run(out, sizeof(out),
                         "cp -r %s/tr 'file://%s/store/tr?faults=delay:op=write:delay=300' 2>&1 "
                         "& sleep 0.5; %s %s/%s; wait $!",
                         dir, dir, change[i % 2], dir, f),
                 1);
        else
            T_EQ(cli_run(out, sizeof(out),
                         "put %s'file://%s/store/chg?faults=delay:op=write:delay=300' - < "
                         "%s/%s 2>&1 & sleep 0.5; %s %s/%s; wait $!",
                         i ? "" : "--json -v ", dir, dir, f, change[i % 2], dir, f),
                 1);
        fprintf(stderr, "%s\n", out);
        T_NOTNULL(strstr(out, f));
        T_NOTNULL(strstr(out, "changed size while it was being read (67108864 bytes declared, "));
        T_NOTNULL(strstr(out, i % 2 ? "at least " : " read); nothing was written"));
        T_NULL(strstr(out, "store/"));
        if (i == 0)
            T_NOTNULL(strstr(out, "\"detail\":\"the file changed size"));
    }
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/chg 2>/dev/null", dir), 3);
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/tr/big.bin 2>/dev/null", dir), 3);
}

/* get and cp into an existing directory write DIR/<last key element>. */
TEST(get_into_directory)
{
    char p[128];
    setup();
    snprintf(p, sizeof(p), "%s/d", dir);
    T_EQ(mkdir(p, 0755), 0);
    T_EQ(cli_run(NULL, 0, "get -q file://%s/store/obj %s/d/", dir, dir), 0);
    snprintf(p, sizeof(p), "%s/d/obj", dir);
    check_obj(p);
    T_EQ(unlink(p), 0);
    T_EQ(cli_run(NULL, 0, "get -q file://%s/store/obj %s/d", dir, dir), 0);
    check_obj(p);
    T_EQ(unlink(p), 0);
    T_EQ(cli_run(NULL, 0, "cp -q file://%s/store/obj %s/d", dir, dir), 0);
    check_obj(p);
    /* And the other way: a URL ending in '/' takes the file's name. */
    T_EQ(cli_run(NULL, 0, "cp -q %s/in.bin file://%s/store/", dir, dir), 0);
    T_EQ(cli_run(NULL, 0, "get -q file://%s/store/in.bin %s/back", dir, dir), 0);
    snprintf(p, sizeof(p), "%s/back", dir);
    check_obj(p);
    /* No destination: ./<last key element>. */
    char cwd[512];
    T_NOTNULL(getcwd(cwd, sizeof(cwd)));
    snprintf(p, sizeof(p), "%s/d", dir);
    T_EQ(chdir(p), 0);
    T_EQ(unlink("obj"), 0);
    T_EQ(cli_run(NULL, 0, "get -q file://%s/store/obj", dir), 0);
    T_EQ(chdir(cwd), 0);
    snprintf(p, sizeof(p), "%s/d/obj", dir);
    check_obj(p);
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

/* railio run with stdout and stderr closed (>&- 2>&-: a cron line, a
 * daemon's child): nothing of its own takes their numbers. The signal
 * pipe took fds 1 and 2, so a warning on stderr (a mistyped RIO_DEPHT)
 * went into the pipe and cancelled `put -`: exit 1, nothing stored. A
 * closed stdout still fails a command that writes it (9). */
TEST(closed_std_fds_take_nothing)
{
    setup();
    T_EQ(t_sh("head -c 100000 %s/in.bin | RIO_DEPHT=1 %s put file://%s/store/k - >&- 2>&-", dir,
              cli_bin(), dir),
         0);
    T_EQ(cli_run(NULL, 0, "stat file://%s/store/k >/dev/null", dir), 0);
    T_EQ(t_sh("%s stat file://%s/store/k >&- 2>/dev/null", cli_bin(), dir), 9);
    T_EQ(t_sh("%s put file://%s/store/k2 - <&- 2>/dev/null", cli_bin(), dir), 1);
}
