/* SPDX-License-Identifier: Apache-2.0 */
/* T_LABELS unit */
/* rio__copy_nt copies exactly what memcpy would, at every alignment and size. */
#include <stdlib.h>
#include <string.h>

#include "core/copy.h"
#include "t.h"

TEST(copy_nt_matches_memcpy)
{
    const size_t cap = 70000;
    uint8_t *src = malloc(cap + 64), *a = malloc(cap + 64), *b = malloc(cap + 64);
    T_NOTNULL(src);
    T_NOTNULL(a);
    T_NOTNULL(b);
    t_fill_pattern(src, cap + 64, 9);
    const size_t sizes[] = {0, 1, 15, 16, 17, 255, 256, 257, 1000, 4096, 16384, 65537};
    for (size_t si = 0; si < sizeof(sizes) / sizeof(sizes[0]); si++) {
        for (size_t da = 0; da < 17; da++) {
            for (size_t sa = 0; sa < 3; sa++) {
                size_t n = sizes[si];
                memset(a, 0xEE, cap + 64);
                memset(b, 0xEE, cap + 64);
                rio__copy_nt(a + da, src + sa, n);
                memcpy(b + da, src + sa, n);
                /* Same bytes, and nothing written outside [da, da + n). */
                T_MEMEQ(a, b, cap + 64);
            }
        }
    }
    free(src);
    free(a);
    free(b);
}
