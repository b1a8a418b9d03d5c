/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 60 */
/*
 * railiod against a raw protocol client: PUT/LOOKUP/READ/DELETE of the edge
 * sizes, chunks of one upload over several connections, checksum mismatch,
 * retried chunks, generations (replaced between two READs of one reader:
 * RIO_EGENERATION, never mixed bytes), bounds, pipelining and STAT.
 */
#include "server_disk_util.h"
#include "tlib.h"

#define CHUNK 65536u

static uint8_t *pattern(size_t n, uint64_t seed)
{
    uint8_t *p = malloc(n ? n : 1);
    t_fill_pattern(p, n, seed);
    return p;
}

/* Read the whole object back chunk by chunk under gen and compare. */
static void read_back(struct wc *c, const char *key, uint64_t gen, const uint8_t *want,
                      uint64_t size, uint64_t chunk)
{
    uint8_t *got = malloc(size ? size : 1);
    for (uint64_t off = 0; off < size; off += chunk) {
        uint32_t len = (uint32_t)(size - off < chunk ? size - off : chunk);
        T_EQ(wc_read(c, key, gen, off, len, got + off), 0);
    }
    T_MEMEQ(got, want, size);
    free(got);
}

static void check_desc(struct wc *c, const char *key, uint64_t gen, const uint8_t *data,
                       uint64_t size, uint64_t chunk)
{
    struct rio_proto_desc d;
    uint8_t *keep;
    char etag[33];

    T_EQ(wc_lookup(c, key, &d, &keep), 0);
    T_EQ(d.generation, gen);
    T_EQ(d.size, size);
    T_EQ(d.chunk_size, chunk);
    T_EQ(d.nchunks, wc_nchunks(size, chunk));
    wc_etag(data, size, etag);
    T_MEMEQ(d.etag, etag, 32);
    for (uint64_t i = 0; i < d.nchunks; i++) {
        uint64_t off = i * chunk, len = size - off < chunk ? size - off : chunk;
        T_EQ(rio__proto_u64(d.xxh + 8 * i), rio__xxh3(data + off, len));
    }
    free(keep);
}

TEST(sizes_round_trip)
{
    static const uint64_t sizes[] = {0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 5 * CHUNK + 77};
    struct srv_env e;
    struct wc c;
    char key[32];

    srv_start_wc(&e, NULL, &c);
    for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        uint8_t *data = pattern(sizes[i], 100 + i);
        snprintf(key, sizeof(key), "obj/%u", i);
        uint64_t gen = wc_put(&c, key, data, sizes[i], CHUNK);
        T_GT(gen, 0u);
        check_desc(&c, key, gen, data, sizes[i], CHUNK);
        read_back(&c, key, gen, data, sizes[i], CHUNK);
        /* A read of any generation (0) sees the same bytes. */
        if (sizes[i]) {
            uint8_t b = 0;
            T_EQ(wc_read(&c, key, 0, sizes[i] - 1, 1, &b), 0);
            T_EQ(b, data[sizes[i] - 1]);
        }
        T_EQ(wc_delete(&c, key), 0);
        struct rio_proto_desc d;
        uint8_t *keep;
        T_EQ(wc_lookup(&c, key, &d, &keep), RIO_ENOTFOUND);
        T_EQ(wc_delete(&c, key), RIO_ENOTFOUND);
        free(data);
    }
    srv_end_wc(&e, &c);
}

/* Chunks of one upload over three connections to two listeners (rails). */
TEST(chunks_over_several_connections)
{
    struct srv_env e;
    struct wc c[3];
    const uint64_t size = 9 * CHUNK + 5;
    uint8_t *data = pattern(size, 7);

    srv_prepare(&e);
    srv_start_listen(&e, "127.0.0.1:0,127.0.0.1:0", NULL);
    T_EQ(e.naddr, 2u);
    for (int i = 0; i < 3; i++) {
        wc_open(&c[i], e.addr[i % 2]);
    }
    uint64_t gen = wc_put_multi(c, 3, "multi", data, size, CHUNK);
    check_desc(&c[2], "multi", gen, data, size, CHUNK);
    read_back(&c[1], "multi", gen, data, size, CHUNK);
    wc_close_all(c, 3);
    free(data);
    T_EQ(srv_stop(&e), 0);
}

/* HELLO lists every rail; a wildcard listener is advertised usefully. */
TEST(hello_lists_rails)
{
    struct srv_env e;
    struct wc c;
    struct rio_proto_hello_resp hr;
    uint8_t *keep;

    srv_prepare(&e);
    srv_start_listen(&e, "127.0.0.1:0,0.0.0.0:0", NULL);
    wc_connect(&c, e.addr[0]);
    T_EQ(wc_hello_ex(&c, NULL, &hr, &keep), 0);
    T_EQ(hr.version, (unsigned)RIO_PROTO_VERSION);
    T_EQ(hr.auth_required, 0u);
    T_EQ(hr.nrails, 2u);
    T_GE(hr.max_depth, 1u);
    T_GE(hr.max_body, (uint32_t)RIO_PROTO_CTRL_MAX);
    T_EQ(hr.rail_len[0], strlen(e.addr[0]));
    T_TRUE(memcmp(hr.rail[0], e.addr[0], hr.rail_len[0]) == 0);
    /* 0.0.0.0:P is advertised as the address this connection reached. */
    const char *port = strrchr(e.addr[1], ':');
    char want[80];
    snprintf(want, sizeof(want), "127.0.0.1%s", port);
    T_EQ(hr.rail_len[1], strlen(want));
    T_TRUE(memcmp(hr.rail[1], want, hr.rail_len[1]) == 0);
    free(keep);
    srv_end_wc(&e, &c);
}

TEST(chunk_checksum_and_geometry)
{
    struct srv_env e;
    struct wc c;
    const uint64_t size = 3 * CHUNK;
    uint8_t *data = pattern(size, 9);
    uint64_t *x = wc_xxh_list(data, size, CHUNK);
    uint64_t up = 0, gen = 0;
    char etag[33];

    srv_start_wc(&e, NULL, &c);
    wc_etag(data, size, etag);
    T_EQ(wc_put_open(&c, "ck", size, CHUNK, 0, &up), 0);
    /* Wrong checksum: refused and not stored. */
    T_EQ(wc_put_chunk(&c, up, 0, x[0] ^ 1, data, CHUNK), RIO_ECHECKSUM);
    /* Bytes damaged in flight (checksum of the real bytes): refused. */
    data[5] ^= 0x40;
    T_EQ(wc_put_chunk(&c, up, 0, x[0], data, CHUNK), RIO_ECHECKSUM);
    data[5] ^= 0x40;
    /* Index and length outside the geometry. */
    T_EQ(wc_put_chunk(&c, up, 3, x[0], data, CHUNK), RIO_EPROTO);
    T_EQ(wc_put_chunk(&c, up, 1, x[1], data + CHUNK, CHUNK - 1), RIO_EPROTO);
    T_EQ(wc_put_chunk(&c, up + 1, 0, x[0], data, CHUNK), RIO_ENOTFOUND);
    /* Commit with a chunk missing, or with a wrong list. */
    T_EQ(wc_put_chunk(&c, up, 0, x[0], data, CHUNK), 0);
    T_EQ(wc_put_chunk(&c, up, 1, x[1], data + CHUNK, CHUNK), 0);
    T_EQ(wc_put_commit(&c, up, 3, x, etag, &gen), RIO_EINVAL);
    T_EQ(wc_put_chunk(&c, up, 2, x[2], data + 2 * CHUNK, CHUNK), 0);
    /* A retried chunk that did arrive is accepted again, harmlessly. */
    T_EQ(wc_put_chunk(&c, up, 1, x[1], data + CHUNK, CHUNK), 0);
    x[1] ^= 1;
    T_EQ(wc_put_commit(&c, up, 3, x, etag, &gen), RIO_ECHECKSUM);
    x[1] ^= 1;
    T_EQ(wc_put_commit(&c, up, 2, x, etag, &gen), RIO_EPROTO);
    /* Nothing was published by the failed commits. */
    struct rio_proto_desc d;
    uint8_t *keep;
    T_EQ(wc_lookup(&c, "ck", &d, &keep), RIO_ENOTFOUND);
    T_EQ(wc_put_commit(&c, up, 3, x, etag, &gen), 0);
    read_back(&c, "ck", gen, data, size, CHUNK);
    /* The upload is gone once committed, but its commit is idempotent: sent
     * again (its answer was lost) it gets the same generation, on any
     * connection; with another chunk count it is refused. */
    uint64_t again = 0;
    T_EQ(wc_put_commit(&c, up, 3, x, etag, &again), 0);
    T_EQ(again, gen);
    struct wc c2;
    wc_connect(&c2, e.addr[0]);
    again = 0;
    T_EQ(wc_put_commit(&c2, up, 3, x, etag, &again), 0);
    T_EQ(again, gen);
    T_EQ(wc_put_commit(&c2, up, 2, x, etag, &again), RIO_EPROTO);
    wc_close(&c2);
    T_EQ(wc_put_chunk(&c, up, 0, x[0], data, CHUNK), RIO_ENOTFOUND);
    /* Abort. */
    T_EQ(wc_put_open(&c, "ab", size, CHUNK, 0, &up), 0);
    T_EQ(wc_put_chunk(&c, up, 0, x[0], data, CHUNK), 0);
    T_EQ(wc_call(&c, RIO_OP_PUT_ABORT, &up, 8, NULL, 0, NULL, NULL), 0);
    T_EQ(wc_call(&c, RIO_OP_PUT_ABORT, &up, 8, NULL, 0, NULL, NULL), RIO_ENOTFOUND);
    T_EQ(wc_put_commit(&c, up, 3, x, etag, &gen), RIO_ENOTFOUND);
    T_EQ(wc_ping(&c), 0);
    free(x);
    free(data);
    srv_end_wc(&e, &c);
}

/* PUT_ONE: an object of one chunk opened, sent and committed in one frame,
 * as PUT_OPEN, PUT_CHUNK and PUT_COMMIT would: the same descriptor, the
 * same checks (a damaged chunk publishes nothing and leaves no upload),
 * and a frame that breaks its rules closes the connection. */
TEST(put_one)
{
    static const uint64_t sizes[] = {1, 1000, CHUNK - 1, CHUNK};
    struct srv_env e;
    struct wc c, h;
    struct rio_proto_desc d;
    uint8_t *keep;
    uint64_t gen = 0, last = 0;
    char key[32];

    srv_start_wc(&e, NULL, &c);
    struct rio_proto_hello_resp hr;
    wc_connect(&h, e.addr[0]);
    T_EQ(wc_hello_ex(&h, NULL, &hr, &keep), 0);
    T_TRUE(hr.caps & RIO_PROTO_CAP_PUT_ONE);
    free(keep);
    wc_close(&h);
    for (unsigned i = 0; i < 4; i++) {
        uint8_t *data = pattern(sizes[i], 30 + i);
        snprintf(key, sizeof(key), "one/%u", i);
        T_EQ(wc_put_one(&c, key, data, sizes[i], CHUNK, &gen), 0);
        T_GT(gen, last);
        last = gen;
        check_desc(&c, key, gen, data, sizes[i], CHUNK);
        read_back(&c, key, gen, data, sizes[i], CHUNK);
        /* Again: replaced, a new generation. */
        T_EQ(wc_put_one(&c, key, data, sizes[i], CHUNK, &gen), 0);
        T_GT(gen, last);
        last = gen;
        check_desc(&c, key, gen, data, sizes[i], CHUNK);
        free(data);
    }
    /* A checksum that is not the data's, and data damaged in flight:
     * refused, nothing published, no upload left. */
    uint8_t *data = pattern(5000, 40);
    struct rio_proto_put_one m = {
        .chunk_size = CHUNK, .xxh = rio__xxh3(data, 5000) ^ 1, .key = "bad", .key_len = 3};
    T_EQ(wc_put_one_ex(&c, &m, data, 5000, &gen), RIO_ECHECKSUM);
    T_EQ(wc_lookup(&c, "bad", &d, &keep), RIO_ENOTFOUND);
    T_EQ(wc_stat(&c).uploads, 0u);
    /* The connection goes on. */
    T_EQ(wc_ping(&c), 0);
    /* Breaking the frame's rules closes the connection: data longer than
     * the chunk size, flags, no key, a chunk size of 0. */
    for (unsigned k = 0; k < 4; k++) {
        struct wc x;
        wc_open(&x, e.addr[0]);
        m.xxh = rio__xxh3(data, 5000);
        m.chunk_size = k == 0 ? 4999 : k == 3 ? 0 : CHUNK;
        m.flags = k == 1 ? 1 : 0;
        m.key_len = 3;
        if (k == 2) {
            /* a key of 0 bytes: the encoder refuses it, so write the frame's
             * fields by hand */
            uint8_t ctl[RIO_PROTO_ONE_FIXED];
            memset(ctl, 0, sizeof(ctl));
            rio__le64_put(ctl, CHUNK);
            rio__le64_put(ctl + 8, m.xxh);
            T_GE(wc_send2(&x, RIO_OP_PUT_ONE, 77, ctl, sizeof(ctl), data, 5000), 0);
        } else {
            uint8_t ctl[RIO_PROTO_ONE_FIXED + 3];
            /* (the encoder checks the key only) */
            T_EQ(rio__proto_enc_put_one(&m, ctl, sizeof(ctl)), (int)sizeof(ctl));
            T_GE(wc_send2(&x, RIO_OP_PUT_ONE, 77, ctl, sizeof(ctl), data, 5000), 0);
        }
        T_EQ(wc_wait_closed(&x, 5000), 0);
        wc_close(&x);
    }
    T_EQ(wc_lookup(&c, "bad", &d, &keep), RIO_ENOTFOUND);
    T_EQ(wc_stat(&c).uploads, 0u);
    free(data);
    srv_end_wc(&e, &c);
}

/* A GET_ONE of key with max_len: its status; *d and (when the bytes came)
 * *data (malloc'ed, *len bytes) from the answer. */
static int get_one(struct wc *c, const char *key, uint32_t max, struct rio_proto_desc *d,
                   uint8_t **data, uint32_t *len)
{
    struct rio_proto_get_one m = {.max_len = max, .key = key, .key_len = (uint16_t)strlen(key)};
    uint8_t req[RIO_PROTO_GET_ONE_FIXED + 2 + RIO_KEY_MAX];
    uint8_t *body = NULL;
    uint32_t blen = 0;
    int n = rio__proto_enc_get_one(&m, req, sizeof(req));
    T_GT(n, 0);
    *data = NULL;
    *len = 0;
    int ret = wc_call(c, RIO_OP_GET_ONE, req, (size_t)n, NULL, 0, &body, &blen);
    if (ret != 0) {
        free(body);
        return ret;
    }
    uint64_t xxh = 0;
    uint32_t ctl = blen > RIO_PROTO_GET_ONE_DESC ? RIO_PROTO_GET_ONE_WITH_DATA : blen;
    T_OK(rio__proto_dec_get_one_resp(body, ctl, blen - ctl, max, d, &xxh));
    if (blen > ctl) {
        *len = blen - ctl;
        *data = malloc(*len);
        memcpy(*data, body + ctl, *len);
        T_EQ(xxh, rio__xxh3(*data, *len));
    }
    free(body);
    return 0;
}

/* GET_ONE: an object of one chunk within max_len comes with its bytes and
 * its descriptor (LOOKUP's fixed fields) in one answer; any other object,
 * its descriptor alone; a missing key RIO_ENOTFOUND; a request that breaks
 * the rules (max_len 0 or over 2^30, flags) closes the connection. Both
 * tiers. */
static void get_one_against(const char *const *extra)
{
    struct srv_env e;
    struct wc c, h;
    struct rio_proto_desc d;
    uint8_t *got, *keep;
    uint32_t len;
    uint64_t gen = 0;

    srv_start_wc(&e, extra, &c);
    struct rio_proto_hello_resp hr;
    wc_connect(&h, e.addr[0]);
    T_EQ(wc_hello_ex(&h, NULL, &hr, &keep), 0);
    T_TRUE(hr.caps & RIO_PROTO_CAP_GET_ONE);
    free(keep);
    wc_close(&h);
    uint8_t *data = pattern(3 * CHUNK, 50);
    T_EQ(wc_put_one(&c, "g/small", data, 1000, CHUNK, &gen), 0);
    T_EQ(get_one(&c, "g/small", 1000, &d, &got, &len), 0);
    T_EQ(d.generation, gen);
    T_EQ(d.size, 1000u);
    T_EQ(d.nchunks, 1u);
    T_EQ(d.chunk_size, CHUNK);
    T_EQ(len, 1000u);
    T_MEMEQ(got, data, 1000);
    free(got);
    /* larger than max_len: the descriptor alone */
    T_EQ(get_one(&c, "g/small", 999, &d, &got, &len), 0);
    T_NULL(got);
    T_EQ(d.size, 1000u);
    /* several chunks, empty: the descriptor alone */
    uint64_t up = 0, g2 = 0;
    uint64_t *x = wc_xxh_list(data, 3 * CHUNK, CHUNK);
    char etag[33];
    wc_etag(data, 3 * CHUNK, etag);
    T_EQ(wc_put_open(&c, "g/big", 3 * CHUNK, CHUNK, 0, &up), 0);
    for (unsigned i = 0; i < 3; i++)
        T_EQ(wc_put_chunk(&c, up, i, x[i], data + i * CHUNK, CHUNK), 0);
    T_EQ(wc_put_commit(&c, up, 3, x, etag, &g2), 0);
    T_EQ(get_one(&c, "g/big", 1u << 30, &d, &got, &len), 0);
    T_NULL(got);
    T_EQ(d.generation, g2);
    T_EQ(d.nchunks, 3u);
    T_EQ(wc_put_open(&c, "g/empty", 0, CHUNK, 0, &up), 0);
    T_EQ(wc_put_commit(&c, up, 0, NULL, etag, &g2), 0);
    T_EQ(get_one(&c, "g/empty", 100, &d, &got, &len), 0);
    T_NULL(got);
    T_EQ(d.size, 0u);
    T_EQ(get_one(&c, "g/none", 100, &d, &got, &len), RIO_ENOTFOUND);
    T_EQ(wc_ping(&c), 0);
    /* Breaking the rules: max_len 0, over 2^30, flags. */
    for (unsigned k = 0; k < 3; k++) {
        struct wc y;
        wc_open(&y, e.addr[0]);
        struct rio_proto_get_one m = {.max_len = k == 0   ? 0
                                                 : k == 1 ? (1u << 30) + 1
                                                          : 100,
                                      .flags = k == 2,
                                      .key = "g/small",
                                      .key_len = 7};
        uint8_t req[64];
        int n = rio__proto_enc_get_one(&m, req, sizeof(req));
        T_GE(wc_send2(&y, RIO_OP_GET_ONE, 5, req, (size_t)n, NULL, 0), 0);
        T_EQ(wc_wait_closed(&y, 5000), 0);
        wc_close(&y);
    }
    free(x);
    free(data);
    srv_end_wc(&e, &c);
}

TEST(get_one)
{
    get_one_against(NULL);
    const char *dir = t_scratch_dir("railio-getone-srv");
    const char *args[] = {"--data-dir", dir, NULL};
    get_one_against(args);
}

/*
 * A PUT_COMMIT sent again (its answer was late) on another connection while
 * the first was still arriving: both took the upload before either applied.
 * The one that applies second must not say "not written" (RIO_ENOTFOUND)
 * of an object that was: it is answered as a retry after the first, with
 * its generation. --threads 1 and a PING on the first connection make sure
 * the late one's fixed fields were read before the first commit arrives.
 */
static void commit_racing_its_retry(const char *const *extra)
{
    struct srv_env e;
    struct wc a, b;
    const uint64_t size = 2 * CHUNK;
    uint8_t *data = pattern(size, 21);
    uint64_t *x = wc_xxh_list(data, size, CHUNK);
    uint64_t up = 0, gen = 0, again = 0;
    char etag[33];

    srv_start_wc(&e, extra, &a);
    wc_open(&b, e.addr[0]);
    wc_etag(data, size, etag);
    T_EQ(wc_put_open(&a, "race", size, CHUNK, 0, &up), 0);
    T_EQ(wc_put_chunk(&a, up, 0, x[0], data, CHUNK), 0);
    T_EQ(wc_put_chunk(&a, up, 1, x[1], data + CHUNK, CHUNK), 0);

    /* b's commit: its header and fixed fields now, the rest later. */
    struct rio_proto_put_commit m = {.upload_id = up, .nchunks = 2};
    uint8_t body[48 + 16 + RIO_PROTO_TAG_LEN], hb[RIO_PROTO_HDR_LEN];
    memcpy(m.etag, etag, 32);
    T_EQ(rio__proto_enc_put_commit(&m, x, body, 48 + 16), 48 + 16);
    struct rio_proto_hdr h = {
        .opcode = RIO_OP_PUT_COMMIT, .id = b.next_id++, .body_len = (uint32_t)sizeof(body)};
    rio__proto_hdr_encode(&h, hb);
    struct iovec parts[2] = {{hb, sizeof(hb)}, {body, 48 + 16}};
    T_EQ(rio__proto_seal(&b.sess, 0, parts, 2, body + 48 + 16), 0);
    T_EQ(wc_send_raw(&b, hb, sizeof(hb)), 0);
    T_EQ(wc_send_raw(&b, body, 48), 0);
    T_EQ(wc_ping(&a), 0);

    T_EQ(wc_put_commit(&a, up, 2, x, etag, &gen), 0);
    T_EQ(wc_send_raw(&b, body + 48, sizeof(body) - 48), 0);
    struct rio_proto_hdr rh;
    uint8_t *rb = NULL;
    T_EQ(wc_recv(&b, &rh, &rb), 0);
    if (rh.status == RIO_ETHROTTLE) {
        /* The disk tier was still applying the first: ask again. */
        uint64_t t0 = t_now_ms();
        while (wc_put_commit(&b, up, 2, x, etag, &again) == RIO_ETHROTTLE)
            T_LT(t_now_ms() - t0, 10000);
    } else {
        T_EQ(rh.status, 0);
        T_EQ(rh.body_len, 8u);
        again = rio__proto_u64(rb);
    }
    free(rb);
    T_EQ(again, gen);
    read_back(&b, "race", gen, data, size, CHUNK);
    wc_close(&b);
    free(x);
    free(data);
    srv_end_wc(&e, &a);
}

TEST(commit_racing_its_retry_answers_its_generation)
{
    const char *mem[] = {"--threads", "1", NULL};
    commit_racing_its_retry(mem);
    const char *disk[] = {"--threads", "1", "--data-dir", disk_dir_make(), NULL};
    commit_racing_its_retry(disk);
}

/* Upload ids are the upload's capability: no id tells the next one (a
 * counter would hand them out one apart), and none comes twice. */
TEST(upload_ids_are_unguessable)
{
    struct srv_env e;
    struct wc c;
    uint64_t id[64];

    srv_start(&e, NULL);
    wc_connect(&c, e.addr[0]);
    for (int i = 0; i < 64; i++)
        T_EQ(wc_put_open(&c, "ids", CHUNK, CHUNK, 0, &id[i]), 0);
    int close_pairs = 0;
    for (int i = 0; i < 64; i++)
        for (int j = i + 1; j < 64; j++) {
            T_NE(id[i], id[j]);
            uint64_t d = id[i] > id[j] ? id[i] - id[j] : id[j] - id[i];
            close_pairs += d < (1ull << 32);
        }
    T_EQ(close_pairs, 0);
    srv_end_wc(&e, &c);
}

TEST(generations_and_bounds)
{
    struct srv_env e;
    struct wc c, c2;
    const uint64_t size = 4 * CHUNK;
    uint8_t *a = pattern(size, 1), *b = pattern(size, 2), *buf = malloc(CHUNK);

    srv_start_wc(&e, NULL, &c);
    wc_open(&c2, e.addr[0]);
    uint64_t g1 = wc_put(&c, "g", a, size, CHUNK);
    /* A reader takes chunk 0 of g1, then the key is replaced. */
    T_EQ(wc_read(&c2, "g", g1, 0, CHUNK, buf), 0);
    T_MEMEQ(buf, a, CHUNK);
    uint64_t g2 = wc_put(&c, "g", b, size, CHUNK);
    T_GT(g2, g1);
    /* The rest of its read of g1 fails cleanly: never bytes of g2. */
    T_EQ(wc_read(&c2, "g", g1, CHUNK, CHUNK, buf), RIO_EGENERATION);
    read_back(&c2, "g", g2, b, size, CHUNK);
    /* Generations are per key strictly increasing and never reused, even
     * across delete and re-create. */
    T_EQ(wc_delete(&c, "g"), 0);
    T_EQ(wc_read(&c2, "g", g2, 0, CHUNK, buf), RIO_ENOTFOUND);
    uint64_t g3 = wc_put(&c, "g", a, size, CHUNK);
    T_GT(g3, g2);
    uint64_t h1 = wc_put(&c, "h", a, size, CHUNK);
    T_GT(h1, g3);
    /* Bounds. */
    T_EQ(wc_read(&c2, "g", g3, size, 1, buf), RIO_EPROTO);
    T_EQ(wc_read(&c2, "g", g3, size - 1, 2, buf), RIO_EPROTO);
    T_EQ(wc_read(&c2, "g", g3, UINT64_MAX, 1, buf), RIO_EPROTO);
    T_EQ(wc_read(&c2, "g", g3, size - 1, 1, buf), 0);
    T_EQ(buf[0], a[size - 1]);
    T_EQ(wc_read(&c2, "nope", 0, 0, 1, buf), RIO_ENOTFOUND);
    free(a);
    free(b);
    free(buf);
    wc_close(&c);
    srv_end_wc(&e, &c2);
}

/* Open, send and commit key (size bytes of data) with the condition
 * if_gen when with_cond: the commit's status; *gen the new generation;
 * *id the upload's id. */
static int cput(struct wc *c, const char *key, const uint8_t *data, uint64_t size, int with_cond,
                uint64_t if_gen, uint64_t *gen, uint64_t *id)
{
    char etag[33];
    uint64_t n = wc_nchunks(size, CHUNK), *xxh = wc_xxh_list(data, size, CHUNK);

    T_EQ(wc_put_open(c, key, size, CHUNK, 0, id), 0);
    for (uint64_t i = 0; i < n; i++) {
        uint64_t off = i * CHUNK, len = size - off < CHUNK ? size - off : CHUNK;
        T_EQ(wc_put_chunk(c, *id, i, xxh[i], data + off, len), 0);
    }
    wc_etag(data, size, etag);
    int st = wc_put_commit_if(c, *id, n, xxh, etag, with_cond, if_gen, gen);
    free(xxh);
    return st;
}

/* PUT_COMMIT's condition (HELLO caps bit 3): IF_ABSENT and a generation,
 * met and not met (RIO_EGENERATION, nothing published, the upload gone);
 * a commit asked again after it applied answers its generation, not a
 * failed condition; a condition of 0 closes the connection. DELETE's
 * generation (bit 4): another generation left, its own removed. */
TEST(conditional_commits)
{
    struct srv_env e;
    struct wc c;
    struct rio_proto_hello_resp hr;
    uint8_t *keep, *a = pattern(3 * CHUNK + 9, 1), *b = pattern(CHUNK, 2);
    uint64_t g1 = 0, g2 = 0, g = 0, id = 0, id1 = 0;
    const uint64_t na = 3 * CHUNK + 9;

    srv_start(&e, NULL); /* its own srv_prepare: one before it left an empty directory */
    wc_connect(&c, e.addr[0]);
    T_EQ(wc_hello_ex(&c, NULL, &hr, &keep), 0);
    T_TRUE(hr.caps & RIO_PROTO_CAP_COND_COMMIT);
    free(keep);
    T_EQ(cput(&c, "k", a, na, 1, RIO_PROTO_IF_ABSENT, &g1, &id1), 0);
    check_desc(&c, "k", g1, a, na, CHUNK);
    /* Asked again (an answer lost): the generation it became, though the
     * key is no longer absent. */
    {
        uint64_t *xxh = wc_xxh_list(a, na, CHUNK);
        char etag[33];
        wc_etag(a, na, etag);
        T_EQ(
            wc_put_commit_if(&c, id1, wc_nchunks(na, CHUNK), xxh, etag, 1, RIO_PROTO_IF_ABSENT, &g),
            0);
        T_EQ(g, g1);
        free(xxh);
    }
    T_EQ(cput(&c, "k", b, CHUNK, 1, RIO_PROTO_IF_ABSENT, &g, &id), RIO_EGENERATION);
    check_desc(&c, "k", g1, a, na, CHUNK);
    /* The refused upload is gone: a commit of it again finds none. */
    {
        uint64_t *xxh = wc_xxh_list(b, CHUNK, CHUNK);
        char etag[33];
        wc_etag(b, CHUNK, etag);
        T_EQ(wc_put_commit_if(&c, id, 1, xxh, etag, 0, 0, &g), RIO_ENOTFOUND);
        free(xxh);
    }
    T_EQ(cput(&c, "k", b, CHUNK, 1, g1 + 1000, &g, &id), RIO_EGENERATION);
    T_EQ(cput(&c, "k", b, CHUNK, 1, g1, &g2, &id), 0);
    T_GT(g2, g1);
    check_desc(&c, "k", g2, b, CHUNK, CHUNK);
    T_EQ(cput(&c, "k", a, na, 1, g1, &g, &id), RIO_EGENERATION);
    T_EQ(wc_delete(&c, "k"), 0);
    T_EQ(cput(&c, "k", a, na, 1, g2, &g, &id), RIO_EGENERATION);
    T_EQ(cput(&c, "k", a, na, 1, RIO_PROTO_IF_ABSENT, &g, &id), 0);
    read_back(&c, "k", g, a, na, CHUNK);
    /* DELETE with a generation (caps bit 4): another is left, its own goes. */
    T_TRUE(hr.caps & RIO_PROTO_CAP_COND_DELETE);
    T_EQ(wc_delete_if(&c, "k", g2), RIO_EGENERATION);
    read_back(&c, "k", g, a, na, CHUNK);
    T_EQ(wc_delete_if(&c, "k", g), 0);
    T_EQ(wc_delete_if(&c, "k", g), RIO_ENOTFOUND);
    /* A condition of 0 is malformed: the connection closes. */
    int st = cput(&c, "z", b, CHUNK, 1, 0, &g, &id);
    T_TRUE(st == RIO_ECLOSED || st == -ECONNRESET);
    free(a);
    free(b);
    srv_end_wc(&e, &c);
}

/* A PUT replacing the object while a large READ of the old one is being
 * sent: the reader gets every byte of the old generation. */
TEST(replace_during_send)
{
    struct srv_env e;
    struct wc r, w;
    const uint64_t size = 32ull << 20;
    uint8_t *a = pattern(size, 11), *b = pattern(size, 12);
    struct rio_proto_hdr h;
    uint8_t *body = NULL;

    srv_start_wc(&e, NULL, &r);
    wc_open(&w, e.addr[0]);
    uint64_t g1 = wc_put(&w, "big", a, size, 4u << 20);
    /* Ask for all 32 MiB in one READ but do not read it yet: the server
     * can only push what the socket buffers hold. */
    struct rio_proto_read m = {
        .generation = g1, .off = 0, .len = (uint32_t)size, .key = "big", .key_len = 3};
    uint8_t out[64];
    int n = rio__proto_enc_read(&m, out, sizeof(out));
    T_OK(wc_send2(&r, RIO_OP_READ, 77, out, (size_t)n, NULL, 0));
    usleep(100000);
    uint64_t g2 = wc_put(&w, "big", b, size, 4u << 20);
    T_GT(g2, g1);
    T_EQ(wc_delete(&w, "big"), 0);
    T_OK(wc_recv(&r, &h, &body));
    T_EQ(h.id, 77u);
    T_EQ(h.status, 0);
    T_EQ(h.body_len, (uint32_t)size);
    T_MEMEQ(body, a, size);
    free(body);
    free(a);
    free(b);
    wc_close(&r);
    srv_end_wc(&e, &w);
}

/* Many requests written back to back before any response is read. */
TEST(pipelining)
{
    struct srv_env e;
    struct wc c;
    const unsigned n = 200;
    const uint64_t size = 8 * 4096;
    uint8_t *data = pattern(size, 3);

    srv_start_wc(&e, NULL, &c);
    uint64_t gen = wc_put(&c, "p", data, size, 4096);
    for (unsigned i = 0; i < n; i++) {
        struct rio_proto_read m = {
            .generation = gen, .off = (i % 8) * 4096ull, .len = 4096, .key = "p", .key_len = 1};
        uint8_t out[64];
        int len = rio__proto_enc_read(&m, out, sizeof(out));
        T_OK(wc_send2(&c, i % 3 ? RIO_OP_READ : RIO_OP_PING, 1000 + i, i % 3 ? out : NULL,
                      i % 3 ? (size_t)len : 0, NULL, 0));
    }
    /* Responses may come in any order: match them by id. */
    uint8_t *seen = calloc(n, 1);
    for (unsigned k = 0; k < n; k++) {
        struct rio_proto_hdr h;
        uint8_t *body;
        T_OK(wc_recv(&c, &h, &body));
        T_GE(h.id, 1000u);
        T_LT(h.id, 1000u + n);
        unsigned i = (unsigned)(h.id - 1000);
        T_EQ(seen[i], 0);
        seen[i] = 1;
        T_EQ(h.status, 0);
        if (i % 3) {
            T_EQ(h.opcode, RIO_OP_READ);
            T_EQ(h.body_len, 4096u);
            T_MEMEQ(body, data + (i % 8) * 4096, 4096);
        } else {
            T_EQ(h.opcode, RIO_OP_PING);
        }
        free(body);
    }
    free(seen);
    /* STAT reports the store. */
    uint8_t *body = NULL;
    uint32_t blen = 0;
    struct rio_proto_stat_resp st;
    T_EQ(wc_call(&c, RIO_OP_STAT, NULL, 0, NULL, 0, &body, &blen), 0);
    T_OK(rio__proto_dec_stat_resp(body, blen, &st));
    T_EQ(st.objects, 1u);
    T_EQ(st.bytes, size);
    T_EQ(st.uploads, 0u);
    T_GE(st.connections, 1u);
    free(body);
    free(data);
    srv_end_wc(&e, &c);
}
