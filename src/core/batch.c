/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rio_batch: many GETs and PUTs as one call. Its lookups, upload opens and
 * commits run on the client's meta pool beside the transfer (the call
 * workers), and the requests a PUT replaced or the target lost run again
 * as a batch of their own.
 */
#include <errno.h>
#include <pthread.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"

struct meta_pool {
    unsigned n;
    _Atomic unsigned next;
    void (*fn)(void *arg, unsigned i);
    void *arg;
};

static void meta_worker(void *arg)
{
    struct meta_pool *p = arg;
    for (;;) {
        unsigned i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n)
            return;
        p->fn(p->arg, i);
    }
}

/* fn(arg, i) for every i < n, on this thread and up to rio__meta_threads(c) - 1
 * of the client's meta pool (weight: how many of the n have work); what
 * the pool's threads do not take, this thread does. */
void rio__meta_parallel(struct rio_client *c, unsigned n, unsigned weight,
                        void (*fn)(void *arg, unsigned i), void *arg)
{
    struct meta_pool p = {.n = n, .fn = fn, .arg = arg};
    struct rio__job job;
    atomic_init(&p.next, 0);
    rio__pool_share(&c->meta_pool, &job, weight ? weight - 1 : 0, meta_worker, &p);
    meta_worker(&p);
    rio__pool_reclaim(&c->meta_pool, &job);
}

/* The largest PUT of a batch whose transport work (put_prep) its worker
 * does when it opens the upload. */
#define PREP_ON_OPEN_MAX (8u << 20)

/* Open deferred request r's upload (a PUT) or look it up (a GET), mu not
 * held (todo: it has not failed already): 0 or its error. */
static int prepare_open(struct rio_client *c, struct rio__call *call, struct rio__req *r, bool todo,
                        void **up, struct rio__get_plan *g)
{
    struct rio__meta m;

    *up = NULL;
    memset(g, 0, sizeof(*g));
    rio__meta_for_call(&m, call);
    if (!todo)
        return 0;
    return r->type == RIO_OP_PUT ? rio__meta_put_open(c, &m, r->key, r->size, r->chunk_size, up)
                                 : rio__get_plan(c, call, r, g);
}

/* Whether r's transport work on its bytes is done when its upload opens
 * (ret: the open's result), rather than at submit. */
static bool prep_on_open(struct rio_client *c, const struct rio__req *r, bool todo, int ret,
                         const void *up)
{
    return ret == 0 && todo && r->type == RIO_OP_PUT && up && r->size <= PREP_ON_OPEN_MAX &&
           rio__t_has_put_prep(c->t);
}

/* Publish deferred request r, opened (ret) into up or g, under mu: the
 * engine takes it from there. One that failed fails alone. */
static void prepare_publish(struct rio_client *c, struct rio__call *call, struct rio__req *r,
                            bool todo, int ret, void *up, struct rio__get_plan *g)
{
    bool empty = false;

    pthread_mutex_lock(&c->mu);
    r->opening = false;
    /* It failed before or while it was prepared (deadline, cancel): its
     * status says why; nothing of it is kept. */
    bool gone = r->decided && r->status < 0;
    if (ret == 0 && todo && !gone) {
        if (r->type == RIO_OP_PUT) {
            r->upload = up;
            up = NULL;
            empty = r->nchunks == 0;
        } else {
            rio__get_publish(call, r, g);
            /* (latency samples past the reserve are only not kept) */
            call->lat_want += r->nchunks;
            (void)rio__u64_reserve(&call->lat, &call->lat_cap, call->nlat,
                                   rio__lat_reserve_of(call->lat_want));
            call->progress_total += r->size;
            empty = r->nchunks == 0;
        }
    } else if (ret < 0 && r->result >= 0) {
        r->result = ret;
    }
    if (ret < 0 || !todo || gone) {
        r->ahead = false; /* nothing held for it */
        call->ahead--;
    }
    /* The engine takes it from here: dispatches it, or fences it (failed). */
    rio__engine_admit_locked(c, r);
    /* The engine looks for work at each completion anyway: wake it only
     * when it may have a free op slot. */
    bool kick = c->inflight_ops < (uint64_t)c->npaths * c->o.depth;
    pthread_mutex_unlock(&c->mu);
    if (up)
        rio__t_put_abort(c->t, up);
    rio__get_plan_drop(c, g);
    if (ret < 0)
        rio__engine_fail_req(c, r, ret);
    else if (empty)
        rio__engine_fail_req(c, r, 0); /* an empty object: moved, with success */
    else if (kick)
        rio__engine_kick(c);
}

/* Prepare deferred request r on a call worker, mu not held: open it, then
 * a small object's transport work on its bytes (an S3 part's SHA-256)
 * here, before the engine may send it, rather than at submit on the
 * engine thread; a larger one's chunks get it at submit, so that this
 * worker does not hold the object back for it. */
static void prepare_one(struct rio_client *c, struct rio__call *call, struct rio__req *r, bool todo)
{
    struct rio__get_plan g;
    void *up;
    int ret = prepare_open(c, call, r, todo, &up, &g);

    if (prep_on_open(c, r, todo, ret, up))
        for (uint64_t k = 0; k < r->nchunks; k++)
            rio__t_put_prep(c->t, up, r->base + k, r->data + k * r->chunk_size,
                            rio__req_chunk_len(r, k));
    prepare_publish(c, call, r, todo, ret, up, &g);
}

/* Whether deferred request r may be prepared in a group (prepare_group):
 * a PUT of one chunk small enough to be prepared on open. */
static bool prep_groups(const struct rio__req *r)
{
    return r->type == RIO_OP_PUT && r->nchunks == 1 && r->size <= PREP_ON_OPEN_MAX;
}

/* Prepare n (<= RIO__PREP_MAX) deferred PUTs of one chunk each
 * (prep_groups) on a call worker, mu not held: open them all, then their
 * transport work at once (put_prep_many: a batch of small S3 objects
 * gets its Content-MD5s 16 or 8 at a time in vector lanes, not one after
 * another), then publish each. */
static void prepare_group(struct rio_client *c, struct rio__call *call, struct rio__req *const *rs,
                          const bool *todo, unsigned n)
{
    struct rio__get_plan g; /* a GET's: PUTs leave it empty */
    void *ups[RIO__PREP_MAX], *pu[RIO__PREP_MAX];
    const void *src[RIO__PREP_MAX];
    uint64_t idx[RIO__PREP_MAX], len[RIO__PREP_MAX];
    int rets[RIO__PREP_MAX];
    unsigned np = 0;

    for (unsigned i = 0; i < n; i++) {
        rets[i] = prepare_open(c, call, rs[i], todo[i], &ups[i], &g);
        if (!prep_on_open(c, rs[i], todo[i], rets[i], ups[i]))
            continue;
        pu[np] = ups[i];
        idx[np] = rs[i]->base;
        src[np] = rs[i]->data;
        len[np++] = rio__req_chunk_len(rs[i], 0);
    }
    if (np)
        rio__t_put_prep_many(c->t, np, pu, idx, src, len);
    for (unsigned i = 0; i < n; i++)
        prepare_publish(c, call, rs[i], todo[i], rets[i], ups[i], &g);
}

/* Whether the window has room for the group the next deferred request
 * would start (width of them, fewer at the end of the call): a group
 * started with less takes what the commits free one at a time, and its
 * lanes run nearly empty. mu held. */
static bool group_room_locked(const struct rio__call *call, unsigned width)
{
    unsigned want = width, left = call->nreq - call->open_next;

    if (width <= 1 || !prep_groups(&call->reqs[call->open_next]))
        return true;
    if (want > left)
        want = left;
    if (want > call->ahead_max)
        want = call->ahead_max;
    return call->ahead_max - call->ahead >= want;
}

/*
 * A call worker (rio_batch), the caller among them once it is done hashing:
 * prepares the deferred requests in order (the engine sends what is
 * prepared), at most call->ahead_max of them held at once, and commits each
 * PUT as soon as it is fenced and hashed (the ones ready together in one
 * go: rio__req_commit_many), while the batch's other requests still move; so a batch of small
 * durable objects overlaps its opens and commits (creates, fsyncs, renames, round trips) with its
 * transfers instead of running them before the first and after the last one. Committing comes
 * first: it is what frees the window.
 */
#define COMMITS_AT_ONCE 16u

void rio__call_worker_loop(struct rio_client *c, struct rio__call *call)
{
    struct rio__req *took[COMMITS_AT_ONCE], *due[COMMITS_AT_ONCE];
    void *abandoned[COMMITS_AT_ONCE];
    bool was_due[COMMITS_AT_ONCE];

    pthread_mutex_lock(&c->mu);
    for (;;) {
        /* Every request ready now (up to COMMITS_AT_ONCE): their commits
         * go together, and this thread wakes once for them. */
        unsigned n = 0, ndue = 0, nab = 0;
        struct rio__req *r;
        while (n < COMMITS_AT_ONCE &&
               (r = rio_list_entry(rio_list_pop_front(&call->ready), struct rio__req, cnode))) {
            was_due[n] = rio__commit_due(r);
            took[n++] = r;
            if (was_due[n - 1]) {
                due[ndue++] = r;
            } else if (r->type == RIO_OP_PUT && r->upload) {
                abandoned[nab++] = r->upload; /* failed: its temporary goes now */
                r->upload = NULL;
            }
        }
        if (n) {
            pthread_mutex_unlock(&c->mu);
            if (ndue)
                rio__req_commit_many(c, due, ndue);
            for (unsigned i = 0; i < nab; i++)
                rio__t_put_abort(c->t, abandoned[i]);
            pthread_mutex_lock(&c->mu);
            for (unsigned i = 0; i < n; i++) {
                r = took[i];
                r->committed = was_due[i];
                if (r->ahead) {
                    r->ahead = false; /* the window's slot: this thread takes it next */
                    call->ahead--;
                }
            }
            continue;
        }
        unsigned width = rio__t_put_prep_many_width(c->t);
        if (call->open_next < call->nreq && call->ahead < call->ahead_max &&
            group_room_locked(call, width)) {
            /* The next deferred request, or up to `width` small PUTs in a
             * row, whose transport work goes at once (prepare_group). */
            struct rio__req *grp[RIO__PREP_MAX];
            bool todo[RIO__PREP_MAX];
            unsigned ng = 0;
            while (ng < width && call->open_next < call->nreq && call->ahead < call->ahead_max) {
                r = &call->reqs[call->open_next];
                if (r->opening && ng && !prep_groups(r))
                    break;
                call->open_next++;
                if (!r->opening)
                    continue;
                bool go = !(r->decided && r->status < 0);
                /* Not on the active list yet, so no engine timer watches it:
                 * its deadline and the call's cancel are checked here. */
                int late = 0;
                if (go && call->cancel && atomic_load(&call->cancel->fired))
                    late = RIO_ECANCELED;
                else if (go && rio__now_ns() >= r->deadline_ns)
                    late = RIO_EDEADLINE;
                if (late) {
                    r->decided = true;
                    r->status = late;
                    atomic_store(&r->stop_hashing, 1);
                    go = false;
                }
                r->ahead = true;
                call->ahead++;
                grp[ng] = r;
                todo[ng++] = go;
                if (!prep_groups(r))
                    break;
            }
            if (ng) {
                pthread_mutex_unlock(&c->mu);
                if (ng == 1)
                    prepare_one(c, call, grp[0], todo[0]);
                else
                    prepare_group(c, call, grp, todo, ng);
                pthread_mutex_lock(&c->mu);
            }
            continue;
        }
        if (rio__call_progress_locked(c, call))
            continue;
        /* Every request fenced and hashed: each was queued. */
        if (call->remaining == 0 && call->hashing_over)
            break;
        pthread_cond_wait(&call->cond, &c->mu);
    }
    pthread_mutex_unlock(&c->mu);
}

void rio__call_worker(void *arg)
{
    struct rio__call *call = arg;
    rio__call_worker_loop(call->c, call);
}

/* How many of a call's requests its workers have to do, if it runs
 * pipelined: every deferred one (a batch's GET lookups, PUT opens) and, with
 * two PUTs or more and no descriptor asked for, every PUT's commit; 0 when
 * it does not. */
unsigned rio__pipeline_work(const struct rio__call *call, const struct rio_desc *out_desc)
{
    unsigned puts = 0, deferred = 0;
    for (unsigned i = 0; i < call->nreq; i++) {
        deferred += call->reqs[i].opening;
        puts += rio__commit_due(&call->reqs[i]);
    }
    if (!deferred && (puts < 2 || out_desc))
        return 0;
    return puts > deferred ? puts : deferred;
}

struct prep_job {
    struct rio_client *c;
    struct rio__call *call;
    struct rio_op *ops;
    const struct rio_call *opt;
    bool defer_open; /* PUTs: the uploads open while the batch runs */
    bool defer_get;  /* GETs: looked up while the batch runs */
};

/* Prepare op i of a batch (a lookup or an upload open); one that fails,
 * fails alone and the others still run. */
static void prep_one(void *arg, unsigned i)
{
    struct prep_job *j = arg;
    struct rio__req *r = &j->call->reqs[i];
    const struct rio_op *op = &j->ops[i];
    int ret;

    r->op_index = (int)i;
    if (op->type == RIO_OP_GET)
        ret = rio__req_prepare_get(j->c, j->call, r, op->key, op->buf, op->len,
                                   j->opt ? j->opt->expect_generation : 0, j->defer_get);
    else if (op->type == RIO_OP_PUT)
        ret = rio__req_prepare_put(j->c, r, op->key, op->buf, op->len, j->defer_open);
    else
        ret = RIO_EINVAL;
    if (ret < 0) {
        r->result = ret;
        r->decided = true;
        r->status = ret;
        r->nchunks = 0;
    }
}

static int batch_once(struct rio_client *c, struct rio_op *ops, unsigned n,
                      const struct rio_call *opt, bool long_way);

/* A GET whose one op found an object of another shape (RIO__ENOTONE) has
 * no result of its own until it runs again: when that run cannot go, it
 * fails with what stopped it (the code never leaves the library). */
static void not_one_fail(struct rio_op *ops, unsigned n, int err)
{
    for (unsigned i = 0; i < n; i++)
        if (ops[i].type == RIO_OP_GET && ops[i].result == RIO__ENOTONE)
            ops[i].result = err;
}

/* A batch's GETs and PUTs to run again (rio__replan_due) go again together, as a
 * batch of their own, until none is due or RIO__REPLANS_MAX rounds ran: each
 * request runs again at most that many times, as a single call's would.
 * (The bound counted the requests run again, so four racing a PUT in one
 * round left none of them a second round.) A round made only of GETs whose
 * one op found several chunks spends none of them. */
int rio_batch(struct rio_client *c, struct rio_op *ops, unsigned n, const struct rio_call *opt)
{
    struct rio__replan_acc acc = {0};
    struct rio_op *again = NULL;
    unsigned *idx = NULL;
    int ok;

    rio__detail_clear();
    rio__replan_begin(&acc, c, opt);
    ok = batch_once(c, ops, n, opt, false);
    unsigned rounds = 0;
    while (ok >= 0 && rounds < RIO__REPLANS_MAX) {
        unsigned k = 0;
        for (unsigned i = 0; i < n; i++)
            k += rio__replan_due(ops[i].type, ops[i].result, opt);
        if (!k)
            break;
        if (!again) {
            again = rio__calloc(n, sizeof(*again));
            idx = rio__calloc(n, sizeof(*idx));
            if (!again || !idx) {
                not_one_fail(ops, n, -ENOMEM); /* the others stand as they are */
                break;
            }
        }
        k = 0;
        unsigned not_one = 0;
        for (unsigned i = 0; i < n; i++)
            if (rio__replan_due(ops[i].type, ops[i].result, opt)) {
                not_one += ops[i].result == RIO__ENOTONE;
                again[k] = ops[i];
                idx[k++] = i;
            }
        /* The batch's stats stay those of its first run, with the failed
         * attempts of the runs again added. */
        struct rio_stats sst;
        struct rio_call sub;
        /* What is left of the batch's deadline bounds the run again. */
        int late = rio__replan_opt(&acc, opt, &sub);
        if (late < 0) {
            for (unsigned j = 0; j < k; j++)
                ops[idx[j]].result = late;
            break;
        }
        sub.stats = opt && opt->stats ? &sst : NULL;
        acc.replans += k;
        rounds += k > not_one;
        /* (GETs whose one op found an object of another shape among them:
         * looked up, then read) */
        int r = batch_once(c, again, k, &sub, true);
        if (r < 0) {
            not_one_fail(ops, n, r);
            break;
        }
        if (sub.stats)
            for (int cl = 0; cl < RIO_CLASS__COUNT; cl++)
                acc.retries[cl] += sst.retries[cl];
        for (unsigned j = 0; j < k; j++) {
            ops[idx[j]].result = again[j].result;
            ops[idx[j]].generation = again[j].generation;
            ok += again[j].result >= 0;
        }
    }
    rio__free(again);
    rio__free(idx);
    rio__replan_stats(&acc, opt);
    return ok;
}

static int batch_once(struct rio_client *c, struct rio_op *ops, unsigned n,
                      const struct rio_call *opt, bool long_way)
{
    struct rio__call *call;
    int ret;

    if ((!ops && n) || rio__client_unusable(c))
        return RIO_EINVAL;
    if (opt && opt->stats)
        memset(opt->stats, 0, sizeof(*opt->stats));
    if (n == 0)
        return 0;
    ret = rio__call_new(c, n, opt, &call);
    if (ret < 0)
        return ret;
    call->long_way = long_way;
    uint64_t bytes = 0;
    for (unsigned i = 0; i < n; i++)
        bytes = ops[i].len > UINT64_MAX - bytes ? UINT64_MAX : bytes + ops[i].len;
    rio__call_mark_start(c, call, bytes);
    /* With two PUTs or more, their uploads open on the call's workers while
     * the batch runs (rio__call_run), and so do the lookups of two GETs or more;
     * what is not deferred is prepared here, on up to rio__meta_threads(). */
    unsigned puts = 0, gets = 0;
    for (unsigned i = 0; i < n; i++) {
        puts += ops[i].type == RIO_OP_PUT;
        gets += ops[i].type == RIO_OP_GET;
    }
    struct prep_job j = {.c = c,
                         .call = call,
                         .ops = ops,
                         .opt = opt,
                         .defer_open = puts > 1,
                         .defer_get = gets > 1};
    unsigned now = (j.defer_open ? 0 : puts) + (j.defer_get ? 0 : gets);
    rio__meta_parallel(c, n, now ? now : 1, prep_one, &j);
    ret = rio__call_run(c, call, opt, NULL);
    if (ret < 0) {
        rio__call_abandon(c, call);
        return ret;
    }
    int ok = 0;
    for (unsigned i = 0; i < n; i++) {
        struct rio__req *r = &call->reqs[i];
        ops[i].result = r->result;
        ops[i].generation = r->generation;
        if (r->result >= 0)
            ok++;
    }
    rio__call_stats(c, call, opt);
    rio__call_release(c, call);
    return ok;
}
