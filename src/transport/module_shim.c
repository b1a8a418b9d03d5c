/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Built into each loadable backend module (never into the library): the
 * core helpers a backend calls, forwarded to the library that loaded the
 * module (struct rio_module_host), and the module's one exported symbol.
 * Everything here but the entry point is hidden.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/copy.h"
#include "core/internal.h"
#include "core/secret.h"
#include "core/url.h"
#include "transport/module.h"
#ifdef RIO_MODULE_RADOS
#include "transport/rados.h"
#endif

static const struct rio_module_host *host;

void *rio__malloc(size_t n)
{
    return host->malloc(n);
}

void *rio__calloc(size_t n, size_t size)
{
    return host->calloc(n, size);
}

void *rio__realloc(void *p, size_t n)
{
    return host->realloc(p, n);
}

void rio__free(void *p)
{
    host->free(p);
}

char *rio__strdup(const char *s)
{
    return host->strdup(s);
}

char *rio__secret_strdup(const char *s)
{
    return host->secret_strdup(s);
}

void rio__secret_free(void *p)
{
    host->secret_free(p);
}

const char *rio__url_param(const struct rio_url *u, const char *key)
{
    return host->url_param(u, key);
}

int rio__parse_size(const char *s, uint64_t *out)
{
    return host->parse_size(s, out);
}

int rio__parse_duration_ns(const char *s, uint64_t *out)
{
    return host->parse_duration_ns(s, out);
}

int rio__parse_bool(const char *s, bool *out)
{
    return host->parse_bool(s, out);
}

int rio__err_from_name(const char *name)
{
    return host->err_from_name(name);
}

const char *rio_errname(int err)
{
    return host->errname(err);
}

void rio__copy_nt(void *dst, const void *src, size_t n)
{
    host->copy_nt(dst, src, n);
}

uint64_t rio__xxh3(const void *p, size_t n)
{
    return host->xxh3(p, n);
}

uint32_t rio__crc32c(uint32_t crc, const void *p, size_t n)
{
    return host->crc32c(crc, p, n);
}

int rio__md5_many(const void *const *p, const size_t *len, unsigned n, uint8_t (*out)[16])
{
    return host->md5_many(p, len, n, out);
}

unsigned rio__md5_lanes(void)
{
    return host->md5_lanes();
}

struct rio_xxh3_stream *rio__xxh3_stream_new(void)
{
    return host->xxh3_stream_new();
}

void rio__xxh3_stream_reset(struct rio_xxh3_stream *x)
{
    host->xxh3_stream_reset(x);
}

void rio__xxh3_stream_update(struct rio_xxh3_stream *x, const void *p, size_t n)
{
    host->xxh3_stream_update(x, p, n);
}

uint64_t rio__xxh3_stream_digest(const struct rio_xxh3_stream *x)
{
    return host->xxh3_stream_digest(x);
}

void rio__xxh3_stream_free(struct rio_xxh3_stream *x)
{
    host->xxh3_stream_free(x);
}

int rio__opt_bool(const char *name, const char *v, bool *out)
{
    return host->opt_bool(name, v, out);
}

int rio__opt_tristate(const char *name, const char *v, const char *third, int *out)
{
    return host->opt_tristate(name, v, third, out);
}

int rio__opt_ms(const char *name, const char *v, uint32_t *out)
{
    return host->opt_ms(name, v, out);
}

int rio__opt_size(const char *name, const char *v, uint64_t min, uint64_t max, unsigned flags,
                  uint64_t *out)
{
    return host->opt_size(name, v, min, max, flags, out);
}

int rio__opt_uint(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *out)
{
    return host->opt_uint(name, v, min, max, out);
}

int rio__err_class(int err)
{
    return host->err_class(err);
}

int rio__class_is_retryable(int cls)
{
    return host->class_is_retryable(cls);
}

void rio__detail(const char *fmt, ...)
{
    char text[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(text, sizeof(text), fmt, ap);
    va_end(ap);
    host->detail(text);
}

void rio__detail_clear(void)
{
    host->detail_clear();
}

const char *rio__url_redact(const char *url, char *out, size_t cap)
{
    return host->url_redact(url, out, cap);
}

uint64_t rio__meta_deadline_ns(void)
{
    return host->meta_deadline_ns();
}

const struct rio_cancel *rio__meta_cancel(void)
{
    return host->meta_cancel();
}

int rio__cancel_fired(const struct rio_cancel *cx)
{
    return host->cancel_fired(cx);
}

#ifdef RIO_MODULE_RADOS
extern const struct rio_transport_ops rio__rados_ops;
static const struct rio_transport_ops *const module_ops[] = {&rio__rados_ops};
#endif
#ifdef RIO_MODULE_S3
extern const struct rio_transport_ops rio__s3_ops, rio__http_ops, rio__https_ops;
static const struct rio_transport_ops *const module_ops[] = {&rio__s3_ops, &rio__http_ops,
                                                             &rio__https_ops};
#endif

static const struct rio_module module = {
    .abi = RIO_MODULE_ABI,
    .size = sizeof(struct rio_module),
    .version = RIO_VERSION_STRING,
    .ops = module_ops,
    .nops = sizeof(module_ops) / sizeof(module_ops[0]),
#ifdef RIO_MODULE_RADOS
    .rados_counters = rio__rados_counters,
    .rados_chunk_name = rio__rados_chunk_name,
    .rados_test_after_head_read = rio__rados_test_after_head_read,
#endif
};

const struct rio_module *railio_module_entry(const struct rio_module_host *h);

/* NULL when the host is not the library this module was built with. */
__attribute__((visibility("default"))) const struct rio_module *
railio_module_entry(const struct rio_module_host *h)
{
    if (!h || h->abi != RIO_MODULE_ABI || h->size != sizeof(*h) || !h->version ||
        strcmp(h->version, RIO_VERSION_STRING) != 0 || h->url_size != sizeof(struct rio_url) ||
        h->io_size != sizeof(struct rio_io) || h->ops_size != sizeof(struct rio_transport_ops) ||
        h->transport_size != sizeof(struct rio_transport))
        return NULL;
    host = h;
    return &module;
}
