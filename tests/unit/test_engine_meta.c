/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * The engine retries metadata ops (issue 15 item 2, core/meta.c): lookup,
 * put_open, remove and (where the transport allows it) put_commit go again
 * on a retryable class, up to retry_attempts tries, within the call's
 * deadline and until its cancel token fires; anything else, and
 * RIO_EUNKNOWN, is returned at once. The faults come from the mock's ops
 * table patched in the test (the aws-c-s3 habit): each metadata op first
 * answers a scripted list of errors, then calls the mock's own op.
 */
#include <stdatomic.h>

#include "engine_util.h"
#include "transport/transport.h"

enum { OP_LOOKUP, OP_OPEN, OP_COMMIT, OP_REMOVE, OP__N };

/* The script: op k fails fail_n[k] more times with fail_err[k] (-1: for
 * ever); calls[k] counts every call. */
static _Atomic int fail_n[OP__N];
static int fail_err[OP__N];
static _Atomic unsigned calls[OP__N];
static const struct rio_transport_ops *real;
static struct rio_transport_ops patched;

static int scripted(int k)
{
    atomic_fetch_add(&calls[k], 1);
    int n = atomic_load(&fail_n[k]);
    if (n == 0)
        return 0;
    if (n > 0)
        atomic_fetch_sub(&fail_n[k], 1);
    return fail_err[k];
}

static int f_lookup(struct rio_transport *t, const char *key, struct rio_desc *out)
{
    int ret = scripted(OP_LOOKUP);
    return ret ? ret : real->lookup(t, key, out);
}

static int f_put_open(struct rio_transport *t, const char *key, uint64_t size, uint64_t cs,
                      void **upload)
{
    int ret = scripted(OP_OPEN);
    return ret ? ret : real->put_open(t, key, size, cs, upload);
}

/* A failed commit keeps the upload only under RIO_CAP_COMMIT_RETRY;
 * otherwise it is consumed, as the contract says. */
static int f_put_commit(struct rio_transport *t, void *upload, struct rio_desc *d)
{
    int ret = scripted(OP_COMMIT);
    if (!ret)
        return real->put_commit(t, upload, d);
    if (!(patched.caps & RIO_CAP_COMMIT_RETRY))
        real->put_abort(t, upload);
    return ret;
}

static int f_remove(struct rio_transport *t, const char *key)
{
    int ret = scripted(OP_REMOVE);
    return ret ? ret : real->remove(t, key);
}

/* Patch c's transport; commit_retry sets RIO_CAP_COMMIT_RETRY. */
static void patch(struct rio_client *c, bool commit_retry)
{
    struct rio_transport *t = rio__client_transport(c);
    real = rio__t_ops(t);
    patched = *real;
    patched.lookup = f_lookup;
    patched.put_open = f_put_open;
    patched.put_commit = f_put_commit;
    patched.remove = f_remove;
    if (commit_retry)
        patched.caps |= RIO_CAP_COMMIT_RETRY;
    rio__t_set_ops(t, &patched); /* the engine thread reaps through it meanwhile */
    for (int k = 0; k < OP__N; k++) {
        atomic_store(&fail_n[k], 0);
        atomic_store(&calls[k], 0);
    }
}

/* Put the mock's own table back (its test API and close look for it). */
static void unpatch(struct rio_client *c)
{
    rio__t_set_ops(rio__client_transport(c), real);
}

/* eu_close with the table restored first. */
#define close_patched(e)                                                                           \
    do {                                                                                           \
        unpatch((e)->c);                                                                           \
        eu_close(e);                                                                               \
    } while (0)

static void script(int k, int n, int err)
{
    fail_err[k] = err;
    atomic_store(&fail_n[k], n);
    atomic_store(&calls[k], 0);
}

#define OBJ (256 * EU_KIB)

static void open_patched(struct eu *e, struct rio_options *o, const char *url, bool commit_retry)
{
    eu_open(e, url, o);
    patch(e->c, commit_retry);
}

TEST(lookup_retried_and_counted)
{
    struct eu e;
    uint8_t *src = eu_pattern_buf(OBJ, 1), *dst = malloc(OBJ);
    struct rio_desc d;

    eu_begin(&e);
    e.o.retry_attempts = 4;
    open_patched(&e, &e.o, "mock://meta1", false);
    T_OK(rio_put(e.c, "k", src, OBJ, NULL, NULL));

    script(OP_LOOKUP, 3, -ECONNRESET);
    T_OK(rio_stat(e.c, "k", &d));
    T_EQ(d.size, OBJ);
    rio_desc_cleanup(&d);
    T_EQ(atomic_load(&calls[OP_LOOKUP]), 4u);

    /* A GET's lookup: the failed tries are in its stats, by class. */
    script(OP_LOOKUP, 2, RIO_ESERVER);
    T_EQ(rio_get(e.c, "k", dst, OBJ, &e.call), (int64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    T_EQ(e.st.retries[RIO_CLASS_SERVER], 2u);
    T_EQ(e.st.retries_total, 2u);
    close_patched(&e);
    free(src);
    free(dst);
}

TEST(tries_bounded_by_retries_option)
{
    struct eu e;
    struct rio_desc d;

    eu_begin(&e);
    e.o.retry_attempts = 3;
    open_patched(&e, &e.o, "mock://meta2", false);
    script(OP_LOOKUP, -1, -ETIMEDOUT);
    T_ERR(rio_stat(e.c, "k", &d), -ETIMEDOUT);
    T_EQ(atomic_load(&calls[OP_LOOKUP]), 3u);

    /* A throttle gets four times the patience. */
    script(OP_REMOVE, -1, RIO_ETHROTTLE);
    T_ERR(rio_delete(e.c, "k"), RIO_ETHROTTLE);
    T_EQ(atomic_load(&calls[OP_REMOVE]), 12u);
    close_patched(&e);
}

TEST(fatal_and_unknown_not_retried)
{
    struct eu e;
    uint8_t *src = eu_pattern_buf(OBJ, 2);

    eu_begin(&e);
    open_patched(&e, &e.o, "mock://meta3", false);
    T_OK(rio_put(e.c, "k", src, OBJ, NULL, NULL));
    /* It may have taken effect: the transport says so and it is not repeated. */
    script(OP_REMOVE, -1, RIO_EUNKNOWN);
    T_ERR(rio_delete(e.c, "k"), RIO_EUNKNOWN);
    T_EQ(atomic_load(&calls[OP_REMOVE]), 1u);
    script(OP_REMOVE, 0, 0);
    T_OK(rio_delete(e.c, "k"));
    T_ERR(rio_delete(e.c, "k"), RIO_ENOTFOUND);
    T_EQ(atomic_load(&calls[OP_REMOVE]), 2u);
    script(OP_OPEN, -1, -EACCES);
    T_ERR(rio_put(e.c, "k", src, OBJ, NULL, NULL), -EACCES);
    T_EQ(atomic_load(&calls[OP_OPEN]), 1u);
    close_patched(&e);
    free(src);
}

/* Every path that opens an upload: one PUT, a batch's PUTs (opened on the
 * call's workers), a streaming writer. */
TEST(put_open_retried_everywhere)
{
    struct eu e;
    uint8_t *src = eu_pattern_buf(OBJ, 3), *dst = malloc(OBJ);

    eu_begin(&e);
    e.o.retry_attempts = 3;
    open_patched(&e, &e.o, "mock://meta4?paths=2", false);
    script(OP_OPEN, 2, -ECONNREFUSED);
    T_OK(rio_put(e.c, "a", src, OBJ, NULL, NULL));
    T_EQ(atomic_load(&calls[OP_OPEN]), 3u);

    struct rio_op ops[4];
    char keys[4][8];
    for (int i = 0; i < 4; i++) {
        snprintf(keys[i], sizeof(keys[i]), "b%d", i);
        ops[i] = (struct rio_op){.type = RIO_OP_PUT, .key = keys[i], .buf = src, .len = OBJ};
    }
    /* Two failures, whichever ops they fall on: the workers may take the
     * ops one by one (a slow machine, TSan), and one op must not meet more
     * failures than its 3 tries. */
    script(OP_OPEN, 2, -ECONNRESET);
    T_EQ(rio_batch(e.c, ops, 4, NULL), 4);
    T_EQ(atomic_load(&calls[OP_OPEN]), 6u);
    for (int i = 0; i < 4; i++) {
        T_EQ(rio_get(e.c, keys[i], dst, OBJ, NULL), (int64_t)OBJ);
        T_MEMEQ(dst, src, OBJ);
    }

    struct rio_writer *w;
    script(OP_OPEN, 1, -EHOSTUNREACH);
    T_OK(rio_writer_open(e.c, "w", OBJ, 2, NULL, &w));
    T_OK(rio_writer_write(w, src, OBJ));
    T_OK(rio_writer_close(w, NULL));
    T_EQ(atomic_load(&calls[OP_OPEN]), 2u);
    close_patched(&e);
    free(src);
    free(dst);
}

/* A commit goes again only where the transport keeps the upload on a
 * retryable failure (RIO_CAP_COMMIT_RETRY); elsewhere once. */
TEST(commit_retried_only_with_capability)
{
    struct eu e;
    uint8_t *src = eu_pattern_buf(OBJ, 4), *dst = malloc(OBJ);
    struct rio_desc d;

    eu_begin(&e);
    open_patched(&e, &e.o, "mock://meta5", false);
    script(OP_COMMIT, 1, -ECONNRESET);
    T_ERR(rio_put(e.c, "k", src, OBJ, &e.call, NULL), -ECONNRESET);
    T_EQ(atomic_load(&calls[OP_COMMIT]), 1u);
    T_EQ(e.st.retries[RIO_CLASS_RESET], 1u);
    T_ERR(rio_stat(e.c, "k", &d), RIO_ENOTFOUND);
    close_patched(&e);

    open_patched(&e, &e.o, "mock://meta6", true);
    script(OP_COMMIT, 2, -ECONNRESET);
    T_OK(rio_put(e.c, "k", src, OBJ, &e.call, NULL));
    T_EQ(atomic_load(&calls[OP_COMMIT]), 3u);
    T_EQ(e.st.retries[RIO_CLASS_RESET], 2u);
    T_EQ(rio_get(e.c, "k", dst, OBJ, NULL), (int64_t)OBJ);
    T_MEMEQ(dst, src, OBJ);
    /* Tries spent: the upload the transport left is aborted, nothing leaks
     * (eu_close counts the blocks) and nothing is published. */
    script(OP_COMMIT, -1, -ECONNRESET);
    T_ERR(rio_put(e.c, "k2", src, OBJ, NULL, NULL), -ECONNRESET);
    struct rio_options eff;
    rio_client_options(e.c, &eff);
    T_EQ(atomic_load(&calls[OP_COMMIT]), eff.retry_attempts);
    T_ERR(rio_stat(e.c, "k2", &d), RIO_ENOTFOUND);
    close_patched(&e);
    free(src);
    free(dst);
}

TEST(deadline_bounds_the_backoff)
{
    struct eu e;
    uint8_t *dst = malloc(OBJ);

    eu_begin(&e);
    e.o.retry_attempts = 100;
    e.o.backoff_base_ms = 400;
    e.o.backoff_cap_ms = 400;
    open_patched(&e, &e.o, "mock://meta7", false);
    script(OP_LOOKUP, -1, -ECONNRESET);
    struct rio_call call = {.deadline_ms = 150};
    uint64_t t0 = eu_now_ns();
    T_ERR(rio_get(e.c, "k", dst, OBJ, &call), RIO_EDEADLINE);
    T_LT((eu_now_ns() - t0) / 1000000, 1000u);
    T_LT(atomic_load(&calls[OP_LOOKUP]), 3u);
    close_patched(&e);
    free(dst);
}

struct firer {
    struct rio_cancel *cx;
    unsigned ms;
};

static void *fire_later(void *arg)
{
    struct firer *f = arg;
    eu_sleep_ms(f->ms);
    rio_cancel_fire(f->cx);
    return NULL;
}

TEST(cancel_ends_the_backoff)
{
    struct eu e;
    uint8_t *src = eu_pattern_buf(OBJ, 5);
    pthread_t th;

    eu_begin(&e);
    e.o.retry_attempts = 100;
    e.o.backoff_base_ms = 2000;
    e.o.backoff_cap_ms = 2000;
    open_patched(&e, &e.o, "mock://meta8", false);
    script(OP_OPEN, -1, RIO_ESERVER);
    struct firer f = {.ms = 50};
    T_OK(rio_cancel_new(&f.cx));
    struct rio_call call = {.cancel = f.cx};
    T_EQ(pthread_create(&th, NULL, fire_later, &f), 0);
    uint64_t t0 = eu_now_ns();
    T_ERR(rio_put(e.c, "k", src, OBJ, &call, NULL), RIO_ECANCELED);
    T_LT((eu_now_ns() - t0) / 1000000, 900u);
    pthread_join(th, NULL);
    rio_cancel_destroy(f.cx);
    close_patched(&e);
    free(src);
}

/* Fire f->cx once the first commit has failed: the call is then in its
 * backoff, however long the chunks took. */
static void *fire_after_commit(void *arg)
{
    struct firer *f = arg;
    while (atomic_load(&calls[OP_COMMIT]) == 0)
        eu_sleep_ms(1);
    eu_sleep_ms(f->ms);
    rio_cancel_fire(f->cx);
    return NULL;
}

/* A commit that keeps its upload (RIO_CAP_COMMIT_RETRY) and fails until the
 * call ends: cancelled in its backoff, or out of time before the next try.
 * The engine aborts the upload it was left exactly once (no leak: eu_close
 * counts the blocks; no second abort: ASan) and publishes nothing. */
TEST(commit_backoff_ended_aborts_the_upload_once)
{
    struct eu e;
    struct rio_options o;
    uint8_t *src = eu_pattern_buf(OBJ, 6);
    struct rio_desc d;
    pthread_t th;

    eu_opts(&o);
    o.retry_attempts = 100;
    o.backoff_base_ms = 20000; /* a backoff outlasts both calls */
    o.backoff_cap_ms = 20000;
    o.deadline_ms = RIO_DEADLINE_NONE; /* else the backoff is cut short at once */
    open_patched(&e, &o, "mock://meta9", true);
    script(OP_COMMIT, -1, RIO_ETHROTTLE);
    struct firer f = {.ms = 50};
    T_OK(rio_cancel_new(&f.cx));
    struct rio_call call = {.cancel = f.cx};
    T_EQ(pthread_create(&th, NULL, fire_after_commit, &f), 0);
    T_ERR(rio_put(e.c, "k", src, OBJ, &call, NULL), RIO_ECANCELED);
    pthread_join(th, NULL);
    rio_cancel_destroy(f.cx);
    T_EQ(atomic_load(&calls[OP_COMMIT]), 1u);
    T_ERR(rio_stat(e.c, "k", &d), RIO_ENOTFOUND);

    /* The deadline comes before the next try would. */
    script(OP_COMMIT, -1, -ETIMEDOUT);
    struct rio_call dl = {.deadline_ms = 3000};
    T_ERR(rio_put(e.c, "k", src, OBJ, &dl, NULL), RIO_EDEADLINE);
    T_EQ(atomic_load(&calls[OP_COMMIT]), 1u);
    T_ERR(rio_stat(e.c, "k", &d), RIO_ENOTFOUND);
    close_patched(&e);
    free(src);
}
