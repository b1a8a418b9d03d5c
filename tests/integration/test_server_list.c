/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * railiod's LIST and EXISTS against a raw protocol client: the caps HELLO
 * announces, answers capped in entries and bytes whatever max_keys asks,
 * malformed requests (unknown flags, EXISTS of no key, an EXISTS body over
 * its bound) refused and the connection closed, other clients served on.
 */
#include "server_env.h"

static int list(struct wc *c, uint32_t max, uint32_t flags, const char *prefix, const char *after,
                struct rio_proto_list_resp *r, uint8_t **keep)
{
    struct rio_proto_list m = {.max_keys = max,
                               .flags = flags,
                               .prefix = prefix,
                               .prefix_len = (uint16_t)strlen(prefix),
                               .after = after,
                               .after_len = (uint16_t)strlen(after)};
    uint8_t b[4096];
    uint32_t blen = 0;
    int n = rio__proto_enc_list(&m, b, sizeof(b));
    T_GT(n, 0);
    int st = wc_call(c, RIO_OP_LIST, b, (size_t)n, NULL, 0, keep, &blen);
    if (st == 0)
        T_EQ(rio__proto_dec_list_resp(*keep, blen, r), 0);
    return st;
}

TEST(list_caps_and_bounds)
{
    struct srv_env e;
    struct wc c;
    struct rio_proto_hello_resp hr;
    uint8_t *keep = NULL, *body = NULL;
    struct rio_proto_list_resp r;

    srv_start(&e, NULL);
    wc_connect(&c, e.addr[0]);
    T_EQ(wc_hello_ex(&c, NULL, &hr, &keep), 0);
    T_EQ(hr.caps & (RIO_PROTO_CAP_LIST | RIO_PROTO_CAP_EXISTS),
         RIO_PROTO_CAP_LIST | RIO_PROTO_CAP_EXISTS);
    free(keep);

    /* 10,050 keys: max_keys of 4 billion gets RIO_PROTO_LIST_MAX_KEYS. */
    for (unsigned i = 0; i < 10050; i++) {
        char key[32];
        snprintf(key, sizeof(key), "n/%05u", i);
        wc_put(&c, key, (const uint8_t *)"x", 1, 1024);
    }
    T_EQ(list(&c, UINT32_MAX, 0, "n/", "", &r, &body), 0);
    T_EQ(r.n, RIO_PROTO_LIST_MAX_KEYS);
    T_EQ(r.flags, RIO_PROTO_LIST_TRUNCATED);
    free(body);
    T_EQ(list(&c, UINT32_MAX, 0, "n/", "n/09999", &r, &body), 0);
    T_EQ(r.n, 50u);
    T_EQ(r.flags, 0u);
    free(body);
    /* max_keys 0: the default page. */
    T_EQ(list(&c, 0, 0, "n/", "", &r, &body), 0);
    T_EQ(r.n, 1000u);
    free(body);

    /* Long keys: the answer stops at RIO_PROTO_LIST_RESP_MAX bytes. */
    static char big[RIO_KEY_MAX + 1];
    memset(big, 'k', RIO_KEY_MAX);
    for (unsigned i = 0; i < 1100; i++) {
        snprintf(big, 16, "b/%05u", i);
        big[7] = 'k';
        wc_put(&c, big, (const uint8_t *)"y", 1, 1024);
    }
    uint32_t blen = 0;
    struct rio_proto_list m = {.max_keys = 5000, .prefix = "b/", .prefix_len = 2};
    uint8_t req[64];
    int n = rio__proto_enc_list(&m, req, sizeof(req));
    T_EQ(wc_call(&c, RIO_OP_LIST, req, (size_t)n, NULL, 0, &body, &blen), 0);
    T_LE(blen, RIO_PROTO_LIST_RESP_MAX);
    T_EQ(rio__proto_dec_list_resp(body, blen, &r), 0);
    T_EQ(r.n, (RIO_PROTO_LIST_RESP_MAX - 8) / (RIO_PROTO_ENTRY_FIXED + RIO_KEY_MAX));
    T_EQ(r.flags, RIO_PROTO_LIST_TRUNCATED);
    free(body);

    /* An unknown flag: refused, connection closed; a new one is served. */
    m.flags = 0x80;
    n = rio__proto_enc_list(&m, req, sizeof(req));
    T_EQ(wc_call(&c, RIO_OP_LIST, req, (size_t)n, NULL, 0, NULL, NULL), RIO_EPROTO);
    T_EQ(wc_wait_closed(&c, 5000), 0);
    wc_close(&c);
    wc_open(&c, e.addr[0]);
    T_EQ(list(&c, 10, 0, "n/", "", &r, &body), 0);
    T_EQ(r.n, 10u);
    free(body);
    srv_end_wc(&e, &c);
}

TEST(exists_bounds)
{
    struct srv_env e;
    struct wc c;
    uint8_t *body = NULL;
    uint32_t blen = 0;
    struct rio_proto_exists_resp r;

    srv_start_wc(&e, NULL, &c);
    wc_put(&c, "x/1", (const uint8_t *)"1", 1, 1024);
    /* 10,000 keys, most absent, in one request over 8 KiB. */
    static const char *keys[RIO_PROTO_EXISTS_MAX_KEYS];
    static uint16_t kl[RIO_PROTO_EXISTS_MAX_KEYS];
    static char kb[RIO_PROTO_EXISTS_MAX_KEYS][16];
    for (unsigned i = 0; i < RIO_PROTO_EXISTS_MAX_KEYS; i++) {
        snprintf(kb[i], sizeof(kb[i]), "x/%u", i);
        keys[i] = kb[i];
        kl[i] = (uint16_t)strlen(kb[i]);
    }
    uint8_t *req = malloc(RIO_PROTO_EXISTS_MAX + 64);
    int n =
        rio__proto_enc_exists_keys(keys, kl, RIO_PROTO_EXISTS_MAX_KEYS, req, RIO_PROTO_EXISTS_MAX);
    T_GT(n, (int)RIO_PROTO_CTRL_MAX);
    T_EQ(wc_call(&c, RIO_OP_EXISTS, req, (size_t)n, NULL, 0, &body, &blen), 0);
    T_EQ(rio__proto_dec_exists_resp(body, blen, &r), 0);
    T_EQ(r.n, RIO_PROTO_EXISTS_MAX_KEYS);
    for (unsigned i = 0; i < r.n; i++)
        T_EQ((r.bits[i / 8] >> (i % 8)) & 1, i == 1 ? 1 : 0);
    free(body);

    /* No key: refused, closed. */
    uint8_t zero[4] = {0};
    T_EQ(wc_call(&c, RIO_OP_EXISTS, zero, 4, NULL, 0, NULL, NULL), RIO_EPROTO);
    T_EQ(wc_wait_closed(&c, 5000), 0);
    wc_close(&c);

    /* A body over RIO_PROTO_EXISTS_MAX: the connection closes before it is
     * read (no answer, nothing allocated for it). */
    wc_open(&c, e.addr[0]);
    memset(req, 'a', RIO_PROTO_EXISTS_MAX + 64);
    (void)wc_send2(&c, RIO_OP_EXISTS, 99, req, RIO_PROTO_EXISTS_MAX + 1, NULL, 0);
    T_EQ(wc_wait_closed(&c, 5000), 0);
    wc_close(&c);
    free(req);

    /* Others go on. */
    wc_open(&c, e.addr[0]);
    const char *one[] = {"x/1"};
    const uint16_t onel[] = {3};
    uint8_t small[16];
    n = rio__proto_enc_exists_keys(one, onel, 1, small, sizeof(small));
    T_EQ(wc_call(&c, RIO_OP_EXISTS, small, (size_t)n, NULL, 0, &body, &blen), 0);
    T_EQ(rio__proto_dec_exists_resp(body, blen, &r), 0);
    T_EQ(r.bits[0], 1);
    free(body);
    srv_end_wc(&e, &c);
}

/*
 * Peers that pipeline LISTs of 1 MiB pages and never read the answers: the
 * server stops reading each one once a page is queued, as at --max-depth.
 * It read on to --max-depth (64 pages, 64 MiB a connection, far below
 * --max-inflight-bytes), so 8 such peers held 512 MiB of a server of
 * --memory 16M.
 */
TEST(unread_list_pages_are_bounded)
{
    enum { PEERS = 8, DEPTH = 64 };
    struct srv_env e;
    struct wc c, peer[PEERS];
    const char *args[] = {"--memory", "16M", "--threads", "1", NULL};
    static char big[RIO_KEY_MAX + 1];

    srv_start_wc(&e, args, &c);
    memset(big, 'k', RIO_KEY_MAX);
    for (unsigned i = 0; i < 1100; i++) {
        snprintf(big, 16, "b/%05u", i);
        big[7] = 'k';
        wc_put(&c, big, (const uint8_t *)"y", 1, 1024);
    }
    uint64_t rss0 = srv_proc_kb(e.pid, "VmRSS");
    struct rio_proto_list m = {.max_keys = 5000, .prefix = "b/", .prefix_len = 2};
    uint8_t req[64];
    int n = rio__proto_enc_list(&m, req, sizeof(req));
    T_GT(n, 0);
    for (unsigned p = 0; p < PEERS; p++) {
        T_EQ(wc_try_connect_ex(&peer[p], e.addr[0], 10, 4096), 0);
        for (unsigned i = 0; i < DEPTH; i++)
            T_EQ(wc_send2(&peer[p], RIO_OP_LIST, i + 1, req, (size_t)n, NULL, 0), 0);
    }
    /* One worker: two round trips after the peers' requests are in, and
     * it has read what it was going to read of them. */
    T_EQ(wc_ping(&c), 0);
    T_EQ(wc_ping(&c), 0);
    uint64_t rss1 = srv_proc_kb(e.pid, "VmRSS");
    T_LE(rss1, rss0 + 64 * 1024);
    wc_close_all(peer, PEERS);
    srv_end_wc(&e, &c);
}
