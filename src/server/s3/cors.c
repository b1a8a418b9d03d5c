/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bucket's CORS configuration: parsed, checked, written back, matched
 * (cors.h). Pure: no HTTP, no backend.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/cors.h"
#include "server/s3/gw.h"

#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

static const char *const method_names[] = {"GET", "PUT", "HEAD", "POST", "DELETE"};
#define NMETHODS (sizeof(method_names) / sizeof(method_names[0]))

unsigned rio__gw_cors_method(const char *m)
{
    for (unsigned i = 0; m && i < NMETHODS; i++)
        if (strcmp(m, method_names[i]) == 0)
            return 1u << i;
    return 0;
}

static void strv_free(char **v, unsigned n)
{
    for (unsigned i = 0; i < n; i++)
        rio__free(v[i]);
    rio__free(v);
}

void rio__gw_cors_free(struct gw_cors *c)
{
    if (!c)
        return;
    for (unsigned i = 0; i < c->n; i++) {
        struct gw_cors_rule *r = &c->rules[i];
        rio__free(r->id);
        strv_free(r->origins, r->norigins);
        strv_free(r->headers, r->nheaders);
        strv_free(r->expose, r->nexpose);
    }
    rio__free(c->rules);
    rio__free(c);
}

struct parse {
    struct gw_cors *c;
    const char *code;
    char *msg;
    size_t msgcap;
    int oom;
};

static int fail(struct parse *p, const char *code, const char *fmt, const char *arg)
{
    p->code = code;
    snprintf(p->msg, p->msgcap, fmt, arg);
    return -1;
}

static int push(struct parse *p, char ***v, unsigned *n, char *s)
{
    char **nv = rio__realloc(*v, (size_t)(*n + 1) * sizeof(**v));

    if (!nv) {
        rio__free(s);
        p->oom = 1;
        return -1;
    }
    nv[(*n)++] = s;
    *v = nv;
    return 0;
}

/* Characters a value may hold: it is sent back in a response header
 * (origins, header names) or a document (the ID). */
static int printable(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e || *s == ',')
            return 0;
    return 1;
}

/* An HTTP header name (RFC 9110 token), with '*' where allowed. */
static int token(const char *s, int star)
{
    if (!*s)
        return 0;
    for (; *s; s++)
        if (!strchr("!#$%&'+-.^_`|~", *s) && !(*s >= 'a' && *s <= 'z') &&
            !(*s >= 'A' && *s <= 'Z') && !(*s >= '0' && *s <= '9') && !(star && *s == '*'))
            return 0;
    return 1;
}

static unsigned stars(const char *s)
{
    unsigned n = 0;

    for (; *s; s++)
        n += *s == '*';
    return n;
}

static int is(const char *name, size_t nlen, const char *tag)
{
    return strlen(tag) == nlen && memcmp(name, tag, nlen) == 0;
}

struct rule_ctx {
    struct parse *p;
    struct gw_cors_rule *r;
    int have_age;
};

static int rule_child(void *arg, const char *name, size_t nlen, const char *inner, size_t ilen)
{
    struct rule_ctx *x = arg;
    struct parse *p = x->p;
    struct gw_cors_rule *r = x->r;
    char *t;
    int ret = rio__gw_xml_text(inner, ilen, &t);

    if (ret == -ENOMEM)
        p->oom = 1;
    if (ret < 0)
        return fail(p, "MalformedXML", "%s", "A CORSRule element holds something else than text.");
    if (is(name, nlen, "AllowedOrigin")) {
        if (!*t || !printable(t)) {
            rio__free(t);
            return fail(p, "InvalidRequest", "%s",
                        "An AllowedOrigin is empty or holds a blank, a comma or a control "
                        "character.");
        }
        if (stars(t) > 1) {
            fail(p, "InvalidRequest",
                 "AllowedOrigin \"%.64s\" can not have more than one wildcard.", t);
            rio__free(t);
            return -1;
        }
        return push(p, &r->origins, &r->norigins, t);
    }
    if (is(name, nlen, "AllowedHeader") || is(name, nlen, "ExposeHeader")) {
        int allowed = nlen == strlen("AllowedHeader");
        if (!token(t, allowed)) {
            fail(p, "InvalidRequest", "\"%.64s\" is not an HTTP header name.", t);
            rio__free(t);
            return -1;
        }
        if (allowed && stars(t) > 1) {
            fail(p, "InvalidRequest",
                 "AllowedHeader \"%.64s\" can not have more than one wildcard.", t);
            rio__free(t);
            return -1;
        }
        return allowed ? push(p, &r->headers, &r->nheaders, t)
                       : push(p, &r->expose, &r->nexpose, t);
    }
    if (is(name, nlen, "AllowedMethod")) {
        unsigned m = rio__gw_cors_method(t);
        if (!m) {
            fail(p, "InvalidRequest",
                 "Found unsupported HTTP method in CORS config. Unsupported method is %.16s", t);
            rio__free(t);
            return -1;
        }
        r->methods |= m;
        rio__free(t);
        return 0;
    }
    if (is(name, nlen, "ID")) {
        if (r->id || strlen(t) > GW_CORS_ID_MAX || !*t) {
            rio__free(t);
            return fail(p, "InvalidRequest", "%s",
                        "A CORSRule has more than one ID, or one empty or over 255 bytes.");
        }
        for (const char *s = t; *s; s++)
            if ((unsigned char)*s < 0x20 || *s == 0x7f) {
                rio__free(t);
                return fail(p, "InvalidRequest", "%s",
                            "A CORSRule's ID holds a control character.");
            }
        r->id = t;
        return 0;
    }
    if (is(name, nlen, "MaxAgeSeconds")) {
        uint64_t v;
        int bad = x->have_age || rio__gw_parse_count(t, INT32_MAX, &v) < 0;
        rio__free(t);
        if (bad)
            return fail(p, "MalformedXML", "%s",
                        "MaxAgeSeconds must be given once, a whole number of seconds.");
        r->max_age = (int64_t)v;
        x->have_age = 1;
        return 0;
    }
    rio__free(t);
    p->code = "MalformedXML";
    snprintf(p->msg, p->msgcap, "A CORSRule holds an element S3 does not have: %.*s.",
             (int)(nlen < 40 ? nlen : 40), name);
    return -1;
}

static int config_child(void *arg, const char *name, size_t nlen, const char *inner, size_t ilen)
{
    struct parse *p = arg;
    struct gw_cors *c = p->c;
    struct gw_cors_rule *nr;
    struct rule_ctx x = {.p = p};
    int ret;

    if (!is(name, nlen, "CORSRule"))
        return fail(p, "MalformedXML", "%s", "A CORSConfiguration holds CORSRule elements only.");
    if (c->n == GW_CORS_RULES_MAX)
        return fail(p, "InvalidRequest", "%s",
                    "A CORS configuration holds at most 100 rules (CORSRule).");
    nr = rio__realloc(c->rules, (size_t)(c->n + 1) * sizeof(*nr));
    if (!nr) {
        p->oom = 1;
        return -1;
    }
    c->rules = nr;
    x.r = &c->rules[c->n++];
    memset(x.r, 0, sizeof(*x.r));
    x.r->max_age = -1;
    ret = rio__gw_xml_children(inner, ilen, rule_child, &x);
    if (ret < 0 && !p->code)
        return fail(p, "MalformedXML", "%s", "A CORSRule holds text beside its elements.");
    if (ret < 0)
        return -1;
    if (!x.r->norigins || !x.r->methods)
        return fail(p, "MalformedXML", "%s",
                    "Each CORSRule needs an AllowedOrigin and an AllowedMethod.");
    return 0;
}

int rio__gw_cors_parse(const char *xml, size_t n, struct gw_cors **out, const char **code,
                       char *msg, size_t msgcap)
{
    struct parse p = {.msg = msg, .msgcap = msgcap};
    const char *inner;
    size_t ilen;
    int ret;

    *out = NULL;
    *code = "MalformedXML";
    if (n > GW_CORS_DOC_MAX) {
        snprintf(msg, msgcap, "A CORS configuration is at most %u bytes.", GW_CORS_DOC_MAX);
        return RIO_EINVAL;
    }
    if (rio__gw_xml_wellformed(xml, n, "CORSConfiguration") < 0 ||
        rio__gw_xml_root(xml, n, &inner, &ilen) < 0) {
        snprintf(msg, msgcap,
                 "The XML you provided was not well-formed or did not validate against our "
                 "published schema (a CORSConfiguration).");
        return RIO_EINVAL;
    }
    p.c = rio__calloc(1, sizeof(*p.c));
    if (!p.c)
        return -ENOMEM;
    ret = rio__gw_xml_children(inner, ilen, config_child, &p);
    if (p.oom) {
        rio__gw_cors_free(p.c);
        return -ENOMEM;
    }
    if (ret < 0 || p.c->n == 0) {
        if (!p.code)
            snprintf(msg, msgcap,
                     "A CORSConfiguration needs one CORSRule or more, and nothing "
                     "else.");
        *code = p.code ? p.code : "MalformedXML";
        rio__gw_cors_free(p.c);
        return RIO_EINVAL;
    }
    *out = p.c;
    return 0;
}

static void elems(struct gw_buf *b, const char *tag, char *const *v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        rio__gw_buf_printf(b, "<%s>", tag);
        rio__gw_buf_xml(b, v[i]);
        rio__gw_buf_printf(b, "</%s>", tag);
    }
}

void rio__gw_cors_xml(const struct gw_cors *c, struct gw_buf *b)
{
    rio__gw_buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          "<CORSConfiguration xmlns=\"" XMLNS "\">");
    for (unsigned i = 0; i < c->n; i++) {
        const struct gw_cors_rule *r = &c->rules[i];
        rio__gw_buf_put(b, "<CORSRule>", 10);
        if (r->id)
            elems(b, "ID", &r->id, 1);
        elems(b, "AllowedOrigin", r->origins, r->norigins);
        for (unsigned m = 0; m < NMETHODS; m++)
            if (r->methods & (1u << m))
                rio__gw_buf_printf(b, "<AllowedMethod>%s</AllowedMethod>", method_names[m]);
        elems(b, "AllowedHeader", r->headers, r->nheaders);
        elems(b, "ExposeHeader", r->expose, r->nexpose);
        if (r->max_age >= 0)
            rio__gw_buf_printf(b, "<MaxAgeSeconds>%lld</MaxAgeSeconds>", (long long)r->max_age);
        rio__gw_buf_put(b, "</CORSRule>", 11);
    }
    rio__gw_buf_printf(b, "</CORSConfiguration>\n");
}

void rio__gw_cors_record(const struct gw_cors *c, struct gw_buf *b)
{
    rio__gw_buf_put(b, GW_CORS_REC_MAGIC, strlen(GW_CORS_REC_MAGIC));
    rio__gw_cors_xml(c, b);
}

int rio__gw_cors_parse_record(const char *p, size_t n, struct gw_cors **out)
{
    size_t m = strlen(GW_CORS_REC_MAGIC);
    const char *code;
    char msg[160];

    *out = NULL;
    if (n < m || memcmp(p, GW_CORS_REC_MAGIC, m) != 0)
        return RIO_EPROTO;
    switch (rio__gw_cors_parse(p + m, n - m, out, &code, msg, sizeof(msg))) {
    case 0:
        return 0;
    case -ENOMEM:
        return -ENOMEM;
    default:
        return RIO_EPROTO;
    }
}

/* s (n bytes) matches pattern pat, which holds at most one '*' (any run of
 * characters, none too); case-blind for header names. */
static int wild(const char *pat, const char *s, size_t n, int nocase)
{
    const char *star = strchr(pat, '*');
    size_t pre, post;

    if (!star)
        return strlen(pat) == n && (nocase ? strncasecmp(pat, s, n) : memcmp(pat, s, n)) == 0;
    pre = (size_t)(star - pat);
    post = strlen(star + 1);
    if (n < pre + post)
        return 0;
    if (nocase)
        return strncasecmp(pat, s, pre) == 0 && strncasecmp(star + 1, s + n - post, post) == 0;
    return memcmp(pat, s, pre) == 0 && memcmp(star + 1, s + n - post, post) == 0;
}

static int origin_ok(const struct gw_cors_rule *r, const char *origin)
{
    for (unsigned i = 0; i < r->norigins; i++)
        if (wild(r->origins[i], origin, strlen(origin), 0))
            return 1;
    return 0;
}

/* Every name of the comma-separated list is one of r's AllowedHeaders. */
static int headers_ok(const struct gw_cors_rule *r, const char *list)
{
    const char *p = list;

    while (p && *p) {
        size_t n;
        unsigned i;
        while (*p == ' ' || *p == '\t' || *p == ',')
            p++;
        n = strcspn(p, ",");
        while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (n) {
            for (i = 0; i < r->nheaders; i++)
                if (wild(r->headers[i], p, n, 1))
                    break;
            if (i == r->nheaders)
                return 0;
        }
        p += strcspn(p, ",");
    }
    return 1;
}

int rio__gw_cors_match(const struct gw_cors *c, const char *origin, const char *method,
                       const char *req_headers)
{
    unsigned m = rio__gw_cors_method(method);

    if (!c || !origin || !*origin || !m)
        return -1;
    for (unsigned i = 0; i < c->n; i++) {
        const struct gw_cors_rule *r = &c->rules[i];
        if ((r->methods & m) && origin_ok(r, origin) && headers_ok(r, req_headers))
            return (int)i;
    }
    return -1;
}

static void join(struct gw_buf *b, char *const *v, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        if (i)
            rio__gw_buf_put(b, ", ", 2);
        rio__gw_buf_put(b, v[i], strlen(v[i]));
    }
}

int rio__gw_cors_answer(const struct gw_cors *c, int i, const char *origin, const char *req_headers,
                        int preflight, void (*add)(void *arg, const char *name, const char *value),
                        void *arg)
{
    const struct gw_cors_rule *r;
    struct gw_buf b = {0};
    int any = 0;
    char age[24];

    if (!c || i < 0 || (unsigned)i >= c->n)
        return 0;
    r = &c->rules[i];
    for (unsigned k = 0; k < r->norigins; k++)
        any |= strcmp(r->origins[k], "*") == 0;
    /* A rule open to every origin answers "*", which a browser takes for a
     * request without credentials only; any other echoes the origin. */
    add(arg, "Access-Control-Allow-Origin", any ? "*" : origin);
    if (!any)
        add(arg, "Access-Control-Allow-Credentials", "true");
    for (unsigned m = 0; m < NMETHODS; m++)
        if (r->methods & (1u << m)) {
            if (b.len)
                rio__gw_buf_put(&b, ", ", 2);
            rio__gw_buf_put(&b, method_names[m], strlen(method_names[m]));
        }
    if (b.oom)
        return -ENOMEM;
    add(arg, "Access-Control-Allow-Methods", b.p);
    b.len = 0;
    if (r->nexpose) {
        join(&b, r->expose, r->nexpose);
        if (b.oom) {
            rio__gw_buf_free(&b);
            return -ENOMEM;
        }
        add(arg, "Access-Control-Expose-Headers", b.p);
    }
    rio__gw_buf_free(&b);
    if (r->max_age >= 0) {
        snprintf(age, sizeof(age), "%lld", (long long)r->max_age);
        add(arg, "Access-Control-Max-Age", age);
    }
    if (preflight && req_headers && *req_headers)
        add(arg, "Access-Control-Allow-Headers", req_headers);
    add(arg, "Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method");
    return 0;
}
