/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The memory store: key -> published object, upload id -> upload in
 * progress, one capacity shared by both, LRU eviction or refusal, TTL
 * expiry, and generations from one server-wide counter.
 *
 * One mutex guards the maps, the LRU list and the accounting; it is never
 * held while bytes move (chunks are received into a claimed region without
 * it, and objects are sent from under a reference). An upload is charged its
 * metadata when it opens and each chunk's bytes when a connection claims the
 * chunk (its data is arriving), never the whole object up front: an upload
 * that sends nothing evicts nothing and holds no room. The charge is released
 * when its object (or the upload) leaves the store; the bytes of a replaced
 * object still being sent are freed when the last sender drops its
 * reference. The metadata that uploads hold until they received as many
 * bytes as it takes is bounded (UNSTARTED_SHARE of the capacity), and so
 * are the uploads each client address has open (--max-uploads-per-client).
 *
 * Object memory: large buffers are mapped on their own (mmap) and unmapped
 * when freed, so resident memory follows what the store holds instead of a
 * heap's high-water mark and fragmentation (docs/server.md, "Memory"). A
 * few freed mappings (at most 1/MAP_CACHE_SHARE of the capacity) are kept
 * for the next upload of the same size, which then writes into memory that
 * is already backed instead of faulting in fresh pages. Kept mappings count
 * against the capacity (used + warm + cached fit it whenever a chunk is
 * charged) and are the first thing given up for room; a reused mapping is
 * counted as the upload's "warm" bytes until its chunks are charged.
 *
 * With the disk tier every upload also has a temporary file that each chunk
 * is written to once verified. An upload that fits the capacity keeps its
 * bytes in memory as well (the object is cached when it commits); one that
 * does not is charged only its metadata, and each chunk is received into a
 * staging buffer charged while it lives, so an object larger than the
 * memory passes through a chunk at a time.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/key.h"
#include "core/le.h"
#include "server/server.h"

#include "railio.h"

#define UPLOAD_BUCKETS 4096u
#define CLIENT_BUCKETS 1024u
#define HUGE_PAGE (2u << 20)
/* Buffers at least this large get a mapping of their own. */
#define MMAP_MIN (64u << 10)
/* Uploads that have not received as many bytes as their metadata takes
 * hold at most this share of the capacity in metadata (1/UNSTARTED_SHARE);
 * more opens are throttled. (Leaving it at the first chunk let a client
 * open uploads of a million 1-byte chunks, send one byte each, and fill
 * the memory with their metadata.) */
#define UNSTARTED_SHARE 64u
/* The address space uploads in progress may map for their data together,
 * a quarter of a process's on x86-64. Mapped at PUT_OPEN for the whole
 * object (or the bound of one of unknown size, about --memory), resident
 * only as chunks arrive: without a bound, opens that send nothing took all
 * of it (a few hundred of --memory 64G), and then every PUT met -ENOMEM. */
#define UPLOADS_MAPPED_MAX (32ull << 40)
/* Freed mappings kept for reuse: at most 1/MAP_CACHE_SHARE of the capacity,
 * in at most MAP_CACHE_SLOTS mappings. */
#define MAP_CACHE_SHARE 8u
#define MAP_CACHE_SLOTS 16u

int rio__srv_data_heap;

/* Freed object mappings kept for reuse, oldest first. Its own lock: buffers
 * are freed with and without the store's lock held (store lock first). */
static struct {
    pthread_mutex_t mu;
    uint64_t bytes, limit, reused;
    unsigned n;
    struct {
        uint8_t *p;
        uint64_t len;
    } e[MAP_CACHE_SLOTS];
} map_cache = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Uploads open per client address. */
struct rio_srv_client {
    struct rio_srv_client *next;
    uint8_t addr[16];
    unsigned n;
};

/* A chunk of an upload without memory of its own, while it is received. */
struct rio_srv_stage {
    struct rio_srv_stage *next;
    uint64_t index, charge, len;
    uint8_t *buf;
};

static uint64_t id_hash(uint64_t id)
{
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdull;
    id ^= id >> 33;
    return id;
}

/*
 * An object's bytes. Large buffers get a mapping of their own (mmap),
 * marked for transparent huge pages: every PUT writes into fresh memory, and
 * first touching it 4 KiB at a time is the largest cost of a PUT where page
 * faults are expensive (docs/server.md has the figures). Where THP is off
 * the advice is ignored. With --prefault they come from the heap instead.
 */
uint8_t *rio__srv_data_alloc(uint64_t n)
{
    uint8_t *p;

    if (n > SIZE_MAX / 2)
        return NULL;
    if (!rio__srv_data_heap && n >= MMAP_MIN) {
        /* Its own mapping: untouched pages cost nothing, and unmapping
         * gives every page back. */
        p = mmap(NULL, (size_t)n, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        if (n >= HUGE_PAGE)
            madvise(p, (size_t)n, MADV_HUGEPAGE);
        return p;
    }
    if (!rio__srv_data_heap)
        /* Page-aligned, but not a buffer smaller than a page: its
         * alignment would cost a page per object, which the object's
         * charge does not count (a million 1-byte objects held 4 GiB). */
        return rio__alloc_aligned(n >= 4096 ? 0 : 64, (size_t)n);
    /* From the heap (--prefault): memory rio__srv_store_prefault touched
     * already, marked for huge pages there. Not aligned: an aligned block
     * needs its size plus the alignment, so the hole an evicted object of
     * the same size leaves would not take it and the heap would grow into
     * untouched memory instead. */
    return rio__malloc((size_t)n);
}

static uint64_t map_len(uint64_t n)
{
    return (n + 4095) & ~(uint64_t)4095;
}

/* Take the oldest kept mapping out into drop[*k] (the lock held). */
static void map_cache_pop_locked(uint8_t **drop, uint64_t *dlen, unsigned *k)
{
    drop[*k] = map_cache.e[0].p;
    dlen[*k] = map_cache.e[0].len;
    map_cache.bytes -= dlen[(*k)++];
    map_cache.n--;
    memmove(&map_cache.e[0], &map_cache.e[1], map_cache.n * sizeof(map_cache.e[0]));
}

/* Unmap the oldest kept mappings until at most keep bytes are kept. */
static void map_cache_trim(uint64_t keep)
{
    uint8_t *drop[MAP_CACHE_SLOTS];
    uint64_t dlen[MAP_CACHE_SLOTS];
    unsigned k = 0;

    pthread_mutex_lock(&map_cache.mu);
    while (map_cache.n && map_cache.bytes > keep)
        map_cache_pop_locked(drop, dlen, &k);
    pthread_mutex_unlock(&map_cache.mu);
    while (k--)
        munmap(drop[k], (size_t)dlen[k]);
}

/* A kept mapping of exactly n bytes (page-rounded), or NULL. Its pages
 * still hold the bytes of the buffer freed into it: every byte an object
 * serves is written by a verified chunk first. */
static uint8_t *map_cache_take(uint64_t n)
{
    uint8_t *p = NULL;
    uint64_t len = map_len(n);

    if (rio__srv_data_heap || n < MMAP_MIN)
        return NULL;
    pthread_mutex_lock(&map_cache.mu);
    for (unsigned i = map_cache.n; i-- > 0;)
        if (map_cache.e[i].len == len) {
            p = map_cache.e[i].p;
            map_cache.bytes -= len;
            map_cache.reused++;
            memmove(&map_cache.e[i], &map_cache.e[i + 1],
                    (--map_cache.n - i) * sizeof(map_cache.e[0]));
            break;
        }
    pthread_mutex_unlock(&map_cache.mu);
    return p;
}

void rio__srv_data_free(void *p, uint64_t n)
{
    uint8_t *drop[MAP_CACHE_SLOTS + 1];
    uint64_t dlen[MAP_CACHE_SLOTS + 1], len = map_len(n);
    unsigned k = 0;

    if (!p)
        return;
    if (rio__srv_data_heap || n < MMAP_MIN) {
        rio__free(p);
        return;
    }
    pthread_mutex_lock(&map_cache.mu);
    if (len <= map_cache.limit) {
        /* Kept, the oldest making room for it. */
        while (map_cache.n == MAP_CACHE_SLOTS || map_cache.bytes + len > map_cache.limit)
            map_cache_pop_locked(drop, dlen, &k);
        map_cache.e[map_cache.n].p = p;
        map_cache.e[map_cache.n++].len = len;
        map_cache.bytes += len;
    } else {
        drop[k] = p;
        dlen[k++] = len;
    }
    pthread_mutex_unlock(&map_cache.mu);
    while (k--)
        munmap(drop[k], (size_t)dlen[k]);
}

/*
 * --prefault: touch n bytes of fresh object memory once and free it. The
 * heap keeps it (main() tells glibc never to trim or to mmap large blocks),
 * so later uploads are carved from memory the VM has already backed instead
 * of paying a page fault per page on their first PUT. Returns the seconds
 * it took, or -ENOMEM (the server then runs without it).
 */
double rio__srv_store_prefault(uint64_t n)
{
    uint64_t t0 = rio__now_ns();
    /* 2 MiB-aligned and advised for huge pages (rio__alloc_aligned). */
    volatile uint8_t *p = n > SIZE_MAX / 2 ? NULL : rio__alloc_aligned(HUGE_PAGE, (size_t)n);

    if (!p)
        return -ENOMEM;
    for (uint64_t off = 0; off < n; off += 4096)
        p[off] = 0;
    rio__srv_data_free((void *)p, n);
    return (double)(rio__now_ns() - t0) / 1e9;
}

/* ---------------------------------------------------------------- init */

int rio__srv_store_init(struct rio_srv_store *s, uint64_t capacity, int evict_lru,
                        uint64_t default_ttl_ns, uint64_t upload_timeout_ns, uint64_t max_chunks)
{
    struct timespec ts;
    uint64_t rnd = 0;

    memset(s, 0, sizeof(*s));
    rio__srv_index_init(&s->index);
    if (rio__srv_otab_init(&s->tab, 1024) < 0)
        return -ENOMEM;
    s->utab_mask = UPLOAD_BUCKETS - 1;
    s->utab = rio__calloc(UPLOAD_BUCKETS, sizeof(*s->utab));
    if (!s->utab)
        goto err_tab;
    s->ctab = rio__calloc(CLIENT_BUCKETS, sizeof(*s->ctab));
    if (!s->ctab)
        goto err_utab;
    if (pthread_mutex_init(&s->mu, NULL) != 0)
        goto err_utab;
    s->capacity = capacity;
    s->evict_lru = evict_lru;
    s->default_ttl_ns = default_ttl_ns;
    s->upload_timeout_ns = upload_timeout_ns;
    s->max_chunks = max_chunks;
    pthread_mutex_lock(&map_cache.mu);
    map_cache.limit = capacity / MAP_CACHE_SHARE;
    pthread_mutex_unlock(&map_cache.mu);
    /* Generations start from the wall clock in nanoseconds, so a restarted
     * server never hands out a generation a client saw before the restart. */
    clock_gettime(CLOCK_REALTIME, &ts);
    s->next_gen = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
    /* Upload ids are a keyed permutation of a counter that starts at a
     * random point (commits.c): unguessable, never handed out twice. */
    if (getrandom(&rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        rnd = s->next_gen * 0x9e3779b97f4a7c15ull;
    s->next_upload = (rnd >> 1) | 1;
    if (rio__srv_commits_new(&s->commits) < 0)
        goto err_mu;
    return 0;
err_mu:
    pthread_mutex_destroy(&s->mu);
err_utab:
    rio__free(s->ctab);
    rio__free(s->utab);
err_tab:
    rio__srv_otab_cleanup(&s->tab);
    return -ENOMEM;
}

/* Drops one reference: true when it was the last, and the caller frees. */
static bool ref_drop(_Atomic int *refs)
{
    return atomic_fetch_sub_explicit(refs, 1, memory_order_acq_rel) == 1;
}

static void obj_free(struct rio_srv_obj *o)
{
    if (o->read_buf) {
        rio__srv_disk_read_buf_free(o);
        return;
    }
    if (o->held_by)
        atomic_fetch_sub(&o->held_by->held, o->charge);
    rio__srv_data_free(o->data, o->size);
    rio__free(o->xxh);
    rio__free(o->key);
    rio__free(o);
}

void rio__srv_obj_unref(struct rio_srv_obj *o)
{
    if (o && ref_drop(&o->refs))
        obj_free(o);
}

static void stage_free(struct rio_srv_stage *st)
{
    if (st) {
        rio__srv_data_free(st->buf, st->len);
        rio__free(st);
    }
}

static void upload_free(struct rio_srv_upload *u)
{
    while (u->stage) {
        struct rio_srv_stage *st = u->stage;
        u->stage = st->next;
        stage_free(st);
    }
    if (u->df)
        rio__srv_dfile_discard(u->df);
    if (u->held_by)
        atomic_fetch_sub(&u->held_by->held, u->held);
    rio__srv_data_free(u->data, u->size);
    if (u->map_held_by) /* after the unmap: never counted less than mapped */
        atomic_fetch_sub(&u->map_held_by->mapped_held, u->mapped);
    rio__free(u->xxh);
    rio__free(u->state);
    rio__free(u->charged);
    rio__free(u->owner);
    rio__free(u->key);
    rio__free(u);
}

void rio__srv_upload_unref(struct rio_srv_upload *u)
{
    if (u && ref_drop(&u->refs))
        upload_free(u);
}

static void obj_unref_each(struct rio_srv_obj *o, void *arg)
{
    (void)arg;
    rio__srv_obj_unref(o);
}

void rio__srv_store_cleanup(struct rio_srv_store *s)
{
    rio__srv_otab_each(&s->tab, obj_unref_each, NULL);
    for (size_t i = 0; i <= s->utab_mask; i++) {
        struct rio_srv_upload *u = s->utab[i], *n;
        for (; u; u = n) {
            n = u->hnext;
            u->dead = 1;
            rio__srv_upload_unref(u);
        }
    }
    for (size_t i = 0; i < CLIENT_BUCKETS; i++)
        while (s->ctab && s->ctab[i]) {
            struct rio_srv_client *cl = s->ctab[i];
            s->ctab[i] = cl->next;
            rio__free(cl);
        }
    rio__srv_otab_cleanup(&s->tab);
    rio__free(s->eheap);
    rio__free(s->utab);
    rio__srv_commits_free(s->commits);
    rio__free(s->ctab);
    pthread_mutex_destroy(&s->mu);
    memset(s, 0, sizeof(*s));
    pthread_mutex_lock(&map_cache.mu);
    map_cache.limit = 0;
    pthread_mutex_unlock(&map_cache.mu);
    map_cache_trim(0);
}

void rio__srv_store_stats(struct rio_srv_store *s, struct rio_srv_store_stats *st)
{
    pthread_mutex_lock(&s->mu);
    st->objects = s->nobj;
    st->bytes = s->bytes;
    st->used = s->used + atomic_load(&s->held);
    st->capacity = s->capacity;
    st->uploads = s->nup;
    st->evictions = s->evictions;
    st->expirations = s->expirations;
    st->reclaimed = s->reclaimed;
    pthread_mutex_lock(&map_cache.mu);
    st->map_cached = map_cache.bytes;
    st->map_reused = map_cache.reused;
    pthread_mutex_unlock(&map_cache.mu);
    pthread_mutex_unlock(&s->mu);
}

/* ------------------------------------------------------------- objects */

/* The least recently used object, or NULL. */
static struct rio_srv_obj *lru_oldest(struct rio_srv_store *s)
{
    return rio_list_entry(s->lru.tail, struct rio_srv_obj, lru_node);
}

static struct rio_srv_obj **obj_slot_locked(struct rio_srv_store *s, const char *key, uint16_t klen)
{
    return rio__srv_otab_slot(&s->tab, key, klen);
}

/* The expiry heap (store.mu): objects with an expiry, the soonest on top. */
static void eheap_set(struct rio_srv_store *s, size_t i, struct rio_srv_obj *o)
{
    s->eheap[i] = o;
    o->eslot = i + 1;
}

static void eheap_up(struct rio_srv_store *s, size_t i)
{
    struct rio_srv_obj *o = s->eheap[i];
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (s->eheap[p]->expiry_ns <= o->expiry_ns)
            break;
        eheap_set(s, i, s->eheap[p]);
        i = p;
    }
    eheap_set(s, i, o);
}

static void eheap_down(struct rio_srv_store *s, size_t i)
{
    struct rio_srv_obj *o = s->eheap[i];
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= s->eheap_n)
            break;
        if (c + 1 < s->eheap_n && s->eheap[c + 1]->expiry_ns < s->eheap[c]->expiry_ns)
            c++;
        if (o->expiry_ns <= s->eheap[c]->expiry_ns)
            break;
        eheap_set(s, i, s->eheap[c]);
        i = c;
    }
    eheap_set(s, i, o);
}

/* 0, or -ENOMEM: then o is not in the heap, and the caller counts it in
 * eheap_missed (drop_expired_locked then walks every object). */
static int eheap_push_locked(struct rio_srv_store *s, struct rio_srv_obj *o)
{
    if (s->eheap_n == s->eheap_cap) {
        size_t cap = s->eheap_cap ? 2 * s->eheap_cap : 1024;
        struct rio_srv_obj **h = rio__realloc(s->eheap, cap * sizeof(*h));
        if (!h)
            return -ENOMEM;
        s->eheap = h;
        s->eheap_cap = cap;
    }
    s->eheap[s->eheap_n] = o;
    eheap_up(s, s->eheap_n++);
    return 0;
}

static void eheap_remove_locked(struct rio_srv_store *s, struct rio_srv_obj *o)
{
    size_t i = o->eslot - 1;
    struct rio_srv_obj *last = s->eheap[--s->eheap_n];

    o->eslot = 0;
    if (last == o)
        return;
    s->eheap[i] = last;
    last->eslot = i + 1;
    if (i > 0 && s->eheap[(i - 1) / 2]->expiry_ns > last->expiry_ns)
        eheap_up(s, i);
    else
        eheap_down(s, i);
}

/* Take o out of the map and the LRU, release its charge and the map's ref. */
static void obj_remove_locked(struct rio_srv_store *s, struct rio_srv_obj **slot)
{
    struct rio_srv_obj *o = *slot;

    *slot = o->hnext;
    o->hnext = NULL;
    rio__srv_index_remove(&s->index, o);
    if (o->eslot)
        eheap_remove_locked(s, o);
    else if (o->expiry_ns)
        s->eheap_missed--;
    rio_list_remove(&s->lru, &o->lru_node);
    s->nobj--;
    s->used -= o->charge;
    s->bytes -= o->size;
    if (atomic_load(&o->refs) > 1) {
        /* Still being sent: its bytes stay until that ends, and so does
         * its charge (else peers that read an object and never take the
         * answer, while it is replaced again and again, held far more
         * than --memory: a connection's --max-inflight-bytes each). */
        o->held_by = s;
        atomic_fetch_add(&s->held, o->charge);
    }
    rio__srv_obj_unref(o);
}

static int obj_expired(const struct rio_srv_obj *o, uint64_t now)
{
    return o->expiry_ns && now >= o->expiry_ns;
}

struct rio_srv_obj *rio__srv_store_get(struct rio_srv_store *s, const char *key, uint16_t klen,
                                       int touch)
{
    struct rio_srv_obj **slot, *o = NULL;
    uint64_t now = rio__now_ns();

    pthread_mutex_lock(&s->mu);
    slot = obj_slot_locked(s, key, klen);
    if (*slot && obj_expired(*slot, now)) {
        obj_remove_locked(s, slot);
        s->expirations++;
    } else if (*slot) {
        o = *slot;
        if (touch) {
            rio_list_remove(&s->lru, &o->lru_node);
            rio_list_push_front(&s->lru, &o->lru_node);
        }
        atomic_fetch_add_explicit(&o->refs, 1, memory_order_relaxed);
    }
    pthread_mutex_unlock(&s->mu);
    return o;
}

void rio__srv_store_list(struct rio_srv_store *s, struct rio_srv_lister *l)
{
    pthread_mutex_lock(&s->mu);
    rio__srv_list_index_locked(l, &s->index);
    pthread_mutex_unlock(&s->mu);
}

int rio__srv_store_delete(struct rio_srv_store *s, const char *key, uint16_t klen, uint64_t gen)
{
    struct rio_srv_obj **slot;
    int ret = 0;

    pthread_mutex_lock(&s->mu);
    slot = obj_slot_locked(s, key, klen);
    if (!*slot) {
        ret = RIO_ENOTFOUND;
    } else if (gen && !obj_expired(*slot, rio__now_ns()) && (*slot)->generation != gen) {
        ret = RIO_EGENERATION; /* another version: left */
    } else {
        if (obj_expired(*slot, rio__now_ns())) {
            ret = RIO_ENOTFOUND;
            s->expirations++;
        }
        obj_remove_locked(s, slot);
    }
    pthread_mutex_unlock(&s->mu);
    return ret;
}

/* ------------------------------------------------------------- uploads */

static struct rio_srv_upload **upload_slot_locked(struct rio_srv_store *s, uint64_t id)
{
    struct rio_srv_upload **pp = &s->utab[id_hash(id) & s->utab_mask];
    for (; *pp; pp = &(*pp)->hnext)
        if ((*pp)->id == id)
            break;
    return pp;
}

/* The count of uploads open from addr, created at 0 (NULL: out of memory). */
static struct rio_srv_client *client_get_locked(struct rio_srv_store *s, const uint8_t addr[16])
{
    size_t b = (size_t)(rio__xxh3(addr, 16) % CLIENT_BUCKETS);
    struct rio_srv_client *cl;

    for (cl = s->ctab[b]; cl; cl = cl->next)
        if (memcmp(cl->addr, addr, 16) == 0)
            return cl;
    cl = rio__calloc(1, sizeof(*cl));
    if (!cl)
        return NULL;
    memcpy(cl->addr, addr, 16);
    cl->next = s->ctab[b];
    s->ctab[b] = cl;
    return cl;
}

/* One upload of cl less; the entry goes with its last upload. */
static void client_put_locked(struct rio_srv_store *s, struct rio_srv_client *cl)
{
    if (!cl || --cl->n)
        return;
    for (struct rio_srv_client **pp = &s->ctab[rio__xxh3(cl->addr, 16) % CLIENT_BUCKETS]; *pp;
         pp = &(*pp)->next)
        if (*pp == cl) {
            *pp = cl->next;
            rio__free(cl);
            return;
        }
}

/* Unlink u from the table, release its charge and the table's ref. */
static void upload_remove_locked(struct rio_srv_store *s, struct rio_srv_upload **slot)
{
    struct rio_srv_upload *u = *slot;

    *slot = u->hnext;
    u->hnext = NULL;
    u->dead = 1;
    s->nup--;
    s->used -= u->charge;
    if (u->charge && atomic_load(&u->refs) > 1) {
        /* A chunk still arrives into its buffer (or a commit frame still
         * streams): the bytes it holds stay until that ends, and so does
         * their charge (else uploads aborted with a chunk trickling in
         * each held their received chunks uncounted, a server of
         * --memory 64M past 280 MiB with 6 of them). */
        u->held_by = s;
        u->held = u->charge;
        atomic_fetch_add(&s->held, u->held);
    }
    s->warm -= u->warm;
    u->warm = 0;
    s->uploads_mapped -= u->mapped;
    if (u->mapped && u->data && atomic_load(&u->refs) > 1) {
        /* Its mapping lives while that chunk arrives: still counted
         * (else opens, a chunk trickled into each, and aborts mapped past
         * UPLOADS_MAPPED_MAX, until every PUT met -ENOMEM). */
        u->map_held_by = s;
        atomic_fetch_add(&s->mapped_held, u->mapped);
    } else {
        u->mapped = 0;
    }
    if (!u->meta_out)
        s->unstarted_meta -= u->meta;
    client_put_locked(s, u->client);
    u->client = NULL;
    rio__srv_upload_unref(u);
}

static uint64_t chunk_len(const struct rio_srv_upload *u, uint64_t index)
{
    uint64_t off = index * u->chunk_size;
    uint64_t rem = u->size - off;
    return rem < u->chunk_size ? rem : u->chunk_size;
}

/* The bytes chunk index of u holds when it came: for an upload of unknown
 * size, until its commit, every chunk is whole but the short one. */
static uint64_t held_len(const struct rio_srv_upload *u, uint64_t index)
{
    if (u->unknown && u->short_set && index == u->short_index)
        return u->short_len;
    return chunk_len(u, index);
}

/* A chunk of an upload of unknown size: below the bound, whole but for
 * one, the last (nothing after it). 0, -EFBIG or RIO_EPROTO. */
static int unknown_chunk_ok_locked(struct rio_srv_upload *u, uint64_t index, uint64_t len)
{
    if (index >= u->nchunks) {
        SRV_INFO("put refused: an upload of unknown size reached %llu chunks of %llu bytes, the "
                 "most this server takes (bound by --memory and --max-body; with --data-dir at "
                 "most %u chunks)",
                 (unsigned long long)u->nchunks, (unsigned long long)u->chunk_size,
                 RIO_SRV_DISK_STREAM_CHUNKS);
        return -EFBIG;
    }
    if (len == 0 || len > u->chunk_size)
        return RIO_EPROTO;
    if (u->short_set) {
        /* The short chunk again (same length), or one before it. */
        if (index > u->short_index || (index == u->short_index && len != u->short_len) ||
            (index < u->short_index && len != u->chunk_size))
            return RIO_EPROTO;
    } else if (len < u->chunk_size) {
        /* A whole chunk came after it, or at it (this index sent whole
         * before: a "retry" of it shorter would have made it the short
         * last chunk, and the object's size disagree with its checksum). */
        if (index < u->top)
            return RIO_EPROTO;
        u->short_set = 1;
        u->short_index = index;
        u->short_len = len;
    }
    if (index + 1 > u->top)
        u->top = index + 1;
    return 0;
}

/* Give back the memory of an upload's buffer beyond its first n bytes:
 * the mapping's tail, the heap block's tail, or (a buffer under MMAP_MIN
 * on one side) a smaller copy; the buffer to use from now on. Called with
 * the store's lock held: never a copy of more than MMAP_MIN bytes (a
 * stream of gigabytes committed under --prefault was copied whole there,
 * every other request of the server waiting). *copied: bytes copied. */
static uint8_t *data_shrink(uint8_t *p, uint64_t old, uint64_t n, uint64_t *copied)
{
    uint8_t *q;

    *copied = 0;
    if (!p || n == old)
        return p;
    if (!rio__srv_data_heap && old >= MMAP_MIN && n >= MMAP_MIN) {
        munmap(p + map_len(n), (size_t)(map_len(old) - map_len(n)));
        return p;
    }
    if (rio__srv_data_heap && n) {
        /* The heap's realloc shrinks a block where it is: the tail goes
         * back to the heap, nothing is copied. A failure keeps the whole
         * block (its tail unused until the object goes). */
        q = rio__realloc(p, (size_t)n);
        return q ? q : p;
    }
    *copied = n;
    q = n ? rio__srv_data_alloc(n) : NULL;
    if (n && !q)
        return NULL;
    if (n)
        memcpy(q, p, (size_t)n);
    rio__srv_data_free(p, old);
    return q;
}

int rio__srv_upload_finalize(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t n)
{
    uint64_t size, old;
    int ret = 0;

    pthread_mutex_lock(&s->mu);
    if (!u->unknown)
        goto out;
    if (u->dead) {
        ret = RIO_ENOTFOUND;
        goto out;
    }
    /* Every chunk below n must be in, and none still arriving: the
     * buffer is cut to the size below, which a chunk being written into it
     * (a commit sent while another connection still sends a chunk) must
     * not see. */
    if (n > u->nchunks || u->top > n || u->ndone != n ||
        (u->short_set && u->short_index + 1 != n)) {
        ret = RIO_EINVAL;
        goto out;
    }
    size = n ? (n - 1) * u->chunk_size + (u->short_set ? u->short_len : u->chunk_size) : 0;
    old = u->size;
    /* Nothing writes into it now: every chunk below n is in (the commit's
     * client waited for them), none above was claimed. */
    uint64_t copied = 0;
    uint8_t *d = u->data ? data_shrink(u->data, old, size, &copied) : NULL;
    if (size && u->data && !d) {
        ret = -ENOMEM;
        goto out;
    }
    SRV_DEBUG("upload sized id=%llu bytes=%llu bound=%llu copied=%llu", (unsigned long long)u->id,
              (unsigned long long)size, (unsigned long long)old, (unsigned long long)copied);
    u->data = d;
    u->size = size;
    u->nchunks = n;
    u->unknown = 0;
    /* Its metadata is charged from now on as for n chunks, not the bound. */
    uint64_t meta = n * 18 + u->key_len + sizeof(*u) + sizeof(struct rio_srv_obj);
    if (meta < u->meta) {
        uint64_t delta = u->meta - meta;
        s->used -= delta;
        u->charge -= delta;
        if (!u->meta_out)
            s->unstarted_meta -= delta;
        u->meta = meta;
    }
out:
    pthread_mutex_unlock(&s->mu);
    return ret;
}

/* Drop what expired, soonest first, from the expiry heap: never a walk of
 * every object (which, with a million objects, held the lock about 0.1 s
 * on every sweep and on every reservation of a full store). */
static void drop_expired_locked(struct rio_srv_store *s, uint64_t now)
{
    /* Objects the heap had no memory for: the walk, while there are any. */
    for (struct rio_srv_obj *o = s->eheap_missed ? lru_oldest(s) : NULL, *p; o; o = p) {
        p = rio_list_entry(o->lru_node.prev, struct rio_srv_obj, lru_node);
        if (!o->eslot && obj_expired(o, now)) {
            obj_remove_locked(s, obj_slot_locked(s, o->key, o->key_len));
            s->expirations++;
        }
    }
    while (s->eheap_n && obj_expired(s->eheap[0], now)) {
        struct rio_srv_obj *o = s->eheap[0], **slot = obj_slot_locked(s, o->key, o->key_len);
        if (*slot != o) { /* cannot be: every object in the heap is in the map */
            eheap_remove_locked(s, o);
            continue;
        }
        obj_remove_locked(s, slot);
        s->expirations++;
    }
}

/* Make room for need bytes: evict least-recently-used objects (lru mode), or
 * refuse. Expired objects go first in either mode. */
static int reserve_locked(struct rio_srv_store *s, uint64_t need)
{
    uint64_t now = rio__now_ns();

    if (need > s->capacity)
        return -EFBIG;
    if (s->used + s->warm + atomic_load(&s->held) > s->capacity - need)
        drop_expired_locked(s, now); /* free to drop whatever the mode */
    uint64_t taken0 = s->used + s->warm + atomic_load(&s->held);
    if (s->evict_lru && taken0 > s->capacity - need) {
        /* Evict only when that makes the room: when uploads in progress
         * and bytes still being sent hold the rest, every object went and
         * the need was refused all the same. Objects being sent free
         * nothing now (their charge stays held). */
        uint64_t short_by = taken0 - (s->capacity - need), can = 0;
        for (struct rio_srv_obj *o = lru_oldest(s); o && can < short_by;
             o = rio_list_entry(o->lru_node.prev, struct rio_srv_obj, lru_node))
            if (atomic_load(&o->refs) <= 1)
                can += o->charge;
        if (can < short_by)
            return -ENOSPC;
    }
    while (s->used + s->warm + atomic_load(&s->held) > s->capacity - need) {
        struct rio_srv_obj *victim = lru_oldest(s);
        if (!s->evict_lru || !victim)
            return -ENOSPC;
        SRV_DEBUG("evict key_len=%u generation=%llu size=%llu", victim->key_len,
                  (unsigned long long)victim->generation, (unsigned long long)victim->size);
        obj_remove_locked(s, obj_slot_locked(s, victim->key, victim->key_len));
        s->evictions++;
    }
    /* Kept mappings give way, never an object: used, warm and kept bytes
     * together fit the capacity once need is charged (trimmed last: an
     * evicted object's mapping may just have been kept). */
    uint64_t taken = s->used + s->warm + atomic_load(&s->held);
    map_cache_trim(taken < s->capacity - need ? s->capacity - need - taken : 0);
    return 0;
}

/* The most chunks an upload of unknown size may hold: what the capacity
 * takes (with each chunk's metadata; the disk tier: RIO_SRV_DISK_STREAM_CHUNKS,
 * its file's header is laid out for that many), at most max_chunks and at
 * most what the metadata share of uploads without data allows. */
static uint64_t unknown_nchunks(const struct rio_srv_store *s, uint64_t chunk, uint16_t key_len)
{
    uint64_t fixed = key_len + sizeof(struct rio_srv_upload) + sizeof(struct rio_srv_obj);
    uint64_t n;

    if (s->capacity <= fixed)
        return 0;
    n = s->disk ? RIO_SRV_DISK_STREAM_CHUNKS : (s->capacity - fixed) / (chunk + 18);
    /* Its metadata, charged from the open, must fit what uploads without
     * a chunk may hold: tiny chunks give a smaller bound, never a huge
     * allocation of per-chunk arrays. */
    if (n > s->capacity / UNSTARTED_SHARE / 18)
        n = s->capacity / UNSTARTED_SHARE / 18;
    return n < s->max_chunks ? n : s->max_chunks;
}

int rio__srv_store_open(struct rio_srv_store *s, const struct rio_proto_put_open *m_in,
                        const struct rio_srv_admit *ad, uint64_t *upload_id, int attach)
{
    struct rio_proto_put_open bound = *m_in, *m = &bound;
    struct rio_srv_upload *u;
    struct rio_srv_client *cl;
    uint64_t nchunks, meta;
    int unknown = m_in->size == RIO_PROTO_SIZE_UNKNOWN;
    int ret;

    if (m->chunk_size == 0 || !rio__key_len_ok(m->key_len))
        return RIO_EINVAL;
    if (unknown) {
        /* Opened for the most it may hold: its memory is mapped, not
         * resident, and charged chunk by chunk as for any upload (the disk
         * tier: cached only when that much fits the memory; its file's
         * header has room for that many chunks). */
        nchunks = unknown_nchunks(s, m->chunk_size, m->key_len);
        if (nchunks == 0)
            return -EFBIG;
        m->size = nchunks * m->chunk_size;
    }
    nchunks = m->size ? (m->size - 1) / m->chunk_size + 1 : 0;
    if (nchunks > s->max_chunks)
        return RIO_EINVAL;
    /* Per chunk: its checksum, state, charge flag and receiver; plus the
     * key and the structs. */
    meta = nchunks * 18 + m->key_len + sizeof(*u) + sizeof(struct rio_srv_obj);
    if (m->size > UINT64_MAX - meta || m->size > SIZE_MAX / 2)
        return -EFBIG;
    /* Disk tier: only one chunk at a time has to fit; memory: all of it. */
    if (s->disk ? (m->size < m->chunk_size ? m->size : m->chunk_size) + meta > s->capacity
                : m->size + meta > s->capacity)
        return -EFBIG;

    u = rio__calloc(1, sizeof(*u));
    if (!u)
        return -ENOMEM;
    atomic_init(&u->refs, 1);
    u->size = m->size;
    u->chunk_size = m->chunk_size;
    u->nchunks = nchunks;
    u->unknown = unknown;
    u->key_len = m->key_len;
    u->meta = meta;
    u->ttl_ns = (uint64_t)m->ttl_ms * 1000000ull;
    if (!u->ttl_ns)
        u->ttl_ns = s->default_ttl_ns;
    u->key = rio__malloc((size_t)m->key_len + 1);
    if (!u->key)
        goto err_nomem;
    memcpy(u->key, m->key, m->key_len);
    u->key[m->key_len] = '\0';
    if (nchunks) {
        u->xxh = rio__calloc((size_t)nchunks, 8);
        u->state = rio__calloc((size_t)nchunks, 1);
        u->charged = rio__calloc((size_t)nchunks, 1);
        u->owner = rio__calloc((size_t)nchunks, sizeof(*u->owner));
        if (!u->xxh || !u->state || !u->charged || !u->owner)
            goto err_nomem;
    }
    /* The object's memory is mapped now and charged a chunk at a time as
     * the chunks arrive (untouched pages are not resident). Disk tier: an
     * object larger than the memory is not cached, its chunks are staged. */
    if (m->size && m->size + meta <= s->capacity) {
        if (rio__srv_data_heap && s->evict_lru && !unknown && m->size >= HUGE_PAGE) {
            /* --prefault: the buffer is carved from the heap at once, so
             * the room comes first. Evicting only as its chunks are charged
             * (below) would carve it while the objects it replaces still
             * hold the heap, which then grows past --memory into memory
             * never touched: what --prefault is there to avoid. Nothing is
             * charged here (uploads racing for the same room evict again
             * as their chunks arrive). */
            pthread_mutex_lock(&s->mu);
            (void)reserve_locked(s, m->size + meta);
            pthread_mutex_unlock(&s->mu);
        }
        u->data = rio__srv_data_alloc(m->size);
        if (!u->data && !s->disk)
            goto err_nomem;
    }

    pthread_mutex_lock(&s->mu);
    ret = 0;
    if (s->unstarted_meta + meta > s->capacity / UNSTARTED_SHARE + 4096) {
        SRV_INFO("put refused: uploads that received fewer bytes than their metadata takes hold "
                 "%llu bytes of metadata (limit: 1/%u of --memory)",
                 (unsigned long long)s->unstarted_meta, UNSTARTED_SHARE);
        ret = RIO_ETHROTTLE;
    } else if (u->data &&
               s->uploads_mapped + atomic_load(&s->mapped_held) + m->size > UPLOADS_MAPPED_MAX) {
        SRV_INFO("put refused: uploads in progress map %llu bytes of address space for their data "
                 "(limit: %llu)",
                 (unsigned long long)(s->uploads_mapped + atomic_load(&s->mapped_held)),
                 UPLOADS_MAPPED_MAX);
        ret = RIO_ETHROTTLE;
    } else if (!s->evict_lru && !s->disk && !unknown &&
               s->used + s->warm + atomic_load(&s->held) + m->size + meta > s->capacity) {
        /* Refuse mode: what cannot fit now is refused now (nothing is
         * reserved: uploads racing for the same room may still meet
         * ENOSPC on a chunk). */
        ret = -ENOSPC;
    } else if (ad && ad->max_per_client) {
        cl = client_get_locked(s, ad->addr);
        if (!cl) {
            ret = -ENOMEM;
        } else if (cl->n >= ad->max_per_client) {
            SRV_INFO("put refused: %u uploads open from this client (--max-uploads-per-client)",
                     cl->n);
            cl->n++;
            client_put_locked(s, cl);
            ret = RIO_ETHROTTLE;
        } else {
            cl->n++;
            u->client = cl;
        }
    }
    /* No eviction for an upload that has sent nothing: its metadata is
     * charged as it is (refuse mode checked above that it fits; in lru mode
     * the metadata of such uploads, bounded above, may take the charge past
     * the capacity until the next chunk's reservation evicts). */
    if (ret < 0) {
        client_put_locked(s, u->client);
        u->client = NULL;
        pthread_mutex_unlock(&s->mu);
        goto err_free;
    }
    s->used += meta;
    u->charge = meta;
    s->unstarted_meta += meta;
    u->mapped = u->data ? m->size : 0;
    s->uploads_mapped += u->mapped;
    pthread_mutex_unlock(&s->mu);

    if (s->disk) {
        ret = rio__srv_dfile_new(s->disk, u->key, u->key_len, nchunks, &u->df);
        if (ret < 0) {
            pthread_mutex_lock(&s->mu);
            s->used -= meta;
            s->unstarted_meta -= meta;
            s->uploads_mapped -= u->mapped;
            u->mapped = 0;
            client_put_locked(s, u->client);
            u->client = NULL;
            pthread_mutex_unlock(&s->mu);
            goto err_free;
        }
    }

    pthread_mutex_lock(&s->mu);
    do {
        u->id = rio__srv_commits_id(s->commits, s->next_upload++);
    } while (u->id == 0 || *upload_slot_locked(s, u->id));
    u->open_gen = ++s->next_gen;
    u->deadline_ns = rio__now_ns() + s->upload_timeout_ns;
    struct rio_srv_upload **slot = &s->utab[id_hash(u->id) & s->utab_mask];
    u->hnext = *slot;
    *slot = u;
    s->nup++;
    *upload_id = u->id;
    u->nconn = attach ? 1 : 0;
    pthread_mutex_unlock(&s->mu);
    return 0;
err_nomem:
    ret = -ENOMEM;
err_free:
    upload_free(u);
    return ret;
}

void rio__srv_uploads_gone(struct rio_srv_store *s, const uint64_t *ids, unsigned n, uint8_t *gone)
{
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < n; i++)
        gone[i] = *upload_slot_locked(s, ids[i]) == NULL;
    pthread_mutex_unlock(&s->mu);
}

void rio__srv_upload_attach(struct rio_srv_store *s, struct rio_srv_upload *u)
{
    pthread_mutex_lock(&s->mu);
    u->nconn++;
    pthread_mutex_unlock(&s->mu);
}

int rio__srv_upload_detach(struct rio_srv_store *s, uint64_t id)
{
    struct rio_srv_upload **slot;
    int reclaimed = 0;

    pthread_mutex_lock(&s->mu);
    slot = upload_slot_locked(s, id);
    if (*slot && --(*slot)->nconn == 0) {
        /* Every connection that opened it or sent it a chunk is gone: no
         * one can commit it any more. */
        SRV_DEBUG("upload reclaimed id=%llu: its connections closed received=%llu/%llu",
                  (unsigned long long)id, (unsigned long long)(*slot)->ndone,
                  (unsigned long long)(*slot)->nchunks);
        upload_remove_locked(s, slot);
        s->reclaimed++;
        reclaimed = 1;
    }
    pthread_mutex_unlock(&s->mu);
    return reclaimed;
}

int rio__srv_upload_claim(struct rio_srv_store *s, uint64_t id, uint64_t index, uint64_t len,
                          uint64_t xxh, struct rio_srv_claim *me, struct rio_srv_upload **out,
                          uint8_t **dst)
{
    struct rio_srv_upload *u;
    struct rio_srv_stage *st = NULL;
    uint8_t *warm = NULL, *fresh = NULL;
    uint64_t fresh_len = 0;
    int ret = 0;

    /* An upload without memory of its own needs a staging buffer: it is
     * allocated before the lock is taken (and freed if not used). */
    pthread_mutex_lock(&s->mu);
    u = *upload_slot_locked(s, id);
    int stage = u && (!u->data || u->uncache) && index < u->nchunks &&
                (u->unknown ? len && len <= u->chunk_size : len == chunk_len(u, index));
    pthread_mutex_unlock(&s->mu);
    if (stage) {
        st = rio__calloc(1, sizeof(*st));
        if (st) {
            st->len = len;
            st->buf = rio__srv_data_alloc(len);
        }
        if (!st || !st->buf) {
            stage_free(st);
            return -ENOMEM;
        }
    }

    pthread_mutex_lock(&s->mu);
    u = *upload_slot_locked(s, id);
    if (!u) {
        ret = RIO_ENOTFOUND;
        goto out;
    }
    if (u->unknown) {
        ret = unknown_chunk_ok_locked(u, index, len);
        if (ret < 0)
            goto out;
    } else if (index >= u->nchunks || len != chunk_len(u, index)) {
        ret = RIO_EPROTO;
        goto out;
    }
    if (u->state[index] == RIO_SRV_CHUNK_WRITING) {
        /* The client sent it again on another connection: the attempt
         * still holding it is one the client gave up on (a dead or
         * browned-out rail), however fast its bytes still trickle. Its
         * connection goes: the flag says why, and shutting the socket down
         * wakes its worker at once (the owner closes its socket only after
         * letting go of the chunk, under this lock, so the fd is its own).
         * The owner's worker releases the chunk; the client's next retry
         * gets it. */
        struct rio_srv_claim *o = u->owner[index];
        if (o && o != me && !atomic_exchange(&o->doomed, 1) && o->fd >= 0)
            shutdown(o->fd, SHUT_RDWR);
        ret = RIO_ETHROTTLE;
        goto out;
    }
    u->deadline_ns = rio__now_ns() + s->upload_timeout_ns;
    if (u->state[index] == RIO_SRV_CHUNK_DONE && rio__proto_u64(u->xxh + 8 * index) == xxh) {
        ret = 1; /* a retry of a chunk that did arrive: nothing to do */
        goto out;
    }
    if (!u->started && u->data && !u->uncache && !u->unknown &&
        s->warm + u->size <= s->capacity / MAP_CACHE_SHARE &&
        (warm = map_cache_take(u->size)) != NULL) {
        /* Its first chunk: a kept mapping of its size, backed already,
         * takes the place of the untouched fresh one (no chunk has been
         * handed out before the first). Resident as it is, it counts as
         * warm until its chunks are charged. */
        fresh = u->data;
        fresh_len = map_len(u->size);
        u->data = warm;
        u->warm = u->size;
        s->warm += u->size;
    }
    if (u->data && !u->uncache && !u->charged[index]) {
        /* Its bytes are arriving: charge them now (evicting in lru mode);
         * the bytes of a reused mapping were counted as warm already. */
        int r = 0;
        if (u->warm >= len) {
            u->warm -= len;
            s->warm -= len;
        } else {
            r = reserve_locked(s, len);
        }
        if (r < 0 && s->disk) {
            /* No room to cache the object: this chunk and the next ones
             * go through staging buffers, and the object is not cached. */
            u->uncache = 1;
            ret = RIO_ETHROTTLE; /* the client sends it again, staged */
            goto out;
        }
        if (r < 0) {
            ret = r;
            goto out;
        }
        s->used += len;
        u->charge += len;
        u->charged[index] = 1;
    }
    u->started = 1;
    if (u->data && !u->uncache) {
        *dst = u->data + index * u->chunk_size;
    } else {
        /* The staging buffer is charged while it lives; when the memory is
         * all taken by uploads and other chunks, the client retries. */
        if (!st || reserve_locked(s, len) < 0) {
            ret = RIO_ETHROTTLE;
            goto out;
        }
        s->used += len;
        st->charge = len;
        st->index = index;
        st->next = u->stage;
        u->stage = st;
        *dst = st->buf;
        st = NULL;
    }
    if (u->state[index] == RIO_SRV_CHUNK_DONE)
        u->ndone--;
    u->state[index] = RIO_SRV_CHUNK_WRITING;
    u->writing++;
    u->owner[index] = me;
    if (me)
        atomic_store(&me->doomed, 0);
    u->seq++;
    atomic_fetch_add_explicit(&u->refs, 1, memory_order_relaxed);
    *out = u;
out:
    pthread_mutex_unlock(&s->mu);
    stage_free(st);
    if (fresh)
        munmap(fresh, (size_t)fresh_len);
    return ret;
}

/* Chunk index holds no bytes any more: release what it was charged, and
 * the memory it touched (its whole pages: a neighbour chunk may be using
 * the pages at its edges), so that chunks sent again and again with a bad
 * checksum cannot grow the resident memory past the charge. Under the lock:
 * no one claims the chunk meanwhile. */
static void chunk_uncharge_locked(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t index)
{
    if (!u->charged[index])
        return;
    if (u->data) {
        uintptr_t a = (uintptr_t)(u->data + index * u->chunk_size);
        uintptr_t z = a + held_len(u, index);
        a = (a + 4095) & ~(uintptr_t)4095;
        z &= ~(uintptr_t)4095;
        if (z > a)
            madvise((void *)a, z - a, MADV_DONTNEED);
    }
    u->charged[index] = 0;
    u->charge -= held_len(u, index);
    if (!u->dead)
        s->used -= held_len(u, index);
}

/* Unlink chunk index's staging buffer from u (NULL when it has none). */
static struct rio_srv_stage *stage_take_locked(struct rio_srv_upload *u, uint64_t index)
{
    for (struct rio_srv_stage **pp = &u->stage; *pp; pp = &(*pp)->next)
        if ((*pp)->index == index) {
            struct rio_srv_stage *st = *pp;
            *pp = st->next;
            return st;
        }
    return NULL;
}

int rio__srv_upload_chunk_done(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t index,
                               uint64_t xxh, int ok)
{
    struct rio_srv_stage *st;
    struct rio_srv_dfile *df;
    uint64_t len;
    int ret, werr = 0;

    pthread_mutex_lock(&s->mu);
    st = stage_take_locked(u, index);
    df = u->df;
    len = held_len(u, index);
    pthread_mutex_unlock(&s->mu);
    /* Disk tier: a verified chunk goes to the upload's file now (the chunk
     * is WRITING, so no commit can take the file meanwhile). */
    if (ok && df) {
        const uint8_t *src = st ? st->buf : u->data + index * u->chunk_size;
        werr = rio__srv_dfile_write(df, index * u->chunk_size, src, len);
        if (werr < 0)
            ok = 0;
    }

    pthread_mutex_lock(&s->mu);
    u->owner[index] = NULL;
    u->writing--;
    if (ok) {
        u->state[index] = RIO_SRV_CHUNK_DONE;
        rio__le64_put(u->xxh + 8 * index, xxh);
        u->ndone++;
        /* Its data outweighs its metadata now. (Not once it is dead: its
         * removal gave the metadata back, and a chunk still arriving then
         * took it out a second time, wrapping the count: every open after
         * it RIO_ETHROTTLE.) */
        if (!u->meta_out && !u->dead && u->ndone * u->chunk_size >= u->meta) {
            u->meta_out = 1;
            s->unstarted_meta -= u->meta;
        }
    } else {
        u->state[index] = RIO_SRV_CHUNK_EMPTY;
        chunk_uncharge_locked(s, u, index);
    }
    u->seq++;
    u->deadline_ns = rio__now_ns() + s->upload_timeout_ns;
    if (st)
        s->used -= st->charge;
    ret = u->dead ? RIO_ENOTFOUND : werr ? werr : ok ? 0 : RIO_ECHECKSUM;
    pthread_mutex_unlock(&s->mu);
    stage_free(st);
    rio__srv_upload_unref(u);
    return ret;
}

void rio__srv_upload_chunk_abandon(struct rio_srv_store *s, struct rio_srv_upload *u,
                                   uint64_t index)
{
    struct rio_srv_stage *st;

    pthread_mutex_lock(&s->mu);
    u->state[index] = RIO_SRV_CHUNK_EMPTY;
    u->owner[index] = NULL;
    u->writing--;
    u->seq++;
    chunk_uncharge_locked(s, u, index);
    st = stage_take_locked(u, index);
    if (st)
        s->used -= st->charge;
    pthread_mutex_unlock(&s->mu);
    stage_free(st);
    rio__srv_upload_unref(u);
}

struct rio_srv_upload *rio__srv_upload_get(struct rio_srv_store *s, uint64_t id, uint64_t *seq)
{
    struct rio_srv_upload *u;

    pthread_mutex_lock(&s->mu);
    u = *upload_slot_locked(s, id);
    if (u) {
        atomic_fetch_add_explicit(&u->refs, 1, memory_order_relaxed);
        *seq = u->seq;
        u->deadline_ns = rio__now_ns() + s->upload_timeout_ns;
    }
    pthread_mutex_unlock(&s->mu);
    return u;
}

void rio__srv_upload_compare(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t first,
                             uint64_t n, const uint8_t *xxh_le, int *missing, int *bad)
{
    pthread_mutex_lock(&s->mu);
    /* A commit that lost the race to another one: it will see dead. */
    for (uint64_t i = 0; i < n && !u->dead; i++) {
        uint64_t k = first + i;
        if (k >= u->nchunks) {
            *bad = 1;
            break;
        }
        if (u->state[k] != RIO_SRV_CHUNK_DONE)
            *missing = 1;
        else if (memcmp(u->xxh + 8 * k, xxh_le + 8 * i, 8) != 0)
            *bad = 1;
    }
    pthread_mutex_unlock(&s->mu);
}

static void committing_unlink_locked(struct rio_srv_store *s, struct rio_srv_obj *o)
{
    if (!o->committing)
        return;
    rio_list_remove(&s->committing, &o->cnode);
    o->committing = 0;
}

/* Whether the condition if_gen (rio__srv_store_commit) holds for the key
 * of u now: 0, or RIO_EGENERATION. A version of the key still being
 * committed (taken, not yet published or dropped) is newer than any the
 * caller can have seen: the condition fails on it, so that of two
 * conditional commits of a key the second never passes on a state the
 * first is about to change. */
static int commit_cond_locked(struct rio_srv_store *s, const struct rio_srv_upload *u,
                              uint64_t if_gen)
{
    rio_list_each (o, &s->committing, struct rio_srv_obj, cnode)
        if (o->key_len == u->key_len && memcmp(o->key, u->key, u->key_len) == 0)
            return RIO_EGENERATION;
    const struct rio_srv_obj *cur = *obj_slot_locked(s, u->key, u->key_len);
    if (cur && obj_expired(cur, rio__now_ns()))
        cur = NULL; /* gone for every reader already */
    if (if_gen == RIO_PROTO_IF_ABSENT)
        return cur ? RIO_EGENERATION : 0;
    return cur && cur->generation == if_gen ? 0 : RIO_EGENERATION;
}

int rio__srv_store_commit_take(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t seq,
                               const char etag[32], int missing, int bad, uint64_t if_gen,
                               struct rio_srv_obj **out, struct rio_srv_dfile **df)
{
    struct rio_srv_obj *o;
    uint8_t *uncached = NULL;
    int ret = 0;

    /* Allocated before taking the lock; freed again if the commit fails. */
    o = rio__calloc(1, sizeof(*o));
    if (!o)
        return -ENOMEM;

    pthread_mutex_lock(&s->mu);
    if (u->dead) {
        ret = RIO_ENOTFOUND;
        goto out;
    }
    if (missing || u->ndone != u->nchunks) {
        ret = RIO_EINVAL;
        goto out;
    }
    if (bad || u->seq != seq) {
        ret = RIO_ECHECKSUM;
        goto out;
    }
    if (if_gen && (ret = commit_cond_locked(s, u, if_gen)) < 0) {
        /* Refused for good: its chunks go now, not at the reclaim. */
        upload_remove_locked(s, upload_slot_locked(s, u->id));
        goto out;
    }
    atomic_init(&o->refs, 1);
    o->key = u->key;
    o->key_len = u->key_len;
    o->generation = ++s->next_gen;
    o->size = u->size;
    o->chunk_size = u->chunk_size;
    o->nchunks = u->nchunks;
    memcpy(o->etag, etag, 32);
    o->xxh = u->xxh;
    o->data = u->data;
    o->charge = u->charge;
    if (u->uncache && u->data) {
        /* Some chunks were staged (no room to cache it): not cached. */
        uncached = u->data;
        o->data = NULL;
        s->used -= u->charge - u->meta;
        o->charge = u->meta;
    }
    o->expiry_ns = u->ttl_ns && !s->no_ttl ? rio__now_ns() + u->ttl_ns : 0;
    o->open_gen = u->open_gen;
    o->mtime_ns = (int64_t)rio__clock_ns(CLOCK_REALTIME);
    /* Until published or dropped it can still land: tombstones wait. */
    o->committing = 1;
    rio_list_push_front(&s->committing, &o->cnode);
    if (df) {
        *df = u->df;
        u->df = NULL;
    }
    u->key = NULL;
    u->xxh = NULL;
    u->data = NULL;
    /* The upload's charge moves to the object: unlink without releasing it. */
    u->charge = 0;
    /* A retried commit of this upload gets this generation (commits.c);
     * pending until the disk tier has applied it (df: it will). */
    rio__srv_commits_put_locked(s->commits, u->id, o->generation, u->nchunks, df != NULL,
                                rio__now_ns());
    upload_remove_locked(s, upload_slot_locked(s, u->id));
    *out = o;
    o = NULL;
out:
    pthread_mutex_unlock(&s->mu);
    rio__free(o);
    rio__srv_data_free(uncached, u->size);
    return ret;
}

void rio__srv_store_publish(struct rio_srv_store *s, struct rio_srv_obj *o)
{
    struct rio_srv_obj **slot;

    pthread_mutex_lock(&s->mu);
    committing_unlink_locked(s, o);
    slot = obj_slot_locked(s, o->key, o->key_len);
    if (*slot && (*slot)->generation > o->generation) {
        /* A newer version was published while this one was being written. */
        s->used -= o->charge;
        pthread_mutex_unlock(&s->mu);
        rio__srv_obj_unref(o);
        return;
    }
    if (*slot)
        obj_remove_locked(s, slot);
    slot = obj_slot_locked(s, o->key, o->key_len);
    o->hnext = *slot;
    *slot = o;
    rio__srv_index_insert(&s->index, o);
    if (o->expiry_ns && eheap_push_locked(s, o) < 0) {
        /* Found by a walk of every object until it goes. */
        s->eheap_missed++;
        SRV_WARN("no memory for the expiry heap: expired objects are looked for in every "
                 "object until the one under a key of %u bytes is gone",
                 o->key_len);
    }
    rio_list_push_front(&s->lru, &o->lru_node);
    s->nobj++;
    s->bytes += o->size; /* o->charge is in used since the upload opened */
    rio__srv_otab_grow(&s->tab, s->nobj);
    pthread_mutex_unlock(&s->mu);
}

void rio__srv_store_drop(struct rio_srv_store *s, struct rio_srv_obj *o)
{
    pthread_mutex_lock(&s->mu);
    committing_unlink_locked(s, o);
    s->used -= o->charge;
    pthread_mutex_unlock(&s->mu);
    rio__srv_obj_unref(o);
}

void rio__srv_store_published_uncached(struct rio_srv_store *s, struct rio_srv_obj *o)
{
    struct rio_srv_obj **slot;

    pthread_mutex_lock(&s->mu);
    committing_unlink_locked(s, o);
    s->used -= o->charge;
    slot = obj_slot_locked(s, o->key, o->key_len);
    if (*slot && (*slot)->generation < o->generation)
        obj_remove_locked(s, slot);
    pthread_mutex_unlock(&s->mu);
    rio__srv_obj_unref(o);
}

void rio__srv_store_gen_floor(struct rio_srv_store *s, uint64_t gen)
{
    pthread_mutex_lock(&s->mu);
    if (s->next_gen < gen)
        s->next_gen = gen;
    pthread_mutex_unlock(&s->mu);
}

uint64_t rio__srv_store_tick(struct rio_srv_store *s)
{
    uint64_t g;

    pthread_mutex_lock(&s->mu);
    g = ++s->next_gen;
    pthread_mutex_unlock(&s->mu);
    return g;
}

int rio__srv_store_committing_before(struct rio_srv_store *s, const struct rio_srv_obj *o)
{
    int found = 0;

    pthread_mutex_lock(&s->mu);
    rio_list_each (x, &s->committing, struct rio_srv_obj, cnode)
        if (x != o && x->generation < o->generation && x->key_len == o->key_len &&
            memcmp(x->key, o->key, o->key_len) == 0) {
            found = 1;
            break;
        }
    pthread_mutex_unlock(&s->mu);
    return found;
}

uint64_t rio__srv_store_min_open_key(struct rio_srv_store *s, const char *key, uint16_t klen)
{
    uint64_t m;

    pthread_mutex_lock(&s->mu);
    /* An upload opened from now on gets more than next_gen. */
    m = s->next_gen + 1;
    rio_list_each (o, &s->committing, struct rio_srv_obj, cnode)
        if (o->open_gen < m && o->key_len == klen && memcmp(o->key, key, klen) == 0)
            m = o->open_gen;
    for (size_t i = 0; i <= s->utab_mask && s->nup; i++)
        for (struct rio_srv_upload *u = s->utab[i]; u; u = u->hnext)
            if (u->open_gen < m && u->key && u->key_len == klen && memcmp(u->key, key, klen) == 0)
                m = u->open_gen;
    pthread_mutex_unlock(&s->mu);
    return m;
}

void rio__srv_store_each_open(struct rio_srv_store *s,
                              void (*fn)(void *arg, const char *key, uint16_t klen,
                                         uint64_t open_gen),
                              void *arg)
{
    pthread_mutex_lock(&s->mu);
    rio_list_each (o, &s->committing, struct rio_srv_obj, cnode)
        fn(arg, o->key, o->key_len, o->open_gen);
    for (size_t i = 0; i <= s->utab_mask && s->nup; i++)
        for (struct rio_srv_upload *u = s->utab[i]; u; u = u->hnext)
            if (u->key)
                fn(arg, u->key, u->key_len, u->open_gen);
    pthread_mutex_unlock(&s->mu);
}

int rio__srv_store_commit(struct rio_srv_store *s, struct rio_srv_upload *u, uint64_t seq,
                          const char etag[32], int missing, int bad, uint64_t if_gen,
                          uint64_t *generation)
{
    struct rio_srv_obj *o = NULL;
    int ret = rio__srv_store_commit_take(s, u, seq, etag, missing, bad, if_gen, &o, NULL);

    if (ret < 0)
        return ret;
    *generation = o->generation;
    rio__srv_store_publish(s, o);
    return 0;
}

int rio__srv_store_abort(struct rio_srv_store *s, uint64_t id)
{
    struct rio_srv_upload **slot;
    int ret = 0;

    pthread_mutex_lock(&s->mu);
    slot = upload_slot_locked(s, id);
    if (*slot)
        upload_remove_locked(s, slot);
    else
        ret = RIO_ENOTFOUND;
    pthread_mutex_unlock(&s->mu);
    return ret;
}

void rio__srv_store_sweep(struct rio_srv_store *s, uint64_t now)
{
    pthread_mutex_lock(&s->mu);
    drop_expired_locked(s, now);
    for (size_t i = 0; i <= s->utab_mask && s->nup; i++) {
        struct rio_srv_upload **pp = &s->utab[i];
        while (*pp) {
            /* (Not while a chunk's bytes are still arriving: a large
             * chunk on a slow link took longer than the timeout, and
             * its upload went under it, the PUT lost for good.) */
            if (now >= (*pp)->deadline_ns && !(*pp)->writing) {
                SRV_INFO("upload reclaimed id=%llu key_len=%u received=%llu/%llu",
                         (unsigned long long)(*pp)->id, (*pp)->key_len,
                         (unsigned long long)(*pp)->ndone, (unsigned long long)(*pp)->nchunks);
                upload_remove_locked(s, pp);
                s->reclaimed++;
            } else {
                pp = &(*pp)->hnext;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
}
