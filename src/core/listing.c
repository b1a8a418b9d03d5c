/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rio_list and rio_exists_batch: the engine's side of listing and batch
 * existence (include/railio.h). Not yet wired to any transport: both answer
 * RIO_ENOTSUP until the transports' list and exists ops land.
 */
#include <stdlib.h>
#include <string.h>

#include "core/internal.h"
#include "railio.h"

int rio_list(struct rio_client *c, const struct rio_list_args *a, struct rio_list_page *out,
             const struct rio_call *call)
{
    (void)call;
    rio__detail_clear();
    if (out)
        memset(out, 0, sizeof(*out));
    if (!c || !a || !out)
        return RIO_EINVAL;
    return RIO_ENOTSUP;
}

void rio_list_page_cleanup(struct rio_list_page *p)
{
    if (!p)
        return;
    free(p->entries);
    memset(p, 0, sizeof(*p));
}

int rio_exists_batch(struct rio_client *c, const char *const *keys, unsigned n, uint8_t *exists,
                     unsigned *prefix_hits, const struct rio_call *call)
{
    (void)exists;
    (void)prefix_hits;
    (void)call;
    rio__detail_clear();
    if (!c || (n && !keys))
        return RIO_EINVAL;
    return RIO_ENOTSUP;
}
