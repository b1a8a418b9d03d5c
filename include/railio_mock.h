/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The in-process mock transport (mock://NAME): a model of paths with their own
 * bandwidth and latency, a shared storage service rate, and injectable faults.
 * For the engine's tests, the capacity model (`railio bench mock`), and for
 * users who want to test their own retry handling.
 *
 * URL: mock://NAME?paths=4&rate=125M,125M,62M,31M&lat=200us&disk=0&faults=SPEC
 *   paths  number of paths (1..RIO_MAX_PATHS), default 1
 *   rate   bytes/s per path, one value for all or a comma list; 0 = unlimited
 *          (default 0). Suffixes as sizes: 125M = 125 MiB/s, 125MB = 125e6.
 *   lat    per-op round-trip latency (default 0): "200us", "1ms"
 *   disk   shared storage service rate in bytes/s, 0 = unlimited (default)
 *   depth_cap  ops a path accepts before submit returns -EAGAIN (default 1024)
 *   faults semicolon-separated fault specs (rio_mock_fault_parse)
 * Clients opened with the same NAME share one store (like one server).
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
    RIO_MOCK_DISCONNECT =
        1, /* deliver after_bytes, fail ECONNRESET; path down for down_ms (0 = until healed) */
    RIO_MOCK_SHORT,   /* complete "successfully" with after_bytes < len (under-delivery) */
    RIO_MOCK_BITFLIP, /* flip one bit of the delivered (READ) or received (WRITE) bytes */
    RIO_MOCK_STALL,   /* never complete until cancelled */
    RIO_MOCK_ERROR,   /* fail with `error` (e.g. -ETIMEDOUT, RIO_ESERVER) */
    RIO_MOCK_LATE,    /* stall; when cancelled, write 0xDD into dst delay_ms later, then complete */
    RIO_MOCK_GENCHANGE, /* replace the object (new generation, other bytes) before serving this op
                         */
    RIO_MOCK_DELAY,     /* add delay_ms to this op's completion */
};

/**
 * A fault rule. An op matches when kind of op, path and chunk match (-1 =
 * any); it then fires `count` times (0 = every match), or with `probability`
 * (0 < p <= 1) drawn from the client's seed when probability is set.
 */
struct rio_mock_fault {
    int kind;             /* enum rio_mock_fault_kind */
    int op;               /* 0 = reads and writes, RIO_MOCK_OP_READ, RIO_MOCK_OP_WRITE */
    int path;             /* -1 = any */
    int64_t chunk;        /* -1 = any */
    uint32_t count;       /* how many times it fires; 0 = unlimited */
    uint32_t skip;        /* let this many matching ops pass first */
    uint64_t after_bytes; /* DISCONNECT, SHORT: bytes delivered before the fault */
    int error;            /* ERROR: the code */
    uint32_t delay_ms;    /* LATE, DELAY */
    uint32_t down_ms;     /* DISCONNECT: how long the path refuses ops (0 = until rio_mock_heal) */
    double probability;   /* 0 = deterministic (count/skip) */
};

#define RIO_MOCK_OP_READ 1
#define RIO_MOCK_OP_WRITE 2

/**
 * Parse one spec: "KIND[:key=value]..." with keys op=read|write, path, chunk,
 * count, skip, bytes, error (errno name or RIO_E* name or number), delay,
 * down, p. Example: "disconnect:path=1:bytes=65536:down=0".
 * Returns 0 or RIO_EINVAL.
 */
int rio_mock_fault_parse(const char *spec, struct rio_mock_fault *out);

/** Add a fault rule to the client's mock transport. RIO_EINVAL if not mock://. */
int rio_mock_fault_add(struct rio_client *c, const struct rio_mock_fault *f);
/** Remove every fault rule. */
void rio_mock_faults_clear(struct rio_client *c);
/** Bring every downed path back up. */
void rio_mock_heal(struct rio_client *c);
/** Change one path's rate (bytes/s, 0 = unlimited) and latency at run time. */
int rio_mock_set_path(struct rio_client *c, unsigned path, double rate_bps, uint64_t lat_ns);

struct rio_mock_counters {
    uint64_t ops_read, ops_write;
    uint64_t faults_fired;
    uint64_t late_writes;         /* LATE faults that wrote after cancel */
    uint64_t rollback_violations; /* ops submitted with stale attempt state */
    uint64_t inflight;            /* ops the mock holds now */
    uint64_t commits;             /* put_commit calls */
    uint64_t commits_overlapped;  /* of those, made while ops were in flight */
    uint64_t lookups;             /* lookup calls */
    uint64_t lookups_overlapped;  /* of those, made while ops were in flight */
    uint64_t uploads_open;        /* uploads opened and not yet committed or aborted */
    uint64_t uploads_open_peak;   /* the most of them at once */
};
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
