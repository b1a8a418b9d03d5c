/* SPDX-License-Identifier: Apache-2.0 */
/*
 * s3:// through a man in the middle (tests/harness/mitm.py) in front of a
 * real radosgw: in every mode (flip, truncate, stall, dup, delay) and
 * direction, one HTTP message of a multipart PUT and one of a GET is
 * damaged. Whatever happens: the GET never hands out a wrong byte, the PUT
 * never leaves a wrong object or an object under another key (read back and
 * listed through a clean endpoint), and each call ends within op_timeout +
 * 1 s, with success or an error that says what happened (a request whose
 * signed bytes were flipped is refused by radosgw: 403, -EACCES).
 */
/* T_TIMEOUT 240 */
/* T_LABELS net;ceph */
#include "t.h"

#ifndef RIO_HAVE_CURL
TEST(s3_not_built)
{
    T_SKIP("built without libcurl (RIO_WITH_CURL)");
}
#else

#define SU_WITH_RGW
#include "mitm_env.h"
#include "s3_util.h"
#include <stdbool.h>

#define BUCKET "riomitm"
#define CH (5 * SU_MIB)
#define OBJ (2 * CH + 4321) /* three parts, the last one short */
#define OP_TIMEOUT_MS 3000u

static const char *const modes[] = {"flip", "truncate", "stall", "dup", "delay"};
static const char *const dirs[] = {"c2s", "s2c"};

static struct rio_client *client_at(const char *endpoint)
{
    struct rio_options o;
    char url[512];

    su_opts(&o, CH, 2);
    o.op_timeout_ms = OP_TIMEOUT_MS;
    o.retry_attempts = 4;
    /* The part check pinned (what checksum=auto picks on this radosgw):
     * no probes, so the damaged message is one of the PUT's own. */
    snprintf(url, sizeof(url), "s3://" BUCKET "?endpoint=%s&stall=1s&checksum=sha256", endpoint);
    return su_client(url, &o);
}

/* A proxy to radosgw damaging message nth in dir. */
static void proxy(struct mitm_env *m, const char *rgw, const char *mode, const char *dir,
                  unsigned nth)
{
    char target[64], n[16];
    const char *host = strstr(rgw, "://");
    snprintf(target, sizeof(target), "%s", host ? host + 3 : rgw);
    snprintf(n, sizeof(n), "%u", nth);
    const char *args[] = {"--proto", "http", "--mode",     mode,   "--dir",  dir, "--nth", n,
                          "--count", "1",    "--delay-ms", "1500", "--seed", n,   NULL};
    mitm_start(m, target, args);
}

static void check_bounded(const char *what, uint64_t t0, int ret)
{
    uint64_t ms = su_now_ms() - t0;
    if (ms > OP_TIMEOUT_MS + 1000)
        T_FAIL("%s took %" PRIu64 " ms (%s), more than op_timeout + 1 s", what, ms,
               ret < 0 ? rio_errname(ret) : "ok");
    if (ret < 0 && !rio_errname(ret)[0])
        T_FAIL("%s: an error without a name (%d)", what, ret);
}

TEST(every_mode_and_direction)
{
    const char *rgw = su_rgw(BUCKET);
    char proxied[64], key[64];
    int64_t alloc0 = rio__alloc_outstanding();
    uint8_t *src = su_pattern(OBJ, 77), *dst = malloc(OBJ);
    struct rio_client *clean = client_at(rgw);
    unsigned ok_puts = 0, ok_gets = 0, faults = 0, k = 0;

    T_NOTNULL(dst);
    for (unsigned mi = 0; mi < sizeof(modes) / sizeof(modes[0]); mi++)
        for (unsigned di = 0; di < 2; di++, k++) {
            struct mitm_env m;
            snprintf(key, sizeof(key), "mitm/%s-%s", modes[mi], dirs[di]);

            /* PUT through the proxy: message 2..6 of its ~8 (parts, sidecar,
             * complete, HEADs) damaged. */
            proxy(&m, rgw, modes[mi], dirs[di], 2 + k % 5);
            snprintf(proxied, sizeof(proxied), "http://%s", m.addr);
            struct rio_client *c = client_at(proxied);
            uint64_t t0 = su_now_ms();
            int pr = rio_put(c, key, src, OBJ, NULL, NULL);
            check_bounded(key, t0, pr);
            faults += (unsigned)mitm_faults(&m);
            rio_client_destroy(c);
            mitm_stop(&m);

            /* Read back clean: the PUT's bytes, or nothing when it failed. */
            memset(dst, 0, OBJ);
            int64_t got = rio_get(clean, key, dst, OBJ, NULL);
            if (pr == 0) {
                ok_puts++;
                T_EQ(got, (int64_t)OBJ);
                T_MEMEQ(dst, src, OBJ);
            } else if (got >= 0) {
                T_EQ(got, (int64_t)OBJ); /* a commit that happened: whole */
                T_MEMEQ(dst, src, OBJ);
            } else {
                T_ERR(got, RIO_ENOTFOUND);
                T_OK(rio_put(clean, key, src, OBJ, NULL, NULL));
            }

            /* GET through the proxy: the HEAD, the sidecar or a range. */
            proxy(&m, rgw, modes[mi], dirs[di], 1 + k % 4);
            snprintf(proxied, sizeof(proxied), "http://%s", m.addr);
            c = client_at(proxied);
            memset(dst, 0xA5, OBJ);
            t0 = su_now_ms();
            got = rio_get(c, key, dst, OBJ, NULL);
            check_bounded(key, t0, (int)(got < 0 ? got : 0));
            if (got >= 0) {
                ok_gets++;
                T_EQ(got, (int64_t)OBJ);
                T_MEMEQ(dst, src, OBJ);
            }
            faults += (unsigned)mitm_faults(&m);
            printf("  %-22s PUT %s, GET %s\n", key, pr < 0 ? rio_errname(pr) : "ok",
                   got < 0 ? rio_errname((int)got) : "ok");
            rio_client_destroy(c);
            mitm_stop(&m);
        }

    /* No key but ours was written: each object and its sidecar. */
    char *list;
    T_EQ(su_curl(rgw, "", BUCKET "?prefix=mitm%2F", &list, NULL), 200);
    unsigned keys = 0;
    for (const char *p = list; (p = strstr(p, "<Key>")); p += 5) {
        keys++;
        bool known = false;
        for (unsigned mi = 0; mi < sizeof(modes) / sizeof(modes[0]) && !known; mi++)
            for (unsigned di = 0; di < 2 && !known; di++) {
                snprintf(key, sizeof(key), "<Key>mitm/%s-%s", modes[mi], dirs[di]);
                size_t kl = strlen(key);
                known = !strncmp(p, key, kl) && (p[kl] == '<' || !strncmp(p + kl, ".railio-", 8));
            }
        if (!known)
            T_FAIL("a key nobody wrote: %.80s", p);
    }
    free(list);
    printf("  %u faults fired, %u/10 PUTs and %u/10 GETs succeeded, %u keys\n", faults, ok_puts,
           ok_gets, keys);
    T_GE(faults, 18u); /* a message to damage was there in (almost) every case */
    for (unsigned mi = 0; mi < sizeof(modes) / sizeof(modes[0]); mi++)
        for (unsigned di = 0; di < 2; di++) {
            snprintf(key, sizeof(key), "mitm/%s-%s", modes[mi], dirs[di]);
            (void)rio_delete(clean, key);
        }
    free(src);
    free(dst);
    su_close(clean, alloc0);
}

#endif
