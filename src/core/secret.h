/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Memory for secrets (tokens, secret keys): kept out of core dumps and wiped
 * before it is given back. See secret.c for why each allocation is a mapping
 * of its own.
 */
#ifndef RIO_SECRET_H
#define RIO_SECRET_H

#include <stddef.h>

/* The most one secret allocation may hold: the largest long-lived secret is
 * the S3 gateway's table of users' secret keys (10000 of 257 bytes). */
#define RIO_SECRET_MAX (4u << 20)

/* n zeroed bytes (n <= RIO_SECRET_MAX, 0 counts as 1) in pages marked
 * MADV_DONTDUMP; NULL when n is over the bound or memory is short. Counted
 * and failed on demand as rio__malloc is. Free with rio__secret_free. */
void *rio__secret_alloc(size_t n);
/* Wipes every byte of p's pages, then unmaps them. p may be NULL. */
void rio__secret_free(void *p);
/* s[0..n) and a NUL, or s and its NUL, in secret memory; NULL as above. */
char *rio__secret_strndup(const char *s, size_t n);
char *rio__secret_strdup(const char *s);

#endif
