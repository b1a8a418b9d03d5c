/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Invariant 9: every descriptor a transport returns is checked once by the
 * engine before anything is sized from it. The mock plays a hostile server
 * (rio_mock_desc_set): the HEAD of issue 13 item 1 (Content-Length 2^64 - 1,
 * a chunk of 2^63) and its cousins fail each call with RIO_EPROTO, allocate
 * nothing from the bad geometry and leave the client idle.
 */
#include "engine_util.h"

static struct rio_desc good_desc(const char *key)
{
    struct rio_desc d;
    memset(&d, 0, sizeof(d));
    snprintf(d.key, sizeof(d.key), "%s", key);
    d.generation = 7;
    d.size = 10 * EU_MIB + 1;
    d.chunk_size = 4 * EU_MIB;
    d.nchunks = 3;
    return d;
}

static void why_has(const struct rio_desc *d, const char *key, const char *field)
{
    char why[192];
    T_ERR(rio__desc_check(d, key, why, sizeof(why)), RIO_EPROTO);
    if (!strstr(why, field))
        T_FAIL("why \"%s\" does not name \"%s\"", why, field);
}

TEST(check_names_the_field)
{
    struct rio_desc d = good_desc("k");
    char why[192];

    T_OK(rio__desc_check(&d, "k", why, sizeof(why)));
    T_STREQ(why, "");
    d.size = UINT64_MAX;
    why_has(&d, "k", "size");
    d = good_desc("k");
    d.chunk_size = 9223372036854775808ull;
    why_has(&d, "k", "chunk_size 9223372036854775808 out of range");
    d.chunk_size = 1;
    why_has(&d, "k", "chunk_size 1 out of range");
    d = good_desc("k");
    d.nchunks = 2;
    why_has(&d, "k", "nchunks 2 inconsistent");
    d.nchunks = UINT64_MAX;
    why_has(&d, "k", "nchunks");
    d = good_desc("k");
    d.chunk_size = 0;
    why_has(&d, "k", "nchunks 3 without a chunk_size");
    d.nchunks = 0;
    T_OK(rio__desc_check(&d, "k", NULL, 0)); /* no geometry kept: fine */
    d = good_desc("k");
    d.size = (uint64_t)INT64_MAX;
    d.chunk_size = RIO__DESC_CHUNK_MIN;
    d.nchunks = ((uint64_t)INT64_MAX - 1) / RIO__DESC_CHUNK_MIN + 1;
    why_has(&d, "k", "nchunks");
    d = good_desc("k");
    memcpy(d.etag, "0123456789abcdef0123456789abcdeZ", 33);
    why_has(&d, "k", "etag");
    memset(d.etag, 'a', sizeof(d.etag)); /* not terminated */
    why_has(&d, "k", "etag");
    d = good_desc("k");
    memcpy(d.etag, "0123456789abcdef0123456789abcdef", 33);
    T_OK(rio__desc_check(&d, "k", why, sizeof(why)));
    why_has(&d, "other", "key");
    memset(d.key, 'k', sizeof(d.key));
    why_has(&d, NULL, "key");
    d = good_desc("k");
    d.size = 0;
    d.nchunks = 0;
    T_OK(rio__desc_check(&d, "k", NULL, 0));
}

/* Every call that looks an object up refuses the forged descriptor. */
static void refused_everywhere(struct rio_client *c, const char *key)
{
    uint8_t buf[4096];
    struct rio_desc d;
    struct rio_reader *rd = NULL;
    void *p = NULL;

    T_ERR(rio_get(c, key, buf, sizeof(buf), NULL), RIO_EPROTO);
    struct rio_call atomic = {.flags = RIO_ATOMIC};
    T_ERR(rio_get(c, key, buf, sizeof(buf), &atomic), RIO_EPROTO);
    T_ERR(rio_stat(c, key, &d), RIO_EPROTO);
    T_NULL(d.xxh);
    T_ERR(rio_get_alloc(c, key, &p, NULL), RIO_EPROTO);
    T_NULL(p);
    T_ERR(rio_reader_open(c, key, 4, NULL, &rd), RIO_EPROTO);
    T_NULL(rd);
    T_ERR(rio_reader_open(c, key, 0, NULL, &rd), RIO_EPROTO);
    struct rio_op ops[2] = {{.type = RIO_OP_GET, .key = key, .buf = buf, .len = sizeof(buf)},
                            {.type = RIO_OP_GET, .key = key, .buf = buf, .len = sizeof(buf)}};
    T_EQ(rio_batch(c, ops, 2, NULL), 0);
    T_ERR(ops[0].result, RIO_EPROTO);
    T_ERR(ops[1].result, RIO_EPROTO);
}

TEST(hostile_descriptors_refused)
{
    struct eu e;

    eu_start(&e, "mock://desc?paths=2");

    /* Issue 13 item 1: Content-Length 2^64 - 1, a chunk of 2^63. */
    struct rio_desc d = good_desc("obj");
    d.size = UINT64_MAX;
    d.chunk_size = 9223372036854775808ull;
    d.nchunks = 2;
    T_OK(rio_mock_desc_set(e.c, &d, 0));
    refused_everywhere(e.c, "obj");

    /* A size that fits, a chunk that wraps prefetch x chunk. */
    d = good_desc("obj");
    d.size = 1ull << 62;
    d.chunk_size = 1ull << 61;
    d.nchunks = 2;
    T_OK(rio_mock_desc_set(e.c, &d, 2));
    refused_everywhere(e.c, "obj");

    /* A tiny chunk: billions of chunks to keep books on. */
    d = good_desc("obj");
    d.size = 1ull << 50;
    d.chunk_size = 1;
    d.nchunks = 1ull << 50;
    T_OK(rio_mock_desc_set(e.c, &d, 0));
    refused_everywhere(e.c, "obj");

    /* A checksum list whose count contradicts the geometry. */
    d = good_desc("obj");
    d.nchunks = 1000;
    T_OK(rio_mock_desc_set(e.c, &d, 1000));
    refused_everywhere(e.c, "obj");

    /* A well-formed one passes. */
    struct rio_desc st;
    d = good_desc("obj");
    T_OK(rio_mock_desc_set(e.c, &d, 3));
    T_OK(rio_stat(e.c, "obj", &st)); /* a good forged one passes */
    T_EQ(st.nchunks, 3);
    rio_desc_cleanup(&st);

    T_OK(rio_mock_desc_set(e.c, NULL, 0));
    eu_idle(e.c);
    eu_close(&e);
}
