/* SPDX-License-Identifier: Apache-2.0 */
/*
 * rio_list, rio_exists_batch and rio_fsck: the engine's side of listing,
 * batch existence and the sweep of orphans (include/railio.h). rio_fsck is
 * the backend's alone (its layout decides what an orphan is): the engine
 * checks the arguments, applies the default grace and hands it over. Both run through the engine's
 * metadata retry (meta.c): one classifier, retry_attempts, backoff, the call's deadline and cancel
 * token.
 *
 * What a transport lists is hostile input like a descriptor (DESIGN.md,
 * invariant 9): every page is checked before the caller sees it (count,
 * keys terminated and under the prefix, byte order, token terminated), and
 * a page that breaks the contract fails the call with RIO_EPROTO and a
 * rio_error_detail that names the field.
 *
 * RIO_LIST_DELIM is the engine's for a transport that does not do it
 * (no RIO_CAP_LIST_DELIM): it lists without it and collapses every key at
 * its first '/' after the prefix into one common prefix. Such a listing
 * pages by key, not by the transport's token: the next_token it hands out
 * is the last entry it returned (a key, or a common prefix), and the next
 * page starts after it (after every key under it, for a common prefix).
 */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/alloc.h"
#include "core/clock.h"
#include "core/engine.h"
#include "core/internal.h"
#include "core/key.h"
#include "railio.h"

#define LIST_DEFAULT_KEYS 1000u
/* Empty pages a transport may return in a row (each one not the last)
 * before the engine takes it for a loop. */
#define LIST_EMPTY_MAX 64u

/* The bounds of a listing's metadata: the call's deadline and token. */
static void meta_bounds(struct rio_client *c, const struct rio_call *call, struct rio__meta *m)
{
    m->deadline_ns = rio__call_deadline_of(c, call, rio__now_ns());
    m->cancel = call ? call->cancel : NULL;
    m->call = NULL;
    m->put_if = 0;
    m->retries = NULL;
    m->progress = NULL;
}

static int list_args_check(const struct rio_list_args *a, size_t *plen)
{
    for (size_t i = 0; i < sizeof(a->reserved) / sizeof(a->reserved[0]); i++) {
        if (a->reserved[i]) {
            rio__detail("rio_list_args.reserved[%zu] is not zero", i);
            return RIO_EINVAL;
        }
    }
    if (a->flags & ~(RIO_LIST_DELIM | RIO_LIST_SORTED)) {
        rio__detail("rio_list_args.flags: unknown bits 0x%x",
                    a->flags & ~(RIO_LIST_DELIM | RIO_LIST_SORTED));
        return RIO_EINVAL;
    }
    *plen = a->prefix ? strnlen(a->prefix, RIO_KEY_MAX + 1) : 0;
    if (*plen > RIO_KEY_MAX) {
        rio__detail("rio_list_args.prefix: longer than %d bytes", RIO_KEY_MAX);
        return RIO_EINVAL;
    }
    if (a->token && strnlen(a->token, RIO_LIST_TOKEN_MAX + 1) > RIO_LIST_TOKEN_MAX) {
        rio__detail("rio_list_args.token: longer than %d bytes", RIO_LIST_TOKEN_MAX);
        return RIO_EINVAL;
    }
    if (a->start_after && strnlen(a->start_after, RIO_KEY_MAX + 1) > RIO_KEY_MAX) {
        rio__detail("rio_list_args.start_after: longer than %d bytes", RIO_KEY_MAX);
        return RIO_EINVAL;
    }
    return 0;
}

/* What a page was asked for: its checks. */
struct page_want {
    const char *prefix; /* "" for none */
    size_t plen;
    unsigned max_keys;
    const char *after; /* keys must sort after it ("" none, or unordered) */
    bool dirs;         /* RIO_ENTRY_DIR entries allowed (the transport's delim) */
    bool ordered;      /* byte order of keys checked */
};

/*
 * Check a page a transport returned. Returns 0, or RIO_EPROTO with
 * rio_error_detail naming the field.
 */
static int page_check(const struct rio_client *c, const struct page_want *w,
                      const struct rio_list_page *p)
{
    const char *scheme = c->url.scheme;

    if (p->n > w->max_keys) {
        rio__detail("%s list: %u entries for a page of at most %u", scheme, p->n, w->max_keys);
        return RIO_EPROTO;
    }
    if (p->n && !p->entries) {
        rio__detail("%s list: %u entries and no entries array", scheme, p->n);
        return RIO_EPROTO;
    }
    if (!memchr(p->next_token, '\0', sizeof(p->next_token))) {
        rio__detail("%s list: next_token not terminated", scheme);
        return RIO_EPROTO;
    }
    for (unsigned i = 0; i < p->n; i++) {
        const struct rio_entry *e = &p->entries[i];
        if (!memchr(e->key, '\0', sizeof(e->key))) {
            rio__detail("%s list: entries[%u].key not terminated within %d bytes", scheme, i,
                        RIO_KEY_MAX);
            return RIO_EPROTO;
        }
        if (!e->key[0]) {
            rio__detail("%s list: entries[%u].key is empty", scheme, i);
            return RIO_EPROTO;
        }
        if (strncmp(e->key, w->prefix, w->plen) != 0) {
            rio__detail("%s list: entries[%u].key does not start with the prefix", scheme, i);
            return RIO_EPROTO;
        }
        if (e->flags & ~RIO_ENTRY_DIR) {
            rio__detail("%s list: entries[%u].flags: unknown bits 0x%x", scheme, i, e->flags);
            return RIO_EPROTO;
        }
        if ((e->flags & RIO_ENTRY_DIR) &&
            (!w->dirs || e->key[strlen(e->key) - 1] != '/' || strlen(e->key) <= w->plen)) {
            rio__detail("%s list: entries[%u] is a common prefix %s", scheme, i,
                        w->dirs ? "that does not end in '/' after the prefix"
                                : "where none was asked for");
            return RIO_EPROTO;
        }
        if (!memchr(e->etag, '\0', sizeof(e->etag))) {
            rio__detail("%s list: entries[%u].etag not terminated", scheme, i);
            return RIO_EPROTO;
        }
        if (e->size > (uint64_t)INT64_MAX) {
            rio__detail("%s list: entries[%u].size out of range", scheme, i);
            return RIO_EPROTO;
        }
        if (!w->ordered)
            continue;
        const char *prev = i ? p->entries[i - 1].key : w->after;
        /* A common prefix that start_after lies under comes first. */
        bool under =
            !i && (e->flags & RIO_ENTRY_DIR) && prev && strncmp(prev, e->key, strlen(e->key)) == 0;
        if (prev && prev[0] && !under && strcmp(e->key, prev) <= 0) {
            rio__detail("%s list: entries[%u].key not after %s in byte order", scheme, i,
                        i ? "the one before it" : "start_after");
            return RIO_EPROTO;
        }
    }
    return 0;
}

/* One page from the transport, with the engine's retry, checked. */
static int list_page(struct rio_client *c, const struct rio__meta *m,
                     const struct rio_list_args *ta, const struct page_want *w,
                     struct rio_list_page *out)
{
    int ret = rio__meta_list(c, m, ta, out);
    if (ret < 0)
        return ret;
    ret = page_check(c, w, out);
    if (ret < 0)
        rio_list_page_cleanup(out);
    return ret;
}

/* Where a key of the listing under a prefix of plen bytes collapses with
 * RIO_LIST_DELIM: the length of its common prefix (through the first '/'
 * after the prefix), or 0 when it stays a key. */
static size_t delim_len(const char *key, size_t plen)
{
    const char *slash = strchr(key + plen, '/');
    return slash ? (size_t)(slash - key) + 1 : 0;
}

/*
 * RIO_LIST_DELIM for a transport without it: pages of plain keys in byte
 * order, each key below a '/' after the prefix folded into its common
 * prefix, until the page has max_keys entries or the listing ends. Each
 * transport page is asked for no more entries than the page still has
 * room for, so a page never ends inside one of the transport's.
 */
static int list_delim(struct rio_client *c, const struct rio__meta *m,
                      const struct rio_list_args *a, const struct page_want *w0,
                      struct rio_list_page *out)
{
    struct rio_list_args ta;
    struct rio_list_page tp;
    struct page_want w = *w0;
    char *cursor; /* list after it: the last key seen, or a common prefix skipped */
    char last_cp[RIO_KEY_MAX + 1] = ""; /* the common prefix last emitted */
    char ttoken[RIO_LIST_TOKEN_MAX + 1] = "";
    unsigned empty = 0;
    int ret;

    cursor = rio__malloc(RIO_KEY_MAX + 1);
    if (!cursor)
        return -ENOMEM;
    cursor[0] = '\0';
    out->entries = rio__calloc(w.max_keys, sizeof(*out->entries));
    if (!out->entries) {
        ret = -ENOMEM;
        goto err_cursor;
    }
    /* A token of this mode is the last entry a page returned; a common
     * prefix (it ends in its first '/' after the prefix) is skipped whole. */
    if (a->token && a->token[0]) {
        size_t tlen = strlen(a->token);
        size_t cl = tlen > w.plen && strncmp(a->token, w.prefix, w.plen) == 0
                        ? delim_len(a->token, w.plen)
                        : 0;
        if (tlen > RIO_KEY_MAX) {
            rio__detail("rio_list_args.token: not a token of this listing");
            ret = RIO_EINVAL;
            goto err_entries;
        }
        if (cl == tlen) {
            rio__key_skip_past(cursor, a->token, tlen);
            memcpy(last_cp, a->token, tlen + 1);
        } else {
            memcpy(cursor, a->token, tlen + 1);
        }
    } else if (a->start_after) {
        memcpy(cursor, a->start_after, strlen(a->start_after) + 1);
    }

    for (;;) {
        memset(&ta, 0, sizeof(ta));
        ta.prefix = w.prefix;
        ta.max_keys = w0->max_keys - out->n;
        if (ttoken[0])
            ta.token = ttoken;
        else
            ta.start_after = cursor;
        w.max_keys = ta.max_keys;
        w.after = ttoken[0] ? "" : cursor;
        ret = list_page(c, m, &ta, &w, &tp);
        if (ret < 0)
            goto err_entries;
        for (unsigned i = 0; i < tp.n; i++) {
            const char *k = tp.entries[i].key;
            size_t cl = delim_len(k, w.plen);
            if (!cl) {
                memcpy(cursor, k, strlen(k) + 1);
                out->entries[out->n++] = tp.entries[i];
                continue;
            }
            /* Go on after every key under its common prefix, not through
             * them (a transport that answered more of them than it was
             * asked to skip is skipped past too). */
            rio__key_skip_past(cursor, k, cl);
            if (last_cp[0] && strncmp(k, last_cp, cl) == 0 && last_cp[cl] == '\0')
                continue;
            struct rio_entry *e = &out->entries[out->n++];
            memset(e, 0, sizeof(*e));
            memcpy(e->key, k, cl);
            e->flags = RIO_ENTRY_DIR;
            memcpy(last_cp, k, cl);
            last_cp[cl] = '\0';
        }
        bool more = tp.next_token[0] != '\0';
        if (more && tp.n == 0) {
            /* The transport's own way on, for once: the key cursor did not
             * move. */
            if (++empty > LIST_EMPTY_MAX) {
                rio__detail("%s list: %u empty pages in a row", c->url.scheme, empty);
                rio_list_page_cleanup(&tp);
                ret = RIO_EPROTO;
                goto err_entries;
            }
            memcpy(ttoken, tp.next_token, sizeof(ttoken));
        } else {
            empty = 0;
            ttoken[0] = '\0';
        }
        rio_list_page_cleanup(&tp);
        if (!more)
            break;
        if (out->n == w0->max_keys) {
            const char *lk = out->entries[out->n - 1].key;
            memcpy(out->next_token, lk, strlen(lk) + 1);
            break;
        }
    }
    rio__free(cursor);
    return 0;
err_entries:
    rio_list_page_cleanup(out);
err_cursor:
    rio__free(cursor);
    return ret;
}

/* Pages of a listing in byte order whose tokens the client remembers:
 * the token a transport hands back is its own (S3's continuation token),
 * so without it the engine could not tell a server that sends the same
 * pages again, by tokens that go round in a circle, from one that goes on;
 * `railio ls -r` against such a server listed one key 57,000 times in
 * 10 s and never ended. An empty page that is not the last carries no key
 * to order by: its token is remembered with the last key before it and
 * the count of empty pages in a row, so tokens that circle through empty
 * pages (83,000 requests in 10 s, never ending) stop after
 * LIST_EMPTY_MAX of them, as list_delim's do. */
#define TOK_MEM 16u

struct rio__tok_mem {
    unsigned next;
    struct {
        uint64_t h;     /* 0: empty */
        unsigned empty; /* empty pages in a row that led to this token */
        char last[RIO_KEY_MAX + 1];
    } e[TOK_MEM];
};

static uint64_t tok_hash(const char *tok)
{
    uint64_t h = rio__xxh3(tok, strlen(tok));
    return h ? h : 1;
}

/* The last key of the page token continues (into last) and the empty
 * pages in a row before it (into *empty), or false. */
static bool tok_recall(struct rio_client *c, const char *tok, char *last, unsigned *empty)
{
    uint64_t h = tok_hash(tok);
    bool found = false;

    pthread_mutex_lock(&c->mu);
    for (unsigned i = 0; c->toks && i < TOK_MEM && !found; i++)
        if (c->toks->e[i].h == h) {
            memcpy(last, c->toks->e[i].last, sizeof(c->toks->e[i].last));
            *empty = c->toks->e[i].empty;
            found = true;
        }
    pthread_mutex_unlock(&c->mu);
    return found;
}

/* p's token, with its last key (or, for an empty page, the last key
 * before it: prev) and the empty pages in a row that led to it. */
static void tok_remember(struct rio_client *c, const struct rio_list_page *p, const char *prev,
                         unsigned empty)
{
    struct rio__tok_mem *fresh = NULL;

    if (!p->next_token[0])
        return;
    if (!c->toks)
        fresh = rio__calloc(1, sizeof(*fresh));
    pthread_mutex_lock(&c->mu);
    if (!c->toks) {
        c->toks = fresh;
        fresh = NULL;
    }
    if (c->toks) {
        /* A token met again takes its old slot: a circle's tokens come
         * round with a new count, and recall must not find the old one. */
        uint64_t h = tok_hash(p->next_token);
        unsigned i = TOK_MEM;
        for (unsigned k = 0; k < TOK_MEM && i == TOK_MEM; k++)
            if (c->toks->e[k].h == h)
                i = k;
        if (i == TOK_MEM)
            i = c->toks->next++ % TOK_MEM;
        c->toks->e[i].h = h;
        c->toks->e[i].empty = empty;
        snprintf(c->toks->e[i].last, sizeof(c->toks->e[i].last), "%s",
                 p->n ? p->entries[p->n - 1].key : prev);
    }
    pthread_mutex_unlock(&c->mu);
    rio__free(fresh);
}

/* A page in byte order after a token of this client's: it begins after the
 * last key of the page that token came with. */
static int list_page_after(struct rio_client *c, const struct rio__meta *m,
                           const struct rio_list_args *ta, const struct page_want *w,
                           struct rio_list_page *out)
{
    char *last = NULL;
    unsigned empty = 0;
    bool known = false;
    int ret;

    if (w->ordered) {
        last = rio__malloc(RIO_KEY_MAX + 1);
        if (!last)
            return -ENOMEM;
        known = ta->token && tok_recall(c, ta->token, last, &empty);
        /* Nothing known before this page: the next one is held to no key
         * (start_after is the first page's check, and a common prefix
         * that start_after lies under may come before it). */
        if (!known)
            last[0] = '\0';
    }
    ret = list_page(c, m, ta, w, out);
    if (ret == 0 && known && out->n && strcmp(out->entries[0].key, last) <= 0) {
        rio__detail("%s list: the page after a token begins with a key at or before the last "
                    "one of the page that gave the token (the listing went back)",
                    c->url.scheme);
        rio_list_page_cleanup(out);
        ret = RIO_EPROTO;
    }
    if (ret == 0 && !out->n && out->next_token[0] && ++empty > LIST_EMPTY_MAX) {
        rio__detail("%s list: %u empty pages in a row, none the last", c->url.scheme, empty);
        rio_list_page_cleanup(out);
        ret = RIO_EPROTO;
    }
    if (ret == 0 && w->ordered)
        tok_remember(c, out, last, out->n ? 0 : empty);
    rio__free(last);
    return ret;
}

int rio_list(struct rio_client *c, const struct rio_list_args *a, struct rio_list_page *out,
             const struct rio_call *call)
{
    struct rio_list_args ta;
    struct page_want w;
    struct rio__meta m;
    size_t plen;
    int ret;

    rio__detail_clear();
    if (out)
        memset(out, 0, sizeof(*out));
    if (!a || !out || rio__client_unusable(c))
        return RIO_EINVAL;
    ret = list_args_check(a, &plen);
    if (ret < 0)
        return ret;
    ta = *a;
    if (ta.max_keys == 0)
        ta.max_keys = LIST_DEFAULT_KEYS;
    if (ta.max_keys > RIO_LIST_PAGE_MAX)
        ta.max_keys = RIO_LIST_PAGE_MAX;
    if (!ta.prefix)
        ta.prefix = "";
    if (ta.token && !ta.token[0])
        ta.token = NULL;
    if (ta.token || (ta.start_after && !ta.start_after[0]))
        ta.start_after = NULL; /* the token says where; start_after is the first page's */

    bool unordered = rio__t_has_cap(c->t, RIO_CAP_LIST_UNORDERED);
    bool own_delim = rio__t_has_cap(c->t, RIO_CAP_LIST_DELIM);
    if (!unordered)
        ta.flags &= ~RIO_LIST_SORTED; /* in byte order anyway */
    else if (ta.flags & RIO_LIST_SORTED)
        unordered = false; /* the transport sorts: its pages are checked for order */
    w = (struct page_want){.prefix = ta.prefix,
                           .plen = plen,
                           .max_keys = ta.max_keys,
                           .after = ta.start_after ? ta.start_after : "",
                           .dirs = (ta.flags & RIO_LIST_DELIM) && own_delim,
                           .ordered = !unordered};
    meta_bounds(c, call, &m);
    if (!(ta.flags & RIO_LIST_DELIM) || own_delim)
        return list_page_after(c, &m, &ta, &w, out);
    if (!rio__t_ops(c->t)->list)
        return RIO_ENOTSUP;
    if (unordered) {
        /* Folding keys into common prefixes needs them in byte order. */
        rio__detail("%s list: RIO_LIST_DELIM needs a listing in byte order", c->url.scheme);
        return RIO_ENOTSUP;
    }
    return list_delim(c, &m, &ta, &w, out);
}

void rio_list_page_cleanup(struct rio_list_page *p)
{
    if (!p)
        return;
    rio__free(p->entries);
    memset(p, 0, sizeof(*p));
}

/* Lookups in parallel for a transport without an exists op. */
struct exists_job {
    struct rio_client *c;
    const struct rio__meta *m;
    const char *const *keys;
    uint8_t *out;
    _Atomic int err; /* the first error other than RIO_ENOTFOUND */
};

static void exists_one(void *arg, unsigned i)
{
    struct exists_job *j = arg;
    struct rio_desc d;

    if (atomic_load(&j->err))
        return; /* the call has failed: the rest is not worth asking */
    memset(&d, 0, sizeof(d));
    int ret = rio__meta_lookup(j->c, j->m, j->keys[i], UINT64_MAX, &d, NULL);
    if (ret >= 0) {
        rio_desc_cleanup(&d);
        j->out[i] = 1;
    } else if (ret == RIO_ENOTFOUND) {
        j->out[i] = 0;
    } else {
        int zero = 0;
        atomic_compare_exchange_strong(&j->err, &zero, ret);
    }
}

/* The exists op, in slices the transport accepts; each answer byte checked. */
static int exists_op(struct rio_client *c, const struct rio__meta *m, const char *const *keys,
                     unsigned n, uint8_t *out)
{
    for (unsigned off = 0; off < n;) {
        unsigned k = n - off < RIO_LIST_PAGE_MAX ? n - off : RIO_LIST_PAGE_MAX;
        /* 2 is neither answer: a byte the transport did not write shows. */
        memset(out + off, 2, k);
        int ret = rio__meta_exists(c, m, keys + off, k, out + off);
        if (ret < 0)
            return ret;
        for (unsigned i = 0; i < k; i++) {
            if (out[off + i] > 1) {
                rio__detail("%s exists: answer[%u] is %u, not 0 or 1", c->url.scheme, off + i,
                            out[off + i]);
                return RIO_EPROTO;
            }
        }
        off += k;
    }
    return 0;
}

int rio_exists_batch(struct rio_client *c, const char *const *keys, unsigned n, uint8_t *exists,
                     unsigned *prefix_hits, const struct rio_call *call)
{
    struct rio__meta m;
    uint8_t *out = exists;
    unsigned count = 0, hits = 0;
    int ret = 0;

    rio__detail_clear();
    if ((n && !keys) || rio__client_unusable(c))
        return RIO_EINVAL;
    if (n > INT_MAX) {
        rio__detail("rio_exists_batch: %u keys, more than %d", n, INT_MAX);
        return RIO_EINVAL;
    }
    for (unsigned i = 0; i < n; i++) {
        ret = rio__key_check(keys[i]);
        if (ret < 0) {
            char why[96];
            snprintf(why, sizeof(why), "%s", rio_error_detail());
            rio__detail("rio_exists_batch: keys[%u]: %s", i, why);
            return ret;
        }
    }
    if (prefix_hits)
        *prefix_hits = 0;
    if (n == 0)
        return 0;
    if (!out) {
        out = rio__malloc(n);
        if (!out)
            return -ENOMEM;
    }
    meta_bounds(c, call, &m);
    ret = rio__t_has_exists(c->t) ? exists_op(c, &m, keys, n, out) : RIO_ENOTSUP;
    /* A filter stacked over a backend without the op says so. */
    if (ret == RIO_ENOTSUP) {
        struct exists_job j = {.c = c, .m = &m, .keys = keys, .out = out};
        atomic_init(&j.err, 0);
        rio__meta_parallel(c, n, n, exists_one, &j);
        ret = atomic_load(&j.err);
    }
    if (ret < 0)
        goto out;
    for (unsigned i = 0; i < n; i++) {
        count += out[i];
        if (hits == i && out[i])
            hits++;
    }
    if (prefix_hits)
        *prefix_hits = hits;
    ret = (int)count;
out:
    if (out != exists)
        rio__free(out);
    return ret;
}

int rio_fsck(struct rio_client *c, const struct rio_fsck_args *a, struct rio_fsck_report *out)
{
    struct rio_fsck_args args;

    rio__detail_clear();
    if (!a || !out || rio__client_unusable(c))
        return RIO_EINVAL;
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < sizeof(a->reserved) / sizeof(a->reserved[0]); i++)
        if (a->reserved[i]) {
            rio__detail("rio_fsck: reserved[%zu] is not zero", i);
            return RIO_EINVAL;
        }
    if (a->flags & ~(RIO_FSCK_DRY_RUN | RIO_FSCK_GRACE | RIO_FSCK_INDEX)) {
        rio__detail("rio_fsck: unknown flags 0x%x",
                    a->flags & ~(RIO_FSCK_DRY_RUN | RIO_FSCK_GRACE | RIO_FSCK_INDEX));
        return RIO_EINVAL;
    }
    args = *a;
    if (!(args.flags & RIO_FSCK_GRACE))
        args.grace_ns = RIO_FSCK_GRACE_DEFAULT_NS;
    args.flags |= RIO_FSCK_GRACE;
    int ret = rio__t_fsck(c->t, &args, out);
    if (ret == RIO_ENOTSUP)
        rio__detail("this backend stores nothing an interrupted upload could leave behind; "
                    "only rados:// has chunk objects to check");
    return ret;
}
