/* SPDX-License-Identifier: Apache-2.0 */
/*
 * file:// transport: test and bench hooks. The transport itself is reached by
 * URL (file:///DIR, file:///PATH?single=1); see docs/file.md.
 */
#ifndef RIO_TRANSPORT_FILE_H
#define RIO_TRANSPORT_FILE_H

#include <stdint.h>

#include "railio.h"

/* What the queues did since the client opened (summed over queues). */
struct rio_file_counters {
    uint64_t steps_direct;   /* O_DIRECT steps into or from the caller's memory */
    uint64_t steps_bounce;   /* O_DIRECT steps through a bounce buffer */
    uint64_t steps_fixed;    /* of those, on registered buffers (READ/WRITE_FIXED) */
    uint64_t steps_buffered; /* page-cache steps */
    uint64_t continuations;  /* steps queued after a short step */
    uint64_t direct_einval;  /* direct steps refused with EINVAL and redone buffered */
    uint64_t cancels;        /* cancel requests sent to the kernel */
    uint64_t inflight;       /* ops submitted and not yet completed */
    uint64_t submits;        /* io_uring_submit calls that handed SQEs to the kernel */
    uint64_t bounce_bytes;   /* bounce buffer memory set up (at open where steps are staged) */
    /* Metadata, summed wall time in the calling threads (bench figures). */
    uint64_t lookups, lookup_ns;     /* lookup: open, fstat, xattr */
    uint64_t put_opens, put_open_ns; /* put_open: create, fallocate, second open */
    uint64_t commits, commit_ns;     /* put_commit, whole */
    uint64_t commit_sync_ns;         /* of which fsync of the file and of its directory */
};

/*
 * Counters of c's file transport. Returns 0, or RIO_EINVAL when c is not a
 * file:// client. Thread-safe.
 */
int rio_file_counters(struct rio_client *c, struct rio_file_counters *out);

#endif
