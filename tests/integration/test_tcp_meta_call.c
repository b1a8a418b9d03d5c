/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * rio_stat_call and rio_delete_call against a real railiod on loopback that
 * stops answering (SIGSTOP: the kernel still takes the bytes, nothing comes
 * back): the call's deadline and its cancel token each end a stat and a
 * delete blocked there far sooner than the op timeout, with the error a
 * rio_get gets (a delete already sent: RIO_EUNKNOWN), and the call's stats
 * say what it did. Once the server runs
 * again, the same calls work, a delete on a condition included.
 */
#include <dirent.h>
#include <signal.h>

#include "tcp_util.h"

/* The op timeout: a try blocked on the stopped server ends at it at the
 * latest, so a call bounded by its deadline or token must end far before. */
#define OP_TIMEOUT_MS 20000u
/* How long any interrupted call here may take, at most. */
#define BOUND_MS 2000u
#define DEADLINE_MS 300u
#define FIRE_MS 100u

static void *fire_later(void *p)
{
    usleep(FIRE_MS * 1000u);
    rio_cancel_fire(p);
    return NULL;
}

/* Whether every thread of pid is stopped (state T in its stat). */
static bool all_stopped(pid_t pid)
{
    char path[64], buf[512];
    struct dirent *de;
    bool all = true;

    snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
    DIR *d = opendir(path);
    T_NOTNULL(d);
    while (all && (de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "/proc/%d/task/%.16s/stat", (int)pid, de->d_name);
        FILE *f = fopen(path, "r");
        if (!f)
            continue; /* a thread that ended */
        size_t n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = 0;
        const char *rp = strrchr(buf, ')');
        all = rp && rp[1] == ' ' && rp[2] == 'T';
    }
    closedir(d);
    return all;
}

/* SIGSTOP pid and wait until it is stopped: kill(2) returns before the
 * stop, and an answer sent meanwhile would make a test pass by luck. */
static void stop_server(pid_t pid)
{
    T_EQ(kill(pid, SIGSTOP), 0);
    for (int i = 0; !all_stopped(pid); i++) {
        T_LT(i, 2000);
        usleep(1000);
    }
}

/* The server's state for these tests: one object under "m/k". */
struct mc {
    struct srv_env e;
    struct tu u;
    uint64_t gen;
};

static void mc_start(struct mc *x)
{
    struct rio_options o;
    char url[256];

    srv_start(&x->e, NULL);
    tu_url(url, sizeof(url), &x->e, NULL);
    tu_opts(&o);
    o.op_timeout_ms = OP_TIMEOUT_MS;
    o.deadline_ms = RIO_DEADLINE_NONE;
    tu_open(&x->u, url, &o);
    x->gen = tu_put(x->u.c, "m/k", 5000, 3);
}

static void mc_stop(struct mc *x)
{
    tu_close(&x->u);
    T_EQ(srv_stop(&x->e), 0);
}

/* A stat (del: a delete, on a condition) with call on the stopped server
 * ends with want within BOUND_MS; its stats are filled. */
static void blocked_call(struct mc *x, bool del, struct rio_call *call, int want)
{
    uint64_t least_ms = call->deadline_ms ? DEADLINE_MS : FIRE_MS;
    struct rio_stats st;
    struct rio_desc d;
    int ret;

    memset(&st, 0xa5, sizeof(st));
    call->stats = &st;
    uint64_t t0 = t_now_ms();
    if (del) {
        call->expect_generation = x->gen;
        ret = rio_delete_call(x->u.c, "m/k", call);
        call->expect_generation = 0;
    } else {
        ret = rio_stat_call(x->u.c, "m/k", &d, NULL, call);
    }
    uint64_t ms = t_now_ms() - t0;
    T_ERR(ret, want);
    T_LE(ms, BOUND_MS);
    T_GE(st.elapsed_ns, least_ms * 900000u);
    T_LE(st.elapsed_ns, (ms + 1) * 1000000u);
    T_EQ(st.bytes, 0u);
    T_EQ(st.reserved[0], 0u);
    uint64_t sum = 0;
    for (unsigned i = 0; i < RIO_CLASS__COUNT; i++)
        sum += st.retries[i];
    T_EQ(st.retries_total, sum);
    /* The try the deadline cut is a failed try, counted by its class. */
    if (want == RIO_EDEADLINE)
        T_EQ(st.retries[RIO_CLASS_TIMEOUT], 1u);
    call->stats = NULL;
}

/* The calls each test makes on the stopped server, in this order, and
 * how each ends (cut: RIO_EDEADLINE or RIO_ECANCELED). A DELETE that
 * reached the server is never asked again, so one cut after it was sent
 * is RIO_EUNKNOWN (it may have been applied); it leaves the control
 * connection closed, so the stat and the second delete are cut in the
 * dial, before anything is sent. With cx, call i carries token cx[i],
 * fired FIRE_MS after it started (one token a call: a fired token cancels
 * every later call that carries it). */
static void blocked_calls(struct mc *x, struct rio_call *call, int cut, struct rio_cancel **cx)
{
    static const struct {
        bool del, cut;
    } seq[3] = {{true, false}, {false, true}, {true, true}};
    pthread_t th;

    for (int i = 0; i < 3; i++) {
        if (cx) {
            call->cancel = cx[i];
            T_EQ(pthread_create(&th, NULL, fire_later, cx[i]), 0);
        }
        blocked_call(x, seq[i].del, call, seq[i].cut ? cut : RIO_EUNKNOWN);
        if (cx)
            pthread_join(th, NULL);
    }
}

/* A deadline ends a stat and a delete blocked on a server that does not
 * answer: before, rio_stat and rio_delete took none and waited for the op
 * timeout. The timed-out try is counted as one. */
TEST(deadline_ends_stat_and_delete_on_a_stopped_server)
{
    struct mc x;
    struct rio_call call = {.deadline_ms = DEADLINE_MS};

    mc_start(&x);
    stop_server(x.e.pid);
    blocked_calls(&x, &call, RIO_EDEADLINE, NULL);
    T_EQ(kill(x.e.pid, SIGCONT), 0);
    mc_stop(&x);
}

/* So does the call's cancel token, fired from another thread. */
TEST(cancel_ends_stat_and_delete_on_a_stopped_server)
{
    struct mc x;
    struct rio_cancel *cx[3];
    struct rio_call call = {0};

    mc_start(&x);
    for (int i = 0; i < 3; i++)
        T_OK(rio_cancel_new(&cx[i]));
    stop_server(x.e.pid);
    blocked_calls(&x, &call, RIO_ECANCELED, cx);
    T_EQ(kill(x.e.pid, SIGCONT), 0);
    for (int i = 0; i < 3; i++)
        rio_cancel_destroy(cx[i]);
    mc_stop(&x);
}

/* A progress callback that fires the call's token at its second report,
 * counting its reports and noting one out of place (figures not 0, or
 * another thread than the caller's). */
struct tick {
    struct rio_cancel *cx;
    pthread_t caller;
    unsigned n, bad;
};

static void tick_fire(void *arg, uint64_t done, uint64_t total)
{
    struct tick *t = arg;

    if (done || total || !pthread_equal(pthread_self(), t->caller))
        t->bad++;
    if (++t->n == 2)
        rio_cancel_fire(t->cx);
}

/* A stat's and a delete's progress callback runs every 100 ms, with
 * (0, 0), in the calling thread while they wait on a server that does not
 * answer, so a caller with no thread of its own fires its token there (the
 * Python binding's Ctrl-C): before, it never ran and such a call waited
 * for the op timeout. A stat answered at once never calls it. The delete
 * goes first: its request is sent (RIO_EUNKNOWN); the stat after it is
 * cut in the dial. */
TEST(progress_runs_while_stat_and_delete_wait)
{
    struct mc x;
    struct tick t = {.caller = pthread_self()};
    struct rio_call call = {.progress = tick_fire, .progress_arg = &t};
    struct rio_desc d;

    mc_start(&x);
    T_OK(rio_stat_call(x.u.c, "m/k", &d, NULL, &call));
    rio_desc_cleanup(&d);
    T_EQ(t.n, 0u);
    stop_server(x.e.pid);
    for (int del = 1; del >= 0; del--) {
        T_OK(rio_cancel_new(&t.cx));
        call.cancel = t.cx;
        t.n = 0;
        uint64_t t0 = t_now_ms();
        int ret = del ? rio_delete_call(x.u.c, "m/k", &call)
                      : rio_stat_call(x.u.c, "m/k", &d, NULL, &call);
        uint64_t ms = t_now_ms() - t0;
        T_ERR(ret, del ? RIO_EUNKNOWN : RIO_ECANCELED);
        T_EQ(t.n, 2u);
        T_GE(ms, 190u);
        T_LE(ms, BOUND_MS);
        rio_cancel_destroy(t.cx);
    }
    T_EQ(t.bad, 0u);
    T_EQ(kill(x.e.pid, SIGCONT), 0);
    mc_stop(&x);
}

/* On a server that answers: the descriptor, a delete on the wrong
 * generation refused, on the right one done; stats with no failed try. */
TEST(stat_and_delete_call_on_a_running_server)
{
    struct mc x;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_desc d;
    int64_t mtime = -1;

    mc_start(&x);
    T_OK(rio_stat_call(x.u.c, "m/k", &d, &mtime, &call));
    T_EQ(d.generation, x.gen);
    T_EQ(d.size, 5000u);
    T_EQ(mtime, 0); /* railio:// gives none in the lookup */
    rio_desc_cleanup(&d);
    T_EQ(st.retries_total, 0u);
    T_GT(st.elapsed_ns, 0u);
    T_OK(rio_stat_call(x.u.c, "m/k", &d, NULL, NULL));
    rio_desc_cleanup(&d);

    /* A stat takes no flags nor generation; a delete no flags. */
    struct rio_call bad = {.flags = RIO_ATOMIC};
    T_ERR(rio_stat_call(x.u.c, "m/k", &d, NULL, &bad), RIO_EINVAL);
    T_ERR(rio_delete_call(x.u.c, "m/k", &bad), RIO_EINVAL);
    bad = (struct rio_call){.expect_generation = x.gen};
    T_ERR(rio_stat_call(x.u.c, "m/k", &d, NULL, &bad), RIO_EINVAL);
    bad = (struct rio_call){.expect_generation = UINT64_MAX};
    T_ERR(rio_delete_call(x.u.c, "m/k", &bad), RIO_EINVAL);

    call.expect_generation = x.gen + 1;
    T_ERR(rio_delete_call(x.u.c, "m/k", &call), RIO_EGENERATION);
    call.expect_generation = x.gen;
    T_OK(rio_delete_call(x.u.c, "m/k", &call));
    T_ERR(rio_stat_call(x.u.c, "m/k", &d, NULL, &call), RIO_EINVAL);
    call.expect_generation = 0;
    T_ERR(rio_stat_call(x.u.c, "m/k", &d, NULL, &call), RIO_ENOTFOUND);
    T_ERR(rio_delete_call(x.u.c, "m/k", NULL), RIO_ENOTFOUND);
    mc_stop(&x);
}
