/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file;net */
/* T_TIMEOUT 120 */
/*
 * `railio put railio://... -` to a railiod that takes no upload of unknown
 * size (its disk tier before 2026-12-05; here a railiod started with
 * RAILIOD_TEST_NO_STREAM_PUT=1, which leaves it out of HELLO's
 * capabilities): the CLI spools stdin to an unnamed
 * temporary file in $TMPDIR and PUTs that with its size, so its memory
 * stays bounded (it used to read all of stdin into memory) and nothing is
 * left in $TMPDIR. 64 MiB through a pipe, the CLI's peak RSS under 48 MiB,
 * the object read back byte for byte.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "server_env.h"

#define SPOOL_SIZE (64u << 20)
#define RSS_LIMIT_KB (48L * 1024)

TEST(stdin_spooled_with_bounded_memory)
{
    struct srv_env e;
    char data[256], src[256], back[256], tmpdir[256], err[256];
    srv_prepare(&e);
    snprintf(data, sizeof(data), "%s/data", e.dir);
    snprintf(src, sizeof(src), "%s/src", e.dir);
    snprintf(back, sizeof(back), "%s/back", e.dir);
    snprintf(tmpdir, sizeof(tmpdir), "%s/spool", e.dir);
    snprintf(err, sizeof(err), "%s/err", e.dir);
    T_EQ(mkdir(tmpdir, 0700), 0);
    const char *args[] = {"--data-dir", data, "--memory", "64M", NULL};
    setenv("RAILIOD_TEST_NO_STREAM_PUT", "1", 1);
    srv_start_listen(&e, NULL, args);
    unsetenv("RAILIOD_TEST_NO_STREAM_PUT");

    /* The source, made by a child: this process stays small, since a
     * child started by system() begins its peak RSS at its parent's. */
    T_EQ(t_sh("head -c %u /dev/urandom >%s", SPOOL_SIZE, src), 0);
    T_EQ(t_sh("cat %s | TMPDIR=%s %s put -v railio://%s/k - 2>%s", src, tmpdir, cli_bin(),
              e.addr[0], err),
         0);
    struct rusage ru;
    T_EQ(getrusage(RUSAGE_CHILDREN, &ru), 0);
    printf("railio put -: peak RSS %ld KiB for %u MiB of stdin\n", ru.ru_maxrss, SPOOL_SIZE >> 20);
    T_LT(ru.ru_maxrss, RSS_LIMIT_KB);
    T_EQ(t_sh("grep -q 'spooling stdin to a temporary file in %s' %s", tmpdir, err), 0);
    /* The spool had no name: nothing left behind. */
    T_EQ(t_sh("test -z \"$(ls -A %s)\"", tmpdir), 0);

    T_EQ(t_sh("%s get -q railio://%s/k %s", cli_bin(), e.addr[0], back), 0);
    T_EQ(t_sh("cmp %s %s", src, back), 0);
    T_EQ(srv_stop(&e), 0);
}

/*
 * `railio put URL FIFO`: a FILE that is no regular file (a FIFO, bash's
 * <(cmd), a device) is streamed as stdin is, to a railiod that takes
 * uploads of unknown size and to one that does not (spooled): it used to
 * be read whole into memory first (a 1.5 GB <(cmd) took 1.5 GB of RSS,
 * /dev/zero all of it). 64 MiB through a FIFO each way, the CLI's peak
 * RSS under 48 MiB, the object read back byte for byte.
 */
static void put_fifo(int spool)
{
    char src[256], back[256], fifo[256], tmpdir[256];
    struct srv_env e;
    srv_prepare(&e);
    snprintf(src, sizeof(src), "%s/src", e.dir);
    snprintf(back, sizeof(back), "%s/back", e.dir);
    snprintf(fifo, sizeof(fifo), "%s/fifo", e.dir);
    snprintf(tmpdir, sizeof(tmpdir), "%s/spool", e.dir);
    T_EQ(mkdir(tmpdir, 0700), 0);
    T_EQ(mkfifo(fifo, 0600), 0);
    const char *args[] = {"--memory", "256M", NULL};
    if (spool)
        setenv("RAILIOD_TEST_NO_STREAM_PUT", "1", 1);
    srv_start_listen(&e, NULL, args);
    unsetenv("RAILIOD_TEST_NO_STREAM_PUT");

    T_EQ(t_sh("head -c %u /dev/urandom >%s", SPOOL_SIZE, src), 0);
    T_EQ(t_sh("cat %s >%s & TMPDIR=%s %s put -q railio://%s/k %s; rc=$?; wait; exit $rc", src, fifo,
              tmpdir, cli_bin(), e.addr[0], fifo),
         0);
    struct rusage ru;
    T_EQ(getrusage(RUSAGE_CHILDREN, &ru), 0);
    printf("railio put FIFO (%s): peak RSS %ld KiB for %u MiB\n", spool ? "spooled" : "streamed",
           ru.ru_maxrss, SPOOL_SIZE >> 20);
    T_LT(ru.ru_maxrss, RSS_LIMIT_KB);
    T_EQ(t_sh("test -z \"$(ls -A %s)\"", tmpdir), 0);

    T_EQ(t_sh("%s get -q railio://%s/k %s", cli_bin(), e.addr[0], back), 0);
    T_EQ(t_sh("cmp %s %s", src, back), 0);
    T_EQ(srv_stop(&e), 0);
}

TEST(fifo_file_streamed_with_bounded_memory)
{
    put_fifo(0);
}

TEST(fifo_file_spooled_with_bounded_memory)
{
    put_fifo(1);
}
