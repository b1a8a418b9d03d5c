/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Every allocation goes through these so tests can count them, fail the Nth
 * call, and fail on any leak.
 */
#ifndef RIO_ALLOC_H
#define RIO_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *rio__malloc(size_t n);
void *rio__calloc(size_t n, size_t size);
void *rio__realloc(void *p, size_t n);
char *rio__strdup(const char *s);
/* Large, page-aligned buffer (data staging). Free with rio__free. */
void *rio__alloc_aligned(size_t align, size_t n);
void rio__free(void *p);

/* Make *a (cap entries, the first used of them kept) hold at least need
 * entries, doubling from 64. Returns 0 or -ENOMEM (*a unchanged). */
int rio__u64_reserve(uint64_t **a, uint64_t *cap, uint64_t used, uint64_t need);

/* For another allocator of the library's (secret.c): count one attempt and
 * say whether it is the one chosen to fail; count blocks handed out (+1)
 * and given back (-1), so that a leak of them fails a test too. */
bool rio__alloc_attempt_fails(void);
void rio__alloc_outstanding_add(int64_t d);

/* Test hooks. */
/* Fail the nth allocation from now (1 = the next one); 0 disables. */
void rio__alloc_fail_nth(uint64_t n);
/* Allocations made since start (successful or failed attempts). */
uint64_t rio__alloc_calls(void);
/* Blocks currently allocated and not freed. */
int64_t rio__alloc_outstanding(void);
/* Bytes of those blocks (as malloc_usable_size counts them), and the most
 * there were since the last reset (reset: make it what there is now, and
 * return that). */
int64_t rio__alloc_bytes(void);
int64_t rio__alloc_bytes_peak(bool reset);

#endif
