/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados:// listing tokens (list.c), parsed without librados: a caller hands
 * back whatever it likes as a token, so the parsers take hostile bytes and
 * are fuzzed on their own (tests/fuzz/fuzz_list_token.c).
 */
#ifndef RIO_TRANSPORT_RADOS_TOKEN_H
#define RIO_TRANSPORT_RADOS_TOKEN_H

#include <stdbool.h>
#include <stdint.h>

#include "railio.h"

#define RIO_RADOS_TIES_MAX 64u /* objects at one 32-bit hash a token may skip */
/* start_after bytes a hash-order token holds */
#define RIO_RADOS_TOKEN_SA_MAX ((RIO_LIST_TOKEN_MAX - 32u) / 2u)

/* A hash-order listing's place: "r1-HASH-TIES[-HEX]". */
struct rio__rados_ltok {
    uint64_t pos;  /* bit-reversed hash position, 32 bits */
    unsigned ties; /* objects at exactly pos already passed, <= RIO_RADOS_TIES_MAX */
    char sa[RIO_RADOS_TOKEN_SA_MAX + 1];
    bool has_sa;
};

/* Exactly the format rio__rados_ltok_format writes: 0, or RIO_EINVAL (with
 * a detail) for anything else. */
int rio__rados_ltok_parse(const char *s, struct rio__rados_ltok *tk);
/* Into out (RIO_LIST_TOKEN_MAX + 1 bytes). */
void rio__rados_ltok_format(const struct rio__rados_ltok *tk, char *out);

/* A sorted listing's place, the page's last name: "s1-" and its hex, or
 * "s2-" and the name itself when the hex would not fit. Parse into sa
 * (RIO_KEY_MAX + 1 bytes): 0, or RIO_EINVAL (with a detail). */
int rio__rados_stok_parse(const char *tok, char *sa);
/* Into out (RIO_LIST_TOKEN_MAX + 1 bytes): 0, or -1 when key is too long
 * for a token (over RIO_LIST_TOKEN_MAX - 3 bytes). */
int rio__rados_stok_format(const char *key, char *out);

#endif
