/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * rio__url_redact: the one function every message and log line passes a URL
 * through (issue 17 item 8). Secret options (token, *secret*, *password*,
 * *key* but the object's key, keyring and *_file paths) and the password of
 * user:password@ (the URL's and one inside an option's value) become "***";
 * the rest is kept as typed. A refused secret option does not print its value.
 */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/url.h"
#include "engine_util.h"

static void redacts(const char *url, const char *want)
{
    char out[512];
    T_STREQ(rio__url_redact(url, out, sizeof(out)), want);
}

TEST(tokens_and_passwords)
{
    redacts("railio://h:1/k?token=SECRET", "railio://h:1/k?token=***");
    redacts("railio://h:1/k?conns=2&token=SECRET&depth=4",
            "railio://h:1/k?conns=2&token=***&depth=4");
    redacts("railio://user:PW@h:1/k", "railio://user:***@h:1/k");
    redacts("railio://user@h:1/k", "railio://user@h:1/k");
    redacts("s3://b/k?endpoint=http://ak:SK@h:9000&region=x",
            "s3://b/k?endpoint=http://ak:***@h:9000&region=x");
    redacts("s3://b/k?secret_key=S&session_token=T&tls_key=K&aws_password=P&passwd=Q",
            "s3://b/k?secret_key=***&session_token=***&tls_key=***&aws_password=***&passwd=***");
    /* A value written with %XX escapes is the parser's once decoded: its
     * user:password@ is masked in that form (it was shown as typed,
     * password and all); one without any is kept as typed. */
    redacts("s3://b/k?endpoint=http%3A%2F%2Fak%3ASK%40h%3A9000&region=x",
            "s3://b/k?endpoint=http://ak:***@h:9000&region=x");
    redacts("s3://b/k?endpoint=http%3A%2F%2Fh%3A9000", "s3://b/k?endpoint=http%3A%2F%2Fh%3A9000");
    redacts("http://user%3APW@h:1/k", "http://user%3A***@h:1/k");
    redacts("http://user%3aPW@h:1/k?x=http://a%3aB@c", "http://user%3a***@h:1/k?x=http://a:***@c");
    /* A password holding a '/' not written %2F: the authority ends at the
     * '/', and what follows its ':' is no port (it was shown whole); a
     * port and a key holding '@' are kept. */
    redacts("http://u:Pa/SsW0rd@h:1/x", "http://u:***@h:1/x");
    redacts("http://u:Pa/Ss/W0rd@h:1/x?y=1", "http://u:***@h:1/x?y=1");
    redacts("http://h:8080/a@b", "http://h:8080/a@b");
    redacts("s3://b/k@x", "s3://b/k@x");
    /* Any case, and a name written with %XX escapes. */
    redacts("x://h?TOKEN=S&%74oken=S2", "x://h?TOKEN=***&%74oken=***");
    /* Not secrets: the object's key, paths of files, plain options. */
    redacts("rados://p?keyring=/etc/k&key=obj&token_file=/t&conf=/c",
            "rados://p?keyring=/etc/k&key=obj&token_file=/t&conf=/c");
    /* No '?', a flag without '=', an empty value, empty pieces. */
    redacts("mock://a", "mock://a");
    redacts("mock://a?token&x=1&&token=", "mock://a?token&x=1&&token=***");
    redacts("not a url at all", "not a url at all");
}

/* rio__url_mask_in_place hides what rio__url_redact hides, with '*' over
 * each byte (the CLI's command line keeps its length). */
static void masks(const char *url, const char *want)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", url);
    T_EQ(rio__url_mask_in_place(buf), strcmp(url, want) != 0);
    T_STREQ(buf, want);
}

TEST(masked_in_place)
{
    masks("railio://h:1/k?token=SECRET", "railio://h:1/k?token=******");
    masks("railio://h/k?token=ab#cd&depth=4", "railio://h/k?token=*****&depth=4");
    masks("http://alice:PaSsW0rd@h:1/k", "http://alice:********@h:1/k");
    masks("http://u:Pa/SsW0rd@h:1/x", "http://u:*********@h:1/x");
    masks("http://user%3APW@h:1/k", "http://user%3A**@h:1/k");
    masks("s3://b/k?endpoint=http://ak:SK@h:9000&region=x",
          "s3://b/k?endpoint=http://ak:**@h:9000&region=x");
    masks("s3://b/k?endpoint=http%3A%2F%2Fak%3ASK%40h&x=1", "s3://b/k?endpoint="
                                                            "************************&x=1");
    masks("s3://b/k?%74oken=S2&secret_key=S", "s3://b/k?%74oken=**&secret_key=*");
    masks("rados://p?keyring=/etc/k&key=obj", "rados://p?keyring=/etc/k&key=obj");
    masks("http://h:8080/a@b", "http://h:8080/a@b");
    masks("mock://a?token&x=1", "mock://a?token&x=1");
}

TEST(bounded_output)
{
    char out[16];
    T_STREQ(rio__url_redact("railio://h/k?token=SECRETSECRET", out, sizeof(out)),
            "railio://h/k?to");
    char small[1] = {'x'};
    T_STREQ(rio__url_redact("a://b", small, sizeof(small)), "");
    /* A secret cut short never shows part of itself. */
    char mid[24];
    rio__url_redact("a://b?token=SECRETSECRET", mid, sizeof(mid));
    T_NULL(strstr(mid, "SEC"));
}

TEST(secret_names)
{
    T_TRUE(rio__secret_name("token", 5));
    T_TRUE(rio__secret_name("AWS_SECRET_ACCESS_KEY", 21));
    T_TRUE(rio__secret_name("sse_customer_key", 16));
    T_FALSE(rio__secret_name("key", 3));
    T_FALSE(rio__secret_name("keyring", 7));
    T_FALSE(rio__secret_name("token_file", 10));
    T_FALSE(rio__secret_name("depth", 5));
    /* A secret word mistyped: "tokne=" is refused as unknown, and the
     * message quoting it showed the token. */
    static const char *const typos[] = {"tokne",   "tokem",   "toke",    "secert",
                                        "pasword", "passwrd", "s3_tokn", "auth-tokne"};
    for (size_t i = 0; i < sizeof(typos) / sizeof(typos[0]); i++)
        if (!rio__secret_name(typos[i], strlen(typos[i])))
            T_FAIL("%s is not taken for a secret", typos[i]);
    /* and no option that holds none: every name the library and its
     * transports take, but the token itself */
    static const char *const plain[] = {"chunk",
                                        "paths",
                                        "depth",
                                        "budget",
                                        "request_budget",
                                        "budget_mode",
                                        "retries",
                                        "backoff_base",
                                        "backoff_cap",
                                        "deadline",
                                        "op_timeout",
                                        "cooldown_base",
                                        "cooldown_cap",
                                        "verify",
                                        "retry_checksum",
                                        "seed",
                                        "etag",
                                        "tls",
                                        "adapt",
                                        "faults",
                                        "rate",
                                        "lat",
                                        "disk",
                                        "contend",
                                        "depth_cap",
                                        "svc_lie",
                                        "queues",
                                        "direct",
                                        "sync",
                                        "single",
                                        "inplace",
                                        "tmpfile",
                                        "bounce",
                                        "stage",
                                        "conf",
                                        "id",
                                        "keyring",
                                        "timeout",
                                        "abort_timeout",
                                        "inject_socket_failures",
                                        "fail_chunk",
                                        "fail_error",
                                        "shuffle",
                                        "pools",
                                        "max_object",
                                        "list_scan",
                                        "conns",
                                        "stall_check",
                                        "index_recheck",
                                        "endpoint",
                                        "region",
                                        "profile",
                                        "unsigned",
                                        "addressing",
                                        "conditional",
                                        "rails",
                                        "connect_timeout",
                                        "user_timeout",
                                        "progress_timeout",
                                        "ttl",
                                        "dial_backoff",
                                        "dial_backoff_cap",
                                        "cancel_grace",
                                        "keepalive",
                                        "tls_verify",
                                        "tls_ca",
                                        "tls_name",
                                        "token_file",
                                        "content_md5",
                                        "checksum",
                                        "nt_copy",
                                        "discard",
                                        "dns_shuffle",
                                        "bufsize",
                                        "upbufsize",
                                        "rcvbuf",
                                        "stall",
                                        "min_speed",
                                        "min_part",
                                        "ca_bundle"};
    for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++)
        if (rio__secret_name(plain[i], strlen(plain[i])))
            T_FAIL("%s is taken for a secret", plain[i]);
}

TEST(refused_secret_option_hides_its_value)
{
    char path[] = "/tmp/rio-redact-XXXXXX", buf[512];
    int fd = mkstemp(path);
    T_TRUE(fd >= 0);
    fflush(stderr);
    int saved = dup(2);
    T_EQ(dup2(fd, 2), 2);
    bool b;
    T_ERR(rio__opt_bool("tls_key", "SECRETVALUE", &b), RIO_EINVAL);
    fflush(stderr);
    T_EQ(dup2(saved, 2), 2);
    close(saved);
    ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    T_NULL(strstr(buf, "SECRETVALUE"));
    T_NOTNULL(strstr(rio_error_detail(), "tls_key=***"));
    T_NULL(strstr(rio_error_detail(), "SECRETVALUE"));
}
