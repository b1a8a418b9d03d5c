/* SPDX-License-Identifier: Apache-2.0 */
/*
 * S3's POST Object (browser-based uploads, docs/gateway.md "POST uploads"):
 * the multipart/form-data body of a POST to a bucket, read as it streams,
 * and the form's policy and signature. Everything here comes from the
 * network: the form's framing, its part headers, its fields, the policy's
 * base64 and JSON. Each is bounded before it is kept (a field's value, the
 * fields before the file, a part's headers, the policy's conditions), and
 * what does not fit a bound or the grammar is refused, never truncated.
 * No libmicrohttpd here: the unit tests and fuzz_s3post link this file alone.
 *
 * The form: "--BOUNDARY" CRLF, then parts, each headers CRLF CRLF then its
 * content up to CRLF "--BOUNDARY", the last followed by "--". The stream is
 * read as if it began with a CRLF, so every delimiter is CRLF "--BOUNDARY".
 * Fields before the part named "file" are kept whole (S3: the file is the
 * form's last field, and fields after it are ignored); the file's content
 * goes to the caller as it comes, less the bytes at the end of what has come
 * that could still be the start of a delimiter.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem, timegm */
#endif
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "core/url.h"
#include "railio.h"
#include "server/s3/auth.h"
#include "server/s3/gw.h"
#include "transport/s3/sign.h"

#define BOUNDARY_MAX 70 /* RFC 2046 */
#define DELIM_MAX (4 + BOUNDARY_MAX)
#define PART_HDRS_MAX 4096 /* a part's header block */
#define PREAMBLE_MAX 1024  /* bytes before the first delimiter */
/* The window the parser reads through: a field's value or a part's
 * headers, and a delimiter, must fit. */
#define WIN (RIO_S3_FORM_VALUE_MAX + PART_HDRS_MAX + 2 * DELIM_MAX)
#define POLICY_CONDS_MAX 128

enum st { ST_PREAMBLE, ST_AFTER_DELIM, ST_HEADERS, ST_FIELD, ST_FILE, ST_END, ST_ERR };

struct field {
    char *name; /* lower-case */
    char *value;
    size_t vlen;
};

struct rio_s3_form {
    struct rio_s3_form_cb cb;
    enum st st;
    char delim[DELIM_MAX + 1]; /* CRLF "--" BOUNDARY */
    size_t dlen;
    char *win; /* WIN bytes: win[pos..len) not yet consumed */
    size_t pos, len;
    uint64_t skipped; /* preamble bytes */
    struct field f[RIO_S3_FORM_FIELDS_MAX];
    unsigned nf;
    size_t fields_bytes;
    char part_name[RIO_S3_FORM_NAME_MAX + 1];
    bool file_seen, file_done;
    int err;
    const char *why;
};

/* ------------------------------------------------------------ the form */

static int tchar(int c)
{
    return c > 32 && c < 127 && !strchr("()<>@,;:\\\"/[]?={}", c);
}

/* The boundary parameter of a Content-Type "multipart/form-data; ...":
 * 1 to 70 characters of RFC 2046's set, quoted or not. 0 or -1. */
static int boundary_of(const char *ct, char *out)
{
    static const char mt[] = "multipart/form-data";
    const char *p = ct;
    int found = 0;
    size_t n;

    while (*p == ' ' || *p == '\t')
        p++;
    if (strncasecmp(p, mt, sizeof(mt) - 1) != 0)
        return -1;
    p += sizeof(mt) - 1;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0')
            return found ? 0 : -1;
        if (*p != ';')
            return -1;
        p++;
        while (*p == ' ' || *p == '\t')
            p++;
        n = 0;
        while (tchar((unsigned char)p[n]))
            n++;
        if (!n || p[n] != '=')
            return -1;
        int is_b = n == 8 && strncasecmp(p, "boundary", 8) == 0;
        const char *v = p + n + 1, *e;
        size_t vl;
        if (*v == '"') {
            e = strchr(v + 1, '"');
            if (!e)
                return -1;
            vl = (size_t)(e - v - 1);
            v++;
            p = e + 1;
        } else {
            vl = 0;
            while (tchar((unsigned char)v[vl]))
                vl++;
            p = v + vl;
        }
        if (!is_b)
            continue;
        if (found++ || vl < 1 || vl > BOUNDARY_MAX || v[vl - 1] == ' ')
            return -1;
        for (size_t i = 0; i < vl; i++)
            if (!((v[i] >= '0' && v[i] <= '9') || (v[i] >= 'a' && v[i] <= 'z') ||
                  (v[i] >= 'A' && v[i] <= 'Z') || strchr("'()+_,-./:=? ", v[i])))
                return -1;
        memcpy(out, v, vl);
        out[vl] = '\0';
    }
}

int rio_s3_form_new(const char *content_type, const struct rio_s3_form_cb *cb,
                    struct rio_s3_form **out)
{
    struct rio_s3_form *f;
    char b[BOUNDARY_MAX + 1];

    *out = NULL;
    if (!content_type || boundary_of(content_type, b) < 0)
        return RIO_EINVAL;
    f = rio__calloc(1, sizeof(*f));
    if (!f)
        return -ENOMEM;
    f->win = rio__malloc(WIN);
    if (!f->win) {
        rio__free(f);
        return -ENOMEM;
    }
    if (cb)
        f->cb = *cb;
    f->dlen = (size_t)snprintf(f->delim, sizeof(f->delim), "\r\n--%s", b);
    memcpy(f->win, "\r\n", 2); /* the stream read as if it began with a CRLF */
    f->len = 2;
    f->st = ST_PREAMBLE;
    *out = f;
    return 0;
}

void rio_s3_form_free(struct rio_s3_form *f)
{
    if (!f)
        return;
    for (unsigned i = 0; i < f->nf; i++) {
        rio__free(f->f[i].name);
        rio__free(f->f[i].value);
    }
    rio__free(f->win);
    rio__free(f);
}

static int fail(struct rio_s3_form *f, const char *why)
{
    f->st = ST_ERR;
    f->err = RIO_EINVAL;
    f->why = why;
    return RIO_EINVAL;
}

/* The first delimiter in win[pos..len), or NULL. */
static const char *find_delim(const struct rio_s3_form *f)
{
    return memmem(f->win + f->pos, f->len - f->pos, f->delim, f->dlen);
}

/* How many bytes of win[pos..len) certainly precede any delimiter that
 * may still come: all but a tail that is a prefix of one. */
static size_t safe_prefix(const struct rio_s3_form *f)
{
    size_t avail = f->len - f->pos, keep = avail < f->dlen - 1 ? avail : f->dlen - 1;

    for (; keep > 0; keep--)
        if (memcmp(f->win + f->len - keep, f->delim, keep) == 0)
            break;
    return avail - keep;
}

/* A parameter NAME="VALUE" (or NAME=token) of a Content-Disposition, its
 * value into out (cap bytes with the NUL): 1 found, 0 absent, -1 malformed
 * or too long. A quoted value may hold \" and \\. */
static int disp_param(const char *h, size_t hl, const char *name, char *out, size_t cap)
{
    size_t nl = strlen(name), i = 0;

    while (i < hl) {
        /* after a ';' */
        const char *semi = memchr(h + i, ';', hl - i);
        if (!semi)
            return 0;
        i = (size_t)(semi - h) + 1;
        while (i < hl && (h[i] == ' ' || h[i] == '\t'))
            i++;
        if (hl - i > nl && strncasecmp(h + i, name, nl) == 0 && h[i + nl] == '=') {
            size_t o = 0;
            i += nl + 1;
            if (i < hl && h[i] == '"') {
                for (i++; i < hl && h[i] != '"'; i++) {
                    if (h[i] == '\\' && i + 1 < hl)
                        i++;
                    if (o + 1 >= cap || h[i] == '\0')
                        return -1;
                    out[o++] = h[i];
                }
                if (i >= hl)
                    return -1;
            } else {
                for (; i < hl && h[i] != ';' && h[i] != ' ' && h[i] != '\t'; i++) {
                    if (o + 1 >= cap || h[i] == '\0')
                        return -1;
                    out[o++] = h[i];
                }
            }
            out[o] = '\0';
            return 1;
        }
    }
    return 0;
}

/* A part's header block h[0..hl) (lines, each CRLF-ended): its
 * Content-Disposition must be form-data with a name. */
static int part_headers(struct rio_s3_form *f, const char *h, size_t hl)
{
    char filename[RIO_S3_FORM_NAME_MAX + 1] = "", ctype[RIO_S3_FORM_NAME_MAX + 1] = "";
    int have_disp = 0;
    size_t i = 0;

    f->part_name[0] = '\0';
    while (i < hl) {
        const char *eol = memmem(h + i, hl - i, "\r\n", 2);
        size_t ll = eol ? (size_t)(eol - (h + i)) : hl - i;
        const char *line = h + i, *colon = memchr(line, ':', ll);
        i += ll + 2;
        if (!colon || colon == line)
            return fail(f, "a part's header line is not NAME: VALUE");
        size_t nl = (size_t)(colon - line);
        const char *v = colon + 1;
        size_t vl = ll - nl - 1;
        while (vl && (*v == ' ' || *v == '\t'))
            v++, vl--;
        for (size_t k = 0; k < nl; k++)
            if (!tchar((unsigned char)line[k]))
                return fail(f, "a part's header name is not a token");
        for (size_t k = 0; k < vl; k++)
            if ((unsigned char)v[k] < 32 && v[k] != '\t')
                return fail(f, "a part's header holds a control character");
        if (nl == 19 && strncasecmp(line, "Content-Disposition", 19) == 0) {
            if (have_disp++)
                return fail(f, "a part has two Content-Disposition headers");
            if (vl < 9 || strncasecmp(v, "form-data", 9) != 0 ||
                (vl > 9 && v[9] != ';' && v[9] != ' '))
                return fail(f, "a part's Content-Disposition is not form-data");
            int r1 = disp_param(v, vl, "name", f->part_name, sizeof(f->part_name));
            int r2 = disp_param(v, vl, "filename", filename, sizeof(filename));
            if (r1 != 1 || r2 < 0 || !f->part_name[0])
                return fail(f, "a part's Content-Disposition has no name, or one too long");
        } else if (nl == 12 && strncasecmp(line, "Content-Type", 12) == 0) {
            if (vl >= sizeof(ctype))
                return fail(f, "a part's Content-Type is too long");
            memcpy(ctype, v, vl);
            ctype[vl] = '\0';
        }
    }
    if (!have_disp)
        return fail(f, "a part has no Content-Disposition");
    for (char *p = f->part_name; *p; p++)
        if (*p >= 'A' && *p <= 'Z')
            *p = (char)(*p - 'A' + 'a');
    if (strcmp(f->part_name, "file") != 0) {
        f->st = ST_FIELD;
        return 0;
    }
    f->st = ST_FILE;
    f->file_seen = true;
    if (f->cb.file_begin) {
        int r = f->cb.file_begin(f->cb.arg, filename, ctype);
        if (r < 0) {
            f->st = ST_ERR;
            f->err = r;
            f->why = "the caller refused the file";
            return r;
        }
    }
    return 0;
}

static int file_out(struct rio_s3_form *f, size_t n)
{
    if (n && f->cb.file_data) {
        int r = f->cb.file_data(f->cb.arg, f->win + f->pos, n);
        if (r < 0) {
            f->st = ST_ERR;
            f->err = r;
            f->why = "the caller refused the file's bytes";
            return r;
        }
    }
    f->pos += n;
    return 0;
}

/* Run the state machine over win[pos..len). 0 when it needs more bytes
 * (or is at the end), or an error. */
static int step(struct rio_s3_form *f)
{
    for (;;) {
        const char *d;
        size_t avail = f->len - f->pos;
        switch (f->st) {
        case ST_PREAMBLE:
            d = find_delim(f);
            if (!d) {
                size_t s = safe_prefix(f);
                f->skipped += s;
                f->pos += s;
                if (f->skipped > PREAMBLE_MAX)
                    return fail(f, "no boundary at the body's start");
                return 0;
            }
            f->skipped += (size_t)(d - (f->win + f->pos));
            if (f->skipped > PREAMBLE_MAX)
                return fail(f, "no boundary at the body's start");
            f->pos = (size_t)(d - f->win) + f->dlen;
            f->st = ST_AFTER_DELIM;
            break;
        case ST_AFTER_DELIM: {
            /* "--" (the end), or transport padding then CRLF */
            size_t k = 0;
            if (avail >= 2 && memcmp(f->win + f->pos, "--", 2) == 0) {
                if (!f->file_seen)
                    return fail(f, "the form ended before its file");
                f->pos = f->len;
                f->st = ST_END;
                break;
            }
            while (k < avail && (f->win[f->pos + k] == ' ' || f->win[f->pos + k] == '\t'))
                k++;
            if (k > 64)
                return fail(f, "a boundary line is too long");
            if (avail - k < 2)
                return 0;
            if (memcmp(f->win + f->pos + k, "\r\n", 2) != 0)
                return fail(f, "a boundary is not followed by CRLF");
            f->pos += k + 2;
            f->st = ST_HEADERS;
            break;
        }
        case ST_HEADERS: {
            const char *e;
            if (avail >= 2 && memcmp(f->win + f->pos, "\r\n", 2) == 0)
                return fail(f, "a part has no headers");
            e = memmem(f->win + f->pos, avail, "\r\n\r\n", 4);
            if (!e) {
                if (avail > PART_HDRS_MAX)
                    return fail(f, "a part's headers are too long");
                return 0;
            }
            size_t hl = (size_t)(e - (f->win + f->pos)) + 2; /* with the last CRLF */
            if (hl > PART_HDRS_MAX)
                return fail(f, "a part's headers are too long");
            int r = part_headers(f, f->win + f->pos, hl);
            f->pos += hl + 2;
            if (r < 0)
                return r;
            break;
        }
        case ST_FIELD: {
            d = find_delim(f);
            size_t vl = d ? (size_t)(d - (f->win + f->pos)) : safe_prefix(f);
            if (vl > RIO_S3_FORM_VALUE_MAX)
                return fail(f, "a form field's value is too long");
            if (!d)
                return 0;
            if (f->nf >= RIO_S3_FORM_FIELDS_MAX)
                return fail(f, "too many form fields");
            f->fields_bytes += vl + strlen(f->part_name);
            if (f->fields_bytes > RIO_S3_FORM_FIELDS_BYTES)
                return fail(f, "the form's fields are too long together");
            if (memchr(f->win + f->pos, '\0', vl))
                return fail(f, "a form field holds a NUL");
            for (unsigned i = 0; i < f->nf; i++)
                if (strcmp(f->f[i].name, f->part_name) == 0)
                    return fail(f, "a form field is given twice");
            struct field *x = &f->f[f->nf];
            x->name = rio__strdup(f->part_name);
            x->value = rio__malloc(vl + 1);
            if (!x->name || !x->value) {
                rio__free(x->name);
                rio__free(x->value);
                f->st = ST_ERR;
                f->err = -ENOMEM;
                f->why = "out of memory";
                return -ENOMEM;
            }
            memcpy(x->value, f->win + f->pos, vl);
            x->value[vl] = '\0';
            x->vlen = vl;
            f->nf++;
            f->pos += vl + f->dlen;
            f->st = ST_AFTER_DELIM;
            break;
        }
        case ST_FILE: {
            int r;
            d = find_delim(f);
            if (!d)
                return file_out(f, safe_prefix(f));
            r = file_out(f, (size_t)(d - (f->win + f->pos)));
            if (r < 0)
                return r;
            f->pos += f->dlen;
            f->file_done = true;
            f->st = ST_END; /* S3 ignores what follows the file */
            break;
        }
        case ST_END:
            f->pos = f->len;
            return 0;
        case ST_ERR:
            return f->err;
        }
    }
}

int rio_s3_form_feed(struct rio_s3_form *f, const void *in, size_t n, const char **why)
{
    const char *p = in;

    *why = NULL;
    while (n || f->st == ST_ERR) {
        if (f->st == ST_ERR) {
            *why = f->why;
            return f->err;
        }
        if (f->st == ST_END) {
            return 0; /* the rest is ignored */
        }
        if (f->pos) { /* consumed bytes out of the window */
            memmove(f->win, f->win + f->pos, f->len - f->pos);
            f->len -= f->pos;
            f->pos = 0;
        }
        size_t take = WIN - f->len < n ? WIN - f->len : n;
        memcpy(f->win + f->len, p, take);
        f->len += take;
        p += take;
        n -= take;
        int r = step(f);
        if (r < 0) {
            *why = f->why;
            return r;
        }
        if (take == 0 && f->st != ST_END) { /* every state consumes or fails a full window */
            *why = "the form's framing does not fit the parser's window";
            return fail(f, *why);
        }
    }
    return 0;
}

int rio_s3_form_done(const struct rio_s3_form *f)
{
    return f->st == ST_END && f->file_done;
}

int rio_s3_form_file_seen(const struct rio_s3_form *f)
{
    return f->file_seen;
}

const char *rio_s3_form_field(const struct rio_s3_form *f, const char *name)
{
    for (unsigned i = 0; i < f->nf; i++)
        if (strcasecmp(f->f[i].name, name) == 0)
            return f->f[i].value;
    return NULL;
}

unsigned rio_s3_form_nfields(const struct rio_s3_form *f)
{
    return f->nf;
}

const char *rio_s3_form_field_at(const struct rio_s3_form *f, unsigned i, const char **value)
{
    if (i >= f->nf)
        return NULL;
    *value = f->f[i].value;
    return f->f[i].name;
}

/* ---------------------------------------------------------- the policy */

enum cond_kind { C_EQ, C_STARTS, C_RANGE };

struct cond {
    enum cond_kind kind;
    char *name; /* lower-case, without '$' */
    char *value;
    uint64_t min, max;
};

struct policy {
    int64_t expiration;
    struct cond c[POLICY_CONDS_MAX];
    unsigned n;
};

struct json {
    const char *p, *end;
};

static void ws(struct json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

static int lit(struct json *j, char c)
{
    ws(j);
    if (j->p < j->end && *j->p == c) {
        j->p++;
        return 1;
    }
    return 0;
}

static int put_utf8(char *out, size_t *o, size_t cap, uint32_t cp)
{
    uint8_t b[4];
    size_t n;

    if (cp < 0x80)
        b[0] = (uint8_t)cp, n = 1;
    else if (cp < 0x800)
        b[0] = (uint8_t)(0xc0 | cp >> 6), b[1] = (uint8_t)(0x80 | (cp & 0x3f)), n = 2;
    else if (cp < 0x10000)
        b[0] = (uint8_t)(0xe0 | cp >> 12), b[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f)),
        b[2] = (uint8_t)(0x80 | (cp & 0x3f)), n = 3;
    else
        b[0] = (uint8_t)(0xf0 | cp >> 18), b[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3f)),
        b[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3f)), b[3] = (uint8_t)(0x80 | (cp & 0x3f)), n = 4;
    if (*o + n >= cap)
        return -1;
    memcpy(out + *o, b, n);
    *o += n;
    return 0;
}

static int hex4(const char *p, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int d = rio__hex_digit(p[i]);
        if (d < 0)
            return -1;
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A JSON string into a new string (NUL and control characters refused). */
static int jstring(struct json *j, char **out)
{
    size_t cap, o = 0;
    char *s;

    *out = NULL;
    ws(j);
    if (j->p >= j->end || *j->p != '"')
        return -1;
    j->p++;
    cap = (size_t)(j->end - j->p) + 1; /* the decoded string is never longer */
    s = rio__malloc(cap);
    if (!s)
        return -ENOMEM;
    while (j->p < j->end && *j->p != '"') {
        unsigned char c = (unsigned char)*j->p++;
        if (c < 0x20)
            goto bad;
        if (c != '\\') {
            s[o++] = (char)c;
            continue;
        }
        if (j->p >= j->end)
            goto bad;
        c = (unsigned char)*j->p++;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            s[o++] = (char)c;
            break;
        case 'b':
            s[o++] = '\b';
            break;
        case 'f':
            s[o++] = '\f';
            break;
        case 'n':
            s[o++] = '\n';
            break;
        case 'r':
            s[o++] = '\r';
            break;
        case 't':
            s[o++] = '\t';
            break;
        case 'u': {
            uint32_t cp, lo;
            if (j->end - j->p < 4 || hex4(j->p, &cp) < 0)
                goto bad;
            j->p += 4;
            if (cp >= 0xd800 && cp < 0xdc00) {
                if (j->end - j->p < 6 || j->p[0] != '\\' || j->p[1] != 'u' ||
                    hex4(j->p + 2, &lo) < 0 || lo < 0xdc00 || lo > 0xdfff)
                    goto bad;
                j->p += 6;
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                goto bad;
            }
            if (cp == 0 || put_utf8(s, &o, cap, cp) < 0)
                goto bad;
            break;
        }
        default:
            goto bad;
        }
    }
    if (j->p >= j->end)
        goto bad;
    j->p++;
    s[o] = '\0';
    *out = s;
    return 0;
bad:
    rio__free(s);
    return -1;
}

/* A non-negative integer: a JSON number without sign, fraction or
 * exponent, or a string of digits (some clients send those). */
static int juint(struct json *j, uint64_t *v)
{
    char *s = NULL;
    const char *p;
    size_t n = 0;

    ws(j);
    if (j->p < j->end && *j->p == '"') {
        int r = jstring(j, &s);
        if (r < 0)
            return r;
        p = s;
        n = strlen(s);
    } else {
        p = j->p;
        while (j->p < j->end && *j->p >= '0' && *j->p <= '9')
            j->p++, n++;
        if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
            return -1;
    }
    int ok = n > 0 && n <= 19 && (n == 1 || p[0] != '0');
    for (size_t i = 0; ok && i < n; i++)
        ok = p[i] >= '0' && p[i] <= '9';
    *v = 0;
    for (size_t i = 0; ok && i < n; i++)
        *v = *v * 10 + (uint64_t)(p[i] - '0');
    rio__free(s);
    return ok ? 0 : -1;
}

static void policy_free(struct policy *pol)
{
    for (unsigned i = 0; i < pol->n; i++) {
        rio__free(pol->c[i].name);
        rio__free(pol->c[i].value);
    }
    pol->n = 0;
}

static void lower(char *s)
{
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z')
            *s = (char)(*s - 'A' + 'a');
}

/* One condition: {"NAME": "VALUE"}, ["eq"|"starts-with", "$NAME", "VALUE"]
 * or ["content-length-range", MIN, MAX]. -1 when not one of those. */
static int jcond(struct json *j, struct cond *c)
{
    char *op = NULL;
    int r = -1;

    memset(c, 0, sizeof(*c));
    if (lit(j, '{')) {
        if (jstring(j, &c->name) < 0 || !lit(j, ':') || jstring(j, &c->value) < 0 || !lit(j, '}'))
            goto out;
        if (c->name[0] == '$') /* tolerated: {"$key": ...} */
            memmove(c->name, c->name + 1, strlen(c->name));
        c->kind = C_EQ;
        r = 0;
        goto out;
    }
    if (!lit(j, '[') || jstring(j, &op) < 0 || !lit(j, ','))
        goto out;
    if (strcasecmp(op, "content-length-range") == 0) {
        c->kind = C_RANGE;
        if (juint(j, &c->min) < 0 || !lit(j, ',') || juint(j, &c->max) < 0 || !lit(j, ']') ||
            c->min > c->max)
            goto out;
        r = 0;
        goto out;
    }
    if (strcasecmp(op, "eq") == 0)
        c->kind = C_EQ;
    else if (strcasecmp(op, "starts-with") == 0)
        c->kind = C_STARTS;
    else
        goto out;
    if (jstring(j, &c->name) < 0 || c->name[0] != '$' || !c->name[1] || !lit(j, ',') ||
        jstring(j, &c->value) < 0 || !lit(j, ']'))
        goto out;
    memmove(c->name, c->name + 1, strlen(c->name));
    r = 0;
out:
    rio__free(op);
    if (r == 0 && c->name)
        lower(c->name);
    if (r < 0) {
        rio__free(c->name);
        rio__free(c->value);
        c->name = c->value = NULL;
    }
    return r;
}

/* The policy's JSON: one object with "expiration" and "conditions", each
 * once, nothing else. 0, -1 malformed (*why), -ENOMEM. */
static int policy_parse(const char *text, size_t n, struct policy *pol, const char **why)
{
    struct json j = {text, text + n};
    int have_exp = 0, have_conds = 0;

    memset(pol, 0, sizeof(*pol));
    *why = "Invalid Policy: Invalid JSON.";
    if (!lit(&j, '{'))
        return -1;
    if (lit(&j, '}'))
        goto end;
    do {
        char *k = NULL;
        if (jstring(&j, &k) < 0 || !lit(&j, ':')) {
            rio__free(k);
            goto bad;
        }
        if (strcmp(k, "expiration") == 0 && !have_exp++) {
            char *v = NULL;
            rio__free(k);
            if (jstring(&j, &v) < 0)
                goto bad;
            pol->expiration = rio__gw_parse_iso(v);
            rio__free(v);
            if (pol->expiration < 0) {
                *why = "Invalid Policy: Invalid 'expiration' value.";
                goto bad;
            }
        } else if (strcmp(k, "conditions") == 0 && !have_conds++) {
            rio__free(k);
            if (!lit(&j, '['))
                goto bad;
            if (!lit(&j, ']')) {
                do {
                    if (pol->n >= POLICY_CONDS_MAX) {
                        *why = "Invalid Policy: too many conditions.";
                        goto bad;
                    }
                    if (jcond(&j, &pol->c[pol->n]) < 0) {
                        *why = "Invalid Policy: Invalid Simple-Condition: a condition is not "
                               "{\"field\": \"value\"}, [\"eq\"|\"starts-with\", \"$field\", "
                               "\"value\"] or [\"content-length-range\", min, max].";
                        goto bad;
                    }
                    pol->n++;
                } while (lit(&j, ','));
                if (!lit(&j, ']'))
                    goto bad;
            }
        } else {
            rio__free(k);
            *why = "Invalid Policy: Unexpected field, or a field given twice.";
            goto bad;
        }
    } while (lit(&j, ','));
    if (!lit(&j, '}'))
        goto bad;
end:
    ws(&j);
    if (j.p != j.end)
        goto bad;
    if (!have_exp) {
        *why = "Invalid Policy: Policy missing expiration.";
        goto bad;
    }
    if (!have_conds) {
        *why = "Invalid Policy: Policy missing conditions.";
        goto bad;
    }
    *why = NULL;
    return 0;
bad:
    policy_free(pol);
    return -1;
}

/* Strict base64 (padding, no white space) of s into a new string. */
static int b64_decode(const char *s, char **out, size_t *outlen)
{
    size_t sl = strlen(s);
    unsigned char *buf;
    int n, pad;

    *out = NULL;
    if (!sl || sl % 4)
        return -1;
    pad = s[sl - 1] == '=' ? (s[sl - 2] == '=' ? 2 : 1) : 0;
    for (size_t i = 0; i < sl; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '+' || c == '/' || (c == '=' && i >= sl - (size_t)pad)))
            return -1;
    }
    buf = rio__malloc(sl / 4 * 3 + 1);
    if (!buf)
        return -ENOMEM;
    n = EVP_DecodeBlock(buf, (const unsigned char *)s, (int)sl);
    if (n < pad) {
        rio__free(buf);
        return -1;
    }
    n -= pad;
    buf[n] = '\0';
    *out = (char *)buf;
    *outlen = (size_t)n;
    return 0;
}

/* Fields no condition need name (S3's list; x-ignore-* too). */
static int exempt(const char *name)
{
    return !strcmp(name, "policy") || !strcmp(name, "x-amz-signature") ||
           !strcmp(name, "signature") || !strcmp(name, "awsaccesskeyid") || !strcmp(name, "file") ||
           !strncmp(name, "x-ignore-", 9);
}

/* Does value meet c? Content-Type's starts-with holds for each of a
 * comma-separated list (S3's rule). */
static int cond_holds(const struct cond *c, const char *value)
{
    size_t pl = strlen(c->value);

    if (c->kind == C_EQ)
        return strcmp(value, c->value) == 0;
    if (strcmp(c->name, "content-type") != 0 || !strchr(value, ','))
        return strncmp(value, c->value, pl) == 0;
    for (const char *p = value;;) {
        while (*p == ' ')
            p++;
        if (strncmp(p, c->value, pl) != 0)
            return 0;
        p = strchr(p, ',');
        if (!p)
            return 1;
        p++;
    }
}

/* A condition as S3 prints it in its message. */
static void cond_text(const struct cond *c, char *out, size_t cap)
{
    if (c->kind == C_RANGE)
        snprintf(out, cap, "[\"content-length-range\", %llu, %llu]", (unsigned long long)c->min,
                 (unsigned long long)c->max);
    else
        snprintf(out, cap, "[\"%s\", \"$%.64s\", \"%.64s\"]",
                 c->kind == C_EQ ? "eq" : "starts-with", c->name, c->value);
}

#define POST_REFUSE(code, err, ...)                                                                \
    do {                                                                                           \
        *s3_code = (code);                                                                         \
        snprintf(msg, msgcap, __VA_ARGS__);                                                        \
        ret = (err);                                                                               \
        goto out;                                                                                  \
    } while (0)

static int hex_lower64(const char *s)
{
    if (strlen(s) != 64)
        return 0;
    for (int i = 0; i < 64; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return 0;
    return 1;
}

int rio_s3_post_verify(const struct rio_s3_keys *k, const struct rio_s3_form *f, const char *bucket,
                       const char *key, int64_t now, int sigv2, struct rio_s3_post_auth *out,
                       const char **s3_code, char *msg, size_t msgcap)
{
    const char *policy = rio_s3_form_field(f, "policy");
    const char *v4sig = rio_s3_form_field(f, "x-amz-signature");
    const char *v2sig = rio_s3_form_field(f, "signature");
    const char *v2ak = rio_s3_form_field(f, "awsaccesskeyid");
    const char *cred = rio_s3_form_field(f, "x-amz-credential");
    const char *secret;
    struct policy pol;
    char *json = NULL;
    size_t jl = 0;
    const char *why;
    bool covered[RIO_S3_FORM_FIELDS_MAX] = {0};
    EVP_MD_CTX *m = NULL;
    int ret = 0;

    memset(out, 0, sizeof(*out));
    memset(&pol, 0, sizeof(pol));
    out->len_max = UINT64_MAX;
    *s3_code = NULL;
    msg[0] = '\0';
    if (!rio_s3_form_field(f, "key"))
        POST_REFUSE("InvalidArgument", RIO_EINVAL,
                    "Bucket POST must contain a field named 'key'.  If it is specified, please "
                    "check the order of the fields.");
    if (v4sig || cred || rio_s3_form_field(f, "x-amz-algorithm")) {
        const char *algo = rio_s3_form_field(f, "x-amz-algorithm");
        const char *date = rio_s3_form_field(f, "x-amz-date");
        struct rio__s3_cred c;
        uint8_t skey[32];
        char want[65];
        if (!algo || !cred || !date || !v4sig)
            POST_REFUSE("InvalidArgument", RIO_EINVAL,
                        "Bucket POST signed with SigV4 must contain the fields x-amz-algorithm, "
                        "x-amz-credential, x-amz-date and x-amz-signature.");
        if (strcmp(algo, "AWS4-HMAC-SHA256") != 0)
            POST_REFUSE("InvalidArgument", RIO_EINVAL, "x-amz-algorithm must be AWS4-HMAC-SHA256.");
        if (rio__s3_cred_parse(cred, strlen(cred), &c) < 0)
            POST_REFUSE("InvalidArgument", RIO_EINVAL,
                        "x-amz-credential is not ACCESS_KEY/YYYYMMDD/REGION/s3/aws4_request.");
        if (strlen(date) != 16 || strncmp(date, c.date, 8) != 0 || date[8] != 'T' ||
            date[15] != 'Z' || strspn(date + 9, "0123456789") != 6)
            POST_REFUSE("InvalidArgument", RIO_EINVAL,
                        "x-amz-date must be YYYYMMDDTHHMMSSZ of the credential's date.");
        if (!policy)
            POST_REFUSE("InvalidArgument", RIO_EINVAL,
                        "Bucket POST must contain a field named 'policy'.  If it is specified, "
                        "please check the order of the fields.");
        secret = rio__s3_keys_secret(k, c.ak);
        if (!secret)
            POST_REFUSE("InvalidAccessKeyId", -EACCES,
                        "The AWS Access Key Id you provided does not exist in our records.");
        m = EVP_MD_CTX_new();
        if (!m)
            POST_REFUSE("InternalError", -ENOMEM, "Out of memory.");
        if (rio__s3_signing_key(m, secret, c.date, c.region, "s3", skey) < 0 ||
            rio__s3_sign_sts(m, skey, policy, want) < 0) {
            OPENSSL_cleanse(skey, sizeof(skey));
            POST_REFUSE("InternalError", -ENOMEM, "The signature could not be computed.");
        }
        OPENSSL_cleanse(skey, sizeof(skey));
        if (!hex_lower64(v4sig) || CRYPTO_memcmp(want, v4sig, 64) != 0)
            POST_REFUSE("SignatureDoesNotMatch", -EACCES,
                        "The request signature we calculated does not match the signature you "
                        "provided. Check your key and signing method.");
        snprintf(out->access_key, sizeof(out->access_key), "%s", c.ak);
    } else if (v2sig || v2ak) {
        unsigned char mac[EVP_MAX_MD_SIZE];
        unsigned int ml = 0;
        char want[29];
        if (!sigv2)
            POST_REFUSE("InvalidRequest", RIO_EINVAL,
                        "Signature Version 2 is turned off on this gateway (--s3-sigv2 off).");
        if (!v2sig || !v2ak || !policy)
            POST_REFUSE("InvalidArgument", RIO_EINVAL,
                        "Bucket POST signed with Signature Version 2 must contain the fields "
                        "AWSAccessKeyId, signature and policy.");
        secret = rio__s3_keys_secret(k, v2ak);
        if (!secret || strlen(v2ak) >= sizeof(out->access_key))
            POST_REFUSE("InvalidAccessKeyId", -EACCES,
                        "The AWS Access Key Id you provided does not exist in our records.");
        if (!HMAC(EVP_sha1(), secret, (int)strlen(secret), (const unsigned char *)policy,
                  strlen(policy), mac, &ml) ||
            ml != 20)
            POST_REFUSE("InternalError", -ENOMEM, "The signature could not be computed.");
        EVP_EncodeBlock((unsigned char *)want, mac, 20);
        OPENSSL_cleanse(mac, sizeof(mac));
        if (strlen(v2sig) != 28 || CRYPTO_memcmp(want, v2sig, 28) != 0)
            POST_REFUSE("SignatureDoesNotMatch", -EACCES,
                        "The request signature we calculated does not match the signature you "
                        "provided. Check your key and signing method.");
        strcpy(out->access_key, v2ak);
    } else {
        out->anonymous = 1; /* the caller decides whether the bucket takes those */
        if (!policy)
            goto out;
    }

    /* The policy: base64 of JSON, its conditions each met, every field
     * but the exempt ones named by one. */
    ret = b64_decode(policy, &json, &jl);
    if (ret == -ENOMEM)
        POST_REFUSE("InternalError", -ENOMEM, "Out of memory.");
    if (ret < 0 || memchr(json, '\0', jl))
        POST_REFUSE("InvalidPolicyDocument", RIO_EINVAL,
                    "Invalid Policy: Invalid 'policy' field: not base64 of a JSON document.");
    ret = policy_parse(json, jl, &pol, &why);
    if (ret < 0)
        POST_REFUSE("InvalidPolicyDocument", RIO_EINVAL, "%s", why);
    if (now > pol.expiration)
        POST_REFUSE("AccessDenied", -EACCES, "Invalid according to Policy: Policy expired.");
    for (unsigned i = 0; i < pol.n; i++) {
        const struct cond *c = &pol.c[i];
        const char *value;
        char text[200];
        if (c->kind == C_RANGE) {
            out->len_min = c->min > out->len_min ? c->min : out->len_min;
            out->len_max = c->max < out->len_max ? c->max : out->len_max;
            continue;
        }
        value = strcmp(c->name, "bucket") == 0       ? bucket
                : strcmp(c->name, "key") == 0 && key ? key
                                                     : rio_s3_form_field(f, c->name);
        for (unsigned fi = 0; fi < rio_s3_form_nfields(f); fi++) {
            const char *fv, *fn = rio_s3_form_field_at(f, fi, &fv);
            if (strcmp(fn, c->name) == 0)
                covered[fi] = true;
        }
        if (!value || !cond_holds(c, value)) {
            cond_text(c, text, sizeof(text));
            POST_REFUSE("AccessDenied", -EACCES,
                        "Invalid according to Policy: Policy Condition failed: %s", text);
        }
    }
    if (out->len_min > out->len_max) /* several ranges that no size meets */
        POST_REFUSE("InvalidPolicyDocument", RIO_EINVAL,
                    "Invalid Policy: the content-length-range conditions leave no size.");
    for (unsigned fi = 0; fi < rio_s3_form_nfields(f); fi++) {
        const char *fv, *fn = rio_s3_form_field_at(f, fi, &fv);
        if (!covered[fi] && !exempt(fn))
            POST_REFUSE("AccessDenied", -EACCES,
                        "Invalid according to Policy: Extra input fields: %.64s", fn);
    }
    ret = 0;
out:
    EVP_MD_CTX_free(m);
    policy_free(&pol);
    rio__free(json);
    if (ret < 0)
        memset(out, 0, sizeof(*out));
    return ret;
}
