/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine: one thread per client that plans chunks onto paths, keeps the
 * in-flight budget, retries with rollback, fences every call, and keeps the
 * books for stats. Callers build a call (one or more requests), hand it over
 * with rio__engine_run and block until it is fenced.
 *
 * Locking: c->mu protects everything in struct rio_client below "under mu",
 * every request and call field marked "engine", and the transport's submit and
 * cancel. The engine thread drops mu only around reap. Completions reaped
 * land on c->reaped (engine thread only) and are processed under mu.
 */
#ifndef RIO_ENGINE_H
#define RIO_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "core/checksum.h"
#include "core/list.h"
#include "core/url.h"
#include "railio.h"
#include "transport/transport.h"

#define RIO__STAGE_SLOTS 4

enum { PATH_HEALTHY = 0, PATH_COOLING = 1, PATH_PROBING = 2 };
enum { CH_NEW = 0, CH_QUEUED, CH_INFLIGHT, CH_DONE };

struct rio__attempt;

/*
 * The client's worker pools (pool.c): threads started with the client, that
 * run jobs from one queue. A job is either a task (one run, posted and
 * forgotten: the pool does not touch it once its fn starts) or shared (up
 * to n threads run fn beside the poster, which reclaims it: the runs not
 * started are taken back, the started ones waited for). Under the pool's
 * mu, which is taken after the client's, never before.
 */
struct rio__job {
    void (*fn)(void *arg);
    void *arg;
    unsigned want;    /* runs still to start */
    unsigned running; /* shared: runs in progress */
    bool shared;
    bool queued; /* on its pool's queue, by node */
    struct rio_list_node node;
};

struct rio__pool {
    pthread_mutex_t mu;
    pthread_cond_t cond;   /* work queued, or stop */
    pthread_cond_t done;   /* a shared job's last run returned */
    struct rio_list queue; /* of struct rio__job */
    bool stop;
    unsigned n;
    pthread_t *th;
    const char *name;
};

/* Start n threads (1 at least) named name (15 bytes at most). 0 or -errno
 * (nothing left running). */
int rio__pool_start(struct rio__pool *p, unsigned n, const char *name);
/* Stop and join every thread once the queue is empty; p may be unstarted
 * (zeroed) or stopped. */
void rio__pool_stop(struct rio__pool *p);
/* Run fn(arg) once on a pool thread. j is the poster's until fn starts. */
void rio__pool_task(struct rio__pool *p, struct rio__job *j, void (*fn)(void *), void *arg);
/* Let up to n pool threads run fn(arg) while the poster runs it too;
 * rio__pool_reclaim(j) before j goes. fn must end on its own once the
 * work is done (every run sees the same arg). */
void rio__pool_share(struct rio__pool *p, struct rio__job *j, unsigned n, void (*fn)(void *),
                     void *arg);
void rio__pool_reclaim(struct rio__pool *p, struct rio__job *j);

struct rio__path {
    int state;
    unsigned fails;    /* consecutive failures: cooldown = base << (fails-1) */
    uint64_t until_ns; /* end of cooldown */
    uint64_t inflight_ops, inflight_bytes;
    /* Of those, whole small objects in one op each (a PUT_ONE): they take
     * the path's depth by their bytes (engine.c, path_slots). */
    uint64_t one_ops, one_bytes;
    uint64_t peak_depth;
    struct rio_list attempts; /* of struct rio__attempt by pnode: in flight on this path */
    uint64_t busy_since_ns;   /* valid while inflight_ops > 0 */
    uint64_t mark_ns;         /* last completion, or start of the busy stretch */
    uint64_t busy_ns;         /* accumulated busy time, excluding the current stretch */
    /* Per direction (0 read, 1 write): links are full duplex and targets
     * often read and write at different speeds, so each has its own rate. */
    struct rio__path_dir {
        uint64_t inflight_ops;
        uint64_t busy_since_ns, busy_ns;
        uint64_t bytes_total;
        uint64_t sample_bytes, sample_busy_ns; /* markers for the next rate sample */
        double rate_bps;                       /* delivered rate, EWMA over busy time; 0 unknown */
        double op_ns; /* an op's time from submit to completion, EWMA; 0 unknown */
    } dir[2];
    uint64_t last_done_ns; /* the last op that completed whole on it */
    /* adapt: its oldest op in flight is far past its expected time while
     * another path completes ops (engine.c, path_stalled); it takes no new
     * op until that one ends */
    bool stalled;
    /* When the transport last saw a byte of its ops move, as last asked
     * (engine.c, path_silent) */
    uint64_t moved_ns;
    bool degraded; /* the transport said RIO_PATH_DEGRADED: half the depth */
    /* The last state the transport reported and not yet applied (0 none),
     * and its error: set by rio__t_path_event from any thread, applied by
     * the engine thread (engine.c, path_events_locked). */
    int ev_state;
    int ev_err;
    /* The last error an op on this path ended with, or that took it down
     * (0: none yet): the cause rio_error_detail() gives for RIO_ENOPATH. */
    int last_err;
};

struct rio__chunk {
    uint64_t idx;
    uint32_t attempts;  /* failed attempts that count against retry_attempts */
    uint32_t throttles; /* RIO_ETHROTTLE answers: up to 4 x retry_attempts */
    uint8_t state;
    uint16_t zombies; /* cancelled attempts of this chunk still outstanding */
    uint64_t not_before_ns;
    struct rio_list_node qnode; /* on its request's retry queue */
    /* Tail splitting (GET, RIO_CAP_RANGE_READ; engine.c split_tail_locked). */
    struct rio__chunk *parent; /* a piece: the chunk it is a range of; else NULL */
    uint64_t poff, plen;       /* a piece: its offset in the chunk, its length */
    struct rio__chunk *pieces; /* a chunk that was split: its pieces (freed with r) */
    uint32_t npieces, landed;  /* while split: its pieces, those landed */
};

struct rio__attempt {
    struct rio_io io;
    struct rio_client *c;
    struct rio__req *req;
    struct rio__chunk *ch;
    unsigned path;
    bool cancelled; /* the engine gave up on it; its result is ignored */
    uint64_t submit_ns, timeout_ns;
    uint64_t done_ns;           /* the transport completed it */
    struct rio__job vjob;       /* its verification on the client's cpu pool */
    struct rio_list_node pnode; /* on its path's list */
    struct rio__attempt *next;  /* free list */
    struct rio__attempt *rnext; /* reaped list */
};

struct rio__call;

/*
 * Adaptive concurrency (engine.c, adapt_*; docs/internals/engine.md): per
 * call class (0 GET, 1 PUT) of a client, the level it stands at on a
 * ladder of (paths, depth) limits within the configured ones, and the
 * goodput samples of the current window. Under mu.
 */
struct rio__adapt {
    bool started;          /* the class has had work: its level is set */
    unsigned level;        /* on the ladder (engine.c, adapt_ladder) */
    unsigned paths, depth; /* the limits of level */
    int state;             /* enum rio_adapt_state */
    unsigned tried;        /* settled: the level above it tried last */
    int next_pct;          /* settled: that level's goodput against this one's, percent */
    uint64_t win_t0;       /* when the window began (a new level, a path failed) */
    uint64_t n;            /* ops of the class completed in the window */
    /* per path, in the window: ops completed, the first and the last one's
     * time, and the bytes of all but the first */
    struct {
        uint32_t n;
        uint64_t t_first, t_last;
        double bytes;
    } p[RIO_MAX_PATHS];
    unsigned from;  /* growing: the level it came from */
    double g_below; /* growing: goodput of that level, bytes/s (0: none) */
    double g_held;  /* settled: the held level's goodput, smoothed */
    unsigned held;  /* settled: windows since the last probe, up or down */
    /* growing: the goodput of a first window of this level that did not
     * pay (0: none); a second window decides */
    double g_doubt;
    uint64_t level_t0;    /* the level began (or a path failed): ops sent before do not count */
    bool down;            /* settled or at the ceiling: trying the step below */
    unsigned falls;       /* settled: windows in a row far below the held goodput */
    unsigned short_calls; /* growing: calls in a row that ended before a window did */
    uint64_t short_t0;    /* the last of them, by its start time */
    unsigned probes;      /* tries of the step up or down so far, to alternate */
    bool fall_up;         /* growing: the step up a fall tried; not paying, try the step below */
    bool lifted;          /* its limits are lifted (rio_client.adapt_lift); re-climb after */
};

struct rio__req {
    struct rio__call *call;
    int type; /* RIO_OP_GET / RIO_OP_PUT */
    char *key;
    uint8_t *data;    /* where chunks land (GET) or come from (PUT) */
    uint8_t *user;    /* GET with RIO_ATOMIC: the caller's buffer */
    uint8_t *staging; /* GET with RIO_ATOMIC, or a reader's ring: from rio__stage_get */
    size_t staging_cap;
    /* Streaming reader: chunk i lands in ring slot i % prefetch, and only
     * chunks below window (the reader's position + prefetch) may go out. */
    uint8_t *ring;
    unsigned prefetch;
    /* A reader opened at an offset (read_from, set before the lookup):
     * chunks below first are never fetched and count as done. A reader of
     * a range (read_len, set before the lookup; UINT64_MAX: to the end):
     * chunks from end on are never fetched either and count as done; end
     * is nchunks for every other GET. */
    uint64_t read_from, first, read_len, end;
    /* A reader given its descriptor (rio_reader_open_desc): the plan is
     * made from it instead of a lookup; the caller's, valid during the
     * open only. */
    const struct rio_desc *given;
    _Atomic uint64_t window;
    uint64_t size, chunk_size, nchunks;
    /* PUT: a part of a streaming writer's upload: its chunk k is the
     * object's chunk base + k (no commit; the writer commits). */
    uint64_t base;
    uint64_t generation;
    uint64_t *xxh;        /* GET: expected (desc.xxh, may be NULL); PUT: computed */
    struct rio_desc desc; /* GET: the descriptor read */
    void *upload;         /* PUT */
    struct rio_md5 md5;   /* PUT, when want_md5 */
    /* PUT: its MD5 runs on the cpu pool (call.c, md5_task): posted by the
     * caller (md5_posted, caller only), running until the task ends
     * (md5_running, md5_ns: under mu). */
    struct rio__job md5_job;
    bool md5_posted, md5_running;
    uint64_t md5_ns;
    bool want_md5; /* PUT: the backend stores the etag and the MD5 is asked for */
    /* PUT: its chunks' xxh3, on the caller's thread and the cpu pool at once
     * (call.c, hash_run): each thread takes the next chunk (hash_next),
     * marks it in hready when its xxh is set, and hashed, the count of
     * chunks from the first that are all ready, gates what the engine sends. */
    _Atomic uint64_t hashed;
    _Atomic uint64_t hash_next;
    _Atomic uint8_t *hready;
    _Atomic int stop_hashing;
    /* PUT: the upload the transport's put_prep takes each chunk to, beside
     * its xxh3 and before it is marked ready (set by the caller, before
     * hashing, only for an upload it opened itself; NULL: none). */
    void *prep_upload;
    struct rio__chunk *chunks;
    int64_t result;      /* set when the call is over */
    int op_index;        /* index in the caller's batch */
    size_t get_cap;      /* GET looked up by a worker: the caller's buffer size */
    uint64_t expect_gen; /* and the generation it must have (0: any) */

    /* engine */
    uint64_t next_new;
    struct rio_list rq; /* of struct rio__chunk by qnode: waiting for another attempt */
    uint64_t done;
    uint64_t inflight_ops, inflight_bytes;
    /* Chunks the transport delivered, being verified on the cpu pool: the
     * request is not fenced while any is (they read its buffer). */
    unsigned verifying;
    int status;   /* 0 running/ok, < 0 the error */
    int last_err; /* last attempt error, for RIO_ERETRIES context */
    bool decided; /* success or failure is known */
    bool fenced;  /* decided and nothing in flight */
    bool active;  /* on the client's active list */
    uint64_t deadline_ns;
    /* engine: since when r has had work out or waiting and no path of the
     * client was healthy (0: not stalled); see stall_window_ns (engine.c) */
    uint64_t stall_ns;
    struct rio_list_node anode; /* on the client's active list */
    /* pipelined opens and commits (a batch's PUTs), under mu */
    bool opening; /* its upload is being opened (PUT) or it is being looked
                     up (GET): no chunk may go yet */
    bool ahead;   /* prepared by a worker, counted in call->ahead */
    /* Admitted, waiting off the active list until the engine's window of
     * one-op requests has room (engine.c, held_admit_locked) */
    bool held;
    bool hash_done;             /* the caller is done hashing it */
    bool commit_queued;         /* on the call's ready list (fenced and hashed) */
    bool committed;             /* a commit worker took it (set before the join) */
    struct rio_list_node cnode; /* on the call's ready list */
    /* A PUT of one chunk sent as one op that opens, sends and commits
     * (rio__t_put_one): no upload, no commit after the fence. Engine (mu):
     * one_gen the generation an attempt published (0: none known);
     * one_unsure the attempts that ended without an answer once the whole
     * request went out (they may have published). */
    bool one;
    uint64_t one_gen;
    uint32_t one_unsure;
    char one_etag[48]; /* as rio_desc.etag */
    /* A GET into a buffer of at most a chunk sent as one READ op that
     * looks the object up and brings its bytes (rio__t_get_one): no
     * lookup first. Until its answer the request is one chunk of get_cap
     * bytes with no checksum; the answer's descriptor then becomes its
     * own (one_xxh the chunk's xxh3, r->xxh pointing at it), or decides
     * it (engine.c, get_one_answered_locked). */
    bool get_one;
    uint64_t one_xxh;
    /* What of the call's progress total is r's: nothing until an answer
     * says the object's size (cap is a guess, never reported). */
    uint64_t one_total;
    /* A GET of a whole object that has no chunk checksums (one railio did
     * not write) for which a digest of its bytes is known, with
     * verification on: the store's CRC of it (crc_algo, below), else its
     * etag where the transport says that is the MD5 of its bytes
     * (rio_transport.foreign_etag_md5; md5_want). Its bytes are hashed in
     * order as its chunks land, on the cpu pool (engine.c, md5_check_task,
     * md5_feed; md5_job, md5_running shared with a PUT's MD5; the md5_
     * names are older than the CRC), and it succeeds only once the digest
     * matches. Under mu: md5_at,
     * the chunks hashed (a reader takes none at or past it, so the last
     * chunk waits for the comparison); md5_rereads, whole re-reads after a
     * mismatch (one, not for a reader). Set by rio__req_md5_plan. */
    bool md5_check;
    uint64_t md5_at;
    unsigned md5_rereads;
    /* The ETag the MD5 must make: the descriptor's, or for an object
     * uploaded in parts (md5_part: the size of each part but the last,
     * md5_parts of them; rio__t_parts_of) the MD5 of the parts' MD5s and
     * "-N": each part's MD5 in md5 (md5_poff bytes of the part so far), the
     * parts' digests in md5_outer. The hash task's alone. */
    char md5_want[48];
    uint64_t md5_part, md5_poff;
    uint32_t md5_parts;
    struct rio_md5 md5_outer;
    /* Or, for a GET into memory (not a reader's ring) of at most
     * RIO__MD5_LANE_PARTS parts, where the CPU has MD5 lanes: the parts'
     * MD5s taken 16 or 8 parts at once as their chunks land, in any part
     * order within a group, into md5_pd (one per part), md5_pnext the
     * parts done (engine.c, md5_lanes_locked). Written by the hash task
     * under mu; md5_pd, allocated by it, freed with r. */
    uint8_t (*md5_pd)[16];
    uint32_t md5_pnext;
    /* After a mismatch, the transport was asked whether parts 2 to N - 1
     * are md5_part bytes too (parts_even; once). */
    bool md5_sized;
    /* Checked by a CRC of the whole object the store keeps instead
     * (rio__t_full_checksum: crc_algo RIO__CK_*, RIO__CK_NONE when not):
     * the bytes' CRC so far in crc_got, and md5_want, the digest to
     * match, "ALGO:hex" of the store's. The hash task's alone. */
    int crc_algo;
    uint64_t crc_got;
    /* What the store said of its last failed op (rio_io.why), for the
     * caller's detail; "" when nothing. Under mu. */
    char why[RIO__IO_WHY_MAX];
    int why_err; /* the error of that failure */
    /* The CRC its plan found (rio__get_plan's ck_algo, ck): taken by
     * rio__req_md5_plan rather than asked of the transport again. */
    int plan_ck_algo;
    uint64_t plan_ck;
};

/* The length of chunk k of r: chunk_size, less for the last one. */
/* The most chunk latencies a call keeps (8 bytes each): a reader of an
 * object of millions of chunks keeps a sample, not one per chunk. */
#define RIO__LAT_SAMPLES_MAX (1u << 16)

static inline uint64_t rio__lat_reserve_of(uint64_t want)
{
    return want < RIO__LAT_SAMPLES_MAX ? want : RIO__LAT_SAMPLES_MAX;
}

/* The state of chunk i of r: a reader keeps it for the chunks of its
 * window only (slot i % prefetch, as their bytes), so what it holds does
 * not grow with the object. */
static inline struct rio__chunk *rio__req_chunk(struct rio__req *r, uint64_t i)
{
    return r->ring ? &r->chunks[i % r->prefetch] : &r->chunks[i];
}

/* Whether chunk i of r landed (verified by its checksum) and is in place
 * (a reader's slot may still hold the chunk before it there: that one was
 * handed out already). */
static inline bool rio__req_chunk_landed(struct rio__req *r, uint64_t i)
{
    const struct rio__chunk *ch = rio__req_chunk(r, i);
    return ch->state == CH_DONE && ch->idx == i;
}

/* ... and, for a GET checked by its MD5 (md5_check), hashed into it: the
 * last chunk only once the MD5 matched. What a reader may take (mu held). */
static inline bool rio__req_chunk_done(struct rio__req *r, uint64_t i)
{
    return rio__req_chunk_landed(r, i) && (!r->md5_check || i < r->md5_at);
}

/* Whether r reads its object whole, from its first byte to its last: any
 * GET into a buffer, a reader opened at offset 0 with no range. */
static inline bool rio__req_whole(const struct rio__req *r)
{
    return !r->prefetch || (r->read_from == 0 && r->read_len == UINT64_MAX);
}

static inline uint64_t rio__req_chunk_len(const struct rio__req *r, uint64_t k)
{
    uint64_t off = k * r->chunk_size;
    return r->size - off < r->chunk_size ? r->size - off : r->chunk_size;
}

/* A reader opened at an offset or of a range: the bytes of the chunks it
 * never fetches. */
static inline uint64_t rio__req_skipped(const struct rio__req *r)
{
    uint64_t b = r->first * r->chunk_size;
    if (b > r->size)
        b = r->size;
    if (r->type == RIO_OP_GET && r->end < r->nchunks)
        b += r->size - r->end * r->chunk_size;
    return b;
}

struct rio__call {
    struct rio_client *c;
    unsigned nreq;
    struct rio__req *reqs;
    unsigned remaining; /* engine: requests not yet fenced */
    int refs;           /* under mu: the caller's and the engine's */
    pthread_cond_t cond;
    pthread_cond_t md5_cond; /* a PUT's MD5 task ended (md5_running) */
    struct rio_cancel *cancel;
    unsigned flags;
    /* Its GETs look up first, none in one op (rio__t_get_one): a run
     * again of GETs whose one op found an object of another shape. */
    bool long_way;
    /* Its PUTs commit only if the key's object is then this generation
     * (RIO__PUT_IF_ABSENT: none; 0: unconditional): RIO_IF_ABSENT, or a
     * single PUT's expect_generation. */
    uint64_t put_if;
    uint64_t t0, t0_cpu_engine, t0_cpu_transport, t0_cpu_caller, t0_run_delay;
    uint32_t deadline_ms; /* the call's, or the client's default */
    uint64_t deadline_ns; /* t0 + deadline_ms (UINT64_MAX: none); bounds metadata */
    bool want_stats;
    bool want_cpu_wait; /* want_stats and big enough to read /proc for cpu_wait_ns */
    uint64_t path_busy0[RIO_MAX_PATHS];

    /* engine: accumulators for stats */
    /* Chunk latencies: every one up to RIO__LAT_SAMPLES_MAX, then a
     * uniform sample of that many (reservoir); lat_seen counts them all. */
    uint64_t *lat;
    uint64_t nlat, lat_cap;
    uint64_t lat_want; /* chunks of the requests known so far (deferred GETs add theirs) */
    uint64_t lat_seen, lat_max, lat_rng;
    uint64_t retries[RIO_CLASS__COUNT];
    uint64_t path_bytes[RIO_MAX_PATHS], path_ops[RIO_MAX_PATHS], path_errors[RIO_MAX_PATHS];
    uint64_t path_peak[RIO_MAX_PATHS];
    uint64_t svc_ns, op_ns, verify_ns;
    uint64_t verify_bytes, verify_cpu_ns; /* summed over the verifying threads */
    uint64_t peak_inflight;
    uint64_t first_done_ns, last_done_ns;
    /* progress reporting (engine) */
    void (*progress)(void *arg, uint64_t done, uint64_t total);
    void *progress_arg;
    uint64_t progress_done, progress_total, progress_last_ns;
    /* Bytes counted in progress_done that a GET read again whole
     * (md5_mismatch_locked) must land again before done grows: done
     * stands still while they do, never goes back. */
    uint64_t progress_redo;
    /* A report is due (the engine set it), or a thread of the call is
     * running the callback (outside mu): the call does not return then. */
    bool progress_due, progress_busy;
    /* pipelined commits: a batch commits each PUT as soon as it is fenced
     * and hashed, while the others still move (client.c), under mu */
    bool pipeline;
    bool hashing_over;
    unsigned open_next; /* next request a worker may prepare */
    /* Requests a worker prepared (an upload open, a lookup held in the
     * transport) and not yet done with (committed, or fenced for a GET): at
     * most ahead_max, so a batch of thousands never holds thousands of open
     * uploads or evicts the lookups its reads are about to use. */
    unsigned ahead, ahead_max;
    struct rio_list ready; /* of struct rio__req by cnode: fenced and hashed, to commit */
    /* caller */
    uint64_t hash_ns, copy_ns, bytes_staged;
    /* a stream's consumer (reader) or producer (writer): the caller's time
     * outside the library between its calls, or in its callback */
    uint64_t sink_ns, source_ns;
    struct rio__call *free_next; /* the client's dead_calls list */
    /* engine (mu): its requests held off the active list (r->held), from
     * index held_next on; on the client's held_calls list while any; and
     * when they were held (a stall they wait through counts from then) */
    unsigned nheld, held_next;
    uint64_t held_ns;
    struct rio_list_node hnode;
};

/* Reference-counted: the caller's (rio_cancel_new) plus one per call,
 * reader or writer that took it, so destroying it early is safe. */
struct rio_cancel {
    _Atomic int fired;
    _Atomic unsigned refs;
};

/* Take and drop a reference on a token (NULL: nothing). */
struct rio_cancel *rio__cancel_ref(struct rio_cancel *cx);
void rio__cancel_unref(struct rio_cancel *cx);

/* An open reader or writer, on its client's list (under mu) so that
 * rio_client_destroy can end it. */
struct rio__stream {
    struct rio_list_node node; /* on the client's streams */
    int kind;                  /* RIO__STREAM_READER or RIO__STREAM_WRITER */
};
#define RIO__STREAM_READER 1
#define RIO__STREAM_WRITER 2

struct rio_client {
    struct rio_options o;
    pid_t pid;         /* the process that made it: its threads exist only there */
    unsigned fork_gen; /* rio__fork_gen() then: another in a child after fork() */
    struct rio_url url;
    struct rio_transport *t;
    uint64_t seed;
    pthread_t thread;
    bool thread_started;
    clockid_t engine_clock;
    bool engine_clock_ok;

    pthread_mutex_t mu;
    /* under mu */
    bool stop;
    struct rio_list active; /* of struct rio__req by anode; count: requests active */
    /* Calls with requests held off the active list (rio__call by hnode),
     * in the order they came; the one-op requests on the active list; and
     * since when no path was healthy (0: one is), the stall every request
     * held meanwhile has waited through. */
    struct rio_list held_calls;
    unsigned active_one;
    unsigned held_dir[2]; /* requests held, GETs and PUTs */
    uint64_t stall_since_ns;
    unsigned npaths;
    struct rio__path paths[RIO_MAX_PATHS];
    uint64_t inflight_ops, inflight_bytes;
    struct rio__attempt *free_attempts;
    uint64_t rng;
    unsigned rr;                /* round-robin cursor over paths */
    bool path_events;           /* some path has an ev_state to apply */
    struct rio__adapt adapt[2]; /* per call class: 0 GET, 1 PUT (option adapt) */
    /* adapt: why every class's limits are lifted to the ceilings now (0:
     * they are not; enum rio__lift; engine.c, adapt_lift_locked), and the
     * path that is why */
    int adapt_lift;
    unsigned adapt_lift_path;
    /* paths failed because their ops moved nothing for long while others
     * completed (engine.c, path_silent); tests read it */
    uint64_t silent_fails;

    struct rio__call *dead_calls; /* under mu: calls the engine released last */
    struct rio_list streams;      /* under mu: open readers and writers, by node */

    /* Worker pools, started in rio_client_new: meta runs a batch's lookups,
     * opens and commits and its call workers (they block on round trips);
     * cpu verifies GET chunks (never blocks, so a batch's blocked workers
     * cannot hold a verification back). */
    struct rio__pool meta_pool, cpu_pool;

    /* engine thread only */
    struct rio__attempt *reaped;
    unsigned reap_errs; /* reaps failed in a row */

    /* __atomic: the size of the last object rio_get_alloc fetched, its
     * guess of the next one's (call.c, get_alloc_guess); 0: none yet. */
    uint64_t get_alloc_hint;

    /* under mu: staging buffers kept for reuse (RIO_ATOMIC GETs). Fresh
     * memory costs a page fault per page on first touch, which on this kind
     * of VM is slower than the network; a reused buffer costs nothing. */
    struct {
        uint8_t *buf;
        size_t cap;
    } stage[RIO__STAGE_SLOTS];
    uint64_t stage_bytes;

    /* under mu: the last key of each of the last pages of a listing in
     * byte order, by the hash of the token that continues after it
     * (listing.c): a page asked for with one of them must begin after
     * that key. NULL until the first such page. */
    struct rio__tok_mem *toks;
};

/* Take a staging buffer of at least n bytes (reused or new); NULL on ENOMEM. */
uint8_t *rio__stage_get(struct rio_client *c, size_t n, size_t *cap);
/* Give it back: kept while the cache stays under the budget, else freed. */
void rio__stage_put(struct rio_client *c, uint8_t *buf, size_t cap);
/* Free every cached staging buffer (client teardown). */
void rio__stage_drain(struct rio_client *c);

/* Start the engine thread of c (c->t and c->o set). */
int rio__engine_start(struct rio_client *c);
/* Stop and join it; nothing may be in flight. */
void rio__engine_stop(struct rio_client *c);
/* Preallocate n attempts (client creation). */
int rio__engine_reserve(struct rio_client *c, unsigned n);
void rio__engine_free_attempts(struct rio_client *c);

/*
 * Admit call (its requests fully built) and return at once; the caller then
 * hashes PUT chunks if any and waits with rio__engine_wait. Returns 0, or
 * RIO_EBUSY in fail-fast mode when the budget is full (nothing admitted).
 */
int rio__engine_submit(struct rio_client *c, struct rio__call *call);
/* A request of an admitted call that was being prepared (r->opening) is
 * now: put it on the active list (under mu). */
void rio__engine_admit_locked(struct rio_client *c, struct rio__req *r);
/* Decide request r of an admitted call: err < 0 fails it (the caller could
 * not hash it, a deferred open or lookup failed); 0 ends it with success (a
 * deferred lookup found an empty object). */
void rio__engine_fail_req(struct rio_client *c, struct rio__req *r, int err);
/* Wake the engine (a PUT chunk became ready). */
void rio__engine_kick(struct rio_client *c);
/* Block until every request of call is fenced; runs the call's progress
 * callback, outside mu, when a report is due. */
void rio__engine_wait(struct rio_client *c, struct rio__call *call);
/* Run call's due progress report in this thread, mu held on entry and on
 * return (dropped around the callback). Returns whether it ran one. */
bool rio__call_progress_locked(struct rio_client *c, struct rio__call *call);
/* Pipelined commits: r is fenced or hashed; when it is both, queue it on
 * its call's ready list and wake a worker. Under mu. (A request being
 * prepared is not on the active list, so it is never fenced.) */
void rio__call_ready_locked(struct rio__call *call, struct rio__req *r);
/* Drop the caller's reference; frees the call when the engine is done too. */
void rio__call_release(struct rio_client *c, struct rio__call *call);
/* Free a call's memory (no reference left, or never submitted). */
void rio__call_free(struct rio__call *call);
/* Add the figures of fenced call part to acc (a streaming writer's). */
int rio__call_merge(struct rio__call *acc, const struct rio__call *part);

/* The wait before try n + 1 (n >= 1 failed): backoff_base x 2^(n-1), capped
 * at backoff_cap, with equal jitter from the client's generator (under mu). */
uint64_t rio__backoff_ns_locked(struct rio_client *c, unsigned n);

/*
 * Metadata ops with the engine's retry (meta.c): each try through the
 * transport's wrapper; a failure of a retryable class goes again after a
 * backoff, up to retry_attempts tries, within the deadline and until the
 * cancel token fires (then RIO_EDEADLINE, RIO_ECANCELED). Failed tries are
 * counted in call's retries. Any thread, mu not held; blocks.
 */
struct rio__meta {
    uint64_t deadline_ns;      /* UINT64_MAX: none */
    struct rio_cancel *cancel; /* may be NULL */
    struct rio__call *call;    /* failed tries counted here; may be NULL */
    uint64_t put_if;           /* put_open: the commit's condition (rio__call.put_if) */
    /* call NULL: failed tries counted here instead, by class
     * (RIO_CLASS__COUNT entries, the calling thread's own: no lock); may
     * be NULL. rio_stat_call's and rio_delete_call's stats. */
    uint64_t *retries;
    /* The caller's progress callback (NULL: none), run with (0, 0) in the
     * calling thread every 100 ms while the op waits (rio__meta_tick):
     * rio_stat_call's and rio_delete_call's, which move no chunks, so
     * that a caller acts there as it does in a transfer's wait (the
     * Python binding turns a Ctrl-C into a cancel). */
    void (*progress)(void *arg, uint64_t done, uint64_t total);
    void *progress_arg;
};
/* Bounds of a call's metadata: its deadline and cancel token. */
void rio__meta_for_call(struct rio__meta *m, struct rio__call *call);
/* Bounds of a metadata call with no call options: the client's deadline
 * from now. */
void rio__meta_for_client(struct rio__meta *m, struct rio_client *c);
/* A lookup; mtime_ns not NULL: the object's last-modified time too, where
 * the transport gives it in the same round trip (else 0). max_size: the
 * largest object the caller takes (a GET into a buffer), UINT64_MAX for
 * any; a larger object's descriptor may come without its checksum list
 * (transport.h, lookup_within). */
int rio__meta_lookup(struct rio_client *c, const struct rio__meta *m, const char *key,
                     uint64_t max_size, struct rio_desc *out, int64_t *mtime_ns);
/* The transport's parts_of (rio__t_parts_of) in one try, bounded as a
 * metadata try is (the deadline and cancel token of m): not retried (where
 * the transport cannot say, the GET reads unchecked), but RIO_EDEADLINE or
 * RIO_ECANCELED when those cut it short. */
int rio__meta_parts_of(struct rio_client *c, const struct rio__meta *m, const struct rio_desc *d,
                       uint64_t *part, uint32_t *nparts, char want[48]);
/* The transport's parts_even (rio__t_parts_even) bounded the same way. */
int rio__meta_parts_even(struct rio_client *c, const struct rio__meta *m, const struct rio_desc *d,
                         uint64_t part, uint32_t nparts);
int rio__meta_put_open(struct rio_client *c, const struct rio__meta *m, const char *key,
                       uint64_t size, uint64_t chunk_size, void **upload);
int rio__meta_remove(struct rio_client *c, const struct rio__meta *m, const char *key);
int rio__meta_remove_if(struct rio_client *c, const struct rio__meta *m, const char *key,
                        uint64_t gen);
/* One page (out emptied before each try; empty on error). Unchecked: the
 * caller checks it (listing.c). */
int rio__meta_list(struct rio_client *c, const struct rio__meta *m, const struct rio_list_args *a,
                   struct rio_list_page *out);
int rio__meta_exists(struct rio_client *c, const struct rio__meta *m, const char *const *keys,
                     unsigned n, uint8_t *out);
/* Consumes upload whatever it returns; retried only where the transport
 * has RIO_CAP_COMMIT_RETRY (transport.h). */
int rio__meta_put_commit(struct rio_client *c, const struct rio__meta *m, void *upload,
                         struct rio_desc *d);
void rio__meta_put_commit_many(struct rio_client *c, const struct rio__meta *m, void **uploads,
                               struct rio_desc **ds, int *rets, unsigned n);

/* Why adapt lifted every class's limits to the ceilings (rio_client.adapt_lift). */
enum rio__lift {
    RIO__LIFT_NONE = 0,
    RIO__LIFT_DOWN,    /* a path is down (cooling) */
    RIO__LIFT_PROBED,  /* a path is being probed after its cooldown */
    RIO__LIFT_STALLED, /* a path's oldest op is far past its expected time */
};

/* Where the adaptive concurrency of class dir (0 GET, 1 PUT) stands, into
 * st's adapt_ fields, and the level above it (its paths and depth; 0 when
 * none) for the words of the verdict (engine.c; under mu). */
void rio__adapt_stats_locked(struct rio_client *c, int dir, struct rio_stats *st,
                             unsigned *up_paths, unsigned *up_depth);

/* Fill stats from a finished call (stats.c). */
void rio__stats_fill(struct rio_client *c, struct rio__call *call, struct rio_stats *st);
/* Verdict from filled stats (stats.c); exposed for tests. */
void rio__stats_verdict(struct rio_stats *st);

/* Run-queue delay of every thread of this process so far (Linux schedstat), in ns;
 * 0 when unavailable. */
uint64_t rio__proc_run_delay_ns(void);

/* Current busy time of a path including the running stretch (under mu). */
uint64_t rio__path_busy_now(const struct rio__path *p, uint64_t now);

/* Set rio_error_detail() to each path's last error (engine.c), and why
 * (the store's answer to the last failed op, rio_io.why) when not NULL. */
void rio__engine_path_detail(struct rio_client *c, int last_err, const char *why);
/* r->last_err of a GET whose MD5 did not match its etag (md5_check, no
 * crc_algo), read twice or by a reader: never leaves the library. */
#define RIO__EMD5 (-10998)
/* The same for a GET checked by the store's CRC of the object (crc_algo). */
#define RIO__ECRC (-10997)
/* rio_error_detail() for a request that failed with status, its last
 * attempt's error last_err (RIO_ENOPATH, RIO_ERETRIES: each path's;
 * RIO_ECHECKSUM with RIO__EMD5: the etag's) and what the store said of its
 * last failed op (why, rio__req.why: a 403's code and message); others
 * keep theirs. Caller's thread, mu not held, the request decided
 * (engine.c). */
void rio__engine_req_detail(struct rio_client *c, int status, int last_err, const char *why);
/* r->why where it explains status (r decided with it): after the retries
 * (RIO_ERETRIES, RIO_ENOPATH: the last failure's), or the very failure
 * that decided r; NULL when r ended for another reason (a deadline, a
 * cancel, a check after its ops), which an earlier answer does not say. */
const char *rio__req_why(const struct rio__req *r, int status);
/* Whether r, a GET whose descriptor is in place, is checked by a digest
 * of its bytes, the store's CRC or its MD5 etag (rio__req.md5_check,
 * crc_algo), and set it (engine.c). */
void rio__req_md5_plan(struct rio_client *c, struct rio__req *r);
/* The most parts a GET's MD5s are taken in lanes for (S3's most parts),
 * and the largest part: 16 of 64 MiB are hashed in about 0.2 s, during
 * which the task does not look at a cancel. */
#define RIO__MD5_LANE_PARTS 10000u
#define RIO__MD5_LANE_PART_MAX (64ull << 20)
/* Whether a GET r of an object of size bytes with no chunk checksums could
 * be checked by a digest of its bytes: verification on, a transport whose
 * foreign etags are MD5s, the whole object read (engine.c). */
bool rio__req_md5_may(const struct rio_client *c, const struct rio__req *r, uint64_t size);

/* Resolve options: struct, then URL parameters, then RIO_* environment, then
 * defaults (options.c). */
int rio__options_resolve(const struct rio_options *in, const struct rio_url *u,
                         struct rio_options *out);
/* The same, silent: why (cap bytes) names the first bad option, its URL
 * parameter and environment variable. RIO_EINVAL on a bad one. */
int rio__options_check(const struct rio_options *in, const struct rio_url *u,
                       struct rio_options *out, char *why, size_t cap);
/* The URL options every transport takes (NULL-terminated; options.c). */
extern const char *const rio__core_url_options[];
/* RIO_EINVAL, with one line on stderr and rio_error_detail() naming it
 * (and the closest known name), when u has an option that is neither the
 * core's nor in transport (the scheme's ops->url_options, may be NULL). */
int rio__url_options_known(const struct rio_url *u, const char *scheme,
                           const char *const *transport);
/* Every RIO_* variable the library reads (NULL-terminated; options.c). */
extern const char *const rio__known_env[];
/* Name, on stderr, the RIO_* variables of the environment that look like a
 * typo of one the library reads; once a process, never an error. */
void rio__env_typos(void);

/* ------------------------------------------------------------------------
 * The client layer, between the public calls and the engine: client.c (the
 * client), call.c (one call), batch.c (rio_batch), stream.c (readers and
 * writers). Every function here runs in a caller's or a worker's thread,
 * mu not held unless its name ends in _locked.
 */

/* Threads of the client's meta pool plus the caller: 2 x paths x depth,
 * 8..64 (client.c). */
unsigned rio__meta_threads(const struct rio_client *c);

/* RIO_EINVAL unless key is 1..RIO_KEY_MAX bytes. */
int rio__key_check(const char *key);
/* RIO_EINVAL (and a detail) when opt has flags this library does not know. */
int rio__call_check(const struct rio_call *opt);
/* A call of nreq zeroed requests with opt's flags (checked), token, stats
 * and progress; its deadline is set by rio__call_mark_start. */
int rio__call_new(struct rio_client *c, unsigned nreq, const struct rio_call *opt,
                  struct rio__call **out);
/* The call starts now: t0, CPU clocks, path busy marks, the deadline. */
/* bytes: what the call moves, as far as known at its start (UINT64_MAX when
 * unknown): the process's run-queue wait (cpu_wait_ns) is read only for
 * calls of RIO__CPU_WAIT_MIN_BYTES or more, since it reads /proc once per
 * thread at both ends (hundreds of us with a dozen threads). */
#define RIO__CPU_WAIT_MIN_BYTES (1u << 20)
void rio__call_mark_start(struct rio_client *c, struct rio__call *call, uint64_t bytes);
/* opt's deadline (or the client's) from t0; UINT64_MAX for none. */
uint64_t rio__call_deadline_of(struct rio_client *c, const struct rio_call *opt, uint64_t t0);

/*
 * What a GET's lookup decides: its descriptor, geometry and, for an atomic
 * call, a staging buffer and a chunk list. Built aside and then published
 * into the request (rio__get_publish), so a batch's worker can build it while the
 * engine already walks the request list.
 */
struct rio__get_plan {
    struct rio_desc desc;
    /* An object uploaded in parts, checked by its ETag (rio__t_parts_of):
     * its part size (0: none), part count and ETag */
    uint64_t md5_part;
    uint32_t md5_parts;
    char md5_want[48];
    /* The store's CRC of the whole object, as the lookup left it with the
     * transport (rio__t_full_checksum; ck_algo RIO__CK_NONE: none), kept
     * here: the transport's table may give its slot to another object
     * before the plan is published. */
    int ck_algo;
    uint64_t ck;
    uint64_t size, chunk_size, nchunks;
    uint8_t *staging;
    size_t staging_cap;
    struct rio__chunk *chunks;
};

/* Stats of a call run again: the earlier runs' failed attempts, and the
 * count of runs again; of those, for rio_get, the GETs whose one op found
 * an object of another shape (RIO__ENOTONE), run again once each the
 * usual way: they count in the stats but spend none of RIO__REPLANS_MAX
 * (rio_batch counts rounds instead). */
struct rio__replan_acc {
    uint64_t retries[RIO_CLASS__COUNT];
    uint64_t replans, not_one;
    uint64_t deadline_ns; /* the call's, every run together (rio__replan_begin) */
};

/*
 * Whole requests run again, at most RIO__REPLANS_MAX times each: a GET whose
 * key a PUT replaced while it read (RIO_EGENERATION, when the caller did not
 * ask for one generation) is planned again from a fresh lookup, since its
 * chunks must all come from one generation; a PUT whose upload the server
 * lost before the commit (RIO_ENOUPLOAD: nothing was written) starts over
 * from the caller's buffer, which is still there.
 */
#define RIO__REPLANS_MAX 4u

/* Whether a's re-plans (those RIO__REPLANS_MAX bounds) are all spent. */
static inline bool rio__replans_spent(const struct rio__replan_acc *a)
{
    return a->replans - a->not_one >= RIO__REPLANS_MAX;
}

/* Look r up and plan it into g (r->key, get_cap, expect_gen, prefetch set);
 * on error g holds nothing. */
int rio__get_plan(struct rio_client *c, struct rio__call *call, const struct rio__req *r,
                  struct rio__get_plan *g);
void rio__get_plan_drop(struct rio_client *c, struct rio__get_plan *g);
/* Move plan g into r (under mu when the engine may already see r). */
void rio__get_publish(struct rio__call *call, struct rio__req *r, struct rio__get_plan *g);
/* Set up a GET or PUT request: look it up or open its upload now, or
 * (defer) leave that to the call's workers (r->opening). */
int rio__req_prepare_get(struct rio_client *c, struct rio__call *call, struct rio__req *r,
                         const char *key, void *buf, size_t cap, uint64_t expect_gen, bool defer);
int rio__req_prepare_put(struct rio_client *c, struct rio__req *r, const char *key, const void *buf,
                         size_t len, bool defer);
/* The buffer a GET of key that knows no size asks for first, in one
 * exchange (rio_get_alloc, a reader of a whole object): the size of the
 * last object this client fetched, at least 64 KiB (256 KiB before any), at
 * most a chunk; 0: look it up first (a generation named, RIO_ATOMIC, the
 * last object larger than a chunk, a transport without get_one). */
size_t rio__get_alloc_guess(struct rio_client *c, const char *key, const struct rio_call *opt);
/* The bounds on a chunk size (option chunk). */
#define RIO__CHUNK_MIN 4096ull
#define RIO__CHUNK_MAX (1ull << 30)
/* A PUT's chunk size for len bytes under the target's part rules. */
uint64_t rio__put_chunk_size(struct rio_client *c, uint64_t len);
/* The etag a PUT on c gets (enum rio_etag): what option etag asks for,
 * where the backend stores one, the fast one only where it may be other
 * than an MD5. */
int rio__etag_mode(const struct rio_client *c);
/* Whether a PUT computes the stream MD5 (rio__etag_mode is RIO_ETAG_MD5). */
bool rio__etag_wanted(const struct rio_client *c);
/* Publish an upload; consumes it whatever happens. Sets *gen; out_desc (if
 * any) gets a copy of the descriptor. */
int rio__commit_upload(struct rio_client *c, const struct rio__meta *m, const char *key,
                       void *upload, uint64_t size, uint64_t chunk_size, uint64_t nchunks,
                       uint64_t *xxh, struct rio_md5 *md5, uint64_t *gen,
                       struct rio_desc *out_desc);
/* Commit n PUTs of one call at once where the transport can (call.c). */
void rio__req_commit_many(struct rio_client *c, struct rio__req **rs, unsigned n);
/* Commit PUT request r (its upload, its hashes). */
int rio__req_commit(struct rio_client *c, struct rio__req *r, struct rio_desc *out_desc);
/* Whether r is a PUT that succeeded so far, so it is to be committed (not
 * one sent in one exchange: that one committed itself). */
bool rio__commit_due(const struct rio__req *r);
/* Admit a prepared call: deadlines, latency slots, hand it to the engine. */
int rio__call_start(struct rio_client *c, struct rio__call *call, const struct rio_call *opt);
/* Run a prepared call: admit, hash, wait for the fence (pipelined on the
 * meta pool when it has work for workers), finish. */
int rio__call_run(struct rio_client *c, struct rio__call *call, const struct rio_call *opt,
                  struct rio_desc *out_desc);
/* Fill opt->stats (if asked) from a finished call. */
void rio__call_stats(struct rio_client *c, struct rio__call *call, const struct rio_call *opt);
/* A call that never reached the engine: abort what was opened, free it. */
void rio__call_abandon(struct rio_client *c, struct rio__call *call);
/* Whether a request that ended with result runs again (a re-plan). */
bool rio__replan_due(int type, int64_t result, const struct rio_call *opt);
void rio__replan_note(struct rio__replan_acc *a, const struct rio_call *opt);
/* A call that may run again starts: its deadline, from now, bounds every
 * run together (c may be NULL: no deadline, the call fails anyway). */
void rio__replan_begin(struct rio__replan_acc *a, struct rio_client *c, const struct rio_call *opt);
/* The options of a run again: opt with what is left of the call's
 * deadline in *local. RIO_EDEADLINE when nothing is. */
int rio__replan_opt(const struct rio__replan_acc *a, const struct rio_call *opt,
                    struct rio_call *local);
void rio__replan_stats(const struct rio__replan_acc *a, const struct rio_call *opt);

/* fn(arg, i) for every i < n on this thread and the meta pool (batch.c). */
void rio__meta_parallel(struct rio_client *c, unsigned n, unsigned weight,
                        void (*fn)(void *arg, unsigned i), void *arg);
/* A call worker: prepares deferred requests, commits fenced PUTs, runs due
 * progress reports, until the call is over (batch.c). rio__call_worker is
 * the same as a pool job (arg: the call). */
void rio__call_worker_loop(struct rio_client *c, struct rio__call *call);
void rio__call_worker(void *arg);
/* How many of a call's requests its workers have to do; 0: not pipelined. */
unsigned rio__pipeline_work(const struct rio__call *call, const struct rio_desc *out_desc);

/* The client is being destroyed: end a reader or writer now (stream.c). */
void rio__reader_invalidate(struct rio_reader *rd);
void rio__writer_invalidate(struct rio_writer *w);
/* Make rio_writer_close compare the stream's MD5 (a writer with etag=md5,
 * before any byte is written) with want before it commits: on a mismatch
 * nothing is published, *bad is set and close returns RIO_ECHECKSUM. Spares
 * a caller that must check a claimed MD5 (S3's Content-MD5) a second pass
 * over the bytes. 0, or RIO_ENOTSUP when the writer computes no MD5. */
int rio__writer_expect_md5(struct rio_writer *w, const uint8_t want[16], bool *bad);
/* No stream MD5 for this writer (before any byte is written), whatever
 * the client's etag option: its object's etag is then the one the client
 * gives an object without one. For a copy whose etag comes from elsewhere
 * (the S3 gateway's multipart Complete: its ETag is the parts'), one pass
 * over every byte on one core less. 0, or RIO_EINVAL once bytes were
 * written. */
int rio__writer_no_md5(struct rio_writer *w);
/* Make rio_writer_close call fn(arg, MD5, size) once every byte is written
 * and checked, just before it commits (and not when it fails before): a
 * caller can start what depends on the object's MD5 and size (the S3
 * gateway's metadata record) beside the commit. 0, or RIO_ENOTSUP when the
 * writer computes no MD5. */
int rio__writer_before_commit(struct rio_writer *w,
                              void (*fn)(void *arg, const char md5hex[33], uint64_t size),
                              void *arg);
/* rio_writer_open with chunks of chunk_size bytes rather than the client's
 * (the S3 gateway writes a part as one chunk so that Complete can compose
 * it). size must be known; chunk_size within the engine's bounds (option
 * chunk: 4 KiB to 1 GiB) and the target's part rules, else RIO_EINVAL. */
int rio__writer_open_chunk(struct rio_client *c, const char *key, uint64_t size,
                           uint64_t chunk_size, unsigned slots, const struct rio_call *opt,
                           struct rio_writer **out);

#endif
