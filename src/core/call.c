/* SPDX-License-Identifier: Apache-2.0 */
/*
 * One call: rio_put, rio_get, rio_get_alloc, rio_stat_call, rio_delete_call. A call
 * looks the object up (GET) or opens an upload (PUT) in the calling thread,
 * hands its chunks to the engine, hashes PUT chunks while the engine moves
 * them, waits for the fence, then commits or copies; a request the target
 * replaced or lost runs again (re-plans).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"

/* A batch's prepared requests held at once, at most (struct rio__call). */
#define RIO__AHEAD_MAX 128u

int rio__key_check(const char *key)
{
    if (!key) {
        rio__detail("the key is NULL");
        return RIO_EINVAL;
    }
    size_t n = strnlen(key, RIO_KEY_MAX + 1);
    if (n == 0 || n > RIO_KEY_MAX) {
        rio__detail(n ? "the key is longer than RIO_KEY_MAX (%d bytes)" : "the key is empty",
                    RIO_KEY_MAX);
        return RIO_EINVAL;
    }
    return 0;
}

int rio__call_check(const struct rio_call *opt)
{
    if (!opt)
        return 0;
    if (opt->flags & ~(RIO_ATOMIC | RIO_IF_ABSENT)) {
        rio__detail("call flags 0x%x: unknown bits 0x%x (known: RIO_ATOMIC, RIO_IF_ABSENT)",
                    opt->flags, opt->flags & ~(RIO_ATOMIC | RIO_IF_ABSENT));
        return RIO_EINVAL;
    }
    for (size_t i = 0; i < sizeof(opt->reserved) / sizeof(opt->reserved[0]); i++)
        if (opt->reserved[i]) {
            rio__detail("rio_call.reserved[%zu] is not zero (zero-initialise struct rio_call)", i);
            return RIO_EINVAL;
        }
    return 0;
}

int rio__call_new(struct rio_client *c, unsigned nreq, const struct rio_call *opt,
                  struct rio__call **out)
{
    int ret = rio__call_check(opt);
    if (ret < 0)
        return ret;
    struct rio__call *call = rio__calloc(1, sizeof(*call));
    if (!call)
        return -ENOMEM;
    call->reqs = rio__calloc(nreq, sizeof(*call->reqs));
    if (!call->reqs) {
        rio__free(call);
        return -ENOMEM;
    }
    if (pthread_cond_init(&call->cond, NULL) != 0) {
        rio__free(call->reqs);
        rio__free(call);
        return -ENOMEM;
    }
    if (pthread_cond_init(&call->md5_cond, NULL) != 0) {
        pthread_cond_destroy(&call->cond);
        rio__free(call->reqs);
        rio__free(call);
        return -ENOMEM;
    }
    call->c = c;
    call->nreq = nreq;
    call->deadline_ms = opt && opt->deadline_ms ? opt->deadline_ms : c->o.deadline_ms;
    if (opt) {
        call->flags = opt->flags;
        call->put_if = opt->flags & RIO_IF_ABSENT ? RIO__PUT_IF_ABSENT : 0;
        call->cancel = rio__cancel_ref(opt->cancel);
        call->want_stats = opt->stats != NULL;
        call->progress = opt->progress;
        call->progress_arg = opt->progress_arg;
    }
    for (unsigned i = 0; i < nreq; i++)
        call->reqs[i].call = call;
    *out = call;
    return 0;
}

void rio__call_mark_start(struct rio_client *c, struct rio__call *call, uint64_t bytes)
{
    uint64_t now = rio__now_ns();
    call->t0 = now;
    call->lat_rng = now;
    call->deadline_ns = call->deadline_ms == RIO_DEADLINE_NONE
                            ? UINT64_MAX
                            : now + (uint64_t)call->deadline_ms * 1000000ull;
    call->t0_cpu_caller = rio__thread_cpu_ns();
    call->t0_cpu_engine = c->engine_clock_ok ? rio__clock_ns(c->engine_clock) : 0;
    call->t0_cpu_transport = rio__t_cpu_ns(c->t);
    /* Only when stats are asked for, and for calls big enough to pay for
     * it: it reads /proc once per thread. */
    call->want_cpu_wait = call->want_stats && bytes >= RIO__CPU_WAIT_MIN_BYTES;
    if (call->want_cpu_wait)
        call->t0_run_delay = rio__proc_run_delay_ns();
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < c->npaths; i++)
        call->path_busy0[i] = rio__path_busy_now(&c->paths[i], now);
    pthread_mutex_unlock(&c->mu);
}

uint64_t rio__call_deadline_of(struct rio_client *c, const struct rio_call *opt, uint64_t t0)
{
    uint64_t ms = opt && opt->deadline_ms ? opt->deadline_ms : c->o.deadline_ms;
    return ms == RIO_DEADLINE_NONE ? UINT64_MAX : t0 + ms * 1000000ull;
}

/*
 * The way a descriptor enters the engine (a GET_ONE's answer passes the same
 * check: get_one_answered_locked): the transport's lookup, then the check of
 * every field (a hostile server's HEAD is as good as any), so
 * nothing is sized from geometry that contradicts itself. A bad one fails
 * the call with RIO_EPROTO and a line on stderr that names the field.
 */
static int client_lookup(struct rio_client *c, const struct rio__meta *m, const char *key,
                         uint64_t max_size, struct rio_desc *out, int64_t *mtime_ns)
{
    char why[192];
    int ret = rio__meta_lookup(c, m, key, max_size, out, mtime_ns);
    if (ret < 0)
        return ret;
    ret = rio__desc_check(out, key, why, sizeof(why));
    if (ret < 0) {
        rio__detail("%s server descriptor: %s", c->url.scheme, why);
        rio_desc_cleanup(out);
        memset(out, 0, sizeof(*out));
    }
    return ret;
}

/* A descriptor the caller holds (rio_reader_open_desc): checked like a
 * lookup's, copied with its checksum list, no round trip. */
static int desc_given(const struct rio_desc *d, const char *key, struct rio_desc *out)
{
    char why[192];
    int ret = rio__desc_check(d, key, why, sizeof(why));
    if (ret < 0) {
        rio__detail("descriptor given: %s", why);
        return RIO_EINVAL;
    }
    *out = *d;
    out->xxh = NULL;
    if (d->xxh && d->nchunks) {
        out->xxh = rio__malloc((size_t)d->nchunks * sizeof(*out->xxh));
        if (!out->xxh)
            return -ENOMEM;
        memcpy(out->xxh, d->xxh, (size_t)d->nchunks * sizeof(*out->xxh));
    }
    return 0;
}

void rio__get_plan_drop(struct rio_client *c, struct rio__get_plan *g)
{
    rio_desc_cleanup(&g->desc);
    if (g->staging)
        rio__stage_put(c, g->staging, g->staging_cap);
    rio__free(g->chunks);
    memset(g, 0, sizeof(*g));
}

/* Look r up and plan it (r->key, r->get_cap, r->expect_gen, r->prefetch set).
 * On error g holds nothing. */
int rio__get_plan(struct rio_client *c, struct rio__call *call, const struct rio__req *r,
                  struct rio__get_plan *g)
{
    struct rio__meta m;
    memset(g, 0, sizeof(*g));
    rio__meta_for_call(&m, call);
    /* A GET into a buffer takes no object larger than it: the lookup need
     * not take in the checksum list of one (a server's answer may carry
     * millions), which is refused below anyway. */
    uint64_t max_size = r->prefetch ? UINT64_MAX : r->get_cap;
    int ret = r->given && r->given->generation
                  ? desc_given(r->given, r->key, &g->desc)
                  : client_lookup(c, &m, r->key, max_size, &g->desc, NULL);
    if (ret < 0)
        goto err;
    ret = RIO_EGENERATION;
    if (r->expect_gen && g->desc.generation != r->expect_gen)
        goto err;
    ret = RIO_ETOOBIG;
    if (g->desc.size > r->get_cap && !r->prefetch)
        goto err;
    g->size = g->desc.size;
    g->chunk_size = g->desc.chunk_size ? g->desc.chunk_size : c->o.chunk_size;
    g->nchunks = g->size ? (g->size - 1) / g->chunk_size + 1 : 0;
    ret = RIO_EPROTO; /* checked by client_lookup; kept for the chunk count */
    if ((g->desc.xxh && g->desc.nchunks != g->nchunks) || g->nchunks > RIO__DESC_CHUNKS_MAX)
        goto err;
    /* An object railio did not write, uploaded in parts: checked by its
     * ETag where the transport can say its parts (rio__req_md5_plan), else
     * read unchecked. Only a GET of the whole object hashes every byte. */
    bool may = !g->desc.xxh && rio__req_md5_may(c, r, g->size);
    g->ck_algo = RIO__CK_NONE;
    if (may && rio__t_full_checksum(c->t, &g->desc, &g->ck_algo, &g->ck) < 0)
        g->ck_algo = RIO__CK_NONE;
    if (may && !g->desc.etag[0] && g->ck_algo == RIO__CK_NONE) { /* a CRC needs no parts */
        /* (the call's deadline and token bound its round trips) */
        ret = rio__meta_parts_of(c, &m, &g->desc, &g->md5_part, &g->md5_parts, g->md5_want);
        /* A server that could not say them now (its tries spent) fails
         * the GET as its lookup would: read unchecked, damage on the way
         * was handed out. What it cannot say (RIO_ENOTSUP): unchecked. */
        if (ret == -ENOMEM || ret == RIO_EDEADLINE || ret == RIO_ECANCELED ||
            (ret < 0 && rio__class_is_retryable(rio__err_class(ret))))
            goto err;
        if (ret < 0)
            g->md5_part = 0;
    }
    ret = -ENOMEM;
    if (!r->prefetch && (call->flags & RIO_ATOMIC) && g->size) {
        g->staging = rio__stage_get(c, g->size, &g->staging_cap);
        if (!g->staging)
            goto err;
    }
    /* A reader keeps chunk state for its window only (rio__req_prepare_get,
     * once the window is known), whatever the object's chunk count. */
    if (g->nchunks && !r->prefetch) {
        g->chunks = rio__calloc(g->nchunks, sizeof(*g->chunks));
        if (!g->chunks)
            goto err;
        for (uint64_t i = 0; i < g->nchunks; i++)
            g->chunks[i].idx = i;
    }
    return 0;
err:
    rio__get_plan_drop(c, g);
    return ret;
}

/* Move plan g into r (under mu when the engine may already see r). */
void rio__get_publish(struct rio__call *call, struct rio__req *r, struct rio__get_plan *g)
{
    r->desc = g->desc;
    r->size = g->size;
    r->generation = g->desc.generation;
    r->chunk_size = g->chunk_size;
    r->nchunks = g->nchunks;
    r->end = g->nchunks; /* a reader of a range lowers it */
    r->xxh = r->desc.xxh;
    r->md5_part = g->md5_part;
    r->md5_parts = g->md5_parts;
    memcpy(r->md5_want, g->md5_want, sizeof(r->md5_want));
    r->plan_ck_algo = g->ck_algo;
    r->plan_ck = g->ck;
    rio__req_md5_plan(call->c, r);
    r->chunks = g->chunks;
    if (g->staging) {
        r->staging = g->staging;
        r->staging_cap = g->staging_cap;
        __atomic_fetch_add(&call->bytes_staged, g->size, __ATOMIC_RELAXED);
        r->user = r->data;
        r->data = r->staging;
    }
    memset(g, 0, sizeof(*g));
}

/* What every request starts with: a valid key, a buffer (buf_ok: there is
 * one, or nothing needs one), and the request's own copy of the key. */
static int req_start(struct rio__req *r, int type, const char *key, bool buf_ok)
{
    int ret = rio__key_check(key);
    if (ret < 0)
        return ret;
    if (!buf_ok) {
        rio__detail("the buffer is NULL and its length is not 0");
        return RIO_EINVAL;
    }
    r->type = type;
    r->key = rio__strdup(key);
    return r->key ? 0 : -ENOMEM;
}

/* Set up a GET request: look it up now, or (defer) leave the lookup to the
 * call's workers (r->opening). */
int rio__req_prepare_get(struct rio_client *c, struct rio__call *call, struct rio__req *r,
                         const char *key, void *buf, size_t cap, uint64_t expect_gen, bool defer)
{
    struct rio__get_plan g;
    int ret = req_start(r, RIO_OP_GET, key, buf || !cap || r->prefetch);
    if (ret < 0)
        return ret;
    r->data = buf;
    r->get_cap = cap;
    r->expect_gen = expect_gen;
    /* Into a buffer of at most a chunk, no generation named, nothing
     * staged: looked up and read in one exchange where the transport can
     * (the engine's get_one_answered_locked). Until the answer the
     * request is one chunk of cap bytes; no lookup, no worker. A reader
     * of a whole object (cap: its guess, rio__get_alloc_guess) gets the
     * same into a ring of one slot of cap bytes (stream.c, reader_open). */
    if (rio__req_whole(r) && !r->given && !expect_gen && cap && cap <= c->o.chunk_size &&
        !(call->flags & RIO_ATOMIC) && !call->long_way && rio__t_get_one(c->t, key, cap)) {
        r->chunks = rio__calloc(1, sizeof(*r->chunks));
        if (!r->chunks)
            return -ENOMEM;
        r->get_one = true;
        r->size = cap;
        r->chunk_size = cap;
        r->nchunks = 1;
        r->end = 1;
        if (r->prefetch) {
            r->prefetch = 1;
            r->ring = rio__stage_get(c, cap, &r->staging_cap);
            if (!r->ring)
                return -ENOMEM;
            r->staging = r->ring;
            r->data = NULL;
            atomic_store(&r->window, 1);
        }
        return 0;
    }
    if (defer) {
        r->opening = true;
        return 0;
    }
    ret = rio__get_plan(c, call, r, &g);
    if (ret < 0)
        return ret;
    rio__get_publish(call, r, &g);
    if (r->prefetch) {
        /* A reader at an offset starts at the chunk holding it (verified
         * whole), and one of a range ends with the chunk holding its last
         * byte; at the very end, or for an empty range, nothing is left to
         * fetch. */
        if (r->read_from > r->size)
            return RIO_EINVAL;
        r->first = r->read_from == r->size ? r->nchunks : r->read_from / r->chunk_size;
        if (r->read_len < r->size - r->read_from)
            r->end = r->read_len ? (r->read_from + r->read_len - 1) / r->chunk_size + 1 : r->first;
        if ((r->first && r->first == r->nchunks) || (r->nchunks && r->end == r->first)) {
            r->decided = true;
            r->fenced = true;
        }
    }
    if (r->prefetch && r->end > r->first) {
        /* A reader: chunks land in a ring of prefetch slots. */
        if (r->prefetch > r->end - r->first)
            r->prefetch = (unsigned)(r->end - r->first);
        /* The ring counts against the client's budget: fewer slots when
         * chunks are large (one at least). */
        uint64_t fit = c->o.budget_bytes / r->chunk_size;
        if (r->prefetch > fit)
            r->prefetch = fit ? (unsigned)fit : 1;
        size_t ring;
        if (__builtin_mul_overflow((size_t)r->prefetch, r->chunk_size, &ring))
            return RIO_ETOOBIG;
        /* One slot (a small object, or a range in one chunk): the size of
         * that chunk, not a whole chunk_size, so a 64 KiB GET does not take
         * (and fault in) megabytes. */
        if (r->prefetch == 1 && r->size - r->first * r->chunk_size < ring)
            ring = (size_t)(r->size - r->first * r->chunk_size);
        r->ring = rio__stage_get(c, ring, &r->staging_cap);
        if (!r->ring)
            return -ENOMEM;
        r->staging = r->ring;
        r->data = NULL;
        /* Slot state is set as each chunk goes out (the engine's req_pick);
         * chunks before first and from end on are never fetched, and
         * count as done. */
        r->chunks = rio__calloc(r->prefetch, sizeof(*r->chunks));
        if (!r->chunks)
            return -ENOMEM;
        r->done = r->first + (r->nchunks - r->end);
        r->next_new = r->first;
        /* The window never passes end: chunks after the range never go out. */
        atomic_store(&r->window, r->first + r->prefetch);
    }
    return 0;
}

/* A PUT's chunk size: the client's, unless the target's own rules on parts
 * (a minimum part size, a maximum part count) say otherwise. A stream of
 * unknown size gets the minimum part size at least. */
uint64_t rio__put_chunk_size(struct rio_client *c, uint64_t len)
{
    uint64_t cs = c->o.chunk_size;
    if (len > cs) {
        if (cs < c->t->put_chunk_min)
            cs = c->t->put_chunk_min;
        uint64_t max = c->t->put_chunks_max;
        if (len != RIO_SIZE_UNKNOWN && max && (len - 1) / cs + 1 > max) {
            uint64_t need = (len - 1) / max + 1;
            cs = (need + (1u << 20) - 1) & ~(uint64_t)((1u << 20) - 1);
        }
    }
    return cs;
}

int rio__etag_mode(const struct rio_client *c)
{
    if (!rio__t_has_cap(c->t, RIO_CAP_ETAG))
        return RIO_ETAG_NONE;
    if (c->o.etag == RIO_ETAG_MD5)
        return RIO_ETAG_MD5;
    if (c->o.etag == RIO_ETAG_FAST && !c->t->etag_md5_only)
        return RIO_ETAG_FAST;
    return RIO_ETAG_NONE;
}

/* A PUT computes the stream MD5 only when asked and the backend stores it. */
bool rio__etag_wanted(const struct rio_client *c)
{
    return rio__etag_mode(c) == RIO_ETAG_MD5;
}

/* Set up a PUT request: open the upload, or (defer) leave that to the
 * call's workers (r->opening). */
int rio__req_prepare_put(struct rio_client *c, struct rio__req *r, const char *key, const void *buf,
                         size_t len, bool defer)
{
    int ret = req_start(r, RIO_OP_PUT, key, buf || !len);
    if (ret < 0)
        return ret;
    r->size = len;
    r->chunk_size = rio__put_chunk_size(c, len);
    r->nchunks = len ? (len - 1) / r->chunk_size + 1 : 0;
    /* Its per-chunk state is allocated at once: a length past the buffer
     * (1 PiB, 268 M chunks: 13 GiB zeroed before the first send) is
     * refused first. No more chunks than a descriptor may have (no GET
     * could read the object back). */
    if (r->nchunks > RIO__DESC_CHUNKS_MAX) {
        rio__detail("a PUT of %zu bytes in chunks of %llu bytes is %llu chunks, more than %llu: "
                    "a larger chunk size (option chunk) takes it",
                    len, (unsigned long long)r->chunk_size, (unsigned long long)r->nchunks,
                    (unsigned long long)RIO__DESC_CHUNKS_MAX);
        return RIO_EINVAL;
    }
    r->data = (uint8_t *)(uintptr_t)buf; /* read only: the engine only sends from it */
    r->want_md5 = rio__etag_wanted(c);
    if (r->want_md5) {
        ret = rio__md5_init(&r->md5);
        if (ret < 0)
            return ret;
    }
    if (r->nchunks) {
        r->xxh = rio__calloc(r->nchunks, sizeof(*r->xxh));
        r->hready = rio__calloc(r->nchunks, sizeof(*r->hready));
        r->chunks = rio__calloc(r->nchunks, sizeof(*r->chunks));
        if (!r->xxh || !r->hready || !r->chunks)
            return -ENOMEM;
        for (uint64_t i = 0; i < r->nchunks; i++)
            r->chunks[i].idx = i;
    }
    /* One chunk, unconditional, its etag known once it is hashed: opened,
     * sent and committed in one exchange where the transport can. */
    if (r->nchunks == 1 && !r->want_md5 && !r->call->put_if &&
        rio__t_put_one(c->t, key, len, r->chunk_size)) {
        r->one = true;
        return 0;
    }
    if (defer) {
        r->opening = true;
        return 0;
    }
    struct rio__meta m;
    rio__meta_for_call(&m, r->call);
    ret = rio__meta_put_open(c, &m, key, len, r->chunk_size, &r->upload);
    if (ret < 0)
        r->upload = NULL;
    else if (rio__t_has_put_prep(c->t))
        r->prep_upload = r->upload; /* open before hashing: prepared beside it */
    return ret;
}

/* The caller is done hashing r (pipelined commits: it may commit once
 * fenced). */
static void hash_done(struct rio_client *c, struct rio__req *r)
{
    if (!r->call->pipeline)
        return;
    pthread_mutex_lock(&c->mu);
    r->hash_done = true;
    rio__call_ready_locked(r->call, r);
    pthread_mutex_unlock(&c->mu);
}

/*
 * Hash the PUTs of a call while the engine sends. Each chunk's xxh3 gates
 * that chunk: the caller's thread and the client's cpu pool hash a PUT's
 * chunks at once, each thread taking the next one, so a chunk goes out as
 * soon as it and those before it are hashed and the caller's core is not
 * what limits the PUT. The stream MD5 (etag=md5 only) is serial within one
 * stream and an order of magnitude slower than xxh3 (docs/tuning.md): it
 * runs as a task of its own on the cpu pool beside the chunk hashes and
 * only gates the commit. A request that failed stops being hashed.
 */
static void md5_task(void *arg)
{
    struct rio__req *r = arg;
    struct rio__call *call = r->call;
    struct rio_client *c = call->c;
    uint64_t t0 = rio__now_ns();

    for (uint64_t k = 0; k < r->nchunks && !atomic_load(&r->stop_hashing); k++) {
        if (rio__md5_update(&r->md5, r->data + k * r->chunk_size, rio__req_chunk_len(r, k)) < 0) {
            /* Its chunks may all be sent already: the result, not only
             * the engine, must say it failed, so it is never committed. */
            r->result = -ENOMEM;
            rio__engine_fail_req(c, r, -ENOMEM);
            break;
        }
    }
    uint64_t ns = rio__now_ns() - t0;
    pthread_mutex_lock(&c->mu);
    r->md5_ns = ns;
    r->md5_running = false;
    pthread_cond_broadcast(&call->md5_cond);
    pthread_mutex_unlock(&c->mu);
}

/* Chunk k's xxh3 is set: mark it and move r->hashed past every chunk from
 * the first that is ready. Any thread may finish any chunk; whichever marks
 * the chunk at r->hashed moves it on (seq_cst: a thread that stops at a
 * chunk not yet ready is followed by the one that readies it). */
static bool hash_publish(struct rio__req *r, uint64_t k)
{
    bool moved = false;
    atomic_store(&r->hready[k], 1);
    for (;;) {
        uint64_t h = atomic_load(&r->hashed);
        if (h >= r->nchunks || !atomic_load(&r->hready[h]))
            return moved;
        if (atomic_compare_exchange_weak(&r->hashed, &h, h + 1))
            moved = true;
    }
}

/* One thread's share of hashing r's chunks (the caller and pool threads run
 * it at once); ends when no chunk is left or r failed. A thread takes the
 * chunks the transport wants prepared together (16 S3 Content-MD5s in
 * vector lanes), else one at a time; the first chunk alone all the same,
 * so that the first send waits for one chunk's work (one MD5 on its own
 * is faster than a lane of 16). */
static void hash_run(void *arg)
{
    struct rio__req *r = arg;
    struct rio_client *c = r->call->c;
    uint64_t t0 = rio__now_ns();
    unsigned g = r->prep_upload ? rio__t_put_prep_group(c->t, r->prep_upload) : 1;

    for (;;) {
        const void *src[RIO__PREP_MAX];
        uint64_t len[RIO__PREP_MAX];
        uint64_t k = atomic_load(&r->hash_next);
        unsigned n = 1;
        while (k < r->nchunks) {
            n = k == 0 ? 1 : r->nchunks - k < g ? (unsigned)(r->nchunks - k) : g;
            if (atomic_compare_exchange_weak(&r->hash_next, &k, k + n))
                break;
        }
        if (k >= r->nchunks || atomic_load(&r->stop_hashing))
            break;
        bool moved = false;
        for (unsigned i = 0; i < n; i++) {
            src[i] = r->data + (k + i) * r->chunk_size;
            len[i] = rio__req_chunk_len(r, k + i);
            r->xxh[k + i] = rio__xxh3(src[i], len[i]);
        }
        /* The transport's own work on the chunks (an S3 part's SHA-256 or
         * Content-MD5), here in parallel rather than at submit on the
         * engine thread. */
        if (r->prep_upload)
            rio__t_put_prep_n(c->t, r->prep_upload, r->base + k, n, src, len);
        for (unsigned i = 0; i < n; i++)
            moved |= hash_publish(r, k + i);
        if (moved)
            rio__engine_kick(c);
    }
    __atomic_fetch_add(&r->call->hash_ns, rio__now_ns() - t0, __ATOMIC_RELAXED);
}

/* Chunks one thread hashes before another is worth waking. */
#define HASH_SHARE_CHUNKS 2u

static void hash_puts(struct rio_client *c, struct rio__call *call)
{
    struct rio__job job;

    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (r->type != RIO_OP_PUT || atomic_load(&r->stop_hashing) || !r->nchunks) {
            hash_done(c, r);
            continue;
        }
        if (r->want_md5) {
            pthread_mutex_lock(&c->mu);
            r->md5_running = true;
            pthread_mutex_unlock(&c->mu);
            r->md5_posted = true;
            rio__pool_task(&c->cpu_pool, &r->md5_job, md5_task, r);
        }
        uint64_t helpers = r->nchunks / HASH_SHARE_CHUNKS;
        if (helpers > 1) {
            helpers--;
            rio__pool_share(&c->cpu_pool, &job,
                            helpers > UINT32_MAX ? UINT32_MAX : (unsigned)helpers, hash_run, r);
            hash_run(r);
            rio__pool_reclaim(&c->cpu_pool, &job);
        } else {
            hash_run(r);
        }
        if (!r->md5_posted)
            hash_done(c, r);
    }
    /* Every MD5 posted has ended before this returns (the commit reads it);
     * each request is done hashing, in order, as its MD5 ends. */
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (!r->md5_posted)
            continue;
        while (r->md5_running)
            pthread_cond_wait(&call->md5_cond, &c->mu);
        call->hash_ns += r->md5_ns;
        pthread_mutex_unlock(&c->mu);
        hash_done(c, r);
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
}

/*
 * Publish an upload (rio_put, a batch's PUTs, a writer): the descriptor from
 * its geometry, xxh3 list and (md5 not NULL) the stream MD5. Consumes the
 * upload whatever happens. Everything that can fail happens before the
 * commit: once the new generation is published the call must report
 * success. Sets *gen; out_desc (if any) gets a copy of the descriptor.
 */
/* The descriptor a commit publishes (xxh borrowed): geometry, xxh3 list,
 * and the etag (the stream MD5 when md5 is not NULL, else the fast one
 * where the client makes it). */
static int commit_desc(struct rio_client *c, const char *key, uint64_t size, uint64_t chunk_size,
                       uint64_t nchunks, uint64_t *xxh, struct rio_md5 *md5, struct rio_desc *d)
{
    memset(d, 0, sizeof(*d));
    memcpy(d->key, key, strlen(key) + 1);
    d->size = size;
    d->chunk_size = chunk_size;
    d->nchunks = nchunks;
    d->xxh = xxh;
    if (md5)
        return rio__md5_final(md5, d->etag);
    if (rio__etag_mode(c) == RIO_ETAG_FAST)
        rio__etag_fast(xxh, nchunks, size, chunk_size, d->etag);
    return 0;
}

int rio__commit_upload(struct rio_client *c, const struct rio__meta *m, const char *key,
                       void *upload, uint64_t size, uint64_t chunk_size, uint64_t nchunks,
                       uint64_t *xxh, struct rio_md5 *md5, uint64_t *gen, struct rio_desc *out_desc)
{
    struct rio_desc d;
    uint64_t *copy = NULL;
    int ret;

    ret = commit_desc(c, key, size, chunk_size, nchunks, xxh, md5, &d);
    if (ret == 0 && out_desc && nchunks) {
        copy = rio__malloc(nchunks * sizeof(uint64_t));
        if (copy)
            memcpy(copy, xxh, nchunks * sizeof(uint64_t));
        else
            ret = -ENOMEM;
    }
    if (ret < 0) {
        rio__t_put_abort(c->t, upload);
        return ret;
    }
    ret = rio__meta_put_commit(c, m, upload, &d);
    if (ret < 0) {
        rio__free(copy);
        return ret;
    }
    *gen = d.generation;
    if (out_desc) {
        *out_desc = d;
        out_desc->xxh = copy;
    }
    return 0;
}

/*
 * rio__req_commit of n requests of one call, no descriptor wanted: their
 * first tries go together (rio__meta_put_commit_many: one exchange with
 * the server where the transport can, and one wait), so a call worker
 * that finds several PUTs ready commits them in one go. Sets each result.
 */
void rio__req_commit_many(struct rio_client *c, struct rio__req **rs, unsigned n)
{
    struct rio_desc *ds = rio__calloc(n, sizeof(*ds));
    struct rio_desc **dp = rio__calloc(n, sizeof(*dp));
    void **ups = rio__calloc(n, sizeof(*ups));
    int *rets = rio__calloc(n, sizeof(*rets));
    unsigned *map = rio__calloc(n, sizeof(*map));
    struct rio__meta m;
    unsigned k = 0;

    if (n == 1 || !ds || !dp || !ups || !rets || !map) {
        for (unsigned i = 0; i < n; i++)
            rs[i]->result = rio__req_commit(c, rs[i], NULL);
        goto out;
    }
    rio__meta_for_call(&m, rs[0]->call);
    for (unsigned i = 0; i < n; i++) {
        struct rio__req *r = rs[i];
        void *up = r->upload;
        r->upload = NULL;
        int ret = commit_desc(c, r->key, r->size, r->chunk_size, r->nchunks, r->xxh,
                              r->want_md5 ? &r->md5 : NULL, &ds[k]);
        if (ret < 0) {
            rio__t_put_abort(c->t, up);
            r->result = ret;
            continue;
        }
        ups[k] = up;
        dp[k] = &ds[k];
        map[k++] = i;
    }
    rio__meta_put_commit_many(c, &m, ups, dp, rets, k);
    for (unsigned j = 0; j < k; j++) {
        struct rio__req *r = rs[map[j]];
        r->result = rets[j] < 0 ? rets[j] : 0;
        if (rets[j] >= 0)
            r->generation = ds[j].generation;
    }
out:
    rio__free(ds);
    rio__free(dp);
    rio__free(ups);
    rio__free(rets);
    rio__free(map);
}

int rio__req_commit(struct rio_client *c, struct rio__req *r, struct rio_desc *out_desc)
{
    void *upload = r->upload;
    struct rio__meta m;
    r->upload = NULL;
    rio__meta_for_call(&m, r->call);
    return rio__commit_upload(c, &m, r->key, upload, r->size, r->chunk_size, r->nchunks, r->xxh,
                              r->want_md5 ? &r->md5 : NULL, &r->generation, out_desc);
}

struct commit_job {
    struct rio_client *c;
    struct rio__call *call;
};

bool rio__commit_due(const struct rio__req *r)
{
    return r->type == RIO_OP_PUT && !r->one && r->result >= 0 && r->status >= 0;
}

static void commit_one(void *arg, unsigned i)
{
    struct commit_job *j = arg;
    struct rio__req *r = &j->call->reqs[i];
    if (rio__commit_due(r) && !r->committed)
        r->result = rio__req_commit(j->c, r, NULL);
}

/* A PUT its one op published: its generation, and the descriptor out_desc
 * (if any) asks for, as a commit would give it. */
static int one_done(struct rio_client *c, struct rio__req *r, struct rio_desc *out_desc)
{
    r->generation = r->one_gen;
    if (!out_desc)
        return 0;
    struct rio_desc d;
    int ret = commit_desc(c, r->key, r->size, r->chunk_size, r->nchunks, r->xxh, NULL, &d);
    if (ret < 0)
        return ret;
    d.generation = r->one_gen;
    d.xxh = rio__malloc(sizeof(uint64_t));
    if (!d.xxh)
        return -ENOMEM;
    d.xxh[0] = r->xxh[0];
    *out_desc = d;
    return 0;
}

/* Finish every request after the fence: commit PUTs (those the pipeline did
 * not), copy staged GETs, or abort. Sets r->result. */
static void finish_reqs(struct rio_client *c, struct rio__call *call, struct rio_desc *out_desc)
{
    unsigned due = 0;
    for (unsigned i = 0; i < call->nreq; i++)
        due += rio__commit_due(&call->reqs[i]) && !call->reqs[i].committed;
    bool parallel = due > 1 && !out_desc;
    if (parallel) {
        struct commit_job j = {.c = c, .call = call};
        rio__meta_parallel(c, call->nreq, due, commit_one, &j);
    }
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (r->result < 0) {
            /* failed before it reached the engine (or while hashing) */
        } else if (r->one && (r->status >= 0 || r->one_gen)) {
            /* Published by its one op (also when the call failed after:
             * the object is there, so the PUT succeeded). */
            r->result = one_done(c, r, out_desc);
        } else if (r->status < 0) {
            r->result = r->status;
            rio__engine_req_detail(c, r->status, r->last_err, rio__req_why(r, r->status));
            if (r->one && r->one_unsure) {
                rio__detail("the PUT went out whole and no answer came back (%s): the object "
                            "may or may not have been published",
                            rio_errname(r->status));
                r->result = RIO_EUNKNOWN;
            }
        } else if (r->type == RIO_OP_PUT) {
            if (!parallel && !r->committed)
                r->result = rio__req_commit(c, r, out_desc);
        } else {
            if (r->user && r->size) {
                uint64_t t0 = rio__now_ns();
                memcpy(r->user, r->staging, r->size);
                call->copy_ns += rio__now_ns() - t0;
            }
            r->result = (int64_t)r->size;
        }
        if (r->type == RIO_OP_PUT && r->upload) {
            rio__t_put_abort(c->t, r->upload);
            r->upload = NULL;
        }
    }
}

/* Admit a prepared call: deadlines, latency slots, hand it to the engine. */
int rio__call_start(struct rio_client *c, struct rio__call *call, const struct rio_call *opt)
{
    uint64_t total = 0;
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        /* A reader lives as long as its consumer reads: only an explicit
         * deadline bounds it (op timeouts still bound every chunk). */
        r->deadline_ns = r->ring && !(opt && opt->deadline_ms)
                             ? UINT64_MAX
                             : rio__call_deadline_of(c, opt, call->t0);
        total += (r->ring ? r->end : r->nchunks) - r->first;
        if (!r->get_one) /* its total counts once its answer says it */
            call->progress_total += r->size - rio__req_skipped(r);
    }
    if (total) {
        uint64_t keep = rio__lat_reserve_of(total);
        call->lat = rio__calloc(keep, sizeof(uint64_t));
        if (!call->lat)
            return -ENOMEM;
        call->lat_cap = keep;
    }
    call->lat_want = total;
    return rio__engine_submit(c, call);
}

/*
 * Run a prepared call: admit, hash, wait for the fence, finish, stats.
 * Requests whose preparation failed carry result < 0 and decided = true.
 */
int rio__call_run(struct rio_client *c, struct rio__call *call, const struct rio_call *opt,
                  struct rio_desc *out_desc)
{
    struct rio__job job;

    /* Set before the engine sees the call: it queues what it fences. */
    unsigned work = rio__pipeline_work(call, out_desc);
    call->pipeline = work > 0;
    unsigned max = rio__meta_threads(c), workers = work < max ? work : max;
    if (call->pipeline) {
        /* Enough held to keep every op slot busy while as many commits
         * run, and the transport's caches (open files) never outrun. */
        uint64_t ahead = (uint64_t)c->npaths * c->o.depth + 2ull * workers;
        if (ahead > RIO__AHEAD_MAX)
            ahead = RIO__AHEAD_MAX;
        if (c->t->uploads_max && ahead > c->t->uploads_max)
            ahead = c->t->uploads_max;
        call->ahead_max = (unsigned)ahead;
    }
    int ret = rio__call_start(c, call, opt);
    if (ret < 0)
        return ret;
    if (call->pipeline)
        rio__pool_share(&c->meta_pool, &job, workers ? workers - 1 : 0, rio__call_worker, call);
    hash_puts(c, call);
    if (call->pipeline) {
        pthread_mutex_lock(&c->mu);
        call->hashing_over = true;
        pthread_cond_broadcast(&call->cond);
        pthread_mutex_unlock(&c->mu);
        rio__call_worker_loop(c, call);
        rio__pool_reclaim(&c->meta_pool, &job);
    } else {
        rio__engine_wait(c, call);
    }
    finish_reqs(c, call, out_desc);
    return 0;
}

void rio__call_stats(struct rio_client *c, struct rio__call *call, const struct rio_call *opt)
{
    if (opt && opt->stats)
        rio__stats_fill(c, call, opt->stats);
}

/* A call that never reached the engine: abort what was opened, free it. */
void rio__call_abandon(struct rio_client *c, struct rio__call *call)
{
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (r->upload)
            rio__t_put_abort(c->t, r->upload);
        r->upload = NULL;
    }
    rio__call_free(call);
}

bool rio__replan_due(int type, int64_t result, const struct rio_call *opt)
{
    if (type == RIO_OP_GET)
        return (result == RIO_EGENERATION && !(opt && opt->expect_generation)) ||
               result == RIO__ENOTONE;
    return type == RIO_OP_PUT && result == RIO_ENOUPLOAD;
}

void rio__replan_note(struct rio__replan_acc *a, const struct rio_call *opt)
{
    a->replans++;
    if (opt && opt->stats)
        for (int k = 0; k < RIO_CLASS__COUNT; k++)
            a->retries[k] += opt->stats->retries[k];
}

void rio__replan_begin(struct rio__replan_acc *a, struct rio_client *c, const struct rio_call *opt)
{
    a->deadline_ns = c ? rio__call_deadline_of(c, opt, rio__now_ns()) : UINT64_MAX;
}

int rio__replan_opt(const struct rio__replan_acc *a, const struct rio_call *opt,
                    struct rio_call *local)
{
    if (opt)
        *local = *opt;
    else
        memset(local, 0, sizeof(*local));
    if (a->deadline_ns == UINT64_MAX)
        return 0;
    uint64_t now = rio__now_ns();
    if (now >= a->deadline_ns)
        return RIO_EDEADLINE;
    uint64_t left = (a->deadline_ns - now + 999999) / 1000000;
    local->deadline_ms = left < RIO_DEADLINE_NONE ? (uint32_t)left : RIO_DEADLINE_NONE - 1;
    return 0;
}

void rio__replan_stats(const struct rio__replan_acc *a, const struct rio_call *opt)
{
    if (!opt || !opt->stats)
        return;
    opt->stats->replans += a->replans;
    for (int k = 0; k < RIO_CLASS__COUNT; k++) {
        opt->stats->retries[k] += a->retries[k];
        opt->stats->retries_total += a->retries[k];
    }
}

static int put_once(struct rio_client *c, const char *key, const void *buf, size_t len,
                    const struct rio_call *opt, struct rio_desc *out_desc);
static int64_t get_once(struct rio_client *c, const char *key, void *buf, size_t cap,
                        const struct rio_call *opt, bool long_way);

int rio_put(struct rio_client *c, const char *key, const void *buf, size_t len,
            const struct rio_call *opt, struct rio_desc *out_desc)
{
    struct rio__replan_acc acc = {0};
    const struct rio_call *run = opt;
    struct rio_call local;
    int ret;

    rio__detail_clear();
    rio__replan_begin(&acc, c, opt);
    for (;;) {
        ret = put_once(c, key, buf, len, run, out_desc);
        if (!rio__replan_due(RIO_OP_PUT, ret, opt) || acc.replans >= RIO__REPLANS_MAX)
            break;
        int late = rio__replan_opt(&acc, opt, &local);
        if (late < 0) {
            ret = late; /* the stats stay the last run's */
            break;
        }
        rio__replan_note(&acc, opt);
        run = &local;
    }
    rio__replan_stats(&acc, opt);
    return ret;
}

int64_t rio_get(struct rio_client *c, const char *key, void *buf, size_t cap,
                const struct rio_call *opt)
{
    struct rio__replan_acc acc = {0};
    const struct rio_call *run = opt;
    struct rio_call local;
    int64_t ret;

    rio__detail_clear();
    bool long_way = false;
    rio__replan_begin(&acc, c, opt);
    for (;;) {
        ret = get_once(c, key, buf, cap, run, long_way);
        if (!rio__replan_due(RIO_OP_GET, ret, opt) || rio__replans_spent(&acc))
            break;
        /* An object its one op could not bring: looked up, then read. */
        long_way = true;
        int late = rio__replan_opt(&acc, opt, &local);
        if (late < 0) {
            ret = late; /* the stats stay the last run's */
            break;
        }
        rio__replan_note(&acc, opt);
        acc.not_one += ret == RIO__ENOTONE;
        run = &local;
    }
    rio__replan_stats(&acc, opt);
    return ret;
}

/* One try of a single-key PUT (type RIO_OP_PUT: src) or GET (dst; given:
 * its descriptor, planned from instead of a lookup, or NULL): its result,
 * or the error of preparing or running it. */
static int64_t single_once(struct rio_client *c, int type, const char *key, const void *src,
                           void *dst, size_t len, const struct rio_call *opt,
                           struct rio_desc *out_desc, const struct rio_desc *given, bool long_way)
{
    struct rio__call *call;
    int ret;

    if (rio__client_unusable(c))
        return RIO_EINVAL;
    if (opt && opt->stats)
        memset(opt->stats, 0, sizeof(*opt->stats));
    if (type == RIO_OP_PUT && opt && opt->expect_generation && (opt->flags & RIO_IF_ABSENT)) {
        rio__detail("a PUT takes RIO_IF_ABSENT or expect_generation, not both");
        return RIO_EINVAL;
    }
    if (type == RIO_OP_PUT && opt && opt->expect_generation == RIO__PUT_IF_ABSENT) {
        /* The transports' "if absent": taken as a generation, it published
         * where the key held nothing and refused any object. */
        rio__detail("expect_generation UINT64_MAX is no generation");
        return RIO_EINVAL;
    }
    ret = rio__call_new(c, 1, opt, &call);
    if (ret < 0)
        return ret;
    if (type == RIO_OP_PUT && opt && opt->expect_generation)
        call->put_if = opt->expect_generation;
    call->long_way = long_way;
    rio__call_mark_start(c, call, len);
    struct rio__req *r = &call->reqs[0];
    r->given = given;
    ret = type == RIO_OP_PUT ? rio__req_prepare_put(c, r, key, src, len, false)
                             : rio__req_prepare_get(c, call, r, key, dst, len,
                                                    opt ? opt->expect_generation : 0, false);
    r->given = NULL;
    if (ret < 0)
        goto err_call;
    ret = rio__call_run(c, call, opt, out_desc);
    if (ret < 0)
        goto err_call;
    int64_t res = r->result;
    rio__call_stats(c, call, opt);
    rio__call_release(c, call);
    return res;
err_call:
    rio__call_abandon(c, call);
    return ret;
}

static int put_once(struct rio_client *c, const char *key, const void *buf, size_t len,
                    const struct rio_call *opt, struct rio_desc *out_desc)
{
    return (int)single_once(c, RIO_OP_PUT, key, buf, NULL, len, opt, out_desc, NULL, false);
}

static int64_t get_once(struct rio_client *c, const char *key, void *buf, size_t cap,
                        const struct rio_call *opt, bool long_way)
{
    return single_once(c, RIO_OP_GET, key, NULL, buf, cap, opt, NULL, NULL, long_way);
}

static int64_t get_alloc_once(struct rio_client *c, const char *key, void **out,
                              const struct rio_call *opt, struct rio__replan_acc *acc);

/* A buffer of n bytes for the caller (free(3)), not the library's pool. A
 * large one is 2 MiB-aligned with huge pages advised: the transport's first
 * touch of it then faults once per 2 MiB, not once per 4 KiB. */
static void *alloc_for_caller(size_t n)
{
    void *buf = NULL;
    if (n >= (2u << 20)) {
        if (posix_memalign(&buf, 2u << 20, n) != 0)
            return NULL;
        (void)madvise(buf, n, MADV_HUGEPAGE);
        return buf;
    }
    return malloc(n ? n : 1);
}

/* What rio_get_alloc guesses an object's size is when it has seen none on
 * this client yet, and the least it guesses (a buffer from the heap); at
 * most a chunk either way. */
#define GET_ALLOC_GUESS_FIRST (256u * 1024u)
#define GET_ALLOC_GUESS_MIN (64u * 1024u)

/* The buffer rio_get_alloc first asks for key's object into, in one
 * exchange (rio__t_get_one: the lookup and the bytes together): as large
 * as the last object it fetched on this client (c->get_alloc_hint), so
 * that a run of objects of one size gets each in one exchange while one of
 * large objects does not pay a try per object; 0 when it looks up first:
 * a GET naming a generation or RIO_ATOMIC, a guess over a chunk, or a
 * transport that cannot. */
size_t rio__get_alloc_guess(struct rio_client *c, const char *key, const struct rio_call *opt)
{
    if (!c || !key || (opt && (opt->expect_generation || (opt->flags & RIO_ATOMIC))))
        return 0;
    uint64_t hint = __atomic_load_n(&c->get_alloc_hint, __ATOMIC_RELAXED), chunk = c->o.chunk_size;
    uint64_t least = chunk < GET_ALLOC_GUESS_MIN ? chunk : GET_ALLOC_GUESS_MIN;
    uint64_t g = !hint          ? (chunk < GET_ALLOC_GUESS_FIRST ? chunk : GET_ALLOC_GUESS_FIRST)
                 : hint < least ? least
                                : hint;
    if (g > chunk || g > SIZE_MAX || rio__key_check(key) < 0 || !rio__t_get_one(c->t, key, g))
        return 0;
    return (size_t)g;
}

/* rio_get_alloc's first try (rio__get_alloc_guess): a rio_get into a buffer of
 * the guess, shrunk to what came. An object larger than the guess is
 * RIO_ETOOBIG, one of several chunks RIO__ENOTONE, a guess over what is
 * left of a budget_mode fail budget RIO_EBUSY: the caller then looks it up
 * and reads it. */
static int64_t get_alloc_one(struct rio_client *c, const char *key, size_t guess, void **out,
                             const struct rio_call *opt)
{
    void *buf = alloc_for_caller(guess);
    if (!buf)
        return -ENOMEM;
    int64_t ret = get_once(c, key, buf, guess, opt, false);
    if (ret < 0) {
        free(buf);
        return ret;
    }
    if ((size_t)ret < guess) {
        void *fit = realloc(buf, ret ? (size_t)ret : 1);
        buf = fit ? fit : buf; /* a failed shrink leaves the buffer as it was */
    }
    __atomic_store_n(&c->get_alloc_hint, (uint64_t)ret, __ATOMIC_RELAXED);
    *out = buf;
    return ret;
}

int64_t rio_get_alloc(struct rio_client *c, const char *key, void **out, const struct rio_call *opt)
{
    struct rio__replan_acc acc = {0};
    const struct rio_call *run = opt;
    struct rio_call local;
    int64_t ret;

    rio__detail_clear();
    if (!out)
        return RIO_EINVAL;
    *out = NULL;
    if (rio__client_unusable(c))
        return RIO_EINVAL;
    rio__replan_begin(&acc, c, opt);
    size_t guess = rio__get_alloc_guess(c, key, opt);
    bool one = guess != 0;
    for (;;) {
        ret = one ? get_alloc_one(c, key, guess, out, run) : get_alloc_once(c, key, out, run, &acc);
        /* Larger than the guess, or not one chunk: looked up, then read
         * into a buffer of its size; not a failed re-plan. So is a guess
         * the budget had no room for (budget_mode fail): the object, no
         * larger than the guess, may fit. */
        bool not_one = one && (ret == RIO_ETOOBIG || ret == RIO__ENOTONE || ret == RIO_EBUSY);
        one = false;
        if ((!not_one && !rio__replan_due(RIO_OP_GET, ret, opt)) || rio__replans_spent(&acc))
            break;
        int late = rio__replan_opt(&acc, opt, &local);
        if (late < 0) {
            ret = late; /* the stats stay the last run's */
            break;
        }
        rio__replan_note(&acc, opt);
        acc.not_one += not_one;
        run = &local;
    }
    rio__replan_stats(&acc, opt);
    return ret;
}

/* The lookup of rio_get_alloc, bounded by the call's deadline and cancel
 * token as a rio_get's is, its failed tries counted in acc. */
static int get_alloc_lookup(struct rio_client *c, const char *key, const struct rio_call *opt,
                            struct rio_desc *d, uint64_t *deadline_ns, struct rio__replan_acc *acc)
{
    struct rio__call *call;
    struct rio__meta m;
    int ret = rio__call_new(c, 1, opt, &call);
    if (ret < 0)
        return ret;
    rio__call_mark_start(c, call, 0);
    rio__meta_for_call(&m, call);
    ret = client_lookup(c, &m, key, UINT64_MAX, d, NULL);
    *deadline_ns = call->deadline_ns;
    for (int k = 0; k < RIO_CLASS__COUNT; k++)
        acc->retries[k] += call->retries[k];
    rio__call_free(call);
    return ret;
}

static int64_t get_alloc_once(struct rio_client *c, const char *key, void **out,
                              const struct rio_call *opt, struct rio__replan_acc *acc)
{
    struct rio_desc d;
    uint64_t t0 = rio__now_ns(), deadline_ns;
    int64_t ret;

    *out = NULL;
    memset(&d, 0, sizeof(d));
    ret = rio__key_check(key);
    if (ret >= 0)
        ret = get_alloc_lookup(c, key, opt, &d, &deadline_ns, acc);
    if (ret < 0) {
        if (opt && opt->stats) {
            memset(opt->stats, 0, sizeof(*opt->stats));
            opt->stats->elapsed_ns = rio__now_ns() - t0;
        }
        return ret;
    }
    __atomic_store_n(&c->get_alloc_hint, d.size, __ATOMIC_RELAXED);
    void *buf = alloc_for_caller(d.size);
    if (!buf) {
        rio_desc_cleanup(&d);
        return -ENOMEM;
    }
    struct rio_call local;
    if (opt)
        local = *opt;
    else
        memset(&local, 0, sizeof(local));
    if (!local.expect_generation)
        local.expect_generation = d.generation;
    /* The GET has what is left of the deadline the lookup started. */
    if (deadline_ns != UINT64_MAX) {
        uint64_t now = rio__now_ns();
        uint64_t left = deadline_ns > now ? (deadline_ns - now + 999999) / 1000000 : 0;
        if (!left) {
            rio_desc_cleanup(&d);
            free(buf);
            if (opt && opt->stats) {
                memset(opt->stats, 0, sizeof(*opt->stats));
                opt->stats->elapsed_ns = now - t0;
            }
            return RIO_EDEADLINE;
        }
        local.deadline_ms = left < RIO_DEADLINE_NONE ? (uint32_t)left : RIO_DEADLINE_NONE - 1;
    }
    /* Planned from the lookup's descriptor (its checksums): one lookup, not
     * a second one for the GET. A generation replaced meanwhile fails the
     * READs (RIO_EGENERATION) and the call is planned again. */
    ret = single_once(c, RIO_OP_GET, key, NULL, buf, d.size, &local, NULL, &d, true);
    rio_desc_cleanup(&d);
    if (ret < 0) {
        free(buf);
        return ret;
    }
    *out = buf;
    return ret;
}

/*
 * A metadata call on key (rio_stat_call, rio_delete_call): the key and the
 * call's options checked, then m bounded by the call's deadline (the
 * client's when it sets none) and its cancel token, its failed tries
 * counted in retries, its progress callback run while it waits; its
 * deadline from t0, when the call began. Flags mean nothing here:
 * RIO_EINVAL, as unknown bits are elsewhere.
 */
static int meta_for_key(struct rio_client *c, const char *key, const struct rio_call *opt,
                        struct rio__meta *m, uint64_t *retries, uint64_t t0)
{
    int ret = rio__key_check(key);
    if (ret == 0)
        ret = rio__call_check(opt);
    if (ret < 0)
        return ret;
    if (opt && opt->flags) {
        rio__detail("call flags 0x%x: a stat or a delete takes none", opt->flags);
        return RIO_EINVAL;
    }
    rio__meta_for_client(m, c);
    m->deadline_ns = rio__call_deadline_of(c, opt, t0);
    m->cancel = opt ? opt->cancel : NULL;
    m->retries = retries;
    if (opt) {
        m->progress = opt->progress;
        m->progress_arg = opt->progress_arg;
    }
    return 0;
}

/* What a metadata call did, into opt->stats: its time and its failed
 * tries; nothing moved, so the rest is zero. */
static void meta_stats(const struct rio_call *opt, uint64_t t0, const uint64_t *retries)
{
    if (!opt || !opt->stats)
        return;
    struct rio_stats *st = opt->stats;
    memset(st, 0, sizeof(*st));
    st->elapsed_ns = rio__now_ns() - t0;
    for (unsigned i = 0; i < RIO_CLASS__COUNT; i++) {
        st->retries[i] = retries[i];
        st->retries_total += retries[i];
    }
}

int rio_stat(struct rio_client *c, const char *key, struct rio_desc *out)
{
    return rio_stat_call(c, key, out, NULL, NULL);
}

int rio_stat_mtime(struct rio_client *c, const char *key, struct rio_desc *out, int64_t *mtime_ns)
{
    return rio_stat_call(c, key, out, mtime_ns, NULL);
}

int rio_stat_call(struct rio_client *c, const char *key, struct rio_desc *out, int64_t *mtime_ns,
                  const struct rio_call *call)
{
    uint64_t t0 = rio__now_ns(), retries[RIO_CLASS__COUNT] = {0};
    struct rio__meta m;
    int ret;

    rio__detail_clear();
    if (mtime_ns)
        *mtime_ns = 0;
    if (!out || rio__client_unusable(c)) {
        ret = RIO_EINVAL;
        goto out;
    }
    ret = meta_for_key(c, key, call, &m, retries, t0);
    if (ret == 0 && call && call->expect_generation) {
        rio__detail("rio_stat_call: expect_generation is not taken (compare out->generation)");
        ret = RIO_EINVAL;
    }
    if (ret < 0)
        goto out;
    memset(out, 0, sizeof(*out));
    ret = client_lookup(c, &m, key, UINT64_MAX, out, mtime_ns);
    if (ret < 0 && mtime_ns)
        *mtime_ns = 0;
out:
    meta_stats(call, t0, retries);
    return ret;
}

int rio_delete(struct rio_client *c, const char *key)
{
    return rio_delete_call(c, key, NULL);
}

int rio_delete_if(struct rio_client *c, const char *key, uint64_t generation)
{
    struct rio_call call = {.expect_generation = generation};

    /* 0 is no condition to rio_delete_call; here it is a caller's error. */
    if (!generation) {
        rio__detail_clear();
        return RIO_EINVAL;
    }
    return rio_delete_call(c, key, &call);
}

/* The removal itself: on a condition when gen is not 0. */
static int delete_run(struct rio_client *c, const struct rio__meta *m, const char *key,
                      uint64_t gen)
{
    if (!gen)
        return rio__meta_remove(c, m, key);
    if (gen == UINT64_MAX) {
        rio__detail("expect_generation UINT64_MAX is no generation");
        return RIO_EINVAL;
    }
    if (!rio__t_has_remove_if(c->t)) {
        rio__detail("this backend cannot remove on a condition (rio_delete_if): nothing removed");
        return RIO_ENOTSUP;
    }
    return rio__meta_remove_if(c, m, key, gen);
}

int rio_delete_call(struct rio_client *c, const char *key, const struct rio_call *call)
{
    uint64_t t0 = rio__now_ns(), retries[RIO_CLASS__COUNT] = {0};
    struct rio__meta m;
    int ret;

    rio__detail_clear();
    ret = rio__client_unusable(c) ? RIO_EINVAL : meta_for_key(c, key, call, &m, retries, t0);
    if (ret == 0)
        ret = delete_run(c, &m, key, call ? call->expect_generation : 0);
    meta_stats(call, t0, retries);
    return ret;
}

int rio__compose(struct rio_client *c, const char *dst, const char *const *srcs,
                 const uint64_t *gens, unsigned n, unsigned flags, uint64_t dst_if,
                 struct rio_desc *out)
{
    char why[128];
    int ret;

    rio__detail_clear();
    if (!c || !srcs || !out || n == 0)
        return RIO_EINVAL;
    ret = rio__key_check(dst);
    for (unsigned i = 0; i < n && ret == 0; i++)
        ret = rio__key_check(srcs[i]);
    if (ret < 0)
        return ret;
    memset(out, 0, sizeof(*out));
    ret = rio__t_compose(c->t, dst, srcs, gens, n, flags, dst_if, out);
    if (ret < 0)
        return ret;
    /* A transport's descriptor is checked once before anyone sizes from it. */
    if (rio__desc_check(out, dst, why, sizeof(why)) < 0) {
        rio__detail("compose: the backend's descriptor is malformed: %s", why);
        rio_desc_cleanup(out);
        return RIO_EPROTO;
    }
    return 0;
}
