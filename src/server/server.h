/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railiod internals: the memory store, connections and workers, metrics and
 * logging. docs/server.md describes the program, docs/protocol.md the wire.
 *
 * Threads: the main thread owns the listeners, signals and the periodic
 * sweep; each worker owns its connections (one epoll per worker, no
 * connection is touched by two threads); the metrics thread answers HTTP.
 * The store is shared and guarded by its own mutex; metrics are atomics.
 */
#ifndef RIO_SERVER_H
#define RIO_SERVER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "core/list.h"
#include "proto/proto.h"
#include "proto/tls.h"
#include "railio.h" /* RIO_KEY_MAX */

/* ------------------------------------------------------------------ logs */

enum { RIO_SRV_LOG_ERROR = 0, RIO_SRV_LOG_WARN, RIO_SRV_LOG_INFO, RIO_SRV_LOG_DEBUG };

extern int rio__srv_log_level;

/* One line to stderr: "TIME LEVEL message". Thread-safe (one write(2)).
 * At most 20 lines a second per call site (log.c). */
void rio__srv_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same without the rate limit: the S3 gateway's line per request. */
void rio__srv_log_every(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Messages a rate limit held back: write their "repeated N times" lines
 * once their window has passed (called periodically), or all of them now
 * (at exit). */
void rio__srv_log_flush(int all);
/* Parse "error|warn|info|debug"; -1 if unknown. */
int rio__srv_log_parse(const char *s);

#define SRV_LOG(lvl, ...)                                                                          \
    do {                                                                                           \
        if ((lvl) <= rio__srv_log_level)                                                           \
            rio__srv_log((lvl), __VA_ARGS__);                                                      \
    } while (0)
#define SRV_ERR(...) SRV_LOG(RIO_SRV_LOG_ERROR, __VA_ARGS__)
#define SRV_WARN(...) SRV_LOG(RIO_SRV_LOG_WARN, __VA_ARGS__)
#define SRV_INFO(...) SRV_LOG(RIO_SRV_LOG_INFO, __VA_ARGS__)
#define SRV_DEBUG(...) SRV_LOG(RIO_SRV_LOG_DEBUG, __VA_ARGS__)
#define SRV_ACCESS(...)                                                                            \
    do {                                                                                           \
        if (RIO_SRV_LOG_INFO <= rio__srv_log_level)                                                \
            rio__srv_log_every(RIO_SRV_LOG_INFO, __VA_ARGS__);                                     \
    } while (0)

/* ----------------------------------------------------------------- store */

/* Per-chunk states of an upload. */
enum { RIO_SRV_CHUNK_EMPTY = 0, RIO_SRV_CHUNK_WRITING = 1, RIO_SRV_CHUNK_DONE = 2 };

/*
 * A published object. Immutable once published except for the LRU links,
 * which the store lock guards. Readers hold a reference while they send from
 * data/xxh; the store holds one while the object is in the map.
 */
struct rio_srv_obj {
    _Atomic int refs;
    char *key; /* NUL-terminated, key_len bytes */
    uint16_t key_len;
    /* A disk READ's buffer (rio__srv_disk_read): its charge is held
     * against --disk-read-memory until it is freed. */
    uint8_t read_buf;
    uint64_t generation, size, chunk_size, nchunks;
    char etag[32];
    uint8_t *xxh;       /* nchunks x u64 LE, the wire form */
    uint8_t *data;      /* size bytes */
    uint64_t expiry_ns; /* CLOCK_MONOTONIC; 0 = never */
    uint64_t charge;    /* bytes counted against the capacity */
    uint64_t data_off;  /* disk index entry: the data's offset in the file */
    int disk_entry;     /* a disk index entry: metadata only, data is NULL */
    uint64_t open_gen;  /* when its upload opened (same counter as generations) */
    int64_t mtime_ns;   /* when it was committed, CLOCK_REALTIME (LIST's modified time) */
    /* Store lock (the disk index's lock for disk index entries): */
    struct rio_srv_obj *hnext;
    struct rio_srv_obj *ileft, *iright; /* the key-ordered index (list.c) */
    uint32_t iprio;
    size_t eslot; /* memory store, with an expiry: its place in the expiry heap + 1 */
    struct rio_list_node lru_node; /* on the store's lru */
    /* Store lock: on the store's committing list between commit_take and
     * publish/drop (tombstones stay while an older upload can commit). */
    struct rio_list_node cnode;
    int committing;
    /* Taken out of the store while still being sent (a READ, GET_ONE or
     * LOOKUP answer holds a reference): its charge stays in that store's
     * held bytes until it is freed. */
    struct rio_srv_store *held_by;
};

/*
 * The objects of a table (the store's, the disk index's) in byte order of
 * key, beside its hash chains and under the same lock, so that a LIST page
 * costs a search per entry, not a walk of every object (list.c). A treap:
 * each object gets a random priority when it goes in, so its depth stays
 * about 2 ln n (expected) whatever the keys and their order.
 */
struct rio_srv_index {
    struct rio_srv_obj *root;
    uint64_t rng;
};
void rio__srv_index_init(struct rio_srv_index *x);
/* o's key must not be in the index already (a table holds one object per key). */
void rio__srv_index_insert(struct rio_srv_index *x, struct rio_srv_obj *o);
/* Takes o out of the index; an object not in it is left alone. */
void rio__srv_index_remove(struct rio_srv_index *x, struct rio_srv_obj *o);
/* The object with the smallest key above key (strict) or not below it, or NULL. */
const struct rio_srv_obj *rio__srv_index_first(const struct rio_srv_index *x, const char *key,
                                               size_t len, int strict);

struct rio_srv_dfile;
struct rio_srv_stage;

/*
 * An upload in progress. Connections writing a chunk hold a reference; the
 * upload table holds one until commit, abort or reclaim. Fields below refs
 * are guarded by the store lock, except that a connection which claimed a
 * chunk (state WRITING) writes that chunk's bytes of data without the lock.
 */
/*
 * A connection receiving a chunk. When another connection claims the same
 * chunk (the client gave up on this attempt and sent it again, e.g. over
 * another rail) while this one has made no progress for a while, the store
 * dooms it; its own worker then drops the connection, which releases the
 * chunk. Only one connection ever writes a chunk's bytes at a time.
 */
struct rio_srv_claim {
    int fd; /* the receiving connection's socket: open while it owns a chunk */
    _Atomic int doomed;
};

struct rio_srv_upload {
    _Atomic int refs;
    uint64_t id;
    char *key;
    uint16_t key_len;
    uint64_t size, chunk_size, nchunks;
    uint64_t ttl_ns;
    uint8_t *data;                /* size bytes, moved into the object on commit; NULL for a
                                   * disk-tier upload too large to cache (chunks are staged
                                   * one by one and written to df) */
    uint8_t *xxh;                 /* nchunks x u64 LE, the verified checksum of each chunk */
    uint8_t *state;               /* nchunks x RIO_SRV_CHUNK_* */
    struct rio_srv_claim **owner; /* nchunks: who receives a WRITING chunk */
    uint64_t ndone;
    uint64_t seq; /* bumped on every chunk state change */
    uint64_t deadline_ns;
    /* Chunks being received (WRITING): their bytes arriving are activity,
     * so --upload-timeout does not reclaim the upload meanwhile (each is
     * bounded by its connection's frame deadline). */
    uint64_t writing;
    /* Removed (aborted, reclaimed) while a chunk still arrives into its
     * buffer: the charge it had then stays in that store's held bytes
     * until the buffer is freed with the last reference. */
    struct rio_srv_store *held_by;
    uint64_t held;
    /* The same for its mapping (counted against UPLOADS_MAPPED_MAX in
     * that store's mapped_held until freed). */
    struct rio_srv_store *map_held_by;
    uint64_t charge;  /* meta + the bytes of the chunks charged */
    uint64_t meta;    /* what the upload is charged from its open */
    uint64_t warm;    /* bytes of a reused mapping not charged yet */
    uint64_t mapped;  /* bytes of data counted in the store's uploads_mapped */
    uint8_t *charged; /* nchunks: 1 when that chunk's bytes are in charge */
    int started;      /* a chunk was claimed */
    int meta_out;     /* its meta left unstarted_meta: it received as many bytes */
    /* Opened with RIO_PROTO_SIZE_UNKNOWN: size and nchunks are the most it
     * may hold (the bound) until its commit says how many chunks it has;
     * every chunk is chunk_size bytes but one, the last, which may be
     * shorter (short_index, short_len once it came). */
    int unknown;
    int short_set;
    uint64_t short_index, short_len;
    uint64_t top;                  /* 1 + the highest index claimed */
    int uncache;                   /* disk tier: no room to cache it, chunks are staged */
    unsigned nconn;                /* connections attached (opened it, or sent it a chunk) */
    struct rio_srv_client *client; /* the client address that opened it */
    int dead;                      /* committed, aborted or reclaimed: no longer in the table */
    uint64_t open_gen;             /* ++next_gen when it opened */
    struct rio_srv_dfile *df;      /* disk tier: the temporary file chunks go to */
    struct rio_srv_stage *stage;   /* chunks being received into staging buffers */
    struct rio_srv_upload *hnext;
};

/* An object table (otab.c), the store's and the disk index's: buckets of
 * hnext chains by the key's hash. While a doubling is in progress the old
 * buckets from mig on still hold their chains (moved a few at a time). */
struct rio_srv_otab {
    struct rio_srv_obj **tab, **old;
    size_t mask, old_mask, mig;
    /* Random per table: which bucket a key goes to cannot be worked out
     * by a client (keys crafted to share a bucket made every lookup of
     * them a walk of one long chain under the table's lock). */
    uint64_t seed;
};

/* nbuckets a power of two; 0 or -ENOMEM. Cleanup frees the buckets, not the
 * objects (rio__srv_otab_each first). */
int rio__srv_otab_init(struct rio_srv_otab *t, size_t nbuckets);
void rio__srv_otab_cleanup(struct rio_srv_otab *t);
/* The slot holding key, or the empty one ending its chain: valid until the
 * next rio__srv_otab_grow. */
struct rio_srv_obj **rio__srv_otab_slot(struct rio_srv_otab *t, const char *key, uint16_t klen);
/* After an insert (nobj: the objects now in it): move a few buckets of a
 * doubling in progress, or start one when the chains grow long (kept as is
 * when memory is short). */
void rio__srv_otab_grow(struct rio_srv_otab *t, size_t nobj);
/* fn on every object, which it may free (the table is not used after). */
void rio__srv_otab_each(struct rio_srv_otab *t, void (*fn)(struct rio_srv_obj *o, void *arg),
                        void *arg);

struct rio_srv_store_stats {
    uint64_t objects, bytes, used, capacity, uploads;
    uint64_t evictions, expirations, reclaimed;
    uint64_t map_cached, map_reused; /* freed mappings kept (bytes) and reused (count) */
};

struct rio_srv_client;

struct rio_srv_store {
    pthread_mutex_t mu;
    struct rio_srv_client **ctab; /* uploads open per client address */
    uint64_t unstarted_meta;      /* metadata of uploads without a chunk yet */
    uint64_t uploads_mapped;      /* address space of uploads' data (UPLOADS_MAPPED_MAX) */
    struct rio_srv_otab tab;
    size_t nobj;
    struct rio_srv_index index; /* tab's objects in key order */
    /* tab's objects that expire, a binary min-heap by expiry_ns: the sweep
     * takes what expired from its top instead of looking at every object. */
    struct rio_srv_obj **eheap;
    size_t eheap_n, eheap_cap;
    size_t eheap_missed; /* objects that expire but are not in it (no memory) */
    struct rio_list lru; /* of objects, by lru_node: head is the most recently used */
    struct rio_srv_upload **utab;
    size_t utab_mask, nup;
    uint64_t capacity, used, bytes;
    uint64_t warm; /* uploads' reused mappings, resident, not charged yet */
    /* Objects replaced, evicted or deleted while still being sent, and
     * uploads removed while a chunk still arrives: their bytes stay
     * allocated until the send (the chunk) ends, and count against the
     * capacity until then (obj_remove_locked, upload_remove_locked). */
    _Atomic uint64_t held;
    /* Address space of uploads removed while a chunk still arrives into
     * their mapping (upload_remove_locked): counted with uploads_mapped. */
    _Atomic uint64_t mapped_held;
    int evict_lru;
    uint64_t default_ttl_ns, upload_timeout_ns;
    uint64_t max_chunks;
    uint64_t next_gen, next_upload;
    uint64_t evictions, expirations, reclaimed;
    int no_ttl;                      /* disk tier: objects never expire */
    struct rio_srv_disk *disk;       /* disk tier: uploads stream to temporary files */
    struct rio_list committing;      /* objects by cnode: taken, not yet published or dropped */
    struct rio_srv_commits *commits; /* recent commits and the upload id key (commits.c) */
};

int rio__srv_store_init(struct rio_srv_store *s, uint64_t capacity, int evict_lru,
                        uint64_t default_ttl_ns, uint64_t upload_timeout_ns, uint64_t max_chunks);
void rio__srv_store_cleanup(struct rio_srv_store *s);
double rio__srv_store_prefault(uint64_t n);
void rio__srv_store_stats(struct rio_srv_store *s, struct rio_srv_store_stats *st);

/* The live object under key with a reference taken (touch: move it to the
 * LRU head), or NULL when there is none or it expired. */
struct rio_srv_obj *rio__srv_store_get(struct rio_srv_store *s, const char *key, uint16_t klen,
                                       int touch);
void rio__srv_obj_unref(struct rio_srv_obj *o);
/* 0 or RIO_ENOTFOUND; gen not 0: only that generation, else
 * RIO_EGENERATION and the object left. */
int rio__srv_store_delete(struct rio_srv_store *s, const char *key, uint16_t klen, uint64_t gen);

/* Object memory: its own mapping for large buffers (freed with the same
 * size), from the heap when rio__srv_data_heap (--prefault) is set. */
extern int rio__srv_data_heap;
uint8_t *rio__srv_data_alloc(uint64_t n);
void rio__srv_data_free(void *p, uint64_t n);

/* Who opens an upload: the client's address (IPv4 mapped into IPv6) and
 * how many uploads one address may have open (0 = no limit). */
struct rio_srv_admit {
    uint8_t addr[16];
    unsigned max_per_client;
};

/* New upload; 0 and its id, or RIO_EINVAL (geometry), -EFBIG (can never
 * fit), -ENOSPC (refuse mode: it does not fit now), RIO_ETHROTTLE (a limit:
 * uploads of this client, metadata of uploads waiting for data; logged),
 * -ENOMEM. Nothing is charged but its metadata: each chunk is charged as it
 * is claimed. attach: the caller's connection is attached to it (see
 * rio__srv_upload_detach); without, only the upload timeout reclaims it. */
int rio__srv_store_open(struct rio_srv_store *s, const struct rio_proto_put_open *m,
                        const struct rio_srv_admit *ad, uint64_t *upload_id, int attach);
/* gone[i] = 1 for each upload ids[i] no longer in the upload table. */
void rio__srv_uploads_gone(struct rio_srv_store *s, const uint64_t *ids, unsigned n, uint8_t *gone);
/* A connection sends u chunks too (u referenced by the caller): one more
 * connection attached to it. */
void rio__srv_upload_attach(struct rio_srv_store *s, struct rio_srv_upload *u);
/* A connection attached to upload id closed: reclaims it at once when no
 * attached connection is left (no one can commit it). 1 when reclaimed. */
int rio__srv_upload_detach(struct rio_srv_store *s, uint64_t id);
/*
 * Claim chunk index of an upload for writing len bytes with checksum xxh.
 * 0: claimed, *u referenced and *dst where the bytes go; 1: that chunk is
 * already stored with the same checksum (discard the bytes, answer 0);
 * RIO_ENOTFOUND, RIO_EPROTO (index/length outside the geometry) or
 * RIO_ETHROTTLE (another connection is writing that chunk now).
 */
int rio__srv_upload_claim(struct rio_srv_store *s, uint64_t id, uint64_t index, uint64_t len,
                          uint64_t xxh, struct rio_srv_claim *me, struct rio_srv_upload **u,
                          uint8_t **dst);
/* The claimed chunk's bytes are in: ok says whether they matched their
 * checksum. Drops the claim's reference. Returns 0, RIO_ECHECKSUM or
 * RIO_ENOTFOUND (the upload went away meanwhile). */
int rio__srv_upload_chunk_done(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t index,
                               uint64_t xxh, int ok);
/* A claimed chunk will not be completed (connection lost). Drops the ref. */
void rio__srv_upload_chunk_abandon(struct rio_srv_store *s, struct rio_srv_upload *u,
                                   uint64_t index);
/* Referenced upload for a commit, with its nchunks and state sequence; NULL
 * when unknown. */
struct rio_srv_upload *rio__srv_upload_get(struct rio_srv_store *s, uint64_t id, uint64_t *seq);
void rio__srv_upload_unref(struct rio_srv_upload *u);
/* Compare n checksums (LE) from chunk first on: sets *missing when a chunk
 * is not stored, *bad when one differs. */
void rio__srv_upload_compare(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t first,
                             uint64_t n, const uint8_t *xxh_le, int *missing, int *bad);
/* An upload of unknown size learns it has n chunks (its commit, once the
 * frame checked out): every chunk claimed is below n, the short one (if
 * any) is n - 1; size and nchunks become the object's, the memory beyond
 * it is given back. 0, RIO_EINVAL (chunks beyond n, or a short chunk that
 * is not the last), RIO_ENOTFOUND (gone). Nothing for a known size. */
int rio__srv_upload_finalize(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t n);
/* Publish u (all chunks compared). Returns 0 and the new generation, or
 * RIO_ENOTFOUND, RIO_EINVAL (missing chunk), RIO_ECHECKSUM (list differs or
 * a chunk changed since seq). if_gen (0: none): publish only if the key's
 * object has that generation (RIO_PROTO_IF_ABSENT: only if it has none),
 * else RIO_EGENERATION and the upload is dropped. Does not drop the
 * caller's reference. */
int rio__srv_store_commit(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t seq,
                          const char etag[32], int missing, int bad, uint64_t if_gen,
                          uint64_t *generation);
/*
 * The two halves of rio__srv_store_commit, for the disk tier: take checks u
 * like commit and turns it into an unpublished object *out (generation
 * assigned, charge kept, upload gone); publish puts it in the map unless a
 * newer generation of the key is there already (then it is dropped); drop
 * releases an object that will not be published. Both consume the ref.
 */
int rio__srv_store_commit_take(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t seq,
                               const char etag[32], int missing, int bad, uint64_t if_gen,
                               struct rio_srv_obj **out, struct rio_srv_dfile **df);
void rio__srv_store_publish(struct rio_srv_store *s, struct rio_srv_obj *o);
void rio__srv_store_drop(struct rio_srv_store *s, struct rio_srv_obj *o);
/* o was published on the disk tier without its bytes in memory (an empty
 * object, or one too large to cache): released as drop does, and an older
 * generation of its key cached in memory goes too, so that lookups find
 * o's on disk instead of serving the version it replaced. */
void rio__srv_store_published_uncached(struct rio_srv_store *s, struct rio_srv_obj *o);
/* Whether a commit of o's key taken before o (a lower generation) is still
 * under way: a conditional commit fails on it, as the memory store's does
 * (rio__srv_store_commit), so that it never passes on a state that commit
 * is about to change. */
int rio__srv_store_committing_before(struct rio_srv_store *s, const struct rio_srv_obj *o);
/* next_gen = max(next_gen, gen): generations stay above recovered ones. */
void rio__srv_store_gen_floor(struct rio_srv_store *s, uint64_t gen);
/* ------------------------------------------------ commits.c: idempotent commits */

/* Commits remembered for a retried PUT_COMMIT: the last RIO_SRV_COMMITS_MAX
 * (a power of two), each for RIO_SRV_COMMITS_AGE_NS. */
#define RIO_SRV_COMMITS_MAX (1u << 16)
#define RIO_SRV_COMMITS_AGE_NS (600ull * 1000000000ull)

struct rio_srv_commits;
/* The memory and a fresh random upload id key; 0 or -errno. */
int rio__srv_commits_new(struct rio_srv_commits **out);
void rio__srv_commits_free(struct rio_srv_commits *c);
/* The upload id of counter value n: a keyed permutation (never repeats). */
uint64_t rio__srv_commits_id(const struct rio_srv_commits *c, uint64_t n);
/* Remember that upload id became generation (pending: not applied yet).
 * Store lock held. */
void rio__srv_commits_put_locked(struct rio_srv_commits *c, uint64_t id, uint64_t generation,
                                 uint64_t nchunks, int pending, uint64_t now);
/* A PUT_COMMIT for an upload no longer in the table: 0 and the generation
 * it became, RIO_ETHROTTLE while it is being applied, RIO_EPROTO for
 * another nchunks, RIO_ENOTFOUND when it was never committed (or long
 * ago). Takes the store lock. */
int rio__srv_store_recall(struct rio_srv_store *s, uint64_t id, uint64_t nchunks,
                          uint64_t *generation);
/* The disk tier applied (status 0) or failed a commit taken pending. */
void rio__srv_store_settle(struct rio_srv_store *s, uint64_t id, uint64_t nchunks,
                           uint64_t generation, int status);

/* ++next_gen: a point in the order of upload opens and generations. */
uint64_t rio__srv_store_tick(struct rio_srv_store *s);
/* The lowest open_gen of an upload of key that can still commit (open, or
 * taken and not yet published or dropped), or of one opened from now on: a
 * DELETE of key needs a tombstone only while one of them opened before it. */
uint64_t rio__srv_store_min_open_key(struct rio_srv_store *s, const char *key, uint16_t klen);
/* fn(arg, key, key_len, open_gen) for every upload that can still commit
 * (open, or taken and not yet published or dropped), under the store's
 * lock: fn must not call the store. */
void rio__srv_store_each_open(struct rio_srv_store *s,
                              void (*fn)(void *arg, const char *key, uint16_t klen,
                                         uint64_t open_gen),
                              void *arg);
/* 0 or RIO_ENOTFOUND. */
int rio__srv_store_abort(struct rio_srv_store *s, uint64_t id);
/* Drop expired objects and uploads idle past their deadline. */
void rio__srv_store_sweep(struct rio_srv_store *s, uint64_t now_ns);

/* ------------------------------------------------------------ listing */

/* A LIST page being chosen (list.c): the request, the sorted selection
 * (max + 1 entries: the extra one says the page is not the last) and the
 * encoded answer. */
#define RIO_SRV_LIST_DEFAULT 1000u /* max_keys 0 */
struct rio_srv_list_sel {
    const char *key;             /* the object's key (borrowed under the table's lock) */
    uint16_t len;                /* shown length: a common prefix ends at its '/' */
    const struct rio_srv_obj *o; /* NULL for a common prefix */
};
struct rio_srv_lister {
    struct rio_proto_list m; /* borrowed strings: the request's body */
    unsigned max;            /* entries per page, clamped */
    uint64_t now;
    struct rio_srv_list_sel *sel; /* max + 1 entries, in order */
    unsigned n;
    char next[RIO_KEY_MAX]; /* the first key past a common prefix */
    uint8_t *out;           /* the answer's control part, cap bytes */
    size_t cap, out_len;
};
/* Clamp and allocate (before any lock). 0 or -ENOMEM. */
int rio__srv_lister_init(struct rio_srv_lister *l, const struct rio_proto_list *m);
void rio__srv_lister_cleanup(struct rio_srv_lister *l);
/* Under the lock of an object table: choose the page among the objects of
 * its index and encode it into out (out_len). */
void rio__srv_list_index_locked(struct rio_srv_lister *l, const struct rio_srv_index *x);
/* One page of the memory store's published objects (never an upload). */
void rio__srv_store_list(struct rio_srv_store *s, struct rio_srv_lister *l);

/* ------------------------------------------------------------ disk tier */

/*
 * The disk tier (disk.c, docs/server.md "Disk tier"): one file per object
 * version in the data directory. An upload streams its chunks into a
 * temporary file as they arrive; its commit (header, fsync with --sync,
 * rename, directory fsync) runs on a commit thread, not on a worker. An
 * index key -> metadata (a rio_srv_obj with data == NULL and data_off set)
 * is kept in memory. A DELETE leaves a tombstone (a file with --sync) that
 * every upload opened before it loses to.
 */
struct rio_srv_disk;

struct rio_srv_disk_stats {
    uint64_t objects, bytes;
    uint64_t writes, write_errors, write_ns, reads, read_bytes, read_errors, deletes;
    uint64_t corrupt, recovered, discarded, superseded;
    /* READ buffers: alive now (bytes), READs waiting for room now, and
     * READs that waited, ever. */
    uint64_t read_buf_bytes, read_buf_waiting, read_buf_waits;
    uint64_t tombstones;
};

/* The records' layout (disk.c describes it). */
#define RIO_SRV_DISK_MAGIC "RIOOBJ1\n"
#define RIO_SRV_DISK_TMAGIC "RIOTMB1\n"
#define RIO_SRV_DISK_HDR_FIXED 88u
#define RIO_SRV_DISK_TOMB_FIXED 24u
#define RIO_SRV_DISK_ALIGN 4096u
/* The most chunks a PUT of unknown size may hold on the disk tier: its
 * file's header is laid out for that many before the data (the part the
 * object does not use stays a hole), so data_off may be larger than its
 * header needs, up to what this many chunks' checksums take. */
/* The highest generation a record may hold: 2^40 below the end of the
 * range (generations are nanoseconds of the wall clock and more, so this
 * is centuries away; only a forged record gets there). */
#define RIO_SRV_DISK_GEN_MAX (UINT64_MAX - (1ull << 40))
#define RIO_SRV_DISK_STREAM_CHUNKS 65536u
/* The most chunks a record of any railiod holds: what a LOOKUP's body
 * carries at the largest --max-body. Start-up checks records against this,
 * not against its own --max-body: a record with more chunks than this
 * start can serve is intact, and is left as it is (not served). */
#define RIO_SRV_DISK_REC_CHUNKS_MAX ((RIO_PROTO_BODY_CAP - 64u) / 8u)

/* An object file's header length (0 when key_len or nchunks is out of
 * bounds), and data_off for it. */
uint64_t rio__srv_disk_header_len(uint64_t key_len, uint64_t nchunks, uint64_t max_chunks);
uint64_t rio__srv_disk_round_up(uint64_t v);
/* The largest data_off a file of nchunks may have: a PUT of unknown size
 * laid out for RIO_SRV_DISK_STREAM_CHUNKS. */
uint64_t rio__srv_disk_data_off_max(uint64_t key_len, uint64_t nchunks);

/* One record of the data directory as parsed (pointers into the buffer). */
struct rio_srv_disk_rec {
    uint16_t key_len;
    uint64_t generation, size, chunk_size, nchunks, data_off, header_len;
    const char *key;
    const char *etag;   /* 32 bytes */
    const uint8_t *xxh; /* nchunks x u64 LE */
    const char *why;    /* what failed */
};

/*
 * Check an object file's header: buf holds its first avail bytes, the file
 * has file_size bytes. 0 (r filled), 1 when avail is less than
 * r->header_len (read that much and call again), or RIO_ECHECKSUM with
 * r->why. Never reads past avail; allocates nothing.
 */
int rio__srv_disk_parse_record(const uint8_t *buf, size_t avail, uint64_t file_size,
                               uint64_t max_chunks, struct rio_srv_disk_rec *r);
/* Check a tombstone file (all n bytes of it): 0 (key, key_len, generation
 * set) or RIO_ECHECKSUM with r->why. */
int rio__srv_disk_parse_tomb(const uint8_t *buf, size_t n, struct rio_srv_disk_rec *r);
/* Write an object file's header for r (key_len, generation, size,
 * chunk_size, nchunks, data_off, header_len from rio__srv_disk_header_len,
 * key, etag, xxh) into buf[0..header_len), its checksum last. */
void rio__srv_disk_enc_record(uint8_t *buf, const struct rio_srv_disk_rec *r);
/* Write key's tombstone for gen into buf (RIO_SRV_DISK_TOMB_FIXED + klen + 8
 * bytes); returns its length. */
size_t rio__srv_disk_enc_tomb(uint8_t *buf, const char *key, uint16_t klen, uint64_t gen);
/* The record checksum: xxh3 of buf[0..len-8) into its last 8 bytes. */
void rio__srv_disk_seal(uint8_t *buf, size_t len);

/* Open (create) dir, scan it, recover. *max_gen: the highest generation
 * found (0 when none). Commits publish into store. 0 or -errno (logged). */
int rio__srv_disk_open(struct rio_srv_disk **out, const char *dir, int sync, uint64_t max_chunks,
                       struct rio_srv_store *store, uint64_t *max_gen);
/* Stops the commit threads first (rio__srv_disk_pool_stop). */
void rio__srv_disk_close(struct rio_srv_disk *d);

/* An upload's temporary file: created with the upload, written chunk by
 * chunk at data_off + offset (any thread, pwrite), turned into the object's
 * file by a commit, or removed by discard. */
int rio__srv_dfile_new(struct rio_srv_disk *d, const char *key, uint16_t klen, uint64_t nchunks,
                       struct rio_srv_dfile **out);
int rio__srv_dfile_write(struct rio_srv_dfile *f, uint64_t off, const uint8_t *p, uint64_t n);
void rio__srv_dfile_discard(struct rio_srv_dfile *f);

/*
 * A commit handed to the commit threads: o (from rio__srv_store_commit_take,
 * with data when it is to be cached) and df are consumed. done runs on a
 * commit thread once the object is durable (with --sync) and published, or
 * the commit failed (status < 0); status 0 also when a newer version or a
 * DELETE of the key that came after the upload opened superseded it.
 */
struct rio_srv_commit {
    struct rio_srv_commit *next; /* the queue's */
    struct rio_srv_obj *o;
    struct rio_srv_dfile *df;
    int status;
    uint64_t generation;
    /* The commit's condition (0: none): the key's object is this generation,
     * or RIO_PROTO_IF_ABSENT: it has none; checked under the key's lock just
     * before the file is published, RIO_EGENERATION otherwise. */
    uint64_t if_gen;
    void (*done)(struct rio_srv_commit *j);
    /* A READ instead (rio__srv_disk_read_submit): e (a referenced index
     * entry, consumed), the range; buf and skip as rio__srv_disk_read. */
    int read;
    struct rio_srv_obj *e, *buf;
    uint64_t off, len, skip;
};

/* Start n commit threads. 0 or -errno. */
int rio__srv_disk_pool_start(struct rio_srv_disk *d, unsigned n);
/* Queue j (never blocks). */
void rio__srv_disk_submit(struct rio_srv_disk *d, struct rio_srv_commit *j);
/* Queue a READ job for the READ threads (never blocks): done runs there
 * once the range is read and verified (status) or failed. */
void rio__srv_disk_read_submit(struct rio_srv_disk *d, struct rio_srv_commit *j);
/* Run the commits already queued to their end, then join the threads. */
void rio__srv_disk_pool_stop(struct rio_srv_disk *d);
/* The commit itself, on the calling thread (the pool's, or a test's). */
void rio__srv_disk_commit(struct rio_srv_disk *d, struct rio_srv_commit *j);

/* The index entry of key, referenced (data == NULL), or NULL. */
struct rio_srv_obj *rio__srv_disk_get(struct rio_srv_disk *d, const char *key, uint16_t klen);
/* Read [off, off+len) of entry e (bounds checked by the caller) into a new
 * referenced buffer object *buf, whose data + *skip is the range; the
 * chunks it covers are verified against their checksums. 0, RIO_ENOTFOUND,
 * RIO_EGENERATION (replaced meanwhile), -EIO (corrupt) or -errno. */
int rio__srv_disk_read(struct rio_srv_disk *d, const struct rio_srv_obj *e, uint64_t off,
                       uint64_t len, struct rio_srv_obj **buf, uint64_t *skip);
#define RIO_SRV_DISK_READ_MEMORY (1ull << 30) /* --disk-read-memory's default */
/* The server-wide bound on disk READs' buffers (--disk-read-memory): a
 * READ thread waits, first come first served, until its buffer fits
 * beside those alive (one alone always fits). 0 = no bound. */
void rio__srv_disk_read_budget(struct rio_srv_disk *d, uint64_t bytes);
/* Free a buffer rio__srv_disk_read made (its last reference gone): its
 * bytes go back to the bound. */
void rio__srv_disk_read_buf_free(struct rio_srv_obj *b);
/* DELETE key from the memory store, the index and the disk (durably with
 * --sync), leaving a tombstone while an upload opened before it can still
 * commit. 0, RIO_ENOTFOUND or -errno. */
/* if_gen (0: none): remove only while the key's object is that generation
 * (RIO_EGENERATION when another, RIO_ENOTFOUND when none), decided under
 * the key's lock with the removal. */
int rio__srv_disk_delete(struct rio_srv_disk *d, const char *key, uint16_t klen, uint64_t if_gen);
/* Drop the tombstones no upload can lose to any more (periodic). */
void rio__srv_disk_reclaim(struct rio_srv_disk *d);
void rio__srv_disk_stats(struct rio_srv_disk *d, struct rio_srv_disk_stats *st);
/* One page of the disk index (every object of the disk tier). */
void rio__srv_disk_list(struct rio_srv_disk *d, struct rio_srv_lister *l);

/* --------------------------------------------------------------- metrics */

/* Status classes counted per opcode. */
enum {
    RIO_SRV_ST_OK = 0,
    RIO_SRV_ST_PROTO,
    RIO_SRV_ST_NOTFOUND,
    RIO_SRV_ST_GENERATION,
    RIO_SRV_ST_CHECKSUM,
    RIO_SRV_ST_INVAL,
    RIO_SRV_ST_ACCES,
    RIO_SRV_ST_NOSPC,
    RIO_SRV_ST_FBIG,
    RIO_SRV_ST_THROTTLE,
    RIO_SRV_ST_NOTSUP,
    RIO_SRV_ST_NOMEM,
    RIO_SRV_ST_OTHER,
    RIO_SRV_ST__COUNT
};

#define RIO_SRV_MAX_LISTENERS RIO_PROTO_MAX_RAILS

#define RIO_SRV_SVC_BUCKETS 16

struct rio_srv_metrics {
    _Atomic uint64_t handshake_timeouts, handshake_evictions;
    _Atomic uint64_t auth_throttled;
    _Atomic uint64_t uploads_closed; /* reclaimed when their connections closed */
    _Atomic uint64_t req[RIO_OP__MAX + 1][RIO_SRV_ST__COUNT];
    _Atomic uint64_t op_bytes_in[RIO_OP__MAX + 1], op_bytes_out[RIO_OP__MAX + 1];
    _Atomic int64_t inflight_requests, inflight_bytes;
    _Atomic int64_t conns_open;
    _Atomic uint64_t conns_accepted, conns_rejected;
    _Atomic uint64_t rejected_frames;
    _Atomic uint64_t timeouts_progress, timeouts_idle;
    _Atomic uint64_t auth_failures;
    _Atomic uint64_t chunk_checksum_errors;
    _Atomic uint64_t listener_in[RIO_SRV_MAX_LISTENERS], listener_out[RIO_SRV_MAX_LISTENERS];
    _Atomic uint64_t listener_conns[RIO_SRV_MAX_LISTENERS];
    /* Service times by opcode (request complete to answer queued), counts
     * per bucket (metrics.c's bounds; the last: above them all), and
     * their sum in microseconds. */
    _Atomic uint64_t svc[RIO_OP__MAX + 1][RIO_SRV_SVC_BUCKETS + 1];
    _Atomic uint64_t svc_us_sum[RIO_OP__MAX + 1];
};

/* Count a request of opcode op served in ns (metrics.c). */
void rio__srv_svc_note(struct rio_srv_metrics *m, int op, uint64_t ns);
int rio__srv_status_class(int status);
const char *rio__srv_status_name(int cls);

/* ---------------------------------------------------------------- server */

struct rio_srv_listener {
    int fd;
    int index;
    struct sockaddr_storage addr; /* as bound (the real port when 0 was asked) */
    socklen_t addrlen;
    char name[RIO_PROTO_ADDR_MAX + 1]; /* "host:port" as bound */
    int wildcard;                      /* bound to 0.0.0.0 / :: */
};

struct rio_srv_worker;

/*
 * The --auth-token-file token (token.c). SIGHUP swaps in a new key under mu;
 * an AUTH takes a reference to the key in force, once, and makes every MAC
 * of its handshake with it (rio__srv_token_get, then rio__srv_key_put).
 */
#define RIO_SRV_TOKEN_MAX 4096
struct rio_srv_key {
    atomic_uint refs;
    size_t len;
    uint8_t bytes[];
};
struct rio_srv_token {
    pthread_mutex_t mu;
    struct rio_srv_key *key; /* under mu, never NULL */
};
int rio__srv_token_new(struct rio_srv_token **out, const uint8_t *bytes, size_t len);
/* 1 if the key changed, 0 if it is the same, < 0 on error (the old one stays). */
int rio__srv_token_set(struct rio_srv_token *t, const uint8_t *bytes, size_t len);
struct rio_srv_key *rio__srv_token_get(struct rio_srv_token *t);
void rio__srv_key_put(struct rio_srv_key *k);
void rio__srv_token_free(struct rio_srv_token *t);

struct rio_srv_config {
    uint64_t memory;
    int evict_lru;
    uint64_t ttl_ns;
    struct rio_srv_token *token; /* NULL without --auth-token-file; set before the workers start */
    unsigned threads;
    unsigned max_conns;
    uint64_t max_inflight_bytes;
    /* --disk-read-memory: the disk READs' buffers, server-wide; 0 = not
     * given (RIO_SRV_DISK_READ_MEMORY). */
    uint64_t disk_read_memory;
    uint32_t max_body;
    uint32_t max_depth;
    uint64_t idle_timeout_ns;
    uint64_t progress_timeout_ns;
    uint64_t min_rate; /* bytes/s a frame must at least move at */
    uint64_t upload_timeout_ns;
    uint64_t drain_timeout_ns;
    const char *data_dir;        /* disk tier on when set */
    int sync;                    /* --sync: acknowledge PUTs once durable */
    int prefault;                /* --prefault: touch --memory at start */
    unsigned max_uploads_conn;   /* uploads one connection may have open */
    unsigned max_uploads_client; /* uploads one client address may have open */
    unsigned max_handshakes;     /* connections still in their handshake */
    uint64_t handshake_timeout_ns;
    unsigned auth_fail_burst; /* failed AUTHs per address before throttling (1/s after) */
};

struct rio_srv {
    struct rio_srv_config cfg;
    SSL_CTX *tls; /* --tls-cert: every data listener speaks TLS only */
    struct rio_srv_store store;
    struct rio_srv_disk *disk; /* NULL: memory only */
    int test_no_stream;        /* RAILIOD_TEST_NO_STREAM_PUT=1: HELLO offers no stream PUT */
    int test_no_put_one;       /* RAILIOD_TEST_NO_PUT_ONE=1: as a server without PUT_ONE */
    int test_no_get_one;       /* RAILIOD_TEST_NO_GET_ONE=1: as a server without GET_ONE */
    int test_no_svc_time;      /* RAILIOD_TEST_NO_SVC_TIME=1: as a server without service times */
    struct rio_srv_metrics m;
    struct rio_srv_listener lis[RIO_SRV_MAX_LISTENERS];
    unsigned nlis;
    struct rio_srv_worker **workers;
    unsigned nworkers;
    _Atomic int draining; /* stop reading new requests, close idle connections */
    _Atomic int stopping; /* close everything now */
    uint64_t start_ns;
    /* Admission (conn.c): connections still in their handshake, oldest
     * first; guarded by admit_mu. */
    pthread_mutex_t admit_mu;
    struct rio_list hs; /* of struct conn, by hs_node */
};

/* Workers (conn.c). */
int rio__srv_workers_start(struct rio_srv *srv);
/* Room for one more connection fd (main thread, before dispatch): drops a
 * connection still in its handshake when the handshake budget or the total
 * is full (the oldest; the oldest of fd's own address when that address
 * holds a quarter of the budget). 0: admit; -1: refuse (every slot is
 * authenticated). */
int rio__srv_admit(struct rio_srv *srv, int fd);
/* Hand an accepted, configured socket to a worker (round robin). Takes fd. */
void rio__srv_dispatch(struct rio_srv *srv, int fd, int listener);
/* Wake every worker (drain or stop changed). */
void rio__srv_workers_wake(struct rio_srv *srv);
/* Connections still open in all workers. */
unsigned rio__srv_workers_conns(struct rio_srv *srv);
/* Join and free the workers (after stopping is set). */
void rio__srv_workers_join(struct rio_srv *srv);

/* Metrics HTTP endpoint (metrics.c). */
int rio__srv_metrics_start(struct rio_srv *srv, int fd);
void rio__srv_metrics_stop(void);
/* Render the Prometheus text into buf; returns its length (truncated to cap). */
size_t rio__srv_metrics_render(struct rio_srv *srv, char *buf, size_t cap);

/* "host:port" of a socket address. */
void rio__srv_addr_name(const struct sockaddr *sa, char *out, size_t cap);

#endif
