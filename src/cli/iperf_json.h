/* SPDX-License-Identifier: Apache-2.0 */
#ifndef RIO_CLI_IPERF_JSON_H
#define RIO_CLI_IPERF_JSON_H

/* iperf3's -J report, read by `railio bench rails` and the rails tests
 * (tests/lib/rails_util.c) for the network's ceiling. */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"

/* bits_per_second of "sum_received" in an iperf3 -J file (the first MiB);
 * <= 0 if none. */
static inline double rio_cli_iperf_json_bps(const char *file)
{
    char *buf, *p;
    FILE *f = fopen(file, "r");
    size_t n;
    double v = -1;

    if (!f)
        return -1;
    buf = rio__malloc(1 << 20);
    if (!buf) {
        fclose(f);
        return -1;
    }
    n = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    buf[n] = '\0';
    p = strstr(buf, "\"sum_received\"");
    if (p)
        p = strstr(p, "\"bits_per_second\"");
    if (p && (p = strchr(p, ':')))
        v = strtod(p + 1, NULL);
    rio__free(buf);
    return v;
}

#endif
