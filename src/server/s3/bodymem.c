/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The gateway's budget for body buffers (docs/gateway.md, "Memory"): what
 * the engine's writers (PutObject, UploadPart, POST Object) and readers
 * (GetObject) of every request in flight may hold together, and what those
 * of one client address may hold of it. Each request bounds its own memory
 * (a writer's slots x chunk size, a reader's prefetch ring), but nothing
 * bounded their sum: --s3-max-conns (1024) connections each holding a
 * window of 16 MiB are 16 GiB, and a client needs only to send a little of
 * each body, or read none of each answer, to hold them.
 *
 * A request takes its window (min(its length, the window)) before its
 * writer or reader opens and gives it back when it ends, whichever way
 * (gateway.c's completion callback, which libmicrohttpd calls for every
 * request, at shutdown too). Past the budget, or past its address's share,
 * it is answered 503 SlowDown at once, with Retry-After: every S3 client
 * retries it with backoff. It never waits for room: a waiting request
 * would hold its connection and thread, and the connections that could
 * give room back may be the very ones that wait. The budget's mutex is
 * held for the bookkeeping only, never across a call.
 */
#include <errno.h>
#include <linux/sockios.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "core/clock.h"
#include "core/engine.h"
#include "server/s3/gw.h"
#include "server/server.h"

static struct {
    pthread_mutex_t mu;
    /* Set before the daemon starts, read only afterwards */
    uint64_t budget, share; /* share 0: no per-address share */
    /* Under mu */
    uint64_t held, peak;
    struct {
        uint64_t addr; /* the client address's 8 bytes (gw_req.addr) */
        uint64_t held; /* 0: free */
    } addr[GW_MEM_ADDRS];
    /* Refusals: [0] past the budget, [1] past the address's share */
    _Atomic uint64_t refused[2];
} m = {.mu = PTHREAD_MUTEX_INITIALIZER};

uint64_t rio__gw_mem_default(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    uint64_t q;

    if (pages <= 0 || psz <= 0)
        return GW_MEM_DEFAULT_MAX;
    /* A quarter of it, without forming pages x size (no overflow). */
    q = (uint64_t)pages / 4;
    if (q > GW_MEM_DEFAULT_MAX / (uint64_t)psz)
        return GW_MEM_DEFAULT_MAX;
    q *= (uint64_t)psz;
    return q < GW_MEM_MIN ? GW_MEM_MIN : q;
}

void rio__gw_mem_init(uint64_t budget, int per_addr)
{
    pthread_mutex_lock(&m.mu);
    m.budget = budget ? budget : rio__gw_mem_default();
    m.share = per_addr ? m.budget / GW_MEM_ADDR_DIV : 0;
    m.held = m.peak = 0;
    memset(m.addr, 0, sizeof(m.addr));
    pthread_mutex_unlock(&m.mu);
    atomic_store(&m.refused[0], 0);
    atomic_store(&m.refused[1], 0);
}

uint64_t rio__gw_mem_window(uint64_t len, uint64_t chunk)
{
    struct rio_client *c = rio__gw_client();
    uint64_t slots = c ? (uint64_t)c->o.depth * c->npaths : 0, w;

    if (slots < 2)
        slots = 2; /* a writer's least (stream.c); a reader's 1 rounds up */
    w = chunk && slots > UINT64_MAX / chunk ? UINT64_MAX : chunk * slots;
    return len < w ? len : w;
}

uint64_t rio__gw_mem_put_window(uint64_t len)
{
    return rio__gw_mem_window(len, rio__put_chunk_size(rio__gw_client(), len));
}

/* The slot of addr, under mu: the one holding it, else a free one, else
 * the last (addresses past GW_MEM_ADDRS share it). */
static unsigned mem_slot_locked(uint64_t addr)
{
    unsigned free_i = GW_MEM_ADDRS - 1;
    int have_free = 0;

    for (unsigned i = 0; i < GW_MEM_ADDRS; i++) {
        if (m.addr[i].held && m.addr[i].addr == addr)
            return i;
        if (!m.addr[i].held && !have_free) {
            free_i = i;
            have_free = 1;
        }
    }
    return free_i;
}

int rio__gw_mem_take(struct gw_req *r, uint64_t n)
{
    uint64_t addr;
    int why = -1;

    if (!n)
        return 0;
    memcpy(&addr, r->addr, sizeof(addr));
    pthread_mutex_lock(&m.mu);
    unsigned i = r->mem_slot ? r->mem_slot - 1 : mem_slot_locked(addr);
    uint64_t ah = m.addr[i].held;
    /* held may pass budget (a request alone), ah the share: never
     * subtract past zero. */
    if (m.held && (m.held >= m.budget || n > m.budget - m.held))
        why = 0;
    else if (m.share && ah && (ah >= m.share || n > m.share - ah))
        why = 1;
    else if (n > UINT64_MAX - m.held || n > UINT64_MAX - ah)
        why = 0; /* cannot be: windows are bounded, held by their sum */
    if (why < 0) {
        if (!ah)
            m.addr[i].addr = addr;
        m.addr[i].held = ah + n;
        m.held += n;
        if (m.held > m.peak)
            m.peak = m.held;
        r->mem_held += n;
        r->mem_slot = i + 1;
    }
    pthread_mutex_unlock(&m.mu);
    if (why >= 0) {
        atomic_fetch_add(&m.refused[why], 1);
        SRV_DEBUG("s3: %llu bytes of body buffers refused: %s", (unsigned long long)n,
                  why ? "the address's share is taken" : "the budget is taken");
    }
    return why < 0 ? 0 : -1;
}

/* The budget's half, not the address's share: an address's share taken
 * by its own bodies keeps out no one else (other addresses are bounded by
 * the budget alone), and counting it cut the parallel uploads of one
 * address over a slow uplink (32 parts of 8 MiB: the default share) while
 * the gateway was otherwise idle, giving room to nobody. */
/*
 * The sweeper: a GET's answer holds its reader's ring (16 MiB) for as long
 * as its client takes to read it, and libmicrohttpd asks for more of it only
 * as the socket drains (about once a MiB), so nothing on the connection's
 * own thread sees a reader that takes a few bytes now and then: 64 of them
 * (16 from each of four addresses, reading 3 KB/s) held the whole budget,
 * every other client's PUTs and GETs refused 503 SlowDown for as long as
 * they liked. Once a second, while room is scarce (the budget more than
 * half taken), every answer holding room that its client drained slower
 * than the rate on average from the grace on (what was handed out, less
 * what still waits in the socket's send queue) has its socket shut down
 * (to be reset when closed): libmicrohttpd then ends the connection, its
 * response is freed and the room given back. The socket is open while its stream is linked: the
 * response is freed (get_free unlinks under s.mu) before libmicrohttpd
 * closes the socket, and the sweeper holds s.mu across its shutdown().
 */
static struct {
    pthread_mutex_t mu; /* the list; held across a shutdown() */
    pthread_cond_t cv;
    struct rio_list streams;
    pthread_t th;
    bool running, stop;
    uint64_t rate;
    unsigned grace_s;
    _Atomic uint64_t cut;
} sw = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

void rio__gw_mem_stream_add(struct gw_mem_stream *s, int fd)
{
    s->fd = fd;
    s->t0 = rio__now_ns();
    atomic_store(&s->sent, 0);
    s->cut = false;
    pthread_mutex_lock(&sw.mu);
    rio_list_push_back(&sw.streams, &s->node);
    pthread_mutex_unlock(&sw.mu);
}

void rio__gw_mem_stream_del(struct gw_mem_stream *s)
{
    pthread_mutex_lock(&sw.mu);
    rio_list_remove(&sw.streams, &s->node);
    pthread_mutex_unlock(&sw.mu);
}

static void sweep_once(void)
{
    uint64_t now = rio__now_ns();

    if (!rio__gw_mem_scarce())
        return;
    pthread_mutex_lock(&sw.mu);
    rio_list_each (s, &sw.streams, struct gw_mem_stream, node) {
        double sec = (double)(now - s->t0) / 1e9;
        if (s->cut || sec <= (double)sw.grace_s)
            continue;
        uint64_t sent = atomic_load(&s->sent);
        int queued = 0;
        if (ioctl(s->fd, SIOCOUTQ, &queued) < 0 || queued < 0)
            queued = 0;
        uint64_t drained = sent > (uint64_t)queued ? sent - (uint64_t)queued : 0;
        if ((double)drained >= (double)sw.rate * sec)
            continue;
        s->cut = true;
        atomic_fetch_add(&sw.cut, 1);
        /* Reset, not a FIN after what the kernel still queues for it (a
         * send buffer of MiBs at the client's pace): libmicrohttpd's
         * close() then drops it. */
        struct linger lg = {.l_onoff = 1, .l_linger = 0};
        setsockopt(s->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
        shutdown(s->fd, SHUT_RDWR);
        SRV_DEBUG("s3: a GET read at %.0f bytes a second while room was scarce: cut",
                  (double)drained / sec);
    }
    pthread_mutex_unlock(&sw.mu);
}

static void *sweep_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&sw.mu);
    while (!sw.stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 1;
        pthread_cond_timedwait(&sw.cv, &sw.mu, &ts);
        if (sw.stop)
            break;
        pthread_mutex_unlock(&sw.mu);
        sweep_once();
        pthread_mutex_lock(&sw.mu);
    }
    pthread_mutex_unlock(&sw.mu);
    return NULL;
}

int rio__gw_mem_sweep_start(uint64_t rate, unsigned grace_s)
{
    int ret;

    pthread_mutex_lock(&sw.mu);
    rio_list_init(&sw.streams);
    sw.rate = rate;
    sw.grace_s = grace_s;
    sw.stop = false;
    pthread_mutex_unlock(&sw.mu);
    ret = pthread_create(&sw.th, NULL, sweep_main, NULL);
    if (ret != 0)
        return -ret;
    sw.running = true;
    return 0;
}

void rio__gw_mem_sweep_stop(void)
{
    if (!sw.running)
        return;
    pthread_mutex_lock(&sw.mu);
    sw.stop = true;
    pthread_cond_signal(&sw.cv);
    pthread_mutex_unlock(&sw.mu);
    pthread_join(sw.th, NULL);
    sw.running = false;
}

int rio__gw_mem_scarce(void)
{
    int scarce;

    pthread_mutex_lock(&m.mu);
    scarce = m.held > m.budget / 2;
    pthread_mutex_unlock(&m.mu);
    return scarce;
}

void rio__gw_mem_release(unsigned slot, uint64_t n)
{
    if (!n || !slot || slot > GW_MEM_ADDRS)
        return;
    pthread_mutex_lock(&m.mu);
    unsigned i = slot - 1;
    /* Never below zero: a bug here must not open the budget wide. */
    m.addr[i].held -= n <= m.addr[i].held ? n : m.addr[i].held;
    m.held -= n <= m.held ? n : m.held;
    pthread_mutex_unlock(&m.mu);
}

void rio__gw_mem_move(struct gw_req *r, unsigned *slot, uint64_t *n)
{
    *slot = r->mem_slot;
    *n = r->mem_held;
    r->mem_held = 0;
    r->mem_slot = 0;
}

void rio__gw_mem_give(struct gw_req *r)
{
    rio__gw_mem_release(r->mem_slot, r->mem_held);
    r->mem_held = 0;
    /* Its slot, empty, may go to another address: a later take of r's
     * looks its address up again. */
    r->mem_slot = 0;
}

int rio__gw_mem_refuse(struct MHD_Connection *c, struct gw_req *r)
{
    r->retry_after = 1;
    r->close = 1; /* its body, if any comes, is not read */
    return rio__gw_error(c, r, 503, "SlowDown", "Please reduce your request rate.");
}

void rio__gw_mem_metrics(struct gw_buf *b)
{
    uint64_t held, peak;

    pthread_mutex_lock(&m.mu);
    held = m.held;
    peak = m.peak;
    pthread_mutex_unlock(&m.mu);
    /* One line group a call: rio__gw_buf_printf formats up to 512 bytes. */
    rio__gw_buf_printf(b,
                       "# HELP railiod_s3_memory_budget_bytes What the body buffers of the S3 "
                       "requests in flight may hold together (--s3-memory).\n"
                       "# TYPE railiod_s3_memory_budget_bytes gauge\n"
                       "railiod_s3_memory_budget_bytes %llu\n",
                       (unsigned long long)m.budget);
    rio__gw_buf_printf(b,
                       "# HELP railiod_s3_memory_share_bytes What those of one client address "
                       "may hold (0: no share).\n"
                       "# TYPE railiod_s3_memory_share_bytes gauge\n"
                       "railiod_s3_memory_share_bytes %llu\n",
                       (unsigned long long)m.share);
    rio__gw_buf_printf(b,
                       "# HELP railiod_s3_memory_held_bytes Body buffer room held by S3 "
                       "requests in flight.\n"
                       "# TYPE railiod_s3_memory_held_bytes gauge\n"
                       "railiod_s3_memory_held_bytes %llu\n"
                       "# HELP railiod_s3_memory_held_peak_bytes The most body buffer room "
                       "held at once since start.\n"
                       "# TYPE railiod_s3_memory_held_peak_bytes gauge\n"
                       "railiod_s3_memory_held_peak_bytes %llu\n",
                       (unsigned long long)held, (unsigned long long)peak);
    rio__gw_buf_printf(b,
                       "# HELP railiod_s3_memory_refused_total S3 requests answered 503 "
                       "SlowDown for want of body buffer room, past the budget or past their "
                       "address's share.\n"
                       "# TYPE railiod_s3_memory_refused_total counter\n"
                       "railiod_s3_memory_refused_total{reason=\"budget\"} %llu\n"
                       "railiod_s3_memory_refused_total{reason=\"address\"} %llu\n",
                       (unsigned long long)atomic_load(&m.refused[0]),
                       (unsigned long long)atomic_load(&m.refused[1]));
    rio__gw_buf_printf(b,
                       "# HELP railiod_s3_memory_slow_reads_cut_total GET answers whose "
                       "clients read them too slowly while room was scarce, cut.\n"
                       "# TYPE railiod_s3_memory_slow_reads_cut_total counter\n"
                       "railiod_s3_memory_slow_reads_cut_total %llu\n",
                       (unsigned long long)atomic_load(&sw.cut));
}
