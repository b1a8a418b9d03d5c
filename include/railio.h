/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio: move large objects over every path you have.
 *
 * A client is opened from a URL naming a backend (mock://, railio://,
 * s3://, rados://, file://). Each object is split into chunks that move
 * concurrently over the client's paths with a bounded amount of work in
 * flight, each chunk verified by its xxh3-64, retried without corrupting
 * anything, and summarised in stats with a bottleneck verdict.
 *
 * Conventions: functions return int (>= 0 success, < 0 error: -errno or a
 * RIO_E* code below -10000); rio_get returns int64_t so it can carry byte
 * counts above 2 GiB. A client may be used by several threads at once; every
 * call blocks until it is finished and nothing of it is still in flight.
 * A client belongs to the process that made it: its threads do not survive
 * fork(), so a child must neither use nor destroy an inherited client (it
 * makes its own). A call on one in a child (or on its readers and
 * writers) returns RIO_EINVAL at once (rio_error_detail says why), and
 * rio_client_destroy and the streams' close and abort there leave it alone.
 */
#ifndef RAILIO_H
#define RAILIO_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define RIO_VERSION_MAJOR 0
#define RIO_VERSION_MINOR 1
#define RIO_VERSION_PATCH 0

/*
 * ABI rules (librailio.so.MAJOR; docs/install.md):
 * - Only names starting rio_ and a letter are exported; rio__* is internal.
 * - The structs a caller allocates and that will grow (struct rio_options,
 *   struct rio_call, struct rio_stats) end in reserved words. Their size never
 *   changes within a MAJOR version: a new field takes the place of reserved
 *   words, and a zero in it means what the library did before the field
 *   existed. So always zero-initialise them (rio_options_init, `= {0}` or
 *   designated initialisers) and never write to reserved; a program built
 *   against an older header then runs unchanged against a newer library.
 * - Other structs (rio_desc, rio_op, rio_path_stats, rio_counters) are
 *   frozen: changing them bumps MAJOR, as does removing or changing any call.
 */

/** The library's version, "MAJOR.MINOR.PATCH" (the shared object's, not the header's). */
const char *rio_version(void);
/**
 * The URL schemes this build can open, space-separated, e.g. "mock railio
 * file s3 http https rados". A scheme served by a loadable module (s3, http,
 * https, rados) is listed when its module is installed; opening it may still fail when the
 * module's own library is missing (the error names the package). Static storage.
 */
const char *rio_backends(void);
/** 1 if rio_client_new can handle scheme ("s3", "rados", ...), 0 if not. */
int rio_has_scheme(const char *scheme);

/* ------------------------------------------------------------------ errors */

/*
 * X(NAME, value, message). Values are fixed forever: they travel in logs and
 * on the wire (railio:// answers carry them).
 */
#define RIO_ERRNO_LIST(X)                                                                          \
    X(RIO_EINVAL, -10001, "invalid argument")                                                      \
    X(RIO_EURL, -10002, "malformed or unsupported URL")                                            \
    X(RIO_ECHECKSUM, -10003, "chunk checksum mismatch")                                            \
    X(RIO_EGENERATION, -10004, "object generation changed during the operation")                   \
    X(RIO_ERETRIES, -10005, "retries exhausted")                                                   \
    X(RIO_EDEADLINE, -10006, "request deadline passed")                                            \
    X(RIO_EBUSY, -10007, "in-flight budget exhausted (fail-fast mode)")                            \
    X(RIO_ENOPATH, -10008, "no healthy path left")                                                 \
    X(RIO_ESHORT, -10009, "short transfer: fewer bytes than requested")                            \
    X(RIO_ENOTFOUND, -10010, "no such object")                                                     \
    X(RIO_ETOOBIG, -10011, "object larger than the destination buffer")                            \
    X(RIO_ECANCELED, -10012, "operation cancelled")                                                \
    X(RIO_EPROTO, -10013, "protocol error: malformed message or frame check failed")               \
    X(RIO_ESERVER, -10014, "server error (retryable)")                                             \
    X(RIO_ETHROTTLE, -10015, "throttled by the server (retryable)")                                \
    X(RIO_EDNS, -10016, "name resolution failed")                                                  \
    X(RIO_ENOTSUP, -10017, "operation not supported by this backend")                              \
    X(RIO_ECLOSED, -10018, "client is closing")                                                    \
    X(RIO_EUNKNOWN, -10019,                                                                        \
      "outcome unknown: the request (a commit, a delete, a PUT in one exchange) may or may not "   \
      "have taken effect")                                                                         \
    X(RIO_ENOUPLOAD, -10020, "upload lost before its commit: nothing was written")                 \
    X(RIO_EVERSION, -10024, "protocol version mismatch: the peer speaks another protocol version") \
    X(RIO_EAUTH, -10025, "authentication failed: the server did not prove it holds the token")     \
    X(RIO_ETLS, -10026, "TLS failed: the peer does not speak TLS or the TLS handshake failed")     \
    X(RIO_ETLSVERIFY, -10027, "TLS: certificate verify failed")                                    \
    X(RIO_ENOCONTAINER, -10028, "no such bucket, pool or store root")                              \
    X(RIO_ENOCREDS, -10029, "no credentials found")

enum rio_errno {
#define RIO__ERR_ENUM(name, value, msg) name = value,
    RIO_ERRNO_LIST(RIO__ERR_ENUM)
#undef RIO__ERR_ENUM
};

/** Message for any return code (-errno or RIO_E*). Never NULL, static storage. */
const char *rio_strerror(int err);
/** Symbolic name ("RIO_ECHECKSUM", "ECONNRESET") for any return code. Static storage. */
const char *rio_errname(int err);
/**
 * The cause behind the last error a rio_* call returned in this thread, when
 * the library knows more than the code says ("path 0: connection refused;
 * path 1: TLS handshake failed", "unknown URL option 'path' (did you mean
 * 'paths'?)", "RIO_DEPTH=-1: not a count"); "" when it knows nothing more.
 * Secrets (tokens, keys, passwords) never appear in it. Thread-local storage,
 * valid until this thread's next rio_* call.
 */
const char *rio_error_detail(void);

/* ----------------------------------------------------------------- options */

enum rio_budget_mode {
    RIO_BUDGET_WAIT = 0, /* wait for in-flight bytes to drain (backpressure) */
    RIO_BUDGET_FAIL = 1, /* return RIO_EBUSY at once when the budget is full */
};

/* struct rio_options.etag (0: the default, RIO_ETAG_FAST). */
enum rio_etag {
    RIO_ETAG_NONE = -1, /* no etag ("") */
    RIO_ETAG_MD5 = 1,   /* the MD5 of the whole byte stream */
    RIO_ETAG_FAST = 2,  /* derived from the chunk xxh3 list: not an MD5 */
};

/* Per-call flags (struct rio_call.flags). */
#define RIO_ATOMIC 0x1u /* GET: stage, copy to the caller's buffer only on success */
/* PUT (rio_put, a batch's PUTs, a writer, rio_put_stream): publish only if
 * the key holds no object at the commit, else RIO_EGENERATION and nothing
 * is published. Decided atomically with the publish, so of several
 * concurrent PUTs of an absent key exactly one succeeds. Backends that
 * cannot decide it atomically (s3://, railiod with --disk) refuse the
 * call with RIO_ENOTSUP before any chunk is sent. Not with
 * expect_generation. */
#define RIO_IF_ABSENT 0x2u

#define RIO_MAX_PATHS 16

/* A deadline_ms (options or call) that means "no deadline". */
#define RIO_DEADLINE_NONE UINT32_MAX

/**
 * Client options. Initialise with rio_options_init(); zero fields mean "use the
 * environment (RIO_*), then the default". Environment variables are read once,
 * at rio_client_new. By default a request has no whole-request deadline:
 * op_timeout bounds every chunk op and retry_attempts the tries, so a stall
 * ends while a slow transfer that keeps moving is not cut off. A deadline
 * of 0 or "none" in the URL (deadline=0, deadline=none) or the environment
 * (RIO_DEADLINE_MS=0 or none), or RIO_DEADLINE_NONE in the struct, means no
 * deadline; an op_timeout of 0 is refused (there is always one). A bad
 * option, or a URL option neither the client nor the URL's transport knows,
 * makes rio_client_new return RIO_EINVAL with rio_error_detail() naming it
 * (the library writes no error of its own to stderr: the caller says it).
 */
struct rio_options {
    uint64_t chunk_size;       /* RIO_CHUNK_SIZE, default 4 MiB */
    unsigned paths;            /* RIO_PATHS, default: what the URL/transport offers */
    unsigned depth;            /* RIO_DEPTH: ops in flight per path, default 4 */
    uint64_t budget_bytes;     /* RIO_BUDGET: client in-flight bytes, default 256 MiB */
    uint64_t request_budget;   /* RIO_REQUEST_BUDGET: per request, default = budget */
    int budget_mode;           /* RIO_BUDGET_MODE=wait|fail, enum rio_budget_mode */
    unsigned retry_attempts;   /* RIO_RETRIES: tries per chunk and metadata op, default 5 */
    uint32_t backoff_base_ms;  /* RIO_BACKOFF_BASE_MS, default 10 */
    uint32_t backoff_cap_ms;   /* RIO_BACKOFF_CAP_MS, default 1000 */
    uint32_t deadline_ms;      /* RIO_DEADLINE_MS: whole request, default none */
    uint32_t op_timeout_ms;    /* RIO_OP_TIMEOUT_MS: one chunk op, default 10000 */
    uint32_t cooldown_base_ms; /* RIO_COOLDOWN_BASE_MS: failed path, default 100 */
    uint32_t cooldown_cap_ms;  /* RIO_COOLDOWN_CAP_MS, default 5000 */
    int verify;                /* RIO_VERIFY: 1 verify chunks (default), -1 off */
    int retry_checksum;        /* RIO_RETRY_CHECKSUM: 1 retry a bad chunk (default), -1 fail */
    uint64_t seed;             /* RIO_SEED: jitter and mock faults; 0 = time-based */
    /* RIO_ETAG=fast|md5|none, enum rio_etag: what a PUT's etag is.
     * RIO_ETAG_FAST (default): 32 hex digits derived from the chunk xxh3
     * list and the geometry, no extra pass over the bytes; a backend whose
     * etag must be an MD5 (s3://) then stores none. RIO_ETAG_MD5: the MD5 of
     * the whole byte stream, one more pass over every byte on one core.
     * RIO_ETAG_NONE: etag "". */
    int etag;
    /* RIO_TLS / tls=on|off: railio:// runs every connection over TLS: 1 on,
     * -1 off (default). The CA bundle is tls_ca= or RIO_TLS_CA (default: the
     * system store); see docs/protocol.md, TLS. Other schemes ignore it.
     * Aligned: it takes the first reserved word, not etag's padding. */
    int tls __attribute__((aligned(8)));
    /* RIO_ADAPT / adapt=on|off: 1 on (default), -1 off. On, the engine
     * starts each call class (GET, PUT) of the client on one path at depth
     * 1 and adds paths, then depth, while goodput grows, up to paths and
     * depth (then ceilings); off, it uses them all from the start
     * (docs/tuning.md, "Adaptive concurrency"). */
    int adapt;
    uint64_t reserved[7]; /* must be zero (ABI rules above): else RIO_EINVAL */
};

/** Fill *o with zeros (every knob "default"). Accepts NULL (does nothing). */
void rio_options_init(struct rio_options *o);

/* ------------------------------------------------------------------- stats */

enum rio_verdict {
    RIO_VERDICT_NONE = 0,     /* too little data to say */
    RIO_VERDICT_NETWORK = 1,  /* paths at their cap, the slowest or a failed path, latency-bound */
    RIO_VERDICT_STORAGE = 2,  /* time spent in the target's service (server/disk) */
    RIO_VERDICT_SOFTWARE = 3, /* client CPU: a thread saturated (hashing, copies, engine) */
    RIO_VERDICT_SINK = 4,     /* a stream's consumer: the destination took the time */
    RIO_VERDICT_SOURCE = 5,   /* a stream's producer: the source took the time */
};

/* rio_stats.adapt_state: what the adaptive concurrency did (option adapt). */
enum rio_adapt_state {
    RIO_ADAPT_OFF = 0,     /* adapt=off: every path at full depth */
    RIO_ADAPT_GROWING = 1, /* still adding paths or depth while goodput grows */
    RIO_ADAPT_SETTLED = 2, /* the next step up did not add goodput: held here */
    RIO_ADAPT_CEILING = 3, /* every step added goodput: at the configured paths and depth */
};

/* Retry/error classes; index into rio_stats.retries. */
enum rio_err_class {
    RIO_CLASS_RESET = 0,
    RIO_CLASS_REFUSED,
    RIO_CLASS_TIMEOUT,
    RIO_CLASS_UNREACH,
    RIO_CLASS_DNS,
    RIO_CLASS_SHORT,
    RIO_CLASS_CHECKSUM,
    RIO_CLASS_SERVER,
    RIO_CLASS_THROTTLE,
    RIO_CLASS_FATAL, /* not retryable */
    RIO_CLASS__COUNT
};

/** Name of an error class ("reset", "checksum", ...). */
const char *rio_class_name(int cls);
/** Name of a verdict ("network", "storage", "software", "sink", "source", "none"). */
const char *rio_verdict_name(int v);

struct rio_path_stats {
    uint64_t bytes;      /* payload bytes delivered on this path (successful ops) */
    uint64_t busy_ns;    /* time with at least one op in flight */
    uint64_t ops;        /* ops completed successfully */
    uint64_t errors;     /* ops failed */
    uint64_t peak_depth; /* most ops in flight at once */
    double rate_mbps;    /* bytes / busy time, in MB/s (1e6) */
    double cap_mbps;     /* the path's known cap in MB/s, 0 if unknown */
    int state;           /* 0 healthy, 1 cooling down, 2 probing (at the end) */
};

/**
 * What one call (or batch) did. Caller-owned; pass it in struct rio_call.
 * Latencies are per chunk attempt that succeeded, submit to completion;
 * chunks counts them all, the percentiles come from a uniform sample of
 * up to 65536 of them (lat_max_ns from all).
 */
struct rio_stats {
    uint64_t bytes;      /* payload bytes of the request(s) */
    uint64_t elapsed_ns; /* call entry to return */
    double goodput_mbps; /* bytes / elapsed, MB/s */
    unsigned npaths;
    struct rio_path_stats path[RIO_MAX_PATHS];
    uint64_t retries[RIO_CLASS__COUNT]; /* failed attempts by class */
    uint64_t retries_total;
    uint64_t chunks;
    uint64_t lat_p50_ns, lat_p95_ns, lat_p99_ns, lat_max_ns;
    uint64_t first_done_ns, last_done_ns; /* since call entry */
    uint64_t hash_ns;                     /* computing xxh3/MD5 on PUT */
    uint64_t verify_ns;                   /* verifying chunks on GET */
    uint64_t copy_ns;                     /* staging copies (RIO_ATOMIC) */
    uint64_t svc_ns; /* target service time reported by the transport, summed */
    uint64_t op_ns;  /* op time summed over successful attempts */
    uint64_t peak_inflight_bytes;
    uint64_t bytes_staged;
    uint64_t engine_cpu_ns;    /* engine thread CPU during the call */
    uint64_t transport_cpu_ns; /* transport-owned threads' CPU during the call, if known */
    uint64_t caller_cpu_ns;    /* calling thread CPU during the call */
    uint64_t cpu_wait_ns;      /* time the process's threads waited for a CPU (run queue);
                                * read for calls of 1 MiB or more only, else 0 */
    int verdict;               /* enum rio_verdict */
    char verdict_text[192];    /* the figures behind the verdict */
    /* Whole requests run again: a GET re-planned against the key's new
     * generation (a PUT replaced it while it read), a PUT started over
     * because the server lost its upload before the commit. retries and
     * retries_total include the failed attempts of the earlier runs. */
    uint64_t replans;
    /* GET verification, done on the client's worker threads outside its
     * lock, several chunks at once: the bytes checked (xxh3) and the CPU
     * time those threads spent on it, summed (verify_ns above is their wall
     * time, summed). verify_bytes / verify_cpu_ns is the verify rate of one
     * core; 0 when nothing was verified. */
    uint64_t verify_bytes;
    uint64_t verify_cpu_ns;
    /* Streams: the caller's time outside the library while the call was
     * open. sink_ns: a reader's consumer (between rio_reader_read calls, in
     * rio_get_stream's callback: the destination). source_ns: a writer's
     * producer (between rio_writer_write calls, in rio_put_stream's fill:
     * the source). 0 for other calls. */
    uint64_t sink_ns;
    uint64_t source_ns;
    /* Adaptive concurrency (option adapt, on by default): where the engine
     * stood for this call's class (its first request's, GET or PUT) when
     * the call ended: the paths it used and the depth of each (0, 0: adapt
     * off), its state (enum rio_adapt_state) and, when settled below the
     * ceiling, how the next step up's goodput compared with this one's, in
     * percent (-3: 3 % less). verdict_text says the same in words. */
    uint32_t adapt_paths;
    uint32_t adapt_depth;
    int32_t adapt_state;
    int32_t adapt_next_pct;
    uint64_t reserved[9]; /* zeroed by the library (ABI rules above) */
};

/*
 * What kind of failure an error is, for a program that tells its user: the
 * railio CLI's exit statuses and the Python binding's exception classes both
 * come from rio_error_kind. Values are fixed forever; new kinds may be added.
 */
enum rio_error_kind {
    RIO_KIND_OK = 0,          /* 0: no failure */
    RIO_KIND_OTHER = 1,       /* any other failure: server, I/O, throttled, ... */
    RIO_KIND_URL = 2,         /* RIO_EURL: malformed or unsupported URL */
    RIO_KIND_INVALID = 3,     /* RIO_EINVAL, -EINVAL: a bad argument or option */
    RIO_KIND_NOTFOUND = 4,    /* no such object, bucket, pool, store root, file */
    RIO_KIND_ACCESS = 5,      /* access denied, authentication, no credentials */
    RIO_KIND_UNREACHABLE = 6, /* refused, reset, DNS, TLS, version, no path left */
    RIO_KIND_TIMEOUT = 7,     /* RIO_EDEADLINE, -ETIMEDOUT */
    RIO_KIND_VERIFY = 8,      /* checksum mismatch, malformed answer, short object */
    RIO_KIND_NOSPACE = 9,     /* out of space, over quota, file too big */
    RIO_KIND_UNKNOWN = 10,    /* RIO_EUNKNOWN: the change may or may not be done */
    RIO_KIND_CANCELED = 11,   /* RIO_ECANCELED */
    RIO_KIND_GENERATION = 12, /* RIO_EGENERATION */
};

/**
 * The kind of err (a call's return value), an enum rio_error_kind: 0 and
 * any positive value (a count, such as rio_get's length) are RIO_KIND_OK,
 * as rio_strerror reads them. st, when
 * not NULL, is the failed call's stats: RIO_ERETRIES and RIO_ENOPATH are then
 * classed by the retry class with the most failed attempts (checksum or
 * short: RIO_KIND_VERIFY; server, throttle or fatal: RIO_KIND_OTHER; none or
 * a path class: RIO_KIND_UNREACHABLE). Pure: any thread, never blocks.
 */
int rio_error_kind(int err, const struct rio_stats *st);

/* -------------------------------------------------------------- descriptor */

#define RIO_KEY_MAX 1024

/** An object's descriptor. rio_desc_cleanup frees xxh. */
struct rio_desc {
    char key[RIO_KEY_MAX + 1];
    uint64_t generation;
    uint64_t size;
    uint64_t chunk_size;
    uint64_t nchunks;
    uint64_t *xxh; /* nchunks entries, or NULL when the backend stores none */
    char etag[48]; /* lower-case hex, "" if unknown: the MD5 of the whole byte
                    * stream, or (etag=fast, the default) 32 hex digits derived
                    * from the chunk xxh3 list (docs/tuning.md) */
};

void rio_desc_cleanup(struct rio_desc *d);

/* -------------------------------------------------------------------- calls */

struct rio_client;
struct rio_cancel;

/** Per-call settings; NULL means all defaults. */
struct rio_call {
    unsigned flags;       /* RIO_ATOMIC, RIO_IF_ABSENT; other bits: RIO_EINVAL */
    uint32_t deadline_ms; /* 0 = client default, RIO_DEADLINE_NONE = none */
    /* GET: fail with RIO_EGENERATION unless it matches; 0 = any. A single
     * PUT (rio_put, a writer, rio_put_stream): publish only if the key's
     * object is still this generation at the commit, else RIO_EGENERATION
     * (another one, or none) and nothing is published; decided as
     * RIO_IF_ABSENT is (file://: under a lock on the file it replaces);
     * UINT64_MAX is no generation: RIO_EINVAL. A batch's PUTs ignore it
     * (its GETs take it). */
    uint64_t expect_generation;
    struct rio_stats *stats;   /* filled on return (success or error) if not NULL */
    struct rio_cancel *cancel; /* fire it from any thread to cancel the call */
    /*
     * Progress, if set: called with the bytes of verified/acknowledged chunks
     * so far and the call's total, at most every 100 ms, from a thread of
     * the call (the caller's, or a worker of its batch), one call at a time
     * and never after the call returned, without the client's lock: a slow
     * callback delays only its own call's reports, not the transfer nor
     * other calls. A single-object call (rio_put, rio_get, rio_get_alloc)
     * also reports every 100 ms while no chunk lands, with the same
     * figures, so the callback runs while a transfer stalls too (a place
     * to fire the call's cancel token). rio_stat_call and rio_delete_call
     * report (0, 0) every 100 ms while they wait on a railio:// server or
     * between their tries, in the calling thread, never before 100 ms
     * (one answered at once never calls it). It must not call rio_*
     * functions on its own call. done never goes back and total never shrinks,
     * but in a call that starts over (its object replaced while it was
     * read, stats->replans): its reports start again from 0, with the new
     * object's total. total counts the objects whose size is known: a
     * batch's grows as its GETs are looked up, and a GET in one request
     * reports 0 until its answer.
     */
    void (*progress)(void *arg, uint64_t done, uint64_t total);
    void *progress_arg;
    uint64_t reserved[8]; /* must be zero (ABI rules above): else RIO_EINVAL */
};

/**
 * Open a client for url. *out is owned by the caller (rio_client_destroy).
 * Starts one engine thread and the client's worker threads (metadata of
 * batches; verification and MD5 on up to as many threads as CPUs): the
 * engine starts no thread per call. Returns 0, RIO_EURL, RIO_EINVAL, -ENOMEM or a
 * transport's error.
 */
int rio_client_new(const char *url, const struct rio_options *o, struct rio_client **out);
/**
 * Close the client. Must not race with calls on it, nor with calls on its
 * readers and writers. Accepts NULL; always returns, in bounded time (op
 * timeout + 1 s).
 *
 * Readers and writers still open are invalidated, never waited for: their
 * fetches and parts are cancelled and fenced, a writer's upload is aborted
 * (nothing of it is published), and the handles keep nothing of the client.
 * Every later rio_reader_read / rio_writer_write on them returns
 * RIO_ECLOSED; rio_reader_close and rio_writer_close return RIO_ECLOSED and
 * free them (so does rio_writer_abort), which the caller must still call.
 */
void rio_client_destroy(struct rio_client *c);

/**
 * Store len bytes under key; publishes a new generation atomically.
 * Returns 0 or an error; nothing partial is ever visible.
 * With out_desc != NULL the committed descriptor is returned (caller cleans up).
 * A PUT whose upload the target lost before its commit starts over from buf
 * (at most 4 times, stats->replans). RIO_EUNKNOWN: the commit was sent but
 * no answer could be had, so the object may or may not be there (look it
 * up); every other error means nothing was published. A len of more than
 * 2^24 chunks (64 TiB at 4 MiB chunks) is RIO_EINVAL: a larger chunk size
 * takes it.
 */
int rio_put(struct rio_client *c, const char *key, const void *buf, size_t len,
            const struct rio_call *call, struct rio_desc *out_desc);

/**
 * Read the whole object under key into buf (capacity cap). Returns the byte
 * count, or an error. Every chunk is verified. On error the buffer's contents
 * are unspecified, unless RIO_ATOMIC was given: then it is untouched. When a
 * PUT replaces the key during the read, the read starts over on the new
 * generation (at most 4 times, stats->replans; RIO_EGENERATION after), never
 * mixing the two; with call->expect_generation set it fails at once instead.
 */
int64_t rio_get(struct rio_client *c, const char *key, void *buf, size_t cap,
                const struct rio_call *call);

/**
 * As rio_get, into a buffer the library allocates with malloc(3); the caller
 * frees it with free(3). *out is NULL on error. Where the backend can bring
 * an object and its descriptor in one exchange (railio://, GET_ONE; s3://,
 * one ranged GET), it first asks for the object into a buffer of the size
 * of the last object this client fetched (at least 64 KiB, 256 KiB at
 * first, at most the chunk size); a larger object, or one of several
 * chunks, is then looked up and read (stats->replans counts that).
 */
int64_t rio_get_alloc(struct rio_client *c, const char *key, void **out,
                      const struct rio_call *call);

/** Descriptor of key. The caller calls rio_desc_cleanup(out). As
 * rio_stat_call with no mtime and no call. */
int rio_stat(struct rio_client *c, const char *key, struct rio_desc *out);
/**
 * rio_stat, and the object's last-modified time (ns since the epoch) in
 * *mtime_ns (if not NULL) where the backend gives it in the same round trip
 * (rados://); 0 where it cannot (rio_list's entries may say). As
 * rio_stat_call with no call.
 */
int rio_stat_mtime(struct rio_client *c, const char *key, struct rio_desc *out, int64_t *mtime_ns);
/**
 * rio_stat_mtime under the call's settings (NULL: as rio_stat_mtime, the
 * client's deadline): the lookup and its retries end at call->deadline_ms
 * with RIO_EDEADLINE, and within a few milliseconds of call->cancel firing
 * with RIO_ECANCELED, as rio_get's do, also while blocked on a server that
 * does not answer. call->stats (if set) gets elapsed_ns and the failed
 * tries by class (retries, retries_total); the rest is zero. flags and
 * expect_generation must be 0 (else RIO_EINVAL). progress, if set, runs as
 * struct rio_call says, with (0, 0): a caller with no thread of its own
 * may fire the cancel token there. Returns 0 or an error (RIO_ENOTFOUND:
 * no such key). Blocks the calling thread; thread-safe as rio_get is.
 */
int rio_stat_call(struct rio_client *c, const char *key, struct rio_desc *out, int64_t *mtime_ns,
                  const struct rio_call *call);

/** Remove key. Returns 0, or RIO_ENOTFOUND. As rio_delete_call with no call. */
int rio_delete(struct rio_client *c, const char *key);

/**
 * Remove key only if its object is generation (not 0): RIO_EGENERATION when
 * it is another, RIO_ENOTFOUND when there is none; decided by the backend
 * with the removal, as a conditional PUT is (mock://, rados://, file://,
 * railio://, s3:// where the server decides If-Match on DELETE: AWS's
 * endpoints or ?conditional=on; elsewhere RIO_ENOTSUP, nothing removed).
 * As rio_delete_call with call->expect_generation = generation.
 */
int rio_delete_if(struct rio_client *c, const char *key, uint64_t generation);

/**
 * rio_delete under the call's settings (NULL: as rio_delete):
 * call->expect_generation not 0 removes key only if its object is that
 * generation, as rio_delete_if does (UINT64_MAX: RIO_EINVAL). Deadline,
 * cancel token, progress and stats as rio_stat_call's; flags must be 0. A
 * delete cut by them after its request reached the server (railio://,
 * which never asks a DELETE twice) returns RIO_EUNKNOWN, as a commit
 * does: it may or may not have been applied (stat the key to know); cut
 * before, RIO_EDEADLINE or RIO_ECANCELED. Returns 0 or an error.
 */
int rio_delete_call(struct rio_client *c, const char *key, const struct rio_call *call);

enum rio_op_type { RIO_OP_GET = 1, RIO_OP_PUT = 2 };

/** One op of a batch. result: bytes (GET), 0 (PUT) or an error. */
struct rio_op {
    int type;
    const char *key;
    void *buf;           /* GET destination, or PUT source (not modified) */
    size_t len;          /* GET capacity, or PUT size */
    int64_t result;      /* out */
    uint64_t generation; /* out: generation read or written */
};

/**
 * Run n independent ops through the same paths at once. Returns the number of
 * ops that succeeded (each op's result says how it ended), or a negative error
 * when the batch could not start. call->stats covers the whole batch.
 * Lookups, upload opens and commits run on worker threads alongside the
 * transfer (2 x paths x depth of them, 8..64), at most 128 ops prepared at
 * once: a batch of any size holds that many open uploads or cached lookups,
 * not n (docs/internals/engine.md). Its bookkeeping is per op, though, and
 * held for the whole call (over 2 KiB per op: gigabytes for millions of
 * ops), so cut such a batch into smaller ones. n ops whose state cannot be
 * allocated: -ENOMEM.
 */
int rio_batch(struct rio_client *c, struct rio_op *ops, unsigned n, const struct rio_call *call);

/* ---------------------------------------------------------------- listing */

/** rio_list_args.flags: stop each key at the first '/' after the prefix and
 * return each such common prefix once, as an entry with RIO_ENTRY_DIR. */
#define RIO_LIST_DELIM 0x1u
/** rio_list_args.flags: pages in byte order of key on every backend. Most
 * list so anyway; rados:// (pool order otherwise) then scans every name
 * under the prefix for each page and reads the heads of that page's keys
 * only (docs/rados.md, "Listing"). */
#define RIO_LIST_SORTED 0x2u
/** rio_entry.flags: a common prefix (the key ends in '/'); only key is set. */
#define RIO_ENTRY_DIR 0x1u
/** The longest continuation token (without its NUL). */
#define RIO_LIST_TOKEN_MAX 1024
/** The most entries one page holds (max_keys above it is clamped). */
#define RIO_LIST_PAGE_MAX 10000u

/** What to list. Zero-initialise (ABI rules above). */
struct rio_list_args {
    const char *prefix;      /* only keys that start with it; NULL or "" = every key */
    const char *token;       /* the previous page's next_token; NULL or "" = first page */
    const char *start_after; /* first page only: keys after this one in byte order */
    unsigned max_keys;       /* entries per page: 0 = 1000, clamped to RIO_LIST_PAGE_MAX */
    unsigned flags;          /* RIO_LIST_DELIM, RIO_LIST_SORTED */
    uint64_t reserved[4];    /* must be zero */
};

/** One listed object (or, with RIO_ENTRY_DIR, a common prefix). */
struct rio_entry {
    char key[RIO_KEY_MAX + 1];
    unsigned flags;      /* RIO_ENTRY_DIR */
    uint64_t size;       /* bytes */
    uint64_t generation; /* 0 when the listing cannot say (rio_stat can) */
    int64_t mtime_ns;    /* last modified, ns since the epoch; 0 if unknown */
    char etag[48];       /* as in rio_desc; "" if unknown */
};

/** One page of a listing. rio_list_page_cleanup frees entries. */
struct rio_list_page {
    struct rio_entry *entries; /* n entries, malloc'd by the library */
    unsigned n;
    /* Pass as rio_list_args.token for the next page; "" when this page is
     * the last. Opaque: a key for most backends, a cursor for some. */
    char next_token[RIO_LIST_TOKEN_MAX + 1];
};

/**
 * One page of the keys under a->prefix, in byte order of their keys (except
 * rados://, which lists in the pool's own order: docs/rados.md). A page may
 * hold fewer than max_keys entries and still not be the last; only an empty
 * next_token ends the listing. call: deadline_ms and cancel (stats are not
 * filled). Returns 0 or an error (RIO_ENOTSUP when the backend cannot list);
 * on error *out is empty. Keys written during a listing may or may not appear.
 */
int rio_list(struct rio_client *c, const struct rio_list_args *a, struct rio_list_page *out,
             const struct rio_call *call);
/** Free a page's entries and zero it. Accepts a zeroed page. */
void rio_list_page_cleanup(struct rio_list_page *p);

/**
 * Which of keys[0..n) exist, in one round trip per server where the backend
 * allows (railio://), lookups in parallel elsewhere. exists (if not NULL)
 * gets n bytes, 1 or 0; *prefix_hits (if not NULL) the count of keys that
 * exist in a row from keys[0] (the prefix-hit question of a KV-cache store).
 * Returns how many exist, or an error (then exists is unspecified).
 */
int rio_exists_batch(struct rio_client *c, const char *const *keys, unsigned n, uint8_t *exists,
                     unsigned *prefix_hits, const struct rio_call *call);

/* ------------------------------------------------------------------ fsck */

/** rio_fsck_args.flags: find and report, remove nothing. */
#define RIO_FSCK_DRY_RUN 0x1u
/** rio_fsck_args.flags: grace_ns is set (0 included); without it the grace
 * is RIO_FSCK_GRACE_DEFAULT_NS. */
#define RIO_FSCK_GRACE 0x2u
/** rio_fsck_args.flags: rados://: give the pool a key index if it has none
 * (listings then read pages of names from it instead of scanning the pool:
 * docs/rados.md "The key index"). A pool with one has it checked on every
 * fsck, with or without this flag. */
#define RIO_FSCK_INDEX 0x4u
/** The default grace: one hour. */
#define RIO_FSCK_GRACE_DEFAULT_NS (3600ull * 1000000000ull)

/** What became of one orphan (rio_fsck_item.verdict). */
enum rio_fsck_verdict {
    RIO_FSCK_REMOVED = 1,      /* removed */
    RIO_FSCK_WOULD_REMOVE = 2, /* RIO_FSCK_DRY_RUN: would have been removed */
    RIO_FSCK_YOUNG = 3,        /* kept: its upload wrote within the grace */
    RIO_FSCK_RACED = 4,        /* kept: a head committed it meanwhile */
    RIO_FSCK_FAILED = 5,       /* kept: examining or removing it failed (err) */
};

/** One stored piece no object refers to, as rio_fsck_args.each sees it. */
struct rio_fsck_item {
    const char *where;   /* where it is stored (rados://: the pool) */
    const char *name;    /* its name there (rados://: the chunk object's) */
    const char *key;     /* the key it was written for */
    uint64_t generation; /* the generation it was written for */
    uint64_t bytes;      /* its size */
    int64_t mtime_ns;    /* last written, ns since the epoch (whole seconds) */
    int verdict;         /* enum rio_fsck_verdict */
    int err;             /* RIO_FSCK_FAILED: why */
};

/** How to check. Zero-initialise (ABI rules above). */
struct rio_fsck_args {
    unsigned flags;    /* RIO_FSCK_DRY_RUN, RIO_FSCK_GRACE */
    uint64_t grace_ns; /* with RIO_FSCK_GRACE: leave alone an upload that wrote within it */
    /* Optional: called once per orphan, in the calling thread, with its
     * verdict; the item is valid during the call only. */
    void (*each)(void *arg, const struct rio_fsck_item *it);
    void *arg;
    uint64_t reserved[4]; /* must be zero */
};

/** What a check found. Zero-initialise (ABI rules above). */
struct rio_fsck_report {
    uint64_t heads;       /* objects (heads) read */
    uint64_t chunks;      /* stored pieces examined */
    uint64_t orphans;     /* pieces no head refers to: the five below */
    uint64_t removed;     /* removed (RIO_FSCK_DRY_RUN: would be) */
    uint64_t bytes_freed; /* their bytes */
    uint64_t young;       /* kept: their upload wrote within the grace */
    uint64_t raced;       /* kept: a head committed them meanwhile */
    uint64_t errors;      /* kept: examining or removing them failed */
    uint64_t foreign;     /* other objects where pieces live: never touched */
    /* rados:// with a key index: its entries read, the heads that had none
     * (given one; dry run: would be), the entries of no head swept (dry
     * run: would be), 1 when this call built it (RIO_FSCK_INDEX). */
    uint64_t index_entries, index_added, index_removed, index_built;
    /* rados://: the pool's key index when the call ends: 0 none, 1 being
     * built (an fsck --index stopped before its end), 2 ready. */
    uint64_t index_state;
    uint64_t reserved[2];
};

/**
 * Find and remove what failed or interrupted uploads left behind: stored
 * pieces no object refers to (rados://: chunk objects of no head's
 * generation; docs/rados.md "Orphans and fsck"). A piece of an upload that
 * wrote within the grace is left alone, so uploads in progress never lose
 * one; each generation's head is read again just before its pieces go. out
 * (zeroed first) gets the counts, a->each each orphan. Blocks for a scan of
 * the whole store; thread-safe like every call. Returns 0 (some pieces may
 * still have failed: out->errors), or an error: RIO_ENOTSUP for a backend
 * whose objects leave nothing to check (every one but rados://).
 */
int rio_fsck(struct rio_client *c, const struct rio_fsck_args *a, struct rio_fsck_report *out);

/* ----------------------------------------------------------- streaming */

struct rio_reader;

/**
 * Open a streaming reader over key: up to `prefetch` chunks are fetched ahead
 * (0 = the client's depth x paths), bytes come out in order whatever order the
 * fetches complete in, every chunk verified before any of its bytes is handed
 * out; memory is bounded by prefetch x chunk size. call may be NULL; its stats
 * (if any) are filled at rio_reader_close. *out is owned by the caller. Where
 * the backend can bring an object and its descriptor in one exchange (as
 * for rio_get_alloc), the object is first asked for whole into a buffer of
 * the size of the last object this client fetched; a larger one, or one of
 * several chunks, is then looked up and read as a stream.
 */
int rio_reader_open(struct rio_client *c, const char *key, unsigned prefetch,
                    const struct rio_call *call, struct rio_reader **out);
/**
 * rio_reader_open from byte `offset` on (any offset, 0 to the object's size):
 * the chunk holding offset is fetched and verified whole, and only its bytes
 * from offset on are handed out; chunks before it are not fetched. At
 * offset == size the reader is at its end; beyond it: RIO_EINVAL. With
 * call->expect_generation set, a different generation fails RIO_EGENERATION
 * (the way to resume a read of an object known to be unchanged). Stats count
 * the bytes fetched.
 */
int rio_reader_open_at(struct rio_client *c, const char *key, uint64_t offset, unsigned prefetch,
                       const struct rio_call *call, struct rio_reader **out);
/**
 * A reader of the range [offset, offset + length) of the object d describes
 * (length past the end: to the end; offset beyond the size: RIO_EINVAL),
 * made from d instead of a lookup: d is what rio_stat or rio_reader_desc
 * gave (the caller's; read during the call only), checked again here.
 * Only the chunks holding the range are fetched, each verified whole, and
 * rio_reader_read returns 0 after the range's last byte. The reads name
 * d->generation, so a key replaced or removed since d was read fails
 * RIO_EGENERATION (or the backend's not-found) instead of handing out
 * another generation's bytes; with d->generation 0 (a backend that keeps
 * none) key d->key is looked up as by rio_reader_open_at. With
 * call->expect_generation set and different from d's: RIO_EGENERATION.
 */
int rio_reader_open_desc(struct rio_client *c, const struct rio_desc *d, uint64_t offset,
                         uint64_t length, unsigned prefetch, const struct rio_call *call,
                         struct rio_reader **out);
/**
 * Copy up to n bytes of the object, in order, into buf. Blocks until bytes are
 * ready. Returns the count, 0 at the end of the object, or an error (then every
 * later call returns the same error). Not thread-safe for one reader.
 */
int64_t rio_reader_read(struct rio_reader *rd, void *buf, size_t n);
/** The descriptor the reader follows (valid until close; NULL once the
 * client was destroyed). */
const struct rio_desc *rio_reader_desc(const struct rio_reader *rd);
/**
 * Stop every fetch still in flight, wait until none can write anymore, free
 * everything. Returns 0 if the whole object was read, RIO_ECANCELED if closed
 * early, or the error the reader met. Accepts NULL.
 */
int rio_reader_close(struct rio_reader *rd);

/**
 * Stream the object to cb in order: cb gets consecutive verified pieces
 * (borrowed: valid only during the callback) and returns 0 to go on or a
 * negative error to stop, which is then returned (a positive value stops with
 * RIO_ECANCELED). Returns the byte count or an error.
 */
int64_t rio_get_stream(struct rio_client *c, const char *key, unsigned prefetch,
                       int (*cb)(void *arg, const void *data, size_t len), void *arg,
                       const struct rio_call *call);
/**
 * rio_get_stream from byte `offset` on (see rio_reader_open_at): returns the
 * count of bytes from offset on. Unlike rio_get_stream, a key replaced before
 * the first byte is not followed to its new generation: with
 * call->expect_generation set that fails RIO_EGENERATION.
 */
int64_t rio_get_stream_at(struct rio_client *c, const char *key, uint64_t offset, unsigned prefetch,
                          int (*cb)(void *arg, const void *data, size_t len), void *arg,
                          const struct rio_call *call);

/** The size of a streaming PUT whose length is known only at its end. */
#define RIO_SIZE_UNKNOWN UINT64_MAX

struct rio_writer;

/**
 * Open a streaming PUT of key: bytes written in order are cut into chunks,
 * each hashed and sent while the next fills, up to `slots` chunks buffered or
 * in flight at once (0 = the client's depth x paths, at least 2), so memory is
 * bounded by slots x chunk size whatever the object's size. size is the exact
 * byte count when known (any backend), or RIO_SIZE_UNKNOWN (backends that
 * take uploads of unknown length: rados://, file://, mock://, s3://; the others
 * return RIO_ENOTSUP). Nothing is visible until rio_writer_close commits.
 * call: deadline_ms bounds the whole stream, cancel stops it, stats are filled
 * at close; progress is not reported. *out is owned by the caller.
 */
int rio_writer_open(struct rio_client *c, const char *key, uint64_t size, unsigned slots,
                    const struct rio_call *call, struct rio_writer **out);
/**
 * Append n bytes. Blocks while every slot is in flight. Returns 0 or the
 * stream's error (then every later call returns it; close aborts).
 */
int rio_writer_write(struct rio_writer *w, const void *buf, size_t n);
/**
 * Send what is left, wait for every chunk, then publish the object atomically
 * (or, after any error, drop every chunk that landed). Frees w. Returns 0 or
 * the error; RIO_EINVAL when a declared size was not met (rio_error_detail:
 * "N bytes declared, the source gave M"). out_desc as for rio_put.
 */
int rio_writer_close(struct rio_writer *w, struct rio_desc *out_desc);
/** Stop the stream, drop every chunk that landed, free w. Accepts NULL. */
void rio_writer_abort(struct rio_writer *w);

/**
 * Stream an object from a source: fill(arg, buf, cap) writes up to cap bytes
 * into buf and returns the count, 0 at the end, or a negative error (which is
 * returned; the PUT is dropped; one below INT_MIN, or a count above cap, is
 * RIO_EINVAL). Chunks are read straight into the writer's
 * buffers. size and slots as for rio_writer_open. Returns 0 or an error.
 */
int rio_put_stream(struct rio_client *c, const char *key, uint64_t size, unsigned slots,
                   int64_t (*fill)(void *arg, void *buf, size_t cap), void *arg,
                   const struct rio_call *call, struct rio_desc *out_desc);

/**
 * A cancellation token, usable from any thread. Lifetime: a call, reader or
 * writer that takes a token (struct rio_call.cancel) holds a reference on it
 * until it ends (the call returns, the reader or writer is closed), so the
 * caller may rio_cancel_destroy it at any time after handing it over; the
 * token is freed when the last holder lets go. Returns 0, -ENOMEM, or
 * RIO_EINVAL for a NULL out.
 */
int rio_cancel_new(struct rio_cancel **out);
/** Cancel every call carrying this token; the calls return RIO_ECANCELED.
 * Only while the caller still holds its own reference (before destroy). */
void rio_cancel_fire(struct rio_cancel *cx);
/** Drop the caller's reference. Accepts NULL. */
void rio_cancel_destroy(struct rio_cancel *cx);

/** Engine counters; all zero when the client is idle. */
struct rio_counters {
    uint64_t inflight_ops;
    uint64_t inflight_bytes;
    uint64_t path_inflight_ops[RIO_MAX_PATHS];
    uint64_t path_inflight_bytes[RIO_MAX_PATHS];
    uint64_t requests;        /* requests admitted and not yet finished */
    uint64_t budget_reserved; /* bytes reserved against the budget */
};

/** Snapshot of the client's in-flight counters. Thread-safe. A NULL client
 * gives zeros; a NULL out does nothing. */
void rio_client_counters(struct rio_client *c, struct rio_counters *out);

/** The effective options (after environment and defaults). A NULL client
 * gives zeros (as rio_options_init); a NULL out does nothing. */
void rio_client_options(struct rio_client *c, struct rio_options *out);

#ifdef __cplusplus
}
#endif
#endif /* RAILIO_H */
