/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Streaming: the reader (a GET whose chunks land in a ring of prefetch
 * slots, handed out in order as each verifies) and the writer (a PUT fed
 * chunk by chunk, each slot sent as a part of one upload, committed at
 * close). Both are on their client's list so rio_client_destroy can end them.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"
#include "core/stream.h"

/* ------------------------------------------------------------ streams */

static void stream_link(struct rio_client *c, struct rio__stream *st, int kind)
{
    st->kind = kind;
    pthread_mutex_lock(&c->mu);
    rio_list_push_front(&c->streams, &st->node);
    pthread_mutex_unlock(&c->mu);
}

static void stream_unlink(struct rio_client *c, struct rio__stream *st)
{
    pthread_mutex_lock(&c->mu);
    rio_list_remove(&c->streams, &st->node);
    pthread_mutex_unlock(&c->mu);
}

/* ------------------------------------------------------------- reader */

struct rio_reader {
    struct rio__stream st; /* first: the client's list */
    struct rio_client *c;  /* NULL once the client is destroyed */
    struct rio__call *call;
    struct rio__req *r;
    struct rio_stats *stats;
    uint64_t next;              /* chunk being consumed */
    uint64_t pos;               /* bytes of it already handed out */
    uint64_t stop;              /* the range's end: no byte from here on is handed out */
    uint64_t t_out;             /* when the caller last left rio_reader_read; 0: in the library */
    struct rio__replan_acc acc; /* a one-exchange try before the call: its stats */
    int err;
};

/* The caller is back in the reader: its time away was its consumer's. */
static void reader_back(struct rio_reader *rd)
{
    if (rd->t_out && rd->call)
        rd->call->sink_ns += rio__now_ns() - rd->t_out;
    rd->t_out = 0;
}

int rio_reader_open(struct rio_client *c, const char *key, unsigned prefetch,
                    const struct rio_call *opt, struct rio_reader **out)
{
    return rio_reader_open_at(c, key, 0, prefetch, opt, out);
}

/* A reader's first try at a whole object in one exchange (r->get_one):
 * wait for its answer. 0 with the object in r's one slot, RIO__ENOTONE
 * when it did not come in it (larger than the guess, several chunks: look
 * it up), or the request's error (the call is then over). */
static int reader_one(struct rio_client *c, struct rio__call *call, struct rio__req *r)
{
    pthread_mutex_lock(&c->mu);
    while (!rio__req_chunk_done(r, 0) && !(r->decided && r->status < 0))
        if (!rio__call_progress_locked(c, call))
            pthread_cond_wait(&call->cond, &c->mu);
    bool ok = rio__req_chunk_done(r, 0);
    int status = r->status, last_err = r->last_err;
    uint64_t size = r->size;
    pthread_mutex_unlock(&c->mu);
    if (ok) {
        /* The descriptor handed out (rio_reader_desc) is a lookup's: with
         * its chunk's xxh3, which the answer checked the bytes against. */
        if (r->desc.nchunks == 1 && !r->desc.xxh && r->xxh) {
            r->desc.xxh = rio__malloc(sizeof(*r->desc.xxh));
            if (!r->desc.xxh)
                return -ENOMEM;
            r->desc.xxh[0] = r->xxh[0];
        }
        __atomic_store_n(&c->get_alloc_hint, size, __ATOMIC_RELAXED);
        return 0;
    }
    rio__engine_req_detail(c, status, last_err, rio__req_why(r, status));
    return status == RIO_ETOOBIG ? RIO__ENOTONE : status < 0 ? status : RIO_EPROTO;
}

/* A reader of [offset, offset + length) of key (length UINT64_MAX: to the
 * end), planned from d when given, else from a lookup; a whole object,
 * where the transport can, first asked for in one exchange into a buffer
 * of the size the last object this client fetched had (reader_one), and
 * looked up when it did not come in it. */
static int reader_open(struct rio_client *c, const char *key, const struct rio_desc *d,
                       uint64_t offset, uint64_t length, unsigned prefetch,
                       const struct rio_call *opt, struct rio_reader **out)
{
    struct rio_reader *rd;
    struct rio__call *call;
    struct rio__replan_acc acc = {0};
    struct rio_call local;
    const struct rio_call *run = opt;
    struct rio__req *r;
    int ret;

    rd = rio__calloc(1, sizeof(*rd));
    if (!rd)
        return -ENOMEM;
    size_t guess =
        !d && offset == 0 && length == UINT64_MAX ? rio__get_alloc_guess(c, key, opt) : 0;
    /* Only a deadline given to the call bounds a reader (rio__call_start),
     * its run the long way included. */
    if (opt && opt->deadline_ms)
        rio__replan_begin(&acc, c, opt);
    else
        acc.deadline_ns = UINT64_MAX;
    for (;;) {
        ret = rio__call_new(c, 1, run, &call);
        if (ret < 0)
            goto err_rd;
        call->long_way = !guess;
        rio__call_mark_start(c, call, UINT64_MAX);
        r = &call->reqs[0];
        r->prefetch = prefetch ? prefetch : c->o.depth * c->npaths;
        r->read_from = offset;
        r->read_len = length;
        r->given = d;
        ret = rio__req_prepare_get(c, call, r, key, NULL, guess, opt ? opt->expect_generation : 0,
                                   false);
        r->given = NULL;
        if (ret < 0)
            goto err_call;
        /* Looked up: the size the next guess follows (reader_one sets it
         * for an object that came in one exchange). */
        if (!r->get_one && !d && offset == 0 && length == UINT64_MAX)
            __atomic_store_n(&c->get_alloc_hint, r->size, __ATOMIC_RELAXED);
        ret = rio__call_start(c, call, run);
        if (ret == RIO_EBUSY && r->get_one) {
            /* A guess a budget_mode fail budget had no room for: the
             * object, no larger than it, may fit (as for rio_get_alloc). */
            rio__call_abandon(c, call);
        } else if (ret < 0) {
            goto err_call;
        } else {
            if (!r->get_one)
                break;
            ret = reader_one(c, call, r);
            if (ret == 0)
                break;
            /* Its one exchange is over: the call with it (its failed
             * attempts, and the run again, count in the reader's stats). */
            rio__engine_wait(c, call);
            for (int k = 0; k < RIO_CLASS__COUNT; k++)
                acc.retries[k] += call->retries[k];
            acc.replans += ret == RIO__ENOTONE;
            rio__call_release(c, call);
            if (ret != RIO__ENOTONE)
                goto err_rd;
        }
        guess = 0; /* looked up, then read */
        ret = rio__replan_opt(&acc, opt, &local);
        if (ret < 0)
            goto err_rd;
        run = &local;
    }
    rd->c = c;
    rd->call = call;
    rd->r = r;
    /* The cursor: the chunk holding offset, which is fetched and verified
     * whole; its bytes before offset are never handed out. */
    rd->next = r->first;
    rd->pos = r->first < r->nchunks ? offset - r->first * r->chunk_size : 0;
    rd->stop = length < r->size - offset ? offset + length : r->size;
    rd->stats = opt ? opt->stats : NULL;
    rd->acc = acc;
    if (rd->stats)
        memset(rd->stats, 0, sizeof(*rd->stats));
    stream_link(c, &rd->st, RIO__STREAM_READER);
    rd->t_out = rio__now_ns();
    *out = rd;
    return 0;
err_call:
    rio__call_abandon(c, call);
err_rd:
    rio__free(rd);
    return ret;
}

int rio_reader_open_at(struct rio_client *c, const char *key, uint64_t offset, unsigned prefetch,
                       const struct rio_call *opt, struct rio_reader **out)
{
    rio__detail_clear();
    if (!out || rio__client_unusable(c))
        return RIO_EINVAL;
    *out = NULL;
    return reader_open(c, key, NULL, offset, UINT64_MAX, prefetch, opt, out);
}

int rio_reader_open_desc(struct rio_client *c, const struct rio_desc *d, uint64_t offset,
                         uint64_t length, unsigned prefetch, const struct rio_call *opt,
                         struct rio_reader **out)
{
    rio__detail_clear();
    if (!d || !out || !memchr(d->key, '\0', sizeof(d->key)) || rio__client_unusable(c))
        return RIO_EINVAL;
    *out = NULL;
    return reader_open(c, d->key, d, offset, length, prefetch, opt, out);
}

const struct rio_desc *rio_reader_desc(const struct rio_reader *rd)
{
    return rd && rd->r ? &rd->r->desc : NULL;
}

/* The stream's request failed with status (its last attempt's error
 * last_err): the caller's error, with its detail where no path could
 * finish it, as a whole-object call's (finish_reqs). mu not held. */
static int reader_failed(struct rio_reader *rd, int status, int last_err)
{
    rio__engine_req_detail(rd->c, status, last_err, rio__req_why(rd->r, status));
    return rd->err = status;
}

/* Wait until the chunk under the cursor is verified; point at its unread
 * bytes. Returns 1 with the bytes set, 0 at the end, or an error. */
static int reader_peek(struct rio_reader *rd, const uint8_t **p, size_t *n)
{
    struct rio__req *r = rd->r;
    if (rd->err)
        return rd->err;
    if (rd->next >= r->end || rd->next * r->chunk_size + rd->pos >= rd->stop)
        return 0;
    pthread_mutex_lock(&rd->c->mu);
    while (!rio__req_chunk_done(r, rd->next) && !(r->decided && r->status < 0))
        if (!rio__call_progress_locked(rd->c, rd->call))
            pthread_cond_wait(&rd->call->cond, &rd->c->mu);
    bool ok = rio__req_chunk_done(r, rd->next);
    int status = r->status, last_err = r->last_err;
    pthread_mutex_unlock(&rd->c->mu);
    if (!ok)
        return reader_failed(rd, status < 0 ? status : RIO_EPROTO, last_err);
    uint64_t off = rd->next * r->chunk_size;
    uint64_t clen = rd->stop - off < r->chunk_size ? rd->stop - off : r->chunk_size;
    *p = r->ring + (rd->next % r->prefetch) * r->chunk_size + rd->pos;
    *n = (size_t)(clen - rd->pos);
    return 1;
}

/* Hand n bytes of the current chunk out; a finished chunk frees its slot
 * for the chunk prefetch places ahead. */
static void reader_consume(struct rio_reader *rd, size_t n, size_t avail)
{
    rd->pos += n;
    if (n < avail)
        return;
    rd->next++;
    rd->pos = 0;
    atomic_store(&rd->r->window, rd->next + rd->r->prefetch);
    rio__engine_kick(rd->c);
}

int64_t rio_reader_read(struct rio_reader *rd, void *buf, size_t n)
{
    const uint8_t *p;
    size_t avail;

    rio__detail_clear();
    if (!rd || (!buf && n) || (rd->c && rio__client_unusable(rd->c)))
        return RIO_EINVAL;
    reader_back(rd);
    int64_t ret = reader_peek(rd, &p, &avail);
    if (ret > 0) {
        size_t k = n < avail ? n : avail;
        memcpy(buf, p, k);
        reader_consume(rd, k, avail);
        ret = (int64_t)k;
    }
    rd->t_out = rio__now_ns();
    return ret;
}

/* End the reader's call: cancel what is left (err) unless it was read to
 * the end, fence it, fill the stats, release it. Returns the outcome. */
static int reader_end(struct rio_reader *rd, int err)
{
    struct rio_client *c = rd->c;
    struct rio__req *r = rd->r;
    bool complete =
        !rd->err && (rd->next >= r->end || rd->next * r->chunk_size + rd->pos >= rd->stop);
    reader_back(rd);
    stream_unlink(c, &rd->st);
    if (!complete)
        rio__engine_fail_req(c, r, err);
    /* The fence: nothing of the reader is in flight once this returns. */
    rio__engine_wait(c, rd->call);
    int ret = rd->err ? rd->err : complete ? 0 : err;
    r->result = ret < 0 ? ret : (int64_t)r->size;
    if (rd->stats) {
        struct rio_call sc = {.stats = rd->stats};
        rio__stats_fill(c, rd->call, rd->stats);
        rio__replan_stats(&rd->acc, &sc);
    }
    rio__call_release(c, rd->call);
    rd->call = NULL;
    rd->r = NULL;
    rd->c = NULL;
    return ret;
}

/* The client is being destroyed: end the reader now; later reads and the
 * close answer RIO_ECLOSED. */
void rio__reader_invalidate(struct rio_reader *rd)
{
    reader_end(rd, RIO_ECLOSED);
    rd->err = RIO_ECLOSED;
}

int rio_reader_close(struct rio_reader *rd)
{
    if (!rd)
        return 0;
    /* In a child after fork() the fetches to stop are the parent's: leave
     * the copy alone (rio_client_destroy does the same there). */
    if (rd->c && rio__client_unusable(rd->c))
        return RIO_EINVAL;
    int ret = rd->c ? reader_end(rd, RIO_ECANCELED) : RIO_ECLOSED;
    rio__free(rd);
    return ret;
}

int64_t rio_get_stream(struct rio_client *c, const char *key, unsigned prefetch,
                       int (*cb)(void *arg, const void *data, size_t len), void *arg,
                       const struct rio_call *opt)
{
    return rio_get_stream_at(c, key, 0, prefetch, cb, arg, opt);
}

int64_t rio_get_stream_at(struct rio_client *c, const char *key, uint64_t offset, unsigned prefetch,
                          int (*cb)(void *arg, const void *data, size_t len), void *arg,
                          const struct rio_call *opt)
{
    struct rio_reader *rd;
    const uint8_t *p;
    size_t n;
    int64_t total = 0;
    int ret;

    rio__detail_clear();
    struct rio__replan_acc acc = {0};
    const struct rio_call *run = opt;
    struct rio_call local;

    if (!cb)
        return RIO_EINVAL;
    /* With a deadline, it bounds the runs again too. */
    if (opt && opt->deadline_ms)
        rio__replan_begin(&acc, c, opt);
    else
        acc.deadline_ns = UINT64_MAX;
    for (;;) {
        ret = rio_reader_open_at(c, key, offset, prefetch, run, &rd);
        if (ret < 0)
            return ret;
        rd->t_out = 0; /* the caller's time is its callback's, timed below */
        /* Before the first byte is handed out, a PUT that replaced the key
         * costs nothing: start over on its generation (not at an offset:
         * the bytes before it belong to the generation the caller holds). */
        ret = reader_peek(rd, &p, &n);
        if (offset || !rio__replan_due(RIO_OP_GET, ret, opt) || acc.replans >= RIO__REPLANS_MAX)
            break;
        rio_reader_close(rd); /* its stats are this run's */
        ret = rio__replan_opt(&acc, opt, &local);
        if (ret < 0) {
            rio__replan_stats(&acc, opt);
            return ret;
        }
        rio__replan_note(&acc, opt);
        run = &local;
    }
    for (; ret > 0; ret = reader_peek(rd, &p, &n)) {
        uint64_t t0 = rio__now_ns();
        int stop = cb(arg, p, n);
        rd->call->sink_ns += rio__now_ns() - t0;
        if (stop) {
            rio_reader_close(rd);
            rio__replan_stats(&acc, opt);
            return stop < 0 ? stop : RIO_ECANCELED;
        }
        reader_consume(rd, n, n);
        total += (int64_t)n;
    }
    int cret = rio_reader_close(rd);
    /* The earlier runs' failed attempts and the count of runs again. */
    rio__replan_stats(&acc, opt);
    if (ret < 0)
        return ret;
    return cret < 0 ? cret : total;
}

/* rio__get_chunks: the lowest chunk of the reader's window that is verified
 * and not handed yet (handed: a flag per ring slot). 1 with *idx set, 0
 * once every chunk was handed, or the request's error. */
static int chunks_next(struct rio_reader *rd, const uint8_t *handed, uint64_t *idx)
{
    struct rio__req *r = rd->r;
    struct rio_client *c = rd->c;
    int ret, last_err = 0;

    pthread_mutex_lock(&c->mu);
    for (;;) {
        if (r->decided && r->status < 0) {
            ret = r->status;
            last_err = r->last_err;
            break;
        }
        if (rd->next >= r->end) {
            ret = 0;
            break;
        }
        uint64_t w = atomic_load(&r->window), i;
        if (w > r->end)
            w = r->end;
        for (i = rd->next; i < w; i++)
            if (!handed[i % r->prefetch] && rio__req_chunk_done(r, i))
                break;
        if (i < w) {
            *idx = i;
            ret = 1;
            break;
        }
        if (!rio__call_progress_locked(c, rd->call))
            pthread_cond_wait(&rd->call->cond, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    if (ret < 0)
        reader_failed(rd, ret, last_err);
    return ret;
}

int64_t rio__get_chunks(struct rio_client *c, const struct rio_desc *d, uint64_t offset,
                        unsigned prefetch,
                        int (*cb)(void *arg, uint64_t off, const void *data, size_t len), void *arg,
                        const struct rio_call *opt)
{
    struct rio_reader *rd;
    uint8_t *handed = NULL;
    int64_t total = 0;
    int ret;

    rio__detail_clear();
    if (!d || !cb || !memchr(d->key, '\0', sizeof(d->key)) || rio__client_unusable(c))
        return RIO_EINVAL;
    ret = reader_open(c, d->key, d, offset, UINT64_MAX, prefetch, opt, &rd);
    if (ret < 0)
        return ret;
    rd->t_out = 0; /* the caller's time is its callback's, timed below */
    struct rio__req *r = rd->r;
    if (r->end > r->first && !(handed = rio__calloc(r->prefetch, 1))) {
        ret = -ENOMEM;
        goto out;
    }
    /* Chunks are handed as they verify, so a slow chunk holds back only
     * the slot it sits in: the window still moves with the lowest chunk
     * not handed, since chunk i + prefetch lands in chunk i's slot. */
    uint64_t idx;
    while ((ret = chunks_next(rd, handed, &idx)) > 0) {
        uint64_t off = idx * r->chunk_size;
        uint64_t len = rio__req_chunk_len(r, idx);
        const uint8_t *p = r->ring + (idx % r->prefetch) * r->chunk_size;
        if (idx == r->first && rd->pos) {
            /* opened inside this chunk: its bytes before offset are not ours */
            p += rd->pos;
            off += rd->pos;
            len -= rd->pos;
        }
        uint64_t t0 = rio__now_ns();
        int stop = cb(arg, off, p, (size_t)len);
        rd->call->sink_ns += rio__now_ns() - t0;
        if (stop) {
            ret = stop < 0 ? stop : RIO_ECANCELED;
            break;
        }
        total += (int64_t)len;
        handed[idx % r->prefetch] = 1;
        if (idx != rd->next)
            continue;
        while (rd->next < r->end && handed[rd->next % r->prefetch]) {
            handed[rd->next % r->prefetch] = 0;
            rd->next++;
        }
        rd->pos = 0;
        atomic_store(&r->window, rd->next + r->prefetch);
        rio__engine_kick(c);
    }
out:
    rio__free(handed);
    if (ret < 0) {
        int err = ret;
        if (!rd->err)
            rd->err = err; /* the close cancels what is left and answers this */
        rio_reader_close(rd);
        return err;
    }
    ret = rio_reader_close(rd);
    return ret < 0 ? ret : total;
}

/* ------------------------------------------------------------- writer */

/*
 * A streaming PUT: one upload, fed chunk by chunk. Chunk k is filled in slot
 * k % nslots; when full it is hashed (xxh3), handed to the engine as a call
 * of its own (a "part" request: the object's chunk k, retried and verified
 * like any chunk), then folded into the stream MD5 while it is in flight.
 * With a declared size, the short last chunk goes as soon as its last byte
 * is in, before close.
 * A slot is refilled only after its previous chunk's call is fenced, so no
 * attempt can still read the bytes being overwritten. The commit, with the
 * final size, happens at close.
 */
struct wslot {
    uint8_t *buf;
    size_t cap;
    uint64_t fill;
    struct rio__call *call; /* in flight, or NULL */
};

struct rio_writer {
    struct rio__stream st; /* first: the client's list */
    struct rio_client *c;  /* NULL once the client is destroyed */
    char *key;
    void *upload;
    uint64_t declared; /* RIO_SIZE_UNKNOWN or the exact size */
    uint64_t chunk_size, total, nchunks;
    uint64_t *xxh;
    uint64_t xxh_cap;
    struct rio_md5 md5;
    bool want_md5;
    uint64_t put_if; /* the commit's condition (rio__call.put_if) */
    bool expect_md5; /* close checks the MD5 against md5_want first */
    uint8_t md5_want[16];
    bool *md5_bad; /* set when that check fails */
    /* called by close with the MD5 before the commit (rio__writer_before_commit) */
    void (*before_commit)(void *arg, const char md5hex[33], uint64_t size);
    void *before_arg;
    unsigned nslots;
    struct wslot *slots;
    int err;
    bool size_bad;       /* err is the source's size, not the one declared */
    struct rio_call opt; /* per part: deadline set from the stream's */
    uint64_t t0, deadline_ns;
    uint64_t t_out;     /* when the caller last left rio_writer_write; 0: in the library */
    uint64_t source_ns; /* the caller's time away: its producer's */
    struct rio_stats *stats;
    struct rio__call *acc; /* with stats: every part's figures, merged */
};

/* The bounds of the writer's metadata: the stream's deadline and token;
 * failed tries counted with its figures. */
static void writer_meta(const struct rio_writer *w, struct rio__meta *m)
{
    m->deadline_ns = w->deadline_ns;
    m->cancel = w->opt.cancel;
    m->call = w->acc;
    m->put_if = w->put_if;
    m->retries = NULL;
    m->progress = NULL;
}

/* The caller is back in the writer: its time away was its producer's. */
static void writer_back(struct rio_writer *w)
{
    if (w->t_out)
        w->source_ns += rio__now_ns() - w->t_out;
    w->t_out = 0;
}

static void writer_fail(struct rio_writer *w, int err)
{
    if (!w->err)
        w->err = err;
}

/* The detail of a size other than the one declared: both figures. */
static void writer_size_detail(const struct rio_writer *w)
{
    if (w->total > w->declared)
        rio__detail("%llu bytes declared, the source gave more (%llu so far)",
                    (unsigned long long)w->declared, (unsigned long long)w->total);
    else
        rio__detail("%llu bytes declared, the source gave %llu", (unsigned long long)w->declared,
                    (unsigned long long)w->total);
}

/* The source gave another size than the one declared: RIO_EINVAL. */
static void writer_size_fail(struct rio_writer *w)
{
    if (w->err)
        return;
    w->size_bad = true;
    writer_fail(w, RIO_EINVAL);
    writer_size_detail(w);
}

/* Fence slot s's chunk and fold its outcome in. */
static void writer_reap(struct rio_writer *w, struct wslot *s)
{
    if (!s->call)
        return;
    struct rio_client *c = w->c;
    rio__engine_wait(c, s->call);
    struct rio__req *r = &s->call->reqs[0];
    r->result = r->status < 0 ? r->status : (int64_t)r->size;
    if (r->status < 0 && !w->err)
        rio__engine_req_detail(c, r->status, r->last_err,
                               rio__req_why(r, r->status)); /* as a whole-object call's */
    if (r->status < 0)
        writer_fail(w, r->status);
    if (w->acc && rio__call_merge(w->acc, s->call) < 0)
        writer_fail(w, -ENOMEM);
    rio__call_release(c, s->call);
    s->call = NULL;
    s->fill = 0;
}

/* Send slot s's bytes as the object's next chunk. */
static int writer_launch(struct rio_writer *w, struct wslot *s)
{
    struct rio_client *c = w->c;
    uint64_t idx = w->nchunks;
    struct rio__call *call;
    int ret;

    if (c->t->put_chunks_max && idx >= c->t->put_chunks_max)
        return RIO_ETOOBIG;
    ret = rio__u64_reserve(&w->xxh, &w->xxh_cap, w->nchunks, w->nchunks + 1);
    if (ret < 0)
        return ret;
    uint64_t now = rio__now_ns();
    if (now >= w->deadline_ns)
        return RIO_EDEADLINE;
    if (w->opt.cancel && atomic_load(&w->opt.cancel->fired))
        return RIO_ECANCELED;
    uint64_t left_ms = (w->deadline_ns - now + 999999) / 1000000;
    w->opt.deadline_ms = left_ms > UINT32_MAX ? UINT32_MAX : (uint32_t)left_ms;

    uint64_t th = rio__now_ns();
    uint64_t h = rio__xxh3(s->buf, (size_t)s->fill);
    /* The transport's own work on the chunk (an S3 part's SHA-256), here
     * rather than at submit on the engine thread. */
    if (rio__t_has_put_prep(c->t))
        rio__t_put_prep(c->t, w->upload, idx, s->buf, s->fill);
    uint64_t hash_ns = rio__now_ns() - th;
    ret = rio__call_new(c, 1, &w->opt, &call);
    if (ret < 0)
        return ret;
    rio__call_mark_start(c, call, s->fill);
    struct rio__req *r = &call->reqs[0];
    r->type = RIO_OP_PUT;
    r->key = rio__strdup(w->key);
    r->xxh = rio__malloc(sizeof(uint64_t));
    r->chunks = rio__calloc(1, sizeof(*r->chunks));
    if (!r->key || !r->xxh || !r->chunks) {
        rio__call_free(call);
        return -ENOMEM;
    }
    r->xxh[0] = h;
    r->size = s->fill;
    r->chunk_size = w->chunk_size;
    r->nchunks = 1;
    r->base = idx;
    r->data = s->buf;
    r->upload = w->upload;
    atomic_store(&r->hashed, 1);
    ret = rio__call_start(c, call, &w->opt);
    if (ret < 0) {
        rio__call_free(call);
        return ret;
    }
    s->call = call;
    w->xxh[idx] = h;
    w->nchunks++;
    /* The MD5 runs while the chunk is on its way (the buffer is only read). */
    if (w->want_md5) {
        th = rio__now_ns();
        if (rio__md5_update(&w->md5, s->buf, (size_t)s->fill) < 0)
            writer_fail(w, -ENOMEM);
        hash_ns += rio__now_ns() - th;
    }
    if (w->acc)
        w->acc->hash_ns += hash_ns;
    return 0;
}

/* The slot the next byte goes to, with its previous chunk fenced. */
static struct wslot *writer_slot(struct rio_writer *w)
{
    struct wslot *s = &w->slots[w->nchunks % w->nslots];
    writer_reap(w, s);
    if (w->err)
        return NULL;
    if (!s->buf) {
        s->buf = rio__stage_get(w->c, (size_t)w->chunk_size, &s->cap);
        if (!s->buf) {
            writer_fail(w, -ENOMEM);
            return NULL;
        }
    }
    return s;
}

/* Account n bytes just placed in s; send it when full. */
static int writer_added(struct rio_writer *w, struct wslot *s, uint64_t n)
{
    s->fill += n;
    w->total += n;
    if (w->declared != RIO_SIZE_UNKNOWN && w->total > w->declared)
        writer_size_fail(w); /* more bytes than declared */
    else if (s->fill == w->chunk_size || w->total == w->declared) {
        /* Full, or the last (short) chunk of a declared size: it goes now,
         * not at close, so that it is on its way while the caller finishes
         * (a gateway reads the end of its request, checks its digests). */
        int ret = writer_launch(w, s);
        if (ret < 0)
            writer_fail(w, ret);
    }
    return w->err;
}

/* Give back what the writer holds of its client: slot buffers, stats. */
static void writer_release(struct rio_writer *w)
{
    for (unsigned i = 0; w->slots && i < w->nslots; i++)
        if (w->slots[i].buf) {
            rio__stage_put(w->c, w->slots[i].buf, w->slots[i].cap);
            w->slots[i].buf = NULL;
        }
    if (w->acc)
        rio__call_free(w->acc);
    w->acc = NULL;
}

static void writer_free(struct rio_writer *w)
{
    if (w->c)
        writer_release(w);
    rio__free(w->slots);
    rio__free(w->xxh);
    rio__free(w->key);
    rio__md5_cleanup(&w->md5);
    rio__cancel_unref(w->opt.cancel);
    rio__free(w);
}

/* rio_writer_open with chunk size cs (0: the client's, under the target's
 * part rules). */
static int writer_open(struct rio_client *c, const char *key, uint64_t size, uint64_t cs,
                       unsigned slots, const struct rio_call *opt, struct rio_writer **out)
{
    struct rio_writer *w;
    int ret;

    rio__detail_clear();
    if (!out || rio__client_unusable(c))
        return RIO_EINVAL;
    *out = NULL;
    ret = rio__key_check(key);
    if (ret < 0)
        return ret;
    ret = rio__call_check(opt);
    if (ret < 0)
        return ret;
    if (opt && opt->expect_generation && (opt->flags & RIO_IF_ABSENT)) {
        rio__detail("a PUT takes RIO_IF_ABSENT or expect_generation, not both");
        return RIO_EINVAL;
    }
    if (opt && opt->expect_generation == RIO__PUT_IF_ABSENT) {
        /* The transports' "if absent" (single_once, call.c, says why). */
        rio__detail("expect_generation UINT64_MAX is no generation");
        return RIO_EINVAL;
    }
    if (size == RIO_SIZE_UNKNOWN && !rio__t_has_cap(c->t, RIO_CAP_STREAM_PUT))
        return RIO_ENOTSUP;
    w = rio__calloc(1, sizeof(*w));
    if (!w)
        return -ENOMEM;
    w->c = c;
    w->declared = size;
    w->chunk_size = cs ? cs : rio__put_chunk_size(c, size);
    w->nslots = slots ? slots : c->o.depth * c->npaths;
    if (w->nslots < 2)
        w->nslots = 2;
    if (opt) {
        w->opt = *opt;
        w->put_if = opt->flags & RIO_IF_ABSENT ? RIO__PUT_IF_ABSENT : opt->expect_generation;
    }
    rio__cancel_ref(w->opt.cancel); /* writer_launch reads it until close */
    w->stats = w->opt.stats;
    w->opt.stats = NULL; /* the parts' figures are merged into acc */
    w->opt.progress = NULL;
    w->opt.flags = 0;
    w->t0 = rio__now_ns();
    w->deadline_ns = rio__call_deadline_of(c, opt, w->t0);
    w->want_md5 = rio__etag_wanted(c);
    w->key = rio__strdup(key);
    w->slots = rio__calloc(w->nslots, sizeof(*w->slots));
    if (!w->key || !w->slots) {
        ret = -ENOMEM;
        goto err;
    }
    if (w->stats) {
        memset(w->stats, 0, sizeof(*w->stats));
        ret = rio__call_new(c, 1, opt, &w->acc);
        if (ret < 0)
            goto err;
        rio__call_mark_start(c, w->acc, UINT64_MAX);
        w->acc->reqs[0].type = RIO_OP_PUT;
    }
    if (w->want_md5) {
        ret = rio__md5_init(&w->md5);
        if (ret < 0)
            goto err;
    }
    struct rio__meta m;
    writer_meta(w, &m);
    ret = rio__meta_put_open(c, &m, key, size, w->chunk_size, &w->upload);
    if (ret < 0)
        goto err;
    stream_link(c, &w->st, RIO__STREAM_WRITER);
    w->t_out = rio__now_ns();
    *out = w;
    return 0;
err:
    writer_free(w);
    return ret;
}

int rio_writer_open(struct rio_client *c, const char *key, uint64_t size, unsigned slots,
                    const struct rio_call *opt, struct rio_writer **out)
{
    return writer_open(c, key, size, 0, slots, opt, out);
}

int rio__writer_open_chunk(struct rio_client *c, const char *key, uint64_t size,
                           uint64_t chunk_size, unsigned slots, const struct rio_call *opt,
                           struct rio_writer **out)
{
    if (!c || !out)
        return RIO_EINVAL;
    *out = NULL;
    /* The engine's bounds on a chunk (option chunk), then the target's
     * part rules: a minimum part size when there is more than one, a
     * maximum part count. An unknown size could end up past either. */
    if (size == RIO_SIZE_UNKNOWN || chunk_size < RIO__CHUNK_MIN || chunk_size > RIO__CHUNK_MAX)
        return RIO_EINVAL;
    if (size > chunk_size && chunk_size < c->t->put_chunk_min)
        return RIO_EINVAL;
    if (c->t->put_chunks_max && size && (size - 1) / chunk_size + 1 > c->t->put_chunks_max)
        return RIO_EINVAL;
    return writer_open(c, key, size, chunk_size, slots, opt, out);
}

int rio_writer_write(struct rio_writer *w, const void *buf, size_t n)
{
    rio__detail_clear();
    if (!w || (!buf && n) || (w->c && rio__client_unusable(w->c)))
        return RIO_EINVAL;
    writer_back(w);
    const uint8_t *p = buf;
    while (n && !w->err) {
        struct wslot *s = writer_slot(w);
        if (!s)
            break;
        uint64_t k = w->chunk_size - s->fill;
        if (k > n)
            k = n;
        memcpy(s->buf + s->fill, p, (size_t)k);
        p += k;
        n -= (size_t)k;
        writer_added(w, s, k);
    }
    w->t_out = rio__now_ns();
    return w->err;
}

/* Fence every slot; after an error, cancel what is in flight first. */
static void writer_drain(struct rio_writer *w)
{
    for (unsigned i = 0; i < w->nslots; i++) {
        /* oldest first: slot order from the next chunk's */
        struct wslot *s = &w->slots[(w->nchunks + i) % w->nslots];
        if (s->call && w->err)
            rio__engine_fail_req(w->c, &s->call->reqs[0], RIO_ECANCELED);
        writer_reap(w, s);
    }
}

/* The stream's figures: every part merged, over the time since open, with
 * the producer's time (the source verdict when it took most of it). */
static void writer_stats(struct rio_writer *w)
{
    if (!w->stats || !w->acc)
        return;
    struct rio__req *r = &w->acc->reqs[0];
    r->size = w->total;
    r->result = w->err ? w->err : 0;
    w->acc->source_ns = w->source_ns;
    rio__stats_fill(w->c, w->acc, w->stats);
}

/* The client is being destroyed: cancel and fence every part, abort the
 * upload, give the client's memory back; later calls answer RIO_ECLOSED. */
void rio__writer_invalidate(struct rio_writer *w)
{
    stream_unlink(w->c, &w->st);
    writer_fail(w, RIO_ECLOSED);
    writer_drain(w);
    rio__t_put_abort(w->c->t, w->upload);
    w->upload = NULL;
    writer_release(w);
    w->c = NULL;
    w->err = RIO_ECLOSED;
}

int rio_writer_close(struct rio_writer *w, struct rio_desc *out_desc)
{
    rio__detail_clear();
    if (!w || (w->c && rio__client_unusable(w->c)))
        return RIO_EINVAL;
    if (!w->c) {
        writer_free(w);
        return RIO_ECLOSED;
    }
    writer_back(w);
    stream_unlink(w->c, &w->st);
    struct wslot *s = &w->slots[w->nchunks % w->nslots];
    if (w->declared != RIO_SIZE_UNKNOWN && w->total != w->declared)
        writer_size_fail(w); /* fewer bytes than declared */
    if (!w->err && s->fill && !s->call) {
        int ret = writer_launch(w, s);
        if (ret < 0)
            writer_fail(w, ret);
    }
    writer_drain(w);
    int ret = w->err;
    uint64_t gen;
    struct rio__meta m;
    writer_meta(w, &m);
    if (ret == 0 && w->expect_md5) {
        uint8_t got[16];
        ret = rio__md5_peek(&w->md5, got);
        if (ret == 0 && CRYPTO_memcmp(got, w->md5_want, sizeof(got)) != 0) {
            *w->md5_bad = true;
            ret = RIO_ECHECKSUM;
        }
    }
    if (ret == 0 && w->before_commit) {
        uint8_t md[16];
        char hex[33];
        ret = rio__md5_peek(&w->md5, md);
        for (int i = 0; ret == 0 && i < 16; i++)
            snprintf(hex + 2 * i, 3, "%02x", md[i]);
        if (ret == 0)
            w->before_commit(w->before_arg, hex, w->total);
    }
    if (ret == 0)
        ret = rio__commit_upload(w->c, &m, w->key, w->upload, w->total, w->chunk_size, w->nchunks,
                                 w->xxh, w->want_md5 ? &w->md5 : NULL, &gen, out_desc);
    else
        rio__t_put_abort(w->c->t, w->upload);
    w->upload = NULL;
    w->err = ret;
    if (ret == RIO_EINVAL && w->size_bad)
        writer_size_detail(w); /* again: this call cleared what the write said */
    writer_stats(w);
    writer_free(w);
    return ret;
}

int rio__writer_expect_md5(struct rio_writer *w, const uint8_t want[16], bool *bad)
{
    if (!w || !w->c || !w->want_md5 || w->total)
        return RIO_ENOTSUP;
    memcpy(w->md5_want, want, sizeof(w->md5_want));
    w->md5_bad = bad;
    *bad = false;
    w->expect_md5 = true;
    return 0;
}

int rio__writer_no_md5(struct rio_writer *w)
{
    if (!w || !w->c || w->total || w->expect_md5 || w->before_commit)
        return RIO_EINVAL;
    if (w->want_md5) {
        rio__md5_cleanup(&w->md5);
        w->want_md5 = false;
    }
    return 0;
}

int rio__writer_before_commit(struct rio_writer *w,
                              void (*fn)(void *arg, const char md5hex[33], uint64_t size),
                              void *arg)
{
    if (!w || !w->c || !w->want_md5)
        return RIO_ENOTSUP;
    w->before_commit = fn;
    w->before_arg = arg;
    return 0;
}

void rio_writer_abort(struct rio_writer *w)
{
    if (!w || (w->c && rio__client_unusable(w->c)))
        return;
    if (!w->c) {
        writer_free(w);
        return;
    }
    writer_back(w);
    stream_unlink(w->c, &w->st);
    writer_fail(w, RIO_ECANCELED);
    writer_drain(w);
    rio__t_put_abort(w->c->t, w->upload);
    writer_stats(w);
    writer_free(w);
}

int rio_put_stream(struct rio_client *c, const char *key, uint64_t size, unsigned slots,
                   int64_t (*fill)(void *arg, void *buf, size_t cap), void *arg,
                   const struct rio_call *call, struct rio_desc *out_desc)
{
    struct rio_writer *w;

    rio__detail_clear();
    if (!fill)
        return RIO_EINVAL;
    int ret = rio_writer_open(c, key, size, slots, call, &w);
    if (ret < 0)
        return ret;
    w->t_out = 0; /* the caller's time is its fill's, timed below */
    while (!w->err) {
        struct wslot *s = writer_slot(w);
        if (!s)
            break;
        uint64_t t0 = rio__now_ns();
        int64_t n = fill(arg, s->buf + s->fill, (size_t)(w->chunk_size - s->fill));
        w->source_ns += rio__now_ns() - t0;
        if (n < 0 || (uint64_t)n > w->chunk_size - s->fill) {
            /* An error below INT_MIN is no int: cast, -(1 << 32) was 0,
             * success, and what was filled so far got published. */
            writer_fail(w, n < 0 && n >= INT_MIN ? (int)n : RIO_EINVAL);
            break;
        }
        if (n == 0)
            break;
        writer_added(w, s, (uint64_t)n);
    }
    return rio_writer_close(w, out_desc);
}
