/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rados://POOL: objects striped into chunk objects in a Ceph cluster through
 * librados aio. The layout (specified byte by byte in docs/rados.md):
 *
 *   head   POOL, namespace "", object KEY: a text descriptor (size, chunk
 *          size, count, per-chunk xxh3, etag, generation, every chunk's
 *          pool and name in source order) plus the xattr rio.gen holding the
 *          generation. Written last, in one atomic write op guarded by a
 *          compare on rio.gen, so a reader sees the old head or the new one
 *          and two racing PUTs of one key both know what they replaced.
 *   chunks namespace "rio.chunk" of the chunk's pool, object
 *          "KEY.GGGGGGGGGGGGGGGG.IIIIIIIIIIIIIIII" (generation, index in hex).
 *          A generation is random per PUT, so concurrent PUTs never share a
 *          chunk object, and a READ that names a generation whose chunks were
 *          removed gets ENOENT, reported as RIO_EGENERATION.
 *
 * Paths: each path has one ioctx per pool on a cluster connection (rados_t:
 * its own messenger and sockets); path p uses connection p mod nconns, so
 * a chunk's remove follows its write on the connection that carried it.
 * depth is the engine's. Chunk ops are
 * librados aio; their completion callbacks (librados threads) push the op on
 * a done queue and signal reap, which calls complete() in the engine thread.
 * librados cannot abort an op it has sent: cancel marks it and it completes
 * within the op timeout (rados_osd_op_timeout, set at connect), so a dead
 * OSD ends in -ETIMEDOUT, never a hang.
 *
 * Metadata (lookup, put_open, put_commit, put_abort, remove) is synchronous
 * on path 0's connection and thread-safe. A lookup caches where the head put
 * each chunk (pool per chunk) so the READs it precedes can find them.
 *
 * Files (docs/internals/rados.md): cluster.c (options, connections, pools,
 * open/close), data.c (chunk ops: submit, reap, cancel), cache.c (placement
 * cache), commit.c (head read, build and swap; put_commit), meta.c (lookup,
 * put_open, put_abort, remove, chunk removal), compose.c (an object
 * made of other objects' chunks: head version 2), list.c (list and exists:
 * head summaries read in parallel), fsck.c (the sweep of orphan chunk
 * objects, and the key index's check), index.c (the pool's key index:
 * marker, entries, what writers keep), head.c (the head's text format, no
 * librados).
 *
 * Locks: t->mu guards the op pool, the done queue and the counters; t->cache_mu
 * the placement cache; t->pools_mu the pool table (readers take a snapshot of
 * the count; entries are immutable once published). No lock is held while
 * calling into librados for a chunk op or while calling complete().
 */
#ifndef RIO_TRANSPORT_RADOS_INTERNAL_H
#define RIO_TRANSPORT_RADOS_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <rados/librados.h>

#include "core/list.h"
#include "railio.h"
#include "transport/contract.h"
#include "transport/opool.h"
#include "transport/rados.h"
#include "transport/rados/head.h"
#include "transport/rados/itext.h"
#include "transport/transport.h"

#define MAX_POOLS 32 /* pools one transport knows (configured + seen in heads) */
#define MAX_HEAD_POOLS RIO_RADOS_MAX_HEAD_POOLS
#define SLAB_OPS 64u        /* chunk ops allocated at a time */
#define CACHE_BUCKETS 1024u /* placement cache: hash buckets */
#define CACHE_MAX 4096u     /* placement cache: entries kept (LRU) */
#define HEAD_READ0 (64u << 10)
#define COMMIT_TRIES 64
#define REMOVE_WINDOW 64 /* aio removes in flight at once */
/* Every write and removal this transport sends: to a cluster or pool
 * marked full, librados otherwise holds a write until its op timeout (a
 * PUT ended after minutes as "timed out", and no removal could free space);
 * with it a write fails at once with -ENOSPC (-EDQUOT over a quota) and a
 * removal goes through. */
#define WOP_FLAGS LIBRADOS_OPERATION_FULL_TRY
#define NAME_MAX_LEN RIO_RADOS_NAME_MAX
#define UPLOAD_MAGIC 0x7261646f7375706cull
#define SHUFFLE_HOLD 4u /* shuffle knob: completions held before delivery */
#define SHUFFLE_WAIT_NS 20000000ull
#define DEF_PATHS 4u        /* paths when the options give none (over one connection) */
#define LIST_SCAN_MAX 8192u /* list: objects examined per page (list_scan=) */
#define IDX_MARKS 256u      /* key index: committed marks in flight, unwaited */
#define MISSING_MAX 16u     /* chunk READs that found nothing, remembered (a ring) */

extern const struct rio_transport_ops rio__rados_ops;

/* ---------------------------------------------------------------- types */

struct rpool {
    char *name;
    rados_ioctx_t io[RIO_MAX_PATHS]; /* per path, namespace RIO_RADOS_CHUNK_NS */
};

struct rupload {
    uint64_t magic;
    /* Under t->mu: when a WRITE of it last landed (put_open at first), and
     * the longest time it went without one (the commit's stall check). */
    uint64_t last_write_ns, max_gap_ns;
    char *key;
    uint64_t generation;
    uint64_t size, chunk_size, nchunks; /* streaming: size and nchunks set at commit */
    bool stream;                        /* opened with RIO_SIZE_UNKNOWN */
    unsigned npools;
    uint8_t pools[MAX_HEAD_POOLS]; /* transport pool indices, chunk i -> pools[i % npools] */
    /* Under t->mu while the PUT runs (submit and reap may run in different
     * threads, and a streaming upload grows the arrays at submit); the
     * caller's alone after the fence. */
    uint16_t *paths_tried; /* per chunk: bit p set once a WRITE went out on path p */
    uint8_t *done;         /* per chunk: a WRITE completed successfully */
    uint64_t cap;          /* entries allocated in paths_tried and done */
    uint64_t hi;           /* highest index a WRITE went out for + 1 */
    uint64_t max_done;     /* highest index completed + 1 (reorder counter) */
    /* Streaming: the one chunk shorter than chunk_size (the last), if seen. */
    uint64_t short_index, short_len;
    /* The head under the key, read at put_open while the chunks are written
     * (pre_comp NULL: not sent): the commit's first guess at the head it
     * replaces, checked by the swap's guard, so that a PUT's commit costs
     * one round trip instead of two. Freed with the upload. */
    rados_completion_t pre_comp;
    char *pre_buf;
    /* put_expect's condition (0: none): checked against the head the
     * commit's guarded swap replaces (rio__rados_head_swap_pre). */
    uint64_t put_if;
    /* The key index's entry (index.c), sent at put_open beside the chunks
     * when the pool has an index (idx_comp NULL: not in flight); idx_sent:
     * an entry may exist, for the discard to take out; swap_tried: the
     * commit went as far as the swap, whose outcome may be unknown. */
    rados_completion_t idx_comp;
    rados_write_op_t idx_op;
    uint64_t idx_at_ns;
    char idx_val[RIO_RADOS_IDX_VAL_MAX]; /* the entry's value as written */
    bool idx_sent, idx_put, swap_tried;
};

struct rop {
    struct rio_io *io;
    struct rados_transport *t;
    rados_completion_t comp;
    rados_write_op_t wop; /* a WRITE's, released with comp */
    rados_read_op_t rop;  /* a READ's (stat + read), released with comp */
    uint64_t rsize;       /* a READ's: the chunk object's length */
    size_t rbytes;        /* a READ's: bytes it read */
    time_t rmtime;
    int rstat_rv, rread_rv;
    struct rupload *up;
    int forced; /* fail_chunk: the error to report instead of the result */
    bool cancelled;
    bool placed;                /* a READ whose object the head's placement named (the cache's) */
    uint64_t t_done;            /* shuffle knob: when it completed */
    struct rop *next;           /* shuffle knob's held list */
    struct rio_list_node dnode; /* on the done queue */
};

struct centry {
    struct centry *hnext;     /* hash chain */
    struct rio_list_node lru; /* on the LRU list, most recent first */
    uint64_t hash, generation, nchunks;
    unsigned npools;
    uint8_t map[MAX_HEAD_POOLS]; /* head pool index -> transport pool index */
    uint8_t *chunk_pool;         /* per chunk head pool index; NULL: chunk i in i % npools */
    char **names;                /* version 2 heads: per chunk object name (in name_buf) */
    char *name_buf;
    size_t keylen;
    char key[];
};

/* A chunk READ that found nothing although the head it was read from
 * named its object (cache.c): the next lookup of key that finds generation
 * still under it checks whether that object is really gone. */
struct rmissing {
    bool used;
    uint64_t generation, index;
    size_t keylen;
    char key[RIO_KEY_MAX + 1];
};

/* A sorted listing's names (list.c): every name under prefix, rolled up
 * into common prefixes with delim, sorted, each once. */
#define LIST_SNAPS 4
struct lsnap {
    char prefix[RIO_KEY_MAX + 1];
    bool delim;
    uint64_t at; /* rio__now_ns when scanned */
    size_t n;
    char **names; /* into arena */
    char *arena;
};

struct rados_transport {
    struct rio_transport base; /* first: the engine's handle */
    /* Tests only (rio__rados_test_after_head_read): run once by a lookup
     * right after it read the head, then cleared. NULL otherwise. */
    void (*after_head_read)(void *arg);
    void *after_head_read_arg;
    rados_t cl[RIO_MAX_PATHS]; /* per path; cl[p] == cl[p % nconns] */
    unsigned nconns;           /* distinct connections: cl[0..nconns) */
    rados_ioctx_t head_io;     /* path 0, the URL's pool, namespace "" */
    uint64_t max_object;
    uint64_t abort_ns;
    uint64_t stall_check_ns; /* a commit after this long without a WRITE checks its chunks */
    uint64_t gen_state;
    int64_t fail_chunk; /* test knob: WRITEs of this chunk report fail_err; -1 off */
    int fail_err;
    bool shuffle;         /* test knob: deliver completions in a shuffled order */
    unsigned list_scan;   /* list: objects examined per page */
    rados_ioctx_t idx_io; /* path 0, the URL's pool, namespace RIO_RADOS_IDX_NS */
    /* The key index's marker as last read (index.c), under cache_mu. */
    unsigned idx_shards; /* 0: the pool has no index */
    bool idx_ready;
    uint64_t idx_checked_ns, idx_recheck_ns;
    /* Under mu: the committed marks in flight (index.c), nobody waiting. */
    struct rmark {
        rados_completion_t comp;
        rados_write_op_t op;
    } marks[IDX_MARKS];
    unsigned nmarks;

    pthread_mutex_t pools_mu;
    struct rpool pools[MAX_POOLS];
    _Atomic unsigned npools;
    unsigned nwpools; /* pools a PUT spreads over: pools[0..nwpools) */
    int url_pool;     /* the URL's pool (where heads live) in pools[] */

    pthread_mutex_t cache_mu;
    struct lsnap *snaps[LIST_SNAPS]; /* under cache_mu */
    struct centry *cbuckets[CACHE_BUCKETS];
    struct rio_list lru; /* of struct centry, most recent first; count: entries cached */
    struct rmissing missing[MISSING_MAX]; /* under cache_mu */
    unsigned missing_next;                /* under cache_mu: the ring's next slot */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    /* under mu */
    struct rio_opool pool; /* of struct rop */
    struct rio_list done;  /* of struct rop by dnode: finished, not reaped */
    struct rop *held;      /* shuffle knob */
    unsigned nheld;
    bool woken;
    uint64_t rng;
    struct rio_rados_counters ctr;
};

static inline uint64_t nchunks_of(uint64_t size, uint64_t chunk_size)
{
    return size / chunk_size + (size % chunk_size != 0);
}

/* An upload's short_index before its short chunk is seen. */
#define NO_INDEX UINT64_MAX

/* cluster.c */
int rio__rados_xlate(int ret);
int rio__rados_pool_get(struct rados_transport *t, const char *name);

/* cache.c */
uint64_t rio__rados_hash_key(const char *key, size_t len, uint64_t gen);
void rio__rados_centry_free(struct centry *e);
void rio__rados_cache_put(struct rados_transport *t, struct centry *e);
int rio__rados_cache_pool_of(struct rados_transport *t, const char *key, uint64_t gen,
                             uint64_t index, char *name, size_t cap);
void rio__rados_cache_clear(struct rados_transport *t);
/* A READ of chunk index of (key, gen), whose object the head named, found
 * nothing (engine thread: takes cache_mu only). */
void rio__rados_missing_note(struct rados_transport *t, const char *key, uint64_t gen,
                             uint64_t index);
/* 1 and *index when a READ of (key, gen) found nothing, else 0; forgets
 * key's records of other generations (replaced: the misses were that). */
int rio__rados_missing_find(struct rados_transport *t, const char *key, uint64_t gen,
                            uint64_t *index);
void rio__rados_missing_forget(struct rados_transport *t, const char *key, uint64_t gen,
                               uint64_t index);
/* Free the sorted listings' snapshots (list.c). */
void rio__rados_snaps_clear(struct rados_transport *t);

/* data.c */
int rio__rados_submit(struct rio_transport *tt, struct rio_io *io);
int rio__rados_reap(struct rio_transport *tt, int timeout_ms);
void rio__rados_wake(struct rio_transport *tt);
void rio__rados_cancel(struct rio_transport *tt, struct rio_io *io);

/* commit.c */
int rio__rados_head_read(struct rados_transport *t, const char *key, struct rio__rados_head *h,
                         time_t *mtime);
int rio__rados_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d);
int rio__rados_put_expect(struct rio_transport *tt, void *upload, uint64_t gen);
int rio__rados_remove_if(struct rio_transport *tt, const char *key, uint64_t gen);

/* sum: the new head's size and etag, for the key index's entry. */
/* After COMMIT_TRIES guarded swaps or removes of key refused on rio.gen,
 * the head's text last naming text_gen: RIO_EPROTO, said, when rio.gen is
 * missing or says another generation (no try can ever pass), else
 * RIO_ESERVER (raced that often). */
int rio__rados_gen_stuck(struct rados_transport *t, const char *key, uint64_t text_gen);
int rio__rados_head_swap_pre(struct rados_transport *t, const char *key, const char *buf,
                             size_t len, const struct rio__rados_head *sum, struct rupload *pre,
                             uint64_t put_if, struct rio__rados_head *old, bool *had_old);
int rio__rados_head_swap(struct rados_transport *t, const char *key, const char *buf, size_t len,
                         const struct rio__rados_head *sum, uint64_t put_if,
                         struct rio__rados_head *old, bool *had_old);
/* Whether put_if (put_expect's condition; 0: none) holds for the head
 * under key now: 0, RIO_EGENERATION, or an error reading it. A check
 * before work that the swap's own check makes safe to skip. */
int rio__rados_cond_check(struct rados_transport *t, const char *key, uint64_t put_if);

/* index.c (docs/rados.md "The key index") */
#define RIO_RADOS_IDX_NS "rio.index"
#define RIO_RADOS_IDX_MARKER "index"
#define RIO_RADOS_IDX_SHARDS_DEF 8u
#define IDX_RECHECK_NS (10ull * 1000000000ull) /* writers re-read the marker */
#define IDX_REFRESH_NS (30ull * 1000000000ull) /* a commit renews an older entry */
#define IDX_GC_MIN_NS (600ull * 1000000000ull) /* fsck sweeps no younger entry */
unsigned rio__rados_idx_shard(const char *key, size_t len, unsigned shards);
/* Write the marker (create: only if there is none; 1 when there was). */
int rio__rados_idx_marker_write(struct rados_transport *t, unsigned shards, bool ready,
                                bool create);
/* The marker, re-read when older than idx_recheck_ns: *shards 0 when the
 * pool has no index; an error when it cannot be read or is not ours. */
int rio__rados_idx_state(struct rados_transport *t, unsigned *shards, bool *ready);
/* put_open: send up's entry when the pool has an index (best effort). */
void rio__rados_idx_open(struct rados_transport *t, struct rupload *up);
/* Wait for put_open's entry write, if in flight (*ret: its result). */
void rio__rados_idx_open_wait(struct rupload *up, int *ret);
/* Before a swap publishes head gen of key: its entry is in the index
 * (put_open's, up may be NULL, or written now); *wrote once it is, val
 * (RIO_RADOS_IDX_VAL_MAX bytes) its value. */
int rio__rados_idx_ensure(struct rados_transport *t, const char *key, uint64_t gen,
                          struct rupload *up, bool *wrote, char *val);
/* After the swap published it: the entry (still pending, as val) says so,
 * with what a listing shows (sent, not waited for). */
void rio__rados_idx_mark(struct rados_transport *t, const char *key, uint64_t gen,
                         const char *pending, uint64_t size, int64_t mtime_s, const char *etag);
/* At close: every mark sent has landed. */
void rio__rados_idx_marks_wait(struct rados_transport *t);
/* Before a removal of key's head of generation gen: write (key, gen)'s
 * entry back to "not committed", waited for, so that a removal whose
 * entry drop never comes (a crash between the two, a drop that failed)
 * leaves an entry listings check against the head instead of one they
 * believe. 0 (also when the pool has no index), or the error: then the
 * head must stay. */
int rio__rados_idx_uncommit(struct rados_transport *t, const char *key, uint64_t gen);
/* Take out the entries of generations that can no longer be heads (best
 * effort: fsck sweeps what stays). A listing believes a key's one
 * committed entry without reading its head, so a removal of a head whose
 * entry may stay committed uncommits it first (rio__rados_idx_uncommit);
 * compose's drop of its sources does not (its one caller keeps them:
 * RIO_COMPOSE_KEEP_SOURCES). */
void rio__rados_idx_drop(struct rados_transport *t, const char *key, uint64_t gen);
void rio__rados_idx_drop_many(struct rados_transport *t, const char *const *keys,
                              const uint64_t *gens, size_t n);
/* The same, sent (aio) before other work and waited for after it. */
struct ridx_drop {
    rados_completion_t comp;
    rados_write_op_t op;
};
void rio__rados_idx_drop_send(struct rados_transport *t, const char *key, uint64_t gen,
                              struct ridx_drop *p);
void rio__rados_idx_drop_wait(struct ridx_drop *p);
/* Read up to max entries after start_after under prefix of each of the
 * shards first..first+count-1 (all in flight at once), each shard's in
 * order, through each (a negative return stops and is returned); more[i]:
 * shard first+i has more. */
typedef int (*rio__rados_idx_each_fn)(void *arg, unsigned shard, const char *name, size_t len,
                                      const char *val, size_t vlen);
int rio__rados_idx_read_many(struct rados_transport *t, unsigned first, unsigned count,
                             const char *start_after, const char *prefix, unsigned max,
                             rio__rados_idx_each_fn each, void *arg, bool *more);
/* Which of keys[0..n) exist, from the index: out[i] 1 (its one entry,
 * committed), 0 (no entry, so no head), 2 (not known: read its head). */
int rio__rados_idx_exists(struct rados_transport *t, unsigned shards, const char *const *keys,
                          unsigned n, uint8_t *out);
/* Set (key, gen)'s entry to iv; was (not NULL): only while its value is
 * still was (RIO_EGENERATION when not). */
int rio__rados_idx_set(struct rados_transport *t, unsigned shards, const char *key, uint64_t gen,
                       const struct rio__rados_ival *iv, const char *was, size_t waslen);
/* Remove (key, gen)'s entry if its value is still val: RIO_EGENERATION
 * when it was renewed or is gone. */
int rio__rados_idx_rm_if(struct rados_transport *t, unsigned shards, const char *key, uint64_t gen,
                         const char *val, size_t vlen);

/* compose.c */
int rio__rados_compose(struct rio_transport *tt, const char *dst, const char *const *srcs,
                       const uint64_t *gens, unsigned n, unsigned flags, uint64_t dst_if,
                       struct rio_desc *out);

/* meta.c */
struct rm_item {
    const char *name; /* the object, or NULL: the chunk of (key, gen, index) */
    int pool;         /* transport pool index */
    unsigned path;    /* connection to send it on */
    uint64_t index;
    int ret;
    bool final; /* ret is an error trying again cannot mend (EPERM) */
};
uint64_t rio__rados_remove_chunks(struct rados_transport *t, const char *key, uint64_t gen,
                                  struct rm_item *items, size_t n, const char *owner);
void rio__rados_remove_head_chunks(struct rados_transport *t, const char *key,
                                   const struct rio__rados_head *h,
                                   const struct rio__rados_head *keep);
uint64_t rio__rados_new_generation(struct rados_transport *t);
void rio__rados_upload_free(struct rupload *up);
void rio__rados_upload_discard(struct rados_transport *t, struct rupload *up);
int rio__rados_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out);
int rio__rados_lookup_mtime(struct rio_transport *tt, const char *key, struct rio_desc *out,
                            int64_t *mtime_ns);
int rio__rados_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                        uint64_t chunk_size, void **upload);
void rio__rados_put_abort(struct rio_transport *tt, void *upload);
int rio__rados_remove(struct rio_transport *tt, const char *key);

/* list.c */
int rio__rados_list(struct rio_transport *tt, const struct rio_list_args *a,
                    struct rio_list_page *out);
int rio__rados_exists(struct rio_transport *tt, const char *const *keys, unsigned n, uint8_t *out);

/* fsck.c */
struct rstat {
    char *name;
    int pool; /* transport pool index */
    uint64_t size;
    time_t mtime;
    int err; /* 0, -ENOENT (gone) or the error */
};
void rio__rados_stat_many(struct rados_transport *t, void *base, size_t n, size_t stride);
int rio__rados_fsck(struct rio_transport *tt, const struct rio_fsck_args *a,
                    struct rio_fsck_report *out);

#endif
