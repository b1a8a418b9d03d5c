/* SPDX-License-Identifier: Apache-2.0 */
/* The gateway's folded-listing tokens (listtoken.h). */
#include <stdio.h>
#include <string.h>

#include "core/url.h"
#include "railio.h"
#include "server/s3/listtoken.h"

void rio__gw_folded_token(const char *rel, char *out, size_t cap)
{
    size_t n = strlen(rel);

    if (1 + 2 * n > RIO_LIST_TOKEN_MAX) {
        snprintf(out, cap, "g%s", rel);
        return;
    }
    out[0] = 'f';
    rio__hex_encode(rel, n, out + 1);
}

int rio__gw_folded_token_parse(const char *t, char *rel, size_t cap)
{
    size_t n = strlen(t);

    if (t[0] == 'g' && n > 1 && n - 1 < cap) {
        memcpy(rel, t + 1, n);
        return 0;
    }
    if (t[0] != 'f' || n < 3 || (n - 1) / 2 >= cap)
        return -1;
    return rio__hex_decode_str(t + 1, n - 1, rel);
}
