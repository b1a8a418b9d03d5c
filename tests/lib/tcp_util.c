/* SPDX-License-Identifier: Apache-2.0 */
/* tcp_util: the railio:// tests' clients and checks (see tcp_util.h). */
#include <xxhash.h>

#include "tcp_util.h"
#include "transport/fault.h"

void tu_url(char *out, size_t cap, const struct srv_env *e, const char *params)
{
    snprintf(out, cap, "railio://%s%s%s", e->addr[0], params && *params ? "?" : "",
             params ? params : "");
}

struct rio__tcp_counters tu_tcp(struct rio_client *c)
{
    struct rio__tcp_counters k;

    if (rio__tcp_counters(rio__fault_inner(rio__client_transport(c)), &k) < 0)
        T_FAIL("not a railio:// client");
    return k;
}

uint64_t tu__put(struct rio_client *c, const char *key, size_t n, uint64_t seed, const char *file,
                 int line)
{
    uint64_t gen = 0;

    t__put_pattern(c, key, n, seed, NULL, 0, &gen, file, line);
    return gen;
}

void tu_env_start(struct tu_env *x, const char *const *args, const char *params)
{
    srv_start(&x->e, args);
    tu_opts(&x->o);
    tu_url(x->url, sizeof(x->url), &x->e, params);
    tu_open(&x->u, x->url, &x->o);
}

void tu_env_stop(struct tu_env *x)
{
    tu_close(&x->u);
    T_EQ(srv_stop(&x->e), 0);
}

int tu_hash_cb(void *arg, const void *data, size_t len)
{
    struct tu_hasher *h = arg;
    XXH3_64bits_update(h->st, data, len);
    h->n += len;
    return 0;
}
