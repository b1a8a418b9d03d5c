/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logs: one line per event on stderr, "2024-01-02T03:04:05.678Z LEVEL text",
 * written with a single write(2) so lines from several threads never mix.
 *
 * Rate limit: each message (its format string: one call site) may write
 * LOG_BURST lines per LOG_WINDOW; more in the same window are counted, not
 * written, and when the window has passed one line says how many there were
 * with the text of the last one ("repeated N times, last: ..."). A flood
 * (failed auth, refused connections) so costs a few lines a second.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

int rio__srv_log_level = RIO_SRV_LOG_INFO;

#define LOG_BURST 20u
#define LOG_WINDOW_NS 1000000000ull
#define LOG_SLOTS 64u
#define LINE_MAX_LEN 1024

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

/* Write "TIME LEVEL " + text as one line. */
static void log_write(int level, const char *text)
{
    char line[LINE_MAX_LEN + 64];
    struct timespec ts;
    struct tm tm;
    int n;
    size_t len;

    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, level_names[level]);
    if (n < 0)
        return;
    len = strlen(text);
    if (len > sizeof(line) - (size_t)n - 1)
        len = sizeof(line) - (size_t)n - 1;
    memcpy(line + n, text, len);
    len += (size_t)n;
    /* One event, one line: no embedded newlines. */
    for (size_t i = 0; i < len; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[len++] = '\n';
    if (write(STDERR_FILENO, line, len) < 0) {
        /* Nowhere left to report it. */
    }
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

void rio__srv_log(int level, const char *fmt, ...)
{
    char text[LINE_MAX_LEN];
    char report[LINE_MAX_LEN + 96];
    struct log_slot *sl = NULL;
    uint64_t now = mono_ns();
    int have_report = 0, drop = 0;
    va_list ap;

    if (level < 0 || level > RIO_SRV_LOG_DEBUG)
        level = RIO_SRV_LOG_ERROR;
    va_start(ap, fmt);
    if (vsnprintf(text, sizeof(text), fmt, ap) < 0)
        text[0] = '\0';
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
