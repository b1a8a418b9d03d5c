/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/* T_TIMEOUT 60 */
/*
 * Chaos: a seeded, bounded-time property test of the engine's hard
 * invariants. Each round opens a mock:// client with random geometry (paths
 * of unequal rates, depth, chunk size, adapt, budget and its mode) and
 * random probabilistic faults (errors, resets, short reads, bit flips,
 * delays, stalls, late writes, a path going down, failing and slow metadata
 * calls), and a few threads drive random mixes of rio_put (conditional now
 * and then), rio_get (in place and RIO_ATOMIC), rio_get_alloc, rio_batch,
 * readers, writers, rio_put_stream (its source failing now and then),
 * rio_get_stream (its sink stopping now and then) and deletes over keys
 * each thread owns, and PUTs, GETs and readers of keys they all share, with
 * random sizes (0, 1, chunk boundaries +-1, many chunks; tails split into
 * pieces), deadlines and cancel tokens that another thread fires. After
 * every call it checks, against a model of what each key holds:
 *
 * - a GET that succeeds returns exactly the bytes last PUT, and writes
 *   nothing of the caller's buffer past them; a RIO_ATOMIC GET that fails
 *   leaves the buffer untouched; rio_get_alloc gives NULL on error; a reader
 *   hands out only a prefix of the object, a stream's sink the object in
 *   order; a GET or reader of a shared key gives exactly one version ever
 *   PUT, never a mix;
 * - a PUT (or writer, or delete) that fails leaves the previous object intact
 *   and readable (either one, for RIO_EUNKNOWN), read back by a second client
 *   on the same store that has no faults; a conditional PUT whose condition
 *   is false never succeeds; generations only grow; the source is never
 *   written;
 * - a call with a deadline ends within a bound of it (bound_ms);
 * - stats add up (retries by class, bytes, chunks, the paths' bytes),
 *   progress is monotonic but in a call that started over (its object
 *   replaced while read: stats.replans), and never reported after return;
 * - between rounds: every counter is zero, the mock holds no op, no attempt
 *   was submitted with stale state; the client is destroyed with a reader
 *   and a writer open, in bounded time, both then answer RIO_ECLOSED and
 *   nothing of the writer is published; every rio__malloc block is back.
 *
 * CHAOS_SEED=N repeats a run (the seed is printed first and on failure);
 * CHAOS_ROUNDS=N runs more rounds. Outcomes depend on thread timing, the
 * invariants do not.
 */
#include <stdatomic.h>
#include <stdbool.h>

#include "engine_util.h"

#define NTHREADS 3
#define KEYS_PER_THREAD 3
#define OPS_PER_THREAD 70
#define NSHARED 2
#define MAXHIST (NTHREADS * OPS_PER_THREAD)

static uint64_t g_seed = 0xc4a05eedull;
static unsigned g_rounds = 6;

static uint64_t mix64(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);

    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rnd(uint64_t *s, uint64_t n)
{
    return n ? mix64(s) % n : 0;
}

static void print_seed(const char *test)
{
    fprintf(stderr, "%s: repeat with CHAOS_SEED=%" PRIu64 "\n", test, g_seed);
}

__attribute__((constructor)) static void chaos_setup(void)
{
    const char *v = getenv("CHAOS_SEED");

    if (v && *v)
        g_seed = strtoull(v, NULL, 0);
    v = getenv("CHAOS_ROUNDS");
    if (v && *v)
        g_rounds = (unsigned)strtoul(v, NULL, 0);
    t_on_fail(print_seed);
}

/* ------------------------------------------------------------ the model */

/* What a key holds: absent, or size bytes of pattern pseed at generation gen. */
struct kstate {
    int exists;
    uint64_t pseed;
    size_t size;
    uint64_t gen;
};

struct round {
    unsigned no;
    uint64_t seed;
    char name[32];
    struct rio_client *c;  /* with faults */
    struct rio_client *ck; /* the same store, no faults: the checker */
    uint64_t chunk;
    uint32_t op_timeout_ms;
    /* tokens the canceller may fire, under mu */
    pthread_mutex_t mu;
    struct rio_cancel *tokens[NTHREADS];
    atomic_int stop;
    atomic_ullong calls, failures, cancels_fired, split_gets, shared_hits;
    /* Keys every thread writes and reads: every version ever PUT, under mu. */
    struct kstate hist[NSHARED][MAXHIST];
    unsigned nhist[NSHARED];
};

struct worker {
    struct round *r;
    unsigned id;
    uint64_t rng;
    uint64_t next_pseed;
    struct kstate k[KEYS_PER_THREAD];
    char names[KEYS_PER_THREAD][48];
};

static void key_name(struct worker *w, unsigned i, char *out, size_t cap)
{
    snprintf(out, cap, "t%u/k%u", w->id, i);
}

/* A size around the chunk's boundaries, or 0, 1, or several chunks. */
static size_t pick_size(struct worker *w)
{
    uint64_t ch = w->r->chunk;

    switch (rnd(&w->rng, 10)) {
    case 0:
        return 0;
    case 1:
        return 1;
    case 2:
        return (size_t)ch - 1;
    case 3:
        return (size_t)ch;
    case 4:
        return (size_t)ch + 1;
    case 5:
        return (size_t)(2 * ch + rnd(&w->rng, 3)) - 1;
    case 6:
        return (size_t)rnd(&w->rng, ch);
    default:
        return (size_t)(ch * (1 + rnd(&w->rng, 10)) + rnd(&w->rng, 3)) - 1;
    }
}

/* The checker's view of key i must be what the model says; when alt is
 * given (RIO_EUNKNOWN), it may be alt instead, and the model follows. */
static void check_key(struct worker *w, unsigned i, const struct kstate *alt, const char *what,
                      int err)
{
    struct kstate *m = &w->k[i];
    struct rio_desc d = {0};
    void *buf = NULL;
    int64_t ret;
    int s;

    ret = rio_get_alloc(w->r->ck, w->names[i], &buf, NULL);
    s = rio_stat(w->r->ck, w->names[i], &d);
    if (ret == RIO_ENOTFOUND) {
        T_NULL(buf);
        if (m->exists && !(alt && !alt->exists))
            T_FAIL("round %u: %s of %s failed (%s) and the object is gone", w->r->no, what,
                   w->names[i], rio_errname(err));
        if (m->exists)
            *m = *alt;
        T_ERR(s, RIO_ENOTFOUND);
        return;
    }
    if (ret < 0)
        T_FAIL("round %u: %s of %s failed (%s); checker GET: %s", w->r->no, what, w->names[i],
               rio_errname(err), rio_errname((int)ret));
    T_OK(s);
    if (m->exists && (size_t)ret == m->size && t_check_pattern(buf, (size_t)ret, m->pseed) < 0) {
        T_EQ(d.generation, m->gen);
    } else if (alt && alt->exists && (size_t)ret == alt->size &&
               t_check_pattern(buf, (size_t)ret, alt->pseed) < 0) {
        /* The ambiguous change took effect. */
        if (m->exists)
            T_GT(d.generation, m->gen);
        *m = *alt;
        m->gen = d.generation;
    } else {
        T_FAIL("round %u: %s of %s failed (%s) and the key holds %lld bytes that are neither the "
               "old object (%d, %zu bytes) nor the new one",
               w->r->no, what, w->names[i], rio_errname(err), (long long)ret, m->exists, m->size);
    }
    rio_desc_cleanup(&d);
    free(buf);
}

/* ---------------------------------------------------------- call record */

struct pctx {
    atomic_int returned;
    uint64_t last_done;
    uint64_t total;
    /* A report went back or named a smaller total: allowed only in a call
     * that started over (stats.replans, call_end), not otherwise. */
    char restart[96];
};

static void progress_cb(void *arg, uint64_t done, uint64_t total)
{
    struct pctx *p = arg;

    if (atomic_load(&p->returned))
        T_FAIL("progress reported after the call returned (%" PRIu64 "/%" PRIu64 ")", done, total);
    if (done > total)
        T_FAIL("progress %" PRIu64 "/%" PRIu64 " after %" PRIu64 "/%" PRIu64, done, total,
               p->last_done, p->total);
    /* (a batch's total grows as its objects are looked up) */
    if (!p->restart[0] && (done < p->last_done || total < p->total))
        snprintf(p->restart, sizeof(p->restart),
                 "progress %" PRIu64 "/%" PRIu64 " after %" PRIu64 "/%" PRIu64, done, total,
                 p->last_done, p->total);
    p->last_done = done;
    p->total = total;
}

struct callrec {
    struct rio_call call;
    struct rio_stats st;
    struct pctx pc;
    struct rio_cancel *cx;
    uint64_t t0;
};

static void call_begin(struct worker *w, struct callrec *cr)
{
    memset(cr, 0, sizeof(*cr));
    cr->call.stats = &cr->st;
    if (rnd(&w->rng, 3) == 0)
        cr->call.deadline_ms = 20 + (uint32_t)rnd(&w->rng, 400);
    if (rnd(&w->rng, 3) == 0) {
        T_OK(rio_cancel_new(&cr->cx));
        cr->call.cancel = cr->cx;
        pthread_mutex_lock(&w->r->mu);
        w->r->tokens[w->id] = cr->cx;
        pthread_mutex_unlock(&w->r->mu);
    }
    if (rnd(&w->rng, 2)) {
        cr->call.progress = progress_cb;
        cr->call.progress_arg = &cr->pc;
    }
    cr->t0 = t_now_ms();
    atomic_fetch_add(&w->r->calls, 1);
}

/* How long past its deadline a call may run, and how long a client's
 * destroy may take: the fence's bound (op timeout + 1 s, DESIGN.md
 * invariant 2), doubled for a loaded machine, more under sanitizers. */
static uint64_t bound_ms(const struct round *r)
{
    return (r->op_timeout_ms + 1000ull) * (T_SANITIZED ? 6 : 2);
}

/* The call returned ret: its deadline held, its stats add up. */
static void call_end(struct worker *w, struct callrec *cr, int64_t ret, const char *what)
{
    uint64_t took = t_now_ms() - cr->t0, sum = 0;
    uint64_t slack = bound_ms(w->r);

    atomic_store(&cr->pc.returned, 1);
    if (cr->cx) {
        pthread_mutex_lock(&w->r->mu);
        w->r->tokens[w->id] = NULL;
        pthread_mutex_unlock(&w->r->mu);
        rio_cancel_destroy(cr->cx);
        cr->cx = NULL;
    }
    if (ret < 0)
        atomic_fetch_add(&w->r->failures, 1);
    if (cr->call.deadline_ms && took > cr->call.deadline_ms + slack)
        T_FAIL("round %u: %s took %" PRIu64 " ms with a deadline of %u ms (%s)", w->r->no, what,
               took, cr->call.deadline_ms, rio_errname((int)(ret < 0 ? ret : 0)));
    if (cr->pc.restart[0] && !cr->st.replans)
        T_FAIL("round %u: %s: %s, and the call did not start over", w->r->no, what, cr->pc.restart);
    for (unsigned i = 0; i < RIO_CLASS__COUNT; i++)
        sum += cr->st.retries[i];
    T_EQ(cr->st.retries_total, sum);
    T_LE(cr->st.npaths, (unsigned)RIO_MAX_PATHS);
    T_LE(cr->st.elapsed_ns / 1000000u, took + 1);
}

/* --------------------------------------------------------------- checks */

#define SENTINEL 0xA5

/* A GET of key i returned ret into buf (cap bytes, SENTINEL before). */
static void check_get(struct worker *w, unsigned i, const uint8_t *buf, size_t cap, int64_t ret,
                      int atomic, uint64_t expect_gen, const char *what)
{
    struct kstate *m = &w->k[i];

    if (ret >= 0) {
        if (!m->exists)
            T_FAIL("round %u: %s of absent %s returned %lld", w->r->no, what, w->names[i],
                   (long long)ret);
        if ((size_t)ret != m->size)
            T_FAIL("round %u: %s of %s returned %lld, the object has %zu bytes", w->r->no, what,
                   w->names[i], (long long)ret, m->size);
        if (expect_gen && expect_gen != m->gen)
            T_FAIL("round %u: %s of %s expecting generation %" PRIu64 " succeeded at %" PRIu64,
                   w->r->no, what, w->names[i], expect_gen, m->gen);
        int64_t bad = t_check_pattern(buf, m->size, m->pseed);
        if (bad >= 0)
            T_FAIL("round %u: %s of %s (%zu bytes, chunk %" PRIu64 "): wrong byte at %lld",
                   w->r->no, what, w->names[i], m->size, w->r->chunk, (long long)bad);
        T_EQ(t_count_byte(buf + m->size, cap - m->size, SENTINEL), cap - m->size);
        return;
    }
    /* Any failure is allowed (faults); what it may not do is below. */
    if (m->exists && expect_gen == m->gen && ret == RIO_EGENERATION)
        T_FAIL("round %u: %s of %s at its generation %" PRIu64 " failed RIO_EGENERATION", w->r->no,
               what, w->names[i], expect_gen);
    if (atomic && t_count_byte(buf, cap, SENTINEL) != cap)
        T_FAIL("round %u: RIO_ATOMIC %s of %s failed (%s) and wrote into the buffer", w->r->no,
               what, w->names[i], rio_errname((int)ret));
}

/* ------------------------------------------------------------------ ops */

static void op_get(struct worker *w, unsigned i)
{
    struct kstate *m = &w->k[i];
    struct callrec cr;
    size_t cap = m->exists ? m->size : pick_size(w);
    uint64_t eg = 0;
    int atomic = (int)rnd(&w->rng, 2);
    uint8_t *buf;
    int64_t ret;

    switch (rnd(&w->rng, 8)) {
    case 0:
        if (cap)
            cap -= 1 + rnd(&w->rng, cap); /* too small */
        break;
    case 1:
        cap += 1 + rnd(&w->rng, 3 * w->r->chunk);
        break;
    case 2:
        eg = m->exists && rnd(&w->rng, 2) ? m->gen : m->gen + 1000;
        break;
    default:
        cap += rnd(&w->rng, 3);
    }
    buf = t_fill_buf(cap ? cap : 1, SENTINEL);
    call_begin(w, &cr);
    cr.call.flags = atomic ? RIO_ATOMIC : 0;
    cr.call.expect_generation = eg;
    ret = rio_get(w->r->c, w->names[i], buf, cap, &cr.call);
    call_end(w, &cr, ret, "rio_get");
    if (ret >= 0) {
        T_EQ(cr.st.bytes, (uint64_t)ret);
        /* every byte was moved by some path (more with retries) */
        T_GE(t_path_bytes(&cr.st, NULL), (uint64_t)ret);
        T_EQ(cr.st.chunks, ret ? ((uint64_t)ret - 1) / w->r->chunk + 1 : 0);
        if (cr.st.chunks && t_path_ops(&cr.st) > cr.st.chunks && !cr.st.retries_total)
            atomic_fetch_add(&w->r->split_gets, 1); /* the tail was split */
    }
    if (ret >= 0 && eg && eg != m->gen)
        T_FAIL("round %u: rio_get of %s expecting generation %" PRIu64 " (it is %" PRIu64
               ") succeeded",
               w->r->no, w->names[i], eg, m->gen);
    check_get(w, i, buf, cap, ret, atomic, eg, atomic ? "rio_get(RIO_ATOMIC)" : "rio_get");
    free(buf);
}

static void op_get_alloc(struct worker *w, unsigned i)
{
    struct kstate *m = &w->k[i];
    struct callrec cr;
    void *out = (void *)&cr; /* not NULL: an error must set it */
    int64_t ret;

    call_begin(w, &cr);
    ret = rio_get_alloc(w->r->c, w->names[i], &out, &cr.call);
    call_end(w, &cr, ret, "rio_get_alloc");
    if (ret < 0) {
        T_NULL(out);
        return;
    }
    if (!m->exists || (size_t)ret != m->size)
        T_FAIL("round %u: rio_get_alloc of %s returned %lld (model %d, %zu)", w->r->no, w->names[i],
               (long long)ret, m->exists, m->size);
    T_TRUE(out != NULL || ret == 0);
    if (ret)
        T_EQ(t_check_pattern(out, m->size, m->pseed), -1);
    free(out);
}

static void op_put(struct worker *w, unsigned i)
{
    struct kstate nk = {.exists = 1, .pseed = w->next_pseed++, .size = pick_size(w)};
    struct kstate *m = &w->k[i];
    struct rio_desc d = {0};
    struct callrec cr;
    uint8_t *src = t_pattern_buf(nk.size ? nk.size : 1, nk.pseed);
    uint8_t *copy = malloc(nk.size ? nk.size : 1);
    int ret;

    memcpy(copy, src, nk.size ? nk.size : 1);
    call_begin(w, &cr);
    /* Conditional now and then: on the generation the model holds (true
     * unless a fault gets in the way), on another one or on absence. */
    int cond = (int)rnd(&w->rng, 8), holds = 1;
    if (cond == 0) {
        cr.call.flags = RIO_IF_ABSENT;
        holds = !m->exists;
    } else if (cond == 1 && m->exists) {
        cr.call.expect_generation = m->gen + (rnd(&w->rng, 2) ? 0 : 7);
        holds = cr.call.expect_generation == m->gen;
    }
    ret = rio_put(w->r->c, w->names[i], src, nk.size, &cr.call, &d);
    call_end(w, &cr, ret, "rio_put");
    /* The source is never written. */
    T_MEMEQ(src, copy, nk.size ? nk.size : 1);
    if (ret == 0 && !holds)
        T_FAIL("round %u: conditional rio_put of %s succeeded on a false condition (flags %u, "
               "expect %" PRIu64 ", key at %d/%" PRIu64 ")",
               w->r->no, w->names[i], cr.call.flags, cr.call.expect_generation, m->exists, m->gen);
    if (ret == 0) {
        T_EQ(d.size, (uint64_t)nk.size);
        if (m->exists)
            T_GT(d.generation, m->gen);
        nk.gen = d.generation;
        *m = nk;
        T_EQ(cr.st.bytes, (uint64_t)nk.size);
        T_GE(t_path_bytes(&cr.st, NULL), (uint64_t)nk.size);
        if (rnd(&w->rng, 4) == 0)
            check_key(w, i, NULL, "rio_put", 0);
    } else {
        check_key(w, i, ret == RIO_EUNKNOWN ? &nk : NULL, "rio_put", ret);
    }
    rio_desc_cleanup(&d);
    free(src);
    free(copy);
}

static void op_delete(struct worker *w, unsigned i)
{
    struct kstate gone = {0};
    struct kstate *m = &w->k[i];
    int ret = rio_delete(w->r->c, w->names[i]);

    if (ret == 0) {
        if (!m->exists)
            T_FAIL("round %u: rio_delete of absent %s succeeded", w->r->no, w->names[i]);
        *m = gone;
    } else if (ret == RIO_ENOTFOUND && !m->exists) {
        /* as it should */
    } else {
        check_key(w, i, ret == RIO_EUNKNOWN ? &gone : NULL, "rio_delete", ret);
    }
}

static void op_batch(struct worker *w)
{
    struct rio_op ops[KEYS_PER_THREAD];
    struct kstate nk[KEYS_PER_THREAD];
    uint8_t *bufs[KEYS_PER_THREAD];
    size_t caps[KEYS_PER_THREAD];
    unsigned n = 1 + (unsigned)rnd(&w->rng, KEYS_PER_THREAD), ok = 0;
    struct callrec cr;
    int ret;

    for (unsigned j = 0; j < n; j++) {
        struct kstate *m = &w->k[j];
        memset(&ops[j], 0, sizeof(ops[j]));
        ops[j].key = w->names[j];
        ops[j].result = 12345;
        if (rnd(&w->rng, 2)) {
            nk[j] = (struct kstate){.exists = 1, .pseed = w->next_pseed++, .size = pick_size(w)};
            ops[j].type = RIO_OP_PUT;
            bufs[j] = t_pattern_buf(nk[j].size ? nk[j].size : 1, nk[j].pseed);
            ops[j].buf = bufs[j];
            ops[j].len = nk[j].size;
        } else {
            ops[j].type = RIO_OP_GET;
            caps[j] = (m->exists ? m->size : 0) + rnd(&w->rng, 2 * w->r->chunk);
            bufs[j] = t_fill_buf(caps[j] ? caps[j] : 1, SENTINEL);
            ops[j].buf = bufs[j];
            ops[j].len = caps[j];
        }
    }
    int atomic = (int)rnd(&w->rng, 2);
    call_begin(w, &cr);
    cr.call.flags = atomic ? RIO_ATOMIC : 0;
    ret = rio_batch(w->r->c, ops, n, &cr.call);
    call_end(w, &cr, ret, "rio_batch");
    for (unsigned j = 0; j < n; j++) {
        struct kstate *m = &w->k[j];
        int64_t res = ret < 0 ? -1 : ops[j].result;

        if (ret < 0) {
            /* The batch did not start: nothing ran. */
            if (ops[j].type == RIO_OP_PUT)
                check_key(w, j, NULL, "rio_batch PUT (batch refused)", ret);
        } else if (ops[j].type == RIO_OP_PUT) {
            T_NE(res, 12345);
            if (res == 0) {
                if (m->exists)
                    T_GT(ops[j].generation, m->gen);
                nk[j].gen = ops[j].generation;
                *m = nk[j];
                ok++;
            } else {
                T_LT(res, 0);
                check_key(w, j, res == RIO_EUNKNOWN ? &nk[j] : NULL, "rio_batch PUT", (int)res);
            }
        } else {
            T_NE(res, 12345);
            if (res >= 0) {
                ok++;
                T_EQ(ops[j].generation, m->gen);
            }
            check_get(w, j, bufs[j], caps[j], res, atomic, 0, "rio_batch GET");
        }
        free(bufs[j]);
    }
    if (ret >= 0)
        T_EQ((unsigned)ret, ok);
}

static void op_reader(struct worker *w, unsigned i)
{
    struct kstate *m = &w->k[i];
    struct rio_reader *rd = NULL;
    struct callrec cr;
    uint64_t off = 0, got = 0;
    size_t piece = 1 + (size_t)rnd(&w->rng, 3 * w->r->chunk);
    uint8_t *buf = malloc(piece);
    int early = rnd(&w->rng, 4) == 0, ret, err = 0;
    int64_t n;

    if (m->exists && rnd(&w->rng, 2))
        off = rnd(&w->rng, m->size + 1);
    call_begin(w, &cr);
    cr.call.progress = NULL; /* readers report none */
    if (off)
        ret =
            rio_reader_open_at(w->r->c, w->names[i], off, (unsigned)rnd(&w->rng, 5), &cr.call, &rd);
    else
        ret = rio_reader_open(w->r->c, w->names[i], (unsigned)rnd(&w->rng, 5), &cr.call, &rd);
    if (ret < 0) {
        T_NULL(rd);
        call_end(w, &cr, ret, "rio_reader_open");
        free(buf);
        return;
    }
    if (!m->exists)
        T_FAIL("round %u: reader of absent %s opened", w->r->no, w->names[i]);
    for (;;) {
        if (early && got > 0)
            break;
        n = rio_reader_read(rd, buf, piece);
        if (n < 0) {
            err = (int)n;
            T_EQ(rio_reader_read(rd, buf, piece), n); /* the same error again */
            break;
        }
        if (n == 0)
            break;
        T_LE((uint64_t)n, (uint64_t)piece);
        if (off + got + (uint64_t)n > m->size)
            T_FAIL("round %u: reader of %s handed out %" PRIu64 " bytes past its %zu", w->r->no,
                   w->names[i], off + got + (uint64_t)n, m->size);
        int64_t bad = t_check_pattern_at(buf, (size_t)n, m->pseed, off + got);
        if (bad >= 0)
            T_FAIL("round %u: reader of %s: wrong byte at %" PRIu64, w->r->no, w->names[i],
                   off + got + (uint64_t)bad);
        got += (uint64_t)n;
    }
    ret = rio_reader_close(rd);
    call_end(w, &cr, ret, "rio_reader");
    if (err)
        T_EQ(ret, err);
    else if (!early || off + got == m->size)
        T_TRUE(ret == 0 || (early && ret == RIO_ECANCELED));
    if (!err && !early)
        T_EQ(off + got, (uint64_t)m->size);
    if (ret == 0)
        T_EQ(off + got, (uint64_t)m->size);
    free(buf);
}

/* rio_put_stream's source: pieces of random sizes, or an error at a
 * chosen byte. */
struct fill_src {
    const uint8_t *src;
    size_t n, at;
    size_t fail_at; /* (size_t)-1: never */
    uint64_t rng;
};

static int64_t fill_cb(void *arg, void *buf, size_t cap)
{
    struct fill_src *f = arg;
    size_t k = 1 + (size_t)rnd(&f->rng, cap);

    if (f->at >= f->fail_at)
        return -EIO;
    if (k > f->n - f->at)
        k = f->n - f->at;
    memcpy(buf, f->src + f->at, k);
    f->at += k;
    return (int64_t)k;
}

static void op_put_stream(struct worker *w, unsigned i)
{
    struct kstate nk = {.exists = 1, .pseed = w->next_pseed++, .size = pick_size(w)};
    struct rio_desc d = {0};
    struct callrec cr;
    uint8_t *src = t_pattern_buf(nk.size ? nk.size : 1, nk.pseed);
    struct fill_src f = {.src = src, .n = nk.size, .fail_at = (size_t)-1, .rng = mix64(&w->rng)};
    int ret;

    if (rnd(&w->rng, 4) == 0)
        f.fail_at = (size_t)rnd(&w->rng, nk.size + 1);
    call_begin(w, &cr);
    cr.call.progress = NULL;
    cr.call.deadline_ms = 0;
    ret = rio_put_stream(w->r->c, w->names[i], rnd(&w->rng, 2) ? nk.size : RIO_SIZE_UNKNOWN,
                         (unsigned)rnd(&w->rng, 5), fill_cb, &f, &cr.call, &d);
    call_end(w, &cr, ret, "rio_put_stream");
    if (f.fail_at != (size_t)-1 && f.fail_at < nk.size)
        T_LT(ret, 0); /* the source failed before its end */
    if (ret == 0) {
        T_EQ(d.size, (uint64_t)nk.size);
        if (w->k[i].exists)
            T_GT(d.generation, w->k[i].gen);
        nk.gen = d.generation;
        w->k[i] = nk;
    } else {
        bool whole = f.fail_at == (size_t)-1 || f.fail_at >= nk.size;
        check_key(w, i, ret == RIO_EUNKNOWN && whole ? &nk : NULL, "rio_put_stream", ret);
    }
    rio_desc_cleanup(&d);
    free(src);
}

/* rio_get_stream's sink: bytes in order, each the object's; stops now and
 * then (a positive stop is RIO_ECANCELED, a negative one its error). */
struct sink {
    struct worker *w;
    unsigned i;
    uint64_t off, stop_at;
    int stop;
};

static int sink_cb(void *arg, const void *data, size_t len)
{
    struct sink *k = arg;
    const struct kstate *m = &k->w->k[k->i];

    if (k->off + len > m->size || t_check_pattern_at(data, len, m->pseed, k->off) >= 0)
        T_FAIL("round %u: rio_get_stream of %s handed %zu bytes at %" PRIu64
               " that are not the object's (%zu bytes)",
               k->w->r->no, k->w->names[k->i], len, k->off, m->size);
    k->off += len;
    return k->off >= k->stop_at ? k->stop : 0;
}

static void op_get_stream(struct worker *w, unsigned i)
{
    struct kstate *m = &w->k[i];
    struct sink k = {.w = w, .i = i, .stop_at = UINT64_MAX};
    struct callrec cr;
    uint64_t off = m->exists && rnd(&w->rng, 3) == 0 ? rnd(&w->rng, m->size + 1) : 0;
    int64_t ret;

    if (rnd(&w->rng, 4) == 0) {
        k.stop_at = rnd(&w->rng, m->size + 1);
        k.stop = rnd(&w->rng, 2) ? 1 : -EPIPE;
    }
    k.off = off;
    call_begin(w, &cr);
    cr.call.progress = NULL;
    ret = off ? rio_get_stream_at(w->r->c, w->names[i], off, (unsigned)rnd(&w->rng, 5), sink_cb, &k,
                                  &cr.call)
              : rio_get_stream(w->r->c, w->names[i], (unsigned)rnd(&w->rng, 5), sink_cb, &k,
                               &cr.call);
    call_end(w, &cr, ret, "rio_get_stream");
    if (ret >= 0) {
        if (!m->exists)
            T_FAIL("round %u: rio_get_stream of absent %s returned %lld", w->r->no, w->names[i],
                   (long long)ret);
        T_EQ((uint64_t)ret, m->size - off);
        T_EQ(k.off, (uint64_t)m->size);
    } else if (k.stop && k.off >= k.stop_at && k.off > off) {
        T_ERR(ret, k.stop < 0 ? k.stop : RIO_ECANCELED);
    }
}

static void op_writer(struct worker *w, unsigned i)
{
    struct kstate nk = {.exists = 1, .pseed = w->next_pseed++, .size = pick_size(w)};
    struct rio_writer *wr = NULL;
    struct rio_desc d = {0};
    struct callrec cr;
    uint8_t *src = t_pattern_buf(nk.size ? nk.size : 1, nk.pseed);
    int how = (int)rnd(&w->rng, 8); /* 0: abort, 1: short of its size, 2: unknown size */
    uint64_t declared = how == 2 ? RIO_SIZE_UNKNOWN : nk.size;
    size_t done = 0, end = how == 1 && nk.size ? nk.size - 1 : nk.size;
    int ret;

    call_begin(w, &cr);
    cr.call.progress = NULL;
    cr.call.deadline_ms = 0; /* the stream's own pace is the caller's */
    ret = rio_writer_open(w->r->c, w->names[i], declared, (unsigned)rnd(&w->rng, 5), &cr.call, &wr);
    if (ret < 0) {
        T_NULL(wr);
        call_end(w, &cr, ret, "rio_writer_open");
        check_key(w, i, NULL, "rio_writer_open", ret);
        free(src);
        return;
    }
    while (done < end && ret == 0) {
        size_t n = 1 + (size_t)rnd(&w->rng, 2 * w->r->chunk);
        if (n > end - done)
            n = end - done;
        ret = rio_writer_write(wr, src + done, n);
        done += n;
    }
    if (how == 0) {
        rio_writer_abort(wr);
        call_end(w, &cr, RIO_ECANCELED, "rio_writer_abort");
        check_key(w, i, NULL, "rio_writer_abort", RIO_ECANCELED);
        free(src);
        return;
    }
    int wret = ret;
    ret = rio_writer_close(wr, &d);
    call_end(w, &cr, ret, "rio_writer_close");
    if (wret < 0)
        T_LT(ret, 0);
    if (how == 1 && nk.size)
        T_LT(ret, 0);
    if (ret == 0) {
        T_EQ(d.size, (uint64_t)nk.size);
        if (w->k[i].exists)
            T_GT(d.generation, w->k[i].gen);
        nk.gen = d.generation;
        w->k[i] = nk;
    } else {
        check_key(w, i, ret == RIO_EUNKNOWN && how != 1 ? &nk : NULL, "rio_writer_close", ret);
    }
    rio_desc_cleanup(&d);
    free(src);
}

/* ------------------------------------------------------ shared keys */

/*
 * Keys all threads PUT and GET at once: a GET that succeeds returns exactly
 * one version ever PUT (never a mix of two generations, never a torn one),
 * whole; a reader hands out a prefix of one version.
 */
static void shared_name(unsigned i, char *out, size_t cap)
{
    snprintf(out, cap, "shared/%u", i);
}

/* Whether n bytes at buf (from offset off) are a piece of some version of
 * shared key i that has size bytes in all (size UINT64_MAX: any size). */
static bool shared_match(struct round *r, unsigned i, const uint8_t *buf, uint64_t off, size_t n,
                         uint64_t size)
{
    bool ok = false;

    pthread_mutex_lock(&r->mu);
    for (unsigned v = 0; v < r->nhist[i] && !ok; v++) {
        const struct kstate *k = &r->hist[i][v];
        if ((size != UINT64_MAX && k->size != size) || off + n > k->size)
            continue;
        ok = t_check_pattern_at(buf, n, k->pseed, off) < 0;
    }
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static void shared_op(struct worker *w)
{
    struct round *r = w->r;
    unsigned i = (unsigned)rnd(&w->rng, NSHARED);
    char key[32];
    struct callrec cr;

    shared_name(i, key, sizeof(key));
    /* (no progress check: a GET planned again, when a PUT replaced the key,
     * reports the new run's figures from 0) */
    switch (rnd(&w->rng, 4)) {
    case 0: {
        struct kstate nk = {.exists = 1, .pseed = w->next_pseed++, .size = pick_size(w)};
        uint8_t *src = t_pattern_buf(nk.size ? nk.size : 1, nk.pseed);
        pthread_mutex_lock(&r->mu);
        r->hist[i][r->nhist[i]++] = nk; /* a version from the moment it may land */
        pthread_mutex_unlock(&r->mu);
        call_begin(w, &cr);
        cr.call.progress = NULL;
        int ret = rio_put(r->c, key, src, nk.size, &cr.call, NULL);
        call_end(w, &cr, ret, "shared rio_put");
        free(src);
        break;
    }
    case 1:
    case 2: {
        int atomic = (int)rnd(&w->rng, 2);
        size_t cap = 12 * r->chunk;
        uint8_t *buf = t_fill_buf(cap, SENTINEL);
        call_begin(w, &cr);
        cr.call.progress = NULL;
        cr.call.flags = atomic ? RIO_ATOMIC : 0;
        int64_t ret = rio_get(r->c, key, buf, cap, &cr.call);
        call_end(w, &cr, ret, "shared rio_get");
        if (ret >= 0) {
            if (!shared_match(r, i, buf, 0, (size_t)ret, (uint64_t)ret))
                T_FAIL("round %u: shared rio_get of %s returned %lld bytes that are no version "
                       "ever PUT",
                       r->no, key, (long long)ret);
            /* In place, a run that a PUT cut short (and that was planned
             * again) may have landed bytes past the size read in the end;
             * RIO_ATOMIC copies only what it returns. */
            if (atomic)
                T_EQ(t_count_byte(buf + ret, cap - (size_t)ret, SENTINEL), cap - (size_t)ret);
            atomic_fetch_add(&r->shared_hits, 1);
        } else if (atomic && t_count_byte(buf, cap, SENTINEL) != cap) {
            T_FAIL("round %u: RIO_ATOMIC shared rio_get of %s failed (%s) and wrote into the "
                   "buffer",
                   r->no, key, rio_errname((int)ret));
        }
        free(buf);
        break;
    }
    default: {
        struct rio_reader *rd = NULL;
        size_t piece = 1 + (size_t)rnd(&w->rng, 2 * r->chunk);
        uint8_t *all = malloc(12 * r->chunk + piece), *p = all;
        int64_t n = 0;
        call_begin(w, &cr);
        cr.call.progress = NULL;
        int ret = rio_reader_open(r->c, key, 0, &cr.call, &rd);
        if (ret < 0) {
            call_end(w, &cr, ret, "shared rio_reader_open");
            free(all);
            break;
        }
        const struct rio_desc *d = rio_reader_desc(rd);
        uint64_t size = d->size;
        while ((n = rio_reader_read(rd, p, piece)) > 0) {
            p += n;
            T_LE((uint64_t)(p - all), size);
        }
        ret = rio_reader_close(rd);
        call_end(w, &cr, ret, "shared reader");
        if ((size_t)(p - all) && !shared_match(r, i, all, 0, (size_t)(p - all), size))
            T_FAIL("round %u: shared reader of %s handed out %zu bytes that are no version", r->no,
                   key, (size_t)(p - all));
        if (ret == 0)
            T_EQ((uint64_t)(p - all), size);
        free(all);
    }
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    for (unsigned n = 0; n < OPS_PER_THREAD; n++) {
        unsigned i = (unsigned)rnd(&w->rng, KEYS_PER_THREAD);

        switch (rnd(&w->rng, 20)) {
        case 16:
        case 17:
        case 18:
        case 19:
            shared_op(w);
            break;
        case 0:
        case 1:
        case 2:
        case 3:
            op_put(w, i);
            break;
        case 4:
        case 5:
        case 6:
        case 7:
            op_get(w, i);
            break;
        case 8:
            op_get_alloc(w, i);
            break;
        case 9:
        case 10:
            op_batch(w);
            break;
        case 11:
        case 12:
            op_reader(w, i);
            break;
        case 13:
            op_writer(w, i);
            break;
        case 14:
            if (rnd(&w->rng, 2))
                op_put_stream(w, i);
            else
                op_get_stream(w, i);
            break;
        default:
            op_delete(w, i);
        }
    }
    return NULL;
}

/* Fires a random live token now and then. */
static void *canceller_main(void *arg)
{
    struct round *r = arg;
    uint64_t rng = r->seed ^ 0xcafe;

    while (!atomic_load(&r->stop)) {
        t_sleep_ms((unsigned)rnd(&rng, 4));
        pthread_mutex_lock(&r->mu);
        struct rio_cancel *cx = r->tokens[rnd(&rng, NTHREADS)];
        if (cx && rnd(&rng, 4) == 0) {
            rio_cancel_fire(cx);
            atomic_fetch_add(&r->cancels_fired, 1);
        }
        pthread_mutex_unlock(&r->mu);
    }
    return NULL;
}

/* ---------------------------------------------------------------- faults */

static void add_fault(struct round *r, uint64_t *rng, int kind, int op)
{
    struct rio_mock_fault f = {.kind = kind, .op = op, .path = -1, .chunk = -1};
    static const int errs[] = {RIO_ESERVER,   -ECONNRESET, -ETIMEDOUT,
                               RIO_ETHROTTLE, -EIO,        RIO_EUNKNOWN};

    f.probability = 0.005 + (double)rnd(rng, 40) / 1000.0;
    switch (kind) {
    case RIO_MOCK_ERROR:
        f.error = errs[rnd(rng, 5)];
        break;
    case RIO_MOCK_META_ERROR:
        f.error = errs[rnd(rng, 6)];
        if (rnd(rng, 2))
            f.delay_ms = (uint32_t)rnd(rng, 30);
        break;
    case RIO_MOCK_SHORT:
        f.after_bytes = rnd(rng, r->chunk);
        break;
    case RIO_MOCK_DISCONNECT:
        f.after_bytes = rnd(rng, r->chunk);
        f.down_ms = 10 + (uint32_t)rnd(rng, 150);
        f.probability /= 4;
        break;
    case RIO_MOCK_DELAY:
        f.delay_ms = 1 + (uint32_t)rnd(rng, 40);
        break;
    case RIO_MOCK_STALL:
        f.probability /= 8;
        break;
    case RIO_MOCK_LATE:
        f.delay_ms = 1 + (uint32_t)rnd(rng, 20);
        f.probability /= 8;
        break;
    default:
        break;
    }
    if (f.probability <= 0)
        f.probability = 0.001;
    T_OK(rio_mock_fault_add(r->c, &f));
}

static void add_faults(struct round *r, uint64_t *rng)
{
    static const int data_kinds[] = {RIO_MOCK_ERROR,      RIO_MOCK_SHORT, RIO_MOCK_BITFLIP,
                                     RIO_MOCK_DISCONNECT, RIO_MOCK_DELAY, RIO_MOCK_STALL,
                                     RIO_MOCK_LATE};
    static const int meta_ops[] = {RIO_MOCK_OP_LOOKUP, RIO_MOCK_OP_PUT_OPEN, RIO_MOCK_OP_PUT_COMMIT,
                                   RIO_MOCK_OP_REMOVE};
    unsigned n = 2 + (unsigned)rnd(rng, 6);

    for (unsigned j = 0; j < n; j++) {
        int kind = data_kinds[rnd(rng, 7)];
        static const int dops[] = {0, RIO_MOCK_OP_READ, RIO_MOCK_OP_WRITE};
        add_fault(r, rng, kind, dops[rnd(rng, 3)]);
    }
    n = (unsigned)rnd(rng, 3);
    for (unsigned j = 0; j < n; j++)
        add_fault(r, rng, RIO_MOCK_META_ERROR, meta_ops[rnd(rng, 4)]);
    if (rnd(rng, 2)) {
        struct rio_mock_fault f = {.kind = RIO_MOCK_DELAY,
                                   .op = RIO_MOCK_OP_PUT_COMMIT,
                                   .path = -1,
                                   .chunk = -1,
                                   .delay_ms = 1 + (uint32_t)rnd(rng, 20),
                                   .probability = 0.1};
        T_OK(rio_mock_fault_add(r->c, &f));
    }
}

/* ----------------------------------------------------------------- round */

static void run_round(unsigned no, uint64_t seed)
{
    static const uint64_t chunks[] = {4096, 5000, 8192, 16384, 65536, 131072, 200000, 266240};
    struct round r;
    struct rio_options o;
    struct worker *w = calloc(NTHREADS, sizeof(*w));
    pthread_t th[NTHREADS], canc;
    uint64_t rng = seed;
    int64_t alloc0;
    char url[192];
    unsigned paths = 1 + (unsigned)rnd(&rng, 4);

    memset(&r, 0, sizeof(r));
    r.no = no;
    r.seed = seed;
    pthread_mutex_init(&r.mu, NULL);
    snprintf(r.name, sizeof(r.name), "chaos%u", no);
    eu_opts(&o);
    o.chunk_size = r.chunk = chunks[rnd(&rng, 8)];
    o.depth = 1 + (unsigned)rnd(&rng, 4);
    if (r.chunk >= 128 * EU_KIB && paths == 1)
        paths = 2 + (unsigned)rnd(&rng, 3); /* room for pieces of 64 KiB: a split tail */
    o.retry_attempts = 2 + (unsigned)rnd(&rng, 4);
    o.backoff_base_ms = 1;
    o.backoff_cap_ms = 20;
    o.cooldown_base_ms = 10;
    o.cooldown_cap_ms = 100;
    o.op_timeout_ms = r.op_timeout_ms = 150 + (uint32_t)rnd(&rng, 200);
    o.adapt = rnd(&rng, 2) ? 1 : -1;
    o.seed = seed | 1;
    if (rnd(&rng, 4) == 0)
        o.budget_bytes = r.chunk * (2 + rnd(&rng, 8));
    if (rnd(&rng, 4) == 0)
        o.budget_mode = RIO_BUDGET_FAIL; /* RIO_EBUSY when others fill it */
    {
        /* Unequal paths, so that the tail is split. */
        static const char *const rates[] = {"0", "400M", "100M", "40M"};
        char rl[48] = "";
        for (unsigned i = 0; i < paths; i++)
            snprintf(rl + strlen(rl), sizeof(rl) - strlen(rl), "%s%s", i ? "," : "",
                     rates[rnd(&rng, 4)]);
        snprintf(url, sizeof(url), "mock://%s?paths=%u&lat=%uus&rate=%s", r.name, paths,
                 (unsigned)rnd(&rng, 300), rl);
    }
    printf("round %u: %s seed %" PRIu64 " budget_mode %d paths %u depth %u chunk %" PRIu64
           " op_timeout %u adapt %d"
           " budget %" PRIu64 "\n",
           no, url, seed, o.budget_mode, paths, o.depth, r.chunk, o.op_timeout_ms, o.adapt,
           o.budget_bytes);
    fflush(stdout);

    alloc0 = t_alloc_now();
    r.c = t__client_new(url, &o, __FILE__, __LINE__);
    snprintf(url, sizeof(url), "mock://%s", r.name);
    {
        struct rio_options ok;
        eu_opts(&ok);
        r.ck = t__client_new(url, &ok, __FILE__, __LINE__);
    }
    add_faults(&r, &rng);

    for (unsigned t = 0; t < NTHREADS; t++) {
        w[t].r = &r;
        w[t].id = t;
        w[t].rng = seed * 31 + t + 1;
        w[t].next_pseed = (seed << 8) + ((uint64_t)t << 40) + 1;
        for (unsigned i = 0; i < KEYS_PER_THREAD; i++)
            key_name(&w[t], i, w[t].names[i], sizeof(w[t].names[i]));
    }
    T_EQ(pthread_create(&canc, NULL, canceller_main, &r), 0);
    for (unsigned t = 0; t < NTHREADS; t++)
        T_EQ(pthread_create(&th[t], NULL, worker_main, &w[t]), 0);
    for (unsigned t = 0; t < NTHREADS; t++)
        T_EQ(pthread_join(th[t], NULL), 0);
    atomic_store(&r.stop, 1);
    T_EQ(pthread_join(canc, NULL), 0);

    /* Every key as the model says, read by the faulty client once its faults
     * are gone and by the checker. */
    rio_mock_faults_clear(r.c);
    rio_mock_heal(r.c);
    for (unsigned t = 0; t < NTHREADS; t++)
        for (unsigned i = 0; i < KEYS_PER_THREAD; i++) {
            check_key(&w[t], i, NULL, "final check", 0);
            if (w[t].k[i].exists)
                eu_get_check(r.c, w[t].names[i], w[t].k[i].size, w[t].k[i].pseed, NULL);
        }
    printf("round %u: %llu calls, %llu failed, %llu cancels fired, %llu split GETs, %" PRIu64
           " faults fired\n",
           no, (unsigned long long)r.calls, (unsigned long long)r.failures,
           (unsigned long long)r.cancels_fired, (unsigned long long)r.split_gets,
           eu_faults_fired(r.c));
    fflush(stdout);

    eu_wait_idle(r.c, 3000);
    eu_idle(r.ck);

    /* The client goes with a reader and a writer still open, faults back
     * on: both are fenced and invalidated (RIO_ECLOSED), nothing of the
     * writer is published. */
    struct rio_reader *rd = NULL;
    struct rio_writer *wr = NULL;
    struct worker *w0 = &w[0];
    unsigned ki = (unsigned)rnd(&rng, KEYS_PER_THREAD);
    uint8_t tmp[100];
    add_faults(&r, &rng);
    if (w0->k[ki].exists && rio_reader_open(r.c, w0->names[ki], 0, NULL, &rd) == 0)
        (void)rio_reader_read(rd, tmp, sizeof(tmp));
    if (rio_writer_open(r.c, w0->names[ki], RIO_SIZE_UNKNOWN, 0, NULL, &wr) == 0) {
        uint8_t *junk = t_pattern_buf(3 * r.chunk, 0xdead);
        (void)rio_writer_write(wr, junk, 3 * r.chunk);
        free(junk);
    }
    uint64_t t0 = t_now_ms();
    rio_client_destroy(r.c);
    T_LE(t_now_ms() - t0, bound_ms(&r));
    if (rd) {
        T_ERR(rio_reader_read(rd, tmp, sizeof(tmp)), RIO_ECLOSED);
        T_ERR(rio_reader_close(rd), RIO_ECLOSED);
    }
    if (wr) {
        T_ERR(rio_writer_write(wr, tmp, sizeof(tmp)), RIO_ECLOSED);
        T_ERR(rio_writer_close(wr, NULL), RIO_ECLOSED);
    }
    check_key(w0, ki, NULL, "a writer left open at destroy", 0);

    for (unsigned t = 0; t < NTHREADS; t++)
        for (unsigned i = 0; i < KEYS_PER_THREAD; i++)
            rio_delete(r.ck, w[t].names[i]);
    for (unsigned i = 0; i < NSHARED; i++) {
        char key[32];
        shared_name(i, key, sizeof(key));
        rio_delete(r.ck, key);
    }
    rio_client_destroy(r.ck);
    T_EQ(rio__alloc_outstanding(), alloc0);
    pthread_mutex_destroy(&r.mu);
    free(w);
}

TEST(chaos_rounds)
{
    uint64_t s = g_seed;

    printf("chaos: seed %" PRIu64 ", %u rounds (CHAOS_SEED, CHAOS_ROUNDS)\n", g_seed, g_rounds);
    for (unsigned no = 0; no < g_rounds; no++)
        run_round(no, mix64(&s));
}
