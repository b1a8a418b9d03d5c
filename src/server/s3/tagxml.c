/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An object's tags as S3's Tagging document: read from a PutObjectTagging
 * body, written for GetObjectTagging. Pure (the unit test and the fuzz
 * target link it with xml.c and metarec.c alone).
 */
#include <errno.h>
#include <string.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"

#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"

static int is(const char *name, size_t nlen, const char *tag)
{
    return strlen(tag) == nlen && memcmp(name, tag, nlen) == 0;
}

struct tag_ctx {
    char *key, *value;
    unsigned nkey, nvalue;
    int oom, bad;
};

/* A <Tag>'s child: one Key, one Value (text; an empty Value is ""). */
static int tag_child(void *arg, const char *name, size_t nlen, const char *inner, size_t ilen)
{
    struct tag_ctx *t = arg;
    char **slot;
    char *text;
    int ret;

    if (is(name, nlen, "Key"))
        slot = t->nkey++ ? NULL : &t->key;
    else if (is(name, nlen, "Value"))
        slot = t->nvalue++ ? NULL : &t->value;
    else
        return -1;
    if (!slot)
        return -1;
    ret = rio__gw_xml_text(inner, ilen, &text);
    if (ret == -ENOMEM)
        t->oom = 1;
    if (ret < 0)
        return -1;
    *slot = text;
    return 0;
}

struct set_ctx {
    struct gw_meta *m;
    const char *why;
    int err; /* add_tag's */
    int oom;
};

static int set_child(void *arg, const char *name, size_t nlen, const char *inner, size_t ilen)
{
    struct set_ctx *x = arg;
    struct tag_ctx t = {0};
    int ret = -1;

    if (!is(name, nlen, "Tag"))
        return -1;
    if (rio__gw_xml_children(inner, ilen, tag_child, &t) == 0 && t.key && t.nvalue == 1) {
        ret = rio__gw_meta_add_tag(x->m, t.key, t.value ? t.value : "", &x->why);
        if (ret < 0)
            x->err = ret;
    }
    x->oom |= t.oom;
    rio__free(t.key);
    rio__free(t.value);
    return ret < 0 ? -1 : 0;
}

struct root_ctx {
    struct set_ctx *x;
    unsigned nsets;
    int bad;
};

static int root_child(void *arg, const char *name, size_t nlen, const char *inner, size_t ilen)
{
    struct root_ctx *rc = arg;

    if (!is(name, nlen, "TagSet") || rc->nsets++)
        return -1;
    return rio__gw_xml_children(inner, ilen, set_child, rc->x) < 0 ? -1 : 0;
}

int rio__gw_tags_from_xml(const char *xml, size_t n, struct gw_meta *m, const char **code,
                          const char **why)
{
    struct set_ctx x = {.m = m};
    struct root_ctx rc = {.x = &x};
    const char *inner;
    size_t ilen;
    int ret;

    rio__gw_meta_clear_tags(m);
    *code = "MalformedXML";
    *why = "The XML you provided was not well-formed or did not validate against our published "
           "schema (a Tagging of one TagSet, each Tag one Key and one Value).";
    if (rio__gw_xml_wellformed(xml, n, "Tagging") < 0 ||
        rio__gw_xml_root(xml, n, &inner, &ilen) < 0)
        return RIO_EINVAL;
    ret = rio__gw_xml_children(inner, ilen, root_child, &rc);
    if (x.oom || x.err == -ENOMEM) {
        rio__gw_meta_clear_tags(m);
        return -ENOMEM;
    }
    if (x.err) {
        *code = x.err == -E2BIG ? "BadRequest" : "InvalidTag";
        *why = x.why;
    }
    if (ret < 0 || x.err || rc.nsets != 1) {
        rio__gw_meta_clear_tags(m);
        return RIO_EINVAL;
    }
    return 0;
}

const char *rio__gw_tag_code(int err, const char *why)
{
    return err == -E2BIG                           ? "BadRequest"
           : why && strstr(why, "'x-amz-tagging'") ? "InvalidArgument"
                                                   : "InvalidTag";
}

void rio__gw_tags_xml(const struct gw_meta *m, struct gw_buf *b)
{
    rio__gw_buf_printf(b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
                          "<Tagging xmlns=\"" XMLNS "\"><TagSet>");
    for (unsigned i = 0; m && i < m->ntags; i++) {
        rio__gw_buf_put(b, "<Tag><Key>", 10);
        rio__gw_buf_xml(b, m->tags[i].name);
        rio__gw_buf_put(b, "</Key><Value>", 13);
        rio__gw_buf_xml(b, m->tags[i].value);
        rio__gw_buf_put(b, "</Value></Tag>", 14);
    }
    rio__gw_buf_printf(b, "</TagSet></Tagging>\n");
}
