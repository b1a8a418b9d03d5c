/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The S3 gateway's continuation tokens of a listing folded at a delimiter
 * other than '/' (ops.c): what follows the token's tag. A client sends back
 * whatever it likes, so the parser takes hostile bytes and is fuzzed on its
 * own (tests/fuzz/fuzz_list_token.c).
 */
#ifndef RIO_SERVER_S3_LISTTOKEN_H
#define RIO_SERVER_S3_LISTTOKEN_H

#include <stddef.h>

/* Room for what rio__gw_token_wrap writes of a token of n bytes. */
#define RIO_GW_TOKEN_WRAPPED(n) (1 + 3 * (n) + 1)
/* A token as it goes into XML and comes back in a query: "p" and t with
 * every byte outside '!'..'~', and '%', as %XX. A key may hold any byte
 * (S3's keys: control characters too), and &#x1; is no XML 1.0 at all: a
 * page whose token held one was refused by every parser (boto3's
 * paginator stopped there). out: RIO_GW_TOKEN_WRAPPED(strlen(t)) bytes. */
void rio__gw_token_wrap(const char *t, char *out);
/* The token rio__gw_token_wrap wrapped into t: 0 with out (cap bytes,
 * NUL-ended), or -1 when t is no such token or does not fit. */
int rio__gw_token_unwrap(const char *t, char *out, size_t cap);
/* "f" and the hex of rel (a page's last entry, without the bucket), or "g"
 * and rel wrapped (rio__gw_token_wrap's escapes) where the hex would not
 * fit in RIO_LIST_TOKEN_MAX; into out (cap bytes, at least
 * RIO_GW_TOKEN_WRAPPED(strlen(rel)) + 1 and 2 * strlen(rel) + 2). */
void rio__gw_folded_token(const char *rel, char *out, size_t cap);
/* The entry of token t into rel (cap bytes, NUL-ended): 0, or -1 when t is
 * no such token or its entry does not fit. */
int rio__gw_folded_token_parse(const char *t, char *rel, size_t cap);

#endif
