/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The AWS shared credentials and config files (~/.aws/credentials,
 * ~/.aws/config), read the way the AWS CLI reads them (Python's
 * configparser): [section] headers, "key = value" or "key: value" lines,
 * key names in any case, whole-line comments (# or ;), indented lines
 * belonging to the key above (nested settings such as "s3 =", which this
 * reader leaves alone). In the config file a profile's section is
 * [profile NAME] ([default] or [profile default] for the default one); in
 * the credentials file it is [NAME]. Reads hostile bytes: every line and
 * value is bounded, unknown keys are ignored, and nothing read is ever
 * printed (a refusal names the line number only). No allocation, no
 * libcurl (tests/unit/test_s3_parse.c, tests/fuzz/fuzz_awsini.c).
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <string.h>

#include "railio.h"
#include "transport/s3/parse.h"

static const char *skip_ws(const char *p, const char *e)
{
    while (p < e && (*p == ' ' || *p == '\t'))
        p++;
    return p;
}

static const char *trim_end(const char *b, const char *e)
{
    while (e > b && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r'))
        e--;
    return e;
}

/* Whether section header text h[0..n) names profile in this kind of file. */
static bool section_is(const char *h, size_t n, const char *profile, bool config)
{
    size_t pl = strlen(profile);

    if (config && n > 8 && !memcmp(h, "profile", 7) && (h[7] == ' ' || h[7] == '\t')) {
        const char *b = skip_ws(h + 7, h + n), *e = trim_end(b, h + n);
        return (size_t)(e - b) == pl && !memcmp(b, profile, pl);
    }
    if (config && strcmp(profile, "default") != 0)
        return false; /* only the default profile goes without "profile " */
    return n == pl && !memcmp(h, profile, pl);
}

/* Copy value v[0..n) into a field of cap bytes: -1 when it does not fit or
 * holds a NUL. */
static int set_field(char *dst, size_t cap, const char *v, size_t n)
{
    if (n >= cap || memchr(v, '\0', n))
        return -1;
    memcpy(dst, v, n);
    dst[n] = '\0';
    return 0;
}

/* A refusal at line: nothing read is kept (a secret read before it
 * included), only the line number. */
static int refuse(struct rio_awsini *out, unsigned line)
{
    explicit_bzero(out, sizeof(*out));
    out->bad_line = line;
    return RIO_EPROTO;
}

int rio__awsini_parse(const char *buf, size_t len, const char *profile, bool config,
                      struct rio_awsini *out)
{
    const char *p = buf, *end = buf + len;
    bool in = false, key_above = false;
    unsigned line = 0;

    memset(out, 0, sizeof(*out));
    if (len > RIO_AWSINI_FILE_MAX)
        return RIO_EPROTO;
    if (len >= 3 && !memcmp(p, "\xef\xbb\xbf", 3))
        p += 3;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end, *b, *e, *d, *vs, *ke;
        char name[32];
        size_t kl;
        bool indented;

        line++;
        if ((size_t)(le - p) > RIO_AWSINI_LINE_MAX) {
            return refuse(out, line);
        }
        b = skip_ws(p, le);
        e = trim_end(b, le);
        indented = b != p;
        p = nl ? nl + 1 : end;
        if (b == e || *b == '#' || *b == ';')
            continue;
        /* An indented line after a key continues it (a nested setting). */
        if (indented && key_above)
            continue;
        if (*b == '[') {
            key_above = false;
            if (e - b < 2 || e[-1] != ']') {
                return refuse(out, line);
            }
            in = section_is(b + 1, (size_t)(e - b - 2), profile, config);
            if (in)
                out->found = true;
            continue;
        }
        /* The key: up to '=' or ':'. */
        for (d = b; d < e && *d != '=' && *d != ':'; d++)
            ;
        if (d == e) {
            return refuse(out, line);
        }
        ke = trim_end(b, d);
        vs = skip_ws(d + 1, e);
        kl = (size_t)(ke - b);
        key_above = true;
        if (!in || kl == 0 || kl >= sizeof(name))
            continue;
        for (size_t i = 0; i < kl; i++)
            name[i] = (char)tolower((unsigned char)b[i]);
        name[kl] = '\0';
        struct {
            const char *name;
            char *dst;
            size_t cap;
        } const fields[] = {
            {"aws_access_key_id", out->access_key, sizeof(out->access_key)},
            {"aws_secret_access_key", out->secret_key, sizeof(out->secret_key)},
            {"aws_session_token", out->token, sizeof(out->token)},
            {"region", out->region, sizeof(out->region)},
            {"endpoint_url", out->endpoint_url, sizeof(out->endpoint_url)},
            {"ca_bundle", out->ca_bundle, sizeof(out->ca_bundle)},
        };
        for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
            if (strcmp(name, fields[i].name) == 0 &&
                set_field(fields[i].dst, fields[i].cap, vs, (size_t)(e - vs)) < 0) {
                return refuse(out, line);
            }
        }
    }
    return out->found ? 0 : RIO_ENOTFOUND;
}
