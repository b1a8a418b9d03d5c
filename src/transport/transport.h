/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transport contract. A transport only moves bytes: the engine owns
 * planning, budget, retry, verification and stats. Every backend is one
 * `const struct rio_transport_ops` in its own file, listed in registry.c and
 * reached by URL scheme. The engine calls it only through the inline wrappers
 * at the end of this file.
 */
#ifndef RIO_TRANSPORT_H
#define RIO_TRANSPORT_H

#include <stdbool.h>
#include <stdint.h>

#include "core/url.h"
#include "railio.h"

enum rio_io_kind { RIO_IO_READ = 1, RIO_IO_WRITE = 2 };

/*
 * One chunk op. The engine owns the storage and fills the "in" fields before
 * submit; the transport must not touch them. The transport fills the "out"
 * fields, then (from inside reap, in the reaping thread) calls complete()
 * exactly once. Between submit and complete the transport may write into
 * dst[0..len) and nowhere else; after complete it must not touch io or dst.
 */
/* rio_io.why's size, its NUL included. */
#define RIO__IO_WHY_MAX 320

struct rio_io {
    /* in: set by the engine */
    int kind;            /* enum rio_io_kind */
    unsigned path;       /* path index, < rio_transport.npaths */
    const char *key;     /* NUL-terminated object key */
    uint64_t generation; /* READ: the generation the read names */
    void *upload;        /* WRITE: the handle put_open returned */
    uint64_t index;      /* chunk index */
    uint64_t off;        /* chunk offset in the object (index * chunk_size) */
    uint64_t len;        /* chunk length in bytes (> 0) */
    void *dst;           /* READ: destination, len bytes */
    const void *src;     /* WRITE: source, len bytes */
    uint64_t xxh;        /* WRITE: xxh3-64 of src; READ: expected, 0 if unknown */
    /* WRITE of a whole object in one op (upload NULL; put_one said yes):
     * open, data and commit as one exchange, index 0, len the object's
     * size; etag (32 hex digits, or "") is published with it.
     * READ of a whole object in one op (get_one said yes; index, off and
     * generation 0, xxh 0): the lookup of key, and its bytes into
     * dst[0..size) when it is one chunk of at most len bytes. */
    bool one;
    uint64_t chunk_size; /* one: the object's chunk size (>= len) */
    const char *etag;    /* one */

    /* out: set by the transport before complete() */
    int64_t res;     /* bytes moved (== len on success), or < 0 error */
    uint64_t svc_ns; /* target's service time for this op, 0 if unknown */
    /* READ, optional: xxh_got is the xxh3-64 of the len bytes now in dst,
     * hashed by the transport piece by piece as it wrote them (still in
     * cache), so the engine compares it with the expected one instead of
     * reading the chunk again. Set xxh_valid only when the transport itself
     * wrote every byte of dst, in order, and hashed exactly those; the
     * engine clears it at each submit and uses it only for whole chunks. */
    uint64_t xxh_got;
    bool xxh_valid;
    /* WRITE one: on success the generation published; on failure, unsure
     * says it may have been published all the same (the whole request
     * went out and no answer came back), so the engine must not call the
     * PUT failed without RIO_EUNKNOWN. */
    uint64_t gen_out;
    bool unsure;
    /* READ one: the object's descriptor as the answer gave it (gen_out,
     * and these; its checksum list is the one xxh_got when its bytes
     * came). res is its size when its bytes came, in dst, xxh_got their
     * xxh3 (checked against the answer's, xxh_valid set); RIO__ENOTONE
     * when only the descriptor came (an object of several chunks, an
     * empty one, or one larger than len): the engine decides. */
    uint64_t one_size, one_chunk_size, one_nchunks;
    char one_etag[33]; /* 32 hex digits, or "" (unknown) */
    /* Optional, on failure: what the store answered, for the caller's
     * rio_error_detail (s3: "s3 bucket B: GET key K: HTTP 403
     * SignatureDoesNotMatch: ..."); never a secret, a query string or a
     * header. The engine clears it at each submit. */
    char why[RIO__IO_WHY_MAX];

    void (*complete)(struct rio_io *io);
    void *engine_priv; /* the engine's */
    void *tpriv;       /* the transport's, while the op is in flight */
};

/* A READ in one op (rio_io.one) whose answer had no bytes: never leaves the
 * library (the engine decides what the descriptor means). */
#define RIO__ENOTONE (-10999)

/* Capability bits (0x1 was a checksums bit nothing read; do not reuse it). */
/*
 * put_open accepts size == RIO_SIZE_UNKNOWN: a streaming upload whose length
 * is known only at commit. Its chunks still come with index, off = index x
 * chunk_size and len == chunk_size (only the last may be shorter), but may
 * arrive in any order and before the total is known; put_commit's d carries
 * the final size and nchunks (0 for an empty stream).
 */
#define RIO_CAP_STREAM_PUT 0x2u
/* Stores the descriptor's etag (the fast etag or the stream MD5, option
 * etag) at put_commit. Without it the engine computes none (d->etag ""). */
#define RIO_CAP_ETAG 0x4u
/* A put_commit that returns a retryable class (transport.h, metadata rule)
 * leaves the upload as it was: not consumed, nothing published, so the
 * engine may call put_commit again with it, or put_abort. Without this bit
 * put_commit consumes the upload whatever it returns and is tried once. */
#define RIO_CAP_COMMIT_RETRY 0x8u
/* list returns its keys in the backend's own order, not byte order
 * (rados://): the engine then checks no order, and RIO_LIST_DELIM is the
 * transport's to do (the engine's generic one pages in byte order). */
#define RIO_CAP_LIST_UNORDERED 0x10u
/* list does RIO_LIST_DELIM itself (a common prefix is one entry with
 * RIO_ENTRY_DIR); without this bit the engine collapses keys itself. */
#define RIO_CAP_LIST_DELIM 0x20u
/* A READ may name any range inside one chunk (off and len within chunk
 * `index`, xxh 0): the engine splits a GET's last chunks across idle paths
 * and checks the chunk's xxh3 once all its pieces landed. */
#define RIO_CAP_RANGE_READ 0x40u
/* RIO_SIZE_UNKNOWN is public: include/railio.h. */

/* put_expect's gen: publish only if the key holds no object (generations
 * are counters from 1 and never reach it). */
#define RIO__PUT_IF_ABSENT UINT64_MAX

/* compose's flags: leave the sources' heads (tests: a crash between the
 * commit and their removal). */
#define RIO_COMPOSE_KEEP_SOURCES 0x1u

struct rio_transport;

/*
 * Path state a transport reports to the engine (rio__t_path_event). The
 * transport says what it sees; the engine decides what to do:
 *
 *   RIO_PATH_DOWN      the path cannot carry ops now (its connection's dial
 *                      was refused, cut or timed out; err says why): the
 *                      engine cools it at once, moves its chunks to the
 *                      other paths and probes it after the cooldown, as if
 *                      an op on it had failed with err.
 *   RIO_PATH_UP        the path can carry ops again (a background re-dial
 *                      succeeded): a cooling path's cooldown ends now and it
 *                      is probed with one op at once; a degraded path gets
 *                      its whole depth back. No effect on a healthy path.
 *   RIO_PATH_DEGRADED  the path works at part of its capacity: the engine
 *                      halves its depth (at least 1) until it reports UP or
 *                      goes down.
 *
 * A transport reports transitions, not every op's outcome: ops still
 * complete with their own errors, and the engine handles both (a path
 * already cooling is not cooled again by DOWN).
 */
enum rio_path_state { RIO_PATH_DOWN = 1, RIO_PATH_UP = 2, RIO_PATH_DEGRADED = 3 };

/*
 * Threads, locks and reentrancy. The engine runs one thread per client (the
 * engine thread); callers and the client's metadata workers are other
 * threads. The client lock (c->mu) is always taken before any lock of the
 * transport, never after: a transport must not call back into the engine
 * while it holds one of its own locks, except complete() (below), which
 * takes no engine lock. Per op:
 *
 *   op          thread                   client lock   may block
 *   open        rio_client_new's caller  not held      yes
 *   close       rio_client_free's caller not held      yes (nothing in flight)
 *   submit      engine thread only       held          no
 *   reap        engine thread only       not held      up to timeout_ms
 *   wake        any thread               not held      no
 *   cancel      any thread               held          no
 *   lookup, put_open, put_commit, put_abort, remove
 *               any thread, several      not held      yes
 *               at once
 *   path_cap    any thread               held          no
 *   path_moved  engine thread only       held          no
 *   cpu_ns      any thread               not held      no
 *
 * And the other way, the transport calling the engine:
 *
 *   call            thread                 transport's locks   may block
 *   complete        engine thread, in reap none held           no
 *   path_event      engine thread in reap, none held           briefly (it
 *                   or any thread the                          takes the
 *                   transport owns                             client lock)
 *
 * path_event (rio__t_path_event) takes the client lock, so it must never be
 * called from submit, cancel or path_cap (which run with it held), nor
 * with a lock of the transport held (lock order); it records the event
 * and wakes the engine, which applies it in its own thread after the
 * current reap returns. It may be called before the engine listens (then it
 * does nothing) and after open; not from close.
 *
 * So cancel may run in a caller's thread while the engine thread is inside
 * reap, and wake may run at any time, also before the first reap; reap and
 * submit never run at once (both are the engine thread's). complete() runs
 * inside reap, in the engine thread, and must not call submit, cancel or
 * reap itself. No op is called from inside complete().
 */
struct rio_transport_ops {
    const char *scheme;
    unsigned caps;
    /* The URL options open reads (NULL-terminated; NULL: none), besides the
     * core's (core/options.c): rio_client_new refuses any other, naming the
     * closest. Keep it to exactly what the backend's docs page lists. */
    const char *const *url_options;

    /* Open a transport for url; o holds the effective client options. */
    int (*open)(const struct rio_url *url, const struct rio_options *o, struct rio_transport **out);
    /* Close: only called when nothing is in flight and the engine thread
     * has stopped; no other op runs at the same time or after. */
    void (*close)(struct rio_transport *t);

    /* Queue io. Never blocks. -EAGAIN when the path is full; any other
     * error means the op was not queued and complete() will not be called
     * (the engine counts it as a failed attempt on io->path). */
    int (*submit)(struct rio_transport *t, struct rio_io *io);
    /* Wait up to timeout_ms (0: poll) for completions; call complete() on each
     * finished op, in this thread. Returns the count, or < 0 when the
     * transport could not wait (its event loop failed): ops stay in flight
     * and still complete through a later reap. The engine then waits up to
     * timeout_ms (1 ms doubling to 64 ms) before it reaps again, and after
     * eight failed reaps in a row fails its active requests with the error
     * (their calls return once the ops come back). */
    int (*reap)(struct rio_transport *t, int timeout_ms);
    /* Make a blocked reap return soon (or the next one, if none is
     * blocked). Thread-safe, any thread, never blocks. */
    void (*wake)(struct rio_transport *t);
    /* Ask for io to end early. Non-blocking, any thread, may run while the
     * engine thread is inside reap; io is in flight (submitted, its
     * complete() not yet called). The op still completes through reap
     * (res = -ECANCELED, or whatever it had reached). */
    void (*cancel)(struct rio_transport *t, struct rio_io *io);

    /* Metadata: synchronous (may block on round trips), thread-safe, called
     * from callers and metadata workers at once, never with the client lock
     * held.
     *
     * Retry is the engine's (core/meta.c): each op makes one try (no loop of
     * its own for transient errors) and the engine tries again, within
     * retry_attempts, the backoff and the call's deadline, when the error's
     * class is retryable (core/errors.c). So an op returns a retryable class
     * (reset, refused, timeout, unreach, dns, short, checksum, server,
     * throttle) only when repeating it is safe: it did not take effect, or
     * taking effect twice is the same as once (a lookup; a put_open whose
     * orphan the target reclaims). An op that may have taken effect and
     * must not be repeated returns RIO_EUNKNOWN (never retried). put_commit
     * is retried only with RIO_CAP_COMMIT_RETRY (above); put_abort has no
     * result and is never retried (the target reclaims what it leaves). */
    int (*lookup)(struct rio_transport *t, const char *key, struct rio_desc *out);
    /* Optional: lookup, and the object's last-modified time (ns since the
     * epoch) in *mtime_ns where the backend gives it in the same round
     * trip (0 where it cannot say). NULL: lookup, and 0. */
    int (*lookup_mtime)(struct rio_transport *t, const char *key, struct rio_desc *out,
                        int64_t *mtime_ns);
    /* Optional: lookup for a caller that takes no object larger than
     * max_size bytes (a GET into a buffer of that capacity). The descriptor
     * of a larger object may come without its checksum list (xxh NULL,
     * every other field set): the caller only refuses it (RIO_ETOOBIG). So
     * a list of up to millions of checksums a server sends is not held
     * where nothing would read it. NULL: lookup. */
    int (*lookup_within)(struct rio_transport *t, const char *key, uint64_t max_size,
                         struct rio_desc *out);
    int (*put_open)(struct rio_transport *t, const char *key, uint64_t size, uint64_t chunk_size,
                    void **upload);
    /* Optional (NULL: never): whether a PUT of key, size bytes (1 at
     * least, one chunk of chunk_size) may go as one WRITE op with `one`
     * set and no upload, which opens, sends and commits it in one
     * exchange (railio://: a server that said PUT_ONE in its HELLO). Only
     * for an unconditional PUT whose etag is known before it is sent.
     * Such an op retried after an attempt that took effect publishes the
     * same bytes again (a new generation). Any thread, never blocks. */
    bool (*put_one)(struct rio_transport *t, const char *key, uint64_t size, uint64_t chunk_size);
    /* Optional (NULL: never): whether a GET of key into a buffer of cap
     * bytes (1 at least) may go as one READ op with `one` set, which looks
     * the object up and brings its bytes in one exchange when it is one
     * chunk of at most cap bytes (railio://: a server that said GET_ONE
     * in its HELLO). Any thread, never blocks. */
    bool (*get_one)(struct rio_transport *t, const char *key, uint64_t cap);
    /* Optional (NULL: none): how a whole-object GET of d, an object the
     * transport did not write (no checksum list) whose etag is not the MD5
     * of its bytes, can be checked: 0 with *part the size of every part
     * but the last of the *nparts parts it was uploaded in, and want its
     * ETag, 32 hex digits "-" nparts, the MD5 of the parts' MD5s (s3://:
     * asked of the server with ?partNumber); an error where it cannot say
     * (the GET then reads the object unchecked). Caller's or a worker's
     * thread, client lock not held; may block. */
    int (*parts_of)(struct rio_transport *t, const struct rio_desc *d, uint64_t *part,
                    uint32_t *nparts, char want[48]);
    /* Optional (NULL: none; set with parts_of): whether every part of d
     * but the first and the last (parts 2 to nparts - 1, which parts_of
     * does not ask about) is part bytes: 0 when each is, 1 when one is not
     * (the object is sound, cut otherwise: its ETag cannot be checked), an
     * error where the transport cannot say. Asked only when the MD5 of the
     * parts' MD5s did not match (s3://: HEAD ?partNumber=K, one by one).
     * Any thread, client lock not held; may block. */
    int (*parts_even)(struct rio_transport *t, const struct rio_desc *d, uint64_t part,
                      uint32_t nparts);
    /* Optional (NULL: none): a checksum of the whole of d's bytes that the
     * store keeps and its lookup (or GET in one op) said, for an object
     * the transport did not write: 0 with *algo (RIO__CK_*) and *value,
     * else RIO_ENOTSUP (s3://: x-amz-checksum-crc64nvme, -crc32c or -crc32
     * of the whole object, S3's FULL_OBJECT type). The engine checks a
     * whole-object GET by it rather than by the MD5 of its etag (a CRC
     * costs a fortieth of an MD5). Any thread, never blocks. */
    int (*full_checksum)(struct rio_transport *t, const struct rio_desc *d, int *algo,
                         uint64_t *value);
    /* Optional (may be NULL): the work a WRITE of chunk `index` of an open
     * upload needs before it is sent that depends only on the chunk's bytes
     * (s3://: the part's SHA-256 signed as its payload hash, its CRC32C or
     * Content-MD5). The engine calls it on its cpu pool as it hashes each
     * chunk of a PUT whose upload it opened before hashing, before the
     * chunk may be submitted, so the sends of earlier chunks go on
     * meanwhile and the submitting thread does none of it; src is the
     * caller's bytes, the same the chunk's xxh3 is taken from. Calls for
     * distinct chunks of one upload run at once on several threads; none
     * runs after the upload's commit or abort begins. A chunk it skipped
     * (or with no call at all) gets the work at submit: no result. */
    void (*put_prep)(struct rio_transport *t, void *upload, uint64_t index, unsigned n,
                     const void *const *src, const uint64_t *len);
    /* Optional (NULL: 1): how many chunks of upload one put_prep call
     * should get at once, at most RIO__PREP_MAX (s3://: 16 or 8 Content-MD5s
     * are computed together in vector lanes where the CPU has them). The
     * engine passes that many consecutive chunks where it has them, fewer
     * at the end; src[i], len[i] are chunk index + i's. */
    unsigned (*put_prep_group)(struct rio_transport *t, void *upload);
    /* Optional (NULL: put_prep of each): put_prep of chunk index[i] of
     * uploads[i] for n (1 <= n <= RIO__PREP_MAX) distinct uploads at once,
     * each under put_prep's contract (s3://: the Content-MD5s of a batch's
     * small objects, one part each, computed together in vector lanes).
     * n == 0 (the arrays NULL) asks how many uploads it would take at
     * once: 1 when it gains nothing over one at a time here. */
    unsigned (*put_prep_many)(struct rio_transport *t, unsigned n, void *const *uploads,
                              const uint64_t *index, const void *const *src, const uint64_t *len);
    /* Optional (NULL: the backend cannot; the engine refuses such a PUT
     * with RIO_ENOTSUP before opening it): make the upload's commit
     * conditional. The engine calls it right after put_open, before any
     * chunk. gen RIO__PUT_IF_ABSENT: publish only if the key holds no
     * object; another value: only if the key's object has that
     * generation. Decided atomically with the publish (two conditional
     * commits of a key never both succeed on the same state); when it
     * does not hold put_commit publishes nothing and returns
     * RIO_EGENERATION (whatever the key holds, or nothing), never a
     * retryable class. A commit retried
     * after one that took effect (RIO_CAP_COMMIT_RETRY) returns what the
     * first returned, not a failed condition. Called where put_open is (a
     * worker thread): at most one metadata request (s3:// may ask the
     * key's ETag); 0 or an error (then the engine aborts the upload). A
     * transport whose publish is a WRITE (s3://'s single PutObject) may
     * refuse the condition there instead, with the same code. */
    int (*put_expect)(struct rio_transport *t, void *upload, uint64_t gen);
    /* Publish the upload atomically; d carries size, chunk geometry, xxh and
     * etag; sets d->generation. Consumes the upload on success and failure.
     * Called once every chunk op of the upload has completed. */
    int (*put_commit)(struct rio_transport *t, void *upload, struct rio_desc *d);
    /* Optional (NULL: put_commit of each): n put_commits at once, rets[i]
     * what put_commit would return for uploads[i] and ds[i] (same rules:
     * each consumed unless its result is of a retryable class with
     * RIO_CAP_COMMIT_RETRY), so that the transport can send them together
     * and its caller waits once. */
    void (*put_commit_many)(struct rio_transport *t, void **uploads, struct rio_desc **ds,
                            int *rets, unsigned n);
    /* Drop an upload; nothing of it stays visible or stored. Called once
     * every chunk op of the upload has completed (or none was submitted). */
    void (*put_abort)(struct rio_transport *t, void *upload);
    int (*remove)(struct rio_transport *t, const char *key);
    /* Optional (NULL: rio_delete_if is RIO_ENOTSUP): remove key only if its
     * object is generation gen (not 0), decided with the removal itself
     * (RIO_EGENERATION when another, RIO_ENOTFOUND when none). Metadata as
     * remove: a try that may have taken effect is RIO_EUNKNOWN. */
    int (*remove_if)(struct rio_transport *t, const char *key, uint64_t gen);

    /* Listing and batch existence: metadata ops as above (one try each, the
     * engine retries; thread-safe, may block). Optional: NULL list means the
     * backend cannot list (rio_list returns RIO_ENOTSUP); NULL exists means
     * the engine runs lookups in parallel on its metadata workers instead.
     * list fills one page (a->max_keys already clamped, at least 1;
     * a->prefix never NULL; entries from rio__calloc/rio__realloc
     * (core/alloc.h: rio_list_page_cleanup frees them with rio__free), in
     * byte order of key unless the backend has RIO_CAP_LIST_UNORDERED) and
     * next_token ("" on the last page). A token is the backend's own;
     * a->start_after (set only without a token) is a key of up to
     * RIO_KEY_MAX arbitrary bytes and the page holds keys after it in byte
     * order: the engine's RIO_LIST_DELIM pages with it alone (it skips a
     * common prefix P with P padded with 0xff). a->flags has RIO_LIST_DELIM
     * only for a backend with RIO_CAP_LIST_DELIM. The engine checks every
     * page (core/listing.c): at most max_keys entries, keys terminated,
     * under the prefix and in order, next_token terminated; on error the
     * page is freed. exists writes n bytes of 1 (exists) or 0 and returns 0
     * or an error (not RIO_ENOTFOUND: a missing key is a 0); n is at most
     * RIO_LIST_PAGE_MAX (the engine splits larger sets). */
    int (*list)(struct rio_transport *t, const struct rio_list_args *a, struct rio_list_page *out);
    int (*exists)(struct rio_transport *t, const char *const *keys, unsigned n, uint8_t *out);
    /* Optional (NULL: RIO_ENOTSUP): rio_fsck, the backend's own sweep of
     * what failed uploads left (a backend whose layout can leave pieces no
     * object refers to). Metadata as above, but one long call (a scan of
     * the store) that the engine never retries; a->flags only the public
     * ones and a->grace_ns set (the engine applied the default); out
     * zeroed. Calls a->each in the calling thread. */
    int (*fsck)(struct rio_transport *t, const struct rio_fsck_args *a,
                struct rio_fsck_report *out);

    /* Optional (NULL: RIO_ENOTSUP): make dst the concatenation of the
     * objects srcs[0..n) without copying their bytes (rados://: a head
     * that lists the sources' chunks). gens, when not NULL, holds the
     * generation each source must have (0: any), else RIO_EGENERATION;
     * dst_if (0: none) a condition on dst as put_expect's gen is, decided
     * with the publish the same way (RIO_EGENERATION, nothing changed).
     * RIO_ENOTSUP when the layout cannot take these sources as they are
     * (rados://: chunk sizes differ, or a source but the last is not a
     * whole number of chunks): nothing changed, the caller copies instead.
     * On success dst is published atomically, as by put_commit (readers
     * see the old object or the new one); the sources are removed unless
     * flags has RIO_COMPOSE_KEEP_SOURCES; *out is dst's descriptor (key,
     * generation, size, geometry, xxh; etag "" as no MD5 was taken).
     * A crash leaves the sources whole or dst whole. Metadata as above,
     * but never retried by the engine. */
    int (*compose)(struct rio_transport *t, const char *dst, const char *const *srcs,
                   const uint64_t *gens, unsigned n, unsigned flags, uint64_t dst_if,
                   struct rio_desc *out);

    /* Optional (may be NULL): a path's known cap in bytes/s (0 unknown), and
     * CPU time of threads the transport owns. Both non-blocking. */
    double (*path_cap)(struct rio_transport *t, unsigned path);
    uint64_t (*cpu_ns)(struct rio_transport *t);
    /* Optional (may be NULL): when a byte of path's ops last moved (sent,
     * acknowledged or received; rio__now_ns()'s clock), now when the
     * transport has the path's ops moving in a way it cannot date, 0 when it
     * cannot tell. The engine fails a path with work whose ops moved nothing
     * for long while others complete (engine.c, path_silent); a transport
     * without it is judged by completions alone. Engine thread, client lock
     * held, non-blocking. */
    uint64_t (*path_moved)(struct rio_transport *t, unsigned path);
};

/* The common head of every transport instance. */
struct rio_transport {
    const struct rio_transport_ops *ops;
    unsigned npaths; /* independent paths, 1..RIO_MAX_PATHS */
    /* The most ops one path holds at once, 0 = no limit of its own (set by
     * open, from what the transport built: ring slots, a server's window).
     * The engine keeps at most min(depth, max_depth) ops in flight on a
     * path, so a transport sizes itself once and never restates the
     * engine's limits; submit beyond it still answers -EAGAIN. */
    unsigned max_depth;
    /* Limits on a PUT's chunking, 0 = none (set by open). A PUT of more than
     * one chunk uses chunks of at least put_chunk_min bytes and at most
     * put_chunks_max chunks (S3: parts of >= 5 MiB, at most 10000 parts). */
    uint64_t put_chunk_min;
    uint64_t put_chunks_max;
    /* The most uploads one call keeps open (opened, not yet committed) at
     * once, 0 = no limit of its own (set by open): a target that refuses
     * more per connection (railiod's --max-uploads-per-conn) would throttle
     * a deep batch's opens while its commits wait behind them. */
    unsigned uploads_max;
    /* The etag it stores (RIO_CAP_ETAG) must be the MD5 of the bytes (S3
     * compares it with the server's own): the engine gives it no etag
     * unless etag=md5 asks for the MD5, never the fast one (set by open). */
    bool etag_md5_only;
    /* The etag of an object it did not write (a descriptor with no chunk
     * checksums), when it gives one, is the MD5 of the object's bytes: the
     * engine checks a whole-object GET of such an object against it, or
     * against the store's CRC where full_checksum gives one (set by open;
     * engine.c, rio__req_md5_plan). Off, neither is checked. */
    bool foreign_etag_md5;
    /* Set by the engine before its thread starts, valid until close; a
     * transport only calls it through rio__t_path_event. */
    void (*path_event)(struct rio_transport *t, unsigned path, int state, int err);
    void *engine;
};

/* Find the ops for url's scheme; NULL if none is built in. */
const struct rio_transport_ops *rio__transport_find(const char *scheme);
/* Whether scheme is served by a module (s3, http, https, rados in a build
 * that has them): one that did not load makes rio_client_new RIO_ENOTSUP
 * with the reason in rio_error_detail(), not RIO_EURL. */
bool rio__transport_module_scheme(const char *scheme);
/* Why this build has no backend for scheme (a backend its build options
 * left out: "built without liburing (...)"), or NULL. */
const char *rio__transport_left_out(const char *scheme);

/* Open url with ops, and stack the fault filter (transport/fault.h) over it
 * when url carries `faults=` or is mock://. What rio__t_open runs. */
int rio__transport_open(const struct rio_transport_ops *ops, const struct rio_url *url,
                        const struct rio_options *o, struct rio_transport **out);

/*
 * A backend's open and close and the nine ops every backend implements,
 * named PREFIX_submit, PREFIX_reap, ... PREFIX_remove: its table is then its
 * scheme, caps, optional ops and RIO_TRANSPORT_OPS(open, close, PREFIX).
 */
#define RIO_TRANSPORT_OPS(open_fn, close_fn, prefix)                                               \
    .open = open_fn, .close = close_fn, .submit = prefix##_submit, .reap = prefix##_reap,          \
    .wake = prefix##_wake, .cancel = prefix##_cancel, .lookup = prefix##_lookup,                   \
    .put_open = prefix##_put_open, .put_commit = prefix##_put_commit,                              \
    .put_abort = prefix##_put_abort, .remove = prefix##_remove

/* --- wrappers: the only way the engine reaches a transport ---
 * Each states who may call it; the table above the ops is the full rule. */

/* rio_client_new's caller, no client lock; may block. *out may be the
 * fault filter stacked over the transport of ops (rio__transport_open). */
static inline int rio__t_open(const struct rio_transport_ops *ops, const struct rio_url *url,
                              const struct rio_options *o, struct rio_transport **out)
{
    return rio__transport_open(ops, url, o, out);
}

/* The ops table, loaded once per call (acquire): a test may swap a live
 * transport's table for a copy with other metadata ops (rio__t_set_ops,
 * test_engine_meta) while the engine thread calls through it, and the swap
 * must be a clean handover, not a data race. */
static inline const struct rio_transport_ops *rio__t_ops(const struct rio_transport *t)
{
    return __atomic_load_n(&t->ops, __ATOMIC_ACQUIRE);
}

static inline void rio__t_set_ops(struct rio_transport *t, const struct rio_transport_ops *ops)
{
    __atomic_store_n(&t->ops, ops, __ATOMIC_RELEASE);
}

/* Nothing in flight, engine thread stopped; may block. */
static inline void rio__t_close(struct rio_transport *t)
{
    rio__t_ops(t)->close(t);
}

/* Whether the transport has every capability bit of cap. Any thread. */
static inline bool rio__t_has_cap(const struct rio_transport *t, unsigned cap)
{
    return (rio__t_ops(t)->caps & cap) == cap;
}

/* Engine thread, client lock held. Never blocks; -EAGAIN when full. On any
 * error complete() is not called. */
static inline int rio__t_submit(struct rio_transport *t, struct rio_io *io)
{
    return rio__t_ops(t)->submit(t, io);
}

/* Engine thread, client lock NOT held; blocks up to timeout_ms. Calls
 * complete() exactly once per finished op, in the calling thread. < 0: the
 * transport could not wait; its ops stay in flight. */
static inline int rio__t_reap(struct rio_transport *t, int timeout_ms)
{
    return rio__t_ops(t)->reap(t, timeout_ms);
}

/* Any thread, client lock not held; never blocks. */
static inline void rio__t_wake(struct rio_transport *t)
{
    rio__t_ops(t)->wake(t);
}

/* Any thread, client lock held, also while reap runs; never blocks. The op
 * still completes through reap. */
static inline void rio__t_cancel(struct rio_transport *t, struct rio_io *io)
{
    rio__t_ops(t)->cancel(t, io);
}

/* Metadata: any thread, several at once, client lock NOT held; may block. */
static inline int rio__t_lookup(struct rio_transport *t, const char *key, struct rio_desc *out)
{
    return rio__t_ops(t)->lookup(t, key, out);
}

static inline int rio__t_lookup_mtime(struct rio_transport *t, const char *key,
                                      struct rio_desc *out, int64_t *mtime_ns)
{
    *mtime_ns = 0;
    if (!rio__t_ops(t)->lookup_mtime)
        return rio__t_ops(t)->lookup(t, key, out);
    return rio__t_ops(t)->lookup_mtime(t, key, out, mtime_ns);
}

static inline int rio__t_lookup_within(struct rio_transport *t, const char *key, uint64_t max_size,
                                       struct rio_desc *out)
{
    if (!rio__t_ops(t)->lookup_within)
        return rio__t_ops(t)->lookup(t, key, out);
    return rio__t_ops(t)->lookup_within(t, key, max_size, out);
}

static inline int rio__t_put_open(struct rio_transport *t, const char *key, uint64_t size,
                                  uint64_t chunk_size, void **upload)
{
    return rio__t_ops(t)->put_open(t, key, size, chunk_size, upload);
}

static inline int rio__t_parts_of(struct rio_transport *t, const struct rio_desc *d, uint64_t *part,
                                  uint32_t *nparts, char want[48])
{
    if (!rio__t_ops(t)->parts_of)
        return RIO_ENOTSUP;
    return rio__t_ops(t)->parts_of(t, d, part, nparts, want);
}

/* The algorithms of full_checksum. */
enum { RIO__CK_NONE, RIO__CK_CRC32, RIO__CK_CRC32C, RIO__CK_CRC64NVME };

static inline int rio__t_full_checksum(struct rio_transport *t, const struct rio_desc *d, int *algo,
                                       uint64_t *value)
{
    if (!rio__t_ops(t)->full_checksum)
        return RIO_ENOTSUP;
    return rio__t_ops(t)->full_checksum(t, d, algo, value);
}

static inline int rio__t_parts_even(struct rio_transport *t, const struct rio_desc *d,
                                    uint64_t part, uint32_t nparts)
{
    if (!rio__t_ops(t)->parts_even)
        return RIO_ENOTSUP;
    return rio__t_ops(t)->parts_even(t, d, part, nparts);
}

static inline bool rio__t_get_one(struct rio_transport *t, const char *key, uint64_t cap)
{
    return rio__t_ops(t)->get_one && rio__t_ops(t)->get_one(t, key, cap);
}

static inline bool rio__t_put_one(struct rio_transport *t, const char *key, uint64_t size,
                                  uint64_t chunk_size)
{
    return rio__t_ops(t)->put_one && rio__t_ops(t)->put_one(t, key, size, chunk_size);
}

/* Whether the transport does per-chunk work on a PUT's bytes ahead of submit. */
static inline bool rio__t_has_put_prep(const struct rio_transport *t)
{
    return rio__t_ops(t)->put_prep != NULL;
}

/* The engine, after put_open (meta.c); put_expect's rules above. */
static inline bool rio__t_has_put_expect(const struct rio_transport *t)
{
    return rio__t_ops(t)->put_expect != NULL;
}

static inline int rio__t_put_expect(struct rio_transport *t, void *upload, uint64_t gen)
{
    return rio__t_ops(t)->put_expect(t, upload, gen);
}

static inline void rio__t_put_prep(struct rio_transport *t, void *upload, uint64_t index,
                                   const void *src, uint64_t len)
{
    rio__t_ops(t)->put_prep(t, upload, index, 1, &src, &len);
}

/* n consecutive chunks from index (1 <= n <= RIO__PREP_MAX). */
static inline void rio__t_put_prep_n(struct rio_transport *t, void *upload, uint64_t index,
                                     unsigned n, const void *const *src, const uint64_t *len)
{
    rio__t_ops(t)->put_prep(t, upload, index, n, src, len);
}

#define RIO__PREP_MAX 16u

/* How many uploads put_prep_many gains by taking at once: 1 (none gained)
 * to RIO__PREP_MAX. */
static inline unsigned rio__t_put_prep_many_width(struct rio_transport *t)
{
    unsigned w = rio__t_ops(t)->put_prep_many
                     ? rio__t_ops(t)->put_prep_many(t, 0, NULL, NULL, NULL, NULL)
                     : 1;
    return w < 1 ? 1 : w > RIO__PREP_MAX ? RIO__PREP_MAX : w;
}

/* put_prep of chunk index[i] of uploads[i], i < n (<= RIO__PREP_MAX): at
 * once where the transport can, else one after another. */
static inline void rio__t_put_prep_many(struct rio_transport *t, unsigned n, void *const *uploads,
                                        const uint64_t *index, const void *const *src,
                                        const uint64_t *len)
{
    if (n && rio__t_ops(t)->put_prep_many) {
        (void)rio__t_ops(t)->put_prep_many(t, n, uploads, index, src, len);
        return;
    }
    for (unsigned i = 0; i < n; i++)
        rio__t_ops(t)->put_prep(t, uploads[i], index[i], 1, &src[i], &len[i]);
}

/* How many chunks put_prep wants at once: 1 to RIO__PREP_MAX. */
static inline unsigned rio__t_put_prep_group(struct rio_transport *t, void *upload)
{
    unsigned g = rio__t_ops(t)->put_prep_group ? rio__t_ops(t)->put_prep_group(t, upload) : 1;
    return g < 1 ? 1 : g > RIO__PREP_MAX ? RIO__PREP_MAX : g;
}

/* Once no chunk op of upload is in flight; consumes upload. */
static inline int rio__t_put_commit(struct rio_transport *t, void *upload, struct rio_desc *d)
{
    return rio__t_ops(t)->put_commit(t, upload, d);
}

/* put_commit of each of n uploads (rets[i] its result), at once where the
 * transport can. Once no chunk op of any of them is in flight. */
static inline void rio__t_put_commit_many(struct rio_transport *t, void **uploads,
                                          struct rio_desc **ds, int *rets, unsigned n)
{
    if (rio__t_ops(t)->put_commit_many) {
        rio__t_ops(t)->put_commit_many(t, uploads, ds, rets, n);
        return;
    }
    for (unsigned i = 0; i < n; i++)
        rets[i] = rio__t_ops(t)->put_commit(t, uploads[i], ds[i]);
}

/* Once no chunk op of upload is in flight; consumes upload. */
static inline void rio__t_put_abort(struct rio_transport *t, void *upload)
{
    rio__t_ops(t)->put_abort(t, upload);
}

static inline int rio__t_remove(struct rio_transport *t, const char *key)
{
    return rio__t_ops(t)->remove(t, key);
}

static inline bool rio__t_has_remove_if(const struct rio_transport *t)
{
    return rio__t_ops(t)->remove_if != NULL;
}

static inline int rio__t_remove_if(struct rio_transport *t, const char *key, uint64_t gen)
{
    return rio__t_ops(t)->remove_if(t, key, gen);
}

/* Metadata as above. RIO_ENOTSUP when the backend has no list op. The
 * engine checks what it returns (core/listing.c) before anyone reads it. */
static inline int rio__t_list(struct rio_transport *t, const struct rio_list_args *a,
                              struct rio_list_page *out)
{
    const struct rio_transport_ops *ops = rio__t_ops(t);
    return ops->list ? ops->list(t, a, out) : RIO_ENOTSUP;
}

/* Whether the backend answers existence in batches (else: lookups). */
static inline bool rio__t_has_exists(const struct rio_transport *t)
{
    return rio__t_ops(t)->exists != NULL;
}

/* Metadata as above; n <= RIO_LIST_PAGE_MAX. RIO_ENOTSUP without an exists op. */
static inline int rio__t_exists(struct rio_transport *t, const char *const *keys, unsigned n,
                                uint8_t *out)
{
    const struct rio_transport_ops *ops = rio__t_ops(t);
    return ops->exists ? ops->exists(t, keys, n, out) : RIO_ENOTSUP;
}

/* Metadata as above, one long call. RIO_ENOTSUP without an fsck op. */
static inline int rio__t_fsck(struct rio_transport *t, const struct rio_fsck_args *a,
                              struct rio_fsck_report *out)
{
    const struct rio_transport_ops *ops = rio__t_ops(t);
    return ops->fsck ? ops->fsck(t, a, out) : RIO_ENOTSUP;
}

/* Metadata as above, never retried. RIO_ENOTSUP without a compose op. */
static inline int rio__t_compose(struct rio_transport *t, const char *dst, const char *const *srcs,
                                 const uint64_t *gens, unsigned n, unsigned flags, uint64_t dst_if,
                                 struct rio_desc *out)
{
    const struct rio_transport_ops *ops = rio__t_ops(t);
    return ops->compose ? ops->compose(t, dst, srcs, gens, n, flags, dst_if, out) : RIO_ENOTSUP;
}

/* Any thread; never blocks. 0 when unknown or not implemented. */
static inline double rio__t_path_cap(struct rio_transport *t, unsigned path)
{
    const struct rio_transport_ops *ops = rio__t_ops(t);
    return ops->path_cap ? ops->path_cap(t, path) : 0.0;
}

/* Engine thread, client lock held; never blocks. 0 when unknown or not
 * implemented. */
static inline uint64_t rio__t_path_moved(struct rio_transport *t, unsigned path)
{
    const struct rio_transport_ops *ops = rio__t_ops(t);
    return ops->path_moved ? ops->path_moved(t, path) : 0;
}

static inline uint64_t rio__t_cpu_ns(struct rio_transport *t)
{
    const struct rio_transport_ops *ops = rio__t_ops(t);
    return ops->cpu_ns ? ops->cpu_ns(t) : 0;
}

/* --- the transport's way back: report path state (enum rio_path_state).
 * Engine thread inside reap, or any thread the transport owns; never from
 * submit, cancel or path_cap, never with a transport lock held. Does
 * nothing while no engine listens. */
static inline void rio__t_path_event(struct rio_transport *t, unsigned path, int state, int err)
{
    if (t->path_event && path < t->npaths)
        t->path_event(t, path, state, err);
}

#endif /* RIO_TRANSPORT_H */
