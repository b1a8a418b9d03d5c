/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rados:// head object's text format (docs/rados.md): its writer and its
 * parser, apart from librados so that both can be fuzzed
 * (tests/fuzz/fuzz_rados_head.c) and built without it.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/url.h"
#include "railio.h"
#include "transport/rados.h"
#include "transport/rados/head.h"

int rio__rados_chunk_name(char *out, size_t cap, const char *key, uint64_t generation,
                          uint64_t index)
{
    int n = snprintf(out, cap, "%s.%016" PRIx64 ".%016" PRIx64, key, generation, index);
    return n < 0 || (size_t)n >= cap ? -1 : n;
}

bool rio__rados_hex16(const char *s, uint64_t *out)
{
    uint64_t v = 0;

    for (unsigned i = 0; i < 16; i++) {
        char c = s[i];
        if (c >= '0' && c <= '9')
            v = v << 4 | (uint64_t)(c - '0');
        else if (c >= 'a' && c <= 'f')
            v = v << 4 | (uint64_t)(c - 'a' + 10);
        else
            return false;
    }
    *out = v;
    return true;
}

#define SUFFIX_LEN 34u /* ".GGGGGGGGGGGGGGGG.IIIIIIIIIIIIIIII" */

int rio__rados_chunk_name_split(const char *name, size_t len, size_t *keylen, uint64_t *gen,
                                uint64_t *index)
{
    if (len < SUFFIX_LEN + 1 || len - SUFFIX_LEN > RIO_KEY_MAX || memchr(name, '\0', len) ||
        name[len - SUFFIX_LEN] != '.' || name[len - SUFFIX_LEN / 2] != '.' ||
        !rio__rados_hex16(name + len - SUFFIX_LEN + 1, gen) ||
        !rio__rados_hex16(name + len - SUFFIX_LEN / 2 + 1, index) || *gen == 0)
        return RIO_EPROTO;
    *keylen = len - SUFFIX_LEN;
    return 0;
}

int rio__rados_head_chunk_name(const struct rio__rados_head *h, const char *key, uint64_t i,
                               char *out, size_t cap)
{
    if (!h->names)
        return rio__rados_chunk_name(out, cap, key, h->generation, i);
    size_t n = strlen(h->names[i]);
    if (n >= cap)
        return -1;
    memcpy(out, h->names[i], n + 1);
    return (int)n;
}

static uint64_t nchunks_of(uint64_t size, uint64_t chunk_size)
{
    return size / chunk_size + (size % chunk_size != 0);
}

/* A decimal number in [0, max], nothing else. */
static int parse_u64(const char *s, size_t len, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (len == 0 || len > 20)
        return RIO_EPROTO;
    for (size_t i = 0; i < len; i++) {
        unsigned d = (unsigned char)s[i] - '0';
        if (d > 9 || v > (UINT64_MAX - d) / 10)
            return RIO_EPROTO;
        v = v * 10 + d;
    }
    if (v > max)
        return RIO_EPROTO;
    *out = v;
    return 0;
}

/* Exactly 16 lower-case hex digits. */
static int parse_hex16(const char *s, size_t len, uint64_t *out)
{
    return len == 16 && rio__rados_hex16(s, out) ? 0 : RIO_EPROTO;
}

/* Percent-encoding of names in the head: bytes <= 0x20, '%' and >= 0x7f as %XX. */
static bool pct_needed(unsigned char c)
{
    return c <= 0x20 || c == '%' || c >= 0x7f;
}

size_t rio__rados_pct_len(const char *s)
{
    size_t n = 0;
    for (; *s; s++)
        n += pct_needed((unsigned char)*s) ? 3 : 1;
    return n;
}

char *rio__rados_pct_put(char *d, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (pct_needed(c)) {
            *d++ = '%';
            *d++ = hex[c >> 4];
            *d++ = hex[c & 15];
        } else {
            *d++ = (char)c;
        }
    }
    return d;
}

/* Decode s[0..len) into out (capacity cap, NUL-terminated). */
static int pct_decode(const char *s, size_t len, char *out, size_t cap)
{
    size_t o = 0;

    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        if (o + 1 >= cap)
            return RIO_EPROTO;
        if (c == '%') {
            int hi, lo;
            if (len - i < 3 || (hi = rio__hex_digit(s[i + 1])) < 0 ||
                (lo = rio__hex_digit(s[i + 2])) < 0 || (hi == 0 && lo == 0))
                return RIO_EPROTO;
            out[o++] = (char)(hi << 4 | lo);
            i += 2;
        } else if (pct_needed(c)) {
            return RIO_EPROTO;
        } else {
            out[o++] = (char)c;
        }
    }
    out[o] = '\0';
    return (int)o;
}

void rio__rados_head_cleanup(struct rio__rados_head *h)
{
    for (unsigned i = 0; i < h->npools; i++)
        rio__free(h->pools[i]);
    rio__free(h->chunk_pool);
    rio__free(h->xxh);
    rio__free(h->names);
    rio__free(h->name_buf);
    memset(h, 0, sizeof(*h));
}

/* The next '\n'-terminated line of [*p, end), without its '\n'. */
static bool next_line(const char **p, const char *end, const char **line, size_t *len)
{
    const char *nl;

    if (*p >= end)
        return false;
    nl = memchr(*p, '\n', (size_t)(end - *p));
    if (!nl)
        return false;
    *line = *p;
    *len = (size_t)(nl - *p);
    *p = nl + 1;
    return true;
}

/* Split off the next space-separated word of [*s, *s + *n). */
static bool next_word(const char **s, size_t *n, const char **w, size_t *wl)
{
    const char *sp;

    if (*n == 0)
        return false;
    sp = memchr(*s, ' ', *n);
    *w = *s;
    *wl = sp ? (size_t)(sp - *s) : *n;
    if (*wl == 0)
        return false;
    *n -= *wl + (sp ? 1 : 0);
    *s += *wl + (sp ? 1 : 0);
    if (sp && *n == 0)
        return false; /* a trailing space */
    return true;
}

/* "NAME VALUE" with NAME as given; VALUE is the rest of the line. */
static bool field(const char *line, size_t len, const char *name, const char **val, size_t *vlen)
{
    size_t nl = strlen(name);
    if (len <= nl + 1 || memcmp(line, name, nl) != 0 || line[nl] != ' ')
        return false;
    *val = line + nl + 1;
    *vlen = len - nl - 1;
    return true;
}

/*
 * The head's fixed lines, magic to etag: the summary a listing needs. *pp
 * moves past them; *version is 1 or 2.
 */
static int parse_top(const char **pp, const char *end, const char *key, struct rio__rados_head *h,
                     int *version)
{
    const char *line, *v;
    size_t ll, vl;
    char tmp[RIO_RADOS_NAME_MAX + 1];

    if (!next_line(pp, end, &line, &ll) || ll != strlen(RIO_RADOS_HEAD_MAGIC))
        return RIO_EPROTO;
    if (memcmp(line, RIO_RADOS_HEAD_MAGIC, ll) == 0)
        *version = 1;
    else if (memcmp(line, RIO_RADOS_HEAD_MAGIC2, ll) == 0)
        *version = 2;
    else
        return RIO_EPROTO;
    if (!next_line(pp, end, &line, &ll) || !field(line, ll, "key", &v, &vl) ||
        pct_decode(v, vl, tmp, sizeof(tmp)) < 0 || strcmp(tmp, key) != 0)
        return RIO_EPROTO;
    if (!next_line(pp, end, &line, &ll) || !field(line, ll, "generation", &v, &vl) ||
        parse_hex16(v, vl, &h->generation) < 0 || h->generation == 0)
        return RIO_EPROTO;
    if (!next_line(pp, end, &line, &ll) || !field(line, ll, "size", &v, &vl) ||
        parse_u64(v, vl, INT64_MAX, &h->size) < 0)
        return RIO_EPROTO;
    if (!next_line(pp, end, &line, &ll) || !field(line, ll, "chunk_size", &v, &vl) ||
        parse_u64(v, vl, INT64_MAX, &h->chunk_size) < 0 || h->chunk_size == 0)
        return RIO_EPROTO;
    if (!next_line(pp, end, &line, &ll) || !field(line, ll, "nchunks", &v, &vl) ||
        parse_u64(v, vl, UINT64_MAX, &h->nchunks) < 0 ||
        h->nchunks != nchunks_of(h->size, h->chunk_size))
        return RIO_EPROTO;
    if (!next_line(pp, end, &line, &ll) || !field(line, ll, "etag", &v, &vl))
        return RIO_EPROTO;
    if (vl == 1 && v[0] == '-') {
        h->etag[0] = '\0';
    } else {
        if (vl != 32)
            return RIO_EPROTO;
        for (size_t i = 0; i < vl; i++)
            if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'f')))
                return RIO_EPROTO;
        memcpy(h->etag, v, vl);
        h->etag[vl] = '\0';
    }
    return 0;
}

int rio__rados_head_summary(const char *buf, size_t len, const char *key, struct rio__rados_head *h)
{
    const char *p = buf;
    int version;

    memset(h, 0, sizeof(*h));
    return parse_top(&p, buf + len, key, h, &version);
}

int rio__rados_head_parse(const char *buf, size_t len, const char *key, struct rio__rados_head *h)
{
    const char *p = buf, *end = buf + len, *line, *v, *w;
    size_t ll, vl, wl;
    char tmp[RIO_RADOS_NAME_MAX + 1], want[RIO_RADOS_NAME_MAX];
    size_t blob = 0, blob_cap = 0;
    uint64_t u;
    int version, ret;

    memset(h, 0, sizeof(*h));
    ret = parse_top(&p, end, key, h, &version);
    if (ret < 0)
        return ret;
    ret = RIO_EPROTO;
    /* Each chunk line takes more than 40 bytes: a count the head cannot hold
     * is refused before anything is allocated for it. */
    if (h->nchunks > len / 40)
        return RIO_EPROTO;
    if (!next_line(&p, end, &line, &ll) || !field(line, ll, "namespace", &v, &vl) ||
        vl != strlen(RIO_RADOS_CHUNK_NS) || memcmp(v, RIO_RADOS_CHUNK_NS, vl) != 0)
        return RIO_EPROTO;
    if (!next_line(&p, end, &line, &ll) || !field(line, ll, "pools", &v, &vl) ||
        parse_u64(v, vl, RIO_RADOS_MAX_HEAD_POOLS, &u) < 0 || u == 0)
        return RIO_EPROTO;
    unsigned npools = (unsigned)u;
    for (unsigned i = 0; i < npools; i++) {
        if (!next_line(&p, end, &line, &ll) || !field(line, ll, "pool", &v, &vl) ||
            !next_word(&v, &vl, &w, &wl) || parse_u64(w, wl, RIO_RADOS_MAX_HEAD_POOLS, &u) < 0 ||
            u != i)
            goto err;
        int n = pct_decode(v, vl, tmp, sizeof(tmp));
        if (n <= 0)
            goto err;
        ret = -ENOMEM;
        h->pools[i] = rio__strdup(tmp);
        if (!h->pools[i])
            goto err;
        h->npools = i + 1;
        ret = RIO_EPROTO;
    }
    if (h->nchunks) {
        ret = -ENOMEM;
        h->chunk_pool = rio__malloc((size_t)h->nchunks);
        h->xxh = rio__malloc((size_t)h->nchunks * sizeof(uint64_t));
        if (!h->chunk_pool || !h->xxh)
            goto err;
        if (version == 2) {
            /* Every decoded name is shorter than its line, NUL included:
             * the rest of the text holds them all. */
            h->names = rio__malloc((size_t)h->nchunks * sizeof(char *));
            blob_cap = (size_t)(end - p);
            h->name_buf = rio__malloc(blob_cap);
            if (!h->names || !h->name_buf)
                goto err;
        }
        ret = RIO_EPROTO;
    }
    for (uint64_t i = 0; i < h->nchunks; i++) {
        if (!next_line(&p, end, &line, &ll) || !field(line, ll, "chunk", &v, &vl))
            goto err;
        if (!next_word(&v, &vl, &w, &wl) || parse_u64(w, wl, UINT64_MAX, &u) < 0 || u != i)
            goto err;
        if (!next_word(&v, &vl, &w, &wl) || parse_u64(w, wl, npools - 1, &u) < 0)
            goto err;
        h->chunk_pool[i] = (uint8_t)u;
        if (!next_word(&v, &vl, &w, &wl) || parse_hex16(w, wl, &h->xxh[i]) < 0)
            goto err;
        int n;
        if (memchr(v, ' ', vl) || (n = pct_decode(v, vl, tmp, sizeof(tmp))) < 0)
            goto err;
        if (version == 1) {
            if (rio__rados_chunk_name(want, sizeof(want), key, h->generation, i) < 0 ||
                strcmp(tmp, want) != 0)
                goto err;
        } else {
            /* Any chunk name (its own key, generation and index), as hostile
             * as the rest: bounded, no NUL, in the chunk name's form. */
            size_t kl;
            uint64_t g, x;
            if (rio__rados_chunk_name_split(tmp, (size_t)n, &kl, &g, &x) < 0 ||
                blob_cap - blob < (size_t)n + 1)
                goto err;
            h->names[i] = h->name_buf + blob;
            memcpy(h->names[i], tmp, (size_t)n + 1);
            blob += (size_t)n + 1;
        }
    }
    if (!next_line(&p, end, &line, &ll) || ll != 3 || memcmp(line, "end", 3) != 0 || p != end)
        goto err;
    return 0;
err:
    rio__rados_head_cleanup(h);
    return ret;
}

int rio__rados_head_format(const char *key, const struct rio__rados_head *h, char **out,
                           size_t *outlen)
{
    size_t kenc = rio__rados_pct_len(key), cap;
    char name[RIO_RADOS_NAME_MAX];
    char *buf, *p;

    if (h->npools == 0 || h->npools > RIO_RADOS_MAX_HEAD_POOLS || (h->nchunks && !h->xxh))
        return RIO_EINVAL;
    /* Fixed lines, pool lines, then per chunk: "chunk " + 20 + 1 + 2 + 1 +
     * 16 + 1 + the encoded name (key, '.', 16, '.', 16) + '\n'. */
    cap = 256 + kenc;
    for (unsigned i = 0; i < h->npools; i++)
        cap += 16 + rio__rados_pct_len(h->pools[i]);
    if (h->names) {
        for (uint64_t i = 0; i < h->nchunks && cap <= RIO_RADOS_HEAD_MAX; i++)
            cap += 64 + rio__rados_pct_len(h->names[i]);
    } else {
        if (h->nchunks > (SIZE_MAX - cap) / (kenc + 100))
            return -ENOMEM;
        cap += (size_t)h->nchunks * (kenc + 100);
    }
    if (cap > RIO_RADOS_HEAD_MAX)
        return RIO_EINVAL; /* too many chunks for one head: use larger chunks */
    buf = rio__malloc(cap);
    if (!buf)
        return -ENOMEM;
    p = buf;
    p += sprintf(p, "%s\nkey ", h->names ? RIO_RADOS_HEAD_MAGIC2 : RIO_RADOS_HEAD_MAGIC);
    p = rio__rados_pct_put(p, key);
    p += sprintf(p,
                 "\ngeneration %016" PRIx64 "\nsize %" PRIu64 "\nchunk_size %" PRIu64
                 "\nnchunks %" PRIu64 "\netag %s\nnamespace %s\npools %u\n",
                 h->generation, h->size, h->chunk_size, h->nchunks, h->etag[0] ? h->etag : "-",
                 RIO_RADOS_CHUNK_NS, h->npools);
    for (unsigned i = 0; i < h->npools; i++) {
        p += sprintf(p, "pool %u ", i);
        p = rio__rados_pct_put(p, h->pools[i]);
        *p++ = '\n';
    }
    for (uint64_t i = 0; i < h->nchunks; i++) {
        unsigned pi = h->chunk_pool ? h->chunk_pool[i] : (unsigned)(i % h->npools);
        p += sprintf(p, "chunk %" PRIu64 " %u %016" PRIx64 " ", i, pi, h->xxh[i]);
        if (!h->names)
            rio__rados_chunk_name(name, sizeof(name), key, h->generation, i);
        p = rio__rados_pct_put(p, h->names ? h->names[i] : name);
        *p++ = '\n';
    }
    p += sprintf(p, "end\n");
    *out = buf;
    *outlen = (size_t)(p - buf);
    return 0;
}
