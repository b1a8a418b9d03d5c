/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS file */
/* T_TIMEOUT 60 */
/*
 * file:// resolves every key beneath its root: a symlink in the root (a
 * directory component or the key's own file) that leads outside, absolute or
 * relative, makes PUT, GET and DELETE fail with -EXDEV, and nothing outside
 * the root is read, written or removed. Symlinks that stay inside the root
 * still work. The same with openat2 made to fail with ENOSYS (a seccomp
 * filter), where the transport walks the path component by component.
 */
#include "file_util.h"

#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#ifndef SYS_openat2
#define SYS_openat2 437
#endif

static char root[512], outside[512];

/* DIR/root (the file:// root) and DIR/outside, with outside/secret. */
static const char *setup(void)
{
    fu_mkdir();
    snprintf(root, sizeof(root), "%s/root", fu_dir);
    snprintf(outside, sizeof(outside), "%s/outside", fu_dir);
    T_EQ(mkdir(root, 0755), 0);
    T_EQ(mkdir(outside, 0755), 0);
    fu_write(fu_path("outside/secret"), "secret", 6);
    return fu_url("/root");
}

static void link_in_root(const char *target, const char *name)
{
    char p[1024];
    snprintf(p, sizeof(p), "%s/%s", root, name);
    if (symlink(target, p) != 0)
        T_FAIL("symlink %s -> %s: %s", p, target, strerror(errno));
}

/* outside/ holds exactly secret, still "secret". */
static void outside_untouched(void)
{
    /* One name there, and outside/secret is it. */
    T_EQ(t_dir_count(outside, NULL), 1);
    size_t len;
    uint8_t *b = fu_slurp(fu_path("outside/secret"), &len);
    T_EQ(len, 6u);
    T_MEMEQ(b, "secret", 6);
    free(b);
}

static void escapes_refused(bool openat2)
{
    struct rio_options o;
    struct rio_desc d;
    struct eu e;
    char abs[600];
    uint8_t buf[64] = "data";

    const char *url = setup();
    snprintf(abs, sizeof(abs), "%s", outside);
    link_in_root("../outside", "rel");        /* relative, leaves the root */
    link_in_root(abs, "abs");                 /* absolute */
    link_in_root("../outside/secret", "fin"); /* the key's own file */
    T_EQ(mkdir(fu_path("root/a"), 0755), 0);
    link_in_root("../../outside", "a/deep"); /* nested */
    T_EQ(mkdir(fu_path("root/sub"), 0755), 0);
    link_in_root("sub", "in"); /* stays inside */

    eu_opts(&o);
    eu_open(&e, url, &o);
    const char *keys[] = {"rel/x",      "abs/x",      "a/deep/x",
                          "rel/secret", "abs/secret", "a/deep/secret"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        T_ERR(rio_put(e.c, keys[i], buf, 4, NULL, NULL), -EXDEV);
        T_ERR(rio_stat(e.c, keys[i], &d), -EXDEV);
        T_ERR((int)rio_get(e.c, keys[i], buf, sizeof(buf), NULL), -EXDEV);
        T_ERR(rio_delete(e.c, keys[i]), -EXDEV);
        /* The same, one level deeper. */
        char k2[64];
        snprintf(k2, sizeof(k2), "%s/y/z", keys[i]);
        T_ERR(rio_put(e.c, k2, buf, 4, NULL, NULL), -EXDEV);
    }
    /* The key's own file a symlink out: not read; a PUT replaces the link
     * itself (a new file in the root); a DELETE removes the link only. */
    T_ERR((int)rio_get(e.c, "fin", buf, sizeof(buf), NULL), -EXDEV);
    link_in_root("../outside/secret", "fin2");
    T_OK(rio_delete(e.c, "fin2"));
    struct stat st;
    T_EQ(lstat(fu_path("root/fin2"), &st), -1);
    T_OK(rio_put(e.c, "fin", "mine", 4, NULL, NULL));
    T_EQ(lstat(fu_path("root/fin"), &st), 0);
    T_TRUE(S_ISREG(st.st_mode));
    T_ERR(rio_put(e.c, "../outside/x", buf, 4, NULL, NULL), RIO_EINVAL);
    T_ERR(rio_put(e.c, "sub/../../outside/x", buf, 4, NULL, NULL), RIO_EINVAL);
    outside_untouched();

    /* A symlinked directory that stays inside the root: followed where
     * openat2 resolves beneath the root, refused by the O_NOFOLLOW walk. */
    if (openat2) {
        T_OK(rio_put(e.c, "in/x", "inside", 6, NULL, NULL));
        T_EQ(rio_get(e.c, "in/x", buf, sizeof(buf), NULL), 6);
        size_t len;
        uint8_t *b = fu_slurp(fu_path("root/sub/x"), &len);
        T_EQ(len, 6u);
        free(b);
        T_OK(rio_delete(e.c, "in/x"));
    } else {
        T_ERR(rio_put(e.c, "in/x", "inside", 6, NULL, NULL), -EXDEV);
    }
    /* A listing walks beneath the root only: no symbolic link is followed
     * or listed (not even one that stays inside), and neither the
     * transport's temporary files nor the CLI's partial downloads are
     * objects. */
    fu_write(fu_path("root/sub/.real.railio-tmp-0123456789abcdef"), "tmp", 3);
    fu_write(fu_path("root/sub/real.railio-tmp.4242"), "part", 4);
    T_OK(rio_put(e.c, "sub/real", "real", 4, NULL, NULL));
    struct rio_list_args la = {0};
    struct rio_list_page lp;
    T_OK(rio_list(e.c, &la, &lp, NULL));
    T_EQ(lp.n, 2u);
    T_STREQ(lp.entries[0].key, "fin");
    T_STREQ(lp.entries[1].key, "sub/real");
    T_EQ(lp.entries[1].size, 4u);
    T_STREQ(lp.next_token, "");
    rio_list_page_cleanup(&lp);
    la.flags = RIO_LIST_DELIM;
    T_OK(rio_list(e.c, &la, &lp, NULL));
    T_EQ(lp.n, 2u);
    T_STREQ(lp.entries[1].key, "sub/");
    rio_list_page_cleanup(&lp);
    const char *ek[] = {"fin", "sub/real", "sub/nope", "nodir/x"};
    uint8_t ex[4];
    unsigned hits;
    T_EQ(rio_exists_batch(e.c, ek, 4, ex, &hits, NULL), 2);
    T_EQ(hits, 2u);
    const char *eout[] = {"fin", "rel/secret"};
    T_ERR(rio_exists_batch(e.c, eout, 2, ex, &hits, NULL), -EXDEV);
    T_OK(rio_delete(e.c, "sub/real"));
    T_EQ(unlink(fu_path("root/sub/.real.railio-tmp-0123456789abcdef")), 0);
    T_EQ(unlink(fu_path("root/sub/real.railio-tmp.4242")), 0);

    /* Only those names are temporary files: a key with ".railio-tmp"
     * elsewhere in it is an object like any other, listed (a listing that
     * hid it lost it from every tree copy), and a key that names a
     * temporary file, which no listing would show, is refused. */
    static const char *const objs[] = {"data.railio-tmp.csv",
                                       "d.railio-tmp-x/k",
                                       ".a.railio-tmp-0123456789abcdeF",
                                       "a.railio-tmp.12x",
                                       ".railio-tmp-0123456789abcdef",
                                       "sub/x.railio-tmp.resumes"};
    static const char *const tmps[] = {
        "x.railio-tmp",    "d.railio-tmp/k",      "sub/.a.railio-tmp-0123456789abcdef",
        "y.railio-tmp.77", "x.railio-tmp.resume", "x.railio-tmp.resume.new"};
    const unsigned nobj = sizeof(objs) / sizeof(objs[0]);
    for (unsigned i = 0; i < nobj; i++)
        T_OK(rio_put(e.c, objs[i], "o", 1, NULL, NULL));
    for (unsigned i = 0; i < sizeof(tmps) / sizeof(tmps[0]); i++) {
        T_ERR(rio_put(e.c, tmps[i], "t", 1, NULL, NULL), RIO_EINVAL);
        T_TRUE(strstr(rio_error_detail(), "temporary") != NULL);
    }
    T_OK(rio_list(e.c, &(struct rio_list_args){0}, &lp, NULL));
    T_EQ(lp.n, nobj + 1); /* and "fin" */
    unsigned seen = 0;
    for (unsigned i = 0; i < lp.n; i++)
        for (unsigned j = 0; j < nobj; j++)
            seen += strcmp(lp.entries[i].key, objs[j]) == 0;
    T_EQ(seen, nobj);
    rio_list_page_cleanup(&lp);
    for (unsigned i = 0; i < nobj; i++)
        T_OK(rio_delete(e.c, objs[i]));

    /* Plain keys and new subdirectories still work. */
    T_OK(rio_put(e.c, "new/dir/obj", "hello", 5, NULL, NULL));
    T_EQ(rio_get(e.c, "new/dir/obj", buf, sizeof(buf), NULL), 5);
    T_MEMEQ(buf, "hello", 5);
    T_OK(rio_delete(e.c, "new/dir/obj"));
    T_EQ(fu_tmp_files(), 0);
    eu_close(&e);
    outside_untouched();
}

TEST(escapes_refused_openat2)
{
    escapes_refused(true);
}

/* openat2 answers ENOSYS (an old kernel): the component walk. */
TEST(escapes_refused_walk)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};

    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0)
        T_SKIP("seccomp filter: %s", strerror(errno));
    T_EQ(syscall(SYS_openat2, AT_FDCWD, ".", NULL, 0), -1);
    T_EQ(errno, ENOSYS);
    escapes_refused(false);
}
