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

/* ------------------------------------------------------- a bucket's tags */

/* ".rio-btags/BUCKET": a line GW_BTAGS_MAGIC, then the Tagging document as
 * GetBucketTagging answers it. */
#define GW_BTAGS_PREFIX ".rio-btags/"
#define GW_BTAGS_MAGIC "railio-s3-bucket-tags 1\n"
#define GW_BTAGS_REC_MAX (64u * 1024u)

/* A new record of up to 50 tags, empty. NULL when out of memory. */
static struct gw_meta *btags_new(void)
{
    struct gw_meta *m = rio__gw_meta_new();

    if (m)
        m->tags_max = GW_BUCKET_TAGS_MAX;
    return m;
}

/* The bucket's tags into m (none when it has no record, or one this code
 * did not write: logged). 0 or an error of the read. */
static int btags_read(const char *bucket, struct gw_meta *m)
{
    const size_t ml = strlen(GW_BTAGS_MAGIC);
    const char *code, *why;
    char *rec;
    size_t n;
    int ret = rio__gw_bucket_rec_get(GW_BTAGS_PREFIX, bucket, GW_BTAGS_REC_MAX, &rec, &n);

    if (ret <= 0)
        return ret;
    ret = n >= ml && memcmp(rec, GW_BTAGS_MAGIC, ml) == 0
              ? rio__gw_tags_from_xml(rec + ml, n - ml, m, &code, &why)
              : RIO_EPROTO;
    rio__free(rec);
    if (ret == -ENOMEM)
        return ret;
    if (ret < 0)
        SRV_WARN("s3: " GW_BTAGS_PREFIX "%s on the backend is not a tag record this gateway "
                 "writes: ignored",
                 bucket);
    return 0;
}

int rio__gw_get_bucket_tagging(struct MHD_Connection *c, struct gw_req *r)
{
    struct gw_meta *m;
    struct gw_buf b = {0};
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    if (!(m = btags_new()))
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    ret = btags_read(r->bucket, m);
    if (ret < 0 || !m->ntags) {
        rio__gw_meta_free(m);
        return ret < 0 ? rio__gw_rio_error(c, r, ret, GW_READS, "bucket tags")
                       : rio__gw_error(c, r, 404, "NoSuchTagSet", "The TagSet does not exist.");
    }
    rio__gw_tags_xml(m, &b);
    rio__gw_meta_free(m);
    return rio__gw_send_buf(c, r, 200, &b);
}

int rio__gw_put_bucket_tagging(struct MHD_Connection *c, struct gw_req *r)
{
    struct gw_meta *m;
    struct gw_buf b = {0};
    const char *code, *why;
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    if (!(m = btags_new()))
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    ret = rio__gw_tags_from_xml(r->buf ? r->buf : "", r->blen, m, &code, &why);
    if (ret < 0) {
        rio__gw_meta_free(m);
        return ret == -ENOMEM ? rio__gw_error(c, r, 500, "InternalError", "Out of memory.")
                              : rio__gw_error(c, r, 400, code, why);
    }
    if (m->ntags) { /* an empty TagSet: none, as DeleteBucketTagging */
        rio__gw_buf_put(&b, GW_BTAGS_MAGIC, strlen(GW_BTAGS_MAGIC));
        rio__gw_tags_xml(m, &b);
    }
    rio__gw_meta_free(m);
    if (b.oom) {
        rio__gw_buf_free(&b);
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    ret = b.len ? rio__gw_bucket_rec_put(GW_BTAGS_PREFIX, r->bucket, b.p, b.len)
                : rio__gw_btags_drop(r->bucket);
    rio__gw_buf_free(&b);
    if (ret == RIO_ENOTFOUND) /* the bucket went meanwhile (a drop never says it) */
        return rio__gw_error(c, r, 404, "NoSuchBucket", "The specified bucket does not exist.");
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "bucket tags");
    return rio__gw_send_empty(c, r, 204);
}

int rio__gw_btags_drop(const char *bucket)
{
    return rio__gw_bucket_rec_drop(GW_BTAGS_PREFIX, bucket);
}

int rio__gw_delete_bucket_tagging(struct MHD_Connection *c, struct gw_req *r)
{
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    ret = rio__gw_btags_drop(r->bucket);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "bucket tags");
    return rio__gw_send_empty(c, r, 204);
}
