/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests: URL parsing, sizes and durations (src/core/url.c). */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "core/url.h"
#include "railio.h"
#include "t.h"
#include "tlib.h"

TEST(url_full)
{
    struct rio_url u;

    T_OK(rio__url_parse("MoCk://node1:7070,node2:7070/some/path?paths=4&rate=125M,62M&lat=200us",
                        &u));
    T_STREQ(u.scheme, "mock");
    T_STREQ(u.authority, "node1:7070,node2:7070");
    T_STREQ(u.path, "some/path");
    T_EQ(u.nparams, 3);
    T_STREQ(u.pkey[0], "paths");
    T_STREQ(u.pval[0], "4");
    T_STREQ(rio__url_param(&u, "rate"), "125M,62M");
    T_STREQ(rio__url_param(&u, "lat"), "200us");
    T_NULL(rio__url_param(&u, "depth"));
    rio__url_cleanup(&u);
    T_NULL(u.buf);
}

TEST(url_minimal_forms)
{
    struct rio_url u;

    T_OK(rio__url_parse("mock://", &u));
    T_STREQ(u.scheme, "mock");
    T_STREQ(u.authority, "");
    T_STREQ(u.path, "");
    T_EQ(u.nparams, 0);
    rio__url_cleanup(&u);

    T_OK(rio__url_parse("mock://x?paths=2", &u));
    T_STREQ(u.authority, "x");
    T_STREQ(u.path, "");
    T_STREQ(rio__url_param(&u, "paths"), "2");
    rio__url_cleanup(&u);

    T_OK(rio__url_parse("file:///tmp/obj", &u));
    T_STREQ(u.scheme, "file");
    T_STREQ(u.authority, "");
    T_STREQ(u.path, "tmp/obj");
    rio__url_cleanup(&u);

    T_OK(rio__url_parse("s3+http://bucket/", &u));
    T_STREQ(u.scheme, "s3+http");
    T_STREQ(u.authority, "bucket");
    T_STREQ(u.path, "");
    rio__url_cleanup(&u);
}

TEST(url_query_decoding)
{
    struct rio_url u;

    T_OK(rio__url_parse("mock://a/b?faults=disconnect%3Apath%3D1%3Bshort&flag&&x=&k%20y=%41%62",
                        &u));
    T_EQ(u.nparams, 4);
    T_STREQ(rio__url_param(&u, "faults"), "disconnect:path=1;short");
    T_STREQ(rio__url_param(&u, "flag"), "");
    T_STREQ(rio__url_param(&u, "x"), "");
    T_STREQ(rio__url_param(&u, "k y"), "Ab");
    rio__url_cleanup(&u);

    /* The first of repeated keys wins; '=' inside a value is kept. */
    T_OK(rio__url_parse("mock://a?k=1&k=2&e=a=b", &u));
    T_STREQ(rio__url_param(&u, "k"), "1");
    T_STREQ(rio__url_param(&u, "e"), "a=b");
    rio__url_cleanup(&u);
}

TEST(url_rejects)
{
    static const char *const bad[] = {
        "",
        "mock",
        "mock:/x",
        "mock:x",
        "://x",
        "mo ck://x",
        "mo_ck://x",
        "mock://a\nb",
        "mock://a\tb",
        "mock://a\x7f",
        "mock://a?=v",
        "mock://a?k=%",
        "mock://a?k=%4",
        "mock://a?k=%zz",
        "mock://a?k=%00",
    };
    struct rio_url u;
    size_t i;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rio__detail_clear();
        int ret = rio__url_parse(bad[i], &u);
        if (ret != RIO_EURL)
            T_FAIL("rio__url_parse(\"%s\") = %d, want RIO_EURL", bad[i], ret);
        T_NULL(u.buf);
        /* Each says what is wrong (the CLI prints it after RIO_EURL). */
        if (!rio_error_detail()[0])
            T_FAIL("rio__url_parse(\"%s\"): no detail", bad[i]);
    }
    T_ERR(rio__url_parse(NULL, &u), RIO_EURL);
    /* The detail names the option by its place or name, never its value
     * (one may be a secret). */
    T_ERR(rio__url_parse("mock://a?paths=2&=x", &u), RIO_EURL);
    T_NOTNULL(strstr(rio_error_detail(), "option 2 has no name"));
    T_ERR(rio__url_parse("mock://a?token=s3cr%zzet", &u), RIO_EURL);
    T_NOTNULL(strstr(rio_error_detail(), "option token"));
    T_NULL(strstr(rio_error_detail(), "s3cr"));
    T_ERR(rio__url_parse("mock://a?b%zz=1", &u), RIO_EURL);
    T_NOTNULL(strstr(rio_error_detail(), "option 1: its name"));
}

TEST(url_param_limit)
{
    char s[512] = "mock://a?";
    struct rio_url u;
    unsigned i;

    for (i = 0; i < RIO_URL_MAX_PARAMS; i++)
        snprintf(s + strlen(s), sizeof(s) - strlen(s), "k%u=%u&", i, i);
    T_OK(rio__url_parse(s, &u));
    T_EQ(u.nparams, RIO_URL_MAX_PARAMS);
    T_STREQ(rio__url_param(&u, "k31"), "31");
    rio__url_cleanup(&u);

    strcat(s, "one=more");
    T_ERR(rio__url_parse(s, &u), RIO_EURL);
}

TEST(url_alloc_failure)
{
    struct rio_url u;

    rio__alloc_fail_nth(1);
    T_ERR(rio__url_parse("mock://a?b=c", &u), -ENOMEM);
    T_NULL(u.buf);
    T_OK(rio__url_parse("mock://a?b=c", &u));
    rio__url_cleanup(&u);
    rio__url_cleanup(&u); /* twice is harmless */
}

/* What parse (named name) makes of s; fails the test on an error. */
static uint64_t parsed(int (*parse)(const char *, uint64_t *), const char *name, const char *s)
{
    uint64_t v = 0xdeadbeef;
    int ret = parse(s, &v);

    if (ret < 0)
        T_FAIL("%s(\"%s\") = %d", name, s, ret);
    return v;
}
#define size_of(s) parsed(rio__parse_size, "rio__parse_size", (s))
#define dur_of(s) parsed(rio__parse_duration_ns, "rio__parse_duration_ns", (s))

TEST(size_suffixes)
{
    T_EQ(size_of("0"), 0);
    T_EQ(size_of("4096"), 4096);
    T_EQ(size_of("4096B"), 4096);
    T_EQ(size_of("4K"), 4096);
    T_EQ(size_of("4k"), 4096);
    T_EQ(size_of("4KiB"), 4096);
    T_EQ(size_of("4Ki"), 4096);
    T_EQ(size_of("4KB"), 4000);
    T_EQ(size_of("4M"), 4u << 20);
    T_EQ(size_of("4MiB"), 4u << 20);
    T_EQ(size_of("4MB"), 4000000);
    T_EQ(size_of("125M"), 125ull << 20);
    T_EQ(size_of("125MB"), 125000000);
    T_EQ(size_of("2G"), 2ull << 30);
    T_EQ(size_of("2GB"), 2000000000ull);
    T_EQ(size_of("3T"), 3ull << 40);
    T_EQ(size_of("3TB"), 3000000000000ull);
    T_EQ(size_of("1.5K"), 1536);
    T_EQ(size_of("1.5M"), 3ull << 19);
    T_EQ(size_of("0.5GiB"), 1ull << 29);
    T_EQ(size_of("1.1K"), 1126); /* 1126.4, rounded down */
    T_EQ(size_of("18446744073709551615"), UINT64_MAX);
    T_EQ(size_of("16777215T"), 16777215ull << 40);
}

/* Every string in bad is refused with RIO_EINVAL and leaves the output as it
 * was; a failure names the parser and the string. */
static void expect_rejects(const char *fname, int (*parse)(const char *, uint64_t *),
                           const char *const *bad, size_t nbad)
{
    for (size_t i = 0; i < nbad; i++) {
        uint64_t v = 7;
        int ret = parse(bad[i], &v);
        if (ret != RIO_EINVAL)
            T_FAIL("%s(\"%s\") = %d, want RIO_EINVAL", fname, bad[i], ret);
        if (v != 7)
            T_FAIL("%s(\"%s\") wrote %" PRIu64 " on error", fname, bad[i], v);
    }
}

TEST(size_rejects)
{
    static const char *const bad[] = {
        "",
        "-1",
        "+1",
        " 1",
        "1 ",
        "1 K",
        "K",
        "1.",
        ".5",
        "1.5",
        "1..5K",
        "1X",
        "1KK",
        "1Kb2",
        "1KiBs",
        "0x10",
        "18446744073709551616",
        "16777216T",
        "17179869184G",
        "1e3",
    };
    uint64_t v = 7;

    expect_rejects("rio__parse_size", rio__parse_size, bad, sizeof(bad) / sizeof(bad[0]));
    T_ERR(rio__parse_size(NULL, &v), RIO_EINVAL);
    T_EQ(v, 7); /* untouched on error */
}

TEST(duration_units)
{
    T_EQ(dur_of("0"), 0);
    T_EQ(dur_of("250"), 250000000ull);
    T_EQ(dur_of("250ms"), 250000000ull);
    T_EQ(dur_of("100us"), 100000);
    T_EQ(dur_of("7ns"), 7);
    T_EQ(dur_of("2s"), 2000000000ull);
    T_EQ(dur_of("1.5s"), 1500000000ull);
    T_EQ(dur_of("0.5ms"), 500000);
    T_EQ(dur_of("2m"), 120000000000ull);
    T_EQ(dur_of("2min"), 120000000000ull);
    T_EQ(dur_of("1h"), 3600000000000ull);
}

TEST(duration_rejects)
{
    static const char *const bad[] = {
        "",
        "-1",
        "ms",
        "1 ms",
        "1.5ns",
        "1S",
        "1sec",
        "1d",
        "99999999999999999999",
        "18446744073709551615s",
    };
    expect_rejects("rio__parse_duration_ns", rio__parse_duration_ns, bad,
                   sizeof(bad) / sizeof(bad[0]));
}

TEST(parse_uint_digits_only)
{
    uint64_t v = 0;
    T_OK(rio__parse_uint("0", 10, &v));
    T_EQ(v, 0u);
    T_OK(rio__parse_uint("1024", 1024, &v));
    T_EQ(v, 1024u);
    T_ERR(rio__parse_uint("1025", 1024, &v), RIO_EINVAL);
    T_ERR(rio__parse_uint("-1", 10, &v), RIO_EINVAL);
    T_ERR(rio__parse_uint(" 1", 10, &v), RIO_EINVAL);
    T_ERR(rio__parse_uint("1x", 10, &v), RIO_EINVAL);
    T_ERR(rio__parse_uint("", 10, &v), RIO_EINVAL);
    T_ERR(rio__parse_uint(NULL, 10, &v), RIO_EINVAL);
    T_ERR(rio__parse_uint("99999999999999999999999", UINT64_MAX, &v), RIO_EINVAL);
}

TEST(parse_bool_one_syntax)
{
    static const char *const on[] = {"1", "on", "ON", "On", "true", "TRUE", "yes", "Yes"};
    static const char *const off[] = {"0", "off", "OFF", "false", "False", "no", "NO"};
    static const char *const bad[] = {"", "maybe", "2", "onn", " on", "on ", "y", "t"};
    bool b;
    size_t i;

    for (i = 0; i < sizeof(on) / sizeof(on[0]); i++) {
        b = false;
        T_OK(rio__parse_bool(on[i], &b));
        T_TRUE(b);
    }
    for (i = 0; i < sizeof(off) / sizeof(off[0]); i++) {
        b = true;
        T_OK(rio__parse_bool(off[i], &b));
        T_FALSE(b);
    }
    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        b = true;
        if (rio__parse_bool(bad[i], &b) != RIO_EINVAL)
            T_FAIL("rio__parse_bool(\"%s\") accepted", bad[i]);
        T_TRUE(b);
    }
    T_ERR(rio__parse_bool(NULL, &b), RIO_EINVAL);
}

TEST(parse_tristate_auto)
{
    int v = 7;
    T_OK(rio__parse_tristate("auto", "auto", &v));
    T_EQ(v, -1);
    T_OK(rio__parse_tristate("AUTO", "auto", &v));
    T_EQ(v, -1);
    T_OK(rio__parse_tristate("On", "auto", &v));
    T_EQ(v, 1);
    T_OK(rio__parse_tristate("no", "auto", &v));
    T_EQ(v, 0);
    v = 7;
    T_ERR(rio__parse_tristate("maybe", "auto", &v), RIO_EINVAL);
    T_ERR(rio__parse_tristate("auto", NULL, &v), RIO_EINVAL);
    T_EQ(v, 7);
}

TEST(parse_ms_rounds_up)
{
    uint32_t ms = 0;
    T_OK(rio__parse_ms("250", &ms));
    T_EQ(ms, 250u);
    T_OK(rio__parse_ms("2s", &ms));
    T_EQ(ms, 2000u);
    T_OK(rio__parse_ms("1us", &ms));
    T_EQ(ms, 1u);
    T_OK(rio__parse_ms("0", &ms));
    T_EQ(ms, 0u);
    ms = 9;
    T_ERR(rio__parse_ms("4294967295", &ms), RIO_EINVAL);
    T_ERR(rio__parse_ms("1x", &ms), RIO_EINVAL);
    T_EQ(ms, 9u);
}

/* A transport option refused names itself in rio_error_detail()
 * (keepalive=maybe), and not on stderr as well. */
static void refused_says(int (*call)(void), const char *want)
{
    struct t_stderr cap;
    char got[256];

    t_stderr_begin(&cap);
    int ret = call();
    t_stderr_end(&cap, got, sizeof(got));
    T_EQ(ret, RIO_EINVAL);
    if (!strncmp(want, "railio: ", 8))
        want += 8;
    if (!strstr(rio_error_detail(), want))
        T_FAIL("detail \"%s\" lacks \"%s\"", rio_error_detail(), want);
    if (strstr(got, want))
        T_FAIL("stderr \"%s\" has \"%s\" too", got, want);
}

static int bad_keepalive(void)
{
    bool b = true;
    return rio__opt_bool("keepalive", "maybe", &b);
}

static int bad_direct(void)
{
    int v;
    return rio__opt_tristate("direct", "sometimes", "auto", &v);
}

static int bad_ttl(void)
{
    uint32_t ms;
    return rio__opt_ms("ttl", "soon", &ms);
}

TEST(opt_refusal_names_option)
{
    bool b = false;
    T_OK(rio__opt_bool("keepalive", "ON", &b));
    T_TRUE(b);
    refused_says(bad_keepalive, "railio: keepalive=maybe: expected on or off");
    refused_says(bad_direct, "railio: direct=sometimes: expected on, off or auto");
    refused_says(bad_ttl, "railio: ttl=soon: expected a duration");
}

static int bad_conns(void)
{
    uint64_t v = 7;
    return rio__opt_uint("conns", "0", 1, 16, &v);
}

static int bad_queues(void)
{
    uint64_t v = 7;
    return rio__opt_uint("queues", "2x", 1, 64, &v);
}

/* rio__opt_uint: digits only, the range, *out untouched on a refusal. */
TEST(opt_uint_range_and_refusal)
{
    uint64_t v = 7;

    T_OK(rio__opt_uint("conns", "16", 1, 16, &v));
    T_EQ(v, 16u);
    v = 7;
    T_ERR(rio__opt_uint("conns", "17", 1, 16, &v), RIO_EINVAL);
    T_ERR(rio__opt_uint("conns", "0", 1, 16, &v), RIO_EINVAL);
    T_ERR(rio__opt_uint("conns", "-1", 0, 16, &v), RIO_EINVAL);
    T_ERR(rio__opt_uint("conns", "1K", 0, 4096, &v), RIO_EINVAL);
    T_ERR(rio__opt_uint("conns", "99999999999999999999", 0, UINT64_MAX, &v), RIO_EINVAL);
    T_ERR(rio__opt_uint("conns", NULL, 0, 16, &v), RIO_EINVAL);
    T_EQ(v, 7u);
    refused_says(bad_conns, "railio: conns=0: expected a whole number from 1 to 16");
    refused_says(bad_queues, "railio: queues=2x: expected a whole number from 1 to 64");
}

static int bad_size_word(void)
{
    uint64_t v = 7;
    return rio__opt_size("max_object", "lots", 1, UINT64_MAX, 0, &v);
}

static int bad_size_range(void)
{
    uint64_t v = 7;
    return rio__opt_size("bufsize", "100", 1024, 524288, RIO_OPT_SIZE_ZERO, &v);
}

static int bad_size_over(void)
{
    uint64_t v = 7;
    return rio__opt_size("rcvbuf", "2G", 0, 1u << 30, 0, &v);
}

static int bad_size_step(void)
{
    uint64_t v = 7;
    return rio__opt_size("bounce", "5000", 0, 64u << 20, RIO_OPT_SIZE_4K, &v);
}

/* rio__opt_size: the range, 0 only when allowed, 4K steps, suffixes that
 * overflow refused, *out untouched on a refusal, and the refusal names the
 * option and the range. */
TEST(opt_size_range_and_refusal)
{
    uint64_t v = 7;

    T_OK(rio__opt_size("bufsize", "64K", 1024, 524288, RIO_OPT_SIZE_ZERO, &v));
    T_EQ(v, 65536u);
    T_OK(rio__opt_size("bufsize", "0", 1024, 524288, RIO_OPT_SIZE_ZERO, &v));
    T_EQ(v, 0u);
    T_OK(rio__opt_size("bufsize", "1024", 1024, 524288, 0, &v));
    T_EQ(v, 1024u);
    T_OK(rio__opt_size("bufsize", "512KiB", 1024, 524288, 0, &v));
    T_EQ(v, 524288u);
    v = 7;
    T_ERR(rio__opt_size("bufsize", "0", 1024, 524288, 0, &v), RIO_EINVAL);
    T_ERR(rio__opt_size("bufsize", "1023", 1024, 524288, RIO_OPT_SIZE_ZERO, &v), RIO_EINVAL);
    T_ERR(rio__opt_size("bufsize", "524289", 1024, 524288, RIO_OPT_SIZE_ZERO, &v), RIO_EINVAL);
    T_ERR(rio__opt_size("x", "16384P", 0, UINT64_MAX, 0, &v), RIO_EINVAL); /* 2^64 */
    T_ERR(rio__opt_size("x", "18446744073709551616", 0, UINT64_MAX, 0, &v), RIO_EINVAL);
    T_ERR(rio__opt_size("x", "1.5", 0, UINT64_MAX, 0, &v), RIO_EINVAL);
    T_ERR(rio__opt_size("x", "", 0, UINT64_MAX, 0, &v), RIO_EINVAL);
    T_ERR(rio__opt_size("x", NULL, 0, UINT64_MAX, 0, &v), RIO_EINVAL);
    T_EQ(v, 7u);
    T_OK(rio__opt_size("x", "16383P", 0, UINT64_MAX, 0, &v));
    T_EQ(v, 16383ull << 50);
    T_OK(rio__opt_size("bounce", "8K", 0, 64u << 20, RIO_OPT_SIZE_4K, &v));
    T_EQ(v, 8192u);
    T_OK(rio__opt_size("bounce", "0", 0, 64u << 20, RIO_OPT_SIZE_4K, &v));
    T_EQ(v, 0u);
    refused_says(bad_size_word,
                 "railio: max_object=lots: expected a size (e.g. 64K, 1M) from 1 to ");
    refused_says(bad_size_range,
                 "railio: bufsize=100: expected 0 or a size (e.g. 64K, 1M) from 1024 to 524288");
    refused_says(bad_size_over,
                 "railio: rcvbuf=2G: expected a size (e.g. 64K, 1M) up to 1073741824");
    refused_says(bad_size_step,
                 "railio: bounce=5000: expected a size (e.g. 64K, 1M) in steps of 4096");
}

/* The hex of list tokens (rados:// and the gateway's): a round trip of
 * every byte but NUL; odd lengths, upper case, non-digits and an encoded
 * NUL refused. */
TEST(hex_encode_decode)
{
    char s[256], hex[2 * 255 + 1], back[256];

    for (int i = 0; i < 255; i++)
        s[i] = (char)(i + 1);
    s[255] = '\0';
    rio__hex_encode(s, 255, hex);
    T_EQ(strlen(hex), 510u);
    T_EQ(memcmp(hex, "0102030405", 10), 0);
    T_EQ(rio__hex_decode_str(hex, 510, back), 0);
    T_STREQ(back, s);
    T_EQ(rio__hex_decode_str("", 0, back), 0);
    T_STREQ(back, "");
    T_EQ(rio__hex_decode_str("616", 3, back), -1);
    T_EQ(rio__hex_decode_str("6A", 2, back), -1);
    T_EQ(rio__hex_decode_str("6g", 2, back), -1);
    T_EQ(rio__hex_decode_str("6100", 4, back), -1);
    T_EQ(rio__hex_decode_str("61 2", 4, back), -1);
    T_EQ(rio__hex_decode_str("6162", 4, back), 0);
    T_STREQ(back, "ab");
}
