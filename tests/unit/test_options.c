/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * What 0 means for the time limits (issue 13 item 2): deadline 0 is "no
 * deadline", op_timeout 0 is refused with the option's name, from the URL
 * and from the environment alike; and a bad option names itself.
 */
#include "core/engine.h"
#include "core/url.h"
#include "engine_util.h"

static int check(const char *url, struct rio_options *o, char *why, size_t cap)
{
    struct rio_url u;
    T_OK(rio__url_parse(url, &u));
    int ret = rio__options_check(NULL, &u, o, why, cap);
    rio__url_cleanup(&u);
    return ret;
}

static void refused(const char *url, const char *name, const char *env)
{
    struct rio_options o;
    char why[256];
    T_ERR(check(url, &o, why, sizeof(why)), RIO_EINVAL);
    if (!strstr(why, name) || !strstr(why, env))
        T_FAIL("%s: why \"%s\" names neither %s nor %s", url, why, name, env);
}

TEST(op_timeout_zero_refused)
{
    struct rio_options o;
    struct rio_client *c = NULL;

    refused("mock://o?op_timeout=0", "op_timeout", "RIO_OP_TIMEOUT_MS");
    refused("mock://o?op_timeout=0ms", "op_timeout", "RIO_OP_TIMEOUT_MS");
    eu_opts(&o);
    o.op_timeout_ms = 0; /* the struct's 0 is "default": the URL's 0 is refused */
    T_ERR(rio_client_new("mock://o?op_timeout=0", &o, &c), RIO_EINVAL);
    T_NULL(c);
    setenv("RIO_OP_TIMEOUT_MS", "0", 1);
    refused("mock://o", "op_timeout", "RIO_OP_TIMEOUT_MS");
    T_ERR(rio_client_new("mock://o", &o, &c), RIO_EINVAL);
    T_NULL(c);
    /* The struct field wins over the environment. */
    o.op_timeout_ms = 2000;
    T_OK(rio_client_new("mock://o", &o, &c));
    rio_client_destroy(c);
    unsetenv("RIO_OP_TIMEOUT_MS");
    char why[256];
    T_OK(check("mock://o?op_timeout=1ms", &o, why, sizeof(why)));
    T_EQ(o.op_timeout_ms, 1u);
    T_STREQ(why, "");
}

/* A whole PUT and GET through a client whose deadline is "none". */
static void moves(const char *url, const struct rio_call *call)
{
    struct eu e;
    struct rio_options o;
    uint8_t *src = eu_pattern_buf(EU_MIB, 3), *dst = malloc(EU_MIB);

    eu_opts(&o);
    o.deadline_ms = 0; /* the URL's or the environment's */
    eu_open(&e, url, &o);
    struct rio_options eff;
    rio_client_options(e.c, &eff);
    T_EQ(eff.deadline_ms, (uint32_t)RIO_DEADLINE_NONE);
    T_OK(rio_put(e.c, "k", src, EU_MIB, call, NULL));
    T_EQ(rio_get(e.c, "k", dst, EU_MIB, call), (int64_t)EU_MIB);
    T_PATTERN(dst, EU_MIB, 3);
    struct rio_reader *rd;
    T_OK(rio_reader_open(e.c, "k", 2, call, &rd));
    T_EQ(rio_reader_read(rd, dst, EU_MIB), (int64_t)EU_CHUNK);
    T_ERR(rio_reader_close(rd), RIO_ECANCELED);
    struct rio_writer *w;
    T_OK(rio_writer_open(e.c, "w", EU_MIB, 2, call, &w));
    T_OK(rio_writer_write(w, src, EU_MIB));
    T_OK(rio_writer_close(w, NULL));
    eu_idle(e.c);
    eu_close(&e);
    free(src);
    free(dst);
}

TEST(deadline_zero_is_none)
{
    struct rio_options o;
    char why[256];

    T_OK(check("mock://d?deadline=0", &o, why, sizeof(why)));
    T_EQ(o.deadline_ms, (uint32_t)RIO_DEADLINE_NONE);
    moves("mock://d?deadline=0", NULL);
    setenv("RIO_DEADLINE_MS", "0", 1);
    moves("mock://d2", NULL);
    unsetenv("RIO_DEADLINE_MS");
    /* A call's own "none" over a client deadline. */
    struct rio_call call = {.deadline_ms = RIO_DEADLINE_NONE};
    struct eu e;
    eu_opts(&o);
    eu_open(&e, "mock://d3", &o);
    uint8_t *src = eu_pattern_buf(EU_MIB, 4);
    T_OK(rio_put(e.c, "k", src, EU_MIB, &call, NULL));
    T_EQ(rio_get(e.c, "k", src, EU_MIB, &call), (int64_t)EU_MIB);
    free(src);
    eu_close(&e);
}

TEST(bad_option_named)
{
    refused("mock://b?deadline=soon", "deadline", "RIO_DEADLINE_MS");
    refused("mock://b?chunk=12", "chunk", "RIO_CHUNK_SIZE");
    refused("mock://b?verify=maybe", "verify", "RIO_VERIFY");
    refused("mock://b?depth=0", "depth", "RIO_DEPTH");
    refused("mock://b?budget_mode=yolo", "budget_mode", "RIO_BUDGET_MODE");
    refused("mock://b?etag=sha1", "etag", "RIO_ETAG");
    /* A cap set below the default base names the cap, the one set. */
    refused("mock://b?backoff_cap=0", "backoff_cap", "RIO_BACKOFF_CAP_MS");
    refused("mock://b?cooldown_cap=1ms", "cooldown_cap", "RIO_COOLDOWN_CAP_MS");
    refused("mock://b?backoff_base=1h", "backoff_base", "RIO_BACKOFF_BASE_MS");
}

/* Counts are whole numbers in their range: retries=1G was taken, and
 * the engine's 4 x retries for a throttled chunk wrapped (2^30 retries
 * failed at the first throttle); a size's "4K" or "1.0" is no count. */
TEST(counts_bounded_and_plain)
{
    struct rio_options o;
    char why[256];
    refused("mock://b?retries=1G", "retries", "RIO_RETRIES");
    refused("mock://b?retries=1073741824", "retries", "RIO_RETRIES");
    refused("mock://b?retries=1001", "retries", "RIO_RETRIES");
    refused("mock://b?retries=0", "retries", "RIO_RETRIES");
    refused("mock://b?depth=4K", "depth", "RIO_DEPTH");
    refused("mock://b?depth=1.0", "depth", "RIO_DEPTH");
    refused("mock://b?depth=1025", "depth", "RIO_DEPTH");
    refused("mock://b?paths=4M", "paths", "RIO_PATHS");
    refused("mock://b?paths=17", "paths", "RIO_PATHS");
    T_OK(check("mock://b?retries=1000&depth=1024&paths=16", &o, why, sizeof(why)));
    T_EQ(o.retry_attempts, 1000u);
    T_EQ(o.depth, 1024u);
    T_EQ(o.paths, 16u);
}

/* One boolean syntax everywhere: verify=ON and tls=Off were refused here
 * while sync=ON was accepted by file://; a bad one names itself. */
TEST(bools_any_case)
{
    struct rio_options o;
    char why[256];

    T_OK(check("mock://o?verify=ON&retry_checksum=No&tls=Off", &o, why, sizeof(why)));
    T_EQ(o.verify, 1);
    T_EQ(o.retry_checksum, -1);
    T_EQ(o.tls, -1);
    T_OK(check("mock://o?verify=false&tls=TRUE", &o, why, sizeof(why)));
    T_EQ(o.verify, -1);
    T_EQ(o.tls, 1);
    refused("mock://o?verify=maybe", "verify", "RIO_VERIFY");
    refused("mock://o?tls=2", "tls", "RIO_TLS");
}

/* adapt: on by default, off from the URL or the environment, the struct
 * first; a bad value names itself. */
TEST(adapt_option)
{
    struct rio_options o;
    char why[256];

    unsetenv("RIO_ADAPT");
    T_OK(check("mock://o", &o, why, sizeof(why)));
    T_EQ(o.adapt, 1); /* on unless asked off */
    T_OK(check("mock://o?adapt=ON", &o, why, sizeof(why)));
    T_EQ(o.adapt, 1);
    T_OK(check("mock://o?adapt=OFF", &o, why, sizeof(why)));
    T_EQ(o.adapt, -1);
    setenv("RIO_ADAPT", "yes", 1);
    T_OK(check("mock://o", &o, why, sizeof(why)));
    T_EQ(o.adapt, 1);
    setenv("RIO_ADAPT", "no", 1);
    T_OK(check("mock://o", &o, why, sizeof(why)));
    T_EQ(o.adapt, -1);
    T_OK(check("mock://o?adapt=on", &o, why, sizeof(why)));
    T_EQ(o.adapt, 1);
    unsetenv("RIO_ADAPT");
    refused("mock://o?adapt=sometimes", "adapt", "RIO_ADAPT");
    struct rio_options in;
    rio_options_init(&in);
    in.adapt = 3;
    struct rio_url u;
    T_OK(rio__url_parse("mock://o", &u));
    T_ERR(rio__options_check(&in, &u, &o, why, sizeof(why)), RIO_EINVAL);
    T_TRUE(strstr(why, "adapt") != NULL);
    rio__url_cleanup(&u);
}

/* verify and retry_checksum are 1 (on) or -1 (off) in the struct, as tls
 * and adapt are: any other value was taken as is (verify = 5 read back as
 * 5 from rio_client_options, an uninitialised struct accepted), where tls,
 * adapt and etag refuse theirs. */
TEST(struct_bools_refused)
{
    struct rio_options in, o;
    struct rio_url u;
    char why[256];
    static const int bad[] = {2, 5, -2, 0x7fffffff};

    unsetenv("RIO_VERIFY");
    unsetenv("RIO_RETRY_CHECKSUM");
    T_OK(rio__url_parse("mock://o", &u));
    for (unsigned i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        rio_options_init(&in);
        in.verify = bad[i];
        T_ERR(rio__options_check(&in, &u, &o, why, sizeof(why)), RIO_EINVAL);
        T_TRUE(strstr(why, "verify") != NULL);
        rio_options_init(&in);
        in.retry_checksum = bad[i];
        T_ERR(rio__options_check(&in, &u, &o, why, sizeof(why)), RIO_EINVAL);
        T_TRUE(strstr(why, "retry_checksum") != NULL);
    }
    rio_options_init(&in);
    in.verify = -1;
    in.retry_checksum = -1;
    T_OK(rio__options_check(&in, &u, &o, why, sizeof(why)));
    T_EQ(o.verify, -1);
    T_EQ(o.retry_checksum, -1);
    rio__url_cleanup(&u);
}

/* rio_options.reserved must be zero (railio.h, ABI rules): an options
 * struct never given to rio_options_init, whose other fields happened to
 * be valid, opened a client. */
TEST(reserved_refused)
{
    struct rio_options in, o;
    struct rio_url u;
    char why[256];

    T_OK(rio__url_parse("mock://o", &u));
    for (unsigned i = 0; i < sizeof(in.reserved) / sizeof(in.reserved[0]); i++) {
        rio_options_init(&in);
        in.reserved[i] = 1;
        T_ERR(rio__options_check(&in, &u, &o, why, sizeof(why)), RIO_EINVAL);
        T_TRUE(strstr(why, "reserved") != NULL);
    }
    rio_options_init(&in);
    T_OK(rio__options_check(&in, &u, &o, why, sizeof(why)));
    rio__url_cleanup(&u);
}
