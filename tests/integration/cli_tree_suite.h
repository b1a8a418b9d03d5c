/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The listing verbs of the railio binary (ls, cat, rm, cp -r, wildcards)
 * against one backend, shared by tests/integration/test_cli_tree*.c. A
 * backend is a URL base (SCHEME://AUTHORITY[/PATH]) and its options
 * ("?endpoint=..." or ""); every key a test writes lies beneath a prefix of
 * its own. Objects are seeded through the library (rio_batch), checked
 * through the binary and, for trees, byte by byte with diff -r against the
 * local files. A backend whose rio_list is still RIO_ENOTSUP skips (77).
 */
#ifndef RIO_TEST_CLI_TREE_SUITE_H
#define RIO_TEST_CLI_TREE_SUITE_H

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_util.h"
#include "railio.h"

struct tb {
    char base[512]; /* SCHEME://AUTHORITY[/PATH], no trailing '/': the client */
    char kp[128];   /* "" or a key prefix ending in '/' for every key of the test */
    char q[512];    /* "" or "?options" */
    char tmp[256];  /* the test's scratch directory */
    unsigned jobs;  /* cp -r --jobs (0: the binary's default) */
    bool keep_10k;  /* leave the 10,000 keys (a peer whose deletes are slow:
                     * rm -r is proven on the 1000 keys of tb_cp_tree) */
};

/* A file:// store root in tmp/store (tmp: NULL for a fresh scratch dir). */
static inline void tb_file(struct tb *b, const char *tmp)
{
    memset(b, 0, sizeof(*b));
    snprintf(b->tmp, sizeof(b->tmp), "%s", tmp ? tmp : t_scratch_dir("rio-clitree"));
    snprintf(b->base, sizeof(b->base), "file://%s/store", b->tmp);
    T_EQ(t_sh("mkdir -p %s/store", b->tmp), 0);
}

/* base/path + options into out. */
static inline const char *tb_url(const struct tb *b, char *out, size_t cap, const char *path)
{
    if ((size_t)snprintf(out, cap, "%s/%s%s%s", b->base, b->kp, path, b->q) >= cap)
        T_FAIL("URL longer than %zu bytes", cap);
    return out;
}

/* A client on the backend; depth 16 on 4 paths where the backend has
 * them, so that seeding 10,000 small objects keeps many in flight. */
static inline struct rio_client *tb_client(const struct tb *b)
{
    char url[2048];
    struct rio_client *c = NULL;
    struct rio_options o;
    rio_options_init(&o);
    o.depth = 16;
    snprintf(url, sizeof(url), "%s%s", b->base, b->q);
    T_OK(rio_client_new(url, &o, &c));
    return c;
}

/* kp + key. */
static inline const char *tb_key(const struct tb *b, char *out, size_t cap, const char *key)
{
    snprintf(out, cap, "%s%s", b->kp, key);
    return out;
}

/* Whether the backend lists: false when the binary's ls says RIO_ENOTSUP
 * (said on stdout); any other failure of ls fails the test. */
static inline bool tb_can_list(const struct tb *b)
{
    char u[2048];
    snprintf(u, sizeof(u), "%s/%sprobe-none*%s", b->base, b->kp, b->q);
    int rc = t_sh("%s ls -r '%s' >%s/probe 2>&1", cli_bin(), u, b->tmp);
    if (rc && t_sh("grep -q RIO_ENOTSUP %s/probe", b->tmp) == 0) {
        printf("rio_list on %s: RIO_ENOTSUP (listing not on this branch yet)\n", b->base);
        return false;
    }
    T_EQ(t_sh("cat %s/probe >&2", b->tmp), 0);
    T_EQ(rc, 0);
    return true;
}

/* Skip (77) when the backend cannot list yet. */
static inline void tb_need_list(const struct tb *b)
{
    if (!tb_can_list(b))
        T_SKIP("rio_list answers RIO_ENOTSUP on %s", b->base);
}

/* n objects PFX%05u of (i * 37) % 700 bytes, pattern seeded by i, in
 * batches of 500. */
static inline void tb_seed(const struct tb *b, const char *pfx, unsigned n)
{
    struct rio_client *c = tb_client(b);
    enum { B = 500, MAXSZ = 700 };
    struct rio_op *ops = calloc(B, sizeof(*ops));
    char(*keys)[300] = calloc(B, 300);
    uint8_t *buf = malloc((size_t)B * MAXSZ);
    T_NOTNULL(ops);
    T_NOTNULL(keys);
    T_NOTNULL(buf);
    for (unsigned s = 0; s < n; s += B) {
        unsigned m = n - s < B ? n - s : B;
        for (unsigned j = 0; j < m; j++) {
            unsigned i = s + j;
            snprintf(keys[j], 300, "%s%s%05u", b->kp, pfx, i);
            memset(&ops[j], 0, sizeof(ops[j]));
            ops[j].type = RIO_OP_PUT;
            ops[j].key = keys[j];
            ops[j].buf = buf + (size_t)j * MAXSZ;
            ops[j].len = (i * 37u) % MAXSZ;
            t_fill_pattern(ops[j].buf, ops[j].len, i);
        }
        T_EQ(rio_batch(c, ops, m, NULL), (int)m);
    }
    free(buf);
    free(keys);
    free(ops);
    rio_client_destroy(c);
}

static inline void tb_put(const struct tb *b, const char *key, const void *p, size_t n)
{
    struct rio_client *c = tb_client(b);
    struct rio_desc d;
    char k[1100];
    T_OK(rio_put(c, tb_key(b, k, sizeof(k), key), p, n, NULL, &d));
    rio_desc_cleanup(&d);
    rio_client_destroy(c);
}

static inline int tb_exists(const struct tb *b, const char *key)
{
    struct rio_client *c = tb_client(b);
    struct rio_desc d;
    char k[1100];
    int ret = rio_stat(c, tb_key(b, k, sizeof(k), key), &d);
    if (ret == 0)
        rio_desc_cleanup(&d);
    rio_client_destroy(c);
    T_TRUE(ret == 0 || ret == RIO_ENOTFOUND);
    return ret == 0;
}

/* Lines of a file (0 when it is empty). */
static inline unsigned tb_lines(const char *path)
{
    size_t n;
    uint8_t *p = t_slurp(path, &n);
    unsigned c = 0;
    for (size_t i = 0; i < n; i++)
        c += p[i] == '\n';
    free(p);
    return c;
}

/* Whether a line of file path ends with "/rel" or " rel" (the key column). */
static inline int tb_has_key(const char *path, const char *rel)
{
    size_t n, rl = strlen(rel);
    char *p = (char *)t_slurp(path, &n);
    p[n] = '\0';
    int found = 0;
    for (char *line = p, *e; !found && (e = strchr(line, '\n')); line = e + 1) {
        size_t ll = (size_t)(e - line);
        if (ll >= rl + 1 && !memcmp(e - rl, rel, rl) && (e[-rl - 1] == '/' || e[-rl - 1] == ' '))
            found = 1;
    }
    free(p);
    return found;
}

/* `railio ARGS` with stdout to b->tmp/out and stderr to b->tmp/err; the
 * exit status. */
__attribute__((format(printf, 2, 3))) static inline int tb_cli(const struct tb *b, const char *fmt,
                                                               ...)
{
    char args[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(args, sizeof(args), fmt, ap);
    va_end(ap);
    int rc = t_sh("%s %s >%s/out 2>%s/err", cli_bin(), args, b->tmp, b->tmp);
    char err[512];
    snprintf(err, sizeof(err), "%s/err", b->tmp);
    t_sh("cat %s >&2", err); /* into the test's log */
    return rc;
}

static inline const char *tb_out(const struct tb *b, char *out, size_t cap)
{
    snprintf(out, cap, "%s/out", b->tmp);
    return out;
}

/* ls of 10,000 keys through pages of 1000: every key once, paged. */
static inline void tb_ls_10000(const struct tb *b)
{
    char u[2048], o[2048], e[300];
    tb_need_list(b);
    uint64_t t0 = t_now_ms();
    tb_seed(b, "ls10k/k", 10000);
    uint64_t t1 = t_now_ms();
    T_EQ(tb_cli(b, "ls -r -v --page-size 1000 '%s'", tb_url(b, u, sizeof(u), "ls10k/")), 0);
    fprintf(stderr, "%s: 10000 keys seeded in %llu ms, listed by the binary in %llu ms\n", b->base,
            (unsigned long long)(t1 - t0), (unsigned long long)(t_now_ms() - t1));
    T_EQ(tb_lines(tb_out(b, o, sizeof(o))), 10000u);
    T_TRUE(tb_has_key(o, "k00000"));
    T_TRUE(tb_has_key(o, "k09999"));
    snprintf(e, sizeof(e), "%s/err", b->tmp);
    /* The binary says how many pages it fetched: at least ten of 1000. */
    T_EQ(t_sh("grep -Eq 'ls: 10000 entries in (1[0-9]|[2-9][0-9]|[0-9]{3,}) pages' %s", e), 0);
    /* In byte order of key on every backend (rados:// lists in the pool's
     * order unless asked); --unsorted: the backend's own, every key once. */
    T_EQ(t_sh("awk '{print $NF}' %s | LC_ALL=C sort -c", o), 0);
    T_EQ(tb_cli(b, "ls -r --unsorted '%s'", tb_url(b, u, sizeof(u), "ls10k/")), 0);
    T_EQ(t_sh("awk '{print $NF}' %s | LC_ALL=C sort -u | wc -l | grep -qx 10000", o), 0);
    /* --json: one object per line, the same count. */
    T_EQ(tb_cli(b, "ls -r --json --page-size 999 '%s'", tb_url(b, u, sizeof(u), "ls10k/")), 0);
    T_EQ(tb_lines(o), 10000u);
    T_EQ(t_sh("grep -c "
              "'^{\"schema\":\"railio/"
              "1\",\"type\":\"object\",\"key\":\".*k0[0-9]*\",\"size\":[0-9]*' %s "
              "| grep -qx 10000",
              o),
         0);
    /* A wildcard: k0000? is ten keys, one level. */
    T_EQ(tb_cli(b, "ls '%s'", tb_url(b, u, sizeof(u), "ls10k/k0000?")), 0);
    T_EQ(tb_lines(o), 10u);
    if (b->keep_10k)
        return;
    t1 = t_now_ms();
    T_EQ(tb_cli(b, "rm -r -q --jobs 32 --page-size 1000 '%s'", tb_url(b, u, sizeof(u), "ls10k")),
         0);
    fprintf(stderr, "%s: 10000 keys removed by rm -r in %llu ms\n", b->base,
            (unsigned long long)(t_now_ms() - t1));
    T_FALSE(tb_exists(b, "ls10k/k00000"));
    T_FALSE(tb_exists(b, "ls10k/k09999"));
}

/* One level: objects, and common prefixes shown as DIR/. */
static inline void tb_ls_level(const struct tb *b)
{
    char u[2048], o[2048];
    tb_need_list(b);
    uint8_t x[100];
    t_fill_pattern(x, sizeof(x), 1);
    tb_put(b, "lv/a", x, 10);
    tb_put(b, "lv/b.bin", x, 100);
    tb_put(b, "lv/sub/c", x, 1);
    tb_put(b, "lv/sub/deeper/d", x, 2);
    tb_put(b, "lv/sub2/e.bin", x, 3);
    tb_put(b, "lvx", x, 4); /* a sibling the prefix "lv/" does not hold */
    T_EQ(tb_cli(b, "ls '%s'", tb_url(b, u, sizeof(u), "lv/")), 0);
    tb_out(b, o, sizeof(o));
    T_EQ(tb_lines(o), 4u);
    T_TRUE(tb_has_key(o, "a"));
    T_TRUE(tb_has_key(o, "b.bin"));
    T_TRUE(tb_has_key(o, "sub/"));
    T_TRUE(tb_has_key(o, "sub2/"));
    T_EQ(t_sh("grep -c ' DIR ' %s | grep -qx 2", o), 0);
    T_EQ(t_sh("grep -Eq '^ +100  [0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}  .*b\\.bin$' %s", o), 0);
    T_EQ(tb_cli(b, "ls -r '%s'", tb_url(b, u, sizeof(u), "lv/")), 0);
    T_EQ(tb_lines(o), 5u);
    T_TRUE(tb_has_key(o, "sub/deeper/d"));
    /* Wildcards match one element: *.bin one level, sub* prefixes. */
    T_EQ(tb_cli(b, "ls '%s'", tb_url(b, u, sizeof(u), "lv/*.bin")), 0);
    T_EQ(tb_lines(o), 1u);
    T_EQ(tb_cli(b, "ls '%s'", tb_url(b, u, sizeof(u), "lv/s[u]b*")), 0);
    T_EQ(tb_lines(o), 2u);
    T_EQ(tb_cli(b, "ls -r '%s'", tb_url(b, u, sizeof(u), "lv/sub?")), 0);
    T_EQ(tb_lines(o), 1u);
    T_TRUE(tb_has_key(o, "sub2/e.bin"));
    T_EQ(tb_cli(b, "ls -r '%s'", tb_url(b, u, sizeof(u), "lv/nothing*")), 0);
    T_EQ(tb_lines(o), 0u);
    /* On a terminal a key's control bytes show as '?' (a hostile key's
     * escape sequence cannot repaint it); piped, ls keeps every byte. */
    tb_put(b, "lv/e\033]0;x\007", x, 5);
    if (t_sh("command -v script >/dev/null") == 0) {
        T_EQ(t_sh("script -qec \"%s ls '%s'\" /dev/null >%s/tty", cli_bin(),
                  tb_url(b, u, sizeof(u), "lv/"), b->tmp),
             0);
        T_EQ(t_sh("grep -q 'e?]0;x?' %s/tty", b->tmp), 0);
        T_NE(t_sh("grep -q \"$(printf '\\033')\" %s/tty", b->tmp), 0);
    }
    /* A failed write to stdout fails ls: exit 9. */
    T_EQ(t_sh("%s ls -r '%s' >/dev/full 2>/dev/null", cli_bin(), tb_url(b, u, sizeof(u), "lv/")),
         9);
    T_EQ(tb_cli(b, "rm -r -q '%s' '%s'", tb_url(b, u, sizeof(u), "lv"),
                tb_url(b, o, sizeof(o), "lvx")),
         0);
    T_FALSE(tb_exists(b, "lvx"));
    T_FALSE(tb_exists(b, "lv/sub/deeper/d"));
}

/* cat: several keys in order, a wildcard, a missing key, stdout errors. */
static inline void tb_cat(const struct tb *b)
{
    char u[2048], u2[2048], o[2048];
    const size_t n1 = 3 * 1024 * 1024 + 5, n2 = 777;
    uint8_t *p = malloc(n1 + n2);
    T_NOTNULL(p);
    t_fill_pattern(p, n1, 5);
    t_fill_pattern(p + n1, n2, 6);
    tb_put(b, "cat/one", p, n1);
    tb_put(b, "cat/two", p + n1, n2);
    T_EQ(tb_cli(b, "cat '%s' '%s'", tb_url(b, u, sizeof(u), "cat/one"),
                tb_url(b, u2, sizeof(u2), "cat/two")),
         0);
    size_t m;
    uint8_t *got = t_slurp(tb_out(b, o, sizeof(o)), &m);
    T_EQ(m, n1 + n2);
    T_MEMEQ(got, p, n1 + n2);
    free(got);
    T_EQ(t_sh("%s cat '%s' >/dev/full 2>/dev/null", cli_bin(), tb_url(b, u, sizeof(u), "cat/one")),
         9);
    T_EQ(tb_cli(b, "cat '%s'", tb_url(b, u, sizeof(u), "cat/missing")), 3); /* not found */
    T_EQ(t_sh("grep -q 'cat/missing\\|missing' %s/err", b->tmp), 0);
    tb_need_list(b);
    T_EQ(tb_cli(b, "cat '%s'", tb_url(b, u, sizeof(u), "cat/t*")), 0);
    got = t_slurp(o, &m);
    T_EQ(m, n2);
    T_MEMEQ(got, p + n1, n2);
    free(got);
    /* A wildcard that matches nothing is "not found" (3) for the verbs that
     * act on what matched, as a missing key is; ls of it is only empty. */
    T_EQ(tb_cli(b, "cat '%s'", tb_url(b, u, sizeof(u), "cat/nothing*")), 3);
    T_EQ(tb_cli(b, "rm '%s'", tb_url(b, u, sizeof(u), "cat/nothing*")), 3);
    T_EQ(t_sh("grep -q 'nothing' %s/err", b->tmp), 0);
    T_EQ(tb_cli(b, "cp '%s' %s/", tb_url(b, u, sizeof(u), "cat/nothing*"), b->tmp), 3);
    T_TRUE(tb_exists(b, "cat/two"));
    /* rm of several keys: one missing is named, counted, and fails the exit
     * status (3: not found); the others are gone. */
    T_EQ(tb_cli(b, "rm '%s' '%s' '%s'", tb_url(b, u, sizeof(u), "cat/one"),
                tb_url(b, u2, sizeof(u2), "cat/missing"), tb_url(b, o, sizeof(o), "cat/two")),
         3);
    T_EQ(t_sh("grep -q 'rm: 2 removed, 1 failed' %s/err", b->tmp), 0);
    T_FALSE(tb_exists(b, "cat/one"));
    T_FALSE(tb_exists(b, "cat/two"));
    free(p);
    /* Links (to a file, dangling) and a FIFO beneath a directory are not
     * copied, and are counted as skipped rather than left out unsaid. */
    T_EQ(t_sh("mkdir -p %s/sp && echo a >%s/sp/a && ln -sf a %s/sp/l && "
              "ln -sf /nowhere %s/sp/dl && rm -f %s/sp/p && mkfifo %s/sp/p",
              b->tmp, b->tmp, b->tmp, b->tmp, b->tmp, b->tmp),
         0);
    T_EQ(tb_cli(b, "cp -r %s/sp '%s'", b->tmp, tb_url(b, u, sizeof(u), "sp")), 0);
    T_EQ(t_sh("grep -q 'cp: 3 entries that are not regular files' %s/err", b->tmp), 0);
    T_TRUE(tb_exists(b, "sp/a"));
    T_FALSE(tb_exists(b, "sp/l"));
    T_EQ(tb_cli(b, "rm -r -q '%s'", tb_url(b, u, sizeof(u), "sp")), 0);
}

/* A local tree of 1000 files (100 directories, some nesting, sizes 0 to
 * about 64 KiB, three of 5 MiB) under dir. */
static inline void tb_make_tree(const char *dir)
{
    char path[600];
    uint8_t *buf = malloc(5 * 1024 * 1024 + 2); /* the largest file: 5 MiB + 2 */
    T_NOTNULL(buf);
    for (unsigned i = 0; i < 1000; i++) {
        unsigned d = i % 100;
        snprintf(path, sizeof(path), "%s/d%02u/", dir, d);
        T_TRUE(mkdir(dir, 0755) == 0 || errno == EEXIST);
        T_TRUE(mkdir(path, 0755) == 0 || errno == EEXIST);
        if (d % 10 == 0) {
            strcat(path, "n/");
            T_TRUE(mkdir(path, 0755) == 0 || errno == EEXIST);
        }
        size_t n = i < 3 ? 5 * 1024 * 1024 + i : (size_t)(i * 1031u) % 65536;
        snprintf(path + strlen(path), sizeof(path) - strlen(path), "f%04u.bin", i);
        t_fill_pattern(buf, n, 1000 + i);
        t_write_file(path, buf, n);
    }
    free(buf);
}

/* cp -r: directory -> prefix -> directory, prefix -> prefix (on dst: this
 * backend again, or another one), every byte compared; rm -r cleans up. */
static inline void tb_cp_tree(const struct tb *b, const struct tb *other)
{
    char u[2048], u2[2048], src[300], back[300], back2[300];
    tb_need_list(b);
    if (other && !tb_can_list(other))
        other = NULL; /* prefix to prefix on this backend, then */
    snprintf(src, sizeof(src), "%s/src", b->tmp);
    snprintf(back, sizeof(back), "%s/back", b->tmp);
    snprintf(back2, sizeof(back2), "%s/back2", b->tmp);
    tb_make_tree(src);
    char jobs[32] = "";
    if (b->jobs)
        snprintf(jobs, sizeof(jobs), "--jobs %u", b->jobs);
    T_EQ(tb_cli(b, "cp -r %s %s '%s'", jobs, src, tb_url(b, u, sizeof(u), "tree")), 0);
    T_EQ(t_sh("grep -q '^cp: 1000 objects, .* 0 failed' %s/err", b->tmp), 0);
    T_EQ(tb_cli(b, "cp -r %s '%s' %s", jobs, tb_url(b, u, sizeof(u), "tree"), back), 0);
    T_EQ(t_sh("grep -q '^cp: 1000 objects, .* 0 failed' %s/err", b->tmp), 0);
    T_EQ(t_sh("diff -r %s %s >&2", src, back), 0);
    T_EQ(t_sh("test $(find %s -type f | wc -l) -eq 1000", back), 0);
    /* prefix -> prefix, then back to a directory */
    const struct tb *d = other ? other : b;
    T_EQ(tb_cli(b, "cp -r %s '%s' '%s'", jobs, tb_url(b, u, sizeof(u), "tree/"),
                tb_url(d, u2, sizeof(u2), "tree2")),
         0);
    T_EQ(t_sh("grep -q '^cp: 1000 objects, .* 0 failed' %s/err", b->tmp), 0);
    T_EQ(tb_cli(b, "cp -r %s '%s' %s", jobs, tb_url(d, u2, sizeof(u2), "tree2"), back2), 0);
    T_EQ(t_sh("diff -r %s %s >&2", src, back2), 0);
    /* A wildcard source takes only what matches, below the pattern's dir. */
    T_EQ(tb_cli(b, "cp -r '%s' %s/w", tb_url(b, u, sizeof(u), "tree/d1?"), b->tmp), 0);
    T_EQ(t_sh("test $(find %s/w -type f | wc -l) -eq 100 && diff -r %s/d15 %s/w/d15 >&2", b->tmp,
              src, b->tmp),
         0);
    /* rm -r removes the tree and nothing beside it. */
    uint8_t one = 1;
    tb_put(b, "tree-sibling", &one, 1);
    T_EQ(tb_cli(b, "rm -r %s '%s'", jobs, tb_url(b, u, sizeof(u), "tree")), 0);
    T_EQ(t_sh("grep -q '^rm: 1000 removed, 0 failed' %s/err", b->tmp), 0);
    T_FALSE(tb_exists(b, "tree/d00/n/f0000.bin"));
    T_FALSE(tb_exists(b, "tree/d99/f0999.bin"));
    T_TRUE(tb_exists(b, "tree-sibling"));
    T_EQ(tb_cli(b, "rm -r -q '%s' '%s'", tb_url(b, u, sizeof(u), "tree-sibling"),
                tb_url(d, u2, sizeof(u2), "tree2")),
         0);
    T_FALSE(tb_exists(b, "tree-sibling"));
}

#endif
