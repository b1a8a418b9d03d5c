/* SPDX-License-Identifier: Apache-2.0 */
/* tx_util: a transport driven through its ops table, without a client (see tx_util.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "tx_util.h"
#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "core/url.h"
#include "railio.h"
#include "railio_mock.h"
#include "t.h"
#include "tlib.h"
#include "transport/fault.h"
#include "transport/mock.h"
#include "transport/transport.h"
#include <errno.h>
#include <stdlib.h>
#include <string.h>

int tx_open_opts(struct tx *x, const char *url, const struct rio_options *o)
{
    int ret;

    memset(x, 0, sizeof(*x));
    ret = rio__url_parse(url, &x->url);
    if (ret < 0)
        return ret;
    x->ops = rio__transport_find(x->url.scheme);
    if (!x->ops) {
        rio__url_cleanup(&x->url);
        return RIO_EURL;
    }
    /* As a client opens it: with the fault filter stacked over the mock. */
    ret = rio__transport_open(x->ops, &x->url, o, &x->t);
    if (ret < 0) {
        rio__url_cleanup(&x->url);
        return ret;
    }
    x->ops = x->t->ops;
    return 0;
}

void tx_open(struct tx *x, const char *url)
{
    T_OK(tx_open_opts(x, url, NULL));
    T_NOTNULL(x->t);
}

void tx_close(struct tx *x)
{
    x->ops->close(x->t);
    rio__url_cleanup(&x->url);
}

void tx_reopen(struct tx *x, const char *url)
{
    struct tx y;
    tx_open(&y, url);
    tx_close(x);
    *x = y;
}

void top_complete(struct rio_io *io)
{
    struct top *o = (struct top *)io;
    o->ncomplete++;
    o->res = io->res;
    o->done_ns = rio__now_ns();
}

void top_read(struct top *o, const struct rio_desc *d, uint64_t idx, unsigned path, void *dst)
{
    memset(o, 0, sizeof(*o));
    o->io.kind = RIO_IO_READ;
    o->io.path = path;
    o->io.key = d->key;
    o->io.generation = d->generation;
    o->io.index = idx;
    o->io.off = idx * d->chunk_size;
    o->io.len = d->size - o->io.off < d->chunk_size ? d->size - o->io.off : d->chunk_size;
    o->io.dst = dst;
    o->io.xxh = d->xxh ? d->xxh[idx] : 0;
    o->io.complete = top_complete;
}

void top_write(struct top *o, void *up, uint64_t size, uint64_t cs, uint64_t idx, unsigned path,
               const uint8_t *src)
{
    memset(o, 0, sizeof(*o));
    o->io.kind = RIO_IO_WRITE;
    o->io.path = path;
    o->io.key = "unused";
    o->io.upload = up;
    o->io.index = idx;
    o->io.off = idx * cs;
    o->io.len = size - o->io.off < cs ? size - o->io.off : cs;
    o->io.src = src + o->io.off;
    o->io.xxh = rio__xxh3(o->io.src, o->io.len);
    o->io.complete = top_complete;
}

unsigned reap_all(struct tx *x, struct top *ops, unsigned n, int timeout_ms)
{
    uint64_t end = t_now_ms() + (uint64_t)timeout_ms;
    unsigned done = 0, i;

    for (;;) {
        done = 0;
        for (i = 0; i < n; i++)
            done += ops[i].ncomplete > 0;
        if (done == n || t_now_ms() >= end)
            break;
        T_GE(x->ops->reap(x->t, 10), 0);
    }
    for (i = 0; i < n; i++)
        T_LE(ops[i].ncomplete, 1);
    return done;
}

void reap_one(struct tx *x, struct top *o)
{
    T_EQ(reap_all(x, o, 1, 5000), 1u);
}

int put_object(struct tx *x, const char *key, const uint8_t *buf, uint64_t size, uint64_t cs,
               struct rio_desc *d)
{
    uint64_t n = size / cs + (size % cs != 0), i;
    struct top *ops = calloc(n ? n : 1, sizeof(*ops));
    struct rio_md5 md5 = {0};
    void *up;
    int ret;

    T_NOTNULL(ops);
    memset(d, 0, sizeof(*d));
    ret = x->ops->put_open(x->t, key, size, cs, &up);
    if (ret < 0) {
        free(ops);
        return ret;
    }
    for (i = 0; i < n; i++) {
        top_write(&ops[i], up, size, cs, i, (unsigned)(i % x->t->npaths), buf);
        T_OK(x->ops->submit(x->t, &ops[i].io));
    }
    T_EQ(reap_all(x, ops, (unsigned)n, 10000), (unsigned)n);
    for (i = 0; i < n; i++)
        T_EQ(ops[i].res, (int64_t)ops[i].io.len);
    strcpy(d->key, key);
    d->size = size;
    d->chunk_size = cs;
    d->nchunks = n;
    d->xxh = n ? rio__malloc(n * sizeof(uint64_t)) : NULL;
    for (i = 0; i < n; i++)
        d->xxh[i] = ops[i].io.xxh;
    T_OK(rio__md5_init(&md5));
    T_OK(rio__md5_update(&md5, buf, size));
    T_OK(rio__md5_final(&md5, d->etag));
    free(ops);
    ret = x->ops->put_commit(x->t, up, d);
    if (ret < 0)
        rio_desc_cleanup(d);
    return ret;
}

int64_t get_object(struct tx *x, const struct rio_desc *d, uint8_t *dst)
{
    struct top *ops = calloc(d->nchunks ? d->nchunks : 1, sizeof(*ops));
    int64_t ret = 0;
    uint64_t i;

    T_NOTNULL(ops);
    for (i = 0; i < d->nchunks; i++) {
        top_read(&ops[i], d, i, (unsigned)(i % x->t->npaths), dst + i * d->chunk_size);
        T_OK(x->ops->submit(x->t, &ops[i].io));
    }
    T_EQ(reap_all(x, ops, (unsigned)d->nchunks, 10000), (unsigned)d->nchunks);
    for (i = 0; i < d->nchunks && ret == 0; i++)
        if (ops[i].res != (int64_t)ops[i].io.len)
            ret = ops[i].res < 0 ? ops[i].res : RIO_ESHORT;
    free(ops);
    return ret;
}

uint8_t *pattern(uint64_t size, uint64_t seed)
{
    return t_pattern_buf((size_t)size, seed);
}

int all_bytes(const uint8_t *p, uint64_t n, uint8_t v)
{
    return t_count_byte(p, (size_t)n, v) == n;
}

struct rio_mock_counters counters(struct tx *x)
{
    struct rio_mock_counters c;
    rio__mock_counters(x->t, &c);
    rio__fault_counters(x->t, &c);
    return c;
}

void add_fault(struct tx *x, const char *spec)
{
    struct rio_mock_fault f;
    T_OK(rio_mock_fault_parse(spec, &f));
    T_OK(rio__fault_add(x->t, &f));
}
