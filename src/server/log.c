/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logs: one line per event on stderr, "2024-01-02T03:04:05.678Z LEVEL text",
 * whole lines, so lines from several threads never mix.
 *
 * No thread that serves waits for the log's reader: a line goes into a
 * queue of LOG_QUEUE bytes that one writer thread empties into stderr.
 * When the reader stops reading (a pipe nobody drains, a stalled journal),
 * lines that do not fit are counted, not kept, and once the queue has room
 * one line says how many were lost. Before, every thread that logged
 * blocked in write(2): the S3 gateway's request threads, then the workers,
 * then the main thread with "signal 15: draining", so the server stopped
 * answering and SIGTERM no longer stopped it (review). At exit the queue
 * gets LOG_DRAIN_MS to reach stderr.
 *
 * Rate limit: each message (its format string: one call site) may write
 * LOG_BURST lines per LOG_WINDOW; more in the same window are counted, not
 * written, and when the window has passed one line says how many there were
 * with the text of the last one ("repeated N times, last: ..."). A flood
 * (failed auth, refused connections) so costs a few lines a second. The
 * S3 gateway's line per request (rio__srv_log_every) is not limited: a
 * request id a user quotes must find its line.
 *
 * Bytes a peer chose reach the text (an HTTP method, a header): every
 * control byte is written as \xNN, so a line cannot be split, and
 * terminal escapes cannot act on whoever reads the log.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* pthread_setname_np */
#endif
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

int rio__srv_log_level = RIO_SRV_LOG_INFO;

#define LOG_BURST 20u
#define LOG_WINDOW_NS 1000000000ull
#define LOG_SLOTS 64u
#define LINE_MAX_LEN 1024
#define LINE_CAP (LINE_MAX_LEN + 64) /* a line: its time and level, text, newline */
#define LOG_QUEUE (1u << 20)         /* bytes of lines waiting for stderr */
#define LOG_DRAIN_MS 1000

/* The lines waiting for the writer thread: a ring of bytes. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t more, empty;
    char buf[LOG_QUEUE];
    size_t head, len;
    uint64_t dropped; /* lines that found no room since the last note */
    bool writing;     /* the writer holds bytes it took out of the ring */
    bool on;          /* the writer thread runs (else: write at once) */
} lq = {.mu = PTHREAD_MUTEX_INITIALIZER,
        .more = PTHREAD_COND_INITIALIZER,
        .empty = PTHREAD_COND_INITIALIZER};
static pthread_once_t lq_once = PTHREAD_ONCE_INIT;

struct log_slot {
    const char *fmt; /* NULL: free */
    int level;
    uint64_t start; /* CLOCK_MONOTONIC ns: the window's start */
    unsigned lines; /* written in this window */
    uint64_t suppressed;
    char last[LINE_MAX_LEN]; /* the last suppressed message's text */
};

static pthread_mutex_t log_mu = PTHREAD_MUTEX_INITIALIZER;
static struct log_slot log_slots[LOG_SLOTS];

static const char *const level_names[] = {"error", "warn", "info", "debug"};

int rio__srv_log_parse(const char *s)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(s, level_names[i]) == 0)
            return i;
    if (strcmp(s, "warning") == 0)
        return RIO_SRV_LOG_WARN;
    return -1;
}

static uint64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static size_t log_format(int level, const char *text, char *line);

/* All of p to stderr; false when stderr takes no more (closed, gone). */
static bool write_all(const char *p, size_t n)
{
    while (n) {
        ssize_t w = write(STDERR_FILENO, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static void *lq_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&lq.mu);
    for (;;) {
        while (!lq.len && !lq.dropped)
            pthread_cond_wait(&lq.more, &lq.mu);
        /* The count of lost lines once the queue is empty: where they
         * were lost, and never inside a line the ring's end cut in two. */
        uint64_t lost = lq.len ? 0 : lq.dropped;
        lq.dropped -= lost;
        size_t n = lq.len < LOG_QUEUE - lq.head ? lq.len : LOG_QUEUE - lq.head;
        const char *p = lq.buf + lq.head;
        lq.writing = true;
        pthread_mutex_unlock(&lq.mu);
        if (lost) {
            char text[96], note[LINE_CAP];
            snprintf(text, sizeof(text), "%llu log lines lost: stderr was not being read",
                     (unsigned long long)lost);
            size_t k = log_format(RIO_SRV_LOG_WARN, text, note);
            (void)write_all(note, k);
        }
        /* A line cut by the ring's end goes out in two writes, with no
         * other line between them: this is the only writer. */
        (void)write_all(p, n);
        pthread_mutex_lock(&lq.mu);
        lq.head = (lq.head + n) % LOG_QUEUE;
        lq.len -= n;
        lq.writing = false;
        if (!lq.len)
            pthread_cond_broadcast(&lq.empty);
    }
    return NULL;
}

/* At exit: up to LOG_DRAIN_MS for what is queued to reach stderr. */
static void lq_drain(void)
{
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += LOG_DRAIN_MS / 1000;
    until.tv_nsec += (long)(LOG_DRAIN_MS % 1000) * 1000000;
    if (until.tv_nsec >= 1000000000) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000;
    }
    pthread_mutex_lock(&lq.mu);
    while ((lq.len || lq.writing) && pthread_cond_timedwait(&lq.empty, &lq.mu, &until) != ETIMEDOUT)
        ;
    pthread_mutex_unlock(&lq.mu);
}

static void lq_start(void)
{
    pthread_t th;
    pthread_attr_t at;

    if (pthread_attr_init(&at) != 0)
        return;
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&th, &at, lq_main, NULL) == 0) {
        lq.on = true;
        (void)pthread_setname_np(th, "log");
        atexit(lq_drain);
    }
    pthread_attr_destroy(&at);
}

/* One whole line into the queue (or, without the writer, to stderr). */
static void log_emit(const char *line, size_t len)
{
    pthread_once(&lq_once, lq_start);
    pthread_mutex_lock(&lq.mu);
    if (!lq.on) {
        pthread_mutex_unlock(&lq.mu);
        (void)write_all(line, len);
        return;
    }
    if (LOG_QUEUE - lq.len < len) {
        lq.dropped++;
    } else {
        size_t tail = (lq.head + lq.len) % LOG_QUEUE, first = LOG_QUEUE - tail;
        if (first > len)
            first = len;
        memcpy(lq.buf + tail, line, first);
        memcpy(lq.buf, line + first, len - first);
        lq.len += len;
    }
    pthread_cond_signal(&lq.more);
    pthread_mutex_unlock(&lq.mu);
}

/* "TIME LEVEL " + text as one line (newline included) in line (LINE_CAP
 * bytes); its length, 0 when it cannot be made. */
static size_t log_format(int level, const char *text, char *line)
{
    struct timespec ts;
    struct tm tm;
    int n;
    size_t len;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, LINE_CAP, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ", tm.tm_year + 1900,
                 tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts.tv_nsec / 1000000,
                 level_names[level]);
    if (n < 0)
        return 0;
    len = (size_t)n;
    /* One event, one line, and no control byte as itself. */
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p >= 0x20 && *p != 0x7f) {
            if (len + 1 > LINE_CAP - 1)
                break;
            line[len++] = (char)*p;
            continue;
        }
        if (len + 4 > LINE_CAP - 1)
            break;
        line[len++] = '\\';
        line[len++] = 'x';
        line[len++] = "0123456789abcdef"[*p >> 4];
        line[len++] = "0123456789abcdef"[*p & 15];
    }
    line[len++] = '\n';
    return len;
}

/* Write "TIME LEVEL " + text as one line. */
static void log_write(int level, const char *text)
{
    char line[LINE_CAP];
    size_t len = log_format(level, text, line);

    if (len)
        log_emit(line, len);
}

/* The count line of a slot whose window passed (lock held); into out. */
static int slot_report_locked(struct log_slot *sl, char *out, size_t cap)
{
    if (!sl->suppressed)
        return 0;
    snprintf(out, cap, "repeated %llu times (log rate limit: %u lines/s per message), last: %s",
             (unsigned long long)sl->suppressed, LOG_BURST, sl->last);
    sl->suppressed = 0;
    return 1;
}

void rio__srv_log_flush(int all)
{
    char text[LINE_MAX_LEN + 96];
    uint64_t now = mono_ns();

    for (unsigned i = 0; i < LOG_SLOTS; i++) {
        int level = 0, have = 0;
        pthread_mutex_lock(&log_mu);
        struct log_slot *sl = &log_slots[i];
        if (sl->fmt && (all || now - sl->start >= LOG_WINDOW_NS)) {
            level = sl->level;
            have = slot_report_locked(sl, text, sizeof(text));
        }
        pthread_mutex_unlock(&log_mu);
        if (have)
            log_write(level, text);
    }
}

/* The message's text into text (LINE_MAX_LEN), its level made valid. */
static int log_text(char *text, int level, const char *fmt, va_list ap)
{
    if (vsnprintf(text, LINE_MAX_LEN, fmt, ap) < 0)
        text[0] = '\0';
    return level < 0 || level > RIO_SRV_LOG_DEBUG ? RIO_SRV_LOG_ERROR : level;
}

void rio__srv_log_every(int level, const char *fmt, ...)
{
    char text[LINE_MAX_LEN];
    va_list ap;

    va_start(ap, fmt);
    level = log_text(text, level, fmt, ap);
    va_end(ap);
    log_write(level, text);
}

void rio__srv_log(int level, const char *fmt, ...)
{
    char text[LINE_MAX_LEN];
    char report[LINE_MAX_LEN + 96];
    struct log_slot *sl = NULL;
    uint64_t now = mono_ns();
    int have_report = 0, drop = 0;
    va_list ap;

    va_start(ap, fmt);
    level = log_text(text, level, fmt, ap);
    va_end(ap);

    pthread_mutex_lock(&log_mu);
    /* The message's slot: by its format string (its call site). */
    unsigned h = (unsigned)(((uintptr_t)fmt >> 3) % LOG_SLOTS);
    for (unsigned k = 0; k < LOG_SLOTS; k++) {
        struct log_slot *c = &log_slots[(h + k) % LOG_SLOTS];
        if (c->fmt == fmt || !c->fmt) {
            sl = c;
            break;
        }
    }
    if (sl) {
        if (!sl->fmt) {
            sl->fmt = fmt;
            sl->start = now;
        }
        if (now - sl->start >= LOG_WINDOW_NS) {
            have_report = slot_report_locked(sl, report, sizeof(report));
            sl->start = now;
            sl->lines = 0;
        }
        sl->level = level;
        if (sl->lines >= LOG_BURST) {
            sl->suppressed++;
            memcpy(sl->last, text, sizeof(sl->last));
            drop = 1;
        } else {
            sl->lines++;
        }
    }
    pthread_mutex_unlock(&log_mu);
    if (have_report)
        log_write(level, report);
    if (!drop)
        log_write(level, text);
}
