/* SPDX-License-Identifier: Apache-2.0 */
/*
 * URL and value parsing: "scheme://authority/path?k=v&k=v", sizes with
 * binary or decimal suffixes, and durations. Everything a user types in a
 * URL, an environment variable or on the command line comes through here,
 * so every error is a clean RIO_EURL / RIO_EINVAL and every number is checked
 * for overflow.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/alloc.h"
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
        if (!*piece || u->nparams >= RIO_URL_MAX_PARAMS)
            return RIO_EURL;
        ret = pct_decode(piece);
        if (ret < 0)
            return ret;
        u->pkey[u->nparams] = piece;
        /* A key without '=' has the empty value: its own terminator. */
        u->pval[u->nparams] = eq ? eq + 1 : piece + strlen(piece);
        ret = pct_decode(u->pval[u->nparams]);
        if (ret < 0)
            return ret;
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
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return RIO_EURL;

    /* One buffer: the copy, cut in place by NULs, plus one spare NUL that
     * empty fields point to. */
    buf = rio__malloc(len + 2);
    if (!buf)
        return -ENOMEM;
    memcpy(buf, s, len + 1);
    empty = buf + len + 1;
    *empty = '\0';
    u->buf = buf;

    for (p = buf; is_scheme_char(*p); p++)
        *p = (char)tolower((unsigned char)*p);
    if (p == buf || strncmp(p, "://", 3) != 0) {
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
    rio__free(buf);
    memset(u, 0, sizeof(*u));
    return ret;
}

void rio__url_cleanup(struct rio_url *u)
{
    if (!u)
        return;
    rio__free(u->buf);
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

int rio__opt_bool(const char *name, const char *v, bool *out)
{
    if (rio__parse_bool(v, out) == 0)
        return 0;
    fprintf(stderr, "railio: %s=%s: expected on or off\n", name, v ? v : "");
    return RIO_EINVAL;
}

int rio__opt_tristate(const char *name, const char *v, const char *third, int *out)
{
    if (rio__parse_tristate(v, third, out) == 0)
        return 0;
    fprintf(stderr, "railio: %s=%s: expected on, off or %s\n", name, v ? v : "", third);
    return RIO_EINVAL;
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
    fprintf(stderr, "railio: %s=%s: expected a duration (e.g. 250ms, 2s) under 49 days\n", name,
            v ? v : "");
    return RIO_EINVAL;
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
        fprintf(stderr,
                "railio: %s=%s: expected %sa size (e.g. 64K, 1M)%s from %" PRIu64 " to %" PRIu64
                "\n",
                name, v ? v : "", zero, step, min, max);
    else if (max != UINT64_MAX)
        fprintf(stderr, "railio: %s=%s: expected a size (e.g. 64K, 1M)%s up to %" PRIu64 "\n", name,
                v ? v : "", step, max);
    else
        fprintf(stderr, "railio: %s=%s: expected a size (e.g. 64K, 1M)%s\n", name, v ? v : "",
                step);
    return RIO_EINVAL;
}

int rio__opt_uint(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
    uint64_t x;

    if (rio__parse_uint(v, max, &x) == 0 && x >= min) {
        *out = x;
        return 0;
    }
    fprintf(stderr, "railio: %s=%s: expected a whole number from %" PRIu64 " to %" PRIu64 "\n",
            name, v ? v : "", min, max);
    return RIO_EINVAL;
}
