/* SPDX-License-Identifier: Apache-2.0 */
/* T_TIMEOUT 60 */
/* T_LABELS unit */
/*
 * What embedders rely on (issue 14): rio_version, rio_backends and
 * rio_has_scheme; the growable structs keep their size (ABI rules in
 * include/railio.h); a mock-only program loads neither librados nor
 * libcurl; the rados:// and s3:// modules load from RIO_MODULE_DIR on first
 * use, and a missing one fails with a message naming it. (The exported-symbol list: test
 * symbols/exports.)
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "railio.h"
#include "t.h"
#include "transport/module.h"

/* 1 if a mapping of this process names lib. */
static int maps_has(const char *lib)
{
    char line[4096];
    int found = 0;
    FILE *f = fopen("/proc/self/maps", "r");

    if (!f)
        return -1;
    while (!found && fgets(line, sizeof(line), f))
        found = strstr(line, lib) != NULL;
    fclose(f);
    return found;
}

#if defined(RIO_HAVE_RADOS) || defined(RIO_HAVE_CURL)
/* What rio_client_new(url) says on stderr (it must fail with RIO_EURL). */
/* rio_client_new(url) fails with RIO_ENOTSUP (this build lacks the
 * scheme's module: no usage error) and says why in rio_error_detail(),
 * copied to msg, every time; nothing on stderr (the CLI prints the detail:
 * it was said twice). */
static void client_new_stderr(const char *url, char *msg, size_t cap)
{
    char path[] = "/tmp/rio-abi-err-XXXXXX", err[256];
    struct rio_client *c = NULL;
    int fd = mkstemp(path), saved = dup(2);
    ssize_t n;

    T_GE(fd, 0);
    T_GE(saved, 0);
    T_EQ(dup2(fd, 2), 2);
    T_ERR(rio_client_new(url, NULL, &c), RIO_ENOTSUP);
    snprintf(msg, cap, "%s", rio_error_detail());
    T_EQ(dup2(saved, 2), 2);
    close(saved);
    T_NULL(c);
    n = pread(fd, err, sizeof(err) - 1, 0);
    close(fd);
    unlink(path);
    err[n > 0 ? n : 0] = '\0';
    T_STREQ(err, "");
}
#endif

TEST(version_matches_header)
{
    char want[32];

    snprintf(want, sizeof(want), "%d.%d.%d", RIO_VERSION_MAJOR, RIO_VERSION_MINOR,
             RIO_VERSION_PATCH);
    T_STREQ(rio_version(), want);
}

TEST(backends_listed_are_openable)
{
    char list[256], *tok, *save = NULL;
    unsigned n = 0;

    snprintf(list, sizeof(list), "%s", rio_backends());
    T_NOTNULL(strstr(list, "mock"));
    T_NOTNULL(strstr(list, "railio"));
    for (tok = strtok_r(list, " ", &save); tok; tok = strtok_r(NULL, " ", &save), n++)
        T_EQ(rio_has_scheme(tok), 1);
    T_GE(n, 2);
    T_EQ(rio_has_scheme("gopher"), 0);
    T_EQ(rio_has_scheme(""), 0);
    T_EQ(rio_has_scheme(NULL), 0);
    /* The harness points RIO_MODULE_DIR at build/modules. */
#ifdef RIO_HAVE_RADOS
    T_NOTNULL(strstr(rio_backends(), "rados"));
#endif
#ifdef RIO_HAVE_CURL
    T_NOTNULL(strstr(rio_backends(), "s3 http https"));
    T_EQ(rio_has_scheme("http"), 1);
    T_EQ(rio_has_scheme("s3"), 1);
    T_EQ(rio_has_scheme("s"), 0);
    T_EQ(rio_has_scheme("http https"), 0);
#endif
}

/* The reserved tails keep these sizes for the whole MAJOR version: a new
 * field must take reserved words, not grow the struct. */
TEST(growable_structs_keep_their_size)
{
    if (sizeof(void *) != 8)
        T_SKIP("sizes are pinned for LP64");
    T_EQ(sizeof(struct rio_options), 152);
    T_EQ(sizeof(struct rio_call), 112);
    T_EQ(sizeof(struct rio_stats), 1616);
    /* tls (4 bytes) and adapt (4 bytes, once reserved32) took the first
     * reserved word */
    T_EQ(sizeof(((struct rio_options *)0)->reserved), 56);
    T_EQ(offsetof(struct rio_options, tls) + 4, offsetof(struct rio_options, adapt));
    T_EQ(offsetof(struct rio_options, tls) + 8, offsetof(struct rio_options, reserved));
    T_EQ(sizeof(((struct rio_call *)0)->reserved), 64);
    /* verify_bytes and verify_cpu_ns, then sink_ns and source_ns took two
     * reserved words each; the four adapt_ fields (4 bytes each) two more */
    T_EQ(sizeof(((struct rio_stats *)0)->reserved), 72);
    T_EQ(offsetof(struct rio_stats, replans) + 8, offsetof(struct rio_stats, verify_bytes));
    T_EQ(offsetof(struct rio_stats, verify_cpu_ns) + 8, offsetof(struct rio_stats, sink_ns));
    T_EQ(offsetof(struct rio_stats, source_ns) + 8, offsetof(struct rio_stats, adapt_paths));
    T_EQ(offsetof(struct rio_stats, adapt_paths) + 16, offsetof(struct rio_stats, reserved));
}

TEST(mock_only_never_loads_librados)
{
    struct rio_client *c;
    char buf[4096], out[4096];

    T_OK(rio_client_new("mock://abi", NULL, &c));
    memset(buf, 'a', sizeof(buf));
    T_OK(rio_put(c, "k", buf, sizeof(buf), NULL, NULL));
    T_EQ(rio_get(c, "k", out, sizeof(out), NULL), (int64_t)sizeof(out));
    T_MEMEQ(out, buf, sizeof(buf));
    rio_client_destroy(c);
    T_EQ(maps_has("librados"), 0);
    T_EQ(maps_has("railio-rados"), 0);
    T_EQ(maps_has("libcurl"), 0);
    T_EQ(maps_has("railio-s3"), 0);
}

#if defined(RIO_HAVE_CURL) || defined(RIO_HAVE_RADOS)
/* The first lookup of scheme loads the module file so and its library lib,
 * neither mapped before; the module carries schemes (NULL-ended) in order
 * and the library's version, and a lookup of again finds the same module. */
static void expect_module_loads(const char *scheme, const char *so, const char *lib,
                                const char *const *schemes, const char *again)
{
    const struct rio_module *m;
    unsigned n = 0;

    T_EQ(maps_has(so), 0);
    T_EQ(maps_has(lib), 0);
    m = rio__module_for(scheme);
    T_NOTNULL(m);
    while (schemes[n])
        n++;
    T_EQ(m->nops, n);
    for (unsigned i = 0; i < n; i++)
        T_STREQ(m->ops[i]->scheme, schemes[i]);
    T_STREQ(m->version, rio_version());
    T_EQ(maps_has(so), 1);
    T_EQ(maps_has(lib), 1);
    T_PTREQ(rio__module_for(again), m);
}
#endif

/* A module answers only a library whose structures it was built against:
 * a host that says another size of the transport ops or of a transport
 * gets NULL (the registry then says the file is not a module of this
 * railio, instead of the first call of its scheme crashing). */
TEST(module_refuses_a_host_of_other_structures)
{
#ifndef RIO_HAVE_CURL
    T_SKIP("built without s3://");
#else
    char path[4096];
    const char *dir = getenv("RIO_MODULE_DIR");
    struct rio_module_host h = *rio__module_host();

    T_NOTNULL(dir);
    snprintf(path, sizeof(path), "%s/railio-s3.so", dir);
    void *so = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    T_NOTNULL(so);
    rio_module_entry_fn entry = (rio_module_entry_fn)(uintptr_t)dlsym(so, RIO_MODULE_ENTRY);
    T_NOTNULL(entry);
    h.ops_size += 8;
    T_NULL(entry(&h));
    h.ops_size -= 8;
    h.transport_size -= 8;
    T_NULL(entry(&h));
    h.transport_size += 8;
    h.io_size += 8;
    T_NULL(entry(&h));
    dlclose(so);
    T_NOTNULL(rio__module_for("s3")); /* the true host's */
#endif
}

TEST(s3_module_loads_on_first_use)
{
#ifndef RIO_HAVE_CURL
    T_SKIP("built without s3://");
#else
    static const char *const schemes[] = {"s3", "http", "https", NULL};

    expect_module_loads("https", "railio-s3.so", "libcurl", schemes, "s3");
    T_EQ(maps_has("librados"), 0);
#endif
}

TEST(rados_module_loads_on_first_use)
{
#ifndef RIO_HAVE_RADOS
    T_SKIP("built without rados://");
#else
    static const char *const schemes[] = {"rados", NULL};

    expect_module_loads("rados", "railio-rados.so", "librados", schemes, "rados");
    T_NULL(rio__module_for("mock"));
#endif
}

TEST(missing_module_is_a_clear_error)
{
#ifndef RIO_HAVE_RADOS
    T_SKIP("built without rados://");
#else
    char msg[4096];

    T_OK(setenv("RIO_MODULE_DIR", "/nonexistent/railio-modules", 1));
    T_EQ(rio_has_scheme("rados"), 0);
    T_NULL(strstr(rio_backends(), "rados"));
    client_new_stderr("rados://pool", msg, sizeof(msg));
    T_NOTNULL(strstr(msg, "railio-rados.so"));
    T_NOTNULL(strstr(msg, "/nonexistent/railio-modules"));
    T_NOTNULL(strstr(msg, "RIO_MODULE_DIR"));
    client_new_stderr("rados://pool", msg, sizeof(msg));
    T_NOTNULL(strstr(msg, "railio-rados.so")); /* each time */
#endif
}

/* A module that is there but does not load (here: not even an ELF file; on a
 * real system: librados2 or libcurl4 missing) names the Debian package. */
TEST(unloadable_module_names_the_package)
{
#if !defined(RIO_HAVE_RADOS) || !defined(RIO_HAVE_CURL)
    T_SKIP("built without rados:// or s3://");
#else
    char dir[] = "/tmp/rio-abi-mod-XXXXXX", file[128], msg[4096];
    const char *const mods[] = {"railio-rados.so", "railio-s3.so"};
    FILE *f;

    T_NOTNULL(mkdtemp(dir));
    for (unsigned i = 0; i < 2; i++) {
        snprintf(file, sizeof(file), "%s/%s", dir, mods[i]);
        f = fopen(file, "w");
        T_NOTNULL(f);
        fputs("not a shared object\n", f);
        fclose(f);
    }
    T_OK(setenv("RIO_MODULE_DIR", dir, 1));
    T_EQ(rio_has_scheme("rados"), 1);                    /* present, */
    client_new_stderr("rados://pool", msg, sizeof(msg)); /* but not loadable */
    T_NOTNULL(
        strstr(msg, "rados:// needs the Debian package librados2 (apt-get install librados2)"));
    client_new_stderr("https://example.org/x", msg, sizeof(msg));
    T_NOTNULL(strstr(msg, "https:// needs the Debian package libcurl4 (apt-get install libcurl4)"));
    client_new_stderr("s3://bucket/x?endpoint=http://127.0.0.1:1", msg, sizeof(msg));
    T_NOTNULL(strstr(msg, "needs the Debian package libcurl4")); /* each open */
    for (unsigned i = 0; i < 2; i++) {
        snprintf(file, sizeof(file), "%s/%s", dir, mods[i]);
        unlink(file);
    }
    rmdir(dir);
#endif
}
