/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * A bucket's CORS configuration (src/server/s3/cors.c, docs/gateway.md
 * "Browsers and CORS"): the document parsed and written back as one fixed
 * point, each refusal with S3's code, the record kept on the backend and
 * every way one read back is refused, the matching of origins, methods and
 * requested headers (the patterns of Ceph's s3-tests CORS cases), the
 * headers a match answers, and every allocation failure handled without a
 * leak.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/cors.h"
#include "server/s3/gw.h"
#include "t.h"

static const char doc[] =
    "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
    "<CORSConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">\n"
    "  <CORSRule>\n"
    "    <ID>uploads &amp; reads</ID>\n"
    "    <AllowedOrigin>https://app.example.com</AllowedOrigin>\n"
    "    <AllowedOrigin>http://*.dev.test</AllowedOrigin>\n"
    "    <AllowedMethod>PUT</AllowedMethod><AllowedMethod>GET</AllowedMethod>\n"
    "    <AllowedHeader>content-type</AllowedHeader>\n"
    "    <AllowedHeader>x-amz-*</AllowedHeader>\n"
    "    <ExposeHeader>ETag</ExposeHeader><ExposeHeader>x-amz-request-id</ExposeHeader>\n"
    "    <MaxAgeSeconds>600</MaxAgeSeconds>\n"
    "  </CORSRule>\n"
    "  <CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
    "<AllowedMethod>HEAD</AllowedMethod></CORSRule>\n"
    "</CORSConfiguration>\n";

static struct gw_cors *parse_ok(const char *text)
{
    struct gw_cors *c = NULL;
    const char *code = NULL;
    char msg[160] = "";

    T_EQ(rio__gw_cors_parse(text, strlen(text), &c, &code, msg, sizeof(msg)), 0);
    T_NOTNULL(c);
    return c;
}

TEST(parse_and_write_back)
{
    struct gw_cors *c = parse_ok(doc), *again;
    struct gw_buf a = {0}, b = {0};

    T_EQ(c->n, 2u);
    T_STREQ(c->rules[0].id, "uploads & reads");
    T_EQ(c->rules[0].norigins, 2u);
    T_STREQ(c->rules[0].origins[1], "http://*.dev.test");
    T_EQ(c->rules[0].methods, (unsigned)(GW_CORS_GET | GW_CORS_PUT));
    T_EQ(c->rules[0].nheaders, 2u);
    T_EQ(c->rules[0].nexpose, 2u);
    T_EQ(c->rules[0].max_age, 600);
    T_NULL(c->rules[1].id);
    T_EQ(c->rules[1].max_age, -1);
    T_EQ(c->rules[1].methods, (unsigned)(GW_CORS_GET | GW_CORS_HEAD));
    /* written back: methods in S3's order, text escaped; a fixed point */
    rio__gw_cors_xml(c, &a);
    T_FALSE(a.oom);
    T_NOTNULL(strstr(a.p, "<ID>uploads &amp; reads</ID>"));
    T_NOTNULL(strstr(a.p, "<AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod>"));
    again = parse_ok(a.p);
    rio__gw_cors_xml(again, &b);
    T_STREQ(a.p, b.p);
    rio__gw_buf_free(&a);
    rio__gw_buf_free(&b);
    rio__gw_cors_free(again);
    rio__gw_cors_free(c);
}

#define R(x) "<CORSConfiguration><CORSRule>" x "</CORSRule></CORSConfiguration>"
#define OM "<AllowedOrigin>https://a.test</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"

TEST(refusals_name_the_problem)
{
    static const struct {
        const char *text, *code, *msg;
    } bad[] = {
        {"", "MalformedXML", "not well-formed"},
        {"<CORSConfiguration/>", "MalformedXML", "one CORSRule or more"},
        {"<CORSConfiguration></CORSConfiguration>", "MalformedXML", "one CORSRule or more"},
        {"<CORSConfig>"
         "<CORSRule>" OM "</CORSRule></CORSConfig>",
         "MalformedXML", "not well"},
        {"<CORSConfiguration><CORSRule>" OM "</CORSRule>", "MalformedXML", "not well-formed"},
        {"<CORSConfiguration>text<CORSRule>" OM "</CORSRule></CORSConfiguration>", "MalformedXML",
         "one CORSRule or more"},
        {"<CORSConfiguration><Rule>" OM "</Rule></CORSConfiguration>", "MalformedXML",
         "CORSRule elements only"},
        {R(OM "<Other>x</Other>"), "MalformedXML", "S3 does not have: Other"},
        {R(OM "stray"), "MalformedXML", "text beside"},
        {R(OM "<CORSRule>" OM "</CORSRule>"), "MalformedXML", "something else"},
        {R("<AllowedMethod>GET</AllowedMethod>"), "MalformedXML", "AllowedOrigin and an"},
        {R("<AllowedOrigin>https://a.test</AllowedOrigin>"), "MalformedXML", "AllowedOrigin and"},
        {R(OM "<AllowedMethod>get</AllowedMethod>"), "InvalidRequest", "Unsupported method is get"},
        {R(OM "<AllowedMethod>PATCH</AllowedMethod>"), "InvalidRequest", "method is PATCH"},
        {R("<AllowedOrigin>*.a.*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"),
         "InvalidRequest", "AllowedOrigin \"*.a.*\" can not have more than one wildcard"},
        {R(OM "<AllowedHeader>x-*-*</AllowedHeader>"), "InvalidRequest", "more than one wildcard"},
        {R(OM "<AllowedHeader>a b</AllowedHeader>"), "InvalidRequest", "not an HTTP header name"},
        {R(OM "<ExposeHeader>*</ExposeHeader>"), "InvalidRequest", "not an HTTP header name"},
        {R(OM "<ExposeHeader>a&#10;Set-Cookie: x</ExposeHeader>"), "InvalidRequest",
         "not an HTTP header"},
        {R(OM "<AllowedOrigin>https://a.test, https://b.test</AllowedOrigin>"), "InvalidRequest",
         "a comma"},
        {R(OM "<AllowedOrigin>https://a.test&#13;</AllowedOrigin>"), "InvalidRequest",
         "control character"},
        {R(OM "<AllowedOrigin></AllowedOrigin>"), "InvalidRequest", "is empty"},
        {R(OM "<ID>a</ID><ID>b</ID>"), "InvalidRequest", "more than one ID"},
        {R(OM "<ID>a&#9;b</ID>"), "InvalidRequest", "control character"},
        {R(OM "<MaxAgeSeconds>-1</MaxAgeSeconds>"), "MalformedXML", "whole number"},
        {R(OM "<MaxAgeSeconds>1</MaxAgeSeconds><MaxAgeSeconds>2</MaxAgeSeconds>"), "MalformedXML",
         "given once"},
        {R(OM "<MaxAgeSeconds>99999999999</MaxAgeSeconds>"), "MalformedXML", "whole number"},
        {R(OM "<AllowedHeader><X>a</X></AllowedHeader>"), "MalformedXML", "something else"},
        {R(OM "<AllowedHeader>&bogus;</AllowedHeader>"), "MalformedXML", "not well-formed"},
    };
    char id[300];

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        struct gw_cors *c = (void *)1;
        const char *code = NULL;
        char msg[160] = "";
        int ret = rio__gw_cors_parse(bad[i].text, strlen(bad[i].text), &c, &code, msg, sizeof(msg));
        if (ret != RIO_EINVAL || !code || strcmp(code, bad[i].code) != 0 ||
            !strstr(msg, bad[i].msg))
            T_FAIL("case %zu (%s): %d %s %s", i, bad[i].text, ret, code ? code : "-", msg);
        T_NULL(c);
    }
    /* an ID of 255 bytes is taken, 256 is not */
    for (unsigned n = 255; n <= 256; n++) {
        char text[700];
        struct gw_cors *c = NULL;
        const char *code = NULL;
        char msg[160];
        memset(id, 'i', n);
        id[n] = '\0';
        snprintf(text, sizeof(text), R(OM "<ID>%s</ID>"), id);
        T_EQ(rio__gw_cors_parse(text, strlen(text), &c, &code, msg, sizeof(msg)),
             n == 255 ? 0 : RIO_EINVAL);
        rio__gw_cors_free(c);
    }
}

/* n rules of OM, padded with blanks to at least pad bytes */
static char *rules(unsigned n, size_t pad)
{
    size_t cap = 64 + n * (sizeof(OM) + 24) + pad, len;
    char *p = malloc(cap);

    strcpy(p, "<CORSConfiguration>");
    for (unsigned i = 0; i < n; i++)
        strcat(p, "<CORSRule>" OM "</CORSRule>");
    len = strlen(p);
    while (len < pad)
        p[len++] = ' ';
    strcpy(p + len, "</CORSConfiguration>");
    return p;
}

TEST(bounds)
{
    struct gw_cors *c = NULL;
    const char *code;
    char msg[160];
    char *t = rules(100, 0);

    T_EQ(rio__gw_cors_parse(t, strlen(t), &c, &code, msg, sizeof(msg)), 0);
    T_EQ(c->n, 100u);
    rio__gw_cors_free(c);
    free(t);
    t = rules(101, 0);
    T_EQ(rio__gw_cors_parse(t, strlen(t), &c, &code, msg, sizeof(msg)), RIO_EINVAL);
    T_STREQ(code, "InvalidRequest");
    T_NOTNULL(strstr(msg, "at most 100 rules"));
    free(t);
    /* 64 KiB whole, not a byte more (refused before it is read) */
    t = rules(1, GW_CORS_DOC_MAX - strlen("</CORSConfiguration>"));
    T_EQ(strlen(t), (size_t)GW_CORS_DOC_MAX);
    T_EQ(rio__gw_cors_parse(t, strlen(t), &c, &code, msg, sizeof(msg)), 0);
    rio__gw_cors_free(c);
    free(t);
    t = rules(1, GW_CORS_DOC_MAX + 1 - strlen("</CORSConfiguration>"));
    T_EQ(rio__gw_cors_parse(t, strlen(t), &c, &code, msg, sizeof(msg)), RIO_EINVAL);
    T_NOTNULL(strstr(msg, "at most 65536 bytes"));
    free(t);
}

TEST(records)
{
    struct gw_cors *c = parse_ok(doc), *back = NULL;
    struct gw_buf rec = {0}, a = {0}, b = {0};

    rio__gw_cors_record(c, &rec);
    T_EQ(strncmp(rec.p, "railio-s3-cors 1\n<?xml", 22), 0);
    T_EQ(rio__gw_cors_parse_record(rec.p, rec.len, &back), 0);
    rio__gw_cors_xml(c, &a);
    rio__gw_cors_xml(back, &b);
    T_STREQ(a.p, b.p);
    rio__gw_cors_free(back);
    /* refused whole: another version, no magic, cut short, an empty one,
     * a document that is not one the gateway takes */
    T_ERR(rio__gw_cors_parse_record("railio-s3-cors 2\n", 17, &back), RIO_EPROTO);
    T_ERR(rio__gw_cors_parse_record(a.p, a.len, &back), RIO_EPROTO);
    T_ERR(rio__gw_cors_parse_record(rec.p, rec.len - 10, &back), RIO_EPROTO);
    T_ERR(rio__gw_cors_parse_record("", 0, &back), RIO_EPROTO);
    T_ERR(rio__gw_cors_parse_record("railio-s3-cors 1\n<CORSConfiguration/>", 37, &back),
          RIO_EPROTO);
    T_NULL(back);
    rio__gw_buf_free(&rec);
    rio__gw_buf_free(&a);
    rio__gw_buf_free(&b);
    rio__gw_cors_free(c);
}

/* The rules of Ceph's s3-tests test_cors_origin_response and
 * test_cors_origin_wildcard, and what each origin and method gets. */
TEST(matching_origins_and_methods)
{
    struct gw_cors *c = parse_ok(
        "<CORSConfiguration>"
        "<CORSRule><AllowedOrigin>*suffix</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
        "</CORSRule>"
        "<CORSRule><AllowedOrigin>start*end</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
        "</CORSRule>"
        "<CORSRule><AllowedOrigin>prefix*</AllowedOrigin><AllowedMethod>PUT</AllowedMethod>"
        "</CORSRule>"
        "<CORSRule><AllowedOrigin>*.put</AllowedOrigin><AllowedMethod>PUT</AllowedMethod>"
        "</CORSRule></CORSConfiguration>");
    static const struct {
        const char *origin, *method;
        int rule;
    } cases[] = {
        {"foo.suffix", "GET", 0},  {"foo.bar", "GET", -1},      {"foo.suffix.get", "GET", -1},
        {"suffix", "GET", 0},      {"startend", "GET", 1},      {"start1end", "GET", 1},
        {"start12end", "GET", 1},  {"0start12end", "GET", -1},  {"startenD", "GET", -1},
        {"prefix", "PUT", 2},      {"prefix.suffix", "PUT", 2}, {"bla.prefix", "PUT", -1},
        {"prefix", "GET", -1},     {"foo.put", "GET", -1},      {"foo.put", "PUT", 3},
        {"foo.suffix", "PUT", -1}, {"foo.suffix", "get", -1},   {"foo.suffix", "PATCH", -1},
        {"", "GET", -1},           {"start*end", "GET", 1},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = rio__gw_cors_match(c, cases[i].origin, cases[i].method, NULL);
        if (got != cases[i].rule)
            T_FAIL("%s %s: rule %d, not %d", cases[i].origin, cases[i].method, got, cases[i].rule);
    }
    T_EQ(rio__gw_cors_match(c, NULL, "GET", NULL), -1);
    T_EQ(rio__gw_cors_match(NULL, "foo.suffix", "GET", NULL), -1);
    rio__gw_cors_free(c);
    c = parse_ok(R("<AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"));
    T_EQ(rio__gw_cors_match(c, "example.origin", "GET", NULL), 0);
    T_EQ(rio__gw_cors_match(c, "example.origin", "DELETE", NULL), -1);
    rio__gw_cors_free(c);
}

TEST(matching_requested_headers)
{
    struct gw_cors *c = parse_ok(doc);
    static const struct {
        const char *headers;
        int rule;
    } cases[] = {
        {NULL, 0},
        {"", 0},
        {"content-type", 0},
        {"Content-Type", 0},
        {"content-type,x-amz-date", 0},
        {" Content-Type , X-Amz-Content-Sha256 ,, ", 0},
        {"x-amz-", 0},
        {"x-amz", -1},
        {"authorization", -1},
        {"content-type, authorization", -1},
        {"content-typex", -1},
    };

    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int got = rio__gw_cors_match(c, "https://app.example.com", "PUT", cases[i].headers);
        if (got != cases[i].rule)
            T_FAIL("'%s': rule %d, not %d", cases[i].headers ? cases[i].headers : "(none)", got,
                   cases[i].rule);
    }
    /* the second rule (any origin, GET) has no AllowedHeader: none may be
     * asked for */
    T_EQ(rio__gw_cors_match(c, "https://elsewhere.test", "GET", NULL), 1);
    T_EQ(rio__gw_cors_match(c, "https://elsewhere.test", "GET", "content-type"), -1);
    /* the first rule comes first */
    T_EQ(rio__gw_cors_match(c, "http://x.dev.test", "GET", NULL), 0);
    rio__gw_cors_free(c);
}

struct hdrs {
    char text[1024];
};

static void add(void *arg, const char *name, const char *value)
{
    struct hdrs *h = arg;
    size_t l = strlen(h->text);
    snprintf(h->text + l, sizeof(h->text) - l, "%s: %s\n", name, value);
}

TEST(answers)
{
    struct gw_cors *c = parse_ok(doc);
    struct hdrs h = {""};

    T_EQ(rio__gw_cors_answer(c, 0, "http://x.dev.test", "content-type, x-amz-date", 1, add, &h), 0);
    T_STREQ(h.text,
            "Access-Control-Allow-Origin: http://x.dev.test\n"
            "Access-Control-Allow-Credentials: true\n"
            "Access-Control-Allow-Methods: GET, PUT\n"
            "Access-Control-Expose-Headers: ETag, x-amz-request-id\n"
            "Access-Control-Max-Age: 600\n"
            "Access-Control-Allow-Headers: content-type, x-amz-date\n"
            "Vary: Origin, Access-Control-Request-Headers, Access-Control-Request-Method\n");
    /* not a preflight: no Allow-Headers; a rule open to any origin: "*"
     * and no credentials */
    h.text[0] = '\0';
    T_EQ(rio__gw_cors_answer(c, 1, "https://elsewhere.test", "content-type", 0, add, &h), 0);
    T_STREQ(h.text,
            "Access-Control-Allow-Origin: *\n"
            "Access-Control-Allow-Methods: GET, HEAD\n"
            "Vary: Origin, Access-Control-Request-Headers, Access-Control-Request-Method\n");
    h.text[0] = '\0';
    T_EQ(rio__gw_cors_answer(c, 2, "x", NULL, 1, add, &h), 0); /* no such rule: nothing */
    T_STREQ(h.text, "");
    T_EQ(rio__gw_cors_method("DELETE"), (unsigned)GW_CORS_DELETE);
    T_EQ(rio__gw_cors_method("OPTIONS"), 0u);
    rio__gw_cors_free(c);
}

TEST(every_allocation_failure)
{
    int64_t before = rio__alloc_outstanding();
    static const char plain[] =
        "<CORSConfiguration><CORSRule><ID>r</ID><AllowedOrigin>https://a.test</AllowedOrigin>"
        "<AllowedOrigin>https://b.test</AllowedOrigin><AllowedMethod>GET</AllowedMethod>"
        "<AllowedHeader>*</AllowedHeader><ExposeHeader>ETag</ExposeHeader></CORSRule>"
        "<CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PUT</AllowedMethod>"
        "</CORSRule></CORSConfiguration>";
    int ok = 0;

    for (uint64_t n = 1; n < 100 && !ok; n++) {
        struct gw_cors *c = NULL;
        struct hdrs h = {""};
        const char *code;
        char msg[160];
        int ret;

        rio__alloc_fail_nth(n);
        ret = rio__gw_cors_parse(plain, strlen(plain), &c, &code, msg, sizeof(msg));
        if (ret == 0)
            ret = rio__gw_cors_answer(c, 0, "https://a.test", NULL, 0, add, &h);
        rio__alloc_fail_nth(0);
        if (ret < 0)
            T_ERR(ret, -ENOMEM);
        else
            ok = 1;
        rio__gw_cors_free(c);
        T_EQ(rio__alloc_outstanding(), before);
    }
    T_TRUE(ok);
}
