/*
 * Logs: one line per event on stderr, "2024-01-02T03:04:05.678Z LEVEL text",
 * written with a single write(2) so lines from several threads never mix.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/server.h"

int rio__srv_log_level = RIO_SRV_LOG_INFO;

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

void rio__srv_log(int level, const char *fmt, ...)
{
    char line[1024];
    struct timespec ts;
    struct tm tm;
    va_list ap;
    int n, m;

    if (level < 0 || level > RIO_SRV_LOG_DEBUG)
        level = RIO_SRV_LOG_ERROR;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    n = snprintf(line, sizeof(line), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s ",
                 tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                 ts.tv_nsec / 1000000, level_names[level]);
    if (n < 0)
        return;
    va_start(ap, fmt);
    m = vsnprintf(line + n, sizeof(line) - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0)
        return;
    n += m;
    if ((size_t)n > sizeof(line) - 2)
        n = (int)sizeof(line) - 2;
    /* One event, one line: no embedded newlines. */
    for (int i = 0; i < n; i++)
        if (line[i] == '\n' || line[i] == '\r')
            line[i] = ' ';
    line[n++] = '\n';
    if (write(STDERR_FILENO, line, (size_t)n) < 0) {
        /* Nowhere left to report it. */
    }
}
