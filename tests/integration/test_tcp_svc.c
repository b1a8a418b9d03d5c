/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * Service times over railio://: railiod says in each answer how long it
 * spent serving the request (RIO_PROTO_CAP_SVC_TIME, docs/protocol.md), so
 * that the verdict can tell a slow server from a slow link. A disk tier
 * made slow on purpose (RAILIOD_TEST_DISK_DELAY_MS) reads "storage" with
 * the share it had; a fast server does not. Both directions of an older
 * peer keep working: a client that does not ask gets the header of before,
 * and a server without the cap (RAILIOD_TEST_NO_SVC_TIME) is never asked.
 */
#include "server_disk_util.h"
#include "tcp_util.h"

#define DELAY_MS 50
#define OBJ (32 * TU_MIB) /* 32 chunks of 1 MiB, more than the 16 MiB cache */

/* A disk tier whose READs each take DELAY_MS more, its cache too small to
 * hold the object, so that every GET reads the disk. */
static void start_slow_disk(struct srv_env *e, int no_svc)
{
    const char *args[] = {"--data-dir", disk_dir_make(), "--memory", "16M",
                          "--metrics",  "127.0.0.1:0",   NULL};
    char ms[16];

    snprintf(ms, sizeof(ms), "%d", DELAY_MS);
    setenv("RAILIOD_TEST_DISK_DELAY_MS", ms, 1);
    if (no_svc)
        setenv("RAILIOD_TEST_NO_SVC_TIME", "1", 1);
    srv_start(e, args);
    unsetenv("RAILIOD_TEST_DISK_DELAY_MS");
    unsetenv("RAILIOD_TEST_NO_SVC_TIME");
}

/* A client of e's server (1 MiB chunks) PUTs then GETs OBJ bytes of key;
 * the GET's stats in *st. */
static void put_get(struct srv_env *e, const char *key, uint64_t seed, struct rio_stats *st)
{
    struct rio_call call = {.stats = st};
    struct rio_options o;
    struct tu u;
    char url[256];
    uint8_t *b = malloc(OBJ);

    T_NOTNULL(b);
    tu_opts(&o);
    o.chunk_size = TU_MIB;
    tu_url(url, sizeof(url), e, NULL);
    tu_open(&u, url, &o);
    tu_put(u.c, key, OBJ, seed);
    T_EQ(rio_get(u.c, key, b, OBJ, &call), (int64_t)OBJ);
    T_PATTERN(b, OBJ, seed);
    tu_close(&u);
    free(b);
    fprintf(stderr, "%s: svc %.1f ms of op %.1f ms per chunk (%llu chunks), verdict %s: %s\n", key,
            st->svc_ns / 1e6 / (double)st->chunks, st->op_ns / 1e6 / (double)st->chunks,
            (unsigned long long)st->chunks, rio_verdict_name(st->verdict), st->verdict_text);
}

TEST(slow_disk_reads_are_storage)
{
    struct srv_env e;
    struct rio_stats st;

    start_slow_disk(&e, 0);
    put_get(&e, "svc/slow", 11, &st);
    T_EQ(st.chunks, 32u);
    /* Each chunk's read took DELAY_MS on the server at least; what it said
     * is never more than the op took here. */
    T_GE(st.svc_ns, st.chunks * (uint64_t)DELAY_MS * 1000000u);
    T_LE(st.svc_ns, st.op_ns);
    T_EQ(st.verdict, RIO_VERDICT_STORAGE);
    T_NOTNULL(strstr(st.verdict_text, "target service time is"));
    /* The share in the text is the figures': most of each op on loopback. */
    double share = (double)st.svc_ns / (double)st.op_ns;
    T_GE(share, 0.5);
    char want[32];
    snprintf(want, sizeof(want), "is %.0f%% of op time", share * 100);
    T_NOTNULL(strstr(st.verdict_text, want));
    /* railiod's own metrics say the same: every READ took DELAY_MS or
     * more (none in the buckets below 50 ms), and their sum is at least
     * that many times DELAY_MS. */
    double reads = srv_scrape(&e, "railiod_request_service_seconds_count{op=\"READ\"}");
    T_GE(reads, 32.0);
    T_EQ(srv_scrape(&e, "railiod_request_service_seconds_bucket{op=\"READ\",le=\"0.025\"}"), 0.0);
    T_EQ(srv_scrape(&e, "railiod_request_service_seconds_bucket{op=\"READ\",le=\"+Inf\"}"), reads);
    T_GE(srv_scrape(&e, "railiod_request_service_seconds_sum{op=\"READ\"}"),
         reads * DELAY_MS / 1000.0);
    T_EQ(srv_stop(&e), 0);
}

TEST(fast_server_is_not_storage)
{
    struct srv_env e;
    struct rio_stats st;

    const char *args[] = {"--metrics", "127.0.0.1:0", NULL};

    srv_start(&e, args);
    put_get(&e, "svc/fast", 12, &st);
    /* Served from memory: a small share of each op (the bytes on the
     * wire are the op's, not the server's). */
    T_LT(st.svc_ns, st.op_ns / 2);
    T_NE(st.verdict, RIO_VERDICT_STORAGE);
    /* Every request answered is in the histogram of its opcode (a READ
     * from memory well under DELAY_MS: the sum bounds it), asked for its
     * service time or not. */
    double reads = srv_scrape(&e, "railiod_request_service_seconds_count{op=\"READ\"}");
    T_EQ(reads, srv_scrape(&e, "railiod_requests_total{op=\"READ\",status=\"ok\"}"));
    T_GE(reads, 32.0);
    T_LT(srv_scrape(&e, "railiod_request_service_seconds_sum{op=\"READ\"}"),
         reads * DELAY_MS / 1000.0);
    T_EQ(srv_scrape(&e, "railiod_request_service_seconds_count{op=\"PUT_COMMIT\"}"),
         srv_scrape(&e, "railiod_requests_total{op=\"PUT_COMMIT\",status=\"ok\"}"));
    T_EQ(srv_scrape(&e, "railiod_request_service_seconds_count{op=\"HELLO\"}"),
         srv_scrape(&e, "railiod_requests_total{op=\"HELLO\",status=\"ok\"}"));
    T_EQ(srv_stop(&e), 0);
}

/* A server without service times (as railiod before them): never asked,
 * the GET works as before and the verdict cannot say storage. */
TEST(old_server_is_not_asked)
{
    struct srv_env e;
    struct rio_stats st;

    start_slow_disk(&e, 1);
    put_get(&e, "svc/old", 13, &st);
    T_EQ(st.svc_ns, 0u);
    T_EQ(st.retries_total, 0u);
    T_NE(st.verdict, RIO_VERDICT_STORAGE);
    T_EQ(srv_stop(&e), 0);
}

/* A PING with the given header flags on c; the answer's raw header. */
static void ping_raw(struct wc *c, uint16_t flags, uint8_t ans[RIO_PROTO_HDR_LEN])
{
    struct rio_proto_hdr h = {.opcode = RIO_OP_PING, .id = c->next_id++, .body_len = 4 + 16};
    uint8_t hb[RIO_PROTO_HDR_LEN], tag[RIO_PROTO_TAG_LEN], body[4 + RIO_PROTO_TAG_LEN];
    struct iovec iov[3] = {{hb, sizeof(hb)}, {(void *)"ping", 4}, {tag, sizeof(tag)}};

    h.flags = flags;
    rio__proto_hdr_encode(&h, hb);
    T_OK(rio__proto_seal(&c->sess, 0, iov, 2, tag));
    T_OK(wc_sendv(c, iov, 3));
    T_OK(wc_read_full(c, ans, RIO_PROTO_HDR_LEN));
    T_OK(wc_read_full(c, body, sizeof(body)));
}

/* On the wire: a client that does not ask (an older one) gets the header
 * it always got, flags RESPONSE and bytes 28..31 zero; one that asks gets
 * RIO_PF_SVC and a time; a server without the cap closes the connection
 * on the flag, as an older one does on any unknown flag. */
TEST(the_header_field_is_only_sent_when_asked)
{
    struct srv_env e;
    struct wc c;
    struct rio_proto_hello_resp hr;
    struct rio_proto_hdr h;
    uint8_t ans[RIO_PROTO_HDR_LEN], zero[4] = {0};

    srv_start(&e, NULL);
    wc_connect(&c, e.addr[0]);
    T_OK(wc_hello_ex(&c, NULL, &hr, NULL));
    T_NE(hr.caps & RIO_PROTO_CAP_SVC_TIME, 0u);
    ping_raw(&c, 0, ans);
    T_EQ(ans[6] | ans[7] << 8, (int)RIO_PF_RESPONSE);
    T_EQ(memcmp(ans + 28, zero, 4), 0);
    ping_raw(&c, RIO_PF_SVC, ans);
    T_OK(rio__proto_hdr_decode(ans, RIO_PROTO_BODY_CAP, &h));
    T_EQ(h.flags, RIO_PF_RESPONSE | RIO_PF_SVC);
    T_LT(h.svc_us, 1000000u);
    wc_close(&c);
    T_EQ(srv_stop(&e), 0);

    setenv("RAILIOD_TEST_NO_SVC_TIME", "1", 1);
    srv_start(&e, NULL);
    unsetenv("RAILIOD_TEST_NO_SVC_TIME");
    wc_connect(&c, e.addr[0]);
    T_OK(wc_hello_ex(&c, NULL, &hr, NULL));
    T_EQ(hr.caps & RIO_PROTO_CAP_SVC_TIME, 0u);
    ping_raw(&c, 0, ans);
    T_EQ(memcmp(ans + 28, zero, 4), 0);
    struct rio_proto_hdr q = {
        .opcode = RIO_OP_PING, .id = 99, .flags = RIO_PF_SVC, .body_len = RIO_PROTO_TAG_LEN};
    uint8_t hb[RIO_PROTO_HDR_LEN], tag[RIO_PROTO_TAG_LEN];
    struct iovec iov[2] = {{hb, sizeof(hb)}, {tag, sizeof(tag)}};
    rio__proto_hdr_encode(&q, hb);
    T_OK(rio__proto_seal(&c.sess, 0, iov, 1, tag));
    T_OK(wc_sendv(&c, iov, 2));
    T_OK(wc_wait_closed(&c, 5000));
    wc_close(&c);
    T_EQ(srv_stop(&e), 0);
}
