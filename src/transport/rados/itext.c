/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The rados:// key index's text: marker, entry names, entry values
 * (itext.h). No librados.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "core/key.h"
#include "railio.h"
#include "transport/rados/head.h"
#include "transport/rados/itext.h"

int rio__rados_idx_marker_format(char *out, size_t cap, unsigned shards, bool ready)
{
    return snprintf(out, cap, "railio-index 1\nshards %u\nstate %s\n", shards,
                    ready ? "ready" : "building");
}

int rio__rados_idx_marker_parse(const char *buf, size_t len, unsigned *shards, bool *ready)
{
    static const char head[] = "railio-index 1\nshards ";
    char back[RIO_RADOS_IDX_MARKER_MAX];
    unsigned n = 0;
    size_t i = sizeof(head) - 1;

    if (len >= sizeof(back) || len < i || memcmp(buf, head, i) != 0)
        return RIO_EPROTO;
    for (; i < len && buf[i] >= '0' && buf[i] <= '9' && n <= RIO_RADOS_IDX_SHARDS_MAX; i++)
        n = n * 10 + (unsigned)(buf[i] - '0');
    if (n < 1 || n > RIO_RADOS_IDX_SHARDS_MAX)
        return RIO_EPROTO;
    /* The rest must be what format writes for n and one of the states
     * (which also refuses leading zeros). */
    for (int r = 0; r < 2; r++) {
        int bl = rio__rados_idx_marker_format(back, sizeof(back), n, r);
        if (bl > 0 && (size_t)bl == len && memcmp(back, buf, len) == 0) {
            *shards = n;
            *ready = r;
            return 0;
        }
    }
    return RIO_EPROTO;
}

int rio__rados_idx_entry_name(char *out, const char *key, size_t keylen, uint64_t gen)
{
    memcpy(out, key, keylen);
    out[keylen] = '\0';
    snprintf(out + keylen + 1, 17, "%016" PRIx64, gen);
    return (int)(keylen + 17);
}

int rio__rados_idx_entry_split(const char *name, size_t len, size_t *keylen, uint64_t *gen)
{
    const char *nul = len ? memchr(name, '\0', len) : NULL;

    if (!nul)
        return RIO_EPROTO;
    size_t kl = (size_t)(nul - name);
    if (!rio__key_len_ok(kl) || len != kl + 17 || !rio__rados_hex16(nul + 1, gen) || !*gen)
        return RIO_EPROTO;
    *keylen = kl;
    return 0;
}

static bool etag_ok(const char *e, size_t n)
{
    if (n >= sizeof(((struct rio__rados_ival *)0)->etag))
        return false;
    for (size_t i = 0; i < n; i++)
        if (e[i] < '!' || e[i] > '~')
            return false;
    return true;
}

int rio__rados_ival_format(const struct rio__rados_ival *iv, char *out)
{
    size_t el = strnlen(iv->etag, sizeof(iv->etag));

    if (!iv->committed)
        return snprintf(out, RIO_RADOS_IDX_VAL_MAX, "%016" PRIx64, iv->at_ns);
    if (!etag_ok(iv->etag, el) || iv->mtime_s < 0)
        return -1;
    return snprintf(out, RIO_RADOS_IDX_VAL_MAX, "%016" PRIx64 " c %" PRIu64 " %" PRId64 " %s",
                    iv->at_ns, iv->size, iv->mtime_s, iv->etag);
}

/* A decimal without leading zeros (but "0") at v[*i..len), up to ' ' or the
 * end: false when there is none or it passes max. */
static bool dec(const char *v, size_t len, size_t *i, uint64_t max, uint64_t *out)
{
    size_t s = *i;
    uint64_t x = 0;

    for (; *i < len && v[*i] >= '0' && v[*i] <= '9'; (*i)++) {
        unsigned d = (unsigned)(v[*i] - '0');
        if (x > (max - d) / 10)
            return false;
        x = x * 10 + d;
    }
    if (*i == s || (v[s] == '0' && *i - s > 1))
        return false;
    *out = x;
    return true;
}

int rio__rados_ival_parse(const char *v, size_t len, struct rio__rados_ival *out)
{
    char hex[17];
    uint64_t mt;
    size_t i = 16;

    memset(out, 0, sizeof(*out));
    if (len < 16 || len >= RIO_RADOS_IDX_VAL_MAX)
        return RIO_EPROTO;
    memcpy(hex, v, 16);
    hex[16] = '\0';
    if (!rio__rados_hex16(hex, &out->at_ns))
        return RIO_EPROTO;
    if (len == 16)
        return 0;
    if (len < 19 || memcmp(v + 16, " c ", 3) != 0)
        return RIO_EPROTO;
    i = 19;
    /* A listing believes these without reading the head: no size an
     * object can have (a head's is at most INT64_MAX), no mtime its
     * nanoseconds cannot hold (the listing multiplies it: a forged
     * 9223372036854775807 overflowed there, which the sanitizer builds
     * abort on). */
    if (!dec(v, len, &i, INT64_MAX, &out->size) || i >= len || v[i++] != ' ' ||
        !dec(v, len, &i, INT64_MAX / 1000000000, &mt) || i >= len || v[i++] != ' ' ||
        !etag_ok(v + i, len - i))
        return RIO_EPROTO;
    out->mtime_s = (int64_t)mt;
    memcpy(out->etag, v + i, len - i);
    out->etag[len - i] = '\0';
    out->committed = true;
    return 0;
}
