/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The fault filter: a transport stacked over any other (the inner one) that
 * injects the faults of include/railio_mock.h into the op stream and the
 * metadata calls, so every backend is tested against the same fault
 * language. The registry stacks it (rio__transport_open) over a transport
 * whose URL carries `faults=` and over every mock:// transport.
 *
 * Ops. Each op the engine submits gets a filter op (struct fop) holding a
 * shadow rio_io that goes to the inner transport: the engine's io stays the
 * engine's, and the shadow's complete() only queues the fop on a list that
 * the reaping thread alone touches (it runs inside the inner reap). After
 * the inner reap returns, the filter applies the op's fault to the result
 * (short, bit flip, error, reset, delay) under its own lock, then calls the
 * engine's complete() with no lock held. Faults that never reach the inner
 * transport (stall, late, unfenced, a downed path) are held by the filter
 * and completed from its own lists and timers.
 *
 * Rules are matched at submit, in submission order, rule by rule; the match
 * is committed only once the op is accepted (a -EAGAIN from the inner
 * transport consumes no firing), so a run with the same seed and the same
 * submission order fires the same faults.
 *
 * Locks: t->mu guards the rules, the op states, the lists and the counters.
 * It is taken before any lock of the inner transport (submit and cancel call
 * the inner ones with it held), never after: the shadow's complete() takes
 * no lock. The engine's complete() runs with no lock held.
 */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/internal.h"
#include "core/list.h"
#include "railio.h"
#include "railio_mock.h"
#include "transport/fault.h"
#include "transport/mock.h"
#include "transport/opool.h"
#include "transport/transport.h"

#define FAULT_MAX_RULES 64u
#define FAULT_SLAB_OPS 64u
#define FAULT_SEED0 0x6d6f636b72696f31ull /* used when the options carry no seed */
#define FAULT_FILL 0xDD                   /* bytes a fault did not deliver */
#define NS_PER_MS 1000000ull
#define NEVER UINT64_MAX

/* Where a filter op is. */
enum {
    FOP_FREE = 0,
    FOP_INNER, /* submitted to the inner transport */
    FOP_HELD,  /* held by the filter until cancelled (stall, late, unfenced) */
    FOP_TIMER, /* its result is known; delivered at due_ns */
    FOP_DONE,  /* on the done list, delivered at the next reap */
};

struct fault_transport;

struct fop {
    struct rio_io sh;  /* the shadow handed to the inner transport */
    struct rio_io *io; /* the engine's */
    struct fault_transport *t;
    struct rio_list_node qnode; /* reaped list or done list */
    struct fop *tnext;          /* timer list */
    struct rio_mock_fault f;    /* the fault that fired (f.kind 0: none) */
    uint8_t *copy;              /* WRITE under BITFLIP: the flipped private copy */
    uint64_t flip_bit;
    uint64_t due_ns; /* FOP_TIMER */
    int64_t res;     /* what the engine is told */
    uint64_t svc_ns;
    uint8_t where;
    bool reset;     /* its path went down while it was in flight */
    bool cancelled; /* the engine cancelled it */
    bool land;      /* at due_ns, write 0xDD into dst first (LATE) */
};

/* An UNFENCED landing: the op is long completed, its bytes land now. */
struct landing {
    struct landing *next;
    void *dst;
    uint64_t len;
    uint64_t due_ns;
};

struct fault_rule {
    struct rio_mock_fault f;
    uint32_t skipped, fired;
};

struct fpath {
    bool down;
    uint64_t down_until; /* 0: until healed */
};

struct fault_transport {
    struct rio_transport base; /* first: the engine's handle */
    struct rio_transport *inner;
    bool genchange_ok; /* the inner transport is mock:// */

    /* Touched by the reaping thread only: the shadows the inner reap
     * completed, in order. */
    struct rio_list reaped; /* of struct fop by qnode */

    pthread_mutex_t mu;
    /* under mu */
    bool woken;
    bool resetting; /* a reset cancelled ops in the inner transport */
    uint64_t rng;
    struct fault_rule rules[FAULT_MAX_RULES];
    unsigned nrules;
    struct fpath path[RIO_MAX_PATHS];
    struct rio_opool pool; /* of struct fop */
    struct rio_list done;  /* of struct fop by qnode */
    struct fop *timers;    /* unordered: few ops wait at once */
    struct landing *landings;
    struct rio_mock_counters ctr; /* the filter's fields only */
};

/* One ops table per set of capability bits (0x2 ... 0x40): the filter has
 * its inner transport's. */
#define FAULT_CAPS                                                                                 \
    (RIO_CAP_STREAM_PUT | RIO_CAP_ETAG | RIO_CAP_COMMIT_RETRY | RIO_CAP_LIST_UNORDERED |           \
     RIO_CAP_LIST_DELIM | RIO_CAP_RANGE_READ)
#define FAULT_NOPS 64u
static const struct rio_transport_ops fault_ops[FAULT_NOPS];

static struct fault_transport *fault_cast(struct rio_transport *t)
{
    if (!t || t->ops < &fault_ops[0] || t->ops >= &fault_ops[FAULT_NOPS])
        return NULL;
    return (struct fault_transport *)t;
}

int rio__fault_is(const struct rio_transport *t)
{
    return fault_cast((struct rio_transport *)(uintptr_t)t) != NULL;
}

struct rio_transport *rio__fault_inner(struct rio_transport *t)
{
    struct fault_transport *f = fault_cast(t);
    return f ? f->inner : t;
}

static void fill(void *p, uint64_t len)
{
    memset(p, FAULT_FILL, (size_t)len);
}

static int fault_error(const struct rio_mock_fault *f)
{
    return f->error ? f->error : RIO_ESERVER;
}

/* SHORT: what is delivered, always less than len. */
static uint64_t short_len(const struct rio_mock_fault *f, uint64_t len)
{
    return f->after_bytes < len ? f->after_bytes : len - 1;
}

/* ------------------------------------------------------------ rules */

static int rule_check(const struct fault_transport *t, const struct rio_mock_fault *f)
{
    if (rio__fault_spec_check(f) < 0)
        return RIO_EINVAL;
    if (f->path >= (int)t->base.npaths)
        return RIO_EINVAL;
    if (f->kind == RIO_MOCK_GENCHANGE && !t->genchange_ok)
        return RIO_EINVAL;
    /* It writes into a buffer its caller may have freed (railio_mock.h). */
    if (f->kind == RIO_MOCK_UNFENCED && !rio__fault_unsafe_allowed())
        return RIO_EINVAL;
    return 0;
}

static int rule_add_locked(struct fault_transport *t, const struct rio_mock_fault *f)
{
    struct fault_rule *r;
    int ret = rule_check(t, f);

    if (ret < 0)
        return ret;
    if (t->nrules == FAULT_MAX_RULES)
        return -ENOSPC;
    r = &t->rules[t->nrules++];
    memset(r, 0, sizeof(*r));
    r->f = *f;
    if (r->f.error > 0)
        r->f.error = -r->f.error;
    return 0;
}

/*
 * The rule that fires for an op of kind op (RIO_MOCK_OP_*) on path and chunk
 * (-1 for metadata), or -1. Nothing changes but the random state, which the
 * caller saves; match_commit_locked makes the match count.
 */
struct match {
    int rule;
    uint64_t skips; /* bit i: rule i let this op pass as one of its skips */
};

static void match_locked(struct fault_transport *t, int op, int path, int64_t chunk,
                         struct match *m)
{
    unsigned i;

    m->rule = -1;
    m->skips = 0;
    for (i = 0; i < t->nrules; i++) {
        const struct fault_rule *r = &t->rules[i];
        const struct rio_mock_fault *f = &r->f;

        if (rio__fault_meta_rule(f->kind, f->op) != rio__fault_meta_op(op))
            continue;
        if (f->op && f->op != op)
            continue;
        /* Only a read can be served a changed object. */
        if (f->kind == RIO_MOCK_GENCHANGE && op != RIO_MOCK_OP_READ)
            continue;
        if (f->path >= 0 && f->path != path)
            continue;
        if (f->chunk >= 0 && f->chunk != chunk)
            continue;
        if (r->skipped < f->skip) {
            m->skips |= 1ull << i;
            continue;
        }
        if (f->count && r->fired >= f->count)
            continue;
        if (f->probability > 0) {
            double u = (double)(rio__rand(&t->rng) >> 11) * 0x1.0p-53;
            if (u >= f->probability)
                continue;
        }
        m->rule = (int)i;
        return;
    }
}

static void match_commit_locked(struct fault_transport *t, const struct match *m)
{
    unsigned i;

    for (i = 0; i < t->nrules; i++)
        if (m->skips & (1ull << i))
            t->rules[i].skipped++;
    if (m->rule >= 0) {
        t->rules[m->rule].fired++;
        t->ctr.faults_fired++;
    }
}

/* A metadata call's injected error, or 0. */
static int meta_fault(struct fault_transport *t, int op)
{
    struct match m;
    int ret = 0;

    uint32_t delay_ms = 0;

    pthread_mutex_lock(&t->mu);
    match_locked(t, op, -1, -1, &m);
    match_commit_locked(t, &m);
    if (m.rule >= 0) {
        /* delay: the call goes on after it; meta_error: fails after it */
        if (t->rules[m.rule].f.kind == RIO_MOCK_META_ERROR)
            ret = fault_error(&t->rules[m.rule].f);
        delay_ms = t->rules[m.rule].f.delay_ms;
    }
    pthread_mutex_unlock(&t->mu);
    if (delay_ms) {
        /* The error comes late, as from a server that gave up on it; the
         * call's other ops go on meanwhile. */
        struct timespec ts = {delay_ms / 1000, (long)(delay_ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
    }
    return ret;
}

/* ------------------------------------------------------------ op pool */

static struct fop *fop_get_locked(struct fault_transport *t)
{
    struct fop *op = rio__opool_get(&t->pool);

    if (op)
        op->t = t;
    return op;
}

static void fop_put_locked(struct fault_transport *t, struct fop *op)
{
    rio__free(op->copy);
    op->copy = NULL;
    op->where = FOP_FREE;
    op->io = NULL;
    rio__opool_put(&t->pool, op);
}

static void done_locked(struct fault_transport *t, struct fop *op, int64_t res)
{
    op->res = res;
    op->where = FOP_DONE;
    rio_list_push_back(&t->done, &op->qnode);
}

static void timer_locked(struct fault_transport *t, struct fop *op, uint64_t due)
{
    op->where = FOP_TIMER;
    op->due_ns = due;
    op->tnext = t->timers;
    t->timers = op;
}

static void timer_remove_locked(struct fault_transport *t, struct fop *op)
{
    struct fop **pp;

    for (pp = &t->timers; *pp; pp = &(*pp)->tnext)
        if (*pp == op) {
            *pp = op->tnext;
            return;
        }
}

/* ------------------------------------------------------------ paths */

static void path_refresh_locked(struct fault_transport *t, unsigned pi, uint64_t now)
{
    struct fpath *p = &t->path[pi];

    if (p->down && p->down_until && now >= p->down_until)
        p->down = false;
}

/* An op ends by a reset: a READ's destination is 0xDD. */
static void reset_done_locked(struct fault_transport *t, struct fop *op)
{
    if (op->io->kind == RIO_IO_READ)
        fill(op->io->dst, op->io->len);
    done_locked(t, op, -ECONNRESET);
}

/*
 * A DISCONNECT fired on path pi: the path goes down, and every other op on
 * it ends with -ECONNRESET at once (an op in the inner transport is
 * cancelled there and reset when it comes back); a LATE op lands delay_ms
 * later.
 */
static void path_reset_locked(struct fault_transport *t, unsigned pi, uint32_t down_ms,
                              const struct fop *self, uint64_t now)
{
    struct fpath *p = &t->path[pi];
    struct rio_opool_it it = {0};
    struct fop *op;

    p->down = true;
    p->down_until = down_ms ? now + (uint64_t)down_ms * NS_PER_MS : 0;
    while ((op = rio__opool_walk(&t->pool, &it))) {
        if (op == self || !op->io || op->io->path != pi)
            continue;
        switch (op->where) {
        case FOP_INNER:
            if (!op->reset) {
                op->reset = true;
                t->resetting = true;
                rio__t_cancel(t->inner, &op->sh);
            }
            break;
        case FOP_HELD:
            if (op->f.kind == RIO_MOCK_LATE) {
                op->land = true;
                op->res = -ECONNRESET;
                timer_locked(t, op, now + (uint64_t)op->f.delay_ms * NS_PER_MS);
            } else {
                reset_done_locked(t, op);
            }
            break;
        case FOP_TIMER:
            if (!op->land) {
                timer_remove_locked(t, op);
                reset_done_locked(t, op);
            }
            break;
        default:
            break;
        }
    }
}

/* ------------------------------------------------------------ submit */

/* The shadow's complete(): runs inside the inner reap, in the reaping
 * thread, and only queues. */
static void shadow_complete(struct rio_io *sh)
{
    struct fop *op = (struct fop *)sh;
    struct fault_transport *t = op->t;

    rio_list_push_back(&t->reaped, &op->qnode);
}

static int fault_submit(struct rio_transport *tt, struct rio_io *io)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    const struct rio_mock_fault *f = NULL;
    struct fop *op;
    struct match m;
    uint64_t rng0;
    int opk, ret;

    if (!io || io->path >= t->base.npaths || !io->complete || io->len == 0 ||
        (io->kind != RIO_IO_READ && io->kind != RIO_IO_WRITE))
        return -EINVAL;
    opk = io->kind == RIO_IO_READ ? RIO_MOCK_OP_READ : RIO_MOCK_OP_WRITE;

    pthread_mutex_lock(&t->mu);
    op = fop_get_locked(t);
    if (!op) {
        pthread_mutex_unlock(&t->mu);
        return -ENOMEM;
    }
    op->io = io;
    /* The shadow carries every field, res included: a stale res is the
     * engine's rollback bug, and the inner transport may check for it. */
    op->sh = *io;
    op->sh.complete = shadow_complete;
    op->sh.engine_priv = NULL;
    op->sh.tpriv = NULL;

    path_refresh_locked(t, io->path, rio__now_ns());
    if (t->path[io->path].down) {
        /* Refused by a downed path. */
        io->tpriv = op;
        reset_done_locked(t, op);
        goto accepted;
    }

    rng0 = t->rng;
    match_locked(t, opk, (int)io->path, (int64_t)io->index, &m);
    if (m.rule >= 0) {
        f = &t->rules[m.rule].f;
        op->f = *f;
    }
    switch (op->f.kind) {
    case RIO_MOCK_STALL:
    case RIO_MOCK_LATE:
    case RIO_MOCK_UNFENCED:
        op->where = FOP_HELD;
        io->tpriv = op;
        match_commit_locked(t, &m);
        goto accepted;
    case RIO_MOCK_BITFLIP:
        op->flip_bit = rio__rand(&t->rng) % (io->len * 8);
        if (io->kind == RIO_IO_WRITE) {
            op->copy = rio__malloc((size_t)io->len);
            if (!op->copy) {
                ret = -ENOMEM;
                goto err_put;
            }
            memcpy(op->copy, io->src, (size_t)io->len);
            op->copy[op->flip_bit / 8] ^= (uint8_t)(1u << (op->flip_bit % 8));
            op->sh.src = op->copy;
        }
        break;
    case RIO_MOCK_GENCHANGE:
        ret = rio__mock_genchange(t->inner, io->key, io->generation);
        if (ret < 0) {
            io->tpriv = op;
            match_commit_locked(t, &m);
            done_locked(t, op, ret);
            goto accepted;
        }
        break;
    default:
        break;
    }
    op->where = FOP_INNER;
    ret = rio__t_submit(t->inner, &op->sh);
    if (ret < 0)
        goto err_put;
    io->tpriv = op;
    match_commit_locked(t, &m);
accepted:
    if (io->kind == RIO_IO_WRITE)
        t->ctr.ops_write++;
    else
        t->ctr.ops_read++;
    t->ctr.inflight++;
    pthread_mutex_unlock(&t->mu);
    return 0;
err_put:
    t->rng = rng0; /* the draw never happened */
    fop_put_locked(t, op);
    pthread_mutex_unlock(&t->mu);
    return ret;
}

/* ------------------------------------------------------------ cancel */

static void fault_cancel(struct rio_transport *tt, struct rio_io *io)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    struct fop *op;
    bool wake = false;

    pthread_mutex_lock(&t->mu);
    op = io ? io->tpriv : NULL;
    if (!op || op->io != io || op->cancelled) {
        pthread_mutex_unlock(&t->mu);
        return;
    }
    switch (op->where) {
    case FOP_INNER:
        op->cancelled = true;
        rio__t_cancel(t->inner, &op->sh);
        break;
    case FOP_HELD:
        op->cancelled = true;
        if (op->f.kind == RIO_MOCK_LATE) {
            op->land = true;
            op->res = -ECANCELED;
            timer_locked(t, op, rio__now_ns() + (uint64_t)op->f.delay_ms * NS_PER_MS);
        } else if (op->f.kind == RIO_MOCK_UNFENCED) {
            struct landing *l = rio__malloc(sizeof(*l));
            /* No memory: it behaves, and lands nothing. */
            if (l && io->kind == RIO_IO_READ) {
                l->dst = io->dst;
                l->len = io->len;
                l->due_ns = rio__now_ns() + (uint64_t)op->f.delay_ms * NS_PER_MS;
                l->next = t->landings;
                t->landings = l;
                l = NULL;
            }
            rio__free(l);
            done_locked(t, op, -ECANCELED);
        } else {
            done_locked(t, op, -ECANCELED);
        }
        wake = true;
        break;
    case FOP_TIMER:
        /* The I/O is over (a DELAY holds its result): it completes now with
         * what it reached. An armed LATE landing is not stopped. */
        if (!op->land) {
            op->cancelled = true;
            timer_remove_locked(t, op);
            done_locked(t, op, op->res);
            wake = true;
        }
        break;
    default:
        break;
    }
    pthread_mutex_unlock(&t->mu);
    /* A reap blocked in the inner transport returns to deliver it. */
    if (wake)
        rio__t_wake(t->inner);
}

/* ------------------------------------------------------------ reap */

/* Apply op's fault to the result the inner transport gave. */
static void inner_done_locked(struct fault_transport *t, struct fop *op, uint64_t now)
{
    struct rio_io *io = op->io;
    int64_t res = op->sh.res;
    uint64_t len = io->len;

    op->svc_ns = op->sh.svc_ns;
    if (op->reset) {
        reset_done_locked(t, op);
        return;
    }
    switch (op->f.kind) {
    case RIO_MOCK_DISCONNECT:
        if (io->kind == RIO_IO_READ && op->f.after_bytes < len)
            fill((uint8_t *)io->dst + op->f.after_bytes, len - op->f.after_bytes);
        done_locked(t, op, -ECONNRESET);
        path_reset_locked(t, io->path, op->f.down_ms, op, now);
        return;
    case RIO_MOCK_ERROR:
        if (io->kind == RIO_IO_READ)
            fill(io->dst, len);
        res = fault_error(&op->f);
        break;
    case RIO_MOCK_SHORT:
        if (res == (int64_t)len) {
            res = (int64_t)short_len(&op->f, len);
            if (io->kind == RIO_IO_READ)
                fill((uint8_t *)io->dst + res, len - (uint64_t)res);
        }
        break;
    case RIO_MOCK_BITFLIP:
        if (io->kind == RIO_IO_READ && res == (int64_t)len)
            ((uint8_t *)io->dst)[op->flip_bit / 8] ^= (uint8_t)(1u << (op->flip_bit % 8));
        break;
    case RIO_MOCK_DELAY:
        if (!op->cancelled) {
            op->res = res;
            timer_locked(t, op, now + (uint64_t)op->f.delay_ms * NS_PER_MS);
            return;
        }
        break;
    default:
        break;
    }
    done_locked(t, op, res);
}

/* Due timers and landings; returns the earliest one still pending. */
static uint64_t timers_run_locked(struct fault_transport *t, uint64_t now)
{
    struct fop **pp = &t->timers, *op;
    struct landing **lp = &t->landings, *l;
    uint64_t next = NEVER;

    while ((op = *pp)) {
        if (op->due_ns > now) {
            next = op->due_ns < next ? op->due_ns : next;
            pp = &op->tnext;
            continue;
        }
        *pp = op->tnext;
        if (op->land) {
            /* The transfer the caller gave up on lands now. A WRITE reads
             * its source, so a caller that already freed it is caught by
             * ASan. */
            if (op->io->kind == RIO_IO_READ) {
                fill(op->io->dst, op->io->len);
            } else {
                volatile uint64_t sink = rio__xxh3(op->io->src, (size_t)op->io->len);
                (void)sink;
            }
            t->ctr.late_writes++;
        }
        done_locked(t, op, op->res);
    }
    while ((l = *lp)) {
        if (l->due_ns > now) {
            next = l->due_ns < next ? l->due_ns : next;
            lp = &l->next;
            continue;
        }
        *lp = l->next;
        fill(l->dst, l->len);
        t->ctr.late_writes++;
        rio__free(l);
    }
    return next;
}

/*
 * Settle what the last inner reap completed and what is due; take the done
 * list, each op's result out and its tpriv cleared. *next: the earliest
 * pending timer.
 */
static void collect_locked(struct fault_transport *t, uint64_t *next, struct rio_list *out)
{
    uint64_t now = rio__now_ns();
    struct rio_list_node *q;

    while ((q = rio_list_pop_front(&t->reaped)))
        inner_done_locked(t, rio_container_of(q, struct fop, qnode), now);
    *next = timers_run_locked(t, now);
    rio_list_each (op, &t->done, struct fop, qnode) {
        op->io->res = op->res;
        op->io->svc_ns = op->svc_ns;
        /* The inner transport's own failure, passed on: what its store
         * answered goes with it (the engine cleared why at submit, and
         * the shadow is a copy). Its xxh_got does not: a fault may change
         * the bytes after it hashed them. */
        if (op->res < 0 && op->res == op->sh.res)
            memcpy(op->io->why, op->sh.why, sizeof(op->io->why));
        op->io->tpriv = NULL;
        t->ctr.inflight--;
    }
    rio_list_splice_back(out, &t->done);
}

static int deliver(struct fault_transport *t, struct rio_list *list)
{
    struct rio_list_node *q;
    int n = 0;

    rio_list_each (op, list, struct fop, qnode) {
        op->io->complete(op->io);
        n++;
    }
    pthread_mutex_lock(&t->mu);
    while ((q = rio_list_pop_front(list)))
        fop_put_locked(t, rio_container_of(q, struct fop, qnode));
    pthread_mutex_unlock(&t->mu);
    return n;
}

static int fault_reap(struct rio_transport *tt, int timeout_ms)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    uint64_t deadline, next = NEVER, now;
    struct rio_list list = {0};
    bool woken;
    int r, wait;

    now = rio__now_ns();
    deadline = timeout_ms < 0 ? NEVER : now + (uint64_t)timeout_ms * NS_PER_MS;
    pthread_mutex_lock(&t->mu);
    next = timers_run_locked(t, now);
    woken = t->woken || !rio_list_empty(&t->done);
    pthread_mutex_unlock(&t->mu);
    for (;;) {
        uint64_t until = next < deadline ? next : deadline;

        now = rio__now_ns();
        if (woken || until <= now)
            wait = 0;
        else if (until == NEVER)
            wait = -1;
        else if (until - now >= (uint64_t)INT32_MAX * NS_PER_MS)
            wait = INT32_MAX;
        else
            wait = (int)((until - now + NS_PER_MS - 1) / NS_PER_MS);
        r = rio__t_reap(t->inner, wait);

        pthread_mutex_lock(&t->mu);
        collect_locked(t, &next, &list);
        while (t->resetting && r >= 0) {
            /* The ops a reset cancelled fail with the op that reset their
             * path, in the same reap, as on a real connection. */
            t->resetting = false;
            pthread_mutex_unlock(&t->mu);
            r = rio__t_reap(t->inner, 0);
            pthread_mutex_lock(&t->mu);
            collect_locked(t, &next, &list);
        }
        t->resetting = false;
        woken = t->woken;
        t->woken = false;
        pthread_mutex_unlock(&t->mu);
        if (!rio_list_empty(&list))
            return deliver(t, &list);
        if (r < 0)
            return r;
        if (woken || rio__now_ns() >= deadline)
            return 0;
    }
}

static void fault_wake(struct rio_transport *tt)
{
    struct fault_transport *t = (struct fault_transport *)tt;

    pthread_mutex_lock(&t->mu);
    t->woken = true;
    pthread_mutex_unlock(&t->mu);
    rio__t_wake(t->inner);
}

/* ------------------------------------------------------------ metadata */

static int fault_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    int ret = meta_fault(t, RIO_MOCK_OP_LOOKUP);

    return ret < 0 ? ret : rio__t_lookup(t->inner, key, out);
}

/* Pass through, unfaulted (faults of the HEADs behind them are the inner
 * transport's own): an object another tool uploaded in parts is checked by
 * its parts through the filter as without it. */
static int fault_parts_of(struct rio_transport *tt, const struct rio_desc *d, uint64_t *part,
                          uint32_t *nparts, char want[48])
{
    struct fault_transport *t = (struct fault_transport *)tt;

    return rio__t_parts_of(t->inner, d, part, nparts, want);
}

static int fault_parts_even(struct rio_transport *tt, const struct rio_desc *d, uint64_t part,
                            uint32_t nparts)
{
    struct fault_transport *t = (struct fault_transport *)tt;

    return rio__t_parts_even(t->inner, d, part, nparts);
}

static int fault_full_checksum(struct rio_transport *tt, const struct rio_desc *d, int *algo,
                               uint64_t *value)
{
    struct fault_transport *t = (struct fault_transport *)tt;

    return rio__t_full_checksum(t->inner, d, algo, value);
}

static int fault_put_open(struct rio_transport *tt, const char *key, uint64_t size,
                          uint64_t chunk_size, void **upload)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    int ret = meta_fault(t, RIO_MOCK_OP_PUT_OPEN);

    return ret < 0 ? ret : rio__t_put_open(t->inner, key, size, chunk_size, upload);
}

static int fault_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    int ret = meta_fault(t, RIO_MOCK_OP_PUT_COMMIT);

    if (ret < 0) {
        /* A failed commit consumes the upload, except a retryable failure
         * over a transport with RIO_CAP_COMMIT_RETRY: the engine then
         * commits it again or aborts it. */
        if (!rio__t_has_cap(t->inner, RIO_CAP_COMMIT_RETRY) ||
            !rio__class_is_retryable(rio__err_class(ret)))
            rio__t_put_abort(t->inner, upload);
        return ret;
    }
    return rio__t_put_commit(t->inner, upload, d);
}

/* Passes through (the condition is the inner commit's to decide); over a
 * backend that cannot, the engine aborts the upload it just opened. */
static int fault_put_expect(struct rio_transport *tt, void *upload, uint64_t gen)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    return rio__t_has_put_expect(t->inner) ? rio__t_put_expect(t->inner, upload, gen) : RIO_ENOTSUP;
}

/* Passes through: the work is on the caller's bytes, before any fault
 * (a flipped copy of a WRITE is then refused where the server checks). */
static void fault_put_prep(struct rio_transport *tt, void *upload, uint64_t index, unsigned n,
                           const void *const *src, const uint64_t *len)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    if (rio__t_has_put_prep(t->inner))
        rio__t_put_prep_n(t->inner, upload, index, n, src, len);
}

static unsigned fault_put_prep_group(struct rio_transport *tt, void *upload)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    return rio__t_put_prep_group(t->inner, upload);
}

static unsigned fault_put_prep_many(struct rio_transport *tt, unsigned n, void *const *uploads,
                                    const uint64_t *index, const void *const *src,
                                    const uint64_t *len)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    if (!rio__t_has_put_prep(t->inner))
        return 1;
    if (n == 0)
        return rio__t_put_prep_many_width(t->inner);
    rio__t_put_prep_many(t->inner, n, uploads, index, src, len);
    return n;
}

static void fault_put_abort(struct rio_transport *tt, void *upload)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    rio__t_put_abort(t->inner, upload);
}

static int fault_remove(struct rio_transport *tt, const char *key)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    int ret = meta_fault(t, RIO_MOCK_OP_REMOVE);

    return ret < 0 ? ret : rio__t_remove(t->inner, key);
}

/* Faults as remove; over an inner transport without it, RIO_ENOTSUP. */
static int fault_remove_if(struct rio_transport *tt, const char *key, uint64_t gen)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    if (!rio__t_has_remove_if(t->inner))
        return RIO_ENOTSUP;
    int ret = meta_fault(t, RIO_MOCK_OP_REMOVE);
    return ret < 0 ? ret : rio__t_remove_if(t->inner, key, gen);
}

/* Listing and existence pass through and fault like the other metadata;
 * an inner transport without them answers RIO_ENOTSUP unfaulted, as it
 * would without the filter (the engine then lists nothing, or looks the
 * keys up instead). */
static int fault_list(struct rio_transport *tt, const struct rio_list_args *a,
                      struct rio_list_page *out)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    int ret;

    if (!rio__t_ops(t->inner)->list)
        return RIO_ENOTSUP;
    ret = meta_fault(t, RIO_MOCK_OP_LIST);
    return ret < 0 ? ret : rio__t_list(t->inner, a, out);
}

static int fault_exists(struct rio_transport *tt, const char *const *keys, unsigned n, uint8_t *out)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    int ret;

    if (!rio__t_has_exists(t->inner))
        return RIO_ENOTSUP;
    ret = meta_fault(t, RIO_MOCK_OP_EXISTS);
    return ret < 0 ? ret : rio__t_exists(t->inner, keys, n, out);
}

/* fsck passes through unfaulted: it is one long maintenance call, not an
 * op the engine retries, and the filter's faults model transfers. */
static int fault_fsck(struct rio_transport *tt, const struct rio_fsck_args *a,
                      struct rio_fsck_report *out)
{
    return rio__t_fsck(((struct fault_transport *)tt)->inner, a, out);
}

/* compose passes through unfaulted: one metadata call the engine never
 * retries; the filter's faults model transfers. */
static int fault_compose(struct rio_transport *tt, const char *dst, const char *const *srcs,
                         const uint64_t *gens, unsigned n, unsigned flags, uint64_t dst_if,
                         struct rio_desc *out)
{
    return rio__t_compose(((struct fault_transport *)tt)->inner, dst, srcs, gens, n, flags, dst_if,
                          out);
}

static double fault_path_cap(struct rio_transport *tt, unsigned path)
{
    return rio__t_path_cap(((struct fault_transport *)tt)->inner, path);
}

/* The inner transport's: an op the filter holds (stall, late) moves
 * nothing. */
static uint64_t fault_path_moved(struct rio_transport *tt, unsigned path)
{
    return rio__t_path_moved(((struct fault_transport *)tt)->inner, path);
}

static uint64_t fault_cpu_ns(struct rio_transport *tt)
{
    return rio__t_cpu_ns(((struct fault_transport *)tt)->inner);
}

/* ------------------------------------------------------------ open, close */

static void fault_free(struct fault_transport *t)
{
    struct rio_opool_it it = {0};
    struct fop *op;

    while ((op = rio__opool_walk(&t->pool, &it)))
        rio__free(op->copy);
    rio__opool_destroy(&t->pool);
    while (t->landings) {
        struct landing *l = t->landings;
        t->landings = l->next;
        rio__free(l);
    }
    pthread_mutex_destroy(&t->mu);
    rio__free(t);
}

static void fault_close(struct rio_transport *tt)
{
    struct fault_transport *t = fault_cast(tt);

    if (!t)
        return;
    rio__t_close(t->inner);
    fault_free(t);
}

/* Not reached by scheme: the registry stacks it (rio__fault_stack). */
static int fault_open(const struct rio_url *u, const struct rio_options *o,
                      struct rio_transport **out)
{
    (void)u;
    (void)o;
    (void)out;
    return RIO_EURL;
}

static int parse_rules(struct fault_transport *t, const char *s)
{
    while (*s) {
        const char *e = strchr(s, ';');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        struct rio_mock_fault f;
        char spec[RIO_FAULT_SPEC_MAX];
        int ret;

        if (l >= sizeof(spec)) {
            rio__detail("faults=: a rule longer than %u bytes", RIO_FAULT_SPEC_MAX - 1);
            return RIO_EINVAL;
        }
        if (l > 0) {
            memcpy(spec, s, l);
            spec[l] = '\0';
            ret = rio_mock_fault_parse(spec, &f);
            if (ret < 0) {
                rio__detail("faults=: \"%s\" is not a fault rule (kind:key=value:...)", spec);
                return ret;
            }
            ret = rule_add_locked(t, &f);
            if (ret < 0)
                return ret == -ENOSPC ? RIO_EINVAL : ret;
        }
        if (!e)
            break;
        s = e + 1;
    }
    return 0;
}

static int fault_lookup_mtime(struct rio_transport *tt, const char *key, struct rio_desc *out,
                              int64_t *mtime_ns)
{
    struct fault_transport *t = (struct fault_transport *)tt;
    int ret = meta_fault(t, RIO_MOCK_OP_LOOKUP);

    return ret < 0 ? ret : rio__t_lookup_mtime(t->inner, key, out, mtime_ns);
}

#define FAULT_OPS(c)                                                                               \
    {                                                                                              \
        .scheme = "fault", .caps = (c), .open = fault_open, .close = fault_close,                  \
        .submit = fault_submit, .reap = fault_reap, .wake = fault_wake, .cancel = fault_cancel,    \
        .lookup = fault_lookup, .lookup_mtime = fault_lookup_mtime, .put_open = fault_put_open,    \
        .put_commit = fault_put_commit, .put_abort = fault_put_abort, .remove = fault_remove,      \
        .put_prep = fault_put_prep, .put_prep_group = fault_put_prep_group,                        \
        .put_prep_many = fault_put_prep_many, .put_expect = fault_put_expect,                      \
        .remove_if = fault_remove_if, .list = fault_list, .exists = fault_exists,                  \
        .fsck = fault_fsck, .compose = fault_compose, .path_cap = fault_path_cap,                  \
        .path_moved = fault_path_moved, .cpu_ns = fault_cpu_ns, .parts_of = fault_parts_of,        \
        .parts_even = fault_parts_even, .full_checksum = fault_full_checksum,                      \
    }
#define FAULT_OPS4(c) FAULT_OPS(c), FAULT_OPS((c) + 0x2), FAULT_OPS((c) + 0x4), FAULT_OPS((c) + 0x6)

#define FAULT_OPS32(c)                                                                             \
    FAULT_OPS4(c), FAULT_OPS4((c) + 0x08), FAULT_OPS4((c) + 0x10), FAULT_OPS4((c) + 0x18),         \
        FAULT_OPS4((c) + 0x20), FAULT_OPS4((c) + 0x28), FAULT_OPS4((c) + 0x30),                    \
        FAULT_OPS4((c) + 0x38)

_Static_assert(FAULT_CAPS == 0x7Eu, "a new capability bit: add it to FAULT_CAPS and the tables");
static const struct rio_transport_ops fault_ops[FAULT_NOPS] = {FAULT_OPS32(0x00),
                                                               FAULT_OPS32(0x40)};

/* The inner transport's path state goes to the engine through the filter,
 * the handle the engine knows (transport.h, path_event). */
static void fault_path_event(struct rio_transport *inner, unsigned path, int state, int err)
{
    struct fault_transport *t = inner->engine;

    rio__t_path_event(&t->base, path, state, err);
}

int rio__fault_stack(struct rio_transport *inner, const char *spec, const struct rio_options *o,
                     struct rio_transport **out)
{
    struct fault_transport *t;
    unsigned caps;
    int ret;

    if (!inner || !out)
        return RIO_EINVAL;
    t = rio__calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    ret = -pthread_mutex_init(&t->mu, NULL);
    if (ret < 0) {
        rio__free(t);
        return ret;
    }
    caps = inner->ops->caps & FAULT_CAPS;
    t->base = *inner; /* npaths and the limits the engine respects */
    t->base.ops = &fault_ops[caps >> 1];
    t->base.path_event = NULL; /* the engine's, set on the filter */
    t->base.engine = NULL;
    t->inner = inner;
    t->genchange_ok = rio__mock_is(inner);
    t->rng = o && o->seed ? o->seed : FAULT_SEED0;
    rio__opool_init(&t->pool, sizeof(struct fop), FAULT_SLAB_OPS);
    ret = rio__opool_grow(&t->pool);
    if (ret == 0 && spec)
        ret = parse_rules(t, spec);
    if (ret < 0) {
        fault_free(t);
        return ret;
    }
    inner->engine = t;
    inner->path_event = fault_path_event;
    *out = &t->base;
    return 0;
}

/* ------------------------------------------------------------ test API */

int rio__fault_add(struct rio_transport *tt, const struct rio_mock_fault *f)
{
    struct fault_transport *t = fault_cast(tt);
    int ret;

    if (!t)
        return RIO_EINVAL;
    pthread_mutex_lock(&t->mu);
    ret = rule_add_locked(t, f);
    pthread_mutex_unlock(&t->mu);
    return ret;
}

void rio__fault_clear(struct rio_transport *tt)
{
    struct fault_transport *t = fault_cast(tt);

    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->nrules = 0;
    pthread_mutex_unlock(&t->mu);
}

void rio__fault_heal(struct rio_transport *tt)
{
    struct fault_transport *t = fault_cast(tt);
    unsigned i;

    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    for (i = 0; i < t->base.npaths; i++)
        t->path[i].down = false;
    pthread_mutex_unlock(&t->mu);
}

void rio__fault_counters(struct rio_transport *tt, struct rio_mock_counters *out)
{
    struct fault_transport *t = fault_cast(tt);

    if (!t || !out)
        return;
    pthread_mutex_lock(&t->mu);
    out->ops_read = t->ctr.ops_read;
    out->ops_write = t->ctr.ops_write;
    out->faults_fired = t->ctr.faults_fired;
    out->late_writes = t->ctr.late_writes;
    out->inflight = t->ctr.inflight;
    pthread_mutex_unlock(&t->mu);
}

/* --- the public API, over a client --- */

static struct rio_transport *client_t(struct rio_client *c)
{
    return c ? rio__client_transport(c) : NULL;
}

int rio_mock_fault_add(struct rio_client *c, const struct rio_mock_fault *f)
{
    return rio__fault_add(client_t(c), f);
}

void rio_mock_faults_clear(struct rio_client *c)
{
    rio__fault_clear(client_t(c));
}

void rio_mock_heal(struct rio_client *c)
{
    rio__fault_heal(client_t(c));
}

void rio_mock_counters(struct rio_client *c, struct rio_mock_counters *out)
{
    struct rio_transport *t = client_t(c);

    if (!out)
        return;
    memset(out, 0, sizeof(*out));
    if (!rio__fault_is(t))
        return;
    rio__mock_counters(rio__fault_inner(t), out); /* nothing unless mock:// */
    rio__fault_counters(t, out);
}
