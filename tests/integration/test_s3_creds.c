/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Where s3:// finds its AWS credentials, against a real radosgw (which
 * checks every signature): the environment, a profile of the shared
 * credentials file, the endpoint and region of the config file, with HOME
 * pointed at a fresh directory so that the machine's own ~/.aws is never
 * read. No credentials anywhere is RIO_ENOCREDS (saying where it looked)
 * unless unsigned=1; a profile named and missing is refused; secrets never
 * appear in rio_error_detail or on stderr. And the addressing chosen at
 * open: virtual-hosted for AWS endpoints, path style for the others.
 */
/* T_TIMEOUT 180 */
/* T_LABELS net;ceph */
#include "t.h"

#ifndef RIO_HAVE_CURL
TEST(s3_not_built)
{
    T_SKIP("built without libcurl (RIO_WITH_CURL)");
}
#else

#define SU_WITH_RGW
#include "core/internal.h"
#include "s3_util.h"
#include "transport/s3/internal.h"

#define BUCKET "riocreds"

static char g_id[256], g_secret[256];
static const char *g_ep;

/* radosgw up, its keys kept and taken out of the environment, HOME a
 * fresh directory with an empty ~/.aws, no AWS_* setting left over. */
static const char *creds_setup(void)
{
    static const char *const vars[] = {"AWS_ACCESS_KEY_ID",
                                       "AWS_SECRET_ACCESS_KEY",
                                       "AWS_SESSION_TOKEN",
                                       "AWS_PROFILE",
                                       "AWS_SHARED_CREDENTIALS_FILE",
                                       "AWS_CONFIG_FILE",
                                       "AWS_REGION",
                                       "AWS_DEFAULT_REGION",
                                       "AWS_ENDPOINT_URL",
                                       "AWS_ENDPOINT_URL_S3",
                                       "RIO_S3_ENDPOINT",
                                       "RIO_S3_UNSIGNED"};
    const char *home = t_scratch_dir("rio-s3-home");
    char dir[700];

    g_ep = su_rgw(BUCKET);
    snprintf(g_id, sizeof(g_id), "%s", getenv("AWS_ACCESS_KEY_ID"));
    snprintf(g_secret, sizeof(g_secret), "%s", getenv("AWS_SECRET_ACCESS_KEY"));
    T_GT(strlen(g_secret), 8u);
    for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
        unsetenv(vars[i]);
    setenv("HOME", home, 1);
    snprintf(dir, sizeof(dir), "%s/.aws", home);
    T_OK(mkdir(dir, 0700));
    return home;
}

/* HOME/.aws/NAME holds text (%s: the key id, then the secret). */
static void aws_file(const char *home, const char *name, const char *fmt)
{
    char path[700], text[2048];
    int n = snprintf(text, sizeof(text), fmt, g_id, g_secret);

    snprintf(path, sizeof(path), "%s/.aws/%s", home, name);
    t_write_file(path, text, (size_t)n);
}

/* A PUT, GET and DELETE through url prove its keys are the right ones
 * (radosgw refuses any other signature). */
static void roundtrip_ok(const char *url, const char *key)
{
    struct rio_options o;
    int64_t alloc0 = rio__alloc_outstanding();

    su_opts(&o, 5 * SU_MIB, 2);
    struct rio_client *c = su_client(url, &o);
    t_roundtrip(c, key, 1000, 77, 5 * SU_MIB);
    T_OK(rio_delete(c, key));
    su_close(c, alloc0);
}

/* rio_client_new(url) fails with err; the detail (which must not hold the
 * secret) into detail. */
static void open_fails(const char *url, int err, char *detail, size_t cap)
{
    struct rio_options o;
    struct rio_client *c = NULL;
    struct t_stderr se;
    char said[4096];

    su_opts(&o, 5 * SU_MIB, 2);
    t_stderr_begin(&se);
    T_ERR(rio_client_new(url, &o, &c), err);
    snprintf(detail, cap, "%s", rio_error_detail());
    t_stderr_end(&se, said, sizeof(said));
    T_NULL(c);
    T_NULL(strstr(detail, g_secret));
    T_NULL(strstr(said, g_secret));
}

/* The session token the s3 transport of url holds ("" for none). */
static const char *open_token(const char *url)
{
    static char tok[256];
    const struct rio_transport_ops *ops = rio__transport_find("s3");
    struct rio_transport *tt = NULL;
    struct rio_url u;

    T_NOTNULL(ops);
    T_OK(rio__url_parse(url, &u));
    T_OK(ops->open(&u, NULL, &tt));
    struct s3_transport *t = (struct s3_transport *)tt;
    T_TRUE(t->sign);
    snprintf(tok, sizeof(tok), "%s", t->token ? t->token : "");
    ops->close(tt);
    rio__url_cleanup(&u);
    return tok;
}

/* The environment: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, ahead of
 * a profile that AWS_PROFILE names (as for the AWS CLI); a session token
 * is kept for x-amz-security-token, from either. */
TEST(creds_from_environment)
{
    const char *home = creds_setup();
    char url[512], detail[1024];

    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s", g_ep);
    setenv("AWS_ACCESS_KEY_ID", g_id, 1);
    setenv("AWS_SECRET_ACCESS_KEY", g_secret, 1);
    aws_file(home, "credentials",
             "[dev]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n");
    setenv("AWS_PROFILE", "dev", 1);
    roundtrip_ok(url, "creds/env");

    /* One without the other is refused, naming the variables. */
    unsetenv("AWS_SECRET_ACCESS_KEY");
    open_fails(url, RIO_EINVAL, detail, sizeof(detail));
    T_NOTNULL(strstr(detail, "AWS_SECRET_ACCESS_KEY"));

    /* A session token, from the environment or the profile: radosgw
     * without STS ignores x-amz-security-token, so the transport's own
     * record is checked (request.c sends and signs it when set). */
    setenv("AWS_SECRET_ACCESS_KEY", g_secret, 1);
    setenv("AWS_SESSION_TOKEN", "token-from-env", 1);
    T_STREQ(open_token(url), "token-from-env");
    /* A token of the most bytes taken still fits every request's headers
     * (radosgw ignores it: the round trip proves the headers went out);
     * one byte more is refused at open, naming the variable. */
    char *tok = malloc(4097);
    T_NOTNULL(tok);
    memset(tok, 'T', 4095);
    tok[4095] = '\0';
    setenv("AWS_SESSION_TOKEN", tok, 1);
    roundtrip_ok(url, "creds/long-token");
    memset(tok, 'T', 4096);
    tok[4096] = '\0';
    setenv("AWS_SESSION_TOKEN", tok, 1);
    free(tok);
    open_fails(url, RIO_EINVAL, detail, sizeof(detail));
    T_NOTNULL(strstr(detail, "AWS_SESSION_TOKEN"));
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    unsetenv("AWS_SESSION_TOKEN");
    aws_file(home, "credentials",
             "[dev]\naws_access_key_id = %s\naws_secret_access_key = %s\n"
             "aws_session_token = token-from-file\n");
    T_STREQ(open_token(url), "token-from-file");
}

/* The shared credentials file: the profile AWS_PROFILE names (or the URL's
 * profile=, which beats the environment), [default] otherwise; the file
 * AWS_SHARED_CREDENTIALS_FILE names instead of ~/.aws/credentials. */
TEST(creds_from_credentials_file_profile)
{
    const char *home = creds_setup();
    char url[512], path[700];

    aws_file(home, "credentials",
             "# the right keys are dev's\n"
             "[default]\naws_access_key_id = wrong\naws_secret_access_key = wrong\n"
             "[dev]\naws_access_key_id = %s\naws_secret_access_key = %s\n");
    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s", g_ep);
    setenv("AWS_PROFILE", "dev", 1);
    roundtrip_ok(url, "creds/profile-env");

    /* profile= in the URL, over wrong keys in the environment. */
    unsetenv("AWS_PROFILE");
    setenv("AWS_ACCESS_KEY_ID", "wrong", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "wrong", 1);
    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s&profile=dev", g_ep);
    roundtrip_ok(url, "creds/profile-url");
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");

    /* [default]'s wrong keys are used when no profile is named. */
    struct rio_options o;
    struct rio_desc d;
    int64_t alloc0 = rio__alloc_outstanding();
    su_opts(&o, 5 * SU_MIB, 2);
    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s", g_ep);
    struct rio_client *c = su_client(url, &o);
    T_ERR(rio_stat(c, "creds/none", &d), -EACCES);
    su_close(c, alloc0);

    /* AWS_SHARED_CREDENTIALS_FILE: another file, [default] in it. */
    snprintf(path, sizeof(path), "%s/elsewhere", home);
    char text[1024];
    int n = snprintf(text, sizeof(text),
                     "[default]\naws_access_key_id=%s\naws_secret_access_key=%s\n", g_id, g_secret);
    t_write_file(path, text, (size_t)n);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    roundtrip_ok(url, "creds/other-file");
}

/* The config file: the profile's endpoint_url and region (no endpoint in
 * the URL or the environment), and its keys when the credentials file has
 * none; AWS_CONFIG_FILE names another file. */
TEST(creds_config_file_endpoint_url)
{
    const char *home = creds_setup();
    char text[1024], path[700];
    int n;

    n = snprintf(text, sizeof(text),
                 "[default]\nregion = us-east-1\n"
                 "[profile dev]\nregion = us-east-1\nendpoint_url = %s\n"
                 "aws_access_key_id = %s\naws_secret_access_key = %s\n"
                 "s3 =\n  endpoint_url = http://127.0.0.1:1\n",
                 g_ep, g_id, g_secret);
    snprintf(path, sizeof(path), "%s/.aws/config", home);
    t_write_file(path, text, (size_t)n);
    setenv("AWS_PROFILE", "dev", 1);
    roundtrip_ok("s3://" BUCKET, "creds/config");

    /* Keys from the credentials file, the endpoint from the config file. */
    aws_file(home, "credentials", "[dev]\naws_access_key_id = %s\naws_secret_access_key = %s\n");
    n = snprintf(text, sizeof(text), "[profile dev]\nendpoint_url = %s\n", g_ep);
    t_write_file(path, text, (size_t)n);
    roundtrip_ok("s3://" BUCKET, "creds/config2");

    /* AWS_CONFIG_FILE elsewhere; ~/.aws/config is not read then. */
    snprintf(path, sizeof(path), "%s/cfg", home);
    n = snprintf(text, sizeof(text), "[profile dev]\nendpoint_url = %s\n", g_ep);
    t_write_file(path, text, (size_t)n);
    aws_file(home, "config", "[profile dev]\nendpoint_url = http://127.0.0.1:1\n");
    setenv("AWS_CONFIG_FILE", path, 1);
    roundtrip_ok("s3://" BUCKET, "creds/config3");
}

/* No keys anywhere: RIO_ENOCREDS naming where it looked; unsigned=1 opens
 * and sends requests unsigned (radosgw refuses them on a private bucket).
 * A profile named and in neither file is refused too; a hostile file is
 * refused by line number, its secret never shown. */
TEST(no_credentials_is_enocreds)
{
    const char *home = creds_setup();
    char url[512], detail[1024], bad[4096];

    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s", g_ep);
    open_fails(url, RIO_ENOCREDS, detail, sizeof(detail));
    T_NOTNULL(strstr(detail, "AWS_ACCESS_KEY_ID"));
    T_NOTNULL(strstr(detail, "/.aws/credentials"));
    T_NOTNULL(strstr(detail, "/.aws/config"));
    T_NOTNULL(strstr(detail, "unsigned=1"));
    T_NOTNULL(strstr(detail, home));

    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s&unsigned=1", g_ep);
    struct rio_options o;
    struct rio_desc d;
    uint8_t buf[10] = {0};
    int64_t alloc0 = rio__alloc_outstanding();
    su_opts(&o, 5 * SU_MIB, 2);
    struct rio_client *c = su_client(url, &o);
    T_ERR(rio_put(c, "creds/anon", buf, sizeof(buf), NULL, NULL), -EACCES);
    T_ERR(rio_stat(c, "creds/anon", &d), -EACCES);
    su_close(c, alloc0);

    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s&profile=nosuch", g_ep);
    open_fails(url, RIO_ENOCREDS, detail, sizeof(detail));
    T_NOTNULL(strstr(detail, "nosuch"));

    /* A line over the bound, after the secret: refused by number. */
    int n = snprintf(bad, sizeof(bad),
                     "[default]\naws_access_key_id = %s\n"
                     "aws_secret_access_key = %s\nx = ",
                     g_id, g_secret);
    memset(bad + n, 'x', sizeof(bad) - (size_t)n - 1);
    char path[700];
    snprintf(path, sizeof(path), "%s/.aws/credentials", home);
    size_t big = RIO_AWSINI_LINE_MAX + 100;
    char *text = malloc(big + (size_t)n);
    T_NOTNULL(text);
    memcpy(text, bad, (size_t)n);
    memset(text + n, 'x', big);
    t_write_file(path, text, big + (size_t)n);
    free(text);
    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s", g_ep);
    open_fails(url, RIO_EINVAL, detail, sizeof(detail));
    T_NOTNULL(strstr(detail, "line 4"));
}

/* Addressing at open: virtual-hosted for an AWS endpoint (the endpoint
 * and Host gain the bucket), path style for radosgw and for a bucket name
 * that cannot be a host label; addressing= forces either. */
TEST(addressing_chosen_at_open)
{
    static const struct {
        const char *url, *endpoint, *host;
        bool vhost;
    } cases[] = {
        {"s3://my-bucket?region=eu-west-3", "https://my-bucket.s3.eu-west-3.amazonaws.com",
         "my-bucket.s3.eu-west-3.amazonaws.com", true},
        {"s3://my.bucket?region=eu-west-3", "https://s3.eu-west-3.amazonaws.com",
         "s3.eu-west-3.amazonaws.com", false},
        {"s3://my-bucket?endpoint=https://s3.us-west-2.amazonaws.com&addressing=path",
         "https://s3.us-west-2.amazonaws.com", "s3.us-west-2.amazonaws.com", false},
        {"s3://my-bucket?endpoint=http://127.0.0.1:7480", "http://127.0.0.1:7480", "127.0.0.1:7480",
         false},
        {"s3://my-bucket?endpoint=http://minio.local:9000&addressing=virtual",
         "http://my-bucket.minio.local:9000", "my-bucket.minio.local:9000", true},
    };
    const struct rio_transport_ops *ops = rio__transport_find("s3");

    creds_setup();
    setenv("RIO_S3_UNSIGNED", "1", 1);
    T_NOTNULL(ops);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rio_url u;
        struct rio_transport *tt = NULL;

        T_OK(rio__url_parse(cases[i].url, &u));
        T_OK(ops->open(&u, NULL, &tt));
        struct s3_transport *t = (struct s3_transport *)tt;
        T_STREQ(t->endpoint, cases[i].endpoint);
        T_STREQ(t->host, cases[i].host);
        T_EQ(t->vhost, cases[i].vhost);
        T_FALSE(t->sign);
        ops->close(tt);
        rio__url_cleanup(&u);
    }
    /* addressing=virtual with an IP address for the endpoint is refused
     * at open, saying why ("bkt.127.0.0.1" went to the DNS resolver, and
     * the endpoint named was never reached). */
    static const char *const ip[] = {
        "s3://my-bucket?endpoint=http://127.0.0.1:7480&addressing=virtual",
        "s3://my-bucket?endpoint=http://[::1]:7480&addressing=virtual"};
    for (size_t i = 0; i < 2; i++) {
        struct rio_url u;
        struct rio_transport *tt = NULL;
        T_OK(rio__url_parse(ip[i], &u));
        T_ERR(ops->open(&u, NULL, &tt), RIO_EINVAL);
        T_NOTNULL(strstr(rio_error_detail(), "is an IP address"));
        rio__url_cleanup(&u);
    }
}
#endif
