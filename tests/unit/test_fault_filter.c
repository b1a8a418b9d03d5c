/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 60 */
/* T_LABELS unit */
/*
 * The fault filter (src/transport/fault.c) stacked over two transports: the
 * mock, and a real one, file:// in a scratch directory (skipped where
 * io_uring is not built in). Every fault kind runs the same spec over both,
 * driven through the ops table, and checks the data that arrived or the
 * error, the caller's buffers, and the counters back at zero.
 */
#define _GNU_SOURCE
#include "file_util.h"
#include "tx_util.h"

#define CS (64 * KiB)
#define NCH 4u
#define SIZE (NCH * CS)

struct target {
    const char *name;
    char base[512]; /* the URL without faults= */
};

static unsigned ntargets;
static struct target targets[2];

static void targets_init(void)
{
    static unsigned seq;

    ntargets = 0;
    targets[ntargets].name = "mock";
    snprintf(targets[ntargets].base, sizeof(targets[0].base), "mock://ff%u-%ld?", seq++,
             (long)getpid());
    ntargets++;
    if (rio__transport_find("file")) {
        if (!fu_dir[0])
            fu_mkdir();
        targets[ntargets].name = "file";
        snprintf(targets[ntargets].base, sizeof(targets[0].base), "%s", fu_url("?sync=0&"));
        ntargets++;
    }
}

/* An object "k" of NCH chunks over a transport with faults=spec. */
struct ff {
    const struct target *tg;
    struct tx x;
    struct rio_desc d;
    uint8_t *src, *dst;
};

static void ff_open(struct ff *f, const struct target *tg, const char *spec)
{
    struct rio_options o;
    char url[1024];

    memset(f, 0, sizeof(*f));
    f->tg = tg;
    rio_options_init(&o);
    o.paths = 2;
    o.seed = 7;
    snprintf(url, sizeof(url), "%sfaults=%s", tg->base, spec);
    T_OK(tx_open_opts(&f->x, url, &o));
    T_TRUE(rio__fault_is(f->x.t));
    f->src = pattern(SIZE, 11);
    f->dst = malloc(SIZE);
    T_NOTNULL(f->dst);
    memset(f->dst, 0x11, SIZE);
    T_OK(put_object(&f->x, "k", f->src, SIZE, CS, &f->d));
}

static void ff_read(struct ff *f, struct top *o, uint64_t idx, unsigned path)
{
    top_read(o, &f->d, idx, path, f->dst + idx * CS);
    T_OK(f->x.ops->submit(f->x.t, &o->io));
}

/* ff_read, then its completion reaped. */
static void ff_read_one(struct ff *f, struct top *o, uint64_t idx, unsigned path)
{
    ff_read(f, o, idx, path);
    reap_one(&f->x, o);
}

/* Open a PUT of "k2", write its chunk 0 on path 0 and reap it; the PUT is
 * left open in *up for the caller to abort. The result is in o->res. */
static void ff_write_one(struct ff *f, struct top *o, void **up)
{
    T_OK(f->x.ops->put_open(f->x.t, "k2", SIZE, CS, up));
    top_write(o, *up, SIZE, CS, 0, 0, f->src);
    T_OK(f->x.ops->submit(f->x.t, &o->io));
    reap_one(&f->x, o);
}

static void ff_close(struct ff *f)
{
    struct rio_mock_counters c = counters(&f->x);

    T_EQ(c.inflight, 0u);
    T_EQ(c.rollback_violations, 0u);
    rio_desc_cleanup(&f->d);
    tx_close(&f->x);
    free(f->src);
    free(f->dst);
}

static unsigned bits_differ(const uint8_t *a, const uint8_t *b, uint64_t n)
{
    unsigned diff = 0;

    for (uint64_t i = 0; i < n; i++)
        diff += (unsigned)__builtin_popcount(a[i] ^ b[i]);
    return diff;
}

#define EACH_TARGET(tg)                                                                            \
    targets_init();                                                                                \
    for (const struct target *tg = targets; tg < targets + ntargets; tg++)

/* ------------------------------------------------------------------ wrap */

TEST(wrapped_only_when_asked)
{
    struct rio_mock_fault f;
    struct tx x;

    targets_init();
    T_OK(rio_mock_fault_parse("error:op=read", &f));
    /* mock:// always has the filter. */
    tx_open(&x, "mock://ffw");
    T_TRUE(rio__fault_is(x.t));
    T_TRUE(rio__mock_is(rio__fault_inner(x.t)));
    T_EQ(x.t->npaths, rio__fault_inner(x.t)->npaths);
    T_EQ(x.ops->caps, rio__fault_inner(x.t)->ops->caps);
    tx_close(&x);
    /* A bad spec fails the open. */
    T_ERR(tx_open_opts(&x, "mock://ffw?faults=explode", NULL), RIO_EINVAL);
    T_ERR(tx_open_opts(&x, "mock://ffw?faults=error:op=lookup", NULL), RIO_EINVAL);
    T_ERR(tx_open_opts(&x, "mock://ffw?faults=meta_error:op=read", NULL), RIO_EINVAL);
    if (ntargets < 2)
        return;
    /* file:// without faults= is bare; with it (even empty), wrapped. */
    tx_open(&x, fu_url(""));
    T_FALSE(rio__fault_is(x.t));
    T_ERR(rio__fault_add(x.t, &f), RIO_EINVAL);
    tx_close(&x);
    tx_open(&x, fu_url("?faults="));
    T_TRUE(rio__fault_is(x.t));
    T_OK(rio__fault_add(x.t, &f));
    /* A generation change needs the mock's store. */
    T_OK(rio_mock_fault_parse("genchange", &f));
    T_ERR(rio__fault_add(x.t, &f), RIO_EINVAL);
    tx_close(&x);
}

/* The client API: any client whose transport is wrapped. */
TEST(client_api_on_any_wrapped_transport)
{
    struct rio_mock_fault f;
    struct rio_mock_counters m;
    struct rio_client *c;

    targets_init();
    T_OK(rio_mock_fault_parse("error:op=read:count=1", &f));
    for (const struct target *tg = targets; tg < targets + ntargets; tg++) {
        char url[1024];
        struct rio_options o;
        uint8_t *src = pattern(SIZE, 3), *dst = malloc(SIZE);
        struct rio_call call = {0};

        rio_options_init(&o);
        o.chunk_size = CS;
        snprintf(url, sizeof(url), "%sfaults=", tg->base);
        T_OK(rio_client_new(url, &o, &c));
        T_EQ(rio_put(c, "api", src, SIZE, NULL, NULL), 0);
        T_OK(rio_mock_fault_add(c, &f));
        /* The engine retries the injected error: the data arrives whole. */
        T_EQ(rio_get(c, "api", dst, SIZE, &call), (int64_t)SIZE);
        T_MEMEQ(dst, src, SIZE);
        rio_mock_counters(c, &m);
        T_EQ(m.faults_fired, 1u);
        T_EQ(m.inflight, 0u);
        T_GE(m.ops_read, NCH + 1);
        rio_mock_faults_clear(c);
        rio_mock_heal(c);
        rio_client_destroy(c);
        free(src);
        free(dst);
    }
    if (ntargets < 2)
        return;
    /* Not wrapped: refused, counters zero. */
    T_OK(rio_client_new(fu_url(""), NULL, &c));
    T_ERR(rio_mock_fault_add(c, &f), RIO_EINVAL);
    rio_mock_counters(c, &m);
    T_EQ(m.faults_fired, 0u);
    T_EQ(m.ops_read, 0u);
    rio_client_destroy(c);
}

/* ------------------------------------------------------------ each kind */

TEST(disconnect_downs_the_path)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct top r[3];

        ff_open(&f, tg, "");
        add_fault(&f.x, "disconnect:op=read:path=0:bytes=1000:count=1");
        ff_read(&f, &r[0], 0, 0);
        ff_read(&f, &r[1], 1, 1);
        T_EQ(reap_all(&f.x, r, 2, 5000), 2u);
        T_EQ(r[0].res, -ECONNRESET);
        T_MEMEQ(f.dst, f.src, 1000);
        T_TRUE(all_bytes(f.dst + 1000, CS - 1000, 0xDD));
        T_EQ(r[1].res, (int64_t)CS);
        T_MEMEQ(f.dst + CS, f.src + CS, CS);
        /* Down until healed. */
        ff_read_one(&f, &r[0], 2, 0);
        T_EQ(r[0].res, -ECONNRESET);
        T_TRUE(all_bytes(f.dst + 2 * CS, CS, 0xDD));
        rio__fault_heal(f.x.t);
        ff_read_one(&f, &r[0], 2, 0);
        T_EQ(r[0].res, (int64_t)CS);
        T_MEMEQ(f.dst + 2 * CS, f.src + 2 * CS, CS);
        /* A timed outage ends by itself. */
        add_fault(&f.x, "disconnect:op=read:path=1:down=30ms:count=1");
        ff_read_one(&f, &r[0], 3, 1);
        T_EQ(r[0].res, -ECONNRESET);
        usleep(40000);
        ff_read_one(&f, &r[0], 3, 1);
        T_EQ(r[0].res, (int64_t)CS);
        T_EQ(counters(&f.x).faults_fired, 2u);
        ff_close(&f);
    }
}

TEST(short_read_and_write)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct top r;
        void *up;

        ff_open(&f, tg, "");
        add_fault(&f.x, "short:op=read:chunk=1:bytes=100");
        add_fault(&f.x, "short:op=write:chunk=0:bytes=10");
        ff_read_one(&f, &r, 1, 0);
        T_EQ(r.res, 100);
        T_MEMEQ(f.dst + CS, f.src + CS, 100);
        T_TRUE(all_bytes(f.dst + CS + 100, CS - 100, 0xDD));
        ff_write_one(&f, &r, &up);
        T_EQ(r.res, 10);
        f.x.ops->put_abort(f.x.t, up);
        ff_close(&f);
    }
}

TEST(bitflip_read_and_write)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct top r;
        uint8_t *copy = malloc(SIZE);
        struct rio_desc d2;
        void *up;
        uint64_t xxh[NCH];
        struct top w[NCH];

        ff_open(&f, tg, "");
        add_fault(&f.x, "bitflip:op=read:chunk=2:count=1");
        ff_read_one(&f, &r, 2, 1);
        T_EQ(r.res, (int64_t)CS);
        T_EQ(bits_differ(f.dst + 2 * CS, f.src + 2 * CS, CS), 1u);

        /* A WRITE sends a flipped private copy: the caller's bytes stay. */
        add_fault(&f.x, "bitflip:op=write:chunk=1:count=1");
        memcpy(copy, f.src, SIZE);
        T_OK(f.x.ops->put_open(f.x.t, "k2", SIZE, CS, &up));
        for (unsigned i = 0; i < NCH; i++) {
            top_write(&w[i], up, SIZE, CS, i, i % 2, f.src);
            xxh[i] = w[i].io.xxh;
            T_OK(f.x.ops->submit(f.x.t, &w[i].io));
        }
        T_EQ(reap_all(&f.x, w, NCH, 5000), NCH);
        T_MEMEQ(f.src, copy, SIZE);
        if (strcmp(tg->name, "mock") == 0) {
            /* The mock checks what it received against the xxh3. */
            T_EQ(w[1].res, RIO_ECHECKSUM);
            f.x.ops->put_abort(f.x.t, up);
        } else {
            /* file:// stores what it got: reading it back shows the flip. */
            T_EQ(w[1].res, (int64_t)CS);
            memset(&d2, 0, sizeof(d2));
            strcpy(d2.key, "k2");
            d2.size = SIZE;
            d2.chunk_size = CS;
            d2.nchunks = NCH;
            d2.xxh = xxh;
            T_OK(f.x.ops->put_commit(f.x.t, up, &d2));
            T_OK(f.x.ops->lookup(f.x.t, "k2", &d2));
            top_read(&r, &d2, 1, 0, f.dst);
            T_OK(f.x.ops->submit(f.x.t, &r.io));
            reap_one(&f.x, &r);
            T_EQ(r.res, (int64_t)CS);
            T_EQ(bits_differ(f.dst, f.src + CS, CS), 1u);
            rio_desc_cleanup(&d2);
        }
        T_EQ(counters(&f.x).faults_fired, 2u);
        free(copy);
        ff_close(&f);
    }
}

TEST(error_read_and_write)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct top r;
        void *up;

        ff_open(&f, tg, "");
        add_fault(&f.x, "error:op=read:chunk=3:error=EIO");
        ff_read_one(&f, &r, 3, 0);
        T_EQ(r.res, -EIO);
        T_TRUE(all_bytes(f.dst + 3 * CS, CS, 0xDD));
        ff_read_one(&f, &r, 2, 0);
        T_EQ(r.res, (int64_t)CS);
        T_MEMEQ(f.dst + 2 * CS, f.src + 2 * CS, CS);

        add_fault(&f.x, "error:op=write:error=RIO_ESERVER:count=1");
        ff_write_one(&f, &r, &up);
        T_EQ(r.res, RIO_ESERVER);
        f.x.ops->put_abort(f.x.t, up);
        ff_close(&f);
    }
}

TEST(stall_until_cancel)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct top r;

        ff_open(&f, tg, "stall:op=read:chunk=0");
        ff_read(&f, &r, 0, 0);
        T_EQ(reap_all(&f.x, &r, 1, 60), 0u);
        T_EQ(counters(&f.x).inflight, 1u);
        f.x.ops->cancel(f.x.t, &r.io);
        reap_one(&f.x, &r);
        T_EQ(r.res, -ECANCELED);
        T_TRUE(all_bytes(f.dst, CS, 0x11)); /* nothing written */
        ff_close(&f);
    }
}

TEST(late_write_lands_before_completion)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct top r;
        uint64_t t0;

        ff_open(&f, tg, "late:op=read:chunk=1:delay=300ms:count=1");
        ff_read(&f, &r, 1, 1);
        T_EQ(reap_all(&f.x, &r, 1, 30), 0u);
        t0 = rio__now_ns();
        f.x.ops->cancel(f.x.t, &r.io);
        T_EQ(reap_all(&f.x, &r, 1, 20), 0u);
        T_TRUE(all_bytes(f.dst + CS, CS, 0x11)); /* not yet */
        reap_one(&f.x, &r);
        T_EQ(r.res, -ECANCELED);
        T_GE((r.done_ns - t0) / 1000000, 299u);
        T_TRUE(all_bytes(f.dst + CS, CS, 0xDD)); /* landed, then completed */
        T_EQ(counters(&f.x).late_writes, 1u);
        ff_close(&f);
    }
}

/* The contract breaker: completes at cancel, lands afterwards. */
TEST(unfenced_lands_after_completion)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct top r;

        setenv("RIO_TEST_UNSAFE_FAULTS", "1", 1);
        ff_open(&f, tg, "unfenced:op=read:chunk=1:delay=300ms:count=1");
        unsetenv("RIO_TEST_UNSAFE_FAULTS");
        ff_read(&f, &r, 1, 1);
        T_EQ(reap_all(&f.x, &r, 1, 20), 0u);
        f.x.ops->cancel(f.x.t, &r.io);
        reap_one(&f.x, &r);
        T_EQ(r.res, -ECANCELED);
        T_TRUE(all_bytes(f.dst + CS, CS, 0x11)); /* completed, nothing yet */
        T_EQ(f.x.ops->reap(f.x.t, 400), 0);      /* the landing is the filter's */
        T_TRUE(all_bytes(f.dst + CS, CS, 0xDD));
        T_EQ(counters(&f.x).late_writes, 1u);
        ff_close(&f);
    }
}

/* unfenced writes into a buffer after its op completed: a URL a user pasted
 * (faults= is accepted on every URL) must not get it, nor the API, unless
 * the environment says this is a test that wants it. */
TEST(unfenced_refused_unless_the_test_asks)
{
    struct rio_mock_fault f;
    struct tx x;

    unsetenv("RIO_TEST_UNSAFE_FAULTS");
    T_OK(rio_mock_fault_parse("unfenced:op=read:delay=1ms", &f)); /* the language has it */
    T_ERR(tx_open_opts(&x, "mock://ffu?faults=unfenced", NULL), RIO_EINVAL);
    T_ERR(tx_open_opts(&x, "mock://ffu?faults=error:count=1;unfenced:op=read", NULL), RIO_EINVAL);
    tx_open(&x, "mock://ffu?faults=");
    T_ERR(rio__fault_add(x.t, &f), RIO_EINVAL);
    setenv("RIO_TEST_UNSAFE_FAULTS", "yes", 1); /* only "1" */
    T_ERR(rio__fault_add(x.t, &f), RIO_EINVAL);
    setenv("RIO_TEST_UNSAFE_FAULTS", "1", 1);
    T_OK(rio__fault_add(x.t, &f));
    unsetenv("RIO_TEST_UNSAFE_FAULTS");
    tx_close(&x);
}

/* Specs as hostile as a pasted URL can make them: refused, never a crash. */
TEST(hostile_specs_refused)
{
    static const char *const bad[] = {
        "",
        ":",
        "::::",
        "error:=",
        "error:op",
        "error:op=",
        "error:=read",
        "error:op=lookup",
        "meta_error:op=write",
        "error:path=16",
        "error:path=-2",
        "error:chunk=-2",
        "error:chunk=99999999999999999999",
        "error:count=4294967296",
        "error:p=nan",
        "error:p=-0.5",
        "error:p=1.5",
        "error:p=",
        "error:error=0",
        "error:error=EWHATEVER",
        "error:error=99999999999",
        "delay:delay=1e400ms",
        "delay:delay=100000000000s",
        "error:nokey=1",
        "errorx",
        "error:op=read:op",
    };
    struct rio_mock_fault f;
    char big[RIO_FAULT_SPEC_MAX + 64], url[4096];
    struct tx x;
    size_t i, n;

    for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (rio_mock_fault_parse(bad[i], &f) != RIO_EINVAL)
            T_FAIL("accepted \"%s\"", bad[i]);
    }
    T_ERR(rio_mock_fault_parse(NULL, &f), RIO_EINVAL);
    /* Longer than a spec may be: refused, whole or in a list. */
    memset(big, 'a', sizeof(big) - 1);
    memcpy(big, "error:op=read:count=1:skip=", 27);
    big[sizeof(big) - 1] = '\0';
    T_ERR(rio_mock_fault_parse(big, &f), RIO_EINVAL);
    snprintf(url, sizeof(url), "mock://ffh?faults=error;%s", big);
    T_ERR(tx_open_opts(&x, url, NULL), RIO_EINVAL);
    /* More rules than the filter holds (64). */
    n = (size_t)snprintf(url, sizeof(url), "mock://ffh?faults=");
    for (i = 0; i < 65; i++)
        n += (size_t)snprintf(url + n, sizeof(url) - n, "error:count=1;");
    T_LT(n, sizeof(url));
    T_ERR(tx_open_opts(&x, url, NULL), RIO_EINVAL);
    /* Empty specs between separators are nothing. */
    tx_open(&x, "mock://ffh?faults=;;error:op=read:count=1;;");
    tx_close(&x);
}

TEST(delay_then_the_data)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct top r;
        uint64_t t0;

        ff_open(&f, tg, "delay:op=read:chunk=2:delay=400ms");
        t0 = rio__now_ns();
        ff_read_one(&f, &r, 2, 0);
        T_EQ(r.res, (int64_t)CS);
        T_GE((r.done_ns - t0) / 1000000, 399u);
        T_MEMEQ(f.dst + 2 * CS, f.src + 2 * CS, CS);
        /* A cancel during the delay ends it with what the op reached. */
        ff_read(&f, &r, 2, 0);
        usleep(20000);
        t0 = rio__now_ns();
        f.x.ops->cancel(f.x.t, &r.io);
        reap_one(&f.x, &r);
        T_LT((r.done_ns - t0) / 1000000, 300u); /* not the delay's end */
        ff_close(&f);
    }
}

TEST(genchange_on_mock)
{
    struct ff f;
    struct top r;
    struct rio_desc n;

    targets_init();
    ff_open(&f, &targets[0], "genchange:chunk=1:count=1");
    ff_read_one(&f, &r, 1, 0);
    T_EQ(r.res, RIO_EGENERATION);
    T_TRUE(all_bytes(f.dst + CS, CS, 0x11));
    T_OK(f.x.ops->lookup(f.x.t, "k", &n));
    T_GT(n.generation, f.d.generation);
    rio_desc_cleanup(&n);
    ff_close(&f);
}

TEST(metadata_errors)
{
    EACH_TARGET(tg)
    {
        struct ff f;
        struct rio_desc d;
        void *up;

        ff_open(&f, tg, "");
        add_fault(&f.x, "meta_error:op=lookup:error=ETIMEDOUT:count=1");
        T_ERR(f.x.ops->lookup(f.x.t, "k", &d), -ETIMEDOUT);
        T_OK(f.x.ops->lookup(f.x.t, "k", &d));
        rio_desc_cleanup(&d);
        add_fault(&f.x, "meta_error:op=put_open:count=1");
        T_ERR(f.x.ops->put_open(f.x.t, "k3", SIZE, CS, &up), RIO_ESERVER);
        /* A failing commit consumes (aborts) its upload: nothing is left. */
        add_fault(&f.x, "meta_error:op=put_commit:error=EIO:count=1");
        {
            struct rio_desc d3;
            T_ERR(put_object(&f.x, "k3", f.src, SIZE, CS, &d3), -EIO);
        }
        T_ERR(f.x.ops->lookup(f.x.t, "k3", &d), RIO_ENOTFOUND);
        if (strcmp(tg->name, "mock") == 0)
            T_EQ(counters(&f.x).uploads_open, 0u);
        else
            T_EQ(fu_tmp_files(), 0);
        add_fault(&f.x, "meta_error:op=remove:error=EIO:count=1");
        T_ERR(f.x.ops->remove(f.x.t, "k"), -EIO);
        T_OK(f.x.ops->remove(f.x.t, "k"));
        /* delay=: the error comes that late. */
        add_fault(&f.x, "meta_error:op=lookup:error=EIO:count=1:delay=60");
        {
            uint64_t t0 = rio__now_ns();
            T_ERR(f.x.ops->lookup(f.x.t, "k", &d), -EIO);
            T_GE(rio__now_ns() - t0, 60000000u);
        }
        /* delay on a metadata call: made that late, and it goes through. */
        add_fault(&f.x, "delay:op=put_commit:count=1:delay=60");
        {
            struct rio_desc d4;
            uint64_t t0 = rio__now_ns();
            T_OK(put_object(&f.x, "k4", f.src, SIZE, CS, &d4));
            T_GE(rio__now_ns() - t0, 60000000u);
            rio_desc_cleanup(&d4);
            T_OK(f.x.ops->remove(f.x.t, "k4"));
        }
        T_EQ(counters(&f.x).faults_fired, 6u);
        ff_close(&f);
    }
}

/* ------------------------------------------------------------ path state */

/*
 * The inner transport reports path state on its own handle; the engine set
 * its callback on the filter's. A report of the wrapped mock must still
 * reach the engine: path 1 reported down carries nothing of the next GET.
 */
TEST(inner_path_events_reach_the_engine)
{
    struct rio_options o;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    struct rio_client *c;
    uint8_t *src = pattern(SIZE, 5), *dst = malloc(SIZE);

    rio_options_init(&o);
    o.chunk_size = CS;
    o.cooldown_base_ms = 600000; /* only an UP report ends it */
    o.cooldown_cap_ms = 600000;
    o.adapt = -1; /* both paths from the first op: the report is what is tested */
    T_OK(rio_client_new("mock://ffpe?paths=2&rate=400M&lat=200us", &o, &c));
    T_EQ(rio_put(c, "pe", src, SIZE, NULL, NULL), 0);
    struct rio_transport *inner = rio__fault_inner(rio__client_transport(c));
    T_TRUE(inner != rio__client_transport(c));

    rio__t_path_event(inner, 1, RIO_PATH_DOWN, -ECONNREFUSED);
    T_EQ(rio_get(c, "pe", dst, SIZE, &call), (int64_t)SIZE);
    T_MEMEQ(dst, src, SIZE);
    T_EQ(st.path[1].bytes, 0u);
    T_EQ(st.path[0].bytes, (uint64_t)SIZE);
    rio__t_path_event(inner, 1, RIO_PATH_UP, 0);
    T_EQ(rio_get(c, "pe", dst, SIZE, &call), (int64_t)SIZE);
    T_GT(st.path[1].bytes, 0u);
    rio_client_destroy(c);
    free(src);
    free(dst);
}
