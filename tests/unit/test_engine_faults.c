/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/*
 * Faults and retries (invariants 4 and 5): a bad chunk is detected and
 * retried from its own start, a failed path degrades instead of failing the
 * request, only retryable classes retry, and a generation change is never
 * stitched into one object.
 */
#include "core/engine.h"
#include "core/internal.h"
#include "engine_util.h"
#include "transport/mock.h"

/* ------------------------------------------------------------ checksum */

/* A bit flipped on a read is caught by the chunk's xxh3 and the chunk is read
 * again: the GET succeeds byte-exact. */
TEST(checksum_read_bitflip_retried)
{
    struct eu e;
    const size_t n = 2 * EU_MIB;

    eu_start_put(&e, "mock://ckr?paths=3", n, 1);
    eu_fault(e.c, "bitflip:op=read:chunk=7:count=1");
    eu_fault(e.c, "bitflip:op=read:chunk=20:count=2");
    eu_get_check(e.c, "o", n, 1, &e.call);
    T_EQ(eu_faults_fired(e.c), 3u);
    T_EQ(e.st.retries[RIO_CLASS_CHECKSUM], 3u);
    T_EQ(e.st.retries_total, 3u);
    T_EQ(e.st.bytes, n);
    /* A bad chunk is the chunk's fault, not the path's: no path cooled down. */
    for (unsigned i = 0; i < e.st.npaths; i++)
        T_EQ(e.st.path[i].state, 0);
    eu_close(&e);
}

/* With retry_checksum = -1 a bad chunk fails the GET with RIO_ECHECKSUM. */
TEST(checksum_read_no_retry_fails)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start_put_o(&e, "mock://ckn?paths=2", n, 2, e.o.retry_checksum = -1);
    eu_fault(e.c, "bitflip:op=read:chunk=3:count=1");
    uint8_t *dst = eu_fill_buf(n, 0);
    T_ERR(rio_get(e.c, "o", dst, n, &e.call), RIO_ECHECKSUM);
    T_EQ(e.st.retries[RIO_CLASS_CHECKSUM], 1u);
    eu_idle(e.c);
    /* The fault fired once: the next GET is clean. */
    eu_get_check(e.c, "o", n, 2, NULL);
    free(dst);
    eu_close(&e);
}

/* With verify off, a flipped bit goes unnoticed: proof that verification is
 * what catches it (and that the knob works). */
TEST(checksum_verify_off_misses_flip)
{
    struct eu e;
    const size_t n = 512 * EU_KIB;

    eu_start_put_o(&e, "mock://ckoff?paths=2", n, 3, e.o.verify = -1);
    eu_fault(e.c, "bitflip:op=read:chunk=2:count=1");
    uint8_t *dst = eu_fill_buf(n, 0);
    T_EQ(rio_get(e.c, "o", dst, n, NULL), (int64_t)n);
    int64_t bad = t_check_pattern(dst, n, 3);
    T_GE(bad, (int64_t)(2 * EU_CHUNK));
    T_LT(bad, (int64_t)(3 * EU_CHUNK));
    free(dst);
    eu_close(&e);
}

/* A bit flipped on the way to the server: the server's check refuses the
 * chunk, the engine sends it again, the stored object is exact. */
TEST(checksum_write_bitflip_retried)
{
    struct eu e;
    const size_t n = 2 * EU_MIB;

    eu_start(&e, "mock://ckw?paths=4");
    eu_fault(e.c, "bitflip:op=write:chunk=9:count=1");
    eu_fault(e.c, "bitflip:op=write:chunk=0:count=1");
    eu_keep(&e, eu_put_pattern(e.c, "o", n, 4, &e.call));
    T_EQ(eu_faults_fired(e.c), 2u);
    T_EQ(e.st.retries[RIO_CLASS_CHECKSUM], 2u);
    eu_get_check(e.c, "o", n, 4, NULL);
    eu_close(&e);
}

/* ------------------------------------------------------------ paths */

/* Path 1 disconnects for good: its chunks move to the other paths and the GET
 * is still byte-exact. */
TEST(disconnect_one_path_degrades)
{
    struct eu e;
    const size_t n = 4 * EU_MIB;

    eu_start_put(&e, "mock://disc1?paths=4&rate=200M", n, 5);
    eu_fault(e.c, "disconnect:op=read:path=1:count=1:down=0:bytes=1000");
    eu_get_check(e.c, "o", n, 5, &e.call);
    eu_stats_print("get", &e.st);
    T_EQ(eu_faults_fired(e.c), 1u);
    T_GE(e.st.path[1].errors, 1u);
    T_GE(e.st.retries[RIO_CLASS_RESET], 1u);
    T_EQ(eu_path_bytes(&e.st, NULL), n);
    T_EQ(e.st.path[0].bytes + e.st.path[2].bytes + e.st.path[3].bytes + e.st.path[1].bytes, n);
    T_LT(e.st.path[1].bytes, n / 4); /* it stopped carrying its share */
    for (unsigned i = 0; i < 4; i++)
        if (i != 1)
            T_GT(e.st.path[i].bytes, 0u);
    T_NE(e.st.path[1].state, 0); /* still down: cooling or probing */

    /* Once healed, the path comes back into use after its cooldown. */
    rio_mock_heal(e.c);
    eu_sleep_ms(150);
    eu_get_check(e.c, "o", n, 5, &e.call);
    T_GT(e.st.path[1].bytes, 0u);
    eu_close(&e);
}

/* Every path stalls (a dead cluster: ops never answer, only the op timeout
 * ends them) and the paths probe out of step: the call fails RIO_ENOPATH
 * once no path has been healthy for retries x op_timeout + cooldown_cap,
 * not after each chunk spent its attempts one probe at a time (the old rule:
 * a failed chunk moves without spending one while any path is probing, so
 * a 4-path PUT to a dead Ceph cluster took 256 s: about retries^2 op
 * timeouts). The deadline is 5x the window and half the old rule's time:
 * hitting it (RIO_EDEADLINE) is the failure. */
TEST(all_paths_stalled_fail_within_the_stall_window)
{
    struct eu e;
    struct rio_stats st;
    struct rio_call call = {.deadline_ms = 5000, .stats = &st};
    const size_t n = 16 * EU_MIB;

    eu_start_put_o(&e, "mock://allstall?paths=4", n, 7, e.o.chunk_size = 1024 * 1024,
                   e.o.retry_attempts = 10, e.o.op_timeout_ms = 100, e.o.cooldown_base_ms = 7,
                   e.o.cooldown_cap_ms = 60);
    eu_fault(e.c, "stall");
    uint8_t *dst = eu_fill_buf(n, 0);
    uint64_t took;
    int64_t ret = eu_get_ms(e.c, "o", dst, n, &call, &took);
    eu_stats_print("get", &st);
    fprintf(stderr, "  all paths stalled: %s after %" PRIu64 " ms (window 1060 ms)\n",
            rio_errname((int)ret), took);
    T_EQ(ret, RIO_ENOPATH);
    T_GE(took, 1060u); /* the window, counted from the first timeout */
    for (size_t i = 0; i < n; i++)
        if (dst[i]) {
            T_FAIL("byte %zu of a failed GET was written", i);
            break;
        }
    eu_idle(e.c);
    rio_mock_faults_clear(e.c);
    eu_get_check(e.c, "o", n, 7, NULL);
    free(dst);
    eu_close(&e);
}

/* Every path down for good: a clean RIO_ENOPATH / RIO_ERETRIES within a
 * bounded time, well before the deadline. */
TEST(all_paths_down_fails_cleanly)
{
    struct eu e;
    struct rio_stats st;
    struct rio_call call = {.deadline_ms = 8000, .stats = &st};
    const size_t n = 1 * EU_MIB;

    eu_start_put_o(&e, "mock://alldown?paths=4", n, 6, e.o.retry_attempts = 2,
                   e.o.cooldown_base_ms = 5, e.o.cooldown_cap_ms = 20);
    eu_fault(e.c, "disconnect:op=read:down=0");
    uint8_t *dst = eu_fill_buf(n, 0);
    uint64_t took;
    int64_t ret = eu_get_ms(e.c, "o", dst, n, &call, &took);
    eu_stats_print("get", &st);
    fprintf(stderr, "  all paths down: %s after %" PRIu64 " ms\n", rio_errname((int)ret), took);
    T_TRUE(ret == RIO_ENOPATH || ret == RIO_ERETRIES);
    T_LT(took, 3000u);
    eu_idle(e.c);

    /* Healed, the same client works again. */
    rio_mock_faults_clear(e.c);
    rio_mock_heal(e.c);
    eu_sleep_ms(50);
    eu_get_check(e.c, "o", n, 6, NULL);
    free(dst);
    eu_close(&e);
}

/* A stalled op times out (op_timeout_ms): the path cools down and the chunk
 * moves to another path. */
TEST(stall_op_timeout_moves_chunk)
{
    struct eu e;
    const size_t n = 2 * EU_MIB;

    eu_start_put_o(&e, "mock://stall?paths=3&rate=200M", n, 7, e.o.op_timeout_ms = 150);
    eu_fault(e.c, "stall:op=read:path=0:count=1");
    uint64_t t0 = t_now_ms();
    eu_get_check(e.c, "o", n, 7, &e.call);
    uint64_t took = t_now_ms() - t0;
    T_EQ(eu_faults_fired(e.c), 1u);
    T_GE(took, 145u);
    T_LT(took, 1500u);
    T_GE(e.st.retries[RIO_CLASS_TIMEOUT], 1u);
    T_GE(e.st.path[0].errors, 1u);
    T_EQ(eu_path_bytes(&e.st, NULL), n);
    eu_close(&e);
}

/* A path whose ops move nothing (black-holed: no answer, no error, no
 * byte) while the others complete fails after about a second, not after the
 * op timeout (engine.c, path_silent): its chunk moves to the others and the
 * GET ends byte-exact. Before, the three other paths finished at once and
 * the call waited 8 s for path 3's chunk. */
TEST(silent_path_fails_before_op_timeout_get)
{
    struct eu e;
    const size_t n = 32 * EU_MIB;

    eu_start_put_o(&e, "mock://silentg?paths=4&rate=100M", n, 91, e.o.op_timeout_ms = 8000,
                   e.o.chunk_size = EU_MIB);
    eu_fault(e.c, "stall:op=read:path=3");
    uint64_t t0 = t_now_ms();
    eu_get_check(e.c, "o", n, 91, &e.call);
    uint64_t took = t_now_ms() - t0;
    pthread_mutex_lock(&e.c->mu);
    uint64_t silent = e.c->silent_fails;
    pthread_mutex_unlock(&e.c->mu);
    T_LT(took, 4000u);
    T_GE(silent, 1u);
    T_GE(e.st.path[3].errors, 1u);
    T_GE(e.st.retries[RIO_CLASS_TIMEOUT], 1u);
    T_EQ(eu_path_bytes(&e.st, NULL), n);
    eu_close(&e);
}

/* The same for a PUT: the chunk path 3 holds goes out again on the others
 * and the object reads back whole. */
TEST(silent_path_fails_before_op_timeout_put)
{
    struct eu e;
    const size_t n = 32 * EU_MIB;

    eu_start_o(&e, "mock://silentp?paths=4&rate=100M", e.o.op_timeout_ms = 8000,
               e.o.chunk_size = EU_MIB);
    eu_fault(e.c, "stall:op=write:path=3");
    uint64_t t0 = t_now_ms();
    uint8_t *src = eu_put_pattern(e.c, "o", n, 92, &e.call);
    uint64_t took = t_now_ms() - t0;
    pthread_mutex_lock(&e.c->mu);
    uint64_t silent = e.c->silent_fails;
    pthread_mutex_unlock(&e.c->mu);
    T_LT(took, 4000u);
    T_GE(silent, 1u);
    T_GE(e.st.path[3].errors, 1u);
    rio_mock_faults_clear(e.c);
    eu_get_check(e.c, "o", n, 92, NULL);
    free(src);
    eu_close(&e);
}

/* A path 20x slower than the others, whose first op takes twice the
 * silence floor, still moves bytes (the transport says so): it is never
 * failed as silent and carries its share. */
TEST(silent_rule_spares_a_slow_path)
{
    struct eu e;
    const size_t n = 96 * EU_MIB;

    eu_start_put_o(&e, "mock://silents?paths=4&rate=10M", n, 93, e.o.op_timeout_ms = 8000,
                   e.o.chunk_size = EU_MIB, e.o.adapt = -1);
    T_OK(rio__mock_set_path(e.c->t, 3, 0.5e6, 0));
    eu_get_check(e.c, "o", n, 93, &e.call);
    pthread_mutex_lock(&e.c->mu);
    uint64_t silent = e.c->silent_fails;
    pthread_mutex_unlock(&e.c->mu);
    T_EQ(silent, 0u);
    T_EQ(e.st.path[3].errors, 0u);
    T_GT(e.st.path[3].bytes, 0u);
    eu_close(&e);
}

/* ------------------------------------------------------------ short */

TEST(short_read_detected_and_retried)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start(&e, "mock://short?paths=2");
    /* Outlives the first client: the test's, not the fixture's. */
    uint8_t *src = eu_put_pattern(e.c, "o", n, 8, NULL);
    eu_fault(e.c, "short:op=read:chunk=4:count=2:bytes=1000");
    eu_get_check(e.c, "o", n, 8, &e.call);
    T_EQ(e.st.retries[RIO_CLASS_SHORT], 2u);

    eu_close(&e);

    /* With a single attempt per chunk, under-delivery surfaces. */
    e.o.retry_attempts = 1;
    eu_open(&e, "mock://short?paths=2", &e.o);
    T_OK(rio_put(e.c, "o", src, n, NULL, NULL));
    eu_fault(e.c, "short:op=read:chunk=4:bytes=1000");
    uint8_t *dst = eu_fill_buf(n, 0);
    int64_t ret = rio_get(e.c, "o", dst, n, &e.call);
    T_TRUE(ret == RIO_ESHORT || ret == RIO_ERETRIES);
    T_EQ(e.st.retries[RIO_CLASS_SHORT], 1u);
    free(src);
    free(dst);
    eu_close(&e);
}

/* Under-delivery on a write (the server got fewer bytes) is retried too. */
TEST(short_write_retried)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start(&e, "mock://shortw?paths=2");
    eu_fault(e.c, "short:op=write:chunk=2:count=1:bytes=100");
    eu_keep(&e, eu_put_pattern(e.c, "o", n, 9, &e.call));
    T_EQ(e.st.retries[RIO_CLASS_SHORT], 1u);
    eu_get_check(e.c, "o", n, 9, NULL);
    eu_close(&e);
}

/* ------------------------------------------------------------ generation */

/* The object changes under a GET: never a mix of the two generations. A
 * GET that did not name a generation is planned again against the new one
 * and returns it whole (a re-plan counted); one that named the generation
 * gets RIO_EGENERATION, its RIO_ATOMIC buffer untouched. */
TEST(generation_change_never_stitched)
{
    struct eu e;
    struct rio_stats st;
    const size_t n = 1 * EU_MIB;
    const uint64_t nch = n / EU_CHUNK;

    uint8_t *src = eu_start_put(&e, "mock://gen?paths=2", n, 10);
    struct rio_desc d0, d1;
    T_OK(rio_stat(e.c, "o", &d0));
    eu_fault(e.c, "genchange:chunk=9:count=1");

    uint8_t *dst = eu_pattern_buf(n, 999);
    struct rio_call atomic = {.flags = RIO_ATOMIC, .stats = &st};
    T_EQ(rio_get(e.c, "o", dst, n, &atomic), (int64_t)n);
    T_EQ(st.replans, 1u);
    eu_idle(e.c);

    T_OK(rio_stat(e.c, "o", &d1));
    T_GT(d1.generation, d0.generation);
    T_EQ(d1.size, n);
    /* Every chunk is the new generation's: matches its checksum, and none is
     * the old bytes. */
    for (uint64_t k = 0; k < nch; k++) {
        T_EQ(rio__xxh3(dst + k * EU_CHUNK, EU_CHUNK), d1.xxh[k]);
        T_NE(rio__xxh3(dst + k * EU_CHUNK, EU_CHUNK), d0.xxh[k]);
        T_NE(memcmp(dst + k * EU_CHUNK, src + k * EU_CHUNK, EU_CHUNK), 0);
    }

    /* The old generation is gone; naming it fails at once. */
    struct rio_call old = {.expect_generation = d0.generation};
    T_ERR(rio_get(e.c, "o", dst, n, &old), RIO_EGENERATION);

    /* Named, and changed under the GET: an error, the buffer untouched. */
    uint8_t *keep = eu_pattern_buf(n, 998);
    eu_fault(e.c, "genchange:chunk=5:count=1");
    struct rio_call cur = {.flags = RIO_ATOMIC, .expect_generation = d1.generation};
    T_ERR(rio_get(e.c, "o", keep, n, &cur), RIO_EGENERATION);
    T_PATTERN(keep, n, 998);
    free(keep);

    /* The same in place (no RIO_ATOMIC): still an error, never success. */
    struct rio_desc d2;
    T_OK(rio_stat(e.c, "o", &d2));
    struct rio_call cur2 = {.expect_generation = d2.generation};
    eu_fault(e.c, "genchange:chunk=3:count=1");
    T_ERR(rio_get(e.c, "o", dst, n, &cur2), RIO_EGENERATION);
    rio_desc_cleanup(&d2);
    rio_desc_cleanup(&d0);
    rio_desc_cleanup(&d1);
    free(dst);
    eu_close(&e);
}

static int stream_sink(void *arg, const void *data, size_t len)
{
    uint8_t **at = arg;
    memcpy(*at, data, len);
    *at += len;
    return 0;
}

/* A stream planned again counts the failed attempts of its first run, as
 * every call that runs again does (rio_stats.replans): a bit flipped on
 * the first read (a checksum retry), then the key replaced under the
 * retry, then a clean second run. rio_get_stream lost the first run's
 * retries (each run's reader zeroed the stats). */
TEST(stream_replan_keeps_first_run_retries)
{
    struct eu e;
    struct rio_stats st;
    struct rio_call call = {.stats = &st};
    const size_t n = EU_CHUNK / 2; /* one chunk: one read at a time */

    eu_start_put(&e, "mock://genst", n, 12);
    eu_fault(e.c, "bitflip:op=read:count=1");
    eu_fault(e.c, "genchange:op=read:count=1");
    uint8_t *dst = eu_fill_buf(n, 0), *at = dst;
    T_EQ(rio_get_stream(e.c, "o", 0, stream_sink, &at, &call), (int64_t)n);
    T_EQ(eu_faults_fired(e.c), 2u);
    T_EQ(st.replans, 1u);
    T_EQ(st.retries[RIO_CLASS_CHECKSUM], 1u);
    T_GE(st.retries_total, 2u); /* the checksum and the generation change */
    uint64_t sum = 0;
    for (int k = 0; k < RIO_CLASS__COUNT; k++)
        sum += st.retries[k];
    T_EQ(st.retries_total, sum);
    /* the new generation's bytes: the old ones XOR 0x5A */
    uint8_t *want = eu_pattern_buf(n, 12);
    for (size_t i = 0; i < n; i++)
        want[i] ^= 0x5A;
    T_MEMEQ(dst, want, n);
    free(want);
    free(dst);
    eu_close(&e);
}

/* ------------------------------------------------------------ rollback */

/* Faults that leave garbage from a failed attempt in the chunk's bytes: the
 * retry starts over from the chunk's own start and the result is exact. */
TEST(retry_rollback_read)
{
    struct eu e;
    const size_t n = 2 * EU_MIB + 333;

    eu_start_put_o(&e, "mock://rbr?paths=3&rate=300M", n, 11, e.o.retry_attempts = 5);
    /* A disconnect resets every op on its path, a faulted one too (its
     * retry then counts as a reset): it gets a call of its own, so the
     * counts of the others are exact whatever the timing. */
    eu_fault(e.c, "short:op=read:chunk=2:count=2:bytes=4096");
    eu_fault(e.c, "error:op=read:chunk=11:count=3:error=RIO_ESERVER");
    eu_fault(e.c, "short:op=read:chunk=32:count=1:bytes=1"); /* the last, partial chunk */
    eu_get_check(e.c, "o", n, 11, &e.call);
    T_EQ(eu_faults_fired(e.c), 6u);
    T_EQ(e.st.retries[RIO_CLASS_SHORT], 3u);
    T_EQ(e.st.retries[RIO_CLASS_SERVER], 3u);
    eu_refault(e.c, "disconnect:op=read:chunk=5:count=1:bytes=30000:down=20ms");
    eu_get_check(e.c, "o", n, 11, &e.call);
    T_EQ(eu_faults_fired(e.c), 7u);
    T_GE(e.st.retries[RIO_CLASS_RESET], 1u);
    /* The same faults again with RIO_ATOMIC (staging buffer). */
    eu_refault(e.c, "short:op=read:chunk=2:count=2:bytes=4096");
    eu_fault(e.c, "error:op=read:chunk=11:count=3:error=RIO_ESERVER");
    struct rio_call ac = {.flags = RIO_ATOMIC, .stats = &e.st};
    eu_get_check(e.c, "o", n, 11, &ac);
    T_EQ(e.st.retries[RIO_CLASS_SERVER], 3u);
    struct rio_mock_counters m;
    rio_mock_counters(e.c, &m);
    T_EQ(m.rollback_violations, 0u);
    eu_close(&e);
}

TEST(retry_rollback_write)
{
    struct eu e;
    const size_t n = 2 * EU_MIB + 333;

    eu_start(&e, "mock://rbw?paths=3&rate=300M");
    /* The disconnect in a call of its own (retry_rollback_read says why). */
    eu_fault(e.c, "short:op=write:chunk=2:count=2:bytes=4096");
    eu_fault(e.c, "error:op=write:chunk=11:count=3:error=RIO_ESERVER");
    eu_keep(&e, eu_put_pattern(e.c, "o", n, 12, &e.call));
    T_EQ(eu_faults_fired(e.c), 5u);
    T_EQ(e.st.retries[RIO_CLASS_SHORT], 2u);
    T_EQ(e.st.retries[RIO_CLASS_SERVER], 3u);
    eu_refault(e.c, "disconnect:op=write:chunk=5:count=1:bytes=30000:down=20ms");
    uint8_t *src2 = eu_put_pattern(e.c, "o2", n, 13, &e.call);
    T_EQ(eu_faults_fired(e.c), 6u);
    T_GE(e.st.retries[RIO_CLASS_RESET], 1u);
    eu_get_check(e.c, "o", n, 12, NULL);
    eu_get_check(e.c, "o2", n, 13, NULL);
    free(src2);
    struct rio_mock_counters m;
    rio_mock_counters(e.c, &m);
    T_EQ(m.rollback_violations, 0u);
    eu_close(&e);
}

/* ------------------------------------------------------------ classes */

/* Path-class errors (refused, timed out) move the chunk to another path and
 * do not spend the chunk's attempts. */
TEST(error_class_path_moves)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    /* retry_attempts: a chunk-class failure would be fatal */
    eu_start_put_o(&e, "mock://epath?paths=3", n, 13, e.o.retry_attempts = 1);
    eu_fault(e.c, "error:op=read:chunk=3:count=1:error=ECONNREFUSED");
    eu_fault(e.c, "error:op=read:chunk=6:count=1:error=ETIMEDOUT");
    eu_get_check(e.c, "o", n, 13, &e.call);
    /* The failed path's other ops are moved too and count in its class. */
    T_GE(e.st.retries[RIO_CLASS_REFUSED], 1u);
    T_GE(e.st.retries[RIO_CLASS_TIMEOUT], 1u);
    T_EQ(eu_faults_fired(e.c), 2u);
    eu_close(&e);
}

/* Server errors are the chunk's: they spend attempts. Fewer failures than
 * attempts succeed; more end with RIO_ERETRIES. */
TEST(error_class_server_spends_attempts)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start_put_o(&e, "mock://esrv?paths=2", n, 14, e.o.retry_attempts = 3);
    eu_fault(e.c, "error:op=read:chunk=5:count=2:error=RIO_ESERVER");
    eu_get_check(e.c, "o", n, 14, &e.call);
    T_EQ(e.st.retries[RIO_CLASS_SERVER], 2u);

    eu_refault(e.c, "error:op=read:chunk=5:count=4:error=RIO_ESERVER");
    uint8_t *dst = eu_fill_buf(n, 0);
    uint64_t took;
    T_ERR(eu_get_ms(e.c, "o", dst, n, &e.call, &took), RIO_ERETRIES);
    T_LT(took, 1000u);
    T_EQ(e.st.retries[RIO_CLASS_SERVER], 3u);
    eu_idle(e.c);
    /* The detail says what the last try failed of (it named only the
     * paths, which had no error of their own: "retries exhausted"). */
    T_TRUE(strstr(rio_error_detail(), "last try: ") != NULL);
    T_TRUE(strstr(rio_error_detail(), "RIO_ESERVER") != NULL);
    eu_refault(e.c, "bitflip:op=read:chunk=2:count=10");
    T_ERR(rio_get(e.c, "o", dst, n, &e.call), RIO_ERETRIES);
    T_TRUE(strstr(rio_error_detail(), "RIO_ECHECKSUM") != NULL);
    eu_idle(e.c);

    /* Throttling is retryable too, with four times the patience: 8
     * throttles of one chunk pass where 3 server errors fail, and 12 fail. */
    eu_refault(e.c, "error:op=read:chunk=1:count=8:error=RIO_ETHROTTLE");
    eu_get_check(e.c, "o", n, 14, &e.call);
    T_EQ(e.st.retries[RIO_CLASS_THROTTLE], 8u);
    eu_refault(e.c, "error:op=read:chunk=1:count=20:error=RIO_ETHROTTLE");
    T_ERR(rio_get(e.c, "o", dst, n, &e.call), RIO_ERETRIES);
    T_EQ(e.st.retries[RIO_CLASS_THROTTLE], 12u);
    eu_idle(e.c);
    free(dst);
    eu_close(&e);
}

/* A non-retryable error fails the request at once, with that error. */
TEST(error_class_fatal_fails_at_once)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    /* backoff_base_ms: a retry would show in the time */
    eu_start_put_o(&e, "mock://efatal?paths=2", n, 15, e.o.backoff_base_ms = 200,
                   e.o.backoff_cap_ms = 1000);
    eu_fault(e.c, "error:op=read:chunk=4:error=EACCES");
    uint8_t *dst = eu_fill_buf(n, 0);
    uint64_t took;
    T_ERR(eu_get_ms(e.c, "o", dst, n, &e.call, &took), -EACCES);
    T_LT(took, 150u);
    T_EQ(eu_faults_fired(e.c), 1u);
    T_EQ(e.st.retries[RIO_CLASS_FATAL], 1u);
    eu_idle(e.c);

    /* The same on a PUT: nothing is published. */
    eu_refault(e.c, "error:op=write:chunk=2:error=EACCES");
    uint8_t *other = eu_pattern_buf(n, 16);
    T_ERR(rio_put(e.c, "o", other, n, NULL, NULL), -EACCES);
    eu_idle(e.c);
    rio_mock_faults_clear(e.c);
    eu_get_check(e.c, "o", n, 15, NULL);
    free(dst);
    free(other);
    eu_close(&e);
}

/* Random faults of every retryable kind on reads and writes, many requests:
 * every result is byte-exact and the mock never sees stale attempt state. */
TEST(random_faults_soak)
{
    struct eu e;
    const size_t n = 1 * EU_MIB + 4097;

    eu_start_o(&e, "mock://soak?paths=4&rate=1G", e.o.retry_attempts = 8);
    eu_fault(e.c, "bitflip:p=0.02");
    eu_fault(e.c, "short:p=0.02:bytes=777");
    eu_fault(e.c, "error:p=0.02:error=RIO_ESERVER");
    eu_fault(e.c, "disconnect:p=0.01:bytes=5000:down=5ms");
    eu_fault(e.c, "error:p=0.01:error=ECONNRESET");
    for (int i = 0; i < 8; i++) {
        char key[16];
        snprintf(key, sizeof(key), "k%d", i);
        uint8_t *src = eu_put_pattern(e.c, key, n, 100 + (uint64_t)i, NULL);
        eu_get_check(e.c, key, n, 100 + (uint64_t)i, NULL);
        struct rio_call ac = {.flags = RIO_ATOMIC};
        eu_get_check(e.c, key, n, 100 + (uint64_t)i, &ac);
        free(src);
    }
    T_GT(eu_faults_fired(e.c), 0u);
    eu_close(&e);
}

/*
 * A chunk the server always answers with a path-class error (timed out),
 * whatever the path: each failure cools one path down without spending the
 * chunk's attempts while another path is alive. The request must still end,
 * with an error, in bounded time (no endless rotation over the paths).
 */
TEST(poisoned_chunk_path_class_bounded)
{
    struct eu e;
    struct rio_stats st;
    struct rio_call call = {.deadline_ms = 8000, .stats = &st};
    const size_t n = 1 * EU_MIB;

    eu_start_put_o(&e, "mock://poison?paths=4", n, 17, e.o.retry_attempts = 3,
                   e.o.cooldown_base_ms = 5, e.o.cooldown_cap_ms = 20);
    eu_fault(e.c, "error:op=read:chunk=5:error=ETIMEDOUT");
    uint8_t *dst = eu_fill_buf(n, 0);
    uint64_t took;
    int64_t ret = eu_get_ms(e.c, "o", dst, n, &call, &took);
    fprintf(stderr, "  poisoned chunk: %s after %" PRIu64 " ms, %" PRIu64 " timeouts\n",
            rio_errname((int)ret), took, st.retries[RIO_CLASS_TIMEOUT]);
    T_TRUE(ret == RIO_ERETRIES || ret == RIO_ENOPATH);
    T_LT(took, 3000u);
    eu_idle(e.c);
    rio_mock_faults_clear(e.c);
    eu_sleep_ms(50);
    eu_get_check(e.c, "o", n, 17, NULL);
    free(dst);
    eu_close(&e);
}

/* The only path resets once and comes back: the request waits out the
 * cooldown, probes, and succeeds. */
TEST(single_path_transient_disconnect_recovers)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start_put(&e, "mock://single-disc?paths=1&rate=200M", n, 18);
    eu_fault(e.c, "disconnect:op=read:chunk=6:count=1:bytes=1000:down=30ms");
    eu_get_check(e.c, "o", n, 18, &e.call);
    T_EQ(eu_faults_fired(e.c), 1u);
    T_GE(e.st.retries[RIO_CLASS_RESET], 1u);
    T_GE(e.st.path[0].errors, 1u);
    T_EQ(e.st.path[0].state, 0); /* healthy again */
    eu_close(&e);
}

/* A cooled path is probed with a real chunk only away from the tail: a GET
 * of one chunk never rides the probe while a healthy path can carry it, and a
 * longer GET probes early and brings the path back. */
TEST(probe_stays_out_of_the_tail)
{
    struct eu e;

    eu_start_put_o(&e, "mock://probe-tail?paths=2&rate=200M", EU_CHUNK, 21,
                   e.o.cooldown_base_ms = 20, e.o.cooldown_cap_ms = 20);
    uint8_t *big = eu_put_pattern(e.c, "big", 2 * EU_MIB, 22, NULL);
    /* Path 1 goes down once and cools; the cooldown ends while idle. Its
     * report comes through the contract, not an op of a GET: a GET slower
     * than the cooldown (TSan) would probe the path back to health before
     * the one-chunk GETs below, which then may use it. */
    rio__t_path_event(rio__client_transport(e.c), 1, RIO_PATH_DOWN, -ECONNRESET);
    eu_sleep_ms(40);
    for (int i = 0; i < 5; i++) {
        eu_get_check(e.c, "o", EU_CHUNK, 21, &e.call);
        T_EQ(e.st.path[1].ops, 0u); /* the only chunk went to the healthy path */
    }
    eu_get_check(e.c, "big", 2 * EU_MIB, 22, &e.call);
    T_GT(e.st.path[1].ops, 0u); /* probed early, healthy again, carrying chunks */
    T_EQ(e.st.path[1].state, 0);
    free(big);
    eu_close(&e);
}

/* The object is deleted while a GET reads it: the GET fails with
 * RIO_ENOTFOUND (never a partial success), and with RIO_ATOMIC the caller's
 * buffer is untouched. */
TEST(object_deleted_during_get)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start_put(&e, "mock://delget?paths=2", n, 19);
    for (unsigned i = 0; i < 2; i++)
        T_OK(rio_mock_set_path(e.c, i, 4.0 * EU_MIB, 0)); /* ~125 ms */
    struct eu_get_job j = {.c = e.c, .key = "o", .cap = n, .call = {.flags = RIO_ATOMIC}};
    j.buf = eu_fill_buf(n, 0x6B);
    eu_get_job_start(&j);
    eu_sleep_ms(30);
    T_OK(rio_delete(e.c, "o"));
    eu_get_job_join(&j);
    T_ERR(j.result, RIO_ENOTFOUND);
    T_EQ(eu_count_byte(j.buf, n, 0x6B), n);
    T_EQ(j.st.bytes, 0u);
    free(j.buf);
    eu_close(&e);
}

/* ----------------------------------------------------------- reap errors */

/* A few reaps that fail (the transport could not wait) lose nothing: the ops
 * stay in flight and the next good reap delivers them; the GET is exact. */
TEST(reap_error_transient_get_exact)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start_put(&e, "mock://reapt?paths=2", n, 3);
    struct rio_transport *t = rio__client_transport(e.c);
    rio__mock_reap_fail(t, 3, -EBADF);
    eu_get_check(e.c, "o", n, 3, NULL);
    T_EQ(rio__mock_reaps_failed(t), 3u);
    eu_close(&e);
}

/* Reap keeps failing: the engine backs off instead of spinning (few reaps in
 * 300 ms, not millions), fails the GET with reap's error once eight reaps in
 * a row failed, and returns it when the transport delivers the ops again.
 * The client works afterwards. */
TEST(reap_error_persistent_fails_call_no_spin)
{
    struct eu e;
    const size_t n = 1 * EU_MIB;

    eu_start_put(&e, "mock://reapp?paths=2", n, 4);
    struct rio_transport *t = rio__client_transport(e.c);
    rio__mock_reap_fail(t, UINT32_MAX, -EBADF);
    struct eu_get_job j = {.c = e.c, .key = "o", .buf = eu_fill_buf(n, 0), .cap = n};
    eu_get_job_start(&j);
    eu_sleep_ms(300);
    uint64_t failed = rio__mock_reaps_failed(t);
    rio__mock_reap_fail(t, 0, 0);
    eu_get_job_join(&j);
    T_GE(failed, 8u);
    T_LE(failed, 40u);
    T_EQ(j.result, -EBADF);
    free(j.buf);
    /* Reaps work again: the next GET is exact. */
    eu_get_check(e.c, "o", n, 4, NULL);
    eu_close(&e);
}
