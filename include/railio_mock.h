/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-process mock transport (mock://NAME) and the fault language of the
 * fault filter.
 *
 * mock:// is a model of paths with their own bandwidth and latency and a
 * shared storage service rate: for the engine's tests, the capacity model
 * (`railio bench mock`), and for users who want to test their own retry
 * handling.
 *
 * URL: mock://NAME?paths=4&rate=125M,125M,62M,31M&lat=200us&disk=0&faults=SPEC
 *   paths  number of paths (1..RIO_MAX_PATHS), default 1
 *   rate   bytes/s per path, one value for all or a comma list; 0 = unlimited
 *          (default 0). Suffixes as sizes: 125M = 125 MiB/s, 125MB = 125e6.
 *   lat    per-op round-trip latency (default 0): "200us", "1ms"
 *   disk   shared storage service rate in bytes/s, 0 = unlimited (default)
 *   contend  with disk: each op the service holds beyond the first divides
 *          its rate by 1 + contend more (default 0): a CPU-bound server whose
 *          total rate falls as more connections share it (contend=1: two ops
 *          at once move half of what one does)
 *   depth_cap  ops a path holds (default 1024): the engine keeps at most that
 *          many in flight on a path; beyond it submit returns -EAGAIN
 * Clients opened with the same NAME share one store (like one server).
 *
 * Faults. Any URL takes `faults=SPEC;SPEC;...` (each SPEC as parsed by
 * rio_mock_fault_parse; "faults=" alone: none yet): the client's transport is
 * then wrapped by the fault filter, which injects the faults into the ops the
 * engine sends and the metadata calls it makes, whatever the transport
 * (file:///dir?faults=error:chunk=3:error=EIO). A mock:// client always has
 * the filter. The functions below that name faults work on any client whose
 * transport is wrapped and return RIO_EINVAL (or do nothing) otherwise.
 * Bytes a fault did not deliver are 0xDD, never zeros.
 */
#ifndef RAILIO_MOCK_H
#define RAILIO_MOCK_H

#include <stdint.h>

#include "railio.h"

#ifdef __cplusplus
extern "C" {
#endif

enum rio_mock_fault_kind {
    /* deliver after_bytes, fail ECONNRESET; every op on the path fails with
     * it, and the path refuses new ops for down_ms (0 = until healed) */
    RIO_MOCK_DISCONNECT = 1,
    RIO_MOCK_SHORT,   /* complete "successfully" with after_bytes < len (under-delivery) */
    RIO_MOCK_BITFLIP, /* flip one bit of the delivered (READ) or sent (WRITE) bytes; a WRITE
                         sends a flipped private copy, the caller's buffer is never touched */
    RIO_MOCK_STALL,   /* never complete until cancelled */
    RIO_MOCK_ERROR,   /* fail with `error` (e.g. -ETIMEDOUT, RIO_ESERVER) */
    RIO_MOCK_LATE,    /* stall; when cancelled, write 0xDD into dst delay_ms later, then complete */
    /* replace the object (new generation, other bytes) before serving this
     * READ; mock:// only (the filter asks the mock's store), RIO_EINVAL elsewhere */
    RIO_MOCK_GENCHANGE,
    RIO_MOCK_DELAY,      /* add delay_ms to this op's completion; with a metadata op
                            (op=put_commit, ...): the call is made delay_ms late */
    RIO_MOCK_META_ERROR, /* fail a metadata call (op: lookup, put_open, put_commit, remove; 0 =
                            any) with `error`, delay_ms after it was made (0: at once, as
                            a server that times out would); a failed put_commit aborts its
                            upload */
    /* Breaks the contract, for tests that must show they would catch a
     * transport without a fence: stall; when cancelled, complete at once
     * (-ECANCELED) and write 0xDD into dst delay_ms later, after the engine
     * has been told the op is over. Refused (RIO_EINVAL) unless the
     * environment has RIO_TEST_UNSAFE_FAULTS=1: it writes into memory its
     * caller may have freed. */
    RIO_MOCK_UNFENCED,
};

/**
 * A fault rule. An op matches when kind of op, path and chunk match (-1 =
 * any); it then fires `count` times (0 = every match), or with `probability`
 * (0 < p <= 1) drawn from the client's seed when probability is set.
 * A metadata rule (RIO_MOCK_META_ERROR) matches by op alone.
 */
struct rio_mock_fault {
    int kind;             /* enum rio_mock_fault_kind */
    int op;               /* 0 = any, RIO_MOCK_OP_* */
    int path;             /* -1 = any */
    int64_t chunk;        /* -1 = any */
    uint32_t count;       /* how many times it fires; 0 = unlimited */
    uint32_t skip;        /* let this many matching ops pass first */
    uint64_t after_bytes; /* DISCONNECT, SHORT: bytes delivered before the fault */
    int error;            /* ERROR, META_ERROR: the code (default RIO_ESERVER) */
    uint32_t delay_ms;    /* LATE, DELAY, UNFENCED */
    uint32_t down_ms;     /* DISCONNECT: how long the path refuses ops (0 = until rio_mock_heal) */
    double probability;   /* 0 = deterministic (count/skip) */
};

/* op= of data faults: read, write (0: both) */
#define RIO_MOCK_OP_READ 1
#define RIO_MOCK_OP_WRITE 2
/* op= of META_ERROR: lookup, put_open, put_commit, remove, list, exists (0:
 * any of them) */
#define RIO_MOCK_OP_LOOKUP 3
#define RIO_MOCK_OP_PUT_OPEN 4
#define RIO_MOCK_OP_PUT_COMMIT 5
#define RIO_MOCK_OP_REMOVE 6
#define RIO_MOCK_OP_LIST 7
#define RIO_MOCK_OP_EXISTS 8

/**
 * Parse one spec: "KIND[:key=value]..." with KIND disconnect, short, bitflip,
 * stall, error, late, genchange, delay, meta_error or unfenced, and keys
 * op=read|write (meta_error, and delay: lookup|put_open|put_commit|remove|list|exists),
 * path, chunk,
 * count, skip, bytes, error (errno name or RIO_E* name or number), delay,
 * down, p. Examples: "disconnect:path=1:bytes=65536:down=0",
 * "meta_error:op=put_commit:error=EIO:count=1". Returns 0 or RIO_EINVAL.
 */
int rio_mock_fault_parse(const char *spec, struct rio_mock_fault *out);

/** Add a fault rule to the client's fault filter. RIO_EINVAL if its transport is not wrapped
 * (no faults= in its URL and not mock://) or the rule does not fit it (a path it does not have,
 * genchange on another transport than mock://). Thread-safe. */
int rio_mock_fault_add(struct rio_client *c, const struct rio_mock_fault *f);
/** Remove every fault rule (wrapped transports only). */
void rio_mock_faults_clear(struct rio_client *c);
/** Bring every path a disconnect took down back up (wrapped transports only). */
void rio_mock_heal(struct rio_client *c);
/** mock:// only: change one path's rate (bytes/s, 0 = unlimited) and latency at run time. */
int rio_mock_set_path(struct rio_client *c, unsigned path, double rate_bps, uint64_t lat_ns);

struct rio_mock_counters {
    /* ops_read, ops_write, faults_fired, late_writes and inflight come from
     * the fault filter (any wrapped transport); the others from mock:// (0
     * on other transports). */
    uint64_t ops_read, ops_write; /* ops the filter accepted */
    uint64_t faults_fired;
    uint64_t late_writes;         /* LATE and UNFENCED faults that wrote after cancel */
    uint64_t rollback_violations; /* ops submitted with stale attempt state */
    uint64_t inflight;            /* ops accepted and not yet completed */
    uint64_t commits;             /* put_commit calls */
    uint64_t commits_overlapped;  /* of those, made while ops were in flight */
    uint64_t lookups;             /* lookup calls */
    uint64_t lookups_overlapped;  /* of those, made while ops were in flight */
    uint64_t uploads_open;        /* uploads opened and not yet committed or aborted */
    uint64_t uploads_open_peak;   /* the most of them at once */
};
/** The client's fault and mock counters; all zero when its transport is not wrapped. */
void rio_mock_counters(struct rio_client *c, struct rio_mock_counters *out);

/**
 * Play a hostile server: until called again, lookups of d->key answer d as
 * is (its xxh ignored: a list of xxh_len zeros, at most 2^20, goes with it,
 * whatever d->nchunks says). d == NULL stops it. RIO_EINVAL if not mock://.
 */
int rio_mock_desc_set(struct rio_client *c, const struct rio_desc *d, uint64_t xxh_len);

#ifdef __cplusplus
}
#endif
#endif
