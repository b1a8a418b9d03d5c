/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Unknown URL options and bad RIO_* variables are errors that name them
 * (issue 17 item 8): "?path=4" fails rio_client_new with RIO_EINVAL and
 * rio_error_detail() "unknown URL option 'path' (did you mean 'paths'?)";
 * RIO_DEPTH=-1 is named with its value; a typo of a variable is named on
 * stderr, not refused; and every option a backend's docs page lists is one
 * its table declares.
 */
#include <ctype.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/url.h"
#include "engine_util.h"
#include "tlib.h"
#include "transport/transport.h"

/* Run fn with stderr going to a file; what it wrote, into out. */
static int with_stderr(char *out, size_t cap, int (*fn)(void *), void *arg)
{
    char path[] = "/tmp/rio-urlopt-XXXXXX";
    int fd = mkstemp(path);
    T_TRUE(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    T_TRUE(saved >= 0);
    T_EQ(dup2(fd, 2), 2);
    int ret = fn(arg);
    fflush(stderr);
    T_EQ(dup2(saved, 2), 2);
    close(saved);
    ssize_t n = pread(fd, out, cap - 1, 0);
    out[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    return ret;
}

static int open_url(void *arg)
{
    struct rio_client *c = NULL;
    int ret = rio_client_new(arg, NULL, &c);
    rio_client_destroy(c);
    return ret;
}

TEST(unknown_option_named_with_closest)
{
    char err[1024];

    T_ERR(with_stderr(err, sizeof(err), open_url, "mock://u?path=4"), RIO_EINVAL);
    T_STREQ(rio_error_detail(), "unknown URL option 'path' (did you mean 'paths'?)");
    /* Said once, by the caller (the CLI, an exception): the library
     * wrote it to stderr as well. */
    T_NULL(strstr(err, "unknown URL option"));
    /* A transport's own option, misspelt. */
    T_ERR(with_stderr(err, sizeof(err), open_url, "mock://u?rat=1G"), RIO_EINVAL);
    T_STREQ(rio_error_detail(), "unknown URL option 'rat' (did you mean 'rate'?)");
    T_ERR(with_stderr(err, sizeof(err), open_url, "mock://u?op_timout=1s"), RIO_EINVAL);
    T_STREQ(rio_error_detail(), "unknown URL option 'op_timout' (did you mean 'op_timeout'?)");
    /* Nothing near: the scheme is named instead. */
    T_ERR(with_stderr(err, sizeof(err), open_url, "mock://u?zzzzzz=1"), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "unknown URL option 'zzzzzz' for mock://"));
    /* Another transport's option is unknown here. */
    T_ERR(with_stderr(err, sizeof(err), open_url, "mock://u?conns=2"), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "'conns'"));
    /* Known ones open, and the detail of the last failure is cleared. */
    T_OK(with_stderr(err, sizeof(err), open_url, "mock://u?paths=2&rate=1G&faults=&op_timeout=1s"));
    T_STREQ(rio_error_detail(), "");
}

TEST(known_lists_hold_what_open_reads)
{
    /* The tables are NULL-terminated, without duplicates or core names. */
    static const char *const schemes[] = {"mock", "railio", "file", "s3", "http", "https", "rados"};
    for (size_t s = 0; s < sizeof(schemes) / sizeof(schemes[0]); s++) {
        const struct rio_transport_ops *ops = rio__transport_find(schemes[s]);
        if (!ops)
            continue;
        T_NOTNULL(ops->url_options);
        for (const char *const *p = ops->url_options; *p; p++) {
            if (rio__name_in(*p, rio__core_url_options))
                T_FAIL("%s:// lists the core's option %s", schemes[s], *p);
            for (const char *const *q = p + 1; *q; q++)
                if (!strcmp(*p, *q))
                    T_FAIL("%s:// lists %s twice", schemes[s], *p);
        }
    }
}

static int env_open(void *arg)
{
    (void)arg;
    return open_url("mock://e");
}

TEST(bad_variable_named_with_its_value)
{
    char err[1024];

    setenv("RIO_DEPTH", "-1", 1);
    T_ERR(with_stderr(err, sizeof(err), env_open, NULL), RIO_EINVAL);
    T_STREQ(rio_error_detail(), "RIO_DEPTH=-1: not a whole number (option depth)");
    T_NULL(strstr(err, "RIO_DEPTH=-1"));
    setenv("RIO_DEPTH", "5000", 1);
    T_ERR(with_stderr(err, sizeof(err), env_open, NULL), RIO_EINVAL);
    T_STREQ(rio_error_detail(), "RIO_DEPTH=5000: must be 1 to 1024 (option depth)");
    unsetenv("RIO_DEPTH");
    /* From the URL: named as the URL option. */
    T_ERR(with_stderr(err, sizeof(err), open_url, "mock://e?depth=0"), RIO_EINVAL);
    T_STREQ(rio_error_detail(), "depth=0: must be 1 to 1024 (URL option; or RIO_DEPTH)");
    setenv("RIO_DEADLINE_MS", "soon", 1);
    T_ERR(with_stderr(err, sizeof(err), env_open, NULL), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "RIO_DEADLINE_MS=soon: not a duration"));
    unsetenv("RIO_DEADLINE_MS");
    /* A seed is an integer, not a size. */
    setenv("RIO_SEED", "abc", 1);
    T_ERR(with_stderr(err, sizeof(err), env_open, NULL), RIO_EINVAL);
    T_STREQ(rio_error_detail(),
            "RIO_SEED=abc: not an integer (0 to 18446744073709551615) (option seed)");
    setenv("RIO_SEED", "4M", 1);
    T_ERR(with_stderr(err, sizeof(err), env_open, NULL), RIO_EINVAL);
    setenv("RIO_SEED", "18446744073709551615", 1);
    T_OK(with_stderr(err, sizeof(err), env_open, NULL));
    unsetenv("RIO_SEED");
    T_ERR(with_stderr(err, sizeof(err), open_url, "mock://e?seed=1.5"), RIO_EINVAL);
    T_STREQ(rio_error_detail(),
            "seed=1.5: not an integer (0 to 18446744073709551615) (URL option; or RIO_SEED)");
    /* A transport's own option refused: the detail says it too. */
    T_ERR(with_stderr(err, sizeof(err), open_url, "mock://e?depth_cap=0"), RIO_EINVAL);
    T_NOTNULL(strstr(rio_error_detail(), "depth_cap=0: expected a whole number"));
}

TEST(variable_typo_warned_once_not_refused)
{
    char err[2048];

    setenv("RIO_DEPHT", "8", 1);
    setenv("RIO_SOMETHING_ELSE_ENTIRELY", "1", 1); /* another program's: not named */
    T_OK(with_stderr(err, sizeof(err), env_open, NULL));
    T_NOTNULL(strstr(err, "RIO_DEPHT is not a railio variable (did you mean RIO_DEPTH?)"));
    T_NULL(strstr(err, "RIO_SOMETHING_ELSE_ENTIRELY"));
    /* Once a process. */
    T_OK(with_stderr(err, sizeof(err), env_open, NULL));
    T_NULL(strstr(err, "RIO_DEPHT"));
    unsetenv("RIO_DEPHT");
    unsetenv("RIO_SOMETHING_ELSE_ENTIRELY");
}

TEST(closest_name)
{
    static const char *const a[] = {"paths", "depth", "deadline", "op_timeout", NULL};
    const char *const *lists[] = {a};

    T_STREQ(rio__closest_name("path", lists, 1), "paths");
    T_STREQ(rio__closest_name("dpeth", lists, 1), "depth");
    T_STREQ(rio__closest_name("optimeout", lists, 1), "op_timeout");
    T_NULL(rio__closest_name("x", lists, 1));
    T_NULL(rio__closest_name("bucket", lists, 1));
    char longname[200];
    memset(longname, 'a', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    T_NULL(rio__closest_name(longname, lists, 1));
}

/* Read a file of the source tree (docs/NAME) into a malloc'd string. */
static char *read_doc(const char *name)
{
    char rel[256], path[1024];
    snprintf(rel, sizeof(rel), "../../docs/%s", name);
    t_harness_path(path, sizeof(path), rel);
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t cap = 1 << 20, n;
    char *s = malloc(cap);
    T_NOTNULL(s);
    n = fread(s, 1, cap - 1, f);
    s[n] = '\0';
    fclose(f);
    return s;
}

/* The next cell border after p ("\\|" is a '|' inside a cell). */
static char *cell_end(char *p)
{
    for (; *p; p++)
        if (*p == '|' && p[-1] != '\\')
            return p;
    return NULL;
}

/*
 * Every option a page's tables name in their first two cells, as `name=`
 * or `?name=` opening a code span, is one rio_client_new takes for scheme.
 */
static unsigned check_doc(const char *doc, const char *scheme)
{
    const struct rio_transport_ops *ops = rio__transport_find(scheme);
    char *s = read_doc(doc);
    unsigned seen = 0;

    if (!ops || !s) {
        free(s);
        return 0;
    }
    for (char *line = strtok(s, "\n"); line; line = strtok(NULL, "\n")) {
        if (line[0] != '|')
            continue;
        char *c2 = cell_end(line + 1);
        char *c3 = c2 ? cell_end(c2 + 1) : NULL;
        if (c3)
            *c3 = '\0';
        for (char *p = line; (p = strchr(p, '`'));) {
            char *q = p + 1 + (p[1] == '?');
            size_t n = 0;
            while (islower((unsigned char)q[n]) || isdigit((unsigned char)q[n]) || q[n] == '_')
                n++;
            if (n && q[n] == '=') {
                char name[64];
                snprintf(name, sizeof(name), "%.*s", (int)n, q);
                if (!rio__name_in(name, rio__core_url_options) &&
                    !rio__name_in(name, ops->url_options))
                    T_FAIL("docs/%s lists %s=, which %s:// does not know", doc, name, scheme);
                seen++;
            }
            p = strchr(p + 1, '`');
            if (!p)
                break;
            p++;
        }
    }
    free(s);
    return seen;
}

/* Every "RIO_NAME" string literal of the library's sources under dir that
 * is not an error's name is in rio__known_env; returns how many were seen. */
static unsigned env_literals_known(const char *dir)
{
    char path[1024];
    unsigned seen = 0;
    DIR *d = opendir(dir);

    T_NOTNULL(d);
    for (struct dirent *de; (de = readdir(d));) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        struct stat st;
        T_OK(stat(path, &st));
        if (S_ISDIR(st.st_mode)) {
            seen += env_literals_known(path);
            continue;
        }
        size_t n = strlen(de->d_name);
        if (n < 2 || strcmp(de->d_name + n - 2, ".c"))
            continue;
        FILE *f = fopen(path, "r");
        T_NOTNULL(f);
        static char text[1 << 20];
        size_t len = fread(text, 1, sizeof(text) - 1, f);
        text[len] = '\0';
        fclose(f);
        for (char *p = text; (p = strstr(p, "\"RIO_"));) {
            char name[64];
            size_t k = 1;
            while (k < sizeof(name) &&
                   (isupper((unsigned char)p[k]) || isdigit((unsigned char)p[k]) || p[k] == '_'))
                k++;
            if (p[k] == '"' && k - 1 > 4 && k - 1 < sizeof(name)) {
                snprintf(name, sizeof(name), "%.*s", (int)(k - 1), p + 1);
                if (!rio__err_from_name(name) && !rio__name_in(name, rio__known_env))
                    T_FAIL("%s reads %s, which rio__known_env (core/options.c) lacks", path, name);
                seen++;
            }
            p += k;
        }
    }
    closedir(d);
    return seen;
}

TEST(env_literals_are_known)
{
    char core[1024], transport[1024];
    t_harness_path(core, sizeof(core), "../../src/core");
    t_harness_path(transport, sizeof(transport), "../../src/transport");
    T_GT(env_literals_known(core) + env_literals_known(transport), 20u);
}

TEST(docs_options_are_known)
{
    if (rio__transport_find("file")) /* built with liburing */
        T_GT(check_doc("file.md", "file"), 5u);
    T_GT(check_doc("tuning.md", "railio"), 10u);
    T_GT(check_doc("protocol.md", "railio"), 3u);
    if (rio__transport_find("s3"))
        T_GT(check_doc("s3.md", "s3"), 5u);
    if (rio__transport_find("rados"))
        T_GT(check_doc("rados.md", "rados"), 5u);
}
