/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine thread: pull-based scheduling of chunks onto paths, the
 * in-flight budget, retry with rollback, path cooldown and probing, deadlines,
 * cancellation and the fence. See docs/internals/engine.md.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"

/* ------------------------------------------------------------ attempts */

int rio__engine_reserve(struct rio_client *c, unsigned n)
{
    for (unsigned i = 0; i < n; i++) {
        struct rio__attempt *a = rio__calloc(1, sizeof(*a));
        if (!a)
            return -ENOMEM;
        a->next = c->free_attempts;
        c->free_attempts = a;
    }
    return 0;
}

void rio__engine_free_attempts(struct rio_client *c)
{
    while (c->free_attempts) {
        struct rio__attempt *a = c->free_attempts;
        c->free_attempts = a->next;
        rio__free(a);
    }
}

static struct rio__attempt *attempt_get_locked(struct rio_client *c)
{
    struct rio__attempt *a = c->free_attempts;
    if (a) {
        c->free_attempts = a->next;
        memset(a, 0, sizeof(*a));
        return a;
    }
    /* The pool is sized for paths x depth at creation; this only runs when
     * cancelled attempts are still outstanding beside a full pipeline. */
    return rio__calloc(1, sizeof(*a));
}

static void attempt_put_locked(struct rio_client *c, struct rio__attempt *a)
{
    a->next = c->free_attempts;
    c->free_attempts = a;
}

/* ------------------------------------------------------------- paths */

uint64_t rio__path_busy_now(const struct rio__path *p, uint64_t now)
{
    uint64_t b = p->busy_ns;
    if (p->inflight_ops > 0 && now > p->busy_since_ns)
        b += now - p->busy_since_ns;
    return b;
}

static int io_dir(int kind)
{
    return kind == RIO_IO_WRITE;
}

static uint64_t dir_busy_now(const struct rio__path_dir *d, uint64_t now)
{
    uint64_t b = d->busy_ns;
    if (d->inflight_ops > 0 && now > d->busy_since_ns)
        b += now - d->busy_since_ns;
    return b;
}

/* Fold the bytes delivered and the busy time since the last sample into the
 * direction's rate estimate. */
static void path_rate_sample(struct rio__path_dir *d, uint64_t now)
{
    uint64_t busy = dir_busy_now(d, now);
    uint64_t db = busy - d->sample_busy_ns;
    uint64_t dbytes = d->bytes_total - d->sample_bytes;
    if (db < 1000000 || dbytes == 0) /* < 1 ms of busy time: too noisy */
        return;
    double sample = (double)dbytes * 1e9 / (double)db;
    d->rate_bps = d->rate_bps == 0 ? sample : 0.7 * d->rate_bps + 0.3 * sample;
    d->sample_busy_ns = busy;
    d->sample_bytes = d->bytes_total;
}

/* ------------------------------------------------ adaptive concurrency */

/*
 * Adaptive concurrency (option adapt, on by default; docs/internals/engine.md,
 * "Adaptive concurrency"). Each call class (0 GET, 1 PUT) of a client stands
 * on a ladder of limits: 1, 2, 4 ... paths at depth 1 up to every path, then
 * depth 2, 4 ... up to the configured depth (the ceilings). It starts at the
 * bottom (or where the client's other class stands) and climbs one step per
 * window while the step adds goodput (paths that scale near linearly: to
 * every path at once); when a step does not add ADAPT_MARGIN (twice), it
 * steps back and holds. Every ADAPT_REPROBE windows it tries a step again,
 * up and down in turn: up pays when the target got faster or a path came
 * back; down holds when the level below moves about as much (fewer
 * connections cost the target less).
 *
 * Goodput is measured over wall time, so the client's own time between ops
 * counts: per path, the bytes of its completions in the window after its
 * first one, over the time from its first to its last; the class's goodput
 * is the sum over its paths. A window ends once every path of the level has
 * completed two ops, the class one op more than the level has slots
 * (ADAPT_WIN_MIN_OPS at least) and ADAPT_WIN_MIN_NS have passed; or after
 * ADAPT_WIN_MAX_X times that many ops (a path that has not completed two by
 * then adds nothing). It ends without a verdict while the class has no work
 * waiting (a call's tail, a reader waiting for its consumer, the time
 * between calls) and when a path fails (a path cooling down says nothing
 * about how many paths the target wants). While a path is down, probed or
 * stalled (path_stalled) the limits are lifted (adapt_lift_locked): every
 * class may use every path at the configured depth, so the survivors carry
 * the work as without adapt, and no window is measured; once every path is
 * healthy again each class climbs again from the level it held. A settled
 * class whose goodput falls below ADAPT_FELL of what it held, two windows
 * in a row, tries the step up first (a path that came back, a target that
 * got slower per connection), and if that does not pay the step below.
 * The state lives in the client, under mu like the paths, so a sequence of
 * calls converges.
 */
#define ADAPT_MARGIN 0.08
#define ADAPT_WIN_MIN_OPS 3u
#define ADAPT_WIN_MIN_NS 20000000ull
#define ADAPT_REPROBE 32u
#define ADAPT_WIN_MAX_X 4u
#define ADAPT_SHORT_CALLS 3u
/* Settled: two windows in a row below this share of the held level's
 * goodput try the step up at once, then the step below. */
#define ADAPT_FELL 0.8
/* A path is stalled when its oldest op in flight has run ADAPT_STALL_X
 * times the path's expected op time plus ADAPT_STALL_NS while it completed
 * nothing and another path completed ops (path_stalled). */
#define ADAPT_STALL_X 4.0
#define ADAPT_STALL_NS 20000000ull
/* A step up in paths that gives this share of its paths' ratio in goodput
 * (2 paths: 1.7x one's) goes straight on to every path. */
#define ADAPT_LINEAR 0.85

static bool adapt_on(const struct rio_client *c)
{
    return c->o.adapt > 0;
}

/* The client's depth within the most ops a path of the transport holds
 * (transport.h, max_depth). */
static unsigned depth_ceiling(const struct rio_client *c)
{
    unsigned m = c->t->max_depth;
    return m && m < c->o.depth ? m : c->o.depth;
}

/* The paths and depth of ladder level l; false when l is past the top. */
static bool adapt_ladder(const struct rio_client *c, unsigned l, unsigned *paths, unsigned *depth)
{
    unsigned p = 1, d = 1, pmax = c->npaths ? c->npaths : 1, dmax = depth_ceiling(c);

    for (; l && p < pmax; l--)
        p = p * 2 < pmax ? p * 2 : pmax;
    for (; l && d < dmax; l--)
        d = d * 2 < dmax ? d * 2 : dmax;
    *paths = p;
    *depth = d;
    return l == 0;
}

static unsigned adapt_top(const struct rio_client *c)
{
    unsigned l = 0, p, d;
    while (adapt_ladder(c, l + 1, &p, &d))
        l++;
    return l;
}

/* A new window at the current level: earlier samples no longer count. */
static void adapt_window(struct rio__adapt *st, uint64_t now)
{
    st->win_t0 = now;
    st->n = 0;
    memset(st->p, 0, sizeof(st->p));
}

static void adapt_set_level(struct rio_client *c, struct rio__adapt *st, unsigned l, uint64_t now)
{
    st->level = l;
    st->level_t0 = now;
    st->short_calls = 0;
    adapt_ladder(c, l, &st->paths, &st->depth);
    adapt_window(st, now);
}

/* Grow from level l with nothing below to beat: its first window measures
 * l, the next one the step up. */
static void adapt_grow_from(struct rio_client *c, struct rio__adapt *st, unsigned l, uint64_t now)
{
    st->state = RIO_ADAPT_GROWING;
    st->g_below = 0;
    st->g_doubt = 0;
    st->down = false;
    st->fall_up = false;
    st->falls = 0;
    adapt_set_level(c, st, l, now);
}

/* Class dir has work for the first time: it starts where the client's
 * other class stands (the same paths to the same target), else at the
 * bottom, and climbs from there (lifted if the client's limits are). */
static void adapt_start_locked(struct rio_client *c, int dir, uint64_t now)
{
    struct rio__adapt *st = &c->adapt[dir], *other = &c->adapt[!dir];

    st->started = true;
    st->lifted = c->adapt_lift != RIO__LIFT_NONE;
    adapt_grow_from(c, st, other->started ? other->level : 0, now);
}

/* A path failed: the window in progress says nothing about concurrency. */
static void adapt_discard_locked(struct rio_client *c, uint64_t now)
{
    for (int d = 0; d < 2; d++)
        if (c->adapt[d].started) {
            c->adapt[d].level_t0 = now;
            adapt_window(&c->adapt[d], now);
        }
}

/* The paths class dir may use now, as a bit mask: the first paths, in
 * order, of those not cooling down, as many as its level allows (a path
 * that fails hands its place to the next), a path measured at under
 * ADAPT_SLOW of the fastest one's rate only after every other: by index
 * alone, the 2-path level of three 1 gbit rails with rail 1 at 20 mbit was
 * rails 0 and 1, which moved no more than rail 0, so the class settled on
 * one path and rail 2 never carried a byte. Every path when adapt is off. */
#define ADAPT_SLOW 0.25
static uint32_t adapt_mask(const struct rio_client *c, int dir)
{
    uint32_t all = c->npaths >= 32 ? UINT32_MAX : (1u << c->npaths) - 1, m = 0;
    const struct rio__adapt *st = &c->adapt[dir];
    double fastest = 0;

    if (!adapt_on(c) || !st->started || st->paths >= c->npaths || c->adapt_lift)
        return all;
    /* While a path is down or being probed, every path: a failure is
     * handled as without adapt (chunks move to every live path, a dead
     * target runs out of healthy paths at once and the stall window
     * starts), not by handing paths one at a time to the next in line. */
    for (unsigned i = 0; i < c->npaths; i++)
        if (c->paths[i].state != PATH_HEALTHY)
            return all;
    for (unsigned i = 0; i < c->npaths; i++)
        if (c->paths[i].dir[dir].rate_bps > fastest)
            fastest = c->paths[i].dir[dir].rate_bps;
    unsigned k = 0;
    for (int slow = 0; slow < 2; slow++)
        for (unsigned i = 0; i < c->npaths && k < st->paths; i++) {
            double r = c->paths[i].dir[dir].rate_bps;
            if (c->paths[i].state == PATH_COOLING || (r > 0 && r < ADAPT_SLOW * fastest) != slow)
                continue;
            m |= 1u << i;
            k++;
        }
    return m;
}

/* The ops path p may have in flight for class dir (-1: any class): the
 * depth ceiling, within the class's level, halved (at least 1) while its
 * transport reports it degraded. */
static uint64_t path_depth(const struct rio_client *c, const struct rio__path *p, int dir)
{
    uint64_t d = depth_ceiling(c);

    if (dir >= 0 && adapt_on(c) && c->adapt[dir].started && !c->adapt_lift &&
        c->adapt[dir].depth < d)
        d = c->adapt[dir].depth;
    if (!p->degraded)
        return d;
    return d > 1 ? d / 2 : 1;
}

/*
 * The depth slots path p's ops in flight take. An op of a chunk takes one.
 * Ops that each carry a whole small object with its open and commit (a
 * PUT_ONE) take them by their bytes, a chunk's worth over ONE_PER_SLOT to
 * a slot (rounded down: at depth 1, a slot's worth of them): a batch of 32 KiB objects at depth 4
 * was latency-bound with four in flight (128 KiB), where the three-exchange way had the opens and
 * commits of a pipeline's worth of objects out beside its chunks. The
 * transport's own window (max_depth) still bounds the ops.
 */
#define ONE_PER_SLOT 8u

static uint64_t path_slots(const struct rio_client *c, const struct rio__path *p)
{
    if (!p->one_ops)
        return p->inflight_ops;
    uint64_t unit = c->o.chunk_size / ONE_PER_SLOT;
    if (!unit)
        unit = 1;
    /* ... and never more than one each: a batch of whole 4 MiB objects at
     * depth 4 took eight slots an op, one in flight where chunks have four. */
    uint64_t one = p->one_bytes / unit;
    return p->inflight_ops - p->one_ops + (one < p->one_ops ? one : p->one_ops);
}

/* Whether path p is full for class dir (-1: any): its depth slots taken,
 * or the transport's window of ops. */
static bool path_full(const struct rio_client *c, const struct rio__path *p, int dir)
{
    if (c->t->max_depth && p->inflight_ops >= c->t->max_depth)
        return true;
    return path_slots(c, p) >= path_depth(c, p, dir);
}

/* The level with every path at depth 1: the top of the paths. */
static unsigned adapt_paths_top(const struct rio_client *c)
{
    unsigned l = 0, p = 1;
    while (p < c->npaths) {
        p = p * 2 < c->npaths ? p * 2 : c->npaths;
        l++;
    }
    return l;
}

/* Climb from the current level to level l. */
static void adapt_up(struct rio_client *c, struct rio__adapt *st, unsigned l, double g,
                     uint64_t now)
{
    st->from = st->level;
    st->g_below = g;
    st->g_doubt = 0;
    adapt_set_level(c, st, l, now);
}

static void adapt_decide_locked(struct rio_client *c, struct rio__adapt *st, double g, uint64_t now)
{
    if (st->down) {
        /* The step below moves more: go on down. About as much (within
         * half the margin): fewer paths or less depth cost the target and
         * the client less, so hold there. Less: back up. */
        st->held = 0;
        if (g >= st->g_below * (1 + ADAPT_MARGIN) && st->level > 0) {
            st->from = st->level;
            st->g_below = g;
            adapt_set_level(c, st, st->level - 1, now);
            return;
        }
        st->down = false;
        if (g >= st->g_below * (1 - ADAPT_MARGIN / 2)) {
            double pct = (st->g_below / g - 1) * 100;
            st->next_pct = (int)(pct < 0 ? pct - 0.5 : pct + 0.5);
            st->state = RIO_ADAPT_SETTLED;
            st->tried = st->from;
            st->g_held = g;
            adapt_window(st, now);
            return;
        }
        adapt_set_level(c, st, st->from, now);
        return;
    }
    if (st->state == RIO_ADAPT_GROWING) {
        if (st->g_below == 0 || g >= st->g_below * (1 + ADAPT_MARGIN)) {
            st->fall_up = false;
            unsigned top = adapt_top(c), ptop = adapt_paths_top(c), fp, fd;
            if (st->level >= top) {
                st->state = RIO_ADAPT_CEILING;
                st->g_held = g;
                st->held = 0;
                adapt_window(st, now);
                return;
            }
            /* Paths that scale near linearly (independent rails) are
             * taken all at once: a doubling per window costs a window at
             * each step, on every call of a client that starts cold. */
            adapt_ladder(c, st->from, &fp, &fd);
            if (st->g_below > 0 && st->level < ptop && st->paths > fp &&
                g >= st->g_below * ADAPT_LINEAR * st->paths / fp) {
                adapt_up(c, st, ptop, g, now);
                return;
            }
            adapt_up(c, st, st->level + 1, g, now);
            return;
        }
        /* This step did not pay. Once may be noise (a machine whose
         * CPUs are shared delays a window's ops at random): a second
         * window decides, with the better of the two. Stepping back
         * wrongly costs goodput until the next probe; staying a window
         * longer on a step that does not pay costs one window. */
        if (st->g_doubt == 0) {
            st->g_doubt = g;
            adapt_window(st, now);
            return;
        }
        if (st->g_doubt > g)
            g = st->g_doubt;
        st->g_doubt = 0;
        if (g >= st->g_below * (1 + ADAPT_MARGIN)) {
            adapt_decide_locked(c, st, g, now);
            return;
        }
        /* Back to where it came from, and hold. */
        double pct = (g / st->g_below - 1) * 100;
        st->next_pct = (int)(pct < 0 ? pct - 0.5 : pct + 0.5);
        st->state = RIO_ADAPT_SETTLED;
        st->g_held = st->g_below;
        st->held = 0;
        st->tried = st->level;
        if (st->fall_up && st->from > 0) {
            /* A fall sent it up, and up does not pay: the step below the
             * level it fell on, as a settled class's probe down. */
            st->fall_up = false;
            st->down = true;
            adapt_set_level(c, st, st->from - 1, now);
            return;
        }
        st->fall_up = false;
        adapt_set_level(c, st, st->from, now);
        return;
    }
    /* The held level moves far less than it did, two windows in a row (a
     * server that got busier or slower, a rail that slowed down, not a
     * window that waited for a CPU): see at once whether more do better
     * (the survivors of a slow rail want more depth), then fewer. */
    bool up = st->level<adapt_top(c), dn = st->level> 0;
    st->falls = g < st->g_held * ADAPT_FELL ? st->falls + 1 : 0;
    bool fell = st->falls >= 2 && (up || dn);
    if (fell)
        st->falls = 0;
    st->g_held = fell ? g : 0.7 * st->g_held + 0.3 * g;
    if (++st->held >= ADAPT_REPROBE || fell) {
        /* Try a step against what this level does now, up and down in
         * turn: up, a server that got faster or a path that came back;
         * down, a target that no longer needs as many. After a fall, up
         * first, and down when up does not pay (fall_up). */
        st->held = 0;
        bool go_up = up && (fell || !dn || st->probes++ % 2 == 0);
        if (go_up) {
            st->state = RIO_ADAPT_GROWING;
            adapt_up(c, st, st->level + 1, st->g_held, now);
            st->fall_up = fell;
            return;
        }
        if (dn) {
            if (!up && !fell)
                st->probes++;
            st->down = true;
            st->from = st->level;
            st->g_below = st->g_held;
            adapt_set_level(c, st, st->level - 1, now);
            return;
        }
    }
    adapt_window(st, now);
}

/* Whether class dir has work not yet sent that may go: while it has none
 * (a call's tail, a reader waiting for its consumer, between calls) fewer
 * ops are in flight than its level allows, so goodput says nothing of it. */
static bool adapt_has_work(struct rio_client *c, int dir)
{
    if (c->held_dir[dir])
        return true;
    rio_list_each (r, &c->active, struct rio__req, anode) {
        if ((r->type == RIO_OP_PUT) != dir || r->decided || r->opening)
            continue;
        if (!rio_list_empty(&r->rq))
            return true;
        uint64_t end = r->ring ? r->end : r->nchunks;
        if (r->next_new < end && (!r->ring || r->next_new < atomic_load(&r->window)))
            return true;
    }
    return false;
}

/* An op of class dir, of call, sent at t0 moved len bytes on path pi. */
static void adapt_sample_locked(struct rio_client *c, int dir, const struct rio__call *call,
                                unsigned pi, uint64_t len, uint64_t t0, uint64_t now)
{
    struct rio__adapt *st = &c->adapt[dir];

    /* An op sent before the level began ran (part of its time) at the
     * level before: a step down would still see the queue the wider level
     * built at the target. */
    if (!adapt_on(c) || !st->started || t0 < st->level_t0 || c->adapt_lift)
        return;
    if (!adapt_has_work(c, dir)) {
        /* Calls too small to fill a window at this level (a few chunks
         * each) can never say whether it pays: after ADAPT_SHORT_CALLS of
         * them in a row the class climbs unmeasured, as far as its calls
         * keep it from measuring, up to the ceiling: as without adapt. */
        bool next = call->t0 != st->short_t0;
        st->short_t0 = call->t0;
        if (next && st->state == RIO_ADAPT_GROWING && ++st->short_calls >= ADAPT_SHORT_CALLS &&
            st->level < adapt_top(c)) {
            st->g_below = 0;
            st->g_doubt = 0;
            st->from = st->level;
            adapt_set_level(c, st, st->level + 1, now);
            return;
        }
        adapt_window(st, now);
        return;
    }
    uint32_t mask = adapt_mask(c, dir);
    if (!(mask >> pi & 1))
        return; /* a path of an earlier, wider level ending its ops */
    if (st->p[pi].n++ == 0)
        st->p[pi].t_first = now;
    else
        st->p[pi].bytes += (double)len;
    st->p[pi].t_last = now;
    uint64_t want = (uint64_t)st->paths * st->depth + 1;
    want = want < ADAPT_WIN_MIN_OPS ? ADAPT_WIN_MIN_OPS : want;
    if (++st->n < want || now - st->win_t0 < ADAPT_WIN_MIN_NS)
        return;
    double g = 0;
    bool all = true;
    for (unsigned i = 0; i < c->npaths; i++) {
        if (!(mask >> i & 1))
            continue;
        if (st->p[i].n < 2) {
            all = false;
            continue;
        }
        g += st->p[i].bytes * 1e9 / (double)(st->p[i].t_last - st->p[i].t_first + 1);
    }
    if (!all && st->n < ADAPT_WIN_MAX_X * want)
        return;
    adapt_decide_locked(c, st, g, now);
}

/* The op time path p shows for attempt a: its recent op time, or the op's
 * bytes at its rate, the longer; 0 when nothing is known of the path. */
static double attempt_expect(const struct rio__path *p, const struct rio__attempt *a)
{
    const struct rio__path_dir *d = &p->dir[io_dir(a->io.kind)];
    double exp = d->op_ns;

    if (d->rate_bps > 0 && (double)a->io.len * 1e9 / d->rate_bps > exp)
        exp = (double)a->io.len * 1e9 / d->rate_bps;
    return exp;
}

/* When an op expected to take exp ns, sent at submit_ns, is late:
 * ADAPT_STALL_X times exp plus ADAPT_STALL_NS; never (UINT64_MAX) for an
 * exp of 0 (nothing known). */
static uint64_t late_at(uint64_t submit_ns, double exp)
{
    return exp > 0 ? submit_ns + (uint64_t)(ADAPT_STALL_X * exp) + ADAPT_STALL_NS : UINT64_MAX;
}

static uint64_t attempt_due(const struct rio__path *p, const struct rio__attempt *a)
{
    return late_at(a->submit_ns, attempt_expect(p, a));
}

/*
 * Whether path i is stalled: its oldest op in flight has run past
 * ADAPT_STALL_X times the op time the path shows (its recent op time, or
 * the op's bytes at its rate, the longer) plus ADAPT_STALL_NS, the path has
 * completed nothing since, and another path has. One slow op on a path
 * whose other ops complete (a PUT the server holds while a retry claims its
 * chunk) is not a stalled path. A path that browns out keeps its rate
 * estimate until its op ends (the watchdog or the op timeout, a second or
 * more), so this says it first; another path's completion since keeps a
 * client that waited for a CPU (nothing completes anywhere) from counting
 * as a stall.
 */
static bool path_stalled(struct rio_client *c, unsigned i, uint64_t now)
{
    struct rio__path *p = &c->paths[i];
    uint64_t due = UINT64_MAX;

    rio_list_each (a, &p->attempts, struct rio__attempt, pnode) {
        if (a->cancelled)
            continue;
        uint64_t t = attempt_due(p, a);
        if (t < due)
            due = t;
    }
    if (due == UINT64_MAX || now < due || p->last_done_ns > due)
        return false; /* not late yet, or one slow op on a path that moves */
    for (unsigned j = 0; j < c->npaths; j++)
        if (j != i && c->paths[j].last_done_ns > due)
            return true;
    return false;
}

/* When probe a on path i is late: by the longest of the op time the path
 * showed before it failed and the op times the healthy paths show now. The
 * path's own may be a path that never showed one (a fresh client's first
 * op on a rail already browned out), and it is as old as the failure: when
 * every path slowed down together since, a probe judged by it alone failed
 * a path as fast as the others, again and again (review: a path that lost
 * its connection once while all three ran 6x slower carried nothing more
 * in the call, 4.2 s against 2.6 s). */
static uint64_t probe_due(const struct rio_client *c, unsigned i, const struct rio__attempt *a)
{
    double exp = attempt_expect(&c->paths[i], a);

    for (unsigned j = 0; j < c->npaths; j++) {
        double e =
            j != i && c->paths[j].state == PATH_HEALTHY ? attempt_expect(&c->paths[j], a) : 0;
        if (e > exp)
            exp = e;
    }
    return late_at(a->submit_ns, exp);
}

/*
 * A probe (the chunk a path that failed is given once its cooldown ends)
 * late (probe_due) while another path completed an op since it was sent:
 * the path fails again at once, as its op timeout would fail it later. A rail browned out to 200
 * kbit held each probe for the whole op timeout, and a reader's window waited behind it (three
 * probes of 10 s in a 256 MiB GET the two other rails move in 2 s). Only probes: a healthy path's
 * slow op waits for the op timeout, so a client that waited for a CPU does not fail paths that were
 * fine.
 */
static bool probe_late(struct rio_client *c, unsigned i, const struct rio__attempt *a, uint64_t now)
{
    if (c->paths[i].state != PATH_PROBING || now < probe_due(c, i, a))
        return false;
    for (unsigned j = 0; j < c->npaths; j++)
        if (j != i && c->paths[j].last_done_ns > a->submit_ns)
            return true;
    return false;
}

/*
 * A healthy path whose ops moved nothing for SILENT_FLOOR_NS, and for
 * SILENT_X times the op time it shows, while another path completed an op
 * in that time, is failed as its op timeout would fail it, only sooner
 * (path_silent). A rail black-holed or set down mid-transfer (no RST) held
 * the chunks it had for the whole op timeout while the other rails, their
 * work done, sat idle: five times as long as the call takes with four
 * rails (docs/bench.md, docs/tuning.md "Silent paths"). Nothing moved means no op of the path
 * completed and the transport (path_moved) saw no byte of them go or come;
 * a slow rail that still moves bytes, or completes ops, is never silent.
 * Another path's completion in that time, or in as long a time before it,
 * keeps a client that waited for a CPU, or a target slow or stopped for
 * every path, from failing paths.
 */
#define SILENT_FLOOR_NS 1000000000ull
#define SILENT_X 8.0

/* When path i falls silent (UINT64_MAX: it has no op in flight), and in
 * *since when it last moved, as known at now. */
static uint64_t silent_due(struct rio_client *c, unsigned i, uint64_t now, uint64_t *since)
{
    struct rio__path *p = &c->paths[i];
    uint64_t first = UINT64_MAX;
    double exp = 0;

    rio_list_each (a, &p->attempts, struct rio__attempt, pnode) {
        if (a->cancelled)
            continue;
        if (a->submit_ns < first)
            first = a->submit_ns;
        double e = attempt_expect(p, a);
        if (e > exp)
            exp = e;
    }
    if (first == UINT64_MAX)
        return UINT64_MAX;
    /* Its own op time, else the longest a healthy path shows. */
    for (unsigned j = 0; exp == 0 && j < c->npaths; j++)
        if (j != i && c->paths[j].state == PATH_HEALTHY)
            rio_list_each (a, &p->attempts, struct rio__attempt, pnode) {
                double e = attempt_expect(&c->paths[j], a);
                if (e > exp)
                    exp = e;
            }
    uint64_t s = first;
    if (p->last_done_ns > s)
        s = p->last_done_ns;
    if (p->moved_ns > s)
        s = p->moved_ns;
    uint64_t wait = (uint64_t)(SILENT_X * exp);
    if (wait < SILENT_FLOOR_NS)
        wait = SILENT_FLOOR_NS;
    /* The transport is asked only once what is known says silent (it may
     * look at its sockets to answer): once per window for a path that
     * moves bytes and completes nothing for long. */
    if (now >= s && now - s >= wait) {
        uint64_t moved = rio__t_path_moved(c->t, i);
        if (moved > p->moved_ns)
            p->moved_ns = moved;
        if (moved > s)
            s = moved;
    }
    *since = s;
    return wait > UINT64_MAX - s ? UINT64_MAX : s + wait;
}

/* Another path completed an op in the silence or in as long a time before
 * it: paths that had nothing more to do since (a reader's window waiting
 * for the silent path's chunk) still vouch for the client and the target.
 * With no completion anywhere in that time (a target slow for every op, a
 * client that waited for a CPU) nothing is silent. */
static bool path_silent(struct rio_client *c, unsigned i, uint64_t now)
{
    uint64_t since = 0, due;

    if (c->paths[i].state != PATH_HEALTHY || now < (due = silent_due(c, i, now, &since)))
        return false;
    uint64_t wait = due - since, lo = since > wait ? since - wait : 0;
    for (unsigned j = 0; j < c->npaths; j++)
        if (j != i && c->paths[j].last_done_ns > lo)
            return true;
    return false;
}

/*
 * Lift or restore the limits of every class (engine loop, after the
 * timers). While a path is down, probed or stalled the limits are the
 * ceilings: the survivors get the work at full depth, as without adapt (a
 * class held at depth 1 on four rails moved 0.77 of the three survivors'
 * sum when the fourth browned out), and goodput is not measured. When every
 * path is healthy again, each class that was lifted climbs again from the
 * level it held: the step up is measured against it at once.
 */
static void adapt_lift_locked(struct rio_client *c, uint64_t now)
{
    int why = RIO__LIFT_NONE;
    unsigned pi = 0;

    if (!adapt_on(c))
        return;
    for (unsigned i = 0; i < c->npaths; i++) {
        struct rio__path *p = &c->paths[i];
        p->stalled = p->state == PATH_HEALTHY && path_stalled(c, i, now);
        if (why)
            continue;
        if (p->state == PATH_COOLING)
            why = RIO__LIFT_DOWN;
        else if (p->state == PATH_PROBING)
            why = RIO__LIFT_PROBED;
        else if (p->stalled)
            why = RIO__LIFT_STALLED;
        pi = i;
    }
    c->adapt_lift = why;
    if (why)
        c->adapt_lift_path = pi;
    for (int d = 0; d < 2; d++) {
        struct rio__adapt *st = &c->adapt[d];
        if (!st->started)
            continue;
        if (why) {
            st->lifted = true;
            continue;
        }
        if (!st->lifted)
            continue;
        st->lifted = false;
        adapt_grow_from(c, st, st->level, now);
    }
}

void rio__adapt_stats_locked(struct rio_client *c, int dir, struct rio_stats *st,
                             unsigned *up_paths, unsigned *up_depth)
{
    const struct rio__adapt *a = &c->adapt[dir];

    *up_paths = *up_depth = 0;
    st->adapt_paths = st->adapt_depth = 0;
    st->adapt_next_pct = 0;
    st->adapt_state = RIO_ADAPT_OFF;
    if (!adapt_on(c))
        return;
    st->adapt_state = a->started ? a->state : RIO_ADAPT_GROWING;
    if (!a->started)
        return;
    st->adapt_paths = a->paths;
    st->adapt_depth = a->depth;
    if (c->adapt_lift) {
        /* Lifted: every path at the configured depth (the verdict says why). */
        st->adapt_paths = c->npaths;
        st->adapt_depth = depth_ceiling(c);
    }
    if (a->state == RIO_ADAPT_SETTLED) {
        st->adapt_next_pct = a->next_pct;
        adapt_ladder(c, a->tried, up_paths, up_depth);
    }
}

/* Whether path i is the one path a class may use now (mask, not cooling):
 * there is no other whose rate its own could be weighed against. */
static bool path_alone(const struct rio_client *c, unsigned i, uint32_t mask)
{
    for (unsigned k = 0; k < c->npaths; k++)
        if (k != i && c->paths[k].state != PATH_COOLING && (mask >> k & 1))
            return false;
    return true;
}

/* Whether path i may take one more op in direction dir; mask: the paths
 * the class may use (adapt_mask). */
static bool path_usable(struct rio_client *c, unsigned i, int dir, uint32_t mask)
{
    struct rio__path *p = &c->paths[i];
    if (p->state == PATH_COOLING || !(mask >> i & 1) || p->stalled)
        return false;
    if (p->state == PATH_PROBING)
        return p->inflight_ops == 0;
    if (path_full(c, p, dir))
        return false;
    /* Until a path has shown its rate it carries one op: a slow path must
     * not swallow a deep window of chunks before we know it is slow. The
     * one path there is takes them all anyway (and small one-op requests,
     * each well under the millisecond of busy time a rate needs, went one
     * at a time through a whole batch). */
    if (p->dir[dir].rate_bps == 0 && !path_alone(c, i, mask))
        return p->dir[dir].inflight_ops == 0;
    return true;
}

static bool any_path_alive(struct rio_client *c)
{
    for (unsigned i = 0; i < c->npaths; i++)
        if (c->paths[i].state != PATH_COOLING)
            return true;
    return false;
}

static uint64_t cooldown_ns(struct rio_client *c, unsigned fails)
{
    uint64_t ms = c->o.cooldown_base_ms;
    for (unsigned i = 1; i < fails && ms < c->o.cooldown_cap_ms; i++)
        ms *= 2;
    if (ms > c->o.cooldown_cap_ms)
        ms = c->o.cooldown_cap_ms;
    return ms * 1000000ull;
}

/* ---------------------------------------------------------- requests */

static void rq_push(struct rio__req *r, struct rio__chunk *ch)
{
    ch->state = CH_QUEUED;
    rio_list_push_back(&r->rq, &ch->qnode);
}

static void cancel_attempt_locked(struct rio_client *c, struct rio__attempt *a)
{
    if (a->cancelled)
        return;
    a->cancelled = true;
    a->ch->zombies++;
    rio__t_cancel(c->t, &a->io);
}

/* The request's outcome is known: stop dispatching, cancel what is in flight. */
static void req_decide_locked(struct rio_client *c, struct rio__req *r, int status)
{
    if (r->decided)
        return;
    r->decided = true;
    r->status = status;
    /* A PUT that succeeded may still be hashed for its etag; one that
     * failed needs no more hashing. */
    if (status < 0)
        atomic_store(&r->stop_hashing, 1);
    if (r->ring)
        pthread_cond_broadcast(&r->call->cond);
    if (status < 0) {
        for (unsigned i = 0; i < c->npaths; i++)
            rio_list_each (a, &c->paths[i].attempts, struct rio__attempt, pnode)
                if (a->req == r)
                    cancel_attempt_locked(c, a);
    }
}

uint64_t rio__backoff_ns_locked(struct rio_client *c, unsigned n)
{
    uint64_t ms = c->o.backoff_base_ms;
    for (unsigned i = 1; i < n && ms < c->o.backoff_cap_ms; i++)
        ms *= 2;
    if (ms > c->o.backoff_cap_ms)
        ms = c->o.backoff_cap_ms;
    uint64_t ns = ms * 1000000ull;
    return ns / 2 + (ns ? rio__rand(&c->rng) % (ns / 2 + 1) : 0);
}

/* A chunk attempt failed with err on path pi; why: what the store said of
 * it (rio_io.why), NULL or "" when it said nothing (a timeout, a checksum
 * mismatch, a refused submit): r->why is the last failure's, never an
 * earlier attempt's answer shown for a later, other failure. */
/* r's last failure (err) and what the store said of it (why: NULL or ""
 * when nothing), until r is decided (rio__req_why). */
static void req_why_locked(struct rio__req *r, int err, const char *why)
{
    if (r->decided)
        return;
    snprintf(r->why, sizeof(r->why), "%s", why ? why : "");
    r->why_err = err;
}

static void chunk_failed_locked(struct rio_client *c, struct rio__req *r, struct rio__chunk *ch,
                                int err, const char *why, uint64_t now)
{
    int cls = rio__err_class(err);
    r->last_err = err;
    r->call->retries[cls]++;
    if (r->decided)
        return;
    req_why_locked(r, err, why);
    if (!rio__class_is_retryable(cls) || (cls == RIO_CLASS_CHECKSUM && c->o.retry_checksum < 0)) {
        req_decide_locked(c, r, err);
        return;
    }
    if (rio__class_is_path(cls) && any_path_alive(c)) {
        /* The path failed, not the chunk: move it to a healthy path at once,
         * without spending one of its attempts. */
        rq_push(r, ch);
        ch->not_before_ns = 0;
        return;
    }
    /* A throttle is the target saying "later" (an S3 SlowDown, a chunk that
     * another connection of a dead attempt still holds on the server): it
     * gets four times the patience of other failures before it fails. */
    unsigned n;
    if (cls == RIO_CLASS_THROTTLE) {
        n = ++ch->throttles;
        if (n >= 4ull * c->o.retry_attempts) {
            req_decide_locked(c, r, RIO_ERETRIES);
            return;
        }
    } else {
        n = ++ch->attempts;
        if (n >= c->o.retry_attempts) {
            req_decide_locked(c, r, any_path_alive(c) ? RIO_ERETRIES : RIO_ENOPATH);
            return;
        }
    }
    ch->not_before_ns = now + rio__backoff_ns_locked(c, n);
    rq_push(r, ch);
}

/* Path pi failed (reset, refused, timeout...) with err: cool it down and
 * move every chunk still on it to the others. */
static void path_fail_locked(struct rio_client *c, unsigned pi, int cls, int err, uint64_t now)
{
    struct rio__path *p = &c->paths[pi];
    p->last_err = err;
    p->fails++;
    p->state = PATH_COOLING;
    p->until_ns = now + cooldown_ns(c, p->fails);
    adapt_discard_locked(c, now);
    rio_list_each (a, &p->attempts, struct rio__attempt, pnode) {
        if (a->cancelled)
            continue;
        cancel_attempt_locked(c, a);
        a->req->call->retries[cls]++;
        if (!a->req->decided)
            rq_push(a->req, a->ch);
    }
}

/*
 * Path state from the transport (rio__t_path_event, transport.h). The
 * callback only records the last state per path under mu and wakes the
 * engine; the engine thread applies it here, after the completions of the
 * reap that reported it, so an op that failed with the same error is
 * counted once: DOWN on a path already cooling changes nothing.
 */
static void path_event_cb(struct rio_transport *t, unsigned path, int state, int err)
{
    struct rio_client *c = t->engine;

    if (path >= c->npaths)
        return;
    pthread_mutex_lock(&c->mu);
    c->paths[path].ev_state = state;
    c->paths[path].ev_err = err;
    c->path_events = true;
    pthread_mutex_unlock(&c->mu);
    rio__t_wake(t);
}

static void path_events_locked(struct rio_client *c, uint64_t now)
{
    if (!c->path_events)
        return;
    c->path_events = false;
    for (unsigned i = 0; i < c->npaths; i++) {
        struct rio__path *p = &c->paths[i];
        int state = p->ev_state;
        p->ev_state = 0;
        if (state == RIO_PATH_DOWN) {
            int cls = rio__err_class(p->ev_err);
            p->degraded = false;
            if (p->state != PATH_COOLING)
                path_fail_locked(c, i, rio__class_is_path(cls) ? cls : RIO_CLASS_RESET,
                                 p->ev_err ? p->ev_err : -ECONNRESET, now);
        } else if (state == RIO_PATH_UP) {
            p->degraded = false;
            if (p->state == PATH_COOLING)
                p->state = PATH_PROBING; /* cooldown over: one op proves it */
        } else if (state == RIO_PATH_DEGRADED) {
            p->degraded = true;
        }
    }
}

/* ---------------------------------------------------------- scheduler */

/* The bytes one op of ch moves: a piece's range, or the whole chunk. */
static uint64_t ch_len(const struct rio__req *r, const struct rio__chunk *ch)
{
    return ch->parent ? ch->plen : rio__req_chunk_len(r, ch->idx);
}

/* The bytes not yet handed to a path that may go now: a reader's only up
 * to its window. The chunks past it wait for the consumer, and the window
 * moves only as its lowest chunk lands: a chunk a slow path takes because
 * the whole rest of the object would leave it one sits at the window's
 * head while the fast paths run out of window (three rails, one at 2 % of
 * the others' rate: 14x the fast paths' time). */
static uint64_t remaining_unassigned_locked(struct rio_client *c, uint64_t enough)
{
    uint64_t b = 0;
    rio_list_each (r, &c->active, struct rio__req, anode) {
        /* The caller needs no more than enough: a batch of thousands of
         * small requests made this walk, on every op dispatched, most of
         * the engine thread's time (38 % of the client's CPU at 4096 x 32
         * KiB). */
        if (b >= enough)
            break;
        if (r->decided)
            continue;
        uint64_t end = r->nchunks;
        if (r->ring) {
            uint64_t w = atomic_load(&r->window);
            end = w < r->end ? w : r->end;
        }
        if (r->next_new < end)
            b += (end < r->nchunks ? end * r->chunk_size : r->size) - r->next_new * r->chunk_size;
        rio_list_each (ch, &r->rq, struct rio__chunk, qnode)
            b += ch_len(r, ch);
    }
    return b;
}

/* Bytes still to move on path q before it is free: what is in flight, less
 * what its rate has moved since its last completion (or since it got busy). */
static double path_backlog(const struct rio__path *q, double rate, uint64_t now)
{
    double moved = now > q->mark_ns ? (double)(now - q->mark_ns) * rate / 1e9 : 0;
    double b = (double)q->inflight_bytes - moved;
    return b > 0 ? b : 0;
}

/*
 * Earliest finish time, with chunks as the indivisible units they are: hand
 * every chunk still unassigned (this one first) in turn to the live path that
 * would finish it first, given each path's backlog and rate; path pi takes this
 * chunk if that list schedule gives it one. Far from the tail a path with room
 * is always chosen at once; near it, a path that would become the tail stays
 * idle while faster paths finish the rest. A whole chunk the tail may still
 * split (splits) also has to fit the even end the pieces will give, unless
 * pi is the fastest path. While some path has not shown its rate, every path
 * keeps one op in flight, a measured one at most two.
 */
#define PATH_LOOKAHEAD 4096u

static bool path_should_take(struct rio_client *c, unsigned pi, int dir, uint64_t len, bool splits,
                             uint64_t now)
{
    struct rio__path *p = &c->paths[pi];
    double avail[RIO_MAX_PATHS], cost[RIO_MAX_PATHS];
    /* Paths the class may not use now (adapt) count as cooling ones. */
    uint32_t mask = adapt_mask(c, dir);

    /* With nothing in flight no completion would come to wake us: take it,
     * unless an idle healthy path at more than twice this one's rate may
     * (the pass visits every path, and the fastest takes it). A slow path
     * first in the pass took a chunk whenever every op had just ended: at
     * depth 1 on three rails, one at 1 % of the others, every few dozen
     * chunks, each holding a reader's window for the slow op's time. */
    if (c->inflight_ops == 0) {
        double mine = p->dir[dir].rate_bps;
        for (unsigned i = 0; i < c->npaths && mine > 0; i++) {
            const struct rio__path *q = &c->paths[i];
            if (i != pi && q->state == PATH_HEALTHY && (mask >> i & 1) && !q->stalled &&
                q->dir[dir].rate_bps > 2 * mine)
                return false;
        }
        return true;
    }
    /* One path the class may use: the schedule below gives it everything. */
    if (path_alone(c, pi, mask))
        return true;
    bool unmeasured = false;
    double fastest = 0;
    for (unsigned i = 0; i < c->npaths; i++) {
        struct rio__path *q = &c->paths[i];
        if (q->state == PATH_COOLING || !(mask >> i & 1))
            continue;
        if (q->dir[dir].rate_bps == 0)
            unmeasured = true;
        else if (q->dir[dir].rate_bps > fastest)
            fastest = q->dir[dir].rate_bps;
    }
    /* While some path has not shown its rate, each path keeps one op in
     * flight, and one that has shown its rate may queue a second behind it
     * (so it does not idle while its completion is handled) where the
     * schedule below gives it one, counting a path not yet measured as fast
     * as the fastest: a slow path does not take what that one may do sooner. */
    if (unmeasured && (p->inflight_ops == 0 || p->dir[dir].rate_bps == 0 || p->inflight_ops >= 2))
        return p->inflight_ops == 0;
    for (unsigned i = 0; i < c->npaths; i++) {
        struct rio__path *q = &c->paths[i];
        double rate = q->dir[dir].rate_bps ? q->dir[dir].rate_bps : fastest;
        if (q->state == PATH_COOLING || !(mask >> i & 1)) {
            avail[i] = -1;
            continue;
        }
        avail[i] = path_backlog(q, rate, now) / rate;
        cost[i] = (double)len / rate;
    }
    /* The rest beyond 4096 chunks like this one changes nothing below. */
    uint64_t rem = remaining_unassigned_locked(c, (uint64_t)PATH_LOOKAHEAD * len);
    if (splits && p->dir[dir].rate_bps < fastest) {
        /* A whole chunk the tail may still split: the tail's pieces even
         * the paths out, so all the work could end when every path has
         * moved its share. A slower path takes the chunk only if it would
         * finish it by then; otherwise it would become the tail. */
        double bytes = (double)(rem + len), sum = 0;
        for (unsigned i = 0; i < c->npaths; i++) {
            if (avail[i] < 0)
                continue;
            double rate = (double)len / cost[i];
            bytes += avail[i] * rate;
            sum += rate;
        }
        if (avail[pi] + cost[pi] > bytes / sum)
            return false;
    }
    uint64_t n = rem / len + 2; /* the rest, rounded up, and this chunk */
    if (n > PATH_LOOKAHEAD)
        n = PATH_LOOKAHEAD; /* so far from the tail that pi was chosen long before */
    for (uint64_t k = 0; k < n; k++) {
        unsigned best = pi;
        double tbest = avail[pi] + cost[pi];
        for (unsigned i = 0; i < c->npaths; i++) {
            if (avail[i] < 0 || i == pi)
                continue;
            if (avail[i] + cost[i] < tbest) {
                tbest = avail[i] + cost[i];
                best = i;
            }
        }
        if (best == pi)
            return true;
        avail[best] = tbest;
    }
    return false;
}

/*
 * A probe carries a real chunk to a path that failed, and a path that still
 * drops or trickles holds it until a timeout. So probe only away from the
 * tail: when, after this chunk, at least one more chunk per healthy path is
 * still unassigned (the healthy paths have work while the probe is out). With
 * no healthy path the probe is the only way forward.
 */
static bool probe_may_take(struct rio_client *c, int dir, uint64_t len)
{
    uint64_t healthy = 0;
    uint32_t mask = adapt_mask(c, dir);
    for (unsigned i = 0; i < c->npaths; i++)
        if (c->paths[i].state == PATH_HEALTHY && (mask >> i & 1))
            healthy++;
    if (healthy == 0)
        return true;
    return remaining_unassigned_locked(c, healthy * len) >= healthy * len;
}

/* Next chunk of r that may go now, or NULL; takes it off r's queue. */
static struct rio__chunk *req_pick(struct rio__req *r, uint64_t now)
{
    rio_list_each (ch, &r->rq, struct rio__chunk, qnode) {
        /* A chunk whose cancelled attempt is still out waits for it: that
         * attempt may still write into the chunk's bytes. */
        if (ch->zombies || ch->not_before_ns > now)
            continue;
        rio_list_remove(&r->rq, &ch->qnode);
        return ch;
    }
    if (r->next_new < r->nchunks) {
        if (r->type == RIO_OP_PUT && r->next_new >= atomic_load(&r->hashed))
            return NULL;
        if (r->ring && (r->next_new >= atomic_load(&r->window) || r->next_new >= r->end))
            return NULL; /* a reader: past its window, or past its range */
        struct rio__chunk *ch = rio__req_chunk(r, r->next_new);
        if (r->ring) {
            /* The slot's last chunk was handed to the reader (the window
             * is past it): done, not queued, no attempt of it out. */
            rio__free(ch->pieces);
            memset(ch, 0, sizeof(*ch));
            ch->idx = r->next_new;
        }
        r->next_new++;
        return ch;
    }
    return NULL;
}

/* Whether ch, a fresh chunk of r, may be split at the tail: a GET whose
 * chunks are checked (once all pieces landed) over a transport that reads
 * ranges; a retried chunk is fetched whole. */
static bool req_splits(const struct rio_client *c, const struct rio__req *r,
                       const struct rio__chunk *ch)
{
    return r->type == RIO_OP_GET && !r->ring && r->xxh && c->o.verify > 0 && ch->state == CH_NEW &&
           rio__t_has_cap(c->t, RIO_CAP_RANGE_READ);
}

/* Smallest piece worth an op of its own. */
#define TAIL_PIECE_MIN (64u * 1024u)
/* Most pieces per live path when the paths' rates differ. */
#define TAIL_SPREAD_MAX 8u

/*
 * Tail splitting: when ch (fresh, len bytes) is among the last chunks of
 * every active request, one per live path, split it into ranges, one per
 * live path, queued as pieces: idle paths share the tail instead of waiting
 * for whole chunks. Only for a GET whose chunks are checked (the chunk's
 * xxh3 is checked once all its pieces landed) over a transport that reads
 * ranges (RIO_CAP_RANGE_READ). Returns true if ch was split.
 */
static bool split_tail_locked(struct rio_client *c, struct rio__req *r, struct rio__chunk *ch,
                              uint64_t len)
{
    unsigned live = 0, n;
    double rmin = 0, rmax = 0;

    if (ch->parent || !req_splits(c, r, ch))
        return false;
    uint32_t mask = adapt_mask(c, 0); /* a GET's: the paths it may use */
    for (unsigned i = 0; i < c->npaths; i++) {
        double rate = c->paths[i].dir[0].rate_bps;
        if (c->paths[i].state != PATH_HEALTHY || rate <= 0 || !(mask >> i & 1))
            continue;
        live++;
        rmin = rmin == 0 || rate < rmin ? rate : rmin;
        rmax = rate > rmax ? rate : rmax;
    }
    if (live < 2 ||
        remaining_unassigned_locked(c, (uint64_t)(live - 1) * len + 1) > (uint64_t)(live - 1) * len)
        return false;
    /* One piece per live path, times the fastest over the slowest rate (at
     * most TAIL_SPREAD_MAX): the last piece on a fast path then takes about
     * as long as one on the slowest, so the paths end within a piece of each
     * other. Equal paths get one piece each, no more ops than that. */
    double spread = rmax / rmin;
    unsigned per = spread >= TAIL_SPREAD_MAX ? TAIL_SPREAD_MAX : (unsigned)(spread + 0.5);
    n = live * (per ? per : 1);
    if (len / n < TAIL_PIECE_MIN)
        n = (unsigned)(len / TAIL_PIECE_MIN);
    if (n < 2)
        return false;
    if (!ch->pieces) {
        ch->pieces = rio__calloc(n, sizeof(*ch->pieces));
        if (!ch->pieces)
            return false; /* fetched whole */
    }
    /* Whole pages, for transports that read with O_DIRECT. */
    uint64_t step = ((len + n - 1) / n + 4095) & ~(uint64_t)4095, off = 0;
    unsigned k = 0;
    for (; off < len; off += step, k++) {
        struct rio__chunk *pc = &ch->pieces[k];
        memset(pc, 0, sizeof(*pc));
        pc->idx = ch->idx;
        pc->parent = ch;
        pc->poff = off;
        pc->plen = len - off < step ? len - off : step;
        rq_push(r, pc);
    }
    ch->npieces = k;
    ch->landed = 0;
    ch->state = CH_INFLIGHT;
    return true;
}

static void req_unpick(struct rio__req *r, struct rio__chunk *ch)
{
    if (ch->state == CH_NEW && r->next_new == ch->idx + 1) {
        r->next_new--;
        return;
    }
    /* Back to the front of the queue, keeping its place. */
    ch->state = CH_QUEUED;
    rio_list_push_front(&r->rq, &ch->qnode);
}

static void complete_cb(struct rio_io *io);

static void counters_add_locked(struct rio_client *c, struct rio__attempt *a, uint64_t now)
{
    struct rio__path *p = &c->paths[a->path];
    struct rio__req *r = a->req;
    uint64_t len = a->io.len;
    struct rio__path_dir *d = &p->dir[io_dir(a->io.kind)];
    if (p->inflight_ops++ == 0) {
        p->busy_since_ns = now;
        p->mark_ns = now;
    }
    if (d->inflight_ops++ == 0)
        d->busy_since_ns = now;
    p->inflight_bytes += len;
    if (a->io.one) {
        p->one_ops++;
        p->one_bytes += len;
    }
    if (p->inflight_ops > p->peak_depth)
        p->peak_depth = p->inflight_ops;
    if (p->inflight_ops > r->call->path_peak[a->path])
        r->call->path_peak[a->path] = p->inflight_ops;
    c->inflight_ops++;
    c->inflight_bytes += len;
    if (c->inflight_bytes > r->call->peak_inflight)
        r->call->peak_inflight = c->inflight_bytes;
    r->inflight_ops++;
    r->inflight_bytes += len;
}

/* Released exactly once per attempt, whatever its outcome. */
static void counters_sub_locked(struct rio_client *c, struct rio__attempt *a, uint64_t now)
{
    struct rio__path *p = &c->paths[a->path];
    struct rio__req *r = a->req;
    uint64_t len = a->io.len;
    p->inflight_bytes -= len;
    if (a->io.one) {
        p->one_ops--;
        p->one_bytes -= len;
    }
    struct rio__path_dir *d = &p->dir[io_dir(a->io.kind)];
    p->mark_ns = now;
    if (--p->inflight_ops == 0)
        p->busy_ns += now - p->busy_since_ns;
    if (--d->inflight_ops == 0)
        d->busy_ns += now - d->busy_since_ns;
    c->inflight_ops--;
    c->inflight_bytes -= len;
    r->inflight_ops--;
    r->inflight_bytes -= len;
}

/* Whether err is a one-op request's refusal by a server that does not
 * take the frame (rio_transport_ops put_one, get_one): RIO_ENOUPLOAD for a
 * PUT_ONE, RIO__ENOTONE for a GET_ONE. The request runs again the usual
 * way (a re-plan); it is no failed try and no path error. */
static bool one_refused(const struct rio__req *r, int64_t err)
{
    return (r->one && err == RIO_ENOUPLOAD) || (r->get_one && err == RIO__ENOTONE);
}

/* Returns 1 if dispatched, 0 if nothing to do on this path, -1 if the budget
 * is full (stop dispatching). */
static int dispatch_one_locked(struct rio_client *c, unsigned pi, uint64_t now)
{
    /* Each class's paths, once per pass: the walk below may visit
     * thousands of requests (a batch), and nothing it does before it
     * returns changes them. */
    uint32_t mask[2] = {0, 0};
    bool masked[2] = {false, false};

    rio_list_each (r, &c->active, struct rio__req, anode) {
        int dir = r->type == RIO_OP_PUT;
        if (r->decided || r->opening)
            continue;
        if (!masked[dir]) {
            if (adapt_on(c) && !c->adapt[dir].started)
                adapt_start_locked(c, dir, now);
            mask[dir] = adapt_mask(c, dir);
            masked[dir] = true;
        }
        if (!path_usable(c, pi, dir, mask[dir]))
            continue;
        struct rio__chunk *ch = req_pick(r, now);
        if (!ch)
            continue;
        uint64_t len = ch_len(r, ch);
        if (split_tail_locked(c, r, ch, len)) {
            ch = req_pick(r, now); /* a piece, or a retry queued before */
            len = ch_len(r, ch);
        }
        if (c->inflight_bytes > 0 && c->inflight_bytes + len > c->o.budget_bytes) {
            req_unpick(r, ch);
            return -1;
        }
        if (r->inflight_bytes > 0 && r->inflight_bytes + len > c->o.request_budget) {
            req_unpick(r, ch);
            continue;
        }
        if (c->paths[pi].state == PATH_HEALTHY &&
            !path_should_take(c, pi, dir, len, !ch->parent && req_splits(c, r, ch), now)) {
            req_unpick(r, ch);
            return 0;
        }
        if (c->paths[pi].state == PATH_PROBING && !probe_may_take(c, dir, len)) {
            req_unpick(r, ch);
            return 0;
        }
        struct rio__attempt *a = attempt_get_locked(c);
        if (!a) {
            req_unpick(r, ch);
            return -1; /* retried on the next loop; the request's deadline bounds it */
        }
        a->c = c;
        a->req = r;
        a->ch = ch;
        a->path = pi;
        /* Every attempt starts from the chunk's own start: fresh io, no
         * progress, no partial checksum, the chunk's own destination. */
        struct rio_io *io = &a->io;
        io->kind = r->type == RIO_OP_GET ? RIO_IO_READ : RIO_IO_WRITE;
        io->path = pi;
        io->key = r->key;
        io->generation = r->generation;
        io->upload = r->upload;
        io->one = false;
        io->gen_out = 0;
        io->unsure = false;
        io->why[0] = '\0';
        /* A streaming writer's part: the object's chunk base + idx, whose
         * bytes sit at the part's own start. */
        uint64_t loff = ch->idx * r->chunk_size;
        uint64_t poff = ch->parent ? ch->poff : 0; /* a piece: its range in the chunk */
        io->index = r->base + ch->idx;
        io->off = io->index * r->chunk_size + poff;
        io->len = len;
        if (r->type == RIO_OP_GET) {
            io->dst =
                r->ring ? r->ring + (ch->idx % r->prefetch) * r->chunk_size : r->data + loff + poff;
            io->xxh = r->xxh && !ch->parent ? r->xxh[ch->idx] : 0;
            io->xxh_valid = false;
            /* A GET in one op read again after a mismatch has its
             * descriptor (the answer's): a chunk of it, of its generation. */
            io->one = r->get_one && !r->md5_rereads;
        } else {
            io->src = r->data + loff;
            io->xxh = r->xxh[ch->idx];
            io->one = r->one;
            if (r->one) {
                /* Hashed before it may go: its etag is known now. */
                if (!r->one_etag[0] && rio__etag_mode(c) == RIO_ETAG_FAST)
                    rio__etag_fast(r->xxh, 1, r->size, r->chunk_size, r->one_etag);
                io->chunk_size = r->chunk_size;
                io->etag = r->one_etag;
            }
        }
        io->complete = complete_cb;
        io->engine_priv = a;
        a->submit_ns = now;
        a->timeout_ns = now + (uint64_t)c->o.op_timeout_ms * 1000000ull;
        int ret = rio__t_submit(c->t, io);
        if (ret == -EAGAIN) {
            req_unpick(r, ch);
            attempt_put_locked(c, a);
            return 0;
        }
        if (one_refused(r, ret)) {
            /* The path's server takes no GET_ONE or PUT_ONE (found at
             * submit): the request runs again the usual way, as when the
             * refusal comes as its completion. Nothing failed: no try is
             * spent, and the path keeps its last error (RIO__ENOTONE never
             * leaves the library). */
            attempt_put_locked(c, a);
            ch->state = CH_INFLIGHT;
            req_decide_locked(c, r, ret);
            return 1;
        }
        if (ret < 0) {
            /* Refused at submit: the same as a failed completion, so a path
             * that refuses everything cools down instead of spinning. */
            attempt_put_locked(c, a);
            ch->state = CH_INFLIGHT;
            r->call->path_errors[pi]++;
            c->paths[pi].last_err = ret;
            int cls = rio__err_class(ret);
            if (rio__class_is_path(cls) && c->paths[pi].state != PATH_COOLING)
                path_fail_locked(c, pi, cls, ret, now);
            chunk_failed_locked(c, r, ch, ret, NULL, now);
            return 1;
        }
        ch->state = CH_INFLIGHT;
        rio_list_push_front(&c->paths[pi].attempts, &a->pnode);
        counters_add_locked(c, a, now);
        return 1;
    }
    return 0;
}

static void schedule_locked(struct rio_client *c, uint64_t now)
{
    bool progress = true;
    while (progress) {
        progress = false;
        for (unsigned k = 0; k < c->npaths; k++) {
            unsigned pi = (c->rr + k) % c->npaths;
            struct rio__path *p = &c->paths[pi];
            if (p->state == PATH_COOLING || path_full(c, p, -1) ||
                (p->state == PATH_PROBING && p->inflight_ops > 0))
                continue;
            int ret = dispatch_one_locked(c, pi, now);
            if (ret < 0)
                return;
            if (ret > 0)
                progress = true;
        }
        c->rr = (c->rr + 1) % c->npaths;
    }
}

/* --------------------------------------------------------- completions */

static void complete_cb(struct rio_io *io)
{
    struct rio__attempt *a = io->engine_priv;
    a->rnext = a->c->reaped;
    a->c->reaped = a;
}

/* Keep chunk latency lat: every one while they fit, then each replaces a
 * kept one with the chance that keeps a uniform sample (reservoir). */
static void lat_note(struct rio__call *call, uint64_t lat)
{
    call->lat_seen++;
    if (lat > call->lat_max)
        call->lat_max = lat;
    if (call->nlat < call->lat_cap) {
        call->lat[call->nlat++] = lat;
        return;
    }
    if (call->nlat < RIO__LAT_SAMPLES_MAX)
        return; /* the reserve could not grow: those kept are the sample */
    uint64_t x = call->lat_rng + 0x9e3779b97f4a7c15ull; /* splitmix64 */
    call->lat_rng = x;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    uint64_t j = x % call->lat_seen;
    if (j < call->nlat)
        call->lat[j] = lat;
}

static bool md5_hex(const char *s)
{
    for (int i = 0; i < 32; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[32] == '\0';
}

bool rio__req_md5_may(const struct rio_client *c, const struct rio__req *r, uint64_t size)
{
    /* The whole object: a reader opened at an offset or of a range cannot
     * hash what it never reads. */
    return r->type == RIO_OP_GET && c->o.verify > 0 && c->t->foreign_etag_md5 &&
           rio__req_whole(r) && size > 0;
}

static const char *crc_name(int algo)
{
    return algo == RIO__CK_CRC64NVME ? "crc64nvme" : algo == RIO__CK_CRC32C ? "crc32c" : "crc32";
}

/* A CRC as the digest string md5_want holds. */
static void crc_hex(int algo, uint64_t v, char hex[48])
{
    snprintf(hex, 48, "%s:%016" PRIx64, crc_name(algo), v);
}

void rio__req_md5_plan(struct rio_client *c, struct rio__req *r)
{
    uint64_t v;
    int algo;

    r->md5_check = !r->xxh && rio__req_md5_may(c, r, r->size);
    r->crc_algo = RIO__CK_NONE;
    r->crc_got = 0;
    /* The plan's CRC where it found one (the transport's table may have
     * given that slot away since), else the transport's now. */
    algo = r->plan_ck_algo;
    v = r->plan_ck;
    if (r->md5_check &&
        (algo != RIO__CK_NONE || rio__t_full_checksum(c->t, &r->desc, &algo, &v) == 0)) {
        r->crc_algo = algo;
        crc_hex(algo, v, r->md5_want); /* a CRC of the bytes, cheaper than the MD5 */
        r->md5_part = 0;
    } else if (r->md5_check && md5_hex(r->desc.etag)) {
        memcpy(r->md5_want, r->desc.etag, 33); /* the MD5 of the bytes */
        r->md5_part = 0;
    } else if (!r->md5_part) {
        r->md5_check = false; /* no digest of its bytes known */
    }
}

/* n bytes of r's object, in order, into its MD5 (the last ones: last, and
 * then the ETag they make into hex): the bytes' MD5, or for an object
 * uploaded in parts each part's MD5 into md5_outer, and theirs, "-N". */
static int md5_feed(struct rio__req *r, const uint8_t *p, uint64_t n, bool last, char hex[48])
{
    uint8_t d[16];
    int err;

    if (r->crc_algo != RIO__CK_NONE) { /* the store's CRC, not the MD5 */
        r->crc_got = r->crc_algo == RIO__CK_CRC64NVME ? rio__crc64nvme(r->crc_got, p, n)
                     : r->crc_algo == RIO__CK_CRC32C  ? rio__crc32c((uint32_t)r->crc_got, p, n)
                                                      : rio__crc32((uint32_t)r->crc_got, p, n);
        if (last)
            crc_hex(r->crc_algo, r->crc_got, hex);
        return 0;
    }
    err = r->md5.ctx ? 0 : rio__md5_init(&r->md5);

    if (err == 0 && !r->md5_part) {
        err = rio__md5_update(&r->md5, p, n);
        return err == 0 && last ? rio__md5_final(&r->md5, hex) : err;
    }
    if (err == 0 && !r->md5_outer.ctx)
        err = rio__md5_init(&r->md5_outer);
    while (err == 0 && n) {
        uint64_t k = r->md5_part - r->md5_poff;
        if (k > n)
            k = n;
        err = rio__md5_update(&r->md5, p, k);
        p += k;
        n -= k;
        r->md5_poff += k;
        if (err == 0 && r->md5_poff == r->md5_part && (n || !last)) {
            /* a part ends: its digest in, the next one's MD5 begins */
            r->md5_poff = 0;
            err = rio__md5_final_raw(&r->md5, d);
            if (err == 0)
                err = rio__md5_update(&r->md5_outer, d, 16);
            if (err == 0)
                err = rio__md5_init(&r->md5);
        }
    }
    if (err || !last)
        return err;
    err = rio__md5_final_raw(&r->md5, d); /* the last part */
    if (err == 0)
        err = rio__md5_update(&r->md5_outer, d, 16);
    if (err == 0)
        err = rio__md5_final(&r->md5_outer, hex);
    if (err == 0)
        snprintf(hex + 32, 16, "-%" PRIu32, r->md5_parts);
    return err;
}

/* The digest of a GET checked by one (CRC or MD5) did not match. The whole object
 * is read again, once (the damage may have been on the way: which chunk,
 * nothing says), unless it is a reader's of several chunks (what it handed
 * out cannot be taken back): that and a second mismatch fail
 * RIO_ECHECKSUM. */
static void md5_mismatch_locked(struct rio_client *c, struct rio__req *r)
{
    rio__md5_cleanup(&r->md5);
    rio__md5_cleanup(&r->md5_outer);
    r->md5_poff = 0;
    r->md5_pnext = 0;
    r->crc_got = 0;
    r->call->retries[RIO_CLASS_CHECKSUM]++;
    if ((r->ring && r->end > 1) || r->md5_rereads || c->o.retry_checksum < 0) {
        r->last_err = r->crc_algo != RIO__CK_NONE ? RIO__ECRC : RIO__EMD5;
        req_decide_locked(c, r, RIO_ECHECKSUM);
        return;
    }
    r->md5_rereads++;
    r->md5_at = 0;
    r->last_err = RIO_ECHECKSUM;
    r->done = 0;
    /* Every chunk out again (queued: one whose cancelled attempt is still
     * out waits for it, req_pick), from its first try. */
    for (uint64_t i = 0; i < r->nchunks; i++) {
        struct rio__chunk *ch = rio__req_chunk(r, i);
        ch->npieces = 0;
        ch->attempts = 0;
        ch->throttles = 0;
        ch->not_before_ns = 0;
        rq_push(r, ch);
    }
    /* Its bytes were counted once: done waits for them to land again. */
    r->call->progress_redo += r->size;
}

/* The digest of r's bytes, hex, is in: r succeeds if it is the one wanted,
 * else it is read again or fails (md5_mismatch_locked). mu held (let go
 * while the parts' sizes are asked). */
static void md5_verdict_locked(struct rio_client *c, struct rio__req *r, const char *hex)
{
    struct rio__call *call = r->call;
    bool match = strcmp(hex, r->md5_want) == 0;

    if (!match && r->md5_part && r->md5_parts > 2 && !r->md5_sized) {
        /* Parts 1 and N said the part size; the others were not asked
         * (two round trips, not N). A sound object uploaded in parts
         * of other sizes hashes, cut at part 1's size, to another
         * ETag: asked now, before its bytes are refused; such an
         * object is read unchecked. */
        struct rio__meta m;
        r->md5_sized = true;
        rio__meta_for_call(&m, call);
        pthread_mutex_unlock(&c->mu);
        int odd = rio__meta_parts_even(c, &m, &r->desc, r->md5_part, r->md5_parts);
        pthread_mutex_lock(&c->mu);
        if (r->decided)
            return;
        /* A server that could not say them now (its tries spent) fails
         * the GET with its error: no refusal of a sound object. */
        if (odd == RIO_EDEADLINE || odd == RIO_ECANCELED || odd == -ENOMEM ||
            (odd < 0 && rio__class_is_retryable(rio__err_class(odd)))) {
            req_decide_locked(c, r, odd);
            return;
        }
        match = odd == 1;
    }
    if (match) {
        r->md5_at = r->end;
        if (r->ring)
            pthread_cond_broadcast(&call->cond);
        req_decide_locked(c, r, 0);
    } else {
        md5_mismatch_locked(c, r);
    }
}

/* How many parts r's object has, cut every md5_part bytes (the last one
 * shorter), as md5_feed cuts it. */
static uint64_t md5_lane_parts(const struct rio__req *r)
{
    return (r->size + r->md5_part - 1) / r->md5_part;
}

/* Whether r's parts' MD5s are taken in lanes: an object in parts, read
 * into memory (a reader's ring would give its slots back before 16 parts
 * landed), not too many of them nor too large, on a CPU that has lanes. */
static bool md5_in_lanes(const struct rio__req *r)
{
    return r->crc_algo == RIO__CK_NONE && r->md5_part && r->md5_part <= RIO__MD5_LANE_PART_MAX &&
           !r->ring && r->data && md5_lane_parts(r) <= RIO__MD5_LANE_PARTS && rio__md5_lanes() > 1;
}

/* Whether part k of r landed whole (each chunk that holds a byte of it). */
static bool md5_part_landed(struct rio__req *r, uint64_t k)
{
    uint64_t off = k * r->md5_part, len = r->size - off < r->md5_part ? r->size - off : r->md5_part;

    for (uint64_t i = off / r->chunk_size; i <= (off + len - 1) / r->chunk_size; i++)
        if (!rio__req_chunk_landed(r, i))
            return false;
    return true;
}

/* How many parts from md5_pnext on to take at once: 0 until that many have
 * landed (16 or 8, fewer at the end). mu held. */
static unsigned md5_lanes_ready(struct rio__req *r)
{
    uint64_t left = md5_lane_parts(r) - r->md5_pnext;
    unsigned want = left < rio__md5_lanes() ? (unsigned)left : rio__md5_lanes();

    for (unsigned n = 0; n < want; n++)
        if (!md5_part_landed(r, r->md5_pnext + n))
            return 0;
    return want;
}

/* md5_check_task for an object in parts read into memory (md5_in_lanes):
 * as soon as 16 (or 8) parts have landed from md5_pnext on, their MD5s at
 * once; past the last part, the MD5 of their MD5s and "-N" decides r
 * (md5_verdict_locked). mu held, let go while hashing. 0 or -ENOMEM. */
static int md5_lanes_locked(struct rio_client *c, struct rio__req *r, uint64_t *bytes)
{
    uint64_t total = md5_lane_parts(r);
    unsigned n;

    if (!r->md5_pd && !(r->md5_pd = rio__calloc(total, sizeof(*r->md5_pd))))
        return -ENOMEM;
    while (!r->decided && (n = md5_lanes_ready(r)) > 0) {
        const void *p[16]; /* rio__md5_lanes() at most */
        size_t len[16];
        uint64_t first = r->md5_pnext;
        char hex[48];
        int err;

        for (unsigned i = 0; i < n; i++) {
            uint64_t off = (first + i) * r->md5_part;
            p[i] = r->data + off;
            len[i] = (size_t)(r->size - off < r->md5_part ? r->size - off : r->md5_part);
            *bytes += len[i];
        }
        pthread_mutex_unlock(&c->mu);
        err = rio__md5_many(p, len, n, r->md5_pd + first);
        pthread_mutex_lock(&c->mu);
        if (err < 0)
            return err;
        if (r->decided)
            return 0;
        r->md5_pnext = (uint32_t)(first + n);
        if (r->md5_pnext < total)
            continue;
        struct rio_md5 outer = {0};
        err = rio__md5_init(&outer);
        if (err == 0)
            err = rio__md5_update(&outer, r->md5_pd, (size_t)total * sizeof(*r->md5_pd));
        if (err == 0)
            err = rio__md5_final(&outer, hex);
        rio__md5_cleanup(&outer);
        if (err < 0)
            return err;
        snprintf(hex + 32, 16, "-%" PRIu32, r->md5_parts);
        md5_verdict_locked(c, r, hex);
        return 0;
    }
    return 0;
}

/*
 * A GET checked by a digest (r->md5_check: the store's CRC or the MD5 of
 * its etag, md5_feed): hashes its chunks from md5_at
 * on, in order, for as long as each has landed, on the cpu pool and
 * without mu (the bytes of a chunk that landed are not written again while
 * this runs: no chunk of r goes out again but after a mismatch, which this
 * task itself decides, and r is not fenced while r->verifying). Past the
 * last chunk the digest is compared with the etag: r succeeds, or is read
 * again (md5_mismatch_locked).
 */
static void md5_check_task(void *arg)
{
    struct rio__req *r = arg;
    struct rio__call *call = r->call;
    struct rio_client *c = call->c;
    uint64_t cpu0 = rio__thread_cpu_ns(), t0 = rio__now_ns(), bytes = 0;
    int err = 0;

    pthread_mutex_lock(&c->mu);
    if (md5_in_lanes(r))
        err = md5_lanes_locked(c, r, &bytes);
    while (!md5_in_lanes(r) && !r->decided && r->md5_at < r->end &&
           rio__req_chunk_landed(r, r->md5_at)) {
        uint64_t i = r->md5_at, len = rio__req_chunk_len(r, i);
        const uint8_t *p =
            r->ring ? r->ring + (i % r->prefetch) * r->chunk_size : r->data + i * r->chunk_size;
        char hex[48] = "";
        pthread_mutex_unlock(&c->mu);
        err = md5_feed(r, p, len, i + 1 == r->end, hex);
        bytes += len;
        pthread_mutex_lock(&c->mu);
        if (err || r->decided)
            break;
        if (i + 1 < r->end) {
            r->md5_at = i + 1;
            if (r->ring)
                pthread_cond_broadcast(&call->cond); /* the reader may take chunk i */
            continue;
        }
        md5_verdict_locked(c, r, hex);
        break;
    }
    if (err)
        req_decide_locked(c, r, err);
    call->verify_ns += rio__now_ns() - t0;
    call->verify_cpu_ns += rio__thread_cpu_ns() - cpu0;
    call->verify_bytes += bytes;
    r->md5_running = false;
    r->verifying--;
    pthread_mutex_unlock(&c->mu);
    /* The engine fences r once decided, or sends its chunks again. */
    rio__t_wake(c->t);
}

/* r (md5_check) has a chunk that landed: hash on from md5_at if that one
 * has and no hashing runs. */
static void md5_kick_locked(struct rio_client *c, struct rio__req *r)
{
    if (r->md5_running || r->decided || r->md5_at >= r->end)
        return;
    if (md5_in_lanes(r) ? !md5_lanes_ready(r) : !rio__req_chunk_landed(r, r->md5_at))
        return;
    r->md5_running = true;
    r->verifying++;
    rio__pool_task(&c->cpu_pool, &r->md5_job, md5_check_task, r);
}

static void req_chunk_done_locked(struct rio_client *c, struct rio__req *r, struct rio__attempt *a,
                                  uint64_t now)
{
    struct rio__call *call = r->call;
    uint64_t lat = a->done_ns - a->submit_ns;
    a->ch->state = CH_DONE;
    r->done++;
    lat_note(call, lat);
    call->op_ns += lat;
    /* A transport's service time is the target's word: no more than the
     * op took here, so the verdict's share stays a share. */
    call->svc_ns += a->io.svc_ns < lat ? a->io.svc_ns : lat;
    if (!a->ch->npieces) { /* a split chunk's pieces were counted as they landed */
        call->path_bytes[a->path] += a->io.len;
        call->path_ops[a->path]++;
    }
    uint64_t since = now - call->t0;
    if (!call->first_done_ns)
        call->first_done_ns = since;
    call->last_done_ns = since;
    if (call->progress) {
        /* Reported by a thread of the call, outside mu (rio__call_progress_locked). */
        uint64_t redo = a->io.len < call->progress_redo ? a->io.len : call->progress_redo;
        call->progress_redo -= redo;
        call->progress_done += a->io.len - redo;
        if (now - call->progress_last_ns >= 100000000ull) {
            call->progress_last_ns = now;
            call->progress_due = true;
            pthread_cond_broadcast(&call->cond);
        }
    }
    if (r->ring)
        pthread_cond_broadcast(&call->cond); /* the reader waits chunk by chunk */
    if (r->md5_check)
        md5_kick_locked(c, r); /* which decides it once the MD5 matched */
    else if (r->done == r->nchunks)
        req_decide_locked(c, r, 0);
}

/* a's chunk, landed whole, hashes to h: done if that is its xxh3, else it
 * failed with RIO_ECHECKSUM (and goes out again). */
static void chunk_check_locked(struct rio_client *c, struct rio__req *r, struct rio__attempt *a,
                               uint64_t h, uint64_t now)
{
    if (h == r->xxh[a->ch->idx]) {
        req_chunk_done_locked(c, r, a, now);
    } else {
        /* A split chunk that does not match is fetched again whole. */
        a->ch->npieces = 0;
        r->call->path_errors[a->path]++;
        chunk_failed_locked(c, r, a->ch, RIO_ECHECKSUM, NULL, now);
    }
}

/* The transport delivered a chunk whole and its checksum is still to be
 * checked; path and counters are settled (handle_completion_locked). Runs on
 * the client's cpu pool, without mu: only this attempt reads the chunk's
 * bytes now, and nothing writes them (the chunk goes out again only after
 * this returns), nor can the call return (its request is not fenced while
 * r->verifying). */
static void verify_task(void *arg)
{
    struct rio__attempt *a = arg;
    struct rio_client *c = a->c;
    struct rio__req *r = a->req;
    uint64_t cpu0 = rio__thread_cpu_ns(), t0 = rio__now_ns();
    uint64_t h = rio__xxh3(a->io.dst, a->io.len);
    uint64_t now = rio__now_ns(), cpu = rio__thread_cpu_ns() - cpu0;

    pthread_mutex_lock(&c->mu);
    struct rio__call *call = r->call;
    call->verify_ns += now - t0;
    call->verify_cpu_ns += cpu;
    call->verify_bytes += a->io.len;
    r->verifying--;
    if (!r->decided)
        chunk_check_locked(c, r, a, h, now);
    attempt_put_locked(c, a);
    pthread_mutex_unlock(&c->mu);
    /* The engine dispatches the freed work and fences what is over. */
    rio__t_wake(c->t);
}

/* A path that answered an op (its chunk landed, or a GET_ONE's answer
 * decided its request): a probe is over, and its fail count starts again. */
static void path_answered(struct rio__path *p)
{
    if (p->state == PATH_PROBING || p->state == PATH_HEALTHY) {
        p->state = PATH_HEALTHY;
        p->fails = 0;
    }
}

/*
 * A GET in one op (r->get_one) answered, its attempt not cancelled. When
 * the object's bytes came, the answer's descriptor becomes the request's
 * (one chunk, in place; its xxh3 the one the transport hashed the bytes
 * to and checked against the answer's) and the attempt goes on as a chunk
 * that landed: false. An empty object is one chunk of no bytes. Else the
 * answer decides the request (true): not found; larger than the buffer;
 * or an object of another shape, or no descriptor (a server that turned
 * out not to offer it): RIO__ENOTONE, and the call looks it up and reads
 * it the usual way (rio__replan_due). Any other error: false, the usual
 * handling (retries).
 */
static bool get_one_answered_locked(struct rio_client *c, struct rio__req *r,
                                    struct rio__attempt *a)
{
    struct rio_io *io = &a->io;
    int st;

    if (io->res == RIO__ENOTONE && io->gen_out && io->one_size == 0) {
        io->res = 0; /* an empty object */
        io->xxh_valid = false;
    }
    if (io->res >= 0) {
        /* The descriptor passes what a lookup's does (client_lookup),
         * else the answer breaks the protocol (RIO_EPROTO, as there). */
        uint64_t size = (uint64_t)io->res;
        struct rio_desc *d = &r->desc;
        snprintf(d->key, sizeof(d->key), "%s", r->key);
        d->generation = io->gen_out;
        d->size = size;
        d->chunk_size = io->one_chunk_size;
        /* chunk_size 0: the backend keeps no geometry (s3://, an object
         * railio did not write), as its lookup would say. */
        d->nchunks = size && d->chunk_size ? 1 : 0;
        snprintf(d->etag, sizeof(d->etag), "%s", io->one_etag);
        if (rio__desc_check(d, r->key, NULL, 0) < 0) {
            io->res = RIO_EPROTO;
            return false;
        }
        r->call->progress_total = r->call->progress_total - r->one_total + size;
        r->one_total = size;
        r->size = size;
        r->chunk_size = size && d->chunk_size ? d->chunk_size : c->o.chunk_size;
        r->generation = io->gen_out;
        if (size) {
            r->one_xxh = io->xxh_got;
            r->xxh = io->xxh_valid ? &r->one_xxh : NULL;
        }
        rio__req_md5_plan(c, r);
        io->len = size;
        return false;
    }
    if (io->res == RIO_ENOTFOUND)
        st = RIO_ENOTFOUND;
    else if (io->res != RIO__ENOTONE)
        return false;
    else if (io->gen_out && io->one_size > r->get_cap)
        st = RIO_ETOOBIG;
    else
        st = RIO__ENOTONE;
    req_why_locked(r, st, io->why); /* a 404's answer, for RIO_ENOTFOUND */
    /* The path answered: as good a sign of it as a chunk landing (its
     * fail count, and no stall: a run of GETs of missing keys is progress). */
    struct rio__path *p = &c->paths[a->path];
    path_answered(p);
    p->last_done_ns = a->done_ns;
    p->stalled = false;
    req_decide_locked(c, r, st);
    return true;
}

static void handle_completion_locked(struct rio_client *c, struct rio__attempt *a, uint64_t now)
{
    struct rio__req *r = a->req;
    struct rio__chunk *ch = a->ch;
    struct rio__path *p = &c->paths[a->path];

    rio_list_remove(&p->attempts, &a->pnode);
    counters_sub_locked(c, a, now);
    a->done_ns = now;

    /* A PUT in one op: what it published stands whatever became of the
     * request (a cancelled attempt included). */
    if (r->one && a->io.res > 0 && (uint64_t)a->io.res == a->io.len && a->io.gen_out)
        r->one_gen = a->io.gen_out;
    else if (r->one && a->io.res < 0 && a->io.unsure)
        r->one_unsure++;

    if (a->cancelled) {
        /* Its fate was settled when it was cancelled; it can no longer write
         * into the chunk, so the chunk may go out again. */
        ch->zombies--;
        goto out;
    }
    if (r->get_one && !r->md5_rereads && !r->decided && get_one_answered_locked(c, r, a))
        goto out;
    if (one_refused(r, (int)a->io.res)) {
        req_why_locked(r, (int)a->io.res, a->io.why);
        req_decide_locked(c, r, (int)a->io.res); /* (a PUT_ONE's; see one_refused) */
        goto out;
    }
    int64_t res = a->io.res;
    /* The transport's hash of what it wrote covers a whole chunk only. */
    bool hashed = a->io.xxh_valid && !ch->parent;
    int err = 0;
    if (res < 0)
        err = (int)res;
    else if ((uint64_t)res != a->io.len)
        err = RIO_ESHORT;
    if (err == 0) {
        struct rio__path_dir *d = &p->dir[io_dir(a->io.kind)];
        d->bytes_total += a->io.len;
        path_rate_sample(d, now);
        double op = (double)(now - a->submit_ns);
        d->op_ns = d->op_ns == 0 ? op : 0.7 * d->op_ns + 0.3 * op;
        p->last_done_ns = now;
        p->stalled = false;
        adapt_sample_locked(c, io_dir(a->io.kind), r->call, a->path, a->io.len, a->submit_ns, now);
        path_answered(p);
        if (r->decided)
            goto out;
        if (ch->parent) {
            /* A piece landed; its chunk is checked whole once all have. */
            struct rio__chunk *pa = ch->parent;
            ch->state = CH_DONE;
            r->call->path_bytes[a->path] += a->io.len;
            r->call->path_ops[a->path]++;
            if (++pa->landed < pa->npieces)
                goto out;
            a->ch = pa;
            a->io.len = rio__req_chunk_len(r, pa->idx);
            a->io.dst = r->data + pa->idx * r->chunk_size;
        }
        if (r->type == RIO_OP_GET && r->xxh && c->o.verify > 0 && hashed) {
            /* Hashed as it landed (rio_io.xxh_got): compared here, no
             * second pass over the chunk. */
            r->call->verify_bytes += a->io.len;
            chunk_check_locked(c, r, a, a->io.xxh_got, now);
            goto out;
        }
        if (r->type == RIO_OP_GET && r->xxh && c->o.verify > 0) {
            /* The path delivered; whether the chunk is right is the cpu
             * pool's to say, off the client lock and on as many cores as
             * there are chunks to check. The chunk counts as done only then. */
            r->verifying++;
            rio__pool_task(&c->cpu_pool, &a->vjob, verify_task, a);
            return;
        }
        req_chunk_done_locked(c, r, a, now);
        goto out;
    }
    r->call->path_errors[a->path]++;
    p->last_err = err;
    int cls = rio__err_class(err);
    if (rio__class_is_path(cls) && p->state != PATH_COOLING)
        path_fail_locked(c, a->path, cls, err, now);
    else if (p->state == PATH_PROBING)
        p->state = PATH_HEALTHY; /* it answered: the chunk failed, not the path */
    chunk_failed_locked(c, r, ch, err, a->io.why, now);
out:
    attempt_put_locked(c, a);
}

/* ------------------------------------------------------------- timers */

/*
 * How long a request with work may go without any healthy path before it
 * fails RIO_ENOPATH: the retries of one chunk, each a full op timeout, and
 * the longest cooldown before the last probe. Attempts alone do not bound
 * this: while any path is probing, a failed chunk moves without spending
 * one, and with several paths probing out of step one always is (a dead
 * Ceph cluster held a 4-path PUT for 256 s at the defaults).
 */
static uint64_t stall_window_ns(const struct rio_client *c)
{
    uint64_t ms, ns;
    /* Saturating: an op timeout of years must not wrap to a short window. */
    if (__builtin_mul_overflow((uint64_t)c->o.retry_attempts, c->o.op_timeout_ms, &ms) ||
        __builtin_add_overflow(ms, c->o.cooldown_cap_ms, &ms) ||
        __builtin_mul_overflow(ms, 1000000ull, &ns))
        return UINT64_MAX;
    return ns;
}

static bool any_path_healthy(const struct rio_client *c)
{
    for (unsigned i = 0; i < c->npaths; i++)
        if (c->paths[i].state == PATH_HEALTHY)
            return true;
    return false;
}

/*
 * The window of one-op requests (a whole small object in one op: PUT_ONE,
 * GET_ONE) on the active list. The engine walks that list at every event
 * (dispatch, timers, fences); a batch of 4096 such requests, all on it at
 * once, spent half the engine thread's time on those walks. So those past
 * the window are held off it, in the order they came, and join it as
 * earlier ones end (held_admit_locked). The window holds more than the
 * paths may have in flight at once (a railio:// connection: 64 of them),
 * so the paths never wait for a request to be admitted.
 */
static unsigned one_window(const struct rio_client *c)
{
    return 256u + 128u * c->npaths;
}

static void req_link_locked(struct rio_client *c, struct rio__req *r);

/* Hold r, request i of call (admitted, counted in call->remaining). */
static void held_add_locked(struct rio_client *c, struct rio__call *call, struct rio__req *r,
                            unsigned i)
{
    r->held = true;
    if (call->nheld++ == 0) {
        call->held_next = i;
        call->held_ns = rio__now_ns();
        rio_list_push_back(&c->held_calls, &call->hnode);
    }
    c->held_dir[r->type == RIO_OP_PUT]++;
}

/* The first request call holds (call->nheld > 0). */
static struct rio__req *held_first(struct rio__call *call)
{
    while (!call->reqs[call->held_next].held)
        call->held_next++;
    return &call->reqs[call->held_next];
}

/* The next request call holds goes on the active list. */
static struct rio__req *held_link_next_locked(struct rio_client *c, struct rio__call *call)
{
    struct rio__req *r = held_first(call);
    r->held = false;
    call->held_next++;
    c->held_dir[r->type == RIO_OP_PUT]--;
    if (--call->nheld == 0)
        rio_list_remove(&c->held_calls, &call->hnode);
    req_link_locked(c, r);
    return r;
}

/* Admit held requests while the window has room. */
static void held_admit_locked(struct rio_client *c)
{
    unsigned window = one_window(c);
    while (c->active_one < window && !rio_list_empty(&c->held_calls))
        held_link_next_locked(c, rio_list_entry(c->held_calls.head, struct rio__call, hnode));
}

/* When call's held requests have a whole stall window behind them: the
 * stall counts from when no path was healthy or from when they were held,
 * whichever came later, as an active request's counts from when it had
 * work and no healthy path (a stall that began before the call did is
 * none of its own). UINT64_MAX: no stall. */
static uint64_t held_stall_end(const struct rio_client *c, const struct rio__call *call)
{
    if (!c->stall_since_ns)
        return UINT64_MAX;
    uint64_t from = c->stall_since_ns > call->held_ns ? c->stall_since_ns : call->held_ns;
    uint64_t w = stall_window_ns(c);
    return w > UINT64_MAX - from ? UINT64_MAX : from + w;
}

/* The timers of held requests, those of their call (they share its
 * deadline and its cancel), and the client's stall: every request held
 * through a whole stall window with no healthy path fails as an active
 * one with work would. Those decided join the active list (fenced there). */
static void held_timers_locked(struct rio_client *c, uint64_t now)
{
    struct rio__call *call, *next;
    for (call = rio_list_entry(c->held_calls.head, struct rio__call, hnode); call; call = next) {
        next = rio_list_entry(call->hnode.next, struct rio__call, hnode);
        int st = 0;
        if (call->cancel && atomic_load(&call->cancel->fired))
            st = RIO_ECANCELED;
        else if (now >= held_first(call)->deadline_ns)
            st = RIO_EDEADLINE;
        else if (now >= held_stall_end(c, call))
            st = RIO_ENOPATH;
        while (st && call->nheld) {
            struct rio__req *r = held_link_next_locked(c, call);
            req_decide_locked(c, r, st);
        }
    }
}

static void check_timers_locked(struct rio_client *c, uint64_t now)
{
    bool healthy = any_path_healthy(c);
    if (healthy)
        c->stall_since_ns = 0;
    else if (!c->stall_since_ns)
        c->stall_since_ns = now;
    held_timers_locked(c, now);
    rio_list_each (r, &c->active, struct rio__req, anode) {
        if (r->decided)
            continue;
        if (healthy || (r->inflight_ops == 0 && rio_list_empty(&r->rq)))
            r->stall_ns = 0;
        else if (!r->stall_ns)
            r->stall_ns = now;
        if (r->call->cancel && atomic_load(&r->call->cancel->fired))
            req_decide_locked(c, r, RIO_ECANCELED);
        else if (now >= r->deadline_ns)
            req_decide_locked(c, r, RIO_EDEADLINE);
        else if (r->stall_ns && now - r->stall_ns >= stall_window_ns(c))
            req_decide_locked(c, r, RIO_ENOPATH);
    }
    for (unsigned i = 0; i < c->npaths; i++) {
        struct rio__path *p = &c->paths[i];
        if (p->state == PATH_COOLING && now >= p->until_ns)
            p->state = PATH_PROBING;
        if (path_silent(c, i, now)) {
            /* As a probe that is late: every op of the path is cancelled
             * (fenced: a late byte goes nowhere) and its chunk moves to the
             * other paths, not counted against the chunk's tries. */
            rio_list_each (a, &p->attempts, struct rio__attempt, pnode)
                if (!a->cancelled) {
                    a->req->call->path_errors[i]++;
                    break;
                }
            c->silent_fails++;
            path_fail_locked(c, i, RIO_CLASS_TIMEOUT, -ETIMEDOUT, now);
            continue;
        }
        rio_list_each (a, &p->attempts, struct rio__attempt, pnode) {
            if (a->cancelled)
                continue;
            if (probe_late(c, i, a, now)) {
                /* Its chunk goes back to the others as the path's failure
                 * moves it, not counted against the chunk's tries. */
                a->req->call->path_errors[i]++;
                path_fail_locked(c, i, RIO_CLASS_TIMEOUT, -ETIMEDOUT, now);
                break; /* every attempt of the path was cancelled */
            }
            if (now < a->timeout_ns)
                continue;
            /* No completion within the op timeout: the path is stalled or
             * browned out. */
            struct rio__req *r = a->req;
            struct rio__chunk *ch = a->ch;
            cancel_attempt_locked(c, a);
            r->call->path_errors[i]++;
            p->last_err = -ETIMEDOUT;
            if (p->state != PATH_COOLING)
                path_fail_locked(c, i, RIO_CLASS_TIMEOUT, -ETIMEDOUT, now);
            chunk_failed_locked(c, r, ch, -ETIMEDOUT, NULL, now);
        }
    }
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
    return a < b ? a : b;
}

static uint64_t next_timer_locked(struct rio_client *c, uint64_t now)
{
    uint64_t t = now + 1000000000ull;
    rio_list_each (call, &c->held_calls, struct rio__call, hnode) {
        t = min_u64(t, held_first(call)->deadline_ns);
        t = min_u64(t, held_stall_end(c, call));
        if (call->cancel)
            t = min_u64(t, now + 10000000ull);
    }
    rio_list_each (r, &c->active, struct rio__req, anode) {
        if (r->decided)
            continue;
        t = min_u64(t, r->deadline_ns);
        if (r->call->cancel)
            t = min_u64(t, now + 10000000ull);
        /* Only future backoffs: a chunk that may go now but could not is
         * waiting for a completion or a path, which wake us anyway. */
        rio_list_each (ch, &r->rq, struct rio__chunk, qnode)
            if (!ch->zombies && ch->not_before_ns > now)
                t = min_u64(t, ch->not_before_ns);
    }
    for (unsigned i = 0; i < c->npaths; i++) {
        struct rio__path *p = &c->paths[i];
        if (p->state == PATH_COOLING)
            t = min_u64(t, p->until_ns);
        if (p->state == PATH_HEALTHY) {
            /* path_silent; once past, another path's completion (or the
             * loop's next second) looks again. */
            uint64_t since, due = silent_due(c, i, now, &since);
            if (due > now)
                t = min_u64(t, due);
        }
        rio_list_each (a, &p->attempts, struct rio__attempt, pnode)
            if (!a->cancelled) {
                t = min_u64(t, a->timeout_ns);
                /* probe_late; once past, another path's completion
                 * wakes the loop (a past time here would spin it). */
                uint64_t due = p->state == PATH_PROBING ? probe_due(c, i, a) : UINT64_MAX;
                if (due > now)
                    t = min_u64(t, due);
            }
    }
    return t;
}

/* Finished requests leave the active list; a call whose requests are all
 * fenced wakes its caller. */
static void reap_finished_locked(struct rio_client *c)
{
    struct rio__req *r, *next;

    for (r = rio_list_entry(c->active.head, struct rio__req, anode); r; r = next) {
        next = rio_list_entry(r->anode.next, struct rio__req, anode);
        if (r->decided && r->inflight_ops == 0 && r->verifying == 0) {
            rio_list_remove(&c->active, &r->anode);
            r->active = false;
            struct rio__call *call = r->call;
            r->fenced = true;
            rio__call_ready_locked(call, r);
            if (r->one || r->get_one)
                c->active_one--;
            if (--call->remaining == 0)
                pthread_cond_broadcast(&call->cond);
            if (--call->refs == 0) {
                /* Freed by the engine loop once it drops mu (freeing gives
                 * staging buffers back, which takes mu). */
                call->free_next = c->dead_calls;
                c->dead_calls = call;
            }
        }
    }
    held_admit_locked(c);
}

/*
 * Reap failed (the transport could not wait for completions). Its ops are
 * still the transport's: they complete through a later reap, and until then
 * the engine may neither complete nor reuse them. So the engine waits a
 * little before it reaps again (up to the timeout it asked for, doubling
 * from 1 ms to RIO__REAP_BACKOFF_MAX_MS), so a reap that fails at once does
 * not spin; and once RIO__REAP_ERRS_MAX reaps failed in a row it fails every
 * active request with reap's error: their ops are cancelled and each call
 * returns the error as soon as its ops have come back, instead of waiting
 * for a transport that may never recover. Reap is not per path, so no path
 * is marked down.
 */
#define RIO__REAP_ERRS_MAX 8u
#define RIO__REAP_BACKOFF_MAX_MS 64u

static void reap_backoff(struct rio_client *c, int timeout_ms)
{
    if (c->reap_errs < UINT32_MAX)
        c->reap_errs++;
    unsigned shift = c->reap_errs - 1 < 6 ? c->reap_errs - 1 : 6;
    unsigned ms = 1u << shift;
    if (ms > RIO__REAP_BACKOFF_MAX_MS)
        ms = RIO__REAP_BACKOFF_MAX_MS;
    if (timeout_ms >= 0 && ms > (unsigned)timeout_ms)
        ms = (unsigned)timeout_ms;
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
        ;
}

static void reap_failed_locked(struct rio_client *c, int err)
{
    if (c->reap_errs < RIO__REAP_ERRS_MAX)
        return;
    rio_list_each (r, &c->active, struct rio__req, anode)
        req_decide_locked(c, r, err);
}

static void *engine_main(void *arg)
{
    struct rio_client *c = arg;
    (void)pthread_setname_np(pthread_self(), "rio-engine");
    pthread_mutex_lock(&c->mu);
    for (;;) {
        uint64_t now = rio__now_ns();
        while (c->reaped) {
            struct rio__attempt *a = c->reaped;
            c->reaped = a->rnext;
            handle_completion_locked(c, a, now);
        }
        path_events_locked(c, now);
        check_timers_locked(c, now);
        adapt_lift_locked(c, now);
        schedule_locked(c, now);
        reap_finished_locked(c);
        if (c->stop && rio_list_empty(&c->active) && c->inflight_ops == 0 && !c->dead_calls)
            break;
        uint64_t t = next_timer_locked(c, now);
        int timeout_ms = t <= now ? 0 : (int)((t - now + 999999) / 1000000);
        struct rio__call *dead = c->dead_calls;
        c->dead_calls = NULL;
        pthread_mutex_unlock(&c->mu);
        while (dead) {
            struct rio__call *next = dead->free_next;
            rio__call_free(dead);
            dead = next;
        }
        int n = rio__t_reap(c->t, timeout_ms);
        if (n < 0)
            reap_backoff(c, timeout_ms);
        else
            c->reap_errs = 0;
        pthread_mutex_lock(&c->mu);
        if (n < 0)
            reap_failed_locked(c, n);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

int rio__engine_start(struct rio_client *c)
{
    c->t->engine = c;
    c->t->path_event = path_event_cb;
    int ret = pthread_create(&c->thread, NULL, engine_main, c);
    if (ret != 0)
        return -ret;
    c->thread_started = true;
    c->engine_clock_ok = pthread_getcpuclockid(c->thread, &c->engine_clock) == 0;
    return 0;
}

void rio__engine_stop(struct rio_client *c)
{
    if (!c->thread_started)
        return;
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_mutex_unlock(&c->mu);
    rio__t_wake(c->t);
    pthread_join(c->thread, NULL);
    c->thread_started = false;
}

/* ------------------------------------------------------------- calls */

/* Put r on the client's active list: the engine now dispatches it, checks
 * its timers and fences it, and holds a reference on its call. */
static void req_link_locked(struct rio_client *c, struct rio__req *r)
{
    r->active = true;
    rio_list_push_back(&c->active, &r->anode);
    r->call->refs++;
    if (r->one || r->get_one)
        c->active_one++;
}

int rio__engine_submit(struct rio_client *c, struct rio__call *call)
{
    pthread_mutex_lock(&c->mu);
    if (c->stop) {
        pthread_mutex_unlock(&c->mu);
        return RIO_ECLOSED;
    }
    if (c->o.budget_mode == RIO_BUDGET_FAIL && c->inflight_bytes > 0) {
        uint64_t first = 0;
        for (unsigned i = 0; i < call->nreq; i++)
            if (call->reqs[i].nchunks) {
                first = rio__req_chunk_len(&call->reqs[i], 0);
                break;
            }
        if (c->inflight_bytes + first > c->o.budget_bytes) {
            pthread_mutex_unlock(&c->mu);
            return RIO_EBUSY;
        }
    }
    call->refs = 2;
    call->remaining = 0;
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        if (r->decided) /* failed before it started (lookup, open) */
            continue;
        if (r->nchunks == 0 && !r->opening) {
            /* (one still being prepared stays: a GET looked up has no
             * geometry yet, and an empty PUT is done once it is open) */
            r->decided = true;
            r->fenced = true;
            continue;
        }
        call->remaining++;
        /* One still being prepared joins the active list once it is
         * (rio__engine_admit_locked): the engine walks that list at every
         * event, and a batch of thousands would make each walk thousands.
         * So do small objects in one op each past the window of them. */
        if (r->opening)
            continue;
        if ((r->one || r->get_one) &&
            (call->nheld || !rio_list_empty(&c->held_calls) || c->active_one >= one_window(c)))
            held_add_locked(c, call, r, i);
        else
            req_link_locked(c, r);
    }
    call->refs--; /* the engine holds one reference per active request */
    pthread_mutex_unlock(&c->mu);
    rio__t_wake(c->t);
    return 0;
}

void rio__engine_admit_locked(struct rio_client *c, struct rio__req *r)
{
    req_link_locked(c, r);
}

void rio__engine_fail_req(struct rio_client *c, struct rio__req *r, int err)
{
    pthread_mutex_lock(&c->mu);
    if (r->active) {
        req_decide_locked(c, r, err);
    } else if ((r->opening || r->held) && !r->decided) {
        /* Not admitted yet: decided now, fenced once admitted. */
        r->decided = true;
        r->status = err;
        if (err < 0)
            atomic_store(&r->stop_hashing, 1);
    }
    pthread_mutex_unlock(&c->mu);
    rio__t_wake(c->t);
}

void rio__engine_kick(struct rio_client *c)
{
    rio__t_wake(c->t);
}

void rio__call_ready_locked(struct rio__call *call, struct rio__req *r)
{
    if (!call->pipeline || r->commit_queued || !r->fenced || !r->hash_done)
        return;
    r->commit_queued = true;
    rio_list_push_back(&call->ready, &r->cnode);
    /* Every waiter of a pipelined call is one of its workers, and one is
     * enough: each wake-up is a futex call (and, in a VM, an exit). */
    pthread_cond_signal(&call->cond);
}

bool rio__call_progress_locked(struct rio_client *c, struct rio__call *call)
{
    if (!call->progress_due || call->progress_busy)
        return false;
    call->progress_due = false;
    call->progress_busy = true;
    uint64_t done = call->progress_done, total = call->progress_total;
    pthread_mutex_unlock(&c->mu);
    call->progress(call->progress_arg, done, total);
    pthread_mutex_lock(&c->mu);
    call->progress_busy = false;
    /* Whoever waits for the call (or for the next report) looks again. */
    pthread_cond_broadcast(&call->cond);
    return true;
}

void rio__engine_wait(struct rio_client *c, struct rio__call *call)
{
    pthread_mutex_lock(&c->mu);
    for (;;) {
        /* A report due when the call ends is still made: the last figures. */
        if (rio__call_progress_locked(c, call))
            continue;
        if (call->remaining == 0 && !call->progress_busy)
            break;
        if (!call->progress) {
            pthread_cond_wait(&call->cond, &c->mu);
            continue;
        }
        /* With a progress callback, a report every 100 ms even while no
         * chunk lands (a stalled server): the callback is where a caller
         * acts on what it must while the call runs (the Python binding
         * turns a Ctrl-C into a cancel there). */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (pthread_cond_timedwait(&call->cond, &c->mu, &ts) == ETIMEDOUT && call->remaining) {
            uint64_t now = rio__now_ns();
            if (now - call->progress_last_ns >= 100000000ull) {
                call->progress_last_ns = now;
                call->progress_due = true;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
}

void rio__call_release(struct rio_client *c, struct rio__call *call)
{
    pthread_mutex_lock(&c->mu);
    bool last = --call->refs == 0;
    pthread_mutex_unlock(&c->mu);
    if (last)
        rio__call_free(call);
}

void rio__call_free(struct rio__call *call)
{
    if (!call)
        return;
    for (unsigned i = 0; i < call->nreq; i++) {
        struct rio__req *r = &call->reqs[i];
        rio__free(r->key);
        uint64_t nslots = r->ring ? r->prefetch : r->nchunks;
        for (uint64_t k = 0; r->chunks && k < nslots; k++)
            rio__free(r->chunks[k].pieces);
        rio__free(r->chunks);
        if (r->staging)
            rio__stage_put(call->c, r->staging, r->staging_cap);
        if (r->type == RIO_OP_PUT) {
            rio__free(r->xxh);
            rio__free((void *)r->hready);
        }
        rio_desc_cleanup(&r->desc);
        rio__md5_cleanup(&r->md5);
        rio__md5_cleanup(&r->md5_outer);
        rio__free(r->md5_pd);
    }
    rio__free(call->reqs);
    rio__free(call->lat);
    rio__cancel_unref(call->cancel);
    pthread_cond_destroy(&call->cond);
    pthread_cond_destroy(&call->md5_cond);
    rio__free(call);
}

int rio__call_merge(struct rio__call *acc, const struct rio__call *part)
{
    /* (past RIO__LAT_SAMPLES_MAX, the first parts' samples stand for all) */
    uint64_t take = rio__lat_reserve_of(acc->nlat + part->nlat) - acc->nlat;
    if (take > part->nlat)
        take = part->nlat;
    if (take) {
        if (rio__u64_reserve(&acc->lat, &acc->lat_cap, acc->nlat, acc->nlat + take) < 0)
            return -ENOMEM;
        memcpy(acc->lat + acc->nlat, part->lat, take * sizeof(*acc->lat));
        acc->nlat += take;
    }
    acc->lat_seen += part->lat_seen;
    if (part->lat_max > acc->lat_max)
        acc->lat_max = part->lat_max;
    for (int k = 0; k < RIO_CLASS__COUNT; k++)
        acc->retries[k] += part->retries[k];
    for (unsigned i = 0; i < RIO_MAX_PATHS; i++) {
        acc->path_bytes[i] += part->path_bytes[i];
        acc->path_ops[i] += part->path_ops[i];
        acc->path_errors[i] += part->path_errors[i];
        if (part->path_peak[i] > acc->path_peak[i])
            acc->path_peak[i] = part->path_peak[i];
    }
    acc->svc_ns += part->svc_ns;
    acc->op_ns += part->op_ns;
    acc->verify_ns += part->verify_ns;
    acc->verify_bytes += part->verify_bytes;
    acc->verify_cpu_ns += part->verify_cpu_ns;
    acc->copy_ns += part->copy_ns;
    acc->bytes_staged += part->bytes_staged;
    if (part->peak_inflight > acc->peak_inflight)
        acc->peak_inflight = part->peak_inflight;
    /* done times are since each call's start: shift them to acc's */
    uint64_t shift = part->t0 > acc->t0 ? part->t0 - acc->t0 : 0;
    if (part->first_done_ns &&
        (!acc->first_done_ns || part->first_done_ns + shift < acc->first_done_ns))
        acc->first_done_ns = part->first_done_ns + shift;
    if (part->last_done_ns + shift > acc->last_done_ns)
        acc->last_done_ns = part->last_done_ns + shift;
    return 0;
}

/* ------------------------------------------------------------ staging */

uint8_t *rio__stage_get(struct rio_client *c, size_t n, size_t *cap)
{
    int best = -1;
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < RIO__STAGE_SLOTS; i++)
        if (c->stage[i].buf && c->stage[i].cap >= n &&
            (best < 0 || c->stage[i].cap < c->stage[best].cap))
            best = i;
    if (best >= 0) {
        uint8_t *b = c->stage[best].buf;
        *cap = c->stage[best].cap;
        c->stage[best].buf = NULL;
        c->stage_bytes -= *cap;
        pthread_mutex_unlock(&c->mu);
        return b;
    }
    pthread_mutex_unlock(&c->mu);
    *cap = n;
    return rio__alloc_aligned(4096, n);
}

void rio__stage_put(struct rio_client *c, uint8_t *buf, size_t cap)
{
    pthread_mutex_lock(&c->mu);
    if (c->stage_bytes + cap <= c->o.budget_bytes) {
        for (int i = 0; i < RIO__STAGE_SLOTS; i++) {
            if (!c->stage[i].buf) {
                c->stage[i].buf = buf;
                c->stage[i].cap = cap;
                c->stage_bytes += cap;
                pthread_mutex_unlock(&c->mu);
                return;
            }
        }
    }
    pthread_mutex_unlock(&c->mu);
    rio__free(buf);
}

void rio__stage_drain(struct rio_client *c)
{
    for (int i = 0; i < RIO__STAGE_SLOTS; i++) {
        rio__free(c->stage[i].buf);
        c->stage[i].buf = NULL;
    }
    c->stage_bytes = 0;
}

/*
 * rio_error_detail() for a request that ended without a path to finish it
 * (RIO_ENOPATH, RIO_ERETRIES): the request's last failure (a chunk that
 * kept failing its checksum or came short says so: the paths themselves
 * may have none), then the last error of each path that had one, "last
 * try: checksum mismatch (RIO_ECHECKSUM); path 0: connection refused
 * (ECONNREFUSED); path 1: ...". Caller's thread, mu not held.
 */
void rio__engine_path_detail(struct rio_client *c, int last_err, const char *why)
{
    char buf[480 + RIO__IO_WHY_MAX];
    size_t o = 0;

    buf[0] = '\0';
    if (last_err) {
        int n = snprintf(buf, sizeof(buf), "last try: %s (%s)", rio_strerror(last_err),
                         rio_errname(last_err));
        o = n > 0 ? (size_t)n : 0;
    }
    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; i < c->npaths && o < sizeof(buf); i++) {
        int err = c->paths[i].last_err;
        if (!err)
            continue;
        int n = snprintf(buf + o, sizeof(buf) - o, "%spath %u: %s (%s)", o ? "; " : "", i,
                         rio_strerror(err), rio_errname(err));
        if (n < 0)
            break;
        o += (size_t)n;
    }
    pthread_mutex_unlock(&c->mu);
    if (why && why[0] && o < sizeof(buf))
        snprintf(buf + o, sizeof(buf) - o, "%s%s", o ? "; " : "", why);
    if (buf[0])
        rio__detail("%s", buf);
}

const char *rio__req_why(const struct rio__req *r, int status)
{
    if (!r || !r->why[0])
        return NULL;
    return status == RIO_ERETRIES || status == RIO_ENOPATH || status == r->why_err ? r->why : NULL;
}

void rio__engine_req_detail(struct rio_client *c, int status, int last_err, const char *why)
{
    if (status == RIO_ENOPATH || status == RIO_ERETRIES)
        rio__engine_path_detail(c, last_err, why);
    else if (status == RIO_ECHECKSUM && last_err == RIO__EMD5)
        rio__detail("the object's bytes do not match its ETag, the MD5 of its bytes (of its "
                    "parts' MD5s for an object uploaded in parts: an object railio did not write "
                    "carries no chunk checksums, so the whole object is checked by its ETag); "
                    "where a server's ETags are not MD5s of the bytes (objects it encrypts), "
                    "etag_check=off reads such objects unchecked");
    else if (status == RIO_ECHECKSUM && last_err == RIO__ECRC)
        rio__detail("the object's bytes do not match the checksum of the whole object its store "
                    "keeps (S3's x-amz-checksum-crc64nvme, -crc32c or -crc32: an object railio "
                    "did not write carries no chunk checksums, so it is checked by that); "
                    "etag_check=off reads such objects unchecked");
    else if (status < 0 && why && why[0])
        rio__detail("%s", why); /* what the store answered (a 403's code, ...) */
}
