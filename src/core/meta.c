/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Metadata ops (lookup, put_open, put_commit, remove, list, exists) with the engine's
 * retry: one place decides which failures go again, how often and how long
 * to wait, for every transport, as it does for chunks (DESIGN.md, invariant
 * 4). A transport answers each try once; it returns a retryable class only
 * when trying again is safe (transport.h). The tries count against the
 * client's retry_attempts (a throttle against four times as many), wait an
 * exponential backoff with equal jitter between the client's backoff base
 * and cap, and stop at the call's deadline or its cancel token. Each failed
 * try is counted in the call's retries by class (rio_stats.retries).
 */
#include <errno.h>
#include <string.h>
#include <time.h>

#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"

/* A backoff is slept in slices this long, so a cancel ends it soon. */
#define META_SLICE_NS 10000000ull
/* A metadata op's progress callback runs this often while it waits, as a
 * transfer's does (engine.c). */
#define META_TICK_NS 100000000ull

void rio__meta_for_call(struct rio__meta *m, struct rio__call *call)
{
    m->deadline_ns = call->deadline_ns;
    m->cancel = call->cancel;
    m->call = call;
    m->put_if = call->put_if;
    m->retries = NULL;
    m->progress = NULL;
}

void rio__meta_for_client(struct rio__meta *m, struct rio_client *c)
{
    uint64_t ms = c->o.deadline_ms;
    m->deadline_ns = ms == RIO_DEADLINE_NONE ? UINT64_MAX : rio__now_ns() + ms * 1000000ull;
    m->cancel = NULL;
    m->call = NULL;
    m->put_if = 0;
    m->retries = NULL;
    m->progress = NULL;
}

static bool meta_cancelled(const struct rio__meta *m)
{
    return m->cancel && atomic_load(&m->cancel->fired);
}

/* Sleep until ns, or less when the deadline comes first or the call is
 * cancelled. Returns 0, RIO_EDEADLINE or RIO_ECANCELED. */
static int meta_sleep_until(const struct rio__meta *m, uint64_t until)
{
    for (;;) {
        if (meta_cancelled(m))
            return RIO_ECANCELED;
        uint64_t now = rio__now_ns();
        if (now >= until)
            return 0;
        if (now >= m->deadline_ns)
            return RIO_EDEADLINE;
        uint64_t ns = until - now;
        if (ns > META_SLICE_NS)
            ns = META_SLICE_NS;
        struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                              .tv_nsec = (long)(ns % 1000000000ull)};
        while (nanosleep(&ts, &ts) == -1 && errno == EINTR)
            ;
        rio__meta_tick();
    }
}

/* Count a failed try in the call's retries (the engine's books, under mu);
 * returns its class. */
static int meta_count(struct rio_client *c, const struct rio__meta *m, int err)
{
    int cls = rio__err_class(err);
    if (m->call) {
        pthread_mutex_lock(&c->mu);
        m->call->retries[cls]++;
        pthread_mutex_unlock(&c->mu);
    } else if (m->retries) {
        m->retries[cls]++;
    }
    return cls;
}

/* The tries of a metadata op are spent: the detail says how often and with
 * what it last failed (the code alone does not say it was tried again). */
static int meta_spent(int err, unsigned n)
{
    rio__detail("%s (%s), %u tr%s", rio_strerror(err), rio_errname(err), n, n == 1 ? "y" : "ies");
    return err;
}

/*
 * Try n (1-based) failed with err: count it, then either wait the backoff
 * before the next try (returns 0) or give up (returns what the op returns:
 * err when it is not retryable or its tries are spent, RIO_EDEADLINE or
 * RIO_ECANCELED when those end it first). *throttles counts RIO_ETHROTTLE
 * answers, which get four times the patience (as a chunk's do).
 */
static int meta_failed(struct rio_client *c, const struct rio__meta *m, int err, unsigned *tries,
                       unsigned *throttles)
{
    int cls = meta_count(c, m, err);
    unsigned n;

    if (!rio__class_is_retryable(cls))
        return err;
    if (cls == RIO_CLASS_THROTTLE) {
        n = ++*throttles;
        if (n >= 4ull * c->o.retry_attempts)
            return meta_spent(err, n);
    } else {
        n = ++*tries;
        if (n >= c->o.retry_attempts)
            return meta_spent(err, n);
    }
    pthread_mutex_lock(&c->mu);
    uint64_t ns = rio__backoff_ns_locked(c, n);
    pthread_mutex_unlock(&c->mu);
    uint64_t now = rio__now_ns();
    /* A wait that would end past the deadline is not worth starting. */
    if (m->deadline_ns != UINT64_MAX && now + ns >= m->deadline_ns)
        return RIO_EDEADLINE;
    return meta_sleep_until(m, now + ns);
}

/* Whether a call may start (another) try of a metadata op. */
static int meta_may_try(const struct rio__meta *m)
{
    if (meta_cancelled(m))
        return RIO_ECANCELED;
    if (m->deadline_ns != UINT64_MAX && rio__now_ns() >= m->deadline_ns)
        return RIO_EDEADLINE;
    return 0;
}

/* One metadata op and its arguments, so one loop retries them all. */
enum {
    META_LOOKUP,
    META_PUT_OPEN,
    META_REMOVE,
    META_REMOVE_IF,
    META_LIST,
    META_EXISTS,
    META_PARTS_OF,
    META_PARTS_EVEN
};

struct meta_op {
    int kind;
    const char *key;
    struct rio_desc *out;                  /* lookup */
    int64_t *mtime_ns;                     /* lookup: NULL, or the mtime wanted */
    uint64_t max_size;                     /* lookup: the largest object taken whole */
    uint64_t size, chunk_size;             /* put_open */
    void **upload;                         /* put_open */
    const struct rio_list_args *list_args; /* list */
    struct rio_list_page *page;            /* list */
    const char *const *keys;               /* exists */
    unsigned nkeys;                        /* exists */
    uint8_t *exists;                       /* exists */
    uint64_t gen;                          /* remove_if */
    const struct rio_desc *desc;           /* parts_of */
    uint64_t *part;                        /* parts_of */
    uint32_t *nparts;                      /* parts_of */
    char *want;                            /* parts_of: 48 bytes */
    uint64_t part_size;                    /* parts_even */
    uint32_t part_count;                   /* parts_even */
};

static int meta_once(struct rio_client *c, const struct meta_op *op)
{
    switch (op->kind) {
    case META_LOOKUP:
        if (op->mtime_ns)
            return rio__t_lookup_mtime(c->t, op->key, op->out, op->mtime_ns);
        if (op->max_size != UINT64_MAX)
            return rio__t_lookup_within(c->t, op->key, op->max_size, op->out);
        return rio__t_lookup(c->t, op->key, op->out);
    case META_PUT_OPEN:
        return rio__t_put_open(c->t, op->key, op->size, op->chunk_size, op->upload);
    case META_LIST: {
        /* Each try starts from an empty page, and a failed one leaves
         * nothing behind (what a transport left in it is freed). */
        memset(op->page, 0, sizeof(*op->page));
        int ret = rio__t_list(c->t, op->list_args, op->page);
        if (ret < 0)
            rio_list_page_cleanup(op->page);
        return ret;
    }
    case META_EXISTS:
        return rio__t_exists(c->t, op->keys, op->nkeys, op->exists);
    case META_REMOVE_IF:
        return rio__t_remove_if(c->t, op->key, op->gen);
    case META_PARTS_OF:
        return rio__t_parts_of(c->t, op->desc, op->part, op->nparts, op->want);
    case META_PARTS_EVEN:
        return rio__t_parts_even(c->t, op->desc, op->part_size, op->part_count);
    default:
        return rio__t_remove(c->t, op->key);
    }
}

/* The deadline and cancel token of this thread's metadata try
 * (internal.h): per thread, since the transport ops take none of their
 * own. */
static __thread uint64_t try_deadline_ns = UINT64_MAX;
static __thread const struct rio_cancel *try_cancel;

uint64_t rio__meta_deadline_ns(void)
{
    return try_deadline_ns;
}

const struct rio_cancel *rio__meta_cancel(void)
{
    return try_cancel;
}

/* The same for a commit (internal.h): not its own round, only the wait
 * for a commit the server is still applying. */
static __thread uint64_t settle_deadline_ns = UINT64_MAX;
static __thread const struct rio_cancel *settle_cancel;

uint64_t rio__meta_settle_deadline_ns(void)
{
    return settle_deadline_ns;
}

const struct rio_cancel *rio__meta_settle_cancel(void)
{
    return settle_cancel;
}

static void settle_begin(const struct rio__meta *m)
{
    settle_deadline_ns = m->deadline_ns;
    settle_cancel = m->cancel;
}

static void settle_end(void)
{
    settle_deadline_ns = UINT64_MAX;
    settle_cancel = NULL;
}

int rio__cancel_fired(const struct rio_cancel *cx)
{
    return cx && atomic_load(&((struct rio_cancel *)cx)->fired);
}

/* The progress callback of this thread's metadata op (rio__meta.progress;
 * NULL: none) and when it last ran: per thread, as the try's deadline is,
 * since a transport waits with no handle on the op. */
static __thread void (*tick_fn)(void *arg, uint64_t done, uint64_t total);
static __thread void *tick_arg;
static __thread uint64_t tick_last_ns;

void rio__meta_tick(void)
{
    if (!tick_fn)
        return;
    uint64_t now = rio__now_ns();
    if (now - tick_last_ns < META_TICK_NS)
        return;
    tick_last_ns = now;
    tick_fn(tick_arg, 0, 0);
}

bool rio__meta_ticking(void)
{
    return tick_fn != NULL;
}

static int meta_bounded_end(const struct rio__meta *m, int ret);
static int meta_tries(struct rio_client *c, const struct rio__meta *m, const struct meta_op *op);

/* The op's tries, its progress callback set for them all (backoffs too):
 * its first report 100 ms after it began, so an op answered at once never
 * pays one. */
static int meta_run(struct rio_client *c, const struct rio__meta *m, const struct meta_op *op)
{
    tick_fn = m->progress;
    tick_arg = m->progress_arg;
    if (tick_fn)
        tick_last_ns = rio__now_ns();
    int ret = meta_tries(c, m, op);
    tick_fn = NULL;
    tick_arg = NULL;
    return ret;
}

static int meta_tries(struct rio_client *c, const struct rio__meta *m, const struct meta_op *op)
{
    unsigned tries = 0, throttles = 0;
    int ret;

    for (;;) {
        ret = meta_may_try(m);
        if (ret < 0)
            return ret;
        try_deadline_ns = m->deadline_ns;
        try_cancel = m->cancel;
        ret = meta_once(c, op);
        try_deadline_ns = UINT64_MAX;
        try_cancel = NULL;
        if (ret >= 0)
            return ret;
        /* The part HEADs' "cannot say" (RIO_ENOTSUP, a lie) is no failed
         * try: the GET goes on as it would, its stats as they were. */
        if ((op->kind == META_PARTS_OF || op->kind == META_PARTS_EVEN) &&
            !rio__class_is_retryable(rio__err_class(ret)))
            return meta_bounded_end(m, ret);
        ret = meta_failed(c, m, ret, &tries, &throttles);
        if (ret < 0)
            return ret;
    }
}

int rio__meta_lookup(struct rio_client *c, const struct rio__meta *m, const char *key,
                     uint64_t max_size, struct rio_desc *out, int64_t *mtime_ns)
{
    struct meta_op op = {
        .kind = META_LOOKUP, .key = key, .out = out, .mtime_ns = mtime_ns, .max_size = max_size};
    return meta_run(c, m, &op);
}

/* The end of a try whose error is not tried again (meta_run's part
 * HEADs), with the op's result: one cut short by the call's deadline or
 * token ends the call with that. */
static int meta_bounded_end(const struct rio__meta *m, int ret)
{
    try_deadline_ns = UINT64_MAX;
    try_cancel = NULL;
    if (ret < 0 && ret != -ENOMEM) {
        int why = meta_may_try(m);
        if (why < 0)
            ret = why;
    }
    return ret;
}

/* The part HEADs are tried again as a lookup is (meta_run): a busy server
 * (a 503, a reset) on one of them sent the GET on unchecked. */
int rio__meta_parts_of(struct rio_client *c, const struct rio__meta *m, const struct rio_desc *d,
                       uint64_t *part, uint32_t *nparts, char want[48])
{
    struct meta_op op = {
        .kind = META_PARTS_OF, .desc = d, .part = part, .nparts = nparts, .want = want};
    return meta_run(c, m, &op);
}

/* The middle parts' HEADs, tried again as parts_of's are: one 503 on them
 * made a sound object of parts of other sizes fail RIO_ECHECKSUM. */
int rio__meta_parts_even(struct rio_client *c, const struct rio__meta *m, const struct rio_desc *d,
                         uint64_t part, uint32_t nparts)
{
    struct meta_op op = {
        .kind = META_PARTS_EVEN, .desc = d, .part_size = part, .part_count = nparts};
    return meta_run(c, m, &op);
}

int rio__meta_put_open(struct rio_client *c, const struct rio__meta *m, const char *key,
                       uint64_t size, uint64_t chunk_size, void **upload)
{
    struct meta_op op = {.kind = META_PUT_OPEN,
                         .key = key,
                         .size = size,
                         .chunk_size = chunk_size,
                         .upload = upload};
    /* A conditional PUT goes only where the commit can decide it. */
    if (m->put_if && !rio__t_has_put_expect(c->t)) {
        rio__detail("this backend cannot publish on a condition (RIO_IF_ABSENT, a PUT's "
                    "expect_generation): nothing was sent");
        return RIO_ENOTSUP;
    }
    int ret = meta_run(c, m, &op);
    if (ret < 0 || !m->put_if)
        return ret;
    ret = rio__t_put_expect(c->t, *upload, m->put_if);
    if (ret < 0) {
        rio__t_put_abort(c->t, *upload);
        *upload = NULL;
    }
    return ret;
}

int rio__meta_remove(struct rio_client *c, const struct rio__meta *m, const char *key)
{
    struct meta_op op = {.kind = META_REMOVE, .key = key};
    return meta_run(c, m, &op);
}

int rio__meta_remove_if(struct rio_client *c, const struct rio__meta *m, const char *key,
                        uint64_t gen)
{
    struct meta_op op = {.kind = META_REMOVE_IF, .key = key, .gen = gen};
    return meta_run(c, m, &op);
}

int rio__meta_list(struct rio_client *c, const struct rio__meta *m, const struct rio_list_args *a,
                   struct rio_list_page *out)
{
    struct meta_op op = {.kind = META_LIST, .list_args = a, .page = out};
    return meta_run(c, m, &op);
}

int rio__meta_exists(struct rio_client *c, const struct rio__meta *m, const char *const *keys,
                     unsigned n, uint8_t *out)
{
    struct meta_op op = {.kind = META_EXISTS, .keys = keys, .nkeys = n, .exists = out};
    return meta_run(c, m, &op);
}

/*
 * A commit goes again only where the transport says a failed one left the
 * upload as it was (RIO_CAP_COMMIT_RETRY): elsewhere put_commit consumes the
 * upload whatever it returns, so there is nothing left to commit twice. The
 * deadline and cancel are not checked before the first try: the chunks are
 * all in, and the call has already paid for them. commit_again: after a
 * try returned ret, count it and, while the rules allow, try again; the
 * commit's result.
 */
static int commit_again(struct rio_client *c, const struct rio__meta *m, void *upload,
                        struct rio_desc *d, int ret)
{
    unsigned tries = 0, throttles = 0;

    if (ret >= 0)
        return ret;
    if (!rio__t_has_cap(c->t, RIO_CAP_COMMIT_RETRY)) {
        meta_count(c, m, ret);
        return ret;
    }
    for (;;) {
        int cls = rio__err_class(ret);
        ret = meta_failed(c, m, ret, &tries, &throttles);
        if (ret < 0) {
            /* A retryable answer left the upload to us: drop it. */
            if (rio__class_is_retryable(cls))
                rio__t_put_abort(c->t, upload);
            return ret;
        }
        ret = meta_may_try(m);
        if (ret < 0) {
            rio__t_put_abort(c->t, upload);
            return ret;
        }
        settle_begin(m);
        ret = rio__t_put_commit(c->t, upload, d);
        settle_end();
        if (ret >= 0)
            return ret;
    }
}

int rio__meta_put_commit(struct rio_client *c, const struct rio__meta *m, void *upload,
                         struct rio_desc *d)
{
    settle_begin(m);
    int ret = rio__t_put_commit(c->t, upload, d);
    settle_end();
    return commit_again(c, m, upload, d, ret);
}

/* rio__meta_put_commit of n uploads: their first tries at once (one
 * exchange where the transport can), then each one's further tries alone. */
void rio__meta_put_commit_many(struct rio_client *c, const struct rio__meta *m, void **uploads,
                               struct rio_desc **ds, int *rets, unsigned n)
{
    settle_begin(m);
    rio__t_put_commit_many(c->t, uploads, ds, rets, n);
    settle_end();
    for (unsigned i = 0; i < n; i++)
        rets[i] = commit_again(c, m, uploads[i], ds[i], rets[i]);
}
