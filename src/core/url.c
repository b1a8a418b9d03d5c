/* SPDX-License-Identifier: Apache-2.0 */
/*
 * URL and value parsing: "scheme://authority/path?k=v&k=v", sizes with
 * binary or decimal suffixes, and durations. Everything a user types in a
 * URL, an environment variable or on the command line comes through here,
 * so every error is a clean RIO_EURL / RIO_EINVAL and every number is checked
 * for overflow.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memmem, memrchr */
#endif
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
#include "core/internal.h"
#include "core/secret.h"
#include "core/url.h"
#include "railio.h"

/* ------------------------------------------------------------------- URLs */

static int is_scheme_char(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '+' ||
           c == '.' || c == '-';
}

/* Decode %XX escapes in place. A NUL byte would silently cut the string, so
 * "%00" is an error like a malformed escape. */
static int pct_decode(char *s)
{
    char *d = s;

    while (*s) {
        if (*s == '%') {
            int hi = rio__hex_digit(s[1]);
            int lo = hi < 0 ? -1 : rio__hex_digit(s[2]);

            if (lo < 0 || (hi == 0 && lo == 0))
                return RIO_EURL;
            *d++ = (char)(hi << 4 | lo);
            s += 3;
        } else {
            *d++ = *s++;
        }
    }
    *d = '\0';
    return 0;
}

static int parse_query(struct rio_url *u, char *p)
{
    while (p) {
        char *piece = p;
        char *next = strchr(p, '&');
        char *eq;
        int ret;

        if (next)
            *next++ = '\0';
        p = next;
        if (!*piece)
            continue; /* "a=1&&b=2", a trailing '&' */
        eq = strchr(piece, '=');
        if (eq)
            *eq = '\0';
        /* (Values are not shown: one may be a secret.) */
        if (!*piece) {
            rio__detail("URL option %u has no name (\"=value\" after '?' or '&')", u->nparams + 1);
            return RIO_EURL;
        }
        if (u->nparams >= RIO_URL_MAX_PARAMS) {
            rio__detail("URL: more than %d options", RIO_URL_MAX_PARAMS);
            return RIO_EURL;
        }
        ret = pct_decode(piece);
        if (ret < 0) {
            rio__detail("URL option %u: its name has a malformed %%XX escape (or %%00)",
                        u->nparams + 1);
            return ret;
        }
        u->pkey[u->nparams] = piece;
        /* A key without '=' has the empty value: its own terminator. */
        u->pval[u->nparams] = eq ? eq + 1 : piece + strlen(piece);
        ret = pct_decode(u->pval[u->nparams]);
        if (ret < 0) {
            rio__detail("URL option %.64s: its value has a malformed %%XX escape (or %%00)", piece);
            return ret;
        }
        u->nparams++;
    }
    return 0;
}

int rio__url_parse(const char *s, struct rio_url *u)
{
    size_t len, i;
    char *buf, *p, *q, *empty;
    int ret;

    memset(u, 0, sizeof(*u));
    if (!s)
        return RIO_EURL;
    len = strlen(s);
    for (i = 0; i < len; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            rio__detail("URL: a control character (0x%02x) at byte %zu", (unsigned char)s[i], i);
            return RIO_EURL;
        }

    /* One buffer: the copy, cut in place by NULs, plus one spare NUL that
     * empty fields point to. Secret memory: an option may be a token
     * (?token=), a client keeps its URL as long as it lives, and a core
     * dump must not carry it. */
    if (len + 2 > RIO_SECRET_MAX) {
        rio__detail("URL: longer than %u bytes", RIO_SECRET_MAX - 2);
        return RIO_EURL;
    }
    buf = rio__secret_alloc(len + 2);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, s, len + 1);
    empty = buf + len + 1;
    *empty = '\0';
    u->buf = buf;

    for (p = buf; is_scheme_char(*p); p++)
        *p = (char)tolower((unsigned char)*p);
    if (p == buf || strncmp(p, "://", 3) != 0) {
        rio__detail("URL: no scheme (SCHEME://...)");
        ret = RIO_EURL;
        goto err_buf;
    }
    *p = '\0';
    u->scheme = buf;

    u->authority = p + 3;
    q = u->authority + strcspn(u->authority, "/?");
    u->path = empty;
    if (*q == '/') {
        *q = '\0';
        u->path = q + 1;
        q = u->path + strcspn(u->path, "?");
    }
    if (*q == '?') {
        *q = '\0';
        ret = parse_query(u, q + 1);
        if (ret < 0)
            goto err_buf;
    }
    return 0;
err_buf:
    rio__secret_free(buf);
    memset(u, 0, sizeof(*u));
    return ret;
}

void rio__url_cleanup(struct rio_url *u)
{
    if (!u)
        return;
    rio__secret_free(u->buf);
    memset(u, 0, sizeof(*u));
}

const char *rio__url_param(const struct rio_url *u, const char *key)
{
    unsigned i;

    for (i = 0; i < u->nparams; i++)
        if (strcmp(u->pkey[i], key) == 0)
            return u->pval[i];
    return NULL;
}

/* ---------------------------------------------------------------- numbers */

/* A non-negative decimal "123" or "1.25": integer part, fraction digits and
 * 10^(fraction digits). Digits past the 18th after the point are ignored. */
struct decimal {
    uint64_t ip;
    uint64_t frac;
    uint64_t fscale;
};

static const char *parse_decimal(const char *s, struct decimal *d)
{
    unsigned nfrac = 0;

    d->ip = 0;
    d->frac = 0;
    d->fscale = 1;
    if (!isdigit((unsigned char)*s))
        return NULL;
    for (; isdigit((unsigned char)*s); s++) {
        unsigned v = (unsigned)(*s - '0');

        if (d->ip > (UINT64_MAX - v) / 10)
            return NULL;
        d->ip = d->ip * 10 + v;
    }
    if (*s != '.')
        return s;
    s++;
    if (!isdigit((unsigned char)*s))
        return NULL;
    for (; isdigit((unsigned char)*s); s++) {
        if (nfrac++ >= 18)
            continue;
        d->frac = d->frac * 10 + (uint64_t)(*s - '0');
        d->fscale *= 10;
    }
    return s;
}

/* d * mult, the fraction rounded down. A fraction of the base unit ("1.5"
 * bytes, "0.5ns") is an error rather than a silent truncation. */
static int decimal_scale(const struct decimal *d, uint64_t mult, uint64_t *out)
{
    uint64_t v, f;

    if (mult == 1 && d->frac)
        return RIO_EINVAL;
    if (d->ip > UINT64_MAX / mult)
        return RIO_EINVAL;
    v = d->ip * mult;
    f = (uint64_t)((unsigned __int128)d->frac * mult / d->fscale);
    if (v > UINT64_MAX - f)
        return RIO_EINVAL;
    *out = v + f;
    return 0;
}

int rio__parse_size(const char *s, uint64_t *out)
{
    static const char units[] = "kmgtp";
    struct decimal d;
    uint64_t mult = 1;
    const char *u;

    if (!s || !(s = parse_decimal(s, &d)))
        return RIO_EINVAL;
    if (*s && strcasecmp(s, "b") != 0) {
        const char *unit = strchr(units, tolower((unsigned char)*s));
        uint64_t base;
        unsigned exp, i;

        if (!unit || !*unit)
            return RIO_EINVAL;
        exp = (unsigned)(unit - units) + 1;
        u = s + 1;
        if (!*u || strcasecmp(u, "i") == 0 || strcasecmp(u, "ib") == 0)
            base = 1024; /* K, Ki, KiB */
        else if (strcasecmp(u, "b") == 0)
            base = 1000; /* KB */
        else
            return RIO_EINVAL;
        for (i = 0; i < exp; i++)
            mult *= base;
    }
    return decimal_scale(&d, mult, out);
}

int rio__parse_duration_ns(const char *s, uint64_t *out)
{
    static const struct {
        const char *suffix;
        uint64_t ns;
    } units[] = {
        {"", 1000000ull}, /* a bare number is milliseconds */
        {"ns", 1ull},
        {"us", 1000ull},
        {"ms", 1000000ull},
        {"s", 1000000000ull},
        {"m", 60ull * 1000000000ull},
        {"min", 60ull * 1000000000ull},
        {"h", 3600ull * 1000000000ull},
    };
    struct decimal d;
    size_t i;

    if (!s || !(s = parse_decimal(s, &d)))
        return RIO_EINVAL;
    for (i = 0; i < sizeof(units) / sizeof(units[0]); i++)
        if (strcmp(s, units[i].suffix) == 0)
            return decimal_scale(&d, units[i].ns, out);
    return RIO_EINVAL;
}

int rio__parse_uint(const char *s, uint64_t max, uint64_t *out)
{
    char *end;
    unsigned long long v;

    if (!s || *s < '0' || *s > '9')
        return RIO_EINVAL;
    errno = 0;
    v = strtoull(s, &end, 10);
    if (errno || *end || v > max)
        return RIO_EINVAL;
    *out = v;
    return 0;
}

int rio__parse_ms(const char *s, uint32_t *out)
{
    uint64_t ns;

    if (rio__parse_duration_ns(s, &ns) < 0 || ns / 1000000 >= UINT32_MAX)
        return RIO_EINVAL;
    *out = (uint32_t)((ns + 999999) / 1000000);
    return 0;
}

int rio__parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"1", "on", "true", "yes"};
    static const char *const no[] = {"0", "off", "false", "no"};
    size_t i;

    if (!s)
        return RIO_EINVAL;
    for (i = 0; i < sizeof(yes) / sizeof(yes[0]); i++) {
        if (!strcasecmp(s, yes[i])) {
            *out = true;
            return 0;
        }
        if (!strcasecmp(s, no[i])) {
            *out = false;
            return 0;
        }
    }
    return RIO_EINVAL;
}

int rio__parse_tristate(const char *s, const char *third, int *out)
{
    bool b;

    if (s && third && !strcasecmp(s, third)) {
        *out = -1;
        return 0;
    }
    if (rio__parse_bool(s, &b) < 0)
        return RIO_EINVAL;
    *out = b;
    return 0;
}

/* The one line a refused option writes to stderr, "railio: name=value:
 * expected ...", also this thread's rio_error_detail(); a secret's value
 * is not shown. */
int rio__opt_refuse(const char *name, const char *v, const char *fmt, ...)
{
    char rule[192];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(rule, sizeof(rule), fmt, ap);
    va_end(ap);
    if (!v || rio__secret_name(name, strlen(name)))
        v = v ? "***" : "";
    rio__detail("%s=%.128s: %s", name, v, rule);
    return RIO_EINVAL;
}

int rio__opt_bool(const char *name, const char *v, bool *out)
{
    if (rio__parse_bool(v, out) == 0)
        return 0;
    return rio__opt_refuse(name, v, "expected on or off");
}

int rio__opt_tristate(const char *name, const char *v, const char *third, int *out)
{
    if (rio__parse_tristate(v, third, out) == 0)
        return 0;
    return rio__opt_refuse(name, v, "expected on, off or %s", third);
}

int rio__url_bool(const struct rio_url *u, const char *name, bool *out)
{
    const char *v = rio__url_param(u, name);
    return v ? rio__opt_bool(name, v, out) : 0;
}

int rio__url_tristate(const struct rio_url *u, const char *name, const char *third, int *out)
{
    const char *v = rio__url_param(u, name);
    return v ? rio__opt_tristate(name, v, third, out) : 0;
}

int rio__opt_ms(const char *name, const char *v, uint32_t *out)
{
    if (rio__parse_ms(v, out) == 0)
        return 0;
    return rio__opt_refuse(name, v, "expected a duration (e.g. 250ms, 2s) under 49 days");
}

int rio__opt_size(const char *name, const char *v, uint64_t min, uint64_t max, unsigned flags,
                  uint64_t *out)
{
    const char *zero = (flags & RIO_OPT_SIZE_ZERO) && min ? "0 or " : "";
    const char *step = (flags & RIO_OPT_SIZE_4K) ? " in steps of 4096" : "";
    uint64_t x;

    if (rio__parse_size(v, &x) == 0 && x <= max && (x >= min || (!x && *zero)) &&
        !((flags & RIO_OPT_SIZE_4K) && x % 4096)) {
        *out = x;
        return 0;
    }
    if (min)
        return rio__opt_refuse(name, v,
                               "expected %sa size (e.g. 64K, 1M)%s from %" PRIu64 " to %" PRIu64,
                               zero, step, min, max);
    if (max != UINT64_MAX)
        return rio__opt_refuse(name, v, "expected a size (e.g. 64K, 1M)%s up to %" PRIu64, step,
                               max);
    return rio__opt_refuse(name, v, "expected a size (e.g. 64K, 1M)%s", step);
}

int rio__opt_uint(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t x;

    if (rio__parse_uint(v, max, &x) == 0 && x >= min) {
        *out = x;
        return 0;
    }
    return rio__opt_refuse(name, v, "expected a whole number from %" PRIu64 " to %" PRIu64, min,
                           max);
}

/* ------------------------------------------------------------ names */

/* Edit distance between a and b (insert, delete, replace, swap of two
 * neighbours), or a large number when either is longer than a name gets. */
static unsigned name_distance(const char *a, const char *b)
{
    enum { MAXN = 48 };
    unsigned d[MAXN + 1][MAXN + 1];
    size_t la = strlen(a), lb = strlen(b);

    if (la > MAXN || lb > MAXN)
        return UINT32_MAX;
    for (size_t i = 0; i <= la; i++)
        d[i][0] = (unsigned)i;
    for (size_t j = 0; j <= lb; j++)
        d[0][j] = (unsigned)j;
    for (size_t i = 1; i <= la; i++)
        for (size_t j = 1; j <= lb; j++) {
            unsigned cost = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            unsigned v = d[i - 1][j - 1] + cost;
            if (d[i - 1][j] + 1 < v)
                v = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < v)
                v = d[i][j - 1] + 1;
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] &&
                d[i - 2][j - 2] + 1 < v)
                v = d[i - 2][j - 2] + 1;
            d[i][j] = v;
        }
    return d[la][lb];
}

const char *rio__closest_name(const char *name, const char *const *const *lists, size_t nlists)
{
    const char *best = NULL;
    unsigned bestd = UINT32_MAX;
    size_t len = strlen(name);

    for (size_t l = 0; l < nlists; l++)
        for (const char *const *p = lists[l]; p && *p; p++) {
            unsigned dd = name_distance(name, *p);
            if (dd < bestd) {
                bestd = dd;
                best = *p;
            }
        }
    /* Close enough to be a typo: two edits (fewer than name has letters),
     * or a third of a long name. */
    if ((bestd <= 2 && bestd < len) || (bestd < UINT32_MAX && bestd * 3 <= len))
        return best;
    return NULL;
}

bool rio__name_in(const char *name, const char *const *list)
{
    for (const char *const *p = list; p && *p; p++)
        if (!strcmp(name, *p))
            return true;
    return false;
}

/* ------------------------------------------------------------ secrets */

/* Whether a part of low (split at '_' and '-') is a secret word mistyped:
 * "tokne=" is refused as an unknown option, and its value is the token. */
static bool near_secret_word(const char *low)
{
    static const char *const words[] = {"token", "secret", "password", "passwd"};

    for (const char *p = low; *p;) {
        size_t l = strcspn(p, "_-");
        char part[64];
        if (l < sizeof(part)) {
            memcpy(part, p, l);
            part[l] = '\0';
            for (size_t i = 0; l && i < sizeof(words) / sizeof(words[0]); i++)
                if (name_distance(part, words[i]) <= 1)
                    return true;
        }
        p += l;
        p += *p != '\0';
    }
    return false;
}

bool rio__secret_name(const char *name, size_t n)
{
    static const char *const words[] = {"token", "secret", "password", "passwd", "key"};
    char low[64];

    if (n >= sizeof(low))
        n = sizeof(low) - 1;
    for (size_t i = 0; i < n; i++)
        low[i] = (char)tolower((unsigned char)name[i]);
    low[n] = '\0';
    /* The object's key, and options that name a file (its path is no
     * secret, and an error about it must say which file). */
    if (!strcmp(low, "key") || !strcmp(low, "keyring") || (n > 5 && !strcmp(low + n - 5, "_file")))
        return false;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strstr(low, words[i]))
            return true;
    return near_secret_word(low);
}

/* Append n bytes of s to out[cap] at *o, as many as fit. */
static void put(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
    if (n > cap - 1 - *o)
        n = cap - 1 - *o;
    memcpy(out + *o, s, n);
    *o += n;
}

/* In s[..end), a at the authority after a "://": the password of its
 * user:password@, [*pw, *pw_end), and where the text after it goes on
 * (*next: the '@', or the authority's end when it holds none). */
static bool userinfo_password(const char *a, const char *end, const char **pw, const char **pw_end,
                              const char **next)
{
    const char *ae = a;
    while (ae < end && !strchr("/?#&", *ae))
        ae++;
    const char *at = memrchr(a, '@', (size_t)(ae - a));
    const char *colon = at ? memchr(a, ':', (size_t)(at - a)) : NULL;
    /* "user%3Apw@": curl decodes the user, and Basic auth joins it
     * with ':', so what follows the %3A is the password. */
    for (const char *x = a; at && !colon && x + 3 <= at; x++)
        if (x[0] == '%' && x[1] == '3' && (x[2] == 'A' || x[2] == 'a'))
            colon = x + 2;
    /* "user:pa/ss@host": a password holding a '/' not written %2F ends
     * the authority at the '/' (what follows the ':' is then no port):
     * hidden up to the last '@' before the query. */
    const char *c2 = !at && ae < end && *ae == '/' ? memchr(a, ':', (size_t)(ae - a)) : NULL;
    if (c2 && strspn(c2 + 1, "0123456789") < (size_t)(ae - c2 - 1)) {
        const char *qe = ae;
        while (qe < end && !strchr("?#&", *qe))
            qe++;
        const char *at2 = memrchr(ae, '@', (size_t)(qe - ae));
        if (at2) {
            at = at2;
            colon = c2;
        }
    }
    *next = colon ? at : ae;
    *pw = colon ? colon + 1 : NULL;
    *pw_end = colon ? at : NULL;
    return colon != NULL;
}

/* s[0..n) with the password of every "scheme://user:password@" in it
 * (the URL's own, or one in an option's value) replaced by "***". */
static void put_masked(char *out, size_t cap, size_t *o, const char *s, size_t n)
{
    const char *end = s + n, *pw, *pw_end, *next;

    while (s < end) {
        const char *sep = memmem(s, (size_t)(end - s), "://", 3);
        if (!sep) {
            put(out, cap, o, s, (size_t)(end - s));
            return;
        }
        if (userinfo_password(sep + 3, end, &pw, &pw_end, &next)) {
            put(out, cap, o, s, (size_t)(pw - s));
            put(out, cap, o, "***", 3);
        } else {
            put(out, cap, o, s, (size_t)(next - s));
        }
        s = next;
    }
}

/* The passwords put_masked hides in s[..end), overwritten with '*' in place. */
static bool mask_passwords(char *s, char *end)
{
    const char *pw, *pw_end, *next;
    bool any = false;

    while (s < end) {
        char *sep = memmem(s, (size_t)(end - s), "://", 3);
        if (!sep)
            break;
        if (userinfo_password(sep + 3, end, &pw, &pw_end, &next) && pw_end > pw) {
            memset((char *)pw, '*', (size_t)(pw_end - pw));
            any = true;
        }
        s = (char *)next;
    }
    return any;
}

/* s[0..n) with its %XX escapes decoded as the parser decodes them (a
 * malformed one kept as typed: this only shows text), into dst, at most
 * cap bytes; the length. */
static size_t lenient_decode(const char *s, size_t n, char *dst, size_t cap)
{
    size_t dn = 0;

    for (size_t i = 0; i < n && dn < cap; i++) {
        int hi = s[i] == '%' && i + 2 < n ? rio__hex_digit(s[i + 1]) : -1;
        int lo = hi >= 0 ? rio__hex_digit(s[i + 2]) : -1;
        if (lo >= 0) {
            dst[dn++] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            dst[dn++] = s[i];
        }
    }
    return dn;
}

/* An option's value v[0..n) written with %XX escapes, whose decoded form
 * (what the parser hands the backend) holds a user:password@: that form,
 * masked, into out; false when it holds none (the value is then shown as
 * typed). "endpoint=http%3A%2F%2Fak%3ASK%40h" carried its password past
 * put_masked, which looks for it as typed. A value too long to decode here
 * is shown as "***". */
static bool put_decoded_masked(char *out, size_t cap, size_t *o, const char *v, size_t n)
{
    char dec[2048], shown[2048];
    size_t dn, sn = 0;

    if (!memchr(v, '%', n))
        return false;
    if (n >= sizeof(dec)) {
        put(out, cap, o, "***", 3);
        return true;
    }
    dn = lenient_decode(v, n, dec, sizeof(dec));
    put_masked(shown, sizeof(shown), &sn, dec, dn);
    if (sn == dn && !memcmp(shown, dec, dn))
        return false;
    put(out, cap, o, shown, sn);
    return true;
}

const char *rio__url_redact(const char *url, char *out, size_t cap)
{
    size_t o = 0;

    if (!cap)
        return out;
    if (!url)
        url = "";
    const char *q = strchr(url, '?');
    put_masked(out, cap, &o, url, q ? (size_t)(q - url) : strlen(url));
    if (q) {
        put(out, cap, &o, "?", 1);
        for (const char *k = q + 1; *k;) {
            size_t kl = strcspn(k, "&"), nl = strcspn(k, "=&");
            char name[64];
            /* The name as the parser sees it: %XX decoded. */
            size_t dn = lenient_decode(k, nl, name, sizeof(name));
            if (nl < kl && rio__secret_name(name, dn)) {
                put(out, cap, &o, k, nl + 1);
                put(out, cap, &o, "***", 3);
            } else if (nl < kl) {
                put(out, cap, &o, k, nl + 1);
                if (!put_decoded_masked(out, cap, &o, k + nl + 1, kl - nl - 1))
                    put_masked(out, cap, &o, k + nl + 1, kl - nl - 1);
            } else {
                put_masked(out, cap, &o, k, kl);
            }
            k += kl;
            if (*k == '&') {
                put(out, cap, &o, "&", 1);
                k++;
            }
        }
    }
    out[o] = '\0';
    return out;
}

bool rio__url_mask_in_place(char *url)
{
    char *q = strchr(url, '?');
    bool any = mask_passwords(url, q ? q : url + strlen(url));

    for (char *k = q ? q + 1 : NULL; k && *k;) {
        size_t kl = strcspn(k, "&"), nl = strcspn(k, "=&");
        char name[64], shown[2048];
        size_t dn = lenient_decode(k, nl, name, sizeof(name)), sn = 0;
        char *v = k + nl + 1;
        size_t vn = nl < kl ? kl - nl - 1 : 0;
        /* What rio__url_redact hides, as it decides: a secret option's
         * value; a value whose %XX-decoded form holds a password (whole,
         * the escapes cannot be masked apart); a password as typed. */
        if (nl < kl &&
            (rio__secret_name(name, dn) || put_decoded_masked(shown, sizeof(shown), &sn, v, vn))) {
            memset(v, '*', vn);
            any = any || vn;
        } else if (mask_passwords(k, k + kl)) {
            any = true;
        }
        k += kl;
        if (*k != '&')
            break;
        k++;
    }
    return any;
}
