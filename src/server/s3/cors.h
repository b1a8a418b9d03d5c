/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bucket's CORS configuration (docs/gateway.md, "Browsers and CORS"):
 * S3's CORSConfiguration document parsed and checked, written back in one
 * form, kept as a small record on the backend, and the rules applied to a
 * request from a browser (a preflight OPTIONS, or the request itself).
 * cors.c knows nothing of HTTP or the backend (the unit test and the fuzz
 * target link it with xml.c alone); corsgw.c is the gateway's side. A
 * record read back is untrusted: it is parsed as a client's document is.
 */
#ifndef RIO_SERVER_S3_CORS_H
#define RIO_SERVER_S3_CORS_H

#include <stddef.h>
#include <stdint.h>

#define GW_CORS_DOC_MAX 65536u /* S3: a CORS configuration, bytes */
#define GW_CORS_RULES_MAX 100u /* S3: rules in one */
#define GW_CORS_ID_MAX 255u    /* S3: a rule's ID */
#define GW_CORS_PREFIX ".rio-cors/"
#define GW_CORS_REC_MAGIC "railio-s3-cors 1\n"

/* A rule's methods, bits in S3's order */
enum {
    GW_CORS_GET = 1,
    GW_CORS_PUT = 2,
    GW_CORS_HEAD = 4,
    GW_CORS_POST = 8,
    GW_CORS_DELETE = 16,
};

struct gw_cors_rule {
    char *id;       /* NULL: none */
    char **origins; /* AllowedOrigin: at most one '*' each */
    unsigned norigins;
    unsigned methods; /* GW_CORS_* bits */
    char **headers;   /* AllowedHeader: at most one '*' each */
    unsigned nheaders;
    char **expose; /* ExposeHeader */
    unsigned nexpose;
    int64_t max_age; /* MaxAgeSeconds, -1 when not given */
};

struct gw_cors {
    struct gw_cors_rule *rules;
    unsigned n;
};

/**
 * Parse a CORSConfiguration document of n bytes (a PutBucketCors body, or
 * a record's document). 0 with *out (rio__gw_cors_free); RIO_EINVAL with
 * *code S3's error code ("MalformedXML", "InvalidRequest") and msg (msgcap
 * bytes) what is wrong; -ENOMEM. Bounded: more than GW_CORS_DOC_MAX bytes
 * is refused unread.
 */
int rio__gw_cors_parse(const char *xml, size_t n, struct gw_cors **out, const char **code,
                       char *msg, size_t msgcap);
void rio__gw_cors_free(struct gw_cors *c);
/** c as a CORSConfiguration document, appended to b. */
struct gw_buf;
void rio__gw_cors_xml(const struct gw_cors *c, struct gw_buf *b);
/** The record kept on the backend for c: GW_CORS_REC_MAGIC, then the
 * document. Appended to b. */
void rio__gw_cors_record(const struct gw_cors *c, struct gw_buf *b);
/** A record of n bytes read back: as rio__gw_cors_parse (RIO_EPROTO when
 * it does not start with GW_CORS_REC_MAGIC). */
int rio__gw_cors_parse_record(const char *p, size_t n, struct gw_cors **out);
/** The method bit of an HTTP method name (exact, upper case), 0 for any
 * other. */
unsigned rio__gw_cors_method(const char *m);
/**
 * The first rule of c that lets origin make a request with method (and,
 * for a preflight, every header of the comma-separated list req_headers,
 * NULL or "" for none): its index, or -1.
 */
int rio__gw_cors_match(const struct gw_cors *c, const char *origin, const char *method,
                       const char *req_headers);
/**
 * The response headers rule i of c gives origin: add(arg, name, value)
 * for each (Access-Control-Allow-Origin, -Allow-Methods, -Expose-Headers,
 * -Max-Age, -Allow-Credentials, Vary; for a preflight -Allow-Headers,
 * req_headers as sent). 0, or -ENOMEM (some may have been added).
 */
int rio__gw_cors_answer(const struct gw_cors *c, int i, const char *origin, const char *req_headers,
                        int preflight, void (*add)(void *arg, const char *name, const char *value),
                        void *arg);

#endif
