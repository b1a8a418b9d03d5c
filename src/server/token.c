/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The --auth-token-file token, replaced on SIGHUP while workers AUTH. The
 * key in force is a reference-counted struct swapped under a mutex: an AUTH
 * takes a reference once (rio__srv_token_get) and makes its three MACs (the
 * client's proof, the server's, the session key) with that one key, so a
 * swap in the middle cannot mix two keys, and the key it holds is freed only
 * when it lets go. As many changes as the operator likes; a replaced key is
 * wiped and freed once the last AUTH using it is done. A key lives in secret
 * memory (core/secret.h): a core dump of railiod does not carry it.
 */
#include <errno.h>
#include <string.h>

#include <openssl/crypto.h>

#include "core/alloc.h"
#include "core/secret.h"
#include "railio.h"
#include "server/server.h"

static struct rio_srv_key *key_new(const uint8_t *bytes, size_t len)
{
    struct rio_srv_key *k;

    if (len == 0 || len > RIO_SRV_TOKEN_MAX)
        return NULL;
    k = rio__secret_alloc(sizeof(*k) + len);
    if (!k)
        return NULL;
    atomic_init(&k->refs, 1);
    k->len = len;
    memcpy(k->bytes, bytes, len);
    return k;
}

void rio__srv_key_put(struct rio_srv_key *k)
{
    if (!k || atomic_fetch_sub(&k->refs, 1) != 1)
        return;
    rio__secret_free(k); /* wipes it */
}

int rio__srv_token_new(struct rio_srv_token **out, const uint8_t *bytes, size_t len)
{
    struct rio_srv_token *t;

    *out = NULL;
    if (len == 0 || len > RIO_SRV_TOKEN_MAX)
        return RIO_EINVAL;
    t = rio__calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->key = key_new(bytes, len);
    if (!t->key) {
        rio__free(t);
        return -ENOMEM;
    }
    pthread_mutex_init(&t->mu, NULL);
    *out = t;
    return 0;
}

int rio__srv_token_set(struct rio_srv_token *t, const uint8_t *bytes, size_t len)
{
    struct rio_srv_key *k = key_new(bytes, len), *old;
    int same;

    if (!k)
        return len == 0 || len > RIO_SRV_TOKEN_MAX ? RIO_EINVAL : -ENOMEM;
    pthread_mutex_lock(&t->mu);
    old = t->key;
    same = old->len == len && CRYPTO_memcmp(old->bytes, bytes, len) == 0;
    if (!same)
        t->key = k;
    pthread_mutex_unlock(&t->mu);
    rio__srv_key_put(same ? k : old);
    return !same;
}

struct rio_srv_key *rio__srv_token_get(struct rio_srv_token *t)
{
    struct rio_srv_key *k;

    pthread_mutex_lock(&t->mu);
    k = t->key;
    atomic_fetch_add(&k->refs, 1);
    pthread_mutex_unlock(&t->mu);
    return k;
}

void rio__srv_token_free(struct rio_srv_token *t)
{
    if (!t)
        return;
    rio__srv_key_put(t->key);
    pthread_mutex_destroy(&t->mu);
    rio__free(t);
}
