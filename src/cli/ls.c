/* SPDX-License-Identifier: Apache-2.0 */
/*
 * railio ls: one level under a prefix (common prefixes shown as DIR/), or
 * with -r every key beneath it; railio cat: objects to stdout in order.
 * Both take wildcards in the last path element. A failed write to stdout
 * fails the command.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/tree.h"

static const char ls_usage[] =
    "usage: railio ls [-r] [-v] [--json] [--page-size N] [--unsorted] URL[/PREFIX]...\n"
    "  List one level under PREFIX (common prefixes end in '/'), or with -r every key\n"
    "  beneath it, in byte order of key. The last path element may hold wildcards: * ? [...].\n"
    "  Human output: size, modified time (UTC) and key per line; --json: one object per\n"
    "  line. --page-size N asks the backend for at most N entries per page. --unsorted:\n"
    "  the backend's own order, cheaper on rados:// (the pool's order: no scan of every\n"
    "  name under PREFIX for each page). -v: how many entries and pages, on stderr.\n";

/* The key and a newline; on a terminal, the bytes of control characters
 * (a hostile key's escape sequences, C0 and C1) as '?', as ls(1) does.
 * --json keeps every byte. */
static void put_key(const char *k)
{
    static int tty = -1;
    const unsigned char *p = (const unsigned char *)k;
    if (tty < 0)
        tty = isatty(1);
    while (*p) {
        size_t n = tty ? rio_cli_ctl_len(p) : 0;
        if (!n) {
            putchar(*p++);
            continue;
        }
        for (; n; n--, p++)
            putchar('?');
    }
    putchar('\n');
}

static void ls_print(const struct rio_entry *e, bool json)
{
    char t[64];
    bool dir = e->flags & RIO_ENTRY_DIR;
    if (json) {
        rio_cli_json_begin(stdout, dir ? "prefix" : "object");
        rio_cli_json_kstr(stdout, "key", e->key);
        if (!dir) {
            rio_cli_json_ku64(stdout, "size", e->size);
            if (e->generation)
                rio_cli_json_kgen(stdout, "generation", e->generation);
            rio_cli_fmt_time(t, sizeof(t), e->mtime_ns, true);
            if (*t)
                rio_cli_json_kstr(stdout, "mtime", t);
            if (e->etag[0])
                rio_cli_json_kstr(stdout, "etag", e->etag);
        }
        rio_cli_json_end(stdout);
        return;
    }
    if (dir) {
        printf("%12s  %19s  ", "DIR", "");
        put_key(e->key);
        return;
    }
    rio_cli_fmt_time(t, sizeof(t), e->mtime_ns, false);
    printf("%12llu  %19s  ", (unsigned long long)e->size, t);
    put_key(e->key);
}

static int ls_one(const struct rio_cli_tree_opts *o, const char *arg, bool *stop)
{
    struct rio_cli_target t;
    struct rio_client *c;
    int rc = rio_cli_tree_open("ls", o, arg, RIO_CLI_TARGET_DIR, &t, &c);
    if (rc)
        return rc;
    struct rio_cli_lister l = {.c = c,
                               .prefix = t.prefix,
                               .pattern = t.glob ? t.path : NULL,
                               .recursive = o->recursive,
                               .sorted = !o->unsorted,
                               .max_keys = o->page_size};
    const struct rio_entry *e;
    int ret;
    uint64_t n = 0;
    while ((ret = rio_cli_lister_next(&l, &e)) > 0) {
        ls_print(e, o->json);
        n++;
        if (ferror(stdout)) {
            *stop = true;
            break;
        }
    }
    if (ret < 0) {
        char shown[1024];
        rio_cli_tree_error("ls", o, rio_cli_url_safe(arg, shown, sizeof(shown)), ret);
        rc = rio_cli_tree_exit(ret);
    }
    if (o->verbose && !o->json)
        fprintf(stderr, "ls: %llu entries in %llu pages\n", (unsigned long long)n,
                (unsigned long long)l.pages);
    rio_cli_lister_cleanup(&l);
    rio_client_destroy(c);
    rio_cli_target_cleanup(&t);
    return rc;
}

/* cmd's options, then one(arg) for each argument until one says stop; the
 * first failure's exit status. */
static int each_arg(const char *cmd, int argc, char **argv, const char *usage,
                    int (*one)(const struct rio_cli_tree_opts *o, const char *arg, bool *stop))
{
    struct rio_cli_tree_opts o;
    int rc = rio_cli_tree_opts_parse(cmd, argc, argv, &o, usage, 1);
    if (rc >= 0)
        return rc;
    if (!strcmp(cmd, "cat"))
        o.cl.data_stdout = 1; /* the objects' bytes are on stdout: JSON to stderr */
    rc = 0;
    bool stop = false;
    for (int i = 0; i < o.npos && !stop; i++) {
        int r = one(&o, o.pos[i], &stop);
        if (r && !rc)
            rc = r;
    }
    return rc; /* main() fails a write error on stdout */
}

int rio_cli_ls(int argc, char **argv)
{
    return each_arg("ls", argc, argv, ls_usage, ls_one);
}

/* ------------------------------------------------------------------ cat */

static const char cat_usage[] =
    "usage: railio cat URL/KEY...\n"
    "  Write each object to stdout, in the order given, every chunk verified before\n"
    "  its bytes are written. The last path element may hold wildcards (* ? [...]):\n"
    "  the objects one level under it that match, in key order.\n";

struct cat_out {
    int err; /* a write to stdout failed */
};

static int cat_write(void *arg, const void *data, size_t len)
{
    struct cat_out *co = arg;
    const char *p = data;
    while (len) {
        ssize_t w = write(1, p, len);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            co->err = -errno;
            return co->err;
        }
        p += w;
        len -= (size_t)w;
    }
    return 0;
}

/* One key to stdout; 0 or the exit status after a message. */
static int cat_key(const struct rio_cli_tree_opts *o, struct rio_client *c, const char *key,
                   bool *stop)
{
    struct cat_out co = {0};
    struct rio_call call = {.cancel = rio_cli_cancel_token(), .deadline_ms = rio_cli_deadline(c)};
    int64_t n = rio_get_stream(c, key, 0, cat_write, &co, &call);
    if (co.err) {
        *stop = true; /* nothing after this can reach the reader */
        return rio_cli_fail_rc(&o->cl, "writing", "stdout", co.err, RIO_CLI_EXIT_OUTPUT);
    }
    if (n < 0) {
        rio_cli_tree_error("cat", o, key, (int)n);
        return rio_cli_tree_exit((int)n);
    }
    return 0;
}

static int cat_one(const struct rio_cli_tree_opts *o, const char *arg, bool *stop)
{
    struct rio_cli_target t;
    struct rio_client *c;
    int rc = rio_cli_tree_open("cat", o, arg, 0, &t, &c);
    if (rc)
        return rc;
    if (!t.glob) {
        rc = cat_key(o, c, t.path, stop);
    } else {
        struct rio_cli_lister l = {.c = c, .prefix = t.prefix, .pattern = t.path, .sorted = true};
        const struct rio_entry *e;
        int ret;
        while ((ret = rio_cli_lister_next(&l, &e)) > 0) {
            if (e->flags & RIO_ENTRY_DIR)
                continue;
            int r = cat_key(o, c, e->key, stop);
            if (r && !rc)
                rc = r;
            if (*stop)
                break;
        }
        if (ret == 0 && !l.matched)
            ret = RIO_ENOTFOUND; /* a wildcard that matches nothing */
        if (ret < 0) {
            rio_cli_tree_error("cat", o, t.path, ret);
            rc = rc ? rc : rio_cli_tree_exit(ret);
        }
        rio_cli_lister_cleanup(&l);
    }
    rio_client_destroy(c);
    rio_cli_target_cleanup(&t);
    return rc;
}

int rio_cli_cat(int argc, char **argv)
{
    return each_arg("cat", argc, argv, cat_usage, cat_one);
}
