/* SPDX-License-Identifier: Apache-2.0 */
/* FUZZ_SOURCES src/transport/rados/token.c src/server/s3/listtoken.c src/core/errors.c
 * src/core/alloc.c */
/*
 * libFuzzer target for the listing tokens a caller hands back: rados://'s
 * hash-order ("r1-HASH-TIES[-HEX]") and sorted ("s1-HEX", "s2-NAME")
 * tokens (src/transport/rados/token.c: rio_list_args.token, and through the
 * gateway a ListObjectsV2 continuation-token) and the S3 gateway's folded
 * listing tokens ("fHEX", "gNAME", src/server/s3/listtoken.c). Any client
 * can send any bytes as a token.
 *
 * Input: one byte choosing the parser, then the token (up to a NUL, as a
 * query argument arrives). A token a parser accepts must be one its
 * formatter could have written, or name an entry that fits where it goes:
 * - r1: within every bound, and formatted again it is the same bytes;
 * - s1/s2: a name of at most RIO_KEY_MAX bytes without a NUL, and the
 *   token formatted from it parses back to the same name;
 * - folded: an entry that fits its buffer, and the token formatted from it
 *   parses back to the same entry;
 * - wrapped (ListObjectsV2's backend token): wraps back to the same bytes,
 *   all printable ASCII.
 * Seeds: tests/fuzz/corpus/list_token/.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "railio.h"
#include "server/s3/listtoken.h"
#include "transport/rados/token.h"

#define CHECK FUZZ_CHECK

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static char again[RIO_GW_TOKEN_WRAPPED(4 * RIO_LIST_TOKEN_MAX) + 8], sa[RIO_KEY_MAX + 1],
        sa2[RIO_KEY_MAX + 1], btok[4 * RIO_LIST_TOKEN_MAX + 1];
    static char rel[RIO_KEY_MAX + 1], rel2[RIO_KEY_MAX + 1];
    struct rio__rados_ltok tk;
    char *tok;
    size_t n;

    if (size < 1 || size > 4 * RIO_LIST_TOKEN_MAX)
        return 0;
    n = size - 1;
    tok = malloc(n + 1); /* exactly the token and its NUL: reads past it trap */
    CHECK(tok != NULL);
    memcpy(tok, data + 1, n);
    tok[n] = '\0';
    n = strlen(tok);

    switch (data[0] % 4) {
    case 0:
        if (rio__rados_ltok_parse(tok, &tk) == 0) {
            CHECK(n <= RIO_LIST_TOKEN_MAX);
            CHECK(tk.pos <= 0xffffffffu && tk.ties <= RIO_RADOS_TIES_MAX);
            CHECK(!tk.has_sa || (tk.sa[0] && strlen(tk.sa) <= RIO_RADOS_TOKEN_SA_MAX));
            memset(again, 0, sizeof(again));
            rio__rados_ltok_format(&tk, again);
            CHECK(strcmp(again, tok) == 0);
        }
        break;
    case 1:
        if (rio__rados_stok_parse(tok, sa) == 0) {
            size_t l = strlen(sa);
            CHECK(l >= 1 && l <= RIO_KEY_MAX && l < n);
            if (rio__rados_stok_format(sa, again) == 0) {
                CHECK(strlen(again) <= RIO_LIST_TOKEN_MAX);
                CHECK(rio__rados_stok_parse(again, sa2) == 0 && strcmp(sa, sa2) == 0);
            } else {
                CHECK(3 + l > RIO_LIST_TOKEN_MAX);
            }
        }
        break;
    case 3:
        /* The gateway's wrapped backend token: unwrapped, it wraps back
         * to the same bytes (one spelling), and what it wraps is printable
         * ASCII only, so no XML parser refuses it. */
        if (rio__gw_token_unwrap(tok, btok, sizeof(btok)) == 0) {
            rio__gw_token_wrap(btok, again);
            CHECK(strcmp(again, tok) == 0);
            for (const char *p = again; *p; p++)
                CHECK(*p >= '!' && *p <= '~');
        }
        break;
    default:
        if (rio__gw_folded_token_parse(tok, rel, sizeof(rel)) == 0) {
            size_t l = strlen(rel);
            CHECK(l >= 1 && l < sizeof(rel) && l < n);
            rio__gw_folded_token(rel, again, sizeof(again));
            CHECK(rio__gw_folded_token_parse(again, rel2, sizeof(rel2)) == 0);
            CHECK(strcmp(rel, rel2) == 0);
        }
        break;
    }
    free(tok);
    return 0;
}
