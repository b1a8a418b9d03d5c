/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * A transport that hashes a READ's bytes as it stores them hands the engine
 * the chunk's xxh3 (rio_io.xxh_got, xxh_valid: the S3 transport does, from
 * curl's body callback); the engine compares that instead of reading the
 * chunk again, and a mismatch is a checksum failure like any other: the
 * chunk goes again, and the GET fails once the retries are spent. The
 * hashes come from the mock's submit patched in the test: each READ's
 * completion is wrapped and given a hash, right or wrong as scripted.
 */
#include <stdatomic.h>

#include "core/checksum.h"
#include "engine_util.h"
#include "transport/transport.h"

static const struct rio_transport_ops *real;
static struct rio_transport_ops patched;
static void (*engine_complete)(struct rio_io *io); /* the engine's, the same for every op */
static _Atomic int lie_n;                          /* completions still to hash wrongly (-1: all) */
static _Atomic unsigned hashed;                    /* READ completions given a hash */

static void wrapped_complete(struct rio_io *io)
{
    if (io->kind == RIO_IO_READ && io->res == (int64_t)io->len && io->xxh) {
        /* The bytes in dst are right: only the hash may lie, so a failed
         * check proves the engine took the transport's word for it. */
        uint64_t h = rio__xxh3(io->dst, io->len);
        int n = atomic_load(&lie_n);
        if (n != 0) {
            if (n > 0)
                atomic_fetch_sub(&lie_n, 1);
            h ^= 1;
        }
        io->xxh_got = h;
        io->xxh_valid = true;
        atomic_fetch_add(&hashed, 1);
    }
    engine_complete(io);
}

static int f_submit(struct rio_transport *t, struct rio_io *io)
{
    T_EQ(io->xxh_valid, false); /* cleared by the engine at each submit */
    engine_complete = io->complete;
    io->complete = wrapped_complete;
    return real->submit(t, io);
}

static void patch(struct rio_client *c, int lies)
{
    struct rio_transport *t = rio__client_transport(c);
    real = rio__t_ops(t);
    patched = *real;
    patched.submit = f_submit;
    atomic_store(&lie_n, lies);
    atomic_store(&hashed, 0);
    rio__t_set_ops(t, &patched);
}

static void unpatch(struct rio_client *c)
{
    rio__t_set_ops(rio__client_transport(c), real);
}

#define OBJ (16 * EU_CHUNK + 123) /* 17 chunks, the last short */
#define NCHUNKS 17u

/* Right hashes: the GET is whole, every chunk counted as verified, each
 * by the transport's hash (one per chunk, no retry). */
TEST(transport_hash_accepted)
{
    struct eu e;
    uint8_t *src, *dst = malloc(OBJ);

    eu_begin(&e);
    src = eu_open_put(&e, "mock://hashed1", OBJ, 1);
    patch(e.c, 0);
    memset(dst, 0, OBJ);
    T_EQ(rio_get(e.c, "o", dst, OBJ, &e.call), (int64_t)OBJ);
    T_OK(memcmp(dst, src, OBJ));
    T_EQ(atomic_load(&hashed), NCHUNKS);
    T_EQ(e.st.verify_bytes, (uint64_t)OBJ);
    T_EQ(e.st.retries[RIO_CLASS_CHECKSUM], 0u);
    unpatch(e.c);
    eu_close(&e);
    free(dst);
}

/* A wrong hash for good bytes: the chunk fails RIO_ECHECKSUM and is read
 * again (retry is rollback), and the GET still returns the object. */
TEST(transport_hash_mismatch_retried)
{
    struct eu e;
    uint8_t *src, *dst = malloc(OBJ);

    eu_begin(&e);
    e.o.retry_attempts = 4;
    src = eu_open_put(&e, "mock://hashed2", OBJ, 2);
    patch(e.c, 3);
    T_EQ(rio_get(e.c, "o", dst, OBJ, &e.call), (int64_t)OBJ);
    T_OK(memcmp(dst, src, OBJ));
    T_EQ(e.st.retries[RIO_CLASS_CHECKSUM], 3u);
    T_EQ(atomic_load(&hashed), NCHUNKS + 3);
    unpatch(e.c);
    eu_close(&e);
    free(dst);
}

/* Always wrong: the GET fails with the checksum error, never returns. */
TEST(transport_hash_always_wrong_fails)
{
    struct eu e;
    uint8_t *dst = malloc(OBJ);

    eu_begin(&e);
    e.o.retry_attempts = 2;
    eu_open_put(&e, "mock://hashed3", OBJ, 3);
    patch(e.c, -1);
    int64_t got = rio_get(e.c, "o", dst, OBJ, &e.call);
    T_LT(got, 0);
    T_GT(e.st.retries[RIO_CLASS_CHECKSUM], 0u);
    unpatch(e.c);
    eu_close(&e);
    free(dst);
}

/*
 * An object railio did not write (no chunk checksums), whose store keeps a
 * CRC of it (full_checksum), read whole: the CRC the GET's plan found is
 * the one its bytes are checked against, not one asked of the transport
 * again when the plan is published. The S3 transport keeps such CRCs in a
 * table of 1024 slots by generation, whose slot another object's lookup
 * may take in between: the GET was then read unchecked, its damaged bytes
 * handed out. Here the transport says the CRC once, then forgets it, and
 * every READ flips a byte.
 */
static _Atomic int ck_asked;
static uint32_t ck_value;

static int f_lookup_foreign(struct rio_transport *t, const char *key, struct rio_desc *out)
{
    int ret = real->lookup(t, key, out);
    if (ret == 0) {
        rio_desc_cleanup(out); /* the chunk checksums: none */
        out->nchunks = 0;
        out->chunk_size = 0;
        out->etag[0] = '\0';
    }
    return ret;
}

static int f_full_checksum(struct rio_transport *t, const struct rio_desc *d, int *algo,
                           uint64_t *value)
{
    (void)t;
    (void)d;
    if (atomic_fetch_add(&ck_asked, 1) > 0)
        return RIO_ENOTSUP; /* its slot went to another object */
    *algo = RIO__CK_CRC32C;
    *value = ck_value;
    return 0;
}

static void flip_complete(struct rio_io *io)
{
    if (io->kind == RIO_IO_READ && io->res > 0)
        ((uint8_t *)io->dst)[io->res / 2] ^= 0x10;
    engine_complete(io);
}

static int f_submit_flip(struct rio_transport *t, struct rio_io *io)
{
    engine_complete = io->complete;
    io->complete = flip_complete;
    return real->submit(t, io);
}

TEST(store_crc_of_the_plan_checks_the_bytes)
{
    struct eu e;
    uint8_t *src, *dst = malloc(OBJ);

    T_NOTNULL(dst);
    eu_begin(&e);
    e.o.retry_attempts = 2;
    src = eu_open_put(&e, "mock://hashed4", OBJ, 4);
    ck_value = rio__crc32c(0, src, OBJ);
    struct rio_transport *t = rio__client_transport(e.c);
    bool was = t->foreign_etag_md5;
    real = rio__t_ops(t);
    patched = *real;
    patched.lookup = f_lookup_foreign;
    patched.full_checksum = f_full_checksum;
    rio__t_set_ops(t, &patched);
    t->foreign_etag_md5 = true;
    /* Good bytes: the GET is whole. */
    atomic_store(&ck_asked, 0);
    T_EQ(rio_get(e.c, "o", dst, OBJ, &e.call), (int64_t)OBJ);
    T_OK(memcmp(dst, src, OBJ));
    /* Damaged bytes: refused by the CRC, however often the transport was
     * asked (it says it once). */
    patched.submit = f_submit_flip;
    atomic_store(&ck_asked, 0);
    T_ERR(rio_get(e.c, "o", dst, OBJ, &e.call), RIO_ECHECKSUM);
    t->foreign_etag_md5 = was;
    rio__t_set_ops(t, real);
    eu_close(&e);
    free(dst);
}

/*
 * What the store said of a failed op (rio_io.why) reaches the caller's
 * rio_error_detail after the retries, the last failure's, never an
 * earlier one's: a chunk refused first with an answer ("answer 1") and
 * then without one must not be explained by that first answer.
 */
static _Atomic int why_n;  /* READs of chunk 0 failed so far */
static _Atomic int why_to; /* failures that carry an answer: 1, or all (-1) */

static void why_complete(struct rio_io *io)
{
    if (io->kind == RIO_IO_READ && io->index == 0) {
        int k = atomic_fetch_add(&why_n, 1) + 1;
        int to = atomic_load(&why_to);
        io->res = RIO_ESERVER;
        if (to < 0 || k <= to)
            snprintf(io->why, sizeof(io->why), "answer %d", k);
    }
    engine_complete(io);
}

static int f_submit_why(struct rio_transport *t, struct rio_io *io)
{
    T_EQ(io->why[0], '\0'); /* cleared by the engine at each submit */
    engine_complete = io->complete;
    io->complete = why_complete;
    return real->submit(t, io);
}

TEST(store_answer_of_the_last_failure_in_the_detail)
{
    struct eu e;
    uint8_t *dst = malloc(OBJ);

    T_NOTNULL(dst);
    eu_begin(&e);
    e.o.retry_attempts = 3;
    e.o.backoff_base_ms = 400; /* the deadline below ends the wait */
    e.o.backoff_cap_ms = 400;
    eu_open_put(&e, "mock://hashed5?paths=1", OBJ, 5);
    struct rio_transport *t = rio__client_transport(e.c);
    real = rio__t_ops(t);
    patched = *real;
    patched.submit = f_submit_why;
    rio__t_set_ops(t, &patched);
    atomic_store(&why_n, 0);
    atomic_store(&why_to, -1);
    T_ERR(rio_get(e.c, "o", dst, OBJ, &e.call), RIO_ERETRIES);
    T_NOTNULL(strstr(rio_error_detail(), "answer 3"));
    atomic_store(&why_n, 0);
    atomic_store(&why_to, 1);
    T_ERR(rio_get(e.c, "o", dst, OBJ, &e.call), RIO_ERETRIES);
    T_NULL(strstr(rio_error_detail(), "answer 1"));
    /* Ended by its deadline while it waited to try again: the answer to a
     * try says nothing of a deadline. */
    atomic_store(&why_n, 0);
    atomic_store(&why_to, -1);
    struct rio_call late = {.deadline_ms = 150};
    T_ERR(rio_get(e.c, "o", dst, OBJ, &late), RIO_EDEADLINE);
    T_NULL(strstr(rio_error_detail(), "answer"));
    rio__t_set_ops(t, real);
    eu_idle(e.c);
    eu_close(&e);
    free(dst);
}
