/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Loadable backend modules. A backend whose library is heavy (rados://:
 * librados and the Ceph C++ runtime; s3:// and http(s)://: libcurl and its
 * 29 libraries) is built as its own shared object,
 * railio-<name>.so, opened by registry.c on the first use of its scheme, so
 * a program that never names the scheme neither links nor loads the library.
 *
 * A module exports one symbol, RIO_MODULE_ENTRY, a function that takes the
 * host's table of core helpers (the module calls back into the library only
 * through it: librailio.so exports no rio__ name) and returns the module's
 * description. The module's copies of the core helpers are the shims in
 * module_shim.c. A module built from another version of railio is refused:
 * abi, version and the struct sizes must all match.
 */
#ifndef RIO_TRANSPORT_MODULE_H
#define RIO_TRANSPORT_MODULE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "transport/transport.h"

#define RIO_MODULE_ABI 1
#define RIO_MODULE_ENTRY "railio_module_entry"
/* The module directory, environment override. */
#define RIO_MODULE_DIR_ENV "RIO_MODULE_DIR"

struct rio_rados_counters;
struct rio_xxh3_stream;

/* What the library lends a module. */
struct rio_module_host {
    uint32_t abi;  /* RIO_MODULE_ABI */
    uint32_t size; /* sizeof(struct rio_module_host) */
    const char *version;
    size_t url_size; /* sizeof(struct rio_url) */
    size_t io_size;  /* sizeof(struct rio_io) */
    /* sizeof(struct rio_transport_ops) and of struct rio_transport: a
     * module built against other ones reads the library's calls at the
     * wrong places (a module left from another build of the same version
     * crashed the first call of its scheme) */
    size_t ops_size, transport_size;
    void *(*malloc)(size_t n);
    void *(*calloc)(size_t n, size_t size);
    void *(*realloc)(void *p, size_t n);
    void (*free)(void *p);
    char *(*strdup)(const char *s);
    /* secret memory, out of core dumps (core/secret.h) */
    char *(*secret_strdup)(const char *s);
    void (*secret_free)(void *p);
    const char *(*url_param)(const struct rio_url *u, const char *key);
    int (*parse_size)(const char *s, uint64_t *out);
    int (*parse_duration_ns)(const char *s, uint64_t *out);
    int (*parse_bool)(const char *s, bool *out);
    int (*err_from_name)(const char *name);
    const char *(*errname)(int err);
    void (*copy_nt)(void *dst, const void *src, size_t n);
    uint64_t (*xxh3)(const void *p, size_t n);
    /* an option refused names itself (core/url.h) */
    int (*opt_bool)(const char *name, const char *v, bool *out);
    int (*opt_tristate)(const char *name, const char *v, const char *third, int *out);
    int (*opt_ms)(const char *name, const char *v, uint32_t *out);
    int (*opt_size)(const char *name, const char *v, uint64_t min, uint64_t max, unsigned flags,
                    uint64_t *out);
    int (*opt_uint)(const char *name, const char *v, uint64_t min, uint64_t max, uint64_t *out);
    /* the engine's classes (core/internal.h): what a transport may return
     * as retryable (transport.h) */
    int (*err_class)(int err);
    int (*class_is_retryable)(int cls);
    /* rio_error_detail's text (core/internal.h rio__detail), formatted */
    void (*detail)(const char *text);
    void (*detail_clear)(void);
    /* the one redaction of secrets from a URL (core/url.h) */
    const char *(*url_redact)(const char *url, char *out, size_t cap);
    /* the deadline and cancel token of this thread's metadata try
     * (core/internal.h), which a request waiting on a server stops at */
    uint64_t (*meta_deadline_ns)(void);
    const struct rio_cancel *(*meta_cancel)(void);
    int (*cancel_fired)(const struct rio_cancel *cx);
    /* core/checksum.h: S3's per-part CRC32C */
    uint32_t (*crc32c)(uint32_t crc, const void *p, size_t n);
    /* core/checksum.h: xxh3 over bytes as they arrive (s3:// GET bodies),
     * the same implementation as rio__xxh3 */
    struct rio_xxh3_stream *(*xxh3_stream_new)(void);
    void (*xxh3_stream_reset)(struct rio_xxh3_stream *x);
    void (*xxh3_stream_update)(struct rio_xxh3_stream *x, const void *p, size_t n);
    uint64_t (*xxh3_stream_digest)(const struct rio_xxh3_stream *x);
    void (*xxh3_stream_free)(struct rio_xxh3_stream *x);
    /* core/checksum.h: S3 parts' Content-MD5s, several at once */
    int (*md5_many)(const void *const *p, const size_t *len, unsigned n, uint8_t (*out)[16]);
    unsigned (*md5_lanes)(void);
};

/* What a module gives back. */
struct rio_module {
    uint32_t abi; /* RIO_MODULE_ABI */
    uint32_t size;
    const char *version;
    const struct rio_transport_ops *const *ops; /* nops transports */
    unsigned nops;
    /* rados: the test and bench hooks of rados.h, NULL elsewhere. */
    void (*rados_counters)(struct rio_transport *t, struct rio_rados_counters *out);
    int (*rados_chunk_name)(char *out, size_t cap, const char *key, uint64_t generation,
                            uint64_t index);
    void (*rados_test_after_head_read)(struct rio_transport *t, void (*fn)(void *arg), void *arg);
};

typedef const struct rio_module *(*rio_module_entry_fn)(const struct rio_module_host *host);

/* registry.c: the loaded module serving scheme (loading it on first use), or NULL. */
const struct rio_module *rio__module_for(const char *scheme);
/* registry.c: what the library lends its modules (tests). */
const struct rio_module_host *rio__module_host(void);

#endif
