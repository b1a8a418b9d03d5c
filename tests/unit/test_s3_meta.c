/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The S3 gateway's object metadata record (src/server/s3/metarec.c,
 * docs/gateway.md "Object metadata"): what a request may store (names
 * lower-cased and joined, the 2 KiB limit to the byte, control characters
 * refused), the record's exact text and its round trip, every way a record
 * read back is refused as a whole, and every allocation failure handled
 * without a leak.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"
#include "t.h"

static const char example[] = "railio-s3-meta 1\n"
                              "key data/logs/run%201.csv\n"
                              "size 12000000\n"
                              "generation 5f0c2b7e9d41a3c8\n"
                              "etag 3b5d3c7d207e37dceeedd301e35e2e58\n"
                              "s3-etag 70fe10dcfca09e53ba51ef0dc576f7e0-3\n"
                              "parts 5000000x2 2000000x1\n"
                              "checksum crc32c ZRkWlA==-3\n"
                              "header content-type text/csv\n"
                              "header cache-control no-store\n"
                              "meta owner alice\n"
                              "meta note 50%25%20done\n"
                              "end\n";

static struct gw_meta *example_meta(void)
{
    struct gw_meta *m = rio__gw_meta_new();

    T_NOTNULL(m);
    m->size = 12000000;
    m->generation = 0x5f0c2b7e9d41a3c8ull;
    snprintf(m->etag, sizeof(m->etag), "3b5d3c7d207e37dceeedd301e35e2e58");
    snprintf(m->s3etag, sizeof(m->s3etag), "70fe10dcfca09e53ba51ef0dc576f7e0-3");
    T_OK(rio__gw_meta_set_parts(m, (const uint64_t[]){5000000, 5000000, 2000000}, 3));
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_CACHE_CONTROL, "no-store"));
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_TYPE, "text/csv"));
    T_OK(rio__gw_meta_set_checksum(m, "CRC32C", "ZRkWlA==-3"));
    T_OK(rio__gw_meta_add_user(m, "Owner", "alice"));
    T_OK(rio__gw_meta_add_user(m, "note", "50% done"));
    return m;
}

TEST(encode_is_the_documented_text)
{
    struct gw_meta *m = example_meta(), *back = NULL;
    char *text = NULL, *key = NULL;
    size_t len = 0;

    T_OK(rio__gw_meta_encode(m, "data/logs/run 1.csv", &text, &len));
    T_EQ(len, strlen(example));
    T_STREQ(text, example);
    T_OK(rio__gw_meta_parse(text, len, &back, &key, NULL));
    T_STREQ(key, "data/logs/run 1.csv");
    T_EQ(back->size, 12000000u);
    T_EQ(back->generation, 0x5f0c2b7e9d41a3c8ull);
    T_STREQ(back->etag, m->etag);
    T_STREQ(back->s3etag, m->s3etag);
    T_EQ(back->nruns, 2u);
    T_STREQ(back->ck_algo, "crc32c");
    T_STREQ(back->ck_value, "ZRkWlA==-3");
    T_STREQ(back->hdr[GW_MH_CONTENT_TYPE], "text/csv");
    T_STREQ(back->hdr[GW_MH_CACHE_CONTROL], "no-store");
    T_NULL(back->hdr[GW_MH_EXPIRES]);
    T_EQ(back->nuser, 2u);
    T_STREQ(back->user[0].name, "owner");
    T_STREQ(back->user[1].value, "50% done");
    T_EQ(back->user_bytes, m->user_bytes);
    rio__free(text);
    rio__free(key);
    rio__gw_meta_free(back);
    rio__gw_meta_free(m);
    T_EQ(rio__alloc_outstanding(), 0);
}

TEST(unknown_identity_and_no_etag)
{
    struct gw_meta *m = rio__gw_meta_new(), *back = NULL;
    char *text = NULL;
    size_t len = 0;

    T_NOTNULL(m);
    T_OK(rio__gw_meta_encode(m, "b/k", &text, &len));
    T_STREQ(text, "railio-s3-meta 1\nkey b/k\nsize 0\ngeneration -\netag -\ns3-etag -\nend\n");
    T_OK(rio__gw_meta_parse(text, len, &back, NULL, NULL));
    T_EQ(back->generation, 0u);
    T_STREQ(back->etag, "");
    T_STREQ(back->s3etag, "");
    rio__free(text);
    rio__gw_meta_free(back);
    rio__gw_meta_free(m);
}

TEST(user_metadata_limits)
{
    struct gw_meta *m = rio__gw_meta_new();
    char v[GW_META_USER_MAX + 2];

    T_NOTNULL(m);
    /* The same name twice: both values, joined as HTTP does, counted once more. */
    T_OK(rio__gw_meta_add_user(m, "Color", "blue"));
    T_OK(rio__gw_meta_add_user(m, "COLOR", "red"));
    T_EQ(m->nuser, 1u);
    T_STREQ(m->user[0].name, "color");
    T_STREQ(m->user[0].value, "blue,red");
    T_EQ(m->user_bytes, 5u + 8u);
    /* Up to 2048 bytes of names and values, not one more. */
    memset(v, 'v', sizeof(v));
    v[GW_META_USER_MAX - 13 - 1] = '\0'; /* "x" + this = 2048 in all */
    T_OK(rio__gw_meta_add_user(m, "x", v));
    T_EQ(m->user_bytes, (size_t)GW_META_USER_MAX);
    T_ERR(rio__gw_meta_add_user(m, "y", ""), GW_META_ETOOLARGE);
    T_ERR(rio__gw_meta_add_user(m, "color", "g"), GW_META_ETOOLARGE);
    v[GW_META_USER_MAX + 1] = '\0';
    T_ERR(rio__gw_meta_add_user(m, "z", v), GW_META_ETOOLARGE);
    T_EQ(m->user_bytes, (size_t)GW_META_USER_MAX);
    rio__gw_meta_free(m);

    m = rio__gw_meta_new();
    T_NOTNULL(m);
    /* Names are HTTP tokens; values have no control character but tab. */
    T_ERR(rio__gw_meta_add_user(m, "", "v"), GW_META_EBADVALUE);
    T_ERR(rio__gw_meta_add_user(m, "a b", "v"), GW_META_EBADVALUE);
    T_ERR(rio__gw_meta_add_user(m, "a:b", "v"), GW_META_EBADVALUE);
    T_ERR(rio__gw_meta_add_user(m, "a\xc3\xa9", "v"), GW_META_EBADVALUE);
    T_ERR(rio__gw_meta_add_user(m, "a", "x\r\nSet-Cookie: y"), GW_META_EBADVALUE);
    T_ERR(rio__gw_meta_add_user(m, "a", "x\ny"), GW_META_EBADVALUE);
    T_ERR(rio__gw_meta_add_user(m, "a", "x\x7fy"), GW_META_EBADVALUE);
    T_OK(rio__gw_meta_add_user(m, "a", "x\ty \xc3\xa9"));
    T_OK(rio__gw_meta_add_user(m, "b!#$%&'*+-.^_`|~9", ""));
    T_EQ(m->nuser, 2u);
    T_ERR(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_TYPE, "text/\x01"), GW_META_EBADVALUE);
    T_ERR(rio__gw_meta_set_hdr(m, GW_MH__COUNT, "x"), GW_META_EBADVALUE);
    memset(v, 'c', sizeof(v));
    v[GW_META_VALUE_MAX] = '\0';
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_DISPOSITION, v));
    v[GW_META_VALUE_MAX] = 'c';
    v[GW_META_VALUE_MAX + 1] = '\0';
    T_ERR(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_DISPOSITION, v), GW_META_EBADVALUE);
    rio__gw_meta_free(m);
    T_EQ(rio__alloc_outstanding(), 0);
}

TEST(defaults_need_no_record)
{
    struct gw_meta *m = rio__gw_meta_new();

    T_NOTNULL(m);
    T_TRUE(rio__gw_meta_is_default(NULL, "abc"));
    T_TRUE(rio__gw_meta_is_default(m, "abc"));
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_TYPE, GW_META_DEFAULT_TYPE));
    T_TRUE(rio__gw_meta_is_default(m, "abc"));
    snprintf(m->s3etag, sizeof(m->s3etag), "abc");
    T_TRUE(rio__gw_meta_is_default(m, "abc")); /* the backend's etag anyway */
    T_FALSE(rio__gw_meta_is_default(m, "abd"));
    m->s3etag[0] = '\0';
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_TYPE, "text/plain"));
    T_FALSE(rio__gw_meta_is_default(m, "abc"));
    rio__gw_meta_free(m);
    m = rio__gw_meta_new();
    T_NOTNULL(m);
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_EXPIRES, "0"));
    T_FALSE(rio__gw_meta_is_default(m, ""));
    rio__gw_meta_free(m);
    m = rio__gw_meta_new();
    T_NOTNULL(m);
    T_OK(rio__gw_meta_add_user(m, "a", ""));
    T_FALSE(rio__gw_meta_is_default(m, ""));
    rio__gw_meta_free(m);
}

/* The example with line `from` replaced by `to` ("" drops it). */
static char *edited(const char *from, const char *to)
{
    const char *at = strstr(example, from);
    char *s;

    T_NOTNULL(at);
    s = malloc(sizeof(example) + strlen(to));
    T_NOTNULL(s);
    snprintf(s, sizeof(example) + strlen(to), "%.*s%s%s", (int)(at - example), example, to,
             at + strlen(from));
    return s;
}

TEST(bad_records_refused_whole)
{
    static const struct {
        const char *from, *to;
    } bad[] = {
        {"railio-s3-meta 1\n", "railio-s3-meta 2\n"},
        {"railio-s3-meta 1\n", "railio-s3-meta 1 \n"},
        {"key data/logs/run%201.csv\n", ""},
        {"key data/logs/run%201.csv\n", "key \n"},
        {"key data/logs/run%201.csv\n", "key a b\n"},
        {"key data/logs/run%201.csv\n", "key a%00b\n"},
        {"key data/logs/run%201.csv\n", "key a%2\n"},
        {"key data/logs/run%201.csv\n", "key a%zz\n"},
        {"key data/logs/run%201.csv\n", "key a\xc3\xa9\n"},
        {"size 12000000\n", "size 012000000\n"},
        {"size 12000000\n", "size 18446744073709551616\n"},
        {"size 12000000\n", "size -1\n"},
        {"size 12000000\n", "size \n"},
        {"generation 5f0c2b7e9d41a3c8\n", "generation 0000000000000000\n"},
        {"generation 5f0c2b7e9d41a3c8\n", "generation 5F0C2B7E9D41A3C8\n"},
        {"generation 5f0c2b7e9d41a3c8\n", "generation 5f0c2b7e9d41a3c\n"},
        {"etag 3b5d3c7d207e37dceeedd301e35e2e58\n", "etag 3B5D\n"},
        {"etag 3b5d3c7d207e37dceeedd301e35e2e58\n",
         "etag 3b5d3c7d207e37dceeedd301e35e2e583b5d3c7d207e37dceeedd301e35e2e58\n"},
        {"s3-etag 70fe10dcfca09e53ba51ef0dc576f7e0-3\n", "s3-etag \"x\"\n"},
        {"s3-etag 70fe10dcfca09e53ba51ef0dc576f7e0-3\n", ""},
        {"parts 5000000x2 2000000x1\n", "parts 5000000x2 2000000x2\n"}, /* not the size */
        {"parts 5000000x2 2000000x1\n", "parts 5000000x1 5000000x1 2000000x1\n"},
        {"parts 5000000x2 2000000x1\n", "parts 5000000x2 2000000x1 \n"},
        {"parts 5000000x2 2000000x1\n", "parts 5000000x2  2000000x1\n"},
        {"parts 5000000x2 2000000x1\n", "parts 5000000x2 2000000x0 0x0\n"},
        {"parts 5000000x2 2000000x1\n", "parts 5000000x02 2000000x1\n"},
        {"parts 5000000x2 2000000x1\n", "parts 5000000*2 2000000x1\n"},
        {"parts 5000000x2 2000000x1\n", "parts \n"},
        {"parts 5000000x2 2000000x1\n", "parts 1200x10001\n"},
        {"parts 5000000x2 2000000x1\n", "parts 5000000x2 2000000x1\nparts 5000000x2 2000000x1\n"},
        {"parts 5000000x2 2000000x1\n", "parts 9223372036854775808x2 2000000x1\n"},
        {"parts 5000000x2 2000000x1\nchecksum crc32c ZRkWlA==-3\n",
         "checksum crc32c ZRkWlA==-3\nparts 5000000x2 2000000x1\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRkWlA=-3\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRkWlAA=\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRk.lA==\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRkWlA==-0\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRkWlA==-03\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRkWlA==-10001\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRkWlA==-\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRkWlA==-3x\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum CRC32C ZRkWlA==\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum md5 ZRkWlA==\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc64nvme AAAAAAAAAAA=-2\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c \n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c ZRkWlA== x\n"},
        {"checksum crc32c ZRkWlA==-3\n", "checksum crc32c -\nchecksum crc32c -\n"},
        {"header content-type text/csv\n", "header content-type text/csv\nheader content-type x\n"},
        {"header content-type text/csv\n", "header x-other text/csv\n"},
        {"header content-type text/csv\n", "header content-type text/%0Acsv\n"},
        {"header content-type text/csv\n", "header content-type\n"},
        {"meta owner alice\n", "meta Owner alice\n"},
        {"meta owner alice\n", "meta note again\n"},
        {"meta owner alice\n", "meta own%3Aer alice\n"},
        {"meta owner alice\n", "meta owner al%0Dice\n"},
        {"meta owner alice\n", "meta owner\n"},
        {"meta owner alice\n", "other owner alice\n"},
        {"end\n", ""},
        {"end\n", "end"},
        {"end\n", "end\n\n"},
        {"end\n", "end\nmeta a b\n"},
        {"end\n", "END\n"},
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *s = edited(bad[i].from, bad[i].to), *key = (char *)"x";
        struct gw_meta *m = (struct gw_meta *)1;
        const char *why = NULL;
        int ret = rio__gw_meta_parse(s, strlen(s), &m, &key, &why);
        if (ret != RIO_EPROTO)
            T_FAIL("record %zu (\"%s\" for \"%s\") parsed: %d", i, bad[i].to, bad[i].from, ret);
        T_NULL(m);
        T_NULL(key);
        T_NOTNULL(why);
        free(s);
    }
    /* 2049 bytes of user metadata in a record: refused. */
    {
        char *rec = malloc(8192), v[2100];
        struct gw_meta *m = NULL;
        memset(v, 'v', sizeof(v));
        v[2047] = '\0';
        snprintf(rec, 8192,
                 "railio-s3-meta 1\nkey b/k\nsize 0\ngeneration -\netag -\ns3-etag -\n"
                 "meta ab %s\nend\n",
                 v);
        T_ERR(rio__gw_meta_parse(rec, strlen(rec), &m, NULL, NULL), RIO_EPROTO);
        T_NULL(m);
        v[2046] = '\0';
        snprintf(rec, 8192,
                 "railio-s3-meta 1\nkey b/k\nsize 0\ngeneration -\netag -\ns3-etag -\n"
                 "meta ab %s\nend\n",
                 v);
        T_OK(rio__gw_meta_parse(rec, strlen(rec), &m, NULL, NULL));
        T_EQ(m->user_bytes, 2048u);
        rio__gw_meta_free(m);
        free(rec);
    }
    /* Longer than a record may be: refused before a byte is looked at. */
    {
        char *big = malloc(GW_META_REC_MAX + 1);
        struct gw_meta *m = NULL;
        memcpy(big, example, strlen(example));
        memset(big + strlen(example), 'x', GW_META_REC_MAX + 1 - strlen(example));
        T_ERR(rio__gw_meta_parse(big, GW_META_REC_MAX + 1, &m, NULL, NULL), RIO_EPROTO);
        T_NULL(m);
        free(big);
    }
    T_EQ(rio__alloc_outstanding(), 0);
}

/* An object's checksum: S3's algorithms, the base64 of their digest's
 * length, "-N" for a composite one; anything else leaves the record as it
 * was. A checksum makes a record needed. */
TEST(checksum_values)
{
    struct gw_meta *m = rio__gw_meta_new();

    T_NOTNULL(m);
    T_OK(rio__gw_meta_set_checksum(m, "sha256", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="));
    T_OK(rio__gw_meta_set_checksum(m, "sha1", "2jmj7l5rSw0yVb/vlWAYkK/YBwk=-10000"));
    T_OK(rio__gw_meta_set_checksum(m, "crc64nvme", "AAAAAAAAAAA="));
    T_OK(rio__gw_meta_set_checksum(m, "Crc32", "")); /* the algorithm alone */
    T_STREQ(m->ck_algo, "crc32");
    T_STREQ(m->ck_value, "");
    T_FALSE(rio__gw_meta_is_default(m, ""));
    T_TRUE(rio__gw_meta_bytes_only(m)); /* a checksum alone */
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_TYPE, GW_META_DEFAULT_TYPE));
    T_TRUE(rio__gw_meta_bytes_only(m));
    T_OK(rio__gw_meta_set_hdr(m, GW_MH_CONTENT_TYPE, "text/plain"));
    T_FALSE(rio__gw_meta_bytes_only(m));
    T_FALSE(rio__gw_meta_bytes_only(NULL));
    T_ERR(rio__gw_meta_set_checksum(m, "crc64nvme", "AAAAAAAAAAA=-2"), RIO_EINVAL);
    T_ERR(rio__gw_meta_set_checksum(m, "md5", "1B2M2Y8AsgTpgAmY7PhCfg=="), RIO_EINVAL);
    T_ERR(rio__gw_meta_set_checksum(m, "crc32", "AAAAAAA="), RIO_EINVAL); /* 5 bytes */
    T_ERR(rio__gw_meta_set_checksum(m, "sha256", "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU"),
          RIO_EINVAL);
    T_ERR(rio__gw_meta_set_checksum(m, "sha1", "2jmj7l5rSw0yVb/vlWAYkK/YBwk=-100000"), RIO_EINVAL);
    T_ERR(rio__gw_meta_set_checksum(m, "crc32", "AAAAAA==-1-2"), RIO_EINVAL);
    T_STREQ(m->ck_algo, "crc32");
    T_STREQ(m->ck_value, "");
    T_EQ(rio__gw_ck_len("CRC64NVME"), 8u);
    T_EQ(rio__gw_ck_len("crc3"), 0u);
    rio__gw_meta_free(m);
}

/* A multipart object's part sizes: kept as runs, found by number, bounded. */
TEST(parts_by_number)
{
    struct gw_meta *m = example_meta();
    uint64_t off = 1, len = 1, *sizes;
    unsigned count = 0;
    char *text = NULL;
    size_t tlen = 0;

    T_EQ(rio__gw_meta_part(m, 1, &off, &len, &count), 1);
    T_EQ(off, 0u);
    T_EQ(len, 5000000u);
    T_EQ(count, 3u);
    T_EQ(rio__gw_meta_part(m, 2, &off, &len, &count), 1);
    T_EQ(off, 5000000u);
    T_EQ(rio__gw_meta_part(m, 3, &off, &len, &count), 1);
    T_EQ(off, 10000000u);
    T_EQ(len, 2000000u);
    T_EQ(rio__gw_meta_part(m, 4, &off, &len, &count), 0);
    T_EQ(rio__gw_meta_part(m, 0, &off, &len, &count), 0);
    rio__gw_meta_free(m);
    m = rio__gw_meta_new();
    T_NOTNULL(m);
    T_EQ(rio__gw_meta_part(m, 1, &off, &len, &count), -1); /* none recorded */
    T_EQ(rio__gw_meta_part(NULL, 1, &off, &len, &count), -1);
    /* 10000 parts of one size: one run; 10001: refused. */
    sizes = calloc(GW_META_PARTS_MAX + 1, sizeof(*sizes));
    for (unsigned i = 0; i <= GW_META_PARTS_MAX; i++)
        sizes[i] = 5u << 20;
    T_ERR(rio__gw_meta_set_parts(m, sizes, GW_META_PARTS_MAX + 1), RIO_EINVAL);
    T_ERR(rio__gw_meta_set_parts(m, sizes, 0), RIO_EINVAL);
    T_OK(rio__gw_meta_set_parts(m, sizes, GW_META_PARTS_MAX));
    T_EQ(m->nruns, 1u);
    m->size = (uint64_t)GW_META_PARTS_MAX * (5u << 20);
    T_EQ(rio__gw_meta_part(m, GW_META_PARTS_MAX, &off, &len, &count), 1);
    T_EQ(off, m->size - (5u << 20));
    /* Every part of its own size: more runs than a record keeps, so none
     * is recorded (partNumber is then refused, never served wrong). */
    for (unsigned i = 0; i < GW_META_PARTS_MAX; i++)
        sizes[i] = (5u << 20) + i;
    T_ERR(rio__gw_meta_set_parts(m, sizes, GW_META_PARTS_MAX), RIO_EINVAL);
    T_EQ(m->nruns, 1u); /* unchanged */
    /* The most runs a record keeps still fit it, with room to spare. */
    for (unsigned i = 0; i < GW_META_RUNS_MAX; i++)
        sizes[i] = (5ull << 30) - i; /* 5 GiB parts: the longest numbers */
    T_OK(rio__gw_meta_set_parts(m, sizes, GW_META_RUNS_MAX));
    m->size = 0;
    for (unsigned i = 0; i < GW_META_RUNS_MAX; i++)
        m->size += sizes[i];
    T_OK(rio__gw_meta_encode(m, "b/k", &text, &tlen));
    T_TRUE(tlen < GW_META_REC_MAX / 2);
    {
        struct gw_meta *back = NULL;
        T_OK(rio__gw_meta_parse(text, tlen, &back, NULL, NULL));
        T_EQ(back->nruns, GW_META_RUNS_MAX);
        T_EQ(rio__gw_meta_part(back, GW_META_RUNS_MAX, &off, &len, &count), 1);
        T_EQ(off + len, m->size);
        rio__gw_meta_free(back);
    }
    rio__free(text);
    free(sizes);
    rio__gw_meta_free(m);
    T_EQ(rio__alloc_outstanding(), 0);
}

TEST(copy_content_leaves_identity)
{
    struct gw_meta *src = example_meta(), *dst = rio__gw_meta_new();

    T_NOTNULL(dst);
    T_OK(rio__gw_meta_copy_content(dst, src));
    T_EQ(dst->size, 0u);
    T_STREQ(dst->s3etag, "");
    T_EQ(dst->nruns, 0u); /* a copy is not multipart */
    T_STREQ(dst->hdr[GW_MH_CONTENT_TYPE], "text/csv");
    T_EQ(dst->nuser, 2u);
    T_EQ(dst->user_bytes, src->user_bytes);
    rio__gw_meta_free(dst);
    rio__gw_meta_free(src);
}

/* Tags: what S3 takes (count, lengths in characters, characters, "aws:",
 * keys once), the x-amz-tagging header's form, the Tagging document, and
 * the record: version 2 exactly when it holds tags, refused whole for any
 * tag S3 would not take. */
TEST(tags)
{
    struct gw_meta *m = rio__gw_meta_new(), *back = NULL;
    const char *why = NULL, *code = NULL;
    char key[600], *text = NULL, *k2 = NULL;
    size_t len = 0;
    static const struct {
        const char *key, *value;
        int ret;
    } add[] = {
        {"project", "railio", 0},
        {"a b+c-d=e.f_g:h/i@j", "", 0},
        {"\xc3\xbc\xe6\x97\xa5", "\xf0\x9f\x98\x80 ok", 0}, /* ü日, 😀: UTF-8 */
        {"", "x", RIO_EINVAL},
        {"aws:created", "x", RIO_EINVAL},
        {"AWS:x", "x", RIO_EINVAL},
        {"project", "again", RIO_EINVAL},
        {"a<b", "x", RIO_EINVAL},
        {"k", "a\tb", RIO_EINVAL},
        {"k", "a,b", RIO_EINVAL},
        {"k", "\xc3", RIO_EINVAL},     /* cut short */
        {"k", "\xc0\xaf", RIO_EINVAL}, /* overlong */
        {"k", "\xf8\x88\x80\x80\x80", RIO_EINVAL},
    };

    T_NOTNULL(m);
    for (size_t i = 0; i < sizeof(add) / sizeof(add[0]); i++) {
        int ret = rio__gw_meta_add_tag(m, add[i].key, add[i].value, &why);
        if (ret != add[i].ret)
            T_FAIL("tag %zu (%s): %d, not %d", i, add[i].key, ret, add[i].ret);
    }
    T_EQ(m->ntags, 3u);
    /* 128 characters of key (of two bytes each here), 256 of value */
    memset(key, 0, sizeof(key));
    for (int i = 0; i < 128; i++)
        memcpy(key + 2 * i, "\xc3\xa9", 2);
    T_OK(rio__gw_meta_add_tag(m, key, "", &why));
    memcpy(key + 256, "e", 2);
    T_ERR(rio__gw_meta_add_tag(m, key, "", &why), RIO_EINVAL);
    memset(key, 'v', 257);
    key[257] = '\0';
    T_ERR(rio__gw_meta_add_tag(m, "k", key, &why), RIO_EINVAL);
    key[256] = '\0';
    T_OK(rio__gw_meta_add_tag(m, "k", key, &why));
    for (int i = 0; m->ntags < GW_META_TAGS_MAX; i++) {
        char k[16];
        snprintf(k, sizeof(k), "t%d", i);
        T_OK(rio__gw_meta_add_tag(m, k, "1", &why));
    }
    T_ERR(rio__gw_meta_add_tag(m, "one-more", "1", &why), -E2BIG);
    T_STREQ(why, "Object tags cannot be greater than 10");
    {
        struct gw_meta *bm = rio__gw_meta_new(); /* a bucket's: 50 */
        T_NOTNULL(bm);
        bm->tags_max = GW_BUCKET_TAGS_MAX;
        for (int i = 0; i < 50; i++) {
            char k[16];
            snprintf(k, sizeof(k), "b%d", i);
            T_OK(rio__gw_meta_add_tag(bm, k, "v", &why));
        }
        T_ERR(rio__gw_meta_add_tag(bm, "b50", "v", &why), -E2BIG);
        T_STREQ(why, "Bucket tags cannot be greater than 50");
        rio__gw_meta_free(bm);
    }
    T_EQ(strcmp(rio__gw_tag_code(-E2BIG, why), "BadRequest"), 0);
    T_FALSE(rio__gw_meta_is_default(m, ""));

    /* the record: version 2, read back the same */
    m->size = 1;
    snprintf(m->etag, sizeof(m->etag), "00");
    T_OK(rio__gw_meta_encode(m, "b/k", &text, &len));
    T_EQ(strncmp(text, "railio-s3-meta 2\n", 17), 0);
    T_NOTNULL(strstr(text, "\ntag a%20b+c-d=e.f_g:h/i@j \n"));
    T_OK(rio__gw_meta_parse(text, len, &back, &k2, NULL));
    T_EQ(back->ntags, m->ntags);
    for (unsigned i = 0; i < m->ntags; i++) {
        T_STREQ(back->tags[i].name, m->tags[i].name);
        T_STREQ(back->tags[i].value, m->tags[i].value);
    }
    rio__gw_meta_free(back);
    rio__free(k2);
    rio__free(text);

    /* the header: URL-encoded pairs, '+' a blank; replaces what was */
    T_OK(rio__gw_meta_tags_from_query(m, "k1=v1&k%202=a+b&empty=&bare", &why));
    T_EQ(m->ntags, 4u);
    T_STREQ(m->tags[1].name, "k 2");
    T_STREQ(m->tags[1].value, "a b");
    T_STREQ(m->tags[2].value, "");
    T_STREQ(m->tags[3].name, "bare");
    T_OK(rio__gw_meta_tags_from_query(m, "", &why));
    T_EQ(m->ntags, 0u);
    T_ERR(rio__gw_meta_tags_from_query(m, "a=%zz", &why), RIO_EINVAL);
    T_EQ(strcmp(rio__gw_tag_code(RIO_EINVAL, why), "InvalidArgument"), 0);
    T_ERR(rio__gw_meta_tags_from_query(m, "a=%00", &why), RIO_EINVAL);
    T_ERR(rio__gw_meta_tags_from_query(m, "a=1&a=2", &why), RIO_EINVAL);
    T_EQ(strcmp(rio__gw_tag_code(RIO_EINVAL, why), "InvalidTag"), 0);
    T_ERR(rio__gw_meta_tags_from_query(m, "aws:x=1", &why), RIO_EINVAL);
    T_ERR(rio__gw_meta_tags_from_query(m, "a=1&b=2&c=3&d=4&e=5&f=6&g=7&h=8&i=9&j=10&k=11", &why),
          -E2BIG);
    T_EQ(m->ntags, 0u); /* a refused header leaves none */

    /* the document */
    {
        static const char good[] =
            "<?xml version=\"1.0\"?><Tagging xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
            "<TagSet><Tag><Key>a&#43;b</Key><Value>1</Value></Tag>"
            "<Tag><Value/><Key>empty</Key></Tag></TagSet></Tagging>";
        static const struct {
            const char *xml, *code;
        } bad[] = {
            {"<Tagging/>", "MalformedXML"},
            {"<Tagging><TagSet/><TagSet/></Tagging>", "MalformedXML"},
            {"<Tagging><TagSet><Tag><Key>a</Key></Tag></TagSet></Tagging>", "MalformedXML"},
            {"<Tagging><TagSet><Tag><Key>a</Key><Key>b</Key><Value/></Tag></TagSet></Tagging>",
             "MalformedXML"},
            {"<Tagging><TagSet><Tag><Key>a</Key><Value/><X/></Tag></TagSet></Tagging>",
             "MalformedXML"},
            {"<Tagging><TagSet><Tag><Key>a</Key><Value><b/></Value></Tag></TagSet></Tagging>",
             "MalformedXML"},
            {"<Tagging><TagSet>x</TagSet></Tagging>", "MalformedXML"},
            {"<Tags><TagSet/></Tags>", "MalformedXML"},
            {"<Tagging><TagSet><Tag><Key>aws:x</Key><Value/></Tag></TagSet></Tagging>",
             "InvalidTag"},
            {"<Tagging><TagSet><Tag><Key>a</Key><Value/></Tag><Tag><Key>a</Key><Value/></Tag>"
             "</TagSet></Tagging>",
             "InvalidTag"},
        };
        struct gw_buf b = {0};
        T_OK(rio__gw_tags_from_xml(good, strlen(good), m, &code, &why));
        T_EQ(m->ntags, 2u);
        T_STREQ(m->tags[0].name, "a+b");
        T_STREQ(m->tags[1].value, "");
        rio__gw_tags_xml(m, &b);
        T_NOTNULL(strstr(b.p, "<TagSet><Tag><Key>a+b</Key><Value>1</Value></Tag><Tag><Key>"
                              "empty</Key><Value></Value></Tag></TagSet>"));
        rio__gw_buf_free(&b);
        T_OK(rio__gw_tags_from_xml("<Tagging><TagSet/></Tagging>", 28, m, &code, &why));
        T_EQ(m->ntags, 0u);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            int ret = rio__gw_tags_from_xml(bad[i].xml, strlen(bad[i].xml), m, &code, &why);
            if (ret != RIO_EINVAL || strcmp(code, bad[i].code) != 0)
                T_FAIL("%s: %d %s", bad[i].xml, ret, code);
            T_EQ(m->ntags, 0u);
        }
        {
            char eleven[1024] = "<Tagging><TagSet>";
            for (int i = 0; i < 11; i++)
                snprintf(eleven + strlen(eleven), sizeof(eleven) - strlen(eleven),
                         "<Tag><Key>k%d</Key><Value>v</Value></Tag>", i);
            strcat(eleven, "</TagSet></Tagging>");
            T_ERR(rio__gw_tags_from_xml(eleven, strlen(eleven), m, &code, &why), RIO_EINVAL);
            T_STREQ(code, "BadRequest");
        }
    }
    rio__gw_meta_free(m);
}

/* Records with tags that S3 would not take, or tags where none may be. */
TEST(bad_tag_records_refused_whole)
{
    static const char *const bad[] = {
        "railio-s3-meta 1\nkey b/k\nsize 1\ngeneration -\netag -\ns3-etag -\ntag a 1\nend\n",
        "railio-s3-meta 2\nkey b/k\nsize 1\ngeneration -\netag -\ns3-etag -\nend\n",
        "railio-s3-meta 2\nkey b/k\nsize 1\ngeneration -\netag -\ns3-etag -\ntag aws:a 1\nend\n",
        ("railio-s3-meta 2\nkey b/k\nsize 1\ngeneration -\netag -\ns3-etag -\ntag a 1\ntag a 2\n"
         "end\n"),
        "railio-s3-meta 2\nkey b/k\nsize 1\ngeneration -\netag -\ns3-etag -\ntag a%3C 1\nend\n",
        "railio-s3-meta 2\nkey b/k\nsize 1\ngeneration -\netag -\ns3-etag -\ntag a\nend\n",
        "railio-s3-meta 2\nkey b/k\nsize 1\ngeneration -\netag -\ns3-etag -\ntag  1\nend\n",
    };
    char eleven[1024];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gw_meta *m = (void *)1;
        if (rio__gw_meta_parse(bad[i], strlen(bad[i]), &m, NULL, NULL) != RIO_EPROTO)
            T_FAIL("taken: %s", bad[i]);
        T_NULL(m);
    }
    snprintf(eleven, sizeof(eleven),
             "railio-s3-meta 2\nkey b/k\nsize 1\ngeneration -\netag -\ns3-etag -\n");
    for (int i = 0; i < 11; i++)
        snprintf(eleven + strlen(eleven), sizeof(eleven) - strlen(eleven), "tag k%d v\n", i);
    strcat(eleven, "end\n");
    {
        struct gw_meta *m = NULL;
        T_ERR(rio__gw_meta_parse(eleven, strlen(eleven), &m, NULL, NULL), RIO_EPROTO);
        /* ten are taken */
        char *last = strstr(eleven, "tag k10 v\n");
        memmove(last, last + 10, strlen(last + 10) + 1);
        T_OK(rio__gw_meta_parse(eleven, strlen(eleven), &m, NULL, NULL));
        T_EQ(m->ntags, 10u);
        rio__gw_meta_free(m);
    }
}

TEST(every_allocation_failure)
{
    int64_t before = rio__alloc_outstanding();
    int ok = 0;

    for (uint64_t n = 1; n < 200 && !ok; n++) {
        struct gw_meta *m = NULL, *src = NULL;
        char *text = NULL, *key = NULL;
        size_t len = 0;
        int ret;

        rio__alloc_fail_nth(n);
        ret = rio__gw_meta_parse(example, strlen(example), &m, &key, NULL);
        rio__alloc_fail_nth(0);
        if (ret < 0) {
            T_ERR(ret, -ENOMEM);
            T_NULL(m);
            T_NULL(key);
            T_EQ(rio__alloc_outstanding(), before);
            continue;
        }
        src = m;
        m = rio__gw_meta_new();
        T_NOTNULL(m);
        rio__alloc_fail_nth(n);
        ret = rio__gw_meta_copy_content(m, src);
        if (ret == 0)
            ret = rio__gw_meta_encode(m, key, &text, &len);
        rio__alloc_fail_nth(0);
        if (ret < 0)
            T_ERR(ret, -ENOMEM);
        else
            ok = 1;
        rio__free(text);
        rio__free(key);
        rio__gw_meta_free(m);
        rio__gw_meta_free(src);
        T_EQ(rio__alloc_outstanding(), before);
    }
    T_TRUE(ok);
}

TEST(every_allocation_failure_of_tags)
{
    static const char rec[] = "railio-s3-meta 2\nkey b/k\nsize 1\ngeneration -\netag -\n"
                              "s3-etag -\ntag a%20b 1\ntag c \nend\n";
    static const char doc[] =
        "<Tagging><TagSet><Tag><Key>k</Key><Value>v</Value></Tag></TagSet></Tagging>";
    int64_t before = rio__alloc_outstanding();
    int ok = 0;

    for (uint64_t n = 1; n < 100 && !ok; n++) {
        struct gw_meta *m = NULL, *d = NULL;
        const char *why = NULL, *code = NULL;
        int ret;

        rio__alloc_fail_nth(n);
        ret = rio__gw_meta_parse(rec, strlen(rec), &m, NULL, NULL);
        if (ret == 0)
            ret = rio__gw_meta_tags_from_query(m, "x=1&y=2", &why);
        if (ret == 0)
            ret = rio__gw_tags_from_xml(doc, strlen(doc), m, &code, &why);
        if (ret == 0)
            ret = (d = rio__gw_meta_dup(m)) ? 0 : -ENOMEM;
        rio__alloc_fail_nth(0);
        if (ret < 0) {
            T_ERR(ret, -ENOMEM);
        } else {
            T_EQ(d->ntags, 1u);
            ok = 1;
        }
        rio__gw_meta_free(m);
        rio__gw_meta_free(d);
        T_EQ(rio__alloc_outstanding(), before);
    }
    T_TRUE(ok);
}
