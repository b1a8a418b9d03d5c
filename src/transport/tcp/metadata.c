/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The metadata ops (lookup, put_open, put_commit, put_abort, remove), each
 * one request on the owner's control connection (control.c).
 */
#include <inttypes.h>
#include <time.h>

#include "core/internal.h"
#include "transport/tcp/tcp_int.h"

/* The body of a request that names only a key (LOOKUP, DELETE): its length,
 * or an error; *klen is the key's length. */
static int key_body(const char *key, uint8_t *kb, size_t cap, size_t *klen)
{
    struct rio_proto_key k;
    int ret = rio__key_len(key, klen);

    if (ret < 0)
        return ret;
    k.key = key;
    k.key_len = (uint16_t)*klen;
    ret = rio__proto_enc_key(&k, kb, cap);
    return ret < 0 ? RIO_EINVAL : ret;
}

void rio__tcp_etag_out(char *dst, const char src[RIO_PROTO_ETAG_LEN])
{
    /* 32 hex digits, or zeros when the server does not know it: "". */
    memcpy(dst, src, RIO_PROTO_ETAG_LEN);
    dst[RIO_PROTO_ETAG_LEN] = '\0';
    for (size_t i = 0; i < RIO_PROTO_ETAG_LEN; i++)
        if (!((dst[i] >= '0' && dst[i] <= '9') || (dst[i] >= 'a' && dst[i] <= 'f'))) {
            dst[0] = '\0';
            break;
        }
}

static int check_desc(const uint8_t *body, size_t len)
{
    struct rio_proto_desc d;
    return rio__proto_dec_desc(body, len, &d);
}

static int check_open_resp(const uint8_t *body, size_t len)
{
    struct rio_proto_put_open_resp r;
    return rio__proto_dec_put_open_resp(body, len, &r);
}

static int check_commit_resp(const uint8_t *body, size_t len)
{
    struct rio_proto_put_commit_resp r;
    return rio__proto_dec_put_commit_resp(body, len, &r);
}

/*
 * The fixed fields of a LOOKUP answer whose checksum list was not kept
 * (ctl_len bytes in all): checked as rio__proto_dec_desc checks a whole one,
 * so that nothing of the answer is taken on trust. 0 or RIO_EPROTO.
 */
static int desc_fixed(const uint8_t *body, size_t len, uint64_t ctl_len, struct rio_proto_desc *d)
{
    if (len < TCP_DESC_FIXED || ctl_len < TCP_DESC_FIXED)
        return RIO_EPROTO;
    d->generation = rio__proto_u64(body);
    d->size = rio__proto_u64(body + 8);
    d->chunk_size = rio__proto_u64(body + 16);
    d->nchunks = rio__proto_u64(body + 24);
    memcpy(d->etag, body + 32, sizeof(d->etag));
    d->xxh = NULL;
    if (d->generation == 0 || (ctl_len - TCP_DESC_FIXED) / 8 != d->nchunks ||
        (ctl_len - TCP_DESC_FIXED) % 8 != 0)
        return RIO_EPROTO;
    if (d->size == 0)
        return d->nchunks == 0 ? 0 : RIO_EPROTO;
    if (d->chunk_size == 0 || d->chunk_size > TCP_CHUNK_MAX ||
        d->nchunks != (d->size - 1) / d->chunk_size + 1)
        return RIO_EPROTO;
    return 0;
}

/*
 * A LOOKUP answer carries one checksum per chunk: up to
 * TCP_LOOKUP_MAX_CHUNKS of them (64 MiB), whatever the object. A caller
 * that takes no object over max_size (a GET into a buffer) needs at most
 * one checksum per RIO__DESC_CHUNK_MIN bytes of it (the engine refuses
 * smaller chunks): only that much of the answer is kept, the rest read
 * into the frame check and dropped, and the descriptor of a larger object
 * comes without its list (transport.h). The list that is kept becomes the
 * descriptor's in the buffer it arrived in, not a copy.
 */
int rio__tcp_lookup_within(struct rio_transport *tt, const char *key, uint64_t max_size,
                           struct rio_desc *out)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    uint8_t kb[2 + RIO_KEY_MAX];
    struct rio_proto_desc d;
    struct iovec iov;
    uint64_t *xxh = NULL;
    size_t klen;
    int n, ret;

    if (!out)
        return RIO_EINVAL;
    n = key_body(key, kb, sizeof(kb), &klen);
    if (n < 0)
        return n;
    struct ctl_req rq =
        rio__tcp_body_req(RIO_OP_LOOKUP, &iov, kb, n, TCP_DESC_FIXED + 8ull * TCP_LOOKUP_MAX_CHUNKS,
                          t->o.op_timeout_ms);
    rq.idempotent = true;
    rq.check = check_desc;
    if (max_size / RIO__DESC_CHUNK_MIN < TCP_LOOKUP_MAX_CHUNKS)
        rq.keep = TCP_DESC_FIXED + 8 * ((max_size + RIO__DESC_CHUNK_MIN - 1) / RIO__DESC_CHUNK_MIN);
    struct ctl_many it = {.rq = &rq};
    ret = rio__tcp_ctl_call_many(t, &t->members[rio__tcp_owner_of(t, key, klen)], &it, 1);
    if (ret < 0)
        return ret;
    ret = it.ret;
    if (ret < 0)
        goto out;
    if (it.h.status != 0) {
        ret = wire_status(it.h.status);
        goto out;
    }
    ret = RIO_EPROTO;
    if (it.ctl_len != it.h.body_len) {
        /* The list was cut: only an object larger than the caller takes
         * may have a list that long (or one of chunks the engine refuses:
         * no use for it either). */
        if (desc_fixed(it.body, it.h.body_len, it.ctl_len, &d) < 0)
            goto out;
        if (d.size <= max_size) {
            rio__detail("railio:// server descriptor: %" PRIu64 " chunks of %" PRIu64
                        " bytes (under the smallest chunk size taken)",
                        d.nchunks, d.chunk_size);
            goto out;
        }
    } else if (rio__proto_dec_desc(it.body, it.h.body_len, &d) < 0) {
        goto out;
    }
    memset(out, 0, sizeof(*out));
    memcpy(out->key, key, klen + 1);
    out->generation = d.generation;
    out->size = d.size;
    out->chunk_size = d.chunk_size;
    out->nchunks = d.nchunks;
    rio__tcp_etag_out(out->etag, d.etag);
    if (d.xxh && d.nchunks) {
        /* In place: entry i moves from byte 64 + 8i to byte 8i, so each is
         * read before anything overwrites it; the fixed fields were
         * copied out above. Then the buffer is cut to the list. */
        xxh = (uint64_t *)(void *)it.body;
        for (uint64_t i = 0; i < d.nchunks; i++)
            xxh[i] = rio__proto_u64(it.body + TCP_DESC_FIXED + 8 * i);
        void *small = rio__realloc(it.body, (size_t)d.nchunks * sizeof(*xxh));
        if (small)
            xxh = small;
        it.body = NULL;
    }
    out->xxh = xxh;
    ret = 0;
out:
    rio__free(it.body);
    return ret;
}

int rio__tcp_lookup(struct rio_transport *tt, const char *key, struct rio_desc *out)
{
    return rio__tcp_lookup_within(tt, key, UINT64_MAX, out);
}

int rio__tcp_put_open(struct rio_transport *tt, const char *key, uint64_t size, uint64_t chunk_size,
                      void **upload)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    uint8_t b[20 + 2 + RIO_KEY_MAX], *body = NULL;
    struct rio_proto_put_open po;
    struct rio_proto_put_open_resp r;
    struct iovec iov;
    struct rio_proto_hdr h;
    struct tcp_upload *up;
    struct tcp_member *m;
    unsigned mi;
    size_t klen;
    int n, ret;

    ret = rio__key_len(key, &klen);
    if (ret < 0)
        return ret;
    if (!upload || chunk_size == 0 || chunk_size > TCP_CHUNK_MAX)
        return RIO_EINVAL;
    up = rio__calloc(1, sizeof(*up));
    if (!up)
        return -ENOMEM;
    mi = rio__tcp_owner_of(t, key, klen);
    m = &t->members[mi];
    memset(&po, 0, sizeof(po));
    po.size = size;
    po.chunk_size = chunk_size;
    po.ttl_ms = t->ttl_ms;
    po.key = key;
    po.key_len = (uint16_t)klen;
    n = rio__proto_enc_put_open(&po, b, sizeof(b));
    ret = RIO_EINVAL;
    if (n < 0)
        goto err;
    struct ctl_req rq =
        rio__tcp_body_req(RIO_OP_PUT_OPEN, &iov, b, n, RIO_PROTO_CTRL_MAX, t->o.op_timeout_ms);
    rq.idempotent = true; /* an orphaned upload is reclaimed by the server */
    rq.check = check_open_resp;
    if (size == RIO_SIZE_UNKNOWN)
        rq.need_cap = RIO_PROTO_CAP_STREAM_PUT; /* a server of the disk tier, or older: ENOTSUP */
    ret = rio__tcp_ctl_call(t, m, &rq, &h, &body);
    if (ret < 0)
        goto err;
    if (h.status != 0)
        ret = wire_status(h.status);
    else if (rio__proto_dec_put_open_resp(body, h.body_len, &r) < 0)
        ret = RIO_EPROTO;
    rio__free(body);
    if (ret < 0)
        goto err;
    up->magic = UPLOAD_MAGIC;
    up->member = mi;
    up->id = r.upload_id;
    up->size = size;
    up->chunk_size = chunk_size;
    up->nchunks = size == RIO_SIZE_UNKNOWN ? 0 : size ? (size - 1) / chunk_size + 1 : 0;
    /* A chunk the server would refuse as too large: say so now. */
    pthread_mutex_lock(&m->ctl_mu);
    uint32_t max_body = m->ctl_max_body;
    pthread_mutex_unlock(&m->ctl_mu);
    if (max_body && size && chunk_size + TCP_PUT_FIXED + RIO_PROTO_TAG_LEN > max_body) {
        t->base.ops->put_abort(&t->base, up);
        return -EMSGSIZE;
    }
    *upload = up;
    return 0;
err:
    rio__free(up);
    return ret;
}

static void upload_free(struct tcp_upload *up)
{
    up->magic = 0;
    rio__free(up);
}

/* A commit's request body for up and d, in *b (rio__malloc) and its
 * length; an error when d does not match the upload (nothing sent). */
static int commit_body(struct tcp_upload *up, struct rio_desc *d, uint8_t **b, int *len)
{
    struct rio_proto_put_commit pc;
    size_t blen;
    int n;

    *b = NULL;
    if (d && up->size == RIO_SIZE_UNKNOWN && d->size != RIO_SIZE_UNKNOWN &&
        d->chunk_size == up->chunk_size &&
        d->nchunks == (d->size ? (d->size - 1) / up->chunk_size + 1 : 0)) {
        /* The size arrived: the server checks the chunks it got are
         * exactly these (all whole but the last, none after it). */
        up->size = d->size;
        up->nchunks = d->nchunks;
    }
    if (!d || (up->nchunks && !d->xxh) || d->nchunks != up->nchunks || d->size != up->size ||
        d->chunk_size != up->chunk_size || up->nchunks > (SIZE_MAX - 48) / 8)
        return RIO_EINVAL;
    blen = 48 + (size_t)up->nchunks * 8 + (up->put_if ? 8 : 0);
    *b = rio__malloc(blen);
    if (!*b)
        return -ENOMEM;
    memset(&pc, 0, sizeof(pc));
    pc.upload_id = up->id;
    pc.nchunks = up->nchunks;
    pc.if_gen = up->put_if;
    /* An unknown etag travels as zeros. */
    memset(pc.etag, 0, sizeof(pc.etag));
    memcpy(pc.etag, d->etag, strnlen(d->etag, sizeof(pc.etag)));
    n = rio__proto_enc_put_commit(&pc, d->xxh, *b, blen);
    if (n < 0) {
        rio__free(*b);
        *b = NULL;
        return RIO_EINVAL;
    }
    *len = n;
    return 0;
}

static struct ctl_req commit_req(const struct tcp_transport *t, const struct tcp_upload *up,
                                 struct iovec *iov, uint8_t *b, int n)
{
    struct ctl_req rq =
        rio__tcp_body_req(RIO_OP_PUT_COMMIT, iov, b, n, RIO_PROTO_CTRL_MAX, t->o.op_timeout_ms);
    /* The commit is idempotent by upload id (docs/protocol.md): the server
     * remembers which generation an upload became. */
    rq.idempotent = true;
    rq.check = check_commit_resp;
    /* A condition goes only to a server that said it takes one (put_expect
     * checked; a server restarted since as an older one: RIO_ENOTSUP). */
    if (up->put_if)
        rq.need_cap = RIO_PROTO_CAP_COND_COMMIT;
    return rq;
}

/* The caps m's server said in its last HELLO (0 before any). */
static uint32_t member_caps(struct tcp_member *m)
{
    pthread_mutex_lock(&m->ctl_mu);
    uint32_t caps = m->ctl_caps;
    pthread_mutex_unlock(&m->ctl_mu);
    return caps;
}

/* put_expect: only with a server whose HELLO said it decides conditions
 * (railiod without a disk tier). Asked once the upload is open, so the
 * member's control connection has its HELLO. */
int rio__tcp_put_expect(struct rio_transport *tt, void *upload, uint64_t gen)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_upload *up = upload;

    if (!up || up->magic != UPLOAD_MAGIC || !gen)
        return RIO_EINVAL;
    if (!(member_caps(&t->members[up->member]) & RIO_PROTO_CAP_COND_COMMIT)) {
        rio__detail("railio://: this server does not take conditional commits (a server with "
                    "--disk, or an older one)");
        return RIO_ENOTSUP;
    }
    up->put_if = gen;
    return 0;
}

/* put_one: a server that said PUT_ONE in the HELLO of the key's member's
 * control connection (the first PUT to it dials that connection: it goes
 * the three-exchange way), and a frame within its max_body. */
bool rio__tcp_put_one(struct rio_transport *tt, const char *key, uint64_t size, uint64_t chunk_size)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    size_t klen;

    if (!t->put_one || rio__key_len(key, &klen) < 0 || size == 0 || size > chunk_size ||
        chunk_size > TCP_CHUNK_MAX)
        return false;
    struct tcp_member *m = &t->members[rio__tcp_owner_of(t, key, klen)];
    if (atomic_load(&m->put_one_off))
        return false;
    pthread_mutex_lock(&m->ctl_mu);
    bool ok = (m->ctl_caps & RIO_PROTO_CAP_PUT_ONE) &&
              size + RIO_PROTO_ONE_FIXED + klen + RIO_PROTO_TAG_LEN <= m->ctl_max_body;
    pthread_mutex_unlock(&m->ctl_mu);
    return ok;
}

/* get_one: a server that said GET_ONE in the HELLO of the key's member's
 * control connection (until it is greeted, GETs go the two-exchange way),
 * for a buffer a READ may fill. */
bool rio__tcp_get_one(struct rio_transport *tt, const char *key, uint64_t cap)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    size_t klen;

    if (!t->get_one || rio__key_len(key, &klen) < 0 || cap == 0 || cap > TCP_CHUNK_MAX)
        return false;
    struct tcp_member *m = &t->members[rio__tcp_owner_of(t, key, klen)];
    if (atomic_load(&m->get_one_off))
        return false;
    pthread_mutex_lock(&m->ctl_mu);
    bool ok = (m->ctl_caps & RIO_PROTO_CAP_GET_ONE) != 0;
    pthread_mutex_unlock(&m->ctl_mu);
    return ok;
}

/* What a commit's exchange (ret, h, body: freed here) means for up and d;
 * asked: an earlier try had reached the server. Consumes up unless the
 * result is of a retryable class. */
static int commit_result(struct tcp_upload *up, struct rio_desc *d, int ret, bool sent, bool asked,
                         const struct rio_proto_hdr *h, uint8_t *body)
{
    struct rio_proto_put_commit_resp r;

    if (ret < 0) {
        /* The commit reached the server and what became of it cannot be
         * learnt: it may have been applied, and only the caller can decide
         * (RIO_EUNKNOWN). That is the case when the question asked again
         * got no answer either, or when an earlier try had reached the
         * server and this one got no answer. Only a first loss whose
         * question again could not even connect is left to the engine's
         * next try (the upload stays); a try that never reached the server
         * returns its dial's error, and the engine may try again. */
        if (asked || (up->commit_sent && sent))
            ret = RIO_EUNKNOWN;
    } else if (h->status == RIO_ENOTFOUND || h->status == -ENOENT) {
        ret = RIO_ENOUPLOAD; /* reclaimed, aborted or never there: not committed */
    } else if (h->status != 0) {
        ret = wire_status(h->status); /* RIO_ETHROTTLE to a first commit: busy, ask later */
    } else if (rio__proto_dec_put_commit_resp(body, h->body_len, &r) < 0) {
        ret = RIO_EPROTO;
    } else {
        d->generation = r.generation;
    }
    rio__free(body);
    /* A retryable class leaves the upload to the engine, which commits it
     * again or aborts it (RIO_CAP_COMMIT_RETRY); anything else consumes it. */
    if (ret < 0 && rio__class_is_retryable(rio__err_class(ret)))
        return ret;
    upload_free(up);
    return ret;
}

/*
 * A commit asked again after its answer was lost may find the server still
 * applying it (RIO_ETHROTTLE: its disk tier writes the object): it may
 * well be published, so it is not left to the engine as a retryable
 * failure, which says nothing was published and ends in an abort once the
 * engine's tries run out. It is asked again here, after a backoff, until
 * it settles (its generation, or "no such upload" when it failed), within
 * the op timeout times the retry count (the span the server remembers a
 * commit for, docs/protocol.md) and the call's deadline, until its cancel;
 * still pending then, RIO_EUNKNOWN.
 */
static int commit_settle(struct tcp_transport *t, struct tcp_member *m, struct tcp_upload *up,
                         const struct ctl_req *rq, int ret, struct rio_proto_hdr *h, uint8_t **body,
                         bool *sent, bool *asked)
{
    unsigned tries = t->o.retry_attempts ? t->o.retry_attempts : 1;
    uint64_t until = rio__now_ns() + (uint64_t)t->o.op_timeout_ms * tries * NS_PER_MS;
    uint64_t backoff_ms = 10, left_ms = 10;
    /* The call's deadline and cancel end the wait too (an unknown outcome). */
    uint64_t deadline = rio__meta_settle_deadline_ns();
    const struct rio_cancel *cx = rio__meta_settle_cancel();

    if (deadline < until)
        until = deadline;
    while (ret == 0 && h->status == RIO_ETHROTTLE && up->commit_sent) {
        uint64_t now = rio__now_ns();
        if (now >= until || rio__cancel_fired(cx)) {
            rio__detail("railio://: the server was still applying the commit when the %s",
                        rio__cancel_fired(cx) ? "call was cancelled"
                        : now >= deadline     ? "call's deadline passed"
                                              : "op timeout times the retries ran out");
            return RIO_EUNKNOWN; /* commit_result: asked, no answer */
        }
        /* The backoff (10 ms doubling to 1 s) in slices of at most 10 ms:
         * a cancel is seen soon. */
        uint64_t slice_ms = min_u64(left_ms, 10);
        uint64_t ns = min_u64(slice_ms * NS_PER_MS, until - now);
        struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000ull),
                              .tv_nsec = (long)(ns % 1000000000ull)};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
            ;
        left_ms -= slice_ms;
        if (left_ms > 0)
            continue;
        backoff_ms = backoff_ms < 1000 ? backoff_ms * 2 : 1000;
        left_ms = backoff_ms;
        rio__free(*body);
        *body = NULL;
        *asked = true;
        ret = rio__tcp_ctl_call_sent(t, m, rq, h, body, sent);
    }
    return ret;
}

int rio__tcp_put_commit(struct rio_transport *tt, void *upload, struct rio_desc *d)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_upload *up = upload;
    struct iovec iov;
    struct rio_proto_hdr h;
    uint8_t *b = NULL, *body = NULL;
    int n, ret;

    if (!up || up->magic != UPLOAD_MAGIC)
        return RIO_EINVAL;
    ret = commit_body(up, d, &b, &n);
    if (ret < 0) {
        t->base.ops->put_abort(tt, up);
        return ret;
    }
    struct ctl_req rq = commit_req(t, up, &iov, b, n);
    struct tcp_member *m = &t->members[up->member];
    bool sent = false, asked = up->commit_sent; /* an earlier try reached the server */
    ret = rio__tcp_ctl_call_sent(t, m, &rq, &h, &body, &sent);
    if (ret < 0 && sent && !asked) {
        /* The request went out and its answer was lost: the protocol's way
         * to learn what became of it is to ask once more, by the same
         * upload id, on a fresh connection (the server answers the
         * generation it committed, RIO_ETHROTTLE while it still applies
         * it, or no such upload). Trying again after a failure is the
         * engine's (RIO_CAP_COMMIT_RETRY). */
        up->commit_sent = true;
        ret = rio__tcp_ctl_call_sent(t, m, &rq, &h, &body, &sent);
    }
    ret = commit_settle(t, m, up, &rq, ret, &h, &body, &sent, &asked);
    rio__free(b);
    return commit_result(up, d, ret, sent, asked, &h, body);
}

/*
 * put_commit of n uploads at once (core/meta.c: a call worker commits the
 * PUTs that are ready together): the requests of each member go in one
 * rio__tcp_ctl_call_many, so they share rounds and their caller wakes once.
 * Each result is what put_commit returns for it; one whose answer was lost
 * goes through put_commit (its question asked again there).
 */
void rio__tcp_put_commit_many(struct rio_transport *tt, void **uploads, struct rio_desc **ds,
                              int *rets, unsigned n)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_many_commit {
        struct iovec iov;
        struct ctl_req rq;
        uint8_t *b;
        bool asked;
    } *mc = rio__calloc(n, sizeof(*mc));
    struct ctl_many *it = rio__calloc(n, sizeof(*it));
    unsigned *idx = rio__calloc(n, sizeof(*idx));

    if (!mc || !it || !idx) {
        rio__free(mc);
        rio__free(it);
        rio__free(idx);
        for (unsigned i = 0; i < n; i++)
            rets[i] = rio__tcp_put_commit(tt, uploads[i], ds[i]);
        return;
    }
    for (unsigned i = 0; i < n; i++) {
        struct tcp_upload *up = uploads[i];
        int len;
        rets[i] = RIO_EINVAL;
        if (!up || up->magic != UPLOAD_MAGIC)
            continue;
        rets[i] = commit_body(up, ds[i], &mc[i].b, &len);
        if (rets[i] < 0) {
            t->base.ops->put_abort(tt, up);
            uploads[i] = NULL;
            continue;
        }
        mc[i].rq = commit_req(t, up, &mc[i].iov, mc[i].b, len);
        mc[i].asked = up->commit_sent;
        rets[i] = 1; /* to send */
    }
    for (unsigned mi = 0; mi < t->nmembers; mi++) {
        unsigned k = 0;
        for (unsigned i = 0; i < n; i++)
            if (rets[i] == 1 && ((struct tcp_upload *)uploads[i])->member == mi) {
                it[k].rq = &mc[i].rq;
                idx[k++] = i;
            }
        if (!k)
            continue;
        int ret = rio__tcp_ctl_call_many(t, &t->members[mi], it, k);
        for (unsigned j = 0; j < k; j++) {
            unsigned i = idx[j];
            struct tcp_upload *up = uploads[i];
            if (ret < 0) {
                rets[i] = rio__tcp_put_commit(tt, up, ds[i]);
            } else if (it[j].ret < 0 && it[j].sent && !mc[i].asked) {
                /* Its answer was lost: asked once more, as put_commit does. */
                struct rio_proto_hdr h;
                uint8_t *body = NULL;
                bool sent = false, asked = false;
                rio__free(it[j].body);
                up->commit_sent = true;
                int r = rio__tcp_ctl_call_sent(t, &t->members[mi], &mc[i].rq, &h, &body, &sent);
                r = commit_settle(t, &t->members[mi], up, &mc[i].rq, r, &h, &body, &sent, &asked);
                rets[i] = commit_result(up, ds[i], r, sent, asked, &h, body);
            } else {
                rets[i] = commit_result(up, ds[i], it[j].ret, it[j].sent, mc[i].asked, &it[j].h,
                                        it[j].body);
            }
        }
    }
    for (unsigned i = 0; i < n; i++)
        rio__free(mc[i].b);
    rio__free(mc);
    rio__free(it);
    rio__free(idx);
}

/*
 * Best effort and bounded: one try, the dial (when the server closed the
 * idle control connection while the upload's chunks streamed) and the
 * exchange each within TCP_ABORT_TIMEOUT_MS. The server would reclaim an
 * upload nobody commits only after --upload-timeout (its data connections
 * keep it attached): the abort frees its memory now.
 */
void rio__tcp_put_abort(struct rio_transport *tt, void *upload)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_upload *up = upload;
    struct rio_proto_put_abort pa;
    struct rio_proto_hdr h;
    uint8_t b[8], *body = NULL;
    int n;

    if (!up || up->magic != UPLOAD_MAGIC)
        return;
    pa.upload_id = up->id;
    n = rio__proto_enc_put_abort(&pa, b, sizeof(b));
    if (n > 0) {
        struct iovec iov;
        struct ctl_req rq = rio__tcp_body_req(
            RIO_OP_PUT_ABORT, &iov, b, n, RIO_PROTO_CTRL_MAX,
            t->o.op_timeout_ms < TCP_ABORT_TIMEOUT_MS ? t->o.op_timeout_ms : TCP_ABORT_TIMEOUT_MS);
        rq.dial_ms = TCP_ABORT_TIMEOUT_MS;
        if (rio__tcp_ctl_call(t, &t->members[up->member], &rq, &h, &body) == 0)
            rio__free(body);
    }
    upload_free(up);
}

/* DELETE of key, only of generation gen when not 0 (a server with
 * RIO_PROTO_CAP_COND_DELETE). */
static int remove_gen(struct tcp_transport *t, const char *key, uint64_t gen)
{
    uint8_t kb[2 + RIO_KEY_MAX + 8], *body = NULL;
    struct iovec iov;
    struct rio_proto_hdr h;
    size_t klen;
    int n, ret;

    ret = rio__key_len(key, &klen);
    if (ret < 0)
        return ret;
    struct rio_proto_delete dm = {.key = key, .key_len = (uint16_t)klen, .if_gen = gen};
    n = rio__proto_enc_delete(&dm, kb, sizeof(kb));
    if (n < 0)
        return RIO_EINVAL;
    struct tcp_member *m = &t->members[rio__tcp_owner_of(t, key, klen)];
    if (gen) {
        uint32_t caps = member_caps(m);
        /* Known only once the member's control connection said HELLO: an
         * unknown one is asked by need_cap below, before the request goes. */
        if (caps && !(caps & RIO_PROTO_CAP_COND_DELETE)) {
            rio__detail("railio://: this server does not remove on a condition (a server with "
                        "--disk, or an older one)");
            return RIO_ENOTSUP;
        }
    }
    struct ctl_req rq =
        rio__tcp_body_req(RIO_OP_DELETE, &iov, kb, n, RIO_PROTO_CTRL_MAX, t->o.op_timeout_ms);
    if (gen)
        rq.need_cap = RIO_PROTO_CAP_COND_DELETE;
    bool sent = false;
    ret = rio__tcp_ctl_call_sent(t, m, &rq, &h, &body, &sent);
    /* A DELETE is never repeated: a second one would say "no such object"
     * for a delete that worked, or remove what a PUT wrote in between. So
     * once its request reached the server, no answer is an unknown outcome
     * (RIO_EUNKNOWN, which the engine does not retry); unsent, the dial's
     * error, which it may. */
    if (ret < 0)
        return sent ? RIO_EUNKNOWN : ret;
    rio__free(body);
    return h.status ? wire_status(h.status) : 0;
}

int rio__tcp_remove(struct rio_transport *tt, const char *key)
{
    return remove_gen((struct tcp_transport *)tt, key, 0);
}

int rio__tcp_remove_if(struct rio_transport *tt, const char *key, uint64_t gen)
{
    return gen ? remove_gen((struct tcp_transport *)tt, key, gen) : RIO_EINVAL;
}
