/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The transports, reached by URL scheme. Built-in backends are in the table
 * below, each behind its build option; the ones with a heavy library
 * (rados://: librados; s3:// and http(s)://: libcurl) live in loadable
 * modules (transport/module.h) opened on the first use of their scheme. A
 * backend that is not built is absent, and opening its scheme fails with
 * RIO_EURL in the client; a module that is built but cannot be loaded says
 * why on stderr, once, naming the package.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/copy.h"
#include "core/internal.h"
#include "core/secret.h"
#include "core/url.h"
#include "transport/fault.h"
#include "transport/mock.h"
#include "transport/module.h"
#include "transport/transport.h"
#ifdef RIO_HAVE_RADOS
#include "transport/rados.h"
#endif

extern const struct rio_transport_ops rio__tcp_ops; /* railio://, no external library */
#ifdef RIO_HAVE_URING
extern const struct rio_transport_ops rio__file_ops;
#else
#include "transport/file/file.h"

/* Built without liburing: no client is a file:// one (the CLI's bench and
 * the tests call it). */
int rio_file_counters(struct rio_client *c, struct rio_file_counters *out)
{
    (void)c, (void)out;
    return RIO_EINVAL;
}
#endif

/* One entry a line, each behind its build option. */
/* clang-format off */
static const struct rio_transport_ops *const transports[] = {
    &rio__mock_ops,
    &rio__tcp_ops,
#ifdef RIO_HAVE_URING
    &rio__file_ops,
#endif
};
/* clang-format on */

/* The loadable modules: the schemes each serves (space-separated), its file
 * name, and the Debian package that carries the library it needs. */
struct module_slot {
    const char *schemes;
    const char *file;
    const char *package;
    int tried; /* under modules_mu */
    const struct rio_module *mod;
    char why[640]; /* why it did not load: every failed open's rio_error_detail() */
};

/* clang-format off */
static struct module_slot modules[] = {
#ifdef RIO_HAVE_CURL
    {"s3 http https", "railio-s3.so", "libcurl4", 0, NULL, ""},
#endif
#ifdef RIO_HAVE_RADOS
    {"rados", "railio-rados.so", "librados2", 0, NULL, ""},
#endif
    {NULL, NULL, NULL, 0, NULL, ""},
};
/* clang-format on */
static pthread_mutex_t modules_mu = PTHREAD_MUTEX_INITIALIZER;

/* A module's rio__detail text, formatted on its side (no va_list across). */
static void host_detail(const char *text)
{
    rio__detail("%s", text);
}

static const struct rio_module_host module_host = {
    .abi = RIO_MODULE_ABI,
    .size = sizeof(struct rio_module_host),
    .version = RIO_VERSION_STRING,
    .url_size = sizeof(struct rio_url),
    .io_size = sizeof(struct rio_io),
    .ops_size = sizeof(struct rio_transport_ops),
    .transport_size = sizeof(struct rio_transport),
    .malloc = rio__malloc,
    .calloc = rio__calloc,
    .realloc = rio__realloc,
    .free = rio__free,
    .strdup = rio__strdup,
    .secret_strdup = rio__secret_strdup,
    .secret_free = rio__secret_free,
    .url_param = rio__url_param,
    .parse_size = rio__parse_size,
    .parse_duration_ns = rio__parse_duration_ns,
    .parse_bool = rio__parse_bool,
    .err_from_name = rio__err_from_name,
    .errname = rio_errname,
    .copy_nt = rio__copy_nt,
    .xxh3 = rio__xxh3,
    .crc32c = rio__crc32c,
    .md5_many = rio__md5_many,
    .md5_lanes = rio__md5_lanes,
    .xxh3_stream_new = rio__xxh3_stream_new,
    .xxh3_stream_reset = rio__xxh3_stream_reset,
    .xxh3_stream_update = rio__xxh3_stream_update,
    .xxh3_stream_digest = rio__xxh3_stream_digest,
    .xxh3_stream_free = rio__xxh3_stream_free,
    .opt_bool = rio__opt_bool,
    .opt_tristate = rio__opt_tristate,
    .opt_ms = rio__opt_ms,
    .opt_size = rio__opt_size,
    .opt_uint = rio__opt_uint,
    .err_class = rio__err_class,
    .class_is_retryable = rio__class_is_retryable,
    .detail = host_detail,
    .detail_clear = rio__detail_clear,
    .url_redact = rio__url_redact,
    .meta_deadline_ns = rio__meta_deadline_ns,
    .meta_cancel = rio__meta_cancel,
    .cancel_fired = rio__cancel_fired,
};

/* 1 if "dir/file" fits in path[PATH_MAX] and is readable; path holds it. */
static int module_try(char *path, const char *dir, const char *suffix, const char *file)
{
    int n = snprintf(path, PATH_MAX, "%s%s/%s", dir, suffix, file);

    return n > 0 && n < PATH_MAX && access(path, R_OK) == 0;
}

/*
 * Find m's file, into path[PATH_MAX]: in $RIO_MODULE_DIR alone when set;
 * otherwise next to the object that holds this code (librailio.so in LIBDIR:
 * LIBDIR/railio/modules; a program of the build tree: build/modules; an
 * installed program, linked with librailio.a, in BINDIR:
 * BINDIR/RIO_MODULE_REL_DIR, i.e. ../LIBDIR/railio/modules, wherever the
 * prefix was moved), then in the configured install directory. 0 if found;
 * -1 with the places looked at in where (for the message).
 */
static int module_find(const struct module_slot *m, char *path, char *where, size_t wcap)
{
    const char *env = secure_getenv(RIO_MODULE_DIR_ENV);
    char self[PATH_MAX];
    Dl_info info;
    char *slash;

    if (env && env[0]) {
        snprintf(where, wcap, "%s", env);
        return module_try(path, env, "", m->file) ? 0 : -1;
    }
    snprintf(where, wcap, "%s", RIO_MODULE_INSTALL_DIR);
    /* The main program's name may be argv[0] without a directory: /proc/self/exe. */
    if (dladdr((void *)module_find, &info) && info.dli_fname &&
        realpath(strchr(info.dli_fname, '/') ? info.dli_fname : "/proc/self/exe", self) &&
        (slash = strrchr(self, '/'))) {
        *slash = '\0';
        snprintf(where, wcap, "%s/railio/modules, %s/modules, %s/%s, %s", self, self, self,
                 RIO_MODULE_REL_DIR, RIO_MODULE_INSTALL_DIR);
        if (module_try(path, self, "/railio/modules", m->file) ||
            module_try(path, self, "/modules", m->file) ||
            module_try(path, self, "/" RIO_MODULE_REL_DIR, m->file))
            return 0;
    }
    return module_try(path, RIO_MODULE_INSTALL_DIR, "", m->file) ? 0 : -1;
}

static void module_load(struct module_slot *m, const char *scheme)
{
    char path[PATH_MAX], where[3 * PATH_MAX];
    rio_module_entry_fn entry;
    const struct rio_module *mod;
    void *h;

    if (module_find(m, path, where, sizeof(where)) < 0) {
        /* A long list of places is cut: what comes first says enough. */
        if (snprintf(m->why, sizeof(m->why),
                     "%s:// is served by the module %s, found in none of: %s (install "
                     "railio's %s module, or set %s)",
                     scheme, m->file, where, scheme, RIO_MODULE_DIR_ENV) >= (int)sizeof(m->why))
            m->why[sizeof(m->why) - 2] = '.';
        return;
    }
    h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        if (snprintf(m->why, sizeof(m->why),
                     "%s:// needs the Debian package %s (apt-get install %s): %s", scheme,
                     m->package, m->package, dlerror()) >= (int)sizeof(m->why))
            m->why[sizeof(m->why) - 2] = '.';
        return;
    }
    entry = (rio_module_entry_fn)(uintptr_t)dlsym(h, RIO_MODULE_ENTRY);
    mod = entry ? entry(&module_host) : NULL;
    if (!mod || mod->abi != RIO_MODULE_ABI || mod->size != sizeof(*mod)) {
        if (snprintf(m->why, sizeof(m->why),
                     "%s is not a module of railio %s (rebuild or reinstall it)", path,
                     RIO_VERSION_STRING) >= (int)sizeof(m->why))
            m->why[sizeof(m->why) - 2] = '.';
        dlclose(h);
        return;
    }
    m->mod = mod; /* never closed: its code may run until the process ends */
}

/* Whether scheme is one of the space-separated words of list. */
static bool scheme_in(const char *list, const char *scheme)
{
    size_t n = strlen(scheme);

    if (n == 0 || strchr(scheme, ' '))
        return false;
    for (const char *p = list; (p = strstr(p, scheme)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == '\0'))
            return true;
    return false;
}

static struct module_slot *module_slot(const char *scheme)
{
    for (struct module_slot *m = modules; m->schemes; m++)
        if (scheme_in(m->schemes, scheme))
            return m;
    return NULL;
}

/* The backends this build left out, and what would bring each in: their
 * URLs are not malformed, this build cannot serve them. */
/* clang-format off */
static const struct {
    const char *schemes, *why;
} left_out[] = {
#ifndef RIO_HAVE_URING
    {"file", "built without liburing (RIO_WITH_URING; Debian's liburing-dev)"},
#endif
#ifndef RIO_HAVE_CURL
    {"s3 http https", "built without libcurl (RIO_WITH_CURL; Debian's libcurl4-openssl-dev)"},
#endif
#ifndef RIO_HAVE_RADOS
    {"rados", "built without librados (RIO_WITH_RADOS; Debian's librados-dev)"},
#endif
    {NULL, NULL},
};
/* clang-format on */

const char *rio__transport_left_out(const char *scheme)
{
    for (size_t i = 0; scheme && left_out[i].schemes; i++)
        if (scheme_in(left_out[i].schemes, scheme))
            return left_out[i].why;
    return NULL;
}

const struct rio_module_host *rio__module_host(void)
{
    return &module_host;
}

/* The module serving scheme, loaded on the first call (only one attempt). */
const struct rio_module *rio__module_for(const char *scheme)
{
    struct module_slot *m = scheme ? module_slot(scheme) : NULL;
    const struct rio_module *mod;

    if (!m)
        return NULL;
    pthread_mutex_lock(&modules_mu);
    if (!m->tried) {
        m->tried = 1;
        module_load(m, scheme);
    }
    mod = m->mod;
    if (!mod && m->why[0])
        rio__detail("%s", m->why);
    pthread_mutex_unlock(&modules_mu);
    return mod;
}

bool rio__transport_module_scheme(const char *scheme)
{
    return scheme && module_slot(scheme) != NULL;
}

const struct rio_transport_ops *rio__transport_find(const char *scheme)
{
    const struct rio_module *mod;
    size_t i;

    if (!scheme)
        return NULL;
    for (i = 0; i < sizeof(transports) / sizeof(transports[0]); i++)
        if (strcmp(transports[i]->scheme, scheme) == 0)
            return transports[i];
    mod = rio__module_for(scheme);
    for (i = 0; mod && i < mod->nops; i++)
        if (strcmp(mod->ops[i]->scheme, scheme) == 0)
            return mod->ops[i];
    return NULL;
}

/*
 * The fault filter is stacked here, where every transport is opened, so
 * that one fault language (include/railio_mock.h) reaches every backend:
 * over a URL that names `faults=` (even empty: rules may come later through
 * rio_mock_fault_add), and always over mock://, whose tests expect it.
 */
int rio__transport_open(const struct rio_transport_ops *ops, const struct rio_url *url,
                        const struct rio_options *o, struct rio_transport **out)
{
    const char *spec = rio__url_param(url, "faults");
    struct rio_transport *t, *w;
    int ret;

    ret = ops->open(url, o, &t);
    if (ret < 0)
        return ret;
    if (!spec && ops != &rio__mock_ops) {
        *out = t;
        return 0;
    }
    ret = rio__fault_stack(t, spec, o, &w);
    if (ret < 0) {
        ops->close(t);
        return ret;
    }
    *out = w;
    return 0;
}

/* ----------------------------------------------------------- public */

const char *rio_version(void)
{
    return RIO_VERSION_STRING;
}

int rio_has_scheme(const char *scheme)
{
    char path[PATH_MAX], where[3 * PATH_MAX];
    struct module_slot *m;
    size_t t;

    if (!scheme)
        return 0;
    for (t = 0; t < sizeof(transports) / sizeof(transports[0]); t++)
        if (strcmp(transports[t]->scheme, scheme) == 0)
            return 1;
    m = module_slot(scheme);
    return m && module_find(m, path, where, sizeof(where)) == 0;
}

static char backends[256];
static pthread_once_t backends_once = PTHREAD_ONCE_INIT;

static void backends_fill(void)
{
    char path[PATH_MAX], where[3 * PATH_MAX];
    size_t t, len = 0;
    struct module_slot *m;

    for (t = 0; t < sizeof(transports) / sizeof(transports[0]) && len < sizeof(backends); t++)
        len += (size_t)snprintf(backends + len, sizeof(backends) - len, "%s%s", len ? " " : "",
                                transports[t]->scheme);
    for (m = modules; m->schemes && len < sizeof(backends); m++)
        if (module_find(m, path, where, sizeof(where)) == 0)
            len += (size_t)snprintf(backends + len, sizeof(backends) - len, "%s%s", len ? " " : "",
                                    m->schemes);
}

const char *rio_backends(void)
{
    pthread_once(&backends_once, backends_fill);
    return backends;
}

/* ------------------------------------------- rados.h hooks, through the module */

#ifdef RIO_HAVE_RADOS
void rio__rados_counters(struct rio_transport *t, struct rio_rados_counters *out)
{
    const struct rio_module *mod = rio__module_for("rados");

    if (mod && mod->rados_counters) {
        mod->rados_counters(t, out);
        return;
    }
    memset(out, 0, sizeof(*out));
}

int rio__rados_chunk_name(char *out, size_t cap, const char *key, uint64_t generation,
                          uint64_t index)
{
    const struct rio_module *mod = rio__module_for("rados");

    return mod && mod->rados_chunk_name ? mod->rados_chunk_name(out, cap, key, generation, index)
                                        : -1;
}

void rio__rados_test_after_head_read(struct rio_transport *t, void (*fn)(void *arg), void *arg)
{
    const struct rio_module *mod = rio__module_for("rados");

    if (mod && mod->rados_test_after_head_read)
        mod->rados_test_after_head_read(t, fn, arg);
}
#endif
