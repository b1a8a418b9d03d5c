/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Errors keep their cause (issue 17 item 8): a call that ends with
 * RIO_ENOPATH or RIO_ERETRIES says each path's last error in
 * rio_error_detail() ("path 0: connection refused (ECONNREFUSED); ..."), a
 * railio:// or s3:// endpoint that refuses connections is named as such,
 * the next call starts with an empty detail, and no secret of the URL shows.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/stream.h"
#include "engine_util.h"
#include "tlib.h"
#include "transport/mock.h"

TEST(no_path_left_names_each_path_cause)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start_put_o(&e, "mock://nopath?paths=2", n, 3, e.o.retry_attempts = 2,
                   e.o.cooldown_base_ms = 5, e.o.cooldown_cap_ms = 20);
    eu_fault(e.c, "error:op=read:path=0:error=ECONNREFUSED");
    eu_fault(e.c, "error:op=read:path=1:error=ETIMEDOUT");
    uint8_t *dst = eu_fill_buf(n, 0);
    int64_t ret = rio_get(e.c, "o", dst, n, NULL);
    T_TRUE(ret == RIO_ENOPATH || ret == RIO_ERETRIES);
    const char *d = rio_error_detail();
    fprintf(stderr, "  %s: %s\n", rio_errname((int)ret), d);
    T_NOTNULL(strstr(d, "path 0: connection refused (ECONNREFUSED)"));
    T_NOTNULL(strstr(d, "path 1: connection timed out (ETIMEDOUT)"));
    eu_idle(e.c);

    /* The next call starts with nothing to say. */
    rio_mock_faults_clear(e.c);
    rio_mock_heal(e.c);
    eu_sleep_ms(50);
    eu_get_check(e.c, "o", n, 3, NULL);
    T_STREQ(rio_error_detail(), "");
    struct rio_desc desc;
    T_ERR(rio_stat(e.c, "missing", &desc), RIO_ENOTFOUND);
    T_STREQ(rio_error_detail(), "");
    free(dst);
    eu_close(&e);
}

static int sink_cb(void *arg, const void *data, size_t len)
{
    (void)arg, (void)data, (void)len;
    return 0;
}

static int chunk_cb(void *arg, uint64_t off, const void *data, size_t len)
{
    (void)arg, (void)off, (void)data, (void)len;
    return 0;
}

/* The detail names the problem; "path N: CAUSE" is what it must carry. */
static void expect_path_causes(int64_t ret, const char *what)
{
    const char *d = rio_error_detail();
    fprintf(stderr, "  %s: %s: %s\n", what, rio_errname((int)ret), d);
    T_TRUE(ret == RIO_ENOPATH || ret == RIO_ERETRIES);
    T_NOTNULL(strstr(d, "path 0: connection refused (ECONNREFUSED)"));
}

/* The streams say the same as a whole-object call: a GET stream, the
 * CLI's chunk reader (railio get into a file) and a writer that ran out of
 * paths said only "no healthy path left" (rails review). */
TEST(streams_name_each_path_cause)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;
    struct rio_desc d;

    eu_start_put_o(&e, "mock://nopath2?paths=2", n, 3, e.o.retry_attempts = 2,
                   e.o.cooldown_base_ms = 5, e.o.cooldown_cap_ms = 20);
    T_OK(rio_stat(e.c, "o", &d));
    eu_fault(e.c, "error:op=read:error=ECONNREFUSED");
    expect_path_causes(rio_get_stream(e.c, "o", 0, sink_cb, NULL, NULL), "stream");
    eu_idle(e.c);
    rio_mock_heal(e.c);
    eu_sleep_ms(50);
    expect_path_causes(rio__get_chunks(e.c, &d, 0, 0, chunk_cb, NULL, NULL), "chunks");
    eu_idle(e.c);
    rio_mock_faults_clear(e.c);
    rio_mock_heal(e.c);
    eu_sleep_ms(50);
    eu_fault(e.c, "error:op=write:error=ECONNREFUSED");
    struct rio_writer *w;
    uint8_t *src = eu_fill_buf(n, 1);
    T_OK(rio_writer_open(e.c, "w", n, 0, NULL, &w));
    int ret = rio_writer_write(w, src, n);
    if (ret == 0)
        ret = rio_writer_close(w, NULL);
    else
        rio_writer_abort(w);
    expect_path_causes(ret, "writer");
    free(src);
    rio_desc_cleanup(&d);
    eu_close(&e);
}

TEST(railio_refused_named)
{
    char url[256];
    struct rio_client *c = NULL;

    snprintf(url, sizeof(url), "railio://127.0.0.1:%d?token=SECRETTOKEN&op_timeout=1s",
             t_free_port());
    T_ERR(rio_client_new(url, NULL, &c), -ECONNREFUSED);
    const char *d = rio_error_detail();
    fprintf(stderr, "  detail: %s\n", d);
    T_NOTNULL(strstr(d, "connection refused"));
    T_NULL(strstr(d, "SECRETTOKEN"));
    T_NOTNULL(strstr(d, "token=***"));
}

TEST(s3_refused_named)
{
    char url[256];
    struct rio_client *c = NULL;
    struct rio_desc d;

    if (!rio_has_scheme("s3"))
        T_SKIP("s3:// is not built");
    snprintf(url, sizeof(url),
             "s3://bkt?endpoint=http://127.0.0.1:%d&retries=2&backoff_base=1ms&backoff_cap=5ms",
             t_free_port());
    setenv("AWS_ACCESS_KEY_ID", "AK", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
    T_OK(rio_client_new(url, NULL, &c));
    T_ERR(rio_stat(c, "k", &d), -ECONNREFUSED);
    fprintf(stderr, "  detail: %s\n", rio_error_detail());
    T_NOTNULL(strstr(rio_error_detail(), "connection refused (ECONNREFUSED), 2 tries"));
    rio_client_destroy(c);
}

/* A refused s3:// region or endpoint names where it came from: the URL
 * option, the variable (AWS_ENDPOINT_URL=notaurl said only "s3 endpoint
 * notaurl", AWS_REGION='us east' only "region us east": which of five
 * places to fix was the user's to guess), the profile. */
TEST(s3_bad_region_and_endpoint_name_their_source)
{
    static const struct {
        const char *url, *var, *val, *want;
        int err;
    } cases[] = {
        {"s3://bkt", "AWS_ENDPOINT_URL", "notaurl", "AWS_ENDPOINT_URL=notaurl: expected", RIO_EURL},
        {"s3://bkt", "AWS_ENDPOINT_URL_S3", "ftp://h", "AWS_ENDPOINT_URL_S3=ftp://h", RIO_EURL},
        {"s3://bkt", "RIO_S3_ENDPOINT", "h:1", "RIO_S3_ENDPOINT=h:1", RIO_EURL},
        {"s3://bkt?endpoint=zz", NULL, NULL, "endpoint=zz: expected", RIO_EURL},
        {"s3://bkt?endpoint=http://127.0.0.1:1", "AWS_REGION", "us east", "AWS_REGION=us east",
         RIO_EINVAL},
        {"s3://bkt?endpoint=http://127.0.0.1:1", "AWS_DEFAULT_REGION", "a/b",
         "AWS_DEFAULT_REGION=a/b", RIO_EINVAL},
        {"s3://bkt?endpoint=http://127.0.0.1:1&region=a_b", NULL, NULL, "region=a_b", RIO_EINVAL},
    };
    static const char *const vars[] = {"AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "RIO_S3_ENDPOINT",
                                       "AWS_REGION",       "AWS_DEFAULT_REGION",  "AWS_PROFILE"};

    if (!rio_has_scheme("s3"))
        T_SKIP("s3:// is not built");
    setenv("AWS_ACCESS_KEY_ID", "AK", 1);
    setenv("AWS_SECRET_ACCESS_KEY", "SK", 1);
    setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rio_client *c = NULL;
        for (size_t v = 0; v < sizeof(vars) / sizeof(vars[0]); v++)
            unsetenv(vars[v]);
        if (cases[i].var)
            setenv(cases[i].var, cases[i].val, 1);
        T_ERR(rio_client_new(cases[i].url, NULL, &c), cases[i].err);
        fprintf(stderr, "  detail: %s\n", rio_error_detail());
        T_NOTNULL(strstr(rio_error_detail(), cases[i].want));
    }
}

/* A CR or LF in a credential (AWS_SESSION_TOKEN pasted with its newline, a
 * hostile credential source) is refused at open: they went into the
 * request headers as they were, so "tok\r\nX-Evil: 1" sent a header of
 * its own on every request. The detail names the source and the field,
 * never the value. */
TEST(s3_control_characters_in_credentials_refused)
{
    static const struct {
        const char *id, *secret, *token, *field;
    } cases[] = {
        {"AKIA", "SEKRIT", "tok\r\nX-Evil: 1", "session token"},
        {"AK\nIA", "SEKRIT", NULL, "access key id"},
        {"AKIA", "SEK\rRIT", NULL, "secret access key"},
    };

    if (!rio_has_scheme("s3"))
        T_SKIP("s3:// is not built");
    setenv("AWS_CONFIG_FILE", "/nonexistent", 1);
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent", 1);
    unsetenv("AWS_PROFILE");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct rio_client *c = NULL;
        setenv("AWS_ACCESS_KEY_ID", cases[i].id, 1);
        setenv("AWS_SECRET_ACCESS_KEY", cases[i].secret, 1);
        if (cases[i].token)
            setenv("AWS_SESSION_TOKEN", cases[i].token, 1);
        else
            unsetenv("AWS_SESSION_TOKEN");
        T_ERR(rio_client_new("s3://bkt?endpoint=http://127.0.0.1:1", NULL, &c), RIO_EINVAL);
        const char *d = rio_error_detail();
        fprintf(stderr, "  detail: %s\n", d);
        T_NOTNULL(strstr(d, "a control character"));
        T_NOTNULL(strstr(d, cases[i].field));
        T_NULL(strstr(d, "SEK"));
        T_NULL(strstr(d, "Evil"));
    }
    unsetenv("AWS_SESSION_TOKEN");
}

/* A railio:// CA bundle that cannot be read (tls_ca=, RIO_TLS_CA) is the
 * caller's setting, refused as such (RIO_EINVAL) naming where it came
 * from: it was RIO_ETLS, "the peer does not speak TLS or the TLS
 * handshake failed", the CLI's exit 5 (unreachable), naming neither. */
TEST(tls_ca_that_cannot_be_read_named)
{
    char url[256];
    struct rio_client *c = NULL;
    int port = t_free_port();

    snprintf(url, sizeof(url), "railio://127.0.0.1:%d?tls=on&tls_ca=/nonexistent/ca.pem", port);
    T_ERR(rio_client_new(url, NULL, &c), RIO_EINVAL);
    fprintf(stderr, "  detail: %s\n", rio_error_detail());
    T_NOTNULL(strstr(rio_error_detail(), "tls_ca=/nonexistent/ca.pem"));
    setenv("RIO_TLS_CA", "/nonexistent/ca.pem", 1);
    snprintf(url, sizeof(url), "railio://127.0.0.1:%d?tls=on", port);
    T_ERR(rio_client_new(url, NULL, &c), RIO_EINVAL);
    fprintf(stderr, "  detail: %s\n", rio_error_detail());
    T_NOTNULL(strstr(rio_error_detail(), "RIO_TLS_CA=/nonexistent/ca.pem"));
    unsetenv("RIO_TLS_CA");
}

/* A rados:// ceph.conf from RIO_CEPH_CONF that is missing says the
 * variable (it said "ceph.conf '/x': No such file or directory", as for
 * conf=, leaving the user to find where the path came from). Refused
 * before librados connects: no cluster needed. */
TEST(rados_conf_from_the_environment_named)
{
    struct rio_client *c = NULL;

    if (!rio_has_scheme("rados"))
        T_SKIP("rados:// is not built");
    setenv("RIO_CEPH_CONF", "/nonexistent/ceph.conf", 1);
    T_ERR(rio_client_new("rados://pool", NULL, &c), -ENOENT);
    fprintf(stderr, "  detail: %s\n", rio_error_detail());
    T_NOTNULL(strstr(rio_error_detail(), "RIO_CEPH_CONF: ceph.conf '/nonexistent/ceph.conf'"));
    /* conf= wins and is said as before. */
    T_ERR(rio_client_new("rados://pool?conf=/nonexistent/other.conf", NULL, &c), -ENOENT);
    T_NOTNULL(strstr(rio_error_detail(), "ceph.conf '/nonexistent/other.conf'"));
    T_NULL(strstr(rio_error_detail(), "RIO_CEPH_CONF"));
    unsetenv("RIO_CEPH_CONF");
}
