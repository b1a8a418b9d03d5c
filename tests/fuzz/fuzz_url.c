/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/core/url.c src/core/options.c src/core/alloc.c src/core/secret.c */
/* FUZZ_SOURCES src/core/errors.c */
/*
 * libFuzzer target for URLs and option strings (src/core/url.c,
 * src/core/options.c): the input, terminated, is parsed as a URL; when it
 * parses, its parameters are looked up and the client options resolved from
 * it (sizes, durations, booleans, enums; the environment is left as it is).
 * The same string is also given to the size, integer and duration parsers
 * on its own. Accepted options must be within their documented limits.
 * Seeds: tests/fuzz/corpus/url/.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/engine.h"
#include "core/url.h"
#include "railio.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size > 8192)
        return 0;
    char *s = malloc(size + 1);
    if (!s)
        return 0;
    memcpy(s, data, size);
    s[size] = '\0';

    uint64_t v;
    (void)rio__parse_size(s, &v);
    (void)rio__parse_uint(s, UINT32_MAX, &v);
    (void)rio__parse_duration_ns(s, &v);
    /* The option parsers every transport's options go through (their
     * refusals name the option on stderr). */
    {
        bool b;
        int tri;
        uint32_t ms;
        (void)rio__opt_bool("fuzz", s, &b);
        (void)rio__opt_tristate("fuzz", s, "auto", &tri);
        (void)rio__opt_ms("fuzz", s, &ms);
        (void)rio__opt_size("fuzz", s, 1, UINT64_MAX, RIO_OPT_SIZE_ZERO, &v);
        (void)rio__opt_uint("fuzz", s, 1, UINT64_MAX, &v);
    }

    /* The redaction is bounded, terminated, and shows no secret's value:
     * a URL whose only token is "Sekr1t" never prints it. */
    {
        char shown[64];
        rio__url_redact(s, shown, sizeof(shown));
        if (!memchr(shown, '\0', sizeof(shown)))
            abort();
        char url[9000];
        snprintf(url, sizeof(url), "railio://h/k?token=Sekr1t&%s", s);
        char big[sizeof(url)];
        rio__url_redact(url, big, sizeof(big));
        if (!strchr(s, 'S') && strstr(big, "Sekr1t"))
            abort();
        /* Masked in place (the CLI's command line): its length kept, and
         * the token's value gone the same way. */
        size_t n = strlen(url);
        rio__url_mask_in_place(url);
        if (strlen(url) != n || (!strchr(s, 'S') && strstr(url, "Sekr1t")))
            abort();
    }

    struct rio_url u;
    if (rio__url_parse(s, &u) == 0) {
        static const char *const names[] = {"chunk",  "paths",    "depth", "deadline", "op_timeout",
                                            "verify", "endpoint", "etag",  ""};
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            (void)rio__url_param(&u, names[i]);
        /* Every option known or refused by name; a refusal leaves a detail. */
        static const char *const transport[] = {"rate", "token", "conns", NULL};
        if (rio__url_options_known(&u, u.scheme, transport) < 0 && !rio_error_detail()[0])
            abort();
        struct rio_options o;
        char why[256];
        if (rio__options_check(NULL, &u, &o, why, sizeof(why)) == 0) {
            if (o.chunk_size < 4096 || o.chunk_size > (1ull << 30) || o.depth < 1 ||
                o.depth > 1024 || o.op_timeout_ms == 0 || o.deadline_ms == 0 ||
                o.retry_attempts < 1 || o.request_budget > o.budget_bytes)
                abort();
        } else if (!memchr(why, '\0', sizeof(why)) || !why[0]) {
            abort();
        }
        rio__url_cleanup(&u);
    }
    free(s);
    return 0;
}
