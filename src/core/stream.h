/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streaming entries the library's own programs use beyond the public
 * readers (stream.c): the CLI's GET to a file.
 */
#ifndef RIO_STREAM_H
#define RIO_STREAM_H

#include <stddef.h>
#include <stdint.h>

#include "railio.h"

/*
 * Fetch the object d describes (rio_stat's descriptor: no second lookup;
 * every read names d->generation) from byte offset on, handing each chunk
 * to cb(arg, off, data, len) in the caller's thread as soon as it is
 * verified, in whatever order chunks verify: off is the byte offset of data
 * in the object, len its bytes (the first chunk's bytes before offset are
 * not handed). data is the library's, valid during the call only. Each byte
 * from offset on is handed exactly once. At most prefetch chunks (0: the
 * client's depth x paths, within its budget) are fetched ahead of the
 * lowest chunk not yet handed. cb returning non-zero stops the fetch: a
 * negative value is returned, a positive one gives RIO_ECANCELED. Returns
 * the bytes handed (d->size - offset) once every one was, or an error: then
 * some chunks may have been handed and others not (the caller publishes
 * nothing of it), RIO_EGENERATION when the key was replaced. opt as for
 * rio_reader_open_desc (stats: sink_ns is the time in cb). Fenced: nothing
 * of it is in flight when it returns.
 */
int64_t rio__get_chunks(struct rio_client *c, const struct rio_desc *d, uint64_t offset,
                        unsigned prefetch,
                        int (*cb)(void *arg, uint64_t off, const void *data, size_t len), void *arg,
                        const struct rio_call *opt);

#endif
