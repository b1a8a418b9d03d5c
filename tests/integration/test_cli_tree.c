/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net;slow */
/* T_TIMEOUT 60 */
/*
 * railio ls, cat, rm (several keys, -r, wildcards) and cp -r through the
 * real binary, against a railiod the test starts (memory tier): a tree of
 * 1000 files copied both ways and prefix to prefix into a file:// store
 * with every byte compared (diff -r), rm -r that leaves siblings alone,
 * and keys of a hostile listing ("..", ".", empty components) refused by
 * cp -r instead of written outside the destination directory (ls of
 * 10,000 keys: test_cli_tree_paged.c).
 */
#include "cli_tree_suite.h"
#include "server_env.h"

static struct srv_env srv;

static void railiod_tb(struct tb *b)
{
    srv_start(&srv, (const char *const[]){"--memory", "512M", NULL});
    memset(b, 0, sizeof(*b));
    snprintf(b->base, sizeof(b->base), "railio://%s", srv.addr[0]);
    snprintf(b->tmp, sizeof(b->tmp), "%s", t_scratch_dir("rio-clitree"));
}

static void railiod_end(void)
{
    T_EQ(srv_stop(&srv), 0);
}

TEST(railiod_ls_one_level_and_wildcards)
{
    struct tb b;
    railiod_tb(&b);
    tb_ls_level(&b);
    railiod_end();
}

TEST(railiod_cat_and_rm_keys)
{
    struct tb b;
    railiod_tb(&b);
    tb_cat(&b);
    railiod_end();
}

TEST(railiod_cp_tree_both_ways_and_to_file)
{
    struct tb b, f;
    railiod_tb(&b);
    tb_file(&f, NULL);
    tb_cp_tree(&b, &f);
    railiod_end();
}

/* Keys a listing may hold that name no path beneath a directory: cp -r
 * refuses each by name, writes nothing outside, and fails; the good key
 * still lands. */
TEST(railiod_cp_refuses_escaping_keys)
{
    struct tb b;
    char u[2048];
    railiod_tb(&b);
    tb_need_list(&b);
    static const char *const bad[] = {
        "ev/../../escape", "ev/a/../../../up", "ev/./dot", "ev//empty", "ev/..", NULL};
    uint8_t x[8] = "payload";
    struct rio_client *c = tb_client(&b);
    unsigned stored = 0;
    for (unsigned i = 0; bad[i]; i++) {
        struct rio_desc d;
        char k[1100];
        if (rio_put(c, tb_key(&b, k, sizeof(k), bad[i]), x, sizeof(x), NULL, &d) == 0) {
            rio_desc_cleanup(&d);
            stored++;
        }
    }
    rio_client_destroy(c);
    if (!stored)
        T_SKIP("railiod refuses every hostile key itself");
    tb_put(&b, "ev/good", x, sizeof(x));
    T_EQ(t_sh("mkdir -p %s/in/dst", b.tmp), 0);
    T_NE(tb_cli(&b, "cp -r '%s' %s/in/dst", tb_url(&b, u, sizeof(u), "ev"), b.tmp), 0);
    T_EQ(t_sh("grep -c 'refused, not a path beneath the destination' %s/err | grep -qx %u", b.tmp,
              stored),
         0);
    T_EQ(t_sh("test $(find %s -type f -not -path '*/in/dst/good' -not -name out -not -name err "
              "-not -name probe "
              "| wc -l) -eq 0",
              b.tmp),
         0);
    T_EQ(t_sh("test $(stat -c %%s %s/in/dst/good) -eq 8", b.tmp), 0);
    railiod_end();
}

/* cp -r never uploads a download's temporary file (.NAME.railio-tmp-<16
 * hex digits>, left by a killed get or cp -r, or an interrupted get's
 * NAME.railio-tmp and NAME.railio-tmp.resume), and a cp -r into a
 * directory removes the stale temporaries of the files it writes there:
 * those older than the run, of exactly those names. */
TEST(railiod_cp_tree_skips_and_sweeps_stale_temporaries)
{
    struct tb b;
    char u[2048];
    railiod_tb(&b);
    T_EQ(t_sh("mkdir -p %s/in/sub && head -c 3000 /dev/urandom > %s/in/a && printf bb > "
              "%s/in/sub/b && printf junk > %s/in/.a.railio-tmp-0123456789abcdef && "
              "printf junk > %s/in/sub/.b.railio-tmp-00000000000000ff && "
              "printf mine > %s/in/.a.railio-tmp-0123",
              b.tmp, b.tmp, b.tmp, b.tmp, b.tmp, b.tmp),
         0);
    /* An interrupted get's pair (its kept bytes and its record, and a
     * record being replaced), and a NAME.railio-tmp without a record: a
     * file of the user's. */
    T_EQ(t_sh("cd %s/in && printf part > g.railio-tmp && printf rec > g.railio-tmp.resume && "
              "printf new > sub/h.railio-tmp.resume.new && printf mine > u.railio-tmp",
              b.tmp),
         0);
    T_EQ(tb_cli(&b, "cp -r %s/in '%s'", b.tmp, tb_url(&b, u, sizeof(u), "up")), 0);
    T_TRUE(tb_exists(&b, "up/a"));
    T_TRUE(tb_exists(&b, "up/sub/b"));
    T_TRUE(tb_exists(&b, "up/.a.railio-tmp-0123")); /* not the pattern: a file of the user's */
    T_FALSE(tb_exists(&b, "up/.a.railio-tmp-0123456789abcdef"));
    T_FALSE(tb_exists(&b, "up/sub/.b.railio-tmp-00000000000000ff"));
    T_FALSE(tb_exists(&b, "up/g.railio-tmp"));
    T_FALSE(tb_exists(&b, "up/g.railio-tmp.resume"));
    T_FALSE(tb_exists(&b, "up/sub/h.railio-tmp.resume.new"));
    T_TRUE(tb_exists(&b, "up/u.railio-tmp"));
    T_EQ(t_sh("grep -q '5 temporary files of interrupted downloads' %s/err", b.tmp), 0);

    /* Stale: .a's and sub/.b's (an hour old) go; .c's (c is not written)
     * and a newer .a one (another run's, still writing) stay. */
    T_EQ(t_sh("mkdir -p %s/dl/sub && cd %s/dl && printf s > .a.railio-tmp-deadbeefdeadbeef && "
              "printf s > sub/.b.railio-tmp-deadbeefdeadbeef && "
              "printf s > .c.railio-tmp-deadbeefdeadbeef && "
              "printf s > .a.railio-tmp-1111111111111111 && "
              "touch -d '1 hour ago' .a.railio-tmp-deadbeefdeadbeef "
              "sub/.b.railio-tmp-deadbeefdeadbeef .c.railio-tmp-deadbeefdeadbeef && "
              "touch -d '1 hour' .a.railio-tmp-1111111111111111",
              b.tmp, b.tmp),
         0);
    T_EQ(tb_cli(&b, "cp -r '%s' %s/dl", tb_url(&b, u, sizeof(u), "up"), b.tmp), 0);
    T_EQ(t_sh("cd %s/dl && cmp a ../in/a && cmp sub/b ../in/sub/b && "
              "test ! -e .a.railio-tmp-deadbeefdeadbeef && "
              "test ! -e sub/.b.railio-tmp-deadbeefdeadbeef && "
              "test -e .c.railio-tmp-deadbeefdeadbeef && test -e .a.railio-tmp-1111111111111111",
              b.tmp),
         0);
    railiod_end();
}

/* A key holding '?': the single-object verbs take '?' into the key unless
 * NAME= follows it (docs/cli.md), as the listing verbs do; put refused
 * "a?b" as "unknown URL option 'b'". rm's '?' is a wildcard: "[?]" names
 * the key alone. A '?' followed by NAME= starts the options. */
TEST(railiod_key_with_a_question_mark)
{
    struct tb b;
    char u[2048];
    railiod_tb(&b);
    T_EQ(t_sh("printf hello > %s/f", b.tmp), 0);
    T_EQ(tb_cli(&b, "put -q '%s' %s/f", tb_url(&b, u, sizeof(u), "q/a?b"), b.tmp), 0);
    T_EQ(tb_cli(&b, "put -q '%s' %s/f", tb_url(&b, u, sizeof(u), "q/axb"), b.tmp), 0);
    T_TRUE(tb_exists(&b, "q/a?b"));
    T_EQ(tb_cli(&b, "stat --json '%s?paths=2'", tb_url(&b, u, sizeof(u), "q/a?b")), 0);
    T_EQ(t_sh("grep -q '\"key\":\"q/a?b\"' %s/out", b.tmp), 0);
    T_EQ(tb_cli(&b, "get -q '%s' -", tb_url(&b, u, sizeof(u), "q/a?b")), 0);
    T_EQ(t_sh("test \"$(cat %s/out)\" = hello", b.tmp), 0);
    T_EQ(tb_cli(&b, "rm -q '%s'", tb_url(&b, u, sizeof(u), "q/a[?]b")), 0);
    T_FALSE(tb_exists(&b, "q/a?b"));
    T_TRUE(tb_exists(&b, "q/axb"));
    /* '\?' quotes the wildcard as "[?]" does: the key alone (rm looked
     * for the key "a\?b", backslash kept, and found none). */
    T_EQ(tb_cli(&b, "put -q '%s' %s/f", tb_url(&b, u, sizeof(u), "q/a?b"), b.tmp), 0);
    T_EQ(tb_cli(&b, "rm -q '%s'", tb_url(&b, u, sizeof(u), "q/a\\?b")), 0);
    T_FALSE(tb_exists(&b, "q/a?b"));
    T_TRUE(tb_exists(&b, "q/axb"));
    /* cp's destination is never a pattern: a '?' in it is the key's (cp
     * refused "several objects need -r" for one object, and a prefix
     * with '?' in a tree copy's destination). */
    char u2[2048];
    T_EQ(tb_cli(&b, "cp -q '%s' '%s'", tb_url(&b, u, sizeof(u), "q/axb"),
                tb_url(&b, u2, sizeof(u2), "q/c?d")),
         0);
    T_TRUE(tb_exists(&b, "q/c?d"));
    T_EQ(tb_cli(&b, "cp -q '%s' '%s'", tb_url(&b, u, sizeof(u), "q/ax*"),
                tb_url(&b, u2, sizeof(u2), "r/x?y/")),
         0);
    T_TRUE(tb_exists(&b, "r/x?y/axb"));
    T_EQ(tb_cli(&b, "put -q '%s' %s/f", tb_url(&b, u, sizeof(u), "q/x?b=1"), b.tmp), 2);
    T_EQ(t_sh("grep -q \"unknown URL option 'b'\" %s/err", b.tmp), 0);
    railiod_end();
}

/* A hostile key's escape sequences never reach stderr raw: rm -v's
 * "removed KEY", rm's "KEY: a prefix, not removed" and cp -r -v's "copied
 * KEY" wrote the listed key as it came (an OSC that retitles the
 * terminal, a CSI that repaints it), where every error message and ls on
 * a terminal show a control byte as '?'. */
TEST(railiod_hostile_key_escapes_masked_on_stderr)
{
    struct tb b;
    char u[2048];
    static const uint8_t x[5] = "hello";
    railiod_tb(&b);
    tb_put(&b, "esc/d\033]0;PWNED\007/x", x, sizeof(x));
    tb_put(&b, "esc/k\033[31mRED", x, sizeof(x));
    T_EQ(tb_cli(&b, "cp -r -v '%s' %s/cpd", tb_url(&b, u, sizeof(u), "esc/"), b.tmp), 0);
    T_EQ(t_sh("grep -q 'copied esc/k?\\[31mRED' %s/err", b.tmp), 0);
    T_NE(t_sh("grep -q \"$(printf '\\033')\" %s/err", b.tmp), 0);
    /* One level: the prefix is named and kept, the key removed. */
    T_EQ(tb_cli(&b, "rm -v '%s'", tb_url(&b, u, sizeof(u), "esc/*")), 0);
    T_EQ(t_sh("grep -q 'esc/d?]0;PWNED?/: a prefix, not removed' %s/err", b.tmp), 0);
    T_EQ(t_sh("grep -q 'removed esc/k?\\[31mRED' %s/err", b.tmp), 0);
    T_NE(t_sh("grep -q \"$(printf '\\033')\" %s/err", b.tmp), 0);
    T_NE(t_sh("grep -q \"$(printf '\\007')\" %s/err", b.tmp), 0);
    railiod_end();
}
