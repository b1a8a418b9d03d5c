/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 240 */
/*
 * railio:// end to end through the man-in-the-middle proxy
 * (tests/harness/mitm.py): one byte flipped in the Nth frame, client to
 * server or server to client, with and without a token. Whatever the call
 * returns: 0 wrong bytes delivered (a GET that succeeds has the object's
 * bytes), 0 wrong keys written (checked on the server directly, not through
 * the proxy: every object it holds is one the test PUT, under its own key,
 * with its own bytes), and every call ends within its deadline + 1 s.
 */
#include "mitm_env.h"
#include "tcp_util.h"

#define OBJ (4 * TU_CHUNK + 1000)
#define NTH_MAX 10

/* Every key attempted: absent, or exactly its data; the store holds no other. */
static void check_store(const char *addr, const char *token, unsigned nkeys, const uint8_t *data)
{
    struct wc c;
    unsigned found = 0;
    uint8_t *body = NULL;
    uint32_t blen = 0;
    struct rio_proto_stat_resp st;

    wc_connect(&c, addr);
    wc_hello(&c, token);
    for (unsigned i = 0; i < nkeys; i++) {
        char key[32];
        struct rio_proto_desc d;
        uint8_t *keep = NULL;
        snprintf(key, sizeof(key), "obj-%u", i);
        int r = wc_lookup(&c, key, &d, &keep);
        if (r == RIO_ENOTFOUND)
            continue;
        T_EQ(r, 0);
        T_EQ(d.size, (uint64_t)OBJ);
        uint8_t *back = malloc(OBJ);
        T_EQ(wc_read(&c, key, d.generation, 0, OBJ, back), 0);
        if (memcmp(back, data, OBJ) != 0)
            T_FAIL("%s holds other bytes than were PUT", key);
        free(back);
        free(keep);
        found++;
    }
    T_EQ(wc_call(&c, RIO_OP_STAT, NULL, 0, NULL, 0, &body, &blen), 0);
    T_OK(rio__proto_dec_stat_resp(body, blen, &st));
    free(body);
    if (st.objects != found)
        T_FAIL("the server holds %llu objects, %u under the keys PUT: a wrong key was written",
               (unsigned long long)st.objects, found);
    wc_close(&c);
}

static void flips(const char *token)
{
    struct srv_env e;
    char tok[256];
    uint8_t *data = tu_pattern(OBJ, 0x1234);
    uint8_t *got = malloc(OBJ);
    unsigned nkeys = 0, damaged = 0;

    srv_prepare(&e);
    if (token) {
        srv_write_token(&e, token, tok, sizeof(tok));
        const char *args[] = {"--auth-token-file", tok, "--progress-timeout", "1s", NULL};
        srv_start_listen(&e, NULL, args);
    } else {
        const char *args[] = {"--progress-timeout", "1s", NULL};
        srv_start_listen(&e, NULL, args);
    }
    for (int dir = 0; dir < 2; dir++) {
        for (int nth = 1; nth <= NTH_MAX; nth++) {
            struct mitm_env m;
            char nths[16], seed[16], url[256];
            struct rio_options o;
            struct rio_client *c = NULL;
            snprintf(nths, sizeof(nths), "%d", nth);
            snprintf(seed, sizeof(seed), "%d", 100 * dir + nth);
            const char *args[] = {
                "--proto", "railio", "--mode", "flip", "--dir", dir ? "s2c" : "c2s",
                "--nth",   nths,     "--seed", seed,   NULL};
            mitm_start(&m, e.addr[0], args);
            /* Every connection through the proxy: the control one (the URL)
             * and the data ones (rails=). */
            snprintf(url, sizeof(url),
                     "railio://%s?rails=%s&progress_timeout=1s&connect_timeout=2s%s%s", m.addr,
                     m.addr, token ? "&token=" : "", token ? token : "");
            tu_opts(&o);
            o.op_timeout_ms = 2000;
            o.deadline_ms = 10000;
            char key[32];
            snprintf(key, sizeof(key), "obj-%u", nkeys++);
            uint64_t t0 = t_now_ms();
            int r = rio_client_new(url, &o, &c);
            if (r == 0) {
                uint64_t t1 = t_now_ms();
                r = rio_put(c, key, data, OBJ, NULL, NULL);
                T_LT(t_now_ms() - t1, (uint64_t)o.deadline_ms + 1000);
                memset(got, 0, OBJ);
                t1 = t_now_ms();
                int64_t g = rio_get(c, key, got, OBJ, NULL);
                T_LT(t_now_ms() - t1, (uint64_t)o.deadline_ms + 1000);
                if (g >= 0) {
                    T_EQ(g, (int64_t)OBJ);
                    if (memcmp(got, data, OBJ) != 0)
                        T_FAIL("%s nth %d: GET succeeded with wrong bytes", dir ? "s2c" : "c2s",
                               nth);
                }
                if (r < 0 || g < 0)
                    damaged++;
                rio_client_destroy(c);
            } else {
                T_LT(t_now_ms() - t0, 2000u + 1000u);
                damaged++;
            }
            T_EQ(mitm_faults(&m), 1); /* the flip happened */
            mitm_stop(&m);
            check_store(e.addr[0], token, nkeys, data);
        }
    }
    /* Every flip hit a frame (above); the retries heal most or all of them. */
    fprintf(stderr, "%s: %u of %u clients saw a failed call, the others' flips were healed\n",
            token ? "auth" : "no auth", damaged, nkeys);
    T_EQ(srv_stop(&e), 0);
    free(data);
    free(got);
}

TEST(flip_each_direction_without_auth)
{
    flips(NULL);
}

TEST(flip_each_direction_with_auth)
{
    flips("mitm-s3cret");
}
