/* SPDX-License-Identifier: Apache-2.0 */
/* URL parsing: scheme://authority/path?k=v&k=v */
#ifndef RIO_URL_H
#define RIO_URL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The value of the hex digit c (either case), or -1. */
static inline int rio__hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* s (n bytes) in lower-case hex into out (2n + 1 bytes, NUL-ended). */
static inline void rio__hex_encode(const char *s, size_t n, char *out)
{
    static const char hex[] = "0123456789abcdef";

    for (size_t i = 0; i < n; i++) {
        out[2 * i] = hex[(unsigned char)s[i] >> 4];
        out[2 * i + 1] = hex[(unsigned char)s[i] & 15];
    }
    out[2 * n] = '\0';
}

/* The n hex digits at hex (n even) as a string into out (n / 2 + 1 bytes,
 * NUL-ended): 0, or -1 for an odd n, a digit that is not one or a NUL byte
 * among them. Lower-case only, as rio__hex_encode writes. */
static inline int rio__hex_decode_str(const char *hex, size_t n, char *out)
{
    if (n % 2)
        return -1;
    for (size_t i = 0; i < n / 2; i++) {
        int hi = hex[2 * i] >= 'A' && hex[2 * i] <= 'F' ? -1 : rio__hex_digit(hex[2 * i]);
        int lo =
            hex[2 * i + 1] >= 'A' && hex[2 * i + 1] <= 'F' ? -1 : rio__hex_digit(hex[2 * i + 1]);
        if (hi < 0 || lo < 0 || (hi == 0 && lo == 0))
            return -1;
        out[i] = (char)(hi << 4 | lo);
    }
    out[n / 2] = '\0';
    return 0;
}

#define RIO_URL_MAX_PARAMS 32

struct rio_url {
    char *buf;       /* owns every string below */
    char *scheme;    /* lower-case, e.g. "mock" */
    char *authority; /* "host:port,host2:port2" or a name; may be "" */
    char *path;      /* after the first '/', without it; may be "" */
    unsigned nparams;
    char *pkey[RIO_URL_MAX_PARAMS];
    char *pval[RIO_URL_MAX_PARAMS];
};

/* Parse s into u. Returns 0 or RIO_EURL (bad syntax) / -ENOMEM. */
int rio__url_parse(const char *s, struct rio_url *u);
void rio__url_cleanup(struct rio_url *u);
/* Value of query parameter key, or NULL. */
const char *rio__url_param(const struct rio_url *u, const char *key);

/*
 * Parse a size with an optional binary or decimal suffix: "4M" and "4MiB" are
 * 4*2^20, "4MB" is 4e6, "125M" for rates follows the same rule. Returns 0 or
 * RIO_EINVAL.
 */
int rio__parse_size(const char *s, uint64_t *out);
/* Parse a decimal integer 0..max (digits only, nothing after). 0 or RIO_EINVAL. */
int rio__parse_uint(const char *s, uint64_t max, uint64_t *out);
/* Parse a duration: "250ms", "2s", "100us", bare number = ms. In nanoseconds. */
int rio__parse_duration_ns(const char *s, uint64_t *out);
/* A duration (as above) in whole milliseconds, rounded up, below UINT32_MAX. */
int rio__parse_ms(const char *s, uint32_t *out);
/*
 * The one boolean syntax of every option and knob: 1/on/true/yes and
 * 0/off/false/no, in any case. 0 or RIO_EINVAL (*out untouched).
 */
int rio__parse_bool(const char *s, bool *out);
/*
 * A boolean or the word `third` (any case, e.g. "auto"): *out is 1 (on),
 * 0 (off) or -1 (third). 0 or RIO_EINVAL (*out untouched).
 */
int rio__parse_tristate(const char *s, const char *third, int *out);
/*
 * The same for a transport's URL option name=v: a refusal (RIO_EINVAL) writes
 * one line to stderr naming it, e.g. "railio: keepalive=maybe: expected on or
 * off". Not for secrets (the value is printed).
 */
int rio__opt_bool(const char *name, const char *v, bool *out);
int rio__opt_tristate(const char *name, const char *v, const char *third, int *out);
int rio__opt_ms(const char *name, const char *v, uint32_t *out);
/* The same for the URL's ?name= itself: *out untouched when it is absent. */
int rio__url_bool(const struct rio_url *u, const char *name, bool *out);
int rio__url_tristate(const struct rio_url *u, const char *name, const char *third, int *out);
/*
 * A size option name=v (rio__parse_size's syntax) from min to max. Flags:
 * RIO_OPT_SIZE_ZERO also accepts 0 below min (the option's "off" or "the
 * default"), RIO_OPT_SIZE_4K only multiples of 4096. A refusal (RIO_EINVAL,
 * *out untouched) names the option and the range, e.g. "railio:
 * bufsize=100: expected 0 or a size (e.g. 64K, 1M) from 1024 to 524288".
 */
#define RIO_OPT_SIZE_ZERO 1u
#define RIO_OPT_SIZE_4K 2u
int rio__opt_size(const char *name, const char *v, uint64_t min, uint64_t max, unsigned flags,
                  uint64_t *out);
/* A count option name=v (digits only) from min to max; a refusal names
 * it, e.g. "railio: conns=0: expected a whole number from 1 to 16". */
/* Refuse option name's value v (NULL: none given; hidden when the name is
 * a secret's) with the rule fmt says: said on stderr ("railio: name=v:
 * rule") and in rio_error_detail(). Returns RIO_EINVAL. */
int rio__opt_refuse(const char *name, const char *v, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int rio__opt_uint(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *out);

/*
 * The name in the NULL-terminated lists closest to name (a typo of it: at
 * most two edits, or a third of name's length), or NULL. For the "did you
 * mean" of an unknown option or variable.
 */
const char *rio__closest_name(const char *name, const char *const *const *lists, size_t nlists);
/* Whether name is in the NULL-terminated list (NULL: empty). */
bool rio__name_in(const char *name, const char *const *list);

/*
 * Whether an option named name[0..n) holds a secret: its name has token,
 * secret, password, passwd or key in it (any case), but is not `key` (an
 * object's), `keyring` or a *_file (paths, named in errors about them).
 */
bool rio__secret_name(const char *name, size_t n);
/*
 * url as it may appear in a message or a log: the value of every secret
 * option (?token=***) and the password of every user:password@ (the URL's
 * and any in an option's value) replaced by "***". Writes at most cap bytes
 * (NUL included, cut short when it does not fit) to out; returns out.
 */
const char *rio__url_redact(const char *url, char *out, size_t cap);
/* url, in place, with what rio__url_redact hides (a secret option's value,
 * a user:password@'s password) overwritten with '*', its length kept: what
 * a process's command line shows. True when anything was. */
bool rio__url_mask_in_place(char *url);

#endif
