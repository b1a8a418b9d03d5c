/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio rm of several keys, of a prefix (-r) or of the keys a wildcard
 * matches: the keys are listed page by page and each page removed by a few
 * threads at once; every key that fails is named, the summary counts both,
 * and the exit status is the first failure's.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/tree.h"

static const char rm_usage[] =
    "usage: railio rm [-r] [-q] [-v] [--json] [--jobs N] [--page-size N] URL/KEY...\n"
    "       railio rm [-q] [-v] [--json] --if-generation G URL/KEY\n"
    "  Remove each KEY. With -r, URL/PREFIX removes every key beneath PREFIX/ (and the\n"
    "  key PREFIX itself). The last path element may hold wildcards (* ? [...]): the\n"
    "  keys one level under it that match (with -r: and everything beneath them).\n"
    "  Failures are reported per key; a summary line ends the run unless -q.\n"
    "  --if-generation G removes KEY only if its object is generation G (as stat\n"
    "  prints it; else exit 10, nothing removed).\n";

struct rm_run {
    const struct rio_cli_tree_opts *o;
    struct rio_client *c;
    char **keys; /* this batch */
    pthread_mutex_t mu;
    uint64_t removed, failed;
    int first_rc; /* the exit status of the first failure */
};

static void rm_key(void *arg, size_t i)
{
    struct rm_run *r = arg;
    const char *key = r->keys[i];
    int ret = r->o->if_gen ? rio_delete_if(r->c, key, r->o->if_gen) : rio_delete(r->c, key);
    pthread_mutex_lock(&r->mu);
    if (ret < 0) {
        r->failed++;
        if (!r->first_rc)
            r->first_rc = rio_cli_tree_exit(ret);
        if (ret == RIO_EGENERATION && r->o->if_gen)
            /* Not a change during the removal: the condition was not met. */
            rio_cli_fail_why(&r->o->cl, NULL, key, ret,
                             "--if-generation: the key's object is another generation; nothing "
                             "removed");
        else
            rio_cli_tree_error("rm", r->o, key, ret);
    } else {
        r->removed++;
        if (r->o->json) {
            rio_cli_json_begin(stdout, "removed");
            rio_cli_json_kstr(stdout, "key", key);
            rio_cli_json_end(stdout);
        } else if (r->o->verbose) {
            char shown[RIO_KEY_MAX + 16]; /* a hostile key's escapes as '?' */
            fprintf(stderr, "removed %s\n", rio_cli_url_safe(key, shown, sizeof(shown)));
        }
    }
    pthread_mutex_unlock(&r->mu);
}

static void rm_batch(struct rm_run *r, size_t n)
{
    rio_cli_pool_run(r->o->jobs, n, rm_key, r);
    for (size_t i = 0; i < n; i++) {
        free(r->keys[i]);
        r->keys[i] = NULL;
    }
}

#define RM_BATCH 1000

/* Everything the lister yields, a batch at a time; 0 or the listing error. */
static int rm_listed(struct rm_run *r, struct rio_cli_lister *l)
{
    const struct rio_entry *e;
    size_t n = 0;
    int ret;
    while ((ret = rio_cli_lister_next(l, &e)) > 0) {
        if (e->flags & RIO_ENTRY_DIR) {
            if (!r->o->quiet) {
                char shown[RIO_KEY_MAX + 16];
                fprintf(stderr, "railio rm: %s: a prefix, not removed (use -r)\n",
                        rio_cli_url_safe(e->key, shown, sizeof(shown)));
            }
            continue;
        }
        r->keys[n] = strdup(e->key);
        if (!r->keys[n]) {
            ret = -ENOMEM;
            break;
        }
        if (++n == RM_BATCH) {
            rm_batch(r, n);
            n = 0;
        }
    }
    rm_batch(r, n);
    return ret;
}

static void rm_one(struct rm_run *r, const char *arg)
{
    struct rio_cli_target t;
    const struct rio_cli_tree_opts *o = r->o;
    int rc = rio_cli_tree_open("rm", o, arg, RIO_CLI_TARGET_DIR, &t, &r->c);
    if (rc) {
        r->failed++;
        if (!r->first_rc)
            r->first_rc = rc;
        return;
    }
    int ret = 0;
    size_t pl = strlen(t.path);
    if (o->if_gen && t.glob) {
        fprintf(stderr, "railio rm: --if-generation names one key, not a wildcard\n");
        r->failed++;
        r->first_rc = r->first_rc ? r->first_rc : RIO_CLI_EXIT_USAGE;
    } else if (!t.glob && !o->recursive) {
        if (!pl) {
            fprintf(stderr, "railio rm: '%s' names no key (use -r for a whole store)\n", arg);
            r->failed++;
            r->first_rc = r->first_rc ? r->first_rc : RIO_CLI_EXIT_USAGE;
        } else {
            r->keys[0] = strdup(t.path);
            if (r->keys[0])
                rm_batch(r, 1);
            else
                ret = -ENOMEM;
        }
    } else {
        /* -r PREFIX: beneath PREFIX/, so `rm -r dir` leaves "dir2" alone. */
        char *tree = NULL;
        if (!t.glob && pl && t.path[pl - 1] != '/' && asprintf(&tree, "%s/", t.path) < 0)
            tree = NULL, ret = -ENOMEM;
        struct rio_cli_lister l = {.c = r->c,
                                   .prefix = tree ? tree : t.prefix,
                                   .pattern = t.glob ? t.path : NULL,
                                   .recursive = o->recursive,
                                   .max_keys = o->page_size};
        if (ret == 0)
            ret = rm_listed(r, &l);
        if (ret == 0 && t.glob && !l.matched)
            ret = RIO_ENOTFOUND; /* a wildcard that matches nothing, like rm(1) */
        rio_cli_lister_cleanup(&l);
        if (ret == 0 && tree) {
            int d = rio_delete(r->c, t.path); /* the key PREFIX itself, if any */
            if (d == 0)
                r->removed++;
        }
        free(tree);
    }
    if (ret < 0) {
        char shown[1024];
        rio_cli_tree_error("rm", o, rio_cli_url_safe(arg, shown, sizeof(shown)), ret);
        r->failed++;
        if (!r->first_rc)
            r->first_rc = rio_cli_tree_exit(ret);
    }
    rio_client_destroy(r->c);
    r->c = NULL;
    rio_cli_target_cleanup(&t);
}

int rio_cli_rm_tree(int argc, char **argv)
{
    struct rio_cli_tree_opts o;
    int rc = rio_cli_tree_opts_parse("rm", argc, argv, &o, rm_usage, 1);
    if (rc >= 0)
        return rc;
    struct rm_run r = {.o = &o, .mu = PTHREAD_MUTEX_INITIALIZER};
    r.keys = calloc(RM_BATCH, sizeof(*r.keys));
    if (!r.keys) {
        fprintf(stderr, "railio rm: out of memory\n");
        return 1;
    }
    for (int i = 0; i < o.npos && !rio_cli_interrupted(); i++)
        rm_one(&r, o.pos[i]);
    if (o.json) {
        rio_cli_json_begin(stdout, "rm_summary");
        rio_cli_json_ku64(stdout, "removed", r.removed);
        rio_cli_json_ku64(stdout, "failed", r.failed);
        rio_cli_json_end(stdout);
    } else if (!o.quiet && (o.recursive || o.npos > 1 || r.removed + r.failed > 1))
        fprintf(stderr, "rm: %llu removed, %llu failed\n", (unsigned long long)r.removed,
                (unsigned long long)r.failed);
    free(r.keys);
    return r.first_rc; /* main() fails a write error on stdout */
}
