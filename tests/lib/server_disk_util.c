/* SPDX-License-Identifier: Apache-2.0 */
/* server_disk_util: railiod's disk-tier tests' data directories and versions
 * (see server_disk_util.h). */
#include "server_disk_util.h"

#include "tlib.h"

const char *disk_dir_make(void)
{
    return t_scratch_dir("railiod-data");
}

unsigned disk_dir_count(const char *dir, const char *prefix, char *first, size_t cap)
{
    DIR *d = opendir(dir);
    struct dirent *de;
    unsigned n = 0;

    if (!d)
        T_FAIL("opendir %s: %s", dir, strerror(errno));
    while ((de = readdir(d)) != NULL)
        if (!strncmp(de->d_name, prefix, strlen(prefix))) {
            if (n++ == 0 && first)
                snprintf(first, cap, "%s/%s", dir, de->d_name);
        }
    closedir(d);
    return n;
}

uint64_t dv_size(unsigned key, uint64_t seq, uint64_t max)
{
    uint64_t h = rio__xxh3(&seq, sizeof(seq)) ^ ((uint64_t)key * 0x9e3779b97f4a7c15ull);
    return DV_HDR + h % (max - DV_HDR + 1);
}

uint8_t *dv_make(unsigned key, uint64_t seq, uint64_t max, uint64_t *size)
{
    uint64_t n = dv_size(key, seq, max);
    uint8_t *p = malloc(n);
    t_fill_pattern(p, n, ((uint64_t)key << 32) ^ seq);
    memcpy(p, "DV1\0\0\0\0\0", 8);
    memcpy(p + 8, &seq, 8);
    uint64_t k = key;
    memcpy(p + 16, &k, 8);
    *size = n;
    return p;
}

int64_t dv_check(unsigned key, const uint8_t *buf, uint64_t n, uint64_t max)
{
    uint64_t seq, k, want;
    if (n < DV_HDR || memcmp(buf, "DV1\0\0\0\0\0", 8) != 0)
        return -1;
    memcpy(&seq, buf + 8, 8);
    memcpy(&k, buf + 16, 8);
    if (k != key)
        return -1;
    uint8_t *exp = dv_make(key, seq, max, &want);
    int ok = want == n && memcmp(exp, buf, n) == 0;
    free(exp);
    return ok ? (int64_t)seq : -1;
}

int dv_get(struct wc *c, const char *key, uint8_t **buf, struct rio_proto_desc *d)
{
    uint8_t *keep = NULL;
    int st = wc_lookup(c, key, d, &keep);
    free(keep);
    *buf = NULL;
    if (st != 0)
        return st;
    *buf = malloc(d->size ? d->size : 1);
    for (uint64_t off = 0; off < d->size;) {
        uint32_t len = d->size - off > (1u << 20) ? (1u << 20) : (uint32_t)(d->size - off);
        st = wc_read(c, key, d->generation, off, len, *buf + off);
        if (st != 0) {
            free(*buf);
            *buf = NULL;
            return st;
        }
        off += len;
    }
    return 0;
}

uint64_t dv_put(struct wc *c, const char *key, unsigned k, uint64_t seq, uint64_t max,
                uint64_t chunk)
{
    uint64_t n;
    uint8_t *d = dv_make(k, seq, max, &n);
    uint64_t gen = wc_put(c, key, d, n, chunk);

    free(d);
    return gen;
}

void dv__expect(struct wc *c, const char *key, unsigned k, uint64_t seq, uint64_t max, uint64_t gen,
                const char *file, int line)
{
    struct rio_proto_desc d;
    uint8_t *buf = NULL;
    int st = dv_get(c, key, &buf, &d);

    if (st != 0)
        t__fail(file, line, "%s: %s", key, rio_errname(st));
    t__check_i(file, line, "dv_check(...)", "seq", T__EQ, dv_check(k, buf, d.size, max),
               (int64_t)seq);
    if (gen)
        t__check_u(file, line, "d.generation", "gen", T__EQ, d.generation, gen);
    free(buf);
}
