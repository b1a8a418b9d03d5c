/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS net */
/* T_TIMEOUT 120 */
/*
 * Streaming PUTs on railio:// against a real railiod: a writer that is
 * aborted sends PUT_ABORT, so the server frees the upload at once (not after
 * --upload-timeout), also when the server had closed the idle control
 * connection the upload was opened on while its chunks streamed.
 */
#include <time.h>

#include "tcp_util.h"


/* The server's upload count reaches 0 within ms; the last count seen. */
static uint64_t uploads_settle(struct wc *w, unsigned ms)
{
    uint64_t n = 0;
    for (unsigned waited = 0;; waited += 10) {
        n = wc_stat(w).uploads;
        if (n == 0 || waited >= ms)
            return n;
        struct timespec ts = {0, 10 * 1000000};
        nanosleep(&ts, NULL);
    }
}

static void abort_case(unsigned idle_s)
{
    struct tu_env x;
    struct wc w;
    struct rio_writer *wr = NULL;
    char idle[16];
    snprintf(idle, sizeof(idle), "%us", idle_s ? idle_s : 120);
    const char *args[] = {"--upload-timeout", "60s", "--idle-timeout", idle, NULL};

    tu_env_start(&x, args, NULL);
    uint8_t *buf = tu_pattern(TU_CHUNK, 7);
    T_EQ(rio_writer_open(x.u.c, "ab/obj", 64 * TU_MIB, 2, NULL, &wr), 0);
    /* Chunks stream for longer than the idle timeout: the control
     * connection the upload was opened on sees no traffic meanwhile. */
    unsigned rounds = idle_s ? idle_s * 10 + 15 : 8;
    for (unsigned i = 0; i < rounds; i++) {
        T_EQ(rio_writer_write(wr, buf, TU_CHUNK), 0);
        if (idle_s) {
            struct timespec ts = {0, 100 * 1000000};
            nanosleep(&ts, NULL);
        }
    }
    wc_open(&w, x.e.addr[0]);
    T_EQ(wc_stat(&w).uploads, 1u);
    rio_writer_abort(wr);
    /* Freed at once, not after --upload-timeout. */
    T_EQ(uploads_settle(&w, 500), 0u);
    struct rio_proto_desc d;
    uint8_t *keep = NULL;
    T_EQ(wc_lookup(&w, "ab/obj", &d, &keep), RIO_ENOTFOUND);
    free(keep);
    free(buf);
    wc_close(&w);
    tu_env_stop(&x);
}

TEST(writer_abort_frees_upload)
{
    abort_case(0);
}

TEST(writer_abort_after_control_idle)
{
    abort_case(1);
}
