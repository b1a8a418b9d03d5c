/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/* T_TIMEOUT 90 */
/*
 * `railio get URL FILE` writes each chunk at its offset as soon as it is
 * verified, in whatever order chunks verify (rio__get_chunks). Whatever the
 * order, FILE is replaced only once every chunk was written:
 * - chunks that land out of order (the first one held) end byte-exact;
 * - a write that fails (the file size limit, RLIMIT_FSIZE: EFBIG) leaves
 *   the old FILE and no temporary file;
 * - a read that fails mid-object leaves the old FILE; the resume record
 *   claims only the prefix of whole chunks written, and the next get keeps
 *   exactly that and ends byte-exact;
 * - interrupted while the first chunk is held and later ones were written:
 *   nothing is kept (no prefix), nothing is left;
 * - the unnamed-temporary-file way (FILE.railio-tmp is someone else's)
 *   writes at offsets too, and a failed write there leaves the old FILE.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"

#define CHUNK (64 * 1024)
#define OBJ_SIZE (3 * 1024 * 1024 + 11) /* 49 chunks, the last short */

static const char *dir;
static char out[256], tmpf[256], rec[256], store[256];
static uint8_t *src;

/* A scratch dir with DIR/store/obj (pattern seed 9, 64 KiB chunks) and
 * DIR/out.bin holding "old". */
static void setup(void)
{
    src = malloc(OBJ_SIZE);
    T_NOTNULL(src);
    dir = cli_scratch("rio-getchunks", src, OBJ_SIZE, 9);
    snprintf(out, sizeof(out), "%s/out.bin", dir);
    snprintf(tmpf, sizeof(tmpf), "%s/out.bin.railio-tmp", dir);
    snprintf(rec, sizeof(rec), "%s/out.bin.railio-tmp.resume", dir);
    snprintf(store, sizeof(store), "file://%s/store/obj", dir);
    T_EQ(cli_run(NULL, 0, "put -q '%s?chunk=64K' %s/in.bin", store, dir), 0);
    t_write_file(out, "old", 3);
}

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

static void out_is_old(void)
{
    size_t n;
    uint8_t *b = t_slurp(out, &n);
    T_EQ(n, 3u);
    T_MEMEQ(b, "old", 3);
    free(b);
}

static void out_is_obj(void)
{
    size_t n;
    uint8_t *b = t_slurp(out, &n);
    T_EQ(n, (size_t)OBJ_SIZE);
    T_MEMEQ(b, src, OBJ_SIZE);
    free(b);
}

/* Start `railio get URL out.bin` (URL: the store with params), stdio on
 * /dev/null; fsize > 0: under that file size limit, SIGXFSZ ignored (so a
 * write past it fails with EFBIG instead of killing the process). */
static pid_t start_get(const char *params, rlim_t fsize)
{
    char url[512];
    snprintf(url, sizeof(url), "%s?%s", store, params);
    pid_t pid = fork();
    T_TRUE(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        if (fsize) {
            struct rlimit rl = {fsize, fsize};
            signal(SIGXFSZ, SIG_IGN);
            if (setrlimit(RLIMIT_FSIZE, &rl) < 0)
                _exit(126);
        }
        execl(cli_bin(), "railio", "get", url, out, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_exit(pid_t pid)
{
    int st;
    T_EQ(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The "done" of the resume record. */
static uint64_t rec_done(void)
{
    size_t n;
    char *r = (char *)t_slurp(rec, &n);
    char *d = memmem(r, n, "\ndone ", 6);
    T_NOTNULL(d);
    uint64_t v = strtoull(d + 6, NULL, 10);
    free(r);
    return v;
}

/* Get again, no faults: byte-exact, nothing left; the bytes it kept. */
static uint64_t get_again(void)
{
    char js[8192];
    T_EQ(cli_run(js, sizeof(js), "get --json '%s' %s", store, out), 0);
    const char *p = strstr(js, "\"resumed_from\":");
    T_NOTNULL(p);
    out_is_obj();
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
    return strtoull(p + strlen("\"resumed_from\":"), NULL, 10);
}

/* Chunk 0 held 400 ms: the chunks after it (2 queues, depth 4) verify first and are
 * written first, at their offsets; the file ends byte-exact. */
TEST(out_of_order_chunks_land_at_their_offsets)
{
    setup();
    pid_t pid = start_get("faults=delay:op=read:chunk=0:delay=400&paths=2&depth=4", 0);
    T_EQ(wait_exit(pid), 0);
    out_is_obj();
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

/* Writes past 1 MiB fail (EFBIG): exit non-zero, the old FILE whole, no
 * temporary file and no record. */
TEST(write_failure_keeps_old_file_and_no_tmp)
{
    setup();
    pid_t pid = start_get("paths=1&depth=4", 1 << 20);
    T_NE(wait_exit(pid), 0);
    out_is_old();
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
    /* and a get that can write replaces it */
    T_EQ(get_again(), 0u);
}

/* Every read of chunk 20 fails (EIO, no retry): exit non-zero, the old
 * FILE whole; what is kept is a prefix of whole chunks that the record
 * names (chunks written above the failed one are not claimed), and the
 * next get keeps exactly that. */
TEST(read_failure_keeps_nothing_visible)
{
    setup();
    pid_t pid = start_get("faults=error:op=read:chunk=20:error=EIO&retries=1&paths=1&depth=8", 0);
    T_NE(wait_exit(pid), 0);
    out_is_old();
    uint64_t done = 0;
    if (file_size(rec) > 0) {
        done = rec_done();
        T_LE(done, (uint64_t)20 * CHUNK);
        T_EQ(done % CHUNK, 0u);
        T_GE(file_size(tmpf), (off_t)done);
    } else {
        T_EQ(t_dir_count(dir, "railio-tmp"), 0);
    }
    T_EQ(get_again(), done);
}

/* SIGINT while chunk 0 is held 20 s and the chunks after it were written
 * (adapt=off: all 2 x 4 slots from the first op, so chunks 1..7 go out):
 * no prefix to keep, so nothing is kept and nothing is left. */
TEST(interrupted_with_no_prefix_leaves_nothing)
{
    setup();
    pid_t pid = start_get("faults=delay:op=read:chunk=0:delay=20000&paths=2&depth=4&adapt=off", 0);
    double t0 = cli_now_s();
    while (file_size(tmpf) < 8 * CHUNK) { /* chunks 1..7 written */
        T_TRUE(cli_now_s() - t0 < 10);
        usleep(20000);
    }
    usleep(100000);
    T_EQ(file_size(rec), -1); /* no prefix: no record */
    T_EQ(kill(pid, SIGINT), 0);
    T_EQ(wait_exit(pid), 130);
    out_is_old();
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
    T_EQ(get_again(), 0u);
}

/* A FILE.railio-tmp that is not an interrupted get's (a user's file) sends
 * the get the unnamed-temporary-file way, which takes the same descriptor
 * and writes chunks at their offsets too: out of order, byte-exact; a
 * write that fails leaves the old FILE and the user's file only. */
TEST(unnamed_way_writes_at_offsets)
{
    setup();
    t_write_file(tmpf, "precious", 8);
    pid_t pid = start_get("faults=delay:op=read:chunk=0:delay=400&paths=2&depth=4", 0);
    T_EQ(wait_exit(pid), 0);
    out_is_obj();
    t_write_file(out, "old", 3);
    pid = start_get("paths=1&depth=4", 1 << 20);
    T_NE(wait_exit(pid), 0);
    out_is_old();
    size_t n;
    uint8_t *kept = t_slurp(tmpf, &n);
    T_EQ(n, 8u);
    T_MEMEQ(kept, "precious", 8);
    free(kept);
    T_EQ(t_dir_count(dir, "railio-tmp"), 1);
}
