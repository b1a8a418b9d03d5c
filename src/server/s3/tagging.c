/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Object tagging (docs/gateway.md, "Tags"): PutObjectTagging,
 * GetObjectTagging and DeleteObjectTagging over the object's metadata
 * record, which holds its tags (meta.h); x-amz-tagging on PutObject,
 * CopyObject and CreateMultipartUpload is read with the other headers
 * (objmeta.c), and GET and HEAD give x-amz-tagging-count.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <microhttpd.h>
#include <string.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"
#include "server/server.h"

/* The object r names (*d) and its record (*m, a new empty one when it has
 * none). 0, or the error answer queued (*ret). */
static int object_and_record(struct MHD_Connection *c, struct gw_req *r, struct rio_desc *d,
                             struct gw_meta **m, int *ret)
{
    int sure = 0, e;

    *m = NULL;
    if (rio__gw_need_bucket(c, r, ret) < 0)
        return -1;
    memset(d, 0, sizeof(*d));
    e = rio_stat(rio__gw_client(), r->bkey, d);
    if (e < 0) {
        rio_desc_cleanup(d);
        *ret = rio__gw_rio_error(c, r, e, GW_LOOKUP, "lookup");
        return -1;
    }
    *m = rio__gw_meta_load(r->bucket, r->key, d, &sure);
    if (!*m && !sure) {
        rio_desc_cleanup(d);
        *ret = rio__gw_error(c, r, 503, "ServiceUnavailable",
                             "The object's metadata could not be read; try again.");
        return -1;
    }
    if (!*m && !(*m = rio__gw_meta_new())) {
        rio_desc_cleanup(d);
        *ret = rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
        return -1;
    }
    return 0;
}

/* m (its tags changed) as the record of the object d: written on the
 * condition the record's writes take (rio__gw_meta_store), or, when it
 * now holds nothing but defaults, the record removed while it is the one
 * there. 0 or an error. */
static int store(struct gw_req *r, struct gw_meta *m, const struct rio_desc *d)
{
    char mkey[GW_META_KEY_MAX];
    struct rio_desc rd;
    int ret;

    if (!rio__gw_meta_is_default(m, d->etag)) {
        ret = rio__gw_meta_store(r->bucket, r->key, NULL, m, d);
    } else if ((ret = rio__gw_meta_key(r->bucket, r->key, mkey)) == 0) {
        memset(&rd, 0, sizeof(rd));
        ret = rio_stat(rio__gw_client(), mkey, &rd);
        if (ret == 0)
            rio__gw_meta_drop_if(r->bucket, r->key, rd.generation);
        rio_desc_cleanup(&rd);
        ret = ret == RIO_ENOTFOUND ? 0 : ret;
    }
    rio__gw_head_drop(r->bkey); /* after the record: the next GET reads both */
    return ret;
}

int rio__gw_get_tagging(struct MHD_Connection *c, struct gw_req *r)
{
    struct rio_desc d;
    struct gw_meta *m;
    struct gw_buf b = {0};
    int ret;

    if (object_and_record(c, r, &d, &m, &ret) < 0)
        return ret;
    rio__gw_tags_xml(m, &b);
    rio__gw_meta_free(m);
    rio_desc_cleanup(&d);
    return rio__gw_send_buf(c, r, 200, &b);
}

int rio__gw_put_tagging(struct MHD_Connection *c, struct gw_req *r)
{
    struct rio_desc d;
    struct gw_meta *m;
    const char *code, *why;
    int ret, bad;

    if (object_and_record(c, r, &d, &m, &ret) < 0)
        return ret;
    bad = rio__gw_tags_from_xml(r->buf ? r->buf : "", r->blen, m, &code, &why);
    ret = bad ? bad : store(r, m, &d);
    rio__gw_meta_free(m);
    rio_desc_cleanup(&d);
    if (bad == RIO_EINVAL) /* the document (code and why are static) */
        return rio__gw_error(c, r, 400, code, why);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "tags");
    return rio__gw_send_empty(c, r, 200);
}

int rio__gw_delete_tagging(struct MHD_Connection *c, struct gw_req *r)
{
    struct rio_desc d;
    struct gw_meta *m;
    int ret;

    if (object_and_record(c, r, &d, &m, &ret) < 0)
        return ret;
    rio__gw_meta_clear_tags(m);
    ret = store(r, m, &d);
    rio__gw_meta_free(m);
    rio_desc_cleanup(&d);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "tags");
    return rio__gw_send_empty(c, r, 204);
}
