/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's object metadata record (meta.h; its format in
 * docs/gateway.md, "Object metadata"): built from request headers, encoded
 * as lines of text, parsed back. The parser reads bytes another gateway,
 * a crash or anyone with access to the backend may have left, so it bounds
 * every length, checks every field and refuses the whole record on the first
 * thing it did not expect; the caller then serves the object's defaults.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "railio.h"
#include "server/s3/meta.h"

#define MAGIC "railio-s3-meta 1"
#define MAGIC2 "railio-s3-meta 2" /* with tag lines */

const char *const rio__gw_meta_hdr_names[GW_MH__COUNT] = {
    "Content-Type",     "Content-Encoding", "Content-Disposition",
    "Content-Language", "Cache-Control",    "Expires",
};

/* Their names in a record. */
static const char *const rec_names[GW_MH__COUNT] = {
    "content-type",     "content-encoding", "content-disposition",
    "content-language", "cache-control",    "expires",
};

struct gw_meta *rio__gw_meta_new(void)
{
    return rio__calloc(1, sizeof(struct gw_meta));
}

void rio__gw_meta_free(struct gw_meta *m)
{
    if (!m)
        return;
    for (int i = 0; i < GW_MH__COUNT; i++)
        rio__free(m->hdr[i]);
    for (unsigned i = 0; i < m->nuser; i++) {
        rio__free(m->user[i].name);
        rio__free(m->user[i].value);
    }
    rio__free(m->user);
    rio__free(m->runs);
    rio__gw_meta_clear_tags(m);
    rio__free(m);
}

void rio__gw_meta_clear_tags(struct gw_meta *m)
{
    for (unsigned i = 0; i < m->ntags; i++) {
        rio__free(m->tags[i].name);
        rio__free(m->tags[i].value);
    }
    rio__free(m->tags);
    m->tags = NULL;
    m->ntags = m->captags = 0;
}

/* Characters (UTF-8 sequences) of a tag's key or value, at most max of
 * them: -1 when it holds a byte S3 refuses (a control character, one of
 * the ASCII signs it does not list, broken UTF-8), else the count. */
static long tag_chars(const char *s, size_t max)
{
    long n = 0;

    while (*s) {
        unsigned char ch = (unsigned char)*s;
        size_t len = ch < 0x80             ? 1
                     : (ch & 0xe0) == 0xc0 ? 2
                     : (ch & 0xf0) == 0xe0 ? 3
                     : (ch & 0xf8) == 0xf0 ? 4
                                           : 0;
        if (!len || (ch >= 0x80 && ch < 0xc2) || ch > 0xf4)
            return -1;
        if (len == 1 && !((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                          (ch >= '0' && ch <= '9') || strchr(" +-=._:/@", ch)))
            return -1;
        for (size_t i = 1; i < len; i++)
            if (((unsigned char)s[i] & 0xc0) != 0x80)
                return -1;
        s += len;
        if ((size_t)++n > max)
            return -1;
    }
    return n;
}

int rio__gw_meta_add_tag(struct gw_meta *m, const char *key, const char *value, const char **why)
{
    long kn = tag_chars(key, GW_META_TAG_KEY_MAX), vn = tag_chars(value, GW_META_TAG_VALUE_MAX);
    char *k, *v;

    if (kn < 1) {
        *why = "The TagKey you have provided is invalid (1 to 128 letters, digits, blanks or "
               "+-=._:/@).";
        return RIO_EINVAL;
    }
    if (vn < 0) {
        *why = "The TagValue you have provided is invalid (up to 256 letters, digits, blanks or "
               "+-=._:/@).";
        return RIO_EINVAL;
    }
    if (strncasecmp(key, "aws:", 4) == 0) {
        *why = "Your TagKey cannot be prefixed with aws:";
        return RIO_EINVAL;
    }
    for (unsigned i = 0; i < m->ntags; i++)
        if (strcmp(m->tags[i].name, key) == 0) {
            *why = "Cannot provide multiple Tags with the same key";
            return RIO_EINVAL;
        }
    if (m->ntags == (m->tags_max ? m->tags_max : GW_META_TAGS_MAX)) {
        *why = m->tags_max == GW_BUCKET_TAGS_MAX ? "Bucket tags cannot be greater than 50"
                                                 : "Object tags cannot be greater than 10";
        return -E2BIG;
    }
    if (m->ntags == m->captags) {
        unsigned cap = m->captags ? 2 * m->captags : 4;
        struct gw_meta_kv *nt = rio__realloc(m->tags, (size_t)cap * sizeof(*nt));
        if (!nt)
            return -ENOMEM;
        m->tags = nt;
        m->captags = cap;
    }
    k = rio__strdup(key);
    v = rio__strdup(value);
    if (!k || !v) {
        rio__free(k);
        rio__free(v);
        return -ENOMEM;
    }
    m->tags[m->ntags].name = k;
    m->tags[m->ntags].value = v;
    m->ntags++;
    return 0;
}

int rio__gw_meta_copy_tags(struct gw_meta *m, const struct gw_meta *src)
{
    const char *why;

    rio__gw_meta_clear_tags(m);
    for (unsigned i = 0; src && i < src->ntags; i++) {
        int ret = rio__gw_meta_add_tag(m, src->tags[i].name, src->tags[i].value, &why);
        if (ret < 0) {
            rio__gw_meta_clear_tags(m);
            return -ENOMEM; /* src's were valid */
        }
    }
    return 0;
}

static int hexv(char c);

/* [s, e) of a query, '+' a blank and %XX a byte (never NUL): a new string,
 * NULL for a bad escape (*oom on no memory). */
static char *query_dec(const char *s, const char *e, int *oom)
{
    char *d = rio__malloc((size_t)(e - s) + 1), *o = d;

    if (!d) {
        *oom = 1;
        return NULL;
    }
    for (; s < e; s++) {
        if (*s == '+') {
            *o++ = ' ';
        } else if (*s == '%') {
            int hi = e - s > 2 ? hexv(s[1]) : -1, lo = e - s > 2 ? hexv(s[2]) : -1;
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0)) {
                rio__free(d);
                return NULL;
            }
            *o++ = (char)(hi * 16 + lo);
            s += 2;
        } else {
            *o++ = *s;
        }
    }
    *o = '\0';
    return d;
}

int rio__gw_meta_tags_from_query(struct gw_meta *m, const char *q, const char **why)
{
    const char *p = q;
    int ret = 0;

    rio__gw_meta_clear_tags(m);
    while (*p && ret == 0) {
        const char *amp = strchr(p, '&'), *end = amp ? amp : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        int oom = 0;
        char *k = query_dec(p, eq ? eq : end, &oom);
        char *v = k ? query_dec(eq ? eq + 1 : end, end, &oom) : NULL;
        if (oom)
            ret = -ENOMEM;
        else if (!k || !v) {
            *why = "The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL "
                   "query parameters without tag name duplicates.";
            ret = RIO_EINVAL;
        } else {
            ret = rio__gw_meta_add_tag(m, k, v, why);
        }
        rio__free(k);
        rio__free(v);
        p = amp ? amp + 1 : end;
    }
    if (ret < 0)
        rio__gw_meta_clear_tags(m);
    return ret;
}

int rio__gw_meta_valid_value(const char *v, size_t max)
{
    size_t n = 0;

    for (; *v; v++, n++) {
        unsigned char ch = (unsigned char)*v;
        if ((ch < 0x20 && ch != '\t') || ch == 0x7f || n >= max)
            return 0;
    }
    return 1;
}

/* An HTTP token (RFC 9110 tchar), 1..max bytes. */
static int valid_name(const char *s, size_t max)
{
    size_t n = strlen(s);

    if (n == 0 || n > max)
        return 0;
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("!#$%&'*+-.^_`|~", ch)))
            return 0;
    }
    return 1;
}

int rio__gw_meta_set_hdr(struct gw_meta *m, int h, const char *value)
{
    char *v;

    if (h < 0 || h >= GW_MH__COUNT || !rio__gw_meta_valid_value(value, GW_META_VALUE_MAX))
        return GW_META_EBADVALUE;
    v = rio__strdup(value);
    if (!v)
        return -ENOMEM;
    rio__free(m->hdr[h]);
    m->hdr[h] = v;
    return 0;
}

int rio__gw_meta_add_user(struct gw_meta *m, const char *name, const char *value)
{
    size_t nl = strlen(name), vl = strlen(value);
    char *n, *v;

    if (nl > GW_META_USER_MAX || vl > GW_META_USER_MAX)
        return GW_META_ETOOLARGE;
    if (!valid_name(name, GW_META_USER_MAX) || !rio__gw_meta_valid_value(value, GW_META_USER_MAX))
        return GW_META_EBADVALUE;
    for (unsigned i = 0; i < m->nuser; i++) {
        size_t old;
        if (strcasecmp(m->user[i].name, name) != 0)
            continue;
        /* The same name again: "v1,v2", counted once more for the value. */
        old = strlen(m->user[i].value);
        if (m->user_bytes + 1 + vl > GW_META_USER_MAX)
            return GW_META_ETOOLARGE;
        v = rio__realloc(m->user[i].value, old + 1 + vl + 1);
        if (!v)
            return -ENOMEM;
        v[old] = ',';
        memcpy(v + old + 1, value, vl + 1);
        m->user[i].value = v;
        m->user_bytes += 1 + vl;
        return 0;
    }
    if (m->user_bytes + nl + vl > GW_META_USER_MAX)
        return GW_META_ETOOLARGE;
    if (m->nuser == m->capuser) {
        unsigned cap = m->capuser ? m->capuser * 2 : 8;
        struct gw_meta_kv *nu = rio__realloc(m->user, (size_t)cap * sizeof(*nu));
        if (!nu)
            return -ENOMEM;
        m->user = nu;
        m->capuser = cap;
    }
    n = rio__strdup(name);
    v = rio__strdup(value);
    if (!n || !v) {
        rio__free(n);
        rio__free(v);
        return -ENOMEM;
    }
    for (char *p = n; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    m->user[m->nuser].name = n;
    m->user[m->nuser].value = v;
    m->nuser++;
    m->user_bytes += nl + vl;
    return 0;
}

int rio__gw_meta_is_default(const struct gw_meta *m, const char *etag)
{
    if (!m)
        return 1;
    if (m->nuser || m->ntags || (m->s3etag[0] && strcmp(m->s3etag, etag) != 0) || m->ck_algo[0])
        return 0;
    for (int i = 0; i < GW_MH__COUNT; i++)
        if (m->hdr[i] && (i != GW_MH_CONTENT_TYPE || strcmp(m->hdr[i], GW_META_DEFAULT_TYPE) != 0))
            return 0;
    return 1;
}

size_t rio__gw_ck_len(const char *algo)
{
    static const struct {
        const char *name;
        size_t len;
    } algos[] = {{"crc32", 4}, {"crc32c", 4}, {"crc64nvme", 8}, {"sha1", 20}, {"sha256", 32}};

    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++)
        if (strcasecmp(algo, algos[i].name) == 0)
            return algos[i].len;
    return 0;
}

/* n bytes at s are the base64 of len bytes (padded, standard alphabet). */
static int is_b64_of(const char *s, size_t n, size_t len)
{
    size_t pad = (3 - len % 3) % 3, want = 4 * ((len + 2) / 3);

    if (n != want)
        return 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        int ok = i >= n - pad ? ch == '='
                              : (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') ||
                                    (ch >= '0' && ch <= '9') || ch == '+' || ch == '/';
        if (!ok)
            return 0;
    }
    return 1;
}

int rio__gw_meta_set_checksum(struct gw_meta *m, const char *algo, const char *value)
{
    size_t len = rio__gw_ck_len(algo), vn = strlen(value);
    const char *dash = strchr(value, '-');
    size_t b = dash ? (size_t)(dash - value) : vn;

    if (!len || vn >= GW_META_CK_MAX || (vn && !is_b64_of(value, b, len)))
        return RIO_EINVAL;
    if (dash) {
        unsigned long n = 0;
        const char *q = dash + 1;
        if (strcasecmp(algo, "crc64nvme") == 0 || !*q || *q == '0' || strlen(q) > 5)
            return RIO_EINVAL;
        for (; *q; q++) {
            if (*q < '0' || *q > '9')
                return RIO_EINVAL;
            n = n * 10 + (unsigned long)(*q - '0');
        }
        if (n > GW_META_PARTS_MAX)
            return RIO_EINVAL;
    }
    for (size_t i = 0; algo[i]; i++)
        m->ck_algo[i] = (char)(algo[i] >= 'A' && algo[i] <= 'Z' ? algo[i] - 'A' + 'a' : algo[i]);
    m->ck_algo[strlen(algo)] = '\0';
    memcpy(m->ck_value, value, vn + 1);
    return 0;
}

int rio__gw_meta_bytes_only(const struct gw_meta *m)
{
    struct gw_meta d;

    if (!m || !m->ck_algo[0] || m->nruns || m->s3etag[0])
        return 0;
    d = *m;
    d.ck_algo[0] = '\0';
    return rio__gw_meta_is_default(&d, "");
}

int rio__gw_meta_set_parts(struct gw_meta *m, const uint64_t *sizes, unsigned n)
{
    struct gw_meta_run *runs;
    unsigned nr = 0;

    if (n == 0 || n > GW_META_PARTS_MAX)
        return RIO_EINVAL;
    for (unsigned i = 0; i < n; i++)
        if (i == 0 || sizes[i] != sizes[i - 1])
            nr++;
    if (nr > GW_META_RUNS_MAX)
        return RIO_EINVAL;
    runs = rio__calloc(nr, sizeof(*runs));
    if (!runs)
        return -ENOMEM;
    nr = 0;
    for (unsigned i = 0; i < n; i++) {
        if (i == 0 || sizes[i] != sizes[i - 1])
            runs[nr++].size = sizes[i];
        runs[nr - 1].count++;
    }
    rio__free(m->runs);
    m->runs = runs;
    m->nruns = nr;
    return 0;
}

int rio__gw_meta_part(const struct gw_meta *m, unsigned pn, uint64_t *off, uint64_t *len,
                      unsigned *count)
{
    uint64_t o = 0;
    unsigned n = 0, seen = 0;

    if (!m || !m->nruns)
        return -1;
    for (unsigned i = 0; i < m->nruns; i++)
        n += m->runs[i].count;
    *count = n;
    if (pn == 0 || pn > n)
        return 0;
    for (unsigned i = 0; i < m->nruns; i++) {
        const struct gw_meta_run *r = &m->runs[i];
        if (pn - 1 < seen + r->count) {
            /* The parser checked that the sizes sum to the object's. */
            *off = o + (uint64_t)(pn - 1 - seen) * r->size;
            *len = r->size;
            return 1;
        }
        o += (uint64_t)r->count * r->size;
        seen += r->count;
    }
    return 0;
}

int rio__gw_meta_copy_content(struct gw_meta *dst, const struct gw_meta *src)
{
    int ret = 0;

    for (int i = 0; i < GW_MH__COUNT && ret == 0; i++)
        if (src->hdr[i])
            ret = rio__gw_meta_set_hdr(dst, i, src->hdr[i]);
    for (unsigned i = 0; i < src->nuser && ret == 0; i++)
        ret = rio__gw_meta_add_user(dst, src->user[i].name, src->user[i].value);
    return ret;
}

struct gw_meta *rio__gw_meta_dup(const struct gw_meta *m)
{
    struct gw_meta *d = rio__gw_meta_new();

    if (!d)
        return NULL;
    d->size = m->size;
    d->generation = m->generation;
    memcpy(d->etag, m->etag, sizeof(d->etag));
    memcpy(d->s3etag, m->s3etag, sizeof(d->s3etag));
    memcpy(d->ck_algo, m->ck_algo, sizeof(d->ck_algo));
    memcpy(d->ck_value, m->ck_value, sizeof(d->ck_value));
    if (m->nruns) {
        d->runs = rio__calloc(m->nruns, sizeof(*d->runs));
        if (!d->runs) {
            rio__gw_meta_free(d);
            return NULL;
        }
        memcpy(d->runs, m->runs, m->nruns * sizeof(*d->runs));
        d->nruns = m->nruns;
    }
    if (rio__gw_meta_copy_content(d, m) < 0 || rio__gw_meta_copy_tags(d, m) < 0) {
        rio__gw_meta_free(d);
        return NULL;
    }
    return d;
}

/* ------------------------------------------------------------ encoding */

struct out {
    char *p;
    size_t len, cap;
    int err;
};

static void out_put(struct out *o, const char *s, size_t n)
{
    if (o->err)
        return;
    if (o->len + n + 1 > GW_META_REC_MAX) {
        o->err = RIO_EINVAL;
        return;
    }
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 1024;
        char *np;
        while (cap < o->len + n + 1)
            cap *= 2;
        np = rio__realloc(o->p, cap);
        if (!np) {
            o->err = -ENOMEM;
            return;
        }
        o->p = np;
        o->cap = cap;
    }
    memcpy(o->p + o->len, s, n);
    o->len += n;
    o->p[o->len] = '\0';
}

static void out_printf(struct out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void out_printf(struct out *o, const char *fmt, ...)
{
    char tmp[128];
    va_list ap;
    int n;

    va_start(ap, fmt);
    n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    out_put(o, tmp, n < (int)sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

/* Percent-encoding as docs/rados.md's head: bytes <= 0x20, '%' and >= 0x7f
 * as %XX, so that a field holds no space nor newline. */
static void out_pct(struct out *o, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";

    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if (ch <= 0x20 || ch == '%' || ch >= 0x7f) {
            char e[3] = {'%', hex[ch >> 4], hex[ch & 15]};
            out_put(o, e, 3);
        } else {
            out_put(o, s, 1);
        }
    }
}

int rio__gw_meta_encode(const struct gw_meta *m, const char *bkey, char **out, size_t *len)
{
    struct out o = {0};

    out_put(&o, m->ntags ? MAGIC2 "\nkey " : MAGIC "\nkey ", strlen(MAGIC) + 5);
    out_pct(&o, bkey);
    out_printf(&o, "\nsize %llu\n", (unsigned long long)m->size);
    if (m->generation)
        out_printf(&o, "generation %016llx\n", (unsigned long long)m->generation);
    else
        out_put(&o, "generation -\n", 13);
    out_printf(&o, "etag %s\ns3-etag %s\n", m->etag[0] ? m->etag : "-",
               m->s3etag[0] ? m->s3etag : "-");
    if (m->nruns) {
        out_put(&o, "parts", 5);
        for (unsigned i = 0; i < m->nruns; i++)
            out_printf(&o, " %llux%u", (unsigned long long)m->runs[i].size, m->runs[i].count);
        out_put(&o, "\n", 1);
    }
    if (m->ck_algo[0])
        out_printf(&o, "checksum %s %s\n", m->ck_algo, m->ck_value[0] ? m->ck_value : "-");
    for (int i = 0; i < GW_MH__COUNT; i++) {
        if (!m->hdr[i])
            continue;
        out_printf(&o, "header %s ", rec_names[i]);
        out_pct(&o, m->hdr[i]);
        out_put(&o, "\n", 1);
    }
    for (unsigned i = 0; i < m->nuser; i++) {
        out_put(&o, "meta ", 5);
        out_pct(&o, m->user[i].name);
        out_put(&o, " ", 1);
        out_pct(&o, m->user[i].value);
        out_put(&o, "\n", 1);
    }
    for (unsigned i = 0; i < m->ntags; i++) {
        out_put(&o, "tag ", 4);
        out_pct(&o, m->tags[i].name);
        out_put(&o, " ", 1);
        out_pct(&o, m->tags[i].value);
        out_put(&o, "\n", 1);
    }
    out_put(&o, "end\n", 4);
    if (o.err) {
        rio__free(o.p);
        return o.err;
    }
    *out = o.p;
    *len = o.len;
    return 0;
}

/* ------------------------------------------------------------- parsing */

struct in {
    const char *p, *end;
    const char *why;
};

/* The next line (without its '\n') in [*s, *e); 0, or -1 at the end of the
 * input or on a line without its '\n'. */
static int next_line(struct in *in, const char **s, const char **e)
{
    const char *nl;

    if (in->p >= in->end)
        return -1;
    nl = memchr(in->p, '\n', (size_t)(in->end - in->p));
    if (!nl)
        return -1;
    *s = in->p;
    *e = nl;
    in->p = nl + 1;
    return 0;
}

static int hexv(char c)
{
    return c >= '0' && c <= '9'   ? c - '0'
           : c >= 'A' && c <= 'F' ? c - 'A' + 10
           : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                  : -1;
}

/* Percent-decode [s, e) into a new string: every byte as out_pct writes
 * it (none <= 0x20 bare, nor a NUL decoded), at most max decoded bytes.
 * NULL on a bad field or no memory (*oom set). */
static char *pct_dec(const char *s, const char *e, size_t max, int *oom)
{
    size_t n = (size_t)(e - s), j = 0;
    char *d;

    if (n > 3 * max + 3)
        return NULL;
    d = rio__malloc(n + 1);
    if (!d) {
        *oom = 1;
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch <= 0x20 || ch >= 0x7f)
            goto bad;
        if (ch == '%') {
            int hi, lo;
            if (i + 2 >= n)
                goto bad;
            hi = hexv(s[i + 1]);
            lo = hexv(s[i + 2]);
            if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
                goto bad;
            ch = (unsigned char)(hi * 16 + lo);
            i += 2;
        }
        d[j++] = (char)ch;
    }
    d[j] = '\0';
    if (j > max)
        goto bad;
    return d;
bad:
    rio__free(d);
    return NULL;
}

/* "NAME VALUE" with NAME exactly name: the value's bounds. */
static int field(const char *s, const char *e, const char *name, const char **v)
{
    size_t n = strlen(name);

    if ((size_t)(e - s) < n + 1 || memcmp(s, name, n) != 0 || s[n] != ' ')
        return -1;
    *v = s + n + 1;
    return 0;
}

static int parse_u64(const char *s, const char *e, int base, uint64_t *out)
{
    uint64_t v = 0;

    if (s == e || (base == 10 && e - s > 20) || (base == 16 && e - s != 16))
        return -1;
    if (base == 10 && *s == '0' && e - s > 1)
        return -1;
    for (; s < e; s++) {
        int d = base == 16 ? (*s >= 'a' || (*s >= '0' && *s <= '9') ? hexv(*s) : -1)
                           : (*s >= '0' && *s <= '9' ? *s - '0' : -1);
        if (d < 0 || v > (UINT64_MAX - (uint64_t)d) / (uint64_t)base)
            return -1;
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *out = v;
    return 0;
}

/* An etag field: "-" (none) or 1..47 of [0-9a-f-]. */
static int parse_etag(const char *s, const char *e, char out[48])
{
    size_t n = (size_t)(e - s);

    if (n == 1 && *s == '-') {
        out[0] = '\0';
        return 0;
    }
    if (n == 0 || n > 47)
        return -1;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f') || s[i] == '-'))
            return -1;
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

/* A parts line's value: runs "SIZExCOUNT" separated by one space, adjacent
 * runs of different sizes, at most GW_META_RUNS_MAX runs and
 * GW_META_PARTS_MAX parts, whose sizes sum to size. 0 or -1 (-ENOMEM). */
static int parse_runs(const char *s, const char *e, uint64_t size, struct gw_meta *m)
{
    uint64_t sum = 0;
    unsigned parts = 0, nr = 1;

    for (const char *q = s; q < e; q++)
        if (*q == ' ')
            nr++;
    if (nr > GW_META_RUNS_MAX)
        return -1;
    m->runs = rio__calloc(nr, sizeof(*m->runs));
    if (!m->runs)
        return -ENOMEM;
    for (unsigned i = 0; i < nr; i++) {
        const char *sp = memchr(s, ' ', (size_t)(e - s)), *end = sp ? sp : e;
        const char *x = memchr(s, 'x', (size_t)(end - s));
        uint64_t sz, cnt, bytes;
        if (!x || parse_u64(s, x, 10, &sz) < 0 || parse_u64(x + 1, end, 10, &cnt) < 0 || cnt == 0 ||
            cnt > GW_META_PARTS_MAX - parts || (i > 0 && sz == m->runs[i - 1].size) ||
            __builtin_mul_overflow(sz, cnt, &bytes) || __builtin_add_overflow(sum, bytes, &sum) ||
            (i + 1 < nr) != (sp != NULL))
            return -1;
        m->runs[i].size = sz;
        m->runs[i].count = (uint32_t)cnt;
        m->nruns = i + 1;
        parts += (unsigned)cnt;
        s = end + 1;
    }
    return sum == size ? 0 : -1;
}

#define BAD(msg)                                                                                   \
    do {                                                                                           \
        in.why = (msg);                                                                            \
        goto bad;                                                                                  \
    } while (0)

int rio__gw_meta_parse(const char *p, size_t n, struct gw_meta **out, char **bkey, const char **why)
{
    struct in in = {.p = p, .end = p + n};
    struct gw_meta *m = NULL;
    const char *s, *e, *v;
    char *key = NULL;
    int oom = 0, ret = RIO_EPROTO, v2;

    *out = NULL;
    if (bkey)
        *bkey = NULL;
    if (n > GW_META_REC_MAX)
        BAD("longer than a record may be");
    m = rio__gw_meta_new();
    if (!m)
        return -ENOMEM;
    if (next_line(&in, &s, &e) < 0 || (size_t)(e - s) != strlen(MAGIC) ||
        (memcmp(s, MAGIC, strlen(MAGIC)) != 0 && memcmp(s, MAGIC2, strlen(MAGIC2)) != 0))
        BAD("not a railio-s3-meta 1 or 2 record");
    v2 = s[strlen(MAGIC) - 1] == '2';
    if (next_line(&in, &s, &e) < 0 || field(s, e, "key", &v) < 0)
        BAD("no key line");
    key = pct_dec(v, e, RIO_KEY_MAX, &oom);
    if (!key || !*key)
        BAD("a bad key");
    if (next_line(&in, &s, &e) < 0 || field(s, e, "size", &v) < 0 ||
        parse_u64(v, e, 10, &m->size) < 0)
        BAD("a bad size line");
    if (next_line(&in, &s, &e) < 0 || field(s, e, "generation", &v) < 0)
        BAD("no generation line");
    if (!(e - v == 1 && *v == '-') &&
        (parse_u64(v, e, 16, &m->generation) < 0 || m->generation == 0))
        BAD("a bad generation");
    if (next_line(&in, &s, &e) < 0 || field(s, e, "etag", &v) < 0 || parse_etag(v, e, m->etag) < 0)
        BAD("a bad etag line");
    if (next_line(&in, &s, &e) < 0 || field(s, e, "s3-etag", &v) < 0 ||
        parse_etag(v, e, m->s3etag) < 0)
        BAD("a bad s3-etag line");
    for (int first = 1;; first = 0) {
        if (next_line(&in, &s, &e) < 0)
            BAD("no end line");
        if (first && field(s, e, "parts", &v) == 0) {
            int r = parse_runs(v, e, m->size, m);
            if (r == -ENOMEM)
                oom = 1;
            if (r < 0)
                BAD("a bad parts line");
            continue;
        }
        if (e - s == 3 && memcmp(s, "end", 3) == 0)
            break;
        if (field(s, e, "checksum", &v) == 0) {
            /* "checksum ALGO VALUE" (VALUE "-": the algorithm alone), once */
            const char *sp = memchr(v, ' ', (size_t)(e - v));
            char algo[12], val[GW_META_CK_MAX];
            size_t an = sp ? (size_t)(sp - v) : 0, vn = sp ? (size_t)(e - sp - 1) : 0;
            if (m->ck_algo[0] || !an || an >= sizeof(algo) || !vn || vn >= sizeof(val) ||
                memchr(sp + 1, '\0', vn))
                BAD("a bad checksum line");
            memcpy(algo, v, an);
            algo[an] = '\0';
            memcpy(val, sp + 1, vn);
            val[vn] = '\0';
            if (strspn(algo, "abcdefghijklmnopqrstuvwxyz0123456789") != an ||
                rio__gw_meta_set_checksum(m, algo, strcmp(val, "-") == 0 ? "" : val) < 0)
                BAD("a bad checksum line");
            continue;
        }
        if (field(s, e, "header", &v) == 0) {
            const char *sp = memchr(v, ' ', (size_t)(e - v));
            int h = -1, r;
            char *val;
            for (int i = 0; sp && i < GW_MH__COUNT; i++)
                if ((size_t)(sp - v) == strlen(rec_names[i]) &&
                    memcmp(v, rec_names[i], (size_t)(sp - v)) == 0)
                    h = i;
            if (h < 0 || m->hdr[h])
                BAD("an unknown or repeated header line");
            val = pct_dec(sp + 1, e, GW_META_VALUE_MAX, &oom);
            if (!val)
                BAD("a bad header value");
            r = rio__gw_meta_set_hdr(m, h, val);
            rio__free(val);
            if (r == -ENOMEM)
                oom = 1;
            if (r < 0)
                BAD("a bad header value");
        } else if (field(s, e, "meta", &v) == 0) {
            const char *sp = memchr(v, ' ', (size_t)(e - v));
            char *name = sp ? pct_dec(v, sp, GW_META_USER_MAX, &oom) : NULL;
            char *val = name ? pct_dec(sp + 1, e, GW_META_USER_MAX, &oom) : NULL;
            int r = RIO_EINVAL, ok = name && val;
            /* Each name once, lower-case, as add_user stores it. */
            for (const char *q = name; ok && *q; q++)
                if (*q >= 'A' && *q <= 'Z')
                    ok = 0;
            for (unsigned i = 0; ok && i < m->nuser; i++)
                if (strcmp(m->user[i].name, name) == 0)
                    ok = 0;
            if (ok)
                r = rio__gw_meta_add_user(m, name, val);
            rio__free(name);
            rio__free(val);
            if (r == -ENOMEM)
                oom = 1;
            if (r < 0)
                BAD("a bad meta line");
        } else if (v2 && field(s, e, "tag", &v) == 0) {
            /* "tag KEY VALUE", each as S3 takes it, keys once, at most 10 */
            const char *sp = memchr(v, ' ', (size_t)(e - v)), *w;
            char *name = sp ? pct_dec(v, sp, 4 * GW_META_TAG_KEY_MAX, &oom) : NULL;
            char *val = name ? pct_dec(sp + 1, e, 4 * GW_META_TAG_VALUE_MAX, &oom) : NULL;
            int r = name && val ? rio__gw_meta_add_tag(m, name, val, &w) : RIO_EINVAL;
            rio__free(name);
            rio__free(val);
            if (r == -ENOMEM)
                oom = 1;
            if (r < 0)
                BAD("a bad tag line");
        } else {
            BAD("an unknown line");
        }
    }
    if (v2 && !m->ntags)
        BAD("a version 2 record without a tag");
    if (in.p != in.end)
        BAD("bytes after the end line");
    *out = m;
    if (bkey)
        *bkey = key;
    else
        rio__free(key);
    return 0;
bad:
    rio__free(key);
    rio__gw_meta_free(m);
    if (oom)
        ret = -ENOMEM;
    if (why)
        *why = in.why;
    return ret;
}
