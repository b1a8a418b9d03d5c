/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * railiod --s3-keys FILE (src/server/s3/keys.c): users with their buckets,
 * comments and blank lines, the anonymous line; every malformed line refused
 * with its line number and never its text (a secret may be on it); bounds
 * on line length and user count; and the file itself: refused when group or
 * others may read or write it, or when it is not a regular file, with a
 * message that names it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "t.h"
#include "tlib.h"

static int parse(const char *text, unsigned *line, const char **why)
{
    struct rio_s3_keys *k = NULL;
    int ret = rio__s3_keys_parse(text, strlen(text), &k, line, why);

    rio_s3_keys_free(k);
    return ret;
}

TEST(users_and_buckets)
{
    static const char text[] = "# railiod users\n"
                               "\n"
                               "alice   alice-secret\r\n"
                               "\tbob bob/secret+1 logs,backups  \n"
                               "carol c *\n"
                               "   # indented comment\n"
                               "dave d-secret data";
    struct rio_s3_keys *k = NULL;
    unsigned line;
    const char *why;

    T_EQ(rio__s3_keys_parse(text, strlen(text), &k, &line, &why), 0);
    T_STREQ(rio__s3_keys_secret(k, "alice"), "alice-secret");
    T_STREQ(rio__s3_keys_secret(k, "bob"), "bob/secret+1");
    T_STREQ(rio__s3_keys_secret(k, "dave"), "d-secret");
    T_NULL(rio__s3_keys_secret(k, "eve"));
    T_NULL(rio__s3_keys_secret(k, ""));
    T_NULL(rio__s3_keys_secret(k, "#"));
    T_TRUE(rio_s3_user_may(k, "alice", "anything")); /* no list: every bucket */
    T_TRUE(rio_s3_user_may(k, "bob", "logs"));
    T_TRUE(rio_s3_user_may(k, "bob", "backups"));
    T_FALSE(rio_s3_user_may(k, "bob", "log"));
    T_FALSE(rio_s3_user_may(k, "bob", "data"));
    T_TRUE(rio_s3_user_may(k, "carol", "x"));
    T_TRUE(rio_s3_user_may(k, "dave", "data"));
    T_FALSE(rio_s3_user_may(k, "dave", "logs"));
    T_FALSE(rio_s3_user_may(k, "eve", "logs"));
    T_EQ(rio__s3_keys_anon(k), 0);
    T_FALSE(rio_s3_user_may(k, "", "logs"));
    rio_s3_keys_free(k);

    T_EQ(rio__s3_keys_parse("* - pub\n", 8, &k, &line, &why), 0);
    T_EQ(rio__s3_keys_anon(k), 1);
    T_TRUE(rio_s3_user_may(k, "", "pub"));
    T_FALSE(rio_s3_user_may(k, "", "priv"));
    rio_s3_keys_free(k);
}

TEST(malformed_lines_named_by_number)
{
    static const struct {
        const char *text;
        unsigned line;
    } bad[] = {
        {"alice\n", 1},
        {"# c\nalice s b extra\n", 2},
        {"a s\nb s bucket,\n", 2},
        {"a s\nb s ,bucket\n", 2},
        {"a s\nb s bu/cket\n", 2},
        {"a s\n\nb s\xc3\xa9\n", 3},
        {"* - pub\n* - www\n", 2},
        {"* -\n", 1},
        {"", 0},
        {"# only a comment\n", 0},
        {"a s\na t\n", 0}, /* the same key twice */
    };
    unsigned line;
    const char *why;

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        T_EQ(parse(bad[i].text, &line, &why), RIO_EINVAL);
        T_EQ(line, bad[i].line);
        T_NOTNULL(why);
    }
}

TEST(bounds)
{
    size_t cap = 10002 * 16, o = 0;
    char *text = malloc(cap), big[5000];
    unsigned line;
    const char *why;

    T_NOTNULL(text);
    /* A 4097-byte line. */
    memset(big, 'k', sizeof(big));
    big[2000] = ' ';
    big[4097] = '\0';
    T_EQ(parse(big, &line, &why), RIO_EINVAL);
    T_EQ(line, 1);
    T_TRUE(strstr(why, "4096"));
    /* An access key of 128 bytes, a secret of 257. */
    memset(big, 'k', 128);
    memcpy(big + 128, " s\n", 4);
    T_EQ(parse(big, &line, &why), RIO_EINVAL);
    memset(big, 's', 260);
    big[0] = 'k';
    big[1] = ' ';
    big[259] = '\0';
    T_EQ(parse(big, &line, &why), RIO_EINVAL);
    big[258] = '\0';
    T_EQ(parse(big, &line, &why), 0);
    /* 10000 users are fine, 10001 are not. */
    for (int i = 0; i < 10001; i++)
        o += (size_t)snprintf(text + o, cap - o, "user%d s%d\n", i, i);
    T_EQ(parse(text, &line, &why), RIO_EINVAL);
    T_EQ(line, 10001);
    *strstr(text, "user10000 ") = '\0';
    T_EQ(parse(text, &line, &why), 0);
    free(text);
}

TEST(file_must_be_private)
{
    char dir[256], path[300];
    struct rio_s3_keys *k = NULL;
    static const char text[] = "alice topsecret-value logs\n";

    t_mkdtemp(dir, sizeof(dir), "s3keys");
    snprintf(path, sizeof(path), "%s/keys", dir);
    t_write_file(path, text, strlen(text));

    T_EQ(chmod(path, 0644), 0);
    T_EQ(rio_s3_keys_load(path, &k), -EACCES);
    T_NULL(k);
    T_TRUE(strstr(rio_error_detail(), path));
    T_TRUE(strstr(rio_error_detail(), "chmod 600"));
    T_EQ(chmod(path, 0640), 0);
    T_EQ(rio_s3_keys_load(path, &k), -EACCES);
    T_EQ(chmod(path, 0602), 0);
    T_EQ(rio_s3_keys_load(path, &k), -EACCES);

    T_EQ(chmod(path, 0600), 0);
    T_EQ(rio_s3_keys_load(path, &k), 0);
    T_STREQ(rio__s3_keys_secret(k, "alice"), "topsecret-value");
    rio_s3_keys_free(k);
    k = NULL;
    T_EQ(chmod(path, 0400), 0);
    T_EQ(rio_s3_keys_load(path, &k), 0);
    rio_s3_keys_free(k);
    k = NULL;

    /* A bad line: the message names the file and the line, not its text. */
    T_EQ(chmod(path, 0600), 0);
    t_write_file(path, "# users\nalice topsecret-value logs extra\n", 41);
    T_EQ(rio_s3_keys_load(path, &k), RIO_EINVAL);
    T_TRUE(strstr(rio_error_detail(), path));
    T_TRUE(strstr(rio_error_detail(), "line 2"));
    T_NULL(strstr(rio_error_detail(), "topsecret"));

    /* Not a regular file; missing. */
    T_EQ(rio_s3_keys_load(dir, &k), RIO_EINVAL);
    T_TRUE(strstr(rio_error_detail(), "regular"));
    snprintf(path, sizeof(path), "%s/nope", dir);
    T_EQ(rio_s3_keys_load(path, &k), -ENOENT);
    T_TRUE(strstr(rio_error_detail(), path));
    t_rm_tree(dir);
}
