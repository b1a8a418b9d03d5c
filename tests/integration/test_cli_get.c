/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/* T_TIMEOUT 60 */
/*
 * railio get URL FILE through the real binary: where its temporary file is
 * made and what a rename may replace.
 * - a symlink planted at the old predictable temporary name
 *   (FILE.railio-tmp.PID) is not followed: its target is untouched;
 * - SIGTERM or SIGINT in the middle of a GET leaves no temporary file;
 * - a destination that is not a regular file (a character device, /dev/null,
 *   a FIFO, a symbolic link) is written in place, never replaced;
 * - but not a link someone else planted in a sticky, world-writable
 *   directory (as root, that wrote through it to whatever it named).
 */
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli_util.h"

#define OBJ_SIZE (3 * 1024 * 1024 + 5)

static char dir[64];
static uint8_t *obj;

static const char *pathf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static const char *pathf(const char *fmt, ...)
{
    static char bufs[4][1024];
    static int next;
    char *p = bufs[next++ % 4];
    int n = snprintf(p, 1024, "%s/", dir);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p + n, (size_t)(1024 - n), fmt, ap);
    va_end(ap);
    return p;
}

/* The whole file; *n its size. */
static uint8_t *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    T_NOTNULL(f);
    uint8_t *p = malloc(OBJ_SIZE + 4096);
    T_NOTNULL(p);
    *n = fread(p, 1, OBJ_SIZE + 4096, f);
    fclose(f);
    return p;
}

static void cleanup(void)
{
    if (dir[0]) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
        if (system(cmd) != 0)
            fprintf(stderr, "cleanup of %s failed\n", dir);
    }
}

/* A scratch dir with store/obj (OBJ_SIZE pattern bytes, PUT with railio). */
static void setup(void)
{
    t_mkdtemp(dir, sizeof(dir), "rio-get");
    atexit(cleanup);
    T_EQ(mkdir(pathf("store"), 0755), 0);
    obj = malloc(OBJ_SIZE);
    T_NOTNULL(obj);
    t_fill_pattern(obj, OBJ_SIZE, 5);
    cli_write_file(pathf("in.bin"), obj, OBJ_SIZE);
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "%s put file://%s/store/obj %s/in.bin 2>/dev/null", cli_bin(), dir,
             dir);
    T_EQ(system(cmd), 0);
}

/* Start `railio get file://DIR/store/obj?PARAMS OUT`, held until release()
 * (so that the caller knows its pid first). */
static pid_t start_get(const char *params, const char *out, int *release)
{
    int p[2];
    T_EQ(pipe(p), 0);
    pid_t pid = fork();
    T_TRUE(pid >= 0);
    if (pid == 0) {
        char c, url[1024];
        close(p[1]);
        if (read(p[0], &c, 1) != 1)
            _exit(120);
        close(p[0]);
        snprintf(url, sizeof(url), "file://%s/store/obj%s%s", dir, params[0] ? "?" : "", params);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execl(cli_bin(), "railio", "get", url, out, (char *)NULL);
        _exit(127);
    }
    close(p[0]);
    *release = p[1];
    return pid;
}

static void release(int fd)
{
    T_EQ(write(fd, "x", 1), 1);
    close(fd);
}

static int wait_exit(pid_t pid)
{
    int st;
    T_EQ(waitpid(pid, &st, 0), pid);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static int get_to(const char *out)
{
    int rel;
    pid_t pid = start_get("", out, &rel);
    release(rel);
    return wait_exit(pid);
}

static void check_obj(const char *path)
{
    size_t n;
    uint8_t *b = slurp(path, &n);
    T_EQ(n, (size_t)OBJ_SIZE);
    T_MEMEQ(b, obj, OBJ_SIZE);
    free(b);
}

/* DIR/victim still holds "precious". */
static void victim_untouched(void)
{
    size_t n;
    uint8_t *b = slurp(pathf("victim"), &n);
    T_EQ(n, 8u);
    T_MEMEQ(b, "precious", 8);
    free(b);
}

TEST(planted_symlink_not_followed)
{
    setup();
    cli_write_file(pathf("victim"), "precious", 8);
    int rel;
    const char *out = pathf("out.bin");
    pid_t pid = start_get("", out, &rel);
    /* The name the old CLI used: FILE.railio-tmp.PID. */
    T_EQ(symlink(pathf("victim"), pathf("out.bin.railio-tmp.%ld", (long)pid)), 0);
    release(rel);
    T_EQ(wait_exit(pid), 0);
    victim_untouched();
    struct stat st;
    T_EQ(lstat(out, &st), 0);
    T_TRUE(S_ISREG(st.st_mode));
    check_obj(out);
    /* The planted link is still a link, and the only leftover. */
    T_EQ(lstat(pathf("out.bin.railio-tmp.%ld", (long)pid), &st), 0);
    T_TRUE(S_ISLNK(st.st_mode));
    T_EQ(t_dir_count(dir, "railio-tmp"), 1);
}

/* SIGTERM (and SIGINT) while the GET's reads are held: no temporary file. */
static void killed(int sig)
{
    setup();
    int rel;
    const char *out = pathf("out.bin");
    cli_write_file(out, "old", 3);
    pid_t pid = start_get("faults=delay:delay=20000", out, &rel);
    release(rel);
    usleep(700 * 1000); /* the reads are held 20 s: mid-GET */
    T_EQ(kill(pid, sig), 0);
    T_EQ(wait_exit(pid), 128 + sig);
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
    size_t n;
    uint8_t *b = slurp(out, &n); /* the old file is still whole */
    T_EQ(n, 3u);
    T_MEMEQ(b, "old", 3);
    free(b);
}

TEST(sigterm_leaves_no_tmp)
{
    killed(SIGTERM);
}

TEST(sigint_leaves_no_tmp)
{
    killed(SIGINT);
}

/* A character device is written, not replaced: first a null device of our
 * own (as root), then /dev/null itself (the case). */
TEST(char_device_written_in_place)
{
    struct stat st;
    setup();
    if (geteuid() == 0) {
        const char *dev = pathf("null");
        T_EQ(mknod(dev, S_IFCHR | 0666, makedev(1, 3)), 0);
        T_EQ(get_to(dev), 0);
        T_EQ(lstat(dev, &st), 0);
        T_TRUE(S_ISCHR(st.st_mode));
        T_EQ(st.st_rdev, makedev(1, 3));
    }
    T_EQ(stat("/dev/null", &st), 0);
    T_TRUE(S_ISCHR(st.st_mode));
    T_EQ(get_to("/dev/null"), 0);
    T_EQ(lstat("/dev/null", &st), 0);
    T_TRUE(S_ISCHR(st.st_mode));
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

/* A FIFO: the bytes go through it to its reader; it stays a FIFO. */
TEST(fifo_written_in_place)
{
    setup();
    const char *fifo = pathf("fifo");
    T_EQ(mkfifo(fifo, 0600), 0);
    char cmd[1024];
    snprintf(cmd, sizeof(cmd), "cat %s > %s/from-fifo", fifo, dir);
    pid_t reader = fork();
    T_TRUE(reader >= 0);
    if (reader == 0) {
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    T_EQ(get_to(fifo), 0);
    T_EQ(wait_exit(reader), 0);
    struct stat st;
    T_EQ(lstat(fifo, &st), 0);
    T_TRUE(S_ISFIFO(st.st_mode));
    check_obj(pathf("from-fifo"));
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

/* A FIFO no reader has open yet: a SIGINT ends the get at once (130). Its
 * open(2) waited for a reader where no signal could end it (the first
 * signal only marked the command cancelled; it took a second). */
TEST(sigint_while_get_waits_for_a_fifo_reader)
{
    setup();
    const char *fifo = pathf("fifo");
    T_EQ(mkfifo(fifo, 0600), 0);
    int rel;
    pid_t pid = start_get("", fifo, &rel);
    release(rel);
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
    struct stat sb;
    T_EQ(lstat(fifo, &sb), 0);
    T_TRUE(S_ISFIFO(sb.st_mode));
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

/* A symbolic link destination is written through (as cp does), and stays a
 * link; a regular destination is replaced whole. */
TEST(symlink_written_through)
{
    setup();
    cli_write_file(pathf("target"), "short", 5);
    T_EQ(symlink(pathf("target"), pathf("link")), 0);
    T_EQ(get_to(pathf("link")), 0);
    struct stat st;
    T_EQ(lstat(pathf("link"), &st), 0);
    T_TRUE(S_ISLNK(st.st_mode));
    check_obj(pathf("target"));
    cli_write_file(pathf("reg"), "short", 5);
    T_EQ(get_to(pathf("reg")), 0);
    check_obj(pathf("reg"));
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

/* As root, `railio get URL /tmp/out` where another user planted /tmp/out ->
 * /etc/passwd wrote the object into /etc/passwd (so do cp and curl -o where
 * fs.protected_symlinks is 0, as here). A link owned by someone else than
 * us and the directory's owner, in a sticky world-writable directory, is
 * refused; our own link there is still written through. */
TEST(planted_symlink_in_sticky_dir_refused)
{
    if (geteuid() != 0)
        T_SKIP("needs root (a link owned by another user)");
    setup();
    T_EQ(mkdir(pathf("sticky"), 01777), 0);
    T_EQ(chmod(pathf("sticky"), 01777), 0);
    cli_write_file(pathf("victim"), "precious", 8);
    T_EQ(symlink(pathf("victim"), pathf("sticky/out")), 0);
    T_EQ(lchown(pathf("sticky/out"), 65534, 65534), 0);
    T_EQ(get_to(pathf("sticky/out")), 4); /* access denied */
    victim_untouched();
    /* With --json, said as a JSON error (it was a line of text only). */
    char out[4096];
    T_EQ(cli_run(out, sizeof(out), "get --json file://%s/store/obj %s", dir, pathf("sticky/out")),
         4);
    T_NOTNULL(strstr(out, "{\"schema\":\"railio/1\",\"type\":\"error\""));
    T_NOTNULL(strstr(out, "\"error\":\"EACCES\""));
    T_NOTNULL(strstr(out, "refusing to write through a symbolic link owned by uid 65534"));
    victim_untouched();
    struct stat st;
    T_EQ(lstat(pathf("sticky/out"), &st), 0);
    T_TRUE(S_ISLNK(st.st_mode));
    /* A link to a directory, planted there, named as the destination
     * directory (with or without '/'), by get and by cp -r: refused, the
     * directory left empty (the object went into it as DIR/obj). */
    T_EQ(mkdir(pathf("vdir"), 0755), 0);
    T_EQ(symlink(pathf("vdir"), pathf("sticky/dir")), 0);
    T_EQ(lchown(pathf("sticky/dir"), 65534, 65534), 0);
    T_EQ(get_to(pathf("sticky/dir")), 4);
    T_EQ(get_to(pathf("sticky/dir/")), 4);
    T_EQ(cli_run(NULL, 0, "cp -r -q file://%s/store %s 2>/dev/null", dir, pathf("sticky/dir")), 4);
    T_EQ(t_dir_count(pathf("vdir"), ""), 0);
    /* Ours: written through. */
    T_EQ(symlink(pathf("victim"), pathf("sticky/mine")), 0);
    T_EQ(get_to(pathf("sticky/mine")), 0);
    check_obj(pathf("victim"));
    T_EQ(t_dir_count(dir, "railio-tmp"), 0);
}

/* A get over an existing file keeps its permission bits (and, as root,
 * its owner): a private file stayed 0600 under cp(1) and curl but became
 * 0644 (and root's) under `railio get`, whose temporary file replaces it.
 * Both ways: the resumable one (an object with checksums) and the unnamed
 * temporary file (a plain file in the store has none). */
TEST(replaced_file_keeps_mode_and_owner)
{
    setup();
    char cmd[8192];
    snprintf(cmd, sizeof(cmd), "cp %s/in.bin %s/store/plain", dir, dir);
    T_EQ(system(cmd), 0);
    static const char *const keys[] = {"obj", "plain"};
    for (int i = 0; i < 2; i++) {
        const char *out = pathf("private-%d", i);
        cli_write_file(out, "secret", 6);
        T_EQ(chmod(out, 0640), 0);
        bool root = geteuid() == 0;
        if (root)
            T_EQ(chown(out, 4321, 4322), 0);
        /* A second name of the old file: replaced, never written in place. */
        const char *old = pathf("old-%d", i);
        T_EQ(link(out, old), 0);
        snprintf(cmd, sizeof(cmd), "%s get -q file://%s/store/%s %s", cli_bin(), dir, keys[i], out);
        T_EQ(system(cmd), 0);
        check_obj(out);
        char kept[16] = {0};
        FILE *f = fopen(old, "rb");
        T_NOTNULL(f);
        T_EQ(fread(kept, 1, sizeof(kept), f), 6u);
        fclose(f);
        T_STREQ(kept, "secret");
        T_EQ(t_dir_count(dir, "railio-tmp"), 0);
        struct stat sb;
        T_EQ(stat(out, &sb), 0);
        T_EQ(sb.st_mode & 07777, 0640u);
        if (root) {
            T_EQ(sb.st_uid, 4321u);
            T_EQ(sb.st_gid, 4322u);
        }
    }
    /* A new file: the umask's mode, as before. */
    const char *fresh = pathf("fresh");
    snprintf(cmd, sizeof(cmd), "umask 022; %s get -q file://%s/store/obj %s", cli_bin(), dir,
             fresh);
    T_EQ(system(cmd), 0);
    struct stat sb;
    T_EQ(stat(fresh, &sb), 0);
    T_EQ(sb.st_mode & 07777, 0644u);
}

/* file:///PATH?single=1 names the store's one file, PATH, as docs/file.md
 * says (it may not exist yet): put, stat, get and rm through the CLI. The
 * CLI split PATH's last name off as a key and opened the directory as the
 * single file (RIO_EINVAL). */
TEST(single_file_url)
{
    setup();
    char cmd[8192];
    snprintf(cmd, sizeof(cmd),
             "%s put -q 'file://%s/single.img?single=1' %s && "
             "%s stat 'file://%s/single.img?single=1' >/dev/null && "
             "%s get -q 'file://%s/single.img?single=1' %s/back-1 && "
             "cmp -s %s/in.bin %s/single.img && "
             "%s rm -q 'file://%s/single.img?single=1' && test ! -e %s/single.img",
             cli_bin(), dir, pathf("in.bin"), cli_bin(), dir, cli_bin(), dir, dir, dir, dir,
             cli_bin(), dir, dir);
    T_EQ(system(cmd), 0);
    check_obj(pathf("back-1"));
}

/* A FILE whose name is as long as a name may be (250 bytes here) is
 * written, over a missing or an existing file: the temporary names were
 * built from the whole name and went past NAME_MAX. */
TEST(get_into_a_long_file_name)
{
    setup();
    char name[251], cmd[8192];
    memset(name, 'L', 250);
    name[250] = '\0';
    const char *out = pathf("%s", name);
    for (int i = 0; i < 2; i++) {
        snprintf(cmd, sizeof(cmd), "%s get -q file://%s/store/obj %s", cli_bin(), dir, out);
        T_EQ(system(cmd), 0);
        check_obj(out);
    }
    snprintf(cmd, sizeof(cmd), "ls -a %s | grep -c railio-tmp", dir);
    T_NE(system(cmd), 0); /* no temporary file left */
}
