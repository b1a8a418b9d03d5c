/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Multipart uploads (docs/gateway.md): an upload is the backend object
 * ".rio-mpu/BUCKET/ID" holding its key, each part an object of its own,
 * ".rio-mpu/BUCKET/ID.p/NNNNN" (not under "ID/": on file:// the marker is
 * a file and cannot also be a directory), streamed in like a PutObject (its
 * ETag the part's MD5). Complete composes the parts into the object without a copy
 * where the backend can (rados://: a head that lists the parts' chunks),
 * else streams them in order through the engine's reader into one writer
 * (either way the object appears whole, at once), then drops what is left
 * of the upload; Abort drops it. The ETag Complete answers is S3's: the MD5
 * of the parts' MD5s and "-N".
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <microhttpd.h>
#include <openssl/evp.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "server/s3/gw.h"
#include "server/s3/meta.h"
#include "server/server.h"

#define XMLNS "http://s3.amazonaws.com/doc/2006-03-01/"
#define XML_HEAD "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
#define COPY_BLOCK (1u << 20)
#define ID_LEN 32
/* An upload's marker: its key, then (when the upload has metadata) a NUL
 * and the metadata record of CreateMultipartUpload's headers. */
#define MARKER_MAX (RIO_KEY_MAX + 1 + GW_META_REC_MAX)

static int valid_id(const char *id)
{
    return id && strlen(id) == ID_LEN && strspn(id, "0123456789abcdef") == ID_LEN;
}

static void upload_key(const struct gw_req *r, const char *id, char *out, size_t cap)
{
    snprintf(out, cap, GW_MPU_PREFIX "%s/%s", r->bucket, id);
}

static void part_key(const struct gw_req *r, const char *id, unsigned n, char *out, size_t cap)
{
    snprintf(out, cap, GW_MPU_PREFIX "%s/%s" GW_MPU_PARTDIR "%05u", r->bucket, id, n);
}

/* Read upload marker k: its bytes in a new buffer (*out, NUL-terminated),
 * their count, or an error. */
static int64_t read_marker(const char *k, char **out)
{
    char *b = rio__malloc(MARKER_MAX + 1);
    int64_t n;

    *out = NULL;
    if (!b)
        return -ENOMEM;
    n = rio_get(rio__gw_client(), k, b, MARKER_MAX, NULL);
    if (n < 0) {
        rio__free(b);
        return n;
    }
    b[n] = '\0';
    *out = b;
    return n;
}

/* The upload named by ?uploadId exists and is r's key: 0, else an error
 * response queued (*ret). *mp (when not NULL): the upload's metadata, NULL
 * when it has none (or a record that does not parse: logged). */
static int need_upload_or_gone(struct MHD_Connection *c, struct gw_req *r, const char **idp,
                               int *ret, struct gw_meta **mp, int *gone);

static int need_upload(struct MHD_Connection *c, struct gw_req *r, const char **idp, int *ret,
                       struct gw_meta **mp)
{
    return need_upload_or_gone(c, r, idp, ret, mp, NULL);
}

/* need_upload, but when gone is not NULL an upload id of the right form
 * whose upload is not there sets *gone and queues nothing. */
static int need_upload_or_gone(struct MHD_Connection *c, struct gw_req *r, const char **idp,
                               int *ret, struct gw_meta **mp, int *gone)
{
    const char *id = rio__gw_arg(r, "uploadId");
    char k[160], *buf = NULL;
    size_t klen;
    int64_t n;

    if (mp)
        *mp = NULL;
    if (!valid_id(id)) {
        *ret = rio__gw_error(c, r, 404, "NoSuchUpload", "The specified upload does not exist.");
        return -1;
    }
    upload_key(r, id, k, sizeof(k));
    n = read_marker(k, &buf);
    klen = n >= 0 ? strnlen(buf, (size_t)n) : 0;
    if (n == RIO_ENOTFOUND && gone) {
        *gone = 1;
        return -1;
    }
    if (n == RIO_ENOTFOUND ||
        (n >= 0 && (klen != strlen(r->key) || memcmp(buf, r->key, klen) != 0))) {
        rio__free(buf);
        *ret = rio__gw_error(c, r, 404, "NoSuchUpload", "The specified upload does not exist.");
        return -1;
    }
    if (n < 0) {
        *ret = rio__gw_rio_error(c, r, (int)n, GW_LOOKUP, "upload lookup");
        return -1;
    }
    if (mp && (size_t)n > klen + 1)
        *mp = rio__gw_meta_parse_logged(k, buf + klen + 1, (size_t)n - klen - 1, NULL);
    rio__free(buf);
    *idp = id;
    return 0;
}

static void xml_elem(struct gw_buf *b, const char *tag, const char *s)
{
    rio__gw_buf_printf(b, "<%s>", tag);
    rio__gw_buf_xml(b, s);
    rio__gw_buf_printf(b, "</%s>", tag);
}

/* Write upload marker k: r's key, and r's metadata record when it has any
 * (its identity is the object Complete writes, filled in then). */
static int put_marker(const struct gw_req *r, const char *k)
{
    size_t klen = strlen(r->key), rlen = 0;
    char *rec = NULL, *buf;
    int ret;

    if (rio__gw_meta_is_default(r->meta, ""))
        return rio_put(rio__gw_client(), k, r->key, klen, NULL, NULL);
    ret = rio__gw_meta_encode(r->meta, r->bkey, &rec, &rlen);
    if (ret < 0)
        return ret;
    buf = rio__malloc(klen + 1 + rlen);
    if (!buf) {
        rio__free(rec);
        return -ENOMEM;
    }
    memcpy(buf, r->key, klen + 1);
    memcpy(buf + klen + 1, rec, rlen);
    ret = rio_put(rio__gw_client(), k, buf, klen + 1 + rlen, NULL, NULL);
    rio__free(buf);
    rio__free(rec);
    return ret;
}

int rio__gw_mpu_create(struct MHD_Connection *c, struct gw_req *r)
{
    unsigned char rnd[ID_LEN / 2];
    char id[ID_LEN + 1], k[160];
    struct gw_buf b = {0};
    /* The algorithm the parts will carry checksums of (the client sends
     * them; Complete builds the composite one when all do) */
    const char *algo = rio__gw_header(c, "x-amz-checksum-algorithm");
    const char *type = rio__gw_header(c, "x-amz-checksum-type");
    int ret;

    if (algo && !rio__gw_ck_len(algo))
        return rio__gw_error(c, r, 400, "InvalidRequest",
                             "Checksum algorithm provided is unsupported. Please try again with "
                             "any of the valid types: [CRC32, CRC32C, CRC64NVME, SHA1, SHA256]");
    if (type &&
        (!algo || (strcasecmp(type, "COMPOSITE") != 0 && strcasecmp(type, "FULL_OBJECT") != 0)))
        return rio__gw_error(c, r, 400, "InvalidRequest",
                             "Value for x-amz-checksum-type header is invalid.");
    if (rio__gw_need_bucket(c, r, &ret) < 0 || rio__gw_meta_from_request(c, r, &r->meta, &ret) < 0)
        return ret;
    if (algo) /* the upload's record keeps it, for Complete */
        rio__gw_meta_set_checksum(r->meta, algo, "");
    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        return rio__gw_error(c, r, 500, "InternalError", "No randomness for the upload id.");
    for (size_t i = 0; i < sizeof(rnd); i++)
        snprintf(id + 2 * i, 3, "%02x", rnd[i]);
    upload_key(r, id, k, sizeof(k));
    ret = put_marker(r, k);
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "create upload");
    rio__gw_buf_printf(&b, XML_HEAD "<InitiateMultipartUploadResult xmlns=\"" XMLNS "\">");
    xml_elem(&b, "Bucket", r->bucket);
    xml_elem(&b, "Key", r->key);
    xml_elem(&b, "UploadId", id);
    rio__gw_buf_printf(&b, "</InitiateMultipartUploadResult>\n");
    const char *const hdrs[] = {"x-amz-checksum-algorithm", algo, "x-amz-checksum-type",
                                type                                     ? type
                                : algo && !strcasecmp(algo, "crc64nvme") ? "FULL_OBJECT"
                                                                         : "COMPOSITE",
                                NULL};
    return rio__gw_send_buf_with(c, r, 200, &b, algo ? hdrs : NULL);
}

/* The bucket, the upload and ?partNumber of an UploadPart(Copy): r->bkey
 * becomes the part's key; 0, else the answer queued (*ret). */
static int part_target(struct MHD_Connection *c, struct gw_req *r, int *ret, struct gw_meta **mp)
{
    const char *id = NULL, *pn = rio__gw_arg(r, "partNumber");
    char *k;
    uint64_t n;

    if (rio__gw_need_bucket(c, r, ret) < 0 || need_upload(c, r, &id, ret, mp) < 0)
        return -1;
    if (rio__gw_parse_count(pn, GW_MPU_PARTS_MAX, &n) < 0 || n < 1) {
        *ret = rio__gw_error(c, r, 400, "InvalidArgument",
                             "Part number must be an integer between 1 and 10000, inclusive.");
        return -1;
    }
    k = rio__malloc(160);
    if (!k) {
        *ret = MHD_NO;
        return -1;
    }
    part_key(r, id, (unsigned)n, k, 160);
    rio__free(r->bkey);
    r->bkey = k;
    return 0;
}

int rio__gw_mpu_part_open(struct MHD_Connection *c, struct gw_req *r)
{
    int ret;

    if (part_target(c, r, &ret, NULL) < 0)
        return ret;
    return rio__gw_put_open(c, r);
}

/* A part's checksum, ".rio-mpu/B/ID.p/NNNNN.ck": "ETAG ALGO VALUE\n", ETAG
 * the part's MD5 when it was written. A part written again without a
 * checksum leaves it: read back, it counts only while ETAG is still the
 * part's (then the bytes are the same). Abort and Complete drop it with the
 * parts (their prefix); ListParts does not list it (not five digits). */
/* The key of the checksum kept beside part_bkey: 0, or -1 when it does
 * not fit out. */
static int part_ck_key(const char *part_bkey, char *out, size_t cap)
{
    int n = snprintf(out, cap, "%s" GW_MPU_CKSUFFIX, part_bkey);
    return n < 0 || (size_t)n >= cap ? -1 : 0;
}

int rio__gw_part_checksum_store(const char *part_bkey, const char *etag, const char *algo,
                                const char *value)
{
    char k[192], rec[160];
    int n = snprintf(rec, sizeof(rec), "%s %s %s\n", etag, algo, value);

    if (n < 0 || (size_t)n >= sizeof(rec) || part_ck_key(part_bkey, k, sizeof(k)) < 0)
        return RIO_EINVAL;
    return rio_put(rio__gw_client(), k, rec, (size_t)n, NULL, NULL);
}

/* The checksum kept for part num of upload id, whose ETag Complete found
 * to be etag: 1 with *algo and *value (NUL-terminated), 0 when none counts
 * (none kept, another version's, or bytes this code did not write), or an
 * error. */
static int part_checksum_load(const struct gw_req *r, const char *id, unsigned num,
                              const char *etag, char algo[12], char value[48])
{
    char k[192], rec[161], *sp1, *sp2, *nl;
    struct gw_meta m;
    int64_t n;

    part_key(r, id, num, k, sizeof(k));
    strcat(k, GW_MPU_CKSUFFIX);
    n = rio_get(rio__gw_client(), k, rec, sizeof(rec) - 1, NULL);
    if (n == RIO_ENOTFOUND)
        return 0;
    if (n < 0)
        return (int)n;
    rec[n] = '\0';
    sp1 = strchr(rec, ' ');
    sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
    nl = sp2 ? strchr(sp2 + 1, '\n') : NULL;
    if (!nl || nl[1] || (size_t)(sp1 - rec) != strlen(etag) || memcmp(rec, etag, strlen(etag)) != 0)
        return 0;
    *sp2 = *nl = '\0';
    memset(&m, 0, sizeof(m));
    if (strlen(sp1 + 1) >= 12 || strlen(sp2 + 1) >= 48 || strchr(sp2 + 1, '-') ||
        rio__gw_meta_set_checksum(&m, sp1 + 1, sp2 + 1) < 0)
        return 0;
    memcpy(algo, m.ck_algo, 12);
    memcpy(value, m.ck_value, 48);
    return 1;
}

int rio__gw_mpu_part_copy(struct MHD_Connection *c, struct gw_req *r)
{
    struct gw_meta *m = NULL;
    int ret;

    if (part_target(c, r, &ret, &m) < 0)
        return ret;
    /* An upload created with an algorithm: the copied part gets its
     * checksum as S3 gives it one, so that Complete can build the
     * composite one (rio__gw_copy_object computes it). */
    if (m && m->ck_algo[0]) {
        snprintf(r->copy_ck_algo, sizeof(r->copy_ck_algo), "%s", m->ck_algo);
        for (char *q = r->copy_ck_algo; *q; q++)
            *q = (char)(*q >= 'A' && *q <= 'Z' ? *q - 'A' + 'a' : *q);
    }
    rio__gw_meta_free(m);
    return rio__gw_copy_object(c, r, rio__gw_header(c, "x-amz-copy-source"));
}

int rio__gw_each_key(const char *prefix, unsigned flags,
                     int (*fn)(void *arg, const struct rio_entry *e), void *arg)
{
    char token[RIO_LIST_TOKEN_MAX + 1] = "";
    int ret = 0;

    do {
        struct rio_list_args a;
        struct rio_list_page p;
        memset(&a, 0, sizeof(a));
        memset(&p, 0, sizeof(p));
        a.prefix = prefix;
        a.token = token;
        a.flags = flags;
        ret = rio_list(rio__gw_client(), &a, &p, NULL);
        if (ret < 0)
            return ret;
        for (unsigned i = 0; i < p.n && !ret; i++)
            ret = fn(arg, &p.entries[i]);
        snprintf(token, sizeof(token), "%s", p.next_token);
        rio_list_page_cleanup(&p);
    } while (token[0] && !ret);
    return ret;
}

int rio__gw_drop_entry(void *arg, const struct rio_entry *e)
{
    (void)arg;
    if (!(e->flags & RIO_ENTRY_DIR))
        rio_delete(rio__gw_client(), e->key);
    return 0;
}

/* Drop an upload's parts, then its marker (a crash in between leaves the
 * upload listed, for another Abort), then the parts again: an UploadPart
 * that committed after the first sweep and found the marker still there
 * (rio__gw_mpu_part_landed) is in the second; one that finds it gone drops
 * its part itself. Before, a part committed while Abort or Complete ran
 * stayed for ever, reachable by nothing (gateways review). */
static void drop_upload(const struct gw_req *r, const char *id)
{
    char k[160], m[160];

    snprintf(k, sizeof(k), GW_MPU_PREFIX "%s/%s" GW_MPU_PARTDIR, r->bucket, id);
    rio__gw_each_key(k, 0, rio__gw_drop_entry, NULL);
    upload_key(r, id, m, sizeof(m));
    rio_delete(rio__gw_client(), m);
    rio__gw_each_key(k, 0, rio__gw_drop_entry, NULL);
}

int rio__gw_mpu_part_landed(const struct gw_req *r)
{
    const char *id = rio__gw_arg(r, "uploadId");
    char k[192];
    struct rio_desc d;
    int ret;

    if (!valid_id(id))
        return RIO_ENOTFOUND;
    upload_key(r, id, k, sizeof(k));
    ret = rio_stat(rio__gw_client(), k, &d);
    if (ret == 0) {
        rio_desc_cleanup(&d);
        return 0;
    }
    if (ret != RIO_ENOTFOUND)
        return ret;
    rio_delete(rio__gw_client(), r->bkey);
    if (part_ck_key(r->bkey, k, sizeof(k)) == 0)
        rio_delete(rio__gw_client(), k);
    return RIO_ENOTFOUND;
}

int rio__gw_mpu_abort(struct MHD_Connection *c, struct gw_req *r)
{
    const char *id = NULL;
    int ret;

    if (rio__gw_need_bucket(c, r, &ret) < 0 || need_upload(c, r, &id, &ret, NULL) < 0)
        return ret;
    drop_upload(r, id);
    return rio__gw_send_empty(c, r, 204);
}

/* A count query parameter (NULL: def), up to 10 digits, above cap taken as
 * cap: 0, or -1 when it is not one. */
static int arg_count(const struct gw_req *r, const char *name, unsigned long def, unsigned long cap,
                     unsigned long *out)
{
    const char *v = rio__gw_arg(r, name);
    uint64_t n;

    *out = def;
    if (!v)
        return 0;
    if (rio__gw_parse_count(v, 9999999999ull, &n) < 0)
        return -1;
    *out = n > cap ? cap : (unsigned long)n;
    return 0;
}

struct lpart {
    unsigned num;
    uint64_t size;
    int64_t mtime_ns;
    char etag[48];
};

/* Every part of an upload, to be sorted: a backend may list in any order
 * (rados://: the pool's), S3 lists by part number. */
struct parts_ctx {
    struct lpart *p;
    unsigned n, cap;
};

static int part_entry(void *arg, const struct rio_entry *e)
{
    struct parts_ctx *x = arg;
    const char *num = strrchr(e->key, '/');
    unsigned long v;

    if ((e->flags & RIO_ENTRY_DIR) || !num || strlen(num + 1) != 5 ||
        strspn(num + 1, "0123456789") != 5)
        return 0;
    v = strtoul(num + 1, NULL, 10);
    if (v < 1 || v > GW_MPU_PARTS_MAX)
        return 0;
    if (x->n == x->cap) {
        unsigned cap = x->cap ? x->cap * 2 : 64;
        struct lpart *np;
        if (x->cap >= GW_MPU_PARTS_MAX)
            return 0; /* more entries than parts can be: not ours */
        np = rio__realloc(x->p, (size_t)cap * sizeof(*np));
        if (!np)
            return -ENOMEM;
        x->p = np;
        x->cap = cap;
    }
    x->p[x->n].num = (unsigned)v;
    x->p[x->n].size = e->size;
    x->p[x->n].mtime_ns = e->mtime_ns;
    snprintf(x->p[x->n].etag, sizeof(x->p[x->n].etag), "%s", e->etag);
    x->n++;
    return 0;
}

static int lpart_cmp(const void *a, const void *b)
{
    const struct lpart *pa = a, *pb = b;
    return (pa->num > pb->num) - (pa->num < pb->num);
}

/* ListParts: by part number, after part-number-marker, max-parts (1000 at
 * most) a page, NextPartNumberMarker when truncated. */
int rio__gw_mpu_list_parts(struct MHD_Connection *c, struct gw_req *r)
{
    const char *id = NULL;
    struct gw_buf b = {0};
    struct parts_ctx x = {0};
    unsigned long max, marker;
    unsigned shown = 0, last = 0, i;
    char k[160];
    int ret;

    if (arg_count(r, "max-parts", 1000, 1000, &max) < 0)
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "max-parts must be a non-negative integer.");
    if (arg_count(r, "part-number-marker", 0, GW_MPU_PARTS_MAX, &marker) < 0)
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "part-number-marker must be a non-negative integer.");
    if (rio__gw_need_bucket(c, r, &ret) < 0 || need_upload(c, r, &id, &ret, NULL) < 0)
        return ret;
    snprintf(k, sizeof(k), GW_MPU_PREFIX "%s/%s" GW_MPU_PARTDIR, r->bucket, id);
    ret = rio__gw_each_key(k, 0, part_entry, &x);
    if (ret < 0) {
        rio__free(x.p);
        return rio__gw_rio_error(c, r, ret, GW_READS, "list parts");
    }
    if (x.n)
        qsort(x.p, x.n, sizeof(*x.p), lpart_cmp);
    rio__gw_buf_printf(&b, XML_HEAD "<ListPartsResult xmlns=\"" XMLNS "\">");
    xml_elem(&b, "Bucket", r->bucket);
    xml_elem(&b, "Key", r->key);
    xml_elem(&b, "UploadId", id);
    rio__gw_buf_printf(
        &b,
        "<Initiator><ID>railio</ID><DisplayName>railio</DisplayName></Initiator>" GW_OWNER_XML
        "<StorageClass>STANDARD</StorageClass>"
        "<PartNumberMarker>%lu</PartNumberMarker><MaxParts>%lu</MaxParts>",
        marker, max);
    for (i = 0; i < x.n && x.p[i].num <= marker; i++)
        ;
    for (; i < x.n && shown < max; i++, shown++) {
        char date[32];
        rio__gw_iso_date(x.p[i].mtime_ns, date);
        rio__gw_buf_printf(&b, "<Part><PartNumber>%u</PartNumber><LastModified>%s</LastModified>",
                           x.p[i].num, date);
        rio__gw_buf_etag(&b, x.p[i].etag);
        rio__gw_buf_printf(&b, "<Size>%llu</Size></Part>", (unsigned long long)x.p[i].size);
        last = x.p[i].num;
    }
    /* Always, as S3's: the last part shown (the marker when none was). */
    rio__gw_buf_printf(&b, "<NextPartNumberMarker>%lu</NextPartNumberMarker>",
                       shown ? (unsigned long)last : marker);
    rio__gw_buf_printf(&b, "<IsTruncated>%s</IsTruncated></ListPartsResult>\n",
                       i < x.n && shown ? "true" : "false");
    rio__free(x.p);
    return rio__gw_send_buf(c, r, 200, &b);
}

/* An entry of ListMultipartUploads: an upload (key, id) or, with a
 * delimiter, a common prefix (id ""). Ordered by name, then id, as S3. */
struct lup {
    char *name;
    char id[ID_LEN + 1];
    int64_t mtime_ns;
};

/* The max + 1 first entries after the markers, in order (one more than a
 * page, to know whether it is truncated): whatever the backend's listing
 * order, memory stays within a page's worth of keys. */
struct uploads_ctx {
    const char *prefix, *delim, *kmarker, *idmarker;
    size_t plen; /* of the markers' backend prefix */
    struct lup *it;
    unsigned n, keep;
};

static int lup_cmp(const char *name, const char *id, const struct lup *b)
{
    int c = strcmp(name, b->name);
    return c ? c : strcmp(id, b->id);
}

static int upload_entry(void *arg, const struct rio_entry *e)
{
    struct uploads_ctx *x = arg;
    const char *id = e->key + x->plen, *rest;
    char *key = NULL, *name;
    unsigned lo = 0, hi;
    int64_t n;

    if ((e->flags & RIO_ENTRY_DIR) || strlen(e->key) <= x->plen || !valid_id(id))
        return 0;
    n = read_marker(e->key, &key); /* the key, up to its NUL */
    if (n == -ENOMEM)
        return -ENOMEM;
    if (n < 0)
        return 0; /* completed or aborted meanwhile */
    if (strncmp(key, x->prefix, strlen(x->prefix)) != 0) {
        rio__free(key);
        return 0;
    }
    rest = key + strlen(x->prefix);
    if (x->delim && (rest = strstr(rest, x->delim)) != NULL) {
        key[rest - key + strlen(x->delim)] = '\0'; /* a common prefix */
        id = "";
    }
    /* The marker's buffer holds room for a whole record: keep only the name. */
    name = rio__strdup(key);
    rio__free(key);
    if (!name)
        return -ENOMEM;
    key = name;
    if (x->kmarker) {
        int cmp = strcmp(name, x->kmarker);
        /* After the key marker; at it, after the upload id marker. */
        if (cmp < 0 || (cmp == 0 && (!*id || !x->idmarker || strcmp(id, x->idmarker) <= 0))) {
            rio__free(key);
            return 0;
        }
    }
    /* Where it goes among the entries kept (binary search). */
    hi = x->n;
    while (lo < hi) {
        unsigned mid = (lo + hi) / 2;
        int cmp = lup_cmp(name, id, &x->it[mid]);
        if (cmp == 0) { /* a common prefix already kept */
            rio__free(key);
            return 0;
        }
        if (cmp < 0)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo >= x->keep) {
        rio__free(key);
        return 0;
    }
    if (x->n == x->keep)
        rio__free(x->it[--x->n].name); /* the last falls off */
    memmove(&x->it[lo + 1], &x->it[lo], (x->n - lo) * sizeof(*x->it));
    x->it[lo].name = name;
    snprintf(x->it[lo].id, sizeof(x->it[lo].id), "%s", id);
    x->it[lo].mtime_ns = e->mtime_ns;
    x->n++;
    return 0;
}

/* ListMultipartUploads: prefix, delimiter (any string: the keys are
 * folded here, each upload's read anyway), key-marker and
 * upload-id-marker, max-uploads (1000 at most) a page, NextKeyMarker and
 * NextUploadIdMarker when truncated, encoding-type=url. Every upload's
 * marker is read to learn its key (uploads are kept by id). */
int rio__gw_mpu_list_uploads(struct MHD_Connection *c, struct gw_req *r)
{
    const char *prefix = rio__gw_arg(r, "prefix"), *kmarker = rio__gw_arg(r, "key-marker");
    const char *idmarker = rio__gw_arg(r, "upload-id-marker");
    struct gw_buf b = {0};
    struct uploads_ctx x = {0};
    char bp[160];
    unsigned long max;
    unsigned shown;
    int ret, url;

    if (arg_count(r, "max-uploads", 1000, 1000, &max) < 0)
        return rio__gw_error(c, r, 400, "InvalidArgument",
                             "max-uploads must be a non-negative integer.");
    if (rio__gw_list_options(c, r, 1, &x.delim, &url, &ret) < 0 ||
        rio__gw_need_bucket(c, r, &ret) < 0)
        return ret;
    x.prefix = prefix ? prefix : "";
    x.kmarker = kmarker && *kmarker ? kmarker : NULL;
    x.idmarker = idmarker && *idmarker ? idmarker : NULL;
    x.keep = (unsigned)max + 1;
    x.it = rio__calloc(x.keep, sizeof(*x.it));
    if (!x.it)
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    snprintf(bp, sizeof(bp), GW_MPU_PREFIX "%s/", r->bucket);
    x.plen = strlen(bp);
    ret = 0;
    if (max > 0)
        ret = rio__gw_each_key(bp, RIO_LIST_DELIM, upload_entry, &x);
    if (ret < 0) {
        for (unsigned i = 0; i < x.n; i++)
            rio__free(x.it[i].name);
        rio__free(x.it);
        return rio__gw_rio_error(c, r, ret, GW_READS, "list uploads");
    }
    shown = x.n < max ? x.n : (unsigned)max;
    rio__gw_buf_printf(&b, XML_HEAD "<ListMultipartUploadsResult xmlns=\"" XMLNS "\">");
    xml_elem(&b, "Bucket", r->bucket);
    rio__gw_list_elem(&b, "KeyMarker", x.kmarker ? x.kmarker : "", url);
    xml_elem(&b, "UploadIdMarker", x.kmarker && x.idmarker ? x.idmarker : "");
    if (x.n > shown) {
        rio__gw_list_elem(&b, "NextKeyMarker", x.it[shown - 1].name, url);
        xml_elem(&b, "NextUploadIdMarker", x.it[shown - 1].id);
    }
    rio__gw_list_elem(&b, "Prefix", x.prefix, url);
    if (x.delim)
        rio__gw_list_elem(&b, "Delimiter", x.delim, url);
    if (url)
        rio__gw_buf_printf(&b, "<EncodingType>url</EncodingType>");
    rio__gw_buf_printf(&b, "<MaxUploads>%lu</MaxUploads><IsTruncated>%s</IsTruncated>", max,
                       x.n > shown ? "true" : "false");
    for (unsigned i = 0; i < shown; i++) {
        char date[32];
        if (!x.it[i].id[0])
            continue;
        rio__gw_iso_date(x.it[i].mtime_ns, date);
        rio__gw_buf_put(&b, "<Upload>", 8);
        rio__gw_list_elem(&b, "Key", x.it[i].name, url);
        xml_elem(&b, "UploadId", x.it[i].id);
        rio__gw_buf_printf(&b,
                           "<Initiator><ID>railio</ID><DisplayName>railio</DisplayName>"
                           "</Initiator>" GW_OWNER_XML "<StorageClass>STANDARD</StorageClass>"
                           "<Initiated>%s</Initiated></Upload>",
                           date);
    }
    for (unsigned i = 0; i < shown; i++)
        if (!x.it[i].id[0]) {
            rio__gw_buf_put(&b, "<CommonPrefixes>", 16);
            rio__gw_list_elem(&b, "Prefix", x.it[i].name, url);
            rio__gw_buf_put(&b, "</CommonPrefixes>", 17);
        }
    rio__gw_buf_printf(&b, "</ListMultipartUploadsResult>\n");
    for (unsigned i = 0; i < x.n; i++)
        rio__free(x.it[i].name);
    rio__free(x.it);
    return rio__gw_send_buf(c, r, 200, &b);
}

/* ----------------------------------------------------------- Complete */

struct part {
    unsigned num;
    char etag[48];
    uint64_t size, generation, chunk_size, nchunks;
    char ck_algo[12], ck_value[48]; /* the list's <ChecksumALGO> for it ("": none) */
};

struct complete_ctx {
    struct part *p;
    unsigned n, cap;
    int bad;
    unsigned num;
    char etag[48];
    char ck_algo[12], ck_value[48];
    const char *algo; /* of the element being read */
};

static int part_num_cb(void *arg, const char *text)
{
    struct complete_ctx *x = arg;
    uint64_t v = 0;

    if (rio__gw_parse_count(text, GW_MPU_PARTS_MAX, &v) < 0 || v < 1)
        x->bad = 1;
    x->num = (unsigned)v;
    return 0;
}

static int part_etag_cb(void *arg, const char *text)
{
    struct complete_ctx *x = arg;
    size_t n = strlen(text);

    if (n >= 2 && text[0] == '"' && text[n - 1] == '"') {
        text++;
        n -= 2;
    }
    if (n >= sizeof(x->etag))
        x->bad = 1;
    else
        snprintf(x->etag, sizeof(x->etag), "%.*s", (int)n, text);
    return 0;
}

/* A part's <ChecksumCRC32> (and the others): at most one, of a sane length
 * (its value is compared with what the part carried, not trusted). */
static int part_ck_cb(void *arg, const char *text)
{
    struct complete_ctx *x = arg;

    if (x->ck_algo[0] || !*text || strlen(text) >= sizeof(x->ck_value))
        x->bad = 1;
    else {
        snprintf(x->ck_algo, sizeof(x->ck_algo), "%s", x->algo);
        snprintf(x->ck_value, sizeof(x->ck_value), "%s", text);
    }
    return 0;
}

static int part_cb(void *arg, const char *raw, size_t len)
{
    static const char *const cks[][2] = {{"ChecksumCRC32", "crc32"},
                                         {"ChecksumCRC32C", "crc32c"},
                                         {"ChecksumCRC64NVME", "crc64nvme"},
                                         {"ChecksumSHA1", "sha1"},
                                         {"ChecksumSHA256", "sha256"}};
    struct complete_ctx *x = arg;

    x->num = 0;
    x->etag[0] = '\0';
    x->ck_algo[0] = '\0';
    if (rio__gw_xml_each(raw, len, "PartNumber", part_num_cb, x) < 0 ||
        rio__gw_xml_each(raw, len, "ETag", part_etag_cb, x) < 0 || !x->num)
        x->bad = 1;
    for (size_t i = 0; i < sizeof(cks) / sizeof(cks[0]) && !x->bad; i++) {
        x->algo = cks[i][1];
        if (rio__gw_xml_each(raw, len, cks[i][0], part_ck_cb, x) < 0)
            x->bad = 1;
    }
    if (x->bad)
        return 1;
    if (x->n == x->cap) {
        unsigned cap = x->cap ? x->cap * 2 : 64;
        struct part *np;
        if (x->n >= GW_MPU_PARTS_MAX) {
            x->bad = 1;
            return 1;
        }
        np = rio__realloc(x->p, (size_t)cap * sizeof(*np));
        if (!np) {
            x->bad = 1;
            return 1;
        }
        x->p = np;
        x->cap = cap;
    }
    x->p[x->n].num = x->num;
    snprintf(x->p[x->n].etag, sizeof(x->p[x->n].etag), "%s", x->etag);
    memcpy(x->p[x->n].ck_algo, x->ck_algo, sizeof(x->ck_algo));
    memcpy(x->p[x->n].ck_value, x->ck_value, sizeof(x->ck_value));
    x->n++;
    return 0;
}

static int hexval(char ch)
{
    return ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* S3's multipart ETag: the MD5 of the parts' binary MD5s, "-N". */
static int mpu_etag(const struct part *p, unsigned n, char out[48])
{
    EVP_MD_CTX *m = EVP_MD_CTX_new();
    unsigned char md[16];
    unsigned int len = 0;

    if (!m || !EVP_DigestInit_ex(m, EVP_md5(), NULL)) {
        EVP_MD_CTX_free(m);
        return -1;
    }
    for (unsigned i = 0; i < n; i++) {
        unsigned char b[16];
        if (strlen(p[i].etag) != 32) {
            EVP_MD_CTX_free(m);
            return -1;
        }
        for (int j = 0; j < 16; j++) {
            int hi = hexval(p[i].etag[2 * j]), lo = hexval(p[i].etag[2 * j + 1]);
            if (hi < 0 || lo < 0) {
                EVP_MD_CTX_free(m);
                return -1;
            }
            b[j] = (unsigned char)(hi * 16 + lo);
        }
        EVP_DigestUpdate(m, b, 16);
    }
    EVP_DigestFinal_ex(m, md, &len);
    EVP_MD_CTX_free(m);
    for (int j = 0; j < 16; j++)
        snprintf(out + 2 * j, 3, "%02x", md[j]);
    snprintf(out + 32, 16, "-%u", n);
    return 0;
}

/* Append the bytes of key k, generation gen (0: any), to w through buf
 * (COPY_BLOCK bytes). 0 or an error. */
static int copy_into(struct rio_writer *w, const char *k, uint64_t gen, char *buf)
{
    struct rio_reader *rd = NULL;
    struct rio_call call;

    memset(&call, 0, sizeof(call));
    call.expect_generation = gen;
    int ret = rio_reader_open(rio__gw_client(), k, 0, &call, &rd);
    while (ret == 0) {
        int64_t got = rio_reader_read(rd, buf, COPY_BLOCK);
        if (got <= 0) {
            ret = (int)got;
            break;
        }
        ret = rio_writer_write(w, buf, (size_t)got);
    }
    if (rd) {
        int rc = rio_reader_close(rd);
        if (!ret)
            ret = rc;
    }
    return ret;
}

/* Copy part key k (generation *gen) onto itself in chunks of cs bytes; *gen
 * becomes the copy's. 0 or an error (the part as it was). */
static int rechunk(const char *k, uint64_t size, uint64_t cs, uint64_t *gen)
{
    struct rio_writer *w = NULL;
    struct rio_desc d;
    char *buf = rio__malloc(COPY_BLOCK);
    int ret = buf ? 0 : -ENOMEM;

    if (ret == 0)
        ret = rio__writer_open_chunk(rio__gw_client(), k, size, cs, 0, NULL, &w);
    if (ret == 0)
        ret = copy_into(w, k, *gen, buf);
    rio__free(buf);
    if (ret < 0) {
        rio_writer_abort(w);
        return ret;
    }
    memset(&d, 0, sizeof(d));
    ret = rio_writer_close(w, &d);
    if (ret == 0)
        *gen = d.generation;
    rio_desc_cleanup(&d);
    return ret;
}

/* Where every part but the last composes (one chunk size, whole numbers of
 * chunks: what UploadPart writes for parts of one size) and the last does
 * not (chunks of another size: a last part smaller than the others but
 * larger than a chunk of its own size), that part is copied onto itself in
 * the others' chunk size, so that Complete copies one part rather than the
 * object. Best effort: an error leaves the parts as they were. */
static void last_fit(const char *id, struct gw_req *r, struct part *p, unsigned n)
{
    struct part *l = &p[n - 1];
    uint64_t cs = p[0].chunk_size;
    char k[160];

    if (n < 2 || !cs || l->chunk_size == cs || (l->nchunks <= 1 && l->size <= cs))
        return;
    for (unsigned i = 0; i + 1 < n; i++)
        if (p[i].chunk_size != cs || p[i].size % cs)
            return;
    part_key(r, id, l->num, k, sizeof(k));
    if (rechunk(k, l->size, cs, &l->generation) == 0)
        l->chunk_size = cs;
}

/* The parts, in order, composed into r's key without a copy where the
 * backend can (rados://: the object's head lists the parts' chunks); *out
 * its descriptor. RIO_ENOTSUP where it cannot: nothing changed. */
static int compose(struct gw_req *r, const char *id, struct part *p, unsigned n,
                   struct rio_desc *out)
{
    char *names = rio__malloc((size_t)n * 160);
    const char **keys = rio__malloc((size_t)n * sizeof(*keys));
    uint64_t *gens = rio__malloc((size_t)n * sizeof(*gens));
    int ret = -ENOMEM;

    if (names && keys && gens) {
        if (rio__t_ops(rio__gw_client()->t)->compose)
            last_fit(id, r, p, n);
        for (unsigned i = 0; i < n; i++) {
            keys[i] = names + (size_t)i * 160;
            part_key(r, id, p[i].num, names + (size_t)i * 160, 160);
            gens[i] = p[i].generation; /* the part whose ETag was checked */
        }
        /* A conditional Complete's condition on the key, as its writer's. */
        uint64_t dst_if = !r->put_cond                    ? 0
                          : r->cond.flags & RIO_IF_ABSENT ? RIO__PUT_IF_ABSENT
                                                          : r->cond.expect_generation;
        /* The parts' heads stay until the record is written and the upload
         * goes (complete_finish): a Complete cut short before its record
         * can be sent again, rather than finding its parts gone. */
        ret = rio__compose(rio__gw_client(), r->bkey, keys, gens, n, RIO_COMPOSE_KEEP_SOURCES,
                           dst_if, out);
    }
    rio__free(gens);
    rio__free(keys);
    rio__free(names);
    return ret;
}

/* The parts of an upload, in order, copied into one writer of r's key and
 * through ck (the object's checksum, NULL for none) before the commit: by
 * concat at once, by a long Complete a slice at a time. */
#define GW_CK_MISMATCH (-EBADMSG)
#define CK_MISMATCH_MSG                                                                            \
    "The object's checksum you specified (x-amz-checksum-*) did not match what the parts hold."

struct copier {
    struct gw_req *r;
    char id[ID_LEN + 1];
    const struct part *p;
    unsigned n, i; /* the parts, the one being copied */
    struct rio_writer *w;
    struct rio_reader *rd; /* of part i, once open */
    char *buf;             /* COPY_BLOCK bytes */
    struct rio_s3_check *ck;
};

/* Open the writer of total bytes and the buffer; takes ck (also on error,
 * when copier_release frees it). 0 or an error. */
static int copier_open(struct copier *cp, struct gw_req *r, const char *id, const struct part *p,
                       unsigned n, uint64_t total, struct rio_s3_check *ck)
{
    memset(cp, 0, sizeof(*cp));
    cp->r = r;
    snprintf(cp->id, sizeof(cp->id), "%s", id);
    cp->p = p;
    cp->n = n;
    cp->ck = ck;
    cp->buf = rio__malloc(COPY_BLOCK);
    if (!cp->buf)
        return -ENOMEM;
    int ret =
        rio_writer_open(rio__gw_client(), r->bkey, total, 0, r->put_cond ? &r->cond : NULL, &cp->w);
    /* The object's ETag is the parts' (its record's), not the MD5 of its
     * bytes: that pass over every byte (one core, 256 MiB in ~0.4 s here)
     * bought nothing. */
    if (ret == 0)
        ret = rio__writer_no_md5(cp->w);
    return ret;
}

/* Copy until every part is in the writer (1, once ck, if any, holds;
 * GW_CK_MISMATCH when it does not) or until deadline_ns passes (0; a
 * deadline of 0: none). Or an error. */
static int copier_run(struct copier *cp, uint64_t deadline_ns)
{
    const char *code = NULL;
    char k[160];
    int ret = 0;

    while (ret == 0 && (!deadline_ns || rio__now_ns() < deadline_ns)) {
        int64_t got;
        if (!cp->rd) {
            struct rio_call call;
            if (cp->i == cp->n)
                return cp->ck && rio_s3_check_done(cp->ck, &code) < 0 ? GW_CK_MISMATCH : 1;
            memset(&call, 0, sizeof(call));
            call.expect_generation = cp->p[cp->i].generation; /* the part checked, or nothing */
            part_key(cp->r, cp->id, cp->p[cp->i].num, k, sizeof(k));
            ret = rio_reader_open(rio__gw_client(), k, 0, &call, &cp->rd);
            continue;
        }
        got = rio_reader_read(cp->rd, cp->buf, COPY_BLOCK);
        if (got < 0) {
            ret = (int)got;
        } else if (got == 0) {
            ret = rio_reader_close(cp->rd);
            cp->rd = NULL;
            cp->i++;
        } else {
            if (cp->ck)
                rio_s3_check_update(cp->ck, cp->buf, (size_t)got);
            ret = rio_writer_write(cp->w, cp->buf, (size_t)got);
        }
    }
    return ret;
}

/* Commit what copier_run copied whole: 0 with *out the object (its
 * checksum list freed), or an error. */
static int copier_commit(struct copier *cp, struct rio_desc *out)
{
    int ret = rio_writer_close(cp->w, out);

    cp->w = NULL;
    rio_desc_cleanup(out);
    return ret;
}

/* Drop what is held: a writer not committed is aborted (the upload stays). */
static void copier_release(struct copier *cp)
{
    if (cp->rd)
        rio_reader_close(cp->rd);
    if (cp->w)
        rio_writer_abort(cp->w);
    rio__free(cp->buf);
    rio_s3_check_free(cp->ck);
    memset(cp, 0, sizeof(*cp));
}

/* The room a copy of the n parts p (total bytes) holds at once: its
 * writer's window, the largest part's reader's ring, and its block. */
static uint64_t concat_window(const struct part *p, unsigned n, uint64_t total)
{
    uint64_t rd = 0;

    for (unsigned i = 0; i < n; i++) {
        uint64_t x = rio__gw_mem_window(p[i].size, p[i].chunk_size);
        rd = x > rd ? x : rd;
    }
    return rio__gw_mem_sum(rio__gw_mem_sum(rio__gw_mem_put_window(total), rd), COPY_BLOCK);
}

/* Copy the parts at once. Takes ck. 0, an error, or GW_CK_MISMATCH. */
static int concat(struct gw_req *r, const char *id, const struct part *p, unsigned n,
                  uint64_t total, struct rio_s3_check *ck, struct rio_desc *out)
{
    struct copier cp;
    int ret = copier_open(&cp, r, id, p, n, total, ck);

    if (ret == 0)
        ret = copier_run(&cp, 0);
    if (ret == 1)
        ret = copier_commit(&cp, out);
    copier_release(&cp);
    return ret;
}

/* Whether a and b hold the same bytes: the same size and chunk geometry,
 * and the same chunk checksums (or, where the backend keeps none, the same
 * whole-stream etag). */
static bool same_bytes(const struct rio_desc *a, const struct rio_desc *b)
{
    if (a->size != b->size || a->chunk_size != b->chunk_size || a->nchunks != b->nchunks)
        return false;
    if (a->xxh && b->xxh)
        return a->nchunks <= SIZE_MAX / sizeof(*a->xxh) &&
               memcmp(a->xxh, b->xxh, (size_t)a->nchunks * sizeof(*a->xxh)) == 0;
    return !a->xxh && !b->xxh && a->etag[0] && strcmp(a->etag, b->etag) == 0;
}

/*
 * Two gateways completing one upload at once each commit a version of the
 * same bytes, and the record written last may name the version that lost
 * (its generation): then GET and HEAD would not find the multipart ETag.
 * So, once the record is written, while the key's head is another version
 * of the very same bytes, the record is written again for that version. A
 * head with other bytes (a PutObject that came after) keeps its own record.
 * *d becomes the version the record names.
 */
static int record_follows_head(struct gw_req *r, struct rio_desc *d)
{
    for (int i = 0; i < 4; i++) {
        struct rio_desc cur;
        memset(&cur, 0, sizeof(cur));
        if (rio_stat(rio__gw_client(), r->bkey, &cur) < 0 || !cur.generation ||
            cur.generation == d->generation || !same_bytes(&cur, d)) {
            rio_desc_cleanup(&cur);
            return 0;
        }
        SRV_DEBUG("s3: complete: another gateway committed the same bytes: record follows");
        rio_desc_cleanup(d);
        *d = cur;
        int ret = rio__gw_meta_store(r->bucket, r->key, NULL, r->meta, d);
        if (ret < 0)
            return ret;
    }
    return 0;
}

void rio__gw_object_url(struct MHD_Connection *c, const struct gw_req *r, struct gw_buf *b)
{
    const char *host = rio__gw_header(c, "Host");

    if (host && *host && strlen(host) < 256 &&
        strspn(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") ==
            strlen(host)) {
        rio__gw_buf_put(b, "http://", 7);
        rio__gw_buf_put(b, host, strlen(host));
    }
    rio__gw_buf_put(b, "/", 1);
    if (!r->vhost) { /* virtual-hosted style: the bucket is in the host name */
        rio__gw_list_text(b, r->bucket, 1);
        rio__gw_buf_put(b, "/", 1);
    }
    rio__gw_list_text(b, r->key, 1);
}

/* Complete's <Location>: the object's URL. */
static void location(struct MHD_Connection *c, const struct gw_req *r, struct gw_buf *b)
{
    rio__gw_buf_put(b, "<Location>", 10);
    rio__gw_object_url(c, r, b);
    rio__gw_buf_put(b, "</Location>", 11);
}

/* Complete's result element (after the XML declaration): the object's
 * URL, bucket, key and ETag. */
static void complete_result(struct MHD_Connection *c, const struct gw_req *r, const char *etag,
                            struct gw_buf *b)
{
    rio__gw_buf_printf(b, "<CompleteMultipartUploadResult xmlns=\"" XMLNS "\">");
    location(c, r, b);
    xml_elem(b, "Bucket", r->bucket);
    xml_elem(b, "Key", r->key);
    rio__gw_buf_etag(b, etag);
    rio__gw_checksum_xml(b, r->meta);
    rio__gw_buf_printf(b, "</CompleteMultipartUploadResult>\n");
}

static int complete_answer(struct MHD_Connection *c, struct gw_req *r, const char *etag)
{
    struct gw_buf b = {0};

    rio__gw_buf_put(&b, XML_HEAD, strlen(XML_HEAD));
    complete_result(c, r, etag, &b);
    return rio__gw_send_buf(c, r, 200, &b);
}

/* Does r's key hold the object of the multipart ETag etag (its record's
 * ETag, which the list of parts determines: so the same bytes)? keep: when
 * it does, its record is handed back there (NULL: freed). */
static bool key_holds(const struct gw_req *r, const char *etag, struct gw_meta **keep)
{
    struct rio_desc d;
    struct gw_meta *m = NULL;
    int sure = 0;
    bool same = false;

    memset(&d, 0, sizeof(d));
    if (rio_stat(rio__gw_client(), r->bkey, &d) == 0) {
        m = rio__gw_meta_load(r->bucket, r->key, &d, &sure);
        same = m && strcmp(m->s3etag, etag) == 0;
    }
    rio_desc_cleanup(&d);
    if (same && keep)
        *keep = m;
    else
        rio__gw_meta_free(m);
    return same;
}

/* A Complete that failed (ret) made by another Complete of the same upload
 * (a client's retry) meanwhile: the key holds the object of its list of
 * parts. Not when this one's condition was refused while its upload is
 * still there (a refused Complete keeps it; one of the same upload that
 * succeeded drops it): the object then came from another upload of the
 * same bytes, and the condition did not hold for this one. */
static bool made_by_retry(const struct gw_req *r, const char *id, int ret, const char *etag)
{
    char ukey[RIO_KEY_MAX + 1];
    struct rio_desc d;
    bool upload_left;

    if (ret == GW_CK_MISMATCH || !key_holds(r, etag, NULL))
        return false;
    if (!(r->put_cond && ret == RIO_EGENERATION))
        return true;
    upload_key(r, id, ukey, sizeof(ukey));
    memset(&d, 0, sizeof(d));
    upload_left = rio_stat(rio__gw_client(), ukey, &d) != RIO_ENOTFOUND;
    rio_desc_cleanup(&d);
    return !upload_left;
}

/* What Complete does once the object is written (*d, cleaned up here): its
 * record (the ETag, the parts' sizes, the upload's metadata; without it
 * the upload stays, so that Complete may be sent again), then the upload
 * dropped. 0 or an error. */
static int complete_finish(struct gw_req *r, const char *id, struct rio_desc *d)
{
    int ret = rio__gw_meta_store(r->bucket, r->key, NULL, r->meta, d);

    if (ret == 0)
        ret = record_follows_head(r, d);
    rio_desc_cleanup(d);
    rio__gw_head_drop(r->bkey); /* after the record: the next GET reads both */
    if (ret == 0)
        drop_upload(r, id);
    return ret;
}

/* A Complete that copies many bytes (SLOW_COMPLETE and more: the parts
 * could not be composed) answers 200 at once and copies inside the
 * response's callback, a slice at a time, sending a space after each
 * slice, as S3 does: a client's read timeout (60 s for the aws CLI and
 * boto3) never fires while the gateway works, however large the object.
 * The outcome comes last, after the XML declaration and the spaces: the
 * result, or an <Error> (clients read a 200 Complete's body for one). A
 * connection cut in the middle aborts the writer: the upload stays. */
#define SLOW_COMPLETE (32ull << 20)
#define SLICE_NS 1000000000ull

struct slow_complete {
    struct copier cp;
    struct part *p; /* the parts cp copies */
    char etag[48];
    struct gw_buf out, result; /* to send; the result element, built up front */
    size_t opos;
    int finished;
};

static void slow_free(void *cls)
{
    struct slow_complete *s = cls;

    copier_release(&s->cp);
    rio__free(s->p);
    rio__gw_buf_free(&s->out);
    rio__gw_buf_free(&s->result);
    rio__free(s);
}

static ssize_t slow_cb(void *cls, uint64_t pos, char *buf, size_t max)
{
    struct slow_complete *s = cls;
    struct gw_req *r = s->cp.r; /* alive while the callback runs */
    struct rio_desc d;
    int ret;

    (void)pos;
    if (s->opos < s->out.len) {
        size_t n = s->out.len - s->opos < max ? s->out.len - s->opos : max;
        memcpy(buf, s->out.p + s->opos, n);
        s->opos += n;
        r->bytes_out += n;
        return (ssize_t)n;
    }
    if (s->finished)
        return MHD_CONTENT_READER_END_OF_STREAM;
    ret = copier_run(&s->cp, rio__now_ns() + SLICE_NS);
    if (ret == 0) {
        buf[0] = ' ';
        return 1;
    }
    s->finished = 1;
    s->out.len = 0;
    s->opos = 0;
    if (ret == 1) {
        memset(&d, 0, sizeof(d));
        ret = copier_commit(&s->cp, &d);
        if (ret == 0)
            ret = complete_finish(r, s->cp.id, &d);
    }
    /* Another Complete of this upload (a client's retry) may have made the
     * object and dropped the parts under this one. */
    if (ret < 0 && made_by_retry(r, s->cp.id, ret, s->etag))
        ret = 0;
    if (ret < 0) {
        int status;
        bool refused = r->put_cond && ret == RIO_EGENERATION; /* the condition */
        const char *code = ret == GW_CK_MISMATCH ? "BadDigest"
                           : refused             ? "PreconditionFailed"
                                                 : rio__gw_code_of(ret, &status);
        if (ret == GW_CK_MISMATCH)
            status = 400;
        else if (refused)
            status = 412;
        else
            SRV_WARN("s3: complete (after its 200): %s", rio_strerror(ret));
        r->status = status; /* for the log line and the metrics */
        rio__gw_buf_printf(&s->out, "<Error><Code>%s</Code><Message>", code);
        rio__gw_buf_xml(&s->out, ret == GW_CK_MISMATCH ? CK_MISMATCH_MSG
                                 : refused ? "At least one of the pre-conditions you specified "
                                             "did not hold"
                                           : rio_strerror(ret));
        rio__gw_buf_printf(&s->out, "</Message><RequestId>%s</RequestId></Error>\n",
                           rio__gw_request_id(r));
    } else {
        rio__gw_buf_put(&s->out, s->result.p, s->result.len);
    }
    if (s->out.oom)
        return MHD_CONTENT_READER_END_WITH_ERROR;
    return slow_cb(cls, pos, buf, max);
}

/* Answer 200 now and concatenate the parts in the response (above). Takes
 * *pp and *ckp. */
static int slow_complete(struct MHD_Connection *c, struct gw_req *r, const char *id,
                         struct part **pp, unsigned n, uint64_t total, const char *etag,
                         struct rio_s3_check **ckp)
{
    struct slow_complete *s = rio__calloc(1, sizeof(*s));
    struct MHD_Response *resp;
    int ret;

    if (!s) {
        rio__free(*pp);
        *pp = NULL;
        rio_s3_check_free(*ckp);
        *ckp = NULL;
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    s->p = *pp;
    *pp = NULL;
    snprintf(s->etag, sizeof(s->etag), "%s", etag);
    ret = copier_open(&s->cp, r, id, s->p, n, total, *ckp);
    *ckp = NULL;
    rio__gw_buf_put(&s->out, XML_HEAD, strlen(XML_HEAD));
    complete_result(c, r, etag, &s->result);
    if (ret == 0 && (s->out.oom || s->result.oom))
        ret = -ENOMEM;
    if (ret < 0) {
        slow_free(s);
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "complete");
    }
    resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 64 * 1024, slow_cb, s, slow_free);
    if (!resp) {
        slow_free(s);
        return MHD_NO;
    }
    MHD_add_response_header(resp, "Content-Type", "application/xml");
    r->bytes_out = 0;
    return rio__gw_send(c, r, 200, resp);
}

/* A Complete of an upload that is not there: a client's retry of a
 * Complete that succeeded (its answer lost to a timeout or a dropped
 * connection) is answered as the first was, when the key holds the object
 * those parts made: its record's ETag is the one the list of parts gives
 * (the MD5 of their MD5s, "-N"), so it holds those bytes. Else
 * NoSuchUpload. */
static int complete_again(struct MHD_Connection *c, struct gw_req *r, struct complete_ctx *x)
{
    struct gw_meta *m = NULL;
    char etag[48];

    if (mpu_etag(x->p, x->n, etag) < 0 || !key_holds(r, etag, &m))
        return rio__gw_error(c, r, 404, "NoSuchUpload", "The specified upload does not exist.");
    SRV_DEBUG("s3: complete: the upload is gone and the key holds its object: a retry");
    /* The object's record answers its checksum, as the first answer did. */
    rio__gw_meta_free(r->meta);
    r->meta = m;
    return complete_answer(c, r, etag);
}

/* A Complete that finds a part of its list gone while its upload is still
 * there: a Complete of this upload published the object, took the parts'
 * heads and was cut short before the upload went (its gateway killed: the
 * client then retries, through another). When the key holds the object
 * that list of parts made, answer as that Complete would have and finish
 * its work (the upload goes); else RIO_ENOTFOUND (InvalidPart). */
static int published_before(struct MHD_Connection *c, struct gw_req *r, const char *id,
                            struct complete_ctx *x)
{
    struct gw_meta *m = NULL;
    char etag[48];

    if (mpu_etag(x->p, x->n, etag) < 0 || !key_holds(r, etag, &m))
        return RIO_ENOTFOUND;
    SRV_INFO("s3: complete: a part is gone and the key holds the upload's object: a Complete "
             "of it was cut short; the upload goes");
    drop_upload(r, id);
    rio__gw_meta_free(r->meta);
    r->meta = m;
    return complete_answer(c, r, etag);
}

/* The object's checksum a Complete may carry: x-amz-checksum-CRC32, CRC32C,
 * CRC64NVME of the whole object (S3's FULL_OBJECT type), to be checked on
 * the bytes as the parts are copied (*out), or a composite one (the
 * checksum of the parts' checksums, "-N", or x-amz-checksum-type:
 * COMPOSITE), checked against the parts' (*out NULL). Either way algo and
 * value are what was sent ("" when nothing was). 0, or -1 with the answer
 * queued (*ret). */
static int object_check(struct MHD_Connection *c, struct gw_req *r, struct rio_s3_check **out,
                        char algo[12], char value[64], int *ret)
{
    static const char *const names[] = {"x-amz-checksum-crc32", "x-amz-checksum-crc32c",
                                        "x-amz-checksum-crc64nvme", "x-amz-checksum-sha1",
                                        "x-amz-checksum-sha256"};
    const char *type = rio__gw_header(c, "x-amz-checksum-type"), *name = NULL, *v = NULL;
    const char *code = NULL;
    size_t at = 0;
    int err;

    *out = NULL;
    algo[0] = value[0] = '\0';
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *h = rio__gw_header(c, names[i]);
        if (!h)
            continue;
        if (v) {
            *ret = rio__gw_error(c, r, 400, "InvalidRequest",
                                 "Expecting a single x-amz-checksum- header. Multiple checksum "
                                 "Types are not allowed.");
            return -1;
        }
        name = names[i];
        v = h;
        at = i;
    }
    if (type && strcasecmp(type, "FULL_OBJECT") != 0 && strcasecmp(type, "COMPOSITE") != 0) {
        *ret = rio__gw_error(c, r, 400, "InvalidRequest",
                             "Value for x-amz-checksum-type header is invalid.");
        return -1;
    }
    if (!v)
        return 0;
    if (strlen(v) >= 64) {
        *ret = rio__gw_error(c, r, 400, "InvalidRequest",
                             "The object's x-amz-checksum-* is not valid.");
        return -1;
    }
    snprintf(algo, 12, "%s", name + strlen("x-amz-checksum-"));
    snprintf(value, 64, "%s", v);
    /* SHA-1 and SHA-256 have only the composite form in S3: a value of
     * theirs without "-N" is the parts' composite too (and "bad" a
     * mismatch, BadDigest, not a FULL_OBJECT refused). */
    if (strchr(v, '-') || (type && strcasecmp(type, "COMPOSITE") == 0) || (at >= 3 && !type))
        return 0; /* checked against the parts' */
    if (at >= 3) {
        *ret = rio__gw_error(c, r, 400, "InvalidRequest",
                             "The FULL_OBJECT checksum type is not supported for SHA-1 or "
                             "SHA-256.");
        return -1;
    }
    err = rio_s3_check_new(name, v, out, &code);
    if (err < 0) {
        *ret = err == -ENOMEM ? rio__gw_error(c, r, 500, "InternalError", "Out of memory.")
                              : rio__gw_error(c, r, 400, code ? code : "InvalidRequest",
                                              "The object's x-amz-checksum-* is not valid.");
        return -1;
    }
    return 0;
}

/* S3's composite checksum of the n parts p (each with its checksum in
 * ck_algo, ck_value, one algorithm): that algorithm over their digests one
 * after the other, in base64, then "-n", into out. 0, or -1. */
static int composite_of(const struct part *p, unsigned n, char out[GW_META_CK_MAX])
{
    const char *algo = p[0].ck_algo;
    size_t dl = rio__gw_ck_len(algo);
    unsigned char *all = dl ? rio__malloc((size_t)n * dl) : NULL, d[32];
    char b64[48];
    int ok = all != NULL;

    for (unsigned i = 0; ok && i < n; i++)
        ok = strcmp(p[i].ck_algo, algo) == 0 &&
             rio__gw_b64dec(p[i].ck_value, all + (size_t)i * dl, dl) == (int)dl;
    if (ok && (!strcmp(algo, "crc32") || !strcmp(algo, "crc32c"))) {
        uint32_t v = !strcmp(algo, "crc32") ? rio__crc32(0, all, (size_t)n * dl)
                                            : rio__crc32c(0, all, (size_t)n * dl);
        d[0] = (unsigned char)(v >> 24);
        d[1] = (unsigned char)(v >> 16);
        d[2] = (unsigned char)(v >> 8);
        d[3] = (unsigned char)v;
    } else if (ok && (!strcmp(algo, "sha1") || !strcmp(algo, "sha256"))) {
        ok = EVP_Digest(all, (size_t)n * dl, d, NULL,
                        !strcmp(algo, "sha1") ? EVP_sha1() : EVP_sha256(), NULL) == 1;
    } else {
        ok = 0; /* crc64nvme has no composite form */
    }
    rio__free(all);
    if (!ok)
        return -1;
    EVP_EncodeBlock((unsigned char *)b64, d, (int)dl);
    snprintf(out, GW_META_CK_MAX, "%s-%u", b64, n);
    return 0;
}

/* The parts' checksums, when the list names any, a composite one was sent
 * (sent_algo, sent_value) or the upload was created with an algorithm: each part's <ChecksumALGO>
 * must be the one it carried (else 400 InvalidPart); a composite one sent must be the parts' (else
 * 400 BadDigest, or InvalidRequest when they carry none of its algorithm). When every part carried
 * one of one algorithm that has a composite form, the object's composite checksum goes into r->meta
 * (a full-object one, checked on the copy, goes there instead). 0, or -1 with the answer queued
 * (*ret). */
static int parts_checksums(struct MHD_Connection *c, struct gw_req *r, const char *id,
                           struct part *p, unsigned n, const char *sent_algo,
                           const char *sent_value, int full, int *ret)
{
    char algo[12], value[48], comp[GW_META_CK_MAX], msg[160];
    int want = (sent_algo[0] && !full) || (r->meta && r->meta->ck_algo[0]), all = 1;

    for (unsigned i = 0; i < n && !want; i++)
        want = p[i].ck_algo[0] != '\0';
    if (!want)
        return 0;
    for (unsigned i = 0; i < n; i++) {
        int got = part_checksum_load(r, id, p[i].num, p[i].etag, algo, value);
        if (got < 0) {
            *ret = rio__gw_rio_error(c, r, got, GW_LOOKUP, "part checksum");
            return -1;
        }
        if (p[i].ck_algo[0] &&
            (!got || strcasecmp(p[i].ck_algo, algo) != 0 || strcmp(p[i].ck_value, value) != 0)) {
            char up[sizeof(p[i].ck_algo)];
            for (size_t k = 0; k < sizeof(up); k++)
                up[k] = (char)toupper((unsigned char)p[i].ck_algo[k]);
            snprintf(msg, sizeof(msg),
                     "Part %u's Checksum%s in the list is not the checksum the part carried.",
                     p[i].num, up);
            *ret = rio__gw_error(c, r, 400, "InvalidPart", msg);
            return -1;
        }
        if (got) {
            memcpy(p[i].ck_algo, algo, sizeof(algo));
            memcpy(p[i].ck_value, value, sizeof(value));
        } else {
            all = 0;
        }
    }
    all = all && composite_of(p, n, comp) == 0;
    if (sent_algo[0] && !full) {
        const char *dash = strchr(sent_value, '-');
        size_t bl = dash ? (size_t)(dash - sent_value) : strlen(sent_value);
        if (!all || strcasecmp(p[0].ck_algo, sent_algo) != 0) {
            snprintf(msg, sizeof(msg),
                     "The parts did not all carry an x-amz-checksum-%s: the composite checksum "
                     "cannot be checked.",
                     sent_algo);
            *ret = rio__gw_error(c, r, 400, "InvalidRequest", msg);
            return -1;
        }
        if (strncmp(comp, sent_value, bl) != 0 || comp[bl] != '-' ||
            (dash && strcmp(comp + bl, dash) != 0)) {
            *ret = rio__gw_error(c, r, 400, "BadDigest",
                                 "The composite checksum you specified did not match the parts'.");
            return -1;
        }
    }
    if (all && !full && r->meta)
        rio__gw_meta_set_checksum(r->meta, p[0].ck_algo, comp);
    return 0;
}

int rio__gw_mpu_complete(struct MHD_Connection *c, struct gw_req *r)
{
    struct complete_ctx x = {0};
    struct rio_desc d;
    const char *id = NULL;
    struct rio_s3_check *ck = NULL;
    const char *mos = rio__gw_header(c, "x-amz-mp-object-size");
    char etag[48], k[160], ck_algo[12], ck_value[64];
    uint64_t total = 0, *sizes;
    int ret, gone = 0;

    if (rio__gw_need_bucket(c, r, &ret) < 0 ||
        need_upload_or_gone(c, r, &id, &ret, &r->meta, &gone) < 0) {
        if (!gone)
            return ret;
    }
    if (!r->buf || rio__gw_xml_wellformed(r->buf, r->blen, "CompleteMultipartUpload") < 0 ||
        rio__gw_xml_each_raw(r->buf, r->blen, "Part", part_cb, &x) < 0 || x.bad || x.n == 0) {
        rio__free(x.p);
        return rio__gw_error(c, r, 400, "MalformedXML",
                             "The XML you provided was not well-formed or did not validate.");
    }
    if (gone) {
        ret = complete_again(c, r, &x);
        rio__free(x.p);
        return ret;
    }
    for (unsigned i = 1; i < x.n; i++)
        if (x.p[i].num <= x.p[i - 1].num) {
            rio__free(x.p);
            return rio__gw_error(c, r, 400, "InvalidPartOrder",
                                 "The list of parts was not in ascending order.");
        }
    for (unsigned i = 0; i < x.n; i++) {
        part_key(r, id, x.p[i].num, k, sizeof(k));
        memset(&d, 0, sizeof(d));
        ret = rio_stat(rio__gw_client(), k, &d);
        rio_desc_cleanup(&d);
        if (ret == RIO_ENOTFOUND && (ret = published_before(c, r, id, &x)) >= 0) {
            rio__free(x.p);
            return ret;
        }
        if (ret == RIO_ENOTFOUND || (ret == 0 && strcmp(d.etag, x.p[i].etag) != 0)) {
            rio__free(x.p);
            return rio__gw_error(c, r, 400, "InvalidPart",
                                 "One or more of the specified parts could not be found or its "
                                 "ETag did not match.");
        }
        if (ret < 0) {
            rio__free(x.p);
            return rio__gw_rio_error(c, r, ret, GW_LOOKUP, "part lookup");
        }
        x.p[i].size = d.size;
        x.p[i].generation = d.generation;
        x.p[i].chunk_size = d.chunk_size;
        x.p[i].nchunks = d.nchunks;
        if (__builtin_add_overflow(total, d.size, &total)) {
            rio__free(x.p);
            return rio__gw_error(c, r, 400, "EntityTooLarge", "The object is too large.");
        }
    }
    /* S3's rule, which its clients size parts by: every part but the last
     * at least 5 MiB (--s3-min-part-size). The upload stays. */
    for (unsigned i = 0; i + 1 < x.n; i++)
        if (x.p[i].size < rio__gw_min_part()) {
            char msg[160];
            snprintf(msg, sizeof(msg),
                     "Part %u is %" PRIu64 " bytes: each part but the last must be at least "
                     "%" PRIu64 " bytes.",
                     x.p[i].num, x.p[i].size, rio__gw_min_part());
            rio__free(x.p);
            return rio__gw_error(c, r, 400, "EntityTooSmall", msg);
        }
    if (mpu_etag(x.p, x.n, etag) < 0) {
        rio__free(x.p);
        return rio__gw_error(c, r, 400, "InvalidPart", "A part's ETag is not an MD5.");
    }
    if (mos) { /* the object's size, as the client counts it */
        uint64_t want;
        if (rio__gw_parse_count(mos, UINT64_MAX, &want) < 0 || want != total) {
            rio__free(x.p);
            return rio__gw_error(c, r, 400, "InvalidRequest",
                                 "The x-amz-mp-object-size header is not the total size of the "
                                 "parts listed.");
        }
    }
    /* HEAD, GET and listings present the ETag answered here: the record
     * carries it, the parts' sizes (GET ?partNumber) and the upload's
     * metadata. Without it the upload stays, so that Complete may be sent
     * again. */
    if (!r->meta)
        r->meta = rio__gw_meta_new();
    sizes = r->meta ? rio__calloc(x.n, sizeof(*sizes)) : NULL;
    if (!sizes) {
        rio__free(x.p);
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    for (unsigned i = 0; i < x.n; i++)
        sizes[i] = x.p[i].size;
    r->meta->size = total;
    snprintf(r->meta->s3etag, sizeof(r->meta->s3etag), "%s", etag);
    /* More sizes than a record keeps (RIO_EINVAL): none is recorded, and a
     * GET of a part of this object is refused rather than served wrong. */
    ret = rio__gw_meta_set_parts(r->meta, sizes, x.n);
    rio__free(sizes);
    if (ret == -ENOMEM) {
        rio__free(x.p);
        return rio__gw_error(c, r, 500, "InternalError", "Out of memory.");
    }
    if (object_check(c, r, &ck, ck_algo, ck_value, &ret) < 0 ||
        parts_checksums(c, r, id, x.p, x.n, ck_algo, ck_value, ck != NULL, &ret) < 0) {
        rio_s3_check_free(ck);
        rio__free(x.p);
        return ret;
    }
    if (ck) /* kept once the copy has matched it */
        rio__gw_meta_set_checksum(r->meta, ck_algo, ck_value);
    /* If-None-Match, If-Match: the commit's condition (the upload stays
     * when it does not hold). */
    if (rio__gw_write_conditions(c, r, &ret) < 0) {
        rio_s3_check_free(ck);
        rio__free(x.p);
        return ret;
    }
    memset(&d, 0, sizeof(d));
    /* The object's own checksum is checked on its bytes: they are copied. */
    ret = ck ? RIO_ENOTSUP : compose(r, id, x.p, x.n, &d);
    /* A copy of the parts: its writer's slots, a part's reader's ring and
     * its block, of the body buffers' budget (bodymem.c), as a
     * CopyObject's; held until the request ends. */
    if (ret == RIO_ENOTSUP && rio__gw_mem_take(r, concat_window(x.p, x.n, total)) < 0) {
        rio_s3_check_free(ck);
        rio__free(x.p);
        return rio__gw_mem_refuse(c, r);
    }
    if (ret == RIO_ENOTSUP && total >= SLOW_COMPLETE)
        return slow_complete(c, r, id, &x.p, x.n, total, etag, &ck);
    if (ret == RIO_ENOTSUP)                           /* other backends, parts of uneven geometry */
        ret = concat(r, id, x.p, x.n, total, ck, &d); /* takes ck (NULL when composed) */
    rio__free(x.p);
    if (ret == GW_CK_MISMATCH)
        return rio__gw_error(c, r, 400, "BadDigest", CK_MISMATCH_MSG);
    if (ret == 0)
        ret = complete_finish(r, id, &d);
    if (ret < 0 && made_by_retry(r, id, ret, etag)) /* a retry's Complete made it meanwhile */
        ret = 0;
    if (ret == RIO_EGENERATION && r->put_cond) /* nothing published, the upload stays */
        return rio__gw_error(c, r, 412, "PreconditionFailed",
                             "At least one of the pre-conditions you specified did not hold");
    if (ret < 0)
        return rio__gw_rio_error(c, r, ret, GW_WRITES, "complete");
    r->bytes_out = 0;
    return complete_answer(c, r, etag);
}
