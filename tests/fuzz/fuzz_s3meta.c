/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/server/s3/metarec.c src/core/alloc.c */
/*
 * libFuzzer target for the S3 gateway's object metadata record
 * (src/server/s3/metarec.c), the text a GET, a HEAD, a listing or a
 * CompleteMultipartUpload reads back from the backend: anyone with write
 * access to the store can put any bytes there. The input is the record. One
 * the parser accepts must hold only what the gateway would have stored (its
 * key within RIO_KEY_MAX, every value without a control character, user
 * metadata within 2 KiB, lower-case names each once, etags short and
 * terminated, at most 10 tags S3 takes), and the writer's text for it (rio__gw_meta_encode) parses
 * back to the same record; the checks abort otherwise.
 * Seeds: tests/fuzz/corpus/s3meta/.
 */
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "fuzz.h"
#include "railio.h"
#include "server/s3/meta.h"

#define CHECK FUZZ_CHECK

static void check_value(const char *v, size_t max)
{
    CHECK(v != NULL);
    CHECK(strlen(v) <= max);
    CHECK(rio__gw_meta_valid_value(v, max));
}

static void check(const struct gw_meta *m, const char *key)
{
    size_t ub = 0;

    CHECK(key && *key && strlen(key) <= RIO_KEY_MAX);
    CHECK(strnlen(m->etag, sizeof(m->etag)) < sizeof(m->etag));
    CHECK(strnlen(m->s3etag, sizeof(m->s3etag)) < sizeof(m->s3etag));
    for (int i = 0; i < GW_MH__COUNT; i++)
        if (m->hdr[i])
            check_value(m->hdr[i], GW_META_VALUE_MAX);
    CHECK(m->nuser <= m->capuser);
    for (unsigned i = 0; i < m->nuser; i++) {
        const char *n = m->user[i].name;
        check_value(m->user[i].value, GW_META_USER_MAX);
        CHECK(n && *n);
        for (const char *q = n; *q; q++)
            CHECK(!(*q >= 'A' && *q <= 'Z') && (unsigned char)*q > 0x20 && *q != 0x7f);
        for (unsigned j = 0; j < i; j++)
            CHECK(strcmp(m->user[j].name, n) != 0);
        ub += strlen(n) + strlen(m->user[i].value);
    }
    CHECK(ub == m->user_bytes && ub <= GW_META_USER_MAX);
    /* Tags: at most 10, each one S3 takes, keys once */
    CHECK(m->ntags <= GW_META_TAGS_MAX);
    {
        struct gw_meta *t = rio__gw_meta_new();
        const char *why;
        for (unsigned i = 0; t && i < m->ntags; i++)
            CHECK(rio__gw_meta_add_tag(t, m->tags[i].name, m->tags[i].value, &why) == 0);
        rio__gw_meta_free(t);
    }
    /* Part sizes: runs of different sizes, within the bounds, summing to
     * the object's size; every part found where the runs put it. */
    {
        uint64_t sum = 0, off = 0, len = 0;
        unsigned parts = 0, count = 0;
        CHECK(m->nruns <= GW_META_RUNS_MAX && (m->nruns == 0) == (m->runs == NULL));
        for (unsigned i = 0; i < m->nruns; i++) {
            CHECK(m->runs[i].count >= 1 && (i == 0 || m->runs[i].size != m->runs[i - 1].size));
            parts += m->runs[i].count;
            CHECK(parts <= GW_META_PARTS_MAX);
            sum += (uint64_t)m->runs[i].count * m->runs[i].size;
        }
        CHECK(m->nruns == 0 || sum == m->size);
        if (m->nruns) {
            CHECK(rio__gw_meta_part(m, parts, &off, &len, &count) == 1 && count == parts);
            CHECK(off + len == m->size);
            CHECK(rio__gw_meta_part(m, parts + 1, &off, &len, &count) == 0);
        }
    }
}

static int same(const struct gw_meta *a, const struct gw_meta *b)
{
    if (a->size != b->size || a->generation != b->generation || strcmp(a->etag, b->etag) ||
        strcmp(a->s3etag, b->s3etag) || a->nuser != b->nuser)
        return 0;
    if (a->nruns != b->nruns ||
        (a->nruns && memcmp(a->runs, b->runs, a->nruns * sizeof(*a->runs)) != 0))
        return 0;
    for (int i = 0; i < GW_MH__COUNT; i++)
        if (!a->hdr[i] != !b->hdr[i] || (a->hdr[i] && strcmp(a->hdr[i], b->hdr[i])))
            return 0;
    for (unsigned i = 0; i < a->nuser; i++)
        if (strcmp(a->user[i].name, b->user[i].name) || strcmp(a->user[i].value, b->user[i].value))
            return 0;
    if (a->ntags != b->ntags)
        return 0;
    for (unsigned i = 0; i < a->ntags; i++)
        if (strcmp(a->tags[i].name, b->tags[i].name) || strcmp(a->tags[i].value, b->tags[i].value))
            return 0;
    return 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_meta *m = NULL, *m2 = NULL;
    char *key = NULL, *key2 = NULL, *text = NULL;
    const char *why = NULL;
    size_t len = 0;
    int ret;

    ret = rio__gw_meta_parse((const char *)data, size, &m, &key, &why);
    if (ret < 0) {
        CHECK(m == NULL && key == NULL);
        CHECK(ret == RIO_EPROTO || ret == -ENOMEM);
        return 0;
    }
    check(m, key);
    /* The writer's text of it is a record, and reads back the same. */
    CHECK(rio__gw_meta_encode(m, key, &text, &len) == 0);
    CHECK(len <= GW_META_REC_MAX && strlen(text) == len);
    CHECK(rio__gw_meta_parse(text, len, &m2, &key2, &why) == 0);
    CHECK(strcmp(key, key2) == 0 && same(m, m2));
    rio__free(text);
    rio__free(key);
    rio__free(key2);
    rio__gw_meta_free(m);
    rio__gw_meta_free(m2);
    return 0;
}
