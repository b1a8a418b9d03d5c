/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio://: open and close, the ops table, and the test hooks (tcp.h).
 * tcp_int.h has the overview and the file map.
 */
#include "core/secret.h"
#include "transport/tcp/tcp_int.h"

static void tcp_close(struct rio_transport *tt)
{
    struct tcp_transport *t = (struct tcp_transport *)tt;
    struct tcp_slot *s;

    if (!t)
        return;
    for (unsigned i = 0; i < t->nconns; i++) {
        struct tcp_conn *cn = &t->conns[i];
        rio__tls_cleanup(&cn->tls);
        if (cn->fd >= 0)
            close(cn->fd);
        rio__free(cn->ctrl);
        rio__proto_sess_free(&cn->sess);
        /* The engine closes only when nothing is in flight; tombstones
         * (answers still owed to cancelled ops) may remain. */
        while ((s = sl_pop(&cn->wq)))
            rio__free(s);
        while ((s = sl_pop(&cn->sq)))
            rio__free(s);
    }
    while ((s = sl_pop(&t->pending)))
        rio__free(s);
    while ((s = t->free_slots)) {
        t->free_slots = s->next;
        rio__free(s);
    }
    for (unsigned i = 0; i < t->nmembers; i++) {
        rio__tcp_ctl_close_locked(&t->members[i]);
        pthread_mutex_destroy(&t->members[i].ctl_mu);
    }
    if (t->epfd >= 0)
        close(t->epfd);
    if (t->evfd >= 0)
        close(t->evfd);
    pthread_mutex_destroy(&t->mu);
    rio__secret_free(t->token);
    rio__tls_ctx_free(t->tls_ctx);
    rio__free(t->tls_name);
    rio__free(t->discard);
    rio__free(t->conns);
    rio__free(t->members);
    rio__free(t);
}

/*
 * Greet every member on its control connection: this checks that it
 * answers and that the token is accepted, and learns its rails (unless
 * ?rails= names them). A member that does not answer keeps its URL address
 * as its one rail; open fails only when no member answers.
 */
static int greet_members(struct tcp_transport *t, bool explicit_rails)
{
    int first_err = 0;
    unsigned ok = 0;

    for (unsigned i = 0; i < t->nmembers; i++) {
        struct tcp_member *m = &t->members[i];
        struct hs_info hi;
        int ret;

        /* A greeting whose answer came damaged or cut is redone once on a
         * fresh connection, the protocol step a request on a reused
         * connection found closed gets (control.c); there is no loop of
         * tries and no backoff here: a server that is down, refuses
         * (-EACCES) or keeps failing fails the open, and trying again is
         * the caller's (rio_client_new). */
        for (unsigned n = 0;; n++) {
            pthread_mutex_lock(&m->ctl_mu);
            ret = rio__tcp_ctl_dial_locked(t, m, &hi);
            pthread_mutex_unlock(&m->ctl_mu);
            if (ret == 0 || n > 0 || !(ret == RIO_EPROTO || reset_class(ret)))
                break;
            rio__tcp_ctr_add(t, &t->ctr.ctl_retries, 1);
        }
        if (ret < 0) {
            if (!first_err)
                first_err = ret;
            if (ret == -EACCES || ret == RIO_EPROTO)
                return ret; /* a refusal, not an outage */
        } else {
            ok++;
            m->max_depth = hi.max_depth;
        }
        if (explicit_rails)
            continue;
        m->nrails = 0;
        for (unsigned k = 0; ret == 0 && k < hi.nrails; k++)
            if (rio__tcp_rail_from_text(m, hi.rail[k], &m->rail[m->nrails]) == 0)
                m->nrails++;
        if (m->nrails == 0) {
            m->rail[0] = m->url;
            m->nrails = 1;
        }
        rio__tcp_pair_rails_by_subnet(m);
    }
    return ok ? 0 : first_err;
}

static int tcp_open(const struct rio_url *u, const struct rio_options *o,
                    struct rio_transport **out)
{
    struct tcp_transport *t;
    unsigned maxr = 1, npaths;
    const char *rails;
    int ret;

    if (!u || !o || !out)
        return RIO_EINVAL;
    t = rio__calloc(1, sizeof(*t));
    if (!t)
        return -ENOMEM;
    t->base.ops = &rio__tcp_ops;
    t->o = *o;
    t->epfd = t->evfd = -1;
    ret = -pthread_mutex_init(&t->mu, NULL);
    if (ret < 0) {
        rio__free(t);
        return ret;
    }
    t->members = rio__calloc(TCP_MAX_MEMBERS, sizeof(*t->members));
    ret = -ENOMEM;
    if (!t->members)
        goto err;
    ret = rio__tcp_parse_params(t, u);
    if (ret < 0)
        goto err;
    ret = rio__tcp_parse_members(t, u->authority);
    if (ret < 0)
        goto err;
    rails = rio__url_param(u, "rails");
    if (rails) {
        ret = rio__tcp_parse_rails(t, rails);
        if (ret < 0)
            goto err;
    }
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->epfd < 0 || t->evfd < 0) {
        ret = -errno;
        goto err;
    }
    struct epoll_event e = {.events = EPOLLIN, .data.u64 = EV_WAKE};
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &e) < 0) {
        ret = -errno;
        goto err;
    }
    t->greeting = true;
    ret = greet_members(t, rails != NULL);
    t->greeting = false;
    if (ret < 0)
        goto err; /* a TLS failure is the caller's detail: not printed too */
    if (t->tls_held[0] && !atomic_exchange(&t->tls_said, true))
        fprintf(stderr, "railio: %s\n", t->tls_held); /* a member left out */

    for (unsigned i = 0; i < t->nmembers; i++)
        if (t->members[i].nrails > maxr)
            maxr = t->members[i].nrails;
    npaths = maxr * t->conns_per_rail;
    if (npaths > RIO_MAX_PATHS)
        npaths = RIO_MAX_PATHS;
    if (o->paths)
        npaths = o->paths;
    if (npaths < 1 || npaths > RIO_MAX_PATHS) {
        ret = RIO_EINVAL;
        goto err;
    }
    t->base.npaths = npaths;
    /* railiod takes 64 uploads open on one connection by default
     * (--max-uploads-per-conn): a call keeps fewer, room left for a
     * stream or another call beside it. */
    t->base.uploads_max = TCP_UPLOADS_AHEAD;
    t->conns = rio__calloc(t->nmembers * npaths, sizeof(*t->conns));
    ret = -ENOMEM;
    if (!t->conns)
        goto err;
    t->nconns = t->nmembers * npaths;
    for (unsigned mi = 0; mi < t->nmembers; mi++) {
        struct tcp_member *m = &t->members[mi];
        for (unsigned p = 0; p < npaths; p++) {
            struct tcp_conn *cn = &t->conns[mi * npaths + p];
            cn->t = t;
            cn->m = m;
            cn->rail = &m->rail[p % m->nrails];
            cn->idx = mi * npaths + p;
            cn->path = p;
            cn->fd = -1;
            /* Until its own greeting, a connection's window is what the
             * member announced at open. */
            cn->window = o->depth;
            if (m->max_depth && m->max_depth < cn->window)
                cn->window = m->max_depth;
        }
    }
    *out = &t->base;
    return 0;
err:
    tcp_close(&t->base);
    return ret;
}

static struct tcp_transport *tcp_cast(struct rio_transport *t)
{
    return t && t->ops == &rio__tcp_ops ? (struct tcp_transport *)t : NULL;
}

int rio__tcp_counters(struct rio_transport *tt, struct rio__tcp_counters *out)
{
    struct tcp_transport *t = tcp_cast(tt);

    if (!out)
        return RIO_EINVAL;
    memset(out, 0, sizeof(*out));
    if (!t)
        return RIO_EINVAL;
    pthread_mutex_lock(&t->mu);
    *out = t->ctr;
    pthread_mutex_unlock(&t->mu);
    out->ctl_queued = rio__tcp_ctl_queued(t);
    out->bytes_in = atomic_load_explicit(&t->bytes_in, memory_order_relaxed);
    out->bytes_out = atomic_load_explicit(&t->bytes_out, memory_order_relaxed);
    return 0;
}

void rio__tcp_reset_peaks(struct rio_transport *tt)
{
    struct tcp_transport *t = tcp_cast(tt);

    if (!t)
        return;
    pthread_mutex_lock(&t->mu);
    t->ctr.slots_peak = t->ctr.slots_armed;
    t->ctr.conns_peak = t->ctr.conns_open;
    pthread_mutex_unlock(&t->mu);
}

int rio__tcp_owner(struct rio_transport *tt, const char *key)
{
    struct tcp_transport *t = tcp_cast(tt);
    size_t klen;

    if (!t || rio__key_len(key, &klen) < 0)
        return -1;
    return (int)rio__tcp_owner_of(t, key, klen);
}

/* config.c and tcp_open read them; docs/protocol.md lists them. */
static const char *const tcp_url_options[] = {
    "rails",
    "conns",
    "connect_timeout",
    "user_timeout",
    "progress_timeout",
    "ttl",
    "dial_backoff",
    "dial_backoff_cap",
    "cancel_grace",
    "keepalive",
    "tls_verify",
    "tls_ca",
    "tls_name",
    "token",
    "token_file",
    "put_one",
    "get_one",
    NULL,
};

const struct rio_transport_ops rio__tcp_ops = {
    .scheme = "railio",
    .url_options = tcp_url_options,
    .caps = RIO_CAP_ETAG | RIO_CAP_COMMIT_RETRY | RIO_CAP_LIST_DELIM | RIO_CAP_STREAM_PUT |
            RIO_CAP_RANGE_READ,
    RIO_TRANSPORT_OPS(tcp_open, tcp_close, rio__tcp),
    .put_expect = rio__tcp_put_expect,
    .put_one = rio__tcp_put_one,
    .get_one = rio__tcp_get_one,
    .remove_if = rio__tcp_remove_if,
    .lookup_within = rio__tcp_lookup_within,
    .list = rio__tcp_list,
    .exists = rio__tcp_exists,
    .put_commit_many = rio__tcp_put_commit_many,
    .path_moved = rio__tcp_path_moved,
};
