/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Content-Range of a ranged GET's answer. No allocation, no libcurl
 * (tests/unit/test_s3_parse.c, tests/fuzz/fuzz_http.c).
 */
#include <stdio.h>

#include "transport/s3/parse.h"

/* "bytes FIRST-LAST/TOTAL" (TOTAL may be '*'). */
bool rio__s3_parse_crange(const char *v, struct s3_rsp *r)
{
    unsigned long long a, b, c = 0;
    int n = 0;

    if (sscanf(v, "bytes %llu-%llu/%n", &a, &b, &n) != 2 || n == 0)
        return false;
    if (v[n] == '*')
        c = UINT64_MAX;
    else if (sscanf(v + n, "%llu", &c) != 1)
        return false;
    if (a > b)
        return false;
    r->cr_first = a;
    r->cr_last = b;
    r->cr_total = c;
    return true;
}
