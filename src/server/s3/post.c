/* SPDX-License-Identifier: Apache-2.0 */
/*
 * POST Object (docs/gateway.md "POST uploads"): an HTML form's upload to a
 * bucket, as boto3's generate_presigned_post, the AWS SDKs' presigned POST
 * and minio's presignedPostPolicy make it. The body streams through the
 * form parser (postform.c); once the fields before the file are in, the
 * form's signature and policy decide (rio_s3_post_verify), the key, its
 * content headers and x-amz-meta-* are taken from the fields, and the
 * file's bytes stream into the engine's writer as a PutObject's do. The
 * commit and the metadata record are PutObject's (rio__gw_put_close);
 * what differs is the answer: 204 (the default), 200, 201 with a
 * PostResponse, or a 303 to success_action_redirect.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <microhttpd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "core/alloc.h"
#include "core/engine.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"
#include "server/s3/s3.h"
#include "server/server.h"

#define REDIRECT_MAX 2048

struct gw_post {
    struct rio_s3_form *form;
    struct rio_s3_post_auth pa;
    int status;     /* success_action_status: 200, 201 or 204 */
    char *redirect; /* success_action_redirect (or redirect), checked */
    /* The x-amz-checksum-* field the file is checked against (kept as a
     * PutObject's header's is), "" none */
    char ck_algo[12], ck_value[64];
};

/* The digest fields of the form (Content-MD5, x-amz-checksum-*): each a
 * check the file's bytes must pass before the commit, as a PutObject's
 * headers are (bodycheck.c); the x-amz-checksum-* one is kept. */
static int checks_of(struct gw_req *r, struct gw_post *p)
{
    const char *const *ck_fields = rio__gw_digest_names;

    for (size_t i = 0; i < GW_DIGEST_NAMES; i++) {
        const char *v = rio_s3_form_field(p->form, ck_fields[i]), *code = NULL;
        if (!v || r->nck == GW_CHECKS)
            continue;
        int err = rio_s3_check_new(ck_fields[i], v, &r->ck[r->nck], &code);
        if (err < 0) {
            rio__gw_fail(r, err == -ENOMEM ? 500 : 400,
                         err == -ENOMEM ? "InternalError"
                         : code         ? code
                                        : "InvalidDigest",
                         "The form's %s field is not a valid digest.", ck_fields[i]);
            return -1;
        }
        r->nck++;
        if (i > 0 && !p->ck_algo[0] && strlen(v) < sizeof(p->ck_value)) {
            snprintf(p->ck_algo, sizeof(p->ck_algo), "%s", ck_fields[i] + 15);
            snprintf(p->ck_value, sizeof(p->ck_value), "%s", v);
        }
    }
    return 0;
}

/* A field that names what the gateway does not do, where going on would
 * do something else than asked (as PutObject's headers: gateway.c). */
static int unsupported_field(struct gw_req *r, const struct rio_s3_form *f)
{
    for (size_t i = 0; i < 3; i++) /* the object's own SSE-C fields (any case) */
        if (rio_s3_form_field(f, rio__gw_ssec_names[i])) {
            rio__gw_fail(r, 501, "NotImplemented",
                         "Server-side encryption with customer-provided keys (SSE-C) is not "
                         "supported.");
            return -1;
        }
    for (size_t i = 0; i < GW_LOCK_NAMES; i++)
        if (rio_s3_form_field(f, rio__gw_lock_names[i])) {
            rio__gw_fail(r, 400, "InvalidRequest", "Bucket is missing Object Lock Configuration.");
            return -1;
        }
    const char *v = rio_s3_form_field(f, "x-amz-storage-class");
    if (v && !rio__gw_storage_class_ok(v)) {
        rio__gw_fail(r, 400, "InvalidStorageClass",
                     "The storage class you specified is not valid.");
        return -1;
    }
    return 0;
}

/* The key field with each "${filename}" replaced by the file's name. */
static char *key_of(const char *field, const char *filename)
{
    static const char var[] = "${filename}";
    size_t n = 0, vl = sizeof(var) - 1, fl = strlen(filename);
    const char *p;
    char *out, *o;

    for (p = field; (p = strstr(p, var)) != NULL; p += vl)
        n++;
    if (n > RIO_KEY_MAX || (fl && n > RIO_KEY_MAX / fl))
        return NULL;
    out = rio__malloc(strlen(field) + n * fl + 1);
    if (!out)
        return NULL;
    for (o = out, p = field; *p;) {
        if (strncmp(p, var, vl) == 0) {
            memcpy(o, filename, fl);
            o += fl;
            p += vl;
        } else {
            *o++ = *p++;
        }
    }
    *o = '\0';
    return out;
}

/* success_action_redirect: an http(s) URL of printable ASCII, else
 * ignored (S3 then answers with the status). */
static char *redirect_of(const struct rio_s3_form *f)
{
    const char *v = rio_s3_form_field(f, "success_action_redirect");

    if (!v)
        v = rio_s3_form_field(f, "redirect");
    if (!v || strlen(v) > REDIRECT_MAX ||
        (strncasecmp(v, "http://", 7) != 0 && strncasecmp(v, "https://", 8) != 0))
        return NULL;
    for (const char *p = v; *p; p++)
        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f)
            return NULL;
    return rio__strdup(v);
}

/* The form's fields are in and its file begins: decide, then open the
 * writer. An error is kept in r (sent when the body has ended). */
static int file_begin(void *arg, const char *filename, const char *content_type)
{
    struct gw_req *r = arg;
    struct gw_post *p = r->post;
    const char *code = NULL, *fname, *fvalue, *st;
    char msg[256];
    struct gw_meta *m;
    int ret, status;

    (void)content_type; /* S3 takes the Content-Type field, not the part's */
    /* The key with ${filename} replaced: what the policy's $key conditions
     * hold for, and the object's name. */
    fvalue = rio_s3_form_field(p->form, "key");
    if (fvalue && !(r->key = key_of(fvalue, filename))) {
        rio__gw_fail(r, 500, "InternalError", "Out of memory.");
        return -1;
    }
    ret = rio_s3_post_verify(rio__gw_keys(), p->form, r->bucket, r->key, (int64_t)time(NULL),
                             rio__gw_sigv2(), &p->pa, &code, msg, sizeof(msg));
    if (ret < 0) {
        status = ret == -ENOMEM                               ? 500
                 : strcmp(code, "InvalidPolicyDocument") == 0 ? 400
                                                              : rio_s3_status_of(code);
        SRV_INFO("s3: POST refused: %s: %s", code, msg);
        rio__gw_fail(r, status, code, "%s", msg);
        return -1;
    }
    r->auth.anonymous = p->pa.anonymous;
    snprintf(r->auth.access_key, sizeof(r->auth.access_key), "%s", p->pa.access_key);
    if (!rio__gw_user_may(r, r->bucket)) {
        rio__gw_fail(r, 403, "AccessDenied",
                     p->pa.anonymous ? "Anonymous access is off for this bucket."
                                     : "Access to this bucket is not allowed.");
        return -1;
    }
    if (unsupported_field(r, p->form) < 0 || checks_of(r, p) < 0)
        return -1;
    if (!r->key[0]) {
        rio__gw_fail(r, 400, "InvalidArgument", "User key must have a length greater than 0.");
        return -1;
    }
    if (!rio__gw_utf8_valid(r->key)) {
        rio__gw_fail(r, 400, "InvalidURI", "Couldn't parse the specified URI.");
        return -1;
    }
    size_t klen = strlen(r->bucket) + 1 + strlen(r->key);
    if (klen > RIO_KEY_MAX) {
        rio__gw_fail(r, 400, "KeyTooLongError", "Your key is too long.");
        return -1;
    }
    r->bkey = rio__malloc(klen + 1);
    m = rio__gw_meta_new();
    if (!r->bkey || !m) {
        rio__gw_meta_free(m);
        rio__gw_fail(r, 500, "InternalError", "Out of memory.");
        return -1;
    }
    snprintf(r->bkey, klen + 1, "%s/%s", r->bucket, r->key);
    r->meta = m;
    for (unsigned i = 0; (fname = rio_s3_form_field_at(p->form, i, &fvalue)) != NULL; i++) {
        ret = rio__gw_meta_from_pair(m, fname, fvalue);
        if (ret == GW_META_ETOOLARGE) {
            rio__gw_fail(r, 400, "MetadataTooLarge",
                         "Your metadata headers exceed the maximum allowed metadata size.");
            return -1;
        }
        if (ret < 0) {
            rio__gw_fail(r, ret == -ENOMEM ? 500 : 400,
                         ret == -ENOMEM ? "InternalError" : "InvalidArgument",
                         "The field %.64s is not valid: control characters, a bad name or too "
                         "long.",
                         fname);
            return -1;
        }
    }
    fvalue = rio_s3_form_field(p->form, "tagging"); /* a Tagging document */
    if (fvalue && (ret = rio__gw_tags_from_xml(fvalue, strlen(fvalue), m, &code, &fname)) < 0) {
        if (ret == -ENOMEM)
            rio__gw_fail(r, 500, "InternalError", "Out of memory.");
        else
            rio__gw_fail(r, 400, code, "%s", fname);
        return -1;
    }
    st = rio_s3_form_field(p->form, "success_action_status");
    p->status = st && !strcmp(st, "200") ? 200 : st && !strcmp(st, "201") ? 201 : 204;
    p->redirect = redirect_of(p->form);
    ret = rio__gw_bucket_exists(r->bucket);
    if (ret <= 0) {
        if (ret == 0)
            rio__gw_fail(r, 404, "NoSuchBucket", "The specified bucket does not exist.");
        else
            rio__gw_fail(r, 500, "InternalError", "bucket lookup: %s", rio_strerror(ret));
        return -1;
    }
    /* The record follows the commit on the condition that the key's is
     * still the one read now (as PutObject's). */
    if (!rio__gw_meta_is_default(r->meta, "") || (p->ck_algo[0] && rio__gw_keep_checksums()))
        r->prior_gen = rio__gw_meta_gen_start(r->bucket, r->key);
    r->declared = UINT64_MAX; /* the file's size is known at its end */
    /* Its writer's slots, of the body buffers' budget (bodymem.c), as
     * PutObject's: at most the policy's largest file. Refused, the rest of
     * the form is drained and 503 SlowDown answered. */
    uint64_t win =
        rio__gw_mem_window(p->pa.len_max, rio__put_chunk_size(rio__gw_client(), RIO_SIZE_UNKNOWN));
    if (rio__gw_mem_take(r, win) < 0) {
        r->retry_after = 1;
        rio__gw_fail(r, 503, "SlowDown", "Please reduce your request rate.");
        return -1;
    }
    ret = rio_writer_open(rio__gw_client(), r->bkey, UINT64_MAX, 0, NULL, &r->w);
    if (ret < 0) {
        r->w = NULL;
        const char *pcode, *pmsg;
        if (ret == RIO_ENOTSUP)
            rio__gw_fail(r, 501, "NotImplemented",
                         "This gateway's backend needs an object's size before its bytes; a "
                         "POST upload's is known only at its end.");
        else if ((status = rio__gw_write_path_error(ret, &pcode, &pmsg)) != 0)
            rio__gw_fail(r, status, pcode, "%s", pmsg); /* file:// and a key it cannot hold */
        else {
            const char *c = rio__gw_code_of(ret, &status);
            rio__gw_fail(r, status, c, "open: %s", rio_strerror(ret));
        }
        return -1;
    }
    return 0;
}

static int file_data(void *arg, const void *buf, size_t n)
{
    struct gw_req *r = arg;
    int ret, status;

    if (r->err_status || !r->w)
        return -1;
    if (n > r->post->pa.len_max - r->got) {
        rio__gw_fail(r, 400, "EntityTooLarge",
                     "Your proposed upload exceeds the maximum allowed size (the policy's "
                     "content-length-range).");
        return -1;
    }
    if (n > GW_OBJECT_MAX - r->got) {
        rio__gw_fail(r, 400, "EntityTooLarge",
                     "Your proposed upload exceeds the maximum allowed object size.");
        return -1;
    }
    r->got += n;
    rio__gw_checks_update(r, buf, n);
    ret = rio_writer_write(r->w, buf, n);
    if (ret < 0) {
        const char *c = rio__gw_code_of(ret, &status);
        rio__gw_fail(r, status, c, "write: %s", rio_strerror(ret));
        return -1;
    }
    return 0;
}

int rio__gw_post_open(struct MHD_Connection *c, struct gw_req *r)
{
    const char *ct = rio__gw_header(c, "Content-Type");
    struct rio_s3_form_cb cb = {r, file_begin, file_data};
    int ret;

    while (ct && (*ct == ' ' || *ct == '\t'))
        ct++;
    if (!ct || strncasecmp(ct, "multipart/form-data", 19) != 0)
        return rio__gw_error(c, r, 412, "PreconditionFailed",
                             "Bucket POST must be of the enclosure-type multipart/form-data");
    r->post = rio__calloc(1, sizeof(*r->post));
    if (!r->post)
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    ret = rio_s3_form_new(ct, &cb, &r->post->form);
    if (ret < 0)
        return ret == -ENOMEM ? rio__gw_error(c, r, 500, "InternalError", "Out of memory.")
                              : rio__gw_error(c, r, 400, "MalformedPOSTRequest",
                                              "The body of your POST request is not "
                                              "well-formed multipart/form-data: its "
                                              "Content-Type has no valid boundary.");
    return MHD_YES; /* the body: 100 Continue when asked */
}

void rio__gw_post_data(struct gw_req *r, const void *p, size_t n)
{
    const char *why = NULL;

    if (r->err_status)
        return; /* an error is pending: drain the rest */
    if (rio_s3_form_feed(r->post->form, p, n, &why) < 0 && !r->err_status)
        rio__gw_fail(r, 400, "MalformedPOSTRequest",
                     "The body of your POST request is not well-formed multipart/form-data: %s.",
                     why ? why : "malformed");
}

int rio__gw_post_close(struct MHD_Connection *c, struct gw_req *r)
{
    struct gw_post *p = r->post;

    if (!r->err_status && !rio_s3_form_file_seen(p->form))
        rio__gw_fail(r, 400, "InvalidArgument",
                     "POST requires exactly one file upload per request.");
    else if (!r->err_status && !rio_s3_form_done(p->form))
        rio__gw_fail(r, 400, "IncompleteBody",
                     "The body ended before the file's closing boundary.");
    else if (!r->err_status && r->got < p->pa.len_min)
        rio__gw_fail(r, 400, "EntityTooSmall",
                     "Your proposed upload is smaller than the minimum allowed size (the "
                     "policy's content-length-range).");
    /* The digest fields are checked by the commit (rio__gw_put_close:
     * BadDigest, nothing published); the checksum is kept only if it holds. */
    if (!r->err_status && p->ck_algo[0] && rio__gw_keep_checksums())
        rio__gw_meta_set_checksum(r->meta, p->ck_algo, p->ck_value);
    if (r->err_status) {
        rio__gw_put_cleanup(r); /* nothing is published */
        return rio__gw_error(c, r, r->err_status, r->err_code, r->err_msg);
    }
    return rio__gw_put_close(c, r); /* answers with rio__gw_post_answer */
}

/* A query parameter's value, percent-encoded (unreserved bytes kept). */
static void query_value(struct gw_buf *b, const char *s)
{
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
            ch == '-' || ch == '_' || ch == '.' || ch == '~')
            rio__gw_buf_put(b, (const char *)&ch, 1);
        else
            rio__gw_buf_printf(b, "%%%02X", ch);
    }
}

int rio__gw_post_answer(struct MHD_Connection *c, struct gw_req *r, const char *etag)
{
    struct gw_post *p = r->post;
    struct gw_buf url = {0}, b = {0};
    struct MHD_Response *resp;
    char qetag[80];
    int status = p->status, ret;

    snprintf(qetag, sizeof(qetag), "\"%s\"", etag);
    rio__gw_object_url(c, r, &url);
    rio__gw_buf_put(&url, "", 1);
    if (p->redirect) {
        /* 303 to it, with the bucket, key and ETag in its query: before a
         * fragment (#...), which a browser never sends, kept after them. */
        size_t n = strcspn(p->redirect, "#");
        rio__gw_buf_put(&b, p->redirect, n);
        rio__gw_buf_put(&b, memchr(p->redirect, '?', n) ? "&bucket=" : "?bucket=", 8);
        query_value(&b, r->bucket);
        rio__gw_buf_put(&b, "&key=", 5);
        query_value(&b, r->key);
        rio__gw_buf_put(&b, "&etag=", 6);
        query_value(&b, qetag);
        rio__gw_buf_put(&b, p->redirect + n, strlen(p->redirect + n));
        rio__gw_buf_put(&b, "", 1);
        status = 303;
    } else if (status == 201) {
        rio__gw_buf_printf(&b, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<PostResponse>"
                               "<Location>");
        rio__gw_buf_xml(&b, url.oom ? "" : url.p);
        rio__gw_buf_put(&b, "</Location>", 11);
        rio__gw_list_elem(&b, "Bucket", r->bucket, 0);
        rio__gw_list_elem(&b, "Key", r->key, 0);
        rio__gw_buf_etag(&b, etag);
        rio__gw_buf_put(&b, "</PostResponse>", 15);
    }
    if (url.oom || b.oom) {
        rio__gw_buf_free(&url);
        rio__gw_buf_free(&b);
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    if (status == 201) {
        resp = MHD_create_response_from_buffer(b.len, b.p, MHD_RESPMEM_MUST_COPY);
        r->bytes_out += b.len;
        if (resp)
            MHD_add_response_header(resp, "Content-Type", "application/xml");
    } else {
        resp = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    }
    if (resp) {
        MHD_add_response_header(resp, "ETag", qetag);
        MHD_add_response_header(resp, "Location", status == 303 ? b.p : url.p);
    }
    ret = rio__gw_send(c, r, status, resp);
    rio__gw_buf_free(&url);
    rio__gw_buf_free(&b);
    return ret;
}

void rio__gw_post_free(struct gw_req *r)
{
    if (!r->post)
        return;
    rio__gw_put_cleanup(r);
    rio_s3_form_free(r->post->form);
    rio__free(r->post->redirect);
    rio__free(r->post);
    r->post = NULL;
}
