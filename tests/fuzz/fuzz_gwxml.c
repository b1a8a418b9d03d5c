/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/server/s3/xml.c src/server/s3/xmlenc.c src/server/s3/tagxml.c */
/* FUZZ_SOURCES src/server/s3/metarec.c src/core/alloc.c */
/*
 * libFuzzer target for the S3 gateway's request XML (src/server/s3/xml.c):
 * the bodies of DeleteObjects and CompleteMultipartUpload, which any client
 * with a key sends. The first byte picks the root the body must have (Delete,
 * CompleteMultipartUpload or Tagging), the rest is the body. rio__gw_xml_wellformed
 * must never read past the body; a body it accepts must still be accepted
 * with blanks after it and refused when cut before its last '>' (its root
 * would be left open), and its elements are then walked as the gateway walks
 * them (Object, Key, VersionId, Part), which must not read past an element.
 * A Tagging body is read as PutObjectTagging reads it: tags it takes are
 * at most 10, each one S3 takes, and their document reads back the same.
 * The same bytes are also parsed as a count (rio__gw_parse_count) and as
 * a date (rio__gw_parse_date: a DeleteObjects' LastModifiedTime, a
 * conditional delete's header), and checked as UTF-8 as a body or a key
 * is (rio__gw_utf8_valid_n). A body that declares ISO-8859-1 is read as
 * the gateway reads it, transcoded to UTF-8 (rio__gw_xml_utf8): UTF-8, no
 * more than twice as long, as well-formed as the bytes were. Seeds:
 * tests/fuzz/corpus/gwxml/ and the built-in ones below.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "fuzz.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"

#define CHECK FUZZ_CHECK

static int text_cb(void *arg, const char *text)
{
    (*(size_t *)arg) += strlen(text) + 1;
    return 0;
}

static int object_cb(void *arg, const char *raw, size_t len)
{
    size_t *total = arg;
    (void)rio__gw_xml_each(raw, len, "Key", text_cb, total);
    (void)rio__gw_xml_each(raw, len, "VersionId", text_cb, total);
    (void)rio__gw_xml_each(raw, len, "PartNumber", text_cb, total);
    (void)rio__gw_xml_each(raw, len, "ETag", text_cb, total);
    (void)rio__gw_xml_each(raw, len, "Size", text_cb, total);
    (void)rio__gw_xml_each(raw, len, "LastModifiedTime", text_cb, total);
    return 0;
}

static void tagging(const char *body, size_t n)
{
    struct gw_meta *m = rio__gw_meta_new(), *m2 = rio__gw_meta_new(), *m3 = rio__gw_meta_new();
    struct gw_buf b = {0};
    const char *code, *why;
    int ret;

    if (!m || !m2 || !m3)
        goto out;
    ret = rio__gw_tags_from_xml(body, n, m, &code, &why);
    CHECK(ret == 0 || ret == RIO_EINVAL || ret == -ENOMEM);
    if (ret < 0) {
        CHECK(m->ntags == 0);
        goto out;
    }
    CHECK(m->ntags <= GW_META_TAGS_MAX);
    for (unsigned i = 0; i < m->ntags; i++) /* each one S3 takes, keys once */
        CHECK(rio__gw_meta_add_tag(m3, m->tags[i].name, m->tags[i].value, &why) == 0);
    rio__gw_tags_xml(m, &b);
    CHECK(!b.oom);
    CHECK(rio__gw_tags_from_xml(b.p, b.len, m2, &code, &why) == 0 && m2->ntags == m->ntags);
    for (unsigned i = 0; i < m->ntags; i++)
        CHECK(!strcmp(m->tags[i].name, m2->tags[i].name) &&
              !strcmp(m->tags[i].value, m2->tags[i].value));
out:
    rio__gw_buf_free(&b);
    rio__gw_meta_free(m);
    rio__gw_meta_free(m2);
    rio__gw_meta_free(m3);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char *const roots[] = {"Delete", "CompleteMultipartUpload", "Tagging"};
    const char *root;
    char *body, *wide;
    size_t n, total = 0;

    if (size < 1 || size > 1 << 16)
        return 0;
    root = roots[data[0] % 3];
    n = size - 1;
    body = malloc(n + 1);
    wide = malloc(n + 4);
    if (!body || !wide) {
        free(body);
        free(wide);
        return 0;
    }
    memcpy(body, data + 1, n);
    body[n] = '\0';
    /* The same bytes as a count (rio__gw_parse_count: partNumber, max-parts,
     * x-amz-mp-object-size, ...): taken only when all digits, within max,
     * and then strtoull's value. */
    for (int i = 0; i < 2; i++) {
        uint64_t v = 0, max = i ? UINT64_MAX : 10000;
        size_t len = strlen(body); /* up to a NUL, as a header's value */
        if (rio__gw_parse_count(body, max, &v) == 0) {
            errno = 0;
            CHECK(len > 0 && strspn(body, "0123456789") == len && v <= max);
            CHECK(strtoull(body, NULL, 10) == v && errno == 0);
        } else if (len > 0 && len < 20 && strspn(body, "0123456789") == len) {
            CHECK(i == 0 && strtoull(body, NULL, 10) > max);
        }
    }
    /* As a date (an HTTP date or ISO 8601): it reads only up to the NUL. */
    (void)rio__gw_parse_date(body);
    /* The UTF-8 check of a body or key (rio__gw_utf8_valid_n, _valid):
     * never past n; cut where a character starts (not a continuation
     * byte), the bytes are UTF-8 exactly when both halves are; a key is
     * checked up to its NUL. */
    {
        const unsigned char *u = (const unsigned char *)body;
        int v = rio__gw_utf8_valid_n(body, n);
        size_t k = n / 2;
        while (k < n && (u[k] & 0xc0) == 0x80)
            k++;
        CHECK(v == (rio__gw_utf8_valid_n(body, k) && rio__gw_utf8_valid_n(body + k, n - k)));
        CHECK(rio__gw_utf8_valid(body) == rio__gw_utf8_valid_n(body, strlen(body)));
        if (v && !memchr(body, '\0', n))
            CHECK(rio__gw_utf8_valid(body));
    }
    /* As x-amz-object-attributes: a mask of the five names, each taken
     * only whole (so the names' letters alone never make one up). */
    {
        int mask = rio__gw_attr_mask(body);
        CHECK(mask >= -1 && mask < 32);
        if (mask > 0)
            CHECK(strspn(body, "ETagChecksumObjectPartsStorageClassSize, \t") == strlen(body));
        if (mask == 0)
            CHECK(strspn(body, ", \t") == strlen(body));
    }
    /* As the gateway takes a body: in UTF-8 by its declared encoding. */
    {
        char enc[GW_XML_ENC_MAX], *u;
        size_t ulen;
        int ret = rio__gw_xml_utf8(body, n, &u, &ulen, enc, sizeof(enc));
        CHECK(ret >= -1 || ret == -ENOMEM);
        CHECK(strlen(enc) < sizeof(enc));
        if (ret == 1) {
            CHECK(ulen > n && ulen <= 2 * n && u[ulen] == '\0');
            CHECK(rio__gw_utf8_valid_n(u, ulen));
            /* and back to Latin-1, byte for byte */
            size_t j = 0;
            for (size_t i = 0; i < ulen; j++) {
                unsigned char c = (unsigned char)u[i];
                CHECK(j < n && (c < 0x80 || c == 0xc2 || c == 0xc3));
                CHECK((unsigned char)body[j] ==
                      (c < 0x80 ? c : (c & 3u) << 6 | (u[i + 1] & 0x3fu)));
                i += c < 0x80 ? 1 : 2;
            }
            CHECK(j == n);
            (void)rio__gw_xml_wellformed(u, ulen, root);
            rio__free(u);
        } else {
            CHECK(u == NULL);
        }
    }
    if (rio__gw_xml_wellformed(body, n, root) == 0) {
        const char *last = NULL;
        CHECK(memchr(body, '\0', n) == NULL);
        CHECK(strstr(body, root) != NULL);
        memcpy(wide, body, n);
        memcpy(wide + n, " \n", 3);
        CHECK(rio__gw_xml_wellformed(wide, n + 2, root) == 0);
        for (size_t i = 0; i < n; i++)
            if (body[i] == '>')
                last = body + i;
        CHECK(last != NULL);
        CHECK(rio__gw_xml_wellformed(body, (size_t)(last - body), root) < 0);
        (void)rio__gw_xml_each_raw(body, n, "Object", object_cb, &total);
        (void)rio__gw_xml_each_raw(body, n, "Part", object_cb, &total);
    }
    if (data[0] % 3 == 2)
        tagging(body, n);
    free(body);
    free(wide);
    return 0;
}

void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len))
{
    static const char *const s[] = {
        ("\x00<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Delete "
         "xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\"><Object><Key>a&amp;b</Key></Object>"
         "<Object><Key>c</Key><VersionId>null</VersionId></Object><Quiet>true</Quiet></Delete>"),
        ("\x01<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>&quot;"
         "0123456789abcdef0123456789abcdef&quot;</ETag></Part></CompleteMultipartUpload>"),
        "\x00<Delete><Object><!-- <Key>hidden</Key> --><Key>x</Key></Object></Delete>",
        "\x01<CompleteMultipartUpload/>",
        "\x02<Tagging xmlns=\"x\"><TagSet><Tag><Key>a b</Key><Value>c:d</Value></Tag><Tag><Key>e"
        "</Key><Value/></Tag></TagSet></Tagging>",
        "\x02<Tagging><TagSet/></Tagging>",
        "\x00<Delete><Object><Key>unclosed</Key></Object>",
        "\x00<?xml version='1.0' encoding='ISO-8859-1'?><Delete><Object><Key>caf\xe9</Key>"
        "</Object></Delete>",
        "\x02<?xml version=\"1.0\" encoding=\"UTF-16\"?><Tagging><TagSet/></Tagging>",
        "\x01<CompleteMultipartUpload><Part></CompleteMultipartUploadXX>",
        "\x00"
        "10000",
        "\x00"
        "10001",
        "\x00"
        "18446744073709551615",
        "\x00"
        "18446744073709551616",
        "\x00"
        "+5",
    };
    for (size_t i = 0; i < sizeof(s) / sizeof(s[0]); i++)
        run((const uint8_t *)s[i], 1 + strlen(s[i] + 1));
}
