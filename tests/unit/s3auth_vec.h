/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Requests as the gateway's verifiers see them (test_s3_sigv4v,
 * test_s3_sigv2v): a method, a path, a query and up to MAXH headers.
 */
#ifndef RIO_TEST_S3AUTH_VEC_H
#define RIO_TEST_S3AUTH_VEC_H

#include <string.h>
#include <strings.h>

#include "server/s3/auth.h"
#include "t.h"

#define MAXH 16

struct vec {
    const char *method, *path, *query, *body;
    struct rio_s3_hdr h[MAXH];
};

static inline struct rio_s3_keys *keys_of(const char *text)
{
    struct rio_s3_keys *k = NULL;
    unsigned line;
    const char *why;

    T_EQ(rio__s3_keys_parse(text, strlen(text), &k, &line, &why), 0);
    T_NOTNULL(k);
    return k;
}

static inline struct rio_s3_req req_of(const struct vec *v)
{
    struct rio_s3_req r = {v->method, v->path, v->query, 0, v->h};

    while (r.nheaders < MAXH && v->h[r.nheaders].name)
        r.nheaders++;
    return r;
}

/* v with header name's value replaced (or added). */
static inline struct vec with_header(const struct vec *v, const char *name, const char *value)
{
    struct vec c = *v;
    int i;

    for (i = 0; i < MAXH && c.h[i].name; i++)
        if (strcasecmp(c.h[i].name, name) == 0)
            break;
    T_LT(i, MAXH - 1);
    c.h[i].name = name;
    c.h[i].value = value;
    return c;
}

#endif
