/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Idempotent commits and upload ids.
 *
 * A client whose PUT_COMMIT answer was lost (a connection cut, a stalled
 * link) sends the commit again, on a fresh connection. By then the upload is
 * gone from the upload table (it became an object), so the store remembers,
 * for each recent commit, which generation the upload became: the retried
 * commit is answered that generation, not "no such upload" and not a second
 * object. The memory is a ring of RIO_SRV_COMMITS_MAX entries indexed by
 * upload id, each valid for RIO_SRV_COMMITS_AGE_NS: the oldest entry is
 * overwritten when the ring is full, so its size is fixed (docs/server.md).
 * A commit the disk tier is still applying is remembered as pending, and a
 * retry meanwhile is answered RIO_ETHROTTLE (ask again later); one that
 * failed is forgotten, so its retry reads "no such upload", which is true.
 *
 * Upload ids are a keyed permutation of a counter: a four-round Feistel
 * network over the counter's two 32-bit halves with round keys drawn from
 * getrandom at start. Distinct counters give distinct ids, so an id is never
 * handed out twice in a server's life, and without the key the next id
 * cannot be told from the last one: the id is the upload's capability, and
 * one client cannot commit, feed or abort another's upload by guessing.
 *
 * Every function here runs under the store lock (s->mu) unless it says it
 * takes it.
 */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "core/alloc.h"
#include "core/checksum.h"
#include "core/clock.h"
#include "server/server.h"

#include "railio.h"

struct rio_srv_done {
    uint64_t id, generation, nchunks, t_ns;
    uint32_t next; /* next entry of the bucket + 1; 0 ends it */
    uint32_t pending;
};

struct rio_srv_commits {
    struct rio_srv_done *e; /* RIO_SRV_COMMITS_MAX, a ring; id 0 = free */
    uint32_t *head;         /* RIO_SRV_COMMITS_MAX buckets: first entry + 1 */
    uint32_t next;          /* the ring position written next */
    uint32_t round[4];      /* upload id permutation keys */
};

static uint32_t bucket(uint64_t id)
{
    id ^= id >> 29;
    id *= 0xbf58476d1ce4e5b9ull;
    id ^= id >> 32;
    return (uint32_t)(id & (RIO_SRV_COMMITS_MAX - 1));
}

int rio__srv_commits_new(struct rio_srv_commits **out)
{
    struct rio_srv_commits *c = rio__calloc(1, sizeof(*c));
    ssize_t n;

    if (!c)
        return -ENOMEM;
    c->e = rio__calloc(RIO_SRV_COMMITS_MAX, sizeof(*c->e));
    c->head = rio__calloc(RIO_SRV_COMMITS_MAX, sizeof(*c->head));
    if (!c->e || !c->head) {
        rio__srv_commits_free(c);
        return -ENOMEM;
    }
    do
        n = getrandom(c->round, sizeof(c->round), 0);
    while (n < 0 && errno == EINTR);
    if (n != (ssize_t)sizeof(c->round)) {
        /* Ids would be guessable: refuse to start rather than say nothing. */
        rio__srv_commits_free(c);
        return n < 0 ? -errno : -EIO;
    }
    *out = c;
    return 0;
}

void rio__srv_commits_free(struct rio_srv_commits *c)
{
    if (!c)
        return;
    rio__free(c->e);
    rio__free(c->head);
    memset(c->round, 0, sizeof(c->round));
    rio__free(c);
}

uint64_t rio__srv_commits_id(const struct rio_srv_commits *c, uint64_t counter)
{
    uint32_t l = (uint32_t)(counter >> 32), r = (uint32_t)counter;

    for (int i = 0; i < 4; i++) {
        uint8_t in[8];
        memcpy(in, &r, 4);
        memcpy(in + 4, &c->round[i], 4);
        uint32_t f = (uint32_t)rio__xxh3(in, sizeof(in));
        uint32_t nl = r;
        r = l ^ f;
        l = nl;
    }
    return ((uint64_t)l << 32) | r;
}

static struct rio_srv_done *find(struct rio_srv_commits *c, uint64_t id, uint64_t now,
                                 uint32_t **link)
{
    uint32_t *pp = &c->head[bucket(id)];

    while (*pp) {
        struct rio_srv_done *e = &c->e[*pp - 1];
        if (e->id == id) {
            if (link)
                *link = pp;
            return now - e->t_ns <= RIO_SRV_COMMITS_AGE_NS ? e : NULL;
        }
        pp = &e->next;
    }
    return NULL;
}

static void unlink_entry(struct rio_srv_commits *c, uint32_t pos)
{
    struct rio_srv_done *e = &c->e[pos];
    uint32_t *pp = &c->head[bucket(e->id)];

    while (*pp && *pp != pos + 1)
        pp = &c->e[*pp - 1].next;
    if (*pp)
        *pp = e->next;
    memset(e, 0, sizeof(*e));
}

void rio__srv_commits_put_locked(struct rio_srv_commits *c, uint64_t id, uint64_t generation,
                                 uint64_t nchunks, int pending, uint64_t now)
{
    uint32_t pos = c->next;
    struct rio_srv_done *e = &c->e[pos];

    if (e->id)
        unlink_entry(c, pos);
    c->next = (pos + 1) & (RIO_SRV_COMMITS_MAX - 1);
    e->id = id;
    e->generation = generation;
    e->nchunks = nchunks;
    e->t_ns = now;
    e->pending = pending ? 1 : 0;
    uint32_t *h = &c->head[bucket(id)];
    e->next = *h;
    *h = pos + 1;
}

int rio__srv_store_recall(struct rio_srv_store *s, uint64_t id, uint64_t nchunks,
                          uint64_t *generation)
{
    struct rio_srv_done *e;
    int ret;

    pthread_mutex_lock(&s->mu);
    e = s->commits ? find(s->commits, id, rio__now_ns(), NULL) : NULL;
    if (!e)
        ret = RIO_ENOTFOUND;
    else if (e->nchunks != nchunks)
        ret = RIO_EPROTO; /* as for a live upload: another geometry */
    else if (e->pending)
        ret = RIO_ETHROTTLE;
    else {
        *generation = e->generation;
        ret = 0;
    }
    pthread_mutex_unlock(&s->mu);
    return ret;
}

void rio__srv_store_settle(struct rio_srv_store *s, uint64_t id, uint64_t nchunks,
                           uint64_t generation, int status)
{
    uint64_t now = rio__now_ns();
    struct rio_srv_done *e;

    pthread_mutex_lock(&s->mu);
    if (s->commits) {
        e = find(s->commits, id, now, NULL);
        if (e && status < 0) {
            unlink_entry(s->commits, (uint32_t)(e - s->commits->e));
        } else if (e) {
            e->pending = 0;
            e->generation = generation;
        } else if (status == 0) {
            /* Overwritten while the disk applied it: remember it again. */
            rio__srv_commits_put_locked(s->commits, id, generation, nchunks, 0, now);
        }
    }
    pthread_mutex_unlock(&s->mu);
}
