/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/server/s3/cors.c src/server/s3/xml.c src/core/alloc.c */
/*
 * libFuzzer target for a bucket's CORS configuration (src/server/s3/cors.c):
 * the body of a PutBucketCors, which any user of the bucket sends, and the
 * record read back from the backend, which anyone with write access to the
 * store can write. The first byte picks the mode (document or record), the
 * rest is the input. One the parser accepts must hold only what may be sent
 * back in a response header (origins and header names without a blank, a
 * comma or a control character; at most one '*' where one may be; 1 to 100
 * rules, each with an origin and a method), its written form must parse
 * back to the same document and its record to the same again, and the
 * headers of every rule, matched against origins made from the input, must
 * be single lines; the checks abort otherwise.
 * Seeds: tests/fuzz/corpus/s3cors/ and the built-in ones below.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "fuzz.h"
#include "railio.h"
#include "server/s3/cors.h"
#include "server/s3/gw.h"

#define CHECK FUZZ_CHECK

static void check_line(const char *v)
{
    for (; *v; v++)
        CHECK(*v != '\r' && *v != '\n' && *v != '\0');
}

static void check_value(const char *v, int star_ok)
{
    unsigned stars = 0;

    CHECK(v && *v);
    for (const char *q = v; *q; q++) {
        CHECK((unsigned char)*q > 0x20 && (unsigned char)*q < 0x7f && *q != ',');
        stars += *q == '*';
    }
    CHECK(stars <= (star_ok ? 1u : 0u));
}

static void add(void *arg, const char *name, const char *value)
{
    (void)arg;
    check_line(name);
    check_line(value);
}

static void check(const struct gw_cors *c)
{
    CHECK(c->n >= 1 && c->n <= GW_CORS_RULES_MAX);
    for (unsigned i = 0; i < c->n; i++) {
        const struct gw_cors_rule *r = &c->rules[i];
        CHECK(r->norigins >= 1 && r->methods && r->methods < 32);
        CHECK(!r->id || (strlen(r->id) >= 1 && strlen(r->id) <= GW_CORS_ID_MAX));
        for (unsigned k = 0; k < r->norigins; k++)
            check_value(r->origins[k], 1);
        for (unsigned k = 0; k < r->nheaders; k++)
            check_value(r->headers[k], 1);
        for (unsigned k = 0; k < r->nexpose; k++)
            check_value(r->expose[k], 0);
        CHECK(r->max_age >= -1 && r->max_age <= INT32_MAX);
        /* each rule lets its own origins in (a '*' matching itself) */
        for (unsigned k = 0; k < r->norigins; k++) {
            int m = rio__gw_cors_match(c, r->origins[k], "GET", NULL);
            CHECK(m >= -1 && m < (int)c->n);
            CHECK(rio__gw_cors_answer(c, (int)i, r->origins[k], "a, b", 1, add, NULL) == 0);
        }
    }
}

static void same_text(const struct gw_cors *a, const struct gw_cors *b)
{
    struct gw_buf x = {0}, y = {0};

    rio__gw_cors_xml(a, &x);
    rio__gw_cors_xml(b, &y);
    CHECK(!x.oom && !y.oom && x.len == y.len && memcmp(x.p, y.p, x.len) == 0);
    rio__gw_buf_free(&x);
    rio__gw_buf_free(&y);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct gw_cors *c = NULL, *c2 = NULL, *c3 = NULL;
    struct gw_buf b = {0}, rec = {0};
    const char *code = NULL, *text;
    char msg[160];
    size_t n;
    int ret;

    if (size < 1 || size > GW_CORS_DOC_MAX + 64)
        return 0;
    text = (const char *)data + 1;
    n = size - 1;
    if (data[0] & 1) {
        ret = rio__gw_cors_parse_record(text, n, &c);
        CHECK(ret == 0 || ret == RIO_EPROTO || ret == -ENOMEM);
    } else {
        ret = rio__gw_cors_parse(text, n, &c, &code, msg, sizeof(msg));
        CHECK(ret == 0 || ret == RIO_EINVAL || ret == -ENOMEM);
        if (ret == RIO_EINVAL) {
            CHECK(code && (!strcmp(code, "MalformedXML") || !strcmp(code, "InvalidRequest")));
            CHECK(memchr(msg, '\0', sizeof(msg)) != NULL);
        }
    }
    if (ret < 0) {
        CHECK(c == NULL);
        return 0;
    }
    check(c);
    /* an origin and headers taken from the input itself */
    {
        char o[64];
        size_t l = n < sizeof(o) - 1 ? n : sizeof(o) - 1;
        memcpy(o, text, l);
        o[l] = '\0';
        ret = rio__gw_cors_match(c, o, "PUT", o);
        CHECK(ret >= -1 && ret < (int)c->n);
    }
    rio__gw_cors_xml(c, &b);
    CHECK(!b.oom);
    CHECK(rio__gw_cors_parse(b.p, b.len, &c2, &code, msg, sizeof(msg)) == 0);
    same_text(c, c2);
    rio__gw_cors_record(c2, &rec);
    CHECK(!rec.oom);
    CHECK(rio__gw_cors_parse_record(rec.p, rec.len, &c3) == 0);
    same_text(c, c3);
    rio__gw_buf_free(&b);
    rio__gw_buf_free(&rec);
    rio__gw_cors_free(c);
    rio__gw_cors_free(c2);
    rio__gw_cors_free(c3);
    return 0;
}

void rio_fuzz_seeds(void (*run)(const uint8_t *data, size_t len))
{
    static const char *const seeds[] = {
        "0<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin>"
        "<AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>",
        "0<?xml version=\"1.0\"?><CORSConfiguration xmlns=\"x\"><CORSRule><ID>a&amp;b</ID>"
        "<AllowedOrigin>https://*.a.test</AllowedOrigin><AllowedMethod>PUT</AllowedMethod>"
        "<AllowedMethod>DELETE</AllowedMethod><AllowedHeader>x-amz-*</AllowedHeader>"
        "<ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>3000</MaxAgeSeconds></CORSRule>"
        "</CORSConfiguration>",
        "1railio-s3-cors 1\n<CORSConfiguration><CORSRule><AllowedOrigin>start*end"
        "</AllowedOrigin><AllowedMethod>HEAD</AllowedMethod></CORSRule></CORSConfiguration>",
        "0<CORSConfiguration><CORSRule><AllowedOrigin>a</AllowedOrigin><AllowedMethod>POST"
        "</AllowedMethod><CORSRule/></CORSRule></CORSConfiguration>",
    };

    for (size_t i = 0; i < sizeof(seeds) / sizeof(seeds[0]); i++)
        run((const uint8_t *)seeds[i], strlen(seeds[i]));
}
