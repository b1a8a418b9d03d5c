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

/* "f" and the hex of rel (a page's last entry, without the bucket), or "g"
 * and rel itself where the hex would not fit in RIO_LIST_TOKEN_MAX; into
 * out (cap bytes, at least 2 * strlen(rel) + 2). */
void rio__gw_folded_token(const char *rel, char *out, size_t cap);
/* The entry of token t into rel (cap bytes, NUL-ended): 0, or -1 when t is
 * no such token or its entry does not fit. */
int rio__gw_folded_token_parse(const char *t, char *rel, size_t cap);

#endif
