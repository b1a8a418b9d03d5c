/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Wildcards in the last path element of a URL: `*`, `?` and `[...]`
 * (ranges, `!` or `^` to negate, `]` first is literal), `\` quotes the next
 * character. Matched against listed keys byte by byte; the literal part
 * before the first wildcard is the list prefix, so a pattern costs one
 * listing of what could match, not of the whole store.
 */
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

#include "cli/tree.h"

/* The end of the bracket expression that opens at p ('['), or NULL when it
 * is not closed (then '[' is a literal character). */
static const char *bracket_end(const char *p)
{
    const char *q = p + 1;
    if (*q == '!' || *q == '^')
        q++;
    if (*q == ']')
        q++;
    for (; *q; q++) {
        if (*q == '\\' && q[1])
            q++;
        else if (*q == ']')
            return q;
    }
    return NULL;
}

const char *rio_cli_glob_first(const char *pat)
{
    for (const char *p = pat; *p; p++) {
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '*' || *p == '?' || (*p == '[' && bracket_end(p)))
            return p;
    }
    return NULL;
}

size_t rio_cli_glob_prefix(const char *pat, char *out, size_t cap)
{
    const char *stop = rio_cli_glob_first(pat);
    size_t n = 0;
    for (const char *p = pat; *p && p != stop; p++) {
        if (*p == '\\' && p[1])
            p++;
        if (n + 1 < cap)
            out[n] = *p;
        n++;
    }
    if (cap)
        out[n < cap ? n : cap - 1] = '\0';
    return n;
}

/* Whether c is in the bracket expression [p, end]. */
static bool bracket_match(const char *p, const char *end, unsigned char c)
{
    bool neg = false, hit = false;
    p++;
    if (*p == '!' || *p == '^') {
        neg = true;
        p++;
    }
    bool first = true;
    while (p < end || (first && *p == ']')) {
        unsigned char lo = (unsigned char)*p;
        if (lo == '\\' && p + 1 < end)
            lo = (unsigned char)*++p;
        unsigned char hi = lo;
        if (p[1] == '-' && p + 2 < end) {
            p += 2;
            hi = (unsigned char)*p;
            if (hi == '\\' && p + 1 < end)
                hi = (unsigned char)*++p;
        }
        if (c >= lo && c <= hi)
            hit = true;
        p++;
        first = false;
    }
    return hit != neg;
}

/*
 * Iterative matching with one backtrack point (the last '*'): linear in
 * practice and never recursive, whatever a hostile pattern or key holds.
 */
bool rio_cli_glob_match(const char *pat, const char *s, bool slash)
{
    const char *star = NULL, *resume = NULL;
    while (*s) {
        const char *p = pat;
        if (*p == '*') {
            star = ++pat;
            resume = s;
            continue;
        }
        if (*p == '?' && (slash || *s != '/')) {
            pat++;
            s++;
            continue;
        }
        if (*p == '[') {
            const char *end = bracket_end(p);
            if (end) {
                if ((slash || *s != '/') && bracket_match(p, end, (unsigned char)*s)) {
                    pat = end + 1;
                    s++;
                    continue;
                }
                goto backtrack;
            }
        }
        if (*p == '\\' && p[1])
            p++;
        else if (*p == '?')
            goto backtrack; /* a '?' that met '/' */
        if (*p && *p == *s) {
            pat = p + 1;
            s++;
            continue;
        }
    backtrack:
        if (!star || (!slash && *resume == '/'))
            return false;
        pat = star;
        s = ++resume;
    }
    while (*pat == '*')
        pat++;
    return *pat == '\0';
}
