/* SPDX-License-Identifier: Apache-2.0 */
/* rados_util: the rados:// tests' clients and looks under the transport (see rados_util.h). */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "rados_util.h"

#include <sys/wait.h>

void ru_url(char *out, size_t cap, const char *pool, const char *extra)
{
    snprintf(out, cap, "rados://%s?conf=%s%s%s", pool, t_ceph_conf(), extra && *extra ? "&" : "",
             extra ? extra : "");
}

struct rio_client *ru_client_at(const char *file, int line, const char *pool, const char *extra,
                                const struct rio_options *o)
{
    char url[2048];

    ru_url(url, sizeof(url), pool, extra);
    return t__client_new(url, o, file, line);
}

unsigned ru_idx_shard(const char *key, size_t len)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)key[i]) * 0x100000001b3ull;
    return (unsigned)(h % RU_IDX_SHARDS);
}

void ru_idx_set(const char *pool, int shard, const char *name, size_t nlen, const char *val)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    size_t vlen = strlen(val);

    T_EQ(rados_ioctx_create(cl, pool, &io), 0);
    rados_ioctx_set_namespace(io, RU_IDX_NS);
    for (unsigned sh = 0; sh < RU_IDX_SHARDS; sh++) {
        if (shard >= 0 && sh != (unsigned)shard)
            continue;
        char sname[32];
        snprintf(sname, sizeof(sname), "shard.%u", sh);
        rados_write_op_t op = rados_create_write_op();
        rados_write_op_omap_set2(op, &name, &val, &nlen, &vlen, 1);
        T_EQ(rados_write_op_operate(op, io, sname, NULL, 0), 0);
        rados_release_write_op(op);
    }
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
}

void ru_idx_entry(const char *pool, const char *key, uint64_t gen, const char *val)
{
    char ename[RIO_KEY_MAX + 18];
    size_t kl = strlen(key);

    memcpy(ename, key, kl + 1);
    snprintf(ename + kl + 1, 17, "%016" PRIx64, gen);
    ru_idx_set(pool, (int)ru_idx_shard(key, kl), ename, kl + 17, val);
}

rados_t ru_admin(void)
{
    rados_t cl;

    if (rados_create(&cl, "admin") < 0)
        T_FAIL("rados_create");
    if (rados_conf_read_file(cl, t_ceph_conf()) < 0)
        T_FAIL("rados_conf_read_file");
    rados_conf_set(cl, "rados_osd_op_timeout", "20");
    rados_conf_set(cl, "rados_mon_op_timeout", "20");
    rados_conf_set(cl, "client_mount_timeout", "20");
    int ret = rados_connect(cl);
    if (ret < 0)
        T_FAIL("rados_connect: %d", ret);
    return cl;
}

/* Count pool's objects (every namespace): chunk objects (namespace
 * rio.chunk) under chunk_prefix into *chunks, the others under
 * other_prefix into *others (NULL prefix: all). */
static void count_objects(const char *pool, const char *chunk_prefix, const char *other_prefix,
                          uint64_t *chunks, uint64_t *others)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    rados_list_ctx_t lc;
    const char *entry, *key, *ns;
    int ret;

    *chunks = *others = 0;
    ret = rados_ioctx_create(cl, pool, &io);
    if (ret < 0)
        T_FAIL("rados_ioctx_create(%s): %d", pool, ret);
    rados_ioctx_set_namespace(io, LIBRADOS_ALL_NSPACES);
    ret = rados_nobjects_list_open(io, &lc);
    if (ret < 0)
        T_FAIL("rados_nobjects_list_open: %d", ret);
    while ((ret = rados_nobjects_list_next(lc, &entry, &key, &ns)) == 0) {
        int chunk = ns && strcmp(ns, RIO_RADOS_CHUNK_NS) == 0;
        const char *prefix = chunk ? chunk_prefix : other_prefix;

        if (!prefix || strncmp(entry, prefix, strlen(prefix)) == 0)
            (*(chunk ? chunks : others))++;
    }
    rados_nobjects_list_close(lc);
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    if (ret != -ENOENT)
        T_FAIL("rados_nobjects_list_next: %d", ret);
}

void ru_count(const char *pool, const char *prefix, uint64_t *chunks, uint64_t *others)
{
    count_objects(pool, prefix, NULL, chunks, others);
}

uint64_t ru_objects(const char *pool, const char *prefix)
{
    uint64_t ch, other;

    count_objects(pool, NULL, prefix, &ch, &other);
    return other;
}

uint64_t ru_chunks(const char *pool, const char *prefix)
{
    uint64_t ch, other;
    ru_count(pool, prefix, &ch, &other);
    return ch;
}

char *ru_head(const char *pool, const char *key, size_t *len)
{
    rados_t cl = ru_admin();
    rados_ioctx_t io;
    uint64_t size;
    time_t mt;
    char *b;

    if (rados_ioctx_create(cl, pool, &io) < 0)
        T_FAIL("rados_ioctx_create");
    if (rados_stat(io, key, &size, &mt) < 0)
        T_FAIL("no head object for %s", key);
    b = malloc(size + 1);
    int ret = rados_read(io, key, b, size, 0);
    if (ret < 0 || (uint64_t)ret != size)
        T_FAIL("rados_read head: %d", ret);
    b[size] = '\0';
    *len = size;
    rados_ioctx_destroy(io);
    rados_shutdown(cl);
    return b;
}

int ru_railio(char *out, size_t cap, const char *args)
{
    char cmd[4096];
    const char *bdir = getenv("T_BUILD_DIR");

    if (!bdir)
        T_SKIP("T_BUILD_DIR not set (run through ctest)");
    snprintf(out, cap, "%s/railio-out", t_ceph_dir());
    T_LT(snprintf(cmd, sizeof(cmd), "RIO_CEPH_CONF='%s' '%s/railio' %s >'%s' 2>&1", t_ceph_conf(),
                  bdir, args, out),
         (int)sizeof(cmd));
    uint64_t t0 = t_now_ms();
    int st = system(cmd);
    T_TRUE(WIFEXITED(st));
    size_t n;
    char *text = (char *)t_slurp(out, &n);
    fprintf(stderr, "$ railio %s -> %d (%" PRIu64 " ms)\n%.*s", args, WEXITSTATUS(st),
            t_now_ms() - t0, (int)n, text);
    free(text);
    return WEXITSTATUS(st);
}

unsigned ru_lines_with(const char *file, const char *a, const char *b)
{
    size_t n;
    char *text = (char *)t_slurp(file, &n), *save = NULL;
    unsigned k = 0;

    for (char *l = strtok_r(text, "\n", &save); l; l = strtok_r(NULL, "\n", &save))
        k += strstr(l, a) && (!b || strstr(l, b));
    free(text);
    return k;
}
