/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio ls, cat and rm of several keys or a prefix. Listings go page by
 * page through rio_list (a page at most --page-size entries), so memory does
 * not grow with the store; wildcards in the last path element list only what
 * shares their literal prefix and keep what matches.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tree.h"
#include "core/secret.h"

/* ------------------------------------------------------------ targets */

void rio_cli_target_cleanup(struct rio_cli_target *t)
{
    rio__secret_free(t->client_url);
    free(t->path);
    free(t->prefix);
    memset(t, 0, sizeof(*t));
}

/* mkdir -p of an absolute path; 0 or -errno. */
static int mkdir_p(const char *path)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof(buf))
        return -ENAMETOOLONG;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(buf, 0755) < 0 && errno != EEXIST)
            return -errno;
        *p = '/';
    }
    if (mkdir(buf, 0755) < 0 && errno != EEXIST)
        return -errno;
    return 0;
}

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

const char *rio_cli_query_start(const char *s)
{
    for (const char *q = strchr(s, '?'); q; q = strchr(q + 1, '?')) {
        const char *n = q + 1;
        while ((*n >= 'a' && *n <= 'z') || (*n >= 'A' && *n <= 'Z') || (*n >= '0' && *n <= '9') ||
               *n == '_' || *n == '-' || *n == '.')
            n++;
        if (n > q + 1 && *n == '=')
            return q;
    }
    return NULL;
}

/* The client URL (scheme "://" authority, then query) and the key path. */
static int target_split(const char *arg, unsigned flags, char **curl, char **path, const char **why)
{
    const char *sep = strstr(arg, "://");
    if (!sep || sep == arg) {
        *why = "expected SCHEME://AUTHORITY/KEY";
        return RIO_EURL;
    }
    const char *rest = sep + 3, *q = rio_cli_query_start(rest);
    const char *end = q ? q : rest + strlen(rest);
    const char *slash = memchr(rest, '/', (size_t)(end - rest));
    const char *cut = slash ? slash : end;    /* client URL ends here */
    const char *kp = slash ? slash + 1 : end; /* the key path starts here */
    bool file = sep - arg == 4 && !strncmp(arg, "file", 4);
    char *dir = NULL;
    if (file && slash) {
        /* file:///DIR/PATH: a directory is the store root (TARGET_DIR), else
         * the root is the path up to its last '/' and the rest the key. */
        dir = strndup(slash, (size_t)(end - slash));
        if (!dir)
            return -ENOMEM;
        const char *w = flags & RIO_CLI_TARGET_LITERAL ? NULL : rio_cli_glob_first(dir);
        bool glob = w != NULL;
        if (w && strchr(w, '/')) {
            free(dir);
            *why = "wildcards are allowed in the last path element only";
            return RIO_EINVAL;
        }
        if ((flags & RIO_CLI_TARGET_MKDIR) && !glob && !is_dir(dir)) {
            int ret = mkdir_p(dir);
            if (ret < 0) {
                free(dir);
                *why = "cannot create the destination directory";
                return ret;
            }
        }
        if ((flags & RIO_CLI_TARGET_DIR) && !glob && is_dir(dir)) {
            cut = end;
            kp = end;
        } else {
            const char *last = slash;
            for (const char *c = slash; c < end; c++)
                if (*c == '/')
                    last = c;
            cut = last == slash ? slash + 1 : last; /* file:///NAME: the root is / */
            kp = last + 1;
        }
        free(dir);
    }
    size_t klen = (size_t)(end - kp);
    if (klen > RIO_KEY_MAX) {
        *why = "the key is longer than 1024 bytes";
        return RIO_EINVAL;
    }
    *curl = rio_cli_client_url(arg, (size_t)(cut - arg), q);
    *path = strndup(kp, klen);
    if (!*curl || !*path) {
        rio__secret_free(*curl);
        free(*path);
        return -ENOMEM;
    }
    return 0;
}

int rio_cli_target_parse(const char *arg, unsigned flags, struct rio_cli_target *t,
                         const char **why)
{
    memset(t, 0, sizeof(*t));
    *why = "";
    int ret = target_split(arg, flags, &t->client_url, &t->path, why);
    if (ret < 0)
        return ret;
    const char *w = flags & RIO_CLI_TARGET_LITERAL ? NULL : rio_cli_glob_first(t->path);
    if (w && strchr(w, '/')) {
        *why = "wildcards are allowed in the last path element only";
        rio_cli_target_cleanup(t);
        return RIO_EINVAL;
    }
    t->glob = w != NULL;
    size_t n = strlen(t->path) + 1;
    t->prefix = malloc(n);
    if (!t->prefix) {
        rio_cli_target_cleanup(t);
        return -ENOMEM;
    }
    if (flags & RIO_CLI_TARGET_LITERAL) {
        memcpy(t->prefix, t->path, n);
        return 0;
    }
    rio_cli_glob_prefix(t->path, t->prefix, n);
    /* Without a wildcard the path names one key (or a prefix): its `\`
     * quoting taken off ('a\?b' is the key "a?b", as the pattern 'a[?]b'
     * is), not a key with a backslash in it. */
    if (!t->glob)
        memcpy(t->path, t->prefix, strlen(t->prefix) + 1);
    return 0;
}

/* ------------------------------------------------------------ listing */

/* Whether the element of key at the pattern's depth (the key cut at the
 * first '/' after the pattern's directory part) matches it. */
static bool pattern_keeps(const char *pattern, const char *key)
{
    const char *pslash = strrchr(pattern, '/');
    size_t dl = pslash ? (size_t)(pslash - pattern + 1) : 0;
    size_t kl = strlen(key);
    if (kl < dl)
        return false;
    const char *e = strchr(key + dl, '/');
    size_t n = e ? (size_t)(e - key) : kl;
    char elem[RIO_KEY_MAX + 1];
    if (n > RIO_KEY_MAX)
        return false;
    memcpy(elem, key, n);
    elem[n] = '\0';
    return rio_cli_glob_match(pattern, elem, false);
}

/* struct rio_cli_seen (tree.h): FNV-1a of s. */
static uint64_t fnv(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

int rio_cli_seen_add(struct rio_cli_seen *set, const char *s)
{
    if (2 * (set->n + 1) > set->cap) {
        size_t nc = set->cap ? set->cap * 2 : 64;
        char **nv = calloc(nc, sizeof(*nv));
        if (!nv)
            return -ENOMEM;
        for (size_t i = 0; i < set->cap; i++) {
            if (!set->v[i])
                continue;
            size_t h = fnv(set->v[i]) & (nc - 1);
            while (nv[h])
                h = (h + 1) & (nc - 1);
            nv[h] = set->v[i];
        }
        free(set->v);
        set->v = nv;
        set->cap = nc;
    }
    size_t h = fnv(s) & (set->cap - 1);
    for (; set->v[h]; h = (h + 1) & (set->cap - 1))
        if (!strcmp(set->v[h], s))
            return 0;
    set->v[h] = strdup(s);
    if (!set->v[h])
        return -ENOMEM;
    set->n++;
    return 1;
}

void rio_cli_seen_cleanup(struct rio_cli_seen *set)
{
    for (size_t i = 0; i < set->cap; i++)
        free(set->v[i]);
    free(set->v);
    memset(set, 0, sizeof(*set));
}

/*
 * Whether the common prefix p is shown now: 1 the first time, 0 when it
 * was, or -ENOMEM. In a listing in byte order (sorted) a prefix's repeats
 * follow one another (every key that sorts between two of them lies under
 * it and is folded into it), so the one shown last is all it keeps: a
 * bucket of a million directories listed one level down costs no more
 * memory than one of ten. In the backend's own order (rados://, ls
 * --unsorted) it keeps every prefix shown (memory grows with their number,
 * not with the keys').
 */
static int dir_first(struct rio_cli_lister *l, const char *p)
{
    if (!l->sorted)
        return rio_cli_seen_add(&l->seen, p);
    size_t n = strlen(p);
    if (n >= sizeof(l->last_dir))
        return 1; /* no key is that long */
    if (!strcmp(l->last_dir, p))
        return 0;
    memcpy(l->last_dir, p, n + 1);
    return 1;
}

/*
 * One level of a backend that cannot fold keys into common prefixes
 * itself (no RIO_LIST_DELIM): the lister does, over the whole listing,
 * showing each prefix once (dir_first). x is a key of the listing; *e
 * what to show, or NULL.
 */
static int fold(struct rio_cli_lister *l, const struct rio_entry *x, const struct rio_entry **e)
{
    size_t pl = strlen(l->prefix ? l->prefix : "");
    const char *slash = strchr(x->key + pl, '/');
    *e = x;
    if (!slash)
        return 0;
    memset(&l->dir, 0, sizeof(l->dir));
    memcpy(l->dir.key, x->key, (size_t)(slash - x->key) + 1);
    l->dir.flags = RIO_ENTRY_DIR;
    int ret = dir_first(l, l->dir.key);
    *e = ret > 0 ? &l->dir : NULL;
    return ret < 0 ? ret : 0;
}

int rio_cli_lister_next(struct rio_cli_lister *l, const struct rio_entry **e)
{
    for (;;) {
        if (rio_cli_interrupted())
            return RIO_ECANCELED;
        while (l->i < l->page.n) {
            const struct rio_entry *x = &l->page.entries[l->i++];
            if (l->fold) {
                int ret = fold(l, x, &x);
                if (ret < 0)
                    return ret;
                if (!x)
                    continue;
            } else if (x->flags & RIO_ENTRY_DIR) {
                /* A backend that folds each page on its own (one listing
                 * in its own order, rados://) may name a prefix on several
                 * pages: show it once. */
                int ret = dir_first(l, x->key);
                if (ret < 0)
                    return ret;
                if (ret == 0)
                    continue;
            }
            if (l->pattern && !pattern_keeps(l->pattern, x->key))
                continue;
            l->matched++;
            *e = x;
            return 1;
        }
        if (l->last)
            return 0;
        struct rio_list_args a;
        memset(&a, 0, sizeof(a));
        a.prefix = l->prefix;
        a.token = l->started ? l->token : NULL;
        a.max_keys = l->max_keys;
        a.flags =
            (l->recursive || l->fold ? 0 : RIO_LIST_DELIM) | (l->sorted ? RIO_LIST_SORTED : 0);
        struct rio_list_page next;
        memset(&next, 0, sizeof(next));
        struct rio_call call = {.cancel = rio_cli_cancel_token()};
        int ret = rio_list(l->c, &a, &next, &call);
        if (ret == RIO_ENOTSUP && !l->started && (a.flags & RIO_LIST_DELIM)) {
            /* No RIO_LIST_DELIM here: fold the full listing. Once: a
             * backend that lists nothing at all (http://, file:// with
             * single=1) refused the next try too, which came here again
             * for ever at full CPU. */
            l->fold = true;
            continue;
        }
        if (ret < 0)
            return ret;
        /* A backend that hands back the token it was given would loop
         * forever: refuse it. */
        if (l->started && next.next_token[0] && !strcmp(next.next_token, l->token)) {
            rio_list_page_cleanup(&next);
            return RIO_EPROTO;
        }
        rio_list_page_cleanup(&l->page);
        l->pages++;
        l->page = next;
        l->i = 0;
        l->started = true;
        l->last = !l->page.next_token[0];
        memcpy(l->token, l->page.next_token, sizeof(l->token));
    }
}

void rio_cli_lister_cleanup(struct rio_cli_lister *l)
{
    rio_list_page_cleanup(&l->page);
    rio_cli_seen_cleanup(&l->seen);
}

/* --------------------------------------------------------------- pool */

struct pool {
    pthread_mutex_t mu;
    size_t next, n;
    void (*fn)(void *arg, size_t i);
    void *arg;
};

static void *pool_main(void *a)
{
    struct pool *p = a;
    for (;;) {
        pthread_mutex_lock(&p->mu);
        size_t i = p->next < p->n ? p->next++ : p->n;
        pthread_mutex_unlock(&p->mu);
        if (i >= p->n || rio_cli_interrupted())
            return NULL; /* a signal: no new object starts */
        p->fn(p->arg, i);
    }
}

void rio_cli_pool_run(unsigned jobs, size_t n, void (*fn)(void *arg, size_t i), void *arg)
{
    struct pool p = {.mu = PTHREAD_MUTEX_INITIALIZER, .n = n, .fn = fn, .arg = arg};
    pthread_t th[64];
    unsigned nt = 0;
    if (jobs > 64)
        jobs = 64;
    if (jobs > n)
        jobs = (unsigned)n;
    for (unsigned i = 1; i < jobs; i++)
        if (pthread_create(&th[nt], NULL, pool_main, &p) == 0)
            nt++;
    pool_main(&p); /* this thread works too; with no thread it does it all */
    for (unsigned i = 0; i < nt; i++)
        pthread_join(th[i], NULL);
}

/* ------------------------------------------------- what the verbs share */

/* A count option's value in lo..hi; -1 after naming the mistake. */
static int opt_uint(const struct rio_cli *cl, const char *name, const char *v, unsigned lo,
                    unsigned hi, unsigned *out)
{
    char *end;
    errno = 0;
    unsigned long x = strtoul(v, &end, 10);
    if (!*v || *end || errno || x < lo || x > hi || v[0] == '-') {
        rio_cli_usage_error(cl, "%s takes a number in %u..%u (got '%s')", name, lo, hi, v);
        return -1;
    }
    *out = (unsigned)x;
    return 0;
}

int rio_cli_tree_opts_parse(const char *cmd, int argc, char **argv, struct rio_cli_tree_opts *o,
                            const char *usage, int min_pos)
{
    int rec = 0, unsorted = 0;
    const char *page = NULL, *jobs = NULL, *gen = NULL;
    struct rio_cli_opt mine[5] = {
        {"--recursive", 'r', NULL, &rec, NULL},
        {"--page-size", 0, "N", NULL, &page},
        {"--jobs", 'j', "N", NULL, &jobs},
        {NULL, 0, NULL, NULL, NULL},
        {NULL, 0, NULL, NULL, NULL},
    };
    /* rm's and ls's own */
    if (strcmp(cmd, "rm") == 0)
        mine[3] = (struct rio_cli_opt){"--if-generation", 0, "G", NULL, &gen};
    else if (strcmp(cmd, "ls") == 0)
        mine[3] = (struct rio_cli_opt){"--unsorted", 0, NULL, &unsorted, NULL};
    memset(o, 0, sizeof(*o));
    o->jobs = 8;
    int rc = rio_cli_parse(&o->cl, cmd, usage, mine, min_pos, -1, argc, argv);
    if (rc >= 0)
        return rc;
    if (gen) {
        if (rio_cli_parse_generation(&o->cl, gen, &o->if_gen))
            return RIO_CLI_EXIT_USAGE;
        if (rec > 0 || o->cl.npos != 1)
            return rio_cli_usage_error(&o->cl, "--if-generation names one key: one operand, "
                                               "no -r");
    }
    o->recursive = rec > 0;
    o->unsorted = unsorted > 0;
    o->json = o->cl.json;
    o->quiet = o->cl.quiet;
    o->verbose = o->cl.verbose;
    o->pos = o->cl.pos;
    o->npos = o->cl.npos;
    if (page && opt_uint(&o->cl, "--page-size", page, 1, RIO_LIST_PAGE_MAX, &o->page_size) < 0)
        return RIO_CLI_EXIT_USAGE;
    if (jobs && opt_uint(&o->cl, "--jobs", jobs, 1, 64, &o->jobs) < 0)
        return RIO_CLI_EXIT_USAGE;
    return -1;
}

int rio_cli_tree_exit(int err)
{
    return rio_cli_exit_code(err);
}

void rio_cli_tree_error(const char *cmd, const struct rio_cli_tree_opts *o, const char *what,
                        int err)
{
    (void)cmd;
    rio_cli_fail(&o->cl, NULL, what, err);
}

int rio_cli_tree_open(const char *cmd, const struct rio_cli_tree_opts *o, const char *arg,
                      unsigned flags, struct rio_cli_target *t, struct rio_client **c)
{
    const char *why;
    (void)cmd;
    int ret = rio_cli_target_parse(arg, flags, t, &why);
    if (ret < 0) {
        if (ret != RIO_EURL && ret != RIO_EINVAL)
            return rio_cli_fail_sys(&o->cl, NULL, arg, ret);
        /* One line that names the argument and why (it was two: the
         * error's name, then the reason), then the usage. */
        char shown[1024];
        return rio_cli_usage_error(&o->cl, "%s: %s", rio_cli_url_safe(arg, shown, sizeof(shown)),
                                   *why ? why : "expected SCHEME://AUTHORITY/KEY");
    }
    ret = rio_client_new(t->client_url, NULL, c);
    if (ret < 0) {
        int rc = ret == RIO_EURL || ret == RIO_EINVAL ? RIO_CLI_EXIT_USAGE : rio_cli_exit_code(ret);
        rio_cli_fail(&o->cl, "opening", t->client_url, ret);
        rio_cli_target_cleanup(t);
        return rc;
    }
    return 0;
}

int rio_cli_tree_cmd(const char *cmd, int argc, char **argv)
{
    if (!strcmp(cmd, "ls"))
        return rio_cli_ls(argc, argv);
    if (!strcmp(cmd, "cat"))
        return rio_cli_cat(argc, argv);
    bool help = false;
    for (int i = 0; i < argc && strcmp(argv[i], "--"); i++)
        help |= !strcmp(argv[i], "-h") || !strcmp(argv[i], "--help");
    if (help && !strcmp(cmd, "cp")) {
        /* Both forms: the single object's usage, then the tree's. */
        int rc = rio_cli_objects(cmd, argc, argv);
        fputc('\n', stdout);
        return rc ? rc : rio_cli_cp_tree(argc, argv);
    }
    if (!help && !rio_cli_tree_wants(cmd, argc, argv))
        return rio_cli_objects(cmd, argc, argv);
    return !strcmp(cmd, "rm") ? rio_cli_rm_tree(argc, argv) : rio_cli_cp_tree(argc, argv);
}
