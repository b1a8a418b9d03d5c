/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/* T_TIMEOUT 120 */
/*
 * `railio get` resumes an interrupted download of an unchanged object. The
 * fault filter lets the first 10 chunks through and holds the rest 20 s, so
 * the interrupt comes with exactly 10 chunks written: SIGINT leaves
 * FILE.railio-tmp and FILE.railio-tmp.resume (and FILE as it was), exit 130;
 * the next get re-verifies the kept chunks, fetches only the rest and ends
 * byte-exact. A replaced object, a corrupted record, a kept chunk that no
 * longer matches and --no-resume each start over (or keep less), never
 * stitch two generations together.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli_util.h"

#define CHUNK (64 * 1024)
#define OBJ_SIZE (3 * 1024 * 1024 + 11)
#define KEPT (10 * CHUNK) /* chunks the fault lets through */

static const char *dir;
static char out[256], tmpf[256], rec[256], store[256];

/* A scratch dir (made once) with DIR/store/obj put afresh (pattern seed 3,
 * 64 KiB chunks). */
static void setup(void)
{
    if (!dir)
        dir = cli_scratch("rio-resume", NULL, OBJ_SIZE, 3);
    snprintf(out, sizeof(out), "%s/out.bin", dir);
    snprintf(tmpf, sizeof(tmpf), "%s/out.bin.railio-tmp", dir);
    snprintf(rec, sizeof(rec), "%s/out.bin.railio-tmp.resume", dir);
    snprintf(store, sizeof(store), "file://%s/store/obj", dir);
    T_EQ(cli_run(NULL, 0, "put -q '%s?chunk=64K' %s/in.bin", store, dir), 0);
}

static off_t file_size(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? sb.st_size : -1;
}

/* `railio get` of the object into out.bin (holding "old"), held after 10
 * chunks, ended by sig once they are written and a record exists. */
/* FILE holding "old", a get of the object into it started (its output
 * dropped) and held after 10 chunks, its kept bytes and record written:
 * its pid. */
static pid_t start_held_get(void)
{
    char url[512];
    t_write_file(out, "old", 3);
    snprintf(url, sizeof(url), "%s?faults=delay:op=read:skip=10:delay=20000&paths=1&depth=2",
             store);
    pid_t pid = fork();
    T_TRUE(pid >= 0);
    if (pid == 0) {
        int nul = open("/dev/null", O_RDWR);
        dup2(nul, 0);
        dup2(nul, 1);
        dup2(nul, 2);
        execl(cli_bin(), "railio", "get", url, out, (char *)NULL);
        _exit(127);
    }
    double t0 = cli_now_s();
    while (file_size(tmpf) < KEPT || file_size(rec) <= 0) {
        T_TRUE(cli_now_s() - t0 < 10);
        usleep(20000);
    }
    return pid;
}

static void killed_get(int sig)
{
    pid_t pid = start_held_get();
    usleep(200000); /* nothing more comes: the 11th chunk is held */
    T_EQ(kill(pid, sig), 0);
    int st;
    T_EQ(waitpid(pid, &st, 0), pid);
    /* ended by the signal (re-raised) or exit 128 + sig: the shell's status either way */
    T_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), 128 + sig);
    T_EQ(file_size(tmpf), KEPT);
    T_GT(file_size(rec), 0);
    T_EQ(file_size(out), 3); /* FILE untouched until the end */
}

static void interrupted_get(void)
{
    killed_get(SIGINT);
}

/* Get again with --json and extra arguments: exit 0, out.bin equal to
 * want (n bytes), no temporary file left; the resumed_from and fetched
 * byte counts it reported. */
static void get_again(const char *extra, const uint8_t *want, size_t n, uint64_t *from,
                      uint64_t *fetched)
{
    char js[8192];
    T_EQ(cli_run(js, sizeof(js), "get --json %s %s %s", extra, store, out), 0);
    const char *p = strstr(js, "\"resumed_from\":");
    const char *q = strstr(js, "\"stats\":{\"bytes\":");
    T_NOTNULL(p);
    T_NOTNULL(q);
    *from = strtoull(p + strlen("\"resumed_from\":"), NULL, 10);
    *fetched = strtoull(q + strlen("\"stats\":{\"bytes\":"), NULL, 10);
    size_t got;
    uint8_t *b = t_slurp(out, &got);
    T_EQ(got, n);
    T_MEMEQ(b, want, n);
    free(b);
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

static uint8_t *pattern(size_t n, uint64_t seed)
{
    uint8_t *b = malloc(n);
    T_NOTNULL(b);
    t_fill_pattern(b, n, seed);
    return b;
}

/* Get the original object again (extra: more arguments): byte-exact, with
 * want_from bytes kept and only the rest fetched. */
static void again_keeps(const char *extra, uint64_t want_from)
{
    uint64_t from, fetched;
    uint8_t *src = pattern(OBJ_SIZE, 3);
    get_again(extra, src, OBJ_SIZE, &from, &fetched);
    T_EQ(from, want_from);
    T_EQ(fetched, (uint64_t)OBJ_SIZE - want_from);
    free(src);
}

/* The kept 10 chunks are verified again and only the rest is fetched. */
TEST(interrupted_get_resumes)
{
    setup();
    interrupted_get();
    again_keeps("", KEPT);
}

/* The object replaced between the two gets: a new generation, so the get
 * starts over and ends with the new object's bytes only. */
TEST(replaced_object_starts_over)
{
    uint64_t from, fetched;
    char in2[256];
    setup();
    interrupted_get();
    const size_t n2 = OBJ_SIZE - 1000;
    uint8_t *src2 = pattern(n2, 4);
    snprintf(in2, sizeof(in2), "%s/in2.bin", dir);
    t_write_file(in2, src2, n2);
    T_EQ(cli_run(NULL, 0, "put -q '%s?chunk=64K' %s", store, in2), 0);
    get_again("", src2, n2, &from, &fetched);
    T_EQ(from, 0u);
    T_EQ(fetched, (uint64_t)n2);
    free(src2);
}

/* A record that is not one railio wrote (more bytes done than kept with
 * its check line stale, garbage, too long, a FIFO) is not trusted: start
 * over. */
TEST(corrupted_record_starts_over)
{
    setup();
    interrupted_get();
    size_t n;
    char *r = (char *)t_slurp(rec, &n);
    char *d = strstr(r, "done ");
    T_NOTNULL(d);
    d[5] = d[5] == '9' ? '8' : '9';
    t_write_file(rec, r, n);
    free(r);
    again_keeps("", 0);

    /* garbage, and a record far too long: start over too */
    interrupted_get();
    t_write_file(rec, "railio-resume 1\nurl zz\n", 23);
    again_keeps("", 0);
    interrupted_get();
    char big[4096];
    memset(big, '7', sizeof(big));
    t_write_file(rec, big, sizeof(big));
    again_keeps("", 0);
    /* a FIFO under the record's name neither blocks the get nor is trusted */
    interrupted_get();
    T_EQ(unlink(rec), 0);
    T_EQ(mkfifo(rec, 0600), 0);
    again_keeps("", 0);
}

/* A kept chunk changed on disk (a bit flipped in the 5th) fails its
 * checksum: only the chunks before it are kept. */
TEST(changed_kept_chunk_is_fetched_again)
{
    setup();
    interrupted_get();
    int fd = open(tmpf, O_RDWR);
    T_TRUE(fd >= 0);
    uint8_t b;
    T_EQ(pread(fd, &b, 1, 4 * CHUNK + 17), 1);
    b ^= 0x10;
    T_EQ(pwrite(fd, &b, 1, 4 * CHUNK + 17), 1);
    close(fd);
    again_keeps("", 4 * CHUNK);
}

/* A FILE.railio-tmp with no record is not an interrupted get's (a user's
 * file, an object of that name fetched by cp -r): get neither uses nor
 * removes it, with or without --no-resume. */
TEST(unrelated_tmp_name_is_kept)
{
    setup();
    unlink(out);
    unlink(rec);
    uint8_t *src = pattern(OBJ_SIZE, 3);
    for (int i = 0; i < 2; i++) {
        t_write_file(tmpf, "precious", 8);
        T_EQ(cli_run(NULL, 0, "get -q %s '%s' %s", i ? "--no-resume" : "", store, out), 0);
        size_t n;
        char *kept = (char *)t_slurp(tmpf, &n);
        T_EQ(n, 8u);
        T_MEMEQ(kept, "precious", 8);
        free(kept);
        uint8_t *got = t_slurp(out, &n);
        T_EQ(n, (size_t)OBJ_SIZE);
        T_MEMEQ(got, src, OBJ_SIZE);
        free(got);
    }
    T_EQ(unlink(tmpf), 0);
    free(src);
}

/* --no-resume throws the kept bytes away. */
TEST(no_resume_starts_over)
{
    setup();
    interrupted_get();
    again_keeps("--no-resume", 0);
}

/* Killed outright (SIGKILL: no unwinding): the record written as the get
 * went still covers whole chunks already written; the next get keeps those
 * (at least the first) and fetches the rest, byte-exact. */
TEST(killed_get_resumes_from_its_last_record)
{
    uint64_t from, fetched;
    setup();
    killed_get(SIGKILL);
    uint8_t *src = pattern(OBJ_SIZE, 3);
    get_again("", src, OBJ_SIZE, &from, &fetched);
    T_GE(from, (uint64_t)CHUNK);
    T_LE(from, (uint64_t)KEPT);
    T_EQ(from % CHUNK, 0u);
    T_EQ(fetched, (uint64_t)OBJ_SIZE - from);
    free(src);
}

/* SIGTERM keeps the same pair as SIGINT (exit 143) and resumes alike. */
TEST(sigterm_get_resumes)
{
    setup();
    killed_get(SIGTERM);
    again_keeps("", KEPT);
}

/* A get whose read fails fails: out.bin is as it was and the chunks
 * written are kept for the next get. (The failure's exit status, 1, was
 * taken for "cannot be resumed": the object was fetched again the other
 * way, the get said it failed and exited 0, the pair stayed beside the
 * new out.bin.) */
TEST(failed_get_fails_and_keeps_its_chunks)
{
    char err[4096];
    setup();
    t_write_file(out, "old", 3);
    int rc = cli_run(err, sizeof(err),
                     "get '%s?faults=error:op=read:skip=10:error=EIO:count=1&paths=1&depth=1' %s "
                     "2>&1",
                     store, out);
    T_NE(rc, 0);
    T_NOTNULL(strstr(err, "EIO"));
    size_t got;
    uint8_t *b = t_slurp(out, &got);
    T_EQ(got, 3u);
    T_MEMEQ(b, "old", 3);
    free(b);
    T_EQ(file_size(tmpf), (off_t)KEPT);
    T_GE(file_size(rec), 1);
    again_keeps("", KEPT);
}

/* Two gets into the same FILE at once (a job's second run, a retry that
 * did not wait): the second leaves the first's pair alone and takes the
 * unnamed temporary file. It resumed from the pair instead, truncating
 * FILE.railio-tmp to its record under the first, whose chunks written
 * past the record became zeros in the FILE it then renamed and reported
 * done (exit 0); with --no-resume it dropped the pair and made its own,
 * which the first renamed over FILE half written. A get holds a lock on
 * its FILE.railio-tmp while it runs. */
TEST(second_get_leaves_a_running_gets_pair_alone)
{
    char js[8192];
    setup();
    pid_t pid = start_held_get();
    usleep(200000);
    /* The running get holds the lock on its kept bytes. */
    int fd = open(tmpf, O_RDONLY | O_CLOEXEC);
    T_TRUE(fd >= 0);
    T_EQ(flock(fd, LOCK_EX | LOCK_NB), -1);
    close(fd);
    /* A second get, plain and --no-resume: the object whole, nothing of
     * the pair used or removed. */
    for (int i = 0; i < 2; i++) {
        T_EQ(cli_run(js, sizeof(js), "get --json %s %s %s", i ? "--no-resume" : "", store, out), 0);
        T_NOTNULL(strstr(js, "\"resumed_from\":0"));
        size_t got;
        uint8_t *b = t_slurp(out, &got), *src = pattern(OBJ_SIZE, 3);
        T_EQ(got, (size_t)OBJ_SIZE);
        T_MEMEQ(b, src, OBJ_SIZE);
        free(b);
        free(src);
        T_EQ(file_size(tmpf), KEPT);
        T_GT(file_size(rec), 0);
    }
    T_EQ(kill(pid, SIGINT), 0);
    int st;
    T_EQ(waitpid(pid, &st, 0), pid);
    T_EQ(WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st), 128 + SIGINT);
    unlink(tmpf);
    unlink(rec);
}
