/* SPDX-License-Identifier: Apache-2.0 */
/* Things shared between src/core files and the transports, not public. */
#ifndef RIO_INTERNAL_H
#define RIO_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "railio.h"

struct rio_transport;

/* The client's transport (for backend-specific test APIs such as railio_mock.h). */
struct rio_transport *rio__client_transport(struct rio_client *c);
/* True for a NULL client, and (saying so in rio_error_detail) for one
 * another process made: a child after fork() (include/railio.h). Every
 * public call on a client refuses such a one with RIO_EINVAL. */
bool rio__client_unusable(const struct rio_client *c);
/* The effective seed (never 0). */
uint64_t rio__client_seed(struct rio_client *c);

/* Classify an error code into enum rio_err_class. */
int rio__err_class(int err);
/* 1 if the class means the path itself failed (reset, refused, timeout, unreachable, dns). */
int rio__class_is_path(int cls);
/* 1 if the class may be retried. */
int rio__class_is_retryable(int cls);

/* Set this thread's rio_error_detail() text (printf format; truncated to
 * 512 bytes). The caller never passes a secret: a URL goes through
 * rio__url_redact first. rio__detail_clear empties it (each public call
 * that can fail starts with it). */
void rio__detail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void rio__detail_clear(void);

/*
 * The deadline (rio__now_ns() clock; UINT64_MAX: none) of the metadata try
 * this thread is running: core/meta.c sets it around each try of a lookup,
 * an upload open, a remove, a list page and an existence batch. A
 * transport whose own timeout for the try would run past it stops there
 * (a timeout, which the engine then reports as RIO_EDEADLINE), so that a
 * server that never answers holds a call no longer than its deadline.
 */
uint64_t rio__meta_deadline_ns(void);
/* The cancel token of that try (NULL: none), and whether a token fired:
 * a transport that waits on a server may stop when it does (soon after,
 * RIO_ECANCELED), as the engine's own waits do. */
struct rio_cancel;
const struct rio_cancel *rio__meta_cancel(void);
int rio__cancel_fired(const struct rio_cancel *cx);
/* Where a transport waits on a server during that try, it calls
 * rio__meta_tick at least every 10 ms: the op's progress callback
 * (rio_stat_call's, rio_delete_call's) runs there, in the calling thread,
 * every 100 ms, and may fire the try's cancel token. rio__meta_ticking:
 * whether the try has one (a wait that looks at no token then still wakes
 * to call it). */
void rio__meta_tick(void);
bool rio__meta_ticking(void);
/* The call's deadline and token around a commit's tries (UINT64_MAX,
 * NULL otherwise): not for the commit's own request, which goes out
 * whatever the deadline (the chunks are in), but for a transport's wait
 * for a commit its server is still applying, which ends there (an unknown
 * outcome) rather than at the transport's own bound. */
uint64_t rio__meta_settle_deadline_ns(void);
const struct rio_cancel *rio__meta_settle_cancel(void);

/* Map an errno/RIO_E* name ("ECONNRESET", "RIO_ESERVER") to its code; 0 if unknown. */
int rio__err_from_name(const char *name);

/*
 * The geometry the engine accepts from a transport's descriptor: a chunk of
 * 4 KiB (the smallest a client writes) to 5 GiB (S3's largest part), at
 * most 2^24 chunks (the bookkeeping of one object stays under 1 GiB).
 */
#define RIO__DESC_CHUNK_MIN 4096ull
#define RIO__DESC_CHUNK_MAX (5ull << 30)
#define RIO__DESC_CHUNKS_MAX (1ull << 24)

/*
 * Check a descriptor a transport returned for key (NULL: any key) before
 * anything is sized from it: size <= INT64_MAX, chunk_size 0 (none kept, then
 * no chunk count and no list) or within the limits above, nchunks ==
 * ceil(size / chunk_size), etag "" or 32 hex digits, key terminated. Returns
 * 0 or RIO_EPROTO with why (cap bytes, may be NULL) naming the field.
 */
int rio__desc_check(const struct rio_desc *d, const char *key, char *why, size_t cap);

/*
 * Make dst the concatenation of the objects srcs[0..n) without copying
 * their bytes, where the backend can (transport.h, compose: rados://);
 * RIO_ENOTSUP where it cannot (the caller copies instead), with nothing
 * changed. gens (may be NULL) holds the generation each source must have,
 * 0 for any; dst_if a condition on dst (0: none; RIO__PUT_IF_ABSENT, or
 * the generation dst must have: else RIO_EGENERATION, nothing changed).
 * On success *out is dst's descriptor (rio_desc_cleanup), its etag "".
 * Blocking, thread-safe, never retried.
 */
int rio__compose(struct rio_client *c, const char *dst, const char *const *srcs,
                 const uint64_t *gens, unsigned n, unsigned flags, uint64_t dst_if,
                 struct rio_desc *out);

/* splitmix64 step: deterministic pseudo-random numbers from a state. */
static inline uint64_t rio__rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

#endif
